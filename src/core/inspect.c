/*
 * inspect.c - what each stage of a chain leaves of a row: the public
 * sift_chain_survivors (since 0.2), which `sift inspect` shows stage by
 * stage.
 *
 * What it owns: sift_chain_survivors, which runs the first
 * n_stages non-selector stages over a whole row, as the sampling path
 * does, and writes the survivors in canonical order. It is a small copy of
 * chain.c's row loop (load, apply each stage, stop on an empty set):
 * chain.c keeps its loop static.
 *
 * Invariants: nothing of the chain changes (the RNG is a working copy that
 * is never committed, stage state is only read by apply); only the
 * chain's scratch buffers are written, as any sample call does.
 */
#include <math.h>
#include <string.h>

#include "../sift_internal.h"

sift_status sift_chain_survivors(sift_chain *c, const float *row, int32_t V, size_t n_stages,
                                 sift_candidate *out, size_t cap, size_t *n_out, sift_error *err)
{
    if (!c || !row || !n_out || (!out && cap))
        return sift__fail(err, SIFT_E_ARG, "NULL argument");
    *n_out = 0;
    if (c->busy)
        return sift__fail(err, SIFT_E_STATE, "chain is busy (called from one of its callbacks)");
    if (V < 1 || V > c->max_vocab || (c->n_vocab && V != c->n_vocab))
        return sift__fail(err, SIFT_E_ARG, "bad row length %d", (int)V);
    sift_status s = sift__chain_check_vocab(c, V, err);
    if (s)
        return s;
    if (n_stages > c->n_stages)
        return sift__fail(err, SIFT_E_ARG, "n_stages %zu exceeds the chain's %zu stages", n_stages,
                          c->n_stages);
    for (size_t i = 0; i < n_stages; i++) {
        const sift__stage *st = c->stages[i];
        if (st->ops->is_selector)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "stage %zu (%s) is a selector: use sift_chain_distribution", i,
                                 sift__stage_name(st));
        if (st->ops->max_token && st->ops->max_token(st) >= V)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "stage %zu (%s) refers to a token id >= %d", i,
                                 sift__stage_name(st), (int)V);
    }
    s = sift__ws_reserve(&c->ws, &c->al, (size_t)V, err);
    if (s)
        return s;
    int any = 0;
    for (int32_t i = 0; i < V; i++) {
        if (!(row[i] < INFINITY))
            return sift__row_error(row, V, err);
        any |= row[i] > -INFINITY;
        c->ws.cand[i].id = i;
        c->ws.cand[i].logit = row[i];
    }
    if (!any)
        return sift__row_error(row, V, err);
    sift__arr a = {c->ws.cand, (size_t)V, V, SIFT__ORDER_ID, 1};
    sift__ctx ctx = {
        .rng = c->rng, .ws = &c->ws, .err = err, .V = V, .selected = -1, .banned_at = SIZE_MAX};
    for (size_t i = 0; i < n_stages; i++) {
        sift__stage *st = c->stages[i];
        ctx.stage = i;
        if ((s = st->ops->apply(st, &ctx, &a)))
            return s;
        if (a.n == 0)
            return sift__fail_at(err, SIFT_E_NO_CANDIDATE, (int64_t)i,
                                 "stage %zu (%s) removed the last candidate", i,
                                 sift__stage_name(st));
    }
    /* Dropped -inf tokens are not survivors; keep the set canonical. */
    size_t m = 0;
    for (size_t i = 0; i < a.n; i++)
        if (a.c[i].logit > -INFINITY)
            a.c[m++] = a.c[i];
    if (a.order != SIFT__ORDER_CANON)
        sift__sort_canon(a.c, m, c->ws.cand2);
    if (m && cap) /* out may be NULL with cap = 0 */
        memcpy(out, a.c, (m < cap ? m : cap) * sizeof *out);
    *n_out = m;
    return SIFT_OK;
}

/*
 * inspect.c - what each stage of a chain leaves of a row: the public
 * sift_chain_survivors (since 0.2), which `sift inspect` shows stage by
 * stage.
 *
 * What it owns: sift_chain_survivors, which runs the first
 * n_stages non-selector stages over a whole row, as the sampling path
 * does, and writes the survivors in canonical order. The stages run in
 * the row step's own loop (sift__chain_run_stages in step.c: the same
 * row load, the same stage loop, the same stop on an empty set), so the
 * view cannot drift from what sampling does; this file only checks its
 * arguments and gathers the survivors.
 *
 * Invariants: nothing of the chain changes (the RNG is a working copy that
 * is never committed, stage state is only read by apply); only the
 * chain's scratch buffers are written, as any sample call does.
 */
#include <math.h>
#include <string.h>

#include "../sift_internal.h"

static sift_status survivors(sift_chain *c, const float *row, int32_t V, size_t n_stages,
                             sift_candidate *out, size_t cap, size_t *n_out, sift_error *err)
{
    if (!row || !n_out || (!out && cap))
        return sift__fail(err, SIFT_E_ARG, "NULL argument");
    *n_out = 0;
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
    sift__arr a;
    if ((s = sift__chain_run_stages(c, row, V, n_stages, &a, err)))
        return s;
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

/* Holds the chain: the stages it runs may be custom ones (caller code). */
sift_status sift_chain_survivors(sift_chain *c, const float *row, int32_t V, size_t n_stages,
                                 sift_candidate *out, size_t cap, size_t *n_out, sift_error *err)
{
    if (!c)
        return sift__fail(err, SIFT_E_ARG, "NULL argument");
    SIFT__CHAIN_SCRATCH_CALL(c, err, survivors(c, row, V, n_stages, out, cap, n_out, err));
}

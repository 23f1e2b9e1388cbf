/*
 * crosscheck.c - cross-check mode: some slice steps are compared with the
 * whole row, so that an operator finds a device kernel whose top-k is
 * wrong (sift_chain_set_cross_check; docs/analyzer.md, "Cross-check
 * mode").
 *
 * Owns the setting, the schedule and the check. sift_chain_sample_slice
 * calls sift__cross_check_begin before its step and sift__cross_check_end
 * after it; everything else lives here.
 *
 * Invariants:
 * - The chain's own RNG is never drawn from for the schedule: a due step
 *   is decided by a count and by a separate xoshiro stream (xc_rng), so
 *   tokens and every piece of sampling state are bitwise the same with
 *   the mode on or off (test_cross_check_on_or_off_gives_the_same_tokens
 *   in tests/check_slice.c).
 * - The schedule (xc_steps, xc_rng) moves only on a step that returns
 *   SIFT_OK; a step that fails, a mismatch included, is undone: the RNG,
 *   last_V, the slice counter and *token are put back as they were.
 * - The check reads the row the hook wrote into the chain's row buffer
 *   and uses the chain's scratch buffers, sized once (for V) on the first
 *   check; nothing is allocated on later steps.
 *
 * What is checked, in order (the first failure is reported):
 * 1. every slice token's logit equals the row's at its id, bit for bit
 *    (err->index: its prefix position, n_prefix + j for extras[j]);
 * 2. the prefix is the row's k largest logits: its values, sorted, equal
 *    the row's k largest values rank by rank (so any choice among the
 *    tokens tied at the smallest is right; with 1. this is exactly "the
 *    set holds every token above its smallest logit"); with
 *    SIFT_SLICE_CANONICAL, position by position the same ids as
 *    Prefix(k) (err->index: the prefix position of the first wrong
 *    entry);
 * 3. the whole row, sampled from the RNG state the step started from,
 *    gives the same token and RNG state (err->index: -1).
 */
#include <math.h>
#include <stdlib.h>

#include "../sift_internal.h"
#include "step.h"

sift_status sift_chain_set_cross_check(sift_chain *c, uint32_t every_n, double probability,
                                       uint64_t seed, sift_error *err)
{
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    if (!(probability >= 0.0 && probability <= 1.0))
        return sift__fail(err, SIFT_E_ARG, "cross-check probability %g is outside [0, 1]",
                          probability);
    c->xc_every = every_n;
    c->xc_p = probability;
    c->xc_steps = 0;
    sift__rng_seed(&c->xc_rng, seed);
    return SIFT_OK;
}

void sift__cross_check_begin(const sift_chain *c, const int32_t *token, sift__xc_step *b)
{
    b->rng = c->rng;
    b->last_V = c->last_V;
    b->settle_due = c->settle_due;
    b->token = token ? *token : 0;
    b->slice_decided = c->n_slice_decided;
}

/* Puts the chain back as it was before the step. */
static void undo(sift_chain *c, const sift__xc_step *b, int32_t *token)
{
    c->rng = b->rng;
    c->last_V = b->last_V;
    c->settle_due = b->settle_due;
    c->n_slice_decided = b->slice_decided;
    *token = b->token;
}

static int cmp_key_desc(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a < b) - (a > b);
}

/* Checks 1 and 2 on the row in c->row; the row has no NaN or +inf. */
static sift_status check_set(sift_chain *c, const sift_slice *sl, sift_error *err)
{
    const float *row = c->row;
    int32_t k = sl->n_prefix;
    for (int32_t i = 0; i < k + sl->n_extras; i++) {
        const sift_candidate *x = i < k ? &sl->prefix[i] : &sl->extras[i - k];
        if (memcmp(&row[x->id], &x->logit, sizeof x->logit) != 0)
            return sift__fail_at(err, SIFT_E_SLICE_MISMATCH, i,
                                 "cross-check: %s[%d] gives token %d logit %.9g, the whole row "
                                 "has %.9g",
                                 i < k ? "prefix" : "extras", (int)(i < k ? i : i - k), (int)x->id,
                                 (double)x->logit, (double)row[x->id]);
    }
    /* The row's Prefix(k) into ws.cand (the scratch holds V entries). */
    sift__ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.ws = &c->ws;
    ctx.err = err;
    ctx.V = sl->n_vocab;
    ctx.selected = -1;
    ctx.banned_at = SIZE_MAX;
    sift_status s = sift__row_prefix(&ctx, row, sl->n_vocab, (size_t)k, c->ws.cand);
    if (s)
        return s; /* cannot happen: the row was validated */
    const sift_candidate *top = c->ws.cand;
    if (sl->flags & SIFT_SLICE_CANONICAL) {
        for (int32_t i = 0; i < k; i++)
            if (sl->prefix[i].id != top[i].id)
                return sift__fail_at(err, SIFT_E_SLICE_MISMATCH, i,
                                     "cross-check: prefix[%d] is token %d (logit %.9g), the "
                                     "whole row's canonical Prefix(%d) has token %d (logit "
                                     "%.9g) there",
                                     (int)i, (int)sl->prefix[i].id, (double)sl->prefix[i].logit,
                                     (int)k, (int)top[i].id, (double)top[i].logit);
        return SIFT_OK;
    }
    /* Any order, any tie choice. An entry below the k-th largest logit
     * is wrong; else the values, sorted, must equal the row's rank by
     * rank (an entry tied at the k-th largest may hold the place of a
     * missing larger one). */
    float vk = top[k - 1].logit;
    uint64_t *keys = c->ws.u64a;
    for (int32_t i = 0; i < k; i++)
        keys[i] = sift__ckey(sl->prefix[i].logit, sl->prefix[i].id);
    qsort(keys, (size_t)k, sizeof *keys, cmp_key_desc);
    int32_t p = -1;
    for (int32_t i = 0; i < k && p < 0; i++)
        if (sl->prefix[i].logit < vk)
            p = i;
    if (p < 0) {
        int32_t r = 0;
        while (r < k && sift__fkey(top[r].logit) == (uint32_t)(keys[r] >> 32))
            r++;
        if (r == k)
            return SIFT_OK;
        for (int32_t i = 0; i < k && p < 0; i++)
            if (sl->prefix[i].logit == vk)
                p = i;
    }
    /* A token of the row's k largest that the slice lacks (there is one:
     * the slice has fewer than k entries at or above the k-th largest,
     * or fewer above it than the row). */
    int32_t miss = 0;
    for (int32_t j = 0; j < k; j++) {
        uint64_t want = sift__ckey(top[j].logit, top[j].id);
        if (!bsearch(&want, keys, (size_t)k, sizeof *keys, cmp_key_desc)) {
            miss = j;
            break;
        }
    }
    return sift__fail_at(err, SIFT_E_SLICE_MISMATCH, p,
                         "cross-check: the slice is not the whole row's top %d: prefix[%d] "
                         "(token %d, logit %.9g) is not among them; token %d (logit %.9g) is "
                         "missing",
                         (int)k, (int)p, (int)sl->prefix[p].id, (double)sl->prefix[p].logit,
                         (int)top[miss].id, (double)top[miss].logit);
}

/* The whole row's step from the RNG state the slice step started from;
 * the slice gave `tok` and left the RNG at `after`. */
static sift_status check_token(sift_chain *c, const sift__xc_step *b, const sift_slice *sl,
                               int32_t tok, const sift__rng *after, sift_error *err)
{
    /* The row path counts its own steps; those are not the caller's.
     * The reference is the full pass (no prefix path, no tail route):
     * those walk the same certificate as the slice step being checked,
     * and a fault in it would agree with itself. */
    uint64_t pd = c->n_prefix_decided, pf = c->n_prefix_fallback, gr = c->n_grammar_resamples;
    uint64_t fp = c->n_full_passes, at = c->n_arr_top, ft = c->n_fdraw_tries, fd = c->n_fdraw;
    uint8_t at_off = c->arr_top_off, fd_off = c->fdraw_off;
    c->rng = b->rng;
    int32_t rt = -1;
    sift_error re;
    c->arr_top_off = 1; /* nor the tail route inside the full pass */
    c->fdraw_off = 1;   /* nor the float-certified draw */
    sift_status rs = sift__sample_row(c, c->row, sl->n_vocab, &rt, 0, &re);
    c->arr_top_off = at_off;
    c->fdraw_off = fd_off;
    c->n_arr_top = at;
    c->n_fdraw_tries = ft;
    c->n_fdraw = fd;
    int same_rng = rs == SIFT_OK && memcmp(&c->rng, after, sizeof *after) == 0;
    c->rng = *after;
    c->n_prefix_decided = pd;
    c->n_prefix_fallback = pf;
    c->n_grammar_resamples = gr;
    c->n_full_passes = fp;
    if (rs == SIFT_E_NOMEM)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory during a cross-check: %s", re.message);
    if (rs != SIFT_OK)
        return sift__fail(err, SIFT_E_SLICE_MISMATCH,
                          "cross-check: the slice gave token %d, the whole row fails: %s (%s)",
                          (int)tok, sift_status_str(rs), re.message);
    if (rt != tok || !same_rng)
        return sift__fail(err, SIFT_E_SLICE_MISMATCH,
                          "cross-check: the slice gave token %d, the whole row token %d%s",
                          (int)tok, (int)rt, rt == tok ? " with another RNG state" : "");
    return SIFT_OK;
}

/* The row through the hook into c->row, with no NaN or +inf. */
static sift_status fetch(sift_chain *c, int32_t V, sift_error *err)
{
    sift_status s = sift__row_buffer(c, V, err);
    if (s)
        return s;
    int rc = c->hook(c->hook_user, c->row, V);
    if (rc != 0)
        return sift__fail(err, SIFT_E_HOOK, "row hook failed during a cross-check (status %d)", rc);
    for (int32_t i = 0; i < V; i++)
        if (!(c->row[i] < INFINITY))
            return sift__fail_at(err, SIFT_E_HOOK, i, "row hook's row[%d] is %s", (int)i,
                                 c->row[i] != c->row[i] ? "NaN" : "+inf");
    return SIFT_OK;
}

sift_status sift__cross_check_end(sift_chain *c, const sift__xc_step *b, const sift_slice *sl,
                                  int32_t *token, sift_status status, sift_error *err)
{
    if (status != SIFT_OK || (c->xc_every == 0 && c->xc_p == 0.0))
        return status;
    /* The schedule after this step, committed only if it succeeds. */
    uint64_t steps = c->xc_steps + 1;
    sift__rng xr = c->xc_rng;
    int due = c->xc_every && steps % c->xc_every == 0;
    if (c->xc_p > 0.0) {
        /* 53 random bits in [0, 1): p = 1 is always due */
        double u = (double)(sift__rng_next(&xr) >> 11) * (1.0 / 9007199254740992.0);
        due |= u < c->xc_p;
    }
    sift_status s = SIFT_OK;
    if (!due) {
        /* nothing to check */
    } else if (c->n_slice_decided == b->slice_decided) {
        /* The step needed the row: the hook's row was checked against
         * the slice and the token is the whole row's. */
        c->n_xc++;
    } else if (!c->hook) {
        c->n_xc_skipped++;
    } else {
        sift__rng after = c->rng;
        int32_t tok = *token;
        int32_t V = sl->n_vocab;
        if (!(s = sift__ws_reserve(&c->ws, &c->al, (size_t)V, err)) && !(s = fetch(c, V, err))) {
            c->n_xc++;
            if (!(s = check_set(c, sl, err)))
                s = check_token(c, b, sl, tok, &after, err);
            if (s == SIFT_E_SLICE_MISMATCH)
                c->n_xc_mismatch++;
        }
    }
    if (s) {
        undo(c, b, token);
        return s;
    }
    c->xc_steps = steps;
    c->xc_rng = xr;
    return SIFT_OK;
}

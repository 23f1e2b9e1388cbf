/*
 * prefix.c - row validation and the prefix builder: the canonical first
 * k tokens of a row, found without sorting the row (for the row step's
 * fast path, step.c).
 *
 * Invariants: reads the row once for block maxima and bad values, then
 * only the blocks that can hold a top-k token; the result is exactly the
 * row's canonical first k, in canonical order.
 */
#include <math.h>

#include "../sift_internal.h"
#include "simd.h"

sift_status sift__row_error(const float *row, int32_t V, sift_error *err)
{
    int any = 0;
    for (int32_t i = 0; i < V; i++) {
        float x = row[i];
        if (x != x)
            return sift__fail_at(err, SIFT_E_ROW_VALUE, i, "row[%d] is NaN", (int)i);
        if (x == INFINITY)
            return sift__fail_at(err, SIFT_E_ROW_VALUE, i, "row[%d] is +inf", (int)i);
        any |= x > -INFINITY;
    }
    if (!any)
        return sift__fail(err, SIFT_E_NO_CANDIDATE,
                          "all %d tokens are banned (-inf) in the input row", (int)V);
    return SIFT_OK;
}

/* Order key of a logit for block maxima: sift__fkey with -0 folded into +0
 * by adding +0 (exact, branch-free). */
static inline uint32_t block_key(float x)
{
    float y = x + 0.0f;
    uint32_t u;
    memcpy(&u, &y, sizeof u);
    return (u >> 31) ? ~u : (u | 0x80000000u);
}

#define BLOCK 64

sift_status sift__row_prefix(sift__ctx *ctx, const float *row, int32_t V, size_t k,
                             sift_candidate *out)
{
    if (sift__topk_fits(V, k))
        return sift__topk_row(ctx, row, V, k, out); /* one pass (core/topk.c) */
    size_t n = (size_t)V;
    size_t nb = (n + BLOCK - 1) / BLOCK;
    uint32_t *bm = ctx->ws->u32;
    int bad = 0;
    uint32_t top = 0;
    /* Pass 1: block maxima and bad values, branch-free so it vectorizes
     * with plain float compares (SSE2 has a float max but no unsigned
     * one). Four lanes per block keep the compares independent. A NaN
     * never wins a '>' compare, and the bad flag catches it; -0 and +0
     * compare equal and block_key folds them together. */
    for (size_t b = 0; b < nb; b++) {
        size_t s = b * BLOCK, e = s + BLOCK < n ? s + BLOCK : n;
        float m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
        int bb = 0;
        size_t i = s;
        for (; i + 4 <= e; i += 4) {
            float x0 = row[i], x1 = row[i + 1], x2 = row[i + 2], x3 = row[i + 3];
            m0 = x0 > m0 ? x0 : m0;
            m1 = x1 > m1 ? x1 : m1;
            m2 = x2 > m2 ? x2 : m2;
            m3 = x3 > m3 ? x3 : m3;
            bb |= !(x0 < INFINITY) | !(x1 < INFINITY) | !(x2 < INFINITY) | !(x3 < INFINITY);
        }
        for (; i < e; i++) {
            float x = row[i];
            m0 = x > m0 ? x : m0;
            bb |= !(x < INFINITY);
        }
        m0 = m1 > m0 ? m1 : m0;
        m2 = m3 > m2 ? m3 : m2;
        m0 = m2 > m0 ? m2 : m0;
        uint32_t m = block_key(m0);
        bm[b] = m;
        bad |= bb;
        top = m > top ? m : top;
    }
    if (bad || top <= block_key(-INFINITY))
        return sift__row_error(row, V, ctx->err);
    /* The k-th largest block maximum bounds the k-th largest logit from
     * below: k blocks hold a value at least that large. */
    uint32_t tau = 0;
    if (k < nb) {
        sift_candidate *bc = ctx->ws->cand2;
        for (size_t b = 0; b < nb; b++) {
            bc[b].id = (int32_t)b;
            uint32_t u = (bm[b] & 0x80000000u) ? (bm[b] & 0x7fffffffu) : ~bm[b];
            memcpy(&bc[b].logit, &u, sizeof u);
        }
        tau = (uint32_t)(sift__cut_top(ctx, bc, nb, k) >> 32);
    }
    /* Pass 2: gather candidates from the blocks that can hold them. */
    sift_candidate *c = ctx->ws->cand;
    size_t m = 0;
    for (size_t b = 0; b < nb; b++) {
        if (bm[b] < tau)
            continue;
        size_t s = b * BLOCK, e = s + BLOCK < n ? s + BLOCK : n;
        for (size_t i = s; i < e; i++) {
            if (block_key(row[i]) >= tau) {
                c[m].id = (int32_t)i;
                c[m].logit = row[i];
                m++;
            }
        }
    }
    if (m > k) {
        uint64_t cut = sift__cut_top(ctx, c, m, k);
        size_t j = 0;
        for (size_t i = 0; i < m; i++)
            if (sift__ckey(c[i].logit, c[i].id) >= cut)
                c[j++] = c[i];
        m = j;
    }
    sift__sort_canon(c, m, ctx->ws->cand2);
    if (out != c)
        memcpy(out, c, m * sizeof *c);
    return SIFT_OK;
}

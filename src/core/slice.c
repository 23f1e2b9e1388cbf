/*
 * slice.c - sampling a whole row through its top-k prefix.
 *
 * Owns: row validation, the prefix builder (the canonical first k tokens of
 * a row, found without sorting the row), the static prefix length a chain
 * needs, and the certified walk of a chain over a prefix.
 *
 * Why: most chains only look at the top few dozen tokens. When the stages
 * before the first truncation only lower logits (penalties, negative
 * biases, DRY) or keep their order (temperature), the canonical first
 * K + lowered tokens decide the truncation. The walk below applies the
 * stages to the prefix and, at every truncation, checks that the tokens it
 * keeps are certainly ahead of every token it has not seen; if a check
 * fails it reports "undecided" and the caller runs the whole row instead.
 * Either way the result is bitwise the whole-row result (docs/analyzer.md).
 *
 * The bound on absent tokens starts as "canonical key below the key of the
 * prefix's last token" (absent tokens come after the prefix). Lowering
 * stages keep it (absent tokens can only go down). A monotone stage maps
 * it through its own function and loses the id tie-break (after rounding,
 * an absent token may tie with a present one), so from then on only a
 * strictly larger logit beats it.
 */
#include <math.h>
#include <stdlib.h>

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

/* 1 when a stage with ops->allowed has, on the present tokens, banned
 * every token it does not allow and all the tokens it allows are
 * present: then it has banned every absent token too. */
static int confines(sift__stage *st, const sift__arr *a)
{
    const int32_t *ids;
    size_t m = st->ops->allowed(st, &ids);
    if (m == SIZE_MAX || m == 0)
        return 0;
    size_t found = 0;
    for (size_t i = 0; i < a->n && found < m; i++) {
        /* ids is ascending: a binary search per present token */
        size_t lo = 0, hi = m;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ids[mid] < a->c[i].id)
                lo = mid + 1;
            else
                hi = mid;
        }
        found += lo < m && ids[lo] == a->c[i].id;
    }
    return found == m;
}

static int cmp_id(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* TOP(n) when every absent token is -inf (bound -inf without the id
 * tie-break) but the present tokens do not reach n finite ones: the
 * whole row's first n are the finite present tokens followed by the
 * -inf tokens of smallest id, present or not. Writes exactly those into
 * `a` (canonical order, the -inf ones by id) and returns 1, or returns
 * 0 when they do not fit in the workspace or no present token is finite. */
static int fill_banned(sift__ctx *ctx, sift__arr *a, size_t n)
{
    if (n > (size_t)a->V || n > ctx->ws->cap || a->c != ctx->ws->cand)
        return 0;
    size_t f = 0;
    while (f < a->n && a->c[f].logit > -INFINITY)
        f++;
    if (f == 0 || f > n)
        return 0; /* no finite token: the whole row names the error */
    int32_t *fin = (int32_t *)ctx->ws->u32;
    for (size_t i = 0; i < f; i++)
        fin[i] = a->c[i].id;
    qsort(fin, f, sizeof *fin, cmp_id);
    size_t j = f, q = 0;
    for (int32_t id = 0; j < n; id++) {
        if (q < f && fin[q] == id) {
            q++;
            continue;
        }
        a->c[j].id = id;
        a->c[j].logit = -INFINITY;
        j++;
    }
    a->n = n;
    a->order = SIFT__ORDER_CANON;
    return 1;
}

/* The walk proper. Errors of the stages on an incomplete set go to
 * `scratch` (failures there are left to the whole-row path, which names
 * the exact place); errors on the complete set go to `user_err`. The
 * context's err is pointed at one or the other before every stage and
 * restored by sift__walk on its only exit, so that no pointer to the
 * scratch struct outlives this frame. */
static int walk(sift_chain *c, sift__ctx *ctx, sift__arr *a, size_t end, sift__bound *b,
                sift_status *status, sift_error *user_err, sift_error *scratch)
{
    int complete = a->n == (size_t)a->V;
    for (size_t i = 0; i < end; i++) {
        sift__stage *st = c->stages[i];
        ctx->stage = i;
        if (complete) {
            ctx->err = user_err;
            sift_status s = st->ops->apply(st, ctx, a);
            if (s == SIFT_OK && a->n == 0)
                s = sift__fail_at(ctx->err, SIFT_E_NO_CANDIDATE, (int64_t)i,
                                  "stage %zu (%s) removed the last candidate", i,
                                  sift__stage_name(st));
            else if (s == SIFT_E_NO_CANDIDATE && ctx->banned_at < i)
                s = sift__no_candidate_left(c, ctx); /* name who banned them */
            if (s != SIFT_OK) {
                *status = s;
                return SIFT__WALK_DECIDED;
            }
            if (st->ops->is_selector)
                break;
            sift__note_banned(ctx, i, a);
            continue;
        }
        /* Incomplete: failures are left to the whole-row path, which names
         * the exact place, so errors go to a scratch struct. */
        ctx->err = scratch;
        int64_t n = 0;
        sift_class cls = st->ops->cls ? st->ops->cls(st, &n) : SIFT_CLASS_WHOLE;
        size_t before = a->n;
        switch (cls) {
        case SIFT_CLASS_IDENTITY: break;
        case SIFT_CLASS_LOWERS:
        case SIFT_CLASS_RAISES:
            /* Absent tokens can only go down (a raising stage raises only
             * extras, which are present), so the bound still holds. A
             * raising stage that cannot name its extras (a custom stage)
             * might raise an absent token: the analyzer gives such a
             * chain the whole row, and so does the walk. */
            if (cls == SIFT_CLASS_RAISES && !st->ops->extras)
                return SIFT__WALK_ROW;
            if (st->ops->apply(st, ctx, a) != SIFT_OK || a->n != before)
                return SIFT__WALK_ROW;
            if (cls == SIFT_CLASS_LOWERS && st->ops->allowed && confines(st, a)) {
                /* every absent token is now -inf */
                b->by_key = 0;
                b->logit = -INFINITY;
            }
            break;
        case SIFT_CLASS_MONOTONE: {
            float nb = st->ops->map_bound ? st->ops->map_bound(st, b->logit) : NAN;
            if (nb != nb || nb == INFINITY)
                return SIFT__WALK_ROW;
            /* A monotone stage may decide on the set's largest logit
             * (temperature falls back to greedy when it overflows, and
             * then removes every other token, absent ones included). The
             * present maximum must map to a finite value: then the
             * row's maximum, which lies between it and the bound, does
             * too, and neither the slice nor the row falls back. */
            float pm = st->ops->map_bound(st, sift__max_logit(a->c, a->n));
            if (!(pm > -INFINITY && pm < INFINITY))
                return SIFT__WALK_ROW;
            if (st->ops->apply(st, ctx, a) != SIFT_OK || a->n != before)
                return SIFT__WALK_ROW;
            b->by_key = 0;
            b->logit = nb;
            break;
        }
        case SIFT_CLASS_TOP: {
            if (n <= 0)
                return SIFT__WALK_ROW;
            sift__arr_canon(ctx, a);
            if ((size_t)n > a->n || !sift__bound_ahead(b, &a->c[n - 1])) {
                /* With every absent token at -inf the first n are known
                 * even when they run into -inf tokens. */
                int banned = !b->by_key && b->logit == -INFINITY;
                if (!banned || !fill_banned(ctx, a, (size_t)n))
                    return SIFT__WALK_ROW;
            }
            /* Certified: the stage's result on the present tokens is its
             * result on the row, and every later stage sees the whole
             * candidate set. */
            if (st->ops->apply(st, ctx, a) != SIFT_OK || a->n == 0)
                return SIFT__WALK_ROW;
            if (st->ops->is_selector) {
                *status = SIFT_OK;
                return SIFT__WALK_DECIDED;
            }
            if (a->n > (size_t)n)
                return SIFT__WALK_ROW;
            complete = 1;
            sift__note_banned(ctx, i, a);
            break;
        }
        case SIFT_CLASS_THRESHOLD:
            if (!st->ops->certify)
                return SIFT__WALK_ROW;
            sift__arr_canon(ctx, a);
            if (!st->ops->certify(st, ctx, a, b))
                return SIFT__WALK_ROW;
            if (st->ops->apply(st, ctx, a) != SIFT_OK || a->n == 0)
                return SIFT__WALK_ROW;
            if (st->ops->is_selector) {
                *status = SIFT_OK;
                return SIFT__WALK_DECIDED;
            }
            complete = 1;
            sift__note_banned(ctx, i, a);
            break;
        default: return SIFT__WALK_ROW;
        }
    }
    *status = SIFT_OK;
    return complete ? SIFT__WALK_DECIDED : SIFT__WALK_RAN;
}

int sift__walk(sift_chain *c, sift__ctx *ctx, sift__arr *a, size_t end, sift__bound *b,
               sift_status *status)
{
    sift_error scratch;
    sift_error *user_err = ctx->err;
    int r = walk(c, ctx, a, end, b, status, user_err, &scratch);
    ctx->err = user_err;
    return r;
}

/*
 * certify.c - the certified walk of a chain over an incomplete set (a
 * row's top-k prefix, or a slice).
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
    c->n_walks++;
    int r = walk(c, ctx, a, end, b, status, user_err, &scratch);
    ctx->err = user_err;
    return r;
}

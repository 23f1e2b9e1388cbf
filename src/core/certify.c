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
 *
 * The bound may also carry an upper bound on the absent tokens' total
 * mass (core/tail.c): lowering stages keep it, a temperature maps it, and
 * the stages whose outcome depends on the absent tokens only through
 * their mass (top_p, dist) are decided when the outcome is the same for
 * every mass it allows.
 *
 * What each class proves is not here: the walk asks the class's rule in
 * the one table of class semantics (class.c), which the static plan
 * (plan.c) reads too; this file owns the loop, the complete-set tail and
 * where errors go.
 */
#include "../sift_internal.h"
#include "step.h"

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
    /* Weights carried from stage to stage (sift__carry_leave) only on the
     * complete set, where the stages run back to back; the certificate
     * rules of the incomplete set call apply unarmed, and write ws->u64a. */
    sift__carry_clear(ctx);
    for (size_t i = 0; i < end; i++) {
        sift__stage *st = c->stages[i];
        ctx->stage = i;
        if (complete) {
            ctx->err = user_err;
            ctx->carry_armed = 1;
            ctx->carry_next = sift__carry_next(c, i, end);
            sift_status s = st->ops->apply(st, ctx, a);
            ctx->carry_armed = 0;
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
        /* The class's certificate rule (core/class.c), the same table
         * the static plan reads. */
        /* A stage's note that nothing finite is left (custom stages make
         * one) says nothing of the row while the set is incomplete. */
        size_t banned_at = ctx->banned_at;
        int r = sift__class_rule_of(cls)->certify(st, n, ctx, a, b);
        ctx->banned_at = banned_at;
        switch (r) {
        case SIFT__CERT_KEEP: break;
        case SIFT__CERT_COMPLETE:
            complete = 1;
            sift__note_banned(ctx, i, a);
            break;
        case SIFT__CERT_SELECTED: *status = SIFT_OK; return SIFT__WALK_DECIDED;
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
    /* Every token not loaded is absent; stages remove present ones only
     * on a complete set, or in a certified truncation that completes it. */
    b->n_absent = a->n < (size_t)a->V ? (uint64_t)a->V - (uint64_t)a->n : 0;
    int r = walk(c, ctx, a, end, b, status, user_err, &scratch);
    ctx->err = user_err;
    return r;
}

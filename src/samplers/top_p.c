/*
 * top_p.c - nucleus (top-p) truncation.
 *
 * Owns sift_chain_add_top_p and its stage.
 *
 * Formula (docs/samplers.md, "top_p"): over the current candidates, with
 * m the largest logit, w_i = trunc(sift__expf(l_i - m) * 2^62) and the
 * exact 128-bit mass W = sum w_i, the threshold is T = ceil(p * W),
 * computed exactly from the float p. The stage keeps the shortest
 * canonical prefix (logit descending, id ascending) whose mass is >= T,
 * and at least max(min_keep, 1) tokens (all of them if there are fewer).
 * p >= 1 is a no-op; p = 0 gives T = 0, so one token (or min_keep) is
 * kept. Every comparison is an integer comparison of exact sums, so the
 * kept set depends only on the set of candidates, not on their order.
 *
 * Reference behaviour: llama.cpp's top_p computes a float softmax, sorts
 * and walks a float running sum with `cum >= p`, and leaves the array
 * sorted. Deliberate differences: sift's masses are exact integers (a
 * float running sum can stop one token early or late), ties are broken
 * by id, and the storage order of the survivors is left alone.
 *
 * The fast path never sorts: sift__mass_prefix finds the prefix by
 * weighted selection and sift__cut_top extends it to min_keep. On a
 * large array the float-certified cut (core/fdraw.c) is tried first; it
 * gives the same prefix or nothing.
 *
 * Capability class: WHOLE (the normaliser reads every candidate);
 * IDENTITY when p >= 1. On a slice the cut is certified with the absent
 * tokens' mass bound (top_p_certify_mass).
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_top_p;

typedef struct top_p_stage {
    sift__stage base;
    float p;
    int32_t min_keep;
} top_p_stage;

/* Fewer kept tokens than this: top_p leaves no weights (dist computes
 * those few itself). */
#define CARRY_MIN_KEPT 4096

static sift_status top_p_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const top_p_stage *t = (const top_p_stage *)st;
    if (t->p >= 1.0f)
        return SIFT_OK;
    float m = sift__arr_max_logit(a);
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    size_t keep_min = t->min_keep > 1 ? (size_t)t->min_keep : 1;
    if (keep_min >= a->n)
        return SIFT_OK;
    /* A large array first tries the float-certified cut (core/fdraw.c):
     * a decided cut is the exact one, so the kept set is the same; it
     * leaves the kept tokens' float weights, not exact ones, for the dist
     * after it (sift__fcut_keep). Their record holds for the next stage
     * only, this very array (its pointer and length) and the bits of m,
     * while the stages run armed; the take clears it, and nothing between
     * here and the take writes ws->u64a (dist's tail route waits while it
     * is pending). */
    uint64_t fcut;
    size_t flen;
    sift__fpass fp;
    if (sift__fcut(ctx, a, m, t->p, &fcut, &flen, &fp)) {
        size_t n_kept = flen < keep_min ? keep_min : flen;
        if (flen < keep_min)
            fcut = sift__cut_top(ctx, a->c, a->n, keep_min);
        sift__fcut_keep(ctx, a, m, fcut, n_kept < a->n ? n_kept : a->n, &fp);
        return SIFT_OK;
    }
    uint64_t *w = ctx->ws->u64a;
    sift__u128 W = sift__weights(a->c, a->n, m, w);
    /* On a slice, the threshold at the present mass plus the absent
     * mass's lower end that the certificate used (0 elsewhere). */
    sift__u128 T = sift__u128_scale_float(sift__u128_add(W, ctx->absent_lo), t->p, 1);
    uint64_t cut;
    size_t len = sift__arr_mass_prefix(ctx, a, w, T, 0, &cut);
    /* Carry (sift__carry_leave): w[i] is the weight of a->c[i] at m on
     * every return below. The kept set holds the largest logit (the cut
     * keeps a canonical prefix of at least one token), so m is its
     * largest logit too, and the dist after this stage, if nothing runs
     * in between, draws from these weights instead of computing them
     * again. */
    if (len >= a->n) {
        sift__carry_leave(ctx, a, m, W);
        return SIFT_OK;
    }
    if (len < keep_min)
        cut = sift__cut_top(ctx, a->c, a->n, keep_min);
    /* Moving the weights costs about a pass over the array; dist's own
     * pass over a few kept tokens costs less. */
    size_t n_kept = len < keep_min ? keep_min : len;
    if (sift__carry_wanted(ctx) && n_kept >= CARRY_MIN_KEPT) {
        sift__u128 kept = sift__arr_keep_ge_w(a, cut, w);
        sift__carry_leave(ctx, a, m, kept);
    } else {
        sift__arr_keep_ge(a, cut);
    }
    return SIFT_OK;
}

static sift_class top_p_cls(const sift__stage *st, int64_t *n)
{
    const top_p_stage *t = (const top_p_stage *)st;
    *n = 0;
    return t->p >= 1.0f ? SIFT_CLASS_IDENTITY : SIFT_CLASS_WHOLE;
}

/* On a slice (present tokens canonical, absent ones bounded by b, their
 * integer mass between A_lo and W_A): the row's mass lies in [W_lo, W_hi]
 * (the present mass plus A_lo, sift__tail_absent_mass_lo, 0 without a
 * lower end; plus W_A) and T = ceil(p W) in [T_lo, T_hi] (non-decreasing
 * in W). Over the
 * present tokens ahead of the bound (the row's first ones, with the
 * row's weights), the cut is the first prefix whose mass reaches T; if
 * the prefix that reaches T_lo reaches T_hi too, the cut is the same for
 * every T in between. With the min_keep extension the kept tokens must
 * all be ahead of the bound. Applying the stage to the present tokens
 * uses T_lo (ctx->absent_lo) and then keeps exactly the row's kept set. */
static int top_p_certify_mass(const sift__stage *st, sift__ctx *ctx, const sift__arr *a,
                              const sift__bound *b)
{
    const top_p_stage *t = (const top_p_stage *)st;
    if (a->n == 0 || a->order != SIFT__ORDER_CANON || !(a->c[0].logit > -INFINITY) ||
        a->c[0].logit < b->logit || b->n_absent == 0)
        return 0;
    size_t keep_min = t->min_keep > 1 ? (size_t)t->min_keep : 1;
    float m = a->c[0].logit;
    uint64_t *w = ctx->ws->u64a;
    sift__u128 A_lo, W_lo, W_hi;
    if (!sift__tail_mass_range(b, m, sift__weights(a->c, a->n, m, w), &A_lo, &W_lo, &W_hi))
        return 0;
    sift__u128 T_lo = sift__u128_scale_float(W_lo, t->p, 1);
    sift__u128 T_hi = sift__u128_scale_float(W_hi, t->p, 1);
    sift__u128 run = {0, 0};
    size_t len = 0;
    for (size_t i = 0; i < a->n && sift__bound_ahead(b, &a->c[i]); i++) {
        run = sift__u128_add64(run, w[i]);
        if (sift__u128_cmp(run, T_lo) >= 0) {
            if (sift__u128_cmp(run, T_hi) < 0)
                return 0;
            len = i + 1;
            break;
        }
    }
    if (len == 0 ||
        (len < keep_min && !(keep_min <= a->n && sift__bound_ahead(b, &a->c[keep_min - 1]))))
        return 0;
    ctx->absent_lo = A_lo;
    return 1;
}

static const sift__stage_ops top_p_ops = {
    .name = "top_p",
    .apply = top_p_apply,
    .cls = top_p_cls,
    .certify_mass = top_p_certify_mass,
};

sift_status sift_chain_add_top_p(sift_chain *chain, float p, int32_t min_keep, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_top_p, "p", p, err)))
        return s;
    if ((s = sift__param_check(&sift__desc_top_p, "min_keep", min_keep, err)))
        return s;
    top_p_stage *t =
        (top_p_stage *)sift__stage_alloc(sift__chain_alloc(chain), &top_p_ops, sizeof *t);
    if (!t)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding top_p");
    t->p = p;
    t->min_keep = min_keep;
    return sift__chain_push(chain, &t->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct top_p_rec {
    float p;
    int32_t min_keep;
} top_p_rec;

static const sift__param top_p_params[] = {
    {.name = "p",
     .doc = "cumulative probability to keep, in [0, 1]",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_IN,
     .lo = 0,
     .hi = 1,
     .required = 1,
     .off = offsetof(top_p_rec, p),
     .flat_key = "top_p",
     .flat_def = 0.95},
    SIFT__PARAM_MIN_KEEP(top_p_rec),
};

static sift_status top_p_build(sift_chain *c, const void *rec, const sift__build_env *env,
                               sift_error *err)
{
    const top_p_rec *r = rec;
    (void)env;
    return sift_chain_add_top_p(c, r->p, r->min_keep, err);
}

static sift_class top_p_desc_cls(const void *rec, int64_t *k)
{
    const top_p_rec *r = rec;
    *k = 0;
    return r->p < 1 ? SIFT_CLASS_THRESHOLD : SIFT_CLASS_IDENTITY;
}

static void top_p_lint(const void *rec, sift__lint *l)
{
    const top_p_rec *r = rec;
    if (r->p >= 1)
        l->warn(l, "p", "top_p 1 turns the stage off");
}

static int top_p_flat_active(void *rec)
{
    const top_p_rec *r = rec;
    return r->p < 1;
}

static const char *const top_p_flat_names[] = {"top_p", "top-p", "nucleus", NULL};

const sift__sampler_desc sift__desc_top_p = {
    .name = "top_p",
    .summary = "keeps the smallest prefix whose probability reaches p",
    .params = top_p_params,
    .n_params = sizeof top_p_params / sizeof top_p_params[0],
    .rec_size = sizeof(top_p_rec),
    .main = "p",
    .keeps_argmax = 1,
    .build = top_p_build,
    .cls = top_p_desc_cls,
    .lint = top_p_lint,
    .flat_names = top_p_flat_names,
    .flat_char = 'p',
    .flat_order = 6,
    .flat_active = top_p_flat_active,
};

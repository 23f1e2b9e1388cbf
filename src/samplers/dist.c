/*
 * dist.c - the dist selector and its id-order variant.
 *
 * Math (docs/samplers.md, "dist"): with m the largest logit and integer
 * weights w_i = trunc(expf(l_i - m) * 2^62), W = sum w_i (exact), one
 * 64-bit RNG output U gives the target T = floor(W * U / 2^64) < W; the
 * selected token is the first, walking canonical order, whose inclusive
 * prefix sum of weights exceeds T. A single candidate is selected without
 * a draw (as llama.cpp does). Zero-weight tokens are never selected.
 *
 * The walk is found by weighted selection (sift__mass_prefix), not by
 * sorting: exact integer prefix sums make the answer independent of the
 * array's storage order. On a large array the float-certified draw
 * (core/fdraw.c) is tried first; it returns this definition's token or
 * nothing.
 *
 * Reference behaviour: llama.cpp walks a float/double cumulative sum in the
 * array's current order with libstdc++'s generate_canonical; sift differs
 * on purpose (own RNG, canonical order, exact sums).
 * Capability class: WHOLE (it needs the normaliser of every candidate);
 * on a slice the draw is certified with the absent tokens' mass bound
 * (dist_certify_mass).
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

typedef struct dist_stage {
    sift__stage base;
    int id_order;
} dist_stage;

static sift_status dist_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const dist_stage *d = (const dist_stage *)st;
    /* A large array in id order with no weights left for it, exact or
     * float (the full pass after a stage that reads every token, such as
     * temp_ext) first tries the tail route on itself: its top tokens with
     * a bound on the rest (it writes the scratch the float weights are
     * in). The route finds the largest logit itself; an array without a
     * finite one fails it and is reported below. */
    if (!d->id_order && !sift__carry_pending(ctx, a) && !sift__fcarry_pending(ctx, a) &&
        sift__arr_top_select(st, ctx, a))
        return SIFT_OK;
    float m = sift__arr_max_logit(a);
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    if (a->n == 1) {
        ctx->selected = a->c[0].id;
        return SIFT_OK;
    }
    /* Carried weights (sift__carry_take): those the stage right before
     * left for this very array at this m, bit for bit the ones computed
     * here. The id-order walk reorders the array first, so it computes
     * its own (and the take voids the record). */
    sift__u128 W;
    const uint64_t *w = d->id_order ? NULL : sift__carry_take(ctx, a, m, &W);
    if (!w) {
        sift__carry_clear(ctx);
        /* A large array first tries the float-certified draw: a decided
         * step is this pass's token, and takes the same one RNG output. */
        int32_t id;
        if (!d->id_order && sift__fdraw(ctx, a, m, &id)) {
            (void)sift__rng_next(&ctx->rng);
            ctx->selected = id;
            return SIFT_OK;
        }
        if (d->id_order)
            sift__arr_idorder(ctx, a);
        w = ctx->ws->u64a;
        W = sift__weights(a->c, a->n, m, ctx->ws->u64a);
    }
    /* On a slice, the target at the present mass plus the absent mass's
     * lower end that the certificate used (0 elsewhere). */
    sift__u128 T =
        sift__u128_scale_u64(sift__u128_add(W, ctx->absent_lo), sift__rng_next(&ctx->rng));
    if (d->id_order) {
        sift__u128 run = {0, 0};
        for (size_t i = 0; i < a->n; i++) {
            run = sift__u128_add64(run, w[i]);
            if (sift__u128_cmp(run, T) > 0) {
                ctx->selected = a->c[i].id;
                return SIFT_OK;
            }
        }
        /* unreachable: the full sum W exceeds T */
        ctx->selected = a->c[a->n - 1].id;
        return SIFT_OK;
    }
    uint64_t cut;
    sift__arr_mass_prefix(ctx, a, w, T, 1, &cut);
    ctx->selected = sift__ckey_id(cut);
    return SIFT_OK;
}

/* dist alone on a whole row: the float-certified draw on the row
 * itself, which selects exactly what loading the row and dist_apply
 * would (a decided draw on the loaded array, which holds the same logits
 * in id order, is this one). When it declines, the loaded array does
 * not try again. */
static int dist_select_row(sift__stage *st, sift__ctx *ctx, const float *row, int32_t V)
{
    (void)st;
    int32_t id;
    if (!sift__fdraw_row(ctx, row, V, &id)) {
        /* the loaded array holds the same logits in id order: the draw
         * would decline there too */
        ctx->fdraw_off = 1;
        return 0;
    }
    (void)sift__rng_next(&ctx->rng);
    ctx->selected = id;
    return 1;
}

static sift_class dist_cls(const sift__stage *st, int64_t *n)
{
    (void)st;
    *n = 0;
    return SIFT_CLASS_WHOLE;
}

/* On a slice (present tokens canonical, absent ones bounded by b, their
 * integer mass between A_lo and W_A): the row's mass W lies in [W_lo,
 * W_hi], W_lo the present mass plus A_lo (sift__tail_absent_mass_lo, 0
 * without a lower end), W_hi the present mass plus W_A, and the target T
 * = floor(W U / 2^64) is non-decreasing in W, so it lies in [T_lo, T_hi].
 * The present tokens ahead of the bound are the row's first ones in
 * canonical order, with the row's weights (the row's largest logit is
 * present). If the first of them whose prefix mass exceeds T_lo also
 * exceeds T_hi, every T in between selects it: that is the row's token,
 * and apply on the present tokens (which uses T_lo: ctx->absent_lo) draws
 * it with the same one RNG output. Fewer than two present tokens would
 * select without a draw, while the row draws: not certified. The id-order walk interleaves absent
 * tokens: not certified. */
static int dist_certify_mass(const sift__stage *st, sift__ctx *ctx, const sift__arr *a,
                             const sift__bound *b)
{
    if (((const dist_stage *)st)->id_order || a->n < 2 || a->order != SIFT__ORDER_CANON ||
        !(a->c[0].logit > -INFINITY) || a->c[0].logit < b->logit)
        return 0;
    float m = a->c[0].logit;
    uint64_t *w = ctx->ws->u64a;
    sift__u128 A_lo, W_lo, W_hi;
    if (!sift__tail_mass_range(b, m, sift__weights(a->c, a->n, m, w), &A_lo, &W_lo, &W_hi))
        return 0;
    sift__rng r = ctx->rng;
    uint64_t u = sift__rng_next(&r);
    sift__u128 T_lo = sift__u128_scale_u64(W_lo, u), T_hi = sift__u128_scale_u64(W_hi, u);
    sift__u128 run = {0, 0};
    for (size_t i = 0; i < a->n && sift__bound_ahead(b, &a->c[i]); i++) {
        run = sift__u128_add64(run, w[i]);
        if (sift__u128_cmp(run, T_lo) > 0) {
            if (sift__u128_cmp(run, T_hi) <= 0)
                return 0;
            ctx->absent_lo = A_lo;
            return 1;
        }
    }
    return 0;
}

static const sift__stage_ops dist_ops = {
    .name = "dist",
    .apply = dist_apply,
    .is_selector = 1,
    .takes_carry = 1,
    .cls = dist_cls,
    .certify_mass = dist_certify_mass,
    .select_row = dist_select_row,
};

static const sift__stage_ops dist_id_ops = {
    .name = "dist_id_order",
    .apply = dist_apply,
    .is_selector = 1,
    .cls = dist_cls,
};

static sift_status add(sift_chain *chain, int id_order, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    dist_stage *d = (dist_stage *)sift__stage_alloc(sift__chain_alloc(chain),
                                                    id_order ? &dist_id_ops : &dist_ops, sizeof *d);
    if (!d)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding dist");
    d->id_order = id_order;
    return sift__chain_push(chain, &d->base, err);
}

sift_status sift_chain_add_dist(sift_chain *chain, sift_error *err)
{
    return add(chain, 0, err);
}

sift_status sift_chain_add_dist_id_order(sift_chain *chain, sift_error *err)
{
    return add(chain, 1, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct dist_rec {
    int order; /* 0 canonical, 1 id */
} dist_rec;

static const char *const dist_orders[] = {"canonical", "id", NULL};

static const sift__param dist_params[] = {
    {.name = "order",
     .doc = "the order the draw walks: 'canonical' or 'id' (llama.cpp's)",
     .type = SIFT__PT_ENUM,
     .choices = dist_orders,
     .off = offsetof(dist_rec, order)},
};

static sift_status dist_build(sift_chain *c, const void *rec, const sift__build_env *env,
                              sift_error *err)
{
    (void)env;
    return ((const dist_rec *)rec)->order ? sift_chain_add_dist_id_order(c, err)
                                          : sift_chain_add_dist(c, err);
}

const sift__sampler_desc sift__desc_dist = {
    .name = "dist",
    .summary = "draws a token from the distribution",
    .params = dist_params,
    .n_params = sizeof dist_params / sizeof dist_params[0],
    .rec_size = sizeof(dist_rec),
    .bare_ok = 1,
    .selector = 1,
    .build = dist_build,
};

/*
 * xtc.c - XTC, "exclude top choices".
 *
 * Owns sift_chain_add_xtc and its stage.
 *
 * Formula (docs/samplers.md, "xtc"): the stage is off (no RNG draw) when
 * probability <= 0 or threshold > 0.5, and does nothing (no draw) with
 * fewer than two candidates. Otherwise it draws u = sift__rng_float, a
 * float in [0, 1), and stops if u > probability (the draw stays
 * consumed). When it fires: with m the largest logit, w_i =
 * trunc(sift__expf(l_i - m) * 2^62), W = sum w_i exactly and
 * T = max(ceil(threshold * W), 1) exactly, the set A = {i : w_i >= T}
 * holds the tokens at or above the threshold (a zero-weight token never
 * is, so threshold 0 cannot keep only a banned token). If |A| >= 2 and
 * n - (|A| - 1) >= min_keep, every member of A except its canonical last
 * (the least likely, ties by largest id) is removed.
 *
 * Because sift__expf is monotone, A is a canonical prefix; the code still
 * treats it as a set (count it, find its smallest canonical key), so the
 * result does not depend on storage order and needs no sort.
 *
 * Reference behaviour: llama.cpp draws a float the same way (from its own
 * generator), sorts by a float softmax, scans the prefix with
 * `p >= threshold` and drops `last` leading tokens when
 * `size - last >= min_keep`. Deliberate differences: exact integer
 * comparison instead of float probabilities, sift's RNG, ties by id, and
 * min_keep is used raw (as llama.cpp does; 0 and 1 behave the same).
 *
 * Capability class: WHOLE; IDENTITY when probability <= 0 or
 * threshold > 0.5. On a slice its removal is certified with the absent
 * tokens' mass bound (xtc_certify_mass).
 */
#include <math.h>

#include "../sift_internal.h"
#include "../core/kernels.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_xtc;

typedef struct xtc_stage {
    sift__stage base;
    float probability;
    float threshold;
    int32_t min_keep;
} xtc_stage;

static int xtc_off(const xtc_stage *x)
{
    return !(x->probability > 0.0f) || x->threshold > 0.5f;
}

static sift_status xtc_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const xtc_stage *x = (const xtc_stage *)st;
    if (xtc_off(x) || a->n < 2)
        return SIFT_OK;
    float u = sift__rng_float(&ctx->rng);
    if (u > x->probability)
        return SIFT_OK;
    float m = sift__max_logit(a->c, a->n);
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    /* A large array first asks the float weights (core/fdraw.c) whether
     * A can hold two tokens; when it cannot, nothing is removed, and the
     * float weights are left for the next stage's float draw or cut. */
    if (sift__fxtc_none(ctx, a, m, x->threshold))
        return SIFT_OK;
    uint64_t *w = ctx->ws->u64a;
    sift__u128 W = sift__weights(a->c, a->n, m, w);
    /* On a slice, the threshold at the present mass plus the absent
     * mass's lower end that the certificate used (0 elsewhere). */
    sift__u128 T = sift__u128_scale_float(sift__u128_add(W, ctx->absent_lo), x->threshold, 1);
    /* A zero-weight token (-inf, or below 2^-62 of the top) is never
     * above the threshold, even when the threshold is 0. */
    if (T.lo == 0 && T.hi == 0)
        T.lo = 1;
    /* w_i >= T as one 64-bit comparison: a T of 2^64 or more is above
     * every weight (at most 2^62), and so is UINT64_MAX. */
    uint64_t t = T.hi ? UINT64_MAX : T.lo;
    /* |A| and where A's smallest canonical key (its canonical last) is;
     * A is a handful of tokens, found by a vector search (core/kernels.h)
     * that passes over the rest. */
    size_t n_above = 0, i_last = 0, i_first = sift__find_w_ge(w, 0, a->n, t);
    uint64_t last = UINT64_MAX;
    for (size_t i = i_first; i < a->n; i = sift__find_w_ge(w, i + 1, a->n, t)) {
        uint64_t k = sift__ckey(a->c[i].logit, a->c[i].id);
        if (k < last) {
            last = k;
            i_last = i;
        }
        n_above++;
    }
    /* Carry (sift__carry_leave), only where nothing is removed: then the
     * array, its length and its largest logit m are those w was computed
     * for, and the dist right after this stage draws from w and W instead
     * of computing them again. A removal takes away A's largest member,
     * the maximum, so the kept set's largest logit is below m (bit for
     * bit equal only when A's members tie at m) and trunc(expf(l - m')
     * 2^62) does not follow exactly from the weights at m: nothing is
     * left on that path, and the record of an earlier stage is stale by
     * sift__carry_take's rule (only the stage right before may leave). */
    if (n_above < 2 || a->n - (n_above - 1) < (size_t)x->min_keep) {
        sift__carry_leave(ctx, a, m, W);
        return SIFT_OK;
    }
    /* Drop A but its last, keeping the storage order; nothing before A's
     * first member moves. The store is unconditional and the count
     * decides, so no branch is mispredicted. */
    size_t j = i_first;
    for (size_t i = i_first; i < a->n; i++) {
        a->c[j] = a->c[i];
        j += (size_t)((w[i] < t) | (i == i_last));
    }
    a->n = j;
    a->dense = 0;
    return SIFT_OK;
}

static sift_class xtc_cls(const sift__stage *st, int64_t *n)
{
    *n = 0;
    return xtc_off((const xtc_stage *)st) ? SIFT_CLASS_IDENTITY : SIFT_CLASS_WHOLE;
}

/* On a slice (present tokens canonical, absent ones bounded by b, their
 * integer mass at most W_A; docs/analyzer.md, "Tail mass"): the row has
 * at least two candidates (present and absent ones), so it draws u; this
 * peeks it from a copy of the RNG, and the slice must draw too (two
 * present tokens). If u > probability, nothing changes on either side.
 * Else T = max(ceil(threshold W), 1) lies in [T_lo, T_hi] for W in
 * [W_lo, W_hi] (the present mass plus the absent mass's lower end,
 * sift__tail_absent_mass_lo, 0 without one; plus its upper end); the
 * apply then uses T_lo (ctx->absent_lo). No absent token is in A when
 * the bound's weight (the largest an absent token can have) is below
 * T_lo, and A is the
 * same for every T when as many present tokens pass T_hi as T_lo. The
 * removal condition counts the candidates, the row's (present + absent)
 * and the slice's (present): both must agree. The members of A weigh
 * more than any absent token, so they and A's canonical last are the
 * row's. The absent tokens are untouched (mass_keeps). */
static int xtc_certify_mass(const sift__stage *st, sift__ctx *ctx, const sift__arr *a,
                            const sift__bound *b)
{
    const xtc_stage *x = (const xtc_stage *)st;
    if (xtc_off(x) || a->n < 2 || a->order != SIFT__ORDER_CANON || !(a->c[0].logit > -INFINITY) ||
        a->c[0].logit < b->logit)
        return 0;
    sift__rng r = ctx->rng;
    if (sift__rng_float(&r) > x->probability)
        return 1;
    float m = a->c[0].logit;
    uint64_t *w = ctx->ws->u64a;
    sift__u128 A_lo, W_lo, W_hi;
    if (!sift__tail_mass_range(b, m, sift__weights(a->c, a->n, m, w), &A_lo, &W_lo, &W_hi))
        return 0;
    sift__u128 T_lo = sift__u128_scale_float(W_lo, x->threshold, 1);
    sift__u128 T_hi = sift__u128_scale_float(W_hi, x->threshold, 1);
    if (T_lo.lo == 0 && T_lo.hi == 0)
        T_lo.lo = 1;
    if (T_hi.lo == 0 && T_hi.hi == 0)
        T_hi.lo = 1;
    uint64_t tl = T_lo.hi ? UINT64_MAX : T_lo.lo, th = T_hi.hi ? UINT64_MAX : T_hi.lo;
    if (b->n_absent > 0 && sift__weight(sift__expf(b->logit - m)) >= tl)
        return 0;
    size_t pass_lo = 0, pass_hi = 0;
    for (size_t i = 0; i < a->n; i++) {
        pass_lo += w[i] >= tl;
        pass_hi += w[i] >= th;
    }
    if (pass_lo != pass_hi)
        return 0;
    if (pass_lo >= 2) {
        uint64_t whole = (uint64_t)a->n + b->n_absent;
        int row_removes = whole - (pass_lo - 1) >= (uint64_t)x->min_keep;
        int slice_removes = a->n - (pass_lo - 1) >= (size_t)x->min_keep;
        if (row_removes != slice_removes)
            return 0;
    }
    ctx->absent_lo = A_lo;
    return 1;
}

/* At most floor(1 / threshold) tokens reach the threshold, all but one
 * of them are removed; threshold 0: any number. */
static int64_t xtc_lowers(const sift__stage *st, int dynamic)
{
    (void)dynamic;
    const xtc_stage *x = (const xtc_stage *)st;
    if (!(x->threshold > 0.0f))
        return -1;
    double n = floor(1.0 / (double)x->threshold);
    return n >= 1.0 ? (int64_t)n - 1 : 0;
}

static const sift__stage_ops xtc_ops = {
    .name = "xtc",
    .apply = xtc_apply,
    .cls = xtc_cls,
    .lowers = xtc_lowers,
    .certify_mass = xtc_certify_mass,
    .mass_keeps = 1,
};

sift_status sift_chain_add_xtc(sift_chain *chain, float probability, float threshold,
                               int32_t min_keep, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_xtc, "probability", probability, err)))
        return s;
    if ((s = sift__param_check(&sift__desc_xtc, "threshold", threshold, err)))
        return s;
    if ((s = sift__param_check(&sift__desc_xtc, "min_keep", min_keep, err)))
        return s;
    xtc_stage *x = (xtc_stage *)sift__stage_alloc(sift__chain_alloc(chain), &xtc_ops, sizeof *x);
    if (!x)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding xtc");
    x->probability = probability;
    x->threshold = threshold;
    x->min_keep = min_keep;
    return sift__chain_push(chain, &x->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct xtc_rec {
    float probability, threshold;
    int32_t min_keep;
} xtc_rec;

static const sift__param xtc_params[] = {
    {.name = "probability",
     .doc = "chance that a step removes the top choices, in [0, 1]",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_IN,
     .lo = 0,
     .hi = 1,
     .required = 1,
     .off = offsetof(xtc_rec, probability),
     .flat_key = "xtc_probability",
     .flat_def = 0},
    {.name = "threshold",
     .doc = "probability a token needs to count as a top choice, in [0, 1]",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_IN,
     .lo = 0,
     .hi = 1,
     .def = 0.1,
     .off = offsetof(xtc_rec, threshold),
     .flat_key = "xtc_threshold",
     .flat_def = 0.1},
    SIFT__PARAM_MIN_KEEP(xtc_rec),
};

static sift_status xtc_build(sift_chain *c, const void *rec, const sift__build_env *env,
                             sift_error *err)
{
    const xtc_rec *r = rec;
    (void)env;
    return sift_chain_add_xtc(c, r->probability, r->threshold, r->min_keep, err);
}

static sift_class xtc_desc_cls(const void *rec, int64_t *k)
{
    const xtc_rec *r = rec;
    *k = 0;
    return r->probability > 0 && r->threshold <= 0.5f ? SIFT_CLASS_WHOLE : SIFT_CLASS_IDENTITY;
}

static void xtc_lint(const void *rec, sift__lint *l)
{
    const xtc_rec *r = rec;
    if (r->probability == 0)
        l->warn(l, "probability", "xtc probability 0 turns the stage off");
    if (r->threshold > 0.5f)
        l->warn(l, "threshold",
                "xtc threshold above 0.5 turns the stage off (at most one token can reach it)");
}

static int xtc_flat_active(void *rec)
{
    const xtc_rec *r = rec;
    return !(r->probability <= 0 || r->threshold > 0.5f);
}

static const char *const xtc_flat_names[] = {"xtc", NULL};

const sift__sampler_desc sift__desc_xtc = {
    .name = "xtc",
    .summary = "exclude top choices: sometimes removes every likely token but the least likely",
    .params = xtc_params,
    .n_params = sizeof xtc_params / sizeof xtc_params[0],
    .rec_size = sizeof(xtc_rec),
    .main = "probability",
    .build = xtc_build,
    .cls = xtc_desc_cls,
    .lint = xtc_lint,
    .flat_names = xtc_flat_names,
    .flat_char = 'x',
    .flat_order = 8,
    .flat_active = xtc_flat_active,
};

/*
 * epsilon.c - epsilon sampling (a cut at an absolute probability).
 *
 * Owns sift_chain_add_epsilon and its stage.
 *
 * Formula (docs/samplers.md, "epsilon"): over the current candidates, with
 * m the largest logit, w_i = trunc(sift__expf(l_i - m) * 2^62) and the
 * exact 128-bit mass W = sum w_i, the threshold is T = ceil(epsilon * W),
 * computed exactly from the float epsilon. The stage keeps every
 * candidate with w_i >= T, i.e. whose probability w_i / W is at least
 * epsilon, an exact integer comparison. If fewer than max(min_keep, 1)
 * pass, it keeps the canonical first max(min_keep, 1) instead (all of
 * them if there are fewer). w is monotone in the logit, so the passing
 * candidates are a canonical prefix and the fallback only lengthens it.
 * epsilon = 0 is a no-op; epsilon = 1 keeps a token only when it holds
 * the whole mass, else falls back to the first max(min_keep, 1).
 *
 * Reference behaviour: Hugging Face's EpsilonLogitsWarper
 * (epsilon_cutoff) computes a float32 softmax and removes the tokens with
 * probability < epsilon unless their score reaches the
 * min_tokens_to_keep-th largest score (default 1). Deliberate
 * differences: exact masses instead of a float softmax, ties at the
 * min_keep-th logit broken by id (HF keeps every tied token), and
 * epsilon = 0 or 1 accepted (HF asks for 0 < epsilon < 1). vLLM and
 * llama.cpp have no such sampler.
 *
 * Capability class: THRESHOLD; IDENTITY when epsilon <= 0. The threshold
 * depends on the whole row's mass, but on a slice that mass lies in a
 * known interval: the present mass W_p, plus at most (V - n) absent
 * tokens of weight at most w_b, the weight of the bound (absent logits
 * are <= the bound, and w is monotone). epsilon_certify checks that no
 * absent token can pass and that no present token changes its verdict
 * anywhere in that interval (see there), so the slice gives the row's
 * kept set bit for bit or asks for the row.
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_epsilon;

typedef struct epsilon_stage {
    sift__stage base;
    float epsilon;
    int32_t min_keep;
} epsilon_stage;

/* w >= T for a 64-bit weight and a 128-bit threshold. */
static inline int weight_ge(uint64_t w, sift__u128 T)
{
    return T.hi == 0 && w >= T.lo;
}

static sift_status epsilon_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const epsilon_stage *t = (const epsilon_stage *)st;
    if (!(t->epsilon > 0.0f))
        return SIFT_OK;
    float m = sift__max_logit(a->c, a->n);
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    size_t keep_min = t->min_keep > 1 ? (size_t)t->min_keep : 1;
    uint64_t *w = ctx->ws->u64a;
    sift__u128 W = sift__weights(a->c, a->n, m, w);
    sift__u128 T = sift__u128_scale_float(W, t->epsilon, 1);
    size_t pass = 0;
    for (size_t i = 0; i < a->n; i++)
        pass += (size_t)weight_ge(w[i], T);
    if (pass == a->n)
        return SIFT_OK;
    if (pass < keep_min) {
        sift__arr_keep_top(ctx, a, keep_min);
        return SIFT_OK;
    }
    size_t j = 0;
    for (size_t i = 0; i < a->n; i++)
        if (weight_ge(w[i], T))
            a->c[j++] = a->c[i];
    a->n = j;
    a->dense = 0;
    return SIFT_OK;
}

static sift_class epsilon_cls(const sift__stage *st, int64_t *n)
{
    const epsilon_stage *t = (const epsilon_stage *)st;
    *n = 0;
    return t->epsilon > 0.0f ? SIFT_CLASS_THRESHOLD : SIFT_CLASS_IDENTITY;
}

/* On a slice (present tokens canonical, absent ones bounded by b):
 *  - the row's largest logit is present when the first present token is
 *    not below the bound, so every present weight w_i is the row's;
 *  - the row's mass W lies in [W_lo, W_hi], W_lo the present mass and
 *    W_hi = W_lo + the absent mass bound (sift__tail_absent_mass: at
 *    most (V - n) * w_b, w_b the weight of the bound's logit, or less
 *    with the slice's tail mass);
 *  - T = ceil(epsilon * W) is non-decreasing in W, so it lies in
 *    [T_lo, T_hi], the thresholds of those two masses;
 *  - if w_b < T_lo no absent token passes; if as many present tokens
 *    pass T_hi as pass T_lo, every present verdict is the same for every
 *    T in between (the passers of T_hi are among those of T_lo);
 *  - in the fallback the canonical first keep_min must all be ahead of
 *    the bound, as for min_p.
 * Applying the stage to the present tokens uses T_lo, which then gives
 * the row's kept set. */
static int epsilon_certify(const sift__stage *st, sift__ctx *ctx, const sift__arr *a,
                           const sift__bound *b)
{
    const epsilon_stage *t = (const epsilon_stage *)st;
    if (a->n == 0 || (size_t)a->V < a->n || !(a->c[0].logit > -INFINITY) ||
        a->c[0].logit < b->logit)
        return 0;
    float m = a->c[0].logit;
    uint64_t *w = ctx->ws->u64a;
    sift__u128 W_lo = sift__weights(a->c, a->n, m, w);
    uint64_t absent = b->n_absent;
    uint64_t wb = sift__weight(sift__expf(b->logit - m));
    sift__u128 W_hi = sift__u128_add(W_lo, sift__tail_absent_mass(b, m));
    sift__u128 T_lo = sift__u128_scale_float(W_lo, t->epsilon, 1);
    sift__u128 T_hi = sift__u128_scale_float(W_hi, t->epsilon, 1);
    if (absent > 0 && weight_ge(wb, T_lo))
        return 0;
    size_t pass_lo = 0, pass_hi = 0;
    for (size_t i = 0; i < a->n; i++) {
        pass_lo += (size_t)weight_ge(w[i], T_lo);
        pass_hi += (size_t)weight_ge(w[i], T_hi);
    }
    if (pass_lo != pass_hi)
        return 0;
    size_t keep_min = t->min_keep > 1 ? (size_t)t->min_keep : 1;
    if (pass_lo >= keep_min)
        return 1;
    return keep_min <= a->n && sift__bound_ahead(b, &a->c[keep_min - 1]);
}

static const sift__stage_ops epsilon_ops = {
    .name = "epsilon",
    .apply = epsilon_apply,
    .cls = epsilon_cls,
    .certify = epsilon_certify,
};

sift_status sift_chain_add_epsilon(sift_chain *chain, float epsilon, int32_t min_keep,
                                   sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_epsilon, "epsilon", epsilon, err)))
        return s;
    if ((s = sift__param_check(&sift__desc_epsilon, "min_keep", min_keep, err)))
        return s;
    epsilon_stage *t =
        (epsilon_stage *)sift__stage_alloc(sift__chain_alloc(chain), &epsilon_ops, sizeof *t);
    if (!t)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding epsilon");
    t->epsilon = epsilon;
    t->min_keep = min_keep;
    return sift__chain_push(chain, &t->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct epsilon_rec {
    float epsilon;
    int32_t min_keep;
} epsilon_rec;

/* llama.cpp has no epsilon sampler, so there are no flat keys. */
static const sift__param epsilon_params[] = {
    {.name = "epsilon",
     .doc = "smallest probability a token may have to be kept, in [0, 1]",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_IN,
     .lo = 0,
     .hi = 1,
     .required = 1,
     .off = offsetof(epsilon_rec, epsilon)},
    {.name = "min_keep",
     .doc = "keep at least this many tokens",
     .type = SIFT__PT_INT,
     .range = SIFT__R_IN,
     .lo = 0,
     .hi = INT32_MAX,
     .off = offsetof(epsilon_rec, min_keep)},
};

static sift_status epsilon_build(sift_chain *c, const void *rec, const sift__build_env *env,
                                 sift_error *err)
{
    const epsilon_rec *r = rec;
    (void)env;
    return sift_chain_add_epsilon(c, r->epsilon, r->min_keep, err);
}

static sift_class epsilon_desc_cls(const void *rec, int64_t *k)
{
    const epsilon_rec *r = rec;
    *k = 0;
    return r->epsilon > 0 ? SIFT_CLASS_THRESHOLD : SIFT_CLASS_IDENTITY;
}

static void epsilon_lint(const void *rec, sift__lint *l)
{
    const epsilon_rec *r = rec;
    if (r->epsilon == 0)
        l->warn(l, "epsilon", "epsilon 0 turns the stage off");
}

const sift__sampler_desc sift__desc_epsilon = {
    .name = "epsilon",
    .summary = "keeps the tokens whose probability is at least epsilon (HF epsilon_cutoff)",
    .params = epsilon_params,
    .n_params = sizeof epsilon_params / sizeof epsilon_params[0],
    .rec_size = sizeof(epsilon_rec),
    .main = "epsilon",
    .keeps_argmax = 1,
    .build = epsilon_build,
    .cls = epsilon_desc_cls,
    .lint = epsilon_lint,
};

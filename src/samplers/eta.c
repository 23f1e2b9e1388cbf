/*
 * eta.c - eta sampling (a cut at an entropy-dependent probability).
 *
 * Owns sift_chain_add_eta and its stage.
 *
 * Formula (docs/samplers.md, "eta"): over the current candidates, with m
 * the largest logit, w_i = trunc(sift__expf(l_i - m) * 2^62) and the
 * exact mass W = sum w_i, the entropy H (in nats) is typical's, bit for
 * bit:
 *   S   = W as a double (correctly rounded), inv = 1.0 / S,
 *   LS  = sift__log(S) - 62 * ln2,
 *   H   = sum over ascending token id (sift__dsum_idorder) of
 *         ((double)w_i * inv) * (LS - (double)(l_i - m)), 0 when w_i = 0
 * (sift__entropy_sum). The cut is
 *   c   = (float)min((double)eta, sift__sqrt(eta) * sift__exp(-H)),
 * one rounding to float at the end, and the stage keeps every candidate
 * with w_i >= T = ceil(c * W) (exact), or the canonical first
 * max(min_keep, 1) when fewer pass (all of them if there are fewer). The
 * passing candidates are a canonical prefix (w is monotone in the logit).
 * eta = 0 is a no-op.
 *
 * Reference behaviour: Hugging Face's EtaLogitsWarper (eta_cutoff)
 * computes the float32 softmax and entropy, eta = min(epsilon,
 * sqrt(epsilon) * exp(-entropy)) in float32, and removes the tokens with
 * probability < eta unless their score reaches the min_tokens_to_keep-th
 * largest. Deliberate differences: exact masses, a double entropy summed
 * in id order and rounded to float once, ties at the min_keep-th logit
 * broken by id, and eta = 0 or 1 accepted (HF asks for 0 < eta < 1).
 * vLLM and llama.cpp have no such sampler.
 *
 * Capability class: WHOLE; IDENTITY when eta <= 0. The cut depends on the
 * entropy of the whole row: every absent token adds a term to H and mass
 * to the normaliser, and the cut is compared after a double sum in id
 * order and a rounding to float. An interval for H from a slice would
 * need an error bound on that sum, which sift does not have, so the stage
 * never claims a slice: the chain reads the whole row (k = 0).
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_eta;

#define ETA_LN2 0.6931471805599453

typedef struct eta_stage {
    sift__stage base;
    float eta;
    int32_t min_keep;
} eta_stage;

/* w >= T for a 64-bit weight and a 128-bit threshold. */
static inline int weight_ge(uint64_t w, sift__u128 T)
{
    return T.hi == 0 && w >= T.lo;
}

static sift_status eta_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const eta_stage *t = (const eta_stage *)st;
    if (!(t->eta > 0.0f))
        return SIFT_OK;
    float m = sift__max_logit(a->c, a->n);
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    size_t keep_min = t->min_keep > 1 ? (size_t)t->min_keep : 1;
    /* The entropy is summed in id order, so store the array that way (a
     * no-op for the usual full row). */
    sift__arr_idorder(ctx, a);
    uint64_t *w = ctx->ws->u64a;
    sift__u128 W = sift__weights(a->c, a->n, m, w);
    double S = sift__u128_to_double(W);
    double inv = 1.0 / S;
    double LS = sift__log(S) - 62.0 * ETA_LN2;
    double H = sift__entropy_sum(a->c, w, a->n, m, LS, inv);
    double e = (double)t->eta;
    double cut = sift__sqrt(e) * sift__exp(-H);
    if (e < cut)
        cut = e;
    sift__u128 T = sift__u128_scale_float(W, (float)cut, 1);
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

static sift_class eta_cls(const sift__stage *st, int64_t *n)
{
    const eta_stage *t = (const eta_stage *)st;
    *n = 0;
    return t->eta > 0.0f ? SIFT_CLASS_WHOLE : SIFT_CLASS_IDENTITY;
}

static const sift__stage_ops eta_ops = {
    .name = "eta",
    .apply = eta_apply,
    .cls = eta_cls,
};

sift_status sift_chain_add_eta(sift_chain *chain, float eta, int32_t min_keep, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_eta, "eta", eta, err)))
        return s;
    if ((s = sift__param_check(&sift__desc_eta, "min_keep", min_keep, err)))
        return s;
    eta_stage *t = (eta_stage *)sift__stage_alloc(sift__chain_alloc(chain), &eta_ops, sizeof *t);
    if (!t)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding eta");
    t->eta = eta;
    t->min_keep = min_keep;
    return sift__chain_push(chain, &t->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct eta_rec {
    float eta;
    int32_t min_keep;
} eta_rec;

/* llama.cpp has no eta sampler, so there are no flat keys. */
static const sift__param eta_params[] = {
    {.name = "eta",
     .doc = "cut scale: the cut is min(eta, sqrt(eta) exp(-entropy)), eta in [0, 1]",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_IN,
     .lo = 0,
     .hi = 1,
     .required = 1,
     .off = offsetof(eta_rec, eta)},
    {.name = "min_keep",
     .doc = "keep at least this many tokens",
     .type = SIFT__PT_INT,
     .range = SIFT__R_IN,
     .lo = 0,
     .hi = INT32_MAX,
     .off = offsetof(eta_rec, min_keep)},
};

static sift_status eta_build(sift_chain *c, const void *rec, const sift__build_env *env,
                             sift_error *err)
{
    const eta_rec *r = rec;
    (void)env;
    return sift_chain_add_eta(c, r->eta, r->min_keep, err);
}

static sift_class eta_desc_cls(const void *rec, int64_t *k)
{
    const eta_rec *r = rec;
    *k = 0;
    return r->eta > 0 ? SIFT_CLASS_WHOLE : SIFT_CLASS_IDENTITY;
}

static void eta_lint(const void *rec, sift__lint *l)
{
    const eta_rec *r = rec;
    if (r->eta == 0)
        l->warn(l, "eta", "eta 0 turns the stage off");
}

const sift__sampler_desc sift__desc_eta = {
    .name = "eta",
    .summary = "keeps the tokens above an entropy-dependent probability (HF eta_cutoff)",
    .params = eta_params,
    .n_params = sizeof eta_params / sizeof eta_params[0],
    .rec_size = sizeof(eta_rec),
    .main = "eta",
    .keeps_argmax = 1,
    .build = eta_build,
    .cls = eta_desc_cls,
    .lint = eta_lint,
};

/*
 * adaptive_p.c - the adaptive-p selector (llama.cpp's adaptive_p).
 *
 * Owns sift_chain_add_adaptive_p and its stage.
 *
 * Formula (docs/samplers.md, "adaptive_p"). The stage aims the draw at a
 * target probability: it prefers tokens whose probability is near an
 * adapted target, and moves that target so that the running average of
 * the chosen tokens' probabilities approaches `target`.
 *
 * State: a weighted sum s and a total weight t of an exponential moving
 * average, both double, s = target / (1 - decay) and t = 1 / (1 - decay)
 * at creation and reset (so the average s / t starts at target).
 *
 * A step, over the current candidates with m the largest logit, the exact
 * weights w_i = trunc(sift__expf(l_i - m) * 2^62) and W = sum w_i:
 *   S   = (double)W (correctly rounded),  p_i = (double)w_i / S,
 *   A   = clamp(2 * target - s / t, 0, 1)        (the adapted target),
 *   d_i = |p_i - A| / 0.3,
 *   l'_i = (float)(5.0 - 10.0 * d_i * d_i / (1.0 + d_i))   (l_i finite),
 * -inf logits stay -inf. Every l'_i is in [-20.7, 5], so every finite
 * token gets a non-zero weight. The selected token is then dist's draw
 * over the new logits: one 64-bit RNG output U, T = floor(W' * U / 2^64)
 * over their exact weights, the first token in canonical order (new
 * logit descending, id ascending) whose inclusive prefix weight exceeds
 * T; a single candidate is selected without a draw. The token and its
 * original p_i are kept as a pending record; accept(token) updates
 *   s <- p_sel + decay * s,   t <- 1 + decay * t
 * only if `token` is the pending token, and clears the record either way
 * (mirostat's rule: sampling changes no state; a rejected or replaced
 * draw moves nothing). target < 0 turns the stage into dist: no
 * transform, no record, s and t never move.
 *
 * Reference behaviour (llama.cpp src/llama-sampler.cpp, adaptive-p):
 * the same transform and update with float arithmetic, libm expf, a float
 * softmax, std::discrete_distribution on its own mt19937 in array order;
 * decay is clamped to [0, 0.99]. Deliberate differences: exact weights
 * and sift's own functions, double state, the chain's RNG and dist's
 * canonical walk, a single candidate selected without a draw, and decay
 * outside [0, 0.99] or target above 1 rejected (SIFT_E_ARG) instead of
 * clamped. llama.cpp's "total weight 0" branch is unreachable (t >= 1
 * always) and not kept.
 *
 * Capability class: WHOLE (the transform needs every candidate's
 * probability, and a token of probability ~0 gets a logit near the top
 * when the adapted target is low, so no slice can bound the draw).
 * Selector.
 */
#include <math.h>

#include "../core/kernels.h"
#include "../sift_internal.h"
#include "registry.h"

/* The descriptors (end of the file): the constructors check their
 * arguments against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_adaptive_p;

typedef struct adaptive_p_stage {
    sift__stage base;
    float target;
    float decay;
    double sum;    /* s: sum of p_sel * decay^age */
    double weight; /* t: sum of decay^age */
    int has_pending;
    int32_t pending_token;
    double pending_p; /* the original probability of the pending token */
} adaptive_p_stage;

static inline double clamp01(double x)
{
    return x < 0.0 ? 0.0 : x > 1.0 ? 1.0 : x;
}

/* Replaces the logits of `a` by the adaptive transform; p[i] receives
 * the original probability of a->c[i]. a->c[0..n) has a finite logit. */
static void transform(const adaptive_p_stage *s, sift__ctx *ctx, sift__arr *a, double *p)
{
    float m = sift__max_logit(a->c, a->n);
    uint64_t *w = ctx->ws->u64a;
    double S = sift__u128_to_double(sift__weights(a->c, a->n, m, w));
    double A = clamp01(2.0 * (double)s->target - s->sum / s->weight);
    for (size_t i = 0; i < a->n; i++) {
        p[i] = (double)w[i] / S;
        if (!(a->c[i].logit > -INFINITY))
            continue;
        double x = p[i] - A;
        double d = (x < 0.0 ? -x : x) / 0.3;
        a->c[i].logit = (float)(5.0 - 10.0 * d * d / (1.0 + d));
    }
    sift__arr_touched(a);
}

/* dist's draw over `a`: the index of the selected candidate. */
static size_t draw(sift__ctx *ctx, const sift__arr *a)
{
    if (a->n == 1)
        return 0;
    uint64_t *w = ctx->ws->u64a;
    sift__u128 W = sift__weights(a->c, a->n, sift__max_logit(a->c, a->n), w);
    sift__u128 T = sift__u128_scale_u64(W, sift__rng_next(&ctx->rng));
    uint64_t cut;
    sift__mass_prefix(ctx, a->c, w, a->n, T, 1, &cut);
    /* cut is the key of a candidate of a: its id is found */
    return sift__find_id(a->c, a->n, sift__ckey_id(cut));
}

static sift_status adaptive_p_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    adaptive_p_stage *s = (adaptive_p_stage *)st;
    if (!(sift__max_logit(a->c, a->n) > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    if (s->target < 0.0f) {
        ctx->selected = a->c[draw(ctx, a)].id;
        return SIFT_OK;
    }
    double *p = ctx->ws->f64;
    transform(s, ctx, a, p);
    size_t sel = draw(ctx, a);
    ctx->selected = a->c[sel].id;
    s->has_pending = 1;
    s->pending_token = a->c[sel].id;
    s->pending_p = p[sel];
    return SIFT_OK;
}

/* The support of the draw is every candidate, with the transformed
 * logits (so sift_chain_distribution reports the probabilities the draw
 * uses). */
static sift_status adaptive_p_support(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    adaptive_p_stage *s = (adaptive_p_stage *)st;
    if (!(sift__max_logit(a->c, a->n) > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    if (s->target >= 0.0f)
        transform(s, ctx, a, ctx->ws->f64);
    return SIFT_OK;
}

static void adaptive_p_accept(sift__stage *st, int32_t token)
{
    adaptive_p_stage *s = (adaptive_p_stage *)st;
    if (s->has_pending && token == s->pending_token) {
        s->sum = s->pending_p + (double)s->decay * s->sum;
        s->weight = 1.0 + (double)s->decay * s->weight;
    }
    s->has_pending = 0;
}

static void adaptive_p_reset(sift__stage *st)
{
    adaptive_p_stage *s = (adaptive_p_stage *)st;
    s->sum = (double)s->target / (1.0 - (double)s->decay);
    s->weight = 1.0 / (1.0 - (double)s->decay);
    s->has_pending = 0;
    s->pending_token = 0;
    s->pending_p = 0.0;
}

static uint64_t adaptive_p_digest(const sift__stage *st, uint64_t h)
{
    const adaptive_p_stage *s = (const adaptive_p_stage *)st;
    h = sift__fnv(h, &s->sum, sizeof s->sum);
    h = sift__fnv(h, &s->weight, sizeof s->weight);
    h = sift__fnv(h, &s->has_pending, sizeof s->has_pending);
    if (s->has_pending) {
        h = sift__fnv(h, &s->pending_token, sizeof s->pending_token);
        h = sift__fnv(h, &s->pending_p, sizeof s->pending_p);
    }
    return h;
}

static sift_class adaptive_p_cls(const sift__stage *st, int64_t *n)
{
    (void)st;
    *n = 0;
    return SIFT_CLASS_WHOLE;
}

/* clone: the default (a copy of the block: the state and the pending
 * record travel with it, as mirostat's do). */
static const sift__stage_ops adaptive_p_ops = {
    .name = "adaptive_p",
    .apply = adaptive_p_apply,
    .support = adaptive_p_support,
    .is_selector = 1,
    .cls = adaptive_p_cls,
    .accept = adaptive_p_accept,
    .reset = adaptive_p_reset,
    .digest = adaptive_p_digest,
};

sift_status sift_chain_add_adaptive_p(sift_chain *chain, float target, float decay, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_adaptive_p, "target", target, err)) ||
        (s = sift__param_check(&sift__desc_adaptive_p, "decay", decay, err)))
        return s;
    adaptive_p_stage *t =
        (adaptive_p_stage *)sift__stage_alloc(sift__chain_alloc(chain), &adaptive_p_ops, sizeof *t);
    if (!t)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding adaptive_p");
    t->target = target;
    t->decay = decay;
    adaptive_p_reset(&t->base);
    return sift__chain_push(chain, &t->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct adaptive_p_rec {
    float target, decay;
} adaptive_p_rec;

/* The flat form's keys are llama.cpp's adaptive_target and
 * adaptive_decay (common_params_sampling, llama-server's request);
 * llama.cpp accepts any negative target and clamps the decay, which
 * their flat rules say. */
static const sift__param adaptive_p_params[] = {
    {.name = "target",
     .doc = "probability the chosen tokens should average, in [-1, 1] (negative = plain dist)",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_IN,
     .lo = -1,
     .hi = 1,
     .range_note = "negative = off",
     .def = 0.5,
     .off = offsetof(adaptive_p_rec, target),
     .flat_key = "adaptive_target",
     .flat_def = -1,
     /* llama.cpp takes any target <= 1; a negative one is off. */
     .flat_rule = SIFT__FLAT_NEG_OFF,
     .flat_range = SIFT__R_LE,
     .flat_hi = 1},
    {.name = "decay",
     .doc = "decay of the moving average, in [0, 0.99] (history about 1 / (1 - decay))",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_IN,
     .lo = 0,
     .hi = 0.99,
     .def = 0.9,
     .off = offsetof(adaptive_p_rec, decay),
     .flat_key = "adaptive_decay",
     .flat_def = 0.9,
     /* llama.cpp clamps the decay into the range. */
     .flat_rule = SIFT__FLAT_CLAMP,
     .flat_range = SIFT__R_ANY},
};

static sift_status adaptive_p_build(sift_chain *c, const void *rec, const sift__build_env *env,
                                    sift_error *err)
{
    const adaptive_p_rec *r = rec;
    (void)env;
    return sift_chain_add_adaptive_p(c, r->target, r->decay, err);
}

/* llama.cpp's common_sampler_init builds adaptive-p in place of dist
 * when the samplers list names it; a negative target makes it draw as
 * dist does (sift__cfg_flat_params then builds dist itself). */
static int adaptive_p_flat_active(void *rec)
{
    return ((const adaptive_p_rec *)rec)->target >= 0;
}

static const char *const adaptive_p_flat_names[] = {"adaptive_p", "adaptive-p", NULL};

const sift__sampler_desc sift__desc_adaptive_p = {
    .name = "adaptive_p",
    .summary = "adaptive-p: draws near a target probability that adapts to the history",
    .params = adaptive_p_params,
    .n_params = sizeof adaptive_p_params / sizeof adaptive_p_params[0],
    .rec_size = sizeof(adaptive_p_rec),
    .main = "target",
    .bare_ok = 1,
    .selector = 1,
    .build = adaptive_p_build,
    .flat_names = adaptive_p_flat_names,
    .flat_char = 'a',
    .flat_active = adaptive_p_flat_active,
};

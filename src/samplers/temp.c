/*
 * temp.c - temperature ("temp") and dynamic temperature ("temp_ext").
 *
 * temp(t), t finite:
 *   t == 1      nothing (class IDENTITY).
 *   t > 0       every logit l <- l / t, one IEEE float division each;
 *               -inf stays -inf (class MONOTONE: division by a positive
 *               number is monotone, rounding can only create ties).
 *               Greedy fallback (BAD_INPUTS L-06): when t is so small that
 *               the largest logit divided by t overflows (to +inf, or to
 *               -inf for a negative largest logit), the division would put
 *               +inf or an all -inf row in front of the next stage, so the
 *               stage behaves as t <= 0 instead. Division is monotone, so
 *               testing the largest logit alone decides it.
 *   t <= 0      keep only the canonical first candidate (largest logit,
 *               smallest id), its logit unchanged (class TOP(1)); every
 *               candidate -inf is SIFT_E_NO_CANDIDATE.
 *
 * temp_ext(t, delta, exponent), delta > 0 (class WHOLE): with n >= 2
 * candidates, m the largest logit, w_i = trunc(expf(l_i - m) * 2^62) and
 * W = sum w_i (exact):
 *   S   = (double)W, LS = log(S) - 62 ln 2      (= log of the softmax sum)
 *   s_i = LS - (double)(l_i - m)                (surprise, float subtraction)
 *   p_i = (double)w_i * (1 / S)
 *   H   = sum over ascending ids of (w_i > 0 ? p_i * s_i : 0)
 *         (sift__dsum_idorder: eight lanes, fixed combination)
 *   dyn = min_t + (max_t - min_t) * pow(H / log(n), exponent), with
 *         min_t = max(0, t - delta), max_t = t + delta, all in double;
 * then temp((float)dyn) with the t <= 0 and overflow rules above (a dyn
 * above FLT_MAX is clamped to FLT_MAX so that -inf / dyn cannot be NaN).
 * n <= 1 changes nothing. delta == 0 is exactly temp(t), class included.
 *
 * Reference behaviour: llama.cpp's temp_impl masks every candidate but the
 * first maximum to -inf and keeps the size; sift removes them (the set is
 * the same distribution). llama.cpp computes the dynamic temperature's
 * entropy from a float softmax with logf and powf, and renormalises after;
 * sift uses the exact integer weights and its own double log/pow, so dyn
 * can differ in the last bits. No division ever overflows into a row.
 * Capability classes: see above.
 */
#include <float.h>
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_temperature;

typedef struct temp_stage {
    sift__stage base;
    float t;
    float delta;    /* temp_ext only; 0 for plain temp */
    float exponent; /* temp_ext only */
} temp_stage;

/* Keeps the canonical first candidate only, its logit unchanged. */
static sift_status keep_first(sift__ctx *ctx, sift__arr *a, const char *name)
{
    uint64_t best = 0;
    size_t bi = 0;
    float m = -INFINITY;
    for (size_t i = 0; i < a->n; i++) {
        uint64_t k = sift__ckey(a->c[i].logit, a->c[i].id);
        if (k > best) {
            best = k;
            bi = i;
        }
        m = a->c[i].logit > m ? a->c[i].logit : m;
    }
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, name);
    a->c[0] = a->c[bi];
    a->n = 1;
    a->dense = a->V == 1;
    return SIFT_OK;
}

/* c[i].logit = c[i].logit / t for every candidate: one IEEE float
 * division each. The row is an array of {id, logit} pairs, which the
 * compiler does not vectorise by itself; with SSE2 (every x86-64) four
 * logits are moved into one register by shuffles (exact bit moves),
 * divided at once (the same IEEE division per lane) and interleaved back
 * with their ids. */
static void divide_logits(sift_candidate *c, size_t n, float t)
{
    size_t i = 0;
#if defined(__SSE2__)
    const __m128 tv = _mm_set1_ps(t);
    for (; i + 4 <= n; i += 4) {
        __m128 a = _mm_loadu_ps((const float *)(const void *)(c + i));     /* id0 l0 id1 l1 */
        __m128 b = _mm_loadu_ps((const float *)(const void *)(c + i + 2)); /* id2 l2 id3 l3 */
        __m128 q = _mm_div_ps(_mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)), tv);
        __m128 ids = _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        _mm_storeu_ps((float *)(void *)(c + i), _mm_unpacklo_ps(ids, q));
        _mm_storeu_ps((float *)(void *)(c + i + 2), _mm_unpackhi_ps(ids, q));
    }
#endif
    for (; i < n; i++)
        c[i].logit = c[i].logit / t;
}

/* temp(t) on the current set, whose largest logit is m (t > 0, t != 1);
 * the semantics of the file comment. m only decides whether the largest
 * quotient overflows, so the sign of a zero maximum does not matter. */
static sift_status apply_temp_m(sift__ctx *ctx, sift__arr *a, float t, const char *name, float m)
{
    if (m > -INFINITY) {
        float q = m / t;
        if (q == INFINITY || q == -INFINITY)
            return keep_first(ctx, a, name);
    }
    divide_logits(a->c, a->n, t);
    /* Division keeps the order of distinct logits but can merge
     * neighbours, which canonical order then ranks by id: a canonical
     * array may no longer be one. It still is unless two neighbours now
     * tie out of id order, which one pass tells. */
    if (a->order == SIFT__ORDER_CANON) {
        for (size_t i = 1; i < a->n; i++)
            if (a->c[i - 1].logit == a->c[i].logit && a->c[i - 1].id > a->c[i].id) {
                sift__arr_touched(a);
                break;
            }
    }
    return SIFT_OK;
}

/* temp(t) on the current set; the semantics of the file comment. */
static sift_status apply_temp(sift__ctx *ctx, sift__arr *a, float t, const char *name)
{
    if (t == 1.0f)
        return SIFT_OK;
    if (!(t > 0.0f))
        return keep_first(ctx, a, name);
    return apply_temp_m(ctx, a, t, name, sift__arr_max_logit(a));
}

static sift_status temp_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const temp_stage *s = (const temp_stage *)st;
    return apply_temp(ctx, a, s->t, st->ops->name);
}

/* The entropy H of the softmax of `a` in nats, exactly as the file comment
 * defines it. Puts `a` in id order. m must be finite. */
static double entropy(sift__ctx *ctx, sift__arr *a, float m)
{
    sift__arr_idorder(ctx, a);
    uint64_t *w = ctx->ws->u64a;
    sift__u128 W = sift__weights(a->c, a->n, m, w);
    double S = sift__u128_to_double(W);
    double LS = sift__log(S) - 62.0 * 0.6931471805599453;
    double inv = 1.0 / S;
    /* H = dsum_idorder of w_i > 0 ? ((double)w_i * inv) * s_i : 0, in one
     * vector pass (core/weights.c) */
    return sift__entropy_sum(a->c, w, a->n, m, LS, inv);
}

static sift_status temp_ext_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const temp_stage *s = (const temp_stage *)st;
    if (!(s->delta > 0.0f))
        return apply_temp(ctx, a, s->t, st->ops->name);
    if (a->n <= 1)
        return SIFT_OK;
    float m = sift__max_logit(a->c, a->n);
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    double min_t = (double)s->t - (double)s->delta;
    if (min_t < 0.0)
        min_t = 0.0;
    double max_t = (double)s->t + (double)s->delta;
    double Hmax = sift__log((double)a->n);
    double H = entropy(ctx, a, m);
    double dyn = min_t + (max_t - min_t) * sift__pow(H / Hmax, (double)s->exponent);
    /* t + delta can exceed the float range; FLT_MAX keeps -inf / t = -inf. */
    float ft = dyn > (double)FLT_MAX ? FLT_MAX : (float)dyn;
    /* entropy() only reorders the set: its largest logit is still m, so
     * the division does not look for it again. */
    if (ft == 1.0f)
        return SIFT_OK;
    if (!(ft > 0.0f))
        return keep_first(ctx, a, st->ops->name);
    return apply_temp_m(ctx, a, ft, st->ops->name, m);
}

/* The class of temp(t). */
static sift_class temp_class_of(float t, int64_t *n)
{
    if (t == 1.0f) {
        *n = 0;
        return SIFT_CLASS_IDENTITY;
    }
    if (!(t > 0.0f)) {
        *n = 1;
        return SIFT_CLASS_TOP;
    }
    *n = 0;
    return SIFT_CLASS_MONOTONE;
}

static sift_class temp_cls(const sift__stage *st, int64_t *n)
{
    return temp_class_of(((const temp_stage *)st)->t, n);
}

static sift_class temp_ext_cls(const sift__stage *st, int64_t *n)
{
    const temp_stage *s = (const temp_stage *)st;
    if (!(s->delta > 0.0f))
        return temp_class_of(s->t, n);
    *n = 0;
    return SIFT_CLASS_WHOLE;
}

/* The image of a logit bound for the prefix path (MONOTONE only): the
 * division apply does, so an absent token with l <= bound has
 * l / t <= bound / t. Only asked when the class is MONOTONE (t > 0, t != 1,
 * no dynamic part); NaN ("cannot say") otherwise. The greedy fallback
 * removes tokens, absent ones too: the prefix path maps the present
 * maximum as well and sends the step to the whole row when that is not
 * finite (core/certify.c). */
static float temp_map(float t, float bound)
{
    if (!(t > 0.0f))
        return NAN;
    return bound / t;
}

static float temp_map_bound(const sift__stage *st, float bound)
{
    return temp_map(((const temp_stage *)st)->t, bound);
}

static float temp_ext_map_bound(const sift__stage *st, float bound)
{
    const temp_stage *s = (const temp_stage *)st;
    if (s->delta > 0.0f)
        return NAN;
    return temp_map(s->t, bound);
}

/* The divisor of the MONOTONE map l -> l / t, for the tail-mass bound
 * (core/tail.c); NaN when the map is not one division (temp_ext with
 * delta > 0). Only asked when the class is MONOTONE. */
static float temp_tail_divisor(const sift__stage *st)
{
    const temp_stage *s = (const temp_stage *)st;
    return s->delta > 0.0f ? NAN : s->t;
}

static const sift__stage_ops temp_ops = {
    .name = "temp",
    .apply = temp_apply,
    .cls = temp_cls,
    .map_bound = temp_map_bound,
    .tail_divisor = temp_tail_divisor,
};

static const sift__stage_ops temp_ext_ops = {
    .name = "temp_ext",
    .apply = temp_ext_apply,
    .cls = temp_ext_cls,
    .map_bound = temp_ext_map_bound,
    .tail_divisor = temp_tail_divisor,
};

static sift_status add(sift_chain *chain, const sift__stage_ops *ops, float t, float delta,
                       float exponent, sift_error *err)
{
    temp_stage *s = (temp_stage *)sift__stage_alloc(sift__chain_alloc(chain), ops, sizeof *s);
    if (!s)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding %s", ops->name);
    s->t = t;
    s->delta = delta;
    s->exponent = exponent;
    return sift__chain_push(chain, &s->base, err);
}

/* The temperature argument as llama.cpp takes it (the parameter's flat
 * reading: any finite value, <= 0 greedy), checked for the stage `who`;
 * the YAML form's own range (>= 0) is stricter. */
static sift_status check_temp(const char *who, float temp, sift_error *err)
{
    sift__param p = sift__param_flat(sift__param_find(&sift__desc_temperature, "temp"));
    return sift__param_check_arg(&p, who, "temp", temp, err);
}

sift_status sift_chain_add_temp(sift_chain *chain, float temp, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = check_temp("temp", temp, err)))
        return s;
    return add(chain, &temp_ops, temp, 0.0f, 1.0f, err);
}

sift_status sift_chain_add_temp_ext(sift_chain *chain, float temp, float delta, float exponent,
                                    sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    const sift__sampler_desc *d = &sift__desc_temperature;
    if ((s = check_temp("temp_ext", temp, err)) ||
        (s = sift__param_check_arg(sift__param_find(d, "delta"), "temp_ext", "delta", delta,
                                   err)) ||
        (s = sift__param_check_arg(sift__param_find(d, "exponent"), "temp_ext", "exponent",
                                   exponent, err)))
        return s;
    return add(chain, &temp_ext_ops, temp, delta, exponent, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct temp_rec {
    float temp, delta, exponent;
} temp_rec;

static const sift__param temp_params[] = {
    {.name = "temp",
     .doc = "temperature; 0 = greedy, >= 0",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_GE,
     .lo = 0,
     .range_note = "0 = greedy",
     .required = 1,
     .off = offsetof(temp_rec, temp),
     .flat_key = "temp",
     .flat_def = 0.8,
     /* llama.cpp takes any temperature; below 0 it picks greedily. */
     .flat_rule = SIFT__FLAT_NEG_GREEDY,
     .flat_range = SIFT__R_ANY,
     .flat_alias = "temperature"},
    {.name = "delta",
     .doc = "dynamic temperature range (temp +- delta); 0 = off, >= 0",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_GE,
     .lo = 0,
     .off = offsetof(temp_rec, delta),
     .flat_key = "dynatemp_range",
     .flat_def = 0},
    {.name = "exponent",
     .doc = "dynamic temperature exponent, > 0",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_GT,
     .lo = 0,
     .def = 1,
     .off = offsetof(temp_rec, exponent),
     .flat_key = "dynatemp_exponent",
     .flat_def = 1},
};

static sift_status temp_build(sift_chain *c, const void *rec, const sift__build_env *env,
                              sift_error *err)
{
    const temp_rec *r = rec;
    (void)env;
    if (r->delta > 0)
        return sift_chain_add_temp_ext(c, r->temp, r->delta, r->exponent, err);
    return sift_chain_add_temp(c, r->temp, err);
}

static sift_class temp_desc_cls(const void *rec, int64_t *k)
{
    const temp_rec *r = rec;
    *k = 1;
    if (r->delta > 0)
        return SIFT_CLASS_WHOLE;
    return r->temp <= 0 ? SIFT_CLASS_TOP : SIFT_CLASS_MONOTONE;
}

/* llama.cpp's common sampler: dynamic temperature when its range is
 * positive, else plain temperature (a negative one acts as 0), left out
 * at 1. */
static int temp_flat_active(void *rec)
{
    temp_rec *r = rec;
    if (r->delta > 0)
        return 1;
    if (r->temp == 1.0f)
        return 0;
    if (r->temp < 0)
        r->temp = 0.0f;
    return 1;
}

static const char *const temp_flat_names[] = {"temperature", "temp", NULL};

const sift__sampler_desc sift__desc_temperature = {
    .name = "temperature",
    .summary = "divides the logits by the temperature (or a dynamic one)",
    .params = temp_params,
    .n_params = sizeof temp_params / sizeof temp_params[0],
    .rec_size = sizeof(temp_rec),
    .main = "temp",
    .keeps_argmax = 1,
    .build = temp_build,
    .cls = temp_desc_cls,
    .flat_names = temp_flat_names,
    .flat_char = 't',
    .flat_order = 9,
    .flat_active = temp_flat_active,
};

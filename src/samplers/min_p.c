/*
 * min_p.c - min-p truncation.
 *
 * Owns sift_chain_add_min_p and its stage.
 *
 * Formula (docs/samplers.md, "min_p"): with m the largest current logit,
 * the threshold is L = m + sift__logf(p), one float addition. The stage
 * keeps every candidate with logit >= L, i.e. whose probability is at
 * least p times the largest probability, compared in log space so no
 * softmax is needed. If fewer than max(min_keep, 1) candidates pass, it
 * keeps the canonical first max(min_keep, 1) instead (all of them if
 * there are fewer). p = 0 is a no-op; p = 1 keeps the tokens tied at the
 * maximum. The candidates passing a logit threshold are always a
 * canonical prefix, so the fallback only lengthens that prefix.
 *
 * Reference behaviour: llama.cpp compares `logit >= max + logf(p)` the
 * same way, filtering in place when enough tokens pass and otherwise
 * sorting and walking with `i < min_keep`. Deliberate differences: sift
 * uses its own logf (identical bits on every platform), breaks ties in the
 * fallback by id, and never sorts; llama.cpp also accepts p > 1 (keeps one
 * token), which sift rejects as SIFT_E_ARG.
 *
 * Capability class: THRESHOLD; IDENTITY when p <= 0.
 */
#include <math.h>

#include "../core/kernels.h"
#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_min_p;

typedef struct min_p_stage {
    sift__stage base;
    float p;
    int32_t min_keep;
} min_p_stage;

static sift_status min_p_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const min_p_stage *t = (const min_p_stage *)st;
    if (!(t->p > 0.0f))
        return SIFT_OK;
    float m = sift__arr_max_logit(a);
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    float L = m + sift__logf(t->p);
    size_t keep_min = t->min_keep > 1 ? (size_t)t->min_keep : 1;
    size_t pass = 0;
    if (a->order == SIFT__ORDER_CANON) {
        /* logits fall along a canonical array: the passing ones lead */
        while (pass < a->n && a->c[pass].logit >= L)
            pass++;
    } else {
        pass = sift__count_logit_ge(a->c, a->n, L);
    }
    if (pass == a->n)
        return SIFT_OK;
    if (pass < keep_min) {
        sift__arr_keep_top(ctx, a, keep_min);
        return SIFT_OK;
    }
    if (a->order == SIFT__ORDER_CANON) {
        a->n = pass;
        a->dense = 0;
        return SIFT_OK;
    }
    /* (double)l >= (double)L exactly when l >= L */
    a->n = sift__keep_logit_ge(a->c, a->n, (double)L);
    a->dense = 0;
    return SIFT_OK;
}

static sift_class min_p_cls(const sift__stage *st, int64_t *n)
{
    const min_p_stage *t = (const min_p_stage *)st;
    *n = 0;
    return t->p > 0.0f ? SIFT_CLASS_THRESHOLD : SIFT_CLASS_IDENTITY;
}

/* On a slice (present tokens canonical, absent ones bounded by b): the
 * threshold needs the largest logit, which is present when the first
 * present token is not below the bound; then if the bound is strictly
 * under the threshold no absent token passes, and the kept set is the
 * present tokens that pass - or, in the fallback, the canonical first
 * keep_min, which must all be ahead of the bound. */
static int min_p_certify(const sift__stage *st, sift__ctx *ctx, const sift__arr *a,
                         const sift__bound *b)
{
    (void)ctx;
    const min_p_stage *t = (const min_p_stage *)st;
    if (a->n == 0 || !(a->c[0].logit > -INFINITY) || a->c[0].logit < b->logit)
        return 0;
    float L = a->c[0].logit + sift__logf(t->p);
    if (!(b->logit < L))
        return 0;
    size_t keep_min = t->min_keep > 1 ? (size_t)t->min_keep : 1;
    size_t pass = 0;
    while (pass < a->n && a->c[pass].logit >= L)
        pass++;
    if (pass >= keep_min)
        return 1;
    return keep_min <= a->n && sift__bound_ahead(b, &a->c[keep_min - 1]);
}

static const sift__stage_ops min_p_ops = {
    .name = "min_p",
    .apply = min_p_apply,
    .cls = min_p_cls,
    .certify = min_p_certify,
};

sift_status sift_chain_add_min_p(sift_chain *chain, float p, int32_t min_keep, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_min_p, "p", p, err)))
        return s;
    if ((s = sift__param_check(&sift__desc_min_p, "min_keep", min_keep, err)))
        return s;
    min_p_stage *t =
        (min_p_stage *)sift__stage_alloc(sift__chain_alloc(chain), &min_p_ops, sizeof *t);
    if (!t)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding min_p");
    t->p = p;
    t->min_keep = min_keep;
    return sift__chain_push(chain, &t->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct min_p_rec {
    float p;
    int32_t min_keep;
} min_p_rec;

static const sift__param min_p_params[] = {
    {.name = "p",
     .doc = "probability relative to the most likely token, in [0, 1]",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_IN,
     .lo = 0,
     .hi = 1,
     .required = 1,
     .off = offsetof(min_p_rec, p),
     .flat_key = "min_p",
     .flat_def = 0.05},
    SIFT__PARAM_MIN_KEEP(min_p_rec),
};

static sift_status min_p_build(sift_chain *c, const void *rec, const sift__build_env *env,
                               sift_error *err)
{
    const min_p_rec *r = rec;
    (void)env;
    return sift_chain_add_min_p(c, r->p, r->min_keep, err);
}

static sift_class min_p_desc_cls(const void *rec, int64_t *k)
{
    const min_p_rec *r = rec;
    *k = 0;
    return r->p > 0 ? SIFT_CLASS_THRESHOLD : SIFT_CLASS_IDENTITY;
}

static void min_p_lint(const void *rec, sift__lint *l)
{
    const min_p_rec *r = rec;
    if (r->p == 0)
        l->warn(l, "p", "min_p 0 turns the stage off");
}

static int min_p_flat_active(void *rec)
{
    const min_p_rec *r = rec;
    return r->p > 0;
}

static const char *const min_p_flat_names[] = {"min_p", "min-p", NULL};

const sift__sampler_desc sift__desc_min_p = {
    .name = "min_p",
    .summary = "keeps the tokens at least p times as likely as the most likely one",
    .params = min_p_params,
    .n_params = sizeof min_p_params / sizeof min_p_params[0],
    .rec_size = sizeof(min_p_rec),
    .main = "p",
    .keeps_argmax = 1,
    .build = min_p_build,
    .cls = min_p_desc_cls,
    .lint = min_p_lint,
    .flat_names = min_p_flat_names,
    .flat_char = 'm',
    .flat_order = 7,
    .flat_active = min_p_flat_active,
};

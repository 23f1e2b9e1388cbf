/*
 * top_k.c - top-k and its ties-inclusive variant.
 *
 * top_k K keeps the K canonical first candidates (largest logits, ties by
 * smallest id). K <= 0 changes nothing; K >= size keeps everything.
 * llama.cpp's top_k also sorts; sift leaves the storage order alone and
 * finds the cut by selection (the set is what matters).
 * Capability class: TOP(K), IDENTITY when K <= 0.
 *
 * top_k_ties K keeps every candidate whose logit is >= the K-th canonical
 * candidate's logit, so a cut never splits a run of equal logits (the
 * convention of predictor-style runtimes). Class: THRESHOLD (its size
 * depends on the ties, so the analyzer certifies it per step).
 */
#include "../sift_internal.h"
#include "registry.h"

typedef struct top_k_stage {
    sift__stage base;
    int32_t k;
} top_k_stage;

static sift_status top_k_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const top_k_stage *t = (const top_k_stage *)st;
    if (t->k <= 0 || (size_t)t->k >= a->n)
        return SIFT_OK;
    sift__arr_keep_top(ctx, a, (size_t)t->k);
    return SIFT_OK;
}

static sift_status top_k_ties_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const top_k_stage *t = (const top_k_stage *)st;
    if (t->k <= 0 || (size_t)t->k >= a->n)
        return SIFT_OK;
    uint64_t cut = sift__cut_top(ctx, a->c, a->n, (size_t)t->k);
    /* every key with the same logit bits as the cut: lowest id bits */
    sift__arr_keep_ge(a, cut & 0xffffffff00000000ull);
    return SIFT_OK;
}

static sift_class top_k_cls(const sift__stage *st, int64_t *n)
{
    const top_k_stage *t = (const top_k_stage *)st;
    if (t->k <= 0) {
        *n = 0;
        return SIFT_CLASS_IDENTITY;
    }
    *n = t->k;
    return SIFT_CLASS_TOP;
}

static sift_class top_k_ties_cls(const sift__stage *st, int64_t *n)
{
    const top_k_stage *t = (const top_k_stage *)st;
    if (t->k <= 0) {
        *n = 0;
        return SIFT_CLASS_IDENTITY;
    }
    *n = t->k;
    return SIFT_CLASS_THRESHOLD;
}

static const sift__stage_ops top_k_ops = {
    .name = "top_k",
    .apply = top_k_apply,
    .cls = top_k_cls,
};

/* On a slice: the k-th present token must beat every absent logit
 * strictly, so that the first k of the row are present and no absent token
 * ties with the k-th. */
static int top_k_ties_certify(const sift__stage *st, sift__ctx *ctx, const sift__arr *a,
                              const sift__bound *b)
{
    (void)ctx;
    const top_k_stage *t = (const top_k_stage *)st;
    if (t->k <= 0 || (size_t)t->k > a->n)
        return 0;
    return a->c[t->k - 1].logit > b->logit;
}

static const sift__stage_ops top_k_ties_ops = {
    .name = "top_k_ties",
    .apply = top_k_ties_apply,
    .cls = top_k_ties_cls,
    .certify = top_k_ties_certify,
};

static sift_status add(sift_chain *chain, const sift__stage_ops *ops, int32_t k, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    top_k_stage *t = (top_k_stage *)sift__stage_alloc(sift__chain_alloc(chain), ops, sizeof *t);
    if (!t)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding %s", ops->name);
    t->k = k;
    return sift__chain_push(chain, &t->base, err);
}

sift_status sift_chain_add_top_k(sift_chain *chain, int32_t k, sift_error *err)
{
    return add(chain, &top_k_ops, k, err);
}

sift_status sift_chain_add_top_k_ties(sift_chain *chain, int32_t k, sift_error *err)
{
    return add(chain, &top_k_ties_ops, k, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct top_k_rec {
    int32_t k;
    int ties;
} top_k_rec;

static const sift__param top_k_params[] = {
    {.name = "k",
     .doc = "how many tokens to keep; <= 0 keeps every token",
     .type = SIFT__PT_INT,
     .range = SIFT__R_ANY,
     .required = 1,
     .off = offsetof(top_k_rec, k),
     .flat_key = "top_k",
     .flat_def = 40},
    {.name = "ties",
     .doc = "keep every token tied with the k-th (top_k_ties)",
     .type = SIFT__PT_BOOL,
     .off = offsetof(top_k_rec, ties)},
};

static sift_status top_k_build(sift_chain *c, const void *rec, const sift__build_env *env,
                               sift_error *err)
{
    const top_k_rec *r = rec;
    (void)env;
    return r->ties ? sift_chain_add_top_k_ties(c, r->k, err) : sift_chain_add_top_k(c, r->k, err);
}

static sift_class top_k_desc_cls(const void *rec, int64_t *k)
{
    const top_k_rec *r = rec;
    *k = r->k;
    if (r->k <= 0)
        return SIFT_CLASS_IDENTITY;
    return r->ties ? SIFT_CLASS_THRESHOLD : SIFT_CLASS_TOP;
}

static void top_k_lint(const void *rec, sift__lint *l)
{
    const top_k_rec *r = rec;
    if (r->k <= 0)
        l->warn(l, "k", "top_k %d turns the stage off (k <= 0 keeps every token)", (int)r->k);
    if (l->vocab_size && r->k > l->vocab_size)
        l->warn(l, "k", "top_k %d is larger than vocab_size %d; it keeps every token", (int)r->k,
                (int)l->vocab_size);
}

static int top_k_flat_active(void *rec)
{
    return ((const top_k_rec *)rec)->k > 0;
}

static const char *const top_k_flat_names[] = {"top_k", "top-k", NULL};

const sift__sampler_desc sift__desc_top_k = {
    .name = "top_k",
    .summary = "keeps the k most likely tokens",
    .params = top_k_params,
    .n_params = sizeof top_k_params / sizeof top_k_params[0],
    .rec_size = sizeof(top_k_rec),
    .main = "k",
    .keeps_argmax = 1,
    .build = top_k_build,
    .cls = top_k_desc_cls,
    .lint = top_k_lint,
    .flat_names = top_k_flat_names,
    .flat_char = 'k',
    .flat_order = 4,
    .flat_active = top_k_flat_active,
};

/*
 * allowed_tokens.c - only listed token ids may be sampled.
 *
 * Owns the "allowed_tokens" stage: a sorted list A of distinct ids. Every
 * candidate whose id is not in A gets l = -inf; the others are unchanged.
 *
 * Reference behaviour: vLLM's allowed_token_ids (a mask that sets every
 * other logit to -inf; vLLM refuses an empty list and ids outside the
 * vocabulary, and so does sift: an empty list when the stage is added,
 * an id at or beyond the row length at sample time).
 *
 * The slice path: the stage lists A through ops->allowed when it has at
 * most ALLOWED_LISTED ids, so the chain asks for them as extras and a
 * slice holds all of them wherever they rank; after the stage, every
 * absent token is then -inf (docs/analyzer.md, "Forced tokens"), and the
 * step is decided from the slice whatever its prefix length, as long as
 * some allowed token is finite. A longer list is not named: the stage
 * is then an unbounded LOWERS stage, certified per step.
 *
 * The ids live after the struct in one block; no mutable state, so the
 * default flat clone copies it.
 *
 * Capability class: LOWERS, unbounded (it may ban all but |A| tokens of
 * any row; the plan adds its slack and is CERTIFIED), naming A as extras
 * when |A| <= ALLOWED_LISTED.
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

/* The most ids the stage names as extras (each is one logit a runtime
 * gathers beside the prefix). */
#define ALLOWED_LISTED 1024

typedef struct at_stage {
    sift__stage base;
    size_t n;       /* allowed ids */
    size_t off_ids; /* int32_t[n], ascending */
} at_stage;

static const int32_t *at_ids(const at_stage *t)
{
    return (const int32_t *)(const void *)((const char *)t + t->off_ids);
}

static sift_status at_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const at_stage *t = (const at_stage *)st;
    (void)ctx;
    sift__ban_others(a, at_ids(t), t->n);
    return SIFT_OK;
}

static sift_class at_cls(const sift__stage *st, int64_t *n)
{
    (void)st;
    *n = -1;
    return SIFT_CLASS_LOWERS;
}

static int64_t at_lowers(const sift__stage *st, int dynamic)
{
    (void)st;
    (void)dynamic;
    return -1;
}

static size_t at_allowed(sift__stage *st, const int32_t **ids)
{
    const at_stage *t = (const at_stage *)st;
    *ids = at_ids(t);
    return t->n <= ALLOWED_LISTED ? t->n : SIZE_MAX;
}

static int64_t at_max_extras(const sift__stage *st)
{
    const at_stage *t = (const at_stage *)st;
    return t->n <= ALLOWED_LISTED ? (int64_t)t->n : 0;
}

static int32_t at_max_token(const sift__stage *st)
{
    const at_stage *t = (const at_stage *)st;
    return at_ids(t)[t->n - 1];
}

static const sift__stage_ops at_ops = {
    .name = "allowed_tokens",
    .apply = at_apply,
    .cls = at_cls,
    .max_token = at_max_token,
    .lowers = at_lowers,
    .max_extras = at_max_extras,
    .allowed = at_allowed,
};

sift_status sift_chain_add_allowed_tokens(sift_chain *chain, const int32_t *ids, size_t n,
                                          sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if (n == 0)
        return sift__fail(err, SIFT_E_ARG,
                          "allowed_tokens: the list is empty (every token would be banned)");
    if (!ids)
        return sift__fail(err, SIFT_E_ARG, "allowed_tokens: ids is NULL but n = %zu", n);
    if (n > (size_t)SIFT_DEFAULT_MAX_VOCAB)
        return sift__fail(err, SIFT_E_LIMIT, "allowed_tokens: %zu ids exceed the limit of %d", n,
                          (int)SIFT_DEFAULT_MAX_VOCAB);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "allowed_tokens: ids[%zu] is %d; token ids must be >= 0", i,
                                 (int)ids[i]);
    const sift__alloc *al = sift__chain_alloc(chain);
    size_t off = (sizeof(at_stage) + 15) & ~(size_t)15;
    at_stage *t = (at_stage *)sift__stage_alloc(al, &at_ops, off + n * sizeof(int32_t));
    if (!t)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding allowed_tokens (%zu ids)",
                          n);
    int32_t *list = (int32_t *)(void *)((char *)t + off);
    memcpy(list, ids, n * sizeof *list);
    t->off_ids = off;
    t->n = sift__ids_sort_unique(list, n);
    return sift__chain_push(chain, &t->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct at_rec {
    char **ids;
    size_t *id_lengths;
    size_t n_ids;
} at_rec;

static const sift__param at_params[] = {
    {.name = "ids",
     .doc = "the token ids that may be sampled (at least one)",
     .type = SIFT__PT_STRING_LIST,
     .required = 1,
     .item_noun = "token id",
     .max_items = 65536,
     .max_item_bytes = 10,
     .off = offsetof(at_rec, ids),
     .off_len = offsetof(at_rec, id_lengths),
     .off_count = offsetof(at_rec, n_ids)},
};

static sift_status at_build(sift_chain *c, const void *rec, const sift__build_env *env,
                            sift_error *err)
{
    const at_rec *r = rec;
    if (r->n_ids == 0)
        return env->fail(env, err, SIFT_E_ARG, "allowed_tokens needs at least one token id");
    /* A trial build without vocab_size says 1: the length is unknown. */
    int32_t lim = env->trial && env->n_vocab <= 1 ? 0 : env->n_vocab;
    const sift__alloc *al = sift__chain_alloc(c);
    int32_t *ids = sift__malloc(al, r->n_ids, sizeof *ids);
    if (!ids)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while reading allowed_tokens ids");
    sift_status s = SIFT_OK;
    for (size_t i = 0; i < r->n_ids && !s; i++) {
        if (sift__parse_ids(r->ids[i], r->id_lengths[i], &ids[i], 1) != 1)
            s = env->fail(env, err, SIFT_E_ARG, "allowed_tokens: ids[%zu] '%s' is not a token id",
                          i, r->ids[i]);
        else if (lim > 0 && ids[i] >= lim)
            s = env->fail(env, err, SIFT_E_ARG,
                          "allowed_tokens: ids[%zu] %d is out of range [0, %d)", i, (int)ids[i],
                          (int)lim);
    }
    if (!s)
        s = sift_chain_add_allowed_tokens(c, ids, r->n_ids, err);
    sift__free(al, ids);
    return s;
}

const sift__sampler_desc sift__desc_allowed_tokens = {
    .name = "allowed_tokens",
    .summary = "only the listed token ids may be sampled (vLLM allowed_token_ids)",
    .params = at_params,
    .n_params = sizeof at_params / sizeof at_params[0],
    .rec_size = sizeof(at_rec),
    .build = at_build,
};

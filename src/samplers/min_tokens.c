/*
 * min_tokens.c - end-of-generation suppression until n tokens are out.
 *
 * Owns the "min_tokens" stage: a sorted list of banned ids (the given
 * ids, plus the vocabulary's SIFT_TOKEN_EOG ids when a vocabulary is
 * given) and a count c of the generated tokens the stage has accepted
 * since the chain was created or reset. While c < n (or always, for
 * n = -1), every candidate whose id is listed gets l = -inf; from c = n
 * on the stage changes nothing. n = 0 is a no-op.
 *
 * Reference behaviour: vLLM's min_tokens (the stop token ids and EOS set
 * to -inf while fewer than min_tokens output tokens exist), HF's
 * MinNewTokensLengthLogitsProcessor (min_new_tokens: EOS at -inf while
 * the new tokens are fewer), llama.cpp's ignore_eos (every EOG token at
 * -inf for the whole generation: n = -1). Like vLLM and HF, the stage
 * counts generated tokens only: it is a generated_only stage, so a
 * token given through sift_chain_accept counts and one given through
 * sift_chain_accept_prompt reaches neither its prepare_accept (it has
 * none) nor its accept; the prompt's length does not matter
 * (docs/samplers.md, "min_tokens").
 *
 * The ids live after the struct in one block (addressed by offset), so
 * the default flat clone copies the stage and its count.
 *
 * Capability class: IDENTITY for n = 0; otherwise LOWERS(number of
 * banned ids); its dynamic count is 0 once c >= n.
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_min_tokens;

typedef struct mt_stage {
    sift__stage base;
    int32_t min_tokens; /* -1 = always */
    size_t n;           /* banned ids */
    size_t off_ids;     /* int32_t[n], ascending */
    int64_t count;      /* generated tokens accepted since creation or reset */
} mt_stage;

static const int32_t *mt_ids(const mt_stage *m)
{
    return (const int32_t *)(const void *)((const char *)m + m->off_ids);
}

/* 1 while the stage bans its ids. */
static int mt_banning(const mt_stage *m)
{
    return m->min_tokens < 0 || m->count < m->min_tokens;
}

static sift_status mt_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const mt_stage *m = (const mt_stage *)st;
    (void)ctx;
    if (mt_banning(m))
        sift__ban_ids(a, mt_ids(m), m->n);
    return SIFT_OK;
}

static void mt_accept(sift__stage *st, int32_t token)
{
    mt_stage *m = (mt_stage *)st;
    (void)token;
    if (m->count < INT64_MAX)
        m->count++;
}

static void mt_reset(sift__stage *st)
{
    ((mt_stage *)st)->count = 0;
}

static uint64_t mt_digest(const sift__stage *st, uint64_t h)
{
    const mt_stage *m = (const mt_stage *)st;
    return sift__fnv(h, &m->count, sizeof m->count);
}

static sift_class mt_cls(const sift__stage *st, int64_t *n)
{
    const mt_stage *m = (const mt_stage *)st;
    if (m->min_tokens == 0) {
        *n = 0;
        return SIFT_CLASS_IDENTITY;
    }
    *n = (int64_t)m->n;
    return SIFT_CLASS_LOWERS;
}

static int64_t mt_lowers(const sift__stage *st, int dynamic)
{
    const mt_stage *m = (const mt_stage *)st;
    if (m->min_tokens == 0 || (dynamic && !mt_banning(m)))
        return 0;
    return (int64_t)m->n;
}

static int32_t mt_max_token(const sift__stage *st)
{
    const mt_stage *m = (const mt_stage *)st;
    return m->n ? mt_ids(m)[m->n - 1] : -1;
}

static const sift__stage_ops mt_ops = {
    .name = "min_tokens",
    .apply = mt_apply,
    .cls = mt_cls,
    .max_token = mt_max_token,
    .lowers = mt_lowers,
    .accept = mt_accept,
    /* vLLM's min_tokens and HF's min_new_tokens count generated tokens:
     * the prompt's do not reach mt_accept. */
    .generated_only = 1,
    .reset = mt_reset,
    .digest = mt_digest,
};

sift_status sift_chain_add_min_tokens(sift_chain *chain, int32_t min_tokens, const int32_t *ids,
                                      size_t n_ids, const sift_vocab *vocab, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_min_tokens, "n", min_tokens, err)))
        return s;
    if (!ids && n_ids > 0)
        return sift__fail(err, SIFT_E_ARG, "min_tokens: ids is NULL but n_ids = %zu", n_ids);
    if (n_ids > (size_t)SIFT_DEFAULT_MAX_VOCAB)
        return sift__fail(err, SIFT_E_LIMIT, "min_tokens: %zu ids exceed the limit of %d", n_ids,
                          (int)SIFT_DEFAULT_MAX_VOCAB);
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "min_tokens: ids[%zu] is %d; token ids must be >= 0", i,
                                 (int)ids[i]);
    int32_t V = sift_vocab_size(vocab);
    size_t n_eog = 0;
    for (int32_t t = 0; t < V; t++)
        n_eog += (sift_vocab_attr(vocab, t) & SIFT_TOKEN_EOG) != 0;
    if (n_ids + n_eog == 0 && min_tokens != 0)
        return sift__fail(err, SIFT_E_ARG,
                          "min_tokens: nothing to ban: give ids, or a vocabulary with "
                          "end-of-generation tokens (SIFT_TOKEN_EOG)");
    const sift__alloc *al = sift__chain_alloc(chain);
    size_t off = (sizeof(mt_stage) + 15) & ~(size_t)15;
    size_t total = n_ids + n_eog;
    mt_stage *m = (mt_stage *)sift__stage_alloc(al, &mt_ops, off + total * sizeof(int32_t));
    if (!m)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding min_tokens (%zu ids)",
                          total);
    int32_t *list = (int32_t *)(void *)((char *)m + off);
    if (n_ids)
        memcpy(list, ids, n_ids * sizeof *list);
    size_t k = n_ids;
    for (int32_t t = 0; t < V; t++)
        if (sift_vocab_attr(vocab, t) & SIFT_TOKEN_EOG)
            list[k++] = t;
    m->min_tokens = min_tokens;
    m->off_ids = off;
    m->n = sift__ids_sort_unique(list, total);
    return sift__chain_push(chain, &m->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct mt_rec {
    int32_t n;
    char **ids;
    size_t *id_lengths;
    size_t n_ids;
} mt_rec;

static const sift__param mt_params[] = {
    {.name = "n",
     .doc = "tokens to generate before the ids may be sampled; 0 = off, -1 = never",
     .type = SIFT__PT_INT,
     .range = SIFT__R_GE,
     .lo = -1,
     .range_note = "-1 = always banned",
     .required = 1,
     .off = offsetof(mt_rec, n)},
    {.name = "ids",
     .doc = "token ids to ban; default: the vocabulary's end-of-generation ids",
     .type = SIFT__PT_STRING_LIST,
     .item_noun = "token id",
     .max_items = 4096,
     .max_item_bytes = 10,
     .off = offsetof(mt_rec, ids),
     .off_len = offsetof(mt_rec, id_lengths),
     .off_count = offsetof(mt_rec, n_ids)},
};

/* Reads the record's id strings into `out` (n_ids entries); fails at the
 * stage naming the first one that is not a token id below the row
 * length. */
static sift_status mt_read_ids(const mt_rec *r, const sift__build_env *env, int32_t *out,
                               sift_error *err)
{
    /* A trial build without vocab_size says 1: the length is unknown. */
    int32_t lim = env->trial && env->n_vocab <= 1 ? 0 : env->n_vocab;
    for (size_t i = 0; i < r->n_ids; i++) {
        size_t got = sift__parse_ids(r->ids[i], r->id_lengths[i], &out[i], 1);
        if (got != 1)
            return env->fail(env, err, SIFT_E_ARG, "min_tokens: ids[%zu] '%s' is not a token id", i,
                             r->ids[i]);
        if (lim > 0 && out[i] >= lim)
            return env->fail(env, err, SIFT_E_ARG,
                             "min_tokens: ids[%zu] %d is out of range [0, %d)", i, (int)out[i],
                             (int)lim);
    }
    return SIFT_OK;
}

static sift_status mt_build(sift_chain *c, const void *rec, const sift__build_env *env,
                            sift_error *err)
{
    const mt_rec *r = rec;
    if (r->n_ids == 0) {
        /* The default is the vocabulary's end-of-generation ids, which a
         * trial build (no vocabulary) cannot know: the stage is left out
         * there, as DRY's breakers are. */
        if (env->trial)
            return SIFT_OK;
        if (!env->vocab)
            return env->fail(env, err, SIFT_E_ARG,
                             "min_tokens has no ids and no vocabulary was given (its default ids, "
                             "as ignore_eos's, are "
                             "the vocabulary's end-of-generation tokens)");
        return sift_chain_add_min_tokens(c, r->n, NULL, 0, env->vocab, err);
    }
    const sift__alloc *al = sift__chain_alloc(c);
    int32_t *ids = sift__malloc(al, r->n_ids, sizeof *ids);
    if (!ids)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while reading min_tokens ids");
    sift_status s = mt_read_ids(r, env, ids, err);
    if (!s)
        s = sift_chain_add_min_tokens(c, r->n, ids, r->n_ids, NULL, err);
    sift__free(al, ids);
    return s;
}

static void mt_lint(const void *rec, sift__lint *l)
{
    const mt_rec *r = rec;
    if (r->n == 0)
        l->warn(l, "n", "min_tokens 0 turns the stage off");
}

const sift__sampler_desc sift__desc_min_tokens = {
    .name = "min_tokens",
    .summary = "bans end-of-generation (or given) ids until n tokens were generated",
    .params = mt_params,
    .n_params = sizeof mt_params / sizeof mt_params[0],
    .rec_size = sizeof(mt_rec),
    .main = "n",
    .build = mt_build,
    .lint = mt_lint,
};

/*
 * bad_words.c - bans the last token of listed token sequences.
 *
 * Owns the "bad_words" stage: sequences w_1 .. w_m of token ids (each of
 * length L_i >= 1). With h the accepted tokens, the banned set is
 *
 *     B = { w_i[L_i - 1] : L_i = 1, or h ends with w_i[0 .. L_i - 1) }
 *     l(x) = -inf for every x in B
 *
 * so no sequence can be completed: a one-token sequence is always
 * banned, a longer one when the history ends with all but its last
 * token. m = 0 is a no-op.
 *
 * Reference behaviour: HF's NoBadWordsLogitsProcessor (bad_words_ids, a
 * list of id lists; it reads the whole sequence, prompt included, as this
 * stage does: every accepted token counts). vLLM's bad_words takes words,
 * tokenizes each with and without a leading space and applies the same
 * rule to the generated tokens only; this stage takes token ids, so a
 * runtime gives those token sequences (sift_vocab_encode can make
 * them). Deliberate differences: HF silently drops one-token sequences
 * equal to its EOS id; sift bans what it is given (use min_tokens for
 * EOS). An empty sequence or a negative id is an error (HF refuses them
 * too).
 *
 * B is recomputed when a token is accepted, O(total sequence length)
 * against a ring of the last (longest length - 1) tokens, and sorted in
 * place (O(m log m) at most); sampling reads B only. The sequences, the ring and B are one
 * allocation made when the stage is added (offsets, so the default flat
 * clone is a deep copy).
 *
 * Capability class: IDENTITY for m = 0; LOWERS(number of distinct last
 * tokens), at most m; the dynamic count is |B|.
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

typedef struct bw_stage {
    sift__stage base;
    size_t m;          /* sequences */
    size_t n_last;     /* distinct last tokens: the static bound */
    int32_t ring_cap;  /* longest length - 1 (0: only one-token sequences) */
    int32_t head, len; /* ring: oldest at ring[head], len entries */
    int32_t n_banned;
    int32_t max_id;
    size_t off_start; /* size_t[m + 1]: sequence i is tok[start[i] .. start[i + 1]) */
    size_t off_tok, off_ring, off_banned;
} bw_stage;

static const size_t *bw_start(const bw_stage *b)
{
    return (const size_t *)(const void *)((const char *)b + b->off_start);
}

static int32_t *bw_arr(bw_stage *b, size_t off)
{
    return (int32_t *)(void *)((char *)b + off);
}

static const int32_t *bw_carr(const bw_stage *b, size_t off)
{
    return (const int32_t *)(const void *)((const char *)b + off);
}

/* B from the history: see the opening comment. */
static void bw_recompute(bw_stage *b)
{
    const size_t *start = bw_start(b);
    const int32_t *tok = bw_carr(b, b->off_tok);
    const int32_t *ring = bw_carr(b, b->off_ring);
    int32_t *out = bw_arr(b, b->off_banned);
    size_t nb = 0;
    for (size_t i = 0; i < b->m; i++) {
        const int32_t *w = tok + start[i];
        int32_t pre = (int32_t)(start[i + 1] - start[i]) - 1;
        if (pre > b->len)
            continue;
        int ends = 1;
        for (int32_t k = 0; k < pre && ends; k++)
            ends = ring[(b->head + b->len - pre + k) % b->ring_cap] == w[k];
        if (ends)
            out[nb++] = w[pre];
    }
    b->n_banned = (int32_t)sift__ids_sort_unique(out, nb);
}

static sift_status bw_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const bw_stage *b = (const bw_stage *)st;
    (void)ctx;
    sift__ban_ids(a, bw_carr(b, b->off_banned), (size_t)b->n_banned);
    return SIFT_OK;
}

static void bw_accept(sift__stage *st, int32_t t)
{
    bw_stage *b = (bw_stage *)st;
    if (b->ring_cap == 0)
        return; /* only one-token sequences: B never changes */
    int32_t *ring = bw_arr(b, b->off_ring);
    if (b->len == b->ring_cap) {
        ring[b->head] = t;
        b->head = (b->head + 1) % b->ring_cap;
    } else {
        ring[(b->head + b->len) % b->ring_cap] = t;
        b->len++;
    }
    bw_recompute(b);
}

static void bw_reset(sift__stage *st)
{
    bw_stage *b = (bw_stage *)st;
    b->head = b->len = 0;
    bw_recompute(b);
}

static uint64_t bw_digest(const sift__stage *st, uint64_t h)
{
    const bw_stage *b = (const bw_stage *)st;
    const int32_t *ring = bw_carr(b, b->off_ring);
    h = sift__fnv(h, &b->len, sizeof b->len);
    for (int32_t i = 0; i < b->len; i++)
        h = sift__fnv(h, &ring[(b->head + i) % b->ring_cap], sizeof(int32_t));
    return h;
}

static sift_class bw_cls(const sift__stage *st, int64_t *n)
{
    const bw_stage *b = (const bw_stage *)st;
    *n = (int64_t)b->n_last;
    return b->m ? SIFT_CLASS_LOWERS : SIFT_CLASS_IDENTITY;
}

static int64_t bw_lowers(const sift__stage *st, int dynamic)
{
    const bw_stage *b = (const bw_stage *)st;
    return dynamic ? b->n_banned : (int64_t)b->n_last;
}

static int32_t bw_max_token(const sift__stage *st)
{
    return ((const bw_stage *)st)->max_id;
}

static const sift__stage_ops bw_ops = {
    .name = "bad_words",
    .apply = bw_apply,
    .cls = bw_cls,
    .max_token = bw_max_token,
    .lowers = bw_lowers,
    .accept = bw_accept,
    .reset = bw_reset,
    .digest = bw_digest,
};

static size_t bw_align(size_t x)
{
    return (x + 15) & ~(size_t)15;
}

sift_status sift_chain_add_bad_words(sift_chain *chain, const int32_t *const *seqs,
                                     const size_t *lens, size_t n, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if (n > 0 && (!seqs || !lens))
        return sift__fail(err, SIFT_E_ARG, "bad_words: %s is NULL but n = %zu",
                          seqs ? "lens" : "seqs", n);
    int32_t maxh = sift__chain_max_history(chain);
    size_t total = 0, longest = 0;
    int32_t max_id = -1;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] == 0 || !seqs[i])
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i, "bad_words: sequence %zu is %s", i,
                                 lens[i] ? "NULL" : "empty");
        if (lens[i] - 1 > (size_t)maxh)
            return sift__fail_at(err, SIFT_E_LIMIT, (int64_t)i,
                                 "bad_words: sequence %zu has %zu tokens; its prefix must fit "
                                 "max_history %d",
                                 i, lens[i], (int)maxh);
        for (size_t k = 0; k < lens[i]; k++) {
            if (seqs[i][k] < 0)
                return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                     "bad_words: sequence %zu has token %d at %zu; token ids "
                                     "must be >= 0",
                                     i, (int)seqs[i][k], k);
            max_id = seqs[i][k] > max_id ? seqs[i][k] : max_id;
        }
        total += lens[i];
        longest = lens[i] > longest ? lens[i] : longest;
        if (total > (size_t)SIFT_DEFAULT_MAX_VOCAB)
            return sift__fail(err, SIFT_E_LIMIT,
                              "bad_words: the sequences hold more than %d tokens",
                              (int)SIFT_DEFAULT_MAX_VOCAB);
    }
    size_t R = longest > 0 ? longest - 1 : 0;
    size_t off_start = bw_align(sizeof(bw_stage));
    size_t off_tok = bw_align(off_start + (n + 1) * sizeof(size_t));
    size_t off_ring = bw_align(off_tok + total * sizeof(int32_t));
    size_t off_banned = bw_align(off_ring + R * sizeof(int32_t));
    size_t size = off_banned + n * sizeof(int32_t);
    const sift__alloc *al = sift__chain_alloc(chain);
    bw_stage *b = (bw_stage *)sift__stage_alloc(al, &bw_ops, size);
    if (!b)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding bad_words (%zu sequences)",
                          n);
    b->m = n;
    b->ring_cap = (int32_t)R;
    b->max_id = max_id;
    b->off_start = off_start;
    b->off_tok = off_tok;
    b->off_ring = off_ring;
    b->off_banned = off_banned;
    size_t *start = (size_t *)(void *)((char *)b + off_start);
    int32_t *tok = bw_arr(b, off_tok);
    int32_t *last = bw_arr(b, off_banned); /* scratch for the count */
    start[0] = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(tok + start[i], seqs[i], lens[i] * sizeof *tok);
        start[i + 1] = start[i] + lens[i];
        last[i] = seqs[i][lens[i] - 1];
    }
    b->n_last = sift__ids_sort_unique(last, n);
    bw_recompute(b);
    return sift__chain_push(chain, &b->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct bw_rec {
    char **seqs;
    size_t *seq_lengths;
    size_t n_seqs;
} bw_rec;

static const sift__param bw_params[] = {
    {.name = "sequences",
     .doc = "token id sequences, each one string of ids (\"15 27 3\"); the last id is banned "
            "after the others",
     .type = SIFT__PT_STRING_LIST,
     .required = 1,
     .item_noun = "sequence",
     .max_items = 4096,
     .max_item_bytes = 4096,
     .off = offsetof(bw_rec, seqs),
     .off_len = offsetof(bw_rec, seq_lengths),
     .off_count = offsetof(bw_rec, n_seqs)},
};

static sift_status bw_build(sift_chain *c, const void *rec, const sift__build_env *env,
                            sift_error *err)
{
    const bw_rec *r = rec;
    /* A trial build without vocab_size says 1: the length is unknown. */
    int32_t lim = env->trial && env->n_vocab <= 1 ? 0 : env->n_vocab;
    size_t total = 0;
    for (size_t i = 0; i < r->n_seqs; i++) {
        size_t k = sift__parse_ids(r->seqs[i], r->seq_lengths[i], NULL, SIZE_MAX);
        if (k == SIZE_MAX || k == 0)
            return env->fail(env, err, SIFT_E_ARG,
                             "bad_words: sequence %zu '%s' is not a list of token ids", i,
                             r->seqs[i]);
        total += k;
    }
    const sift__alloc *al = sift__chain_alloc(c);
    int32_t *ids = sift__malloc(al, total ? total : 1, sizeof *ids);
    const int32_t **seqs = sift__malloc(al, r->n_seqs ? r->n_seqs : 1, sizeof *seqs);
    size_t *lens = sift__malloc(al, r->n_seqs ? r->n_seqs : 1, sizeof *lens);
    sift_status s = SIFT_OK;
    if (!ids || !seqs || !lens)
        s = sift__fail(err, SIFT_E_NOMEM, "out of memory while reading bad_words sequences");
    for (size_t i = 0, at = 0; i < r->n_seqs && !s; i++) {
        lens[i] = sift__parse_ids(r->seqs[i], r->seq_lengths[i], ids + at, total - at);
        seqs[i] = ids + at;
        for (size_t k = 0; k < lens[i] && !s; k++)
            if (lim > 0 && ids[at + k] >= lim)
                s = env->fail(env, err, SIFT_E_ARG,
                              "bad_words: sequence %zu has token %d, out of range [0, %d)", i,
                              (int)ids[at + k], (int)lim);
        at += lens[i];
    }
    if (!s)
        s = sift_chain_add_bad_words(c, seqs, lens, r->n_seqs, err);
    sift__free(al, ids);
    sift__free(al, seqs);
    sift__free(al, lens);
    return s;
}

const sift__sampler_desc sift__desc_bad_words = {
    .name = "bad_words",
    .summary = "bans the last token of a listed sequence after the rest of it (HF bad_words_ids)",
    .params = bw_params,
    .n_params = sizeof bw_params / sizeof bw_params[0],
    .rec_size = sizeof(bw_rec),
    .build = bw_build,
};

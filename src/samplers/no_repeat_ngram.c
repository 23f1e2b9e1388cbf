/*
 * no_repeat_ngram.c - bans the tokens that would repeat an n-gram.
 *
 * Owns the "no_repeat_ngram" stage. With h the window of the last
 * `last_n` accepted tokens (oldest first, N = |h|) and s = the last n - 1
 * of them, every token that follows an occurrence of s in h is banned:
 *
 *     B = { h[i + n - 1] : 0 <= i <= N - n, h[i .. i + n - 1) = s }
 *     l(x) = -inf for every x in B
 *
 * so no n-gram of the window appears twice. n = 1 bans every token of the
 * window. Fewer than n tokens in the window: nothing is banned. n = 0 or
 * last_n = 0 is a no-op.
 *
 * Reference behaviour: HF's NoRepeatNGramLogitsProcessor
 * (no_repeat_ngram_size), which builds the same set over the whole
 * sequence, prompt included: the two agree while the window holds the
 * whole sequence (last_n >= prompt + generated tokens; -1 in YAML is
 * n_ctx). vLLM has no such parameter.
 *
 * B is recomputed when a token is accepted: the window is copied out of
 * its ring in order, the occurrences of s are found with Knuth-Morris-
 * Pratt (O(N + n): the failure table of s, then one pass over h), and the
 * banned ids are sorted and made distinct in place (heapsort, O(|B| log
 * |B|), |B| <= N). So accept costs O(last_n log last_n) at most per
 * token, O(last_n) when few ids are banned, and sampling reads B only. Everything (ring, the
 * copy, the failure table, B) is one allocation made when the stage is
 * added, addressed by offsets, so the default flat clone is a deep copy
 * and nothing is allocated per token.
 *
 * Capability class: IDENTITY when off; LOWERS(last_n - n + 1), the most
 * positions an occurrence can start at; its dynamic count is |B|.
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_no_repeat_ngram;

typedef struct nr_stage {
    sift__stage base;
    int32_t n, last_n;
    int active;
    int32_t head, len; /* ring: oldest at ring[head], len entries */
    int32_t n_banned;
    size_t off_ring, off_lin, off_fail, off_banned;
} nr_stage;

static int32_t *nr_arr(nr_stage *p, size_t off)
{
    return (int32_t *)(void *)((char *)p + off);
}

static const int32_t *nr_carr(const nr_stage *p, size_t off)
{
    return (const int32_t *)(const void *)((const char *)p + off);
}

/* B from the window: see the opening comment. */
static void nr_recompute(nr_stage *p)
{
    int32_t *ring = nr_arr(p, p->off_ring);
    int32_t *h = nr_arr(p, p->off_lin);
    int32_t *fail = nr_arr(p, p->off_fail);
    int32_t *b = nr_arr(p, p->off_banned);
    int32_t N = p->len, m = p->n - 1, nb = 0;
    p->n_banned = 0;
    if (N < p->n)
        return;
    for (int32_t i = 0; i < N; i++)
        h[i] = ring[(p->head + i) % p->last_n];
    if (m == 0) {
        memcpy(b, h, (size_t)N * sizeof *b);
        p->n_banned = (int32_t)sift__ids_sort_unique(b, (size_t)N);
        return;
    }
    const int32_t *pat = h + (N - m);
    /* fail[j]: the length of the longest proper border of pat[0..j] */
    fail[0] = 0;
    for (int32_t j = 1, k = 0; j < m; j++) {
        while (k > 0 && pat[j] != pat[k])
            k = fail[k - 1];
        if (pat[j] == pat[k])
            k++;
        fail[j] = k;
    }
    /* occurrences of pat in h[0 .. N - 1), each followed by a token */
    for (int32_t j = 0, k = 0; j < N - 1; j++) {
        while (k > 0 && h[j] != pat[k])
            k = fail[k - 1];
        if (h[j] == pat[k])
            k++;
        if (k == m) {
            b[nb++] = h[j + 1];
            k = fail[k - 1];
        }
    }
    p->n_banned = (int32_t)sift__ids_sort_unique(b, (size_t)nb);
}

static sift_status nr_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const nr_stage *p = (const nr_stage *)st;
    (void)ctx;
    if (p->active)
        sift__ban_ids(a, nr_carr(p, p->off_banned), (size_t)p->n_banned);
    return SIFT_OK;
}

static void nr_accept(sift__stage *st, int32_t t)
{
    nr_stage *p = (nr_stage *)st;
    if (!p->active)
        return;
    int32_t *ring = nr_arr(p, p->off_ring);
    if (p->len == p->last_n) {
        ring[p->head] = t;
        p->head = (p->head + 1) % p->last_n;
    } else {
        ring[(p->head + p->len) % p->last_n] = t;
        p->len++;
    }
    nr_recompute(p);
}

static void nr_reset(sift__stage *st)
{
    nr_stage *p = (nr_stage *)st;
    p->head = p->len = p->n_banned = 0;
}

/* The window in order (B follows from it). */
static uint64_t nr_digest(const sift__stage *st, uint64_t h)
{
    const nr_stage *p = (const nr_stage *)st;
    if (!p->active)
        return h;
    const int32_t *ring = nr_carr(p, p->off_ring);
    h = sift__fnv(h, &p->len, sizeof p->len);
    for (int32_t i = 0; i < p->len; i++)
        h = sift__fnv(h, &ring[(p->head + i) % p->last_n], sizeof(int32_t));
    return h;
}

static sift_class nr_cls(const sift__stage *st, int64_t *n)
{
    const nr_stage *p = (const nr_stage *)st;
    if (!p->active) {
        *n = 0;
        return SIFT_CLASS_IDENTITY;
    }
    *n = (int64_t)p->last_n - p->n + 1;
    return SIFT_CLASS_LOWERS;
}

static int64_t nr_lowers(const sift__stage *st, int dynamic)
{
    const nr_stage *p = (const nr_stage *)st;
    if (!p->active)
        return 0;
    return dynamic ? p->n_banned : (int64_t)p->last_n - p->n + 1;
}

static const sift__stage_ops nr_ops = {
    .name = "no_repeat_ngram",
    .apply = nr_apply,
    .cls = nr_cls,
    .lowers = nr_lowers,
    .accept = nr_accept,
    .reset = nr_reset,
    .digest = nr_digest,
};

static size_t nr_align(size_t x)
{
    return (x + 15) & ~(size_t)15;
}

sift_status sift_chain_add_no_repeat_ngram(sift_chain *chain, int32_t n, int32_t last_n,
                                           sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_no_repeat_ngram, "n", n, err)) ||
        (s = sift__window_check(&sift__desc_no_repeat_ngram, "last_n", last_n, chain, err)))
        return s;
    int active = n > 0 && last_n > 0;
    if (active && n > last_n)
        return sift__fail(err, SIFT_E_ARG,
                          "no_repeat_ngram: n = %d is longer than the window last_n = %d: no "
                          "n-gram would fit",
                          (int)n, (int)last_n);
    const sift__alloc *al = sift__chain_alloc(chain);
    size_t W = active ? (size_t)last_n : 0, F = active ? (size_t)n : 0;
    size_t off_ring = nr_align(sizeof(nr_stage));
    size_t off_lin = nr_align(off_ring + W * sizeof(int32_t));
    size_t off_fail = nr_align(off_lin + W * sizeof(int32_t));
    size_t off_banned = nr_align(off_fail + F * sizeof(int32_t));
    size_t size = off_banned + W * sizeof(int32_t);
    nr_stage *p = (nr_stage *)sift__stage_alloc(al, &nr_ops, size);
    if (!p)
        return sift__fail(err, SIFT_E_NOMEM,
                          "out of memory while adding no_repeat_ngram (last_n %d)", (int)last_n);
    p->n = n;
    p->last_n = last_n;
    p->active = active;
    p->off_ring = off_ring;
    p->off_lin = off_lin;
    p->off_fail = off_fail;
    p->off_banned = off_banned;
    return sift__chain_push(chain, &p->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct nr_rec {
    int32_t n, last_n;
} nr_rec;

static const sift__param nr_params[] = {
    {.name = "n",
     .doc = "n-gram size; 0 = off",
     .type = SIFT__PT_INT,
     .range = SIFT__R_GE,
     .lo = 0,
     .range_note = "0 = off",
     .required = 1,
     .off = offsetof(nr_rec, n)},
    {.name = "last_n",
     .doc = "window of accepted tokens the n-grams are taken from; 0 = off, -1 = n_ctx",
     .type = SIFT__PT_WINDOW,
     .def = 4096,
     .off = offsetof(nr_rec, last_n)},
};

static sift_status nr_build(sift_chain *c, const void *rec, const sift__build_env *env,
                            sift_error *err)
{
    const nr_rec *r = rec;
    (void)env;
    return sift_chain_add_no_repeat_ngram(c, r->n, r->last_n, err);
}

static void nr_lint(const void *rec, sift__lint *l)
{
    const nr_rec *r = rec;
    if (r->n == 0 || r->last_n == 0)
        l->warn(l, NULL, "no_repeat_ngram does nothing with these values (%s)",
                r->n == 0 ? "n 0" : "last_n 0");
}

const sift__sampler_desc sift__desc_no_repeat_ngram = {
    .name = "no_repeat_ngram",
    .summary = "bans every token that would complete an n-gram already in the window",
    .params = nr_params,
    .n_params = sizeof nr_params / sizeof nr_params[0],
    .rec_size = sizeof(nr_rec),
    .main = "n",
    .build = nr_build,
    .lint = nr_lint,
};

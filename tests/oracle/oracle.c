/*
 * oracle.c - the oracle's framework (row loading, the stage loop, accept)
 * and the oracle of greedy, dist and top-k. See oracle.h.
 */
#include "oracle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Spec -> sift chain                                                  */
/* ------------------------------------------------------------------ */

sift_status sp_add(sift_chain *c, const sp_stage *s, sift_error *err)
{
    switch (s->kind) {
    case SP_GREEDY: return sift_chain_add_greedy(c, err);
    case SP_DIST: return sift_chain_add_dist(c, err);
    case SP_DIST_ID: return sift_chain_add_dist_id_order(c, err);
    case SP_TOP_K: return sift_chain_add_top_k(c, s->i0, err);
    case SP_TOP_K_TIES: return sift_chain_add_top_k_ties(c, s->i0, err);
    case SP_TOP_P: return sift_chain_add_top_p(c, s->f0, s->i0, err);
    case SP_MIN_P: return sift_chain_add_min_p(c, s->f0, s->i0, err);
    case SP_TYPICAL: return sift_chain_add_typical(c, s->f0, s->i0, err);
    case SP_TEMP: return sift_chain_add_temp(c, s->f0, err);
    case SP_TEMP_EXT: return sift_chain_add_temp_ext(c, s->f0, s->f1, s->f2, err);
    case SP_XTC: return sift_chain_add_xtc(c, s->f0, s->f1, s->i0, err);
    case SP_TOP_N_SIGMA: return sift_chain_add_top_n_sigma(c, s->f0, err);
    case SP_MIROSTAT: return sift_chain_add_mirostat(c, s->i1, s->f0, s->f1, s->i0, err);
    case SP_MIROSTAT_V2: return sift_chain_add_mirostat_v2(c, s->f0, s->f1, err);
    case SP_PENALTIES: return sift_chain_add_penalties(c, s->i0, s->f0, s->f1, s->f2, err);
    case SP_DRY: {
        const int32_t *seqs[SP_MAX_BREAKERS];
        for (size_t i = 0; i < s->n_breakers; i++)
            seqs[i] = s->breaker[i];
        return sift__chain_add_dry_tokens(c, s->f0, s->f1, s->i0, s->i1, seqs, s->breaker_len,
                                          s->n_breakers, err);
    }
    case SP_LOGIT_BIAS: return sift_chain_add_logit_bias(c, s->bias, s->n_bias, err);
    case SP_EPSILON: return sift_chain_add_epsilon(c, s->f0, s->i0, err);
    case SP_ETA: return sift_chain_add_eta(c, s->f0, s->i0, err);
    case SP_ADAPTIVE_P: return sift_chain_add_adaptive_p(c, s->f0, s->f1, err);
    case SP_MIN_TOKENS: return sift_chain_add_min_tokens(c, s->i0, s->ids, s->n_ids, NULL, err);
    case SP_ALLOWED_TOKENS: return sift_chain_add_allowed_tokens(c, s->ids, s->n_ids, err);
    case SP_NO_REPEAT_NGRAM: return sift_chain_add_no_repeat_ngram(c, s->i0, s->i1, err);
    case SP_BAD_WORDS: {
        const int32_t *seqs[SP_MAX_WORDS];
        for (size_t i = 0; i < s->n_words; i++)
            seqs[i] = s->word[i];
        return sift_chain_add_bad_words(c, seqs, s->word_len, s->n_words, err);
    }
    case SP__COUNT: break;
    }
    return SIFT_E_ARG;
}

sift_status sp_build(const sp_chain *spec, sift_chain **out, sift_error *err)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = spec->seed;
    sift_status s = sift_chain_new(out, &p, err);
    if (s)
        return s;
    for (size_t i = 0; i < spec->n; i++) {
        s = sp_add(*out, &spec->st[i], err);
        if (s) {
            sift_chain_free(*out);
            *out = NULL;
            return s;
        }
    }
    return SIFT_OK;
}

static const char *kind_name[SP__COUNT] = {
    "greedy",     "dist",           "dist_id",         "top_k",       "top_k_ties",
    "top_p",      "min_p",          "typical",         "temp",        "temp_ext",
    "xtc",        "top_n_sigma",    "mirostat",        "mirostat_v2", "penalties",
    "dry",        "logit_bias",     "epsilon",         "eta",         "adaptive_p",
    "min_tokens", "allowed_tokens", "no_repeat_ngram", "bad_words",
};

void sp_describe(const sp_chain *spec, char *buf, size_t cap)
{
    size_t used = 0;
    used += (size_t)snprintf(buf + used, cap - used, "seed=%llu:", (unsigned long long)spec->seed);
    for (size_t i = 0; i < spec->n && used < cap; i++) {
        const sp_stage *s = &spec->st[i];
        used += (size_t)snprintf(buf + used, cap - used, " %s(i0=%d i1=%d f=%a,%a,%a nb=%zu)",
                                 kind_name[s->kind], (int)s->i0, (int)s->i1, (double)s->f0,
                                 (double)s->f1, (double)s->f2,
                                 s->n_bias + s->n_breakers + s->n_ids + s->n_words);
    }
}

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static int cmp_canon(const void *pa, const void *pb)
{
    const sift_candidate *a = pa, *b = pb;
    if (a->logit > b->logit)
        return -1;
    if (a->logit < b->logit)
        return 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int cmp_id(const void *pa, const void *pb)
{
    const sift_candidate *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

/* The canonical order as one unsigned key, smallest first: the logit
 * descending (+0 and -0 equal) in the high half, the id ascending in the
 * low half. */
static uint64_t canon_key(sift_candidate c)
{
    uint32_t u;
    memcpy(&u, &c.logit, sizeof u);
    if (u == 0x80000000u)
        u = 0;                                                /* -0 ties with +0 */
    uint32_t up = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending */
    return ((uint64_t)~up << 32) | ((uint32_t)c.id ^ 0x80000000u);
}

typedef struct keyed {
    uint64_t key;
    sift_candidate c;
} keyed;

/* The radix sort's two buffers, kept from one sort to the next (the
 * suites sort rows of the same length thousands of times; fresh buffers
 * each time cost more in page faults than the sort). The oracle runs on
 * one thread. */
static keyed *scratch;
static size_t scratch_cap;

/* A least-significant-digit radix sort of the keys, a byte at a time
 * (stable, so it is the order cmp_canon defines whatever qsort would do
 * with equal elements, which canonical keys never are unless an id
 * repeats). 0 when the buffers cannot be had. */
static int radix_canon(sift_candidate *c, size_t n)
{
    if (n > scratch_cap) {
        keyed *grown = realloc(scratch, 2 * n * sizeof *grown);
        if (grown == NULL)
            return 0;
        scratch = grown;
        scratch_cap = n;
    }
    keyed *a = scratch, *b = scratch + n;
    for (size_t i = 0; i < n; i++)
        a[i] = (keyed){canon_key(c[i]), c[i]};
    for (int shift = 0; shift < 64; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++)
            count[((a[i].key >> shift) & 0xff) + 1]++;
        if (count[((a[0].key >> shift) & 0xff) + 1] == n)
            continue; /* one digit throughout: the pass would not move anything */
        for (int d = 0; d < 256; d++)
            count[d + 1] += count[d];
        for (size_t i = 0; i < n; i++)
            b[count[(a[i].key >> shift) & 0xff]++] = a[i];
        keyed *t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; i < n; i++)
        c[i] = a[i].c;
    return 1;
}

/* qsort with cmp_canon for short arrays and rows holding a NaN (which
 * cmp_canon orders only by id); the radix sort, which gives the same
 * order, for the whole rows the suites sort thousands of times. */
void or_sort(or_arr *a)
{
    int nan = 0;
    for (size_t i = 0; i < a->n; i++)
        nan |= isnan(a->c[i].logit);
    if (a->n < 512 || nan || !radix_canon(a->c, a->n))
        qsort(a->c, a->n, sizeof *a->c, cmp_canon);
}

void or_sort_by_id(sift_candidate *c, size_t n)
{
    qsort(c, n, sizeof *c, cmp_id);
}

float or_max(const or_arr *a)
{
    return a->c[0].logit;
}

sift__u128 or_weights(const or_arr *a, uint64_t *w)
{
    float m = or_max(a);
    sift__u128 W = {0, 0};
    for (size_t i = 0; i < a->n; i++) {
        w[i] = sift__weight(sift__expf(a->c[i].logit - m));
        W = sift__u128_add64(W, w[i]);
    }
    return W;
}

size_t or_walk(const uint64_t *w, size_t n, sift__u128 T, int strict)
{
    sift__u128 run = {0, 0};
    for (size_t i = 0; i < n; i++) {
        run = sift__u128_add64(run, w[i]);
        int c = sift__u128_cmp(run, T);
        if (strict ? c > 0 : c >= 0)
            return i;
    }
    return n;
}

double or_dsum_idorder(const double *v, size_t n)
{
    double lane[8] = {0};
    for (size_t i = 0; i < n; i++)
        lane[i % 8] += v[i];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
           ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

void or_hist_push(or_stage_state *s, int32_t token, size_t cap)
{
    if (cap == 0)
        return;
    if (s->hist_cap < cap) {
        int32_t *h = realloc(s->hist, cap * sizeof *h);
        if (!h)
            abort(); /* test code: out of memory is fatal */
        s->hist = h;
        s->hist_cap = cap;
    }
    if (s->hist_n == cap) {
        memmove(s->hist, s->hist + 1, (cap - 1) * sizeof *s->hist);
        s->hist_n--;
    }
    s->hist[s->hist_n++] = token;
}

/* ------------------------------------------------------------------ */
/* The chain                                                           */
/* ------------------------------------------------------------------ */

void or_init(or_chain *o, const sp_chain *spec)
{
    memset(o, 0, sizeof *o);
    o->spec = *spec;
    or_reset(o);
}

void or_free(or_chain *o)
{
    for (size_t i = 0; i < SP_MAX_STAGES; i++)
        free(o->st[i].hist);
    memset(o, 0, sizeof *o);
}

void or_reset(or_chain *o)
{
    sift__rng_seed(&o->rng, o->spec.seed);
    for (size_t i = 0; i < o->spec.n; i++) {
        or_stage_state *s = &o->st[i];
        s->hist_n = 0;
        s->has_pending = 0;
        s->n_accepted = 0;
        if (o->spec.st[i].kind == SP_MIROSTAT || o->spec.st[i].kind == SP_MIROSTAT_V2)
            s->mu = 2.0 * (double)o->spec.st[i].f0;
        if (o->spec.st[i].kind == SP_ADAPTIVE_P)
            or_adaptive_p_reset(o, i);
    }
}

/* The stage loop shared by or_sample and or_run_stages: applies stages
 * [0, end) to a freshly loaded row. */
static sift_status run(or_chain *o, const float *row, int32_t V, size_t end, or_arr *a,
                       int32_t *tok)
{
    if (V < 1)
        return SIFT_E_ARG;
    if (o->spec.n == 0)
        return SIFT_E_ARG;
    int any = 0;
    for (int32_t i = 0; i < V; i++) {
        if (row[i] != row[i] || row[i] == INFINITY)
            return SIFT_E_ROW_VALUE;
        any |= row[i] > -INFINITY;
    }
    if (!any)
        return SIFT_E_NO_CANDIDATE;
    for (size_t i = 0; i < o->spec.n; i++) {
        const sp_stage *s = &o->spec.st[i];
        if (s->kind == SP_LOGIT_BIAS)
            for (size_t j = 0; j < s->n_bias; j++)
                if (s->bias[j].token >= V)
                    return SIFT_E_ARG;
        for (size_t j = 0; s->kind == SP_BAD_WORDS && j < s->n_words; j++)
            for (size_t k = 0; k < s->word_len[j]; k++)
                if (s->word[j][k] >= V)
                    return SIFT_E_ARG;
        if (s->kind == SP_MIN_TOKENS || s->kind == SP_ALLOWED_TOKENS)
            for (size_t j = 0; j < s->n_ids; j++)
                if (s->ids[j] >= V)
                    return SIFT_E_ARG;
    }
    a->c = malloc((size_t)V * sizeof *a->c);
    if (!a->c)
        abort();
    a->n = (size_t)V;
    a->V = V;
    for (int32_t i = 0; i < V; i++) {
        a->c[i].id = i;
        a->c[i].logit = row[i];
    }
    or_sort(a);
    sift_status st = SIFT_OK;
    for (size_t i = 0; i < end && st == SIFT_OK; i++) {
        switch (o->spec.st[i].kind) {
        case SP_GREEDY: st = or_greedy(o, i, a, tok); break;
        case SP_DIST: st = or_dist(o, i, a, tok); break;
        case SP_DIST_ID: st = or_dist_id(o, i, a, tok); break;
        case SP_TOP_K: st = or_top_k(o, i, a); break;
        case SP_TOP_K_TIES: st = or_top_k_ties(o, i, a); break;
        case SP_TOP_P: st = or_top_p(o, i, a); break;
        case SP_MIN_P: st = or_min_p(o, i, a); break;
        case SP_TYPICAL: st = or_typical(o, i, a); break;
        case SP_TEMP: st = or_temp(o, i, a); break;
        case SP_TEMP_EXT: st = or_temp_ext(o, i, a); break;
        case SP_XTC: st = or_xtc(o, i, a); break;
        case SP_TOP_N_SIGMA: st = or_top_n_sigma(o, i, a); break;
        case SP_MIROSTAT: st = or_mirostat(o, i, a, tok); break;
        case SP_MIROSTAT_V2: st = or_mirostat_v2(o, i, a, tok); break;
        case SP_PENALTIES: st = or_penalties(o, i, a); break;
        case SP_DRY: st = or_dry(o, i, a); break;
        case SP_LOGIT_BIAS: st = or_logit_bias(o, i, a); break;
        case SP_EPSILON: st = or_epsilon(o, i, a); break;
        case SP_ETA: st = or_eta(o, i, a); break;
        case SP_ADAPTIVE_P: st = or_adaptive_p(o, i, a, tok); break;
        case SP_MIN_TOKENS: st = or_min_tokens(o, i, a); break;
        case SP_ALLOWED_TOKENS: st = or_allowed_tokens(o, i, a); break;
        case SP_NO_REPEAT_NGRAM: st = or_no_repeat_ngram(o, i, a); break;
        case SP_BAD_WORDS: st = or_bad_words(o, i, a); break;
        case SP__COUNT: st = SIFT_E_ARG; break;
        }
        if (st == SIFT_OK && a->n == 0)
            st = SIFT_E_NO_CANDIDATE;
        if (st == SIFT_OK)
            or_sort(a);
    }
    return st;
}

sift_status or_sample(or_chain *o, const float *row, int32_t V, int32_t *token)
{
    sift__rng saved = o->rng;
    or_stage_state saved_pending[SP_MAX_STAGES];
    memcpy(saved_pending, o->st, sizeof saved_pending);
    or_arr a = {NULL, 0, V};
    int32_t tok = -1;
    sift_status st = run(o, row, V, o->spec.n, &a, &tok);
    free(a.c);
    if (st == SIFT_OK && tok < 0)
        st = SIFT_E_ARG; /* no selector */
    if (st != SIFT_OK) {
        o->rng = saved;
        for (size_t i = 0; i < SP_MAX_STAGES; i++) {
            o->st[i].has_pending = saved_pending[i].has_pending;
            o->st[i].pending_token = saved_pending[i].pending_token;
            o->st[i].pending_surprise = saved_pending[i].pending_surprise;
        }
        return st;
    }
    *token = tok;
    return SIFT_OK;
}

sift_status or_run_stages(or_chain *o, const float *row, int32_t V, size_t n_stages, or_arr *out)
{
    sift__rng saved = o->rng;
    or_stage_state saved_st[SP_MAX_STAGES];
    memcpy(saved_st, o->st, sizeof saved_st);
    int32_t tok = -1;
    out->c = NULL;
    sift_status st = run(o, row, V, n_stages, out, &tok);
    o->rng = saved;
    for (size_t i = 0; i < SP_MAX_STAGES; i++) {
        o->st[i].has_pending = saved_st[i].has_pending;
        o->st[i].pending_token = saved_st[i].pending_token;
        o->st[i].pending_surprise = saved_st[i].pending_surprise;
    }
    return st;
}

/* prompt = 1: a token the model did not generate (docs/samplers.md,
 * "min_tokens": its count is of generated tokens only); every other
 * stage of the oracle takes it as a generated one. */
static void accept_impl(or_chain *o, int32_t token, int prompt)
{
    for (size_t i = 0; i < o->spec.n; i++) {
        const sp_stage *s = &o->spec.st[i];
        switch (s->kind) {
        case SP_PENALTIES:
            if (s->i0 > 0)
                or_hist_push(&o->st[i], token, (size_t)s->i0);
            break;
        case SP_DRY:
            if (s->i1 > 0)
                or_hist_push(&o->st[i], token, (size_t)s->i1);
            break;
        case SP_MIROSTAT:
        case SP_MIROSTAT_V2: or_mirostat_accept(o, i, token); break;
        case SP_ADAPTIVE_P: or_adaptive_p_accept(o, i, token); break;
        case SP_MIN_TOKENS:
            if (!prompt)
                o->st[i].n_accepted++;
            break;
        case SP_BAD_WORDS: or_hist_push(&o->st[i], token, 64); break;
        case SP_NO_REPEAT_NGRAM:
            if (s->i1 > 0)
                or_hist_push(&o->st[i], token, (size_t)s->i1);
            break;
        default: break;
        }
    }
}

void or_accept(or_chain *o, int32_t token)
{
    accept_impl(o, token, 0);
}

void or_accept_prompt(or_chain *o, int32_t token)
{
    accept_impl(o, token, 1);
}

/* ------------------------------------------------------------------ */
/* greedy, dist, top-k                                                 */
/* ------------------------------------------------------------------ */

sift_status or_greedy(or_chain *o, size_t si, or_arr *a, int32_t *token)
{
    (void)o;
    (void)si;
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    *token = a->c[0].id;
    return SIFT_OK;
}

sift_status or_dist(or_chain *o, size_t si, or_arr *a, int32_t *token)
{
    (void)si;
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    if (a->n == 1) {
        *token = a->c[0].id;
        return SIFT_OK;
    }
    uint64_t *w = malloc(a->n * sizeof *w);
    if (!w)
        abort();
    sift__u128 W = or_weights(a, w);
    sift__u128 T = sift__u128_scale_u64(W, sift__rng_next(&o->rng));
    size_t i = or_walk(w, a->n, T, 1);
    free(w);
    *token = a->c[i < a->n ? i : a->n - 1].id;
    return SIFT_OK;
}

sift_status or_dist_id(or_chain *o, size_t si, or_arr *a, int32_t *token)
{
    (void)si;
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    if (a->n == 1) {
        *token = a->c[0].id;
        return SIFT_OK;
    }
    sift_candidate *byid = malloc(a->n * sizeof *byid);
    uint64_t *w = malloc(a->n * sizeof *w);
    if (!byid || !w)
        abort();
    memcpy(byid, a->c, a->n * sizeof *byid);
    or_sort_by_id(byid, a->n);
    float m = or_max(a);
    sift__u128 W = {0, 0};
    for (size_t i = 0; i < a->n; i++) {
        w[i] = sift__weight(sift__expf(byid[i].logit - m));
        W = sift__u128_add64(W, w[i]);
    }
    sift__u128 T = sift__u128_scale_u64(W, sift__rng_next(&o->rng));
    size_t i = or_walk(w, a->n, T, 1);
    *token = byid[i < a->n ? i : a->n - 1].id;
    free(byid);
    free(w);
    return SIFT_OK;
}

sift_status or_top_k(or_chain *o, size_t si, or_arr *a)
{
    int32_t k = o->spec.st[si].i0;
    if (k > 0 && (size_t)k < a->n)
        a->n = (size_t)k;
    return SIFT_OK;
}

sift_status or_top_k_ties(or_chain *o, size_t si, or_arr *a)
{
    int32_t k = o->spec.st[si].i0;
    if (k <= 0 || (size_t)k >= a->n)
        return SIFT_OK;
    float kth = a->c[k - 1].logit;
    size_t n = (size_t)k;
    while (n < a->n && a->c[n].logit == kth)
        n++;
    a->n = n;
    return SIFT_OK;
}

/*
 * oracle.h - the naive full-row reference implementation of every
 * sampler, and the chain spec that builds the same chain in sift and in
 * the oracle.
 *
 * The oracle is deliberately simple: after every stage the array is fully
 * sorted into canonical order (a byte-wise radix sort over one key per
 * candidate for long arrays, qsort for short ones; check_exact tests that
 * it is the comparator's order), every sum is a plain loop in
 * the order the definition names, every walk is a plain loop. It shares
 * with the library only the numeric primitives that *define* the
 * arithmetic (sift__expf, sift__logf, sift__log, sift__exp, sift__pow,
 * sift__weight, the u128 helpers and the RNG), which have their own tests
 * in check_num. Everything algorithmic (selection, prefix search, which
 * tokens survive) is written again here from docs/samplers.md.
 */
#ifndef SIFT_ORACLE_H
#define SIFT_ORACLE_H

#include "sift_internal.h"

typedef enum sp_kind {
    SP_GREEDY,
    SP_DIST,
    SP_DIST_ID,
    SP_TOP_K,
    SP_TOP_K_TIES,
    SP_TOP_P,
    SP_MIN_P,
    SP_TYPICAL,
    SP_TEMP,
    SP_TEMP_EXT,
    SP_XTC,
    SP_TOP_N_SIGMA,
    SP_MIROSTAT,
    SP_MIROSTAT_V2,
    SP_PENALTIES,
    SP_DRY,
    SP_LOGIT_BIAS,
    SP_EPSILON,
    SP_ETA,
    SP_ADAPTIVE_P,
    SP_MIN_TOKENS,
    SP_ALLOWED_TOKENS,
    SP_NO_REPEAT_NGRAM,
    SP_BAD_WORDS,
    SP__COUNT
} sp_kind;

#define SP_MAX_STAGES 16
#define SP_MAX_BIAS 16
#define SP_MAX_BREAKERS 4
#define SP_MAX_BREAKER_LEN 4
#define SP_MAX_IDS 16
#define SP_MAX_WORDS 6
#define SP_MAX_WORD_LEN 4

/* Parameters of one stage. Which fields a kind uses:
 *   TOP_K, TOP_K_TIES: i0 = k
 *   TOP_P, MIN_P, TYPICAL: f0 = p, i0 = min_keep
 *   TEMP: f0 = temp
 *   TEMP_EXT: f0 = temp, f1 = delta, f2 = exponent
 *   XTC: f0 = probability, f1 = threshold, i0 = min_keep
 *   TOP_N_SIGMA: f0 = n
 *   MIROSTAT: f0 = tau, f1 = eta, i0 = m, i1 = n_vocab
 *   MIROSTAT_V2: f0 = tau, f1 = eta
 *   PENALTIES: i0 = last_n, f0 = repeat, f1 = freq, f2 = presence
 *   DRY: f0 = multiplier, f1 = base, i0 = allowed_length, i1 = last_n,
 *        breakers as token sequences (head = first token)
 *   LOGIT_BIAS: bias[0..n_bias)
 *   EPSILON: f0 = epsilon, i0 = min_keep
 *   ETA: f0 = eta, i0 = min_keep
 *   ADAPTIVE_P: f0 = target, f1 = decay
 *   MIN_TOKENS: i0 = min_tokens (-1 = always), ids[0..n_ids) banned
 *   ALLOWED_TOKENS: ids[0..n_ids) the only ids left finite
 *   NO_REPEAT_NGRAM: i0 = n, i1 = last_n (the window)
 *   BAD_WORDS: word[0..n_words), each of word_len[i] ids
 */
typedef struct sp_stage {
    sp_kind kind;
    int32_t i0, i1;
    float f0, f1, f2;
    size_t n_bias;
    sift_bias bias[SP_MAX_BIAS];
    size_t n_breakers;
    int32_t breaker[SP_MAX_BREAKERS][SP_MAX_BREAKER_LEN];
    size_t breaker_len[SP_MAX_BREAKERS];
    size_t n_ids;
    int32_t ids[SP_MAX_IDS];
    size_t n_words;
    int32_t word[SP_MAX_WORDS][SP_MAX_WORD_LEN];
    size_t word_len[SP_MAX_WORDS];
} sp_stage;

typedef struct sp_chain {
    uint64_t seed;
    size_t n;
    sp_stage st[SP_MAX_STAGES];
} sp_chain;

/* Builds the sift chain a spec describes (max_vocab default). */
sift_status sp_build(const sp_chain *spec, sift_chain **out, sift_error *err);
/* Appends one stage to a sift chain. */
sift_status sp_add(sift_chain *chain, const sp_stage *st, sift_error *err);
/* Random parameters for a stage of the given kind, valid for the API
 * (tests/oracle/gen.c). */
struct tu_rng;
void gen_stage(struct tu_rng *r, sp_stage *s, sp_kind kind, int32_t V);

/* A human-readable description, for failure messages. */
void sp_describe(const sp_chain *spec, char *buf, size_t cap);

/* ------------------------------------------------------------------ */
/* The oracle                                                          */
/* ------------------------------------------------------------------ */

/* Candidates, always in canonical order between stages. */
typedef struct or_arr {
    sift_candidate *c;
    size_t n;
    int32_t V;
} or_arr;

/* Mutable state of one stage. */
typedef struct or_stage_state {
    int32_t *hist; /* accepted tokens, oldest first (penalties, DRY) */
    size_t hist_n;
    size_t hist_cap;
    double mu;                /* mirostat */
    double ap_sum, ap_weight; /* adaptive_p's moving average */
    int has_pending;
    int32_t pending_token;
    double pending_surprise; /* adaptive_p: the original probability */
    int64_t n_accepted;      /* min_tokens: generated tokens since reset */
} or_stage_state;

typedef struct or_chain {
    sp_chain spec;
    sift__rng rng;
    or_stage_state st[SP_MAX_STAGES];
} or_chain;

void or_init(or_chain *o, const sp_chain *spec);
void or_free(or_chain *o);
void or_reset(or_chain *o);
/* Samples from a whole row: returns a sift_status (SIFT_OK, or the error
 * class sift must return too). */
sift_status or_sample(or_chain *o, const float *row, int32_t V, int32_t *token);
/* A generated token (sift_chain_accept). */
void or_accept(or_chain *o, int32_t token);
/* A prompt token (sift_chain_accept_prompt): as or_accept, but
 * min_tokens does not count it. */
void or_accept_prompt(or_chain *o, int32_t token);
/* Runs the first n_stages stages on a row and leaves the surviving
 * candidates in *out (canonical order; the caller frees out->c). Changes
 * nothing in `o` (the RNG is restored). */
sift_status or_run_stages(or_chain *o, const float *row, int32_t V, size_t n_stages, or_arr *out);

/* Helpers for the per-family files. */
void or_sort(or_arr *a); /* canonical order (logit descending, id ascending) */
void or_sort_by_id(sift_candidate *c, size_t n);
float or_max(const or_arr *a); /* a->c[0].logit once sorted */
/* Weights of the (sorted) array into w, returns W. */
sift__u128 or_weights(const or_arr *a, uint64_t *w);
/* Index of the first element (canonical walk) whose inclusive prefix sum
 * of w reaches T (>= T, or > T when strict); n if none. */
size_t or_walk(const uint64_t *w, size_t n, sift__u128 T, int strict);
/* The id-order double sum of docs/samplers.md, written out again. */
double or_dsum_idorder(const double *v, size_t n);

/* Per-stage oracle functions: each applies its stage to `a` (sorted on
 * entry, must be sorted on exit). Selectors set *token. */
sift_status or_greedy(or_chain *o, size_t si, or_arr *a, int32_t *token);
sift_status or_dist(or_chain *o, size_t si, or_arr *a, int32_t *token);
sift_status or_dist_id(or_chain *o, size_t si, or_arr *a, int32_t *token);
sift_status or_top_k(or_chain *o, size_t si, or_arr *a);
sift_status or_top_k_ties(or_chain *o, size_t si, or_arr *a);
/* oracle_trunc.c */
sift_status or_top_p(or_chain *o, size_t si, or_arr *a);
sift_status or_min_p(or_chain *o, size_t si, or_arr *a);
sift_status or_typical(or_chain *o, size_t si, or_arr *a);
sift_status or_xtc(or_chain *o, size_t si, or_arr *a);
/* oracle_temp.c */
sift_status or_temp(or_chain *o, size_t si, or_arr *a);
sift_status or_temp_ext(or_chain *o, size_t si, or_arr *a);
sift_status or_top_n_sigma(or_chain *o, size_t si, or_arr *a);
sift_status or_mirostat(or_chain *o, size_t si, or_arr *a, int32_t *token);
sift_status or_mirostat_v2(or_chain *o, size_t si, or_arr *a, int32_t *token);
void or_mirostat_accept(or_chain *o, size_t si, int32_t token);
/* oracle_penalties.c */
sift_status or_penalties(or_chain *o, size_t si, or_arr *a);
sift_status or_dry(or_chain *o, size_t si, or_arr *a);
sift_status or_logit_bias(or_chain *o, size_t si, or_arr *a);
/* oracle_cutoff.c */
sift_status or_epsilon(or_chain *o, size_t si, or_arr *a);
sift_status or_eta(or_chain *o, size_t si, or_arr *a);
sift_status or_adaptive_p(or_chain *o, size_t si, or_arr *a, int32_t *token);
void or_adaptive_p_accept(or_chain *o, size_t si, int32_t token);
void or_adaptive_p_reset(or_chain *o, size_t si);
/* oracle_ban.c */
sift_status or_min_tokens(or_chain *o, size_t si, or_arr *a);
sift_status or_allowed_tokens(or_chain *o, size_t si, or_arr *a);
sift_status or_no_repeat_ngram(or_chain *o, size_t si, or_arr *a);
sift_status or_bad_words(or_chain *o, size_t si, or_arr *a);
/* Pushes a token into a history window of capacity cap (oldest dropped). */
void or_hist_push(or_stage_state *s, int32_t token, size_t cap);

#endif

/*
 * kernels.h - row kernels of the whole-row step (core/kernels.c,
 * core/gather.c, core/threshold.c), each
 * with a scalar twin that gives the same bits, chosen by the run-time
 * dispatch of core/simd.h. Used by src/core/ and by the samplers that
 * read a whole row (top_n_sigma.c, typical.c, mirostat.c, adaptive_p.c).
 */
#ifndef SIFT_CORE_KERNELS_H
#define SIFT_CORE_KERNELS_H

#include "../sift_internal.h"

/* cd[i] = {i, row[i]} for i in [0, n); *bad = 1 when row[0..n) holds a
 * NaN or +inf, else 0; *any = 1 when it holds a value above -inf, else
 * 0. Through the kernels of sift__simd(). */
SIFT__HIDDEN void sift__load_cand(const float *row, sift_candidate *cd, size_t n, int *bad,
                                  int *any);
/* sift__load_cand by the kernel of `level` (or the best level below it
 * the build and machine have); tests compare the levels. */
SIFT__HIDDEN void sift__load_cand_at(int level, const float *row, sift_candidate *cd, size_t n,
                                     int *bad, int *any);

/* Adds to the lanes s[0..8) the finite logits l of cd[0..n) (mean =
 * NULL) or ((double)l - *mean)^2, the j-th finite one to lane j mod 8,
 * in order: the lanes of sift__dsum_idorder over those values. *count =
 * how many were finite, *max = the largest logit (-inf if none; the sign
 * of a zero maximum is unspecified). Through the kernels of sift__simd()
 * (scalar, AVX2). */
SIFT__HIDDEN void sift__lane_sums(const sift_candidate *cd, size_t n, const double *mean,
                                  double s[8], size_t *count, float *max);
/* sift__lane_sums by the kernel of `level` (tests compare the levels). */
SIFT__HIDDEN void sift__lane_sums_at(int level, const sift_candidate *cd, size_t n,
                                     const double *mean, double s[8], size_t *count, float *max);

/* Whole-distribution kernels (typical.c), each with a scalar twin that
 * gives the same bits; _at runs the kernel of `level` (tests compare the
 * levels: scalar, AVX2, AVX-512F).
 *
 * bk[i] = the score bucket of c[i]: x = (LS - (double)(c[i].logit - m))
 * - H, its sign cleared, times scale, clamped above at top (NaN too),
 * truncated to an integer (top < 2^31). */
SIFT__HIDDEN void sift__score_buckets(const sift_candidate *c, size_t n, float m, double LS,
                                      double H, double scale, double top, uint32_t *bk);
SIFT__HIDDEN void sift__score_buckets_at(int level, const sift_candidate *c, size_t n, float m,
                                         double LS, double H, double scale, double top,
                                         uint32_t *bk);
/* The first index in [i, n) with bk[index] == b, or n. */
SIFT__HIDDEN size_t sift__find_eq_u32(const uint32_t *bk, size_t i, size_t n, uint32_t b);
/* typical's band pass over the buckets bk[0..n) with weights w (each at
 * most 2^62) and a band [lo, hi] (lo <= hi < 2^31): below = the tokens
 * with bk < lo, their weights summed in 32-bit halves (mass = lo + hi *
 * 2^32: sift__u128_halves) and counted; the m tokens with lo <= bk <= hi
 * listed in id order, their indices to bidx[0..m) and weights to
 * bw[0..m) (both must hold n entries: every one may be written). */
typedef struct sift__band_sums {
    uint64_t lo, hi;
    size_t below, m;
} sift__band_sums;
SIFT__HIDDEN void sift__bucket_band(const uint32_t *bk, const uint64_t *w, size_t n, uint32_t lo,
                                    uint32_t hi, sift__band_sums *o, uint64_t *bidx, uint64_t *bw);
SIFT__HIDDEN void sift__bucket_band_at(int level, const uint32_t *bk, const uint64_t *w, size_t n,
                                       uint32_t lo, uint32_t hi, sift__band_sums *o, uint64_t *bidx,
                                       uint64_t *bw);
SIFT__HIDDEN size_t sift__find_eq_u32_at(int level, const uint32_t *bk, size_t i, size_t n,
                                         uint32_t b);
/* top_n_sigma's moments for its certified threshold (docs/samplers.md,
 * "top_n_sigma's certified threshold"): over the finite candidates of
 * cd[0..n) (logit > -inf), their count and largest logit (exact), and
 * the sum of (double)l and of the squares (double)l * (double)l, each
 * square rounded once or added by a fused multiply-add, each sum in some
 * order of the kernel's own in which no term passes through more than
 * n + 8 additions: no bits are promised across levels, only that bound. */
typedef struct sift__moments {
    size_t count;
    float max;
    double sum, sumsq;
} sift__moments;
SIFT__HIDDEN void sift__moments_of(const sift_candidate *cd, size_t n, sift__moments *mo);
SIFT__HIDDEN void sift__moments_of_at(int level, const sift_candidate *cd, size_t n,
                                      sift__moments *mo);
/* The same moments over a row of floats x[0..n) (NaN-free; a NaN is
 * neither counted nor promised anything): what sift__moments_of gives
 * for the row loaded as candidates, up to the order of the sums. */
SIFT__HIDDEN void sift__moments_row(const float *x, size_t n, sift__moments *mo);
SIFT__HIDDEN void sift__moments_row_at(int level, const float *x, size_t n, sift__moments *mo);
/* top_n_sigma's threshold from moments (samplers/top_n_sigma.c): for
 * moments of an array of n_terms candidates (count >= 2) and the stage's
 * n > 0, returns 1 and sets *thr when every float logit gets the same
 * verdict (double)l >= t from *thr as from the definition's threshold
 * (docs/samplers.md, "top_n_sigma"), whatever order the definition's
 * sums round in; 0 when the bound cannot tell. */
SIFT__HIDDEN int sift__tns_threshold(const sift__moments *mo, size_t n_terms, float n, double *thr);
/* The interval [*s2_lo, *s2_hi] that holds the definition's sum of
 * squared deviations (before its division by the count) for those
 * moments; 0 when none can be given (count < 2, n_terms too large). */
SIFT__HIDDEN int sift__tns_bounds(const sift__moments *mo, size_t n_terms, double *s2_lo,
                                  double *s2_hi);
/* The first index in [i, n) with w[index] >= t (unsigned), or n: XTC's
 * search for the few tokens at or above its threshold. */
SIFT__HIDDEN size_t sift__find_w_ge(const uint64_t *w, size_t i, size_t n, uint64_t t);
SIFT__HIDDEN size_t sift__find_w_ge_at(int level, const uint64_t *w, size_t i, size_t n,
                                       uint64_t t);
/* Keeps, in place and in order, the candidates c[i] with bk[i] < bstar
 * and those with bk[i] == bstar for which keep_eq(&c[i], arg) is nonzero
 * (called in index order); returns how many were kept. */
typedef int (*sift__keep_fn)(const sift_candidate *x, void *arg);
SIFT__HIDDEN size_t sift__keep_below(sift_candidate *c, const uint32_t *bk, size_t n,
                                     uint32_t bstar, sift__keep_fn keep_eq, void *arg);
SIFT__HIDDEN size_t sift__keep_below_at(int level, sift_candidate *c, const uint32_t *bk, size_t n,
                                        uint32_t bstar, sift__keep_fn keep_eq, void *arg);
/* sift__keep_below that moves w[i] with c[i] (both arrays compacted
 * alike: c[0..k) and w[0..k) the kept ones in order, c[k..n) and
 * w[k..n) unspecified after) and sets *kept to the exact 128-bit sum of
 * the kept weights (n below 2^31, each weight below 2^63); returns k,
 * how many were kept. */
SIFT__HIDDEN size_t sift__keep_below_w(sift_candidate *c, uint64_t *w, const uint32_t *bk, size_t n,
                                       uint32_t bstar, sift__keep_fn keep_eq, void *arg,
                                       sift__u128 *kept);
SIFT__HIDDEN size_t sift__keep_below_w_at(int level, sift_candidate *c, uint64_t *w,
                                          const uint32_t *bk, size_t n, uint32_t bstar,
                                          sift__keep_fn keep_eq, void *arg, sift__u128 *kept);

/* Keeps, in place and in order, the candidates with (double)logit >= thr
 * (top_n_sigma's cut; a NaN logit or thr keeps none); returns how many. */
SIFT__HIDDEN size_t sift__keep_logit_ge(sift_candidate *c, size_t n, double thr);
SIFT__HIDDEN size_t sift__keep_logit_ge_at(int level, sift_candidate *c, size_t n, double thr);
/* How many of c[0..n) have logit >= thr (min_p's count; an ordered
 * compare: a NaN logit or thr counts none). */
SIFT__HIDDEN size_t sift__count_logit_ge(const sift_candidate *c, size_t n, float thr);
SIFT__HIDDEN size_t sift__count_logit_ge_at(int level, const sift_candidate *c, size_t n,
                                            float thr);

/* mirostat's kernels (mirostat.c, adaptive_p.c), each with a scalar twin
 * that gives the same result; _at runs the kernel of `level` (tests
 * compare the levels: scalar, AVX2, AVX-512F).
 *
 * Keeps, in place and in order, the candidates c[i] with w[i] >= ws,
 * moving w[i] with them (every w[i] <= 2^62, n < 2^31); returns how many
 * were kept, and their weights' sum in *kept. Only c[0..kept count) and
 * w[0..kept count) are defined afterwards. */
SIFT__HIDDEN size_t sift__keep_w_ge(sift_candidate *c, uint64_t *w, size_t n, uint64_t ws,
                                    sift__u128 *kept);
SIFT__HIDDEN size_t sift__keep_w_ge_at(int level, sift_candidate *c, uint64_t *w, size_t n,
                                       uint64_t ws, sift__u128 *kept);
/* The tokens of row[0..n) that are not <= t (above t, and NaN or +inf,
 * which set *bad), in id order, to cd[0..m) as (id, logit) candidates;
 * returns m. cd must hold n candidates (all of it may be written). */
SIFT__HIDDEN size_t sift__load_above(const float *row, size_t n, float t, sift_candidate *cd,
                                     int *bad);
SIFT__HIDDEN size_t sift__load_above_at(int level, const float *row, size_t n, float t,
                                        sift_candidate *cd, int *bad);
/* out[i] = c[i].logit for i < n, bit for bit (the tail route inside a
 * full pass copies an array's logits to a row with it). */
SIFT__HIDDEN void sift__cand_logits(const sift_candidate *c, size_t n, float *out);
SIFT__HIDDEN void sift__cand_logits_at(int level, const sift_candidate *c, size_t n, float *out);
/* The first index i with c[i].id == id, or n. */
SIFT__HIDDEN size_t sift__find_id(const sift_candidate *c, size_t n, int32_t id);
SIFT__HIDDEN size_t sift__find_id_at(int level, const sift_candidate *c, size_t n, int32_t id);
/* The index of the canonical first candidate of c[0..n) (n >= 1), whose
 * largest logit is m: the least id among the logits equal to m (-0 equal
 * to +0); when `ordered` says c is in ascending id order or in canonical
 * order, the first of them. */
SIFT__HIDDEN size_t sift__canon_first(const sift_candidate *c, size_t n, float m, int ordered);
/* The first index i in [from, n) with c[i].logit == m (as floats: -0
 * equals +0; NaN equals nothing), or n. */
SIFT__HIDDEN size_t sift__find_logit_eq(const sift_candidate *c, size_t from, size_t n, float m);
SIFT__HIDDEN size_t sift__find_logit_eq_at(int level, const sift_candidate *c, size_t from,
                                           size_t n, float m);
#endif /* SIFT_CORE_KERNELS_H */

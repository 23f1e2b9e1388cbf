/*
 * simd.h - run-time CPU dispatch and the row kernels chosen by it
 * (core/cpu.c), and the one-pass top-k of a row built on them
 * (core/topk.c).
 *
 * The portable build holds every variant (function-level target
 * attributes, no -march): a level is detected once per process, capped by
 * the SIFT_SIMD environment variable ("scalar", "sse2", "avx2",
 * "avx512"), and its table of kernels is used from then on. Every vector
 * kernel has a scalar twin; where a result is defined bit for bit (the
 * top-k scan) every level gives the same bits, and the tests run each
 * level the machine has against the scalar one.
 */
#ifndef SIFT_CORE_SIMD_H
#define SIFT_CORE_SIMD_H

#include "../sift_internal.h"

/* Clears the upper halves of the vector registers. A kernel built for
 * AVX2 or AVX-512 calls it after its last wide operation and before it
 * calls or returns to code built without AVX (its scalar tail): GCC
 * leaves out the vzeroupper it owes there when the kernel ends in a call,
 * and on this project's AMD EPYC host every SSE instruction after a wide
 * kernel then waited on the stale upper halves (a scalar histogram loop
 * ran 4 times slower). Only for use inside a function built with an AVX
 * target, in a file that includes <immintrin.h>. */
#define sift__vzeroupper() _mm256_zeroupper()

/* Dispatch levels, in increasing order; a level implies those below it. */
enum {
    SIFT__SIMD_SCALAR = 0, /* plain C, every machine */
    SIFT__SIMD_SSE2 = 1,   /* x86-64 baseline */
    SIFT__SIMD_AVX2 = 2,
    SIFT__SIMD_AVX512 = 3, /* AVX-512F */
    SIFT__SIMD_LEVELS = 4
};

/* The most indices one call of a scan kernel adds per block: the kernel
 * stops while fewer than this many free slots remain. */
#define SIFT__SCAN_BLOCK 64
/* The run of the sampled threshold (core/topk.c): 64 tokens. */
#define SIFT__TOPK_SAMPLE_SEG 64

typedef struct sift__simd_ops {
    int level;
    const char *name;
    /* Largest of x[0..n) (n >= 1) by four running maxima: the floor of
     * any pass over a row. NaN-free input gives its largest value (the
     * sign of a zero maximum is unspecified); -inf when n = 0. */
    float (*max_f32)(const float *x, size_t n);
    /* out[j] = the largest of the SIFT__TOPK_SAMPLE_SEG floats at
     * x + j * stride, j < g, as max_f32 gives it (NaN-free runs: their
     * largest value, the sign of a zero maximum unspecified). */
    void (*runs_max)(const float *x, size_t stride, size_t g, float *out);
    /* Scans x[i..n) and appends to idx[*m..) the index of every x[j] > t
     * in ascending order (and perhaps of a NaN, as !(x <= t) would).
     * Sets *bad to 1 when x[i..n) holds a NaN or +inf, and may set it for
     * a row that holds neither (a sum of huge values overflowed): the
     * caller checks the row then. Stops at n or before a block once
     * fewer than SIFT__SCAN_BLOCK slots are left below cap (the kernel
     * may write, not count, up to that many past *m); returns the index
     * it stopped at. Levels may stop at different points (their blocks
     * differ); on a range without NaN they append the same indices. */
    size_t (*scan_gt)(const float *x, size_t i, size_t n, float t, uint32_t *idx, size_t *m,
                      size_t cap, int *bad);

    /* The row step's tail route (core/step.c; docs/analyzer.md, "Tail
     * mass"): an upper bound S, in real arithmetic, of the sum of
     * exp(x[i] - m) over every i < n with x[i] <= lk, for a NaN-free row
     * without +inf whose largest value is m (finite). +inf when no
     * valid bound can be given (n >= 2^28). Every level returns the same
     * bits (core/cpu.c has the method and its proof). */
    double (*tail_mass)(const float *x, size_t n, float m, float lk);
    /* The same kernel in parts: adds the terms of x[i..n) to lanes[0..64)
     * (token j to lane j mod 64). tail_mass(x, n, m, lk) is
     * sift__tail_finish(lanes, n) after one call over [0, n) on zeroed
     * lanes, and any split of [0, n) into calls in ascending order gives
     * the same lanes, bit for bit, at every level. */
    void (*tail_add)(const float *x, size_t i, size_t n, float m, float lk, float *lanes);
    /* scan_gt and tail_add at reference and cut-off t in one read of x:
     * appends the index of every x[j] > t or NaN, j in [i, returned), as
     * scan_gt does, and adds the tail term of every other x[j] in that
     * range to lanes as tail_add(x, i, returned, t, t, lanes) would, bit
     * for bit (t finite). Stops as scan_gt does (it may stop elsewhere:
     * levels' blocks differ, and a range that does not start at a
     * multiple of 64 first takes a scalar head). No bad flag: every NaN
     * and +inf of the range is among the indices appended. */
    size_t (*scan_tail_gt)(const float *x, size_t i, size_t n, float t, uint32_t *idx, size_t *m,
                           size_t cap, float *lanes);
} sift__simd_ops;

/* The bound S of the tail kernel from its 64 lanes of the n tokens it
 * read (sift__simd_ops.tail_add); +inf when n >= 2^28. */
SIFT__HIDDEN double sift__tail_finish(const float *lanes, size_t n);

/* The kernels of `level`, or of the best level below it that this build
 * and machine have. Never NULL. */
SIFT__HIDDEN const sift__simd_ops *sift__simd_ops_at(int level);
/* The best level this build and machine have (not capped by SIFT_SIMD). */
SIFT__HIDDEN int sift__simd_detect(void);
/* The kernels the library uses: sift__simd_detect() capped by SIFT_SIMD
 * (an unknown value means no cap), chosen at the first call and kept for
 * the life of the process (safe from any thread). */
SIFT__HIDDEN const sift__simd_ops *sift__simd(void);
/* The level named by s ("scalar", "sse2", "avx2", "avx512"), -1 if none. */
SIFT__HIDDEN int sift__simd_parse(const char *s);

/* The largest k sift__topk_row takes; larger k belong to the block path
 * of sift__row_prefix (core/slice.c). */
#define SIFT__TOPK_MAX 4096

/* 1 when sift__topk_row handles (V, k): 1 <= k <= SIFT__TOPK_MAX and
 * k + 2 * SIFT__SCAN_BLOCK <= V. */
SIFT__HIDDEN int sift__topk_fits(int32_t V, size_t k);
/* The contract of sift__row_prefix (validates the row: the same status
 * and message; writes its canonical first k tokens to out[0..k) in
 * canonical order) in one pass over the row with a running threshold,
 * through the kernels of sift__simd(); when !sift__topk_fits(V, k) it
 * calls sift__row_prefix. Uses ws->u32, ws->u64b and ws->u64c, and
 * ws->f64 when ctx->tail_want is set (it then sets ctx->tail_ok and, with
 * it, ctx->tail_S and ctx->tail_lower: core/topk.c); out may be ws->cand
 * but not those. */
SIFT__HIDDEN sift_status sift__topk_row(sift__ctx *ctx, const float *row, int32_t V, size_t k,
                                        sift_candidate *out);
/* sift__topk_row through the kernels of `level` (tests compare them);
 * requires sift__topk_fits(V, k). */
SIFT__HIDDEN sift_status sift__topk_row_at(int level, sift__ctx *ctx, const float *row, int32_t V,
                                           size_t k, sift_candidate *out);

/* sift__topk_row_at, also telling how many passes over the row it made
 * (1, or 2 when a sampled threshold was beaten by fewer than k tokens and
 * the exact pass ran after it). */
SIFT__HIDDEN sift_status sift__topk_row_passes(int level, sift__ctx *ctx, const float *row,
                                               int32_t V, size_t k, sift_candidate *out,
                                               int *passes);

/* The sampled threshold of sift__topk_row (core/topk.c): for
 * k >= SIFT__TOPK_SAMPLE_MIN_K and V >= SIFT__TOPK_SAMPLE_MIN_RATIO * k,
 * runs of SIFT__TOPK_SAMPLE_SEG tokens are read every `stride` tokens
 * (run j starts at j * stride, j < segs; r <= segs) and the r-th
 * largest of their maxima (runs_max) is the first threshold. Returns 0
 * (and sets nothing) when the pass does not sample. Tests build rows that
 * defeat the sample from it. */
#ifndef SIFT__TOPK_SAMPLE_MIN_K
#define SIFT__TOPK_SAMPLE_MIN_K 16
#endif
#ifndef SIFT__TOPK_SAMPLE_MU
#define SIFT__TOPK_SAMPLE_MU 8 /* sampled tokens expected above the k-th value */
#endif
#define SIFT__TOPK_SAMPLE_MIN_RATIO 256
#define SIFT__TOPK_SAMPLE_MAX_R 32 /* the largest r a plan uses */
#ifndef SIFT__TOPK_SAMPLE_MAX_PART
#define SIFT__TOPK_SAMPLE_MAX_PART 16 /* at most this part of the row is sampled */
#endif
SIFT__HIDDEN int sift__topk_sample_plan(int32_t V, size_t k, size_t *segs, size_t *stride,
                                        size_t *r);

#endif

/*
 * cpu.c - run-time CPU dispatch and the row kernels (core/simd.h).
 *
 * Owns the detection of the vector level (SSE2 baseline, AVX2, AVX-512F
 * on x86-64 with GCC or Clang; scalar elsewhere), its cap by the SIFT_SIMD
 * environment variable, and one table of kernels per level: the
 * max-reduction every benchmark reports as its floor, the threshold
 * scan of the one-pass top-k (core/topk.c), the tail route's bound on
 * the mass below a logit (tail_mass, tail_add) and the scan fused with
 * it (scan_tail_gt).
 *
 * Invariants: one build holds every level (function-level target
 * attributes, no -march); a level is used only when the CPU reports it;
 * every vector scan returns exactly the indices of its scalar twin. The
 * chosen table is the only process-wide state: it is computed from the
 * machine and the environment alone, so racing first calls store the same
 * value, and it is published with an atomic store.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "simd.h"

#if defined(__x86_64__) && !defined(SIFT_NO_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define SIFT__X86 1
#include <immintrin.h>
#endif

/* ------------------------------------------------------------------ */
/* Scalar                                                              */
/* ------------------------------------------------------------------ */

static float max_scalar(const float *x, size_t n)
{
    float m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        m0 = x[i] > m0 ? x[i] : m0;
        m1 = x[i + 1] > m1 ? x[i + 1] : m1;
        m2 = x[i + 2] > m2 ? x[i + 2] : m2;
        m3 = x[i + 3] > m3 ? x[i + 3] : m3;
    }
    for (; i < n; i++)
        m0 = x[i] > m0 ? x[i] : m0;
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    return m2 > m0 ? m2 : m0;
}

/* The maxima of g runs of SIFT__TOPK_SAMPLE_SEG tokens, run j starting
 * at x + j * stride: the sampled threshold's reads (core/topk.c). */
static void runs_max_scalar(const float *x, size_t stride, size_t g, float *out)
{
    for (size_t j = 0; j < g; j++)
        out[j] = max_scalar(x + j * stride, SIFT__TOPK_SAMPLE_SEG);
}

/* The tail of every scan, and the whole scalar scan: the definition. */
static size_t scan_tail(const float *x, size_t i, size_t n, float t, uint32_t *idx, size_t *m,
                        int *bad)
{
    size_t c = *m;
    int b = 0;
    for (; i < n; i++) {
        b |= !(x[i] < INFINITY);
        if (!(x[i] <= t))
            idx[c++] = (uint32_t)i;
    }
    *m = c;
    *bad |= b;
    return n;
}

static size_t scan_scalar(const float *x, size_t i, size_t n, float t, uint32_t *idx, size_t *m,
                          size_t cap, int *bad)
{
    /* Blocks of SIFT__SCAN_BLOCK, as the vector kernels stop. */
    while (i < n && *m + SIFT__SCAN_BLOCK <= cap) {
        size_t e = n - i > SIFT__SCAN_BLOCK ? i + SIFT__SCAN_BLOCK : n;
        i = scan_tail(x, i, e, t, idx, m, bad);
    }
    return i;
}

/* ------------------------------------------------------------------ */
/* x86-64                                                              */
/* ------------------------------------------------------------------ */

#ifdef SIFT__X86

/* Appends the set bits of mask (lane j = index base + j). */
static inline size_t push_bits(uint32_t *idx, size_t c, uint32_t mask, size_t base)
{
    while (mask) {
        idx[c++] = (uint32_t)(base + (size_t)__builtin_ctz(mask));
        mask &= mask - 1;
    }
    return c;
}

/* The vector scans. A block of four vectors costs what the floor costs
 * plus a compare and four adds: the block maximum (three max) is compared
 * with t, and only a block whose maximum exceeds t is looked at lane by
 * lane. A max can drop a NaN, so NaN and +inf are caught by four running
 * sums instead, which a NaN or +inf makes NaN or +inf for good; finite
 * values whose sum overflows raise the same flag, and the caller's check
 * of the row clears it (then no NaN was there to drop). Lanes of a block
 * that is looked at are compared as the scalar twin compares. */

static float max_sse2(const float *x, size_t n)
{
    __m128 a0 = _mm_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm_max_ps(a0, _mm_loadu_ps(x + i));
        a1 = _mm_max_ps(a1, _mm_loadu_ps(x + i + 4));
        a2 = _mm_max_ps(a2, _mm_loadu_ps(x + i + 8));
        a3 = _mm_max_ps(a3, _mm_loadu_ps(x + i + 12));
    }
    a0 = _mm_max_ps(_mm_max_ps(a0, a1), _mm_max_ps(a2, a3));
    float l[4];
    _mm_storeu_ps(l, a0);
    float m = max_scalar(x + i, n - i);
    for (int j = 0; j < 4; j++)
        m = l[j] > m ? l[j] : m;
    return m;
}

/* The vector runs_max: the run's vectors reduced by a tree of max, then
 * the lanes by shuffles (a store and a scalar loop would be a chain of
 * dependent compares per run). */
static void runs_max_sse2(const float *x, size_t stride, size_t g, float *out)
{
    for (size_t j = 0; j < g; j++) {
        const float *p = x + j * stride;
        __m128 a[4];
        for (int q = 0; q < 4; q++)
            a[q] =
                _mm_max_ps(_mm_max_ps(_mm_loadu_ps(p + 16 * q), _mm_loadu_ps(p + 16 * q + 4)),
                           _mm_max_ps(_mm_loadu_ps(p + 16 * q + 8), _mm_loadu_ps(p + 16 * q + 12)));
        __m128 v = _mm_max_ps(_mm_max_ps(a[0], a[1]), _mm_max_ps(a[2], a[3]));
        v = _mm_max_ps(v, _mm_movehl_ps(v, v));
        v = _mm_max_ss(v, _mm_shuffle_ps(v, v, 1));
        out[j] = _mm_cvtss_f32(v);
    }
}

static size_t scan_sse2(const float *x, size_t i, size_t n, float t, uint32_t *idx, size_t *m,
                        size_t cap, int *bad)
{
    const __m128 tv = _mm_set1_ps(t), inf = _mm_set1_ps(INFINITY);
    __m128 s0 = _mm_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t c = *m;
    /* Blocks end at iend; room is checked only after a block with a
     * candidate, the only place it changes. */
    size_t iend = n - i >= 16 ? n - (n - i) % 16 : i;
    if (c + SIFT__SCAN_BLOCK > cap)
        iend = i;
    while (i < iend) {
        __m128 x0 = _mm_loadu_ps(x + i), x1 = _mm_loadu_ps(x + i + 4);
        __m128 x2 = _mm_loadu_ps(x + i + 8), x3 = _mm_loadu_ps(x + i + 12);
        s0 = _mm_add_ps(s0, x0);
        s1 = _mm_add_ps(s1, x1);
        s2 = _mm_add_ps(s2, x2);
        s3 = _mm_add_ps(s3, x3);
        __m128 mx = _mm_max_ps(_mm_max_ps(x0, x1), _mm_max_ps(x2, x3));
        if (SIFT__UNLIKELY(_mm_movemask_ps(_mm_cmpgt_ps(mx, tv)))) {
            uint32_t mask = (uint32_t)_mm_movemask_ps(_mm_cmpnle_ps(x0, tv)) |
                            (uint32_t)_mm_movemask_ps(_mm_cmpnle_ps(x1, tv)) << 4 |
                            (uint32_t)_mm_movemask_ps(_mm_cmpnle_ps(x2, tv)) << 8 |
                            (uint32_t)_mm_movemask_ps(_mm_cmpnle_ps(x3, tv)) << 12;
            c = push_bits(idx, c, mask, i);
            if (c + SIFT__SCAN_BLOCK > cap)
                iend = i + 16;
        }
        i += 16;
    }
    __m128 nb = _mm_or_ps(_mm_or_ps(_mm_cmpnlt_ps(s0, inf), _mm_cmpnlt_ps(s1, inf)),
                          _mm_or_ps(_mm_cmpnlt_ps(s2, inf), _mm_cmpnlt_ps(s3, inf)));
    *bad |= _mm_movemask_ps(nb) != 0;
    *m = c;
    if (n - i < 16 && c + SIFT__SCAN_BLOCK <= cap)
        return scan_tail(x, i, n, t, idx, m, bad);
    return i;
}

__attribute__((target("avx2"))) static float max_avx2(const float *x, size_t n)
{
    __m256 a0 = _mm256_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_max_ps(a0, _mm256_loadu_ps(x + i));
        a1 = _mm256_max_ps(a1, _mm256_loadu_ps(x + i + 8));
        a2 = _mm256_max_ps(a2, _mm256_loadu_ps(x + i + 16));
        a3 = _mm256_max_ps(a3, _mm256_loadu_ps(x + i + 24));
    }
    a0 = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
    float l[8];
    _mm256_storeu_ps(l, a0);
    sift__vzeroupper();
    float m = max_scalar(x + i, n - i);
    for (int j = 0; j < 8; j++)
        m = l[j] > m ? l[j] : m;
    return m;
}

__attribute__((target("avx2"))) static void runs_max_avx2(const float *x, size_t stride, size_t g,
                                                          float *out)
{
    for (size_t j = 0; j < g; j++) {
        const float *p = x + j * stride;
        __m256 a0 = _mm256_max_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8));
        __m256 a1 = _mm256_max_ps(_mm256_loadu_ps(p + 16), _mm256_loadu_ps(p + 24));
        __m256 a2 = _mm256_max_ps(_mm256_loadu_ps(p + 32), _mm256_loadu_ps(p + 40));
        __m256 a3 = _mm256_max_ps(_mm256_loadu_ps(p + 48), _mm256_loadu_ps(p + 56));
        __m256 w = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
        __m128 v = _mm_max_ps(_mm256_castps256_ps128(w), _mm256_extractf128_ps(w, 1));
        v = _mm_max_ps(v, _mm_movehl_ps(v, v));
        v = _mm_max_ss(v, _mm_shuffle_ps(v, v, 1));
        out[j] = _mm_cvtss_f32(v);
    }
}

__attribute__((target("avx2"))) static size_t scan_avx2(const float *x, size_t i, size_t n, float t,
                                                        uint32_t *idx, size_t *m, size_t cap,
                                                        int *bad)
{
    const __m256 tv = _mm256_set1_ps(t), inf = _mm256_set1_ps(INFINITY);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t c = *m;
    /* Blocks end at iend; room is checked only after a block with a
     * candidate, the only place it changes. */
    size_t iend = n - i >= 32 ? n - (n - i) % 32 : i;
    if (c + SIFT__SCAN_BLOCK > cap)
        iend = i;
    while (i < iend) {
        __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
        __m256 x2 = _mm256_loadu_ps(x + i + 16), x3 = _mm256_loadu_ps(x + i + 24);
        s0 = _mm256_add_ps(s0, x0);
        s1 = _mm256_add_ps(s1, x1);
        s2 = _mm256_add_ps(s2, x2);
        s3 = _mm256_add_ps(s3, x3);
        __m256 mx = _mm256_max_ps(_mm256_max_ps(x0, x1), _mm256_max_ps(x2, x3));
        if (SIFT__UNLIKELY(_mm256_movemask_ps(_mm256_cmp_ps(mx, tv, _CMP_GT_OQ)))) {
            uint32_t mask = (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(x0, tv, _CMP_NLE_UQ)) |
                            (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(x1, tv, _CMP_NLE_UQ)) << 8 |
                            (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(x2, tv, _CMP_NLE_UQ)) << 16 |
                            (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(x3, tv, _CMP_NLE_UQ)) << 24;
            c = push_bits(idx, c, mask, i);
            if (c + SIFT__SCAN_BLOCK > cap)
                iend = i + 32;
        }
        i += 32;
    }
    __m256 nb = _mm256_or_ps(
        _mm256_or_ps(_mm256_cmp_ps(s0, inf, _CMP_NLT_UQ), _mm256_cmp_ps(s1, inf, _CMP_NLT_UQ)),
        _mm256_or_ps(_mm256_cmp_ps(s2, inf, _CMP_NLT_UQ), _mm256_cmp_ps(s3, inf, _CMP_NLT_UQ)));
    *bad |= _mm256_movemask_ps(nb) != 0;
    *m = c;
    if (n - i < 32 && c + SIFT__SCAN_BLOCK <= cap)
        return scan_tail(x, i, n, t, idx, m, bad);
    return i;
}

__attribute__((target("avx512f"))) static float max_avx512(const float *x, size_t n)
{
    __m512 a0 = _mm512_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_max_ps(a0, _mm512_loadu_ps(x + i));
        a1 = _mm512_max_ps(a1, _mm512_loadu_ps(x + i + 16));
        a2 = _mm512_max_ps(a2, _mm512_loadu_ps(x + i + 32));
        a3 = _mm512_max_ps(a3, _mm512_loadu_ps(x + i + 48));
    }
    a0 = _mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3));
    float l[16];
    _mm512_storeu_ps(l, a0);
    sift__vzeroupper();
    float m = max_scalar(x + i, n - i);
    for (int j = 0; j < 16; j++)
        m = l[j] > m ? l[j] : m;
    return m;
}

__attribute__((target("avx512f"))) static void runs_max_avx512(const float *x, size_t stride,
                                                               size_t g, float *out)
{
    for (size_t j = 0; j < g; j++) {
        const float *p = x + j * stride;
        __m512 w = _mm512_max_ps(_mm512_max_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16)),
                                 _mm512_max_ps(_mm512_loadu_ps(p + 32), _mm512_loadu_ps(p + 48)));
        __m256 h = _mm256_max_ps(_mm512_castps512_ps256(w),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w), 1)));
        __m128 v = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        v = _mm_max_ps(v, _mm_movehl_ps(v, v));
        v = _mm_max_ss(v, _mm_shuffle_ps(v, v, 1));
        out[j] = _mm_cvtss_f32(v);
    }
}

/* The lanes of v selected by g, packed, stored at idx + c (16 slots are
 * written; the kernel keeps SIFT__SCAN_BLOCK free). A compress into a
 * register and a plain store: a compress straight to memory is slow on
 * some cores. */
__attribute__((target("avx512f"))) static inline size_t push16(uint32_t *idx, size_t c, __mmask16 g,
                                                               __m512i ids)
{
    _mm512_storeu_si512((void *)(idx + c), _mm512_maskz_compress_epi32(g, ids));
    return c + (size_t)__builtin_popcount((unsigned)g);
}

__attribute__((target("avx512f"))) static size_t scan_avx512(const float *x, size_t i, size_t n,
                                                             float t, uint32_t *idx, size_t *m,
                                                             size_t cap, int *bad)
{
    const __m512 tv = _mm512_set1_ps(t), inf = _mm512_set1_ps(INFINITY);
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i sixteen = _mm512_set1_epi32(16);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t c = *m;
    /* Blocks end at iend; room is checked only after a block with a
     * candidate, the only place it changes. */
    size_t iend = n - i >= 64 ? n - (n - i) % 64 : i;
    if (c + SIFT__SCAN_BLOCK > cap)
        iend = i;
    while (i < iend) {
        __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
        __m512 x2 = _mm512_loadu_ps(x + i + 32), x3 = _mm512_loadu_ps(x + i + 48);
        s0 = _mm512_add_ps(s0, x0);
        s1 = _mm512_add_ps(s1, x1);
        s2 = _mm512_add_ps(s2, x2);
        s3 = _mm512_add_ps(s3, x3);
        __m512 mx = _mm512_max_ps(_mm512_max_ps(x0, x1), _mm512_max_ps(x2, x3));
        if (SIFT__UNLIKELY(_mm512_cmp_ps_mask(mx, tv, _CMP_GT_OQ) != 0)) {
            __m512i ids = _mm512_add_epi32(lane, _mm512_set1_epi32((int)i));
            c = push16(idx, c, _mm512_cmp_ps_mask(x0, tv, _CMP_NLE_UQ), ids);
            ids = _mm512_add_epi32(ids, sixteen);
            c = push16(idx, c, _mm512_cmp_ps_mask(x1, tv, _CMP_NLE_UQ), ids);
            ids = _mm512_add_epi32(ids, sixteen);
            c = push16(idx, c, _mm512_cmp_ps_mask(x2, tv, _CMP_NLE_UQ), ids);
            ids = _mm512_add_epi32(ids, sixteen);
            c = push16(idx, c, _mm512_cmp_ps_mask(x3, tv, _CMP_NLE_UQ), ids);
            if (c + SIFT__SCAN_BLOCK > cap)
                iend = i + 64;
        }
        i += 64;
    }
    __mmask16 nb = (__mmask16)(_mm512_cmp_ps_mask(s0, inf, _CMP_NLT_UQ) |
                               _mm512_cmp_ps_mask(s1, inf, _CMP_NLT_UQ) |
                               _mm512_cmp_ps_mask(s2, inf, _CMP_NLT_UQ) |
                               _mm512_cmp_ps_mask(s3, inf, _CMP_NLT_UQ));
    *bad |= nb != 0;
    *m = c;
    if (n - i < 64 && c + SIFT__SCAN_BLOCK <= cap)
        return scan_tail(x, i, n, t, idx, m, bad);
    return i;
}

#endif /* SIFT__X86 */

/* ------------------------------------------------------------------ */
/* Tail mass: a bound on the mass of the tokens at or below a logit    */
/* ------------------------------------------------------------------ */

/*
 * tail_mass(x, n, m, lk) >= sum over x[i] <= lk of exp(x[i] - m), in real
 * arithmetic (m the row's largest value; the row holds no NaN or +inf).
 * Each token's term is a float upper bound of 2^((x - m) log2 e) built
 * from the bits of a float (a Schraudolph exponential), and the terms go
 * to 64 float lanes (token i to lane i mod 64) summed in a fixed order, so
 * every level gives the scalar twin's bits: a token above lk leaves its
 * lane as it was (SSE2 and AVX2 add +0, which leaves a sum >= 0
 * unchanged; AVX-512 keeps the lane by its mask; the scalar code skips
 * the add).
 *
 * The term. With u = 2^-24, t = x - m <= 0 (real), d = fl(t), C =
 * TAIL_C <= L = 2^23 log2 e (rounded down), q = fl(d C), q' = max(q,
 * TAIL_LO), i = trunc(q') (toward zero, so i >= q' >= q) and T the float
 * whose bits are i + (127 << 23): i = 2^23 (e + f) with e = floor(i /
 * 2^23) >= -126, f in [0, 1), so T = 2^e (1 + f) >= 2^(e + f) = 2^(i /
 * 2^23) (1 + f >= 2^f on [0, 1]), and 2^-126 <= T <= 1.
 * - If t log2 e < -127: exp(t) < 2^-127 < T.
 * - Else |t| < 88.1: nothing overflows, d = t (1 + e1) and q = d C (1 +
 *   e2) with |e1|, |e2| <= u (or exact), all of them <= 0, so q >= d C
 *   (1 + u) >= d L (1 + u) >= t L (1 + u)^2, and T >= 2^(i / 2^23) >=
 *   exp(t) 2^(t log2 e ((1 + u)^2 - 1)) >= exp(t) 2^(-127 (2u + u^2)) >=
 *   exp(t) 2^(-2^-16).
 * So every term has exp(t) <= T 2^(2^-16) <= T (1 + 2^-16).
 * The sums. A lane adds at most nl = ceil(n / 64) positive terms in float
 * (round to nearest): its true sum is at most its float sum / (1 - g), g
 * = nl u / (1 - nl u) <= 2 nl u when nl u <= 1/4, i.e. 1 - g >= 1 - 2 nl
 * u. The 64 lanes are summed in double: within 64 * 2^-53 < 2^-46. The
 * final product and division in double (three roundings of 2^-53) and
 * the 2^-46 are covered by the factor 1 + 2^-40:
 *   S = sum * (1 + 2^-16) / (1 - 2 nl u) * (1 + 2^-40).
 * Every term is at most 1.0615 times its exp(t) (the largest (1 + f) /
 * 2^f), so S is within about 6 % of the exact sum. n >= 2^28 (nl u >
 * 1/4) gives +inf: no bound.
 */
#define TAIL_LANES 64
#define TAIL_C 12102203.0f             /* 2^23 log2 e = 12102203.16..., rounded down */
#define TAIL_LO (-126.0f * 8388608.0f) /* -126 * 2^23, exact */
#define TAIL_BIAS (127u << 23)
#define TAIL_MAX_N ((size_t)1 << 28)

static inline float tail_term(float x, float m)
{
    float q = (x - m) * TAIL_C;
    q = q > TAIL_LO ? q : TAIL_LO;
    uint32_t u = (uint32_t)(int32_t)q + TAIL_BIAS;
    float t;
    memcpy(&t, &u, sizeof t);
    return t;
}

/* Adds tokens [i, n) to their lanes: the whole scalar kernel, and the
 * head and tail of every vector one. */
static void tail_rest(const float *x, size_t i, size_t n, float m, float lk, float *lanes)
{
    for (; i < n; i++)
        if (x[i] <= lk)
            lanes[i % TAIL_LANES] += tail_term(x[i], m);
}

double sift__tail_finish(const float *lanes, size_t n)
{
    double nl = (double)((n + TAIL_LANES - 1) / TAIL_LANES);
    if (n >= TAIL_MAX_N)
        return INFINITY;
    double sum = 0.0;
    for (int j = 0; j < TAIL_LANES; j++)
        sum += (double)lanes[j];
    return sum * (1.0 + 0x1p-16) / (1.0 - 2.0 * nl * 0x1p-24) * (1.0 + 0x1p-40);
}

/* The vector forms add the tokens before the first multiple of 64 at or
 * after i one by one, so that a block always starts at a multiple of 64
 * and token j always goes to lane j mod 64, whatever the calls: the bits
 * of every level, and of any split of [0, n) into calls, are the scalar
 * twin's over the whole range. */
static size_t tail_head(const float *x, size_t i, size_t n, float m, float lk, float *lanes)
{
    size_t e = (i + TAIL_LANES - 1) / TAIL_LANES * TAIL_LANES;
    e = e < n ? e : n;
    tail_rest(x, i, e, m, lk, lanes);
    return e;
}

/* The whole kernel from one of its parts: zeroed lanes, every token. */
typedef void tail_add_fn(const float *x, size_t i, size_t n, float m, float lk, float *lanes);

static double tail_mass_by(tail_add_fn *add, const float *x, size_t n, float m, float lk)
{
    float lanes[TAIL_LANES] = {0};
    add(x, 0, n, m, lk, lanes);
    return sift__tail_finish(lanes, n);
}

static void tail_add_scalar(const float *x, size_t i, size_t n, float m, float lk, float *lanes)
{
    tail_rest(x, i, n, m, lk, lanes);
}

static double tail_mass_scalar(const float *x, size_t n, float m, float lk)
{
    return tail_mass_by(tail_add_scalar, x, n, m, lk);
}

/* The scan and the tail kernel in one read (sift__simd_ops.scan_tail_gt):
 * x[j] <= t adds its term at reference t to lanes[j mod 64], any other
 * x[j] (above t, NaN) is a candidate. The scalar twin, in blocks of
 * SIFT__SCAN_BLOCK as the vector kernels stop, and their head and
 * tail. */
static size_t scan_tail_rest(const float *x, size_t i, size_t n, float t, uint32_t *idx, size_t *m,
                             float *lanes)
{
    size_t c = *m;
    for (; i < n; i++) {
        if (x[i] <= t)
            lanes[i % TAIL_LANES] += tail_term(x[i], t);
        else
            idx[c++] = (uint32_t)i;
    }
    *m = c;
    return n;
}

static size_t scan_tail_gt_scalar(const float *x, size_t i, size_t n, float t, uint32_t *idx,
                                  size_t *m, size_t cap, float *lanes)
{
    while (i < n && *m + SIFT__SCAN_BLOCK <= cap) {
        size_t e = n - i > SIFT__SCAN_BLOCK ? i + SIFT__SCAN_BLOCK : n;
        i = scan_tail_rest(x, i, e, t, idx, m, lanes);
    }
    return i;
}

#ifdef SIFT__X86

/* The vector forms: one block of 64 tokens per iteration, lane j of the
 * block into accumulator lane j, then the rest by the scalar code. */
#define TAIL_SSE2(acc, p)                                                      \
    do {                                                                       \
        __m128 v_ = _mm_loadu_ps(p);                                           \
        __m128 q_ = _mm_max_ps(_mm_mul_ps(_mm_sub_ps(v_, vm), vc), vlo);       \
        __m128 t_ = _mm_castsi128_ps(_mm_add_epi32(_mm_cvttps_epi32(q_), vb)); \
        (acc) = _mm_add_ps((acc), _mm_and_ps(t_, _mm_cmple_ps(v_, vk)));       \
    } while (0)

static void tail_add_sse2(const float *x, size_t i, size_t n, float m, float lk, float *lanes)
{
    const __m128 vm = _mm_set1_ps(m), vc = _mm_set1_ps(TAIL_C), vlo = _mm_set1_ps(TAIL_LO),
                 vk = _mm_set1_ps(lk);
    const __m128i vb = _mm_set1_epi32((int)TAIL_BIAS);
    __m128 a[16];
    i = tail_head(x, i, n, m, lk, lanes);
    for (int j = 0; j < 16; j++)
        a[j] = _mm_loadu_ps(lanes + 4 * j);
    for (; i + TAIL_LANES <= n; i += TAIL_LANES)
        for (int j = 0; j < 16; j++)
            TAIL_SSE2(a[j], x + i + 4 * j);
    for (int j = 0; j < 16; j++)
        _mm_storeu_ps(lanes + 4 * j, a[j]);
    tail_rest(x, i, n, m, lk, lanes);
}

static double tail_mass_sse2(const float *x, size_t n, float m, float lk)
{
    return tail_mass_by(tail_add_sse2, x, n, m, lk);
}

#define TAIL_AVX2(acc, p)                                                                   \
    do {                                                                                    \
        __m256 v_ = _mm256_loadu_ps(p);                                                     \
        __m256 q_ = _mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(v_, vm), vc), vlo);           \
        __m256 t_ = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_cvttps_epi32(q_), vb));     \
        (acc) = _mm256_add_ps((acc), _mm256_and_ps(t_, _mm256_cmp_ps(v_, vk, _CMP_LE_OQ))); \
    } while (0)

__attribute__((target("avx2"))) static void tail_add_avx2(const float *x, size_t i, size_t n,
                                                          float m, float lk, float *lanes)
{
    const __m256 vm = _mm256_set1_ps(m), vc = _mm256_set1_ps(TAIL_C), vlo = _mm256_set1_ps(TAIL_LO),
                 vk = _mm256_set1_ps(lk);
    const __m256i vb = _mm256_set1_epi32((int)TAIL_BIAS);
    i = tail_head(x, i, n, m, lk, lanes);
    __m256 a0 = _mm256_loadu_ps(lanes), a1 = _mm256_loadu_ps(lanes + 8);
    __m256 a2 = _mm256_loadu_ps(lanes + 16), a3 = _mm256_loadu_ps(lanes + 24);
    __m256 a4 = _mm256_loadu_ps(lanes + 32), a5 = _mm256_loadu_ps(lanes + 40);
    __m256 a6 = _mm256_loadu_ps(lanes + 48), a7 = _mm256_loadu_ps(lanes + 56);
    for (; i + TAIL_LANES <= n; i += TAIL_LANES) {
        TAIL_AVX2(a0, x + i);
        TAIL_AVX2(a1, x + i + 8);
        TAIL_AVX2(a2, x + i + 16);
        TAIL_AVX2(a3, x + i + 24);
        TAIL_AVX2(a4, x + i + 32);
        TAIL_AVX2(a5, x + i + 40);
        TAIL_AVX2(a6, x + i + 48);
        TAIL_AVX2(a7, x + i + 56);
    }
    _mm256_storeu_ps(lanes, a0);
    _mm256_storeu_ps(lanes + 8, a1);
    _mm256_storeu_ps(lanes + 16, a2);
    _mm256_storeu_ps(lanes + 24, a3);
    _mm256_storeu_ps(lanes + 32, a4);
    _mm256_storeu_ps(lanes + 40, a5);
    _mm256_storeu_ps(lanes + 48, a6);
    _mm256_storeu_ps(lanes + 56, a7);
    tail_rest(x, i, n, m, lk, lanes);
}

static double tail_mass_avx2(const float *x, size_t n, float m, float lk)
{
    return tail_mass_by(tail_add_avx2, x, n, m, lk);
}

/* The fused vector kernels: blocks of 64 tokens that start at a multiple
 * of 64 (a head before the first is done by the scalar twin), so that
 * token j goes to lane j mod 64 as in tail_add. One compare per vector,
 * x <= t, both masks the tail term and finds the candidates: a block
 * with a lane not <= t (above t, NaN, +inf) is looked at lane by lane.
 * No running sums: every NaN and +inf is a candidate. Room is checked
 * before each block that could add candidates, as in the plain scans. */
/* The head of a fused vector kernel: the tokens of [*i, n) before the
 * next multiple of 64, by the scalar twin. 0 when there is no room for
 * them (the kernel stops at *i). */
static int fused_head(const float *x, size_t *i, size_t n, float t, uint32_t *idx, size_t *m,
                      size_t cap, float *lanes)
{
    size_t h = (*i + TAIL_LANES - 1) / TAIL_LANES * TAIL_LANES;
    h = h < n ? h : n;
    if (h == *i)
        return 1;
    if (*m + SIFT__SCAN_BLOCK > cap)
        return 0;
    *i = scan_tail_rest(x, *i, h, t, idx, m, lanes);
    return 1;
}

static size_t scan_tail_gt_sse2(const float *x, size_t i, size_t n, float t, uint32_t *idx,
                                size_t *m, size_t cap, float *lanes)
{
    if (!fused_head(x, &i, n, t, idx, m, cap, lanes))
        return i;
    const __m128 vm = _mm_set1_ps(t), vc = _mm_set1_ps(TAIL_C), vlo = _mm_set1_ps(TAIL_LO);
    const __m128i vb = _mm_set1_epi32((int)TAIL_BIAS);
    __m128 a[16];
    for (int j = 0; j < 16; j++)
        a[j] = _mm_loadu_ps(lanes + 4 * j);
    size_t c = *m;
    size_t iend = n - i >= TAIL_LANES ? n - (n - i) % TAIL_LANES : i;
    if (c + SIFT__SCAN_BLOCK > cap)
        iend = i;
    while (i < iend) {
        uint64_t out = 0; /* bit j: token i + j is not <= t */
        for (int j = 0; j < 16; j++) {
            __m128 v = _mm_loadu_ps(x + i + 4 * j);
            __m128 le = _mm_cmple_ps(v, vm);
            __m128 q = _mm_max_ps(_mm_mul_ps(_mm_sub_ps(v, vm), vc), vlo);
            __m128 tv = _mm_castsi128_ps(_mm_add_epi32(_mm_cvttps_epi32(q), vb));
            a[j] = _mm_add_ps(a[j], _mm_and_ps(tv, le));
            out |= (uint64_t)(~(uint32_t)_mm_movemask_ps(le) & 0xfu) << (4 * j);
        }
        if (SIFT__UNLIKELY(out != 0)) {
            c = push_bits(idx, c, (uint32_t)out, i);
            c = push_bits(idx, c, (uint32_t)(out >> 32), i + 32);
            if (c + SIFT__SCAN_BLOCK > cap)
                iend = i + TAIL_LANES;
        }
        i += TAIL_LANES;
    }
    for (int j = 0; j < 16; j++)
        _mm_storeu_ps(lanes + 4 * j, a[j]);
    *m = c;
    if (n - i < TAIL_LANES && c + SIFT__SCAN_BLOCK <= cap)
        return scan_tail_rest(x, i, n, t, idx, m, lanes);
    return i;
}

/* One vector of the fused AVX2 kernel: its terms into acc, its x <= t
 * into all (an AND over the block). */
#define FUSED_AVX2(acc, p)                                                              \
    do {                                                                                \
        __m256 v_ = _mm256_loadu_ps(p);                                                 \
        __m256 le_ = _mm256_cmp_ps(v_, vm, _CMP_LE_OQ);                                 \
        __m256 q_ = _mm256_max_ps(_mm256_mul_ps(_mm256_sub_ps(v_, vm), vc), vlo);       \
        __m256 t_ = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_cvttps_epi32(q_), vb)); \
        (acc) = _mm256_add_ps((acc), _mm256_and_ps(t_, le_));                           \
        all = _mm256_and_ps(all, le_);                                                  \
    } while (0)

/* The lanes of the 64 tokens at x that are not <= t, as bits (the rare
 * block that has one: compared again from memory). */
__attribute__((target("avx2"))) static uint64_t fused_out_avx2(const float *x, __m256 vm)
{
    uint64_t out = 0;
    for (int j = 0; j < 8; j++) {
        __m256 le = _mm256_cmp_ps(_mm256_loadu_ps(x + 8 * j), vm, _CMP_LE_OQ);
        out |= (uint64_t)(~(uint32_t)_mm256_movemask_ps(le) & 0xffu) << (8 * j);
    }
    return out;
}

__attribute__((target("avx2"))) static size_t scan_tail_gt_avx2(const float *x, size_t i, size_t n,
                                                                float t, uint32_t *idx, size_t *m,
                                                                size_t cap, float *lanes)
{
    if (!fused_head(x, &i, n, t, idx, m, cap, lanes))
        return i;
    const __m256 vm = _mm256_set1_ps(t), vc = _mm256_set1_ps(TAIL_C), vlo = _mm256_set1_ps(TAIL_LO);
    const __m256i vb = _mm256_set1_epi32((int)TAIL_BIAS);
    __m256 a0 = _mm256_loadu_ps(lanes), a1 = _mm256_loadu_ps(lanes + 8);
    __m256 a2 = _mm256_loadu_ps(lanes + 16), a3 = _mm256_loadu_ps(lanes + 24);
    __m256 a4 = _mm256_loadu_ps(lanes + 32), a5 = _mm256_loadu_ps(lanes + 40);
    __m256 a6 = _mm256_loadu_ps(lanes + 48), a7 = _mm256_loadu_ps(lanes + 56);
    size_t c = *m;
    size_t iend = n - i >= TAIL_LANES ? n - (n - i) % TAIL_LANES : i;
    if (c + SIFT__SCAN_BLOCK > cap)
        iend = i;
    while (i < iend) {
        __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        FUSED_AVX2(a0, x + i);
        FUSED_AVX2(a1, x + i + 8);
        FUSED_AVX2(a2, x + i + 16);
        FUSED_AVX2(a3, x + i + 24);
        FUSED_AVX2(a4, x + i + 32);
        FUSED_AVX2(a5, x + i + 40);
        FUSED_AVX2(a6, x + i + 48);
        FUSED_AVX2(a7, x + i + 56);
        if (SIFT__UNLIKELY(_mm256_movemask_ps(all) != 0xff)) {
            uint64_t out = fused_out_avx2(x + i, vm);
            c = push_bits(idx, c, (uint32_t)out, i);
            c = push_bits(idx, c, (uint32_t)(out >> 32), i + 32);
            if (c + SIFT__SCAN_BLOCK > cap)
                iend = i + TAIL_LANES;
        }
        i += TAIL_LANES;
    }
    _mm256_storeu_ps(lanes, a0);
    _mm256_storeu_ps(lanes + 8, a1);
    _mm256_storeu_ps(lanes + 16, a2);
    _mm256_storeu_ps(lanes + 24, a3);
    _mm256_storeu_ps(lanes + 32, a4);
    _mm256_storeu_ps(lanes + 40, a5);
    _mm256_storeu_ps(lanes + 48, a6);
    _mm256_storeu_ps(lanes + 56, a7);
    *m = c;
    sift__vzeroupper();
    if (n - i < TAIL_LANES && c + SIFT__SCAN_BLOCK <= cap)
        return scan_tail_rest(x, i, n, t, idx, m, lanes);
    return i;
}

#define TAIL_AVX512(acc, p)                                                                   \
    do {                                                                                      \
        __m512 v_ = _mm512_loadu_ps(p);                                                       \
        __m512 q_ = _mm512_max_ps(_mm512_mul_ps(_mm512_sub_ps(v_, vm), vc), vlo);             \
        __m512 t_ = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_cvttps_epi32(q_), vb));       \
        (acc) = _mm512_mask_add_ps((acc), _mm512_cmp_ps_mask(v_, vk, _CMP_LE_OQ), (acc), t_); \
    } while (0)

__attribute__((target("avx512f"))) static void tail_add_avx512(const float *x, size_t i, size_t n,
                                                               float m, float lk, float *lanes)
{
    const __m512 vm = _mm512_set1_ps(m), vc = _mm512_set1_ps(TAIL_C), vlo = _mm512_set1_ps(TAIL_LO),
                 vk = _mm512_set1_ps(lk);
    const __m512i vb = _mm512_set1_epi32((int)TAIL_BIAS);
    i = tail_head(x, i, n, m, lk, lanes);
    __m512 a0 = _mm512_loadu_ps(lanes), a1 = _mm512_loadu_ps(lanes + 16);
    __m512 a2 = _mm512_loadu_ps(lanes + 32), a3 = _mm512_loadu_ps(lanes + 48);
    for (; i + TAIL_LANES <= n; i += TAIL_LANES) {
        TAIL_AVX512(a0, x + i);
        TAIL_AVX512(a1, x + i + 16);
        TAIL_AVX512(a2, x + i + 32);
        TAIL_AVX512(a3, x + i + 48);
    }
    _mm512_storeu_ps(lanes, a0);
    _mm512_storeu_ps(lanes + 16, a1);
    _mm512_storeu_ps(lanes + 32, a2);
    _mm512_storeu_ps(lanes + 48, a3);
    tail_rest(x, i, n, m, lk, lanes);
}

static double tail_mass_avx512(const float *x, size_t n, float m, float lk)
{
    return tail_mass_by(tail_add_avx512, x, n, m, lk);
}

#define FUSED_AVX512(acc, p, le)                                                        \
    do {                                                                                \
        __m512 v_ = _mm512_loadu_ps(p);                                                 \
        (le) = _mm512_cmp_ps_mask(v_, vm, _CMP_LE_OQ);                                  \
        __m512 q_ = _mm512_max_ps(_mm512_mul_ps(_mm512_sub_ps(v_, vm), vc), vlo);       \
        __m512 t_ = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_cvttps_epi32(q_), vb)); \
        (acc) = _mm512_mask_add_ps((acc), (le), (acc), t_);                             \
    } while (0)

__attribute__((target("avx512f"))) static size_t scan_tail_gt_avx512(const float *x, size_t i,
                                                                     size_t n, float t,
                                                                     uint32_t *idx, size_t *m,
                                                                     size_t cap, float *lanes)
{
    if (!fused_head(x, &i, n, t, idx, m, cap, lanes))
        return i;
    const __m512 vm = _mm512_set1_ps(t), vc = _mm512_set1_ps(TAIL_C), vlo = _mm512_set1_ps(TAIL_LO);
    const __m512i vb = _mm512_set1_epi32((int)TAIL_BIAS);
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i sixteen = _mm512_set1_epi32(16);
    __m512 a0 = _mm512_loadu_ps(lanes), a1 = _mm512_loadu_ps(lanes + 16);
    __m512 a2 = _mm512_loadu_ps(lanes + 32), a3 = _mm512_loadu_ps(lanes + 48);
    size_t c = *m;
    size_t iend = n - i >= TAIL_LANES ? n - (n - i) % TAIL_LANES : i;
    if (c + SIFT__SCAN_BLOCK > cap)
        iend = i;
    while (i < iend) {
        __mmask16 k0, k1, k2, k3;
        FUSED_AVX512(a0, x + i, k0);
        FUSED_AVX512(a1, x + i + 16, k1);
        FUSED_AVX512(a2, x + i + 32, k2);
        FUSED_AVX512(a3, x + i + 48, k3);
        if (SIFT__UNLIKELY((__mmask16)(k0 & k1 & k2 & k3) != (__mmask16)0xffff)) {
            __m512i ids = _mm512_add_epi32(lane, _mm512_set1_epi32((int)i));
            c = push16(idx, c, (__mmask16)~k0, ids);
            ids = _mm512_add_epi32(ids, sixteen);
            c = push16(idx, c, (__mmask16)~k1, ids);
            ids = _mm512_add_epi32(ids, sixteen);
            c = push16(idx, c, (__mmask16)~k2, ids);
            ids = _mm512_add_epi32(ids, sixteen);
            c = push16(idx, c, (__mmask16)~k3, ids);
            if (c + SIFT__SCAN_BLOCK > cap)
                iend = i + TAIL_LANES;
        }
        i += TAIL_LANES;
    }
    _mm512_storeu_ps(lanes, a0);
    _mm512_storeu_ps(lanes + 16, a1);
    _mm512_storeu_ps(lanes + 32, a2);
    _mm512_storeu_ps(lanes + 48, a3);
    *m = c;
    sift__vzeroupper();
    if (n - i < TAIL_LANES && c + SIFT__SCAN_BLOCK <= cap)
        return scan_tail_rest(x, i, n, t, idx, m, lanes);
    return i;
}

#endif /* SIFT__X86 */

/* ------------------------------------------------------------------ */
/* Tables and the choice                                               */
/* ------------------------------------------------------------------ */

static const sift__simd_ops OPS[SIFT__SIMD_LEVELS] = {
    [SIFT__SIMD_SCALAR] = {.level = SIFT__SIMD_SCALAR,
                           .name = "scalar",
                           .max_f32 = max_scalar,
                           .runs_max = runs_max_scalar,
                           .scan_gt = scan_scalar,
                           .tail_mass = tail_mass_scalar,
                           .tail_add = tail_add_scalar,
                           .scan_tail_gt = scan_tail_gt_scalar},
#ifdef SIFT__X86
    [SIFT__SIMD_SSE2] = {.level = SIFT__SIMD_SSE2,
                         .name = "sse2",
                         .max_f32 = max_sse2,
                         .runs_max = runs_max_sse2,
                         .scan_gt = scan_sse2,
                         .tail_mass = tail_mass_sse2,
                         .tail_add = tail_add_sse2,
                         .scan_tail_gt = scan_tail_gt_sse2},
    [SIFT__SIMD_AVX2] = {.level = SIFT__SIMD_AVX2,
                         .name = "avx2",
                         .max_f32 = max_avx2,
                         .runs_max = runs_max_avx2,
                         .scan_gt = scan_avx2,
                         .tail_mass = tail_mass_avx2,
                         .tail_add = tail_add_avx2,
                         .scan_tail_gt = scan_tail_gt_avx2},
    [SIFT__SIMD_AVX512] = {.level = SIFT__SIMD_AVX512,
                           .name = "avx512",
                           .max_f32 = max_avx512,
                           .runs_max = runs_max_avx512,
                           .scan_gt = scan_avx512,
                           .tail_mass = tail_mass_avx512,
                           .tail_add = tail_add_avx512,
                           .scan_tail_gt = scan_tail_gt_avx512},
#endif
};

int sift__simd_detect(void)
{
#ifdef SIFT__X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return SIFT__SIMD_AVX512;
    if (__builtin_cpu_supports("avx2"))
        return SIFT__SIMD_AVX2;
    return SIFT__SIMD_SSE2;
#else
    return SIFT__SIMD_SCALAR;
#endif
}

int sift__simd_parse(const char *s)
{
    for (int l = 0; l < SIFT__SIMD_LEVELS; l++) {
        static const char *const names[SIFT__SIMD_LEVELS] = {"scalar", "sse2", "avx2", "avx512"};
        if (s && !strcmp(s, names[l]))
            return l;
    }
    return -1;
}

const sift__simd_ops *sift__simd_ops_at(int level)
{
    int best = sift__simd_detect();
    if (level > best)
        level = best;
    if (level < 0)
        level = SIFT__SIMD_SCALAR;
    return &OPS[level];
}

/* -1 until the first call of sift__simd chose a level. */
static atomic_int chosen = -1;

const sift__simd_ops *sift__simd(void)
{
    int l = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (SIFT__UNLIKELY(l < 0)) {
        l = sift__simd_detect();
        int cap = sift__simd_parse(getenv("SIFT_SIMD"));
        if (cap >= 0 && cap < l)
            l = cap;
        atomic_store_explicit(&chosen, l, memory_order_relaxed);
    }
    return &OPS[l];
}

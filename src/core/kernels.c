/*
 * kernels.c - row kernels of the whole-row step (core/kernels.h): the
 * load of a row into the working array.
 *
 * Owns sift__load_cand(_at) and sift__lane_sums(_at). The load writes
 * cd[i] = {i, row[i]} for every i and reports whether the row holds a
 * NaN or +inf (*bad) and whether it holds a value above -inf (*any): the
 * checks of the row step's validation, in the same pass as the copy.
 *
 * Every level (core/simd.h: scalar, SSE2, AVX2; AVX-512F uses the AVX2
 * kernel, the pass being bound by its stores) writes the same bytes and
 * the same two flags: a copy moves the logit's bits unchanged, the ids
 * are integers, and the flags are ORs of per-value tests that do not
 * depend on the order or grouping of the values. tests/check_core
 * compares every level the machine has with the scalar one;
 * SIFT_SIMD=scalar makes the library use the scalar one
 * (tests/check_simd_env.sh runs the suites that way).
 *
 * The lane sums (top_n_sigma's mean and variance, docs/samplers.md) add
 * the finite logits of a candidate array, or their squared deviations
 * from a mean, into the eight lanes of sift__dsum_idorder (the j-th
 * finite value to lane j mod 8) in one pass, without an array of
 * doubles. The AVX2 form adds blocks of eight finite logits that start at
 * lane 0 with two four-lane double adds, the same additions in the same
 * lanes in the same order; any other token goes through the scalar
 * step. So every level gives the same lanes bit for bit, and the same
 * count; the largest logit is the same value (the sign of a zero maximum
 * may differ: the caller only subtracts from it).
 *
 * The vector loads interleave eight (four) ids with eight (four) logits
 * by two unpacks and, for AVX2, a cross-lane permute: about one
 * instruction per token where the element-by-element form took ten.
 */
#include <math.h>

#include "kernels.h"
#include "simd.h"

#if defined(__x86_64__) && !defined(SIFT_NO_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define SIFT__KX86 1
#include <immintrin.h>
#endif

/* The definition, and the tail of every vector form. */
static void load_scalar(const float *row, sift_candidate *cd, size_t i, size_t n, int *bad,
                        int *any)
{
    int b = 0, a = 0;
    for (; i < n; i++) {
        float x = row[i];
        cd[i].id = (int32_t)i;
        cd[i].logit = x;
        b |= !(x < INFINITY); /* NaN or +inf */
        a |= x > -INFINITY;
    }
    *bad |= b;
    *any |= a;
}

#ifdef SIFT__KX86

static void load_sse2(const float *row, sift_candidate *cd, size_t n, int *bad, int *any)
{
    const __m128 inf = _mm_set1_ps(INFINITY), ninf = _mm_set1_ps(-INFINITY);
    const __m128i four = _mm_set1_epi32(4);
    __m128i ids = _mm_set_epi32(3, 2, 1, 0);
    __m128 b = _mm_setzero_ps(), a = _mm_setzero_ps();
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m128 x = _mm_loadu_ps(row + i);
        __m128 id = _mm_castsi128_ps(ids);
        b = _mm_or_ps(b, _mm_cmpnlt_ps(x, inf)); /* !(x < inf) */
        a = _mm_or_ps(a, _mm_cmpgt_ps(x, ninf));
        _mm_storeu_ps((float *)(cd + i), _mm_unpacklo_ps(id, x));
        _mm_storeu_ps((float *)(cd + i + 2), _mm_unpackhi_ps(id, x));
        ids = _mm_add_epi32(ids, four);
    }
    *bad |= _mm_movemask_ps(b) != 0;
    *any |= _mm_movemask_ps(a) != 0;
    load_scalar(row, cd, i, n, bad, any);
}

__attribute__((target("avx2"))) static void load_avx2(const float *row, sift_candidate *cd,
                                                      size_t n, int *bad, int *any)
{
    const __m256 inf = _mm256_set1_ps(INFINITY), ninf = _mm256_set1_ps(-INFINITY);
    const __m256i eight = _mm256_set1_epi32(8);
    __m256i ids = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    __m256 b = _mm256_setzero_ps(), a = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(row + i);
        __m256 id = _mm256_castsi256_ps(ids);
        b = _mm256_or_ps(b, _mm256_cmp_ps(x, inf, _CMP_NLT_UQ));
        a = _mm256_or_ps(a, _mm256_cmp_ps(x, ninf, _CMP_GT_OQ));
        /* lo = (0 1 | 4 5), hi = (2 3 | 6 7) as (id, logit) pairs */
        __m256 lo = _mm256_unpacklo_ps(id, x), hi = _mm256_unpackhi_ps(id, x);
        _mm256_storeu_ps((float *)(cd + i), _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps((float *)(cd + i + 4), _mm256_permute2f128_ps(lo, hi, 0x31));
        ids = _mm256_add_epi32(ids, eight);
    }
    *bad |= _mm256_movemask_ps(b) != 0;
    *any |= _mm256_movemask_ps(a) != 0;
    load_scalar(row, cd, i, n, bad, any);
}

#endif /* SIFT__KX86 */

/* One token of the lane sums: the definition. */
static inline void lane_step(float l, const double *mean, double s[8], size_t *c, float *mx)
{
    *mx = l > *mx ? l : *mx;
    if (l > -INFINITY) {
        double d = (double)l;
        if (mean) {
            d -= *mean;
            d *= d;
        }
        s[*c & 7] += d;
        (*c)++;
    }
}

static void lanes_scalar(const sift_candidate *cd, size_t n, const double *mean, double s[8],
                         size_t *count, float *max)
{
    size_t c = 0;
    float mx = -INFINITY;
    for (size_t i = 0; i < n; i++)
        lane_step(cd[i].logit, mean, s, &c, &mx);
    *count = c;
    *max = mx;
}

#ifdef SIFT__KX86
__attribute__((target("avx2"))) static void lanes_avx2(const sift_candidate *cd, size_t n,
                                                       const double *mean, double s[8],
                                                       size_t *count, float *max)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256d mu = _mm256_set1_pd(mean ? *mean : 0.0);
    __m256 vmx = ninf;
    size_t c = 0, i = 0;
    float mx = -INFINITY;
    while (i < n) {
        __m256d lo = _mm256_loadu_pd(s), hi = _mm256_loadu_pd(s + 4);
        for (; i + 8 <= n && (c & 7) == 0; i += 8, c += 8) {
            /* (id, logit) x 4 twice: the odd floats are the logits */
            __m256 a = _mm256_loadu_ps((const float *)(cd + i));
            __m256 b = _mm256_loadu_ps((const float *)(cd + i + 4));
            __m256 l = _mm256_shuffle_ps(a, b, 0xDD); /* 0 1 4 5 | 2 3 6 7 */
            l = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(l), 0xD8));
            if (_mm256_movemask_ps(_mm256_cmp_ps(l, ninf, _CMP_GT_OQ)) != 0xff)
                break;
            vmx = _mm256_max_ps(vmx, l);
            __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(l));
            __m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(l, 1));
            if (mean) {
                d0 = _mm256_sub_pd(d0, mu);
                d1 = _mm256_sub_pd(d1, mu);
                d0 = _mm256_mul_pd(d0, d0);
                d1 = _mm256_mul_pd(d1, d1);
            }
            lo = _mm256_add_pd(lo, d0);
            hi = _mm256_add_pd(hi, d1);
        }
        _mm256_storeu_pd(s, lo);
        _mm256_storeu_pd(s + 4, hi);
        if (i < n)
            lane_step(cd[i++].logit, mean, s, &c, &mx);
    }
    float v[8];
    _mm256_storeu_ps(v, vmx);
    for (int j = 0; j < 8; j++)
        mx = v[j] > mx ? v[j] : mx;
    *count = c;
    *max = mx;
}
#endif

void sift__lane_sums_at(int level, const sift_candidate *cd, size_t n, const double *mean,
                        double s[8], size_t *count, float *max)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX2) {
        lanes_avx2(cd, n, mean, s, count, max);
        return;
    }
#endif
    (void)level;
    lanes_scalar(cd, n, mean, s, count, max);
}

void sift__lane_sums(const sift_candidate *cd, size_t n, const double *mean, double s[8],
                     size_t *count, float *max)
{
    sift__lane_sums_at(sift__simd()->level, cd, n, mean, s, count, max);
}

void sift__load_cand_at(int level, const float *row, sift_candidate *cd, size_t n, int *bad,
                        int *any)
{
    *bad = 0;
    *any = 0;
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX2) {
        load_avx2(row, cd, n, bad, any);
        return;
    }
    if (level >= SIFT__SIMD_SSE2) {
        load_sse2(row, cd, n, bad, any);
        return;
    }
#endif
    (void)level;
    load_scalar(row, cd, 0, n, bad, any);
}

void sift__load_cand(const float *row, sift_candidate *cd, size_t n, int *bad, int *any)
{
    sift__load_cand_at(sift__simd()->level, row, cd, n, bad, any);
}

/*
 * threshold.c - the logit-threshold kernels over a candidate array:
 * top_n_sigma's cut (keep (double)logit >= thr, in place) and min_p's
 * count (logit >= thr).
 *
 * Owns sift__keep_logit_ge(_at) and sift__count_logit_ge(_at) (declared
 * in core/kernels.h). Invariant: every level gives the scalar form's
 * result, bit for bit; tests/check_core compares them at each level.
 */
#include "../sift_internal.h"
#include "kernels.h"
#include "simd.h"

#if defined(__x86_64__) && !defined(SIFT_NO_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define SIFT__KX86 1
#include <immintrin.h>

#include "compress_avx2.h"
#endif

static size_t keep_ge_d_scalar(sift_candidate *c, size_t i, size_t n, size_t j, double thr)
{
    for (; i < n; i++) {
        sift_candidate x = c[i];
        c[j] = x;
        j += (size_t)((double)x.logit >= thr);
    }
    return j;
}

#ifdef SIFT__KX86
/* Eight candidates a vector: the logits widened to double (exact) and
 * compared ordered (a NaN is never kept, as in C), the kept candidates
 * compressed and stored whole at j <= i. */
__attribute__((target("avx512f"))) static size_t keep_ge_d_avx512(sift_candidate *c, size_t n,
                                                                  double thr)
{
    const __m512i odd = _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512d t = _mm512_set1_pd(thr);
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i v = _mm512_loadu_si512((const void *)(c + i));
        __m256 l = _mm512_castps512_ps256(_mm512_permutexvar_ps(odd, _mm512_castsi512_ps(v)));
        __mmask8 k = _mm512_cmp_pd_mask(_mm512_cvtps_pd(l), t, _CMP_GE_OQ);
        _mm512_storeu_si512((void *)(c + j), _mm512_maskz_compress_epi64(k, v));
        j += (size_t)__builtin_popcount((unsigned)k);
    }
    return keep_ge_d_scalar(c, i, n, j, thr);
}
#endif

#ifdef SIFT__KX86
/* AVX2: four candidates a vector, the logits widened and compared as in
 * keep_ge_d_avx512, the kept ones moved by a permute (compress_avx2.h);
 * eight a step, both halves loaded before either is stored at j <= i. */
__attribute__((target("avx2"))) static inline unsigned keep4_ge_d_avx2(__m256i v, __m256d t)
{
    /* the odd floats of four candidates: lanes 1, 3 | 5, 7 */
    __m256 f = _mm256_castsi256_ps(v);
    __m128 l = _mm_shuffle_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1), 0xDD);
    return (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(_mm256_cvtps_pd(l), t, _CMP_GE_OQ));
}

__attribute__((target("avx2"))) static size_t keep_ge_d_avx2(sift_candidate *c, size_t n,
                                                             double thr)
{
    const __m256d t = _mm256_set1_pd(thr);
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)(c + i));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(c + i + 4));
        unsigned keep = keep4_ge_d_avx2(v0, t) | keep4_ge_d_avx2(v1, t) << 4;
        if (keep)
            j += sift__compress8_store(c + j, c + i, keep);
    }
    return keep_ge_d_scalar(c, i, n, j, thr);
}
#endif

size_t sift__keep_logit_ge_at(int level, sift_candidate *c, size_t n, double thr)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512)
        return keep_ge_d_avx512(c, n, thr);
    if (level >= SIFT__SIMD_AVX2)
        return keep_ge_d_avx2(c, n, thr);
#endif
    (void)level;
    return keep_ge_d_scalar(c, 0, n, 0, thr);
}

size_t sift__keep_logit_ge(sift_candidate *c, size_t n, double thr)
{
    return sift__keep_logit_ge_at(sift__simd()->level, c, n, thr);
}

/* min_p's count: the definition (an ordered compare: a NaN is never
 * counted). */
static size_t count_ge_scalar(const sift_candidate *c, size_t i, size_t n, float thr, size_t k)
{
    for (; i < n; i++)
        k += (size_t)(c[i].logit >= thr);
    return k;
}

#ifdef SIFT__KX86
/* Sixteen candidates a step: the logits of two loads (their odd 32-bit
 * lanes) compared ordered, the mask counted. */
__attribute__((target("avx512f,popcnt"))) static size_t count_ge_avx512(const sift_candidate *c,
                                                                        size_t n, float thr)
{
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512 t = _mm512_set1_ps(thr);
    size_t i = 0, k = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_loadu_ps((const float *)(const void *)(c + i));
        __m512 b = _mm512_loadu_ps((const float *)(const void *)(c + i + 8));
        __mmask16 ge = _mm512_cmp_ps_mask(_mm512_permutex2var_ps(a, odd, b), t, _CMP_GE_OQ);
        k += (size_t)__builtin_popcount((unsigned)ge);
    }
    sift__vzeroupper();
    return count_ge_scalar(c, i, n, thr, k);
}

/* AVX2: eight candidates a step, the odd lanes of two loads shuffled
 * together (their order does not matter to a count). */
__attribute__((target("avx2,popcnt"))) static size_t count_ge_avx2(const sift_candidate *c,
                                                                   size_t n, float thr)
{
    const __m256 t = _mm256_set1_ps(thr);
    size_t i = 0, k = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps((const float *)(const void *)(c + i));
        __m256 b = _mm256_loadu_ps((const float *)(const void *)(c + i + 4));
        __m256 l = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        k += (size_t)__builtin_popcount(
            (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(l, t, _CMP_GE_OQ)));
    }
    sift__vzeroupper();
    return count_ge_scalar(c, i, n, thr, k);
}
#endif

size_t sift__count_logit_ge_at(int level, const sift_candidate *c, size_t n, float thr)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512 && __builtin_cpu_supports("popcnt"))
        return count_ge_avx512(c, n, thr);
    if (level >= SIFT__SIMD_AVX2 && __builtin_cpu_supports("popcnt"))
        return count_ge_avx2(c, n, thr);
#endif
    (void)level;
    return count_ge_scalar(c, 0, n, thr, 0);
}

size_t sift__count_logit_ge(const sift_candidate *c, size_t n, float thr)
{
    return sift__count_logit_ge_at(sift__simd()->level, c, n, thr);
}

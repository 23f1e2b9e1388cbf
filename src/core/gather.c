/*
 * gather.c - the row kernels that move logits between a row and a
 * candidate array without loading every token: the filtering load
 * (top_n_sigma's kept set, built from the row) and the logits' copy (the
 * tail route inside a full pass, core/step.c).
 *
 * Owns sift__load_above(_at) and sift__cand_logits(_at) (declared in
 * core/kernels.h). Invariant: every level gives the scalar form's
 * result, bit for bit; tests/check_core compares them at each level.
 */
#include <math.h>

#include "../sift_internal.h"
#include "kernels.h"
#include "simd.h"

#if defined(__x86_64__) && !defined(SIFT_NO_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define SIFT__KX86 1
#include <immintrin.h>

#include "compress_avx2.h"
#endif

/* The tokens of row[0..n) that are not <= t (above t, NaN, +inf), in
 * id order, as candidates; *bad is set when one of them is a NaN or
 * +inf. Branch-free: every token is written at cd[m] and m moves only
 * for a kept one (m <= i, inside cd[0..n)). Continues at i with m kept. */
static size_t load_above_scalar(const float *row, size_t i, size_t n, float t, sift_candidate *cd,
                                size_t m, int *bad)
{
    int b = 0;
    for (; i < n; i++) {
        float x = row[i];
        int keep = !(x <= t);
        cd[m].id = (int32_t)i;
        cd[m].logit = x;
        b |= keep & !(x < INFINITY);
        m += (size_t)keep;
    }
    *bad |= b;
    return m;
}

#ifdef SIFT__KX86
/* load_above_scalar eight at a time: (id, logit) pairs built as the load
 * does, the kept ones moved to the front by compress_avx2.h's permute
 * (all four of each half stored: m <= i keeps the stores inside
 * cd[0..n)); blocks of 32 that keep none are skipped by one test. */
__attribute__((target("avx2,popcnt"), always_inline)) static inline size_t
above8_avx2(__m256 x, __m256 keep, size_t i, sift_candidate *cd, size_t m, __m256 *b)
{
    const __m256 inf = _mm256_set1_ps(INFINITY);
    unsigned k = (unsigned)_mm256_movemask_ps(keep);
    if (!k)
        return m;
    *b = _mm256_or_ps(*b, _mm256_and_ps(keep, _mm256_cmp_ps(x, inf, _CMP_NLT_UQ)));
    __m256 id = _mm256_castsi256_ps(
        _mm256_add_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0), _mm256_set1_epi32((int)i)));
    __m256 lo = _mm256_unpacklo_ps(id, x), hi = _mm256_unpackhi_ps(id, x);
    sift__compress4_store(cd + m, _mm256_castps_si256(_mm256_permute2f128_ps(lo, hi, 0x20)),
                          k & 15u);
    m += (size_t)__builtin_popcount(k & 15u);
    sift__compress4_store(cd + m, _mm256_castps_si256(_mm256_permute2f128_ps(lo, hi, 0x31)),
                          k >> 4);
    return m + (size_t)__builtin_popcount(k >> 4);
}

__attribute__((target("avx2,popcnt"))) static size_t
load_above_avx2(const float *row, size_t n, float t, sift_candidate *cd, int *bad)
{
    const __m256 tv = _mm256_set1_ps(t);
    __m256 b = _mm256_setzero_ps();
    size_t m = 0, i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 x0 = _mm256_loadu_ps(row + i), x1 = _mm256_loadu_ps(row + i + 8);
        __m256 x2 = _mm256_loadu_ps(row + i + 16), x3 = _mm256_loadu_ps(row + i + 24);
        __m256 k0 = _mm256_cmp_ps(x0, tv, _CMP_NLE_UQ), k1 = _mm256_cmp_ps(x1, tv, _CMP_NLE_UQ);
        __m256 k2 = _mm256_cmp_ps(x2, tv, _CMP_NLE_UQ), k3 = _mm256_cmp_ps(x3, tv, _CMP_NLE_UQ);
        if (!_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(k0, k1), _mm256_or_ps(k2, k3))))
            continue;
        m = above8_avx2(x0, k0, i, cd, m, &b);
        m = above8_avx2(x1, k1, i + 8, cd, m, &b);
        m = above8_avx2(x2, k2, i + 16, cd, m, &b);
        m = above8_avx2(x3, k3, i + 24, cd, m, &b);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(row + i);
        m = above8_avx2(x, _mm256_cmp_ps(x, tv, _CMP_NLE_UQ), i, cd, m, &b);
    }
    *bad |= _mm256_movemask_ps(b) != 0;
    return load_above_scalar(row, i, n, t, cd, m, bad);
}

/* Sixteen at a time: the pairs by two permutes of ids and logits, each
 * half compressed by its byte of the mask and stored whole; blocks of
 * 64 that keep none are skipped by one test (on most rows few tokens
 * are kept). */
__attribute__((target("avx512f,popcnt"), always_inline)) static inline size_t
above16_avx512(__m512 x, __mmask16 k, size_t i, sift_candidate *cd, size_t m, unsigned *b)
{
    const __m512 inf = _mm512_set1_ps(INFINITY);
    const __m512i lo_ix = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi_ix =
        _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    *b |= (unsigned)_mm512_mask_cmp_ps_mask(k, x, inf, _CMP_NLT_UQ);
    __m512i ids = _mm512_add_epi32(iota, _mm512_set1_epi32((int)i));
    __m512i xi = _mm512_castps_si512(x);
    __m512i lo = _mm512_permutex2var_epi32(ids, lo_ix, xi);
    __m512i hi = _mm512_permutex2var_epi32(ids, hi_ix, xi);
    _mm512_storeu_si512((void *)(cd + m), _mm512_maskz_compress_epi64((__mmask8)k, lo));
    m += (size_t)__builtin_popcount((unsigned)k & 0xffu);
    _mm512_storeu_si512((void *)(cd + m), _mm512_maskz_compress_epi64((__mmask8)(k >> 8), hi));
    return m + (size_t)__builtin_popcount((unsigned)k >> 8);
}

__attribute__((target("avx512f,popcnt"))) static size_t
load_above_avx512(const float *row, size_t n, float t, sift_candidate *cd, int *bad)
{
    const __m512 tv = _mm512_set1_ps(t);
    unsigned b = 0;
    size_t m = 0, i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 x0 = _mm512_loadu_ps(row + i), x1 = _mm512_loadu_ps(row + i + 16);
        __m512 x2 = _mm512_loadu_ps(row + i + 32), x3 = _mm512_loadu_ps(row + i + 48);
        __mmask16 k0 = _mm512_cmp_ps_mask(x0, tv, _CMP_NLE_UQ);
        __mmask16 k1 = _mm512_cmp_ps_mask(x1, tv, _CMP_NLE_UQ);
        __mmask16 k2 = _mm512_cmp_ps_mask(x2, tv, _CMP_NLE_UQ);
        __mmask16 k3 = _mm512_cmp_ps_mask(x3, tv, _CMP_NLE_UQ);
        if (!((unsigned)k0 | (unsigned)k1 | (unsigned)k2 | (unsigned)k3))
            continue;
        m = above16_avx512(x0, k0, i, cd, m, &b);
        m = above16_avx512(x1, k1, i + 16, cd, m, &b);
        m = above16_avx512(x2, k2, i + 32, cd, m, &b);
        m = above16_avx512(x3, k3, i + 48, cd, m, &b);
    }
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(row + i);
        __mmask16 k = _mm512_cmp_ps_mask(x, tv, _CMP_NLE_UQ);
        if (k)
            m = above16_avx512(x, k, i, cd, m, &b);
    }
    *bad |= b != 0;
    return load_above_scalar(row, i, n, t, cd, m, bad);
}
#endif

size_t sift__load_above_at(int level, const float *row, size_t n, float t, sift_candidate *cd,
                           int *bad)
{
    *bad = 0;
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512 && __builtin_cpu_supports("popcnt"))
        return load_above_avx512(row, n, t, cd, bad);
    if (level >= SIFT__SIMD_AVX2 && __builtin_cpu_supports("popcnt"))
        return load_above_avx2(row, n, t, cd, bad);
#endif
    (void)level;
    return load_above_scalar(row, 0, n, t, cd, 0, bad);
}

size_t sift__load_above(const float *row, size_t n, float t, sift_candidate *cd, int *bad)
{
    return sift__load_above_at(sift__simd()->level, row, n, t, cd, bad);
}

/* The logits of c[0..n) to out[0..n): the odd floats of the candidates,
 * bits unchanged (NaN payloads and -0 included). */
static void cand_logits_scalar(const sift_candidate *c, size_t i, size_t n, float *out)
{
    for (; i < n; i++)
        out[i] = c[i].logit;
}

#ifdef SIFT__KX86
__attribute__((target("avx2"))) static void cand_logits_avx2(const sift_candidate *c, size_t n,
                                                             float *out)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps((const float *)(const void *)(c + i));
        __m256 b = _mm256_loadu_ps((const float *)(const void *)(c + i + 4));
        __m256 l = _mm256_shuffle_ps(a, b, 0xDD); /* 0 1 4 5 | 2 3 6 7 */
        l = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(l), 0xD8));
        _mm256_storeu_ps(out + i, l);
    }
    cand_logits_scalar(c, i, n, out);
}

__attribute__((target("avx512f"))) static void cand_logits_avx512(const sift_candidate *c, size_t n,
                                                                  float *out)
{
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i a = _mm512_loadu_si512((const void *)(c + i));
        __m512i b = _mm512_loadu_si512((const void *)(c + i + 8));
        _mm512_storeu_si512((void *)(out + i), _mm512_permutex2var_epi32(a, odd, b));
    }
    cand_logits_scalar(c, i, n, out);
}
#endif

void sift__cand_logits_at(int level, const sift_candidate *c, size_t n, float *out)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512) {
        cand_logits_avx512(c, n, out);
        return;
    }
    if (level >= SIFT__SIMD_AVX2) {
        cand_logits_avx2(c, n, out);
        return;
    }
#endif
    (void)level;
    cand_logits_scalar(c, 0, n, out);
}

void sift__cand_logits(const sift_candidate *c, size_t n, float *out)
{
    sift__cand_logits_at(sift__simd()->level, c, n, out);
}

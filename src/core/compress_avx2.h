/*
 * compress_avx2.h - the AVX2 compaction step shared by the keep kernels
 * of core/kernels.c (typical's cut) and core/select.c (the cut by
 * canonical key): AVX2 has no compress, so four 64-bit entries (a
 * candidate, or a weight) are moved to the front of a vector by one
 * permute of their 32-bit halves, chosen by the nibble of kept entries.
 * Only for x86-64 builds with dispatch (the includer checks).
 */
#ifndef SIFT_CORE_COMPRESS_AVX2_H
#define SIFT_CORE_COMPRESS_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* Row k: the 32-bit lanes of the entries whose bits are set in k, in
 * order, then those of the others (what lands past the kept ones is
 * scratch). */
static const int32_t sift__compress4_lut[16][8] = {
    {0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3, 4, 5, 6, 7}, {2, 3, 0, 1, 4, 5, 6, 7},
    {0, 1, 2, 3, 4, 5, 6, 7}, {4, 5, 0, 1, 2, 3, 6, 7}, {0, 1, 4, 5, 2, 3, 6, 7},
    {2, 3, 4, 5, 0, 1, 6, 7}, {0, 1, 2, 3, 4, 5, 6, 7}, {6, 7, 0, 1, 2, 3, 4, 5},
    {0, 1, 6, 7, 2, 3, 4, 5}, {2, 3, 6, 7, 0, 1, 4, 5}, {0, 1, 2, 3, 6, 7, 4, 5},
    {4, 5, 6, 7, 0, 1, 2, 3}, {0, 1, 4, 5, 6, 7, 2, 3}, {2, 3, 4, 5, 6, 7, 0, 1},
    {0, 1, 2, 3, 4, 5, 6, 7}};

/* Stores the 64-bit entries of v whose bits are set in the nibble k at
 * p, in order; p[popcount(k)..4) receives the others. */
__attribute__((target("avx2"))) static inline void sift__compress4_store(void *p, __m256i v,
                                                                         unsigned k)
{
    __m256i idx = _mm256_loadu_si256((const __m256i *)(const void *)sift__compress4_lut[k]);
    _mm256_storeu_si256((__m256i *)p, _mm256_permutevar8x32_epi32(v, idx));
}

/* All ones in the 64-bit lanes whose bits are set in the nibble k. */
__attribute__((target("avx2"))) static inline __m256i sift__mask4_avx2(unsigned k)
{
    const __m256i bits = _mm256_set_epi64x(8, 4, 2, 1);
    return _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x((long long)k), bits), bits);
}

#endif

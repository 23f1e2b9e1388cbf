/*
 * compress_avx2.h - the AVX2 compaction step shared by the keep kernels
 * of core/kernels.c (typical's, top_n_sigma's and mirostat's cuts),
 * core/select.c (the cut by canonical key) and core/mass.c (the band
 * pass): AVX2 has no compress, so four 64-bit entries (a candidate, a
 * weight, an index) are moved to the front of a vector by one permute of
 * their 32-bit halves, chosen by the nibble of kept entries (and eight
 * 32-bit entries, a half at a time, for core/fdraw.c's band pass); and
 * the lane sums of kept weights that go with it. Only for x86-64 builds
 * with dispatch (the includer checks).
 */
#ifndef SIFT_CORE_COMPRESS_AVX2_H
#define SIFT_CORE_COMPRESS_AVX2_H

#include <immintrin.h>
#include <stddef.h>
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

/* Row k: the 32-bit lanes of a 128-bit vector whose bits are set in k,
 * in order, then the others. */
static const int32_t sift__compress4x32_lut[16][4] = {
    {0, 1, 2, 3}, {0, 1, 2, 3}, {1, 0, 2, 3}, {0, 1, 2, 3}, {2, 0, 1, 3}, {0, 2, 1, 3},
    {1, 2, 0, 3}, {0, 1, 2, 3}, {3, 0, 1, 2}, {0, 3, 1, 2}, {1, 3, 0, 2}, {0, 1, 3, 2},
    {2, 3, 0, 1}, {0, 2, 3, 1}, {1, 2, 3, 0}, {0, 1, 2, 3}};

/* Stores the 32-bit entries of v whose bits are set in keep (eight
 * bits) at p, in order, a half at a time; some of p[popcount(keep)..8)
 * may receive scratch (p needs room for eight). Returns how many were
 * kept. */
__attribute__((target("avx2,popcnt"))) static inline size_t
sift__compress8x32_store(void *p, __m256 v, unsigned keep)
{
    unsigned k0 = keep & 15u, k1 = keep >> 4;
    size_t n0 = (size_t)__builtin_popcount(k0);
    __m128i i0 = _mm_loadu_si128((const __m128i *)(const void *)sift__compress4x32_lut[k0]);
    __m128i i1 = _mm_loadu_si128((const __m128i *)(const void *)sift__compress4x32_lut[k1]);
    _mm_storeu_ps((float *)p, _mm_permutevar_ps(_mm256_castps256_ps128(v), i0));
    _mm_storeu_ps((float *)p + n0, _mm_permutevar_ps(_mm256_extractf128_ps(v, 1), i1));
    return n0 + (size_t)__builtin_popcount(k1);
}

/* All ones in the 64-bit lanes whose bits are set in the nibble k. */
__attribute__((target("avx2"))) static inline __m256i sift__mask4_avx2(unsigned k)
{
    const __m256i bits = _mm256_set_epi64x(8, 4, 2, 1);
    return _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x((long long)k), bits), bits);
}

/* Moves the 64-bit entries of p[0..8) whose bits are set in keep (eight
 * bits) to q, in order; both halves are read before either is stored,
 * so q may be p or below it (the stores reach q[0..8) at most). Returns
 * how many were kept. */
__attribute__((target("avx2"))) static inline size_t sift__compress8_store(void *q, const void *p,
                                                                           unsigned keep)
{
    const __m256i *s = (const __m256i *)p;
    __m256i v0 = _mm256_loadu_si256(s), v1 = _mm256_loadu_si256(s + 1);
    size_t k0 = (size_t)__builtin_popcount(keep & 15u);
    sift__compress4_store(q, v0, keep & 15u);
    sift__compress4_store((char *)q + 8 * k0, v1, keep >> 4);
    return k0 + (size_t)__builtin_popcount(keep >> 4);
}

/* Adds the 32-bit halves of the weights w[0..8) whose bits are set in
 * keep to the lane sums *lo and *hi (two weights of at most 2^62 per
 * lane before the split: no wrap; each lane sum stays below 2^63 for
 * fewer than 2^31 weights). */
__attribute__((target("avx2"))) static inline void
sift__sum8_halves(const uint64_t *w, unsigned keep, __m256i *lo, __m256i *hi)
{
    const __m256i low32 = _mm256_set1_epi64x(0xffffffffll);
    __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)w);
    __m256i w1 = _mm256_loadu_si256((const __m256i *)(const void *)(w + 4));
    __m256i wk = _mm256_add_epi64(_mm256_and_si256(w0, sift__mask4_avx2(keep & 15u)),
                                  _mm256_and_si256(w1, sift__mask4_avx2(keep >> 4)));
    *lo = _mm256_add_epi64(*lo, _mm256_and_si256(wk, low32));
    *hi = _mm256_add_epi64(*hi, _mm256_srli_epi64(wk, 32));
}

/* The sum of the four 64-bit lanes of v (mod 2^64). */
__attribute__((target("avx2"))) static inline uint64_t sift__lanes4_sum(__m256i v)
{
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)(void *)t, v);
    return t[0] + t[1] + t[2] + t[3];
}

#endif

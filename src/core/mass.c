/*
 * mass.c - the weighted prefix in canonical order (sift__mass_prefix).
 *
 * The selection that dist, top_p, mirostat and adaptive_p draw or cut
 * with: the shortest canonical prefix (logit descending, id ascending)
 * whose exact integer mass reaches a target T, found without sorting.
 * Weights never increase along canonical order, so a histogram of exact
 * integer sums per weight bucket finds the bucket that holds the answer
 * and only that bucket is searched by key. On large rows the band path
 * first estimates from a sample where T lands, takes the exact mass above
 * a band of buckets around it in one vector pass (AVX2 or AVX-512) and
 * histograms only the band; the estimate only chooses where to look, the
 * answer always comes from exact sums. Every path is checked bit for bit
 * against a sorted walk in check_select, at each SIFT_SIMD level.
 */
#include <math.h>

#include "../sift_internal.h"
#include "kernels.h"
#include "simd.h"

/* The AVX-512 and AVX2 forms of this file (the band pass, the heavy
 * scan, the bucket gather), chosen at run time. */
#if defined(__x86_64__) && !defined(SIFT_NO_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define SIFT__BAND_AVX512 1
#include <immintrin.h>

#include "compress_avx2.h"
#endif

static inline void swap64(uint64_t *a, uint64_t *b)
{
    uint64_t t = *a;
    *a = *b;
    *b = t;
}

/* ------------------------------------------------------------------ */
/* Weighted prefix                                                     */
/* ------------------------------------------------------------------ */

static int reaches(sift__u128 mass, sift__u128 T, int strict)
{
    int c = sift__u128_cmp(mass, T);
    return strict ? c > 0 : c >= 0;
}

/* The fallback of weighted_select when its pivots stall: bisection on
 * the key value, 64 passes of O(n). mass{K >= x} only shrinks as x
 * grows, so the largest x that still reaches T is a key. */
static int weighted_bisection(const uint64_t *K, const uint64_t *Wt, size_t n, sift__u128 T,
                              int strict, size_t above, uint64_t *cut, size_t *len)
{
    sift__u128 total = {0, 0};
    for (size_t i = 0; i < n; i++)
        total = sift__u128_add64(total, Wt[i]);
    if (!reaches(total, T, strict))
        return 0;
    uint64_t lo = 0, hi = UINT64_MAX;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2 + 1;
        sift__u128 mass = {0, 0};
        for (size_t i = 0; i < n; i++)
            if (K[i] >= mid)
                mass = sift__u128_add64(mass, Wt[i]);
        if (reaches(mass, T, strict))
            lo = mid;
        else
            hi = mid - 1;
    }
    size_t cnt = 0;
    uint64_t kmax = 0;
    for (size_t i = 0; i < n; i++) {
        cnt += K[i] >= lo;
        kmax = K[i] > kmax ? K[i] : kmax;
    }
    if (cnt == 0) { /* T == 0: the prefix still holds one token */
        lo = kmax;
        cnt = 1;
    }
    *cut = lo;
    *len = above + cnt;
    return 1;
}

/* On K[0..n) (unique keys) with weights Wt: the largest key x such that
 * the mass of {K >= x} reaches T; *len = |{K >= x}|. Reorders K and Wt.
 * Returns 0 if even the whole set does not reach T. */
static int weighted_select(uint64_t *K, uint64_t *Wt, size_t n, sift__u128 T, int strict,
                           uint64_t *cut, size_t *len)
{
    size_t lo = 0, hi = n, above = 0;
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ n;
    int rounds = 0;
    while (hi > lo) {
        size_t m = hi - lo;
        if (++rounds > 64)
            return weighted_bisection(K + lo, Wt + lo, m, T, strict, above, cut, len);
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t p;
        if (m <= 2) {
            p = K[lo];
            if (m == 2 && K[lo + 1] > p)
                p = K[lo + 1];
        } else {
            uint64_t a = K[lo + (seed >> 33) % m];
            uint64_t b = K[lo + (seed >> 13) % m];
            uint64_t c = K[lo + seed % m];
            p = a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
        }
        /* partition [> p] [== p] [< p]; keys are unique so == is one */
        size_t i = lo, lt = lo, gt = hi;
        sift__u128 mass_gt = {0, 0};
        uint64_t w_eq = 0;
        while (i < gt) {
            if (K[i] > p) {
                mass_gt = sift__u128_add64(mass_gt, Wt[i]);
                swap64(&K[i], &K[lt]);
                swap64(&Wt[i], &Wt[lt]);
                lt++;
                i++;
            } else if (K[i] < p) {
                gt--;
                swap64(&K[i], &K[gt]);
                swap64(&Wt[i], &Wt[gt]);
            } else {
                w_eq = Wt[i];
                i++;
            }
        }
        if (lt > lo && reaches(mass_gt, T, strict)) {
            hi = lt;
            continue;
        }
        sift__u128 with_p = sift__u128_add64(mass_gt, w_eq);
        if (reaches(with_p, T, strict)) {
            *cut = p;
            *len = above + (lt - lo) + 1;
            return 1;
        }
        T = sift__u128_sub(T, with_p);
        above += (lt - lo) + 1;
        lo = gt;
    }
    return 0;
}

/* Histogram buckets of the weighted prefix: 2^HB of them, a monotone
 * function of the weight (mass_bucket). */
enum { HB = 12, HBUCKETS = 1 << HB };

/* The bucket of a weight w <= 2^62: the exponent of (double)w and the top
 * 6 bits of its mantissa, 64 buckets per binade of weight, 0 for w <= 1
 * (at most 62 * 64 + 63 < HBUCKETS). The conversion rounds, but is
 * non-decreasing, so a larger weight never has a smaller bucket; a
 * larger logit has a weight at least as large, so buckets never increase
 * along canonical order. Tokens of equal weight share a bucket, which is
 * searched exactly. On a flat row (every weight within a few binades of
 * the largest) this still gives about 64 buckets per binade, where the
 * top 11 bits of the logit's key gave 4. */
static inline uint32_t mass_bucket(uint64_t w)
{
    double d = (double)(int64_t)w;
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    uint32_t e = (uint32_t)(u >> 46), one = 1023u << 6;
    return e > one ? e - one : 0;
}

/* ------------------------------------------------------------------ */
/* The band path of sift__mass_prefix                                  */
/* ------------------------------------------------------------------ */

/* The top 18 bits of (double)w (w <= 2^62): mass_bucket(w) is e - (1023
 * << 6) when e exceeds that, else 0, so bucket > b <=> e > b + (1023 <<
 * 6) for every b >= 0, and bucket >= b <=> e >= b + (1023 << 6) for
 * b >= 1. */
static inline uint32_t mass_e(uint64_t w)
{
    double d = (double)(int64_t)w;
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return (uint32_t)(u >> 46);
}

/* The smallest w in [0, 2^62 + 1] with mass_e(w) >= e (2^62 + 1, above
 * every weight, when none is). mass_e is non-decreasing in w, so
 * mass_e(x) >= e <=> x >= this: the band's bucket bounds become integer
 * thresholds on the weights, which the passes compare without a
 * conversion. A bisection of 63 steps. */
static uint64_t first_w_e_ge(uint32_t e)
{
    uint64_t lo = 0, hi = ((uint64_t)1 << 62) + 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (mass_e(mid) >= e)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* What a band pass finds over w[0..n) for the thresholds A > B (weights
 * w >= A lie above the band, B <= w < A in it): the exact mass of those
 * above in 32-bit halves (lo, hi), their count, and the band's elements,
 * their indices and weights written ascending to band[] and bw[], m of
 * them. */
typedef struct band_out {
    uint64_t lo, hi;
    size_t above, m;
} band_out;

/* The definition, branch-free; the vector forms below give the same
 * results (integer sums in another order). Continues at i. */
static void band_pass_scalar(const uint64_t *w, size_t i, size_t n, uint64_t A, uint64_t B,
                             band_out *o, uint64_t *band, uint64_t *bw)
{
    uint64_t sl = 0, sh = 0;
    size_t na = 0, m = o->m;
    for (; i < n; i++) {
        uint64_t x = w[i];
        uint64_t a = x >= A;
        sl += (x & 0xffffffffu) & -a;
        sh += (x >> 32) & -a;
        na += (size_t)a;
        band[m] = i;
        bw[m] = x;
        m += (size_t)((x >= B) & (x < A));
    }
    o->lo += sl;
    o->hi += sh;
    o->above += na;
    o->m = m;
}

#ifdef SIFT__BAND_AVX512
#define SIFT__BAND_AVX2 1

/* band_pass_scalar four lanes at a time. Weights are at most 2^62 and
 * A, B at most 2^62 + 1, so signed compares order them; the band's lanes
 * are moved to the front by a permutation (compress_avx2.h) and all four
 * stored (a later store overwrites the rest; m <= i, so the stores stay
 * inside band[0..n) and bw[0..n)). */
__attribute__((target("avx2,popcnt"))) static void band_pass_avx2(const uint64_t *w, size_t n,
                                                                  uint64_t A, uint64_t B,
                                                                  band_out *o, uint64_t *band,
                                                                  uint64_t *bw)
{
    const __m256i am1 = _mm256_set1_epi64x((int64_t)A - 1);
    const __m256i bm1 = _mm256_set1_epi64x((int64_t)B - 1);
    const __m256i lo32 = _mm256_set1_epi64x(0xffffffff), four = _mm256_set1_epi64x(4);
    __m256i acc_lo = _mm256_setzero_si256(), acc_hi = acc_lo, cnt = acc_lo;
    __m256i iota = _mm256_set_epi64x(3, 2, 1, 0);
    size_t m = 0, i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(w + i));
        __m256i ga = _mm256_cmpgt_epi64(wv, am1); /* w >= A */
        __m256i gb = _mm256_cmpgt_epi64(wv, bm1); /* w >= B */
        acc_lo = _mm256_add_epi64(acc_lo, _mm256_and_si256(ga, _mm256_and_si256(wv, lo32)));
        acc_hi = _mm256_add_epi64(acc_hi, _mm256_and_si256(ga, _mm256_srli_epi64(wv, 32)));
        cnt = _mm256_sub_epi64(cnt, ga);
        unsigned k = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_andnot_si256(ga, gb)));
        sift__compress4_store(band + m, iota, k);
        sift__compress4_store(bw + m, wv, k);
        m += (size_t)__builtin_popcount(k);
        iota = _mm256_add_epi64(iota, four);
    }
    o->lo += sift__lanes4_sum(acc_lo);
    o->hi += sift__lanes4_sum(acc_hi);
    o->above += (size_t)sift__lanes4_sum(cnt);
    o->m = m;
    sift__vzeroupper();
    band_pass_scalar(w, i, n, A, B, o, band, bw);
}
#endif

#ifdef SIFT__BAND_AVX512
/* band_pass_scalar eight lanes at a time (AVX-512F): the band's lanes
 * (indices and weights) compressed into registers and all eight stored,
 * as in band_pass_avx2. */
__attribute__((target("avx512f,popcnt"))) static void band_pass_avx512(const uint64_t *w, size_t n,
                                                                       uint64_t A, uint64_t B,
                                                                       band_out *o, uint64_t *band,
                                                                       uint64_t *bw)
{
    const __m512i va = _mm512_set1_epi64((int64_t)A), vb = _mm512_set1_epi64((int64_t)B);
    const __m512i lo32 = _mm512_set1_epi64(0xffffffff), eight = _mm512_set1_epi64(8);
    __m512i acc_lo = _mm512_setzero_si512(), acc_hi = acc_lo;
    __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    size_t m = 0, i = 0, na = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i wv = _mm512_loadu_si512((const void *)(w + i));
        __mmask8 ka = _mm512_cmpge_epu64_mask(wv, va);
        __mmask8 kb = _mm512_mask_cmpge_epu64_mask((__mmask8)~ka, wv, vb);
        acc_lo = _mm512_mask_add_epi64(acc_lo, ka, acc_lo, _mm512_and_si512(wv, lo32));
        acc_hi = _mm512_mask_add_epi64(acc_hi, ka, acc_hi, _mm512_srli_epi64(wv, 32));
        na += (size_t)__builtin_popcount((unsigned)ka);
        _mm512_storeu_si512((void *)(band + m), _mm512_maskz_compress_epi64(kb, iota));
        _mm512_storeu_si512((void *)(bw + m), _mm512_maskz_compress_epi64(kb, wv));
        m += (size_t)__builtin_popcount((unsigned)kb);
        iota = _mm512_add_epi64(iota, eight);
    }
    o->lo += (uint64_t)_mm512_reduce_add_epi64(acc_lo);
    o->hi += (uint64_t)_mm512_reduce_add_epi64(acc_hi);
    o->above += na;
    o->m = m;
    sift__vzeroupper();
    band_pass_scalar(w, i, n, A, B, o, band, bw);
}
#endif

/* The vector forms of the band pass: BAND_VEC_NONE, or the widest this
 * machine and sift__simd()'s level allow. */
enum { BAND_VEC_NONE = 0, BAND_VEC_AVX2 = 1, BAND_VEC_AVX512 = 2 };

static int band_vec_level(void)
{
    int level = sift__simd()->level;
#ifdef SIFT__BAND_AVX512
    if (level >= SIFT__SIMD_AVX512 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("popcnt"))
        return BAND_VEC_AVX512;
#endif
#ifdef SIFT__BAND_AVX2
    if (level >= SIFT__SIMD_AVX2 && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("popcnt"))
        return BAND_VEC_AVX2;
#endif
    (void)level;
    return BAND_VEC_NONE;
}

/* The band pass through the form `vec` (tests compare each with the
 * scalar one): the mass above the band in *mass, its count in *above;
 * returns the band's size. */
static size_t band_pass(int vec, const uint64_t *w, size_t n, uint64_t A, uint64_t B,
                        sift__u128 *mass, size_t *above, uint64_t *band, uint64_t *bw)
{
    band_out o = {0, 0, 0, 0};
#ifdef SIFT__BAND_AVX512
    if (vec == BAND_VEC_AVX512)
        band_pass_avx512(w, n, A, B, &o, band, bw);
    else
#endif
#ifdef SIFT__BAND_AVX2
        if (vec == BAND_VEC_AVX2)
        band_pass_avx2(w, n, A, B, &o, band, bw);
    else
#endif
        band_pass_scalar(w, 0, n, A, B, &o, band, bw);
    (void)vec;
    *above = o.above;
    *mass = sift__u128_halves(o.lo, o.hi);
    return o.m;
}

/* Appends to heavy[] the indices i in [i0, n) with w[i] >= theta,
 * ascending, while fewer than cap are stored; returns the new count, or
 * cap + 1 when there were more. */
static size_t heavy_scan_scalar(const uint64_t *w, size_t i, size_t n, uint64_t theta,
                                uint64_t *heavy, size_t h, size_t cap)
{
    for (; i < n; i++) {
        if (w[i] >= theta) {
            if (h == cap)
                return cap + 1;
            heavy[h++] = i;
        }
    }
    return h;
}

#ifdef SIFT__BAND_AVX512
__attribute__((target("avx512f"))) static size_t
heavy_scan_avx512(const uint64_t *w, size_t n, uint64_t theta, uint64_t *heavy, size_t cap)
{
    const __m512i t = _mm512_set1_epi64((int64_t)theta);
    size_t h = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        __mmask8 k = _mm512_cmpge_epu64_mask(_mm512_loadu_si512((const void *)(w + i)), t);
        if (SIFT__UNLIKELY(k)) {
            for (unsigned b = k; b; b &= b - 1) {
                if (h == cap)
                    return cap + 1;
                heavy[h++] = i + (size_t)__builtin_ctz(b);
            }
        }
    }
    return heavy_scan_scalar(w, i, n, theta, heavy, h, cap);
}
#endif

#ifdef SIFT__BAND_AVX2
/* heavy_scan_avx512 four lanes at a time (theta <= 2^62: a signed
 * compare orders it with the weights). */
__attribute__((target("avx2"))) static size_t
heavy_scan_avx2(const uint64_t *w, size_t n, uint64_t theta, uint64_t *heavy, size_t cap)
{
    const __m256i t = _mm256_set1_epi64x((int64_t)theta - 1);
    size_t h = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i g0 = _mm256_cmpgt_epi64(_mm256_loadu_si256((const void *)(w + i)), t);
        __m256i g1 = _mm256_cmpgt_epi64(_mm256_loadu_si256((const void *)(w + i + 4)), t);
        if (SIFT__UNLIKELY(!_mm256_testz_si256(_mm256_or_si256(g0, g1), _mm256_or_si256(g0, g1))))
            for (size_t j = i; j < i + 8; j++)
                if (w[j] >= theta) {
                    if (h == cap)
                        return cap + 1;
                    heavy[h++] = j;
                }
    }
    return heavy_scan_scalar(w, i, n, theta, heavy, h, cap);
}
#endif

static size_t heavy_scan(int vec, const uint64_t *w, size_t n, uint64_t theta, uint64_t *heavy,
                         size_t cap)
{
#ifdef SIFT__BAND_AVX512
    if (vec == BAND_VEC_AVX512)
        return heavy_scan_avx512(w, n, theta, heavy, cap);
#endif
#ifdef SIFT__BAND_AVX2
    if (vec == BAND_VEC_AVX2)
        return heavy_scan_avx2(w, n, theta, heavy, cap);
#endif
    (void)vec;
    return heavy_scan_scalar(w, 0, n, theta, heavy, 0, cap);
}

size_t sift__heavy_scan(const uint64_t *w, size_t n, uint64_t theta, uint64_t *heavy, size_t cap)
{
    return heavy_scan(band_vec_level(), w, n, theta, heavy, cap);
}

/* The estimate takes every weight of at least 1/HEAVY_PART of the
 * estimated total exactly (at most HEAVY_CAP of them) and every
 * SAMPLE_S-th of the others. */
#define HEAVY_PART 4096
#define HEAVY_CAP 8192

/* Every SAMPLE_S-th weight goes into the estimate of the band path. */
enum { SAMPLE_S = 16 };
/* Bands of at most this many elements are searched by weighted_select
 * directly; larger ones get a histogram of their own first. */
#define BAND_DIRECT_MAX 2048

/* On the band's elements (indices band[0..m) into c, weights bw[0..m),
 * every weight with mass_bucket in [b_lo, b_hi]) and T: the same answer
 * as weighted_select on their keys, after an exact histogram of the
 * weights narrows the search to one bucket; 0 when the whole band does
 * not reach T. Four interleaved copies of the histogram (element i in
 * copy i mod 4, summed after; integer sums, so the order does not
 * matter) when h has room for them: neighbours often share a bucket, and
 * with one copy every add waits for the previous store to the same
 * counter. Only the bucket's keys are formed (in K, its weights moved
 * to the front of bw). h: `room` entries of scratch, at least 2 (b_hi -
 * b_lo + 1). */
#ifdef SIFT__BAND_AVX512
/* The gather of band_hist_select eight lanes at a time: the lanes with
 * B <= w < A compressed to the front of band and bw (the stores reach no
 * lane not yet read: *k <= i), those with w >= A counted. Returns where
 * it stopped. */
__attribute__((target("avx512f,popcnt"))) static size_t
bucket_gather_avx512(uint64_t *band, uint64_t *bw, size_t m, uint64_t A, uint64_t B, size_t *k,
                     size_t *above)
{
    const __m512i va = _mm512_set1_epi64((int64_t)A), vb = _mm512_set1_epi64((int64_t)B);
    size_t i = 0, j = 0, na = 0;
    for (; i + 8 <= m; i += 8) {
        __m512i wv = _mm512_loadu_si512((const void *)(bw + i));
        __m512i iv = _mm512_loadu_si512((const void *)(band + i));
        __mmask8 ka = _mm512_cmpge_epu64_mask(wv, va);
        __mmask8 kb = _mm512_mask_cmpge_epu64_mask((__mmask8)~ka, wv, vb);
        na += (size_t)__builtin_popcount((unsigned)ka);
        _mm512_storeu_si512((void *)(band + j), _mm512_maskz_compress_epi64(kb, iv));
        _mm512_storeu_si512((void *)(bw + j), _mm512_maskz_compress_epi64(kb, wv));
        j += (size_t)__builtin_popcount((unsigned)kb);
    }
    *k = j;
    *above = na;
    return i;
}
#endif

static int band_hist_select(const sift_candidate *c, uint64_t *band, uint64_t *bw, size_t m,
                            sift__u128 T, int strict, uint32_t b_lo, uint32_t b_hi, uint64_t *h,
                            size_t room, int vec, uint64_t *K, uint64_t *cut, size_t *len)
{
    size_t nb = (size_t)(b_hi - b_lo) + 1;
    size_t q = room >= 8 * nb ? 4 : 1;
    memset(h, 0, q * 2 * nb * sizeof *h);
    size_t i = 0;
    if (q == 4) {
        uint64_t *h1 = h + 2 * nb, *h2 = h + 4 * nb, *h3 = h + 6 * nb;
        for (; i + 4 <= m; i += 4) {
            uint64_t w0 = bw[i], w1 = bw[i + 1], w2 = bw[i + 2], w3 = bw[i + 3];
            size_t k0 = 2 * (mass_bucket(w0) - b_lo), k1 = 2 * (mass_bucket(w1) - b_lo);
            size_t k2 = 2 * (mass_bucket(w2) - b_lo), k3 = 2 * (mass_bucket(w3) - b_lo);
            h[k0] += w0 & 0xffffffffu;
            h[k0 + 1] += w0 >> 32;
            h1[k1] += w1 & 0xffffffffu;
            h1[k1 + 1] += w1 >> 32;
            h2[k2] += w2 & 0xffffffffu;
            h2[k2 + 1] += w2 >> 32;
            h3[k3] += w3 & 0xffffffffu;
            h3[k3 + 1] += w3 >> 32;
        }
        for (size_t b = 0; b < 2 * nb; b++)
            h[b] += h1[b] + h2[b] + h3[b];
    }
    for (; i < m; i++) {
        size_t k = 2 * (mass_bucket(bw[i]) - b_lo);
        h[k] += bw[i] & 0xffffffffu;
        h[k + 1] += bw[i] >> 32;
    }
    sift__u128 above = {0, 0};
    int64_t bstar = -1;
    for (int64_t b = b_hi; b >= (int64_t)b_lo; b--) {
        uint64_t lo = h[2 * (b - b_lo)], hi = h[2 * (b - b_lo) + 1];
        sift__u128 mb = sift__u128_halves(lo, hi);
        sift__u128 with = sift__u128_add(above, mb);
        if (reaches(with, T, strict)) {
            bstar = b;
            break;
        }
        above = with;
    }
    if (bstar < 0)
        return 0;
    /* bucket > bstar <=> w >= A; bucket >= bstar <=> w >= B (mass_e) */
    const uint32_t one = 1023u << 6;
    uint64_t A = first_w_e_ge((uint32_t)bstar + one + 1);
    uint64_t B = bstar ? first_w_e_ge((uint32_t)bstar + one) : 0;
    /* Branch-free: the bucket's indices and weights move to the front of
     * band and bw (k <= i), then only their keys are formed. */
    size_t k = 0, n_above = 0;
    i = 0;
#ifdef SIFT__BAND_AVX512
    if (vec == BAND_VEC_AVX512)
        i = bucket_gather_avx512(band, bw, m, A, B, &k, &n_above);
#endif
    (void)vec;
    for (; i < m; i++) {
        uint64_t x = bw[i];
        n_above += x >= A;
        band[k] = band[i];
        bw[k] = x;
        k += x - B < A - B;
    }
    for (i = 0; i < k; i++)
        K[i] = sift__ckey(c[band[i]].logit, c[band[i]].id);
    size_t l = 0;
    if (!weighted_select(K, bw, k, sift__u128_sub(T, above), strict, cut, &l))
        return 0;
    *len = n_above + l;
    return 1;
}

/* The band path: an estimate of the mass above each weight bucket from
 * every SAMPLE_S-th weight picks a band of buckets that should hold the
 * answer (with a margin of four standard deviations of the estimate;
 * the weights of at least 1/HEAVY_PART of the estimated total, found by
 * a vector scan, enter it exactly);
 * one vector pass finds the exact mass and count above the band and the
 * band's elements, and the answer is searched among those. The estimate
 * only chooses where to look: when the exact sums show that the answer
 * lies outside the band, this returns 0 and the caller takes the full
 * histogram. Needs n >= 4 * HBUCKETS; uses u64b, u64c and u64d. */
static int mass_prefix_band(sift__ctx *ctx, const sift_candidate *c, const uint64_t *w, size_t n,
                            sift__u128 T, int strict, int vec, uint64_t *cut, size_t *len)
{
    double *hm = (double *)(void *)ctx->ws->u64c, *hq = hm + HBUCKETS;
    uint64_t *heavy = ctx->ws->u64d;
    /* One strided pass: the sample's histogram and its total. */
    memset(hm, 0, 2 * HBUCKETS * sizeof *hm);
    /* The total in integers (w >> 24 summed: no overflow below 2^30
     * elements), as a chain of double additions would bound the loop by
     * their latency. */
    uint64_t tot = 0;
    for (size_t i = 0; i < n; i += SAMPLE_S) {
        uint32_t b = mass_bucket(w[i]);
        double d = (double)(int64_t)w[i] * SAMPLE_S;
        tot += w[i] >> 24;
        hm[b] += d;
        hq[b] += d * d;
    }
    double total = (double)tot * 0x1p24 * SAMPLE_S;
    /* The heavy weights (1 <= theta): none can reach a theta above 2^62,
     * the largest weight there is, and then the scan is skipped. Each one
     * found enters exactly, and a sampled one leaves the sample's part
     * (an estimate: the rounding of the subtraction does not matter). */
    double td = total / HEAVY_PART;
    uint64_t theta = td < 1.0 ? 1 : td > 0x1p62 ? ((uint64_t)1 << 62) + 1 : (uint64_t)td;
    size_t nh = theta > (uint64_t)1 << 62 ? 0 : heavy_scan(vec, w, n, theta, heavy, HEAVY_CAP);
    if (nh > HEAVY_CAP)
        return 0;
    for (size_t j = 0; j < nh; j++) {
        uint64_t x = w[heavy[j]];
        uint32_t b = mass_bucket(x);
        hm[b] += (double)(int64_t)x;
        if (heavy[j] % SAMPLE_S == 0) {
            double d = (double)(int64_t)x * SAMPLE_S;
            hm[b] -= d;
            hq[b] -= d * d;
        }
    }
    double Td = sift__u128_to_double(T);
    double cm = 0, cq = 0;
    int bhat = 0;
    for (int b = HBUCKETS - 1; b >= 0; b--) {
        cm += hm[b];
        cq += hq[b];
        if (cm >= Td) {
            bhat = b;
            break;
        }
    }
    /* the estimate of the mass at or above a bucket: the heavy weights
     * there and SAMPLE_S times the sampled light ones, whose variance is
     * about SAMPLE_S^2 times their squares (hq holds the scaled ones) */
    double delta = 4.0 * sqrt(cq > 0 ? cq : 0) + (double)theta;
    int b_hi = -1, b_lo = 0;
    cm = 0;
    for (int b = HBUCKETS - 1; b >= 0; b--) {
        cm += hm[b];
        if (b_hi < 0 && cm > Td - delta)
            b_hi = b;
        if (cm >= Td + delta) {
            b_lo = b;
            break;
        }
    }
    if (b_hi < 0)
        b_hi = bhat;
    if (b_lo > b_hi)
        b_lo = b_hi;
    /* the band as thresholds on the weights: bucket > b_hi <=> w >= A,
     * bucket >= b_lo <=> w >= B (see mass_e) */
    const uint32_t one = 1023u << 6;
    uint64_t A = first_w_e_ge((uint32_t)b_hi + one + 1);
    uint64_t B = b_lo ? first_w_e_ge((uint32_t)b_lo + one) : 0;
    /* the band's indices in u64b, its weights in u64d (heavy[] is read) */
    uint64_t *band = ctx->ws->u64b, *bw = ctx->ws->u64d, *K = ctx->ws->u64c;
    sift__u128 above;
    size_t n_above;
    size_t m = band_pass(vec, w, n, A, B, &above, &n_above, band, bw);
    if (reaches(above, T, strict))
        return 0; /* the answer lies above the band */
    sift__u128 Tb = sift__u128_sub(T, above);
    size_t l = 0;
    int ok;
    if (m <= BAND_DIRECT_MAX) {
        uint64_t sl = 0, sh = 0;
        for (size_t j = 0; j < m; j++) {
            sl += bw[j] & 0xffffffffu;
            sh += bw[j] >> 32;
            K[j] = sift__ckey(c[band[j]].logit, c[band[j]].id);
        }
        sift__u128 mb = sift__u128_add((sift__u128){sl, 0}, (sift__u128){sh << 32, sh >> 32});
        if (!reaches(mb, Tb, strict))
            return 0; /* below the band, or nowhere */
        ok = weighted_select(K, bw, m, Tb, strict, cut, &l);
    } else {
        /* the histogram in u64c (hm is no longer needed), whose first
         * entries K then overwrites */
        ok = band_hist_select(c, band, bw, m, Tb, strict, (uint32_t)b_lo, (uint32_t)b_hi, K, n, vec,
                              K, cut, &l);
    }
    if (!ok)
        return 0; /* below the band, or nowhere */
    *len = n_above + l;
    return 1;
}

/* The largest weight there is, trunc(2^62 expf(0)). */
#define W_ONE ((uint64_t)1 << 62)

/* Below this many candidates, sift__mass_prefix sorts and walks. */
#define SMALL_MASS_N 48

size_t sift__arr_mass_prefix(sift__ctx *ctx, const sift__arr *a, const uint64_t *w, sift__u128 T,
                             int strict, uint64_t *cut)
{
    if (a->order != SIFT__ORDER_CANON)
        return sift__mass_prefix(ctx, a->c, w, a->n, T, strict, cut);
    /* Stored in canonical order: the definition itself, a walk that
     * stops where the prefix mass reaches T. */
    sift__u128 run = {0, 0};
    for (size_t i = 0; i < a->n; i++) {
        run = sift__u128_add64(run, w[i]);
        if (reaches(run, T, strict)) {
            *cut = sift__ckey(a->c[i].logit, a->c[i].id);
            return i + 1;
        }
    }
    *cut = a->n ? sift__ckey(a->c[a->n - 1].logit, a->c[a->n - 1].id) : UINT64_MAX;
    return a->n;
}

size_t sift__mass_prefix(sift__ctx *ctx, const sift_candidate *c, const uint64_t *w, size_t n,
                         sift__u128 T, int strict, uint64_t *cut)
{
    uint64_t *K = ctx->ws->u64c;
    uint64_t *Wt = ctx->ws->u64d;
    size_t len = 0;
    if (n <= SMALL_MASS_N) {
        /* Few candidates (a slice after a truncation): sort the keys with
         * their weights by insertion and walk them; the same definition,
         * less machinery. */
        for (size_t i = 0; i < n; i++) {
            uint64_t k = sift__ckey(c[i].logit, c[i].id), wi = w[i];
            size_t j = i;
            for (; j > 0 && K[j - 1] < k; j--) {
                K[j] = K[j - 1];
                Wt[j] = Wt[j - 1];
            }
            K[j] = k;
            Wt[j] = wi;
        }
        sift__u128 run = {0, 0};
        for (size_t i = 0; i < n; i++) {
            run = sift__u128_add64(run, Wt[i]);
            if (reaches(run, T, strict)) {
                *cut = K[i];
                return i + 1;
            }
        }
        *cut = n ? K[n - 1] : UINT64_MAX;
        return n;
    }
    if (n >= 4 * HBUCKETS) {
        /* One pass sums the weights per weight bucket (mass_bucket) and
         * stores each element's bucket; walking the buckets from the top
         * finds the one where the prefix mass reaches T, and only that
         * bucket's elements need an exact search. Each weight is split
         * into 32-bit halves summed in separate 64-bit counters, which
         * cannot overflow for n < 2^32, so no carries are tracked in the
         * loop. */
        if (T.hi == 0 && (strict ? T.lo < W_ONE : T.lo <= W_ONE)) {
            /* A target a weight can reach (every weight is at most 2^62):
             * when the canonical first token's own weight reaches it,
             * the shortest prefix is that token (T = 0 without strict:
             * every prefix reaches it). On peaked rows most draws land
             * there, and two vector passes find it where the band path
             * reads every weight. */
            size_t i0 = sift__canon_first(c, n, sift__max_logit(c, n), 0);
            if (reaches(sift__u128_from(w[i0]), T, strict)) {
                *cut = sift__ckey(c[i0].logit, c[i0].id);
                return 1;
            }
        }
        /* By default the band path runs only with a vector pass (AVX2 or
         * AVX-512): the scalar pass (which the tests run) costs more than
         * the full histogram does. */
        int mode = ctx->mass_path;
        int bvec = mode == SIFT__MASS_BAND_VEC || mode == SIFT__MASS_DEFAULT ? band_vec_level()
                                                                             : BAND_VEC_NONE;
        if (bvec || mode == SIFT__MASS_BAND_VEC || mode == SIFT__MASS_BAND_SCALAR) {
            if (mass_prefix_band(ctx, c, w, n, T, strict, bvec, cut, &len)) {
                ctx->band_answered++;
                return len;
            }
            ctx->band_handed_over++;
        }
        uint64_t *h = ctx->ws->u64c; /* h[2b] low halves, h[2b + 1] high */
        /* Each element's bucket, 16 bits, in u64b (n / 4 of its n
         * entries). */
        uint16_t *bk = (uint16_t *)(void *)ctx->ws->u64b;
        /* Four histograms, element i going to copy i mod 4, merged after:
         * neighbours often share a bucket (weights crowd a few binades),
         * and with one copy every add waited for the previous store to
         * the same counter. The copies fill u64c and u64d (2 * 2 *
         * HBUCKETS entries each, which n >= 4 * HBUCKETS guarantees); K
         * and Wt reuse them only after the merge. Integer sums, so the
         * merge order does not matter. */
        uint64_t *hc[4] = {h, h + 2 * HBUCKETS, ctx->ws->u64d, ctx->ws->u64d + 2 * HBUCKETS};
        for (int q = 0; q < 4; q++)
            memset(hc[q], 0, 2 * HBUCKETS * sizeof *h);
        uint64_t *h0 = hc[0], *h1 = hc[1], *h2 = hc[2], *h3 = hc[3];
        size_t i = 0;
        for (; i + 4 <= n; i += 4) {
            uint64_t w0 = w[i], w1 = w[i + 1], w2 = w[i + 2], w3 = w[i + 3];
            uint32_t b0 = mass_bucket(w0), b1 = mass_bucket(w1);
            uint32_t b2 = mass_bucket(w2), b3 = mass_bucket(w3);
            bk[i] = (uint16_t)b0;
            bk[i + 1] = (uint16_t)b1;
            bk[i + 2] = (uint16_t)b2;
            bk[i + 3] = (uint16_t)b3;
            h0[2 * b0] += w0 & 0xffffffffu;
            h0[2 * b0 + 1] += w0 >> 32;
            h1[2 * b1] += w1 & 0xffffffffu;
            h1[2 * b1 + 1] += w1 >> 32;
            h2[2 * b2] += w2 & 0xffffffffu;
            h2[2 * b2 + 1] += w2 >> 32;
            h3[2 * b3] += w3 & 0xffffffffu;
            h3[2 * b3 + 1] += w3 >> 32;
        }
        for (; i < n; i++) {
            uint32_t b = mass_bucket(w[i]);
            bk[i] = (uint16_t)b;
            h[2 * b] += w[i] & 0xffffffffu;
            h[2 * b + 1] += w[i] >> 32;
        }
        for (size_t b = 0; b < 2 * HBUCKETS; b++)
            h[b] += hc[1][b] + hc[2][b] + hc[3][b];
        sift__u128 above = {0, 0};
        int bstar = -1;
        for (int b = HBUCKETS - 1; b >= 0; b--) {
            uint64_t lo = h[2 * b], hi = h[2 * b + 1];
            sift__u128 mb = sift__u128_halves(lo, hi);
            sift__u128 with = sift__u128_add(above, mb);
            if (reaches(with, T, strict)) {
                bstar = b;
                break;
            }
            above = with;
        }
        if (bstar >= 0) {
            /* Gather the bucket (K and Wt overwrite the histogram, which
             * is no longer needed) and count what lies above it. */
            size_t m = 0, n_above = 0;
            uint16_t bs = (uint16_t)bstar;
            const int vec = sift__simd()->level > SIFT__SIMD_SCALAR;
            (void)vec;
            /* Blocks of 64: a branch-free count (it vectorizes) and a
             * look at the elements only in a block that holds the bucket. */
            for (size_t s0 = 0; s0 < n; s0 += 64) {
                size_t e0 = n - s0 > 64 ? s0 + 64 : n;
                uint32_t cnt = 0, eq = 0;
                size_t j = s0;
#if defined(__GNUC__) || defined(__clang__)
                /* Eight buckets at a time with the compiler's generic
                 * vectors (SSE2, NEON); the same count as the scalar
                 * loop below, which SIFT_SIMD=scalar selects (so the
                 * tests run both). */
                typedef uint16_t v8u __attribute__((vector_size(16)));
                typedef int16_t v8s __attribute__((vector_size(16)));
                if (e0 - s0 == 64 && vec) {
                    v8u bv = {bs, bs, bs, bs, bs, bs, bs, bs};
                    v8s gt = {0, 0, 0, 0, 0, 0, 0, 0}, q = gt;
                    for (; j < e0; j += 8) {
                        v8u x;
                        memcpy(&x, bk + j, sizeof x);
                        gt -= (v8s)(x > bv); /* a true lane is -1 */
                        q |= (v8s)(x == bv);
                    }
                    for (int l = 0; l < 8; l++) {
                        cnt += (uint32_t)gt[l];
                        eq |= (uint32_t)(q[l] != 0);
                    }
                }
#endif
                for (; j < e0; j++) {
                    cnt += bk[j] > bs;
                    eq |= bk[j] == bs;
                }
                n_above += cnt;
                if (!eq)
                    continue;
                for (j = s0; j < e0; j++) {
                    if (bk[j] == bs) {
                        K[m] = sift__ckey(c[j].logit, c[j].id);
                        Wt[m] = w[j];
                        m++;
                    }
                }
            }
            if (weighted_select(K, Wt, m, sift__u128_sub(T, above), strict, cut, &len))
                return n_above + len;
            /* unreachable: the bucket's mass reaches what is left of T;
             * the general path below would still answer correctly */
        } else {
            goto none; /* no bucket reaches T, so no prefix does */
        }
    }
    for (size_t i = 0; i < n; i++) {
        K[i] = sift__ckey(c[i].logit, c[i].id);
        Wt[i] = w[i];
    }
    if (weighted_select(K, Wt, n, T, strict, cut, &len))
        return len;
none:;
    /* No prefix reaches T: everything, cut at the smallest key. */
    uint64_t mn = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = sift__ckey(c[i].logit, c[i].id);
        mn = k < mn ? k : mn;
    }
    *cut = mn;
    return n;
}

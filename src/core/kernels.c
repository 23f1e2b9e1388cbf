/*
 * kernels.c - row kernels of the whole-row step (core/kernels.h): the
 * load of a row into the working array, top_n_sigma's lane sums,
 * typical's score buckets and cut (moving the weights with it, for the
 * dist after typical), and mirostat's cut by weight and its
 * searches.
 *
 * Owns sift__load_cand(_at), sift__lane_sums(_at), sift__score_buckets,
 * sift__find_eq_u32, sift__keep_below, sift__keep_below_w, sift__keep_w_ge, sift__find_id,
 * sift__find_logit_eq, sift__find_w_ge, sift__moments_of, sift__moments_row (each with _at) and
 * sift__canon_first. The load writes
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
 * mirostat's kernels (sift__keep_w_ge, sift__find_id, sift__find_logit_eq)
 * replace loops that made a canonical key or a masked sum per token of the
 * whole row: vector compares (AVX2, AVX-512F) pick the rare vectors that
 * hold a kept or sought candidate, and only those are compressed
 * (AVX-512F) or handed to the scalar twin (AVX2). The result is a set or
 * an index, the same at every level by construction; tests/check_core
 * compares every level with a plain loop. docs/samplers.md
 * ("Performance") has what they saved.
 *
 * typical's kernels (sift__score_buckets, sift__find_eq_u32,
 * sift__keep_below and sift__keep_below_w) have AVX2 and AVX-512F forms.
 * The score buckets are the scalar operations in the same order on four
 * (eight) doubles, so the same bits. The compaction by bucket moves the
 * kept candidates (and weights) of eight a step to the front: one
 * compress per vector at AVX-512F, one permute per four 64-bit entries
 * from a table of 16 at AVX2; the kept set and its order are the scalar
 * loop's, and keep_eq is asked about the cut bucket's candidates in the
 * same order. tests/check_core compares every level with the scalar one.
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

#include "compress_avx2.h"
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

/* ------------------------------------------------------------------ */
/* Whole-distribution kernels (typical's score buckets and its cut)    */
/* ------------------------------------------------------------------ */

/* The definition of a score bucket (typical.c): x = (LS - (double)(l -
 * m)) - H with its sign bit cleared, times scale, clamped above at top
 * (a NaN too: the compare is false), truncated. */
static inline uint32_t score_bucket(float l, float m, double LS, double H, double scale, double top)
{
    double x = (LS - (double)(l - m)) - H;
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    u &= 0x7fffffffffffffffull;
    memcpy(&x, &u, sizeof x);
    double y = x * scale;
    y = y < top ? y : top;
    return (uint32_t)(int32_t)y;
}

static void score_buckets_scalar(const sift_candidate *c, size_t i, size_t n, float m, double LS,
                                 double H, double scale, double top, uint32_t *bk)
{
    for (; i < n; i++)
        bk[i] = score_bucket(c[i].logit, m, LS, H, scale, top);
}

static size_t find_eq_scalar(const uint32_t *bk, size_t i, size_t n, uint32_t b)
{
    while (i < n && bk[i] != b)
        i++;
    return i;
}

/* Candidates [i, n) into mo, four running sums each. */
static void moments_scalar(const sift_candidate *cd, size_t i, size_t n, sift__moments *mo)
{
    double s[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0};
    size_t c = 0;
    float mx = mo->max;
    for (; i < n; i++) {
        float l = cd[i].logit;
        mx = l > mx ? l : mx;
        if (l > -INFINITY) {
            double x = (double)l;
            s[c & 3] += x;
            q[c & 3] += x * x;
            c++;
        }
    }
    mo->count += c;
    mo->max = mx;
    mo->sum += (s[0] + s[1]) + (s[2] + s[3]);
    mo->sumsq += (q[0] + q[1]) + (q[2] + q[3]);
}

/* moments_scalar over a row of floats: x[i, n). */
static void moments_row_scalar(const float *x, size_t i, size_t n, sift__moments *mo)
{
    double s[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0};
    size_t c = 0;
    float mx = mo->max;
    for (; i < n; i++) {
        float l = x[i];
        mx = l > mx ? l : mx;
        if (l > -INFINITY) {
            double d = (double)l;
            s[c & 3] += d;
            q[c & 3] += d * d;
            c++;
        }
    }
    mo->count += c;
    mo->max = mx;
    mo->sum += (s[0] + s[1]) + (s[2] + s[3]);
    mo->sumsq += (q[0] + q[1]) + (q[2] + q[3]);
}

static size_t find_w_ge_scalar(const uint64_t *w, size_t i, size_t n, uint64_t t)
{
    while (i < n && w[i] < t)
        i++;
    return i;
}

static size_t keep_below_scalar(sift_candidate *c, const uint32_t *bk, size_t i, size_t n, size_t j,
                                uint32_t bstar, sift__keep_fn keep_eq, void *arg)
{
    for (; i < n; i++) {
        sift_candidate x = c[i];
        uint32_t b = bk[i];
        int keep = b < bstar;
        if (b == bstar)
            keep = keep_eq(&x, arg);
        c[j] = x;
        j += (size_t)keep;
    }
    return j;
}

/* keep_below_scalar moving w[i] with c[i]; the kept weights' 32-bit
 * halves are added to *lo and *hi (each weight is below 2^63 and n below
 * 2^31, so neither sum overflows). */
static size_t keep_below_w_scalar(sift_candidate *c, uint64_t *w, const uint32_t *bk, size_t i,
                                  size_t n, size_t j, uint32_t bstar, sift__keep_fn keep_eq,
                                  void *arg, uint64_t *lo, uint64_t *hi)
{
    uint64_t sl = 0, sh = 0;
    for (; i < n; i++) {
        sift_candidate x = c[i];
        uint64_t wi = w[i];
        uint32_t b = bk[i];
        int keep = b < bstar;
        if (b == bstar)
            keep = keep_eq(&x, arg) != 0;
        uint64_t wk = wi & (0 - (uint64_t)keep);
        sl += wk & 0xffffffffu;
        sh += wk >> 32;
        c[j] = x;
        w[j] = wi;
        j += (size_t)keep;
    }
    *lo += sl;
    *hi += sh;
    return j;
}

#ifdef SIFT__KX86
/* The same operations on eight doubles a vector, in the same order
 * (-ffp-contract=off: nothing fuses); vminpd returns its second operand
 * when the first is not below it, NaN included, as the scalar clamp. */
__attribute__((target("avx512f"))) static void score_buckets_avx512(const sift_candidate *c,
                                                                    size_t n, float m, double LS,
                                                                    double H, double scale,
                                                                    double top, uint32_t *bk)
{
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512 mv = _mm512_set1_ps(m);
    const __m512d LSv = _mm512_set1_pd(LS), Hv = _mm512_set1_pd(H);
    const __m512d sv = _mm512_set1_pd(scale), tv = _mm512_set1_pd(top);
    const __m512i nosign = _mm512_set1_epi64(0x7fffffffffffffffll);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_loadu_ps((const float *)(const void *)(c + i));
        __m512 b = _mm512_loadu_ps((const float *)(const void *)(c + i + 8));
        __m512 d = _mm512_sub_ps(_mm512_permutex2var_ps(a, odd, b), mv);
        for (int h = 0; h < 2; h++) {
            __m256 dh = h ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d), 1))
                          : _mm512_castps512_ps256(d);
            __m512d x = _mm512_sub_pd(_mm512_sub_pd(LSv, _mm512_cvtps_pd(dh)), Hv);
            x = _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(x), nosign));
            __m512d y = _mm512_min_pd(_mm512_mul_pd(x, sv), tv);
            _mm256_storeu_si256((__m256i *)(void *)(bk + i + 8 * (size_t)h),
                                _mm512_cvttpd_epi32(y));
        }
    }
    score_buckets_scalar(c, i, n, m, LS, H, scale, top, bk);
}

__attribute__((target("avx512f"))) static size_t find_eq_avx512(const uint32_t *bk, size_t i,
                                                                size_t n, uint32_t b)
{
    const __m512i bv = _mm512_set1_epi32((int32_t)b);
    for (; i + 16 <= n; i += 16) {
        unsigned k = _mm512_cmpeq_epi32_mask(_mm512_loadu_si512((const void *)(bk + i)), bv);
        if (k)
            return i + (size_t)__builtin_ctz(k);
    }
    return find_eq_scalar(bk, i, n, b);
}

/* The moments' accumulators at AVX-512: four a sum (eight doubles
 * each), the running maximum and the count. */
typedef struct mom512 {
    __m512d s0, s1, s2, s3, q0, q1, q2, q3;
    __m512 mx;
    size_t c;
} mom512;

/* Thirty-two logits, l0 and l1, into the accumulators: a -inf lane is
 * left out by the mask. */
__attribute__((target("avx512f"))) static inline void mom512_add(mom512 *a, __m512 l0, __m512 l1)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __mmask16 k0 = _mm512_cmp_ps_mask(l0, ninf, _CMP_GT_OQ);
    __mmask16 k1 = _mm512_cmp_ps_mask(l1, ninf, _CMP_GT_OQ);
    a->c += (size_t)__builtin_popcount((unsigned)k0) + (size_t)__builtin_popcount((unsigned)k1);
    a->mx = _mm512_max_ps(a->mx, _mm512_max_ps(l0, l1));
    __m512d x0 = _mm512_cvtps_pd(_mm512_castps512_ps256(l0));
    __m512d x1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(l0), 1)));
    __m512d x2 = _mm512_cvtps_pd(_mm512_castps512_ps256(l1));
    __m512d x3 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(l1), 1)));
    __mmask8 k0a = (__mmask8)k0, k0b = (__mmask8)(k0 >> 8);
    __mmask8 k1a = (__mmask8)k1, k1b = (__mmask8)(k1 >> 8);
    a->s0 = _mm512_mask_add_pd(a->s0, k0a, a->s0, x0);
    a->q0 = _mm512_mask_add_pd(a->q0, k0a, a->q0, _mm512_mul_pd(x0, x0));
    a->s1 = _mm512_mask_add_pd(a->s1, k0b, a->s1, x1);
    a->q1 = _mm512_mask_add_pd(a->q1, k0b, a->q1, _mm512_mul_pd(x1, x1));
    a->s2 = _mm512_mask_add_pd(a->s2, k1a, a->s2, x2);
    a->q2 = _mm512_mask_add_pd(a->q2, k1a, a->q2, _mm512_mul_pd(x2, x2));
    a->s3 = _mm512_mask_add_pd(a->s3, k1b, a->s3, x3);
    a->q3 = _mm512_mask_add_pd(a->q3, k1b, a->q3, _mm512_mul_pd(x3, x3));
}

__attribute__((target("avx512f"))) static inline void mom512_init(mom512 *a)
{
    a->s0 = a->s1 = a->s2 = a->s3 = _mm512_setzero_pd();
    a->q0 = a->q1 = a->q2 = a->q3 = _mm512_setzero_pd();
    a->mx = _mm512_set1_ps(-INFINITY);
    a->c = 0;
}

__attribute__((target("avx512f"))) static inline void mom512_end(const mom512 *a, sift__moments *mo)
{
    mo->count = a->c;
    mo->max = _mm512_reduce_max_ps(a->mx);
    mo->sum = _mm512_reduce_add_pd(
        _mm512_add_pd(_mm512_add_pd(a->s0, a->s1), _mm512_add_pd(a->s2, a->s3)));
    mo->sumsq = _mm512_reduce_add_pd(
        _mm512_add_pd(_mm512_add_pd(a->q0, a->q1), _mm512_add_pd(a->q2, a->q3)));
}

/* Thirty-two candidates a step: their logits gathered from the
 * candidates' odd words. */
__attribute__((target("avx512f"))) static void moments_avx512(const sift_candidate *cd, size_t n,
                                                              sift__moments *mo)
{
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    mom512 a;
    mom512_init(&a);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const float *p = (const float *)(const void *)(cd + i);
        mom512_add(&a, _mm512_permutex2var_ps(_mm512_loadu_ps(p), odd, _mm512_loadu_ps(p + 16)),
                   _mm512_permutex2var_ps(_mm512_loadu_ps(p + 32), odd, _mm512_loadu_ps(p + 48)));
    }
    mom512_end(&a, mo);
    sift__vzeroupper();
    moments_scalar(cd, i, n, mo);
}

/* The same over a row of floats: thirty-two a step. A row seldom holds
 * -inf, so a first pass assumes none: no masks and no count (every value
 * counts), the squares added by fused multiply-adds (each term is then
 * added exactly and rounded once with the sum, within the bound of a sum
 * of rounded squares), and a running minimum that shows a -inf; a row
 * that has one is summed again with the masks. */
__attribute__((target("avx512f"))) static void moments_row_avx512(const float *x, size_t n,
                                                                  sift__moments *mo)
{
    __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    __m512 vmx = _mm512_set1_ps(-INFINITY), vmn = _mm512_set1_ps(INFINITY);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 l0 = _mm512_loadu_ps(x + i), l1 = _mm512_loadu_ps(x + i + 16);
        vmx = _mm512_max_ps(vmx, _mm512_max_ps(l0, l1));
        vmn = _mm512_min_ps(vmn, _mm512_min_ps(l0, l1));
        __m512d x0 = _mm512_cvtps_pd(_mm512_castps512_ps256(l0));
        __m512d x1 =
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(l0), 1)));
        __m512d x2 = _mm512_cvtps_pd(_mm512_castps512_ps256(l1));
        __m512d x3 =
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(l1), 1)));
        s0 = _mm512_add_pd(s0, x0);
        q0 = _mm512_fmadd_pd(x0, x0, q0);
        s1 = _mm512_add_pd(s1, x1);
        q1 = _mm512_fmadd_pd(x1, x1, q1);
        s2 = _mm512_add_pd(s2, x2);
        q2 = _mm512_fmadd_pd(x2, x2, q2);
        s3 = _mm512_add_pd(s3, x3);
        q3 = _mm512_fmadd_pd(x3, x3, q3);
    }
    if (SIFT__UNLIKELY(!(_mm512_reduce_min_ps(vmn) > -INFINITY))) {
        /* a -inf (or a NaN, which promises nothing): with the masks */
        mom512 a;
        mom512_init(&a);
        for (i = 0; i + 32 <= n; i += 32)
            mom512_add(&a, _mm512_loadu_ps(x + i), _mm512_loadu_ps(x + i + 16));
        mom512_end(&a, mo);
        sift__vzeroupper();
        moments_row_scalar(x, i, n, mo);
        return;
    }
    mo->count = i;
    mo->max = _mm512_reduce_max_ps(vmx);
    mo->sum = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3)));
    mo->sumsq = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(q0, q1), _mm512_add_pd(q2, q3)));
    sift__vzeroupper();
    moments_row_scalar(x, i, n, mo);
}

__attribute__((target("avx512f"))) static size_t find_w_ge_avx512(const uint64_t *w, size_t i,
                                                                  size_t n, uint64_t t)
{
    const __m512i tv = _mm512_set1_epi64((long long)t);
    for (; i + 16 <= n; i += 16) {
        __m512i a = _mm512_loadu_si512((const void *)(w + i));
        __m512i b = _mm512_loadu_si512((const void *)(w + i + 8));
        unsigned k = (unsigned)_mm512_cmpge_epu64_mask(a, tv) |
                     ((unsigned)_mm512_cmpge_epu64_mask(b, tv) << 8);
        if (k)
            return i + (size_t)__builtin_ctz(k);
    }
    return find_w_ge_scalar(w, i, n, t);
}

/* AVX2 forms of typical's kernels: the same operations on four doubles
 * a vector as score_buckets_avx512 on eight (the same bits), eight
 * buckets a compare for the search, and the compaction by bucket eight
 * candidates a step, each half of four 64-bit entries moved to the
 * front by one permute (compress_avx2.h). */
__attribute__((target("avx2"))) static void score_buckets_avx2(const sift_candidate *c, size_t n,
                                                               float m, double LS, double H,
                                                               double scale, double top,
                                                               uint32_t *bk)
{
    const __m256 mv = _mm256_set1_ps(m);
    const __m256d LSv = _mm256_set1_pd(LS), Hv = _mm256_set1_pd(H);
    const __m256d sv = _mm256_set1_pd(scale), tv = _mm256_set1_pd(top);
    const __m256d nosign = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        /* (id, logit) x 4 twice: the odd floats are the logits */
        __m256 a = _mm256_loadu_ps((const float *)(const void *)(c + i));
        __m256 b = _mm256_loadu_ps((const float *)(const void *)(c + i + 4));
        __m256 l = _mm256_shuffle_ps(a, b, 0xDD); /* 0 1 4 5 | 2 3 6 7 */
        l = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(l), 0xD8));
        __m256 d = _mm256_sub_ps(l, mv);
        for (int h = 0; h < 2; h++) {
            __m128 dh = h ? _mm256_extractf128_ps(d, 1) : _mm256_castps256_ps128(d);
            __m256d x = _mm256_sub_pd(_mm256_sub_pd(LSv, _mm256_cvtps_pd(dh)), Hv);
            x = _mm256_and_pd(x, nosign);
            __m256d y = _mm256_min_pd(_mm256_mul_pd(x, sv), tv);
            _mm_storeu_si128((__m128i *)(void *)(bk + i + 4 * (size_t)h), _mm256_cvttpd_epi32(y));
        }
    }
    score_buckets_scalar(c, i, n, m, LS, H, scale, top, bk);
}

__attribute__((target("avx2"))) static size_t find_eq_avx2(const uint32_t *bk, size_t i, size_t n,
                                                           uint32_t b)
{
    const __m256i bv = _mm256_set1_epi32((int32_t)b);
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(bk + i));
        unsigned k = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, bv)));
        if (k)
            return i + (size_t)__builtin_ctz(k);
    }
    return find_eq_scalar(bk, i, n, b);
}

/* moments_avx512 on four doubles a vector: sixteen candidates a step,
 * each -inf lane zeroed by a compare. */
__attribute__((target("avx2"))) static void moments_avx2(const sift_candidate *cd, size_t n,
                                                         sift__moments *mo)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256d ninfd = _mm256_set1_pd(-INFINITY);
    __m256d s[4], q[4];
    for (int j = 0; j < 4; j++)
        s[j] = q[j] = _mm256_setzero_pd();
    __m256 vmx = ninf;
    size_t c = 0, i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int h = 0; h < 2; h++) {
            const float *p = (const float *)(const void *)(cd + i + 8 * (size_t)h);
            __m256 l = _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), 0xDD);
            c += (size_t)__builtin_popcount(
                (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(l, ninf, _CMP_GT_OQ)));
            vmx = _mm256_max_ps(vmx, l);
            for (int g = 0; g < 2; g++) {
                __m256d x =
                    _mm256_cvtps_pd(g ? _mm256_extractf128_ps(l, 1) : _mm256_castps256_ps128(l));
                __m256d k = _mm256_cmp_pd(x, ninfd, _CMP_GT_OQ);
                int j = 2 * h + g;
                s[j] = _mm256_add_pd(s[j], _mm256_and_pd(x, k));
                q[j] = _mm256_add_pd(q[j], _mm256_and_pd(_mm256_mul_pd(x, x), k));
            }
        }
    }
    double vs[4], vq[4];
    float vm[8];
    _mm256_storeu_pd(vs, _mm256_add_pd(_mm256_add_pd(s[0], s[1]), _mm256_add_pd(s[2], s[3])));
    _mm256_storeu_pd(vq, _mm256_add_pd(_mm256_add_pd(q[0], q[1]), _mm256_add_pd(q[2], q[3])));
    _mm256_storeu_ps(vm, vmx);
    float mx = -INFINITY;
    for (int j = 0; j < 8; j++)
        mx = vm[j] > mx ? vm[j] : mx;
    mo->count = c;
    mo->max = mx;
    mo->sum = (vs[0] + vs[1]) + (vs[2] + vs[3]);
    mo->sumsq = (vq[0] + vq[1]) + (vq[2] + vq[3]);
    sift__vzeroupper();
    moments_scalar(cd, i, n, mo);
}

/* moments_avx2 over a row of floats: sixteen a step, in two vectors of
 * eight, each -inf lane zeroed by a compare. */
__attribute__((target("avx2"))) static void moments_row_avx2(const float *x, size_t n,
                                                             sift__moments *mo)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256d ninfd = _mm256_set1_pd(-INFINITY);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    __m256 vmx = ninf;
    size_t c = 0, i = 0;
#define MOM_AVX2(s, q, v)                                                     \
    do {                                                                      \
        __m256d k_ = _mm256_cmp_pd((v), ninfd, _CMP_GT_OQ);                   \
        (s) = _mm256_add_pd((s), _mm256_and_pd((v), k_));                     \
        (q) = _mm256_add_pd((q), _mm256_and_pd(_mm256_mul_pd((v), (v)), k_)); \
    } while (0)
    for (; i + 16 <= n; i += 16) {
        __m256 l0 = _mm256_loadu_ps(x + i), l1 = _mm256_loadu_ps(x + i + 8);
        c += (size_t)__builtin_popcount(
                 (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(l0, ninf, _CMP_GT_OQ))) +
             (size_t)__builtin_popcount(
                 (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(l1, ninf, _CMP_GT_OQ)));
        vmx = _mm256_max_ps(vmx, _mm256_max_ps(l0, l1));
        MOM_AVX2(s0, q0, _mm256_cvtps_pd(_mm256_castps256_ps128(l0)));
        MOM_AVX2(s1, q1, _mm256_cvtps_pd(_mm256_extractf128_ps(l0, 1)));
        MOM_AVX2(s2, q2, _mm256_cvtps_pd(_mm256_castps256_ps128(l1)));
        MOM_AVX2(s3, q3, _mm256_cvtps_pd(_mm256_extractf128_ps(l1, 1)));
    }
#undef MOM_AVX2
    double vs[4], vq[4];
    float vm[8];
    _mm256_storeu_pd(vs, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    _mm256_storeu_pd(vq, _mm256_add_pd(_mm256_add_pd(q0, q1), _mm256_add_pd(q2, q3)));
    _mm256_storeu_ps(vm, vmx);
    float mx = -INFINITY;
    for (int j = 0; j < 8; j++)
        mx = vm[j] > mx ? vm[j] : mx;
    mo->count = c;
    mo->max = mx;
    mo->sum = (vs[0] + vs[1]) + (vs[2] + vs[3]);
    mo->sumsq = (vq[0] + vq[1]) + (vq[2] + vq[3]);
    sift__vzeroupper();
    moments_row_scalar(x, i, n, mo);
}

/* Unsigned w >= t as signed compares with the sign bits flipped: a lane
 * is below t when t > w; eight weights a step, any lane not below ends
 * the search. */
__attribute__((target("avx2"))) static size_t find_w_ge_avx2(const uint64_t *w, size_t i, size_t n,
                                                             uint64_t t)
{
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    const __m256i tv = _mm256_xor_si256(_mm256_set1_epi64x((long long)t), sign);
    for (; i + 8 <= n; i += 8) {
        __m256i a =
            _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(w + i)), sign);
        __m256i b =
            _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(w + i + 4)), sign);
        unsigned below =
            (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(tv, a))) |
            ((unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(tv, b))) << 4);
        if (below != 0xffu)
            return i + (size_t)__builtin_ctz(~below);
    }
    return find_w_ge_scalar(w, i, n, t);
}

/* The keep mask of bk[i..i+8) (bit l: bk[i + l] < bstar, or in bstar
 * and keep_eq says so, asked in order), by one unsigned compare (the
 * sign bits flipped) and one equality. */
__attribute__((target("avx2"))) static inline unsigned
keep_mask8_avx2(const sift_candidate *c, const uint32_t *bk, size_t i, __m256i bsf, __m256i bv,
                sift__keep_fn keep_eq, void *arg)
{
    const __m256i flip = _mm256_set1_epi32((int32_t)0x80000000u);
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(bk + i));
    unsigned keep = (unsigned)_mm256_movemask_ps(
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(bsf, _mm256_xor_si256(b, flip))));
    unsigned eq = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(b, bv)));
    for (; eq; eq &= eq - 1) {
        unsigned l = (unsigned)__builtin_ctz(eq);
        if (keep_eq(&c[i + l], arg))
            keep |= 1u << l;
    }
    return keep;
}

/* Both halves of eight candidates are loaded before either store, and
 * the stores land at j <= i: only read entries are overwritten. */
__attribute__((target("avx2"))) static size_t keep_below_avx2(sift_candidate *c, const uint32_t *bk,
                                                              size_t n, uint32_t bstar,
                                                              sift__keep_fn keep_eq, void *arg)
{
    const __m256i bv = _mm256_set1_epi32((int32_t)bstar);
    const __m256i bsf = _mm256_set1_epi32((int32_t)(bstar ^ 0x80000000u));
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        unsigned keep = keep_mask8_avx2(c, bk, i, bsf, bv, keep_eq, arg);
        if (keep)
            j += sift__compress8_store(c + j, c + i, keep);
    }
    return keep_below_scalar(c, bk, i, n, j, bstar, keep_eq, arg);
}

/* keep_below_avx2 moving the weights with the same permutes; the kept
 * weights' 32-bit halves go to two lane sums (masked by the keep bits). */
__attribute__((target("avx2"))) static size_t
keep_below_w_avx2(sift_candidate *c, uint64_t *w, const uint32_t *bk, size_t n, uint32_t bstar,
                  sift__keep_fn keep_eq, void *arg, uint64_t *lo, uint64_t *hi)
{
    const __m256i bv = _mm256_set1_epi32((int32_t)bstar);
    const __m256i bsf = _mm256_set1_epi32((int32_t)(bstar ^ 0x80000000u));
    __m256i slo = _mm256_setzero_si256(), shi = _mm256_setzero_si256();
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        unsigned keep = keep_mask8_avx2(c, bk, i, bsf, bv, keep_eq, arg);
        if (!keep)
            continue;
        sift__sum8_halves(w + i, keep, &slo, &shi);
        sift__compress8_store(w + j, w + i, keep);
        j += sift__compress8_store(c + j, c + i, keep);
    }
    *lo += sift__lanes4_sum(slo);
    *hi += sift__lanes4_sum(shi);
    return keep_below_w_scalar(c, w, bk, i, n, j, bstar, keep_eq, arg, lo, hi);
}

/* Eight candidates a vector: kept when their bucket is below bstar; in
 * bstar, keep_eq decides (lane by lane, in order). The kept ones are
 * compressed and stored whole at j (j <= i: only read candidates are
 * overwritten). */
/* The lanes of c[i..i+16) in bstar that keep_eq keeps (asked in order):
 * out of the loop's line, so that the loop keeps its vectors in
 * registers (a call clobbers them all). */
__attribute__((noinline)) static unsigned
keep_eq_lanes(const sift_candidate *c, size_t i, unsigned eq, sift__keep_fn keep_eq, void *arg)
{
    unsigned keep = 0;
    for (; eq; eq &= eq - 1) {
        unsigned l = (unsigned)__builtin_ctz(eq);
        if (keep_eq(&c[i + l], arg))
            keep |= 1u << l;
    }
    return keep;
}

/* Sixteen candidates a step, their buckets compared in one vector; the
 * kept ones of each eight are compressed and stored whole at j (j <= i:
 * only read candidates are overwritten), and nothing is stored for eight
 * that keep none (the usual case when few are kept). */
__attribute__((target("avx512f"))) static size_t keep_below_avx512(sift_candidate *c,
                                                                   const uint32_t *bk, size_t n,
                                                                   uint32_t bstar,
                                                                   sift__keep_fn keep_eq, void *arg)
{
    size_t i = 0, j = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i b = _mm512_loadu_si512((const void *)(bk + i));
        __m512i bv = _mm512_set1_epi32((int)bstar);
        unsigned keep = _mm512_cmplt_epu32_mask(b, bv);
        unsigned eq = _mm512_cmpeq_epu32_mask(b, bv);
        if (SIFT__UNLIKELY(eq))
            keep |= keep_eq_lanes(c, i, eq, keep_eq, arg);
        if (!keep)
            continue;
        __mmask8 k0 = (__mmask8)keep, k1 = (__mmask8)(keep >> 8);
        __m512i v0 = _mm512_loadu_si512((const void *)(c + i));
        __m512i v1 = _mm512_loadu_si512((const void *)(c + i + 8));
        _mm512_storeu_si512((void *)(c + j), _mm512_maskz_compress_epi64(k0, v0));
        j += (size_t)__builtin_popcount((unsigned)k0);
        _mm512_storeu_si512((void *)(c + j), _mm512_maskz_compress_epi64(k1, v1));
        j += (size_t)__builtin_popcount((unsigned)k1);
    }
    return keep_below_scalar(c, bk, i, n, j, bstar, keep_eq, arg);
}

/* keep_below_avx512 moving the weights: the same mask compresses w[i..i+8)
 * (stored at j <= i: only read weights are overwritten) and adds the kept
 * ones' 32-bit halves into two lane sums. */
__attribute__((target("avx512f"))) static size_t
keep_below_w_avx512(sift_candidate *c, uint64_t *w, const uint32_t *bk, size_t n, uint32_t bstar,
                    sift__keep_fn keep_eq, void *arg, uint64_t *lo, uint64_t *hi)
{
    const __m512i low32 = _mm512_set1_epi64(0xffffffffll);
    __m512i slo = _mm512_setzero_si512(), shi = _mm512_setzero_si512();
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        /* the buckets' compares as in keep_below_avx512, eight at a time */
        __m512i b =
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(bk + i)));
        __m512i bv = _mm512_set1_epi32((int)bstar);
        unsigned keep = _mm512_cmplt_epu32_mask(b, bv) & 0xffu; /* the upper lanes are not read */
        unsigned eq = _mm512_cmpeq_epu32_mask(b, bv) & 0xffu;
        if (SIFT__UNLIKELY(eq))
            keep |= keep_eq_lanes(c, i, eq, keep_eq, arg);
        if (!keep)
            continue;
        __mmask8 k = (__mmask8)keep;
        __m512i v = _mm512_loadu_si512((const void *)(c + i));
        __m512i wv = _mm512_loadu_si512((const void *)(w + i));
        _mm512_storeu_si512((void *)(c + j), _mm512_maskz_compress_epi64(k, v));
        _mm512_storeu_si512((void *)(w + j), _mm512_maskz_compress_epi64(k, wv));
        slo = _mm512_mask_add_epi64(slo, k, slo, _mm512_and_si512(wv, low32));
        shi = _mm512_mask_add_epi64(shi, k, shi, _mm512_srli_epi64(wv, 32));
        j += (size_t)__builtin_popcount((unsigned)k);
    }
    *lo += (uint64_t)_mm512_reduce_add_epi64(slo);
    *hi += (uint64_t)_mm512_reduce_add_epi64(shi);
    return keep_below_w_scalar(c, w, bk, i, n, j, bstar, keep_eq, arg, lo, hi);
}
#endif

void sift__score_buckets_at(int level, const sift_candidate *c, size_t n, float m, double LS,
                            double H, double scale, double top, uint32_t *bk)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512) {
        score_buckets_avx512(c, n, m, LS, H, scale, top, bk);
        return;
    }
    if (level >= SIFT__SIMD_AVX2) {
        score_buckets_avx2(c, n, m, LS, H, scale, top, bk);
        return;
    }
#endif
    (void)level;
    score_buckets_scalar(c, 0, n, m, LS, H, scale, top, bk);
}

void sift__score_buckets(const sift_candidate *c, size_t n, float m, double LS, double H,
                         double scale, double top, uint32_t *bk)
{
    sift__score_buckets_at(sift__simd()->level, c, n, m, LS, H, scale, top, bk);
}

size_t sift__find_eq_u32_at(int level, const uint32_t *bk, size_t i, size_t n, uint32_t b)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512)
        return find_eq_avx512(bk, i, n, b);
    if (level >= SIFT__SIMD_AVX2)
        return find_eq_avx2(bk, i, n, b);
#endif
    (void)level;
    return find_eq_scalar(bk, i, n, b);
}

size_t sift__find_eq_u32(const uint32_t *bk, size_t i, size_t n, uint32_t b)
{
    return sift__find_eq_u32_at(sift__simd()->level, bk, i, n, b);
}

void sift__moments_of_at(int level, const sift_candidate *cd, size_t n, sift__moments *mo)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512) {
        moments_avx512(cd, n, mo);
        return;
    }
    if (level >= SIFT__SIMD_AVX2) {
        moments_avx2(cd, n, mo);
        return;
    }
#endif
    (void)level;
    mo->count = 0;
    mo->max = -INFINITY;
    mo->sum = mo->sumsq = 0.0;
    moments_scalar(cd, 0, n, mo);
}

void sift__moments_of(const sift_candidate *cd, size_t n, sift__moments *mo)
{
    sift__moments_of_at(sift__simd()->level, cd, n, mo);
}

void sift__moments_row_at(int level, const float *x, size_t n, sift__moments *mo)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512) {
        moments_row_avx512(x, n, mo);
        return;
    }
    if (level >= SIFT__SIMD_AVX2) {
        moments_row_avx2(x, n, mo);
        return;
    }
#endif
    (void)level;
    mo->count = 0;
    mo->max = -INFINITY;
    mo->sum = mo->sumsq = 0.0;
    moments_row_scalar(x, 0, n, mo);
}

void sift__moments_row(const float *x, size_t n, sift__moments *mo)
{
    sift__moments_row_at(sift__simd()->level, x, n, mo);
}

size_t sift__find_w_ge_at(int level, const uint64_t *w, size_t i, size_t n, uint64_t t)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512)
        return find_w_ge_avx512(w, i, n, t);
    if (level >= SIFT__SIMD_AVX2)
        return find_w_ge_avx2(w, i, n, t);
#endif
    (void)level;
    return find_w_ge_scalar(w, i, n, t);
}

size_t sift__find_w_ge(const uint64_t *w, size_t i, size_t n, uint64_t t)
{
    return sift__find_w_ge_at(sift__simd()->level, w, i, n, t);
}

size_t sift__keep_below_at(int level, sift_candidate *c, const uint32_t *bk, size_t n,
                           uint32_t bstar, sift__keep_fn keep_eq, void *arg)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512)
        return keep_below_avx512(c, bk, n, bstar, keep_eq, arg);
    if (level >= SIFT__SIMD_AVX2)
        return keep_below_avx2(c, bk, n, bstar, keep_eq, arg);
#endif
    (void)level;
    return keep_below_scalar(c, bk, 0, n, 0, bstar, keep_eq, arg);
}

size_t sift__keep_below(sift_candidate *c, const uint32_t *bk, size_t n, uint32_t bstar,
                        sift__keep_fn keep_eq, void *arg)
{
    return sift__keep_below_at(sift__simd()->level, c, bk, n, bstar, keep_eq, arg);
}

size_t sift__keep_below_w_at(int level, sift_candidate *c, uint64_t *w, const uint32_t *bk,
                             size_t n, uint32_t bstar, sift__keep_fn keep_eq, void *arg,
                             sift__u128 *kept)
{
    uint64_t lo = 0, hi = 0;
    size_t j;
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512)
        j = keep_below_w_avx512(c, w, bk, n, bstar, keep_eq, arg, &lo, &hi);
    else if (level >= SIFT__SIMD_AVX2)
        j = keep_below_w_avx2(c, w, bk, n, bstar, keep_eq, arg, &lo, &hi);
    else
#endif
        j = keep_below_w_scalar(c, w, bk, 0, n, 0, bstar, keep_eq, arg, &lo, &hi);
    (void)level;
    *kept = sift__u128_halves(lo, hi);
    return j;
}

size_t sift__keep_below_w(sift_candidate *c, uint64_t *w, const uint32_t *bk, size_t n,
                          uint32_t bstar, sift__keep_fn keep_eq, void *arg, sift__u128 *kept)
{
    return sift__keep_below_w_at(sift__simd()->level, c, w, bk, n, bstar, keep_eq, arg, kept);
}

/* ------------------------------------------------------------------ */
/* mirostat's cuts and the drawn token's place                         */
/* ------------------------------------------------------------------ */

/* The definitions. keep_w_ge_scalar stores every candidate at j, kept or
 * not (branch-free); only c[0..j) and w[0..j) are the result. The kept
 * weights' 32-bit halves are summed apart (each sum stays below 2^63 for
 * n < 2^31) and joined by the caller. */
static size_t keep_w_ge_scalar(sift_candidate *c, uint64_t *w, size_t i, size_t n, size_t j,
                               uint64_t ws, uint64_t *lo, uint64_t *hi)
{
    uint64_t sl = 0, sh = 0;
    for (; i < n; i++) {
        uint64_t x = w[i], keep = x >= ws;
        sl += (x & 0xffffffffu) & -keep;
        sh += (x >> 32) & -keep;
        w[j] = x;
        c[j] = c[i];
        j += (size_t)keep;
    }
    *lo += sl;
    *hi += sh;
    return j;
}

static size_t find_id_scalar(const sift_candidate *c, size_t i, size_t n, int32_t id)
{
    while (i < n && c[i].id != id)
        i++;
    return i;
}

static size_t find_logit_eq_scalar(const sift_candidate *c, size_t i, size_t n, float m)
{
    while (i < n && !(c[i].logit == m))
        i++;
    return i;
}

#ifdef SIFT__KX86
/* AVX2: four weights (or candidates) a step, skipped when none is kept;
 * unsigned order by a signed compare with the sign bits flipped. */
__attribute__((target("avx2"))) static size_t
keep_w_ge_avx2(sift_candidate *c, uint64_t *w, size_t n, uint64_t ws, uint64_t *lo, uint64_t *hi)
{
    const __m256i flip = _mm256_set1_epi64x(INT64_MIN);
    const __m256i wv = _mm256_set1_epi64x((long long)(ws ^ 0x8000000000000000ull));
    size_t i = 0, j = 0;
    const __m256i low32 = _mm256_set1_epi64x(0xffffffffll);
    __m256i slo = _mm256_setzero_si256(), shi = _mm256_setzero_si256();
    for (; i + 4 <= n; i += 4) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(w + i));
        unsigned k = 0xfu & ~(unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(
                                _mm256_cmpgt_epi64(wv, _mm256_xor_si256(x, flip))));
        if (!k)
            continue;
        /* the kept ones moved to the front by one permute each for the
         * candidates and the weights (compress_avx2.h), their halves
         * summed in the lanes */
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(c + i));
        __m256i xk = _mm256_and_si256(x, sift__mask4_avx2(k));
        slo = _mm256_add_epi64(slo, _mm256_and_si256(xk, low32));
        shi = _mm256_add_epi64(shi, _mm256_srli_epi64(xk, 32));
        sift__compress4_store(c + j, v, k);
        sift__compress4_store(w + j, x, k);
        j += (size_t)__builtin_popcount(k);
    }
    *lo += sift__lanes4_sum(slo);
    *hi += sift__lanes4_sum(shi);
    sift__vzeroupper();
    return keep_w_ge_scalar(c, w, i, n, j, ws, lo, hi);
}

__attribute__((target("avx2"))) static size_t find_id_avx2(const sift_candidate *c, size_t n,
                                                           int32_t id)
{
    const __m256i iv = _mm256_set1_epi32(id);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(c + i));
        /* bits 0, 2, 4, 6 of the byte mask's 32-bit lanes: the ids */
        unsigned k = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, iv)));
        if (k & 0x55u)
            return i + (size_t)__builtin_ctz(k & 0x55u) / 2;
    }
    return find_id_scalar(c, i, n, id);
}

__attribute__((target("avx2"))) static size_t find_logit_eq_avx2(const sift_candidate *c, size_t i,
                                                                 size_t n, float m)
{
    const __m256 mv = _mm256_set1_ps(m);
    for (; i + 4 <= n; i += 4) {
        __m256 v = _mm256_loadu_ps((const float *)(const void *)(c + i));
        /* bits 1, 3, 5, 7: the logits (an id's bits may equal anything) */
        unsigned k = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, mv, _CMP_EQ_OQ)) & 0xaau;
        if (k)
            return i + (size_t)__builtin_ctz(k) / 2;
    }
    return find_logit_eq_scalar(c, i, n, m);
}

/* AVX-512F: eight a vector; the kept ones compressed and stored whole at
 * j <= i (only read entries are overwritten). */
__attribute__((target("avx512f"))) static size_t
keep_w_ge_avx512(sift_candidate *c, uint64_t *w, size_t n, uint64_t ws, uint64_t *lo, uint64_t *hi)
{
    const __m512i wv = _mm512_set1_epi64((long long)ws), lo32 = _mm512_set1_epi64(0xffffffff);
    __m512i al = _mm512_setzero_si512(), ah = al;
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i x = _mm512_loadu_si512((const void *)(w + i));
        __mmask8 k = _mm512_cmpge_epu64_mask(x, wv);
        if (k) {
            __m512i v = _mm512_loadu_si512((const void *)(c + i));
            al = _mm512_mask_add_epi64(al, k, al, _mm512_and_si512(x, lo32));
            ah = _mm512_mask_add_epi64(ah, k, ah, _mm512_srli_epi64(x, 32));
            _mm512_storeu_si512((void *)(w + j), _mm512_maskz_compress_epi64(k, x));
            _mm512_storeu_si512((void *)(c + j), _mm512_maskz_compress_epi64(k, v));
            j += (size_t)__builtin_popcount((unsigned)k);
        }
    }
    *lo += (uint64_t)_mm512_reduce_add_epi64(al);
    *hi += (uint64_t)_mm512_reduce_add_epi64(ah);
    sift__vzeroupper();
    return keep_w_ge_scalar(c, w, i, n, j, ws, lo, hi);
}

__attribute__((target("avx512f"))) static size_t find_id_avx512(const sift_candidate *c, size_t n,
                                                                int32_t id)
{
    const __m512i iv = _mm512_set1_epi32(id);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i v = _mm512_loadu_si512((const void *)(c + i));
        unsigned k = (unsigned)_mm512_cmpeq_epi32_mask(v, iv) & 0x5555u; /* the ids */
        if (k)
            return i + (size_t)__builtin_ctz(k) / 2;
    }
    return find_id_scalar(c, i, n, id);
}

__attribute__((target("avx512f"))) static size_t find_logit_eq_avx512(const sift_candidate *c,
                                                                      size_t i, size_t n, float m)
{
    const __m512 mv = _mm512_set1_ps(m);
    for (; i + 8 <= n; i += 8) {
        __m512 v = _mm512_loadu_ps((const float *)(const void *)(c + i));
        unsigned k = (unsigned)_mm512_cmp_ps_mask(v, mv, _CMP_EQ_OQ) & 0xaaaau; /* logits */
        if (k)
            return i + (size_t)__builtin_ctz(k) / 2;
    }
    return find_logit_eq_scalar(c, i, n, m);
}
#endif

size_t sift__keep_w_ge_at(int level, sift_candidate *c, uint64_t *w, size_t n, uint64_t ws,
                          sift__u128 *kept)
{
    uint64_t lo = 0, hi = 0;
    size_t j;
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512)
        j = keep_w_ge_avx512(c, w, n, ws, &lo, &hi);
    else if (level >= SIFT__SIMD_AVX2)
        j = keep_w_ge_avx2(c, w, n, ws, &lo, &hi);
    else
#endif
        j = keep_w_ge_scalar(c, w, 0, n, 0, ws, &lo, &hi);
    (void)level;
    *kept = sift__u128_halves(lo, hi);
    return j;
}

size_t sift__keep_w_ge(sift_candidate *c, uint64_t *w, size_t n, uint64_t ws, sift__u128 *kept)
{
    return sift__keep_w_ge_at(sift__simd()->level, c, w, n, ws, kept);
}

/* typical's band pass (sift__bucket_band): the tokens with a bucket
 * below lo summed (32-bit halves, so no carries for n < 2^32) and
 * counted, those in [lo, lo + span] listed with their weights. Branch-
 * free: every token is written at the list's end, which moves only for
 * a listed one (m <= i keeps it inside the n entries). Continues at i. */
static void bucket_band_scalar(const uint32_t *bk, const uint64_t *w, size_t i, size_t n,
                               uint32_t lo, uint32_t span, sift__band_sums *o, uint64_t *bidx,
                               uint64_t *bw)
{
    uint64_t sl = 0, sh = 0;
    size_t na = 0, m = o->m;
    for (; i < n; i++) {
        uint32_t b = bk[i];
        uint64_t x = w[i], a = b < lo;
        sl += (x & 0xffffffffu) & (0 - a);
        sh += (x >> 32) & (0 - a);
        na += (size_t)a;
        bidx[m] = i;
        bw[m] = x;
        m += (size_t)((uint32_t)(b - lo) <= span);
    }
    o->lo += sl;
    o->hi += sh;
    o->below += na;
    o->m = m;
}

#ifdef SIFT__KX86
/* Four at a time: buckets widened to 64-bit lanes (values below 2^31,
 * so signed compares order them), the listed lanes moved to the front
 * by compress_avx2.h's permute and all four stored. */
__attribute__((target("avx2,popcnt"))) static void
bucket_band_avx2(const uint32_t *bk, const uint64_t *w, size_t n, uint32_t lo, uint32_t span,
                 sift__band_sums *o, uint64_t *bidx, uint64_t *bw)
{
    const __m256i lov = _mm256_set1_epi64x((int64_t)lo);
    const __m256i lom1 = _mm256_set1_epi64x((int64_t)lo - 1);
    const __m256i hip1 = _mm256_set1_epi64x((int64_t)lo + (int64_t)span + 1);
    const __m256i lo32 = _mm256_set1_epi64x(0xffffffff), four = _mm256_set1_epi64x(4);
    __m256i acc_lo = _mm256_setzero_si256(), acc_hi = acc_lo, cnt = acc_lo;
    __m256i iota = _mm256_set_epi64x(3, 2, 1, 0);
    size_t m = o->m, i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256i b = _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(const void *)(bk + i)));
        __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(w + i));
        __m256i ga = _mm256_cmpgt_epi64(lov, b); /* below */
        __m256i gb = _mm256_and_si256(_mm256_cmpgt_epi64(b, lom1), _mm256_cmpgt_epi64(hip1, b));
        acc_lo = _mm256_add_epi64(acc_lo, _mm256_and_si256(ga, _mm256_and_si256(wv, lo32)));
        acc_hi = _mm256_add_epi64(acc_hi, _mm256_and_si256(ga, _mm256_srli_epi64(wv, 32)));
        cnt = _mm256_sub_epi64(cnt, ga);
        unsigned k = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(gb));
        if (k) {
            sift__compress4_store(bidx + m, iota, k);
            sift__compress4_store(bw + m, wv, k);
            m += (size_t)__builtin_popcount(k);
        }
        iota = _mm256_add_epi64(iota, four);
    }
    o->lo += sift__lanes4_sum(acc_lo);
    o->hi += sift__lanes4_sum(acc_hi);
    o->below += (size_t)sift__lanes4_sum(cnt);
    o->m = m;
    sift__vzeroupper();
    bucket_band_scalar(bk, w, i, n, lo, span, o, bidx, bw);
}

/* Eight at a time: the listed lanes compressed and all eight stored. */
__attribute__((target("avx512f,popcnt"))) static void
bucket_band_avx512(const uint32_t *bk, const uint64_t *w, size_t n, uint32_t lo, uint32_t span,
                   sift__band_sums *o, uint64_t *bidx, uint64_t *bw)
{
    const __m512i lov = _mm512_set1_epi64((int64_t)lo), spv = _mm512_set1_epi64((int64_t)span);
    const __m512i lo32 = _mm512_set1_epi64(0xffffffff), eight = _mm512_set1_epi64(8);
    __m512i acc_lo = _mm512_setzero_si512(), acc_hi = acc_lo;
    __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    size_t m = o->m, na = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i b =
            _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(const void *)(bk + i)));
        __m512i wv = _mm512_loadu_si512((const void *)(w + i));
        __mmask8 ka = _mm512_cmplt_epu64_mask(b, lov);
        __mmask8 kb = _mm512_cmple_epu64_mask(_mm512_sub_epi64(b, lov), spv);
        acc_lo = _mm512_mask_add_epi64(acc_lo, ka, acc_lo, _mm512_and_si512(wv, lo32));
        acc_hi = _mm512_mask_add_epi64(acc_hi, ka, acc_hi, _mm512_srli_epi64(wv, 32));
        na += (size_t)__builtin_popcount((unsigned)ka);
        if (kb) {
            _mm512_storeu_si512((void *)(bidx + m), _mm512_maskz_compress_epi64(kb, iota));
            _mm512_storeu_si512((void *)(bw + m), _mm512_maskz_compress_epi64(kb, wv));
            m += (size_t)__builtin_popcount((unsigned)kb);
        }
        iota = _mm512_add_epi64(iota, eight);
    }
    o->lo += (uint64_t)_mm512_reduce_add_epi64(acc_lo);
    o->hi += (uint64_t)_mm512_reduce_add_epi64(acc_hi);
    o->below += na;
    o->m = m;
    sift__vzeroupper();
    bucket_band_scalar(bk, w, i, n, lo, span, o, bidx, bw);
}
#endif

void sift__bucket_band_at(int level, const uint32_t *bk, const uint64_t *w, size_t n, uint32_t lo,
                          uint32_t hi, sift__band_sums *o, uint64_t *bidx, uint64_t *bw)
{
    o->lo = o->hi = 0;
    o->below = o->m = 0;
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512 && __builtin_cpu_supports("popcnt")) {
        bucket_band_avx512(bk, w, n, lo, hi - lo, o, bidx, bw);
        return;
    }
    if (level >= SIFT__SIMD_AVX2 && __builtin_cpu_supports("popcnt")) {
        bucket_band_avx2(bk, w, n, lo, hi - lo, o, bidx, bw);
        return;
    }
#endif
    (void)level;
    bucket_band_scalar(bk, w, 0, n, lo, hi - lo, o, bidx, bw);
}

void sift__bucket_band(const uint32_t *bk, const uint64_t *w, size_t n, uint32_t lo, uint32_t hi,
                       sift__band_sums *o, uint64_t *bidx, uint64_t *bw)
{
    sift__bucket_band_at(sift__simd()->level, bk, w, n, lo, hi, o, bidx, bw);
}

size_t sift__find_id_at(int level, const sift_candidate *c, size_t n, int32_t id)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512)
        return find_id_avx512(c, n, id);
    if (level >= SIFT__SIMD_AVX2)
        return find_id_avx2(c, n, id);
#endif
    (void)level;
    return find_id_scalar(c, 0, n, id);
}

size_t sift__find_id(const sift_candidate *c, size_t n, int32_t id)
{
    return sift__find_id_at(sift__simd()->level, c, n, id);
}

size_t sift__find_logit_eq_at(int level, const sift_candidate *c, size_t i, size_t n, float m)
{
    level = sift__simd_ops_at(level)->level;
#ifdef SIFT__KX86
    if (level >= SIFT__SIMD_AVX512)
        return find_logit_eq_avx512(c, i, n, m);
    if (level >= SIFT__SIMD_AVX2)
        return find_logit_eq_avx2(c, i, n, m);
#endif
    (void)level;
    return find_logit_eq_scalar(c, i, n, m);
}

size_t sift__find_logit_eq(const sift_candidate *c, size_t i, size_t n, float m)
{
    return sift__find_logit_eq_at(sift__simd()->level, c, i, n, m);
}

size_t sift__canon_first(const sift_candidate *c, size_t n, float m, int ordered)
{
    size_t bi = sift__find_logit_eq(c, 0, n, m);
    for (size_t i = bi; !ordered && i < n; i = sift__find_logit_eq(c, i + 1, n, m))
        bi = c[i].id < c[bi].id ? i : bi;
    return bi;
}

/*
 * fdraw.c - the float-certified draw (docs/analyzer.md, "Float-certified
 * draw"): dist's token on a large array decided from float weights; with
 * the same machinery top_p's cut (sift__fcut) and XTC's "nothing to
 * remove" (sift__fxtc_none), whose float weights the next stage reuses.
 *
 * dist's definition weighs every token exactly (w = trunc(2^62 E(x)),
 * E = sift__expf) and walks canonical order to the first inclusive prefix
 * above T = floor(W U / 2^64). Here every token gets a float weight
 * F(x) instead (about a third of the exact kernel's cost), the draw is
 * located in the float sums, and the theorem's two tests (a) and (b)
 * decide whether every set of exact weights within the proven bounds
 * selects the same token. When they do, that token is the exact pass's,
 * bit for bit, and the caller advances the RNG by the one output dist
 * uses; when they do not (or any precondition fails), nothing has
 * changed but scratch and the caller runs the exact pass: a fallback is
 * today's step.
 *
 * F, for a float x (the same x = fl(l - m) the exact path feeds to E):
 *   x  = max(x, -44)                     (NaN: the pass reports it)
 *   k  = the integer nearest x * L32, L32 = fl(32/ln2), by adding and
 *        subtracting 1.5 * 2^23 in float
 *   r  = fma(-k, C2, fma(-k, C1, x)),    C1 + C2 = ln2/32 to 2^-58
 *   q  = fma(fma(fma(r, 1/24, 1/6), r, 1/2) * r, r, r)   (e^r - 1)
 *   F  = (TH[j] + fma(TH[j], q, TL[j])) * 2^e,  k = 32 e + j
 * with TH[j] + TL[j] = 2^(j/32) to 2^-47. Every operation is a correctly
 * rounded float operation, so the scalar form (fmaf), the AVX2 and the
 * AVX-512 forms give the same bits; check_fdraw compares them. The relative error
 * against e^x is at most EPS_F = 1.125 * 2^-24 for every float x in
 * [-44, 0] (analyzer.md has the derivation; make check-fexp checks every
 * one of those floats against the C library's double exp, and
 * check_fdraw a dense sweep against expl).
 * Below -44 both weights are below 1 (Lemma 2's slack).
 *
 * The location: the float weights are stored; a sample of every 16th
 * token and every heavy one (at least 1/4096 of the float total) puts
 * the target in a band of logit buckets (bucket = min(floor((m - l) s),
 * HB - 1), s a power of two; non-increasing along canonical order, so
 * every token of a lower bucket is ahead of every token of a higher
 * one); one vector pass sums the float weights above the band and
 * gathers the band; a histogram of the band's sub-buckets and a weighted
 * quickselect in the crossing one find the token c whose float prefix
 * crosses the target. Only the certification is trusted: the sums
 * it tests are formed in a fixed bracketing whose error Lemma 3 bounds.
 */
#include <math.h>

#include "../sift_internal.h"
#include "simd.h"

#if defined(__x86_64__) && !defined(SIFT_NO_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define SIFT__FD_X86 1
#include <immintrin.h>

#include "compress_avx2.h"
#define FD_TARGET "avx512f,avx512dq,fma,popcnt"
#define FD_TARGET2 "avx2,fma,popcnt"
#endif

/* 2^(j/32) = FD_TH[j] + FD_TL[j], FD_TH[j] the float nearest to it and
 * FD_TL[j] the float nearest to the rest (generated with 80-digit
 * decimal arithmetic; |FD_TH + FD_TL - 2^(j/32)| <= 2^-47). */
static const float FD_TH[32] = {
    0x1p+0f,        0x1.059b0ep+0f, 0x1.0b5586p+0f, 0x1.11301ep+0f, 0x1.172b84p+0f, 0x1.1d4874p+0f,
    0x1.2387a6p+0f, 0x1.29e9ep+0f,  0x1.306fep+0f,  0x1.371a74p+0f, 0x1.3dea64p+0f, 0x1.44e086p+0f,
    0x1.4bfdaep+0f, 0x1.5342b6p+0f, 0x1.5ab07ep+0f, 0x1.6247ecp+0f, 0x1.6a09e6p+0f, 0x1.71f75ep+0f,
    0x1.7a1148p+0f, 0x1.82589ap+0f, 0x1.8ace54p+0f, 0x1.93737cp+0f, 0x1.9c4918p+0f, 0x1.a5503cp+0f,
    0x1.ae89fap+0f, 0x1.b7f77p+0f,  0x1.c199bep+0f, 0x1.cb720ep+0f, 0x1.d5818ep+0f, 0x1.dfc974p+0f,
    0x1.ea4afap+0f, 0x1.f50766p+0f};
static const float FD_TL[32] = {0.0f,
                                -0x1.9d4f52p-25f,
                                0x1.9f3122p-25f,
                                -0x1.fdb496p-25f,
                                -0x1.c15742p-27f,
                                -0x1.d2e8cap-25f,
                                0x1.ceac48p-25f,
                                -0x1.5c0424p-25f,
                                0x1.4636e2p-25f,
                                -0x1.18aac6p-25f,
                                0x1.824684p-25f,
                                0x1.8624b4p-30f,
                                -0x1.593abcp-25f,
                                -0x1.2c561p-25f,
                                -0x1.5bd5ecp-27f,
                                -0x1.f8b55p-25f,
                                0x1.9fcef4p-26f,
                                0x1.1d8beep-25f,
                                -0x1.829fdp-25f,
                                -0x1.accc7cp-26f,
                                0x1.15506ep-27f,
                                -0x1.e64744p-25f,
                                0x1.51f848p-27f,
                                -0x1.b83b54p-25f,
                                -0x1.a94b14p-26f,
                                -0x1.a09438p-25f,
                                -0x1.3d56b2p-27f,
                                -0x1.8837ccp-27f,
                                -0x1.822dbcp-27f,
                                -0x1.908c94p-25f,
                                0x1.52486cp-27f,
                                -0x1.246ebp-26f};

#define FD_L32 0x1.715476p+5f   /* fl(32/ln2) */
#define FD_C1 0x1.62e43p-6f     /* fl(ln2/32) */
#define FD_C2 (-0x1.05c61p-34f) /* fl(ln2/32 - C1) */
#define FD_C6 0x1.555556p-3f    /* fl(1/6) */
#define FD_C24 0x1.555556p-5f   /* fl(1/24) */
#define FD_SHIFT 0x1.8p23f      /* 1.5 * 2^23: adding it rounds to an integer */
#define FD_LOW (-44.0f)
/* The vector forms read k off t = fl(x L32) + FD_SHIFT = 1.5 * 2^23 + k
 * (exact: k is an integer in [-2031, 0], so t lies in [2^23, 2^24),
 * whose ulp is 1): t's bits are 0x4b400000 + k, whose bits 0-4 are
 * j = k mod 32 (0x4b400000's are zero) and which shifted left by 18
 * is k 2^18 mod 2^32 (0x4b400000's set bits leave); clearing its low
 * 23 bits gives floor(k / 32) 2^23 = e 2^23 mod 2^32, the term the
 * scalar form adds to z's bits. No conversion, no mask for j. */
#define FD_E_MASK ((int32_t)0xff800000u)
/* Every FD_SAMPLE-th token goes into the band's estimate (the float pass
 * writes them out). */
#define FD_SAMPLE 16

float sift__fexp(float x)
{
    x = x > FD_LOW ? x : FD_LOW;
    float t = x * FD_L32;
    float kf = (t + FD_SHIFT) - FD_SHIFT;
    int32_t k = (int32_t)kf;
    float r = fmaf(-kf, FD_C1, x);
    r = fmaf(-kf, FD_C2, r);
    float p = fmaf(r, FD_C24, FD_C6);
    p = fmaf(p, r, 0.5f);
    p = p * r;
    float q = fmaf(p, r, r);
    int32_t j = k & 31, e = k >> 5; /* arithmetic shift: floor(k / 32) */
    float z = FD_TH[j] + fmaf(FD_TH[j], q, FD_TL[j]);
    uint32_t u;
    memcpy(&u, &z, sizeof u);
    u += (uint32_t)e << 23; /* z in [0.99, 2), e >= -64: stays normal */
    memcpy(&z, &u, sizeof z);
    return z;
}

/* ------------------------------------------------------------------ */
/* The float pass                                                      */
/* ------------------------------------------------------------------ */

/* Where the logits come from: an array of candidates, or a whole row
 * (row != NULL; token i has id i). */
typedef struct fd_src {
    const sift_candidate *c;
    const float *row;
} fd_src;

static inline float fd_logit(const fd_src *src, size_t i)
{
    return src->row ? src->row[i] : src->c[i].logit;
}

static inline int32_t fd_id(const fd_src *src, size_t i)
{
    return src->row ? (int32_t)i : src->c[i].id;
}

/* vf[i] = F(logit i - m) for i in [i0, n); returns their sum in double
 * (sequential), NaN when a difference is NaN; *xlow = the smallest
 * max(x, -44). With samp (2 ceil(n / 16) floats), the sample for the
 * band's estimate: samp[j] = logit 16j and samp[ns + j] = vf[16j],
 * ns = ceil(n / 16). */
static double fexp_pass_scalar(const fd_src *src, size_t i0, size_t n, float m, float *vf,
                               float *xlow, float *samp)
{
    size_t ns = (n + FD_SAMPLE - 1) / FD_SAMPLE;
    double s = 0.0;
    float lo = 0.0f;
    int bad = 0;
    for (size_t i = i0; i < n; i++) {
        float x = fd_logit(src, i) - m;
        bad |= x != x;
        float v = sift__fexp(x);
        lo = x < lo ? (x > FD_LOW ? x : FD_LOW) : lo;
        vf[i] = v;
        if (samp && i % FD_SAMPLE == 0) {
            samp[i / FD_SAMPLE] = fd_logit(src, i);
            samp[ns + i / FD_SAMPLE] = v;
        }
        s += (double)v;
    }
    *xlow = lo;
    return bad ? NAN : s;
}

#ifdef SIFT__FD_X86
__attribute__((target(FD_TARGET), always_inline)) static inline __m512
fd_load_logits16(const sift_candidate *c)
{
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512 a = _mm512_loadu_ps((const float *)(const void *)c);
    __m512 b = _mm512_loadu_ps((const float *)(const void *)(c + 8));
    return _mm512_permutex2var_ps(a, odd, b);
}

/* Logits i .. i + 15 of src. */
__attribute__((target(FD_TARGET), always_inline)) static inline __m512 fd_load16(const fd_src *src,
                                                                                 size_t i)
{
    return src->row ? _mm512_loadu_ps(src->row + i) : fd_load_logits16(src->c + i);
}

/* sift__fexp sixteen lanes at a time, the same operations in the same
 * order (x already clamped). */
__attribute__((target(FD_TARGET), always_inline)) static inline __m512
fexp16(__m512 x, __m512 th0, __m512 th1, __m512 tl0, __m512 tl1)
{
    const __m512 shift = _mm512_set1_ps(FD_SHIFT);
    __m512 t = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(FD_L32)), shift);
    __m512 kf = _mm512_sub_ps(t, shift);
    __m512i k = _mm512_castps_si512(t); /* 0x4b400000 + k (FD_E_MASK) */
    __m512 r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(FD_C1), x);
    r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(FD_C2), r);
    __m512 p = _mm512_fmadd_ps(r, _mm512_set1_ps(FD_C24), _mm512_set1_ps(FD_C6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_mul_ps(p, r);
    __m512 q = _mm512_fmadd_ps(p, r, r);
    __m512 th = _mm512_permutex2var_ps(th0, k, th1); /* index: bits 0-4, j */
    __m512 tl = _mm512_permutex2var_ps(tl0, k, tl1);
    __m512 z = _mm512_add_ps(th, _mm512_fmadd_ps(th, q, tl));
    __m512i e = _mm512_and_si512(_mm512_slli_epi32(k, 18), _mm512_set1_epi32(FD_E_MASK));
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(z), e));
}

/* The scalar tail (the last n mod 16 tokens) runs first, before any
 * wide operation, so that no SSE code runs after the vector loop. */
__attribute__((target(FD_TARGET))) static double
fexp_pass_avx512(const fd_src *src, size_t n, float m, float *vf, float *xlow, float *samp)
{
    size_t nv = n - n % 16, ns = (n + 15) / 16;
    float tlo;
    double tail = fexp_pass_scalar(src, nv, n, m, vf, &tlo, samp);
    const __m512 th0 = _mm512_loadu_ps(FD_TH), th1 = _mm512_loadu_ps(FD_TH + 16);
    const __m512 tl0 = _mm512_loadu_ps(FD_TL), tl1 = _mm512_loadu_ps(FD_TL + 16);
    const __m512 mv = _mm512_set1_ps(m), low = _mm512_set1_ps(FD_LOW);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    __m512 lo = _mm512_set1_ps(tlo);
    __mmask16 nan = 0;
    for (size_t i = 0; i < nv; i += 16) {
        __m512 l = fd_load16(src, i);
        __m512 x = _mm512_sub_ps(l, mv);
        nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        x = _mm512_max_ps(x, low); /* a NaN lane gives -44 (reported above) */
        lo = _mm512_min_ps(lo, x);
        __m512 v = fexp16(x, th0, th1, tl0, tl1);
        _mm512_storeu_ps(vf + i, v);
        if (samp) {
            _mm_store_ss(samp + i / 16, _mm512_castps512_ps128(l));
            _mm_store_ss(samp + ns + i / 16, _mm512_castps512_ps128(v));
        }
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        s1 = _mm512_add_pd(
            s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
    }
    *xlow = _mm512_reduce_min_ps(lo);
    double sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) + tail;
    sift__vzeroupper();
    return nan || tail != tail ? NAN : sum;
}

/* The logits of c[0..8): the odd 32-bit lanes of two loads, put back in
 * order. */
__attribute__((target(FD_TARGET2), always_inline)) static inline __m256
fd_load_logits8(const sift_candidate *c)
{
    __m256 a = _mm256_loadu_ps((const float *)(const void *)c);
    __m256 b = _mm256_loadu_ps((const float *)(const void *)(c + 4));
    __m256 odd = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)); /* 0 1 4 5 | 2 3 6 7 */
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* Logits i .. i + 7 of src. */
__attribute__((target(FD_TARGET2), always_inline)) static inline __m256 fd_load8(const fd_src *src,
                                                                                 size_t i)
{
    return src->row ? _mm256_loadu_ps(src->row + i) : fd_load_logits8(src->c + i);
}

/* t[j] for the index j in [0, 32) of each lane, the table in four
 * vectors of eight: a permute of each, then blends on bits 3 and 4. */
__attribute__((target(FD_TARGET2), always_inline)) static inline __m256 fd_lookup8(const __m256 *t,
                                                                                   __m256i j)
{
    __m256 b3 = _mm256_castsi256_ps(_mm256_slli_epi32(j, 28));
    __m256 b4 = _mm256_castsi256_ps(_mm256_slli_epi32(j, 27));
    __m256 lo =
        _mm256_blendv_ps(_mm256_permutevar8x32_ps(t[0], j), _mm256_permutevar8x32_ps(t[1], j), b3);
    __m256 hi =
        _mm256_blendv_ps(_mm256_permutevar8x32_ps(t[2], j), _mm256_permutevar8x32_ps(t[3], j), b3);
    return _mm256_blendv_ps(lo, hi, b4);
}

/* sift__fexp eight lanes at a time, the same operations in the same
 * order (x already clamped); th and tl: FD_TH and FD_TL in four vectors
 * each. */
__attribute__((target(FD_TARGET2), always_inline)) static inline __m256
fexp8(__m256 x, const __m256 *th, const __m256 *tl)
{
    const __m256 shift = _mm256_set1_ps(FD_SHIFT);
    __m256 t = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(FD_L32)), shift);
    __m256 kf = _mm256_sub_ps(t, shift);
    __m256i k = _mm256_castps_si256(t); /* 0x4b400000 + k (FD_E_MASK) */
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(FD_C1), x);
    r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(FD_C2), r);
    __m256 p = _mm256_fmadd_ps(r, _mm256_set1_ps(FD_C24), _mm256_set1_ps(FD_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_mul_ps(p, r);
    __m256 q = _mm256_fmadd_ps(p, r, r);
    __m256 h = fd_lookup8(th, k), l = fd_lookup8(tl, k); /* bits 0-4: j */
    __m256 z = _mm256_add_ps(h, _mm256_fmadd_ps(h, q, l));
    __m256i e = _mm256_and_si256(_mm256_slli_epi32(k, 18), _mm256_set1_epi32(FD_E_MASK));
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(z), e));
}

/* The double lane sums of the eight floats of v added to *s0 and *s1. */
__attribute__((target(FD_TARGET2), always_inline)) static inline void fd_sum8(__m256 v, __m256d *s0,
                                                                              __m256d *s1)
{
    *s0 = _mm256_add_pd(*s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    *s1 = _mm256_add_pd(*s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

__attribute__((target(FD_TARGET2), always_inline)) static inline double fd_hsum4(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* fexp_pass_avx512's loop, sixteen tokens at a time in two halves of
 * eight (eight at a time ran about 10 % slower); the scalar tail first,
 * as there. */
__attribute__((target(FD_TARGET2))) static double
fexp_pass_avx2(const fd_src *src, size_t n, float m, float *vf, float *xlow, float *samp)
{
    size_t nv = n - n % 16, ns = (n + 15) / 16;
    float tlo;
    double tail = fexp_pass_scalar(src, nv, n, m, vf, &tlo, samp);
    __m256 th[4], tl[4];
    for (int q = 0; q < 4; q++) {
        th[q] = _mm256_loadu_ps(FD_TH + 8 * q);
        tl[q] = _mm256_loadu_ps(FD_TL + 8 * q);
    }
    const __m256 mv = _mm256_set1_ps(m), low = _mm256_set1_ps(FD_LOW);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    __m256 lo = _mm256_set1_ps(tlo), nan = _mm256_setzero_ps();
    for (size_t i = 0; i < nv; i += 16) {
        __m256 l0 = fd_load8(src, i), l1 = fd_load8(src, i + 8);
        __m256 x0 = _mm256_sub_ps(l0, mv), x1 = _mm256_sub_ps(l1, mv);
        nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(x0, x0, _CMP_UNORD_Q),
                                             _mm256_cmp_ps(x1, x1, _CMP_UNORD_Q)));
        x0 = _mm256_max_ps(x0, low); /* a NaN lane gives -44 (reported above) */
        x1 = _mm256_max_ps(x1, low);
        lo = _mm256_min_ps(lo, _mm256_min_ps(x0, x1));
        __m256 v0 = fexp8(x0, th, tl), v1 = fexp8(x1, th, tl);
        _mm256_storeu_ps(vf + i, v0);
        _mm256_storeu_ps(vf + i + 8, v1);
        if (samp) {
            _mm_store_ss(samp + i / 16, _mm256_castps256_ps128(l0));
            _mm_store_ss(samp + ns + i / 16, _mm256_castps256_ps128(v0));
        }
        fd_sum8(v0, &s0, &s1);
        fd_sum8(v1, &s2, &s3);
    }
    __m128 l4 = _mm_min_ps(_mm256_castps256_ps128(lo), _mm256_extractf128_ps(lo, 1));
    l4 = _mm_min_ps(l4, _mm_movehl_ps(l4, l4));
    *xlow = _mm_cvtss_f32(_mm_min_ss(l4, _mm_shuffle_ps(l4, l4, 1)));
    double sum = fd_hsum4(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3))) + tail;
    int bad = _mm256_movemask_ps(nan);
    sift__vzeroupper();
    return bad || tail != tail ? NAN : sum;
}
#endif

int sift__fdraw_level(void)
{
#ifdef SIFT__FD_X86
    int simd = sift__simd()->level;
    /* every level below the one returned must run too (the tests run
     * them all) */
    if (!__builtin_cpu_supports("fma") || !__builtin_cpu_supports("popcnt") ||
        !__builtin_cpu_supports("avx2"))
        return SIFT__FDRAW_SCALAR;
    if (simd >= SIFT__SIMD_AVX512 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq"))
        return SIFT__FDRAW_AVX512;
    if (simd >= SIFT__SIMD_AVX2)
        return SIFT__FDRAW_AVX2;
#endif
    return SIFT__FDRAW_SCALAR;
}

static double fexp_pass(int level, const fd_src *src, size_t n, float m, float *vf, float *xlow,
                        float *samp)
{
#ifdef SIFT__FD_X86
    if (level == SIFT__FDRAW_AVX512)
        return fexp_pass_avx512(src, n, m, vf, xlow, samp);
    if (level == SIFT__FDRAW_AVX2)
        return fexp_pass_avx2(src, n, m, vf, xlow, samp);
#endif
    (void)level;
    return fexp_pass_scalar(src, 0, n, m, vf, xlow, samp);
}

double sift__fexp_pass(int level, const sift_candidate *c, size_t n, float m, float *vf,
                       float *xlow)
{
    fd_src src = {c, NULL};
    return fexp_pass(level, &src, n, m, vf, xlow, NULL);
}

/* ------------------------------------------------------------------ */
/* Buckets, the sample and the band pass                               */
/* ------------------------------------------------------------------ */

/* Logit buckets: bucket(l) = min(floor((m - l) s), FD_HB - 1). m - l,
 * the product by a power of two, the clamp and the truncation are each
 * monotone, so a larger logit never has a larger bucket. */
#define FD_HB 2048

static inline uint32_t fd_bucket(float l, float m, float s)
{
    float y = (m - l) * s;
    y = y < (float)(FD_HB - 1) ? y : (float)(FD_HB - 1);
    return (uint32_t)(int32_t)y;
}

/* What a band pass finds: the float mass of the tokens above the band
 * (bucket < b_lo), summed in double (Lemma 3's bracketing: lanes, then a
 * tree), their count, and the band (b_lo <= bucket <= b_hi): its
 * indices, logits and float weights in idx, bl and bv, ascending, m of
 * them. dense (set by the caller) tells the AVX2 pass that the band
 * should hold many of the tokens. */
typedef struct fd_band_out {
    double above;
    size_t n_above, m;
    uint32_t *idx;
    float *bl, *bv;
    int dense;
} fd_band_out;

static void band_pass_scalar(const fd_src *src, const float *vf, size_t i, size_t n, float m,
                             float s, uint32_t b_lo, uint32_t b_hi, fd_band_out *o)
{
    double sum = 0.0;
    size_t na = 0, k = o->m;
    for (; i < n; i++) {
        float l = fd_logit(src, i);
        uint32_t b = fd_bucket(l, m, s);
        int a = b < b_lo;
        sum += a ? (double)vf[i] : 0.0;
        na += (size_t)a;
        o->idx[k] = (uint32_t)i;
        o->bl[k] = l;
        o->bv[k] = vf[i];
        k += (size_t)(b - b_lo <= b_hi - b_lo);
    }
    o->above += sum;
    o->n_above += na;
    o->m = k;
}

#ifdef SIFT__FD_X86
/* band_pass_scalar sixteen lanes at a time; the band's lanes are
 * compressed into registers and all sixteen stored (m <= i, so the
 * stores stay inside the first n entries). */
__attribute__((target(FD_TARGET))) static void band_pass_avx512(const fd_src *src, const float *vf,
                                                                size_t n, float m, float s,
                                                                uint32_t b_lo, uint32_t b_hi,
                                                                fd_band_out *o)
{
    const __m512 mv = _mm512_set1_ps(m), sv = _mm512_set1_ps(s);
    const __m512 top = _mm512_set1_ps((float)(FD_HB - 1));
    const __m512i lov = _mm512_set1_epi32((int32_t)b_lo),
                  wid = _mm512_set1_epi32((int32_t)(b_hi - b_lo));
    const __m512i sixteen = _mm512_set1_epi32(16);
    __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    size_t i = 0, k = 0, na = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 l = fd_load16(src, i);
        __m512 y = _mm512_min_ps(_mm512_mul_ps(_mm512_sub_ps(mv, l), sv), top);
        __m512i b = _mm512_cvttps_epi32(y);
        __mmask16 ab = _mm512_cmplt_epi32_mask(b, lov);
        __mmask16 in = _mm512_cmple_epu32_mask(_mm512_sub_epi32(b, lov), wid);
        __m512 v = _mm512_loadu_ps(vf + i);
        s0 = _mm512_mask_add_pd(s0, (__mmask8)ab, s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        s1 = _mm512_mask_add_pd(
            s1, (__mmask8)(ab >> 8), s1,
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
        na += (size_t)__builtin_popcount((unsigned)ab);
        _mm512_storeu_si512((void *)(o->idx + k), _mm512_maskz_compress_epi32(in, iota));
        _mm512_storeu_ps(o->bl + k, _mm512_maskz_compress_ps(in, l));
        _mm512_storeu_ps(o->bv + k, _mm512_maskz_compress_ps(in, v));
        k += (size_t)__builtin_popcount((unsigned)in);
        iota = _mm512_add_epi32(iota, sixteen);
    }
    double above = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    sift__vzeroupper();
    o->above = 0.0;
    o->n_above = 0;
    o->m = k;
    band_pass_scalar(src, vf, i, n, m, s, b_lo, b_hi, o);
    o->above += above;
    o->n_above += na;
}

/* band_pass_scalar eight lanes at a time; the band's lanes are
 * compressed a half at a time (compress_avx2.h) and stored whole, as in
 * band_pass_avx512: for every eight when the band is dense (there a
 * branch on "a lane in the band" mispredicts: without it the draw's
 * median on flat rows of 151,936 went from 303 to 207 us), else only for
 * the eights with a lane in the band. */
__attribute__((target(FD_TARGET2))) static void band_pass_avx2(const fd_src *src, const float *vf,
                                                               size_t n, float m, float s,
                                                               uint32_t b_lo, uint32_t b_hi,
                                                               fd_band_out *o)
{
    const __m256 mv = _mm256_set1_ps(m), sv = _mm256_set1_ps(s);
    const __m256 top = _mm256_set1_ps((float)(FD_HB - 1));
    const __m256i lov = _mm256_set1_epi32((int32_t)b_lo),
                  wid = _mm256_set1_epi32((int32_t)(b_hi - b_lo));
    const __m256i eight = _mm256_set1_epi32(8);
    __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    size_t i = 0, k = 0, na = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 l = fd_load8(src, i);
        __m256 y = _mm256_min_ps(_mm256_mul_ps(_mm256_sub_ps(mv, l), sv), top);
        __m256i b = _mm256_cvttps_epi32(y);
        /* signed, as in band_pass_avx512: buckets are below 2^31 (no
         * logit exceeds m, none is NaN here) */
        __m256 ab = _mm256_castsi256_ps(_mm256_cmpgt_epi32(lov, b));
        __m256i d = _mm256_sub_epi32(b, lov);
        unsigned in = (unsigned)_mm256_movemask_ps(
            _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_min_epu32(d, wid), d)));
        __m256 v = _mm256_loadu_ps(vf + i);
        fd_sum8(_mm256_and_ps(v, ab), &s0, &s1); /* a lane outside adds +0 */
        na += (size_t)__builtin_popcount((unsigned)_mm256_movemask_ps(ab));
        if (o->dense || in) {
            sift__compress8x32_store(o->idx + k, _mm256_castsi256_ps(iota), in);
            sift__compress8x32_store(o->bl + k, l, in);
            k += sift__compress8x32_store(o->bv + k, v, in);
        }
        iota = _mm256_add_epi32(iota, eight);
    }
    double above = fd_hsum4(_mm256_add_pd(s0, s1));
    sift__vzeroupper();
    o->above = 0.0;
    o->n_above = 0;
    o->m = k;
    band_pass_scalar(src, vf, i, n, m, s, b_lo, b_hi, o);
    o->above += above;
    o->n_above += na;
}
#endif

static void band_pass(int level, const fd_src *src, const float *vf, size_t n, float m, float s,
                      uint32_t b_lo, uint32_t b_hi, fd_band_out *o)
{
    o->above = 0.0;
    o->n_above = 0;
    o->m = 0;
#ifdef SIFT__FD_X86
    if (level == SIFT__FDRAW_AVX512) {
        band_pass_avx512(src, vf, n, m, s, b_lo, b_hi, o);
        return;
    }
    if (level == SIFT__FDRAW_AVX2) {
        band_pass_avx2(src, vf, n, m, s, b_lo, b_hi, o);
        return;
    }
#endif
    (void)level;
    band_pass_scalar(src, vf, 0, n, m, s, b_lo, b_hi, o);
}

/* The indices i with vf[i] >= theta, ascending, while at most cap;
 * returns their count, or cap + 1 when there are more. */
static size_t heavy_scalar(const float *vf, size_t i, size_t n, float theta, uint32_t *h, size_t k,
                           size_t cap)
{
    for (; i < n; i++) {
        if (vf[i] >= theta) {
            if (k == cap)
                return cap + 1;
            h[k++] = (uint32_t)i;
        }
    }
    return k;
}

#ifdef SIFT__FD_X86
/* h has room for cap + 16 entries. */
__attribute__((target(FD_TARGET))) static size_t heavy_avx512(const float *vf, size_t n,
                                                              float theta, uint32_t *h, size_t cap)
{
    const __m512 tv = _mm512_set1_ps(theta);
    const __m512i sixteen = _mm512_set1_epi32(16);
    __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    size_t i = 0, k = 0;
    for (; i + 16 <= n; i += 16) {
        __mmask16 hv = _mm512_cmp_ps_mask(_mm512_loadu_ps(vf + i), tv, _CMP_GE_OQ);
        if (hv) {
            _mm512_storeu_si512((void *)(h + k), _mm512_maskz_compress_epi32(hv, iota));
            k += (size_t)__builtin_popcount((unsigned)hv);
            if (k > cap)
                return cap + 1;
        }
        iota = _mm512_add_epi32(iota, sixteen);
    }
    sift__vzeroupper();
    return heavy_scalar(vf, i, n, theta, h, k, cap);
}

/* heavy_scalar eight lanes at a time; the lanes at or above theta are
 * taken one by one (they are few). */
__attribute__((target(FD_TARGET2))) static size_t heavy_avx2(const float *vf, size_t n, float theta,
                                                             uint32_t *h, size_t cap)
{
    const __m256 tv = _mm256_set1_ps(theta);
    size_t i = 0, k = 0;
    for (; i + 8 <= n; i += 8) {
        unsigned hv =
            (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(vf + i), tv, _CMP_GE_OQ));
        for (; hv; hv &= hv - 1) {
            if (k == cap) {
                sift__vzeroupper();
                return cap + 1;
            }
            h[k++] = (uint32_t)(i + (size_t)__builtin_ctz(hv));
        }
    }
    sift__vzeroupper();
    return heavy_scalar(vf, i, n, theta, h, k, cap);
}
#endif

static size_t heavy_scan(int level, const float *vf, size_t n, float theta, uint32_t *h, size_t cap)
{
#ifdef SIFT__FD_X86
    if (level == SIFT__FDRAW_AVX512)
        return heavy_avx512(vf, n, theta, h, cap);
    if (level == SIFT__FDRAW_AVX2)
        return heavy_avx2(vf, n, theta, h, cap);
#endif
    (void)level;
    return heavy_scalar(vf, 0, n, theta, h, 0, cap);
}

/* ------------------------------------------------------------------ */
/* The search in the band                                              */
/* ------------------------------------------------------------------ */

static inline void fd_swap(uint64_t *K, double *D, size_t a, size_t b)
{
    uint64_t k = K[a];
    K[a] = K[b];
    K[b] = k;
    double d = D[a];
    D[a] = D[b];
    D[b] = d;
}

/* The key (canonical: a larger key comes first) of the element whose
 * float prefix in key order first exceeds t, or of the last one when
 * none does. Reorders K and D; an estimate (the certificate decides). */
static uint64_t fd_select(uint64_t *K, double *D, size_t n, double t)
{
    size_t lo = 0, hi = n;
    double acc = 0.0;
    while (hi - lo > 16) {
        /* median of three as the pivot, moved to lo */
        size_t mid = lo + (hi - lo) / 2;
        if (K[mid] > K[lo])
            fd_swap(K, D, mid, lo);
        if (K[hi - 1] > K[lo])
            fd_swap(K, D, hi - 1, lo);
        if (K[mid] > K[hi - 1])
            fd_swap(K, D, mid, hi - 1);
        fd_swap(K, D, lo, hi - 1); /* the median to lo */
        uint64_t P = K[lo];
        size_t g = lo + 1;
        double sg = 0.0;
        for (size_t i = lo + 1; i < hi; i++) {
            if (K[i] > P) {
                sg += D[i];
                fd_swap(K, D, i, g++);
            }
        }
        /* [lo+1, g): ahead of the pivot; [g, hi): behind it */
        if (acc + sg > t) {
            fd_swap(K, D, lo, g - 1); /* the pivot leaves the range */
            hi = g - 1;
            continue;
        }
        acc += sg;
        if (acc + D[lo] > t)
            return P;
        acc += D[lo];
        lo = g;
    }
    /* insertion sort of the rest, largest key first, then the walk */
    for (size_t i = lo + 1; i < hi; i++)
        for (size_t j = i; j > lo && K[j] > K[j - 1]; j--)
            fd_swap(K, D, j, j - 1);
    for (size_t i = lo; i < hi; i++) {
        acc += D[i];
        if (acc > t)
            return K[i];
    }
    return hi > lo ? K[hi - 1] : (lo ? K[lo - 1] : 0);
}

/* Sub-buckets of the band: floor(min((m - l) s2, top) ) - base, s2 = s
 * 2^q, top = (b_hi + 1) 2^q - 1, base = b_lo 2^q. (m - l) s2 is (m - l)
 * s scaled by 2^q exactly, so a band token of bucket b falls in one of
 * b's 2^q sub-buckets; monotone as the buckets are. */
#define FD_NSB 2048

typedef struct fd_sub {
    float m, s2, top;
    uint32_t base;
} fd_sub;

static inline uint32_t fd_sub_of(const fd_sub *u, float l)
{
    float y = (u->m - l) * u->s2;
    y = y < u->top ? y : u->top;
    return (uint32_t)(int32_t)y - u->base;
}

/* H[j] = the band's float mass in sub-bucket j < nsb: four interleaved
 * copies (element i in copy i mod 4), added as ((H0 + H1) + H2) + H3.
 * The copies lie FD_NSB + 24 doubles apart, so that the same entry of
 * two copies never shares its address's low 12 bits (4K aliasing made
 * every add wait). H has room for 4 (FD_NSB + 24) doubles. */
static void fd_sub_hist(const fd_sub *u, const fd_band_out *o, double *H, uint32_t nsb,
                        uint16_t *sb)
{
    double *H1 = H + FD_NSB + 24, *H2 = H1 + FD_NSB + 24, *H3 = H2 + FD_NSB + 24;
    memset(H, 0, (size_t)nsb * sizeof *H);
    memset(H1, 0, (size_t)nsb * sizeof *H);
    memset(H2, 0, (size_t)nsb * sizeof *H);
    memset(H3, 0, (size_t)nsb * sizeof *H);
    size_t j = 0;
    for (; j + 4 <= o->m; j += 4) {
        uint32_t a0 = fd_sub_of(u, o->bl[j]), a1 = fd_sub_of(u, o->bl[j + 1]);
        uint32_t a2 = fd_sub_of(u, o->bl[j + 2]), a3 = fd_sub_of(u, o->bl[j + 3]);
        sb[j] = (uint16_t)a0;
        sb[j + 1] = (uint16_t)a1;
        sb[j + 2] = (uint16_t)a2;
        sb[j + 3] = (uint16_t)a3;
        H[a0] += (double)o->bv[j];
        H1[a1] += (double)o->bv[j + 1];
        H2[a2] += (double)o->bv[j + 2];
        H3[a3] += (double)o->bv[j + 3];
    }
    for (; j < o->m; j++) {
        uint32_t a0 = fd_sub_of(u, o->bl[j]);
        sb[j] = (uint16_t)a0;
        H[a0] += (double)o->bv[j];
    }
    for (uint32_t b = 0; b < nsb; b++)
        H[b] = ((H[b] + H1[b]) + H2[b]) + H3[b];
}

/* ------------------------------------------------------------------ */
/* The certificate                                                     */
/* ------------------------------------------------------------------ */

/* floor(d) (up = 0) or ceil(d) (up = 1) as an integer, for a finite
 * d in [0, 2^127). Doubles of 2^53 and more are integers. */
static sift__u128 u128_of_double(double d, int up)
{
    if (d < 0x1p64) {
        uint64_t t = (uint64_t)d;
        t += (uint64_t)(up && (double)t < d);
        return sift__u128_from(t);
    }
    int e;
    double f = frexp(d, &e); /* d = f 2^e, e in [65, 127] */
    uint64_t mnt = (uint64_t)ldexp(f, 53);
    int sh = e - 53;
    sift__u128 r;
    r.lo = sh < 64 ? mnt << sh : 0;
    r.hi = sh < 64 ? mnt >> (64 - sh) : mnt << (sh - 64);
    return r;
}

/* The bounds of Lemmas 2 and 3 for sums of at most n terms (N = 2n +
 * 8192 additions per term at most, as sift__fdraw_at brackets them), in the units of
 * F (the exact weights divided by 2^62): for a computed sum S,
 * hi(S) >= S + Delta(S, n) and lo(S) <= S - Delta(S, n), each rounding
 * of their evaluation absorbed by a factor (1 +- 2^-50). */
typedef struct fd_cert {
    double c_hi, c_lo, nu; /* fl(1 + cD), fl(1 - cD), n 2^-62 */
} fd_cert;

static fd_cert fd_cert_of(size_t n, double kappa)
{
    double N = 2.0 * (double)n + 8192.0;
    double g = N * 0x1p-53 / (1.0 - N * 0x1p-53);
    double cD = (g + kappa * (1.0 + g)) / (1.0 - g) * (1.0 + 0x1p-40);
    fd_cert k = {1.0 + cD, 1.0 - cD, ldexp((double)n, -62)};
    return k;
}

static double fd_hi(const fd_cert *k, double S)
{
    return (S * k->c_hi + k->nu) * (1.0 + 0x1p-50);
}

static double fd_lo(const fd_cert *k, double S)
{
    return (S * k->c_lo * (1.0 - 0x1p-50) - k->nu) * (1.0 - 0x1p-50);
}

/* The default kappa: (EPS_F + rho) / (1 - EPS_F), rounded up. */
#define FD_EPS 0x1.2p-24 /* 1.125 * 2^-24, F's proven relative error */
#define FD_RHO (0x1p-24 + 0x1p-50)

double sift__fdraw_kappa(void)
{
    return (FD_EPS + FD_RHO) / (1.0 - FD_EPS) * (1.0 + 0x1p-40);
}

/* ------------------------------------------------------------------ */
/* The draw                                                            */
/* ------------------------------------------------------------------ */

/* The estimate takes every float weight of at least 1/FD_HEAVY_PART of
 * the total exactly (at most FD_HEAVY_CAP of them) and every
 * FD_SAMPLE-th of the others. */
#define FD_HEAVY_PART 4096
#define FD_HEAVY_CAP 8192

/* Picks the band [*b_lo, *b_hi] of buckets that should hold the float
 * target t, from the sample and the heavy weights (hm, hq: 2 FD_HB
 * doubles of scratch; heavy: FD_HEAVY_CAP + 16 entries). 0 when the
 * heavy weights are too many. */
static int fd_band_of(int level, const fd_src *src, const float *vf, const float *samp, size_t n,
                      float m, float s, double Sh, double t, double *hm, uint32_t *heavy,
                      uint32_t *b_lo, uint32_t *b_hi, double *band_mass)
{
    double *hq = hm + FD_HB;
    memset(hm, 0, 2 * FD_HB * sizeof *hm);
    /* the sample the float pass wrote, every FD_SAMPLE-th token */
    size_t ns = (n + FD_SAMPLE - 1) / FD_SAMPLE;
    for (size_t j = 0; j < ns; j++) {
        uint32_t b = fd_bucket(samp[j], m, s);
        double d = (double)samp[ns + j] * FD_SAMPLE;
        hm[b] += d;
        hq[b] += d * d;
    }
    /* no float weight exceeds F(0) = 1: above that, nothing is heavy */
    float theta = (float)(Sh / FD_HEAVY_PART);
    size_t nh = theta > 1.0f ? 0 : heavy_scan(level, vf, n, theta, heavy, FD_HEAVY_CAP);
    if (nh > FD_HEAVY_CAP)
        return 0;
    for (size_t j = 0; j < nh; j++) {
        size_t i = heavy[j];
        uint32_t b = fd_bucket(fd_logit(src, i), m, s);
        hm[b] += (double)vf[i];
        if (i % FD_SAMPLE == 0) {
            double d = (double)vf[i] * FD_SAMPLE;
            hm[b] -= d;
            hq[b] -= d * d;
        }
    }
    /* the mass at or above each bucket, walking from the largest logits;
     * its estimate's variance is about the sampled squares (hq) */
    double cm = 0.0, cq = 0.0;
    for (uint32_t b = 0; b < FD_HB; b++) {
        cm += hm[b];
        cq += hq[b];
        if (cm > t)
            break;
    }
    double delta = 4.0 * sqrt(cq > 0.0 ? cq : 0.0) + (double)theta;
    uint32_t lo = FD_HB, hi = FD_HB - 1;
    double ahead = 0.0;
    cm = 0.0;
    for (uint32_t b = 0; b < FD_HB; b++) {
        cm += hm[b];
        if (lo == FD_HB && cm > t - delta) {
            lo = b;
            ahead = cm - hm[b];
        }
        if (cm > t + delta) {
            hi = b;
            break;
        }
    }
    *b_lo = lo < FD_HB ? lo : FD_HB - 1;
    *b_hi = hi;
    *band_mass = lo < FD_HB ? cm - ahead : 0.0; /* estimated */
    return 1;
}

/* The float weights the stage right before left for this very array at
 * this m (ctx->fstage, set by sift__fxtc_none and sift__fcut_keep): 1
 * with their sum, the bound on their clamped differences and whether
 * ws->u32 holds their sample (ws->u64a holds them); clears the record
 * either way. */
static int fd_vf_take(sift__ctx *ctx, const fd_src *src, size_t n, float m, int level, double *Sh,
                      float *xlow, int *samp_ok)
{
    size_t st = ctx->fstage;
    ctx->fstage = SIZE_MAX;
    uint32_t mb;
    memcpy(&mb, &m, sizeof mb);
    /* only where the stages run back to back on the whole set (armed,
     * as the exact weights' carry): in a walk over a slice's present
     * tokens a certificate rule (certify_mass) writes ws->u64a between
     * two applies */
    if (!ctx->carry_armed || st == SIZE_MAX || st + 1 != ctx->stage || src->row || !ctx->fc ||
        ctx->fc != src->c || ctx->fn != n || ctx->fm != mb)
        return 0;
    if (ctx->carry_bad) {
        /* tests: the weights, bit for bit, the sum to a few roundings and
         * the bound, against a float pass afresh (ws->u64b is free here) */
        const float *vf = (const float *)(const void *)ctx->ws->u64a;
        float *chk = (float *)(void *)ctx->ws->u64b, xl;
        double S = fexp_pass(level, src, n, m, chk, &xl, NULL);
        if (memcmp(vf, chk, n * sizeof *chk) != 0 || !(ctx->fxlow <= xl) ||
            !(fabs(ctx->fS - S) <= S * (double)n * 0x1p-50)) {
            (*ctx->carry_bad)++;
            return 0;
        }
    }
    ctx->fcarry_used++;
    *Sh = ctx->fS;
    *xlow = ctx->fxlow;
    *samp_ok = ctx->fsamp;
    return 1;
}

/* The sample the float pass writes (samp[j] = logit 16j, samp[ns + j] =
 * vf[16j], ns = ceil(n / 16)), from stored float weights. */
static void fd_sample(const fd_src *src, size_t n, const float *vf, float *samp)
{
    size_t ns = (n + FD_SAMPLE - 1) / FD_SAMPLE;
    for (size_t j = 0; j < ns; j++) {
        samp[j] = fd_logit(src, j * FD_SAMPLE);
        samp[ns + j] = vf[j * FD_SAMPLE];
    }
}

/* What is decided: dist's draw (cut = 0: T = floor(W u / 2^64), the
 * first canonical prefix above T) or top_p's cut (cut = 1: T = ceil(p W),
 * the first prefix that reaches T). */
typedef struct fd_goal {
    int cut;
    uint64_t u;
    float p;
} fd_goal;

/* The token the float sums put at the target: its canonical key, the
 * number of tokens ahead of it, the float total and the certificate's
 * sums S_A and S_B; and the float pass's lowest clamped difference (or
 * the carried bound on it). */
typedef struct fd_found {
    uint64_t key;
    size_t n_ahead;
    double Sh, SA, SB;
    float xlow;
} fd_found;

/* The sub-bucket whose float prefix crosses tb (cum = the band's mass
 * ahead of it, summed sub-bucket by sub-bucket), nsb when none does. */
static uint32_t fd_crossing(const double *H, uint32_t nsb, double tb, double *cum)
{
    double acc = 0.0;
    uint32_t js = 0;
    for (; js < nsb; js++) {
        if (acc + H[js] > tb)
            break;
        acc += H[js];
    }
    *cum = acc;
    return js;
}

/* Locates the token (an estimate: only fd_certify is trusted) and forms
 * the sums the certificate tests, in a fixed bracketing: S_A = above +
 * (cum + the sub-bucket's tokens ahead of it), S_B = above + ((cum +
 * that) + its weight). No term passes through more than 2n + 8192
 * additions (fd_cert_of). 0 when the target falls outside the band. */
static int fd_locate(sift__ctx *ctx, const fd_src *src, size_t n, float m, const fd_goal *g,
                     int level, fd_found *f)
{
    sift__ws *ws = ctx->ws;
    float *vf = (float *)(void *)ws->u64a;
    float xlow, *samp = (float *)(void *)ws->u32;
    double Sh;
    int samp_ok;
    if (!fd_vf_take(ctx, src, n, m, level, &Sh, &xlow, &samp_ok))
        Sh = fexp_pass(level, src, n, m, vf, &xlow, samp);
    else if (!samp_ok)
        fd_sample(src, n, vf, samp);
    if (!(Sh >= 1.0 && Sh < 0x1p60))
        return 0; /* a NaN logit (or no finite maximum) */
    /* the bucket scale: the largest power of two that puts the lowest
     * clamped difference into the last bucket or before */
    float s = 0x1p20f;
    while (s > 1.0f && -xlow * s > (float)(FD_HB - 1))
        s *= 0.5f;
    double t = Sh * (g->cut ? (double)g->p : ldexp((double)g->u, -64));
    uint32_t b_lo, b_hi;
    uint32_t *heavy = (uint32_t *)(void *)ws->u64c;
    double band_mass;
    if (!fd_band_of(level, src, vf, samp, n, m, s, Sh, t, (double *)(void *)ws->u64d, heavy, &b_lo,
                    &b_hi, &band_mass))
        return 0;
    float *bl = (float *)(void *)ws->u64b;
    /* dense: an estimated band of at least 1/32 of the float mass (a
     * flat row's eight tokens then hold a band token a fifth of the time
     * or more) */
    fd_band_out bo = {0.0, 0, 0, ws->u32, bl, bl + n, band_mass * 32.0 >= Sh};
    band_pass(level, src, vf, n, m, s, b_lo, b_hi, &bo);
    double tb = t - bo.above;
    if (!(tb >= 0.0) || bo.m == 0)
        return 0; /* the target lies above the band */
    /* the band's sub-buckets: bucket b splits into 2^q of them */
    float s2 = s;
    uint32_t span = b_hi - b_lo + 1, nsb = span;
    while (2 * nsb <= FD_NSB && s2 < 0x1p40f) {
        nsb *= 2;
        s2 *= 2.0f;
    }
    fd_sub sub = {m, s2, (float)(nsb / span * (b_hi + 1) - 1), nsb / span * b_lo};
    double *H = ws->f64, cum;
    uint16_t *sb = (uint16_t *)(void *)(H + 4 * (FD_NSB + 24));
    fd_sub_hist(&sub, &bo, H, nsb, sb);
    uint32_t js = fd_crossing(H, nsb, tb, &cum);
    if (js == nsb)
        return 0; /* the target lies below the band */
    uint64_t *K = ws->u64c;
    double *D = (double *)(void *)ws->u64d;
    size_t k = 0, before = 0;
    for (size_t j = 0; j < bo.m; j++) {
        uint32_t sj = sb[j];
        before += sj < js;
        if (sj == js) {
            K[k] = sift__ckey(bo.bl[j], fd_id(src, bo.idx[j]));
            D[k++] = (double)bo.bv[j];
        }
    }
    uint64_t kc = fd_select(K, D, k, tb - cum);
    double ahead = 0.0, vc = -1.0;
    size_t n_in = 0;
    for (size_t j = 0; j < k; j++) {
        ahead += K[j] > kc ? D[j] : 0.0;
        n_in += K[j] > kc;
        vc = K[j] == kc ? D[j] : vc;
    }
    if (!(vc > 0.0))
        return 0;
    f->key = kc;
    f->n_ahead = bo.n_above + before + n_in;
    f->Sh = Sh;
    f->SA = bo.above + (cum + ahead);
    f->SB = bo.above + ((cum + ahead) + vc);
    f->xlow = xlow;
    return 1;
}

/* The theorem's tests for the goal, evaluated as docs/analyzer.md
 * ("Evaluating the tests in double") describes: (a) and (b) for the
 * draw, (a') and (b') for the cut. */
static int fd_certify(const fd_goal *g, size_t n, double kappa, const fd_found *f)
{
    fd_cert ce = fd_cert_of(n, kappa);
    double Wlo = fd_lo(&ce, f->Sh), Whi = fd_hi(&ce, f->Sh);
    if (!(Wlo > 0.0))
        return 0;
    sift__u128 W0 = u128_of_double(ldexp(Wlo, 62), 0), W1 = u128_of_double(ldexp(Whi, 62), 1);
    sift__u128 Tlo = g->cut ? sift__u128_scale_float(W0, g->p, 1) : sift__u128_scale_u64(W0, g->u);
    sift__u128 Thi = g->cut ? sift__u128_scale_float(W1, g->p, 1) : sift__u128_scale_u64(W1, g->u);
    double tlo = ldexp(sift__u128_to_double(Tlo) * (1.0 - 0x1p-52), -62);
    double thi = ldexp(sift__u128_to_double(Thi) * (1.0 + 0x1p-52), -62);
    double a = fd_hi(&ce, f->SA), b = fd_lo(&ce, f->SB);
    return g->cut ? a < tlo && b >= thi : a <= tlo && b > thi;
}

/* The draw over the n logits of src (sift__fdraw_at). */
static int fd_draw(sift__ctx *ctx, const fd_src *src, size_t n, float m, uint64_t u, int level,
                   double kappa, int32_t *id)
{
    fd_goal g = {0, u, 0.0f};
    fd_found f;
    if (!fd_locate(ctx, src, n, m, &g, level, &f) || !fd_certify(&g, n, kappa, &f))
        return 0;
    *id = (int32_t) ~(uint32_t)f.key;
    return 1;
}

int sift__fdraw_at(sift__ctx *ctx, const sift__arr *a, float m, uint64_t u, int level, double kappa,
                   int32_t *id)
{
    fd_src src = {a->c, NULL};
    return fd_draw(ctx, &src, a->n, m, u, level, kappa, id);
}

int sift__fdraw_row_at(sift__ctx *ctx, const float *row, int32_t V, float m, uint64_t u, int level,
                       double kappa, int32_t *id)
{
    fd_src src = {NULL, row};
    return fd_draw(ctx, &src, (size_t)V, m, u, level, kappa, id);
}

/* The common entry: the preconditions, the peeked RNG output, the
 * counts. m is computed here when row is given. */
static int fd_entry(sift__ctx *ctx, const fd_src *src, size_t n, float m, int32_t *id)
{
    if (ctx->fdraw_off || n < SIFT__FDRAW_MIN || n > (size_t)INT32_MAX || ctx->absent_lo.lo ||
        ctx->absent_lo.hi)
        return 0;
    int level = sift__fdraw_level();
    if (level == SIFT__FDRAW_SCALAR)
        return 0; /* the scalar form is the definition, slower than the exact pass */
    if (src->row)
        m = sift__simd()->max_f32(src->row, n);
    if (!(m > -INFINITY && m < INFINITY))
        return 0;
    sift__rng r = ctx->rng;
    int ok = fd_draw(ctx, src, n, m, sift__rng_next(&r), level, sift__fdraw_kappa(), id);
    ctx->fdraw_tries++;
    ctx->fdraw_done += (uint32_t)ok;
    return ok;
}

int sift__fdraw(sift__ctx *ctx, const sift__arr *a, float m, int32_t *id)
{
    fd_src src = {a->c, NULL};
    return fd_entry(ctx, &src, a->n, m, id);
}

int sift__fdraw_row(sift__ctx *ctx, const float *row, int32_t V, int32_t *id)
{
    fd_src src = {NULL, row};
    return V > 0 && fd_entry(ctx, &src, (size_t)V, 0.0f, id);
}

/* sift__fcut_at, with what was found in *f. */
static int fd_cut(sift__ctx *ctx, const sift__arr *a, float m, float p, int level, double kappa,
                  uint64_t *key, size_t *len, fd_found *f)
{
    fd_src src = {a->c, NULL};
    fd_goal g = {1, 0, p};
    if (!(p > 0.0f && p < 1.0f) || !fd_locate(ctx, &src, a->n, m, &g, level, f) ||
        !fd_certify(&g, a->n, kappa, f))
        return 0;
    *key = f->key;
    *len = f->n_ahead + 1;
    return 1;
}

int sift__fcut_at(sift__ctx *ctx, const sift__arr *a, float m, float p, int level, double kappa,
                  uint64_t *key, size_t *len)
{
    fd_found f;
    return fd_cut(ctx, a, m, p, level, kappa, key, len, &f);
}

int sift__fcut(sift__ctx *ctx, const sift__arr *a, float m, float p, uint64_t *key, size_t *len,
               sift__fpass *fp)
{
    if (ctx->fdraw_off || a->n < SIFT__FDRAW_MIN || a->n > (size_t)INT32_MAX || ctx->absent_lo.lo ||
        ctx->absent_lo.hi || !(m > -INFINITY && m < INFINITY))
        return 0;
    int level = sift__fdraw_level();
    if (level == SIFT__FDRAW_SCALAR)
        return 0;
    fd_found f;
    int ok = fd_cut(ctx, a, m, p, level, sift__fdraw_kappa(), key, len, &f);
    ctx->fdraw_tries++;
    ctx->fdraw_done += (uint32_t)ok;
    fp->S = ok ? f.Sh : 0.0;
    fp->xlow = ok ? f.xlow : 0.0f;
    return ok;
}

/* The record of float weights left for the next stage (fd_vf_take). */
static void fd_leave(sift__ctx *ctx, const sift__arr *a, float m, double S, float xlow, int samp_ok)
{
    ctx->fstage = ctx->stage;
    ctx->fc = a->c;
    ctx->fn = a->n;
    memcpy(&ctx->fm, &m, sizeof ctx->fm);
    ctx->fS = S;
    ctx->fxlow = xlow;
    ctx->fsamp = samp_ok;
}

void sift__fcut_keep(sift__ctx *ctx, sift__arr *a, float m, uint64_t cut, size_t n_kept,
                     const sift__fpass *fp)
{
    /* The kept set holds the largest logit (a canonical prefix of at
     * least one token), so m is its largest too, and the float weights
     * of its tokens at m are the pass's, moved with them: valid for the
     * dist right after, as XTC's are. fp->xlow bounds the kept tokens'
     * clamped differences from below; the bucket scale it sets only
     * needs that (fd_locate). */
    if (!sift__carry_wanted(ctx) || n_kept < SIFT__FDRAW_MIN) {
        if (n_kept < a->n)
            sift__arr_keep_ge(a, cut);
        return;
    }
    double S = fp->S;
    if (n_kept < a->n)
        S = sift__arr_keep_ge_f(a, cut, (float *)(void *)ctx->ws->u64a);
    fd_leave(ctx, a, m, S, fp->xlow, 0);
}

int sift__fxtc_none_at(sift__ctx *ctx, const sift__arr *a, float m, float t, int level,
                       double kappa)
{
    size_t n = a->n;
    fd_src src = {a->c, NULL};
    float *vf = (float *)(void *)ctx->ws->u64a, xlow;
    double Sh = fexp_pass(level, &src, n, m, vf, &xlow, (float *)(void *)ctx->ws->u32);
    if (!(Sh >= 1.0 && Sh < 0x1p60))
        return 0;
    fd_cert ce = fd_cert_of(n, kappa);
    double Wlo = fd_lo(&ce, Sh);
    if (!(Wlo > 0.0))
        return 0;
    /* T >= T- = max(ceil(t W-), 1); a member of A has w >= T-, and by
     * Lemma 2 (w <= v (1 + kappa) + 1 in units of 2^-62) a float weight
     * of at least theta = (T- 2^-62 - 2^-62) / (1 + kappa): a token
     * below theta is not in A. */
    sift__u128 T = sift__u128_scale_float(u128_of_double(ldexp(Wlo, 62), 0), t, 1);
    double tl = ldexp(sift__u128_to_double(T) * (1.0 - 0x1p-52), -62);
    double theta = (tl - 0x1p-62) / (1.0 + kappa) * (1.0 - 0x1p-50);
    if (!(theta > 0.0))
        return 0;
    /* the float just below theta (or theta): every v >= theta passes */
    float tf = (float)theta;
    tf = (double)tf > theta ? nextafterf(tf, 0.0f) : tf;
    uint32_t hit[2 + 16];
    if (heavy_scan(level, vf, n, tf, hit, 1) > 1)
        return 0;
    fd_leave(ctx, a, m, Sh, xlow, 1);
    return 1;
}

int sift__fxtc_none(sift__ctx *ctx, const sift__arr *a, float m, float t)
{
    /* Only in a full pass or a walk over the whole set (armed): there
     * the record it leaves is taken before anything writes the scratch,
     * and a step that fails changes nothing of its back-off state. */
    if (!ctx->carry_armed || ctx->fdraw_off || a->n < SIFT__FDRAW_MIN || a->n > (size_t)INT32_MAX ||
        ctx->absent_lo.lo || ctx->absent_lo.hi || !(m > -INFINITY && m < INFINITY))
        return 0;
    int level = sift__fdraw_level();
    if (level == SIFT__FDRAW_SCALAR)
        return 0;
    /* a back-off like the tail route's: rows whose head holds two tokens
     * above the threshold make the test fail step after step */
    uint32_t *skip = ctx->fx_skip, *fails = ctx->fx_fails;
    if (skip && *skip) {
        --*skip;
        return 0;
    }
    int ok = sift__fxtc_none_at(ctx, a, m, t, level, sift__fdraw_kappa());
    ctx->fdraw_tries++;
    ctx->fdraw_done += (uint32_t)ok;
    if (skip && ok)
        *fails = 0;
    else if (skip) {
        *fails += *fails < 7;
        *skip = (*fails >= 7 ? 64u : 1u << (*fails - 1)) - 1;
    }
    return ok;
}

/*
 * weights.c - the whole-row weights kernel and its fast expf.
 *
 * Owns sift__weights, sift__weights_path, sift__weights_path_available and
 * sift__expf_path: w_i = sift__weight(sift__expf(l_i - m)) over a whole
 * candidate array, with the exact 128-bit sum W, and the same fast expf
 * exposed on float arrays so that it can be checked on its own. Also the
 * pass that consumes the weights for an entropy (sift__entropy_sum), in
 * the same vector style.
 *
 * Invariant: every path returns exactly the bits of the scalar definition
 * (sift__expf and sift__weight in num.c); which path ran never shows in a
 * result. The scalar definition stays the definition: path 0 is it.
 *
 * Why a second expf. sift__expf evaluates a degree-13 polynomial in double
 * and rounds once to float; that costs about 30 dependent operations per
 * token, the largest part of every whole-distribution sampler. Here
 * exp(x) is computed in double by a cheaper method whose relative error is
 * below 2^-49, and the float result is accepted only when that error
 * cannot change the rounding; otherwise (about one value in a few
 * million) the lane is recomputed by sift__expf itself.
 *
 * The method, for a float x in [-104, 0] (X = (double)x):
 *   k  = the integer nearest to X * 128/ln2    (|k| <= 19207)
 *   r  = (X - k*H) - k*L, with H + L = ln2/128 (H has 32 significant bits)
 *   p  = 1 + r + r^2/2 + r^3/6 + r^4/24        (Horner)
 *   y  = p * TAB[k mod 128] * 2^floor(k/128)   (TAB[j] = 2^(j/128) rounded)
 *   d  = y * 2^-46;  a = (float)(y - d),  b = (float)(y + d)
 *   result a if a == b, else sift__expf(x).
 *
 * Error bound (Y = e^X exactly; "rel" = relative error):
 * - k: X * 128/ln2 is formed with two roundings, at most 2^-37.8 absolute
 *   off for |X| <= 104, so |X - k ln2/128| <= (ln2/128)(1/2 + 2^-37.8) and
 *   |r| <= 0.0027076.
 * - r: k*H is exact (15 + 32 bits). If k != 0 then |X| >= ln2/256, so X is
 *   a multiple of 2^-32 and k*H of 2^-39, and X - k*H (below 2^-8) is
 *   exact; if k == 0, r = X exactly. k*L and the last subtraction round
 *   once each, and H + L misses ln2/128 by at most 2^-92: r is off by at
 *   most 2^-61 absolute, which moves e^r by at most 2^-61 rel.
 * - p: the Taylor remainder is at most |r|^5/120 * e^|r| < 2^-49.5; the
 *   Horner roundings amount to at most 1.01 * 2^-53 (the last addition of
 *   1 dominates; the earlier ones are scaled by powers of r). rel, since
 *   p >= 0.997: below 2^-49.5 + 1.02 * 2^-53.
 * - TAB[j] and the product p * TAB[j] round once each: 2^-53 rel each.
 *   Adding floor(k/128) to the exponent field is an exact scaling (the
 *   result, at least 2^-151, stays a normal double).
 * Sum: |y - Y| <= (2^-49.5 + 3.1 * 2^-53) Y < 2^-49 Y.
 * sift__expf's own double value y_s (before its rounding to float) is
 * within 2^-51 rel of Y (num.c: Taylor remainder 2e-17, at most about
 * 3 * 2^-53 of Horner roundings for |r| <= 0.35, exact scaling).
 * - d = y * 2^-46 is exact (a power of two, y >= 2^-151), and y - d and
 *   y + d round once: a <= y(1 - 2^-46 + 2^-53) and b >= y(1 + 2^-46 -
 *   2^-53). Both Y and y_s lie within y(1 +- 2^-48.5), so inside [a, b]
 *   with a margin of about 4 times the error bound.
 * - Rounding to float is monotone. When a and b round to the same float,
 *   every value in [a, b] does, Y and y_s included: the result is then
 *   both the correctly rounded e^x and exactly what sift__expf returns
 *   (which rounds y_s once). Subnormal results need no special case: the
 *   conversion rounds to the subnormal grid, monotonically all the same.
 * - When a and b differ, [a, b] holds a rounding boundary and the lane is
 *   recomputed by sift__expf. A boundary lies in the interval with
 *   probability about 2^-45 / 2^-23.5; the exhaustive run counts them.
 * tests/bench/expf_exhaustive.c (make check-expf) compares every path to
 * sift__expf for every float in [-104, 0]; check_num samples densely.
 *
 * The weights kernel feeds this the float difference l - m (all l <= m is
 * checked per block, so x <= 0), clamped below at -104 (portable) or -80
 * (AVX2, AVX-512): sift__expf is at most the smallest subnormal at -104 and below
 * 2^-115 at -80, whose weights are 0 like those of every smaller x, so
 * -inf and very small logits need no separate lane mask. The portable
 * kernel rounds a and converts the float as sift__weight does; the AVX2
 * kernel reads the rounding and the weight straight from y's bits with an
 * equivalent doubt test (fx_weight4_y).
 */
#include <math.h>

#include "../sift_internal.h"
#include "simd.h"

#if defined(__x86_64__) && !defined(SIFT_NO_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

/* 2^(j/128), j = 0..127, each the double nearest to the exact value
 * (generated with 60-digit decimal arithmetic; a wrong entry would show
 * in the exhaustive run as mismatches or as a surge of fallbacks). */
static const double FX_TAB[128] = {
    0x1.0000000000000p+0, 0x1.0163da9fb3335p+0, 0x1.02c9a3e778061p+0, 0x1.04315e86e7f85p+0,
    0x1.059b0d3158574p+0, 0x1.0706b29ddf6dep+0, 0x1.0874518759bc8p+0, 0x1.09e3ecac6f383p+0,
    0x1.0b5586cf9890fp+0, 0x1.0cc922b7247f7p+0, 0x1.0e3ec32d3d1a2p+0, 0x1.0fb66affed31bp+0,
    0x1.11301d0125b51p+0, 0x1.12abdc06c31ccp+0, 0x1.1429aaea92de0p+0, 0x1.15a98c8a58e51p+0,
    0x1.172b83c7d517bp+0, 0x1.18af9388c8deap+0, 0x1.1a35beb6fcb75p+0, 0x1.1bbe084045cd4p+0,
    0x1.1d4873168b9aap+0, 0x1.1ed5022fcd91dp+0, 0x1.2063b88628cd6p+0, 0x1.21f49917ddc96p+0,
    0x1.2387a6e756238p+0, 0x1.251ce4fb2a63fp+0, 0x1.26b4565e27cddp+0, 0x1.284dfe1f56381p+0,
    0x1.29e9df51fdee1p+0, 0x1.2b87fd0dad990p+0, 0x1.2d285a6e4030bp+0, 0x1.2ecafa93e2f56p+0,
    0x1.306fe0a31b715p+0, 0x1.32170fc4cd831p+0, 0x1.33c08b26416ffp+0, 0x1.356c55f929ff1p+0,
    0x1.371a7373aa9cbp+0, 0x1.38cae6d05d866p+0, 0x1.3a7db34e59ff7p+0, 0x1.3c32dc313a8e5p+0,
    0x1.3dea64c123422p+0, 0x1.3fa4504ac801cp+0, 0x1.4160a21f72e2ap+0, 0x1.431f5d950a897p+0,
    0x1.44e086061892dp+0, 0x1.46a41ed1d0057p+0, 0x1.486a2b5c13cd0p+0, 0x1.4a32af0d7d3dep+0,
    0x1.4bfdad5362a27p+0, 0x1.4dcb299fddd0dp+0, 0x1.4f9b2769d2ca7p+0, 0x1.516daa2cf6642p+0,
    0x1.5342b569d4f82p+0, 0x1.551a4ca5d920fp+0, 0x1.56f4736b527dap+0, 0x1.58d12d497c7fdp+0,
    0x1.5ab07dd485429p+0, 0x1.5c9268a5946b7p+0, 0x1.5e76f15ad2148p+0, 0x1.605e1b976dc09p+0,
    0x1.6247eb03a5585p+0, 0x1.6434634ccc320p+0, 0x1.6623882552225p+0, 0x1.68155d44ca973p+0,
    0x1.6a09e667f3bcdp+0, 0x1.6c012750bdabfp+0, 0x1.6dfb23c651a2fp+0, 0x1.6ff7df9519484p+0,
    0x1.71f75e8ec5f74p+0, 0x1.73f9a48a58174p+0, 0x1.75feb564267c9p+0, 0x1.780694fde5d3fp+0,
    0x1.7a11473eb0187p+0, 0x1.7c1ed0130c132p+0, 0x1.7e2f336cf4e62p+0, 0x1.80427543e1a12p+0,
    0x1.82589994cce13p+0, 0x1.8471a4623c7adp+0, 0x1.868d99b4492edp+0, 0x1.88ac7d98a6699p+0,
    0x1.8ace5422aa0dbp+0, 0x1.8cf3216b5448cp+0, 0x1.8f1ae99157736p+0, 0x1.9145b0b91ffc6p+0,
    0x1.93737b0cdc5e5p+0, 0x1.95a44cbc8520fp+0, 0x1.97d829fde4e50p+0, 0x1.9a0f170ca07bap+0,
    0x1.9c49182a3f090p+0, 0x1.9e86319e32323p+0, 0x1.a0c667b5de565p+0, 0x1.a309bec4a2d33p+0,
    0x1.a5503b23e255dp+0, 0x1.a799e1330b358p+0, 0x1.a9e6b5579fdbfp+0, 0x1.ac36bbfd3f37ap+0,
    0x1.ae89f995ad3adp+0, 0x1.b0e07298db666p+0, 0x1.b33a2b84f15fbp+0, 0x1.b59728de5593ap+0,
    0x1.b7f76f2fb5e47p+0, 0x1.ba5b030a1064ap+0, 0x1.bcc1e904bc1d2p+0, 0x1.bf2c25bd71e09p+0,
    0x1.c199bdd85529cp+0, 0x1.c40ab5fffd07ap+0, 0x1.c67f12e57d14bp+0, 0x1.c8f6d9406e7b5p+0,
    0x1.cb720dcef9069p+0, 0x1.cdf0b555dc3fap+0, 0x1.d072d4a07897cp+0, 0x1.d2f87080d89f2p+0,
    0x1.d5818dcfba487p+0, 0x1.d80e316c98398p+0, 0x1.da9e603db3285p+0, 0x1.dd321f301b460p+0,
    0x1.dfc97337b9b5fp+0, 0x1.e264614f5a129p+0, 0x1.e502ee78b3ff6p+0, 0x1.e7a51fbc74c83p+0,
    0x1.ea4afa2a490dap+0, 0x1.ecf482d8e67f1p+0, 0x1.efa1bee615a27p+0, 0x1.f252b376bba97p+0,
    0x1.f50765b6e4540p+0, 0x1.f7bfdad9cbe14p+0, 0x1.fa7c1819e90d8p+0, 0x1.fd3c22b8f71f1p+0,
};

#define FX_C 0x1.71547652b82fep+7  /* 128 / ln 2 */
#define FX_H 0x1.62e42fee00000p-8  /* ln 2 / 128, its first 32 bits */
#define FX_L 0x1.a39ef35793c76p-40 /* ln 2 / 128 - FX_H */
#define FX_MAGIC 0x1.8p52          /* 1.5 * 2^52: adding it rounds to an integer */
#define FX_C3 (1.0 / 6.0)
#define FX_C4 (1.0 / 24.0)
#define FX_D 0x1p-46 /* half-width of the doubt interval, relative */
#define FX_LOW (-104.0f)
#define FX_LOW_W (-80.0f) /* the AVX2 weights kernel's clamp (fx_weight4_y) */

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double dfrom(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* The method of the file comment on one value x in [-104, 0]: returns 1
 * and the float through *e when the rounding is certain, 0 when the value
 * must come from sift__expf. */
static int fx_scalar(float x, float *e)
{
    double X = (double)x;
    double t = X * FX_C + FX_MAGIC;
    double kd = t - FX_MAGIC;
    /* t = 1.5 * 2^52 + k exactly, so t's low bits are k's two's
     * complement: the low 7 give k mod 128, and the rest, shifted into
     * the exponent field, floor(k / 128) (the magic's own bits shift out
     * of the 64). */
    uint64_t tb = dbits(t);
    double r = (X - kd * FX_H) - kd * FX_L;
    double p = (((r * FX_C4 + FX_C3) * r + 0.5) * r + 1.0) * r + 1.0;
    double y = p * FX_TAB[tb & 127];
    y = dfrom(dbits(y) + ((tb & ~(uint64_t)127) << 45));
    double d = y * FX_D;
    float a = (float)(y - d), b = (float)(y + d);
    *e = a;
    return a == b;
}

/* Path 0 and every tail: the scalar definition. */
static sift__u128 weights_scalar(const sift_candidate *c, size_t n, float m, uint64_t *w)
{
    sift__u128 W = {0, 0};
    for (size_t i = 0; i < n; i++) {
        uint64_t x = sift__weight(sift__expf(c[i].logit - m));
        w[i] = x;
        W = sift__u128_add64(W, x);
    }
    return W;
}

/* One term of the entropy sum: w ? ((double)w * inv) * (LS - (double)(l -
 * m)) : 0, the float subtraction first (temp.c and typical.c define H
 * this way). */
static double ent_term(float l, uint64_t w, float m, double LS, double inv)
{
    return w ? ((double)w * inv) * (LS - (double)(l - m)) : 0.0;
}

/* The eight id-order lanes of sift__dsum_idorder, combined its way. */
static double lanes_combine(const double s[8])
{
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Path 0: the terms summed exactly as sift__dsum_idorder sums an array of
 * them (lane i mod 8, in order), without storing the array. */
static double entropy_scalar(const sift_candidate *c, const uint64_t *w, size_t n, float m,
                             double LS, double inv)
{
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; i++)
        s[i % 8] += ent_term(c[i].logit, w[i], m, LS, inv);
    return lanes_combine(s);
}

/* ------------------------------------------------------------------ */
/* Portable vectors (SSE2 on x86-64, NEON on arm64, plain code elsewhere) */
/* ------------------------------------------------------------------ */

#if defined(__GNUC__) || defined(__clang__)
#define SIFT__FX_VEC 1

/* Lanes whose result was doubtful: recompute them by the definition.
 * Kept out of line so that the hot loops carry only a rarely taken
 * branch. */
__attribute__((noinline, cold)) static void fix_weights(const sift_candidate *c, float m,
                                                        uint64_t *w, unsigned mask)
{
    for (int j = 0; mask; j++, mask >>= 1)
        if (mask & 1u)
            w[j] = sift__weight(sift__expf(c[j].logit - m));
}

/* A block that the definition computed, folded into the two halves. */
static void add_halves(sift__u128 Wb, uint64_t *lo, uint64_t *hi)
{
    *lo += Wb.lo & 0xffffffffu;
    *hi += (Wb.lo >> 32) + (Wb.hi << 32);
}

typedef double fx_d __attribute__((vector_size(32)));
typedef uint64_t fx_u __attribute__((vector_size(32)));
typedef float fx_f __attribute__((vector_size(16)));
typedef int32_t fx_i __attribute__((vector_size(16)));

#define FX_SPLAT(x)        \
    {                      \
        (x), (x), (x), (x) \
    }

/* fx_scalar on four lanes: the same IEEE operations lane by lane (the
 * library is built with -ffp-contract=off, so none is fused); *bad gets
 * -1 in the doubtful lanes. */
static inline __attribute__((always_inline)) fx_f fx4_portable(fx_f x, fx_i *bad)
{
    const fx_d C = FX_SPLAT(FX_C), H = FX_SPLAT(FX_H), L = FX_SPLAT(FX_L);
    const fx_d MAGIC = FX_SPLAT(FX_MAGIC), C3 = FX_SPLAT(FX_C3), C4 = FX_SPLAT(FX_C4);
    const fx_d HALF = FX_SPLAT(0.5), ONE = FX_SPLAT(1.0), D = FX_SPLAT(FX_D);
    const fx_u LOW7 = FX_SPLAT(127);
    fx_d X = __builtin_convertvector(x, fx_d);
    fx_d t = X * C + MAGIC;
    fx_d kd = t - MAGIC;
    fx_u tb = (fx_u)t;
    fx_d r = (X - kd * H) - kd * L;
    fx_d p = (((r * C4 + C3) * r + HALF) * r + ONE) * r + ONE;
    fx_u j = tb & LOW7;
    fx_d T = {FX_TAB[j[0]], FX_TAB[j[1]], FX_TAB[j[2]], FX_TAB[j[3]]};
    fx_d y = p * T;
    y = (fx_d)((fx_u)y + ((tb & ~LOW7) << 45));
    fx_d d = y * D;
    fx_f a = __builtin_convertvector(y - d, fx_f);
    fx_f b = __builtin_convertvector(y + d, fx_f);
    *bad = a != b;
    return a;
}

static unsigned fx_mask4(fx_i bad)
{
    return (unsigned)(bad[0] & 1) | (unsigned)(bad[1] & 2) | (unsigned)(bad[2] & 4) |
           (unsigned)(bad[3] & 8);
}

static sift__u128 weights_portable(const sift_candidate *c, size_t n, float m, uint64_t *w)
{
    const fx_f mv = FX_SPLAT(m), LOWV = FX_SPLAT(FX_LOW);
    const fx_d P62 = FX_SPLAT(0x1p62);
    uint64_t sum_lo = 0, sum_hi = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const sift_candidate *q = c + i;
        fx_f l = {q[0].logit, q[1].logit, q[2].logit, q[3].logit};
        fx_i le = l <= mv;
        if (SIFT__UNLIKELY(!(le[0] & le[1] & le[2] & le[3]))) {
            /* m is not the maximum of these (or a NaN slipped in): the
             * definition decides. */
            add_halves(weights_scalar(q, 4, m, w + i), &sum_lo, &sum_hi);
            continue;
        }
        fx_f x = l - mv;
        fx_i low = x < LOWV;
        x = (fx_f)(((fx_i)x & ~low) | ((fx_i)LOWV & low));
        fx_i bad;
        fx_f e = fx4_portable(x, &bad);
        /* trunc(e * 2^62), exact in double for e in [0, 1]; a subnormal e
         * gives less than 1, hence 0, as sift__weight does. */
        fx_d v = __builtin_convertvector(e, fx_d) * P62;
        for (int j = 0; j < 4; j++)
            w[i + j] = (uint64_t)(int64_t)v[j];
        unsigned mask = fx_mask4(bad);
        if (SIFT__UNLIKELY(mask))
            fix_weights(q, m, w + i, mask);
        for (int j = 0; j < 4; j++) {
            sum_lo += w[i + j] & 0xffffffffu;
            sum_hi += w[i + j] >> 32;
        }
    }
    return sift__u128_add(sift__u128_halves(sum_lo, sum_hi),
                          weights_scalar(c + i, n - i, m, w + i));
}

static size_t expf_portable(const float *x, float *e, size_t n)
{
    size_t fell = 0;
    for (size_t i = 0; i < n; i += 4) {
        fx_f xv = {x[i], x[i + 1], x[i + 2], x[i + 3]};
        fx_i bad;
        fx_f ev = fx4_portable(xv, &bad);
        for (int j = 0; j < 4; j++) {
            if (bad[j]) {
                e[i + (size_t)j] = sift__expf(x[i + (size_t)j]);
                fell++;
            } else {
                e[i + (size_t)j] = ev[j];
            }
        }
    }
    return fell;
}

/* entropy_scalar on two four-lane accumulators (the lanes as in
 * entropy_avx2); the weights are converted lane by lane by C. */
static double entropy_portable(const sift_candidate *c, const uint64_t *w, size_t n, float m,
                               double LS, double inv)
{
    const fx_f mv = FX_SPLAT(m);
    const fx_d LSv = FX_SPLAT(LS), invv = FX_SPLAT(inv);
    fx_d acc[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int h = 0; h < 2; h++) {
            const sift_candidate *q = c + i + 4 * h;
            const uint64_t *wq = w + i + 4 * h;
            fx_f l = {q[0].logit, q[1].logit, q[2].logit, q[3].logit};
            fx_d s = LSv - __builtin_convertvector(l - mv, fx_d);
            fx_d wd = {(double)wq[0], (double)wq[1], (double)wq[2], (double)wq[3]};
            fx_u nz = {wq[0] != 0, wq[1] != 0, wq[2] != 0, wq[3] != 0};
            fx_d v = (wd * invv) * s;
            acc[h] += (fx_d)((fx_u)v & -nz);
        }
    }
    double s[8];
    for (int j = 0; j < 4; j++) {
        s[j] = acc[0][j];
        s[4 + j] = acc[1][j];
    }
    for (int j = 0; i < n; i++, j++)
        s[j] += ent_term(c[i].logit, w[i], m, LS, inv);
    return lanes_combine(s);
}
#endif

/* ------------------------------------------------------------------ */
/* AVX2 (x86-64, chosen at run time)                                   */
/* ------------------------------------------------------------------ */

#if defined(SIFT__FX_VEC) && defined(__x86_64__) && !defined(SIFT_NO_DISPATCH)
#define SIFT__FX_AVX2 1

/* y of the file comment for four lanes with AVX2 (no FMA: the target is
 * "avx2" only, and every product and sum is its own intrinsic anyway);
 * TAB is read with one gather. */
__attribute__((target("avx2"), always_inline)) static inline __m256d fx4_avx2_y(__m256d X)
{
    const __m256d MAGIC = _mm256_set1_pd(FX_MAGIC);
    const __m256i LOW7 = _mm256_set1_epi64x(127);
    __m256d t = _mm256_add_pd(_mm256_mul_pd(X, _mm256_set1_pd(FX_C)), MAGIC);
    __m256d kd = _mm256_sub_pd(t, MAGIC);
    __m256i tb = _mm256_castpd_si256(t);
    __m256d r = _mm256_sub_pd(_mm256_sub_pd(X, _mm256_mul_pd(kd, _mm256_set1_pd(FX_H))),
                              _mm256_mul_pd(kd, _mm256_set1_pd(FX_L)));
    __m256d p = _mm256_add_pd(_mm256_mul_pd(r, _mm256_set1_pd(FX_C4)), _mm256_set1_pd(FX_C3));
    p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(0.5));
    p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(1.0));
    p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(1.0));
    __m256d T = _mm256_i64gather_pd(FX_TAB, _mm256_and_si256(tb, LOW7), 8);
    __m256d y = _mm256_mul_pd(p, T);
    __m256i sc = _mm256_slli_epi64(_mm256_andnot_si256(LOW7, tb), 45);
    return _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(y), sc));
}

/* fx_scalar on four lanes with AVX2: *bad gets all-ones in the doubtful
 * lanes. */
__attribute__((target("avx2"), always_inline)) static inline __m128 fx4_avx2(__m256d X, __m128 *bad)
{
    __m256d y = fx4_avx2_y(X);
    __m256d d = _mm256_mul_pd(y, _mm256_set1_pd(FX_D));
    __m128 a = _mm256_cvtpd_ps(_mm256_sub_pd(y, d));
    __m128 b = _mm256_cvtpd_ps(_mm256_add_pd(y, d));
    *bad = _mm_cmpneq_ps(a, b);
    return a;
}

/* The weights straight from y, without forming the float (the AVX2
 * kernel; x clamped to [-80, 0], see below). With x >= -80, Y = e^x and
 * y are far inside the normal float range, so rounding y to float drops
 * exactly the low 29 bits of its significand ("low"), and the rounding
 * boundaries (float midpoints) are where low = 2^28. y and sift__expf's
 * y_s both lie within 1.25 * 2^-49 y of Y (file comment), that is within
 * 21 units of y's last place. If low is at least 256 units away from
 * 2^28, every value within 21 units of y rounds to the same float as y
 * (also across a binade edge, where the float grid only gets finer
 * relative to the distance to the next midpoint): then y_s rounds there
 * too, and rounding y half-up (add 2^28, clear the 29 bits: it is never
 * exactly halfway then) gives sift__expf(x)'s bits as a double rb. Else
 * the lane is doubtful (*bad all-ones, about 2^-20 of the values): the
 * caller takes the definition. The weight of rb = mant53 * 2^(E - 1075)
 * (E its biased exponent) is trunc(rb * 2^62) = (mant53 << 10) >> (1023 -
 * E), mant53 << 10 < 2^63; a count above 63 gives 0 in vpsrlvq, as the
 * value is then below 2^-62. This is sift__weight's value for the same
 * float. Clamping x to -80 changes no weight: sift__expf(x) <= sift__expf
 * (-80) < 2^-115 for x <= -80, whose weight is 0, and so is the weight
 * computed at -80. The exhaustive run checks these weights too. */
__attribute__((target("avx2"), always_inline)) static inline __m256i fx_weight4_y(__m256d y,
                                                                                  __m256i *bad)
{
    __m256i yb = _mm256_castpd_si256(y);
    __m256i low = _mm256_and_si256(yb, _mm256_set1_epi64x(0x1fffffff));
    __m256i v = _mm256_sub_epi64(low, _mm256_set1_epi64x(0x10000000 - 256));
    *bad = _mm256_cmpeq_epi64(_mm256_srli_epi64(v, 9), _mm256_setzero_si256());
    __m256i rb = _mm256_and_si256(_mm256_add_epi64(yb, _mm256_set1_epi64x(0x10000000)),
                                  _mm256_set1_epi64x(~(int64_t)0x1fffffff));
    __m256i mant = _mm256_or_si256(_mm256_srli_epi64(_mm256_slli_epi64(rb, 12), 2),
                                   _mm256_set1_epi64x((int64_t)1 << 62));
    __m256i cnt = _mm256_sub_epi64(_mm256_set1_epi64x(1023), _mm256_srli_epi64(rb, 52));
    return _mm256_srlv_epi64(mant, cnt);
}

/* The logits of c[0..8) in order: the odd floats of two 32-byte loads
 * (a candidate is {id, logit}). */
__attribute__((target("avx2"), always_inline)) static inline __m256
load_logits8(const sift_candidate *c)
{
    __m256 a = _mm256_loadu_ps((const float *)(const void *)c);
    __m256 b = _mm256_loadu_ps((const float *)(const void *)(c + 4));
    /* [l0 l1 l4 l5 | l2 l3 l6 l7], then the middle 64-bit pairs swap */
    __m256 l = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(l), _MM_SHUFFLE(3, 1, 2, 0)));
}

__attribute__((target("avx2"))) static sift__u128 weights_avx2(const sift_candidate *c, size_t n,
                                                               float m, uint64_t *w)
{
    const __m256 mv = _mm256_set1_ps(m), lowv = _mm256_set1_ps(FX_LOW_W);
    const __m256i lo32 = _mm256_set1_epi64x(0xffffffff);
    __m256i acc_lo = _mm256_setzero_si256(), acc_hi = _mm256_setzero_si256();
    uint64_t sum_lo = 0, sum_hi = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 l = load_logits8(c + i);
        if (SIFT__UNLIKELY(_mm256_movemask_ps(_mm256_cmp_ps(l, mv, _CMP_LE_OQ)) != 0xff)) {
            add_halves(weights_scalar(c + i, 8, m, w + i), &sum_lo, &sum_hi);
            continue;
        }
        __m256 x = _mm256_max_ps(_mm256_sub_ps(l, mv), lowv);
        __m256i bad0, bad1;
        __m256d y0 = fx4_avx2_y(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
        __m256d y1 = fx4_avx2_y(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
        __m256i w0 = fx_weight4_y(y0, &bad0), w1 = fx_weight4_y(y1, &bad1);
        unsigned mask = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(bad0)) |
                        ((unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(bad1)) << 4);
        _mm256_storeu_si256((__m256i *)(void *)(w + i), w0);
        _mm256_storeu_si256((__m256i *)(void *)(w + i + 4), w1);
        if (SIFT__UNLIKELY(mask)) {
            fix_weights(c + i, m, w + i, mask);
            w0 = _mm256_loadu_si256((const __m256i *)(const void *)(w + i));
            w1 = _mm256_loadu_si256((const __m256i *)(const void *)(w + i + 4));
        }
        acc_lo = _mm256_add_epi64(acc_lo, _mm256_and_si256(w0, lo32));
        acc_hi = _mm256_add_epi64(acc_hi, _mm256_srli_epi64(w0, 32));
        acc_lo = _mm256_add_epi64(acc_lo, _mm256_and_si256(w1, lo32));
        acc_hi = _mm256_add_epi64(acc_hi, _mm256_srli_epi64(w1, 32));
    }
    uint64_t al[4], ah[4];
    _mm256_storeu_si256((__m256i *)(void *)al, acc_lo);
    _mm256_storeu_si256((__m256i *)(void *)ah, acc_hi);
    sum_lo += al[0] + al[1] + al[2] + al[3];
    sum_hi += ah[0] + ah[1] + ah[2] + ah[3];
    return sift__u128_add(sift__u128_halves(sum_lo, sum_hi),
                          weights_scalar(c + i, n - i, m, w + i));
}

/* (double)w for four w < 2^63, exactly as the C conversion rounds: the
 * high and low 32-bit halves become doubles through magic exponents
 * (2^84 + hi 2^32 and 2^52 + lo, both exact), the first minus 2^84 + 2^52
 * is exact (hi 2^32 - 2^52 fits in 53 bits), and the last addition makes
 * hi 2^32 + lo = w with its one rounding. */
__attribute__((target("avx2"), always_inline)) static inline __m256d u64_to_pd_avx2(__m256i w)
{
    __m256i hi = _mm256_or_si256(_mm256_srli_epi64(w, 32), _mm256_set1_epi64x(0x4530000000000000));
    __m256i lo = _mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi64x(0xffffffff)),
                                 _mm256_set1_epi64x(0x4330000000000000));
    __m256d h = _mm256_sub_pd(_mm256_castsi256_pd(hi), _mm256_set1_pd(0x1.00000001p84));
    return _mm256_add_pd(h, _mm256_castsi256_pd(lo));
}

/* entropy_scalar with the eight lanes held in two registers; lane j of
 * the scalar form is lane j mod 4 of acc[j / 4], so every lane adds the
 * same terms in the same order. */
__attribute__((target("avx2"))) static double
entropy_avx2(const sift_candidate *c, const uint64_t *w, size_t n, float m, double LS, double inv)
{
    const __m256 mv = _mm256_set1_ps(m);
    const __m256d LSv = _mm256_set1_pd(LS), invv = _mm256_set1_pd(inv);
    const __m256i zero = _mm256_setzero_si256();
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_sub_ps(load_logits8(c + i), mv);
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)(w + i));
        __m256i w1 = _mm256_loadu_si256((const __m256i *)(const void *)(w + i + 4));
        __m256d s0 = _mm256_sub_pd(LSv, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
        __m256d s1 = _mm256_sub_pd(LSv, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
        __m256d v0 = _mm256_mul_pd(_mm256_mul_pd(u64_to_pd_avx2(w0), invv), s0);
        __m256d v1 = _mm256_mul_pd(_mm256_mul_pd(u64_to_pd_avx2(w1), invv), s1);
        /* a zero weight is the term +0 (its s may be inf: -inf logits) */
        v0 = _mm256_andnot_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(w0, zero)), v0);
        v1 = _mm256_andnot_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(w1, zero)), v1);
        acc0 = _mm256_add_pd(acc0, v0);
        acc1 = _mm256_add_pd(acc1, v1);
    }
    double s[8];
    _mm256_storeu_pd(s, acc0);
    _mm256_storeu_pd(s + 4, acc1);
    for (int j = 0; i < n; i++, j++)
        s[j] += ent_term(c[i].logit, w[i], m, LS, inv);
    return lanes_combine(s);
}

/* The fast expf alone, four at a time, for sift__expf_path. */
__attribute__((target("avx2"))) static size_t expf_avx2(const float *x, float *e, size_t n)
{
    size_t fell = 0;
    for (size_t i = 0; i < n; i += 4) {
        __m128 bad;
        _mm_storeu_ps(e + i, fx4_avx2(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), &bad));
        unsigned mask = (unsigned)_mm_movemask_ps(bad);
        for (int j = 0; mask; j++, mask >>= 1) {
            if (mask & 1u) {
                e[i + (size_t)j] = sift__expf(x[i + (size_t)j]);
                fell++;
            }
        }
    }
    return fell;
}
#endif

/* ------------------------------------------------------------------ */
/* AVX-512F with DQ and FMA (x86-64, chosen at run time)               */
/* ------------------------------------------------------------------ */

/* Eight lanes a vector, and no gather: TAB[j] is replaced by the product
 * T1[j >> 3] * T2[j & 7] with T1[i] = TAB[8 i] = 2^(i/16) and T2[k] =
 * TAB[k] = 2^(k/128), each read by one permute from registers. y = (p *
 * T2) * T1: the two entries round once each (2^-53 rel, as TAB[j] did)
 * and there is one product more, so the bound of the file comment grows
 * by 2 * 2^-53 rel: |y - Y| <= (2^-49.5 + 5.1 * 2^-53) Y < 16.5 * 2^-53 Y,
 * and with sift__expf's own 2^-51 (4 * 2^-53), y and y_s are less than
 * 21 units of y's last place apart (a unit is more than 2^-53 y). The
 * doubt test of fx_weight4_y keeps a margin of 256 units, so its argument
 * holds unchanged (fx_weight8_y is the same test on eight lanes). This
 * path also fuses (AVX-512F, DQ and FMA): k is then X * 128/ln2 rounded
 * once to the nearest integer, X - k*H is exact as before and rounds to
 * itself, and r and p take one rounding per fused step where they took
 * two, so every error term above is at most what it was. The exhaustive
 * run (make check-expf) checks this path like the others, on every float
 * x in [-104, 0], which is every input the kernel sees (it clamps at -80). */
#if defined(SIFT__FX_AVX2)
#define SIFT__FX_AVX512 1

typedef struct fx8_tabs {
    __m512d t1a, t1b, t2;
} fx8_tabs;

__attribute__((target("avx512f"), always_inline)) static inline fx8_tabs fx8_tables(void)
{
    fx8_tabs t;
    t.t1a = _mm512_set_pd(FX_TAB[56], FX_TAB[48], FX_TAB[40], FX_TAB[32], FX_TAB[24], FX_TAB[16],
                          FX_TAB[8], FX_TAB[0]);
    t.t1b = _mm512_set_pd(FX_TAB[120], FX_TAB[112], FX_TAB[104], FX_TAB[96], FX_TAB[88], FX_TAB[80],
                          FX_TAB[72], FX_TAB[64]);
    t.t2 = _mm512_loadu_pd(FX_TAB);
    return t;
}

#define FX8_TARGET "avx512f,avx512dq,fma"

__attribute__((target(FX8_TARGET), always_inline)) static inline __m512d fx8_avx512_y(__m512d X,
                                                                                      fx8_tabs tab)
{
    const __m512d MAGIC = _mm512_set1_pd(FX_MAGIC);
    const __m512i LOW7 = _mm512_set1_epi64(127);
    __m512d t = _mm512_fmadd_pd(X, _mm512_set1_pd(FX_C), MAGIC);
    __m512d kd = _mm512_sub_pd(t, MAGIC);
    __m512i tb = _mm512_castpd_si512(t);
    __m512d r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(FX_H), X);
    r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(FX_L), r);
    __m512d p = _mm512_fmadd_pd(r, _mm512_set1_pd(FX_C4), _mm512_set1_pd(FX_C3));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.5));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    /* permutexvar reads index bits 0-2 (j & 7), permutex2var bits 0-3
     * of tb >> 3 (j >> 3); the higher bits are ignored */
    __m512d T2 = _mm512_permutexvar_pd(tb, tab.t2);
    __m512d T1 = _mm512_permutex2var_pd(tab.t1a, _mm512_srli_epi64(tb, 3), tab.t1b);
    __m512d y = _mm512_mul_pd(_mm512_mul_pd(p, T2), T1);
    __m512i sc = _mm512_slli_epi64(_mm512_andnot_si512(LOW7, tb), 45);
    return _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(y), sc));
}

/* fx_weight4_y's test on eight lanes (low - (2^28 - 256) < 512 unsigned
 * is its doubt), and the weight trunc(rb * 2^62) of the rounded rb by an
 * exact scaling and vcvttpd2uqq instead of the shifts (the same value:
 * rb <= 1, and a product below 1 truncates to 0). */
__attribute__((target(FX8_TARGET), always_inline)) static inline __m512i fx_weight8_y(__m512d y,
                                                                                      __mmask8 *bad)
{
    __m512i yb = _mm512_castpd_si512(y);
    __m512i low = _mm512_and_si512(yb, _mm512_set1_epi64(0x1fffffff));
    *bad = _mm512_cmplt_epu64_mask(_mm512_sub_epi64(low, _mm512_set1_epi64(0x10000000 - 256)),
                                   _mm512_set1_epi64(512));
    __m512i rb = _mm512_and_si512(_mm512_add_epi64(yb, _mm512_set1_epi64(0x10000000)),
                                  _mm512_set1_epi64(~(int64_t)0x1fffffff));
    return _mm512_cvttpd_epu64(_mm512_mul_pd(_mm512_castsi512_pd(rb), _mm512_set1_pd(0x1p62)));
}

/* The logits of c[0..16) in order: the odd floats of two 64-byte loads. */
__attribute__((target(FX8_TARGET), always_inline)) static inline __m512
load_logits16(const sift_candidate *c)
{
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512 a = _mm512_loadu_ps((const float *)(const void *)c);
    __m512 b = _mm512_loadu_ps((const float *)(const void *)(c + 8));
    return _mm512_permutex2var_ps(a, odd, b);
}

__attribute__((target(FX8_TARGET))) static sift__u128 weights_avx512(const sift_candidate *c,
                                                                     size_t n, float m, uint64_t *w)
{
    const fx8_tabs tab = fx8_tables();
    const __m512 mv = _mm512_set1_ps(m), lowv = _mm512_set1_ps(FX_LOW_W);
    const __m512i lo32 = _mm512_set1_epi64(0xffffffff);
    __m512i acc_lo = _mm512_setzero_si512(), acc_hi = _mm512_setzero_si512();
    uint64_t sum_lo = 0, sum_hi = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 l = load_logits16(c + i);
        if (SIFT__UNLIKELY(_mm512_cmp_ps_mask(l, mv, _CMP_LE_OQ) != 0xffff)) {
            add_halves(weights_scalar(c + i, 16, m, w + i), &sum_lo, &sum_hi);
            continue;
        }
        __m512 x = _mm512_max_ps(_mm512_sub_ps(l, mv), lowv);
        __m512d X0 = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
        __m512d X1 =
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
        __mmask8 bad0, bad1;
        __m512i w0 = fx_weight8_y(fx8_avx512_y(X0, tab), &bad0);
        __m512i w1 = fx_weight8_y(fx8_avx512_y(X1, tab), &bad1);
        _mm512_storeu_si512((void *)(w + i), w0);
        _mm512_storeu_si512((void *)(w + i + 8), w1);
        unsigned mask = (unsigned)bad0 | ((unsigned)bad1 << 8);
        if (SIFT__UNLIKELY(mask)) {
            fix_weights(c + i, m, w + i, mask);
            w0 = _mm512_loadu_si512((const void *)(w + i));
            w1 = _mm512_loadu_si512((const void *)(w + i + 8));
        }
        /* w0 + w1 <= 2^63 does not wrap; its halves go to the sums */
        __m512i w01 = _mm512_add_epi64(w0, w1);
        acc_lo = _mm512_add_epi64(acc_lo, _mm512_and_si512(w01, lo32));
        acc_hi = _mm512_add_epi64(acc_hi, _mm512_srli_epi64(w01, 32));
    }
    sum_lo += (uint64_t)_mm512_reduce_add_epi64(acc_lo);
    sum_hi += (uint64_t)_mm512_reduce_add_epi64(acc_hi);
    return sift__u128_add(sift__u128_halves(sum_lo, sum_hi),
                          weights_scalar(c + i, n - i, m, w + i));
}

/* The fast expf alone, eight at a time, for sift__expf_path: the float
 * and its doubt interval as in fx4_avx2, from fx8_avx512_y. */
__attribute__((target(FX8_TARGET))) static size_t expf_avx512(const float *x, float *e, size_t n)
{
    const fx8_tabs tab = fx8_tables();
    size_t fell = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512d y = fx8_avx512_y(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), tab);
        __m512d d = _mm512_mul_pd(y, _mm512_set1_pd(FX_D));
        __m256 a = _mm512_cvtpd_ps(_mm512_sub_pd(y, d));
        __m256 b = _mm512_cvtpd_ps(_mm512_add_pd(y, d));
        _mm256_storeu_ps(e + i, a);
        unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_NEQ_UQ));
        for (int j = 0; mask; j++, mask >>= 1) {
            if (mask & 1u) {
                e[i + (size_t)j] = sift__expf(x[i + (size_t)j]);
                fell++;
            }
        }
    }
    if (i < n)
        fell += expf_avx2(x + i, e + i, n - i);
    return fell;
}

/* entropy_scalar with its eight lanes in one register: lane j of the
 * scalar form is lane j here, so every lane adds the same terms in the
 * same order. The weights (< 2^63) become doubles by vcvtuqq2pd, which
 * rounds as the C conversion does; the two products stay separate (the
 * build has -ffp-contract=off). Latency-bound on the one chain of adds
 * the definition's lanes allow; it saves entropy_avx2's two-step
 * conversions and halves its instructions. */
__attribute__((target(FX8_TARGET))) static double
entropy_avx512(const sift_candidate *c, const uint64_t *w, size_t n, float m, double LS, double inv)
{
    const __m256 mv = _mm256_set1_ps(m);
    const __m512d LSv = _mm512_set1_pd(LS), invv = _mm512_set1_pd(inv);
    __m512d acc = _mm512_setzero_pd();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        /* a candidate is {id, logit}: the logit is each 64-bit lane's
         * high half */
        __m512i cv = _mm512_loadu_si512((const void *)(c + i));
        __m256 l = _mm256_castsi256_ps(_mm512_cvtepi64_epi32(_mm512_srli_epi64(cv, 32)));
        __m512i wv = _mm512_loadu_si512((const void *)(w + i));
        __m512d s = _mm512_sub_pd(LSv, _mm512_cvtps_pd(_mm256_sub_ps(l, mv)));
        __m512d v = _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtepu64_pd(wv), invv), s);
        /* a zero weight is the term +0 (its s may be inf: -inf logits) */
        acc = _mm512_add_pd(acc, _mm512_maskz_mov_pd(_mm512_test_epi64_mask(wv, wv), v));
    }
    double s[8];
    _mm512_storeu_pd(s, acc);
    for (int j = 0; i < n; i++, j++)
        s[j] += ent_term(c[i].logit, w[i], m, LS, inv);
    return lanes_combine(s);
}
#endif

/* ------------------------------------------------------------------ */
/* Dispatch                                                            */
/* ------------------------------------------------------------------ */

int sift__weights_path_available(int path)
{
    switch (path) {
    case 0: return 1;
#ifdef SIFT__FX_VEC
    case 1: return 1;
#endif
#ifdef SIFT__FX_AVX2
    case 2: return __builtin_cpu_supports("avx2") != 0;
#endif
#ifdef SIFT__FX_AVX512
    case 3:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("fma");
#endif
    default: return 0;
    }
}

sift__u128 sift__weights_path(int path, const sift_candidate *c, size_t n, float m, uint64_t *w)
{
    if (!sift__weights_path_available(path))
        path = 0;
#ifdef SIFT__FX_AVX512
    if (path == 3)
        return weights_avx512(c, n, m, w);
#endif
#ifdef SIFT__FX_AVX2
    if (path == 2)
        return weights_avx2(c, n, m, w);
#endif
#ifdef SIFT__FX_VEC
    if (path == 1)
        return weights_portable(c, n, m, w);
#endif
    return weights_scalar(c, n, m, w);
}

/* The path the library uses: on x86-64 the best one at or below the
 * level of sift__simd() (so SIFT_SIMD caps it, and "scalar" runs the
 * definition); elsewhere the portable vectors. */
static int best_path(void)
{
#ifdef SIFT__FX_AVX2
    int level = sift__simd()->level;
    return level >= SIFT__SIMD_AVX512 && sift__weights_path_available(3) ? 3
           : level >= SIFT__SIMD_AVX2 && sift__weights_path_available(2) ? 2
           : level >= SIFT__SIMD_SSE2                                    ? 1
                                                                         : 0;
#elif defined(SIFT__FX_VEC)
    return 1;
#else
    return 0;
#endif
}

sift__u128 sift__weights(const sift_candidate *c, size_t n, float m, uint64_t *w)
{
#ifdef SIFT__FX_AVX2
    switch (best_path()) {
    case 3: return weights_avx512(c, n, m, w);
    case 2: return weights_avx2(c, n, m, w);
    case 1: return weights_portable(c, n, m, w);
    default: return weights_scalar(c, n, m, w);
    }
#endif
#ifdef SIFT__FX_VEC
    return weights_portable(c, n, m, w);
#else
    return weights_scalar(c, n, m, w);
#endif
}

double sift__entropy_path(int path, const sift_candidate *c, const uint64_t *w, size_t n, float m,
                          double LS, double inv)
{
    if (!sift__weights_path_available(path))
        path = 0;
#ifdef SIFT__FX_AVX2
#ifdef SIFT__FX_AVX512
    if (path == 3)
        return entropy_avx512(c, w, n, m, LS, inv);
#endif
    if (path == 2)
        return entropy_avx2(c, w, n, m, LS, inv);
#endif
#ifdef SIFT__FX_VEC
    if (path == 1)
        return entropy_portable(c, w, n, m, LS, inv);
#endif
    return entropy_scalar(c, w, n, m, LS, inv);
}

double sift__entropy_sum(const sift_candidate *c, const uint64_t *w, size_t n, float m, double LS,
                         double inv)
{
#ifdef SIFT__FX_AVX2
    return sift__entropy_path(best_path(), c, w, n, m, LS, inv);
#elif defined(SIFT__FX_VEC)
    return entropy_portable(c, w, n, m, LS, inv);
#else
    return entropy_scalar(c, w, n, m, LS, inv);
#endif
}

static int in_domain(float x)
{
    return x >= FX_LOW && x <= 0.0f;
}

/* One value by the scalar method (path 0, and what the vector paths
 * leave): adds 1 to *fell when it was doubtful. */
static float expf_one(float x, size_t *fell)
{
    float v;
    if (in_domain(x) && fx_scalar(x, &v))
        return v;
    *fell += in_domain(x);
    return sift__expf(x);
}

size_t sift__expf_path(int path, const float *x, float *e, size_t n)
{
    size_t fell = 0, s = 0;
    if (!sift__weights_path_available(path))
        path = 0;
    while (s < n) {
        /* the longest run of whole blocks of four inside the domain */
        size_t t = s;
        if (path != 0)
            while (t + 4 <= n && in_domain(x[t]) && in_domain(x[t + 1]) && in_domain(x[t + 2]) &&
                   in_domain(x[t + 3]))
                t += 4;
        if (t == s) {
            e[s] = expf_one(x[s], &fell);
            s++;
            continue;
        }
#ifdef SIFT__FX_AVX512
        if (path == 3)
            fell += expf_avx512(x + s, e + s, t - s);
#endif
#ifdef SIFT__FX_AVX2
        if (path == 2)
            fell += expf_avx2(x + s, e + s, t - s);
#endif
#ifdef SIFT__FX_VEC
        if (path == 1)
            fell += expf_portable(x + s, e + s, t - s);
#endif
        s = t;
    }
    return fell;
}

/*
 * check_num.c - sift's numeric primitives (core/num.c, core/rng.c and the
 * vector weights of core/select.c) against independent references.
 *
 * Every decision sift makes rests on these functions, and the oracle uses
 * them too, so an error here would hide from the oracle comparison. Each
 * is checked against something that does not share its code: libm for
 * accuracy (never for bits), unsigned __int128 and a 256-bit schoolbook
 * product for the integer helpers, ldexp for the weights, the published
 * algorithm text for the RNG, plus fixed known answers so that any change
 * of the bits is caught.
 *
 * The exhaustive monotonicity sweep of sift__expf over every float in
 * [-104, 0] (about 1.1e9 values) is too slow for `make check`; it was run
 * once by hand (see docs/.parts/num.md) and this suite checks a dense
 * strided and random subset.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"

typedef unsigned __int128 u128;

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bfloat(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static u128 to_u128(sift__u128 a)
{
    return ((u128)a.hi << 64) | a.lo;
}

static sift__u128 from_u128(u128 v)
{
    sift__u128 r = {(uint64_t)v, (uint64_t)(v >> 64)};
    return r;
}

/* Distance of y from the exact value ref in units of the float ulp at ref
 * (for |ref| in the normal float range). */
static double ulp_err_f(float y, double ref)
{
    double ulp = ldexp(1.0, ilogb(ref) - 23);
    return fabs((double)y - ref) / ulp;
}

/* A random u128 that often sits on an edge: 0, 1, powers of two, all
 * ones in a half, or fully random. */
static u128 rand_u128(tu_rng *r)
{
    /* draws are sequenced explicitly: the order in which operands are
     * evaluated is the compiler's choice, and the cases must not depend
     * on it */
    uint64_t a = tu_next(r), b = tu_next(r);
    switch (tu_range(r, 0, 7)) {
    case 0: return 0;
    case 1: return (u128)tu_range(r, 0, 3);
    case 2: return (u128)1 << tu_range(r, 0, 127);
    case 3: return ((u128)1 << tu_range(r, 1, 127)) - 1;
    case 4: return (u128)a;
    case 5: return ~(u128)0 - (u128)tu_range(r, 0, 3);
    case 6: return ((u128)a << 64) | ((u128)1 << tu_range(r, 0, 63));
    default: return ((u128)a << 64) | b;
    }
}

/* ------------------------------------------------------------------ */
/* sift__expf                                                          */
/* ------------------------------------------------------------------ */

START_TEST(test_expf_has_the_documented_exact_values)
{
    ck_assert(sift__expf(0.0f) == 1.0f);
    ck_assert(sift__expf(-0.0f) == 1.0f);
    ck_assert(sift__expf(-INFINITY) == 0.0f);
    ck_assert(sift__expf(-104.0f) == 0.0f);
    ck_assert(sift__expf(-1000.0f) == 0.0f);
    ck_assert(sift__expf(-FLT_MAX) == 0.0f);
    ck_assert(isinf(sift__expf(89.0f))); /* e^89 = 4.49e38 > FLT_MAX */
    ck_assert(sift__expf(88.5f) < INFINITY && sift__expf(88.5f) > 2.7e38f);
    ck_assert(isinf(sift__expf(90.0f)) && sift__expf(90.0f) > 0);
    ck_assert(isinf(sift__expf(INFINITY)));
    ck_assert(isnan(sift__expf(NAN)));
    /* e^1 rounded to float is 0x1.5bf0a8p+1 */
    ck_assert(sift__expf(1.0f) == 0x1.5bf0a8p+1f);
    /* the largest float below 0 still gives a float just below 1 or 1 */
    float y = sift__expf(-0x1p-149f);
    ck_assert(y == 1.0f);
    /* results never negative */
    for (float x = -110.0f; x < 0.0f; x += 0.37f)
        ck_assert(sift__expf(x) >= 0.0f);
}
END_TEST

/* Every 61st float in [-104, 88.7]: about 35 million values. */
START_TEST(test_expf_is_within_one_ulp_of_libm_over_a_dense_sweep)
{
    double worst = 0.0;
    float worst_x = 0.0f;
    size_t n = 0;
    uint32_t lo = fbits(-104.0f), top = fbits(88.7f);
    for (uint32_t b = lo; b >= 0x80000000u && b <= lo; b -= 61) {
        float x = bfloat(b);
        double ref = exp((double)x);
        if (ref >= 0x1p-126) {
            double e = ulp_err_f(sift__expf(x), ref);
            if (e > worst) {
                worst = e;
                worst_x = x;
            }
        }
        n++;
    }
    for (uint32_t b = 0; b <= top; b += 61) {
        float x = bfloat(b);
        double e = ulp_err_f(sift__expf(x), exp((double)x));
        if (e > worst) {
            worst = e;
            worst_x = x;
        }
        n++;
    }
    printf("check_num: sift__expf max error %.4f ulp (at %a) over %zu floats\n", worst,
           (double)worst_x, n);
    ck_assert_msg(worst <= 1.0, "sift__expf error %.4f ulp at %a", worst, (double)worst_x);
}
END_TEST

/* Monotone non-decreasing on [-104, 0]: a stride through every binade
 * plus runs of consecutive floats at random places. */
START_TEST(test_expf_never_decreases_on_a_dense_subset_of_minus_104_to_0)
{
    /* Failures are counted and asserted once: a Check assertion per
     * value would dominate the run time. */
    uint32_t lo = fbits(-104.0f); /* bits decrease as the value increases */
    float prev = sift__expf(-104.0f);
    size_t bad = 0;
    float bad_x = 0.0f;
    for (uint32_t b = lo; b > 0x80000000u && b <= lo; b -= 37) {
        float x = bfloat(b), y = sift__expf(x);
        if (y < prev && bad++ == 0)
            bad_x = x;
        prev = y;
    }
    if (sift__expf(-0.0f) < prev)
        bad++;
    tu_rng r = {7};
    for (int run = 0; run < 500; run++) {
        uint32_t b = (uint32_t)tu_range(&r, 0x80000000u + 30000, lo);
        float p = sift__expf(bfloat(b));
        for (int i = 0; i < 20000; i++) {
            b--;
            float y = sift__expf(bfloat(b));
            if (y < p && bad++ == 0)
                bad_x = bfloat(b);
            p = y;
        }
    }
    ck_assert_msg(bad == 0, "%zu decreases, the first at %a", bad, (double)bad_x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* sift__log, sift__logf, sift__exp, sift__pow, sift__sqrt             */
/* ------------------------------------------------------------------ */

START_TEST(test_log_exp_pow_are_accurate_against_libm)
{
    tu_rng r = {11};
    double worst_log = 0, worst_exp = 0, worst_pow = 0, worst_logf = 0;
    for (int i = 0; i < 2000000; i++) {
        /* log over many binades, subnormals included */
        /* (two statements: the order of the draws must not depend on
         * the compiler's order of evaluating arguments) */
        double mant = 1.0 + tu_unif(&r);
        double x = ldexp(mant, (int)tu_range(&r, -1074, 1023));
        double l = sift__log(x), ref = log(x);
        double e = ref != 0 ? fabs(l - ref) / fabs(ref) : fabs(l);
        worst_log = e > worst_log ? e : worst_log;
        /* exp over its finite range */
        double y = -745.0 + 1454.0 * tu_unif(&r);
        double ey = sift__exp(y), ry = exp(y);
        if (ry > 0x1p-1022) {
            e = fabs(ey - ry) / ry;
            worst_exp = e > worst_exp ? e : worst_exp;
        }
        /* pow with results in the normal range */
        double px = 1e-3 + 10.0 * tu_unif(&r), py = -20.0 + 40.0 * tu_unif(&r);
        double pr = pow(px, py);
        e = fabs(sift__pow(px, py) - pr) / pr;
        worst_pow = e > worst_pow ? e : worst_pow;
        /* logf of a positive float */
        float fx = bfloat((uint32_t)tu_range(&r, 1, 0x7f7fffff));
        double lf = (double)logf(fx);
        if (lf != 0) {
            double ef = ulp_err_f(sift__logf(fx), log((double)fx));
            worst_logf = ef > worst_logf ? ef : worst_logf;
        }
    }
    printf("check_num: max relative error log %.3g exp %.3g pow %.3g; logf %.4f ulp\n", worst_log,
           worst_exp, worst_pow, worst_logf);
    ck_assert_msg(worst_log < 4e-16, "log rel err %g", worst_log);
    ck_assert_msg(worst_exp < 4e-16, "exp rel err %g", worst_exp);
    /* pow = exp(y log x): rounding y * log(x) (up to 46 in magnitude,
     * half an ulp = 3.6e-15) and |y| (up to 20) times the error of log x
     * go straight into the relative error of the result, so the bound is
     * looser (measured: about 2.1e-14). */
    ck_assert_msg(worst_pow < 4e-14, "pow rel err %g", worst_pow);
    ck_assert_msg(worst_logf <= 0.5 + 1e-6, "logf err %g ulp", worst_logf);
}
END_TEST

START_TEST(test_log_exp_pow_special_values)
{
    ck_assert(sift__log(1.0) == 0.0);
    ck_assert(sift__log(0.0) == -INFINITY);
    ck_assert(isnan(sift__log(-1.0)));
    ck_assert(isnan(sift__log(NAN)));
    ck_assert(sift__log(INFINITY) == INFINITY);
    ck_assert(sift__logf(1.0f) == 0.0f);
    ck_assert(sift__logf(0.0f) == -INFINITY);
    ck_assert(sift__exp(0.0) == 1.0);
    ck_assert(sift__exp(-INFINITY) == 0.0);
    ck_assert(sift__exp(-746.0) == 0.0);
    ck_assert(sift__exp(710.0) == INFINITY);
    ck_assert(isnan(sift__exp(NAN)));
    ck_assert(sift__pow(0.0, 2.0) == 0.0);
    ck_assert(sift__pow(0.0, 0.0) == 1.0);
    ck_assert(sift__pow(5.0, 0.0) == 1.0);
    ck_assert(sift__pow(1.0, 1e300) == 1.0);
    ck_assert(isnan(sift__pow(-2.0, 0.5)));
    ck_assert(isnan(sift__pow(NAN, 1.0)));
    ck_assert(fabs(sift__pow(2.0, 10.0) - 1024.0) < 1e-12);
    ck_assert(sift__sqrt(4.0) == 2.0);
    ck_assert(sift__sqrt(2.0) == 0x1.6a09e667f3bcdp+0);
    ck_assert(sift__sqrt(0.0) == 0.0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* sift__weight and the vector weights                                 */
/* ------------------------------------------------------------------ */

/* trunc(e * 2^62) computed with ldexp (exact: a power-of-two scale of a
 * float) and a double -> u64 conversion (exact below 2^64). */
static uint64_t weight_ref(float e)
{
    if (!(e > 0.0f))
        return 0;
    double v = ldexp((double)e, 62);
    return (uint64_t)v;
}

START_TEST(test_weight_is_e_times_2_to_62_truncated)
{
    ck_assert_uint_eq(sift__weight(1.0f), (uint64_t)1 << 62);
    ck_assert_uint_eq(sift__weight(0.0f), 0);
    ck_assert_uint_eq(sift__weight(-0.0f), 0);
    ck_assert_uint_eq(sift__weight(0.5f), (uint64_t)1 << 61);
    ck_assert_uint_eq(sift__weight(0x1p-62f), 1);
    ck_assert_uint_eq(sift__weight(0x1.fffffep-63f), 0);
    ck_assert_uint_eq(sift__weight(0x1p-63f), 0);
    ck_assert_uint_eq(sift__weight(0x1p-149f), 0);        /* smallest subnormal */
    ck_assert_uint_eq(sift__weight(0x1.fffffcp-127f), 0); /* largest subnormal */
    ck_assert_uint_eq(sift__weight(0x1.8p-61f), 3);
    ck_assert_uint_eq(sift__weight(0x1.fffffep-1f), ((uint64_t)0xffffff) << 38);
    /* every float in [2^-40, 1] at a stride, and every float of a few
     * binades around 2^-62 where truncation bites */
    size_t bad = 0;
    for (uint32_t b = fbits(0x1p-40f); b <= fbits(1.0f); b += 7)
        bad += sift__weight(bfloat(b)) != weight_ref(bfloat(b));
    for (uint32_t b = fbits(0x1p-66f); b <= fbits(0x1p-58f); b += 3)
        bad += sift__weight(bfloat(b)) != weight_ref(bfloat(b));
    for (uint32_t b = 0; b < fbits(0x1p-100f); b += 9973)
        bad += sift__weight(bfloat(b)) != 0;
    ck_assert_uint_eq(bad, 0);
}
END_TEST

/* sift__weights (the fast path of select.c) must equal the scalar
 * composition sift__weight(sift__expf(l - m)) for every element, and its
 * sum must be exact. */
START_TEST(test_weights_match_the_scalar_composition_bitwise)
{
    enum { N = 1 << 16 };
    sift_candidate *c = malloc(N * sizeof *c);
    uint64_t *w = malloc(N * sizeof *w);
    ck_assert(c && w);
    tu_rng r = {(uint64_t)_i * 977 + 3};
    for (int rep = 0; rep < 40; rep++) {
        size_t n = (size_t)tu_range(&r, 1, N);
        float m;
        int kind = (int)tu_range(&r, 0, 3);
        for (size_t i = 0; i < n; i++) {
            c[i].id = (int32_t)i;
            switch (kind) {
            case 0: /* any float, -inf included */
                c[i].logit = bfloat((uint32_t)tu_next(&r));
                if (isnan(c[i].logit) || c[i].logit == INFINITY)
                    c[i].logit = -INFINITY;
                break;
            case 1: /* realistic */ c[i].logit = (float)(3.0 * tu_normal(&r)); break;
            case 2: /* around the -104 and -44 edges */
                c[i].logit = (float)(-110.0 + 112.0 * tu_unif(&r));
                break;
            default: /* consecutive floats below 0 */
                c[i].logit = bfloat(0x80000000u + (uint32_t)tu_range(&r, 0, 0x42d00000));
                break;
            }
        }
        m = -INFINITY;
        for (size_t i = 0; i < n; i++)
            m = c[i].logit > m ? c[i].logit : m;
        if (!(m > -INFINITY)) {
            c[0].logit = 0.0f;
            m = c[0].logit;
            for (size_t i = 0; i < n; i++)
                m = c[i].logit > m ? c[i].logit : m;
        }
        for (int path = -1; path <= 3; path++) {
            if (path >= 0 && !sift__weights_path_available(path))
                continue;
            sift__u128 W =
                path < 0 ? sift__weights(c, n, m, w) : sift__weights_path(path, c, n, m, w);
            u128 ref = 0;
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) {
                uint64_t x = sift__weight(sift__expf(c[i].logit - m));
                if (w[i] != x && bad++ == 0)
                    ck_assert_msg(0, "path %d: weight of %a (m %a): %llu vs %llu", path,
                                  (double)c[i].logit, (double)m, (unsigned long long)w[i],
                                  (unsigned long long)x);
                ref += x;
            }
            ck_assert(to_u128(W) == ref);
        }
    }
    free(c);
    free(w);
}
END_TEST

/* Every 13th float x in [-104.5, 0] through each vector path of the
 * weights (m = 0): the same bits as the scalar functions. The whole range
 * without a stride was checked once by hand (docs/.parts/num.md). */
START_TEST(test_weights_match_scalar_expf_over_a_float_sweep)
{
    enum { N = 4096 };
    sift_candidate c[N];
    uint64_t w[N];
    uint32_t lo = fbits(-104.5f);
    size_t n = 0, bad = 0;
    float bad_x = 0.0f;
    c[n].id = 0;
    c[n].logit = 0.0f;
    n++;
    for (uint32_t b = lo;; b -= 13) {
        c[n].id = (int32_t)n;
        c[n].logit = bfloat(b);
        n++;
        if (n == N || b < 0x80000000u + 13) {
            for (int path = 1; path <= 3; path++) {
                if (!sift__weights_path_available(path))
                    continue;
                sift__weights_path(path, c, n, 0.0f, w);
                for (size_t i = 0; i < n; i++)
                    if (w[i] != sift__weight(sift__expf(c[i].logit)) && bad++ == 0)
                        bad_x = c[i].logit;
            }
            n = 1;
        }
        if (b < 0x80000000u + 13)
            break;
    }
    ck_assert_msg(bad == 0, "%zu mismatches, the first at %a", bad, (double)bad_x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The fast expf of the weights kernel (core/weights.c)                */
/* ------------------------------------------------------------------ */

/* Values in [-104, 0] whose fast result is doubtful (its doubt interval
 * holds a float rounding boundary), so the kernel must take sift__expf's
 * value: all 117 that `expf_exhaustive --list` finds over the whole range. They are where a wrong
 * fallback would show. */
static const float HARD[] = {
    -0x1.fffff2p-26f, -0x1.fffff4p-26f, -0x1.fffff6p-26f, -0x1.fffff8p-26f, -0x1.fffffap-26f,
    -0x1.fffffcp-26f, -0x1.fffffep-26f, -0x1p-25f,        -0x1.000002p-25f, -0x1.000004p-25f,
    -0x1.000006p-25f, -0x1.000008p-25f, -0x1.7ffffep-24f, -0x1.8p-24f,      -0x1.800002p-24f,
    -0x1.800004p-24f, -0x1.4p-23f,      -0x1.400002p-23f, -0x1.c00002p-23f, -0x1.c00004p-23f,
    -0x1.200002p-22f, -0x1.600004p-22f, -0x1.a00006p-22f, -0x1.e00008p-22f, -0x1.300006p-21f,
    -0x1.700008p-21f, -0x1.90000ap-21f, -0x1.38000cp-20f, -0x1.68001p-20f,  -0x1.a80016p-20f,
    -0x1.2c0016p-19f, -0x1.c40032p-19f, -0x1.1e0028p-18f, -0x1.6a004p-18f,  -0x1.b2005cp-18f,
    -0x1.d2006ap-18f, -0x1.17004cp-17f, -0x1.93813ep-16f, -0x1.cd81ap-16f,  -0x1.e981d4p-16f,
    -0x1.28c158p-15f, -0x1.364178p-15f, -0x1.6e420cp-15f, -0x1.d5c35ep-15f, -0x1.f043c2p-15f,
    -0x1.9424fcp-14f, -0x1.c12628p-14f, -0x1.f5a7aep-14f, -0x1.5156f2p-13f, -0x1.7818a2p-13f,
    -0x1.b09b6cp-13f, -0x1.a82df6p-12f, -0x1.ea755cp-12f, -0x1.a4af32p-11f, -0x1.e4854cp-11f,
    -0x1.ba156p-10f,  -0x1.c1c4b8p-10f, -0x1.fdb8c8p-10f, -0x1.4ba854p-9f,  -0x1.1b31eap-8f,
    -0x1.35f0d4p-8f,  -0x1.39771cp-8f,  -0x1.4e537p-8f,   -0x1.6e1ddp-8f,   -0x1.c18442p-8f,
    -0x1.d4268ap-8f,  -0x1.e1dbe2p-8f,  -0x1.548c34p-7f,  -0x1.f691dap-7f,  -0x1.71e81ep-6f,
    -0x1.c02f76p-6f,  -0x1.39eab4p-5f,  -0x1.8f590ap-5f,  -0x1.9a7404p-5f,  -0x1.aafb18p-5f,
    -0x1.4fad84p-4f,  -0x1.6727d6p-4f,  -0x1.e251d6p-4f,  -0x1.23eaep-3f,   -0x1.8f7d06p-3f,
    -0x1.beccfap-3f,  -0x1.cf6ab2p-3f,  -0x1.d3300cp-3f,  -0x1.e2a52p-3f,   -0x1.c1cd9ap-2f,
    -0x1.da035ep-2f,  -0x1.f207fp-2f,   -0x1.fffdd2p-2f,  -0x1.2af904p-1f,  -0x1.edfb24p-1f,
    -0x1.03d5bep+0f,  -0x1.56f9c8p+0f,  -0x1.64a3ep+0f,   -0x1.7f4296p+0f,  -0x1.a088c4p+0f,
    -0x1.f9085ap+0f,  -0x1.34003ap+1f,  -0x1.66b396p+1f,  -0x1.705ce4p+1f,  -0x1.d2445ap+1f,
    -0x1.f02a66p+1f,  -0x1.96b488p+2f,  -0x1.ba246cp+2f,  -0x1.7acc62p+3f,  -0x1.8b8f12p+3f,
    -0x1.b3f43cp+3f,  -0x1.d2259ap+3f,  -0x1.ecb038p+3f,  -0x1.2c77b6p+4f,  -0x1.850e7ap+4f,
    -0x1.ec9718p+4f,  -0x1.6dc968p+5f,  -0x1.fab1b2p+5f,  -0x1.5768a8p+6f,  -0x1.5800a4p+6f,
    -0x1.5ce26ap+6f,  -0x1.65cf3p+6f,
};
enum { HARD_N = (int)(sizeof HARD / sizeof HARD[0]) };

/* Appends the floats with bit patterns b0, b0 + 1, ..., b0 + n - 1
 * (x has room for 5,000,000). */
static size_t push_run(float *x, size_t k, uint32_t b0, uint32_t n)
{
    ck_assert(k + n <= 5000000);
    for (uint32_t i = 0; i < n; i++)
        x[k++] = bfloat(b0 + i);
    return k;
}

/* Compares sift__expf_path on x[0..n) with sift__expf for every path the
 * machine has; returns the fallbacks of path 0. */
static size_t expect_fast_expf_exact(const float *x, size_t n, float *e)
{
    size_t fell0 = 0;
    for (int path = 0; path <= 3; path++) {
        if (!sift__weights_path_available(path))
            continue;
        size_t fell = sift__expf_path(path, x, e, n);
        if (path == 0)
            fell0 = fell;
        else
            ck_assert_uint_eq(fell, fell0); /* the same operations, the same doubts */
        for (size_t i = 0; i < n; i++)
            if (fbits(e[i]) != fbits(sift__expf(x[i])))
                ck_assert_msg(0, "path %d: expf(%a) = %a, sift__expf gives %a", path, (double)x[i],
                              (double)e[i], (double)sift__expf(x[i]));
    }
    return fell0;
}

START_TEST(test_fast_expf_equals_sift_expf_on_a_dense_sample_for_every_path)
{
    enum { CAP = 5000000 };
    float *x = malloc(CAP * sizeof *x);
    float *e = malloc(CAP * sizeof *e);
    ck_assert(x && e);
    size_t k = 0;
    /* every 397th float of [-104, 0] */
    for (uint32_t b = 0x80000000u; b <= fbits(-104.0f); b += 397)
        x[k++] = bfloat(b);
    /* every float of [-104.5, -103.5]: the -104 cut (values below it are
     * outside the fast domain and must still agree) */
    k = push_run(x, k, fbits(-103.5f), fbits(-104.5f) - fbits(-103.5f) + 1);
    /* the smallest x (subnormal and tiny normal inputs, k = 0) */
    k = push_run(x, k, 0x80000000u, 100000);
    k = push_run(x, k, fbits(-0x1p-126f) - 50000, 100000);
    /* around the k = 0 / k = -1 boundary x = -ln2/256 and the first
     * table rows, where r changes sign */
    for (int j = 1; j <= 300; j++)
        k = push_run(x, k, fbits((float)(-0.6931471805599453 * j / 256.0)) - 20, 41);
    /* where the result becomes subnormal (x about -87.34) and where it
     * underflows to 0 (about -103.97) */
    k = push_run(x, k, fbits(-87.3365f) - 20000, 40000);
    k = push_run(x, k, fbits(-103.972f) - 20000, 40000);
    /* 200 runs of 5000 consecutive floats at random places */
    tu_rng r = {0xe4f};
    for (int j = 0; j < 200; j++)
        k = push_run(x, k, (uint32_t)tu_range(&r, 0x80000000u, fbits(-104.0f) - 5000), 5000);
    /* special values, all outside the fast domain */
    x[k++] = -INFINITY;
    x[k++] = -FLT_MAX;
    x[k++] = 0x1p-149f;
    x[k++] = 1.0f;
    x[k++] = 88.5f;
    x[k++] = INFINITY;
    ck_assert(k <= CAP);
    expect_fast_expf_exact(x, k, e);
    free(x);
    free(e);
}
END_TEST

START_TEST(test_fast_expf_falls_back_to_sift_expf_on_the_hard_cases)
{
    /* each hard case with its three neighbours on each side, in blocks
     * that the vector paths take whole */
    float x[HARD_N * 7], e[HARD_N * 7];
    size_t k = 0;
    for (int j = 0; j < HARD_N; j++)
        k = push_run(x, k, fbits(HARD[j]) - 3, 7);
    size_t fell = expect_fast_expf_exact(x, k, e);
    /* every listed value is doubtful, so the fallback really ran */
    ck_assert_uint_ge(fell, (size_t)HARD_N);
    for (int j = 0; j < HARD_N; j++)
        ck_assert_uint_eq(sift__expf_path(0, &HARD[j], e, 1), 1);
}
END_TEST

/* The weights kernel on rows that put the hard cases, ties at the
 * maximum and the -104 edge into every lane position, with lengths that
 * leave every tail size. */
START_TEST(test_weights_are_exact_on_hard_cases_ties_and_edges)
{
    enum { N = 4096 };
    sift_candidate *c = malloc(N * sizeof *c);
    uint64_t *w = malloc(N * sizeof *w);
    ck_assert(c && w);
    tu_rng r = {0x77};
    for (int rep = 0; rep < 200; rep++) {
        size_t n = (size_t)tu_range(&r, 1, rep < 100 ? 40 : N);
        float m = (float)(tu_unif(&r) * 20.0 - 10.0);
        for (size_t i = 0; i < n; i++) {
            c[i].id = (int32_t)i;
            switch (tu_range(&r, 0, 5)) {
            case 0: c[i].logit = m + HARD[tu_range(&r, 0, HARD_N - 1)]; break;
            case 1: c[i].logit = m; break; /* ties at the top */
            case 2: c[i].logit = m - 104.0f; break;
            case 3: c[i].logit = -INFINITY; break;
            case 4: c[i].logit = m - (float)(50.0 * tu_unif(&r)); break;
            default: c[i].logit = m - (float)(0.001 * tu_unif(&r)); break;
            }
        }
        c[tu_range(&r, 0, (int64_t)n - 1)].logit = m;
        /* with m = 0 the lanes see the hard cases themselves */
        for (int zero = 0; zero < 2; zero++) {
            float mm = m;
            if (zero) {
                for (size_t i = 0; i < n; i++)
                    c[i].logit = c[i].logit == m ? 0.0f : HARD[tu_range(&r, 0, HARD_N - 1)];
                mm = 0.0f;
            }
            u128 ref = 0;
            for (size_t i = 0; i < n; i++)
                ref += sift__weight(sift__expf(c[i].logit - mm));
            for (int path = -1; path <= 3; path++) {
                if (path >= 0 && !sift__weights_path_available(path))
                    continue;
                sift__u128 W =
                    path < 0 ? sift__weights(c, n, mm, w) : sift__weights_path(path, c, n, mm, w);
                for (size_t i = 0; i < n; i++)
                    ck_assert_msg(w[i] == sift__weight(sift__expf(c[i].logit - mm)),
                                  "path %d: weight of %a - %a", path, (double)c[i].logit,
                                  (double)mm);
                ck_assert(to_u128(W) == ref);
            }
        }
    }
    free(c);
    free(w);
}
END_TEST

/* sift__entropy_sum and every path of it equal the stored-array
 * definition: the terms summed by sift__dsum_idorder. */
START_TEST(test_entropy_sum_is_the_id_order_sum_of_its_terms_bitwise)
{
    enum { N = 20000 };
    sift_candidate *c = malloc(N * sizeof *c);
    uint64_t *w = malloc(N * sizeof *w);
    double *v = malloc(N * sizeof *v);
    ck_assert(c && w && v);
    tu_rng r = {0xe7};
    for (int rep = 0; rep < 300; rep++) {
        size_t n = (size_t)tu_range(&r, 1, rep < 150 ? 30 : N);
        int kind = (int)tu_range(&r, 0, 3);
        for (size_t i = 0; i < n; i++) {
            c[i].id = (int32_t)i;
            switch (kind) {
            case 0: c[i].logit = (float)(3.0 * tu_normal(&r)); break;
            case 1: /* -inf runs and far tails: zero weights */
                c[i].logit = tu_range(&r, 0, 2) ? -INFINITY : (float)(-80.0 * tu_unif(&r));
                break;
            case 2: c[i].logit = tu_bf16((float)(10.0 * tu_normal(&r))); break;
            default: c[i].logit = (float)tu_range(&r, -3, 0); break; /* ties */
            }
        }
        c[tu_range(&r, 0, (int64_t)n - 1)].logit = 0.5f;
        float m = sift__max_logit(c, n);
        sift__u128 W = sift__weights_path(0, c, n, m, w);
        double S = sift__u128_to_double(W);
        double LS = sift__log(S) - 62.0 * 0.6931471805599453;
        double inv = 1.0 / S;
        for (size_t i = 0; i < n; i++)
            v[i] = w[i] ? ((double)w[i] * inv) * (LS - (double)(c[i].logit - m)) : 0.0;
        double ref = sift__dsum_idorder(v, n);
        for (int path = -1; path <= 3; path++) {
            if (path >= 0 && !sift__weights_path_available(path))
                continue;
            double H = path < 0 ? sift__entropy_sum(c, w, n, m, LS, inv)
                                : sift__entropy_path(path, c, w, n, m, LS, inv);
            uint64_t hb, rb;
            memcpy(&hb, &H, sizeof hb);
            memcpy(&rb, &ref, sizeof rb);
            ck_assert_msg(hb == rb, "path %d, n %zu: %a vs %a", path, n, H, ref);
        }
    }
    free(c);
    free(w);
    free(v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* 128-bit helpers                                                     */
/* ------------------------------------------------------------------ */

START_TEST(test_u128_add_sub_cmp_match_unsigned_int128)
{
    tu_rng r = {21};
    size_t bad = 0;
    for (int i = 0; i < 1000000; i++) {
        u128 a = rand_u128(&r), b = rand_u128(&r);
        sift__u128 A = from_u128(a), B = from_u128(b);
        bad += to_u128(sift__u128_add(A, B)) != a + b;
        bad += to_u128(sift__u128_sub(A, B)) != a - b;
        bad += to_u128(sift__u128_add64(A, B.lo)) != a + (uint64_t)b;
        bad += sift__u128_cmp(A, B) != (a > b) - (a < b);
        bad += to_u128(sift__u128_from(B.lo)) != (uint64_t)b;
    }
    ck_assert_uint_eq(bad, 0);
}
END_TEST

START_TEST(test_u128_scale_u64_is_floor_w_times_u_over_2_to_64)
{
    tu_rng r = {22};
    size_t bad = 0;
    for (int i = 0; i < 1000000; i++) {
        u128 w = rand_u128(&r);
        uint64_t u = (uint64_t)rand_u128(&r);
        /* floor(w * u / 2^64) = wh * u + floor(wl * u / 2^64) */
        u128 wl = (uint64_t)w, wh = w >> 64;
        u128 ref = wh * u + ((wl * u) >> 64);
        bad += to_u128(sift__u128_scale_u64(from_u128(w), u)) != ref;
    }
    ck_assert_uint_eq(bad, 0);
    /* W = 2^62 * V with the extreme u: the result stays below W */
    sift__u128 W = from_u128((u128)248320 << 62);
    ck_assert(to_u128(sift__u128_scale_u64(W, UINT64_MAX)) < to_u128(W));
    ck_assert(to_u128(sift__u128_scale_u64(W, 0)) == 0);
}
END_TEST

/* floor or ceil of W * p with a 256-bit schoolbook product in 32-bit
 * limbs: W * mant, then a bit-by-bit shift by the exponent. */
static u128 scale_float_ref(u128 W, float p, int ceil_)
{
    if (!(p > 0.0f))
        return 0;
    if (p >= 1.0f)
        return W;
    int ex;
    double fr = frexp((double)p, &ex);       /* p = fr * 2^ex, fr in [0.5, 1) */
    uint64_t mant = (uint64_t)ldexp(fr, 24); /* exact: a float has 24 bits */
    int sh = 24 - ex;                        /* p = mant * 2^-sh */
    uint32_t wl[4], prod[8] = {0};
    for (int i = 0; i < 4; i++)
        wl[i] = (uint32_t)(W >> (32 * i));
    uint32_t ml[2] = {(uint32_t)mant, (uint32_t)(mant >> 32)};
    for (int i = 0; i < 4; i++) {
        uint64_t carry = 0;
        for (int j = 0; j < 2; j++) {
            uint64_t t = (uint64_t)wl[i] * ml[j] + prod[i + j] + carry;
            prod[i + j] = (uint32_t)t;
            carry = t >> 32;
        }
        for (int k = i + 2; carry && k < 8; k++) {
            uint64_t t = (uint64_t)prod[k] + carry;
            prod[k] = (uint32_t)t;
            carry = t >> 32;
        }
    }
    u128 q = 0;
    int lost = 0;
    for (int bit = 0; bit < 256; bit++) {
        int v = (prod[bit / 32] >> (bit % 32)) & 1;
        if (bit < sh)
            lost |= v;
        else if (bit - sh < 128)
            q |= (u128)v << (bit - sh);
    }
    return q + (u128)(ceil_ && lost);
}

static float rand_prob(tu_rng *r)
{
    switch (tu_range(r, 0, 5)) {
    case 0: return (float)tu_unif(r);
    case 1: return bfloat((uint32_t)tu_range(r, 0, 0x3f800000)); /* any float in [0, 1] */
    case 2: return bfloat((uint32_t)tu_range(r, 1, 0x007fffff)); /* subnormal */
    case 3: return ldexpf(1.0f, -(int)tu_range(r, 0, 149));
    case 4: return 1.0f - ldexpf((float)tu_range(r, 1, 8), -24);
    default: return bfloat((uint32_t)tu_range(r, 0x3e000000, 0x3f800000));
    }
}

START_TEST(test_u128_scale_float_is_exact_floor_and_ceil)
{
    tu_rng r = {23};
    size_t bad = 0;
    for (int i = 0; i < 400000; i++) {
        u128 w = rand_u128(&r);
        if (tu_range(&r, 0, 1))
            w = (u128)tu_range(&r, 1, 300000) << 62; /* a real mass */
        float p = rand_prob(&r);
        for (int c = 0; c <= 1; c++) {
            u128 got = to_u128(sift__u128_scale_float(from_u128(w), p, c));
            if (got != scale_float_ref(w, p, c) && bad++ == 0)
                ck_assert_msg(0, "W=%llx:%llx p=%a ceil=%d", (unsigned long long)(w >> 64),
                              (unsigned long long)w, (double)p, c);
        }
    }
    ck_assert_uint_eq(bad, 0);
    sift__u128 W = from_u128((u128)5 << 62);
    ck_assert(to_u128(sift__u128_scale_float(W, 0.0f, 1)) == 0);
    ck_assert(to_u128(sift__u128_scale_float(W, -0.5f, 1)) == 0);
    ck_assert(to_u128(sift__u128_scale_float(W, 1.0f, 0)) == to_u128(W));
    ck_assert(to_u128(sift__u128_scale_float(W, 0.5f, 0)) == ((u128)5 << 61));
    /* W = 3, p = 0.5: floor 1, ceil 2 */
    ck_assert(to_u128(sift__u128_scale_float(from_u128(3), 0.5f, 0)) == 1);
    ck_assert(to_u128(sift__u128_scale_float(from_u128(3), 0.5f, 1)) == 2);
}
END_TEST

/* Round to nearest, ties to even, written out on the bits. */
static double to_double_ref(u128 v)
{
    if (v == 0)
        return 0.0;
    int top = 127;
    while (!((v >> top) & 1))
        top--;
    if (top < 53)
        return (double)(uint64_t)v;
    int drop = top - 52;
    u128 keep = v >> drop;
    u128 rem = v & (((u128)1 << drop) - 1);
    u128 half = (u128)1 << (drop - 1);
    if (rem > half || (rem == half && (keep & 1)))
        keep++;
    return ldexp((double)(uint64_t)keep, drop);
}

START_TEST(test_u128_to_double_rounds_to_nearest_even)
{
    tu_rng r = {24};
    size_t bad = 0;
    for (int i = 0; i < 1000000; i++) {
        u128 v = rand_u128(&r);
        if (tu_range(&r, 0, 3) == 0) {
            /* a tie or a near-tie: 53 bits, then a half, +- a sticky bit */
            int top = (int)tu_range(&r, 54, 127);
            u128 m = ((u128)tu_next(&r) | ((u128)1 << 63)) >> 11; /* 53 bits */
            v = m << (top - 52);
            v |= (u128)1 << (top - 53);
            int s = (int)tu_range(&r, 0, 2);
            if (s == 1)
                v |= 1;
            else if (s == 2)
                v -= 1;
        }
        double got = sift__u128_to_double(from_u128(v));
        if (got != to_double_ref(v) && bad++ == 0)
            ck_assert_msg(0, "v=%llx:%llx got %a want %a", (unsigned long long)(v >> 64),
                          (unsigned long long)v, got, to_double_ref(v));
    }
    ck_assert_uint_eq(bad, 0);
    ck_assert(sift__u128_to_double(from_u128(0)) == 0.0);
    ck_assert(sift__u128_to_double(from_u128(~(u128)0)) == 0x1p128);
    /* 2^64 + 1: the 1 is below precision; 2^54 + 2 + 1 rounds up */
    ck_assert(sift__u128_to_double(from_u128(((u128)1 << 64) + 1)) == 0x1p64);
    ck_assert(sift__u128_to_double(from_u128(((u128)1 << 65) | ((u128)3 << 11))) ==
              0x1p65 + 0x1p13);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The id-order double sum                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_dsum_idorder_is_the_eight_lane_sum_bitwise)
{
    tu_rng r = {31};
    double *v = malloc(5000 * sizeof *v);
    ck_assert(v);
    for (int rep = 0; rep < 2000; rep++) {
        size_t n = (size_t)tu_range(&r, 0, 5000);
        if (rep < 40)
            n = (size_t)rep;
        for (size_t i = 0; i < n; i++) {
            double g = tu_normal(&r);
            v[i] = g * ldexp(1.0, (int)tu_range(&r, -30, 30));
        }
        double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (size_t i = 0; i < n; i++)
            lane[i % 8] = lane[i % 8] + v[i];
        double want = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                      ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        double got = sift__dsum_idorder(v, n);
        ck_assert(memcmp(&got, &want, sizeof got) == 0);
        double oracle = or_dsum_idorder(v, n);
        ck_assert(memcmp(&got, &oracle, sizeof got) == 0);
    }
    /* a case where the lane order matters: 1e16 + 1 + ... */
    double w[9] = {1e16, 1, 1, 1, 1, 1, 1, 1, -1e16};
    double lane0 = (1e16 + -1e16);
    double want = ((lane0 + 1.0) + (1.0 + 1.0)) + ((1.0 + 1.0) + (1.0 + 1.0));
    ck_assert(sift__dsum_idorder(w, 9) == want);
    ck_assert(sift__dsum_idorder(w, 9) == 7.0);
    free(v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* RNG                                                                 */
/* ------------------------------------------------------------------ */

/* splitmix64 and xoshiro256** as published by Vigna (prng.di.unimi.it),
 * written again here from the algorithm text. */
static uint64_t ref_splitmix(uint64_t *x)
{
    *x += 0x9e3779b97f4a7c15ull;
    uint64_t z = *x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t ref_rotl(uint64_t x, unsigned k)
{
    return (x << k) | (x >> (64u - k));
}

static uint64_t ref_xoshiro(uint64_t s[4])
{
    const uint64_t out = ref_rotl(s[1] * 5u, 7) * 9u;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ref_rotl(s[3], 45);
    return out;
}

START_TEST(test_rng_matches_the_published_xoshiro256starstar_and_splitmix64)
{
    /* splitmix64 from 0: its well-known first output */
    uint64_t x = 0;
    ck_assert_uint_eq(ref_splitmix(&x), 0xe220a8397b1dcdafull);
    static const uint64_t seeds[] = {0, 42, 1, UINT64_MAX, 0x123456789abcdefull};
    for (size_t si = 0; si < sizeof seeds / sizeof seeds[0]; si++) {
        uint64_t st[4], sm = seeds[si];
        for (int i = 0; i < 4; i++)
            st[i] = ref_splitmix(&sm);
        sift__rng r;
        sift__rng_seed(&r, seeds[si]);
        for (int i = 0; i < 4; i++)
            ck_assert_uint_eq(r.s[i], st[i]);
        size_t bad = 0;
        for (int i = 0; i < 10000; i++)
            bad += sift__rng_next(&r) != ref_xoshiro(st);
        ck_assert_uint_eq(bad, 0);
    }
}
END_TEST

/* Fixed answers: a change of the RNG or of its seeding changes every
 * token sift draws, so it must be deliberate. */
START_TEST(test_rng_known_answers_for_seeds_0_and_42)
{
    static const uint64_t want0[4] = {0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull,
                                      0x1a5f849d4933e6e0ull, 0x6aa594f1262d2d2cull};
    static const uint64_t want42[4] = {0x15780b2e0c2ec716ull, 0x6104d9866d113a7eull,
                                       0xae17533239e499a1ull, 0xecb8ad4703b360a1ull};
    sift__rng r;
    uint64_t got[4];
    sift__rng_seed(&r, 0);
    for (int i = 0; i < 4; i++)
        got[i] = sift__rng_next(&r);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(got[i] == want0[i], "seed 0 output %d: 0x%016llx", i,
                      (unsigned long long)got[i]);
    sift__rng_seed(&r, 42);
    for (int i = 0; i < 4; i++)
        got[i] = sift__rng_next(&r);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(got[i] == want42[i], "seed 42 output %d: 0x%016llx", i,
                      (unsigned long long)got[i]);
}
END_TEST

START_TEST(test_rng_float_is_in_zero_one_and_uses_the_top_24_bits)
{
    sift__rng r;
    sift__rng_seed(&r, 5);
    size_t bad = 0;
    for (int i = 0; i < 1000000; i++) {
        sift__rng c = r;
        uint64_t raw = sift__rng_next(&c);
        float u = sift__rng_float(&r);
        bad += !(u >= 0.0f && u < 1.0f);
        bad += u != (float)(raw >> 40) * 0x1p-24f;
        bad += memcmp(&r, &c, sizeof r) != 0; /* one output per float */
    }
    ck_assert_uint_eq(bad, 0);
    /* the extreme draws: the state that yields all ones gives 1 - 2^-24 */
    ck_assert((float)(0xffffffULL) * 0x1p-24f < 1.0f);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The fast paths of select.c on full-size rows                        */
/* ------------------------------------------------------------------ */

/* select.c's weights, bucketed prefix search and block prefilter only
 * pay off on large arrays, so they are checked here on rows of 8192 to
 * 300000 candidates of every shape, in shuffled storage order, with mass
 * targets placed exactly on prefix boundaries (the hardest case for a
 * bucketed search) as well as at random. */
static size_t big_cands(tu_rng *r, sift_candidate *c)
{
    int32_t V = (int32_t)tu_range(r, 8192, 300000);
    float *row = malloc((size_t)V * sizeof *row);
    ck_assert(row);
    tu_row(r, row, V, (int)tu_range(r, 0, TU_ROW__COUNT - 1));
    size_t n = 0;
    double keep = tu_unif(r) < 0.5 ? 1.0 : 0.5 + 0.5 * tu_unif(r);
    for (int32_t i = 0; i < V; i++)
        if (tu_unif(r) < keep || n == 0) {
            c[n].id = i;
            c[n].logit = row[i];
            n++;
        }
    if (tu_range(r, 0, 1))
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)tu_range(r, 0, (int64_t)i - 1);
            sift_candidate t = c[i - 1];
            c[i - 1] = c[j];
            c[j] = t;
        }
    free(row);
    return n;
}

START_TEST(test_select_fast_paths_match_a_sorted_walk_on_big_rows)
{
    enum { CAP = 300000 };
    sift__alloc al;
    sift__ws ws;
    ck_assert_int_eq(sift__alloc_init(&al, NULL, NULL), SIFT_OK);
    memset(&ws, 0, sizeof ws);
    ck_assert_int_eq(sift__ws_reserve(&ws, &al, CAP, NULL), SIFT_OK);
    sift__ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.ws = &ws;
    sift_candidate *c = malloc(CAP * sizeof *c), *d = malloc(CAP * sizeof *d);
    sift_candidate *e = malloc(CAP * sizeof *e);
    uint64_t *w = malloc(CAP * sizeof *w), *wd = malloc(CAP * sizeof *wd);
    ck_assert(c && d && e && w && wd);
    tu_rng r = {4242 + (uint64_t)_i};
    for (int rep = 0; rep < 6; rep++) {
        size_t n = big_cands(&r, c);
        memcpy(d, c, n * sizeof *c);
        or_arr oa = {d, n, 0};
        or_sort(&oa);
        float m = sift__max_logit(c, n);
        ck_assert(memcmp(&m, &d[0].logit, sizeof m) == 0 || m == d[0].logit);
        if (!(m > -INFINITY))
            continue;
        sift__u128 W = sift__weights(c, n, m, w);
        ck_assert(sift__u128_cmp(W, or_weights(&oa, wd)) == 0);
        for (int t = 0; t < 24; t++) {
            int strict = t & 1;
            sift__u128 T;
            if (t < 2) {
                T = sift__u128_from(0);
            } else if (t < 4) {
                T = W;
            } else if (t < 16) {
                /* a prefix sum exactly, or one off either way */
                size_t j = (size_t)tu_range(&r, 0, (int64_t)(t < 10 ? (n < 64 ? n : 64) : n) - 1);
                sift__u128 ps = {0, 0};
                for (size_t q = 0; q <= j; q++)
                    ps = sift__u128_add64(ps, wd[q]);
                int64_t off = tu_range(&r, -1, 1);
                T = off < 0 && (ps.lo | ps.hi) ? sift__u128_sub(ps, sift__u128_from(1))
                    : off > 0                  ? sift__u128_add64(ps, 1)
                                               : ps;
            } else {
                T = sift__u128_scale_u64(W, tu_next(&r));
            }
            uint64_t cut;
            size_t len = sift__mass_prefix(&ctx, c, w, n, T, strict, &cut);
            size_t i = or_walk(wd, n, T, strict);
            if (i == n) {
                ck_assert_uint_eq(len, n);
            } else {
                ck_assert_uint_eq(len, i + 1);
                ck_assert_uint_eq(cut, sift__ckey(d[i].logit, d[i].id));
            }
        }
        for (int t = 0; t < 6; t++) {
            size_t k = (size_t)tu_range(&r, 1, t < 4 ? 1 + (int64_t)n / 256 : (int64_t)n);
            uint64_t cut = sift__cut_top(&ctx, c, n, k);
            ck_assert_uint_eq(cut, sift__ckey(d[k - 1].logit, d[k - 1].id));
            memcpy(e, c, n * sizeof *c);
            sift__arr a = {e, n, (int32_t)CAP, SIFT__ORDER_ID, 0};
            sift__arr_keep_top(&ctx, &a, k);
            ck_assert_uint_eq(a.n, k < n ? k : n);
            /* the survivors are the canonical first k, in storage order */
            size_t pos = 0;
            for (size_t q = 0; q < n && pos < a.n; q++)
                if (c[q].id == e[pos].id)
                    pos++;
            ck_assert_uint_eq(pos, a.n);
            for (size_t q = 0; q < a.n; q++)
                ck_assert(sift__ckey(e[q].logit, e[q].id) >= cut);
        }
    }
    free(c);
    free(d);
    free(e);
    free(w);
    free(wd);
    sift__ws_free(&ws, &al);
}
END_TEST

/* The order-preserving key (sift_internal.h) against its definition
 * written plainly: -0 and +0 share a key, negative floats are complemented,
 * positive ones get the top bit. Every 61st bit pattern plus the edges. */
static uint32_t fkey_ref(float f)
{
    if (f == 0.0f)
        return 0x80000000u;
    uint32_t u = fbits(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

START_TEST(test_fkey_is_the_order_preserving_map_with_equal_zeros)
{
    size_t bad = 0;
    for (uint64_t b = 0; b <= 0xffffffffu; b += 61) {
        float f = bfloat((uint32_t)b);
        if (f == f)
            bad += sift__fkey(f) != fkey_ref(f);
    }
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(sift__fkey(-0.0f), sift__fkey(0.0f));
    ck_assert(sift__fkey(-INFINITY) < sift__fkey(-FLT_MAX));
    ck_assert(sift__fkey(-0x1p-149f) < sift__fkey(0.0f));
    ck_assert(sift__fkey(0.0f) < sift__fkey(0x1p-149f));
    ck_assert(sift__fkey(FLT_MAX) < sift__fkey(INFINITY));
}
END_TEST

START_TEST(test_max_logit_keeps_the_sign_of_the_first_zero)
{
    sift_candidate c[9];
    for (int i = 0; i < 9; i++) {
        c[i].id = i;
        c[i].logit = -1.0f;
    }
    c[2].logit = -0.0f;
    c[7].logit = 0.0f;
    float m = sift__max_logit(c, 9);
    ck_assert(m == 0.0f && signbit(m)); /* the sequential scan keeps the first */
    c[2].logit = 0.0f;
    c[7].logit = -0.0f;
    m = sift__max_logit(c, 9);
    ck_assert(m == 0.0f && !signbit(m));
    c[7].logit = -INFINITY;
    ck_assert(sift__max_logit(c + 7, 1) == -INFINITY);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("num");
    /* Raised timeouts only for the sweeps and random comparisons (property
     * runs); rng and dsum keep Check's default. */
    TCase *tc = tcase_create("expf");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_expf_has_the_documented_exact_values);
    tcase_add_test(tc, test_expf_is_within_one_ulp_of_libm_over_a_dense_sweep);
    tcase_add_test(tc, test_expf_never_decreases_on_a_dense_subset_of_minus_104_to_0);
    suite_add_tcase(s, tc);

    tc = tcase_create("elementary");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_log_exp_pow_are_accurate_against_libm);
    tcase_add_test(tc, test_log_exp_pow_special_values);
    suite_add_tcase(s, tc);

    tc = tcase_create("weights");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_weight_is_e_times_2_to_62_truncated);
    tcase_add_loop_test(tc, test_weights_match_the_scalar_composition_bitwise, 0, 4);
    tcase_add_test(tc, test_weights_match_scalar_expf_over_a_float_sweep);
    suite_add_tcase(s, tc);

    tc = tcase_create("fast expf");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fast_expf_equals_sift_expf_on_a_dense_sample_for_every_path);
    tcase_add_test(tc, test_fast_expf_falls_back_to_sift_expf_on_the_hard_cases);
    tcase_add_test(tc, test_weights_are_exact_on_hard_cases_ties_and_edges);
    tcase_add_test(tc, test_entropy_sum_is_the_id_order_sum_of_its_terms_bitwise);
    suite_add_tcase(s, tc);

    tc = tcase_create("u128");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_u128_add_sub_cmp_match_unsigned_int128);
    tcase_add_test(tc, test_u128_scale_u64_is_floor_w_times_u_over_2_to_64);
    tcase_add_test(tc, test_u128_scale_float_is_exact_floor_and_ceil);
    tcase_add_test(tc, test_u128_to_double_rounds_to_nearest_even);
    suite_add_tcase(s, tc);

    tc = tcase_create("dsum");
    tcase_add_test(tc, test_dsum_idorder_is_the_eight_lane_sum_bitwise);
    suite_add_tcase(s, tc);

    tc = tcase_create("select");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_select_fast_paths_match_a_sorted_walk_on_big_rows, 0, 3);
    tcase_add_test(tc, test_max_logit_keeps_the_sign_of_the_first_zero);
    tcase_add_test(tc, test_fkey_is_the_order_preserving_map_with_equal_zeros);
    suite_add_tcase(s, tc);

    tc = tcase_create("rng");
    tcase_add_test(tc, test_rng_matches_the_published_xoshiro256starstar_and_splitmix64);
    tcase_add_test(tc, test_rng_known_answers_for_seeds_0_and_42);
    tcase_add_test(tc, test_rng_float_is_in_zero_one_and_uses_the_top_24_bits);
    suite_add_tcase(s, tc);
    return s;
}

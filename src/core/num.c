/*
 * num.c - sift's own elementary functions and exact integer sums.
 *
 * Owns: sift__expf, sift__logf, sift__exp, sift__log, sift__pow,
 * sift__sqrt, sift__weight, the 128-bit helpers and the id-order double
 * sum.
 *
 * Why not libm: a token decided by expf must not change when the C library
 * is upgraded or the program is built with another compiler. Everything
 * here uses only IEEE-754 basic operations (+, -, *, /, sqrt, conversions)
 * in round-to-nearest, which every conforming platform computes to the
 * same bits, and the library is compiled with -ffp-contract=off so no
 * multiply-add is fused behind our back. Accuracy is about 1 ulp (float
 * results are rounded once from a double evaluation accurate to ~1e-15).
 *
 * Invariants: sift__expf(0) == 1, sift__expf(-inf) == 0, results are in
 * [0, +inf]; sift__weight(e) <= 2^62 for e <= 1.
 */
#include <math.h>

#include "../sift_internal.h"

/* ln 2 split so that k * LN2_HI is exact for |k| < 2^11. */
static const double LN2_HI = 6.93147180369123816490e-01; /* 0x3fe62e42fee00000 */
static const double LN2_LO = 1.90821492927058770002e-10; /* 0x3dea39ef35793c76 */
static const double LOG2E = 1.44269504088896338700e+00;
static const double ROUND_MAGIC = 6755399441055744.0; /* 1.5 * 2^52 */

static double pow2i(int k)
{
    /* 2^k for -1022 <= k <= 1023 built from its bits. */
    uint64_t bits = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* exp(r) for |r| <= ln(2)/2 + a little, Taylor to degree 13: the
 * remainder is below 2e-17 relative there. */
static double exp_core(double r)
{
    double p = 1.0 / 6227020800.0; /* 1/13! */
    p = p * r + 1.0 / 479001600.0; /* 1/12! */
    p = p * r + 1.0 / 39916800.0;  /* 1/11! */
    p = p * r + 1.0 / 3628800.0;   /* 1/10! */
    p = p * r + 1.0 / 362880.0;    /* 1/9!  */
    p = p * r + 1.0 / 40320.0;     /* 1/8!  */
    p = p * r + 1.0 / 5040.0;      /* 1/7!  */
    p = p * r + 1.0 / 720.0;       /* 1/6!  */
    p = p * r + 1.0 / 120.0;       /* 1/5!  */
    p = p * r + 1.0 / 24.0;        /* 1/4!  */
    p = p * r + 1.0 / 6.0;         /* 1/3!  */
    p = p * r + 0.5;               /* 1/2!  */
    p = p * r + 1.0;
    return p * r + 1.0;
}

float sift__expf(float xf)
{
    double x = (double)xf;
    /* Outside these bounds the float result is 0 or +inf; the tests also
     * cover NaN -> NaN, though no NaN ever reaches here from a stage. */
    if (x != x)
        return xf;
    if (x < -104.0)
        return 0.0f;
    if (x > 89.0)
        return INFINITY;
    double kd = (x * LOG2E + ROUND_MAGIC) - ROUND_MAGIC;
    int k = (int)kd;
    double r = (x - kd * LN2_HI) - kd * LN2_LO;
    double y = exp_core(r) * pow2i(k);
    return (float)y;
}

double sift__exp(double x)
{
    if (x != x)
        return x;
    if (x < -745.2)
        return 0.0;
    if (x > 709.7)
        return INFINITY;
    double kd = (x * LOG2E + ROUND_MAGIC) - ROUND_MAGIC;
    int k = (int)kd;
    double r = (x - kd * LN2_HI) - kd * LN2_LO;
    double p = exp_core(r);
    /* Scale in two steps so that 2^k never leaves the normal range. */
    if (k > 1000)
        return p * pow2i(1000) * pow2i(k - 1000);
    if (k < -1000)
        return p * pow2i(-1000) * pow2i(k + 1000);
    return p * pow2i(k);
}

/* ln(m) for m in [sqrt(1/2), sqrt(2)]: 2 atanh(s) with s = (m-1)/(m+1),
 * |s| <= 0.1716, series to s^25: remainder below 1e-19. */
static double log_core(double m)
{
    double s = (m - 1.0) / (m + 1.0);
    double z = s * s;
    double p = 1.0 / 25.0;
    p = p * z + 1.0 / 23.0;
    p = p * z + 1.0 / 21.0;
    p = p * z + 1.0 / 19.0;
    p = p * z + 1.0 / 17.0;
    p = p * z + 1.0 / 15.0;
    p = p * z + 1.0 / 13.0;
    p = p * z + 1.0 / 11.0;
    p = p * z + 1.0 / 9.0;
    p = p * z + 1.0 / 7.0;
    p = p * z + 1.0 / 5.0;
    p = p * z + 1.0 / 3.0;
    p = p * z + 1.0;
    return 2.0 * s * p;
}

double sift__log(double x)
{
    if (x != x || x < 0.0)
        return NAN;
    if (x == 0.0)
        return -INFINITY;
    if (x == INFINITY)
        return INFINITY;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int e = (int)((bits >> 52) & 0x7ff);
    if (e == 0) {
        /* Subnormal: scale into the normal range first (exact). */
        x *= 18014398509481984.0; /* 2^54 */
        memcpy(&bits, &x, sizeof bits);
        e = (int)((bits >> 52) & 0x7ff) - 54;
    }
    e -= 1023;
    /* m in [1, 2) */
    bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m;
    memcpy(&m, &bits, sizeof m);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e += 1;
    }
    double ed = (double)e;
    return (ed * LN2_HI + log_core(m)) + ed * LN2_LO;
}

float sift__logf(float x)
{
    return (float)sift__log((double)x);
}

double sift__pow(double x, double y)
{
    if (x != x || y != y)
        return NAN;
    if (y == 0.0)
        return 1.0;
    if (x == 0.0)
        return y > 0.0 ? 0.0 : INFINITY;
    if (x == 1.0)
        return 1.0;
    if (x < 0.0)
        return NAN;
    return sift__exp(y * sift__log(x));
}

double sift__sqrt(double x)
{
    /* IEEE-754 square root is correctly rounded on every conforming
     * platform, so the hardware instruction is as reproducible as +. */
    return sqrt(x);
}

uint64_t sift__weight(float e)
{
    uint32_t u;
    memcpy(&u, &e, sizeof u);
    if (!(e > 0.0f))
        return 0;
    int ex = (int)((u >> 23) & 0xff);
    uint64_t mant = (uint64_t)(u & 0x7fffffu);
    if (ex == 0) {
        /* subnormal: value = mant * 2^-149, far below 2^-62 */
        return 0;
    }
    mant |= 0x800000u;
    /* value = mant * 2^(ex - 150); times 2^62 -> mant * 2^(ex - 88) */
    int sh = ex - 88;
    if (sh >= 0) {
        if (sh > 39)
            return (uint64_t)1 << 62; /* e > 1 never happens; saturate */
        return mant << sh;
    }
    if (sh <= -64)
        return 0;
    return mant >> (-sh);
}

double sift__u128_to_double(sift__u128 a)
{
    if (a.hi == 0)
        return (double)a.lo;
    /* Shift right until the value fits in 64 bits, folding the shifted-out
     * bits into a sticky bit 0 so that the one rounding of the final
     * conversion sees the full value (bits 0..10 are below precision). */
    int sh = 0; /* significant bits of hi, 1..64 */
    for (uint64_t h = a.hi; h; h >>= 1)
        sh++;
    uint64_t top, lost;
    if (sh == 64) {
        top = a.hi;
        lost = a.lo;
    } else {
        top = (a.hi << (64 - sh)) | (a.lo >> sh);
        lost = a.lo << (64 - sh);
    }
    if (lost)
        top |= 1;
    return (double)top * pow2i(sh);
}

/* 64 x 64 -> 128 */
static sift__u128 mul64(uint64_t a, uint64_t b)
{
    uint64_t a0 = a & 0xffffffffu, a1 = a >> 32;
    uint64_t b0 = b & 0xffffffffu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    sift__u128 r;
    r.lo = (p00 & 0xffffffffu) | (mid << 32);
    r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    return r;
}

sift__u128 sift__u128_scale_u64(sift__u128 W, uint64_t u)
{
    /* (W.hi * 2^64 + W.lo) * u / 2^64 = W.hi * u + (W.lo * u) >> 64 */
    sift__u128 lo = mul64(W.lo, u);
    sift__u128 hi = mul64(W.hi, u);
    return sift__u128_add64(hi, lo.hi);
}

sift__u128 sift__u128_scale_float(sift__u128 W, float p, int ceil_)
{
    if (!(p > 0.0f))
        return sift__u128_from(0);
    if (p >= 1.0f)
        return W;
    uint32_t u;
    memcpy(&u, &p, sizeof u);
    int ex = (int)((u >> 23) & 0xff);
    uint64_t mant = u & 0x7fffffu;
    int sh; /* p = mant * 2^-sh */
    if (ex == 0) {
        sh = 149;
    } else {
        mant |= 0x800000u;
        sh = 150 - ex;
    }
    /* W * mant is at most 128 + 24 bits: compute it as 192 bits. */
    sift__u128 lo = mul64(W.lo, mant);
    sift__u128 hi = mul64(W.hi, mant);
    uint64_t w0 = lo.lo;
    uint64_t w1 = lo.hi + hi.lo;
    uint64_t w2 = hi.hi + (w1 < lo.hi);
    /* shift the 192-bit (w2 w1 w0) right by sh, remembering lost bits */
    uint64_t r0, r1;
    int lostbits;
    if (sh >= 192) {
        r0 = r1 = 0;
        lostbits = (w0 | w1 | w2) != 0;
    } else if (sh >= 128) {
        int s = sh - 128;
        r0 = s ? (w2 >> s) : w2;
        r1 = 0;
        lostbits = (w0 | w1) != 0 || (s && (w2 << (64 - s)) != 0);
    } else if (sh >= 64) {
        int s = sh - 64;
        r0 = s ? ((w1 >> s) | (w2 << (64 - s))) : w1;
        r1 = s ? (w2 >> s) : w2;
        lostbits = w0 != 0 || (s && (w1 << (64 - s)) != 0);
    } else {
        int s = sh;
        r0 = s ? ((w0 >> s) | (w1 << (64 - s))) : w0;
        r1 = s ? ((w1 >> s) | (w2 << (64 - s))) : w1;
        lostbits = s && (w0 << (64 - s)) != 0;
        /* sh < 64 only when p >= 2^-40, result fits because p < 1 */
    }
    sift__u128 r = {r0, r1};
    if (ceil_ && lostbits)
        r = sift__u128_add64(r, 1);
    return r;
}

double sift__dsum_idorder(const double *v, size_t n)
{
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += v[i + j];
    for (int j = 0; i < n; i++, j++)
        s[j] += v[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/*
 * fexp_exhaustive.c - every float in [-44, 0] through the float
 * exponential F of the float-certified draw (core/fdraw.c), against the C
 * library's double exp (`make check-fexp`; not part of `make check`:
 * about half a minute of one core).
 *
 * Owns the exhaustive half of the proof that |F(x) - e^x| <= EPS e^x
 * with EPS = 1.125 * 2^-24 (docs/analyzer.md, "Float-certified draw",
 * Lemma 4): for each of the 1,110,441,985 floats x in [-44, 0] (-0
 * included) it computes F(x) with the widest kernel the machine has
 * (sift__fexp_pass over candidates of logit x and m = 0; SIFT_SIMD=avx2
 * picks the AVX2 kernel on an AVX-512 machine), and its
 * relative error against exp((double)x). glibc's exp is within one ulp
 * of double (2^-52 relative), so a measured error below EPS - 2^-51
 * proves the bound. Every STRIDE-th float also goes through the scalar
 * definition sift__fexp, whose bits must equal the kernel's. Prints the
 * largest error, where it occurs, and the mismatches; exits 1 on a
 * mismatch or an error above the bound.
 *
 * Usage: fexp_exhaustive [--stride S]   (every S-th float only: a smoke run)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift_internal.h"

enum { CHUNK = 1 << 16, SCALAR_EVERY = 97 };

static float bfloat(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

int main(int argc, char **argv)
{
    uint32_t stride = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--stride") && i + 1 < argc)
            stride = (uint32_t)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: fexp_exhaustive [--stride S]\n");
            return 2;
        }
    }
    if (stride == 0)
        stride = 1;
    const double bound = 0x1.2p-24 - 0x1p-51;
    int level = sift__fdraw_level();
    sift_candidate *c = malloc(CHUNK * sizeof *c);
    float *v = malloc(CHUNK * sizeof *v);
    if (!c || !v)
        return 2;
    /* the floats from -0 (0x80000000) down to -44 (0xc2300000) */
    const uint32_t first = 0x80000000u, last = fbits(-44.0f);
    double worst = 0.0;
    float worst_x = 0.0f;
    unsigned long long count = 0, mism = 0;
    uint32_t u = first;
    while (u <= last) {
        size_t n = 0;
        for (; n < CHUNK && u <= last; n++) {
            c[n].id = (int32_t)n;
            c[n].logit = bfloat(u);
            u = last - u < stride ? last + 1 : u + stride;
        }
        float xlow;
        (void)sift__fexp_pass(level, c, n, 0.0f, v, &xlow);
        for (size_t j = 0; j < n; j++) {
            double e = exp((double)c[j].logit);
            double r = fabs((double)v[j] - e) / e;
            if (r > worst) {
                worst = r;
                worst_x = c[j].logit;
            }
            if (j % SCALAR_EVERY == 0 && fbits(sift__fexp(c[j].logit)) != fbits(v[j])) {
                if (mism++ < 5)
                    printf("fexp_exhaustive: x = %a: kernel %a, scalar %a\n", (double)c[j].logit,
                           (double)v[j], (double)sift__fexp(c[j].logit));
            }
        }
        count += n;
        if (u == 0) /* wrapped past 0xffffffff: cannot happen below -44 */
            break;
    }
    printf("fexp_exhaustive: %llu floats in [-44, 0] at kernel level %d (%s); largest relative "
           "error %.6g = 2^%.4f at x = %a; bound %.6g = 2^%.4f; scalar mismatches %llu\n",
           count, level,
           level == SIFT__FDRAW_AVX512 ? "avx512"
           : level == SIFT__FDRAW_AVX2 ? "avx2"
                                       : "scalar",
           worst, log2(worst), (double)worst_x, bound, log2(bound), mism);
    free(c);
    free(v);
    return mism || !(worst <= bound) ? 1 : 0;
}

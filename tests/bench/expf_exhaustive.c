/*
 * expf_exhaustive.c - every float in [-104, 0] through the fast expf of
 * core/weights.c on every path, against sift__expf (`make check-expf`;
 * not part of `make check`: about a minute of one core).
 *
 * Owns the exhaustive proof obligation of the weights kernel: for each of
 * the 1,120,927,745 floats x in [-104, 0] (-0 included) and each path the
 * machine has (0 scalar, 1 portable vectors, 2 AVX2, 3 AVX-512F), sift__expf_path must
 * return exactly sift__expf(x), and sift__weights_path over candidates
 * with logit x and m = 0 exactly sift__weight(sift__expf(x)). Prints the
 * mismatches (must be 0) and how often the doubt interval sent a value to
 * sift__expf; exits 1 on any mismatch.
 *
 * Usage: expf_exhaustive [--stride S] [--list]
 *   --stride S  every S-th float only (a quick smoke run; default 1, all)
 *   --list      also print every value the scalar path found doubtful
 *               (the hard cases that tests/check_num.c replays)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift_internal.h"

enum { CHUNK = 1 << 16 };

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
    int list = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) {
            list = 1;
            continue;
        }
        if (!strcmp(argv[i], "--stride") && i + 1 < argc) {
            long s = strtol(argv[++i], NULL, 10);
            if (s < 1 || s > 1000000) {
                fprintf(stderr, "expf_exhaustive: --stride must be in [1, 1000000]\n");
                return 2;
            }
            stride = (uint32_t)s;
        } else {
            fprintf(stderr, "usage: expf_exhaustive [--stride S] [--list]\n");
            return 2;
        }
    }
    float *x = malloc(CHUNK * sizeof *x);
    float *ref = malloc(CHUNK * sizeof *ref);
    float *e = malloc(CHUNK * sizeof *e);
    sift_candidate *c = malloc(CHUNK * sizeof *c);
    uint64_t *w = malloc(CHUNK * sizeof *w);
    if (!x || !ref || !e || !c || !w) {
        fprintf(stderr, "expf_exhaustive: out of memory\n");
        return 2;
    }
    const uint32_t first = 0x80000000u; /* -0 */
    const uint32_t last = fbits(-104.0f);
    uint64_t values = 0, bad_e[4] = {0, 0, 0, 0}, bad_w[4] = {0, 0, 0, 0}, fell[4] = {0, 0, 0, 0};
    int have[4];
    for (int p = 0; p < 4; p++)
        have[p] = sift__weights_path_available(p);
    uint32_t b = first;
    int done = 0;
    while (!done) {
        size_t n = 0;
        while (n < CHUNK && !done) {
            x[n] = bfloat(b);
            c[n].id = (int32_t)n;
            c[n].logit = x[n];
            n++;
            if (last - b < stride)
                done = 1;
            else
                b += stride;
        }
        for (size_t i = 0; i < n; i++)
            ref[i] = sift__expf(x[i]);
        values += n;
        for (int p = 0; p < 4; p++) {
            if (!have[p])
                continue;
            size_t f = sift__expf_path(p, x, e, n);
            fell[p] += f;
            if (list && p == 0 && f > 0) {
                for (size_t i = 0; i < n; i++) {
                    float one;
                    if (sift__expf_path(0, &x[i], &one, 1))
                        printf("doubtful: %a\n", (double)x[i]);
                }
            }
            sift__weights_path(p, c, n, 0.0f, w);
            for (size_t i = 0; i < n; i++) {
                if (fbits(e[i]) != fbits(ref[i]) && bad_e[p]++ < 5)
                    printf("path %d: expf(%a) = %a, sift__expf gives %a\n", p, (double)x[i],
                           (double)e[i], (double)ref[i]);
                if (w[i] != sift__weight(ref[i]) && bad_w[p]++ < 5)
                    printf("path %d: weight at %a = %llu, definition %llu\n", p, (double)x[i],
                           (unsigned long long)w[i], (unsigned long long)sift__weight(ref[i]));
            }
        }
    }
    int failed = 0;
    printf("floats in [-104, 0] checked: %llu (stride %u)\n", (unsigned long long)values,
           (unsigned)stride);
    for (int p = 0; p < 4; p++) {
        if (!have[p]) {
            printf("path %d: not available on this machine\n", p);
            continue;
        }
        printf("path %d: expf mismatches %llu, weight mismatches %llu, fallbacks %llu "
               "(%.3g of the values)\n",
               p, (unsigned long long)bad_e[p], (unsigned long long)bad_w[p],
               (unsigned long long)fell[p], (double)fell[p] / (double)values);
        failed |= bad_e[p] != 0 || bad_w[p] != 0;
    }
    free(x);
    free(ref);
    free(e);
    free(c);
    free(w);
    return failed;
}

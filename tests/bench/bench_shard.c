/*
 * bench_shard.c - sift_shards_merge for S shards of a bf16 row, each
 * sending its top-k (k = 105 by default) shuffled, as a device does, with
 * a tail mass: the median time of one merge over --reps calls (after
 * three rounds of warm-up). tests/bench/bench_shard.sh runs it for S =
 * 2, 4, 8 at V = 151,936 and 248,320 and counts the instructions of the
 * same calls with callgrind. Usage: bench_shard [--s S] [--v V] [--k K]
 * [--reps N]; prints one JSON line.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"
#include "testutil.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int canon(const void *a, const void *b)
{
    const sift_candidate *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int main(int argc, char **argv)
{
    int32_t S = 2, V = 151936, k = 105;
    int reps = 2001;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--s"))
            S = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--v"))
            V = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--k"))
            k = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    }
    if (S < 1 || V < S || k < 1 || reps < 1 || k > V / S) {
        fprintf(stderr, "bench_shard: bad arguments\n");
        return 2;
    }
    tu_rng r = {42};
    float *row = malloc((size_t)V * sizeof *row);
    sift_candidate *scratch = malloc((size_t)V * sizeof *scratch);
    sift_candidate *lists = malloc((size_t)S * (size_t)k * sizeof *lists);
    sift_candidate *buf = malloc(2 * (size_t)S * (size_t)k * sizeof *buf);
    sift_shard *sh = calloc((size_t)S, sizeof *sh);
    double *t = malloc((size_t)reps * sizeof *t);
    if (!row || !scratch || !lists || !buf || !sh || !t)
        return 1;
    tu_row(&r, row, V, TU_ROW_BF16);
    for (int32_t s = 0; s < S; s++) {
        int32_t lo = (int32_t)((int64_t)V * s / S), hi = (int32_t)((int64_t)V * (s + 1) / S);
        for (int32_t i = lo; i < hi; i++)
            scratch[i - lo] = (sift_candidate){i, row[i]};
        qsort(scratch, (size_t)(hi - lo), sizeof *scratch, canon);
        sift_candidate *l = lists + (size_t)s * (size_t)k;
        memcpy(l, scratch, (size_t)k * sizeof *l);
        for (int32_t i = k - 1; i > 0; i--) { /* a device's order */
            int32_t j = (int32_t)tu_range(&r, 0, i);
            sift_candidate x = l[i];
            l[i] = l[j];
            l[j] = x;
        }
        long double tail = 0;
        for (int32_t i = k; i < hi - lo; i++)
            tail += expl((long double)scratch[i].logit - (long double)scratch[0].logit);
        sh[s] = (sift_shard){.struct_size = sizeof *sh,
                             .offset = lo,
                             .n_ids = hi - lo,
                             .n_prefix = k,
                             .prefix = l,
                             .flags = SIFT_SHARD_TAIL_MASS,
                             .tail_mass = (double)tail * (1.0 + 0x1p-40)};
    }
    sift_slice out = {0};
    sift_error e;
    for (int i = 0; i < reps + 3; i++) {
        double t0 = now_us();
        if (sift_shards_merge(sh, (size_t)S, V, k, NULL, 0, buf, 2 * (size_t)S * (size_t)k, &out,
                              &e) != SIFT_OK) {
            fprintf(stderr, "bench_shard: %s\n", e.message);
            return 1;
        }
        if (i >= 3)
            t[i - 3] = now_us() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    printf("{\"S\":%d,\"V\":%d,\"k\":%d,\"median_us\":%.3f,\"n_prefix\":%d,\"n_extras\":%d,"
           "\"tail_mass\":%.6g}\n",
           (int)S, (int)V, (int)k, t[reps / 2], (int)out.n_prefix, (int)out.n_extras,
           out.tail_mass);
    free(row);
    free(scratch);
    free(lists);
    free(buf);
    free(sh);
    free(t);
    return 0;
}

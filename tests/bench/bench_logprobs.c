/*
 * bench_logprobs.c - the logprob call against what a server does today:
 * sift_chain_sample + sift_chain_distribution (two passes of the chain),
 * on rows of V = 151,936 and 248,320 normal logits. Median time per
 * step over REPS steps (rows cycle through 8 prepared ones).
 *
 * Usage: bench_logprobs [--reps N] [--only CASE]
 * Cases: CHAIN/V/MODE with CHAIN topk (temp 0.8, top_k 40, dist), topp
 * (top_p 0.95, dist) or dist; MODE sample (sift_chain_sample alone), base
 * (sample + distribution of 20), proc (PROCESSED, n_top 20), raw (RAW,
 * n_top 20), both (RAW | PROCESSED, n_top 20). bench_logprobs_cg.sh runs
 * each case alone under callgrind (the op_ functions are what it counts).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"
#include "testutil.h"

#define NROWS 8
#define NTOP 20

static float *rows[NROWS];
static sift_token_prob dist[300000];
static sift_logprob raw_top[NTOP], proc_top[NTOP];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static sift_chain *make(const char *kind)
{
    sift_chain *c = NULL;
    if (sift_chain_new(&c, NULL, NULL))
        abort();
    if (strcmp(kind, "topk") == 0) {
        if (sift_chain_add_temp(c, 0.8f, NULL) || sift_chain_add_top_k(c, 40, NULL))
            abort();
    } else if (strcmp(kind, "topp") == 0) {
        if (sift_chain_add_top_p(c, 0.95f, 1, NULL))
            abort();
    }
    if (sift_chain_add_dist(c, NULL))
        abort();
    return c;
}

/* The ops callgrind counts (bench_logprobs_cg.sh --toggle-collect):
 * external, so that callgrind finds them by name. */
int op_sample(sift_chain *c, const float *row, int32_t V);
int op_base(sift_chain *c, const float *row, int32_t V);
int op_logprobs(sift_chain *c, const float *row, int32_t V, uint32_t flags);

__attribute__((noinline)) int op_sample(sift_chain *c, const float *row, int32_t V)
{
    int32_t t;
    return sift_chain_sample(c, row, V, &t, NULL) != SIFT_OK;
}

__attribute__((noinline)) int op_base(sift_chain *c, const float *row, int32_t V)
{
    int32_t t;
    size_t n;
    return sift_chain_sample(c, row, V, &t, NULL) != SIFT_OK ||
           sift_chain_distribution(c, row, V, dist, NTOP, &n, NULL) != SIFT_OK;
}

__attribute__((noinline)) int op_logprobs(sift_chain *c, const float *row, int32_t V,
                                          uint32_t flags)
{
    int32_t t;
    sift_logprobs lp = {.struct_size = sizeof lp, .flags = flags, .n_top = NTOP};
    lp.raw_top = raw_top;
    lp.processed_top = proc_top;
    return sift_chain_sample_logprobs(c, row, V, &t, &lp, NULL) != SIFT_OK;
}

static double run(const char *kind, int32_t V, const char *mode, int reps)
{
    sift_chain *c = make(kind);
    double *ts = malloc((size_t)reps * sizeof *ts);
    if (!ts)
        abort();
    for (int i = 0; i < reps; i++) {
        const float *row = rows[i % NROWS];
        double t0 = now();
        int bad;
        if (strcmp(mode, "sample") == 0)
            bad = op_sample(c, row, V);
        else if (strcmp(mode, "base") == 0)
            bad = op_base(c, row, V);
        else if (strcmp(mode, "proc") == 0)
            bad = op_logprobs(c, row, V, SIFT_LOGPROBS_PROCESSED);
        else if (strcmp(mode, "raw") == 0)
            bad = op_logprobs(c, row, V, SIFT_LOGPROBS_RAW);
        else
            bad = op_logprobs(c, row, V, SIFT_LOGPROBS_RAW | SIFT_LOGPROBS_PROCESSED);
        ts[i] = now() - t0;
        if (bad)
            abort();
    }
    qsort(ts, (size_t)reps, sizeof *ts, cmp_d);
    double med = ts[reps / 2];
    free(ts);
    sift_chain_free(c);
    return med;
}

int main(int argc, char **argv)
{
    int reps = 200;
    const char *only = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--only") == 0)
            only = argv[i + 1];
    }
    if (reps < 1)
        reps = 1;
    const int32_t Vs[] = {151936, 248320};
    const char *kinds[] = {"topk", "topp", "dist"};
    const char *modes[] = {"sample", "base", "proc", "raw", "both"};
    tu_rng r = {2026};
    for (int i = 0; i < NROWS; i++) {
        rows[i] = malloc(248320 * sizeof(float));
        if (!rows[i])
            return 1;
        tu_row(&r, rows[i], 248320, TU_ROW_NORMAL);
    }
    printf("median us per step over %d steps (8 rows of N(0, s) logits)\n", reps);
    for (size_t v = 0; v < 2; v++)
        for (size_t k = 0; k < 3; k++)
            for (size_t m = 0; m < 5; m++) {
                char name[64];
                snprintf(name, sizeof name, "%s/%d/%s", kinds[k], (int)Vs[v], modes[m]);
                if (only && strcmp(only, name) != 0)
                    continue;
                double t = run(kinds[k], Vs[v], modes[m], reps);
                printf("  %-22s reps %6d  %9.1f us\n", name, reps, 1e6 * t);
            }
    for (int i = 0; i < NROWS; i++)
        free(rows[i]);
    return 0;
}

/*
 * bench_slice.c - the slice benchmark (`make bench`; not a test).
 *
 * Owns: timing, in one run and on the same rows, (1) the slice builder
 * (Prefix(k) from a whole row: what a device top-k does) against a plain
 * max-reduction over the row, the floor of any pass over it; (2) a step of
 * the production chain (penalties 64 -> top_k 20 -> top_p 0.95 -> min_p
 * 0.05 -> temp 0.8 -> dist) sampled from a slice of its planned k = 84
 * against the same step on the whole row. Medians over many repetitions;
 * the ratios are the numbers to compare across machines.
 *
 * Rows: N(0, 2) with a handful of peaked tokens (as bench.c), a fresh row
 * per repetition from a pool so caches do not flatter the row path.
 *
 * Usage: bench_slice [--quick] [--v N] [--json]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"
#include "testutil.h"

#define POOL 8

static volatile float sink_f;
static volatile int32_t sink_i;

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

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

static void make_row(float *row, int32_t V, uint64_t seed)
{
    tu_rng r = {seed};
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)(2.0 * tu_normal(&r));
    for (int j = 0; j < 6; j++)
        row[tu_range(&r, 0, V - 1)] = (float)(12.0 + 8.0 * tu_unif(&r));
}

static float max_over(const float *row, int32_t V)
{
    float m = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        m = row[i] > m ? row[i] : m;
    return m;
}

static void die(const char *what, const sift_error *e)
{
    fprintf(stderr, "bench_slice: %s: %s\n", what, e->message);
    exit(1);
}

static sift_chain *production(void)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 1234;
    sift_chain *c;
    sift_error e;
    if (sift_chain_new(&c, &p, &e) || sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, &e) ||
        sift_chain_add_top_k(c, 20, &e) || sift_chain_add_top_p(c, 0.95f, 1, &e) ||
        sift_chain_add_min_p(c, 0.05f, 1, &e) || sift_chain_add_temp(c, 0.8f, &e) ||
        sift_chain_add_dist(c, &e))
        die("production chain", &e);
    tu_rng r = {77};
    for (int i = 0; i < 64; i++)
        if (sift_chain_accept(c, (int32_t)tu_range(&r, 0, 5000), &e))
            die("accept", &e);
    return c;
}

typedef struct out {
    int json;
} out;

static void report(const out *o, const char *name, int32_t V, int32_t k, double us, double ref,
                   const char *ref_name)
{
    if (o->json)
        printf("{\"name\":\"%s\",\"V\":%d,\"k\":%d,\"median_us\":%.3f,\"ratio\":%.3f,"
               "\"ratio_to\":\"%s\"}\n",
               name, (int)V, (int)k, us, us / ref, ref_name);
    else
        printf("%-34s %7d %5d %11.3f %10.3f x %s\n", name, (int)V, (int)k, us, us / ref, ref_name);
    fflush(stdout);
}

static void run(const out *o, int32_t V, int reps)
{
    float *rows[POOL];
    for (int i = 0; i < POOL; i++) {
        rows[i] = malloc((size_t)V * sizeof(float));
        if (!rows[i]) {
            fprintf(stderr, "bench_slice: out of memory\n");
            exit(1);
        }
        make_row(rows[i], V, 0x5eedULL + (uint64_t)i * 7919u + (uint64_t)V);
    }
    double *t = malloc((size_t)reps * sizeof *t);
    sift_error e;
    /* the floor */
    for (int i = 0; i < reps; i++) {
        const float *row = rows[i % POOL];
        double t0 = now_us();
        sink_f = max_over(row, V);
        t[i] = now_us() - t0;
    }
    double floor_us = median(t, reps);
    report(o, "floor (max over row)", V, 0, floor_us, floor_us, "floor");

    /* the slice builder */
    sift_slicer *sl;
    if (sift_slicer_new(&sl, V, NULL, &e))
        die("slicer", &e);
    static const int32_t ks[] = {1, 40, 84, 256};
    for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
        sift_slice s;
        for (int i = 0; i < reps; i++) {
            const float *row = rows[i % POOL];
            double t0 = now_us();
            if (sift_slicer_build(sl, row, V, ks[j], NULL, 0, &s, &e))
                die("build", &e);
            t[i] = now_us() - t0;
            sink_i = s.prefix[0].id;
        }
        report(o, "slice builder", V, ks[j], median(t, reps), floor_us, "floor");
    }

    /* the production chain: whole row vs slice of the planned k */
    sift_chain *c = production();
    sift_plan plan = {.struct_size = sizeof(sift_plan)};
    if (sift_chain_plan(c, &plan, NULL, &e))
        die("plan", &e);
    int32_t tok;
    for (int i = 0; i < reps; i++) {
        const float *row = rows[i % POOL];
        double t0 = now_us();
        if (sift_chain_sample(c, row, V, &tok, &e))
            die("sample", &e);
        t[i] = now_us() - t0;
        sink_i = tok;
    }
    double row_us = median(t, reps);
    report(o, "production chain, whole row", V, 0, row_us, floor_us, "floor");

    sift_slice slices[POOL];
    sift_slicer *pool_sl[POOL];
    for (int i = 0; i < POOL; i++) {
        if (sift_slicer_new(&pool_sl[i], V, NULL, &e) ||
            sift_slicer_build(pool_sl[i], rows[i], V, plan.k, NULL, 0, &slices[i], &e))
            die("slice", &e);
    }
    int sreps = reps * 20;
    double *ts = malloc((size_t)sreps * sizeof *ts);
    for (int i = 0; i < sreps; i++) {
        double t0 = now_us();
        if (sift_chain_sample_slice(c, &slices[i % POOL], &tok, &e))
            die("sample_slice", &e);
        ts[i] = now_us() - t0;
        sink_i = tok;
    }
    double slice_us = median(ts, sreps);
    report(o, "production chain, slice", V, plan.k, slice_us, floor_us, "floor");
    if (o->json)
        printf("{\"name\":\"whole row / slice\",\"V\":%d,\"k\":%d,\"ratio\":%.1f}\n", (int)V,
               (int)plan.k, row_us / slice_us);
    else
        printf("%-34s %7d %5d %11s %10.1f x faster on the slice\n", "whole row / slice", (int)V,
               (int)plan.k, "", row_us / slice_us);
    sift_stats st = {.struct_size = sizeof(sift_stats)};
    if (sift_chain_stats(c, &st, NULL))
        exit(1);
    if (!o->json)
        printf("(slice steps decided on the slice: %llu, hook calls: %llu)\n",
               (unsigned long long)st.slice_decided, (unsigned long long)st.hook_calls);
    for (int i = 0; i < POOL; i++)
        sift_slicer_free(pool_sl[i]);
    sift_slicer_free(sl);
    sift_chain_free(c);
    free(ts);
    free(t);
    for (int i = 0; i < POOL; i++)
        free(rows[i]);
}

int main(int argc, char **argv)
{
    out o = {0};
    int quick = 0;
    int32_t only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--json"))
            o.json = 1;
        else if (!strcmp(argv[i], "--v") && i + 1 < argc)
            only = (int32_t)strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_slice [--quick] [--v N] [--json]\n");
            return 2;
        }
    }
    if (only < 0 || only > (1 << 24)) {
        fprintf(stderr, "bench_slice: --v must be in [1, 16777216]\n");
        return 2;
    }
    if (!o.json)
        printf("%-34s %7s %5s %11s %10s\n", "name", "V", "k", "median_us", "ratio");
    static const int32_t vs[] = {151936, 248320};
    int reps = quick ? 50 : 400;
    if (only)
        run(&o, only, reps);
    else
        for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
            run(&o, vs[i], reps);
    return 0;
}

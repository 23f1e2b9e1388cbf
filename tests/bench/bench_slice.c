/*
 * bench_slice.c - the slice benchmark (`make bench`; not a test).
 *
 * Owns: timing, in one run and on the same rows, (1) the slice builder
 * (Prefix(k) from a whole row: what a device top-k does) against a plain
 * max-reduction over the row, the floor of any pass over it; (2) a step of
 * the production chain (penalties 64 -> top_k 20 -> top_p 0.95 -> min_p
 * 0.05 -> temp 0.8 -> dist) sampled from a slice of its planned k = 84
 * against the same step on the whole row (sample only, both sides, on a
 * fixed window); (3) the loop a runtime runs, at V = 32,768 and 1,048,576:
 * sift_chain_sample_slice + sift_chain_accept of the production chain of
 * issue 11 (top_k 40, planned k = 104) on changing rows whose frequent
 * tokens recur, so the penalties window holds slice tokens and re-ranks
 * them (step_loop). Medians over many repetitions; the ratios are the
 * numbers to compare across machines. The instructions of a loop step
 * come from callgrind, which is repeatable on a loaded machine:
 * `make bench-slice` (tests/bench/bench_slice_step.sh) prints them beside
 * the medians.
 *
 * Rows: N(0, 2) with a handful of peaked tokens (as bench.c), a fresh row
 * per repetition from a pool so caches do not flatter the row path; the
 * loop's rows are make_hot_row's.
 *
 * Usage: bench_slice [--quick] [--v N] [--json] [--step-only] [--steps N]
 *        [--no-clock]
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

/* ------------------------------------------------------------------ */
/* The loop a runtime runs: sample + accept on changing rows           */
/* ------------------------------------------------------------------ */

#define STEP_POOL 32
#define HOT 512

/* A row shaped like a language model's: a background well below a set of
 * HOT frequent tokens (the same ids in every row, as text keeps reusing
 * its tokens) whose logits fall with their rank, plus per-row noise. The
 * accepted tokens then come back in later slices and the penalties
 * window holds slice tokens, as in a runtime. */
static void make_hot_row(float *row, int32_t V, const int32_t *hot, uint64_t seed)
{
    tu_rng r = {seed};
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)(tu_next(&r) >> 40) * (8.0f / 16777216.0f) - 4.0f;
    for (int h = 0; h < HOT; h++)
        row[hot[h]] = (float)(12.0 - 1.3 * log(1.0 + h) + 1.5 * tu_normal(&r));
}

/* The production chain of issue 11 (top_k 40: planned k = 104). */
static sift_chain *production40(void)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 4321;
    sift_chain *c;
    sift_error e;
    if (sift_chain_new(&c, &p, &e) || sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, &e) ||
        sift_chain_add_top_k(c, 40, &e) || sift_chain_add_top_p(c, 0.95f, 1, &e) ||
        sift_chain_add_min_p(c, 0.05f, 1, &e) || sift_chain_add_temp(c, 0.8f, &e) ||
        sift_chain_add_dist(c, &e))
        die("production chain", &e);
    return c;
}

/* `steps` slice steps, each sift_chain_sample_slice + sift_chain_accept
 * (the two calls tests/bench/bench_slice_step.sh counts under callgrind),
 * on the slices of STEP_POOL rows taken in turn, the accepted token fed
 * back. The first 64 steps fill the penalties window and are not timed.
 * Reports the median time of a step, the mean number of slice tokens
 * that are in the window (the ones the penalties re-rank) and the
 * counters; `timed` = 0 skips the clock (the callgrind run). */
static void step_loop(const out *o, int32_t V, int steps, int timed)
{
    sift_error e;
    sift_chain *c = production40();
    sift_plan plan = {.struct_size = sizeof(sift_plan)};
    if (sift_chain_plan(c, &plan, NULL, &e))
        die("plan", &e);
    const int32_t k = plan.k;
    if (plan.max_extras != 0) {
        fprintf(stderr, "bench_slice: the production chain asks for extras\n");
        exit(1);
    }
    int32_t hot[HOT];
    tu_rng hr = {0x407ULL + (uint64_t)V};
    for (int h = 0; h < HOT; h++) {
        int dup;
        do {
            hot[h] = (int32_t)tu_range(&hr, 0, V - 1);
            dup = 0;
            for (int j = 0; j < h; j++)
                dup |= hot[j] == hot[h];
        } while (dup);
    }
    float *row = malloc((size_t)V * sizeof *row);
    sift_candidate *pre = malloc((size_t)STEP_POOL * (size_t)k * sizeof *pre);
    double *t = malloc((size_t)steps * sizeof *t);
    sift_slicer *sl;
    if (!row || !pre || !t) {
        fprintf(stderr, "bench_slice: out of memory\n");
        exit(1);
    }
    if (sift_slicer_new(&sl, V, NULL, &e))
        die("slicer", &e);
    sift_slice slices[STEP_POOL];
    for (int i = 0; i < STEP_POOL; i++) {
        make_hot_row(row, V, hot, 0xabcULL + (uint64_t)i * 104729u);
        if (sift_slicer_build(sl, row, V, k, NULL, 0, &slices[i], &e))
            die("build", &e);
        memcpy(pre + (size_t)i * (size_t)k, slices[i].prefix, (size_t)k * sizeof *pre);
        slices[i].prefix = pre + (size_t)i * (size_t)k;
    }
    sift_slicer_free(sl);
    free(row);
    int32_t win[64];
    int wn = 0, wh = 0;
    uint64_t in_window = 0, digest = 0xcbf29ce484222325ull;
    const int warm = 64;
    for (int i = 0; i < warm + steps; i++) {
        const sift_slice *s = &slices[i % STEP_POOL];
        for (int32_t j = 0; j < k; j++)
            for (int w = 0; w < wn; w++)
                if (win[w] == s->prefix[j].id) {
                    in_window += i >= warm;
                    break;
                }
        int32_t tok;
        double t0 = timed ? now_us() : 0.0;
        if (sift_chain_sample_slice(c, s, &tok, &e) || sift_chain_accept(c, tok, &e))
            die("step", &e);
        if (i >= warm)
            t[i - warm] = timed ? now_us() - t0 : 0.0;
        digest = (digest ^ (uint32_t)tok) * 0x100000001b3ull;
        win[wh] = tok;
        wh = (wh + 1) % 64;
        wn += wn < 64;
    }
    sift_stats st = {.struct_size = sizeof(sift_stats)};
    if (sift_chain_stats(c, &st, NULL))
        exit(1);
    double us = timed ? median(t, steps) : 0.0;
    double tw = (double)in_window / steps;
    if (o->json)
        printf("{\"name\":\"slice step (sample + accept)\",\"V\":%d,\"k\":%d,\"steps\":%d,"
               "\"median_us\":%.3f,\"window_tokens_in_slice\":%.1f,\"slice_decided\":%llu,"
               "\"hook_calls\":%llu,\"tokens_fnv\":\"%016llx\"}\n",
               (int)V, (int)k, steps, us, tw, (unsigned long long)st.slice_decided,
               (unsigned long long)st.hook_calls, (unsigned long long)digest);
    else
        printf("%-34s %7d %5d %11.3f   (%d steps; %.1f window tokens in the slice; "
               "decided %llu, hook calls %llu, tokens %016llx)\n",
               "slice step (sample + accept)", (int)V, (int)k, us, steps, tw,
               (unsigned long long)st.slice_decided, (unsigned long long)st.hook_calls,
               (unsigned long long)digest);
    fflush(stdout);
    sift_chain_free(c);
    free(t);
    free(pre);
}

int main(int argc, char **argv)
{
    out o = {0};
    int quick = 0, step_only = 0, timed = 1, steps = 0;
    int32_t only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--json"))
            o.json = 1;
        else if (!strcmp(argv[i], "--step-only"))
            step_only = 1;
        else if (!strcmp(argv[i], "--no-clock"))
            timed = 0;
        else if (!strcmp(argv[i], "--v") && i + 1 < argc)
            only = (int32_t)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = (int)strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_slice [--quick] [--v N] [--json] [--step-only] "
                            "[--steps N] [--no-clock]\n");
            return 2;
        }
    }
    if (only < 0 || only > (1 << 24)) {
        fprintf(stderr, "bench_slice: --v must be in [1, 16777216]\n");
        return 2;
    }
    if (only && only < 2 * HOT) {
        fprintf(stderr, "bench_slice: --v must be at least %d\n", 2 * HOT);
        return 2;
    }
    if (steps < 0 || steps > 100000000) {
        fprintf(stderr, "bench_slice: --steps must be in [1, 100000000]\n");
        return 2;
    }
    if (!steps)
        steps = quick ? 2000 : 20000;
    if (!o.json)
        printf("%-34s %7s %5s %11s %10s\n", "name", "V", "k", "median_us", "ratio");
    static const int32_t vs[] = {151936, 248320};
    static const int32_t step_vs[] = {32768, 1048576};
    int reps = quick ? 50 : 400;
    if (!step_only) {
        if (only)
            run(&o, only, reps);
        else
            for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
                run(&o, vs[i], reps);
    }
    if (only)
        step_loop(&o, only, steps, timed);
    else
        for (size_t i = 0; i < sizeof step_vs / sizeof step_vs[0]; i++)
            step_loop(&o, step_vs[i], steps, timed);
    return 0;
}

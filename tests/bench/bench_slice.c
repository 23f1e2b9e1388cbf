/*
 * bench_slice.c - the slice benchmark (`make bench`; not a test).
 *
 * Owns: timing, in one run and on the same rows, (1) the slice builder
 * (Prefix(k) from a whole row: what a device top-k does) against the
 * floor of any pass over the row: a max-reduction with four vector
 * accumulators through the library's own run-time dispatch (core/cpu.c:
 * the best of SSE2, AVX2, AVX-512F the machine has, or what SIFT_SIMD
 * caps it to), with memcpy of the row beside it; (2) a step of the
 * production chain (penalties 64 -> top_k 20 -> top_p 0.95 -> min_p 0.05
 * -> temp 0.8 -> dist) sampled from a slice of its planned k = 84 against
 * the same step on the whole row (sample only); (3) the loop a runtime
 * runs, at V = 32,768 and 1,048,576: sift_chain_sample_slice +
 * sift_chain_accept of the production chain of issue 11 (top_k 40,
 * planned k = 104) on changing rows whose frequent tokens recur, so the
 * penalties window holds slice tokens and re-ranks them (step_loop).
 * Medians over many repetitions; the ratios are the numbers to compare
 * across machines. The instructions of a loop step come from callgrind,
 * which is repeatable on a loaded machine: `make bench-slice`
 * (tests/bench/bench_slice_step.sh) prints them beside the medians.
 *
 * The slice builder runs on three kinds of rows: peaked (N(0, 2) plus a
 * head of 50 ids raised by U(5, 15)), the same rounded to bf16 (heavy
 * ties), and flat (U[-1, 1]). Each repetition takes the next row of a
 * pool of 8 (8 MB at V = 248,320, so the row comes from the last-level
 * cache as a runtime's fresh row would, not from L1/L2), and times the
 * floor, memcpy and the builder on that same row one after the other, so
 * load on the machine falls on all three alike.
 *
 * Usage: bench_slice [--quick] [--v N] [--json] [--slicer] [--k K]
 *                    [--rows peaked|bf16|flat] [--reps N] [--step-only]
 *                    [--steps N] [--no-clock]
 *   --slicer  only the slice builder against the floor
 *   --k, --rows, --reps  one k (of 1, 16, 40, 104, 256), one row kind, N
 *             repetitions: for instruction counts under callgrind
 *             (tests/bench/slicer_callgrind.sh, make bench-slicer-cg)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/simd.h"
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

enum { KIND_PEAKED, KIND_BF16, KIND_FLAT, N_KIND };
static const char *const KIND_NAME[N_KIND] = {"peaked", "bf16", "flat"};

/* The rows of issue 12: peaked, bf16-rounded peaked, flat. */
static void make_kind_row(float *row, int32_t V, int kind, uint64_t seed)
{
    tu_rng r = {seed};
    if (kind == KIND_FLAT) {
        for (int32_t i = 0; i < V; i++)
            row[i] = (float)(2.0 * tu_unif(&r) - 1.0);
        return;
    }
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)(2.0 * tu_normal(&r));
    for (int j = 0; j < 50; j++)
        row[tu_range(&r, 0, V - 1)] += (float)(5.0 + 10.0 * tu_unif(&r));
    if (kind == KIND_BF16)
        for (int32_t i = 0; i < V; i++)
            row[i] = tu_bf16(row[i]);
}

/* memcpy of the row, in a function of its own so that callgrind counts
 * it apart from the library's copies (slicer_callgrind.sh). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
copy_row(float *dst, const float *row, int32_t V)
{
    memcpy(dst, row, (size_t)V * sizeof *dst);
}

static float max_over(const float *row, int32_t V)
{
    return sift__simd()->max_f32(row, (size_t)V);
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
    int only_kind;  /* -1: every row kind */
    int32_t only_k; /* 0: every k */
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

/* Median and spread (10th and 90th percentile) of t[0..n); sorts t. */
static void spread(double *t, int n, double *med, double *p10, double *p90)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *med = t[n / 2];
    *p10 = t[n / 10];
    *p90 = t[(n * 9) / 10];
}

static void report_spread(const out *o, const char *name, const char *kind, int32_t V, int32_t k,
                          double *t, int n, double floor_us)
{
    double med, p10, p90;
    spread(t, n, &med, &p10, &p90);
    if (o->json)
        printf("{\"name\":\"%s\",\"rows\":\"%s\",\"V\":%d,\"k\":%d,\"median_us\":%.3f,"
               "\"p10_us\":%.3f,\"p90_us\":%.3f,\"ratio\":%.3f,\"ratio_to\":\"floor\","
               "\"simd\":\"%s\"}\n",
               name, kind, (int)V, (int)k, med, p10, p90, med / floor_us, sift__simd()->name);
    else
        printf("%-22s %-7s %7d %5d %9.2f %9.2f %9.2f %7.2f x floor\n", name, kind, (int)V, (int)k,
               med, p10, p90, med / floor_us);
    fflush(stdout);
}

/* The slice builder against the floor and memcpy, per row kind and k:
 * each timed call reads the next row of the pool, so every call finds
 * its row as far from the core as the others do. */
static void run_slicer(const out *o, int32_t V, int reps)
{
    static const int32_t ks[] = {1, 16, 40, 104, 256};
    enum { NK = sizeof ks / sizeof ks[0] };
    float *rows[POOL];
    float *dst = malloc((size_t)V * sizeof *dst);
    double *t = malloc((size_t)reps * (NK + 2) * sizeof *t);
    if (!dst || !t) {
        fprintf(stderr, "bench_slice: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < POOL; i++) {
        rows[i] = malloc((size_t)V * sizeof(float));
        if (!rows[i]) {
            fprintf(stderr, "bench_slice: out of memory\n");
            exit(1);
        }
    }
    sift_slicer *sl;
    sift_error e;
    if (sift_slicer_new(&sl, V, NULL, &e))
        die("slicer", &e);
    if (!o->json)
        printf("%-22s %-7s %7s %5s %9s %9s %9s %7s   (dispatch: %s)\n", "name", "rows", "V", "k",
               "median_us", "p10_us", "p90_us", "ratio", sift__simd()->name);
    for (int kind = 0; kind < N_KIND; kind++) {
        if (o->only_kind >= 0 && kind != o->only_kind)
            continue;
        for (int i = 0; i < POOL; i++)
            make_kind_row(rows[i], V, kind, 0xb0b0ULL + (uint64_t)i * 7919u + (uint64_t)V);
        double *tf = t, *tm = t + reps, *tb = t + 2 * (size_t)reps;
        unsigned next = 0;
        for (int i = -3; i < reps; i++) { /* three rounds of warm-up */
            const float *row = rows[next++ % POOL];
            double t0 = now_us();
            sink_f = max_over(row, V);
            double t1 = now_us();
            row = rows[next++ % POOL];
            double t2 = now_us();
            copy_row(dst, row, V);
            double t3 = now_us();
            sink_f = dst[i & 1023];
            if (i >= 0) {
                tf[i] = t1 - t0;
                tm[i] = t3 - t2;
            }
            for (int j = 0; j < NK; j++) {
                if (o->only_k && ks[j] != o->only_k)
                    continue;
                sift_slice s;
                row = rows[next++ % POOL];
                double a = now_us();
                if (sift_slicer_build(sl, row, V, ks[j], NULL, 0, &s, &e))
                    die("build", &e);
                double b = now_us();
                sink_i = s.prefix[0].id;
                if (i >= 0)
                    tb[(size_t)j * (size_t)reps + (size_t)i] = b - a;
            }
        }
        double fl, p10, p90;
        spread(tf, reps, &fl, &p10, &p90);
        report_spread(o, "floor (vector max)", KIND_NAME[kind], V, 0, tf, reps, fl);
        report_spread(o, "memcpy of the row", KIND_NAME[kind], V, 0, tm, reps, fl);
        for (int j = 0; j < NK; j++)
            if (!o->only_k || ks[j] == o->only_k)
                report_spread(o, "slice builder", KIND_NAME[kind], V, ks[j], tb + (size_t)j * reps,
                              reps, fl);
    }
    sift_slicer_free(sl);
    for (int i = 0; i < POOL; i++)
        free(rows[i]);
    free(t);
    free(dst);
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
    report(o, "floor (vector max over row)", V, 0, floor_us, floor_us, "floor");

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
    out o = {.json = 0, .only_kind = -1, .only_k = 0};
    int quick = 0, slicer_only = 0, reps_arg = 0, step_only = 0, timed = 1, steps = 0;
    int32_t only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--slicer"))
            slicer_only = 1;
        else if (!strcmp(argv[i], "--k") && i + 1 < argc)
            o.only_k = (int32_t)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps_arg = (int)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc) {
            const char *w = argv[++i];
            for (int kd = 0; kd < N_KIND; kd++)
                if (!strcmp(w, KIND_NAME[kd]))
                    o.only_kind = kd;
            if (o.only_kind < 0) {
                fprintf(stderr, "bench_slice: --rows is peaked, bf16 or flat\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--json"))
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
            fprintf(stderr, "usage: bench_slice [--quick] [--v N] [--json] [--slicer] [--k K] "
                            "[--rows KIND] [--reps N] [--step-only] [--steps N] [--no-clock]\n");
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
    static const int32_t vs[] = {151936, 248320};
    static const int32_t step_vs[] = {32768, 1048576};
    int reps = reps_arg > 0 ? reps_arg : (quick ? 50 : 400);
    size_t nv = only ? 1 : sizeof vs / sizeof vs[0];
    if (!step_only) {
        for (size_t i = 0; i < nv; i++)
            run_slicer(&o, only ? only : vs[i], reps);
        if (slicer_only)
            return 0;
        if (!o.json)
            printf("\n%-34s %7s %5s %11s %10s\n", "name", "V", "k", "median_us", "ratio");
        for (size_t i = 0; i < nv; i++)
            run(&o, only ? only : vs[i], reps);
    }
    if (only)
        step_loop(&o, only, steps, timed);
    else
        for (size_t i = 0; i < sizeof step_vs / sizeof step_vs[0]; i++)
            step_loop(&o, step_vs[i], steps, timed);
    return 0;
}

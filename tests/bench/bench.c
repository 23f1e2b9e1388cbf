/*
 * bench.c - the sift benchmark (`make bench`; not a test).
 *
 * Owns: timing every sampler alone (followed by dist), the production
 * chain and llama.cpp's default chain on full rows of realistic size, and
 * relating each to a "floor": one max-reduction over the row with four
 * vector accumulators, through the library's run-time dispatch (SSE2,
 * AVX2 or AVX-512F, core/cpu.c), the least work any sampler must do to
 * look at every logit once; memcpy of the row is printed beside it. The ratio to
 * the floor measured in the same run is the number to watch; absolute
 * microseconds depend on the machine.
 *
 * The row is N(0, 2) with a handful of peaked tokens 12..20 above the
 * mean (fixed seed), so the distribution has a few dominant tokens over a
 * long tail that still holds real mass, the shape of an LLM's logits.
 * Each timed step is one sift_chain_sample on the full row; nothing is
 * accepted while timing, so the chain's state (history, mu) stays fixed
 * and every step does the same work. Chains that need a history get 64
 * tokens accepted before timing.
 *
 * Usage: bench [--quick] [--v N] [--json]
 *   --quick  fewer repetitions (a smoke run)
 *   --v N    only rows of length N (default: 32000 128256 151936 248320)
 *   --json   one JSON object per line instead of the table
 * A chain whose construction fails (a sampler that is not there yet)
 * prints "n/a".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"
#include "core/simd.h"
#include "sift_internal.h"
#include "testutil.h"

#define MAX_REPS 1000
#define HIST_N 64

typedef struct opts {
    int quick;
    int json;
    int32_t only_v;
} opts;

/* A chain under test: a name and a builder. */
typedef sift_status (*build_fn)(sift_chain *c, int32_t V, sift_error *err);

typedef struct bench_case {
    const char *name;
    build_fn build;
    int needs_history; /* accept HIST_N tokens before timing */
} bench_case;

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

typedef struct stats {
    double med, p10, p90;
} stats;

static stats summarize(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    stats s;
    s.med = t[n / 2];
    s.p10 = t[n / 10];
    s.p90 = t[(n * 9) / 10];
    return s;
}

/* ------------------------------------------------------------------ */
/* Chains                                                              */
/* ------------------------------------------------------------------ */

static sift_status b_greedy(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    return sift_chain_add_greedy(c, e);
}
static sift_status b_dist(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    return sift_chain_add_dist(c, e);
}
static sift_status b_top_k(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = sift_chain_add_top_k(c, 40, e);
    return s ? s : sift_chain_add_dist(c, e);
}
static sift_status b_top_p(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = sift_chain_add_top_p(c, 0.95f, 1, e);
    return s ? s : sift_chain_add_dist(c, e);
}
static sift_status b_min_p(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = sift_chain_add_min_p(c, 0.05f, 1, e);
    return s ? s : sift_chain_add_dist(c, e);
}
static sift_status b_typical(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = sift_chain_add_typical(c, 0.9f, 1, e);
    return s ? s : sift_chain_add_dist(c, e);
}
static sift_status b_temp(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = sift_chain_add_temp(c, 0.8f, e);
    return s ? s : sift_chain_add_dist(c, e);
}
static sift_status b_temp_ext(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = sift_chain_add_temp_ext(c, 0.8f, 0.5f, 1.0f, e);
    return s ? s : sift_chain_add_dist(c, e);
}
static sift_status b_xtc(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = sift_chain_add_xtc(c, 1.0f, 0.1f, 1, e);
    return s ? s : sift_chain_add_dist(c, e);
}
static sift_status b_top_n_sigma(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = sift_chain_add_top_n_sigma(c, 1.0f, e);
    return s ? s : sift_chain_add_dist(c, e);
}
static sift_status b_mirostat(sift_chain *c, int32_t V, sift_error *e)
{
    return sift_chain_add_mirostat(c, V, 5.0f, 0.1f, 100, e);
}
static sift_status b_mirostat_v2(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    return sift_chain_add_mirostat_v2(c, 5.0f, 0.1f, e);
}
static sift_status b_penalties(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, e);
    return s ? s : sift_chain_add_dist(c, e);
}

/* DRY with breakers given as token sequences: "\n", ":", "\"", "*" stand
 * in as four single tokens, as llama.cpp's defaults would map. */
static sift_status add_dry(sift_chain *c, float mult, sift_error *e)
{
    static const int32_t b0[] = {13}, b1[] = {25}, b2[] = {1}, b3[] = {9};
    const int32_t *seqs[] = {b0, b1, b2, b3};
    const size_t lens[] = {1, 1, 1, 1};
    return sift__chain_add_dry_tokens(c, mult, 1.75f, 2, 1024, seqs, lens, 4, e);
}
static sift_status b_dry(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = add_dry(c, 0.8f, e);
    return s ? s : sift_chain_add_dist(c, e);
}
static sift_status b_logit_bias(sift_chain *c, int32_t V, sift_error *e)
{
    sift_bias b[3] = {{1, -INFINITY}, {V / 2, 2.5f}, {V - 1, -1.0f}};
    sift_status s = sift_chain_add_logit_bias(c, b, 3, e);
    return s ? s : sift_chain_add_dist(c, e);
}

/* What a serving stack typically runs. */
static sift_status b_production(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s;
    if ((s = sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, e)) ||
        (s = sift_chain_add_top_k(c, 40, e)) || (s = sift_chain_add_top_p(c, 0.95f, 1, e)) ||
        (s = sift_chain_add_min_p(c, 0.05f, 1, e)) || (s = sift_chain_add_temp(c, 0.8f, e)))
        return s;
    return sift_chain_add_dist(c, e);
}

/* llama.cpp's default sampler chain (common_params_sampling defaults). */
static sift_status b_llama_default(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s;
    if ((s = sift_chain_add_penalties(c, 64, 1.0f, 0.0f, 0.0f, e)) || (s = add_dry(c, 0.0f, e)) ||
        (s = sift_chain_add_top_n_sigma(c, -1.0f, e)) || (s = sift_chain_add_top_k(c, 40, e)) ||
        (s = sift_chain_add_typical(c, 1.0f, 1, e)) || (s = sift_chain_add_top_p(c, 0.95f, 1, e)) ||
        (s = sift_chain_add_min_p(c, 0.05f, 1, e)) ||
        (s = sift_chain_add_xtc(c, 0.0f, 0.1f, 1, e)) || (s = sift_chain_add_temp(c, 0.8f, e)))
        return s;
    return sift_chain_add_dist(c, e);
}

static const bench_case cases[] = {
    {"greedy", b_greedy, 0},
    {"dist", b_dist, 0},
    {"top_k 40 + dist", b_top_k, 0},
    {"top_p 0.95 + dist", b_top_p, 0},
    {"min_p 0.05 + dist", b_min_p, 0},
    {"typical 0.9 + dist", b_typical, 0},
    {"temp 0.8 + dist", b_temp, 0},
    {"temp_ext 0.8/0.5/1 + dist", b_temp_ext, 0},
    {"xtc 1.0/0.1 + dist", b_xtc, 0},
    {"top_n_sigma 1.0 + dist", b_top_n_sigma, 0},
    {"mirostat 5/0.1/100", b_mirostat, 0},
    {"mirostat_v2 5/0.1", b_mirostat_v2, 0},
    {"penalties 64/1.1 + dist", b_penalties, 1},
    {"dry 0.8/1.75/2/1024 + dist", b_dry, 1},
    {"logit_bias 3 + dist", b_logit_bias, 0},
    {"production chain", b_production, 1},
    {"llama.cpp default chain", b_llama_default, 1},
};

/* ------------------------------------------------------------------ */
/* Measurement                                                         */
/* ------------------------------------------------------------------ */

static void make_row(float *row, int32_t V)
{
    tu_rng r = {0x5eedULL ^ (uint64_t)V};
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)(2.0 * tu_normal(&r));
    /* a few dominant tokens, as after a confident context */
    for (int j = 0; j < 6; j++)
        row[tu_range(&r, 0, V - 1)] = (float)(12.0 + 8.0 * tu_unif(&r));
}

/* The floor: a max-reduction with four vector accumulators through the
 * library's run-time dispatch (core/cpu.c; SIFT_SIMD caps the level). */
static float floor_step(const float *row, int32_t V)
{
    return sift__simd()->max_f32(row, (size_t)V);
}

static int reps_for(const opts *o, int32_t V)
{
    int reps = V <= 40000 ? 1000 : 400;
    return o->quick ? reps / 10 : reps;
}

static stats time_floor(const float *row, int32_t V, int reps, double *t)
{
    for (int w = 0; w < 5; w++)
        sink_f = floor_step(row, V);
    for (int i = 0; i < reps; i++) {
        double t0 = now_us();
        sink_f = floor_step(row, V);
        t[i] = now_us() - t0;
    }
    return summarize(t, reps);
}

/* memcpy of the row into dst, beside the floor. */
static stats time_memcpy(const float *row, float *dst, int32_t V, int reps, double *t)
{
    for (int i = 0; i < reps; i++) {
        double t0 = now_us();
        memcpy(dst, row, (size_t)V * sizeof *dst);
        t[i] = now_us() - t0;
        sink_f = dst[i % V];
    }
    return summarize(t, reps);
}

/* Returns 0 and fills *st, or 1 when the chain cannot be built or run. */
static int time_case(const bench_case *bc, const float *row, int32_t V, int reps, double *t,
                     stats *st, char *why, size_t why_cap)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 1234;
    sift_chain *c = NULL;
    sift_error err;
    if (sift_chain_new(&c, &p, &err) || bc->build(c, V, &err)) {
        snprintf(why, why_cap, "%s", err.message);
        sift_chain_free(c);
        return 1;
    }
    int32_t tok = 0;
    if (bc->needs_history) {
        tu_rng r = {99};
        for (int i = 0; i < HIST_N; i++) {
            if (sift_chain_accept(c, (int32_t)tu_range(&r, 0, V - 1), &err)) {
                snprintf(why, why_cap, "%s", err.message);
                sift_chain_free(c);
                return 1;
            }
        }
    }
    for (int w = 0; w < 3; w++) {
        if (sift_chain_sample(c, row, V, &tok, &err)) {
            snprintf(why, why_cap, "%s", err.message);
            sift_chain_free(c);
            return 1;
        }
    }
    for (int i = 0; i < reps; i++) {
        double t0 = now_us();
        sift_status s = sift_chain_sample(c, row, V, &tok, &err);
        t[i] = now_us() - t0;
        if (s) {
            snprintf(why, why_cap, "%s", err.message);
            sift_chain_free(c);
            return 1;
        }
        sink_i = tok;
    }
    sift_chain_free(c);
    *st = summarize(t, reps);
    return 0;
}

static void run_v(const opts *o, int32_t V)
{
    float *row = malloc((size_t)V * sizeof *row);
    double *t = malloc(MAX_REPS * sizeof *t);
    if (!row || !t) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    make_row(row, V);
    int reps = reps_for(o, V);
    stats fl = time_floor(row, V, reps, t);
    if (o->json)
        printf("{\"name\":\"floor (vector max over row)\",\"V\":%d,\"median_us\":%.2f,"
               "\"p10_us\":%.2f,\"p90_us\":%.2f,\"ratio\":1.00}\n",
               (int)V, fl.med, fl.p10, fl.p90);
    else
        printf("%-28s %7d %10.2f %10.2f %10.2f %8.2f  (%s)\n", "floor (vector max over row)",
               (int)V, fl.med, fl.p10, fl.p90, 1.0, sift__simd()->name);
    float *dst = malloc((size_t)V * sizeof *dst);
    if (!dst) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    stats mc = time_memcpy(row, dst, V, reps, t);
    free(dst);
    if (o->json)
        printf("{\"name\":\"memcpy of the row\",\"V\":%d,\"median_us\":%.2f,"
               "\"p10_us\":%.2f,\"p90_us\":%.2f,\"ratio\":%.2f}\n",
               (int)V, mc.med, mc.p10, mc.p90, mc.med / fl.med);
    else
        printf("%-28s %7d %10.2f %10.2f %10.2f %8.2f\n", "memcpy of the row", (int)V, mc.med,
               mc.p10, mc.p90, mc.med / fl.med);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stats st;
        char why[SIFT_ERROR_MESSAGE_MAX] = "";
        int na = time_case(&cases[i], row, V, reps, t, &st, why, sizeof why);
        double base = fl.med > 0 ? fl.med : 1e-9;
        if (o->json) {
            if (na)
                printf("{\"name\":\"%s\",\"V\":%d,\"median_us\":null,\"error\":\"%s\"}\n",
                       cases[i].name, (int)V, why);
            else
                printf("{\"name\":\"%s\",\"V\":%d,\"median_us\":%.2f,\"p10_us\":%.2f,"
                       "\"p90_us\":%.2f,\"ratio\":%.2f}\n",
                       cases[i].name, (int)V, st.med, st.p10, st.p90, st.med / base);
        } else if (na) {
            printf("%-28s %7d %10s %10s %10s %8s  (%s)\n", cases[i].name, (int)V, "n/a", "n/a",
                   "n/a", "n/a", why);
        } else {
            printf("%-28s %7d %10.2f %10.2f %10.2f %8.2f\n", cases[i].name, (int)V, st.med, st.p10,
                   st.p90, st.med / base);
        }
        fflush(stdout);
    }
    free(row);
    free(t);
}

int main(int argc, char **argv)
{
    opts o = {0, 0, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            o.quick = 1;
        } else if (!strcmp(argv[i], "--json")) {
            o.json = 1;
        } else if (!strcmp(argv[i], "--v") && i + 1 < argc) {
            long v = strtol(argv[++i], NULL, 10);
            if (v < 1 || v > SIFT_DEFAULT_MAX_VOCAB) {
                fprintf(stderr, "bench: --v must be in [1, %d]\n", SIFT_DEFAULT_MAX_VOCAB);
                return 2;
            }
            o.only_v = (int32_t)v;
        } else {
            fprintf(stderr, "usage: bench [--quick] [--v N] [--json]\n");
            return 2;
        }
    }
    static const int32_t vs[] = {32000, 128256, 151936, 248320};
    if (!o.json)
        printf("%-28s %7s %10s %10s %10s %8s\n", "name", "V", "median_us", "p10_us", "p90_us",
               "x floor");
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
        if (!o.only_v || o.only_v == vs[i])
            run_v(&o, vs[i]);
    if (o.only_v && o.only_v != 32000 && o.only_v != 128256 && o.only_v != 151936 &&
        o.only_v != 248320)
        run_v(&o, o.only_v);
    return 0;
}

/*
 * bench.c - the sift benchmark (`make bench`; not a test).
 *
 * Owns: timing the chains of issue 12's table (the production chain,
 * llama.cpp's default chain, penalties -> greedy, top_k, every
 * whole-distribution sampler followed by dist, mirostat v1/v2, dist
 * alone, DRY with a 4,096-token window before top_k) and a few more, on
 * whole rows of V = 151,936 and 248,320 tokens, and relating each to two
 * limits measured in the same run, interleaved with it:
 *   - the floor: one max-reduction over the row with four vector
 *     accumulators, through the library's run-time dispatch (SSE2, AVX2 or
 *     AVX-512F, core/cpu.c; SIFT_SIMD caps it), the least work any step
 *     that looks at every logit once must do;
 *   - memcpy of the row into a buffer of its size;
 *   - "least" (AVX-512 only): a float exponential of l - m with float
 *     lane sums, nothing stored, cheaper than any pass that could be
 *     certified to core/fdraw.c's bound (one fma rounds x 32/ln2 to an
 *     integer k, one fma reduces, 1 + r + r^2/2 times 2^(j/32) from one
 *     32-entry table, the exponent added to the bits: the polynomial
 *     alone errs by up to 2^-22.2, the float sums by far more). It
 *     decides nothing; it shows what weighing every token costs at
 *     least, against which dist's goal on flat rows is read
 *     (docs/samplers.md).
 *
 * A step is sift_chain_sample followed by sift_chain_accept of the token
 * it gave, so the chain's state (history, mu) moves as in generation, and
 * the rows change from step to step: each measurement cycles through
 * NROWS different rows of one shape (about 8 MB at V = 248,320, more than
 * a core's cache, as a fresh row from a model is). The floor and memcpy
 * read the same rows in the same order right before each case's
 * measurement, in every round; a case's ratio is the median over rounds
 * of (its time / the floor's time in that round), so a load that changes
 * during the run moves both. Times are CPU time of the thread
 * (CLOCK_THREAD_CPUTIME_ID) divided by the steps of a measurement.
 *
 * Rows (fixed seeds):
 *   peaked  N(0, sigma = 2) per token, plus a head of 50 ids raised by
 *           U(5, 15): a few dominant tokens over a tail that still holds
 *           real mass;
 *   bf16    the peaked rows rounded to bfloat16 (ties everywhere);
 *   flat    U[-1, 1]: thousands of tokens survive every truncation.
 *
 * Cases whose name ends in "(full pass)" run the same chain with the
 * prefix fast path turned off (sift__sample_row with try_prefix = 0): the
 * whole row loaded and every stage applied to it. The prefix path must
 * never be slower than that.
 *
 * Usage: bench [--quick] [--v N] [--rows K[,K]] [--case S[,S]]
 *              [--rounds N] [--json] [--route]
 *   --quick   3 rounds of 8 steps (a smoke run)
 *   --v N     only rows of length N (default: 151936 248320)
 *   --rows    only the named row shapes (peaked, bf16, flat)
 *   --case    only cases whose name contains one of the substrings
 *             (=NAME: the case named NAME exactly)
 *   --rounds  rounds per case (default 7)
 *   --json    one JSON object per line instead of the table
 *   --route   after each case, how many of its steps the row's prefix
 *             decided (the prefix path, or the tail route: docs/analyzer.md,
 *             "Tail mass") and how many tried it; every other step ran
 *             the full pass (sift_chain_stats; the two warm-up steps
 *             included)
 * The same filters are read from SIFT_BENCH_V, SIFT_BENCH_ROWS,
 * SIFT_BENCH_CASE and SIFT_BENCH_ROUNDS when the option is not given.
 * A chain whose construction fails prints "n/a".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"
#include "core/simd.h"
#include "core/step.h"
#include "sift_internal.h"
#include "testutil.h"

#define NROWS 8
#define MAX_ROUNDS 64
#define HIST_N 64
#define HEAD_N 50

typedef struct opts {
    int quick;
    int json;
    int route;
    int rounds;
    int steps;
    int32_t only_v;
    const char *rows;  /* comma-separated shapes, NULL = all */
    const char *cases; /* comma-separated substrings, NULL = all */
} opts;

/* A chain under test: a name and a builder. */
typedef sift_status (*build_fn)(sift_chain *c, int32_t V, sift_error *err);

typedef struct bench_case {
    const char *name;
    build_fn build;
    int32_t history; /* tokens accepted before timing */
    int full;        /* 1: the prefix path is off (the full pass) */
} bench_case;

static volatile float sink_f;
static volatile int32_t sink_i;

static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stats {
    double med, lo, hi;
} stats;

/* Median, minimum and maximum of t[0..n) (sorts t). */
static stats summarize(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    stats s;
    s.med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    s.lo = t[0];
    s.hi = t[n - 1];
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
static sift_status b_penalties_greedy(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    sift_status s = sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, e);
    return s ? s : sift_chain_add_greedy(c, e);
}

/* DRY with breakers given as token sequences: "\n", ":", "\"", "*" stand
 * in as four single tokens, as llama.cpp's defaults would map. */
static sift_status add_dry(sift_chain *c, float mult, int32_t last_n, sift_error *e)
{
    static const int32_t b0[] = {13}, b1[] = {25}, b2[] = {1}, b3[] = {9};
    const int32_t *seqs[] = {b0, b1, b2, b3};
    const size_t lens[] = {1, 1, 1, 1};
    return sift__chain_add_dry_tokens(c, mult, 1.75f, 2, last_n, seqs, lens, 4, e);
}
static sift_status dry_top_k(sift_chain *c, int32_t window, sift_error *e)
{
    sift_status s;
    if ((s = add_dry(c, 0.8f, window, e)) || (s = sift_chain_add_top_k(c, 40, e)))
        return s;
    return sift_chain_add_dist(c, e);
}
static sift_status b_dry_top_k(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    return dry_top_k(c, 4096, e);
}
/* Windows that put the prefix (40 + window) on either side of the
 * one-pass top-k's largest k (SIFT__TOPK_MAX): the cost model's
 * crossover. */
static sift_status b_dry1024_top_k(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    return dry_top_k(c, 1024, e);
}
static sift_status b_dry2048_top_k(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    return dry_top_k(c, 2048, e);
}
static sift_status b_dry3072_top_k(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    return dry_top_k(c, 3072, e);
}
static sift_status b_dry4000_top_k(sift_chain *c, int32_t V, sift_error *e)
{
    (void)V;
    return dry_top_k(c, 4000, e);
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
    if ((s = sift_chain_add_penalties(c, 64, 1.0f, 0.0f, 0.0f, e)) ||
        (s = add_dry(c, 0.0f, 1024, e)) || (s = sift_chain_add_top_n_sigma(c, -1.0f, e)) ||
        (s = sift_chain_add_top_k(c, 40, e)) || (s = sift_chain_add_typical(c, 1.0f, 1, e)) ||
        (s = sift_chain_add_top_p(c, 0.95f, 1, e)) || (s = sift_chain_add_min_p(c, 0.05f, 1, e)) ||
        (s = sift_chain_add_xtc(c, 0.0f, 0.1f, 1, e)) || (s = sift_chain_add_temp(c, 0.8f, e)))
        return s;
    return sift_chain_add_dist(c, e);
}

static const bench_case cases[] = {
    /* issue 12's table, in its order */
    {"production chain", b_production, HIST_N, 0},
    {"production chain (full pass)", b_production, HIST_N, 1},
    {"llama.cpp default chain", b_llama_default, HIST_N, 0},
    {"llama.cpp default chain (full pass)", b_llama_default, HIST_N, 1},
    {"penalties 64/1.1 -> greedy", b_penalties_greedy, HIST_N, 0},
    {"penalties 64/1.1 -> greedy (full pass)", b_penalties_greedy, HIST_N, 1},
    {"top_k 40 + dist", b_top_k, 0, 0},
    {"top_k 40 + dist (full pass)", b_top_k, 0, 1},
    {"typical 0.9 + dist", b_typical, 0, 0},
    {"temp_ext 0.8/0.5/1 + dist", b_temp_ext, 0, 0},
    {"xtc 1.0/0.1 + dist", b_xtc, 0, 0},
    {"top_n_sigma 1 + dist", b_top_n_sigma, 0, 0},
    {"mirostat 5/0.1/100", b_mirostat, 0, 0},
    {"mirostat_v2 5/0.1", b_mirostat_v2, 0, 0},
    {"top_p 0.95 + dist", b_top_p, 0, 0},
    {"dist", b_dist, 0, 0},
    {"dry 4096 -> top_k 40 + dist", b_dry_top_k, 4096, 0},
    {"dry 4096 -> top_k 40 + dist (full pass)", b_dry_top_k, 4096, 1},
    /* more */
    {"dry 1024 -> top_k 40 + dist", b_dry1024_top_k, 1024, 0},
    {"dry 1024 -> top_k 40 + dist (full pass)", b_dry1024_top_k, 1024, 1},
    {"dry 2048 -> top_k 40 + dist", b_dry2048_top_k, 2048, 0},
    {"dry 2048 -> top_k 40 + dist (full pass)", b_dry2048_top_k, 2048, 1},
    {"dry 3072 -> top_k 40 + dist", b_dry3072_top_k, 3072, 0},
    {"dry 3072 -> top_k 40 + dist (full pass)", b_dry3072_top_k, 3072, 1},
    {"dry 4000 -> top_k 40 + dist", b_dry4000_top_k, 4000, 0},
    {"dry 4000 -> top_k 40 + dist (full pass)", b_dry4000_top_k, 4000, 1},
    {"greedy", b_greedy, 0, 0},
    {"min_p 0.05 + dist", b_min_p, 0, 0},
    {"temp 0.8 + dist", b_temp, 0, 0},
    {"penalties 64/1.1 + dist", b_penalties, HIST_N, 0},
    {"logit_bias 3 + dist", b_logit_bias, 0, 0},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* ------------------------------------------------------------------ */
/* Rows                                                                */
/* ------------------------------------------------------------------ */

enum { ROW_PEAKED, ROW_BF16, ROW_FLAT, ROW_KINDS };
static const char *const row_names[ROW_KINDS] = {"peaked", "bf16", "flat"};

static void make_row(float *row, int32_t V, int kind, int j)
{
    tu_rng r = {0x5eedULL ^ (uint64_t)V ^ ((uint64_t)j << 40)};
    if (kind == ROW_FLAT) {
        for (int32_t i = 0; i < V; i++)
            row[i] = (float)(2.0 * tu_unif(&r) - 1.0);
        return;
    }
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)(2.0 * tu_normal(&r));
    /* the head: 50 ids raised by U(5, 15) (a repeated id is raised again) */
    for (int h = 0; h < HEAD_N; h++) {
        int32_t id = (int32_t)tu_range(&r, 0, V - 1);
        row[id] += (float)(5.0 + 10.0 * tu_unif(&r));
    }
    if (kind == ROW_BF16)
        for (int32_t i = 0; i < V; i++)
            row[i] = tu_bf16(row[i]);
}

/* ------------------------------------------------------------------ */
/* Measurement                                                         */
/* ------------------------------------------------------------------ */

/* The floor over `steps` rows: a max-reduction through the library's
 * run-time dispatch (core/cpu.c; SIFT_SIMD caps the level). */
static double time_floor(float *const *rows, int32_t V, int steps)
{
    const sift__simd_ops *ops = sift__simd();
    double t0 = cpu_us();
    for (int s = 0; s < steps; s++)
        sink_f = ops->max_f32(rows[s % NROWS], (size_t)V);
    return (cpu_us() - t0) / steps;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define BENCH_LEAST 1

/* 2^(j/32) rounded to float, j < 32. */
static float least_tab[32];

/* e^x for the "least" pass, sixteen lanes (the header). */
__attribute__((target("avx512f,fma"), always_inline)) static inline __m512 least16(__m512 x)
{
    const __m512 shift = _mm512_set1_ps(0x1.8p23f), one = _mm512_set1_ps(1.0f);
    __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+5f), shift); /* 1.5 2^23 + k */
    __m512 r = _mm512_fnmadd_ps(_mm512_sub_ps(t, shift), _mm512_set1_ps(0x1.62e43p-6f), x);
    __m512 p = _mm512_fmadd_ps(_mm512_fmadd_ps(r, _mm512_set1_ps(0.5f), one), r, one);
    __m512i k = _mm512_castps_si512(t);
    __m512 z = _mm512_mul_ps(
        _mm512_permutex2var_ps(_mm512_loadu_ps(least_tab), k, _mm512_loadu_ps(least_tab + 16)), p);
    __m512i e = _mm512_and_si512(_mm512_slli_epi32(k, 18), _mm512_set1_epi32((int32_t)0xff800000u));
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(z), e));
}

/* The "least" pass over row[0..n - n mod 32) at maximum m. */
__attribute__((target("avx512f,fma"))) static float least_avx512(const float *row, size_t n,
                                                                 float m)
{
    const __m512 mv = _mm512_set1_ps(m);
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    for (size_t i = 0; i + 32 <= n; i += 32) {
        s0 = _mm512_add_ps(s0, least16(_mm512_sub_ps(_mm512_loadu_ps(row + i), mv)));
        s1 = _mm512_add_ps(s1, least16(_mm512_sub_ps(_mm512_loadu_ps(row + i + 16), mv)));
    }
    float r = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    _mm256_zeroupper();
    return r;
}
#endif

/* Whether the "least" pass runs here: AVX-512F and FMA, and the
 * dispatch (SIFT_SIMD) at AVX-512. */
static int least_runs(void)
{
#ifdef BENCH_LEAST
    return sift__simd()->level >= SIFT__SIMD_AVX512 && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* Mean CPU time of the "least" pass per row (ms: the rows' maxima). */
static double time_least(float *const *rows, const float *ms, int32_t V, int steps)
{
    double t0 = cpu_us();
#ifdef BENCH_LEAST
    for (int s = 0; s < steps; s++)
        sink_f = least_avx512(rows[s % NROWS], (size_t)V, ms[s % NROWS]);
#else
    (void)rows, (void)ms, (void)V, (void)steps;
#endif
    return (cpu_us() - t0) / steps;
}

static double time_memcpy(float *const *rows, float *dst, int32_t V, int steps)
{
    double t0 = cpu_us();
    for (int s = 0; s < steps; s++) {
        memcpy(dst, rows[s % NROWS], (size_t)V * sizeof *dst);
        sink_f = dst[s];
    }
    return (cpu_us() - t0) / steps;
}

static sift_status step(sift_chain *c, const bench_case *bc, const float *row, int32_t V,
                        sift_error *err)
{
    int32_t tok = -1;
    sift_status s = bc->full ? sift__sample_row(c, row, V, &tok, 0, err)
                             : sift_chain_sample(c, row, V, &tok, err);
    if (s)
        return s;
    sink_i = tok;
    return sift_chain_accept(c, tok, err);
}

/* Mean CPU time of one step over `steps` steps, or -1 (why filled). */
static double time_case(sift_chain *c, const bench_case *bc, float *const *rows, int32_t V,
                        int steps, int *next, char *why, size_t why_cap)
{
    sift_error err;
    double t0 = cpu_us();
    for (int s = 0; s < steps; s++) {
        if (step(c, bc, rows[(*next)++ % NROWS], V, &err)) {
            snprintf(why, why_cap, "%s", err.message);
            return -1;
        }
    }
    return (cpu_us() - t0) / steps;
}

static sift_chain *make_chain(const bench_case *bc, float *const *rows, int32_t V, char *why,
                              size_t why_cap)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 1234;
    sift_chain *c = NULL;
    sift_error err;
    if (sift_chain_new(&c, &p, &err) || bc->build(c, V, &err))
        goto fail;
    tu_rng r = {99};
    for (int32_t i = 0; i < bc->history; i++)
        if (sift_chain_accept_prompt(c, (int32_t)tu_range(&r, 0, V - 1), &err))
            goto fail;
    for (int w = 0; w < 2; w++)
        if (step(c, bc, rows[w], V, &err))
            goto fail;
    return c;
fail:
    snprintf(why, why_cap, "%s", err.message);
    sift_chain_free(c);
    return NULL;
}

static int listed(const char *list, const char *name, int substring)
{
    if (!list || !*list)
        return 1;
    const char *p = list;
    while (*p) {
        const char *q = strchr(p, ',');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        char buf[128];
        if (n >= sizeof buf)
            n = sizeof buf - 1;
        memcpy(buf, p, n);
        buf[n] = 0;
        /* "=name" asks for that name exactly */
        if (n && buf[0] == '='
                ? strcmp(name, buf + 1) == 0
                : n && (substring ? strstr(name, buf) != NULL : strcmp(name, buf) == 0))
            return 1;
        p += n + (q ? 1 : 0);
    }
    return 0;
}

static void print_line(const opts *o, const char *name, int32_t V, const char *kind, stats st,
                       double xf, double xm, const char *why)
{
    if (o->json) {
        if (why)
            printf("{\"name\":\"%s\",\"V\":%d,\"rows\":\"%s\",\"median_us\":null,"
                   "\"error\":\"%s\"}\n",
                   name, (int)V, kind, why);
        else
            printf("{\"name\":\"%s\",\"V\":%d,\"rows\":\"%s\",\"median_us\":%.2f,"
                   "\"min_us\":%.2f,\"max_us\":%.2f,\"x_floor\":%.2f,\"x_memcpy\":%.2f}\n",
                   name, (int)V, kind, st.med, st.lo, st.hi, xf, xm);
    } else if (why) {
        printf("%-40s %6d %-6s %9s  (%s)\n", name, (int)V, kind, "n/a", why);
    } else {
        printf("%-40s %6d %-6s %9.2f %9.2f %9.2f %8.2f %8.2f\n", name, (int)V, kind, st.med, st.lo,
               st.hi, xf, xm);
    }
    fflush(stdout);
}

/* --route: the prefix's decisions over a case's `steps` steps. */
static void print_route(const opts *o, const char *name, int32_t V, const char *kind,
                        const sift_stats *rs, const unsigned long long *fd_n, int steps)
{
    unsigned long long d = rs->row_prefix_decided, f = rs->row_prefix_fallback;
    unsigned long long ft = fd_n[0], fd = fd_n[1];
    if (o->json)
        printf("{\"name\":\"%s\",\"V\":%d,\"rows\":\"%s\",\"steps\":%d,"
               "\"prefix_decided\":%llu,\"prefix_attempts\":%llu,"
               "\"fdraw_decided\":%llu,\"fdraw_attempts\":%llu}\n",
               name, (int)V, kind, steps, d, d + f, fd, ft);
    else
        printf("  route: %llu of %d steps decided on the prefix (%llu attempts), %.1f %% full "
               "passes; float-certified draw: %llu of %llu attempts decided\n",
               d, steps, d + f,
               steps > 0 ? 100.0 * (double)((unsigned long long)steps - d) / steps : 0.0, fd, ft);
    fflush(stdout);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    return p;
}

static void run_v(const opts *o, int32_t V, int kind)
{
    float *rows[NROWS];
    for (int j = 0; j < NROWS; j++) {
        rows[j] = xmalloc((size_t)V * sizeof(float));
        make_row(rows[j], V, kind, j);
    }
    float *dst = xmalloc((size_t)V * sizeof *dst), ms[NROWS];
    for (int j = 0; j < NROWS; j++)
        ms[j] = sift__simd()->max_f32(rows[j], (size_t)V);
    int R = o->rounds, S = o->steps, least = least_runs();
    double *fl_all = xmalloc((size_t)R * N_CASES * sizeof(double));
    double *mc_all = xmalloc((size_t)R * N_CASES * sizeof(double));
    double *ls_all = xmalloc((size_t)R * N_CASES * sizeof(double));
    double t[MAX_ROUNDS], xf[MAX_ROUNDS], xm[MAX_ROUNDS];
    size_t n_fl = 0;
    /* Per case, every round interleaved: floor, memcpy, the case. The
     * rounds of one case run back to back after the chain is warm. */
    for (size_t i = 0; i < N_CASES; i++) {
        const bench_case *bc = &cases[i];
        if (!listed(o->cases, bc->name, 1))
            continue;
        char why[SIFT_ERROR_MESSAGE_MAX] = "";
        sift_chain *c = make_chain(bc, rows, V, why, sizeof why);
        stats none = {0, 0, 0};
        if (!c) {
            print_line(o, bc->name, V, row_names[kind], none, 0, 0, why);
            continue;
        }
        int next = 2, failed = 0;
        for (int r = 0; r < R && !failed; r++) {
            double f = time_floor(rows, V, S);
            double m = time_memcpy(rows, dst, V, S);
            double q = least ? time_least(rows, ms, V, S) : 0.0;
            double x = time_case(c, bc, rows, V, S, &next, why, sizeof why);
            if (x < 0) {
                failed = 1;
                break;
            }
            fl_all[n_fl] = f;
            ls_all[n_fl] = q;
            mc_all[n_fl++] = m;
            t[r] = x;
            xf[r] = f > 0 ? x / f : 0;
            xm[r] = m > 0 ? x / m : 0;
        }
        sift_stats rs;
        rs.struct_size = sizeof rs;
        int have_route = o->route && sift_chain_stats(c, &rs, NULL) == SIFT_OK;
        unsigned long long fd_n[2] = {c->n_fdraw_tries, c->n_fdraw};
        sift_chain_free(c);
        if (failed) {
            print_line(o, bc->name, V, row_names[kind], none, 0, 0, why);
            continue;
        }
        stats st = summarize(t, R);
        print_line(o, bc->name, V, row_names[kind], st, summarize(xf, R).med, summarize(xm, R).med,
                   NULL);
        if (have_route)
            print_route(o, bc->name, V, row_names[kind], &rs, fd_n, next);
    }
    if (n_fl) {
        stats f = summarize(fl_all, (int)n_fl), m = summarize(mc_all, (int)n_fl);
        char name[96];
        snprintf(name, sizeof name, "floor: vector max (%s)", sift__simd()->name);
        print_line(o, name, V, row_names[kind], f, 1.0, f.med / m.med, NULL);
        print_line(o, "memcpy of the row", V, row_names[kind], m, m.med / f.med, 1.0, NULL);
        stats q = summarize(ls_all, (int)n_fl);
        print_line(o, "least: float exp + sums (avx512)", V, row_names[kind], q, q.med / f.med,
                   q.med / m.med, least ? NULL : "needs AVX-512 and SIFT_SIMD at avx512");
    }
    free(ls_all);
    free(fl_all);
    free(mc_all);
    free(dst);
    for (int j = 0; j < NROWS; j++)
        free(rows[j]);
}

static const char *arg_or_env(const char *arg, const char *env)
{
    return arg ? arg : getenv(env);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench [--quick] [--v N] [--rows peaked,bf16,flat] "
                    "[--case SUBSTR[,SUBSTR]] [--rounds N] [--json] [--route]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    opts o = {0};
    const char *v_arg = NULL, *rounds_arg = NULL;
#ifdef BENCH_LEAST
    for (int j = 0; j < 32; j++)
        least_tab[j] = (float)exp2((double)j / 32.0);
#endif
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            o.quick = 1;
        else if (!strcmp(argv[i], "--json"))
            o.json = 1;
        else if (!strcmp(argv[i], "--route"))
            o.route = 1;
        else if (!strcmp(argv[i], "--v") && i + 1 < argc)
            v_arg = argv[++i];
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            o.rows = argv[++i];
        else if (!strcmp(argv[i], "--case") && i + 1 < argc)
            o.cases = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds_arg = argv[++i];
        else
            usage();
    }
    v_arg = arg_or_env(v_arg, "SIFT_BENCH_V");
    rounds_arg = arg_or_env(rounds_arg, "SIFT_BENCH_ROUNDS");
    o.rows = arg_or_env(o.rows, "SIFT_BENCH_ROWS");
    o.cases = arg_or_env(o.cases, "SIFT_BENCH_CASE");
    if (v_arg) {
        long v = strtol(v_arg, NULL, 10);
        if (v < 1 || v > SIFT_DEFAULT_MAX_VOCAB) {
            fprintf(stderr, "bench: --v must be in [1, %d]\n", SIFT_DEFAULT_MAX_VOCAB);
            return 2;
        }
        o.only_v = (int32_t)v;
    }
    o.rounds = o.quick ? 3 : 7;
    o.steps = o.quick ? 8 : 16;
    if (rounds_arg) {
        long r = strtol(rounds_arg, NULL, 10);
        if (r < 1 || r > MAX_ROUNDS) {
            fprintf(stderr, "bench: --rounds must be in [1, %d]\n", MAX_ROUNDS);
            return 2;
        }
        o.rounds = (int)r;
    }
    if (!o.json) {
        printf("# CPU time per step (sample + accept) on changing rows; %d rounds of %d steps;\n"
               "# x floor / x memcpy: median over rounds of the case's time over the limit's,\n"
               "# both measured in the same round right before the case.\n",
               o.rounds, o.steps);
        printf("%-40s %6s %-6s %9s %9s %9s %8s %8s\n", "case", "V", "rows", "median_us", "min_us",
               "max_us", "x floor", "x memcpy");
    }
    static const int32_t vs[] = {151936, 248320};
    int any_v = 0;
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
        any_v |= o.only_v == vs[i];
    for (size_t i = 0; i < sizeof vs / sizeof vs[0] + 1; i++) {
        int32_t V = i < sizeof vs / sizeof vs[0] ? vs[i] : o.only_v;
        if (i == sizeof vs / sizeof vs[0] ? (!o.only_v || any_v) : (o.only_v && o.only_v != V))
            continue;
        for (int k = 0; k < ROW_KINDS; k++)
            if (listed(o.rows, row_names[k], 0))
                run_v(&o, V, k);
    }
    return 0;
}

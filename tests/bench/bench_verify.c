/*
 * bench_verify.c - speculative verification against the sequential loop
 * (`make bench-verify`; not a test).
 *
 * The production chain (penalties 64/1.1 -> top_k 40 -> top_p 0.95 ->
 * min_p 0.05 -> temp 0.8 -> dist) at V = 151,936, drafts of 3 and 49
 * tokens that all match (so every position is sampled: the most work a
 * verify step can do). Slices are built before timing (the device's
 * work). Four measurements per draft length, each in its own function so
 * that callgrind can count it alone (tests/bench/bench_verify.sh):
 *   plan       sift_verifier_plan (k and extras for the n + 1 positions)
 *   plan_clone what a runtime does without it: clone the chain, then per
 *              position sift_chain_next_k + sift_chain_extras +
 *              sift_chain_accept on the clone, free the clone
 *   verify     sift_chain_verify on the n + 1 slices
 *   loop       the sequential sift_chain_sample_slice + sift_chain_accept
 *              loop on the same slices
 * Each repetition starts from the same chain state (a clone made outside
 * the timed region). Medians of wall time; the machine may be loaded, so
 * the instruction counts are the repeatable figures.
 *
 * Usage: bench_verify [--reps N] [--only NAME] [--n 3|49]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"
#include "testutil.h"

#define V 151936
#define MAXD 49

static float *rows[MAXD + 1];
static sift_candidate *cand[MAXD + 1];
static sift_slice slices[MAXD + 1];
static int32_t drafts[MAXD];
static volatile int32_t sink;

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

static void die(const char *what, const sift_error *err)
{
    fprintf(stderr, "bench_verify: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

static sift_chain *make_chain(void)
{
    sift_error err;
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 7;
    p.n_vocab = V;
    sift_chain *c = NULL;
    if (sift_chain_new(&c, &p, &err) || sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, &err) ||
        sift_chain_add_top_k(c, 40, &err) || sift_chain_add_top_p(c, 0.95f, 1, &err) ||
        sift_chain_add_min_p(c, 0.05f, 1, &err) || sift_chain_add_temp(c, 0.8f, &err) ||
        sift_chain_add_dist(c, &err))
        die("chain", &err);
    for (int32_t t = 0; t < 64; t++) /* a full penalty window */
        if (sift_chain_accept_prompt(c, (t * 7919) % V, &err))
            die("prompt", &err);
    return c;
}

/* Peaked rows: the drafts are the tokens the chain samples. */
static void make_inputs(sift_chain *base, int32_t n)
{
    sift_error err;
    sift_slicer *sl = NULL;
    sift_chain *sim = NULL;
    if (sift_slicer_new(&sl, V, NULL, &err) || sift_chain_clone(base, &sim, &err))
        die("inputs", &err);
    tu_rng r = {99};
    for (int32_t i = 0; i <= n; i++) {
        for (int32_t j = 0; j < V; j++)
            rows[i][j] = (float)(2.0 * tu_normal(&r));
        for (int j = 0; j < 6; j++)
            rows[i][tu_range(&r, 0, V - 1)] = (float)(12.0 + 8.0 * tu_unif(&r));
        sift_plan p = {.struct_size = sizeof p};
        int32_t ids[256];
        size_t ne = 0;
        if (sift_chain_next_k(sim, &p, &err) || sift_chain_extras(sim, ids, 256, &ne, &err))
            die("plan", &err);
        sift_slice s;
        if (sift_slicer_build(sl, rows[i], V, p.k, ids, ne, &s, &err))
            die("slice", &err);
        memcpy(cand[i], s.prefix, (size_t)s.n_prefix * sizeof *s.prefix);
        if (s.n_extras)
            memcpy(cand[i] + s.n_prefix, s.extras, (size_t)s.n_extras * sizeof *s.extras);
        slices[i] = s;
        slices[i].prefix = cand[i];
        slices[i].extras = s.n_extras ? cand[i] + s.n_prefix : NULL;
        int32_t tok;
        if (sift_chain_sample_slice(sim, &slices[i], &tok, &err) ||
            sift_chain_accept(sim, tok, &err))
            die("simulate", &err);
        if (i < n)
            drafts[i] = tok;
    }
    sift_chain_free(sim);
    sift_slicer_free(sl);
}

/* The measured calls (not inlined, so callgrind can count each alone). */
static __attribute__((noinline)) void bench_plan(sift_verifier *v, sift_chain *c, int32_t n,
                                                 sift_verify_step *st)
{
    if (sift_verifier_plan(v, c, drafts, n, st, NULL))
        die("plan", NULL);
    sink = st[n].k;
}

static __attribute__((noinline)) void bench_plan_clone(sift_chain *c, int32_t n, int32_t *ks)
{
    sift_chain *d = NULL;
    if (sift_chain_clone(c, &d, NULL))
        die("clone", NULL);
    int32_t ids[256];
    for (int32_t i = 0; i <= n; i++) {
        sift_plan p = {.struct_size = sizeof p};
        size_t ne = 0;
        if (sift_chain_next_k(d, &p, NULL) || sift_chain_extras(d, ids, 256, &ne, NULL))
            die("plan", NULL);
        ks[i] = p.k;
        if (i < n && sift_chain_accept(d, drafts[i], NULL))
            die("accept", NULL);
    }
    sift_chain_free(d);
    sink = ks[n];
}

static __attribute__((noinline)) void bench_verify_call(sift_chain *c, int32_t n)
{
    sift_verify_args a;
    sift_verify_args_init(&a);
    a.drafts = drafts;
    a.n_drafts = n;
    a.slices = slices;
    sift_verify_result res = {.struct_size = sizeof res};
    if (sift_chain_verify(c, &a, &res, NULL) || res.n_accepted != n)
        die("verify", NULL);
    sink = res.token;
}

static __attribute__((noinline)) void bench_loop(sift_chain *c, int32_t n)
{
    int32_t tok = -1;
    for (int32_t i = 0; i <= n; i++) {
        if (sift_chain_sample_slice(c, &slices[i], &tok, NULL) || sift_chain_accept(c, tok, NULL))
            die("loop", NULL);
        if (i < n && tok != drafts[i])
            die("loop mismatch", NULL);
    }
    sink = tok;
}

int main(int argc, char **argv)
{
    int reps = 200;
    const char *only = NULL;
    int only_n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            only_n = atoi(argv[++i]);
    }
    if (reps < 1)
        reps = 1;
    for (int i = 0; i <= MAXD; i++) {
        rows[i] = malloc((size_t)V * sizeof *rows[i]);
        cand[i] = malloc(512 * sizeof *cand[i]);
        if (!rows[i] || !cand[i])
            die("out of memory", NULL);
    }
    double *t = malloc((size_t)reps * sizeof *t);
    sift_chain *base = make_chain();
    sift_verifier *v = NULL;
    sift_error err;
    if (sift_verifier_new(&v, base, MAXD, &err))
        die("verifier", &err);
    static sift_verify_step st[MAXD + 1];
    st[0].struct_size = sizeof st[0];
    static int32_t ks[MAXD + 1];
    const int32_t lens[2] = {3, 49};
    const char *names[4] = {"plan", "plan_clone", "verify", "loop"};
    printf("%-12s %6s %12s\n", "name", "drafts", "median_us");
    for (int li = 0; li < 2; li++) {
        int32_t n = lens[li];
        if (only_n && n != only_n)
            continue;
        make_inputs(base, n);
        for (int m = 0; m < 4; m++) {
            if (only && strcmp(only, names[m]))
                continue;
            for (int r = 0; r < reps; r++) {
                sift_chain *c = NULL;
                if (m >= 2 && sift_chain_clone(base, &c, &err))
                    die("clone", &err);
                double t0 = now_us();
                switch (m) {
                case 0: bench_plan(v, base, n, st); break;
                case 1: bench_plan_clone(base, n, ks); break;
                case 2: bench_verify_call(c, n); break;
                default: bench_loop(c, n); break;
                }
                t[r] = now_us() - t0;
                sift_chain_free(c);
            }
            if (m == 1)
                for (int32_t i = 0; i <= n; i++)
                    if (!only && ks[i] != st[i].k)
                        die("plan and clone disagree", NULL);
            qsort(t, (size_t)reps, sizeof *t, cmp_double);
            printf("%-12s %6d %12.3f\n", names[m], (int)n, t[reps / 2]);
        }
    }
    sift_verifier_free(v);
    sift_chain_free(base);
    for (int i = 0; i <= MAXD; i++) {
        free(rows[i]);
        free(cand[i]);
    }
    free(t);
    return 0;
}

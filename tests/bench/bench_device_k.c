/*
 * bench_device_k.c - the hook rate of device slices (the k largest
 * logits as a set, shuffled, the tokens tied at the smallest re-chosen
 * among the row's tied ids; flags 0; tests/testutil.c's tu_devicify) at
 * the plan's k plus 0, 1, 2, 4 and 8, and at the plan's device_k, per
 * chain and per row precision (bf16, fp16, float32). V = 151,936. Rows
 * are model-like: a body N(0, s) with s in U[1.5, 3.5] and a head of 1 to
 * 20 tokens U(0, 8) above the body's largest, then rounded to the
 * precision. Every step's token is compared with the whole row's (a
 * second chain sampling the row): a difference is a failure (exit 1).
 * Beside each rate at k' > k, in parentheses: the rows whose k-th and
 * k'-th largest logits are equal (a boundary tie no set of k' can
 * settle when the plan's k ends at a TOP boundary).
 * Counts, not times; seeded, so a run repeats exactly.
 * `make bench-device-k [STEPS=1000]`.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"
#include "testutil.h"

#define V 151936
#define N_CHAINS 6
#define N_OVER 6 /* +0, +1, +2, +4, +8, device_k */

typedef struct hook_ctx {
    const float *row;
    long calls;
} hook_ctx;

static int hook(void *user, float *row, int32_t n)
{
    hook_ctx *h = user;
    memcpy(row, h->row, (size_t)n * sizeof *row);
    h->calls++;
    return 0;
}

static void die(const char *what, const sift_error *e)
{
    fprintf(stderr, "bench_device_k: %s: %s\n", what, e ? e->message : "");
    exit(1);
}

static const char *const chain_names[N_CHAINS] = {
    "llama.cpp default: top_k 40 → top_p 0.95 → min_p 0.05 → temp 0.8 → dist",
    "production: penalties 64/1.1 → top_k 40 → top_p 0.95 → min_p 0.05 → temp 0.8 → dist",
    "top_k 20 → greedy",
    "HF order: temp 0.7 → top_k 50 → top_p 0.9 → dist",
    "vLLM order: temp 0.8 → top_k 20 → top_p 0.9 → min_p 0.05 → dist",
    "min_p 0.1 → temp 1.5 → dist",
};

static sift_chain *make_chain(int which, hook_ctx *h)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 1234;
    sift_chain *c;
    sift_error e;
    int bad = sift_chain_new(&c, &p, &e) != SIFT_OK;
    if (!bad && which == 1)
        bad = sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, &e) != SIFT_OK;
    if (!bad && which <= 1)
        bad = sift_chain_add_top_k(c, 40, &e) || sift_chain_add_top_p(c, 0.95f, 1, &e) ||
              sift_chain_add_min_p(c, 0.05f, 1, &e) || sift_chain_add_temp(c, 0.8f, &e) ||
              sift_chain_add_dist(c, &e);
    if (!bad && which == 2)
        bad = sift_chain_add_top_k(c, 20, &e) || sift_chain_add_greedy(c, &e);
    if (!bad && which == 3)
        bad = sift_chain_add_temp(c, 0.7f, &e) || sift_chain_add_top_k(c, 50, &e) ||
              sift_chain_add_top_p(c, 0.9f, 1, &e) || sift_chain_add_dist(c, &e);
    if (!bad && which == 4)
        bad = sift_chain_add_temp(c, 0.8f, &e) || sift_chain_add_top_k(c, 20, &e) ||
              sift_chain_add_top_p(c, 0.9f, 1, &e) || sift_chain_add_min_p(c, 0.05f, 1, &e) ||
              sift_chain_add_dist(c, &e);
    if (!bad && which == 5)
        bad = sift_chain_add_min_p(c, 0.1f, 1, &e) || sift_chain_add_temp(c, 1.5f, &e) ||
              sift_chain_add_dist(c, &e);
    if (!bad && h)
        bad = sift_chain_set_row_hook(c, hook, h, &e) != SIFT_OK;
    if (bad)
        die("chain", &e);
    return c;
}

/* x rounded to 11 significant bits (fp16's precision; the logits here
 * stay inside its normal range), nearest even. */
static float fp16ish(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&x, &u, sizeof x);
    return x;
}

static float row[V];

static void fill_row(tu_rng *r, int prec)
{
    double s = 1.5 + 2.0 * tu_unif(r), top = -INFINITY;
    for (int32_t i = 0; i < V; i++) {
        row[i] = (float)(s * tu_normal(r));
        top = row[i] > top ? row[i] : top;
    }
    int32_t head = (int32_t)tu_range(r, 1, 20);
    for (int32_t j = 0; j < head; j++)
        row[tu_range(r, 0, V - 1)] = (float)(top + 8.0 * tu_unif(r));
    for (int32_t i = 0; prec < 2 && i < V; i++)
        row[i] = prec == 0 ? tu_bf16(row[i]) : fp16ish(row[i]);
}

static void ok(sift_status s, const char *what, const sift_error *e)
{
    if (s != SIFT_OK)
        die(what, e);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 1000;
    if (steps < 1)
        steps = 1;
    static const char *const prec_names[3] = {"bf16", "fp16", "float32"};
    static const int over[N_OVER - 1] = {0, 1, 2, 4, 8};
    sift_slicer *sl;
    sift_error e;
    tu_device_slice dev;
    if (!tu_device_init(&dev, V))
        die("out of memory", NULL);
    ok(sift_slicer_new(&sl, V, NULL, &e), "slicer", &e);
    int32_t plan_k[N_CHAINS], device_k[N_CHAINS];
    printf("| chain | plan k | device_k | rows | k | k + 1 | k + 2 | k + 4 | k + 8 | device_k |\n"
           "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
    for (int w = 0; w < N_CHAINS; w++) {
        sift_chain *c0 = make_chain(w, NULL);
        sift_plan pl = {.struct_size = sizeof pl};
        ok(sift_chain_plan(c0, &pl, NULL, &e), "plan", &e);
        plan_k[w] = pl.k;
        device_k[w] = pl.device_k;
        sift_chain_free(c0);
    }
    long mismatches = 0;
    for (int w = 0; w < N_CHAINS; w++) {
        for (int prec = 0; prec < 3; prec++) {
            tu_rng r = {88172645463325252ull + (uint64_t)prec};
            hook_ctx h[N_OVER];
            long ties[N_OVER] = {0};
            sift_chain *cd[N_OVER], *ref = make_chain(w, NULL);
            for (int x = 0; x < N_OVER; x++) {
                h[x] = (hook_ctx){row, 0};
                cd[x] = make_chain(w, &h[x]);
            }
            for (int s = 0; s < steps; s++) {
                fill_row(&r, prec);
                int32_t want;
                ok(sift_chain_sample(ref, row, V, &want, &e), "row", &e);
                /* the row's plan_k-th largest logit against its k'-th */
                sift_slice top;
                int32_t kt = device_k[w] > plan_k[w] + 8 ? device_k[w] : plan_k[w] + 8;
                ok(sift_slicer_build(sl, row, V, kt, NULL, 0, &top, &e), "slicer", &e);
                for (int x = 1; x < N_OVER; x++) {
                    int32_t k = x < N_OVER - 1 ? plan_k[w] + over[x] : device_k[w];
                    ties[x] += top.prefix[plan_k[w] - 1].logit == top.prefix[k - 1].logit;
                }
                for (int x = 0; x < N_OVER; x++) {
                    int32_t k = x < N_OVER - 1 ? plan_k[w] + over[x] : device_k[w];
                    k = k < V ? k : V;
                    int32_t ids[4096], tok;
                    size_t ne = 0;
                    sift_slice sc;
                    ok(sift_chain_extras(cd[x], ids, 4096, &ne, &e), "extras", &e);
                    ok(sift_slicer_build(sl, row, V, k, ids, ne, &sc, &e), "slicer", &e);
                    tu_devicify(&dev, &r, row, V, &sc, ids, ne);
                    ok(sift_chain_sample_slice(cd[x], &sc, &tok, &e), "slice", &e);
                    mismatches += tok != want;
                    ok(sift_chain_accept(cd[x], tok, &e), "accept", &e);
                }
                ok(sift_chain_accept(ref, want, &e), "accept", &e);
            }
            printf("| %s | %d | %d | %s |", chain_names[w], (int)plan_k[w], (int)device_k[w],
                   prec_names[prec]);
            for (int x = 0; x < N_OVER; x++)
                if (x == 0)
                    printf(" %.1f %% |", 100.0 * (double)h[x].calls / steps);
                else
                    printf(" %.1f %% (%.1f %%) |", 100.0 * (double)h[x].calls / steps,
                           100.0 * (double)ties[x] / steps);
            printf("\n");
            fflush(stdout);
            for (int x = 0; x < N_OVER; x++)
                sift_chain_free(cd[x]);
            sift_chain_free(ref);
        }
    }
    printf("\n%d steps per cell, V = %d; tokens that differ from the whole row's: %ld\n", steps, V,
           mismatches);
    sift_slicer_free(sl);
    tu_device_free(&dev);
    return mismatches != 0;
}

/*
 * bench_tail.c - how often a slice with a tail-mass bound needs the whole
 * row (the hook rate), for the OpenAI-style chains, at V = 151,936:
 * k in {64, 128, 256, 1024}, the tight bound (the exact tail sum rounded
 * up, SIFT_SLICE_TAIL_MASS) and the free bound (no flag), on peaked rows
 * (N(0, 2) plus 50 ids raised by U(5, 15)), the same rounded to bf16, and
 * flat rows (U[-1, 1]); the bytes a runtime copies per step (k (id,
 * logit) pairs, the bound, and the whole row when the hook runs) against
 * whole rows; and, per row kind, the smallest k of a sweep at which 99 %
 * of the steps are decided with the tight bound. Every chain accepts its
 * token, so the penalty window fills. Counts, not times:
 * `make bench-tail [STEPS=200]` (`bench_tail STEPS CHAIN` runs one chain,
 * 0..3, without the sweep).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

#define V 151936

static uint64_t rng_state;
static uint64_t next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double unif(void)
{
    return (double)(next() >> 11) * (1.0 / 9007199254740992.0);
}
static double gauss(void)
{
    double u = unif() + 1e-300, v = unif();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
static float bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

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

static float row[V];
static unsigned char in_slice[V];

enum { PEAKED, BF16, FLAT, N_KINDS };
static const char *const kind_name[N_KINDS] = {"peaked", "bf16", "flat"};

static void make_row(int kind, uint64_t seed)
{
    rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int32_t i = 0; i < V; i++)
        row[i] = kind == FLAT ? (float)(2.0 * unif() - 1.0) : (float)(2.0 * gauss());
    if (kind != FLAT)
        for (int j = 0; j < 50; j++) {
            float add = (float)(5.0 + 10.0 * unif()); /* the raise first, then the id */
            row[next() % V] += add;
        }
    if (kind == BF16)
        for (int32_t i = 0; i < V; i++)
            row[i] = bf16(row[i]);
}

/* What a device computes beside its top-k: the sum over the tokens not
 * in the slice of exp(l_i - m), here in double and rounded up. */
static double tight_tail(const sift_slice *s)
{
    memset(in_slice, 0, sizeof in_slice);
    for (int32_t i = 0; i < s->n_prefix; i++)
        in_slice[s->prefix[i].id] = 1;
    for (int32_t i = 0; i < s->n_extras; i++)
        in_slice[s->extras[i].id] = 1;
    float m = s->prefix[0].logit;
    double sum = 0;
    for (int32_t i = 0; i < V; i++)
        if (!in_slice[i])
            sum += exp((double)row[i] - (double)m);
    return sum * (1.0 + 1e-9);
}

enum { C_TOP_P, C_TEMP1, C_VLLM, C_XTC, N_CHAINS };
static const char *const chain_name[N_CHAINS] = {
    "temp 0.7 -> top_p 0.9 -> dist", "temp 1.0 -> dist",
    "penalties 64/1.1 -> temp 0.8 -> top_p 0.95 -> min_p 0.05 -> dist",
    "xtc 0.5/0.1 -> temp 0.8 -> dist"};

static sift_chain *make_chain(int which)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 42;
    sift_chain *c = NULL;
    sift_error err;
    int bad = sift_chain_new(&c, &p, &err) != SIFT_OK;
    switch (which) {
    case C_TOP_P:
        bad |= sift_chain_add_temp(c, 0.7f, &err) || sift_chain_add_top_p(c, 0.9f, 1, &err);
        break;
    case C_TEMP1: bad |= sift_chain_add_temp(c, 1.0f, &err); break;
    case C_VLLM:
        bad |= sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, &err) ||
               sift_chain_add_temp(c, 0.8f, &err) || sift_chain_add_top_p(c, 0.95f, 1, &err) ||
               sift_chain_add_min_p(c, 0.05f, 1, &err);
        break;
    default:
        bad |= sift_chain_add_xtc(c, 0.5f, 0.1f, 1, &err) || sift_chain_add_temp(c, 0.8f, &err);
        break;
    }
    bad |= sift_chain_add_dist(c, &err) != SIFT_OK;
    if (bad) {
        fprintf(stderr, "bench_tail: %s\n", err.message);
        exit(1);
    }
    return c;
}

/* Steps of one configuration; returns the hook calls. */
static long run(int which, int kind, int32_t k, int tight, int steps, sift_slicer *sl)
{
    sift_chain *c = make_chain(which);
    hook_ctx h = {row, 0};
    sift_error err;
    if (sift_chain_set_row_hook(c, hook, &h, &err)) {
        fprintf(stderr, "bench_tail: %s\n", err.message);
        exit(1);
    }
    int32_t ids[4096];
    for (int s = 0; s < steps; s++) {
        make_row(kind, (uint64_t)s + 1000u * (uint64_t)kind);
        size_t ne = 0;
        sift_slice slice;
        int32_t tok;
        if (sift_chain_extras(c, ids, 4096, &ne, &err) ||
            sift_slicer_build(sl, row, V, k, ids, ne, &slice, &err)) {
            fprintf(stderr, "bench_tail: %s\n", err.message);
            exit(1);
        }
        if (tight) {
            slice.flags |= SIFT_SLICE_TAIL_MASS;
            slice.tail_mass = tight_tail(&slice);
        }
        if (sift_chain_sample_slice(c, &slice, &tok, &err) || sift_chain_accept(c, tok, &err)) {
            fprintf(stderr, "bench_tail: %s\n", err.message);
            exit(1);
        }
    }
    sift_chain_free(c);
    return h.calls;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    if (steps < 1)
        steps = 200;
    /* an optional second argument runs one chain (0..3) and no sweep */
    int only = argc > 2 ? atoi(argv[2]) : -1;
    sift_slicer *sl = NULL;
    if (sift_slicer_new(&sl, V, NULL, NULL)) {
        fprintf(stderr, "bench_tail: no slicer\n");
        return 1;
    }
    const int32_t ks[] = {64, 128, 256, 1024};
    const double row_bytes = 4.0 * V;
    printf("bench_tail: V = %d, %d steps per cell (sample_slice + accept; fresh rows); hook rate "
           "= steps that needed the whole row; bytes/step = 8 k + 8 (+ 4 V when hooked), the "
           "whole row = %.0f bytes\n\n",
           V, steps, row_bytes);
    printf("| chain | rows | bound | k=64 | k=128 | k=256 | k=1024 | bytes/step at k=256 (vs "
           "whole row) |\n|---|---|---|---:|---:|---:|---:|---:|\n");
    for (int ch = 0; ch < N_CHAINS; ch++)
        for (int kind = 0; kind < N_KINDS && (only < 0 || only == ch); kind++)
            for (int tight = 1; tight >= 0; tight--) {
                printf("| %s | %s | %s |", chain_name[ch], kind_name[kind],
                       tight ? "tight" : "free");
                double bytes256 = 0;
                for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
                    long hooks = run(ch, kind, ks[i], tight, steps, sl);
                    printf(" %.1f %% |", 100.0 * (double)hooks / steps);
                    if (ks[i] == 256)
                        bytes256 = 8.0 * 256 + 8 + row_bytes * (double)hooks / steps;
                }
                printf(" %.0f (%.1f %%) |\n", bytes256, 100.0 * bytes256 / row_bytes);
                fflush(stdout);
            }
    /* The k that decides 99 % of the steps with the tight bound. */
    if (only >= 0) {
        sift_slicer_free(sl);
        return 0;
    }
    const int32_t sweep[] = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
    printf("\nsmallest k of {16, 32, ..., 32768} with at most 1 %% of steps hooked (tight "
           "bound):\n\n| chain | peaked | bf16 | flat |\n|---|---:|---:|---:|\n");
    for (int ch = 0; ch < N_CHAINS - 1; ch++) {
        printf("| %s |", chain_name[ch]);
        for (int kind = 0; kind < N_KINDS; kind++) {
            int32_t found = 0;
            for (size_t i = 0; i < sizeof sweep / sizeof sweep[0] && !found; i++) {
                long hooks = run(ch, kind, sweep[i], 1, steps, sl);
                if (100 * hooks <= steps)
                    found = sweep[i];
            }
            if (found)
                printf(" %d |", (int)found);
            else
                printf(" > 32768 |");
            fflush(stdout);
        }
        printf("\n");
    }
    sift_slicer_free(sl);
    return 0;
}

/*
 * bench_ties.c - how often a slice as a device top-k gives it (the k
 * largest logits as a set, shuffled, the tokens tied at the smallest
 * re-chosen among the row's tied ids; flags 0) needs the whole row, at
 * the plan's k and with a little over-fetch, beside the same slices as
 * canonical prefixes (SIFT_SLICE_CANONICAL). V = 151,936; rows rounded
 * to bf16, peaked (N(0, 2) plus 50 ids raised by U(5, 15)) and flat
 * (U[-1, 1]). Counts, not times: `make bench-ties [STEPS=300]`.
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
static sift_candidate pre[V], ext[4096];
static int32_t tied[V];

/* The canonical slice s as a device might send it. */
static void devicify(sift_slice *s, const int32_t *ids, size_t ne)
{
    int32_t k = s->n_prefix;
    memcpy(pre, s->prefix, (size_t)k * sizeof *pre);
    float lmin = pre[k - 1].logit;
    int32_t nt = 0, ni = 0;
    for (int32_t i = 0; i < V; i++)
        if (row[i] == lmin)
            tied[nt++] = i;
    for (int32_t i = 0; i < k; i++)
        ni += pre[i].logit == lmin;
    for (int32_t i = 0; i < ni; i++) {
        int32_t j = i + (int32_t)(next() % (uint64_t)(nt - i));
        int32_t t = tied[i];
        tied[i] = tied[j];
        tied[j] = t;
    }
    for (int32_t i = 0, q = 0; i < k; i++)
        if (pre[i].logit == lmin)
            pre[i].id = tied[q++];
    for (int32_t i = k - 1; i > 0; i--) {
        int32_t j = (int32_t)(next() % (uint64_t)(i + 1));
        sift_candidate t = pre[i];
        pre[i] = pre[j];
        pre[j] = t;
    }
    int32_t n = 0;
    for (size_t i = 0; i < ne; i++) {
        int in = 0;
        for (int32_t j = 0; j < k && !in; j++)
            in = pre[j].id == ids[i];
        if (!in) {
            ext[n].id = ids[i];
            ext[n++].logit = row[ids[i]];
        }
    }
    s->prefix = pre;
    s->extras = n ? ext : NULL;
    s->n_extras = n;
    s->flags = 0;
}

static sift_chain *make_chain(int which, hook_ctx *h)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 1234;
    sift_chain *c;
    sift_error e;
    int bad = sift_chain_new(&c, &p, &e) != SIFT_OK;
    if (!bad && which == 0)
        bad = sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, &e) ||
              sift_chain_add_top_k(c, 40, &e) || sift_chain_add_top_p(c, 0.95f, 1, &e) ||
              sift_chain_add_min_p(c, 0.05f, 1, &e) || sift_chain_add_temp(c, 0.8f, &e) ||
              sift_chain_add_dist(c, &e);
    if (!bad && which == 1)
        bad = sift_chain_add_temp(c, 0.7f, &e) || sift_chain_add_top_k(c, 50, &e) ||
              sift_chain_add_top_p(c, 0.9f, 1, &e) || sift_chain_add_dist(c, &e);
    if (!bad && which == 2)
        bad = sift_chain_add_min_p(c, 0.1f, 1, &e) || sift_chain_add_temp(c, 1.5f, &e) ||
              sift_chain_add_dist(c, &e);
    if (!bad)
        bad = sift_chain_set_row_hook(c, hook, h, &e) != SIFT_OK;
    if (bad) {
        fprintf(stderr, "bench_ties: %s\n", e.message);
        exit(1);
    }
    return c;
}

static void fill_row(int flat)
{
    for (int32_t i = 0; i < V; i++)
        row[i] = flat ? bf16((float)(2.0 * unif() - 1.0)) : bf16((float)(2.0 * gauss()));
    if (!flat)
        for (int i = 0; i < 50; i++)
            row[next() % V] = bf16((float)(5.0 + 10.0 * unif()));
}

static int check(sift_status s, const sift_error *e)
{
    if (s != SIFT_OK) {
        fprintf(stderr, "bench_ties: %s\n", e->message);
        exit(1);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 300;
    if (steps < 1)
        steps = 1;
    static const char *const names[3] = {
        "production (penalties 64/1.1, top_k 40, top_p 0.95, min_p 0.05, temp 0.8, dist)",
        "HF order (temp 0.7, top_k 50, top_p 0.9, dist)", "min_p 0.1, temp 1.5, dist"};
    static const int over[5] = {0, 1, 8, 32, 64};
    sift_slicer *sl;
    sift_error e;
    check(sift_slicer_new(&sl, V, NULL, &e), &e);
    for (int flat = 0; flat < 2; flat++) {
        for (int w = 0; w < 3; w++) {
            hook_ctx h0 = {row, 0};
            sift_chain *c0 = make_chain(w, &h0);
            sift_plan pl = {.struct_size = sizeof pl};
            check(sift_chain_plan(c0, &pl, NULL, &e), &e);
            printf("%s rows, %s: plan k = %d (%s)\n", flat ? "flat" : "peaked", names[w], (int)pl.k,
                   sift_guarantee_str(pl.guarantee));
            for (int x = 0; x < 5; x++) {
                hook_ctx hd = {row, 0}, hc = {row, 0};
                sift_chain *cd = make_chain(w, &hd), *cc = make_chain(w, &hc);
                rng_state = 88172645463325252ull + (uint64_t)w;
                long differ = 0;
                int32_t k = pl.k + over[x];
                for (int s = 0; s < steps; s++) {
                    fill_row(flat);
                    int32_t ids[4096];
                    size_t ne = 0;
                    sift_slice sc, sd;
                    int32_t td, tc;
                    check(sift_chain_extras(cd, ids, 4096, &ne, &e), &e);
                    check(sift_slicer_build(sl, row, V, k, ids, ne, &sc, &e), &e);
                    sd = sc;
                    devicify(&sd, ids, ne);
                    check(sift_chain_sample_slice(cd, &sd, &td, &e), &e);
                    check(sift_slicer_build(sl, row, V, k, ids, ne, &sc, &e), &e);
                    check(sift_chain_sample_slice(cc, &sc, &tc, &e), &e);
                    differ += td != tc;
                    check(sift_chain_accept(cd, td, &e), &e);
                    check(sift_chain_accept(cc, tc, &e), &e);
                }
                printf("  k = plan.k + %2d = %3d: row needed by device slices %ld/%d, by canonical "
                       "slices %ld/%d; tokens that differ %ld\n",
                       over[x], (int)k, hd.calls, steps, hc.calls, steps, differ);
                sift_chain_free(cd);
                sift_chain_free(cc);
            }
            sift_chain_free(c0);
        }
    }
    sift_slicer_free(sl);
    return 0;
}

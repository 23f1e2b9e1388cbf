/*
 * check_logprobs.c - sift_chain_sample_logprobs and
 * sift_chain_sample_slice_logprobs: the token, RNG and state are
 * sift_chain_sample's; processed entries are bitwise
 * sift_chain_distribution's; raw entries agree with a float64
 * log-softmax of the row within the documented tolerance; slices agree
 * with whole rows; bad requests fail with nothing changed.
 */
#include "harness.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"
#include "testutil.h"

#define MAXV 3000
#define NTOP_MAX 24
#define N_CHAINS 10

/* The documented tolerance of raw values (sift_logprobs): V * 2^-53 for
 * the sum plus a few roundings of the values involved. */
static double raw_tol(double ref, double lse, int32_t V)
{
    return 1e-9 + 8.0 * 0x1p-53 * (fabs(ref) + fabs(lse)) + (double)V * 0x1p-53;
}

/* A chain of one of several shapes, ending with a selector. */
static sift_chain *make_chain(int kind, uint64_t seed)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = seed;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    switch (kind) {
    case 0:
        ck_assert_int_eq(sift_chain_add_temp(c, 0.8f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
        break;
    case 1: ck_assert_int_eq(sift_chain_add_top_p(c, 0.9f, 1, NULL), SIFT_OK); break;
    case 2:
        ck_assert_int_eq(sift_chain_add_min_p(c, 0.05f, 1, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_temp(c, 1.3f, NULL), SIFT_OK);
        break;
    case 3: ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK); return c;
    case 4:
        ck_assert_int_eq(sift_chain_add_penalties(c, 16, 1.3f, 0.1f, 0.1f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(c, 20, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_p(c, 0.95f, 1, NULL), SIFT_OK);
        break;
    case 5: ck_assert_int_eq(sift_chain_add_xtc(c, 0.5f, 0.05f, 1, NULL), SIFT_OK); break;
    case 6: ck_assert_int_eq(sift_chain_add_mirostat_v2(c, 5.0f, 0.1f, NULL), SIFT_OK); return c;
    case 7: ck_assert_int_eq(sift_chain_add_top_n_sigma(c, 1.5f, NULL), SIFT_OK); break;
    case 8: ck_assert_int_eq(sift_chain_add_typical(c, 0.9f, 1, NULL), SIFT_OK); break;
    default: break; /* dist alone */
    }
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

/* float64 log-softmax of the row: the reference (libm). */
static double ref_lse(const float *row, int32_t V)
{
    double m = -INFINITY, s = 0.0;
    for (int32_t i = 0; i < V; i++)
        m = row[i] > m ? row[i] : m;
    for (int32_t i = 0; i < V; i++)
        if (row[i] > -INFINITY)
            s += exp((double)row[i] - m);
    return m + log(s);
}

static int canon_cmp(const void *pa, const void *pb)
{
    const sift_candidate *a = pa, *b = pb;
    if (a->logit != b->logit)
        return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* The row's first n tokens in canonical order. */
static void ref_top(const float *row, int32_t V, sift_candidate *all, size_t n, sift_candidate *out)
{
    for (int32_t i = 0; i < V; i++)
        all[i] = (sift_candidate){i, row[i]};
    qsort(all, (size_t)V, sizeof *all, canon_cmp);
    memcpy(out, all, n * sizeof *out);
}

static void check_raw(const sift_logprob *e, const float *row, int32_t V, double lse)
{
    double ref = row[e->id] > -INFINITY ? (double)row[e->id] - lse : -INFINITY;
    ck_assert(memcmp(&e->logit, &row[e->id], sizeof e->logit) == 0);
    if (ref == -INFINITY) {
        ck_assert(e->logprob == -INFINITY);
        return;
    }
    ck_assert_msg(fabs(e->logprob - ref) <= raw_tol(ref, lse, V),
                  "raw logprob of %d: %.17g vs float64 %.17g (V = %d)", (int)e->id, e->logprob, ref,
                  (int)V);
}

static void check_processed(const sift_logprob *e, const sift_token_prob *d)
{
    ck_assert_int_eq(e->id, d->id);
    ck_assert(memcmp(&e->logit, &d->logit, sizeof e->logit) == 0);
    ck_assert_msg(memcmp(&e->p, &d->p, sizeof e->p) == 0, "p of %d: %.17g vs %.17g", (int)d->id,
                  e->p, d->p);
    if (d->p > 0.0)
        ck_assert(fabs(e->logprob - log(d->p)) <= 1e-14 * (1.0 + fabs(log(d->p))));
}

typedef struct world {
    float row[MAXV];
    sift_candidate all[MAXV];
    sift_token_prob dist[MAXV + 64];
    sift_logprob raw_top[NTOP_MAX], proc_top[NTOP_MAX];
} world;

static world W;

/* Lockstep: chain a samples (after reporting its distribution), chain b
 * samples with logprobs; the tokens agree, and so do the reports. */
static void row_step(sift_chain *a, sift_chain *b, int32_t V, size_t n_top, uint32_t kinds,
                     int32_t *tok_out)
{
    size_t n_dist = 0;
    ck_assert_int_eq(sift_chain_distribution(a, W.row, V, W.dist, MAXV + 64, &n_dist, NULL),
                     SIFT_OK);
    int32_t ta = -1, tb = -1;
    ck_assert_int_eq(sift_chain_sample(a, W.row, V, &ta, NULL), SIFT_OK);
    sift_logprobs lp = {.struct_size = sizeof lp, .flags = kinds, .n_top = n_top};
    lp.raw_top = W.raw_top;
    lp.processed_top = W.proc_top;
    sift_error err;
    ck_assert_msg(sift_chain_sample_logprobs(b, W.row, V, &tb, &lp, &err) == SIFT_OK, "%s",
                  err.message);
    ck_assert_int_eq(ta, tb);
    if (kinds & SIFT_LOGPROBS_PROCESSED) {
        ck_assert_uint_eq(lp.n_support, n_dist);
        ck_assert_uint_eq(lp.n_processed_top, n_top < n_dist ? n_top : n_dist);
        for (size_t i = 0; i < lp.n_processed_top; i++)
            check_processed(&lp.processed_top[i], &W.dist[i]);
        size_t j = 0;
        while (j < n_dist && W.dist[j].id != tb)
            j++;
        ck_assert_uint_lt(j, n_dist);
        check_processed(&lp.processed, &W.dist[j]);
    }
    if (kinds & SIFT_LOGPROBS_RAW) {
        double lse = ref_lse(W.row, V);
        ck_assert(fabs(lp.lse - lse) <= raw_tol(0.0, lse, V));
        ck_assert_uint_eq(lp.n_raw_top, n_top);
        sift_candidate top[NTOP_MAX];
        ref_top(W.row, V, W.all, n_top, top);
        for (size_t i = 0; i < n_top; i++) {
            ck_assert_int_eq(lp.raw_top[i].id, top[i].id);
            check_raw(&lp.raw_top[i], W.row, V, lse);
        }
        ck_assert_int_eq(lp.raw.id, tb);
        check_raw(&lp.raw, W.row, V, lse);
    }
    *tok_out = ta;
}

START_TEST(test_row_matches_sample_and_distribution)
{
    tu_rng r = {0x10c9u + (uint64_t)_i};
    for (int kind = 0; kind < N_CHAINS; kind++) {
        for (int seq = 0; seq < 6; seq++) {
            uint64_t seed = tu_next(&r);
            sift_chain *a = make_chain(kind, seed), *b = make_chain(kind, seed);
            int32_t V = tu_rand_V(&r, MAXV);
            for (int step = 0; step < 12; step++) {
                tu_row(&r, W.row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
                size_t n_top = (size_t)tu_range(&r, 0, V < NTOP_MAX ? V : NTOP_MAX);
                uint32_t kinds = (uint32_t)tu_range(&r, 1, 3);
                int32_t t;
                row_step(a, b, V, n_top, kinds, &t);
                ck_assert_int_eq(sift_chain_accept(a, t, NULL), SIFT_OK);
                ck_assert_int_eq(sift_chain_accept(b, t, NULL), SIFT_OK);
            }
            sift_chain_free(a);
            sift_chain_free(b);
        }
    }
}
END_TEST

/* Raw values far from the float limits: a tighter look at the
 * tolerance on the shapes models give, V up to 2^17. */
START_TEST(test_raw_tolerance_on_large_rows)
{
    static float row[1 << 17];
    tu_rng r = {77};
    sift_chain *c = make_chain(0, 5);
    sift_logprob top[8];
    double worst = 0.0;
    for (int step = 0; step < 8; step++) {
        int32_t V = step & 1 ? 1 << 17 : 151936 / 2;
        tu_row(&r, row, V, step % 2 ? TU_ROW_NORMAL : TU_ROW_BF16);
        sift_logprobs lp = {.struct_size = sizeof lp, .flags = SIFT_LOGPROBS_RAW, .n_top = 8};
        lp.raw_top = top;
        int32_t t;
        ck_assert_int_eq(sift_chain_sample_logprobs(c, row, V, &t, &lp, NULL), SIFT_OK);
        double lse = ref_lse(row, V);
        for (int i = 0; i < 8; i++) {
            double d = fabs(top[i].logprob - ((double)row[top[i].id] - lse));
            worst = d > worst ? d : worst;
        }
    }
    ck_assert_msg(worst <= 1e-9, "raw error %.3g above 1e-9", worst);
    sift_chain_free(c);
}
END_TEST

typedef struct hook_ctx {
    const float *row;
    int calls;
} hook_ctx;

static int hook(void *user, float *row, int32_t V)
{
    hook_ctx *h = user;
    memcpy(row, h->row, (size_t)V * sizeof *row);
    h->calls++;
    return 0;
}

/* Slices against whole rows: the slice call on chain a, the row call on
 * chain b, both with RAW and PROCESSED; canonical and device slices,
 * with the row's log-sum-exp. */
START_TEST(test_slice_matches_row)
{
    tu_rng r = {0x51ce + (uint64_t)_i};
    sift_slicer *sl = NULL;
    ck_assert_int_eq(sift_slicer_new(&sl, MAXV, NULL, NULL), SIFT_OK);
    tu_device_slice dev;
    ck_assert(tu_device_init(&dev, MAXV));
    sift_logprob raw_b[NTOP_MAX], proc_b[NTOP_MAX];
    long decided = 0, hooked = 0;
    for (int kind = 0; kind < N_CHAINS; kind++) {
        uint64_t seed = tu_next(&r);
        sift_chain *a = make_chain(kind, seed), *b = make_chain(kind, seed);
        hook_ctx h = {W.row, 0};
        ck_assert_int_eq(sift_chain_set_row_hook(a, hook, &h, NULL), SIFT_OK);
        int32_t V = 200 + (int32_t)tu_range(&r, 0, MAXV - 200);
        for (int step = 0; step < 40; step++) {
            tu_row(&r, W.row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
            sift_plan p = {.struct_size = sizeof p};
            ck_assert_int_eq(sift_chain_next_k(a, &p, NULL), SIFT_OK);
            int32_t k = p.k > 0 ? p.k : 64;
            k = k > V ? V : k;
            int32_t ids[256];
            size_t ne = 0;
            ck_assert_int_eq(sift_chain_extras(a, ids, 256, &ne, NULL), SIFT_OK);
            sift_slice s;
            ck_assert_int_eq(sift_slicer_build(sl, W.row, V, k, ids, ne, &s, NULL), SIFT_OK);
            if (step & 1)
                tu_devicify(&dev, &r, W.row, V, &s, ids, ne);
            size_t n_top = (size_t)tu_range(&r, 0, k < NTOP_MAX ? k : NTOP_MAX);
            sift_logprobs la = {.struct_size = sizeof la,
                                .flags = SIFT_LOGPROBS_RAW | SIFT_LOGPROBS_PROCESSED |
                                         SIFT_LOGPROBS_ROW_LSE,
                                .n_top = n_top,
                                .raw_top = W.raw_top,
                                .processed_top = W.proc_top,
                                .row_lse = ref_lse(W.row, V)};
            sift_logprobs lb = la;
            lb.raw_top = raw_b;
            lb.processed_top = proc_b;
            int calls = h.calls;
            int32_t ta = -1, tb = -2, ts = -3;
            sift_error err;
            ck_assert_msg(sift_chain_sample_slice_logprobs(a, &s, &ta, &la, &err) == SIFT_OK, "%s",
                          err.message);
            ck_assert_int_eq(sift_chain_sample_logprobs(b, W.row, V, &tb, &lb, NULL), SIFT_OK);
            ck_assert_int_eq(ta, tb);
            (void)ts;
            if (h.calls > calls)
                hooked++;
            else
                decided++;
            ck_assert_uint_eq(la.n_support, lb.n_support);
            ck_assert_uint_eq(la.n_processed_top, lb.n_processed_top);
            ck_assert(memcmp(&la.processed, &lb.processed, sizeof la.processed) == 0);
            ck_assert(memcmp(W.proc_top, proc_b, la.n_processed_top * sizeof *proc_b) == 0);
            ck_assert_uint_eq(la.n_raw_top, n_top);
            for (size_t i = 0; i < n_top; i++) {
                ck_assert_int_eq(W.raw_top[i].id, raw_b[i].id);
                check_raw(&W.raw_top[i], W.row, V, ref_lse(W.row, V));
            }
            ck_assert_int_eq(la.raw.id, ta);
            check_raw(&la.raw, W.row, V, ref_lse(W.row, V));
            ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(b, tb, NULL), SIFT_OK);
        }
        sift_chain_free(a);
        sift_chain_free(b);
    }
    ck_assert_int_gt(decided, 0);
    sift_slicer_free(sl);
    tu_device_free(&dev);
}
END_TEST

/* The slice call samples as sift_chain_sample_slice: same token, same
 * RNG (the next tokens agree), on slices that decide. */
START_TEST(test_slice_token_is_sample_slices)
{
    tu_rng r = {0xface};
    sift_slicer *sl = NULL;
    ck_assert_int_eq(sift_slicer_new(&sl, MAXV, NULL, NULL), SIFT_OK);
    for (int kind = 0; kind < N_CHAINS; kind++) {
        sift_chain *a = make_chain(kind, 99), *b = make_chain(kind, 99);
        hook_ctx ha = {W.row, 0}, hb = {W.row, 0};
        ck_assert_int_eq(sift_chain_set_row_hook(a, hook, &ha, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_set_row_hook(b, hook, &hb, NULL), SIFT_OK);
        int32_t V = 1000;
        for (int step = 0; step < 30; step++) {
            tu_row(&r, W.row, V, step % TU_ROW__COUNT);
            sift_plan p = {.struct_size = sizeof p};
            ck_assert_int_eq(sift_chain_next_k(a, &p, NULL), SIFT_OK);
            int32_t k = p.k > 0 ? p.k : 50;
            int32_t ids[256];
            size_t ne = 0;
            ck_assert_int_eq(sift_chain_extras(a, ids, 256, &ne, NULL), SIFT_OK);
            sift_slice s;
            ck_assert_int_eq(sift_slicer_build(sl, W.row, V, k, ids, ne, &s, NULL), SIFT_OK);
            sift_logprobs lp = {
                .struct_size = sizeof lp,
                .flags = (uint32_t)(step % 2 ? SIFT_LOGPROBS_PROCESSED
                                             : SIFT_LOGPROBS_RAW | SIFT_LOGPROBS_ROW_LSE),
                .row_lse = ref_lse(W.row, V)};
            int32_t ta = -1, tb = -2;
            ck_assert_int_eq(sift_chain_sample_slice(a, &s, &ta, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_sample_slice_logprobs(b, &s, &tb, &lp, NULL), SIFT_OK);
            ck_assert_int_eq(ta, tb);
            ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(b, tb, NULL), SIFT_OK);
        }
        sift_chain_free(a);
        sift_chain_free(b);
    }
    sift_slicer_free(sl);
}
END_TEST

/* A device top-k set whose n_top-th logit ties the prefix's smallest
 * leaves the raw alternatives' ids uncertain (absent tokens tied there
 * may rank first): the row decides them, and they are the row's
 * canonical top n_top. */
START_TEST(test_slice_raw_top_with_boundary_ties_asks_for_the_row)
{
    tu_rng r = {0x7e5};
    int32_t V = 400, k = 24;
    sift_slicer *sl = NULL;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    tu_device_slice dev;
    ck_assert(tu_device_init(&dev, V));
    sift_chain *a = make_chain(3, 4), *b = make_chain(3, 4); /* greedy */
    hook_ctx h = {W.row, 0};
    ck_assert_int_eq(sift_chain_set_row_hook(a, hook, &h, NULL), SIFT_OK);
    sift_candidate top[NTOP_MAX];
    int hooked = 0;
    for (int step = 0; step < 20; step++) {
        /* 16 distinct large logits (greedy decides on the slice), then
         * three values: the prefix ends inside a tie */
        for (int32_t i = 0; i < V; i++)
            W.row[i] = (float)tu_range(&r, 0, 2);
        for (int i = 0; i < 16; i++)
            W.row[tu_range(&r, 0, V - 1)] = 10.0f + 0.25f * (float)i;
        sift_slice s;
        ck_assert_int_eq(sift_slicer_build(sl, W.row, V, k, NULL, 0, &s, NULL), SIFT_OK);
        tu_devicify(&dev, &r, W.row, V, &s, NULL, 0);
        sift_logprobs lp = {.struct_size = sizeof lp,
                            .flags = SIFT_LOGPROBS_RAW | SIFT_LOGPROBS_ROW_LSE,
                            .n_top = (size_t)k,
                            .raw_top = W.raw_top,
                            .row_lse = ref_lse(W.row, V)};
        int calls = h.calls;
        int32_t ta, tb;
        ck_assert_int_eq(sift_chain_sample_slice_logprobs(a, &s, &ta, &lp, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(b, W.row, V, &tb, NULL), SIFT_OK);
        ck_assert_int_eq(ta, tb);
        hooked += h.calls > calls;
        ref_top(W.row, V, W.all, (size_t)k, top);
        for (int32_t i = 0; i < k; i++)
            ck_assert_int_eq(W.raw_top[i].id, top[i].id);
    }
    ck_assert_int_eq(hooked, 20);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_slicer_free(sl);
    tu_device_free(&dev);
}
END_TEST

/* Raw logprobs on a slice without the row's log-sum-exp need the row:
 * SIFT_E_NEED_ROW without a hook, nothing changed; the hook with one. */
START_TEST(test_slice_raw_without_lse_asks_for_the_row)
{
    tu_rng r = {3};
    int32_t V = 500;
    tu_row(&r, W.row, V, TU_ROW_NORMAL);
    sift_slicer *sl = NULL;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    sift_slice s;
    /* the plan of chain 0 (top_k 40 after temperature) is k = 48 */
    ck_assert_int_eq(sift_slicer_build(sl, W.row, V, 48, NULL, 0, &s, NULL), SIFT_OK);
    sift_chain *a = make_chain(0, 1), *b = make_chain(0, 1);
    sift_logprobs lp = {.struct_size = sizeof lp, .flags = SIFT_LOGPROBS_RAW, .n_top = 3};
    lp.raw_top = W.raw_top;
    sift_logprobs before = lp;
    int32_t t = -7;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample_slice_logprobs(a, &s, &t, &lp, &err), SIFT_E_NEED_ROW);
    ck_assert_int_eq(t, -7);
    ck_assert(memcmp(&lp, &before, sizeof lp) == 0);
    /* with the hook: the row answers, and a's RNG had not moved */
    hook_ctx h = {W.row, 0};
    ck_assert_int_eq(sift_chain_set_row_hook(a, hook, &h, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample_slice_logprobs(a, &s, &t, &lp, NULL), SIFT_OK);
    ck_assert_int_eq(h.calls, 1);
    int32_t tb;
    ck_assert_int_eq(sift_chain_sample(b, W.row, V, &tb, NULL), SIFT_OK);
    ck_assert_int_eq(t, tb);
    check_raw(&lp.raw, W.row, V, ref_lse(W.row, V));
    /* with the LSE: no hook call */
    lp.flags |= SIFT_LOGPROBS_ROW_LSE;
    lp.row_lse = ref_lse(W.row, V);
    ck_assert_int_eq(sift_chain_sample_slice_logprobs(a, &s, &t, &lp, NULL), SIFT_OK);
    ck_assert_int_eq(h.calls, 1);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_slicer_free(sl);
}
END_TEST

/* Bad requests: SIFT_E_ARG naming the field, and nothing changed (the
 * request, the token, the chain's RNG). */
START_TEST(test_bad_requests_change_nothing)
{
    tu_rng r = {11};
    int32_t V = 300;
    tu_row(&r, W.row, V, TU_ROW_NORMAL);
    sift_slicer *sl = NULL;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(sl, W.row, V, 40, NULL, 0, &s, NULL), SIFT_OK);
    double lse = ref_lse(W.row, V);
    struct {
        int slice;
        sift_logprobs lp;
        const char *names;
    } cases[] = {
        {0, {.struct_size = 0, .flags = 1}, "struct_size"},
        {0, {.struct_size = sizeof(sift_logprobs) + 8, .flags = 1}, "struct_size"},
        {0, {.struct_size = sizeof(sift_logprobs), .flags = 0}, "no logprobs"},
        {0, {.struct_size = sizeof(sift_logprobs), .flags = 9}, "unknown bits"},
        {0, {.struct_size = sizeof(sift_logprobs), .flags = 1, .n_top = 301}, "n_top"},
        {0, {.struct_size = sizeof(sift_logprobs), .flags = 1, .n_top = 2}, "raw_top is NULL"},
        {0, {.struct_size = sizeof(sift_logprobs), .flags = 2, .n_top = 2}, "processed_top"},
        {1,
         {.struct_size = sizeof(sift_logprobs), .flags = 1, .n_top = 41, .raw_top = W.raw_top},
         "n_prefix"},
        {1, {.struct_size = sizeof(sift_logprobs), .flags = 5, .row_lse = NAN}, "row_lse"},
        {1, {.struct_size = sizeof(sift_logprobs), .flags = 5, .row_lse = INFINITY}, "row_lse"},
        {1, {.struct_size = sizeof(sift_logprobs), .flags = 5, .row_lse = -1e9}, "row_lse"},
        {1, {.struct_size = sizeof(sift_logprobs), .flags = 5, .row_lse = 1e9}, "row_lse"},
    };
    sift_chain *a = make_chain(0, 3), *b = make_chain(0, 3);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sift_logprobs lp = cases[i].lp, before = lp;
        int32_t t = -5;
        sift_error err;
        sift_status st = cases[i].slice ? sift_chain_sample_slice_logprobs(a, &s, &t, &lp, &err)
                                        : sift_chain_sample_logprobs(a, W.row, V, &t, &lp, &err);
        ck_assert_msg(st == SIFT_E_ARG, "case %zu: %s", i, sift_status_str(st));
        ck_assert_msg(strstr(err.message, cases[i].names), "case %zu: %s", i, err.message);
        ck_assert(memcmp(&lp, &before, sizeof lp) == 0);
        ck_assert_int_eq(t, -5);
    }
    /* NULLs */
    sift_logprobs ok = {.struct_size = sizeof ok, .flags = SIFT_LOGPROBS_PROCESSED};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample_logprobs(a, W.row, V, &t, NULL, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_sample_logprobs(a, W.row, V, NULL, &ok, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_sample_logprobs(a, NULL, V, &t, &ok, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_sample_slice_logprobs(a, NULL, &t, &ok, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_sample_logprobs(NULL, W.row, V, &t, &ok, NULL), SIFT_E_ARG);
    /* a bad row: nothing written */
    W.row[7] = NAN;
    sift_logprobs before = ok;
    ck_assert_int_eq(sift_chain_sample_logprobs(a, W.row, V, &t, &ok, NULL), SIFT_E_ROW_VALUE);
    ck_assert(memcmp(&ok, &before, sizeof ok) == 0);
    W.row[7] = 0.0f;
    /* the RNG of a did not move: a and b still agree */
    (void)lse;
    for (int i = 0; i < 5; i++) {
        int32_t ta, tb;
        ck_assert_int_eq(sift_chain_sample_logprobs(a, W.row, V, &ta, &ok, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(b, W.row, V, &tb, NULL), SIFT_OK);
        ck_assert_int_eq(ta, tb);
    }
    sift_chain_free(a);
    sift_chain_free(b);
    sift_slicer_free(sl);
}
END_TEST

/* Every chain on rows of every adversarial shape (ties, -inf runs,
 * magnitudes near the float limits), V = 1 included. */
START_TEST(test_every_kind_on_every_row_shape_with_huge_and_ties)
{
    /* one row of each adversarial shape, V = 1 included */
    tu_rng r = {123};
    for (int shape = 0; shape < TU_ROW__COUNT; shape++)
        for (int32_t V = 1; V <= 65; V += 16) {
            tu_row(&r, W.row, V, shape);
            for (int kind = 0; kind < N_CHAINS; kind++) {
                sift_chain *a = make_chain(kind, 8), *b = make_chain(kind, 8);
                int32_t t;
                row_step(a, b, V, (size_t)(V < 5 ? V : 5), 3, &t);
                sift_chain_free(a);
                sift_chain_free(b);
            }
        }
}
END_TEST

/* The hook's row for test_check_mode_resample_keeps_the_rows_raw_values. */
static int abc_row(void *user, float *row, int32_t n_vocab)
{
    memcpy(row, user, (size_t)n_vocab * sizeof *row);
    return 0;
}

/* Check mode refuses the first draws and bans them in the row it draws
 * again from; on a slice that row is the one the hook wrote into the
 * chain's buffer. Raw values are still the row's as the model gave it. */
START_TEST(test_check_mode_resample_keeps_the_rows_raw_values)
{
    static float row[4] = {0.0f, 5.0f, 4.0f, -1.0f}; /* a, b, c, end */
    sift_logprobs lp[2];
    sift_logprob top[2][2];
    int32_t tok[2];
    for (int path = 0; path < 2; path++) {
        const char *pieces[4] = {"a", "b", "c", ""};
        size_t lens[4] = {1, 1, 1, 0};
        sift_vocab *v = NULL;
        ck_assert_int_eq(sift_vocab_new(&v, 4, pieces, lens, NULL, NULL), SIFT_OK);
        ck_assert_int_eq(sift_vocab_set_attr(v, 3, SIFT_TOKEN_EOG, NULL), SIFT_OK);
        sift_grammar *g = NULL;
        const char *text = "root ::= \"a\"+";
        ck_assert_int_eq(sift_grammar_new(&g, text, strlen(text), v, NULL, NULL), SIFT_OK);
        sift_vocab_free(v);
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_set_check_grammar(c, g, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_set_row_hook(c, abc_row, row, NULL), SIFT_OK);
        memset(&lp[path], 0, sizeof lp[path]);
        lp[path].struct_size = sizeof lp[path];
        lp[path].flags = SIFT_LOGPROBS_RAW;
        lp[path].n_top = 1; /* at most the slice's prefix */
        lp[path].raw_top = top[path];
        sift_error err;
        if (path == 0) {
            ck_assert_int_eq(sift_chain_sample_logprobs(c, row, 4, &tok[0], &lp[0], &err), SIFT_OK);
        } else {
            /* a slice of the refused top token: raw values need the row */
            sift_candidate pre[1] = {{1, 5.0f}};
            sift_slice sl = {.n_vocab = 4, .n_prefix = 1, .prefix = pre};
            ck_assert_int_eq(sift_chain_sample_slice_logprobs(c, &sl, &tok[1], &lp[1], &err),
                             SIFT_OK);
        }
        ck_assert_int_eq(tok[path], 0); /* b and c refused: a */
        sift_chain_free(c);
    }
    double want = log(exp(0.0) + exp(5.0) + exp(4.0) + exp(-1.0));
    for (int path = 0; path < 2; path++) {
        ck_assert_msg(fabs(lp[path].lse - want) < 1e-9, "path %d: lse %.17g, want %.17g", path,
                      lp[path].lse, want);
        ck_assert_msg(fabs(lp[path].raw.logprob - (0.0 - want)) < 1e-9, "path %d: %.17g", path,
                      (double)lp[path].raw.logprob);
    }
    ck_assert(memcmp(top[0], top[1], sizeof top[0][0]) == 0);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("logprobs");
    TCase *t = tcase_create("logprobs");
    tcase_set_timeout(t, 600);
    tcase_add_loop_test(t, test_row_matches_sample_and_distribution, 0, 3);
    tcase_add_test(t, test_raw_tolerance_on_large_rows);
    tcase_add_loop_test(t, test_slice_matches_row, 0, 3);
    tcase_add_test(t, test_slice_token_is_sample_slices);
    tcase_add_test(t, test_slice_raw_without_lse_asks_for_the_row);
    tcase_add_test(t, test_slice_raw_top_with_boundary_ties_asks_for_the_row);
    tcase_add_test(t, test_bad_requests_change_nothing);
    tcase_add_test(t, test_check_mode_resample_keeps_the_rows_raw_values);
    tcase_add_test(t, test_every_kind_on_every_row_shape_with_huge_and_ties);
    suite_add_tcase(s, t);
    return s;
}

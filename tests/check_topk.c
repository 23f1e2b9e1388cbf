/*
 * check_topk.c - the run-time dispatch (core/cpu.c) and the one-pass
 * top-k (core/topk.c): every level the machine has against the scalar
 * twin and against a naive full sort, bit for bit, on peaked, bf16,
 * flat, constant, signed-zero, rising and -inf-laden rows; bad rows get
 * the block path's error; the slicer gives the naive Prefix(k) for k up
 * to V.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "core/simd.h"
#include "testutil.h"

enum {
    ROW_PEAKED = 0, /* N(0, 2) + a head of 50 ids raised by U(5, 15) */
    ROW_BF16,       /* the peaked row rounded to bf16: heavy ties */
    ROW_FLAT,       /* U[-1, 1] */
    ROW_CONSTANT,   /* one value */
    ROW_ZEROS,      /* -0 and +0 mixed with a few small values */
    ROW_RISING,     /* ascending: every token a candidate */
    ROW_NEG_INF,    /* mostly -inf, fewer finite tokens than some k */
    ROW_ULPS,       /* 1 + j ulps, j geometric: the k-th value splits a tie and
                     * the next value is one ulp up */
    ROW_ALTERNATE,  /* 1 and 1 + 1 ulp in turn */
    ROW_SHAPES      /* tu_row's adversarial shapes */
};
#define N_KINDS 10

static const char *const KIND[N_KINDS] = {"peaked", "bf16",    "flat", "constant",  "zeros",
                                          "rising", "neg_inf", "ulps", "alternate", "tu_row"};

static void make_row(tu_rng *r, float *row, int32_t V, int kind)
{
    switch (kind) {
    case ROW_PEAKED:
    case ROW_BF16:
        for (int32_t i = 0; i < V; i++)
            row[i] = (float)(2.0 * tu_normal(r));
        for (int j = 0; j < 50; j++) {
            int32_t id = (int32_t)tu_range(r, 0, V - 1);
            row[id] += (float)(5.0 + 10.0 * tu_unif(r));
        }
        if (kind == ROW_BF16)
            for (int32_t i = 0; i < V; i++)
                row[i] = tu_bf16(row[i]);
        break;
    case ROW_FLAT:
        for (int32_t i = 0; i < V; i++)
            row[i] = (float)(2.0 * tu_unif(r) - 1.0);
        break;
    case ROW_CONSTANT:
        for (int32_t i = 0; i < V; i++)
            row[i] = 0.5f;
        break;
    case ROW_ZEROS:
        for (int32_t i = 0; i < V; i++) {
            double u = tu_unif(r);
            row[i] = u < 0.45 ? -0.0f : (u < 0.9 ? 0.0f : (float)(tu_unif(r) - 0.5));
        }
        break;
    case ROW_RISING:
        for (int32_t i = 0; i < V; i++)
            row[i] = (float)i * 0.25f - 1000.0f;
        break;
    case ROW_NEG_INF:
        for (int32_t i = 0; i < V; i++)
            row[i] = tu_unif(r) < 0.001 ? (float)tu_normal(r) : -INFINITY;
        row[tu_range(r, 0, V - 1)] = 1.0f;
        break;
    case ROW_ULPS:
        for (int32_t i = 0; i < V; i++)
            row[i] = 1.0f + (float)__builtin_ctzll(tu_next(r) | 1ull << 40) * 0x1p-23f;
        break;
    case ROW_ALTERNATE:
        for (int32_t i = 0; i < V; i++)
            row[i] = (i & 1) ? 1.0f + 0x1p-23f : 1.0f;
        break;
    default: tu_row(r, row, V, (int)tu_range(r, 0, TU_ROW__COUNT - 1)); break;
    }
}

static int canon_cmp(const void *a, const void *b)
{
    const sift_candidate *x = a, *y = b;
    if (x->logit > y->logit)
        return -1;
    if (x->logit < y->logit)
        return 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The truth: the whole row sorted canonically (-0 == +0, ids ascending). */
static sift_candidate *naive_order(const float *row, int32_t V)
{
    sift_candidate *c = malloc((size_t)V * sizeof *c);
    ck_assert_ptr_nonnull(c);
    for (int32_t i = 0; i < V; i++) {
        c[i].id = i;
        c[i].logit = row[i];
    }
    qsort(c, (size_t)V, sizeof *c, canon_cmp);
    return c;
}

static void assert_same(const sift_candidate *got, const sift_candidate *want, size_t k,
                        const char *what)
{
    for (size_t j = 0; j < k; j++) {
        uint32_t a, b;
        memcpy(&a, &got[j].logit, sizeof a);
        memcpy(&b, &want[j].logit, sizeof b);
        ck_assert_msg(got[j].id == want[j].id && a == b,
                      "%s: entry %zu is (%d, %a), the naive order has (%d, %a)", what, j,
                      (int)got[j].id, (double)got[j].logit, (int)want[j].id, (double)want[j].logit);
    }
}

typedef struct fixture {
    sift__alloc al;
    sift__ws ws;
} fixture;

static void fx_init(fixture *f, int32_t V)
{
    ck_assert_int_eq(sift__alloc_init(&f->al, NULL, NULL), SIFT_OK);
    memset(&f->ws, 0, sizeof f->ws);
    ck_assert_int_eq(sift__ws_reserve(&f->ws, &f->al, (size_t)V, NULL), SIFT_OK);
}

static sift__ctx fx_ctx(fixture *f, sift_error *err)
{
    sift__ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.ws = &f->ws;
    ctx.err = err;
    ctx.V = 0;
    ctx.selected = -1;
    return ctx;
}

static const size_t KS[] = {1, 40, 104, 256, 1000, SIFT__TOPK_MAX};

/* One row kind per loop index, at a V like a model's and a small one. */
START_TEST(test_every_level_gives_the_naive_prefix)
{
    int kind = _i;
    static const int32_t Vs[] = {248320, 3001};
    tu_rng r = {0x70b0ull + (uint64_t)kind};
    for (size_t vi = 0; vi < sizeof Vs / sizeof Vs[0]; vi++) {
        int32_t V = Vs[vi];
        float *row = malloc((size_t)V * sizeof *row);
        sift_candidate *got = malloc(SIFT__TOPK_MAX * sizeof *got);
        ck_assert_ptr_nonnull(row);
        ck_assert_ptr_nonnull(got);
        fixture f;
        fx_init(&f, V);
        make_row(&r, row, V, kind);
        sift_candidate *want = naive_order(row, V);
        int levels = sift__simd_detect();
        for (size_t ki = 0; ki < sizeof KS / sizeof KS[0]; ki++) {
            size_t k = KS[ki];
            if (!sift__topk_fits(V, k))
                continue;
            for (int l = 0; l <= levels; l++) {
                sift_error err;
                sift__ctx ctx = fx_ctx(&f, &err);
                ck_assert_int_eq(sift__topk_row_at(l, &ctx, row, V, k, got), SIFT_OK);
                char what[96];
                snprintf(what, sizeof what, "%s row, V = %d, k = %zu, level %s", KIND[kind], (int)V,
                         k, sift__simd_ops_at(l)->name);
                assert_same(got, want, k, what);
            }
        }
        free(want);
        sift__ws_free(&f.ws, &f.al);
        free(got);
        free(row);
    }
}
END_TEST

/* The public builder for k in {1, 40, 104, 256, V - 1, V}: the one-pass
 * path, the block path and the full sort all give the naive Prefix(k). */
START_TEST(test_slicer_gives_the_naive_prefix_for_every_k)
{
    int kind = _i;
    const int32_t V = 20000;
    tu_rng r = {0x51ceull + (uint64_t)kind};
    float *row = malloc((size_t)V * sizeof *row);
    ck_assert_ptr_nonnull(row);
    make_row(&r, row, V, kind);
    sift_candidate *want = naive_order(row, V);
    sift_slicer *s;
    sift_error err;
    ck_assert_int_eq(sift_slicer_new(&s, V, NULL, &err), SIFT_OK);
    const int32_t ks[] = {1, 40, 104, 256, SIFT__TOPK_MAX + 1, V - 1, V};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        sift_slice sl;
        ck_assert_int_eq(sift_slicer_build(s, row, V, ks[ki], NULL, 0, &sl, &err), SIFT_OK);
        ck_assert_int_eq(sl.n_prefix, ks[ki]);
        ck_assert_uint_eq(sl.flags, SIFT_SLICE_CANONICAL);
        char what[64];
        snprintf(what, sizeof what, "%s row, slicer, k = %d", KIND[kind], (int)ks[ki]);
        assert_same(sl.prefix, want, (size_t)ks[ki], what);
    }
    sift_slicer_free(s);
    free(want);
    free(row);
}
END_TEST

/* NaN and +inf in the first k tokens, in the scanned body, in a scan
 * tail and at the last token; all -inf: every level returns the status,
 * index and message of sift__row_error. */
START_TEST(test_bad_rows_get_the_row_error_at_every_level)
{
    const int32_t V = 5003;
    float *row = malloc((size_t)V * sizeof *row);
    sift_candidate *got = malloc(256 * sizeof *got);
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(got);
    fixture f;
    fx_init(&f, V);
    tu_rng r = {0xbadull};
    const int32_t at[] = {0, 3, 39, 40, 41, 700, 4990, V - 1};
    const float bad[] = {NAN, INFINITY, -NAN};
    for (size_t a = 0; a < sizeof at / sizeof at[0]; a++) {
        for (size_t b = 0; b < sizeof bad / sizeof bad[0] + 1; b++) {
            make_row(&r, row, V, ROW_PEAKED);
            if (b < sizeof bad / sizeof bad[0])
                row[at[a]] = bad[b];
            else
                for (int32_t i = 0; i < V; i++)
                    row[i] = -INFINITY;
            sift_error want_err;
            sift_status want = sift__row_error(row, V, &want_err);
            ck_assert_int_ne(want, SIFT_OK);
            for (int l = 0; l <= sift__simd_detect(); l++) {
                const size_t ks[] = {1, 40, 256};
                for (size_t ki = 0; ki < 3; ki++) {
                    sift_error err;
                    sift__ctx ctx = fx_ctx(&f, &err);
                    sift_status st = sift__topk_row_at(l, &ctx, row, V, ks[ki], got);
                    ck_assert_int_eq(st, want);
                    ck_assert_int_eq(err.index, want_err.index);
                    ck_assert_str_eq(err.message, want_err.message);
                }
            }
        }
    }
    sift__ws_free(&f.ws, &f.al);
    free(got);
    free(row);
}
END_TEST

/* A long huge row (its running sums overflow, raising the flag in the
 * sample's pass and in the row's) gives the naive prefix through the
 * sampled threshold, also when no error record is passed (the slicer
 * passes none). */
START_TEST(test_huge_long_rows_give_the_prefix_through_the_sample_without_an_error_record)
{
    const int32_t V = 248320;
    const size_t k = 104;
    size_t segs, stride, rr;
    ck_assert(sift__topk_sample_plan(V, k, &segs, &stride, &rr));
    float *row = malloc((size_t)V * sizeof *row);
    sift_candidate *got = malloc(k * sizeof *got);
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(got);
    tu_rng r = {0x4a6full};
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)(tu_unif(&r) * 3.0e38);
    sift_candidate *want = naive_order(row, V);
    fixture f;
    fx_init(&f, V);
    for (int l = 0; l <= sift__simd_detect(); l++) {
        for (int with_err = 0; with_err < 2; with_err++) {
            sift_error err;
            sift__ctx ctx = fx_ctx(&f, with_err ? &err : NULL);
            ck_assert_int_eq(sift__topk_row_at(l, &ctx, row, V, k, got), SIFT_OK);
            assert_same(got, want, k, sift__simd_ops_at(l)->name);
        }
    }
    sift__ws_free(&f.ws, &f.al);
    free(want);
    free(got);
    free(row);
}
END_TEST

/* A row whose sampled runs (sift__topk_sample_plan) hold its only large
 * values: the sample's threshold is beaten by fewer than k tokens, and
 * the exact pass that follows still gives the naive prefix. */
START_TEST(test_a_row_that_defeats_the_sample_still_gives_the_naive_prefix)
{
    const int32_t V = 248320;
    tu_rng r = {0x5a3e1ull};
    float *row = malloc((size_t)V * sizeof *row);
    sift_candidate *got = malloc(SIFT__TOPK_MAX * sizeof *got);
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(got);
    fixture f;
    fx_init(&f, V);
    static const size_t ks[] = {SIFT__TOPK_SAMPLE_MIN_K, 40, 64, 104, 256, 900};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        size_t k = ks[ki], segs, stride, rr;
        ck_assert_msg(sift__topk_sample_plan(V, k, &segs, &stride, &rr), "k = %zu samples", k);
        ck_assert_uint_lt(rr, k);
        for (int32_t i = 0; i < V; i++)
            row[i] = (float)(tu_unif(&r) - 1.0);
        for (size_t j = 0; j < segs; j++)
            for (size_t i = 0; i < SIFT__TOPK_SAMPLE_SEG; i++)
                row[j * stride + i] = (float)(1.0 + tu_unif(&r));
        /* Fewer than k tokens of the row beat the sample's r-th value. */
        ck_assert_uint_lt(rr, k);
        sift_candidate *want = naive_order(row, V);
        for (int l = 0; l <= sift__simd_detect(); l++) {
            sift_error err;
            sift__ctx ctx = fx_ctx(&f, &err);
            ck_assert_int_eq(sift__topk_row_at(l, &ctx, row, V, k, got), SIFT_OK);
            char what[96];
            snprintf(what, sizeof what, "sample-defeating row, k = %zu, level %s", k,
                     sift__simd_ops_at(l)->name);
            assert_same(got, want, k, what);
        }
        free(want);
    }
    sift__ws_free(&f.ws, &f.al);
    free(got);
    free(row);
}
END_TEST

/* The sample is used for large k on long rows only, and its r stays below
 * k (so that the threshold can be beaten by k tokens). */
START_TEST(test_the_sample_plan_reads_a_small_part_of_long_rows_only)
{
    size_t segs, stride, rr;
    ck_assert(!sift__topk_sample_plan(248320, SIFT__TOPK_SAMPLE_MIN_K - 1, &segs, &stride, &rr));
    ck_assert(!sift__topk_sample_plan(3001, 104, &segs, &stride, &rr));
    for (size_t k = SIFT__TOPK_SAMPLE_MIN_K; k <= SIFT__TOPK_MAX; k *= 2) {
        int32_t V = 1048576;
        ck_assert(sift__topk_sample_plan(V, k, &segs, &stride, &rr));
        ck_assert_uint_ge(stride, SIFT__TOPK_SAMPLE_SEG);
        ck_assert_uint_le(segs * SIFT__TOPK_SAMPLE_SEG, (size_t)V / SIFT__TOPK_SAMPLE_MAX_PART);
        ck_assert_uint_le((segs - 1) * stride + SIFT__TOPK_SAMPLE_SEG, (size_t)V);
        ck_assert_uint_lt(rr, k);
        ck_assert_uint_le(rr, segs);
        ck_assert_uint_le(rr, SIFT__TOPK_SAMPLE_MAX_R);
    }
}
END_TEST

/* A row whose sampled runs hold its smallest values: far more than the
 * room the sampled pass plans for beat the sample's threshold, so the
 * pass cuts its buffer again and again (raising the threshold as the
 * exact pass does), and still gives the naive prefix; with ties at the
 * threshold (bf16 values) and k near the planned room. */
START_TEST(test_a_row_whose_sample_lies_below_the_rest_still_gives_the_naive_prefix)
{
    const int32_t V = 151936;
    tu_rng r = {0x5b1e2ull};
    float *row = malloc((size_t)V * sizeof *row);
    sift_candidate *got = malloc(SIFT__TOPK_MAX * sizeof *got);
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(got);
    fixture f;
    fx_init(&f, V);
    static const size_t ks[] = {SIFT__TOPK_SAMPLE_MIN_K, 40, 104, 256, 593};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        size_t k = ks[ki], segs, stride, rr;
        ck_assert_msg(sift__topk_sample_plan(V, k, &segs, &stride, &rr), "k = %zu samples", k);
        for (int ties = 0; ties < 2; ties++) {
            for (int32_t i = 0; i < V; i++) {
                float v = (float)tu_unif(&r);
                row[i] = ties ? tu_bf16(v) : v;
            }
            for (size_t j = 0; j < segs; j++)
                for (size_t i = 0; i < SIFT__TOPK_SAMPLE_SEG; i++)
                    row[j * stride + i] = (float)(-1.0 - tu_unif(&r));
            sift_candidate *want = naive_order(row, V);
            for (int l = 0; l <= sift__simd_detect(); l++) {
                sift_error err;
                sift__ctx ctx = fx_ctx(&f, &err);
                ck_assert_int_eq(sift__topk_row_at(l, &ctx, row, V, k, got), SIFT_OK);
                char what[96];
                snprintf(what, sizeof what, "sample below the row, k = %zu, ties %d, level %s", k,
                         ties, sift__simd_ops_at(l)->name);
                assert_same(got, want, k, what);
            }
            free(want);
        }
    }
    sift__ws_free(&f.ws, &f.al);
    free(got);
    free(row);
}
END_TEST

/* The scan kernels append the scalar twin's indices on NaN-free rows,
 * for thresholds inside and at the edges of the row, stopping for room
 * and resuming; on a range with a NaN or +inf each raises the flag. */
START_TEST(test_scan_kernels_append_the_scalar_indices)
{
    const size_t n = 4099;
    float *x = malloc(n * sizeof *x);
    uint32_t *want = malloc((n + 64) * sizeof *want), *got = malloc((n + 64) * sizeof *got);
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(got);
    tu_rng r = {0x5ca9ull};
    for (int round = 0; round < 90; round++) {
        make_row(&r, x, (int32_t)n, round % N_KINDS);
        int poison = round % 3; /* 0: none, 1: NaN, 2: +inf */
        size_t at = (size_t)tu_range(&r, 70, (int64_t)n - 1);
        float t = round % 5 == 0 ? -INFINITY : x[tu_range(&r, 0, (int64_t)n - 1)];
        if (poison)
            x[at] = poison == 1 ? NAN : INFINITY;
        size_t start = (size_t)tu_range(&r, 0, 70);
        size_t mw = 0;
        int bw = 0;
        ck_assert_uint_eq(sift__simd_ops_at(0)->scan_gt(x, start, n, t, want, &mw, n + 64, &bw), n);
        ck_assert_int_eq(bw, poison != 0);
        for (int l = 1; l <= sift__simd_detect(); l++) {
            const sift__simd_ops *ops = sift__simd_ops_at(l);
            size_t mg = 0, i = start;
            int bg = 0;
            /* A small cap makes the kernel stop and resume. */
            while (i < n) {
                size_t before = i, cap = mg + 200;
                i = ops->scan_gt(x, i, n, t, got, &mg, cap, &bg);
                ck_assert_msg(i > before, "%s: no progress at %zu", ops->name, i);
            }
            ck_assert_msg(bg == (poison != 0) || (!poison && round % N_KINDS == ROW_SHAPES),
                          "%s: flag %d, poison %d", ops->name, bg, poison);
            if (poison == 1)
                continue; /* a NaN may be dropped by a max: the flag says it */
            ck_assert_uint_eq(mg, mw);
            for (size_t j = 0; j < mw; j++)
                ck_assert_uint_eq(got[j], want[j]);
        }
    }
    free(got);
    free(want);
    free(x);
}
END_TEST

/* A valid row whose sums overflow (values near FLT_MAX) raises the
 * kernels' flag; the pass checks the row, finds it valid and goes on to
 * the naive prefix. */
START_TEST(test_huge_rows_that_overflow_the_check_still_give_the_prefix)
{
    const int32_t V = 9000;
    float *row = malloc((size_t)V * sizeof *row);
    sift_candidate *got = malloc(256 * sizeof *got);
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(got);
    tu_rng r = {0x4a6eull};
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)(tu_unif(&r) * 3.0e38);
    sift_candidate *want = naive_order(row, V);
    fixture f;
    fx_init(&f, V);
    for (int l = 0; l <= sift__simd_detect(); l++) {
        sift_error err;
        sift__ctx ctx = fx_ctx(&f, &err);
        ck_assert_int_eq(sift__topk_row_at(l, &ctx, row, V, 256, got), SIFT_OK);
        assert_same(got, want, 256, sift__simd_ops_at(l)->name);
    }
    sift__ws_free(&f.ws, &f.al);
    free(want);
    free(got);
    free(row);
}
END_TEST

START_TEST(test_max_kernels_agree_with_the_scalar_twin)
{
    const size_t n = 10007;
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    tu_rng r = {0x3a3ull};
    for (int round = 0; round < 40; round++) {
        make_row(&r, x, (int32_t)n, round % N_KINDS);
        size_t len = (size_t)tu_range(&r, 0, (int64_t)n);
        float want = sift__simd_ops_at(0)->max_f32(x, len);
        for (int l = 1; l <= sift__simd_detect(); l++) {
            float got = sift__simd_ops_at(l)->max_f32(x, len);
            ck_assert_msg(got == want, "level %d: %a, scalar %a", l, (double)got, (double)want);
        }
    }
    free(x);
}
END_TEST

/* The run maxima of the sampled threshold: every level gives the scalar
 * twin's value (as a float compare sees it: -0 == +0) for runs at every
 * offset and stride, on every row kind (-0/+0, -inf, ulps, rising). */
START_TEST(test_runs_max_kernels_agree_with_the_scalar_twin)
{
    const size_t n = 10007;
    float *x = malloc(n * sizeof *x);
    float want[64], got[64];
    ck_assert_ptr_nonnull(x);
    tu_rng r = {0x7a3ull};
    for (int round = 0; round < 60; round++) {
        make_row(&r, x, (int32_t)n, round % N_KINDS);
        if (round % 7 == 3) /* denormals */
            for (size_t i = 0; i < n; i++)
                x[i] = (float)(tu_unif(&r) - 0.5) * 0x1p-130f;
        size_t g = (size_t)tu_range(&r, 1, 64);
        size_t stride = (size_t)tu_range(&r, SIFT__TOPK_SAMPLE_SEG,
                                         (int64_t)(n - SIFT__TOPK_SAMPLE_SEG) / (int64_t)g);
        size_t off =
            (size_t)tu_range(&r, 0, (int64_t)(n - (g - 1) * stride - SIFT__TOPK_SAMPLE_SEG));
        sift__simd_ops_at(0)->runs_max(x + off, stride, g, want);
        for (size_t j = 0; j < g; j++)
            ck_assert(want[j] ==
                      sift__simd_ops_at(0)->max_f32(x + off + j * stride, SIFT__TOPK_SAMPLE_SEG));
        for (int l = 1; l <= sift__simd_detect(); l++) {
            sift__simd_ops_at(l)->runs_max(x + off, stride, g, got);
            for (size_t j = 0; j < g; j++)
                ck_assert_msg(got[j] == want[j], "level %d, run %zu: %a, scalar %a", l, j,
                              (double)got[j], (double)want[j]);
        }
    }
    free(x);
}
END_TEST

START_TEST(test_simd_names_parse_to_their_levels_and_cap_the_choice)
{
    ck_assert_int_eq(sift__simd_parse("scalar"), SIFT__SIMD_SCALAR);
    ck_assert_int_eq(sift__simd_parse("sse2"), SIFT__SIMD_SSE2);
    ck_assert_int_eq(sift__simd_parse("avx2"), SIFT__SIMD_AVX2);
    ck_assert_int_eq(sift__simd_parse("avx512"), SIFT__SIMD_AVX512);
    ck_assert_int_eq(sift__simd_parse("AVX2"), -1);
    ck_assert_int_eq(sift__simd_parse(NULL), -1);
    for (int l = 0; l < SIFT__SIMD_LEVELS; l++) {
        const sift__simd_ops *o = sift__simd_ops_at(l);
        ck_assert_int_le(o->level, l);
        ck_assert_int_le(o->level, sift__simd_detect());
        ck_assert_int_eq(sift__simd_parse(o->name), o->level);
    }
    const char *env = getenv("SIFT_SIMD");
    int cap = sift__simd_parse(env);
    int want = sift__simd_detect();
    if (cap >= 0 && cap < want)
        want = cap;
    ck_assert_int_eq(sift__simd()->level, want);
}
END_TEST

/* At small k about one sampled run maximum is expected above the k-th
 * value (the V / 16 cap binds), so the count of run maxima among the row's
 * first k is about Poisson(1): r must be set so that it seldom reaches r,
 * for each time it does the row is read twice. Over 900 random rows at
 * k = 16 and 24 (V = 151,936 and 248,320) at most 1 % may take a second
 * pass; with r = 4 at mu = 1 (r rounded down) about 2 % did. Counts
 * passes, not time. */
START_TEST(test_small_k_seldom_needs_a_second_pass)
{
    static const int32_t Vs[] = {151936, 248320};
    static const size_t ks[] = {16, 24};
    const int rows_per = 75; /* per (V, k, kind) */
    const int kinds[] = {ROW_PEAKED, ROW_BF16, ROW_FLAT};
    for (size_t vi = 0; vi < 2; vi++) {
        int32_t V = Vs[vi];
        float *row = malloc((size_t)V * sizeof *row);
        sift_candidate *got = malloc(24 * sizeof *got);
        ck_assert_ptr_nonnull(row);
        ck_assert_ptr_nonnull(got);
        fixture f;
        fx_init(&f, V);
        for (size_t ki = 0; ki < 2; ki++) {
            size_t k = ks[ki], segs, stride, rr;
            ck_assert_msg(sift__topk_sample_plan(V, k, &segs, &stride, &rr), "k = %zu samples", k);
            int rows = 0, second = 0;
            for (int kind = 0; kind < 3; kind++) {
                tu_rng r = {0x5eed0000ull + (uint64_t)V * 31u + k * 7u + (uint64_t)kind};
                for (int i = 0; i < rows_per; i++) {
                    make_row(&r, row, V, kinds[kind]);
                    sift__ctx ctx = fx_ctx(&f, NULL);
                    int passes = 0;
                    ck_assert_int_eq(
                        sift__topk_row_passes(sift__simd_detect(), &ctx, row, V, k, got, &passes),
                        SIFT_OK);
                    ck_assert_int_ge(passes, 1);
                    ck_assert_int_le(passes, 2);
                    rows++;
                    second += passes == 2;
                }
            }
            fprintf(stderr, "V = %d, k = %zu, r = %zu: %d second passes in %d rows\n", (int)V, k,
                    rr, second, rows);
            ck_assert_msg(100 * second <= rows, "V = %d, k = %zu: %d second passes in %d rows",
                          (int)V, k, second, rows);
        }
        sift__ws_free(&f.ws, &f.al);
        free(got);
        free(row);
    }
}
END_TEST

/* Rows whose sampled pass holds (one pass: at k = 104 and 256 its ~2k
 * survivors are sorted by the radix end of core/topk.c, by logit alone,
 * in stored id order; at k = 16 and 40 by the quicksort) with
 * survivors that stress it: logits spread over the whole float range with
 * both signs (every bit of the key differs: four passes of 8 bits), a
 * bf16 plateau of thousands of equal logits at the k-th value (ties by
 * ascending id only through the stored order), -0 and +0 mixed at the
 * top (one key; the logit read back keeps its sign), one logit shared by
 * all survivors but a few, -inf all around, and survivors that share
 * the top 16 bits of their span (the passes sort by those alone): in one
 * group too large to put in order by insertion, and in many small groups.
 * Every level against the naive order, and most rows in one pass, so the
 * radix end ran. */
START_TEST(test_the_radix_end_of_the_sampled_pass_gives_the_naive_prefix)
{
    const int32_t V = 151936;
    static const size_t ks[] = {16, 40, 104, 256};
    float *row = malloc((size_t)V * sizeof *row);
    sift_candidate *got = malloc(256 * sizeof *got);
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(got);
    fixture f;
    fx_init(&f, V);
    tu_rng r = {0x7ad1ull};
    int rows = 0, single = 0;
    for (int shape = 0; shape < 7; shape++) {
        for (int rep = 0; rep < 3; rep++) {
            for (int32_t i = 0; i < V; i++) {
                double u = tu_unif(&r);
                switch (shape) {
                case 0: /* +-2^[-100, 100]: every bit of the key differs */
                    row[i] = (float)((u < 0.5 ? -1.0 : 1.0) *
                                     ldexp(1.0 + tu_unif(&r), (int)tu_range(&r, -100, 100)));
                    break;
                case 1: /* bf16, a plateau of about 3,000 equal logits */
                    row[i] = u < 0.02 ? 2.0f : tu_bf16((float)tu_normal(&r));
                    break;
                case 2: /* -0 and +0 above a negative row */
                    row[i] = u < 0.01 ? (u < 0.005 ? -0.0f : 0.0f) : (float)(-1.0 - tu_unif(&r));
                    break;
                case 3: /* one logit for all survivors but a few */
                    row[i] = u < 0.01 ? 3.0f : (u < 0.0101 ? 4.0f : (float)tu_normal(&r));
                    break;
                case 4: /* -inf all around a peaked part */
                    row[i] = u < 0.5 ? -INFINITY : (float)(2.0 * tu_normal(&r));
                    break;
                case 5: /* a few huge logits over a cluster of survivors
                         * within 4,096 ulps of 1: one group of the top
                         * 16 bits, in random order (the budget runs out) */
                    row[i] = u < 0.004 ? 1.0f + (float)tu_range(&r, 0, 4095) * 0x1p-23f
                                       : (u < 0.00402 ? 1e30f : (float)tu_normal(&r) - 4.0f);
                    break;
                default: /* survivors 2^-14 apart (512 ulps) over a
                          * span of about 28 bits, whose groups of the
                          * top 16 bits are 4,096 ulps wide: groups of
                          * about five keys in random id order (the
                          * insertion sort moves them) */
                    row[i] = u < 0.004 ? 1.0f + (float)tu_range(&r, 0, 1023) * 0x1p-14f
                                       : (u < 0.00402 ? 1e6f : (float)tu_normal(&r) - 4.0f);
                    break;
                }
            }
            sift_candidate *want = naive_order(row, V);
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                size_t k = ks[ki];
                for (int l = 0; l <= sift__simd_detect(); l++) {
                    sift__ctx ctx = fx_ctx(&f, NULL);
                    int passes = 0;
                    ck_assert_int_eq(sift__topk_row_passes(l, &ctx, row, V, k, got, &passes),
                                     SIFT_OK);
                    char what[96];
                    snprintf(what, sizeof what, "shape %d, k = %zu, level %s", shape, k,
                             sift__simd_ops_at(l)->name);
                    assert_same(got, want, k, what);
                    rows++;
                    single += passes == 1;
                }
            }
            free(want);
        }
    }
    ck_assert_msg(4 * single >= 3 * rows, "%d of %d rows in one pass", single, rows);
    sift__ws_free(&f.ws, &f.al);
    free(got);
    free(row);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("topk");
    TCase *tc = tcase_create("one-pass top-k");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_every_level_gives_the_naive_prefix, 0, N_KINDS);
    tcase_add_test(tc, test_bad_rows_get_the_row_error_at_every_level);
    tcase_add_test(tc, test_huge_rows_that_overflow_the_check_still_give_the_prefix);
    tcase_add_test(tc, test_a_row_that_defeats_the_sample_still_gives_the_naive_prefix);
    tcase_add_test(tc,
                   test_huge_long_rows_give_the_prefix_through_the_sample_without_an_error_record);
    tcase_add_test(tc, test_the_sample_plan_reads_a_small_part_of_long_rows_only);
    tcase_add_test(tc, test_a_row_whose_sample_lies_below_the_rest_still_gives_the_naive_prefix);
    tcase_add_test(tc, test_small_k_seldom_needs_a_second_pass);
    tcase_add_test(tc, test_the_radix_end_of_the_sampled_pass_gives_the_naive_prefix);
    suite_add_tcase(s, tc);
    /* The tests above run every level the machine has whatever the cap;
     * the slicer and the cap's own test go through the library's choice,
     * so check_simd_env.sh runs these "simd" cases again under each
     * SIFT_SIMD cap. */
    TCase *ts = tcase_create("slicer");
    tcase_set_timeout(ts, 120);
    tcase_set_tags(ts, "simd");
    tcase_add_loop_test(ts, test_slicer_gives_the_naive_prefix_for_every_k, 0, N_KINDS);
    suite_add_tcase(s, ts);
    TCase *td = tcase_create("dispatch");
    tcase_set_tags(td, "simd");
    tcase_add_test(td, test_scan_kernels_append_the_scalar_indices);
    tcase_add_test(td, test_max_kernels_agree_with_the_scalar_twin);
    tcase_add_test(td, test_runs_max_kernels_agree_with_the_scalar_twin);
    tcase_add_test(td, test_simd_names_parse_to_their_levels_and_cap_the_choice);
    suite_add_tcase(s, td);
    return s;
}

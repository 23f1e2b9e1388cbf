/*
 * check_select.c - canonical order, top-k cuts and weighted prefixes
 * against plain sorting, on random and adversarial arrays.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "oracle/oracle.h"
#include "testutil.h"

static sift__ws ws;
static sift__alloc al;

static void setup(void)
{
    ck_assert_int_eq(sift__alloc_init(&al, NULL, NULL), SIFT_OK);
    memset(&ws, 0, sizeof ws);
    ck_assert_int_eq(sift__ws_reserve(&ws, &al, 300000, NULL), SIFT_OK);
}

static void teardown(void)
{
    sift__ws_free(&ws, &al);
}

static sift__ctx make_ctx(void)
{
    sift__ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.ws = &ws;
    ctx.selected = -1;
    return ctx;
}

/* A random array: a row of some shape, then a random subset of it in
 * random storage order, so ids are unique but not contiguous. */
static size_t random_cands(tu_rng *r, sift_candidate *c, int32_t maxV)
{
    int32_t V = tu_rand_V(r, maxV);
    float *row = malloc((size_t)V * sizeof *row);
    tu_row(r, row, V, (int)tu_range(r, 0, TU_ROW__COUNT - 1));
    size_t n = 0;
    double keep = tu_unif(r) < 0.5 ? 1.0 : tu_unif(r);
    for (int32_t i = 0; i < V; i++)
        if (tu_unif(r) < keep || n == 0) {
            c[n].id = i;
            c[n].logit = row[i];
            n++;
        }
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)tu_range(r, 0, (int64_t)i - 1);
        sift_candidate t = c[i - 1];
        c[i - 1] = c[j];
        c[j] = t;
    }
    free(row);
    return n;
}

START_TEST(test_sort_canon_matches_qsort_with_ties_and_neg_inf)
{
    tu_rng r = {1000 + (uint64_t)_i};
    sift_candidate *c = malloc(300000 * sizeof *c), *d = malloc(300000 * sizeof *d);
    for (int rep = 0; rep < 50; rep++) {
        size_t n = random_cands(&r, c, rep % 10 == 0 ? 100000 : 3000);
        memcpy(d, c, n * sizeof *c);
        or_arr oa = {d, n, 0};
        or_sort(&oa);
        sift__sort_canon(c, n, ws.cand2);
        for (size_t i = 0; i < n; i++) {
            ck_assert_int_eq(c[i].id, d[i].id);
            ck_assert(memcmp(&c[i].logit, &d[i].logit, 4) == 0 || c[i].logit == d[i].logit);
        }
        sift__sort_id(c, n, ws.cand2);
        for (size_t i = 1; i < n; i++)
            ck_assert_int_lt(c[i - 1].id, c[i].id);
    }
    free(c);
    free(d);
}
END_TEST

START_TEST(test_cut_top_keeps_exactly_the_canonical_first_k)
{
    tu_rng r = {2000 + (uint64_t)_i};
    sift_candidate *c = malloc(300000 * sizeof *c), *d = malloc(300000 * sizeof *d);
    for (int rep = 0; rep < 100; rep++) {
        size_t n = random_cands(&r, c, rep % 10 == 0 ? 262144 : 5000);
        memcpy(d, c, n * sizeof *c);
        or_arr oa = {d, n, 0};
        or_sort(&oa);
        size_t k = (size_t)tu_range(&r, 1, (int64_t)n);
        if (rep % 3 == 0)
            k = (size_t)tu_range(&r, 1, n < 300 ? (int64_t)n : 300);
        sift__ctx ctx = make_ctx();
        uint64_t cut = sift__cut_top(&ctx, c, n, k);
        ck_assert_uint_eq(cut, sift__ckey(d[k - 1].logit, d[k - 1].id));
        size_t cnt = 0;
        for (size_t i = 0; i < n; i++)
            cnt += sift__ckey(c[i].logit, c[i].id) >= cut;
        ck_assert_uint_eq(cnt, k);
    }
    free(c);
    free(d);
}
END_TEST

START_TEST(test_mass_prefix_matches_a_canonical_walk)
{
    tu_rng r = {3000 + (uint64_t)_i};
    sift_candidate *c = malloc(300000 * sizeof *c), *d = malloc(300000 * sizeof *d);
    uint64_t *w = malloc(300000 * sizeof *w), *wd = malloc(300000 * sizeof *wd);
    for (int rep = 0; rep < 200; rep++) {
        size_t n = random_cands(&r, c, rep % 20 == 0 ? 262144 : 3000);
        memcpy(d, c, n * sizeof *c);
        or_arr oa = {d, n, 0};
        or_sort(&oa);
        float m = d[0].logit;
        if (!(m > -INFINITY))
            continue;
        sift__u128 W = sift__weights(c, n, m, w);
        sift__u128 Wo = or_weights(&oa, wd);
        ck_assert(sift__u128_cmp(W, Wo) == 0);
        for (int t = 0; t < 5; t++) {
            int strict = (int)tu_range(&r, 0, 1);
            sift__u128 T;
            if (t == 0)
                T = sift__u128_from(0);
            else if (t == 1)
                T = W;
            else
                T = sift__u128_scale_u64(W, tu_next(&r));
            sift__ctx ctx = make_ctx();
            uint64_t cut;
            size_t len = sift__mass_prefix(&ctx, c, w, n, T, strict, &cut);
            size_t i = or_walk(wd, n, T, strict);
            if (i == n) {
                ck_assert_uint_eq(len, n);
            } else {
                ck_assert_uint_eq(len, i + 1);
                ck_assert_uint_eq(cut, sift__ckey(d[i].logit, d[i].id));
            }
        }
    }
    free(c);
    free(d);
    free(w);
    free(wd);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("select");
    TCase *tc = tcase_create("canonical order");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_sort_canon_matches_qsort_with_ties_and_neg_inf, 0, 4);
    tcase_add_loop_test(tc, test_cut_top_keeps_exactly_the_canonical_first_k, 0, 4);
    tcase_add_loop_test(tc, test_mass_prefix_matches_a_canonical_walk, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

/*
 * check_ban.c - the samplers that ban listed token ids (min_tokens,
 * allowed_tokens, no_repeat_ngram, bad_words) and their shared helpers
 * (src/samplers/ban.c).
 *
 * Each sampler is compared bitwise with its naive oracle (tests/oracle)
 * on random chains that mix it with every other sampler, on random and
 * adversarial rows, through the row path (sift_chain_sample) and the
 * slice path (sift_chain_sample_slice at the static, dynamic and a
 * smaller k, with the row hook and without it).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "oracle/oracle.h"
#include "testutil.h"
#include "../src/samplers/registry.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

START_TEST(test_sort_unique_gives_the_distinct_ids_in_ascending_order)
{
    tu_rng r = {7};
    int32_t v[300], w[300];
    for (int rep = 0; rep < 500; rep++) {
        size_t n = (size_t)tu_range(&r, 0, 300);
        int32_t span = (int32_t)tu_range(&r, 1, 400);
        for (size_t i = 0; i < n; i++)
            v[i] = w[i] = (int32_t)tu_range(&r, 0, span - 1);
        size_t m = sift__ids_sort_unique(v, n);
        if (n)
            qsort(w, n, sizeof *w, cmp_i32);
        size_t k = n ? 1 : 0;
        for (size_t i = 1; i < n; i++)
            if (w[i] != w[k - 1])
                w[k++] = w[i];
        ck_assert_uint_eq(m, k);
        ck_assert(m == 0 || memcmp(v, w, m * sizeof *v) == 0);
    }
}
END_TEST

START_TEST(test_parse_ids_reads_separated_decimal_ids_and_refuses_the_rest)
{
    int32_t out[4];
    ck_assert_uint_eq(sift__parse_ids("15", 2, out, 4), 1);
    ck_assert_int_eq(out[0], 15);
    ck_assert_uint_eq(sift__parse_ids(" 1, 22\t333 ", 11, out, 4), 3);
    ck_assert_int_eq(out[0], 1);
    ck_assert_int_eq(out[1], 22);
    ck_assert_int_eq(out[2], 333);
    ck_assert_uint_eq(sift__parse_ids("2147483647", 10, out, 4), 1);
    ck_assert_int_eq(out[0], INT32_MAX);
    ck_assert_uint_eq(sift__parse_ids("", 0, out, 4), 0);
    ck_assert_uint_eq(sift__parse_ids("  ", 2, NULL, SIZE_MAX), 0);
    ck_assert_uint_eq(sift__parse_ids("2147483648", 10, out, 4), SIZE_MAX);
    ck_assert_uint_eq(sift__parse_ids("-1", 2, out, 4), SIZE_MAX);
    ck_assert_uint_eq(sift__parse_ids("1x", 2, out, 4), SIZE_MAX);
    ck_assert_uint_eq(sift__parse_ids("abc", 3, out, 4), SIZE_MAX);
    ck_assert_uint_eq(sift__parse_ids("1 2 3 4 5", 9, out, 4), SIZE_MAX);
    ck_assert_uint_eq(sift__parse_ids("1 2 3 4 5", 9, NULL, SIZE_MAX), 5);
}
END_TEST

/* A dense row and the same tokens as a shuffled incomplete set: both
 * ban exactly the listed (or the unlisted) ids, and nothing else moves. */
START_TEST(test_ban_ids_and_ban_others_touch_exactly_the_listed_ids_on_rows_and_sets)
{
    tu_rng r = {8};
    enum { V = 64 };
    for (int rep = 0; rep < 300; rep++) {
        int32_t ids[V];
        size_t n = (size_t)tu_range(&r, 0, 20);
        for (size_t i = 0; i < n; i++)
            ids[i] = (int32_t)tu_range(&r, 0, V + 3); /* some beyond the row */
        n = sift__ids_sort_unique(ids, n);
        float row[V];
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        for (int others = 0; others < 2; others++) {
            sift_candidate dense[V], sparse[V];
            for (int32_t i = 0; i < V; i++) {
                dense[i].id = i;
                dense[i].logit = row[i];
            }
            size_t m = 0;
            for (int32_t i = V - 1; i >= 0; i -= 2) /* every other id, reversed */
                sparse[m++] = dense[i];
            sift__arr a = {dense, V, V, SIFT__ORDER_ID, 1};
            sift__arr b = {sparse, m, V, SIFT__ORDER_NONE, 0};
            if (others) {
                sift__ban_others(&a, ids, n);
                sift__ban_others(&b, ids, n);
            } else {
                sift__ban_ids(&a, ids, n);
                sift__ban_ids(&b, ids, n);
            }
            ck_assert_uint_eq(a.n, V);
            ck_assert_uint_eq(b.n, m);
            for (int32_t i = 0; i < V; i++) {
                int listed = sift__ids_has(ids, n, i);
                float want = listed != others ? -INFINITY : row[i];
                ck_assert(memcmp(&dense[i].logit, &want, sizeof want) == 0);
            }
            for (size_t i = 0; i < m; i++) {
                int32_t id = sparse[i].id;
                float want = sift__ids_has(ids, n, id) != others ? -INFINITY : row[id];
                ck_assert(memcmp(&sparse[i].logit, &want, sizeof want) == 0);
            }
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ban");
    TCase *tc = tcase_create("helpers");
    tcase_add_test(tc, test_sort_unique_gives_the_distinct_ids_in_ascending_order);
    tcase_add_test(tc, test_parse_ids_reads_separated_decimal_ids_and_refuses_the_rest);
    tcase_add_test(tc, test_ban_ids_and_ban_others_touch_exactly_the_listed_ids_on_rows_and_sets);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

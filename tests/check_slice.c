/*
 * check_slice.c - the analyzer, slices, the certificate and the row hook.
 *
 * The property suite at the end is the proof of the exactness promise:
 * random chains of every sampler in random order, random histories, random
 * and adversarial rows; every step is sampled by the naive oracle on the
 * whole row and by sift from slices of several sizes (the static k, the
 * dynamic k, smaller ones), with the row hook set and without it; token,
 * RNG state and the state after accept must agree bitwise, and a slice
 * without a hook may only answer SIFT_E_NEED_ROW, with nothing changed.
 * Each property (the main one, the grammar modes, the probability
 * cutoffs) runs twice: on canonical slices (the slicer's Prefix(k) with
 * SIFT_SLICE_CANONICAL) and on slices as a device top-k makes them
 * (tu_devicify: the prefix shuffled, the tokens tied at its smallest
 * logit re-chosen at random among the row's tied ids, the extras
 * rebuilt, no flag), where the row may be asked for more often but the
 * token, RNG and state never differ.
 *
 * SIFT_SLICE_CASES (environment) sets the number of chains of each main
 * property test (default 17000, about 314,000 slice samples compared);
 * the grammar runs take a 40th of it each and the cutoff runs a 16th.
 * SIFT_SLICE_SEED picks another stream of chains for the main and cutoff
 * runs (default 2024); SIFT_SLICE_MIN_SAMPLES a number of slice samples
 * the two main property tests must each compare: they draw chains past
 * SIFT_SLICE_CASES until they have (make check-long sets 10,000,000).
 * The device-form runs are the TCase "device": CK_RUN_CASE=device runs
 * them alone.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void assert_error(const sift_error *e, sift_status code, int64_t index)
{
    ck_assert_int_eq(e->code, code);
    ck_assert_msg(e->message[0] != 0, "empty message");
    if (index != -2)
        ck_assert_msg(e->index == index, "index %lld, expected %lld (%s)", (long long)e->index,
                      (long long)index, e->message);
}

/* The hook of these tests: copies a row, or fails, or re-enters. */
typedef struct hook_ctx {
    const float *row;
    int32_t V;
    int calls;
    int fail;          /* return this if non-zero */
    sift_chain *chain; /* re-enter this chain if set */
    sift_status inner; /* what the re-entrant call got */
    int32_t poison;    /* change row[poison] if >= 0 */
    int32_t raise;     /* raise row[raise] to the top if >= 0 */
} hook_ctx;

static int hook(void *user, float *row, int32_t V)
{
    hook_ctx *h = user;
    h->calls++;
    if (h->chain) {
        int32_t t;
        h->inner = sift_chain_sample(h->chain, h->row, h->V, &t, NULL);
    }
    if (h->fail)
        return h->fail;
    memcpy(row, h->row, (size_t)V * sizeof *row);
    if (h->poison >= 0)
        row[h->poison] += 1.0f;
    if (h->raise >= 0)
        row[h->raise] = 1e30f;
    return 0;
}

static hook_ctx hook_for(const float *row, int32_t V)
{
    hook_ctx h;
    memset(&h, 0, sizeof h);
    h.row = row;
    h.V = V;
    h.poison = -1;
    h.raise = -1;
    return h;
}

/* ------------------------------------------------------------------ */
/* Expected plans (issue table; docs/analyzer.md explains each)        */
/* ------------------------------------------------------------------ */

static void expect_plan(sift_chain *c, int32_t k, sift_guarantee g, int32_t max_extras)
{
    sift_plan p = {.struct_size = sizeof(sift_plan)};
    sift_plan_stage st[16];
    for (size_t i = 0; i < 16; i++)
        st[i].struct_size = sizeof st[i];
    ck_assert_int_eq(sift_chain_plan(c, &p, st, NULL), SIFT_OK);
    ck_assert_msg(p.k == k && p.guarantee == g && p.max_extras == max_extras,
                  "plan k %d (%s) extras %d, expected k %d (%s) extras %d: %s", (int)p.k,
                  sift_guarantee_str(p.guarantee), (int)p.max_extras, (int)k, sift_guarantee_str(g),
                  (int)max_extras, p.why);
    ck_assert(p.why[0] != 0);
    ck_assert_int_eq(p.recommended_k, k);
    for (size_t i = 0; i < sift_chain_n_stages(c); i++)
        ck_assert_msg(st[i].why[0] != 0, "stage %zu has no explanation", i);
}

START_TEST(test_plan_of_the_production_chain_is_84_exact)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 20, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_p(c, 0.95f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_min_p(c, 0.05f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.8f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    expect_plan(c, 84, SIFT_GUARANTEE_EXACT, 0);
    sift_plan p = {.struct_size = sizeof(sift_plan)};
    ck_assert_int_eq(sift_chain_plan(c, &p, NULL, NULL), SIFT_OK);
    ck_assert_msg(strstr(p.why, "top_k 20 + penalties 64 = 84") != NULL, "%s", p.why);
    ck_assert_int_eq(p.decided_at, 1);
    /* dynamic: only the distinct tokens of the window count */
    ck_assert_int_eq(sift_chain_next_k(c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(p.k, 20);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(sift_chain_accept(c, i % 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_next_k(c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(p.k, 23);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_plan_of_top_k_top_p_temp_dist_is_40_exact)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_p(c, 0.95f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.8f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    expect_plan(c, 40, SIFT_GUARANTEE_EXACT, 0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_plan_of_greedy_is_1_and_with_penalties_65)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    expect_plan(c, 1, SIFT_GUARANTEE_EXACT, 0);
    sift_chain_free(c);
    c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    expect_plan(c, 65, SIFT_GUARANTEE_EXACT, 0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_plan_counts_negative_biases_and_gathers_positive_ones_as_extras)
{
    sift_chain *c = tu_chain_new(1, NULL);
    sift_bias neg[3] = {{5, -1.0f}, {9, -INFINITY}, {700, -3.0f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, neg, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 10, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    expect_plan(c, 13, SIFT_GUARANTEE_EXACT, 0);
    sift_chain_free(c);

    c = tu_chain_new(1, NULL);
    sift_bias pos[2] = {{700, 2.0f}, {31, 5.0f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, pos, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 10, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    expect_plan(c, 10, SIFT_GUARANTEE_EXACT, 2);
    int32_t ids[4];
    size_t n = 0;
    ck_assert_int_eq(sift_chain_extras(c, ids, 4, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 31);
    ck_assert_int_eq(ids[1], 700);
    sift_error err;
    ck_assert_int_eq(sift_chain_extras(c, ids, 1, &n, &err), SIFT_E_LIMIT);
    ck_assert_uint_eq(n, 2);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_plan_is_whole_row_when_a_whole_stage_comes_first)
{
    for (int variant = 0; variant < 6; variant++) {
        sift_chain *c = tu_chain_new(1, NULL);
        switch (variant) {
        case 0:
            /* (top_p first is certified by the tail mass: check_tail) */
            ck_assert_int_eq(sift_chain_add_eta(c, 2e-3f, 1, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
            break;
        case 1: /* (mirostat alone is certified: check_tail) */
            ck_assert_int_eq(sift_chain_add_top_n_sigma(c, 1.0f, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
            break;
        case 2:
            ck_assert_int_eq(sift_chain_add_typical(c, 0.9f, 1, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
            break;
        case 3:
            /* (xtc first is certified by the tail mass: check_tail; the
             * id-order draw interleaves absent tokens and is not) */
            ck_assert_int_eq(sift_chain_add_dist_id_order(c, NULL), SIFT_OK);
            break;
        case 4:
            ck_assert_int_eq(sift_chain_add_top_n_sigma(c, 1.0f, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
            break;
        default:
            ck_assert_int_eq(sift_chain_add_temp_ext(c, 0.8f, 0.5f, 1.0f, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
            break;
        }
        expect_plan(c, 0, SIFT_GUARANTEE_WHOLE_ROW, 0);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_plan_of_min_p_first_is_certified_with_a_recommended_k)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_min_p(c, 0.05f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.8f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    expect_plan(c, 64, SIFT_GUARANTEE_CERTIFIED, 0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_plan_of_temperature_before_top_k_adds_a_margin_and_is_certified)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.7f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    expect_plan(c, 48, SIFT_GUARANTEE_CERTIFIED, 0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_batch_k_is_the_largest_or_zero)
{
    sift_chain *a = tu_chain_new(1, NULL), *b = tu_chain_new(2, NULL), *w = tu_chain_new(3, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(a, 40, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(a, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(b, NULL), SIFT_OK);
    /* a whole-row chain (dist alone is certified by the tail mass; the
     * id-order draw is not) */
    ck_assert_int_eq(sift_chain_add_dist_id_order(w, NULL), SIFT_OK);
    const sift_chain *two[2] = {a, b};
    const sift_chain *three[3] = {a, w, b};
    int32_t k = -1;
    ck_assert_int_eq(sift_chains_next_k(two, 2, &k, NULL), SIFT_OK);
    ck_assert_int_eq(k, 40);
    ck_assert_int_eq(sift_chains_next_k(three, 3, &k, NULL), SIFT_OK);
    ck_assert_int_eq(k, 0);
    sift_error err;
    const sift_chain *bad[2] = {a, NULL};
    ck_assert_int_eq(sift_chains_next_k(bad, 2, &k, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, 1);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_chain_free(w);
}
END_TEST

START_TEST(test_batch_k_per_slot_gives_each_k_and_lists_the_whole_row_slots)
{
    sift_chain *a = tu_chain_new(1, NULL), *b = tu_chain_new(2, NULL), *w = tu_chain_new(3, NULL),
               *w2 = tu_chain_new(4, NULL);
    sift_chain *pen = tu_chain_new(5, NULL), *mp = tu_chain_new(6, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(a, 40, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(a, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(b, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist_id_order(w, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp(w2, 0.7f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist_id_order(w2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(pen, 64, 1.1f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(pen, 20, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(pen, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_min_p(mp, 0.05f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(mp, NULL), SIFT_OK);
    /* three distinct tokens in the penalty window: dynamic k 20 + 3 */
    const int32_t hist[4] = {7, 9, 7, 11};
    for (size_t i = 0; i < N(hist); i++)
        ck_assert_int_eq(sift_chain_accept(pen, hist[i], NULL), SIFT_OK);
    const sift_chain *slots[5] = {a, w, b, pen, w2};
    int32_t k_each[5] = {-1, -1, -1, -1, -1};
    size_t whole[5] = {99, 99, 99, 99, 99};
    sift_batch_k bk = {.struct_size = sizeof bk};
    ck_assert_int_eq(sift_chains_next_k_batch(slots, 5, k_each, whole, &bk, NULL), SIFT_OK);
    const int32_t want_k[5] = {40, 0, 1, 23, 0};
    for (size_t i = 0; i < 5; i++) {
        sift_plan p = {.struct_size = sizeof p};
        ck_assert_int_eq(sift_chain_next_k(slots[i], &p, NULL), SIFT_OK);
        ck_assert_int_eq(k_each[i], p.k); /* the slot's own dynamic plan */
        ck_assert_int_eq(k_each[i], want_k[i]);
    }
    ck_assert_int_eq(bk.k, 40);
    ck_assert_uint_eq(bk.n_slice, 3);
    ck_assert_uint_eq(bk.n_whole, 2);
    ck_assert_uint_eq(whole[0], 1);
    ck_assert_uint_eq(whole[1], 4);
    ck_assert_uint_eq(whole[2], 99); /* past n_whole: untouched */
    ck_assert_int_eq(bk.guarantee, SIFT_GUARANTEE_EXACT);
    ck_assert_int_eq(bk.max_extras, 0);
    /* the old call is all or nothing on the same batch */
    int32_t k_old = -1;
    ck_assert_int_eq(sift_chains_next_k(slots, 5, &k_old, NULL), SIFT_OK);
    ck_assert_int_eq(k_old, 0);
    /* a certified slot makes the batch certified; the arrays are optional */
    const sift_chain *two[2] = {mp, a};
    ck_assert_int_eq(sift_chains_next_k_batch(two, 2, NULL, NULL, &bk, NULL), SIFT_OK);
    ck_assert_int_eq(bk.k, 64);
    ck_assert_int_eq(bk.guarantee, SIFT_GUARANTEE_CERTIFIED);
    ck_assert_uint_eq(bk.n_whole, 0);
    /* only whole-row slots, and the empty batch */
    const sift_chain *ws[2] = {w, w2};
    ck_assert_int_eq(sift_chains_next_k_batch(ws, 2, k_each, whole, &bk, NULL), SIFT_OK);
    ck_assert_int_eq(bk.k, 0);
    ck_assert_uint_eq(bk.n_whole, 2);
    ck_assert_int_eq(bk.guarantee, SIFT_GUARANTEE_WHOLE_ROW);
    ck_assert_int_eq(sift_chains_next_k_batch(NULL, 0, NULL, NULL, &bk, NULL), SIFT_OK);
    ck_assert_int_eq(bk.k, 0);
    ck_assert_uint_eq(bk.n_slice + bk.n_whole, 0);
    /* errors write nothing */
    sift_error err;
    const sift_chain *bad[3] = {a, w, NULL};
    for (size_t i = 0; i < 5; i++)
        k_each[i] = -1, whole[i] = 99;
    sift_batch_k keep = {.struct_size = sizeof keep, .k = -5};
    ck_assert_int_eq(sift_chains_next_k_batch(bad, 3, k_each, whole, &keep, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, 2);
    ck_assert_int_eq(k_each[0], -1);
    ck_assert_uint_eq(whole[0], 99);
    ck_assert_int_eq(keep.k, -5);
    ck_assert_int_eq(sift_chains_next_k_batch(slots, 5, k_each, whole, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chains_next_k_batch(NULL, 2, k_each, whole, &keep, &err), SIFT_E_ARG);
    keep.struct_size = 0;
    ck_assert_int_eq(sift_chains_next_k_batch(slots, 5, k_each, whole, &keep, &err), SIFT_E_ARG);
    ck_assert_msg(strstr(err.message, "sift_batch_k") != NULL, "%s", err.message);
    keep.struct_size = sizeof keep + 1;
    ck_assert_int_eq(sift_chains_next_k_batch(slots, 5, k_each, whole, &keep, &err), SIFT_E_ARG);
    ck_assert_int_eq(k_each[0], -1);
    ck_assert_int_eq(keep.k, -5);
    /* an older, smaller struct: only its fields are written */
    unsigned char buf[sizeof(sift_batch_k) + 8];
    memset(buf, 0xab, sizeof buf);
    uint32_t old = (uint32_t)(offsetof(sift_batch_k, k) + sizeof(int32_t));
    memcpy(buf, &old, sizeof old);
    ck_assert_int_eq(
        sift_chains_next_k_batch(slots, 5, NULL, NULL, (sift_batch_k *)(void *)buf, NULL), SIFT_OK);
    int32_t got_k;
    memcpy(&got_k, buf + offsetof(sift_batch_k, k), sizeof got_k);
    ck_assert_int_eq(got_k, 40);
    for (size_t i = old; i < sizeof buf; i++)
        ck_assert_uint_eq(buf[i], 0xab);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_chain_free(w);
    sift_chain_free(w2);
    sift_chain_free(pen);
    sift_chain_free(mp);
}
END_TEST

/* The batch's one k serves every slice slot: each slot's slice of
 * batch.k decides its step without the row and gives the whole row's
 * token, while the whole-row slots are sampled from their rows. */
START_TEST(test_one_batch_k_serves_every_slice_slot_without_the_row)
{
    enum { SLOTS = 6, V = 3000, STEPS = 40 };
    sift_chain *slot[SLOTS], *ref[SLOTS];
    for (int s = 0; s < SLOTS; s++) {
        slot[s] = tu_chain_new((uint64_t)s + 100, NULL);
        if (s % 3 == 2) { /* a whole-row slot */
            ck_assert_int_eq(sift_chain_add_temp(slot[s], 0.9f, NULL), SIFT_OK);
        } else {
            ck_assert_int_eq(sift_chain_add_penalties(slot[s], 8 * (s + 1), 1.3f, 0.0f, 0.0f, NULL),
                             SIFT_OK);
            ck_assert_int_eq(sift_chain_add_top_k(slot[s], 5 + 7 * s, NULL), SIFT_OK);
        }
        /* the whole-row slots draw in id order (dist after temperature
         * would be certified by the tail mass) */
        ck_assert_int_eq(s % 3 == 2 ? sift_chain_add_dist_id_order(slot[s], NULL)
                                    : sift_chain_add_dist(slot[s], NULL),
                         SIFT_OK);
        ck_assert_int_eq(sift_chain_clone(slot[s], &ref[s], NULL), SIFT_OK);
    }
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    float *row = malloc(V * sizeof *row);
    tu_rng r = {77};
    long sliced = 0;
    for (int t = 0; t < STEPS; t++) {
        int32_t k_each[SLOTS];
        size_t whole[SLOTS];
        sift_batch_k bk = {.struct_size = sizeof bk};
        ck_assert_int_eq(sift_chains_next_k_batch((const sift_chain *const *)slot, SLOTS, k_each,
                                                  whole, &bk, NULL),
                         SIFT_OK);
        ck_assert_uint_eq(bk.n_whole, SLOTS / 3);
        ck_assert_int_gt(bk.k, 0);
        for (int s = 0, q = 0; s < SLOTS; s++) {
            tu_row(&r, row, V, t % 2 ? TU_ROW_BF16 : TU_ROW_PEAKED);
            int32_t tr, ts;
            ck_assert_int_eq(sift_chain_sample(ref[s], row, V, &tr, NULL), SIFT_OK);
            if (q < (int)bk.n_whole && whole[q] == (size_t)s) {
                q++;
                ck_assert_int_eq(k_each[s], 0);
                ck_assert_int_eq(sift_chain_sample(slot[s], row, V, &ts, NULL), SIFT_OK);
            } else {
                ck_assert_int_le(k_each[s], bk.k);
                sift_slice slice;
                ck_assert_int_eq(sift_slicer_build(sl, row, V, bk.k, NULL, 0, &slice, NULL),
                                 SIFT_OK);
                sift_error err;
                ck_assert_msg(sift_chain_sample_slice(slot[s], &slice, &ts, &err) == SIFT_OK,
                              "slot %d step %d: %s", s, t, err.message);
                sliced++;
            }
            ck_assert_int_eq(ts, tr);
            ck_assert_int_eq(sift_chain_accept(slot[s], ts, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(ref[s], tr, NULL), SIFT_OK);
        }
    }
    ck_assert_int_eq(sliced, STEPS * (SLOTS - SLOTS / 3));
    free(row);
    sift_slicer_free(sl);
    for (int s = 0; s < SLOTS; s++) {
        sift_chain_free(slot[s]);
        sift_chain_free(ref[s]);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Slice validation (BAD_INPUTS C-*)                                   */
/* ------------------------------------------------------------------ */

static sift_chain *top_k_chain(int32_t k)
{
    sift_chain *c = tu_chain_new(7, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, k, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

START_TEST(test_slice_validation_names_each_problem)
{
    sift_chain *c = top_k_chain(2);
    sift_candidate p[4] = {{3, 5.0f}, {1, 4.0f}, {2, 4.0f}, {0, 1.0f}};
    sift_slice s = {10, 4, p, 0, NULL, 0, 0};
    sift_error err;
    int32_t t;
    uint64_t before[4], after[4];
    sift__chain_rng_state(c, before);

    s.n_prefix = 0; /* C-01 */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE);
    s.n_prefix = 11; /* C-05 */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE);
    ck_assert(strstr(err.message, "k = 11 > V = 10") != NULL);
    s.n_prefix = 4;
    p[2].id = 3; /* C-02 */
    p[2].logit = 4.0f;
    sift_candidate dup[4] = {{3, 5.0f}, {1, 4.0f}, {3, 3.0f}, {0, 1.0f}};
    s.prefix = dup;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE);
    assert_error(&err, SIFT_E_SLICE, 3);
    ck_assert_msg(strstr(err.message, "positions 0 and 2") != NULL, "%s", err.message);
    sift_candidate out[4] = {{3, 5.0f}, {1, 4.0f}, {12, 3.0f}, {0, 1.0f}}; /* C-03 */
    s.prefix = out;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE);
    assert_error(&err, SIFT_E_SLICE, 2);
    sift_candidate order[4] = {{3, 5.0f}, {2, 4.0f}, {1, 4.0f}, {0, 1.0f}}; /* C-04 tie */
    s.prefix = order;
    s.flags = SIFT_SLICE_CANONICAL; /* only a canonical prefix has an order to keep */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE);
    assert_error(&err, SIFT_E_SLICE, 2);
    ck_assert_msg(strstr(err.message, "positions 1/2") != NULL, "%s", err.message);
    s.flags = 0; /* a device top-k set may come in any order */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    sift__chain_rng_state(c, before); /* that sample drew; the failures below must not */
    s.flags = 4;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE);
    ck_assert_msg(strstr(err.message, "unknown bits") != NULL, "%s", err.message);
    s.flags = 0;
    sift_candidate nan[4] = {{3, 5.0f}, {1, NAN}, {2, 4.0f}, {0, 1.0f}}; /* C-08 */
    s.prefix = nan;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_ROW_VALUE);
    assert_error(&err, SIFT_E_ROW_VALUE, 1);
    sift_candidate inf[4] = {{3, INFINITY}, {1, 4.0f}, {2, 4.0f}, {0, 1.0f}};
    s.prefix = inf;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_ROW_VALUE);
    assert_error(&err, SIFT_E_ROW_VALUE, 3);
    /* C-06: an extra also in the prefix; an extra that ranks before the
     * prefix's last token */
    sift_candidate good[3] = {{3, 5.0f}, {1, 4.0f}, {2, 4.0f}};
    sift_candidate ex[1] = {{1, 4.0f}};
    sift_slice se = {10, 3, good, 1, ex, 0, 0};
    ck_assert_int_eq(sift_chain_sample_slice(c, &se, &t, &err), SIFT_E_SLICE);
    ck_assert_msg(strstr(err.message, "already in the prefix") != NULL, "%s", err.message);
    ex[0].id = 7;
    ex[0].logit = 4.5f;
    ck_assert_int_eq(sift_chain_sample_slice(c, &se, &t, &err), SIFT_E_SLICE);
    assert_error(&err, SIFT_E_SLICE, 7);
    sift_slice nulls = {10, 3, NULL, 0, NULL, 0, 0};
    ck_assert_int_eq(sift_chain_sample_slice(c, &nulls, &t, &err), SIFT_E_SLICE);
    ck_assert_int_eq(sift_chain_sample_slice(c, NULL, &t, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_sample_slice(c, &se, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_sample_slice(NULL, &se, &t, &err), SIFT_E_ARG);

    /* nothing changed, and a valid slice still works */
    sift__chain_rng_state(c, after);
    ck_assert(memcmp(before, after, sizeof before) == 0);
    s.prefix = good;
    s.n_prefix = 3;
    s.flags = SIFT_SLICE_CANONICAL; /* as a set, the tie at 4 could hide token 0 */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    ck_assert(t == 3 || t == 1);
    sift_chain_free(c);
}
END_TEST

/* A canonical prefix is checked for NaN and +inf through its falling keys
 * (a NaN's key lies above +inf's or below -inf's): every such value is
 * still found, where the keys keep falling around it too. */
START_TEST(test_canonical_slice_validation_finds_nan_and_inf_among_falling_keys)
{
    sift_chain *c = top_k_chain(2);
    sift_error err;
    int32_t t;
    float pnan, nnan;
    uint32_t u = 0x7fc00001u;
    memcpy(&pnan, &u, sizeof u);
    u = 0xffc00001u;
    memcpy(&nnan, &u, sizeof u);
    sift_candidate first_nan[3] = {{3, pnan}, {1, 4.0f}, {2, 1.0f}};
    sift_candidate first_inf[3] = {{3, INFINITY}, {1, 4.0f}, {2, 1.0f}};
    sift_candidate two_nans[3] = {{3, pnan}, {1, pnan}, {2, 1.0f}};
    sift_candidate last_nan[3] = {{3, 5.0f}, {1, -INFINITY}, {2, nnan}};
    sift_candidate mid_nan[4] = {{3, 5.0f}, {0, nnan}, {1, nnan}, {2, nnan}};
    const sift_candidate *bad[] = {first_nan, first_inf, two_nans, last_nan, mid_nan};
    const int32_t n[] = {3, 3, 3, 3, 4};
    const int64_t at[] = {3, 3, 3, 2, 0};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        sift_slice s = {10, n[i], bad[i], 0, NULL, SIFT_SLICE_CANONICAL, 0};
        ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_ROW_VALUE);
        assert_error(&err, SIFT_E_ROW_VALUE, at[i]);
    }
    /* -inf at the end is a value, not an error */
    sift_candidate ok[3] = {{3, 5.0f}, {1, 4.0f}, {2, -INFINITY}};
    sift_slice s = {10, 3, ok, 0, NULL, SIFT_SLICE_CANONICAL, 0};
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_missing_requested_extras_are_an_error)
{
    sift_chain *c = tu_chain_new(3, NULL);
    sift_bias pos[1] = {{8, 3.0f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, pos, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    sift_candidate p[2] = {{3, 5.0f}, {1, 4.0f}};
    sift_slice s = {10, 2, p, 0, NULL, 0, 0};
    sift_error err;
    int32_t t;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE);
    assert_error(&err, SIFT_E_SLICE, 8);
    sift_candidate ex[1] = {{8, 3.0f}}; /* 3 + 3 = 6 > 5: the extra wins */
    s.n_extras = 1;
    s.extras = ex;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    ck_assert_int_eq(t, 8);
    /* the extra is in the prefix: no extras needed */
    sift_candidate p2[2] = {{3, 5.0f}, {8, 4.0f}};
    sift_slice s2 = {10, 2, p2, 0, NULL, 0, 0};
    ck_assert_int_eq(sift_chain_sample_slice(c, &s2, &t, &err), SIFT_OK);
    ck_assert_int_eq(t, 8);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The certificate and the row hook                                    */
/* ------------------------------------------------------------------ */

START_TEST(test_undecidable_slice_without_hook_needs_the_row_and_changes_nothing)
{
    sift_chain *c = top_k_chain(3);
    float row[6] = {1.0f, 4.0f, 4.0f, 5.0f, 0.5f, 2.0f};
    sift_candidate p[2] = {{3, 5.0f}, {1, 4.0f}};
    sift_slice s = {6, 2, p, 0, NULL, 0, 0};
    sift_error err;
    int32_t t = -7;
    uint64_t before[4], after[4];
    sift__chain_rng_state(c, before);
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_NEED_ROW);
    ck_assert_int_eq(t, -7);
    sift__chain_rng_state(c, after);
    ck_assert(memcmp(before, after, sizeof before) == 0);
    /* with the hook: the same token and RNG as the whole row */
    sift_chain *ref = top_k_chain(3);
    int32_t tr;
    ck_assert_int_eq(sift_chain_sample(ref, row, 6, &tr, NULL), SIFT_OK);
    hook_ctx h = hook_for(row, 6);
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    ck_assert_int_eq(h.calls, 1);
    ck_assert_int_eq(t, tr);
    uint64_t r1[4], r2[4];
    sift__chain_rng_state(c, r1);
    sift__chain_rng_state(ref, r2);
    ck_assert(memcmp(r1, r2, sizeof r1) == 0);
    sift_stats st = {.struct_size = sizeof(sift_stats)};
    ck_assert_int_eq(sift_chain_stats(c, &st, NULL), SIFT_OK);
    ck_assert_uint_eq(st.hook_calls, 1);
    ck_assert_uint_eq(st.need_row, 1);
    sift_chain_free(c);
    sift_chain_free(ref);
}
END_TEST

START_TEST(test_hook_failures_and_disagreements_are_hook_errors)
{
    sift_chain *c = top_k_chain(3);
    float row[6] = {1.0f, 4.0f, 4.0f, 5.0f, 0.5f, 2.0f};
    sift_candidate p[2] = {{3, 5.0f}, {1, 4.0f}};
    sift_slice s = {6, 2, p, 0, NULL, 0, 0};
    sift_error err;
    int32_t t;
    uint64_t before[4], after[4];
    sift__chain_rng_state(c, before);
    hook_ctx h = hook_for(row, 6);
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    h.fail = -3; /* C-10 */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_HOOK);
    ck_assert_msg(strstr(err.message, "status -3") != NULL, "%s", err.message);
    h.fail = 0;
    h.poison = 1; /* C-09: a slice token differs */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_HOOK);
    assert_error(&err, SIFT_E_HOOK, 1);
    h.poison = -1;
    h.raise = 5; /* an absent token ranks before the prefix's last */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_HOOK);
    assert_error(&err, SIFT_E_HOOK, 5);
    h.raise = -1;
    h.chain = c; /* C-11: re-entry */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    ck_assert_int_eq(h.inner, SIFT_E_STATE);
    h.chain = NULL;
    sift__chain_rng_state(c, after);
    ck_assert(memcmp(before, after, sizeof before) != 0); /* the last one sampled */
    sift_chain_free(c);
}
END_TEST

START_TEST(test_distribution_on_a_slice_equals_the_whole_row)
{
    tu_rng r = {99};
    for (int rep = 0; rep < 200; rep++) {
        int32_t V = (int32_t)tu_range(&r, 50, 3000);
        float *row = malloc((size_t)V * sizeof *row);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        sift_chain *c = tu_chain_new(5, NULL);
        ck_assert_int_eq(sift_chain_add_penalties(c, 16, 1.3f, 0.1f, 0.0f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(c, 30, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_p(c, 0.9f, 1, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        for (int i = 0; i < 20; i++)
            ck_assert_int_eq(sift_chain_accept(c, (int32_t)tu_range(&r, 0, 40), NULL), SIFT_OK);
        sift_plan p = {.struct_size = sizeof(sift_plan)};
        ck_assert_int_eq(sift_chain_next_k(c, &p, NULL), SIFT_OK);
        sift_slicer *sl;
        ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
        sift_slice s;
        ck_assert_int_eq(sift_slicer_build(sl, row, V, p.k, NULL, 0, &s, NULL), SIFT_OK);
        sift_token_prob a[64], b[64];
        size_t na = 0, nb = 0;
        ck_assert_int_eq(sift_chain_distribution(c, row, V, a, 64, &na, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_distribution_slice(c, &s, b, 64, &nb, NULL), SIFT_OK);
        ck_assert_uint_eq(na, nb);
        for (size_t i = 0; i < (na < 64 ? na : 64); i++)
            ck_assert(a[i].id == b[i].id && a[i].p == b[i].p &&
                      memcmp(&a[i].logit, &b[i].logit, sizeof(float)) == 0);
        sift_slicer_free(sl);
        sift_chain_free(c);
        free(row);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The slice builder                                                   */
/* ------------------------------------------------------------------ */

START_TEST(test_slicer_builds_the_canonical_prefix_with_ties_and_extras)
{
    tu_rng r = {4242};
    for (int rep = 0; rep < 400; rep++) {
        int32_t V = rep < 20 ? (int32_t)tu_range(&r, 1, 8) : tu_rand_V(&r, 70000);
        float *row = malloc((size_t)V * sizeof *row);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        int32_t k = (int32_t)tu_range(&r, 1, V < 300 ? V + 2 : 300);
        or_arr o = {malloc((size_t)V * sizeof(sift_candidate)), (size_t)V, V};
        for (int32_t i = 0; i < V; i++) {
            o.c[i].id = i;
            o.c[i].logit = row[i];
        }
        or_sort(&o);
        int32_t ids[8];
        for (int i = 0; i < 8; i++)
            ids[i] = (int32_t)tu_range(&r, 0, V - 1);
        sift_slicer *sl;
        ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
        sift_slice s;
        ck_assert_int_eq(sift_slicer_build(sl, row, V, k, ids, 8, &s, NULL), SIFT_OK);
        int32_t kk = k < V ? k : V;
        ck_assert_int_eq(s.n_prefix, kk);
        for (int32_t i = 0; i < kk; i++)
            ck_assert(s.prefix[i].id == o.c[i].id &&
                      memcmp(&s.prefix[i].logit, &o.c[i].logit, sizeof(float)) == 0);
        /* extras: exactly the distinct ids ranked after the prefix */
        int expect = 0;
        for (int i = 0; i < 8; i++) {
            int first = 1, inpre = 0;
            for (int j = 0; j < i; j++)
                first &= ids[j] != ids[i];
            for (int32_t j = 0; j < kk; j++)
                inpre |= o.c[j].id == ids[i];
            expect += first && !inpre;
        }
        ck_assert_int_eq(s.n_extras, expect);
        for (int32_t i = 0; i < s.n_extras; i++)
            ck_assert(memcmp(&s.extras[i].logit, &row[s.extras[i].id], sizeof(float)) == 0);
        sift_slicer_free(sl);
        free(o.c);
        free(row);
    }
}
END_TEST

START_TEST(test_slicer_rejects_bad_arguments_and_rows)
{
    sift_slicer *sl = NULL;
    sift_error err;
    ck_assert_int_eq(sift_slicer_new(&sl, 0, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_slicer_new(NULL, 10, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_slicer_new(&sl, 10, NULL, &err), SIFT_OK);
    float row[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    sift_slice s;
    int32_t bad_id = 10;
    ck_assert_int_eq(sift_slicer_build(sl, row, 10, 3, &bad_id, 1, &s, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(sift_slicer_build(sl, row, 11, 3, NULL, 0, &s, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_slicer_build(sl, row, 10, 0, NULL, 0, &s, &err), SIFT_E_ARG);
    row[4] = NAN;
    ck_assert_int_eq(sift_slicer_build(sl, row, 10, 3, NULL, 0, &s, &err), SIFT_E_ROW_VALUE);
    assert_error(&err, SIFT_E_ROW_VALUE, 4);
    for (int i = 0; i < 10; i++)
        row[i] = -INFINITY;
    ck_assert_int_eq(sift_slicer_build(sl, row, 10, 3, NULL, 0, &s, &err), SIFT_E_NO_CANDIDATE);
    sift_slicer_free(sl);
    sift_slicer_free(NULL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The property suite                                                  */
/* ------------------------------------------------------------------ */

static long n_cases(void)
{
    const char *e = getenv("SIFT_SLICE_CASES");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : 17000;
}

/* SIFT_SLICE_SEED (environment) picks another stream of random chains
 * for the main property test, so soaks can be split across runs. */
/* SIFT_SLICE_MIN_SAMPLES (environment): the least number of slice
 * samples a property run compares, 0 = no minimum. */
static long min_samples(void)
{
    const char *e = getenv("SIFT_SLICE_MIN_SAMPLES");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : 0;
}

static uint64_t slice_seed(void)
{
    const char *e = getenv("SIFT_SLICE_SEED");
    return e && *e ? strtoull(e, NULL, 10) : 2024;
}

static const sp_kind mids[] = {SP_TOP_K,       SP_TOP_K_TIES, SP_TOP_P,    SP_MIN_P,
                               SP_TYPICAL,     SP_TEMP,       SP_TEMP_EXT, SP_XTC,
                               SP_TOP_N_SIGMA, SP_PENALTIES,  SP_DRY,      SP_LOGIT_BIAS};
static const sp_kind lows[] = {SP_PENALTIES, SP_DRY, SP_LOGIT_BIAS, SP_TEMP};
static const sp_kind cuts[] = {SP_TOP_K, SP_TOP_K, SP_TOP_K_TIES, SP_MIN_P};
static const sp_kind sels[] = {SP_GREEDY, SP_DIST, SP_DIST_ID, SP_MIROSTAT, SP_MIROSTAT_V2};

/* Half the chains are shaped for slices (lowering, raising and monotone
 * stages, then a truncation), half are anything in any order. */
static void gen_chain(tu_rng *r, sp_chain *spec, int32_t V)
{
    if (tu_unif(r) < 0.6) {
        size_t n_low = (size_t)tu_range(r, 0, 3);
        for (size_t i = 0; i < n_low; i++)
            gen_stage(r, &spec->st[spec->n++], lows[tu_range(r, 0, (int64_t)N(lows) - 1)], V);
        sp_stage *cut = &spec->st[spec->n++];
        gen_stage(r, cut, cuts[tu_range(r, 0, (int64_t)N(cuts) - 1)], V);
        if (cut->kind != SP_MIN_P)
            cut->i0 = (int32_t)tu_range(r, 1, 50);
        size_t n_after = (size_t)tu_range(r, 0, 2);
        for (size_t i = 0; i < n_after; i++)
            gen_stage(r, &spec->st[spec->n++], mids[tu_range(r, 0, (int64_t)N(mids) - 1)], V);
    } else {
        size_t n_mid = (size_t)tu_range(r, 0, 5);
        for (size_t i = 0; i < n_mid; i++)
            gen_stage(r, &spec->st[spec->n++], mids[tu_range(r, 0, (int64_t)N(mids) - 1)], V);
    }
    gen_stage(r, &spec->st[spec->n++], sels[tu_range(r, 0, (int64_t)N(sels) - 1)], V);
}

typedef struct tally {
    long compared, decided, hooked, need_row;
    long static_steps, static_hooks; /* at the static k of EXACT plans */
    long dyn_steps, dyn_hooks;       /* at the dynamic k */
    long small_steps, small_hooks;   /* at a smaller k */
    long cert_steps, cert_hooks;     /* at the static k of CERTIFIED plans */
    long rechosen;                   /* device slices whose tied tokens changed */
} tally;

/* One slice sample of chain c at prefix length k (as a device makes it
 * when dev is set); compares with the oracle's (token, rng) and restores
 * the RNG. Returns 1 if the hook ran. */
static int one_slice(sift_chain *c, sift_slicer *sl, const float *row, int32_t V, int32_t k,
                     int with_hook, sift_status so, int32_t to, const uint64_t ors[4], tally *ty,
                     const char *desc, tu_device_slice *dev, tu_rng *r)
{
    int32_t ids[4096];
    size_t ne = 0;
    sift_error err;
    ck_assert_int_eq(sift_chain_extras(c, ids, N(ids), &ne, &err), SIFT_OK);
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(sl, row, V, k, ids, ne, &s, &err), SIFT_OK);
    if (dev)
        tu_devicify(dev, r, row, V, &s, ids, ne);
    hook_ctx h = hook_for(row, V);
    ck_assert_int_eq(sift_chain_set_row_hook(c, with_hook ? hook : NULL, &h, NULL), SIFT_OK);
    sift__rng saved = c->rng;
    int32_t ts = -1;
    sift_status ss = sift_chain_sample_slice(c, &s, &ts, &err);
    uint64_t rs[4];
    sift__chain_rng_state(c, rs);
    ty->compared++;
    if (ss == SIFT_E_NEED_ROW) {
        ck_assert_msg(!with_hook, "NEED_ROW with a hook\n  %s", desc);
        ck_assert_msg(memcmp(&saved, &c->rng, sizeof saved) == 0, "NEED_ROW moved the RNG\n  %s",
                      desc);
        ty->need_row++;
        return 1;
    }
    ck_assert_msg(ss == so && (ss != SIFT_OK || ts == to) &&
                      (ss != SIFT_OK || memcmp(rs, ors, 4 * sizeof(uint64_t)) == 0),
                  "slice k=%d V=%d hook=%d: sift %d (tok %d: %s) oracle %d (tok %d)\n  %s", (int)k,
                  (int)V, with_hook, (int)ss, (int)ts, ss ? err.message : "", (int)so, (int)to,
                  desc);
    c->rng = saved;
    ty->hooked += h.calls;
    ty->decided += h.calls == 0;
    return h.calls > 0;
}

/* Chains around the probability cutoffs: half with a cutoff as the first
 * truncation after lowering and monotone stages (so the certificate
 * decides), half anything in any order. */
static const sp_kind cutoffs[] = {SP_EPSILON};
static const sp_kind cutoff_mids[] = {SP_EPSILON, SP_ETA,  SP_TOP_K,
                                      SP_MIN_P,   SP_TEMP, SP_PENALTIES};
static const sp_kind cutoff_sels[] = {SP_GREEDY, SP_DIST, SP_DIST_ID, SP_ADAPTIVE_P};

static void gen_cutoff_chain(tu_rng *r, sp_chain *spec, int32_t V)
{
    if (tu_unif(r) < 0.6) {
        size_t n_low = (size_t)tu_range(r, 0, 2);
        for (size_t i = 0; i < n_low; i++)
            gen_stage(r, &spec->st[spec->n++], lows[tu_range(r, 0, (int64_t)N(lows) - 1)], V);
        gen_stage(r, &spec->st[spec->n++], cutoffs[tu_range(r, 0, (int64_t)N(cutoffs) - 1)], V);
    }
    size_t n_mid = (size_t)tu_range(r, 0, 3);
    for (size_t i = 0; i < n_mid; i++)
        gen_stage(r, &spec->st[spec->n++], cutoff_mids[tu_range(r, 0, (int64_t)N(cutoff_mids) - 1)],
                  V);
    gen_stage(r, &spec->st[spec->n++], cutoff_sels[tu_range(r, 0, (int64_t)N(cutoff_sels) - 1)], V);
}

/* Runs `cases` random chains from `gen`, and more until `min` slice
 * samples are compared; returns the number of chains run. */
static long property(uint64_t seed, long cases, long min, tally *ty, int device,
                     void (*gen)(tu_rng *, sp_chain *, int32_t))
{
    tu_rng r = {seed};
    char desc[2048];
    long cs = 0;
    for (; cs < cases || ty->compared < min; cs++) {
        int32_t V = cs % 200 == 0 ? (int32_t)tu_range(&r, 1, 262144)
                                  : (cs % 7 == 0 ? (int32_t)tu_range(&r, 1, 12)
                                                 : (int32_t)tu_range(&r, 100, 4000));
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        gen(&r, &spec, V);
        sift_chain *chain;
        sift_error err;
        sp_describe(&spec, desc, sizeof desc);
        ck_assert_msg(sp_build(&spec, &chain, &err) == SIFT_OK, "build %s: %s", desc, err.message);
        or_chain o;
        or_init(&o, &spec);
        int32_t alpha = V < 12 ? V : 12;
        int n_prompt = (int)tu_range(&r, 0, 40);
        for (int i = 0; i < n_prompt; i++) {
            int32_t t = (int32_t)tu_range(&r, 0, alpha - 1);
            ck_assert_int_eq(sift_chain_accept(chain, t, &err), SIFT_OK);
            or_accept(&o, t);
        }
        sift_plan sp = {.struct_size = sizeof(sift_plan)}, dp = {.struct_size = sizeof(sift_plan)};
        ck_assert_int_eq(sift_chain_plan(chain, &sp, NULL, NULL), SIFT_OK);
        sift_slicer *sl;
        ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
        float *row = malloc((size_t)V * sizeof *row);
        tu_device_slice dv;
        ck_assert(tu_device_init(&dv, V));
        tu_device_slice *dev = device ? &dv : NULL;
        int steps = V > 20000 ? 1 : (int)tu_range(&r, 1, 4);
        for (int step = 0; step < steps; step++) {
            tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
            ck_assert_int_eq(sift_chain_next_k(chain, &dp, NULL), SIFT_OK);
            ck_assert_msg(dp.k <= sp.k && (dp.k == 0) == (sp.k == 0),
                          "dynamic k %d vs static %d\n  %s", (int)dp.k, (int)sp.k, desc);
            /* the oracle's step (it advances its own RNG) */
            int32_t to = -1;
            sift_status so = or_sample(&o, row, V, &to);
            uint64_t ors[4];
            memcpy(ors, o.rng.s, sizeof ors);
            /* the static k, the dynamic k, a smaller k, and the whole row
             * as a slice (complete from the start) */
            int32_t ks[4] = {sp.k, dp.k, 0, V};
            ks[2] = (int32_t)tu_range(&r, 1, sp.k > 1 ? sp.k - 1 : 16);
            for (int v = 0; v < 4; v++) {
                int32_t k = ks[v];
                if (k <= 0)
                    continue;
                int hooked = one_slice(chain, sl, row, V, k, 1, so, to, ors, ty, desc, dev, &r);
                one_slice(chain, sl, row, V, k, 0, so, to, ors, ty, desc, dev, &r);
                if (v == 3) { /* the whole row as a slice never needs the hook */
                    ck_assert_msg(!hooked, "k = V needed the row\n  %s", desc);
                    continue;
                }
                long *steps_of[3] = {&ty->static_steps, &ty->dyn_steps, &ty->small_steps};
                long *hooks_of[3] = {&ty->static_hooks, &ty->dyn_hooks, &ty->small_hooks};
                if (so != SIFT_OK)
                    continue; /* errors are reported from the whole row */
                if (v == 0 && sp.guarantee == SIFT_GUARANTEE_CERTIFIED) {
                    ty->cert_steps++;
                    ty->cert_hooks += hooked;
                }
                if (v < 2 && sp.guarantee != SIFT_GUARANTEE_EXACT)
                    continue;
                (*steps_of[v])++;
                *hooks_of[v] += hooked;
                /* EXACT promises no row for a canonical prefix; a device's
                 * set of k may need it where ties reach its smallest logit */
                if (v < 2 && !device)
                    ck_assert_msg(!hooked, "EXACT plan k=%d needed the row\n  %s", (int)k, desc);
            }
            /* the whole-row step, for the state after accept */
            int32_t ts = -1;
            sift_status ss = sift_chain_sample(chain, row, V, &ts, &err);
            ck_assert_msg(ss == so && (ss || ts == to), "row path\n  %s", desc);
            if (ss != SIFT_OK)
                break;
            int32_t acc = tu_unif(&r) < 0.8 ? ts : (int32_t)tu_range(&r, 0, alpha - 1);
            ck_assert_int_eq(sift_chain_accept(chain, acc, &err), SIFT_OK);
            or_accept(&o, acc);
        }
        ty->rechosen += dv.rechosen;
        tu_device_free(&dv);
        free(row);
        sift_slicer_free(sl);
        or_free(&o);
        sift_chain_free(chain);
    }
    return cs;
}

START_TEST(test_slices_agree_with_the_oracle_bitwise_or_ask_for_the_row)
{
    tally ty;
    memset(&ty, 0, sizeof ty);
    long cases = n_cases(), min = min_samples();
    long chains = property(slice_seed(), cases, min, &ty, 0, gen_chain);
    fprintf(stderr,
            "slice: %ld chains, %ld slice samples compared, 0 mismatches; decided on the slice "
            "%ld, hook calls %ld, need_row %ld\n"
            "slice: hook rate at the static k of exact plans %ld/%ld, at the dynamic k %ld/%ld, "
            "at a smaller k %ld/%ld; at the static k of certified plans %ld/%ld\n",
            chains, ty.compared, ty.decided, ty.hooked, ty.need_row, ty.static_hooks,
            ty.static_steps, ty.dyn_hooks, ty.dyn_steps, ty.small_hooks, ty.small_steps,
            ty.cert_hooks, ty.cert_steps);
    /* A hook call at the static or dynamic k of an EXACT plan stops the test
     * inside one_slice; here: every part of the property was exercised (the
     * EXACT plans at both k, slices decided without the row, and the hook
     * at a smaller k). */
    ck_assert_int_ge(ty.compared, cases);
    ck_assert_int_ge(ty.compared, min);
    ck_assert(ty.static_steps > 0);
    ck_assert(ty.dyn_steps > 0);
    ck_assert(ty.decided > 0);
    ck_assert(ty.small_hooks > 0); /* the hook is exercised */
}
END_TEST

/* The same property on slices as device kernels make them (torch.topk,
 * CUB, FlashInfer promise no tie order): the prefix shuffled and the
 * tokens tied at its smallest logit re-chosen among the row's tied ids.
 * Token, RNG and state equal the oracle's, or the row is asked for. */
START_TEST(test_device_slices_in_any_order_and_tie_choice_agree_with_the_oracle_or_ask)
{
    tally ty;
    memset(&ty, 0, sizeof ty);
    long cases = n_cases(), min = min_samples();
    long chains = property(slice_seed() ^ 0x7469657300000000ull, cases, min, &ty, 1, gen_chain);
    fprintf(stderr,
            "slice (device order and ties): %ld chains, %ld slice samples compared, 0 "
            "mismatches; decided %ld, hook calls %ld, need_row %ld; tied tokens re-chosen in %ld "
            "slices; hook rate at the static k of exact plans %ld/%ld, at the dynamic k %ld/%ld\n",
            chains, ty.compared, ty.decided, ty.hooked, ty.need_row, ty.rechosen, ty.static_hooks,
            ty.static_steps, ty.dyn_hooks, ty.dyn_steps);
    ck_assert_int_ge(ty.compared, cases);
    ck_assert_int_ge(ty.compared, min);
    ck_assert(ty.decided > 0);
    ck_assert(ty.hooked > 0);
    ck_assert(ty.rechosen > 0); /* the ties were really re-chosen */
}
END_TEST

/* ------------------------------------------------------------------ */
/* Grammars in the property suite: constrain and check modes           */
/* ------------------------------------------------------------------ */

static const char arith[] = "root ::= expr\n"
                            "expr ::= term ( ws [-+] ws term )*\n"
                            "term ::= factor ( ws [*/] ws factor )*\n"
                            "factor ::= \"-\"? ( [0-9]+ | \"(\" ws expr ws \")\" )\n"
                            "ws ::= \" \"?\n";

/* Pieces for a synthetic vocabulary: useful ones, invalid ones, an empty
 * piece, a split UTF-8 sequence; the last token is <eos> (EOG). */
static const char *const pieces_pool[] = {"0",  "1", "2",        "7",    "12", "345", " ",  "+",
                                          "-",  "*", "/",        "(",    ")",  " + ", "(1", "2)",
                                          "ab", "",  "\xe2\x82", "\xac", "9 ", " *",  ")(", "x"};

/* A vocabulary of pieces pc[0 .. V-1) plus "<eos>" (EOG) as token V-1;
 * frees pc and len. */
static sift_vocab *vocab_with_eos(const char **pc, size_t *len, int32_t V)
{
    pc[V - 1] = "<eos>";
    len[V - 1] = 5;
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, V, pc, len, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, V - 1, SIFT_TOKEN_EOG, NULL), SIFT_OK);
    free(pc);
    free(len);
    return v;
}

static sift_vocab *arith_vocab(tu_rng *r, int32_t V)
{
    const char **pc = malloc((size_t)V * sizeof *pc);
    size_t *len = malloc((size_t)V * sizeof *len);
    for (int32_t i = 0; i < V - 1; i++) {
        pc[i] =
            pieces_pool[i < (int32_t)N(pieces_pool) ? i
                                                    : tu_range(r, 0, (int64_t)N(pieces_pool) - 1)];
        len[i] = strlen(pc[i]);
    }
    return vocab_with_eos(pc, len, V);
}

static sift_grammar *arith_grammar(const sift_vocab *v)
{
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_msg(sift_grammar_new(&g, arith, strlen(arith), v, NULL, &err) == SIFT_OK, "%s",
                  err.message);
    return g;
}

/* The oracle's whole-row ban: one accepts_token per id, no trie. Returns
 * 0 when no finite logit is left. */
static int naive_ban(sift_grammar *g, float *row, int32_t V)
{
    int any = 0;
    for (int32_t i = 0; i < V; i++) {
        int ok = 0;
        ck_assert_int_eq(sift_grammar_accepts_token(g, i, &ok, NULL), SIFT_OK);
        if (!ok)
            row[i] = -INFINITY;
        any |= row[i] > -INFINITY;
    }
    return any;
}

/* The oracle's step under a grammar (mode 0 constrain, 1 check). */
static sift_status oracle_grammar_step(or_chain *o, sift_grammar *g, int mode, const float *row,
                                       float *tmp, int32_t V, int32_t *to)
{
    memcpy(tmp, row, (size_t)V * sizeof *tmp);
    if (mode == 0) {
        if (!naive_ban(g, tmp, V))
            return SIFT_E_GRAMMAR_DEAD;
        return or_sample(o, tmp, V, to);
    }
    sift_status so = or_sample(o, row, V, to);
    if (so != SIFT_OK)
        return so;
    int ok = 0;
    ck_assert_int_eq(sift_grammar_accepts_token(g, *to, &ok, NULL), SIFT_OK);
    if (ok)
        return SIFT_OK;
    if (!naive_ban(g, tmp, V))
        return SIFT_E_GRAMMAR_DEAD;
    return or_sample(o, tmp, V, to);
}

typedef struct grammar_tally {
    long compared, hooks, need_row, resampled;
    long rechosen; /* device slices whose tied tokens changed */
} grammar_tally;

/* Runs `cases` random chains under the arithmetic grammar, half in
 * constrain mode and half in check mode; every step is sampled by the
 * oracle on the whole row and by sift on slices (as a device makes them
 * when `device` is set: shuffled, the boundary ties re-chosen, no
 * canonical flag) at the dynamic k, a small k and k = V, with the hook
 * and without, and on the whole row. */
static void grammar_property(uint64_t seed, long cases, int device, grammar_tally *ty)
{
    tu_rng r = {seed};
    char desc[2048];
    for (long cs = 0; cs < cases; cs++) {
        int mode = (int)(cs & 1);
        int32_t V = (int32_t)tu_range(&r, 30, 1500);
        sift_vocab *v = arith_vocab(&r, V);
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        gen_chain(&r, &spec, V);
        sp_describe(&spec, desc, sizeof desc);
        sift_chain_params p;
        sift_chain_params_init(&p);
        p.seed = spec.seed;
        sift_chain *c = NULL;
        sift_error err;
        ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
        if (mode == 0)
            ck_assert_int_eq(sift_chain_add_grammar(c, arith_grammar(v), &err), SIFT_OK);
        else
            ck_assert_int_eq(sift_chain_set_check_grammar(c, arith_grammar(v), &err), SIFT_OK);
        for (size_t i = 0; i < spec.n; i++)
            ck_assert_msg(sp_add(c, &spec.st[i], &err) == SIFT_OK, "%s: %s", desc, err.message);
        sift_grammar *g = arith_grammar(v);
        or_chain o;
        or_init(&o, &spec);
        sift_slicer *sl;
        ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
        float *row = malloc((size_t)V * sizeof *row), *tmp = malloc((size_t)V * sizeof *tmp);
        tu_device_slice dv;
        ck_assert(tu_device_init(&dv, V));
        for (int step = 0; step < 6; step++) {
            tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
            int32_t to = -1;
            sift_status so = oracle_grammar_step(&o, g, mode, row, tmp, V, &to);
            uint64_t ors[4];
            memcpy(ors, o.rng.s, sizeof ors);
            sift_plan dp = {.struct_size = sizeof(sift_plan)};
            ck_assert_int_eq(sift_chain_next_k(c, &dp, NULL), SIFT_OK);
            int32_t ks[3] = {dp.k > 0 ? dp.k : 0, (int32_t)tu_range(&r, 1, 8), V};
            for (int vi = 0; vi < 3; vi++) {
                if (ks[vi] <= 0)
                    continue;
                for (int with_hook = 1; with_hook >= 0; with_hook--) {
                    int32_t ids[4096];
                    size_t ne = 0;
                    ck_assert_int_eq(sift_chain_extras(c, ids, N(ids), &ne, &err), SIFT_OK);
                    sift_slice s;
                    ck_assert_int_eq(sift_slicer_build(sl, row, V, ks[vi], ids, ne, &s, &err),
                                     SIFT_OK);
                    if (device)
                        tu_devicify(&dv, &r, row, V, &s, ids, ne);
                    hook_ctx h = hook_for(row, V);
                    ck_assert_int_eq(sift_chain_set_row_hook(c, with_hook ? hook : NULL, &h, NULL),
                                     SIFT_OK);
                    sift__rng saved = c->rng;
                    int32_t ts = -1;
                    sift_status ss = sift_chain_sample_slice(c, &s, &ts, &err);
                    ty->compared++;
                    ty->hooks += h.calls;
                    if (ss == SIFT_E_NEED_ROW) {
                        ck_assert_msg(!with_hook, "NEED_ROW with a hook\n  %s", desc);
                        ck_assert(memcmp(&saved, &c->rng, sizeof saved) == 0);
                        ty->need_row++;
                        continue;
                    }
                    uint64_t rs[4];
                    sift__chain_rng_state(c, rs);
                    ck_assert_msg(ss == so && (ss != SIFT_OK ||
                                               (ts == to && memcmp(rs, ors, sizeof rs) == 0)),
                                  "grammar mode %d k=%d hook=%d device=%d V=%d: sift %d (tok %d: "
                                  "%s) oracle %d (tok %d)\n  %s",
                                  mode, (int)ks[vi], with_hook, device, (int)V, (int)ss, (int)ts,
                                  ss ? err.message : "", (int)so, (int)to, desc);
                    c->rng = saved;
                }
            }
            sift_stats st0 = {.struct_size = sizeof(sift_stats)};
            ck_assert_int_eq(sift_chain_stats(c, &st0, NULL), SIFT_OK);
            int32_t ts = -1;
            sift_status ss = sift_chain_sample(c, row, V, &ts, &err);
            uint64_t rs[4];
            sift__chain_rng_state(c, rs);
            ck_assert_msg(
                ss == so && (ss != SIFT_OK || (ts == to && memcmp(rs, ors, sizeof rs) == 0)),
                "grammar mode %d, whole row V=%d: sift %d (tok %d: %s) oracle %d (tok "
                "%d)\n  %s",
                mode, (int)V, (int)ss, (int)ts, ss ? err.message : "", (int)so, (int)to, desc);
            sift_stats st1 = {.struct_size = sizeof(sift_stats)};
            ck_assert_int_eq(sift_chain_stats(c, &st1, NULL), SIFT_OK);
            ty->resampled += (long)(st1.grammar_resamples - st0.grammar_resamples);
            if (ss != SIFT_OK)
                break;
            ck_assert_int_eq(sift_chain_accept(c, ts, &err), SIFT_OK);
            ck_assert_int_eq(sift_grammar_accept_token(g, ts, &err), SIFT_OK);
            or_accept(&o, ts);
            ck_assert_uint_eq(sift__chain_state_digest(c) != 0, 1);
        }
        ty->rechosen += dv.rechosen;
        tu_device_free(&dv);
        free(row);
        free(tmp);
        sift_slicer_free(sl);
        or_free(&o);
        sift_grammar_free(g);
        sift_chain_free(c);
        sift_vocab_free(v);
    }
}

/* The grammar runs share the property budget: each takes a 40th of
 * SIFT_SLICE_CASES chains, at least one. */
static long grammar_cases(void)
{
    return n_cases() / 40 > 0 ? n_cases() / 40 : 1;
}

START_TEST(test_grammar_modes_agree_with_the_oracle_on_rows_and_slices)
{
    grammar_tally ty;
    memset(&ty, 0, sizeof ty);
    long cases = grammar_cases();
    grammar_property(777, cases, 0, &ty);
    fprintf(stderr,
            "slice+grammar: %ld chains, %ld slice samples compared, 0 mismatches; hook calls %ld, "
            "need_row %ld, check-mode resamples %ld\n",
            cases, ty.compared, ty.hooks, ty.need_row, ty.resampled);
    ck_assert_int_ge(ty.compared, cases);
    /* (with a handful of chains, as under valgrind, neither need happen) */
    if (cases >= 50) {
        ck_assert(ty.resampled > 0);
        ck_assert(ty.hooks > 0);
    }
}
END_TEST

/* The same under a grammar on slices as device kernels make them: the
 * prefix shuffled, the tokens tied at its smallest logit re-chosen among
 * the row's tied ids, no canonical flag. Token and RNG equal the
 * oracle's, or the row is asked for. */
START_TEST(test_grammar_modes_on_device_slices_agree_with_the_oracle_or_ask)
{
    grammar_tally ty;
    memset(&ty, 0, sizeof ty);
    long cases = grammar_cases();
    grammar_property(777 ^ 0x7469657300000000ull, cases, 1, &ty);
    fprintf(stderr,
            "slice+grammar (device order and ties): %ld chains, %ld slice samples compared, 0 "
            "mismatches; hook calls %ld, need_row %ld, check-mode resamples %ld; tied tokens "
            "re-chosen in %ld slices\n",
            cases, ty.compared, ty.hooks, ty.need_row, ty.resampled, ty.rechosen);
    ck_assert_int_ge(ty.compared, cases);
    if (cases >= 50) {
        ck_assert(ty.resampled > 0);
        ck_assert(ty.hooks > 0);
        ck_assert(ty.rechosen > 0); /* the ties were really re-chosen */
    }
}
END_TEST

START_TEST(test_a_temperature_fallback_on_a_slice_matches_the_row)
{
    /* temperature so small that the largest logit / t overflows falls
     * back to greedy and removes every other token. On a slice of one
     * token that removal is invisible, and after it the bound on absent
     * tokens is -inf although they are gone from the row: the -inf fill
     * of a later top_k must not run (found by the check-long soak; the
     * chain is the one it reported). Huge rows make the division
     * overflow for some present maxima and not for others. */
    sp_chain spec;
    memset(&spec, 0, sizeof spec);
    spec.n = 7;
    spec.st[0] = (sp_stage){.kind = SP_TEMP, .f0 = 0x1.4484cp-100f};
    spec.st[1] = (sp_stage){.kind = SP_TEMP, .f0 = 0x1.4484cp-100f};
    spec.st[2] = (sp_stage){.kind = SP_TEMP, .f0 = 0x1.58c526p+0f};
    spec.st[3] = (sp_stage){.kind = SP_TOP_K, .i0 = 26};
    spec.st[4] = (sp_stage){.kind = SP_TOP_K, .i0 = 44};
    spec.st[5] = (sp_stage){.kind = SP_XTC, .i0 = 3, .f0 = 0x1.12e7d8p-2f, .f1 = 0x1.94bcf4p-11f};
    spec.st[6] = (sp_stage){
        .kind = SP_MIROSTAT, .i0 = 160, .i1 = 1191, .f0 = 0x1.d6b796p+2f, .f1 = 0x1.f3c34ep-5f};
    tu_rng r = {31337};
    const int32_t V = 1191;
    float *row = malloc((size_t)V * sizeof *row);
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    long compared = 0;
    for (int rep = 0; rep < 300; rep++) {
        spec.seed = tu_next(&r);
        sift_chain *c = NULL;
        sift_error err;
        ck_assert_int_eq(sp_build(&spec, &c, &err), SIFT_OK);
        or_chain o;
        or_init(&o, &spec);
        tu_row(&r, row, V, rep % 2 ? TU_ROW_HUGE : TU_ROW_NORMAL);
        if (rep % 3 == 0) /* all negative and huge: the division overflows to -inf */
            for (int32_t i = 0; i < V; i++)
                row[i] = -fabsf(row[i]) - 1e9f;
        int32_t to = -1;
        sift_status so = or_sample(&o, row, V, &to);
        /* the whole row first (same answer), which also sizes the chain's
         * workspace to V, as in a running decode */
        sift__rng saved0 = c->rng;
        int32_t tw = -1;
        ck_assert_int_eq(sift_chain_sample(c, row, V, &tw, &err), so);
        uint64_t rw[4];
        sift__chain_rng_state(c, rw);
        ck_assert_msg(so != SIFT_OK || (tw == to && memcmp(rw, o.rng.s, sizeof rw) == 0),
                      "rep %d whole row: sift tok %d oracle tok %d", rep, (int)tw, (int)to);
        c->rng = saved0;
        for (int32_t k = 1; k <= 3; k++) {
            sift_slice s;
            ck_assert_int_eq(sift_slicer_build(sl, row, V, k, NULL, 0, &s, &err), SIFT_OK);
            hook_ctx h = hook_for(row, V);
            ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
            sift__rng saved = c->rng;
            int32_t ts = -1;
            sift_status ss = sift_chain_sample_slice(c, &s, &ts, &err);
            uint64_t rs[4];
            sift__chain_rng_state(c, rs);
            ck_assert_msg(ss == so &&
                              (ss != SIFT_OK || (ts == to && memcmp(rs, o.rng.s, sizeof rs) == 0)),
                          "rep %d k=%d: sift %d (tok %d) oracle %d (tok %d)", rep, (int)k, (int)ss,
                          (int)ts, (int)so, (int)to);
            c->rng = saved;
            compared++;
        }
        or_free(&o);
        sift_chain_free(c);
    }
    ck_assert_int_eq(compared, 900);
    sift_slicer_free(sl);
    free(row);
}
END_TEST

/* A grammar with literal parts (where only a few tokens continue the
 * text) and free parts, over a vocabulary of single characters, pieces
 * of the literals, random words and an <eos>. */
static const char json_like[] =
    "root ::= \"{\\\"name\\\": \\\"\" [a-z]+ \"\\\", \\\"ok\\\": \" (\"true\" | \"false\") \"}\"\n";

static sift_vocab *literal_vocab(tu_rng *r, int32_t V)
{
    static const char *const pieces[] = {
        "{\"", "name", "\": \"", "\", \"", "ok", "\": ", "true",    "false", "}",   "na",      "me",
        "tr",  "ue",   "fal",    "se",     "\"", "\"}",  "\": \"a", "abc",   "nam", "\", \"ok"};
    static char words[4096][8];
    const char **pc = malloc((size_t)V * sizeof *pc);
    size_t *len = malloc((size_t)V * sizeof *len);
    for (int32_t i = 0; i < V - 1; i++) {
        if (i < 95) {
            words[i][0] = (char)(0x20 + i);
            words[i][1] = 0;
            pc[i] = words[i];
        } else if (i < 95 + (int32_t)N(pieces)) {
            pc[i] = pieces[i - 95];
        } else {
            int n = (int)tu_range(r, 2, 6);
            for (int j = 0; j < n; j++)
                words[i][j] = (char)('a' + tu_range(r, 0, 25));
            words[i][n] = 0;
            pc[i] = words[i];
        }
        len[i] = strlen(pc[i]);
    }
    return vocab_with_eos(pc, len, V);
}

/* The tokens g accepts now (ascending, up to cap) and their count. */
static size_t naive_allowed(sift_grammar *g, int32_t V, int32_t *ids, size_t cap)
{
    size_t n = 0;
    for (int32_t i = 0; i < V; i++) {
        int ok = 0;
        ck_assert_int_eq(sift_grammar_accepts_token(g, i, &ok, NULL), SIFT_OK);
        if (ok && n < cap)
            ids[n] = i;
        n += (size_t)ok;
    }
    return n;
}

START_TEST(test_forced_grammar_tokens_are_extras_and_need_no_row)
{
    /* A grammar that allows at most 32 tokens names them as extras; with
     * them in the slice every absent token is known to be banned, so the
     * step is decided without the row, wherever the forced tokens rank,
     * even when a top_k after the grammar reaches into -inf tokens. */
    tu_rng r = {4242};
    const int32_t V = 1200;
    sp_chain chains[6];
    memset(chains, 0, sizeof chains);
    chains[0].n = 3; /* top_k 40, temp 0.8, dist */
    chains[0].st[0] = (sp_stage){.kind = SP_TOP_K, .i0 = 40};
    chains[0].st[1] = (sp_stage){.kind = SP_TEMP, .f0 = 0.8f};
    chains[0].st[2] = (sp_stage){.kind = SP_DIST};
    chains[1].n = 2; /* top_k 5, dist */
    chains[1].st[0] = (sp_stage){.kind = SP_TOP_K, .i0 = 5};
    chains[1].st[1] = (sp_stage){.kind = SP_DIST};
    chains[2].n = 3; /* min_p 0.05, temp 0.7, dist */
    chains[2].st[0] = (sp_stage){.kind = SP_MIN_P, .f0 = 0.05f, .i0 = 1};
    chains[2].st[1] = (sp_stage){.kind = SP_TEMP, .f0 = 0.7f};
    chains[2].st[2] = (sp_stage){.kind = SP_DIST};
    chains[3].n = 1; /* greedy */
    chains[3].st[0] = (sp_stage){.kind = SP_GREEDY};
    chains[4].n = 4; /* penalties 64, top_k 40, temp 1.3, dist by id */
    chains[4].st[0] =
        (sp_stage){.kind = SP_PENALTIES, .i0 = 64, .f0 = 1.1f, .f1 = 0.2f, .f2 = 0.1f};
    chains[4].st[1] = (sp_stage){.kind = SP_TOP_K, .i0 = 40};
    chains[4].st[2] = (sp_stage){.kind = SP_TEMP, .f0 = 1.3f};
    chains[4].st[3] = (sp_stage){.kind = SP_DIST_ID};
    chains[5].n = 2; /* top_k 300 (beyond the slice), dist */
    chains[5].st[0] = (sp_stage){.kind = SP_TOP_K, .i0 = 300};
    chains[5].st[1] = (sp_stage){.kind = SP_DIST};
    long forced = 0, forced_hooks = 0, free_steps = 0, compared = 0;
    for (int rep = 0; rep < 40; rep++) {
        sift_vocab *v = literal_vocab(&r, V);
        for (size_t ci = 0; ci < N(chains); ci++) {
            sp_chain spec = chains[ci];
            spec.seed = tu_next(&r);
            sift_chain_params p;
            sift_chain_params_init(&p);
            p.seed = spec.seed;
            sift_chain *c = NULL;
            sift_error err;
            ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
            sift_grammar *g = NULL, *og = NULL;
            ck_assert_int_eq(sift_grammar_new(&g, json_like, strlen(json_like), v, NULL, &err),
                             SIFT_OK);
            ck_assert_int_eq(sift_grammar_new(&og, json_like, strlen(json_like), v, NULL, &err),
                             SIFT_OK);
            ck_assert_int_eq(sift_chain_add_grammar(c, g, &err), SIFT_OK);
            for (size_t i = 0; i < spec.n; i++)
                ck_assert_int_eq(sp_add(c, &spec.st[i], &err), SIFT_OK);
            sift_plan plan = {.struct_size = sizeof(sift_plan)};
            ck_assert_int_eq(sift_chain_plan(c, &plan, NULL, &err), SIFT_OK);
            ck_assert_int_gt(plan.k, 0);
            ck_assert_int_ge(plan.max_extras, 32);
            or_chain o;
            or_init(&o, &spec);
            sift_slicer *sl;
            ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
            float row[1200], tmp[1200];
            for (int step = 0; step < 24; step++) {
                tu_row(&r, row, V, step % 3 == 2 ? TU_ROW_TIES : TU_ROW_NORMAL);
                int32_t allowed[64];
                size_t na = naive_allowed(og, V, allowed, N(allowed));
                int32_t ids[256];
                size_t ne = 0;
                ck_assert_int_eq(sift_chain_extras(c, ids, N(ids), &ne, &err), SIFT_OK);
                if (na <= 32) {
                    /* the extras hold the allowed set (penalties may add
                     * their window) */
                    for (size_t i = 0; i < na; i++) {
                        int in = 0;
                        for (size_t j = 0; j < ne; j++)
                            in |= ids[j] == allowed[i];
                        ck_assert_msg(in, "allowed token %d is not an extra", (int)allowed[i]);
                    }
                }
                int32_t to = -1;
                sift_status so = oracle_grammar_step(&o, og, 0, row, tmp, V, &to);
                uint64_t ors[4];
                memcpy(ors, o.rng.s, sizeof ors);
                sift_slice s;
                ck_assert_int_eq(sift_slicer_build(sl, row, V, plan.k, ids, ne, &s, &err), SIFT_OK);
                hook_ctx h = hook_for(row, V);
                ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
                int32_t ts = -1;
                sift_status ss = sift_chain_sample_slice(c, &s, &ts, &err);
                uint64_t rs[4];
                sift__chain_rng_state(c, rs);
                compared++;
                ck_assert_msg(ss == so &&
                                  (ss != SIFT_OK || (ts == to && memcmp(rs, ors, sizeof rs) == 0)),
                              "chain %zu step %d: sift %d (tok %d: %s) oracle %d (tok %d)", ci,
                              step, (int)ss, (int)ts, ss ? err.message : "", (int)so, (int)to);
                if (na <= 32) {
                    forced++;
                    forced_hooks += h.calls;
                    /* na = 0: the grammar is terminated (it accepted an
                     * end-of-generation token) and the step fails
                     * whatever the row; the certificate does not tell
                     * that failure from one the row could change, so it
                     * may ask for the row first. */
                    ck_assert_msg(na == 0 || h.calls == 0,
                                  "chain %zu step %d: %zu allowed, hook called", ci, step, na);
                } else {
                    free_steps++;
                }
                if (ss != SIFT_OK)
                    break;
                ck_assert_int_eq(sift_chain_accept(c, ts, &err), SIFT_OK);
                ck_assert_int_eq(sift_grammar_accept_token(og, ts, &err), SIFT_OK);
                or_accept(&o, ts);
            }
            sift_slicer_free(sl);
            or_free(&o);
            sift_grammar_free(og);
            sift_chain_free(c);
        }
        sift_vocab_free(v);
    }
    fprintf(stderr,
            "forced grammar tokens: %ld slice samples compared, 0 mismatches; %ld steps with at "
            "most 32 allowed tokens, hook calls on them %ld; %ld other steps\n",
            compared, forced, forced_hooks, free_steps);
    ck_assert_int_gt(forced, 100);
    ck_assert_int_gt(free_steps, 10);
}
END_TEST

START_TEST(test_prompt_tokens_fill_windows_but_not_grammars)
{
    tu_rng r = {5};
    sift_vocab *v = arith_vocab(&r, 64);
    sift_chain *c = tu_chain_new(3, NULL);
    sift_error err;
    ck_assert_int_eq(sift_chain_add_penalties(c, 16, 1.2f, 0.0f, 0.0f, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_grammar(c, arith_grammar(v), &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_set_check_grammar(c, arith_grammar(v), &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 5, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    sift_plan p = {.struct_size = sizeof(sift_plan)};
    ck_assert_int_eq(sift_chain_next_k(c, &p, NULL), SIFT_OK);
    int32_t k0 = p.k;
    /* token 16 is "ab": no arithmetic grammar accepts it */
    uint64_t d0 = sift__chain_state_digest(c);
    ck_assert_int_eq(sift_chain_accept(c, 16, &err), SIFT_E_GRAMMAR_REJECT);
    ck_assert_uint_eq(sift__chain_state_digest(c), d0); /* all or nothing */
    ck_assert_int_eq(sift_chain_accept_prompt(c, 16, &err), SIFT_OK);
    ck_assert_uint_ne(sift__chain_state_digest(c), d0); /* the window took it */
    ck_assert_int_eq(sift_chain_next_k(c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(p.k, k0 + 1);
    ck_assert_int_eq(sift_chain_accept(c, 4, &err), SIFT_OK); /* "12" */
    ck_assert_int_eq(sift_chain_accept_prompt(c, -1, &err), SIFT_E_TOKEN);
    sift_chain_free(c);
    sift_vocab_free(v);
}
END_TEST

/* The certificate walk sends the errors of an undecided slice to a
 * scratch struct on its own stack. A chain whose walk stops early (temp
 * 0.5 cannot map an all -inf prefix) used to leave the context pointing
 * at it, and the distribution wrote its error there after the frame was
 * gone (ASan: stack-use-after-return); the caller's struct stayed
 * untouched. */
START_TEST(test_a_slice_error_after_an_early_walk_exit_reaches_the_caller)
{
    const sift_candidate p[3] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
    sift_slice s = {8, 3, p, 0, NULL, 0, 0};
    for (int dist = 0; dist < 2; dist++) {
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_temp(c, 0.5f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
        sift_error err;
        memset(&err, 0, sizeof err);
        sift_status st;
        if (dist) {
            sift_token_prob out[8];
            size_t n = 99;
            st = sift_chain_distribution_slice(c, &s, out, 8, &n, &err);
        } else {
            int32_t t = -7;
            st = sift_chain_sample_slice(c, &s, &t, &err);
            ck_assert_int_eq(t, -7);
        }
        ck_assert_int_eq(st, SIFT_E_NO_CANDIDATE);
        assert_error(&err, SIFT_E_NO_CANDIDATE, -2);
        ck_assert_msg(strstr(err.message, "-inf") != NULL, "%s", err.message);
        sift_chain_free(c);
    }
}
END_TEST

static int negate_stage(void *user, sift_candidate *data, size_t *size)
{
    (void)user;
    for (size_t i = 0; i < *size; i++)
        data[i].logit = -data[i].logit;
    return 0;
}

/* A walk that stops before the selector (here at a WHOLE stage it cannot
 * run on a slice) leaves the candidates half processed: greedy's shortcut
 * must not report them as the distribution. */
START_TEST(test_greedy_distribution_on_a_slice_runs_every_stage_before_it)
{
    float row[8] = {5.0f, 4.0f, 3.0f, 2.0f, 1.0f, 0.5f, 0.25f, 0.0f};
    sift_candidate p[2] = {{0, 5.0f}, {1, 4.0f}};
    sift_slice s = {8, 2, p, 0, NULL, 0, 0};
    sift_custom_stage vt;
    memset(&vt, 0, sizeof vt);
    vt.abi_version = SIFT_CUSTOM_STAGE_ABI;
    vt.name = "negate";
    vt.apply = negate_stage;
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    sift_token_prob want[8], got[8];
    size_t nw = 0, ng = 0;
    ck_assert_int_eq(sift_chain_distribution(c, row, 8, want, 8, &nw, NULL), SIFT_OK);
    ck_assert_uint_eq(nw, 1);
    ck_assert_int_eq(want[0].id, 7);
    sift_error err;
    ck_assert_int_eq(sift_chain_distribution_slice(c, &s, got, 8, &ng, &err), SIFT_E_NEED_ROW);
    hook_ctx h = hook_for(row, 8);
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_distribution_slice(c, &s, got, 8, &ng, &err), SIFT_OK);
    ck_assert_uint_eq(ng, 1);
    ck_assert_int_eq(got[0].id, 7);
    ck_assert(got[0].logit == want[0].logit);
    sift_chain_free(c);
}
END_TEST

static int pass_stage(void *user, sift_candidate *data, size_t *size)
{
    (void)user;
    (void)data;
    (void)size;
    return 0;
}

/* Custom stages declare their own counts; the analyzer's sums of them
 * saturate (UBSan aborts on a signed overflow) and a sum past any row
 * means the whole row. */
START_TEST(test_plan_sums_of_huge_declared_counts_saturate)
{
    const int64_t huge[] = {INT64_MAX, INT64_MAX - 1, (int64_t)1 << 62, INT32_MAX};
    for (size_t h = 0; h < N(huge); h++) {
        sift_chain *c = tu_chain_new(1, NULL);
        sift_custom_stage vt;
        memset(&vt, 0, sizeof vt);
        vt.abi_version = SIFT_CUSTOM_STAGE_ABI;
        vt.apply = pass_stage;
        vt.cls = SIFT_CLASS_LOWERS;
        vt.cls_n = huge[h];
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(sift_chain_add_custom(c, &vt, NULL, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, NULL), SIFT_OK);
        vt.cls = SIFT_CLASS_TOP;
        ck_assert_int_eq(sift_chain_add_custom(c, &vt, NULL, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        sift_plan p = {.struct_size = sizeof(sift_plan)};
        sift_plan_stage ps[7];
        for (int i = 0; i < 7; i++)
            ps[i].struct_size = sizeof ps[i];
        ck_assert_int_eq(sift_chain_plan(c, &p, ps, NULL), SIFT_OK);
        ck_assert_int_eq(p.k, 0);
        ck_assert_int_eq(p.guarantee, SIFT_GUARANTEE_WHOLE_ROW);
        for (int i = 0; i < 7; i++)
            ck_assert_int_ge(ps[i].k, 0);
        ck_assert_int_eq(sift_chain_next_k(c, &p, NULL), SIFT_OK);
        ck_assert_int_eq(p.k, 0);
        const sift_chain *cs[2] = {c, c};
        int32_t k = -1;
        ck_assert_int_eq(sift_chains_next_k(cs, 2, &k, NULL), SIFT_OK);
        ck_assert_int_eq(k, 0);
        size_t n = 99;
        ck_assert_int_eq(sift_chain_extras(c, NULL, 0, &n, NULL), SIFT_OK);
        ck_assert_uint_eq(n, 0);
        float row[64];
        for (int i = 0; i < 64; i++)
            row[i] = (float)i / 4.0f;
        int32_t t;
        ck_assert_int_eq(sift_chain_sample(c, row, 64, &t, NULL), SIFT_OK);
        sift_chain_free(c);
    }
}
END_TEST

/* The walk itself: whatever way it leaves (here temperature cannot map
 * an all -inf prefix and the walk stops at its first stage), the
 * context's error pointer is the caller's again, never the walk's own
 * scratch struct. */
START_TEST(test_the_walk_leaves_the_context_error_pointer_as_it_found_it)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.5f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    ck_assert_int_eq(sift__ws_reserve(&c->ws, &c->al, 8, NULL), SIFT_OK);
    const float prefixes[3][3] = {
        {-INFINITY, -INFINITY, -INFINITY}, {3.0f, 2.0f, 1.0f}, {3.0f, 3.0f, 3.0f}};
    for (int t = 0; t < 3; t++) {
        sift_error user;
        sift__ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.rng = c->rng;
        ctx.ws = &c->ws;
        ctx.err = &user;
        ctx.V = 8;
        ctx.selected = -1;
        ctx.banned_at = SIZE_MAX;
        for (int32_t i = 0; i < 3; i++) {
            c->ws.cand[i].id = i;
            c->ws.cand[i].logit = prefixes[t][i];
        }
        sift__arr a = {c->ws.cand, 3, 8, SIFT__ORDER_CANON, 0};
        sift__bound b = sift__bound_of(&a.c[2]);
        for (size_t end = 0; end <= 3; end++) {
            sift_status st = SIFT_OK;
            (void)sift__walk(c, &ctx, &a, end, &b, &st);
            ck_assert_ptr_eq(ctx.err, &user);
        }
    }
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The probability cutoffs on slices                                   */
/* ------------------------------------------------------------------ */

/* The cutoff runs share the property budget: each takes a 16th of
 * SIFT_SLICE_CASES chains, at least one. */
static long cutoff_cases(void)
{
    return n_cases() / 16 > 0 ? n_cases() / 16 : 1;
}

START_TEST(test_probability_cutoffs_on_slices_agree_with_the_oracle_bitwise_or_ask)
{
    tally ty;
    memset(&ty, 0, sizeof ty);
    long cases = cutoff_cases();
    property(slice_seed() ^ 0x6375746f66660000ull, cases, 0, &ty, 0, gen_cutoff_chain);
    fprintf(stderr,
            "slice (cutoffs): %ld chains, %ld slice samples compared, 0 mismatches; decided on "
            "the slice %ld, hook calls %ld, need_row %ld; at the static k of certified plans "
            "%ld/%ld hooked\n",
            cases, ty.compared, ty.decided, ty.hooked, ty.need_row, ty.cert_hooks, ty.cert_steps);
    ck_assert_int_ge(ty.compared, cases);
    ck_assert(ty.cert_steps > 0);
    ck_assert(ty.decided > 0);
    ck_assert(ty.hooked > 0);
}
END_TEST

/* The same cutoff chains on slices as device kernels make them: the
 * prefix shuffled, the tokens tied at its smallest logit re-chosen among
 * the row's tied ids, no canonical flag. Token, RNG and state equal the
 * oracle's, or the row is asked for. */
START_TEST(test_probability_cutoffs_on_device_slices_agree_with_the_oracle_or_ask)
{
    tally ty;
    memset(&ty, 0, sizeof ty);
    long cases = cutoff_cases();
    property(slice_seed() ^ 0x6375746f66660000ull ^ 0x7469657300000000ull, cases, 0, &ty, 1,
             gen_cutoff_chain);
    fprintf(stderr,
            "slice (cutoffs, device order and ties): %ld chains, %ld slice samples compared, 0 "
            "mismatches; decided on the slice %ld, hook calls %ld, need_row %ld; tied tokens "
            "re-chosen in %ld slices; at the static k of certified plans %ld/%ld hooked\n",
            cases, ty.compared, ty.decided, ty.hooked, ty.need_row, ty.rechosen, ty.cert_hooks,
            ty.cert_steps);
    ck_assert_int_ge(ty.compared, cases);
    ck_assert(ty.cert_steps > 0);
    ck_assert(ty.decided > 0);
    ck_assert(ty.hooked > 0);
    ck_assert(ty.rechosen > 0); /* the ties were really re-chosen */
}
END_TEST

/* One slice step of `spec` on the canonical first k of `row`, with the
 * hook and without: the token and RNG equal the oracle's (or, without the
 * hook, SIFT_E_NEED_ROW exactly when the hook was needed). Returns the
 * hook calls. */
static int cutoff_step(const sp_chain *spec, const float *row, int32_t V, int32_t k)
{
    or_chain o;
    or_init(&o, spec);
    int32_t to = -1;
    ck_assert_int_eq(or_sample(&o, row, V, &to), SIFT_OK);
    sift_chain *c;
    sift_error err;
    ck_assert_int_eq(sp_build(spec, &c, &err), SIFT_OK);
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(sl, row, V, k, NULL, 0, &s, &err), SIFT_OK);
    hook_ctx h = hook_for(row, V);
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    int32_t ts = -1;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &ts, &err), SIFT_OK);
    uint64_t rs[4];
    sift__chain_rng_state(c, rs);
    ck_assert_int_eq(ts, to);
    ck_assert(memcmp(rs, o.rng.s, sizeof rs) == 0);
    sift_chain_free(c);
    ck_assert_int_eq(sp_build(spec, &c, &err), SIFT_OK);
    sift_status st = sift_chain_sample_slice(c, &s, &ts, &err);
    ck_assert_int_eq(st, h.calls ? SIFT_E_NEED_ROW : SIFT_OK);
    if (st == SIFT_OK)
        ck_assert_int_eq(ts, to);
    sift_chain_free(c);
    sift_slicer_free(sl);
    or_free(&o);
    return h.calls;
}

static sp_chain epsilon_chain(float epsilon)
{
    sp_chain spec;
    memset(&spec, 0, sizeof spec);
    spec.seed = 5;
    spec.n = 2;
    spec.st[0] = (sp_stage){.kind = SP_EPSILON, .f0 = epsilon};
    spec.st[1] = (sp_stage){.kind = SP_DIST};
    return spec;
}

START_TEST(test_plan_of_epsilon_first_is_certified_with_a_recommended_k)
{
    sp_chain spec = epsilon_chain(3e-4f);
    sift_chain *c;
    ck_assert_int_eq(sp_build(&spec, &c, NULL), SIFT_OK);
    expect_plan(c, 64, SIFT_GUARANTEE_CERTIFIED, 0);
    sift_chain_free(c);
}
END_TEST

/* eta's cut reads the entropy of every token: whole row before any
 * truncation, and after a top_k it runs on the complete set. */
START_TEST(test_plan_of_eta_first_is_whole_row_and_after_top_k_exact)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_eta(c, 2e-3f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    expect_plan(c, 0, SIFT_GUARANTEE_WHOLE_ROW, 0);
    sift_chain_free(c);
    c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_eta(c, 2e-3f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    expect_plan(c, 40, SIFT_GUARANTEE_EXACT, 0);
    sift_chain_free(c);
}
END_TEST

/* A peaked row: the 936 absent tokens sit 20 nats below the top, so even
 * together they cannot lift the threshold past a present verdict, and
 * none of them can pass: decided on the slice. */
START_TEST(test_epsilon_is_decided_on_a_slice_when_the_absent_tail_cannot_matter)
{
    enum { V = 1000 };
    static float row[V];
    for (int32_t i = 0; i < V; i++)
        row[i] = i < 5 ? 10.0f - (float)i : -10.0f - (float)(i % 7) * 0.01f;
    sp_chain spec = epsilon_chain(3e-4f);
    ck_assert_int_eq(cutoff_step(&spec, row, V, 64), 0);
}
END_TEST

/* A flat row: every absent token has the probability of a present one
 * and passes on the whole row, so the slice cannot decide. */
START_TEST(test_epsilon_asks_for_the_row_when_an_absent_token_could_pass)
{
    enum { V = 2000 };
    static float row[V];
    for (int32_t i = 0; i < V; i++)
        row[i] = 0.0f;
    sp_chain spec = epsilon_chain(3e-4f);
    ck_assert_int_eq(cutoff_step(&spec, row, V, 64), 1);
}
END_TEST

/* No absent token can pass (each is below the present threshold), but
 * together they add almost as much mass again: 40 present tokens that
 * pass on the slice (p = 1.1e-3 of the present mass) fail on the row
 * (1.1e-3 / 2.0 of its mass), where only token 0 is kept. Applying the
 * present threshold would draw among 41 tokens; the certificate must see
 * that the verdicts change inside the mass interval and ask. */
START_TEST(test_epsilon_asks_for_the_row_when_absent_mass_could_flip_a_present_token)
{
    enum { V = 1000 };
    static float row[V];
    float l1 = sift__logf(1.1e-3f), l2 = sift__logf(1.0e-3f);
    for (int32_t i = 0; i < V; i++)
        row[i] = i == 0 ? 0.0f : i <= 40 ? l1 : l2;
    sp_chain spec = epsilon_chain(1e-3f);
    ck_assert_int_eq(cutoff_step(&spec, row, V, 64), 1);
    /* the row path's own prefix attempt falls back too, with the same token */
    or_chain o;
    or_init(&o, &spec);
    int32_t to = -1, ts = -1;
    ck_assert_int_eq(or_sample(&o, row, V, &to), SIFT_OK);
    ck_assert_int_eq(to, 0);
    sift_chain *c;
    ck_assert_int_eq(sp_build(&spec, &c, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(c, row, V, &ts, NULL), SIFT_OK);
    ck_assert_int_eq(ts, 0);
    ck_assert_uint_eq(c->n_prefix_fallback, 1);
    sift_chain_free(c);
    or_free(&o);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Cross-check mode                                                    */
/* ------------------------------------------------------------------ */

static sift_stats stats_of(const sift_chain *c)
{
    sift_stats st = {.struct_size = sizeof st};
    ck_assert_int_eq(sift_chain_stats(c, &st, NULL), SIFT_OK);
    return st;
}

/* 50 distinct logits: token i has (i * 37) % 50 / 4. */
static void distinct_row(float *row, int32_t V)
{
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)((i * 37) % V) / 4.0f;
}

/* The id with the r-th largest logit of distinct_row. */
static int32_t rank_id(const float *row, int32_t V, int32_t r)
{
    for (int32_t i = 0; i < V; i++) {
        int32_t above = 0;
        for (int32_t j = 0; j < V; j++)
            above += row[j] > row[i];
        if (above == r)
            return i;
    }
    return -1;
}

START_TEST(test_cross_check_catches_a_slice_missing_a_top_token_and_changes_nothing)
{
    enum { V = 50 };
    float row[V];
    distinct_row(row, V);
    sift_chain *c = top_k_chain(3), *ref = top_k_chain(3);
    ck_assert_int_eq(sift_chain_set_cross_check(c, 1, 0.0, 0, NULL), SIFT_OK);
    hook_ctx h = hook_for(row, V);
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    /* a set of 5 with the rank-1 token replaced by the rank-10 one, out
     * of order: the slice alone decides top_k 3 (wrongly) */
    sift_candidate p[5];
    const int32_t ranks[5] = {3, 10, 0, 4, 2};
    for (int i = 0; i < 5; i++) {
        p[i].id = rank_id(row, V, ranks[i]);
        p[i].logit = row[p[i].id];
    }
    sift_slice s = {V, 5, p, 0, NULL, 0, 0};
    sift_error err;
    int32_t t = -7;
    uint64_t before[4], after[4];
    sift__chain_rng_state(c, before);
    uint64_t digest = sift__chain_state_digest(c);
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE_MISMATCH);
    assert_error(&err, SIFT_E_SLICE_MISMATCH, 1); /* prefix[1], the intruder */
    char want[64];
    snprintf(want, sizeof want, "token %d (logit", (int)rank_id(row, V, 1));
    ck_assert_msg(strstr(err.message, "prefix[1]") && strstr(err.message, want) &&
                      strstr(err.message, "missing"),
                  "%s", err.message);
    ck_assert_int_eq(t, -7);
    sift__chain_rng_state(c, after);
    ck_assert(memcmp(before, after, sizeof before) == 0);
    ck_assert_uint_eq(sift__chain_state_digest(c), digest);
    sift_stats st = stats_of(c);
    ck_assert_uint_eq(st.cross_checks, 1);
    ck_assert_uint_eq(st.cross_check_mismatches, 1);
    ck_assert_uint_eq(st.hook_calls, 0); /* a cross-check is not a hook call */
    ck_assert_uint_eq(st.slice_decided, 0);
    /* a retry is due again and fails again */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE_MISMATCH);
    /* the chain stays usable: a right slice gives the reference token */
    p[1].id = rank_id(row, V, 1);
    p[1].logit = row[p[1].id];
    int32_t tr;
    ck_assert_int_eq(sift_chain_sample(ref, row, V, &tr, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    ck_assert_int_eq(t, tr);
    sift__chain_rng_state(c, before);
    sift__chain_rng_state(ref, after);
    ck_assert(memcmp(before, after, sizeof before) == 0);
    st = stats_of(c);
    ck_assert_uint_eq(st.cross_checks, 3);
    ck_assert_uint_eq(st.cross_check_mismatches, 2);
    ck_assert_uint_eq(st.slice_decided, 1);
    ck_assert_int_eq(h.calls, 3);
    sift_chain_free(c);
    sift_chain_free(ref);
}
END_TEST

START_TEST(test_cross_check_catches_a_wrong_logit_and_a_wrong_extra)
{
    enum { V = 50 };
    float row[V];
    distinct_row(row, V);
    sift_chain *c = tu_chain_new(9, NULL);
    sift_bias pos[1] = {{rank_id(row, V, 30), 0.5f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, pos, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_set_cross_check(c, 1, 0.0, 0, NULL), SIFT_OK);
    hook_ctx h = hook_for(row, V);
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    sift_candidate p[5];
    for (int i = 0; i < 5; i++) {
        p[i].id = rank_id(row, V, i);
        p[i].logit = row[p[i].id];
    }
    sift_candidate ex[1] = {{pos[0].token, row[pos[0].token]}};
    sift_slice s = {V, 5, p, 1, ex, SIFT_SLICE_CANONICAL, 0};
    sift_error err;
    int32_t t;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    p[2].logit = nextafterf(p[2].logit, 0.0f); /* one ulp off, order kept */
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE_MISMATCH);
    assert_error(&err, SIFT_E_SLICE_MISMATCH, 2);
    ck_assert_msg(strstr(err.message, "prefix[2]") != NULL, "%s", err.message);
    p[2].logit = row[p[2].id];
    ex[0].logit -= 0.25f;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE_MISMATCH);
    assert_error(&err, SIFT_E_SLICE_MISMATCH, 5); /* n_prefix + 0 */
    ck_assert_msg(strstr(err.message, "extras[0]") != NULL, "%s", err.message);
    sift_stats st = stats_of(c);
    ck_assert_uint_eq(st.cross_check_mismatches, 2);
    ck_assert_uint_eq(st.slice_decided, 1);
    sift_chain_free(c);
}
END_TEST

/* Five tokens tied at the top, top_k 3: the slice holds ids 300, 400,
 * 500 where the row's Prefix(3) has 10, 200, 300 (the issue's case). */
START_TEST(test_cross_check_catches_a_wrong_tie_under_the_canonical_flag_only)
{
    enum { V = 600 };
    float row[V];
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)(i % 7) / 8.0f;
    const int32_t tied[5] = {10, 200, 300, 400, 500};
    for (int i = 0; i < 5; i++)
        row[tied[i]] = 4.0f;
    sift_chain *c = top_k_chain(3);
    ck_assert_int_eq(sift_chain_set_cross_check(c, 1, 0.0, 0, NULL), SIFT_OK);
    hook_ctx h = hook_for(row, V);
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    sift_candidate p[3] = {{300, 4.0f}, {400, 4.0f}, {500, 4.0f}};
    sift_slice s = {V, 3, p, 0, NULL, SIFT_SLICE_CANONICAL, 0};
    sift_error err;
    int32_t t = -7;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE_MISMATCH);
    assert_error(&err, SIFT_E_SLICE_MISMATCH, 0);
    ck_assert_msg(strstr(err.message, "prefix[0] is token 300") &&
                      strstr(err.message, "has token 10"),
                  "%s", err.message);
    ck_assert_int_eq(t, -7);
    /* the same set without the flag is a valid tie choice: the slice
     * cannot decide, the hook's row does, and nothing is wrong */
    s.flags = 0;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    sift_stats st = stats_of(c);
    ck_assert_uint_eq(st.cross_check_mismatches, 1);
    ck_assert_uint_eq(st.cross_checks, 2);
    ck_assert_uint_eq(st.hook_calls, 1);
    /* and a set of 4 with any three of the tied ids plus a lower token
     * decides on the slice, checked right */
    sift_candidate q[4] = {{500, 4.0f}, {6, 6.0f / 8.0f}, {10, 4.0f}, {400, 4.0f}};
    sift_slice s4 = {V, 4, q, 0, NULL, 0, 0};
    ck_assert_int_eq(sift_chain_sample_slice(c, &s4, &t, &err), SIFT_E_SLICE_MISMATCH);
    /* (token 6 is below the row's 4th largest, 4.0: a wrong set) */
    assert_error(&err, SIFT_E_SLICE_MISMATCH, 1);
    q[1].id = 200;
    q[1].logit = 4.0f;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s4, &t, &err), SIFT_OK);
    st = stats_of(c);
    ck_assert_uint_eq(st.cross_check_mismatches, 2);
    ck_assert_uint_eq(st.cross_checks, 4);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_cross_check_without_a_hook_is_skipped_and_bad_settings_are_refused)
{
    enum { V = 50 };
    float row[V];
    distinct_row(row, V);
    sift_chain *c = top_k_chain(3);
    sift_error err;
    ck_assert_int_eq(sift_chain_set_cross_check(NULL, 1, 0.0, 0, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_set_cross_check(c, 1, -0.25, 0, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_set_cross_check(c, 1, 1.5, 0, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_set_cross_check(c, 1, NAN, 0, &err), SIFT_E_ARG);
    ck_assert_msg(strstr(err.message, "probability") != NULL, "%s", err.message);
    ck_assert_int_eq(sift_chain_set_cross_check(c, 2, 0.0, 0, &err), SIFT_OK);
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(sl, row, V, 3, NULL, 0, &s, NULL), SIFT_OK);
    int32_t t;
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    sift_stats st = stats_of(c);
    ck_assert_uint_eq(st.cross_check_skipped, 2); /* steps 2 and 4 */
    ck_assert_uint_eq(st.cross_checks, 0);
    /* a hook that fails during a check: SIFT_E_HOOK, nothing changed */
    hook_ctx h = hook_for(row, V);
    h.fail = 5;
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    uint64_t before[4], after[4];
    sift__chain_rng_state(c, before);
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_HOOK); /* step 6 */
    ck_assert_msg(strstr(err.message, "cross-check") != NULL, "%s", err.message);
    sift__chain_rng_state(c, after);
    ck_assert(memcmp(before, after, sizeof before) == 0);
    h.fail = 0;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK); /* step 6 again */
    st = stats_of(c);
    ck_assert_uint_eq(st.cross_checks, 1);
    ck_assert_uint_eq(st.cross_check_mismatches, 0);
    /* off */
    ck_assert_int_eq(sift_chain_set_cross_check(c, 0, 0.0, 0, &err), SIFT_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    ck_assert_uint_eq(stats_of(c).cross_checks, 1);
    sift_slicer_free(sl);
    sift_chain_free(c);
}
END_TEST

/* A custom stage that lowers the first candidate on its first call
 * only: the slice step and the whole row then disagree on the token
 * although the slice is right, which only check 3 sees. */
static int lower_first_once(void *user, sift_candidate *data, size_t *size)
{
    int *calls = user;
    if ((*calls)++ == 0 && *size > 0)
        data[0].logit -= 100.0f;
    return 0;
}

START_TEST(test_cross_check_catches_a_token_that_differs_from_the_whole_row)
{
    enum { V = 50 };
    float row[V];
    distinct_row(row, V);
    sift_chain *c = tu_chain_new(5, NULL);
    int calls = 0;
    sift_custom_stage vt = {.abi_version = SIFT_CUSTOM_STAGE_ABI,
                            .name = "lower_first_once",
                            .cls = SIFT_CLASS_LOWERS,
                            .cls_n = 1,
                            .apply = lower_first_once};
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, &calls, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_set_cross_check(c, 1, 0.0, 0, NULL), SIFT_OK);
    hook_ctx h = hook_for(row, V);
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(sl, row, V, 2, NULL, 0, &s, NULL), SIFT_OK);
    sift_error err;
    int32_t t = -7;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE_MISMATCH);
    assert_error(&err, SIFT_E_SLICE_MISMATCH, -1);
    char want[96];
    snprintf(want, sizeof want, "the slice gave token %d, the whole row token %d",
             (int)rank_id(row, V, 1), (int)rank_id(row, V, 0));
    ck_assert_msg(strstr(err.message, want) != NULL, "%s", err.message);
    ck_assert_int_eq(t, -7);
    ck_assert_int_eq(calls, 2);
    ck_assert_uint_eq(stats_of(c).cross_check_mismatches, 1);
    sift_slicer_free(sl);
    sift_chain_free(c);
}
END_TEST

/* Right slices in any order and tie choice never trip the check, and
 * the mode changes nothing: three copies of the production chain (off,
 * every step, with probability 0.3) give the same tokens, RNG states and
 * state digests on bf16, tied and peaked rows, with the same hook calls. */
START_TEST(test_cross_check_on_or_off_gives_the_same_tokens_and_right_slices_never_trip_it)
{
    enum { V = 3000, STEPS = 300, COPIES = 3 };
    sift_chain *c[COPIES];
    for (int i = 0; i < COPIES; i++) {
        c[i] = tu_chain_new(42, NULL);
        ck_assert_int_eq(sift_chain_add_penalties(c[i], 64, 1.1f, 0.0f, 0.0f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(c[i], 40, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_p(c[i], 0.95f, 1, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_min_p(c[i], 0.05f, 1, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_temp(c[i], 0.8f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c[i], NULL), SIFT_OK);
    }
    ck_assert_int_eq(sift_chain_set_cross_check(c[1], 1, 0.0, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_set_cross_check(c[2], 0, 0.3, 1234, NULL), SIFT_OK);
    float *row = malloc(V * sizeof *row);
    hook_ctx h[COPIES];
    for (int i = 0; i < COPIES; i++) {
        h[i] = hook_for(row, V);
        ck_assert_int_eq(sift_chain_set_row_hook(c[i], hook, &h[i], NULL), SIFT_OK);
    }
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    tu_device_slice dv;
    ck_assert(tu_device_init(&dv, V));
    const int shapes[3] = {TU_ROW_BF16, TU_ROW_TIES, TU_ROW_PEAKED};
    tu_rng r = {99};
    sift_plan plan = {.struct_size = sizeof plan};
    ck_assert_int_eq(sift_chain_plan(c[0], &plan, NULL, NULL), SIFT_OK);
    for (int t = 0; t < STEPS; t++) {
        tu_row(&r, row, V, shapes[t % 3]);
        int32_t ids[64];
        size_t ne = 0;
        ck_assert_int_eq(sift_chain_extras(c[0], ids, N(ids), &ne, NULL), SIFT_OK);
        sift_slice s;
        int32_t k = plan.k + (int32_t)tu_range(&r, 0, 8);
        ck_assert_int_eq(sift_slicer_build(sl, row, V, k, ids, ne, &s, NULL), SIFT_OK);
        if (t % 2)
            tu_devicify(&dv, &r, row, V, &s, ids, ne);
        int32_t tok[COPIES];
        for (int i = 0; i < COPIES; i++) {
            sift_error err;
            ck_assert_msg(sift_chain_sample_slice(c[i], &s, &tok[i], &err) == SIFT_OK,
                          "copy %d step %d: %s", i, t, err.message);
        }
        uint64_t r0[4], ri[4];
        sift__chain_rng_state(c[0], r0);
        for (int i = 1; i < COPIES; i++) {
            ck_assert_int_eq(tok[i], tok[0]);
            sift__chain_rng_state(c[i], ri);
            ck_assert(memcmp(r0, ri, sizeof r0) == 0);
        }
        for (int i = 0; i < COPIES; i++)
            ck_assert_int_eq(sift_chain_accept(c[i], tok[0], NULL), SIFT_OK);
        for (int i = 1; i < COPIES; i++)
            ck_assert_uint_eq(sift__chain_state_digest(c[i]), sift__chain_state_digest(c[0]));
    }
    sift_stats s0 = stats_of(c[0]), s1 = stats_of(c[1]), s2 = stats_of(c[2]);
    ck_assert_uint_eq(s0.cross_checks, 0);
    ck_assert_uint_eq(s1.cross_checks, STEPS);
    ck_assert_uint_gt(s2.cross_checks, STEPS / 6);
    ck_assert_uint_lt(s2.cross_checks, STEPS / 2);
    ck_assert_uint_eq(s1.cross_check_mismatches + s2.cross_check_mismatches, 0);
    ck_assert_uint_eq(s1.cross_check_skipped + s2.cross_check_skipped, 0);
    for (int i = 1; i < COPIES; i++) {
        sift_stats si = i == 1 ? s1 : s2;
        ck_assert_uint_eq(si.hook_calls, s0.hook_calls);
        ck_assert_uint_eq(si.slice_decided, s0.slice_decided);
        ck_assert_uint_eq(si.row_prefix_decided, s0.row_prefix_decided);
    }
    ck_assert_int_gt((int)s0.slice_decided, STEPS / 2); /* most checks ran on decided steps */
    ck_assert_int_gt((int)dv.rechosen, 0);
    tu_device_free(&dv);
    free(row);
    sift_slicer_free(sl);
    for (int i = 0; i < COPIES; i++)
        sift_chain_free(c[i]);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Extras beside a device set, and lists of extras longer than V       */
/* ------------------------------------------------------------------ */

static int32_t row_token(sift_chain *c, const float *row, int32_t V)
{
    int32_t t = -1;
    sift_error err;
    ck_assert_msg(sift_chain_sample(c, row, V, &t, &err) == SIFT_OK, "%s", err.message);
    return t;
}

/* A device set (no canonical flag) may hold extras tied at its smallest
 * logit with a smaller id than the tied prefix tokens: in canonical order
 * they come first, so a complete slice of equal logits gives the row's
 * token (the lowest id for top_k 1, the same draw for dist). */
START_TEST(test_extras_tied_with_a_device_sets_smallest_logit_rank_by_id)
{
    const float row[3] = {0.5f, 0.5f, 0.5f};
    sift_candidate pre[2] = {{1, 0.5f}, {2, 0.5f}}, ex[1] = {{0, 0.5f}};
    sift_slice sl = {.n_vocab = 3, .n_prefix = 2, .prefix = pre, .n_extras = 1, .extras = ex};
    sift_error err;
    for (int chain = 0; chain < 2; chain++)
        for (uint64_t seed = 0; seed < 20; seed++) {
            sift_chain_params p;
            sift_chain_params_init(&p);
            p.seed = seed;
            sift_chain *a, *b;
            ck_assert_int_eq(sift_chain_new(&a, &p, NULL), SIFT_OK);
            if (chain == 0) {
                ck_assert_int_eq(sift_chain_add_top_k(a, 1, NULL), SIFT_OK);
                ck_assert_int_eq(sift_chain_add_greedy(a, NULL), SIFT_OK);
            } else {
                ck_assert_int_eq(sift_chain_add_dist(a, NULL), SIFT_OK);
            }
            ck_assert_int_eq(sift_chain_clone(a, &b, NULL), SIFT_OK);
            int32_t t = -1;
            ck_assert_msg(sift_chain_sample_slice(b, &sl, &t, &err) == SIFT_OK, "%s", err.message);
            ck_assert_int_eq(t, row_token(a, row, 3));
            sift_chain_free(a);
            sift_chain_free(b);
        }
}
END_TEST

/* allowed_tokens names its ids as extras and so bans every absent token:
 * an allowed extra tied at the device set's smallest logit still ranks
 * by id. */
START_TEST(test_allowed_extras_tied_with_a_device_set_rank_by_id)
{
    float row[100];
    for (int i = 0; i < 100; i++)
        row[i] = -1.0f;
    row[0] = row[1] = row[2] = row[50] = 0.5f;
    const int32_t ids[3] = {0, 1, 2};
    sift_chain *a, *b;
    sift_error err;
    ck_assert_int_eq(sift_chain_new(&a, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_allowed_tokens(a, ids, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(a, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(a, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_clone(a, &b, NULL), SIFT_OK);
    sift_candidate pre[2] = {{1, 0.5f}, {2, 0.5f}}, ex[1] = {{0, 0.5f}};
    sift_slice sl = {.n_vocab = 100, .n_prefix = 2, .prefix = pre, .n_extras = 1, .extras = ex};
    hook_ctx h = hook_for(row, 100);
    ck_assert_int_eq(sift_chain_set_row_hook(b, hook, &h, NULL), SIFT_OK);
    int32_t t = -1;
    ck_assert_msg(sift_chain_sample_slice(b, &sl, &t, &err) == SIFT_OK, "%s", err.message);
    ck_assert_int_eq(t, row_token(a, row, 100));
    ck_assert_int_eq(t, 0);
    sift_chain_free(a);
    sift_chain_free(b);
}
END_TEST

/* Biases on 115 ids and a penalty window name more extra ids than the
 * row has once the ids both name are counted twice; the row step still
 * sees every raised token (id 120: 0.8 / 0.5 = 1.6 beats the 0.91 of
 * the biased block). */
START_TEST(test_a_list_of_extras_longer_than_the_row_keeps_every_raised_token)
{
    enum { NV = 128 };
    sift_bias bs[115];
    for (int i = 0; i < 115; i++)
        bs[i] = (sift_bias){i, 0.01f};
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_logit_bias(c, bs, 115, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 0.5f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    const int32_t hist[8] = {120, 100, 101, 102, 103, 104, 105, 106};
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(sift_chain_accept(c, hist[i], NULL), SIFT_OK);
    float row[NV];
    for (int i = 0; i < NV; i++)
        row[i] = -5.0f;
    for (int i = 10; i < 20; i++)
        row[i] = 0.9f;
    row[120] = 0.8f;
    ck_assert_int_eq(row_token(c, row, NV), 120);
    sift_chain_free(c);
}
END_TEST

/* The same double count on a slice: a slice without a requested extra
 * (id 7, in the penalty window) is refused, not sampled. */
START_TEST(test_a_slice_missing_a_requested_extra_is_refused_when_the_list_is_longer_than_v)
{
    sift_bias bs[7];
    for (int i = 0; i < 7; i++)
        bs[i] = (sift_bias){i, 0.01f};
    sift_chain *c;
    sift_error err;
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_logit_bias(c, bs, 7, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 0.5f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, 7, NULL), SIFT_OK);
    sift_candidate pre[1] = {{0, 1.0f}}, ex[6];
    for (int i = 0; i < 6; i++)
        ex[i] = (sift_candidate){i + 1, -5.0f};
    sift_slice sl = {.n_vocab = 8,
                     .n_prefix = 1,
                     .prefix = pre,
                     .n_extras = 6,
                     .extras = ex,
                     .flags = SIFT_SLICE_CANONICAL};
    int32_t t = -1;
    ck_assert_int_eq(sift_chain_sample_slice(c, &sl, &t, &err), SIFT_E_SLICE);
    ck_assert_msg(strstr(err.message, "extra token 7") != NULL, "%s", err.message);
    ck_assert_int_eq(t, -1);
    sift_chain_free(c);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("slice");
    struct {
        const char *name;
        const TTest *tests[12];
    } groups[] = {
        {"plan",
         {test_plan_of_the_production_chain_is_84_exact,
          test_plan_of_top_k_top_p_temp_dist_is_40_exact,
          test_plan_of_greedy_is_1_and_with_penalties_65,
          test_plan_counts_negative_biases_and_gathers_positive_ones_as_extras,
          test_plan_is_whole_row_when_a_whole_stage_comes_first,
          test_plan_of_min_p_first_is_certified_with_a_recommended_k,
          test_plan_of_temperature_before_top_k_adds_a_margin_and_is_certified,
          test_batch_k_is_the_largest_or_zero,
          test_batch_k_per_slot_gives_each_k_and_lists_the_whole_row_slots,
          test_one_batch_k_serves_every_slice_slot_without_the_row,
          test_plan_sums_of_huge_declared_counts_saturate}},
        {"validation",
         {test_slice_validation_names_each_problem,
          test_canonical_slice_validation_finds_nan_and_inf_among_falling_keys,
          test_missing_requested_extras_are_an_error}},
        {"hook",
         {test_undecidable_slice_without_hook_needs_the_row_and_changes_nothing,
          test_hook_failures_and_disagreements_are_hook_errors,
          test_distribution_on_a_slice_equals_the_whole_row}},
        {"slicer",
         {test_slicer_builds_the_canonical_prefix_with_ties_and_extras,
          test_slicer_rejects_bad_arguments_and_rows}},
        {"property",
         {test_slices_agree_with_the_oracle_bitwise_or_ask_for_the_row,
          test_grammar_modes_agree_with_the_oracle_on_rows_and_slices,
          test_forced_grammar_tokens_are_extras_and_need_no_row,
          test_a_temperature_fallback_on_a_slice_matches_the_row}},
        {"cutoffs",
         {test_plan_of_epsilon_first_is_certified_with_a_recommended_k,
          test_plan_of_eta_first_is_whole_row_and_after_top_k_exact,
          test_epsilon_is_decided_on_a_slice_when_the_absent_tail_cannot_matter,
          test_epsilon_asks_for_the_row_when_an_absent_token_could_pass,
          test_epsilon_asks_for_the_row_when_absent_mass_could_flip_a_present_token}},
        {"cutoff_property",
         {test_probability_cutoffs_on_slices_agree_with_the_oracle_bitwise_or_ask}},
        {"device",
         {test_device_slices_in_any_order_and_tie_choice_agree_with_the_oracle_or_ask,
          test_grammar_modes_on_device_slices_agree_with_the_oracle_or_ask,
          test_probability_cutoffs_on_device_slices_agree_with_the_oracle_or_ask}},
        {"crosscheck",
         {test_cross_check_catches_a_slice_missing_a_top_token_and_changes_nothing,
          test_cross_check_catches_a_wrong_logit_and_a_wrong_extra,
          test_cross_check_catches_a_wrong_tie_under_the_canonical_flag_only,
          test_cross_check_without_a_hook_is_skipped_and_bad_settings_are_refused,
          test_cross_check_catches_a_token_that_differs_from_the_whole_row,
          test_cross_check_on_or_off_gives_the_same_tokens_and_right_slices_never_trip_it}},
        {"prompt", {test_prompt_tokens_fill_windows_but_not_grammars}},
        {"extras",
         {test_extras_tied_with_a_device_sets_smallest_logit_rank_by_id,
          test_allowed_extras_tied_with_a_device_set_rank_by_id,
          test_a_list_of_extras_longer_than_the_row_keeps_every_raised_token,
          test_a_slice_missing_a_requested_extra_is_refused_when_the_list_is_longer_than_v}},
        {"errors",
         {test_a_slice_error_after_an_early_walk_exit_reaches_the_caller,
          test_the_walk_leaves_the_context_error_pointer_as_it_found_it,
          test_greedy_distribution_on_a_slice_runs_every_stage_before_it}},
    };
    for (size_t g = 0; g < N(groups); g++) {
        TCase *tc = tcase_create(groups[g].name);
        if (strcmp(groups[g].name, "property") == 0 || strcmp(groups[g].name, "device") == 0 ||
            strcmp(groups[g].name, "cutoff_property") == 0)
            tcase_set_timeout(tc, 900); /* the property runs; the rest: Check's default */
        for (size_t i = 0; i < N(groups[g].tests) && groups[g].tests[i]; i++)
            tcase_add_test(tc, groups[g].tests[i]);
        suite_add_tcase(s, tc);
    }
    return s;
}

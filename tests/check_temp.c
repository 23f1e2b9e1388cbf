/*
 * check_temp.c - temperature, dynamic temperature, top-n-sigma and the two
 * mirostat selectors: hand-computed distributions, edge cases, parameter
 * validation, capability classes, mirostat's mu life cycle, and agreement
 * with the naive oracle on the hand cases.
 *
 * Expected probabilities are written out in the comments and recomputed
 * with libm in double here (the test, not the library, may use libm); sift
 * quantises weights to 2^-62 and its expf is within an ulp of float, so
 * 1e-6 is a comfortable tolerance.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"

#define TOL 1e-6
#define NROW(r) ((int32_t)(sizeof(r) / sizeof((r)[0])))

/* The final distribution; asserts success. */
static size_t dist_of(sift_chain *c, const float *row, int32_t V, sift_token_prob *out, size_t cap)
{
    size_t n = 0;
    sift_error err;
    sift_status s = sift_chain_distribution(c, row, V, out, cap, &n, &err);
    ck_assert_msg(s == SIFT_OK, "distribution failed: %s", err.message);
    return n;
}

/* softmax of x[0..n) at index i, in double with libm */
static double softmax_at(const double *x, size_t n, size_t i)
{
    double m = x[0];
    for (size_t j = 1; j < n; j++)
        m = x[j] > m ? x[j] : m;
    double s = 0;
    for (size_t j = 0; j < n; j++)
        s += exp(x[j] - m);
    return exp(x[i] - m) / s;
}

/* ------------------------------------------------------------------ */
/* temp                                                                */
/* ------------------------------------------------------------------ */

START_TEST(test_temp_divides_every_logit_by_t)
{
    /* {1, 2, 3} / 0.5 = {2, 4, 6}; p = e^{l-6} / (1 + e^-2 + e^-4):
     * 0.866813, 0.117310, 0.015876 in canonical order (ids 2, 1, 0). */
    const float row[] = {1.0f, 2.0f, 3.0f};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.5f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_token_prob out[3];
    ck_assert_uint_eq(dist_of(c, row, 3, out, 3), 3);
    const double x[] = {6, 4, 2};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(out[i].id, 2 - i);
        ck_assert_float_eq(out[i].logit, (float)x[i]);
        ck_assert_double_eq_tol(out[i].p, softmax_at(x, 3, (size_t)i), TOL);
    }
    ck_assert_double_eq_tol(out[0].p, 0.866813, 1e-6);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_temp_one_changes_nothing_and_is_identity)
{
    const float row[] = {0.5f, -1.25f, 3.0f, -INFINITY};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp(c, 1.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    int64_t n = -5;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_IDENTITY);
    ck_assert_int_eq(n, 0);
    sift_token_prob out[4];
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 4);
    ck_assert_int_eq(out[0].id, 2);
    ck_assert_float_eq(out[0].logit, 3.0f);
    ck_assert_float_eq(out[1].logit, 0.5f);
    ck_assert_float_eq(out[2].logit, -1.25f);
    ck_assert(isinf(out[3].logit) && out[3].logit < 0);
    ck_assert_double_eq(out[3].p, 0.0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_temp_zero_or_negative_keeps_only_the_canonical_first_token)
{
    /* ties at the top: id 1 beats id 3 */
    const float row[] = {0.0f, 2.0f, -1.0f, 2.0f};
    const float ts[] = {0.0f, -0.0f, -1.0f, -1e30f};
    for (size_t k = 0; k < 4; k++) {
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_temp(c, ts[k], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        int64_t n = 0;
        ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_TOP);
        ck_assert_int_eq(n, 1);
        sift_token_prob out[4];
        ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 1);
        ck_assert_int_eq(out[0].id, 1);
        ck_assert_float_eq(out[0].logit, 2.0f); /* not divided */
        ck_assert_double_eq(out[0].p, 1.0);
        uint64_t before[4], after[4];
        sift__chain_rng_state(c, before);
        int32_t tok = -1;
        ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, NULL), SIFT_OK);
        sift__chain_rng_state(c, after);
        ck_assert_int_eq(tok, 1);
        /* dist on one candidate draws nothing */
        ck_assert_mem_eq(before, after, sizeof before);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_temp_that_overflows_falls_back_to_greedy)
{
    /* 4 / 1e-30 = 4e30 is fine, 4 / 1e-38 = 4e38 overflows to +inf:
     * greedy, the tie broken by the smaller id. */
    const float row[] = {1.0f, 4.0f, 4.0f, -INFINITY};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp(c, 1e-38f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_token_prob out[4];
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 1);
    ck_assert_int_eq(out[0].id, 1);
    ck_assert_float_eq(out[0].logit, 4.0f);
    sift_chain_free(c);
    /* a subnormal temperature too */
    c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp(c, 1e-45f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 1);
    ck_assert_int_eq(out[0].id, 1);
    sift_chain_free(c);
    /* 1e-30 does not overflow: every logit divided */
    c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp(c, 1e-30f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 4);
    ck_assert_float_eq(out[0].logit, 4.0f / 1e-30f);
    ck_assert_double_eq_tol(out[0].p, 0.5, TOL); /* the tie shares the mass */
    ck_assert_double_eq_tol(out[1].p, 0.5, TOL);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_temp_that_sends_the_largest_logit_to_minus_inf_falls_back_to_greedy)
{
    /* -1e30 / 1e-30 = -1e60 rounds to -inf: without the fallback the row
     * would be all -inf. */
    const float row[] = {-2e30f, -1e30f, -3e30f};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp(c, 1e-30f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_token_prob out[3];
    ck_assert_uint_eq(dist_of(c, row, 3, out, 3), 1);
    ck_assert_int_eq(out[0].id, 1);
    ck_assert_float_eq(out[0].logit, -1e30f);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_temp_never_produces_nan_on_extreme_rows)
{
    tu_rng r = {77};
    const float ts[] = {1e-38f, 1e-45f, 1e-30f, 3e38f, 0.5f, FLT_MIN};
    float row[64];
    for (int it = 0; it < 400; it++) {
        int32_t V = (int32_t)tu_range(&r, 1, 64);
        tu_row(&r, row, V, it % 2 ? TU_ROW_HUGE : (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        sift_chain *c = tu_chain_new((uint64_t)it, NULL);
        ck_assert_int_eq(sift_chain_add_temp(c, ts[it % 6], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        int32_t tok = -1;
        sift_error err;
        ck_assert_msg(sift_chain_sample(c, row, V, &tok, &err) == SIFT_OK, "%s", err.message);
        sift_token_prob out[64];
        size_t n = dist_of(c, row, V, out, 64);
        for (size_t i = 0; i < n; i++) {
            ck_assert(!isnan(out[i].logit) && out[i].logit != INFINITY);
            ck_assert(out[i].p >= 0.0 && out[i].p <= 1.0);
        }
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_temp_keeps_minus_inf_tokens_at_minus_inf)
{
    const float row[] = {-INFINITY, 1.0f, -INFINITY};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp(c, 2.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_token_prob out[3];
    ck_assert_uint_eq(dist_of(c, row, 3, out, 3), 3);
    ck_assert_float_eq(out[0].logit, 0.5f);
    ck_assert_double_eq(out[0].p, 1.0);
    ck_assert(out[1].logit == -INFINITY && out[2].logit == -INFINITY);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_temp_rejects_nan_and_infinite_temperatures)
{
    sift_chain *c = tu_chain_new(1, NULL);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        sift_error err;
        ck_assert_int_eq(sift_chain_add_temp(c, bad[i], &err), SIFT_E_ARG);
        ck_assert_int_eq(err.code, SIFT_E_ARG);
        ck_assert_ptr_nonnull(strstr(err.message, "temp"));
    }
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    ck_assert_int_eq(sift_chain_add_temp(NULL, 1.0f, NULL), SIFT_E_ARG);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_temp_above_zero_is_monotone_on_random_rows)
{
    /* class MONOTONE: the set is unchanged and the canonical order of the
     * input never inverts (ties may appear). */
    tu_rng r = {5};
    float row[300];
    sift_token_prob out[300];
    for (int it = 0; it < 200; it++) {
        int32_t V = (int32_t)tu_range(&r, 1, 300);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        float t = (float)(0.05 + 3.0 * tu_unif(&r));
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_temp(c, t, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_stage_class(c, 0, NULL), SIFT_CLASS_MONOTONE);
        size_t n = dist_of(c, row, V, out, 300);
        if (n == 1 && V > 1) {
            sift_chain_free(c);
            continue; /* overflow fallback (TU_ROW_HUGE) */
        }
        ck_assert_uint_eq(n, (size_t)V);
        for (size_t i = 0; i + 1 < n; i++) {
            float a = row[out[i].id], b = row[out[i + 1].id];
            ck_assert(a > b || (a == b && out[i].id < out[i + 1].id) ||
                      out[i].logit == out[i + 1].logit);
            ck_assert(out[i].logit >= out[i + 1].logit);
            ck_assert_float_eq(out[i].logit, row[out[i].id] / t);
        }
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_temp_before_top_k_is_decided_from_the_row_prefix)
{
    /* temp is MONOTONE with a bound map, so [temp, top_k, dist] runs on
     * the row's top 13 (+ margin) and must still match the oracle, which
     * works on the whole sorted row. The overflow fallback changes the
     * size, so that step goes back to the whole row. */
    tu_rng r = {41};
    int32_t V = 8192;
    float *row = malloc((size_t)V * sizeof *row);
    const float ts[] = {0.5f, 2.0f, 1e-38f, 0.9f};
    uint64_t decided = 0;
    for (int it = 0; it < 16; it++) {
        tu_row(&r, row, V, it % 4 == 2 ? TU_ROW_NORMAL : (int)tu_range(&r, 0, 4));
        if (it % 4 == 2)
            row[17] = 30.0f; /* 30 / 1e-38 overflows */
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = (uint64_t)it;
        spec.n = 3;
        spec.st[0].kind = SP_TEMP;
        spec.st[0].f0 = ts[it % 4];
        spec.st[1].kind = SP_TOP_K;
        spec.st[1].i0 = 5;
        spec.st[2].kind = SP_DIST;
        sift_chain *c = NULL;
        ck_assert_int_eq(sp_build(&spec, &c, NULL), SIFT_OK);
        or_chain o;
        or_init(&o, &spec);
        int32_t ts_ = -1, to = -1;
        uint64_t dec = c->n_prefix_decided, fb = c->n_prefix_fallback;
        ck_assert_int_eq(sift_chain_sample(c, row, V, &ts_, NULL), SIFT_OK);
        ck_assert_int_eq(or_sample(&o, row, V, &to), SIFT_OK);
        ck_assert_int_eq(ts_, to);
        uint64_t rs[4];
        sift__chain_rng_state(c, rs);
        ck_assert_mem_eq(rs, o.rng.s, sizeof rs);
        if (it % 4 == 2) {
            ck_assert_int_eq(ts_, 17);
            ck_assert_uint_eq(c->n_prefix_fallback, fb + 1);
        } else {
            ck_assert_uint_eq(c->n_prefix_decided + c->n_prefix_fallback, dec + fb + 1);
            decided += c->n_prefix_decided - dec;
        }
        or_free(&o);
        sift_chain_free(c);
    }
    ck_assert_uint_ge(decided, 6); /* most of the 12 ordinary steps */
    free(row);
}
END_TEST

/* ------------------------------------------------------------------ */
/* temp_ext                                                            */
/* ------------------------------------------------------------------ */

START_TEST(test_temp_ext_scales_temperature_with_normalised_entropy)
{
    /* row {1, 0}: p = (0.731059, 0.268941), H = 0.582203 nats,
     * Hmax = ln 2, H / Hmax = 0.839942. t = 1, delta = 0.5, exponent 1:
     * dyn = 0.5 + 1.0 * 0.839942 = 1.339942; logits {0.746301, 0};
     * p0 = 1 / (1 + e^-0.746301) = 0.678372. Exponent 2: dyn = 0.5 +
     * 0.705502 = 1.205502, p0 = 1 / (1 + e^-0.829530) = 0.696256. */
    const float row[] = {1.0f, 0.0f};
    const float expo[] = {1.0f, 2.0f};
    for (int e = 0; e < 2; e++) {
        double p0 = 1.0 / (1.0 + exp(-1.0)), p1 = 1.0 - p0;
        double H = -(p0 * log(p0) + p1 * log(p1));
        double dyn = 0.5 + 1.0 * pow(H / log(2.0), expo[e]);
        double q0 = 1.0 / (1.0 + exp(-(double)(1.0f / (float)dyn)));
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_temp_ext(c, 1.0f, 0.5f, expo[e], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_stage_class(c, 0, NULL), SIFT_CLASS_WHOLE);
        sift_token_prob out[2];
        ck_assert_uint_eq(dist_of(c, row, 2, out, 2), 2);
        ck_assert_int_eq(out[0].id, 0);
        ck_assert_double_eq_tol(out[0].logit, 1.0 / dyn, 1e-6);
        ck_assert_double_eq_tol(out[0].p, q0, TOL);
        ck_assert_double_eq_tol(out[0].p, e == 0 ? 0.678372 : 0.696256, 2e-6);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_temp_ext_at_maximum_entropy_uses_temp_plus_delta)
{
    /* uniform over 4 finite tokens (and two -inf): H = ln 4... of the
     * six candidates Hmax = ln 6, so H / Hmax = ln 4 / ln 6 = 0.773706;
     * with exponent 1, t = 2, delta = 1: dyn = 1 + 2 * 0.773706. */
    const float row[] = {3.0f, 3.0f, -INFINITY, 3.0f, -INFINITY, 3.0f};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp_ext(c, 2.0f, 1.0f, 1.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_token_prob out[6];
    ck_assert_uint_eq(dist_of(c, row, 6, out, 6), 6);
    double dyn = 1.0 + 2.0 * (log(4.0) / log(6.0));
    ck_assert_double_eq_tol(out[0].logit, 3.0 / dyn, 1e-6);
    for (int i = 0; i < 4; i++)
        ck_assert_double_eq_tol(out[i].p, 0.25, TOL);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_temp_ext_at_zero_entropy_with_delta_above_temp_is_greedy)
{
    /* one finite token: H = 0, dyn = min_t = max(0, 0.5 - 1) = 0: greedy,
     * which also drops the -inf tokens. */
    const float row[] = {-INFINITY, -INFINITY, 4.0f, -INFINITY};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp_ext(c, 0.5f, 1.0f, 1.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_token_prob out[4];
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 1);
    ck_assert_int_eq(out[0].id, 2);
    ck_assert_float_eq(out[0].logit, 4.0f);
    sift_chain_free(c);
    /* with delta < temp, min_t = 0.25: the finite logit is divided */
    c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp_ext(c, 0.5f, 0.25f, 1.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 4);
    ck_assert_float_eq(out[0].logit, 16.0f);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_temp_ext_leaves_a_single_candidate_alone)
{
    const float row[] = {7.0f};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp_ext(c, 0.5f, 0.25f, 1.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_token_prob out[1];
    ck_assert_uint_eq(dist_of(c, row, 1, out, 1), 1);
    ck_assert_float_eq(out[0].logit, 7.0f);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_temp_ext_with_zero_delta_is_plain_temperature)
{
    tu_rng r = {9};
    float row[200];
    sift_token_prob a[200], b[200];
    const float ts[] = {1.0f, 0.0f, -2.0f, 0.7f, 1.5f, 1e-38f};
    for (int it = 0; it < 60; it++) {
        int32_t V = (int32_t)tu_range(&r, 1, 200);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        float t = ts[it % 6];
        sift_chain *c1 = tu_chain_new(3, NULL), *c2 = tu_chain_new(3, NULL);
        ck_assert_int_eq(sift_chain_add_temp(c1, t, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_temp_ext(c2, t, 0.0f, 1.0f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c1, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c2, NULL), SIFT_OK);
        int64_t n1, n2;
        ck_assert_int_eq(sift_chain_stage_class(c1, 0, &n1), sift_chain_stage_class(c2, 0, &n2));
        ck_assert_int_eq(n1, n2);
        size_t k1 = dist_of(c1, row, V, a, 200), k2 = dist_of(c2, row, V, b, 200);
        ck_assert_uint_eq(k1, k2);
        for (size_t i = 0; i < k1; i++) {
            ck_assert_int_eq(a[i].id, b[i].id);
            ck_assert_mem_eq(&a[i].logit, &b[i].logit, sizeof(float));
            ck_assert_mem_eq(&a[i].p, &b[i].p, sizeof(double));
        }
        sift_chain_free(c1);
        sift_chain_free(c2);
    }
}
END_TEST

START_TEST(test_temp_ext_with_overflowing_temp_plus_delta_stays_finite)
{
    const float row[] = {-INFINITY, 1.0f, -3e38f, 2.0f};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_temp_ext(c, 3e38f, 3e38f, 0.5f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_token_prob out[4];
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 4);
    for (int i = 0; i < 4; i++)
        ck_assert(!isnan(out[i].logit) && !isnan(out[i].p));
    ck_assert(out[3].logit == -INFINITY);
    int32_t tok;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, NULL), SIFT_OK);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_temp_ext_rejects_bad_parameters)
{
    sift_chain *c = tu_chain_new(1, NULL);
    struct {
        float t, d, e;
        const char *word;
    } bad[] = {
        {NAN, 0.5f, 1.0f, "temp"},          {INFINITY, 0.5f, 1.0f, "temp"},
        {1.0f, NAN, 1.0f, "delta"},         {1.0f, INFINITY, 1.0f, "delta"},
        {1.0f, -0.1f, 1.0f, "delta"},       {1.0f, 0.5f, 0.0f, "exponent"},
        {1.0f, 0.5f, -1.0f, "exponent"},    {1.0f, 0.5f, NAN, "exponent"},
        {1.0f, 0.5f, INFINITY, "exponent"}, {1.0f, 0.0f, 0.0f, "exponent"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sift_error err;
        ck_assert_int_eq(sift_chain_add_temp_ext(c, bad[i].t, bad[i].d, bad[i].e, &err),
                         SIFT_E_ARG);
        ck_assert_msg(strstr(err.message, "temp_ext") && strstr(err.message, bad[i].word),
                      "message '%s' should name %s", err.message, bad[i].word);
    }
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    /* valid edges */
    ck_assert_int_eq(sift_chain_add_temp_ext(c, -1.0f, 0.0f, 1.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp_ext(c, 0.0f, 5.0f, 1e-3f, NULL), SIFT_OK);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* top_n_sigma                                                         */
/* ------------------------------------------------------------------ */

/* top_n_sigma's two fused passes (the sums go straight into the eight
 * lanes of the id-order sum) against the oracle, which stores the values
 * and sums them with its copy of the definition: rows of every shape,
 * with -inf runs that shift the lanes (lengths around multiples of 8),
 * each whole distribution and the token compared. */
START_TEST(test_top_n_sigma_matches_the_oracle_on_rows_with_minus_inf_runs)
{
    tu_rng r = {4242};
    float *row = malloc(20000 * sizeof *row);
    sift_token_prob *out = malloc(20000 * sizeof *out);
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(out);
    for (int it = 0; it < 60; it++) {
        int32_t V = it < 40 ? (int32_t)tu_range(&r, 2, 300) : (int32_t)tu_range(&r, 1000, 20000);
        tu_row(&r, row, V, it % 3 == 0 ? TU_ROW_NEG_INF : (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        if (it % 5 == 1)
            for (int32_t i = 0; i < V; i += (int32_t)tu_range(&r, 1, 11))
                row[i] = -INFINITY;
        row[tu_range(&r, 0, V - 1)] = 1.0f; /* one finite at least */
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = (uint64_t)it;
        spec.n = 2;
        spec.st[0].kind = SP_TOP_N_SIGMA;
        spec.st[0].f0 = (float)tu_range(&r, 1, 30) * 0.1f;
        spec.st[1].kind = SP_DIST;
        sift_chain *c = NULL;
        ck_assert_int_eq(sp_build(&spec, &c, NULL), SIFT_OK);
        or_chain o;
        or_init(&o, &spec);
        int32_t ts_ = -1, to = -1;
        ck_assert_int_eq(sift_chain_sample(c, row, V, &ts_, NULL), SIFT_OK);
        ck_assert_int_eq(or_sample(&o, row, V, &to), SIFT_OK);
        ck_assert_int_eq(ts_, to);
        or_arr oa;
        ck_assert_int_eq(or_run_stages(&o, row, V, 1, &oa), SIFT_OK);
        size_t n = 0;
        ck_assert_int_eq(sift_chain_distribution(c, row, V, out, (size_t)V, &n, NULL), SIFT_OK);
        ck_assert_uint_eq(n, oa.n);
        for (size_t i = 0; i < n; i++) {
            ck_assert_int_eq(out[i].id, oa.c[i].id);
            ck_assert_int_eq(memcmp(&out[i].logit, &oa.c[i].logit, sizeof(float)), 0);
        }
        free(oa.c);
        or_free(&o);
        sift_chain_free(c);
    }
    free(out);
    free(row);
}
END_TEST

START_TEST(test_top_n_sigma_keeps_tokens_within_n_sigma_of_the_top)
{
    /* {0, 1, 2, 3, 4}: mean 2, population variance 2, sigma 1.414214.
     * n = 1: thr = 2.585786 keeps {4, 3}: p = 0.731059, 0.268941.
     * n = 2: thr = 1.171573 keeps {4, 3, 2}. n = 2.9: thr = -0.101 keeps
     * all. The -inf tokens are ignored by the statistics and removed. */
    const float row[] = {0.0f, 1.0f, -INFINITY, 2.0f, 3.0f, 4.0f, -INFINITY};
    const float ns[] = {1.0f, 2.0f, 2.9f};
    const size_t want[] = {2, 3, 5};
    for (int k = 0; k < 3; k++) {
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_top_n_sigma(c, ns[k], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_stage_class(c, 0, NULL), SIFT_CLASS_WHOLE);
        sift_token_prob out[7];
        ck_assert_uint_eq(dist_of(c, row, 7, out, 7), want[k]);
        ck_assert_int_eq(out[0].id, 5);
        ck_assert_int_eq(out[1].id, 4);
        if (k == 0) {
            ck_assert_double_eq_tol(out[0].p, 1.0 / (1.0 + exp(-1.0)), TOL);
            ck_assert_double_eq_tol(out[1].p, 0.268941, 1e-6);
        }
        for (size_t i = 0; i < want[k]; i++)
            ck_assert(out[i].logit > -INFINITY);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_top_n_sigma_keeps_every_token_of_an_all_equal_row)
{
    const float row[] = {1.5f, 1.5f, 1.5f, 1.5f, -INFINITY};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_top_n_sigma(c, 0.01f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_token_prob out[5];
    ck_assert_uint_eq(dist_of(c, row, 5, out, 5), 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(out[i].id, i);
        ck_assert_double_eq_tol(out[i].p, 0.25, TOL);
    }
    sift_chain_free(c);
}
END_TEST

START_TEST(test_top_n_sigma_with_n_at_most_zero_is_identity)
{
    const float row[] = {0.0f, 9.0f, -INFINITY};
    const float ns[] = {0.0f, -1.0f, -0.0f};
    for (int k = 0; k < 3; k++) {
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_top_n_sigma(c, ns[k], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_stage_class(c, 0, NULL), SIFT_CLASS_IDENTITY);
        sift_token_prob out[3];
        ck_assert_uint_eq(dist_of(c, row, 3, out, 3), 3);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_top_n_sigma_keeps_the_single_finite_token)
{
    const float row[] = {-INFINITY, -2.0f, -INFINITY};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_top_n_sigma(c, 1.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_token_prob out[3];
    ck_assert_uint_eq(dist_of(c, row, 3, out, 3), 1);
    ck_assert_int_eq(out[0].id, 1);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_top_n_sigma_keeps_a_canonical_prefix_on_random_rows)
{
    /* The kept set is every token at or above a threshold: a canonical
     * prefix of the finite tokens, always holding the top token. */
    tu_rng r = {21};
    float row[500];
    sift_token_prob out[500];
    for (int it = 0; it < 200; it++) {
        int32_t V = (int32_t)tu_range(&r, 1, 500);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        float n = (float)(3.0 * tu_unif(&r));
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_top_n_sigma(c, n, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        size_t k = dist_of(c, row, V, out, 500);
        ck_assert_uint_ge(k, 1);
        float lo = out[k - 1].logit;
        size_t above = 0;
        float top = -INFINITY;
        for (int32_t i = 0; i < V; i++) {
            above += row[i] >= lo && row[i] > -INFINITY;
            top = row[i] > top ? row[i] : top;
        }
        ck_assert_float_eq(out[0].logit, top);
        if (V > 1)
            ck_assert_uint_eq(above, k);
        for (size_t i = 0; i < k; i++)
            ck_assert_float_eq(out[i].logit, row[out[i].id]); /* logits unchanged */
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_top_n_sigma_rejects_nan_and_infinite_n)
{
    sift_chain *c = tu_chain_new(1, NULL);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        sift_error err;
        ck_assert_int_eq(sift_chain_add_top_n_sigma(c, bad[i], &err), SIFT_E_ARG);
        ck_assert_ptr_nonnull(strstr(err.message, "top_n_sigma"));
    }
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* mirostat v1                                                         */
/* ------------------------------------------------------------------ */

/* v1's k for the row {3, 2, 1, 0} (every b_i = 1), with libm:
 * t_i = ln 2, ln 1.5, ln(4/3); s_hat = sum t_i / sum t_i^2 = 1.905341. */
static double v1_k_3210(double mu, double n_vocab, int pairs)
{
    double st = 0, st2 = 0;
    for (int i = 0; i < pairs; i++) {
        double t = log((i + 2.0) / (i + 1.0));
        st += t;
        st2 += t * t;
    }
    double s = st / st2, eps = s - 1;
    return pow(eps * pow(2, mu) / (1 - pow(n_vocab, -eps)), 1 / s);
}

START_TEST(test_mirostat_keeps_the_top_k_of_the_zipf_estimate)
{
    /* tau = 0: mu = 0, k = 1.132 -> 1 token. tau = 1.1: mu = 2.2,
     * k = 2.520 -> 2 tokens, p = 0.731059, 0.268941. tau = 5: mu = 10,
     * k = 43 -> all 4. */
    const float row[] = {3.0f, 2.0f, 1.0f, 0.0f};
    const float taus[] = {0.0f, 1.1f, 5.0f};
    const size_t want[] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        double k = v1_k_3210(2.0 * (double)taus[i], 4.0, 3);
        ck_assert_uint_eq(k > 4 ? 4 : (size_t)k, want[i]);
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_mirostat(c, 4, taus[i], 0.1f, 100, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_stage_class(c, 0, NULL), SIFT_CLASS_WHOLE);
        sift_token_prob out[4];
        ck_assert_uint_eq(dist_of(c, row, 4, out, 4), want[i]);
        for (size_t j = 0; j < want[i]; j++)
            ck_assert_int_eq(out[j].id, (int)j);
        if (i == 1) {
            ck_assert_double_eq_tol(out[0].p, 0.731059, 1e-6);
            ck_assert_double_eq_tol(out[1].p, 0.268941, 1e-6);
        }
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_mirostat_estimates_only_from_the_first_m_tokens)
{
    /* m = 2: one pair, s_hat = ln 2 * 1 / (ln 2)^2 = 1.442695; with
     * mu = 2.6, k = (0.442695 * 2^2.6 / (1 - 4^-0.442695))^(1 / 1.442695)
     * = 3.403 -> 3 tokens, where m = 100 (three pairs, s_hat = 1.905256)
     * gives k = 2.915 -> 2 tokens. */
    const float row[] = {3.0f, 2.0f, 1.0f, 0.0f};
    double k2 = v1_k_3210(2.6, 4.0, 1), k100 = v1_k_3210(2.6, 4.0, 3);
    ck_assert_uint_eq((size_t)k2, 3);
    ck_assert_uint_eq((size_t)k100, 2);
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat(c, 4, 1.3f, 0.1f, 2, NULL), SIFT_OK);
    sift_token_prob out[4];
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 3);
    sift_chain_free(c);
    c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat(c, 4, 1.3f, 0.1f, 100, NULL), SIFT_OK);
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 2);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_mirostat_without_a_finite_pair_uses_s_hat_zero)
{
    /* All equal: s_hat = 0, eps = -1, k = (2^mu / (n_vocab - 1))^inf:
     * mu = 0 (tau 0) -> (1/3)^inf = 0 -> 1 token; mu = 4 -> inf -> all. */
    const float row[] = {1.0f, 1.0f, 1.0f, 1.0f};
    sift_token_prob out[4];
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat(c, 4, 0.0f, 0.1f, 100, NULL), SIFT_OK);
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 1);
    ck_assert_int_eq(out[0].id, 0);
    sift_chain_free(c);
    c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat(c, 4, 2.0f, 0.1f, 100, NULL), SIFT_OK);
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 4);
    sift_chain_free(c);
    /* m = 1 never has a pair either; n_vocab = 1 gives a NaN k -> 1 */
    const float row2[] = {3.0f, 2.0f, 1.0f, 0.0f};
    c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat(c, 1, 5.0f, 0.1f, 1, NULL), SIFT_OK);
    ck_assert_uint_eq(dist_of(c, row2, 4, out, 4), 1);
    sift_chain_free(c);
    /* one finite token among -inf */
    const float row3[] = {-INFINITY, 2.0f, -INFINITY};
    c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat(c, 3, 5.0f, 0.1f, 100, NULL), SIFT_OK);
    int32_t tok = -1;
    ck_assert_int_eq(sift_chain_sample(c, row3, 3, &tok, NULL), SIFT_OK);
    ck_assert_int_eq(tok, 1);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_mirostat_draws_nothing_when_one_token_is_kept)
{
    const float row[] = {3.0f, 2.0f, 1.0f, 0.0f};
    sift_chain *c = tu_chain_new(8, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat(c, 4, 0.0f, 0.1f, 100, NULL), SIFT_OK);
    uint64_t before[4], after[4];
    sift__chain_rng_state(c, before);
    int32_t tok = -1;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, NULL), SIFT_OK);
    ck_assert_int_eq(tok, 0);
    sift__chain_rng_state(c, after);
    ck_assert_mem_eq(before, after, sizeof before);
    sift_chain_free(c);
    /* two kept: exactly one RNG output */
    c = tu_chain_new(8, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat(c, 4, 1.1f, 0.1f, 100, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, NULL), SIFT_OK);
    sift__chain_rng_state(c, after);
    sift__rng ref;
    sift__rng_seed(&ref, 8);
    (void)sift__rng_next(&ref);
    ck_assert_mem_eq(ref.s, after, sizeof after);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_mirostat_moves_mu_on_accept_of_the_sampled_token)
{
    /* tau = 1.1, eta = 1, mu = 2.2 keeps 2 tokens. Accepting token 0
     * (surprise -log2 0.731059 = 0.452) gives mu = 2.848 and k = 3.19;
     * accepting token 1 (surprise 1.894) gives mu = 1.406 and k = 1.89. */
    const float row[] = {3.0f, 2.0f, 1.0f, 0.0f};
    int seen[2] = {0, 0};
    for (uint64_t seed = 0; seed < 40; seed++) {
        sift_chain *c = tu_chain_new(seed, NULL);
        ck_assert_int_eq(sift_chain_add_mirostat(c, 4, 1.1f, 1.0f, 100, NULL), SIFT_OK);
        int32_t tok = -1;
        ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, NULL), SIFT_OK);
        ck_assert(tok == 0 || tok == 1);
        seen[tok] = 1;
        sift_token_prob out[4];
        ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 2); /* sample changed no mu */
        ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK);
        double p = tok == 0 ? 1 / (1 + exp(-1.0)) : 1 / (1 + exp(1.0));
        double mu = 2.2 - 1.0 * (-log2(p) - 1.1);
        size_t want = (size_t)v1_k_3210(mu, 4, 3);
        ck_assert_uint_eq(want, tok == 0 ? 3 : 1);
        ck_assert_uint_eq(dist_of(c, row, 4, out, 4), want);
        /* a second accept without a sample does not move mu again */
        ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK);
        ck_assert_uint_eq(dist_of(c, row, 4, out, 4), want);
        /* reset brings mu back to 2 tau */
        sift_chain_reset(c);
        ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 2);
        sift_chain_free(c);
    }
    ck_assert(seen[0] && seen[1]);
}
END_TEST

START_TEST(test_mirostat_ignores_accept_of_another_token)
{
    const float row[] = {3.0f, 2.0f, 1.0f, 0.0f};
    sift_chain *c = tu_chain_new(3, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat(c, 4, 1.1f, 1.0f, 100, NULL), SIFT_OK);
    uint64_t d0 = sift__chain_state_digest(c);
    int32_t tok = -1;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, 3, NULL), SIFT_OK); /* not sampled */
    sift_token_prob out[4];
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 2);
    /* and the pending record is gone: accepting tok now does nothing */
    ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK);
    ck_assert_uint_eq(dist_of(c, row, 4, out, 4), 2);
    /* mu is back where it was; only the RNG moved */
    sift_chain *fresh = tu_chain_new(3, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat(fresh, 4, 1.1f, 1.0f, 100, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__chain_state_digest(fresh), d0);
    ck_assert_int_eq(sift_chain_sample(fresh, row, 4, &tok, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(fresh, 3, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__chain_state_digest(fresh), sift__chain_state_digest(c));
    sift_chain_free(fresh);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_mirostat_failed_sample_changes_nothing)
{
    const float row[] = {3.0f, 2.0f, 1.0f, 0.0f};
    const float bad[] = {3.0f, NAN, 1.0f, 0.0f};
    sift_chain *c = tu_chain_new(3, NULL);
    ck_assert_int_eq(sift_chain_add_mirostat_v2(c, 1.5f, 1.0f, NULL), SIFT_OK);
    int32_t tok = -1;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, NULL), SIFT_OK);
    uint64_t d = sift__chain_state_digest(c);
    int32_t t2 = -1;
    ck_assert_int_eq(sift_chain_sample(c, bad, 4, &t2, NULL), SIFT_E_ROW_VALUE);
    ck_assert_uint_eq(sift__chain_state_digest(c), d);
    size_t n;
    sift_token_prob out[4];
    ck_assert_int_eq(sift_chain_distribution(c, row, 4, out, 4, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__chain_state_digest(c), d); /* distribution reads only */
    sift_chain_free(c);
}
END_TEST

START_TEST(test_mirostat_clone_copies_mu_and_the_pending_record)
{
    const float row[] = {3.0f, 2.0f, 1.0f, 0.0f};
    for (int v = 0; v < 2; v++) {
        sift_chain *a = tu_chain_new(11, NULL);
        if (v)
            ck_assert_int_eq(sift_chain_add_mirostat_v2(a, 1.5f, 1.0f, NULL), SIFT_OK);
        else
            ck_assert_int_eq(sift_chain_add_mirostat(a, 4, 1.1f, 1.0f, 100, NULL), SIFT_OK);
        int32_t tok = -1;
        ck_assert_int_eq(sift_chain_sample(a, row, 4, &tok, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(a, tok, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(a, row, 4, &tok, NULL), SIFT_OK);
        sift_chain *b = NULL;
        ck_assert_int_eq(sift_chain_clone(a, &b, NULL), SIFT_OK);
        ck_assert_uint_eq(sift__chain_state_digest(a), sift__chain_state_digest(b));
        ck_assert_int_eq(sift_chain_accept(a, tok, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b, tok, NULL), SIFT_OK);
        ck_assert_uint_eq(sift__chain_state_digest(a), sift__chain_state_digest(b));
        for (int s = 0; s < 5; s++) {
            int32_t ta, tb;
            ck_assert_int_eq(sift_chain_sample(a, row, 4, &ta, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_sample(b, row, 4, &tb, NULL), SIFT_OK);
            ck_assert_int_eq(ta, tb);
            ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(b, tb, NULL), SIFT_OK);
        }
        ck_assert_uint_eq(sift__chain_state_digest(a), sift__chain_state_digest(b));
        sift_chain_free(a);
        sift_chain_free(b);
    }
}
END_TEST

START_TEST(test_mirostat_reports_no_candidate_for_an_all_banned_row)
{
    /* A valid row cannot be all -inf, so a stage before the selector
     * (logit_bias) bans every token. */
    const float row[] = {1.0f, 2.0f};
    sift_bias b[2] = {{0, -INFINITY}, {1, -INFINITY}};
    for (int v = 0; v < 2; v++) {
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_logit_bias(c, b, 2, NULL), SIFT_OK);
        if (v)
            ck_assert_int_eq(sift_chain_add_mirostat_v2(c, 1.0f, 0.1f, NULL), SIFT_OK);
        else
            ck_assert_int_eq(sift_chain_add_mirostat(c, 2, 1.0f, 0.1f, 100, NULL), SIFT_OK);
        int32_t tok;
        sift_error err;
        ck_assert_int_eq(sift_chain_sample(c, row, 2, &tok, &err), SIFT_E_NO_CANDIDATE);
        size_t n;
        ck_assert_int_eq(sift_chain_distribution(c, row, 2, NULL, 0, &n, NULL),
                         SIFT_E_NO_CANDIDATE);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_mirostat_rejects_bad_parameters)
{
    sift_chain *c = tu_chain_new(1, NULL);
    struct {
        int32_t nv, m;
        float tau, eta;
        const char *word;
    } bad[] = {
        {10, 100, NAN, 0.1f, "tau"},     {10, 100, INFINITY, 0.1f, "tau"},
        {10, 100, -1.0f, 0.1f, "tau"},   {10, 100, 5.0f, NAN, "eta"},
        {10, 100, 5.0f, -0.1f, "eta"},   {10, 100, 5.0f, INFINITY, "eta"},
        {10, 0, 5.0f, 0.1f, "m"},        {10, -3, 5.0f, 0.1f, "m"},
        {0, 100, 5.0f, 0.1f, "n_vocab"}, {-1, 100, 5.0f, 0.1f, "n_vocab"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sift_error err;
        ck_assert_int_eq(
            sift_chain_add_mirostat(c, bad[i].nv, bad[i].tau, bad[i].eta, bad[i].m, &err),
            SIFT_E_ARG);
        ck_assert_msg(strstr(err.message, "mirostat") && strstr(err.message, bad[i].word),
                      "message '%s' should name %s", err.message, bad[i].word);
        if (i < 6) {
            ck_assert_int_eq(sift_chain_add_mirostat_v2(c, bad[i].tau, bad[i].eta, &err),
                             SIFT_E_ARG);
            ck_assert_ptr_nonnull(strstr(err.message, "mirostat_v2"));
            ck_assert_ptr_nonnull(strstr(err.message, bad[i].word));
        }
    }
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    ck_assert_int_eq(sift_chain_add_mirostat(NULL, 4, 1.0f, 1.0f, 1, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_mirostat_v2(NULL, 1.0f, 1.0f, NULL), SIFT_E_ARG);
    /* zero tau and eta are valid */
    ck_assert_int_eq(sift_chain_add_mirostat(c, 1, 0.0f, 0.0f, 1, NULL), SIFT_OK);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_mirostat_support_is_a_canonical_prefix_on_random_rows)
{
    tu_rng r = {31};
    float row[3000];
    sift_token_prob out[3000];
    for (int it = 0; it < 150; it++) {
        int32_t V = (int32_t)tu_range(&r, 1, 3000);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        sift_chain *c = tu_chain_new(1, NULL);
        float tau = (float)(10.0 * tu_unif(&r));
        if (it % 2)
            ck_assert_int_eq(sift_chain_add_mirostat_v2(c, tau, 0.1f, NULL), SIFT_OK);
        else
            ck_assert_int_eq(
                sift_chain_add_mirostat(c, V, tau, 0.1f, (int32_t)tu_range(&r, 1, 200), NULL),
                SIFT_OK);
        size_t k = dist_of(c, row, V, out, 3000);
        ck_assert_uint_ge(k, 1);
        /* every kept token comes canonically before every dropped one */
        size_t before = 0;
        for (int32_t i = 0; i < V; i++) {
            sift_candidate x = {i, row[i]};
            sift_candidate last = {out[k - 1].id, out[k - 1].logit};
            before += sift__canon_before(&x, &last) || i == last.id;
        }
        ck_assert_uint_eq(before, k);
        double sum = 0;
        for (size_t i = 0; i < k; i++)
            sum += out[i].p;
        ck_assert_double_eq_tol(sum, 1.0, 1e-9);
        int32_t tok = -1;
        ck_assert_int_eq(sift_chain_sample(c, row, V, &tok, NULL), SIFT_OK);
        int found = 0;
        for (size_t i = 0; i < k; i++)
            found |= out[i].id == tok && out[i].p > 0;
        ck_assert(found);
        sift_chain_free(c);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* mirostat v2                                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_mirostat_v2_keeps_tokens_whose_surprise_is_at_most_mu)
{
    /* {2, 1, 0}: p = 0.665241, 0.244728, 0.090031. mu = 2 tau;
     * thr = 2^-mu. tau 1 -> 0.25 keeps 1; tau 1.5 -> 0.125 keeps 2
     * (renormalised 0.731059, 0.268941); tau 2 -> 0.0625 keeps 3;
     * tau 0 -> 1: nothing qualifies, the top token alone. */
    const float row[] = {2.0f, 1.0f, 0.0f};
    const float taus[] = {1.0f, 1.5f, 2.0f, 0.0f};
    const size_t want[] = {1, 2, 3, 1};
    for (int i = 0; i < 4; i++) {
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_mirostat_v2(c, taus[i], 0.1f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_stage_class(c, 0, NULL), SIFT_CLASS_WHOLE);
        sift_token_prob out[3];
        ck_assert_uint_eq(dist_of(c, row, 3, out, 3), want[i]);
        ck_assert_int_eq(out[0].id, 0);
        if (i == 1) {
            ck_assert_double_eq_tol(out[0].p, 0.731059, 1e-6);
            ck_assert_double_eq_tol(out[1].p, 0.268941, 1e-6);
        }
        if (i == 2)
            ck_assert_double_eq_tol(out[2].p, 0.090031, 1e-6);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_mirostat_v2_moves_mu_on_accept_of_the_sampled_token)
{
    /* tau 1.5, eta 1, mu 3 keeps {0, 1}. Token 0: surprise 0.452, mu =
     * 4.048, thr 0.0604 keeps 3. Token 1: surprise 1.895, mu = 2.605,
     * thr 0.164 keeps 2. */
    const float row[] = {2.0f, 1.0f, 0.0f};
    int seen[2] = {0, 0};
    for (uint64_t seed = 0; seed < 40; seed++) {
        sift_chain *c = tu_chain_new(seed, NULL);
        ck_assert_int_eq(sift_chain_add_mirostat_v2(c, 1.5f, 1.0f, NULL), SIFT_OK);
        int32_t tok = -1;
        ck_assert_int_eq(sift_chain_sample(c, row, 3, &tok, NULL), SIFT_OK);
        ck_assert(tok == 0 || tok == 1);
        seen[tok] = 1;
        ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK);
        sift_token_prob out[3];
        ck_assert_uint_eq(dist_of(c, row, 3, out, 3), tok == 0 ? 3 : 2);
        sift_chain_reset(c);
        ck_assert_uint_eq(dist_of(c, row, 3, out, 3), 2);
        sift_chain_free(c);
    }
    ck_assert(seen[0] && seen[1]);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Storage order                                                       */
/* ------------------------------------------------------------------ */

static int cmp_cand_id(const void *pa, const void *pb)
{
    const sift_candidate *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

START_TEST(test_results_depend_on_the_candidate_set_not_its_storage_order)
{
    /* Each stage is driven directly on the same subset of a row stored in
     * id order and in canonical order; the surviving sets (and the
     * selectors' choices) must be identical. */
    tu_rng r = {55};
    int32_t maxV = 5000;
    sift_candidate *x = malloc((size_t)maxV * sizeof *x);
    sift_candidate *y = malloc((size_t)maxV * sizeof *y);
    float *row = malloc((size_t)maxV * sizeof *row);
    for (int it = 0; it < 120; it++) {
        int32_t V = (int32_t)tu_range(&r, 2, maxV);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        sift_chain *c = tu_chain_new(1, NULL);
        int kind = it % 5;
        sift_status st;
        if (kind == 0)
            st = sift_chain_add_temp_ext(c, (float)(2 * tu_unif(&r)), 1.0f, 1.5f, NULL);
        else if (kind == 1)
            st = sift_chain_add_top_n_sigma(c, (float)(3 * tu_unif(&r)), NULL);
        else if (kind == 2)
            st = sift_chain_add_temp(c, (float)(tu_unif(&r) - 0.2), NULL);
        else if (kind == 3)
            st = sift_chain_add_mirostat(c, V, (float)(8 * tu_unif(&r)), 0.1f,
                                         (int32_t)tu_range(&r, 1, 300), NULL);
        else
            st = sift_chain_add_mirostat_v2(c, (float)(8 * tu_unif(&r)), 0.1f, NULL);
        ck_assert_int_eq(st, SIFT_OK);
        ck_assert_int_eq(sift__ws_reserve(&c->ws, &c->al, (size_t)V, NULL), SIFT_OK);
        /* a random subset, never empty */
        size_t n = 0;
        double keep = tu_unif(&r) < 0.5 ? 1.0 : 0.3 + 0.7 * tu_unif(&r);
        for (int32_t i = 0; i < V; i++)
            if (tu_unif(&r) < keep || (n == 0 && i == V - 1)) {
                x[n].id = i;
                x[n].logit = row[i];
                n++;
            }
        memcpy(y, x, n * sizeof *x);
        sift__arr ax = {x, n, V, SIFT__ORDER_ID, n == (size_t)V};
        sift__arr ay = {y, n, V, SIFT__ORDER_ID, n == (size_t)V};
        sift__ctx cx, cy;
        memset(&cx, 0, sizeof cx);
        cx.ws = &c->ws;
        cx.selected = -1;
        sift__rng_seed(&cx.rng, (uint64_t)it);
        cy = cx;
        sift__arr_canon(&cy, &ay);
        sift__stage *stage = c->stages[0];
        sift_status sx = stage->ops->apply(stage, &cx, &ax);
        sift_status sy = stage->ops->apply(stage, &cy, &ay);
        ck_assert_int_eq(sx, sy);
        if (sx == SIFT_OK) {
            ck_assert_uint_eq(ax.n, ay.n);
            ck_assert_int_eq(cx.selected, cy.selected);
            ck_assert_mem_eq(cx.rng.s, cy.rng.s, sizeof cx.rng.s);
            qsort(x, ax.n, sizeof *x, cmp_cand_id);
            qsort(y, ay.n, sizeof *y, cmp_cand_id);
            ck_assert_mem_eq(x, y, ax.n * sizeof *x);
        }
        sift_chain_free(c);
    }
    free(x);
    free(y);
    free(row);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The oracle on the hand cases                                        */
/* ------------------------------------------------------------------ */

static void agree(const sp_chain *spec, const float *row, int32_t V, int steps)
{
    sift_chain *c = NULL;
    ck_assert_int_eq(sp_build(spec, &c, NULL), SIFT_OK);
    or_chain o;
    or_init(&o, spec);
    for (int s = 0; s < steps; s++) {
        int32_t ts = -1, to = -1;
        sift_status ss = sift_chain_sample(c, row, V, &ts, NULL);
        sift_status so = or_sample(&o, row, V, &to);
        ck_assert_int_eq(ss, so);
        if (ss != SIFT_OK)
            break;
        ck_assert_int_eq(ts, to);
        uint64_t rs[4];
        sift__chain_rng_state(c, rs);
        ck_assert_mem_eq(rs, o.rng.s, sizeof rs);
        ck_assert_int_eq(sift_chain_accept(c, ts, NULL), SIFT_OK);
        or_accept(&o, ts);
    }
    or_free(&o);
    sift_chain_free(c);
}

START_TEST(test_oracle_agrees_on_the_hand_cases)
{
    const float r4[] = {3.0f, 2.0f, 1.0f, 0.0f};
    const float r7[] = {0.0f, 1.0f, -INFINITY, 2.0f, 3.0f, 4.0f, -INFINITY};
    const float rh[] = {-2e30f, -1e30f, -3e30f, -INFINITY};
    for (uint64_t seed = 0; seed < 20; seed++) {
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = seed;
        spec.n = 2;
        spec.st[0].kind = SP_TEMP;
        spec.st[0].f0 = 0.5f;
        spec.st[1].kind = SP_DIST;
        agree(&spec, r4, 4, 3);
        spec.st[0].f0 = 1e-30f;
        agree(&spec, rh, 4, 3);
        spec.st[0].kind = SP_TEMP_EXT;
        spec.st[0].f0 = 1.0f;
        spec.st[0].f1 = 0.5f;
        spec.st[0].f2 = 2.0f;
        agree(&spec, r7, 7, 3);
        spec.st[0].kind = SP_TOP_N_SIGMA;
        spec.st[0].f0 = 1.0f;
        agree(&spec, r7, 7, 3);
        spec.st[0].kind = SP_TEMP;
        spec.st[0].f0 = 1.0f;
        spec.st[1].kind = SP_MIROSTAT;
        spec.st[1].f0 = 1.1f;
        spec.st[1].f1 = 1.0f;
        spec.st[1].i0 = 100;
        spec.st[1].i1 = 4;
        agree(&spec, r4, 4, 8);
        spec.st[1].kind = SP_MIROSTAT_V2;
        spec.st[1].f0 = 1.5f;
        agree(&spec, r4, 4, 8);
        agree(&spec, r7, 7, 8);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* adaptive_p                                                          */
/* ------------------------------------------------------------------ */

static sift_chain *adaptive_chain(uint64_t seed, float target, float decay)
{
    sift_chain *c = tu_chain_new(seed, NULL);
    ck_assert_int_eq(sift_chain_add_adaptive_p(c, target, decay, NULL), SIFT_OK);
    return c;
}

/* probs {0.5, 0.3, 0.2} and target 0.3 (average 0.3 at creation, so
 * A = 0.3): d = {2/3, 0, 1/3}, logits 5 - 10 d^2 / (1 + d) =
 * {2.3333, 5, 4.1667}: the draw prefers the token nearest the target. */
START_TEST(test_adaptive_p_reshapes_the_distribution_around_the_adapted_target)
{
    float row[3];
    const float pr[3] = {0.5f, 0.3f, 0.2f};
    for (int i = 0; i < 3; i++)
        row[i] = sift__logf(pr[i]);
    sift_chain *c = adaptive_chain(1, 0.3f, 0.9f);
    sift_token_prob out[3];
    ck_assert_uint_eq(dist_of(c, row, 3, out, 3), 3);
    const int32_t ids[3] = {1, 2, 0};
    const double want[3] = {5.0, 4.0 + 1.0 / 6.0, 2.0 + 1.0 / 3.0};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(out[i].id, ids[i]);
        ck_assert_double_eq_tol((double)out[i].logit, want[i], 1e-5);
    }
    sift_chain_free(c);
}
END_TEST

/* Accepting the sampled token moves the average with that token's
 * original probability (so the next distribution changes); accepting
 * another token, or accepting twice, moves nothing; reset restores the
 * creation state. */
START_TEST(test_adaptive_p_moves_its_average_only_on_accept_of_the_sampled_token)
{
    const float row[] = {2.0f, 1.0f, 0.0f, -1.0f};
    sift_chain *c = adaptive_chain(7, 0.5f, 0.5f);
    uint64_t d0 = sift__chain_state_digest(c);
    sift_token_prob at0[4], now[4];
    ck_assert_uint_eq(dist_of(c, row, 4, at0, 4), 4);
    int32_t tok = -1;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, tok == 3 ? 2 : 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK); /* record gone */
    ck_assert_uint_eq(dist_of(c, row, 4, now, 4), 4);
    for (int i = 0; i < 4; i++)
        ck_assert(now[i].id == at0[i].id && now[i].p == at0[i].p);
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK);
    uint64_t d1 = sift__chain_state_digest(c);
    ck_assert_uint_eq(dist_of(c, row, 4, now, 4), 4);
    int differs = 0;
    for (int i = 0; i < 4; i++)
        differs |= now[i].p != at0[i].p;
    ck_assert(differs);
    ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__chain_state_digest(c), d1);
    sift_chain_reset(c);
    ck_assert_uint_eq(sift__chain_state_digest(c), d0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_adaptive_p_clone_copies_the_average_and_the_pending_record)
{
    const float row[] = {3.0f, 2.0f, 1.0f, 0.0f, -0.5f};
    sift_chain *a = adaptive_chain(11, 0.4f, 0.9f);
    int32_t tok = -1;
    ck_assert_int_eq(sift_chain_sample(a, row, 5, &tok, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(a, tok, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(a, row, 5, &tok, NULL), SIFT_OK);
    sift_chain *b = NULL;
    ck_assert_int_eq(sift_chain_clone(a, &b, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__chain_state_digest(a), sift__chain_state_digest(b));
    ck_assert_int_eq(sift_chain_accept(a, tok, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(b, tok, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__chain_state_digest(a), sift__chain_state_digest(b));
    for (int s = 0; s < 8; s++) {
        int32_t ta, tb;
        ck_assert_int_eq(sift_chain_sample(a, row, 5, &ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(b, row, 5, &tb, NULL), SIFT_OK);
        ck_assert_int_eq(ta, tb);
        ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b, tb, NULL), SIFT_OK);
    }
    ck_assert_uint_eq(sift__chain_state_digest(a), sift__chain_state_digest(b));
    sift_chain_free(a);
    sift_chain_free(b);
}
END_TEST

/* A negative target is dist: the same tokens and RNG, and no state. */
START_TEST(test_adaptive_p_with_a_negative_target_is_dist)
{
    tu_rng r = {99};
    float row[300];
    sift_chain *a = adaptive_chain(5, -1.0f, 0.9f), *b = tu_chain_new(5, NULL);
    ck_assert_int_eq(sift_chain_add_dist(b, NULL), SIFT_OK);
    for (int s = 0; s < 50; s++) {
        tu_row(&r, row, 300, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        int32_t ta, tb;
        ck_assert_int_eq(sift_chain_sample(a, row, 300, &ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(b, row, 300, &tb, NULL), SIFT_OK);
        ck_assert_int_eq(ta, tb);
        ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
        sift_token_prob da[300], db[300];
        size_t na = dist_of(a, row, 300, da, 300), nb = dist_of(b, row, 300, db, 300);
        ck_assert_uint_eq(na, nb);
        for (size_t i = 0; i < na; i++)
            ck_assert(da[i].id == db[i].id && da[i].p == db[i].p);
    }
    uint64_t ra[4], rb[4];
    sift__chain_rng_state(a, ra);
    sift__chain_rng_state(b, rb);
    ck_assert(memcmp(ra, rb, sizeof ra) == 0);
    sift_chain_free(a);
    sift_chain_free(b);
}
END_TEST

START_TEST(test_adaptive_p_reports_no_candidate_and_rejects_bad_parameters)
{
    const float row[] = {1.0f, 2.0f};
    sift_bias b[2] = {{0, -INFINITY}, {1, -INFINITY}};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_logit_bias(c, b, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_adaptive_p(c, 0.5f, 0.9f, NULL), SIFT_OK);
    int32_t tok;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 2, &tok, &err), SIFT_E_NO_CANDIDATE);
    size_t n;
    ck_assert_int_eq(sift_chain_distribution(c, row, 2, NULL, 0, &n, NULL), SIFT_E_NO_CANDIDATE);
    sift_chain_free(c);
    static const float bad_target[] = {NAN, INFINITY, -INFINITY, 1.0000001f, -1.0000001f, 2.0f};
    static const float bad_decay[] = {NAN, INFINITY, -0.01f, 0.9900001f, 1.0f};
    c = tu_chain_new(1, NULL);
    for (size_t i = 0; i < sizeof bad_target / sizeof bad_target[0]; i++) {
        ck_assert_int_eq(sift_chain_add_adaptive_p(c, bad_target[i], 0.9f, &err), SIFT_E_ARG);
        ck_assert(strstr(err.message, "adaptive_p: target") != NULL);
    }
    for (size_t i = 0; i < sizeof bad_decay / sizeof bad_decay[0]; i++) {
        ck_assert_int_eq(sift_chain_add_adaptive_p(c, 0.5f, bad_decay[i], &err), SIFT_E_ARG);
        ck_assert(strstr(err.message, "adaptive_p: decay") != NULL);
    }
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    ck_assert_int_eq(sift_chain_add_adaptive_p(c, 1.0f, 0.99f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_adaptive_p(NULL, 0.5f, 0.9f, NULL), SIFT_E_ARG);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */

Suite *tu_suite(void)
{
    Suite *s = suite_create("temp");
    struct {
        const char *name;
        const TTest *t;
    } cases[] = {
        {"temp_divides", test_temp_divides_every_logit_by_t},
        {"temp_one", test_temp_one_changes_nothing_and_is_identity},
        {"temp_greedy", test_temp_zero_or_negative_keeps_only_the_canonical_first_token},
        {"temp_overflow", test_temp_that_overflows_falls_back_to_greedy},
        {"temp_underflow",
         test_temp_that_sends_the_largest_logit_to_minus_inf_falls_back_to_greedy},
        {"temp_no_nan", test_temp_never_produces_nan_on_extreme_rows},
        {"temp_minus_inf", test_temp_keeps_minus_inf_tokens_at_minus_inf},
        {"temp_bad", test_temp_rejects_nan_and_infinite_temperatures},
        {"temp_monotone", test_temp_above_zero_is_monotone_on_random_rows},
        {"temp_prefix", test_temp_before_top_k_is_decided_from_the_row_prefix},
        {"temp_ext_entropy", test_temp_ext_scales_temperature_with_normalised_entropy},
        {"temp_ext_max", test_temp_ext_at_maximum_entropy_uses_temp_plus_delta},
        {"temp_ext_zero", test_temp_ext_at_zero_entropy_with_delta_above_temp_is_greedy},
        {"temp_ext_single", test_temp_ext_leaves_a_single_candidate_alone},
        {"temp_ext_delta0", test_temp_ext_with_zero_delta_is_plain_temperature},
        {"temp_ext_overflow", test_temp_ext_with_overflowing_temp_plus_delta_stays_finite},
        {"temp_ext_bad", test_temp_ext_rejects_bad_parameters},
        {"tns_keeps", test_top_n_sigma_keeps_tokens_within_n_sigma_of_the_top},
        {"tns_oracle", test_top_n_sigma_matches_the_oracle_on_rows_with_minus_inf_runs},
        {"tns_equal", test_top_n_sigma_keeps_every_token_of_an_all_equal_row},
        {"tns_identity", test_top_n_sigma_with_n_at_most_zero_is_identity},
        {"tns_single", test_top_n_sigma_keeps_the_single_finite_token},
        {"tns_prefix", test_top_n_sigma_keeps_a_canonical_prefix_on_random_rows},
        {"tns_bad", test_top_n_sigma_rejects_nan_and_infinite_n},
        {"miro_topk", test_mirostat_keeps_the_top_k_of_the_zipf_estimate},
        {"miro_m", test_mirostat_estimates_only_from_the_first_m_tokens},
        {"miro_s_hat0", test_mirostat_without_a_finite_pair_uses_s_hat_zero},
        {"miro_nodraw", test_mirostat_draws_nothing_when_one_token_is_kept},
        {"miro_accept", test_mirostat_moves_mu_on_accept_of_the_sampled_token},
        {"miro_other", test_mirostat_ignores_accept_of_another_token},
        {"miro_failed", test_mirostat_failed_sample_changes_nothing},
        {"miro_clone", test_mirostat_clone_copies_mu_and_the_pending_record},
        {"miro_banned", test_mirostat_reports_no_candidate_for_an_all_banned_row},
        {"miro_bad", test_mirostat_rejects_bad_parameters},
        {"miro_prefix", test_mirostat_support_is_a_canonical_prefix_on_random_rows},
        {"miro2_keeps", test_mirostat_v2_keeps_tokens_whose_surprise_is_at_most_mu},
        {"miro2_accept", test_mirostat_v2_moves_mu_on_accept_of_the_sampled_token},
        {"ap_reshape", test_adaptive_p_reshapes_the_distribution_around_the_adapted_target},
        {"ap_accept", test_adaptive_p_moves_its_average_only_on_accept_of_the_sampled_token},
        {"ap_clone", test_adaptive_p_clone_copies_the_average_and_the_pending_record},
        {"ap_off", test_adaptive_p_with_a_negative_target_is_dist},
        {"ap_bad", test_adaptive_p_reports_no_candidate_and_rejects_bad_parameters},
        {"storage_order", test_results_depend_on_the_candidate_set_not_its_storage_order},
        {"oracle", test_oracle_agrees_on_the_hand_cases},
    };
    /* the comparisons with the oracle and the property runs on random rows:
     * check_simd_whole.sh runs the "simd" cases again under each SIFT_SIMD
     * cap */
    static const char *const simd[] = {"temp_monotone", "temp_prefix",   "tns_oracle", "tns_prefix",
                                       "miro_prefix",   "storage_order", "oracle"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        for (size_t j = 0; j < sizeof simd / sizeof simd[0]; j++)
            if (strcmp(cases[i].name, simd[j]) == 0)
                tcase_set_tags(tc, "simd");
        tcase_add_test(tc, cases[i].t);
        suite_add_tcase(s, tc);
    }
    return s;
}

/*
 * check_penalties.c - penalties (repeat / frequency / presence), DRY and
 * logit_bias: llama.cpp's upstream vectors re-derived by hand, exact
 * logits, edge cases, every bad parameter, capability classes, clone /
 * reset / digest, string breakers through a vocabulary, and agreement with
 * the naive oracle on hand-built chains.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "core/step.h"
#include "oracle/oracle.h"
#include "testutil.h"

#define TOL 1e-6

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static void accept_all(sift_chain *c, const int32_t *toks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(sift_chain_accept(c, toks[i], NULL), SIFT_OK);
}

/* The final distribution indexed by token id (p = 0, logit = NAN for a
 * token that did not survive). Returns the number of survivors. */
static size_t dist_by_id(sift_chain *c, const float *row, int32_t V, double *p, float *logit)
{
    sift_token_prob *tp = malloc((size_t)V * sizeof *tp);
    size_t n = 0;
    sift_error err;
    ck_assert_msg(sift_chain_distribution(c, row, V, tp, (size_t)V, &n, &err) == SIFT_OK, "%s",
                  err.message);
    for (int32_t i = 0; i < V; i++) {
        if (p)
            p[i] = 0.0;
        if (logit)
            logit[i] = NAN;
    }
    for (size_t i = 0; i < n; i++) {
        if (p)
            p[tp[i].id] = tp[i].p;
        if (logit)
            logit[tp[i].id] = tp[i].logit;
    }
    free(tp);
    return n;
}

static void fill(float *row, int32_t V, float v)
{
    for (int32_t i = 0; i < V; i++)
        row[i] = v;
}

/* Probabilities of logits l[0..n) (reference softmax in double). */
static void softmax_ref(const double *l, int n, double *p)
{
    double m = -INFINITY, s = 0.0;
    for (int i = 0; i < n; i++)
        m = l[i] > m ? l[i] : m;
    for (int i = 0; i < n; i++)
        s += exp(l[i] - m);
    for (int i = 0; i < n; i++)
        p[i] = exp(l[i] - m) / s;
}

static void expect_probs(const double *got, const double *want, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) < TOL, "token %d: p = %.9f, expected %.9f", i, got[i],
                      want[i]);
}

/* Runs spec on sift and on the oracle with a given history and rows
 * drawn from `seed`; every step must agree (status, token, RNG). */
static void agree(const sp_chain *spec, const int32_t *hist, size_t nh, int32_t V, int steps,
                  uint64_t seed)
{
    sift_chain *c;
    sift_error err;
    ck_assert_int_eq(sp_build(spec, &c, &err), SIFT_OK);
    or_chain o;
    or_init(&o, spec);
    for (size_t i = 0; i < nh; i++) {
        ck_assert_int_eq(sift_chain_accept(c, hist[i], NULL), SIFT_OK);
        or_accept(&o, hist[i]);
    }
    tu_rng r = {seed};
    float *row = malloc((size_t)V * sizeof *row);
    for (int s = 0; s < steps; s++) {
        tu_row(&r, row, V, s % TU_ROW__COUNT);
        int32_t ts = -1, to = -1;
        sift_status ss = sift_chain_sample(c, row, V, &ts, &err);
        sift_status so = or_sample(&o, row, V, &to);
        uint64_t rs[4];
        sift__chain_rng_state(c, rs);
        ck_assert_int_eq(ss, so);
        if (ss != SIFT_OK)
            break;
        ck_assert_int_eq(ts, to);
        ck_assert(memcmp(rs, o.rng.s, sizeof rs) == 0);
        int32_t acc = s % 3 == 0 ? (int32_t)(s % V) : ts;
        ck_assert_int_eq(sift_chain_accept(c, acc, NULL), SIFT_OK);
        or_accept(&o, acc);
    }
    free(row);
    or_free(&o);
    sift_chain_free(c);
}

/* ------------------------------------------------------------------ */
/* penalties: llama.cpp's upstream vectors                            */
/* ------------------------------------------------------------------ */

/* Five equal probabilities 0.2 (logit ln 0.2 < 0, so the repeat penalty
 * multiplies). */
static void run_penalty_vector(const int32_t *hist, size_t nh, float repeat, float freq,
                               float presence, const double *want)
{
    sift_chain *c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 64, repeat, freq, presence, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    accept_all(c, hist, nh);
    float row[5];
    fill(row, 5, logf(0.2f));
    double p[5];
    dist_by_id(c, row, 5, p, NULL);
    expect_probs(p, want, 5);
    sift_chain_free(c);
}

START_TEST(test_penalties_repeat_50_collapses_the_repeated_tokens)
{
    /* ln(0.2) * 50 = -80.5: e^-78.9 relative weight, 0 to 1e-6. */
    static const int32_t h1[] = {0}, h3[] = {0, 1, 2}, h5[] = {0, 1, 2, 0, 0};
    run_penalty_vector(h1, 1, 50.0f, 0.0f, 0.0f, (const double[]){0, .25, .25, .25, .25});
    run_penalty_vector(h3, 3, 50.0f, 0.0f, 0.0f, (const double[]){0, 0, 0, .5, .5});
    run_penalty_vector(h5, 5, 50.0f, 0.0f, 0.0f, (const double[]){0, 0, 0, .5, .5});
}
END_TEST

START_TEST(test_penalties_frequency_and_presence_subtract_count_times_freq_plus_presence)
{
    /* freq = presence = 5: a token seen c times loses 5c + 5.
     * {0}: token 0 at -10: p0 = e^-10 / (4 + e^-10) = 0.0000113,
     *      the others 1 / (4 + e^-10) = 0.2499972 (upstream 0.249997, 0.000011).
     * {0,1,2}: three at -10: 1 / (2 + 3e^-10) = 0.4999660 and 0.0000227.
     * {0,1,2,0,0}: token 0 (c = 3) at -20, 1 and 2 at -10. */
    static const int32_t h1[] = {0}, h3[] = {0, 1, 2}, h5[] = {0, 1, 2, 0, 0};
    double l[5], want[5];
    for (int i = 0; i < 5; i++)
        l[i] = i == 0 ? -10 : 0;
    softmax_ref(l, 5, want);
    ck_assert(fabs(want[1] - 0.249997) < 1e-6 && fabs(want[0] - 0.000011) < 1e-6);
    run_penalty_vector(h1, 1, 1.0f, 5.0f, 5.0f, want);
    for (int i = 0; i < 5; i++)
        l[i] = i < 3 ? -10 : 0;
    softmax_ref(l, 5, want);
    ck_assert(fabs(want[3] - 0.499966) < 1e-6 && fabs(want[0] - 0.000023) < 1e-6);
    run_penalty_vector(h3, 3, 1.0f, 5.0f, 5.0f, want);
    l[0] = -20;
    softmax_ref(l, 5, want);
    ck_assert(fabs(want[3] - 0.499977) < 1e-6);
    run_penalty_vector(h5, 5, 1.0f, 5.0f, 5.0f, want);
}
END_TEST

START_TEST(test_penalties_divide_positive_and_multiply_non_positive_logits)
{
    sift_chain *c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 2.0f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    accept_all(c, (const int32_t[]){0, 3, 4}, 3);
    float row[5] = {2.0f, 1.0f, 0.5f, -1.0f, 0.0f};
    float l[5];
    ck_assert_uint_eq(dist_by_id(c, row, 5, NULL, l), 5);
    ck_assert(l[0] == 1.0f); /* 2 / 2 */
    ck_assert(l[1] == 1.0f); /* not in the window */
    ck_assert(l[2] == 0.5f);
    ck_assert(l[3] == -2.0f); /* -1 * 2 */
    ck_assert(l[4] == 0.0f);  /* 0 * 2: 0 <= 0 multiplies */
    sift_chain_free(c);
}
END_TEST

START_TEST(test_penalties_use_the_exact_float_expression)
{
    const float freq = 0.1f, presence = 0.3f, repeat = 1.3f;
    float row[3] = {0.25f, 0.7f, -0.45f};
    float l[3];
    sift_chain *c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, repeat, freq, presence, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    accept_all(c, (const int32_t[]){1, 1, 1, 2}, 4);
    dist_by_id(c, row, 3, NULL, l);
    volatile float a = row[1] / repeat;
    volatile float s1 = (float)3 * freq + 1.0f * presence;
    volatile float b = row[2] * repeat;
    volatile float s2 = (float)1 * freq + 1.0f * presence;
    ck_assert(l[0] == row[0]);
    ck_assert(l[1] == a - s1);
    ck_assert(l[2] == b - s2);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_penalties_window_evicts_the_oldest_token)
{
    sift_chain *c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 2, 1.0f, 1.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float row[4] = {0, 0, 0, 0}, l[4];
    accept_all(c, (const int32_t[]){0, 1}, 2);
    dist_by_id(c, row, 4, NULL, l);
    ck_assert(l[0] == -1.0f && l[1] == -1.0f && l[2] == 0.0f);
    accept_all(c, (const int32_t[]){2}, 1); /* evicts 0 */
    dist_by_id(c, row, 4, NULL, l);
    ck_assert(l[0] == 0.0f && l[1] == -1.0f && l[2] == -1.0f);
    accept_all(c, (const int32_t[]){2}, 1); /* evicts 1: window {2, 2} */
    dist_by_id(c, row, 4, NULL, l);
    ck_assert(l[0] == 0.0f && l[1] == 0.0f && l[2] == -2.0f && l[3] == 0.0f);
    /* a long stream over few tokens: counts always equal the window's */
    tu_rng r = {7};
    int32_t hist[500];
    for (int i = 0; i < 500; i++) {
        hist[i] = (int32_t)tu_range(&r, 0, 3);
        ck_assert_int_eq(sift_chain_accept(c, hist[i], NULL), SIFT_OK);
        dist_by_id(c, row, 4, NULL, l);
        for (int32_t t = 0; t < 4; t++) {
            int32_t prev = i > 0 ? hist[i - 1] : 2;
            int cnt = (hist[i] == t) + (prev == t);
            ck_assert(l[t] == -(float)cnt);
        }
    }
    sift_chain_free(c);
}
END_TEST

START_TEST(test_penalties_leave_neg_inf_alone_and_report_overflow_as_row_value)
{
    sift_chain *c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.0f, -5.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    accept_all(c, (const int32_t[]){0, 1}, 2);
    float row[3] = {-INFINITY, 0.0f, 0.0f}, l[3];
    ck_assert_uint_eq(dist_by_id(c, row, 3, NULL, l), 3);
    ck_assert(l[0] == -INFINITY); /* -inf - (-5) stays -inf */
    ck_assert(l[1] == 5.0f);
    sift_chain_free(c);

    /* 3e38 / 0.5 overflows: +inf at token 1. */
    c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 0.5f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    accept_all(c, (const int32_t[]){1, 2}, 2);
    float row2[3] = {0.0f, 3e38f, 2e38f};
    uint64_t before[4], after[4];
    sift__chain_rng_state(c, before);
    uint64_t dg = sift__chain_state_digest(c);
    int32_t tok = -7;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row2, 3, &tok, &err), SIFT_E_ROW_VALUE);
    ck_assert_int_eq(err.index, 1);
    ck_assert_ptr_nonnull(strstr(err.message, "penalties"));
    ck_assert_ptr_nonnull(strstr(err.message, "+inf"));
    ck_assert_int_eq(tok, -7);
    sift__chain_rng_state(c, after);
    ck_assert(memcmp(before, after, sizeof before) == 0);
    ck_assert(dg == sift__chain_state_digest(c));
    sift_chain_free(c);

    /* A huge negative freq raises a repeated logit to +inf. */
    c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.0f, -3e37f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    accept_all(c, (const int32_t[]){2, 2}, 2);
    float row3[3] = {0.0f, 1.0f, 3e38f};
    ck_assert_int_eq(sift_chain_sample(c, row3, 3, &tok, &err), SIFT_E_ROW_VALUE);
    ck_assert_int_eq(err.index, 2);
    ck_assert_ptr_nonnull(strstr(err.message, "+inf"));
    sift_chain_free(c);
}
END_TEST

/* What overflows whatever the row holds is refused when the stage is
 * added, naming the parameters; the chain is unchanged. */
START_TEST(test_penalties_reject_parameters_that_overflow_on_every_row)
{
    sift_chain *c = tu_chain_new(0, NULL);
    sift_error err;
    /* the (1e-38, 3e38, 3e38): 3e38 + 3e38 is +inf */
    ck_assert_int_eq(sift_chain_add_penalties(c, 64, 1e-38f, 3e38f, 3e38f, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "freq"));
    ck_assert_ptr_nonnull(strstr(err.message, "presence"));
    /* count * freq overflows only for counts up to last_n */
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.0f, 1e38f, 0.0f, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.0f, -1e38f, 0.0f, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_penalties(c, 3, 1.0f, 1e38f, 0.0f, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 3, 1.0f, -3e38f, 3e38f, &err), SIFT_E_ARG);
    /* a repeat whose reciprocal is +inf */
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1e-39f, 0.0f, 0.0f, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "repeat"));
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1e-38f, 0.0f, 0.0f, &err), SIFT_OK);
    /* a no-op stage is never refused for overflow (last_n 0) */
    ck_assert_int_eq(sift_chain_add_penalties(c, 0, 1e-39f, 3e38f, 3e38f, &err), SIFT_OK);
    ck_assert_uint_eq(sift_chain_n_stages(c), 3);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_penalties_reject_every_bad_parameter)
{
    sift_chain_params pp;
    sift_chain_params_init(&pp);
    pp.max_history = 10;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &pp, NULL), SIFT_OK);
    sift_error err;
    ck_assert_int_eq(sift_chain_add_penalties(NULL, 8, 1.1f, 0, 0, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_penalties(c, -1, 1.1f, 0, 0, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "last_n"));
    ck_assert_int_eq(sift_chain_add_penalties(c, 11, 1.1f, 0, 0, &err), SIFT_E_LIMIT);
    ck_assert_int_eq(sift_chain_add_penalties(c, 10, 1.1f, 0, 0, &err), SIFT_OK);
    const float bad_repeat[] = {0.0f, -1.0f, NAN, INFINITY, -INFINITY, -0.0f};
    for (size_t i = 0; i < sizeof bad_repeat / sizeof *bad_repeat; i++) {
        ck_assert_int_eq(sift_chain_add_penalties(c, 4, bad_repeat[i], 0, 0, &err), SIFT_E_ARG);
        ck_assert_ptr_nonnull(strstr(err.message, "repeat"));
    }
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(sift_chain_add_penalties(c, 4, 1.1f, bad[i], 0, &err), SIFT_E_ARG);
        ck_assert_ptr_nonnull(strstr(err.message, "freq"));
        ck_assert_int_eq(sift_chain_add_penalties(c, 4, 1.1f, 0, bad[i], &err), SIFT_E_ARG);
        ck_assert_ptr_nonnull(strstr(err.message, "presence"));
    }
    ck_assert_uint_eq(sift_chain_n_stages(c), 1);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_penalties_no_op_settings_are_identity_and_keep_no_history)
{
    sift_chain *c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 0, 1.5f, 1, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 16, 1.0f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 16, 1.1f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 16, 0.9f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 16, 1.0f, -0.5f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 16, 1.0f, 0.0f, -0.5f, NULL), SIFT_OK);
    int64_t n;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_IDENTITY);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(sift_chain_stage_class(c, 1, &n), SIFT_CLASS_IDENTITY);
    ck_assert_int_eq(sift_chain_stage_class(c, 2, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 16);
    ck_assert_int_eq(sift_chain_stage_class(c, 3, &n), SIFT_CLASS_RAISES);
    ck_assert_int_eq(n, 16);
    ck_assert_int_eq(sift_chain_stage_class(c, 4, &n), SIFT_CLASS_RAISES);
    ck_assert_int_eq(sift_chain_stage_class(c, 5, &n), SIFT_CLASS_RAISES);
    ck_assert_str_eq(sift_chain_stage_name(c, 0), "penalties");
    sift_chain_free(c);

    /* A no-op stage keeps nothing: its digest never moves. */
    sift_chain *a = tu_chain_new(0, NULL), *b = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(a, 0, 1.5f, 0, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(b, 0, 1.5f, 0, 0, NULL), SIFT_OK);
    accept_all(a, (const int32_t[]){1, 2, 3}, 3);
    ck_assert(sift__chain_state_digest(a) == sift__chain_state_digest(b));
    sift_chain_free(a);
    sift_chain_free(b);
}
END_TEST

START_TEST(test_penalties_lowers_class_never_raises_and_changes_at_most_last_n_tokens)
{
    tu_rng r = {99};
    for (int rep = 0; rep < 200; rep++) {
        int32_t V = (int32_t)tu_range(&r, 2, 300);
        int32_t last_n = (int32_t)tu_range(&r, 1, 20);
        float repeat = (float)(1.0 + 2.0 * tu_unif(&r));
        float freq = (float)tu_unif(&r), pres = (float)tu_unif(&r);
        sift_chain *c = tu_chain_new(0, NULL);
        ck_assert_int_eq(sift_chain_add_penalties(c, last_n, repeat, freq, pres, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        int64_t n;
        ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_LOWERS);
        int nh = (int)tu_range(&r, 0, 60);
        for (int i = 0; i < nh; i++)
            ck_assert_int_eq(sift_chain_accept(c, (int32_t)tu_range(&r, 0, V - 1), NULL), SIFT_OK);
        float *row = malloc((size_t)V * sizeof *row), *l = malloc((size_t)V * sizeof *l);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        dist_by_id(c, row, V, NULL, l);
        int changed = 0;
        for (int32_t i = 0; i < V; i++) {
            ck_assert(l[i] <= row[i]);
            changed += l[i] != row[i];
        }
        ck_assert_int_le(changed, n);
        free(row);
        free(l);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_penalties_clone_copies_counts_and_is_independent)
{
    sift_chain *a = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(a, 4, 1.0f, 1.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(a, NULL), SIFT_OK);
    accept_all(a, (const int32_t[]){0, 0, 1}, 3);
    sift_chain *b = NULL;
    ck_assert_int_eq(sift_chain_clone(a, &b, NULL), SIFT_OK);
    ck_assert(sift__chain_state_digest(a) == sift__chain_state_digest(b));
    float row[3] = {0, 0, 0}, la[3], lb[3];
    dist_by_id(a, row, 3, NULL, la);
    dist_by_id(b, row, 3, NULL, lb);
    /* llama.cpp's clone would forget the counts; sift's keeps them */
    ck_assert(lb[0] == -2.0f && lb[1] == -1.0f && lb[2] == 0.0f);
    ck_assert(memcmp(la, lb, sizeof la) == 0);
    accept_all(b, (const int32_t[]){2, 2, 2, 2}, 4);
    dist_by_id(a, row, 3, NULL, la);
    dist_by_id(b, row, 3, NULL, lb);
    ck_assert(la[0] == -2.0f && la[2] == 0.0f);
    ck_assert(lb[0] == 0.0f && lb[2] == -4.0f);
    ck_assert(sift__chain_state_digest(a) != sift__chain_state_digest(b));
    /* reset empties the window: same digest as a fresh chain */
    sift_chain *f = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(f, 4, 1.0f, 1.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(f, NULL), SIFT_OK);
    sift_chain_reset(b);
    ck_assert(sift__chain_state_digest(b) == sift__chain_state_digest(f));
    dist_by_id(b, row, 3, NULL, lb);
    ck_assert(lb[0] == 0.0f && lb[1] == 0.0f && lb[2] == 0.0f);
    /* same history, different past: same digest */
    accept_all(f, (const int32_t[]){5, 6, 7, 8, 9, 1, 2, 3, 0}, 9);
    accept_all(b, (const int32_t[]){1, 2, 3, 0}, 4);
    ck_assert(sift__chain_state_digest(b) == sift__chain_state_digest(f));
    sift_chain_free(a);
    sift_chain_free(b);
    sift_chain_free(f);
}
END_TEST

START_TEST(test_penalties_ignore_history_tokens_beyond_the_row)
{
    sift_chain *c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 2.0f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    /* before the first row the chain accepts any id below max_vocab */
    accept_all(c, (const int32_t[]){1000, 1}, 2);
    float row[3] = {1, 1, 1}, l[3];
    dist_by_id(c, row, 3, NULL, l);
    ck_assert(l[0] == 1.0f && l[1] == 0.5f && l[2] == 1.0f);
    sift_chain_free(c);
}
END_TEST

/* On a slice, penalties test each candidate against a filter of counts
 * per id & 2047 before the window's hash: ids 5 and 2053 share an entry,
 * so evicting one must leave the other penalised, and evicting both must
 * free the entry. Greedy on slices against greedy on the whole row. */
START_TEST(test_penalties_on_a_slice_keep_tokens_that_share_a_filter_entry)
{
    enum { NV = 4200 };
    static float row[NV];
    for (int32_t i = 0; i < NV; i++)
        row[i] = (float)(i % 7) * 0.01f;
    row[2053] = 10.0f;
    row[5] = 9.0f;
    row[7] = 8.0f;
    sift_chain *c[2];
    for (int j = 0; j < 2; j++) {
        c[j] = tu_chain_new(0, NULL);
        ck_assert_int_eq(sift_chain_add_penalties(c[j], 2, 100.0f, 0.0f, 0.0f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_greedy(c[j], NULL), SIFT_OK);
    }
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, NV, NULL, NULL), SIFT_OK);
    /* window after each accept, and the token greedy must then give */
    const int32_t acc[4] = {5, 2053, 7, 9};
    const int32_t want[4] = {2053, 7, 5, 2053};
    for (int s = 0; s < 4; s++) {
        accept_all(c[0], &acc[s], 1);
        accept_all(c[1], &acc[s], 1);
        sift_slice slice;
        ck_assert_int_eq(sift_slicer_build(sl, row, NV, 8, NULL, 0, &slice, NULL), SIFT_OK);
        int32_t ts = -1, tr = -1;
        sift_error err;
        ck_assert_msg(sift_chain_sample_slice(c[0], &slice, &ts, &err) == SIFT_OK, "%s",
                      err.message);
        ck_assert_int_eq(sift_chain_sample(c[1], row, NV, &tr, NULL), SIFT_OK);
        ck_assert_int_eq(ts, tr);
        ck_assert_int_eq(ts, want[s]);
    }
    sift_slicer_free(sl);
    sift_chain_free(c[0]);
    sift_chain_free(c[1]);
}
END_TEST

typedef struct pen_hook {
    const float *row;
    int calls;
} pen_hook;

static int pen_hook_fn(void *user, float *row, int32_t V)
{
    pen_hook *h = user;
    memcpy(row, h->row, (size_t)V * sizeof *row);
    h->calls++;
    return 0;
}

/* Penalties that never raise re-order a canonical slice in one pass
 * (penalised candidates held until an untouched one ranks after them).
 * Rows built to make the penalised values land on the untouched ones
 * (ties broken by id), on -0 / +0, and on -inf (huge negative logits
 * times repeat), with counts that re-order the penalised ones (freq):
 * slice samples against the oracle on the whole row, token and RNG. */
START_TEST(test_penalties_on_a_slice_reorder_in_one_pass_as_the_oracle)
{
    enum { NV = 600, K = 8, LAST = 24 };
    static const float rep[] = {1.0f, 1.1f, 2.0f, 50.0f};
    static const float fr[] = {0.0f, 0.25f, 1.0f};
    static const float pr[] = {0.0f, 0.5f};
    static float row[NV];
    tu_rng r = {0x9e11u + (uint64_t)_i};
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, NV, NULL, NULL), SIFT_OK);
    long slices = 0;
    for (int trial = 0; trial < 24; trial++) {
        sp_chain spec = {.seed = 5 + (uint64_t)trial, .n = 3};
        spec.st[0].kind = SP_PENALTIES;
        spec.st[0].i0 = LAST;
        spec.st[0].f0 = rep[trial % 4];
        spec.st[0].f1 = fr[(trial / 4) % 3];
        spec.st[0].f2 = pr[(trial / 12) % 2];
        if (spec.st[0].f0 == 1.0f && spec.st[0].f1 == 0.0f && spec.st[0].f2 == 0.0f)
            spec.st[0].f2 = 0.5f;
        spec.st[1].kind = SP_TOP_K;
        spec.st[1].i0 = K;
        spec.st[2].kind = SP_DIST;
        sift_chain *c;
        ck_assert_int_eq(sp_build(&spec, &c, NULL), SIFT_OK);
        or_chain o;
        or_init(&o, &spec);
        pen_hook h = {row, 0};
        ck_assert_int_eq(sift_chain_set_row_hook(c, pen_hook_fn, &h, NULL), SIFT_OK);
        for (int step = 0; step < 40; step++) {
            /* values on a coarse grid (ties), the top ones among 40 ids
             * so that the window holds many of them */
            for (int32_t i = 0; i < NV; i++)
                row[i] = (float)tu_range(&r, -8, 2) * 0.5f;
            for (int j = 0; j < 30; j++) {
                int32_t id = (int32_t)tu_range(&r, 0, 39);
                switch (tu_range(&r, 0, 5)) {
                case 0: row[id] = tu_unif(&r) < 0.5 ? -0.0f : 0.0f; break;
                case 1: row[id] = -3.0e38f; break;
                case 2: row[id] = -INFINITY; break;
                default: row[id] = (float)tu_range(&r, 2, 12) * 0.55f; break;
                }
            }
            sift_slice slice;
            ck_assert_int_eq(sift_slicer_build(sl, row, NV, K + LAST + 8, NULL, 0, &slice, NULL),
                             SIFT_OK);
            int32_t ts = -1, to = -1;
            sift_error err;
            sift_status ss = sift_chain_sample_slice(c, &slice, &ts, &err);
            sift_status so = or_sample(&o, row, NV, &to);
            ck_assert_int_eq(ss, so);
            ck_assert_int_eq(ts, to);
            uint64_t rs[4];
            sift__chain_rng_state(c, rs);
            ck_assert(memcmp(rs, o.rng.s, sizeof rs) == 0);
            slices++;
            int32_t acc = tu_unif(&r) < 0.7 ? (int32_t)tu_range(&r, 0, 39) : ts;
            ck_assert_int_eq(sift_chain_accept(c, acc, NULL), SIFT_OK);
            or_accept(&o, acc);
        }
        or_free(&o);
        sift_chain_free(c);
    }
    sift_slicer_free(sl);
    ck_assert_int_eq(slices, 24 * 40);
}
END_TEST

/* ------------------------------------------------------------------ */
/* DRY                                                                 */
/* ------------------------------------------------------------------ */

static sift_chain *dry_chain(float mult, float base, int32_t allowed, int32_t last_n,
                             const int32_t *const *seqs, const size_t *lens, size_t nb)
{
    sift_chain *c = tu_chain_new(0, NULL);
    sift_error err;
    ck_assert_msg(
        sift__chain_add_dry_tokens(c, mult, base, allowed, last_n, seqs, lens, nb, &err) == SIFT_OK,
        "%s", err.message);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

static void run_dry_vector(int32_t V, const int32_t *hist, size_t nh, float mult, float base,
                           int32_t allowed, int32_t last_n, const int32_t *const *seqs,
                           const size_t *lens, size_t nb, const double *want)
{
    sift_chain *c = dry_chain(mult, base, allowed, last_n, seqs, lens, nb);
    accept_all(c, hist, nh);
    float row[8];
    fill(row, V, logf(1.0f / (float)V));
    double p[8];
    dist_by_id(c, row, V, p, NULL);
    expect_probs(p, want, V);
    sift_chain_free(c);
}

START_TEST(test_dry_reproduces_the_upstream_vectors)
{
    /* {0,1}, allowed 2: N = 2 <= 2, nothing. */
    run_dry_vector(4, (const int32_t[]){0, 1}, 2, 1.0f, 1.1f, 2, 4, NULL, NULL, 0,
                   (const double[]){.25, .25, .25, .25});
    /* {0,1,2,0,1}: the suffix "0 1" also ends at j = 1, so token 2 would
     * extend a repeat of length 2: e = 0, penalty 1 * 1.1^0 = 1.
     * p2 = e^-1 / (3 + e^-1) = 0.109232, the others 0.296923. */
    double l[5] = {0, 0, -1, 0, 0}, want[5];
    softmax_ref(l, 4, want);
    ck_assert(fabs(want[0] - 0.296923) < 1e-6 && fabs(want[2] - 0.109232) < 1e-6);
    run_dry_vector(4, (const int32_t[]){0, 1, 2, 0, 1}, 5, 1.0f, 1.1f, 2, 5, NULL, NULL, 0, want);
    /* The single-token breaker 3 caps repeats at 3 and is never penalised. */
    static const int32_t b3[] = {3};
    const int32_t *s3[] = {b3};
    run_dry_vector(5, (const int32_t[]){0, 1, 3, 4, 0, 1}, 6, 1.0f, 1.1f, 2, 6, s3,
                   (const size_t[]){1}, 1, (const double[]){.2, .2, .2, .2, .2});
    /* multiplier 2: penalty 2; p2 = e^-2 / (4 + e^-2) = 0.032727. */
    l[2] = -2;
    softmax_ref(l, 5, want);
    ck_assert(fabs(want[2] - 0.032727) < 1e-6 && fabs(want[0] - 0.241818) < 1e-6);
    run_dry_vector(5, (const int32_t[]){0, 1, 2, 0, 1}, 5, 2.0f, 1.1f, 2, 5, NULL, NULL, 0, want);
    /* allowed 4 > the repeat length 2: nothing. */
    run_dry_vector(5, (const int32_t[]){0, 1, 2, 3, 4, 0, 1}, 7, 1.0f, 1.1f, 4, 7, NULL, NULL, 0,
                   (const double[]){.2, .2, .2, .2, .2});
}
END_TEST

/* Logits after DRY on a row of zeros (V = 10). */
static void dry_logits(sift_chain *c, float *l)
{
    float row[10];
    fill(row, 10, 0.0f);
    dist_by_id(c, row, 10, NULL, l);
}

START_TEST(test_dry_penalty_grows_as_base_to_the_excess_length)
{
    /* 0 1 2 3 4 9 0 1 2 3: the suffix "0 1 2 3" (length 4) also ends at
     * j = 3, so token 4 (t_4) would extend it: e = 4 - 2 = 2, penalty
     * 1.5 * 2^2 = 6. No other position ends with "3". */
    sift_chain *c = dry_chain(1.5f, 2.0f, 2, 64, NULL, NULL, 0);
    accept_all(c, (const int32_t[]){0, 1, 2, 3, 4, 9, 0, 1, 2, 3}, 10);
    float l[10];
    dry_logits(c, l);
    for (int t = 0; t < 10; t++)
        ck_assert_msg(l[t] == (t == 4 ? -6.0f : 0.0f), "token %d: %g", t, (double)l[t]);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_dry_breakers_cap_the_repeat_and_single_token_breakers_are_exempt)
{
    /* 7 8 1 2 9 7 8 1 2: the suffix "7 8 1 2" (4) ends at j = 3; token 9
     * would extend it. multiplier 1, base 2, allowed 2. */
    static const int32_t hist[] = {7, 8, 1, 2, 9, 7, 8, 1, 2};
    float l[10];
    /* no breakers: e = 2, penalty 4 */
    sift_chain *c = dry_chain(1.0f, 2.0f, 2, 64, NULL, NULL, 0);
    accept_all(c, hist, 9);
    dry_logits(c, l);
    ck_assert(l[9] == -4.0f);
    sift_chain_free(c);
    /* the two-token breaker "7 8", last seen 3 tokens back with a tail of
     * 1: rep_limit = 3 - 1 = 2, so e = 0 and the penalty is 1; its head 7
     * has a tail, so it is not exempt (it gets no entry here anyway) */
    static const int32_t b78[] = {7, 8};
    const int32_t *s78[] = {b78};
    c = dry_chain(1.0f, 2.0f, 2, 64, s78, (const size_t[]){2}, 1);
    accept_all(c, hist, 9);
    dry_logits(c, l);
    ck_assert(l[9] == -1.0f);
    for (int t = 0; t < 9; t++)
        ck_assert(l[t] == 0.0f);
    sift_chain_free(c);
    /* single-token breaker 8, two back: rep_limit 2, penalty 1 */
    static const int32_t b8[] = {8};
    const int32_t *s8[] = {b8};
    c = dry_chain(1.0f, 2.0f, 2, 64, s8, (const size_t[]){1}, 1);
    accept_all(c, hist, 9);
    dry_logits(c, l);
    ck_assert(l[9] == -1.0f);
    sift_chain_free(c);
    /* 9 itself a single-token breaker: it would get e = 2 but is exempt */
    static const int32_t b9[] = {9};
    const int32_t *s9[] = {b9};
    c = dry_chain(1.0f, 2.0f, 2, 64, s9, (const size_t[]){1}, 1);
    accept_all(c, hist, 9);
    dry_logits(c, l);
    for (int t = 0; t < 10; t++)
        ck_assert(l[t] == 0.0f);
    sift_chain_free(c);
    /* a breaker right at the end (distance 0 - tail): rep_limit 0 < 2 */
    static const int32_t b12[] = {1, 2};
    const int32_t *s12[] = {b12};
    c = dry_chain(1.0f, 2.0f, 2, 64, s12, (const size_t[]){2}, 1);
    accept_all(c, hist, 9);
    dry_logits(c, l);
    for (int t = 0; t < 10; t++)
        ck_assert(l[t] == 0.0f);
    sift_chain_free(c);
    /* the longest matching tail of one head wins: heads 1 with tails {2}
     * and {} - the tail 2 is longer, rep_limit = 1 - 1 = 0 */
    static const int32_t b1[] = {1};
    const int32_t *s1[] = {b1, b12};
    c = dry_chain(1.0f, 2.0f, 0, 64, s1, (const size_t[]){1, 2}, 2);
    accept_all(c, hist, 9);
    dry_logits(c, l);
    /* allowed 0, rep_limit 0: every token at positions 1..N-1 gets e = 0,
     * except 1, which is a single-token breaker */
    for (int t = 0; t < 10; t++)
        ck_assert_msg(l[t] == ((t == 2 || t == 7 || t == 8 || t == 9) ? -1.0f : 0.0f),
                      "token %d: %g", t, (double)l[t]);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_dry_window_drops_old_tokens)
{
    /* last_n 4: only "2 9 0 1" remains of 0 1 2 9 0 1 -> no repeat of "0 1" */
    sift_chain *c = dry_chain(1.0f, 2.0f, 1, 4, NULL, NULL, 0);
    accept_all(c, (const int32_t[]){0, 1, 2, 9, 0, 1}, 6);
    float l[10];
    dry_logits(c, l);
    for (int t = 0; t < 10; t++)
        ck_assert(l[t] == 0.0f);
    sift_chain_free(c);
    c = dry_chain(1.0f, 2.0f, 1, 6, NULL, NULL, 0);
    accept_all(c, (const int32_t[]){0, 1, 2, 9, 0, 1}, 6);
    dry_logits(c, l);
    ck_assert(l[2] == -2.0f); /* "0 1" repeated: e = 2 - 1 = 1 */
    sift_chain_free(c);
}
END_TEST

START_TEST(test_dry_clamps_the_exponent_and_overflow_bans_instead_of_nan)
{
    /* base 1e30: clamp floor(88.72 / 69.08) = 1; the repeat of length 8 of
     * token 3 gives e = 7 -> 1 after the clamp: penalty 1e30. */
    sift_chain *c = dry_chain(1.0f, 1e30f, 1, 64, NULL, NULL, 0);
    accept_all(c, (const int32_t[]){3, 3, 3, 3, 3, 3, 3, 3, 3}, 9);
    float l[10];
    dry_logits(c, l);
    ck_assert(fabsf(l[3] + 1e30f) <= 1e24f);
    ck_assert(l[0] == 0.0f);
    sift_chain_free(c);
    /* 3e38 * 1e30 is beyond float: the token becomes -inf, never NaN */
    c = dry_chain(3e38f, 1e30f, 1, 64, NULL, NULL, 0);
    accept_all(c, (const int32_t[]){3, 3, 3}, 3);
    dry_logits(c, l);
    ck_assert(l[3] == -INFINITY);
    sift_chain_free(c);
    /* a row with only that token finite: no candidate left */
    c = dry_chain(3e38f, 1e30f, 1, 64, NULL, NULL, 0);
    accept_all(c, (const int32_t[]){0, 0, 0}, 3);
    float row[2] = {5.0f, -INFINITY};
    int32_t tok;
    ck_assert_int_eq(sift_chain_sample(c, row, 2, &tok, NULL), SIFT_E_NO_CANDIDATE);
    sift_chain_free(c);
}
END_TEST

/* A small vocabulary for string breakers. */
static const char *vpieces[] = {"a", "b",  "\n", "c:", ":", "d",  "x\ny",
                                "e", ":d", "z",  "bc", "f", "w:", "::"};
#define NV ((int32_t)(sizeof vpieces / sizeof *vpieces))

static sift_vocab *make_vocab(void)
{
    size_t lens[NV];
    for (int32_t i = 0; i < NV; i++)
        lens[i] = strlen(vpieces[i]);
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, NV, vpieces, lens, NULL, NULL), SIFT_OK);
    return v;
}

START_TEST(test_dry_string_breakers_compile_through_the_vocabulary)
{
    /* Breakers "\n", "::d", "abc", "zq":
     * "\n": contained in 2 ("\n") and 6 ("x\ny") -> single-token heads.
     * "::d": no token contains it. Tokens ending with ":" (3 "c:", 4 ":",
     *   12 "w:", 13 "::") -> rest ":d" -> greedy longest match [8 ":d"];
     *   tokens ending with "::" (13) -> rest "d" -> [5]. 8 ":d" ends with
     *   nothing that is a proper prefix ("d" != ":").
     * "abc": 0 "a" -> rest "bc" -> [10 "bc"] (longest match, not b + c).
     * "zq": 9 "z" -> rest "q" has no piece -> skipped. */
    static const char *brk[] = {"\n", "::d", "abc", "zq"};
    size_t blen[] = {1, 3, 3, 2};
    static const int32_t t2[] = {2}, t6[] = {6}, t3[] = {3, 8}, t4[] = {4, 8}, t12[] = {12, 8},
                         t13a[] = {13, 8}, t13b[] = {13, 5}, t0[] = {0, 10};
    const int32_t *seqs[] = {t2, t6, t3, t4, t12, t13a, t13b, t0};
    size_t lens[] = {1, 1, 2, 2, 2, 2, 2, 2};
    sift_vocab *v = make_vocab();
    sift_dry_params dp = {sizeof(sift_dry_params), 1.0f, 1.5f, 1, 32, brk, blen, 4};
    tu_rng r = {4242};
    for (int rep = 0; rep < 300; rep++) {
        sift_chain *a = tu_chain_new(0, NULL), *b = tu_chain_new(0, NULL);
        sift_error err;
        ck_assert_msg(sift_chain_add_dry(a, &dp, v, &err) == SIFT_OK, "%s", err.message);
        ck_assert_int_eq(sift_chain_add_dist(a, NULL), SIFT_OK);
        ck_assert_int_eq(sift__chain_add_dry_tokens(b, 1.0f, 1.5f, 1, 32, seqs, lens, 8, NULL),
                         SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(b, NULL), SIFT_OK);
        int nh = (int)tu_range(&r, 0, 40);
        for (int i = 0; i < nh; i++) {
            /* small alphabet with the breaker tokens in it */
            int32_t t = (int32_t)tu_range(&r, 0, NV - 1);
            if (tu_unif(&r) < 0.5)
                t = (int32_t)tu_range(&r, 0, 3);
            ck_assert_int_eq(sift_chain_accept(a, t, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(b, t, NULL), SIFT_OK);
        }
        float row[NV], la[NV], lb[NV];
        tu_row(&r, row, NV, TU_ROW_NORMAL);
        dist_by_id(a, row, NV, NULL, la);
        dist_by_id(b, row, NV, NULL, lb);
        ck_assert(memcmp(la, lb, sizeof la) == 0);
        sift_chain_free(a);
        sift_chain_free(b);
    }
    /* A direct case. History 5 3 8 11 5 3 ("d" "c:" ":d" "f" "d" "c:"):
     * the newest 3 is a head whose tail [8] has not followed yet; the
     * older "3 8" (the text "c::d") is a breaker 4 back with a tail of 1,
     * so rep_limit = 3. The suffix "5 3" (2) also ends at j = 1, so 8
     * would extend it: e = 2 - 1 = 1, penalty 1 * 1.5 = 1.5. */
    sift_chain *a = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_dry(a, &dp, v, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(a, NULL), SIFT_OK);
    accept_all(a, (const int32_t[]){5, 3, 8, 11, 5, 3}, 6);
    float row[NV], l[NV];
    fill(row, NV, 0.0f);
    dist_by_id(a, row, NV, NULL, l);
    for (int32_t t = 0; t < NV; t++)
        ck_assert_msg(l[t] == (t == 8 ? -1.5f : 0.0f), "token %d: %g", t, (double)l[t]);
    sift_chain_free(a);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_dry_rejects_every_bad_parameter)
{
    sift_chain_params pp;
    sift_chain_params_init(&pp);
    pp.max_history = 100;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &pp, NULL), SIFT_OK);
    sift_vocab *v = make_vocab();
    sift_error err;
    static const char *brk[] = {"\n", ":", "x", "0123456789012345678901234567890123456789X"};
    size_t blen[] = {1, 1, 1, 41};
    sift_dry_params ok = {sizeof(sift_dry_params), 0.8f, 1.75f, 2, 64, brk, blen, 3};
    sift_dry_params p;
    ck_assert_int_eq(sift_chain_add_dry(NULL, &ok, v, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_dry(c, NULL, v, &err), SIFT_E_ARG);
    const float bad_mult[] = {NAN, INFINITY, -INFINITY, -1.0f};
    for (int i = 0; i < 4; i++) {
        p = ok;
        p.multiplier = bad_mult[i];
        ck_assert_int_eq(sift_chain_add_dry(c, &p, v, &err), SIFT_E_ARG);
        ck_assert_ptr_nonnull(strstr(err.message, "multiplier"));
    }
    const float bad_base[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        p = ok;
        p.base = bad_base[i];
        ck_assert_int_eq(sift_chain_add_dry(c, &p, v, &err), SIFT_E_ARG);
        ck_assert_ptr_nonnull(strstr(err.message, "base"));
    }
    p = ok;
    p.allowed_length = -1;
    ck_assert_int_eq(sift_chain_add_dry(c, &p, v, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "allowed_length"));
    p = ok;
    p.last_n = -1;
    ck_assert_int_eq(sift_chain_add_dry(c, &p, v, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "last_n"));
    p.last_n = 101;
    ck_assert_int_eq(sift_chain_add_dry(c, &p, v, &err), SIFT_E_LIMIT);
    p = ok;
    p.n_breakers = 4;
    ck_assert_int_eq(sift_chain_add_dry(c, &p, v, &err), SIFT_E_ARG);
    ck_assert_str_eq(err.message, "dry: breaker 3 is 41 bytes; max 40");
    ck_assert_int_eq(err.index, 3);
    size_t zero[] = {1, 0, 1};
    p = ok;
    p.breaker_lengths = zero;
    ck_assert_int_eq(sift_chain_add_dry(c, &p, v, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "breaker 1"));
    p = ok;
    ck_assert_int_eq(sift_chain_add_dry(c, &p, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "vocabulary"));
    p.breakers = NULL;
    ck_assert_int_eq(sift_chain_add_dry(c, &p, v, &err), SIFT_E_ARG);
    const char *many[65];
    size_t many_len[65];
    for (int i = 0; i < 65; i++) {
        many[i] = "x";
        many_len[i] = 1;
    }
    p = ok;
    p.breakers = many;
    p.breaker_lengths = many_len;
    p.n_breakers = 65;
    ck_assert_int_eq(sift_chain_add_dry(c, &p, v, &err), SIFT_E_LIMIT);
    p.n_breakers = 64;
    ck_assert_int_eq(sift_chain_add_dry(c, &p, v, &err), SIFT_OK);
    /* token sequences */
    int32_t long_seq[22] = {0}, neg[] = {1, -2};
    const int32_t *s1[] = {long_seq}, *s2[] = {neg};
    ck_assert_int_eq(
        sift__chain_add_dry_tokens(c, 1, 1.5f, 2, 8, s1, (const size_t[]){22}, 1, &err),
        SIFT_E_ARG);
    ck_assert_int_eq(
        sift__chain_add_dry_tokens(c, 1, 1.5f, 2, 8, s1, (const size_t[]){21}, 1, &err), SIFT_OK);
    ck_assert_int_eq(sift__chain_add_dry_tokens(c, 1, 1.5f, 2, 8, s1, (const size_t[]){0}, 1, &err),
                     SIFT_E_ARG);
    ck_assert_int_eq(sift__chain_add_dry_tokens(c, 1, 1.5f, 2, 8, s2, (const size_t[]){2}, 1, &err),
                     SIFT_E_ARG);
    ck_assert_int_eq(sift__chain_add_dry_tokens(c, 1, 1.5f, 2, 8, NULL, NULL, 1, &err), SIFT_E_ARG);
    ck_assert_uint_eq(sift_chain_n_stages(c), 2);
    sift_vocab_free(v);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_dry_off_settings_are_identity_and_on_is_lowers_last_n)
{
    sift_chain *c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift__chain_add_dry_tokens(c, 0.0f, 1.75f, 2, 64, NULL, NULL, 0, NULL),
                     SIFT_OK);
    ck_assert_int_eq(sift__chain_add_dry_tokens(c, 0.8f, 0.99f, 2, 64, NULL, NULL, 0, NULL),
                     SIFT_OK);
    ck_assert_int_eq(sift__chain_add_dry_tokens(c, 0.8f, 1.75f, 2, 0, NULL, NULL, 0, NULL),
                     SIFT_OK);
    ck_assert_int_eq(sift__chain_add_dry_tokens(c, 0.8f, 1.0f, 2, 64, NULL, NULL, 0, NULL),
                     SIFT_OK);
    int64_t n;
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(sift_chain_stage_class(c, i, &n), SIFT_CLASS_IDENTITY);
    ck_assert_int_eq(sift_chain_stage_class(c, 3, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 64);
    ck_assert_str_eq(sift_chain_stage_name(c, 3), "dry");
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    /* base exactly 1: penalty = multiplier, no clamp */
    accept_all(c, (const int32_t[]){0, 1, 2, 0, 1}, 5);
    float row[4] = {0, 0, 0, 0}, l[4];
    dist_by_id(c, row, 4, NULL, l);
    ck_assert(l[2] == -0.8f && l[0] == 0.0f);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_dry_never_raises_and_lowers_at_most_last_n_tokens)
{
    tu_rng r = {31337};
    for (int rep = 0; rep < 300; rep++) {
        int32_t V = (int32_t)tu_range(&r, 2, 200);
        int32_t last_n = (int32_t)tu_range(&r, 1, 40);
        sift_chain *c = dry_chain((float)(0.1 + 2 * tu_unif(&r)), (float)(1 + tu_unif(&r)),
                                  (int32_t)tu_range(&r, 0, 3), last_n, NULL, NULL, 0);
        int nh = (int)tu_range(&r, 0, 80);
        int32_t alpha = (int32_t)tu_range(&r, 1, V < 6 ? V : 6);
        for (int i = 0; i < nh; i++)
            ck_assert_int_eq(sift_chain_accept(c, (int32_t)tu_range(&r, 0, alpha - 1), NULL),
                             SIFT_OK);
        float *row = malloc((size_t)V * sizeof *row), *l = malloc((size_t)V * sizeof *l);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        dist_by_id(c, row, V, NULL, l);
        int changed = 0;
        for (int32_t i = 0; i < V; i++) {
            ck_assert(l[i] <= row[i]);
            changed += l[i] != row[i];
        }
        ck_assert_int_le(changed, last_n);
        free(row);
        free(l);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_dry_clone_is_independent_and_reset_empties_the_window)
{
    static const int32_t b3[] = {3, 4};
    const int32_t *s[] = {b3};
    sift_chain *a = dry_chain(1.0f, 2.0f, 1, 8, s, (const size_t[]){2}, 1);
    accept_all(a, (const int32_t[]){0, 1, 2, 0}, 4);
    sift_chain *b = NULL;
    ck_assert_int_eq(sift_chain_clone(a, &b, NULL), SIFT_OK);
    ck_assert(sift__chain_state_digest(a) == sift__chain_state_digest(b));
    float la[10], lb[10];
    dry_logits(a, la);
    dry_logits(b, lb);
    ck_assert(memcmp(la, lb, sizeof la) == 0);
    ck_assert(la[1] == -1.0f);
    accept_all(b, (const int32_t[]){1}, 1);
    ck_assert(sift__chain_state_digest(a) != sift__chain_state_digest(b));
    dry_logits(a, la);
    dry_logits(b, lb);
    ck_assert(la[1] == -1.0f && la[2] == 0.0f);
    ck_assert(lb[1] == 0.0f && lb[2] == -2.0f); /* "0 1" repeated: e = 1 */
    sift_chain_free(a);
    sift_chain_reset(b);
    dry_logits(b, lb);
    for (int t = 0; t < 10; t++)
        ck_assert(lb[t] == 0.0f);
    sift_chain *f = dry_chain(1.0f, 2.0f, 1, 8, s, (const size_t[]){2}, 1);
    ck_assert(sift__chain_state_digest(b) == sift__chain_state_digest(f));
    sift_chain_free(b);
    sift_chain_free(f);
}
END_TEST

START_TEST(test_dry_handles_a_large_window_in_linear_time)
{
    /* 200000 accepted tokens of one repeated pattern: the naive suffix
     * comparison would be 10^10 steps; the Z-algorithm is linear. */
    sift_chain_params pp;
    sift_chain_params_init(&pp);
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &pp, NULL), SIFT_OK);
    ck_assert_int_eq(sift__chain_add_dry_tokens(c, 0.8f, 1.75f, 2, 200000, NULL, NULL, 0, NULL),
                     SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    for (int i = 0; i < 200000; i++)
        ck_assert_int_eq(sift_chain_accept(c, i % 3 == 2 ? 7 : 5, NULL), SIFT_OK);
    float row[10], l[10];
    fill(row, 10, 0.0f);
    for (int s = 0; s < 3; s++)
        dist_by_id(c, row, 10, NULL, l);
    /* the last tokens are 5 5 7 ... 5 (200000 % 3 = 2 -> ends "7 5 5"?):
     * whatever follows, both 5 and 7 extend a huge repeat: clamped to
     * floor(88.72 / ln 1.75) = 158, penalty 0.8 * 1.75^158 ~ 1.1e38 */
    ck_assert(l[0] == 0.0f);
    ck_assert(l[5] < -1e37f || l[7] < -1e37f);
    sift_chain_free(c);
}
END_TEST

/* DRY -> top_k -> dist, seed 5. */
static sift_chain *dry_top_k_chain(float mult, float base, int32_t allowed, int32_t last_n,
                                   const int32_t *const *seqs, const size_t *lens, size_t nb,
                                   int32_t top_k)
{
    sift_chain_params pp;
    sift_chain_params_init(&pp);
    pp.seed = 5;
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_eq(sift_chain_new(&c, &pp, NULL), SIFT_OK);
    ck_assert_msg(
        sift__chain_add_dry_tokens(c, mult, base, allowed, last_n, seqs, lens, nb, &err) == SIFT_OK,
        "%s", err.message);
    ck_assert_int_eq(sift_chain_add_top_k(c, top_k, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

/* The dynamic plan's k. */
static int32_t next_k(const sift_chain *c)
{
    sift_plan p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    ck_assert_int_eq(sift_chain_next_k(c, &p, NULL), SIFT_OK);
    return p.k;
}

START_TEST(test_dry_settles_its_penalised_set_after_a_sampled_token)
{
    /* Two chains with the same history and RNG: `a` accepts its last
     * token as generated right after a sample (it settles the penalised
     * set), `b` as a prompt token (it does not). The window (1000) makes
     * the static prefix 1003 of V = 4096, too long for the row step's
     * prefix path; the settled set asks for 3 + 2. */
    enum { V = 4096 };
    sift_chain *a = dry_top_k_chain(1.0f, 2.0f, 2, 1000, NULL, NULL, 0, 3);
    sift_chain *b = dry_top_k_chain(1.0f, 2.0f, 2, 1000, NULL, NULL, 0, 3);
    static const int32_t hist[] = {0, 1, 2, 0, 1, 5, 0};
    for (size_t i = 0; i < sizeof hist / sizeof hist[0]; i++) {
        ck_assert_int_eq(sift_chain_accept_prompt(a, hist[i], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept_prompt(b, hist[i], NULL), SIFT_OK);
    }
    ck_assert_int_eq(next_k(a), 3 + 6); /* the window bound: len - 1 */
    float *row = malloc(V * sizeof *row);
    tu_rng r = {77};
    tu_row(&r, row, V, 0);
    int32_t ta = -1, tb = -1;
    ck_assert_int_eq(sift_chain_sample(a, row, V, &ta, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(b, row, V, &tb, NULL), SIFT_OK);
    ck_assert_int_eq(ta, tb);
    /* history 0 1 2 0 1 5 0 1: "0 1" ended before 2 and before 5 */
    ck_assert_int_eq(sift_chain_accept(a, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept_prompt(b, 1, NULL), SIFT_OK);
    ck_assert(sift__chain_state_digest(a) == sift__chain_state_digest(b));
    ck_assert_int_eq(next_k(a), 3 + 2);
    ck_assert_int_eq(next_k(b), 3 + 7);
    /* a decides from the row's top 5, b takes the full pass: the same
     * tokens and RNG. 2 and 5 lead the row, so the penalty matters. */
    row[2] = 30.0f;
    row[5] = 29.5f;
    sift_stats s0, s1;
    memset(&s0, 0, sizeof s0);
    s0.struct_size = sizeof s0;
    s1 = s0;
    ck_assert_int_eq(sift_chain_stats(a, &s0, NULL), SIFT_OK);
    for (int step = 0; step < 4; step++) {
        ck_assert_int_eq(sift_chain_sample(a, row, V, &ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift__sample_row(b, row, V, &tb, 0, NULL), SIFT_OK);
        ck_assert_int_eq(ta, tb);
        uint64_t ra[4], rb[4];
        sift__chain_rng_state(a, ra);
        sift__chain_rng_state(b, rb);
        ck_assert(memcmp(ra, rb, sizeof ra) == 0);
    }
    ck_assert_int_eq(sift_chain_stats(a, &s1, NULL), SIFT_OK);
    ck_assert_uint_eq(s1.row_prefix_decided - s0.row_prefix_decided, 4);
    /* penalty 1 * 2^0 on 2 and 5 */
    float *la = malloc(V * sizeof *la);
    dist_by_id(a, row, V, NULL, la);
    ck_assert(la[2] == 29.0f && la[5] == 28.5f);
    /* any accept clears the settled set; so does a reset */
    ck_assert_int_eq(sift_chain_accept_prompt(a, 2, NULL), SIFT_OK);
    ck_assert_int_eq(next_k(a), 3 + 8);
    ck_assert_int_eq(sift_chain_sample(a, row, V, &ta, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
    ck_assert_int_lt(next_k(a), 3 + 9);
    sift_chain_reset(a);
    ck_assert_int_eq(next_k(a), 3);
    free(row);
    free(la);
    sift_chain_free(a);
    sift_chain_free(b);
}
END_TEST

START_TEST(test_dry_settled_and_computed_sets_agree_bitwise)
{
    /* Random DRY settings (token-sequence breakers, allowed_length 0..3,
     * small alphabets so that repeats are common): `a` accepts each token
     * as generated after its sample (it settles), `b` as a prompt token
     * (it computes the set in each step), `c` is a clone of `a` taken
     * mid-way; tokens and RNG agree bitwise. `u` (DRY -> dist, prompt
     * tokens) shows every logit DRY lowers: a's dynamic plan counts
     * exactly those. */
    tu_rng r = {4242};
    int counted = 0;
    for (int rep = 0; rep < 120; rep++) {
        int32_t V = (int32_t)tu_range(&r, 8, 300);
        int32_t last_n = (int32_t)tu_range(&r, 1, 60);
        int32_t allowed = (int32_t)tu_range(&r, 0, 3);
        int32_t top_k = (int32_t)tu_range(&r, 1, 6);
        int32_t alpha = (int32_t)tu_range(&r, 2, 8);
        int32_t b0[3], b1[1];
        for (int i = 0; i < 3; i++)
            b0[i] = (int32_t)tu_range(&r, 0, alpha - 1);
        b1[0] = (int32_t)tu_range(&r, 0, alpha - 1);
        const int32_t *seqs[] = {b0, b1};
        const size_t lens[] = {(size_t)tu_range(&r, 1, 3), 1};
        size_t nb = (size_t)tu_range(&r, 0, 2);
        float mult = (float)(0.25 + tu_unif(&r));
        float base = (float)(1 + tu_unif(&r));
        sift_chain *a = dry_top_k_chain(mult, base, allowed, last_n, seqs, lens, nb, top_k);
        sift_chain *b = dry_top_k_chain(mult, base, allowed, last_n, seqs, lens, nb, top_k);
        sift_chain *u = dry_chain(mult, base, allowed, last_n, seqs, lens, nb);
        sift_chain *c = NULL;
        float *row = malloc((size_t)V * sizeof *row);
        float *lu = malloc((size_t)V * sizeof *lu);
        for (int step = 0; step < 50; step++) {
            for (int32_t i = 0; i < V; i++)
                row[i] = (float)tu_range(&r, -8, 2) * 0.5f;
            for (int32_t i = 0; i < alpha; i++)
                row[i] = (float)tu_range(&r, 4, 12);
            if (step > 0) {
                dist_by_id(u, row, V, NULL, lu);
                int32_t lowered = 0;
                for (int32_t i = 0; i < V; i++)
                    lowered += lu[i] != row[i];
                ck_assert_int_eq(next_k(a), top_k + lowered);
                counted++;
            }
            int32_t ta = -1, tb = -1, tc = -1;
            ck_assert_int_eq(sift_chain_sample(a, row, V, &ta, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_sample(b, row, V, &tb, NULL), SIFT_OK);
            ck_assert_int_eq(ta, tb);
            if (c) {
                ck_assert_int_eq(sift_chain_sample(c, row, V, &tc, NULL), SIFT_OK);
                ck_assert_int_eq(tc, ta);
            }
            uint64_t ra[4], rb[4];
            sift__chain_rng_state(a, ra);
            sift__chain_rng_state(b, rb);
            ck_assert(memcmp(ra, rb, sizeof ra) == 0);
            int32_t t = tu_unif(&r) < 0.6 ? ta : (int32_t)tu_range(&r, 0, alpha);
            ck_assert_int_eq(sift_chain_accept(a, t, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept_prompt(b, t, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept_prompt(u, t, NULL), SIFT_OK);
            if (c)
                ck_assert_int_eq(sift_chain_accept(c, t, NULL), SIFT_OK);
            if (step == 25)
                ck_assert_int_eq(sift_chain_clone(a, &c, NULL), SIFT_OK);
            ck_assert(sift__chain_state_digest(a) == sift__chain_state_digest(b));
        }
        free(row);
        free(lu);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_chain_free(u);
        sift_chain_free(c);
    }
    ck_assert_int_eq(counted, 120 * 49);
}
END_TEST

/* ------------------------------------------------------------------ */
/* logit_bias                                                          */
/* ------------------------------------------------------------------ */

static sift_chain *bias_chain(const sift_bias *b, size_t n)
{
    sift_chain *c = tu_chain_new(0, NULL);
    sift_error err;
    ck_assert_msg(sift_chain_add_logit_bias(c, b, n, &err) == SIFT_OK, "%s", err.message);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

START_TEST(test_logit_bias_adds_to_the_listed_tokens)
{
    const sift_bias b[] = {{1, 2.0f}, {3, -1.0f}};
    sift_chain *c = bias_chain(b, 2);
    float row[4] = {0, 0, 0, 0}, l[4];
    double p[4];
    dist_by_id(c, row, 4, p, l);
    ck_assert(l[0] == 0.0f && l[1] == 2.0f && l[2] == 0.0f && l[3] == -1.0f);
    /* p = e^l / (1 + e^2 + 1 + e^-1) */
    double want[4];
    softmax_ref((const double[]){0, 2, 0, -1}, 4, want);
    expect_probs(p, want, 4);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_logit_bias_duplicates_add_up_in_entry_order)
{
    /* (0 + 1e8) + 1 = 1e8 in float, then - 1e8 = 0; in the other order
     * (0 + 1) + 1e8 - 1e8 would be 0 too, but (1e8 - 1e8) + 1 = 1. */
    const sift_bias b1[] = {{0, 1e8f}, {1, 0.5f}, {0, 1.0f}, {0, -1e8f}};
    const sift_bias b2[] = {{0, 1e8f}, {0, -1e8f}, {0, 1.0f}};
    float row[2] = {0, 0}, l[2];
    sift_chain *c = bias_chain(b1, 4);
    dist_by_id(c, row, 2, NULL, l);
    volatile float x = 0.0f;
    x = x + 1e8f;
    x = x + 1.0f;
    x = x + -1e8f;
    ck_assert(l[0] == x && l[0] == 0.0f);
    ck_assert(l[1] == 0.5f);
    int64_t n;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_RAISES);
    ck_assert_int_eq(n, 2); /* distinct tokens */
    sift_chain_free(c);
    c = bias_chain(b2, 3);
    dist_by_id(c, row, 2, NULL, l);
    ck_assert(l[0] == 1.0f);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_logit_bias_neg_inf_bans_and_banning_everything_is_no_candidate)
{
    const sift_bias b[] = {{0, -INFINITY}, {2, -INFINITY}};
    sift_chain *c = bias_chain(b, 2);
    float row[3] = {5, 1, 9}, l[3];
    ck_assert_uint_eq(dist_by_id(c, row, 3, NULL, l), 3);
    ck_assert(l[0] == -INFINITY && l[1] == 1.0f && l[2] == -INFINITY);
    int32_t tok;
    ck_assert_int_eq(sift_chain_sample(c, row, 3, &tok, NULL), SIFT_OK);
    ck_assert_int_eq(tok, 1);
    float row2[3] = {5, -INFINITY, 9};
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row2, 3, &tok, &err), SIFT_E_NO_CANDIDATE);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_logit_bias_overflow_is_row_value_naming_the_token)
{
    const sift_bias b[] = {{3, 1e38f}, {2, 3e38f}, {2, -INFINITY}, {1, 1.0f}};
    sift_chain *c = bias_chain(b, 4);
    float row[4] = {0, 0, 3e38f, 3e38f};
    int32_t tok;
    sift_error err;
    /* token 2: (3e38 + 3e38) = +inf, then + -inf = NaN; token 3: +inf.
     * The smallest id is named. */
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, &err), SIFT_E_ROW_VALUE);
    ck_assert_int_eq(err.index, 2);
    ck_assert_ptr_nonnull(strstr(err.message, "logit_bias"));
    ck_assert_ptr_nonnull(strstr(err.message, "NaN"));
    row[2] = 0;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &tok, &err), SIFT_E_ROW_VALUE);
    ck_assert_int_eq(err.index, 3);
    ck_assert_ptr_nonnull(strstr(err.message, "+inf"));
    sift_chain_free(c);
}
END_TEST

START_TEST(test_logit_bias_rejects_entries_of_one_token_that_sum_to_pinf)
{
    sift_chain *c = tu_chain_new(0, NULL);
    sift_error err;
    const sift_bias two[] = {{1, 1.0f}, {5, 3e38f}, {2, 0.0f}, {5, 3e38f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, two, 4, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 3);
    ck_assert_ptr_nonnull(strstr(err.message, "token 5"));
    /* the running sum from 0 decides: -3e38 + 3e38 + 3e38 is finite, and
     * -inf then a large bias stays -inf (a ban) */
    const sift_bias ok[] = {{5, -3e38f}, {5, 3e38f}, {5, 3e38f}, {6, -INFINITY}, {6, 3e38f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, ok, 5, &err), SIFT_OK);
    ck_assert_uint_eq(sift_chain_n_stages(c), 1);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_logit_bias_rejects_every_bad_parameter)
{
    sift_chain *c = tu_chain_new(0, NULL);
    sift_error err;
    const sift_bias ok[] = {{1, 1.0f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(NULL, ok, 1, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_logit_bias(c, NULL, 1, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_logit_bias(c, ok, (size_t)SIFT_DEFAULT_MAX_VOCAB + 1, &err),
                     SIFT_E_LIMIT);
    const sift_bias neg[] = {{1, 1.0f}, {-3, 1.0f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, neg, 2, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 1);
    ck_assert_ptr_nonnull(strstr(err.message, "entry 1"));
    ck_assert_ptr_nonnull(strstr(err.message, "-3"));
    const sift_bias nan_b[] = {{4, NAN}}, inf_b[] = {{0, 0}, {5, INFINITY}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, nan_b, 1, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_logit_bias(c, inf_b, 2, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "token 5"));
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    /* n = 0 (NULL allowed) is an identity stage */
    ck_assert_int_eq(sift_chain_add_logit_bias(c, NULL, 0, &err), SIFT_OK);
    int64_t n;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_IDENTITY);
    /* a token beyond the row is caught at sample time */
    const sift_bias far[] = {{1, -1.0f}, {10, -1.0f}, {10, -2.0f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, far, 3, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_stage_class(c, 1, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float row[10] = {0};
    int32_t tok;
    ck_assert_int_eq(sift_chain_sample(c, row, 10, &tok, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 10);
    float row11[11] = {0};
    ck_assert_int_eq(sift_chain_sample(c, row11, 11, &tok, &err), SIFT_OK);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_logit_bias_negative_biases_never_raise_on_sparse_arrays_too)
{
    tu_rng r = {5150};
    for (int rep = 0; rep < 200; rep++) {
        int32_t V = (int32_t)tu_range(&r, 2, 500);
        sift_bias b[16];
        size_t nb = (size_t)tu_range(&r, 1, 16);
        for (size_t i = 0; i < nb; i++) {
            b[i].token = (int32_t)tu_range(&r, 0, V - 1);
            b[i].bias = tu_unif(&r) < 0.2 ? -INFINITY : (float)(-3 * tu_unif(&r));
        }
        sift_chain *c = tu_chain_new(0, NULL);
        /* top_k first so the bias sees a sparse array */
        ck_assert_int_eq(sift_chain_add_top_k(c, V / 2 + 1, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_logit_bias(c, b, nb, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        int64_t n;
        ck_assert_int_eq(sift_chain_stage_class(c, 1, &n), SIFT_CLASS_LOWERS);
        float *row = malloc((size_t)V * sizeof *row), *l = malloc((size_t)V * sizeof *l);
        tu_row(&r, row, V, TU_ROW_NORMAL);
        dist_by_id(c, row, V, NULL, l);
        int changed = 0;
        for (int32_t i = 0; i < V; i++)
            if (l[i] == l[i]) {
                ck_assert(l[i] <= row[i]);
                changed += l[i] != row[i];
            }
        ck_assert_int_le(changed, n);
        free(row);
        free(l);
        sift_chain_free(c);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The oracle on hand-built chains, and the prefix path                */
/* ------------------------------------------------------------------ */

START_TEST(test_oracle_agrees_on_hand_built_chains)
{
    static const int32_t hist[] = {0, 1, 2, 0, 1, 3, 3, 2, 0, 1, 2, 0, 1};
    sp_chain s;
    memset(&s, 0, sizeof s);
    s.seed = 17;
    s.n = 5;
    s.st[0].kind = SP_LOGIT_BIAS;
    s.st[0].n_bias = 3;
    s.st[0].bias[0] = (sift_bias){2, 1.5f};
    s.st[0].bias[1] = (sift_bias){5, -INFINITY};
    s.st[0].bias[2] = (sift_bias){2, -0.25f};
    s.st[1].kind = SP_PENALTIES;
    s.st[1].i0 = 6;
    s.st[1].f0 = 1.3f;
    s.st[1].f1 = 0.2f;
    s.st[1].f2 = -0.1f;
    s.st[2].kind = SP_DRY;
    s.st[2].f0 = 0.8f;
    s.st[2].f1 = 1.75f;
    s.st[2].i0 = 1;
    s.st[2].i1 = 12;
    s.st[2].n_breakers = 2;
    s.st[2].breaker[0][0] = 3;
    s.st[2].breaker_len[0] = 1;
    s.st[2].breaker[1][0] = 1;
    s.st[2].breaker[1][1] = 2;
    s.st[2].breaker_len[1] = 2;
    s.st[3].kind = SP_TOP_K;
    s.st[3].i0 = 4;
    s.st[4].kind = SP_DIST;
    agree(&s, hist, sizeof hist / sizeof *hist, 8, 20, 1);
    agree(&s, hist, sizeof hist / sizeof *hist, 3000, 10, 2);
    /* top_k first: the prefix path runs the penalties on a canonical
     * prefix (then sorts it again); the oracle must still agree */
    sp_chain t = s;
    t.st[0] = s.st[3];
    t.st[0].i0 = 40;
    t.st[1] = s.st[1];
    t.st[2] = s.st[2];
    t.st[3] = s.st[0];
    t.st[4].kind = SP_DIST_ID;
    agree(&t, hist, sizeof hist / sizeof *hist, 5000, 10, 3);
    t.st[4].kind = SP_GREEDY;
    agree(&t, hist, sizeof hist / sizeof *hist, 5000, 10, 4);
}
END_TEST

START_TEST(test_lowering_stages_let_the_prefix_path_decide)
{
    sift_chain *c = tu_chain_new(0, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 16, 1.2f, 0.5f, 0.5f, NULL), SIFT_OK);
    ck_assert_int_eq(sift__chain_add_dry_tokens(c, 0.8f, 1.75f, 2, 16, NULL, NULL, 0, NULL),
                     SIFT_OK);
    const sift_bias b[] = {{1, -2.0f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, b, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 10, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    tu_rng r = {8};
    int32_t V = 20000;
    float *row = malloc((size_t)V * sizeof *row);
    for (int s = 0; s < 20; s++) {
        tu_row(&r, row, V, TU_ROW_PEAKED);
        int32_t tok;
        ck_assert_int_eq(sift_chain_sample(c, row, V, &tok, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK);
    }
    ck_assert(c->n_prefix_decided > 0);
    free(row);
    sift_chain_free(c);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("penalties");
    struct {
        const char *name;
        const TTest *t;
    } cases[] = {
        {"penalties_repeat", test_penalties_repeat_50_collapses_the_repeated_tokens},
        {"penalties_freq_presence",
         test_penalties_frequency_and_presence_subtract_count_times_freq_plus_presence},
        {"penalties_sign", test_penalties_divide_positive_and_multiply_non_positive_logits},
        {"penalties_float", test_penalties_use_the_exact_float_expression},
        {"penalties_window", test_penalties_window_evicts_the_oldest_token},
        {"penalties_overflow", test_penalties_leave_neg_inf_alone_and_report_overflow_as_row_value},
        {"penalties_bad_params", test_penalties_reject_every_bad_parameter},
        {"penalties_overflow_params", test_penalties_reject_parameters_that_overflow_on_every_row},
        {"penalties_class", test_penalties_no_op_settings_are_identity_and_keep_no_history},
        {"penalties_lowers",
         test_penalties_lowers_class_never_raises_and_changes_at_most_last_n_tokens},
        {"penalties_clone", test_penalties_clone_copies_counts_and_is_independent},
        {"penalties_far_tokens", test_penalties_ignore_history_tokens_beyond_the_row},
        {"penalties_filter", test_penalties_on_a_slice_keep_tokens_that_share_a_filter_entry},
        {"penalties_slice_order", test_penalties_on_a_slice_reorder_in_one_pass_as_the_oracle},
        {"dry_upstream", test_dry_reproduces_the_upstream_vectors},
        {"dry_growth", test_dry_penalty_grows_as_base_to_the_excess_length},
        {"dry_breakers", test_dry_breakers_cap_the_repeat_and_single_token_breakers_are_exempt},
        {"dry_window", test_dry_window_drops_old_tokens},
        {"dry_clamp", test_dry_clamps_the_exponent_and_overflow_bans_instead_of_nan},
        {"dry_strings", test_dry_string_breakers_compile_through_the_vocabulary},
        {"dry_bad_params", test_dry_rejects_every_bad_parameter},
        {"dry_class", test_dry_off_settings_are_identity_and_on_is_lowers_last_n},
        {"dry_lowers", test_dry_never_raises_and_lowers_at_most_last_n_tokens},
        {"dry_clone", test_dry_clone_is_independent_and_reset_empties_the_window},
        {"dry_large_window", test_dry_handles_a_large_window_in_linear_time},
        {"dry_settles", test_dry_settles_its_penalised_set_after_a_sampled_token},
        {"dry_settled_agrees", test_dry_settled_and_computed_sets_agree_bitwise},
        {"bias_adds", test_logit_bias_adds_to_the_listed_tokens},
        {"bias_duplicates", test_logit_bias_duplicates_add_up_in_entry_order},
        {"bias_ban", test_logit_bias_neg_inf_bans_and_banning_everything_is_no_candidate},
        {"bias_overflow", test_logit_bias_overflow_is_row_value_naming_the_token},
        {"bias_bad_params", test_logit_bias_rejects_every_bad_parameter},
        {"bias_sum_overflow", test_logit_bias_rejects_entries_of_one_token_that_sum_to_pinf},
        {"bias_lowers", test_logit_bias_negative_biases_never_raise_on_sparse_arrays_too},
        {"oracle", test_oracle_agrees_on_hand_built_chains},
        {"prefix_path", test_lowering_stages_let_the_prefix_path_decide},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_test(tc, cases[i].t);
        suite_add_tcase(s, tc);
    }
    return s;
}

/*
 * check_trunc.c - the truncating samplers: top_p, min_p, typical, xtc.
 *
 * For each sampler: hand-computed vectors (llama.cpp's upstream vectors
 * re-derived for sift's exact definitions), ties at every boundary, -inf
 * tokens, min_keep above the size, every bad parameter, the capability
 * class, order independence, and agreement with the naive oracle on the
 * hand cases and on large rows (V >= 100k; for typical, bit for bit on
 * every row shape from V = 16384 up, where its bucket path runs).
 *
 * Kept sets are read through sift_chain_distribution on a chain
 * [stage, dist]: it reports the survivors in canonical order with their
 * renormalised probabilities. The oracle is driven stage by stage on a
 * canonically sorted copy of the row, so both sides can be compared id
 * by id.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define IDS(...) (const int32_t[]){__VA_ARGS__}, N(((const int32_t[]){__VA_ARGS__}))

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static sp_stage mk(sp_kind kind, float f0, float f1, int32_t i0)
{
    sp_stage s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.f0 = f0;
    s.f1 = f1;
    s.i0 = i0;
    return s;
}

/* [stage, dist] with the given seed. */
static sift_chain *stage_chain(const sp_stage *s, uint64_t seed)
{
    sift_chain *c = tu_chain_new(seed, NULL);
    sift_error err;
    ck_assert_msg(sp_add(c, s, &err) == SIFT_OK, "add: %s", err.message);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

/* The distribution of [stage, dist] on row; returns the count. */
static size_t sift_keep(const sp_stage *s, const float *row, int32_t V, uint64_t seed,
                        sift_token_prob *out)
{
    sift_chain *c = stage_chain(s, seed);
    size_t n = 0;
    sift_error err;
    sift_status st = sift_chain_distribution(c, row, V, out, (size_t)V, &n, &err);
    ck_assert_msg(st == SIFT_OK, "distribution: %s", err.message);
    sift_chain_free(c);
    return n;
}

/* The oracle's survivors of one stage (canonical order) into ids. */
static size_t oracle_keep(const sp_stage *s, const float *row, int32_t V, uint64_t seed,
                          sift_candidate *out, sift_status *status)
{
    sp_chain spec;
    memset(&spec, 0, sizeof spec);
    spec.seed = seed;
    spec.n = 1;
    spec.st[0] = *s;
    or_chain o;
    or_init(&o, &spec);
    or_arr a = {out, (size_t)V, V};
    for (int32_t i = 0; i < V; i++) {
        out[i].id = i;
        out[i].logit = row[i];
    }
    or_sort(&a);
    sift_status st = SIFT_E_ARG;
    switch (s->kind) {
    case SP_TOP_P: st = or_top_p(&o, 0, &a); break;
    case SP_MIN_P: st = or_min_p(&o, 0, &a); break;
    case SP_TYPICAL: st = or_typical(&o, 0, &a); break;
    case SP_XTC: st = or_xtc(&o, 0, &a); break;
    case SP_EPSILON: st = or_epsilon(&o, 0, &a); break;
    case SP_ETA: st = or_eta(&o, 0, &a); break;
    default: break;
    }
    or_sort(&a);
    or_free(&o);
    *status = st;
    return a.n;
}

/* Checks that both sift and the oracle keep exactly `ids` (canonical
 * order) and returns sift's distribution in out (room for V). */
static void expect_keep(const sp_stage *s, const float *row, int32_t V, const int32_t *ids,
                        size_t n_ids, sift_token_prob *out)
{
    size_t n = sift_keep(s, row, V, 7, out);
    ck_assert_uint_eq(n, n_ids);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(out[i].id, ids[i]);
    sift_candidate *oc = malloc((size_t)V * sizeof *oc);
    sift_status st;
    size_t on = oracle_keep(s, row, V, 7, oc, &st);
    ck_assert_int_eq(st, SIFT_OK);
    ck_assert_uint_eq(on, n_ids);
    for (size_t i = 0; i < on; i++)
        ck_assert_int_eq(oc[i].id, ids[i]);
    free(oc);
}

/* logits ln(p_i) for the upstream probability vectors */
static void log_row(const float *p, float *row, int32_t V)
{
    for (int32_t i = 0; i < V; i++)
        row[i] = logf(p[i]);
}

static const float P1234[4] = {0.1f, 0.2f, 0.3f, 0.4f};
static const float P4321[4] = {0.4f, 0.3f, 0.2f, 0.1f};

/* A custom stage that bans every candidate (sets it to -inf). */
static int ban_all(void *user, sift_candidate *data, size_t *size)
{
    (void)user;
    for (size_t i = 0; i < *size; i++)
        data[i].logit = -INFINITY;
    return 0;
}

/* A custom stage that changes nothing; the chain hands the next stage a
 * canonically stored array after it (instead of the id-ordered row). */
static int pass(void *user, sift_candidate *data, size_t *size)
{
    (void)user;
    (void)data;
    (void)size;
    return 0;
}

static void add_custom(sift_chain *c, int (*fn)(void *, sift_candidate *, size_t *))
{
    sift_custom_stage vt;
    memset(&vt, 0, sizeof vt);
    vt.abi_version = SIFT_CUSTOM_STAGE_ABI;
    vt.name = "helper";
    vt.apply = fn;
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, NULL, NULL), SIFT_OK);
}

/* [ban_all, stage, dist] must fail with NO_CANDIDATE, and the message
 * names stage 0, the custom stage that banned the last candidate, not the
 * stage under test, which finds nothing left (that it reports this rather
 * than producing NaN is what the oracle check below pins down). */
static void expect_no_candidate_after_ban(const sp_stage *s, const char *name)
{
    sift_chain *c = tu_chain_new(1, NULL);
    add_custom(c, ban_all);
    ck_assert_int_eq(sp_add(c, s, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float row[5] = {1, 2, 3, 4, 5};
    int32_t t = -1;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 5, &t, &err), SIFT_E_NO_CANDIDATE);
    ck_assert_int_eq(err.index, 0);
    ck_assert_msg(strstr(err.message, "stage 0 (helper)") != NULL, "message: %s", err.message);
    ck_assert_msg(strstr(err.message, name) == NULL, "message blames %s: %s", name, err.message);
    sift_chain_free(c);
    /* the oracle agrees (the custom stage is replaced by a banned row) */
    float banned_row[5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    sift_candidate oc[5];
    sift_status st;
    oracle_keep(s, banned_row, 5, 1, oc, &st);
    ck_assert_int_eq(st, SIFT_E_NO_CANDIDATE);
}

/* ------------------------------------------------------------------ */
/* top_p                                                               */
/* ------------------------------------------------------------------ */

/* probs {0.1, 0.2, 0.3, 0.4} as logits ln p. sift's weights (units of
 * 2^62) are 0.25, 0.49999997, 0.74999994, 1 (sift__expf of the float
 * differences), W = 2.49999991. */
START_TEST(test_top_p_keeps_the_shortest_prefix_reaching_p)
{
    float row[4];
    sift_token_prob out[4];
    log_row(P1234, row, 4);
    /* 0.8: 0.4 + 0.3 = 0.7 < 0.8 <= 0.9 -> {0.4, 0.3, 0.2}, renormalised
     * by 0.9 */
    sp_stage s = mk(SP_TOP_P, 0.8f, 0, 0);
    expect_keep(&s, row, 4, IDS(3, 2, 1), out);
    ck_assert_double_eq_tol(out[0].p, 0.4 / 0.9, 1e-6);
    ck_assert_double_eq_tol(out[1].p, 0.3 / 0.9, 1e-6);
    ck_assert_double_eq_tol(out[2].p, 0.2 / 0.9, 1e-6);
    /* 0.7 (the float 0.699999988): T = ceil(0.7f * W); the prefix
     * {0.4, 0.3} has mass 1.74999994 * 2^62, just above T (by ~1.5e11
     * units), so it suffices, as in llama.cpp's test: {0.4, 0.3} / 0.7 */
    s = mk(SP_TOP_P, 0.7f, 0, 0);
    expect_keep(&s, row, 4, IDS(3, 2), out);
    ck_assert_double_eq_tol(out[0].p, 0.4 / 0.7, 1e-6);
    ck_assert_double_eq_tol(out[1].p, 0.3 / 0.7, 1e-6);
    /* 0.5 and 0.3: two tokens, then one */
    s = mk(SP_TOP_P, 0.5f, 0, 0);
    expect_keep(&s, row, 4, IDS(3, 2), out);
    s = mk(SP_TOP_P, 0.3f, 0, 0);
    expect_keep(&s, row, 4, IDS(3), out);
    ck_assert_double_eq_tol(out[0].p, 1.0, 1e-12);
}
END_TEST

START_TEST(test_top_p_zero_keeps_one_token_or_min_keep)
{
    float row[4];
    sift_token_prob out[4];
    log_row(P1234, row, 4);
    sp_stage s = mk(SP_TOP_P, 0.0f, 0, 0);
    expect_keep(&s, row, 4, IDS(3), out);
    s = mk(SP_TOP_P, 0.0f, 0, 1);
    expect_keep(&s, row, 4, IDS(3), out);
    s = mk(SP_TOP_P, 0.0f, 0, 3);
    expect_keep(&s, row, 4, IDS(3, 2, 1), out);
    ck_assert_double_eq_tol(out[0].p, 0.4 / 0.9, 1e-6);
    /* min_keep above the size keeps everything */
    s = mk(SP_TOP_P, 0.0f, 0, 10);
    expect_keep(&s, row, 4, IDS(3, 2, 1, 0), out);
    /* min_keep also extends a prefix that reached p */
    s = mk(SP_TOP_P, 0.5f, 0, 3);
    expect_keep(&s, row, 4, IDS(3, 2, 1), out);
}
END_TEST

START_TEST(test_top_p_one_is_a_no_op_even_for_banned_tokens)
{
    float row[5] = {0.0f, -INFINITY, 1.0f, -INFINITY, 2.0f};
    sift_token_prob out[5];
    sp_stage s = mk(SP_TOP_P, 1.0f, 0, 0);
    expect_keep(&s, row, 5, IDS(4, 2, 0, 1, 3), out);
    ck_assert_double_eq(out[3].p, 0.0);
    /* just below 1, the zero-weight tokens can never be needed */
    s = mk(SP_TOP_P, nextafterf(1.0f, 0.0f), 0, 0);
    expect_keep(&s, row, 5, IDS(4, 2, 0), out);
    /* ... unless min_keep asks for them: canonical order puts -inf last,
     * by id */
    s = mk(SP_TOP_P, 0.5f, 0, 4);
    expect_keep(&s, row, 5, IDS(4, 2, 0, 1), out);
}
END_TEST

/* Four equal logits: each weight is exactly 2^62, W = 4 * 2^62. */
START_TEST(test_top_p_threshold_is_inclusive_on_exact_ties)
{
    float row[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    sift_token_prob out[4];
    /* T = ceil(0.5 W) = 2 * 2^62, reached exactly by two tokens (>=) */
    sp_stage s = mk(SP_TOP_P, 0.5f, 0, 0);
    expect_keep(&s, row, 4, IDS(0, 1), out);
    ck_assert_double_eq_tol(out[0].p, 0.5, 1e-12);
    /* the next float above 0.5 needs a third token */
    s = mk(SP_TOP_P, nextafterf(0.5f, 1.0f), 0, 0);
    expect_keep(&s, row, 4, IDS(0, 1, 2), out);
    s = mk(SP_TOP_P, 0.25f, 0, 0);
    expect_keep(&s, row, 4, IDS(0), out);
    s = mk(SP_TOP_P, 0.75f, 0, 0);
    expect_keep(&s, row, 4, IDS(0, 1, 2), out);
    /* ties are cut by id, whatever the row's layout */
    float row2[6] = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f, 1.0f};
    sift_token_prob out2[6];
    s = mk(SP_TOP_P, 0.0f, 0, 2);
    expect_keep(&s, row2, 6, IDS(1, 3), out2);
}
END_TEST

START_TEST(test_top_p_with_every_logit_banned_reports_no_candidate)
{
    sp_stage s = mk(SP_TOP_P, 0.5f, 0, 0);
    expect_no_candidate_after_ban(&s, "top_p");
}
END_TEST

/* ------------------------------------------------------------------ */
/* min_p                                                               */
/* ------------------------------------------------------------------ */

/* probs {0.1, 0.2, 0.3, 0.4}: the threshold is ln 0.4 + ln p, i.e. keep
 * p_i >= p * 0.4. The margins below are all >= 2%, far above float
 * rounding. */
START_TEST(test_min_p_keeps_tokens_within_p_of_the_most_likely)
{
    float row[4];
    sift_token_prob out[4];
    log_row(P1234, row, 4);
    sp_stage s = mk(SP_MIN_P, 0.24f, 0, 0); /* 0.096: all four */
    expect_keep(&s, row, 4, IDS(3, 2, 1, 0), out);
    ck_assert_double_eq_tol(out[3].p, 0.1, 1e-6);
    s = mk(SP_MIN_P, 0.26f, 0, 0); /* 0.104: drops 0.1 */
    expect_keep(&s, row, 4, IDS(3, 2, 1), out);
    ck_assert_double_eq_tol(out[0].p, 0.4 / 0.9, 1e-6);
    s = mk(SP_MIN_P, 0.49f, 0, 0); /* 0.196: keeps 0.2 */
    expect_keep(&s, row, 4, IDS(3, 2, 1), out);
    s = mk(SP_MIN_P, 0.51f, 0, 0); /* 0.204: drops 0.2 */
    expect_keep(&s, row, 4, IDS(3, 2), out);
    ck_assert_double_eq_tol(out[1].p, 0.3 / 0.7, 1e-6);
    s = mk(SP_MIN_P, 0.74f, 0, 0); /* 0.296: keeps 0.3 */
    expect_keep(&s, row, 4, IDS(3, 2), out);
    s = mk(SP_MIN_P, 0.76f, 0, 0); /* 0.304: only 0.4 */
    expect_keep(&s, row, 4, IDS(3), out);
    ck_assert_double_eq_tol(out[0].p, 1.0, 1e-12);
    s = mk(SP_MIN_P, 1.0f, 0, 0);
    expect_keep(&s, row, 4, IDS(3), out);
}
END_TEST

START_TEST(test_min_p_zero_is_a_no_op)
{
    float row[5] = {0.0f, -INFINITY, 1.0f, -80.0f, 2.0f};
    sift_token_prob out[5];
    sp_stage s = mk(SP_MIN_P, 0.0f, 0, 0);
    expect_keep(&s, row, 5, IDS(4, 2, 0, 3, 1), out);
    /* a tiny p still drops what is below ln p (ln 1e-30 = -69.08) */
    s = mk(SP_MIN_P, 1e-30f, 0, 0);
    expect_keep(&s, row, 5, IDS(4, 2, 0), out);
}
END_TEST

START_TEST(test_min_p_one_keeps_every_token_tied_at_the_max)
{
    float row[6] = {1.0f, 3.0f, 3.0f, 0.0f, 3.0f, 2.9999998f};
    sift_token_prob out[6];
    sp_stage s = mk(SP_MIN_P, 1.0f, 0, 0);
    expect_keep(&s, row, 6, IDS(1, 2, 4), out);
    ck_assert_double_eq_tol(out[0].p, 1.0 / 3.0, 1e-12);
}
END_TEST

START_TEST(test_min_p_falls_back_to_the_canonical_first_min_keep)
{
    float row[4] = {5.0f, 1.0f, 1.0f, 1.0f};
    sift_token_prob out[4];
    /* only token 0 passes; min_keep 2 keeps the canonical first two,
     * splitting the tie at 1.0 by id */
    sp_stage s = mk(SP_MIN_P, 0.9f, 0, 2);
    expect_keep(&s, row, 4, IDS(0, 1), out);
    /* enough survivors: min_keep changes nothing */
    s = mk(SP_MIN_P, 0.001f, 0, 2);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
    /* min_keep above the size keeps all */
    s = mk(SP_MIN_P, 0.9f, 0, 9);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
    /* min_keep 0 and 1 both mean one */
    s = mk(SP_MIN_P, 0.9f, 0, 0);
    expect_keep(&s, row, 4, IDS(0), out);
    s = mk(SP_MIN_P, 0.9f, 0, 1);
    expect_keep(&s, row, 4, IDS(0), out);
}
END_TEST

START_TEST(test_min_p_with_every_logit_banned_reports_no_candidate)
{
    sp_stage s = mk(SP_MIN_P, 0.05f, 0, 0);
    expect_no_candidate_after_ban(&s, "min_p");
}
END_TEST

/* ------------------------------------------------------------------ */
/* typical                                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_typical_keeps_the_tokens_closest_to_the_entropy)
{
    float row[4];
    sift_token_prob out[4];
    /* {0.97, 0.01 x3}: H = 0.1677; scores 0.137 (0.97) and 4.44 (0.01);
     * 0.97 alone exceeds p = 0.5 */
    const float a[4] = {0.97f, 0.01f, 0.01f, 0.01f};
    log_row(a, row, 4);
    sp_stage s = mk(SP_TYPICAL, 0.5f, 0, 0);
    expect_keep(&s, row, 4, IDS(0), out);
    /* min_keep 2 adds the most typical of the tied 0.01s: id 1 */
    s = mk(SP_TYPICAL, 0.5f, 0, 2);
    expect_keep(&s, row, 4, IDS(0, 1), out);
    ck_assert_double_eq_tol(out[0].p, 0.97 / 0.98, 1e-6);
    /* {0.4, 0.2 x3}: H = 1.3322; scores 0.416 (0.4) and 0.277 (0.2): the
     * three 0.2s come first and their mass 0.6 > 0.5 */
    const float b[4] = {0.4f, 0.2f, 0.2f, 0.2f};
    log_row(b, row, 4);
    s = mk(SP_TYPICAL, 0.5f, 0, 0);
    expect_keep(&s, row, 4, IDS(1, 2, 3), out);
    for (int i = 0; i < 3; i++)
        ck_assert_double_eq_tol(out[i].p, 1.0 / 3.0, 1e-6);
    /* p = 0.3: two of them (mass 0.4 > 0.3), ties by id */
    s = mk(SP_TYPICAL, 0.3f, 0, 0);
    expect_keep(&s, row, 4, IDS(1, 2), out);
    /* p = 0.9 needs the 0.4 as well */
    s = mk(SP_TYPICAL, 0.9f, 0, 0);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
}
END_TEST

/* Four equal logits: equal scores, so typicality order is id order; each
 * weight is 2^62 and the threshold is strict. */
START_TEST(test_typical_threshold_is_strict_on_exact_ties)
{
    float row[4] = {2.0f, 2.0f, 2.0f, 2.0f};
    sift_token_prob out[4];
    /* T = floor(0.5 W) = 2 * 2^62: two tokens only reach it, three pass */
    sp_stage s = mk(SP_TYPICAL, 0.5f, 0, 0);
    expect_keep(&s, row, 4, IDS(0, 1, 2), out);
    /* 0.49: T = 1.96 * 2^62, passed by two */
    s = mk(SP_TYPICAL, 0.49f, 0, 0);
    expect_keep(&s, row, 4, IDS(0, 1), out);
    ck_assert_double_eq_tol(out[1].p, 0.5, 1e-12);
    /* p = 0: the first token with any mass */
    s = mk(SP_TYPICAL, 0.0f, 0, 0);
    expect_keep(&s, row, 4, IDS(0), out);
    s = mk(SP_TYPICAL, 0.0f, 0, 7);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
    /* p = 1 is a no-op */
    s = mk(SP_TYPICAL, 1.0f, 0, 0);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
}
END_TEST

START_TEST(test_typical_treats_zero_probability_tokens_as_adding_no_entropy)
{
    /* token 1's weight is 0 (e^-1000) and token 2 is banned: neither
     * makes H NaN; both have the largest scores (1000 and +inf) */
    float row[3] = {0.0f, -1000.0f, -INFINITY};
    sift_token_prob out[3];
    sp_stage s = mk(SP_TYPICAL, 0.5f, 0, 0);
    expect_keep(&s, row, 3, IDS(0), out);
    s = mk(SP_TYPICAL, 0.5f, 0, 2);
    expect_keep(&s, row, 3, IDS(0, 1), out);
    ck_assert_double_eq_tol(out[0].p, 1.0, 1e-12);
    s = mk(SP_TYPICAL, 0.5f, 0, 3);
    expect_keep(&s, row, 3, IDS(0, 1, 2), out);
    /* {0.4, 0.2 x3, banned}: p = 0.9 keeps the finite four only */
    float row2[5];
    const float b[4] = {0.4f, 0.2f, 0.2f, 0.2f};
    log_row(b, row2, 4);
    row2[4] = -INFINITY;
    sift_token_prob out2[5];
    s = mk(SP_TYPICAL, 0.9f, 0, 0);
    expect_keep(&s, row2, 5, IDS(0, 1, 2, 3), out2);
}
END_TEST

START_TEST(test_typical_with_every_logit_banned_reports_no_candidate)
{
    sp_stage s = mk(SP_TYPICAL, 0.5f, 0, 0);
    expect_no_candidate_after_ban(&s, "typical");
}
END_TEST

/* ------------------------------------------------------------------ */
/* xtc                                                                 */
/* ------------------------------------------------------------------ */

/* probs {0.4, 0.3, 0.2, 0.1} at ids 0..3; probability 1 always fires
 * (the draw is < 1). */
START_TEST(test_xtc_removes_every_likely_token_but_the_least_likely)
{
    float row[4];
    sift_token_prob out[4];
    log_row(P4321, row, 4);
    /* threshold 0.09: all four are above it; only 0.1 stays */
    sp_stage s = mk(SP_XTC, 1.0f, 0.09f, 0);
    expect_keep(&s, row, 4, IDS(3), out);
    ck_assert_double_eq_tol(out[0].p, 1.0, 1e-12);
    /* 0.19: 0.4, 0.3, 0.2 are above; 0.2 and 0.1 stay */
    s = mk(SP_XTC, 1.0f, 0.19f, 0);
    expect_keep(&s, row, 4, IDS(2, 3), out);
    ck_assert_double_eq_tol(out[0].p, 2.0 / 3.0, 1e-6);
    ck_assert_double_eq_tol(out[1].p, 1.0 / 3.0, 1e-6);
    /* 0.35: only 0.4 is above: nothing to remove */
    s = mk(SP_XTC, 1.0f, 0.35f, 0);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
    /* off: probability 0, or threshold above 0.5 */
    s = mk(SP_XTC, 0.0f, 0.2f, 0);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
    s = mk(SP_XTC, 1.0f, 0.51f, 0);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
}
END_TEST

START_TEST(test_xtc_threshold_is_inclusive_on_exact_ties)
{
    /* four equal logits: each p is exactly 1/4 */
    float row[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    sift_token_prob out[4];
    sp_stage s = mk(SP_XTC, 1.0f, 0.25f, 0);
    expect_keep(&s, row, 4, IDS(3), out); /* the canonical last: largest id */
    s = mk(SP_XTC, 1.0f, nextafterf(0.25f, 1.0f), 0);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
    /* threshold 0: T = 0, everything is "above"; only the canonical last
     * stays */
    float row2[4] = {1.0f, 0.5f, 0.0f, 2.0f};
    s = mk(SP_XTC, 1.0f, 0.0f, 0);
    expect_keep(&s, row2, 4, IDS(2), out);
    /* ... but a banned token (weight 0) is never "above": with a -inf
     * token in the row the least likely *finite* token stays (llama.cpp
     * would keep the banned one and fail at the selector) */
    float row3[4] = {1.0f, -INFINITY, 0.0f, 2.0f};
    sift_chain *c = stage_chain(&s, 1);
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row3, 4, &t, NULL), SIFT_OK);
    sift_chain_free(c);
    expect_keep(&s, row3, 4, IDS(2, 1), out);
}
END_TEST

START_TEST(test_xtc_respects_min_keep_as_llama_cpp_does)
{
    float row[4];
    sift_token_prob out[4];
    log_row(P4321, row, 4);
    /* threshold 0.19 removes two tokens and leaves two */
    sp_stage s = mk(SP_XTC, 1.0f, 0.19f, 2);
    expect_keep(&s, row, 4, IDS(2, 3), out);
    s = mk(SP_XTC, 1.0f, 0.19f, 3);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
    /* threshold 0.09 would leave one: min_keep 1 allows it, 2 does not */
    s = mk(SP_XTC, 1.0f, 0.09f, 1);
    expect_keep(&s, row, 4, IDS(3), out);
    s = mk(SP_XTC, 1.0f, 0.09f, 2);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
    s = mk(SP_XTC, 1.0f, 0.09f, 100);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
}
END_TEST

static void rng_after_one_sample(const sp_stage *s, const float *row, int32_t V, uint64_t seed,
                                 uint64_t st[4])
{
    sift_chain *c = tu_chain_new(seed, NULL);
    ck_assert_int_eq(sp_add(c, s, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, V, &t, NULL), SIFT_OK);
    sift__chain_rng_state(c, st);
    sift_chain_free(c);
}

START_TEST(test_xtc_draws_one_float_only_when_enabled_on_two_or_more_tokens)
{
    float row[4];
    log_row(P4321, row, 4);
    uint64_t seed = 99, st[4];
    sift__rng r0, r1;
    sift__rng_seed(&r0, seed);
    r1 = r0;
    (void)sift__rng_next(&r1);
    /* enabled: one draw, whether it fires or not */
    sp_stage s = mk(SP_XTC, 1.0f, 0.1f, 0);
    rng_after_one_sample(&s, row, 4, seed, st);
    ck_assert(memcmp(st, r1.s, sizeof st) == 0);
    s = mk(SP_XTC, 1e-30f, 0.1f, 0);
    rng_after_one_sample(&s, row, 4, seed, st);
    ck_assert(memcmp(st, r1.s, sizeof st) == 0);
    /* off, or a single candidate: no draw */
    s = mk(SP_XTC, 0.0f, 0.1f, 0);
    rng_after_one_sample(&s, row, 4, seed, st);
    ck_assert(memcmp(st, r0.s, sizeof st) == 0);
    s = mk(SP_XTC, 1.0f, 0.6f, 0);
    rng_after_one_sample(&s, row, 4, seed, st);
    ck_assert(memcmp(st, r0.s, sizeof st) == 0);
    s = mk(SP_XTC, 1.0f, 0.1f, 0);
    rng_after_one_sample(&s, row, 1, seed, st);
    ck_assert(memcmp(st, r0.s, sizeof st) == 0);
}
END_TEST

START_TEST(test_xtc_fires_exactly_when_the_draw_is_at_most_probability)
{
    float row[4];
    sift_token_prob out[4];
    log_row(P4321, row, 4);
    for (uint64_t seed = 1; seed <= 40; seed++) {
        sift__rng r;
        sift__rng_seed(&r, seed);
        float u = sift__rng_float(&r);
        if (u == 0.0f)
            continue;
        /* probability == u fires (u > probability is false) */
        sp_stage s = mk(SP_XTC, u, 0.19f, 0);
        ck_assert_uint_eq(sift_keep(&s, row, 4, seed, out), 2);
        /* the float just below u does not */
        s = mk(SP_XTC, nextafterf(u, 0.0f), 0.19f, 0);
        ck_assert_uint_eq(sift_keep(&s, row, 4, seed, out), 4);
        /* the oracle agrees on both */
        sift_candidate oc[4];
        sift_status st;
        s = mk(SP_XTC, u, 0.19f, 0);
        ck_assert_uint_eq(oracle_keep(&s, row, 4, seed, oc, &st), 2);
        s = mk(SP_XTC, nextafterf(u, 0.0f), 0.19f, 0);
        ck_assert_uint_eq(oracle_keep(&s, row, 4, seed, oc, &st), 4);
    }
}
END_TEST

START_TEST(test_xtc_with_every_logit_banned_reports_no_candidate_when_it_fires)
{
    sp_stage s = mk(SP_XTC, 1.0f, 0.1f, 0);
    expect_no_candidate_after_ban(&s, "xtc");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Parameters, names and classes                                       */
/* ------------------------------------------------------------------ */

static void expect_bad(const sp_stage *s, const char *stage, const char *param)
{
    sift_chain *c = tu_chain_new(1, NULL);
    sift_error err;
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(sp_add(c, s, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.code, SIFT_E_ARG);
    ck_assert_msg(strstr(err.message, stage) && strstr(err.message, param),
                  "message '%s' should name %s and %s", err.message, stage, param);
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    sift_chain_free(c);
}

/* ------------------------------------------------------------------ */
/* epsilon                                                             */
/* ------------------------------------------------------------------ */

/* probs {0.1, 0.2, 0.3, 0.4} (margins of 2% and more, far above float
 * rounding): epsilon keeps p_i >= epsilon. */
START_TEST(test_epsilon_keeps_tokens_at_least_epsilon_likely)
{
    float row[4];
    const float pr[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    for (int i = 0; i < 4; i++)
        row[i] = sift__logf(pr[i]);
    sift_token_prob out[4];
    sp_stage s = mk(SP_EPSILON, 0.25f, 0, 0);
    expect_keep(&s, row, 4, IDS(3, 2), out);
    s = mk(SP_EPSILON, 0.15f, 0, 0);
    expect_keep(&s, row, 4, IDS(3, 2, 1), out);
    s = mk(SP_EPSILON, 0.05f, 0, 0);
    expect_keep(&s, row, 4, IDS(3, 2, 1, 0), out);
    /* nothing reaches 0.5: the canonical first max(min_keep, 1) */
    s = mk(SP_EPSILON, 0.5f, 0, 0);
    expect_keep(&s, row, 4, IDS(3), out);
    s = mk(SP_EPSILON, 0.5f, 0, 3);
    expect_keep(&s, row, 4, IDS(3, 2, 1), out);
}
END_TEST

/* Four equal logits: each weight is 2^62 and W = 4 * 2^62, so 0.25 gives
 * T = 2^62 exactly and keeps all four (>=); the next float above 0.25
 * keeps only the fallback, and ties there go by id. */
START_TEST(test_epsilon_threshold_is_inclusive_on_exact_ties)
{
    float row[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    sift_token_prob out[4];
    sp_stage s = mk(SP_EPSILON, 0.25f, 0, 0);
    expect_keep(&s, row, 4, IDS(0, 1, 2, 3), out);
    s = mk(SP_EPSILON, nextafterf(0.25f, 1.0f), 0, 2);
    expect_keep(&s, row, 4, IDS(0, 1), out);
    /* 0 is off: even -inf tokens stay */
    float row2[3] = {1.0f, -INFINITY, 0.0f};
    sift_token_prob out2[3];
    s = mk(SP_EPSILON, 0.0f, 0, 0);
    expect_keep(&s, row2, 3, IDS(0, 2, 1), out2);
}
END_TEST

START_TEST(test_epsilon_with_every_logit_banned_reports_no_candidate)
{
    sp_stage s = mk(SP_EPSILON, 0.01f, 0, 0);
    expect_no_candidate_after_ban(&s, "epsilon");
}
END_TEST

/* ------------------------------------------------------------------ */
/* eta                                                                 */
/* ------------------------------------------------------------------ */

/* probs {0.1, 0.2, 0.3, 0.4}: H = 1.2799 nats, exp(-H) = 0.2781, so the
 * cut is min(eta, 0.2781 sqrt(eta)); every margin below is >= 2%. */
START_TEST(test_eta_cuts_at_the_smaller_of_eta_and_its_entropy_term)
{
    float row[4];
    const float pr[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    for (int i = 0; i < 4; i++)
        row[i] = sift__logf(pr[i]);
    sift_token_prob out[4];
    /* cut = eta = 0.04: everything passes */
    sp_stage s = mk(SP_ETA, 0.04f, 0, 0);
    expect_keep(&s, row, 4, IDS(3, 2, 1, 0), out);
    /* cut = 0.5 * 0.2781 = 0.139 < 0.25: 0.1 goes */
    s = mk(SP_ETA, 0.25f, 0, 0);
    expect_keep(&s, row, 4, IDS(3, 2, 1), out);
    /* cut = 0.9 * 0.2781 = 0.2503, far below eta = 0.81: 0.2 goes too */
    s = mk(SP_ETA, 0.81f, 0, 0);
    expect_keep(&s, row, 4, IDS(3, 2), out);
    /* one token holds all the mass: H = 0, cut = eta, and it passes */
    float one[3] = {0.0f, -INFINITY, -INFINITY};
    sift_token_prob out3[3];
    s = mk(SP_ETA, 1.0f, 0, 0);
    expect_keep(&s, one, 3, IDS(0), out3);
    /* off: -inf tokens stay */
    s = mk(SP_ETA, 0.0f, 0, 0);
    expect_keep(&s, one, 3, IDS(0, 1, 2), out3);
    /* the fallback keeps the canonical first min_keep */
    s = mk(SP_ETA, 0.81f, 0, 3);
    expect_keep(&s, row, 4, IDS(3, 2, 1), out);
}
END_TEST

START_TEST(test_eta_with_every_logit_banned_reports_no_candidate)
{
    sp_stage s = mk(SP_ETA, 0.01f, 0, 0);
    expect_no_candidate_after_ban(&s, "eta");
}
END_TEST

START_TEST(test_every_bad_parameter_is_rejected_naming_stage_and_parameter)
{
    static const float bad_p[] = {NAN,  -NAN,     -0.01f,    1.0000001f,
                                  2.0f, INFINITY, -INFINITY, -1e-30f};
    static const struct {
        sp_kind kind;
        const char *name;
    } k3[] = {{SP_TOP_P, "top_p"}, {SP_MIN_P, "min_p"}, {SP_TYPICAL, "typical"}};
    for (size_t k = 0; k < N(k3); k++) {
        for (size_t i = 0; i < N(bad_p); i++) {
            sp_stage s = mk(k3[k].kind, bad_p[i], 0, 0);
            expect_bad(&s, k3[k].name, "p must");
        }
        sp_stage s = mk(k3[k].kind, 0.5f, 0, -1);
        expect_bad(&s, k3[k].name, "min_keep");
        s = mk(k3[k].kind, 0.5f, 0, INT32_MIN);
        expect_bad(&s, k3[k].name, "min_keep");
    }
    for (size_t i = 0; i < N(bad_p); i++) {
        sp_stage s = mk(SP_XTC, bad_p[i], 0.1f, 0);
        expect_bad(&s, "xtc", "probability");
        s = mk(SP_XTC, 0.5f, bad_p[i], 0);
        expect_bad(&s, "xtc", "threshold");
    }
    sp_stage s = mk(SP_XTC, 0.5f, 0.1f, -1);
    expect_bad(&s, "xtc", "min_keep");
    for (size_t i = 0; i < N(bad_p); i++) {
        s = mk(SP_EPSILON, bad_p[i], 0, 0);
        expect_bad(&s, "epsilon", "epsilon must");
    }
    s = mk(SP_EPSILON, 0.5f, 0, -1);
    expect_bad(&s, "epsilon", "min_keep");
    ck_assert_int_eq(sift_chain_add_epsilon(NULL, 0.5f, 1, NULL), SIFT_E_ARG);
    for (size_t i = 0; i < N(bad_p); i++) {
        s = mk(SP_ETA, bad_p[i], 0, 0);
        expect_bad(&s, "eta", "eta must");
    }
    s = mk(SP_ETA, 0.5f, 0, -1);
    expect_bad(&s, "eta", "min_keep");
    ck_assert_int_eq(sift_chain_add_eta(NULL, 0.5f, 1, NULL), SIFT_E_ARG);
    /* a NULL chain */
    ck_assert_int_eq(sift_chain_add_top_p(NULL, 0.5f, 1, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_min_p(NULL, 0.5f, 1, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_typical(NULL, 0.5f, 1, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_xtc(NULL, 0.5f, 0.1f, 1, NULL), SIFT_E_ARG);
}
END_TEST

START_TEST(test_edge_parameters_are_accepted)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_top_p(c, 0.0f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_p(c, 1.0f, INT32_MAX, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_p(c, -0.0f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_min_p(c, 0.0f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_min_p(c, 1.0f, 5, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_typical(c, 0.0f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_typical(c, 1.0f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_xtc(c, 0.0f, 0.0f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_xtc(c, 1.0f, 1.0f, 0, NULL), SIFT_OK);
    ck_assert_uint_eq(sift_chain_n_stages(c), 9);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    float row[3] = {1.0f, 2.0f, 3.0f};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, 3, &t, NULL), SIFT_OK);
    ck_assert_int_eq(t, 2);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_stages_report_their_names_and_capability_classes)
{
    static const struct {
        sp_stage s;
        const char *name;
        sift_class cls;
    } cases[] = {
        {{.kind = SP_TOP_P, .f0 = 1.0f}, "top_p", SIFT_CLASS_IDENTITY},
        {{.kind = SP_TOP_P, .f0 = 0.9f}, "top_p", SIFT_CLASS_WHOLE},
        {{.kind = SP_TOP_P, .f0 = 0.0f}, "top_p", SIFT_CLASS_WHOLE},
        {{.kind = SP_MIN_P, .f0 = 0.0f}, "min_p", SIFT_CLASS_IDENTITY},
        {{.kind = SP_MIN_P, .f0 = 0.05f}, "min_p", SIFT_CLASS_THRESHOLD},
        {{.kind = SP_MIN_P, .f0 = 1.0f}, "min_p", SIFT_CLASS_THRESHOLD},
        {{.kind = SP_TYPICAL, .f0 = 1.0f}, "typical", SIFT_CLASS_IDENTITY},
        {{.kind = SP_TYPICAL, .f0 = 0.5f}, "typical", SIFT_CLASS_WHOLE},
        {{.kind = SP_XTC, .f0 = 0.0f, .f1 = 0.1f}, "xtc", SIFT_CLASS_IDENTITY},
        {{.kind = SP_XTC, .f0 = 0.5f, .f1 = 0.6f}, "xtc", SIFT_CLASS_IDENTITY},
        {{.kind = SP_XTC, .f0 = 0.5f, .f1 = 0.5f}, "xtc", SIFT_CLASS_WHOLE},
        {{.kind = SP_EPSILON, .f0 = 0.0f}, "epsilon", SIFT_CLASS_IDENTITY},
        {{.kind = SP_EPSILON, .f0 = 3e-4f}, "epsilon", SIFT_CLASS_THRESHOLD},
        {{.kind = SP_ETA, .f0 = 0.0f}, "eta", SIFT_CLASS_IDENTITY},
        {{.kind = SP_ETA, .f0 = 2e-3f}, "eta", SIFT_CLASS_WHOLE},
    };
    for (size_t i = 0; i < N(cases); i++) {
        sift_chain *c = tu_chain_new(1, NULL);
        ck_assert_int_eq(sp_add(c, &cases[i].s, NULL), SIFT_OK);
        ck_assert_str_eq(sift_chain_stage_name(c, 0), cases[i].name);
        int64_t n = -7;
        ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), cases[i].cls);
        ck_assert_int_eq(n, 0);
        sift_chain_free(c);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Properties on random rows                                           */
/* ------------------------------------------------------------------ */

static sp_stage random_stage(tu_rng *r, sp_kind kind)
{
    static const float ps[] = {0.0f, 0.05f, 0.5f, 0.9f, 0.95f, 0.99f, 1e-7f, 1.0f};
    float p = tu_unif(r) < 0.5 ? ps[tu_range(r, 0, (int64_t)N(ps) - 1)] : (float)tu_unif(r);
    int32_t mk_ = (int32_t)tu_range(r, 0, 4);
    if (kind == SP_XTC)
        return mk(kind, tu_unif(r) < 0.7f ? 1.0f : (float)tu_unif(r), (float)(0.6 * tu_unif(r)),
                  mk_);
    return mk(kind, p, 0, mk_);
}

/* The canonical order of a whole row, for the property checks. */
static void canon_row(const float *row, int32_t V, sift_candidate *c)
{
    for (int32_t i = 0; i < V; i++) {
        c[i].id = i;
        c[i].logit = row[i];
    }
    or_arr a = {c, (size_t)V, V};
    or_sort(&a);
}

/* top_p, min_p (TOP-like) keep a canonical prefix; xtc keeps a canonical
 * suffix; none changes a logit; nothing is ever emptied. */
START_TEST(test_truncation_keeps_canonical_prefixes_and_never_changes_logits)
{
    tu_rng r = {4242};
    int32_t V = 3000;
    float *row = malloc((size_t)V * sizeof *row);
    sift_candidate *c = malloc((size_t)V * sizeof *c);
    sift_token_prob *out = malloc((size_t)V * sizeof *out);
    static const sp_kind kinds[] = {SP_TOP_P, SP_MIN_P, SP_TYPICAL, SP_XTC};
    for (int rep = 0; rep < 200; rep++) {
        tu_row(&r, row, V, (rep / 4) % TU_ROW__COUNT);
        canon_row(row, V, c);
        sp_kind kind = kinds[rep % 4];
        sp_stage s = random_stage(&r, kind);
        size_t n = sift_keep(&s, row, V, (uint64_t)rep, out);
        ck_assert_uint_ge(n, 1);
        for (size_t i = 0; i < n; i++)
            ck_assert(memcmp(&out[i].logit, &row[out[i].id], sizeof(float)) == 0 ||
                      out[i].logit == row[out[i].id]);
        size_t mk_ = s.i0 > 1 ? (size_t)s.i0 : 1;
        if (kind == SP_TOP_P || kind == SP_MIN_P) {
            for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(out[i].id, c[i].id);
            ck_assert_uint_ge(n, mk_ < (size_t)V ? mk_ : (size_t)V);
        } else if (kind == SP_XTC) {
            size_t off = (size_t)V - n;
            for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(out[i].id, c[off + i].id);
        } else {
            ck_assert_uint_ge(n, mk_ < (size_t)V ? mk_ : (size_t)V);
        }
        if (kind == SP_MIN_P && s.f0 > 0.0f) {
            /* THRESHOLD: exactly {l >= max + ln p}, or the min_keep prefix */
            float L = c[0].logit + sift__logf(s.f0);
            size_t pass = 0;
            for (int32_t i = 0; i < V; i++)
                pass += row[i] >= L;
            ck_assert_uint_eq(n, pass >= mk_ ? pass : (mk_ < (size_t)V ? mk_ : (size_t)V));
        }
    }
    free(row);
    free(c);
    free(out);
}
END_TEST

/* A custom pass-through stage makes the chain store the array in
 * canonical order; the result must be the same set, bit for bit. */
START_TEST(test_results_do_not_depend_on_the_storage_order)
{
    tu_rng r = {777};
    int32_t V = 5000;
    float *row = malloc((size_t)V * sizeof *row);
    sift_token_prob *o1 = malloc((size_t)V * sizeof *o1), *o2 = malloc((size_t)V * sizeof *o2);
    static const sp_kind kinds[] = {SP_TOP_P, SP_MIN_P, SP_TYPICAL, SP_XTC};
    for (int rep = 0; rep < 120; rep++) {
        tu_row(&r, row, V, (rep / 4) % TU_ROW__COUNT);
        sp_stage s = random_stage(&r, kinds[rep % 4]);
        size_t n1 = sift_keep(&s, row, V, (uint64_t)rep, o1);
        sift_chain *c = tu_chain_new((uint64_t)rep, NULL);
        add_custom(c, pass);
        ck_assert_int_eq(sp_add(c, &s, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        size_t n2 = 0;
        ck_assert_int_eq(sift_chain_distribution(c, row, V, o2, (size_t)V, &n2, NULL), SIFT_OK);
        sift_chain_free(c);
        ck_assert_uint_eq(n1, n2);
        for (size_t i = 0; i < n1; i++) {
            ck_assert_int_eq(o1[i].id, o2[i].id);
            ck_assert(o1[i].p == o2[i].p);
        }
    }
    free(row);
    free(o1);
    free(o2);
}
END_TEST

/* Large rows of every shape: sift's survivors equal the oracle's, id by
 * id, for every sampler. */
START_TEST(test_large_rows_agree_with_the_oracle)
{
    tu_rng r = {90210 + (uint64_t)_i};
    static const int32_t sizes[] = {100000, 262144};
    static const sp_kind kinds[] = {SP_TOP_P, SP_MIN_P, SP_TYPICAL, SP_XTC};
    int32_t Vmax = 262144;
    float *row = malloc((size_t)Vmax * sizeof *row);
    sift_token_prob *out = malloc((size_t)Vmax * sizeof *out);
    sift_candidate *oc = malloc((size_t)Vmax * sizeof *oc);
    for (size_t si = 0; si < N(sizes); si++) {
        int32_t V = sizes[si];
        for (int shape = 0; shape < TU_ROW__COUNT; shape++) {
            tu_row(&r, row, V, shape);
            sp_stage s = random_stage(&r, kinds[_i]);
            uint64_t seed = tu_next(&r);
            size_t n = sift_keep(&s, row, V, seed, out);
            sift_status st;
            size_t on = oracle_keep(&s, row, V, seed, oc, &st);
            ck_assert_int_eq(st, SIFT_OK);
            ck_assert_msg(n == on, "V=%d shape %d kind %d p=%g mk=%d: sift %zu oracle %zu", (int)V,
                          shape, (int)s.kind, (double)s.f0, (int)s.i0, n, on);
            for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(out[i].id, oc[i].id);
        }
    }
    free(row);
    free(out);
    free(oc);
}
END_TEST

/* sift's distribution of [s, dist] (s a typical stage) on `row` equals
 * the oracle's survivors id by id, logit and probability bit for bit;
 * `what` names the row in a failure. */
static void typical_agrees(const float *row, int32_t V, const sp_stage *s, uint64_t seed,
                           sift_token_prob *out, sift_candidate *oc, uint64_t *w, const char *what)
{
    size_t n = sift_keep(s, row, V, seed, out);
    sift_status st;
    size_t on = oracle_keep(s, row, V, seed, oc, &st);
    ck_assert_int_eq(st, SIFT_OK);
    ck_assert_msg(n == on, "V=%d %s p=%g mk=%d: sift %zu oracle %zu", (int)V, what, (double)s->f0,
                  (int)s->i0, n, on);
    or_arr a = {oc, on, V};
    sift__u128 W = or_weights(&a, w);
    double Wd = sift__u128_to_double(W);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(out[i].id == oc[i].id &&
                          memcmp(&out[i].logit, &oc[i].logit, sizeof(float)) == 0 &&
                          out[i].p == (double)w[i] / Wd,
                      "V=%d %s p=%g mk=%d entry %zu: sift (%d, %a, %a) oracle (%d, %a)", (int)V,
                      what, (double)s->f0, (int)s->i0, i, (int)out[i].id, (double)out[i].logit,
                      out[i].p, (int)oc[i].id, (double)oc[i].logit);
}

/* typical on rows long enough for its bucket path (16384 and up): every
 * shape, several p and min_keep, against the oracle (typical_agrees). */
START_TEST(test_typical_large_rows_agree_with_the_oracle_bitwise)
{
    tu_rng r = {5150 + (uint64_t)_i};
    static const int32_t sizes[] = {16384, 50000, 262144};
    static const float ps[] = {0.0f, 0.2f, 0.5f, 0.9f, 0.95f, 0.999f};
    static const int32_t mks[] = {0, 1, 3, 100, 20000};
    int32_t V = sizes[_i];
    float *row = malloc((size_t)V * sizeof *row);
    sift_token_prob *out = malloc((size_t)V * sizeof *out);
    sift_candidate *oc = malloc((size_t)V * sizeof *oc);
    uint64_t *w = malloc((size_t)V * sizeof *w);
    int reps = V > 100000 ? 1 : 2;
    for (int shape = 0; shape < TU_ROW__COUNT; shape++) {
        for (int rep = 0; rep < reps; rep++) {
            tu_row(&r, row, V, shape);
            char what[32];
            snprintf(what, sizeof what, "shape %d", shape);
            for (size_t pi = 0; pi < N(ps); pi++) {
                sp_stage s = mk(SP_TYPICAL, ps[pi], 0, mks[(pi + (size_t)rep) % N(mks)]);
                typical_agrees(row, V, &s, tu_next(&r), out, oc, w, what);
            }
        }
    }
    free(row);
    free(out);
    free(oc);
    free(w);
}
END_TEST

/* typical where a few heavy tokens hold most of the mass (its band path,
 * typical.c's typ_cut_band, answers there): N(0, 2) rows with a head of
 * 3 to 60 ids raised by U(4, 15), some heads tied (equal raised logits,
 * so buckets hold ties), some rounded to bf16, at several p and min_keep,
 * against the oracle bit for bit. */
START_TEST(test_typical_on_heavy_headed_rows_agrees_with_the_oracle_bitwise)
{
    tu_rng r = {5170 + (uint64_t)_i};
    const int32_t V = _i ? 40000 : 20000;
    static const float ps[] = {0.1f, 0.5f, 0.8f, 0.9f, 0.95f, 0.99f};
    static const int32_t mks[] = {0, 1, 2, 5};
    float *row = malloc((size_t)V * sizeof *row);
    sift_token_prob *out = malloc((size_t)V * sizeof *out);
    sift_candidate *oc = malloc((size_t)V * sizeof *oc);
    uint64_t *w = malloc((size_t)V * sizeof *w);
    for (int rep = 0; rep < 24; rep++) {
        for (int32_t i = 0; i < V; i++)
            row[i] = (float)(2.0 * tu_normal(&r));
        int heads = (int)tu_range(&r, 3, 60);
        float tie = (float)(4.0 + 11.0 * tu_unif(&r));
        for (int h = 0; h < heads; h++)
            row[tu_range(&r, 0, V - 1)] =
                rep % 3 == 1 && h % 2 ? tie : (float)(4.0 + 11.0 * tu_unif(&r));
        if (rep % 4 == 3)
            for (int32_t i = 0; i < V; i++)
                row[i] = tu_bf16(row[i]);
        char what[32];
        snprintf(what, sizeof what, "heavy rep %d", rep);
        for (size_t pi = 0; pi < N(ps); pi++) {
            sp_stage s = mk(SP_TYPICAL, ps[pi], 0, mks[(pi + (size_t)rep) % N(mks)]);
            typical_agrees(row, V, &s, tu_next(&r), out, oc, w, what);
        }
    }
    free(row);
    free(out);
    free(oc);
    free(w);
}
END_TEST

/* Full chains of the family against the oracle, token and RNG state,
 * with the first stage leaving a sparse id-ordered array (top_k). */
START_TEST(test_chains_of_the_family_agree_with_the_oracle_step_by_step)
{
    tu_rng r = {31337};
    static const sp_kind kinds[] = {SP_TOP_P, SP_MIN_P, SP_TYPICAL, SP_XTC};
    for (int rep = 0; rep < 150; rep++) {
        int32_t V = tu_rand_V(&r, 4000);
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        if (tu_unif(&r) < 0.5) {
            spec.st[spec.n++] = mk(SP_TOP_K, 0, 0, (int32_t)tu_range(&r, 1, V));
        }
        int k = (int)tu_range(&r, 1, 3);
        for (int i = 0; i < k; i++)
            spec.st[spec.n++] = random_stage(&r, kinds[tu_range(&r, 0, 3)]);
        spec.st[spec.n++] = mk(tu_unif(&r) < 0.5 ? SP_DIST : SP_DIST_ID, 0, 0, 0);
        sift_chain *c;
        ck_assert_int_eq(sp_build(&spec, &c, NULL), SIFT_OK);
        or_chain o;
        or_init(&o, &spec);
        float *row = malloc((size_t)V * sizeof *row);
        for (int step = 0; step < 4; step++) {
            tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
            int32_t ts = -1, to = -1;
            sift_status ss = sift_chain_sample(c, row, V, &ts, NULL);
            sift_status so = or_sample(&o, row, V, &to);
            ck_assert_int_eq(ss, so);
            if (ss != SIFT_OK)
                break;
            ck_assert_int_eq(ts, to);
            uint64_t rs[4];
            sift__chain_rng_state(c, rs);
            ck_assert(memcmp(rs, o.rng.s, sizeof rs) == 0);
        }
        free(row);
        or_free(&o);
        sift_chain_free(c);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Suite                                                               */
/* ------------------------------------------------------------------ */

Suite *tu_suite(void)
{
    Suite *s = suite_create("trunc");
    struct {
        const char *name;
        const TTest *t;
    } cases[] = {
        {"top_p_prefix", test_top_p_keeps_the_shortest_prefix_reaching_p},
        {"top_p_zero", test_top_p_zero_keeps_one_token_or_min_keep},
        {"top_p_one", test_top_p_one_is_a_no_op_even_for_banned_tokens},
        {"top_p_ties", test_top_p_threshold_is_inclusive_on_exact_ties},
        {"top_p_banned", test_top_p_with_every_logit_banned_reports_no_candidate},
        {"min_p_vectors", test_min_p_keeps_tokens_within_p_of_the_most_likely},
        {"min_p_zero", test_min_p_zero_is_a_no_op},
        {"min_p_ties", test_min_p_one_keeps_every_token_tied_at_the_max},
        {"min_p_min_keep", test_min_p_falls_back_to_the_canonical_first_min_keep},
        {"min_p_banned", test_min_p_with_every_logit_banned_reports_no_candidate},
        {"typical_vectors", test_typical_keeps_the_tokens_closest_to_the_entropy},
        {"typical_ties", test_typical_threshold_is_strict_on_exact_ties},
        {"typical_zero_mass", test_typical_treats_zero_probability_tokens_as_adding_no_entropy},
        {"typical_banned", test_typical_with_every_logit_banned_reports_no_candidate},
        {"xtc_vectors", test_xtc_removes_every_likely_token_but_the_least_likely},
        {"xtc_ties", test_xtc_threshold_is_inclusive_on_exact_ties},
        {"xtc_min_keep", test_xtc_respects_min_keep_as_llama_cpp_does},
        {"xtc_draws", test_xtc_draws_one_float_only_when_enabled_on_two_or_more_tokens},
        {"xtc_probability", test_xtc_fires_exactly_when_the_draw_is_at_most_probability},
        {"xtc_banned", test_xtc_with_every_logit_banned_reports_no_candidate_when_it_fires},
        {"epsilon_vectors", test_epsilon_keeps_tokens_at_least_epsilon_likely},
        {"epsilon_ties", test_epsilon_threshold_is_inclusive_on_exact_ties},
        {"epsilon_banned", test_epsilon_with_every_logit_banned_reports_no_candidate},
        {"eta_vectors", test_eta_cuts_at_the_smaller_of_eta_and_its_entropy_term},
        {"eta_banned", test_eta_with_every_logit_banned_reports_no_candidate},
        {"params", test_every_bad_parameter_is_rejected_naming_stage_and_parameter},
        {"params_edge", test_edge_parameters_are_accepted},
        {"classes", test_stages_report_their_names_and_capability_classes},
        {"prefix_property", test_truncation_keeps_canonical_prefixes_and_never_changes_logits},
        {"storage_order", test_results_do_not_depend_on_the_storage_order},
        {"chains", test_chains_of_the_family_agree_with_the_oracle_step_by_step},
    };
    for (size_t i = 0; i < N(cases); i++) {
        TCase *tc = tcase_create(cases[i].name);
        /* the random-row property runs take about a second; the rest
         * keeps Check's default timeout */
        if (strcmp(cases[i].name, "prefix_property") == 0 ||
            strcmp(cases[i].name, "storage_order") == 0 || strcmp(cases[i].name, "chains") == 0)
            tcase_set_timeout(tc, 120);
        /* the oracle comparisons on random rows: check_simd_whole.sh runs
         * the "simd" cases again under each SIFT_SIMD cap */
        if (strcmp(cases[i].name, "prefix_property") == 0 ||
            strcmp(cases[i].name, "storage_order") == 0 || strcmp(cases[i].name, "chains") == 0)
            tcase_set_tags(tc, "simd");
        tcase_add_test(tc, cases[i].t);
        suite_add_tcase(s, tc);
    }
    TCase *tc = tcase_create("large");
    tcase_set_timeout(tc, 300);
    tcase_set_tags(tc, "simd");
    tcase_add_loop_test(tc, test_large_rows_agree_with_the_oracle, 0, 4);
    suite_add_tcase(s, tc);
    tc = tcase_create("typical_large");
    tcase_set_timeout(tc, 300);
    tcase_set_tags(tc, "simd");
    tcase_add_loop_test(tc, test_typical_large_rows_agree_with_the_oracle_bitwise, 0, 3);
    tcase_add_loop_test(tc, test_typical_on_heavy_headed_rows_agrees_with_the_oracle_bitwise, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

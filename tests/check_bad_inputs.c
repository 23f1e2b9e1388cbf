/*
 * check_bad_inputs.c - the rows of /work/shared/BAD_INPUTS.md that concern
 * the chain API: logits rows (L-01..L-14), parameters (P-01..P-16, API
 * side) and API misuse (A-01..A-12). One test per row, named after it.
 *
 * Every rejected input is checked three ways: the status, a message that
 * names the place (row index, parameter, token, stage), and "nothing
 * changed": the RNG state and the state digest are bitwise equal before
 * and after, and the next samples equal those of a fresh chain built from
 * the same spec with the same history (and the naive oracle's).
 * Rows that have a defined result instead of an error (L-05, L-06, L-07,
 * L-09, L-12, L-13, P-01, P-05...) assert that result, its determinism,
 * that no probability is NaN, and agreement with the oracle.
 *
 * Out of scope here: slices (C-*), grammar (G-*, R-*), triggers (T-*),
 * YAML (Y-*). A-03 (double free) and A-04 (use after free) are undefined
 * behaviour by contract and are left to ASan; they have no test.
 */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "grammar/gbnf.h"
#include "oracle/oracle.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define GOOD_V 32

/* ------------------------------------------------------------------ */
/* Spec helpers                                                        */
/* ------------------------------------------------------------------ */

static sp_stage st0(sp_kind k)
{
    sp_stage s;
    memset(&s, 0, sizeof s);
    s.kind = k;
    return s;
}
static sp_stage st_i(sp_kind k, int32_t i0)
{
    sp_stage s = st0(k);
    s.i0 = i0;
    return s;
}
static sp_stage st_f(sp_kind k, float f0, float f1, float f2, int32_t i0, int32_t i1)
{
    sp_stage s = st0(k);
    s.f0 = f0;
    s.f1 = f1;
    s.f2 = f2;
    s.i0 = i0;
    s.i1 = i1;
    return s;
}

/* The chain most rows run on: every kind of state (history, RNG). */
static sp_chain rich_spec(void)
{
    sp_chain s;
    memset(&s, 0, sizeof s);
    s.seed = 17;
    s.st[s.n++] = st_f(SP_PENALTIES, 1.1f, 0.1f, 0.1f, 8, 0);
    s.st[s.n++] = st_i(SP_TOP_K, 20);
    s.st[s.n++] = st_f(SP_TOP_P, 0.95f, 0, 0, 1, 0);
    s.st[s.n++] = st_f(SP_MIN_P, 0.02f, 0, 0, 1, 0);
    s.st[s.n++] = st_f(SP_TEMP, 0.8f, 0, 0, 0, 0);
    s.st[s.n++] = st0(SP_DIST);
    return s;
}

static void good_row(float *row, int32_t V, uint64_t seed)
{
    tu_rng r = {seed};
    tu_row(&r, row, V, TU_ROW_NORMAL);
}

static const int32_t prompt[] = {1, 2, 3, 1, 4};

/* A chain under test with a history, and what it looked like before the
 * bad call. */
typedef struct fx {
    sp_chain spec;
    sift_chain *c;
    uint64_t rng[4];
    uint64_t dig;
    size_t n_stages;
} fx;

static void fx_open(fx *f, const sp_chain *spec)
{
    f->spec = *spec;
    sift_error err;
    ck_assert_msg(sp_build(spec, &f->c, &err) == SIFT_OK, "build: %s", err.message);
    for (size_t i = 0; i < N(prompt); i++)
        ck_assert_int_eq(sift_chain_accept(f->c, prompt[i], NULL), SIFT_OK);
    sift__chain_rng_state(f->c, f->rng);
    f->dig = sift__chain_state_digest(f->c);
    f->n_stages = sift_chain_n_stages(f->c);
}

/* Nothing changed, and the chain samples exactly as a fresh one with the
 * same history does (and as the oracle does); then frees it. */
static void fx_unchanged_close(fx *f)
{
    uint64_t r[4];
    sift__chain_rng_state(f->c, r);
    ck_assert_msg(memcmp(r, f->rng, sizeof r) == 0, "the RNG moved");
    ck_assert_msg(sift__chain_state_digest(f->c) == f->dig, "the state changed");
    ck_assert_uint_eq(sift_chain_n_stages(f->c), f->n_stages);
    sift_chain *g;
    ck_assert_int_eq(sp_build(&f->spec, &g, NULL), SIFT_OK);
    or_chain o;
    or_init(&o, &f->spec);
    for (size_t i = 0; i < N(prompt); i++) {
        ck_assert_int_eq(sift_chain_accept(g, prompt[i], NULL), SIFT_OK);
        or_accept(&o, prompt[i]);
    }
    float row[GOOD_V];
    for (int step = 0; step < 3; step++) {
        good_row(row, GOOD_V, 500 + (uint64_t)step);
        int32_t a = -1, b = -1, c = -1;
        sift_error err;
        ck_assert_msg(sift_chain_sample(f->c, row, GOOD_V, &a, &err) == SIFT_OK, "%s", err.message);
        ck_assert_int_eq(sift_chain_sample(g, row, GOOD_V, &b, NULL), SIFT_OK);
        ck_assert_int_eq(or_sample(&o, row, GOOD_V, &c), SIFT_OK);
        ck_assert_int_eq(a, b);
        ck_assert_int_eq(a, c);
        ck_assert_int_eq(sift_chain_accept(f->c, a, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(g, b, NULL), SIFT_OK);
        or_accept(&o, c);
        ck_assert_uint_eq(sift__chain_state_digest(f->c), sift__chain_state_digest(g));
    }
    or_free(&o);
    sift_chain_free(g);
    sift_chain_free(f->c);
    f->c = NULL;
}

static void assert_msg_has(const sift_error *e, const char *a, const char *b)
{
    ck_assert_msg(strstr(e->message, a) != NULL, "'%s' not in '%s'", a, e->message);
    if (b)
        ck_assert_msg(strstr(e->message, b) != NULL, "'%s' not in '%s'", b, e->message);
}

/* Samples a bad row on the rich chain and checks status, index, message
 * and that nothing changed. Also through sift_chain_distribution. */
static void bad_row(const float *row, int32_t V, sift_status want, int64_t index, const char *a,
                    const char *b)
{
    fx f;
    sp_chain spec = rich_spec();
    fx_open(&f, &spec);
    int32_t t = -42;
    sift_error err;
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(sift_chain_sample(f.c, row, V, &t, &err), want);
    ck_assert_int_eq(err.code, want);
    ck_assert_int_eq(err.index, index);
    assert_msg_has(&err, a, b);
    ck_assert_int_eq(t, -42);
    sift_token_prob out[4];
    size_t n = 77;
    ck_assert_int_eq(sift_chain_distribution(f.c, row, V, out, 4, &n, &err), want);
    ck_assert_int_eq(err.index, index);
    ck_assert_uint_eq(n, 77);
    /* the oracle agrees it is an error of that class */
    if (V >= 1 && row && want != SIFT_E_LIMIT) {
        or_chain o;
        or_init(&o, &spec);
        int32_t to;
        ck_assert_int_eq(or_sample(&o, row, V, &to), want);
        or_free(&o);
    }
    fx_unchanged_close(&f);
}

/* Builds a spec, samples `row`, and checks sift against the oracle
 * (status and token, RNG). Returns the status; *tok the token. */
static sift_status vs_oracle(const sp_chain *spec, const float *row, int32_t V, int32_t *tok)
{
    sift_chain *c;
    sift_error err;
    ck_assert_msg(sp_build(spec, &c, &err) == SIFT_OK, "build: %s", err.message);
    or_chain o;
    or_init(&o, spec);
    int32_t ts = -1, to = -1;
    sift_status ss = sift_chain_sample(c, row, V, &ts, &err);
    sift_status so = or_sample(&o, row, V, &to);
    char desc[512];
    sp_describe(spec, desc, sizeof desc);
    ck_assert_msg(ss == so, "%s: sift %d (%s), oracle %d", desc, (int)ss, ss ? err.message : "",
                  (int)so);
    if (ss == SIFT_OK) {
        ck_assert_msg(ts == to, "%s: sift token %d, oracle %d", desc, (int)ts, (int)to);
        uint64_t r[4];
        sift__chain_rng_state(c, r);
        ck_assert(memcmp(r, o.rng.s, sizeof r) == 0);
        /* the distribution the selector drew from: finite, sums to 1 */
        sift_token_prob *out = malloc((size_t)V * sizeof *out);
        size_t n = 0;
        ck_assert_int_eq(sift_chain_distribution(c, row, V, out, (size_t)V, &n, &err), SIFT_OK);
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(out[i].p == out[i].p && out[i].p >= 0 && out[i].p <= 1, "%s: p=%g", desc,
                          out[i].p);
            ck_assert(out[i].logit == out[i].logit);
            sum += out[i].p;
        }
        ck_assert_msg(fabs(sum - 1.0) < 1e-9, "%s: sum %.17g", desc, sum);
        free(out);
    }
    or_free(&o);
    sift_chain_free(c);
    if (tok)
        *tok = ts;
    return ss;
}

static sp_chain spec_of(uint64_t seed, size_t n, const sp_stage *st)
{
    sp_chain s;
    memset(&s, 0, sizeof s);
    s.seed = seed;
    for (size_t i = 0; i < n; i++)
        s.st[s.n++] = st[i];
    return s;
}

#define SPEC(seed, ...) \
    spec_of((seed), sizeof((sp_stage[]){__VA_ARGS__}) / sizeof(sp_stage), (sp_stage[]){__VA_ARGS__})

/* A counting allocator. */
typedef struct counter {
    long allocs, frees;
    sift_chain *reenter; /* call into this chain from alloc */
    sift_status reenter_status;
} counter;

static void *cnt_alloc(void *user, size_t size)
{
    counter *c = user;
    if (c->reenter) {
        sift_chain *ch = c->reenter;
        c->reenter = NULL;
        c->reenter_status = sift_chain_accept(ch, 0, NULL);
    }
    c->allocs++;
    return malloc(size);
}

static void cnt_free(void *user, void *p)
{
    counter *c = user;
    if (p)
        c->frees++;
    free(p);
}

/* ------------------------------------------------------------------ */
/* L: logits rows                                                      */
/* ------------------------------------------------------------------ */

START_TEST(test_L01_nan_in_row_names_the_first_index)
{
    float row[GOOD_V];
    good_row(row, GOOD_V, 1);
    row[5] = NAN;
    row[9] = NAN;
    bad_row(row, GOOD_V, SIFT_E_ROW_VALUE, 5, "row[5]", "NaN");
    good_row(row, GOOD_V, 1);
    row[GOOD_V - 1] = -NAN;
    bad_row(row, GOOD_V, SIFT_E_ROW_VALUE, GOOD_V - 1, "row[31]", "NaN");
    good_row(row, GOOD_V, 1);
    row[0] = NAN;
    row[3] = INFINITY;
    bad_row(row, GOOD_V, SIFT_E_ROW_VALUE, 0, "row[0]", "NaN");
}
END_TEST

START_TEST(test_L02_pinf_in_row_names_the_first_index)
{
    float row[GOOD_V];
    good_row(row, GOOD_V, 2);
    row[9] = INFINITY;
    row[2] = -INFINITY; /* -inf is a ban, not an error */
    bad_row(row, GOOD_V, SIFT_E_ROW_VALUE, 9, "row[9]", "+inf");
}
END_TEST

START_TEST(test_L03_all_neg_inf_row_is_no_candidate)
{
    enum { V = 151936 };
    float *row = malloc(V * sizeof *row);
    for (int32_t i = 0; i < V; i++)
        row[i] = -INFINITY;
    bad_row(row, V, SIFT_E_NO_CANDIDATE, -1, "151936", "-inf");
    free(row);
}
END_TEST

START_TEST(test_L04_chain_banning_every_token_is_no_candidate_naming_the_stage)
{
    /* logit_bias bans tokens 0..3 of a 4-token row */
    sp_stage bias = st0(SP_LOGIT_BIAS);
    for (int32_t i = 0; i < 4; i++) {
        bias.bias[bias.n_bias].token = i;
        bias.bias[bias.n_bias++].bias = -INFINITY;
    }
    sp_chain spec = SPEC(3, st_i(SP_TOP_K, 3), bias, st0(SP_DIST));
    fx f;
    fx_open(&f, &spec);
    float row[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(f.c, row, 4, &t, &err), SIFT_E_NO_CANDIDATE);
    /* the stage that banned the last candidate, not the selector */
    ck_assert_int_eq(err.index, 1);
    assert_msg_has(&err, "stage 1", "logit_bias");
    or_chain o;
    or_init(&o, &spec);
    ck_assert_int_eq(or_sample(&o, row, 4, &t), SIFT_E_NO_CANDIDATE);
    or_free(&o);
    /* the same with greedy, and with every selector */
    const sp_kind sels[] = {SP_GREEDY, SP_DIST_ID, SP_MIROSTAT_V2};
    for (size_t i = 0; i < N(sels); i++) {
        sp_chain s2 = SPEC(3, bias, st_f(sels[i], 5.0f, 0.1f, 0, 0, 0));
        ck_assert_int_eq(vs_oracle(&s2, row, 4, NULL), SIFT_E_NO_CANDIDATE);
    }
    fx_unchanged_close(&f);
}
END_TEST

START_TEST(test_L05_subnormal_logits_and_temperature_give_a_defined_result)
{
    const float sub = 1e-42f; /* subnormal */
    ck_assert(fpclassify(sub) == FP_SUBNORMAL);
    float row[6] = {sub, 2 * sub, 0.0f, -sub, 3 * sub, -0.0f};
    int round = fegetround();
    const sp_chain specs[] = {
        SPEC(5, st0(SP_DIST)),
        SPEC(5, st0(SP_GREEDY)),
        SPEC(5, st_f(SP_TEMP, sub, 0, 0, 0, 0), st0(SP_DIST)),
        SPEC(5, st_f(SP_TEMP, sub, 0, 0, 0, 0), st0(SP_GREEDY)),
        SPEC(5, st_f(SP_TEMP_EXT, sub, sub, 1.0f, 0, 0), st0(SP_DIST)),
        SPEC(5, st_f(SP_TOP_P, 0.5f, 0, 0, 1, 0), st0(SP_DIST)),
        SPEC(5, st_f(SP_TYPICAL, 0.5f, 0, 0, 1, 0), st0(SP_DIST)),
        SPEC(5, st_f(SP_TOP_N_SIGMA, 1.0f, 0, 0, 0, 0), st0(SP_DIST)),
        SPEC(5, st_f(SP_MIROSTAT_V2, 5.0f, 0.1f, 0, 0, 0)),
    };
    for (size_t i = 0; i < N(specs); i++) {
        int32_t t1, t2;
        ck_assert_int_eq(vs_oracle(&specs[i], row, 6, &t1), SIFT_OK);
        ck_assert_int_eq(vs_oracle(&specs[i], row, 6, &t2), SIFT_OK);
        ck_assert_int_eq(t1, t2);
    }
    /* greedy picks the largest subnormal */
    int32_t t;
    vs_oracle(&specs[1], row, 6, &t);
    ck_assert_int_eq(t, 4);
    /* sift never changes the host's floating-point mode */
    ck_assert_int_eq(fegetround(), round);
}
END_TEST

START_TEST(test_L06_tiny_temperature_falls_back_to_greedy_never_nan)
{
    /* 7 / 1e-38 and 5 / 1e-38 overflow to +inf: the greedy fallback
     * keeps the canonical first, token 2 */
    float row[6] = {-1.0f, -3.0f, 7.0f, -0.5f, 0.0f, 5.0f};
    const sp_kind sels[] = {SP_DIST, SP_DIST_ID, SP_GREEDY, SP_MIROSTAT_V2};
    for (size_t i = 0; i < N(sels); i++) {
        sp_stage sel = st_f(sels[i], 5.0f, 0.1f, 0, 0, 0);
        sp_chain a = SPEC(6, st_f(SP_TEMP, 1e-38f, 0, 0, 0, 0), sel);
        sp_chain b = SPEC(6, st_f(SP_TEMP_EXT, 1e-38f, 0.0f, 1.0f, 0, 0), sel);
        int32_t t;
        ck_assert_int_eq(vs_oracle(&a, row, 6, &t), SIFT_OK);
        ck_assert_int_eq(t, 2);
        ck_assert_int_eq(vs_oracle(&b, row, 6, &t), SIFT_OK);
        ck_assert_int_eq(t, 2);
    }
    /* a negative maximum overflows to -inf: still the canonical first */
    float neg[3] = {-7.0f, -5.0f, -9.0f};
    sp_chain c = SPEC(6, st_f(SP_TEMP, 1e-38f, 0, 0, 0, 0), st0(SP_DIST));
    int32_t t;
    ck_assert_int_eq(vs_oracle(&c, neg, 3, &t), SIFT_OK);
    ck_assert_int_eq(t, 1);
    /* the distribution is all on that token */
    sift_chain *ch;
    ck_assert_int_eq(sp_build(&c, &ch, NULL), SIFT_OK);
    sift_token_prob out[3];
    size_t n;
    ck_assert_int_eq(sift_chain_distribution(ch, row, 6, out, 3, &n, NULL), SIFT_OK);
    ck_assert_int_eq(out[0].id, 2);
    ck_assert(out[0].p == 1.0);
    sift_chain_free(ch);
}
END_TEST

START_TEST(test_L07_huge_finite_logits_never_give_nan)
{
    float row[7] = {3e38f, -3e38f, 1e38f, 3e38f, -INFINITY, 0.0f, -FLT_MAX};
    const sp_chain specs[] = {
        SPEC(7, st0(SP_DIST)),
        SPEC(7, st0(SP_DIST_ID)),
        SPEC(7, st0(SP_GREEDY)),
        SPEC(7, st_f(SP_TOP_P, 0.9f, 0, 0, 1, 0), st0(SP_DIST)),
        SPEC(7, st_f(SP_MIN_P, 0.1f, 0, 0, 1, 0), st0(SP_DIST)),
        SPEC(7, st_f(SP_TYPICAL, 0.9f, 0, 0, 1, 0), st0(SP_DIST)),
        SPEC(7, st_f(SP_TOP_N_SIGMA, 1.0f, 0, 0, 0, 0), st0(SP_DIST)),
        SPEC(7, st_f(SP_TEMP, 0.5f, 0, 0, 0, 0), st0(SP_DIST)),
        SPEC(7, st_f(SP_TEMP, 2.0f, 0, 0, 0, 0), st0(SP_DIST)),
        SPEC(7, st_f(SP_TEMP_EXT, 1.0f, 0.5f, 1.0f, 0, 0), st0(SP_DIST)),
        SPEC(7, st_f(SP_XTC, 1.0f, 0.1f, 0, 1, 0), st0(SP_DIST)),
        SPEC(7, st_f(SP_MIROSTAT, 5.0f, 0.1f, 0, 100, 7)),
        SPEC(7, st_f(SP_MIROSTAT_V2, 5.0f, 0.1f, 0, 0, 0)),
    };
    for (size_t i = 0; i < N(specs); i++) {
        for (uint64_t seed = 0; seed < 8; seed++) {
            sp_chain s = specs[i];
            s.seed = seed;
            int32_t t;
            sift_status st = vs_oracle(&s, row, 7, &t);
            /* a defined result: a token of the top set, or a named error */
            if (st == SIFT_OK)
                ck_assert_msg(t == 0 || t == 3 || t == 2, "spec %zu: token %d", i, (int)t);
            else
                ck_assert_int_eq(st, SIFT_E_ROW_VALUE);
        }
    }
    /* plain softmax: the two maxima share the mass */
    sift_chain *c;
    sp_chain d = SPEC(7, st0(SP_DIST));
    ck_assert_int_eq(sp_build(&d, &c, NULL), SIFT_OK);
    sift_token_prob out[7];
    size_t n;
    ck_assert_int_eq(sift_chain_distribution(c, row, 7, out, 7, &n, NULL), SIFT_OK);
    ck_assert_int_eq(out[0].id, 0);
    ck_assert_int_eq(out[1].id, 3);
    ck_assert_double_eq_tol(out[0].p, 0.5, 1e-12);
    ck_assert_double_eq_tol(out[1].p, 0.5, 1e-12);
    for (size_t i = 2; i < n; i++)
        ck_assert(out[i].p == 0.0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_L08_row_of_length_zero_is_an_argument_error)
{
    float row[1] = {0.0f};
    bad_row(row, 0, SIFT_E_ARG, -1, "row length", ">= 1");
    bad_row(row, -1, SIFT_E_ARG, -1, "row length", "-1");
    bad_row(NULL, GOOD_V, SIFT_E_ARG, -1, "logits", "NULL");
}
END_TEST

START_TEST(test_L09_row_of_length_one_returns_token_zero)
{
    float one[1] = {-3.5f};
    float banned[1] = {-INFINITY};
    const sp_chain specs[] = {
        SPEC(9, st0(SP_DIST)),
        SPEC(9, st0(SP_DIST_ID)),
        SPEC(9, st0(SP_GREEDY)),
        SPEC(9, st_f(SP_MIROSTAT, 5.0f, 0.1f, 0, 100, 1)),
        SPEC(9, st_f(SP_MIROSTAT_V2, 5.0f, 0.1f, 0, 0, 0)),
        rich_spec(),
        SPEC(9, st_f(SP_TYPICAL, 0.5f, 0, 0, 1, 0), st_f(SP_TEMP_EXT, 1.0f, 0.5f, 1.0f, 0, 0),
             st_f(SP_TOP_N_SIGMA, 1.0f, 0, 0, 0, 0), st_f(SP_XTC, 1.0f, 0.0f, 0, 0, 0),
             st0(SP_DIST)),
    };
    for (size_t i = 0; i < N(specs); i++) {
        int32_t t = -1;
        ck_assert_int_eq(vs_oracle(&specs[i], one, 1, &t), SIFT_OK);
        ck_assert_int_eq(t, 0);
        ck_assert_int_eq(vs_oracle(&specs[i], banned, 1, &t), SIFT_E_NO_CANDIDATE);
    }
    /* one candidate needs no draw: the RNG does not move */
    sift_chain *c;
    sp_chain d = SPEC(9, st0(SP_DIST));
    ck_assert_int_eq(sp_build(&d, &c, NULL), SIFT_OK);
    uint64_t r0[4], r1[4];
    sift__chain_rng_state(c, r0);
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, one, 1, &t, NULL), SIFT_OK);
    sift__chain_rng_state(c, r1);
    ck_assert(memcmp(r0, r1, sizeof r0) == 0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_L10_row_longer_than_max_vocab_is_a_limit_before_any_allocation)
{
    counter cnt = {0, 0, NULL, SIFT_OK};
    sift_allocator al = {sizeof(sift_allocator), cnt_alloc, cnt_free, &cnt, NULL};
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.allocator = &al;
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    long a0 = cnt.allocs;
    uint64_t r0[4], r1[4];
    sift__chain_rng_state(c, r0);
    float row[4] = {0, 1, 2, 3}; /* never read past the check */
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, INT32_MAX, &t, &err), SIFT_E_LIMIT);
    assert_msg_has(&err, "2147483647", "max_vocab");
    ck_assert_int_eq(err.index, -1);
    ck_assert_int_eq(sift_chain_sample(c, row, SIFT_DEFAULT_MAX_VOCAB + 1, &t, &err), SIFT_E_LIMIT);
    assert_msg_has(&err, "16777217", "16777216");
    ck_assert_int_eq(cnt.allocs, a0);
    sift__chain_rng_state(c, r1);
    ck_assert(memcmp(r0, r1, sizeof r0) == 0);
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &t, &err), SIFT_OK);
    sift_chain_free(c);
    ck_assert_int_eq(cnt.allocs, cnt.frees);
    /* and on the rich chain, nothing changed */
    bad_row(row, INT32_MAX, SIFT_E_LIMIT, -1, "max_vocab", NULL);
}
END_TEST

START_TEST(test_L11_row_length_other_than_the_chain_vocabulary_is_an_argument_error)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.n_vocab = 151936;
    p.seed = 11;
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float *row = calloc(152064, sizeof *row);
    int32_t t;
    sift_error err;
    uint64_t d0 = sift__chain_state_digest(c);
    ck_assert_int_eq(sift_chain_sample(c, row, 152064, &t, &err), SIFT_E_ARG);
    assert_msg_has(&err, "152064", "151936");
    ck_assert_uint_eq(sift__chain_state_digest(c), d0);
    ck_assert_int_eq(sift_chain_sample(c, row, 151936, &t, &err), SIFT_OK);
    free(row);
    sift_chain_free(c);
    /* a stage that names a token beyond the row: logit_bias id 40, V 32 */
    sp_stage bias = st0(SP_LOGIT_BIAS);
    bias.bias[0].token = 40;
    bias.bias[0].bias = 1.0f;
    bias.n_bias = 1;
    sp_chain spec = SPEC(11, bias, st0(SP_DIST));
    fx f;
    fx_open(&f, &spec);
    float r32[GOOD_V];
    good_row(r32, GOOD_V, 3);
    ck_assert_int_eq(sift_chain_sample(f.c, r32, GOOD_V, &t, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 40);
    assert_msg_has(&err, "40", "logit_bias");
    /* with a 41-token row it is fine; restore the fixture's expectations */
    float r41[41];
    good_row(r41, 41, 4);
    sift_chain *g;
    ck_assert_int_eq(sp_build(&spec, &g, NULL), SIFT_OK);
    for (size_t i = 0; i < N(prompt); i++)
        ck_assert_int_eq(sift_chain_accept(g, prompt[i], NULL), SIFT_OK);
    int32_t a, b;
    ck_assert_int_eq(sift_chain_sample(f.c, r41, 41, &a, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(g, r41, 41, &b, NULL), SIFT_OK);
    ck_assert_int_eq(a, b);
    sift_chain_free(g);
    sift_chain_free(f.c);
}
END_TEST

START_TEST(test_L12_all_equal_logits_are_deterministic)
{
    enum { V = 10 };
    float row[V];
    for (int i = 0; i < V; i++)
        row[i] = 1.5f;
    /* greedy: the smallest id */
    int32_t t;
    sp_chain g = SPEC(12, st0(SP_GREEDY));
    ck_assert_int_eq(vs_oracle(&g, row, V, &t), SIFT_OK);
    ck_assert_int_eq(t, 0);
    /* dist: uniform in id order; top_n_sigma with sigma 0 keeps all */
    sp_chain d = SPEC(12, st_f(SP_TOP_N_SIGMA, 1.0f, 0, 0, 0, 0), st0(SP_DIST));
    sift_chain *c;
    ck_assert_int_eq(sp_build(&d, &c, NULL), SIFT_OK);
    sift_token_prob out[V];
    size_t n;
    ck_assert_int_eq(sift_chain_distribution(c, row, V, out, V, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, V);
    for (int i = 0; i < V; i++) {
        ck_assert_int_eq(out[i].id, i);
        ck_assert_double_eq_tol(out[i].p, 0.1, 1e-12);
    }
    sift_chain_free(c);
    const sp_chain specs[] = {
        d,
        SPEC(12, st0(SP_DIST_ID)),
        SPEC(12, st_f(SP_MIROSTAT, 5.0f, 0.1f, 0, 100, V)),
        SPEC(12, st_f(SP_MIROSTAT_V2, 5.0f, 0.1f, 0, 0, 0)),
        SPEC(12, st_f(SP_TYPICAL, 0.5f, 0, 0, 1, 0), st0(SP_DIST)),
        SPEC(12, st_f(SP_TEMP_EXT, 1.0f, 0.5f, 1.0f, 0, 0), st0(SP_DIST)),
        SPEC(12, st_f(SP_TOP_P, 0.35f, 0, 0, 1, 0), st0(SP_DIST)),
        SPEC(12, st_f(SP_MIN_P, 0.5f, 0, 0, 1, 0), st0(SP_DIST)),
        SPEC(12, st_f(SP_XTC, 1.0f, 0.05f, 0, 1, 0), st0(SP_DIST)),
        SPEC(12, st_i(SP_TOP_K, 3), st0(SP_DIST)),
        SPEC(12, st_i(SP_TOP_K_TIES, 3), st0(SP_DIST)),
    };
    for (size_t i = 0; i < N(specs); i++)
        for (uint64_t seed = 0; seed < 16; seed++) {
            sp_chain s = specs[i];
            s.seed = seed;
            ck_assert_int_eq(vs_oracle(&s, row, V, &t), SIFT_OK);
        }
    /* top_k 3 on ties keeps ids 0, 1, 2 */
    for (uint64_t seed = 0; seed < 16; seed++) {
        sp_chain s = specs[9];
        s.seed = seed;
        vs_oracle(&s, row, V, &t);
        ck_assert_int_lt(t, 3);
    }
}
END_TEST

START_TEST(test_L13_one_finite_logit_returns_that_token)
{
    enum { V = 10 };
    float row[V];
    for (int i = 0; i < V; i++)
        row[i] = -INFINITY;
    row[6] = -2.25f;
    const sp_stage mids[] = {
        st_f(SP_TYPICAL, 0.5f, 0, 0, 1, 0),
        st_f(SP_TEMP_EXT, 1.0f, 0.9f, 1.0f, 0, 0),
        st_f(SP_TOP_N_SIGMA, 1.0f, 0, 0, 0, 0),
        st_f(SP_TOP_P, 0.1f, 0, 0, 1, 0),
        st_f(SP_MIN_P, 0.9f, 0, 0, 1, 0),
        st_f(SP_XTC, 1.0f, 0.1f, 0, 0, 0),
        st_f(SP_PENALTIES, 1.3f, 0.5f, 0.5f, 8, 0),
        st_f(SP_TEMP, 0.0f, 0, 0, 0, 0),
        st_i(SP_TOP_K, 1),
        st_i(SP_TOP_K_TIES, 4),
    };
    const sp_stage sels[] = {st0(SP_DIST), st0(SP_DIST_ID), st0(SP_GREEDY),
                             st_f(SP_MIROSTAT, 5.0f, 0.1f, 0, 100, V),
                             st_f(SP_MIROSTAT_V2, 5.0f, 0.1f, 0, 0, 0)};
    for (size_t m = 0; m <= N(mids); m++)
        for (size_t s = 0; s < N(sels); s++) {
            sp_chain spec;
            if (m < N(mids))
                spec = SPEC(13, mids[m], sels[s]);
            else
                spec = SPEC(13, mids[0], mids[1], mids[2], mids[3], mids[4], mids[5], mids[6],
                            sels[s]);
            int32_t t = -1;
            ck_assert_msg(vs_oracle(&spec, row, V, &t) == SIFT_OK, "mid %zu sel %zu", m, s);
            ck_assert_int_eq(t, 6);
        }
}
END_TEST

START_TEST(test_L13_xtc_with_threshold_zero_does_not_keep_only_a_banned_token)
{
    /* With threshold 0 every candidate, banned ones (weight 0) included,
     * is "at or above the threshold"; XTC then keeps only the least
     * likely of them, a -inf token, and the sample fails although one
     * token is finite. A banned token should never count as a choice. */
    enum { V = 10 };
    float row[V];
    for (int i = 0; i < V; i++)
        row[i] = -INFINITY;
    row[6] = -2.25f;
    sp_chain spec = SPEC(13, st_f(SP_XTC, 1.0f, 0.0f, 0, 0, 0), st0(SP_DIST));
    int32_t t = -1;
    ck_assert_int_eq(vs_oracle(&spec, row, V, &t), SIFT_OK);
    ck_assert_int_eq(t, 6);
}
END_TEST

static int nan_apply(void *user, sift_candidate *d, size_t *size)
{
    (void)user;
    for (size_t i = 0; i < *size; i++)
        if (d[i].id == 42)
            d[i].logit = NAN;
    return 0;
}

START_TEST(test_L14_a_stage_producing_nan_or_pinf_is_a_row_value_error_naming_the_token)
{
    /* logit_bias: 3e38 + 3e38 = +inf at token 2 */
    sp_stage bias = st0(SP_LOGIT_BIAS);
    bias.bias[0].token = 2;
    bias.bias[0].bias = 3e38f;
    bias.n_bias = 1;
    sp_chain spec = SPEC(14, bias, st0(SP_DIST));
    fx f;
    fx_open(&f, &spec);
    float row[GOOD_V];
    good_row(row, GOOD_V, 14);
    row[2] = 3e38f;
    int32_t t;
    sift_error err;
    sift_status s = sift_chain_sample(f.c, row, GOOD_V, &t, &err);
    ck_assert_int_eq(s, SIFT_E_ROW_VALUE);
    ck_assert_int_eq(err.index, 2);
    assert_msg_has(&err, "logit_bias", "token 2");
    ck_assert_int_eq(vs_oracle(&spec, row, GOOD_V, NULL), SIFT_E_ROW_VALUE);
    fx_unchanged_close(&f);
    /* a custom stage writing NaN at token 42 */
    sift_chain *c;
    sp_chain d = SPEC(14, st0(SP_DIST));
    ck_assert_int_eq(sp_build(&d, &c, NULL), SIFT_OK);
    sift_custom_stage vt = {
        SIFT_CUSTOM_STAGE_ABI, "user", SIFT_CLASS_WHOLE, 0, nan_apply, NULL, NULL, NULL, NULL};
    sift_chain *c2 = NULL;
    ck_assert_int_eq(sift_chain_new(&c2, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_custom(c2, &vt, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c2, NULL), SIFT_OK);
    float r64[64];
    good_row(r64, 64, 15);
    ck_assert_int_eq(sift_chain_sample(c2, r64, 64, &t, &err), SIFT_E_ROW_VALUE);
    ck_assert_int_eq(err.index, 42);
    assert_msg_has(&err, "user", "NaN");
    sift_chain_free(c2);
    sift_chain_free(c);
    /* penalties with a tiny repeat on a huge logit, DRY with a huge
     * multiplier: defined (clamped) or a named error, as the oracle */
    float big[8] = {3e38f, 1.0f, 2.0f, -3e38f, 0.5f, 0.25f, 0.0f, -1.0f};
    sp_chain pen = SPEC(14, st_f(SP_PENALTIES, 1e-30f, 1e30f, -1e30f, 8, 0), st0(SP_DIST));
    sp_stage dry = st_f(SP_DRY, 3e38f, 10.0f, 0, 0, 16);
    sp_chain dr = SPEC(14, dry, st0(SP_DIST));
    const sp_chain *specs[] = {&pen, &dr};
    for (size_t i = 0; i < N(specs); i++) {
        sift_chain *ch;
        ck_assert_int_eq(sp_build(specs[i], &ch, NULL), SIFT_OK);
        or_chain o;
        or_init(&o, specs[i]);
        const int32_t hist[] = {0, 1, 0, 1, 0, 3};
        for (size_t h = 0; h < N(hist); h++) {
            ck_assert_int_eq(sift_chain_accept(ch, hist[h], NULL), SIFT_OK);
            or_accept(&o, hist[h]);
        }
        int32_t ts = -1, to = -1;
        sift_status ss = sift_chain_sample(ch, big, 8, &ts, &err);
        sift_status so = or_sample(&o, big, 8, &to);
        ck_assert_int_eq(ss, so);
        if (ss == SIFT_OK) {
            ck_assert_int_eq(ts, to);
        } else {
            ck_assert_int_eq(ss, SIFT_E_ROW_VALUE);
            ck_assert_int_ge(err.index, 0);
        }
        or_free(&o);
        sift_chain_free(ch);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* P: parameters                                                       */
/* ------------------------------------------------------------------ */

/* Parameter tests run on a [top_k 10] chain with a history; each failed
 * add must leave it exactly as it was. */
static fx pf;

static void p_open(void)
{
    sp_chain spec = SPEC(21, st_i(SP_TOP_K, 10));
    fx_open(&pf, &spec);
}

static void p_fail(sift_status got, const sift_error *err, sift_status want, const char *a,
                   const char *b)
{
    ck_assert_int_eq(got, want);
    ck_assert_int_eq(err->code, want);
    assert_msg_has(err, a, b);
    ck_assert_uint_eq(sift_chain_n_stages(pf.c), pf.n_stages);
    ck_assert_uint_eq(sift__chain_state_digest(pf.c), pf.dig);
}

static void p_ok(sift_status got, const sift_error *err)
{
    ck_assert_msg(got == SIFT_OK, "expected OK, got %d: %s", (int)got, err->message);
    /* undo: a chain cannot drop a stage, so rebuild the fixture */
    sift_chain_free(pf.c);
    p_open();
}

static void p_close(void)
{
    pf.spec.st[pf.spec.n++] = st0(SP_DIST);
    ck_assert_int_eq(sift_chain_add_dist(pf.c, NULL), SIFT_OK);
    pf.n_stages++;
    pf.dig = sift__chain_state_digest(pf.c);
    fx_unchanged_close(&pf);
}

static const float bad_p[] = {NAN, -0.01f, 1.01f, -INFINITY, INFINITY, -1.0f, 2.0f};

START_TEST(test_P01_top_k_accepts_every_value)
{
    const int32_t ks[] = {-5, 0, 1000000000, INT32_MIN, INT32_MAX, GOOD_V, GOOD_V + 1};
    float row[GOOD_V];
    good_row(row, GOOD_V, 31);
    for (size_t i = 0; i < N(ks); i++) {
        sp_chain s = SPEC(31, st_i(SP_TOP_K, ks[i]), st0(SP_DIST));
        sp_chain s2 = SPEC(31, st_i(SP_TOP_K_TIES, ks[i]), st0(SP_DIST));
        ck_assert_int_eq(vs_oracle(&s, row, GOOD_V, NULL), SIFT_OK);
        ck_assert_int_eq(vs_oracle(&s2, row, GOOD_V, NULL), SIFT_OK);
        /* all of these keep the whole row */
        sift_chain *c;
        ck_assert_int_eq(sp_build(&s, &c, NULL), SIFT_OK);
        sift_token_prob out[GOOD_V];
        size_t n;
        ck_assert_int_eq(sift_chain_distribution(c, row, GOOD_V, out, GOOD_V, &n, NULL), SIFT_OK);
        ck_assert_uint_eq(n, GOOD_V);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_P02_top_p_min_p_typical_reject_p_outside_0_1_and_negative_min_keep)
{
    p_open();
    sift_error err;
    for (size_t i = 0; i < N(bad_p); i++) {
        float p = bad_p[i];
        p_fail(sift_chain_add_top_p(pf.c, p, 1, &err), &err, SIFT_E_ARG, "top_p", " p ");
        p_fail(sift_chain_add_min_p(pf.c, p, 1, &err), &err, SIFT_E_ARG, "min_p", " p ");
        p_fail(sift_chain_add_typical(pf.c, p, 1, &err), &err, SIFT_E_ARG, "typical", " p ");
    }
    p_fail(sift_chain_add_top_p(pf.c, 0.5f, -1, &err), &err, SIFT_E_ARG, "top_p", "min_keep");
    p_fail(sift_chain_add_min_p(pf.c, 0.5f, -1, &err), &err, SIFT_E_ARG, "min_p", "min_keep");
    p_fail(sift_chain_add_typical(pf.c, 0.5f, INT32_MIN, &err), &err, SIFT_E_ARG, "typical",
           "min_keep");
    /* the edges are valid */
    const float edges[] = {0.0f, -0.0f, 1.0f, 1e-30f};
    for (size_t i = 0; i < N(edges); i++) {
        p_ok(sift_chain_add_top_p(pf.c, edges[i], 0, &err), &err);
        p_ok(sift_chain_add_min_p(pf.c, edges[i], 0, &err), &err);
        p_ok(sift_chain_add_typical(pf.c, edges[i], 0, &err), &err);
    }
    p_close();
}
END_TEST

START_TEST(test_P03_temp_rejects_nan_and_inf_and_treats_nonpositive_as_greedy)
{
    p_open();
    sift_error err;
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < N(bad); i++)
        p_fail(sift_chain_add_temp(pf.c, bad[i], &err), &err, SIFT_E_ARG, "temp", "finite");
    p_close();
    float row[GOOD_V];
    good_row(row, GOOD_V, 33);
    int32_t tg;
    sp_chain g = SPEC(33, st0(SP_GREEDY));
    vs_oracle(&g, row, GOOD_V, &tg);
    const float greedy_t[] = {0.0f, -0.0f, -1.0f, -1e30f};
    for (size_t i = 0; i < N(greedy_t); i++)
        for (uint64_t seed = 0; seed < 8; seed++) {
            sp_chain s = SPEC(seed, st_f(SP_TEMP, greedy_t[i], 0, 0, 0, 0), st0(SP_DIST));
            int32_t t;
            ck_assert_int_eq(vs_oracle(&s, row, GOOD_V, &t), SIFT_OK);
            ck_assert_int_eq(t, tg);
        }
    /* t = 1 changes nothing */
    sp_chain one = SPEC(33, st_f(SP_TEMP, 1.0f, 0, 0, 0, 0), st0(SP_DIST));
    sp_chain none = SPEC(33, st0(SP_DIST));
    int32_t a, b;
    vs_oracle(&one, row, GOOD_V, &a);
    vs_oracle(&none, row, GOOD_V, &b);
    ck_assert_int_eq(a, b);
}
END_TEST

START_TEST(test_P04_temp_ext_rejects_bad_delta_and_exponent)
{
    p_open();
    sift_error err;
    p_fail(sift_chain_add_temp_ext(pf.c, NAN, 0.5f, 1.0f, &err), &err, SIFT_E_ARG, "temp_ext",
           "temp");
    p_fail(sift_chain_add_temp_ext(pf.c, INFINITY, 0.5f, 1.0f, &err), &err, SIFT_E_ARG, "temp_ext",
           "temp");
    const float bad_delta[] = {NAN, INFINITY, -INFINITY, -0.1f};
    for (size_t i = 0; i < N(bad_delta); i++)
        p_fail(sift_chain_add_temp_ext(pf.c, 1.0f, bad_delta[i], 1.0f, &err), &err, SIFT_E_ARG,
               "temp_ext", "delta");
    const float bad_exp[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, -1.0f};
    for (size_t i = 0; i < N(bad_exp); i++)
        p_fail(sift_chain_add_temp_ext(pf.c, 1.0f, 0.5f, bad_exp[i], &err), &err, SIFT_E_ARG,
               "temp_ext", "exponent");
    p_close();
    /* delta >= temp: min_t = 0 is defined */
    float row[GOOD_V];
    good_row(row, GOOD_V, 34);
    for (int shape = 0; shape < TU_ROW__COUNT; shape++) {
        tu_rng r = {(uint64_t)shape};
        tu_row(&r, row, GOOD_V, shape);
        sp_chain s = SPEC(34, st_f(SP_TEMP_EXT, 0.5f, 1.0f, 1.0f, 0, 0), st0(SP_DIST));
        sp_chain s2 = SPEC(34, st_f(SP_TEMP_EXT, 0.0f, 0.0f, 0.5f, 0, 0), st0(SP_DIST));
        ck_assert_int_eq(vs_oracle(&s, row, GOOD_V, NULL), SIFT_OK);
        ck_assert_int_eq(vs_oracle(&s2, row, GOOD_V, NULL), SIFT_OK);
    }
}
END_TEST

START_TEST(test_P05_min_keep_zero_or_above_size_is_clamped)
{
    enum { V = 10 };
    float row[V] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
    struct {
        sp_stage st;
        size_t want;
    } cases[] = {
        {st_f(SP_TOP_P, 0.0f, 0, 0, 0, 0), 1},     {st_f(SP_TOP_P, 0.0f, 0, 0, 100, 0), V},
        {st_f(SP_TOP_P, 0.0f, 0, 0, 4, 0), 4},     {st_f(SP_MIN_P, 1.0f, 0, 0, 0, 0), 1},
        {st_f(SP_MIN_P, 1.0f, 0, 0, 100, 0), V},   {st_f(SP_TYPICAL, 0.0f, 0, 0, 0, 0), 1},
        {st_f(SP_TYPICAL, 0.0f, 0, 0, 100, 0), V},
    };
    for (size_t i = 0; i < N(cases); i++) {
        sp_chain s = SPEC(35, cases[i].st, st0(SP_DIST));
        ck_assert_int_eq(vs_oracle(&s, row, V, NULL), SIFT_OK);
        sift_chain *c;
        ck_assert_int_eq(sp_build(&s, &c, NULL), SIFT_OK);
        sift_token_prob out[V];
        size_t n;
        ck_assert_int_eq(sift_chain_distribution(c, row, V, out, V, &n, NULL), SIFT_OK);
        ck_assert_msg(n == cases[i].want, "case %zu: %zu kept, want %zu", i, n, cases[i].want);
        /* typical keeps the tokens nearest the entropy, not the top */
        if (cases[i].st.kind != SP_TYPICAL)
            ck_assert_msg(out[0].id == 0, "case %zu: first %d", i, (int)out[0].id);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_P06_penalties_reject_bad_repeat_freq_presence)
{
    p_open();
    sift_error err;
    const float bad_rep[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, -1.0f};
    for (size_t i = 0; i < N(bad_rep); i++)
        p_fail(sift_chain_add_penalties(pf.c, 8, bad_rep[i], 0, 0, &err), &err, SIFT_E_ARG,
               "penalties", "repeat");
    const float bad_f[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < N(bad_f); i++) {
        p_fail(sift_chain_add_penalties(pf.c, 8, 1.1f, bad_f[i], 0, &err), &err, SIFT_E_ARG,
               "penalties", "freq");
        p_fail(sift_chain_add_penalties(pf.c, 8, 1.1f, 0, bad_f[i], &err), &err, SIFT_E_ARG,
               "penalties", "presence");
    }
    p_ok(sift_chain_add_penalties(pf.c, 8, 1e-30f, -5.0f, -5.0f, &err), &err);
    p_close();
}
END_TEST

START_TEST(test_P07_penalty_window_negative_is_an_error_and_above_max_history_a_limit)
{
    p_open();
    sift_error err;
    p_fail(sift_chain_add_penalties(pf.c, -1, 1.1f, 0, 0, &err), &err, SIFT_E_ARG, "penalties",
           "last_n");
    p_fail(sift_chain_add_penalties(pf.c, INT32_MIN, 1.1f, 0, 0, &err), &err, SIFT_E_ARG,
           "penalties", "last_n");
    p_fail(sift_chain_add_penalties(pf.c, SIFT_DEFAULT_MAX_HISTORY + 1, 1.1f, 0, 0, &err), &err,
           SIFT_E_LIMIT, "last_n", "max_history");
    p_fail(sift_chain_add_penalties(pf.c, 1000000000, 1.1f, 0, 0, &err), &err, SIFT_E_LIMIT,
           "last_n", "1000000000");
    p_ok(sift_chain_add_penalties(pf.c, 0, 1.1f, 0, 0, &err), &err);
    p_close();
    /* at the limit: accepted; one past: rejected */
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.max_history = 100;
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 100, 1.1f, 0, 0, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 101, 1.1f, 0, 0, &err), SIFT_E_LIMIT);
    assert_msg_has(&err, "101", "100");
    ck_assert_uint_eq(sift_chain_n_stages(c), 1);
    sift_chain_free(c);
}
END_TEST

static sift_dry_params dry_ok(void)
{
    sift_dry_params d = {sizeof(sift_dry_params), 0.8f, 1.75f, 2, 64, NULL, NULL, 0};
    return d;
}

START_TEST(test_P08_dry_rejects_bad_numbers_and_huge_windows)
{
    p_open();
    sift_error err;
    sift_dry_params d;
    const float bad_mult[] = {NAN, INFINITY, -INFINITY, -0.5f};
    for (size_t i = 0; i < N(bad_mult); i++) {
        d = dry_ok();
        d.multiplier = bad_mult[i];
        p_fail(sift_chain_add_dry(pf.c, &d, NULL, &err), &err, SIFT_E_ARG, "dry", "multiplier");
    }
    const float bad_base[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < N(bad_base); i++) {
        d = dry_ok();
        d.base = bad_base[i];
        p_fail(sift_chain_add_dry(pf.c, &d, NULL, &err), &err, SIFT_E_ARG, "dry", "base");
    }
    d = dry_ok();
    d.allowed_length = -1;
    p_fail(sift_chain_add_dry(pf.c, &d, NULL, &err), &err, SIFT_E_ARG, "dry", "allowed_length");
    d = dry_ok();
    d.last_n = -1;
    p_fail(sift_chain_add_dry(pf.c, &d, NULL, &err), &err, SIFT_E_ARG, "dry", "last_n");
    d = dry_ok();
    d.last_n = SIFT_DEFAULT_MAX_HISTORY + 1;
    p_fail(sift_chain_add_dry(pf.c, &d, NULL, &err), &err, SIFT_E_LIMIT, "last_n", "max_history");
    p_fail(sift_chain_add_dry(pf.c, NULL, NULL, &err), &err, SIFT_E_ARG, "dry", "params");
    /* multiplier 0 and base < 1 are defined no-ops */
    d = dry_ok();
    d.multiplier = 0.0f;
    p_ok(sift_chain_add_dry(pf.c, &d, NULL, &err), &err);
    d = dry_ok();
    d.base = 0.5f;
    p_ok(sift_chain_add_dry(pf.c, &d, NULL, &err), &err);
    d = dry_ok();
    d.base = -3.0f;
    p_ok(sift_chain_add_dry(pf.c, &d, NULL, &err), &err);
    p_close();
}
END_TEST

START_TEST(test_P09_dry_breakers_are_checked_for_count_length_and_vocabulary)
{
    const char *pieces[4] = {"a", "\n", "b", ":"};
    size_t lens[4] = {1, 1, 1, 1};
    sift_vocab *v;
    ck_assert_int_eq(sift_vocab_new(&v, 4, pieces, lens, NULL, NULL), SIFT_OK);
    static char long41[42], long40[41];
    memset(long41, 'x', 41);
    memset(long40, 'x', 40);
    const char *br[65];
    size_t bl[65];
    for (int i = 0; i < 65; i++) {
        br[i] = "\n";
        bl[i] = 1;
    }
    p_open();
    sift_error err;
    sift_dry_params d = dry_ok();
    d.breakers = br;
    d.breaker_lengths = bl;
    d.n_breakers = 65;
    p_fail(sift_chain_add_dry(pf.c, &d, v, &err), &err, SIFT_E_LIMIT, "65", "64");
    d.n_breakers = 1000;
    p_fail(sift_chain_add_dry(pf.c, &d, v, &err), &err, SIFT_E_LIMIT, "1000", "64");
    d.n_breakers = 3;
    br[2] = long41;
    bl[2] = 41;
    p_fail(sift_chain_add_dry(pf.c, &d, v, &err), &err, SIFT_E_ARG, "breaker 2", "41");
    ck_assert_int_eq(err.index, 2);
    br[2] = "";
    bl[2] = 0;
    p_fail(sift_chain_add_dry(pf.c, &d, v, &err), &err, SIFT_E_ARG, "breaker 2", "empty");
    ck_assert_int_eq(err.index, 2);
    br[2] = "\n";
    bl[2] = 1;
    p_fail(sift_chain_add_dry(pf.c, &d, NULL, &err), &err, SIFT_E_ARG, "dry", "vocab");
    d.breakers = NULL;
    p_fail(sift_chain_add_dry(pf.c, &d, v, &err), &err, SIFT_E_ARG, "dry", "breakers");
    d.breakers = br;
    /* at the limits: 64 breakers, 40 bytes */
    d.n_breakers = 64;
    br[5] = long40;
    bl[5] = 40;
    p_ok(sift_chain_add_dry(pf.c, &d, v, &err), &err);
    p_close();
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_P10_xtc_rejects_probability_or_threshold_outside_0_1)
{
    p_open();
    sift_error err;
    for (size_t i = 0; i < N(bad_p); i++) {
        p_fail(sift_chain_add_xtc(pf.c, bad_p[i], 0.1f, 1, &err), &err, SIFT_E_ARG, "xtc",
               "probability");
        p_fail(sift_chain_add_xtc(pf.c, 0.5f, bad_p[i], 1, &err), &err, SIFT_E_ARG, "xtc",
               "threshold");
    }
    p_fail(sift_chain_add_xtc(pf.c, 0.5f, 0.1f, -1, &err), &err, SIFT_E_ARG, "xtc", "min_keep");
    p_ok(sift_chain_add_xtc(pf.c, 0.0f, 0.0f, 0, &err), &err);
    p_ok(sift_chain_add_xtc(pf.c, 1.0f, 1.0f, 0, &err), &err);
    p_close();
    /* threshold > 0.5 is a defined no-op */
    float row[GOOD_V];
    good_row(row, GOOD_V, 40);
    for (uint64_t seed = 0; seed < 16; seed++) {
        sp_chain x = SPEC(seed, st_f(SP_XTC, 1.0f, 0.6f, 0, 1, 0), st0(SP_DIST));
        sp_chain plain = SPEC(seed, st0(SP_DIST));
        int32_t a, b;
        ck_assert_int_eq(vs_oracle(&x, row, GOOD_V, &a), SIFT_OK);
        ck_assert_int_eq(vs_oracle(&plain, row, GOOD_V, &b), SIFT_OK);
        (void)a;
        (void)b;
    }
}
END_TEST

START_TEST(test_P11_top_n_sigma_and_mirostat_reject_nan_inf_and_negative)
{
    p_open();
    sift_error err;
    const float nonfinite[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < N(nonfinite); i++)
        p_fail(sift_chain_add_top_n_sigma(pf.c, nonfinite[i], &err), &err, SIFT_E_ARG,
               "top_n_sigma", " n ");
    const float bad[] = {NAN, INFINITY, -INFINITY, -0.5f};
    for (size_t i = 0; i < N(bad); i++) {
        p_fail(sift_chain_add_mirostat(pf.c, 100, bad[i], 0.1f, 100, &err), &err, SIFT_E_ARG,
               "mirostat", "tau");
        p_fail(sift_chain_add_mirostat(pf.c, 100, 5.0f, bad[i], 100, &err), &err, SIFT_E_ARG,
               "mirostat", "eta");
        p_fail(sift_chain_add_mirostat_v2(pf.c, bad[i], 0.1f, &err), &err, SIFT_E_ARG,
               "mirostat_v2", "tau");
        p_fail(sift_chain_add_mirostat_v2(pf.c, 5.0f, bad[i], &err), &err, SIFT_E_ARG,
               "mirostat_v2", "eta");
    }
    p_fail(sift_chain_add_mirostat(pf.c, 100, 5.0f, 0.1f, 0, &err), &err, SIFT_E_ARG, "mirostat",
           " m ");
    p_fail(sift_chain_add_mirostat(pf.c, 0, 5.0f, 0.1f, 100, &err), &err, SIFT_E_ARG, "mirostat",
           "n_vocab");
    p_ok(sift_chain_add_top_n_sigma(pf.c, -1.0f, &err), &err);
    p_ok(sift_chain_add_top_n_sigma(pf.c, 0.0f, &err), &err);
    p_ok(sift_chain_add_mirostat(pf.c, 1, 0.0f, 0.0f, 1, &err), &err);
    p_close();
    /* n <= 0 is a no-op; m > V uses min(m, V) */
    float row[GOOD_V];
    good_row(row, GOOD_V, 41);
    for (uint64_t seed = 0; seed < 8; seed++) {
        sp_chain a = SPEC(seed, st_f(SP_TOP_N_SIGMA, -1.0f, 0, 0, 0, 0), st0(SP_DIST));
        sp_chain b = SPEC(seed, st0(SP_DIST));
        int32_t ta, tb;
        ck_assert_int_eq(vs_oracle(&a, row, GOOD_V, &ta), SIFT_OK);
        ck_assert_int_eq(vs_oracle(&b, row, GOOD_V, &tb), SIFT_OK);
        ck_assert_int_eq(ta, tb);
        sp_chain m = SPEC(seed, st_f(SP_MIROSTAT, 5.0f, 0.1f, 0, 1000, GOOD_V));
        ck_assert_int_eq(vs_oracle(&m, row, GOOD_V, NULL), SIFT_OK);
    }
}
END_TEST

START_TEST(test_P12_logit_bias_rejects_bad_entries_and_sums_duplicates)
{
    p_open();
    sift_error err;
    sift_bias b[3] = {{1, 1.0f}, {2, 0.5f}, {3, 0.0f}};
    p_fail(sift_chain_add_logit_bias(pf.c, NULL, 2, &err), &err, SIFT_E_ARG, "logit_bias", "NULL");
    b[1].token = -1;
    p_fail(sift_chain_add_logit_bias(pf.c, b, 3, &err), &err, SIFT_E_ARG, "logit_bias", "-1");
    ck_assert_int_eq(err.index, 1);
    b[1].token = 2;
    b[2].bias = NAN;
    p_fail(sift_chain_add_logit_bias(pf.c, b, 3, &err), &err, SIFT_E_ARG, "logit_bias", "token 3");
    ck_assert_int_eq(err.index, 2);
    b[2].bias = INFINITY;
    p_fail(sift_chain_add_logit_bias(pf.c, b, 3, &err), &err, SIFT_E_ARG, "logit_bias", "inf");
    b[2].bias = -INFINITY; /* a ban is fine */
    p_ok(sift_chain_add_logit_bias(pf.c, b, 3, &err), &err);
    p_ok(sift_chain_add_logit_bias(pf.c, NULL, 0, &err), &err);
    p_close();
    /* duplicates add up: +1 and +1 on token 0 equal +2 */
    float row[4] = {0.0f, 1.0f, 0.5f, -1.0f};
    sift_bias dup[2] = {{0, 1.0f}, {0, 1.0f}};
    sift_bias one[1] = {{0, 2.0f}};
    sift_chain *c1, *c2;
    ck_assert_int_eq(sift_chain_new(&c1, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_new(&c2, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_logit_bias(c1, dup, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_logit_bias(c2, one, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c2, NULL), SIFT_OK);
    sift_token_prob o1[4], o2[4];
    size_t n1, n2;
    ck_assert_int_eq(sift_chain_distribution(c1, row, 4, o1, 4, &n1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_distribution(c2, row, 4, o2, 4, &n2, NULL), SIFT_OK);
    ck_assert_uint_eq(n1, n2);
    for (size_t i = 0; i < n1; i++) {
        ck_assert_int_eq(o1[i].id, o2[i].id);
        ck_assert(o1[i].p == o2[i].p);
    }
    ck_assert_int_eq(o1[0].id, 0);
    ck_assert(o1[0].logit == 2.0f);
    /* token >= V is an argument error at sample time (see L-11) */
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c1, row, 1, &t, &err), SIFT_OK);
    sift_bias far[1] = {{7, 1.0f}};
    sift_chain_free(c2);
    ck_assert_int_eq(sift_chain_new(&c2, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_logit_bias(c2, far, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(c2, row, 4, &t, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 7);
    sift_chain_free(c1);
    sift_chain_free(c2);
}
END_TEST

START_TEST(test_P13_every_seed_is_valid)
{
    const uint64_t seeds[] = {0, 1, UINT64_MAX, (uint64_t)INT64_MAX + 1, 0xdeadbeefull};
    float row[GOOD_V];
    good_row(row, GOOD_V, 43);
    uint64_t st[N(seeds)][4];
    for (size_t i = 0; i < N(seeds); i++) {
        sp_chain s = SPEC(seeds[i], st0(SP_DIST));
        ck_assert_int_eq(vs_oracle(&s, row, GOOD_V, NULL), SIFT_OK);
        sift_chain *c;
        ck_assert_int_eq(sp_build(&s, &c, NULL), SIFT_OK);
        sift__chain_rng_state(c, st[i]);
        for (size_t j = 0; j < i; j++)
            ck_assert(memcmp(st[i], st[j], sizeof st[i]) != 0);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_P14_chain_without_a_last_selector_is_an_argument_error)
{
    float row[GOOD_V];
    good_row(row, GOOD_V, 44);
    struct {
        sp_chain spec;
        int64_t index;
        const char *needle;
    } cases[] = {
        {SPEC(44, st_i(SP_TOP_K, 5), st_f(SP_TOP_P, 0.9f, 0, 0, 1, 0)), -1, "selector"},
        {SPEC(44, st0(SP_GREEDY), st0(SP_DIST)), 0, "greedy"},
        {SPEC(44, st0(SP_DIST), st_i(SP_TOP_K, 5)), -1, "selector"},
        {SPEC(44, st_i(SP_TOP_K, 5), st_f(SP_MIROSTAT_V2, 5.0f, 0.1f, 0, 0, 0), st0(SP_DIST)), 1,
         "mirostat_v2"},
    };
    for (size_t i = 0; i < N(cases); i++) {
        fx f;
        fx_open(&f, &cases[i].spec);
        int32_t t;
        sift_error err;
        ck_assert_int_eq(sift_chain_sample(f.c, row, GOOD_V, &t, &err), SIFT_E_ARG);
        assert_msg_has(&err, cases[i].needle, NULL);
        if (cases[i].index >= 0)
            ck_assert_int_eq(err.index, cases[i].index);
        uint64_t r[4];
        sift__chain_rng_state(f.c, r);
        ck_assert(memcmp(r, f.rng, sizeof r) == 0);
        ck_assert_uint_eq(sift__chain_state_digest(f.c), f.dig);
        sift_chain_free(f.c);
    }
}
END_TEST

START_TEST(test_P15_the_same_stage_twice_is_applied_twice)
{
    float row[GOOD_V];
    good_row(row, GOOD_V, 45);
    sp_chain twice = SPEC(45, st_i(SP_TOP_K, 5), st_i(SP_TOP_K, 3), st0(SP_DIST));
    sp_chain once = SPEC(45, st_i(SP_TOP_K, 3), st0(SP_DIST));
    sp_chain temps =
        SPEC(45, st_f(SP_TEMP, 2.0f, 0, 0, 0, 0), st_f(SP_TEMP, 0.5f, 0, 0, 0, 0), st0(SP_DIST));
    int32_t a, b;
    for (uint64_t seed = 0; seed < 16; seed++) {
        twice.seed = once.seed = temps.seed = seed;
        ck_assert_int_eq(vs_oracle(&twice, row, GOOD_V, &a), SIFT_OK);
        ck_assert_int_eq(vs_oracle(&once, row, GOOD_V, &b), SIFT_OK);
        ck_assert_int_eq(a, b);
        ck_assert_int_eq(vs_oracle(&temps, row, GOOD_V, NULL), SIFT_OK);
    }
}
END_TEST

START_TEST(test_P16_too_many_stages_is_a_limit)
{
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    int ok = 0, limit = 0;
    for (int i = 0; i < 100000; i++) {
        sift_error err;
        sift_status s = sift_chain_add_top_k(c, 5, &err);
        if (s == SIFT_OK)
            ok++;
        else if (s == SIFT_E_LIMIT)
            limit++;
        if (i == SIFT_DEFAULT_MAX_STAGES)
            assert_msg_has(&err, "256", "max_stages");
    }
    ck_assert_int_eq(ok, SIFT_DEFAULT_MAX_STAGES);
    ck_assert_int_eq(limit, 100000 - SIFT_DEFAULT_MAX_STAGES);
    ck_assert_uint_eq(sift_chain_n_stages(c), SIFT_DEFAULT_MAX_STAGES);
    sift_chain_free(c);
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.max_stages = SIFT_HARD_MAX_STAGES + 1;
    sift_error err;
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_E_ARG);
    assert_msg_has(&err, "max_stages", "4096");
}
END_TEST

/* ------------------------------------------------------------------ */
/* A: API misuse                                                       */
/* ------------------------------------------------------------------ */

START_TEST(test_A01_null_pointers_are_argument_errors)
{
    sp_chain spec = rich_spec();
    fx f;
    fx_open(&f, &spec);
    float row[GOOD_V];
    good_row(row, GOOD_V, 51);
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(NULL, row, GOOD_V, &t, &err), SIFT_E_ARG);
    assert_msg_has(&err, "chain", "NULL");
    ck_assert_int_eq(sift_chain_sample(f.c, NULL, GOOD_V, &t, &err), SIFT_E_ARG);
    assert_msg_has(&err, "logits", "NULL");
    ck_assert_int_eq(sift_chain_sample(f.c, row, GOOD_V, NULL, &err), SIFT_E_ARG);
    assert_msg_has(&err, "token", "NULL");
    ck_assert_int_eq(sift_chain_sample(f.c, row, GOOD_V, NULL, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_accept(NULL, 0, &err), SIFT_E_ARG);
    size_t n;
    sift_token_prob out[2];
    ck_assert_int_eq(sift_chain_distribution(NULL, row, GOOD_V, out, 2, &n, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_distribution(f.c, NULL, GOOD_V, out, 2, &n, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_distribution(f.c, row, GOOD_V, out, 2, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_distribution(f.c, row, GOOD_V, NULL, 2, &n, &err), SIFT_E_ARG);
    sift_chain *d;
    ck_assert_int_eq(sift_chain_clone(NULL, &d, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_clone(f.c, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_new(NULL, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_custom(f.c, NULL, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_piece(NULL, 0, NULL, NULL, &err), SIFT_E_ARG);
    fx_unchanged_close(&f);
}
END_TEST

START_TEST(test_A02_free_of_null_is_a_no_op)
{
    sift_chain_free(NULL);
    sift_vocab_free(NULL);
    sift_chain_reset(NULL);
}
END_TEST

START_TEST(test_A05_accept_out_of_range_is_a_token_error_with_history_unchanged)
{
    sp_chain spec = rich_spec();
    fx f;
    fx_open(&f, &spec);
    float row[GOOD_V];
    good_row(row, GOOD_V, 55);
    /* before any sample (and with no n_vocab) max_vocab bounds the id */
    sift_error err;
    ck_assert_int_eq(sift_chain_accept(f.c, -1, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(err.index, -1);
    assert_msg_has(&err, "-1", "out of range");
    ck_assert_int_eq(sift_chain_accept(f.c, SIFT_DEFAULT_MAX_VOCAB, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(err.index, SIFT_DEFAULT_MAX_VOCAB);
    fx_unchanged_close(&f);
    /* after a sample the row length bounds it */
    fx_open(&f, &spec);
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(f.c, row, GOOD_V, &t, NULL), SIFT_OK);
    uint64_t dig = sift__chain_state_digest(f.c);
    ck_assert_int_eq(sift_chain_accept(f.c, GOOD_V, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(err.index, GOOD_V);
    assert_msg_has(&err, "32", "[0, 32)");
    ck_assert_uint_eq(sift__chain_state_digest(f.c), dig);
    ck_assert_int_eq(sift_chain_accept(f.c, GOOD_V - 1, &err), SIFT_OK);
    sift_chain_free(f.c);
}
END_TEST

START_TEST(test_A06_accept_without_sample_updates_state_as_for_that_token)
{
    sp_chain spec = SPEC(56, st_f(SP_PENALTIES, 1.5f, 0.3f, 0.2f, 6, 0),
                         st_f(SP_MIROSTAT_V2, 4.0f, 0.2f, 0, 0, 0));
    sift_chain *c;
    ck_assert_int_eq(sp_build(&spec, &c, NULL), SIFT_OK);
    or_chain o;
    or_init(&o, &spec);
    float row[GOOD_V];
    for (int step = 0; step < 20; step++) {
        /* two accepts of tokens never sampled, then a real step */
        for (int k = 0; k < 2; k++) {
            int32_t tok = (step * 7 + k * 3) % GOOD_V;
            ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK);
            or_accept(&o, tok);
        }
        good_row(row, GOOD_V, 560 + (uint64_t)step);
        int32_t a, b;
        ck_assert_int_eq(sift_chain_sample(c, row, GOOD_V, &a, NULL), SIFT_OK);
        ck_assert_int_eq(or_sample(&o, row, GOOD_V, &b), SIFT_OK);
        ck_assert_int_eq(a, b);
        /* sometimes accept a token other than the sampled one */
        int32_t acc = step % 3 == 0 ? (a + 1) % GOOD_V : a;
        ck_assert_int_eq(sift_chain_accept(c, acc, NULL), SIFT_OK);
        or_accept(&o, acc);
    }
    or_free(&o);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_A07_a_chain_left_by_failed_calls_samples_normally)
{
    sp_chain spec = rich_spec();
    fx f;
    fx_open(&f, &spec);
    float row[GOOD_V];
    good_row(row, GOOD_V, 57);
    row[3] = NAN;
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(f.c, row, GOOD_V, &t, &err), SIFT_E_ROW_VALUE);
    ck_assert_int_eq(sift_chain_accept(f.c, -5, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(sift_chain_add_top_p(f.c, NAN, 1, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_penalties(f.c, -1, 1.0f, 0, 0, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_sample(f.c, row, 0, &t, &err), SIFT_E_ARG);
    fx_unchanged_close(&f);
}
END_TEST

START_TEST(test_A08_a_failed_add_leaves_no_half_built_stage)
{
    sp_chain spec = rich_spec();
    spec.n--; /* without dist */
    fx f;
    fx_open(&f, &spec);
    sift_error err;
    sift_dry_params d = dry_ok();
    d.n_breakers = 2;
    const char *br[2] = {"a", ""};
    size_t bl[2] = {1, 0};
    d.breakers = br;
    d.breaker_lengths = bl;
    const char *pieces[1] = {"a"};
    size_t pl[1] = {1};
    sift_vocab *v;
    ck_assert_int_eq(sift_vocab_new(&v, 1, pieces, pl, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dry(f.c, &d, v, &err), SIFT_E_ARG);
    sift_vocab_free(v);
    ck_assert_int_eq(sift_chain_add_mirostat(f.c, 0, 5, 0.1f, 100, &err), SIFT_E_ARG);
    ck_assert_uint_eq(sift_chain_n_stages(f.c), spec.n);
    /* the same custom vtable added to two chains: each copies it */
    sift_custom_stage vt = {
        SIFT_CUSTOM_STAGE_ABI, "shared", SIFT_CLASS_WHOLE, 0, nan_apply, NULL, NULL, NULL, NULL};
    sift_chain *a, *b;
    ck_assert_int_eq(sift_chain_new(&a, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_new(&b, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_custom(a, &vt, NULL, NULL), SIFT_OK);
    vt.name = "changed";
    ck_assert_int_eq(sift_chain_add_custom(b, &vt, NULL, NULL), SIFT_OK);
    sift_chain_free(a);
    sift_chain_free(b);
    /* complete the fixture with its selector and compare */
    f.spec.st[f.spec.n++] = st0(SP_DIST);
    ck_assert_int_eq(sift_chain_add_dist(f.c, NULL), SIFT_OK);
    f.n_stages++;
    f.dig = sift__chain_state_digest(f.c);
    fx_unchanged_close(&f);
}
END_TEST

START_TEST(test_A09_long_messages_are_truncated_at_a_utf8_boundary)
{
    char msg[600];
    size_t k = 0;
    for (int i = 0; i < 130; i++) { /* 2-byte characters, then a 3-byte one */
        memcpy(msg + k, "\xC3\xA9", 2);
        k += 2;
    }
    msg[k++] = 'z';
    for (int i = 0; i < 50; i++) {
        memcpy(msg + k, "\xE2\x82\xAC", 3);
        k += 3;
    }
    msg[k] = '\0';
    for (size_t shift = 0; shift < 4; shift++) {
        sift_error err;
        memset(&err, 0x55, sizeof err);
        ck_assert_int_eq(sift__fail_at(&err, SIFT_E_LIMIT, 9, "%.*s%s", (int)shift, "abc", msg),
                         SIFT_E_LIMIT);
        ck_assert_int_eq(err.code, SIFT_E_LIMIT);
        ck_assert_int_eq(err.index, 9);
        size_t len = strlen(err.message);
        ck_assert_uint_lt(len, SIFT_ERROR_MESSAGE_MAX);
        ck_assert_uint_gt(len, SIFT_ERROR_MESSAGE_MAX - 4);
        /* the last byte ends a sequence: no continuation byte follows a
         * missing lead, no lead byte is left dangling */
        unsigned char last = (unsigned char)err.message[len - 1];
        ck_assert((last & 0xC0) != 0xC0);
        ck_assert_msg(!(last & 0x80) || (unsigned char)err.message[len - 2] >= 0xC0 ||
                          (unsigned char)err.message[len - 3] >= 0xE0,
                      "cut inside a sequence");
        ck_assert_str_eq(err.source, "");
    }
    /* the small helper on tiny buffers */
    char small[4];
    sift__strlcpy_utf8(small, "\xE2\x82\xAC\xE2\x82\xAC", sizeof small);
    ck_assert_str_eq(small, "\xE2\x82\xAC");
    sift__strlcpy_utf8(small, "a\xE2\x82\xAC", sizeof small);
    ck_assert_str_eq(small, "a");
    char one[1];
    sift__strlcpy_utf8(one, "abc", 1);
    ck_assert_int_eq(one[0], 0);
}
END_TEST

typedef struct reent {
    sift_chain *chain;
    sift_status got[3];
} reent;

static int reent_apply(void *user, sift_candidate *d, size_t *size)
{
    (void)d;
    (void)size;
    reent *r = user;
    float row[2] = {0, 1};
    int32_t t;
    r->got[0] = sift_chain_sample(r->chain, row, 2, &t, NULL);
    r->got[1] = sift_chain_accept(r->chain, 1, NULL);
    r->got[2] = sift_chain_add_greedy(r->chain, NULL);
    return 0;
}

START_TEST(test_A10_calls_into_a_busy_chain_from_callbacks_are_state_errors)
{
    /* from a custom stage */
    reent r = {NULL, {SIFT_OK, SIFT_OK, SIFT_OK}};
    sift_custom_stage vt = {
        SIFT_CUSTOM_STAGE_ABI, "reent", SIFT_CLASS_WHOLE, 0, reent_apply, NULL, NULL, NULL, NULL};
    sift_chain *c;
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 60;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.2f, 0, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, &r, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    r.chain = c;
    uint64_t d0 = sift__chain_state_digest(c);
    float row[GOOD_V];
    good_row(row, GOOD_V, 60);
    int32_t t;
    sift_token_prob out[GOOD_V];
    size_t n;
    ck_assert_int_eq(sift_chain_distribution(c, row, GOOD_V, out, GOOD_V, &n, NULL), SIFT_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(r.got[i], SIFT_E_STATE);
    ck_assert_uint_eq(sift__chain_state_digest(c), d0);
    ck_assert_uint_eq(sift_chain_n_stages(c), 3);
    ck_assert_int_eq(sift_chain_sample(c, row, GOOD_V, &t, NULL), SIFT_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(r.got[i], SIFT_E_STATE);
    sift_chain_free(c);
    /* from the allocator, while the first sample sizes its buffers */
    counter cnt = {0, 0, NULL, SIFT_OK};
    sift_allocator al = {sizeof(sift_allocator), cnt_alloc, cnt_free, &cnt, NULL};
    p.allocator = &al;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.2f, 0, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    d0 = sift__chain_state_digest(c);
    cnt.reenter = c;
    ck_assert_int_eq(sift_chain_sample(c, row, GOOD_V, &t, NULL), SIFT_OK);
    ck_assert_ptr_null(cnt.reenter); /* the callback ran */
    ck_assert_msg(cnt.reenter_status == SIFT_E_STATE,
                  "accept from inside the allocator returned %d", (int)cnt.reenter_status);
    sift_chain_free(c);
    ck_assert_int_eq(cnt.allocs, cnt.frees);
}
END_TEST

START_TEST(test_A11_custom_stage_with_unknown_abi_or_missing_apply_is_rejected)
{
    sp_chain spec = rich_spec();
    spec.n--;
    fx f;
    fx_open(&f, &spec);
    sift_custom_stage vt = {7, "user", SIFT_CLASS_WHOLE, 0, nan_apply, NULL, NULL, NULL, NULL};
    sift_error err;
    ck_assert_int_eq(sift_chain_add_custom(f.c, &vt, NULL, &err), SIFT_E_ARG);
    assert_msg_has(&err, "ABI version 7", "not supported");
    vt.abi_version = SIFT_CUSTOM_STAGE_ABI;
    vt.apply = NULL;
    ck_assert_int_eq(sift_chain_add_custom(f.c, &vt, NULL, &err), SIFT_E_ARG);
    assert_msg_has(&err, "apply", NULL);
    f.spec.st[f.spec.n++] = st0(SP_DIST);
    ck_assert_int_eq(sift_chain_add_dist(f.c, NULL), SIFT_OK);
    f.n_stages++;
    f.dig = sift__chain_state_digest(f.c);
    fx_unchanged_close(&f);
}
END_TEST

static int grow_apply(void *user, sift_candidate *d, size_t *size)
{
    (void)user;
    (void)d;
    *size += 5;
    return 0;
}

START_TEST(test_A12_custom_stage_output_is_checked)
{
    sift_custom_stage vt = {
        SIFT_CUSTOM_STAGE_ABI, "user", SIFT_CLASS_WHOLE, 0, grow_apply, NULL, NULL, NULL, NULL};
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    uint64_t r0[4], r1[4];
    sift__chain_rng_state(c, r0);
    float row[GOOD_V];
    good_row(row, GOOD_V, 62);
    int32_t t = -3;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, GOOD_V, &t, &err), SIFT_E_ARG);
    assert_msg_has(&err, "user", "grew");
    ck_assert_int_eq(err.index, 0);
    ck_assert_int_eq(t, -3);
    sift__chain_rng_state(c, r1);
    ck_assert(memcmp(r0, r1, sizeof r0) == 0);
    sift_chain_free(c);
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    vt.apply = nan_apply;
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float r64[64];
    good_row(r64, 64, 63);
    ck_assert_int_eq(sift_chain_sample(c, r64, 64, &t, &err), SIFT_E_ROW_VALUE);
    assert_msg_has(&err, "user", "NaN");
    ck_assert_int_eq(err.index, 42);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */

/* Every (pointer, length) pair of the API accepts (NULL, 0) and treats it
 * as (a valid pointer, 0): the same status, no read through the pointer
 * (UBSan flags a NULL passed to memcpy and friends even for 0 bytes). */
START_TEST(test_A13_null_with_zero_length_is_valid_everywhere)
{
    static const char one = 'x';
    sift_error e1, e2;
    /* vocabulary: a NULL piece of length 0 is an empty token */
    const char *pieces[3] = {NULL, "a", ""};
    size_t lens[3] = {0, 1, 0};
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, 3, pieces, lens, NULL, &e1), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 2, SIFT_TOKEN_EOG, NULL), SIFT_OK);
    const char *bytes;
    size_t bl = 9;
    ck_assert_int_eq(sift_vocab_piece(v, 0, &bytes, &bl, NULL), SIFT_OK);
    ck_assert_uint_eq(bl, 0);
    /* the in-memory loaders: (NULL, 0) is an empty file */
    sift_vocab *w = NULL;
    ck_assert_int_eq(sift_vocab_from_tiktoken(&w, NULL, 0, NULL, &e1),
                     sift_vocab_from_tiktoken(&w, &one, 0, NULL, &e2));
    ck_assert_str_eq(e1.message, e2.message);
    ck_assert_int_eq(sift_vocab_from_gguf(&w, NULL, 0, NULL, &e1),
                     sift_vocab_from_gguf(&w, &one, 0, NULL, &e2));
    ck_assert_str_eq(e1.message, e2.message);
    /* grammar text: (NULL, 0) is the empty grammar */
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_new(&g, NULL, 0, v, NULL, &e1),
                     sift_grammar_new(&g, &one, 0, v, NULL, &e2));
    ck_assert_str_eq(e1.message, e2.message);
    const char *text = "root ::= \"a\"*";
    ck_assert_int_eq(sift_grammar_new(&g, text, strlen(text), v, NULL, NULL), SIFT_OK);
    sift_candidate cand[1] = {{1, 0.0f}};
    for (int lazy = 0; lazy < 2; lazy++) {
        if (lazy) {
            const char *words[1] = {"zz"};
            sift_lazy_params lp;
            sift_lazy_params_init(&lp);
            lp.words = words;
            lp.n_words = 1;
            lp.patterns = NULL; /* (NULL, 0) pairs in the params */
            lp.n_patterns = 0;
            lp.tokens = NULL;
            lp.n_tokens = 0;
            ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
        }
        uint64_t d0 = sift__grammar_digest(g, 0);
        ck_assert_int_eq(sift_grammar_accept_bytes(g, NULL, 0, NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_bytes(g, &one, 0, NULL), SIFT_OK);
        ck_assert_uint_eq(sift__grammar_digest(g, 0), d0);
        ck_assert_int_eq(sift_grammar_ban_candidates(g, NULL, 0, &e1),
                         sift_grammar_ban_candidates(g, cand, 0, &e2));
        ck_assert_uint_eq(sift__grammar_digest(g, 0), d0);
    }
    sift_grammar_free(g);
    /* chain calls */
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_logit_bias(c, NULL, 0, NULL), SIFT_OK);
    sift_dry_params dp;
    sift_dry_params_init(&dp);
    dp.multiplier = 0.8f;
    dp.base = 1.75f;
    dp.allowed_length = 2;
    dp.last_n = 8;
    dp.breakers = NULL;
    dp.n_breakers = 0;
    ck_assert_int_eq(sift_chain_add_dry(c, &dp, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float row[3] = {1.0f, 2.0f, 3.0f};
    size_t n = 0;
    ck_assert_int_eq(sift_chain_distribution(c, row, 3, NULL, 0, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(sift_chain_extras(c, NULL, 0, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, 0);
    int32_t k = -1;
    ck_assert_int_eq(sift_chains_next_k(NULL, 0, &k, &e1), SIFT_OK);
    ck_assert_int_eq(k, 0);
    sift_candidate p[3] = {{2, 3.0f}, {1, 2.0f}, {0, 1.0f}};
    sift_slice sl = {3, 3, p, 0, NULL, 0, 0};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample_slice(c, &sl, &t, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_distribution_slice(c, &sl, NULL, 0, &n, NULL), SIFT_OK);
    sift_slicer *sr = NULL;
    ck_assert_int_eq(sift_slicer_new(&sr, 3, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_slicer_build(sr, row, 3, 1, NULL, 0, &sl, NULL), SIFT_OK);
    sift_slicer_free(sr);
    sift_chain_free(c);
    /* config text: (NULL, 0) is the empty document */
    sift_config *cfg = NULL, *cfg2 = NULL;
    ck_assert_int_eq(sift_config_parse(&cfg, "n", NULL, 0, NULL, &e1),
                     sift_config_parse(&cfg2, "n", &one, 0, NULL, &e2));
    ck_assert_uint_eq(sift_config_n_errors(cfg), sift_config_n_errors(cfg2));
    sift_config_free(cfg);
    sift_config_free(cfg2);
    sift_vocab_free(v);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("bad_inputs");
    struct {
        const char *name;
        const TTest *t;
    } rows[] = {
        {"L01", test_L01_nan_in_row_names_the_first_index},
        {"L02", test_L02_pinf_in_row_names_the_first_index},
        {"L03", test_L03_all_neg_inf_row_is_no_candidate},
        {"L04", test_L04_chain_banning_every_token_is_no_candidate_naming_the_stage},
        {"L05", test_L05_subnormal_logits_and_temperature_give_a_defined_result},
        {"L06", test_L06_tiny_temperature_falls_back_to_greedy_never_nan},
        {"L07", test_L07_huge_finite_logits_never_give_nan},
        {"L08", test_L08_row_of_length_zero_is_an_argument_error},
        {"L09", test_L09_row_of_length_one_returns_token_zero},
        {"L10", test_L10_row_longer_than_max_vocab_is_a_limit_before_any_allocation},
        {"L11", test_L11_row_length_other_than_the_chain_vocabulary_is_an_argument_error},
        {"L12", test_L12_all_equal_logits_are_deterministic},
        {"L13", test_L13_one_finite_logit_returns_that_token},
        {"L13_xtc", test_L13_xtc_with_threshold_zero_does_not_keep_only_a_banned_token},
        {"L14", test_L14_a_stage_producing_nan_or_pinf_is_a_row_value_error_naming_the_token},
        {"P01", test_P01_top_k_accepts_every_value},
        {"P02", test_P02_top_p_min_p_typical_reject_p_outside_0_1_and_negative_min_keep},
        {"P03", test_P03_temp_rejects_nan_and_inf_and_treats_nonpositive_as_greedy},
        {"P04", test_P04_temp_ext_rejects_bad_delta_and_exponent},
        {"P05", test_P05_min_keep_zero_or_above_size_is_clamped},
        {"P06", test_P06_penalties_reject_bad_repeat_freq_presence},
        {"P07", test_P07_penalty_window_negative_is_an_error_and_above_max_history_a_limit},
        {"P08", test_P08_dry_rejects_bad_numbers_and_huge_windows},
        {"P09", test_P09_dry_breakers_are_checked_for_count_length_and_vocabulary},
        {"P10", test_P10_xtc_rejects_probability_or_threshold_outside_0_1},
        {"P11", test_P11_top_n_sigma_and_mirostat_reject_nan_inf_and_negative},
        {"P12", test_P12_logit_bias_rejects_bad_entries_and_sums_duplicates},
        {"P13", test_P13_every_seed_is_valid},
        {"P14", test_P14_chain_without_a_last_selector_is_an_argument_error},
        {"P15", test_P15_the_same_stage_twice_is_applied_twice},
        {"P16", test_P16_too_many_stages_is_a_limit},
        {"A01", test_A01_null_pointers_are_argument_errors},
        {"A02", test_A02_free_of_null_is_a_no_op},
        {"A05", test_A05_accept_out_of_range_is_a_token_error_with_history_unchanged},
        {"A06", test_A06_accept_without_sample_updates_state_as_for_that_token},
        {"A07", test_A07_a_chain_left_by_failed_calls_samples_normally},
        {"A08", test_A08_a_failed_add_leaves_no_half_built_stage},
        {"A09", test_A09_long_messages_are_truncated_at_a_utf8_boundary},
        {"A10", test_A10_calls_into_a_busy_chain_from_callbacks_are_state_errors},
        {"A11", test_A11_custom_stage_with_unknown_abi_or_missing_apply_is_rejected},
        {"A12", test_A12_custom_stage_output_is_checked},
        {"A13", test_A13_null_with_zero_length_is_valid_everywhere},
    };
    for (size_t i = 0; i < N(rows); i++) {
        TCase *tc = tcase_create(rows[i].name);
        tcase_add_test(tc, rows[i].t);
        suite_add_tcase(s, tc);
    }
    return s;
}

/*
 * check_chain.c - the chain's API contract: construction and limits,
 * stage bookkeeping, the selector rule, row-length checks, clone and
 * reset, status and class strings, the version twins, the sift_error
 * contract (filled on failure, untouched on success, UTF-8-safe
 * truncation), custom stages (ABI checks, output validation, ownership
 * of user data, canonical input order), re-entrancy from callbacks, the
 * vocabulary API, sift_chain_distribution and accept's range check.
 *
 * Everything goes through include/sift.h; the RNG state and the state
 * digest (sift__chain_rng_state, sift__chain_state_digest) are read
 * through internal helpers to prove "nothing changed" bitwise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static sift_chain *new_dist_chain(uint64_t seed)
{
    sift_chain *c = tu_chain_new(seed, NULL);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

static void fill_row(float *row, int32_t V, uint64_t seed)
{
    tu_rng r = {seed};
    tu_row(&r, row, V, TU_ROW_NORMAL);
}

static void rng_of(const sift_chain *c, uint64_t out[4])
{
    sift__chain_rng_state(c, out);
}

static int rng_eq(const sift_chain *a, const sift_chain *b)
{
    uint64_t x[4], y[4];
    rng_of(a, x);
    rng_of(b, y);
    return memcmp(x, y, sizeof x) == 0;
}

/* True if s[0..n) is valid UTF-8 (no truncated or stray sequences). */
static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int len = *p < 0x80         ? 1
                  : (*p >> 5) == 6  ? 2
                  : (*p >> 4) == 14 ? 3
                  : (*p >> 3) == 30 ? 4
                                    : 0;
        if (len == 0)
            return 0;
        for (int i = 1; i < len; i++)
            if ((p[i] & 0xC0) != 0x80)
                return 0;
        p += len;
    }
    return 1;
}

static void assert_error(const sift_error *e, sift_status code, int64_t index)
{
    ck_assert_int_eq(e->code, code);
    ck_assert_int_gt((int)strlen(e->message), 0);
    ck_assert_int_eq(e->index, index);
    ck_assert_int_eq(e->line, 0);
    ck_assert_int_eq(e->column, 0);
    ck_assert_int_eq(e->offset, -1);
    ck_assert_str_eq(e->source, "");
}

/* ------------------------------------------------------------------ */
/* Lifecycle                                                           */
/* ------------------------------------------------------------------ */

START_TEST(test_free_and_queries_of_null_are_no_ops)
{
    sift_chain_free(NULL);
    sift_chain_reset(NULL);
    sift_vocab_free(NULL);
    sift_chain_params_init(NULL);
    ck_assert_uint_eq(sift_chain_n_stages(NULL), 0);
    ck_assert_ptr_null(sift_chain_stage_name(NULL, 0));
    int64_t n = 99;
    ck_assert_int_eq(sift_chain_stage_class(NULL, 0, &n), SIFT_CLASS_WHOLE);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(sift_vocab_size(NULL), 0);
}
END_TEST

START_TEST(test_params_init_sets_the_documented_defaults)
{
    sift_chain_params p;
    memset(&p, 0x7f, sizeof p);
    sift_chain_params_init(&p);
    ck_assert_uint_eq(p.struct_size, sizeof p);
    ck_assert_uint_eq(p.seed, 0);
    ck_assert_ptr_null(p.allocator);
    ck_assert_int_eq(p.n_vocab, 0);
    ck_assert_int_eq(p.max_vocab, SIFT_DEFAULT_MAX_VOCAB);
    ck_assert_int_eq(p.max_history, SIFT_DEFAULT_MAX_HISTORY);
    ck_assert_int_eq(p.max_stages, SIFT_DEFAULT_MAX_STAGES);
}
END_TEST

START_TEST(test_null_params_give_the_defaults)
{
    sift_chain *a = NULL, *b = NULL;
    ck_assert_int_eq(sift_chain_new(&a, NULL, NULL), SIFT_OK);
    sift_chain_params p;
    sift_chain_params_init(&p);
    ck_assert_int_eq(sift_chain_new(&b, &p, NULL), SIFT_OK);
    ck_assert_uint_eq(sift_chain_n_stages(a), 0);
    /* same default seed: the same RNG */
    ck_assert(rng_eq(a, b));
    /* default max_stages: 256 stages fit, the 257th does not */
    for (int i = 0; i < SIFT_DEFAULT_MAX_STAGES; i++)
        ck_assert_int_eq(sift_chain_add_top_k(a, 5, NULL), SIFT_OK);
    sift_error err;
    ck_assert_int_eq(sift_chain_add_top_k(a, 5, &err), SIFT_E_LIMIT);
    ck_assert_uint_eq(sift_chain_n_stages(a), SIFT_DEFAULT_MAX_STAGES);
    sift_chain_free(a);
    sift_chain_free(b);
}
END_TEST

START_TEST(test_chain_new_rejects_a_null_out_pointer)
{
    sift_error err;
    ck_assert_int_eq(sift_chain_new(NULL, NULL, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "out"));
}
END_TEST

START_TEST(test_chain_new_rejects_a_zero_or_oversized_struct_size)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    sift_chain *c = (sift_chain *)&p; /* must be reset to NULL */
    sift_error err;
    p.struct_size = 0;
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_E_ARG);
    ck_assert_ptr_null(c);
    assert_error(&err, SIFT_E_ARG, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "struct_size"));
    p.struct_size = (uint32_t)sizeof p + 8;
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_E_ARG);
    ck_assert_ptr_null(c);
    /* an older, smaller struct keeps the defaults of the fields it lacks */
    p.struct_size = (uint32_t)offsetof(sift_chain_params, max_stages);
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_chain_new_rejects_limits_out_of_range)
{
    struct {
        const char *field;
        size_t off;
        int32_t bad;
    } cases[] = {
        {"n_vocab", offsetof(sift_chain_params, n_vocab), -1},
        {"max_vocab", offsetof(sift_chain_params, max_vocab), -1},
        {"max_history", offsetof(sift_chain_params, max_history), -1},
        {"max_history", offsetof(sift_chain_params, max_history), SIFT_HARD_MAX_HISTORY + 1},
        {"max_stages", offsetof(sift_chain_params, max_stages), -1},
        {"max_stages", offsetof(sift_chain_params, max_stages), SIFT_HARD_MAX_STAGES + 1},
    };
    for (size_t i = 0; i < N(cases); i++) {
        sift_chain_params p;
        sift_chain_params_init(&p);
        memcpy((char *)&p + cases[i].off, &cases[i].bad, sizeof(int32_t));
        sift_chain *c = NULL;
        sift_error err;
        ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_E_ARG);
        ck_assert_ptr_null(c);
        assert_error(&err, SIFT_E_ARG, -1);
        ck_assert_msg(strstr(err.message, cases[i].field) != NULL, "%s: %s", cases[i].field,
                      err.message);
    }
    /* at the hard caps: accepted */
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.max_history = SIFT_HARD_MAX_HISTORY;
    p.max_stages = SIFT_HARD_MAX_STAGES;
    p.max_vocab = SIFT_HARD_MAX_VOCAB;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    sift_chain_free(c);
    /* n_vocab above max_vocab is a limit */
    sift_chain_params_init(&p);
    p.max_vocab = 100;
    p.n_vocab = 101;
    sift_error err;
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_E_LIMIT);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err.message, "max_vocab"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Stages                                                              */
/* ------------------------------------------------------------------ */

static int dummy_apply(void *user, sift_candidate *data, size_t *size)
{
    (void)user;
    (void)data;
    (void)size;
    return 0;
}

START_TEST(test_adding_to_a_null_chain_is_an_argument_error)
{
    sift_error err;
    sift_dry_params dp = {sizeof(sift_dry_params), 0.8f, 1.75f, 2, 64, NULL, NULL, 0};
    sift_bias b = {1, 1.0f};
    sift_custom_stage vt = {
        SIFT_CUSTOM_STAGE_ABI, "x", SIFT_CLASS_WHOLE, 0, dummy_apply, NULL, NULL, NULL, NULL};
    sift_status got[] = {
        sift_chain_add_greedy(NULL, &err),
        sift_chain_add_dist(NULL, &err),
        sift_chain_add_dist_id_order(NULL, &err),
        sift_chain_add_top_k(NULL, 5, &err),
        sift_chain_add_top_k_ties(NULL, 5, &err),
        sift_chain_add_top_p(NULL, 0.9f, 1, &err),
        sift_chain_add_min_p(NULL, 0.1f, 1, &err),
        sift_chain_add_typical(NULL, 0.9f, 1, &err),
        sift_chain_add_temp(NULL, 0.8f, &err),
        sift_chain_add_temp_ext(NULL, 0.8f, 0.2f, 1.0f, &err),
        sift_chain_add_xtc(NULL, 0.5f, 0.1f, 1, &err),
        sift_chain_add_top_n_sigma(NULL, 1.0f, &err),
        sift_chain_add_mirostat(NULL, 100, 5.0f, 0.1f, 100, &err),
        sift_chain_add_mirostat_v2(NULL, 5.0f, 0.1f, &err),
        sift_chain_add_penalties(NULL, 64, 1.1f, 0.0f, 0.0f, &err),
        sift_chain_add_dry(NULL, &dp, NULL, &err),
        sift_chain_add_logit_bias(NULL, &b, 1, &err),
        sift_chain_add_custom(NULL, &vt, NULL, &err),
    };
    for (size_t i = 0; i < N(got); i++)
        ck_assert_msg(got[i] == SIFT_E_ARG, "adder %zu returned %d", i, (int)got[i]);
    ck_assert_int_eq(sift_chain_add_greedy(NULL, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "chain"));
}
END_TEST

START_TEST(test_max_stages_limit_leaves_the_chain_unchanged)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.max_stages = 2;
    p.seed = 7;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    uint64_t before = sift__chain_state_digest(c);
    sift_error err;
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_E_LIMIT);
    assert_error(&err, SIFT_E_LIMIT, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "max_stages"));
    ck_assert_uint_eq(sift_chain_n_stages(c), 2);
    ck_assert_str_eq(sift_chain_stage_name(c, 1), "dist");
    ck_assert_uint_eq(sift__chain_state_digest(c), before);
    /* still usable, and samples as a fresh [top_k 3, dist] chain does */
    sift_chain *f = tu_chain_new(7, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(f, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(f, NULL), SIFT_OK);
    float row[40];
    for (int step = 0; step < 5; step++) {
        fill_row(row, 40, 100 + (uint64_t)step);
        int32_t t1, t2;
        ck_assert_int_eq(sift_chain_sample(c, row, 40, &t1, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(f, row, 40, &t2, NULL), SIFT_OK);
        ck_assert_int_eq(t1, t2);
    }
    sift_chain_free(c);
    sift_chain_free(f);
}
END_TEST

START_TEST(test_sampling_a_chain_without_stages_is_an_argument_error)
{
    sift_chain *c = tu_chain_new(1, NULL);
    float row[4] = {1, 2, 3, 4};
    int32_t t = -5;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &t, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "selector"));
    ck_assert_int_eq(t, -5);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_sampling_without_a_final_selector_is_an_argument_error)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, 2, NULL), SIFT_OK);
    float row[4] = {1, 2, 3, 4};
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &t, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "selector"));
    /* distribution needs no selector: it reports what top_k leaves */
    sift_token_prob out[4];
    size_t n = 0;
    ck_assert_int_eq(sift_chain_distribution(c, row, 4, out, 4, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(out[0].id, 3);
    ck_assert_int_eq(out[1].id, 2);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_a_selector_that_is_not_last_is_an_argument_error_naming_it)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float row[4] = {1, 2, 3, 4};
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &t, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, 1);
    ck_assert_ptr_nonnull(strstr(err.message, "greedy"));
    size_t n;
    sift_token_prob out[4];
    ck_assert_int_eq(sift_chain_distribution(c, row, 4, out, 4, &n, &err), SIFT_E_ARG);
    sift_chain_free(c);
    /* a chain that does not end in a selector names the misplaced one */
    c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &t, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, 0);
    ck_assert_msg(strstr(err.message, "stage 0 (dist) is a selector but not the last stage"), "%s",
                  err.message);
    sift_chain_free(c);
}
END_TEST

/* The message of a chain without a final selector lists every selector
 * there is, by the names the chain gives them. */
START_TEST(test_the_missing_selector_message_lists_every_selector)
{
    sift_chain *none = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(none, 2, NULL), SIFT_OK);
    float row[4] = {1, 2, 3, 4};
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(none, row, 4, &t, &err), SIFT_E_ARG);
    sift_chain_free(none);
    for (int k = 0; k < 6; k++) {
        sift_chain *c = tu_chain_new(1, NULL);
        sift_status st = k == 0   ? sift_chain_add_greedy(c, NULL)
                         : k == 1 ? sift_chain_add_dist(c, NULL)
                         : k == 2 ? sift_chain_add_dist_id_order(c, NULL)
                         : k == 3 ? sift_chain_add_mirostat(c, 4, 5.0f, 0.1f, 2, NULL)
                         : k == 4 ? sift_chain_add_mirostat_v2(c, 5.0f, 0.1f, NULL)
                                  : sift_chain_add_adaptive_p(c, 0.5f, 0.9f, NULL);
        ck_assert_int_eq(st, SIFT_OK);
        const char *name = sift_chain_stage_name(c, 0);
        char word[64];
        snprintf(word, sizeof word, " %s,", name);
        int listed = strstr(err.message, word) != NULL;
        snprintf(word, sizeof word, " %s)", name);
        listed |= strstr(err.message, word) != NULL;
        snprintf(word, sizeof word, "(%s,", name);
        listed |= strstr(err.message, word) != NULL;
        ck_assert_msg(listed, "'%s' missing from: %s", name, err.message);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_stage_names_and_classes_are_reported)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, 7, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k_ties(c, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    ck_assert_uint_eq(sift_chain_n_stages(c), 4);
    ck_assert_str_eq(sift_chain_stage_name(c, 0), "top_k");
    ck_assert_str_eq(sift_chain_stage_name(c, 2), "top_k_ties");
    ck_assert_str_eq(sift_chain_stage_name(c, 3), "greedy");
    ck_assert_ptr_null(sift_chain_stage_name(c, 4));
    int64_t n = -7;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_TOP);
    ck_assert_int_eq(n, 7);
    ck_assert_int_eq(sift_chain_stage_class(c, 1, &n), SIFT_CLASS_IDENTITY);
    ck_assert_int_eq(sift_chain_stage_class(c, 2, &n), SIFT_CLASS_THRESHOLD);
    ck_assert_int_eq(sift_chain_stage_class(c, 3, &n), SIFT_CLASS_TOP);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(sift_chain_stage_class(c, 3, NULL), SIFT_CLASS_TOP);
    ck_assert_int_eq(sift_chain_stage_class(c, 99, &n), SIFT_CLASS_WHOLE);
    ck_assert_int_eq(n, 0);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rows                                                                */
/* ------------------------------------------------------------------ */

START_TEST(test_a_row_length_other_than_n_vocab_is_an_argument_error)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.n_vocab = 10;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    float row[11] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 11, &t, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "11"));
    ck_assert_ptr_nonnull(strstr(err.message, "10"));
    ck_assert_int_eq(sift_chain_sample(c, row, 9, &t, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_sample(c, row, 10, &t, &err), SIFT_OK);
    ck_assert_int_eq(t, 9);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_a_row_of_length_zero_is_an_argument_error)
{
    sift_chain *c = new_dist_chain(1);
    float row[1] = {0};
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 0, &t, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, -1);
    ck_assert_ptr_nonnull(strstr(err.message, ">= 1"));
    ck_assert_int_eq(sift_chain_sample(c, row, -3, &t, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_sample(c, row, 1, &t, &err), SIFT_OK);
    ck_assert_int_eq(t, 0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_a_row_longer_than_max_vocab_hits_the_limit)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.max_vocab = 8;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    float row[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 9, &t, &err), SIFT_E_LIMIT);
    assert_error(&err, SIFT_E_LIMIT, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "max_vocab"));
    ck_assert_int_eq(sift_chain_sample(c, row, 8, &t, &err), SIFT_OK);
    ck_assert_int_eq(t, 7);
    sift_chain_free(c);
    /* the default limit, far beyond any buffer: rejected before reading */
    c = new_dist_chain(1);
    ck_assert_int_eq(sift_chain_sample(c, row, SIFT_HARD_MAX_VOCAB, &t, &err), SIFT_E_LIMIT);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Clone and reset                                                     */
/* ------------------------------------------------------------------ */

START_TEST(test_clone_gives_identical_future_samples)
{
    sift_chain *a = tu_chain_new(12345, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(a, 20, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(a, NULL), SIFT_OK);
    float row[300];
    int32_t t;
    for (int i = 0; i < 3; i++) {
        fill_row(row, 300, (uint64_t)i);
        ck_assert_int_eq(sift_chain_sample(a, row, 300, &t, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(a, t, NULL), SIFT_OK);
    }
    sift_chain *b = NULL;
    ck_assert_int_eq(sift_chain_clone(a, &b, NULL), SIFT_OK);
    ck_assert(rng_eq(a, b));
    ck_assert_uint_eq(sift__chain_state_digest(a), sift__chain_state_digest(b));
    ck_assert_uint_eq(sift_chain_n_stages(b), 2);
    for (int i = 0; i < 50; i++) {
        fill_row(row, 300, 1000 + (uint64_t)i);
        int32_t ta, tb;
        ck_assert_int_eq(sift_chain_sample(a, row, 300, &ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(b, row, 300, &tb, NULL), SIFT_OK);
        ck_assert_int_eq(ta, tb);
        ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b, tb, NULL), SIFT_OK);
    }
    sift_chain_free(a);
    sift_chain_free(b);
}
END_TEST

START_TEST(test_clone_has_independent_state)
{
    /* penalties make the history part of the state */
    sift_chain *a = tu_chain_new(99, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(a, 16, 1.5f, 0.5f, 0.5f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(a, NULL), SIFT_OK);
    sift_chain *b = NULL;
    ck_assert_int_eq(sift_chain_clone(a, &b, NULL), SIFT_OK);
    uint64_t da = sift__chain_state_digest(a);
    float row[8] = {2, 2, 2, 2, 1, 1, 1, 1};
    int32_t ta, tb;
    /* sampling the clone does not move the original's RNG */
    uint64_t ra[4], rb[4];
    rng_of(a, ra);
    ck_assert_int_eq(sift_chain_sample(b, row, 8, &tb, NULL), SIFT_OK);
    rng_of(a, rb);
    ck_assert(memcmp(ra, rb, sizeof ra) == 0);
    ck_assert_int_eq(sift_chain_sample(a, row, 8, &ta, NULL), SIFT_OK);
    ck_assert_int_eq(ta, tb);
    ck_assert(rng_eq(a, b));
    /* accept different tokens: the histories diverge */
    ck_assert_int_eq(sift_chain_accept(a, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(b, 3, NULL), SIFT_OK);
    ck_assert_uint_ne(sift__chain_state_digest(a), da);
    ck_assert_uint_ne(sift__chain_state_digest(a), sift__chain_state_digest(b));
    /* each chain penalises its own token: token 0 loses mass only in a */
    sift_token_prob pa[8], pb[8];
    size_t na, nb;
    ck_assert_int_eq(sift_chain_distribution(a, row, 8, pa, 8, &na, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_distribution(b, row, 8, pb, 8, &nb, NULL), SIFT_OK);
    double p0a = 0, p0b = 0, p3a = 0, p3b = 0;
    for (size_t i = 0; i < na; i++) {
        if (pa[i].id == 0)
            p0a = pa[i].p;
        if (pa[i].id == 3)
            p3a = pa[i].p;
    }
    for (size_t i = 0; i < nb; i++) {
        if (pb[i].id == 0)
            p0b = pb[i].p;
        if (pb[i].id == 3)
            p3b = pb[i].p;
    }
    ck_assert(p0a < p0b);
    ck_assert(p3b < p3a);
    /* a clone of the clone carries its history */
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_clone(b, &c, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__chain_state_digest(b), sift__chain_state_digest(c));
    sift_chain_free(a);
    /* the clones survive the original */
    ck_assert_int_eq(sift_chain_sample(b, row, 8, &tb, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(c, row, 8, &ta, NULL), SIFT_OK);
    ck_assert_int_eq(ta, tb);
    sift_chain_free(b);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_clone_rejects_null_arguments)
{
    sift_chain *a = new_dist_chain(1);
    sift_chain *b = (sift_chain *)&b;
    sift_error err;
    ck_assert_int_eq(sift_chain_clone(NULL, &b, &err), SIFT_E_ARG);
    ck_assert_ptr_null(b);
    assert_error(&err, SIFT_E_ARG, -1);
    ck_assert_int_eq(sift_chain_clone(a, NULL, &err), SIFT_E_ARG);
    sift_chain_free(a);
}
END_TEST

START_TEST(test_reset_restores_the_initial_rng)
{
    sift_chain *c = tu_chain_new(2024, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, 50, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    uint64_t r0[4];
    rng_of(c, r0);
    uint64_t d0 = sift__chain_state_digest(c);
    float row[500];
    int32_t seq[30];
    for (int i = 0; i < 30; i++) {
        fill_row(row, 500, 77 + (uint64_t)i);
        ck_assert_int_eq(sift_chain_sample(c, row, 500, &seq[i], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(c, seq[i], NULL), SIFT_OK);
    }
    uint64_t r1[4];
    rng_of(c, r1);
    ck_assert(memcmp(r0, r1, sizeof r0) != 0);
    sift_chain_reset(c);
    rng_of(c, r1);
    ck_assert(memcmp(r0, r1, sizeof r0) == 0);
    ck_assert_uint_eq(sift__chain_state_digest(c), d0);
    for (int i = 0; i < 30; i++) {
        fill_row(row, 500, 77 + (uint64_t)i);
        int32_t t;
        ck_assert_int_eq(sift_chain_sample(c, row, 500, &t, NULL), SIFT_OK);
        ck_assert_int_eq(t, seq[i]);
        ck_assert_int_eq(sift_chain_accept(c, t, NULL), SIFT_OK);
    }
    sift_chain_free(c);
}
END_TEST

START_TEST(test_reset_empties_the_history_of_every_stage)
{
    sift_chain *c = tu_chain_new(5, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.3f, 0.1f, 0.1f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_mirostat_v2(c, 5.0f, 0.1f, NULL), SIFT_OK);
    uint64_t d0 = sift__chain_state_digest(c);
    float row[16];
    for (int i = 0; i < 10; i++) {
        fill_row(row, 16, (uint64_t)i);
        int32_t t;
        ck_assert_int_eq(sift_chain_sample(c, row, 16, &t, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(c, t, NULL), SIFT_OK);
    }
    ck_assert_uint_ne(sift__chain_state_digest(c), d0);
    sift_chain_reset(c);
    ck_assert_uint_eq(sift__chain_state_digest(c), d0);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Status, class and version strings                                   */
/* ------------------------------------------------------------------ */

START_TEST(test_status_str_is_never_null_and_distinct_for_every_code)
{
    const sift_status codes[] = {
        SIFT_OK,
        SIFT_E_ARG,
        SIFT_E_NOMEM,
        SIFT_E_LIMIT,
        SIFT_E_STATE,
        SIFT_E_IO,
        SIFT_E_TOKEN,
        SIFT_E_ROW_VALUE,
        SIFT_E_NO_CANDIDATE,
        SIFT_E_SLICE,
        SIFT_E_NEED_ROW,
        SIFT_E_HOOK,
        SIFT_E_SLICE_MISMATCH,
        SIFT_E_GRAMMAR_SYNTAX,
        SIFT_E_GRAMMAR_UNDEFINED,
        SIFT_E_GRAMMAR_LEFT_RECURSION,
        SIFT_E_GRAMMAR_LIMIT,
        SIFT_E_GRAMMAR_DEAD,
        SIFT_E_GRAMMAR_REJECT,
        SIFT_E_PATTERN_SYNTAX,
        SIFT_E_PATTERN_LIMIT,
        SIFT_E_CONFIG_SYNTAX,
        SIFT_E_CONFIG_TYPE,
        SIFT_E_CONFIG_KEY,
        SIFT_E_CONFIG_VALUE,
        SIFT_E_CONFIG_LIMIT,
        SIFT_E_SCHEMA_SYNTAX,
        SIFT_E_SCHEMA_UNSUPPORTED,
        SIFT_E_SCHEMA_LIMIT,
    };
    const char *unknown = sift_status_str((sift_status)9999);
    ck_assert_ptr_nonnull(unknown);
    ck_assert_str_eq(unknown, "unknown status");
    for (size_t i = 0; i < N(codes); i++) {
        const char *s = sift_status_str(codes[i]);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_gt((int)strlen(s), 0);
        ck_assert_str_ne(s, unknown);
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(s, sift_status_str(codes[j]));
    }
    ck_assert_str_eq(sift_status_str(SIFT_OK), "ok");
    /* every number that is not a code, including negative ones */
    for (int v = -5; v < 100; v++) {
        int known = 0;
        for (size_t i = 0; i < N(codes); i++)
            known |= (int)codes[i] == v;
        const char *s = sift_status_str((sift_status)v);
        ck_assert_ptr_nonnull(s);
        if (!known)
            ck_assert_str_eq(s, "unknown status");
    }
    /* the numbers are ABI */
    ck_assert_int_eq(SIFT_E_ARG, 1);
    ck_assert_int_eq(SIFT_E_TOKEN, 6);
    ck_assert_int_eq(SIFT_E_ROW_VALUE, 10);
    ck_assert_int_eq(SIFT_E_NO_CANDIDATE, 11);
    ck_assert_int_eq(SIFT_E_CONFIG_LIMIT, 54);
    ck_assert_int_eq(SIFT_E_SCHEMA_SYNTAX, 60);
    ck_assert_int_eq(SIFT_E_SCHEMA_LIMIT, 62);
}
END_TEST

START_TEST(test_class_str_names_every_class)
{
    const char *names[] = {"whole", "identity", "lowers", "raises", "monotone", "top", "threshold"};
    for (int c = SIFT_CLASS_WHOLE; c <= SIFT_CLASS_THRESHOLD; c++)
        ck_assert_str_eq(sift_class_str((sift_class)c), names[c]);
    ck_assert_ptr_nonnull(sift_class_str((sift_class)42));
    ck_assert_ptr_nonnull(sift_class_str((sift_class)-1));
}
END_TEST

START_TEST(test_version_macros_equal_the_run_time_version)
{
    ck_assert_uint_eq(sift_version_number(), SIFT_VERSION_NUMBER);
    ck_assert_str_eq(sift_version(), SIFT_VERSION_STRING);
    ck_assert_uint_eq(SIFT_VERSION_NUMBER,
                      SIFT_VERSION_MAJOR * 10000 + SIFT_VERSION_MINOR * 100 + SIFT_VERSION_PATCH);
    char buf[64];
    snprintf(buf, sizeof buf, "%d.%d.%d", SIFT_VERSION_MAJOR, SIFT_VERSION_MINOR,
             SIFT_VERSION_PATCH);
    ck_assert_str_eq(sift_version(), buf);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The error struct                                                    */
/* ------------------------------------------------------------------ */

START_TEST(test_error_is_filled_completely_on_failure)
{
    sift_chain *c = new_dist_chain(1);
    float row[10] = {0, 1, 2, 3, 4, 5, 6, NAN, 8, 9};
    float good[10] = {0};
    int32_t t;
    sift_error err;
    /* a good row first, so the chain knows V = 10 for accept */
    ck_assert_int_eq(sift_chain_sample(c, good, 10, &t, NULL), SIFT_OK);
    memset(&err, 0x5a, sizeof err);
    sift_status s = sift_chain_sample(c, row, 10, &t, &err);
    ck_assert_int_eq(s, SIFT_E_ROW_VALUE);
    assert_error(&err, s, 7);
    ck_assert_ptr_nonnull(strstr(err.message, "7"));
    ck_assert_ptr_null(strchr(err.message, '\n'));
    /* a token index */
    memset(&err, 0x5a, sizeof err);
    s = sift_chain_accept(c, 12, &err);
    ck_assert_int_eq(s, SIFT_E_TOKEN);
    assert_error(&err, s, 12);
    /* no index to name */
    memset(&err, 0x5a, sizeof err);
    s = sift_chain_sample(c, NULL, 10, &t, &err);
    ck_assert_int_eq(s, SIFT_E_ARG);
    assert_error(&err, s, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "logits"));
    sift_chain_free(c);
}
END_TEST

START_TEST(test_error_is_untouched_on_success)
{
    sift_chain *c = new_dist_chain(1);
    float row[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    int32_t t;
    sift_error err, copy;
    memset(&err, 0x5a, sizeof err);
    memcpy(&copy, &err, sizeof err);
    ck_assert_int_eq(sift_chain_sample(c, row, 10, &t, &err), SIFT_OK);
    ck_assert(memcmp(&err, &copy, sizeof err) == 0);
    ck_assert_int_eq(sift_chain_accept(c, t, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 3, &err), SIFT_OK);
    sift_chain *d = NULL;
    ck_assert_int_eq(sift_chain_clone(c, &d, &err), SIFT_OK);
    sift_token_prob out[10];
    size_t n;
    ck_assert_int_eq(sift_chain_distribution(d, row, 10, out, 10, &n, &err), SIFT_E_ARG);
    memcpy(&err, &copy, sizeof err);
    sift_chain_free(d);
    sift_chain *e = NULL;
    ck_assert_int_eq(sift_chain_new(&e, NULL, &err), SIFT_OK);
    ck_assert(memcmp(&err, &copy, sizeof err) == 0);
    sift_chain_free(e);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_a_null_error_pointer_is_accepted_everywhere)
{
    sift_chain *c = new_dist_chain(1);
    float row[3] = {NAN, 0, 0};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, 3, &t, NULL), SIFT_E_ROW_VALUE);
    ck_assert_int_eq(sift_chain_accept(c, -1, NULL), SIFT_E_TOKEN);
    ck_assert_int_eq(sift_chain_new(NULL, NULL, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_clone(NULL, NULL, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_new(NULL, 0, NULL, NULL, NULL, NULL), SIFT_E_ARG);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_a_long_message_is_cut_at_a_utf8_boundary)
{
    /* 100 four-byte characters (400 bytes) do not fit in 256 */
    char msg[512];
    size_t k = 0;
    msg[k++] = 'x'; /* shifts the sequences so the cut lands mid-sequence */
    for (int i = 0; i < 100; i++) {
        memcpy(msg + k, "\xF0\x9F\x98\x80", 4);
        k += 4;
    }
    msg[k] = '\0';
    sift_error err;
    ck_assert_int_eq(sift__fail(&err, SIFT_E_LIMIT, "%s", msg), SIFT_E_LIMIT);
    ck_assert_int_eq(err.code, SIFT_E_LIMIT);
    size_t len = strlen(err.message);
    ck_assert_uint_lt(len, SIFT_ERROR_MESSAGE_MAX);
    ck_assert_uint_ge(len, SIFT_ERROR_MESSAGE_MAX - 4);
    ck_assert_uint_eq((len - 1) % 4, 0);
    ck_assert(valid_utf8(err.message));
    ck_assert(memcmp(err.message, msg, len) == 0);
    /* three-byte characters, every shift */
    for (int shift = 0; shift < 3; shift++) {
        k = 0;
        for (int i = 0; i < shift; i++)
            msg[k++] = 'a';
        for (int i = 0; i < 120; i++) {
            memcpy(msg + k, "\xE2\x82\xAC", 3);
            k += 3;
        }
        msg[k] = '\0';
        ck_assert_int_eq(sift__fail_at(&err, SIFT_E_ARG, 5, "%s", msg), SIFT_E_ARG);
        ck_assert(valid_utf8(err.message));
        ck_assert_int_eq(err.index, 5);
        ck_assert_uint_eq((strlen(err.message) - (size_t)shift) % 3, 0);
        ck_assert_uint_ge(strlen(err.message), SIFT_ERROR_MESSAGE_MAX - 3);
    }
}
END_TEST

static int fail_apply(void *user, sift_candidate *data, size_t *size)
{
    (void)user;
    (void)data;
    (void)size;
    return 3;
}

START_TEST(test_a_long_custom_stage_name_stays_valid_utf8_in_messages)
{
    /* 60 four-byte characters: 240 bytes of name */
    char name[256];
    size_t k = 0;
    for (int i = 0; i < 60; i++) {
        memcpy(name + k, "\xF0\x9F\x98\x80", 4);
        k += 4;
    }
    name[k] = '\0';
    sift_custom_stage vt = {
        SIFT_CUSTOM_STAGE_ABI, name, SIFT_CLASS_WHOLE, 0, fail_apply, NULL, NULL, NULL, NULL};
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float row[4] = {1, 2, 3, 4};
    int32_t t;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &t, &err), SIFT_E_ARG);
    ck_assert(valid_utf8(err.message));
    ck_assert_ptr_nonnull(strstr(err.message, "\xF0\x9F\x98\x80"));
    ck_assert_ptr_nonnull(strstr(err.message, "3")); /* the stage's code */
    ck_assert_int_eq(err.index, 0);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Custom stages                                                       */
/* ------------------------------------------------------------------ */

/* What a test custom stage does, and what it saw. */
enum {
    CU_PASS,      /* leaves everything */
    CU_GROW,      /* claims one more element */
    CU_BAD_ID,    /* writes id V */
    CU_NEG_ID,    /* writes id -1 */
    CU_NAN,       /* writes NaN */
    CU_PINF,      /* writes +inf */
    CU_FAIL,      /* returns 7 */
    CU_KEEP2_ODD, /* keeps the first two odd ids, lowering them */
    CU_REENTER,   /* calls back into its chain */
    CU_BAN_ALL,   /* sets every logit to -inf */
    CU_BAN_FIRST  /* sets every logit to -inf on its first call only */
};

typedef struct cu {
    int mode;
    sift_chain *chain;    /* for CU_REENTER */
    sift_status inner[6]; /* statuses of the re-entrant calls */
    int calls, accepts, resets;
    int32_t last_accept;
    int canonical; /* 1 while every input was canonical */
    size_t last_size;
} cu;

static int n_freed;

static void cu_free(void *user)
{
    n_freed++;
    free(user);
}

static void *cu_clone(void *user)
{
    cu *d = malloc(sizeof *d);
    if (d)
        memcpy(d, user, sizeof *d);
    return d;
}

static int cu_accept(void *user, int32_t token)
{
    cu *u = user;
    u->accepts++;
    u->last_accept = token;
    if (u->mode == CU_REENTER && u->chain) {
        int32_t t;
        float row[2] = {0, 0};
        u->inner[5] = sift_chain_sample(u->chain, row, 2, &t, NULL);
    }
    return 0;
}

static void cu_reset(void *user)
{
    ((cu *)user)->resets++;
}

static int cu_apply(void *user, sift_candidate *d, size_t *size)
{
    cu *u = user;
    u->calls++;
    u->last_size = *size;
    for (size_t i = 1; i < *size; i++)
        if (!sift__canon_before(&d[i - 1], &d[i]))
            u->canonical = 0;
    switch (u->mode) {
    case CU_GROW: *size += 1; break;
    case CU_BAD_ID: d[0].id = 1 << 20; break;
    case CU_NEG_ID: d[0].id = -1; break;
    case CU_NAN: d[*size - 1].logit = NAN; break;
    case CU_PINF: d[0].logit = INFINITY; break;
    case CU_FAIL: return 7;
    case CU_KEEP2_ODD: {
        size_t n = 0;
        for (size_t i = 0; i < *size && n < 2; i++)
            if (d[i].id % 2 == 1) {
                d[n] = d[i];
                d[n].logit -= 1.0f;
                n++;
            }
        *size = n;
        break;
    }
    case CU_BAN_ALL:
        for (size_t i = 0; i < *size; i++)
            d[i].logit = -INFINITY;
        break;
    case CU_BAN_FIRST:
        for (size_t i = 0; u->calls == 1 && i < *size; i++)
            d[i].logit = -INFINITY;
        break;
    case CU_REENTER: {
        sift_chain *c = u->chain;
        float row[2] = {0, 0};
        int32_t t;
        size_t n;
        sift_token_prob tp[2];
        sift_error e;
        u->inner[0] = sift_chain_sample(c, row, 2, &t, &e);
        u->inner[1] = sift_chain_accept(c, 0, &e);
        u->inner[2] = sift_chain_add_top_k(c, 1, &e);
        u->inner[3] = sift_chain_distribution(c, row, 2, tp, 2, &n, &e);
        sift_custom_stage vt = {SIFT_CUSTOM_STAGE_ABI,
                                "inner",
                                SIFT_CLASS_WHOLE,
                                0,
                                dummy_apply,
                                NULL,
                                NULL,
                                NULL,
                                NULL};
        u->inner[4] = sift_chain_add_custom(c, &vt, NULL, &e);
        sift_chain_reset(c); /* a no-op while busy */
        break;
    }
    default: break;
    }
    return 0;
}

static cu *cu_new(int mode)
{
    cu *u = calloc(1, sizeof *u);
    ck_assert_ptr_nonnull(u);
    u->mode = mode;
    u->canonical = 1;
    for (size_t i = 0; i < N(u->inner); i++)
        u->inner[i] = (sift_status)-1;
    return u;
}

static sift_custom_stage cu_vt(const char *name)
{
    sift_custom_stage vt = {SIFT_CUSTOM_STAGE_ABI,
                            name,
                            SIFT_CLASS_WHOLE,
                            0,
                            cu_apply,
                            cu_accept,
                            cu_reset,
                            cu_clone,
                            cu_free};
    return vt;
}

/* [custom(mode), dist] with seed 3; the chain owns u. */
static sift_chain *custom_chain(cu *u)
{
    sift_chain *c = tu_chain_new(3, NULL);
    sift_custom_stage vt = cu_vt("user");
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    u->chain = c;
    return c;
}

START_TEST(test_custom_stage_with_an_unknown_abi_version_is_rejected)
{
    n_freed = 0;
    sift_chain *c = tu_chain_new(1, NULL);
    cu *u = cu_new(CU_PASS);
    sift_custom_stage vt = cu_vt("user");
    sift_error err;
    vt.abi_version = 7;
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "7"));
    vt.abi_version = 0;
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, &err), SIFT_E_ARG);
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    ck_assert_int_eq(n_freed, 0); /* ownership passes on success only */
    ck_assert_int_eq(sift_chain_add_custom(c, NULL, u, &err), SIFT_E_ARG);
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 0);
    free(u);
}
END_TEST

START_TEST(test_custom_stage_without_apply_or_with_a_bad_class_is_rejected)
{
    n_freed = 0;
    sift_chain *c = tu_chain_new(1, NULL);
    cu *u = cu_new(CU_PASS);
    sift_custom_stage vt = cu_vt("user");
    sift_error err;
    vt.apply = NULL;
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "apply"));
    vt = cu_vt("user");
    vt.cls = (sift_class)99;
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, &err), SIFT_E_ARG);
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 0);
    free(u);
}
END_TEST

START_TEST(test_custom_stage_user_data_is_not_freed_when_add_fails)
{
    n_freed = 0;
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.max_stages = 1;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    cu *u = cu_new(CU_PASS);
    sift_custom_stage vt = cu_vt("user");
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, NULL), SIFT_E_LIMIT);
    ck_assert_int_eq(n_freed, 0);
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 0);
    ck_assert_int_eq(u->calls, 0);
    free(u);
}
END_TEST

START_TEST(test_custom_stage_user_data_is_freed_with_the_chain)
{
    n_freed = 0;
    cu *u = cu_new(CU_PASS);
    sift_chain *c = custom_chain(u);
    sift_chain *d = NULL;
    ck_assert_int_eq(sift_chain_clone(c, &d, NULL), SIFT_OK);
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 1);
    sift_chain_free(d);
    ck_assert_int_eq(n_freed, 2);
}
END_TEST

START_TEST(test_custom_stage_sees_candidates_in_canonical_order)
{
    n_freed = 0;
    cu *u = cu_new(CU_PASS);
    sift_chain *c = tu_chain_new(3, NULL);
    /* top_k keeps storage order (by id): the chain must sort for us */
    ck_assert_int_eq(sift_chain_add_top_k(c, 50, NULL), SIFT_OK);
    sift_custom_stage vt = cu_vt("user");
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float row[2000];
    for (int i = 0; i < 20; i++) {
        tu_rng r = {(uint64_t)i};
        tu_row(&r, row, 2000, i % TU_ROW__COUNT);
        int32_t t;
        ck_assert_int_eq(sift_chain_sample(c, row, 2000, &t, NULL), SIFT_OK);
    }
    ck_assert_int_eq(u->calls, 20);
    ck_assert_uint_eq(u->last_size, 50);
    ck_assert_int_eq(u->canonical, 1);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_custom_stage_may_shrink_reorder_and_lower)
{
    n_freed = 0;
    cu *u = cu_new(CU_KEEP2_ODD);
    sift_chain *c = custom_chain(u);
    float row[6] = {0.0f, 1.0f, 5.0f, 3.0f, 4.0f, 2.0f};
    /* canonical: 2(5) 4(4) 3(3) 5(2) 1(1) 0(0); first two odd: 3, 5,
     * lowered by 1 to 2 and 1: p(3) = e/(e+1) = 0.7310585786 */
    sift_token_prob out[6];
    size_t n = 0;
    ck_assert_int_eq(sift_chain_distribution(c, row, 6, out, 6, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(out[0].id, 3);
    ck_assert_int_eq(out[1].id, 5);
    ck_assert(out[0].logit == 2.0f && out[1].logit == 1.0f);
    ck_assert_double_eq_tol(out[0].p, 0.7310585786300049, 1e-6);
    ck_assert_double_eq_tol(out[1].p, 0.2689414213699951, 1e-6);
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, 6, &t, NULL), SIFT_OK);
    ck_assert(t == 3 || t == 5);
    ck_assert_int_eq(sift_chain_accept(c, t, NULL), SIFT_OK);
    ck_assert_int_eq(u->accepts, 1);
    ck_assert_int_eq(u->last_accept, t);
    sift_chain_reset(c);
    ck_assert_int_eq(u->resets, 1);
    ck_assert_str_eq(sift_chain_stage_name(c, 1), "dist");
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 1);
}
END_TEST

START_TEST(test_custom_stage_name_and_class_are_reported)
{
    n_freed = 0;
    sift_chain *c = tu_chain_new(1, NULL);
    cu *u = cu_new(CU_PASS);
    sift_custom_stage vt = cu_vt("my_filter");
    vt.cls = SIFT_CLASS_LOWERS;
    vt.cls_n = 12;
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, NULL), SIFT_OK);
    cu *u2 = cu_new(CU_PASS);
    vt = cu_vt(NULL);
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u2, NULL), SIFT_OK);
    int64_t n = 0;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 12);
    ck_assert_int_eq(sift_chain_stage_class(c, 1, &n), SIFT_CLASS_WHOLE);
    ck_assert_str_eq(sift_chain_stage_name(c, 0), "my_filter");
    ck_assert_str_eq(sift_chain_stage_name(c, 1), "custom");
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 2);
}
END_TEST

/* A custom stage misbehaves: the sample fails with `want` naming
 * `index`, and nothing changed. */
static void check_bad_custom(int mode, sift_status want, int64_t index, const char *needle)
{
    n_freed = 0;
    cu *u = cu_new(mode);
    sift_chain *c = custom_chain(u);
    float row[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t r0[4], r1[4];
    rng_of(c, r0);
    uint64_t d0 = sift__chain_state_digest(c);
    int32_t t = -9;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 8, &t, &err), want);
    assert_error(&err, want, index);
    ck_assert_msg(strstr(err.message, needle) != NULL, "%s", err.message);
    ck_assert_int_eq(t, -9);
    rng_of(c, r1);
    ck_assert(memcmp(r0, r1, sizeof r0) == 0);
    ck_assert_uint_eq(sift__chain_state_digest(c), d0);
    sift_token_prob out[8];
    size_t n;
    ck_assert_int_eq(sift_chain_distribution(c, row, 8, out, 8, &n, &err), want);
    /* the chain stays usable once the stage behaves */
    u->mode = CU_PASS;
    ck_assert_int_eq(sift_chain_sample(c, row, 8, &t, &err), SIFT_OK);
    sift_chain *f = new_dist_chain(3);
    int32_t tf;
    ck_assert_int_eq(sift_chain_sample(f, row, 8, &tf, NULL), SIFT_OK);
    ck_assert_int_eq(t, tf);
    sift_chain_free(f);
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 1);
}

START_TEST(test_custom_stage_growing_the_array_is_an_argument_error)
{
    check_bad_custom(CU_GROW, SIFT_E_ARG, 0, "user");
}
END_TEST

START_TEST(test_custom_stage_writing_an_id_out_of_range_is_an_argument_error)
{
    check_bad_custom(CU_BAD_ID, SIFT_E_ARG, 0, "1048576");
    check_bad_custom(CU_NEG_ID, SIFT_E_ARG, 0, "-1");
}
END_TEST

START_TEST(test_custom_stage_writing_nan_or_pinf_is_a_row_value_error_naming_the_token)
{
    /* canonical order of 1..8: token 0 is last, token 7 first */
    check_bad_custom(CU_NAN, SIFT_E_ROW_VALUE, 0, "NaN");
    check_bad_custom(CU_PINF, SIFT_E_ROW_VALUE, 7, "+inf");
}
END_TEST

START_TEST(test_custom_stage_failure_returns_an_argument_error_with_nothing_changed)
{
    check_bad_custom(CU_FAIL, SIFT_E_ARG, 0, "7");
}
END_TEST

START_TEST(test_custom_stage_banning_everything_gives_no_candidate)
{
    /* named: the custom stage (0), not the selector that found nothing */
    check_bad_custom(CU_BAN_ALL, SIFT_E_NO_CANDIDATE, 0, "stage 0 (user)");
}
END_TEST

/* The stage to name is found where the custom stage's output is checked,
 * not by calling the stage again, which may answer otherwise. */
START_TEST(test_custom_stage_banning_everything_is_named_though_a_second_call_would_not)
{
    cu *u = cu_new(CU_BAN_FIRST);
    sift_chain *c = custom_chain(u);
    float row[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t t = -9;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, 8, &t, &err), SIFT_E_NO_CANDIDATE);
    assert_error(&err, SIFT_E_NO_CANDIDATE, 0);
    ck_assert_msg(strstr(err.message, "stage 0 (user) removed the last candidate") != NULL, "%s",
                  err.message);
    ck_assert_int_eq(t, -9);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_clone_of_a_custom_stage_without_clone_is_a_state_error)
{
    n_freed = 0;
    sift_chain *c = tu_chain_new(1, NULL);
    cu *u = cu_new(CU_PASS);
    sift_custom_stage vt = cu_vt("noclone");
    vt.clone = NULL;
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    sift_chain *d = (sift_chain *)&d;
    sift_error err;
    ck_assert_int_eq(sift_chain_clone(c, &d, &err), SIFT_E_STATE);
    assert_error(&err, SIFT_E_STATE, -1);
    ck_assert_ptr_nonnull(strstr(err.message, "noclone"));
    ck_assert_ptr_null(d);
    ck_assert_int_eq(n_freed, 0);
    float row[3] = {1, 3, 2};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, 3, &t, NULL), SIFT_OK);
    ck_assert_int_eq(t, 1);
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 1);
}
END_TEST

START_TEST(test_clone_of_a_custom_stage_copies_its_user_data)
{
    n_freed = 0;
    cu *u = cu_new(CU_PASS);
    sift_chain *c = custom_chain(u);
    sift_chain *d = NULL;
    ck_assert_int_eq(sift_chain_clone(c, &d, NULL), SIFT_OK);
    float row[3] = {1, 3, 2};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(d, row, 3, &t, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(d, row, 3, &t, NULL), SIFT_OK);
    ck_assert_int_eq(u->calls, 0); /* the clone called its own copy */
    ck_assert_int_eq(sift_chain_sample(c, row, 3, &t, NULL), SIFT_OK);
    ck_assert_int_eq(u->calls, 1);
    sift_chain_free(d);
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 2);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Re-entrancy                                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_calls_into_the_chain_from_apply_get_a_state_error)
{
    n_freed = 0;
    cu *u = cu_new(CU_REENTER);
    sift_chain *c = custom_chain(u);
    float row[5] = {0.5f, 1.5f, -1.0f, 2.0f, 0.0f};
    uint64_t d0 = sift__chain_state_digest(c);
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, 5, &t, NULL), SIFT_OK);
    for (int i = 0; i < 5; i++)
        ck_assert_msg(u->inner[i] == SIFT_E_STATE, "inner call %d returned %d", i,
                      (int)u->inner[i]);
    ck_assert_uint_eq(sift_chain_n_stages(c), 2);
    ck_assert_int_eq(u->resets, 0);
    /* the outer sample is what a plain dist chain gives */
    sift_chain *f = new_dist_chain(3);
    int32_t tf;
    ck_assert_int_eq(sift_chain_sample(f, row, 5, &tf, NULL), SIFT_OK);
    ck_assert_int_eq(t, tf);
    ck_assert(rng_eq(c, f));
    (void)d0;
    /* and from accept */
    ck_assert_int_eq(sift_chain_accept(c, t, NULL), SIFT_OK);
    ck_assert_int_eq(u->inner[5], SIFT_E_STATE);
    /* the distribution path too */
    u->inner[0] = (sift_status)-1;
    sift_token_prob out[5];
    size_t n;
    ck_assert_int_eq(sift_chain_distribution(c, row, 5, out, 5, &n, NULL), SIFT_OK);
    ck_assert_int_eq(u->inner[0], SIFT_E_STATE);
    /* after the callbacks the chain is free again */
    ck_assert_int_eq(sift_chain_add_top_k(f, 2, NULL), SIFT_OK);
    sift_chain_free(f);
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Vocabulary                                                          */
/* ------------------------------------------------------------------ */

START_TEST(test_vocab_stores_every_piece_including_empty_and_nul_bytes)
{
    const char *pieces[4] = {"hello", NULL, "a\0b", "\xE2\x82\xAC"};
    size_t lengths[4] = {5, 0, 3, 3};
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_int_eq(sift_vocab_new(&v, 4, pieces, lengths, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 4);
    for (int32_t i = 0; i < 4; i++) {
        const char *b = NULL;
        size_t len = 99;
        ck_assert_int_eq(sift_vocab_piece(v, i, &b, &len, &err), SIFT_OK);
        ck_assert_uint_eq(len, lengths[i]);
        ck_assert_ptr_nonnull(b);
        if (len)
            ck_assert(memcmp(b, pieces[i], len) == 0);
        ck_assert(b != pieces[i]); /* copied */
    }
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_vocab_rejects_bad_arguments)
{
    const char *pieces[2] = {"x", NULL};
    size_t lengths[2] = {1, 2};
    sift_vocab *v = (sift_vocab *)&v;
    sift_error err;
    ck_assert_int_eq(sift_vocab_new(NULL, 2, pieces, lengths, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_new(&v, 0, pieces, lengths, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(sift_vocab_new(&v, -1, pieces, lengths, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_new(&v, 1, NULL, lengths, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "pieces"));
    ck_assert_int_eq(sift_vocab_new(&v, 1, pieces, NULL, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "lengths"));
    /* length without bytes names the token */
    ck_assert_int_eq(sift_vocab_new(&v, 2, pieces, lengths, NULL, &err), SIFT_E_ARG);
    assert_error(&err, SIFT_E_ARG, 1);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(sift_vocab_new(&v, (1 << 24) + 1, pieces, lengths, NULL, &err), SIFT_E_LIMIT);
}
END_TEST

START_TEST(test_vocab_piece_rejects_null_and_out_of_range_ids)
{
    const char *pieces[2] = {"a", "bc"};
    size_t lengths[2] = {1, 2};
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, 2, pieces, lengths, NULL, NULL), SIFT_OK);
    const char *b;
    size_t len;
    sift_error err;
    ck_assert_int_eq(sift_vocab_piece(v, 2, &b, &len, &err), SIFT_E_TOKEN);
    assert_error(&err, SIFT_E_TOKEN, 2);
    ck_assert_int_eq(sift_vocab_piece(v, -1, &b, &len, &err), SIFT_E_TOKEN);
    assert_error(&err, SIFT_E_TOKEN, -1);
    ck_assert_int_eq(sift_vocab_piece(NULL, 0, &b, &len, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_piece(v, 0, NULL, &len, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_piece(v, 0, &b, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_piece(v, 1, &b, &len, &err), SIFT_OK);
    ck_assert_uint_eq(len, 2);
    ck_assert(memcmp(b, "bc", 2) == 0);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_vocab_attributes_start_at_zero_and_are_validated)
{
    const char *pieces[3] = {"a", "<eos>", "<eot>"};
    size_t lengths[3] = {1, 5, 5};
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_int_eq(sift_vocab_new(&v, 3, pieces, lengths, NULL, NULL), SIFT_OK);
    for (int32_t i = 0; i < 3; i++)
        ck_assert_uint_eq(sift_vocab_attr(v, i), 0);
    ck_assert_int_eq(sift_vocab_set_attr(v, 1, SIFT_TOKEN_EOG, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 2, SIFT_TOKEN_EOG | SIFT_TOKEN_SPECIAL, &err), SIFT_OK);
    ck_assert_uint_eq(sift_vocab_attr(v, 1), SIFT_TOKEN_EOG);
    ck_assert_uint_eq(sift_vocab_attr(v, 2), SIFT_TOKEN_EOG | SIFT_TOKEN_SPECIAL);
    ck_assert_int_eq(sift_vocab_set_attr(v, 3, SIFT_TOKEN_EOG, &err), SIFT_E_TOKEN);
    assert_error(&err, SIFT_E_TOKEN, 3);
    ck_assert_int_eq(sift_vocab_set_attr(v, 0, 8, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_set_attr(NULL, 0, 0, &err), SIFT_E_ARG);
    ck_assert_uint_eq(sift_vocab_attr(v, 0), 0); /* failures changed nothing */
    ck_assert_uint_eq(sift_vocab_attr(v, -1), 0);
    ck_assert_uint_eq(sift_vocab_attr(NULL, 0), 0);
    sift_vocab_free(v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Distribution                                                        */
/* ------------------------------------------------------------------ */

START_TEST(test_distribution_of_dist_is_the_softmax)
{
    sift_chain *c = new_dist_chain(1);
    float row[3] = {1.0f, 2.0f, 3.0f};
    sift_token_prob out[3];
    size_t n = 0;
    ck_assert_int_eq(sift_chain_distribution(c, row, 3, out, 3, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, 3);
    /* e^k / (e + e^2 + e^3) */
    ck_assert_int_eq(out[0].id, 2);
    ck_assert_int_eq(out[1].id, 1);
    ck_assert_int_eq(out[2].id, 0);
    ck_assert_double_eq_tol(out[0].p, 0.6652409557748219, 1e-6);
    ck_assert_double_eq_tol(out[1].p, 0.2447284710547976, 1e-6);
    ck_assert_double_eq_tol(out[2].p, 0.0900305731703805, 1e-6);
    ck_assert(out[0].logit == 3.0f);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_distribution_sums_to_one_in_canonical_order_without_touching_the_rng)
{
    sift_chain *c = tu_chain_new(8, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, 1000, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    enum { V = 5000 };
    float *row = malloc(V * sizeof *row);
    sift_token_prob *out = malloc(V * sizeof *out);
    for (int shape = 0; shape < TU_ROW__COUNT; shape++) {
        tu_rng r = {(uint64_t)shape + 40};
        tu_row(&r, row, V, shape);
        uint64_t r0[4], r1[4];
        rng_of(c, r0);
        size_t n = 0;
        ck_assert_int_eq(sift_chain_distribution(c, row, V, out, V, &n, NULL), SIFT_OK);
        rng_of(c, r1);
        ck_assert(memcmp(r0, r1, sizeof r0) == 0);
        ck_assert_uint_ge(n, 1);
        ck_assert_uint_le(n, 1000);
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            ck_assert(out[i].p >= 0 && out[i].p <= 1);
            ck_assert(out[i].logit == row[out[i].id]);
            sum += out[i].p;
            if (i)
                ck_assert(out[i - 1].logit > out[i].logit ||
                          (out[i - 1].logit == out[i].logit && out[i - 1].id < out[i].id));
        }
        ck_assert_msg(fabs(sum - 1.0) <= 1e-12, "shape %d: sum %.17g", shape, sum);
        /* sampling afterwards is what a fresh chain gives */
        int32_t t1, t2;
        sift_chain *f = tu_chain_new(8, NULL);
        ck_assert_int_eq(sift_chain_add_top_k(f, 1000, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(f, NULL), SIFT_OK);
        sift_chain_reset(c);
        ck_assert_int_eq(sift_chain_distribution(c, row, V, out, V, &n, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(c, row, V, &t1, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(f, row, V, &t2, NULL), SIFT_OK);
        ck_assert_int_eq(t1, t2);
        sift_chain_free(f);
    }
    free(row);
    free(out);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_survivors_are_what_the_first_stages_leave_in_canonical_order)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.5f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float row[6] = {0, 5, 1, 4, -INFINITY, 4};
    sift_candidate out[6];
    size_t n = 0;
    /* 0 stages: the row without its -inf token, canonical (4 ties: id 3 first). */
    ck_assert_int_eq(sift_chain_survivors(c, row, 6, 0, out, 6, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(out[0].id, 1);
    ck_assert_int_eq(out[1].id, 3);
    ck_assert_int_eq(out[2].id, 5);
    /* top_k 3, then temperature 0.5 doubles the logits. */
    ck_assert_int_eq(sift_chain_survivors(c, row, 6, 2, out, 6, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(out[0].id, 1);
    ck_assert(out[0].logit == 10.0f && out[2].logit == 8.0f);
    sift_error err;
    ck_assert_int_eq(sift_chain_survivors(c, row, 6, 3, out, 6, &n, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 2);
    ck_assert_ptr_nonnull(strstr(err.message, "selector"));
    sift_chain_free(c);
}
END_TEST

START_TEST(test_distribution_capacity_truncates_but_reports_the_full_count)
{
    sift_chain *c = new_dist_chain(1);
    float row[6] = {0, 5, 1, 4, 2, 3};
    sift_token_prob out[4];
    memset(out, 0, sizeof out);
    out[3].id = -77;
    size_t n = 0;
    ck_assert_int_eq(sift_chain_distribution(c, row, 6, out, 3, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, 6);
    ck_assert_int_eq(out[0].id, 1);
    ck_assert_int_eq(out[1].id, 3);
    ck_assert_int_eq(out[2].id, 5);
    ck_assert_int_eq(out[3].id, -77);
    /* capacity 0 with NULL out: a count query */
    n = 0;
    ck_assert_int_eq(sift_chain_distribution(c, row, 6, NULL, 0, &n, NULL), SIFT_OK);
    ck_assert_uint_eq(n, 6);
    sift_error err;
    ck_assert_int_eq(sift_chain_distribution(c, row, 6, NULL, 3, &n, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_distribution(c, row, 6, out, 3, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "n_out"));
    sift_chain_free(c);
}
END_TEST

START_TEST(test_distribution_of_greedy_puts_all_mass_on_the_selected_token)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    float row[5] = {1, 7, 7, 3, -INFINITY};
    sift_token_prob out[5];
    size_t n = 0;
    ck_assert_int_eq(sift_chain_distribution(c, row, 5, out, 5, &n, NULL), SIFT_OK);
    ck_assert_uint_ge(n, 1);
    ck_assert_int_eq(out[0].id, 1);
    ck_assert(out[0].p == 1.0);
    for (size_t i = 1; i < n; i++)
        ck_assert(out[i].p == 0.0);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Accept                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_accept_out_of_range_is_a_token_error_with_history_unchanged)
{
    sift_chain *c = tu_chain_new(4, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.2f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float row[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, 10, &t, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, t, NULL), SIFT_OK);
    uint64_t d0 = sift__chain_state_digest(c);
    const int32_t bad[] = {10, 11, -1, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < N(bad); i++) {
        sift_error err;
        ck_assert_int_eq(sift_chain_accept(c, bad[i], &err), SIFT_E_TOKEN);
        assert_error(&err, SIFT_E_TOKEN, bad[i]);
        ck_assert_ptr_nonnull(strstr(err.message, "10"));
        ck_assert_uint_eq(sift__chain_state_digest(c), d0);
    }
    ck_assert_int_eq(sift_chain_accept(c, 9, NULL), SIFT_OK);
    ck_assert_uint_ne(sift__chain_state_digest(c), d0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_accept_without_sample_is_allowed)
{
    /* prompt tokens and drafts are accepted without a sample; with no
     * n_vocab and no row yet, max_vocab bounds the id */
    sift_chain *c = tu_chain_new(4, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.2f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    uint64_t d0 = sift__chain_state_digest(c);
    ck_assert_int_eq(sift_chain_accept(c, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, 100000, NULL), SIFT_OK);
    ck_assert_uint_ne(sift__chain_state_digest(c), d0);
    ck_assert_int_eq(sift_chain_accept(c, SIFT_DEFAULT_MAX_VOCAB, NULL), SIFT_E_TOKEN);
    /* the same history accepted into a second chain gives the same state */
    sift_chain *d = tu_chain_new(4, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(d, 8, 1.2f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(d, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(d, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(d, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(d, 100000, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__chain_state_digest(c), sift__chain_state_digest(d));
    sift_chain_free(c);
    sift_chain_free(d);
}
END_TEST

START_TEST(test_accept_is_bounded_by_n_vocab_when_given)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.n_vocab = 50;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, 49, NULL), SIFT_OK);
    sift_error err;
    ck_assert_int_eq(sift_chain_accept(c, 50, &err), SIFT_E_TOKEN);
    ck_assert_ptr_nonnull(strstr(err.message, "50"));
    ck_assert_int_eq(sift_chain_accept(NULL, 0, &err), SIFT_E_ARG);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* "No candidate left" names the stage that banned the last one         */
/* ------------------------------------------------------------------ */

/* top_k 3, then logit_bias bans those three, then greedy: every path
 * (whole row, the row's prefix, slice; sample and distribution) names
 * stage 1, logit_bias, not the selector that found nothing. */
static void check_banning_stage_named(int32_t V)
{
    float *row = malloc((size_t)V * sizeof *row);
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)(V - i) / 8.0f;
    sift_bias b[3] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
    const sift_candidate p[3] = {{0, row[0]}, {1, row[1]}, {2, row[2]}};
    sift_slice sl = {V, 3, p, 0, NULL, SIFT_SLICE_CANONICAL, 0};
    for (int sel = 0; sel < 2; sel++) {
        sift_chain *c = tu_chain_new(5, NULL);
        ck_assert_int_eq(sift_chain_add_top_k(c, 3, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_logit_bias(c, b, 3, NULL), SIFT_OK);
        ck_assert_int_eq(sel ? sift_chain_add_dist(c, NULL) : sift_chain_add_greedy(c, NULL),
                         SIFT_OK);
        for (int path = 0; path < 4; path++) {
            sift_error err;
            memset(&err, 0, sizeof err);
            int32_t t = -1;
            sift_token_prob out[4];
            size_t n = 0;
            sift_status st = path == 0   ? sift_chain_sample(c, row, V, &t, &err)
                             : path == 1 ? sift_chain_distribution(c, row, V, out, 4, &n, &err)
                             : path == 2 ? sift_chain_sample_slice(c, &sl, &t, &err)
                                         : sift_chain_distribution_slice(c, &sl, out, 4, &n, &err);
            ck_assert_msg(st == SIFT_E_NO_CANDIDATE, "V %d selector %d path %d: %d %s", (int)V, sel,
                          path, st, err.message);
            ck_assert_int_eq(err.code, SIFT_E_NO_CANDIDATE);
            ck_assert_msg(err.index == 1, "V %d path %d: index %lld: %s", (int)V, path,
                          (long long)err.index, err.message);
            ck_assert_msg(strstr(err.message, "stage 1 (logit_bias)") != NULL, "%s", err.message);
        }
        sift_chain_free(c);
    }
    free(row);
}

START_TEST(test_no_candidate_left_names_the_stage_that_banned_the_last_one)
{
    check_banning_stage_named(4);  /* the whole row */
    check_banning_stage_named(64); /* the row's top 3 decide */
}
END_TEST

/* ------------------------------------------------------------------ */
/* A custom stage's output is checked like any input                    */
/* ------------------------------------------------------------------ */

enum {
    VC_KEEP,        /* leaves everything (reversed, to show order is free) */
    VC_DUP,         /* writes token d[0] twice */
    VC_FOREIGN,     /* writes a token it was not given */
    VC_KEEP_FIRST,  /* keeps the canonical first one */
    VC_SKIP_FIRST,  /* keeps positions 1 and 2 */
    VC_LOWER_FIRST, /* lowers the first logit by 1 */
    VC_LOWER_TWO,   /* lowers the first two logits by 1 */
    VC_DROP_TWO,    /* removes the last two */
    VC_RAISE_LAST   /* raises the last logit by 1 */
};

static int vc_apply(void *user, sift_candidate *d, size_t *size)
{
    int mode = *(int *)user;
    size_t n = *size;
    switch (mode) {
    case VC_KEEP:
        for (size_t i = 0; i < n / 2; i++) {
            sift_candidate t = d[i];
            d[i] = d[n - 1 - i];
            d[n - 1 - i] = t;
        }
        break;
    case VC_DUP: d[1] = d[0]; break;
    case VC_FOREIGN: d[0].id = 100; break; /* the row has 128 tokens, top_k gave 8 */
    case VC_KEEP_FIRST: *size = 1; break;
    case VC_SKIP_FIRST:
        d[0] = d[2];
        *size = 2;
        break;
    case VC_LOWER_FIRST: d[0].logit -= 1.0f; break;
    case VC_LOWER_TWO:
        d[0].logit -= 1.0f;
        d[1].logit -= 1.0f;
        break;
    case VC_DROP_TWO: *size = n - 2; break;
    case VC_RAISE_LAST: d[n - 1].logit += 1.0f; break;
    default: break;
    }
    return 0;
}

/* [top_k 8, custom(mode) declaring cls/n, dist] on a 128-token row: the
 * sample's status, with a message that must contain `needle`. */
static void check_custom_output(int mode, sift_class cls, int64_t n, sift_status want,
                                const char *needle)
{
    sift_chain *c = tu_chain_new(9, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, 8, NULL), SIFT_OK);
    sift_custom_stage vt = {SIFT_CUSTOM_STAGE_ABI, "vc", cls, n, vc_apply, NULL, NULL, NULL, NULL};
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, &mode, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    float row[128];
    fill_row(row, 128, 77);
    for (int dist = 0; dist < 2; dist++) {
        sift_error err;
        memset(&err, 0, sizeof err);
        int32_t t = -1;
        sift_token_prob out[8];
        size_t no = 0;
        sift_status st = dist ? sift_chain_distribution(c, row, 128, out, 8, &no, &err)
                              : sift_chain_sample(c, row, 128, &t, &err);
        ck_assert_msg(st == want, "mode %d class %d: status %d, want %d (%s)", mode, (int)cls, st,
                      want, err.message);
        if (want != SIFT_OK) {
            ck_assert_int_eq(err.index, 1);
            ck_assert_msg(strstr(err.message, needle) != NULL, "'%s' lacks '%s'", err.message,
                          needle);
        }
    }
    sift_chain_free(c);
}

START_TEST(test_custom_stage_output_may_not_repeat_or_invent_tokens)
{
    check_custom_output(VC_KEEP, SIFT_CLASS_WHOLE, 0, SIFT_OK, "");
    check_custom_output(VC_DUP, SIFT_CLASS_WHOLE, 0, SIFT_E_ARG, "twice");
    check_custom_output(VC_FOREIGN, SIFT_CLASS_WHOLE, 0, SIFT_E_ARG, "token 100, which it was not");
}
END_TEST

START_TEST(test_custom_stage_output_must_keep_its_declared_class)
{
    /* what each class allows */
    check_custom_output(VC_KEEP, SIFT_CLASS_IDENTITY, 0, SIFT_OK, "");
    check_custom_output(VC_KEEP_FIRST, SIFT_CLASS_TOP, 1, SIFT_OK, "");
    check_custom_output(VC_KEEP_FIRST, SIFT_CLASS_THRESHOLD, 0, SIFT_OK, "");
    check_custom_output(VC_LOWER_FIRST, SIFT_CLASS_LOWERS, 1, SIFT_OK, "");
    check_custom_output(VC_LOWER_TWO, SIFT_CLASS_LOWERS, -1, SIFT_OK, "");
    /* and what each forbids */
    check_custom_output(VC_LOWER_FIRST, SIFT_CLASS_IDENTITY, 0, SIFT_E_ARG, "changed the logit");
    check_custom_output(VC_DROP_TWO, SIFT_CLASS_IDENTITY, 0, SIFT_E_ARG, "removed 2");
    check_custom_output(VC_KEEP, SIFT_CLASS_TOP, 2, SIFT_E_ARG, "declares TOP 2 but kept 8");
    check_custom_output(VC_SKIP_FIRST, SIFT_CLASS_TOP, 2, SIFT_E_ARG, "not among the first 2");
    check_custom_output(VC_SKIP_FIRST, SIFT_CLASS_THRESHOLD, 0, SIFT_E_ARG,
                        "not among the first 2");
    check_custom_output(VC_LOWER_FIRST, SIFT_CLASS_TOP, 8, SIFT_E_ARG, "changed the logit");
    check_custom_output(VC_RAISE_LAST, SIFT_CLASS_LOWERS, 8, SIFT_E_ARG, "raised token");
    check_custom_output(VC_LOWER_TWO, SIFT_CLASS_LOWERS, 1, SIFT_E_ARG, "lowered or removed 2");
    check_custom_output(VC_DROP_TWO, SIFT_CLASS_LOWERS, 1, SIFT_E_ARG, "lowered or removed 2");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Ownership transfers refuse an object that is already owned          */
/* ------------------------------------------------------------------ */

static sift_grammar *owned_test_grammar(void)
{
    const char *pieces[3] = {"a", "b", ""};
    size_t lens[3] = {1, 1, 0};
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, 3, pieces, lens, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 2, SIFT_TOKEN_EOG, NULL), SIFT_OK);
    sift_grammar *g = NULL;
    const char *text = "root ::= \"a\"+";
    ck_assert_int_eq(sift_grammar_new(&g, text, strlen(text), v, NULL, NULL), SIFT_OK);
    sift_vocab_free(v);
    return g;
}

enum { T_ADD, T_CHECK };

static sift_status transfer(sift_chain *c, int how, sift_grammar *g, sift_error *err)
{
    return how == T_ADD ? sift_chain_add_grammar(c, g, err)
                        : sift_chain_set_check_grammar(c, g, err);
}

/* Every pair of transfers (add, check) into the same chain or another:
 * the second is SIFT_E_ARG, nothing changes, and both chains still
 * sample and free cleanly (ASan sees any double free). */
START_TEST(test_a_grammar_owned_by_a_chain_is_refused_by_every_transfer)
{
    float row[3] = {1.0f, 2.0f, 0.5f};
    for (int first = 0; first < 2; first++)
        for (int second = 0; second < 2; second++)
            for (int other = 0; other < 2; other++) {
                sift_chain *a = tu_chain_new(1, NULL), *b = tu_chain_new(1, NULL);
                sift_grammar *g = owned_test_grammar();
                ck_assert_int_eq(transfer(a, first, g, NULL), SIFT_OK);
                sift_chain *to = other ? b : a;
                size_t n0 = sift_chain_n_stages(to);
                uint64_t d0 = sift__chain_state_digest(to);
                sift_error err;
                ck_assert_int_eq(transfer(to, second, g, &err), SIFT_E_ARG);
                ck_assert_msg(strstr(err.message, "already owned by a chain") != NULL, "%s",
                              err.message);
                ck_assert_uint_eq(sift_chain_n_stages(to), n0);
                ck_assert_uint_eq(sift__chain_state_digest(to), d0);
                /* a clone of it is a new object and may go anywhere */
                sift_grammar *copy = NULL;
                ck_assert_int_eq(sift_grammar_clone(g, &copy, NULL), SIFT_OK);
                ck_assert_int_eq(transfer(b, T_ADD, copy, NULL), SIFT_OK);
                ck_assert_int_eq(sift_chain_add_dist(a, NULL), SIFT_OK);
                ck_assert_int_eq(sift_chain_add_dist(b, NULL), SIFT_OK);
                sift_chain *ca = NULL;
                ck_assert_int_eq(sift_chain_clone(a, &ca, NULL), SIFT_OK);
                int32_t t;
                ck_assert_int_eq(sift_chain_sample(a, row, 3, &t, NULL), SIFT_OK);
                ck_assert_int_eq(t, 0);
                ck_assert_int_eq(sift_chain_sample(ca, row, 3, &t, NULL), SIFT_OK);
                ck_assert_int_eq(sift_chain_sample(b, row, 3, &t, NULL), SIFT_OK);
                sift_chain_free(ca);
                sift_chain_free(a);
                sift_chain_free(b);
            }
}
END_TEST

START_TEST(test_custom_user_data_owned_by_a_stage_is_refused_a_second_time)
{
    n_freed = 0;
    cu *u = cu_new(CU_PASS);
    sift_chain *c = tu_chain_new(3, NULL);
    sift_custom_stage vt = cu_vt("user");
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, NULL), SIFT_OK);
    sift_error err;
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, &err), SIFT_E_ARG);
    ck_assert_msg(strstr(err.message, "already owned by a chain") != NULL, "%s", err.message);
    ck_assert_uint_eq(sift_chain_n_stages(c), 1);
    /* user data without a free function is not owned: it may be shared */
    static int shared;
    sift_custom_stage nf = cu_vt("shared");
    nf.free = NULL;
    ck_assert_int_eq(sift_chain_add_custom(c, &nf, &shared, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_custom(c, &nf, &shared, NULL), SIFT_OK);
    sift_chain_free(c);
    ck_assert_int_eq(n_freed, 1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* A grammar's vocabulary size is checked against the row first         */
/* ------------------------------------------------------------------ */

static sift_grammar *abc_grammar(int lazy)
{
    const char *pieces[4] = {"a", "b", "c", ""};
    size_t lens[4] = {1, 1, 1, 0};
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, 4, pieces, lens, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 3, SIFT_TOKEN_EOG, NULL), SIFT_OK);
    sift_grammar *g = NULL;
    const char *text = "root ::= \"a\" [bc]*";
    ck_assert_int_eq(sift_grammar_new(&g, text, strlen(text), v, NULL, NULL), SIFT_OK);
    sift_vocab_free(v);
    if (lazy) {
        const char *words[1] = {"zz"};
        sift_lazy_params lp;
        sift_lazy_params_init(&lp);
        lp.words = words;
        lp.n_words = 1;
        ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
    }
    return g;
}

/* A 4-token grammar (check mode or a stage, eager or lazy) on rows of 3
 * and 6 tokens whose top token is below or above 4: SIFT_E_ARG naming the
 * sizes on every path, whatever the first draw, nothing changed. */
START_TEST(test_a_grammar_of_another_vocabulary_size_is_refused_on_every_path)
{
    const int32_t Vs[2] = {3, 6};
    for (int mode = 0; mode < 2; mode++)
        for (int lazy = 0; lazy < 2; lazy++)
            for (int vi = 0; vi < 2; vi++)
                for (int32_t top = 0; top < Vs[vi]; top++) {
                    int32_t V = Vs[vi];
                    sift_chain *c = tu_chain_new(4, NULL);
                    sift_grammar *g = abc_grammar(lazy);
                    if (mode)
                        ck_assert_int_eq(sift_chain_add_grammar(c, g, NULL), SIFT_OK);
                    else
                        ck_assert_int_eq(sift_chain_set_check_grammar(c, g, NULL), SIFT_OK);
                    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
                    float row[6];
                    sift_candidate pre[6];
                    for (int32_t i = 0; i < V; i++)
                        row[i] = i == top ? 10.0f : 0.0f;
                    pre[0].id = top;
                    pre[0].logit = 10.0f;
                    for (int32_t i = 0, j = 1; i < V; i++)
                        if (i != top) {
                            pre[j].id = i;
                            pre[j++].logit = 0.0f;
                        }
                    sift_slice sl = {V, V, pre, 0, NULL, 0, 0};
                    uint64_t r0[4], r1[4];
                    rng_of(c, r0);
                    for (int path = 0; path < 4; path++) {
                        sift_error err;
                        memset(&err, 0, sizeof err);
                        int32_t t = -1;
                        sift_token_prob out[6];
                        size_t n = 0;
                        sift_status st =
                            path == 0   ? sift_chain_sample(c, row, V, &t, &err)
                            : path == 1 ? sift_chain_distribution(c, row, V, out, 6, &n, &err)
                            : path == 2 ? sift_chain_sample_slice(c, &sl, &t, &err)
                                        : sift_chain_distribution_slice(c, &sl, out, 6, &n, &err);
                        ck_assert_msg(st == SIFT_E_ARG,
                                      "mode %d lazy %d V %d top %d path %d: status %d (%s)", mode,
                                      lazy, (int)V, (int)top, path, st, err.message);
                        ck_assert_msg(strstr(err.message, "4 tokens") != NULL, "%s", err.message);
                        ck_assert_int_eq(t, -1);
                    }
                    rng_of(c, r1);
                    ck_assert(memcmp(r0, r1, sizeof r0) == 0);
                    sift_chain_free(c);
                }
}
END_TEST

START_TEST(test_a_grammar_of_another_size_than_n_vocab_is_refused_when_added)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.n_vocab = 6;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    sift_grammar *g = abc_grammar(0);
    sift_error err;
    ck_assert_int_eq(sift_chain_add_grammar(c, g, &err), SIFT_E_ARG);
    ck_assert_msg(strstr(err.message, "4 tokens") != NULL, "%s", err.message);
    ck_assert_int_eq(sift_chain_set_check_grammar(c, g, &err), SIFT_E_ARG);
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    sift_grammar_free(g); /* still the caller's */
    sift_chain_free(c);
}
END_TEST

/* sift inspect runs the row step's own stage loop: after the stages
 * before the selector, its survivors are exactly the finite part of what
 * sift_chain_distribution reports, logits included, and neither call
 * moves the RNG. */
START_TEST(test_inspect_survivors_are_the_distributions_finite_support)
{
    enum { IV = 3000 };
    static float row[IV];
    static sift_candidate surv[IV];
    static sift_token_prob dist[IV];
    sift_chain *c = tu_chain_new(7, NULL);
    ck_assert_int_eq(sift_chain_add_top_k(c, 200, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_p(c, 0.95f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_min_p(c, 0.02f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.8f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    uint64_t r0[4], r1[4];
    rng_of(c, r0);
    for (int shape = 0; shape < TU_ROW__COUNT; shape++) {
        tu_rng r = {100 + (uint64_t)shape};
        tu_row(&r, row, IV, shape);
        size_t ns = 0, nd = 0;
        sift_error err;
        ck_assert_int_eq(sift_chain_survivors(c, row, IV, 4, surv, IV, &ns, &err), SIFT_OK);
        ck_assert_int_eq(sift_chain_distribution(c, row, IV, dist, IV, &nd, &err), SIFT_OK);
        size_t k = 0;
        for (size_t i = 0; i < nd && i < IV; i++) {
            if (!(dist[i].logit > -INFINITY))
                continue;
            ck_assert_uint_lt(k, ns);
            ck_assert_int_eq(surv[k].id, dist[i].id);
            ck_assert(surv[k].logit == dist[i].logit);
            k++;
        }
        ck_assert_uint_eq(k, ns);
    }
    rng_of(c, r1);
    ck_assert(memcmp(r0, r1, sizeof r0) == 0);
    sift_chain_free(c);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("chain");
    struct {
        const char *name;
        const TTest *tests[13];
    } groups[] = {
        {"lifecycle",
         {test_free_and_queries_of_null_are_no_ops, test_params_init_sets_the_documented_defaults,
          test_null_params_give_the_defaults, test_chain_new_rejects_a_null_out_pointer,
          test_chain_new_rejects_a_zero_or_oversized_struct_size,
          test_chain_new_rejects_limits_out_of_range}},
        {"stages",
         {test_adding_to_a_null_chain_is_an_argument_error,
          test_max_stages_limit_leaves_the_chain_unchanged,
          test_sampling_a_chain_without_stages_is_an_argument_error,
          test_sampling_without_a_final_selector_is_an_argument_error,
          test_a_selector_that_is_not_last_is_an_argument_error_naming_it,
          test_the_missing_selector_message_lists_every_selector,
          test_stage_names_and_classes_are_reported}},
        {"rows",
         {test_a_row_length_other_than_n_vocab_is_an_argument_error,
          test_a_row_of_length_zero_is_an_argument_error,
          test_a_row_longer_than_max_vocab_hits_the_limit}},
        {"clone",
         {test_clone_gives_identical_future_samples, test_clone_has_independent_state,
          test_clone_rejects_null_arguments}},
        {"reset",
         {test_reset_restores_the_initial_rng, test_reset_empties_the_history_of_every_stage}},
        {"strings",
         {test_status_str_is_never_null_and_distinct_for_every_code,
          test_class_str_names_every_class, test_version_macros_equal_the_run_time_version}},
        {"errors",
         {test_error_is_filled_completely_on_failure, test_error_is_untouched_on_success,
          test_a_null_error_pointer_is_accepted_everywhere,
          test_a_long_message_is_cut_at_a_utf8_boundary,
          test_a_long_custom_stage_name_stays_valid_utf8_in_messages}},
        {"custom",
         {test_custom_stage_with_an_unknown_abi_version_is_rejected,
          test_custom_stage_without_apply_or_with_a_bad_class_is_rejected,
          test_custom_stage_user_data_is_not_freed_when_add_fails,
          test_custom_stage_user_data_is_freed_with_the_chain,
          test_custom_stage_sees_candidates_in_canonical_order,
          test_custom_stage_may_shrink_reorder_and_lower,
          test_custom_stage_name_and_class_are_reported,
          test_custom_stage_growing_the_array_is_an_argument_error,
          test_custom_stage_writing_an_id_out_of_range_is_an_argument_error,
          test_custom_stage_writing_nan_or_pinf_is_a_row_value_error_naming_the_token,
          test_custom_stage_failure_returns_an_argument_error_with_nothing_changed,
          test_custom_stage_banning_everything_gives_no_candidate,
          test_custom_stage_banning_everything_is_named_though_a_second_call_would_not}},
        {"custom_clone",
         {test_clone_of_a_custom_stage_without_clone_is_a_state_error,
          test_clone_of_a_custom_stage_copies_its_user_data}},
        {"reentrancy", {test_calls_into_the_chain_from_apply_get_a_state_error}},
        {"no_candidate", {test_no_candidate_left_names_the_stage_that_banned_the_last_one}},
        {"custom_output",
         {test_custom_stage_output_may_not_repeat_or_invent_tokens,
          test_custom_stage_output_must_keep_its_declared_class}},
        {"grammar_size",
         {test_a_grammar_of_another_vocabulary_size_is_refused_on_every_path,
          test_a_grammar_of_another_size_than_n_vocab_is_refused_when_added}},
        {"ownership",
         {test_a_grammar_owned_by_a_chain_is_refused_by_every_transfer,
          test_custom_user_data_owned_by_a_stage_is_refused_a_second_time}},
        {"vocab",
         {test_vocab_stores_every_piece_including_empty_and_nul_bytes,
          test_vocab_rejects_bad_arguments, test_vocab_piece_rejects_null_and_out_of_range_ids,
          test_vocab_attributes_start_at_zero_and_are_validated}},
        {"distribution",
         {test_distribution_of_dist_is_the_softmax,
          test_distribution_sums_to_one_in_canonical_order_without_touching_the_rng,
          test_distribution_capacity_truncates_but_reports_the_full_count,
          test_survivors_are_what_the_first_stages_leave_in_canonical_order,
          test_distribution_of_greedy_puts_all_mass_on_the_selected_token}},
        {"accept",
         {test_accept_out_of_range_is_a_token_error_with_history_unchanged,
          test_accept_without_sample_is_allowed, test_accept_is_bounded_by_n_vocab_when_given}},
    };
    for (size_t g = 0; g < N(groups); g++) {
        TCase *tc = tcase_create(groups[g].name);
        for (size_t i = 0; i < N(groups[g].tests) && groups[g].tests[i]; i++)
            tcase_add_test(tc, groups[g].tests[i]);
        tcase_add_test(tc, test_inspect_survivors_are_the_distributions_finite_support);
        suite_add_tcase(s, tc);
    }
    return s;
}

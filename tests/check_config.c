/*
 * check_config.c - the configuration loader through the public API:
 * argument checks, the diagnostics API (every problem, sorted, GCC
 * format, the first error in sift_error), round trips (a config's chain
 * equals the chain the API builds: same stage names and classes, and the
 * same tokens, RNG state and stage state over many random rows and
 * seeds), the llama.cpp flat form against its explicit equivalent, the
 * loader's limits at and one past each limit (bytes, depth, anchors,
 * nodes, stages) and their cost on hostile inputs (BAD_INPUTS Y-05, Y-07,
 * Y-08, Y-09, P-16), files relative to the config, the grammar section,
 * locale independence (X-05), and the fail-the-Nth-allocation loop over
 * load + build (F-01).
 *
 * The cost of hostile inputs is bounded by counted work (allocator calls
 * and bytes, the place where reading stopped), never by the clock.
 *
 * The golden diagnostics of every Y-/P- row live in tests/data and are
 * checked by tests/config_golden.sh through the CLI.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <locale.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "oracle/oracle.h"

/* the config loader's work counter (src/config/config.c) */
uint64_t sift__cfg_work(const sift_config *cfg);
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static sift_status parse(const char *yaml, sift_config **cfg)
{
    sift_error err;
    return sift_config_parse(cfg, "t.yaml", yaml, strlen(yaml), NULL, &err);
}

static sift_config *parse_ok(const char *yaml)
{
    sift_config *cfg = NULL;
    sift_error err;
    sift_status st = sift_config_parse(&cfg, "t.yaml", yaml, strlen(yaml), NULL, &err);
    if (st != SIFT_OK)
        ck_abort_msg("config did not load: %s:%d:%d: %s", err.source, (int)err.line,
                     (int)err.column, err.message);
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

static int has_diag(const sift_config *cfg, const char *text)
{
    for (size_t i = 0; i < sift_config_n_diagnostics(cfg); i++)
        if (strstr(sift_config_diagnostic(cfg, i)->text, text))
            return 1;
    return 0;
}

/* Work is bounded by counting, never by the clock: an allocator that
 * counts the calls and bytes the loader asks for, and the place where a
 * diagnostic says reading stopped. */
typedef struct counting {
    long calls;
    size_t bytes, largest;
} counting;

static void *cn_alloc(void *user, size_t size)
{
    counting *c = user;
    c->calls++;
    c->bytes += size;
    if (size > c->largest)
        c->largest = size;
    return malloc(size);
}

static void cn_free(void *user, void *p)
{
    (void)user;
    free(p);
}

/* A vocabulary of V one- or two-byte tokens: the 95 printable ASCII
 * characters and "\n" first, then pairs of letters. */
static sift_vocab *make_vocab(int32_t V)
{
    char **pieces = calloc((size_t)V, sizeof *pieces);
    size_t *lens = calloc((size_t)V, sizeof *lens);
    ck_assert_ptr_nonnull(pieces);
    for (int32_t i = 0; i < V; i++) {
        pieces[i] = malloc(3);
        if (i < 95) {
            pieces[i][0] = (char)(32 + i);
            lens[i] = 1;
        } else if (i == 95) {
            pieces[i][0] = '\n';
            lens[i] = 1;
        } else {
            pieces[i][0] = (char)('a' + (i % 26));
            pieces[i][1] = (char)('a' + ((i / 26) % 26));
            lens[i] = 2;
        }
    }
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, V, (const char *const *)pieces, lens, NULL, NULL), SIFT_OK);
    for (int32_t i = 0; i < V; i++)
        free(pieces[i]);
    free(pieces);
    free(lens);
    return v;
}

/* Samples `steps` random rows of every shape through both chains and
 * asserts the same token, RNG state and stage state after every step. */
static void assert_same_behaviour(sift_chain *a, sift_chain *b, int32_t V, uint64_t seed, int steps)
{
    ck_assert_uint_eq(sift_chain_n_stages(a), sift_chain_n_stages(b));
    for (size_t i = 0; i < sift_chain_n_stages(a); i++) {
        ck_assert_str_eq(sift_chain_stage_name(a, i), sift_chain_stage_name(b, i));
        int64_t na = 0, nb = 0;
        ck_assert_int_eq(sift_chain_stage_class(a, i, &na), sift_chain_stage_class(b, i, &nb));
        ck_assert_int_eq(na, nb);
    }
    float *row = malloc((size_t)V * sizeof *row);
    tu_rng r = {seed};
    for (int s = 0; s < steps; s++) {
        tu_row(&r, row, V, (int)(s % TU_ROW__COUNT));
        int32_t ta = -1, tb = -1;
        sift_error ea, eb;
        sift_status sa = sift_chain_sample(a, row, V, &ta, &ea);
        sift_status sb = sift_chain_sample(b, row, V, &tb, &eb);
        ck_assert_int_eq(sa, sb);
        if (sa != SIFT_OK)
            continue;
        ck_assert_int_eq(ta, tb);
        uint64_t ra[4], rb[4];
        sift__chain_rng_state(a, ra);
        sift__chain_rng_state(b, rb);
        ck_assert(memcmp(ra, rb, sizeof ra) == 0);
        ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b, tb, NULL), SIFT_OK);
        ck_assert(sift__chain_state_digest(a) == sift__chain_state_digest(b));
    }
    free(row);
}

static sift_chain *api_chain(uint64_t seed, int32_t n_vocab)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = seed;
    p.n_vocab = n_vocab;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    return c;
}

static sift_chain *build(const sift_config *cfg, const sift_vocab *vocab, int32_t n_vocab)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.n_vocab = n_vocab;
    sift_chain *c = NULL;
    sift_error err;
    sift_status st = sift_config_build_chain(cfg, &p, vocab, &c, &err);
    if (st != SIFT_OK)
        ck_abort_msg("build failed: %s", err.message);
    return c;
}

/* ------------------------------------------------------------------ */
/* Arguments and the diagnostics API                                   */
/* ------------------------------------------------------------------ */

START_TEST(test_parse_and_load_reject_null_arguments)
{
    sift_config *cfg = (sift_config *)1;
    sift_error err;
    ck_assert_int_eq(sift_config_parse(NULL, "x", "a: 1", 4, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_config_parse(&cfg, "x", NULL, 4, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_null(cfg);
    ck_assert_int_eq(sift_config_load(&cfg, NULL, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_config_load(NULL, "x", NULL, &err), SIFT_E_ARG);
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_depth = 0;
    ck_assert_int_eq(sift_config_parse(&cfg, "x", "a: 1", 4, &p, &err), SIFT_E_ARG);
    sift_config_params_init(&p);
    p.struct_size = 0;
    ck_assert_int_eq(sift_config_parse(&cfg, "x", "a: 1", 4, &p, &err), SIFT_E_ARG);
    sift_chain *c = (sift_chain *)1;
    ck_assert_int_eq(sift_config_build_chain(NULL, NULL, NULL, &c, &err), SIFT_E_ARG);
    ck_assert_ptr_null(c);
    /* NULL config accessors are harmless */
    sift_config_free(NULL);
    ck_assert_uint_eq(sift_config_n_diagnostics(NULL), 0);
    ck_assert_ptr_null(sift_config_diagnostic(NULL, 0));
    ck_assert_int_eq(sift_config_seed(NULL, NULL), 0);
    ck_assert_ptr_null(sift_config_grammar_info(NULL));
}
END_TEST

START_TEST(test_every_problem_is_reported_sorted_with_the_first_in_err)
{
    const char *yaml = "chain:\n"
                       "  - top_p: 1.5\n"
                       "  - top_kk: 3\n"
                       "  - min_p: -1\n"
                       "  - dist\n"
                       "seed: x\n";
    sift_config *cfg = NULL;
    sift_error err;
    sift_status st = sift_config_parse(&cfg, "bad.yaml", yaml, strlen(yaml), NULL, &err);
    ck_assert_int_eq(st, SIFT_E_CONFIG_VALUE);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_uint_eq(sift_config_n_errors(cfg), 4);
    ck_assert_uint_eq(sift_config_n_diagnostics(cfg), 4);
    const sift_diagnostic *d = sift_config_diagnostic(cfg, 0);
    ck_assert_str_eq(d->text, "bad.yaml:2:12: error: top_p must be a number in [0, 1], got 1.5");
    ck_assert_str_eq(d->message, "top_p must be a number in [0, 1], got 1.5");
    ck_assert_int_eq(d->line, 2);
    ck_assert_int_eq(d->column, 12);
    ck_assert_int_eq(d->offset, 18);
    ck_assert_int_eq(d->code, SIFT_E_CONFIG_VALUE);
    ck_assert_int_eq(d->severity, SIFT_SEVERITY_ERROR);
    for (size_t i = 1; i < 4; i++) {
        const sift_diagnostic *a = sift_config_diagnostic(cfg, i - 1),
                              *b = sift_config_diagnostic(cfg, i);
        ck_assert(a->line < b->line || (a->line == b->line && a->column <= b->column));
    }
    ck_assert_int_eq(sift_config_diagnostic(cfg, 1)->code, SIFT_E_CONFIG_KEY);
    ck_assert_int_eq(sift_config_diagnostic(cfg, 3)->code, SIFT_E_CONFIG_TYPE);
    ck_assert_ptr_null(sift_config_diagnostic(cfg, 4));
    /* err holds the first error, with its place */
    ck_assert_int_eq(err.code, SIFT_E_CONFIG_VALUE);
    ck_assert_str_eq(err.source, "bad.yaml");
    ck_assert_int_eq(err.line, 2);
    ck_assert_int_eq(err.column, 12);
    ck_assert_str_eq(err.message, "top_p must be a number in [0, 1], got 1.5");
    /* an invalid config builds nothing */
    sift_chain *c = (sift_chain *)1;
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_E_STATE);
    ck_assert_ptr_null(c);
    ck_assert_ptr_null(sift_config_grammar_info(cfg));
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_warnings_do_not_make_a_config_invalid)
{
    sift_config *cfg = parse_ok("chain:\n  - top_p: 0.9\n  - top_k: 40\n  - dist\n");
    ck_assert_uint_eq(sift_config_n_errors(cfg), 0);
    ck_assert_uint_eq(sift_config_n_diagnostics(cfg), 1);
    const sift_diagnostic *d = sift_config_diagnostic(cfg, 0);
    ck_assert_int_eq(d->severity, SIFT_SEVERITY_WARNING);
    ck_assert_int_eq(d->code, SIFT_OK);
    ck_assert_ptr_nonnull(strstr(d->text, "t.yaml:2:5: warning: top_p before top_k"));
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_min_p_before_top_k_is_reported_as_commuting)
{
    sift_config *cfg = parse_ok("chain: [min_p: 0.05, top_k: 40, dist]\n");
    ck_assert(has_diag(cfg, "the two commute"));
    sift_config_free(cfg);
}
END_TEST

static size_t n_diag(const sift_config *cfg, const char *text)
{
    size_t k = 0;
    for (size_t i = 0; i < sift_config_n_diagnostics(cfg); i++)
        k += strstr(sift_config_diagnostic(cfg, i)->text, text) != NULL;
    return k;
}

/* The top_k warning asks the plan of the built chain: epsilon before
 * top_k is decided per step by its certificate (a CERTIFIED plan), so it
 * is not said to read the whole row; penalties before top_k only add to
 * the exact k, and get no warning. */
START_TEST(test_a_threshold_the_certificate_decides_before_top_k_is_not_called_whole_row)
{
    sift_config *cfg = parse_ok("chain: [epsilon: 0.001, top_k: 40, dist]\n");
    ck_assert_uint_eq(sift_config_n_diagnostics(cfg), 1);
    ck_assert(has_diag(cfg, "t.yaml:1:9: warning: epsilon before top_k leaves the plan certified"));
    ck_assert(!has_diag(cfg, "whole row;"));
    sift_config_free(cfg);
    cfg = parse_ok("chain: [penalties: {last_n: 64, repeat: 1.1}, top_k: 40, dist]\n");
    ck_assert_uint_eq(sift_config_n_diagnostics(cfg), 0);
    sift_config_free(cfg);
}
END_TEST

/* Each stage before top_k that needs the whole row on its own is named
 * (the plan blames the first; without it, the next), then the stage that
 * leaves the plan certified; stages after top_k are not. */
START_TEST(test_each_stage_before_top_k_that_keeps_the_plan_from_a_slice_is_named)
{
    sift_config *cfg = parse_ok(
        "chain: [top_n_sigma: 1.0, typical: 0.9, min_p: 0.1, top_k: 40, eta: 0.01, dist]\n");
    ck_assert_uint_eq(n_diag(cfg, "before top_k"), 3);
    ck_assert(has_diag(cfg, "t.yaml:1:9: warning: top_n_sigma before top_k makes every step read "
                            "the whole row"));
    ck_assert(has_diag(cfg, "t.yaml:1:27: warning: typical before top_k makes every step read"));
    ck_assert(has_diag(cfg, "t.yaml:1:41: warning: min_p before top_k leaves the plan certified"));
    sift_config_free(cfg);
    /* top_p first is certified by the tail mass (docs/analyzer.md, "Tail
     * mass"): named as leaving the plan certified */
    cfg = parse_ok("chain: [top_p: 0.9, top_k: 40, dist]\n");
    ck_assert_uint_eq(n_diag(cfg, "before top_k"), 1);
    ck_assert(has_diag(cfg, "t.yaml:1:9: warning: top_p before top_k leaves the plan certified"));
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_truncation_before_greedy_is_reported_as_useless)
{
    sift_config *cfg = parse_ok("chain: [top_k: 40, temperature: 0.5, greedy]\n");
    ck_assert(has_diag(cfg, "top_k before greedy cannot change the result"));
    ck_assert(has_diag(cfg, "temperature before greedy cannot change the result"));
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_max_diagnostics_stops_collecting)
{
    char yaml[4096] = "chain:\n";
    for (int i = 0; i < 50; i++)
        strcat(yaml, "  - top_p: 2\n");
    strcat(yaml, "  - dist\n");
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_diagnostics = 10;
    sift_config *cfg = NULL;
    ck_assert_int_eq(sift_config_parse(&cfg, "t.yaml", yaml, strlen(yaml), &p, NULL),
                     SIFT_E_CONFIG_VALUE);
    ck_assert_uint_eq(sift_config_n_errors(cfg), 10);
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_seed_vocab_size_and_accessors)
{
    sift_config *cfg = parse_ok("seed: 18446744073709551615\nvocab_size: 151936\nchain: [dist]\n");
    uint64_t seed = 0;
    ck_assert_int_eq(sift_config_seed(cfg, &seed), 1);
    ck_assert(seed == UINT64_MAX);
    ck_assert_int_eq(sift_config_vocab_size(cfg), 151936);
    ck_assert_ptr_null(sift_config_vocab_path(cfg));
    ck_assert_ptr_null(sift_config_grammar_info(cfg));
    sift_config_free(cfg);
    cfg = parse_ok("chain: [dist]\n");
    ck_assert_int_eq(sift_config_seed(cfg, &seed), 0);
    ck_assert_int_eq(sift_config_vocab_size(cfg), 0);
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_numbers_parse_without_the_locale)
{
    /* X-05: a host that switched LC_NUMERIC to a ',' locale. */
    const char *locs[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
    const char *set = NULL;
    for (size_t i = 0; i < N(locs) && !set; i++)
        set = setlocale(LC_NUMERIC, locs[i]);
    sift_config *cfg = parse_ok("seed: 1\nchain: [top_p: 0.25, dist]\n");
    sift_chain *a = build(cfg, NULL, 0), *b = api_chain(1, 0);
    ck_assert_int_eq(sift_chain_add_top_p(b, 0.25f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(b, NULL), SIFT_OK);
    assert_same_behaviour(a, b, 64, 5, 200);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_config_free(cfg);
    setlocale(LC_NUMERIC, "C");
}
END_TEST

/* Every spelling YAML 1.2's core schema and C's %g, %e and %f print for a
 * float is that float: -0 is 0, 1e+10 is 1e10, FLT_MAX at %.8g (which is
 * above FLT_MAX as a real number) rounds to FLT_MAX; just above half an ulp
 * more is out of range. */
START_TEST(test_numbers_as_yaml_and_c_print_them_are_numbers)
{
    struct {
        const char *text;
        float want;
    } ok[] = {
        {"-0", 0.0f},
        {"-0.0", 0.0f},
        {"+0", 0.0f},
        {"0.", 0.0f},
        {".5", 0.5f},
        {"1e+10", 1e10f},
        {"1E-05", 1e-5f},
        {"1.5e-05", 1.5e-5f},
        {"3.4028235e38", FLT_MAX},
        {"3.40282e+38", 3.40282e38f},
        {"-3.4028235e+38", -FLT_MAX},
        {"340282346638528859811704183484516925440.000000", FLT_MAX},
        {"1e-50", 0.0f},
        {"2", 2.0f},
    };
    char yaml[256];
    for (size_t i = 0; i < N(ok); i++) {
        snprintf(yaml, sizeof yaml, "chain: [top_n_sigma: %s, dist]\n", ok[i].text);
        sift_config *cfg = parse_ok(yaml);
        sift_chain *a = build(cfg, NULL, 0), *b = api_chain(0, 0);
        ck_assert_int_eq(sift_chain_add_top_n_sigma(b, ok[i].want, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(b, NULL), SIFT_OK);
        ck_assert_msg(sift__chain_state_digest(a) == sift__chain_state_digest(b), "%s", ok[i].text);
        assert_same_behaviour(a, b, 64, 7, 20);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_config_free(cfg);
    }
    sift_config *cfg = NULL;
    const char *bad[] = {"3.4028236e38", "-3.5e38", "1e39"};
    for (size_t i = 0; i < N(bad); i++) {
        snprintf(yaml, sizeof yaml, "chain: [top_n_sigma: %s, dist]\n", bad[i]);
        ck_assert_int_eq(parse(yaml, &cfg), SIFT_E_CONFIG_VALUE);
        ck_assert(has_diag(cfg, "out of range"));
        sift_config_free(cfg);
    }
    /* -0 is 0 for integers and seeds too */
    cfg = parse_ok("seed: -0\nchain: [top_k: -0, dist]\n");
    uint64_t seed = 1;
    ck_assert_int_eq(sift_config_seed(cfg, &seed), 1);
    ck_assert(seed == 0);
    sift_config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Round trips                                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_production_config_builds_the_chain_the_api_builds)
{
    const char *yaml = "seed: 1234\n"
                       "chain:\n"
                       "  - penalties: {last_n: 64, repeat: 1.1, frequency: 0.1, presence: 0.2}\n"
                       "  - top_k: 20\n"
                       "  - top_p: 0.95\n"
                       "  - min_p: 0.05\n"
                       "  - temperature: 0.8\n"
                       "  - dist\n";
    sift_config *cfg = parse_ok(yaml);
    for (uint64_t seed = 0; seed < 4; seed++) {
        sift_chain *a = build(cfg, NULL, 0);
        sift_chain *b = api_chain(1234, 0);
        ck_assert_int_eq(sift_chain_add_penalties(b, 64, 1.1f, 0.1f, 0.2f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(b, 20, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_p(b, 0.95f, 0, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_min_p(b, 0.05f, 0, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_temp(b, 0.8f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(b, NULL), SIFT_OK);
        assert_same_behaviour(a, b, seed & 1 ? 2000 : 97, seed * 77 + 1, 300);
        sift_chain_free(a);
        sift_chain_free(b);
    }
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_every_stage_form_builds_the_api_chain)
{
    const char *yaml = "seed: 99\n"
                       "vocab_size: 500\n"
                       "chain:\n"
                       "  - logit_bias: {3: -.inf, 7: 2.5, 11: false, 12: -1}\n"
                       "  - dry: {multiplier: 0.8, base: 1.75, allowed_length: 2, last_n: 256,\n"
                       "          breakers: [\"\\n\", \":\"]}\n"
                       "  - penalties: 1.2\n"
                       "  - top_n_sigma: 3\n"
                       "  - top_k: {k: 50, ties: true}\n"
                       "  - typical: {p: 0.9, min_keep: 2}\n"
                       "  - top_p: {p: 0.95, min_keep: 1}\n"
                       "  - min_p: {p: 0.02, min_keep: 3}\n"
                       "  - xtc: {probability: 0.5, threshold: 0.1, min_keep: 1}\n"
                       "  - temperature: {temp: 0.9, delta: 0.3, exponent: 1.5}\n"
                       "  - dist: {order: id}\n";
    sift_config *cfg = parse_ok(yaml);
    sift_vocab *vocab = make_vocab(500);
    sift_chain *a = build(cfg, vocab, 0);
    sift_chain *b = api_chain(99, 500);
    sift_bias bias[] = {{3, -INFINITY}, {7, 2.5f}, {11, -INFINITY}, {12, -1.0f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(b, bias, 4, NULL), SIFT_OK);
    const char *br[] = {"\n", ":"};
    size_t brl[] = {1, 1};
    sift_dry_params dp = {sizeof(sift_dry_params), 0.8f, 1.75f, 2, 256, br, brl, 2};
    ck_assert_int_eq(sift_chain_add_dry(b, &dp, vocab, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(b, 64, 1.2f, 0, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_n_sigma(b, 3.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k_ties(b, 50, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_typical(b, 0.9f, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_p(b, 0.95f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_min_p(b, 0.02f, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_xtc(b, 0.5f, 0.1f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp_ext(b, 0.9f, 0.3f, 1.5f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist_id_order(b, NULL), SIFT_OK);
    assert_same_behaviour(a, b, 500, 31, 400);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_vocab_free(vocab);
    sift_config_free(cfg);
}
END_TEST

/* The probability cutoffs in their scalar and mapping forms, against the
 * same calls through the API; values out of range are placed errors. */
START_TEST(test_probability_cutoffs_build_the_api_chain)
{
    sift_config *cfg = parse_ok("seed: 7\nvocab_size: 400\n"
                                "chain: [epsilon: 3e-4, epsilon: {epsilon: 0.02, min_keep: 3},\n"
                                "        eta: 2e-3, eta: {eta: 0.1, min_keep: 2}, dist]\n");
    sift_chain *a = build(cfg, NULL, 0), *b = api_chain(7, 400);
    ck_assert_int_eq(sift_chain_add_epsilon(b, 3e-4f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_epsilon(b, 0.02f, 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_eta(b, 2e-3f, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_eta(b, 0.1f, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(b, NULL), SIFT_OK);
    assert_same_behaviour(a, b, 400, 77, 300);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_config_free(cfg);
    const char *bad[] = {
        "chain: [epsilon: 1.5, dist]\n",
        "chain: [epsilon: {epsilon: -0.1}, dist]\n",
        "chain: [epsilon: {epsilon: 0.1, min_keep: -1}, dist]\n",
        "chain: [epsilon, dist]\n",
        "chain: [eta: 2, dist]\n",
        "chain: [adaptive_p: 1.5]\n",
        "chain: [adaptive_p: {target: 0.5, decay: 1}]\n",
        "chain: [adaptive_p, dist]\n",
        "chain: [eta: {eta: 0.1, min_keep: 0.5}, dist]\n",
    };
    for (size_t i = 0; i < N(bad); i++) {
        sift_config *c = NULL;
        ck_assert_msg(parse(bad[i], &c) != SIFT_OK, "%s loaded", bad[i]);
        sift_config_free(c);
    }
}
END_TEST

START_TEST(test_selectors_build_the_api_chain)
{
    /* adaptive_p: bare (target 0.5, decay 0.9), scalar and mapping */
    const char *ap[] = {"seed: 5\nchain: [adaptive_p]\n", "seed: 5\nchain: [adaptive_p: 0.5]\n",
                        "seed: 5\nchain: [adaptive_p: {target: 0.3, decay: 0.95}]\n"};
    for (size_t i = 0; i < N(ap); i++) {
        sift_config *cfg = parse_ok(ap[i]);
        sift_chain *a = build(cfg, NULL, 0), *b = api_chain(5, 0);
        ck_assert_int_eq(
            sift_chain_add_adaptive_p(b, i < 2 ? 0.5f : 0.3f, i < 2 ? 0.9f : 0.95f, NULL), SIFT_OK);
        assert_same_behaviour(a, b, 300, 2000 + i, 200);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_config_free(cfg);
    }
    struct {
        const char *yaml;
        int kind;
    } cases[] = {
        {"seed: 5\nvocab_size: 300\nchain: [greedy]\n", 0},
        {"seed: 5\nvocab_size: 300\nchain: [mirostat]\n", 1},
        {"seed: 5\nvocab_size: 300\nchain: [mirostat: {tau: 3, eta: 0.2, m: 50}]\n", 2},
        {"seed: 5\nvocab_size: 300\nchain: [temperature: 0.7, mirostat_v2: 4]\n", 3},
        {"seed: 5\nvocab_size: 300\nchain: [temperature: 0, dist]\n", 4},
    };
    for (size_t i = 0; i < N(cases); i++) {
        sift_config *cfg = parse_ok(cases[i].yaml);
        sift_chain *a = build(cfg, NULL, 0), *b = api_chain(5, 300);
        switch (cases[i].kind) {
        case 0: ck_assert_int_eq(sift_chain_add_greedy(b, NULL), SIFT_OK); break;
        case 1: ck_assert_int_eq(sift_chain_add_mirostat(b, 300, 5, 0.1f, 100, NULL), 0); break;
        case 2: ck_assert_int_eq(sift_chain_add_mirostat(b, 300, 3, 0.2f, 50, NULL), 0); break;
        case 3:
            ck_assert_int_eq(sift_chain_add_temp(b, 0.7f, NULL), 0);
            ck_assert_int_eq(sift_chain_add_mirostat_v2(b, 4, 0.1f, NULL), 0);
            break;
        case 4:
            ck_assert_int_eq(sift_chain_add_temp(b, 0, NULL), 0);
            ck_assert_int_eq(sift_chain_add_dist(b, NULL), 0);
            break;
        }
        assert_same_behaviour(a, b, 300, 1000 + i, 200);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_config_free(cfg);
    }
}
END_TEST

START_TEST(test_flat_llama_defaults_build_the_explicit_default_chain)
{
    sift_config *flat = parse_ok("seed: 42\ntop_k: 40\n");
    sift_config *expl = parse_ok("seed: 42\n"
                                 "chain: [top_k: 40, top_p: 0.95, min_p: 0.05, temperature: 0.8, "
                                 "dist]\n");
    for (uint64_t s = 0; s < 3; s++) {
        sift_chain *a = build(flat, NULL, 0), *b = build(expl, NULL, 0);
        assert_same_behaviour(a, b, s ? 1500 : 120, s + 9, 300);
        sift_chain_free(a);
        sift_chain_free(b);
    }
    sift_config_free(flat);
    sift_config_free(expl);
}
END_TEST

START_TEST(test_flat_forms_build_their_explicit_equivalents)
{
    struct {
        const char *flat, *explicit_;
    } cases[] = {
        /* every sampler of the default order switched on */
        {"seed: 3\nrepeat_penalty: 1.1\nrepeat_last_n: 32\nfrequency_penalty: 0.1\n"
         "dry_multiplier: 0.5\ndry_penalty_last_n: 128\ntop_n_sigma: 2\ntypical_p: 0.9\n"
         "xtc_probability: 0.3\nxtc_threshold: 0.2\nmin_keep: 2\ntemp: 0.7\n",
         "seed: 3\nchain:\n  - penalties: {last_n: 32, repeat: 1.1, frequency: 0.1}\n"
         "  - dry: {multiplier: 0.5, last_n: 128}\n  - top_n_sigma: 2\n  - top_k: 40\n"
         "  - typical: {p: 0.9, min_keep: 2}\n  - top_p: {p: 0.95, min_keep: 2}\n"
         "  - min_p: {p: 0.05, min_keep: 2}\n"
         "  - xtc: {probability: 0.3, threshold: 0.2, min_keep: 2}\n"
         "  - temperature: 0.7\n  - dist\n"},
        /* a custom order, as a string and as a list */
        {"seed: 4\nsamplers: \"temperature; top_k;min_p\"\ntemp: 1.3\n",
         "seed: 4\nchain: [temperature: 1.3, top_k: 40, min_p: 0.05, dist]\n"},
        {"seed: 4\nsamplers: [top-p, top-k]\n", "seed: 4\nchain: [top_p: 0.95, top_k: 40, dist]\n"},
        /* dynamic temperature; temp <= 0 is greedy masking */
        {"seed: 6\ndynatemp_range: 0.5\ndynatemp_exponent: 2\n",
         "seed: 6\nchain: [top_k: 40, top_p: 0.95, min_p: 0.05,\n"
         "  temperature: {temp: 0.8, delta: 0.5, exponent: 2}, dist]\n"},
        {"seed: 6\ntemp: 0\n",
         "seed: 6\nchain: [top_k: 40, top_p: 0.95, min_p: 0.05, temperature: 0, dist]\n"},
        /* mirostat replaces the list */
        {"seed: 8\nmirostat: 2\nmirostat_tau: 4\nmirostat_eta: 0.2\n",
         "seed: 8\nchain: [temperature: 0.8, mirostat_v2: {tau: 4, eta: 0.2}]\n"},
        {"seed: 8\nvocab_size: 700\nmirostat: 1\ntemp: 1\n",
         "seed: 8\nvocab_size: 700\nchain: [mirostat: {tau: 5, eta: 0.1, m: 100}]\n"},
    };
    sift_vocab *vocab = make_vocab(700);
    for (size_t i = 0; i < N(cases); i++) {
        sift_config *f = parse_ok(cases[i].flat), *e = parse_ok(cases[i].explicit_);
        sift_chain *a = build(f, vocab, 700), *b = build(e, vocab, 700);
        assert_same_behaviour(a, b, 700, 500 + i, 250);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_config_free(f);
        sift_config_free(e);
    }
    sift_vocab_free(vocab);
}
END_TEST

/* llama-server's /completion spellings build the chain their common
 * spellings build: temperature, a flat logit_bias (pairs, quoted ids,
 * false), grammar as a string, -1 windows with n_ctx, samplers as
 * characters. */
START_TEST(test_llama_server_request_keys_build_their_explicit_equivalents)
{
    struct {
        const char *flat, *explicit_;
    } cases[] = {
        {"{\"seed\": 5, \"temperature\": 0.6}",
         "seed: 5\nchain: [top_k: 40, top_p: 0.95, min_p: 0.05, temperature: 0.6, dist]\n"},
        {"{\"seed\": 5, \"logit_bias\": [[3, 1.5], [\"7\", false], [9, -2]], \"top_k\": 0,"
         " \"top_p\": 1, \"min_p\": 0, \"temperature\": 1}",
         "seed: 5\nchain: [logit_bias: {3: 1.5, 7: -.inf, 9: -2}, dist]\n"},
        {"{\"seed\": 5, \"logit_bias\": {\"3\": 1.5, \"7\": false}, \"top_k\": 7}",
         "seed: 5\nchain: [logit_bias: {3: 1.5, 7: -.inf}, top_k: 7, top_p: 0.95, min_p: 0.05,"
         " temperature: 0.8, dist]\n"},
        {"{\"seed\": 5, \"n_ctx\": 96, \"repeat_last_n\": -1, \"repeat_penalty\": 1.2,"
         " \"dry_multiplier\": 0.5, \"samplers\": \"edkt\"}",
         "seed: 5\nchain: [penalties: {last_n: 96, repeat: 1.2},"
         " dry: {multiplier: 0.5, last_n: 96}, top_k: 40, temperature: 0.8, dist]\n"},
        {"{\"seed\": 5, \"logit_bias\": [], \"grammar\": \"\", \"json_schema\": null,"
         " \"ignore_eos\": false, \"stream\": true, \"n_predict\": 8}",
         "seed: 5\nchain: [top_k: 40, top_p: 0.95, min_p: 0.05, temperature: 0.8, dist]\n"},
    };
    sift_vocab *vocab = make_vocab(700);
    for (size_t i = 0; i < N(cases); i++) {
        sift_config *f = parse_ok(cases[i].flat), *e = parse_ok(cases[i].explicit_);
        sift_chain *a = build(f, vocab, 700), *b = build(e, vocab, 700);
        assert_same_behaviour(a, b, 700, 900 + i, 100);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_config_free(f);
        sift_config_free(e);
    }
    sift_vocab_free(vocab);
}
END_TEST

/* llama-server's ignore_eos: a min_tokens stage for the whole generation
 * right after the logit biases, banning the vocabulary's
 * end-of-generation ids; adaptive_p named in samplers: the final
 * selector in place of dist, from adaptive_target and adaptive_decay
 * (clamped as llama.cpp clamps it), dist when the target is negative. */
START_TEST(test_flat_ignore_eos_and_adaptive_p_build_their_explicit_equivalents)
{
    struct {
        const char *flat, *explicit_;
    } cases[] = {
        {"{\"seed\": 5, \"ignore_eos\": true, \"logit_bias\": [[3, 1.5]]}",
         "seed: 5\nchain: [logit_bias: {3: 1.5}, min_tokens: -1, top_k: 40, top_p: 0.95,"
         " min_p: 0.05, temperature: 0.8, dist]\n"},
        {"{\"seed\": 5, \"mirostat\": 2, \"ignore_eos\": true}",
         "seed: 5\nchain: [min_tokens: -1, temperature: 0.8, mirostat_v2]\n"},
        {"{\"seed\": 5, \"samplers\": \"top_k;min_p;adaptive_p;temperature\","
         " \"adaptive_target\": 0.3, \"adaptive_decay\": 1.5}",
         "seed: 5\nchain: [top_k: 40, min_p: 0.05, temperature: 0.8,"
         " adaptive_p: {target: 0.3, decay: 0.99}]\n"},
        {"{\"seed\": 5, \"samplers\": \"kpa\", \"adaptive_target\": 0, \"adaptive_decay\": -1,"
         " \"ignore_eos\": true}",
         "seed: 5\nchain: [min_tokens: -1, top_k: 40, top_p: 0.95,"
         " adaptive_p: {target: 0, decay: 0}]\n"},
        {"seed: 5\nsamplers: [adaptive-p, top_k]\nadaptive_target: 1\n",
         "seed: 5\nchain: [top_k: 40, adaptive_p: {target: 1, decay: 0.9}]\n"},
        /* off: a negative target with adaptive_p named, a target without */
        {"seed: 5\nsamplers: \"ka\"\nadaptive_target: -7\n", "seed: 5\nchain: [top_k: 40, dist]\n"},
        {"seed: 5\nsamplers: \"k\"\nadaptive_target: 0.5\n", "seed: 5\nchain: [top_k: 40, dist]\n"},
        {"seed: 5\nmirostat: 2\nsamplers: [adaptive_p]\nadaptive_target: 0.4\n",
         "seed: 5\nchain: [temperature: 0.8, mirostat_v2]\n"},
    };
    sift_vocab *vocab = make_vocab(700);
    ck_assert_int_eq(sift_vocab_set_attr(vocab, 2, SIFT_TOKEN_EOG, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(vocab, 650, SIFT_TOKEN_EOG, NULL), SIFT_OK);
    for (size_t i = 0; i < N(cases); i++) {
        sift_config *f = parse_ok(cases[i].flat), *e = parse_ok(cases[i].explicit_);
        sift_chain *a = build(f, vocab, 700), *b = build(e, vocab, 700);
        assert_same_behaviour(a, b, 700, 1100 + i, 150);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_config_free(f);
        sift_config_free(e);
    }
    /* the ban is there: both end-of-generation ids, from the first step */
    sift_config *f = parse_ok("{\"ignore_eos\": true, \"logit_bias\": [[1, 2]]}");
    sift_chain *a = build(f, vocab, 700);
    ck_assert_str_eq(sift_chain_stage_name(a, 1), "min_tokens");
    int64_t n = 0;
    ck_assert_int_eq(sift_chain_stage_class(a, 1, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 2);
    sift_chain_free(a);
    sift_config_free(f);
    sift_vocab_free(vocab);
}
END_TEST

/* ignore_eos needs the vocabulary's end-of-generation ids: the config
 * loads without one (as DRY's breakers do), and the build without one
 * fails at the key, naming ignore_eos. */
START_TEST(test_flat_ignore_eos_without_a_vocabulary_fails_at_build_naming_it)
{
    sift_config *f = parse_ok("{\"seed\": 1,\n \"ignore_eos\": true}");
    sift_chain_params p;
    sift_chain_params_init(&p);
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_eq(sift_config_build_chain(f, &p, NULL, &c, &err), SIFT_E_ARG);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(err.line, 2);
    ck_assert_int_eq(err.column, 16);
    ck_assert_ptr_nonnull(strstr(err.message, "ignore_eos"));
    sift_config_free(f);
}
END_TEST

START_TEST(test_llama_server_grammar_string_is_a_check_mode_grammar)
{
    sift_config *cfg = parse_ok("{\"grammar\": \"root ::= [a-z]+\", \"top_k\": 4}");
    const sift_config_grammar *g = sift_config_grammar_info(cfg);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(g->mode, SIFT_GRAMMAR_CHECK);
    ck_assert_str_eq(g->root, "root");
    ck_assert_int_eq((int)g->length, 15);
    ck_assert_int_eq(g->line, 1);
    ck_assert_int_eq(g->column, 14);
    sift_config_free(cfg);
}
END_TEST

/* -1 and 4294967295 are llama.cpp's random seed in the flat form: loaded
 * with a warning, no config seed, and two chains get different seeds. */
START_TEST(test_llama_random_seed_is_accepted_with_a_warning_and_varies)
{
    const char *yamls[] = {"seed: -1\ntop_k: 3\n", "seed: 4294967295\ntop_k: 3\n"};
    for (size_t i = 0; i < N(yamls); i++) {
        sift_config *cfg = parse_ok(yamls[i]);
        ck_assert(has_diag(cfg, "warning: seed"));
        ck_assert(has_diag(cfg, "not reproducible"));
        ck_assert_int_eq(sift_config_seed(cfg, NULL), 0);
        sift_chain *a = build(cfg, NULL, 0), *b = build(cfg, NULL, 0);
        uint64_t ra[4], rb[4];
        sift__chain_rng_state(a, ra);
        sift__chain_rng_state(b, rb);
        ck_assert(memcmp(ra, rb, sizeof ra) != 0);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_config_free(cfg);
    }
    /* in the chain form 4294967295 is a seed like any other, -1 an error */
    sift_config *cfg = parse_ok("seed: 4294967295\nchain: [dist]\n");
    uint64_t seed = 0;
    ck_assert_int_eq(sift_config_seed(cfg, &seed), 1);
    ck_assert(seed == 4294967295u);
    sift_config_free(cfg);
    ck_assert_int_eq(parse("seed: -1\nchain: [dist]\n", &cfg), SIFT_E_CONFIG_VALUE);
    sift_config_free(cfg);
}
END_TEST

/* Whatever a sift_chain_add_* refuses, loading refuses at the stage's
 * place with the API's own message: the build's judgements run at load. */
START_TEST(test_load_refuses_what_the_builder_refuses_with_its_message)
{
    sift_chain *c = api_chain(0, 0);
    sift_error api;
    ck_assert_int_eq(sift_chain_add_penalties(c, 64, 1e-38f, 3e38f, 3e38f, &api), SIFT_E_ARG);
    sift_chain_free(c);
    sift_config *cfg = NULL;
    ck_assert_int_eq(parse("chain:\n  - top_k: 3\n"
                           "  - penalties: {last_n: 64, repeat: 1e-38, frequency: 3e38,"
                           " presence: 3e38}\n  - dist\n",
                           &cfg),
                     SIFT_E_CONFIG_VALUE);
    ck_assert_uint_eq(sift_config_n_errors(cfg), 1);
    const sift_diagnostic *d = sift_config_diagnostic(cfg, 0);
    ck_assert_int_eq(d->line, 3);
    ck_assert_int_eq(d->column, 5);
    ck_assert_ptr_nonnull(strstr(d->message, api.message));
    ck_assert_ptr_nonnull(strstr(d->message, "stage 2"));
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_seed_comes_from_the_config_and_vocab_size_from_it_when_unset)
{
    sift_config *cfg = parse_ok("seed: 77\nvocab_size: 50\nchain: [dist]\n");
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 1;
    sift_chain *a = NULL, *b = api_chain(77, 50);
    ck_assert_int_eq(sift_config_build_chain(cfg, &p, NULL, &a, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(b, NULL), SIFT_OK);
    assert_same_behaviour(a, b, 50, 3, 50);
    /* n_vocab came from vocab_size: a row of another length is refused */
    float row[51] = {0};
    int32_t tok;
    ck_assert_int_eq(sift_chain_sample(a, row, 51, &tok, NULL), SIFT_E_ARG);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_dry_with_breakers_needs_a_vocabulary_at_build)
{
    sift_config *cfg = parse_ok("chain: [dry: 0.8, dist]\n");
    sift_chain *c = (sift_chain *)1;
    sift_error err;
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_E_ARG);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err.message, "no vocabulary"));
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_max_stages_of_the_chain_params_applies_at_build)
{
    sift_config *cfg = parse_ok("chain: [top_k: 4, top_k: 3, dist]\n");
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.max_stages = 2;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_config_build_chain(cfg, &p, NULL, &c, NULL), SIFT_E_LIMIT);
    ck_assert_ptr_null(c);
    sift_config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Limits and hostile inputs                                           */
/* ------------------------------------------------------------------ */

static sift_status parse_with(const char *yaml, size_t len, const sift_config_params *p,
                              sift_config **cfg)
{
    return sift_config_parse(cfg, "t.yaml", yaml, len, p, NULL);
}

START_TEST(test_size_limit_accepts_max_bytes_and_rejects_one_more)
{
    char buf[200];
    memset(buf, ' ', sizeof buf);
    memcpy(buf, "chain: [dist]\n#", 15);
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_bytes = 100;
    sift_config *cfg = NULL;
    ck_assert_int_eq(parse_with(buf, 100, &p, &cfg), SIFT_OK);
    sift_config_free(cfg);
    ck_assert_int_eq(parse_with(buf, 101, &p, &cfg), SIFT_E_CONFIG_LIMIT);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_str_eq(sift_config_diagnostic(cfg, 0)->text,
                     "t.yaml: error: config is 101 bytes; max 100");
    sift_config_free(cfg);
}
END_TEST

static char *nested(int depth)
{
    /* "chain: [[[...]]]" is depth + 1 collections (the root mapping) */
    char *s = malloc((size_t)depth * 2 + 32);
    strcpy(s, "chain: ");
    size_t k = strlen(s);
    for (int i = 0; i < depth; i++)
        s[k++] = '[';
    for (int i = 0; i < depth; i++)
        s[k++] = ']';
    s[k++] = '\n';
    s[k] = '\0';
    return s;
}

START_TEST(test_depth_limit_accepts_max_depth_and_rejects_one_more)
{
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_depth = 10;
    sift_config *cfg = NULL;
    char *s = nested(9); /* 10 collections: a type error, not a limit */
    ck_assert_int_eq(parse_with(s, strlen(s), &p, &cfg), SIFT_E_CONFIG_TYPE);
    sift_config_free(cfg);
    free(s);
    s = nested(10);
    ck_assert_int_eq(parse_with(s, strlen(s), &p, &cfg), SIFT_E_CONFIG_LIMIT);
    ck_assert_str_eq(sift_config_diagnostic(cfg, 0)->text,
                     "t.yaml:1:17: error: nesting deeper than 10");
    sift_config_free(cfg);
    free(s);
}
END_TEST

START_TEST(test_a_million_open_brackets_fail_fast)
{
    /* Y-07: 10^6 '[' with the size cap raised to let them in. */
    size_t n = 1000000;
    char *s = malloc(n + 16);
    memcpy(s, "chain: ", 7);
    memset(s + 7, '[', n);
    counting cn = {0};
    sift_allocator al = {sizeof(sift_allocator), cn_alloc, cn_free, &cn, NULL};
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_bytes = n + 16;
    p.allocator = &al;
    sift_config *cfg = NULL;
    ck_assert_int_eq(parse_with(s, n + 7, &p, &cfg), SIFT_E_CONFIG_LIMIT);
    /* Reading stops at the 64th bracket (column 71; with the top-level
     * mapping that is depth 65), and what was allocated is bounded by the
     * depth limit beyond one copy of the text. */
    ck_assert_uint_eq(sift_config_n_diagnostics(cfg), 1);
    ck_assert_str_eq(sift_config_diagnostic(cfg, 0)->text,
                     "t.yaml:1:71: error: nesting deeper than 64");
    ck_assert_msg(cn.calls < 1000 && cn.bytes < n + 100000, "%ld allocations, %zu bytes", cn.calls,
                  cn.bytes);
    sift_config_free(cfg);
    free(s);
}
END_TEST

START_TEST(test_anchor_limit_accepts_max_anchors_and_rejects_one_more)
{
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_anchors = 3;
    sift_config *cfg = NULL;
    const char *ok = "chain: [&a top_k: 1, &b top_k: 2, &c dist]\n";
    ck_assert_int_eq(parse_with(ok, strlen(ok), &p, &cfg), SIFT_OK);
    sift_config_free(cfg);
    const char *bad = "chain: [&a top_k: 1, &b top_k: 2, &c top_k: 3, &d dist]\n";
    ck_assert_int_eq(parse_with(bad, strlen(bad), &p, &cfg), SIFT_E_CONFIG_LIMIT);
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_forty_thousand_anchors_and_aliases_fail_fast)
{
    /* Y-09: measured 2 s in a naive libyaml loader. */
    size_t n = 40000;
    char *s = malloc(n * 24 + 64);
    size_t k = (size_t)sprintf(s, "chain: [dist]\nx: [");
    for (size_t i = 0; i < n; i++)
        k += (size_t)sprintf(s + k, "&a%zu [*a%zu], ", i, i ? i - 1 : 0);
    k += (size_t)sprintf(s + k, "1]\n");
    counting cn = {0};
    sift_allocator al = {sizeof(sift_allocator), cn_alloc, cn_free, &cn, NULL};
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_bytes = k + 1;
    p.allocator = &al;
    sift_config *cfg = NULL;
    sift_status st = parse_with(s, k, &p, &cfg);
    ck_assert(st == SIFT_E_CONFIG_LIMIT || st == SIFT_E_CONFIG_VALUE);
    /* The first alias stops the load: the diagnostic is in the first
     * anchor's item, and beyond one copy of the text the allocations do
     * not grow with the 40,000 anchors. */
    const sift_diagnostic *d = sift_config_diagnostic(cfg, 0);
    ck_assert_ptr_nonnull(d);
    ck_assert_msg(d->line == 2 && d->offset < 64, "%s", d->text);
    ck_assert_msg(cn.calls < 1000 && cn.bytes < k + 100000, "%ld allocations, %zu bytes", cn.calls,
                  cn.bytes);
    sift_config_free(cfg);
    free(s);
}
END_TEST

START_TEST(test_node_limit_and_a_hundred_thousand_stages)
{
    /* P-16: 10^5 stages hit the node budget or the stage limit, fast. */
    size_t n = 100000;
    char *s = malloc(n * 6 + 32);
    size_t k = (size_t)sprintf(s, "chain: [");
    for (size_t i = 0; i < n; i++)
        k += (size_t)sprintf(s + k, "dist,");
    k += (size_t)sprintf(s + k, "dist]\n");
    sift_config *cfg = NULL;
    ck_assert_int_eq(parse_with(s, k, NULL, &cfg), SIFT_E_CONFIG_LIMIT);
    ck_assert_ptr_nonnull(strstr(sift_config_diagnostic(cfg, 0)->text, "more than 100000 nodes"));
    sift_config_free(cfg);
    /* The node budget bounds the work: with a budget of 1,000 the load
     * stops at the 1,001st node (the 999th "dist", byte 8 + 5 * 998) and
     * beyond one copy of the text allocates in proportion to the budget,
     * not to the 10^5 stages. */
    counting cn = {0};
    sift_allocator al = {sizeof(sift_allocator), cn_alloc, cn_free, &cn, NULL};
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_nodes = 1000;
    p.allocator = &al;
    ck_assert_int_eq(parse_with(s, k, &p, &cfg), SIFT_E_CONFIG_LIMIT);
    const sift_diagnostic *d = sift_config_diagnostic(cfg, 0);
    ck_assert_msg(strstr(d->text, "more than 1000 nodes") && d->offset <= 8 + 5 * 1000, "%s",
                  d->text);
    ck_assert_msg(cn.calls < 10 * 1000 && cn.bytes < k + 1000 * 256, "%ld allocations, %zu bytes",
                  cn.calls, cn.bytes);
    sift_config_free(cfg);
    /* with the node budget raised, the stage limit speaks */
    p.allocator = NULL;
    p.max_nodes = 1000000;
    ck_assert_int_eq(parse_with(s, k, &p, &cfg), SIFT_E_CONFIG_LIMIT);
    ck_assert_ptr_nonnull(
        strstr(sift_config_diagnostic(cfg, 0)->text, "chain has 100001 stages; max 256"));
    sift_config_free(cfg);
    free(s);
}
END_TEST

/* Every rejected input is rejected in time linear in its size: the work
 * the diagnostics paths do (line:col conversions, did-you-mean edit
 * distances, scalar walks, lookups) is counted, and bounded by a small
 * multiple of the input, however many problems the input has. */
static char *repeat_text(const char *head, const char *fmt, size_t n, const char *tail)
{
    size_t cap = strlen(head) + strlen(tail) + n * (strlen(fmt) + 24) + 1, k = 0;
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    k += (size_t)snprintf(b + k, cap - k, "%s", head);
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(b + k, cap - k, fmt, i);
    snprintf(b + k, cap - k, "%s", tail);
    return b;
}

static void assert_linear(const char *yaml, int want_errors)
{
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_nodes = 1 << 22;
    sift_config *cfg = NULL;
    sift_error err;
    size_t len = strlen(yaml);
    ck_assert_uint_le(len, p.max_bytes);
    sift_status st = sift_config_parse(&cfg, "t.yaml", yaml, len, &p, &err);
    ck_assert_ptr_nonnull(cfg);
    if (want_errors)
        ck_assert_int_ne(st, SIFT_OK);
    ck_assert_uint_le(sift_config_n_errors(cfg), (size_t)p.max_diagnostics);
    ck_assert_uint_le(sift_config_n_diagnostics(cfg), 2 * (size_t)p.max_diagnostics);
    ck_assert_msg(sift__cfg_work(cfg) <= 4 * (uint64_t)len, "work %llu for %zu bytes",
                  (unsigned long long)sift__cfg_work(cfg), len);
    sift_config_free(cfg);
}

START_TEST(test_a_mebibyte_of_bad_keys_is_rejected_in_linear_work)
{
    /* 10^5 duplicate keys on one line (a column per error would rescan it) */
    char *y = repeat_text("{top_k: 1, dist: 0", ", top_k: 1", 100000, "}\n");
    assert_linear(y, 1);
    free(y);
    /* the same in block style */
    y = repeat_text("top_k: 1\n", "top_k: 1\n", 100000, "");
    assert_linear(y, 1);
    free(y);
    /* unknown keys close to known ones (a did-you-mean each) */
    y = repeat_text("{seed: 1", ", dry_penalty_last_nn%zu: 1", 30000, ", chain: [dist]}\n");
    assert_linear(y, 1);
    free(y);
    y = repeat_text("chain: [dist]\n", "xtc_thresholdd_%zu: 1\n", 40000, "");
    assert_linear(y, 1);
    free(y);
    /* a samplers string of 80000 unknown names on one line */
    y = repeat_text("samplers: \"", "tok_k%zu;", 80000, "\"\n");
    assert_linear(y, 1);
    free(y);
}
END_TEST

START_TEST(test_many_warnings_cost_linear_work_and_are_capped)
{
    /* 60000 bans and 1024 trigger tokens they ban (T-08) */
    char *bans = repeat_text("chain:\n  - logit_bias: {", "%zu: false, ", 60000,
                             "60000: 1}\n  - dist\ngrammar:\n  text: \"root ::= [a]\"\n"
                             "  lazy:\n    tokens: [");
    char *toks = repeat_text("", "%zu, ", 1023, "1023]\n");
    char *y = malloc(strlen(bans) + strlen(toks) + 1);
    ck_assert_ptr_nonnull(y);
    strcpy(y, bans);
    strcat(y, toks);
    assert_linear(y, 0);
    free(y);
    free(toks);
    free(bans);
    /* 4096 stages that each warn */
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_stages = 4096;
    y = repeat_text("chain:\n", "  - top_k: 0\n", 4095, "  - dist\n");
    sift_config *cfg = NULL;
    sift_error err;
    ck_assert_int_eq(sift_config_parse(&cfg, "t.yaml", y, strlen(y), &p, &err), SIFT_OK);
    ck_assert_uint_le(sift_config_n_diagnostics(cfg), (size_t)p.max_diagnostics);
    ck_assert_uint_le(sift__cfg_work(cfg), 4 * (uint64_t)strlen(y));
    sift_config_free(cfg);
    free(y);
}
END_TEST

START_TEST(test_stage_limit_accepts_max_stages_and_rejects_one_more)
{
    char yaml[4096] = "chain: [";
    for (int i = 0; i < 255; i++)
        strcat(yaml, "top_k: 9,");
    strcat(yaml, "dist]\n");
    sift_config *cfg = NULL;
    ck_assert_int_eq(parse(yaml, &cfg), SIFT_OK);
    sift_config_free(cfg);
    memcpy(yaml + strlen(yaml) - 6, "top_k: 9,dist]\n", 16);
    ck_assert_int_eq(parse(yaml, &cfg), SIFT_E_CONFIG_LIMIT);
    sift_config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

static char tmpdir[64];

static void make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/sift-check-config-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void write_file(const char *name, const char *data)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(data, f);
    fclose(f);
}

static void rm_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_load_resolves_files_relative_to_the_config)
{
    make_tmpdir();
    char sub[128], path[256];
    snprintf(sub, sizeof sub, "%s/g", tmpdir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    write_file("g/json.gbnf", "root ::= \"{\" \"}\"\n");
    write_file("m.gguf", "GGUF");
    write_file("c.yaml", "vocab: m.gguf\nchain: [dist]\ngrammar:\n  file: g/json.gbnf\n"
                         "  mode: constrain\n");
    snprintf(path, sizeof path, "%s/c.yaml", tmpdir);
    sift_config *cfg = NULL;
    sift_error err;
    ck_assert_int_eq(sift_config_load(&cfg, path, NULL, &err), SIFT_OK);
    const sift_config_grammar *g = sift_config_grammar_info(cfg);
    ck_assert_ptr_nonnull(g);
    ck_assert_uint_eq(g->length, strlen("root ::= \"{\" \"}\"\n"));
    ck_assert(memcmp(g->text, "root ::= \"{\"", 12) == 0);
    ck_assert_int_eq(g->mode, SIFT_GRAMMAR_CONSTRAIN);
    ck_assert_int_eq(g->style, SIFT_SCALAR_FILE);
    ck_assert_str_eq(g->root, "root");
    ck_assert_ptr_nonnull(strstr(g->file, "/g/json.gbnf"));
    ck_assert_ptr_nonnull(strstr(sift_config_vocab_path(cfg), "/m.gguf"));
    sift_config_free(cfg);
    rm_tmpdir();
}
END_TEST

START_TEST(test_load_refuses_directories_devices_fifos_and_huge_files)
{
    /* Y-08 */
    make_tmpdir();
    sift_config *cfg = (sift_config *)1;
    sift_error err;
    ck_assert_int_eq(sift_config_load(&cfg, tmpdir, NULL, &err), SIFT_E_IO);
    ck_assert_ptr_null(cfg);
    ck_assert_ptr_nonnull(strstr(err.message, "not a regular file"));
    ck_assert_int_eq(sift_config_load(&cfg, "/dev/zero", NULL, &err), SIFT_E_IO);
    ck_assert_ptr_null(cfg);
    char path[256];
    snprintf(path, sizeof path, "%s/fifo", tmpdir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(sift_config_load(&cfg, path, NULL, &err), SIFT_E_IO);
    ck_assert_ptr_null(cfg);
    snprintf(path, sizeof path, "%s/missing.yaml", tmpdir);
    ck_assert_int_eq(sift_config_load(&cfg, path, NULL, &err), SIFT_E_IO);
    ck_assert_ptr_nonnull(strstr(err.message, "No such file"));
    ck_assert_str_eq(err.source, path);
    /* a sparse 1 GB file is refused from its size, without reading it */
    snprintf(path, sizeof path, "%s/huge.yaml", tmpdir);
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)1 << 30), 0);
    close(fd);
    counting cn = {0};
    sift_allocator al = {sizeof(sift_allocator), cn_alloc, cn_free, &cn, NULL};
    sift_config_params p;
    sift_config_params_init(&p);
    p.allocator = &al;
    ck_assert_int_eq(sift_config_load(&cfg, path, &p, &err), SIFT_E_CONFIG_LIMIT);
    /* nothing near the file's size was allocated to hold it */
    ck_assert_msg(cn.bytes < 65536, "%zu bytes allocated", cn.bytes);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_ptr_nonnull(strstr(sift_config_diagnostic(cfg, 0)->text, "larger than 1048576"));
    sift_config_free(cfg);
    rm_tmpdir();
}
END_TEST

START_TEST(test_grammar_file_over_the_cap_is_a_limit_error)
{
    make_tmpdir();
    char big[300];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    write_file("big.gbnf", big);
    write_file("c.yaml", "chain: [dist]\ngrammar: {file: big.gbnf}\n");
    char path[256];
    snprintf(path, sizeof path, "%s/c.yaml", tmpdir);
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_bytes = 200;
    sift_config *cfg = NULL;
    ck_assert_int_eq(sift_config_load(&cfg, path, &p, NULL), SIFT_E_CONFIG_LIMIT);
    ck_assert(has_diag(cfg, "c.yaml:2:17: error: grammar: "));
    sift_config_free(cfg);
    rm_tmpdir();
}
END_TEST

START_TEST(test_unreadable_files_are_io_errors_at_their_key)
{
    /* Y-19: a permission error (root reads everything: skipped there). */
    if (geteuid() == 0)
        return;
    make_tmpdir();
    write_file("secret.gbnf", "root ::= \"a\"\n");
    char path[256];
    snprintf(path, sizeof path, "%s/secret.gbnf", tmpdir);
    ck_assert_int_eq(chmod(path, 0), 0);
    write_file("c.yaml", "chain: [dist]\ngrammar:\n  file: secret.gbnf\n");
    snprintf(path, sizeof path, "%s/c.yaml", tmpdir);
    sift_config *cfg = NULL;
    sift_error err;
    ck_assert_int_eq(sift_config_load(&cfg, path, NULL, &err), SIFT_E_IO);
    ck_assert_int_eq(err.line, 3);
    ck_assert_int_eq(err.column, 9);
    ck_assert_ptr_nonnull(strstr(err.message, "Permission denied"));
    sift_config_free(cfg);
    rm_tmpdir();
}
END_TEST

/* ------------------------------------------------------------------ */
/* Grammar section                                                     */
/* ------------------------------------------------------------------ */

START_TEST(test_inline_grammar_keeps_text_position_and_triggers)
{
    const char *yaml = "chain: [dist]\n"
                       "grammar:\n"
                       "  root: call\n"
                       "  text: |\n"
                       "    call ::= \"<tool_call>\" [a-z]+\n"
                       "  lazy:\n"
                       "    words: [\"<tool_call>\", \"<fn>\"]\n"
                       "    patterns: ['^\\s*\\{']\n"
                       "    full_patterns: ['(?s).*?```json']\n"
                       "    tokens: [7, 9]\n";
    sift_config *cfg = parse_ok(yaml);
    const sift_config_grammar *g = sift_config_grammar_info(cfg);
    ck_assert_ptr_nonnull(g);
    ck_assert_str_eq(g->text, "call ::= \"<tool_call>\" [a-z]+\n");
    ck_assert_str_eq(g->root, "call");
    ck_assert_int_eq(g->mode, SIFT_GRAMMAR_CHECK);
    ck_assert_int_eq(g->style, SIFT_SCALAR_LITERAL);
    ck_assert_int_eq(g->line, 5);
    ck_assert_int_eq(g->column, 5);
    ck_assert_ptr_null(g->file);
    ck_assert_int_eq(g->lazy, 1);
    ck_assert_uint_eq(g->n_words, 2);
    ck_assert_str_eq(g->words[1], "<fn>");
    ck_assert_uint_eq(g->word_lengths[0], 11);
    ck_assert_uint_eq(g->n_patterns, 1);
    ck_assert_str_eq(g->patterns[0], "^\\s*\\{");
    ck_assert_uint_eq(g->n_full_patterns, 1);
    ck_assert_uint_eq(g->n_tokens, 2);
    ck_assert_int_eq(g->tokens[1], 9);
    sift_config_free(cfg);
}
END_TEST

/* An inline grammar's errors found only at build time (token references
 * need the vocabulary) name the config file and its line and column, not
 * the grammar's own: one coordinate system per message. */
START_TEST(test_inline_grammar_build_errors_are_in_file_coordinates)
{
    const char *yaml = "chain: [dist]\n"
                       "grammar:\n"
                       "  text: |\n"
                       "    root ::= \"a\" x\n"
                       "    x ::= \"b\" <[99999]>\n";
    sift_config *cfg = parse_ok(yaml);
    sift_vocab *vocab = make_vocab(700);
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_ne(sift_config_build_chain(cfg, NULL, vocab, &c, &err), SIFT_OK);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(err.line, 5);
    ck_assert_int_eq(err.column, 17); /* the id */
    ck_assert_str_eq(err.source, "t.yaml");
    ck_assert_msg(!strncmp(err.message, "t.yaml:5:17: ", 13), "%s", err.message);
    sift_vocab_free(vocab);
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_quoted_grammar_text_starts_after_the_quote)
{
    sift_config *cfg = parse_ok("chain: [dist]\ngrammar: {text: \"root ::= \\\"a\\\"\"}\n");
    const sift_config_grammar *g = sift_config_grammar_info(cfg);
    ck_assert_ptr_nonnull(g);
    ck_assert_str_eq(g->text, "root ::= \"a\"");
    ck_assert_int_eq(g->style, SIFT_SCALAR_DOUBLE_QUOTED);
    ck_assert_int_eq(g->line, 2);
    ck_assert_int_eq(g->column, 18);
    sift_config_free(cfg);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Threads and stack (X-01, F-08)                                      */
/* ------------------------------------------------------------------ */

typedef struct build_job {
    const sift_config *cfg;
    int32_t tokens[64];
    int ok;
} build_job;

static void *build_and_sample(void *arg)
{
    build_job *j = arg;
    sift_chain *c = NULL;
    if (sift_config_build_chain(j->cfg, NULL, NULL, &c, NULL) != SIFT_OK)
        return NULL;
    float row[256];
    tu_rng r = {12345};
    j->ok = 1;
    for (int s = 0; s < 64; s++) {
        tu_row(&r, row, 256, TU_ROW_NORMAL);
        if (sift_chain_sample(c, row, 256, &j->tokens[s], NULL) != SIFT_OK ||
            sift_chain_accept(c, j->tokens[s], NULL) != SIFT_OK)
            j->ok = 0;
    }
    sift_chain_free(c);
    return NULL;
}

START_TEST(test_threads_build_chains_from_one_shared_config)
{
    sift_config *cfg = parse_ok("seed: 3\nchain: [penalties: 1.2, top_k: 30, top_p: 0.9, "
                                "temperature: 0.9, dist]\n");
    build_job jobs[4];
    pthread_t th[4];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < 4; i++) {
        jobs[i].cfg = cfg;
        ck_assert_int_eq(pthread_create(&th[i], NULL, build_and_sample, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    build_job serial;
    memset(&serial, 0, sizeof serial);
    serial.cfg = cfg;
    build_and_sample(&serial);
    for (int i = 0; i < 4; i++) {
        ck_assert(jobs[i].ok);
        ck_assert(memcmp(jobs[i].tokens, serial.tokens, sizeof serial.tokens) == 0);
    }
    sift_config_free(cfg);
}
END_TEST

typedef struct load_job {
    const char *yaml;
    size_t len;
    sift_status st;
} load_job;

static void *load_on_thread(void *arg)
{
    load_job *j = arg;
    sift_config_params p;
    sift_config_params_init(&p);
    p.max_bytes = j->len + 1;
    sift_config *cfg = NULL;
    j->st = sift_config_parse(&cfg, "t.yaml", j->yaml, j->len, &p, NULL);
    sift_config_free(cfg);
    return NULL;
}

START_TEST(test_loader_runs_on_a_256_kib_stack)
{
    /* F-08: nothing in the loader recurses with the input. */
    const char *inputs[4];
    char *deep = nested(63), *wide = malloc(400000);
    size_t k = (size_t)sprintf(wide, "chain:\n");
    while (k < 390000)
        k += (size_t)sprintf(wide + k, "  - top_p: {p: 2, min_keep: -1}\n");
    sprintf(wide + k, "  - dist\n");
    inputs[0] = deep;
    inputs[1] = wide;
    inputs[2] = "chain: [dist]\ngrammar: {text: 'root ::= \"a\"', lazy: {patterns: "
                "['((((((((((((((((((((a))))))))))))))))))))', '(?<']}}\n";
    inputs[3] = "a: &a [*a, *a]\nchain: [dist]\n";
    for (size_t i = 0; i < N(inputs); i++) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        ck_assert_int_eq(pthread_attr_setstacksize(&at, 256 * 1024), 0);
        load_job j = {inputs[i], strlen(inputs[i]), SIFT_OK};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, &at, load_on_thread, &j), 0);
        pthread_join(th, NULL);
        pthread_attr_destroy(&at);
        ck_assert_int_ne(j.st, SIFT_E_NOMEM);
    }
    free(deep);
    free(wide);
}
END_TEST

START_TEST(test_grammar_is_attached_as_the_api_would)
{
    /* constrain: a stage ahead of the others; check: the chain's
     * check-mode grammar. Both compiled with the caller's vocabulary. */
    const char *modes[] = {"constrain", "check"};
    sift_vocab *vocab = make_vocab(128);
    for (size_t m = 0; m < 2; m++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml,
                 "seed: 4\nchain: [top_k: 20, dist]\n"
                 "grammar: {text: 'root ::= [a-e]+', mode: %s}\n",
                 modes[m]);
        sift_config *cfg = parse_ok(yaml);
        sift_chain *a = build(cfg, vocab, 128), *b = api_chain(4, 128);
        sift_grammar *g = NULL;
        ck_assert_int_eq(sift_grammar_new(&g, "root ::= [a-e]+", 15, vocab, NULL, NULL), 0);
        if (m == 0)
            ck_assert_int_eq(sift_chain_add_grammar(b, g, NULL), SIFT_OK);
        else
            ck_assert_int_eq(sift_chain_set_check_grammar(b, g, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(b, 20, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(b, NULL), SIFT_OK);
        assert_same_behaviour(a, b, 128, 70 + m, 60);
        /* every token sampled is made of a..e */
        float row[128];
        tu_rng r = {m + 1};
        for (int s = 0; s < 20; s++) {
            tu_row(&r, row, 128, TU_ROW_NORMAL);
            int32_t tok;
            ck_assert_int_eq(sift_chain_sample(a, row, 128, &tok, NULL), SIFT_OK);
            const char *piece;
            size_t plen;
            ck_assert_int_eq(sift_vocab_piece(vocab, tok, &piece, &plen, NULL), SIFT_OK);
            for (size_t k = 0; k < plen; k++)
                ck_assert(piece[k] >= 'a' && piece[k] <= 'e');
            ck_assert_int_eq(sift_chain_accept(a, tok, NULL), SIFT_OK);
        }
        sift_chain_free(a);
        sift_chain_free(b);
        /* without a vocabulary the grammar cannot be built */
        sift_chain *c = (sift_chain *)1;
        sift_error err;
        ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_E_ARG);
        ck_assert_ptr_null(c);
        sift_config_free(cfg);
    }
    sift_vocab_free(vocab);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Allocation failure (F-01)                                           */
/* ------------------------------------------------------------------ */

typedef struct failing {
    long n, fail_at; /* fail the fail_at-th call (1-based); 0 = never */
    long live;
} failing;

static void *fl_alloc(void *user, size_t size)
{
    failing *f = user;
    if (++f->n == f->fail_at)
        return NULL;
    void *p = malloc(size);
    if (p)
        f->live++;
    return p;
}

static void fl_free(void *user, void *p)
{
    failing *f = user;
    if (p)
        f->live--;
    free(p);
}

START_TEST(test_every_allocation_failure_during_load_and_build_is_clean)
{
    const char *yaml = "seed: 1\nvocab_size: 128\n"
                       "chain:\n"
                       "  - logit_bias: {1: -.inf, 2: 0.5}\n"
                       "  - dry: {multiplier: 0.8, last_n: 64}\n"
                       "  - penalties: {last_n: 32, repeat: 1.1}\n"
                       "  - top_k: 40\n  - top_p: 0.9\n  - temperature: 0.8\n  - dist\n"
                       "grammar:\n  text: 'root ::= \"a\"'\n"
                       "  lazy: {words: [x], patterns: ['a+'], tokens: [3]}\n";
    sift_vocab *vocab = make_vocab(128);
    long total = -1;
    for (long n = 1; n < 100000 && total < 0; n++) {
        failing f = {0, n, 0};
        sift_allocator al = {sizeof(sift_allocator), fl_alloc, fl_free, &f, NULL};
        sift_config_params p;
        sift_config_params_init(&p);
        p.allocator = &al;
        sift_config *cfg = NULL;
        sift_status st = sift_config_parse(&cfg, "t.yaml", yaml, strlen(yaml), &p, NULL);
        if (st == SIFT_OK) {
            sift_chain_params cp;
            sift_chain_params_init(&cp);
            cp.allocator = &al;
            sift_chain *c = NULL;
            st = sift_config_build_chain(cfg, &cp, vocab, &c, NULL);
            if (st == SIFT_OK) {
                ck_assert_ptr_nonnull(c);
                if (f.n < n)
                    total = n; /* nothing failed: every N is covered */
            } else {
                ck_assert_int_eq(st, SIFT_E_NOMEM);
                ck_assert_ptr_null(c);
            }
            sift_chain_free(c);
        } else {
            ck_assert_msg(st == SIFT_E_NOMEM, "N=%ld: status %d", n, (int)st);
            ck_assert_ptr_null(cfg);
        }
        sift_config_free(cfg);
        ck_assert_msg(f.live == 0, "N=%ld: %ld blocks leaked", n, f.live);
    }
    ck_assert_int_gt(total, 20);
    sift_vocab_free(vocab);
}
END_TEST

/* ------------------------------------------------------------------ */

Suite *tu_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, test_parse_and_load_reject_null_arguments);
    tcase_add_test(tc, test_every_problem_is_reported_sorted_with_the_first_in_err);
    tcase_add_test(tc, test_warnings_do_not_make_a_config_invalid);
    tcase_add_test(tc, test_min_p_before_top_k_is_reported_as_commuting);
    tcase_add_test(tc,
                   test_a_threshold_the_certificate_decides_before_top_k_is_not_called_whole_row);
    tcase_add_test(tc, test_each_stage_before_top_k_that_keeps_the_plan_from_a_slice_is_named);
    tcase_add_test(tc, test_truncation_before_greedy_is_reported_as_useless);
    tcase_add_test(tc, test_max_diagnostics_stops_collecting);
    tcase_add_test(tc, test_seed_vocab_size_and_accessors);
    tcase_add_test(tc, test_numbers_parse_without_the_locale);
    tcase_add_test(tc, test_numbers_as_yaml_and_c_print_them_are_numbers);
    suite_add_tcase(s, tc);

    tc = tcase_create("round_trip");
    tcase_add_test(tc, test_production_config_builds_the_chain_the_api_builds);
    tcase_add_test(tc, test_every_stage_form_builds_the_api_chain);
    tcase_add_test(tc, test_selectors_build_the_api_chain);
    tcase_add_test(tc, test_probability_cutoffs_build_the_api_chain);
    tcase_add_test(tc, test_flat_llama_defaults_build_the_explicit_default_chain);
    tcase_add_test(tc, test_flat_forms_build_their_explicit_equivalents);
    tcase_add_test(tc, test_flat_ignore_eos_and_adaptive_p_build_their_explicit_equivalents);
    tcase_add_test(tc, test_flat_ignore_eos_without_a_vocabulary_fails_at_build_naming_it);
    tcase_add_test(tc, test_llama_server_request_keys_build_their_explicit_equivalents);
    tcase_add_test(tc, test_llama_server_grammar_string_is_a_check_mode_grammar);
    tcase_add_test(tc, test_llama_random_seed_is_accepted_with_a_warning_and_varies);
    tcase_add_test(tc, test_load_refuses_what_the_builder_refuses_with_its_message);
    tcase_add_test(tc, test_seed_comes_from_the_config_and_vocab_size_from_it_when_unset);
    tcase_add_test(tc, test_dry_with_breakers_needs_a_vocabulary_at_build);
    tcase_add_test(tc, test_max_stages_of_the_chain_params_applies_at_build);
    suite_add_tcase(s, tc);

    tc = tcase_create("limits");
    tcase_add_test(tc, test_size_limit_accepts_max_bytes_and_rejects_one_more);
    tcase_add_test(tc, test_depth_limit_accepts_max_depth_and_rejects_one_more);
    tcase_add_test(tc, test_a_million_open_brackets_fail_fast);
    tcase_add_test(tc, test_anchor_limit_accepts_max_anchors_and_rejects_one_more);
    tcase_add_test(tc, test_forty_thousand_anchors_and_aliases_fail_fast);
    tcase_add_test(tc, test_node_limit_and_a_hundred_thousand_stages);
    tcase_add_test(tc, test_stage_limit_accepts_max_stages_and_rejects_one_more);
    tcase_add_test(tc, test_a_mebibyte_of_bad_keys_is_rejected_in_linear_work);
    tcase_add_test(tc, test_many_warnings_cost_linear_work_and_are_capped);
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_add_test(tc, test_load_resolves_files_relative_to_the_config);
    tcase_add_test(tc, test_load_refuses_directories_devices_fifos_and_huge_files);
    tcase_add_test(tc, test_grammar_file_over_the_cap_is_a_limit_error);
    tcase_add_test(tc, test_unreadable_files_are_io_errors_at_their_key);
    tcase_add_test(tc, test_inline_grammar_keeps_text_position_and_triggers);
    tcase_add_test(tc, test_quoted_grammar_text_starts_after_the_quote);
    tcase_add_test(tc, test_inline_grammar_build_errors_are_in_file_coordinates);
    tcase_add_test(tc, test_grammar_is_attached_as_the_api_would);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_add_test(tc, test_threads_build_chains_from_one_shared_config);
    tcase_add_test(tc, test_loader_runs_on_a_256_kib_stack);
    suite_add_tcase(s, tc);

    /* A property run over every N: the one raised timeout. */
    tc = tcase_create("alloc");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_allocation_failure_during_load_and_build_is_clean);
    suite_add_tcase(s, tc);
    return s;
}

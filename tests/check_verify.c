/*
 * check_verify.c - speculative verification (src/core/verify.c): the plan
 * of a verify step, the verify call, the target distributions.
 *
 * The property tests are the proof: random chains (penalties, DRY,
 * mirostat, logit bias, every truncation; some with a grammar stage, a
 * lazy grammar or a check grammar), random rows and random drafts, most
 * of them the tokens the sequential loop samples, some not. For each
 * verify step:
 * - the plan equals, position by position, what sift_chain_next_k and
 *   sift_chain_extras give on a clone that accepts the drafts one by one;
 * - sift_chain_verify (from slices built at the planned k, sometimes
 *   smaller so that the positional hook runs, or from whole rows) gives
 *   the accepted count and the token of the sequential sample/accept loop
 *   on whole rows, and leaves the chain in its state bitwise (RNG and
 *   every stage's digest); the sequential tokens equal the oracle's on
 *   chains the oracle models. Half of the slices are as a device top-k
 *   makes them (tu_devicify: the prefix shuffled, the tokens tied at its
 *   smallest logit re-chosen among the row's tied ids, no canonical
 *   flag): they may need the hook (or end in SIFT_E_NEED_ROW where the
 *   sequential loop on the same slice does) but never give another
 *   result; some others are canonical without the flag saying so;
 * - the distributions of sift_verifier_distributions equal those of
 *   sift_chain_distribution after accepting the drafts, bitwise.
 *
 * SIFT_VERIFY_CASES (environment) sets the number of chains (default
 * 800, about 6,400 positions sampled); SIFT_VERIFY_MIN_POSITIONS a number
 * of positions the property must sample: it draws chains past
 * SIFT_VERIFY_CASES until it has, and fails if it has not (unset: no
 * minimum; `make check-long` sets 10,000,000). A value that is not a
 * whole number >= 0 fails the test instead of dropping the minimum.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"
#include "../src/grammar/gbnf.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define MAXD 49

static long n_cases(void)
{
    const char *e = getenv("SIFT_VERIFY_CASES");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : 800;
}

/* SIFT_VERIFY_MIN_POSITIONS (environment): the least number of positions
 * the property samples; unset or empty = no minimum. Anything but a whole
 * number >= 0 fails the test: a soak must not run without its minimum
 * because of a typo such as 1e7. */
static long min_positions(void)
{
    const char *e = getenv("SIFT_VERIFY_MIN_POSITIONS");
    if (!e || !*e)
        return 0;
    char *end = NULL;
    errno = 0;
    long n = strtol(e, &end, 10);
    ck_assert_msg(errno == 0 && end != e && *end == '\0' && n >= 0,
                  "SIFT_VERIFY_MIN_POSITIONS=%s is not a whole number >= 0", e);
    return n;
}

/* The positional hook of these tests: rows[position]. */
typedef struct rows_hook {
    const float *const *rows;
    int32_t n_rows;
    int32_t V;
    int calls;
    int32_t last_position;
} rows_hook;

static int hook_at(void *user, int32_t position, float *row, int32_t V)
{
    rows_hook *h = user;
    ck_assert_msg(position >= 0 && position < h->n_rows, "hook position %d of %d", (int)position,
                  (int)h->n_rows);
    ck_assert_int_eq(V, h->V);
    h->calls++;
    h->last_position = position;
    memcpy(row, h->rows[position], (size_t)V * sizeof *row);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Grammar helpers                                                     */
/* ------------------------------------------------------------------ */

static const char arith[] = "root ::= expr\n"
                            "expr ::= term ( ws [-+] ws term )*\n"
                            "term ::= factor ( ws [*/] ws factor )*\n"
                            "factor ::= \"-\"? ( [0-9]+ | \"(\" ws expr ws \")\" )\n"
                            "ws ::= \" \"?\n";
static const char *const pieces_pool[] = {"0",  "1", "2",  "7",  "12", "345", " ",  "+",
                                          "-",  "*", "/",  "(",  ")",  " + ", "(1", "2)",
                                          "ab", "",  "9 ", " *", ")(", "x",   "3",  "4"};

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
    pc[V - 1] = "<eos>";
    len[V - 1] = 5;
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, V, pc, len, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, V - 1, SIFT_TOKEN_EOG, NULL), SIFT_OK);
    free(pc);
    free(len);
    return v;
}

/* lazy = 0: eager; 1: lazy, fired by the word "(" or by token 3 ("7"),
 * which the grammar then matches from the trigger on */
static sift_grammar *arith_grammar(const sift_vocab *v, int lazy)
{
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_msg(sift_grammar_new(&g, arith, strlen(arith), v, NULL, &err) == SIFT_OK, "%s",
                  err.message);
    if (lazy) {
        sift_lazy_params lp;
        sift_lazy_params_init(&lp);
        static const char *const words[] = {"("};
        static const int32_t toks[] = {3};
        lp.words = words;
        lp.n_words = 1;
        lp.tokens = toks;
        lp.n_tokens = 1;
        ck_assert_msg(sift_grammar_set_lazy(g, &lp, &err) == SIFT_OK, "%s", err.message);
    }
    return g;
}

/* ------------------------------------------------------------------ */
/* Unit tests                                                          */
/* ------------------------------------------------------------------ */

static void fill_rows(tu_rng *r, float *buf, const float **rows, int32_t n, int32_t V)
{
    for (int32_t i = 0; i < n; i++) {
        rows[i] = buf + (size_t)i * (size_t)V;
        tu_row(r, buf + (size_t)i * (size_t)V, V, TU_ROW_NORMAL);
    }
}

/* The sequential loop on whole rows: the tokens it samples, up to and
 * including the first that differs from the draft. */
static int32_t sequential(sift_chain *c, const float *const *rows, int32_t V, const int32_t *drafts,
                          int32_t n, int32_t *tok)
{
    for (int32_t i = 0; i <= n; i++) {
        ck_assert_int_eq(sift_chain_sample(c, rows[i], V, tok, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(c, *tok, NULL), SIFT_OK);
        if (i == n || *tok != drafts[i])
            return i;
    }
    return n;
}

START_TEST(test_verify_accepts_matching_drafts_and_returns_the_bonus_token)
{
    enum { V = 64, n = 6 };
    tu_rng r = {7};
    float buf[(n + 1) * V];
    const float *rows[n + 1];
    fill_rows(&r, buf, rows, n + 1, V);
    sift_chain *a = tu_small_chain(1, NULL), *b = tu_small_chain(1, NULL),
               *sim = tu_small_chain(1, NULL);
    int32_t drafts[n], tok;
    for (int32_t i = 0; i < n; i++) {
        ck_assert_int_eq(sift_chain_sample(sim, rows[i], V, &drafts[i], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(sim, drafts[i], NULL), SIFT_OK);
    }
    ck_assert_int_eq(sequential(b, rows, V, drafts, n, &tok), n);
    sift_verify_args args;
    sift_verify_args_init(&args);
    args.drafts = drafts;
    args.n_drafts = n;
    args.rows = rows;
    args.n_vocab = V;
    sift_verify_result res = {.struct_size = sizeof res};
    ck_assert_int_eq(sift_chain_verify(a, &args, &res, NULL), SIFT_OK);
    ck_assert_int_eq(res.n_accepted, n);
    ck_assert_int_eq(res.position, n);
    ck_assert_int_eq(res.token, tok);
    ck_assert(sift__chain_state_digest(a) == sift__chain_state_digest(b));
    sift_chain_free(a);
    sift_chain_free(b);
    sift_chain_free(sim);
}
END_TEST

START_TEST(test_verify_stops_at_the_first_mismatch_with_the_corrected_token)
{
    enum { V = 64, n = 6 };
    tu_rng r = {8};
    float buf[(n + 1) * V];
    const float *rows[n + 1];
    fill_rows(&r, buf, rows, n + 1, V);
    sift_chain *a = tu_small_chain(2, NULL), *b = tu_small_chain(2, NULL),
               *sim = tu_small_chain(2, NULL);
    int32_t drafts[n], tok;
    for (int32_t i = 0; i < n; i++) {
        ck_assert_int_eq(sift_chain_sample(sim, rows[i], V, &drafts[i], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(sim, drafts[i], NULL), SIFT_OK);
    }
    int32_t true3 = drafts[3];
    drafts[3] = (drafts[3] + 1) % V; /* can never be sampled twice over: a different token */
    ck_assert_int_eq(sequential(b, rows, V, drafts, n, &tok), 3);
    ck_assert_int_eq(tok, true3);
    sift_verify_args args;
    sift_verify_args_init(&args);
    args.drafts = drafts;
    args.n_drafts = n;
    args.rows = rows;
    args.n_vocab = V;
    sift_verify_result res = {.struct_size = sizeof res};
    ck_assert_int_eq(sift_chain_verify(a, &args, &res, NULL), SIFT_OK);
    ck_assert_int_eq(res.n_accepted, 3);
    ck_assert_int_eq(res.position, 3);
    ck_assert_int_eq(res.token, true3);
    ck_assert(sift__chain_state_digest(a) == sift__chain_state_digest(b));
    sift_chain_free(a);
    sift_chain_free(b);
    sift_chain_free(sim);
}
END_TEST

/* Slices of k = 1 cannot decide a top_k 8 + dist step: every position
 * needs its row, and the hook is told which. */
START_TEST(test_the_hook_is_told_the_position_it_needs)
{
    enum { V = 64, n = 4 };
    tu_rng r = {9};
    float buf[(n + 1) * V];
    const float *rows[n + 1];
    fill_rows(&r, buf, rows, n + 1, V);
    sift_chain *a = tu_small_chain(3, NULL), *b = tu_small_chain(3, NULL),
               *sim = tu_small_chain(3, NULL);
    int32_t drafts[n], tok;
    for (int32_t i = 0; i < n; i++) {
        ck_assert_int_eq(sift_chain_sample(sim, rows[i], V, &drafts[i], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(sim, drafts[i], NULL), SIFT_OK);
    }
    int32_t m = sequential(b, rows, V, drafts, n, &tok);
    sift_slicer *sl[n + 1];
    sift_slice s[n + 1];
    for (int32_t i = 0; i <= n; i++) {
        ck_assert_int_eq(sift_slicer_new(&sl[i], V, NULL, NULL), SIFT_OK);
        ck_assert_int_eq(sift_slicer_build(sl[i], rows[i], V, 1, NULL, 0, &s[i], NULL), SIFT_OK);
    }
    rows_hook h = {rows, n + 1, V, 0, -1};
    sift_verify_args args;
    sift_verify_args_init(&args);
    args.drafts = drafts;
    args.n_drafts = n;
    args.slices = s;
    args.hook = hook_at;
    args.hook_user = &h;
    sift_verify_result res = {.struct_size = sizeof res};
    ck_assert_int_eq(sift_chain_verify(a, &args, &res, NULL), SIFT_OK);
    ck_assert_int_eq(res.n_accepted, m);
    ck_assert_int_eq(res.token, tok);
    ck_assert_int_eq(h.calls, m + 1);
    ck_assert_int_eq((int)res.hook_calls, m + 1);
    ck_assert_int_eq(h.last_position, m);
    ck_assert(sift__chain_state_digest(a) == sift__chain_state_digest(b));
    for (int32_t i = 0; i <= n; i++)
        sift_slicer_free(sl[i]);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_chain_free(sim);
}
END_TEST

/* Without a hook, position 2's slice (k = 1) cannot decide: positions 0
 * and 1 stay accepted, position 2 changes nothing, and the runtime can
 * go on from there with the row. */
START_TEST(test_without_a_hook_verification_stops_with_need_row_keeping_the_accepted_prefix)
{
    enum { V = 64, n = 4 };
    tu_rng r = {10};
    float buf[(n + 1) * V];
    const float *rows[n + 1];
    fill_rows(&r, buf, rows, n + 1, V);
    sift_chain *a = tu_small_chain(4, NULL), *b = tu_small_chain(4, NULL),
               *sim = tu_small_chain(4, NULL);
    int32_t drafts[n];
    for (int32_t i = 0; i < n; i++) {
        ck_assert_int_eq(sift_chain_sample(sim, rows[i], V, &drafts[i], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(sim, drafts[i], NULL), SIFT_OK);
    }
    sift_chain_free(sim);
    /* b: positions 0 and 1 sampled and accepted */
    for (int32_t i = 0; i < 2; i++) {
        int32_t t;
        ck_assert_int_eq(sift_chain_sample(b, rows[i], V, &t, NULL), SIFT_OK);
        ck_assert_int_eq(t, drafts[i]);
        ck_assert_int_eq(sift_chain_accept(b, t, NULL), SIFT_OK);
    }
    sift_slicer *sl[n + 1];
    sift_slice s[n + 1];
    for (int32_t i = 0; i <= n; i++) {
        ck_assert_int_eq(sift_slicer_new(&sl[i], V, NULL, NULL), SIFT_OK);
        ck_assert_int_eq(sift_slicer_build(sl[i], rows[i], V, i == 2 ? 1 : V, NULL, 0, &s[i], NULL),
                         SIFT_OK);
    }
    sift_verify_args args;
    sift_verify_args_init(&args);
    args.drafts = drafts;
    args.n_drafts = n;
    args.slices = s;
    sift_verify_result res = {.struct_size = sizeof res};
    sift_error err;
    ck_assert_int_eq(sift_chain_verify(a, &args, &res, &err), SIFT_E_NEED_ROW);
    ck_assert_int_eq(res.n_accepted, 2);
    ck_assert_int_eq(res.position, 2);
    ck_assert_int_eq(res.token, -1);
    ck_assert(sift__chain_state_digest(a) == sift__chain_state_digest(b));
    for (int32_t i = 0; i <= n; i++)
        sift_slicer_free(sl[i]);
    sift_chain_free(a);
    sift_chain_free(b);
}
END_TEST

START_TEST(test_bad_arguments_are_refused_and_change_nothing)
{
    enum { V = 64 };
    sift_chain *a = tu_small_chain(5, NULL);
    uint64_t d0 = sift__chain_state_digest(a);
    float row[V] = {0};
    const float *rows[2] = {row, row};
    int32_t drafts[1] = {-3};
    sift_verify_args args;
    sift_verify_args_init(&args);
    sift_verify_result res = {.struct_size = sizeof res};
    sift_error err;
    ck_assert_int_eq(sift_chain_verify(a, &args, &res, &err), SIFT_E_ARG); /* no input */
    args.rows = rows;
    args.n_vocab = V;
    args.n_drafts = 1;
    ck_assert_int_eq(sift_chain_verify(a, &args, &res, &err), SIFT_E_ARG); /* drafts NULL */
    args.drafts = drafts;
    ck_assert_int_eq(sift_chain_verify(a, &args, &res, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(err.index, 0);
    args.flags = 8;
    drafts[0] = 1;
    ck_assert_int_eq(sift_chain_verify(a, &args, &res, &err), SIFT_E_ARG);
    args.flags = 0;
    args.struct_size = 0;
    ck_assert_int_eq(sift_chain_verify(a, &args, &res, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_verify(a, NULL, &res, &err), SIFT_E_ARG);
    args.struct_size = sizeof args;
    ck_assert_int_eq(sift_chain_verify(a, &args, NULL, &err), SIFT_E_ARG);
    ck_assert(sift__chain_state_digest(a) == d0);
    sift_verifier *v = NULL;
    ck_assert_int_eq(sift_verifier_new(&v, a, 0, &err), SIFT_E_ARG);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(sift_verifier_new(&v, a, 4, &err), SIFT_OK);
    sift_verify_step steps[6];
    steps[0].struct_size = sizeof steps[0];
    int32_t dd[5] = {1, 2, 3, 4, 5};
    ck_assert_int_eq(sift_verifier_plan(v, a, dd, 5, steps, &err), SIFT_E_LIMIT);
    dd[1] = -1;
    ck_assert_int_eq(sift_verifier_plan(v, a, dd, 3, steps, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(err.index, 1);
    steps[0].struct_size = 0;
    ck_assert_int_eq(sift_verifier_plan(v, a, dd, 1, steps, &err), SIFT_E_ARG);
    sift_chain *other = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_greedy(other, NULL), SIFT_OK);
    steps[0].struct_size = sizeof steps[0];
    ck_assert_int_eq(sift_verifier_plan(v, other, dd, 1, steps, &err), SIFT_E_ARG);
    ck_assert(sift__chain_state_digest(a) == d0);
    sift_verifier_free(v);
    sift_verifier_free(NULL);
    sift_chain_free(other);
    sift_chain_free(a);
}
END_TEST

/* A penalty window of 4: after the drafts the window holds other tokens,
 * and the plan's dynamic k follows it position by position. */
START_TEST(test_the_plan_follows_the_penalty_window_through_the_drafts)
{
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_penalties(c, 4, 1.5f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 10, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_verifier *v;
    ck_assert_int_eq(sift_verifier_new(&v, c, 8, NULL), SIFT_OK);
    int32_t drafts[6] = {5, 5, 6, 7, 8, 9};
    sift_verify_step st[7];
    st[0].struct_size = sizeof st[0];
    ck_assert_int_eq(sift_verifier_plan(v, c, drafts, 6, st, NULL), SIFT_OK);
    /* distinct tokens in the window of 4 after i drafts: 0,1,1,2,3,4,4 */
    const int32_t want[7] = {10, 11, 11, 12, 13, 14, 14};
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(st[i].k, want[i]);
        ck_assert_int_eq(st[i].k_static, 14);
        ck_assert_int_eq(st[i].flags, 0);
    }
    ck_assert(sift__chain_state_digest(c) == sift__chain_state_digest(c));
    sift_verifier_free(v);
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
static int count_accept(void *user, int32_t token)
{
    (void)token;
    (*(int *)user)++;
    return 0;
}
static void *clone_int(void *user)
{
    int *p = malloc(sizeof *p);
    if (p)
        *p = *(int *)user;
    return p;
}

/* A custom stage cannot copy its state into the shadow: position 0 is
 * planned from the chain, every later one needs the whole row, and the
 * target distributions fail, with or without drafts. */
START_TEST(test_a_custom_stage_makes_positions_after_the_first_whole_row)
{
    for (int with_clone = 0; with_clone < 2; with_clone++) {
        sift_chain *c = tu_chain_new(1, NULL);
        static int counter;
        int *user = with_clone ? malloc(sizeof *user) : &counter;
        *user = 0;
        sift_custom_stage vt = {SIFT_CUSTOM_STAGE_ABI,
                                "pass",
                                SIFT_CLASS_IDENTITY,
                                0,
                                pass_stage,
                                count_accept,
                                NULL,
                                with_clone ? clone_int : NULL,
                                with_clone ? free : NULL};
        ck_assert_int_eq(sift_chain_add_custom(c, &vt, user, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(c, 10, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        sift_verifier *v;
        ck_assert_int_eq(sift_verifier_new(&v, c, 8, NULL), SIFT_OK);
        int32_t drafts[3] = {1, 2, 3};
        sift_verify_step st[4];
        st[0].struct_size = sizeof st[0];
        ck_assert_int_eq(sift_verifier_plan(v, c, drafts, 3, st, NULL), SIFT_OK);
        ck_assert_int_eq(st[0].k, 10);
        ck_assert_int_eq(st[0].flags, 0);
        for (int i = 1; i < 4; i++) {
            ck_assert_int_eq(st[i].k, 0);
            ck_assert_int_eq(st[i].flags, SIFT_VERIFY_NO_SHADOW);
        }
        sift_verify_args args;
        sift_verify_args_init(&args);
        args.drafts = drafts;
        args.n_drafts = 1;
        float row[16] = {0};
        const float *rows[2] = {row, row};
        args.rows = rows;
        args.n_vocab = 16;
        size_t n_out[2];
        int32_t np;
        sift_error err;
        ck_assert_int_eq(sift_verifier_distributions(v, c, &args, NULL, 0, n_out, &np, &err),
                         SIFT_E_STATE);
        ck_assert_int_eq(np, 0);
        /* no draft: the same (sift.h says so), the custom stage named
         * when the verifier has a shadow (a clone function) */
        args.n_drafts = 0;
        ck_assert_int_eq(sift_verifier_distributions(v, c, &args, NULL, 0, n_out, &np, &err),
                         SIFT_E_STATE);
        ck_assert_int_eq(np, 0);
        ck_assert_int_eq(err.index, with_clone ? 0 : -1);
        sift_verifier_free(v);
        sift_chain_free(c);
    }
}
END_TEST

/* The lazy grammar fires on "(" inside the drafts: the
 * positions before it lower nothing (k = top_k), the ones after it are
 * constrained (k with the grammar's slack) and name the grammar's few
 * allowed tokens as extras where it has few. */
START_TEST(test_a_lazy_grammar_firing_inside_the_drafts_constrains_the_later_positions)
{
    tu_rng r = {11};
    int32_t V = 40;
    sift_vocab *voc = arith_vocab(&r, V);
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_grammar(c, arith_grammar(voc, 1), NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 10, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_verifier *v;
    ck_assert_int_eq(sift_verifier_new(&v, c, 8, NULL), SIFT_OK);
    /* "0", "1", "(" (fires), then "2", ")" */
    int32_t drafts[5] = {0, 1, 11, 2, 12};
    sift_verify_step st[6];
    st[0].struct_size = sizeof st[0];
    ck_assert_int_eq(sift_verifier_plan(v, c, drafts, 5, st, NULL), SIFT_OK);
    sift_chain *ref;
    ck_assert_int_eq(sift_chain_clone(c, &ref, NULL), SIFT_OK);
    for (int i = 0; i < 6; i++) {
        sift_plan p = {.struct_size = sizeof p};
        ck_assert_int_eq(sift_chain_next_k(ref, &p, NULL), SIFT_OK);
        int32_t ids[64];
        size_t ne = 0;
        ck_assert_int_eq(sift_chain_extras(ref, ids, 64, &ne, NULL), SIFT_OK);
        ck_assert_int_eq(st[i].k, p.k);
        ck_assert_int_eq(st[i].n_extras, (int32_t)ne);
        for (size_t j = 0; j < ne; j++)
            ck_assert_int_eq(st[i].extras[j], ids[j]);
        ck_assert_int_eq(st[i].k, i <= 2 ? 10 : 10 + 64);
        if (i < 5) {
            sift_status s = sift_chain_accept(ref, drafts[i], NULL);
            if (s == SIFT_E_GRAMMAR_REJECT) {
                for (int j = i + 1; j < 6; j++)
                    ck_assert(st[j].flags & SIFT_VERIFY_UNREACHABLE);
                break;
            }
            ck_assert_int_eq(s, SIFT_OK);
        }
    }
    /* the grammar of the chain itself has not moved */
    ck_assert(!sift_grammar_is_triggered(sift__grammar_of_stage(sift__chain_stage(c, 0))));
    sift_chain_free(ref);
    sift_verifier_free(v);
    sift_chain_free(c);
    sift_vocab_free(voc);
}
END_TEST

/* A draft the (eager) grammar rejects can never be sampled: the
 * positions after it are unreachable. */
START_TEST(test_positions_after_a_draft_the_grammar_rejects_are_unreachable)
{
    tu_rng r = {12};
    int32_t V = 40;
    sift_vocab *voc = arith_vocab(&r, V);
    sift_chain *c = tu_chain_new(1, NULL);
    ck_assert_int_eq(sift_chain_add_grammar(c, arith_grammar(voc, 0), NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 10, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_verifier *v;
    ck_assert_int_eq(sift_verifier_new(&v, c, 8, NULL), SIFT_OK);
    int32_t drafts[4] = {1, 7, 7, 0}; /* "1", "+", "+": the second "+" is rejected */
    sift_verify_step st[5];
    st[0].struct_size = sizeof st[0];
    ck_assert_int_eq(sift_verifier_plan(v, c, drafts, 4, st, NULL), SIFT_OK);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq((st[i].flags & SIFT_VERIFY_UNREACHABLE) != 0, i >= 3);
    sift_verifier_free(v);
    sift_chain_free(c);
    sift_vocab_free(voc);
}
END_TEST

/* Check mode: a rejection at position i needs that position's row. With
 * slices and no hook, verification ends there with SIFT_E_NEED_ROW and
 * the positions before it accepted; with the hook it resamples from the
 * row as sift_chain_sample_slice does. */
START_TEST(test_a_check_grammar_rejection_ends_verification_at_that_position)
{
    tu_rng r = {13};
    int32_t V = 40;
    sift_vocab *voc = arith_vocab(&r, V);
    float *buf = malloc((size_t)3 * (size_t)V * sizeof *buf);
    const float *rows[3];
    for (int i = 0; i < 3; i++) {
        rows[i] = buf + (size_t)i * (size_t)V;
        for (int32_t j = 0; j < V; j++)
            buf[(size_t)i * (size_t)V + (size_t)j] = j == (i == 2 ? 7 : 1) ? 10.0f : 0.0f;
    }
    /* greedy picks "1", "1", then "+" then... position 2 forced to "+"
     * after "11": allowed; use "x" (21) at position 2: rejected */
    buf[2 * (size_t)V + 7] = 0.0f;
    buf[2 * (size_t)V + 21] = 10.0f;
    for (int with_hook = 0; with_hook < 2; with_hook++) {
        sift_chain *c = tu_chain_new(1, NULL), *b = tu_chain_new(1, NULL);
        ck_assert_int_eq(sift_chain_add_top_k(c, 4, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_set_check_grammar(c, arith_grammar(voc, 0), NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(b, 4, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_greedy(b, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_set_check_grammar(b, arith_grammar(voc, 0), NULL), SIFT_OK);
        sift_verifier *v;
        ck_assert_int_eq(sift_verifier_new(&v, c, 4, NULL), SIFT_OK);
        int32_t drafts[2] = {1, 1};
        sift_verify_step st[3];
        st[0].struct_size = sizeof st[0];
        ck_assert_int_eq(sift_verifier_plan(v, c, drafts, 2, st, NULL), SIFT_OK);
        sift_slicer *sl[3];
        sift_slice s[3];
        for (int i = 0; i < 3; i++) {
            ck_assert(st[i].flags & SIFT_VERIFY_CHECK_GRAMMAR);
            ck_assert_int_eq(sift_slicer_new(&sl[i], V, NULL, NULL), SIFT_OK);
            ck_assert_int_eq(sift_slicer_build(sl[i], rows[i], V, st[i].k, st[i].extras,
                                               (size_t)st[i].n_extras, &s[i], NULL),
                             SIFT_OK);
        }
        rows_hook h = {rows, 3, V, 0, -1};
        sift_verify_args args;
        sift_verify_args_init(&args);
        args.drafts = drafts;
        args.n_drafts = 2;
        args.slices = s;
        if (with_hook) {
            args.hook = hook_at;
            args.hook_user = &h;
        }
        sift_verify_result res = {.struct_size = sizeof res};
        sift_error err;
        sift_status vs = sift_chain_verify(c, &args, &res, &err);
        int32_t tok = -1;
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(sift_chain_sample(b, rows[i], V, &tok, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(b, tok, NULL), SIFT_OK);
        }
        if (with_hook) {
            ck_assert_int_eq(vs, SIFT_OK);
            ck_assert_int_eq(h.calls, 1);
            ck_assert_int_eq(h.last_position, 2);
            ck_assert_int_eq(sift_chain_sample(b, rows[2], V, &tok, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(b, tok, NULL), SIFT_OK);
            ck_assert_int_eq(res.token, tok);
            ck_assert_int_ne(tok, 21);
        } else {
            ck_assert_int_eq(vs, SIFT_E_NEED_ROW);
            ck_assert_int_eq(res.position, 2);
        }
        ck_assert_int_eq(res.n_accepted, 2);
        ck_assert(sift__chain_state_digest(c) == sift__chain_state_digest(b));
        for (int i = 0; i < 3; i++)
            sift_slicer_free(sl[i]);
        sift_verifier_free(v);
        sift_chain_free(c);
        sift_chain_free(b);
    }
    free(buf);
    sift_vocab_free(voc);
}
END_TEST

/* A counting allocator: the plan allocates nothing after its first call
 * (penalties, DRY, logit bias, mirostat). */
typedef struct count_al {
    long n;
} count_al;
static void *ca_alloc(void *u, size_t n)
{
    ((count_al *)u)->n++;
    return malloc(n);
}
static void ca_free(void *u, void *p)
{
    (void)u;
    free(p);
}

START_TEST(test_the_plan_allocates_nothing_after_the_first_call)
{
    count_al ca = {0};
    sift_allocator al = {sizeof al, ca_alloc, ca_free, &ca, NULL};
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.allocator = &al;
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, NULL), SIFT_OK);
    sift_dry_params dp;
    sift_dry_params_init(&dp);
    dp.multiplier = 0.8f;
    dp.last_n = 64;
    ck_assert_int_eq(sift_chain_add_dry(c, &dp, NULL, NULL), SIFT_OK);
    sift_bias bias[2] = {{3, 2.0f}, {9, -1.0f}};
    ck_assert_int_eq(sift_chain_add_logit_bias(c, bias, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_mirostat_v2(c, 5.0f, 0.1f, NULL), SIFT_OK);
    sift_verifier *v;
    ck_assert_int_eq(sift_verifier_new(&v, c, MAXD, NULL), SIFT_OK);
    int32_t drafts[MAXD];
    tu_rng r = {14};
    sift_verify_step st[MAXD + 1];
    st[0].struct_size = sizeof st[0];
    for (int it = 0; it < 20; it++) {
        for (int i = 0; i < MAXD; i++)
            drafts[i] = (int32_t)tu_range(&r, 0, 30);
        ck_assert_int_eq(sift_chain_accept(c, drafts[0], NULL), SIFT_OK);
        long before = ca.n;
        ck_assert_int_eq(sift_verifier_plan(v, c, drafts, MAXD, st, NULL), SIFT_OK);
        if (it > 0)
            ck_assert_int_eq(ca.n, before);
    }
    sift_verifier_free(v);
    sift_chain_free(c);
}
END_TEST

/* With a lazy grammar (its allocator counted too): once the shadow's
 * grammar caches hold the states of a step, planning it again (a
 * runtime retrying a step, or the same state next time) allocates
 * nothing: the re-sync and the accepts reuse the buffers. */
START_TEST(test_replanning_a_grammar_chain_allocates_nothing)
{
    count_al ca = {0};
    sift_allocator al = {sizeof al, ca_alloc, ca_free, &ca, NULL};
    tu_rng r = {15};
    int32_t V = 40;
    sift_vocab *voc = arith_vocab(&r, V);
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.allocator = &al;
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.allocator = &al;
    sift_grammar *g;
    ck_assert_int_eq(sift_grammar_new(&g, arith, strlen(arith), voc, &gp, NULL), SIFT_OK);
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    static const char *const words[] = {"("};
    lp.words = words;
    lp.n_words = 1;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_grammar(c, g, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_penalties(c, 16, 1.1f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 10, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    /* fire the trigger on the chain itself: "(", then "1" */
    ck_assert_int_eq(sift_chain_accept(c, 11, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, 1, NULL), SIFT_OK);
    sift_verifier *v;
    ck_assert_int_eq(sift_verifier_new(&v, c, 8, NULL), SIFT_OK);
    int32_t drafts[6] = {7, 11, 2, 10, 3, 12}; /* "+", "(", "2", "/", "3", ")" */
    sift_verify_step st[7];
    st[0].struct_size = sizeof st[0];
    ck_assert_int_eq(sift_verifier_plan(v, c, drafts, 6, st, NULL), SIFT_OK);
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(st[i].flags, 0);
    long before = ca.n;
    for (int it = 0; it < 3; it++)
        ck_assert_int_eq(sift_verifier_plan(v, c, drafts, 6, st, NULL), SIFT_OK);
    ck_assert_int_eq(ca.n, before);
    sift_verifier_free(v);
    sift_chain_free(c);
    sift_vocab_free(voc);
}
END_TEST

START_TEST(test_the_batch_plan_gives_every_slot_its_steps_and_the_largest_k)
{
    sift_chain *c[3];
    sift_verifier *v[3];
    int32_t d0[2] = {1, 2}, d1[1] = {3}, d2[3] = {4, 4, 4};
    const int32_t *drafts[3] = {d0, d1, d2};
    int32_t nd[3] = {2, 1, 3};
    sift_verify_step s0[3], s1[2], s2[4];
    sift_verify_step *steps[3] = {s0, s1, s2};
    for (int j = 0; j < 3; j++) {
        c[j] = tu_chain_new((uint64_t)j, NULL);
        ck_assert_int_eq(sift_chain_add_penalties(c[j], 8, 1.2f, 0.0f, 0.0f, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(c[j], 10 * (j + 1), NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c[j], NULL), SIFT_OK);
        ck_assert_int_eq(sift_verifier_new(&v[j], c[j], 4, NULL), SIFT_OK);
        steps[j][0].struct_size = sizeof(sift_verify_step);
    }
    int32_t kmax = -1;
    ck_assert_int_eq(sift_verifiers_plan(v, c, drafts, nd, 3, steps, &kmax, NULL), SIFT_OK);
    /* slot 2: top_k 30 + one distinct token after the first draft */
    ck_assert_int_eq(kmax, 31);
    ck_assert_int_eq(s2[0].k, 30);
    ck_assert_int_eq(s2[3].k, 31);
    ck_assert_int_eq(s0[2].k, 12);
    ck_assert_int_eq(s1[1].k, 21);
    for (int j = 0; j < 3; j++) {
        sift_verifier_free(v[j]);
        sift_chain_free(c[j]);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The property suite                                                  */
/* ------------------------------------------------------------------ */

static const sp_kind lows[] = {SP_PENALTIES, SP_DRY, SP_LOGIT_BIAS, SP_TEMP};
static const sp_kind cuts[] = {SP_TOP_K, SP_TOP_K, SP_TOP_K_TIES, SP_MIN_P, SP_TOP_P};
static const sp_kind mids[] = {SP_TOP_P, SP_MIN_P, SP_TEMP, SP_TYPICAL, SP_XTC, SP_TOP_N_SIGMA};
static const sp_kind sels[] = {SP_GREEDY, SP_DIST, SP_DIST_ID, SP_MIROSTAT, SP_MIROSTAT_V2};

static void gen_chain(tu_rng *r, sp_chain *spec, int32_t V)
{
    size_t n_low = (size_t)tu_range(r, 0, 3);
    for (size_t i = 0; i < n_low; i++)
        gen_stage(r, &spec->st[spec->n++], lows[tu_range(r, 0, (int64_t)N(lows) - 1)], V);
    if (tu_unif(r) < 0.85) {
        sp_stage *cut = &spec->st[spec->n++];
        gen_stage(r, cut, cuts[tu_range(r, 0, (int64_t)N(cuts) - 1)], V);
        if (cut->kind == SP_TOP_K || cut->kind == SP_TOP_K_TIES)
            cut->i0 = (int32_t)tu_range(r, 1, 50);
    }
    size_t n_after = (size_t)tu_range(r, 0, 2);
    for (size_t i = 0; i < n_after; i++)
        gen_stage(r, &spec->st[spec->n++], mids[tu_range(r, 0, (int64_t)N(mids) - 1)], V);
    gen_stage(r, &spec->st[spec->n++], sels[tu_range(r, 0, (int64_t)N(sels) - 1)], V);
}

typedef struct tally {
    long cases, steps, positions, accepted, mismatched, hooks, need_row, dists, errors;
    long slice_steps, row_steps, grammar_steps;
    long slices, device_slices; /* slices handed to verify, and those made device-style */
    long unflagged;             /* canonical slices handed over without the flag */
    long rechosen;              /* device slices whose tied tokens changed */
} tally;

/* The chain of a case: the spec's stages, with a grammar stage first
 * (gmode 1 eager, 2 lazy) or a check grammar (gmode 3), or none. */
static sift_chain *build(const sp_chain *spec, int gmode, const sift_vocab *voc)
{
    sift_chain *c = tu_chain_new(spec->seed, NULL);
    if (gmode == 1 || gmode == 2)
        ck_assert_int_eq(sift_chain_add_grammar(c, arith_grammar(voc, gmode == 2), NULL), SIFT_OK);
    for (size_t i = 0; i < spec->n; i++) {
        sift_error err;
        ck_assert_msg(sp_add(c, &spec->st[i], &err) == SIFT_OK, "%s", err.message);
    }
    if (gmode == 3)
        ck_assert_int_eq(sift_chain_set_check_grammar(c, arith_grammar(voc, 0), NULL), SIFT_OK);
    return c;
}

/* The plan against its definition: next_k and extras on a clone that
 * accepts the drafts one by one. */
static void check_plan(sift_chain *c, const int32_t *drafts, int32_t n, const sift_verify_step *st,
                       const char *desc)
{
    sift_chain *ref;
    ck_assert_int_eq(sift_chain_clone(c, &ref, NULL), SIFT_OK);
    int32_t ids[256];
    for (int32_t i = 0; i <= n; i++) {
        sift_plan p = {.struct_size = sizeof p};
        ck_assert_int_eq(sift_chain_next_k(ref, &p, NULL), SIFT_OK);
        size_t ne = 0;
        sift_status es = sift_chain_extras(ref, ids, N(ids), &ne, NULL);
        int32_t want_k = es == SIFT_OK ? p.k : 0;
        ck_assert_msg(st[i].k == want_k, "position %d: plan k %d, next_k %d\n  %s", (int)i,
                      (int)st[i].k, (int)want_k, desc);
        ck_assert_msg(st[i].flags == (c->check ? SIFT_VERIFY_CHECK_GRAMMAR : 0u),
                      "position %d flags %u\n  %s", (int)i, (unsigned)st[i].flags, desc);
        if (want_k > 0) {
            ck_assert_msg(st[i].n_extras == (int32_t)ne, "position %d: %d extras, want %zu\n  %s",
                          (int)i, (int)st[i].n_extras, ne, desc);
            for (size_t j = 0; j < ne; j++)
                ck_assert_int_eq(st[i].extras[j], ids[j]);
        }
        if (i == n)
            break;
        /* "sampled and accepted": an accept after a sample settles the
         * stages (DRY's penalised set), as in the verify call */
        ref->settle_due = 1;
        sift_status s = sift_chain_accept(ref, drafts[i], NULL);
        if (s == SIFT_E_GRAMMAR_REJECT) {
            for (int32_t j = i + 1; j <= n; j++)
                ck_assert_msg(st[j].flags & SIFT_VERIFY_UNREACHABLE, "position %d reachable\n  %s",
                              (int)j, desc);
            break;
        }
        ck_assert_int_eq(s, SIFT_OK);
    }
    sift_chain_free(ref);
}

/* The target distributions against sift_chain_distribution on a clone
 * that accepts the drafts. */
static void check_distributions(sift_verifier *v, sift_chain *c, const sift_verify_args *args,
                                const float *const *rows, int32_t V, tally *ty, const char *desc)
{
    int32_t n = args->n_drafts;
    size_t cap = (size_t)V;
    sift_token_prob *out = malloc((size_t)(n + 1) * cap * sizeof *out);
    sift_token_prob *want = malloc(cap * sizeof *want);
    size_t n_out[MAXD + 1];
    int32_t np = -1;
    sift_error err;
    sift_status s = sift_verifier_distributions(v, c, args, out, cap, n_out, &np, &err);
    sift_chain *ref;
    ck_assert_int_eq(sift_chain_clone(c, &ref, NULL), SIFT_OK);
    for (int32_t i = 0; i <= n; i++) {
        if (s == SIFT_E_NEED_ROW && np == i) {
            ck_assert_msg(!args->hook && !c->hook, "NEED_ROW with a hook\n  %s", desc);
            break; /* the slice could not decide position i and there is no hook */
        }
        size_t nw = 0;
        sift_status ws = sift_chain_distribution(ref, rows[i], V, want, cap, &nw, NULL);
        if (ws != SIFT_OK) {
            ck_assert_msg(s == ws && np == i, "position %d: distributions %d (np %d), row %d\n  %s",
                          (int)i, (int)s, (int)np, (int)ws, desc);
            break;
        }
        ck_assert_msg(np > i, "position %d missing (np %d, status %d: %s)\n  %s", (int)i, (int)np,
                      (int)s, s ? err.message : "", desc);
        ck_assert_msg(n_out[i] == nw, "position %d: %zu entries, want %zu\n  %s", (int)i, n_out[i],
                      nw, desc);
        ck_assert_msg(memcmp(out + (size_t)i * cap, want, nw * sizeof *want) == 0,
                      "position %d: distributions differ\n  %s", (int)i, desc);
        ty->dists++;
        if (i == n) {
            ck_assert_int_eq(s, SIFT_OK);
            break;
        }
        sift_status as = sift_chain_accept(ref, args->drafts[i], NULL);
        if (as == SIFT_E_GRAMMAR_REJECT) {
            ck_assert_int_eq(s, SIFT_OK);
            ck_assert_int_eq(np, i + 1);
            break;
        }
        ck_assert_int_eq(as, SIFT_OK);
    }
    sift_chain_free(ref);
    free(out);
    free(want);
}

/* Runs `cases` random chains, and more until `min` positions are
 * sampled. */
static void property(uint64_t seed, long cases, long min, tally *ty)
{
    tu_rng r = {seed};
    char desc[2048];
    sift_slicer *sl[MAXD + 1];
    tu_device_slice dv[MAXD + 1];
    for (int i = 0; i <= MAXD; i++) {
        ck_assert_int_eq(sift_slicer_new(&sl[i], 4096, NULL, NULL), SIFT_OK);
        ck_assert(tu_device_init(&dv[i], 4096));
    }
    for (long cs = 0; cs < cases || ty->positions < min; cs++) {
        int gmode = cs % 5 == 4 ? (int)tu_range(&r, 1, 3) : 0;
        int32_t V =
            gmode ? (int32_t)tu_range(&r, 30, 120)
                  : (cs % 9 == 0 ? (int32_t)tu_range(&r, 2, 16) : (int32_t)tu_range(&r, 50, 3000));
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        gen_chain(&r, &spec, V);
        sp_describe(&spec, desc, sizeof desc);
        size_t dl = strlen(desc);
        snprintf(desc + dl, sizeof desc - dl, " | V %d grammar %d case %ld", (int)V, gmode, cs);
        sift_vocab *voc = gmode ? arith_vocab(&r, V) : NULL;
        sift_chain *a = build(&spec, gmode, voc), *b = build(&spec, gmode, voc);
        or_chain o;
        if (!gmode)
            or_init(&o, &spec);
        int32_t alpha = V < 12 ? V : 12;
        int n_prompt = (int)tu_range(&r, 0, 20);
        for (int i = 0; i < n_prompt; i++) {
            int32_t t = (int32_t)tu_range(&r, 0, alpha - 1);
            ck_assert_int_eq(sift_chain_accept_prompt(a, t, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept_prompt(b, t, NULL), SIFT_OK);
            if (!gmode)
                or_accept_prompt(&o, t);
        }
        sift_verifier *v;
        ck_assert_int_eq(sift_verifier_new(&v, a, MAXD, NULL), SIFT_OK);
        float *buf = malloc((size_t)(MAXD + 1) * (size_t)V * sizeof *buf);
        const float *rows[MAXD + 1];
        for (int i = 0; i <= MAXD; i++)
            rows[i] = buf + (size_t)i * (size_t)V;
        int n_steps = (int)tu_range(&r, 1, 3);
        int alive = 1;
        for (int step = 0; step < n_steps && alive; step++) {
            int32_t n =
                tu_unif(&r) < 0.7 ? (int32_t)tu_range(&r, 0, 6) : (int32_t)tu_range(&r, 7, MAXD);
            for (int32_t i = 0; i <= n; i++)
                tu_row(&r, buf + (size_t)i * (size_t)V, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
            /* drafts: what the sequential loop samples (a simulation on a
             * clone), with a wrong token here and there */
            int32_t drafts[MAXD];
            sift_chain *sim;
            ck_assert_int_eq(sift_chain_clone(a, &sim, NULL), SIFT_OK);
            double p_wrong = tu_unif(&r) * 0.3;
            int sim_ok = 1;
            for (int32_t i = 0; i < n; i++) {
                int32_t t = -1;
                if (sim_ok && sift_chain_sample(sim, rows[i], V, &t, NULL) != SIFT_OK)
                    sim_ok = 0;
                if (!sim_ok || tu_unif(&r) < p_wrong)
                    t = (int32_t)tu_range(&r, 0, V - 1);
                drafts[i] = t;
                if (sim_ok && sift_chain_accept(sim, t, NULL) != SIFT_OK)
                    sim_ok = 0;
            }
            sift_chain_free(sim);
            /* the plan */
            sift_verify_step st[MAXD + 1];
            st[0].struct_size = sizeof st[0];
            sift_error err;
            ck_assert_msg(sift_verifier_plan(v, a, drafts, n, st, &err) == SIFT_OK,
                          "plan: %s\n  %s", err.message, desc);
            check_plan(a, drafts, n, st, desc);
            /* the inputs: slices at the planned k (sometimes smaller),
             * half of them as a device top-k makes them (shuffled, the
             * ties at the smallest logit re-chosen, no canonical flag), or
             * whole rows */
            int use_rows = tu_unif(&r) < 0.25;
            int with_hook = tu_unif(&r) < 0.8;
            sift_slice s[MAXD + 1];
            for (int32_t i = 0; i <= n && !use_rows; i++) {
                int32_t k = st[i].k > 0 && st[i].k < V ? st[i].k : V;
                if (tu_unif(&r) < 0.15)
                    k = (int32_t)tu_range(&r, 1, k);
                ck_assert_int_eq(sift_slicer_build(sl[i], rows[i], V, k, st[i].extras,
                                                   (size_t)st[i].n_extras, &s[i], NULL),
                                 SIFT_OK);
                double u = tu_unif(&r);
                if (u < 0.5) {
                    tu_devicify(&dv[i], &r, rows[i], V, &s[i], st[i].extras,
                                (size_t)st[i].n_extras);
                    ty->device_slices++;
                } else if (u < 0.65) {
                    /* canonical, but not said to be: sift's already-canonical
                     * path of the device contract */
                    s[i].flags = 0;
                    ty->unflagged++;
                }
                ty->slices++;
            }
            sift_verify_args args;
            sift_verify_args_init(&args);
            args.drafts = drafts;
            args.n_drafts = n;
            if (use_rows) {
                args.rows = rows;
                args.n_vocab = V;
            } else {
                args.slices = s;
            }
            rows_hook h = {rows, n + 1, V, 0, -1};
            if (with_hook) {
                args.hook = hook_at;
                args.hook_user = &h;
            }
            if (tu_unif(&r) < 0.1)
                args.flags = SIFT_VERIFY_KEEP_LAST;
            if (!gmode || gmode == 3 || tu_unif(&r) < 0.5)
                check_distributions(v, a, &args, rows, V, ty, desc);
            h.calls = 0; /* the distributions' hook calls are not the verify's */
            sift_verify_result res = {.struct_size = sizeof res};
            sift_status vs = sift_chain_verify(a, &args, &res, &err);
            ty->steps++;
            ty->slice_steps += !use_rows;
            ty->row_steps += use_rows;
            ty->grammar_steps += gmode != 0;
            ty->hooks += h.calls;
            ck_assert_int_eq((long)res.hook_calls, (long)h.calls);
            /* the sequential loop on whole rows */
            int32_t acc = 0, tok = -1;
            sift_status bs = SIFT_OK;
            for (int32_t i = 0; i <= n; i++) {
                if (vs == SIFT_E_NEED_ROW && i == res.position) {
                    /* the slice could not decide: the sequential loop on
                     * the same slice stops there too (a selector's
                     * pending record, as a mirostat's, is what it ran) */
                    int32_t t2 = -1;
                    ck_assert_int_eq(sift_chain_sample_slice(b, &s[i], &t2, NULL), SIFT_E_NEED_ROW);
                    break;
                }
                int32_t to = -1;
                sift_status so = SIFT_OK;
                if (!gmode)
                    so = or_sample(&o, rows[i], V, &to);
                bs = sift_chain_sample(b, rows[i], V, &tok, NULL);
                ty->positions++;
                if (!gmode)
                    ck_assert_msg(so == bs && (bs || to == tok),
                                  "oracle %d (tok %d), sequential %d (tok %d)\n  %s", (int)so,
                                  (int)to, (int)bs, (int)tok, desc);
                if (bs)
                    break;
                int last = i == n || tok != drafts[i];
                if (!(last && args.flags)) {
                    /* a lazy grammar may refuse the token that fired it */
                    if ((bs = sift_chain_accept(b, tok, NULL)) != SIFT_OK)
                        break;
                    if (!gmode)
                        or_accept(&o, tok);
                }
                if (last)
                    break;
                acc++;
            }
            if (vs == SIFT_E_NEED_ROW) {
                ck_assert_msg(!with_hook, "NEED_ROW with a hook\n  %s", desc);
                ty->need_row++;
                ck_assert_int_eq(res.n_accepted, acc);
                ck_assert_int_eq(res.token, -1);
            } else {
                ck_assert_msg(vs == bs, "verify %d (%s), sequential %d\n  %s", (int)vs,
                              vs ? err.message : "", (int)bs, desc);
                ck_assert_msg(res.n_accepted == acc, "accepted %d, sequential %d\n  %s",
                              (int)res.n_accepted, (int)acc, desc);
                if (vs == SIFT_OK) {
                    ck_assert_msg(res.token == tok, "token %d, sequential %d\n  %s", (int)res.token,
                                  (int)tok, desc);
                    ty->mismatched += res.n_accepted < n;
                } else {
                    ty->errors++;
                    alive = 0;
                }
            }
            ty->accepted += res.n_accepted;
            uint64_t ra[4], rb[4];
            sift__chain_rng_state(a, ra);
            sift__chain_rng_state(b, rb);
            ck_assert_msg(memcmp(ra, rb, sizeof ra) == 0, "RNG differs after verify\n  %s", desc);
            ck_assert_msg(sift__chain_state_digest(a) == sift__chain_state_digest(b),
                          "state differs after verify\n  %s", desc);
            if (vs == SIFT_E_NEED_ROW)
                alive = 0;
        }
        ty->cases++;
        free(buf);
        sift_verifier_free(v);
        if (!gmode)
            or_free(&o);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_vocab_free(voc);
    }
    for (int i = 0; i <= MAXD; i++) {
        ty->rechosen += dv[i].rechosen;
        sift_slicer_free(sl[i]);
        tu_device_free(&dv[i]);
    }
}

START_TEST(test_verify_equals_the_sequential_loop_and_the_oracle_bitwise)
{
    tally ty;
    memset(&ty, 0, sizeof ty);
    long cases = n_cases(), min = min_positions();
    property(2026, cases, min, &ty);
    fprintf(stderr,
            "verify: %ld chains, %ld verify steps (%ld on slices, %ld on rows, %ld with a "
            "grammar), %ld positions sampled, %ld drafts accepted, %ld steps stopped at a "
            "mismatch, %ld hook calls, %ld NEED_ROW, %ld errors as sequential, %ld target "
            "distributions compared; 0 mismatches\n"
            "verify: %ld slices, %ld of them device-style (shuffled, no canonical flag), tied "
            "tokens re-chosen in %ld, %ld canonical without the flag; at least %ld positions "
            "asked for\n",
            ty.cases, ty.steps, ty.slice_steps, ty.row_steps, ty.grammar_steps, ty.positions,
            ty.accepted, ty.mismatched, ty.hooks, ty.need_row, ty.errors, ty.dists, ty.slices,
            ty.device_slices, ty.rechosen, ty.unflagged, min);
    ck_assert_int_ge(ty.cases, cases);
    ck_assert_msg(ty.positions >= min, "%ld positions sampled, %ld asked for", ty.positions, min);
    ck_assert(ty.accepted > 0 && ty.mismatched > 0 && ty.dists > 0 && ty.grammar_steps > 0);
    ck_assert(ty.device_slices > 0 && ty.device_slices < ty.slices && ty.unflagged > 0);
    if (cases >= 200)
        ck_assert(ty.hooks > 0 && ty.need_row > 0 && ty.rechosen > 0);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("verify");
    TCase *tc = tcase_create("verify");
    tcase_add_test(tc, test_verify_accepts_matching_drafts_and_returns_the_bonus_token);
    tcase_add_test(tc, test_verify_stops_at_the_first_mismatch_with_the_corrected_token);
    tcase_add_test(tc, test_the_hook_is_told_the_position_it_needs);
    tcase_add_test(
        tc, test_without_a_hook_verification_stops_with_need_row_keeping_the_accepted_prefix);
    tcase_add_test(tc, test_bad_arguments_are_refused_and_change_nothing);
    suite_add_tcase(s, tc);
    tc = tcase_create("plan");
    tcase_add_test(tc, test_the_plan_follows_the_penalty_window_through_the_drafts);
    tcase_add_test(tc, test_a_custom_stage_makes_positions_after_the_first_whole_row);
    tcase_add_test(tc, test_a_lazy_grammar_firing_inside_the_drafts_constrains_the_later_positions);
    tcase_add_test(tc, test_positions_after_a_draft_the_grammar_rejects_are_unreachable);
    tcase_add_test(tc, test_a_check_grammar_rejection_ends_verification_at_that_position);
    tcase_add_test(tc, test_the_plan_allocates_nothing_after_the_first_call);
    tcase_add_test(tc, test_replanning_a_grammar_chain_allocates_nothing);
    tcase_add_test(tc, test_the_batch_plan_gives_every_slot_its_steps_and_the_largest_k);
    suite_add_tcase(s, tc);
    tc = tcase_create("property");
    tcase_set_timeout(tc, 900); /* as check_slice's property runs; the rest: Check's default */
    tcase_add_test(tc, test_verify_equals_the_sequential_loop_and_the_oracle_bitwise);
    suite_add_tcase(s, tc);
    return s;
}

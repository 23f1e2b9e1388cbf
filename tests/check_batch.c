/*
 * check_batch.c - batches (src/core/batch.c): sift_chains_sample against
 * the loop of single calls it stands for.
 *
 * The property test is the proof: random chains (every stage family the
 * oracle models), n slots each with its own chain, random rows of every
 * shape, a few slots given a bad row or a NULL chain; each batch on whole
 * rows or on slices (built at the chain's dynamic k, sometimes smaller so
 * that the row hook runs: each chain's own, the batch's positional one or
 * none), with or without SIFT_BATCH_ACCEPT. A twin set of chains runs the
 * single calls slot by slot; after every batch the statuses, the tokens,
 * the RNG states, the state digests and the sift_chain_stats counters
 * are equal bitwise, and on rows the tokens are the oracle's.
 *
 * The unit tests pin the contract: a failing slot changes only itself,
 * the same chain twice is refused as a whole with nothing changed (and
 * the marks of the scan do not outlive it), refused arguments, the
 * positional hook, no allocation after the first batch, and the failing
 * allocator at every count failing one slot at a time.
 *
 * SIFT_BATCH_CASES (environment) sets the number of batches (default 300).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define MAXS 12

static long n_cases(void)
{
    const char *e = getenv("SIFT_BATCH_CASES");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : 300;
}

/* Everything of a chain a batch may change, for bitwise comparison. */
typedef struct snap {
    uint64_t rng[4];
    uint64_t digest;
    sift_stats st;
} snap;

static void take(const sift_chain *c, snap *s)
{
    memset(s, 0, sizeof *s);
    sift__chain_rng_state(c, s->rng);
    s->digest = sift__chain_state_digest(c);
    s->st.struct_size = sizeof s->st;
    ck_assert_int_eq(sift_chain_stats(c, &s->st, NULL), SIFT_OK);
}

static int same(const sift_chain *a, const sift_chain *b)
{
    snap x, y;
    take(a, &x);
    take(b, &y);
    return memcmp(&x, &y, sizeof x) == 0;
}

static int unchanged(const sift_chain *c, const snap *before)
{
    snap now;
    take(c, &now);
    return memcmp(&now, before, sizeof now) == 0;
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

/* A chain's own hook: one row. */
typedef struct row_hook {
    const float *row;
    int calls;
} row_hook;

static int hook_one(void *user, float *row, int32_t V)
{
    row_hook *h = user;
    h->calls++;
    memcpy(row, h->row, (size_t)V * sizeof *row);
    return 0;
}

static void fill_rows(tu_rng *r, float *buf, const float **rows, size_t n, int32_t V)
{
    for (size_t i = 0; i < n; i++) {
        rows[i] = buf + i * (size_t)V;
        tu_row(r, buf + i * (size_t)V, V, TU_ROW_NORMAL);
    }
}

static void batch_rows(sift_batch_args *a, sift_chain *const *chains, size_t n,
                       const float *const *rows, int32_t V)
{
    sift_batch_args_init(a);
    a->chains = chains;
    a->n = n;
    a->rows = rows;
    a->n_vocab = V;
}

/* ------------------------------------------------------------------ */
/* Unit tests                                                          */
/* ------------------------------------------------------------------ */

START_TEST(test_a_batch_on_rows_gives_the_tokens_of_the_single_calls)
{
    enum { V = 64, n = 5 };
    tu_rng r = {3};
    float buf[n * V];
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    sift_chain *a[n], *b[n];
    for (size_t i = 0; i < n; i++) {
        a[i] = tu_small_chain(i + 1, NULL);
        b[i] = tu_small_chain(i + 1, NULL);
    }
    int32_t tokens[n];
    sift_status st[n];
    for (int step = 0; step < 10; step++) {
        sift_batch_args args;
        batch_rows(&args, a, n, rows, V);
        args.flags = SIFT_BATCH_ACCEPT;
        ck_assert_int_eq(sift_chains_sample(&args, tokens, st, NULL), SIFT_OK);
        for (size_t i = 0; i < n; i++) {
            int32_t t;
            ck_assert_int_eq(sift_chain_sample(b[i], rows[i], V, &t, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(b[i], t, NULL), SIFT_OK);
            ck_assert_int_eq(st[i], SIFT_OK);
            ck_assert_int_eq(tokens[i], t);
            ck_assert(same(a[i], b[i]));
        }
    }
    for (size_t i = 0; i < n; i++) {
        sift_chain_free(a[i]);
        sift_chain_free(b[i]);
    }
}
END_TEST

START_TEST(test_without_the_accept_flag_a_batch_only_samples)
{
    enum { V = 64, n = 3 };
    tu_rng r = {4};
    float buf[n * V];
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    sift_chain *a[n], *b[n];
    for (size_t i = 0; i < n; i++) {
        a[i] = tu_small_chain(i + 7, NULL);
        b[i] = tu_small_chain(i + 7, NULL);
    }
    int32_t tokens[n];
    sift_status st[n];
    sift_batch_args args;
    batch_rows(&args, a, n, rows, V);
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, NULL), SIFT_OK);
    for (size_t i = 0; i < n; i++) {
        int32_t t;
        ck_assert_int_eq(sift_chain_sample(b[i], rows[i], V, &t, NULL), SIFT_OK);
        ck_assert_int_eq(tokens[i], t);
        ck_assert(same(a[i], b[i])); /* no accept on either side */
        ck_assert_int_eq(sift_chain_accept(a[i], t, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b[i], t, NULL), SIFT_OK);
        ck_assert(same(a[i], b[i]));
        sift_chain_free(a[i]);
        sift_chain_free(b[i]);
    }
}
END_TEST

START_TEST(test_a_failing_slot_changes_neither_its_chain_nor_the_others)
{
    enum { V = 64, n = 5 };
    tu_rng r = {5};
    float buf[n * V];
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    buf[1 * V + 17] = NAN;     /* slot 1: a NaN at 17 */
    buf[3 * V + 2] = INFINITY; /* slot 3: +inf at 2 */
    sift_chain *a[n], *b[n];
    for (size_t i = 0; i < n; i++) {
        a[i] = tu_small_chain(i + 11, NULL);
        b[i] = tu_small_chain(i + 11, NULL);
    }
    snap before1, before3;
    take(a[1], &before1);
    take(a[3], &before3);
    int32_t tokens[n];
    sift_status st[n];
    sift_error errs[n], err;
    sift_batch_args args;
    batch_rows(&args, a, n, rows, V);
    args.flags = SIFT_BATCH_ACCEPT;
    args.errors = errs;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ROW_VALUE);
    ck_assert_int_eq(err.code, SIFT_E_ROW_VALUE);
    ck_assert_int_eq(err.index, 1); /* the first failing slot */
    ck_assert_msg(strncmp(err.message, "slot 1: ", 8) == 0, "%s", err.message);
    ck_assert_int_eq(st[1], SIFT_E_ROW_VALUE);
    ck_assert_int_eq(errs[1].index, 17); /* the single call's own index */
    ck_assert_int_eq(st[3], SIFT_E_ROW_VALUE);
    ck_assert_int_eq(errs[3].index, 2);
    ck_assert_int_eq(tokens[1], -1);
    ck_assert_int_eq(tokens[3], -1);
    ck_assert(unchanged(a[1], &before1));
    ck_assert(unchanged(a[3], &before3));
    for (size_t i = 0; i < n; i += 2) { /* 0, 2, 4 as if they were alone */
        int32_t t;
        ck_assert_int_eq(sift_chain_sample(b[i], rows[i], V, &t, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b[i], t, NULL), SIFT_OK);
        ck_assert_int_eq(st[i], SIFT_OK);
        ck_assert_int_eq(tokens[i], t);
        ck_assert(same(a[i], b[i]));
    }
    for (size_t i = 0; i < n; i++) {
        sift_chain_free(a[i]);
        sift_chain_free(b[i]);
    }
}
END_TEST

START_TEST(test_a_null_chain_fails_its_slot_only)
{
    enum { V = 32, n = 3 };
    tu_rng r = {6};
    float buf[n * V];
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    sift_chain *a[n] = {tu_small_chain(1, NULL), NULL, tu_small_chain(2, NULL)};
    int32_t tokens[n];
    sift_status st[n];
    sift_error err;
    sift_batch_args args;
    batch_rows(&args, a, n, rows, V);
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 1);
    ck_assert_int_eq(st[0], SIFT_OK);
    ck_assert_int_eq(st[1], SIFT_E_ARG);
    ck_assert_int_eq(st[2], SIFT_OK);
    ck_assert_int_eq(tokens[1], -1);
    ck_assert_int_ge(tokens[0], 0);
    ck_assert_int_ge(tokens[2], 0);
    sift_chain_free(a[0]);
    sift_chain_free(a[2]);
}
END_TEST

START_TEST(test_the_same_chain_twice_is_refused_and_changes_nothing)
{
    enum { V = 32, n = 4 };
    tu_rng r = {8};
    float buf[n * V];
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    sift_chain *c0 = tu_small_chain(1, NULL), *c1 = tu_small_chain(2, NULL),
               *c2 = tu_small_chain(3, NULL);
    sift_chain *a[n] = {c0, c1, c2, c1};
    snap s0, s1, s2;
    take(c0, &s0);
    take(c1, &s1);
    take(c2, &s2);
    int32_t tokens[n] = {5, 5, 5, 5};
    sift_status st[n] = {SIFT_OK, SIFT_OK, SIFT_OK, SIFT_OK};
    sift_error err;
    sift_batch_args args;
    batch_rows(&args, a, n, rows, V);
    args.flags = SIFT_BATCH_ACCEPT;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 3);
    ck_assert_msg(strstr(err.message, "chains[3] is args.chains[1]") != NULL, "%s", err.message);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(st[i], SIFT_E_ARG);
        ck_assert_int_eq(tokens[i], -1);
    }
    ck_assert(unchanged(c0, &s0) && unchanged(c1, &s1) && unchanged(c2, &s2));
    /* the marks of the scan are gone: the same chains in other batches
     * are fine, including the one that came twice */
    sift_chain *ok[3] = {c1, c2, c0};
    batch_rows(&args, ok, 3, rows, V);
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_OK);
    sift_chain *one[1] = {c1};
    batch_rows(&args, one, 1, rows, V);
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_OK);
    /* the first two slots equal */
    sift_chain *first[2] = {c2, c2};
    batch_rows(&args, first, 2, rows, V);
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 1);
    sift_chain_free(c0);
    sift_chain_free(c1);
    sift_chain_free(c2);
}
END_TEST

START_TEST(test_bad_arguments_are_refused_as_a_whole)
{
    enum { V = 32, n = 2 };
    tu_rng r = {9};
    float buf[n * V];
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    sift_chain *a[n] = {tu_small_chain(1, NULL), tu_small_chain(2, NULL)};
    snap s0, s1;
    take(a[0], &s0);
    take(a[1], &s1);
    int32_t tokens[n];
    sift_status st[n];
    sift_error err;
    sift_batch_args args;
    sift_slice sl[n];
    memset(sl, 0, sizeof sl);

    ck_assert_int_eq(sift_chains_sample(NULL, tokens, st, &err), SIFT_E_ARG);
    batch_rows(&args, a, n, rows, V);
    args.struct_size = 0;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    args.struct_size = sizeof args + 8;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    batch_rows(&args, a, n, rows, V);
    ck_assert_int_eq(sift_chains_sample(&args, NULL, st, &err), SIFT_E_ARG);
    ck_assert_int_eq(st[0], SIFT_E_ARG);
    ck_assert_int_eq(sift_chains_sample(&args, tokens, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(tokens[1], -1);
    args.chains = NULL;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    batch_rows(&args, a, n, NULL, V);
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    ck_assert_msg(strstr(err.message, "neither") != NULL, "%s", err.message);
    batch_rows(&args, a, n, rows, V);
    args.slices = sl;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    ck_assert_msg(strstr(err.message, "both") != NULL, "%s", err.message);
    batch_rows(&args, a, n, rows, V);
    args.flags = 2;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    batch_rows(&args, a, (size_t)INT32_MAX + 1, rows, V);
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    ck_assert(unchanged(a[0], &s0) && unchanged(a[1], &s1));
    /* n = 0: nothing to do, NULL arrays allowed */
    sift_batch_args_init(&args);
    ck_assert_int_eq(sift_chains_sample(&args, NULL, NULL, &err), SIFT_OK);
    sift_batch_args_init(NULL); /* a no-op */
    /* a bad n_vocab is each slot's own SIFT_E_ARG, as the single call */
    batch_rows(&args, a, n, rows, 0);
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ARG);
    ck_assert_int_eq(st[0], SIFT_E_ARG);
    ck_assert_int_eq(st[1], SIFT_E_ARG);
    ck_assert_int_eq(err.index, 0);
    ck_assert(unchanged(a[0], &s0) && unchanged(a[1], &s1));
    sift_chain_free(a[0]);
    sift_chain_free(a[1]);
}
END_TEST

/* An older, smaller sift_batch_args (without `errors`): the fields past
 * its struct_size read as their defaults, whatever the bytes there. */
START_TEST(test_args_of_an_older_smaller_size_read_only_that_much)
{
    enum { V = 32, n = 2 };
    tu_rng r = {16};
    float buf[n * V];
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    buf[V + 3] = NAN; /* slot 1 fails: a given errors array would be written */
    sift_chain *a[n] = {tu_small_chain(1, NULL), tu_small_chain(2, NULL)};
    sift_batch_args args;
    batch_rows(&args, a, n, rows, V);
    args.errors = (sift_error *)(void *)&args; /* garbage past the old size */
    args.struct_size = (uint32_t)offsetof(sift_batch_args, errors);
    int32_t tokens[n];
    sift_status st[n];
    sift_error err;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_ROW_VALUE);
    ck_assert_int_eq(st[0], SIFT_OK);
    ck_assert_int_eq(st[1], SIFT_E_ROW_VALUE);
    ck_assert_int_eq(err.index, 1);
    ck_assert_uint_eq(args.struct_size, offsetof(sift_batch_args, errors)); /* not written */
    sift_chain_free(a[0]);
    sift_chain_free(a[1]);
}
END_TEST

/* Slices of k = 1 cannot decide top_k 8: each slot needs its row. */
static void tiny_slices(const float *const *rows, size_t n, int32_t V, sift_slicer *sl[],
                        sift_slice *s)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(sift_slicer_build(sl[i], rows[i], V, 1, NULL, 0, &s[i], NULL), SIFT_OK);
}

START_TEST(test_the_batch_hook_is_told_the_slot_and_the_chain_hook_is_kept)
{
    enum { V = 48, n = 4 };
    tu_rng r = {10};
    float buf[n * V];
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    sift_chain *a[n], *b[n];
    sift_slicer *sl[n];
    row_hook own[n];
    for (size_t i = 0; i < n; i++) {
        a[i] = tu_small_chain(i + 21, NULL);
        b[i] = tu_small_chain(i + 21, NULL);
        own[i] = (row_hook){rows[i], 0};
        ck_assert_int_eq(sift_chain_set_row_hook(a[i], hook_one, &own[i], NULL), SIFT_OK);
        ck_assert_int_eq(sift_slicer_new(&sl[i], V, NULL, NULL), SIFT_OK);
    }
    sift_slice s[n];
    tiny_slices(rows, n, V, sl, s);
    rows_hook h = {rows, n, V, 0, -1};
    sift_batch_args args;
    sift_batch_args_init(&args);
    args.chains = a;
    args.n = n;
    args.slices = s;
    args.hook = hook_at;
    args.hook_user = &h;
    args.flags = SIFT_BATCH_ACCEPT;
    int32_t tokens[n];
    sift_status st[n];
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, NULL), SIFT_OK);
    ck_assert_int_eq(h.calls, n);
    ck_assert_int_eq(h.last_position, n - 1);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(own[i].calls, 0);
        ck_assert(a[i]->hook == hook_one && a[i]->hook_user == &own[i]);
        int32_t t;
        ck_assert_int_eq(sift_chain_sample(b[i], rows[i], V, &t, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b[i], t, NULL), SIFT_OK);
        ck_assert_int_eq(tokens[i], t);
    }
    /* without args.hook, each chain's own hook runs */
    args.hook = NULL;
    args.hook_user = NULL;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, NULL), SIFT_OK);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(own[i].calls, 1);
        int32_t t;
        ck_assert_int_eq(sift_chain_sample(b[i], rows[i], V, &t, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b[i], t, NULL), SIFT_OK);
        ck_assert_int_eq(tokens[i], t);
        sift_slicer_free(sl[i]);
        sift_chain_free(a[i]);
        sift_chain_free(b[i]);
    }
}
END_TEST

START_TEST(test_without_a_hook_a_slot_that_needs_the_row_fails_alone)
{
    enum { V = 48, n = 3 };
    tu_rng r = {12};
    float buf[n * V];
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    sift_chain *a[n];
    sift_slicer *sl[n];
    for (size_t i = 0; i < n; i++) {
        a[i] = tu_small_chain(i + 31, NULL);
        ck_assert_int_eq(sift_slicer_new(&sl[i], V, NULL, NULL), SIFT_OK);
    }
    sift_slice s[n];
    for (size_t i = 0; i < n; i++) /* slot 1 too small, the others at V */
        ck_assert_int_eq(sift_slicer_build(sl[i], rows[i], V, i == 1 ? 1 : V, NULL, 0, &s[i], NULL),
                         SIFT_OK);
    snap s1;
    take(a[1], &s1);
    sift_batch_args args;
    sift_batch_args_init(&args);
    args.chains = a;
    args.n = n;
    args.slices = s;
    args.flags = SIFT_BATCH_ACCEPT;
    int32_t tokens[n];
    sift_status st[n];
    sift_error err;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, &err), SIFT_E_NEED_ROW);
    ck_assert_int_eq(err.index, 1);
    ck_assert_int_eq(st[0], SIFT_OK);
    ck_assert_int_eq(st[1], SIFT_E_NEED_ROW);
    ck_assert_int_eq(st[2], SIFT_OK);
    /* NEED_ROW counts in the stats, as the single call's does; the rest
     * of the chain is as it was */
    snap now;
    take(a[1], &now);
    ck_assert(memcmp(now.rng, s1.rng, sizeof now.rng) == 0 && now.digest == s1.digest);
    ck_assert(now.st.need_row == s1.st.need_row + 1);
    for (size_t i = 0; i < n; i++) {
        sift_slicer_free(sl[i]);
        sift_chain_free(a[i]);
    }
}
END_TEST

/* A hook that starts a batch of its own from inside a slot: every chain
 * of the outer batch is busy for the whole outer call, its own and the
 * other one (SIFT_E_STATE in both slots, nothing sampled), and the outer
 * batch's tokens are those of a batch whose hook does not call back. */
typedef struct nest {
    sift_chain *self, *other;
    const float *row;
    int32_t V;
    sift_status st[2];
    sift_status ret;
} nest;

static int nest_hook(void *user, float *row, int32_t V)
{
    nest *x = user;
    sift_chain *cs[2] = {x->self, x->other};
    const float *rs[2] = {x->row, x->row};
    sift_batch_args a;
    batch_rows(&a, cs, 2, rs, x->V);
    int32_t t[2];
    x->ret = sift_chains_sample(&a, t, x->st, NULL);
    memcpy(row, x->row, (size_t)V * sizeof *row);
    return 0;
}

START_TEST(test_a_batch_inside_a_hook_finds_every_chain_of_the_outer_batch_busy)
{
    enum { V = 48 };
    tu_rng r = {13};
    float buf[2 * V];
    const float *rows[2];
    fill_rows(&r, buf, rows, 2, V);
    sift_chain *a[2] = {tu_small_chain(41, NULL), tu_small_chain(42, NULL)};
    nest x = {a[0], a[1], rows[0], V, {SIFT_OK, SIFT_OK}, SIFT_OK};
    ck_assert_int_eq(sift_chain_set_row_hook(a[0], nest_hook, &x, NULL), SIFT_OK);
    sift_slicer *sl[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(sift_slicer_new(&sl[i], V, NULL, NULL), SIFT_OK);
    sift_slice s[2];
    tiny_slices(rows, 2, V, sl, s);
    /* slot 1 has no hook: give it a slice that decides */
    ck_assert_int_eq(sift_slicer_build(sl[1], rows[1], V, V, NULL, 0, &s[1], NULL), SIFT_OK);
    sift_batch_args args;
    sift_batch_args_init(&args);
    args.chains = a;
    args.n = 2;
    args.slices = s;
    int32_t tokens[2];
    sift_status st[2];
    /* the same batch on twin chains whose hook only fetches the row */
    sift_chain *b[2] = {tu_small_chain(41, NULL), tu_small_chain(42, NULL)};
    row_hook plain = {rows[0], 0};
    ck_assert_int_eq(sift_chain_set_row_hook(b[0], hook_one, &plain, NULL), SIFT_OK);
    int32_t want[2];
    sift_status want_st[2];
    args.chains = b;
    ck_assert_int_eq(sift_chains_sample(&args, want, want_st, NULL), SIFT_OK);
    args.chains = a;
    ck_assert_int_eq(sift_chains_sample(&args, tokens, st, NULL), SIFT_OK);
    ck_assert_int_eq(x.ret, SIFT_E_STATE);
    ck_assert_int_eq(x.st[0], SIFT_E_STATE);
    ck_assert_int_eq(x.st[1], SIFT_E_STATE);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(st[i], want_st[i]);
        ck_assert_int_eq(tokens[i], want[i]);
        ck_assert_uint_eq(sift__chain_state_digest(a[i]), sift__chain_state_digest(b[i]));
        sift_slicer_free(sl[i]);
        sift_chain_free(a[i]);
        sift_chain_free(b[i]);
    }
}
END_TEST

/* A counting, failing allocator. */
typedef struct fa {
    long calls, fail_at, allocs, frees;
} fa;
static void *fa_alloc(void *u, size_t n)
{
    fa *f = u;
    if (++f->calls == f->fail_at)
        return NULL;
    f->allocs++;
    return malloc(n);
}
static void fa_free(void *u, void *p)
{
    fa *f = u;
    f->frees += p != NULL;
    free(p);
}

START_TEST(test_a_batch_allocates_nothing_after_the_first)
{
    enum { V = 500, n = 8 };
    fa f = {0, 0, 0, 0};
    sift_allocator al = {sizeof al, fa_alloc, fa_free, &f, NULL};
    tu_rng r = {14};
    float *buf = malloc((size_t)n * V * sizeof *buf);
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    sift_chain *a[n];
    sift_slicer *sl[n];
    for (size_t i = 0; i < n; i++) {
        a[i] = tu_small_chain(i + 51, &al);
        ck_assert_int_eq(sift_slicer_new(&sl[i], V, NULL, NULL), SIFT_OK);
    }
    sift_slice s[n];
    int32_t tokens[n];
    sift_status st[n];
    for (int step = 0; step < 6; step++) {
        sift_batch_args args;
        if (step % 2) {
            batch_rows(&args, a, n, rows, V);
        } else {
            for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(sift_slicer_build(sl[i], rows[i], V, 40, NULL, 0, &s[i], NULL),
                                 SIFT_OK);
            sift_batch_args_init(&args);
            args.chains = a;
            args.n = n;
            args.slices = s;
        }
        args.flags = SIFT_BATCH_ACCEPT;
        long before = f.calls;
        ck_assert_int_eq(sift_chains_sample(&args, tokens, st, NULL), SIFT_OK);
        if (step >= 2) /* each path sized once */
            ck_assert_int_eq(f.calls, before);
    }
    for (size_t i = 0; i < n; i++) {
        sift_slicer_free(sl[i]);
        sift_chain_free(a[i]);
    }
    ck_assert_int_eq(f.allocs, f.frees);
    free(buf);
}
END_TEST

/* Every allocation of a first batch (the chains' buffers, sized by their
 * first sample) fails in turn: the slot whose sample made it gets
 * SIFT_E_NOMEM with its chain unchanged, every other slot its token;
 * retrying the failed slot gives the token it would have given. */
START_TEST(test_failing_the_nth_allocation_fails_that_slot_alone_for_every_n)
{
    enum { V = 300, n = 4 };
    tu_rng r = {15};
    float buf[n * V];
    const float *rows[n];
    fill_rows(&r, buf, rows, n, V);
    int32_t want[n];
    {
        sift_chain *b[n];
        for (size_t i = 0; i < n; i++) {
            b[i] = tu_small_chain(i + 61, NULL);
            ck_assert_int_eq(sift_chain_sample(b[i], rows[i], V, &want[i], NULL), SIFT_OK);
            sift_chain_free(b[i]);
        }
    }
    long nth = 1;
    for (;; nth++) {
        fa f = {0, 0, 0, 0};
        sift_allocator al = {sizeof al, fa_alloc, fa_free, &f, NULL};
        sift_chain *a[n];
        snap before[n];
        for (size_t i = 0; i < n; i++) {
            a[i] = tu_small_chain(i + 61, &al);
            take(a[i], &before[i]);
        }
        f.fail_at = f.calls + nth;
        int32_t tokens[n];
        sift_status st[n];
        sift_error err;
        sift_batch_args args;
        batch_rows(&args, a, n, rows, V);
        sift_status s = sift_chains_sample(&args, tokens, st, &err);
        int failed = f.calls >= f.fail_at;
        int n_failed = 0;
        for (size_t i = 0; i < n; i++) {
            if (st[i] == SIFT_OK) {
                ck_assert_int_eq(tokens[i], want[i]);
                continue;
            }
            n_failed++;
            ck_assert_int_eq(st[i], SIFT_E_NOMEM);
            ck_assert_int_eq(tokens[i], -1);
            ck_assert_int_eq(err.index, (int64_t)i);
            ck_assert(unchanged(a[i], &before[i]));
            int32_t t;
            ck_assert_int_eq(sift_chain_sample(a[i], rows[i], V, &t, NULL), SIFT_OK);
            ck_assert_int_eq(t, want[i]);
        }
        ck_assert_int_eq(n_failed, failed);
        ck_assert_int_eq(s, failed ? SIFT_E_NOMEM : SIFT_OK);
        for (size_t i = 0; i < n; i++)
            sift_chain_free(a[i]);
        ck_assert_int_eq(f.allocs, f.frees);
        if (!failed)
            break;
        ck_assert_msg(nth < 1000, "too many allocations");
    }
    ck_assert_int_gt(nth, n); /* every slot's first sample allocated */
}
END_TEST

/* ------------------------------------------------------------------ */
/* The property test                                                   */
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
    long batches, slots, slice_batches, row_batches, accepted, hooks, need_row, failed, oracle;
} tally;

/* One slot of a property case: the batch's chain, its twin for the
 * single calls, the oracle, a slicer and the chain's own hook. */
typedef struct slot {
    sp_chain spec;
    sift_chain *a, *b;
    or_chain o;
    sift_slicer *sl;
    row_hook own_a, own_b;
    int or_live; /* the oracle is compared until the slot's first failure */
} slot;

static void property(uint64_t seed, long cases, tally *ty)
{
    tu_rng r = {seed};
    char desc[2048];
    for (long cs = 0; cs < cases; cs++) {
        int32_t V = cs % 7 == 0 ? (int32_t)tu_range(&r, 2, 16) : (int32_t)tu_range(&r, 50, 2000);
        size_t n = (size_t)tu_range(&r, 1, MAXS);
        slot *sl = calloc(n, sizeof *sl);
        float *buf = malloc(n * (size_t)V * sizeof *buf);
        const float *rows[MAXS];
        sift_chain *chains[MAXS];
        int hook_mode = (int)tu_range(&r, 0, 2); /* 0 none, 1 each chain's, 2 the batch's */
        for (size_t i = 0; i < n; i++) {
            rows[i] = buf + i * (size_t)V;
            sl[i].spec.seed = tu_next(&r);
            gen_chain(&r, &sl[i].spec, V);
            ck_assert_int_eq(sp_build(&sl[i].spec, &sl[i].a, NULL), SIFT_OK);
            ck_assert_int_eq(sp_build(&sl[i].spec, &sl[i].b, NULL), SIFT_OK);
            or_init(&sl[i].o, &sl[i].spec);
            sl[i].or_live = 1;
            ck_assert_int_eq(sift_slicer_new(&sl[i].sl, V, NULL, NULL), SIFT_OK);
            sl[i].own_a = (row_hook){rows[i], 0};
            sl[i].own_b = (row_hook){rows[i], 0};
            if (hook_mode == 1)
                ck_assert_int_eq(sift_chain_set_row_hook(sl[i].a, hook_one, &sl[i].own_a, NULL),
                                 SIFT_OK);
            if (hook_mode)
                ck_assert_int_eq(sift_chain_set_row_hook(sl[i].b, hook_one, &sl[i].own_b, NULL),
                                 SIFT_OK);
            chains[i] = sl[i].a;
            int n_prompt = (int)tu_range(&r, 0, 12);
            for (int j = 0; j < n_prompt; j++) {
                int32_t t = (int32_t)tu_range(&r, 0, V < 12 ? V - 1 : 11);
                ck_assert_int_eq(sift_chain_accept_prompt(sl[i].a, t, NULL), SIFT_OK);
                ck_assert_int_eq(sift_chain_accept_prompt(sl[i].b, t, NULL), SIFT_OK);
                or_accept_prompt(&sl[i].o, t);
            }
        }
        snprintf(desc, sizeof desc, "case %ld, V %d, %zu slots, hook mode %d", cs, (int)V, n,
                 hook_mode);
        int n_steps = (int)tu_range(&r, 1, 4);
        for (int step = 0; step < n_steps; step++) {
            for (size_t i = 0; i < n; i++)
                tu_row(&r, buf + i * (size_t)V, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
            if (tu_unif(&r) < 0.15) /* a bad value in one slot */
                buf[(size_t)tu_range(&r, 0, (int64_t)n - 1) * (size_t)V +
                    (size_t)tu_range(&r, 0, V - 1)] = tu_unif(&r) < 0.5 ? NAN : INFINITY;
            int use_rows = tu_unif(&r) < 0.4;
            int accept = tu_unif(&r) < 0.7;
            sift_slice s[MAXS];
            for (size_t i = 0; i < n && !use_rows; i++) {
                sift_plan p = {.struct_size = sizeof p};
                ck_assert_int_eq(sift_chain_next_k(sl[i].a, &p, NULL), SIFT_OK);
                int32_t ids[256];
                size_t ne = 0;
                sift_status es = sift_chain_extras(sl[i].a, ids, N(ids), &ne, NULL);
                int32_t k = es == SIFT_OK && p.k > 0 && p.k < V ? p.k : V;
                if (tu_unif(&r) < 0.2)
                    k = (int32_t)tu_range(&r, 1, k);
                sift_status bs = sift_slicer_build(sl[i].sl, rows[i], V, k, ids,
                                                   es == SIFT_OK ? ne : 0, &s[i], NULL);
                if (bs != SIFT_OK) /* a bad value in this row: the batch goes on rows */
                    use_rows = 1;
            }
            sift_batch_args args;
            sift_batch_args_init(&args);
            args.chains = chains;
            args.n = n;
            if (use_rows) {
                args.rows = rows;
                args.n_vocab = V;
            } else {
                args.slices = s;
            }
            rows_hook h = {rows, (int32_t)n, V, 0, -1};
            if (hook_mode == 2) {
                args.hook = hook_at;
                args.hook_user = &h;
            }
            if (accept)
                args.flags = SIFT_BATCH_ACCEPT;
            int32_t tokens[MAXS];
            sift_status st[MAXS];
            sift_error errs[MAXS], err;
            args.errors = tu_unif(&r) < 0.5 ? errs : NULL;
            sift_status ret = sift_chains_sample(&args, tokens, st, &err);
            ty->batches++;
            ty->slice_batches += !use_rows;
            ty->row_batches += use_rows;
            sift_status want_ret = SIFT_OK;
            size_t first = 0;
            for (size_t i = 0; i < n; i++) {
                int32_t t = -1;
                sift_status bs = use_rows ? sift_chain_sample(sl[i].b, rows[i], V, &t, NULL)
                                          : sift_chain_sample_slice(sl[i].b, &s[i], &t, NULL);
                if (use_rows && sl[i].or_live) {
                    int32_t to = -1;
                    sift_status os = or_sample(&sl[i].o, rows[i], V, &to);
                    ck_assert_msg(os == bs && (bs || to == t),
                                  "slot %zu: oracle %d (tok %d), single %d (tok %d)\n  %s", i,
                                  (int)os, (int)to, (int)bs, (int)t, desc);
                    ty->oracle++;
                } else if (bs == SIFT_OK && sl[i].or_live) {
                    /* the slice step equals the oracle on the row */
                    int32_t to = -1;
                    ck_assert_int_eq(or_sample(&sl[i].o, rows[i], V, &to), SIFT_OK);
                    ck_assert_msg(to == t, "slot %zu: oracle %d, slice %d\n  %s", i, (int)to,
                                  (int)t, desc);
                    ty->oracle++;
                }
                if (bs == SIFT_OK && accept) {
                    bs = sift_chain_accept(sl[i].b, t, NULL);
                    ck_assert_int_eq(bs, SIFT_OK);
                }
                ck_assert_msg(st[i] == bs, "slot %zu: batch %d, single %d\n  %s", i, (int)st[i],
                              (int)bs, desc);
                ck_assert_msg(tokens[i] == t, "slot %zu: batch token %d, single %d\n  %s", i,
                              (int)tokens[i], (int)t, desc);
                if (bs && !want_ret) {
                    want_ret = bs;
                    first = i;
                }
                if (bs && args.errors)
                    ck_assert_int_eq(errs[i].code, bs);
                ty->need_row += bs == SIFT_E_NEED_ROW;
                ty->failed += bs != SIFT_OK;
                if (bs)
                    sl[i].or_live = 0;
                ty->slots++;
                if (bs == SIFT_OK) {
                    if (!accept) { /* the runtime accepts itself, both sides */
                        ck_assert_int_eq(sift_chain_accept(sl[i].a, t, NULL), SIFT_OK);
                        ck_assert_int_eq(sift_chain_accept(sl[i].b, t, NULL), SIFT_OK);
                    }
                    if (sl[i].or_live)
                        or_accept(&sl[i].o, t);
                    ty->accepted++;
                }
                ck_assert_msg(same(sl[i].a, sl[i].b), "slot %zu: chains differ\n  %s", i, desc);
            }
            ck_assert_msg(ret == want_ret, "batch returned %d, want %d\n  %s", (int)ret,
                          (int)want_ret, desc);
            if (ret)
                ck_assert_int_eq(err.index, (int64_t)first);
            ty->hooks += h.calls;
            if (hook_mode == 2) {
                long own_b = 0;
                for (size_t i = 0; i < n; i++)
                    own_b += sl[i].own_b.calls;
                ck_assert_int_eq(h.calls, own_b);
            }
            for (size_t i = 0; i < n; i++) {
                ck_assert_int_eq(sl[i].own_a.calls, hook_mode == 1 ? sl[i].own_b.calls : 0);
                ty->hooks += sl[i].own_a.calls;
                sl[i].own_a.calls = sl[i].own_b.calls = 0;
            }
        }
        for (size_t i = 0; i < n; i++) {
            sift_slicer_free(sl[i].sl);
            sift_chain_free(sl[i].a);
            sift_chain_free(sl[i].b);
            or_free(&sl[i].o);
        }
        free(sl);
        free(buf);
    }
}

START_TEST(test_a_batch_equals_the_single_calls_and_the_oracle_bitwise)
{
    tally ty;
    memset(&ty, 0, sizeof ty);
    long cases = n_cases();
    property(1212, cases, &ty);
    fprintf(stderr,
            "batch: %ld batches (%ld on slices, %ld on rows), %ld slots, %ld tokens accepted, "
            "%ld hook calls, %ld NEED_ROW, %ld failed slots as the single calls, %ld oracle "
            "comparisons; 0 mismatches\n",
            ty.batches, ty.slice_batches, ty.row_batches, ty.slots, ty.accepted, ty.hooks,
            ty.need_row, ty.failed, ty.oracle);
    ck_assert(ty.accepted > 0 && ty.failed > 0 && ty.slice_batches > 0 && ty.row_batches > 0);
    if (cases >= 100)
        ck_assert(ty.hooks > 0 && ty.need_row > 0);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("batch");
    TCase *tc = tcase_create("unit");
    tcase_add_test(tc, test_a_batch_on_rows_gives_the_tokens_of_the_single_calls);
    tcase_add_test(tc, test_without_the_accept_flag_a_batch_only_samples);
    tcase_add_test(tc, test_a_failing_slot_changes_neither_its_chain_nor_the_others);
    tcase_add_test(tc, test_a_null_chain_fails_its_slot_only);
    tcase_add_test(tc, test_the_same_chain_twice_is_refused_and_changes_nothing);
    tcase_add_test(tc, test_bad_arguments_are_refused_as_a_whole);
    tcase_add_test(tc, test_args_of_an_older_smaller_size_read_only_that_much);
    tcase_add_test(tc, test_the_batch_hook_is_told_the_slot_and_the_chain_hook_is_kept);
    tcase_add_test(tc, test_without_a_hook_a_slot_that_needs_the_row_fails_alone);
    tcase_add_test(tc, test_a_batch_inside_a_hook_finds_every_chain_of_the_outer_batch_busy);
    tcase_add_test(tc, test_a_batch_allocates_nothing_after_the_first);
    tcase_add_test(tc, test_failing_the_nth_allocation_fails_that_slot_alone_for_every_n);
    suite_add_tcase(s, tc);
    tc = tcase_create("property");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_a_batch_equals_the_single_calls_and_the_oracle_bitwise);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_alloc.c - the allocation contract, through a counting allocator
 * (sift_allocator with user data):
 *
 * - no allocation and no free per step once the first sample has sized
 *   the buffers, for chains holding every sampler and each selector;
 * - the fail-the-Nth-allocation loop (BAD_INPUTS F-01): for every N from
 *   1 to the number of allocations a full build makes (vocabulary, chain,
 *   every stage, first sample, clone), an allocator that fails exactly
 *   the Nth call. Each failing call must return SIFT_E_NOMEM and change
 *   nothing, retrying it must succeed, the token sequence must equal that
 *   of a build without failures, and every allocation must be freed;
 * - the vocabulary does all its allocations through its allocator;
 * - sift__reserve, the one growable array of src/: doubling from the
 *   first capacity, live elements kept and the rest zero, nothing changed
 *   and nothing leaked when the allocation fails or the size overflows.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "sift_internal.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define V 1000
#define STEPS 20

/* ------------------------------------------------------------------ */
/* The allocator                                                       */
/* ------------------------------------------------------------------ */

typedef struct fa {
    long calls;   /* calls to alloc, failed ones included */
    long fail_at; /* 1-based call to fail; 0 = never */
    long allocs;  /* successful allocations */
    long frees;   /* frees of non-NULL pointers */
    long failed;  /* calls that returned NULL */
} fa;

static void *fa_alloc(void *user, size_t size)
{
    fa *f = user;
    f->calls++;
    if (f->calls == f->fail_at) {
        f->failed++;
        return NULL;
    }
    void *p = malloc(size);
    if (p)
        f->allocs++;
    return p;
}

static void fa_free(void *user, void *p)
{
    fa *f = user;
    if (p)
        f->frees++;
    free(p);
}

/* ------------------------------------------------------------------ */
/* A chain with every sampler                                          */
/* ------------------------------------------------------------------ */

/* A custom stage whose user data is a small heap block (malloc, not the
 * chain's allocator: the caller owns that memory). */
static int cu_apply(void *user, sift_candidate *d, size_t *size)
{
    (void)user;
    (void)d;
    (void)size;
    return 0;
}
static void *cu_clone(void *user)
{
    int *p = malloc(sizeof *p);
    if (p)
        *p = *(int *)user;
    return p;
}
static void cu_free(void *user)
{
    free(user);
}

enum { SEL_DIST, SEL_DIST_ID, SEL_GREEDY, SEL_MIROSTAT, SEL_MIROSTAT_V2, SEL__COUNT };
static const char *sel_name[SEL__COUNT] = {"dist", "dist_id_order", "greedy", "mirostat",
                                           "mirostat_v2"};

#define N_ADDS 15

/* Adds stage i (0 <= i < N_ADDS) to `c`; the last one is the selector. */
static sift_status add_stage(sift_chain *c, int i, int sel, const sift_vocab *v, sift_error *err)
{
    static const sift_bias bias[3] = {{5, 1.5f}, {17, -INFINITY}, {5, -0.5f}};
    static const char *br[2] = {"\n", ":"};
    static const size_t bl[2] = {1, 1};
    sift_dry_params dp = {sizeof(sift_dry_params), 0.8f, 1.75f, 2, 64, br, bl, 2};
    switch (i) {
    case 0: return sift_chain_add_logit_bias(c, bias, 3, err);
    case 1: return sift_chain_add_penalties(c, 64, 1.1f, 0.05f, 0.05f, err);
    case 2: return sift_chain_add_dry(c, &dp, v, err);
    case 3: return sift_chain_add_top_k(c, 400, err);
    case 4: return sift_chain_add_top_k_ties(c, 300, err);
    case 5: return sift_chain_add_typical(c, 0.98f, 1, err);
    case 6: return sift_chain_add_top_p(c, 0.97f, 1, err);
    case 7: return sift_chain_add_min_p(c, 0.01f, 1, err);
    case 8: return sift_chain_add_xtc(c, 0.5f, 0.1f, 1, err);
    case 9: return sift_chain_add_top_n_sigma(c, 3.0f, err);
    case 10: return sift_chain_add_temp_ext(c, 0.9f, 0.3f, 1.0f, err);
    case 11: return sift_chain_add_temp(c, 1.2f, err);
    case 12: {
        int *u = malloc(sizeof *u);
        ck_assert_ptr_nonnull(u);
        *u = 7;
        sift_custom_stage vt = {SIFT_CUSTOM_STAGE_ABI,
                                "user",
                                SIFT_CLASS_IDENTITY,
                                0,
                                cu_apply,
                                NULL,
                                NULL,
                                cu_clone,
                                cu_free};
        sift_status s = sift_chain_add_custom(c, &vt, u, err);
        if (s)
            free(u); /* untouched on failure: still ours */
        return s;
    }
    case 13: return sift_chain_add_top_k(c, 0, err);
    default:
        switch (sel) {
        case SEL_DIST: return sift_chain_add_dist(c, err);
        case SEL_DIST_ID: return sift_chain_add_dist_id_order(c, err);
        case SEL_GREEDY: return sift_chain_add_greedy(c, err);
        case SEL_MIROSTAT: return sift_chain_add_mirostat(c, V, 5.0f, 0.1f, 100, err);
        default: return sift_chain_add_mirostat_v2(c, 5.0f, 0.1f, err);
        }
    }
}

static sift_vocab *make_vocab(const sift_allocator *al, sift_status *st, sift_error *err)
{
    static char store[V][8];
    const char *pieces[V];
    size_t lens[V];
    for (int i = 0; i < V; i++) {
        int n = snprintf(store[i], sizeof store[i], "t%d", i);
        if (i % 50 == 0)
            n = snprintf(store[i], sizeof store[i], "\n");
        if (i % 70 == 1)
            n = snprintf(store[i], sizeof store[i], ":");
        pieces[i] = store[i];
        lens[i] = (size_t)n;
    }
    sift_vocab *v = NULL;
    *st = sift_vocab_new(&v, V, pieces, lens, al, err);
    return v;
}

static void row_for(float *row, int step)
{
    tu_rng r = {9000 + (uint64_t)step};
    tu_row(&r, row, V, step % TU_ROW__COUNT == TU_ROW_HUGE ? TU_ROW_NORMAL : step % TU_ROW__COUNT);
}

/* Runs STEPS sample+accept steps; writes the tokens. */
static void run_steps(sift_chain *c, int32_t *tok)
{
    float row[V];
    for (int s = 0; s < STEPS; s++) {
        row_for(row, s + 1);
        sift_error err;
        ck_assert_msg(sift_chain_sample(c, row, V, &tok[s], &err) == SIFT_OK, "step %d: %s", s,
                      err.message);
        ck_assert_int_eq(sift_chain_accept(c, tok[s], NULL), SIFT_OK);
    }
}

/* ------------------------------------------------------------------ */
/* No allocation per step                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_no_allocation_per_step_after_the_first_sample)
{
    int sel = _i;
    fa f = {0, 0, 0, 0, 0};
    sift_allocator al = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
    sift_status st;
    sift_error err;
    sift_vocab *v = make_vocab(&al, &st, &err);
    ck_assert_int_eq(st, SIFT_OK);
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.allocator = &al;
    p.seed = 31;
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
    for (int i = 0; i < N_ADDS; i++)
        ck_assert_msg(add_stage(c, i, sel, v, &err) == SIFT_OK, "stage %d: %s", i, err.message);
    ck_assert_str_eq(sift_chain_stage_name(c, N_ADDS - 1), sel_name[sel]);
    /* prompt tokens fill the windows */
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(sift_chain_accept(c, (i * 37) % V, NULL), SIFT_OK);
    float row[V];
    row_for(row, 0);
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, V, &t, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, t, NULL), SIFT_OK);
    long a0 = f.allocs, f0 = f.frees, c0 = f.calls;
    for (int s = 1; s <= 100; s++) {
        row_for(row, s);
        ck_assert_msg(sift_chain_sample(c, row, V, &t, &err) == SIFT_OK, "%s", err.message);
        ck_assert_int_eq(sift_chain_accept(c, t, NULL), SIFT_OK);
        /* distribution and reset reuse the buffers too */
        if (s % 25 == 0) {
            size_t n;
            ck_assert_int_eq(sift_chain_distribution(c, row, V, NULL, 0, &n, NULL), SIFT_OK);
        }
        /* failures allocate nothing either */
        row[s % V] = NAN;
        ck_assert_int_eq(sift_chain_sample(c, row, V, &t, NULL), SIFT_E_ROW_VALUE);
    }
    sift_chain_reset(c);
    ck_assert_int_eq(f.calls, c0);
    ck_assert_int_eq(f.allocs, a0);
    ck_assert_int_eq(f.frees, f0);
    sift_chain_free(c);
    sift_vocab_free(v);
    ck_assert_int_eq(f.allocs, f.frees);
}
END_TEST

START_TEST(test_every_allocation_goes_through_the_allocator)
{
    /* with the allocator counting, a full life frees all it allocated,
     * clones included */
    fa f = {0, 0, 0, 0, 0};
    sift_allocator al = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
    sift_status st;
    sift_error err;
    sift_vocab *v = make_vocab(&al, &st, &err);
    ck_assert_int_eq(st, SIFT_OK);
    ck_assert_int_gt(f.allocs, 0);
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.allocator = &al;
    sift_chain *c, *d;
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
    for (int i = 0; i < N_ADDS; i++)
        ck_assert_int_eq(add_stage(c, i, SEL_DIST, v, &err), SIFT_OK);
    sift_vocab_free(v); /* the chain keeps nothing of it */
    long before = f.allocs;
    ck_assert_int_eq(sift_chain_clone(c, &d, &err), SIFT_OK);
    ck_assert_int_gt(f.allocs, before);
    int32_t tc[STEPS], td[STEPS];
    run_steps(c, tc);
    run_steps(d, td);
    ck_assert(memcmp(tc, td, sizeof tc) == 0);
    sift_chain_free(c);
    sift_chain_free(d);
    ck_assert_int_eq(f.allocs, f.frees);
    ck_assert_int_eq(f.failed, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Fail the Nth allocation                                             */
/* ------------------------------------------------------------------ */

/* The whole build with failures injected by `f`. Every failing call is
 * checked and retried. Returns the number of calls that failed. */
static long build_and_run(fa *f, int sel, int32_t *tok_c, int32_t *tok_d)
{
    sift_allocator al = {sizeof(sift_allocator), fa_alloc, fa_free, f, NULL};
    long failures = 0;
    sift_error err;
    sift_status st;
    /* the vocabulary */
    sift_vocab *v = make_vocab(&al, &st, &err);
    if (st != SIFT_OK) {
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        ck_assert_int_eq(err.code, SIFT_E_NOMEM);
        ck_assert_ptr_null(v);
        failures++;
        v = make_vocab(&al, &st, &err);
        ck_assert_int_eq(st, SIFT_OK);
    }
    /* the chain */
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.allocator = &al;
    p.seed = 77;
    sift_chain *c = (sift_chain *)&c;
    st = sift_chain_new(&c, &p, &err);
    if (st != SIFT_OK) {
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        ck_assert_ptr_null(c);
        failures++;
        ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
    }
    /* every stage */
    for (int i = 0; i < N_ADDS; i++) {
        size_t n0 = sift_chain_n_stages(c);
        uint64_t d0 = sift__chain_state_digest(c);
        st = add_stage(c, i, sel, v, &err);
        if (st != SIFT_OK) {
            ck_assert_msg(st == SIFT_E_NOMEM, "stage %d: %d %s", i, (int)st, err.message);
            ck_assert_int_eq(err.code, SIFT_E_NOMEM);
            ck_assert_int_gt((int)strlen(err.message), 0);
            ck_assert_uint_eq(sift_chain_n_stages(c), n0);
            ck_assert_uint_eq(sift__chain_state_digest(c), d0);
            failures++;
            ck_assert_int_eq(add_stage(c, i, sel, v, &err), SIFT_OK);
        }
        ck_assert_uint_eq(sift_chain_n_stages(c), n0 + 1);
    }
    sift_vocab_free(v);
    /* a prompt */
    for (int i = 0; i < 30; i++)
        ck_assert_int_eq(sift_chain_accept(c, (i * 13) % 40, NULL), SIFT_OK);
    /* the first sample sizes the buffers */
    float row[V];
    row_for(row, 0);
    uint64_t r0[4], r1[4];
    sift__chain_rng_state(c, r0);
    uint64_t d0 = sift__chain_state_digest(c);
    int32_t t0 = -1;
    st = sift_chain_sample(c, row, V, &t0, &err);
    if (st != SIFT_OK) {
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        ck_assert_int_eq(t0, -1);
        sift__chain_rng_state(c, r1);
        ck_assert(memcmp(r0, r1, sizeof r0) == 0);
        ck_assert_uint_eq(sift__chain_state_digest(c), d0);
        failures++;
        ck_assert_int_eq(sift_chain_sample(c, row, V, &t0, &err), SIFT_OK);
    }
    ck_assert_int_eq(sift_chain_accept(c, t0, NULL), SIFT_OK);
    /* the clone */
    sift_chain *d = (sift_chain *)&d;
    d0 = sift__chain_state_digest(c);
    st = sift_chain_clone(c, &d, &err);
    if (st != SIFT_OK) {
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        ck_assert_ptr_null(d);
        ck_assert_uint_eq(sift__chain_state_digest(c), d0);
        failures++;
        ck_assert_int_eq(sift_chain_clone(c, &d, &err), SIFT_OK);
    }
    ck_assert_uint_eq(sift__chain_state_digest(d), d0);
    /* the clone's first sample sizes its own buffers */
    row_for(row, 1);
    int32_t t1c, t1d;
    ck_assert_int_eq(sift_chain_sample(c, row, V, &t1c, &err), SIFT_OK);
    st = sift_chain_sample(d, row, V, &t1d, &err);
    if (st != SIFT_OK) {
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        failures++;
        ck_assert_int_eq(sift_chain_sample(d, row, V, &t1d, &err), SIFT_OK);
    }
    ck_assert_int_eq(t1c, t1d);
    ck_assert_int_eq(sift_chain_accept(c, t1c, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(d, t1d, NULL), SIFT_OK);
    tok_c[0] = t0;
    tok_d[0] = t1c;
    run_steps(c, tok_c + 1);
    run_steps(d, tok_d + 1);
    sift_chain_free(c);
    sift_chain_free(d);
    ck_assert_int_eq(f->allocs, f->frees);
    return failures;
}

START_TEST(test_failing_the_nth_allocation_is_clean_for_every_n)
{
    int sel = _i;
    int32_t ref_c[STEPS + 1], ref_d[STEPS + 1];
    fa f0 = {0, 0, 0, 0, 0};
    ck_assert_int_eq(build_and_run(&f0, sel, ref_c, ref_d), 0);
    /* the clone continues exactly where the original was */
    ck_assert(memcmp(ref_c + 1, ref_d + 1, STEPS * sizeof(int32_t)) == 0);
    long total = f0.calls;
    ck_assert_int_gt(total, 10);
    for (long n = 1; n <= total; n++) {
        fa f = {0, n, 0, 0, 0};
        int32_t tc[STEPS + 1], td[STEPS + 1];
        long failures = build_and_run(&f, sel, tc, td);
        ck_assert_msg(f.failed == 1, "N=%ld: %ld failed calls", n, f.failed);
        ck_assert_msg(failures == 1, "N=%ld: the failure was swallowed (%ld reported)", n,
                      failures);
        ck_assert_msg(memcmp(tc, ref_c, sizeof tc) == 0, "N=%ld: tokens differ", n);
        ck_assert_msg(memcmp(td, ref_d, sizeof td) == 0, "N=%ld: clone tokens differ", n);
    }
}
END_TEST

START_TEST(test_failing_the_nth_allocation_of_a_vocabulary_leaks_nothing)
{
    fa f0 = {0, 0, 0, 0, 0};
    sift_allocator al0 = {sizeof(sift_allocator), fa_alloc, fa_free, &f0, NULL};
    sift_status st;
    sift_error err;
    sift_vocab *v = make_vocab(&al0, &st, &err);
    ck_assert_int_eq(st, SIFT_OK);
    long total = f0.calls;
    sift_vocab_free(v);
    ck_assert_int_eq(f0.allocs, f0.frees);
    for (long n = 1; n <= total; n++) {
        fa f = {0, n, 0, 0, 0};
        sift_allocator al = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
        v = make_vocab(&al, &st, &err);
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        ck_assert_ptr_null(v);
        ck_assert_int_eq(err.code, SIFT_E_NOMEM);
        ck_assert_int_eq(f.allocs, f.frees);
        v = make_vocab(&al, &st, &err);
        ck_assert_int_eq(st, SIFT_OK);
        const char *b;
        size_t len;
        ck_assert_int_eq(sift_vocab_piece(v, 123, &b, &len, NULL), SIFT_OK);
        ck_assert(len == 4 && memcmp(b, "t123", 4) == 0);
        sift_vocab_free(v);
        ck_assert_int_eq(f.allocs, f.frees);
    }
}
END_TEST

START_TEST(test_a_failed_first_allocation_of_new_or_sample_is_nomem_and_retryable)
{
    /* the very first call fails: chain_new cannot even start */
    fa f = {0, 1, 0, 0, 0};
    sift_allocator al = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.allocator = &al;
    sift_chain *c = (sift_chain *)&c;
    sift_error err;
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_E_NOMEM);
    ck_assert_ptr_null(c);
    ck_assert_int_gt((int)strlen(err.message), 0);
    /* now a chain, then fail the first sample's buffers */
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, &err), SIFT_OK);
    long calls = f.calls;
    f.fail_at = calls + 1;
    float row[4] = {1, 2, 3, 4};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &t, &err), SIFT_E_NOMEM);
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &t, &err), SIFT_OK);
    sift_chain_free(c);
    ck_assert_int_eq(f.allocs, f.frees);
}
END_TEST

/* The slice path: the slicer, the first slice sample (scratch and the id
 * bitmap) and the first hook call (the row buffer) each fail cleanly at
 * every allocation, a retry succeeds, nothing leaks, and once sized no
 * step allocates. */
static int copy_row(void *user, float *row, int32_t n)
{
    memcpy(row, user, (size_t)n * sizeof *row);
    return 0;
}

START_TEST(test_failing_the_nth_allocation_of_the_slice_path_is_clean)
{
    float row[V];
    row_for(row, 3);
    for (long nth = 1;; nth++) {
        fa f = {0, 0, 0, 0, 0};
        sift_allocator al = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
        sift_chain_params p;
        sift_chain_params_init(&p);
        p.allocator = &al;
        p.seed = 5;
        sift_chain *c = NULL;
        sift_slicer *sl = NULL;
        sift_error err;
        ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.2f, 0.0f, 0.0f, &err), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(c, 3, &err), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, &err), SIFT_OK);
        ck_assert_int_eq(sift_chain_set_row_hook(c, copy_row, row, &err), SIFT_OK);
        f.fail_at = f.calls + nth;
        sift_status s = sift_slicer_new(&sl, V, &al, &err);
        sift_slice big, small;
        int32_t t1 = -1, t2 = -1;
        if (!s)
            s = sift_slicer_build(sl, row, V, 11, NULL, 0, &big, &err);
        if (!s)
            s = sift_chain_sample_slice(c, &big, &t1, &err); /* decided on the slice */
        int hooked = 0;
        if (!s) {
            small = big;
            small.n_prefix = 1; /* top_k 3 cannot be decided: the hook runs */
            s = sift_chain_sample_slice(c, &small, &t2, &err);
            hooked = 1;
        }
        int failed = f.failed > 0;
        if (failed) {
            ck_assert_int_eq(s, SIFT_E_NOMEM);
            /* a retry works (the allocator no longer fails) */
            if (!sl)
                ck_assert_int_eq(sift_slicer_new(&sl, V, &al, &err), SIFT_OK);
            ck_assert_int_eq(sift_slicer_build(sl, row, V, 11, NULL, 0, &big, &err), SIFT_OK);
            ck_assert_int_eq(sift_chain_sample_slice(c, &big, &t1, &err), SIFT_OK);
            small = big;
            small.n_prefix = 1;
            ck_assert_int_eq(sift_chain_sample_slice(c, &small, &t2, &err), SIFT_OK);
        } else {
            ck_assert_int_eq(s, SIFT_OK);
            ck_assert(hooked);
            /* sized: further steps allocate nothing */
            long a0 = f.allocs, c0 = f.calls;
            for (int i = 0; i < 20; i++) {
                ck_assert_int_eq(sift_chain_sample_slice(c, &big, &t1, &err), SIFT_OK);
                ck_assert_int_eq(sift_chain_sample_slice(c, &small, &t2, &err), SIFT_OK);
                ck_assert_int_eq(sift_chain_accept(c, t1, &err), SIFT_OK);
            }
            ck_assert_int_eq(f.allocs, a0);
            ck_assert_int_eq(f.calls, c0);
        }
        sift_slicer_free(sl);
        sift_chain_free(c);
        ck_assert_int_eq(f.allocs, f.frees);
        if (!failed)
            break;
        ck_assert_msg(nth < 1000, "too many allocations");
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Fail the Nth allocation of every other public function              */
/* ------------------------------------------------------------------ */

/* Each scenario is a sequence of calls on objects built with the failing
 * allocator. A call that fails must fail with SIFT_E_NOMEM (err filled)
 * and only when an allocation failed during it; it is then retried and
 * must succeed. At the end everything is freed and nothing leaks. */
typedef struct op_run {
    fa *f;
    int scenario;
    long nth;
    long reported; /* calls that returned SIFT_E_NOMEM */
} op_run;

static void op_check(op_run *r, int line, const char *what, sift_status s, long failed_before,
                     const sift_error *e)
{
    if (s == SIFT_OK) {
        ck_assert_msg(r->f->failed == failed_before,
                      "scenario %d, N=%ld, line %d (%s): an allocation failed but the call "
                      "returned SIFT_OK",
                      r->scenario, r->nth, line, what);
        return;
    }
    ck_assert_msg(s == SIFT_E_NOMEM && r->f->failed > failed_before && e->code == SIFT_E_NOMEM,
                  "scenario %d, N=%ld, line %d (%s): status %d (%s), %ld allocation(s) failed",
                  r->scenario, r->nth, line, what, (int)s, e->message,
                  r->f->failed - failed_before);
    r->reported++;
}

/* Runs `call` (an expression using E for its sift_error); on failure
 * checks it and runs it again, which must succeed. */
#define OP(r, call)                                                                               \
    do {                                                                                          \
        sift_error E;                                                                             \
        memset(&E, 0, sizeof E);                                                                  \
        long fb_ = (r)->f->failed;                                                                \
        sift_status s_ = (call);                                                                  \
        op_check((r), __LINE__, #call, s_, fb_, &E);                                              \
        if (s_ != SIFT_OK) {                                                                      \
            s_ = (call);                                                                          \
            ck_assert_msg(s_ == SIFT_OK, "line %d: retry of %s: %d %s", __LINE__, #call, (int)s_, \
                          E.message);                                                             \
        }                                                                                         \
    } while (0)

#define GV 64

static sift_vocab *small_vocab(op_run *r, const sift_allocator *al)
{
    static char store[GV][8];
    const char *pieces[GV];
    size_t lens[GV];
    for (int i = 0; i < GV; i++) {
        static const char *const words[] = {"{", "}", "\"", ":", ",", " ", "a", "b", "ab", "<t>"};
        const char *w = i < 10 ? words[i] : NULL;
        int n = w ? snprintf(store[i], sizeof store[i], "%s", w)
                  : snprintf(store[i], sizeof store[i], "x%d", i);
        pieces[i] = store[i];
        lens[i] = (size_t)n;
    }
    lens[GV - 1] = 0; /* the end-of-generation token */
    sift_vocab *v = NULL;
    OP(r, sift_vocab_new(&v, GV, pieces, lens, al, &E));
    OP(r, sift_vocab_set_attr(v, GV - 1, SIFT_TOKEN_EOG, &E));
    return v;
}

static const char *const G_TEXT = "root ::= \"{\" pair (\",\" pair)* \"}\"\n"
                                  "pair ::= \"\\\"\" [ab]+ \"\\\"\" \":\" \" \"? [ab]+\n";

static float g_row[GV];

static int g_hook(void *user, float *row, int32_t n)
{
    (void)user;
    memcpy(row, g_row, (size_t)n * sizeof *row);
    return 0;
}

/* Grammars: compile with a vocabulary, lazy triggers of every kind, the
 * matcher's calls, clone. */
static void scenario_grammar(op_run *r, const sift_allocator *al)
{
    sift_vocab *v = small_vocab(r, al);
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.allocator = al;
    sift_grammar *g = NULL, *h = NULL;
    OP(r, sift_grammar_new(&g, G_TEXT, strlen(G_TEXT), v, &gp, &E));
    static const char *words[1] = {"{"};
    static const char *pats[1] = {"q(\\{)"};
    static const char *fulls[1] = {"^.*zz$"};
    static const int32_t toks[1] = {11};
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = words;
    lp.n_words = 1;
    lp.patterns = pats;
    lp.n_patterns = 1;
    lp.full_patterns = fulls;
    lp.n_full_patterns = 1;
    lp.tokens = toks;
    lp.n_tokens = 1;
    OP(r, sift_grammar_set_lazy(g, &lp, &E));
    OP(r, sift_grammar_accept_token(g, 20, &E)); /* waiting */
    OP(r, sift_grammar_clone(g, &h, &E));
    OP(r, sift_grammar_accept_token(g, 0, &E)); /* "{" fires */
    const int32_t seq[] = {2, 6, 7, 2, 3, 5, 8, 4, 2, 7, 2, 3, 6};
    for (size_t i = 0; i < N(seq); i++) {
        int ok = 0;
        OP(r, sift_grammar_accepts_token(g, seq[i], &ok, &E));
        ck_assert_int_eq(ok, 1);
        float row[GV];
        for (int t = 0; t < GV; t++)
            row[t] = (float)t;
        OP(r, sift_grammar_ban(g, row, GV, &E));
        sift_candidate cand[4] = {{seq[i], 1.0f}, {30, 2.0f}, {1, 0.0f}, {2, 0.5f}};
        OP(r, sift_grammar_ban_candidates(g, cand, 4, &E));
        uint32_t mk[2 * 2];
        OP(r, sift_grammar_fill_bitmask(g, mk, 2, &E));
        sift_grammar *two[2] = {g, NULL};
        OP(r, sift_grammars_fill_bitmasks(two, 2, mk, 2, &E));
        OP(r, sift_grammar_accept_token(g, seq[i], &E));
    }
    OP(r, sift_grammar_accept_bytes(h, "q{", 2, &E)); /* the pattern fires */
    OP(r, sift_grammar_accept_bytes(h, "\"ab\":", 5, &E));
    sift_grammar_free(g);
    sift_grammar_free(h);
    /* a string: its looping state takes the mask's loop-signature path
     * (the row of transitions, the signature's build) */
    static const char *const S_TEXT = "root ::= \"\\\"\" [^\"]* \"\\\"\"\n";
    sift_grammar *sg = NULL;
    OP(r, sift_grammar_new(&sg, S_TEXT, strlen(S_TEXT), v, &gp, &E));
    const int32_t sseq[] = {2, 6, 8, 12, 5, 2};
    for (size_t i = 0; i < N(sseq); i++) {
        uint32_t mk[2];
        OP(r, sift_grammar_fill_bitmask(sg, mk, 2, &E));
        ck_assert_uint_eq((mk[sseq[i] >> 5] >> (sseq[i] & 31)) & 1, 1);
        float row[GV];
        for (int t = 0; t < GV; t++)
            row[t] = (float)t;
        OP(r, sift_grammar_ban(sg, row, GV, &E));
        OP(r, sift_grammar_accept_token(sg, sseq[i], &E));
    }
    sift_grammar_free(sg);
    sift_vocab_free(v);
}

/* A chain with a grammar stage and a check grammar: every sampling path,
 * the hook, clone. */
static void scenario_chain_grammar(op_run *r, const sift_allocator *al)
{
    sift_vocab *v = small_vocab(r, al);
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.allocator = al;
    sift_grammar *g = NULL, *chk = NULL;
    OP(r, sift_grammar_new(&g, G_TEXT, strlen(G_TEXT), v, &gp, &E));
    OP(r, sift_grammar_clone(g, &chk, &E));
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.allocator = al;
    p.seed = 3;
    sift_chain *c = NULL, *d = NULL;
    OP(r, sift_chain_new(&c, &p, &E));
    OP(r, sift_chain_add_penalties(c, 16, 1.2f, 0.0f, 0.0f, &E));
    OP(r, sift_chain_add_grammar(c, g, &E));
    OP(r, sift_chain_add_top_k(c, 8, &E));
    OP(r, sift_chain_add_dist(c, &E));
    OP(r, sift_chain_set_check_grammar(c, chk, &E));
    OP(r, sift_chain_set_row_hook(c, g_hook, NULL, &E));
    sift_slicer *sl = NULL;
    OP(r, sift_slicer_new(&sl, GV, al, &E));
    for (int step = 0; step < 6; step++) {
        tu_rng rr = {100 + (uint64_t)step};
        tu_row(&rr, g_row, GV, TU_ROW_NORMAL);
        int32_t t = -1, ts = -1;
        sift_token_prob out[GV];
        size_t n;
        sift_plan plan = {.struct_size = sizeof(sift_plan)};
        sift_plan_stage ps[4];
        for (int i = 0; i < 4; i++)
            ps[i].struct_size = sizeof ps[i];
        OP(r, sift_chain_plan(c, &plan, ps, &E));
        OP(r, sift_chain_next_k(c, &plan, &E));
        int32_t ids[64];
        size_t ne = 0;
        OP(r, sift_chain_extras(c, ids, 64, &ne, &E));
        sift_slice s;
        OP(r, sift_slicer_build(sl, g_row, GV, 4, ids, ne, &s, &E));
        OP(r, sift_chain_distribution(c, g_row, GV, out, GV, &n, &E));
        OP(r, sift_chain_distribution_slice(c, &s, out, GV, &n, &E));
        OP(r, sift_chain_sample_slice(c, &s, &ts, &E));
        OP(r, sift_chain_sample(c, g_row, GV, &t, &E));
        if (step == 2) {
            OP(r, sift_chain_clone(c, &d, &E));
            sift_chain_free(d);
        }
        OP(r, sift_chain_accept(c, t, &E));
    }
    sift_slicer_free(sl);
    sift_chain_free(c);
    sift_vocab_free(v);
}

/* Vocabularies from memory. */
static void scenario_vocab_files(op_run *r, const sift_allocator *al)
{
    static const char tk[] = "YQ== 0\nYg== 1\nYWI= 2\nIA== 3\nCg== 5\n";
    sift_vocab *v = NULL;
    OP(r, sift_vocab_from_tiktoken(&v, tk, sizeof tk - 1, al, &E));
    ck_assert_int_eq(sift_vocab_size(v), 6);
    sift_vocab_free(v);
}

static void (*const scenarios[])(op_run *, const sift_allocator *) = {
    scenario_grammar, scenario_chain_grammar, scenario_vocab_files};

START_TEST(test_failing_the_nth_allocation_of_every_other_call_is_nomem)
{
    for (long nth = 0;; nth++) {
        fa f = {0, nth, 0, 0, 0};
        sift_allocator al = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
        op_run r = {&f, _i, nth, 0};
        scenarios[_i](&r, &al);
        ck_assert_msg(f.allocs == f.frees, "scenario %d, N=%ld: %ld allocations, %ld frees", _i,
                      nth, f.allocs, f.frees);
        if (nth == 0) {
            ck_assert_int_gt(f.calls, 0);
            continue;
        }
        if (nth > f.calls)
            break;
        ck_assert_msg(f.failed == 1, "scenario %d, N=%ld", _i, nth);
        ck_assert_msg(r.reported == 1, "scenario %d, N=%ld: a failed allocation was swallowed", _i,
                      nth);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* sift__reserve                                                       */
/* ------------------------------------------------------------------ */

static sift__alloc fa_sift_alloc(fa *f)
{
    sift_allocator a = {sizeof(sift_allocator), fa_alloc, fa_free, f, NULL};
    sift__alloc al;
    ck_assert_int_eq(sift__alloc_init(&al, &a, NULL), SIFT_OK);
    return al;
}

START_TEST(test_reserve_doubles_from_the_first_capacity_keeping_the_live_elements)
{
    fa f = {0};
    sift__alloc al = fa_sift_alloc(&f);
    int32_t *v = NULL;
    size_t cap = 0;
    ck_assert_int_eq(sift__reserve(&al, &v, &cap, 0, 3, sizeof *v, 4), SIFT_OK);
    ck_assert_uint_eq(cap, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(v[i], 0);
    for (int i = 0; i < 3; i++)
        v[i] = 10 + i;
    ck_assert_int_eq(sift__reserve(&al, &v, &cap, 3, 9, sizeof *v, 4), SIFT_OK);
    ck_assert_uint_eq(cap, 16);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(v[i], 10 + i);
    for (int i = 3; i < 16; i++)
        ck_assert_int_eq(v[i], 0); /* from `used` on */
    ck_assert_int_eq(f.allocs, 2);
    ck_assert_int_eq(f.frees, 1);
    sift__free(&al, v);
    ck_assert_int_eq(f.frees, 2);
}
END_TEST

START_TEST(test_reserve_allocates_nothing_while_the_capacity_suffices)
{
    fa f = {0};
    sift__alloc al = fa_sift_alloc(&f);
    char *v = NULL;
    size_t cap = 0;
    ck_assert_int_eq(sift__reserve(&al, &v, &cap, 0, 0, 1, 8), SIFT_OK);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(sift__reserve(&al, &v, &cap, 0, 5, 1, 8), SIFT_OK);
    char *was = v;
    for (size_t need = 0; need <= 8; need++)
        ck_assert_int_eq(sift__reserve(&al, &v, &cap, 5, need, 1, 8), SIFT_OK);
    ck_assert_ptr_eq(v, was);
    ck_assert_uint_eq(cap, 8);
    ck_assert_int_eq(f.calls, 1);
    sift__free(&al, v);
}
END_TEST

START_TEST(test_reserve_that_fails_leaves_the_array_as_it_was)
{
    fa f = {0};
    sift__alloc al = fa_sift_alloc(&f);
    int64_t *v = NULL;
    size_t cap = 0;
    ck_assert_int_eq(sift__reserve(&al, &v, &cap, 0, 2, sizeof *v, 2), SIFT_OK);
    v[0] = 7;
    v[1] = 8;
    int64_t *was = v;
    f.fail_at = f.calls + 1;
    ck_assert_int_eq(sift__reserve(&al, &v, &cap, 2, 3, sizeof *v, 2), SIFT_E_NOMEM);
    ck_assert_ptr_eq(v, was);
    ck_assert_uint_eq(cap, 2);
    ck_assert_int_eq(v[0], 7);
    ck_assert_int_eq(v[1], 8);
    ck_assert_int_eq(f.frees, 0);
    ck_assert_int_eq(sift__reserve(&al, &v, &cap, 2, 3, sizeof *v, 2), SIFT_OK); /* retry */
    ck_assert_uint_eq(cap, 4);
    ck_assert_int_eq(v[0], 7);
    ck_assert_int_eq(v[1], 8);
    sift__free(&al, v);
    ck_assert_int_eq(f.allocs, f.frees);
}
END_TEST

START_TEST(test_reserve_refuses_a_size_that_overflows_without_allocating)
{
    fa f = {0};
    sift__alloc al = fa_sift_alloc(&f);
    char *v = NULL;
    size_t cap = 0;
    /* the capacity cannot double past SIZE_MAX */
    ck_assert_int_eq(sift__reserve(&al, &v, &cap, 0, SIZE_MAX / 2 + 2, 1, 1), SIFT_E_NOMEM);
    /* the capacity fits but capacity * esz does not */
    ck_assert_int_eq(sift__reserve(&al, &v, &cap, 0, 4, SIZE_MAX / 2, 4), SIFT_E_NOMEM);
    ck_assert_ptr_null(v);
    ck_assert_uint_eq(cap, 0);
    ck_assert_int_eq(f.calls, 0);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("per_step");
    tcase_add_loop_test(tc, test_no_allocation_per_step_after_the_first_sample, 0, SEL__COUNT);
    suite_add_tcase(s, tc);
    tc = tcase_create("through_the_allocator");
    tcase_add_test(tc, test_every_allocation_goes_through_the_allocator);
    suite_add_tcase(s, tc);
    tc = tcase_create("fail_nth");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_failing_the_nth_allocation_is_clean_for_every_n, 0, SEL__COUNT);
    tcase_add_test(tc, test_failing_the_nth_allocation_of_a_vocabulary_leaks_nothing);
    tcase_add_test(tc, test_a_failed_first_allocation_of_new_or_sample_is_nomem_and_retryable);
    tcase_add_test(tc, test_failing_the_nth_allocation_of_the_slice_path_is_clean);
    tcase_add_loop_test(tc, test_failing_the_nth_allocation_of_every_other_call_is_nomem, 0,
                        (int)N(scenarios));
    suite_add_tcase(s, tc);
    tc = tcase_create("reserve");
    tcase_add_test(tc, test_reserve_doubles_from_the_first_capacity_keeping_the_live_elements);
    tcase_add_test(tc, test_reserve_allocates_nothing_while_the_capacity_suffices);
    tcase_add_test(tc, test_reserve_that_fails_leaves_the_array_as_it_was);
    tcase_add_test(tc, test_reserve_refuses_a_size_that_overflows_without_allocating);
    suite_add_tcase(s, tc);
    return s;
}

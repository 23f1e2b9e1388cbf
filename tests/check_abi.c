/*
 * check_abi.c - the rules that let the ABI grow (include/sift.h, "ABI";
 * docs/api.md, "ABI policy"):
 *
 * - an output struct with struct_size (sift_stats, sift_plan, the
 *   sift_plan_stage array) is written only up to the caller's size: a
 *   guard pattern after an older, smaller layout survives;
 * - an input struct with struct_size (sift_dry_params, sift_allocator)
 *   is read only up to the caller's size, the rest taking defaults;
 * - struct_size 0 or above the library's sizeof is SIFT_E_ARG with
 *   nothing written;
 * - the allocator's optional realloc is what the grow paths use, and a
 *   NULL realloc (alloc + copy + free) gives the same results;
 * - a custom-stage vtable is read by the size of its abi_version's layout;
 *   versions 0 and above SIFT_CUSTOM_STAGE_ABI are refused by name.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sift.h"

#define V 64
#define GUARD 0xA5

static sift_chain *sliced_chain(void)
{
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 8, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.7f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

static void fill_row(float *row)
{
    for (int i = 0; i < V; i++)
        row[i] = (float)((i * 37) % V) / 8.0f;
}

static int all_guard(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != GUARD)
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Outputs                                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_stats_of_an_older_smaller_size_writes_only_that_much)
{
    sift_chain *c = sliced_chain();
    float row[V];
    fill_row(row);
    int32_t tok;
    ck_assert_int_eq(sift_chain_sample(c, row, V, &tok, NULL), SIFT_OK);
    unsigned char buf[sizeof(sift_stats) + 16];
    memset(buf, GUARD, sizeof buf);
    /* An "old" layout that ends after hook_calls. */
    uint32_t old = (uint32_t)(offsetof(sift_stats, hook_calls) + sizeof(uint64_t));
    memcpy(buf, &old, sizeof old);
    ck_assert_int_eq(sift_chain_stats(c, (sift_stats *)(void *)buf, NULL), SIFT_OK);
    sift_stats got;
    memcpy(&got, buf, old);
    ck_assert_uint_eq(got.struct_size, old);
    ck_assert_uint_eq(got.slice_decided, 0);
    ck_assert_uint_eq(got.hook_calls, 0);
    ck_assert(all_guard(buf + old, sizeof buf - old));
    sift_chain_free(c);
}
END_TEST

START_TEST(test_stats_with_size_zero_or_too_large_is_refused_and_writes_nothing)
{
    sift_chain *c = sliced_chain();
    const uint32_t bad[] = {0, (uint32_t)sizeof(sift_stats) + 1};
    for (size_t i = 0; i < 2; i++) {
        unsigned char buf[sizeof(sift_stats) + 16];
        memset(buf, GUARD, sizeof buf);
        memcpy(buf, &bad[i], sizeof bad[i]);
        sift_error err;
        ck_assert_int_eq(sift_chain_stats(c, (sift_stats *)(void *)buf, &err), SIFT_E_ARG);
        ck_assert_ptr_nonnull(strstr(err.message, "sift_stats.struct_size"));
        ck_assert(all_guard(buf + sizeof bad[i], sizeof buf - sizeof bad[i]));
    }
    sift_stats st = {.struct_size = sizeof st};
    ck_assert_int_eq(sift_chain_stats(NULL, &st, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_stats(c, NULL, NULL), SIFT_E_ARG);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_plan_of_an_older_smaller_size_writes_only_that_much)
{
    sift_chain *c = sliced_chain();
    sift_plan full = {.struct_size = sizeof full};
    ck_assert_int_eq(sift_chain_plan(c, &full, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(full.k, 8);
    /* An "old" layout without `why`. */
    uint32_t old = (uint32_t)offsetof(sift_plan, why);
    unsigned char buf[sizeof(sift_plan) + 16];
    for (int dynamic = 0; dynamic < 2; dynamic++) {
        memset(buf, GUARD, sizeof buf);
        memcpy(buf, &old, sizeof old);
        sift_plan *p = (sift_plan *)(void *)buf;
        ck_assert_int_eq(
            dynamic ? sift_chain_next_k(c, p, NULL) : sift_chain_plan(c, p, NULL, NULL), SIFT_OK);
        sift_plan got;
        memcpy(&got, buf, old);
        ck_assert_uint_eq(got.struct_size, old);
        ck_assert_int_eq(got.k, full.k);
        ck_assert_int_eq(got.guarantee, full.guarantee);
        ck_assert_int_eq(got.decided_at, full.decided_at);
        ck_assert(all_guard(buf + old, sizeof buf - old));
    }
    sift_chain_free(c);
}
END_TEST

START_TEST(test_plan_stages_use_the_first_struct_size_as_the_stride)
{
    sift_chain *c = sliced_chain();
    size_t n = sift_chain_n_stages(c);
    sift_plan plan = {.struct_size = sizeof plan};
    sift_plan_stage want[3];
    for (size_t i = 0; i < n; i++)
        want[i].struct_size = sizeof want[i];
    ck_assert_int_eq(sift_chain_plan(c, &plan, want, NULL), SIFT_OK);
    /* Elements of an "old" layout: up to k, without `why`. */
    size_t stride = offsetof(sift_plan_stage, why);
    unsigned char buf[3 * offsetof(sift_plan_stage, why) + 16];
    memset(buf, GUARD, sizeof buf);
    for (size_t i = 0; i < n; i++) {
        uint32_t s = (uint32_t)stride;
        memcpy(buf + i * stride, &s, sizeof s);
    }
    ck_assert_int_eq(sift_chain_plan(c, &plan, (sift_plan_stage *)(void *)buf, NULL), SIFT_OK);
    for (size_t i = 0; i < n; i++) {
        sift_plan_stage got;
        memcpy(&got, buf + i * stride, stride);
        ck_assert_uint_eq(got.struct_size, stride);
        ck_assert_int_eq(got.cls, want[i].cls);
        ck_assert_int_eq(got.n, want[i].n);
        ck_assert_int_eq(got.k, want[i].k);
    }
    ck_assert(all_guard(buf + n * stride, sizeof buf - n * stride));
    sift_chain_free(c);
}
END_TEST

START_TEST(test_plan_stages_of_different_sizes_are_refused_with_the_position)
{
    sift_chain *c = sliced_chain();
    sift_plan plan = {.struct_size = sizeof plan};
    sift_plan_stage st[3];
    memset(st, GUARD, sizeof st);
    st[0].struct_size = st[1].struct_size = sizeof st[0];
    st[2].struct_size = 8;
    sift_error err;
    ck_assert_int_eq(sift_chain_plan(c, &plan, st, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 2);
    ck_assert(all_guard((const unsigned char *)st[0].why, sizeof st[0].why));
    st[0].struct_size = 0;
    ck_assert_int_eq(sift_chain_plan(c, &plan, st, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "sift_plan_stage.struct_size is 0"));
    plan.struct_size = sizeof plan + 4;
    ck_assert_int_eq(sift_chain_plan(c, &plan, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "newer"));
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Inputs                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_dry_params_of_an_older_smaller_size_read_only_that_much)
{
    /* The fields past the caller's size are garbage here; sift must take
     * their defaults (no breakers) instead of reading them. */
    sift_dry_params p;
    memset(&p, GUARD, sizeof p);
    p.struct_size = (uint32_t)offsetof(sift_dry_params, breakers);
    p.multiplier = 0.8f;
    p.base = 1.75f;
    p.allowed_length = 2;
    p.last_n = 64;
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dry(c, &p, NULL, NULL), SIFT_OK);
    p.struct_size = 0;
    sift_error err;
    ck_assert_int_eq(sift_chain_add_dry(c, &p, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "sift_dry_params.struct_size"));
    ck_assert_uint_eq(sift_chain_n_stages(c), 1);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_dry_params_init_gives_the_documented_defaults)
{
    sift_dry_params p;
    memset(&p, GUARD, sizeof p);
    sift_dry_params_init(&p);
    ck_assert_uint_eq(p.struct_size, sizeof p);
    ck_assert(p.multiplier == 0.0f && p.base == 1.75f);
    ck_assert_int_eq(p.allowed_length, 2);
    ck_assert_int_eq(p.last_n, 4096);
    ck_assert_ptr_null(p.breakers);
    ck_assert_ptr_null(p.breaker_lengths);
    ck_assert_uint_eq(p.n_breakers, 0);
    sift_dry_params_init(NULL);
}
END_TEST

typedef struct counts {
    long allocs, frees, reallocs;
} counts;

static void *c_alloc(void *user, size_t size)
{
    ((counts *)user)->allocs++;
    return malloc(size);
}

static void c_free(void *user, void *p)
{
    if (p)
        ((counts *)user)->frees++;
    free(p);
}

static void *c_realloc(void *user, void *p, size_t old_size, size_t new_size)
{
    ck_assert(old_size > 0 && new_size > old_size);
    ((counts *)user)->reallocs++;
    return realloc(p, new_size);
}

/* A grammar of 40 alternatives: its parser's vectors grow several times. */
static sift_status big_grammar(const sift_allocator *al, sift_grammar **g)
{
    char text[512] = "root ::= \"a0\"";
    for (int i = 1; i < 40; i++) {
        char alt[16];
        snprintf(alt, sizeof alt, " | \"a%d\"", i);
        strcat(text, alt);
    }
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.allocator = al;
    return sift_grammar_new(g, text, strlen(text), NULL, &gp, NULL);
}

START_TEST(test_grow_paths_use_the_allocators_realloc_and_fall_back_without_it)
{
    for (int with = 0; with < 2; with++) {
        counts n = {0, 0, 0};
        sift_allocator al = {sizeof al, c_alloc, c_free, &n, with ? c_realloc : NULL};
        sift_grammar *g;
        ck_assert_int_eq(big_grammar(&al, &g), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_bytes(g, "a39", 3, NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_is_complete(g), 1);
        ck_assert_int_eq(sift_grammar_accept_bytes(g, "x", 1, NULL), SIFT_E_GRAMMAR_REJECT);
        sift_grammar_free(g);
        if (with)
            ck_assert_int_gt(n.reallocs, 0);
        else
            ck_assert_int_eq(n.reallocs, 0);
        ck_assert_int_eq(n.allocs, n.frees);
    }
}
END_TEST

START_TEST(test_an_allocator_with_a_bad_size_or_half_set_is_refused)
{
    counts n = {0, 0, 0};
    sift_allocator bad[] = {
        {0, c_alloc, c_free, &n, NULL},
        {sizeof(sift_allocator) + 8, c_alloc, c_free, &n, NULL},
        {sizeof(sift_allocator), c_alloc, NULL, &n, NULL},
        {sizeof(sift_allocator), NULL, c_free, &n, NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sift_chain_params cp;
        sift_chain_params_init(&cp);
        cp.allocator = &bad[i];
        sift_chain *c = (sift_chain *)&n;
        sift_error err;
        ck_assert_int_eq(sift_chain_new(&c, &cp, &err), SIFT_E_ARG);
        ck_assert_ptr_nonnull(strstr(err.message, "sift_allocator"));
        ck_assert_ptr_null(c);
        sift_slicer *s;
        ck_assert_int_eq(sift_slicer_new(&s, V, &bad[i], NULL), SIFT_E_ARG);
    }
    ck_assert_int_eq(n.allocs, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The custom-stage vtable                                             */
/* ------------------------------------------------------------------ */

static int halve(void *user, sift_candidate *d, size_t *size)
{
    (void)user;
    (void)d;
    *size = (*size + 1) / 2;
    return 0;
}

START_TEST(test_a_custom_vtable_of_the_version_1_layout_works)
{
    /* Exactly the bytes of the version 1 layout, nothing after them (an
     * over-read is caught by the sanitizer build). */
    size_t v1 = offsetof(sift_custom_stage, free) + sizeof(void (*)(void *));
    sift_custom_stage vt;
    memset(&vt, 0, sizeof vt);
    vt.abi_version = 1;
    vt.name = "halve";
    vt.apply = halve;
    sift_custom_stage *exact = malloc(v1);
    ck_assert_ptr_nonnull(exact);
    memcpy(exact, &vt, v1);
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_custom(c, exact, NULL, NULL), SIFT_OK);
    free(exact);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    ck_assert_str_eq(sift_chain_stage_name(c, 0), "halve");
    float row[V];
    fill_row(row);
    int32_t tok;
    ck_assert_int_eq(sift_chain_sample(c, row, V, &tok, NULL), SIFT_OK);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_a_custom_vtable_of_an_unknown_version_is_refused_by_name)
{
    sift_custom_stage vt;
    memset(&vt, 0, sizeof vt);
    vt.apply = halve;
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    const uint32_t bad[] = {0, SIFT_CUSTOM_STAGE_ABI + 1};
    const char *why[] = {"set it to SIFT_CUSTOM_STAGE_ABI", "newer than the library"};
    for (size_t i = 0; i < 2; i++) {
        vt.abi_version = bad[i];
        sift_error err;
        ck_assert_int_eq(sift_chain_add_custom(c, &vt, NULL, &err), SIFT_E_ARG);
        ck_assert_ptr_nonnull(strstr(err.message, "versions 1 to"));
        ck_assert_ptr_nonnull(strstr(err.message, why[i]));
    }
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    sift_chain_free(c);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("outputs");
    tcase_add_test(tc, test_stats_of_an_older_smaller_size_writes_only_that_much);
    tcase_add_test(tc, test_stats_with_size_zero_or_too_large_is_refused_and_writes_nothing);
    tcase_add_test(tc, test_plan_of_an_older_smaller_size_writes_only_that_much);
    tcase_add_test(tc, test_plan_stages_use_the_first_struct_size_as_the_stride);
    tcase_add_test(tc, test_plan_stages_of_different_sizes_are_refused_with_the_position);
    suite_add_tcase(s, tc);
    tc = tcase_create("inputs");
    tcase_add_test(tc, test_dry_params_of_an_older_smaller_size_read_only_that_much);
    tcase_add_test(tc, test_dry_params_init_gives_the_documented_defaults);
    tcase_add_test(tc, test_grow_paths_use_the_allocators_realloc_and_fall_back_without_it);
    tcase_add_test(tc, test_an_allocator_with_a_bad_size_or_half_set_is_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("custom_vtable");
    tcase_add_test(tc, test_a_custom_vtable_of_the_version_1_layout_works);
    tcase_add_test(tc, test_a_custom_vtable_of_an_unknown_version_is_refused_by_name);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_config_oom.c - libyaml's own allocation failures (BAD_INPUTS
 * F-04) become SIFT_E_NOMEM, with nothing leaked and no crash.
 *
 * libyaml has no allocator hook, so this binary interposes malloc,
 * calloc, realloc and free (glibc: forwarding to __libc_malloc and
 * friends) and fails the Nth call made while a config is being parsed,
 * for every N. sift's own allocations go through a sift_allocator that
 * calls __libc_malloc directly, so only libyaml's (and libc's) calls are
 * failed here; check_config covers sift's through the allocator hook.
 * Built without effect under sanitizers (they own malloc) and on
 * non-glibc systems; under valgrind the interposition is replaced and the
 * loop only checks that nothing fails.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "sift.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SIFT_TEST_NO_INTERPOSE 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(__GLIBC__)
#define SIFT_TEST_NO_INTERPOSE 1
#endif

#ifndef SIFT_TEST_NO_INTERPOSE
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

/* Armed only around the parse call; the test is single-threaded. */
static long armed, calls, fail_at;

static int should_fail(void)
{
    return armed && ++calls == fail_at;
}

void *malloc(size_t n);
void *calloc(size_t n, size_t m);
void *realloc(void *p, size_t n);
void free(void *p);

void *malloc(size_t n)
{
    return should_fail() ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    return should_fail() ? NULL : __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    return should_fail() ? NULL : __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}

static long live;

static void *sa_alloc(void *user, size_t n)
{
    (void)user;
    void *p = __libc_malloc(n);
    if (p)
        live++;
    return p;
}

static void sa_free(void *user, void *p)
{
    (void)user;
    if (p)
        live--;
    __libc_free(p);
}
#endif

START_TEST(test_libyaml_allocation_failures_become_nomem)
{
#ifndef SIFT_TEST_NO_INTERPOSE
    const char *yaml = "seed: 1\n"
                       "chain:\n"
                       "  - penalties: {last_n: 64, repeat: 1.1}\n"
                       "  - top_k: 40\n  - top_p: {p: 0.95, min_keep: 1}\n"
                       "  - temperature: 0.8\n  - dist\n"
                       "grammar:\n  text: |\n    root ::= \"a\" [b-z]*\n"
                       "  lazy: {words: [\"<x>\"], patterns: ['^\\s*\\{']}\n";
    sift_allocator al = {sizeof(sift_allocator), sa_alloc, sa_free, NULL, NULL};
    sift_config_params p;
    sift_config_params_init(&p);
    p.allocator = &al;
    long n_nomem = 0, done = 0;
    for (long n = 1; n < 100000 && !done; n++) {
        sift_config *cfg = NULL;
        calls = 0;
        fail_at = n;
        live = 0;
        armed = 1;
        sift_status st = sift_config_parse(&cfg, "t.yaml", yaml, strlen(yaml), &p, NULL);
        armed = 0;
        if (st == SIFT_E_NOMEM) {
            n_nomem++;
            ck_assert_ptr_null(cfg);
        } else {
            ck_assert_int_eq(st, SIFT_OK);
            ck_assert_uint_eq(sift_config_n_diagnostics(cfg), 0);
        }
        sift_config_free(cfg);
        ck_assert_msg(live == 0, "N=%ld: %ld blocks leaked", n, live);
        if (calls < n)
            done = 1; /* the parse made fewer than n calls: all covered */
    }
    ck_assert(done);
    /* libyaml allocates at least its buffers; under valgrind the calls do
     * not reach us and there is nothing to fail. */
    if (calls > 0)
        ck_assert_int_gt(n_nomem, 0);
#endif
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("config_oom");
    TCase *tc = tcase_create("libyaml");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_libyaml_allocation_failures_become_nomem);
    suite_add_tcase(s, tc);
    /* No fork: the interposed malloc must see the parse in this process
     * only, and Check's own allocations happen while it is disarmed. */
    tu_harness_fork(CK_NOFORK);
    return s;
}

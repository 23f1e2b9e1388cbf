/*
 * harness.h - the one main() of the Check suites.
 *
 * A suite file tests/check_<module>.c includes this header, defines
 * tu_suite() (suite_create, its TCases, their tcase_add_test lines and
 * timeouts: the list of its cases) and no main(). tests/harness.c holds
 * the main() every suite binary links: it builds the suite, runs it with
 * Check's CK_NORMAL output and exits with EXIT_FAILURE when a test failed.
 * tests/check_harness.sh fails when a suite file defines main().
 *
 * Running a suite binary by hand:
 *   tests/check_chain                  every case
 *   tests/check_chain --list           its cases and their tests, in order
 *   tests/check_chain NAME...          only the cases or tests so named
 *                                      (SIFT_TEST_RUN="NAME..." does the
 *                                      same under make check)
 *   CK_RUN_CASE=NAME, CK_INCLUDE_TAGS, CK_FORK=no, CK_VERBOSITY=verbose
 *                                      Check's own variables, as always
 * A NAME that names no case and no test is an error, so a typo cannot
 * pass by running nothing.
 *
 * To know the names, the header routes Check's tcase_create,
 * tcase_add_*test* and suite_add_tcase through the harness, which records
 * them and forwards to Check; the suite files call Check's API as usual.
 *
 * A suite whose run needs more than that uses the hooks below from
 * tu_suite(): reading its environment there (returning NULL on a bad
 * value fails the binary), forcing the fork mode, or judging the run at
 * its end (a total counted across tests, say).
 */
#ifndef SIFT_HARNESS_H
#define SIFT_HARNESS_H

#include <check.h>

/* The suite of this binary, defined once per tests/check_*.c. NULL fails
 * the binary (after the suite said why on stderr). */
Suite *tu_suite(void);

/* Hooks for tu_suite(). */

/* Runs the tests with fork status st (CK_FORK or CK_NOFORK), whatever
 * CK_FORK says: for a suite whose tests must share this process. */
void tu_harness_fork(enum fork_status st);

/* fn runs after the tests, before the runner is freed, with the number
 * of failed tests; it returns the number to judge the run by (more when
 * it finds a failure of its own). */
void tu_harness_at_end(int (*fn)(SRunner *sr, int failed));

/* The harness's side of Check's registration calls (used through the
 * macros below, not directly). */
TCase *tu_tcase_create(const char *name);
void tu_tcase_add(TCase *tc, const TTest *t, int signal, int exit_value, int start, int end);
void tu_suite_add_tcase(Suite *s, TCase *tc);

#undef tcase_add_test
#undef tcase_add_test_raise_signal
#undef tcase_add_exit_test
#undef tcase_add_loop_test
#undef tcase_add_loop_test_raise_signal
#undef tcase_add_loop_exit_test
#define tcase_create(name) tu_tcase_create(name)
#define suite_add_tcase(s, tc) tu_suite_add_tcase((s), (tc))
#define tcase_add_test(tc, t) tu_tcase_add((tc), (t), 0, 0, 0, 1)
#define tcase_add_test_raise_signal(tc, t, sig) tu_tcase_add((tc), (t), (sig), 0, 0, 1)
#define tcase_add_exit_test(tc, t, ev) tu_tcase_add((tc), (t), 0, (ev), 0, 1)
#define tcase_add_loop_test(tc, t, s, e) tu_tcase_add((tc), (t), 0, 0, (s), (e))
#define tcase_add_loop_test_raise_signal(tc, t, sig, s, e) \
    tu_tcase_add((tc), (t), (sig), 0, (s), (e))
#define tcase_add_loop_exit_test(tc, t, ev, s, e) tu_tcase_add((tc), (t), 0, (ev), (s), (e))

/* Check's ck_assert_msg (under every typed ck_assert_*) records the place
 * of each assertion that passes with a write(2) to its message channel:
 * the suites' loops over whole rows made over a million such calls per
 * suite, a third of make check's CPU time spent in the kernel. Here a
 * passing assertion costs nothing; a failing one reports its file, line
 * and message exactly as before. What is lost is only the "last passing
 * point" Check prints when a test dies on a signal; mark_point() still
 * sets it where a suite wants one. */
#undef ck_assert_msg
#define ck_assert_msg(expr, ...) \
    ((expr)                      \
         ? (void)0               \
         : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", ##__VA_ARGS__))

#endif

/*
 * harness.c - main() for every Check suite (see harness.h): builds the
 * suite of tu_suite(), keeps the cases and tests named on the command
 * line (or in SIFT_TEST_RUN), lists them or runs them, and runs the
 * suite's end hook.
 *
 * The registration calls of tu_suite() come here first (harness.h's
 * macros). The harness records each case and test, forwards a test to
 * Check only when the selection keeps it, and holds back every
 * suite_add_tcase until tu_suite() returns, so that a case left with no
 * test is not run (its fixtures would run for nothing).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The real Check calls, under the names harness.h routes here. */
#undef tcase_create
#undef suite_add_tcase

typedef struct tu_case {
    TCase *tc;
    const char *name;
    Suite *suite; /* NULL until suite_add_tcase */
    size_t kept;  /* tests forwarded to Check */
} tu_case;

typedef struct tu_test {
    size_t case_index;
    const char *name;
    int start, end;
    int kept;
} tu_test;

static struct {
    tu_case *cases;
    size_t n_cases, cap_cases;
    tu_test *tests;
    size_t n_tests, cap_tests;
    size_t *order; /* case indices in suite_add_tcase order */
    size_t n_order, cap_order;
    char **names; /* the selection; none: every test */
    size_t n_names;
    char *used; /* used[i]: names[i] matched a case or a test */
    char *env;  /* a copy of SIFT_TEST_RUN that names[] points into */
    enum fork_status fork;
    int (*at_end)(SRunner *sr, int failed);
} H = {.fork = CK_FORK_GETENV};

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return p;
    size_t c = *cap ? *cap * 2 : 16;
    void *q = realloc(p, c * size);
    if (!q) {
        fputs("harness: out of memory\n", stderr);
        exit(EXIT_FAILURE);
    }
    *cap = c;
    return q;
}

/* Whether name is selected (and marks it used). */
static int selected(const char *name)
{
    int hit = 0;
    for (size_t i = 0; i < H.n_names; i++)
        if (strcmp(H.names[i], name) == 0)
            hit = H.used[i] = 1;
    return hit;
}

void tu_harness_fork(enum fork_status st)
{
    H.fork = st;
}

void tu_harness_at_end(int (*fn)(SRunner *sr, int failed))
{
    H.at_end = fn;
}

TCase *tu_tcase_create(const char *name)
{
    H.cases = grow(H.cases, &H.cap_cases, H.n_cases, sizeof *H.cases);
    TCase *tc = tcase_create(name);
    H.cases[H.n_cases++] = (tu_case){.tc = tc, .name = name ? name : ""};
    return tc;
}

static size_t case_of(const TCase *tc)
{
    for (size_t i = H.n_cases; i-- > 0;)
        if (H.cases[i].tc == tc)
            return i;
    fputs("harness: a TCase not made by tcase_create\n", stderr);
    exit(EXIT_FAILURE);
}

void tu_tcase_add(TCase *tc, const TTest *t, int signal, int exit_value, int start, int end)
{
    size_t ci = case_of(tc);
    /* both names are looked up, so that each one counts as used */
    int by_case = selected(H.cases[ci].name);
    int by_test = selected(t->name);
    int keep = H.n_names == 0 || by_case || by_test;
    H.tests = grow(H.tests, &H.cap_tests, H.n_tests, sizeof *H.tests);
    H.tests[H.n_tests++] = (tu_test){ci, t->name, start, end, keep};
    if (!keep)
        return;
    _tcase_add_test(tc, t, signal, exit_value, start, end);
    H.cases[ci].kept++;
}

void tu_suite_add_tcase(Suite *s, TCase *tc)
{
    size_t ci = case_of(tc);
    H.cases[ci].suite = s;
    H.order = grow(H.order, &H.cap_order, H.n_order, sizeof *H.order);
    H.order[H.n_order++] = ci;
}

/* The selection: the names among argv[1..argc) (options are NULL by
 * then), or else those of SIFT_TEST_RUN, separated by spaces or commas. */
static void select_names(int argc, char **argv)
{
    size_t cap = (size_t)argc + 1;
    const char *env = getenv("SIFT_TEST_RUN");
    int from_argv = 0;
    for (int i = 1; i < argc; i++)
        from_argv |= argv[i] != NULL;
    if (!from_argv && env && *env) {
        H.env = malloc(strlen(env) + 1);
        if (!H.env)
            exit(EXIT_FAILURE);
        strcpy(H.env, env);
        cap = strlen(env) / 2 + 1; /* at most this many names */
    }
    H.names = calloc(cap, sizeof *H.names);
    H.used = calloc(cap, 1);
    if (!H.names || !H.used)
        exit(EXIT_FAILURE);
    if (from_argv) {
        for (int i = 1; i < argc; i++)
            if (argv[i])
                H.names[H.n_names++] = argv[i];
    } else if (H.env) {
        for (char *tok = strtok(H.env, " ,\t"); tok; tok = strtok(NULL, " ,\t"))
            H.names[H.n_names++] = tok;
    }
}

static void list(const char *prog)
{
    size_t n_cases = 0, n_tests = 0;
    long n_checks = 0;
    for (size_t k = 0; k < H.n_order; k++) {
        size_t ci = H.order[k];
        if (H.n_names && H.cases[ci].kept == 0)
            continue;
        printf("%s\n", H.cases[ci].name);
        n_cases++;
        for (size_t i = 0; i < H.n_tests; i++) {
            const tu_test *t = &H.tests[i];
            if (t->case_index != ci || !t->kept)
                continue;
            if (t->start == 0 && t->end == 1)
                printf("  %s\n", t->name);
            else
                printf("  %s [%d, %d)\n", t->name, t->start, t->end);
            n_tests++;
            n_checks += t->end > t->start ? t->end - t->start : 0;
        }
    }
    printf("%s: %zu cases, %zu tests, %ld checks\n", prog, n_cases, n_tests, n_checks);
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [--list] [NAME...]\n"
            "  runs this Check suite; NAMEs (or SIFT_TEST_RUN) keep only the cases\n"
            "  and tests so named; --list prints them instead of running them.\n"
            "  Check's CK_RUN_CASE, CK_INCLUDE_TAGS, CK_FORK, CK_VERBOSITY apply.\n",
            prog);
}

int main(int argc, char **argv)
{
    const char *prog = argc > 0 && argv[0] ? argv[0] : "check";
    const char *slash = strrchr(prog, '/');
    if (slash)
        prog = slash + 1;
    int do_list = 0, names_only = 0;
    for (int i = 1; i < argc; i++) {
        if (names_only || argv[i][0] != '-')
            continue;
        if (strcmp(argv[i], "--list") == 0) {
            do_list = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout, prog);
            return EXIT_SUCCESS;
        } else if (strcmp(argv[i], "--") == 0) {
            names_only = 1;
        } else {
            fprintf(stderr, "%s: unknown option %s\n", prog, argv[i]);
            usage(stderr, prog);
            return EXIT_FAILURE;
        }
        argv[i] = NULL; /* not a name */
    }
    select_names(argc, argv);

    Suite *s = tu_suite();
    if (!s)
        return EXIT_FAILURE;
    int bad = 0;
    for (size_t i = 0; i < H.n_names; i++) {
        if (!H.used[i]) {
            fprintf(stderr, "%s: no case or test is named %s (--list names them)\n", prog,
                    H.names[i]);
            bad = 1;
        }
    }
    /* The cases the selection leaves empty go to a suite that is never
     * run, only freed (Check frees a case with its suite). */
    Suite *unselected = NULL;
    for (size_t k = 0; k < H.n_order; k++) {
        const tu_case *c = &H.cases[H.order[k]];
        if (H.n_names == 0 || c->kept > 0) {
            suite_add_tcase(c->suite, c->tc);
        } else {
            if (!unselected)
                unselected = suite_create("unselected");
            suite_add_tcase(unselected, c->tc);
        }
    }
    SRunner *sr = srunner_create(s);
    int failed = bad;
    if (do_list) {
        list(prog);
    } else if (!bad) {
        if (H.fork != CK_FORK_GETENV)
            srunner_set_fork_status(sr, H.fork);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        if (H.at_end)
            failed = H.at_end(sr, failed);
    }
    srunner_free(sr);
    if (unselected)
        srunner_free(srunner_create(unselected));
    free(H.cases);
    free(H.tests);
    free(H.order);
    free(H.names);
    free(H.used);
    free(H.env);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

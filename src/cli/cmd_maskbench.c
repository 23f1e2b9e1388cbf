/*
 * cmd_maskbench.c - `sift bench maskbench DIR --vocab FILE [--json]`:
 * the MaskBench protocol over a directory of schema files.
 *
 * What it owns: the maskbench subcommand of `sift bench`. Each file is
 * {"schema": ..., "tests": [{"valid": bool, "data": value}, ...]}. A
 * schema is compiled once (schema text -> ready grammar, timed); each
 * test's data is written as compact JSON (jansson, UTF-8 unescaped),
 * encoded with the vocabulary's BPE, and walked token by token: at every
 * step the allowed set is computed as a bitmask (timed: the mask time),
 * the token must be in it, and the grammar accepts it; after the last
 * token the end-of-generation step is masked too and the grammar must be
 * complete. A valid instance must pass every step; an invalid one must
 * fail one (a token outside the mask, or not complete at the end). A
 * schema passes when it compiles and all its tests come out right.
 * Files are read in name order, so runs compare. The vocabulary's shared
 * token index is built before the first timed compile.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "sift.h"
#include "grammar/gbnf.h"
#include "sift_internal.h"

#define MB_MAX_FILE ((size_t)16 << 20)
#define MB_MAX_TOKENS 65536

static void help(FILE *f)
{
    fprintf(f, "usage: sift bench maskbench DIR --vocab FILE [--json] [--limit N] [--verbose]\n"
               "                            [--slowest N] [--cpu]\n"
               "\n"
               "Runs the MaskBench protocol on every *.json file of DIR: compiles each\n"
               "schema to a grammar (timed), then walks every test instance token by\n"
               "token (compact JSON, BPE-encoded with the vocabulary), computing the\n"
               "allowed-token bitmask at each step (timed). A schema passes when it\n"
               "compiles, every valid instance is accepted and every invalid one is\n"
               "rejected somewhere. Prints the counts, the time percentiles, and the\n"
               "mask calls' cache misses and work units (the grammar's budget units\n"
               "summed): those two are the same on every run of the same build, so\n"
               "they compare two builds where the times are noisy. Last, what an\n"
               "empty interval reads on the clock in use: every sample holds about\n"
               "that much of the clock's own cost.\n"
               "\n"
               "options:\n"
               "  --vocab FILE  tiktoken rank file (cl100k_base, o200k_base)\n"
               "  --json        print one JSON object\n"
               "  --limit N     only the first N files (name order)\n"
               "  --verbose     name every schema that fails, and why, on stderr\n"
               "  --slowest N   list the N slowest mask steps on stderr (file, test,\n"
               "                step, whether the grammar's mask cache missed)\n"
               "  --cpu         time with the thread's CPU clock, not the wall clock\n"
               "  -h, --help    print this help\n"
               "\n"
               "exit status: 0 ok, 2 usage or I/O error\n");
}

/* --cpu: the thread's CPU clock instead of the monotonic wall clock, so
 * that the time the process waits for a core on a loaded machine is not
 * counted (each reading is a system call: short steps read longer). */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(clock_id, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* A growable array of times (µs). */
typedef struct {
    double *v;
    size_t n, cap;
} times;

static int times_push(times *t, double x)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 4096;
        double *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return 0;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n++] = x;
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of sorted v[0..n), nearest rank. */
static double quantile(const double *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

typedef struct {
    size_t schemas, passing, compile_errors, validation_errors, invalidation_errors, timeouts,
        tokens, tests;
    /* the mask calls' cache misses and work units (deterministic: what
     * an A/B on a noisy machine compares beside the times) */
    uint64_t misses, work;
    times mask, compile;
    double clock_us; /* the clock's own cost: what an empty interval reads */
} mb_stats;

/* One timed step, for --slowest. */
typedef struct {
    double us;
    size_t file, test, step;
    int miss;
} mb_step;

typedef struct {
    const sift_vocab *vocab;
    int32_t V;
    uint32_t *mask;
    size_t n_words;
    int32_t *ids;
    sift_encode_scratch *scratch;
    int verbose; /* name each failure on errout */
    /* --slowest N: the N slowest steps so far (a min-heap on us) */
    mb_step *slow;
    size_t n_slow, max_slow;
    size_t file, test; /* the current file and test, for slow */
} mb_ctx;

static void heap_down(mb_step *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && h[l].us < h[m].us)
            m = l;
        if (l + 1 < n && h[l + 1].us < h[m].us)
            m = l + 1;
        if (m == i)
            return;
        mb_step t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Keeps step st if it is among the max_slow slowest. */
static void slow_note(mb_ctx *cx, mb_step st)
{
    if (!cx->max_slow)
        return;
    if (cx->n_slow < cx->max_slow) {
        size_t i = cx->n_slow++;
        cx->slow[i] = st;
        while (i && cx->slow[(i - 1) / 2].us > cx->slow[i].us) {
            mb_step t = cx->slow[i];
            cx->slow[i] = cx->slow[(i - 1) / 2];
            cx->slow[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
    } else if (st.us > cx->slow[0].us) {
        cx->slow[0] = st;
        heap_down(cx->slow, cx->n_slow, 0);
    }
}

static int cmp_step_desc(const void *a, const void *b)
{
    double x = ((const mb_step *)a)->us, y = ((const mb_step *)b)->us;
    return (x < y) - (x > y);
}

/* One outcome of walking an instance. */
enum { WALK_ACCEPTED, WALK_REJECTED, WALK_TIMEOUT, WALK_ERROR };

static int bit(const uint32_t *mask, int32_t t)
{
    return (int)((mask[(uint32_t)t >> 5] >> ((uint32_t)t & 31u)) & 1u);
}

/* Walks `text` token by token through g (left in some state; the caller
 * resets it). */
static int walk(mb_ctx *cx, sift_grammar *g, const char *text, size_t len, mb_stats *st)
{
    sift_error err;
    size_t n = 0;
    if (sift_vocab_encode(cx->vocab, text, len, 0, cx->ids, MB_MAX_TOKENS, &n, cx->scratch, &err) !=
        SIFT_OK)
        return WALK_ERROR;
    st->tokens += n;
    for (size_t i = 0; i <= n; i++) {
        uint64_t h0, m0, h1, m1;
        sift__grammar_mask_stats(g, &h0, &m0);
        double t0 = now_us();
        sift_status s = sift_grammar_fill_bitmask(g, cx->mask, cx->n_words, &err);
        double t1 = now_us();
        sift__grammar_mask_stats(g, &h1, &m1);
        st->misses += m1 - m0;
        st->work += (uint64_t)sift__grammar_last_work(g);
        slow_note(cx, (mb_step){t1 - t0, cx->file, cx->test, i, m1 != m0});
        if (s == SIFT_E_GRAMMAR_LIMIT)
            return WALK_TIMEOUT;
        if (s == SIFT_E_GRAMMAR_DEAD)
            return WALK_REJECTED;
        if (s != SIFT_OK)
            return WALK_ERROR;
        if (!times_push(&st->mask, t1 - t0))
            return WALK_ERROR;
        if (i == n)
            break;
        if (!bit(cx->mask, cx->ids[i]))
            return WALK_REJECTED;
        s = sift_grammar_accept_token(g, cx->ids[i], &err);
        if (s == SIFT_E_GRAMMAR_LIMIT)
            return WALK_TIMEOUT;
        if (s != SIFT_OK)
            return WALK_ERROR; /* the mask allowed it: accepting must not fail */
    }
    return sift_grammar_is_complete(g) ? WALK_ACCEPTED : WALK_REJECTED;
}

/* Runs one file; adds to st. */
static void run_file(mb_ctx *cx, const char *path, mb_stats *st, FILE *errout)
{
    sift__alloc al;
    sift_error err;
    char *data = NULL;
    size_t len = 0;
    if (sift__alloc_init(&al, NULL, &err) != SIFT_OK ||
        sift__file_read(&al, path, MB_MAX_FILE, &data, &len, &err) != SIFT_OK) {
        cli_error(errout, "sift bench maskbench", path, &err);
        return;
    }
    json_error_t jerr;
    json_t *doc = json_loadb(data, len, JSON_ALLOW_NUL, &jerr);
    sift__free(&al, data);
    st->schemas++;
    if (!doc || !json_is_object(doc) || !json_object_get(doc, "schema")) {
        /* counted as a schema that does not compile (jansson refuses
         * integers beyond 64 bits, for one) */
        st->compile_errors++;
        if (cx->verbose)
            fprintf(errout, "%s:%d:%d: compile error: not read as a MaskBench file%s%s\n", path,
                    doc ? 1 : jerr.line, doc ? 1 : jerr.column, doc ? "" : ": ",
                    doc ? "" : jerr.text);
        json_decref(doc);
        return;
    }
    char *schema = json_dumps(json_object_get(doc, "schema"), JSON_COMPACT | JSON_ENCODE_ANY);
    sift_grammar *g = NULL;
    double t0 = now_us();
    sift_status s = schema ? sift_grammar_from_json_schema(&g, schema, strlen(schema), cx->vocab,
                                                           NULL, NULL, &err)
                           : SIFT_E_NOMEM;
    double t1 = now_us();
    free(schema);
    if (s != SIFT_OK) {
        st->compile_errors++;
        if (cx->verbose)
            fprintf(errout, "%s: compile error: %s\n", path, err.message);
        json_decref(doc);
        return;
    }
    times_push(&st->compile, t1 - t0);
    int ok = 1;
    json_t *tests = json_object_get(doc, "tests");
    size_t i;
    json_t *t;
    json_array_foreach(tests, i, t)
    {
        json_t *valid = json_object_get(t, "valid");
        char *text = json_dumps(json_object_get(t, "data"), JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text || !json_is_boolean(valid)) {
            free(text);
            continue;
        }
        st->tests++;
        sift_grammar_reset(g);
        cx->test = i;
        int r = walk(cx, g, text, strlen(text), st);
        free(text);
        const char *why = NULL;
        if (r == WALK_TIMEOUT)
            why = "timeout";
        else if (r == WALK_ERROR || (json_is_true(valid) && r != WALK_ACCEPTED))
            why = "validation error (a valid instance rejected)";
        else if (json_is_false(valid) && r == WALK_ACCEPTED)
            why = "invalidation error (an invalid instance accepted)";
        if (why && cx->verbose)
            fprintf(errout, "%s: test %zu: %s\n", path, i, why);
        if (r == WALK_TIMEOUT) {
            st->timeouts++;
            ok = 0;
        } else if (r == WALK_ERROR) {
            st->validation_errors++;
            ok = 0;
        } else if (json_is_true(valid) && r != WALK_ACCEPTED) {
            st->validation_errors++;
            ok = 0;
        } else if (json_is_false(valid) && r == WALK_ACCEPTED) {
            st->invalidation_errors++;
            ok = 0;
        }
    }
    st->passing += (size_t)ok;
    sift_grammar_free(g);
    json_decref(doc);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.json names of dir, sorted; NULL on failure. */
static char **list_dir(const char *dir, size_t *n, FILE *errout)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(errout, "sift bench maskbench: %s: %s\n", dir, strerror(errno));
        return NULL;
    }
    char **v = NULL;
    size_t cap = 0;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            char **w = realloc(v, cap * sizeof *w);
            if (!w)
                break;
            v = w;
        }
        size_t dl = strlen(dir);
        char *p = malloc(dl + l + 2);
        if (!p)
            break;
        memcpy(p, dir, dl);
        p[dl] = '/';
        memcpy(p + dl + 1, e->d_name, l + 1);
        v[(*n)++] = p;
    }
    closedir(d);
    if (*n)
        qsort(v, *n, sizeof *v, cmp_str);
    else if (!v && !(v = malloc(sizeof *v))) /* no file: an empty list, not a failure */
        fprintf(errout, "sift bench maskbench: out of memory\n");
    return v;
}

static void print_times(FILE *out, const char *name, times *t, int json)
{
    qsort(t->v, t->n, sizeof *t->v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < t->n; i++)
        sum += t->v[i];
    double mean = t->n ? sum / (double)t->n : 0;
    static const double q[] = {0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999};
    static const char *qn[] = {"p25", "p50", "p75", "p90", "p95", "p99", "p99_9"};
    if (json) {
        fprintf(out, ", \"%s_us\": {\"n\": %zu, \"mean\": %.2f", name, t->n, mean);
        for (size_t i = 0; i < 7; i++)
            fprintf(out, ", \"%s\": %.2f", qn[i], quantile(t->v, t->n, q[i]));
        fprintf(out, ", \"max\": %.2f}", t->n ? t->v[t->n - 1] : 0);
        return;
    }
    fprintf(out, "%-8s time (µs, %zu samples): mean %.1f", name, t->n, mean);
    for (size_t i = 0; i < 7; i++)
        fprintf(out, "  %s %.1f", qn[i], quantile(t->v, t->n, q[i]));
    fprintf(out, "  max %.1f\n", t->n ? t->v[t->n - 1] : 0);
}

/* What the command line asked for. */
typedef struct mb_opts {
    const char *dir, *vocab_path;
    int json, verbose;
    long limit;     /* files to run, -1 for all */
    size_t slowest; /* slowest mask steps to list */
} mb_opts;

/* Reads the options into *o (--cpu switches the clock): -1 to go on,
 * else the exit status (help printed, or a usage error reported). */
static int parse_args(int argc, char **argv, mb_opts *o, FILE *out, FILE *errout)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            help(out);
            return cmd_finish(out, errout, CMD_OK);
        } else if (!strcmp(argv[i], "--json")) {
            o->json = 1;
        } else if (!strcmp(argv[i], "--cpu")) {
            clock_id = CLOCK_THREAD_CPUTIME_ID;
        } else if (!strcmp(argv[i], "--verbose")) {
            o->verbose = 1;
        } else if (!strcmp(argv[i], "--vocab") && i + 1 < argc) {
            o->vocab_path = argv[++i];
        } else if (!strcmp(argv[i], "--slowest") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 0 || v > 100000) {
                fprintf(errout, "sift bench maskbench: --slowest wants a count up to 100000\n");
                return CMD_USAGE;
            }
            o->slowest = (size_t)v;
        } else if (!strcmp(argv[i], "--limit") && i + 1 < argc) {
            char *end;
            o->limit = strtol(argv[++i], &end, 10);
            if (*end || o->limit < 0) {
                fprintf(errout, "sift bench maskbench: --limit wants a count\n");
                return CMD_USAGE;
            }
        } else if (argv[i][0] != '-' && !o->dir) {
            o->dir = argv[i];
        } else {
            help(errout);
            return CMD_USAGE;
        }
    }
    if (!o->dir || !o->vocab_path) {
        help(errout);
        return CMD_USAGE;
    }
    return -1;
}

/* What an empty interval reads on the clock in use (the median of 1,001
 * pairs of readings): every timed sample holds about this much of the
 * clock's own cost, which --cpu's system call makes large on some hosts. */
static double clock_cost(void)
{
    enum { N = 1001 };
    double v[N];
    for (int i = 0; i < N; i++) {
        double t0 = now_us();
        v[i] = now_us() - t0;
    }
    qsort(v, N, sizeof *v, cmp_double);
    return v[N / 2];
}

/* Lists the slowest mask steps kept (--slowest), slowest first. */
static void print_slowest(mb_ctx *cx, char **files, FILE *errout)
{
    if (!cx->n_slow)
        return;
    qsort(cx->slow, cx->n_slow, sizeof *cx->slow, cmp_step_desc);
    fprintf(errout, "the %zu slowest mask steps (µs, file, test, step, cache):\n", cx->n_slow);
    for (size_t i = 0; i < cx->n_slow; i++) {
        const char *f = files[cx->slow[i].file], *b = strrchr(f, '/');
        fprintf(errout, "%10.1f  %s  test %zu  step %zu  %s\n", cx->slow[i].us, b ? b + 1 : f,
                cx->slow[i].test, cx->slow[i].step, cx->slow[i].miss ? "miss" : "hit");
    }
}

/* Prints the counts and the time distributions, as text or JSON. */
static void print_report(mb_stats *st, int json, FILE *out)
{
    if (json) {
        fprintf(out,
                "{\"schemas\": %zu, \"passing\": %zu, \"compile_errors\": %zu, "
                "\"validation_errors\": %zu, \"invalidation_errors\": %zu, \"timeouts\": %zu, "
                "\"tests\": %zu, \"tokens\": %zu",
                st->schemas, st->passing, st->compile_errors, st->validation_errors,
                st->invalidation_errors, st->timeouts, st->tests, st->tokens);
        print_times(out, "mask", &st->mask, 1);
        print_times(out, "compile", &st->compile, 1);
        fprintf(out, ", \"mask_misses\": %llu, \"mask_work\": %llu, \"clock_empty_us\": %.3f}\n",
                (unsigned long long)st->misses, (unsigned long long)st->work, st->clock_us);
        return;
    }
    fprintf(out, "schemas             %zu\n", st->schemas);
    fprintf(out, "passing             %zu (%.1f%%)\n", st->passing,
            st->schemas ? 100.0 * (double)st->passing / (double)st->schemas : 0.0);
    fprintf(out, "compile errors      %zu\n", st->compile_errors);
    fprintf(out, "validation errors   %zu (valid instances rejected)\n", st->validation_errors);
    fprintf(out, "invalidation errors %zu (invalid instances accepted)\n", st->invalidation_errors);
    fprintf(out, "timeouts            %zu\n", st->timeouts);
    fprintf(out, "tests               %zu\n", st->tests);
    fprintf(out, "tokens              %zu\n", st->tokens);
    print_times(out, "mask", &st->mask, 0);
    print_times(out, "compile", &st->compile, 0);
    fprintf(out, "mask     cache misses %llu, work units %llu\n", (unsigned long long)st->misses,
            (unsigned long long)st->work);
    fprintf(out, "clock    an empty interval reads %.2f µs (median of 1001; in every sample)\n",
            st->clock_us);
}

int cmd_maskbench(int argc, char **argv, FILE *out, FILE *errout)
{
    mb_opts o = {
        .dir = NULL, .vocab_path = NULL, .json = 0, .verbose = 0, .limit = -1, .slowest = 0};
    int rc = parse_args(argc, argv, &o, out, errout);
    if (rc >= 0)
        return rc;
    sift_vocab *vocab = NULL;
    sift_error err;
    if (sift_vocab_load_tiktoken(&vocab, o.vocab_path, NULL, &err) != SIFT_OK) {
        cli_error(errout, "sift bench maskbench", o.vocab_path, &err);
        return CMD_USAGE;
    }
    size_t n_files = 0;
    char **files = list_dir(o.dir, &n_files, errout);
    mb_ctx cx = {.vocab = vocab, .V = sift_vocab_size(vocab), .verbose = o.verbose};
    cx.n_words = ((size_t)cx.V + 31) / 32;
    cx.max_slow = o.slowest;
    cx.slow = o.slowest ? malloc(o.slowest * sizeof *cx.slow) : NULL;
    cx.mask = malloc(cx.n_words * sizeof *cx.mask);
    cx.ids = malloc(MB_MAX_TOKENS * sizeof *cx.ids);
    if (sift_encode_scratch_new(&cx.scratch, NULL, &err) != SIFT_OK)
        cx.scratch = NULL;
    mb_stats st;
    memset(&st, 0, sizeof st);
    rc = CMD_OK;
    if (!files || !cx.mask || !cx.ids || !cx.scratch || (o.slowest && !cx.slow)) {
        rc = CMD_USAGE;
    } else {
        /* The vocabulary's shared token index is built by the first
         * grammar over it; build it here, so that compile times are those
         * of a loaded vocabulary. */
        sift_grammar *warm = NULL;
        if (sift_grammar_new(&warm, "root ::= \"a\"", 12, vocab, NULL, &err) == SIFT_OK)
            sift_grammar_free(warm);
        size_t n = o.limit >= 0 && (size_t)o.limit < n_files ? (size_t)o.limit : n_files;
        for (size_t i = 0; i < n; i++) {
            cx.file = i;
            run_file(&cx, files[i], &st, errout);
        }
        print_slowest(&cx, files, errout);
        st.clock_us = clock_cost();
        print_report(&st, o.json, out);
    }
    for (size_t i = 0; i < n_files; i++)
        free(files[i]);
    free(files);
    free(cx.mask);
    free(cx.ids);
    free(cx.slow);
    sift_encode_scratch_free(cx.scratch);
    free(st.mask.v);
    free(st.compile.v);
    sift_vocab_free(vocab);
    return cmd_finish(out, errout, rc);
}

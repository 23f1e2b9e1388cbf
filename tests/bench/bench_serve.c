/*
 * bench_serve.c - the grammar calls of the serving loop on a real
 * vocabulary (make bench-serve; not a test).
 *
 *   bench_serve [--vocab FILE.tiktoken | --hf TOKENIZER.json] [--reps N]
 *               [--only CASE]
 *
 * The vocabulary is a tiktoken file (default tests/data/cl100k_base) with
 * <|endoftext|> added as its end-of-generation token, or a Hugging Face
 * tokenizer.json (Qwen3's: 151,669 tokens; tests/bench/fetch_hf.sh fetches
 * it) with the tokenizer_config.json beside it, when there is one, for its
 * end-of-generation token. The grammar is a
 * tool call, {"name": "...", "arguments": {...}} with a JSON-like object
 * of arguments, and the text one such call, split greedily into the
 * longest vocabulary pieces. The grammar has accepted the call up to its
 * arguments' "{"; drafts are the next 5 or 16 tokens of the text.
 *
 * Cases (median and p90 of N repetitions, microseconds; each operation
 * runs inside a function named op_CASE so that bench_serve_cg.sh can
 * count its instructions with callgrind):
 *   rollback1      accept 1 token (untimed), roll it back (timed)
 *   rollback16     accept 16 tokens (untimed), roll them back (timed)
 *   validate16     sift_grammar_validate_tokens of the 16-token draft
 *   clone_accept16 the same answer by a clone accepting token by token
 *   accept_rb16    the same answer by accepting and rolling back
 *   draft5, draft16       sift_grammar_fill_bitmask_draft, n + 1 rows
 *   clone_fills5, clone_fills16  n + 1 clones, clone k accepts k tokens
 *                  and fills (an engine without the call and without
 *                  rollback)
 *   seq_fills5, seq_fills16  fill, accept, ..., fill, then rollback(n) on
 *                  the grammar itself (vLLM's loop, with rollback)
 *   forced, forced_ids  sift_grammar_forced_bytes after the name (the
 *                  bytes ", "arguments": {" are forced), without and with
 *                  the tokens
 * Times are wall clock on a shared machine: noisy; compare the
 * instruction counts of bench_serve_cg.sh.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"

#ifndef SIFT_SRCDIR
#define SIFT_SRCDIR "."
#endif

#define NOINLINE __attribute__((noinline))

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, const sift_error *err)
{
    fprintf(stderr, "bench_serve: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

/* A call that cannot fail in this bench; a failure ends it. */
#define CK(call, what)         \
    do {                       \
        if ((call) != SIFT_OK) \
            die(what, NULL);   \
    } while (0)

/* ------------------------------------------------------------ vocab */

static sift_vocab *vocab;
static int32_t V, eog_id;
static size_t NW;

static sift_vocab *load_hf(const char *path)
{
    /* tokenizer_config.json in the same folder, if it is there */
    char cfg[4096];
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path + 1) : 0;
    snprintf(cfg, sizeof cfg, "%.*stokenizer_config.json", dl, path);
    FILE *f = fopen(cfg, "rb");
    if (f)
        fclose(f);
    sift_error err;
    sift_vocab *v = NULL;
    if (sift_vocab_load_hf(&v, path, f ? cfg : NULL, NULL, &err))
        die(path, &err);
    eog_id = -1; /* the text has no special token; split skips none */
    return v;
}

static sift_vocab *load_vocab(const char *path)
{
    sift_error err;
    sift_vocab *base = NULL, *v = NULL;
    if (sift_vocab_load_tiktoken(&base, path, NULL, &err))
        die(path, &err);
    eog_id = sift_vocab_size(base);
    static const char *const sp[] = {"<|endoftext|>"};
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = sp;
    x.special_ids = &eog_id;
    x.n_special = 1;
    x.eog_ids = &eog_id;
    x.n_eog = 1;
    if (sift_vocab_extend(&v, base, &x, NULL, &err))
        die("extend", &err);
    sift_vocab_free(base);
    return v;
}

/* The longest piece that starts s[0..n) (a linear scan per position is
 * fine for one short text). */
static size_t split(const char *s, int32_t *out, size_t cap)
{
    size_t n = strlen(s), pos = 0, k = 0;
    while (pos < n && k < cap) {
        int32_t best = -1;
        size_t bl = 0;
        for (int32_t t = 0; t < V; t++) {
            const char *p;
            size_t l;
            if (t == eog_id || sift_vocab_piece(vocab, t, &p, &l, NULL) || l <= bl || l > n - pos ||
                memcmp(p, s + pos, l))
                continue;
            best = t;
            bl = l;
        }
        if (best < 0)
            return 0;
        out[k++] = best;
        pos += bl;
    }
    return k;
}

/* ------------------------------------------------------------ cases */

static const char GRAMMAR[] =
    "root ::= \"{\\\"name\\\": \\\"\" name \"\\\", \\\"arguments\\\": \" obj \"}\"\n"
    "name ::= \"get_weather\" | \"get_time\" | \"search\"\n"
    "obj  ::= \"{\" ( pair ( \", \" pair )* )? \"}\"\n"
    "pair ::= str \": \" val\n"
    "val  ::= str | num | obj | \"true\" | \"false\" | \"null\" | \"[\" ( val ( \", \" val )* )? "
    "\"]\"\n"
    "str  ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\n"
    "num  ::= \"-\"? [0-9]+ ( \".\" [0-9]+ )?\n";
static const char TEXT[] = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"San "
                           "Francisco\", \"unit\": \"celsius\", \"days\": 3, \"hourly\": true, "
                           "\"tags\": [\"rain\", \"wind\"], \"lang\": \"en\"}}";
static const char PREFIX[] = "{\"name\": \"get_weather\", \"arguments\": ";

static int32_t toks[256];
static size_t n_toks, n_prefix;
static uint32_t *rows;

static NOINLINE void op_rollback(sift_grammar *g, size_t k)
{
    CK(sift_grammar_rollback(g, k, NULL), "rollback");
}

static NOINLINE size_t op_validate(sift_grammar *g, const int32_t *d, size_t n)
{
    size_t ok;
    CK(sift_grammar_validate_tokens(g, d, n, &ok, NULL), "validate");
    return ok;
}

static NOINLINE size_t op_clone_accept(sift_grammar *g, const int32_t *d, size_t n)
{
    sift_grammar *c;
    CK(sift_grammar_clone(g, &c, NULL), "clone");
    size_t k = 0;
    while (k < n && sift_grammar_accept_token(c, d[k], NULL) == SIFT_OK)
        k++;
    sift_grammar_free(c);
    return k;
}

static NOINLINE size_t op_accept_rb(sift_grammar *g, const int32_t *d, size_t n)
{
    size_t k = 0;
    while (k < n && sift_grammar_accept_token(g, d[k], NULL) == SIFT_OK)
        k++;
    CK(sift_grammar_rollback(g, k, NULL), "rollback");
    return k;
}

static NOINLINE void op_draft(sift_grammar *g, const int32_t *d, size_t n)
{
    CK(sift_grammar_fill_bitmask_draft(g, d, n, rows, NW, NULL, NULL), "draft");
}

static NOINLINE void op_clone_fills(sift_grammar *g, const int32_t *d, size_t n)
{
    for (size_t k = 0; k <= n; k++) {
        sift_grammar *c;
        CK(sift_grammar_clone(g, &c, NULL), "clone");
        for (size_t i = 0; i < k; i++)
            CK(sift_grammar_accept_token(c, d[i], NULL), "accept");
        CK(sift_grammar_fill_bitmask(c, rows + k * NW, NW, NULL), "fill");
        sift_grammar_free(c);
    }
}

static NOINLINE void op_seq_fills(sift_grammar *g, const int32_t *d, size_t n)
{
    for (size_t k = 0; k <= n; k++) {
        CK(sift_grammar_fill_bitmask(g, rows + k * NW, NW, NULL), "fill");
        if (k < n)
            CK(sift_grammar_accept_token(g, d[k], NULL), "accept");
    }
    CK(sift_grammar_rollback(g, n, NULL), "rollback");
}

static NOINLINE size_t op_forced(sift_grammar *g, int with_ids)
{
    char buf[256];
    int32_t ids[64];
    size_t nb, nt;
    CK(sift_grammar_forced_bytes(g, buf, sizeof buf, &nb, with_ids ? ids : NULL, with_ids ? 64 : 0,
                                 &nt, NULL),
       "forced");
    return nb;
}

static void report(const char *name, double *v, size_t n, const char *note)
{
    qsort(v, n, sizeof *v, cmp_d);
    printf("  %-15s reps %6zu  p50 %9.3f  p90 %9.3f us  %s\n", name, n, v[n / 2],
           v[(size_t)((double)n * 0.9)], note);
    fflush(stdout);
}

static int want(const char *only, const char *name)
{
    return !only || !strcmp(only, name);
}

int main(int argc, char **argv)
{
    char vpath[4096];
    snprintf(vpath, sizeof vpath, "%s/tests/data/cl100k_base.tiktoken", SIFT_SRCDIR);
    const char *vp = vpath, *hf = NULL, *only = NULL;
    size_t reps = 2000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc)
            vp = argv[++i];
        else if (!strcmp(argv[i], "--hf") && i + 1 < argc)
            hf = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_serve [--vocab FILE | --hf TOKENIZER.json] [--reps N] "
                            "[--only CASE]\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    vocab = hf ? load_hf(hf) : load_vocab(vp);
    V = sift_vocab_size(vocab);
    NW = ((size_t)V + 31) / 32;
    n_toks = split(TEXT, toks, 256);
    /* the prefix: the tokens that end within PREFIX */
    size_t at = 0;
    while (n_prefix < n_toks) {
        const char *p;
        size_t l;
        CK(sift_vocab_piece(vocab, toks[n_prefix], &p, &l, NULL), "piece");
        if (at + l > strlen(PREFIX))
            break;
        at += l;
        n_prefix++;
    }
    if (!n_toks || n_toks < n_prefix + 16) {
        fprintf(stderr, "bench_serve: the text does not split as expected\n");
        return 1;
    }
    rows = malloc(17 * NW * sizeof *rows);
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_rollback_tokens = 32;
    sift_grammar *g;
    sift_error err;
    if (sift_grammar_new(&g, GRAMMAR, strlen(GRAMMAR), vocab, &gp, &err))
        die("grammar", &err);
    for (size_t i = 0; i < n_prefix; i++)
        CK(sift_grammar_accept_token(g, toks[i], NULL), "prefix");
    const int32_t *d = toks + n_prefix;
    printf("bench_serve: %s, V = %d, text %zu tokens, drafts from token %zu\n", hf ? hf : vp,
           (int)V, n_toks, n_prefix);
    double *t = malloc(reps * sizeof *t);
    /* warm the caches with every state the cases visit (not through
     * op_seq_fills, whose instructions bench_serve_cg.sh counts) */
    for (size_t k = 0; k <= 16; k++) {
        CK(sift_grammar_fill_bitmask(g, rows, NW, NULL), "fill");
        if (k < 16)
            CK(sift_grammar_accept_token(g, d[k], NULL), "accept");
    }
    CK(sift_grammar_rollback(g, 16, NULL), "rollback");

    if (want(only, "rollback1")) {
        for (size_t r = 0; r < reps; r++) {
            CK(sift_grammar_accept_token(g, d[0], NULL), "accept");
            double t0 = now_us();
            op_rollback(g, 1);
            t[r] = now_us() - t0;
        }
        report("rollback1", t, reps, "per call (1 token)");
    }
    if (want(only, "rollback16")) {
        for (size_t r = 0; r < reps; r++) {
            for (size_t i = 0; i < 16; i++)
                CK(sift_grammar_accept_token(g, d[i], NULL), "accept");
            double t0 = now_us();
            op_rollback(g, 16);
            t[r] = now_us() - t0;
        }
        report("rollback16", t, reps, "per call (16 tokens)");
    }
    struct {
        const char *name;
        size_t (*fn)(sift_grammar *, const int32_t *, size_t);
    } val[] = {{"validate16", op_validate},
               {"clone_accept16", op_clone_accept},
               {"accept_rb16", op_accept_rb}};
    for (size_t c = 0; c < sizeof val / sizeof *val; c++) {
        if (!want(only, val[c].name))
            continue;
        size_t ok = 0;
        for (size_t r = 0; r < reps; r++) {
            double t0 = now_us();
            ok = val[c].fn(g, d, 16);
            t[r] = now_us() - t0;
        }
        char note[64];
        snprintf(note, sizeof note, "%zu of 16 accepted", ok);
        report(val[c].name, t, reps, note);
    }
    struct {
        const char *name;
        void (*fn)(sift_grammar *, const int32_t *, size_t);
        size_t n;
    } dm[] = {{"draft5", op_draft, 5},
              {"clone_fills5", op_clone_fills, 5},
              {"seq_fills5", op_seq_fills, 5},
              {"draft16", op_draft, 16},
              {"clone_fills16", op_clone_fills, 16},
              {"seq_fills16", op_seq_fills, 16}};
    for (size_t c = 0; c < sizeof dm / sizeof *dm; c++) {
        if (!want(only, dm[c].name))
            continue;
        size_t rr = dm[c].fn == op_clone_fills ? (reps + 9) / 10 : reps;
        for (size_t r = 0; r < rr; r++) {
            double t0 = now_us();
            dm[c].fn(g, d, dm[c].n);
            t[r] = now_us() - t0;
        }
        report(dm[c].name, t, rr, dm[c].fn == op_clone_fills ? "(a tenth of the reps)" : "");
    }
    if (want(only, "forced") || want(only, "forced_ids")) {
        /* after the name: rewind to the state after "get_weather" */
        sift_grammar *f;
        CK(sift_grammar_new(&f, GRAMMAR, strlen(GRAMMAR), vocab, &gp, &err), "grammar");
        CK(sift_grammar_accept_bytes(f, "{\"name\": \"get_weather", 21, NULL), "name");
        {
            /* the first call computes the transitions it follows; the
             * cases time the steady state */
            char wb[256];
            size_t wn;
            CK(sift_grammar_forced_bytes(f, wb, sizeof wb, &wn, NULL, 0, NULL, NULL), "forced");
        }
        for (int w = 0; w < 2; w++) {
            const char *name = w ? "forced_ids" : "forced";
            if (!want(only, name))
                continue;
            size_t nb = 0;
            for (size_t r = 0; r < reps; r++) {
                double t0 = now_us();
                nb = op_forced(f, w);
                t[r] = now_us() - t0;
            }
            char note[64];
            snprintf(note, sizeof note, "%zu bytes forced", nb);
            report(name, t, reps, note);
        }
        sift_grammar_free(f);
    }
    sift_grammar_free(g);
    sift_vocab_free(vocab);
    free(rows);
    free(t);
    return 0;
}

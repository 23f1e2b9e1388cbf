/*
 * bench_grammar.c - timings of the grammar matcher (make bench-grammar).
 *
 * For the JSON grammar (grammar/json.gbnf) at four states - start, after
 * `{"a": `, inside a string, after a number - it measures:
 *   check  one-token check (sift_grammar_accepts_token), median over
 *          random tokens;
 *   slice  a constrain pass over 84 candidates (sift_grammar_ban_candidates);
 *   vocab  the whole-vocabulary ban (sift_grammar_ban): median of warm
 *          passes, and the first (cold) pass of a fresh grammar, which
 *          also builds the matcher's transition cache for that state.
 * Then forced steps: a chain [grammar, top_k 40, temp 0.8, dist] at states
 * where the grammar allows a few tokens (inside `true`, `null`, `false`),
 * sampled from a slice with the grammar's extras and from the whole row.
 *
 * The vocabulary comes from bench_vocab(): a .tiktoken file when
 * SIFT_BENCH_TIKTOKEN names one (cl100k_base, o200k_base), else a
 * synthetic vocabulary of the requested size with byte tokens, words with
 * and without a leading space, numbers, punctuation runs, JSON fragments
 * and multi-byte UTF-8 (some split mid-sequence). Sizes: 100k and 200k, or
 * SIFT_BENCH_V.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"
#include "testutil.h"

#ifndef SIFT_SRCDIR
#define SIFT_SRCDIR "."
#endif

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* ---------------------------------------------------------------- vocab */

static int b64v(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* A .tiktoken file: "base64 rank" per line. */
static sift_vocab *load_tiktoken(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 18, n = 0;
    char **pieces = calloc(cap, sizeof *pieces);
    size_t *lens = calloc(cap, sizeof *lens);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *sp = strchr(line, ' ');
        if (!sp)
            continue;
        long rank = strtol(sp + 1, NULL, 10);
        if (rank < 0 || (size_t)rank >= cap)
            continue;
        char *out = malloc((size_t)(sp - line));
        size_t k = 0;
        unsigned acc = 0;
        int bits = 0;
        for (char *p = line; p < sp; p++) {
            int v = b64v((unsigned char)*p);
            if (v < 0)
                continue;
            acc = (acc << 6) | (unsigned)v;
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                out[k++] = (char)((acc >> bits) & 0xff);
            }
        }
        pieces[rank] = out;
        lens[rank] = k;
        if ((size_t)rank + 1 > n)
            n = (size_t)rank + 1;
    }
    fclose(f);
    /* one EOG token after the ranks */
    pieces[n] = strdup("<|endoftext|>");
    lens[n] = 13;
    n++;
    sift_vocab *v = NULL;
    if (sift_vocab_new(&v, (int32_t)n, (const char *const *)pieces, lens, NULL, NULL))
        v = NULL;
    if (v && sift_vocab_set_attr(v, (int32_t)n - 1, SIFT_TOKEN_EOG, NULL))
        v = NULL;
    for (size_t i = 0; i < n; i++)
        free(pieces[i]);
    free(pieces);
    free(lens);
    return v;
}

static const char *const SYL[] = {"th",  "e",   "an",  "in", "er", "on", "re", "at", "st", "en",
                                  "es",  "or",  "te",  "ti", "is", "al", "ar", "ed", "nd", "ou",
                                  "ing", "ion", "ent", "o",  "a",  "i",  "u",  "y",  "s",  "t"};
static const char *const PUN[] = {
    "\"", "\":", "\": ", "\",", "{\"",  "},",  "}",    "]",   "[",  ",",  ".",  ":",  "(",   ")",
    ";",  "\n",  "\n\n", "  ",  "    ", "\\n", "\\\"", "://", "->", "==", "!=", "'s", "...", "--"};
static const char *const UTF[] = {"\xc3\xa9",     "\xc3\xa8",     "\xe2\x82\xac",
                                  "\xe4\xb8\xad", "\xe6\x96\x87", "\xf0\x9f\x98\x80",
                                  "\xd0\xbf",     "\xd1\x80"};

/* A synthetic vocabulary of V tokens (deterministic). */
static sift_vocab *synth_vocab(int32_t V)
{
    tu_rng r = {0x5eed};
    char **pieces = calloc((size_t)V, sizeof *pieces);
    size_t *lens = calloc((size_t)V, sizeof *lens);
    for (int32_t i = 0; i < V; i++) {
        char buf[64];
        size_t k = 0;
        if (i < 256) {
            buf[k++] = (char)i;
        } else {
            int kind = (int)tu_range(&r, 0, 9);
            if (kind <= 4) { /* word, often with a leading space */
                if (kind <= 2)
                    buf[k++] = ' ';
                int ns = (int)tu_range(&r, 1, 4);
                for (int j = 0; j < ns; j++) {
                    const char *s = SYL[tu_range(&r, 0, 29)];
                    size_t l = strlen(s);
                    memcpy(buf + k, s, l);
                    k += l;
                }
                if (tu_range(&r, 0, 7) == 0)
                    buf[0 + (buf[0] == ' ')] ^= 0x20; /* capitalised */
            } else if (kind == 5) {                   /* number */
                int nd = (int)tu_range(&r, 1, 3);
                if (tu_range(&r, 0, 3) == 0)
                    buf[k++] = ' ';
                for (int j = 0; j < nd; j++)
                    buf[k++] = (char)('0' + tu_range(&r, 0, 9));
            } else if (kind == 6 || kind == 7) { /* punctuation runs */
                int np = (int)tu_range(&r, 1, 2);
                for (int j = 0; j < np; j++) {
                    const char *s = PUN[tu_range(&r, 0, 27)];
                    size_t l = strlen(s);
                    memcpy(buf + k, s, l);
                    k += l;
                }
            } else if (kind == 8) { /* UTF-8, sometimes cut */
                int nu = (int)tu_range(&r, 1, 3);
                for (int j = 0; j < nu; j++) {
                    const char *s = UTF[tu_range(&r, 0, 7)];
                    size_t l = strlen(s);
                    memcpy(buf + k, s, l);
                    k += l;
                }
                if (tu_range(&r, 0, 2) == 0)
                    k--;
            } else { /* word + punctuation */
                const char *s = SYL[tu_range(&r, 0, 29)];
                size_t l = strlen(s);
                memcpy(buf + k, s, l);
                k += l;
                s = PUN[tu_range(&r, 0, 27)];
                l = strlen(s);
                memcpy(buf + k, s, l);
                k += l;
            }
        }
        pieces[i] = malloc(k ? k : 1);
        memcpy(pieces[i], buf, k);
        lens[i] = k;
    }
    sift_vocab *v = NULL;
    if (sift_vocab_new(&v, V, (const char *const *)pieces, lens, NULL, NULL))
        v = NULL;
    if (v && sift_vocab_set_attr(v, V - 1, SIFT_TOKEN_EOG, NULL))
        v = NULL;
    for (int32_t i = 0; i < V; i++)
        free(pieces[i]);
    free(pieces);
    free(lens);
    return v;
}

/* The vocabulary the bench runs on; the one place to point at a loader. */
static sift_vocab *bench_vocab(int32_t V, const char **what)
{
    const char *tk = getenv("SIFT_BENCH_TIKTOKEN");
    if (tk && *tk) {
        *what = tk;
        return load_tiktoken(tk);
    }
    *what = "synthetic";
    return synth_vocab(V);
}

/* ---------------------------------------------------------------- bench */

static char *read_grammar(size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/grammar/json.gbnf", SIFT_SRCDIR);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 16);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static int copy_row(void *user, float *out, int32_t V)
{
    memcpy(out, user, (size_t)V * sizeof *out);
    return 0;
}

/* A chain [grammar, top_k 40, temp 0.8, dist] at states where the grammar
 * allows few tokens: the slice step (k = the plan's, plus the extras the
 * chain asks for) against sift_chain_sample on the whole row, medians in
 * one run, and the row hook's calls (0 when the forced tokens decide). */
static void forced_steps(sift_vocab *v, const char *gtext, size_t glen, float *row)
{
    static const char *const prefix[] = {"{\"a\": tr", "{\"a\": nul", "{\"a\": fa"};
    int32_t V = sift_vocab_size(v);
    printf("  forced steps, chain [grammar, top_k 40, temp 0.8, dist]:\n");
    printf("  %-18s %8s %8s %12s %12s %12s %8s %6s\n", "state", "allowed", "k+extra", "extras (us)",
           "slice (us)", "row (us)", "ratio", "hooks");
    tu_rng r = {99};
    for (int i = 0; i < V; i++)
        row[i] = (float)(tu_unif(&r) * 20.0 - 10.0);
    sift_slicer *sl = NULL;
    if (sift_slicer_new(&sl, V, NULL, NULL))
        exit(1);
    for (size_t s = 0; s < sizeof prefix / sizeof *prefix; s++) {
        sift_grammar *g = NULL;
        sift_chain *c = NULL;
        sift_chain_params p;
        sift_chain_params_init(&p);
        p.n_vocab = V;
        if (sift_grammar_new(&g, gtext, glen, v, NULL, NULL) ||
            sift_grammar_accept_bytes(g, prefix[s], strlen(prefix[s]), NULL) ||
            sift_chain_new(&c, &p, NULL) || sift_chain_add_grammar(c, g, NULL) ||
            sift_chain_add_top_k(c, 40, NULL) || sift_chain_add_temp(c, 0.8f, NULL) ||
            sift_chain_add_dist(c, NULL) || sift_chain_set_row_hook(c, copy_row, row, NULL)) {
            fprintf(stderr, "forced state %zu failed\n", s);
            exit(1);
        }
        sift_plan plan = {.struct_size = sizeof(sift_plan)};
        if (sift_chain_plan(c, &plan, NULL, NULL))
            exit(1);
        int32_t ids[256];
        size_t n_ids = 0;
        enum { REPS = 201 };
        double te[REPS], ts[REPS], tr[REPS];
        sift_slice slice;
        for (int k = 0; k < REPS; k++) {
            double a = now_ns();
            if (sift_chain_extras(c, ids, 256, &n_ids, NULL))
                exit(1);
            te[k] = now_ns() - a;
        }
        if (sift_slicer_build(sl, row, V, plan.k, ids, n_ids, &slice, NULL))
            exit(1);
        sift_stats st0 = {.struct_size = sizeof(sift_stats)},
                   st1 = {.struct_size = sizeof(sift_stats)};
        if (sift_chain_stats(c, &st0, NULL))
            exit(1);
        for (int k = 0; k < REPS; k++) {
            int32_t tok;
            double a = now_ns();
            if (sift_chain_sample_slice(c, &slice, &tok, NULL))
                exit(1);
            ts[k] = now_ns() - a;
            a = now_ns();
            if (sift_chain_sample(c, row, V, &tok, NULL))
                exit(1);
            tr[k] = now_ns() - a;
        }
        if (sift_chain_stats(c, &st1, NULL))
            exit(1);
        size_t allowed = 0;
        for (int32_t t = 0; t < V; t++) {
            int ok = 0;
            if (sift_grammar_accepts_token(g, t, &ok, NULL))
                exit(1);
            allowed += (size_t)ok;
        }
        printf("  %-18s %8zu %8d %12.2f %12.2f %12.1f %7.0fx %6llu\n", prefix[s], allowed,
               (int)(plan.k + (int32_t)n_ids), median(te, REPS) / 1e3, median(ts, REPS) / 1e3,
               median(tr, REPS) / 1e3, median(tr, REPS) / median(ts, REPS),
               (unsigned long long)(st1.hook_calls - st0.hook_calls));
        sift_chain_free(c);
    }
    sift_slicer_free(sl);
}

static void run(sift_vocab *v, const char *what)
{
    int32_t V = sift_vocab_size(v);
    size_t glen;
    char *gtext = read_grammar(&glen);
    if (!gtext) {
        fprintf(stderr, "cannot read grammar/json.gbnf\n");
        exit(1);
    }
    static const char *const prefix[] = {"", "{\"a\": ", "{\"a\": \"hel", "{\"a\": 12"};
    static const char *const name[] = {"start", "after {\"a\": ", "inside a string",
                                       "after a number"};
    float *row = malloc((size_t)V * sizeof *row);
    printf("vocabulary: %s, V = %d\n", what, (int)V);
    double t0 = now_ns();
    sift_grammar *g0 = NULL;
    if (sift_grammar_new(&g0, gtext, glen, v, NULL, NULL)) {
        fprintf(stderr, "grammar failed\n");
        exit(1);
    }
    printf("  grammar + trie build: %.1f ms\n", (now_ns() - t0) / 1e6);
    sift_grammar_free(g0);
    printf("  %-18s %12s %12s %12s %12s %9s\n", "state", "check (ns)", "slice84 (us)", "vocab (us)",
           "cold (us)", "allowed");
    for (int s = 0; s < 4; s++) {
        sift_grammar *g = NULL;
        if (sift_grammar_new(&g, gtext, glen, v, NULL, NULL) ||
            sift_grammar_accept_bytes(g, prefix[s], strlen(prefix[s]), NULL)) {
            fprintf(stderr, "state %d failed\n", s);
            exit(1);
        }
        /* cold: the first whole-vocabulary pass of this grammar object */
        for (int32_t t = 0; t < V; t++)
            row[t] = 0.0f;
        double a = now_ns();
        if (sift_grammar_ban(g, row, V, NULL))
            exit(1);
        double cold = now_ns() - a;
        int32_t allowed = 0;
        for (int32_t t = 0; t < V; t++)
            allowed += row[t] > -INFINITY;
        enum { REPS = 41 };
        double tv[REPS];
        for (int k = 0; k < REPS; k++) {
            for (int32_t t = 0; t < V; t++)
                row[t] = 0.0f;
            a = now_ns();
            if (sift_grammar_ban(g, row, V, NULL))
                exit(1);
            tv[k] = now_ns() - a;
        }
        /* one-token checks over random tokens, timed in batches of 100 */
        tu_rng r = {7};
        enum { CB = 201 };
        double tc[CB];
        for (int k = 0; k < CB; k++) {
            int32_t ids[100];
            for (int j = 0; j < 100; j++)
                ids[j] = (int32_t)tu_range(&r, 0, V - 1);
            int ok;
            a = now_ns();
            for (int j = 0; j < 100; j++)
                if (sift_grammar_accepts_token(g, ids[j], &ok, NULL))
                    exit(1);
            tc[k] = (now_ns() - a) / 100;
        }
        double ts[REPS];
        sift_candidate c[84];
        for (int k = 0; k < REPS; k++) {
            for (int j = 0; j < 84; j++) {
                c[j].id = (int32_t)tu_range(&r, 0, V - 1);
                c[j].logit = 1.0f;
            }
            c[0].id = '{'; /* keep one allowed somewhere in most states */
            c[1].id = 'a';
            c[2].id = '1';
            a = now_ns();
            sift_status st = sift_grammar_ban_candidates(g, c, 84, NULL);
            ts[k] = now_ns() - a;
            if (st && st != SIFT_E_GRAMMAR_DEAD)
                exit(1);
        }
        printf("  %-18s %12.0f %12.2f %12.1f %12.1f %9d\n", name[s], median(tc, CB),
               median(ts, REPS) / 1e3, median(tv, REPS) / 1e3, cold / 1e3, (int)allowed);
        sift_grammar_free(g);
    }
    forced_steps(v, gtext, glen, row);
    free(row);
    free(gtext);
}

int main(void)
{
    const char *env = getenv("SIFT_BENCH_V");
    const char *tk = getenv("SIFT_BENCH_TIKTOKEN");
    int32_t sizes[2] = {100000, 200000};
    int ns = 2;
    if (env) {
        sizes[0] = (int32_t)atol(env);
        ns = 1;
    }
    if (tk && *tk)
        ns = 1;
    for (int i = 0; i < ns; i++) {
        const char *what;
        sift_vocab *v = bench_vocab(sizes[i], &what);
        if (!v) {
            fprintf(stderr, "no vocabulary\n");
            return 1;
        }
        run(v, what);
        sift_vocab_free(v);
    }
    return 0;
}

/*
 * bench_mask.c - grammar compile time and per-step mask time on a real
 * vocabulary (make bench-mask).
 *
 *   bench_mask [--vocab FILE.tiktoken] [--reps N] [--ban] [--no-cache]
 *              [--quick] [--only GRAMMAR] [--cpu] [--reuse]
 *
 * The vocabulary is a tiktoken file (default tests/data/cl100k_base) with
 * one end-of-generation token <|endoftext|> added after its ranks.
 *
 * compile: sift_grammar_new of grammar/json.gbnf and of a tiny grammar:
 *   the first compile over the freshly loaded vocabulary on its own (it
 *   builds the vocabulary's shared index), then the mean and p99 of N
 *   more, and the bytes one grammar allocates (its own allocator counts).
 *
 * mask: texts walked token by token (each split greedily into the longest
 *   vocabulary pieces; no BPE encoder is used) through json.gbnf and
 *   three JSON-Schema-like grammars; each text starts from a freshly
 *   compiled grammar (as a request does), and every step times the
 *   allowed set: sift_grammar_fill_bitmask, or with --ban the
 *   whole-vocabulary sift_grammar_ban (the pass that existed before the
 *   bitmask call). Prints mean, p50, p90, p99, max in microseconds over
 *   all steps of a grammar and over all.
 *
 * --set LIST walks other grammars instead of the built-in ones: every
 *   line of LIST is "NAME GRAMMAR.gbnf TEXTS" (TEXTS holds one text a
 *   line), for grammars converted from JSON Schemas and their instances.
 *
 * --reuse keeps one grammar per workload and resets it between texts
 * (its caches stay: a server that reuses a grammar per schema) instead of
 * compiling one per text.
 *
 * --no-cache (a build linked with the internal library only) turns the
 * grammar's mask cache off. --cpu times with the thread's CPU clock. Times are wall clock on a
 * shared machine: noisy; bench_mask_cg.sh gives callgrind instruction counts.
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

#ifdef BENCH_INTERNAL
void sift__grammar_set_mask_cache(sift_grammar *g, size_t bytes);
void sift__grammar_mask_stats(const sift_grammar *g, uint64_t *hits, uint64_t *misses);
static uint64_t n_hits, n_misses;
#endif

/* --cpu: the thread's CPU time instead of the wall clock, so that time
 * other jobs take the core away does not count (each reading is a system
 * call, about 0.1-0.3 us, included in every step). */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void stats(const char *name, double *v, size_t n)
{
    if (n == 0)
        return;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    qsort(v, n, sizeof *v, cmp_d);
    printf("  %-22s steps %6zu  mean %8.2f  p50 %8.2f  p90 %8.2f  p99 %8.2f  max %8.2f us\n", name,
           n, sum / (double)n, v[n / 2], v[(size_t)((double)n * 0.9)],
           v[(size_t)((double)n * 0.99)], v[n - 1]);
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(b);
        return NULL;
    }
    fclose(f);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

/* ------------------------------------------------------------ vocab */

static sift_vocab *vocab;
static int32_t V, eog_id;
static int32_t *slot;
#define SLOT_BITS 20

static uint32_t hsh(const char *b, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)b[i]) * 16777619u;
    return h;
}

static int32_t find_piece(const char *b, size_t n)
{
    uint32_t m = (1u << SLOT_BITS) - 1;
    for (uint32_t h = hsh(b, n) & m; slot[h] >= 0; h = (h + 1) & m) {
        const char *p;
        size_t l;
        if (!sift_vocab_piece(vocab, slot[h], &p, &l, NULL) && l == n && !memcmp(p, b, n))
            return slot[h];
    }
    return -1;
}

static int load_vocab(const char *path)
{
    sift_error err;
    sift_vocab *base = NULL;
    if (sift_vocab_load_tiktoken(&base, path, NULL, &err)) {
        fprintf(stderr, "bench_mask: %s: %s\n", path, err.message);
        return 0;
    }
    eog_id = sift_vocab_size(base);
    static const char *const sp[] = {"<|endoftext|>"};
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = sp;
    x.special_ids = &eog_id;
    x.n_special = 1;
    x.eog_ids = &eog_id;
    x.n_eog = 1;
    if (sift_vocab_extend(&vocab, base, &x, NULL, &err)) {
        fprintf(stderr, "bench_mask: %s\n", err.message);
        return 0;
    }
    sift_vocab_free(base);
    V = sift_vocab_size(vocab);
    slot = malloc(((size_t)1 << SLOT_BITS) * sizeof *slot);
    memset(slot, 0xff, ((size_t)1 << SLOT_BITS) * sizeof *slot);
    uint32_t m = (1u << SLOT_BITS) - 1;
    for (int32_t id = 0; id < V; id++) {
        const char *b;
        size_t n;
        if (id == eog_id || sift_vocab_piece(vocab, id, &b, &n, NULL) || n == 0)
            continue;
        uint32_t h = hsh(b, n) & m;
        while (slot[h] >= 0)
            h = (h + 1) & m;
        slot[h] = id;
    }
    return 1;
}

/* Greedy longest-piece split of s; returns the count (0 on a byte no
 * piece starts with). */
static size_t split(const char *s, int32_t *out, size_t cap)
{
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n && k < cap;) {
        size_t best = 0;
        int32_t id = -1;
        for (size_t l = n - i < 64 ? n - i : 64; l >= 1 && id < 0; l--)
            if ((id = find_piece(s + i, l)) >= 0)
                best = l;
        if (id < 0)
            return 0;
        out[k++] = id;
        i += best;
    }
    return k;
}

/* ---------------------------------------------------- the workloads */

static const char *const JSON_TEXTS[] = {
    "{\"id\": 12345, \"name\": \"Ada Lovelace\", \"email\": \"ada@example.com\", \"active\": "
    "true, \"roles\": [\"admin\", \"editor\"], \"address\": {\"street\": \"12 Analytical "
    "Engine Road\", \"city\": \"London\", \"zip\": \"NW1 6XE\"}, \"score\": -3.25e2, "
    "\"notes\": null}",
    "[{\"q\": \"What is the capital of France?\", \"a\": \"Paris is the capital and most "
    "populous city of France, with an estimated population of 2,102,650 residents.\"}, "
    "{\"q\": \"Translate 'cat'\", \"a\": \"chat (fr), Katze (de), gato (es)\"}]",
    "{\"model\": \"gpt\", \"choices\": [{\"index\": 0, \"message\": {\"role\": \"assistant\", "
    "\"content\": \"Sure! Here is a short poem about the sea:\\n\\nThe tide rolls in with "
    "silver light,\\nIt hums a song of ancient night.\\n\\u00e9t\\u00e9\"}, "
    "\"finish_reason\": \"stop\"}], \"usage\": {\"prompt_tokens\": 17, \"completion_tokens\": "
    "42, \"total_tokens\": 59}}",
    "[1, 2, 3.5, -4, 5e10, 0.001, 123456789, [true, false, null], {\"nested\": {\"deeper\": "
    "{\"deepest\": [\"x\", \"y\", \"z\"]}}}]",
    "{\"description\": \"A long free-text field that a model fills with prose, which is the "
    "slow case for a grammar: inside a string nearly every token of the vocabulary is "
    "allowed, so the whole-vocabulary pass walks nearly the whole token trie. Numbers like "
    "3.14159 and punctuation (commas, semicolons; colons: quotes) appear too.\", \"ok\": "
    "false}",
};

/* JSON-Schema-like grammars (what a converter emits for small schemas). */
static const char G_PERSON[] =
    "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws string ws \",\" ws \"\\\"age\\\"\" ws "
    "\":\" ws integer ws \",\" ws \"\\\"email\\\"\" ws \":\" ws string ws \",\" ws "
    "\"\\\"tags\\\"\" ws \":\" ws \"[\" ws ( string ( ws \",\" ws string )* )? ws \"]\" ws "
    "\"}\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" "
    "[0-9a-fA-F]{4} ) )* \"\\\"\"\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "ws ::= [ \\t\\n]{0,4}\n";
static const char *const PERSON_TEXTS[] = {
    "{\"name\": \"Grace Hopper\", \"age\": 85, \"email\": \"grace@navy.mil\", \"tags\": "
    "[\"compiler\", \"cobol\", \"admiral\"]}",
    "{\"name\": \"Linus\", \"age\": 54, \"email\": \"linus@example.org\", \"tags\": []}",
};

static const char G_TOOL[] =
    "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws name ws \",\" ws \"\\\"arguments\\\"\" ws "
    "\":\" ws args ws \"}\"\n"
    "name ::= \"\\\"get_weather\\\"\" | \"\\\"search\\\"\" | \"\\\"send_email\\\"\"\n"
    "args ::= \"{\" ws ( kv ( ws \",\" ws kv )* )? ws \"}\"\n"
    "kv ::= \"\\\"\" [a-z_]{1,32} \"\\\"\" ws \":\" ws ( string | number | \"true\" | "
    "\"false\" )\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt] ){0,200} \"\\\"\"\n"
    "number ::= \"-\"? [0-9]{1,12} ( \".\" [0-9]{1,8} )?\n"
    "ws ::= \" \"?\n";
static const char *const TOOL_TEXTS[] = {
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"San Francisco\", \"unit\": "
    "\"celsius\", \"days\": 3}}",
    "{\"name\": \"send_email\", \"arguments\": {\"to\": \"bob@example.com\", \"subject\": "
    "\"Quarterly report\", \"body\": \"Hi Bob, please find the numbers attached. Revenue grew "
    "12.5 percent.\", \"urgent\": false}}",
};

static const char G_ENUM[] =
    "root ::= \"{\" \"\\\"status\\\": \" status \", \\\"priority\\\": \" prio \", "
    "\\\"when\\\": \" date \", \\\"id\\\": \" uuid \"}\"\n"
    "status ::= \"\\\"open\\\"\" | \"\\\"closed\\\"\" | \"\\\"in_progress\\\"\" | "
    "\"\\\"blocked\\\"\"\n"
    "prio ::= [1-5]\n"
    "date ::= \"\\\"\" [0-9]{4} \"-\" [0-9]{2} \"-\" [0-9]{2} \"\\\"\"\n"
    "uuid ::= \"\\\"\" [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} "
    "\"-\" [0-9a-f]{12} \"\\\"\"\n";
static const char *const ENUM_TEXTS[] = {
    "{\"status\": \"in_progress\", \"priority\": 3, \"when\": \"2026-12-01\", \"id\": "
    "\"123e4567-e89b-12d3-a456-426614174000\"}",
    "{\"status\": \"blocked\", \"priority\": 1, \"when\": \"1999-01-31\", \"id\": "
    "\"00000000-0000-4000-8000-000000000000\"}",
};

static const char G_TINY[] = "root ::= \"yes\" | \"no\"\n";

/* ------------------------------------------------------ allocations */

typedef struct counter {
    size_t live, peak, total;
} counter;

static void *c_alloc(void *u, size_t n)
{
    counter *c = u;
    size_t *p = malloc(n + sizeof(size_t) * 2);
    if (!p)
        return NULL;
    p[0] = n;
    c->live += n;
    c->total += n;
    if (c->live > c->peak)
        c->peak = c->live;
    return p + 2;
}

static void c_free(void *u, void *q)
{
    counter *c = u;
    if (!q)
        return;
    size_t *p = (size_t *)q - 2;
    c->live -= p[0];
    free(p);
}

/* ---------------------------------------------------------- compile */

static int opt_ban, opt_nocache, opt_quick, opt_reuse;
static const char *opt_only, *opt_set;
static int reps = 200;

static void bench_compile(const char *name, const char *text, size_t len)
{
    sift_error err;
    sift_grammar *g = NULL;
    double t0 = now_us();
    if (sift_grammar_new(&g, text, len, vocab, NULL, &err)) {
        fprintf(stderr, "bench_mask: %s: %s\n", name, err.message);
        exit(1);
    }
    double first = now_us() - t0;
    sift_grammar_free(g);
    int n = opt_quick ? 20 : reps;
    double *v = malloc((size_t)n * sizeof *v), sum = 0;
    for (int i = 0; i < n; i++) {
        t0 = now_us();
        if (sift_grammar_new(&g, text, len, vocab, NULL, &err))
            exit(1);
        v[i] = now_us() - t0;
        sum += v[i];
        sift_grammar_free(g);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    /* the bytes of one grammar, through its own allocator (the shared
     * index is the vocabulary's) */
    counter c = {0, 0, 0};
    sift_allocator al = {sizeof al, c_alloc, c_free, &c, NULL};
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.allocator = &al;
    if (sift_grammar_new(&g, text, len, vocab, &gp, &err))
        exit(1);
    size_t live = c.live;
    sift_grammar_free(g);
    printf("  %-10s first %9.1f us   then mean %8.1f us  p50 %8.1f  p99 %8.1f (n = %d)   "
           "grammar bytes %zu\n",
           name, first, sum / n, v[n / 2], v[(size_t)(n * 0.99)], n, live);
    free(v);
}

/* ------------------------------------------------------------- mask */

static double *all_t;
static size_t n_all, cap_all;

static void walk_texts(const char *name, const char *gtext, size_t glen, const char *const *texts,
                       size_t n_texts)
{
    if (opt_only && strcmp(opt_only, name))
        return;
    sift_error err;
    size_t nw = ((size_t)V + 31) / 32;
    uint32_t *mask = malloc(nw * sizeof *mask);
    float *row = malloc((size_t)V * sizeof *row);
    size_t cap = 1 << 16, n = 0;
    double *t = malloc(cap * sizeof *t);
    int rounds = opt_quick ? 1 : 3;
    sift_grammar *kept = NULL; /* --reuse: one grammar, reset per text */
    uint64_t h0 = 0, m0 = 0;
    (void)h0;
    (void)m0;
    for (int r = 0; r < rounds; r++) {
        for (size_t k = 0; k < n_texts; k++) {
            int32_t toks[4096];
            size_t nt = split(texts[k], toks, 4096);
            if (!nt) {
                fprintf(stderr, "bench_mask: %s text %zu does not split\n", name, k);
                exit(1);
            }
            toks[nt++] = eog_id;
            sift_grammar *g = kept;
            if (g) {
                sift_grammar_reset(g);
            } else if (sift_grammar_new(&g, gtext, glen, vocab, NULL, &err)) {
                fprintf(stderr, "bench_mask: %s: %s\n", name, err.message);
                exit(1);
            }
#ifdef BENCH_INTERNAL
            if (opt_nocache)
                sift__grammar_set_mask_cache(g, 0);
#endif
            for (size_t i = 0; i < nt; i++) {
                double t0 = now_us();
                sift_status s;
#ifndef BENCH_BASELINE
                if (!opt_ban) {
                    s = sift_grammar_fill_bitmask(g, mask, nw, &err);
                } else
#endif
                {
                    memset(row, 0, (size_t)V * sizeof *row);
                    t0 = now_us();
                    s = sift_grammar_ban(g, row, V, &err);
                }
                double dt = now_us() - t0;
                if (s) {
                    fprintf(stderr, "bench_mask: %s step %zu: %s\n", name, i, err.message);
                    exit(1);
                }
                if (n == cap)
                    t = realloc(t, (cap *= 2) * sizeof *t);
                t[n++] = dt;
                if (n_all == cap_all)
                    all_t =
                        realloc(all_t, (cap_all = cap_all ? 2 * cap_all : 1 << 16) * sizeof *all_t);
                all_t[n_all++] = dt;
                if (sift_grammar_accept_token(g, toks[i], &err)) {
                    if (opt_set) {
                        /* a converter's rejection: not this bench's business */
                        fprintf(stderr, "bench_mask: %s text %zu stops at token %zu: %s\n", name, k,
                                i, err.message);
                        break;
                    }
                    fprintf(stderr, "bench_mask: %s text %zu token %zu (%d): %s\n", name, k, i,
                            (int)toks[i], err.message);
                    exit(1);
                }
            }
#ifdef BENCH_INTERNAL
            uint64_t h, m;
            sift__grammar_mask_stats(g, &h, &m);
            n_hits += h - h0;
            n_misses += m - m0;
            h0 = h;
            m0 = m;
#endif
            if (opt_reuse) {
                kept = g;
            } else {
                sift_grammar_free(g);
                h0 = m0 = 0;
            }
        }
    }
    sift_grammar_free(kept);
    stats(name, t, n);
#ifdef BENCH_INTERNAL
    if (!opt_ban)
        printf("  %-22s mask cache: %llu hits, %llu misses\n", "", (unsigned long long)n_hits,
               (unsigned long long)n_misses);
    n_hits = n_misses = 0;
#endif
    free(t);
    free(mask);
    free(row);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* --set LIST: every line "NAME GRAMMAR TEXTS"; each text of TEXTS (one a
 * line, up to 4000 pieces) walked through GRAMMAR. */
static void walk_set(const char *list)
{
    size_t ll;
    char *l = read_all(list, &ll);
    if (!l) {
        fprintf(stderr, "bench_mask: cannot read %s\n", list);
        exit(1);
    }
    for (char *line = strtok(l, "\n"); line; line = strtok(NULL, "\n")) {
        char name[256], gp[1024], tp[1024];
        if (sscanf(line, "%255s %1023s %1023s", name, gp, tp) != 3)
            continue;
        size_t gl, tl;
        char *gt = read_all(gp, &gl);
        char *tt = read_all(tp, &tl);
        if (!gt || !tt) {
            fprintf(stderr, "bench_mask: cannot read %s or %s\n", gp, tp);
            exit(1);
        }
        const char *texts[64];
        size_t nt = 0;
        for (char *p = tt; *p && nt < 64;) {
            char *e = strchr(p, '\n');
            if (e)
                *e = 0;
            if (*p && strlen(p) < 4000)
                texts[nt++] = p;
            if (!e)
                break;
            p = e + 1;
        }
        walk_texts(name, gt, gl, texts, nt);
        free(gt);
        free(tt);
    }
    free(l);
}

int main(int argc, char **argv)
{
    char vpath[1024];
    snprintf(vpath, sizeof vpath, "%s/tests/data/cl100k_base.tiktoken", SIFT_SRCDIR);
    const char *vp = vpath;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc)
            vp = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ban"))
            opt_ban = 1;
        else if (!strcmp(argv[i], "--no-cache"))
            opt_nocache = 1;
        else if (!strcmp(argv[i], "--quick"))
            opt_quick = 1;
        else if (!strcmp(argv[i], "--reuse"))
            opt_reuse = 1;
        else if (!strcmp(argv[i], "--cpu"))
            clock_id = CLOCK_THREAD_CPUTIME_ID;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            opt_only = argv[++i];
        else if (!strcmp(argv[i], "--set") && i + 1 < argc)
            opt_set = argv[++i];
        else {
            fprintf(stderr, "usage: bench_mask [--vocab FILE] [--reps N] [--ban] [--no-cache] "
                            "[--quick]\n");
            return 2;
        }
    }
#ifndef BENCH_INTERNAL
    if (opt_nocache) {
        fprintf(stderr, "bench_mask: --no-cache needs the internal build\n");
        return 2;
    }
#endif
    if (!load_vocab(vp))
        return 1;
    char jpath[1024];
    snprintf(jpath, sizeof jpath, "%s/grammar/json.gbnf", SIFT_SRCDIR);
    size_t jlen;
    char *json = read_all(jpath, &jlen);
    if (!json) {
        fprintf(stderr, "bench_mask: cannot read %s\n", jpath);
        return 1;
    }
    printf("vocabulary %s: V = %d\n", vp, (int)V);
    printf("compile (sift_grammar_new, vocabulary loaded):\n");
    bench_compile("json.gbnf", json, jlen);
    bench_compile("tiny", G_TINY, strlen(G_TINY));
    printf("mask per step (%s%s), %s:\n",
           opt_ban ? "sift_grammar_ban" : "sift_grammar_fill_bitmask",
           opt_nocache ? ", no mask cache" : "",
           opt_reuse ? "one grammar per workload, reset per text" : "fresh grammar per text");
    if (opt_set) {
        walk_set(opt_set);
        stats("all", all_t, n_all);
        free(all_t);
        free(json);
        free(slot);
        sift_vocab_free(vocab);
        return 0;
    }
    walk_texts("json.gbnf", json, jlen, JSON_TEXTS, N(JSON_TEXTS));
    walk_texts("person", G_PERSON, strlen(G_PERSON), PERSON_TEXTS, N(PERSON_TEXTS));
    walk_texts("tool call", G_TOOL, strlen(G_TOOL), TOOL_TEXTS, N(TOOL_TEXTS));
    walk_texts("enum/date/uuid", G_ENUM, strlen(G_ENUM), ENUM_TEXTS, N(ENUM_TEXTS));
    stats("all", all_t, n_all);
    free(all_t);
    free(json);
    free(slot);
    sift_vocab_free(vocab);
    return 0;
}

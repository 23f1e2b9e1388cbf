/*
 * bench_bpe.c - encode throughput of sift_vocab_encode (make bench-bpe).
 *
 *     bench_bpe VOCAB.tiktoken [FILE...]
 *
 * Loads the vocabulary (its default pre-tokenizer: cl100k or o200k by
 * size), reads the files given (or, without files, builds a 4 MiB corpus
 * of its own: English prose, C code and JSON records, so runs compare
 * across machines), and encodes the whole text 7 times with one scratch.
 * Prints the first encode (which builds the encoder) and the median and
 * best of the others, as MB/s of input and tokens per second, with the
 * process's CPU time beside wall time (the machine may be shared).
 * `--once` encodes once after the warm-up (for callgrind).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sift.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) {
            perror("realloc");
            exit(1);
        }
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* A corpus of its own: prose, code, JSON (deterministic). */
static void corpus(buf *b, size_t want)
{
    static const char *const words[] = {"the",          "of",
                                        "and",          "to",
                                        "in",           "a",
                                        "is",           "that",
                                        "for",          "it",
                                        "as",           "was",
                                        "with",         "be",
                                        "by",           "on",
                                        "not",          "he",
                                        "this",         "are",
                                        "or",           "his",
                                        "from",         "at",
                                        "which",        "but",
                                        "have",         "an",
                                        "had",          "they",
                                        "you",          "were",
                                        "their",        "one",
                                        "all",          "we",
                                        "can",          "her",
                                        "has",          "there",
                                        "been",         "if",
                                        "more",         "when",
                                        "will",         "would",
                                        "who",          "so",
                                        "no",           "sampling",
                                        "token",        "grammar",
                                        "schema",       "vocabulary",
                                        "encoder",      "merge",
                                        "throughput",   "deterministic",
                                        "unbelievably", "it's",
                                        "don't",        "they're"};
    static const char *const code =
        "static int parse_value(struct parser *p, const char *s, size_t n)\n"
        "{\n"
        "    for (size_t i = 0; i < n; i++) {\n"
        "        if (s[i] == '\"' && !p->escaped) /* end of string */\n"
        "            return i + 1;\n"
        "        p->escaped = s[i] == '\\\\' && !p->escaped;\n"
        "    }\n"
        "    return -1;\n"
        "}\n\n";
    uint64_t x = 88172645463325252u;
    size_t rec = 0;
    while (b->n < want) {
        /* a paragraph of prose */
        for (int w = 0; w < 120; w++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            const char *wd = words[x % (sizeof words / sizeof words[0])];
            if (w)
                puts_(b, x % 11 == 0 ? ", " : " ");
            if (w == 0 || x % 23 == 0) {
                char c[64];
                snprintf(c, sizeof c, "%c%s", wd[0] - 32, wd + 1);
                puts_(b, c);
            } else {
                puts_(b, wd);
            }
            if (x % 17 == 0)
                puts_(b, ".");
        }
        puts_(b, ".\n\n");
        puts_(b, code);
        /* JSON records */
        for (int r = 0; r < 8; r++, rec++) {
            char j[256];
            snprintf(j, sizeof j,
                     "{\"id\": %zu, \"name\": \"user_%zu\", \"score\": %zu.%02zu, \"tags\": "
                     "[\"a\", \"b\"], \"active\": %s, \"note\": null}\n",
                     rec, rec * 7919 % 100000, rec % 1000, rec % 100, rec % 3 ? "true" : "false");
            puts_(b, j);
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int once = 0, ai = 1;
    if (ai < argc && strcmp(argv[ai], "--once") == 0) {
        once = 1;
        ai++;
    }
    if (ai >= argc) {
        fprintf(stderr, "usage: bench_bpe [--once] VOCAB.tiktoken|VOCAB.gguf [FILE...]\n");
        return 2;
    }
    sift_vocab *v;
    sift_error err;
    /* A .gguf file with merges builds its encoder while it loads. */
    size_t al = strlen(argv[ai]);
    int gguf = al > 5 && strcmp(argv[ai] + al - 5, ".gguf") == 0;
    double l0 = now_s(), lc0 = cpu_s();
    if (gguf ? sift_vocab_load_gguf(&v, argv[ai], NULL, &err)
             : sift_vocab_load_tiktoken(&v, argv[ai], NULL, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    double load = now_s() - l0, load_cpu = cpu_s() - lc0;
    buf b = {NULL, 0, 0};
    if (ai + 1 < argc) {
        for (int i = ai + 1; i < argc; i++) {
            FILE *f = fopen(argv[i], "rb");
            if (!f) {
                perror(argv[i]);
                return 1;
            }
            char chunk[65536];
            size_t k;
            while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
                put(&b, chunk, k);
            fclose(f);
        }
    } else {
        corpus(&b, (size_t)4 << 20);
    }
    if (b.n > SIFT_ENCODE_MAX_BYTES)
        b.n = SIFT_ENCODE_MAX_BYTES;
    sift_encode_scratch *s;
    if (sift_encode_scratch_new(&s, NULL, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    size_t cap = b.n + 1, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) {
        perror("malloc");
        return 1;
    }
    sift_pretokenizer pk = sift_vocab_pretokenizer(v);
    const char *pre = pk == SIFT_PRETOK_CL100K  ? "cl100k"
                      : pk == SIFT_PRETOK_O200K ? "o200k"
                      : pk == SIFT_PRETOK_GPT2  ? "gpt2"
                      : pk == SIFT_PRETOK_QWEN2 ? "qwen2"
                                                : "none";
    double t0 = now_s(), c0 = cpu_s();
    if (sift_vocab_encode(v, b.p, b.n, 0, ids, cap, &n, s, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    double first = now_s() - t0, first_cpu = cpu_s() - c0;
    double mb = (double)b.n / 1e6;
    printf("bench_bpe: %s (%s), %.2f MB of text, %zu tokens (%.2f bytes/token)\n", argv[ai], pre,
           mb, n, (double)b.n / (double)n);
    printf("  load: %.1f ms wall, %.1f ms cpu\n", load * 1e3, load_cpu * 1e3);
    printf("  first encode (builds the encoder%s): %.1f ms wall, %.1f ms cpu\n",
           gguf ? ", already built by the load" : "", first * 1e3, first_cpu * 1e3);
    int runs = once ? 1 : 6;
    double wall[6], cpu[6];
    for (int r = 0; r < runs; r++) {
        size_t m;
        t0 = now_s();
        c0 = cpu_s();
        if (sift_vocab_encode(v, b.p, b.n, 0, ids, cap, &m, s, &err) || m != n) {
            fprintf(stderr, "run %d: %s\n", r, err.message);
            return 1;
        }
        wall[r] = now_s() - t0;
        cpu[r] = cpu_s() - c0;
    }
    qsort(wall, (size_t)runs, sizeof wall[0], cmp_double);
    qsort(cpu, (size_t)runs, sizeof cpu[0], cmp_double);
    double med = runs > 1 ? (wall[runs / 2 - 1] + wall[runs / 2]) / 2 : wall[0];
    double medc = runs > 1 ? (cpu[runs / 2 - 1] + cpu[runs / 2]) / 2 : cpu[0];
    printf("  encode, %d runs: median %.1f ms wall (%.1f MB/s, %.2f M tokens/s), "
           "%.1f ms cpu (%.1f MB/s); best %.1f ms wall (%.1f MB/s)\n",
           runs, med * 1e3, mb / med, (double)n / med / 1e6, medc * 1e3, mb / medc, wall[0] * 1e3,
           mb / wall[0]);
    free(ids);
    free(b.p);
    sift_encode_scratch_free(s);
    sift_vocab_free(v);
    return 0;
}

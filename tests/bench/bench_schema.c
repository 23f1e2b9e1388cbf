/*
 * bench_schema.c - conversion time of JSON Schemas against their size,
 * and encode time with a long special token (make bench-schema).
 *
 *     bench_schema                 the table: every shape, n doubling
 *     bench_schema --once SHAPE N  one run of one case (for callgrind:
 *                                  tests/bench/bench_schema_cg.sh)
 *
 * Shapes (n values, branches, names or bytes):
 *   enum-allof   allOf of two enums of n strings, half shared
 *   enum-oneof   oneOf of two disjoint enums of n strings
 *   const-oneof  oneOf of n consts
 *   required     n required names with distinct first code points
 *   ref          n properties, each a $ref to its own $defs entry
 *   encode       n KiB of 'a' with a special of 10,000 'a' and a 'b'
 *                (it almost matches at every position)
 * Each case runs 5 times; the table gives the median (wall and CPU) and
 * the median per item, which stays flat when the growth is linear. The
 * limits are raised so that every case converts (max_work 10^9, 64 MiB
 * of schema, 256 MiB of grammar).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sift.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0)
            exit(1);
        if (t->p && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        t->cap = t->cap ? 2 * t->cap + (size_t)k : 4096 + (size_t)k;
        if (!(t->p = realloc(t->p, t->cap)))
            exit(1);
    }
}

static void put_enum(text *t, int lo, int hi)
{
    put(t, "{\"enum\":[");
    for (int i = lo; i < hi; i++)
        put(t, "%s\"v%d\"", i > lo ? "," : "", i);
    put(t, "]}");
}

static const char *const shapes[] = {"enum-allof", "enum-oneof", "const-oneof",
                                     "required",   "ref",        "encode"};

static void make_schema(int shape, int n, text *t)
{
    t->n = 0;
    switch (shape) {
    case 0:
        put(t, "{\"allOf\":[");
        put_enum(t, 0, n);
        put(t, ",");
        put_enum(t, n / 2, n + n / 2);
        put(t, "]}");
        break;
    case 1:
        put(t, "{\"oneOf\":[");
        put_enum(t, 0, n);
        put(t, ",");
        put_enum(t, n, 2 * n);
        put(t, "]}");
        break;
    case 2:
        put(t, "{\"oneOf\":[");
        for (int i = 0; i < n; i++)
            put(t, "%s{\"const\":%d}", i ? "," : "", i);
        put(t, "]}");
        break;
    case 3:
        put(t, "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"null\"},\"required\":[");
        for (int i = 0; i < n; i++)
            put(t, "%s\"\\u%04x\"", i ? "," : "", 0x4E00 + i % 20000 + (i / 20000) * 0x10000);
        put(t, "]}");
        break;
    default:
        put(t, "{\"type\":\"object\",\"properties\":{");
        for (int i = 0; i < n; i++)
            put(t, "%s\"p%d\":{\"$ref\":\"#/$defs/d%d\"}", i ? "," : "", i, i);
        put(t, "},\"$defs\":{");
        for (int i = 0; i < n; i++)
            put(t, "%s\"d%d\":{\"type\":\"integer\"}", i ? "," : "", i);
        put(t, "}}");
        break;
    }
}

/* The vocabulary of the encode case: the 256 bytes, and the special. */
static sift_vocab *encode_vocab(void)
{
    enum { LONG = 10000 };
    static char bytes[256], special[LONG + 1];
    const char *p[257];
    size_t l[257];
    for (int b = 0; b < 256; b++) {
        bytes[b] = (char)b;
        p[b] = bytes + b;
        l[b] = 1;
    }
    memset(special, 'a', LONG);
    special[LONG] = 'b';
    p[256] = special;
    l[256] = LONG + 1;
    sift_vocab *v;
    sift_error err;
    if (sift_vocab_new(&v, 257, p, l, NULL, &err) ||
        sift_vocab_set_pretokenizer(v, SIFT_PRETOK_CL100K, NULL, 0, &err) ||
        sift_vocab_set_attr(v, 256, SIFT_TOKEN_SPECIAL, &err)) {
        fprintf(stderr, "bench_schema: %s\n", err.message);
        exit(1);
    }
    return v;
}

/* One run; returns the status. */
static sift_status run_once(int shape, const text *t, const sift_vocab *v, sift_encode_scratch *s)
{
    sift_error err;
    if (shape == 5) {
        size_t n;
        sift_status st =
            sift_vocab_encode(v, t->p, t->n, SIFT_ENCODE_SPECIAL, NULL, 0, &n, s, &err);
        return st == SIFT_E_LIMIT ? SIFT_OK : st;
    }
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.max_work = 1000000000;
    sp.max_schema_bytes = (size_t)64 << 20;
    sp.max_grammar_bytes = (size_t)256 << 20;
    char *out = NULL;
    size_t n = 0;
    sift_status st = sift_json_schema_to_gbnf(&out, &n, t->p, t->n, &sp, &err);
    if (st)
        fprintf(stderr, "bench_schema: %s: %s\n", shapes[shape], err.message);
    sift_json_schema_free_gbnf(out, &sp);
    return st;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void make_case(int shape, int n, text *t)
{
    if (shape == 5) {
        t->n = 0;
        put(t, "%s", "");
        size_t len = (size_t)n * 1024;
        if (t->cap < len + 1 && !(t->p = realloc(t->p, t->cap = len + 1)))
            exit(1);
        memset(t->p, 'a', len);
        t->n = len;
    } else {
        make_schema(shape, n, t);
    }
}

int main(int argc, char **argv)
{
    sift_vocab *v = encode_vocab();
    sift_encode_scratch *s;
    sift_error err;
    if (sift_encode_scratch_new(&s, NULL, &err))
        return 1;
    text t = {0};
    if (argc == 4 && !strcmp(argv[1], "--once")) {
        int shape = -1;
        for (int i = 0; i < 6; i++)
            if (!strcmp(argv[2], shapes[i]))
                shape = i;
        if (shape < 0)
            return 2;
        make_case(shape, atoi(argv[3]), &t);
        sift_status st = run_once(shape, &t, v, s);
        free(t.p);
        sift_encode_scratch_free(s);
        sift_vocab_free(v);
        return st ? 1 : 0;
    }
    printf("%-12s %7s %10s %10s %10s %12s\n", "shape", "n", "bytes", "median ms", "cpu ms",
           "ns per item");
    for (int shape = 0; shape < 6; shape++) {
        for (int n = shape == 5 ? 64 : 2500; n <= (shape == 5 ? 1024 : 80000); n *= 2) {
            make_case(shape, n, &t);
            double wall[5], cpu[5];
            sift_status st = SIFT_OK;
            for (int r = 0; r < 5 && !st; r++) {
                double c0 = cpu_ms(), t0 = now_ms();
                st = run_once(shape, &t, v, s);
                wall[r] = now_ms() - t0;
                cpu[r] = cpu_ms() - c0;
            }
            if (st) {
                printf("%-12s %7d %10zu %10s\n", shapes[shape], n, t.n, sift_status_str(st));
                continue;
            }
            qsort(wall, 5, sizeof *wall, cmp);
            qsort(cpu, 5, sizeof *cpu, cmp);
            double items = shape == 5 ? (double)n * 1024 : (double)n;
            printf("%-12s %7d %10zu %10.2f %10.2f %12.1f\n", shapes[shape], n, t.n, wall[2], cpu[2],
                   wall[2] * 1e6 / items);
            fflush(stdout);
        }
    }
    free(t.p);
    sift_encode_scratch_free(s);
    sift_vocab_free(v);
    return 0;
}

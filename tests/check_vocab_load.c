/*
 * check_vocab_load.c - vocabularies from files: the tiktoken loader on the
 * real cl100k_base file (sha256, size, pieces, tokens that are not UTF-8
 * on their own) and on small crafted inputs (gaps, unsorted ranks, every
 * error with its line and column), and the GGUF reader on small files the
 * test writes itself for both tokenizer models, plus corrupted variants:
 * every truncation, huge counts and lengths, wrong types, bad magic,
 * version 1, big endian (BAD_INPUTS R-11 included). Allocation failures
 * are injected at every allocation of a load.
 *
 * The data directory comes from SIFT_TEST_DATA_DIR (set by Makefile.am),
 * overridable through the environment variable of the same name.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "harness.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

#ifndef SIFT_TEST_DATA_DIR
#define SIFT_TEST_DATA_DIR "tests/data"
#endif

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static const char *data_dir(void)
{
    const char *d = getenv("SIFT_TEST_DATA_DIR");
    return d && *d ? d : SIFT_TEST_DATA_DIR;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static char *cl100k_path(void)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/cl100k_base.tiktoken", data_dir());
    return path;
}

static void piece_is(const sift_vocab *v, int32_t id, const char *want, size_t want_len)
{
    const char *b;
    size_t n;
    ck_assert_int_eq(sift_vocab_piece(v, id, &b, &n, NULL), SIFT_OK);
    ck_assert_msg(n == want_len && memcmp(b, want, n) == 0, "token %d: piece '%.*s' (%zu bytes)",
                  (int)id, (int)n, b, n);
}
#define PIECE_IS(v, id, lit) piece_is(v, id, lit, sizeof(lit) - 1)

/* Is s[0..n) valid UTF-8 on its own (no truncated sequence, no stray
 * continuation byte, no overlong form, no surrogate)? Written for the
 * test, independently of the library. */
static int utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            k = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            if (c == 0xE0)
                lo = 0xA0;
            if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            if (c == 0xF0)
                lo = 0x90;
            if (c == 0xF4)
                hi = 0x8F;
        } else {
            return 0;
        }
        if (i + k >= n)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t j = 2; j <= k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
        i += k + 1;
    }
    return 1;
}

/* A counting allocator that can fail the Nth call and records the
 * largest single request. */
typedef struct fa {
    long calls, fail_at, live;
    size_t biggest;
} fa;

static void *fa_alloc(void *user, size_t size)
{
    fa *f = user;
    f->calls++;
    if (size > f->biggest)
        f->biggest = size;
    if (f->calls == f->fail_at)
        return NULL;
    void *p = malloc(size);
    if (p)
        f->live++;
    return p;
}

static void fa_free(void *user, void *p)
{
    fa *f = user;
    if (p)
        f->live--;
    free(p);
}

static sift_status tt(const char *text, sift_vocab **v, sift_error *err)
{
    return sift_vocab_from_tiktoken(v, text, strlen(text), NULL, err);
}

/* Expects a tiktoken error with the given code, line and column. */
static void tt_err(const char *text, sift_status code, int line, int col, const char *needle)
{
    sift_vocab *v = (sift_vocab *)1;
    sift_error err;
    ck_assert_int_eq(tt(text, &v, &err), code);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(err.code, code);
    ck_assert_msg(err.line == line && err.column == col, "%s: got %d:%d, want %d:%d", err.message,
                  (int)err.line, (int)err.column, line, col);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "<memory>:%d:%d: ", line, col);
    ck_assert_msg(strncmp(err.message, prefix, strlen(prefix)) == 0, "message '%s'", err.message);
    ck_assert_msg(strstr(err.message, needle) != NULL, "message '%s' lacks '%s'", err.message,
                  needle);
    ck_assert_str_eq(err.source, "<memory>");
}

/* ------------------------------------------------------------------ */
/* tiktoken: the real file                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_cl100k_file_has_the_published_sha256)
{
    size_t n;
    char *b = read_all(cl100k_path(), &n);
    char hex[65];
    tu_sha256_hex(b, n, hex);
    ck_assert_str_eq(hex, "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7");
    free(b);
}
END_TEST

START_TEST(test_sha256_matches_the_fips_examples)
{
    char hex[65];
    tu_sha256_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    tu_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    tu_sha256_hex(m, strlen(m), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

START_TEST(test_cl100k_loads_100256_tokens_with_the_right_pieces)
{
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_msg(sift_vocab_load_tiktoken(&v, cl100k_path(), NULL, &err) == SIFT_OK, "%s",
                  err.message);
    ck_assert_int_eq(sift_vocab_size(v), 100256);
    PIECE_IS(v, 0, "!");
    PIECE_IS(v, 220, " ");
    PIECE_IS(v, 256, "  ");
    PIECE_IS(v, 1000, "indow");
    PIECE_IS(v, 1734, "\\n");
    PIECE_IS(v, 9906, "Hello");
    PIECE_IS(v, 100255, " Conveyor");
    int not_utf8 = 0, unused = 0;
    size_t longest = 0;
    for (int32_t id = 0; id < 100256; id++) {
        const char *b;
        size_t n;
        ck_assert_int_eq(sift_vocab_piece(v, id, &b, &n, NULL), SIFT_OK);
        ck_assert_uint_ge(n, 1);
        if (n > longest)
            longest = n;
        not_utf8 += !utf8_ok((const unsigned char *)b, n);
        unused += (sift_vocab_attr(v, id) & SIFT_TOKEN_UNUSED) != 0;
    }
    /* Counted independently with Python's decoder on the same file. */
    ck_assert_int_eq(not_utf8, 773);
    ck_assert_int_eq(unused, 0);
    ck_assert_uint_eq(longest, 128);
    /* The 256 single bytes are all tokens: every byte has an id. */
    int have[256] = {0};
    for (int32_t id = 0; id < 100256; id++) {
        const char *b;
        size_t n;
        ck_assert_int_eq(sift_vocab_piece(v, id, &b, &n, NULL), SIFT_OK);
        if (n == 1)
            have[(unsigned char)b[0]]++;
    }
    for (int i = 0; i < 256; i++)
        ck_assert_int_eq(have[i], 1);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_cl100k_from_memory_equals_from_file)
{
    size_t n;
    char *b = read_all(cl100k_path(), &n);
    sift_vocab *a = NULL, *c = NULL;
    ck_assert_int_eq(sift_vocab_from_tiktoken(&a, b, n, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_load_tiktoken(&c, cl100k_path(), NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(a), sift_vocab_size(c));
    for (int32_t id = 0; id < sift_vocab_size(a); id += 97) {
        const char *x, *y;
        size_t nx, ny;
        ck_assert_int_eq(sift_vocab_piece(a, id, &x, &nx, NULL), SIFT_OK);
        ck_assert_int_eq(sift_vocab_piece(c, id, &y, &ny, NULL), SIFT_OK);
        ck_assert(nx == ny && memcmp(x, y, nx) == 0);
    }
    sift_vocab_free(a);
    sift_vocab_free(c);
    free(b);
}
END_TEST

/* ------------------------------------------------------------------ */
/* tiktoken: crafted inputs                                            */
/* ------------------------------------------------------------------ */

START_TEST(test_tiktoken_gaps_in_ranks_are_unused_tokens_with_empty_pieces)
{
    /* "YQ==" = "a", "YmM=" = "bc", "ZGVm" = "def" */
    sift_vocab *v = NULL;
    ck_assert_int_eq(tt("YQ== 0\nYmM= 3\nZGVm 4\n", &v, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 5);
    PIECE_IS(v, 0, "a");
    PIECE_IS(v, 1, "");
    PIECE_IS(v, 2, "");
    PIECE_IS(v, 3, "bc");
    PIECE_IS(v, 4, "def");
    ck_assert_uint_eq(sift_vocab_attr(v, 0), 0);
    ck_assert_uint_eq(sift_vocab_attr(v, 1), SIFT_TOKEN_UNUSED);
    ck_assert_uint_eq(sift_vocab_attr(v, 2), SIFT_TOKEN_UNUSED);
    ck_assert_uint_eq(sift_vocab_attr(v, 3), 0);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_tiktoken_unsorted_ranks_give_the_same_vocabulary)
{
    sift_vocab *v = NULL;
    ck_assert_int_eq(tt("ZGVm 4\nYQ== 0\nYmM= 2", &v, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 5);
    PIECE_IS(v, 0, "a");
    PIECE_IS(v, 1, "");
    PIECE_IS(v, 2, "bc");
    PIECE_IS(v, 3, "");
    PIECE_IS(v, 4, "def");
    ck_assert_uint_eq(sift_vocab_attr(v, 3), SIFT_TOKEN_UNUSED);
    ck_assert_uint_eq(sift_vocab_attr(v, 4), 0);
    sift_vocab_free(v);
    /* In order with a gap first, then out of order: the ids read so far
     * move to the line table with their gaps. */
    ck_assert_int_eq(tt("YQ== 0\nYmM= 3\nZGVm 1\n", &v, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 4);
    PIECE_IS(v, 0, "a");
    PIECE_IS(v, 1, "def");
    PIECE_IS(v, 2, "");
    PIECE_IS(v, 3, "bc");
    ck_assert_uint_eq(sift_vocab_attr(v, 1), 0);
    ck_assert_uint_eq(sift_vocab_attr(v, 2), SIFT_TOKEN_UNUSED);
    ck_assert_uint_eq(sift_vocab_attr(v, 3), 0);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_tiktoken_accepts_crlf_and_a_missing_final_newline)
{
    sift_vocab *v = NULL;
    ck_assert_int_eq(tt("YQ== 0\r\nYmM= 1\r\n", &v, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 2);
    PIECE_IS(v, 1, "bc");
    sift_vocab_free(v);
    ck_assert_int_eq(tt("YQ== 0\nYmM= 1", &v, NULL), SIFT_OK);
    PIECE_IS(v, 1, "bc");
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_tiktoken_bytes_that_are_not_utf8_are_kept)
{
    /* "/w==" = 0xFF, "4oI=" = E2 82 (a truncated euro sign), "AA==" = NUL */
    sift_vocab *v = NULL;
    ck_assert_int_eq(tt("/w== 0\n4oI= 1\nAA== 2\n", &v, NULL), SIFT_OK);
    PIECE_IS(v, 0, "\xff");
    PIECE_IS(v, 1, "\xe2\x82");
    piece_is(v, 2, "\0", 1);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_tiktoken_errors_name_the_line_and_column)
{
    tt_err("YQ== 0\nYQ== 0\n", SIFT_E_ARG, 2, 6, "duplicate rank 0 (first on line 1)");
    tt_err("YQ== 1\nYmM= 0\nYQ== 1\n", SIFT_E_ARG, 3, 6, "duplicate rank 1 (first on line 1)");
    tt_err("YQ== 0\nY*== 1\n", SIFT_E_ARG, 2, 2, "bad base64: unexpected character 0x2a");
    tt_err("YQ== 0\nYQ= 1\n", SIFT_E_ARG, 2, 4, "not a multiple of 4");
    tt_err("Y=== 0\n", SIFT_E_ARG, 1, 2, "bad base64");
    tt_err("YQ=a 0\n", SIFT_E_ARG, 1, 3, "bad base64");
    tt_err("YQ== 0\nYmM= 16777216\n", SIFT_E_LIMIT, 2, 6, "rank 16777216 out of range");
    tt_err("YQ== 0\nYmM= 99999999999999999999999\n", SIFT_E_LIMIT, 2, 6, "out of range");
    tt_err("YQ== 0\nYmM= -1\n", SIFT_E_ARG, 2, 6, "bad rank");
    tt_err("YQ== 0\nYmM= 1x\n", SIFT_E_ARG, 2, 7, "bad rank");
    tt_err("YQ== 0\nYmM=\n", SIFT_E_ARG, 2, 5, "expected a space and a rank");
    tt_err("YQ== 0\nYmM= \n", SIFT_E_ARG, 2, 6, "expected a rank");
    tt_err("YQ== 0\n\nYmM= 1\n", SIFT_E_ARG, 2, 1, "empty line");
    tt_err(" 0\n", SIFT_E_ARG, 1, 1, "empty token");
    /* A huge rank on a tiny file would need a huge table. */
    sift_vocab *v = (sift_vocab *)1;
    sift_error err;
    ck_assert_int_eq(tt("YQ== 0\nYmM= 1000000\n", &v, &err), SIFT_E_LIMIT);
    ck_assert_ptr_null(v);
    ck_assert_str_eq(err.message, "<memory>: rank 1000000 with only 2 tokens leaves 999999 "
                                  "unused ids; max 65538");
}
END_TEST

START_TEST(test_tiktoken_long_lines_and_empty_files_are_errors)
{
    size_t n = 5000;
    char *big = malloc(n + 8);
    ck_assert_ptr_nonnull(big);
    memset(big, 'Q', n);
    memcpy(big + n, " 0\n", 4);
    tt_err(big, SIFT_E_LIMIT, 1, 4097, "line is 5002 bytes long; max 4096");
    free(big);
    sift_vocab *v = (sift_vocab *)1;
    sift_error err;
    ck_assert_int_eq(sift_vocab_from_tiktoken(&v, "", 0, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(tt("\n", &v, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "no tokens"));
    ck_assert_int_eq(sift_vocab_from_tiktoken(&v, NULL, 3, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_from_tiktoken(NULL, "YQ== 0", 6, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_load_tiktoken(&v, NULL, NULL, &err), SIFT_E_ARG);
}
END_TEST

START_TEST(test_tiktoken_load_refuses_directories_fifos_and_missing_files)
{
    sift_vocab *v = (sift_vocab *)1;
    sift_error err;
    ck_assert_int_eq(sift_vocab_load_tiktoken(&v, data_dir(), NULL, &err), SIFT_E_IO);
    ck_assert_ptr_null(v);
    ck_assert_ptr_nonnull(strstr(err.message, "not a regular file"));
    ck_assert_str_eq(err.source, data_dir());
    ck_assert_int_eq(sift_vocab_load_tiktoken(&v, "/nonexistent/x.tiktoken", NULL, &err),
                     SIFT_E_IO);
    ck_assert_int_eq(sift_vocab_load_gguf(&v, data_dir(), NULL, &err), SIFT_E_IO);
    /* A FIFO with no writer: opening it must not block. */
    char fifo[] = "/tmp/sift_vocab_fifoXXXXXX";
    int fd = mkstemp(fifo);
    ck_assert_int_ge(fd, 0);
    close(fd);
    unlink(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(sift_vocab_load_tiktoken(&v, fifo, NULL, &err), SIFT_E_IO);
    ck_assert_ptr_nonnull(strstr(err.message, "not a regular file"));
    ck_assert_int_eq(sift_vocab_load_gguf(&v, fifo, NULL, &err), SIFT_E_IO);
    unlink(fifo);
}
END_TEST

START_TEST(test_tiktoken_every_allocation_failure_is_nomem_and_leaks_nothing)
{
    const char *text = "ZGVm 4\nYQ== 0\nYmM= 2\n"; /* unsorted: the longest path */
    for (long k = 1;; k++) {
        fa f = {0, k, 0, 0};
        sift_allocator a = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
        sift_vocab *v = NULL;
        sift_error err;
        sift_status st = sift_vocab_from_tiktoken(&v, text, strlen(text), &a, &err);
        if (st == SIFT_OK) {
            ck_assert_int_gt(k, 3);
            sift_vocab_free(v);
            ck_assert_int_eq(f.live, 0);
            break;
        }
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        ck_assert_ptr_null(v);
        ck_assert_int_eq(f.live, 0);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* GGUF: a writer for test files                                       */
/* ------------------------------------------------------------------ */

typedef struct gbuf {
    unsigned char *b;
    size_t n, cap;
} gbuf;

static void g_put(gbuf *g, const void *p, size_t n)
{
    if (g->n + n > g->cap) {
        g->cap = (g->n + n) * 2 + 64;
        g->b = realloc(g->b, g->cap);
        ck_assert_ptr_nonnull(g->b);
    }
    memcpy(g->b + g->n, p, n);
    g->n += n;
}
static void g_u32(gbuf *g, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    g_put(g, b, 4);
}
static void g_u64(gbuf *g, uint64_t v)
{
    g_u32(g, (uint32_t)v);
    g_u32(g, (uint32_t)(v >> 32));
}
static void g_str(gbuf *g, const char *s)
{
    g_u64(g, strlen(s));
    g_put(g, s, strlen(s));
}
static void g_header(gbuf *g, uint32_t version, uint64_t n_kv)
{
    g_put(g, "GGUF", 4);
    g_u32(g, version);
    g_u64(g, 0); /* tensors */
    g_u64(g, n_kv);
}
static void g_kv_str(gbuf *g, const char *key, const char *val)
{
    g_str(g, key);
    g_u32(g, 8);
    g_str(g, val);
}
static void g_kv_u32(gbuf *g, const char *key, uint32_t val)
{
    g_str(g, key);
    g_u32(g, 4);
    g_u32(g, val);
}
static void g_kv_strs(gbuf *g, const char *key, const char *const *v, size_t n)
{
    g_str(g, key);
    g_u32(g, 9);
    g_u32(g, 8);
    g_u64(g, n);
    for (size_t i = 0; i < n; i++)
        g_str(g, v[i]);
}
static void g_kv_i32s(gbuf *g, const char *key, const int32_t *v, size_t n)
{
    g_str(g, key);
    g_u32(g, 9);
    g_u32(g, 5);
    g_u64(g, n);
    for (size_t i = 0; i < n; i++)
        g_u32(g, (uint32_t)v[i]);
}

/* Unrelated keys of every scalar type, a string array and a u8 array,
 * which the reader must skip. */
static void g_noise(gbuf *g)
{
    static const unsigned sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    for (uint32_t t = 0; t < 13; t++) {
        if (t == 8 || t == 9)
            continue;
        char key[32];
        snprintf(key, sizeof key, "test.scalar%u", (unsigned)t);
        g_str(g, key);
        g_u32(g, t);
        unsigned char z[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        g_put(g, z, sizes[t]);
    }
    g_kv_str(g, "general.name", "tiny");
    static const char *const strs[] = {"a b", "ab c"};
    g_kv_strs(g, "test.strings", strs, 2);
    g_str(g, "test.bytes");
    g_u32(g, 9);
    g_u32(g, 0);
    g_u64(g, 3);
    g_put(g, "xyz", 3);
}

/* GPT-2's byte -> code point table, built here the usual way (printable
 * Latin-1 bytes map to themselves, the others to 256, 257, ... in byte
 * order), to encode test pieces independently of the reader. */
static uint32_t gpt2_cp(unsigned b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE))
        return b;
    uint32_t n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE)))
            n++;
    return 256 + n;
}
static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* A small byte-level BPE vocabulary: "Ġthe" (" the"), "Ċ" ("\n"),
 * "hello", two control tokens, a user-defined one, an unused one. */
static gbuf gpt2_file(uint32_t version)
{
    gbuf g = {0};
    static const char *const toks[] = {"hello",      "\xc4\xa0the", "\xc4\x8a", "<|endoftext|>",
                                       "<|im_end|>", "<tool>",      "<unused0>"};
    static const int32_t types[] = {1, 1, 1, 3, 3, 4, 5};
    g_header(&g, version, 18);
    g_noise(&g); /* 14 pairs */
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, N(toks));
    g_kv_i32s(&g, "tokenizer.ggml.token_type", types, N(types));
    g_kv_u32(&g, "tokenizer.ggml.eos_token_id", 3);
    /* Tensor infos and data follow; they are garbage here on purpose. */
    g_put(&g, "\xde\xad\xbe\xef", 4);
    return g;
}

/* A small SentencePiece vocabulary. */
static gbuf llama_file(void)
{
    gbuf g = {0};
    static const char *const toks[] = {"<unk>",        "<s>",
                                       "</s>",         "<0x0A>",
                                       "<0xFF>",       "\xe2\x96\x81the",
                                       "ab",           "\xe2\x96\x81\xe2\x96\x81",
                                       "<end_of_turn>"};
    static const int32_t types[] = {2, 3, 3, 6, 6, 1, 1, 1, 3};
    g_header(&g, 3, 6);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, N(toks));
    g_kv_str(&g, "tokenizer.ggml.model", "llama");
    g_kv_i32s(&g, "tokenizer.ggml.token_type", types, N(types));
    g_kv_u32(&g, "tokenizer.ggml.eos_token_id", 2);
    g_kv_u32(&g, "tokenizer.ggml.eot_token_id", 0xffffffffu); /* "none" */
    g_kv_u32(&g, "tokenizer.ggml.bos_token_id", 1);
    return g;
}

static sift_status gg(const gbuf *g, sift_vocab **v, sift_error *err)
{
    return sift_vocab_from_gguf(v, g->b, g->n, NULL, err);
}

static void gg_err(const gbuf *g, sift_status code, const char *needle)
{
    sift_vocab *v = (sift_vocab *)1;
    sift_error err;
    ck_assert_int_eq(gg(g, &v, &err), code);
    ck_assert_ptr_null(v);
    ck_assert_msg(strstr(err.message, needle) != NULL, "message '%s' lacks '%s'", err.message,
                  needle);
    ck_assert_str_eq(err.source, "<memory>");
}

/* ------------------------------------------------------------------ */
/* GGUF: valid files                                                   */
/* ------------------------------------------------------------------ */

START_TEST(test_gguf_gpt2_pieces_are_decoded_through_the_byte_table)
{
    for (uint32_t version = 2; version <= 3; version++) {
        gbuf g = gpt2_file(version);
        sift_vocab *v = NULL;
        sift_error err;
        ck_assert_msg(gg(&g, &v, &err) == SIFT_OK, "%s", err.message);
        ck_assert_int_eq(sift_vocab_size(v), 7);
        PIECE_IS(v, 0, "hello");
        PIECE_IS(v, 1, " the");
        PIECE_IS(v, 2, "\n");
        PIECE_IS(v, 3, "<|endoftext|>");
        PIECE_IS(v, 4, "<|im_end|>");
        PIECE_IS(v, 5, "<tool>");
        PIECE_IS(v, 6, "<unused0>");
        ck_assert_uint_eq(sift_vocab_attr(v, 0), 0);
        ck_assert_uint_eq(sift_vocab_attr(v, 3), SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
        ck_assert_uint_eq(sift_vocab_attr(v, 4), SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
        ck_assert_uint_eq(sift_vocab_attr(v, 5), 0);
        ck_assert_uint_eq(sift_vocab_attr(v, 6), SIFT_TOKEN_UNUSED);
        sift_vocab_free(v);
        free(g.b);
    }
}
END_TEST

START_TEST(test_gguf_gpt2_byte_table_covers_all_256_bytes)
{
    char pieces[256][4];
    const char *toks[257];
    for (unsigned b = 0; b < 256; b++) {
        size_t k = put_utf8(pieces[b], gpt2_cp(b));
        pieces[b][k] = '\0';
        toks[b] = pieces[b];
    }
    toks[256] = "\xc4\xa0\xc4\xa0x\xc4\x8a"; /* "  x\n" */
    gbuf g = {0};
    g_header(&g, 3, 2);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 257);
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_msg(gg(&g, &v, &err) == SIFT_OK, "%s", err.message);
    for (unsigned b = 0; b < 256; b++) {
        char want = (char)b;
        piece_is(v, (int32_t)b, &want, 1);
    }
    PIECE_IS(v, 256, "  x\n");
    sift_vocab_free(v);
    free(g.b);
}
END_TEST

START_TEST(test_gguf_sentencepiece_pieces_and_byte_tokens_are_decoded)
{
    gbuf g = llama_file();
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_msg(gg(&g, &v, &err) == SIFT_OK, "%s", err.message);
    ck_assert_int_eq(sift_vocab_size(v), 9);
    PIECE_IS(v, 0, "<unk>");
    PIECE_IS(v, 1, "<s>");
    PIECE_IS(v, 2, "</s>");
    PIECE_IS(v, 3, "\n");
    PIECE_IS(v, 4, "\xff");
    PIECE_IS(v, 5, " the");
    PIECE_IS(v, 6, "ab");
    PIECE_IS(v, 7, "  ");
    PIECE_IS(v, 8, "<end_of_turn>");
    ck_assert_uint_eq(sift_vocab_attr(v, 0), SIFT_TOKEN_SPECIAL);
    ck_assert_uint_eq(sift_vocab_attr(v, 1), SIFT_TOKEN_SPECIAL);
    ck_assert_uint_eq(sift_vocab_attr(v, 2), SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    ck_assert_uint_eq(sift_vocab_attr(v, 3), 0);
    ck_assert_uint_eq(sift_vocab_attr(v, 8), SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    sift_vocab_free(v);
    free(g.b);
}
END_TEST

START_TEST(test_gguf_load_from_a_file_equals_from_memory)
{
    gbuf g = gpt2_file(3);
    char path[] = "/tmp/sift_vocab_ggufXXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, g.b, g.n), (ssize_t)g.n);
    close(fd);
    sift_vocab *a = NULL, *b = NULL;
    sift_error err;
    ck_assert_msg(sift_vocab_load_gguf(&a, path, NULL, &err) == SIFT_OK, "%s", err.message);
    ck_assert_int_eq(gg(&g, &b, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(a), sift_vocab_size(b));
    for (int32_t id = 0; id < sift_vocab_size(a); id++) {
        const char *x, *y;
        size_t nx, ny;
        ck_assert_int_eq(sift_vocab_piece(a, id, &x, &nx, NULL), SIFT_OK);
        ck_assert_int_eq(sift_vocab_piece(b, id, &y, &ny, NULL), SIFT_OK);
        ck_assert(nx == ny && memcmp(x, y, nx) == 0);
        ck_assert_uint_eq(sift_vocab_attr(a, id), sift_vocab_attr(b, id));
    }
    sift_vocab_free(a);
    sift_vocab_free(b);
    /* A truncated file names the path in its message. */
    ck_assert_int_eq(truncate(path, 40), 0);
    ck_assert_int_eq(sift_vocab_load_gguf(&a, path, NULL, &err), SIFT_E_ARG);
    ck_assert_str_eq(err.source, path);
    ck_assert_ptr_nonnull(strstr(err.message, path));
    unlink(path);
    free(g.b);
}
END_TEST

START_TEST(test_gguf_long_and_duplicate_pieces_are_kept)
{
    char longp[301];
    memset(longp, 'x', 300);
    longp[300] = '\0';
    /* long pieces are kept in full; duplicate pieces (here "a"
     * twice, and a byte token that decodes to a space next to "▁") are
     * allowed and keep their own ids. */
    const char *toks[] = {"a", longp, "a", "<0x20>", "\xe2\x96\x81"};
    static const int32_t types[] = {1, 1, 1, 6, 1};
    gbuf g = {0};
    g_header(&g, 3, 3);
    g_kv_str(&g, "tokenizer.ggml.model", "llama");
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 5);
    g_kv_i32s(&g, "tokenizer.ggml.token_type", types, 5);
    sift_vocab *v = NULL;
    ck_assert_int_eq(gg(&g, &v, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 5);
    piece_is(v, 1, longp, 300);
    PIECE_IS(v, 0, "a");
    PIECE_IS(v, 2, "a");
    PIECE_IS(v, 3, " ");
    PIECE_IS(v, 4, " ");
    sift_vocab_free(v);
    free(g.b);
}
END_TEST

/* ------------------------------------------------------------------ */
/* GGUF: corrupted files                                               */
/* ------------------------------------------------------------------ */

static gbuf bpe_file(const char *const *merges, size_t n, size_t *at);

START_TEST(test_gguf_truncated_at_every_offset_is_an_error_never_a_crash)
{
    static const char *const merges[] = {"a b", "ab c"};
    gbuf files[3] = {gpt2_file(3), llama_file(), bpe_file(merges, 2, NULL)};
    for (int f = 0; f < 3; f++) {
        /* The gpt2 file ends in 4 bytes of tensor garbage not read. */
        size_t end = files[f].n - (f == 0 ? 4 : 0);
        for (size_t n = 0; n < end; n++) {
            sift_vocab *v = (sift_vocab *)1;
            sift_error err;
            sift_status st = sift_vocab_from_gguf(&v, files[f].b, n, NULL, &err);
            ck_assert_msg(st == SIFT_E_ARG, "cut at %zu: status %d", n, (int)st);
            ck_assert_ptr_null(v);
            ck_assert_int_ge(err.offset, 0);
            ck_assert_int_le(err.offset, (int64_t)n);
        }
        sift_vocab *v = NULL;
        ck_assert_int_eq(sift_vocab_from_gguf(&v, files[f].b, end, NULL, NULL), SIFT_OK);
        sift_vocab_free(v);
        free(files[f].b);
    }
}
END_TEST

START_TEST(test_gguf_bad_magic_version_1_and_big_endian_are_rejected)
{
    gbuf g = gpt2_file(3);
    memcpy(g.b, "GGML", 4);
    gg_err(&g, SIFT_E_ARG, "not a GGUF file");
    memcpy(g.b, "GGUF", 4);
    g.b[4] = 1;
    gg_err(&g, SIFT_E_ARG, "GGUF version 1 is not supported");
    g.b[4] = 4;
    gg_err(&g, SIFT_E_ARG, "GGUF version 4 is not supported");
    unsigned char be[4] = {0, 0, 0, 3};
    memcpy(g.b + 4, be, 4);
    gg_err(&g, SIFT_E_ARG, "big-endian");
    free(g.b);
}
END_TEST

/* Huge counts and lengths must be refused before anything that large is
 * allocated: the largest request stays below a small multiple of the
 * file. */
static void gg_huge(const gbuf *g, const char *needle)
{
    fa f = {0, 0, 0, 0};
    sift_allocator a = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
    sift_vocab *v = (sift_vocab *)1;
    sift_error err;
    ck_assert_int_ne(sift_vocab_from_gguf(&v, g->b, g->n, &a, &err), SIFT_OK);
    ck_assert_ptr_null(v);
    ck_assert_msg(strstr(err.message, needle) != NULL, "message '%s' lacks '%s'", err.message,
                  needle);
    ck_assert_msg(f.biggest <= 16 * g->n + 8192, "allocated %zu bytes for a %zu-byte file",
                  f.biggest, g->n);
    ck_assert_int_eq(f.live, 0);
}

START_TEST(test_gguf_huge_counts_and_lengths_allocate_nothing_large)
{
    gbuf g = {0};
    g_header(&g, 3, (uint64_t)1 << 40);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    gg_huge(&g, "key/value pairs cannot fit");
    free(g.b);

    /* 2^30 tokens declared, 4 present. */
    g = (gbuf){0};
    g_header(&g, 3, 1);
    g_str(&g, "tokenizer.ggml.tokens");
    g_u32(&g, 9);
    g_u32(&g, 8);
    g_u64(&g, (uint64_t)1 << 30);
    for (int i = 0; i < 4; i++)
        g_str(&g, "ab");
    gg_huge(&g, "1073741824 tokens; max");
    free(g.b);

    /* 2^20 tokens declared (under the vocabulary cap), a few present. */
    g = (gbuf){0};
    g_header(&g, 3, 1);
    g_str(&g, "tokenizer.ggml.tokens");
    g_u32(&g, 9);
    g_u32(&g, 8);
    g_u64(&g, (uint64_t)1 << 20);
    for (int i = 0; i < 4; i++)
        g_str(&g, "ab");
    gg_huge(&g, "exceeds the");
    free(g.b);

    /* A string of 2^62 bytes. */
    g = (gbuf){0};
    g_header(&g, 3, 2);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_str(&g, "general.name");
    g_u32(&g, 8);
    g_u64(&g, (uint64_t)1 << 62);
    g_put(&g, "abc", 3);
    gg_huge(&g, "key 'general.name': string length 4611686018427387904 exceeds");
    free(g.b);

    /* A key of 2^40 bytes, and a skipped u64 array of 2^61 elements. */
    g = (gbuf){0};
    g_header(&g, 3, 1);
    g_u64(&g, (uint64_t)1 << 40);
    g_put(&g, "abcdefghijklmnop", 16);
    gg_huge(&g, "key length");
    free(g.b);
    g = (gbuf){0};
    g_header(&g, 3, 1);
    g_str(&g, "test.big");
    g_u32(&g, 9);
    g_u32(&g, 10);
    g_u64(&g, (uint64_t)1 << 61);
    g_put(&g, "abcdefghijklmnop", 16);
    gg_huge(&g, "array of 2305843009213693952 u64");
    free(g.b);
}
END_TEST

START_TEST(test_gguf_wrong_types_name_the_key)
{
    gbuf g = {0};
    g_header(&g, 3, 1);
    g_kv_u32(&g, "tokenizer.ggml.tokens", 7);
    gg_err(&g, SIFT_E_ARG, "key 'tokenizer.ggml.tokens': expected an array of string, got u32");
    free(g.b);

    g = (gbuf){0};
    static const int32_t nums[] = {1, 2};
    g_header(&g, 3, 1);
    g_kv_i32s(&g, "tokenizer.ggml.tokens", nums, 2);
    gg_err(&g, SIFT_E_ARG, "expected an array of string, got an array of i32");
    free(g.b);

    g = (gbuf){0};
    static const char *const toks[] = {"a", "b"};
    g_header(&g, 3, 2);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_strs(&g, "tokenizer.ggml.token_type", toks, 2);
    gg_err(&g, SIFT_E_ARG, "key 'tokenizer.ggml.token_type': expected an array of i32");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 2);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_str(&g, "tokenizer.ggml.eos_token_id", "1");
    gg_err(&g, SIFT_E_ARG, "key 'tokenizer.ggml.eos_token_id': expected u32, got string");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 2);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_str(&g, "tokenizer.ggml.model");
    g_u32(&g, 13);
    gg_err(&g, SIFT_E_ARG, "key 'tokenizer.ggml.model': unknown value type 13");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 1);
    g_str(&g, "test.nested");
    g_u32(&g, 9);
    g_u32(&g, 9);
    g_u64(&g, 1);
    gg_err(&g, SIFT_E_ARG, "arrays of arrays are not supported");
    free(g.b);
}
END_TEST

START_TEST(test_gguf_missing_or_inconsistent_tokenizer_keys_are_errors)
{
    static const char *const toks[] = {"a", "b"};
    static const int32_t types3[] = {1, 1, 1};
    static const int32_t badtype[] = {1, 9};
    gbuf g = {0};
    g_header(&g, 3, 1);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    gg_err(&g, SIFT_E_ARG, "no 'tokenizer.ggml.tokens' key");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 1);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    gg_err(&g, SIFT_E_ARG, "no 'tokenizer.ggml.model' key");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 2);
    g_kv_str(&g, "tokenizer.ggml.model", "bert");
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    gg_err(&g, SIFT_E_ARG, "tokenizer model 'bert' is not supported");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 3);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_i32s(&g, "tokenizer.ggml.token_type", types3, 3);
    gg_err(&g, SIFT_E_ARG, "3 types for 2 tokens");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 3);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_i32s(&g, "tokenizer.ggml.token_type", badtype, 2);
    gg_err(&g, SIFT_E_ARG, "token 1 has type 9");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 3);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_u32(&g, "tokenizer.ggml.eot_token_id", 2);
    gg_err(&g, SIFT_E_ARG, "key 'tokenizer.ggml.eot_token_id': token 2 out of range [0, 2)");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 3);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    gg_err(&g, SIFT_E_ARG, "duplicate key");
    free(g.b);
}
END_TEST

START_TEST(test_gguf_invalid_byte_tokens_and_bpe_text_name_the_token)
{
    /* byte tokens must be <0xHH>. */
    static const char *const bad_bytes[] = {"<0x-1>", "<0x0G>", "<0x0A", "<0x0AB>", "0x0A"};
    for (size_t i = 0; i < N(bad_bytes); i++) {
        const char *toks[] = {"a", bad_bytes[i]};
        static const int32_t types[] = {1, 6};
        gbuf g = {0};
        g_header(&g, 3, 3);
        g_kv_str(&g, "tokenizer.ggml.model", "llama");
        g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
        g_kv_i32s(&g, "tokenizer.ggml.token_type", types, 2);
        sift_vocab *v = (sift_vocab *)1;
        sift_error err;
        ck_assert_int_eq(gg(&g, &v, &err), SIFT_E_ARG);
        ck_assert_ptr_null(v);
        ck_assert_int_eq(err.index, 1);
        ck_assert_ptr_nonnull(strstr(err.message, "byte token 1 is"));
        ck_assert_ptr_nonnull(strstr(err.message, "<0xHH>"));
        free(g.b);
    }
    /* A byte-level BPE piece with a code point outside the table, and one
     * with invalid UTF-8. */
    static const char *const bad_bpe[] = {"a\xe4\xb8\x80", "\xff"};
    static const char *const needles[] = {"U+4E00 at byte 1 stands for no byte",
                                          "invalid UTF-8 at byte 0"};
    for (size_t i = 0; i < N(bad_bpe); i++) {
        const char *toks[] = {"a", bad_bpe[i]};
        gbuf g = {0};
        g_header(&g, 3, 2);
        g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
        g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
        sift_vocab *v = NULL;
        sift_error err;
        ck_assert_int_eq(gg(&g, &v, &err), SIFT_E_ARG);
        ck_assert_int_eq(err.index, 1);
        ck_assert_msg(strstr(err.message, needles[i]) != NULL, "%s", err.message);
        free(g.b);
    }
}
END_TEST

START_TEST(test_random_corruptions_of_both_formats_never_crash)
{
    /* Byte flips, random bytes and cut-and-repeat splices of valid files:
     * every result is a vocabulary or an error with a message, under
     * ASan/valgrind in CI. A vocabulary that has an encoder (the BPE
     * file's merges survived) encodes a text that decodes back. */
    static const char *const merges[] = {"a b", "ab c"};
    gbuf files[3] = {gpt2_file(3), llama_file(), bpe_file(merges, 2, NULL)};
    const char *tt_text = "ZGVm 4\nYQ== 0\nYmM= 2\n/w== 3\n";
    tu_rng r = {99};
    int ok = 0, bad = 0, encoded = 0;
    for (int it = 0; it < 20000; it++) {
        const unsigned char *src;
        size_t n;
        int is_gguf = it % 4 != 3;
        if (is_gguf) {
            src = files[it % 4].b;
            n = files[it % 4].n;
        } else {
            src = (const unsigned char *)tt_text;
            n = strlen(tt_text);
        }
        unsigned char buf[4096];
        memcpy(buf, src, n);
        const size_t n0 = n; /* splices copy from the original */
        int edits = (int)tu_range(&r, 1, 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)tu_range(&r, 0, (int64_t)n - 1);
            switch (tu_range(&r, 0, 3)) {
            case 0: buf[at] ^= (unsigned char)(1u << tu_range(&r, 0, 7)); break;
            case 1: buf[at] = (unsigned char)tu_range(&r, 0, 255); break;
            case 2: buf[at] = (unsigned char)(tu_range(&r, 0, 1) ? 0xff : 0x00); break;
            default: {
                size_t len = (size_t)tu_range(&r, 1, 16);
                size_t from = (size_t)tu_range(&r, 0, (int64_t)n0 - 1);
                if (n + len < sizeof buf && from + len <= n0) {
                    memmove(buf + at + len, buf + at, n - at);
                    memcpy(buf + at, src + from, len);
                    n += len;
                }
            }
            }
        }
        sift_vocab *v = NULL;
        sift_error err;
        sift_status st = is_gguf ? sift_vocab_from_gguf(&v, buf, n, NULL, &err)
                                 : sift_vocab_from_tiktoken(&v, (const char *)buf, n, NULL, &err);
        if (st == SIFT_OK) {
            ck_assert_ptr_nonnull(v);
            ck_assert_int_ge(sift_vocab_size(v), 1);
            int32_t ids[16];
            size_t ni;
            sift_status es = sift_vocab_encode(v, " abcab c", 8, 0, ids, 16, &ni, NULL, &err);
            ck_assert_msg(es == SIFT_OK || es == SIFT_E_STATE, "%s", err.message);
            if (es == SIFT_OK) {
                char back[64];
                size_t bl = 0;
                for (size_t i = 0; i < ni; i++) {
                    const char *p;
                    size_t pl;
                    ck_assert_int_eq(sift_vocab_piece(v, ids[i], &p, &pl, NULL), SIFT_OK);
                    ck_assert_uint_le(bl + pl, sizeof back);
                    memcpy(back + bl, p, pl);
                    bl += pl;
                }
                ck_assert(bl == 8 && memcmp(back, " abcab c", 8) == 0);
                encoded++;
            }
            sift_vocab_free(v);
            ok++;
        } else {
            ck_assert_ptr_null(v);
            ck_assert_int_eq(err.code, st);
            ck_assert_uint_gt(strlen(err.message), 0);
            bad++;
        }
    }
    ck_assert_int_gt(ok, 100);
    ck_assert_int_gt(bad, 1000);
    ck_assert_int_gt(encoded, 100);
    free(files[0].b);
    free(files[1].b);
    free(files[2].b);
}
END_TEST

START_TEST(test_gguf_every_allocation_failure_is_nomem_and_leaks_nothing)
{
    static const char *const merges[] = {"a b", "ab c"};
    gbuf files[3] = {gpt2_file(3), llama_file(), bpe_file(merges, 2, NULL)};
    for (int i = 0; i < 3; i++) {
        for (long k = 1;; k++) {
            fa f = {0, k, 0, 0};
            sift_allocator a = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
            sift_vocab *v = NULL;
            sift_status st = sift_vocab_from_gguf(&v, files[i].b, files[i].n, &a, NULL);
            if (st == SIFT_OK) {
                ck_assert_int_gt(k, 3);
                sift_vocab_free(v);
                ck_assert_int_eq(f.live, 0);
                break;
            }
            ck_assert_int_eq(st, SIFT_E_NOMEM);
            ck_assert_ptr_null(v);
            ck_assert_int_eq(f.live, 0);
        }
        free(files[i].b);
    }
}
END_TEST

START_TEST(test_gguf_rejects_null_arguments)
{
    sift_vocab *v = (sift_vocab *)1;
    ck_assert_int_eq(sift_vocab_from_gguf(NULL, "GGUF", 4, NULL, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_from_gguf(&v, NULL, 4, NULL, NULL), SIFT_E_ARG);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(sift_vocab_load_gguf(&v, NULL, NULL, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_from_gguf(&v, NULL, 0, NULL, NULL), SIFT_E_ARG);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Files that are not regular: every library loader                    */
/* ------------------------------------------------------------------ */

/* A temporary directory holding a FIFO (no writer), a directory, and
 * symbolic links with the loaders' extensions to each of them and to
 * /dev/null and /dev/zero. */
/* ------------------------------------------------------------------ */
/* GGUF: BPE merges and the pre-tokenizer name                         */
/* ------------------------------------------------------------------ */

/* A byte-level BPE file: the 256 bytes in the GPT-2 alphabet (ids
 * 0..255), "ab" (256) and "abc" (257), pre "gpt-2", and the merge strings
 * given as stored (GPT-2 text with the space). at[k] gets the file
 * offset of merge string k's bytes. */
static gbuf bpe_file(const char *const *merges, size_t n, size_t *at)
{
    gbuf g = {0};
    g_header(&g, 3, 4);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_kv_str(&g, "tokenizer.ggml.pre", "gpt-2");
    g_str(&g, "tokenizer.ggml.tokens");
    g_u32(&g, 9);
    g_u32(&g, 8);
    g_u64(&g, 258);
    for (unsigned b = 0; b < 256; b++) {
        char o[2];
        size_t k = put_utf8(o, gpt2_cp(b));
        g_u64(&g, k);
        g_put(&g, o, k);
    }
    g_str(&g, "ab");
    g_str(&g, "abc");
    g_str(&g, "tokenizer.ggml.merges");
    g_u32(&g, 9);
    g_u32(&g, 8);
    g_u64(&g, n);
    for (size_t i = 0; i < n; i++) {
        g_u64(&g, strlen(merges[i]));
        if (at)
            at[i] = g.n;
        g_put(&g, merges[i], strlen(merges[i]));
    }
    return g;
}

/* Expects merge k of the file to be refused with `needle`, at its place. */
static void merge_err(const char *const *merges, size_t n, size_t k, const char *needle)
{
    size_t at[8];
    gbuf g = bpe_file(merges, n, at);
    sift_vocab *v = (sift_vocab *)1;
    sift_error err;
    ck_assert_int_eq(gg(&g, &v, &err), SIFT_E_ARG);
    ck_assert_ptr_null(v);
    char want[300];
    snprintf(want, sizeof want, "<memory>: offset %zu: key 'tokenizer.ggml.merges': merge %zu %s",
             at[k], k, needle);
    ck_assert_str_eq(err.message, want);
    ck_assert_int_eq(err.offset, (int64_t)at[k]);
    ck_assert_int_eq(err.index, (int64_t)k);
    free(g.b);
}

START_TEST(test_gguf_bpe_merges_whose_pieces_are_not_tokens_name_the_merge)
{
    const char *const right[] = {"a b", "ab c", "c ab"};
    merge_err(right, 3, 2, "('c' 'ab'): its two pieces together are not a token");
    const char *const left[] = {"a b", "ba c"};
    merge_err(left, 2, 1, "('ba' 'c'): its left piece is not a token");
    const char *const rpiece[] = {"a bc"};
    merge_err(rpiece, 1, 0, "('a' 'bc'): its right piece is not a token");
    /* GPT-2 text: "\xc4\xa0" is the space byte */
    const char *const sp[] = {"a b", "\xc4\xa0 ab"};
    merge_err(sp, 2, 1, "(' ' 'ab'): its two pieces together are not a token");
    /* the good file loads, with merges by pairs */
    const char *const good[] = {"a b", "ab c"};
    gbuf g = bpe_file(good, 2, NULL);
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_msg(gg(&g, &v, &err) == SIFT_OK, "%s", err.message);
    int32_t ids[4];
    size_t n;
    ck_assert_int_eq(sift_vocab_encode(v, "abcab", 5, 0, ids, 4, &n, NULL, &err), SIFT_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 257);
    ck_assert_int_eq(ids[1], 256);
    sift_vocab_free(v);
    free(g.b);
}
END_TEST

START_TEST(test_gguf_bpe_malformed_merge_strings_are_errors_that_show_them)
{
    const char *const nospace[] = {"a b", "ab"};
    merge_err(nospace, 2, 1, "'ab' has no space; expected two pieces 'A B'");
    const char *const empty[] = {""};
    merge_err(empty, 1, 0, "'' has no space; expected two pieces 'A B'");
    const char *const two[] = {"a b c"};
    merge_err(two, 1, 0, "'a b c' has more than one space; expected 'A B'");
    const char *const lead[] = {" b"};
    merge_err(lead, 1, 0, "' b' has an empty piece; expected 'A B'");
    const char *const trail[] = {"a b", "a "};
    merge_err(trail, 2, 1, "'a ' has an empty piece; expected 'A B'");
    const char *const utf[] = {"a\xff b"};
    merge_err(utf, 1, 0, "'a\\xff b' is not byte-level BPE text: invalid UTF-8 at byte 1");
    const char *const nobyte[] = {"a\x01 b"};
    merge_err(nobyte, 1, 0,
              "'a\\x01 b' is not byte-level BPE text: U+0001 at byte 1 stands for no byte");
    const char *const high[] = {"a \xc5\x84"}; /* U+0144 is 256 + 68: past the table */
    merge_err(high, 1, 0,
              "'a \\xc5\\x84' is not byte-level BPE text: U+0144 at byte 2 stands for no byte");
}
END_TEST

START_TEST(test_gguf_bpe_merges_and_pre_of_the_wrong_type_name_the_key)
{
    static const char *const toks[] = {"a", "b"};
    static const int32_t nums[] = {1, 2};
    gbuf g = {0};
    g_header(&g, 3, 2);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_u32(&g, "tokenizer.ggml.merges", 1);
    gg_err(&g, SIFT_E_ARG, "key 'tokenizer.ggml.merges': expected an array of string, got u32");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 2);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_i32s(&g, "tokenizer.ggml.merges", nums, 2);
    gg_err(&g, SIFT_E_ARG,
           "key 'tokenizer.ggml.merges': expected an array of string, got an array of i32");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 2);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_u32(&g, "tokenizer.ggml.pre", 3);
    gg_err(&g, SIFT_E_ARG, "key 'tokenizer.ggml.pre': expected string, got u32");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 3);
    g_kv_str(&g, "tokenizer.ggml.pre", "gpt-2");
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_str(&g, "tokenizer.ggml.pre", "qwen2");
    gg_err(&g, SIFT_E_ARG, "key 'tokenizer.ggml.pre': duplicate key");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 3);
    g_kv_strs(&g, "tokenizer.ggml.merges", toks, 2);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    g_kv_strs(&g, "tokenizer.ggml.merges", toks, 2);
    gg_err(&g, SIFT_E_ARG, "key 'tokenizer.ggml.merges': duplicate key");
    free(g.b);
}
END_TEST

START_TEST(test_gguf_bpe_huge_merge_counts_and_lengths_allocate_nothing_large)
{
    gbuf g = {0};
    g_header(&g, 3, 1);
    g_str(&g, "tokenizer.ggml.merges");
    g_u32(&g, 9);
    g_u32(&g, 8);
    g_u64(&g, (uint64_t)1 << 40);
    g_str(&g, "a b");
    gg_huge(&g, "key 'tokenizer.ggml.merges': 1099511627776 merges; max 67108864");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 1);
    g_str(&g, "tokenizer.ggml.merges");
    g_u32(&g, 9);
    g_u32(&g, 8);
    g_u64(&g, (uint64_t)1 << 25);
    g_str(&g, "a b");
    gg_huge(&g, "array of 33554432 strings exceeds the");
    free(g.b);

    g = (gbuf){0};
    g_header(&g, 3, 1);
    g_str(&g, "tokenizer.ggml.merges");
    g_u32(&g, 9);
    g_u32(&g, 8);
    g_u64(&g, 2);
    g_str(&g, "a b");
    g_u64(&g, (uint64_t)1 << 62);
    g_put(&g, "a b", 3);
    gg_huge(&g, "merge string length 4611686018427387904 exceeds");
    free(g.b);
}
END_TEST

START_TEST(test_gguf_bpe_without_a_known_pre_or_a_byte_token_loads_without_an_encoder)
{
    /* "a", "b", "ab" only: no token for most bytes */
    static const char *const toks[] = {"a", "b", "ab"};
    static const char *const merges[] = {"a b"};
    gbuf g = {0};
    g_header(&g, 3, 4);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_kv_str(&g, "tokenizer.ggml.pre", "gpt-2");
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 3);
    g_kv_strs(&g, "tokenizer.ggml.merges", merges, 1);
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_msg(gg(&g, &v, &err) == SIFT_OK, "%s", err.message);
    free(g.b);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_NONE);
    int32_t ids[4];
    size_t n;
    ck_assert_int_eq(sift_vocab_encode(v, "ab", 2, 0, ids, 4, &n, NULL, &err), SIFT_E_STATE);
    ck_assert_msg(strstr(err.message, "no token for the byte 0x00") != NULL, "%s", err.message);
    sift_vocab_free(v);

    /* A long unknown name is shown cut and escaped. */
    const char *const good[] = {"a b"};
    g = bpe_file(good, 1, NULL);
    gbuf h = {0};
    g_header(&h, 3, 4);
    g_kv_str(&h, "tokenizer.ggml.pre",
             "a-very-long-pre-tokenizer-name-\x01-that-goes-on-and-on-and-on");
    /* the rest of bpe_file after its header and pre key */
    size_t skip = 24 + 8 + strlen("tokenizer.ggml.model") + 4 + 8 + 4 + 8 +
                  strlen("tokenizer.ggml.pre") + 4 + 8 + 5;
    g_kv_str(&h, "tokenizer.ggml.model", "gpt2");
    g_put(&h, g.b + skip, g.n - skip);
    ck_assert_msg(gg(&h, &v, &err) == SIFT_OK, "%s", err.message);
    ck_assert_int_eq(sift_vocab_encode(v, "ab", 2, 0, ids, 4, &n, NULL, &err), SIFT_E_STATE);
    ck_assert_msg(strstr(err.message, "GGUF key 'tokenizer.ggml.pre' is "
                                      "'a-very-long-pre-tokenizer-name-\\x01-that-go...'") != NULL,
                  "%s", err.message);
    sift_vocab_free(v);
    free(g.b);
    free(h.b);
}
END_TEST

START_TEST(test_gguf_merges_of_a_sentencepiece_file_are_not_read)
{
    gbuf g = llama_file();
    /* one more key: merges that would be malformed for gpt2 */
    g.b[16] = 7;
    static const char *const merges[] = {"nospace", "\x01 x"};
    g_kv_strs(&g, "tokenizer.ggml.merges", merges, 2);
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_msg(gg(&g, &v, &err) == SIFT_OK, "%s", err.message);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_NONE);
    sift_vocab_free(v);
    free(g.b);
}
END_TEST

static char tmpdir[64];

static void make_special_files(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sift_files_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    char p[160], q[160];
    snprintf(p, sizeof p, "%s/fifo", tmpdir);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    snprintf(p, sizeof p, "%s/dir", tmpdir);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    static const char *const targets[] = {"fifo", "dir", "/dev/null", "/dev/zero"};
    static const char *const exts[] = {"tiktoken", "gguf", "gbnf", "yaml"};
    for (size_t t = 0; t < N(targets); t++)
        for (size_t e = 0; e < N(exts); e++) {
            if (targets[t][0] == '/')
                snprintf(q, sizeof q, "%s", targets[t]);
            else
                snprintf(q, sizeof q, "%s/%s", tmpdir, targets[t]);
            snprintf(p, sizeof p, "%s/t%zu.%s", tmpdir, t, exts[e]);
            ck_assert_int_eq(symlink(q, p), 0);
        }
}

static void remove_special_files(void)
{
    char p[160];
    static const char *const exts[] = {"tiktoken", "gguf", "gbnf", "yaml"};
    for (size_t t = 0; t < 4; t++)
        for (size_t e = 0; e < N(exts); e++) {
            snprintf(p, sizeof p, "%s/t%zu.%s", tmpdir, t, exts[e]);
            unlink(p);
        }
    snprintf(p, sizeof p, "%s/c.yaml", tmpdir);
    unlink(p);
    snprintf(p, sizeof p, "%s/fifo", tmpdir);
    unlink(p);
    snprintf(p, sizeof p, "%s/dir", tmpdir);
    rmdir(p);
    rmdir(tmpdir);
}

static void assert_not_regular(sift_status st, const sift_error *err, const char *path)
{
    ck_assert_msg(st == SIFT_E_IO, "%s: status %d (%s)", path, (int)st, err->message);
    ck_assert_msg(strstr(err->message, "not a regular file (") != NULL, "%s: '%s'", path,
                  err->message);
}

START_TEST(test_every_loader_refuses_fifos_directories_and_devices_without_blocking)
{
    make_special_files();
    for (int t = 0; t < 4; t++) {
        char p[160];
        sift_error err;
        sift_vocab *v = (sift_vocab *)1;
        snprintf(p, sizeof p, "%s/t%d.tiktoken", tmpdir, t);
        assert_not_regular(sift_vocab_load_tiktoken(&v, p, NULL, &err), &err, p);
        ck_assert_ptr_null(v);
        ck_assert_str_eq(err.source, p);
        snprintf(p, sizeof p, "%s/t%d.gguf", tmpdir, t);
        v = (sift_vocab *)1;
        assert_not_regular(sift_vocab_load_gguf(&v, p, NULL, &err), &err, p);
        ck_assert_ptr_null(v);
        snprintf(p, sizeof p, "%s/t%d.yaml", tmpdir, t);
        sift_config *cfg = (sift_config *)1;
        assert_not_regular(sift_config_load(&cfg, p, NULL, &err), &err, p);
        ck_assert_ptr_null(cfg);
        /* Files a config names: the vocabulary and the grammar file. */
        char yaml[400];
        snprintf(yaml, sizeof yaml, "vocab: t%d.tiktoken\nchain: [greedy]\n", t);
        sift_config_params cp;
        sift_config_params_init(&cp);
        cp.base_dir = tmpdir;
        ck_assert_int_eq(sift_config_parse(&cfg, "c.yaml", yaml, strlen(yaml), &cp, &err),
                         SIFT_E_IO);
        ck_assert_ptr_nonnull(strstr(err.message, "not a regular file ("));
        ck_assert_int_eq(err.line, 1);
        sift_config_free(cfg);
        snprintf(yaml, sizeof yaml, "chain: [greedy]\ngrammar:\n  file: t%d.gbnf\n", t);
        ck_assert_int_eq(sift_config_parse(&cfg, "c.yaml", yaml, strlen(yaml), &cp, &err),
                         SIFT_E_IO);
        ck_assert_ptr_nonnull(strstr(err.message, "not a regular file ("));
        ck_assert_int_eq(err.line, 3);
        sift_config_free(cfg);
    }
    remove_special_files();
}
END_TEST

/* ------------------------------------------------------------------ */
/* GGUF strings and ids                                                */
/* ------------------------------------------------------------------ */

/* Tokens "a", "b" with a key written by the caller in between. */
static gbuf ab_file_with_key(const char *key, size_t klen)
{
    static const char *const toks[] = {"a", "b"};
    gbuf g = {0};
    g_header(&g, 3, 3);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_u64(&g, klen);
    g_put(&g, key, klen);
    g_u32(&g, 0);
    g_put(&g, "\x01", 1);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
    return g;
}

START_TEST(test_gguf_keys_must_be_printable_ascii_in_full)
{
    gbuf g = ab_file_with_key("general.n\0me", 12);
    gg_err(&g, SIFT_E_ARG, "key 1 has byte 0x00 at 9; keys are printable ASCII");
    free(g.b);
    g = ab_file_with_key("general.\xc3\xa9", 10);
    gg_err(&g, SIFT_E_ARG, "key 1 has byte 0xc3 at 8");
    free(g.b);
    g = ab_file_with_key("general.\n", 9);
    gg_err(&g, SIFT_E_ARG, "key 1 has byte 0x0a at 8");
    free(g.b);
    /* Past the part kept for messages (255 bytes) the key is checked too. */
    char big[400];
    memset(big, 'k', sizeof big);
    big[300] = '\x7f';
    g = ab_file_with_key(big, sizeof big);
    gg_err(&g, SIFT_E_ARG, "key 1 has byte 0x7f at 300");
    free(g.b);
    big[300] = 'k';
    g = ab_file_with_key(big, sizeof big);
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_int_eq(gg(&g, &v, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 2);
    sift_vocab_free(v);
    free(g.b);
}
END_TEST

START_TEST(test_gguf_messages_escape_the_bytes_of_the_file)
{
    /* A model name with control bytes, a NUL and broken UTF-8. */
    static const char *const toks[] = {"a"};
    gbuf g = {0};
    g_header(&g, 3, 2);
    g_str(&g, "tokenizer.ggml.model");
    g_u32(&g, 8);
    g_u64(&g, 6);
    g_put(&g, "x\0\n\xff\\y", 6);
    g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 1);
    gg_err(&g, SIFT_E_ARG, "tokenizer model 'x\\x00\\x0a\\xff\\x5cy' is not supported");
    free(g.b);
    /* A byte token that is not <0xHH>, with a NUL in it. */
    static const char *const ltoks[] = {"<unk>", "<0x\0A>"};
    g = (gbuf){0};
    g_header(&g, 3, 3);
    g_kv_str(&g, "tokenizer.ggml.model", "llama");
    g_str(&g, "tokenizer.ggml.tokens");
    g_u32(&g, 9);
    g_u32(&g, 8);
    g_u64(&g, 2);
    g_str(&g, ltoks[0]);
    g_u64(&g, 6);
    g_put(&g, ltoks[1], 6);
    static const int32_t types[] = {2, 6};
    g_kv_i32s(&g, "tokenizer.ggml.token_type", types, 2);
    gg_err(&g, SIFT_E_ARG, "byte token 1 is '<0x\\x00A>'");
    free(g.b);
}
END_TEST

START_TEST(test_gguf_negative_token_ids_other_than_minus_one_are_errors)
{
    static const char *const toks[] = {"a", "b"};
    for (int k = 0; k < 2; k++) {
        gbuf g = {0};
        g_header(&g, 3, 3);
        g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
        g_kv_strs(&g, "tokenizer.ggml.tokens", toks, 2);
        g_str(&g, "tokenizer.ggml.eos_token_id");
        g_u32(&g, 5); /* i32 */
        g_u32(&g, k ? (uint32_t)-1 : (uint32_t)-5);
        if (k) {
            sift_vocab *v = NULL;
            sift_error err;
            ck_assert_int_eq(gg(&g, &v, &err), SIFT_OK); /* -1: none */
            ck_assert_uint_eq(sift_vocab_attr(v, 0) & SIFT_TOKEN_EOG, 0);
            ck_assert_uint_eq(sift_vocab_attr(v, 1) & SIFT_TOKEN_EOG, 0);
            sift_vocab_free(v);
        } else {
            gg_err(&g, SIFT_E_ARG,
                   "key 'tokenizer.ggml.eos_token_id': token id -5 is negative (-1 means none)");
        }
        free(g.b);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Special tokens, end-of-generation ids, padding                      */
/* ------------------------------------------------------------------ */

/* "a" "b" "c", then an unused id (a gap), like a small tiktoken file. */
static sift_vocab *abc_gap(void)
{
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_int_eq(
        sift_vocab_from_tiktoken(&v, "YQ== 0\nYg== 1\nYw== 2\nZA== 4\n", 28, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 5);
    ck_assert_uint_eq(sift_vocab_attr(v, 3), SIFT_TOKEN_UNUSED);
    return v;
}

START_TEST(test_vocab_extend_adds_special_tokens_eog_and_padding)
{
    sift_vocab *base = abc_gap(), *v = NULL;
    static const char *const texts[] = {"<|endoftext|>", "<|fim|>"};
    static const int32_t ids[] = {6, 3}, eog[] = {6};
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = texts;
    x.special_ids = ids;
    x.n_special = 2;
    x.eog_ids = eog;
    x.n_eog = 1;
    x.n_vocab = 10;
    sift_error err;
    ck_assert_int_eq(sift_vocab_extend(&v, base, &x, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 10);
    const char *b;
    size_t n;
    static const char *const want[] = {"a", "b", "c", "<|fim|>", "d", "", "<|endoftext|>",
                                       "",  "",  ""};
    static const uint32_t attr[] = {0,
                                    0,
                                    0,
                                    SIFT_TOKEN_SPECIAL,
                                    0,
                                    SIFT_TOKEN_UNUSED,
                                    SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG,
                                    SIFT_TOKEN_UNUSED,
                                    SIFT_TOKEN_UNUSED,
                                    SIFT_TOKEN_UNUSED};
    for (int32_t i = 0; i < 10; i++) {
        ck_assert_int_eq(sift_vocab_piece(v, i, &b, &n, &err), SIFT_OK);
        ck_assert_uint_eq(n, strlen(want[i]));
        ck_assert(memcmp(b, want[i], n) == 0);
        ck_assert_uint_eq(sift_vocab_attr(v, i), attr[i]);
    }
    /* The base is unchanged. */
    ck_assert_int_eq(sift_vocab_size(base), 5);
    ck_assert_uint_eq(sift_vocab_attr(base, 3), SIFT_TOKEN_UNUSED);
    sift_vocab_free(v);
    /* NULL extra: a copy. */
    ck_assert_int_eq(sift_vocab_extend(&v, base, NULL, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 5);
    sift_vocab_free(v);
    sift_vocab_free(base);
}
END_TEST

START_TEST(test_vocab_extend_refuses_bad_ids_and_leaves_out_null)
{
    sift_vocab *base = abc_gap(), *v = (sift_vocab *)1;
    sift_error err;
    const char *texts[1] = {"<s>"};
    int32_t ids[2] = {1, 1};
    int32_t eog[1] = {0};
    sift_vocab_extra x;
    struct {
        int32_t id, n_vocab, eog;
        size_t n_special;
        const char *text;
        sift_status want;
        const char *needle;
    } cases[] = {
        {1, 0, 0, 1, "<s>", SIFT_E_ARG, "id 1 is already a token"},
        {-1, 0, 0, 1, "<s>", SIFT_E_TOKEN, "id -1 out of range"},
        {9, 8, 0, 1, "<s>", SIFT_E_TOKEN, "id 9 out of range [0, 8)"},
        {1 << 24, 0, 0, 1, "<s>", SIFT_E_TOKEN, "out of range"},
        {7, 0, 0, 1, "", SIFT_E_ARG, "0 bytes long"},
        {7, 4, 0, 1, "<s>", SIFT_E_ARG, "n_vocab 4 is smaller than the vocabulary's 5 tokens"},
        {7, -1, 0, 1, "<s>", SIFT_E_ARG, "n_vocab -1 outside"},
        {7, (1 << 24) + 1, 0, 1, "<s>", SIFT_E_LIMIT, "n_vocab 16777217 outside"},
        {7, 0, 8, 1, "<s>", SIFT_E_TOKEN, "end-of-generation id 8 out of range [0, 8)"},
        {7, 0, -2, 1, "<s>", SIFT_E_TOKEN, "end-of-generation id -2"},
        {7, 0, 0, 2, "<s>", SIFT_E_ARG, "have the same id 7"},
    };
    for (size_t c = 0; c < N(cases); c++) {
        sift_vocab_extra_init(&x);
        texts[0] = cases[c].text;
        const char *two[2] = {cases[c].text, "<t>"};
        ids[0] = ids[1] = cases[c].id;
        eog[0] = cases[c].eog;
        x.special_texts = cases[c].n_special == 2 ? two : texts;
        x.special_ids = ids;
        x.n_special = cases[c].n_special;
        x.n_vocab = cases[c].n_vocab;
        x.eog_ids = eog;
        x.n_eog = 1;
        v = (sift_vocab *)1;
        ck_assert_int_eq(sift_vocab_extend(&v, base, &x, NULL, &err), cases[c].want);
        ck_assert_ptr_null(v);
        ck_assert_msg(strstr(err.message, cases[c].needle) != NULL, "case %zu: '%s'", c,
                      err.message);
    }
    sift_vocab_extra_init(&x);
    x.n_special = 1;
    ck_assert_int_eq(sift_vocab_extend(&v, base, &x, NULL, &err), SIFT_E_ARG);
    x.n_special = 0;
    x.struct_size = 0;
    ck_assert_int_eq(sift_vocab_extend(&v, base, &x, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_extend(&v, NULL, NULL, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_extend(NULL, base, NULL, NULL, &err), SIFT_E_ARG);
    sift_vocab_free(base);
}
END_TEST

START_TEST(test_vocab_extend_every_allocation_failure_is_nomem_and_leaks_nothing)
{
    sift_vocab *base = abc_gap();
    static const char *const texts[] = {"<e>"};
    static const int32_t ids[] = {5};
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = texts;
    x.special_ids = ids;
    x.n_special = 1;
    x.n_vocab = 8;
    for (long k = 1;; k++) {
        fa f = {0, k, 0, 0};
        sift_allocator a = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
        sift_vocab *v = NULL;
        sift_error err;
        sift_status st = sift_vocab_extend(&v, base, &x, &a, &err);
        if (st == SIFT_OK) {
            ck_assert_int_gt(k, 4);
            ck_assert_int_eq(sift_vocab_size(v), 8);
            sift_vocab_free(v);
            ck_assert_int_eq(f.live, 0);
            break;
        }
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        ck_assert_ptr_null(v);
        ck_assert_int_eq(f.live, 0);
    }
    sift_vocab_free(base);
}
END_TEST

/* A grammar over an extended vocabulary ends only through the EOG token
 * and never allows a padding id. */
START_TEST(test_grammar_completes_through_an_added_eog_and_never_allows_padding)
{
    sift_vocab *base = abc_gap(), *v = NULL;
    static const char *const texts[] = {"<|endoftext|>"};
    static const int32_t ids[] = {6}, eog[] = {6};
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = texts;
    x.special_ids = ids;
    x.n_special = 1;
    x.eog_ids = eog;
    x.n_eog = 1;
    x.n_vocab = 12;
    sift_error err;
    ck_assert_int_eq(sift_vocab_extend(&v, base, &x, NULL, &err), SIFT_OK);
    sift_grammar *g = NULL;
    const char *text = "root ::= \"a\" [bc]*";
    ck_assert_int_eq(sift_grammar_new(&g, text, strlen(text), v, NULL, &err), SIFT_OK);
    int ok = 1;
    ck_assert_int_eq(sift_grammar_accepts_token(g, 6, &ok, &err), SIFT_OK);
    ck_assert_int_eq(ok, 0); /* not complete yet */
    ck_assert_int_eq(sift_grammar_accept_token(g, 0, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accepts_token(g, 6, &ok, &err), SIFT_OK);
    ck_assert_int_eq(ok, 1);
    float row[12];
    for (int i = 0; i < 12; i++)
        row[i] = 1.0f;
    ck_assert_int_eq(sift_grammar_ban(g, row, 12, &err), SIFT_OK);
    for (int i = 0; i < 12; i++) {
        int allowed = i == 1 || i == 2 || i == 6;
        ck_assert_msg(allowed ? row[i] == 1.0f : row[i] == -INFINITY, "token %d", i);
    }
    sift_grammar_free(g);
    sift_vocab_free(v);
    sift_vocab_free(base);
}
END_TEST

/* A config's vocab section goes through sift_config_load_vocab. */
static sift_config *cfg_of(const char *yaml, sift_status want_load)
{
    sift_config *cfg = NULL;
    sift_error err;
    sift_config_params cp;
    sift_config_params_init(&cp);
    cp.base_dir = data_dir();
    sift_status st = sift_config_parse(&cfg, "c.yaml", yaml, strlen(yaml), &cp, &err);
    if (want_load == SIFT_OK)
        ck_assert_msg(st == SIFT_OK, "%s", err.message);
    else
        ck_assert_int_ne(st, SIFT_OK);
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

START_TEST(test_config_vocab_section_names_special_tokens_eog_and_pads_to_vocab_size)
{
    sift_config *cfg =
        cfg_of("vocab_size: 100352\n"
               "vocab:\n"
               "  file: cl100k_base.tiktoken\n"
               "  special: {\"<|endoftext|>\": 100257, \"<|endofprompt|>\": 100276}\n"
               "  eog: [\"<|endoftext|>\", 100276]\n"
               "chain: [greedy]\n",
               SIFT_OK);
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_int_eq(sift_config_load_vocab(cfg, NULL, &v, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 100352);
    const char *b;
    size_t n;
    ck_assert_int_eq(sift_vocab_piece(v, 100257, &b, &n, &err), SIFT_OK);
    ck_assert_uint_eq(n, 13);
    ck_assert(memcmp(b, "<|endoftext|>", 13) == 0);
    ck_assert_uint_eq(sift_vocab_attr(v, 100257), SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    ck_assert_uint_eq(sift_vocab_attr(v, 100276), SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    ck_assert_uint_eq(sift_vocab_attr(v, 100300), SIFT_TOKEN_UNUSED);
    ck_assert_uint_eq(sift_vocab_attr(v, 100256), SIFT_TOKEN_UNUSED);
    sift_vocab_free(v);
    sift_config_free(cfg);

    /* The string form with no vocab_size is the file as it is; no vocab
     * at all gives NULL. */
    cfg = cfg_of("vocab: cl100k_base.tiktoken\nchain: [greedy]\n", SIFT_OK);
    ck_assert_int_eq(sift_config_load_vocab(cfg, NULL, &v, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 100256);
    sift_vocab_free(v);
    sift_config_free(cfg);
    cfg = cfg_of("chain: [greedy]\n", SIFT_OK);
    v = (sift_vocab *)1;
    ck_assert_int_eq(sift_config_load_vocab(cfg, NULL, &v, &err), SIFT_OK);
    ck_assert_ptr_null(v);
    sift_config_free(cfg);

    /* A vocab_size below the file's tokens, a special on a used id. */
    cfg = cfg_of("vocab_size: 1000\nvocab: cl100k_base.tiktoken\nchain: [greedy]\n", SIFT_OK);
    ck_assert_int_eq(sift_config_load_vocab(cfg, NULL, &v, &err), SIFT_E_ARG);
    ck_assert_ptr_null(v);
    ck_assert_ptr_nonnull(strstr(err.message, "c.yaml: vocab_size 1000 is smaller than the 100256 "
                                              "tokens of "));
    ck_assert_str_eq(err.source, "c.yaml");
    sift_config_free(cfg);
}
END_TEST

START_TEST(test_config_vocab_section_errors_name_their_place)
{
    struct {
        const char *yaml;
        const char *text;
    } cases[] = {
        {"vocab: {special: {a: 1}}\nchain: [greedy]\n",
         "c.yaml:1:8: error: vocab: the 'file' key is required"},
        {"vocab: {file: cl100k_base.tiktoken, eog: [1], spezial: 2}\nchain: [greedy]\n",
         "c.yaml:1:47: error: vocab: unknown key 'spezial' (did you mean 'special'?)"},
        {"vocab: {file: cl100k_base.tiktoken, special: [1]}\nchain: [greedy]\n",
         "c.yaml:1:46: error: vocab.special: expected mapping of token text to id, got sequence"},
        {"vocab_size: 100300\nvocab: {file: cl100k_base.tiktoken, special: {\"<e>\": 100300}}\n"
         "chain: [greedy]\n",
         "c.yaml:2:54: error: vocab.special: '<e>': token 100300 is out of range [0, 100300) "
         "(vocab_size)"},
        {"vocab: {file: cl100k_base.tiktoken, special: {\"<e>\": 100300, \"<f>\": 100300}}\n"
         "chain: [greedy]\n",
         "c.yaml:1:69: error: vocab.special: '<f>' has id 100300, as '<e>' has"},
        {"vocab: {file: cl100k_base.tiktoken, eog: [\"<x>\"]}\nchain: [greedy]\n",
         "c.yaml:1:43: error: vocab.eog[0]: '<x>' is not a token of vocab.special (give its id)"},
        {"vocab: {file: cl100k_base.tiktoken, eog: 5}\nchain: [greedy]\n",
         "c.yaml:1:42: error: vocab.eog: expected sequence of token ids, got integer 5"},
    };
    for (size_t c = 0; c < N(cases); c++) {
        sift_config *cfg = cfg_of(cases[c].yaml, SIFT_E_CONFIG_KEY);
        ck_assert_uint_ge(sift_config_n_errors(cfg), 1);
        ck_assert_msg(!strcmp(sift_config_diagnostic(cfg, 0)->text, cases[c].text),
                      "case %zu: '%s'", c, sift_config_diagnostic(cfg, 0)->text);
        sift_config_free(cfg);
    }
}
END_TEST

/* ------------------------------------------------------------------ */

Suite *tu_suite(void)
{
    Suite *s = suite_create("vocab_load");
    struct {
        const char *name;
        const TTest *tests[12];
    } groups[] = {
        {"tiktoken_real",
         {test_sha256_matches_the_fips_examples, test_cl100k_file_has_the_published_sha256,
          test_cl100k_loads_100256_tokens_with_the_right_pieces,
          test_cl100k_from_memory_equals_from_file}},
        {"tiktoken",
         {test_tiktoken_gaps_in_ranks_are_unused_tokens_with_empty_pieces,
          test_tiktoken_unsorted_ranks_give_the_same_vocabulary,
          test_tiktoken_accepts_crlf_and_a_missing_final_newline,
          test_tiktoken_bytes_that_are_not_utf8_are_kept,
          test_tiktoken_errors_name_the_line_and_column,
          test_tiktoken_long_lines_and_empty_files_are_errors,
          test_tiktoken_load_refuses_directories_fifos_and_missing_files,
          test_tiktoken_every_allocation_failure_is_nomem_and_leaks_nothing}},
        {"gguf",
         {test_gguf_gpt2_pieces_are_decoded_through_the_byte_table,
          test_gguf_gpt2_byte_table_covers_all_256_bytes,
          test_gguf_sentencepiece_pieces_and_byte_tokens_are_decoded,
          test_gguf_load_from_a_file_equals_from_memory,
          test_gguf_long_and_duplicate_pieces_are_kept, test_gguf_rejects_null_arguments}},
        {"gguf_corrupt",
         {test_gguf_truncated_at_every_offset_is_an_error_never_a_crash,
          test_gguf_bad_magic_version_1_and_big_endian_are_rejected,
          test_gguf_huge_counts_and_lengths_allocate_nothing_large,
          test_gguf_wrong_types_name_the_key,
          test_gguf_missing_or_inconsistent_tokenizer_keys_are_errors,
          test_gguf_invalid_byte_tokens_and_bpe_text_name_the_token,
          test_gguf_every_allocation_failure_is_nomem_and_leaks_nothing,
          test_random_corruptions_of_both_formats_never_crash}},
        {"gguf_strings",
         {test_gguf_keys_must_be_printable_ascii_in_full,
          test_gguf_messages_escape_the_bytes_of_the_file,
          test_gguf_negative_token_ids_other_than_minus_one_are_errors}},
        {"gguf_merges",
         {test_gguf_bpe_merges_whose_pieces_are_not_tokens_name_the_merge,
          test_gguf_bpe_malformed_merge_strings_are_errors_that_show_them,
          test_gguf_bpe_merges_and_pre_of_the_wrong_type_name_the_key,
          test_gguf_bpe_huge_merge_counts_and_lengths_allocate_nothing_large,
          test_gguf_bpe_without_a_known_pre_or_a_byte_token_loads_without_an_encoder,
          test_gguf_merges_of_a_sentencepiece_file_are_not_read}},
        {"files", {test_every_loader_refuses_fifos_directories_and_devices_without_blocking}},
        {"extend",
         {test_vocab_extend_adds_special_tokens_eog_and_padding,
          test_vocab_extend_refuses_bad_ids_and_leaves_out_null,
          test_vocab_extend_every_allocation_failure_is_nomem_and_leaks_nothing,
          test_grammar_completes_through_an_added_eog_and_never_allows_padding,
          test_config_vocab_section_names_special_tokens_eog_and_pads_to_vocab_size,
          test_config_vocab_section_errors_name_their_place}},
    };
    for (size_t g = 0; g < N(groups); g++) {
        TCase *tc = tcase_create(groups[g].name);
        /* every truncation offset and random corruptions: property runs */
        if (strcmp(groups[g].name, "gguf_corrupt") == 0)
            tcase_set_timeout(tc, 30);
        for (size_t i = 0; i < N(groups[g].tests) && groups[g].tests[i]; i++)
            tcase_add_test(tc, groups[g].tests[i]);
        suite_add_tcase(s, tc);
    }
    return s;
}

/*
 * check_bpe.c - the BPE encoder (vocab/bpe.c): bitwise agreement with
 * tiktoken on the committed vectors (tests/data/bpe-vectors-*.txt; the
 * cl100k ones always run, the o200k ones when SIFT_O200K names
 * o200k_base.tiktoken, else they say SKIP), the merge loop against a
 * naive tiktoken-style merge on random vocabularies and long pre-tokens,
 * round trips on random bytes, special tokens, custom patterns, the
 * limits, bad arguments, the allocation-failure loop, a scratch that stops
 * allocating, and threads racing to build the encoder.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sift_internal.h"
#include "vocab/vocab.h"
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
    b[n] = '\0';
    *len = (size_t)n;
    return b;
}

/* Loads a tiktoken file and adds its special tokens, as a server would. */
static sift_vocab *load_with_specials(const char *path, const char *const *texts,
                                      const int32_t *ids, size_t n)
{
    sift_vocab *base, *v;
    sift_error err;
    ck_assert_msg(sift_vocab_load_tiktoken(&base, path, NULL, &err) == SIFT_OK, "%s", err.message);
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = texts;
    x.special_ids = ids;
    x.n_special = n;
    ck_assert_msg(sift_vocab_extend(&v, base, &x, NULL, &err) == SIFT_OK, "%s", err.message);
    sift_vocab_free(base);
    return v;
}

static sift_vocab *cl100k(void)
{
    static const char *const texts[] = {"<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>",
                                        "<|fim_suffix|>", "<|endofprompt|>"};
    static const int32_t ids[] = {100257, 100258, 100259, 100260, 100276};
    char path[4096];
    snprintf(path, sizeof path, "%s/cl100k_base.tiktoken", data_dir());
    return load_with_specials(path, texts, ids, N(ids));
}

/* Concatenates the pieces of ids into *out (malloc'd). */
static size_t decode(const sift_vocab *v, const int32_t *ids, size_t n, char **out)
{
    size_t cap = 64, len = 0;
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t pl;
        ck_assert_int_eq(sift_vocab_piece(v, ids[i], &p, &pl, NULL), SIFT_OK);
        while (len + pl + 1 > cap) {
            cap *= 2;
            b = realloc(b, cap);
            ck_assert_ptr_nonnull(b);
        }
        memcpy(b + len, p, pl);
        len += pl;
    }
    *out = b;
    return len;
}

/* Encodes through the two-call pattern; the ids are malloc'd. */
static int32_t *encode(const sift_vocab *v, const void *text, size_t len, uint32_t flags, size_t *n,
                       sift_encode_scratch *s)
{
    sift_error err;
    sift_status st = sift_vocab_encode(v, text, len, flags, NULL, 0, n, s, &err);
    ck_assert_msg(st == SIFT_OK || st == SIFT_E_LIMIT, "%s", err.message);
    int32_t *ids = malloc((*n ? *n : 1) * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    size_t n2;
    ck_assert_msg(sift_vocab_encode(v, text, len, flags, ids, *n, &n2, s, &err) == SIFT_OK, "%s",
                  err.message);
    ck_assert_uint_eq(n2, *n);
    return ids;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Runs every vector of `file` against `v`: returns the number checked
 * (every one must match; the first mismatch fails with its line). */
static size_t run_vectors(const sift_vocab *v, const char *file)
{
    size_t len;
    char *data = read_all(file, &len);
    sift_encode_scratch *s;
    ck_assert_int_eq(sift_encode_scratch_new(&s, NULL, NULL), SIFT_OK);
    size_t checked = 0, line_no = 0;
    unsigned char *text = malloc(len + 1);
    int32_t *want = malloc((len + 1) * sizeof *want);
    ck_assert(text && want);
    for (char *line = data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        line_no++;
        if (line[0] != '#' && line[0] != '\0') {
            ck_assert_msg((line[0] == 'o' || line[0] == 's') && line[1] == '\t', "%s:%zu: bad mode",
                          file, line_no);
            uint32_t flags = line[0] == 's' ? SIFT_ENCODE_SPECIAL : 0;
            char *h = line + 2;
            size_t tl = 0;
            while (*h && *h != '\t') {
                int hi = hexval(h[0]), lo = hexval(h[1]);
                ck_assert_msg(hi >= 0 && lo >= 0, "%s:%zu: bad hex", file, line_no);
                text[tl++] = (unsigned char)(hi << 4 | lo);
                h += 2;
            }
            ck_assert_msg(*h == '\t', "%s:%zu: no ids", file, line_no);
            size_t nw = 0;
            for (char *q = h + 1; *q;) {
                char *end;
                long id = strtol(q, &end, 10);
                ck_assert_msg(end != q, "%s:%zu: bad id", file, line_no);
                want[nw++] = (int32_t)id;
                q = *end == ' ' ? end + 1 : end;
            }
            size_t n;
            int32_t *got = encode(v, text, tl, flags, &n, s);
            int same = n == nw && (n == 0 || memcmp(got, want, n * sizeof *got) == 0);
            if (!same) {
                char g[256] = "", w[256] = "";
                for (size_t i = 0; i < n && strlen(g) < 200; i++)
                    snprintf(g + strlen(g), sizeof g - strlen(g), " %d", (int)got[i]);
                for (size_t i = 0; i < nw && strlen(w) < 200; i++)
                    snprintf(w + strlen(w), sizeof w - strlen(w), " %d", (int)want[i]);
                ck_abort_msg("%s:%zu: got%s, want%s", file, line_no, g, w);
            }
            free(got);
            checked++;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    free(want);
    free(data);
    sift_encode_scratch_free(s);
    return checked;
}

/* A small vocabulary: the 256 bytes and the given merged pieces, ids in
 * that order (so a piece's rank is its position). */
static sift_vocab *small_vocab(const char *const *pieces, size_t n, const sift_allocator *al)
{
    size_t total = 256 + n;
    const char **p = malloc(total * sizeof *p);
    size_t *l = malloc(total * sizeof *l);
    static char bytes[256];
    for (int b = 0; b < 256; b++) {
        bytes[b] = (char)b;
        p[b] = bytes + b;
        l[b] = 1;
    }
    for (size_t i = 0; i < n; i++) {
        p[256 + i] = pieces[i];
        l[256 + i] = strlen(pieces[i]);
    }
    sift_vocab *v;
    sift_error err;
    ck_assert_msg(sift_vocab_new(&v, (int32_t)total, p, l, al, &err) == SIFT_OK, "%s", err.message);
    free(p);
    free(l);
    return v;
}

/* ------------------------------------------------------------------ */
/* The reference vectors                                               */
/* ------------------------------------------------------------------ */

START_TEST(test_cl100k_vectors_match_tiktoken_bitwise)
{
    sift_vocab *v = cl100k();
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_CL100K);
    char file[4096];
    snprintf(file, sizeof file, "%s/bpe-vectors-cl100k.txt", data_dir());
    size_t n = run_vectors(v, file);
    ck_assert_uint_ge(n, 600);
    fprintf(stderr, "check_bpe: %zu cl100k vectors match tiktoken\n", n);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_o200k_vectors_match_tiktoken_bitwise_when_the_file_is_given)
{
    const char *path = getenv("SIFT_O200K");
    FILE *f = path && *path ? fopen(path, "rb") : NULL;
    if (!f) {
        fprintf(stderr, "check_bpe: SKIP o200k vectors: set SIFT_O200K to the path of "
                        "o200k_base.tiktoken (see tests/data/README.md)\n");
        return;
    }
    fclose(f);
    static const char *const texts[] = {"<|endoftext|>", "<|endofprompt|>"};
    static const int32_t ids[] = {199999, 200018};
    sift_vocab *v = load_with_specials(path, texts, ids, N(ids));
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_O200K);
    char file[4096];
    snprintf(file, sizeof file, "%s/bpe-vectors-o200k.txt", data_dir());
    size_t n = run_vectors(v, file);
    ck_assert_uint_ge(n, 600);
    fprintf(stderr, "check_bpe: %zu o200k vectors match tiktoken\n", n);
    sift_vocab_free(v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The merge loop against a naive merge                                */
/* ------------------------------------------------------------------ */

/* tiktoken's merge as it is written there: rescan every pair after each
 * merge (quadratic, obviously right). rank(x) = id of the piece x. */
static size_t naive_bpe(const sift_vocab *v, const char *const *pieces, size_t np,
                        const unsigned char *t, size_t m, int32_t *out)
{
    for (size_t k = 0; k < np; k++) {
        if (strlen(pieces[k]) == m && memcmp(pieces[k], t, m) == 0) {
            out[0] = 256 + (int32_t)k; /* tiktoken's shortcut: a token */
            return 1;
        }
    }
    size_t *st = malloc((m + 1) * sizeof *st), nparts = m;
    for (size_t i = 0; i <= m; i++)
        st[i] = i;
    for (;;) {
        long best = -1;
        int32_t best_id = 0;
        for (size_t i = 0; i + 1 < nparts; i++) {
            size_t a = st[i], b = st[i + 2];
            for (size_t k = 0; k < np; k++) {
                if (strlen(pieces[k]) == b - a && memcmp(pieces[k], t + a, b - a) == 0) {
                    int32_t id = 256 + (int32_t)k;
                    if (best < 0 || id < best_id) {
                        best = (long)i;
                        best_id = id;
                    }
                    break;
                }
            }
        }
        if (best < 0)
            break;
        memmove(st + best + 1, st + best + 2, (nparts - (size_t)best - 1) * sizeof *st);
        nparts--;
    }
    for (size_t i = 0; i < nparts; i++) {
        size_t a = st[i], b = st[i + 1];
        out[i] = b - a == 1 ? (int32_t)t[a] : -1;
        for (size_t k = 0; k < np && out[i] < 0; k++)
            if (strlen(pieces[k]) == b - a && memcmp(pieces[k], t + a, b - a) == 0)
                out[i] = 256 + (int32_t)k;
    }
    (void)v;
    free(st);
    return nparts;
}

START_TEST(test_heap_merge_equals_the_naive_merge_on_random_vocabularies)
{
    tu_rng r = {0x5eed + (uint64_t)_i};
    /* A random vocabulary over "abc": the pieces are built by merging
     * two earlier ones, as a BPE trainer does, so ranks are consistent. */
    char store[40][64];
    const char *pieces[40];
    size_t np = 0;
    const char *alpha[3] = {"a", "b", "c"};
    while (np < 40) {
        const char *x = np && tu_range(&r, 0, 2) ? pieces[tu_range(&r, 0, (int64_t)np - 1)]
                                                 : alpha[tu_range(&r, 0, 2)];
        const char *y = np && tu_range(&r, 0, 2) ? pieces[tu_range(&r, 0, (int64_t)np - 1)]
                                                 : alpha[tu_range(&r, 0, 2)];
        if (strlen(x) + strlen(y) >= sizeof store[0])
            continue;
        size_t lx = strlen(x), ly = strlen(y);
        memcpy(store[np], x, lx);
        memcpy(store[np] + lx, y, ly + 1);
        int dup = 0;
        for (size_t k = 0; k < np; k++)
            dup |= strcmp(store[k], store[np]) == 0;
        if (dup)
            continue;
        pieces[np] = store[np];
        np++;
    }
    sift_vocab *v = small_vocab(pieces, np, NULL);
    sift_error err;
    /* the whole text is one pre-token */
    ck_assert_msg(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_PATTERN, "(?s).+", 6, &err) == SIFT_OK,
                  "%s", err.message);
    for (int it = 0; it < 40; it++) {
        size_t m = (size_t)tu_range(&r, 1, it < 30 ? 40 : 600);
        unsigned char *t = malloc(m);
        for (size_t i = 0; i < m; i++)
            t[i] = (unsigned char)("abc"[tu_range(&r, 0, 2)]);
        int32_t *want = malloc(m * sizeof *want);
        size_t nw = naive_bpe(v, pieces, np, t, m, want);
        size_t n;
        int32_t *got = encode(v, t, m, 0, &n, NULL);
        ck_assert_uint_eq(n, nw);
        for (size_t i = 0; i < n; i++)
            ck_assert_int_eq(got[i], want[i]);
        free(t);
        free(want);
        free(got);
    }
    sift_vocab_free(v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Round trips                                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_decoding_the_ids_of_random_bytes_gives_the_bytes_back)
{
    sift_vocab *v = cl100k();
    sift_encode_scratch *s;
    ck_assert_int_eq(sift_encode_scratch_new(&s, NULL, NULL), SIFT_OK);
    tu_rng r = {0xb9e};
    static const char *const frags[] = {"<|endoftext|>",
                                        "<|",
                                        " ",
                                        "\n",
                                        "\xe4\xb8\xad",
                                        "\xf0\x9f\x98\x80",
                                        "'s",
                                        "a",
                                        "7",
                                        "\xc3",
                                        "\x80",
                                        "\xed\xa0\x80",
                                        "\xf4\x90\x80\x80",
                                        "\xc0\xaf"};
    for (int it = 0; it < 400; it++) {
        size_t m = (size_t)tu_range(&r, 0, 300);
        unsigned char *t = malloc(m + 16);
        size_t tl = 0;
        while (tl < m) {
            if (tu_range(&r, 0, 1)) {
                t[tl++] = (unsigned char)tu_range(&r, 0, 255);
            } else {
                const char *f = frags[tu_range(&r, 0, (int64_t)N(frags) - 1)];
                memcpy(t + tl, f, strlen(f));
                tl += strlen(f);
            }
        }
        for (uint32_t flags = 0; flags <= SIFT_ENCODE_SPECIAL; flags++) {
            size_t n;
            int32_t *ids = encode(v, t, tl, flags, &n, it % 2 ? s : NULL);
            char *back;
            size_t bl = decode(v, ids, n, &back);
            ck_assert_uint_eq(bl, tl);
            ck_assert(memcmp(back, t, tl) == 0);
            for (size_t i = 0; i < n; i++) {
                uint32_t a = sift_vocab_attr(v, ids[i]);
                ck_assert(!(a & SIFT_TOKEN_UNUSED));
                ck_assert(flags || !(a & SIFT_TOKEN_SPECIAL));
            }
            free(back);
            free(ids);
        }
        free(t);
    }
    sift_encode_scratch_free(s);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_special_texts_become_ids_only_with_the_flag)
{
    sift_vocab *v = cl100k();
    const char *t = "a<|endoftext|>b<|endofprompt|>";
    size_t n;
    int32_t *ids = encode(v, t, strlen(t), SIFT_ENCODE_SPECIAL, &n, NULL);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(ids[1], 100257);
    ck_assert_int_eq(ids[3], 100276);
    free(ids);
    ids = encode(v, t, strlen(t), 0, &n, NULL);
    ck_assert_uint_gt(n, 4);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_lt(ids[i], 100256);
    free(ids);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_the_longest_special_text_wins_at_the_leftmost_place)
{
    static const char *const pieces[] = {"ab"};
    sift_vocab *base = small_vocab(pieces, N(pieces), NULL);
    sift_error err;
    ck_assert_int_eq(sift_vocab_set_pretokenizer(base, SIFT_PRETOK_CL100K, NULL, 0, &err), SIFT_OK);
    static const char *const texts[] = {"<x>", "<x>>", "<y"};
    static const int32_t sids[] = {300, 301, 302};
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = texts;
    x.special_ids = sids;
    x.n_special = 3;
    sift_vocab *v;
    ck_assert_int_eq(sift_vocab_extend(&v, base, &x, NULL, &err), SIFT_OK);
    sift_vocab_free(base);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_CL100K);
    const char *t = "<<x>>><x><y";
    size_t n;
    int32_t *ids = encode(v, t, strlen(t), SIFT_ENCODE_SPECIAL, &n, NULL);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(ids[0], '<');
    ck_assert_int_eq(ids[1], 301);
    ck_assert_int_eq(ids[2], '>');
    ck_assert_int_eq(ids[3], 300);
    ck_assert_int_eq(ids[4], 302);
    free(ids);
    sift_vocab_free(v);
}
END_TEST

/* The byte-and-special vocabulary of the cut tests: the 256 bytes (no
 * merges, so ordinary text encodes to its bytes) and `n` special texts
 * with ids 256 + i. */
static sift_vocab *bytes_and_specials(const char *const *texts, size_t n)
{
    sift_vocab *base = small_vocab(NULL, 0, NULL), *v;
    sift_error err;
    ck_assert_int_eq(sift_vocab_set_pretokenizer(base, SIFT_PRETOK_CL100K, NULL, 0, &err), SIFT_OK);
    int32_t *sids = malloc(n * sizeof *sids);
    ck_assert_ptr_nonnull(sids);
    for (size_t i = 0; i < n; i++)
        sids[i] = (int32_t)(256 + i);
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = texts;
    x.special_ids = sids;
    x.n_special = n;
    ck_assert_int_eq(sift_vocab_extend(&v, base, &x, NULL, &err), SIFT_OK);
    sift_vocab_free(base);
    free(sids);
    return v;
}

START_TEST(test_special_texts_are_cut_as_the_naive_leftmost_longest_search_cuts)
{
    /* specials that are prefixes and suffixes of each other, and one
     * longer than a block of the automaton's runs, over texts of a few
     * blocks: the ids must equal the naive search's, which tries every
     * special at every position */
    enum { NS = 9, LONG = 5000, LEN = 13000 };
    static char long_text[LONG + 2];
    memset(long_text, 'a', LONG);
    long_text[LONG] = 'b';
    const char *const texts[NS] = {"a", "ab", "aab", "ba", "bab", "abba", "bcb", "ccc", long_text};
    sift_vocab *v = bytes_and_specials(texts, NS);
    tu_rng r = {12345};
    char *t = malloc(LEN + 1);
    int32_t *want = malloc(LEN * sizeof *want);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(want);
    for (int round = 0; round < 40; round++) {
        size_t len = (size_t)tu_range(&r, 1, LEN);
        for (size_t i = 0; i < len; i++)
            t[i] = "aabbc"[tu_range(&r, 0, round % 2 ? 4 : 1)];
        if (round % 4 == 3 && len > LONG + 10) { /* the long one, at a random place */
            size_t at = (size_t)tu_range(&r, 0, (int64_t)(len - LONG - 1));
            memcpy(t + at, long_text, LONG + 1);
        }
        size_t nw = 0;
        for (size_t pos = 0; pos < len;) {
            size_t best = 0;
            int32_t id = 0;
            for (size_t k = 0; k < NS; k++) {
                size_t l = strlen(texts[k]);
                if (l > best && l <= len - pos && memcmp(t + pos, texts[k], l) == 0) {
                    best = l;
                    id = (int32_t)(256 + k);
                }
            }
            want[nw++] = best ? id : (unsigned char)t[pos];
            pos += best ? best : 1;
        }
        size_t n;
        int32_t *got = encode(v, t, len, SIFT_ENCODE_SPECIAL, &n, NULL);
        ck_assert_uint_eq(n, nw);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(got[i] == want[i], "round %d, id %zu: %d, want %d", round, i, (int)got[i],
                          (int)want[i]);
        free(got);
    }
    free(t);
    free(want);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_a_long_special_text_costs_steps_linear_in_the_text)
{
    /* a text that matches all but the last byte of a 10,000-byte
     * special at every position: trying the special at each position
     * cost 10,000 steps per byte; the automaton makes a few per byte */
    enum { LONG = 10000, LEN = 1 << 20 };
    char *special = malloc(LONG + 2), *t = malloc(LEN);
    ck_assert_ptr_nonnull(special);
    ck_assert_ptr_nonnull(t);
    memset(special, 'a', LONG);
    special[LONG] = 'b';
    special[LONG + 1] = '\0';
    memset(t, 'a', LEN);
    const char *const texts[] = {special};
    sift_vocab *v = bytes_and_specials(texts, 1);
    sift_encode_scratch *s;
    sift_error err;
    ck_assert_int_eq(sift_encode_scratch_new(&s, NULL, &err), SIFT_OK);
    size_t n;
    ck_assert_int_eq(sift_vocab_encode(v, t, LEN, SIFT_ENCODE_SPECIAL, NULL, 0, &n, s, &err),
                     SIFT_E_LIMIT);
    ck_assert_uint_eq(n, LEN);
    uint64_t steps = sift__encode_scratch_cut_steps(s);
    ck_assert_uint_ge(steps, LEN);
    ck_assert_uint_le(steps, 3 * (uint64_t)LEN);
    sift_encode_scratch_free(s);
    sift_vocab_free(v);
    free(special);
    free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Pre-tokenizers                                                      */
/* ------------------------------------------------------------------ */

START_TEST(test_default_pretokenizer_follows_the_tiktoken_file_size)
{
    sift_vocab *v = cl100k();
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_CL100K);
    sift_vocab_free(v);
    const char *small = "YQ== 0\nYg== 1\n";
    sift_error err;
    ck_assert_int_eq(sift_vocab_from_tiktoken(&v, small, strlen(small), NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_NONE);
    size_t n = 7;
    ck_assert_int_eq(sift_vocab_encode(v, "a", 1, 0, NULL, 0, &n, NULL, &err), SIFT_E_STATE);
    ck_assert_uint_eq(n, 0);
    ck_assert(strstr(err.message, "sift_vocab_set_pretokenizer") != NULL);
    /* without all 256 bytes there is no byte-level encoder */
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_CL100K, NULL, 0, &err), SIFT_E_ARG);
    ck_assert(strstr(err.message, "0x00") != NULL);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_NONE);
    ck_assert_int_eq(sift_vocab_pretokenizer(NULL), SIFT_PRETOK_NONE);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_custom_pattern_keeps_the_text_no_match_covers)
{
    static const char *const pieces[] = {"ab", "abab"};
    sift_vocab *v = small_vocab(pieces, N(pieces), NULL);
    sift_error err;
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_PATTERN, "b", 1, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_PATTERN);
    /* matches are the b's; "a" before each is a gap pre-token */
    size_t n;
    int32_t *ids = encode(v, "ababx", 5, 0, &n, NULL);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(ids[0], 'a');
    ck_assert_int_eq(ids[1], 'b');
    ck_assert_int_eq(ids[4], 'x');
    free(ids);
    /* a pattern that can match empty: only non-empty matches count */
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_PATTERN, "(ab)*", 5, &err),
                     SIFT_OK);
    ids = encode(v, "ababxab", 7, 0, &n, NULL);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ids[0], 257);
    ck_assert_int_eq(ids[1], 'x');
    ck_assert_int_eq(ids[2], 256);
    free(ids);
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_NONE, NULL, 0, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_NONE);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_bad_patterns_and_kinds_are_errors_that_keep_the_old_pretokenizer)
{
    sift_vocab *v = small_vocab(NULL, 0, NULL);
    sift_error err;
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_O200K, NULL, 0, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_PATTERN, "a(b", 3, &err),
                     SIFT_E_PATTERN_SYNTAX);
    ck_assert_int_eq(err.offset, 3);
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_PATTERN, NULL, 0, &err),
                     SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_CL100K, "a", 1, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, (sift_pretokenizer)9, NULL, 0, &err),
                     SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_set_pretokenizer(NULL, SIFT_PRETOK_CL100K, NULL, 0, &err),
                     SIFT_E_ARG);
    char *big = malloc((64 << 10) + 1);
    memset(big, 'a', (64 << 10) + 1);
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_PATTERN, big, (64 << 10) + 1, &err),
                     SIFT_E_LIMIT);
    free(big);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_O200K);
    size_t n;
    int32_t *ids = encode(v, "Hello", 5, 0, &n, NULL);
    ck_assert_uint_eq(n, 5);
    free(ids);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_a_custom_pattern_over_its_match_limit_is_a_pattern_limit_error)
{
    sift_vocab *v = small_vocab(NULL, 0, NULL);
    sift_error err;
    const char *pat = "(a+)+\\d";
    ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_PATTERN, pat, strlen(pat), &err),
                     SIFT_OK);
    char t[64];
    memset(t, 'a', sizeof t);
    size_t n = 9;
    int32_t ids[64];
    ck_assert_int_eq(sift_vocab_encode(v, t, sizeof t, 0, ids, 64, &n, NULL, &err),
                     SIFT_E_PATTERN_LIMIT);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(err.offset, 0);
    sift_vocab_free(v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Limits and arguments                                                */
/* ------------------------------------------------------------------ */

START_TEST(test_a_small_cap_gives_the_count_and_the_first_ids)
{
    sift_vocab *v = cl100k();
    const char *t = "The quick brown fox jumps over the lazy dog.";
    size_t n;
    int32_t *all = encode(v, t, strlen(t), 0, &n, NULL);
    ck_assert_uint_eq(n, 10);
    int32_t ids[4] = {-1, -1, -1, -1};
    size_t m;
    sift_error err;
    ck_assert_int_eq(sift_vocab_encode(v, t, strlen(t), 0, ids, 3, &m, NULL, &err), SIFT_E_LIMIT);
    ck_assert_uint_eq(m, 10);
    ck_assert_int_eq(ids[0], all[0]);
    ck_assert_int_eq(ids[2], all[2]);
    ck_assert_int_eq(ids[3], -1);
    ck_assert(strstr(err.message, "10 tokens") != NULL);
    ck_assert_int_eq(sift_vocab_encode(v, "", 0, 0, NULL, 0, &m, NULL, &err), SIFT_OK);
    ck_assert_uint_eq(m, 0);
    ck_assert_int_eq(sift_vocab_encode(v, NULL, 0, 0, NULL, 0, &m, NULL, &err), SIFT_OK);
    free(all);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_bad_arguments_are_arg_errors_with_no_ids)
{
    sift_vocab *v = cl100k();
    int32_t ids[8];
    size_t n = 5;
    sift_error err;
    ck_assert_int_eq(sift_vocab_encode(NULL, "a", 1, 0, ids, 8, &n, NULL, &err), SIFT_E_ARG);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(sift_vocab_encode(v, "a", 1, 0, ids, 8, NULL, NULL, &err), SIFT_E_ARG);
    n = 5;
    ck_assert_int_eq(sift_vocab_encode(v, NULL, 1, 0, ids, 8, &n, NULL, &err), SIFT_E_ARG);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(sift_vocab_encode(v, "a", 1, 0, NULL, 8, &n, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_encode(v, "a", 1, 2, ids, 8, &n, NULL, &err), SIFT_E_ARG);
    ck_assert(strstr(err.message, "0x2") != NULL);
    ck_assert_int_eq(
        sift_vocab_encode(v, "a", SIFT_ENCODE_MAX_BYTES + 1, 0, ids, 8, &n, NULL, &err),
        SIFT_E_LIMIT);
    ck_assert_int_eq(sift_encode_scratch_new(NULL, NULL, &err), SIFT_E_ARG);
    sift_allocator bad = {0, NULL, NULL, NULL, NULL};
    sift_encode_scratch *s = (sift_encode_scratch *)1;
    ck_assert_int_eq(sift_encode_scratch_new(&s, &bad, &err), SIFT_E_ARG);
    ck_assert_ptr_null(s);
    sift_encode_scratch_free(NULL);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_a_long_pretoken_is_merged_in_bounded_work)
{
    /* One pre-token of 1 MiB of letters: a quadratic merge would not end
     * within the test's timeout; the heap merge does it in O(m log m). */
    sift_vocab *v = cl100k();
    size_t m = (size_t)1 << 20;
    char *t = malloc(m);
    for (size_t i = 0; i < m; i++)
        t[i] = "abcdefghij"[(i * 7 + i / 3) % 10];
    size_t n;
    int32_t *ids = encode(v, t, m, 0, &n, NULL);
    ck_assert_uint_gt(n, m / 16);
    char *back;
    ck_assert_uint_eq(decode(v, ids, n, &back), m);
    ck_assert(memcmp(back, t, m) == 0);
    free(back);
    free(ids);
    free(t);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_long_runs_of_each_character_class_encode_and_round_trip)
{
    /* Each run is one pre-token or many; all go through the pattern
     * (lookahead and backtracking over the whole run) and the merge. */
    static const char *const units[] = {
        " ",         "\n", " \n", "\t ", "7", "!", "!?", "\xe4\xb8\xad", "\xf0\x9f\x98\x80",
        "e\xcc\x81", "A",  "aB"};
    sift_vocab *v = cl100k();
    sift_encode_scratch *s;
    ck_assert_int_eq(sift_encode_scratch_new(&s, NULL, NULL), SIFT_OK);
    size_t m = (size_t)1 << 18;
    char *t = malloc(m + 8);
    for (size_t u = 0; u < N(units); u++) {
        size_t ul = strlen(units[u]), tl = 0;
        while (tl + ul <= m) {
            memcpy(t + tl, units[u], ul);
            tl += ul;
        }
        t[tl++] = 'x';
        size_t n;
        int32_t *ids = encode(v, t, tl, 0, &n, s);
        char *back;
        ck_assert_uint_eq(decode(v, ids, n, &back), tl);
        ck_assert_msg(memcmp(back, t, tl) == 0, "unit %zu", u);
        free(back);
        free(ids);
    }
    free(t);
    sift_encode_scratch_free(s);
    sift_vocab_free(v);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Allocation                                                          */
/* ------------------------------------------------------------------ */

typedef struct fa {
    long calls, fail_at, live;
} fa;

static void *fa_alloc(void *user, size_t size)
{
    fa *f = user;
    f->calls++;
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

START_TEST(test_failing_the_nth_allocation_is_clean_for_every_n)
{
    static const char *const pieces[] = {"ab", "abc", "  ", "<|", "|>"};
    const char *text = "abcab  c<|s|>\xff\xfe abc\xe4\xb8";
    int done = 0;
    for (long k = 1; !done && k < 10000; k++) {
        fa f = {0, k, 0};
        sift_allocator al = {sizeof al, fa_alloc, fa_free, &f, NULL};
        sift_vocab *base = small_vocab(pieces, N(pieces), NULL);
        sift_vocab *v = NULL;
        sift_error err;
        static const char *const texts[] = {"<|s|>"};
        static const int32_t sids[] = {400};
        sift_vocab_extra x;
        sift_vocab_extra_init(&x);
        x.special_texts = texts;
        x.special_ids = sids;
        x.n_special = 1;
        sift_status st = sift_vocab_extend(&v, base, &x, &al, &err);
        sift_vocab_free(base);
        sift_encode_scratch *s = NULL;
        if (st == SIFT_OK)
            st = sift_vocab_set_pretokenizer(v, SIFT_PRETOK_CL100K, NULL, 0, &err);
        if (st == SIFT_OK)
            st = sift_encode_scratch_new(&s, &al, &err);
        int32_t ids[64];
        size_t n = 0;
        if (st == SIFT_OK)
            st =
                sift_vocab_encode(v, text, strlen(text), SIFT_ENCODE_SPECIAL, ids, 64, &n, s, &err);
        if (st == SIFT_OK) /* the lazy build and a scratch-less call */
            st = sift_vocab_set_attr(v, 'z', SIFT_TOKEN_EOG, &err);
        if (st == SIFT_OK)
            st = sift_vocab_encode(v, text, strlen(text), 0, ids, 64, &n, NULL, &err);
        if (st == SIFT_OK) {
            done = 1;
            ck_assert_uint_gt(n, 5);
        } else {
            ck_assert_int_eq(st, SIFT_E_NOMEM);
            ck_assert_uint_eq(n, 0);
        }
        sift_encode_scratch_free(s);
        sift_vocab_free(v);
        ck_assert_int_eq(f.live, 0);
    }
    ck_assert(done);
}
END_TEST

/* ------------------------------------------------------------------ */
/* GGUF byte-level BPE: merges and the pre-tokenizer names             */
/* ------------------------------------------------------------------ */

/* A GGUF writer for the tests below (version 3, no tensors). */
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
static void g_bytes(gbuf *g, const void *s, size_t n)
{
    g_u64(g, n);
    g_put(g, s, n);
}
static void g_key(gbuf *g, const char *key, uint32_t type)
{
    g_bytes(g, key, strlen(key));
    g_u32(g, type);
}
static void g_kv_str(gbuf *g, const char *key, const char *val)
{
    g_key(g, key, 8);
    g_bytes(g, val, strlen(val));
}
/* Starts an array of n strings (then g_bytes each). */
static void g_kv_strs(gbuf *g, const char *key, uint64_t n)
{
    g_key(g, key, 9);
    g_u32(g, 8);
    g_u64(g, n);
}
static void g_kv_i32s(gbuf *g, const char *key, const int32_t *v, size_t n)
{
    g_key(g, key, 9);
    g_u32(g, 5);
    g_u64(g, n);
    for (size_t i = 0; i < n; i++)
        g_u32(g, (uint32_t)v[i]);
}

/* GPT-2's byte -> code point table, computed here the usual way (the
 * printable Latin-1 bytes stand for themselves, the other 68 get 256,
 * 257, ... in byte order), independently of the loader. */
static uint32_t gpt2_cp(unsigned b)
{
    uint32_t n = 0;
    for (unsigned x = 0; x < 256; x++) {
        int printable = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
        if (x == b)
            return printable ? x : 256 + n;
        n += !printable;
    }
    return 0;
}

/* Appends bytes s[0..n) in the GPT-2 alphabet to out (UTF-8); returns
 * the new length. Code points are below 0x800: one or two bytes. */
static size_t gpt2_text(char *out, size_t at, const void *s, size_t n)
{
    const unsigned char *p = s;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = gpt2_cp(p[i]);
        if (cp < 0x80) {
            out[at++] = (char)cp;
        } else {
            out[at++] = (char)(0xC0 | (cp >> 6));
            out[at++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return at;
}

/* Writes a GPT-2 string value. */
static void g_gpt2(gbuf *g, const void *s, size_t n)
{
    char *t = malloc(2 * n + 1);
    ck_assert_ptr_nonnull(t);
    size_t k = gpt2_text(t, 0, s, n);
    g_bytes(g, t, k);
    free(t);
}

/* Writes a merge "A B" of byte strings a and b. */
static void g_merge(gbuf *g, const void *a, size_t na, const void *b, size_t nb)
{
    char *t = malloc(2 * (na + nb) + 2);
    ck_assert_ptr_nonnull(t);
    size_t k = gpt2_text(t, 0, a, na);
    t[k++] = ' ';
    k = gpt2_text(t, k, b, nb);
    g_bytes(g, t, k);
    free(t);
}

/* A small gpt2 file: the 256 bytes (ids 0..255), then `extra` pieces
 * (plain bytes; types[i], 0 = normal), then the merges ("A|B" in plain
 * bytes, written "A B" in the GPT-2 alphabet). pre NULL =
 * no tokenizer.ggml.pre key. */
static gbuf small_gguf(const char *pre, const char *const *extra, const int32_t *types,
                       size_t n_extra, const char *const *merges, size_t n_merges)
{
    gbuf g = {0};
    g_put(&g, "GGUF", 4);
    g_u32(&g, 3);
    g_u64(&g, 0);
    g_u64(&g, pre ? 5 : 4);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    if (pre)
        g_kv_str(&g, "tokenizer.ggml.pre", pre);
    g_kv_strs(&g, "tokenizer.ggml.tokens", 256 + n_extra);
    for (unsigned b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        g_gpt2(&g, &c, 1);
    }
    int32_t *ty = calloc(256 + n_extra, sizeof *ty);
    ck_assert_ptr_nonnull(ty);
    for (size_t i = 0; i < 256 + n_extra; i++)
        ty[i] = i >= 256 && types && types[i - 256] ? types[i - 256] : 1;
    for (size_t i = 0; i < n_extra; i++) {
        if (ty[256 + i] == 1)
            g_gpt2(&g, extra[i], strlen(extra[i]));
        else /* control and user-defined tokens are stored as text */
            g_bytes(&g, extra[i], strlen(extra[i]));
    }
    g_kv_i32s(&g, "tokenizer.ggml.token_type", ty, 256 + n_extra);
    free(ty);
    g_kv_strs(&g, "tokenizer.ggml.merges", n_merges);
    for (size_t i = 0; i < n_merges; i++) {
        const char *sp = strchr(merges[i], '|');
        ck_assert_ptr_nonnull(sp);
        g_merge(&g, merges[i], (size_t)(sp - merges[i]), sp + 1, strlen(sp + 1));
    }
    return g;
}

static sift_vocab *gguf_vocab(const gbuf *g, const sift_allocator *al)
{
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_msg(sift_vocab_from_gguf(&v, g->b, g->n, al, &err) == SIFT_OK, "%s", err.message);
    return v;
}

/* Encodes text and compares with the ids given as a -1-terminated list. */
static void ids_are(const sift_vocab *v, const char *text, uint32_t flags, const int32_t *want)
{
    size_t n;
    int32_t *got = encode(v, text, strlen(text), flags, &n, NULL);
    size_t nw = 0;
    while (want[nw] >= 0)
        nw++;
    char gs[200] = "";
    for (size_t i = 0; i < n && strlen(gs) < 180; i++)
        snprintf(gs + strlen(gs), sizeof gs - strlen(gs), " %d", (int)got[i]);
    ck_assert_msg(n == nw && memcmp(got, want, n * sizeof *got) == 0, "'%s': got%s", text, gs);
    free(got);
}

/* cl100k's ranks as a GGUF BPE vocabulary, converted the way converters
 * of tiktoken models do (the Llama 3 conversion): each token of two or
 * more bytes gets the merge of the two parts that BPE over its own bytes
 * reaches with the ranks below its own, in rank order. The BPE here is
 * a naive rescan over a hash of the ranks, written for the test. */
typedef struct rank_map {
    const sift_vocab *v;
    int32_t *slot; /* id + 1; 0 = empty */
    size_t mask;
} rank_map;

static size_t rm_hash(const unsigned char *s, size_t n)
{
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211u;
    return (size_t)(h ^ (h >> 31));
}

static int32_t rm_get(const rank_map *m, const unsigned char *s, size_t n)
{
    for (size_t i = rm_hash(s, n) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->slot[i])
            return -1;
        const char *p;
        size_t pl;
        ck_assert_int_eq(sift_vocab_piece(m->v, m->slot[i] - 1, &p, &pl, NULL), SIFT_OK);
        if (pl == n && memcmp(p, s, n) == 0)
            return m->slot[i] - 1;
    }
}

static gbuf cl100k_gguf(const sift_vocab *t, size_t *n_unsplit)
{
    int32_t n = sift_vocab_size(t); /* 100,256 ranks */
    rank_map m = {t, NULL, 0};
    size_t slots = 1;
    while (slots < 4 * (size_t)n)
        slots *= 2;
    m.slot = calloc(slots, sizeof *m.slot);
    ck_assert_ptr_nonnull(m.slot);
    m.mask = slots - 1;
    for (int32_t id = 0; id < n; id++) {
        const char *p;
        size_t pl;
        ck_assert_int_eq(sift_vocab_piece(t, id, &p, &pl, NULL), SIFT_OK);
        size_t i = rm_hash((const unsigned char *)p, pl) & m.mask;
        while (m.slot[i])
            i = (i + 1) & m.mask;
        m.slot[i] = id + 1;
    }
    gbuf g = {0};
    g_put(&g, "GGUF", 4);
    g_u32(&g, 3);
    g_u64(&g, 0);
    g_u64(&g, 5);
    g_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    g_kv_str(&g, "tokenizer.ggml.pre", "llama-bpe");
    /* cl100k's special tokens at their ids; the gaps are unused. */
    static const char *const sp[] = {"<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>",
                                     "<|fim_suffix|>"};
    int32_t total = 100277;
    int32_t *types = malloc((size_t)total * sizeof *types);
    ck_assert_ptr_nonnull(types);
    g_kv_strs(&g, "tokenizer.ggml.tokens", (uint64_t)total);
    for (int32_t id = 0; id < total; id++) {
        const char *p;
        size_t pl;
        char name[32];
        if (id < n) {
            ck_assert_int_eq(sift_vocab_piece(t, id, &p, &pl, NULL), SIFT_OK);
            g_gpt2(&g, p, pl);
            types[id] = 1;
        } else if (id >= 100257 && id <= 100260) {
            g_bytes(&g, sp[id - 100257], strlen(sp[id - 100257]));
            types[id] = 3;
        } else if (id == 100276) {
            g_bytes(&g, "<|endofprompt|>", 15);
            types[id] = 3;
        } else {
            snprintf(name, sizeof name, "<unused%d>", (int)id);
            g_bytes(&g, name, strlen(name));
            types[id] = 5;
        }
    }
    g_kv_i32s(&g, "tokenizer.ggml.token_type", types, (size_t)total);
    free(types);
    /* The merges: count first (the array length comes before them). */
    size_t cap = 0;
    unsigned char *buf = NULL;
    size_t *part = NULL;
    gbuf mg = {0};
    uint64_t n_merges = 0;
    *n_unsplit = 0;
    for (int32_t id = 0; id < n; id++) {
        const char *p;
        size_t pl;
        ck_assert_int_eq(sift_vocab_piece(t, id, &p, &pl, NULL), SIFT_OK);
        if (pl < 2)
            continue;
        if (pl + 1 > cap) {
            cap = 2 * pl + 1;
            buf = realloc(buf, cap);
            part = realloc(part, (cap + 1) * sizeof *part);
            ck_assert(buf && part);
        }
        memcpy(buf, p, pl);
        /* part[i] = start of part i; np parts */
        size_t np = pl;
        for (size_t i = 0; i <= pl; i++)
            part[i] = i;
        for (;;) {
            int32_t best = -1;
            size_t at = 0;
            for (size_t i = 0; i + 1 < np; i++) {
                int32_t r = rm_get(&m, buf + part[i], part[i + 2] - part[i]);
                if (r >= 0 && r < id && (best < 0 || r < best)) {
                    best = r;
                    at = i;
                }
            }
            if (best < 0)
                break;
            memmove(part + at + 1, part + at + 2, (np - at - 1) * sizeof *part);
            np--;
        }
        if (np != 2) {
            (*n_unsplit)++;
            continue;
        }
        g_merge(&mg, buf, part[1], buf + part[1], pl - part[1]);
        n_merges++;
    }
    g_kv_strs(&g, "tokenizer.ggml.merges", n_merges);
    g_put(&g, mg.b, mg.n);
    free(mg.b);
    free(buf);
    free(part);
    free(m.slot);
    return g;
}

START_TEST(test_gguf_merges_converted_from_cl100k_encode_as_tiktoken_on_every_vector)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/cl100k_base.tiktoken", data_dir());
    sift_vocab *t;
    sift_error err;
    ck_assert_msg(sift_vocab_load_tiktoken(&t, path, NULL, &err) == SIFT_OK, "%s", err.message);
    size_t unsplit;
    gbuf g = cl100k_gguf(t, &unsplit);
    /* Every cl100k token is reached by a merge of two lower ranks. */
    ck_assert_uint_eq(unsplit, 0);
    sift_vocab_free(t);
    /* SIFT_BPE_GGUF_OUT names a file to keep the converted vocabulary in
     * (for tests/bench/bench_bpe, which takes .gguf files). */
    const char *keep = getenv("SIFT_BPE_GGUF_OUT");
    if (keep && *keep) {
        FILE *f = fopen(keep, "wb");
        ck_assert_msg(f != NULL, "cannot write %s", keep);
        ck_assert_uint_eq(fwrite(g.b, 1, g.n, f), g.n);
        ck_assert_int_eq(fclose(f), 0);
    }
    sift_vocab *v = gguf_vocab(&g, NULL);
    free(g.b);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_CL100K);
    snprintf(path, sizeof path, "%s/bpe-vectors-cl100k.txt", data_dir());
    ck_assert_uint_eq(run_vectors(v, path), 630);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_gguf_merges_rank_pairs_and_a_token_no_merge_builds_is_not_made)
{
    /* "abc" is a token, but only "ab c" builds it, and "b c" comes first:
     * a + bc is not a listed pair, so "abc" stays two tokens. */
    static const char *const extra[] = {"ab", "bc", "abc"};
    static const char *const merges[] = {"b|c", "a|b", "ab|c"};
    gbuf g = small_gguf("gpt-2", extra, NULL, 3, merges, 3);
    sift_vocab *v = gguf_vocab(&g, NULL);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_GPT2);
    ids_are(v, "abc", 0, (const int32_t[]){'a', 257, -1});
    ids_are(v, "abab", 0, (const int32_t[]){256, 256, -1});
    ids_are(v, "cabc", 0, (const int32_t[]){'c', 'a', 257, -1});
    sift_vocab_free(v);
    free(g.b);
    /* Llama 3's rule takes a pre-token that is a token whole first. */
    g = small_gguf("llama-bpe", extra, NULL, 3, merges, 3);
    v = gguf_vocab(&g, NULL);
    ids_are(v, "abc", 0, (const int32_t[]){258, -1});
    ids_are(v, "cabc", 0, (const int32_t[]){'c', 'a', 257, -1});
    sift_vocab_free(v);
    free(g.b);
}
END_TEST

START_TEST(test_gguf_lowest_merge_index_wins_then_the_leftmost_pair)
{
    /* "aaa": the pair a a twice; the leftmost merges first, then no
     * "aa a" merge exists, so aa + a. "a aa" would give a + aa. */
    static const char *const extra[] = {"aa", "aaa", "xy"};
    static const char *const merges[] = {"a|aa", "a|a", "x|y"};
    gbuf g = small_gguf("gpt-2", extra, NULL, 3, merges, 3);
    sift_vocab *v = gguf_vocab(&g, NULL);
    ids_are(v, "aaa", 0, (const int32_t[]){256, 'a', -1});
    ids_are(v, "aaaa", 0, (const int32_t[]){256, 256, -1});
    sift_vocab_free(v);
    free(g.b);
}
END_TEST

START_TEST(test_gguf_user_defined_tokens_are_cut_out_always_control_tokens_with_the_flag)
{
    static const char *const extra[] = {"<tool>", "<|end|>", "ol"};
    static const int32_t types[] = {4, 3, 1};
    static const char *const merges[] = {"o|l"};
    gbuf g = small_gguf("gpt-2", extra, types, 3, merges, 1);
    sift_vocab *v = gguf_vocab(&g, NULL);
    ck_assert_uint_eq(sift_vocab_attr(v, 256), 0);
    ck_assert_uint_eq(sift_vocab_attr(v, 257) & SIFT_TOKEN_SPECIAL, SIFT_TOKEN_SPECIAL);
    ids_are(v, "x<tool>y", 0, (const int32_t[]){'x', 256, 'y', -1});
    ids_are(v, "<|end|>", 0, (const int32_t[]){'<', '|', 'e', 'n', 'd', '|', '>', -1});
    ids_are(v, "<|end|>", SIFT_ENCODE_SPECIAL, (const int32_t[]){257, -1});
    ids_are(v, "tool<tool>", SIFT_ENCODE_SPECIAL, (const int32_t[]){'t', 'o', 258, 256, -1});
    sift_vocab_free(v);
    free(g.b);
}
END_TEST

START_TEST(test_gguf_qwen2_splits_digits_one_by_one_and_gpt2_keeps_a_number_whole)
{
    static const char *const extra[] = {"12", " 1", " 12"};
    static const char *const merges[] = {" |1", " 1|2", "1|2"};
    gbuf g = small_gguf("qwen2", extra, NULL, 3, merges, 3);
    sift_vocab *v = gguf_vocab(&g, NULL);
    ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_QWEN2);
    ids_are(v, "x 12", 0, (const int32_t[]){'x', ' ', '1', '2', -1});
    sift_vocab_free(v);
    free(g.b);
    g = small_gguf("gpt-2", extra, NULL, 3, merges, 3);
    v = gguf_vocab(&g, NULL);
    ids_are(v, "x 12", 0, (const int32_t[]){'x', 258, -1});
    ids_are(v, "12", 0, (const int32_t[]){256, -1});
    /* GPT-2's contractions are lower case only */
    ids_are(v, "'S", 0, (const int32_t[]){'\'', 'S', -1});
    sift_vocab_free(v);
    free(g.b);
}
END_TEST

START_TEST(test_gguf_unknown_or_missing_pre_loads_without_an_encoder_that_keeps_the_merges)
{
    static const char *const extra[] = {"ab", "bc", "abc"};
    static const char *const merges[] = {"b|c", "a|b", "ab|c"};
    const char *pres[] = {"deepseek-llm", NULL};
    for (int k = 0; k < 2; k++) {
        gbuf g = small_gguf(pres[k], extra, NULL, 3, merges, 3);
        sift_vocab *v = gguf_vocab(&g, NULL);
        free(g.b);
        ck_assert_int_eq(sift_vocab_pretokenizer(v), SIFT_PRETOK_NONE);
        int32_t ids[8];
        size_t n = 9;
        sift_error err;
        ck_assert_int_eq(sift_vocab_encode(v, "abc", 3, 0, ids, 8, &n, NULL, &err), SIFT_E_STATE);
        ck_assert_uint_eq(n, 0);
        ck_assert_msg(strstr(err.message, "tokenizer.ggml.pre") != NULL, "%s", err.message);
        if (pres[k])
            ck_assert_msg(strstr(err.message, "'deepseek-llm'") != NULL, "%s", err.message);
        /* A pattern given later encodes with the file's merges. */
        ck_assert_int_eq(sift_vocab_set_pretokenizer(v, SIFT_PRETOK_GPT2, NULL, 0, &err), SIFT_OK);
        ids_are(v, "abc", 0, (const int32_t[]){'a', 257, -1});
        /* ... and so does a copy, and NONE then another kind again */
        sift_vocab *c;
        ck_assert_int_eq(sift_vocab_extend(&c, v, NULL, NULL, &err), SIFT_OK);
        ids_are(c, "abc", 0, (const int32_t[]){'a', 257, -1});
        ck_assert_int_eq(sift_vocab_set_pretokenizer(c, SIFT_PRETOK_NONE, NULL, 0, &err), SIFT_OK);
        ck_assert_int_eq(sift_vocab_encode(c, "abc", 3, 0, ids, 8, &n, NULL, &err), SIFT_E_STATE);
        ck_assert_int_eq(sift_vocab_set_pretokenizer(c, SIFT_PRETOK_CL100K, NULL, 0, &err),
                         SIFT_OK);
        ids_are(c, "abc", 0, (const int32_t[]){'a', 257, -1});
        sift_vocab_free(c);
        sift_vocab_free(v);
    }
}
END_TEST

START_TEST(test_gguf_merges_survive_an_attribute_change_and_skip_tokens_made_special)
{
    static const char *const extra[] = {"ab", "abc"};
    static const char *const merges[] = {"a|b", "ab|c"};
    gbuf g = small_gguf("gpt-2", extra, NULL, 2, merges, 2);
    sift_vocab *v = gguf_vocab(&g, NULL);
    free(g.b);
    ids_are(v, "abcab", 0, (const int32_t[]){257, 256, -1});
    sift_error err;
    ck_assert_int_eq(sift_vocab_set_attr(v, 257, SIFT_TOKEN_SPECIAL, &err), SIFT_OK);
    ids_are(v, "abcab", 0, (const int32_t[]){256, 'c', 256, -1});
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_gguf_encoder_allocation_failures_are_clean_for_every_n)
{
    static const char *const extra[] = {"ab", "bc", "abc", "<t>", "<|e|>"};
    static const int32_t types[] = {1, 1, 1, 4, 3};
    static const char *const merges[] = {"b|c", "a|b", "ab|c"};
    const char *text = "abc<t>ab<|e|>\xff bcabc";
    const char *pres[] = {"llama-bpe", "unknown"};
    for (int k = 0; k < 2; k++) {
        gbuf g = small_gguf(pres[k], extra, types, 5, merges, 3);
        int done = 0;
        for (long at = 1; !done && at < 10000; at++) {
            fa f = {0, at, 0};
            sift_allocator al = {sizeof al, fa_alloc, fa_free, &f, NULL};
            sift_vocab *v = NULL, *c = NULL;
            sift_error err;
            sift_status st = sift_vocab_from_gguf(&v, g.b, g.n, &al, &err);
            if (st == SIFT_OK && k == 1)
                st = sift_vocab_set_pretokenizer(v, SIFT_PRETOK_QWEN2, NULL, 0, &err);
            if (st == SIFT_OK)
                st = sift_vocab_extend(&c, v, NULL, &al, &err);
            int32_t ids[64];
            size_t n = 0;
            if (st == SIFT_OK)
                st = sift_vocab_encode(c, text, strlen(text), SIFT_ENCODE_SPECIAL, ids, 64, &n,
                                       NULL, &err);
            if (st == SIFT_OK) {
                done = 1;
                ck_assert_uint_gt(n, 5);
            } else {
                ck_assert_msg(st == SIFT_E_NOMEM, "allocation %ld: %s", at, err.message);
                ck_assert_uint_eq(n, 0);
            }
            sift_vocab_free(c);
            sift_vocab_free(v);
            ck_assert_int_eq(f.live, 0);
        }
        ck_assert(done);
        free(g.b);
    }
}
END_TEST

START_TEST(test_a_grown_scratch_makes_encoding_allocate_nothing)
{
    fa fv = {0, 0, 0}, fs = {0, 0, 0};
    sift_allocator av = {sizeof av, fa_alloc, fa_free, &fv, NULL};
    sift_allocator as = {sizeof as, fa_alloc, fa_free, &fs, NULL};
    char path[4096];
    snprintf(path, sizeof path, "%s/cl100k_base.tiktoken", data_dir());
    sift_vocab *v;
    sift_error err;
    ck_assert_int_eq(sift_vocab_load_tiktoken(&v, path, &av, &err), SIFT_OK);
    sift_encode_scratch *s;
    ck_assert_int_eq(sift_encode_scratch_new(&s, &as, &err), SIFT_OK);
    const char *t = "{\"a\": [1, 2, 3], \"text\": \"unbelievably long words\"}\n\n  x";
    int32_t ids[64], again[64];
    size_t n, n2;
    ck_assert_int_eq(sift_vocab_encode(v, t, strlen(t), 0, ids, 64, &n, s, &err), SIFT_OK);
    long cv = fv.calls, cs = fs.calls;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sift_vocab_encode(v, t, strlen(t), 0, again, 64, &n2, s, &err), SIFT_OK);
        ck_assert_uint_eq(n2, n);
        ck_assert(memcmp(ids, again, n * sizeof *ids) == 0);
    }
    ck_assert_int_eq(fv.calls, cv);
    ck_assert_int_eq(fs.calls, cs);
    sift_encode_scratch_free(s);
    sift_vocab_free(v);
    ck_assert_int_eq(fv.live, 0);
    ck_assert_int_eq(fs.live, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Threads                                                             */
/* ------------------------------------------------------------------ */

typedef struct job {
    const sift_vocab *v;
    const char *text;
    int32_t ids[256];
    size_t n;
    sift_status st;
} job;

static void *run_job(void *p)
{
    job *j = p;
    j->st = sift_vocab_encode(j->v, j->text, strlen(j->text), 0, j->ids, 256, &j->n, NULL, NULL);
    return NULL;
}

START_TEST(test_threads_sharing_a_vocabulary_build_one_encoder_and_agree)
{
    sift_vocab *v = cl100k(); /* not built yet: the threads race to */
    job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i].v = v;
        jobs[i].text = "Threads share one vocabulary: 12345 \xf0\x9f\x98\x80 done.";
        ck_assert_int_eq(pthread_create(&th[i], NULL, run_job, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(jobs[i].st, SIFT_OK);
        ck_assert_uint_eq(jobs[i].n, jobs[0].n);
        ck_assert(memcmp(jobs[i].ids, jobs[0].ids, jobs[0].n * sizeof(int32_t)) == 0);
    }
    sift_vocab_free(v);
}
END_TEST

/* ------------------------------------------------------------------ */

Suite *tu_suite(void)
{
    Suite *s = suite_create("bpe");
    struct {
        const char *name;
        const TTest *tests[8];
    } groups[] = {
        {"vectors",
         {test_cl100k_vectors_match_tiktoken_bitwise,
          test_o200k_vectors_match_tiktoken_bitwise_when_the_file_is_given}},
        {"merge",
         {test_a_long_pretoken_is_merged_in_bounded_work,
          test_long_runs_of_each_character_class_encode_and_round_trip}},
        {"roundtrip",
         {test_decoding_the_ids_of_random_bytes_gives_the_bytes_back,
          test_special_texts_become_ids_only_with_the_flag,
          test_the_longest_special_text_wins_at_the_leftmost_place}},
        {"cut",
         {test_special_texts_are_cut_as_the_naive_leftmost_longest_search_cuts,
          test_a_long_special_text_costs_steps_linear_in_the_text}},
        {"pretokenizer",
         {test_default_pretokenizer_follows_the_tiktoken_file_size,
          test_custom_pattern_keeps_the_text_no_match_covers,
          test_bad_patterns_and_kinds_are_errors_that_keep_the_old_pretokenizer,
          test_a_custom_pattern_over_its_match_limit_is_a_pattern_limit_error}},
        {"api",
         {test_a_small_cap_gives_the_count_and_the_first_ids,
          test_bad_arguments_are_arg_errors_with_no_ids,
          test_failing_the_nth_allocation_is_clean_for_every_n,
          test_a_grown_scratch_makes_encoding_allocate_nothing,
          test_threads_sharing_a_vocabulary_build_one_encoder_and_agree}},
        {"gguf",
         {test_gguf_merges_converted_from_cl100k_encode_as_tiktoken_on_every_vector,
          test_gguf_merges_rank_pairs_and_a_token_no_merge_builds_is_not_made,
          test_gguf_lowest_merge_index_wins_then_the_leftmost_pair,
          test_gguf_user_defined_tokens_are_cut_out_always_control_tokens_with_the_flag,
          test_gguf_qwen2_splits_digits_one_by_one_and_gpt2_keeps_a_number_whole,
          test_gguf_unknown_or_missing_pre_loads_without_an_encoder_that_keeps_the_merges,
          test_gguf_merges_survive_an_attribute_change_and_skip_tokens_made_special,
          test_gguf_encoder_allocation_failures_are_clean_for_every_n}},
    };
    for (size_t g = 0; g < N(groups); g++) {
        TCase *tc = tcase_create(groups[g].name);
        /* the real vocabularies load in each test; the long pre-token
         * and the random round trips are property runs */
        tcase_set_timeout(tc, 60);
        for (size_t i = 0; i < N(groups[g].tests) && groups[g].tests[i]; i++)
            tcase_add_test(tc, groups[g].tests[i]);
        suite_add_tcase(s, tc);
    }
    TCase *tc = tcase_create("naive");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_heap_merge_equals_the_naive_merge_on_random_vocabularies, 0, 8);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * vocab_tiktoken.c - vocabularies from tiktoken rank files.
 *
 * Owns sift_vocab_load_tiktoken / sift_vocab_from_tiktoken. The parse
 * builds the offset table, the byte block and the attribute array of a
 * vocabulary directly and hands them to sift__vocab_adopt, so each piece
 * is copied once. The rules every file loader keeps (nothing the file
 * says is trusted, every failure names its place, nothing leaks on
 * failure) are in vocab_load.c; errors here carry `source:line:col`
 * (1-based, columns in bytes, which equal code points in a tiktoken file
 * since it is ASCII).
 *
 * Format: one line per token, `base64(bytes) SP rank`, ranks in
 * decimal. The rank is the token id. Ranks need not be sorted or dense;
 * an id no line names is an unused token (empty piece, SIFT_TOKEN_UNUSED).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>

#include "vocab.h"
#include "vocab_load.h"

/* Caps. A tiktoken line holds one token (the longest in o200k is 128
 * bytes, 172 in base64); a whole file is a few MiB. */
#define TT_MAX_LINE 4096
#define TT_MAX_FILE ((uint64_t)256 << 20)
/* Unused ids a tiktoken file may imply beyond its lines (gaps in ranks):
 * keeps the tables proportional to the file. */
#define TT_MAX_EXTRA_GAPS 65536

/* Value of each byte as a base64 digit, -1 for bytes outside the
 * alphabet (A-Z a-z 0-9 + /). A table: the decoder is the hot loop of a
 * 200k-line file. */
static const signed char b64_table[256] = {
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1, -1, 63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1, -1, 0,  1,  2,  3,  4,  5,  6,
    7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, -1,
    -1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,
    49, 50, 51, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

static int b64_value(unsigned char c)
{
    return b64_table[c];
}

/* One token line. Empty lines are errors (except a final one), so the
 * k-th entry is always line k + 1, and a token's decoded bytes end where
 * the next entry's begin: 8 bytes per token keep the table small. */
typedef struct tt_line {
    uint32_t rank;
    uint32_t start; /* decoded bytes in the scratch block (< 2^28) */
} tt_line;

/* One tiktoken parse: the input, the decoded bytes, and the tables
 * filled as the lines come (see tt_parse). Every pointer is owned here
 * until tt_parse hands the tables to the vocabulary or frees them. */
typedef struct tt_parser {
    const char *data;
    size_t len;
    const char *src;
    const sift__alloc *al;
    sift_error *err;
    size_t n_lines; /* bound on the token lines */
    size_t cap_off; /* entries in off[] and attr[] */
    tt_line *lines; /* NULL while the ranks come in order */
    char *bytes;    /* decoded bytes */
    uint64_t *off;  /* per id: start of its bytes */
    uint8_t *attr;  /* per id: 0 or SIFT_TOKEN_UNUSED */
    int32_t *seen;  /* out-of-order case: entry of each rank */
    char *sorted_bytes;
    uint64_t pos;     /* decoded bytes so far */
    uint64_t next_id; /* ids filled in order so far */
    size_t n_tok;
    uint32_t max_rank;
    int ascending;
} tt_parser;

/* Decodes the base64 token p[0 .. blen) of the line at offset i onto
 * the decoded bytes, four characters at a time; '=' only as the last one
 * or two characters of the token. */
static sift_status tt_decode_token(tt_parser *t, const char *p, size_t i, size_t blen,
                                   uint32_t line_no)
{
    for (size_t k = 0; k < blen; k += 4) {
        int v[4];
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            unsigned char c = (unsigned char)p[k + (size_t)j];
            int last = k + 4 == blen;
            if (c == '=' && last && (j == 3 || (j == 2 && p[k + 3] == '='))) {
                v[j] = 0;
                pad++;
                continue;
            }
            v[j] = b64_value(c);
            if (v[j] < 0)
                return sift__vocab_fail_place(
                    t->err, SIFT_E_ARG, t->src, (int32_t)line_no, (int32_t)(k + (size_t)j) + 1,
                    (int64_t)(i + k + (size_t)j), -1, "bad base64: unexpected character 0x%02x", c);
        }
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        t->bytes[t->pos++] = (char)(w >> 16);
        if (pad < 2)
            t->bytes[t->pos++] = (char)(w >> 8);
        if (pad < 1)
            t->bytes[t->pos++] = (char)w;
    }
    return SIFT_OK;
}

/* The rank: decimal digits from just after the space (p[blen]) to the
 * end of the line p[0 .. ll), below SIFT_DEFAULT_MAX_VOCAB. */
static sift_status tt_read_rank(tt_parser *t, const char *p, size_t i, size_t blen, size_t ll,
                                uint32_t line_no, uint64_t *rank_out)
{
    size_t rc = blen + 1;
    if (rc >= ll)
        return sift__vocab_fail_place(t->err, SIFT_E_ARG, t->src, (int32_t)line_no, (int32_t)rc + 1,
                                      (int64_t)(i + rc), -1, "expected a rank after the space");
    uint64_t rank = 0;
    for (size_t k = rc; k < ll; k++) {
        unsigned char c = (unsigned char)p[k];
        if (c < '0' || c > '9')
            return sift__vocab_fail_place(
                t->err, SIFT_E_ARG, t->src, (int32_t)line_no, (int32_t)k + 1, (int64_t)(i + k), -1,
                "bad rank: unexpected character 0x%02x (expected a decimal "
                "number)",
                c);
        rank = rank * 10 + (uint64_t)(c - '0');
        if (rank >= (uint64_t)SIFT_DEFAULT_MAX_VOCAB)
            return sift__vocab_fail_place(
                t->err, SIFT_E_LIMIT, t->src, (int32_t)line_no, (int32_t)rc + 1, (int64_t)(i + rc),
                -1, "rank %.*s out of range [0, %d)", (int)(ll - rc > 20 ? 20 : ll - rc), p + rc,
                (int)SIFT_DEFAULT_MAX_VOCAB);
    }
    *rank_out = rank;
    return SIFT_OK;
}

/* Records the token of `rank` whose bytes begin at `start`: straight
 * into the offset and attribute tables while the ranks come in order
 * (gaps become unused ids), else in the table of lines, which the first
 * rank out of order creates from what the tables hold so far. */
static sift_status tt_add_token(tt_parser *t, uint64_t rank, uint64_t start)
{
    if (!t->lines) {
        if (rank >= t->next_id && rank + 2 <= t->cap_off) {
            for (uint64_t id = t->next_id; id < rank; id++) {
                t->off[id] = start;
                t->attr[id] = SIFT_TOKEN_UNUSED;
            }
            t->off[rank] = start;
            t->attr[rank] = 0;
            t->next_id = rank + 1;
            t->max_rank = (uint32_t)rank;
            t->n_tok++;
            return SIFT_OK;
        }
        t->lines = sift__malloc(t->al, t->n_lines, sizeof *t->lines);
        if (!t->lines)
            return sift__fail(t->err, SIFT_E_NOMEM, "out of memory while loading %s", t->src);
        size_t k = 0;
        for (uint64_t id = 0; id < t->next_id; id++) {
            if (t->attr[id] == 0) {
                t->lines[k].rank = (uint32_t)id;
                t->lines[k].start = (uint32_t)t->off[id];
                k++;
            }
        }
    }
    if (t->n_tok > 0 && (uint32_t)rank <= t->lines[t->n_tok - 1].rank)
        t->ascending = 0;
    if ((uint32_t)rank > t->max_rank)
        t->max_rank = (uint32_t)rank;
    t->lines[t->n_tok].rank = (uint32_t)rank;
    t->lines[t->n_tok].start = (uint32_t)start;
    t->n_tok++;
    return SIFT_OK;
}

/* One non-empty line p[0 .. ll) (line break removed) at offset i: its
 * length, "TOKEN RANK" shape, token and rank, then the record. */
static sift_status tt_parse_line(tt_parser *t, const char *p, size_t i, size_t ll, uint32_t line_no)
{
    if (ll > TT_MAX_LINE)
        return sift__vocab_fail_place(t->err, SIFT_E_LIMIT, t->src, (int32_t)line_no,
                                      TT_MAX_LINE + 1, (int64_t)(i + TT_MAX_LINE), -1,
                                      "line is %zu bytes long; max %d", ll, TT_MAX_LINE);
    const char *sp = memchr(p, ' ', ll);
    if (!sp)
        return sift__vocab_fail_place(t->err, SIFT_E_ARG, t->src, (int32_t)line_no, (int32_t)ll + 1,
                                      (int64_t)(i + ll), -1,
                                      "expected a space and a rank after the token");
    size_t blen = (size_t)(sp - p);
    if (blen == 0)
        return sift__vocab_fail_place(t->err, SIFT_E_ARG, t->src, (int32_t)line_no, 1, (int64_t)i,
                                      -1, "empty token: expected base64 before the space");
    if (blen % 4 != 0)
        return sift__vocab_fail_place(t->err, SIFT_E_ARG, t->src, (int32_t)line_no,
                                      (int32_t)blen + 1, (int64_t)(i + blen), -1,
                                      "bad base64: %zu characters is not a multiple of 4", blen);
    uint64_t start = t->pos;
    sift_status st = tt_decode_token(t, p, i, blen, line_no);
    if (st != SIFT_OK)
        return st;
    uint64_t rank = 0;
    st = tt_read_rank(t, p, i, blen, ll, line_no, &rank);
    if (st != SIFT_OK)
        return st;
    return tt_add_token(t, rank, start);
}

/* Every line of the file in turn. Empty lines are errors except a final
 * one (a final newline, or CRLF, ends the file). */
static sift_status tt_parse_lines(tt_parser *t)
{
    uint32_t line_no = 0;
    for (size_t i = 0; i < t->len;) {
        line_no++;
        const char *p = t->data + i;
        const char *nl = memchr(p, '\n', t->len - i);
        size_t ll = nl ? (size_t)(nl - p) : t->len - i;
        size_t next = i + ll + (nl ? 1 : 0);
        if (ll > 0 && p[ll - 1] == '\r')
            ll--;
        if (ll == 0) {
            if (next >= t->len)
                break;
            return sift__vocab_fail_place(t->err, SIFT_E_ARG, t->src, (int32_t)line_no, 1,
                                          (int64_t)i, -1, "empty line");
        }
        sift_status st = tt_parse_line(t, p, i, ll, line_no);
        if (st != SIFT_OK)
            return st;
        i = next;
    }
    return SIFT_OK;
}

/* The table of lines, ranks ascending: bytes are already in id order;
 * gaps get an empty piece at the position of the next token. */
static void tt_fill_ascending(tt_parser *t, uint64_t n)
{
    size_t t_i = 0;
    for (uint64_t id = 0; id < n; id++) {
        if (t_i < t->n_tok && t->lines[t_i].rank == id) {
            t->off[id] = t->lines[t_i].start;
            t_i++;
        } else {
            t->off[id] = t_i < t->n_tok ? t->lines[t_i].start : t->pos;
            t->attr[id] = SIFT_TOKEN_UNUSED;
        }
    }
    t->off[n] = t->pos;
}

/* The table of lines, ranks out of order: a duplicate rank is an error
 * at the second line that has it; otherwise the bytes are copied into id
 * order. */
static sift_status tt_fill_sorted(tt_parser *t, uint64_t n)
{
    t->seen = sift__malloc(t->al, (size_t)n, sizeof *t->seen);
    t->sorted_bytes = sift__malloc(t->al, (size_t)t->pos + 1, 1);
    if (!t->seen || !t->sorted_bytes)
        return sift__fail(t->err, SIFT_E_NOMEM, "out of memory while loading %s", t->src);
    int32_t *seen = t->seen;
    for (uint64_t id = 0; id < n; id++)
        seen[id] = -1;
    for (size_t k = 0; k < t->n_tok; k++) {
        uint32_t r = t->lines[k].rank;
        if (seen[r] >= 0) {
            /* Report the place of the rank on the second line (entry k
             * is line k + 1). */
            uint32_t first_line = (uint32_t)seen[r] + 1, b_line = (uint32_t)k + 1;
            size_t bo = 0;
            uint32_t ln = 1;
            for (; ln < b_line; bo++)
                if (t->data[bo] == '\n')
                    ln++;
            const char *nl = memchr(t->data + bo, ' ', t->len - bo);
            size_t col = nl ? (size_t)(nl - (t->data + bo)) + 2 : 1;
            return sift__vocab_fail_place(
                t->err, SIFT_E_ARG, t->src, (int32_t)b_line, (int32_t)col, (int64_t)(bo + col - 1),
                r, "duplicate rank %u (first on line %u)", (unsigned)r, (unsigned)first_line);
        }
        seen[r] = (int32_t)k;
    }
    uint64_t q = 0;
    for (uint64_t id = 0; id < n; id++) {
        t->off[id] = q;
        if (seen[id] < 0) {
            t->attr[id] = SIFT_TOKEN_UNUSED;
            continue;
        }
        size_t k = (size_t)seen[id];
        uint64_t ls = t->lines[k].start, le = k + 1 < t->n_tok ? t->lines[k + 1].start : t->pos;
        memcpy(t->sorted_bytes + q, t->bytes + ls, (size_t)(le - ls));
        q += le - ls;
    }
    t->off[n] = q;
    sift__free(t->al, t->bytes);
    t->bytes = t->sorted_bytes;
    t->sorted_bytes = NULL;
    return SIFT_OK;
}

/* After the last line: at least one token, not too many unused ids, and
 * the offset and attribute tables complete for the n = max_rank + 1 ids
 * (from the table of lines when the ranks did not all come in order). */
static sift_status tt_finish_tables(tt_parser *t, uint64_t *n_out)
{
    if (t->n_tok == 0)
        return sift__vocab_fail_place(t->err, SIFT_E_ARG, t->src, 0, 0, -1, -1,
                                      "empty file: no tokens");
    uint64_t n = (uint64_t)t->max_rank + 1;
    *n_out = n;
    if (n > t->n_tok && n - t->n_tok > (uint64_t)t->n_tok + TT_MAX_EXTRA_GAPS)
        return sift__vocab_fail_place(
            t->err, SIFT_E_LIMIT, t->src, 0, 0, -1, t->max_rank,
            "rank %u with only %zu tokens leaves %llu unused ids; max %llu", (unsigned)t->max_rank,
            t->n_tok, (unsigned long long)(n - t->n_tok),
            (unsigned long long)t->n_tok + TT_MAX_EXTRA_GAPS);
    if (!t->lines) {
        t->off[n] = t->pos; /* n + 1 <= cap_off: checked as the ranks came */
        return SIFT_OK;     /* filled while parsing */
    }
    if (n + 1 > t->cap_off) {
        sift__free(t->al, t->off);
        sift__free(t->al, t->attr);
        t->off = sift__malloc(t->al, (size_t)n + 1, sizeof *t->off);
        t->attr = sift__malloc(t->al, (size_t)n, 1);
        if (!t->off || !t->attr)
            return sift__fail(t->err, SIFT_E_NOMEM, "out of memory while loading %s", t->src);
    }
    memset(t->attr, 0, (size_t)n);
    if (t->ascending) {
        tt_fill_ascending(t, n);
        return SIFT_OK;
    }
    return tt_fill_sorted(t, n);
}

static sift_status tt_parse(sift_vocab **out, const char *data, size_t len, const char *src,
                            const sift__alloc *al, sift_error *err)
{
    if (len > TT_MAX_FILE)
        return sift__vocab_fail_place(err, SIFT_E_LIMIT, src, 0, 0, -1, -1,
                                      "file is %llu bytes; max %llu", (unsigned long long)len,
                                      (unsigned long long)TT_MAX_FILE);
    if (len == 0)
        return sift__vocab_fail_place(err, SIFT_E_ARG, src, 0, 0, -1, -1, "empty file: no tokens");
    tt_parser t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.len = len;
    t.src = src;
    t.al = al;
    t.err = err;
    t.ascending = 1;
    /* A token line has at least 7 bytes ("AAAA 0\n"; the last may lack
     * the newline): a bound on the table without a counting pass. */
    t.n_lines = len / 7 + 2;
    /* Files list their ranks in order, so the offset and attribute tables
     * are filled as the lines come, sized for the most ids the gap rule
     * allows (only the pages written are touched). The first rank out of
     * order switches to a table of lines, sorted out at the end. */
    t.cap_off = 2 * t.n_lines + TT_MAX_EXTRA_GAPS + 2;
    /* Decoded bytes are at most 3/4 of the input. */
    t.bytes = sift__malloc(al, len / 4 * 3 + 4, 1);
    t.off = sift__malloc(al, t.cap_off, sizeof *t.off);
    t.attr = sift__malloc(al, t.cap_off, 1);
    sift_status st = SIFT_OK;
    uint64_t n = 0;
    if (!t.bytes || !t.off || !t.attr)
        st = sift__fail(err, SIFT_E_NOMEM, "out of memory while loading %s", src);
    if (st == SIFT_OK)
        st = tt_parse_lines(&t);
    if (st == SIFT_OK)
        st = tt_finish_tables(&t, &n);
    if (st == SIFT_OK) {
        st = sift__vocab_adopt(out, al, (int32_t)n, t.off, t.bytes, t.attr, err);
        t.off = NULL;
        t.bytes = NULL;
        t.attr = NULL;
        if (st == SIFT_OK && (st = sift__bpe_default_tiktoken(*out, err)) != SIFT_OK) {
            /* the pre-tokenizer its size implies (bpe.c) */
            sift_vocab_free(*out);
            *out = NULL;
        }
    }
    sift__free(al, t.lines);
    sift__free(al, t.bytes);
    sift__free(al, t.sorted_bytes);
    sift__free(al, t.off);
    sift__free(al, t.attr);
    sift__free(al, t.seen);
    return st;
}

sift_status sift_vocab_from_tiktoken(sift_vocab **out, const char *data, size_t len,
                                     const sift_allocator *allocator, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!data && len)
        return sift__fail(err, SIFT_E_ARG, "data is NULL");
    sift__alloc al;
    sift_status st = sift__alloc_init(&al, allocator, err);
    if (st)
        return st;
    return tt_parse(out, data ? data : "", len, "<memory>", &al, err);
}

sift_status sift_vocab_load_tiktoken(sift_vocab **out, const char *path,
                                     const sift_allocator *allocator, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!path)
        return sift__fail(err, SIFT_E_ARG, "path is NULL");
    sift__alloc al;
    sift_status st = sift__alloc_init(&al, allocator, err);
    if (st)
        return st;
    char *buf;
    size_t size;
    st = sift__file_read(&al, path, (size_t)TT_MAX_FILE, &buf, &size, err);
    if (st)
        return st;
    st = tt_parse(out, buf, (size_t)size, path, &al, err);
    sift__free(&al, buf);
    return st;
}

/*
 * vocab_gguf.c - vocabularies from the tokenizer metadata of GGUF model
 * files.
 *
 * Owns sift_vocab_load_gguf / sift_vocab_from_gguf. The parse builds the
 * offset table, the byte block and the attribute array of a vocabulary
 * directly and hands them to sift__vocab_adopt, so each piece is copied
 * once. The rules every file loader keeps (nothing the file says is
 * trusted, every failure names its place, nothing leaks on failure) are
 * in vocab_load.c; errors here carry the byte offset and the metadata
 * key. A file is opened without blocking and must be a regular file (a
 * FIFO or a directory is SIFT_E_IO), and is read up to the end of its
 * key/value section only, never its tensor infos or weights.
 *
 * GGUF (versions 2 and 3, little endian): "GGUF", u32 version, u64 tensor
 * count, u64 key/value count, then the key/value pairs. A key is a string
 * (u64 length + bytes); a value is a u32 type followed by its payload:
 * fixed-size scalars (u8/i8/bool: 1, u16/i16: 2, u32/i32/f32: 4,
 * u64/i64/f64: 8), a string, or an array (u32 element type, u64 count,
 * the elements). Keys read here:
 *   tokenizer.ggml.model       string: "gpt2" (byte-level BPE) or
 *                              "llama" (SentencePiece)
 *   tokenizer.ggml.tokens      array of strings: the pieces, by id
 *   tokenizer.ggml.token_type  array of i32: 1 normal, 2 unknown,
 *                              3 control, 4 user defined, 5 unused, 6 byte
 *   tokenizer.ggml.{eos,eot,eom}_token_id  u32 (or i32): EOG ids
 *   tokenizer.ggml.merges      array of strings "A B": the BPE merges in
 *                              rank order, A and B pieces in the GPT-2
 *                              alphabet (read for gpt2 only)
 *   tokenizer.ggml.pre         string: the pre-tokenizer's name
 * Every other key is skipped by its type. Pieces are decoded to bytes:
 * byte-level BPE maps each code point back through the GPT-2 byte table
 * ("Ġ" -> ' '); SentencePiece turns "▁" into ' ' and byte tokens
 * "<0xHH>" into the byte HH. Decoding never lengthens a piece, so it is
 * done in place.
 *
 * A gpt2 file with merges gets an encoder (bpe.c,
 * sift__bpe_set_gguf): each merge is split at its one space, both pieces
 * are decoded through the GPT-2 table like token pieces, and every piece
 * and the two together must be tokens. The pre-tokenizer comes from
 * `tokenizer.ggml.pre` through pre_names below; a name not there (or no
 * such key) loads the vocabulary without one, and sift_vocab_encode
 * then says why.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "vocab.h"
#include "vocab_load.h"

/* GGUF keys are at most 65535 bytes (the format says so). */
#define GGUF_MAX_KEY 65535
/* Pieces larger than this are not tokens. */
#define GGUF_MAX_PIECE ((uint64_t)1 << 20)
/* Total piece bytes. */
#define GGUF_MAX_PIECE_BYTES ((uint64_t)1 << 30)
/* Merges (Llama 3 has 280,147; Qwen2 151,387). */
#define GGUF_MAX_MERGES ((uint64_t)1 << 26)

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

/* Opens `path` through the one file helper (core/file.c: no blocking,
 * regular files only) as a stdio stream, and gives its size. */
static sift_status open_regular(const char *path, FILE **out, uint64_t *size, sift_error *err)
{
    *out = NULL;
    int fd;
    sift_status st = sift__file_open(path, UINT64_MAX, &fd, size, err);
    if (st != SIFT_OK)
        return st;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return sift__vocab_fail_place(err, SIFT_E_IO, path, 0, 0, -1, -1, "cannot open: %s",
                                      strerror(e));
    }
    *out = f;
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* GGUF: a bounded reader over memory or a file                        */
/* ------------------------------------------------------------------ */

enum {
    GT_U8 = 0,
    GT_I8 = 1,
    GT_U16 = 2,
    GT_I16 = 3,
    GT_U32 = 4,
    GT_I32 = 5,
    GT_F32 = 6,
    GT_BOOL = 7,
    GT_STRING = 8,
    GT_ARRAY = 9,
    GT_U64 = 10,
    GT_I64 = 11,
    GT_F64 = 12,
    GT__COUNT
};

static const char *const gt_names[GT__COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

/* Size of a fixed-size value, 0 for string and array. */
static unsigned gt_size(uint32_t t)
{
    static const unsigned char sz[GT__COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < GT__COUNT ? sz[t] : 0;
}

typedef struct gin {
    const unsigned char *mem; /* memory source, or NULL */
    FILE *f;                  /* file source, or NULL */
    uint64_t size;            /* bytes in the source */
    uint64_t pos;             /* bytes consumed */
    const char *src;
    const char *key; /* the key being read, for messages; NULL = header */
    sift_error *err;
} gin;

SIFT__PRINTF(3, 4)
static sift_status gfail(gin *g, sift_status code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g->key)
        return sift__vocab_fail_place(g->err, code, g->src, 0, 0, (int64_t)g->pos, -1,
                                      "key '%.120s': %s", g->key, msg);
    return sift__vocab_fail_place(g->err, code, g->src, 0, 0, (int64_t)g->pos, -1, "%s", msg);
}

/* A printable copy of file bytes for a message: printable ASCII as is,
 * every other byte as \xHH, cut to fit `cap` (a message never carries
 * a NUL, a control character or broken UTF-8 from the file). */
static const char *echo_bytes(char *out, size_t cap, const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') {
            out[k++] = (char)p[i];
        } else {
            snprintf(out + k, cap - k, "\\x%02x", p[i]);
            k += 4;
        }
    }
    out[k] = '\0';
    return out;
}

static uint64_t gin_left(const gin *g)
{
    return g->size - g->pos;
}

static sift_status gin_read(gin *g, void *dst, size_t n, const char *what)
{
    if (n > gin_left(g))
        return gfail(g, SIFT_E_ARG, "file ends inside %s (%zu bytes needed, %llu left)", what, n,
                     (unsigned long long)gin_left(g));
    if (g->mem) {
        memcpy(dst, g->mem + g->pos, n);
    } else if (fread(dst, 1, n, g->f) != n) {
        return gfail(g, SIFT_E_IO, "read error inside %s", what);
    }
    g->pos += n;
    return SIFT_OK;
}

static sift_status gin_skip(gin *g, uint64_t n, const char *what)
{
    if (n > gin_left(g))
        return gfail(g, SIFT_E_ARG, "file ends inside %s (%llu bytes needed, %llu left)", what,
                     (unsigned long long)n, (unsigned long long)gin_left(g));
    if (!g->mem) {
        /* Seek in steps that fit a long. */
        uint64_t left = n;
        while (left) {
            long step = left > (uint64_t)0x40000000 ? 0x40000000L : (long)left;
            if (fseek(g->f, step, SEEK_CUR) != 0)
                return gfail(g, SIFT_E_IO, "seek error inside %s", what);
            left -= (uint64_t)step;
        }
    }
    g->pos += n;
    return SIFT_OK;
}

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t le64(const unsigned char *b)
{
    return (uint64_t)le32(b) | (uint64_t)le32(b + 4) << 32;
}

static sift_status gin_u32(gin *g, uint32_t *v, const char *what)
{
    unsigned char b[4];
    sift_status st = gin_read(g, b, 4, what);
    if (!st)
        *v = le32(b);
    return st;
}

static sift_status gin_u64(gin *g, uint64_t *v, const char *what)
{
    unsigned char b[8];
    sift_status st = gin_read(g, b, 8, what);
    if (!st)
        *v = le64(b);
    return st;
}

/* Reads a string's length and checks it against the bytes left (and an
 * absolute cap). */
static sift_status gin_strlen(gin *g, uint64_t *n, uint64_t cap, const char *what)
{
    uint64_t at = g->pos;
    sift_status st = gin_u64(g, n, what);
    if (st)
        return st;
    if (*n > gin_left(g) || *n > cap) {
        g->pos = at;
        return gfail(g, *n > cap ? SIFT_E_LIMIT : SIFT_E_ARG,
                     "%s length %llu exceeds the %llu bytes %s", what, (unsigned long long)*n,
                     (unsigned long long)(*n > cap ? cap : gin_left(g) - 8),
                     *n > cap ? "allowed" : "left in the file");
    }
    return SIFT_OK;
}

/* Skips a value of type `t` (not an array of arrays: GGUF readers do not
 * support nesting, and refusing it keeps this loop flat). */
static sift_status gin_skip_value(gin *g, uint32_t t)
{
    if (t >= GT__COUNT)
        return gfail(g, SIFT_E_ARG, "unknown value type %u", (unsigned)t);
    if (t == GT_STRING) {
        uint64_t n;
        sift_status st = gin_strlen(g, &n, UINT64_MAX, "string");
        return st ? st : gin_skip(g, n, "string");
    }
    if (t != GT_ARRAY)
        return gin_skip(g, gt_size(t), gt_names[t]);
    uint32_t et;
    uint64_t cnt;
    sift_status st = gin_u32(g, &et, "array type");
    if (!st)
        st = gin_u64(g, &cnt, "array length");
    if (st)
        return st;
    if (et >= GT__COUNT)
        return gfail(g, SIFT_E_ARG, "unknown array element type %u", (unsigned)et);
    if (et == GT_ARRAY)
        return gfail(g, SIFT_E_ARG, "arrays of arrays are not supported");
    if (et != GT_STRING) {
        unsigned sz = gt_size(et);
        if (cnt > gin_left(g) / sz)
            return gfail(g, SIFT_E_ARG, "array of %llu %s exceeds the %llu bytes left",
                         (unsigned long long)cnt, gt_names[et], (unsigned long long)gin_left(g));
        return gin_skip(g, cnt * sz, "array");
    }
    if (cnt > gin_left(g) / 8)
        return gfail(g, SIFT_E_ARG, "array of %llu strings exceeds the %llu bytes left",
                     (unsigned long long)cnt, (unsigned long long)gin_left(g));
    for (uint64_t i = 0; i < cnt; i++) {
        uint64_t n;
        st = gin_strlen(g, &n, UINT64_MAX, "string");
        if (!st)
            st = gin_skip(g, n, "string");
        if (st)
            return st;
    }
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* GGUF: piece decoding                                                */
/* ------------------------------------------------------------------ */

enum { TT_UNDEFINED = 0, TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER, TT_UNUSED, TT_BYTE };

/* The GPT-2 byte-level table, inverted: the byte a code point stands for,
 * or -1. Printable Latin-1 bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand
 * for themselves; the other 68 bytes were given the code points 256.. in
 * increasing byte order. */
static int gpt2_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 256 || cp >= 256 + 68)
        return -1;
    uint32_t k = cp - 256; /* the k-th byte that is not printable */
    if (k <= 0x20)         /* bytes 0x00..0x20 */
        return (int)k;
    if (k <= 0x20 + 34) /* bytes 0x7F..0xA0 */
        return (int)(0x7F + (k - 0x21));
    return 0xAD; /* k == 67 */
}

/* Texts of control tokens that end a turn in common chat templates; such
 * a token is marked EOG even when no *_token_id key names it. */
static int is_eog_text(const char *s, size_t n)
{
    static const char *const texts[] = {"<|eot_id|>", "<|im_end|>",    "<|end|>", "<end_of_turn>",
                                        "<|eom_id|>", "<|endoftext|>", "<EOT>"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (strlen(texts[i]) == n && memcmp(texts[i], s, n) == 0)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------ */
/* GGUF: the loader                                                    */
/* ------------------------------------------------------------------ */

enum { MODEL_NONE = 0, MODEL_GPT2, MODEL_LLAMA };

typedef struct gguf_state {
    const sift__alloc *al;
    int model;
    uint64_t n;    /* tokens */
    uint64_t *off; /* n + 1 */
    char *bytes;
    uint64_t cap, used;
    int32_t *types; /* n, or NULL */
    uint64_t n_types;
    int64_t eog[3]; /* eos, eot, eom; -1 = absent */
    int have_model, have_tokens, have_types;
    uint64_t types_off;
    /* tokenizer.ggml.merges: the strings as stored, then decoded */
    int have_merges;
    uint64_t n_merges;
    uint64_t *moff; /* n_merges + 1 string starts in mbytes */
    char *mbytes;
    uint64_t mcap, mused;
    uint64_t merges_at; /* file offset of the first string's length */
    /* tokenizer.ggml.pre (a prefix of 63 bytes is kept) */
    int have_pre;
    char pre[64];
    size_t pre_len;
    uint64_t pre_full;
} gguf_state;

static sift_status read_tokens(gin *g, gguf_state *s)
{
    uint32_t et;
    uint64_t cnt;
    sift_status st = gin_u32(g, &et, "array type");
    if (!st)
        st = gin_u64(g, &cnt, "array length");
    if (st)
        return st;
    if (et != GT_STRING)
        return gfail(g, SIFT_E_ARG, "expected an array of string, got an array of %s",
                     et < GT__COUNT ? gt_names[et] : "unknown type");
    if (cnt == 0)
        return gfail(g, SIFT_E_ARG, "no tokens");
    if (cnt > (uint64_t)SIFT_DEFAULT_MAX_VOCAB)
        return gfail(g, SIFT_E_LIMIT, "%llu tokens; max %d", (unsigned long long)cnt,
                     (int)SIFT_DEFAULT_MAX_VOCAB);
    if (cnt > gin_left(g) / 8)
        return gfail(g, SIFT_E_ARG, "array of %llu strings exceeds the %llu bytes left",
                     (unsigned long long)cnt, (unsigned long long)gin_left(g));
    s->off = sift__malloc(s->al, (size_t)cnt + 1, sizeof *s->off);
    if (!s->off)
        return sift__fail(g->err, SIFT_E_NOMEM, "out of memory for %llu tokens",
                          (unsigned long long)cnt);
    s->n = cnt;
    for (uint64_t i = 0; i < cnt; i++) {
        uint64_t len;
        st = gin_strlen(g, &len, GGUF_MAX_PIECE, "token string");
        if (st)
            return st;
        if (s->used + len > GGUF_MAX_PIECE_BYTES)
            return gfail(g, SIFT_E_LIMIT, "token pieces exceed %llu bytes in total",
                         (unsigned long long)GGUF_MAX_PIECE_BYTES);
        if (s->used + len + 1 > s->cap) {
            size_t cap = (size_t)s->cap;
            if (sift__reserve(s->al, &s->bytes, &cap, (size_t)s->used, (size_t)(s->used + len + 1),
                              1, 4096))
                return sift__fail(g->err, SIFT_E_NOMEM, "out of memory for token pieces");
            s->cap = cap;
        }
        s->off[i] = s->used;
        st = gin_read(g, s->bytes + s->used, (size_t)len, "token string");
        if (st)
            return st;
        s->used += len;
    }
    s->off[cnt] = s->used;
    return SIFT_OK;
}

/* The merge strings, stored as they come (decoded after the types are
 * known, in gguf_bpe). */
static sift_status read_merges(gin *g, gguf_state *s)
{
    uint32_t et;
    uint64_t cnt;
    sift_status st = gin_u32(g, &et, "array type");
    if (!st)
        st = gin_u64(g, &cnt, "array length");
    if (st)
        return st;
    if (et != GT_STRING)
        return gfail(g, SIFT_E_ARG, "expected an array of string, got an array of %s",
                     et < GT__COUNT ? gt_names[et] : "unknown type");
    if (cnt > GGUF_MAX_MERGES)
        return gfail(g, SIFT_E_LIMIT, "%llu merges; max %llu", (unsigned long long)cnt,
                     (unsigned long long)GGUF_MAX_MERGES);
    if (cnt > gin_left(g) / 8)
        return gfail(g, SIFT_E_ARG, "array of %llu strings exceeds the %llu bytes left",
                     (unsigned long long)cnt, (unsigned long long)gin_left(g));
    s->moff = sift__malloc(s->al, (size_t)cnt + 1, sizeof *s->moff);
    if (!s->moff)
        return sift__fail(g->err, SIFT_E_NOMEM, "out of memory for %llu merges",
                          (unsigned long long)cnt);
    s->n_merges = cnt;
    s->merges_at = g->pos;
    for (uint64_t i = 0; i < cnt; i++) {
        uint64_t len;
        st = gin_strlen(g, &len, GGUF_MAX_PIECE, "merge string");
        if (st)
            return st;
        if (s->mused + len > GGUF_MAX_PIECE_BYTES)
            return gfail(g, SIFT_E_LIMIT, "merge strings exceed %llu bytes in total",
                         (unsigned long long)GGUF_MAX_PIECE_BYTES);
        if (s->mused + len + 1 > s->mcap) {
            size_t cap = (size_t)s->mcap;
            if (sift__reserve(s->al, &s->mbytes, &cap, (size_t)s->mused,
                              (size_t)(s->mused + len + 1), 1, 4096))
                return sift__fail(g->err, SIFT_E_NOMEM, "out of memory for merge strings");
            s->mcap = cap;
        }
        s->moff[i] = s->mused;
        st = gin_read(g, s->mbytes + s->mused, (size_t)len, "merge string");
        if (st)
            return st;
        s->mused += len;
    }
    s->moff[cnt] = s->mused;
    return SIFT_OK;
}

static sift_status read_types(gin *g, gguf_state *s)
{
    uint32_t et;
    uint64_t cnt;
    s->types_off = g->pos;
    sift_status st = gin_u32(g, &et, "array type");
    if (!st)
        st = gin_u64(g, &cnt, "array length");
    if (st)
        return st;
    if (et != GT_I32)
        return gfail(g, SIFT_E_ARG, "expected an array of i32, got an array of %s",
                     et < GT__COUNT ? gt_names[et] : "unknown type");
    if (cnt > (uint64_t)SIFT_DEFAULT_MAX_VOCAB)
        return gfail(g, SIFT_E_LIMIT, "%llu token types; max %d", (unsigned long long)cnt,
                     (int)SIFT_DEFAULT_MAX_VOCAB);
    if (cnt > gin_left(g) / 4)
        return gfail(g, SIFT_E_ARG, "array of %llu i32 exceeds the %llu bytes left",
                     (unsigned long long)cnt, (unsigned long long)gin_left(g));
    s->types = sift__malloc(s->al, cnt ? (size_t)cnt : 1, sizeof *s->types);
    if (!s->types)
        return sift__fail(g->err, SIFT_E_NOMEM, "out of memory for %llu token types",
                          (unsigned long long)cnt);
    s->n_types = cnt;
    for (uint64_t i = 0; i < cnt; i++) {
        uint32_t v;
        st = gin_u32(g, &v, "token type");
        if (st)
            return st;
        s->types[i] = (int32_t)v;
    }
    return SIFT_OK;
}

/* Reads an integer-valued token id (u32 or i32; -1 / 0xffffffff means
 * "none", as GGUF writers use it). */
static sift_status read_id(gin *g, uint32_t t, int64_t *id)
{
    if (t != GT_U32 && t != GT_I32)
        return gfail(g, SIFT_E_ARG, "expected u32, got %s",
                     t < GT__COUNT ? gt_names[t] : "an unknown type");
    uint32_t v;
    sift_status st = gin_u32(g, &v, gt_names[t]);
    if (st)
        return st;
    *id = v == 0xffffffffu ? -1 : (t == GT_I32 ? (int64_t)(int32_t)v : (int64_t)v);
    if (*id < -1) {
        g->pos -= 4;
        return gfail(g, SIFT_E_ARG, "token id %lld is negative (-1 means none)", (long long)*id);
    }
    return SIFT_OK;
}

/* Reads key `index` into key[0 .. key_cap) (a prefix when longer, for
 * messages; *full says whether it all fit) and checks every byte of it is
 * printable ASCII. g->key is set to it for the messages that follow. */
static sift_status read_key(gin *g, uint64_t index, char *key, size_t key_cap, int *full)
{
    uint64_t klen;
    g->key = NULL;
    sift_status st = gin_strlen(g, &klen, GGUF_MAX_KEY, "key");
    if (st)
        return st;
    /* Keys longer than the buffer are not ones we read; keep a prefix
     * for messages. */
    size_t keep = klen < key_cap - 1 ? (size_t)klen : key_cap - 1;
    uint64_t key_at = g->pos;
    st = gin_read(g, key, keep, "key");
    if (st)
        return st;
    key[keep] = '\0';
    /* GGUF keys are ASCII; a control byte or NUL would also end up in
     * messages. The part past the buffer is read and checked too. */
    for (uint64_t i = 0; i < klen; i++) {
        unsigned char c;
        if (i < keep) {
            c = (unsigned char)key[i];
        } else if ((st = gin_read(g, &c, 1, "key"))) {
            return st;
        }
        if (c < 0x20 || c >= 0x7f) {
            g->pos = key_at + i;
            return gfail(g, SIFT_E_ARG,
                         "key %llu has byte 0x%02x at %llu; keys are printable ASCII",
                         (unsigned long long)index, c, (unsigned long long)i);
        }
    }
    g->key = key;
    *full = keep == klen;
    return SIFT_OK;
}

/* The value of tokenizer.ggml.model (a string of type t): gpt2 or llama. */
static sift_status read_model(gin *g, gguf_state *s, uint32_t t)
{
    if (s->have_model)
        return gfail(g, SIFT_E_ARG, "duplicate key");
    if (t != GT_STRING)
        return gfail(g, SIFT_E_ARG, "expected string, got %s", gt_names[t]);
    uint64_t n;
    char m[32];
    sift_status st = gin_strlen(g, &n, UINT64_MAX, "string");
    if (st)
        return st;
    size_t mk = n < sizeof m - 1 ? (size_t)n : sizeof m - 1;
    st = gin_read(g, m, mk, "string");
    if (!st)
        st = gin_skip(g, n - mk, "string");
    if (st)
        return st;
    m[mk] = '\0';
    s->have_model = 1;
    if (n == 4 && memcmp(m, "gpt2", 4) == 0)
        s->model = MODEL_GPT2;
    else if (n == 5 && memcmp(m, "llama", 5) == 0)
        s->model = MODEL_LLAMA;
    else {
        char e[140];
        return gfail(g, SIFT_E_ARG, "tokenizer model '%s%s' is not supported (gpt2 and llama are)",
                     echo_bytes(e, sizeof e, m, mk), n > mk ? "..." : "");
    }
    return SIFT_OK;
}

/* The value of tokenizer.ggml.pre (a string of type t): a prefix kept for
 * messages, its full length for matching names. */
static sift_status read_pre(gin *g, gguf_state *s, uint32_t t)
{
    if (s->have_pre)
        return gfail(g, SIFT_E_ARG, "duplicate key");
    if (t != GT_STRING)
        return gfail(g, SIFT_E_ARG, "expected string, got %s", gt_names[t]);
    uint64_t n;
    sift_status st = gin_strlen(g, &n, UINT64_MAX, "string");
    if (st)
        return st;
    size_t k = n < sizeof s->pre - 1 ? (size_t)n : sizeof s->pre - 1;
    st = gin_read(g, s->pre, k, "string");
    if (!st)
        st = gin_skip(g, n - k, "string");
    if (st)
        return st;
    s->pre[k] = '\0';
    s->pre_len = k;
    s->pre_full = n;
    s->have_pre = 1;
    return SIFT_OK;
}

/* One key/value pair: the keys read here go to their readers (docs at the
 * top of the file), every other value is skipped by its type. */
static sift_status read_kv(gin *g, gguf_state *s, uint64_t index, char *key, size_t key_cap)
{
    int full = 0;
    sift_status st = read_key(g, index, key, key_cap, &full);
    if (st)
        return st;
    uint32_t t;
    st = gin_u32(g, &t, "value type");
    if (st)
        return st;
    if (t >= GT__COUNT)
        return gfail(g, SIFT_E_ARG, "unknown value type %u", (unsigned)t);
    if (full && strcmp(key, "tokenizer.ggml.model") == 0)
        return read_model(g, s, t);
    if (full && strcmp(key, "tokenizer.ggml.tokens") == 0) {
        if (s->have_tokens)
            return gfail(g, SIFT_E_ARG, "duplicate key");
        if (t != GT_ARRAY)
            return gfail(g, SIFT_E_ARG, "expected an array of string, got %s", gt_names[t]);
        s->have_tokens = 1;
        return read_tokens(g, s);
    }
    if (full && strcmp(key, "tokenizer.ggml.merges") == 0) {
        if (s->have_merges)
            return gfail(g, SIFT_E_ARG, "duplicate key");
        if (t != GT_ARRAY)
            return gfail(g, SIFT_E_ARG, "expected an array of string, got %s", gt_names[t]);
        s->have_merges = 1;
        return read_merges(g, s);
    }
    if (full && strcmp(key, "tokenizer.ggml.pre") == 0)
        return read_pre(g, s, t);
    if (full && strcmp(key, "tokenizer.ggml.token_type") == 0) {
        if (s->have_types)
            return gfail(g, SIFT_E_ARG, "duplicate key");
        if (t != GT_ARRAY)
            return gfail(g, SIFT_E_ARG, "expected an array of i32, got %s", gt_names[t]);
        s->have_types = 1;
        return read_types(g, s);
    }
    static const char *const eog_keys[3] = {"tokenizer.ggml.eos_token_id",
                                            "tokenizer.ggml.eot_token_id",
                                            "tokenizer.ggml.eom_token_id"};
    for (int k = 0; k < 3; k++) {
        if (full && strcmp(key, eog_keys[k]) == 0) {
            if (s->eog[k] != -2)
                return gfail(g, SIFT_E_ARG, "duplicate key");
            return read_id(g, t, &s->eog[k]);
        }
    }
    return gin_skip_value(g, t);
}

/* Decodes every piece in place and sets the attribute bits. */
static sift_status decode_pieces(gin *g, gguf_state *s, uint8_t *attr)
{
    uint64_t w = 0; /* write position: decoding only shrinks pieces */
    for (uint64_t id = 0; id < s->n; id++) {
        const unsigned char *p = (const unsigned char *)s->bytes + s->off[id];
        size_t len = (size_t)(s->off[id + 1] - s->off[id]);
        int32_t type = s->types ? s->types[id] : TT_NORMAL;
        uint64_t start = w;
        char *o = s->bytes;
        if (type < TT_UNDEFINED || type > TT_BYTE)
            return sift__vocab_fail_place(
                g->err, SIFT_E_ARG, g->src, 0, 0, (int64_t)s->types_off, (int64_t)id,
                "key 'tokenizer.ggml.token_type': token %llu has type %d; "
                "expected 1..6",
                (unsigned long long)id, (int)type);
        if (type == TT_CONTROL || type == TT_UNKNOWN)
            attr[id] |= SIFT_TOKEN_SPECIAL;
        if (type == TT_UNUSED)
            attr[id] |= SIFT_TOKEN_UNUSED;
        if (type == TT_CONTROL && is_eog_text((const char *)p, len))
            attr[id] |= SIFT_TOKEN_EOG;
        if (type == TT_BYTE && s->model == MODEL_LLAMA) {
            int hi = len == 6 ? sift__hex_digit(p[3]) : -1,
                lo = len == 6 ? sift__hex_digit(p[4]) : -1;
            char e[180];
            if (len != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>' || hi < 0 || lo < 0)
                return sift__vocab_fail_place(
                    g->err, SIFT_E_ARG, g->src, 0, 0, -1, (int64_t)id,
                    "byte token %llu is '%s'; expected <0xHH> with two hex "
                    "digits",
                    (unsigned long long)id, echo_bytes(e, sizeof e, p, len > 40 ? 40 : len));
            o[w++] = (char)(hi << 4 | lo);
        } else if (type == TT_NORMAL || type == TT_UNDEFINED || type == TT_BYTE) {
            if (s->model == MODEL_GPT2) {
                for (size_t i = 0; i < len;) {
                    uint32_t cp = 0;
                    size_t k = sift__utf8_decode(p + i, len - i, &cp);
                    int b = k ? gpt2_byte(cp) : -1;
                    if (!k)
                        return sift__vocab_fail_place(
                            g->err, SIFT_E_ARG, g->src, 0, 0, -1, (int64_t)id,
                            "token %llu is not byte-level BPE text: invalid "
                            "UTF-8 at byte %zu",
                            (unsigned long long)id, i);
                    if (b < 0)
                        return sift__vocab_fail_place(
                            g->err, SIFT_E_ARG, g->src, 0, 0, -1, (int64_t)id,
                            "token %llu is not byte-level BPE text: U+%04X at "
                            "byte %zu stands for no byte",
                            (unsigned long long)id, (unsigned)cp, i);
                    o[w++] = (char)b;
                    i += k;
                }
            } else {
                for (size_t i = 0; i < len;) {
                    if (i + 3 <= len && p[i] == 0xE2 && p[i + 1] == 0x96 && p[i + 2] == 0x81) {
                        o[w++] = ' ';
                        i += 3;
                    } else {
                        o[w++] = (char)p[i++];
                    }
                }
            }
        } else {
            /* control, user defined, unknown, unused: the text as stored */
            memmove(o + w, p, len);
            w += len;
        }
        s->off[id] = start;
    }
    s->off[s->n] = w;
    return SIFT_OK;
}

/* The `tokenizer.ggml.pre` names sift has a pre-tokenizer for, with
 * what the Hugging Face tokenizer those files come from does: Llama 3's
 * BPE takes a pre-token that is a token whole (ignore_merges); Qwen2's
 * and GPT-2's always merge from the bytes. */
static const struct pre_name {
    const char *name;
    sift_pretokenizer kind;
    int ignore_merges;
} pre_names[] = {
    {.name = "llama-bpe", .kind = SIFT_PRETOK_CL100K, .ignore_merges = 1},
    {.name = "llama3", .kind = SIFT_PRETOK_CL100K, .ignore_merges = 1},
    {.name = "llama-v3", .kind = SIFT_PRETOK_CL100K, .ignore_merges = 1},
    {.name = "qwen2", .kind = SIFT_PRETOK_QWEN2, .ignore_merges = 0},
    {.name = "gpt-2", .kind = SIFT_PRETOK_GPT2, .ignore_merges = 0},
};

/* Fails merge k with a message that names it, at its place in the file
 * (its string starts after k + 1 lengths and the strings before it). */
SIFT__PRINTF(4, 5)
static sift_status merge_fail(gin *g, const gguf_state *s, uint64_t k, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sift__vocab_fail_place(
        g->err, SIFT_E_ARG, g->src, 0, 0, (int64_t)(s->merges_at + 8 * (k + 1) + s->moff[k]),
        (int64_t)k, "key 'tokenizer.ggml.merges': merge %llu %s", (unsigned long long)k, msg);
}

/* Checks merge k, p[0 .. len), while the string is still intact (to show
 * it in a message): byte-level BPE text, one space between two non-empty
 * pieces. */
static sift_status check_merge(gin *g, const gguf_state *s, uint64_t k, const unsigned char *p,
                               size_t len)
{
    size_t split = SIZE_MAX, bad_at = SIZE_MAX;
    uint32_t bad_cp = 0;
    int spaces = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t c = sift__utf8_decode(p + i, len - i, &cp);
        if (!c || (cp != ' ' && gpt2_byte(cp) < 0)) {
            bad_at = i;
            bad_cp = c ? cp : UINT32_MAX;
            break;
        }
        if (cp == ' ' && spaces++ == 0)
            split = i;
        i += c;
    }
    if (bad_at == SIZE_MAX && spaces == 1 && split != 0 && split + 1 != len)
        return SIFT_OK;
    char e[120];
    const char *shown = echo_bytes(e, sizeof e, p, len > 40 ? 40 : len);
    const char *more = len > 40 ? "..." : "";
    if (bad_at != SIZE_MAX && bad_cp == UINT32_MAX)
        return merge_fail(g, s, k, "'%s%s' is not byte-level BPE text: invalid UTF-8 at byte %zu",
                          shown, more, bad_at);
    if (bad_at != SIZE_MAX)
        return merge_fail(g, s, k,
                          "'%s%s' is not byte-level BPE text: U+%04X at byte %zu stands "
                          "for no byte",
                          shown, more, (unsigned)bad_cp, bad_at);
    if (spaces == 0)
        return merge_fail(g, s, k, "'%s%s' has no space; expected two pieces 'A B'", shown, more);
    if (spaces > 1)
        return merge_fail(g, s, k, "'%s%s' has more than one space; expected 'A B'", shown, more);
    return merge_fail(g, s, k, "'%s%s' has an empty piece; expected 'A B'", shown, more);
}

/* Decodes the merge strings in place into piece pairs: dec[2k], dec[2k+1]
 * and dec[2k+2] bound merge k's two pieces. Each is checked first. */
static sift_status decode_merges(gin *g, gguf_state *s, uint64_t *dec)
{
    uint64_t n = s->n_merges;
    uint64_t w = 0; /* decoding only shrinks a string */
    for (uint64_t k = 0; k < n; k++) {
        const unsigned char *p = (const unsigned char *)s->mbytes + s->moff[k];
        size_t len = (size_t)(s->moff[k + 1] - s->moff[k]);
        sift_status st = check_merge(g, s, k, p, len);
        if (st != SIFT_OK)
            return st;
        dec[2 * k] = w;
        for (size_t i = 0; i < len;) {
            uint32_t cp = 0;
            size_t c = sift__utf8_decode(p + i, len - i, &cp);
            if (cp == ' ')
                dec[2 * k + 1] = w;
            else
                s->mbytes[w++] = (char)gpt2_byte(cp);
            i += c;
        }
    }
    dec[2 * n] = w;
    return SIFT_OK;
}

/* The ids of the user-defined tokens (type 4), which the encoder matches
 * whole, in a new array (NULL when there are none). */
static sift_status user_tokens(gin *g, const gguf_state *s, int32_t **user, size_t *n_user)
{
    size_t n = 0;
    *user = NULL;
    *n_user = 0;
    for (uint64_t id = 0; s->types && id < s->n; id++)
        n += s->types[id] == TT_USER;
    if (!n)
        return SIFT_OK;
    if (!(*user = sift__malloc(s->al, n, sizeof **user)))
        return sift__fail(g->err, SIFT_E_NOMEM, "out of memory");
    for (uint64_t id = 0; id < s->n; id++)
        if (s->types[id] == TT_USER)
            (*user)[(*n_user)++] = (int32_t)id;
    return SIFT_OK;
}

/* The pre-tokenizer tokenizer.ggml.pre names, into spec's kind and
 * ignore_merges (spec->why NULL); when there is no such key or sift has
 * no pattern for the name, the reason goes to why[0 .. cap). */
static void pre_spec(const gguf_state *s, sift__bpe_gguf *spec, char *why, size_t cap)
{
    spec->why = why;
    if (!s->have_pre) {
        snprintf(why, cap,
                 "the GGUF file has no 'tokenizer.ggml.pre' key (give one with "
                 "sift_vocab_set_pretokenizer; the file's merges are kept)");
        return;
    }
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++) {
        if (s->pre_full == strlen(pre_names[i].name) &&
            memcmp(s->pre, pre_names[i].name, s->pre_full) == 0) {
            spec->kind = pre_names[i].kind;
            spec->ignore_merges = pre_names[i].ignore_merges;
            spec->why = NULL;
        }
    }
    char e[120];
    if (spec->why)
        snprintf(why, cap,
                 "GGUF key 'tokenizer.ggml.pre' is '%s%s', which sift has no pattern for "
                 "(docs/encoding.md lists the names it knows; give one with "
                 "sift_vocab_set_pretokenizer)",
                 echo_bytes(e, sizeof e, s->pre, s->pre_len > 40 ? 40 : s->pre_len),
                 s->pre_full > 40 ? "..." : "");
}

/* Decodes the merges, then gives v its encoder; a merge whose pieces are
 * not tokens is reported at its place in the file. */
static sift_status gguf_bpe(gin *g, gguf_state *s, sift_vocab *v)
{
    uint64_t n = s->n_merges;
    uint64_t *dec = sift__malloc(s->al, (size_t)(2 * n + 1), sizeof *dec);
    int32_t *user = NULL;
    size_t n_user = 0;
    if (!dec)
        return sift__fail(g->err, SIFT_E_NOMEM, "out of memory for %llu merges",
                          (unsigned long long)n);
    sift_status st = decode_merges(g, s, dec);
    if (st == SIFT_OK)
        st = user_tokens(g, s, &user, &n_user);
    char why[240];
    sift__bpe_gguf spec = {.kind = SIFT_PRETOK_NONE,
                           .ignore_merges = 0,
                           .why = why,
                           .n_merges = (size_t)n,
                           .off = dec,
                           .bytes = s->mbytes ? s->mbytes : "",
                           .user = user,
                           .n_user = n_user};
    pre_spec(s, &spec, why, sizeof why);
    if (st == SIFT_OK) {
        size_t bad;
        int part;
        st = sift__bpe_set_gguf(v, &spec, &bad, &part, g->err);
        if (st == SIFT_E_ARG && bad != SIZE_MAX) {
            static const char *const parts[3] = {"its left piece", "its right piece",
                                                 "its two pieces together"};
            const char *b = s->mbytes;
            uint64_t a = dec[2 * bad], m = dec[2 * bad + 1], c = dec[2 * bad + 2];
            char l[100], r[100];
            st = merge_fail(g, s, bad, "('%s' '%s'): %s %s not a token",
                            echo_bytes(l, sizeof l, b + a, m - a > 24 ? 24 : (size_t)(m - a)),
                            echo_bytes(r, sizeof r, b + m, c - m > 24 ? 24 : (size_t)(c - m)),
                            parts[part], part == 2 ? "are" : "is");
        }
    }
    sift__free(s->al, dec);
    sift__free(s->al, user);
    return st;
}

/* The file header: magic, version (2 or 3, little endian), the tensor
 * count, and the key/value count in *n_kv (checked against the bytes
 * left). */
static sift_status read_header(gin *g, uint64_t *n_kv)
{
    unsigned char hdr[8];
    sift_status st = gin_read(g, hdr, 4, "the magic number");
    if (st)
        return st;
    if (memcmp(hdr, "GGUF", 4) != 0) {
        g->pos = 0;
        return gfail(g, SIFT_E_ARG, "not a GGUF file (magic %02x %02x %02x %02x)", hdr[0], hdr[1],
                     hdr[2], hdr[3]);
    }
    uint32_t version;
    if ((st = gin_u32(g, &version, "the version")))
        return st;
    if (version != 2 && version != 3) {
        g->pos = 4;
        if (version == 0x02000000u || version == 0x03000000u)
            return gfail(g, SIFT_E_ARG, "big-endian GGUF is not supported");
        return gfail(g, SIFT_E_ARG, "GGUF version %u is not supported (2 and 3 are)",
                     (unsigned)version);
    }
    uint64_t n_tensors;
    if ((st = gin_u64(g, &n_tensors, "the tensor count")))
        return st;
    if ((st = gin_u64(g, n_kv, "the key/value count")))
        return st;
    /* The smallest pair is 13 bytes (an empty key, a type, a u8). */
    if (*n_kv > gin_left(g) / 13) {
        g->pos -= 8;
        return gfail(g, SIFT_E_ARG, "%llu key/value pairs cannot fit in the %llu bytes left",
                     (unsigned long long)*n_kv, (unsigned long long)(gin_left(g) - 8));
    }
    return SIFT_OK;
}

/* After the key/value pairs: the keys a vocabulary needs were there, and
 * as many token types as tokens. */
static sift_status check_keys(gin *g, const gguf_state *s)
{
    if (!s->have_tokens)
        return gfail(g, SIFT_E_ARG, "no 'tokenizer.ggml.tokens' key: the file has no vocabulary");
    if (!s->have_model)
        return gfail(g, SIFT_E_ARG, "no 'tokenizer.ggml.model' key: the tokenizer is unknown");
    if (s->have_types && s->n_types != s->n)
        return sift__vocab_fail_place(g->err, SIFT_E_ARG, g->src, 0, 0, (int64_t)s->types_off, -1,
                                      "key 'tokenizer.ggml.token_type': %llu types for %llu tokens",
                                      (unsigned long long)s->n_types, (unsigned long long)s->n);
    return SIFT_OK;
}

/* Sets the EOG bit of the eos, eot and eom ids the file names (each in
 * range). */
static sift_status mark_eog(gin *g, const gguf_state *s, uint8_t *attr)
{
    static const char *const eog_names[3] = {"eos", "eot", "eom"};
    for (int k = 0; k < 3; k++) {
        if (s->eog[k] < 0)
            continue;
        if ((uint64_t)s->eog[k] >= s->n)
            return sift__vocab_fail_place(
                g->err, SIFT_E_ARG, g->src, 0, 0, -1, s->eog[k],
                "key 'tokenizer.ggml.%s_token_id': token %lld out of range [0, %llu)", eog_names[k],
                (long long)s->eog[k], (unsigned long long)s->n);
        attr[s->eog[k]] |= SIFT_TOKEN_EOG;
    }
    return SIFT_OK;
}

/* The whole load: header, key/value pairs, pieces, EOG ids, then the
 * vocabulary and (gpt2 with merges) its encoder. */
static sift_status gguf_parse(sift_vocab **out, gin *g, const sift__alloc *al)
{
    gguf_state s;
    memset(&s, 0, sizeof s);
    s.al = al;
    s.eog[0] = s.eog[1] = s.eog[2] = -2; /* -2: key absent */
    uint8_t *attr = NULL;
    char key[256];
    uint64_t n_kv = 0;
    sift_status st = read_header(g, &n_kv);
    if (st)
        goto done;
    for (uint64_t i = 0; i < n_kv; i++) {
        if ((st = read_kv(g, &s, i, key, sizeof key)))
            goto done;
    }
    g->key = NULL;
    /* Tensor infos and data follow; they are not read. */
    if ((st = check_keys(g, &s)))
        goto done;
    attr = sift__calloc(al, (size_t)s.n, 1);
    if (!attr) {
        st = sift__fail(g->err, SIFT_E_NOMEM, "out of memory for %llu tokens",
                        (unsigned long long)s.n);
        goto done;
    }
    if ((st = decode_pieces(g, &s, attr)) || (st = mark_eog(g, &s, attr)))
        goto done;
    if (s.bytes == NULL) {
        /* every piece empty: the byte block still needs to exist */
        s.bytes = sift__malloc(al, 1, 1);
        if (!s.bytes) {
            st = sift__fail(g->err, SIFT_E_NOMEM, "out of memory");
            goto done;
        }
    }
    st = sift__vocab_adopt(out, al, (int32_t)s.n, s.off, s.bytes, attr, g->err);
    s.off = NULL;
    s.bytes = NULL;
    attr = NULL;
    if (st == SIFT_OK && s.model == MODEL_GPT2 && s.have_merges &&
        (st = gguf_bpe(g, &s, *out)) != SIFT_OK) {
        sift_vocab_free(*out);
        *out = NULL;
    }
done:
    sift__free(al, s.off);
    sift__free(al, s.bytes);
    sift__free(al, s.types);
    sift__free(al, s.moff);
    sift__free(al, s.mbytes);
    sift__free(al, attr);
    return st;
}

sift_status sift_vocab_from_gguf(sift_vocab **out, const void *data, size_t len,
                                 const sift_allocator *allocator, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!data && len)
        return sift__fail(err, SIFT_E_ARG, "data is NULL");
    sift__alloc al;
    sift_status ast = sift__alloc_init(&al, allocator, err);
    if (ast)
        return ast;
    gin g = {data ? (const unsigned char *)data : (const unsigned char *)"",
             NULL,
             len,
             0,
             "<memory>",
             NULL,
             err};
    return gguf_parse(out, &g, &al);
}

sift_status sift_vocab_load_gguf(sift_vocab **out, const char *path,
                                 const sift_allocator *allocator, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!path)
        return sift__fail(err, SIFT_E_ARG, "path is NULL");
    FILE *f;
    uint64_t size;
    sift_status st = open_regular(path, &f, &size, err);
    if (st)
        return st;
    sift__alloc al;
    if ((st = sift__alloc_init(&al, allocator, err))) {
        fclose(f);
        return st;
    }
    gin g = {NULL, f, size, 0, path, NULL, err};
    st = gguf_parse(out, &g, &al);
    fclose(f);
    return st;
}

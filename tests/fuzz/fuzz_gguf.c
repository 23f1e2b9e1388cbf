/*
 * fuzz_gguf.c - libFuzzer target: GGUF byte-level BPE, loading
 * (vocab/vocab_gguf.c: tokenizer.ggml.merges and .pre) and encoding
 * through the merges (vocab/bpe.c).
 *
 * Input: one byte of options, then the body.
 * - bit 0 set: the body is a whole GGUF file, loaded as it is; a load
 *   that succeeds encodes the text "Hello, wor1d 123 <t>\n" below.
 * - bit 0 clear: the body is "MERGES \xff\xff TEXT". The file is written
 *   here: model gpt2, tokenizer.ggml.pre chosen by bits 1-3 (llama-bpe,
 *   qwen2, gpt-2, deepseek-llm, or no key), the 256 byte tokens in the
 *   GPT-2 alphabet, a few merged pieces, a user-defined "<t>" and a
 *   control "<|c|>", and MERGES split at '\n' into the merge strings,
 *   stored as given (the fuzzer reaches malformed ones, pieces that are
 *   not tokens, and GPT-2 text). TEXT is encoded.
 * Bit 4: SIFT_ENCODE_SPECIAL. A load fails only with SIFT_E_ARG or
 * SIFT_E_LIMIT and a message; an encode gives SIFT_OK or SIFT_E_STATE
 * (no encoder); the ids of a success decode to the text and a counting
 * call agrees with them. Anything else aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct buf {
    unsigned char *b;
    size_t n, cap;
} buf;

static void put(buf *g, const void *p, size_t n)
{
    if (g->n + n > g->cap) {
        g->cap = (g->n + n) * 2 + 64;
        g->b = realloc(g->b, g->cap);
        if (!g->b)
            abort();
    }
    memcpy(g->b + g->n, p, n);
    g->n += n;
}

static void put_u32(buf *g, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(g, b, 4);
}

static void put_u64(buf *g, uint64_t v)
{
    put_u32(g, (uint32_t)v);
    put_u32(g, (uint32_t)(v >> 32));
}

static void put_str(buf *g, const void *s, size_t n)
{
    put_u64(g, n);
    put(g, s, n);
}

static void put_key(buf *g, const char *k, uint32_t type)
{
    put_str(g, k, strlen(k));
    put_u32(g, type);
}

/* GPT-2's byte -> code point table, as UTF-8 (one or two bytes). */
static size_t gpt2_utf8(unsigned b, char *o)
{
    uint32_t n = 0, cp = 0;
    for (unsigned x = 0; x < 256; x++) {
        int printable = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
        if (x == b) {
            cp = printable ? x : 256 + n;
            break;
        }
        n += !printable;
    }
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static void put_gpt2(buf *g, const char *s)
{
    char t[64];
    size_t k = 0;
    for (size_t i = 0; s[i]; i++)
        k += gpt2_utf8((unsigned char)s[i], t + k);
    put_str(g, t, k);
}

static const char *const pres[] = {"llama-bpe", "qwen2", "gpt-2", "deepseek-llm"};
static const char *const pieces[] = {"ab", "abc", " a", " ab", "He", "ll",  "Hell",
                                     "lo", "12",  "1",  " wo", "  ", "\n\n"};

static buf make_file(const uint8_t *m, size_t mlen, unsigned pre)
{
    buf g = {0};
    size_t np = sizeof pieces / sizeof pieces[0];
    int has_pre = pre < 4;
    put(&g, "GGUF", 4);
    put_u32(&g, 3);
    put_u64(&g, 0);
    put_u64(&g, has_pre ? 5 : 4);
    put_key(&g, "tokenizer.ggml.model", 8);
    put_str(&g, "gpt2", 4);
    if (has_pre) {
        put_key(&g, "tokenizer.ggml.pre", 8);
        put_str(&g, pres[pre], strlen(pres[pre]));
    }
    put_key(&g, "tokenizer.ggml.tokens", 9);
    put_u32(&g, 8);
    put_u64(&g, 256 + np + 2);
    for (unsigned b = 0; b < 256; b++) {
        char o[2];
        put_str(&g, o, gpt2_utf8(b, o));
    }
    for (size_t i = 0; i < np; i++)
        put_gpt2(&g, pieces[i]);
    put_str(&g, "<t>", 3);
    put_str(&g, "<|c|>", 5);
    put_key(&g, "tokenizer.ggml.token_type", 9);
    put_u32(&g, 5);
    put_u64(&g, 256 + np + 2);
    for (size_t i = 0; i < 256 + np; i++)
        put_u32(&g, 1);
    put_u32(&g, 4);
    put_u32(&g, 3);
    size_t n = 1;
    for (size_t i = 0; i < mlen; i++)
        n += m[i] == '\n';
    put_key(&g, "tokenizer.ggml.merges", 9);
    put_u32(&g, 8);
    put_u64(&g, n);
    size_t start = 0;
    for (size_t i = 0; i <= mlen; i++) {
        if (i == mlen || m[i] == '\n') {
            put_str(&g, m + start, i - start);
            start = i + 1;
        }
    }
    return g;
}

static void check_encode(const sift_vocab *v, const char *t, size_t len, uint32_t flags)
{
    size_t n = 0, n2 = 0;
    sift_status st = sift_vocab_encode(v, t, len, flags, NULL, 0, &n, NULL, NULL);
    if (st == SIFT_E_STATE && n == 0)
        return;
    if (st != SIFT_OK && !(st == SIFT_E_LIMIT && n > 0))
        abort();
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    if (!ids)
        abort();
    if (sift_vocab_encode(v, t, len, flags, ids, n, &n2, NULL, NULL) || n2 != n)
        abort();
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *piece;
        size_t pl;
        if (sift_vocab_piece(v, ids[i], &piece, &pl, NULL) || pl == 0 || at + pl > len ||
            memcmp(piece, t + at, pl) != 0)
            abort();
        at += pl;
    }
    if (at != len)
        abort();
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned opt = data[0];
    uint32_t flags = opt & 16 ? SIFT_ENCODE_SPECIAL : 0;
    const uint8_t *body = data + 1;
    size_t blen = size - 1;
    static const char fixed[] = "Hello, wor1d 123 <t>\n";
    const char *text = fixed;
    size_t tlen = sizeof fixed - 1;
    buf g = {0};
    const void *file = body;
    size_t flen = blen;
    if (!(opt & 1)) {
        size_t cut = blen;
        for (size_t i = 0; i + 1 < blen; i++) {
            if (body[i] == 0xff && body[i + 1] == 0xff) {
                cut = i;
                break;
            }
        }
        g = make_file(body, cut, (opt >> 1) & 7);
        file = g.b;
        flen = g.n;
        text = cut + 2 <= blen ? (const char *)body + cut + 2 : "";
        tlen = cut + 2 <= blen ? blen - cut - 2 : 0;
    }
    sift_vocab *v = NULL;
    sift_error err;
    sift_status st = sift_vocab_from_gguf(&v, file, flen, NULL, &err);
    if (st == SIFT_OK) {
        if (!v)
            abort();
        check_encode(v, text, tlen, flags);
        sift_vocab_free(v);
    } else if ((st != SIFT_E_ARG && st != SIFT_E_LIMIT) || v || err.code != st ||
               err.message[0] == '\0') {
        abort();
    }
    free(g.b);
    return 0;
}

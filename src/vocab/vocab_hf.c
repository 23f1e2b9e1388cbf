/*
 * vocab_hf.c - Hugging Face tokenizer.json vocabularies
 * (sift_vocab_load_hf, sift_vocab_from_hf; docs/vocab.md).
 *
 * What is read, by JSON Pointer:
 *   /model/type            "BPE" (or absent) or "Unigram"; others refused
 *   /model/vocab           BPE: {piece: id}; Unigram: [[piece, score]...]
 *   /model/byte_fallback   true: "<0xHH>" pieces are the byte HH
 *   /model/merges          BPE: ["A B"...] or [["A", "B"]...], the
 *                          encoder's merges (byte-level only; bpe.c runs
 *                          them as it runs GGUF merges), with the
 *                          pre-tokenizer named by /pre_tokenizer's Split
 *   /model/ignore_merges   Llama 3: a pre-token that is a token is taken whole
 *   /added_tokens          [{id, content, special}...]: the piece is the
 *                          content as written; special -> SIFT_TOKEN_SPECIAL
 *   /decoder, /pre_tokenizer  which byte encoding the pieces use:
 *     ByteLevel (GPT-2's byte-to-unicode table: Qwen, Llama 3, GPT-2,
 *     cl100k, o200k) or SentencePiece style (Metaspace, Replace of U+2581,
 *     ByteFallback, or a Unigram model: U+2581 is a space; Llama 2,
 *     Mistral, Gemma). Anything else is refused: sift could not say
 *     which bytes a piece stands for.
 * And from the optional second file (generation_config.json or
 * tokenizer_config.json): /eos_token_id (an id or a list of ids) and
 * /eos_token (a string or {"content": string}), marked SIFT_TOKEN_EOG, as
 * are special added tokens whose text is a well-known end of turn.
 *
 * Invariants: every id is in [0, 2^24) and named once by the vocabulary
 * and once by the added tokens at most (an added token may rename a
 * vocabulary id); ids nobody names are unused (empty piece,
 * SIFT_TOKEN_UNUSED) and may not outnumber the named ones by more than
 * 65,536. Every failure is SIFT_E_ARG (or _LIMIT, _IO, _NOMEM) with the
 * JSON Pointer of the value at fault; JSON syntax errors carry jansson's
 * line and column. Nothing is allocated per entry beyond the final
 * tables, and the files are read whole (at most 256 MiB each).
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "../sift_internal.h"
#include "vocab.h"

#define HF_MAX_BYTES ((size_t)256 << 20)
#define HF_MAX_ID ((int64_t)1 << 24)
#define HF_MAX_GAPS 65536

enum { ENC_BYTE_LEVEL = 1, ENC_SENTENCEPIECE = 2 };

typedef struct hf {
    const sift__alloc *al;
    const char *src;  /* tokenizer source name */
    const char *csrc; /* config source name */
    sift_error *err;
    int enc, byte_fallback;
    int64_t n;
    /* per id: the piece as written, where it comes from, its pointer */
    const char **txt;
    size_t *len;
    uint8_t *from; /* 0 none, 1 vocab, 2 added */
    uint8_t *attr;
    const uint8_t *attr_keep; /* the adopted bits, read through the vocabulary */
    size_t n_named;
} hf;

/* A short, printable form of bytes for messages. */
static const char *show(char *buf, size_t cap, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F && c != '\'')
            buf[k++] = (char)c;
        else if (c >= 0x80 && i + 1 < n && k + 12 < cap) {
            /* keep UTF-8 as it is: messages are UTF-8 */
            uint32_t cp;
            size_t l = sift__utf8_decode((const unsigned char *)s + i, n - i, &cp);
            if (l) {
                memcpy(buf + k, s + i, l);
                k += l;
                i += l - 1;
            } else {
                k += (size_t)snprintf(buf + k, cap - k, "\\x%02X", c);
            }
        } else {
            k += (size_t)snprintf(buf + k, cap - k, "\\x%02X", c);
        }
    }
    if (k + 4 < cap && n > 0 && k >= cap - 9)
        memcpy(buf + k, "...", 3), k += 3;
    buf[k] = 0;
    return buf;
}

/* A JSON Pointer token: "~" -> "~0", "/" -> "~1", cut to fit. */
static const char *ptr_key(char *buf, size_t cap, const char *s, size_t n)
{
    char t[160];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 3 < sizeof t; i++) {
        if (s[i] == '~')
            t[k++] = '~', t[k++] = '0';
        else if (s[i] == '/')
            t[k++] = '~', t[k++] = '1';
        else
            t[k++] = s[i];
    }
    return show(buf, cap, t, k);
}

SIFT__PRINTF(5, 6)
static sift_status hfail(hf *h, sift_status code, const char *src, int64_t index, const char *fmt,
                         ...)
{
    if (!h->err)
        return code;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sift__fail_at(h->err, code, index, "%s: %s", src, msg);
    h->err->line = h->err->column = 0;
    h->err->offset = -1;
    sift__strlcpy_utf8(h->err->source, src, sizeof h->err->source);
    return code;
}

static sift_status parse_json(hf *h, json_t **out, const char *data, size_t len, const char *src,
                              size_t flags)
{
    json_error_t je;
    *out = json_loadb(data ? data : "", len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | flags, &je);
    if (*out)
        return SIFT_OK;
    if (h->err) {
        sift__fail(h->err, SIFT_E_ARG, "%s:%d:%d: %s", src, je.line, je.column, je.text);
        h->err->line = je.line;
        h->err->column = je.column;
        h->err->offset = je.position;
        sift__strlcpy_utf8(h->err->source, src, sizeof h->err->source);
    }
    return SIFT_E_ARG;
}

/* Whether the decoder or pre-tokenizer `j` is of type `type`, or is a
 * Sequence holding one (under `list`). */
static int has_type(const json_t *j, const char *list, const char *type)
{
    if (!json_is_object(j))
        return 0;
    const char *t = json_string_value(json_object_get(j, "type"));
    if (t && !strcmp(t, type))
        return 1;
    if (t && !strcmp(t, "Sequence")) {
        const json_t *a = json_object_get(j, list);
        size_t i;
        const json_t *e;
        json_array_foreach(a, i, e) if (has_type(e, list, type)) return 1;
    }
    return 0;
}

/* A Replace decoder of U+2581 by a space (Llama 2, Mistral, Gemma). */
static int has_replace_metaspace(const json_t *j)
{
    if (!json_is_object(j))
        return 0;
    const char *t = json_string_value(json_object_get(j, "type"));
    if (t && !strcmp(t, "Replace")) {
        const char *p = json_string_value(json_object_get(json_object_get(j, "pattern"), "String"));
        return p && !strcmp(p, "\xe2\x96\x81");
    }
    if (t && !strcmp(t, "Sequence")) {
        size_t i;
        const json_t *e;
        json_array_foreach(json_object_get(j, "decoders"), i,
                           e) if (has_replace_metaspace(e)) return 1;
    }
    return 0;
}

/* An id at `ptr`: an integer in [0, 2^24). */
static sift_status get_id(hf *h, const json_t *v, const char *src, const char *ptr, int64_t *id)
{
    /* the config is parsed with integers as reals (its model_max_length
     * may exceed 64 bits), so an integral real is an integer here */
    double r = json_is_real(v) ? json_real_value(v) : 0;
    if (json_is_real(v) && (r != r || r < -1e15 || r > 1e15 || r != (double)(int64_t)r))
        return hfail(h, SIFT_E_ARG, src, -1, "%s: expected an integer token id", ptr);
    if (!json_is_integer(v) && !json_is_real(v))
        return hfail(h, SIFT_E_ARG, src, -1, "%s: expected an integer token id", ptr);
    json_int_t x = json_is_real(v) ? (json_int_t)r : json_integer_value(v);
    if (x < 0)
        return hfail(h, SIFT_E_ARG, src, (int64_t)x, "%s: token id %lld is negative", ptr,
                     (long long)x);
    if (x >= HF_MAX_ID)
        return hfail(h, SIFT_E_LIMIT, src, -1, "%s: token id %lld out of range [0, %lld)", ptr,
                     (long long)x, (long long)HF_MAX_ID);
    *id = (int64_t)x;
    return SIFT_OK;
}

/* Texts of special tokens that end a turn (as the GGUF loader's list,
 * with the SentencePiece and Llama 3 end-of-sequence texts). */
static int is_eog_text(const char *s, size_t n)
{
    static const char *const texts[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",   "<|eom_id|>", "<|endoftext|>",
        "<EOT>",      "</s>",       "<eos>",   "<|end_of_text|>", "<|return|>", "<|call|>"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (strlen(texts[i]) == n && memcmp(texts[i], s, n) == 0)
            return 1;
    return 0;
}

/* The GPT-2 byte-level table, inverted (as in vocab_gguf.c): the byte a
 * code point stands for, or -1. */
static int gpt2_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 256 || cp >= 256 + 68)
        return -1;
    uint32_t k = cp - 256;
    if (k <= 0x20)
        return (int)k;
    if (k <= 0x20 + 34)
        return (int)(0x7F + (k - 0x21));
    return 0xAD;
}

/* Decodes vocabulary piece s[0..n) into o (at most n bytes), returning
 * its length, or -1 with *bad_at / *bad_cp for a byte-level piece with a
 * code point that stands for no byte (bad_cp = UINT32_MAX: invalid
 * UTF-8). */
static int64_t decode_piece(const hf *h, const char *s, size_t n, char *o, size_t *bad_at,
                            uint32_t *bad_cp)
{
    size_t w = 0;
    const unsigned char *p = (const unsigned char *)s;
    if (h->enc == ENC_BYTE_LEVEL) {
        for (size_t i = 0; i < n;) {
            uint32_t cp = 0;
            size_t k = sift__utf8_decode(p + i, n - i, &cp);
            int b = k ? gpt2_byte(cp) : -1;
            if (b < 0) {
                *bad_at = i;
                *bad_cp = k ? cp : UINT32_MAX;
                return -1;
            }
            o[w++] = (char)b;
            i += k;
        }
        return (int64_t)w;
    }
    if (h->byte_fallback && n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' &&
        sift__hex_digit(s[3]) >= 0 && sift__hex_digit(s[4]) >= 0) {
        o[0] = (char)(sift__hex_digit(s[3]) << 4 | sift__hex_digit(s[4]));
        return 1;
    }
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && p[i] == 0xE2 && p[i + 1] == 0x96 && p[i + 2] == 0x81) {
            o[w++] = ' ';
            i += 3;
        } else {
            o[w++] = s[i++];
        }
    }
    return (int64_t)w;
}

/* Records piece `txt` for `id` from source `from` (1 vocab, 2 added). */
static sift_status name_id(hf *h, int64_t id, const char *txt, size_t len, int from,
                           const char *ptr)
{
    if (h->from[id] == from)
        return hfail(h, SIFT_E_ARG, h->src, id, "%s: token id %lld is given twice", ptr,
                     (long long)id);
    if (!h->from[id])
        h->n_named++;
    h->from[id] = (uint8_t)from;
    h->txt[id] = txt;
    h->len[id] = len;
    return SIFT_OK;
}

/* Pass 1 finds the largest id; pass 2 (tables allocated) records every
 * piece. The model's entries come first, the added tokens after, so that
 * an added token renames a vocabulary id. */
static sift_status walk(hf *h, const json_t *root, int pass, int64_t *max_id)
{
    const json_t *model = json_object_get(root, "model");
    const json_t *vocab = json_object_get(model, "vocab");
    const char *type = json_string_value(json_object_get(model, "type"));
    int unigram = type && !strcmp(type, "Unigram");
    char kb[200], ptr[260];
    sift_status st;
    int64_t id;
    if (unigram) {
        if (!json_is_array(vocab))
            return hfail(h, SIFT_E_ARG, h->src, -1,
                         "/model/vocab: expected an array of [piece, score] for a Unigram model");
        size_t i;
        const json_t *e;
        json_array_foreach(vocab, i, e)
        {
            const json_t *p = json_array_get(e, 0);
            if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(p) ||
                !json_is_number(json_array_get(e, 1)))
                return hfail(h, SIFT_E_ARG, h->src, (int64_t)i,
                             "/model/vocab/%zu: expected [piece, score]", i);
            if ((int64_t)i >= HF_MAX_ID)
                return hfail(h, SIFT_E_LIMIT, h->src, -1, "/model/vocab: over %lld entries",
                             (long long)HF_MAX_ID);
            if (pass == 1 && (int64_t)i > *max_id)
                *max_id = (int64_t)i;
            snprintf(ptr, sizeof ptr, "/model/vocab/%zu", i);
            if (pass == 2 &&
                (st = name_id(h, (int64_t)i, json_string_value(p), json_string_length(p), 1, ptr)))
                return st;
        }
    } else {
        if (!json_is_object(vocab))
            return hfail(h, SIFT_E_ARG, h->src, -1,
                         "/model/vocab: expected an object {piece: id} for a BPE model");
        const char *key;
        size_t klen;
        json_t *v;
        json_object_keylen_foreach((json_t *)vocab, key, klen, v)
        {
            snprintf(ptr, sizeof ptr, "/model/vocab/%s", ptr_key(kb, sizeof kb, key, klen));
            if ((st = get_id(h, v, h->src, ptr, &id)))
                return st;
            if (pass == 1 && id > *max_id)
                *max_id = id;
            if (pass == 2 && (st = name_id(h, id, key, klen, 1, ptr)))
                return st;
        }
    }
    const json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_array(added) && !json_is_null(added))
        return hfail(h, SIFT_E_ARG, h->src, -1, "/added_tokens: expected an array");
    size_t i;
    const json_t *a;
    json_array_foreach(added, i, a)
    {
        if (!json_is_object(a))
            return hfail(h, SIFT_E_ARG, h->src, (int64_t)i, "/added_tokens/%zu: expected an object",
                         i);
        snprintf(ptr, sizeof ptr, "/added_tokens/%zu/id", i);
        if ((st = get_id(h, json_object_get(a, "id"), h->src, ptr, &id)))
            return st;
        const json_t *c = json_object_get(a, "content");
        if (!json_is_string(c) || json_string_length(c) == 0)
            return hfail(h, SIFT_E_ARG, h->src, id,
                         "/added_tokens/%zu/content: expected a non-empty string", i);
        const json_t *sp = json_object_get(a, "special");
        if (sp && !json_is_boolean(sp))
            return hfail(h, SIFT_E_ARG, h->src, id,
                         "/added_tokens/%zu/special: expected true or false", i);
        if (pass == 1 && id > *max_id)
            *max_id = id;
        if (pass == 2) {
            snprintf(ptr, sizeof ptr, "/added_tokens/%zu", i);
            if ((st = name_id(h, id, json_string_value(c), json_string_length(c), 2, ptr)))
                return st;
            h->attr[id] = json_is_true(sp) ? SIFT_TOKEN_SPECIAL : 0;
            if (json_is_true(sp) && is_eog_text(json_string_value(c), json_string_length(c)))
                h->attr[id] |= SIFT_TOKEN_EOG;
        }
    }
    return SIFT_OK;
}

/* Which byte encoding the pieces use. */
static sift_status find_encoding(hf *h, const json_t *root)
{
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return hfail(h, SIFT_E_ARG, h->src, -1, "/model: expected an object");
    const json_t *tj = json_object_get(model, "type");
    const char *type = json_string_value(tj);
    if (tj && !type)
        return hfail(h, SIFT_E_ARG, h->src, -1, "/model/type: expected a string");
    if (type && strcmp(type, "BPE") && strcmp(type, "Unigram"))
        return hfail(h, SIFT_E_ARG, h->src, -1,
                     "/model/type: '%s' is not supported (BPE and Unigram are)",
                     show((char[48]){0}, 48, type, strlen(type)));
    const json_t *bf = json_object_get(model, "byte_fallback");
    if (bf && !json_is_boolean(bf) && !json_is_null(bf))
        return hfail(h, SIFT_E_ARG, h->src, -1, "/model/byte_fallback: expected true or false");
    const json_t *dec = json_object_get(root, "decoder");
    const json_t *pre = json_object_get(root, "pre_tokenizer");
    int bl = has_type(dec, "decoders", "ByteLevel") || has_type(pre, "pretokenizers", "ByteLevel");
    int sp = has_type(dec, "decoders", "Metaspace") || has_type(dec, "decoders", "ByteFallback") ||
             has_replace_metaspace(dec) || has_type(pre, "pretokenizers", "Metaspace") ||
             (type && !strcmp(type, "Unigram")) || json_is_true(bf);
    if (bl && sp)
        return hfail(h, SIFT_E_ARG, h->src, -1,
                     "/decoder: both a ByteLevel and a SentencePiece-style (Metaspace, U+2581, "
                     "ByteFallback) part; sift cannot tell which bytes the pieces stand for");
    if (!bl && !sp)
        return hfail(h, SIFT_E_ARG, h->src, -1,
                     "/decoder: neither ByteLevel nor SentencePiece-style (Metaspace, Replace of "
                     "U+2581, ByteFallback); sift cannot tell which bytes the pieces stand for");
    h->enc = bl ? ENC_BYTE_LEVEL : ENC_SENTENCEPIECE;
    h->byte_fallback = sp && (json_is_true(bf) || has_type(dec, "decoders", "ByteFallback"));
    return SIFT_OK;
}

/* The end-of-generation ids of the optional config file. */
static sift_status read_config(hf *h, const json_t *cfg)
{
    if (!json_is_object(cfg))
        return hfail(h, SIFT_E_ARG, h->csrc, -1, "/: expected an object");
    const json_t *ids = json_object_get(cfg, "eos_token_id");
    char ptr[64];
    int64_t id;
    sift_status st;
    if (ids && !json_is_null(ids)) {
        if (json_is_array(ids)) {
            size_t i;
            const json_t *e;
            json_array_foreach(ids, i, e)
            {
                snprintf(ptr, sizeof ptr, "/eos_token_id/%zu", i);
                if ((st = get_id(h, e, h->csrc, ptr, &id)))
                    return st;
                if (id >= h->n)
                    return hfail(h, SIFT_E_TOKEN, h->csrc, id,
                                 "%s: token %lld out of range [0, %lld)", ptr, (long long)id,
                                 (long long)h->n);
                h->attr[id] |= SIFT_TOKEN_EOG;
            }
        } else {
            if ((st = get_id(h, ids, h->csrc, "/eos_token_id", &id)))
                return st;
            if (id >= h->n)
                return hfail(h, SIFT_E_TOKEN, h->csrc, id,
                             "/eos_token_id: token %lld out of range [0, %lld)", (long long)id,
                             (long long)h->n);
            h->attr[id] |= SIFT_TOKEN_EOG;
        }
    }
    const json_t *tok = json_object_get(cfg, "eos_token");
    const char *where = "/eos_token";
    if (json_is_object(tok)) {
        tok = json_object_get(tok, "content");
        where = "/eos_token/content";
        if (!json_is_string(tok))
            return hfail(h, SIFT_E_ARG, h->csrc, -1, "%s: expected a string", where);
    }
    if (tok && !json_is_null(tok)) {
        if (!json_is_string(tok))
            return hfail(h, SIFT_E_ARG, h->csrc, -1, "%s: expected a string or {\"content\": ...}",
                         where);
        const char *s = json_string_value(tok);
        size_t n = json_string_length(tok);
        /* an added token first (its text is the piece as written), then
         * a piece of the vocabulary as written */
        int64_t found = -1;
        for (int from = 2; from >= 1 && found < 0; from--)
            for (int64_t k = 0; k < h->n && found < 0; k++)
                if (h->from[k] == from && h->len[k] == n && !memcmp(h->txt[k], s, n))
                    found = k;
        if (found < 0) {
            char b[80];
            return hfail(h, SIFT_E_ARG, h->csrc, -1, "%s: '%s' is not a token of the tokenizer",
                         where, show(b, sizeof b, s, n > 40 ? 40 : n));
        }
        h->attr[found] |= SIFT_TOKEN_EOG;
    }
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* The encoder: merges and the pre-tokenizer                           */
/* ------------------------------------------------------------------ */

/* The Split patterns of the pre-tokenizers sift has, as tokenizer.json
 * writes them (Llama 3 and cl100k share one; Qwen2's takes single
 * digits; o200k's is tiktoken's). */
static const struct {
    const char *regex;
    sift_pretokenizer kind;
} split_patterns[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     SIFT_PRETOK_CL100K},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     SIFT_PRETOK_QWEN2},
    {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:"
     "'s|"
     "'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}"
     "\\p{"
     "Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/"
     "]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     SIFT_PRETOK_O200K},
};

/* The pre-tokenizer sift has for /pre_tokenizer, or NONE with `why`. A
 * Split (Isolated, or Removed and inverted: both keep the matches as
 * pre-tokens, and these patterns cover all text) of a known pattern, in a
 * Sequence with a ByteLevel that does not split; or a ByteLevel alone
 * that splits with GPT-2's pattern. */
static sift_pretokenizer find_pretok(const json_t *pre, char *why, size_t cap)
{
    const json_t *split = NULL, *bl = NULL;
    const char *t = json_string_value(json_object_get(pre, "type"));
    if (t && !strcmp(t, "Sequence")) {
        size_t i;
        const json_t *e;
        json_array_foreach(json_object_get(pre, "pretokenizers"), i, e)
        {
            const char *et = json_string_value(json_object_get(e, "type"));
            if (et && !strcmp(et, "Split") && !split)
                split = e;
            else if (et && !strcmp(et, "ByteLevel") && !bl)
                bl = e;
            else {
                snprintf(why, cap, "its pre-tokenizer has a '%s' step, which sift does not have",
                         et ? et : "?");
                return SIFT_PRETOK_NONE;
            }
        }
    } else if (t && !strcmp(t, "ByteLevel")) {
        bl = pre;
    }
    if (bl && json_is_true(json_object_get(bl, "add_prefix_space"))) {
        snprintf(why, cap, "its ByteLevel pre-tokenizer adds a prefix space, which sift does not");
        return SIFT_PRETOK_NONE;
    }
    if (!split) {
        const json_t *ur = json_object_get(bl, "use_regex");
        if (bl && (!ur || json_is_true(ur)))
            return SIFT_PRETOK_GPT2;
        snprintf(why, cap, "sift knows no pre-tokenizer for it (no Split pattern)");
        return SIFT_PRETOK_NONE;
    }
    if (bl && json_is_true(json_object_get(bl, "use_regex"))) {
        snprintf(why, cap,
                 "its pre-tokenizer splits twice (a Split and a ByteLevel with use_regex)");
        return SIFT_PRETOK_NONE;
    }
    const char *behavior = json_string_value(json_object_get(split, "behavior"));
    int invert = json_is_true(json_object_get(split, "invert"));
    const char *rx = json_string_value(json_object_get(json_object_get(split, "pattern"), "Regex"));
    if (!behavior || !rx ||
        !((!strcmp(behavior, "Isolated") && !invert) || (!strcmp(behavior, "Removed") && invert))) {
        snprintf(why, cap, "its Split pre-tokenizer is not one sift has");
        return SIFT_PRETOK_NONE;
    }
    for (size_t k = 0; k < sizeof split_patterns / sizeof *split_patterns; k++)
        if (!strcmp(rx, split_patterns[k].regex))
            return split_patterns[k].kind;
    snprintf(why, cap, "sift has no pre-tokenizer for its Split pattern");
    return SIFT_PRETOK_NONE;
}

/* The bytes the merges' pieces take at most (the UTF-8 of each), each
 * merge checked to be "A B" or ["A", "B"]. */
static sift_status merges_size(hf *h, const json_t *merges, size_t *total)
{
    size_t i;
    const json_t *m;
    *total = 0;
    json_array_foreach(merges, i, m)
    {
        if (json_is_string(m))
            *total += json_string_length(m);
        else if (json_is_array(m) && json_array_size(m) == 2 &&
                 json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1)))
            *total +=
                json_string_length(json_array_get(m, 0)) + json_string_length(json_array_get(m, 1));
        else
            return hfail(h, SIFT_E_ARG, h->src, (int64_t)i,
                         "/model/merges/%zu: expected \"A B\" or [\"A\", \"B\"]", i);
    }
    return SIFT_OK;
}

/* The two pieces of merge i (m: "A B" split at its one space, or a pair),
 * neither empty. */
static sift_status merge_parts(hf *h, const json_t *m, size_t i, const char *part[2],
                               size_t plen[2])
{
    if (json_is_string(m)) {
        const char *s = json_string_value(m), *sp = memchr(s, ' ', json_string_length(m));
        size_t len = json_string_length(m);
        if (!sp || sp == s || sp + 1 == s + len || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)))
            return hfail(h, SIFT_E_ARG, h->src, (int64_t)i,
                         "/model/merges/%zu: expected two non-empty pieces around one space", i);
        part[0] = s, plen[0] = (size_t)(sp - s);
        part[1] = sp + 1, plen[1] = len - plen[0] - 1;
        return SIFT_OK;
    }
    for (int k = 0; k < 2; k++) {
        part[k] = json_string_value(json_array_get(m, (size_t)k));
        plen[k] = json_string_length(json_array_get(m, (size_t)k));
    }
    if (!plen[0] || !plen[1])
        return hfail(h, SIFT_E_ARG, h->src, (int64_t)i, "/model/merges/%zu: a piece is empty", i);
    return SIFT_OK;
}

/* Decodes every merge's two pieces to bytes: off[2i], off[2i+1] and
 * off[2i+2] bound merge i's pieces in bytes. */
static sift_status decode_merges(hf *h, const json_t *merges, uint64_t *off, char *bytes)
{
    size_t i;
    const json_t *m;
    uint64_t w = 0;
    json_array_foreach(merges, i, m)
    {
        const char *part[2];
        size_t plen[2];
        sift_status st = merge_parts(h, m, i, part, plen);
        if (st != SIFT_OK)
            return st;
        for (int k = 0; k < 2; k++) {
            off[2 * i + (size_t)k] = w;
            size_t bad_at = 0;
            uint32_t bad_cp = 0;
            int64_t got = decode_piece(h, part[k], plen[k], bytes + w, &bad_at, &bad_cp);
            if (got < 0)
                return hfail(h, SIFT_E_ARG, h->src, (int64_t)i,
                             "/model/merges/%zu: piece %d is not byte-level BPE text at byte %zu",
                             i, k, bad_at);
            w += (uint64_t)got;
        }
    }
    off[2 * json_array_size(merges)] = w;
    return SIFT_OK;
}

/* Gives v the encoder of a byte-level BPE tokenizer.json: the merges
 * (decoded to bytes), the pre-tokenizer and, as user-defined tokens, the
 * added tokens that are not special. Without merges, or for another
 * encoding, v is left without one. */
static sift_status hf_encoder(hf *h, const json_t *root, sift_vocab *v)
{
    const json_t *model = json_object_get(root, "model");
    const json_t *merges = json_object_get(model, "merges");
    const char *type = json_string_value(json_object_get(model, "type"));
    if (h->enc != ENC_BYTE_LEVEL || (type && strcmp(type, "BPE")) || !merges)
        return SIFT_OK;
    if (!json_is_array(merges))
        return hfail(h, SIFT_E_ARG, h->src, -1, "/model/merges: expected an array");
    size_t n = json_array_size(merges), total = 0;
    sift_status st = merges_size(h, merges, &total);
    if (st != SIFT_OK)
        return st;
    uint64_t *off = sift__malloc(h->al, 2 * n + 1, sizeof *off);
    char *bytes = sift__malloc(h->al, total ? total : 1, 1);
    int32_t *user = sift__malloc(h->al, h->n ? (size_t)h->n : 1, sizeof *user);
    if (!off || !bytes || !user) {
        st = sift__fail(h->err, SIFT_E_NOMEM, "out of memory for %zu merges", n);
        goto done;
    }
    if ((st = decode_merges(h, merges, off, bytes)) != SIFT_OK)
        goto done;
    size_t n_user = 0;
    for (int64_t k = 0; k < h->n; k++)
        if (h->from[k] == 2 && !(h->attr_keep[k] & SIFT_TOKEN_SPECIAL))
            user[n_user++] = (int32_t)k;
    char why[240];
    sift__bpe_gguf spec = {.kind =
                               find_pretok(json_object_get(root, "pre_tokenizer"), why, sizeof why),
                           .ignore_merges = json_is_true(json_object_get(model, "ignore_merges")),
                           .why = why,
                           .n_merges = n,
                           .off = off,
                           .bytes = bytes,
                           .user = user,
                           .n_user = n_user};
    if (spec.kind != SIFT_PRETOK_NONE)
        spec.why = NULL;
    size_t bad = SIZE_MAX;
    int bpart = 0;
    st = sift__bpe_set_gguf(v, &spec, &bad, &bpart, h->err);
    if (st == SIFT_E_ARG && bad != SIZE_MAX) {
        static const char *const parts[3] = {"its left piece is", "its right piece is",
                                             "its two pieces together are"};
        st = hfail(h, SIFT_E_ARG, h->src, (int64_t)bad, "/model/merges/%zu: %s not a token", bad,
                   parts[bpart]);
    }
done:
    sift__free(h->al, off);
    sift__free(h->al, bytes);
    sift__free(h->al, user);
    return st;
}

/* The byte block of the n tokens: unused ids empty, added tokens as
 * written, vocabulary pieces decoded (off[0 .. n] bounds each). */
static sift_status build_pieces(hf *h, size_t n, uint64_t *off, char *bytes)
{
    uint64_t w = 0;
    for (size_t k = 0; k < n; k++) {
        off[k] = w;
        if (h->from[k] == 0) {
            h->attr[k] = SIFT_TOKEN_UNUSED;
        } else if (h->from[k] == 2) {
            memcpy(bytes + w, h->txt[k], h->len[k]);
            w += h->len[k];
        } else {
            size_t bad_at = 0;
            uint32_t bad_cp = 0;
            int64_t m = decode_piece(h, h->txt[k], h->len[k], bytes + w, &bad_at, &bad_cp);
            if (m < 0) {
                char kb[200];
                const char *key = ptr_key(kb, sizeof kb, h->txt[k], h->len[k]);
                if (bad_cp == UINT32_MAX)
                    return hfail(h, SIFT_E_ARG, h->src, (int64_t)k,
                                 "/model/vocab/%s: token %zu is not byte-level BPE text: invalid "
                                 "UTF-8 at byte %zu",
                                 key, k, bad_at);
                return hfail(h, SIFT_E_ARG, h->src, (int64_t)k,
                             "/model/vocab/%s: token %zu is not byte-level BPE text: U+%04X at "
                             "byte %zu stands for no byte",
                             key, k, (unsigned)bad_cp, bad_at);
            }
            w += (uint64_t)m;
        }
    }
    off[n] = w;
    return SIFT_OK;
}

static sift_status hf_parse(sift_vocab **out, hf *h, const char *data, size_t len,
                            const char *cdata, size_t clen)
{
    json_t *root = NULL, *cfg = NULL;
    uint64_t *off = NULL;
    char *bytes = NULL;
    sift_status st;
    if (len > HF_MAX_BYTES)
        return hfail(h, SIFT_E_LIMIT, h->src, -1, "%zu bytes; max %zu", len, HF_MAX_BYTES);
    if (cdata && clen > HF_MAX_BYTES)
        return hfail(h, SIFT_E_LIMIT, h->csrc, -1, "%zu bytes; max %zu", clen, HF_MAX_BYTES);
    if ((st = parse_json(h, &root, data, len, h->src, 0)))
        goto done;
    if (cdata && (st = parse_json(h, &cfg, cdata, clen, h->csrc, JSON_DECODE_INT_AS_REAL)))
        goto done;
    if (!json_is_object(root)) {
        st = hfail(h, SIFT_E_ARG, h->src, -1, "/: expected an object");
        goto done;
    }
    if ((st = find_encoding(h, root)))
        goto done;
    int64_t max_id = -1;
    if ((st = walk(h, root, 1, &max_id)))
        goto done;
    if (max_id < 0) {
        st = hfail(h, SIFT_E_ARG, h->src, -1, "/model/vocab: no tokens");
        goto done;
    }
    h->n = max_id + 1;
    size_t n = (size_t)h->n;
    h->txt = sift__calloc(h->al, n, sizeof *h->txt);
    h->len = sift__calloc(h->al, n, sizeof *h->len);
    h->from = sift__calloc(h->al, n, 1);
    h->attr = sift__calloc(h->al, n, 1);
    if (!h->txt || !h->len || !h->from || !h->attr) {
        st = sift__fail(h->err, SIFT_E_NOMEM, "out of memory for %zu tokens", n);
        goto done;
    }
    if ((st = walk(h, root, 2, &max_id)))
        goto done;
    if (n - h->n_named > h->n_named + HF_MAX_GAPS) {
        st = hfail(h, SIFT_E_LIMIT, h->src, -1,
                   "%zu ids are named but the largest is %lld: over %d unused ids more than named",
                   h->n_named, (long long)max_id, HF_MAX_GAPS);
        goto done;
    }
    size_t total = 0;
    for (size_t k = 0; k < n; k++)
        total += h->len[k];
    off = sift__malloc(h->al, n + 1, sizeof *off);
    bytes = sift__malloc(h->al, total ? total : 1, 1);
    if (!off || !bytes) {
        st = sift__fail(h->err, SIFT_E_NOMEM, "out of memory for %zu tokens", n);
        goto done;
    }
    if ((st = build_pieces(h, n, off, bytes)))
        goto done;
    if (cfg && (st = read_config(h, cfg)))
        goto done;
    /* the attribute bits of the added tokens, for the encoder, before
     * the vocabulary takes them */
    uint8_t *special = sift__malloc(h->al, n, 1);
    if (!special) {
        st = sift__fail(h->err, SIFT_E_NOMEM, "out of memory for %zu tokens", n);
        goto done;
    }
    memcpy(special, h->attr, n);
    st = sift__vocab_adopt(out, h->al, (int32_t)n, off, bytes, h->attr, h->err);
    off = NULL;
    bytes = NULL;
    h->attr = NULL;
    h->attr_keep = special;
    if (st == SIFT_OK && (st = hf_encoder(h, root, *out)) != SIFT_OK) {
        sift_vocab_free(*out);
        *out = NULL;
    }
    sift__free(h->al, special);
done:
    sift__free(h->al, off);
    sift__free(h->al, bytes);
    sift__free(h->al, h->txt);
    sift__free(h->al, h->len);
    sift__free(h->al, h->from);
    sift__free(h->al, h->attr);
    json_decref(root);
    json_decref(cfg);
    return st;
}

sift_status sift_vocab_from_hf(sift_vocab **out, const char *tokenizer_json, size_t len,
                               const char *config_json, size_t config_len,
                               const sift_allocator *allocator, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!tokenizer_json && len)
        return sift__fail(err, SIFT_E_ARG, "tokenizer_json is NULL");
    sift__alloc al;
    sift_status st = sift__alloc_init(&al, allocator, err);
    if (st)
        return st;
    hf h = {.al = &al, .src = "<tokenizer.json>", .csrc = "<config>", .err = err};
    return hf_parse(out, &h, tokenizer_json, len, config_json, config_json ? config_len : 0);
}

sift_status sift_vocab_load_hf(sift_vocab **out, const char *tokenizer_path,
                               const char *config_path, const sift_allocator *allocator,
                               sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!tokenizer_path)
        return sift__fail(err, SIFT_E_ARG, "tokenizer_path is NULL");
    sift__alloc al;
    sift_status st = sift__alloc_init(&al, allocator, err);
    if (st)
        return st;
    char *data = NULL, *cdata = NULL;
    size_t len = 0, clen = 0;
    if ((st = sift__file_read(&al, tokenizer_path, HF_MAX_BYTES, &data, &len, err)))
        return st;
    if (config_path && (st = sift__file_read(&al, config_path, HF_MAX_BYTES, &cdata, &clen, err))) {
        sift__free(&al, data);
        return st;
    }
    hf h = {.al = &al, .src = tokenizer_path, .csrc = config_path, .err = err};
    st = hf_parse(out, &h, data, len, cdata, clen);
    sift__free(&al, data);
    sift__free(&al, cdata);
    return st;
}

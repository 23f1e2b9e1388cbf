/*
 * fuzz_bpe.c - libFuzzer target: the BPE encoder (vocab/bpe.c).
 *
 * Input: one byte of options (bits 0-1: the pre-tokenizer, cl100k,
 * o200k or the custom pattern "(?s).{1,40}|\s"; bit 2:
 * SIFT_ENCODE_SPECIAL; bit 3: encode without a scratch), then the text.
 * The vocabulary is synthetic: the 256 bytes, merged pieces that split
 * UTF-8 sequences and cross pre-token classes, and two special tokens.
 * Every encode must decode to the text, the counting call must agree
 * with the encoding call, a cap one short must be SIFT_E_LIMIT with the
 * same prefix, and the scratch and scratch-less paths must give the same
 * ids; any disagreement aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const merged[] = {
    "ab",    "abc",      "  ",           "    ",     "\n\n",
    " a",    " ab",      "'s",           "'S",       "12",
    "123",   "\xe4\xb8", "\xe4\xb8\xad", "\xf0\x9f", "\xf0\x9f\x98\x80",
    "{\"",   "\":",      "\": ",         "<|",       "|>",
    "a\xe4", " \n",      "ll",           "'ll",      "e\xcc\x81"};
static const char *const specials[] = {"<|end|>", "<|x"};

static sift_vocab *vocab[3];
static sift_encode_scratch *scratch;

static void init(void)
{
    size_t nm = sizeof merged / sizeof merged[0];
    const char *p[256 + sizeof merged / sizeof merged[0]];
    size_t l[256 + sizeof merged / sizeof merged[0]];
    static char bytes[256];
    for (int b = 0; b < 256; b++) {
        bytes[b] = (char)b;
        p[b] = bytes + b;
        l[b] = 1;
    }
    for (size_t i = 0; i < nm; i++) {
        p[256 + i] = merged[i];
        l[256 + i] = strlen(merged[i]);
    }
    sift_vocab *base;
    if (sift_vocab_new(&base, (int32_t)(256 + nm), p, l, NULL, NULL))
        abort();
    const int32_t ids[2] = {(int32_t)(256 + nm), (int32_t)(256 + nm + 1)};
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = specials;
    x.special_ids = ids;
    x.n_special = 2;
    static const char custom[] = "(?s).{1,40}|\\s";
    for (int k = 0; k < 3; k++) {
        if (sift_vocab_extend(&vocab[k], base, &x, NULL, NULL))
            abort();
        sift_pretokenizer kind = k == 0   ? SIFT_PRETOK_CL100K
                                 : k == 1 ? SIFT_PRETOK_O200K
                                          : SIFT_PRETOK_PATTERN;
        if (sift_vocab_set_pretokenizer(vocab[k], kind, k == 2 ? custom : NULL,
                                        k == 2 ? sizeof custom - 1 : 0, NULL))
            abort();
    }
    sift_vocab_free(base);
    if (sift_encode_scratch_new(&scratch, NULL, NULL))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!vocab[0])
        init();
    if (size == 0)
        return 0;
    const sift_vocab *v = vocab[(data[0] & 3) % 3];
    uint32_t flags = data[0] & 4 ? SIFT_ENCODE_SPECIAL : 0;
    sift_encode_scratch *s = data[0] & 8 ? NULL : scratch;
    const char *t = (const char *)data + 1;
    size_t len = size - 1;
    size_t n = 0, n2 = 0;
    sift_status st = sift_vocab_encode(v, t, len, flags, NULL, 0, &n, s, NULL);
    if (st != SIFT_OK && !(st == SIFT_E_LIMIT && n > 0))
        abort();
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    int32_t *other = malloc((n + 1) * sizeof *other);
    if (!ids || !other)
        abort();
    if (sift_vocab_encode(v, t, len, flags, ids, n, &n2, s, NULL) || n2 != n)
        abort();
    if (sift_vocab_encode(v, t, len, flags, other, n, &n2, s ? NULL : scratch, NULL) || n2 != n ||
        memcmp(ids, other, n * sizeof *ids) != 0)
        abort();
    if (n > 0) {
        memset(other, 0xff, n * sizeof *other);
        if (sift_vocab_encode(v, t, len, flags, other, n - 1, &n2, s, NULL) != SIFT_E_LIMIT ||
            n2 != n || memcmp(ids, other, (n - 1) * sizeof *ids) != 0)
            abort();
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *piece;
        size_t pl;
        if (sift_vocab_piece(v, ids[i], &piece, &pl, NULL) || pl == 0 || at + pl > len ||
            memcmp(piece, t + at, pl) != 0)
            abort();
        if (!flags && (sift_vocab_attr(v, ids[i]) & SIFT_TOKEN_SPECIAL))
            abort();
        at += pl;
    }
    if (at != len)
        abort();
    free(ids);
    free(other);
    return 0;
}

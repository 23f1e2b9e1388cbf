/*
 * fuzz_vocab_hf.c - libFuzzer target: Hugging Face tokenizer.json
 * vocabularies (vocab/vocab_hf.c).
 *
 * Input: one byte of options, then the body.
 * - bit 0 clear: the body is a tokenizer.json, loaded alone.
 * - bit 0 set: the body is "TOKENIZER \xff\xff CONFIG": a tokenizer.json
 *   and a generation_config.json / tokenizer_config.json.
 * A load fails only with SIFT_E_ARG, SIFT_E_LIMIT or SIFT_E_TOKEN, a
 * message that starts with the source name, and no vocabulary; a load
 * that succeeds gives a vocabulary whose every piece and attribute can be
 * read, with defined bits only, and that a grammar can be built over;
 * if it has an encoder (from byte-level merges), a fixed text encodes to
 * ids whose pieces are the text, else encoding fails with SIFT_E_STATE.
 * Anything else aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned opt = data[0];
    const char *t = (const char *)data + 1;
    size_t tn = size - 1;
    const char *c = NULL;
    size_t cn = 0;
    if (opt & 1) {
        for (size_t i = 0; i + 1 < tn; i++) {
            if ((unsigned char)t[i] == 0xff && (unsigned char)t[i + 1] == 0xff) {
                c = t + i + 2;
                cn = tn - i - 2;
                tn = i;
                break;
            }
        }
    }
    sift_vocab *v = NULL;
    sift_error err;
    sift_status st = sift_vocab_from_hf(&v, t, tn, c, cn, NULL, &err);
    if (st != SIFT_OK) {
        if ((st != SIFT_E_ARG && st != SIFT_E_LIMIT && st != SIFT_E_TOKEN) || v || err.code != st ||
            err.message[0] != '<')
            abort();
        return 0;
    }
    if (!v || sift_vocab_size(v) < 1)
        abort();
    for (int32_t id = 0; id < sift_vocab_size(v); id++) {
        const char *b;
        size_t l;
        if (sift_vocab_piece(v, id, &b, &l, NULL) != SIFT_OK)
            abort();
        uint32_t a = sift_vocab_attr(v, id);
        if (a & ~(uint32_t)SIFT_TOKEN_ATTR_ALL)
            abort();
        if ((a & SIFT_TOKEN_UNUSED) && l != 0)
            abort();
    }
    sift_grammar *g = NULL;
    if (sift_grammar_new(&g, "root ::= [a-z]*", 15, v, NULL, NULL) == SIFT_OK) {
        uint32_t mask[64];
        size_t nw = ((size_t)sift_vocab_size(v) + 31) / 32;
        if (nw <= 64)
            (void)sift_grammar_fill_bitmask(g, mask, nw, NULL);
        sift_grammar_free(g);
    }
    static const char text[] = "Hello, wor1d 123 <tool_call>\n";
    int32_t ids[64];
    size_t n = 0, at = 0;
    st = sift_vocab_encode(v, text, sizeof text - 1, 0, ids, 64, &n, NULL, NULL);
    if (st == SIFT_OK) {
        for (size_t i = 0; i < n; i++) {
            const char *b;
            size_t l;
            if (sift_vocab_piece(v, ids[i], &b, &l, NULL) || l == 0 || at + l > sizeof text - 1 ||
                memcmp(b, text + at, l) != 0)
                abort();
            at += l;
        }
        if (at != sizeof text - 1)
            abort();
    } else if (st != SIFT_E_STATE) {
        abort();
    }
    sift_vocab_free(v);
    return 0;
}

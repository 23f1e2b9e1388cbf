/*
 * fuzz_regex.c - libFuzzer target: the regex grammar source
 * (sift_grammar_from_regex; grammar/json_regex.c in its raw, whole-text
 * mode, and schema/grammar_sources.c).
 *
 * Input: any bytes as the regex. A failure must be SIFT_E_PATTERN_SYNTAX
 * with a "regex:COL: " message, err->offset inside the input and
 * err->column at most the input's length + 1, or SIFT_E_PATTERN_LIMIT;
 * no grammar is returned then. A success is a grammar that runs over the
 * input's own bytes (all of it, then one byte at a time after a reset)
 * with the same answer both ways, and whose clone agrees. Anything else
 * aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *rx = (const char *)data;
    sift_grammar *g = NULL;
    sift_error err;
    sift_status st = sift_grammar_from_regex(&g, rx, size, NULL, NULL, &err);
    if (st != SIFT_OK) {
        if (g || err.code != st)
            abort();
        if (st == SIFT_E_PATTERN_SYNTAX) {
            if (strncmp(err.message, "regex:", 6) != 0 || err.offset < 0 ||
                (size_t)err.offset > size || err.column < 1 || (size_t)err.column > size + 1)
                abort();
        } else if (st != SIFT_E_PATTERN_LIMIT) {
            abort();
        }
        return 0;
    }
    /* whole, then byte by byte: all or nothing must agree */
    int whole = size == 0 || sift_grammar_accept_bytes(g, rx, size, NULL) == SIFT_OK;
    int wc = whole && sift_grammar_is_complete(g);
    sift_grammar_reset(g);
    int step = 1;
    for (size_t i = 0; i < size && step; i++)
        step = sift_grammar_accept_bytes(g, rx + i, 1, NULL) == SIFT_OK;
    int sc = step && sift_grammar_is_complete(g);
    if (step != whole || sc != wc)
        abort();
    sift_grammar *k = NULL;
    if (sift_grammar_clone(g, &k, NULL) == SIFT_OK) {
        if (sift_grammar_is_complete(k) != sift_grammar_is_complete(g))
            abort();
        sift_grammar_free(k);
    }
    sift_grammar_free(g);
    return 0;
}

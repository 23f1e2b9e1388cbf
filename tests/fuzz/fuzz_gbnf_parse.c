/*
 * fuzz_gbnf_parse.c - libFuzzer target: any bytes as GBNF text.
 *
 * The parser must return a status (never crash, hang or leak) and, on
 * success, the grammar must start, accept the input's own bytes or
 * reject them cleanly, and clone/reset. Limits are lowered so a single
 * input stays fast.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_bytes = 1 << 16;
    p.max_stacks = 256;
    p.max_stack_depth = 512;
    p.max_step_work = 200000;
    sift_grammar *g = NULL;
    sift_error err;
    sift_status s = sift_grammar_new(&g, (const char *)data, size, NULL, &p, &err);
    if (s) {
        if (g || err.code != s || err.message[0] == '\0')
            abort();
        return 0;
    }
    /* feed the grammar text itself, byte by byte */
    for (size_t i = 0; i < size && i < 256; i++)
        if (sift_grammar_accept_bytes(g, data + i, 1, NULL))
            break;
    sift_grammar *c = NULL;
    if (sift_grammar_clone(g, &c, NULL) == SIFT_OK) {
        sift_grammar_reset(c);
        (void)sift_grammar_is_complete(c);
        sift_grammar_free(c);
    }
    sift_grammar_free(g);
    return 0;
}

/*
 * fuzz_json_regex.c - libFuzzer target: any bytes as a JSON Schema
 * "pattern" (src/schema/json_regex.c).
 *
 * The translator must return a status (never crash, hang or leak). On
 * failure: one of the three schema statuses (or NOMEM), *out NULL, a
 * message "pattern:COL: ..." and an offset inside the pattern. On
 * success: at most max_out bytes, NUL-terminated at *out_len, and the
 * expression must compile as GBNF inside a string rule, then run over the
 * pattern's own bytes. Any broken promise aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/json_regex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const size_t max_out = (size_t)1 << 16;
    sift__alloc al;
    if (sift__alloc_init(&al, NULL, NULL))
        abort();
    char *out = NULL;
    size_t n = 0;
    sift_error err;
    sift_status st =
        sift__json_regex_to_gbnf(&al, (const char *)data, size, max_out, &out, &n, &err);
    if (st) {
        if (out || n || err.code != st)
            abort();
        if (st != SIFT_E_SCHEMA_SYNTAX && st != SIFT_E_SCHEMA_UNSUPPORTED &&
            st != SIFT_E_SCHEMA_LIMIT && st != SIFT_E_NOMEM)
            abort();
        if (st != SIFT_E_NOMEM && (strncmp(err.message, "pattern:", 8) != 0 || err.offset < 0 ||
                                   (uint64_t)err.offset > size || err.column < 1))
            abort();
        return 0;
    }
    if (!out || n > max_out || strlen(out) != n)
        abort();
    size_t cap = n + 64;
    char *g = malloc(cap);
    if (!g)
        abort();
    int gl = snprintf(g, cap, "root ::= \"\\\"\" %s \"\\\"\"\n", out);
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_stacks = 256;
    p.max_step_work = 200000;
    sift_grammar *gr = NULL;
    if (sift_grammar_new(&gr, g, (size_t)gl, NULL, &p, &err) != SIFT_OK) {
        fprintf(stderr, "does not compile: %s\n%s\n", err.message, g);
        abort();
    }
    (void)sift_grammar_accept_bytes(gr, "\"", 1, NULL);
    for (size_t i = 0; i < size && i < 64; i++)
        if (sift_grammar_accept_bytes(gr, data + i, 1, NULL))
            break;
    sift_grammar_free(gr);
    free(g);
    sift__free(&al, out);
    return 0;
}

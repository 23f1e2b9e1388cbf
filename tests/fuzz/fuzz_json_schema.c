/*
 * fuzz_json_schema.c - libFuzzer target: any bytes as a JSON Schema.
 *
 * The first byte picks the options (whitespace, strict, the unsupported
 * policy); the rest is the schema text. The converter must return a
 * status with a message (never crash, hang or leak) and, on success,
 * produce GBNF that compiles: the only grammar errors allowed are the
 * schema ones sift_grammar_from_json_schema maps them to (a limit, or
 * left recursion through $ref). A GBNF syntax error or an undefined rule
 * is a converter bug and aborts. The compiled grammar then reads the
 * schema text itself, byte by byte, to exercise the matcher.
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
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.whitespace = data[0] & 1 ? SIFT_JSON_WS_COMPACT : SIFT_JSON_WS_FLEXIBLE;
    sp.max_whitespace = data[0] >> 5;
    sp.strict = (data[0] >> 1) & 1;
    sp.unsupported =
        (data[0] >> 2) & 1 ? SIFT_JSON_UNSUPPORTED_IGNORE : SIFT_JSON_UNSUPPORTED_ERROR;
    sp.max_grammar_bytes = 1 << 18;
    sp.max_work = 20000;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char *gbnf = NULL;
    size_t n = 0;
    sift_error err;
    sift_status st = sift_json_schema_to_gbnf(&gbnf, &n, text, len, &sp, &err);
    if (st) {
        if (gbnf || err.code != st || err.message[0] == '\0')
            abort();
        if (st != SIFT_E_SCHEMA_SYNTAX && st != SIFT_E_SCHEMA_UNSUPPORTED &&
            st != SIFT_E_SCHEMA_LIMIT && st != SIFT_E_NOMEM)
            abort();
        return 0;
    }
    if (!gbnf || strlen(gbnf) != n)
        abort();
    sift_json_schema_free_gbnf(gbnf, &sp);
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_stacks = 256;
    gp.max_step_work = 200000;
    sift_grammar *g = NULL;
    st = sift_grammar_from_json_schema(&g, text, len, NULL, &sp, &gp, &err);
    if (st) {
        if (st != SIFT_E_SCHEMA_LIMIT && st != SIFT_E_SCHEMA_UNSUPPORTED && st != SIFT_E_NOMEM)
            abort();
        return 0;
    }
    for (size_t i = 0; i < len && i < 256; i++)
        if (sift_grammar_accept_bytes(g, text + i, 1, NULL))
            break;
    (void)sift_grammar_is_complete(g);
    sift_grammar_free(g);
    return 0;
}

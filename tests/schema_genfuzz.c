/* Samples texts from the grammar of a JSON Schema: a random walk over
 * the bytes (and a few multi-byte characters) the grammar accepts next,
 * ending where the grammar is complete. tests/schema_genfuzz.sh checks
 * every sample with a reference validator: a grammar must never accept
 * an instance its schema forbids.
 *
 *     schema_genfuzz SCHEMA.json SEED COUNT [MAX_LEN]
 *
 * writes each complete sample followed by a NUL byte (samples hold no
 * NUL: JSON text cannot) to stdout. Exit 2 when the schema does not
 * compile (the message on stderr; the driver skips such schemas). */
#include <sift.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

#define MAX_UNITS 160

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s SCHEMA.json SEED COUNT [MAX_LEN]\n", argv[0]);
        return 64;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 64;
    }
    static char schema[1 << 20];
    size_t len = fread(schema, 1, sizeof schema, f);
    fclose(f);
    rng_state = strtoull(argv[2], NULL, 10) * 0x9E3779B97F4A7C15u + 1;
    long count = strtol(argv[3], NULL, 10);
    size_t max_len = argc > 4 ? (size_t)strtoul(argv[4], NULL, 10) : 200;

    /* the units tried at each step: every ASCII byte but NUL, and a
     * 2-, 3- and 4-byte UTF-8 character */
    const char *units[MAX_UNITS];
    size_t unit_len[MAX_UNITS], n_units = 0;
    static char ascii[128][2];
    for (int b = 1; b < 128; b++) {
        ascii[b][0] = (char)b;
        units[n_units] = ascii[b];
        unit_len[n_units++] = 1;
    }
    static const char *const multi[] = {"\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80"};
    for (size_t i = 0; i < 3; i++) {
        units[n_units] = multi[i];
        unit_len[n_units++] = strlen(multi[i]);
    }

    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.max_whitespace = 2;
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_rollback_tokens = 1;
    sift_grammar *g = NULL;
    sift_error err;
    if (sift_grammar_from_json_schema(&g, schema, len, NULL, &sp, &gp, &err) != SIFT_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    char *text = malloc(max_len + 8);
    /* units whose first byte the schema text holds, or that spell an
     * escape: the walk leans on them half the time, so that declared
     * names, constants and escaped spellings of them come up */
    int hint[MAX_UNITS];
    for (size_t u = 0; u < n_units; u++)
        hint[u] =
            memchr(schema, units[u][0], len) != NULL || strchr("\\u0123456789abcdef", units[u][0]);
    size_t ok[MAX_UNITS];
    for (long s = 0; s < count; s++) {
        sift_grammar_reset(g);
        size_t n = 0;
        int done = 0;
        while (n < max_len) {
            if (sift_grammar_is_complete(g) && rnd(1000) < 100 + 900 * n / max_len) {
                done = 1;
                break;
            }
            size_t n_ok = 0, n_close = 0, close[MAX_UNITS], n_hint = 0, hinted[MAX_UNITS];
            for (size_t u = 0; u < n_units; u++) {
                if (n + unit_len[u] > max_len)
                    continue;
                if (sift_grammar_accept_bytes(g, units[u], unit_len[u], &err) != SIFT_OK)
                    continue;
                if (sift_grammar_rollback(g, 1, &err) != SIFT_OK) {
                    fprintf(stderr, "rollback: %s\n", err.message);
                    return 1;
                }
                ok[n_ok++] = u;
                if (strchr("\"]}", units[u][0]))
                    close[n_close++] = u;
                if (hint[u])
                    hinted[n_hint++] = u;
            }
            if (n_ok == 0)
                break;
            /* past half the length, lean towards closing what is open */
            size_t u = n_close && n > max_len / 2 && rnd(4) ? close[rnd((uint32_t)n_close)]
                       : n_hint && rnd(2)                   ? hinted[rnd((uint32_t)n_hint)]
                                                            : ok[rnd((uint32_t)n_ok)];
            if (sift_grammar_accept_bytes(g, units[u], unit_len[u], &err) != SIFT_OK) {
                fprintf(stderr, "accept: %s\n", err.message);
                return 1;
            }
            memcpy(text + n, units[u], unit_len[u]);
            n += unit_len[u];
        }
        if (!done && sift_grammar_is_complete(g))
            done = 1;
        if (done) {
            fwrite(text, 1, n, stdout);
            fputc('\0', stdout);
        }
    }
    free(text);
    sift_grammar_free(g);
    return 0;
}

/*
 * fuzz_config.c - libFuzzer target for the configuration loader.
 *
 * Feeds arbitrary bytes to sift_config_parse, reads every diagnostic, and
 * when the input is a valid config builds its chain and samples a few
 * steps from a fixed small row, so the builder and the stages see every
 * parameter combination the validator lets through. An accept may fail
 * only with the errors a lazy grammar defines for the token that fires
 * its trigger. Relative paths in the input resolve under a directory that
 * does not exist, so the fuzzer does not wander the file system through
 * grammar and vocab keys.
 *
 * Build and run: tests/fuzz/build_config.sh, .ci/fuzz_config.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sift_config_params p;
    sift_config_params_init(&p);
    p.base_dir = "/nonexistent-sift-fuzz";
    sift_config *cfg = NULL;
    sift_error err;
    sift_status st = sift_config_parse(&cfg, "fuzz.yaml", (const char *)data, size, &p, &err);
    size_t n = sift_config_n_diagnostics(cfg);
    for (size_t i = 0; i < n; i++) {
        const sift_diagnostic *d = sift_config_diagnostic(cfg, i);
        if (!d || !d->text || !d->message || strlen(d->text) < strlen(d->message))
            abort();
        if ((d->severity == SIFT_SEVERITY_ERROR) != (d->code != SIFT_OK))
            abort();
    }
    if (st == SIFT_OK) {
        if (sift_config_n_errors(cfg) != 0)
            abort();
        const sift_config_grammar *g = sift_config_grammar_info(cfg);
        if (g && (!g->text || g->length == 0 || !g->root))
            abort();
        /* the chain it maps to, written out: snprintf's contract */
        static char text[1 << 16];
        size_t len = sift_config_describe(cfg, text, sizeof text);
        if (len == 0 || strlen(text) != (len < sizeof text ? len : sizeof text - 1))
            abort();
        sift_config_logprobs lp = {.struct_size = sizeof lp};
        int want = sift_config_get_logprobs(cfg, &lp);
        if (want != lp.enabled || lp.top_n < 0)
            abort();
        int32_t V = sift_config_vocab_size(cfg);
        if (V == 0)
            V = 64;
        if (V <= 4096) {
            sift_chain_params cp;
            sift_chain_params_init(&cp);
            cp.n_vocab = V;
            sift_chain *chain = NULL;
            /* DRY breakers need a vocabulary: one byte per token. */
            static char bytes[4096];
            static const char *pieces[4096];
            static size_t lens[4096];
            for (int32_t i = 0; i < V; i++) {
                bytes[i] = (char)(i & 0x7F);
                pieces[i] = &bytes[i];
                lens[i] = 1;
            }
            sift_vocab *vocab = NULL;
            if (sift_vocab_new(&vocab, V, pieces, lens, NULL, NULL) != SIFT_OK)
                abort();
            if (sift_config_build_chain(cfg, &cp, vocab, &chain, &err) == SIFT_OK) {
                float row[4096];
                for (int32_t i = 0; i < V; i++)
                    row[i] = (float)((i * 2654435761u) % 1000) / 100.0f - 5.0f;
                for (int step = 0; step < 4; step++) {
                    int32_t tok;
                    if (sift_chain_sample(chain, row, V, &tok, &err) != SIFT_OK)
                        break;
                    if (tok < 0 || tok >= V)
                        abort();
                    sift_status as = sift_chain_accept(chain, tok, &err);
                    if (as == SIFT_OK)
                        continue;
                    /* A lazy grammar sees the token that fires its trigger
                     * only at accept: the grammar may reject the text from
                     * the trigger on (T-05, T-12), or a pattern may hit its
                     * limits (T-03, T-11). Those are defined, located
                     * errors; the chain must still sample afterwards. */
                    if (as != SIFT_E_GRAMMAR_REJECT && as != SIFT_E_PATTERN_LIMIT &&
                        as != SIFT_E_GRAMMAR_LIMIT && as != SIFT_E_LIMIT)
                        abort();
                    if (err.message[0] == '\0')
                        abort();
                    if (sift_chain_sample(chain, row, V, &tok, &err) == SIFT_OK &&
                        (tok < 0 || tok >= V))
                        abort();
                    break;
                }
            }
            sift_chain_free(chain);
            sift_vocab_free(vocab);
        }
    } else if (st != SIFT_E_NOMEM && st != SIFT_E_ARG) {
        if (!cfg || sift_config_n_errors(cfg) == 0)
            abort();
    }
    sift_config_free(cfg);
    return 0;
}

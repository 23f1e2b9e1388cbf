/*
 * fuzz_gbnf_tokens.c - libFuzzer target: a grammar and a token sequence.
 *
 * Input: GBNF text, a 0xFF byte, then token ids (one byte each) over a
 * small synthetic vocabulary whose pieces split UTF-8 sequences, hold
 * invalid bytes, an empty piece and two end-of-generation tokens. For
 * every step the whole-vocabulary ban, the candidate ban and
 * accepts_token must agree token by token, and accept_token must agree
 * with accepts_token, and the forced-token list (sift__grammar_small_set,
 * when it answers) must be the accepted set; any disagreement aborts.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "sift.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NV 48
static const char *const pieces[NV] = {"a",
                                       "b",
                                       "c",
                                       "x",
                                       "{",
                                       "}",
                                       "[",
                                       "]",
                                       "\"",
                                       ":",
                                       ",",
                                       " ",
                                       "\n",
                                       "0",
                                       "1",
                                       "9",
                                       "-",
                                       ".",
                                       "e",
                                       "ab",
                                       "abc",
                                       "true",
                                       "false",
                                       "null",
                                       "\"a\"",
                                       "{\"",
                                       "\":",
                                       "\\",
                                       "\\n",
                                       "\xc3",
                                       "\xa9",
                                       "\xc3\xa9",
                                       "\xe2\x82",
                                       "\xac",
                                       "\xe2\x82\xac",
                                       "\xf0\x9f",
                                       "\x98\x80",
                                       "\xed\xa0\x80",
                                       "\xc0\x80",
                                       "\xff",
                                       "",
                                       "<eos>",
                                       "<eot>",
                                       "(",
                                       ")",
                                       "+",
                                       "*",
                                       "\x00"};

static sift_vocab *vocab(void)
{
    static sift_vocab *v; /* harness only: built once, never mutated after */
    if (v)
        return v;
    size_t len[NV];
    for (int i = 0; i < NV; i++)
        len[i] = i == NV - 1 ? 1 : strlen(pieces[i]);
    if (sift_vocab_new(&v, NV, pieces, len, NULL, NULL))
        abort();
    if (sift_vocab_set_attr(v, 41, SIFT_TOKEN_EOG, NULL) ||
        sift_vocab_set_attr(v, 42, SIFT_TOKEN_EOG, NULL))
        abort();
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *sep = memchr(data, 0xFF, size);
    size_t glen = sep ? (size_t)(sep - data) : size;
    const uint8_t *toks = sep ? sep + 1 : data + size;
    size_t nt = sep ? size - glen - 1 : 0;
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_bytes = 1 << 14;
    p.max_stacks = 128;
    p.max_stack_depth = 256;
    p.max_step_work = 100000;
    sift_grammar *g = NULL;
    if (sift_grammar_new(&g, (const char *)data, glen, vocab(), &p, NULL))
        return 0;
    float row[NV];
    sift_candidate cand[NV];
    for (size_t k = 0; k < nt && k < 64; k++) {
        int ok[NV];
        int lim = 0;
        for (int t = 0; t < NV; t++) {
            sift_status s = sift_grammar_accepts_token(g, t, &ok[t], NULL);
            if (s == SIFT_E_GRAMMAR_LIMIT || s == SIFT_E_NOMEM)
                lim = 1;
            else if (s)
                abort();
        }
        if (lim)
            break;
        for (int t = 0; t < NV; t++) {
            row[t] = 0.0f;
            cand[t].id = t;
            cand[t].logit = 0.0f;
        }
        int any = 0, n_ok = 0;
        for (int t = 0; t < NV; t++) {
            any |= ok[t];
            n_ok += ok[t] != 0;
        }
        /* The forced-token list (the slice path's extras) is exactly the
         * accepted set whenever it answers. */
        const int32_t *few;
        size_t nf = sift__grammar_small_set(g, &few);
        if (nf != SIZE_MAX) {
            if (nf != (size_t)n_ok || nf > SIFT__GRAMMAR_SMALL)
                abort();
            for (size_t i = 0; i < nf; i++)
                if (few[i] < 0 || few[i] >= NV || !ok[few[i]] || (i > 0 && few[i] <= few[i - 1]))
                    abort();
        }
        sift_status s1 = sift_grammar_ban(g, row, NV, NULL);
        sift_status s2 = sift_grammar_ban_candidates(g, cand, NV, NULL);
        if (s1 == SIFT_E_GRAMMAR_LIMIT || s2 == SIFT_E_GRAMMAR_LIMIT)
            break;
        if (!any) {
            if (s1 != SIFT_E_GRAMMAR_DEAD || s2 != SIFT_E_GRAMMAR_DEAD)
                abort();
        } else {
            if (s1 || s2)
                abort();
            for (int t = 0; t < NV; t++)
                if ((row[t] > -INFINITY) != (ok[t] != 0) ||
                    (cand[t].logit > -INFINITY) != (ok[t] != 0))
                    abort();
        }
        int t = toks[k] % NV;
        int was_complete = sift_grammar_is_complete(g);
        sift_status s = sift_grammar_accept_token(g, t, NULL);
        if (s == SIFT_E_GRAMMAR_LIMIT)
            break;
        if ((s == SIFT_OK) != (ok[t] != 0))
            abort();
        if (s == SIFT_OK && t >= 41 && t <= 42 && !was_complete)
            abort();
    }
    sift_grammar_free(g);
    return 0;
}

/*
 * gen.c - random stage parameters for the property suites (check_exact,
 * check_slice): valid for the API, biased towards the values that matter
 * (llama.cpp defaults, 0, 1, boundaries).
 */
#include <math.h>
#include <string.h>

#include "oracle.h"
#include "../testutil.h"

static float pick(tu_rng *r, const float *v, size_t n)
{
    return v[tu_range(r, 0, (int64_t)n - 1)];
}

#define PICK(r, ...) \
    pick((r), (const float[]){__VA_ARGS__}, sizeof((const float[]){__VA_ARGS__}) / sizeof(float))

void gen_stage(tu_rng *r, sp_stage *s, sp_kind kind, int32_t V)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    int32_t small = V < 64 ? V : 64;
    switch (kind) {
    case SP_TOP_K:
    case SP_TOP_K_TIES:
        s->i0 =
            tu_unif(r) < 0.8 ? (int32_t)tu_range(r, 1, small + 1) : (int32_t)tu_range(r, -2, V + 2);
        break;
    case SP_TOP_P:
    case SP_MIN_P:
    case SP_TYPICAL:
        s->f0 =
            tu_unif(r) < 0.3 ? PICK(r, 0.0f, 1.0f, 0.95f, 0.05f, 0.5f, 1e-7f) : (float)tu_unif(r);
        s->i0 = (int32_t)tu_range(r, 0, 3);
        break;
    case SP_TEMP:
        s->f0 = tu_unif(r) < 0.4 ? PICK(r, 0.8f, 1.0f, 0.0f, -1.0f, 1e-30f, 0.7f, 2.0f)
                                 : (float)(0.05 + 3.0 * tu_unif(r));
        break;
    case SP_TEMP_EXT:
        s->f0 = (float)(3.0 * tu_unif(r));
        s->f1 = tu_unif(r) < 0.2 ? 0.0f : (float)(2.0 * tu_unif(r));
        s->f2 = (float)(0.25 + 3.0 * tu_unif(r));
        break;
    case SP_XTC:
        s->f0 = tu_unif(r) < 0.3 ? PICK(r, 0.0f, 1.0f) : (float)tu_unif(r);
        s->f1 = (float)(0.6 * tu_unif(r));
        s->i0 = (int32_t)tu_range(r, 0, 3);
        break;
    case SP_TOP_N_SIGMA:
        s->f0 = tu_unif(r) < 0.2 ? PICK(r, -1.0f, 0.0f, 1.0f) : (float)(4.0 * tu_unif(r));
        break;
    case SP_MIROSTAT:
        s->f0 = (float)(10.0 * tu_unif(r));
        s->f1 = (float)tu_unif(r);
        s->i0 = (int32_t)tu_range(r, 1, 200);
        s->i1 = V;
        break;
    case SP_MIROSTAT_V2:
        s->f0 = (float)(10.0 * tu_unif(r));
        s->f1 = (float)tu_unif(r);
        break;
    case SP_PENALTIES:
        s->i0 = (int32_t)tu_range(r, 0, 128);
        s->f0 = tu_unif(r) < 0.3 ? PICK(r, 1.0f, 1.1f, 0.9f) : (float)(0.5 + 1.5 * tu_unif(r));
        s->f1 = tu_unif(r) < 0.5 ? 0.0f : (float)(2.0 * tu_unif(r) - 1.0);
        s->f2 = tu_unif(r) < 0.5 ? 0.0f : (float)(2.0 * tu_unif(r) - 1.0);
        break;
    case SP_DRY:
        s->f0 = tu_unif(r) < 0.1 ? 0.0f : (float)(2.0 * tu_unif(r));
        s->f1 = tu_unif(r) < 0.1 ? 0.9f : (float)(1.0 + 2.0 * tu_unif(r));
        s->i0 = (int32_t)tu_range(r, 0, 4);
        s->i1 = (int32_t)tu_range(r, 0, 64);
        s->n_breakers = (size_t)tu_range(r, 0, SP_MAX_BREAKERS);
        for (size_t b = 0; b < s->n_breakers; b++) {
            s->breaker_len[b] = (size_t)tu_range(r, 1, SP_MAX_BREAKER_LEN);
            for (size_t j = 0; j < s->breaker_len[b]; j++)
                s->breaker[b][j] = (int32_t)tu_range(r, 0, small - 1);
        }
        break;
    case SP_EPSILON:
        /* HF's suggested range (3e-4 .. 9e-4), the ends, and values that
         * cut deep into peaked rows */
        s->f0 = tu_unif(r) < 0.4 ? PICK(r, 0.0f, 1.0f, 3e-4f, 9e-4f, 1e-7f, 0.5f, 0.02f)
                                 : (float)(0.1 * tu_unif(r) * tu_unif(r));
        s->i0 = (int32_t)tu_range(r, 0, 3);
        break;
    case SP_ETA:
        /* HF's suggested range (3e-4 .. 2e-3), the ends, larger cuts */
        s->f0 = tu_unif(r) < 0.4 ? PICK(r, 0.0f, 1.0f, 3e-4f, 2e-3f, 1e-7f, 0.5f, 0.05f)
                                 : (float)(0.2 * tu_unif(r) * tu_unif(r));
        s->i0 = (int32_t)tu_range(r, 0, 3);
        break;
    case SP_ADAPTIVE_P:
        /* llama.cpp's documented values, off (negative), the ends */
        s->f0 = tu_unif(r) < 0.4 ? PICK(r, 0.5f, 0.3f, 0.7f, 0.9f, -1.0f, -0.01f, 0.0f, 1.0f)
                                 : (float)tu_unif(r);
        s->f1 = tu_unif(r) < 0.4 ? PICK(r, 0.9f, 0.0f, 0.99f, 0.5f) : (float)(0.99 * tu_unif(r));
        break;
    case SP_LOGIT_BIAS:
        s->n_bias = (size_t)tu_range(r, 0, 8);
        for (size_t b = 0; b < s->n_bias; b++) {
            s->bias[b].token = (int32_t)tu_range(r, 0, V - 1);
            s->bias[b].bias = tu_unif(r) < 0.2 ? -INFINITY : (float)(10.0 * tu_unif(r) - 5.0);
        }
        break;
    case SP_MIN_TOKENS:
        s->i0 = tu_unif(r) < 0.3 ? (int32_t)tu_range(r, -1, 0) : (int32_t)tu_range(r, 1, 8);
        s->n_ids = (size_t)tu_range(r, 1, 4);
        for (size_t j = 0; j < s->n_ids; j++) /* often among the prompt's alphabet */
            s->ids[j] = (int32_t)tu_range(r, 0, tu_unif(r) < 0.7 ? small - 1 : V - 1);
        break;
    case SP_ALLOWED_TOKENS:
        s->n_ids = (size_t)tu_range(r, 1, SP_MAX_IDS);
        for (size_t j = 0; j < s->n_ids; j++)
            s->ids[j] = (int32_t)tu_range(r, 0, tu_unif(r) < 0.5 ? small - 1 : V - 1);
        break;
    case SP_NO_REPEAT_NGRAM:
        s->i0 = tu_unif(r) < 0.1 ? 0 : (int32_t)tu_range(r, 1, 4);
        s->i1 = tu_unif(r) < 0.1 ? 0 : (int32_t)tu_range(r, s->i0 > 0 ? s->i0 : 1, 48);
        break;
    case SP_BAD_WORDS:
        s->n_words = (size_t)tu_range(r, 0, SP_MAX_WORDS);
        for (size_t w = 0; w < s->n_words; w++) {
            s->word_len[w] = (size_t)tu_range(r, 1, SP_MAX_WORD_LEN);
            for (size_t j = 0; j < s->word_len[w]; j++) /* mostly the prompt's alphabet */
                s->word[w][j] =
                    (int32_t)tu_range(r, 0, tu_unif(r) < 0.8 ? (V < 8 ? V : 8) - 1 : small - 1);
        }
        break;
    default: break;
    }
}

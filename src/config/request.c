/*
 * request.c - what a loaded config says beyond its stages: the form it
 * was read in, the log-probabilities the request asks for, and the
 * chain it maps to written out in the chain form (sift_config_describe,
 * `sift check --print`). It only reads a loaded config.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

int sift_config_get_logprobs(const sift_config *cfg, sift_config_logprobs *out)
{
    if (!cfg || !out || cfg->n_errors || out->struct_size < sizeof out->struct_size)
        return -1;
    sift_config_logprobs lp = cfg->logprobs;
    size_t n = out->struct_size < sizeof lp ? out->struct_size : sizeof lp;
    uint32_t size = out->struct_size;
    memcpy(out, &lp, n);
    out->struct_size = size;
    return lp.enabled ? 1 : 0;
}

int32_t sift_config_form_of(const sift_config *cfg)
{
    return cfg ? cfg->form : SIFT_CONFIG_FORM_DOCUMENT;
}

/* Text written with snprintf's contract: `len` counts every byte. */
typedef struct out_buf {
    char *p;
    size_t cap, len;
} out_buf;

SIFT__PRINTF(2, 3)
static void put(out_buf *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *dst = o->len < o->cap ? o->p + o->len : NULL;
    int n = vsnprintf(dst, dst ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

static void put_str(out_buf *o, const char *s, size_t n)
{
    put(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            put(o, "\\%c", c);
        else if (c == '\n')
            put(o, "\\n");
        else if (c < 0x20 || c == 0x7f)
            put(o, "\\x%02x", c);
        else
            put(o, "%c", c);
    }
    put(o, "\"");
}

static void put_float(out_buf *o, float f)
{
    if (isinf(f))
        put(o, f < 0 ? "-.inf" : ".inf");
    else {
        /* the shortest %g that reads back as the same float */
        char t[48];
        int digits = 1; /* the integer digits, so 100 is not written 1e+02 */
        for (double a = fabs((double)f); a >= 10 && digits < 9; a /= 10)
            digits++;
        for (int prec = digits; prec <= 9; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, (double)f);
            if ((float)strtod(t, NULL) == f)
                break;
        }
        put(o, "%s", t);
    }
}

/* One stage's parameters, as a flow mapping. */
static void put_stage(out_buf *o, const cfg_stage *s)
{
    const sift__sampler_desc *d = s->desc;
    const unsigned char *rec = s->rec.b;
    put(o, "  - %s", d->name);
    if (d->n_params == 0) {
        put(o, "\n");
        return;
    }
    put(o, ": {");
    for (size_t i = 0; i < d->n_params; i++) {
        const sift__param *pm = &d->params[i];
        put(o, "%s%s: ", i ? ", " : "", pm->name);
        switch (pm->type) {
        case SIFT__PT_INT:
        case SIFT__PT_WINDOW:
            put(o, "%d", (int)*(const int32_t *)(const void *)(rec + pm->off));
            break;
        case SIFT__PT_FLOAT: put_float(o, *(const float *)(const void *)(rec + pm->off)); break;
        case SIFT__PT_BOOL:
            put(o, "%s", *(const int *)(const void *)(rec + pm->off) ? "true" : "false");
            break;
        case SIFT__PT_ENUM:
            put(o, "%s", pm->choices[*(const int *)(const void *)(rec + pm->off)]);
            break;
        case SIFT__PT_STRING_LIST: {
            char *const *strs = *(char *const *const *)(const void *)(rec + pm->off);
            const size_t *lens = *(const size_t *const *)(const void *)(rec + pm->off_len);
            size_t n = *(const size_t *)(const void *)(rec + pm->off_count);
            put(o, "[");
            for (size_t k = 0; k < n; k++) {
                put(o, "%s", k ? ", " : "");
                put_str(o, strs[k], lens ? lens[k] : strlen(strs[k]));
            }
            put(o, "]");
            break;
        }
        case SIFT__PT_ID_FLOAT_MAP: {
            const sift_bias *b = *(const sift_bias *const *)(const void *)(rec + pm->off);
            size_t n = *(const size_t *)(const void *)(rec + pm->off_count);
            put(o, "[");
            for (size_t k = 0; k < n; k++) {
                if (b[k].token >= 0)
                    put(o, "%s[%d, ", k ? ", " : "", (int)b[k].token);
                else
                    put(o, "%s[text %d, ", k ? ", " : "", (int)(-1 - (int64_t)b[k].token));
                put_float(o, b[k].bias);
                put(o, "]");
            }
            put(o, "]");
            break;
        }
        }
    }
    put(o, "}\n");
}

static void put_list(out_buf *o, const char *name, const char *const *s, const size_t *lens,
                     size_t n)
{
    if (!n)
        return;
    put(o, "    %s: [", name);
    for (size_t i = 0; i < n; i++) {
        put(o, "%s", i ? ", " : "");
        put_str(o, s[i], lens ? lens[i] : strlen(s[i]));
    }
    put(o, "]\n");
}

size_t sift_config_describe(const sift_config *cfg, char *buf, size_t cap)
{
    if (!cfg || cfg->n_errors)
        return 0;
    out_buf o = {buf, cap, 0};
    if (cap)
        buf[0] = '\0';
    static const char *const FORMS[] = {"chain", "llama.cpp", "openai"};
    put(&o, "# form: %s\n", FORMS[cfg->form >= 0 && cfg->form <= 2 ? cfg->form : 0]);
    if (cfg->has_seed)
        put(&o, "seed: %llu\n", (unsigned long long)cfg->seed);
    else if (cfg->seed_random)
        put(&o, "# seed: random\n");
    if (cfg->vocab_size)
        put(&o, "vocab_size: %d\n", (int)cfg->vocab_size);
    put(&o, "chain:\n");
    for (size_t i = 0; i < cfg->n_stages; i++)
        put_stage(&o, &cfg->stages[i]);
    if (cfg->has_grammar) {
        const sift_config_grammar *g = &cfg->grammar;
        put(&o, "grammar:\n  mode: %s\n  root: %s\n",
            g->mode == SIFT_GRAMMAR_CONSTRAIN ? "constrain" : "check", g->root);
        if (g->lazy) {
            put(&o, "  lazy:\n");
            put_list(&o, "words", g->words, g->word_lengths, g->n_words);
            put_list(&o, "patterns", g->patterns, NULL, g->n_patterns);
            put_list(&o, "full_patterns", g->full_patterns, NULL, g->n_full_patterns);
            if (g->n_tokens) {
                put(&o, "    tokens: [");
                for (size_t i = 0; i < g->n_tokens; i++)
                    put(&o, "%s%d", i ? ", " : "", (int)g->tokens[i]);
                put(&o, "]\n");
            }
        }
    }
    if (cfg->has_grammar) {
        /* the GBNF as a literal block, each line indented */
        const sift_config_grammar *g = &cfg->grammar;
        put(&o, "  text: |\n    ");
        for (size_t i = 0; i < g->length; i++) {
            char c = g->text[i];
            if (c == '\n' && i + 1 < g->length)
                put(&o, "\n    ");
            else if (c != '\n')
                put(&o, "%c", c);
        }
        put(&o, "\n");
    }
    if (cfg->logprobs.enabled)
        put(&o, "# logprobs: {top_n: %d, post_sampling: %s}\n", (int)cfg->logprobs.top_n,
            cfg->logprobs.post_sampling ? "true" : "false");
    if (cap && o.len >= cap)
        buf[cap - 1] = '\0';
    return o.len;
}

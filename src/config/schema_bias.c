/*
 * schema_bias.c - the logit biases of a request body.
 *
 * What it owns: `logit_bias` as llama-server's /completion and an
 * OpenAI-compatible server read it, and the stage that carries token
 * text to the build. llama-server takes a mapping (key: a token id, or
 * text) or a list of [token, bias] pairs (token: an id, or text); text
 * is tokenized with the model's vocabulary and every one of its tokens
 * gets the bias, and an id given more than once gets the sum of its
 * biases (its logit_bias sampler adds every entry). An OpenAI-compatible
 * server takes a mapping of token ids only, with biases clamped to
 * [-100, 100] (vLLM). The config has no vocabulary when it loads, so
 * text waits for sift_config_build_chain: the entries are kept in order
 * (a text entry as a negative index into the texts) and tokenized with
 * the vocabulary the build is given; without one the build fails at the
 * logit_bias key's place.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "schema.h"

/* The record of the text-carrying stage: entries in the request's order
 * (token >= 0: an id; token = -1 - i: every token of texts[i]). */
typedef struct text_bias_rec {
    sift_bias *entries;
    size_t n_entries;
    char **texts;
    size_t *text_lens;
    size_t n_texts;
} text_bias_rec;

static const sift__param TEXT_BIAS_PARAMS[] = {
    {.name = "entries",
     .doc = "token ids (or texts, by index) and their biases, in order",
     .type = SIFT__PT_ID_FLOAT_MAP,
     .off = offsetof(text_bias_rec, entries),
     .off_count = offsetof(text_bias_rec, n_entries)},
    {.name = "texts",
     .doc = "token text, tokenized with the build's vocabulary",
     .type = SIFT__PT_STRING_LIST,
     .item_noun = "text",
     .off = offsetof(text_bias_rec, texts),
     .off_len = offsetof(text_bias_rec, text_lens),
     .off_count = offsetof(text_bias_rec, n_texts)},
};

/* Adds the entries, each text replaced by its tokens (sift_vocab_encode,
 * special tokens as text, as llama-server tokenizes them). A trial
 * build has no vocabulary: it adds the id entries alone, so their sums
 * are still judged. */
static sift_status text_bias_build(sift_chain *c, const void *rec, const sift__build_env *env,
                                   sift_error *err)
{
    const text_bias_rec *r = rec;
    const sift__alloc *al = sift__chain_alloc(c);
    if (!env->vocab && !env->trial)
        return env->fail(env, err, SIFT_E_ARG,
                         "logit_bias: token text '%s' is tokenized with the model's vocabulary: "
                         "name one with 'vocab', or pass one to sift_config_build_chain",
                         r->texts[0]);
    size_t total = 0;
    for (size_t i = 0; i < r->n_entries; i++) {
        if (r->entries[i].token >= 0) {
            total++;
        } else if (env->vocab) {
            size_t t = (size_t)(-1 - (int64_t)r->entries[i].token), n = 0;
            sift_status st = sift_vocab_encode(env->vocab, r->texts[t], r->text_lens[t], 0, NULL, 0,
                                               &n, NULL, err);
            if (st != SIFT_OK && st != SIFT_E_LIMIT)
                return env->fail(env, err, st, "logit_bias: token text '%s': %s", r->texts[t],
                                 err ? err->message : "cannot be tokenized");
            total += n;
        }
    }
    if (total == 0)
        return SIFT_OK;
    sift_bias *b = sift__malloc(al, total, sizeof *b);
    int32_t *ids = sift__malloc(al, total, sizeof *ids);
    if (!b || !ids) {
        sift__free(al, b);
        sift__free(al, ids);
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding logit_bias");
    }
    size_t k = 0;
    for (size_t i = 0; i < r->n_entries; i++) {
        if (r->entries[i].token >= 0) {
            b[k++] = r->entries[i];
        } else if (env->vocab) {
            size_t t = (size_t)(-1 - (int64_t)r->entries[i].token), n = 0;
            sift_status st = sift_vocab_encode(env->vocab, r->texts[t], r->text_lens[t], 0, ids,
                                               total - k, &n, NULL, err);
            if (st != SIFT_OK) {
                sift__free(al, b);
                sift__free(al, ids);
                return env->fail(env, err, st, "logit_bias: token text '%s': %s", r->texts[t],
                                 err ? err->message : "cannot be tokenized");
            }
            for (size_t j = 0; j < n; j++)
                b[k++] = (sift_bias){ids[j], r->entries[i].bias};
        }
    }
    sift__free(al, ids);
    sift_status st = sift_chain_add_logit_bias(c, b, k, err);
    sift__free(al, b);
    return st;
}

/* A stage of the config only: never in the registry, so a `chain:` list
 * cannot name it; the warnings read its name as logit_bias's. */
static const sift__sampler_desc TEXT_BIAS_DESC = {
    .name = "logit_bias",
    .summary = "logit biases with token text, tokenized when the chain is built",
    .params = TEXT_BIAS_PARAMS,
    .n_params = 2,
    .rec_size = sizeof(text_bias_rec),
    .value_is_param = 1,
    .build = text_bias_build,
};

int sift__cfg_is_text_bias(const sift__sampler_desc *d)
{
    return d == &TEXT_BIAS_DESC;
}

/* One [token, bias] entry read: *tok an id, or -1 with *text set. */
typedef struct bias_key {
    int32_t tok;
    const cfg_node *text;
} bias_key;

/* The token of an entry: an id (a number, or JSON's quoted "15"), or,
 * for llama-server, text. */
static int read_key(cfg_validator *v, const cfg_node *n, int openai, bias_key *k)
{
    k->tok = -1;
    k->text = NULL;
    if (n->bad)
        return 0;
    if (n->type == CFG_SCALAR && !sift__cfg_is_plain(n)) {
        if (n->len > 0 && sift__cfg_int_syntax(n->val, n->len)) {
            cfg_node tmp = *n;
            tmp.style = SIFT_SCALAR_PLAIN;
            return sift__cfg_token_id(v, &tmp, "logit_bias", &k->tok);
        }
        if (openai)
            return sift__cfg_err_at(v, n, SIFT_E_CONFIG_TYPE,
                                    "logit_bias: keys are token ids (\"15\"), got '%s'",
                                    sift__cfg_echo(v, n));
        if (n->len == 0)
            return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "logit_bias: token text is empty");
        k->text = n;
        return 1;
    }
    if (!openai && n->type == CFG_SCALAR && !sift__cfg_is_null(n) &&
        !sift__cfg_int_syntax(n->val, n->len) && !sift__cfg_number_hint(n) &&
        !sift__cfg_is_bool_word(n) && strspn(n->val, "+-.0123456789eE") != n->len) {
        k->text = n; /* a plain scalar that is not a number: text */
        return 1;
    }
    return sift__cfg_token_id(v, n, "logit_bias", &k->tok);
}

/* The bias of an entry: a number, -.inf or false (llama-server's ban);
 * OpenAI's are numbers clamped to [-100, 100], as vLLM clamps them. */
static int read_bias(cfg_validator *v, const cfg_node *val, int openai, float *f)
{
    if (!openai && sift__cfg_is_plain(val) && sift__cfg_streq(val, "false")) {
        *f = -INFINITY;
        return 1;
    }
    if (sift__cfg_is_plain(val) && sift__cfg_is_bool_word(val))
        return sift__cfg_err_at(
            v, val, SIFT_E_CONFIG_VALUE, "logit_bias: '%s' is not a bias; give a number%s",
            sift__cfg_echo(v, val), openai ? "" : ", or false (or -.inf) to ban the token");
    if (!sift__cfg_get_float(v, val, "logit_bias", f))
        return 0;
    if (isnan(*f) || *f == INFINITY || (openai && isinf(*f)))
        return sift__cfg_err_at(
            v, val, SIFT_E_CONFIG_VALUE, "logit_bias: bias must be a %s, got %s",
            openai ? "finite number" : "number or -.inf (ban)", sift__cfg_echo(v, val));
    if (openai && (*f < -100 || *f > 100)) {
        sift__cfg_warn_at(v, val, "logit_bias: bias %s is clamped to [-100, 100], as vLLM does",
                          sift__cfg_echo(v, val));
        *f = *f < 0 ? -100.0f : 100.0f;
    }
    return 1;
}

/* Fills the entries of `map` into b[] and the texts into t[] (the
 * caller's arrays, map's size each); returns 0 after reporting. */
static int read_entries(cfg_validator *v, const cfg_node *map, int openai, sift_bias *b, size_t *nb,
                        const cfg_node **t, size_t *nt)
{
    int ok = 1;
    for (uint32_t ki = map->first; ki != CFG_NONE && !v->cfg->stopped;) {
        const cfg_node *item = NODE(v, ki), *key, *val;
        if (map->type == CFG_MAP) {
            key = item;
            val = NODE(v, item->next);
            ki = val->next;
        } else {
            ki = item->next;
            if (item->bad) {
                ok = 0;
                continue;
            }
            if (item->type != CFG_SEQ || item->n_children != 2) {
                ok = sift__cfg_err_at(v, item, SIFT_E_CONFIG_TYPE,
                                      "logit_bias: an entry of the list is a [token, bias] pair");
                continue;
            }
            key = NODE(v, item->first);
            val = NODE(v, key->next);
        }
        bias_key k;
        float f = 0;
        int good = read_key(v, key, openai, &k);
        good &= read_bias(v, val, openai, &f);
        if (!good || !ok) {
            ok = 0;
            continue;
        }
        if (k.text) {
            t[*nt] = k.text;
            b[(*nb)++] = (sift_bias){(int32_t)(-1 - (int64_t)*nt), f};
            (*nt)++;
        } else {
            b[(*nb)++] = (sift_bias){k.tok, f};
        }
    }
    return ok;
}

/* Copies the texts into the record's list; 0 when out of memory. */
static int keep_texts(cfg_validator *v, text_bias_rec *r, const cfg_node *const *t, size_t nt)
{
    const sift__alloc *al = &v->cfg->al;
    r->texts = sift__calloc(al, nt, sizeof *r->texts);
    r->text_lens = sift__calloc(al, nt, sizeof *r->text_lens);
    if (!r->texts || !r->text_lens)
        return 0;
    r->n_texts = nt;
    for (size_t i = 0; i < nt; i++) {
        r->texts[i] = sift__memdup(al, t[i]->val, t[i]->len);
        r->text_lens[i] = t[i]->len;
        if (!r->texts[i])
            return 0;
    }
    return 1;
}

void sift__cfg_request_bias(cfg_validator *v, const cfg_node *map, int openai)
{
    const char *expect = openai ? "mapping of token id to bias"
                                : "mapping of token id (or text) to bias, or a sequence of "
                                  "[token, bias] pairs";
    if (map->bad)
        return;
    if (sift__cfg_is_null(map) || (map->type != CFG_MAP && (openai || map->type != CFG_SEQ))) {
        sift__cfg_type_err(v, map, "logit_bias", expect);
        return;
    }
    size_t n = map->type == CFG_MAP ? map->n_children / 2 : map->n_children;
    if (n > (size_t)SIFT_DEFAULT_MAX_VOCAB) {
        sift__cfg_err_at(v, map, SIFT_E_CONFIG_LIMIT, "logit_bias has %zu entries; max %d", n,
                         SIFT_DEFAULT_MAX_VOCAB);
        return;
    }
    if (map->type == CFG_MAP)
        sift__cfg_check_keys(v, map, NULL, 0, "logit_bias: ");
    if (n == 0)
        return; /* no entries: no stage, as llama.cpp adds none */
    const sift__alloc *al = &v->cfg->al;
    sift_bias *b = sift__malloc(al, n, sizeof *b);
    const cfg_node **t = sift__malloc(al, n, sizeof *t);
    size_t nb = 0, nt = 0;
    if (!b || !t) {
        sift__free(al, b);
        sift__free(al, t);
        v->st = SIFT_E_NOMEM;
        return;
    }
    size_t before = v->cfg->n_errors;
    int ok = read_entries(v, map, openai, b, &nb, t, &nt) && v->cfg->n_errors == before;
    cfg_stage st;
    memset(&st, 0, sizeof st);
    st.line = map->line;
    st.col = map->col;
    if (ok && nt == 0) {
        const sift__sampler_desc *d = sift__cfg_desc_named("logit_bias");
        st.desc = d;
        *(sift_bias **)(void *)(st.rec.b + d->params[0].off) = b;
        *(size_t *)(void *)(st.rec.b + d->params[0].off_count) = nb;
        b = NULL;
    } else if (ok) {
        text_bias_rec *r = (text_bias_rec *)(void *)st.rec.b;
        st.desc = &TEXT_BIAS_DESC;
        st.line = t[0]->line; /* the build's message names the first text */
        st.col = t[0]->col;
        r->entries = b;
        r->n_entries = nb;
        b = NULL;
        if (!keep_texts(v, r, t, nt)) {
            sift__cfg_stage_free(al, &st);
            v->st = SIFT_E_NOMEM;
            ok = 0;
        }
    }
    sift__free(al, b);
    sift__free(al, t);
    if (ok)
        sift__cfg_push(v, &st);
}

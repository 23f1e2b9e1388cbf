/*
 * schema_stage.c - the stages of a `chain:` list.
 *
 * What it owns: one `chain:` item (a name, a scalar shorthand or a
 * parameter mapping) turned into a stage record by a walk over the
 * descriptor's parameter table (src/samplers/registry.h): its type,
 * range, default and lint come from there, so this file knows no
 * sampler by code. Also the P-14 rule on selectors (exactly one, last)
 * and the stage list itself (push, free).
 *
 * Invariant: a stage is pushed only when all of its values are valid;
 * every bad value is reported and the walk goes on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "schema.h"

/* Parameter access for one stage: a scalar shorthand fills the
 * descriptor's main parameter, a mapping is looked up by name. */
typedef struct params {
    sift__lint lint; /* first: the descriptor's lint reports through it */
    cfg_validator *v;
    const sift__sampler_desc *def;
    const cfg_node *scalar; /* shorthand value, or NULL */
    const cfg_node *map;    /* parameter mapping, or NULL */
    const cfg_node *at;     /* position of the stage */
    char what[64];
} params;

static const cfg_node *param(params *p, const char *key)
{
    if (p->scalar)
        return p->def->main && !strcmp(key, p->def->main) ? p->scalar : NULL;
    if (p->map)
        return sift__cfg_find(p->v, p->map, key);
    return NULL;
}

/* "top_p" for the shorthand, "top_p.min_keep" for a mapping key. */
static const char *pname(params *p, const char *key)
{
    if (p->scalar && p->def->main && !strcmp(key, p->def->main))
        snprintf(p->what, sizeof p->what, "%s", p->def->name);
    else
        snprintf(p->what, sizeof p->what, "%s.%s", p->def->name, key);
    return p->what;
}

static int missing(params *p, const char *key)
{
    return sift__cfg_err_at(p->v, p->map ? p->map : p->at, SIFT_E_CONFIG_KEY, "%s: missing '%s'",
                            p->def->name, key);
}

/* A window of accepted tokens; -1 is llama.cpp's "the context size",
 * which stands for n_ctx when the config gives one. */
int sift__cfg_window(cfg_validator *v, const cfg_node *n, const char *what, int32_t *out)
{
    int64_t x;
    if (!sift__cfg_get_int(v, n, what, &x))
        return 0;
    if (x == -1 && v->n_ctx > 0) {
        if (v->n_ctx > SIFT_DEFAULT_MAX_HISTORY)
            return sift__cfg_err_at(v, n, SIFT_E_CONFIG_LIMIT,
                                    "%s -1 is n_ctx %d, which exceeds max_history %d", what,
                                    (int)v->n_ctx, SIFT_DEFAULT_MAX_HISTORY);
        *out = v->n_ctx;
        return 1;
    }
    if (x == -1)
        return sift__cfg_err_at(
            v, n, SIFT_E_CONFIG_VALUE,
            "%s is -1 (the context size): set n_ctx to the context size, or give a "
            "window",
            what);
    if (x < 0)
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE,
                                "%s must be >= 0 (or -1 with n_ctx set), got %lld", what,
                                (long long)x);
    if (x > SIFT_DEFAULT_MAX_HISTORY)
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_LIMIT, "%s %lld exceeds max_history %d", what,
                                (long long)x, SIFT_DEFAULT_MAX_HISTORY);
    *out = (int32_t)x;
    return 1;
}

/* Validates a sequence of strings (a SIFT__PT_STRING_LIST parameter, as
 * DRY's breakers) into the record. */
int sift__cfg_string_param(cfg_validator *v, const sift__param *pm, const cfg_node *seq,
                           const char *what, void *rec)
{
    if (seq->bad)
        return 0;
    if (seq->type != CFG_SEQ)
        return sift__cfg_type_err(v, seq, what, "sequence of strings");
    if (seq->n_children > pm->max_items)
        return sift__cfg_err_at(v, seq, SIFT_E_CONFIG_LIMIT, "%s has %u entries; max %zu", what,
                                (unsigned)seq->n_children, pm->max_items);
    int ok = 1;
    size_t i = 0;
    for (uint32_t c = seq->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *b = NODE(v, c);
        char w[80];
        snprintf(w, sizeof w, "%s[%zu]", what, i);
        if (!sift__cfg_get_str(v, b, w)) {
            ok = 0;
        } else if (b->len == 0) {
            ok = sift__cfg_err_at(v, b, SIFT_E_CONFIG_VALUE, "%s %zu is empty", pm->item_noun, i);
        } else if (b->len > pm->max_item_bytes) {
            ok = sift__cfg_err_at(v, b, SIFT_E_CONFIG_VALUE, "%s %zu is %zu bytes; max %zu",
                                  pm->item_noun, i, b->len, pm->max_item_bytes);
        }
    }
    if (!ok)
        return 0;
    size_t n = seq->n_children;
    char ***strs = (char ***)(void *)((unsigned char *)rec + pm->off);
    size_t **lens = (size_t **)(void *)((unsigned char *)rec + pm->off_len);
    size_t *count = (size_t *)(void *)((unsigned char *)rec + pm->off_count);
    *strs = n ? sift__calloc(&v->cfg->al, n, sizeof **strs) : NULL;
    *lens = n ? sift__calloc(&v->cfg->al, n, sizeof **lens) : NULL;
    if (n && (!*strs || !*lens)) {
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    i = 0;
    for (uint32_t c = seq->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *b = NODE(v, c);
        (*strs)[i] = sift__memdup(&v->cfg->al, b->val, b->len);
        (*lens)[i] = b->len;
        *count = i + 1;
        if (!(*strs)[i]) {
            v->st = SIFT_E_NOMEM;
            return 0;
        }
    }
    return 1;
}

/* Copies a string list parameter's default into the record. */
int sift__cfg_string_default(cfg_validator *v, const sift__param *pm, void *rec)
{
    size_t n = pm->n_def_strings;
    char ***strs = (char ***)(void *)((unsigned char *)rec + pm->off);
    size_t **lens = (size_t **)(void *)((unsigned char *)rec + pm->off_len);
    size_t *count = (size_t *)(void *)((unsigned char *)rec + pm->off_count);
    if (n == 0)
        return 1;
    *strs = sift__calloc(&v->cfg->al, n, sizeof **strs);
    *lens = sift__calloc(&v->cfg->al, n, sizeof **lens);
    if (!*strs || !*lens) {
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(pm->def_strings[i]);
        (*strs)[i] = sift__memdup(&v->cfg->al, pm->def_strings[i], l);
        (*lens)[i] = l;
        *count = i + 1;
        if (!(*strs)[i]) {
            v->st = SIFT_E_NOMEM;
            return 0;
        }
    }
    return 1;
}

void sift__cfg_stage_free(const sift__alloc *al, cfg_stage *st)
{
    const sift__sampler_desc *d = st->desc;
    for (size_t i = 0; d && i < d->n_params; i++) {
        const sift__param *pm = &d->params[i];
        unsigned char *rec = st->rec.b;
        if (pm->type == SIFT__PT_STRING_LIST) {
            char ***strs = (char ***)(void *)(rec + pm->off);
            size_t **lens = (size_t **)(void *)(rec + pm->off_len);
            size_t *count = (size_t *)(void *)(rec + pm->off_count);
            for (size_t k = 0; *strs && k < *count; k++)
                sift__free(al, (*strs)[k]);
            sift__free(al, *strs);
            sift__free(al, *lens);
            *strs = NULL;
            *lens = NULL;
            *count = 0;
        } else if (pm->type == SIFT__PT_ID_FLOAT_MAP) {
            sift_bias **b = (sift_bias **)(void *)(rec + pm->off);
            sift__free(al, *b);
            *b = NULL;
            *(size_t *)(void *)(rec + pm->off_count) = 0;
        }
    }
}

static void free_stage(cfg_validator *v, cfg_stage *st)
{
    sift__cfg_stage_free(&v->cfg->al, st);
}

sift_status sift__cfg_push_stage(sift_config *cfg, const cfg_stage *st)
{
    if (sift__reserve(&cfg->al, &cfg->stages, &cfg->cap_stages, cfg->n_stages, cfg->n_stages + 1,
                      sizeof *cfg->stages, 8))
        return SIFT_E_NOMEM;
    cfg->stages[cfg->n_stages++] = *st;
    return SIFT_OK;
}

int sift__cfg_push(cfg_validator *v, cfg_stage *st)
{
    if (sift__cfg_push_stage(v->cfg, st) != SIFT_OK) {
        v->st = SIFT_E_NOMEM;
        free_stage(v, st);
        return 0;
    }
    return 1;
}

static int cmp_bias(const void *a, const void *b)
{
    const sift_bias *x = a, *y = b;
    return (x->token > y->token) - (x->token < y->token);
}

/* The (token, bias) entries of a logit_bias value: a mapping token id ->
 * bias, or (llama.cpp's JSON form) a sequence of [token, bias] pairs. */
typedef struct bias_entry {
    const cfg_node *key, *val;
} bias_entry;

/* A token id of logit_bias. The flat form also takes JSON's quoted ids
 * ("15"), as llama-server does; token text, which llama-server tokenizes,
 * is refused: the config does not tokenize. */
static int bias_token(cfg_validator *v, const cfg_node *n, int flat, int32_t *out)
{
    if (flat && n->type == CFG_SCALAR && !n->bad && !sift__cfg_is_plain(n)) {
        if (n->len > 0 && sift__cfg_int_syntax(n->val, n->len)) {
            cfg_node tmp = *n;
            tmp.style = SIFT_SCALAR_PLAIN;
            return sift__cfg_token_id(v, &tmp, "logit_bias", out);
        }
        return sift__cfg_err_at(
            v, n, SIFT_E_CONFIG_TYPE,
            "logit_bias: token text '%s' is not tokenized here (llama-server would bias "
            "each of its tokens); give the token ids",
            sift__cfg_echo(v, n));
    }
    return sift__cfg_token_id(v, n, "logit_bias", out);
}

/* The bias of a logit_bias entry into *f: a number, -.inf or false (a
 * ban). 1 when valid. */
static int bias_value(cfg_validator *v, const cfg_node *val, float *f)
{
    if (sift__cfg_is_plain(val) && sift__cfg_streq(val, "false")) {
        *f = -INFINITY;
        return 1;
    }
    if (sift__cfg_is_plain(val) && sift__cfg_is_bool_word(val))
        return sift__cfg_err_at(
            v, val, SIFT_E_CONFIG_VALUE,
            "logit_bias: '%s' is not a bias; give a number, or false (or -.inf) "
            "to ban the token",
            sift__cfg_echo(v, val));
    if (!sift__cfg_get_float(v, val, "logit_bias", f))
        return 0;
    if (isnan(*f) || *f == INFINITY)
        return sift__cfg_err_at(v, val, SIFT_E_CONFIG_VALUE,
                                "logit_bias: bias must be a number or -.inf (ban), got %s",
                                sift__cfg_echo(v, val));
    return 1;
}

/* The next entry of a logit_bias value from item ki (advanced past it)
 * into *e. 0 when the entry is not a [token, bias] pair (reported, or
 * already bad). */
static int bias_next(cfg_validator *v, const cfg_node *map, uint32_t *ki, bias_entry *e)
{
    const cfg_node *item = NODE(v, *ki);
    if (map->type == CFG_MAP) {
        e->key = item;
        e->val = NODE(v, item->next);
        *ki = e->val->next;
        return 1;
    }
    *ki = item->next;
    if (item->bad)
        return 0;
    if (item->type != CFG_SEQ || item->n_children != 2)
        return sift__cfg_err_at(v, item, SIFT_E_CONFIG_TYPE,
                                "logit_bias: an entry of the list is a [token, bias] pair");
    e->key = NODE(v, item->first);
    e->val = NODE(v, e->key->next);
    return 1;
}

/* Whether the k entries of b name k different tokens ("15" and "+15" are
 * different keys to YAML but the same token); the first repeat is
 * reported at map. -1 when out of memory (v->st set). */
static int bias_unique(cfg_validator *v, const cfg_node *map, const sift_bias *b, size_t k)
{
    sift_bias *sorted = sift__malloc(&v->cfg->al, k, sizeof *sorted);
    if (!sorted) {
        v->st = SIFT_E_NOMEM;
        return -1;
    }
    memcpy(sorted, b, k * sizeof *b);
    qsort(sorted, k, sizeof *sorted, cmp_bias);
    int ok = 1;
    for (size_t i = 1; i < k && ok; i++)
        if (sorted[i].token == sorted[i - 1].token)
            ok = sift__cfg_err_at(v, map, SIFT_E_CONFIG_KEY, "logit_bias: token %d is listed twice",
                                  (int)sorted[i].token);
    sift__free(&v->cfg->al, sorted);
    return ok;
}

/* A SIFT__PT_ID_FLOAT_MAP parameter (logit_bias) into the record. Returns 1
 * when the stage is to be added: valid, and not an empty flat map. */
int sift__cfg_bias_param(cfg_validator *v, const sift__param *pm, const cfg_node *map,
                         const cfg_node *at, void *rec, int flat)
{
    const char *expect = flat ? "mapping of token id to bias, or a sequence of [token, bias] pairs"
                              : "mapping of token id to bias";
    if (!map || map->bad || sift__cfg_is_null(map)) {
        if (!map || !map->bad)
            sift__cfg_err_at(v, map ? map : at, SIFT_E_CONFIG_TYPE, "logit_bias: expected a %s",
                             expect);
        return 0;
    }
    if (map->type != CFG_MAP && !(flat && map->type == CFG_SEQ)) {
        sift__cfg_type_err(v, map, "logit_bias", expect);
        return 0;
    }
    size_t n = map->type == CFG_MAP ? map->n_children / 2 : map->n_children;
    int64_t cap = v->vocab_size ? v->vocab_size : SIFT_DEFAULT_MAX_VOCAB;
    if ((int64_t)n > cap) {
        sift__cfg_err_at(v, map, SIFT_E_CONFIG_LIMIT, "logit_bias has %zu entries; max %lld", n,
                         (long long)cap);
        return 0;
    }
    if (map->type == CFG_MAP)
        sift__cfg_check_keys(v, map, NULL, 0, "logit_bias: ");
    sift_bias *b = n ? sift__malloc(&v->cfg->al, n, sizeof *b) : NULL;
    if (n && !b) {
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    size_t k = 0;
    int ok = 1;
    for (uint32_t ki = map->first; ki != CFG_NONE && !v->cfg->stopped;) {
        bias_entry e = {NULL, NULL};
        if (!bias_next(v, map, &ki, &e)) {
            ok = 0;
            continue;
        }
        int32_t tok;
        float f = 0;
        int good = bias_token(v, e.key, flat, &tok);
        if (!bias_value(v, e.val, &f))
            good = 0;
        if (good && ok) {
            b[k].token = tok;
            b[k].bias = f;
            k++;
        } else {
            ok = 0;
        }
    }
    if (ok && k > 1 && (ok = bias_unique(v, map, b, k)) < 0) {
        sift__free(&v->cfg->al, b);
        return 0;
    }
    if (!ok || k == 0) {
        sift__free(&v->cfg->al, b);
        if (ok && flat)
            return 0; /* an empty flat logit_bias adds no stage */
        if (!ok)
            return 0;
    }
    *(sift_bias **)(void *)((unsigned char *)rec + pm->off) = k ? b : NULL;
    *(size_t *)(void *)((unsigned char *)rec + pm->off_count) = k;
    return 1;
}

/* One number, boolean or choice parameter into the record, checked
 * against its range; `what` names it in messages. */
int sift__cfg_value_param(cfg_validator *v, const sift__param *pm, const cfg_node *n,
                          const char *what, void *rec)
{
    switch (pm->type) {
    case SIFT__PT_INT: {
        int32_t *out = SIFT__REC_FIELD(rec, pm, int32_t);
        if (pm->range == SIFT__R_IN)
            return sift__cfg_get_int_in(v, n, what, (int64_t)pm->lo, (int64_t)pm->hi, out);
        if (pm->range == SIFT__R_ANY)
            return sift__cfg_get_int_in(v, n, what, INT32_MIN, INT32_MAX, out);
        int64_t x;
        if (!sift__cfg_get_int(v, n, what, &x))
            return 0;
        if (!sift__param_ok(pm, (double)x))
            return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be %s %lld, got %lld", what,
                                    pm->range == SIFT__R_GT ? ">" : ">=", (long long)pm->lo,
                                    (long long)x);
        *out = (int32_t)x;
        return 1;
    }
    case SIFT__PT_WINDOW: return sift__cfg_window(v, n, what, SIFT__REC_FIELD(rec, pm, int32_t));
    case SIFT__PT_FLOAT: {
        float *out = SIFT__REC_FIELD(rec, pm, float);
        if (pm->range == SIFT__R_IN) {
            if (!sift__cfg_get_float(v, n, what, out))
                return 0;
            if (!sift__param_ok(pm, *out))
                return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE,
                                        "%s must be a number in [%g, %g], got %s", what, pm->lo,
                                        pm->hi, sift__cfg_echo(v, n));
            return 1;
        }
        if (!sift__cfg_get_finite(v, n, what, out))
            return 0;
        if (!sift__param_ok(pm, *out))
            return sift__cfg_err_at(
                v, n, SIFT_E_CONFIG_VALUE, "%s must be %s %g%s%s%s, got %s", what,
                pm->range == SIFT__R_GT   ? ">"
                : pm->range == SIFT__R_LE ? "<="
                                          : ">=",
                pm->range == SIFT__R_LE ? pm->hi : pm->lo, pm->range_note ? " (" : "",
                pm->range_note ? pm->range_note : "", pm->range_note ? ")" : "",
                sift__cfg_echo(v, n));
        return 1;
    }
    case SIFT__PT_BOOL: return sift__cfg_get_bool(v, n, what, SIFT__REC_FIELD(rec, pm, int));
    case SIFT__PT_ENUM: {
        if (!sift__cfg_get_str(v, n, what))
            return 0;
        size_t nc = 0;
        for (; pm->choices[nc]; nc++)
            if (sift__cfg_streq(n, pm->choices[nc])) {
                *SIFT__REC_FIELD(rec, pm, int) = (int)nc;
                return 1;
            }
        char list[160];
        size_t k = 0;
        for (size_t c = 0; c < nc && k < sizeof list; c++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s'%s'",
                                  c == 0        ? ""
                                  : c + 1 == nc ? " or "
                                                : ", ",
                                  pm->choices[c]);
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be %s, got '%s'", what, list,
                                sift__cfg_echo(v, n));
    }
    case SIFT__PT_STRING_LIST: return sift__cfg_string_param(v, pm, n, what, rec);
    case SIFT__PT_ID_FLOAT_MAP: return sift__cfg_bias_param(v, pm, n, n, rec, 0);
    }
    return 0;
}

SIFT__PRINTF(3, 4)
static void lint_warn(sift__lint *l, const char *param_name, const char *fmt, ...)
{
    params *p = (params *)l;
    const cfg_node *n = param_name ? param(p, param_name) : NULL;
    va_list ap;
    va_start(ap, fmt);
    sift__cfg_vdiag(p->v, SIFT_SEVERITY_WARNING, SIFT_OK, n ? n->off : p->at->off, fmt, ap);
    va_end(ap);
}

static const char *lint_text(sift__lint *l, const char *param_name)
{
    params *p = (params *)l;
    const cfg_node *n = param(p, param_name);
    return n ? sift__cfg_echo(p->v, n) : "";
}

/* The name and value of `chain:` item `index`: a bare name, or a
 * mapping with one key (the name) whose value may be null (*val NULL).
 * 0 when the item is not a stage (reported, or already bad). */
static int stage_parts(cfg_validator *v, const cfg_node *item, size_t index, const cfg_node **name,
                       const cfg_node **val)
{
    *name = *val = NULL;
    if (item->bad)
        return 0;
    if (item->type == CFG_SCALAR) {
        *name = item;
        return 1;
    }
    if (item->type != CFG_MAP) {
        sift__cfg_type_err(v, item, "chain item", "a stage name or a mapping");
        return 0;
    }
    if (item->n_children != 2) {
        sift__cfg_err_at(v, item, SIFT_E_CONFIG_TYPE,
                         "stage %zu: a stage is a mapping with one key (its name); this one has %u",
                         index + 1, (unsigned)(item->n_children / 2));
        return 0;
    }
    *name = NODE(v, item->first);
    *val = NODE(v, (*name)->next);
    if ((*name)->bad || (*val)->bad)
        return 0;
    if ((*name)->type != CFG_SCALAR) {
        sift__cfg_err_at(v, *name, SIFT_E_CONFIG_TYPE, "stage %zu: the stage name must be a string",
                         index + 1);
        return 0;
    }
    if (sift__cfg_is_null(*val))
        *val = NULL;
    return 1;
}

/* Reports an unknown stage name, with the registry's closest name. */
static void unknown_stage(cfg_validator *v, const cfg_node *name)
{
    const char *names[64];
    size_t nn = 0;
    for (size_t i = 0; sift__samplers[i] && nn < 64; i++)
        names[nn++] = sift__samplers[i]->name;
    const char *dm = sift__cfg_did_you_mean(v, name->val, name->len, names, nn);
    if (dm)
        sift__cfg_err_at(v, name, SIFT_E_CONFIG_KEY, "unknown stage '%s' (did you mean '%s'?)",
                         sift__cfg_echo(v, name), dm);
    else
        sift__cfg_err_at(v, name, SIFT_E_CONFIG_KEY, "unknown stage '%s'", sift__cfg_echo(v, name));
}

/* Where the stage's parameters come from: none (a bare name), the main
 * parameter's shorthand (a scalar) or a mapping, its keys checked
 * against the descriptor's. 0 when the value's shape is wrong (reported). */
static int stage_value(cfg_validator *v, const sift__sampler_desc *def, const cfg_node *name,
                       const cfg_node *val, params *p)
{
    if (!val) {
        if (!def->bare_ok)
            return sift__cfg_err_at(v, name, SIFT_E_CONFIG_VALUE, "%s needs a value (%s: ...)",
                                    def->name, def->name);
    } else if (val->type == CFG_SCALAR) {
        if (!def->main)
            return sift__cfg_err_at(v, val, SIFT_E_CONFIG_TYPE, "%s takes %s", def->name,
                                    def->n_params ? "a mapping of parameters" : "no parameters");
        p->scalar = val;
    } else if (val->type == CFG_MAP) {
        const char *keys[16];
        size_t nk = 0;
        for (size_t i = 0; i < def->n_params && nk < 16; i++)
            keys[nk++] = def->params[i].name;
        char ctx[64];
        snprintf(ctx, sizeof ctx, "%s: ", def->name);
        sift__cfg_check_keys(v, val, keys, nk, ctx);
        p->map = val;
    } else {
        sift__cfg_type_err(v, val, def->name, def->main ? "a number or a mapping" : "a mapping");
        return 0;
    }
    return 1;
}

/* Every parameter of the descriptor into st->rec: given ones checked,
 * missing required ones reported, missing string lists defaulted. 1 when
 * all are valid, 0 when not, -1 when a default could not be made (the
 * stage is then freed). */
static int stage_params(cfg_validator *v, const sift__sampler_desc *def, params *p, cfg_stage *st)
{
    int ok = 1;
    for (size_t i = 0; i < def->n_params; i++) {
        const sift__param *pm = &def->params[i];
        const cfg_node *n = param(p, pm->name);
        if (!n) {
            if (pm->required)
                ok = missing(p, pm->name);
            else if (pm->type == SIFT__PT_STRING_LIST && ok &&
                     !sift__cfg_string_default(v, pm, &st->rec)) {
                free_stage(v, st);
                return -1;
            }
            continue;
        }
        ok &= sift__cfg_value_param(v, pm, n, pname(p, pm->name), &st->rec);
    }
    return ok;
}

/* One `chain:` item. */
static void chain_item(cfg_validator *v, const cfg_node *item, size_t index)
{
    const cfg_node *name, *val;
    if (!stage_parts(v, item, index, &name, &val))
        return;
    const sift__sampler_desc *def = sift__sampler_find(name->val, name->len);
    if (!def || name->type != CFG_SCALAR) {
        unknown_stage(v, name);
        return;
    }
    cfg_stage st;
    memset(&st, 0, sizeof st);
    st.desc = def;
    st.line = item->line;
    st.col = item->col;
    sift__rec_defaults(def, &st.rec, 1);
    if (def->value_is_param) {
        if (sift__cfg_bias_param(v, &def->params[0], val, item, &st.rec, 0))
            sift__cfg_push(v, &st);
        return;
    }
    params p = {{0}, v, def, NULL, NULL, item, {0}};
    if (!stage_value(v, def, name, val, &p))
        return;
    int ok = stage_params(v, def, &p, &st);
    if (ok < 0)
        return;
    if (def->needs_vocab_size && !v->vocab_size && !v->has_vocab_file)
        ok = sift__cfg_err_at(v, item, SIFT_E_CONFIG_VALUE,
                              "%s needs the vocabulary size: set vocab_size (or vocab)", def->name);
    if (ok && def->lint) {
        p.lint.vocab_size = v->vocab_size;
        p.lint.warn = lint_warn;
        p.lint.text = lint_text;
        def->lint(&st.rec, &p.lint);
    }
    if (ok)
        sift__cfg_push(v, &st);
    else
        free_stage(v, &st);
}

/* "dist/greedy/..." : the selectors of the registry. */
static const char *selector_names(char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; sift__samplers[i] && k < cap; i++)
        if (sift__samplers[i]->selector)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? "/" : "", sift__samplers[i]->name);
    return buf;
}

/* The rule of P-14 over the items as written (names, not parsed stages,
 * so a bad parameter does not hide a misplaced selector). */
static void check_selectors(cfg_validator *v, const cfg_node *chain)
{
    size_t i = 0, n = chain->n_children, first = SIZE_MAX;
    const cfg_node *last = NULL, *first_node = NULL;
    const char *last_name = "?", *first_name = NULL;
    for (uint32_t c = chain->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *item = NODE(v, c);
        const cfg_node *name =
            item->type == CFG_MAP && item->n_children >= 2 ? NODE(v, item->first) : item;
        const sift__sampler_desc *d =
            name->type == CFG_SCALAR ? sift__sampler_find(name->val, name->len) : NULL;
        const char *nm = d ? d->name : "?";
        if (item->bad || name->bad || name->type != CFG_SCALAR)
            return; /* already reported; a guess here would only add noise */
        last = item;
        last_name = nm;
        if (!d && NODE(v, c)->next == CFG_NONE)
            return; /* the last stage is unknown: that error says enough */
        if (!d || !d->selector)
            continue;
        if (first == SIZE_MAX) {
            first = i;
            first_node = item;
            first_name = nm;
        } else {
            sift__cfg_err_at(v, item, SIFT_E_CONFIG_VALUE,
                             "chain has more than one selector: stage %zu (%s) and stage %zu (%s)",
                             first + 1, first_name, i + 1, nm);
        }
    }
    char sel[256];
    if (first == SIZE_MAX)
        sift__cfg_err_at(v, last, SIFT_E_CONFIG_VALUE,
                         "chain must end with exactly one of %s; stage %zu (%s) is last",
                         selector_names(sel, sizeof sel), n, last_name);
    else if (first != n - 1 && first_node)
        sift__cfg_err_at(
            v, first_node, SIFT_E_CONFIG_VALUE,
            "the selector must be the last stage; stage %zu (%s) is followed by stage %zu "
            "(%s)",
            first + 1, first_name, n, last_name);
}

void sift__cfg_chain_list(cfg_validator *v, const cfg_node *chain)
{
    if (chain->bad)
        return;
    if (chain->type != CFG_SEQ) {
        sift__cfg_type_err(v, chain, "chain", "sequence of stages");
        return;
    }
    if (chain->n_children == 0) {
        char sel[256];
        sift__cfg_err_at(v, chain, SIFT_E_CONFIG_VALUE,
                         "chain is empty; it must end with one of %s",
                         selector_names(sel, sizeof sel));
        return;
    }
    if (chain->n_children > (uint32_t)v->cfg->params.max_stages) {
        sift__cfg_err_at(v, chain, SIFT_E_CONFIG_LIMIT, "chain has %u stages; max %d",
                         (unsigned)chain->n_children, (int)v->cfg->params.max_stages);
        return;
    }
    size_t i = 0;
    for (uint32_t c = chain->first; c != CFG_NONE && v->st == SIFT_OK; c = NODE(v, c)->next)
        chain_item(v, NODE(v, c), i++);
    check_selectors(v, chain);
}

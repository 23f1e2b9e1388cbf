/*
 * schema_flat.c - llama.cpp's flat sampling parameters.
 *
 * What it owns: the flat form, the sampling keys of llama.cpp's
 * common_params_sampling and of llama-server's /completion request
 * (params_from_json_cmpl), translated into the chain llama.cpp's
 * common_sampler_init would build: the `samplers` order, the no-op
 * rules, the final selector (dist, or a selector the list names:
 * adaptive_p), the mirostat switch, ignore_eos (a min_tokens stage after
 * the logit biases), and the request keys that are accepted and ignored
 * with a warning. The keys of the samplers' own parameters, their
 * llama.cpp defaults, the way llama.cpp reads each of them, and the flat
 * sampler names come from their descriptors (flat_key, flat_def,
 * flat_rule, flat_alias, flat_names, flat_order); the keys listed here
 * belong to no sampler, and DRY's window is the one parameter read by a
 * step of its own here (its -1 depends on the other DRY keys). Messages
 * keep the flat form's key names.
 *
 * The steps of sift__cfg_flat_params: the registry's keys
 * (flat_read_params), DRY's window, mirostat and n_probs, ignore_eos, the
 * refused and ignored keys, the stages ahead of the list (logit biases,
 * ignore_eos's ban), the order, then the chain (flat_chain, or
 * flat_mirostat_chain).
 */
#include <stdio.h>
#include <stdlib.h>

#include "../grammar/trigger.h"
#include "schema.h"

/* The sampling keys of llama.cpp's common_params_sampling and of
 * llama-server's /completion request (params_from_json_cmpl) that belong
 * to no sampler's parameter of the registry: the sampler list,
 * the mirostat switch, ignore_eos, and the keys sift reads only to refuse
 * or ignore. The keys of the samplers' parameters come from their
 * descriptors (flat_key, and flat_alias: llama-server's "temperature"). */
static const char *const FLAT_KEYS[] = {
    "mirostat",     "samplers",         "n_probs",          "ignore_eos",          "json_schema",
    "grammar_lazy", "grammar_triggers", "preserved_tokens", "post_sampling_probs",
};
#define N_FLAT (sizeof FLAT_KEYS / sizeof FLAT_KEYS[0])

enum { MAX_REG_FLAT = 128, MAX_REG_ALIASES = 8 };

/* The context size a -1 window stands for when the request gives no
 * n_ctx: common_params.n_ctx's default until llama.cpp took the model's
 * training context for it (n_ctx 0), which a request cannot tell. */
enum { SIFT__FLAT_DEFAULT_N_CTX = 4096 };

/* Every distinct flat key of the registry's parameters, with the first
 * parameter that names it (registry order). */
static size_t registry_flat_keys(const sift__param **out)
{
    size_t n = 0;
    for (size_t i = 0; sift__samplers[i]; i++)
        for (size_t k = 0; k < sift__samplers[i]->n_params; k++) {
            const sift__param *p = &sift__samplers[i]->params[k];
            int seen = !p->flat_key;
            for (size_t j = 0; j < n && !seen; j++)
                seen = !strcmp(out[j]->flat_key, p->flat_key);
            if (!seen && n < MAX_REG_FLAT)
                out[n++] = p;
        }
    return n;
}

static int is_flat_key(const cfg_node *key)
{
    const sift__param *reg[MAX_REG_FLAT];
    size_t nr = registry_flat_keys(reg);
    for (size_t i = 0; i < nr; i++)
        if (sift__cfg_streq(key, reg[i]->flat_key) ||
            (reg[i]->flat_alias && sift__cfg_streq(key, reg[i]->flat_alias)))
            return 1;
    for (size_t i = 0; i < N_FLAT; i++)
        if (sift__cfg_streq(key, FLAT_KEYS[i]))
            return 1;
    return 0;
}

/* Keys of a /completion request that are not sampling parameters: the
 * flat form accepts them so a request loads as it is, and warns that they
 * are ignored (docs/config.md). */
static const char *const IGNORED_KEYS[] = {
    "prompt",
    "n_predict",
    "max_tokens",
    "n_indent",
    "n_keep",
    "stream",
    "stream_options",
    "stop",
    "t_max_predict_ms",
    "t_max_prompt_ms",
    "id_slot",
    "cache_prompt",
    "return_tokens",
    "timings_per_token",
    "response_fields",
    "lora",
    "image_data",
    "multimodal_data",
    "return_progress",
    "n_cmpl",
    "n_discard",
    "verbose",
    "model",
    "chat_format",
    "reasoning_format",
    "backend_sampling",
    "speculative.n_max",
    "speculative.n_min",
    "speculative.p_min",
    "input_prefix",
    "input_suffix",
    "input_extra",
    "tokens",
    "n_cache_reuse",
    "sse_ping_interval",
    "chat_template_kwargs",
};
#define N_IGNORED (sizeof IGNORED_KEYS / sizeof IGNORED_KEYS[0])

_Static_assert(MAX_REG_FLAT + MAX_REG_ALIASES + N_FLAT + N_IGNORED <= SIFT__CFG_MAX_FLAT_FORM_KEYS,
               "sift__cfg_flat_form_keys may write more keys than its callers hold");

static int in_list(const cfg_node *key, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (sift__cfg_streq(key, names[i]))
            return 1;
    return 0;
}

size_t sift__cfg_flat_form_keys(const char **out)
{
    const sift__param *reg[MAX_REG_FLAT];
    size_t nr = registry_flat_keys(reg), n = 0;
    for (size_t i = 0; i < nr; i++)
        out[n++] = reg[i]->flat_key;
    for (size_t i = 0, na = 0; i < nr && na < MAX_REG_ALIASES; i++)
        if (reg[i]->flat_alias)
            out[n++] = reg[i]->flat_alias, na++;
    for (size_t i = 0; i < N_FLAT; i++)
        out[n++] = FLAT_KEYS[i];
    for (size_t i = 0; i < N_IGNORED; i++)
        out[n++] = IGNORED_KEYS[i];
    return n;
}

int sift__cfg_is_flat_form_key(const cfg_node *key)
{
    return is_flat_key(key) || in_list(key, IGNORED_KEYS, N_IGNORED);
}

/* Names common's --samplers accepts that sift has no sampler for. */
static const char *const UNSUPPORTED_SAMPLERS[] = {"infill"};

/* The flat form's sampler names: every descriptor's flat names in
 * llama.cpp's default order, then the selectors' (adaptive_p), then the
 * unsupported ones (desc NULL). */
typedef struct flat_name {
    const char *name;
    const sift__sampler_desc *desc;
} flat_name;

enum { MAX_FLAT_NAMES = 128, MAX_FLAT_ORDER = 32 };

/* The descriptors of the flat form in llama.cpp's default order. */
static size_t flat_order(const sift__sampler_desc **out)
{
    size_t n = 0;
    for (int o = 1; o <= MAX_FLAT_ORDER; o++)
        for (size_t i = 0; sift__samplers[i]; i++)
            if (sift__samplers[i]->flat_names && sift__samplers[i]->flat_order == o &&
                n < MAX_FLAT_ORDER)
                out[n++] = sift__samplers[i];
    return n;
}

/* flat_order, then the selectors the list may name (flat_order 0): every
 * descriptor with a flat name and character. Returns the total; the
 * first *n_order are the ordered ones. */
static size_t flat_named(const sift__sampler_desc **out, size_t *n_order)
{
    size_t n = flat_order(out);
    *n_order = n;
    for (size_t i = 0; sift__samplers[i]; i++)
        if (sift__samplers[i]->flat_names && sift__samplers[i]->selector && n < MAX_FLAT_ORDER)
            out[n++] = sift__samplers[i];
    return n;
}

static size_t flat_names(flat_name *out)
{
    const sift__sampler_desc *ord[MAX_FLAT_ORDER];
    size_t n_order, no = flat_named(ord, &n_order), n = 0;
    (void)n_order;
    for (size_t i = 0; i < no; i++)
        for (size_t k = 0; ord[i]->flat_names[k] && n < MAX_FLAT_NAMES; k++)
            out[n++] = (flat_name){ord[i]->flat_names[k], ord[i]};
    for (size_t i = 0; i < sizeof UNSUPPORTED_SAMPLERS / sizeof UNSUPPORTED_SAMPLERS[0]; i++)
        if (n < MAX_FLAT_NAMES)
            out[n++] = (flat_name){UNSUPPORTED_SAMPLERS[i], NULL};
    return n;
}

typedef struct order_item {
    const sift__sampler_desc *desc;
    int32_t line, col;
} order_item;

/* The flat form's sampler names and characters, for reading `samplers`. */
typedef struct flat_vocab {
    flat_name names[MAX_FLAT_NAMES];
    size_t nn;
    const sift__sampler_desc *ord[MAX_FLAT_ORDER];
    char chars[MAX_FLAT_ORDER + 1];
    size_t no;
} flat_vocab;

static void flat_vocab_init(flat_vocab *fv)
{
    size_t n_order;
    fv->nn = flat_names(fv->names);
    fv->no = flat_named(fv->ord, &n_order);
    for (size_t i = 0; i < fv->no; i++)
        fv->chars[i] = fv->ord[i]->flat_char;
    fv->chars[fv->no] = '\0';
}

static const flat_name *flat_name_of(const flat_vocab *fv, const char *s, size_t len)
{
    for (size_t t = 0; t < fv->nn; t++)
        if (strlen(fv->names[t].name) == len && !memcmp(fv->names[t].name, s, len))
            return &fv->names[t];
    return NULL;
}

/* llama-server reads a string as one character per sampler ("kfypmt"); a
 * string that is one of the names, or has a ';', is a list of names
 * (common's --samplers). */
static int is_char_list(const flat_vocab *fv, const cfg_node *n, const cfg_node *s)
{
    if (n->type != CFG_SCALAR || s->len == 0 || memchr(s->val, ';', s->len) ||
        flat_name_of(fv, s->val, s->len))
        return 0;
    for (size_t c = 0; c < s->len; c++)
        if (!memchr(fv->chars, s->val[c], fv->no))
            return 0;
    return 1;
}

/* Appends the samplers of a character list to items[*k..64). */
static int order_chars(cfg_validator *v, const flat_vocab *fv, const cfg_node *s, order_item *items,
                       size_t *k)
{
    for (size_t c = 0; c < s->len; c++) {
        if (*k == 64)
            return sift__cfg_err_at(v, s, SIFT_E_CONFIG_LIMIT, "samplers: more than 64 entries");
        items[*k].desc = fv->ord[(const char *)memchr(fv->chars, s->val[c], fv->no) - fv->chars];
        sift__cfg_linecol(&v->cfg->src, (size_t)sift__cfg_scalar_offset(v->cfg, s, c),
                          &items[*k].line, &items[*k].col);
        (*k)++;
    }
    return 1;
}

/* Appends the sampler named s->val[a..b) to items[*k..64), or reports
 * an unknown or unsupported name; returns -1 after "more than 64". */
static int order_name(cfg_validator *v, const flat_vocab *fv, const cfg_node *s, size_t a, size_t b,
                      order_item *items, size_t *k)
{
    const flat_name *fn = flat_name_of(fv, s->val + a, b - a);
    int64_t off = sift__cfg_scalar_offset(v->cfg, s, a);
    char nm[48];
    size_t l = b - a < sizeof nm - 1 ? b - a : sizeof nm - 1;
    memcpy(nm, s->val + a, l);
    nm[l] = '\0';
    if (!fn) {
        const char *nms[MAX_FLAT_NAMES];
        for (size_t t = 0; t < fv->nn; t++)
            nms[t] = fv->names[t].name;
        const char *dm = sift__cfg_did_you_mean(v, nm, l, nms, fv->nn);
        return sift__cfg_err_off(v, off, SIFT_E_CONFIG_VALUE,
                                 "samplers: unknown sampler '%s'%s%s%s", nm,
                                 dm ? " (did you mean '" : "", dm ? dm : "", dm ? "'?)" : "");
    }
    if (!fn->desc)
        return sift__cfg_err_off(v, off, SIFT_E_CONFIG_VALUE,
                                 "samplers: '%s' is not supported by sift", nm);
    if (*k == 64)
        return sift__cfg_err_off(v, off, SIFT_E_CONFIG_LIMIT, "samplers: more than 64 entries"), -1;
    items[*k].desc = fn->desc;
    sift__cfg_linecol(&v->cfg->src, (size_t)off, &items[*k].line, &items[*k].col);
    (*k)++;
    return 1;
}

/* Appends the samplers of a ';'-separated list of names. */
static int order_names(cfg_validator *v, const flat_vocab *fv, const cfg_node *s, order_item *items,
                       size_t *k)
{
    int ok = 1;
    size_t i = 0;
    while (i <= s->len && sift__cfg_keeps(v->cfg, SIFT_SEVERITY_ERROR)) {
        size_t j = i;
        while (j < s->len && s->val[j] != ';')
            j++;
        size_t a = i, b = j;
        while (a < b && (s->val[a] == ' ' || s->val[a] == '\t'))
            a++;
        while (b > a && (s->val[b - 1] == ' ' || s->val[b - 1] == '\t'))
            b--;
        if (b > a) {
            int r = order_name(v, fv, s, a, b, items, k);
            if (r <= 0)
                ok = 0;
            if (r < 0)
                break;
        }
        i = j + 1;
    }
    return ok;
}

/* Splits the `samplers` value ("a;b;c", "kfypmt" or a list) into order
 * items. */
static int sampler_order(cfg_validator *v, const cfg_node *n, order_item *items, size_t *count)
{
    size_t k = 0;
    int ok = 1;
    const cfg_node *list[64];
    size_t nl = 0;
    flat_vocab fv;
    flat_vocab_init(&fv);
    if (n->bad)
        return 0;
    if (n->type == CFG_SEQ) {
        for (uint32_t c = n->first; c != CFG_NONE && nl < 64; c = NODE(v, c)->next)
            list[nl++] = NODE(v, c);
        if (n->n_children > 64)
            return sift__cfg_err_at(v, n, SIFT_E_CONFIG_LIMIT, "samplers has %u entries; max 64",
                                    (unsigned)n->n_children);
    } else if (n->type == CFG_SCALAR && !sift__cfg_is_null(n)) {
        list[nl++] = n;
    } else {
        return sift__cfg_type_err(v, n, "samplers", "string (\"top_k;top_p;...\") or sequence");
    }
    for (size_t li = 0; li < nl; li++) {
        const cfg_node *s = list[li];
        if (!sift__cfg_get_str(v, s, "samplers"))
            ok = 0;
        else if (is_char_list(&fv, n, s))
            ok &= order_chars(v, &fv, s, items, &k);
        else
            ok &= order_names(v, &fv, s, items, &k);
    }
    *count = k;
    return ok;
}

/* A validated flat key and its value. */
typedef struct flat_value {
    const char *key;
    double val;
} flat_value;

/* Adds the stage of `d` with its parameters read from their flat keys
 * (llama.cpp's defaults for keys not given), if llama.cpp's constructor
 * would build it; returns 0 when it would not (its no-op rules), else 1.
 * String lists are validated only then, as llama.cpp reads them only
 * then. */
static int flat_stage(cfg_validator *v, const sift__sampler_desc *d, const flat_value *fv,
                      size_t n_fv, int32_t line, int32_t col)
{
    cfg_stage st;
    memset(&st, 0, sizeof st);
    st.desc = d;
    st.line = line;
    st.col = col;
    sift__rec_defaults(d, &st.rec, 0);
    for (size_t i = 0; i < d->n_params; i++) {
        const sift__param *pm = &d->params[i];
        for (size_t k = 0; pm->flat_key && k < n_fv; k++) {
            if (strcmp(pm->flat_key, fv[k].key))
                continue;
            if (pm->type == SIFT__PT_FLOAT)
                *SIFT__REC_FIELD(&st.rec, pm, float) = (float)fv[k].val;
            else if (pm->type == SIFT__PT_INT || pm->type == SIFT__PT_WINDOW)
                *SIFT__REC_FIELD(&st.rec, pm, int32_t) = (int32_t)fv[k].val;
            else if (pm->type == SIFT__PT_BOOL || pm->type == SIFT__PT_ENUM)
                *SIFT__REC_FIELD(&st.rec, pm, int) = (int)fv[k].val;
        }
    }
    if (d->flat_active && !d->flat_active(&st.rec))
        return 0;
    for (size_t i = 0; i < d->n_params; i++) {
        const sift__param *pm = &d->params[i];
        if (pm->type != SIFT__PT_STRING_LIST)
            continue;
        const cfg_node *n =
            pm->flat_key ? sift__cfg_find(v, NODE(v, v->t->root), pm->flat_key) : NULL;
        if (n ? !sift__cfg_string_param(v, pm, n, pm->flat_key, &st.rec)
              : !sift__cfg_string_default(v, pm, &st.rec)) {
            sift__cfg_stage_free(&v->cfg->al, &st);
            return 1;
        }
    }
    sift__cfg_push(v, &st);
    return 1;
}

/* ------------------------------------------------------------------ */
/* The samplers' parameters, read by their descriptors                 */
/* ------------------------------------------------------------------ */

/* The values of the registry's flat keys, read as llama.cpp reads them;
 * each stage's record is filled from them (flat_stage). */
typedef struct flat_values {
    flat_value fv[MAX_REG_FLAT];
    size_t n;
} flat_values;

/* The value of the registry's flat key `key` (one flat_read_params
 * read). */
static double *flat_slot(flat_values *f, const char *key)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->fv[i].key, key))
            return &f->fv[i].val;
    return NULL;
}

static double flat_get(const flat_values *f, const char *key)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->fv[i].key, key))
            return f->fv[i].val;
    return 0;
}

/* The node of pm's flat key or of its alias (*key: the name given). Both
 * given is an error (*ok = 0); the alias is then read. */
static const cfg_node *flat_node(cfg_validator *v, const cfg_node *root, const sift__param *pm,
                                 const char **key, int *ok)
{
    const cfg_node *n = sift__cfg_find(v, root, pm->flat_key);
    const cfg_node *an = pm->flat_alias ? sift__cfg_find(v, root, pm->flat_alias) : NULL;
    *key = pm->flat_key;
    if (!an)
        return n;
    if (n)
        *ok = sift__cfg_err_at(v, sift__cfg_key_of(v, root, an), SIFT_E_CONFIG_KEY,
                               "give either '%s' or '%s' (the same parameter), not both",
                               pm->flat_key, pm->flat_alias);
    *key = pm->flat_alias;
    return an;
}

/* What llama.cpp does with a valid value outside the YAML range. */
static void flat_rule(cfg_validator *v, const sift__param *pm, const cfg_node *n, const char *key,
                      double *val)
{
    switch (pm->flat_rule) {
    case SIFT__FLAT_NEG_GREEDY:
        if (*val < 0)
            sift__cfg_warn_at(v, n, "%s %s < 0 acts as 0 (greedy), as in llama.cpp", key,
                              sift__cfg_echo(v, n));
        break;
    case SIFT__FLAT_NEG_OFF:
        if (*val < 0)
            *val = -1; /* any negative value is off */
        break;
    case SIFT__FLAT_CLAMP:
        if (!sift__param_ok(pm, *val)) {
            sift__cfg_warn_at(v, n, "%s %s is clamped to [%g, %g], as in llama.cpp", key,
                              sift__cfg_echo(v, n), pm->lo, pm->hi);
            *val = *val < pm->lo ? pm->lo : (double)(float)pm->hi;
        }
        break;
    case SIFT__FLAT_SAME:
    case SIFT__FLAT_OWN: break;
    }
}

/* Reads pm's flat key into *val (llama.cpp's default if it is absent)
 * with pm's type and range, or the range of its flat rule; returns 0
 * after reporting. */
static int flat_read(cfg_validator *v, const cfg_node *root, const sift__param *pm, double *val)
{
    int ok = 1;
    const char *key;
    const cfg_node *n = flat_node(v, root, pm, &key, &ok);
    *val = pm->flat_def;
    if (!n)
        return ok;
    sift__param at = *pm;
    at.off = 0;
    if (pm->flat_rule != SIFT__FLAT_SAME) {
        at.range = pm->flat_range;
        at.lo = pm->flat_lo;
        at.hi = pm->flat_hi;
        at.range_note = NULL;
    } else if (pm->type == SIFT__PT_INT && pm->range == SIFT__R_GE) {
        /* The flat form says an integer's range as an interval. */
        at.range = SIFT__R_IN;
        at.hi = INT32_MAX;
    }
    sift__rec tmp;
    memset(&tmp, 0, sizeof tmp);
    if (!sift__cfg_value_param(v, &at, n, key, &tmp))
        return 0;
    if (pm->type == SIFT__PT_FLOAT)
        *val = *(const float *)(const void *)tmp.b;
    else if (pm->type == SIFT__PT_BOOL || pm->type == SIFT__PT_ENUM)
        *val = *(const int *)(const void *)tmp.b;
    else
        *val = *(const int32_t *)(const void *)tmp.b;
    if (ok)
        flat_rule(v, pm, n, key, val);
    return ok;
}

/* Every flat key of the registry's number, boolean and choice
 * parameters; the lists (DRY's breakers, the logit biases) are read with
 * their stages. */
static int flat_read_params(cfg_validator *v, const cfg_node *root, flat_values *f)
{
    const sift__param *reg[MAX_REG_FLAT];
    size_t nr = registry_flat_keys(reg);
    int ok = 1;
    f->n = 0;
    for (size_t i = 0; i < nr; i++) {
        const sift__param *pm = reg[i];
        if (pm->type == SIFT__PT_STRING_LIST || pm->type == SIFT__PT_ID_FLOAT_MAP)
            continue;
        flat_value *fv = &f->fv[f->n++];
        fv->key = pm->flat_key;
        fv->val = pm->flat_def;
        if (pm->flat_rule != SIFT__FLAT_OWN)
            ok &= flat_read(v, root, pm, &fv->val);
    }
    return ok;
}

/* DRY's window, as llama.cpp resolves it: its -1 (the context size, and
 * the default) counts only when DRY is on (a multiplier other than 0 and
 * a base >= 1). `ok`: the other keys were valid. */
static int flat_dry_window(cfg_validator *v, const cfg_node *root, flat_values *f, int ok)
{
    double mult = flat_get(f, "dry_multiplier"), base = flat_get(f, "dry_base");
    double *last_n = flat_slot(f, "dry_penalty_last_n");
    const cfg_node *n = sift__cfg_find(v, root, "dry_penalty_last_n");
    int dry_on = mult != 0 && base >= 1;
    int32_t w = 0;
    int64_t x;
    if (n) {
        if (!sift__cfg_get_int(v, n, "dry_penalty_last_n", &x))
            ok = 0;
        else if (x == -1 && !dry_on)
            *last_n = 0;
        else if (sift__cfg_window(v, n, "dry_penalty_last_n", &w) == 0)
            ok = 0;
        else
            *last_n = w;
    } else if (dry_on && ok && v->n_ctx > 0) {
        if (v->n_ctx > SIFT_DEFAULT_MAX_HISTORY)
            ok = sift__cfg_err_at(
                v, v->n_ctx_node, SIFT_E_CONFIG_LIMIT,
                "dry_penalty_last_n defaults to -1, n_ctx %d, which exceeds max_history %d",
                (int)v->n_ctx, SIFT_DEFAULT_MAX_HISTORY);
        else
            *last_n = v->n_ctx;
    } else if (dry_on && ok) {
        sift__cfg_warn_at(
            v, sift__cfg_find(v, root, "dry_multiplier"),
            "dry_penalty_last_n defaults to -1 (the context size) and n_ctx is "
            "not given: %d tokens; set n_ctx to the server's context size (by default "
            "the model's training context)",
            SIFT__FLAT_DEFAULT_N_CTX);
        *last_n = SIFT__FLAT_DEFAULT_N_CTX;
    }
    if (ok && mult != 0 && base < 1)
        sift__cfg_warn_at(v, sift__cfg_find(v, root, "dry_base"), "dry_base < 1 turns DRY off");
    return ok;
}

/* ------------------------------------------------------------------ */
/* The flat form's own keys                                            */
/* ------------------------------------------------------------------ */

/* mirostat (0, 1 or 2 into *mirostat) and n_probs. */
static int flat_mirostat(cfg_validator *v, const cfg_node *root, int32_t *mirostat)
{
    int ok = 1;
    const cfg_node *n;
    *mirostat = 0;
    if ((n = sift__cfg_find(v, root, "mirostat"))) {
        if (sift__cfg_get_int_in(v, n, "mirostat", 0, 2, mirostat)) {
            if (*mirostat == 1 && !v->vocab_size && !v->has_vocab_file)
                ok = sift__cfg_err_at(
                    v, n, SIFT_E_CONFIG_VALUE,
                    "mirostat 1 needs the vocabulary size: set vocab_size (or vocab)");
        } else {
            ok = 0;
        }
    }
    if ((n = sift__cfg_find(v, root, "n_probs"))) {
        int32_t np;
        if (sift__cfg_get_int_in(v, n, "n_probs", 0, INT32_MAX, &np)) {
            v->cfg->logprobs.enabled = np > 0;
            v->cfg->logprobs.top_n = np;
        } else {
            ok = 0;
        }
    }
    if ((n = sift__cfg_find(v, root, "post_sampling_probs"))) {
        int b = 0;
        if (!sift__cfg_get_bool(v, n, "post_sampling_probs", &b))
            ok = 0;
        else if (b && !v->cfg->logprobs.enabled)
            sift__cfg_warn_at(v, n, "post_sampling_probs without n_probs > 0 returns nothing");
        else
            v->cfg->logprobs.post_sampling = b;
    }
    return ok;
}

/* One of llama-server's grammar_triggers ({type, value, token}; type 0
 * a token, 1 a word, 2 a pattern searched in the text, 3 a pattern of
 * the whole text) into the config's trigger lists, counted in n[type]. */
static int flat_trigger(cfg_validator *v, const cfg_node *t, size_t i, size_t *n)
{
    static const char *const KEYS[] = {"type", "value", "token"};
    char what[48];
    snprintf(what, sizeof what, "grammar_triggers[%zu]", i);
    if (t->bad)
        return 0;
    if (t->type != CFG_MAP)
        return sift__cfg_type_err(v, t, what, "mapping {type, value, token}");
    sift__cfg_check_keys(v, t, KEYS, 3, "grammar_triggers: ");
    const cfg_node *ty = sift__cfg_find(v, t, "type"), *val = sift__cfg_find(v, t, "value"),
                   *tok = sift__cfg_find(v, t, "token");
    int32_t type;
    if (!ty)
        return sift__cfg_err_at(v, t, SIFT_E_CONFIG_KEY, "%s: missing 'type'", what);
    if (!sift__cfg_get_int_in(v, ty,
                              "grammar_triggers type (0 token, 1 word, 2 pattern, 3 "
                              "pattern_full)",
                              0, 3, &type))
        return 0;
    sift_config *cfg = v->cfg;
    if (type == 0) {
        int32_t id;
        if (!tok)
            return sift__cfg_err_at(v, t, SIFT_E_CONFIG_KEY, "%s: a token trigger needs 'token'",
                                    what);
        if (!sift__cfg_token_id(v, tok, "grammar_triggers token", &id))
            return 0;
        v->token_off[n[0]] = tok->off;
        cfg->g_tokens[n[0]++] = id;
        return 1;
    }
    if (!val)
        return sift__cfg_err_at(v, t, SIFT_E_CONFIG_KEY, "%s: missing 'value'", what);
    if (!sift__cfg_get_str(v, val, what))
        return 0;
    if (val->len == 0 && type == 1)
        return sift__cfg_err_at(v, val, SIFT_E_CONFIG_VALUE, "%s: the word is empty", what);
    if (type >= 2) {
        size_t eoff = 0;
        int empty = 0;
        char msg[256];
        sift_status st = sift__trigger_check_pattern(val->val, val->len, type == 3, &cfg->al, &eoff,
                                                     &empty, msg, sizeof msg);
        if (st == SIFT_E_NOMEM)
            v->st = st;
        if (st != SIFT_OK)
            return st == SIFT_E_NOMEM
                       ? 0
                       : sift__cfg_err_off(v, sift__cfg_scalar_offset(cfg, val, eoff), st,
                                           "%s, offset %zu: %s", what, eoff, msg);
        if (empty)
            sift__cfg_warn_at(v, val,
                              "%s matches the empty string; it fires at the first "
                              "generated byte",
                              what);
    }
    char *copy = sift__memdup(&cfg->al, val->val, val->len);
    if (!copy) {
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    if (type == 1) {
        cfg->g_word_lengths[n[1]] = val->len;
        cfg->g_words[n[1]++] = copy;
    } else if (type == 2) {
        cfg->g_patterns[n[2]++] = copy;
    } else {
        cfg->g_full_patterns[n[3]++] = copy;
    }
    return 1;
}

/* grammar_lazy and grammar_triggers: llama-server's lazy grammar, as the
 * grammar section's lazy triggers (docs/triggers.md). The triggers are
 * judged with the grammar (schema_grammar.c compiles them beside it). */
static int flat_lazy(cfg_validator *v, const cfg_node *root)
{
    const cfg_node *n = sift__cfg_find(v, root, "grammar_lazy");
    const cfg_node *tr = sift__cfg_find(v, root, "grammar_triggers");
    int lazy = 0;
    if (n && !sift__cfg_get_bool(v, n, "grammar_lazy", &lazy))
        return 0;
    if (tr && !tr->bad && !sift__cfg_is_null(tr) && tr->type != CFG_SEQ)
        return sift__cfg_type_err(v, tr, "grammar_triggers", "sequence of {type, value, token}");
    size_t nt = tr && tr->type == CFG_SEQ ? tr->n_children : 0;
    if (!lazy) {
        if (nt)
            sift__cfg_warn_at(v, tr,
                              "grammar_triggers without grammar_lazy: true are ignored, "
                              "as in llama-server");
        return 1;
    }
    const cfg_node *g = sift__cfg_find(v, root, "grammar"),
                   *js = sift__cfg_find(v, root, "json_schema");
    int has_g = (g && !(g->type == CFG_SCALAR && (sift__cfg_is_null(g) || g->len == 0))) ||
                (js && !sift__cfg_is_null(js));
    if (!has_g) {
        sift__cfg_warn_at(v, n, "grammar_lazy without a grammar does nothing");
        return 1;
    }
    if (g && g->type == CFG_MAP)
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_KEY,
                                "grammar_lazy: give the triggers in grammar.lazy when grammar is "
                                "a mapping, or grammar as the GBNF text");
    if (nt == 0)
        return sift__cfg_err_at(v, tr ? tr : n, SIFT_E_CONFIG_VALUE,
                                "grammar_lazy needs grammar_triggers (llama-server refuses a lazy "
                                "grammar without triggers)");
    if (nt > 1024)
        return sift__cfg_err_at(v, tr, SIFT_E_CONFIG_LIMIT,
                                "grammar_triggers has %zu entries; "
                                "max 1024",
                                nt);
    sift_config *cfg = v->cfg;
    const sift__alloc *al = &cfg->al;
    cfg->g_tokens = sift__calloc(al, nt, sizeof *cfg->g_tokens);
    v->token_off = sift__calloc(al, nt, sizeof *v->token_off);
    cfg->g_words = sift__calloc(al, nt, sizeof *cfg->g_words);
    cfg->g_word_lengths = sift__calloc(al, nt, sizeof *cfg->g_word_lengths);
    cfg->g_patterns = sift__calloc(al, nt, sizeof *cfg->g_patterns);
    cfg->g_full_patterns = sift__calloc(al, nt, sizeof *cfg->g_full_patterns);
    if (!cfg->g_tokens || !v->token_off || !cfg->g_words || !cfg->g_word_lengths ||
        !cfg->g_patterns || !cfg->g_full_patterns) {
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    size_t cnt[4] = {0, 0, 0, 0}, i = 0;
    int ok = 1;
    for (uint32_t c = tr->first; c != CFG_NONE && v->st == SIFT_OK; c = NODE(v, c)->next, i++)
        ok &= flat_trigger(v, NODE(v, c), i, cnt);
    cfg->grammar.lazy = 1;
    cfg->grammar.n_tokens = cnt[0];
    cfg->grammar.n_words = cnt[1];
    cfg->grammar.n_patterns = cnt[2];
    cfg->grammar.n_full_patterns = cnt[3];
    cfg->grammar.words = (const char *const *)cfg->g_words;
    cfg->grammar.word_lengths = cfg->g_word_lengths;
    cfg->grammar.patterns = (const char *const *)cfg->g_patterns;
    cfg->grammar.full_patterns = (const char *const *)cfg->g_full_patterns;
    cfg->grammar.tokens = cfg->g_tokens;
    return ok;
}

/* The grammar keys sift refuses or ignores in the flat form (json_schema
 * itself is read by sift__cfg_flat_json_schema after the parameters,
 * schema.c; with a grammar beside it, llama-server refuses both), and
 * the request keys that are not sampling parameters. */
static int flat_refused_keys(cfg_validator *v, const cfg_node *root)
{
    int ok = 1;
    const cfg_node *n;
    if ((n = sift__cfg_find(v, root, "json_schema")) && !n->bad && !sift__cfg_is_null(n)) {
        const cfg_node *gr = sift__cfg_find(v, root, "grammar");
        if (gr && !(gr->type == CFG_SCALAR && (sift__cfg_is_null(gr) || gr->len == 0)))
            ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_KEY,
                                  "give either json_schema or grammar, not both");
    }
    ok &= flat_lazy(v, root);
    if ((n = sift__cfg_find(v, root, "preserved_tokens")))
        sift__cfg_warn_at(v, n, "preserved_tokens does not change sampling; ignored");
    for (uint32_t ki = root->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        if (!key->bad && in_list(key, IGNORED_KEYS, N_IGNORED))
            sift__cfg_warn_at(v, key, "'%s' is not a sampling parameter; ignored",
                              sift__cfg_echo(v, key));
        ki = key->next == CFG_NONE ? CFG_NONE : NODE(v, key->next)->next;
    }
    return ok;
}

/* ignore_eos: true bans the vocabulary's end-of-generation tokens for
 * the whole generation (llama-server adds them to the logit biases at
 * -inf). Returns its node when true, else NULL; *ok = 0 if invalid. */
static const cfg_node *flat_ignore_eos(cfg_validator *v, const cfg_node *root, int *ok)
{
    const cfg_node *n = sift__cfg_find(v, root, "ignore_eos");
    int b = 0;
    if (!n)
        return NULL;
    if (!sift__cfg_get_bool(v, n, "ignore_eos", &b))
        *ok = 0;
    return b ? n : NULL;
}

/* The stages llama.cpp puts ahead of the samplers list: the logit
 * biases, then ignore_eos's ban (llama-server's biases hold it). With no
 * ids, min_tokens with n = -1 bans the vocabulary's end-of-generation
 * ids: the build needs the vocabulary, and a trial build leaves the
 * stage out, as it leaves out DRY's breakers. */
static int flat_leading_stages(cfg_validator *v, const cfg_node *root, const cfg_node *ignore_eos,
                               int ok)
{
    const cfg_node *n;
    if ((n = sift__cfg_find(v, root, "logit_bias"))) {
        size_t before = v->cfg->n_errors;
        sift__cfg_request_bias(v, n, 0);
        if (v->cfg->n_errors != before)
            ok = 0;
    }
    if (ignore_eos && ok) {
        cfg_stage mt;
        memset(&mt, 0, sizeof mt);
        mt.desc = sift__cfg_desc_named("min_tokens");
        mt.line = ignore_eos->line;
        mt.col = ignore_eos->col;
        sift__rec_defaults(mt.desc, &mt.rec, 1);
        *SIFT__REC_FIELD(&mt.rec, sift__param_find(mt.desc, "n"), int32_t) = -1;
        sift__cfg_push(v, &mt);
    }
    return ok;
}

/* The `samplers` order, or llama.cpp's default one. */
static int flat_order_items(cfg_validator *v, const cfg_node *root, order_item *order,
                            size_t *n_order)
{
    const cfg_node *sn = sift__cfg_find(v, root, "samplers");
    if (sn)
        return sampler_order(v, sn, order, n_order);
    const sift__sampler_desc *ord[MAX_FLAT_ORDER];
    *n_order = flat_order(ord);
    for (size_t i = 0; i < *n_order; i++) {
        order[i].desc = ord[i];
        order[i].line = root->line;
        order[i].col = root->col;
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* The chain                                                           */
/* ------------------------------------------------------------------ */

/* The chain llama.cpp's common_sampler_init builds with mirostat off,
 * without the samplers its constructors turn into no-ops
 * (docs/config.md). A selector the list names (adaptive_p) is no place
 * in the order: it replaces dist at the end, unless its values make it
 * draw as dist does (a negative adaptive_target). */
static void flat_chain(cfg_validator *v, const cfg_node *root, const flat_values *f,
                       const order_item *order, size_t n_order)
{
    const cfg_node *target_node = sift__cfg_find(v, root, "adaptive_target");
    double target = flat_get(f, "adaptive_target");
    const order_item *sel = NULL;
    for (size_t i = 0; i < n_order && v->st == SIFT_OK; i++) {
        if (order[i].desc->selector)
            sel = sel ? sel : &order[i];
        else
            flat_stage(v, order[i].desc, f->fv, f->n, order[i].line, order[i].col);
    }
    if (v->st == SIFT_OK && sel && flat_stage(v, sel->desc, f->fv, f->n, sel->line, sel->col))
        return;
    if (sel && v->st == SIFT_OK)
        sift__cfg_warn_lc(v, sel->line, sel->col,
                          "adaptive_p is off: adaptive_target is %s (negative; llama.cpp's "
                          "default is -1), so the chain ends with dist, as in llama.cpp",
                          target_node ? sift__cfg_echo(v, target_node) : "-1");
    else if (target >= 0)
        sift__cfg_warn_at(v, target_node,
                          "adaptive_target is ignored: samplers does not name adaptive_p "
                          "(as in llama.cpp)");
    flat_stage(v, sift__cfg_desc_named("dist"), f->fv, f->n, root->line, root->col);
}

/* mirostat 1 or 2: temperature (without its dynamic range), then the
 * mirostat selector; the samplers list is ignored, as in llama.cpp. */
static void flat_mirostat_chain(cfg_validator *v, const cfg_node *root, flat_values *f,
                                int32_t mirostat)
{
    const cfg_node *sn = sift__cfg_find(v, root, "samplers");
    if (flat_get(f, "adaptive_target") >= 0)
        sift__cfg_warn_at(v, sift__cfg_find(v, root, "adaptive_target"),
                          "adaptive_target is ignored when mirostat is on");
    if (sn)
        sift__cfg_warn_at(v, sn, "samplers is ignored when mirostat is on");
    *flat_slot(f, "dynatemp_range") = 0;
    flat_stage(v, sift__cfg_desc_named("temperature"), f->fv, f->n, root->line, root->col);
    flat_stage(v, sift__cfg_desc_named(mirostat == 1 ? "mirostat" : "mirostat_v2"), f->fv, f->n,
               root->line, root->col);
}

void sift__cfg_flat_params(cfg_validator *v, const cfg_node *root)
{
    flat_values f;
    int32_t mirostat;
    const cfg_node *rl = sift__cfg_find(v, root, "repeat_last_n");
    if (!v->n_ctx && rl && sift__cfg_is_plain(rl) && sift__cfg_streq(rl, "-1")) {
        /* llama-server's -1 is its context size */
        sift__cfg_warn_at(v, rl,
                          "repeat_last_n -1 is the context size and n_ctx is not given: %d "
                          "tokens; set n_ctx to the server's context size (by default the model's "
                          "training context)",
                          SIFT__FLAT_DEFAULT_N_CTX);
        v->n_ctx = SIFT__FLAT_DEFAULT_N_CTX;
    }
    int ok = flat_read_params(v, root, &f);
    ok = flat_dry_window(v, root, &f, ok);
    ok &= flat_mirostat(v, root, &mirostat);
    const cfg_node *ignore_eos = flat_ignore_eos(v, root, &ok);
    ok &= flat_refused_keys(v, root);
    ok = flat_leading_stages(v, root, ignore_eos, ok);
    order_item order[64];
    size_t n_order = 0;
    ok &= flat_order_items(v, root, order, &n_order);
    if (!ok || v->st != SIFT_OK)
        return;
    if (mirostat == 0)
        flat_chain(v, root, &f, order, n_order);
    else
        flat_mirostat_chain(v, root, &f, mirostat);
}

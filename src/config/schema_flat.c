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
 * with a warning. The keys of the samplers' own parameters and
 * the flat sampler names come from their descriptors (flat_key,
 * flat_names, flat_order); the keys listed here belong to no sampler.
 * Messages keep the flat form's key names.
 */
#include <stdio.h>
#include <stdlib.h>

#include "schema.h"

/* The sampling keys of llama.cpp's common_params_sampling and of
 * llama-server's /completion request (params_from_json_cmpl) that belong
 * to no sampler's parameter of the registry: aliases, the sampler list,
 * the mirostat switch, ignore_eos, and the keys sift reads only to refuse
 * or ignore. The keys of the samplers' parameters come from their
 * descriptors (flat_key). */
static const char *const FLAT_KEYS[] = {
    "temperature", "mirostat",     "samplers",         "n_probs",          "ignore_eos",
    "json_schema", "grammar_lazy", "grammar_triggers", "preserved_tokens",
};
#define N_FLAT (sizeof FLAT_KEYS / sizeof FLAT_KEYS[0])

enum { MAX_REG_FLAT = 128 };

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
        if (sift__cfg_streq(key, reg[i]->flat_key))
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
    "post_sampling_probs",
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
};
#define N_IGNORED (sizeof IGNORED_KEYS / sizeof IGNORED_KEYS[0])

_Static_assert(MAX_REG_FLAT + N_FLAT + N_IGNORED <= SIFT__CFG_MAX_FLAT_FORM_KEYS,
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

typedef struct flat {
    int32_t top_k, repeat_last_n, dry_allowed_length, dry_last_n, mirostat, min_keep;
    float top_p, min_p, typical_p, temp, dyn_range, dyn_exp, repeat, freq, presence;
    float dry_mult, dry_base, xtc_p, xtc_t, sigma, tau, eta;
} flat;

typedef struct order_item {
    const sift__sampler_desc *desc;
    int32_t line, col;
} order_item;

static int flat_float_in(cfg_validator *v, const cfg_node *root, const char *key, double lo,
                         double hi, float *out)
{
    const cfg_node *n = sift__cfg_find(v, root, key);
    return !n || sift__cfg_get_float_in(v, n, key, lo, hi, out);
}

static int flat_finite(cfg_validator *v, const cfg_node *root, const char *key, float *out)
{
    const cfg_node *n = sift__cfg_find(v, root, key);
    return !n || sift__cfg_get_finite(v, n, key, out);
}

/* Splits the `samplers` value ("a;b;c" or a list) into order items. */
static int sampler_order(cfg_validator *v, const cfg_node *n, order_item *items, size_t *count)
{
    size_t k = 0;
    int ok = 1;
    const cfg_node *list[64];
    size_t nl = 0;
    flat_name names[MAX_FLAT_NAMES];
    size_t nn = flat_names(names);
    const sift__sampler_desc *ord[MAX_FLAT_ORDER];
    size_t n_order, no = flat_named(ord, &n_order);
    (void)n_order;
    char chars_of[MAX_FLAT_ORDER + 1];
    for (size_t i = 0; i < no; i++)
        chars_of[i] = ord[i]->flat_char;
    chars_of[no] = '\0';
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
        if (!sift__cfg_get_str(v, s, "samplers")) {
            ok = 0;
            continue;
        }
        /* llama-server reads a string as one character per sampler
         * ("kfypmt"); a string that is one of the names, or has a ';', is
         * a list of names (common's --samplers). */
        int chars = n->type == CFG_SCALAR && s->len > 0 && !memchr(s->val, ';', s->len);
        for (size_t t = 0; t < nn && chars; t++)
            if (strlen(names[t].name) == s->len && !memcmp(names[t].name, s->val, s->len))
                chars = 0;
        for (size_t c = 0; c < s->len && chars; c++)
            if (!memchr(chars_of, s->val[c], no))
                chars = 0;
        if (chars) {
            for (size_t c = 0; c < s->len; c++) {
                if (k == 64) {
                    ok = sift__cfg_err_at(v, s, SIFT_E_CONFIG_LIMIT,
                                          "samplers: more than 64 entries");
                    break;
                }
                items[k].desc = ord[(const char *)memchr(chars_of, s->val[c], no) - chars_of];
                sift__cfg_linecol(&v->cfg->src, (size_t)sift__cfg_scalar_offset(v->cfg, s, c),
                                  &items[k].line, &items[k].col);
                k++;
            }
            continue;
        }
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
                const flat_name *fn = NULL;
                for (size_t t = 0; t < nn && !fn; t++)
                    if (strlen(names[t].name) == b - a && !memcmp(names[t].name, s->val + a, b - a))
                        fn = &names[t];
                int64_t off = sift__cfg_scalar_offset(v->cfg, s, a);
                if (!fn) {
                    const char *nms[MAX_FLAT_NAMES];
                    for (size_t t = 0; t < nn; t++)
                        nms[t] = names[t].name;
                    char nm[48];
                    size_t l = b - a < sizeof nm - 1 ? b - a : sizeof nm - 1;
                    memcpy(nm, s->val + a, l);
                    nm[l] = '\0';
                    const char *dm = sift__cfg_did_you_mean(v, nm, l, nms, nn);
                    ok = sift__cfg_err_off(
                        v, off, SIFT_E_CONFIG_VALUE, "samplers: unknown sampler '%s'%s%s%s", nm,
                        dm ? " (did you mean '" : "", dm ? dm : "", dm ? "'?)" : "");
                } else if (!fn->desc) {
                    char nm[48];
                    size_t l = b - a < sizeof nm - 1 ? b - a : sizeof nm - 1;
                    memcpy(nm, s->val + a, l);
                    nm[l] = '\0';
                    ok = sift__cfg_err_off(v, off, SIFT_E_CONFIG_VALUE,
                                           "samplers: '%s' is not supported by sift", nm);
                } else if (k < 64) {
                    items[k].desc = fn->desc;
                    sift__cfg_linecol(&v->cfg->src, (size_t)off, &items[k].line, &items[k].col);
                    k++;
                } else {
                    ok = sift__cfg_err_off(v, off, SIFT_E_CONFIG_LIMIT,
                                           "samplers: more than 64 entries");
                    break;
                }
            }
            i = j + 1;
        }
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

void sift__cfg_flat_params(cfg_validator *v, const cfg_node *root)
{
    flat f = {40,   64,   2, -1, 0, 0,     0.95f, 0.05f, 1.0f,  0.8f, 0,
              1.0f, 1.0f, 0, 0,  0, 1.75f, 0,     0.1f,  -1.0f, 5.0f, 0.1f};
    int ok = 1;
    const cfg_node *n;
    if ((n = sift__cfg_find(v, root, "top_k")))
        ok &= sift__cfg_get_int_in(v, n, "top_k", INT32_MIN, INT32_MAX, &f.top_k);
    ok &= flat_float_in(v, root, "top_p", 0, 1, &f.top_p);
    ok &= flat_float_in(v, root, "min_p", 0, 1, &f.min_p);
    ok &= flat_float_in(v, root, "typical_p", 0, 1, &f.typical_p);
    /* llama-server's request says temperature, common's params temp. */
    const cfg_node *tk = sift__cfg_find(v, root, "temperature");
    const char *tname = tk ? "temperature" : "temp";
    if (tk && sift__cfg_find(v, root, "temp"))
        ok = sift__cfg_err_at(v, sift__cfg_key_of(v, root, tk), SIFT_E_CONFIG_KEY,
                              "give either 'temp' or 'temperature' (the same parameter), not both");
    ok &= flat_finite(v, root, tname, &f.temp);
    if ((n = sift__cfg_find(v, root, tname)) && ok && f.temp < 0)
        sift__cfg_warn_at(v, n, "%s %s < 0 acts as 0 (greedy), as in llama.cpp", tname,
                          sift__cfg_echo(v, n));
    if ((n = sift__cfg_find(v, root, "dynatemp_range"))) {
        ok &= sift__cfg_get_finite(v, n, "dynatemp_range", &f.dyn_range);
        if (ok && f.dyn_range < 0)
            ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "dynatemp_range must be >= 0, got %s",
                                  sift__cfg_echo(v, n));
    }
    if ((n = sift__cfg_find(v, root, "dynatemp_exponent"))) {
        ok &= sift__cfg_get_finite(v, n, "dynatemp_exponent", &f.dyn_exp);
        if (ok && !(f.dyn_exp > 0))
            ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE,
                                  "dynatemp_exponent must be > 0, got %s", sift__cfg_echo(v, n));
    }
    if ((n = sift__cfg_find(v, root, "repeat_penalty"))) {
        ok &= sift__cfg_get_finite(v, n, "repeat_penalty", &f.repeat);
        if (ok && !(f.repeat > 0))
            ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "repeat_penalty must be > 0, got %s",
                                  sift__cfg_echo(v, n));
    }
    if ((n = sift__cfg_find(v, root, "repeat_last_n")))
        ok &= sift__cfg_window(v, n, "repeat_last_n", &f.repeat_last_n);
    ok &= flat_finite(v, root, "frequency_penalty", &f.freq);
    ok &= flat_finite(v, root, "presence_penalty", &f.presence);
    if ((n = sift__cfg_find(v, root, "dry_multiplier"))) {
        ok &= sift__cfg_get_finite(v, n, "dry_multiplier", &f.dry_mult);
        if (ok && f.dry_mult < 0)
            ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "dry_multiplier must be >= 0, got %s",
                                  sift__cfg_echo(v, n));
    }
    ok &= flat_finite(v, root, "dry_base", &f.dry_base);
    if ((n = sift__cfg_find(v, root, "dry_allowed_length")))
        ok &= sift__cfg_get_int_in(v, n, "dry_allowed_length", 0, INT32_MAX, &f.dry_allowed_length);
    const cfg_node *dry_last = sift__cfg_find(v, root, "dry_penalty_last_n");
    int dry_on = f.dry_mult != 0 && f.dry_base >= 1;
    if (dry_last) {
        int64_t x;
        if (!sift__cfg_get_int(v, dry_last, "dry_penalty_last_n", &x))
            ok = 0;
        else if (x == -1 && !dry_on)
            f.dry_last_n = 0;
        else if (sift__cfg_window(v, dry_last, "dry_penalty_last_n", &f.dry_last_n) == 0)
            ok = 0;
    } else if (dry_on && ok && v->n_ctx > 0) {
        if (v->n_ctx > SIFT_DEFAULT_MAX_HISTORY)
            ok = sift__cfg_err_at(
                v, v->n_ctx_node, SIFT_E_CONFIG_LIMIT,
                "dry_penalty_last_n defaults to -1, n_ctx %d, which exceeds max_history %d",
                (int)v->n_ctx, SIFT_DEFAULT_MAX_HISTORY);
        else
            f.dry_last_n = v->n_ctx;
    } else if (dry_on && ok) {
        ok = sift__cfg_err_at(
            v, sift__cfg_find(v, root, "dry_multiplier"), SIFT_E_CONFIG_VALUE,
            "dry_penalty_last_n defaults to -1 (the context size): set n_ctx to the "
            "context size, or dry_penalty_last_n to a window");
    }
    if (ok && f.dry_mult != 0 && f.dry_base < 1)
        sift__cfg_warn_at(v, sift__cfg_find(v, root, "dry_base"), "dry_base < 1 turns DRY off");
    ok &= flat_float_in(v, root, "xtc_probability", 0, 1, &f.xtc_p);
    ok &= flat_float_in(v, root, "xtc_threshold", 0, 1, &f.xtc_t);
    ok &= flat_finite(v, root, "top_n_sigma", &f.sigma);
    if ((n = sift__cfg_find(v, root, "mirostat"))) {
        if (sift__cfg_get_int_in(v, n, "mirostat", 0, 2, &f.mirostat)) {
            if (f.mirostat == 1 && !v->vocab_size && !v->has_vocab_file)
                ok = sift__cfg_err_at(
                    v, n, SIFT_E_CONFIG_VALUE,
                    "mirostat 1 needs the vocabulary size: set vocab_size (or vocab)");
        } else {
            ok = 0;
        }
    }
    if ((n = sift__cfg_find(v, root, "mirostat_tau"))) {
        ok &= sift__cfg_get_finite(v, n, "mirostat_tau", &f.tau);
        if (ok && f.tau < 0)
            ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "mirostat_tau must be >= 0, got %s",
                                  sift__cfg_echo(v, n));
    }
    if ((n = sift__cfg_find(v, root, "mirostat_eta"))) {
        ok &= sift__cfg_get_finite(v, n, "mirostat_eta", &f.eta);
        if (ok && f.eta < 0)
            ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "mirostat_eta must be >= 0, got %s",
                                  sift__cfg_echo(v, n));
    }
    if ((n = sift__cfg_find(v, root, "min_keep")))
        ok &= sift__cfg_get_int_in(v, n, "min_keep", 0, INT32_MAX, &f.min_keep);
    if ((n = sift__cfg_find(v, root, "n_probs"))) {
        int32_t np;
        if (sift__cfg_get_int_in(v, n, "n_probs", 0, INT32_MAX, &np))
            sift__cfg_warn_at(v, n, "n_probs does not change sampling; ignored");
        else
            ok = 0;
    }
    /* ignore_eos: true bans the vocabulary's end-of-generation tokens for
     * the whole generation (llama-server adds them to the logit biases
     * at -inf): a min_tokens stage with n = -1 and no ids. */
    const cfg_node *ignore_eos = NULL;
    if ((n = sift__cfg_find(v, root, "ignore_eos"))) {
        int b = 0;
        if (!sift__cfg_get_bool(v, n, "ignore_eos", &b))
            ok = 0;
        else if (b)
            ignore_eos = n;
    }
    /* json_schema: turned into a check-mode grammar by
     * sift__cfg_flat_json_schema after the parameters (schema.c); with a
     * grammar beside it, llama-server refuses both. */
    if ((n = sift__cfg_find(v, root, "json_schema")) && !n->bad && !sift__cfg_is_null(n)) {
        const cfg_node *gr = sift__cfg_find(v, root, "grammar");
        if (gr && !(gr->type == CFG_SCALAR && (sift__cfg_is_null(gr) || gr->len == 0)))
            ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_KEY,
                                  "give either json_schema or grammar, not both");
    }
    if ((n = sift__cfg_find(v, root, "grammar_lazy"))) {
        int b = 0;
        if (!sift__cfg_get_bool(v, n, "grammar_lazy", &b))
            ok = 0;
        else if (b)
            ok = sift__cfg_err_at(
                v, n, SIFT_E_CONFIG_VALUE,
                "grammar_lazy is not supported in the flat form yet; give grammar as a "
                "mapping with its lazy triggers (grammar.lazy)");
    }
    if ((n = sift__cfg_find(v, root, "grammar_triggers")) && !n->bad && !sift__cfg_is_null(n) &&
        !(n->type == CFG_SEQ && n->n_children == 0))
        ok = sift__cfg_err_at(
            v, n, SIFT_E_CONFIG_VALUE,
            "grammar_triggers is not supported in the flat form yet; give grammar as a "
            "mapping with its lazy triggers (grammar.lazy)");
    if ((n = sift__cfg_find(v, root, "preserved_tokens")))
        sift__cfg_warn_at(v, n, "preserved_tokens does not change sampling; ignored");
    /* adaptive-p's keys: llama.cpp takes any target <= 1 (negative =
     * off: the sampler draws as dist does) and clamps the decay to
     * [0, 0.99]. They matter only when samplers names adaptive_p. */
    float ap_target = -1.0f, ap_decay = 0.9f;
    const cfg_node *ap_target_node = sift__cfg_find(v, root, "adaptive_target");
    if ((n = ap_target_node)) {
        if (!sift__cfg_get_finite(v, n, "adaptive_target", &ap_target))
            ok = 0;
        else if (ap_target > 1)
            ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "adaptive_target must be <= 1, got %s",
                                  sift__cfg_echo(v, n));
        else if (ap_target < 0)
            ap_target = -1.0f; /* any negative value is off */
    }
    if ((n = sift__cfg_find(v, root, "adaptive_decay"))) {
        if (!sift__cfg_get_finite(v, n, "adaptive_decay", &ap_decay)) {
            ok = 0;
        } else if (ap_decay < 0 || ap_decay > 0.99f) {
            sift__cfg_warn_at(v, n, "adaptive_decay %s is clamped to [0, 0.99], as in llama.cpp",
                              sift__cfg_echo(v, n));
            ap_decay = ap_decay < 0 ? 0.0f : 0.99f;
        }
    }
    for (uint32_t ki = root->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        if (!key->bad && in_list(key, IGNORED_KEYS, N_IGNORED))
            sift__cfg_warn_at(v, key, "'%s' is not a sampling parameter; ignored",
                              sift__cfg_echo(v, key));
        ki = key->next == CFG_NONE ? CFG_NONE : NODE(v, key->next)->next;
    }
    /* llama.cpp's common sampler puts the logit biases ahead of the
     * samplers list: stage 0. */
    if ((n = sift__cfg_find(v, root, "logit_bias"))) {
        cfg_stage lb;
        memset(&lb, 0, sizeof lb);
        lb.desc = sift__cfg_desc_named("logit_bias");
        lb.line = n->line;
        lb.col = n->col;
        size_t before = v->cfg->n_errors;
        if (sift__cfg_bias_param(v, &lb.desc->params[0], n, n, &lb.rec, 1))
            sift__cfg_push(v, &lb);
        if (v->cfg->n_errors != before)
            ok = 0;
    }
    /* ignore_eos's ban, right after the biases (llama-server's biases
     * hold it). With no ids, min_tokens bans the vocabulary's
     * end-of-generation ids: the build needs the vocabulary, and a trial
     * build leaves the stage out, as it leaves out DRY's breakers. */
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
    order_item order[64];
    size_t n_order = 0;
    const cfg_node *sn = sift__cfg_find(v, root, "samplers");
    if (sn) {
        ok &= sampler_order(v, sn, order, &n_order);
    } else {
        const sift__sampler_desc *ord[MAX_FLAT_ORDER];
        n_order = flat_order(ord);
        for (size_t i = 0; i < n_order; i++) {
            order[i].desc = ord[i];
            order[i].line = root->line;
            order[i].col = root->col;
        }
    }
    /* The values of llama.cpp's keys, as validated above; each stage's
     * record is filled from its parameters' flat keys. */
    const flat_value known[] = {
        {"top_k", f.top_k},
        {"top_p", f.top_p},
        {"min_p", f.min_p},
        {"typical_p", f.typical_p},
        {"temp", f.temp},
        {"dynatemp_range", f.mirostat ? 0 : f.dyn_range},
        {"dynatemp_exponent", f.dyn_exp},
        {"repeat_penalty", f.repeat},
        {"repeat_last_n", f.repeat_last_n},
        {"frequency_penalty", f.freq},
        {"presence_penalty", f.presence},
        {"dry_multiplier", f.dry_mult},
        {"dry_base", f.dry_base},
        {"dry_allowed_length", f.dry_allowed_length},
        {"dry_penalty_last_n", f.dry_last_n},
        {"xtc_probability", f.xtc_p},
        {"xtc_threshold", f.xtc_t},
        {"top_n_sigma", f.sigma},
        {"mirostat_tau", f.tau},
        {"mirostat_eta", f.eta},
        {"min_keep", f.min_keep},
        {"adaptive_target", ap_target},
        {"adaptive_decay", ap_decay},
    };
    flat_value fv[MAX_REG_FLAT + 32];
    size_t n_fv = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        fv[n_fv++] = known[i];
    /* The flat keys of the other samplers' number, boolean and choice
     * parameters: their descriptors' types and ranges. */
    const sift__param *reg[MAX_REG_FLAT];
    size_t nr = registry_flat_keys(reg);
    for (size_t i = 0; i < nr; i++) {
        const sift__param *pm = reg[i];
        int seen = pm->type == SIFT__PT_STRING_LIST || pm->type == SIFT__PT_ID_FLOAT_MAP;
        for (size_t k = 0; k < n_fv && !seen; k++)
            seen = !strcmp(fv[k].key, pm->flat_key);
        if (seen || n_fv == sizeof fv / sizeof fv[0])
            continue;
        sift__rec tmp;
        memset(&tmp, 0, sizeof tmp);
        sift__param at = *pm;
        at.off = 0;
        double val = pm->flat_def;
        const cfg_node *kn = sift__cfg_find(v, root, pm->flat_key);
        if (kn && !sift__cfg_value_param(v, &at, kn, pm->flat_key, &tmp)) {
            ok = 0;
        } else if (kn) {
            if (pm->type == SIFT__PT_FLOAT)
                val = *(const float *)(const void *)tmp.b;
            else if (pm->type == SIFT__PT_BOOL || pm->type == SIFT__PT_ENUM)
                val = *(const int *)(const void *)tmp.b;
            else
                val = *(const int32_t *)(const void *)tmp.b;
        }
        fv[n_fv++] = (flat_value){pm->flat_key, val};
    }
    if (!ok || v->st != SIFT_OK)
        return;

    /* The chain llama.cpp's common_sampler_init builds, without the
     * samplers its constructors turn into no-ops (docs/config.md). A
     * selector the list names (adaptive_p) is no place in the order: it
     * replaces dist at the end, unless its values make it draw as dist
     * does (a negative adaptive_target). */
    if (f.mirostat == 0) {
        const order_item *sel = NULL;
        for (size_t i = 0; i < n_order && v->st == SIFT_OK; i++) {
            if (order[i].desc->selector)
                sel = sel ? sel : &order[i];
            else
                flat_stage(v, order[i].desc, fv, n_fv, order[i].line, order[i].col);
        }
        if (v->st == SIFT_OK && sel && flat_stage(v, sel->desc, fv, n_fv, sel->line, sel->col))
            return;
        if (sel && v->st == SIFT_OK)
            sift__cfg_warn_lc(v, sel->line, sel->col,
                              "adaptive_p is off: adaptive_target is %s (negative; llama.cpp's "
                              "default is -1), so the chain ends with dist, as in llama.cpp",
                              ap_target_node ? sift__cfg_echo(v, ap_target_node) : "-1");
        else if (ap_target >= 0)
            sift__cfg_warn_at(v, ap_target_node,
                              "adaptive_target is ignored: samplers does not name adaptive_p "
                              "(as in llama.cpp)");
        flat_stage(v, sift__cfg_desc_named("dist"), fv, n_fv, root->line, root->col);
        return;
    }
    if (ap_target >= 0)
        sift__cfg_warn_at(v, ap_target_node, "adaptive_target is ignored when mirostat is on");
    /* mirostat 1 or 2: temperature, then the mirostat selector; the
     * samplers list is ignored, as in llama.cpp. */
    if (sn)
        sift__cfg_warn_at(v, sn, "samplers is ignored when mirostat is on");
    flat_stage(v, sift__cfg_desc_named("temperature"), fv, n_fv, root->line, root->col);
    flat_stage(
        v, f.mirostat == 1 ? sift__cfg_desc_named("mirostat") : sift__cfg_desc_named("mirostat_v2"),
        fv, n_fv, root->line, root->col);
}

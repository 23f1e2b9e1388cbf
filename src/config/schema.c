/*
 * schema.c - validates a configuration tree and turns it into stages.
 *
 * What it owns: the document of docs/config.md: its top-level keys, the
 * scalars that configure the whole chain (seed, n_ctx, vocab_size), the
 * choice between a `chain:` list and llama.cpp's flat parameters, and the
 * order of the walk (sift__cfg_validate). The sections are validated by
 * the other schema files (schema.h lists them with what each owns).
 *
 * It knows no sampler by code: a stage's name, parameters (type, range,
 * default, llama.cpp key), constructor and lint come from its descriptor
 * in the registry (src/samplers/registry.h); parsing a stage is a walk
 * over the descriptor's parameter table. What stays in src/config/ is
 * llama.cpp's flat form itself (schema_flat.c).
 *
 * Invariants (of every schema file):
 * - Every problem is reported, not just the first: a bad value is
 *   reported and validation goes on with the next one. A stage is pushed
 *   only when all of its values are valid, so a config with errors may
 *   hold a partial stage list, which the builder never uses.
 * - Nothing here recurses: the tree's depth is bounded by the loader and
 *   the schema itself is at most four levels deep.
 * - Numbers never go through the C locale (schema_value.c).
 * - The warnings over the whole chain run only when the config has no
 *   error and its trial build succeeded.
 */
#include "schema.h"

static const char *const BASE_KEYS[] = {"seed",    "vocab_size", "vocab", "chain",
                                        "grammar", "n_ctx",      "form"};
#define N_BASE (sizeof BASE_KEYS / sizeof BASE_KEYS[0])
/* The OpenAI form's own base keys: no chain, no grammar section. */
static const char *const OPENAI_BASE_KEYS[] = {"seed", "vocab_size", "vocab", "n_ctx", "form"};
#define N_OPENAI_BASE (sizeof OPENAI_BASE_KEYS / sizeof OPENAI_BASE_KEYS[0])

/* The form of the document: the caller's (sift_config_params.form), or
 * the `form` key's; both, and different, is an error at the key. Never
 * guessed from the other keys. */
static int32_t document_form(cfg_validator *v, const cfg_node *root)
{
    int32_t want = v->cfg->params.form;
    const cfg_node *n = sift__cfg_find(v, root, "form");
    int32_t said = SIFT_CONFIG_FORM_DOCUMENT;
    if (n && sift__cfg_get_str(v, n, "form")) {
        if (sift__cfg_streq(n, "openai"))
            said = SIFT_CONFIG_FORM_OPENAI;
        else if (sift__cfg_streq(n, "llama.cpp"))
            said = SIFT_CONFIG_FORM_LLAMA_CPP;
        else
            sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE,
                             "form must be 'openai' or 'llama.cpp', got '%s'",
                             sift__cfg_echo(v, n));
    }
    if (want != SIFT_CONFIG_FORM_DOCUMENT && said != SIFT_CONFIG_FORM_DOCUMENT && said != want)
        sift__cfg_err_at(
            v, n, SIFT_E_CONFIG_VALUE, "form '%s' differs from the form the caller asks for ('%s')",
            sift__cfg_echo(v, n), want == SIFT_CONFIG_FORM_OPENAI ? "openai" : "llama.cpp");
    return want != SIFT_CONFIG_FORM_DOCUMENT ? want : said;
}

/* The first key of the root mapping that belongs to llama.cpp's flat
 * form, NULL when there is none. */
static const cfg_node *first_flat_key(cfg_validator *v, const cfg_node *root)
{
    for (uint32_t ki = root->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        if (!key->bad && sift__cfg_is_flat_form_key(key))
            return key;
        ki = key->next == CFG_NONE ? CFG_NONE : NODE(v, key->next)->next;
    }
    return NULL;
}

/* n_ctx: an integer in [1, INT32_MAX], kept with its node. */
static void check_n_ctx(cfg_validator *v, const cfg_node *n)
{
    int64_t x;
    if (!sift__cfg_get_int(v, n, "n_ctx", &x))
        return;
    if (x < 1 || x > INT32_MAX)
        sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "n_ctx must be in [1, %d], got %lld",
                         (int)INT32_MAX, (long long)x);
    else {
        v->n_ctx = (int32_t)x;
        v->n_ctx_node = n;
    }
}

/* seed: an integer in [0, 2^64 - 1] (read digit by digit, for it does not
 * fit an int64_t), or in the flat form llama.cpp's random seed. */
static void check_seed(cfg_validator *v, const cfg_node *n)
{
    sift_config *cfg = v->cfg;
    /* llama.cpp's "random seed": -1 (LLAMA_DEFAULT_SEED, 0xFFFFFFFF,
     * as its u32), in the flat form only. */
    if (v->flat && sift__cfg_is_plain(n) &&
        (sift__cfg_streq(n, "-1") || sift__cfg_streq(n, "4294967295"))) {
        cfg->seed_random = 1;
        sift__cfg_warn_at(v, n,
                          "seed %s is llama.cpp's random seed: each chain built from this config "
                          "gets a new seed, so results are not reproducible; give another number "
                          "to reproduce them",
                          sift__cfg_echo(v, n));
    } else if (sift__cfg_is_plain(n) && sift__cfg_int_syntax(n->val, n->len) && n->val[0] == '-' &&
               strspn(n->val + 1, "0") != n->len - 1)
        sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE,
                         "seed must be in [0, 18446744073709551615], got %s (sift has no random "
                         "seed; pick a number)",
                         sift__cfg_echo(v, n));
    else if (sift__cfg_is_plain(n) && sift__cfg_int_syntax(n->val, n->len) &&
             !sift__cfg_number_hint(n)) {
        uint64_t acc = 0;
        int over = 0;
        for (size_t i = n->val[0] == '+' || n->val[0] == '-'; i < n->len; i++) {
            unsigned d = (unsigned)(n->val[i] - '0');
            if (acc > (UINT64_MAX - d) / 10)
                over = 1;
            acc = acc * 10 + d;
        }
        if (over)
            sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE,
                             "seed must be in [0, 18446744073709551615], got %s",
                             sift__cfg_echo(v, n));
        else {
            cfg->has_seed = 1;
            cfg->seed = acc;
        }
    } else {
        int64_t dummy;
        sift__cfg_get_int(v, n, "seed", &dummy);
    }
}

/* vocab_size: an integer in [1, SIFT_DEFAULT_MAX_VOCAB]. */
static void check_vocab_size(cfg_validator *v, const cfg_node *n)
{
    int64_t x;
    if (!sift__cfg_get_int(v, n, "vocab_size", &x))
        return;
    if (x < 1)
        sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "vocab_size must be >= 1, got %lld",
                         (long long)x);
    else if (x > SIFT_DEFAULT_MAX_VOCAB)
        sift__cfg_err_at(v, n, SIFT_E_CONFIG_LIMIT, "vocab_size %lld exceeds max_vocab %d",
                         (long long)x, SIFT_DEFAULT_MAX_VOCAB);
    else
        v->vocab_size = v->cfg->vocab_size = (int32_t)x;
}

/* The sampler chain: the OpenAI form's parameters, a `chain:` list or
 * llama.cpp's flat parameters (the default chain without any), never
 * a list and flat parameters both. */
static void check_chain(cfg_validator *v, const cfg_node *root, const cfg_node *chain,
                        const cfg_node *first_flat, int32_t form)
{
    if (chain && first_flat) {
        const cfg_node *ck = sift__cfg_key_of(v, root, chain);
        sift__cfg_err_at(
            v, first_flat, SIFT_E_CONFIG_KEY,
            "use either 'chain' or llama.cpp flat parameters, not both ('chain' at %d:%d)",
            (int)(ck ? ck->line : chain->line), (int)(ck ? ck->col : chain->col));
    }
    if (form == SIFT_CONFIG_FORM_OPENAI)
        sift__cfg_openai_params(v, root);
    else if (chain)
        sift__cfg_chain_list(v, chain);
    else
        sift__cfg_flat_params(v, root);
}

sift_status sift__cfg_validate(sift_config *cfg, const cfg_tree *tree)
{
    cfg_validator v;
    memset(&v, 0, sizeof v);
    v.cfg = cfg;
    v.t = tree;
    if (tree->root == CFG_NONE) {
        sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_VALUE, -1,
                       "empty configuration (expected a mapping with 'chain' or llama.cpp "
                       "sampler parameters)");
        return SIFT_OK;
    }
    const cfg_node *root = NODE(&v, tree->root);
    if (root->bad)
        return SIFT_OK;
    if (sift__cfg_is_null(root)) {
        sift__cfg_err_at(&v, root, SIFT_E_CONFIG_VALUE,
                         "empty configuration (the document is null; expected a mapping)");
        return v.st;
    }
    if (root->type != CFG_MAP) {
        sift__cfg_type_err(&v, root, "configuration", "mapping");
        return v.st;
    }
    int32_t form = document_form(&v, root);
    const char *top[N_BASE + SIFT__CFG_MAX_FLAT_FORM_KEYS];
    size_t nt = 0;
    if (form == SIFT_CONFIG_FORM_OPENAI) {
        for (size_t i = 0; i < N_OPENAI_BASE; i++)
            top[nt++] = OPENAI_BASE_KEYS[i];
        nt += sift__cfg_openai_keys(top + nt);
    } else {
        for (size_t i = 0; i < N_BASE; i++)
            top[nt++] = BASE_KEYS[i];
        nt += sift__cfg_flat_form_keys(top + nt);
    }
    sift__cfg_check_keys(&v, root, top, nt, form == SIFT_CONFIG_FORM_OPENAI ? "openai form: " : "");
    const cfg_node *n;
    const cfg_node *first_flat = first_flat_key(&v, root);
    const cfg_node *chain =
        form == SIFT_CONFIG_FORM_OPENAI ? NULL : sift__cfg_find(&v, root, "chain");
    /* Without a chain the document is llama.cpp's flat form, keys or
     * not: llama-server builds its default chain from `{}`. */
    v.flat = form != SIFT_CONFIG_FORM_OPENAI && !chain;
    if (form == SIFT_CONFIG_FORM_LLAMA_CPP && chain)
        sift__cfg_err_at(&v, sift__cfg_key_of(&v, root, chain), SIFT_E_CONFIG_KEY,
                         "'chain' does not belong in the llama.cpp form");
    cfg->form = form == SIFT_CONFIG_FORM_OPENAI ? form
                : v.flat                        ? SIFT_CONFIG_FORM_LLAMA_CPP
                                                : SIFT_CONFIG_FORM_DOCUMENT;
    if ((n = sift__cfg_find(&v, root, "n_ctx")))
        check_n_ctx(&v, n);
    if ((n = sift__cfg_find(&v, root, "seed")))
        check_seed(&v, n);
    if ((n = sift__cfg_find(&v, root, "vocab_size")))
        check_vocab_size(&v, n);
    if ((n = sift__cfg_find(&v, root, "vocab")))
        sift__cfg_vocab_key(&v, n);
    check_chain(&v, root, chain, first_flat, form);
    if (form != SIFT_CONFIG_FORM_OPENAI && (n = sift__cfg_find(&v, root, "grammar")) &&
        v.st == SIFT_OK)
        sift__cfg_grammar_section(&v, n);
    if (v.flat && !cfg->has_grammar && cfg->n_errors == 0 && v.st == SIFT_OK &&
        (n = sift__cfg_find(&v, root, "json_schema")) && !sift__cfg_is_null(n))
        sift__cfg_flat_json_schema(&v, n);
    if (v.st == SIFT_OK && cfg->n_errors == 0)
        v.st = sift__cfg_trial_build(cfg);
    if (v.st == SIFT_OK && cfg->n_errors == 0)
        sift__cfg_chain_warnings(&v);
    sift__free(&cfg->al, v.token_off);
    return v.st;
}

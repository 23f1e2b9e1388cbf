/*
 * config.c - the configuration API: load/parse, free, accessors.
 *
 * What it owns: the sift_config object and its lifetime, the order of a
 * load (read through file.c and the one file helper, core/file.c; line
 * table, source.c; tree, tree.c; schema, schema.c and schema_*.c;
 * diagnostics sorted, diag.c) and loading the vocabulary it names
 * (sift_config_load_vocab).
 * The chain builder is build.c. No other file of src/config/ calls this
 * one.
 *
 * Invariants:
 * - Every byte the config owns comes from its allocator.
 * - A config is immutable after sift_config_parse returns; the accessors
 *   and sift_config_build_chain only read it, so threads may share it.
 * - A config with errors never builds a chain (SIFT_E_STATE), so a chain
 *   built from a config always matches what validation accepted.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

void sift_config_params_init(sift_config_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof *params);
    params->struct_size = (uint32_t)sizeof *params;
    params->max_bytes = SIFT_CONFIG_DEFAULT_MAX_BYTES;
    params->max_depth = SIFT_CONFIG_DEFAULT_MAX_DEPTH;
    params->max_nodes = SIFT_CONFIG_DEFAULT_MAX_NODES;
    params->max_anchors = SIFT_CONFIG_DEFAULT_MAX_ANCHORS;
    params->max_stages = SIFT_DEFAULT_MAX_STAGES;
    params->max_diagnostics = SIFT_CONFIG_DEFAULT_MAX_DIAGNOSTICS;
}

/* ------------------------------------------------------------------ */
/* Diagnostics                                                         */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* Load, parse, free                                                   */
/* ------------------------------------------------------------------ */

static sift_status check_params(const sift_config_params *in, sift_config_params *p,
                                sift_error *err)
{
    sift_config_params_init(p);
    if (!in)
        return SIFT_OK;
    if (in->struct_size == 0 || in->struct_size > sizeof *p)
        return sift__fail(err, SIFT_E_ARG, "sift_config_params.struct_size is %u (expected %zu)",
                          (unsigned)in->struct_size, sizeof *p);
    memcpy(p, in, in->struct_size);
    p->struct_size = (uint32_t)sizeof *p;
    sift__alloc al;
    sift_status s = sift__alloc_init(&al, p->allocator, err);
    if (s)
        return s;
    if (p->max_bytes == 0 || p->max_bytes > SIFT_CONFIG_HARD_MAX_BYTES)
        return sift__fail(err, SIFT_E_ARG, "max_bytes must be in [1, %d]",
                          SIFT_CONFIG_HARD_MAX_BYTES);
    if (p->max_depth < 1 || p->max_depth > SIFT_CONFIG_HARD_MAX_DEPTH)
        return sift__fail(err, SIFT_E_ARG, "max_depth must be in [1, %d]",
                          SIFT_CONFIG_HARD_MAX_DEPTH);
    if (p->max_nodes < 1)
        return sift__fail(err, SIFT_E_ARG, "max_nodes must be >= 1");
    if (p->max_anchors < 0)
        return sift__fail(err, SIFT_E_ARG, "max_anchors must be >= 0");
    if (p->max_stages < 1 || p->max_stages > SIFT_HARD_MAX_STAGES)
        return sift__fail(err, SIFT_E_ARG, "max_stages must be in [1, %d]", SIFT_HARD_MAX_STAGES);
    if (p->max_diagnostics < 1)
        return sift__fail(err, SIFT_E_ARG, "max_diagnostics must be >= 1");
    if (p->form < SIFT_CONFIG_FORM_DOCUMENT || p->form > SIFT_CONFIG_FORM_OPENAI)
        return sift__fail(err, SIFT_E_ARG, "form must be a sift_config_form, got %d", (int)p->form);
    return SIFT_OK;
}

static sift_config *cfg_new(const sift_config_params *p, const char *name, const char *base)
{
    sift__alloc al;
    /* check_params has accepted the allocator: this cannot fail. */
    if (sift__alloc_init(&al, p->allocator, NULL))
        return NULL;
    sift_config *cfg = sift__calloc(&al, 1, sizeof *cfg);
    if (!cfg)
        return NULL;
    cfg->al = al;
    cfg->params = *p;
    cfg->params.allocator = NULL;
    cfg->params.base_dir = NULL;
    cfg->name = sift__memdup(&al, name, strlen(name));
    cfg->base_dir = sift__memdup(&al, base, strlen(base));
    if (!cfg->name || !cfg->base_dir) {
        sift_config_free(cfg);
        return NULL;
    }
    return cfg;
}

static void fill_err_from_diag(const sift_config *cfg, const sift_diagnostic *d, sift_error *err)
{
    if (!err)
        return;
    sift__fail(err, d->code, "%s", d->message);
    err->line = d->line;
    err->column = d->column;
    err->offset = d->offset;
    sift__strlcpy_utf8(err->source, cfg->name, sizeof err->source);
}

/* Parses cfg->src into the config; returns the status of the load. */
static sift_status run(sift_config *cfg, sift_error *err)
{
    sift_status st = sift__cfg_source_init(cfg, &cfg->src);
    if (st != SIFT_OK)
        return sift__fail(err, st, "out of memory while loading '%s'", cfg->name);
    cfg_tree tree;
    int usable = 0;
    st = sift__cfg_parse_tree(cfg, &tree, &usable);
    if (st == SIFT_OK && usable)
        st = sift__cfg_validate(cfg, &tree);
    sift__cfg_tree_free(cfg, &tree);
    /* The config is read-only from here on (threads build from it). */
    cfg->src.work = NULL;
    if (st != SIFT_OK)
        return sift__fail(err, st, "out of memory while loading '%s'", cfg->name);
    sift__cfg_diag_sort(cfg);
    for (size_t i = 0; i < cfg->n_diags; i++) {
        const sift_diagnostic *d = &cfg->diags[i].d;
        if (d->severity == SIFT_SEVERITY_ERROR) {
            fill_err_from_diag(cfg, d, err);
            return d->code;
        }
    }
    return SIFT_OK;
}

sift_status sift_config_parse(sift_config **out, const char *name, const char *data, size_t len,
                              const sift_config_params *params, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!data && len > 0)
        return sift__fail(err, SIFT_E_ARG, "data is NULL");
    sift_config_params p;
    sift_status st = check_params(params, &p, err);
    if (st != SIFT_OK)
        return st;
    /* p holds what the caller's struct_size covers (check_params). */
    const char *base = p.base_dir ? p.base_dir : "";
    sift_config *cfg = cfg_new(&p, name ? name : "<config>", base);
    if (!cfg)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while loading a config");
    if (len > p.max_bytes) {
        cfg->src.data = "";
        st = sift__cfg_source_init(cfg, &cfg->src);
        if (st == SIFT_OK)
            st = sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_LIMIT, -1,
                                "config is %zu bytes; max %zu", len, p.max_bytes);
        if (st != SIFT_OK) {
            sift_config_free(cfg);
            return sift__fail(err, st, "out of memory while loading a config");
        }
        fill_err_from_diag(cfg, &cfg->diags[0].d, err);
        *out = cfg;
        return SIFT_E_CONFIG_LIMIT;
    }
    cfg->src_copy = sift__memdup(&cfg->al, data ? data : "", len);
    if (!cfg->src_copy) {
        sift_config_free(cfg);
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while loading a config");
    }
    cfg->src.data = cfg->src_copy;
    cfg->src.len = len;
    st = run(cfg, err);
    if (st == SIFT_E_NOMEM) {
        sift_config_free(cfg);
        return st;
    }
    *out = cfg;
    return st;
}

sift_status sift_config_load(sift_config **out, const char *path, const sift_config_params *params,
                             sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!path)
        return sift__fail(err, SIFT_E_ARG, "path is NULL");
    sift_config_params p;
    sift_status st = check_params(params, &p, err);
    if (st != SIFT_OK)
        return st;
    sift__alloc al;
    if ((st = sift__alloc_init(&al, p.allocator, err)))
        return st;

    /* Relative paths inside the file are relative to its directory. */
    char *base = NULL;
    if (p.base_dir) {
        base = sift__memdup(&al, p.base_dir, strlen(p.base_dir));
    } else {
        const char *slash = strrchr(path, '/');
        base = slash ? sift__memdup(&al, path, (size_t)(slash - path) + (slash == path))
                     : sift__memdup(&al, "", 0);
    }
    if (!base)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while loading '%s'", path);

    char msg[1024];
    char *data = NULL;
    size_t len = 0;
    st = sift__cfg_read_capped(&al, path, p.max_bytes, &data, &len, msg, sizeof msg);
    if (st == SIFT_E_IO || st == SIFT_E_NOMEM) {
        sift__free(&al, base);
        st = sift__fail(err, st, "%s", msg);
        if (err)
            sift__strlcpy_utf8(err->source, path, sizeof err->source);
        return st;
    }
    sift_config_params p2 = p;
    p2.base_dir = base;
    if (st == SIFT_E_CONFIG_LIMIT) {
        /* Let parse report the size with the file's name attached. */
        sift__free(&al, base);
        sift_config *cfg = cfg_new(&p, path, "");
        if (!cfg)
            return sift__fail(err, SIFT_E_NOMEM, "out of memory while loading '%s'", path);
        cfg->src.data = "";
        if (sift__cfg_source_init(cfg, &cfg->src) != SIFT_OK ||
            sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_LIMIT, -1,
                           "config is larger than %zu bytes", p.max_bytes) != SIFT_OK) {
            sift_config_free(cfg);
            return sift__fail(err, SIFT_E_NOMEM, "out of memory while loading '%s'", path);
        }
        fill_err_from_diag(cfg, &cfg->diags[0].d, err);
        *out = cfg;
        return SIFT_E_CONFIG_LIMIT;
    }
    st = sift_config_parse(out, path, data, len, &p2, err);
    sift__free(&al, data);
    sift__free(&al, base);
    return st;
}

void sift_config_free(sift_config *cfg)
{
    if (!cfg)
        return;
    sift__alloc al = cfg->al;
    for (size_t i = 0; i < cfg->n_diags; i++) {
        sift__free(&al, (void *)cfg->diags[i].d.message);
        sift__free(&al, (void *)cfg->diags[i].d.text);
    }
    sift__free(&al, cfg->diags);
    for (size_t i = 0; i < cfg->n_stages; i++) {
        sift__cfg_stage_free(&al, &cfg->stages[i]);
    }
    sift__free(&al, cfg->stages);
    sift__free(&al, cfg->g_text);
    sift__free(&al, cfg->g_root);
    sift__free(&al, cfg->g_file);
    for (size_t i = 0; i < cfg->grammar.n_words; i++)
        sift__free(&al, cfg->g_words[i]);
    sift__free(&al, cfg->g_words);
    sift__free(&al, cfg->g_word_lengths);
    for (size_t i = 0; i < cfg->grammar.n_patterns; i++)
        sift__free(&al, cfg->g_patterns[i]);
    sift__free(&al, cfg->g_patterns);
    for (size_t i = 0; i < cfg->grammar.n_full_patterns; i++)
        sift__free(&al, cfg->g_full_patterns[i]);
    sift__free(&al, cfg->g_full_patterns);
    sift__free(&al, cfg->g_tokens);
    sift__free(&al, cfg->vocab_path);
    for (size_t i = 0; i < cfg->n_v_special; i++)
        sift__free(&al, cfg->v_special_texts[i]);
    sift__free(&al, cfg->v_special_texts);
    sift__free(&al, cfg->v_special_ids);
    sift__free(&al, cfg->v_eog);
    sift__free(&al, cfg->src.lines);
    sift__free(&al, cfg->src.cp_chk);
    sift__free(&al, cfg->src_copy);
    sift__free(&al, cfg->name);
    sift__free(&al, cfg->base_dir);
    sift__free(&al, cfg);
}

/* ------------------------------------------------------------------ */
/* Accessors                                                           */
/* ------------------------------------------------------------------ */

size_t sift_config_n_diagnostics(const sift_config *cfg)
{
    return cfg ? cfg->n_diags : 0;
}

size_t sift_config_n_errors(const sift_config *cfg)
{
    return cfg ? cfg->n_errors : 0;
}

const sift_diagnostic *sift_config_diagnostic(const sift_config *cfg, size_t i)
{
    if (!cfg || i >= cfg->n_diags)
        return NULL;
    return &cfg->diags[i].d;
}

int sift_config_seed(const sift_config *cfg, uint64_t *seed)
{
    if (!cfg || !cfg->has_seed)
        return 0;
    if (seed)
        *seed = cfg->seed;
    return 1;
}

int32_t sift_config_vocab_size(const sift_config *cfg)
{
    return cfg ? cfg->vocab_size : 0;
}

const char *sift_config_vocab_path(const sift_config *cfg)
{
    return cfg ? cfg->vocab_path : NULL;
}

sift_status sift_config_load_vocab(const sift_config *cfg, const sift_allocator *allocator,
                                   sift_vocab **out, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!cfg)
        return sift__fail(err, SIFT_E_ARG, "cfg is NULL");
    if (cfg->n_errors)
        return sift__fail(err, SIFT_E_STATE, "%s has %zu error(s); it cannot load a vocabulary",
                          cfg->name, cfg->n_errors);
    if (!cfg->vocab_path)
        return SIFT_OK;
    const char *p = cfg->vocab_path;
    size_t n = strlen(p);
    sift_vocab *base = NULL;
    sift_status st = n > 5 && !strcmp(p + n - 5, ".gguf")
                         ? sift_vocab_load_gguf(&base, p, allocator, err)
                         : sift_vocab_load_tiktoken(&base, p, allocator, err);
    if (st != SIFT_OK)
        return st;
    int32_t nv = sift_vocab_size(base);
    if (cfg->n_v_special == 0 && cfg->n_v_eog == 0 &&
        (cfg->vocab_size == 0 || cfg->vocab_size == nv)) {
        *out = base;
        return SIFT_OK;
    }
    if (cfg->vocab_size > 0 && cfg->vocab_size < nv) {
        sift_vocab_free(base);
        return sift__cfg_fail(err, SIFT_E_ARG, cfg, 0, 0,
                              "vocab_size %d is smaller than the %d tokens of %s",
                              (int)cfg->vocab_size, (int)nv, p);
    }
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = (const char *const *)cfg->v_special_texts;
    x.special_ids = cfg->v_special_ids;
    x.n_special = cfg->n_v_special;
    x.eog_ids = cfg->v_eog;
    x.n_eog = cfg->n_v_eog;
    x.n_vocab = cfg->vocab_size;
    sift_error e;
    st = sift_vocab_extend(out, base, &x, allocator, &e);
    sift_vocab_free(base);
    if (st != SIFT_OK) {
        sift__cfg_fail(err, st, cfg, 0, 0, "vocab: %s", e.message);
        if (err)
            err->index = e.index;
    }
    return st;
}

const sift_config_grammar *sift_config_grammar_info(const sift_config *cfg)
{
    if (!cfg || cfg->n_errors || !cfg->has_grammar)
        return NULL;
    return &cfg->grammar;
}

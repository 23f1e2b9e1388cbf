/*
 * config.c - the configuration API: load/parse, diagnostics, accessors,
 * and the chain builder.
 *
 * What it owns: the sift_config object and its lifetime, reading files
 * (the config itself, grammar and vocabulary files it names) with a size
 * cap through the one file helper (core/file.c: regular files only, never
 * blocking), loading the vocabulary it names (sift_config_load_vocab),
 * the diagnostic list (formatted GCC style and sorted by position),
 * and turning the validated stage list into sift_chain_add_* calls.
 *
 * Invariants:
 * - Every byte the config owns comes from its allocator.
 * - A config is immutable after sift_config_parse returns; the accessors
 *   and sift_config_build_chain only read it, so threads may share it.
 * - A config with errors never builds a chain (SIFT_E_STATE), so a chain
 *   built from a config always matches what validation accepted.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

/* Whether a diagnostic of this severity would still be kept: errors until
 * max_diagnostics of them (then collection stops), warnings until
 * max_diagnostics of them. Callers ask before they compute a position or
 * a did-you-mean, so the work per dropped problem is constant. */
int sift__cfg_keeps(const sift_config *cfg, sift_severity sev)
{
    if (cfg->stopped)
        return 0;
    return sev == SIFT_SEVERITY_ERROR || cfg->n_warnings < (size_t)cfg->params.max_diagnostics;
}

uint64_t sift__cfg_work(const sift_config *cfg)
{
    return cfg ? cfg->work : 0;
}

static sift_status vdiag(sift_config *cfg, sift_severity sev, sift_status code, int32_t line,
                         int32_t col, int64_t off, const char *fmt, va_list ap)
{
    if (!sift__cfg_keeps(cfg, sev))
        return SIFT_OK;
    if (cfg->n_diags == cfg->cap_diags) {
        size_t cap = cfg->cap_diags ? cfg->cap_diags * 2 : 16;
        cfg_diag *nd = sift__malloc(&cfg->al, cap, sizeof *nd);
        if (!nd)
            return SIFT_E_NOMEM;
        if (cfg->n_diags)
            memcpy(nd, cfg->diags, cfg->n_diags * sizeof *nd);
        sift__free(&cfg->al, cfg->diags);
        cfg->diags = nd;
        cfg->cap_diags = cap;
    }
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const char *sevs = sev == SIFT_SEVERITY_ERROR ? "error" : "warning";
    size_t tcap = strlen(cfg->name) + strlen(msg) + 64;
    char *text = sift__malloc(&cfg->al, tcap, 1);
    char *m = sift__memdup(&cfg->al, msg, strlen(msg));
    if (!text || !m) {
        sift__free(&cfg->al, text);
        sift__free(&cfg->al, m);
        return SIFT_E_NOMEM;
    }
    if (line > 0)
        snprintf(text, tcap, "%s:%d:%d: %s: %s", cfg->name, (int)line, (int)col, sevs, msg);
    else
        snprintf(text, tcap, "%s: %s: %s", cfg->name, sevs, msg);
    cfg_diag *d = &cfg->diags[cfg->n_diags];
    d->d.severity = sev;
    d->d.code = sev == SIFT_SEVERITY_ERROR ? code : SIFT_OK;
    d->d.line = line;
    d->d.column = col;
    d->d.offset = off;
    d->d.message = m;
    d->d.text = text;
    d->seq = cfg->n_diags++;
    if (sev == SIFT_SEVERITY_WARNING)
        cfg->n_warnings++;
    if (sev == SIFT_SEVERITY_ERROR && ++cfg->n_errors >= (size_t)cfg->params.max_diagnostics)
        cfg->stopped = 1;
    return SIFT_OK;
}

sift_status sift__cfg_diag(sift_config *cfg, sift_severity sev, sift_status code, int64_t off,
                           const char *fmt, ...)
{
    int32_t line = 0, col = 0;
    if (!sift__cfg_keeps(cfg, sev))
        return SIFT_OK;
    if (off >= 0)
        sift__cfg_linecol(&cfg->src, (size_t)off, &line, &col);
    va_list ap;
    va_start(ap, fmt);
    sift_status st = vdiag(cfg, sev, code, line, col, off, fmt, ap);
    va_end(ap);
    return st;
}

sift_status sift__cfg_diag_lc(sift_config *cfg, sift_severity sev, sift_status code, int32_t line,
                              int32_t col, int64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sift_status st = vdiag(cfg, sev, code, line, col, off, fmt, ap);
    va_end(ap);
    return st;
}

static int diag_cmp(const void *a, const void *b)
{
    const cfg_diag *x = a, *y = b;
    if (x->d.line != y->d.line)
        return x->d.line < y->d.line ? -1 : 1;
    if (x->d.column != y->d.column)
        return x->d.column < y->d.column ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Position order; diagnostics without a position first; discovery order
 * among equal positions (seq is unique, so qsort's order is total and the
 * result stable; O(n log n) however many warnings there are). */
static void sort_diags(sift_config *cfg)
{
    if (cfg->n_diags > 1)
        qsort(cfg->diags, cfg->n_diags, sizeof *cfg->diags, diag_cmp);
}

sift_status sift__cfg_push_stage(sift_config *cfg, const cfg_stage *st)
{
    if (cfg->n_stages == cfg->cap_stages) {
        size_t cap = cfg->cap_stages ? cfg->cap_stages * 2 : 8;
        cfg_stage *ns = sift__malloc(&cfg->al, cap, sizeof *ns);
        if (!ns)
            return SIFT_E_NOMEM;
        if (cfg->n_stages)
            memcpy(ns, cfg->stages, cfg->n_stages * sizeof *ns);
        sift__free(&cfg->al, cfg->stages);
        cfg->stages = ns;
        cfg->cap_stages = cap;
    }
    cfg->stages[cfg->n_stages++] = *st;
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

/* Joins base_dir and path unless path is absolute or base_dir empty. */
static char *resolve(const sift__alloc *al, const char *base, const char *path)
{
    if (path[0] == '/' || !base || !base[0])
        return sift__memdup(al, path, strlen(path));
    size_t nb = strlen(base), np = strlen(path);
    char *r = sift__malloc(al, nb + np + 2, 1);
    if (!r)
        return NULL;
    memcpy(r, base, nb);
    r[nb] = '/';
    memcpy(r + nb + 1, path, np + 1);
    return r;
}

/* Reads a regular file of at most cap bytes through the one file helper
 * (core/file.c: no blocking, regular files only). The message names the
 * path first; a file over cap is SIFT_E_CONFIG_LIMIT. */
static sift_status read_capped(const sift__alloc *al, const char *path, size_t cap, char **data,
                               size_t *len, char *msg, size_t msg_cap)
{
    sift_error e;
    sift_status st = sift__file_read(al, path, cap, data, len, &e);
    if (st == SIFT_OK)
        return SIFT_OK;
    snprintf(msg, msg_cap, "%s", e.message);
    return st == SIFT_E_LIMIT ? SIFT_E_CONFIG_LIMIT : st;
}

sift_status sift__cfg_read_file(const sift_config *cfg, const char *path, char **resolved,
                                char **data, size_t *len, char *msg, size_t msg_cap)
{
    *resolved = resolve(&cfg->al, cfg->base_dir, path);
    if (!*resolved) {
        snprintf(msg, msg_cap, "out of memory");
        return SIFT_E_NOMEM;
    }
    return read_capped(&cfg->al, *resolved, cfg->params.max_bytes, data, len, msg, msg_cap);
}

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
    sort_diags(cfg);
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
    const char *base =
        params && params->base_dir && params->struct_size >= sizeof p ? params->base_dir : "";
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
    if (params && params->base_dir) {
        base = sift__memdup(&al, params->base_dir, strlen(params->base_dir));
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
    st = read_capped(&al, path, p.max_bytes, &data, &len, msg, sizeof msg);
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
        cfg_stage *s = &cfg->stages[i];
        sift__free(&al, s->biases);
        for (size_t k = 0; k < s->n_breakers; k++)
            sift__free(&al, s->breakers[k]);
        sift__free(&al, s->breakers);
        sift__free(&al, s->breaker_lengths);
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

/* A build-time error at a place of the config: "NAME:LINE:COL: MESSAGE"
 * (or "NAME: MESSAGE" for line 0) with err->source, line and column set,
 * like every other message that names a file. */
SIFT__PRINTF(6, 7)
static sift_status cfg_fail(sift_error *err, sift_status code, const sift_config *cfg, int32_t line,
                            int32_t col, const char *fmt, ...)
{
    if (!err)
        return code;
    char msg[SIFT_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        sift__fail(err, code, "%s:%d:%d: %s", cfg->name, (int)line, (int)col, msg);
    else
        sift__fail(err, code, "%s: %s", cfg->name, msg);
    err->line = line;
    err->column = line > 0 ? col : 0;
    sift__strlcpy_utf8(err->source, cfg->name, sizeof err->source);
    return code;
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
        return cfg_fail(err, SIFT_E_ARG, cfg, 0, 0,
                        "vocab_size %d is smaller than the %d tokens of %s", (int)cfg->vocab_size,
                        (int)nv, p);
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
        cfg_fail(err, st, cfg, 0, 0, "vocab: %s", e.message);
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

/* ------------------------------------------------------------------ */
/* The chain builder                                                   */
/* ------------------------------------------------------------------ */

static sift_status add_stage(sift_chain *c, const sift_config *cfg, const cfg_stage *s,
                             const sift_vocab *vocab, int32_t n_vocab, sift_error *err)
{
    switch (s->kind) {
    case K_PENALTIES: return sift_chain_add_penalties(c, s->i0, s->f[0], s->f[1], s->f[2], err);
    case K_DRY: {
        sift_dry_params dp;
        sift_dry_params_init(&dp);
        dp.multiplier = s->f[0];
        dp.base = s->f[1];
        dp.allowed_length = s->i0;
        dp.last_n = s->i1;
        dp.breakers = (const char *const *)s->breakers;
        dp.breaker_lengths = s->breaker_lengths;
        dp.n_breakers = s->n_breakers;
        if (s->n_breakers > 0 && !vocab)
            return cfg_fail(err, SIFT_E_ARG, cfg, s->line, s->col,
                            "dry has sequence breakers and no vocabulary was given");
        return sift_chain_add_dry(c, &dp, vocab, err);
    }
    case K_LOGIT_BIAS: return sift_chain_add_logit_bias(c, s->biases, s->n_biases, err);
    case K_TOP_K:
        return s->flag ? sift_chain_add_top_k_ties(c, s->i0, err)
                       : sift_chain_add_top_k(c, s->i0, err);
    case K_TOP_P: return sift_chain_add_top_p(c, s->f[0], s->i0, err);
    case K_MIN_P: return sift_chain_add_min_p(c, s->f[0], s->i0, err);
    case K_TYPICAL: return sift_chain_add_typical(c, s->f[0], s->i0, err);
    case K_TOP_N_SIGMA: return sift_chain_add_top_n_sigma(c, s->f[0], err);
    case K_XTC: return sift_chain_add_xtc(c, s->f[0], s->f[1], s->i0, err);
    case K_TEMP: return sift_chain_add_temp(c, s->f[0], err);
    case K_TEMP_EXT: return sift_chain_add_temp_ext(c, s->f[0], s->f[1], s->f[2], err);
    case K_DIST:
        return s->flag ? sift_chain_add_dist_id_order(c, err) : sift_chain_add_dist(c, err);
    case K_GREEDY: return sift_chain_add_greedy(c, err);
    case K_MIROSTAT: {
        int32_t nv = n_vocab ? n_vocab : (vocab ? sift_vocab_size(vocab) : 0);
        if (nv < 1)
            return cfg_fail(err, SIFT_E_ARG, cfg, s->line, s->col,
                            "mirostat needs the vocabulary size (vocab_size)");
        return sift_chain_add_mirostat(c, nv, s->f[0], s->f[1], s->i0, err);
    }
    case K_MIROSTAT_V2: return sift_chain_add_mirostat_v2(c, s->f[0], s->f[1], err);
    case K__COUNT: break;
    }
    return sift__fail(err, SIFT_E_ARG, "unknown stage kind");
}

/*
 * The build's judgements at load time: every stage is added to a chain
 * that is then thrown away, so whatever a sift_chain_add_* refuses (a
 * logit_bias sum that overflows, penalties that overflow, ...) is a
 * diagnostic at the stage's place, and `sift check` refuses what the
 * builder would. Only the vocabulary is missing here: DRY's breakers are
 * matched against it at build time (their bytes are validated by the
 * schema), and mirostat v1 takes vocab_size, or 1 without it (its range
 * checks do not depend on the size).
 */
sift_status sift__cfg_trial_build(sift_config *cfg)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.allocator = &cfg->al.a;
    p.n_vocab = cfg->vocab_size;
    p.max_stages = SIFT_HARD_MAX_STAGES;
    sift_chain *c = NULL;
    sift_error err;
    sift_status st = sift_chain_new(&c, &p, &err);
    if (st != SIFT_OK)
        return st == SIFT_E_NOMEM ? st : SIFT_OK;
    for (size_t i = 0; i < cfg->n_stages && st != SIFT_E_NOMEM; i++) {
        cfg_stage s = cfg->stages[i];
        if (s.kind == K_DRY)
            s.n_breakers = 0;
        st = add_stage(c, cfg, &s, NULL, cfg->vocab_size > 0 ? cfg->vocab_size : 1, &err);
        if (st == SIFT_OK || st == SIFT_E_NOMEM)
            continue;
        sift_status code = st == SIFT_E_LIMIT ? SIFT_E_CONFIG_LIMIT : SIFT_E_CONFIG_VALUE;
        if (sift__cfg_diag_lc(cfg, SIFT_SEVERITY_ERROR, code, s.line, s.col, -1, "stage %zu: %s",
                              i + 1, err.message) != SIFT_OK)
            st = SIFT_E_NOMEM;
    }
    sift_chain_free(c);
    return st == SIFT_E_NOMEM ? st : SIFT_OK;
}

void sift__cfg_map_grammar(void *user, size_t off, int32_t *line, int32_t *col)
{
    const sift_config *cfg = user;
    int64_t o = sift__cfg_scalar_offset(cfg, &cfg->g_node, off);
    sift__cfg_linecol(&cfg->src, (size_t)(o < 0 ? 0 : o), line, col);
}

/* The grammar: compiled with the caller's vocabulary, made lazy with the
 * config's triggers if it has a lazy section, then the chain's check-mode
 * grammar, or (constrain) a stage ahead of every other stage. */
static sift_status attach_grammar(sift_chain *c, const sift_config *cfg, const sift_vocab *vocab,
                                  sift_error *err)
{
    if (!vocab) {
        /* A file grammar's line and column are in the grammar file; the
         * message names the config, so it gives no position then. */
        int inl = !cfg->grammar.file;
        return cfg_fail(err, SIFT_E_ARG, cfg, inl ? cfg->grammar.line : 0,
                        inl ? cfg->grammar.column : 0,
                        "the grammar needs a vocabulary (name one with 'vocab', or pass one to "
                        "sift_config_build_chain)");
    }
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.root = cfg->grammar.root;
    gp.source_name = cfg->grammar.file ? cfg->grammar.file : cfg->name;
    gp.allocator = &cfg->al.a;
    gp.max_bytes = cfg->params.max_bytes;
    if (!cfg->grammar.file) {
        /* an inline grammar's errors in the config file's coordinates */
        gp.map_position = sift__cfg_map_grammar;
        gp.map_user = (void *)(uintptr_t)cfg;
    }
    sift_grammar *g = NULL;
    sift_status st = sift_grammar_new(&g, cfg->grammar.text, cfg->grammar.length, vocab, &gp, err);
    if (st != SIFT_OK)
        return st;
    if (cfg->grammar.lazy) {
        const sift_config_grammar *cg = &cfg->grammar;
        sift_lazy_params lp;
        sift_lazy_params_init(&lp);
        lp.words = cg->words;
        lp.word_lens = cg->word_lengths;
        lp.n_words = cg->n_words;
        lp.patterns = cg->patterns;
        lp.n_patterns = cg->n_patterns;
        lp.full_patterns = cg->full_patterns;
        lp.n_full_patterns = cg->n_full_patterns;
        lp.tokens = cg->tokens;
        lp.n_tokens = cg->n_tokens;
        if ((st = sift_grammar_set_lazy(g, &lp, err)) != SIFT_OK) {
            sift_grammar_free(g);
            return st;
        }
    }
    st = cfg->grammar.mode == SIFT_GRAMMAR_CONSTRAIN ? sift_chain_add_grammar(c, g, err)
                                                     : sift_chain_set_check_grammar(c, g, err);
    if (st != SIFT_OK)
        sift_grammar_free(g);
    return st;
}

/* llama.cpp's random seed (-1): a new value for each chain, from the
 * clocks and the address of the caller's parameters, mixed by splitmix64.
 * Not for cryptography; only so that two chains differ. */
static uint64_t fresh_seed(const void *salt)
{
    struct timespec a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    (void)clock_gettime(CLOCK_REALTIME, &a);
    (void)clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t x = (uint64_t)a.tv_sec * 1000000007u ^ (uint64_t)a.tv_nsec ^
                 ((uint64_t)b.tv_nsec << 32) ^ (uint64_t)(uintptr_t)salt;
    x += 0x9E3779B97F4A7C15u;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
    return x ^ (x >> 31);
}

sift_status sift_config_build_chain(const sift_config *cfg, const sift_chain_params *params,
                                    const sift_vocab *vocab, sift_chain **out, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!cfg)
        return sift__fail(err, SIFT_E_ARG, "cfg is NULL");
    if (cfg->n_errors)
        return sift__fail(err, SIFT_E_STATE, "%s has %zu error(s); it cannot build a chain",
                          cfg->name, cfg->n_errors);
    sift_chain_params p;
    sift_chain_params_init(&p);
    if (params) {
        if (params->struct_size == 0 || params->struct_size > sizeof p)
            return sift__fail(err, SIFT_E_ARG, "sift_chain_params.struct_size is %u",
                              (unsigned)params->struct_size);
        memcpy(&p, params, params->struct_size);
        p.struct_size = (uint32_t)sizeof p;
    }
    if (cfg->has_seed)
        p.seed = cfg->seed;
    else if (cfg->seed_random)
        p.seed = fresh_seed(&p);
    if (p.n_vocab == 0 && cfg->vocab_size > 0)
        p.n_vocab = cfg->vocab_size;
    sift_chain *c = NULL;
    sift_status st = sift_chain_new(&c, &p, err);
    if (st != SIFT_OK)
        return st;
    if (cfg->has_grammar) {
        st = attach_grammar(c, cfg, vocab, err);
        if (st != SIFT_OK) {
            sift_chain_free(c);
            return st;
        }
    }
    for (size_t i = 0; i < cfg->n_stages; i++) {
        st = add_stage(c, cfg, &cfg->stages[i], vocab, p.n_vocab, err);
        if (st != SIFT_OK) {
            sift_chain_free(c);
            return st;
        }
    }
    *out = c;
    return SIFT_OK;
}

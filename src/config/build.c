/*
 * build.c - a validated configuration to a chain.
 *
 * What it owns: sift_config_build_chain (each stage added through its
 * sampler descriptor's constructor, the grammar attached with its lazy
 * triggers), the trial build that lets the load judge what the build
 * would refuse, and the map from a byte of the inline grammar to the
 * YAML file. It calls the diagnostic sink and the line table only.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config_internal.h"

/* A stage's place, for its constructor's messages (sift__build_env.fail). */
typedef struct stage_at {
    const sift_config *cfg;
    const cfg_stage *s;
} stage_at;

SIFT__PRINTF(4, 5)
static sift_status stage_fail(const sift__build_env *env, sift_error *err, sift_status code,
                              const char *fmt, ...)
{
    const stage_at *at = env->user;
    char msg[SIFT_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sift__cfg_fail(err, code, at->cfg, at->s->line, at->s->col, "%s", msg);
}

static sift_status add_stage(sift_chain *c, const sift_config *cfg, const cfg_stage *s,
                             const sift_vocab *vocab, int32_t n_vocab, int trial, sift_error *err)
{
    stage_at at = {cfg, s};
    sift__build_env env = {
        .vocab = vocab, .n_vocab = n_vocab, .trial = trial, .fail = stage_fail, .user = &at};
    return s->desc->build(c, &s->rec, &env, err);
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
static sift_status trial_new(const sift_config *cfg, sift_chain **c, sift_error *err)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.allocator = &cfg->al.a;
    p.n_vocab = cfg->vocab_size;
    p.max_stages = SIFT_HARD_MAX_STAGES;
    return sift_chain_new(c, &p, err);
}

static sift_status trial_add(sift_chain *c, const sift_config *cfg, const cfg_stage *s,
                             sift_error *err)
{
    return add_stage(c, cfg, s, NULL, cfg->vocab_size > 0 ? cfg->vocab_size : 1, 1, err);
}

sift_status sift__cfg_trial_build(sift_config *cfg)
{
    sift_chain *c = NULL;
    sift_error err;
    sift_status st = trial_new(cfg, &c, &err);
    if (st != SIFT_OK)
        return st == SIFT_E_NOMEM ? st : SIFT_OK;
    for (size_t i = 0; i < cfg->n_stages && st != SIFT_E_NOMEM; i++) {
        const cfg_stage *s = &cfg->stages[i];
        st = trial_add(c, cfg, s, &err);
        if (st == SIFT_OK || st == SIFT_E_NOMEM)
            continue;
        sift_status code = st == SIFT_E_LIMIT ? SIFT_E_CONFIG_LIMIT : SIFT_E_CONFIG_VALUE;
        if (sift__cfg_diag_lc(cfg, SIFT_SEVERITY_ERROR, code, s->line, s->col, -1, "stage %zu: %s",
                              i + 1, err.message) != SIFT_OK)
            st = SIFT_E_NOMEM;
    }
    sift_chain_free(c);
    return st == SIFT_E_NOMEM ? st : SIFT_OK;
}

sift_status sift__cfg_trial_chain(const sift_config *cfg, const size_t *order, size_t n,
                                  sift_chain **out, size_t *at)
{
    *out = NULL;
    sift_chain *c = NULL;
    sift_error err;
    sift_status st = trial_new(cfg, &c, &err);
    for (size_t i = 0; i < n && st == SIFT_OK; i++) {
        size_t si = order ? order[i] : i;
        size_t before = sift_chain_n_stages(c);
        st = trial_add(c, cfg, &cfg->stages[si], &err);
        for (size_t j = before; st == SIFT_OK && j < sift_chain_n_stages(c); j++)
            at[j] = si;
    }
    if (st != SIFT_OK) {
        sift_chain_free(c);
        return st;
    }
    *out = c;
    return SIFT_OK;
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
        return sift__cfg_fail(
            err, SIFT_E_ARG, cfg, inl ? cfg->grammar.line : 0, inl ? cfg->grammar.column : 0,
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
        st = add_stage(c, cfg, &cfg->stages[i], vocab, p.n_vocab, 0, err);
        if (st != SIFT_OK) {
            sift_chain_free(c);
            return st;
        }
    }
    *out = c;
    return SIFT_OK;
}

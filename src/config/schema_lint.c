/*
 * schema_lint.c - the warnings over a whole valid chain.
 *
 * What it owns: the warnings that need the whole chain rather than one
 * value: a stage that reads the whole row ahead of the first top_k cut
 * (min_p, which commutes with it, gets its own advice), a stage before
 * greedy that cannot change the result, a stage listed twice, and a
 * logit_bias ban of a lazy grammar's trigger token (T-08). They run only
 * once the config is valid and its trial build succeeded; the capability
 * class of a stage comes from its descriptor.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "schema.h"

/* The stage's class as its descriptor reports it; IDENTITY when it has no
 * class function (such a stage is neither a cut nor a whole-row reader
 * for these warnings). */
static sift_class stage_cls(const cfg_stage *s, int64_t *k)
{
    *k = 0;
    return s->desc->cls ? s->desc->cls(&s->rec, k) : SIFT_CLASS_IDENTITY;
}

/* A stage that needs the whole distribution (or a threshold) and so
 * forces the whole row when it runs before the first top-k. */
static int reads_whole(const cfg_stage *s)
{
    int64_t k;
    sift_class c = stage_cls(s, &k);
    return c == SIFT_CLASS_WHOLE || c == SIFT_CLASS_THRESHOLD;
}

static int is_top(const cfg_stage *s, int64_t *k)
{
    return stage_cls(s, k) == SIFT_CLASS_TOP;
}

typedef struct tok_ref {
    int32_t token;
    size_t idx;
} tok_ref;

static int tok_ref_cmp(const void *a, const void *b)
{
    const tok_ref *x = a, *y = b;
    if (x->token != y->token)
        return x->token < y->token ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* T-08 for one map of biases: each ban is looked up among the trigger
 * tokens (sorted), so the work is linear in the biases. */
static void ban_warnings(cfg_validator *v, const sift_bias *biases, size_t n_biases,
                         const tok_ref *refs, size_t nt, size_t stage)
{
    for (size_t b = 0; b < n_biases; b++) {
        if (biases[b].bias != -INFINITY)
            continue;
        size_t lo = 0, hi = nt;
        v->cfg->work += 1 + 64 - (uint64_t)__builtin_clzll((unsigned long long)nt | 1);
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (refs[mid].token < biases[b].token)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < nt && refs[lo].token == biases[b].token; lo++)
            sift__cfg_warn_off(v, v->token_off ? v->token_off[refs[lo].idx] : -1,
                               "trigger token %d is banned by logit_bias (stage %zu); the "
                               "lazy grammar can never trigger",
                               (int)refs[lo].token, stage + 1);
    }
}

void sift__cfg_chain_warnings(cfg_validator *v)
{
    sift_config *cfg = v->cfg;
    size_t n = cfg->n_stages, top = SIZE_MAX;
    int64_t top_k = 0;
    for (size_t i = 0; i < n && top == SIZE_MAX; i++)
        if (is_top(&cfg->stages[i], &top_k))
            top = i;
    /* a cut that is not temperature 0: a top-k of top_k tokens */
    if (top != SIZE_MAX && cfg->stages[top].desc == sift__cfg_desc_named("top_k")) {
        for (size_t i = 0; i < top; i++) {
            const cfg_stage *s = &cfg->stages[i];
            if (!reads_whole(s))
                continue;
            const char *nm = s->desc->name;
            int64_t k;
            /* min_p keeps a superset of any top-k it does not cut below */
            if (s->desc == sift__cfg_desc_named("min_p") &&
                *(const int32_t *)(const void *)((const unsigned char *)s->rec.b +
                                                 sift__param_find(s->desc, "min_keep")->off) <=
                    top_k)
                sift__cfg_warn_lc(
                    v, s->line, s->col,
                    "min_p before top_k makes every step read the whole row; put top_k "
                    "first (the two commute: same tokens, and a runtime copies only the "
                    "top %d logits)",
                    (int)top_k);
            else
                sift__cfg_warn_lc(
                    v, s->line, s->col,
                    "%s before top_k makes every step read the whole row; with top_k first "
                    "a runtime copies only the top %d logits (%s then sees only those)",
                    nm, (int)top_k, nm);
            (void)k;
        }
    }
    if (n > 0 && cfg->stages[n - 1].desc == sift__cfg_desc_named("greedy")) {
        for (size_t i = 0; i + 1 < n; i++)
            if (cfg->stages[i].desc->keeps_argmax)
                sift__cfg_warn_lc(
                    v, cfg->stages[i].line, cfg->stages[i].col,
                    "%s before greedy cannot change the result (greedy takes the most "
                    "likely token)",
                    cfg->stages[i].desc->name);
    }
    for (size_t i = 0; i < n; i++) {
        const cfg_stage *s = &cfg->stages[i];
        if (s->desc->selector)
            continue;
        size_t first = SIZE_MAX;
        for (size_t j = 0; j < i && first == SIZE_MAX; j++)
            if (cfg->stages[j].desc == s->desc)
                first = j;
        if (first != SIZE_MAX)
            sift__cfg_warn_lc(v, s->line, s->col,
                              "%s is listed twice (also stage %zu); both are applied in turn",
                              s->desc->name, first + 1);
    }
    /* T-08: a trigger token that a logit_bias bans can never appear. Each
     * ban is looked up among the trigger tokens (sorted copy), so the work
     * is linear in the biases, not their product with the triggers. */
    size_t nt = cfg->has_grammar ? cfg->grammar.n_tokens : 0;
    if (nt == 0)
        return;
    tok_ref *refs = sift__malloc(&cfg->al, nt, sizeof *refs);
    if (!refs) {
        v->st = SIFT_E_NOMEM;
        return;
    }
    for (size_t t = 0; t < nt; t++) {
        refs[t].token = cfg->g_tokens[t];
        refs[t].idx = t;
    }
    qsort(refs, nt, sizeof *refs, tok_ref_cmp);
    for (size_t i = 0; i < n; i++) {
        const cfg_stage *s = &cfg->stages[i];
        for (size_t pi = 0; pi < s->desc->n_params; pi++) {
            const sift__param *pm = &s->desc->params[pi];
            if (pm->type != SIFT__PT_ID_FLOAT_MAP)
                continue;
            const sift_bias *biases = *(sift_bias *const *)(const void *)(s->rec.b + pm->off);
            size_t n_biases = *(const size_t *)(const void *)(s->rec.b + pm->off_count);
            ban_warnings(v, biases, n_biases, refs, nt, i);
        }
    }
    sift__free(&cfg->al, refs);
}

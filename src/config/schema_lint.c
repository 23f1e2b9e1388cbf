/*
 * schema_lint.c - the warnings over a whole valid chain.
 *
 * What it owns: the warnings that need the whole chain rather than one
 * value: a stage ahead of the first top_k cut that keeps the plan from
 * the slice top_k first would allow (min_p, which commutes with it, gets
 * its own advice), a stage before
 * greedy that cannot change the result, a stage listed twice, and a
 * logit_bias ban of a lazy grammar's trigger token (T-08). They run only
 * once the config is valid and its trial build succeeded; the top_k
 * warnings ask the analyzer's plan of the trial-built chain
 * (sift__cfg_trial_chain, sift_chain_plan), not the stages' classes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "schema.h"

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

/* min_p keeps a superset of any top-k it does not cut below, so the two
 * commute when its min_keep is at most k. */
static int commutes_with_top_k(const cfg_stage *s, int64_t top_k)
{
    return s->desc == sift__cfg_desc_named("min_p") &&
           *(const int32_t *)(const void *)((const unsigned char *)s->rec.b +
                                            sift__param_find(s->desc, "min_keep")->off) <= top_k;
}

/* The plan of a trial chain of the config stages order[0..n): its static
 * plan, the config stage its walk blames for the whole row and the one
 * whose truncation decides it (SIZE_MAX if none), and (top_k_at not NULL)
 * the config stage of the first top-k cut and its k. SIFT_OK, or the
 * build's failure. */
static sift_status trial_plan(cfg_validator *v, const size_t *order, size_t n, size_t *at,
                              sift_plan *plan, size_t *whole, size_t *decided, int64_t *top_k_at)
{
    sift_chain *c = NULL;
    v->cfg->work += n + 1;
    sift_status st = sift__cfg_trial_chain(v->cfg, order, n, &c, at);
    if (st != SIFT_OK)
        return st;
    plan->struct_size = sizeof *plan;
    st = sift_chain_plan(c, plan, NULL, NULL);
    int32_t w = sift__plan_whole_at(c);
    *whole = st == SIFT_OK && w >= 0 ? at[w] : SIZE_MAX;
    *decided = st == SIFT_OK && plan->decided_at >= 0 ? at[plan->decided_at] : SIZE_MAX;
    /* the first top-k cut, as the built chain classes it (top_k <= 0 is
     * IDENTITY) */
    for (size_t j = 0; top_k_at && j < sift_chain_n_stages(c); j++) {
        int64_t k = 0;
        if (v->cfg->stages[at[j]].desc == sift__cfg_desc_named("top_k") &&
            sift_chain_stage_class(c, j, &k) == SIFT_CLASS_TOP) {
            top_k_at[0] = (int64_t)at[j];
            top_k_at[1] = k;
            break;
        }
    }
    sift_chain_free(c);
    return st;
}

/* The stages ahead of the first top_k that keep the plan of the
 * trial-built chain from a slice which top_k first would allow: the plan
 * is asked, not the descriptors' classes. When the plan is WHOLE_ROW and
 * the same chain with its first top_k moved to the front is not, the
 * stage the plan blames is named; it is then taken out and the plan asked
 * again, so that every stage before top_k that needs the whole row on its
 * own is named. When the plan (then) is CERTIFIED, decided by a stage
 * before top_k, and top_k first would make it EXACT, that stage is
 * named. */
static void top_k_warnings(cfg_validator *v)
{
    sift_config *cfg = v->cfg;
    size_t n = cfg->n_stages;
    if (n < 2)
        return;
    size_t *order = sift__malloc(&cfg->al, 2 * n, sizeof *order);
    if (!order) {
        v->st = SIFT_E_NOMEM;
        return;
    }
    size_t *at = order + n;
    sift_plan plan, moved;
    size_t whole, decided, ignored;
    int64_t top[2] = {-1, 0};
    sift_status st = trial_plan(v, NULL, n, at, &plan, &whole, &decided, top);
    if (st != SIFT_OK || top[0] < 0)
        goto out;
    size_t t = (size_t)top[0], m = 0;
    int64_t top_k = top[1];
    order[m++] = t;
    for (size_t i = 0; i < n; i++)
        if (i != t)
            order[m++] = i;
    if ((st = trial_plan(v, order, n, at, &moved, &ignored, &ignored, NULL)) != SIFT_OK ||
        moved.guarantee == SIFT_GUARANTEE_WHOLE_ROW)
        goto out;
    /* WHOLE_ROW: name the blamed stage, take it out, ask again. The
     * chain asked is the stages up to top_k (the walk stops at the first
     * truncation, so later stages cannot be blamed before it). */
    m = 0;
    for (size_t i = 0; i <= t; i++)
        order[m++] = i;
    while (plan.guarantee == SIFT_GUARANTEE_WHOLE_ROW && whole < t && v->st == SIFT_OK) {
        const cfg_stage *s = &cfg->stages[whole];
        if (commutes_with_top_k(s, top_k))
            sift__cfg_warn_lc(v, s->line, s->col,
                              "min_p before top_k makes every step read the whole row; put top_k "
                              "first (the two commute: same tokens, and a runtime copies only the "
                              "top %d logits)",
                              (int)moved.k);
        else
            sift__cfg_warn_lc(v, s->line, s->col,
                              "%s before top_k makes every step read the whole row; with top_k "
                              "first a runtime copies only the top %d logits (%s then sees only "
                              "those)",
                              s->desc->name, (int)moved.k, s->desc->name);
        size_t k = 0;
        for (size_t i = 0; i < m; i++)
            if (order[i] != whole)
                order[k++] = order[i];
        m = k;
        if ((st = trial_plan(v, order, m, at, &plan, &whole, &decided, NULL)) != SIFT_OK)
            break;
    }
    /* CERTIFIED, decided by a stage before top_k (the plan as asked
     * last): name that stage when top_k first would make it EXACT. */
    if (st == SIFT_OK && plan.guarantee == SIFT_GUARANTEE_CERTIFIED &&
        moved.guarantee == SIFT_GUARANTEE_EXACT && decided < t) {
        const cfg_stage *s = &cfg->stages[decided];
        if (commutes_with_top_k(s, top_k))
            sift__cfg_warn_lc(v, s->line, s->col,
                              "min_p before top_k leaves the plan certified (a step may need "
                              "the whole row); put top_k first (the two commute: same tokens, "
                              "and the plan is exact: a runtime copies only the top %d logits)",
                              (int)moved.k);
        else
            sift__cfg_warn_lc(v, s->line, s->col,
                              "%s before top_k leaves the plan certified (a step may need the "
                              "whole row); with top_k first it is exact: a runtime copies only "
                              "the top %d logits (%s then sees only those)",
                              s->desc->name, (int)moved.k, s->desc->name);
    }
out:
    if (st == SIFT_E_NOMEM)
        v->st = SIFT_E_NOMEM;
    sift__free(&cfg->al, order);
}

void sift__cfg_chain_warnings(cfg_validator *v)
{
    sift_config *cfg = v->cfg;
    size_t n = cfg->n_stages;
    top_k_warnings(v);
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

/*
 * chain.c - the sampler chain: construction, the step (sample, accept),
 * clone, reset, and the scratch space.
 *
 * Invariants:
 * - A chain's stages are appended one at a time and each append is all or
 *   nothing; a chain never holds a half-built stage.
 * - sample() works on a copy of the RNG and on scratch buffers; it
 *   commits the RNG only when it returns SIFT_OK, so a failed sample
 *   changes nothing. Only accept() changes stage state.
 * - Scratch buffers are sized on the first sample for a given V and only
 *   grow; no step after the first allocates.
 * - `busy` is set while the chain runs caller code (custom stages); any
 *   public call on the chain from inside gets SIFT_E_STATE.
 */
#include <math.h>

#include "../sift_internal.h"
#include "../grammar/gbnf.h"

/* ------------------------------------------------------------------ */
/* Version                                                             */
/* ------------------------------------------------------------------ */

uint32_t sift_version_number(void)
{
    return SIFT_VERSION_NUMBER;
}

const char *sift_version(void)
{
    return SIFT_VERSION_STRING;
}

/* ------------------------------------------------------------------ */
/* Scratch                                                             */
/* ------------------------------------------------------------------ */

void sift__ws_free(sift__ws *ws, const sift__alloc *al)
{
    sift__free(al, ws->cand);
    sift__free(al, ws->cand2);
    sift__free(al, ws->u64a);
    sift__free(al, ws->u64b);
    sift__free(al, ws->u64c);
    sift__free(al, ws->u64d);
    sift__free(al, ws->f64);
    sift__free(al, ws->u32);
    memset(ws, 0, sizeof *ws);
}

sift_status sift__ws_reserve(sift__ws *ws, const sift__alloc *al, size_t n, sift_error *err)
{
    if (n <= ws->cap)
        return SIFT_OK;
    sift__ws w;
    memset(&w, 0, sizeof w);
    w.cap = n;
    w.cand = sift__malloc(al, n, sizeof *w.cand);
    w.cand2 = sift__malloc(al, n, sizeof *w.cand2);
    w.u64a = sift__malloc(al, n, sizeof *w.u64a);
    w.u64b = sift__malloc(al, n, sizeof *w.u64b);
    w.u64c = sift__malloc(al, n, sizeof *w.u64c);
    w.u64d = sift__malloc(al, n, sizeof *w.u64d);
    w.f64 = sift__malloc(al, n, sizeof *w.f64);
    w.u32 = sift__malloc(al, n, sizeof *w.u32);
    if (!w.cand || !w.cand2 || !w.u64a || !w.u64b || !w.u64c || !w.u64d || !w.f64 || !w.u32) {
        sift__ws_free(&w, al);
        return sift__fail(err, SIFT_E_NOMEM,
                          "out of memory while sizing scratch buffers for %zu tokens", n);
    }
    sift__ws_free(ws, al);
    *ws = w;
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* Construction                                                        */
/* ------------------------------------------------------------------ */

void sift_chain_params_init(sift_chain_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->max_vocab = SIFT_DEFAULT_MAX_VOCAB;
    p->max_history = SIFT_DEFAULT_MAX_HISTORY;
    p->max_stages = SIFT_DEFAULT_MAX_STAGES;
}

static sift_status check_limit(const char *name, int32_t v, int32_t hard, sift_error *err)
{
    if (v < 0 || v > hard)
        return sift__fail(err, SIFT_E_ARG, "params.%s = %d is outside [0, %d]", name, (int)v,
                          (int)hard);
    return SIFT_OK;
}

sift_status sift_chain_new(sift_chain **out, const sift_chain_params *params, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    sift_chain_params p;
    sift_chain_params_init(&p);
    if (params) {
        if (params->struct_size == 0 || params->struct_size > sizeof p)
            return sift__fail(err, SIFT_E_ARG,
                              "params.struct_size = %u; call sift_chain_params_init first",
                              (unsigned)params->struct_size);
        memcpy(&p, params, params->struct_size);
    }
    sift_status st;
    if ((st = check_limit("n_vocab", p.n_vocab, SIFT_HARD_MAX_VOCAB, err)) ||
        (st = check_limit("max_vocab", p.max_vocab, SIFT_HARD_MAX_VOCAB, err)) ||
        (st = check_limit("max_history", p.max_history, SIFT_HARD_MAX_HISTORY, err)) ||
        (st = check_limit("max_stages", p.max_stages, SIFT_HARD_MAX_STAGES, err)))
        return st;
    if (p.max_vocab == 0)
        p.max_vocab = SIFT_DEFAULT_MAX_VOCAB;
    if (p.max_stages == 0)
        p.max_stages = SIFT_DEFAULT_MAX_STAGES;
    if (p.n_vocab > p.max_vocab)
        return sift__fail(err, SIFT_E_LIMIT, "n_vocab = %d exceeds max_vocab %d", (int)p.n_vocab,
                          (int)p.max_vocab);
    sift__alloc al;
    sift_status ast = sift__alloc_init(&al, p.allocator, err);
    if (ast)
        return ast;
    sift_chain *c = sift__calloc(&al, 1, sizeof *c);
    if (!c)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while creating a chain");
    c->magic = SIFT__CHAIN_MAGIC;
    c->al = al;
    c->seed = p.seed;
    sift__rng_seed(&c->rng, p.seed);
    c->n_vocab = p.n_vocab;
    c->max_vocab = p.max_vocab;
    c->max_history = p.max_history;
    c->max_stages = p.max_stages;
    *out = c;
    return SIFT_OK;
}

static void stage_free(sift__stage *st, const sift__alloc *al)
{
    if (!st)
        return;
    if (st->ops->destroy)
        st->ops->destroy(st, al);
    sift__free(al, st);
}

void sift_chain_free(sift_chain *c)
{
    if (!c)
        return;
    sift__alloc al = c->al;
    for (size_t i = 0; i < c->n_stages; i++)
        stage_free(c->stages[i], &al);
    sift__free(&al, c->stages);
    sift__ws_free(&c->ws, &al);
    sift__free(&al, c->row);
    sift__free(&al, c->seen);
    sift_grammar_free(c->check);
    c->magic = 0xDEADu;
    sift__free(&al, c);
}

sift__stage *sift__stage_alloc(const sift__alloc *al, const sift__stage_ops *ops, size_t size)
{
    sift__stage *st = sift__calloc(al, 1, size);
    if (st) {
        st->ops = ops;
        st->size = size;
    }
    return st;
}

sift_status sift__stage_clone_flat(const sift__stage *st, sift__stage **out, const sift__alloc *al,
                                   sift_error *err)
{
    sift__stage *c = sift__calloc(al, 1, st->size);
    if (!c)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while cloning stage %s",
                          sift__stage_name(st));
    memcpy(c, st, st->size);
    *out = c;
    return SIFT_OK;
}

const sift__alloc *sift__chain_alloc(const sift_chain *chain)
{
    return &chain->al;
}

sift__stage *sift__chain_stage(const sift_chain *chain, size_t i)
{
    return chain->stages[i];
}

int32_t sift__chain_max_history(const sift_chain *chain)
{
    return chain->max_history;
}

sift_status sift__chain_enter(sift_chain *chain, sift_error *err)
{
    if (!chain)
        return sift__fail(err, SIFT_E_ARG, "chain is NULL");
    if (chain->busy)
        return sift__fail(err, SIFT_E_STATE, "chain is busy (called from one of its callbacks)");
    return SIFT_OK;
}

sift_status sift__chain_push(sift_chain *c, sift__stage *st, sift_error *err)
{
    if (c->n_stages >= (size_t)c->max_stages) {
        sift__fail(err, SIFT_E_LIMIT, "chain already has %zu stages (max_stages %d)", c->n_stages,
                   (int)c->max_stages);
        stage_free(st, &c->al);
        return SIFT_E_LIMIT;
    }
    if (c->n_stages == c->cap_stages) {
        size_t cap = c->cap_stages ? c->cap_stages * 2 : 8;
        c->busy = 1; /* the allocator must not call back into the chain */
        sift__stage **s = sift__calloc(&c->al, cap, sizeof *s);
        c->busy = 0;
        if (!s) {
            sift__fail(err, SIFT_E_NOMEM, "out of memory while adding stage %s",
                       sift__stage_name(st));
            stage_free(st, &c->al);
            return SIFT_E_NOMEM;
        }
        if (c->n_stages)
            memcpy(s, c->stages, c->n_stages * sizeof *s);
        sift__free(&c->al, c->stages);
        c->stages = s;
        c->cap_stages = cap;
    }
    c->stages[c->n_stages++] = st;
    c->busy = 1; /* a custom stage's class callback must not re-enter */
    sift__plan_cache(c);
    c->busy = 0;
    return SIFT_OK;
}

sift_status sift_chain_clone(const sift_chain *c, sift_chain **out, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!c)
        return sift__fail(err, SIFT_E_ARG, "chain is NULL");
    sift_chain *d = sift__calloc(&c->al, 1, sizeof *d);
    if (!d)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while cloning a chain");
    *d = *c;
    d->busy = 0;
    d->stages = NULL;
    d->n_stages = d->cap_stages = 0;
    memset(&d->ws, 0, sizeof d->ws);
    d->hook = NULL;
    d->hook_user = NULL;
    d->row = NULL;
    d->row_cap = 0;
    d->seen = NULL;
    d->seen_words = 0;
    d->check = NULL;
    d->n_grammar_resamples = 0;
    d->n_slice_decided = d->n_hook_calls = d->n_need_row = 0;
    d->n_prefix_decided = d->n_prefix_fallback = 0;
    d->n_xc = d->n_xc_mismatch = d->n_xc_skipped = 0;
    if (c->n_stages) {
        d->stages = sift__calloc(&c->al, c->n_stages, sizeof *d->stages);
        if (!d->stages) {
            sift__free(&c->al, d);
            return sift__fail(err, SIFT_E_NOMEM, "out of memory while cloning a chain");
        }
        d->cap_stages = c->n_stages;
    }
    for (size_t i = 0; i < c->n_stages; i++) {
        const sift__stage *st = c->stages[i];
        sift__stage *copy = NULL;
        sift_status s = st->ops->clone ? st->ops->clone(st, &copy, &c->al, err)
                                       : sift__stage_clone_flat(st, &copy, &c->al, err);
        if (s != SIFT_OK) {
            sift_chain_free(d);
            return s;
        }
        d->stages[d->n_stages++] = copy;
    }
    if (c->check) {
        sift_status s = sift_grammar_clone(c->check, &d->check, err);
        if (s != SIFT_OK) {
            sift_chain_free(d);
            return s;
        }
        sift__grammar_set_owned(d->check);
    }
    *out = d;
    return SIFT_OK;
}

void sift_chain_reset(sift_chain *c)
{
    if (!c || c->busy)
        return;
    sift__rng_seed(&c->rng, c->seed);
    if (c->check)
        sift_grammar_reset(c->check);
    for (size_t i = 0; i < c->n_stages; i++)
        if (c->stages[i]->ops->reset)
            c->stages[i]->ops->reset(c->stages[i]);
}

size_t sift_chain_n_stages(const sift_chain *c)
{
    return c ? c->n_stages : 0;
}

const char *sift_chain_stage_name(const sift_chain *c, size_t i)
{
    if (!c || i >= c->n_stages)
        return NULL;
    return sift__stage_name(c->stages[i]);
}

sift_class sift_chain_stage_class(const sift_chain *c, size_t i, int64_t *n)
{
    if (n)
        *n = 0;
    if (!c || i >= c->n_stages)
        return SIFT_CLASS_WHOLE;
    const sift__stage *st = c->stages[i];
    int64_t dummy;
    if (!st->ops->cls)
        return SIFT_CLASS_WHOLE;
    return st->ops->cls(st, n ? n : &dummy);
}

void sift__chain_rng_state(const sift_chain *c, uint64_t out[4])
{
    memcpy(out, c->rng.s, sizeof c->rng.s);
}

uint64_t sift__chain_state_digest(const sift_chain *c)
{
    uint64_t h = sift__fnv(0, c->rng.s, sizeof c->rng.s);
    for (size_t i = 0; i < c->n_stages; i++) {
        const sift__stage *st = c->stages[i];
        h = sift__fnv(h, sift__stage_name(st), strlen(sift__stage_name(st)));
        if (st->ops->digest)
            h = st->ops->digest(st, h);
    }
    if (c->check)
        h = sift__grammar_digest(c->check, h);
    return h;
}

/* ------------------------------------------------------------------ */
/* The step                                                            */
/* ------------------------------------------------------------------ */

/* Grammars decide per token of their own vocabulary: one of another size
 * than the row is refused before any stage runs, on every path (else the
 * outcome would depend on which token is drawn). */
sift_status sift__chain_check_grammars(sift_chain *c, int32_t V, sift_error *err)
{
    if (c->check && sift__grammar_n_vocab(c->check) != V)
        return sift__fail(err, SIFT_E_ARG,
                          "the check grammar's vocabulary has %d tokens, the row has %d",
                          (int)sift__grammar_n_vocab(c->check), (int)V);
    for (size_t i = 0; i < c->n_stages; i++) {
        const sift_grammar *g = sift__grammar_of_stage(c->stages[i]);
        if (g && sift__grammar_n_vocab(g) != V)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "stage %zu (%s) has a vocabulary of %d tokens, the row has %d", i,
                                 sift__stage_name(c->stages[i]), (int)sift__grammar_n_vocab(g),
                                 (int)V);
    }
    return SIFT_OK;
}

/* Everything sample and distribution check before touching the row
 * (the buffers are sized by the caller). */
static sift_status check_chain(sift_chain *c, int32_t V, int need_selector, sift_error *err)
{
    if (V < 1)
        return sift__fail(err, SIFT_E_ARG, "row length must be >= 1, got %d", (int)V);
    if (V > c->max_vocab)
        return sift__fail(err, SIFT_E_LIMIT, "V = %d exceeds max_vocab %d", (int)V,
                          (int)c->max_vocab);
    if (c->n_vocab && V != c->n_vocab)
        return sift__fail(err, SIFT_E_ARG, "row has %d entries, chain expects %d", (int)V,
                          (int)c->n_vocab);
    sift_status s = sift__chain_check_grammars(c, V, err);
    if (s)
        return s;
    if (c->n_stages == 0 || !c->stages[c->n_stages - 1]->ops->is_selector) {
        if (need_selector || c->n_stages == 0)
            return sift__fail(err, SIFT_E_ARG,
                              "chain must end with exactly one selector (greedy, dist, "
                              "mirostat, mirostat_v2)%s",
                              c->n_stages ? "" : "; it has no stages");
    }
    for (size_t i = 0; i + 1 < c->n_stages; i++)
        if (c->stages[i]->ops->is_selector)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "stage %zu (%s) is a selector but not the last stage", i,
                                 sift__stage_name(c->stages[i]));
    for (size_t i = 0; i < c->n_stages; i++) {
        const sift__stage *st = c->stages[i];
        if (st->ops->max_token) {
            int32_t mt = st->ops->max_token(st);
            if (mt >= V)
                return sift__fail_at(err, SIFT_E_ARG, mt,
                                     "stage %zu (%s) refers to token %d, outside the row's "
                                     "vocabulary [0, %d)",
                                     i, sift__stage_name(st), (int)mt, (int)V);
        }
    }
    return SIFT_OK;
}

/* Copies and validates the row into the working array. */
static sift_status load_row(sift_chain *c, const float *logits, int32_t V, sift__arr *a,
                            sift_error *err)
{
    sift_candidate *cd = c->ws.cand;
    /* One pass that both copies and looks for bad values; the tests are
     * ORed so the loop stays branch-free. With GCC or clang the tests run
     * on four floats at once (generic vectors: SSE2, NEON), which halves
     * the cost of this pass on a full row; the outcome is the same. */
    int bad = 0;
    int any = 0;
    int32_t i = 0;
#if defined(__GNUC__) || defined(__clang__)
    typedef float v4f __attribute__((vector_size(16)));
    typedef int32_t v4i __attribute__((vector_size(16)));
    const v4f inf = {INFINITY, INFINITY, INFINITY, INFINITY};
    const v4f ninf = -inf;
    v4i bad4 = {0, 0, 0, 0}, any4 = {0, 0, 0, 0};
    for (; i + 4 <= V; i += 4) {
        v4f x;
        memcpy(&x, logits + i, sizeof x);
        bad4 |= ~(x < inf); /* NaN or +inf */
        any4 |= x > ninf;
        for (int j = 0; j < 4; j++) {
            cd[i + j].id = i + j;
            cd[i + j].logit = x[j];
        }
    }
    bad = (bad4[0] | bad4[1] | bad4[2] | bad4[3]) != 0;
    any = (any4[0] | any4[1] | any4[2] | any4[3]) != 0;
#endif
    for (; i < V; i++) {
        float x = logits[i];
        cd[i].id = i;
        cd[i].logit = x;
        bad |= !(x < INFINITY); /* NaN or +inf */
        any |= x > -INFINITY;
    }
    if (bad || !any)
        return sift__row_error(logits, V, err);
    a->c = cd;
    a->n = (size_t)V;
    a->V = V;
    a->order = SIFT__ORDER_ID;
    a->dense = 1;
    return SIFT_OK;
}

sift_status sift__no_candidate(sift__ctx *ctx, const char *stage_name)
{
    return sift__fail_at(ctx->err, SIFT_E_NO_CANDIDATE, (int64_t)ctx->stage,
                         "no candidate left at stage %zu (%s): every logit is -inf", ctx->stage,
                         stage_name);
}

/* SIFT_E_NO_CANDIDATE naming the stage after which every candidate was
 * -inf (ctx->banned_at), for a later stage that found none left. */
sift_status sift__no_candidate_left(const sift_chain *c, const sift__ctx *ctx)
{
    size_t j = ctx->banned_at;
    return sift__fail_at(ctx->err, SIFT_E_NO_CANDIDATE, (int64_t)j,
                         "no candidate left: stage %zu (%s) removed the last candidate (every "
                         "logit is -inf after it)",
                         j, sift__stage_name(c->stages[j]));
}

static void ctx_init(sift_chain *c, sift__ctx *ctx, int32_t V, sift_error *err)
{
    ctx->rng = c->rng;
    ctx->ws = &c->ws;
    ctx->err = err;
    ctx->V = V;
    ctx->stage = 0;
    ctx->selected = -1;
    ctx->banned_at = SIZE_MAX;
}

static sift_status load_row(sift_chain *c, const float *logits, int32_t V, sift__arr *a,
                            sift_error *err);

/* Applies stages [0, end) to the row `logits` loaded into `a`.
 *
 * A stage that finds every candidate at -inf reports SIFT_E_NO_CANDIDATE
 * under its own name, but the stage to name is the one that set the last
 * finite logit to -inf. Checking after every stage would cost a scan of
 * the row per stage, so only a failing step finds it: the stages run
 * again from the row and the same RNG state (apply changes no stage
 * state; a custom stage's apply is called again) and the last run
 * of stages that leave nothing finite is found (a custom stage may
 * raise a -inf logit again). The same holds when the stages before a
 * distribution's selector leave nothing finite (SIFT_OK with every
 * candidate at -inf; ctx->banned_at is then set). */
static sift_status run_stages(sift_chain *c, sift__ctx *ctx, sift__arr *a, size_t end,
                              const float *logits)
{
    sift__ctx start = *ctx;
    sift_status s = SIFT_OK;
    size_t i = 0;
    for (; i < end; i++) {
        sift__stage *st = c->stages[i];
        ctx->stage = i;
        if ((s = st->ops->apply(st, ctx, a)) != SIFT_OK)
            break;
        if (a->n == 0)
            return sift__fail_at(ctx->err, SIFT_E_NO_CANDIDATE, (int64_t)i,
                                 "stage %zu (%s) removed the last candidate", i,
                                 sift__stage_name(st));
    }
    int selected = end > 0 && c->stages[end - 1]->ops->is_selector;
    if (s == SIFT_OK && (selected || !sift__all_banned(a->c, a->n)))
        return SIFT_OK;
    if (s != SIFT_OK && (s != SIFT_E_NO_CANDIDATE || i == 0))
        return s;
    /* Find the stage that banned the last candidate. */
    sift__ctx re = start;
    re.err = NULL;
    ctx->banned_at = SIZE_MAX;
    sift__arr b = *a;
    if (load_row(c, logits, a->V, &b, NULL) == SIFT_OK) {
        for (size_t j = 0; j < i; j++) {
            re.stage = j;
            if (c->stages[j]->ops->apply(c->stages[j], &re, &b) != SIFT_OK || b.n == 0)
                break;
            sift__note_banned(ctx, j, &b);
        }
    }
    *a = b; /* the same buffer; the set as far as the stages ran again */
    if (ctx->banned_at == SIZE_MAX)
        return s;
    return sift__no_candidate_left(c, ctx);
}

/* Appends to the prefix in `a` the extras this step asks for, with their
 * row logits, in canonical order (they all rank after the prefix). */
static void add_row_extras(sift_chain *c, sift__arr *a, const float *row, const sift__bound *b)
{
    int32_t *ids = (int32_t *)c->ws.u32;
    size_t cap = c->ws.cap - a->n;
    size_t n = sift__chain_extras(c, ids, cap);
    if (n == 0 || n > cap)
        return; /* n > cap cannot happen: extras are distinct ids < V */
    size_t start = a->n;
    for (size_t i = 0; i < n; i++) {
        sift_candidate x = {ids[i], row[ids[i]]};
        if (sift__ckey(x.logit, x.id) < b->key)
            a->c[a->n++] = x;
    }
    sift__sort_canon(a->c + start, a->n - start, c->ws.cand2);
}

/* One pass of the chain over a whole row, starting from RNG state *rng:
 * the token, and *rng advanced past the draws. Commits nothing. The
 * caller has checked the chain and sized the buffers. */
static sift_status run_row(sift_chain *c, const float *logits, int32_t V, sift__rng *rng,
                           int32_t *token, sift_error *err)
{
    sift_status s = SIFT_OK;
    sift__ctx ctx;
    sift__arr a;
    /* Fast path: decide from the row's top k when the chain allows it. */
    size_t k = sift__plan_prefix_k(c);
    /* The prefix needs the extras of this step; a grammar that cannot
     * list its allowed tokens within its work budget sends the step to
     * the whole row, which does not need them (out of memory is the
     * step's error). */
    sift_status ps = k > 0 && k <= (size_t)V / 8 ? sift__chain_prepare_extras(c, NULL) : SIFT_OK;
    if (ps == SIFT_E_NOMEM)
        return sift__fail(err, SIFT_E_NOMEM,
                          "out of memory while listing a grammar's allowed tokens");
    if (k > 0 && k <= (size_t)V / 8 && ps == SIFT_OK) {
        ctx_init(c, &ctx, V, err);
        ctx.rng = *rng;
        if ((s = sift__row_prefix(&ctx, logits, V, k, c->ws.cand)))
            return s;
        a.c = c->ws.cand;
        a.n = k;
        a.V = V;
        a.order = SIFT__ORDER_CANON;
        a.dense = 0;
        sift__bound b = sift__bound_of(&a.c[k - 1]);
        add_row_extras(c, &a, logits, &b);
        int decided = sift__walk(c, &ctx, &a, c->n_stages, &b, &s) == SIFT__WALK_DECIDED;
        if (decided) {
            if (s)
                return s;
            c->n_prefix_decided++;
            goto selected;
        }
        c->n_prefix_fallback++;
    }
    if ((s = load_row(c, logits, V, &a, err)))
        return s;
    ctx_init(c, &ctx, V, err);
    ctx.rng = *rng;
    s = run_stages(c, &ctx, &a, c->n_stages, logits);
    if (s)
        return s;
selected:
    if (ctx.selected < 0 || ctx.selected >= V)
        return sift__fail(err, SIFT_E_STATE, "selector %s did not select a token",
                          sift__stage_name(c->stages[c->n_stages - 1]));
    *rng = ctx.rng;
    *token = ctx.selected;
    return SIFT_OK;
}

/* The row buffer (for the hook and for check-mode bans), sized once. */
static sift_status row_buffer(sift_chain *c, int32_t V, sift_error *err)
{
    if ((size_t)V <= c->row_cap)
        return SIFT_OK;
    float *r = sift__malloc(&c->al, (size_t)V, sizeof *r);
    if (!r)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while sizing a %d-token row buffer",
                          (int)V);
    sift__free(&c->al, c->row);
    c->row = r;
    c->row_cap = (size_t)V;
    return SIFT_OK;
}

/* Check mode: if the chain's check grammar rejects *token, ban every token
 * it rejects in (a copy of) the row and sample again, continuing from the
 * RNG state the first draw left. `row` may be c->row (banned in place). */
static sift_status grammar_check(sift_chain *c, const float *row, int32_t V, sift__rng *rng,
                                 int32_t *token, sift_error *err)
{
    if (!c->check)
        return SIFT_OK;
    int ok = 0;
    sift_status s = sift_grammar_accepts_token(c->check, *token, &ok, err);
    if (s || ok)
        return s;
    if ((s = row_buffer(c, V, err)))
        return s;
    if (row != c->row)
        memcpy(c->row, row, (size_t)V * sizeof *row);
    c->n_grammar_resamples++;
    if ((s = sift_grammar_ban(c->check, c->row, V, err)))
        return s;
    return run_row(c, c->row, V, rng, token, err);
}

static sift_status sample_impl(sift_chain *c, const float *logits, int32_t V, int32_t *token,
                               sift_error *err)
{
    sift_status s = SIFT_OK;
    if (!token)
        return sift__fail(err, SIFT_E_ARG, "token is NULL");
    if (!logits)
        return sift__fail(err, SIFT_E_ARG, "logits is NULL");
    if ((s = check_chain(c, V, 1, err)) || (s = sift__ws_reserve(&c->ws, &c->al, (size_t)V, err)))
        return s;
    sift__rng rng = c->rng;
    int32_t tok = -1;
    if ((s = run_row(c, logits, V, &rng, &tok, err)) ||
        (s = grammar_check(c, logits, V, &rng, &tok, err)))
        return s;
    c->rng = rng;
    c->last_V = V;
    *token = tok;
    return SIFT_OK;
}

/* prompt = 1: a token of the prompt (or any text the model did not
 * generate): history windows take it, grammars do not. */
static sift_status accept_impl(sift_chain *c, int32_t token, int prompt, sift_error *err)
{
    int32_t lim = c->n_vocab ? c->n_vocab : (c->last_V ? c->last_V : c->max_vocab);
    if (token < 0 || token >= lim)
        return sift__fail_at(err, SIFT_E_TOKEN, token, "token %d out of range [0, %d)", (int)token,
                             (int)lim);
    /* Grammars can refuse a token; ask them all before anything changes. */
    sift_status s;
    if (!prompt) {
        if (c->check && (s = sift__grammar_prepare_accept(c->check, token, err)))
            return s;
        for (size_t i = 0; i < c->n_stages; i++) {
            sift_grammar *g = sift__grammar_of_stage(c->stages[i]);
            if (g && (s = sift__grammar_prepare_accept(g, token, err)))
                return s;
        }
        if (c->check && (s = sift_grammar_accept_token(c->check, token, err)))
            return s; /* prepared: cannot fail */
    }
    for (size_t i = 0; i < c->n_stages; i++) {
        sift__stage *st = c->stages[i];
        if (st->ops->accept && !(prompt && sift__grammar_of_stage(st)))
            st->ops->accept(st, token);
    }
    return SIFT_OK;
}

/* The stages before the selector: [0, selector_end). */
static size_t selector_end(const sift_chain *c)
{
    size_t end = c->n_stages;
    if (end && c->stages[end - 1]->ops->is_selector)
        end--;
    return end;
}

/* The selector's support and the probabilities, from the set the stages
 * before it left in `a`. */
static sift_status finish_distribution(sift_chain *c, sift__ctx *ctx, sift__arr *a, size_t end,
                                       sift_token_prob *out, size_t capacity, size_t *n_out)
{
    sift_status s = SIFT_OK;
    sift__stage *sel = end < c->n_stages ? c->stages[end] : NULL;
    if (sel && sel->ops->support) {
        ctx->stage = end;
        if ((s = sel->ops->support(sel, ctx, a)))
            return s;
    }
    float m = sift__max_logit(a->c, a->n);
    if (!(m > -INFINITY)) {
        if (ctx->banned_at < end)
            return sift__no_candidate_left(c, ctx);
        return sift__fail(ctx->err, SIFT_E_NO_CANDIDATE, "every candidate is -inf after stage %zu",
                          end ? end - 1 : 0);
    }
    if (sel && sel->ops->is_greedy)
        sift__arr_keep_top(ctx, a, 1);
    sift__u128 W = sift__weights(a->c, a->n, m, c->ws.u64a);
    double Wd = sift__u128_to_double(W);
    /* Report in canonical order. This is a diagnostic call, not the hot
     * path, so it sorts what survived. A weight is a pure function of the
     * logit and m, so it is recomputed after the sort. */
    sift_candidate *sorted = c->ws.cand2;
    memcpy(sorted, a->c, a->n * sizeof *sorted);
    sift__sort_canon(sorted, a->n, a->c);
    size_t k = a->n < capacity ? a->n : capacity;
    for (size_t i = 0; i < k; i++) {
        out[i].id = sorted[i].id;
        out[i].logit = sorted[i].logit;
        out[i].p = (double)sift__weight(sift__expf(sorted[i].logit - m)) / Wd;
    }
    *n_out = a->n;
    return SIFT_OK;
}

static sift_status distribution_impl(sift_chain *c, const float *logits, int32_t V,
                                     sift_token_prob *out, size_t capacity, size_t *n_out,
                                     sift_error *err)
{
    sift_status s = SIFT_OK;
    if (!n_out || (!out && capacity))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", n_out ? "out" : "n_out");
    if (!logits)
        return sift__fail(err, SIFT_E_ARG, "logits is NULL");
    if ((s = check_chain(c, V, 0, err)) || (s = sift__ws_reserve(&c->ws, &c->al, (size_t)V, err)))
        return s;
    sift__arr a;
    if ((s = load_row(c, logits, V, &a, err)))
        return s;
    sift__ctx ctx;
    ctx_init(c, &ctx, V, err);
    size_t end = selector_end(c);
    s = run_stages(c, &ctx, &a, end, logits);
    if (s)
        return s;
    return finish_distribution(c, &ctx, &a, end, out, capacity, n_out);
}

/* ------------------------------------------------------------------ */
/* Slices                                                              */
/* ------------------------------------------------------------------ */

static sift_status seen_reserve(sift_chain *c, int32_t V, sift_error *err)
{
    size_t words = ((size_t)V + 63) / 64;
    if (words <= c->seen_words)
        return SIFT_OK;
    uint64_t *b = sift__calloc(&c->al, words, sizeof *b);
    if (!b)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while sizing a %d-token bitmap",
                          (int)V);
    sift__free(&c->al, c->seen);
    c->seen = b;
    c->seen_words = words;
    return SIFT_OK;
}

static int seen_test_set(uint64_t *m, int32_t id)
{
    uint64_t bit = (uint64_t)1 << (id & 63);
    int was = (m[id >> 6] & bit) != 0;
    m[id >> 6] |= bit;
    return was;
}

static void seen_clear(uint64_t *m, const sift_candidate *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (c[i].id >= 0)
            m[c[i].id >> 6] = 0;
}

/* One candidate of a slice: id range, value. `what` names the array. */
static sift_status check_entry(const sift_candidate *x, int32_t V, const char *what, int32_t pos,
                               sift_error *err)
{
    if (x->id < 0 || x->id >= V)
        return sift__fail_at(err, SIFT_E_SLICE, pos, "%s %d has id %d, outside [0, %d)", what,
                             (int)pos, (int)x->id, (int)V);
    if (x->logit != x->logit)
        return sift__fail_at(err, SIFT_E_ROW_VALUE, x->id, "%s %d (token %d) is NaN", what,
                             (int)pos, (int)x->id);
    if (x->logit == INFINITY)
        return sift__fail_at(err, SIFT_E_ROW_VALUE, x->id, "%s %d (token %d) is +inf", what,
                             (int)pos, (int)x->id);
    return SIFT_OK;
}

/* The position of id in c[0..n) (it is there). */
static int32_t find_pos(const sift_candidate *c, size_t n, int32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (c[i].id == id)
            return (int32_t)i;
    return -1;
}

/* Every extra id the chain asks for this step is in the slice (whose ids
 * are set in the bitmap m). */
static sift_status check_requested(sift_chain *c, const sift_slice *sl, const uint64_t *m,
                                   sift_error *err)
{
    int32_t *ids = (int32_t *)c->ws.u32;
    size_t n = sift__chain_extras(c, ids, c->ws.cap);
    if (n > c->ws.cap)
        n = c->ws.cap;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id >= sl->n_vocab) /* check_chain reports a stage's token outside V */
            continue;
        if (!(m[id >> 6] & ((uint64_t)1 << (id & 63))))
            return sift__fail_at(
                err, SIFT_E_SLICE, id,
                "extra token %d, which the chain asks for this step (sift_chain_extras), is "
                "missing from the slice",
                (int)id);
    }
    return SIFT_OK;
}

/* Validates a slice in O(k + extras) with the chain's zeroed bitmap
 * (left zeroed on every path). The ids the chain asks for as extras are
 * written to ws.u32 scratch first, so ws must hold them. */
static sift_status validate_slice(sift_chain *c, const sift_slice *sl, sift_error *err)
{
    int32_t V = sl->n_vocab, k = sl->n_prefix, e = sl->n_extras;
    if (k < 1)
        return sift__fail(err, SIFT_E_SLICE, "slice has %d prefix candidates; at least 1 is needed",
                          (int)k);
    if (k > V)
        return sift__fail(err, SIFT_E_SLICE, "k = %d > V = %d", (int)k, (int)V);
    if (e < 0 || (int64_t)k + e > V)
        return sift__fail(err, SIFT_E_SLICE,
                          "slice has %d extras; with k = %d it must fit in V = %d", (int)e, (int)k,
                          (int)V);
    if (!sl->prefix || (e > 0 && !sl->extras))
        return sift__fail(err, SIFT_E_SLICE, "slice.%s is NULL", sl->prefix ? "extras" : "prefix");
    if (sl->flags & ~(uint32_t)SIFT_SLICE_CANONICAL)
        return sift__fail(err, SIFT_E_SLICE, "slice.flags has unknown bits 0x%x",
                          (unsigned)(sl->flags & ~(uint32_t)SIFT_SLICE_CANONICAL));
    const int canon = (sl->flags & SIFT_SLICE_CANONICAL) != 0;
    /* The common case first, branch-free: every id in range, every value
     * finite or -inf, ids unique, and the extras below the prefix: below
     * its last key for a canonical prefix (whose keys must then strictly
     * decrease), else at or below its smallest logit. Only a slice that
     * fails it goes through the checks below, which find the first
     * problem and name it. */
    uint64_t *m = c->seen;
    int bad = 0;
    uint64_t prev = UINT64_MAX;
    float lmin = INFINITY;
    for (int32_t i = 0; i < k; i++) {
        sift_candidate x = sl->prefix[i];
        uint64_t key = sift__ckey(x.logit, x.id);
        bad |= ((uint32_t)x.id >= (uint32_t)V) | !(x.logit < INFINITY) | (canon & (key >= prev));
        prev = key;
        lmin = x.logit < lmin ? x.logit : lmin;
    }
    for (int32_t i = 0; i < e; i++) {
        sift_candidate x = sl->extras[i];
        bad |= ((uint32_t)x.id >= (uint32_t)V) | !(x.logit < INFINITY) |
               (canon ? sift__ckey(x.logit, x.id) >= prev : x.logit > lmin);
    }
    if (!bad) {
        for (int32_t i = 0; i < k && !bad; i++)
            bad = seen_test_set(m, sl->prefix[i].id);
        for (int32_t i = 0; i < e && !bad; i++)
            bad = seen_test_set(m, sl->extras[i].id);
        if (!bad && c->plan_max_extras == 0) {
            seen_clear(m, sl->prefix, (size_t)k);
            seen_clear(m, sl->extras, (size_t)e);
            return SIFT_OK;
        }
        if (bad) { /* clear and let the detailed checks name the duplicate */
            seen_clear(m, sl->prefix, (size_t)k);
            seen_clear(m, sl->extras, (size_t)e);
        }
    }
    if (!bad) {
        /* Valid so far, and the bits are set: check the requested extras. */
        sift_status s = check_requested(c, sl, m, err);
        seen_clear(m, sl->prefix, (size_t)k);
        seen_clear(m, sl->extras, (size_t)e);
        return s;
    }
    sift_status s = SIFT_OK;
    for (int32_t i = 0; i < k && !s; i++) {
        s = check_entry(&sl->prefix[i], V, "prefix position", i, err);
        if (!s && canon && i > 0 && !sift__canon_before(&sl->prefix[i - 1], &sl->prefix[i]) &&
            sl->prefix[i - 1].id != sl->prefix[i].id)
            s = sift__fail_at(err, SIFT_E_SLICE, i,
                              "prefix positions %d/%d are out of canonical order (token %d, "
                              "logit %.9g before token %d, logit %.9g)",
                              (int)(i - 1), (int)i, (int)sl->prefix[i - 1].id,
                              (double)sl->prefix[i - 1].logit, (int)sl->prefix[i].id,
                              (double)sl->prefix[i].logit);
    }
    for (int32_t i = 0; i < e && !s; i++)
        s = check_entry(&sl->extras[i], V, "extra", i, err);
    if (s)
        return s;
    /* Duplicates, then the extras the chain asks for. */
    for (int32_t i = 0; i < k && !s; i++)
        if (seen_test_set(m, sl->prefix[i].id))
            s = sift__fail_at(err, SIFT_E_SLICE, sl->prefix[i].id,
                              "token %d appears at prefix positions %d and %d",
                              (int)sl->prefix[i].id,
                              (int)find_pos(sl->prefix, (size_t)i, sl->prefix[i].id), (int)i);
    for (int32_t i = 0; i < e && !s; i++)
        if (seen_test_set(m, sl->extras[i].id)) {
            int32_t p = find_pos(sl->prefix, (size_t)k, sl->extras[i].id);
            s = p >= 0
                    ? sift__fail_at(err, SIFT_E_SLICE, sl->extras[i].id,
                                    "extra token %d is already in the prefix (position %d)",
                                    (int)sl->extras[i].id, (int)p)
                    : sift__fail_at(err, SIFT_E_SLICE, sl->extras[i].id,
                                    "extra token %d appears twice (extras %d and %d)",
                                    (int)sl->extras[i].id,
                                    (int)find_pos(sl->extras, (size_t)i, sl->extras[i].id), (int)i);
        }
    const sift_candidate *last = &sl->prefix[k - 1];
    for (int32_t i = 0; i < e && !s; i++)
        if (canon && sift__canon_before(&sl->extras[i], last))
            s = sift__fail_at(err, SIFT_E_SLICE, sl->extras[i].id,
                              "extra token %d (logit %.9g) ranks before the prefix's last "
                              "token %d (logit %.9g); it belongs in the prefix",
                              (int)sl->extras[i].id, (double)sl->extras[i].logit, (int)last->id,
                              (double)last->logit);
        else if (!canon && sl->extras[i].logit > lmin)
            s = sift__fail_at(err, SIFT_E_SLICE, sl->extras[i].id,
                              "extra token %d (logit %.9g) is above the prefix's smallest logit "
                              "%.9g; it belongs in the prefix",
                              (int)sl->extras[i].id, (double)sl->extras[i].logit, (double)lmin);
    if (!s)
        s = check_requested(c, sl, m, err);
    seen_clear(m, sl->prefix, (size_t)k);
    if (e > 0)
        seen_clear(m, sl->extras, (size_t)e);
    return s;
}

/* Checks and sizes everything for a slice call; fills `a` and `b`. */
static sift_status load_slice(sift_chain *c, const sift_slice *sl, int need_selector, sift__arr *a,
                              sift__bound *b, sift_error *err)
{
    sift_status s;
    int32_t V = sl->n_vocab;
    if ((s = check_chain(c, V, need_selector, err)))
        return s;
    int64_t want = (int64_t)sift__chain_max_extras(c);
    int64_t n =
        (int64_t)(sl->n_prefix > 0 ? sl->n_prefix : 0) + (sl->n_extras > 0 ? sl->n_extras : 0);
    if (want < n)
        want = n;
    if (want > V)
        want = V;
    if (want < 1)
        want = 1;
    if ((s = sift__ws_reserve(&c->ws, &c->al, (size_t)want, err)) ||
        (s = seen_reserve(c, V, err)) || (s = sift__chain_prepare_extras(c, err)))
        return s;
    if ((s = validate_slice(c, sl, err)))
        return s;
    size_t k = (size_t)sl->n_prefix, e = (size_t)sl->n_extras;
    memcpy(c->ws.cand, sl->prefix, k * sizeof *c->ws.cand);
    if (!(sl->flags & SIFT_SLICE_CANONICAL))
        sift__order_top_set(c->ws.cand, k, c->ws.cand2);
    /* Every absent token and every extra ranks after the prefix's last
     * token: a prefix that starts at -inf means a row of -inf, refused
     * before any stage as the row paths refuse it. */
    if (!(c->ws.cand[0].logit > -INFINITY))
        return sift__fail(err, SIFT_E_NO_CANDIDATE,
                          "all %d tokens are banned (-inf) in the input row", (int)V);
    if (e > 0) {
        memcpy(c->ws.cand + k, sl->extras, e * sizeof *c->ws.cand);
        sift__sort_canon(c->ws.cand + k, e, c->ws.cand2);
    }
    a->c = c->ws.cand;
    a->n = k + e;
    a->V = V;
    a->order = SIFT__ORDER_CANON;
    a->dense = 0;
    /* A canonical prefix: every absent token comes after its last token
     * in canonical order. A device's top-k set: every absent token's
     * logit is at most the smallest present one, with any id, so only a
     * strictly larger logit is certainly ahead (docs/analyzer.md, "The
     * slice contract"). */
    if (sl->flags & SIFT_SLICE_CANONICAL) {
        *b = sift__bound_of(&c->ws.cand[k - 1]);
    } else {
        b->by_key = 0;
        b->key = 0;
        b->logit = c->ws.cand[k - 1].logit;
    }
    return SIFT_OK;
}

/* Calls the row hook into c->row and checks the row against the slice. */
static sift_status fetch_row(sift_chain *c, const sift_slice *sl, sift_error *err)
{
    int32_t V = sl->n_vocab;
    sift_status s = row_buffer(c, V, err);
    if (s)
        return s;
    c->n_hook_calls++;
    int rc = c->hook(c->hook_user, c->row, V);
    if (rc != 0)
        return sift__fail(err, SIFT_E_HOOK, "row hook failed (status %d)", rc);
    const float *row = c->row;
    for (int32_t i = 0; i < sl->n_prefix + sl->n_extras; i++) {
        const sift_candidate *x = i < sl->n_prefix ? &sl->prefix[i] : &sl->extras[i - sl->n_prefix];
        if (memcmp(&row[x->id], &x->logit, sizeof x->logit) != 0)
            return sift__fail_at(err, SIFT_E_HOOK, x->id,
                                 "row disagrees with slice at token %d (%.9g vs %.9g)", (int)x->id,
                                 (double)row[x->id], (double)x->logit);
    }
    /* Exactly the prefix ranks ahead of what the slice leaves out: for a
     * canonical prefix, the tokens at or before its last token in
     * canonical order; for a top-k set, the tokens with a logit above its
     * smallest (the ones tied at the smallest may be any of them). */
    const int canon = (sl->flags & SIFT_SLICE_CANONICAL) != 0;
    uint64_t bkey = 0;
    float lmin = INFINITY;
    int64_t want = sl->n_prefix;
    if (canon) {
        bkey = sift__ckey(sl->prefix[sl->n_prefix - 1].logit, sl->prefix[sl->n_prefix - 1].id);
    } else {
        for (int32_t i = 0; i < sl->n_prefix; i++)
            lmin = sl->prefix[i].logit < lmin ? sl->prefix[i].logit : lmin;
        want = 0;
        for (int32_t i = 0; i < sl->n_prefix; i++)
            want += sl->prefix[i].logit > lmin;
    }
    int64_t ahead = 0;
    int bad = 0;
    for (int32_t i = 0; i < V; i++) {
        float x = row[i];
        bad |= !(x < INFINITY);
        ahead += canon ? sift__ckey(x, i) >= bkey : x > lmin;
    }
    if (bad) {
        for (int32_t i = 0; i < V; i++)
            if (!(row[i] < INFINITY))
                return sift__fail_at(err, SIFT_E_HOOK, i, "row hook's row[%d] is %s", (int)i,
                                     row[i] != row[i] ? "NaN" : "+inf");
    }
    if (ahead != want) {
        uint64_t *m = c->seen;
        for (int32_t i = 0; i < sl->n_prefix; i++)
            seen_test_set(m, sl->prefix[i].id);
        int32_t culprit = -1;
        for (int32_t i = 0; i < V && culprit < 0; i++)
            if ((canon ? sift__ckey(row[i], i) >= bkey : row[i] > lmin) &&
                !(m[i >> 6] & ((uint64_t)1 << (i & 63))))
                culprit = i;
        seen_clear(m, sl->prefix, (size_t)sl->n_prefix);
        return sift__fail_at(err, SIFT_E_HOOK, culprit,
                             canon ? "row disagrees with slice: token %d (logit %.9g) ranks before "
                                     "the prefix's last token but is not in the prefix"
                                   : "row disagrees with slice: token %d (logit %.9g) is above the "
                                     "prefix's smallest logit but is not in the prefix",
                             (int)culprit, culprit >= 0 ? (double)row[culprit] : 0.0);
    }
    return SIFT_OK;
}

static sift_status need_row(sift_chain *c, const sift_slice *sl, const sift__ctx *ctx,
                            sift_error *err)
{
    c->n_need_row++;
    size_t i = ctx->stage < c->n_stages ? ctx->stage : c->n_stages - 1;
    return sift__fail_at(err, SIFT_E_NEED_ROW, (int64_t)i,
                         "a slice of k = %d cannot decide stage %zu (%s) and no row hook is set",
                         (int)sl->n_prefix, i, sift__stage_name(c->stages[i]));
}

static sift_status sample_slice_impl(sift_chain *c, const sift_slice *sl, int32_t *token,
                                     sift_error *err)
{
    if (!sl || !token)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", sl ? "token" : "slice");
    sift__arr a;
    sift__bound b;
    sift_status s = load_slice(c, sl, 1, &a, &b, err);
    if (s)
        return s;
    sift__ctx ctx;
    ctx_init(c, &ctx, sl->n_vocab, err);
    if (sift__walk(c, &ctx, &a, c->n_stages, &b, &s) == SIFT__WALK_DECIDED) {
        if (s)
            return s;
        if (ctx.selected < 0 || ctx.selected >= sl->n_vocab)
            return sift__fail(err, SIFT_E_STATE, "selector %s did not select a token",
                              sift__stage_name(c->stages[c->n_stages - 1]));
        sift__rng rng = ctx.rng;
        int32_t tok = ctx.selected;
        int ok = 1;
        if (c->check && (s = sift_grammar_accepts_token(c->check, tok, &ok, err)))
            return s;
        if (!ok) {
            /* Check mode rejected the token: the bans need the whole row,
             * and the resample continues from this draw's RNG state. */
            if (!c->hook) {
                c->n_need_row++;
                return sift__fail_at(err, SIFT_E_NEED_ROW, tok,
                                     "the check grammar rejects token %d; banning needs the "
                                     "whole row and no row hook is set",
                                     (int)tok);
            }
            if ((s = fetch_row(c, sl, err)) ||
                (s = sift__ws_reserve(&c->ws, &c->al, (size_t)sl->n_vocab, err)) ||
                (s = grammar_check(c, c->row, sl->n_vocab, &rng, &tok, err)))
                return s;
        } else {
            c->n_slice_decided++;
        }
        c->rng = rng;
        c->last_V = sl->n_vocab;
        *token = tok;
        return SIFT_OK;
    }
    if (!c->hook)
        return need_row(c, sl, &ctx, err);
    if ((s = fetch_row(c, sl, err)))
        return s;
    return sample_impl(c, c->row, sl->n_vocab, token, err);
}

static sift_status distribution_slice_impl(sift_chain *c, const sift_slice *sl,
                                           sift_token_prob *out, size_t capacity, size_t *n_out,
                                           sift_error *err)
{
    if (!sl || !n_out || (!out && capacity))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", !sl ? "slice" : (n_out ? "out" : "n_out"));
    sift__arr a;
    sift__bound b;
    sift_status s = load_slice(c, sl, 0, &a, &b, err);
    if (s)
        return s;
    sift__ctx ctx;
    ctx_init(c, &ctx, sl->n_vocab, err);
    size_t end = selector_end(c);
    int w = sift__walk(c, &ctx, &a, end, &b, &s);
    int decided = w == SIFT__WALK_DECIDED;
    if (decided && s)
        return s;
    if (w == SIFT__WALK_RAN && end < c->n_stages && c->stages[end]->ops->is_greedy && a.n > 0) {
        /* Greedy's support is the first token: decided if it is ahead.
         * Only when every stage before it ran: a walk that stopped early
         * leaves the candidates half processed. */
        sift__arr_canon(&ctx, &a);
        if (sift__bound_ahead(&b, &a.c[0])) {
            a.n = 1;
            decided = 1;
        }
    }
    if (decided)
        return finish_distribution(c, &ctx, &a, end, out, capacity, n_out);
    if (!c->hook)
        return need_row(c, sl, &ctx, err);
    if ((s = fetch_row(c, sl, err)))
        return s;
    return distribution_impl(c, c->row, sl->n_vocab, out, capacity, n_out, err);
}

/* The public entry points: refuse re-entry, and mark the chain busy for
 * the whole call, so that any callback (allocator, custom stage) that
 * calls back into it gets SIFT_E_STATE. */
sift_status sift_chain_sample(sift_chain *c, const float *logits, int32_t V, int32_t *token,
                              sift_error *err)
{
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    c->busy = 1;
    s = sample_impl(c, logits, V, token, err);
    c->busy = 0;
    return s;
}

sift_status sift_chain_accept(sift_chain *c, int32_t token, sift_error *err)
{
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    c->busy = 1;
    s = accept_impl(c, token, 0, err);
    c->busy = 0;
    return s;
}

sift_status sift_chain_accept_prompt(sift_chain *c, int32_t token, sift_error *err)
{
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    c->busy = 1;
    s = accept_impl(c, token, 1, err);
    c->busy = 0;
    return s;
}

sift_status sift_chain_distribution(sift_chain *c, const float *logits, int32_t V,
                                    sift_token_prob *out, size_t capacity, size_t *n_out,
                                    sift_error *err)
{
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    c->busy = 1;
    s = distribution_impl(c, logits, V, out, capacity, n_out, err);
    c->busy = 0;
    return s;
}

sift_status sift_chain_sample_slice(sift_chain *c, const sift_slice *slice, int32_t *token,
                                    sift_error *err)
{
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    c->busy = 1;
    sift__xc_step before;
    sift__cross_check_begin(c, token, &before);
    s = sample_slice_impl(c, slice, token, err);
    s = sift__cross_check_end(c, &before, slice, token, s, err);
    c->busy = 0;
    return s;
}

sift_status sift__chain_row_buffer(sift_chain *c, int32_t V, sift_error *err)
{
    return row_buffer(c, V, err);
}

sift_status sift__chain_sample_row(sift_chain *c, const float *row, int32_t V, int32_t *token,
                                   sift_error *err)
{
    return sample_impl(c, row, V, token, err);
}

sift_status sift_chain_distribution_slice(sift_chain *c, const sift_slice *slice,
                                          sift_token_prob *out, size_t capacity, size_t *n_out,
                                          sift_error *err)
{
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    c->busy = 1;
    s = distribution_slice_impl(c, slice, out, capacity, n_out, err);
    c->busy = 0;
    return s;
}

sift_status sift_chain_set_check_grammar(sift_chain *c, sift_grammar *grammar, sift_error *err)
{
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    if (grammar && sift__grammar_owned(grammar))
        return sift__fail(err, SIFT_E_ARG,
                          "grammar is already owned by a chain (as a stage or a check grammar); "
                          "set a sift_grammar_clone of it");
    if (grammar && c->n_vocab && sift__grammar_n_vocab(grammar) != c->n_vocab)
        return sift__fail(err, SIFT_E_ARG, "grammar vocabulary has %d tokens, chain expects %d",
                          (int)sift__grammar_n_vocab(grammar), (int)c->n_vocab);
    if (grammar && sift__grammar_n_vocab(grammar) == 0)
        return sift__fail(err, SIFT_E_ARG, "a check grammar needs a vocabulary");
    sift_grammar_free(c->check);
    c->check = grammar;
    if (grammar)
        sift__grammar_set_owned(grammar);
    return SIFT_OK;
}

sift_status sift_chain_set_row_hook(sift_chain *c, sift_row_hook hook, void *user, sift_error *err)
{
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    c->hook = hook;
    c->hook_user = hook ? user : NULL;
    return SIFT_OK;
}

sift_status sift_chain_stats(const sift_chain *c, sift_stats *st, sift_error *err)
{
    if (!c || !st)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", c ? "stats" : "chain");
    sift_status s = sift__check_struct_size(err, "sift_stats", st->struct_size, sizeof *st);
    if (s)
        return s;
    /* Filled in full, then copied up to the caller's size (an older,
     * smaller sift_stats gets only the counters it has). */
    sift_stats full;
    memset(&full, 0, sizeof full);
    full.struct_size = st->struct_size;
    full.slice_decided = c->n_slice_decided;
    full.hook_calls = c->n_hook_calls;
    full.need_row = c->n_need_row;
    full.row_prefix_decided = c->n_prefix_decided;
    full.row_prefix_fallback = c->n_prefix_fallback;
    full.grammar_resamples = c->n_grammar_resamples;
    full.cross_checks = c->n_xc;
    full.cross_check_mismatches = c->n_xc_mismatch;
    full.cross_check_skipped = c->n_xc_skipped;
    memcpy(st, &full, st->struct_size);
    return SIFT_OK;
}

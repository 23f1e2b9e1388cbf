/*
 * chain.c - the sampler chain's lifecycle: construction, stages, clone,
 * reset, the version, the row hook and the statistics.
 *
 * The step is in step.c (the row: sample, accept, distribution), the
 * slice step in slice_step.c, the scratch buffers in workspace.c.
 *
 * Invariants:
 * - A chain's stages are appended one at a time and each append is all or
 *   nothing; a chain never holds a half-built stage.
 * - The busy rule: `busy` counts the holds on the chain. Every public
 *   entry point that takes a chain calls sift__chain_enter before it
 *   reads or writes anything, and refuses a busy chain with SIFT_E_STATE
 *   (the getters sift.h names as safe excepted). Every entry point that
 *   may run caller code on the chain's behalf (the row hook, a custom
 *   stage's callbacks, the free of a grammar it owns) holds the chain
 *   for the whole call (SIFT__CHAIN_CALL); the chain's allocator holds
 *   it for each call into a caller's allocator (sift__alloc.hold), which
 *   covers the entry points whose only caller code is the allocator (the
 *   _add functions). Functions on a const chain (clone, plan, next_k)
 *   check but never hold: many threads may call them on one chain at
 *   once, and a write would be a data race. They change nothing, so a
 *   callback they run (clone's) finds the chain whole; sift.h says such
 *   a callback must not change it.
 */
#include <math.h>

#include "../sift_internal.h"

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
    c->al.hold = &c->busy;
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
    /* A busy chain is in use by the call whose callback this is: freeing
     * it would pull it from under that call, so it is left alone. */
    if (!c || c->busy)
        return;
    /* Held while the stages' and the checker's destructors (caller code
     * for a custom stage, a grammar's allocator) run, with the stages and
     * the checker detached first, so that a getter called from one of
     * them sees an empty chain, never a freed stage. The last free, of
     * the chain's own block, goes through a copy of the allocator that
     * holds nothing. */
    sift__chain_hold(c);
    sift__alloc al = c->al;
    sift__stage **stages = c->stages;
    size_t n = c->n_stages;
    const sift__checker_ops *check_ops = c->check_ops;
    void *check = c->check;
    c->stages = NULL;
    c->n_stages = c->cap_stages = 0;
    c->check_ops = NULL;
    c->check = NULL;
    for (size_t i = 0; i < n; i++)
        stage_free(stages[i], &al);
    sift__free(&al, stages);
    sift__ws_free(&c->ws, &al);
    sift__free(&al, c->row);
    sift__free(&al, c->seen);
    sift_workspace *w = c->workspace;
    c->workspace = NULL;
    sift__workspace_unref(w);
    sift__free(&al, c->lp_set);
    if (check_ops)
        check_ops->destroy(check);
    c->magic = 0xDEADu;
    al.hold = NULL;
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

sift_status sift__chain_enter(const sift_chain *chain, sift_error *err)
{
    if (!chain)
        return sift__fail(err, SIFT_E_ARG, "chain is NULL");
    if (chain->busy)
        return sift__fail(err, SIFT_E_STATE, "chain is busy (called from one of its callbacks)");
    return SIFT_OK;
}

void sift__chain_hold(sift_chain *chain)
{
    chain->busy++;
}

void sift__chain_release(sift_chain *chain)
{
    chain->busy--;
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
        sift__stage **s = sift__calloc(&c->al, cap, sizeof *s);
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
    sift__plan_cache(c);
    return SIFT_OK;
}

sift_status sift_chain_clone(const sift_chain *c, sift_chain **out, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    return sift__chain_clone(c, out, err);
}

sift_status sift__chain_clone(const sift_chain *c, sift_chain **out, sift_error *err)
{
    /* The source is const (clones may run on many threads at once): the
     * copy is made through an allocator that holds no counter; the new
     * chain's own allocator holds the new chain. */
    sift__alloc al = c->al;
    al.hold = NULL;
    sift_chain *d = sift__calloc(&al, 1, sizeof *d);
    if (!d)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while cloning a chain");
    *d = *c;
    d->busy = 0;
    d->al.hold = &d->busy;
    d->stages = NULL;
    d->n_stages = d->cap_stages = 0;
    memset(&d->ws, 0, sizeof d->ws);
    d->hook = NULL;
    d->hook_user = NULL;
    d->row = NULL;
    d->row_cap = 0;
    d->lp_set = NULL;
    d->lp_cap = 0;
    d->seen = NULL;
    d->seen_cap = 0;
    d->seen_gen = 0;
    d->workspace = NULL; /* scratch is not state: a clone has its own */
    d->check_ops = NULL;
    d->check = NULL;
    d->n_grammar_resamples = 0;
    d->n_walks = d->n_full_passes = 0;
    d->n_slice_decided = d->n_hook_calls = d->n_need_row = 0;
    d->n_prefix_decided = d->n_prefix_fallback = 0;
    d->n_xc = d->n_xc_mismatch = d->n_xc_skipped = 0;
    if (c->n_stages) {
        d->stages = sift__calloc(&al, c->n_stages, sizeof *d->stages);
        if (!d->stages) {
            sift__free(&al, d);
            return sift__fail(err, SIFT_E_NOMEM, "out of memory while cloning a chain");
        }
        d->cap_stages = c->n_stages;
    }
    for (size_t i = 0; i < c->n_stages; i++) {
        const sift__stage *st = c->stages[i];
        sift__stage *copy = NULL;
        sift_status s = st->ops->clone ? st->ops->clone(st, &copy, &d->al, err)
                                       : sift__stage_clone_flat(st, &copy, &d->al, err);
        if (s != SIFT_OK) {
            sift_chain_free(d);
            return s;
        }
        d->stages[d->n_stages++] = copy;
    }
    if (c->check_ops) {
        void *copy = NULL;
        sift_status s = c->check_ops->clone(c->check, &copy, err);
        if (s != SIFT_OK) {
            sift_chain_free(d);
            return s;
        }
        sift__chain_set_checker(d, c->check_ops, copy);
    }
    *out = d;
    return SIFT_OK;
}

void sift_chain_reset(sift_chain *c)
{
    if (sift__chain_enter(c, NULL))
        return;          /* NULL or busy: nothing to do, nothing changed */
    sift__chain_hold(c); /* a custom stage's reset is caller code */
    sift__rng_seed(&c->rng, c->seed);
    c->settle_due = 0;
    c->tail_skip = c->tail_fails = 0;
    c->arr_skip = c->arr_fails = 0;
    c->fx_skip = c->fx_fails = 0;
    if (c->check_ops)
        c->check_ops->reset(c->check);
    for (size_t i = 0; i < c->n_stages; i++)
        if (c->stages[i]->ops->reset)
            c->stages[i]->ops->reset(c->stages[i]);
    sift__chain_release(c);
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
    if (c->check_ops)
        h = c->check_ops->digest(c->check, h);
    return h;
}

void sift__chain_set_checker(sift_chain *c, const sift__checker_ops *ops, void *self)
{
    if (c->check_ops)
        c->check_ops->destroy(c->check);
    c->check_ops = ops;
    c->check = ops ? self : NULL;
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

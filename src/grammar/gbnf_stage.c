/*
 * gbnf_stage.c - a grammar as a chain stage ("grammar", constrain mode).
 *
 * apply bans (sets to -inf) every candidate the grammar rejects in its
 * current state and removes nothing; accept advances the grammar. The
 * stage owns its grammar. Capability class: LOWERS with n = -1
 * (unbounded): it only ever lowers logits, but how many depends on the
 * state, so a slice must be certified per step (DESIGN.md §4). A lazy
 * grammar that has not triggered lowers nothing, so its dynamic n
 * (ops->lowers with dynamic = 1) is 0; its static n stays unbounded.
 * When the grammar allows only a few tokens (SIFT__GRAMMAR_SMALL), it
 * names them (ops->allowed): the chain asks for them as extras, and a
 * slice that holds them all decides the step (docs/analyzer.md, "Forced
 * tokens").
 *
 * The stage owns its grammar from a successful add on (it is marked
 * owned, so a second add of the same object, here or to another chain,
 * or as a check grammar, is refused instead of freeing it twice).
 *
 * accept cannot fail in the stage interface. A chain makes it all or
 * nothing by calling every stage's prepare_accept (here
 * sift__grammar_prepare_accept) first (it rejects the token or caches every transition the accept
 * follows). If a token the grammar rejects still reaches accept, the
 * grammar keeps its state and the next apply reports the rejection
 * (SIFT_E_GRAMMAR_REJECT) until the chain is reset.
 */
#include "gbnf.h"

typedef struct gstage {
    sift__stage base;
    sift_grammar *g;
    int32_t rejected; /* token a failed accept saw, -1 = none */
} gstage;

static sift_status gs_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    gstage *s = (gstage *)st;
    if (s->rejected >= 0)
        return sift__fail_at(ctx->err, SIFT_E_GRAMMAR_REJECT, s->rejected,
                             "stage %zu (grammar): token %d was accepted by the chain but the "
                             "grammar rejects it; reset the chain",
                             ctx->stage, (int)s->rejected);
    return sift__grammar_ban_arr(s->g, a, ctx->err);
}

static void gs_accept(sift__stage *st, int32_t token)
{
    gstage *s = (gstage *)st;
    if (s->rejected >= 0)
        return;
    if (sift_grammar_accept_token(s->g, token, NULL) != SIFT_OK)
        s->rejected = token;
}

static void gs_reset(sift__stage *st)
{
    gstage *s = (gstage *)st;
    sift_grammar_reset(s->g);
    s->rejected = -1;
}

static const sift__stage_ops gs_ops;

static sift_status gs_clone(const sift__stage *st, sift__stage **out, const sift__alloc *al,
                            sift_error *err)
{
    const gstage *s = (const gstage *)st;
    gstage *c = (gstage *)sift__stage_alloc(al, &gs_ops, sizeof *c);
    if (!c)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while cloning a grammar stage");
    sift_status r = sift_grammar_clone(s->g, &c->g, err);
    if (r) {
        sift__free(al, c);
        return r;
    }
    sift__grammar_set_owned(c->g);
    c->rejected = s->rejected;
    *out = &c->base;
    return SIFT_OK;
}

/* The verification shadow (core/verify.c): dst is a clone of a stage
 * of the same grammar. */
static sift_status gs_sync(sift__stage *dst, const sift__stage *src, sift_error *err)
{
    gstage *d = (gstage *)dst;
    const gstage *s = (const gstage *)src;
    sift_status r = sift__grammar_sync(d->g, s->g, err);
    if (r == SIFT_OK)
        d->rejected = s->rejected;
    return r;
}

static void gs_destroy(sift__stage *st, const sift__alloc *al)
{
    (void)al;
    /* g is NULL while the stage is being added: a failed push frees the
     * stage block but the grammar stays the caller's */
    sift_grammar_free(((gstage *)st)->g);
}

static sift_class gs_cls(const sift__stage *st, int64_t *n)
{
    (void)st;
    *n = -1;
    return SIFT_CLASS_LOWERS;
}

/* The analyzer's n: unbounded from the configuration alone (a lazy
 * grammar may trigger at any step), but an untriggered lazy grammar
 * lowers nothing this step (DESIGN.md §4, dynamic k). */
static int64_t gs_lowers(const sift__stage *st, int dynamic)
{
    const gstage *s = (const gstage *)st;
    if (dynamic && s->rejected < 0 && !sift_grammar_is_triggered(s->g))
        return 0;
    return -1;
}

/* The few tokens the grammar allows now (forced tokens), for the slice
 * path: a runtime copies them as extras, and once they are all present
 * every absent token is banned. */
static size_t gs_allowed(sift__stage *st, const int32_t **ids)
{
    gstage *s = (gstage *)st;
    *ids = NULL;
    if (s->rejected >= 0)
        return SIZE_MAX;
    return sift__grammar_small_set(s->g, ids);
}

static int64_t gs_max_extras(const sift__stage *st)
{
    (void)st;
    return SIFT__GRAMMAR_SMALL;
}

static int32_t gs_max_token(const sift__stage *st)
{
    return sift__grammar_n_vocab(((const gstage *)st)->g) - 1;
}

/* The fallible half of accept (sift__stage_ops.prepare_accept): the
 * chain calls it on every stage before any accept, so a token the grammar
 * rejects leaves the whole chain unchanged. */
static sift_status gs_prepare_accept(sift__stage *st, int32_t token, sift_error *err)
{
    return sift__grammar_prepare_accept(((gstage *)st)->g, token, err);
}

static int32_t gs_n_vocab(const sift__stage *st)
{
    return sift__grammar_n_vocab(((const gstage *)st)->g);
}

/* Lists the allowed set ahead of the step that asks for it as extras, so
 * that an allocation failure is that step's SIFT_E_NOMEM. */
static sift_status gs_prepare_allowed(sift__stage *st, sift_error *err)
{
    return sift__grammar_small_prepare(((gstage *)st)->g, err);
}

static uint64_t gs_digest(const sift__stage *st, uint64_t h)
{
    const gstage *s = (const gstage *)st;
    h = sift__fnv(h, &s->rejected, sizeof s->rejected);
    return sift__grammar_digest(s->g, h);
}

static const sift__stage_ops gs_ops = {
    .name = "grammar",
    .apply = gs_apply,
    .cls = gs_cls,
    .n_vocab = gs_n_vocab,
    .max_token = gs_max_token,
    .lowers = gs_lowers,
    .max_extras = gs_max_extras,
    .allowed = gs_allowed,
    .prepare_allowed = gs_prepare_allowed,
    .prepare_accept = gs_prepare_accept,
    .accept = gs_accept,
    .generated_only = 1,
    .reset = gs_reset,
    .digest = gs_digest,
    .clone = gs_clone,
    .sync = gs_sync,
    .destroy = gs_destroy,
};

sift_grammar *sift__grammar_of_stage(sift__stage *st)
{
    return st && st->ops == &gs_ops ? ((gstage *)st)->g : NULL;
}

sift_status sift_chain_add_grammar(sift_chain *chain, sift_grammar *grammar, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if (!grammar)
        return sift__fail(err, SIFT_E_ARG, "grammar is NULL");
    if (sift__grammar_owned(grammar))
        return sift__fail(err, SIFT_E_ARG,
                          "grammar is already owned by a chain (as a stage or a check grammar); "
                          "add a sift_grammar_clone of it");
    if (sift__grammar_n_vocab(grammar) < 1)
        return sift__fail(err, SIFT_E_ARG,
                          "a grammar stage needs a grammar built with a vocabulary");
    if (chain->n_vocab && sift__grammar_n_vocab(grammar) != chain->n_vocab)
        return sift__fail(err, SIFT_E_ARG, "grammar vocabulary has %d tokens, chain expects %d",
                          (int)sift__grammar_n_vocab(grammar), (int)chain->n_vocab);
    gstage *g = (gstage *)sift__stage_alloc(sift__chain_alloc(chain), &gs_ops, sizeof *g);
    if (!g)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding a grammar stage");
    g->g = NULL;
    g->rejected = -1;
    /* sift__chain_push frees the stage on failure, so the grammar is
     * attached only once the push succeeded */
    s = sift__chain_push(chain, &g->base, err);
    if (s)
        return s;
    g->g = grammar;
    sift__grammar_set_owned(grammar);
    return SIFT_OK;
}

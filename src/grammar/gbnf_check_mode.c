/*
 * gbnf_check_mode.c - a grammar as the chain's checker (check mode,
 * sift_chain_set_check_grammar).
 *
 * Check mode lets the chain draw from the row as it is and asks the
 * grammar afterwards; only a refused token costs the bans and a second
 * draw (docs/analyzer.md, "Check mode"). The core runs that logic once,
 * for the row step and the slice step alike (core/step.c,
 * sift__check_mode), through the sift__checker_ops below, so it calls
 * nothing of the grammar module by name.
 *
 * Ownership: the chain owns the grammar from a successful set on (it is
 * marked owned, so it cannot also be a stage or another chain's check
 * grammar); replacing or clearing it, or freeing the chain, frees it.
 */
#include "gbnf.h"

static sift_status ck_accepts(void *self, int32_t token, int *ok, sift_error *err)
{
    return sift_grammar_accepts_token(self, token, ok, err);
}

static sift_status ck_ban(void *self, float *row, int32_t V, sift_error *err)
{
    return sift_grammar_ban(self, row, V, err);
}

static sift_status ck_prepare_accept(void *self, int32_t token, sift_error *err)
{
    return sift__grammar_prepare_accept(self, token, err);
}

static sift_status ck_accept(void *self, int32_t token, sift_error *err)
{
    return sift_grammar_accept_token(self, token, err);
}

static void ck_reset(void *self)
{
    sift_grammar_reset(self);
}

static sift_status ck_clone(const void *self, void **out, sift_error *err)
{
    sift_grammar *g = NULL;
    sift_status s = sift_grammar_clone(self, &g, err);
    if (s)
        return s;
    sift__grammar_set_owned(g);
    *out = g;
    return SIFT_OK;
}

static sift_status ck_sync(void *self, const void *from, sift_error *err)
{
    return sift__grammar_sync(self, from, err);
}

static void ck_destroy(void *self)
{
    sift_grammar_free(self);
}

static uint64_t ck_digest(const void *self, uint64_t h)
{
    return sift__grammar_digest(self, h);
}

static int32_t ck_n_vocab(const void *self)
{
    return sift__grammar_n_vocab(self);
}

static const sift__checker_ops check_ops = {
    .name = "check grammar",
    .accepts = ck_accepts,
    .ban = ck_ban,
    .prepare_accept = ck_prepare_accept,
    .accept = ck_accept,
    .reset = ck_reset,
    .clone = ck_clone,
    .destroy = ck_destroy,
    .sync = ck_sync,
    .digest = ck_digest,
    .n_vocab = ck_n_vocab,
};

static sift_status set_check_grammar(sift_chain *c, sift_grammar *grammar, sift_error *err)
{
    if (grammar && sift__grammar_owned(grammar))
        return sift__fail(err, SIFT_E_ARG,
                          "grammar is already owned by a chain (as a stage or a check grammar); "
                          "set a sift_grammar_clone of it");
    if (grammar && c->n_vocab && sift__grammar_n_vocab(grammar) != c->n_vocab)
        return sift__fail(err, SIFT_E_ARG, "grammar vocabulary has %d tokens, chain expects %d",
                          (int)sift__grammar_n_vocab(grammar), (int)c->n_vocab);
    if (grammar && sift__grammar_n_vocab(grammar) == 0)
        return sift__fail(err, SIFT_E_ARG, "a check grammar needs a vocabulary");
    if (grammar)
        sift__grammar_set_owned(grammar);
    sift__chain_set_checker(c, grammar ? &check_ops : NULL, grammar);
    return SIFT_OK;
}

/* Holds the chain: the previous check grammar is freed through its own
 * allocator (caller code). */
sift_status sift_chain_set_check_grammar(sift_chain *c, sift_grammar *grammar, sift_error *err)
{
    SIFT__CHAIN_CALL(c, err, set_check_grammar(c, grammar, err));
}

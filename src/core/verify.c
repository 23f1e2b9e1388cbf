/*
 * verify.c - speculative decoding: planning and verifying n drafts in one
 * call (docs/analyzer.md, "Speculative verification").
 *
 * Verifying is the sequential loop itself: sample position i, accept the
 * token, go on while it equals draft i. It runs the chain's own sample
 * and accept, so the chain ends exactly as that loop leaves it; the only
 * addition is the row hook, which is told the position (a trampoline is
 * installed as the chain's hook for the call and the caller's restored
 * on every path).
 *
 * Planning needs the state after drafts 0..i-1 without touching the
 * chain. A verifier holds a shadow: a clone of the chain made once
 * (sift_verifier_new), re-synced from the chain on every call without
 * allocating (the chain's RNG and counters by assignment, a flat stage
 * by memcpy of its block, which is a deep copy by the stage contract,
 * any other stage by its ops->sync), then advanced by accepting the
 * drafts. A stage without sync (a custom stage) makes the shadow unable
 * to stand for the chain: positions after the first get k = 0, which is
 * always sound. The check grammar is synced too (the analyzer does not
 * read it, but accepting a draft it rejects fails on the chain as on the
 * shadow). The shadow has no hook of its own.
 *
 * Invariants: plan and distributions never change the chain's matching
 * state (only the caches sift_chain_extras fills); verify changes it
 * only through sample and accept. The busy rule (core/chain.c): every
 * entry point here checks the verifier and the chain before it reads
 * either, and holds the verifier, its shadow and the chain (every one of
 * a batch) for the whole call, which may run the row hook, custom stages
 * and allocators; the chain and the shadow are then run through the
 * bodies of the public calls (sift__accept, ...), never the calls
 * themselves.
 */
#include "../sift_internal.h"
#include "step.h"

#define VERIFIER_MAGIC 0x56455246u /* "VERF" */
#define MAX_DRAFTS 4096

struct sift_verifier {
    uint32_t magic;
    sift__alloc al;
    sift_chain *shadow; /* NULL: the chain could not be cloned */
    int32_t max_drafts;
    size_t max_extras; /* per position */
    int32_t *extras;   /* (max_drafts + 1) * max_extras ids */
    size_t n_stages;   /* the layout the shadow was made for */
    int busy;          /* holds, as sift_chain.busy */
};

/* The row hook of a verify call: the caller's positional hook, or the
 * chain's own one, with the position of the step being sampled. */
typedef struct hook_tramp {
    sift_row_hook_at at;
    void *at_user;
    sift_row_hook plain;
    void *plain_user;
    int32_t position;
} hook_tramp;

static int tramp_call(void *user, float *row, int32_t n_vocab)
{
    hook_tramp *t = (hook_tramp *)user;
    if (t->at)
        return t->at(t->at_user, t->position, row, n_vocab);
    return t->plain ? t->plain(t->plain_user, row, n_vocab) : 1;
}

void sift_verify_args_init(sift_verify_args *a)
{
    if (!a)
        return;
    memset(a, 0, sizeof *a);
    a->struct_size = sizeof *a;
}

/* ------------------------------------------------------------------ */
/* The verifier and its shadow                                         */
/* ------------------------------------------------------------------ */

static sift_status verifier_new(sift_verifier **out, sift_chain *chain, int32_t max_drafts,
                                sift_error *err)
{
    sift_status s;
    if (max_drafts < 1 || max_drafts > MAX_DRAFTS)
        return sift__fail(err, SIFT_E_ARG, "max_drafts = %d is outside [1, %d]", (int)max_drafts,
                          MAX_DRAFTS);
    const sift__alloc *al = &chain->al;
    sift_verifier *v = sift__calloc(al, 1, sizeof *v);
    if (!v)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while creating a verifier");
    v->magic = VERIFIER_MAGIC;
    v->al = *al;
    v->al.hold = &v->busy;
    v->max_drafts = max_drafts;
    v->n_stages = chain->n_stages;
    int64_t me = sift__chain_max_extras(chain);
    v->max_extras = me > 0 ? (size_t)me : 0;
    if (v->max_extras) {
        v->extras = sift__malloc(al, ((size_t)max_drafts + 1) * v->max_extras, sizeof *v->extras);
        if (!v->extras) {
            sift__free(al, v);
            return sift__fail(err, SIFT_E_NOMEM, "out of memory while creating a verifier");
        }
    }
    sift_error ce;
    s = sift__chain_clone(chain, &v->shadow, &ce);
    if (s == SIFT_E_NOMEM) {
        sift__free(al, v->extras);
        sift__free(al, v);
        if (err)
            *err = ce;
        return s;
    }
    if (s != SIFT_OK)
        v->shadow = NULL; /* a custom stage without clone: no shadow */
    *out = v;
    return SIFT_OK;
}

/* Holds the chain: cloning it runs its custom stages' clone functions. */
sift_status sift_verifier_new(sift_verifier **out, sift_chain *chain, int32_t max_drafts,
                              sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    SIFT__CHAIN_CALL(chain, err, verifier_new(out, chain, max_drafts, err));
}

void sift_verifier_free(sift_verifier *v)
{
    /* A busy verifier is in use by the call whose callback this is. */
    if (!v || v->busy || v->magic != VERIFIER_MAGIC)
        return;
    /* Held while the allocator frees the shadow and the extras; the last
     * free, of v itself, goes through a copy that holds nothing. */
    v->busy++;
    sift_chain_free(v->shadow);
    v->shadow = NULL;
    sift__free(&v->al, v->extras);
    v->extras = NULL;
    sift__alloc al = v->al;
    al.hold = NULL;
    v->magic = 0;
    sift__free(&al, v);
}

/* The entry check of a verifier call, before anything is read: a live,
 * idle verifier and an idle chain of its layout. */
static sift_status check_verifier(const sift_verifier *v, const sift_chain *c, sift_error *err)
{
    if (v && v->busy) /* (up to the last free of sift_verifier_free) */
        return sift__fail(err, SIFT_E_STATE, "verifier is busy (called from one of its callbacks)");
    if (!v || v->magic != VERIFIER_MAGIC)
        return sift__fail(err, SIFT_E_ARG, "verifier is %s", v ? "not a live verifier" : "NULL");
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    if (c->n_stages != v->n_stages)
        return sift__fail(err, SIFT_E_ARG,
                          "chain has %zu stages, the verifier was made for a chain of %zu",
                          c->n_stages, v->n_stages);
    return SIFT_OK;
}

/* Holds (hold = 1) or releases (hold = 0) a verifier, its shadow and
 * the chain of a call. The chain of sift_verifier_distributions is
 * const to its caller but is held as any chain whose hook runs (a
 * chain is heap memory, never a const object). */
static void hold_all(sift_verifier *v, const sift_chain *c, int hold)
{
    sift_chain *m = (sift_chain *)(uintptr_t)c;
    if (hold) {
        v->busy++;
        sift__chain_hold(m);
        if (v->shadow)
            sift__chain_hold(v->shadow);
    } else {
        v->busy--;
        sift__chain_release(m);
        if (v->shadow)
            sift__chain_release(v->shadow);
    }
}

/* Re-syncs the shadow from `c`. Returns SIFT_OK and *ok = 1 when the
 * shadow now stands for the chain, *ok = 0 when a stage cannot be copied
 * (*which = its index); an error only for SIFT_E_NOMEM. */
static sift_status sync_shadow(sift_verifier *v, const sift_chain *c, int *ok, size_t *which,
                               sift_error *err)
{
    *ok = 0;
    *which = 0;
    sift_chain *d = v->shadow;
    if (!d)
        return SIFT_OK;
    for (size_t i = 0; i < c->n_stages; i++) {
        const sift__stage *src = c->stages[i];
        sift__stage *dst = d->stages[i];
        if (dst->ops != src->ops || dst->size != src->size)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "stage %zu (%s) differs from the verifier's chain", i,
                                 sift__stage_name(src));
    }
    d->rng = c->rng;
    d->seed = c->seed;
    d->last_V = c->last_V;
    d->settle_due = c->settle_due;
    for (size_t i = 0; i < c->n_stages; i++) {
        const sift__stage *src = c->stages[i];
        sift__stage *dst = d->stages[i];
        if (!src->ops->clone) {
            memcpy(dst, src, src->size);
            continue;
        }
        if (!src->ops->sync) {
            *which = i;
            return SIFT_OK;
        }
        sift_status s = src->ops->sync(dst, src, NULL);
        if (s == SIFT_E_NOMEM)
            return sift__fail_at(err, s, (int64_t)i,
                                 "out of memory while copying stage %zu (%s) into the shadow", i,
                                 sift__stage_name(src));
        if (s) {
            *which = i;
            return SIFT_OK;
        }
    }
    /* The check grammar: accepting a draft it rejects fails, as on the
     * chain (the positions after it are unreachable). A chain that has
     * set another check grammar since gets a clone of it (allocates). */
    if (c->check) {
        sift_status s = SIFT_E_ARG;
        if (d->check && d->check_ops == c->check_ops && c->check_ops->sync)
            s = c->check_ops->sync(d->check, c->check, NULL);
        if (s == SIFT_E_ARG) {
            void *cl = NULL;
            s = c->check_ops->clone ? c->check_ops->clone(c->check, &cl, NULL) : SIFT_E_ARG;
            sift__chain_set_checker(d, s == SIFT_OK ? c->check_ops : NULL, cl);
        }
        if (s == SIFT_E_NOMEM)
            return sift__fail(err, SIFT_E_NOMEM,
                              "out of memory while copying the check grammar into the shadow");
        if (s)
            return SIFT_OK;
    } else if (d->check) {
        sift__chain_set_checker(d, NULL, NULL);
    }
    *ok = 1;
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* Planning                                                            */
/* ------------------------------------------------------------------ */

/* Writes step i of the caller's array (elements of `stride` bytes). */
static void put_step(void *base, size_t stride, size_t i, const sift_verify_step *full)
{
    sift_verify_step t = *full;
    t.struct_size = (uint32_t)stride;
    memcpy((char *)base + i * stride, &t, stride);
}

/* k and extras of `c` in its current state into *st. A grammar that
 * cannot list its allowed tokens within its budget sends the position
 * to the whole row (as the row path does); out of memory is an error. */
static sift_status plan_here(sift_chain *c, int32_t *ids, size_t cap, sift_verify_step *st,
                             sift_error *err)
{
    st->k = sift__chain_next_k(c);
    st->n_extras = 0;
    st->extras = ids;
    if (st->k == 0)
        return SIFT_OK;
    sift_status ps = sift__chain_prepare_extras(c, NULL);
    if (ps == SIFT_E_NOMEM)
        return sift__fail(err, SIFT_E_NOMEM,
                          "out of memory while listing a grammar's allowed tokens");
    if (ps) {
        st->k = 0;
        return SIFT_OK;
    }
    size_t n = sift__chain_extras(c, ids, cap);
    if (n > cap) { /* cannot happen: extras are bounded by max_extras */
        st->k = 0;
        n = 0;
    }
    st->n_extras = (int32_t)n;
    return SIFT_OK;
}

/* Accepts a draft on the shadow: 1 taken, 0 rejected by a grammar stage
 * (the position after it is unreachable), or an error status (< 0 never;
 * *s set). */
static int shadow_accept(sift_chain *d, int32_t token, sift_status *s, sift_error *err)
{
    sift_error e;
    d->settle_due = 1; /* each position's dynamic plan reads the settled state */
    *s = sift__accept(d, token, 0, &e);
    if (*s == SIFT_OK)
        return 1;
    if (*s == SIFT_E_GRAMMAR_REJECT) {
        *s = SIFT_OK;
        return 0;
    }
    if (err)
        *err = e;
    return 0;
}

/* Position i's extras buffer (NULL for a chain that never has extras). */
static int32_t *pos_extras(const sift_verifier *v, int32_t i)
{
    return v->extras ? v->extras + (size_t)i * v->max_extras : NULL;
}

/* One slot's plan; the caller has checked and holds v and c. */
static sift_status plan_impl(sift_verifier *v, sift_chain *c, const int32_t *drafts, int32_t n,
                             sift_verify_step *steps, sift_error *err)
{
    sift_status s;
    if (!steps || (n > 0 && !drafts))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", steps ? "drafts" : "steps");
    if (n < 0 || n > v->max_drafts)
        return sift__fail(err, n < 0 ? SIFT_E_ARG : SIFT_E_LIMIT,
                          "n_drafts = %d is outside [0, %d] (the verifier's max_drafts)", (int)n,
                          (int)v->max_drafts);
    uint32_t stride = steps[0].struct_size;
    if ((s = sift__check_struct_size(err, "sift_verify_step", stride, sizeof *steps)))
        return s;
    int32_t lim = c->n_vocab ? c->n_vocab : (c->last_V ? c->last_V : c->max_vocab);
    for (int32_t i = 0; i < n; i++)
        if (drafts[i] < 0 || drafts[i] >= lim)
            return sift__fail_at(err, SIFT_E_TOKEN, i, "drafts[%d] = %d is outside [0, %d)", (int)i,
                                 (int)drafts[i], (int)lim);
    sift_verify_step st;
    memset(&st, 0, sizeof st);
    int32_t k_static = (int32_t)sift__plan_prefix_k(c);
    uint32_t base_flags = c->check ? SIFT_VERIFY_CHECK_GRAMMAR : 0;
    st.k_static = k_static;
    st.flags = base_flags;
    if ((s = plan_here(c, v->extras, v->max_extras, &st, err)))
        return s;
    put_step(steps, stride, 0, &st);
    if (n == 0)
        return SIFT_OK;
    int ok = 0;
    size_t which = 0;
    if ((s = sync_shadow(v, c, &ok, &which, err)))
        return s;
    int reachable = 1;
    for (int32_t i = 1; i <= n; i++) {
        memset(&st, 0, sizeof st);
        st.k_static = k_static;
        st.flags = base_flags;
        st.extras = pos_extras(v, i);
        if (!ok) {
            st.flags |= SIFT_VERIFY_NO_SHADOW;
        } else {
            if (reachable) {
                reachable = shadow_accept(v->shadow, drafts[i - 1], &s, err);
                if (s)
                    return s;
            }
            if (!reachable)
                st.flags |= SIFT_VERIFY_UNREACHABLE;
            else if ((s = plan_here(v->shadow, pos_extras(v, i), v->max_extras, &st, err)))
                return s;
        }
        put_step(steps, stride, (size_t)i, &st);
    }
    return SIFT_OK;
}

sift_status sift_verifier_plan(sift_verifier *v, sift_chain *c, const int32_t *drafts, int32_t n,
                               sift_verify_step *steps, sift_error *err)
{
    sift_status s = check_verifier(v, c, err);
    if (s)
        return s;
    hold_all(v, c, 1);
    s = plan_impl(v, c, drafts, n, steps, err);
    hold_all(v, c, 0);
    return s;
}

sift_status sift_verifiers_plan(sift_verifier *const *vs, sift_chain *const *chains,
                                const int32_t *const *drafts, const int32_t *n_drafts,
                                size_t n_slots, sift_verify_step *const *steps, int32_t *k_max,
                                sift_error *err)
{
    if (!k_max || (n_slots && (!vs || !chains || !drafts || !n_drafts || !steps)))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", !k_max ? "k_max" : "an array argument");
    *k_max = 0;
    int32_t best = 0;
    /* Every slot is checked, then every slot held, before any is planned:
     * a callback of one slot finds the others busy too. */
    for (size_t j = 0; j < n_slots; j++) {
        sift_status s = check_verifier(vs[j], chains[j], err);
        if (s) {
            if (err)
                err->index = (int64_t)j;
            return s;
        }
    }
    for (size_t j = 0; j < n_slots; j++)
        hold_all(vs[j], chains[j], 1);
    sift_status s = SIFT_OK;
    for (size_t j = 0; j < n_slots && !s; j++) {
        s = plan_impl(vs[j], chains[j], drafts[j], n_drafts[j], steps[j], err);
        if (s) {
            if (err)
                err->index = (int64_t)j;
            break;
        }
        uint32_t stride = steps[j][0].struct_size;
        for (int32_t i = 0; i <= n_drafts[j]; i++) {
            sift_verify_step t;
            memset(&t, 0, sizeof t);
            memcpy(&t, (const char *)steps[j] + (size_t)i * stride, stride);
            if (t.k > best)
                best = t.k;
        }
    }
    for (size_t j = 0; j < n_slots; j++)
        hold_all(vs[j], chains[j], 0);
    *k_max = best;
    return s;
}

/* ------------------------------------------------------------------ */
/* Verifying                                                           */
/* ------------------------------------------------------------------ */

static sift_status check_args(const sift_verify_args *a, sift_verify_args *full, sift_error *err)
{
    if (!a)
        return sift__fail(err, SIFT_E_ARG, "args is NULL");
    sift_status s = sift__check_struct_size(err, "sift_verify_args", a->struct_size, sizeof *a);
    if (s)
        return s;
    sift_verify_args_init(full);
    memcpy(full, a, a->struct_size);
    if (full->n_drafts < 0)
        return sift__fail(err, SIFT_E_ARG, "n_drafts = %d is negative", (int)full->n_drafts);
    if (full->n_drafts > 0 && !full->drafts)
        return sift__fail(err, SIFT_E_ARG, "drafts is NULL");
    if (!full->slices == !full->rows)
        return sift__fail(err, SIFT_E_ARG, "give exactly one of args.slices and args.rows (%s)",
                          full->slices ? "both are set" : "neither is set");
    if (full->flags & ~(uint32_t)SIFT_VERIFY_KEEP_LAST)
        return sift__fail(err, SIFT_E_ARG, "args.flags has unknown bits 0x%x",
                          (unsigned)(full->flags & ~(uint32_t)SIFT_VERIFY_KEEP_LAST));
    for (int32_t i = 0; i < full->n_drafts; i++)
        if (full->drafts[i] < 0)
            return sift__fail_at(err, SIFT_E_TOKEN, i, "drafts[%d] = %d is negative", (int)i,
                                 (int)full->drafts[i]);
    return SIFT_OK;
}

static sift_status verify(sift_chain *c, const sift_verify_args *args, sift_verify_result *res,
                          sift_error *err)
{
    sift_status s;
    if (!res)
        return sift__fail(err, SIFT_E_ARG, "result is NULL");
    if ((s = sift__check_struct_size(err, "sift_verify_result", res->struct_size, sizeof *res)))
        return s;
    sift_verify_args a;
    if ((s = check_args(args, &a, err)))
        return s;
    sift_verify_result r;
    memset(&r, 0, sizeof r);
    r.struct_size = res->struct_size;
    r.token = -1;
    hook_tramp t = {a.hook, a.hook_user, c->hook, c->hook_user, 0};
    sift_row_hook saved = c->hook;
    void *saved_user = c->hook_user;
    if (a.hook) {
        c->hook = tramp_call;
        c->hook_user = &t;
    }
    uint64_t hooks0 = c->n_hook_calls;
    for (int32_t i = 0; i <= a.n_drafts; i++) {
        t.position = i;
        r.position = i;
        int32_t tok = -1;
        s = a.slices ? sift__sample_slice(c, &a.slices[i], &tok, err)
                     : sift__sample_row(c, a.rows[i], a.n_vocab, &tok, 1, err);
        if (s)
            break;
        int last = i == a.n_drafts || tok != a.drafts[i];
        if (!(last && (a.flags & SIFT_VERIFY_KEEP_LAST)) && (s = sift__accept(c, tok, 0, err)))
            break;
        if (last) {
            r.token = tok;
            break;
        }
        r.n_accepted++;
    }
    c->hook = saved;
    c->hook_user = saved_user;
    r.hook_calls = (uint32_t)(c->n_hook_calls - hooks0);
    memcpy(res, &r, res->struct_size);
    return s;
}

sift_status sift_chain_verify(sift_chain *c, const sift_verify_args *args, sift_verify_result *res,
                              sift_error *err)
{
    SIFT__CHAIN_SCRATCH_CALL(c, err, verify(c, args, res, err));
}

/* ------------------------------------------------------------------ */
/* Target distributions                                                */
/* ------------------------------------------------------------------ */

static sift_status distributions(sift_verifier *v, const sift_chain *c,
                                 const sift_verify_args *args, sift_token_prob *out,
                                 size_t capacity, size_t *n_out, int32_t *n_positions,
                                 sift_error *err)
{
    sift_status s;
    if (!n_out || !n_positions || (!out && capacity))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL",
                          !n_out ? "n_out" : (!n_positions ? "n_positions" : "out"));
    sift_verify_args a;
    if ((s = check_args(args, &a, err)))
        return s;
    if (a.n_drafts > v->max_drafts)
        return sift__fail(err, SIFT_E_LIMIT, "n_drafts = %d exceeds the verifier's max_drafts %d",
                          (int)a.n_drafts, (int)v->max_drafts);
    if (!v->shadow)
        return sift__fail(err, SIFT_E_STATE,
                          "a stage of the chain cannot be cloned: the verifier has no shadow");
    int ok = 0;
    size_t which = 0;
    if ((s = sync_shadow(v, c, &ok, &which, err)))
        return s;
    if (!ok)
        return sift__fail_at(err, SIFT_E_STATE, (int64_t)which,
                             "stage %zu (%s) cannot copy its state into the verifier's shadow",
                             which, sift__stage_name(c->stages[which]));
    sift_chain *d = v->shadow;
    /* The shadow samples with the chain's workspace when it has one (the
     * chain is held, so its attachment stays), else with its own. */
    sift__lent lent;
    if ((s = sift__ws_lend(d, c->workspace, &lent, err)))
        return s;
    hook_tramp t = {a.hook, a.hook_user, c->hook, c->hook_user, 0};
    d->hook = a.hook || c->hook ? tramp_call : NULL;
    d->hook_user = &t;
    for (int32_t i = 0; i <= a.n_drafts; i++) {
        t.position = i;
        sift_token_prob *o = out ? out + (size_t)i * capacity : NULL;
        s = a.slices ? sift__distribution_slice(d, &a.slices[i], o, capacity, &n_out[i], err)
                     : sift__distribution_row(d, a.rows[i], a.n_vocab, o, capacity, &n_out[i], err);
        if (s)
            break;
        *n_positions = i + 1;
        if (i == a.n_drafts)
            break;
        int taken = shadow_accept(d, a.drafts[i], &s, err);
        if (s || !taken)
            break;
    }
    d->hook = NULL;
    d->hook_user = NULL;
    sift__ws_return(d, &lent);
    return s;
}

/* Holds the verifier, its shadow and the chain: the chain's row hook (or
 * the positional one) runs during the call, and its shadow is in the
 * middle of the drafts until the call returns. */
sift_status sift_verifier_distributions(sift_verifier *v, const sift_chain *c,
                                        const sift_verify_args *args, sift_token_prob *out,
                                        size_t capacity, size_t *n_out, int32_t *n_positions,
                                        sift_error *err)
{
    if (n_positions)
        *n_positions = 0;
    sift_status s = check_verifier(v, c, err);
    if (s)
        return s;
    hold_all(v, c, 1);
    s = distributions(v, c, args, out, capacity, n_out, n_positions, err);
    hold_all(v, c, 0);
    return s;
}

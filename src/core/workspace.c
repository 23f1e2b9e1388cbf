/*
 * workspace.c - scratch buffers: a chain's own (sift__ws) and the shared
 * workspace (sift_workspace) that chains borrow for one call at a time.
 *
 * What is scratch: the eight per-token arrays of sift__ws, the row
 * buffer (the row hook's row, check-mode bans) and the id set of slice
 * validation (`seen`, emptied by a new generation). Nothing in them
 * outlives a call: every call writes what it reads (the id set's
 * generation travels with its array), so which chain's call filled them
 * last never shows in a result.
 *
 * Invariants:
 * - The buffers are sized on the first step for a given V and only grow;
 *   no step after the first allocates. A failed resize leaves the old
 *   buffers in place.
 * - A workspace is lent to one call at a time: sift__ws_lend takes it
 *   with one atomic compare-and-swap of `busy` from 0 to 1 (acquire) or
 *   refuses with SIFT_E_STATE, and sift__ws_return stores 0 (release),
 *   so two calls on different threads are ordered by the flag and never
 *   touch the buffers at once. While lent, the buffers sit in the
 *   chain's scratch fields (so every step reads them where it always
 *   did) and grow through the workspace's allocator (sift__ws.al); the
 *   chain's own fields are kept in a sift__lent on the caller's stack
 *   and put back on the one exit, sift__ws_return.
 * - `refs` counts the caller's handle (until sift_workspace_free) and
 *   each chain that has the workspace attached; the last reference to go
 *   frees it. A chain cannot detach (or be freed) while one of its calls
 *   runs (the busy rule), so a lent workspace always has a reference
 *   besides the call's caller.
 */
#include <stdatomic.h>

#include "../sift_internal.h"

#define WORKSPACE_MAGIC 0x5753504bu /* "WSPK" */

struct sift_workspace {
    uint32_t magic;
    sift__alloc al;
    /* The scratch, in the layout of a chain's fields (ws.al = &al). */
    sift__ws ws;
    float *row;
    size_t row_cap;
    uint32_t *seen;
    size_t seen_cap;
    uint32_t seen_gen;
    sift_candidate *lp_set; /* core/logprobs.c's kept set */
    size_t lp_cap;
    atomic_int busy;    /* 1 while lent to a call */
    atomic_size_t refs; /* the handle + one per attached chain */
};

void sift__ws_free(sift__ws *ws, const sift__alloc *al)
{
    const sift__alloc *own = ws->al;
    if (own)
        al = own;
    sift__free(al, ws->cand);
    sift__free(al, ws->cand2);
    sift__free(al, ws->u64a);
    sift__free(al, ws->u64b);
    sift__free(al, ws->u64c);
    sift__free(al, ws->u64d);
    sift__free(al, ws->f64);
    sift__free(al, ws->u32);
    memset(ws, 0, sizeof *ws);
    ws->al = own;
}

sift_status sift__ws_reserve(sift__ws *ws, const sift__alloc *al, size_t n, sift_error *err)
{
    if (n <= ws->cap)
        return SIFT_OK;
    if (ws->al)
        al = ws->al;
    sift__ws w;
    memset(&w, 0, sizeof w);
    w.al = ws->al;
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
/* The shared workspace                                                */
/* ------------------------------------------------------------------ */

void sift_workspace_params_init(sift_workspace_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
}

static void workspace_destroy(sift_workspace *w)
{
    sift__alloc al = w->al;
    sift__ws_free(&w->ws, &al);
    sift__free(&al, w->row);
    sift__free(&al, w->seen);
    sift__free(&al, w->lp_set);
    w->magic = 0;
    sift__free(&al, w);
}

sift_status sift_workspace_new(sift_workspace **out, const sift_workspace_params *params,
                               sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    sift_workspace_params p;
    sift_workspace_params_init(&p);
    if (params) {
        if (params->struct_size == 0 || params->struct_size > sizeof p)
            return sift__fail(err, SIFT_E_ARG,
                              "params.struct_size = %u; call sift_workspace_params_init first",
                              (unsigned)params->struct_size);
        memcpy(&p, params, params->struct_size);
    }
    if (p.n_vocab < 0)
        return sift__fail(err, SIFT_E_ARG, "params.n_vocab = %d is negative", (int)p.n_vocab);
    sift__alloc al;
    sift_status s = sift__alloc_init(&al, p.allocator, err);
    if (s)
        return s;
    sift_workspace *w = sift__calloc(&al, 1, sizeof *w);
    if (!w)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while creating a workspace");
    w->magic = WORKSPACE_MAGIC;
    w->al = al;
    w->ws.al = &w->al;
    atomic_init(&w->busy, 0);
    atomic_init(&w->refs, 1);
    if (p.n_vocab > 0) {
        size_t n = (size_t)p.n_vocab;
        if ((s = sift__ws_reserve(&w->ws, &w->al, n, err))) {
            workspace_destroy(w);
            return s;
        }
        w->row = sift__malloc(&w->al, n, sizeof *w->row);
        w->seen = sift__calloc(&w->al, n, sizeof *w->seen);
        if (!w->row || !w->seen) {
            workspace_destroy(w);
            return sift__fail(err, SIFT_E_NOMEM,
                              "out of memory while sizing a workspace for %d tokens",
                              (int)p.n_vocab);
        }
        w->row_cap = w->seen_cap = n;
    }
    *out = w;
    return SIFT_OK;
}

void sift__workspace_unref(sift_workspace *w)
{
    if (w && atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) == 1)
        workspace_destroy(w);
}

void sift_workspace_free(sift_workspace *w)
{
    if (!w || w->magic != WORKSPACE_MAGIC)
        return;
    sift__workspace_unref(w);
}

/* The body of sift_chain_set_workspace; the caller holds the chain. */
static sift_status set_workspace(sift_chain *c, sift_workspace *w, sift_error *err)
{
    if (w && w->magic != WORKSPACE_MAGIC)
        return sift__fail(err, SIFT_E_ARG, "workspace is not a live workspace");
    if (w == c->workspace)
        return SIFT_OK;
    if (w) {
        atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
        /* The chain's own scratch is not needed any more. */
        sift__ws_free(&c->ws, &c->al);
        sift__free(&c->al, c->row);
        sift__free(&c->al, c->seen);
        sift__free(&c->al, c->lp_set);
        c->lp_set = NULL;
        c->lp_cap = 0;
        c->row = NULL;
        c->row_cap = 0;
        c->seen = NULL;
        c->seen_cap = 0;
        c->seen_gen = 0;
    }
    sift_workspace *old = c->workspace;
    c->workspace = w;
    sift__workspace_unref(old);
    return SIFT_OK;
}

sift_status sift_chain_set_workspace(sift_chain *c, sift_workspace *w, sift_error *err)
{
    SIFT__CHAIN_CALL(c, err, set_workspace(c, w, err));
}

sift_status sift__ws_lend(sift_chain *c, sift_workspace *w, sift__lent *own, sift_error *err)
{
    own->w = NULL;
    if (!w)
        return SIFT_OK;
    int idle = 0;
    if (!atomic_compare_exchange_strong_explicit(&w->busy, &idle, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return sift__fail(err, SIFT_E_STATE,
                          "the chain's workspace is in use by another call (a workspace serves "
                          "one call at a time)");
    own->w = w;
    own->ws = c->ws;
    own->row = c->row;
    own->row_cap = c->row_cap;
    own->seen = c->seen;
    own->seen_cap = c->seen_cap;
    own->seen_gen = c->seen_gen;
    own->lp_set = c->lp_set;
    own->lp_cap = c->lp_cap;
    c->ws = w->ws;
    c->row = w->row;
    c->row_cap = w->row_cap;
    c->seen = w->seen;
    c->seen_cap = w->seen_cap;
    c->seen_gen = w->seen_gen;
    c->lp_set = w->lp_set;
    c->lp_cap = w->lp_cap;
    return SIFT_OK;
}

void sift__ws_return(sift_chain *c, sift__lent *own)
{
    sift_workspace *w = own->w;
    if (!w)
        return;
    w->ws = c->ws;
    w->row = c->row;
    w->row_cap = c->row_cap;
    w->seen = c->seen;
    w->seen_cap = c->seen_cap;
    w->seen_gen = c->seen_gen;
    w->lp_set = c->lp_set;
    w->lp_cap = c->lp_cap;
    c->ws = own->ws;
    c->row = own->row;
    c->row_cap = own->row_cap;
    c->seen = own->seen;
    c->seen_cap = own->seen_cap;
    c->seen_gen = own->seen_gen;
    c->lp_set = own->lp_set;
    c->lp_cap = own->lp_cap;
    own->w = NULL;
    atomic_store_explicit(&w->busy, 0, memory_order_release);
}

/*
 * gbnf_serve.c - what a serving engine calls on a grammar besides accept
 * and fill: rollback, termination, draft validation, masks along a
 * draft, and the bytes the grammar forces next (docs/grammar.md, "The
 * serving loop").
 *
 * What it owns: the rollback history of a grammar and the walks over a
 * draft of tokens.
 *
 * Invariants:
 * - The history is a ring of g->hcap entries, sized when the grammar is
 *   made; every accept that succeeds appends the state before it (the
 *   oldest entry is dropped when the ring is full), so accepting
 *   allocates nothing for it. An entry is a state id, the terminated and
 *   triggered flags and the output counters; state ids are remapped when
 *   the matcher caches are rebuilt (sift__gm_hist_remap, from
 *   sift__gm_maybe_flush), so they always name states of the current
 *   caches. Rolling back k entries restores the oldest of them: O(k).
 * - The accepts of an untriggered lazy grammar are "fed" entries: the
 *   trigger set keeps its own record of each (sift__trigger_commit), and
 *   a rollback takes back as many records as it pops fed entries. While
 *   untriggered the matcher sits in the initial state, so a fed entry's
 *   state is g->init.
 * - A draft walk (validate, masks along a draft) moves the grammar's
 *   state through the draft and puts it back on every exit: the state
 *   id, the flags, the output counters and, for an untriggered lazy
 *   grammar, the trigger set (a checkpoint). The matcher caches may grow,
 *   which no result can see. No cache rebuild happens inside a walk but
 *   in the lazy step that fires a trigger, when the only state held is
 *   the initial one.
 */
#include <stdio.h>

#include "gbnf_match.h"

/* ------------------------------------------------------------------ */
/* The history                                                         */
/* ------------------------------------------------------------------ */

sift_status sift__gm_hist_alloc(sift_grammar *g, uint32_t cap, sift_error *err)
{
    g->hcap = cap;
    g->h0 = g->hn = 0;
    if (!cap)
        return SIFT_OK;
    g->hist = sift__malloc(&g->al, cap, sizeof *g->hist);
    g->hscr = sift__malloc(&g->al, cap, sizeof *g->hscr);
    if (!g->hist || !g->hscr) {
        sift__free(&g->al, g->hist);
        sift__free(&g->al, g->hscr);
        g->hist = NULL;
        g->hscr = NULL;
        g->hcap = 0;
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for the grammar's rollback history");
    }
    return SIFT_OK;
}

void sift__gm_hist_save(const sift_grammar *g, gm_hist *h, int fed)
{
    h->cur = g->cur;
    h->term = (uint8_t)g->terminated;
    h->trig = (uint8_t)g->triggered;
    h->fed = (uint8_t)fed;
    h->out_len = g->out_len;
    memcpy(h->tail, g->tail, sizeof h->tail);
}

void sift__gm_hist_push(sift_grammar *g, const gm_hist *h)
{
    if (!g->hcap)
        return;
    gm_hist e = *h;
    if (e.fed)
        e.cur = g->init; /* the cache may have been rebuilt since h was taken */
    if (g->hn == g->hcap) {
        g->h0 = (g->h0 + 1) % g->hcap;
        g->hn--;
    }
    g->hist[(g->h0 + g->hn) % g->hcap] = e;
    g->hn++;
}

int sift__gm_hist_remap(sift_grammar *fresh, sift_grammar *g)
{
    for (uint32_t k = 0; k < g->hn; k++) {
        int32_t y = sift__gm_import(fresh, g, g->hist[(g->h0 + k) % g->hcap].cur);
        if (y < 0)
            return -1;
        g->hscr[k] = (uint32_t)y;
    }
    for (uint32_t k = 0; k < g->hn; k++)
        g->hist[(g->h0 + k) % g->hcap].cur = g->hscr[k];
    return 0;
}

sift_status sift__gm_hist_copy(sift_grammar *g, const sift_grammar *from, sift_error *err)
{
    sift_status s = sift__gm_hist_alloc(g, from->hcap, err);
    if (s)
        return s;
    sift__gm_begin(g, err);
    for (uint32_t k = 0; k < from->hn; k++) {
        const gm_hist *e = &from->hist[(from->h0 + k) % from->hcap];
        g->work = 0; /* each state was reached within one call's budget */
        int32_t y = sift__gm_import(g, from, e->cur);
        if (y < 0) {
            sift__gm_end_call(g);
            return g->fail;
        }
        g->hist[k] = *e;
        g->hist[k].cur = (uint32_t)y;
    }
    sift__gm_end_call(g);
    g->hn = from->hn;
    return SIFT_OK;
}

void sift__gm_hist_swap(sift_grammar *a, sift_grammar *b)
{
    gm_hist *h = a->hist;
    a->hist = b->hist;
    b->hist = h;
    uint32_t *sc = a->hscr;
    a->hscr = b->hscr;
    b->hscr = sc;
    uint32_t t = a->h0;
    a->h0 = b->h0;
    b->h0 = t;
    t = a->hn;
    a->hn = b->hn;
    b->hn = t;
    t = a->hcap;
    a->hcap = b->hcap;
    b->hcap = t;
}

sift_status sift_grammar_rollback(sift_grammar *g, size_t n_tokens, sift_error *err)
{
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if (n_tokens == 0)
        return SIFT_OK;
    if (n_tokens > g->hn)
        return sift__fail(err, SIFT_E_STATE,
                          "cannot roll back %zu tokens: the grammar's history holds %u (of "
                          "max_rollback_tokens = %u)",
                          n_tokens, (unsigned)g->hn, (unsigned)g->hcap);
    const gm_hist *e = NULL;
    size_t fed = 0;
    for (size_t k = 0; k < n_tokens; k++) {
        e = &g->hist[(g->h0 + g->hn - 1) % g->hcap];
        fed += e->fed;
        g->hn--;
    }
    g->cur = e->cur;
    g->terminated = e->term;
    g->triggered = e->trig;
    g->out_len = e->out_len;
    memcpy(g->tail, e->tail, sizeof g->tail);
    if (fed)
        sift__trigger_rollback(g->trig, fed);
    return SIFT_OK;
}

size_t sift_grammar_rollback_depth(const sift_grammar *g)
{
    return g && g->magic == MAGIC ? g->hn : 0;
}

int sift_grammar_is_terminated(const sift_grammar *g)
{
    return g && g->magic == MAGIC && g->terminated;
}

uint64_t sift__grammar_state_digest(const sift_grammar *g)
{
    uint64_t h = sift__grammar_digest(g, 0);
    h = sift__fnv(h, &g->out_len, sizeof g->out_len);
    size_t n = g->out_len < sizeof g->tail ? (size_t)g->out_len : sizeof g->tail;
    return sift__fnv(h, g->tail + sizeof g->tail - n, n);
}

/* ------------------------------------------------------------------ */
/* Drafts                                                              */
/* ------------------------------------------------------------------ */

static sift_status check_draft(const sift_grammar *g, const int32_t *ids, size_t n, sift_error *err)
{
    if (!g->core->V)
        return sift__fail(err, SIFT_E_ARG,
                          "the grammar has no vocabulary (give one to sift_grammar_new to work "
                          "with tokens)");
    if (!ids && n)
        return sift__fail(err, SIFT_E_ARG, "ids is NULL but n = %zu", n);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= g->core->V)
            return sift__fail_at(err, SIFT_E_TOKEN, (int64_t)i,
                                 "draft token %zu has id %d, outside [0, %d)", i, (int)ids[i],
                                 (int)g->core->V);
    return SIFT_OK;
}

/* Walks the draft ids[0..n) from the current state: *n_ok receives the
 * length of the prefix the grammar accepts; with masks, row k (masks + k
 * * wpr) receives the allowed set after k tokens for k <= *n_ok, and
 * rows past it are zeroed (the state after a rejected token allows
 * nothing). The grammar is put back as it was, on success and failure. */
static sift_status draft_walk(sift_grammar *g, const int32_t *ids, size_t n, uint32_t *masks,
                              size_t wpr, size_t *n_ok, sift_error *err)
{
    sift__gm_begin(g, err);
    sift_status s = sift__gm_maybe_flush(g, err);
    sift__gm_end_call(g);
    if (s)
        return s;
    const uint32_t cur0 = g->cur;
    const int idle0 = sift__gm_idle(g), trig0 = g->triggered, term0 = g->terminated;
    const uint64_t len0 = g->out_len;
    unsigned char tail0[sizeof g->tail];
    memcpy(tail0, g->tail, sizeof tail0);
    if (idle0)
        sift__trigger_checkpoint(g->trig);
    size_t k = 0;
    for (;;) {
        if (masks && (s = sift__gm_fill(g, masks + k * wpr, wpr, err)))
            break;
        if (k == n || g->terminated)
            break;
        int32_t t = ids[k];
        if (sift__gm_idle(g)) {
            /* the trigger set sees the token; a rejected replay is a
             * rejected token, not an error of the walk */
            sift_error e2;
            s = sift__gm_lazy_step(g, t, NULL, 0, 1, &e2);
            if (s == SIFT_E_GRAMMAR_REJECT) {
                s = SIFT_OK;
                break;
            }
            if (s) {
                if (err)
                    *err = e2;
                break;
            }
        } else {
            sift__gm_begin(g, err);
            int32_t y = sift__gm_token_next(g, g->cur, t);
            sift__gm_end_call(g);
            if (y < 0) {
                s = g->fail;
                break;
            }
            if (y == 0)
                break;
            g->cur = (uint32_t)y;
        }
        if (g->core->attr[t] & SIFT_TOKEN_EOG)
            g->terminated = 1;
        k++;
    }
    if (!s && masks)
        for (size_t r = k + 1; r <= n; r++)
            memset(masks + r * wpr, 0, wpr * sizeof *masks);
    /* put everything back; an untriggered grammar sits in the initial
     * state, whose id a rebuild in the lazy step may have changed */
    if (idle0) {
        sift__trigger_restore(g->trig);
        g->cur = g->init;
    } else {
        g->cur = cur0;
    }
    g->triggered = trig0;
    g->terminated = term0;
    g->out_len = len0;
    memcpy(g->tail, tail0, sizeof tail0);
    if (!s)
        *n_ok = k;
    return s;
}

sift_status sift_grammar_validate_tokens(sift_grammar *g, const int32_t *ids, size_t n,
                                         size_t *n_ok, sift_error *err)
{
    if (n_ok)
        *n_ok = 0;
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if (!n_ok)
        return sift__fail(err, SIFT_E_ARG, "n_ok is NULL");
    if ((s = check_draft(g, ids, n, err)))
        return s;
    return draft_walk(g, ids, n, NULL, 0, n_ok, err);
}

sift_status sift_grammar_fill_bitmask_draft(sift_grammar *g, const int32_t *ids, size_t n,
                                            uint32_t *masks, size_t words_per_row, size_t *n_ok,
                                            sift_error *err)
{
    if (n_ok)
        *n_ok = 0;
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if (!masks)
        return sift__fail(err, SIFT_E_ARG, "masks is NULL");
    if ((s = check_draft(g, ids, n, err)))
        return s;
    if (words_per_row < g->mc_words)
        return sift__fail(err, SIFT_E_ARG,
                          "rows of %zu words are too short for V = %d (needs %zu words)",
                          words_per_row, (int)g->core->V, g->mc_words);
    if (n >= SIZE_MAX / sizeof *masks / words_per_row)
        return sift__fail(err, SIFT_E_ARG, "%zu rows of %zu words overflow", n + 1, words_per_row);
    size_t ok = 0;
    s = draft_walk(g, ids, n, masks, words_per_row, &ok, err);
    if (!s && n_ok)
        *n_ok = ok;
    return s;
}

/* ------------------------------------------------------------------ */
/* Forced bytes (jump-forward)                                         */
/* ------------------------------------------------------------------ */

/* The trie child of node i (tn for the root) by byte b, or UINT32_MAX. */
static uint32_t trie_child(const gm_core *c, uint32_t i, unsigned b)
{
    uint32_t k = i == c->tn ? 0 : i + 1, end = i == c->tn ? c->tn : c->tr[i].end;
    while (k < end) {
        if ((c->tr[k].db & 0xff) == b)
            return k;
        k = c->tr[k].end;
    }
    return UINT32_MAX;
}

/* The tokens of the forced bytes p[0..n): from each position, the
 * longest ordinary token (not special, not unused) whose piece starts
 * there, as long as no token that starts there could run past n (the
 * text after the forced bytes could then change the choice); each one
 * checked by the matcher from state x. Returns the count written. */
static size_t forced_tokens(sift_grammar *g, uint32_t x, const unsigned char *p, size_t n,
                            int32_t *ids, size_t cap)
{
    const gm_core *c = g->core;
    size_t pos = 0, m = 0;
    while (pos < n && m < cap) {
        uint32_t node = c->tn;
        int32_t best = -1;
        size_t blen = 0, d = 0;
        if (!sift__gm_budget(g, (int64_t)(n - pos) * 2 + 1))
            return m;
        while (pos + d < n) {
            uint32_t ch = trie_child(c, node, p[pos + d]);
            if (ch == UINT32_MAX)
                break;
            node = ch;
            d++;
            const gm_tnode *nd = &c->tr[node];
            for (uint32_t s = nd->slot; s < nd->slot_end; s++) {
                int32_t t = c->stok[s];
                size_t L = (size_t)(c->poff[t + 1] - c->poff[t]);
                if (L != d)
                    break; /* the tokens ending at a node come first */
                if (!(c->attr[t] & (SIFT_TOKEN_SPECIAL | SIFT_TOKEN_UNUSED))) {
                    best = t;
                    blen = d;
                    break;
                }
            }
        }
        /* every forced byte read and the node still has children: a
         * longer token could start here */
        if (pos + d == n && node != c->tn && c->tr[node].end > node + 1)
            break;
        if (best < 0)
            break;
        int32_t y = sift__gm_token_next(g, x, best);
        if (y <= 0)
            break;
        x = (uint32_t)y;
        ids[m++] = best;
        pos += blen;
    }
    return m;
}

sift_status sift_grammar_forced_bytes(sift_grammar *g, char *buf, size_t cap, size_t *n_bytes,
                                      int32_t *ids, size_t ids_cap, size_t *n_ids, sift_error *err)
{
    if (n_bytes)
        *n_bytes = 0;
    if (n_ids)
        *n_ids = 0;
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if (!n_bytes || (!buf && cap))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", n_bytes ? "buf" : "n_bytes");
    if (ids_cap && (!ids || !n_ids))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL but ids_cap = %zu", ids ? "n_ids" : "ids",
                          ids_cap);
    if (ids_cap && !g->core->V)
        return sift__fail(err, SIFT_E_ARG, "forced tokens need a grammar with a vocabulary");
    if (g->terminated || sift__gm_idle(g))
        return SIFT_OK; /* nothing follows, or anything may */
    if (cap > SIFT_GRAMMAR_MAX_FORCED_BYTES)
        cap = SIFT_GRAMMAR_MAX_FORCED_BYTES;
    sift__gm_begin(g, err);
    const gm_caches *m = &g->m;
    uint32_t x = g->cur;
    size_t k = 0;
    while (k < cap) {
        const gm_state *st = &m->st[x];
        /* the grammar may end here, or a token element may match by id:
         * the next byte is not forced */
        if ((st->flags & F_COMPLETE) || ((st->flags & F_HASTOK) && st->rem == 0))
            break;
        if (!sift__gm_budget(g, 256)) {
            s = g->fail;
            break;
        }
        int nb = 0;
        unsigned b1 = 0;
        int32_t y1 = 0;
        const int mid = st->rem != 0; /* st may move once a step grows the caches */
        for (unsigned b = 0; b < 256 && nb < 2; b++) {
            /* bytes the UTF-8 decoder rejects here lead nowhere in any
             * grammar (sift__gm_u8_next): a continuation or an invalid
             * lead byte between characters, anything but a continuation
             * inside one */
            if (!mid ? (b >= 0x80 && b < 0xC2) || b > 0xF4 : (b < 0x80 || b > 0xBF))
                continue;
            int32_t y = sift__gm_step(g, x, b);
            if (y < 0) {
                s = g->fail;
                break;
            }
            if (y > 0) {
                nb++;
                b1 = b;
                y1 = y;
            }
            m = &g->m; /* a transition may grow the caches */
        }
        if (s || nb != 1)
            break;
        buf[k++] = (char)b1;
        x = (uint32_t)y1;
    }
    size_t nt = 0;
    if (!s && ids_cap && k) {
        g->work = 0;
        nt = forced_tokens(g, g->cur, (const unsigned char *)buf, k, ids, ids_cap);
        s = g->fail;
    }
    sift__gm_end_call(g);
    if (s)
        return s;
    *n_bytes = k;
    if (n_ids)
        *n_ids = nt;
    return SIFT_OK;
}

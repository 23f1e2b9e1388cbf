/*
 * gbnf_mask.c - the whole-vocabulary pass of a grammar.
 *
 * What it owns: the preorder walk of the token trie with one cached
 * transition per edge (skipping every subtree under a dead one), the
 * allowed set it yields (a bit per token, or the small set when few
 * tokens are allowed), and the bans built on it: on a whole row
 * (sift_grammar_ban), on candidates, and on a slice's array. Also the
 * small accessors the chain and the stage read (digest, last work, owner
 * flag, soft cache limits). Work is charged per trie node in chunks, so
 * the budget bounds every pass.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gbnf_match.h"

/* The state after trie node nd: the transition over its edge byte from
 * its parent's state (ds holds the state per depth), computed when the
 * table lacks it; *trans is reloaded, as computing may move the table.
 * -1 on a matcher failure (g->fail). */
static inline int32_t trie_edge(sift_grammar *g, const uint32_t *ds, const gm_tnode *nd,
                                const int32_t **trans)
{
    uint32_t from = ds[(nd->db >> 8) - 1], b = nd->db & 0xff;
    int32_t y = (*trans)[(size_t)from * 256 + b];
    if (SIFT__UNLIKELY(y < 0)) {
        y = sift__gm_trans_compute(g, from, b);
        *trans = g->m.trans;
    }
    return y;
}

/* Trie walks charge their nodes in chunks of this many (one unit each). */
#define WALK_CHUNK 1024u

/* Counts one node of a trie walk, charging each full chunk: 0 (g->fail
 * set) past the budget. The walk charges what is left of *walked at its
 * end. */
static inline int walk_tick(sift_grammar *g, uint32_t *walked)
{
    if (SIFT__LIKELY(++*walked < WALK_CHUNK))
        return 1;
    *walked = 0;
    return sift__gm_budget(g, WALK_CHUNK);
}

/* ------------------------------------------------------------------ */
/* Loop signatures                                                     */
/* ------------------------------------------------------------------ */

/* A state qualifies when it loops on at least this many groups (inside a
 * JSON string: about 95), and is asked at a trie node with at least
 * SIG_MIN_SLOTS tokens below it. */
#define SIG_MIN_GROUPS 48
#define SIG_MIN_SLOTS 64
/* A node gets an entry of its own (anchored at it) with this many tokens
 * below it, when no entry holds it. */
#define SIG_ANCHOR_SLOTS 256
#define SIG_DEAD UINT32_MAX

static int popcount64(uint64_t v)
{
    int n = 0;
    for (; v; v &= v - 1)
        n++;
    return n;
}

/* rr_add's growth, out of the walk's loop; 0 when out of memory. */
static SIFT__NOINLINE int rr_grow(sift_grammar *g)
{
    return sift__gm_grow(&g->al, &g->rr, &g->cap_rr, 2 * g->n_rr, 2 * g->n_rr + 2, sizeof *g->rr);
}

/* Appends the rejected slots [a, b) to g->rr (merging with the last
 * range); 0 when out of memory. */
static inline int rr_add(sift_grammar *g, uint32_t a, uint32_t b)
{
    if (g->n_rr && g->rr[2 * g->n_rr - 1] == a) {
        g->rr[2 * g->n_rr - 1] = b;
        return 1;
    }
    if (SIFT__UNLIKELY(2 * g->n_rr + 2 > g->cap_rr) && !rr_grow(g))
        return 0;
    g->rr[2 * g->n_rr] = a;
    g->rr[2 * g->n_rr + 1] = b;
    g->n_rr++;
    return 1;
}

/* Whether a byte of group k starts a character of the loop groups L (a
 * multi-byte one when u8). */
static inline int in_loop(unsigned k, uint64_t L0, uint64_t L1, int u8)
{
    return k == 1 ? u8 : (int)(((k < 64 ? L0 : L1) >> (k & 63)) & 1);
}

/* Makes the array *arr (a T ** passed as void *, as sift__reserve takes
 * it; *cap elements of esz bytes) hold n, its contents not kept: 0
 * (g->fail set) when out of memory. */
static int fit(sift_grammar *g, void *arr, size_t *cap, size_t n, size_t esz)
{
    if (n <= *cap)
        return 1;
    void *q = sift__malloc(&g->al, n, esz), *old;
    if (!q)
        return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar's mask cache"), 0;
    memcpy(&old, arr, sizeof old);
    sift__free(&g->al, old);
    memcpy(arr, &q, sizeof q);
    *cap = n;
    return 1;
}

/* Builds entry e for the loop groups L (e->loop). Why it is exact: in a
 * state y whose every byte of a group in L leads back to y (and, when
 * group 1 is in L, every multi-byte character through live partial
 * states, sift__gm_u8_loop), a path made of such bytes, read as UTF-8,
 * stays in y at each character boundary and in a live state inside a
 * character, so its tokens are accepted whatever else y is; a path that
 * breaks UTF-8 inside a character is dead in every state. Read from the
 * root, the trie splits into such paths (their boundary nodes are marked
 * in onp), subtrees whose path breaks UTF-8 (SIG_DEAD ranges), and exits:
 * nodes whose edge leaves L at a boundary, reached from y itself. So from
 * a node of onp reached in y, every token below it is accepted but those
 * of the dead ranges and of the exits below it, and an exit's tokens are
 * those of its subtree walked from y. rg holds (slot_lo, slot_hi, node or
 * SIG_DEAD) in slot order. One unit per node visited. */
static sift_status sig_build(sift_grammar *g, gm_sigent *e)
{
    const gm_core *c = g->core;
    const gm_tnode *tr = c->tr;
    uint64_t L0 = e->loop[0], L1 = e->loop[1];
    int u8 = (L0 >> 1) & 1;
    uint8_t *dec = g->sig_dec;               /* the decoder state per depth (dstk is the walk's) */
    uint8_t *cd = g->sig_dec + c->tmaxd + 1; /* characters from the anchor per depth */
    uint32_t from = e->anchor < c->tn ? e->anchor + 1 : 0;
    uint32_t to = e->anchor < c->tn ? tr[e->anchor].end : c->tn;
    uint32_t base = e->anchor < c->tn ? e->anchor : 0;
    size_t words = ((size_t)(to - base) + 63) / 64;
    if (!fit(g, &e->onp, &e->cap_onp, words, sizeof *e->onp))
        return g->fail;
    if (!sift__gm_budget(g, (int64_t)words))
        return g->fail;
    memset(e->onp, 0, words * sizeof *e->onp);
    e->base = base;
    e->end = to;
    e->n_rg = 0;
    dec[e->anchor < c->tn ? tr[e->anchor].db >> 8 : 0] = 0;
    cd[e->anchor < c->tn ? tr[e->anchor].db >> 8 : 0] = 0;
    if (e->anchor < c->tn)
        e->onp[0] |= 1; /* the anchor, a boundary by definition */
    uint32_t i = from, walked = 0;
    while (i < to) {
        const gm_tnode *nd = &tr[i];
        if (!walk_tick(g, &walked))
            return g->fail;
        uint32_t d = nd->db >> 8, b = nd->db & 0xff;
        unsigned pd = dec[d - 1];
        int dn = sift__gm_u8_next(pd, b);
        uint32_t kind = SIG_DEAD;
        if (dn >= 0 && pd == 0 && !in_loop(sift__gm_group(b), L0, L1, u8))
            kind = i; /* an exit */
        if (dn < 0 || kind != SIG_DEAD) {
            if (SIFT__UNLIKELY(e->n_rg * 4 + 4 > e->cap_rg) &&
                !sift__gm_grow(&g->al, &e->rg, &e->cap_rg, e->n_rg * 4, e->n_rg * 4 + 4,
                               sizeof *e->rg))
                return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar's mask cache");
            uint32_t *r = e->rg + 4 * e->n_rg++;
            r[0] = nd->slot;
            r[1] = nd->slot_end;
            r[2] = kind;
            r[3] = cd[d - 1];
            i = nd->end;
            continue;
        }
        if (dn == 0) {
            const uint64_t *bl = c->below + 2 * (size_t)i;
            if (!(bl[0] & ~L0) && !(bl[1] & ~L1)) {
                i = nd->end; /* all below in L */
                continue;
            }
            e->onp[(i - base) >> 6] |= 1ull << ((i - base) & 63);
        }
        dec[d] = (uint8_t)dn;
        cd[d] = (uint8_t)(cd[d - 1] + (pd == 0 && cd[d - 1] < 255));
        i++;
    }
    if (!sift__gm_budget(g, walked))
        return g->fail;
    return SIFT_OK;
}

/* The root's entry for the loop groups L, or NULL. */
static gm_sigent *sig_root(sift_grammar *g, uint64_t L0, uint64_t L1)
{
    for (int k = 0; k < SIG_SLOTS; k++)
        if (g->sig[k].used && g->sig[k].loop[0] == L0 && g->sig[k].loop[1] == L1 &&
            g->sig[k].anchor == g->core->tn)
            return &g->sig[k];
    return NULL;
}

/* The entry for node i (tn: the root) and loop groups L: one whose paths
 * hold i, or one built now anchored at i when i has enough tokens below
 * it (the oldest entry is replaced once all slots are used); NULL when
 * there is none, or with g->fail set. */
static gm_sigent *sig_get(sift_grammar *g, uint32_t i, uint64_t L0, uint64_t L1)
{
    const gm_core *c = g->core;
    for (int k = 0; k < SIG_SLOTS; k++) {
        gm_sigent *e = &g->sig[k];
        if (!e->used || e->loop[0] != L0 || e->loop[1] != L1)
            continue;
        if (i == c->tn ? e->anchor == c->tn
                       : i >= e->base && i < e->end &&
                             ((e->onp[(i - e->base) >> 6] >> ((i - e->base) & 63)) & 1)) {
            g->sig_hits++;
            return e;
        }
    }
    if (i < c->tn) {
        /* the root's entry first: it holds every node whose path is
         * made of L bytes (most nodes a looping state is met at) */
        if (!sig_root(g, L0, L1)) {
            gm_sigent *r = sig_get(g, c->tn, L0, L1);
            if (!r)
                return NULL;
            if ((r->onp[i >> 6] >> (i & 63)) & 1)
                return r;
        }
        if (c->tr[i].slot_end - c->tr[i].slot < SIG_ANCHOR_SLOTS)
            return NULL;
    }
    int k = -1;
    for (int j = 0; j < SIG_SLOTS && k < 0; j++)
        if (!g->sig[j].used)
            k = j;
    if (k < 0) {
        k = (int)g->sig_next;
        g->sig_next = (g->sig_next + 1) % SIG_SLOTS;
    }
    if (!g->sig_dec && !(g->sig_dec = sift__malloc(&g->al, 2 * ((size_t)c->tmaxd + 1), 1))) {
        sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar's mask cache");
        return NULL;
    }
    gm_sigent *e = &g->sig[k];
    e->used = 0;
    e->dm_ok = 0;
    sift__free(&g->al, e->dm); /* masks of another L */
    e->dm = NULL;
    e->cap_dm = 0;
    e->loop[0] = L0;
    e->loop[1] = L1;
    e->anchor = i;
    if (sig_build(g, e))
        return NULL;
    e->used = 1;
    g->sig_builds++;
    return e;
}

/* The signature entry for node i (i == tn: the root) reached in state y,
 * when y qualifies (the answer is kept in y's flags); NULL otherwise, or
 * on a failure (g->fail set; the caller checks it). May add states. */
static gm_sigent *sig_for(sift_grammar *g, uint32_t i, uint32_t y)
{
    gm_state *sy = &g->m.st[y];
    if (sy->flags & F_SIGNO)
        return NULL;
    if (!(sy->flags & F_SIGYES)) {
        int ok = sy->rem == 0;
        if (ok && !(sy->flags & F_ROWFULL)) {
            /* a cheap look first: a state that does not loop on a
             * common letter, digit or space is not worth a row */
            static const unsigned char probe[] = {'e', 'a', '0', ' '};
            int loops = popcount64(sy->loop[0]) + popcount64(sy->loop[1]) >= 8;
            for (size_t k = 0; k < sizeof probe && !loops; k++) {
                int32_t z = sift__gm_step(g, y, probe[k]);
                if (z < 0)
                    return NULL;
                loops = z == (int32_t)y;
            }
            if (loops && sift__gm_row_fill(g, y) < 0)
                return NULL;
            ok = loops;
            sy = &g->m.st[y];
        }
        ok = ok && popcount64(sy->loop[0]) + popcount64(sy->loop[1]) >= SIG_MIN_GROUPS;
        if (ok && !(sy->flags & F_U8TRIED)) {
            if (sift__gm_u8_loop(g, y) < 0)
                return NULL;
            sy = &g->m.st[y];
        }
        sy->flags |= ok ? F_SIGYES : F_SIGNO;
        if (!ok)
            return NULL;
    }
    return sig_get(g, i, sy->loop[0], sy->loop[1]);
}

/* Whether the walk takes node i's subtree, reached in state y, as
 * accepted whole (see walk); may ask sift__gm_u8_loop, which adds
 * states: 1 yes, 0 no, -1 on failure. */
static int take_whole(sift_grammar *g, uint32_t i, int32_t y)
{
    const gm_core *c = g->core;
    const uint64_t *bl = c->below + 2 * (size_t)i;
    if (!(bl[0] | bl[1]))
        return 0;
    const gm_state *sy = &g->m.st[y];
    uint64_t miss0 = bl[0] & ~sy->loop[0];
    if (SIFT__UNLIKELY(miss0 == 2 && !(bl[1] & ~sy->loop[1]) && !(sy->flags & F_U8TRIED))) {
        /* only the multi-byte characters below are in doubt: ask once
         * whether they loop */
        if (sift__gm_u8_loop(g, (uint32_t)y) < 0)
            return -1;
        sy = &g->m.st[y];
        miss0 = bl[0] & ~sy->loop[0];
    }
    if (!miss0 && !(bl[1] & ~sy->loop[1]))
        return 1;
    /* a shifted loop (gm_state.sl): the bytes below go to states that
     * differ only in copies left, enough for the subtree (group 1 only
     * through sl: its loop bit is exact, not shifted) */
    uint32_t h = c->height[i];
    if (h >= 255 || h + 1 > sy->slev || (bl[1] & ~(sy->loop[1] | sy->sl[1])))
        return 0;
    uint64_t sm0 = bl[0] & ~((sy->loop[0] & ~2ull) | sy->sl[0]);
    if (SIFT__UNLIKELY(sm0 == 2 && !(sy->flags & F_U8TRIED))) {
        if (sift__gm_u8_loop(g, (uint32_t)y) < 0)
            return -1;
        sy = &g->m.st[y];
        if (h + 1 > sy->slev)
            return 0;
        sm0 = bl[0] & ~((sy->loop[0] & ~2ull) | sy->sl[0]);
    }
    return !sm0;
}

static sift_status walk_range(sift_grammar *g, uint32_t from, uint32_t to, int use_sig,
                              uint32_t *rej);

/* The tokens below node i (tn: the root), reached in state y, through
 * entry e: the dead ranges and the rejected part of each exit's subtree
 * (walked from y, without signatures) go to g->rr. */
static sift_status sig_apply(sift_grammar *g, const gm_sigent *e, uint32_t i, uint32_t y,
                             uint32_t *rej)
{
    const gm_core *c = g->core;
    uint32_t lo = i < c->tn ? c->tr[i].slot : 0, hi = i < c->tn ? c->tr[i].slot_end : c->n_slots;
    /* the first range at or after lo */
    size_t a = 0, b = e->n_rg;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (e->rg[4 * mid] < lo)
            a = mid + 1;
        else
            b = mid;
    }
    if (!sift__gm_budget(g, 16))
        return g->fail;
    for (size_t k = a; k < e->n_rg && e->rg[4 * k] < hi; k++) {
        const uint32_t *r = e->rg + 4 * k;
        if (!sift__gm_budget(g, 1))
            return g->fail;
        if (r[2] != SIG_DEAD) {
            const gm_tnode *nd = &c->tr[r[2]];
            g->dstk[(nd->db >> 8) - 1] = y;
            sift_status s = walk_range(g, r[2], nd->end, 0, rej);
            if (s)
                return s;
            continue;
        }
        if (!rr_add(g, r[0], r[1]))
            return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
        *rej += r[1] - r[0];
    }
    return SIFT_OK;
}

/* The walk of trie nodes [from, to) (a subtree, or the whole trie), the
 * state at the first one's parent in g->dstk: the rejected slot ranges
 * are appended to g->rr in increasing order, their sizes added to *rej.
 * One table lookup per trie edge; dead subtrees are skipped whole, and so
 * are accepted ones: a node reached in state y whose subtree's bytes
 * below it all loop back to y (y's loop groups cover the node's `below`
 * groups) has every node of its subtree in state y, which is not dead,
 * so every token in it is accepted. A node with many tokens below it
 * reached in a state that loops on most bytes goes through the loop
 * signature (sig_apply) when use_sig. */
static sift_status walk_range(sift_grammar *g, uint32_t from, uint32_t to, int use_sig,
                              uint32_t *rej)
{
    const gm_core *c = g->core;
    const gm_tnode *tr = c->tr;
    uint32_t *ds = g->dstk;
    const int32_t *trans = g->m.trans;
    uint32_t i = from, walked = 0;
    while (i < to) {
        const gm_tnode *nd = &tr[i];
        if (!walk_tick(g, &walked))
            return g->fail;
        int32_t y = trie_edge(g, ds, nd, &trans);
        if (y < 0)
            return g->fail;
        if (y == 0) {
            if (!rr_add(g, nd->slot, nd->slot_end))
                return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
            *rej += nd->slot_end - nd->slot;
            i = nd->end;
            continue;
        }
        int t = take_whole(g, i, y);
        if (t < 0)
            return g->fail;
        if (t) {
            trans = g->m.trans;
            i = nd->end; /* accepted whole */
            continue;
        }
        if (use_sig && nd->slot_end - nd->slot >= SIG_MIN_SLOTS) {
            gm_sigent *e = sig_for(g, i, (uint32_t)y);
            if (g->fail)
                return g->fail;
            if (e) {
                sift_status s = sig_apply(g, e, i, (uint32_t)y, rej);
                if (s)
                    return s;
                trans = g->m.trans;
                i = nd->end;
                continue;
            }
        }
        trans = g->m.trans;
        ds[nd->db >> 8] = (uint32_t)y;
        i++;
    }
    if (!sift__gm_budget(g, walked))
        return g->fail;
    return SIFT_OK;
}

/* The trie walk in the current state: g->rr[0 .. 2 n_rr) receives the
 * slot ranges of the rejected subtrees, in increasing order; *n_rej the
 * number of rejected trie tokens (walk_range). */
static sift_status walk(sift_grammar *g, uint32_t *n_rej)
{
    const gm_core *c = g->core;
    gm_caches *m = &g->m;
    uint32_t x = g->cur;
    uint32_t rej = 0;
    g->n_rr = 0;
    if (x == 0 || m->st[x].set_len == 0) {
        if (!sift__gm_grow(&g->al, &g->rr, &g->cap_rr, 0, 2, sizeof *g->rr))
            return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
        g->rr[0] = 0;
        g->rr[1] = c->n_slots;
        g->n_rr = 1;
        *n_rej = c->n_slots;
        return SIFT_OK;
    }
    g->dstk[0] = x;
    sift_status s;
    gm_sigent *e = g->sig_on ? sig_for(g, c->tn, x) : NULL;
    if (g->fail)
        return g->fail;
    if (e)
        s = sig_apply(g, e, c->tn, x, &rej);
    else
        s = walk_range(g, 0, c->tn, g->sig_on, &rej);
    if (s)
        return s;
    *n_rej = rej;
    return SIFT_OK;
}

/* Whether the state has token-element stacks that can match now. */
static int tok_state(const sift_grammar *g)
{
    const gm_state *st = &g->m.st[g->cur];
    return (st->flags & F_HASTOK) && st->rem == 0;
}

/* Computes g->bits (by token id): the tokens the grammar accepts now,
 * from the walk's ranges, the token elements and the EOG rule. */
static sift_status allowed_bits(sift_grammar *g, size_t *n_non_eog)
{
    const gm_core *c = g->core;
    gm_caches *m = &g->m;
    uint8_t *bits = g->bits;
    size_t nb = ((size_t)c->V + 7) / 8;
    uint32_t x = g->cur;
    uint32_t rej;
    sift_status s = walk(g, &rej);
    if (s)
        return s;
    size_t cnt = c->n_slots - rej;
    /* the bitmap, the other tokens, the rejected slots, the stacks */
    if (!sift__gm_budget(g,
                         (int64_t)nb + c->n_other + rej + 2 * (int64_t)m->st[x].set_len + c->n_eog))
        return g->fail;
    memset(bits, 0xff, nb);
    for (uint32_t k = 0; k < c->n_other; k++)
        bits[c->other[k] >> 3] &= (uint8_t) ~(1u << (c->other[k] & 7));
    for (size_t r = 0; r < g->n_rr; r++)
        for (uint32_t k = g->rr[2 * r]; k < g->rr[2 * r + 1]; k++)
            bits[c->stok[k] >> 3] &= (uint8_t) ~(1u << (c->stok[k] & 7));
    if (tok_state(g)) {
        /* token elements: TOKEN v allows v; TOKEN_NOT v allows every
         * token but v, so two different NOTs allow everything */
        uint32_t so = m->st[x].set_off, sl = m->st[x].set_len;
        int64_t not_v = -1;
        int all = 0;
        for (uint32_t k = 0; k < sl; k++) {
            uint32_t st = m->arena[so + k];
            const sift__gelem *e = st ? sift__gm_el(g, m->node[st].pos) : NULL;
            if (e && e->type == SIFT__G_TOKEN_NOT) {
                if (not_v >= 0 && not_v != (int64_t)e->v)
                    all = 1;
                not_v = e->v;
            }
        }
        if (not_v >= 0) {
            uint8_t keep = (uint8_t)(bits[not_v >> 3] & (1u << (not_v & 7)));
            memset(bits, 0xff, nb);
            if (!all)
                bits[not_v >> 3] = (uint8_t)((bits[not_v >> 3] & ~(1u << (not_v & 7))) | keep);
        }
        for (uint32_t k = 0; k < sl; k++) {
            uint32_t st = m->arena[so + k];
            const sift__gelem *e = st ? sift__gm_el(g, m->node[st].pos) : NULL;
            if (e && e->type == SIFT__G_TOKEN)
                bits[e->v >> 3] |= (uint8_t)(1u << (e->v & 7));
        }
        cnt = 0;
        for (size_t j = 0; j < nb; j++)
            cnt += (size_t)__builtin_popcount(bits[j]);
    }
    if (c->V & 7)
        bits[nb - 1] &= (uint8_t)((1u << (c->V & 7)) - 1);
    int complete = (m->st[x].flags & F_COMPLETE) != 0;
    for (int32_t i = 0; i < c->n_eog; i++) {
        int32_t t = c->eog[i];
        if (tok_state(g))
            cnt -= (bits[t >> 3] >> (t & 7)) & 1;
        if (complete)
            bits[t >> 3] |= (uint8_t)(1u << (t & 7));
        else
            bits[t >> 3] &= (uint8_t) ~(1u << (t & 7));
    }
    *n_non_eog = cnt;
    return SIFT_OK;
}

/* The trie walk of sift__grammar_small_set: writes the allowed tokens to
 * g->ss_ids while there are at most SIFT__GRAMMAR_SMALL of them; returns
 * their count, SIZE_MAX when there are more, or SIZE_MAX - 1 when the
 * matcher failed (a limit, memory). Mirrors ban_dense: trie tokens
 * ending at a live node, and the EOG tokens when the grammar is
 * complete. Not for states with token elements. */
static size_t small_walk(sift_grammar *g)
{
    const gm_core *c = g->core;
    gm_caches *m = &g->m;
    uint32_t x = g->cur;
    size_t n = 0;
    if (x != 0 && m->st[x].set_len != 0) {
        const gm_tnode *tr = c->tr;
        uint32_t *ds = g->dstk;
        const int32_t *trans = m->trans;
        ds[0] = x;
        uint32_t i = 0, tn = c->tn, walked = 0;
        while (i < tn) {
            const gm_tnode *nd = &tr[i];
            if (!walk_tick(g, &walked))
                return SIZE_MAX - 1;
            int32_t y = trie_edge(g, ds, nd, &trans);
            if (y < 0)
                return SIZE_MAX - 1;
            if (y == 0) {
                i = nd->end;
                continue;
            }
            ds[nd->db >> 8] = (uint32_t)y;
            /* the tokens ending at this node come before its children's */
            uint32_t stop = i + 1 < nd->end ? tr[i + 1].slot : nd->slot_end;
            for (uint32_t k = nd->slot; k < stop; k++) {
                if (n == SIFT__GRAMMAR_SMALL)
                    return SIZE_MAX;
                g->ss_ids[n++] = c->stok[k];
            }
            i++;
        }
        if (!sift__gm_budget(g, walked))
            return SIZE_MAX - 1;
    }
    if (!sift__gm_budget(g, c->n_other + (int64_t)n * (int64_t)n))
        return SIZE_MAX - 1;
    if (m->st[x].flags & F_COMPLETE) {
        for (uint32_t j = 0; j < c->n_other; j++) {
            int32_t t = c->other[j];
            if (!(c->attr[t] & SIFT_TOKEN_EOG))
                continue;
            if (n == SIFT__GRAMMAR_SMALL)
                return SIZE_MAX;
            g->ss_ids[n++] = t;
        }
    }
    /* ascending ids (at most SIFT__GRAMMAR_SMALL: insertion sort) */
    for (size_t a = 1; a < n; a++) {
        int32_t v = g->ss_ids[a];
        size_t b = a;
        for (; b > 0 && g->ss_ids[b - 1] > v; b--)
            g->ss_ids[b] = g->ss_ids[b - 1];
        g->ss_ids[b] = v;
    }
    return n;
}

/* Computes and caches the small allowed set of the current state; a
 * failed walk (SIFT_E_NOMEM, SIFT_E_GRAMMAR_LIMIT) is not cached. */
static sift_status small_compute(sift_grammar *g, sift_error *err)
{
    if (g->ss_valid && g->ss_cur == g->cur && g->ss_epoch == g->epoch)
        return SIFT_OK;
    size_t n = SIZE_MAX;
    if (!tok_state(g)) {
        sift__gm_begin(g, err);
        n = small_walk(g);
        sift__gm_end_call(g);
        if (n == SIZE_MAX - 1)
            return g->fail ? g->fail : SIFT_E_NOMEM;
    }
    g->ss_valid = 1;
    g->ss_cur = g->cur;
    g->ss_epoch = g->epoch;
    g->ss_n = n;
    return SIFT_OK;
}

sift_status sift__grammar_small_prepare(sift_grammar *g, sift_error *err)
{
    if (!g || g->magic != MAGIC || !g->core->V || sift__gm_idle(g) || g->terminated)
        return SIFT_OK;
    return small_compute(g, err);
}

size_t sift__grammar_small_set(sift_grammar *g, const int32_t **ids)
{
    *ids = NULL;
    /* A terminated grammar allows nothing, whatever the cache holds for
     * its state (accepting an end-of-generation token keeps the state). */
    if (g && g->magic == MAGIC && g->terminated)
        return 0;
    if (!g || g->magic != MAGIC || !g->core->V || sift__gm_idle(g))
        return SIZE_MAX;
    if (small_compute(g, NULL))
        return SIZE_MAX; /* not cached: the next call may succeed */
    if (g->ss_n != SIZE_MAX)
        *ids = g->ss_ids;
    return g->ss_n;
}

#define LOGIT(base, stride, t) (*(float *)(void *)((char *)(base) + (size_t)(t) * (stride)))

/* The ban over a dense row (logit of token t at base + t * stride), from
 * the walk's ranges: only rejected tokens are written. Not for states
 * with token elements (see allowed_bits). */
static sift_status ban_dense(sift_grammar *g, float *base, size_t stride, size_t *n_non_eog,
                             int *live)
{
    const gm_core *c = g->core;
    uint32_t rej;
    sift_status s = walk(g, &rej);
    if (s)
        return s;
    *n_non_eog = c->n_slots - rej;
    /* the rejected slots and the other tokens are written below */
    if (!sift__gm_budget(g, (int64_t)rej + c->n_other + c->n_eog))
        return g->fail;
    int complete = (g->m.st[g->cur].flags & F_COMPLETE) != 0;
    /* live: an accepted token whose logit is finite (usually the first) */
    int lv = 0;
    uint32_t k = 0;
    for (size_t r = 0; r <= g->n_rr && !lv; r++) {
        uint32_t stop = r < g->n_rr ? g->rr[2 * r] : c->n_slots;
        for (; k < stop && !lv; k++)
            lv = LOGIT(base, stride, c->stok[k]) > -INFINITY;
        if (r < g->n_rr)
            k = g->rr[2 * r + 1];
    }
    for (int32_t i = 0; i < c->n_eog && complete && !lv; i++)
        lv = LOGIT(base, stride, c->eog[i]) > -INFINITY;
    if (!sift__gm_budget(g, k)) /* the liveness scan read at most k logits */
        return g->fail;
    *live = lv;
    if (!lv)
        return SIFT_OK;
    for (size_t r = 0; r < g->n_rr; r++)
        for (uint32_t j = g->rr[2 * r]; j < g->rr[2 * r + 1]; j++)
            LOGIT(base, stride, c->stok[j]) = -INFINITY;
    for (uint32_t j = 0; j < c->n_other; j++) {
        int32_t t = c->other[j];
        if (!(complete && (c->attr[t] & SIFT_TOKEN_EOG)))
            LOGIT(base, stride, t) = -INFINITY;
    }
    return SIFT_OK;
}

static sift_status dead_msg(sift_grammar *g, size_t n_non_eog, sift_error *err)
{
    char t[128];
    sift__gm_tail_text(g, t, sizeof t);
    if (g->terminated)
        return sift__fail(err, SIFT_E_GRAMMAR_DEAD,
                          "the grammar is terminated (an end-of-generation token was accepted): "
                          "no token can follow");
    if (sift_grammar_is_complete(g) && n_non_eog == 0)
        return sift__fail(err, SIFT_E_GRAMMAR_DEAD,
                          g->core->n_eog
                              ? "grammar is complete but every end-of-generation token is banned"
                              : "grammar is complete but the vocabulary has no "
                                "end-of-generation token");
    return sift__fail(err, SIFT_E_GRAMMAR_DEAD,
                      "no token can continue the grammar at output byte %llu (after `%s`)",
                      (unsigned long long)g->out_len, t);
}

#define BIT(b, t) (((b)[(t) >> 3] >> ((t)&7)) & 1)

sift_status sift_grammar_ban(sift_grammar *g, float *logits, int32_t n_vocab, sift_error *err)
{
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if (!logits)
        return sift__fail(err, SIFT_E_ARG, "logits is NULL");
    if (!g->core->V)
        return sift__fail(err, SIFT_E_ARG, "the grammar has no vocabulary");
    if (n_vocab != g->core->V)
        return sift__fail(err, SIFT_E_ARG, "grammar vocabulary V = %d does not match row V = %d",
                          (int)g->core->V, (int)n_vocab);
    if (g->terminated)
        return dead_msg(g, 0, err);
    if (sift__gm_idle(g))
        return SIFT_OK;
    sift__gm_begin(g, err);
    size_t nne = 0;
    int live = 0;
    if (!tok_state(g)) {
        s = ban_dense(g, logits, sizeof *logits, &nne, &live);
        sift__gm_end_call(g);
        if (s)
            return s;
        return live ? SIFT_OK : dead_msg(g, nne, err);
    }
    s = allowed_bits(g, &nne);
    if (!s && !sift__gm_budget(g, 2 * (int64_t)n_vocab)) /* the two passes below */
        s = g->fail;
    sift__gm_end_call(g);
    if (s)
        return s;
    const uint8_t *bits = g->bits;
    for (int32_t t = 0; t < n_vocab && !live; t++)
        live = BIT(bits, t) && logits[t] > -INFINITY;
    if (!live)
        return dead_msg(g, nne, err);
    for (int32_t t = 0; t < n_vocab; t++)
        if (!BIT(bits, t))
            logits[t] = -INFINITY;
    return SIFT_OK;
}

sift_status sift_grammar_ban_candidates(sift_grammar *g, sift_candidate *c, size_t n,
                                        sift_error *err)
{
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if (!c && n)
        return sift__fail(err, SIFT_E_ARG, "candidates is NULL but n = %zu", n);
    if (!g->core->V)
        return sift__fail(err, SIFT_E_ARG, "the grammar has no vocabulary");
    for (size_t i = 0; i < n; i++)
        if (c[i].id < 0 || c[i].id >= g->core->V)
            return sift__fail_at(err, SIFT_E_TOKEN, (int64_t)i,
                                 "candidate %zu has id %d, outside [0, %d)", i, (int)c[i].id,
                                 (int)g->core->V);
    sift__arr a;
    a.c = c;
    a.n = n;
    a.V = g->core->V;
    a.order = SIFT__ORDER_NONE;
    a.dense = 0;
    return sift__grammar_ban_arr(g, &a, err);
}

sift_status sift__grammar_ban_arr(sift_grammar *g, sift__arr *a, sift_error *err)
{
    if (a->V != g->core->V)
        return sift__fail(err, SIFT_E_ARG, "grammar vocabulary V = %d does not match row V = %d",
                          (int)g->core->V, (int)a->V);
    if (g->terminated)
        return dead_msg(g, 0, err);
    if (sift__gm_idle(g))
        return SIFT_OK;
    sift__gm_begin(g, err);
    int live = 0;
    sift_status s = SIFT_OK;
    size_t nne = 0;
    if (a->dense && a->n == (size_t)a->V && !tok_state(g)) {
        s = ban_dense(g, &a->c[0].logit, sizeof a->c[0], &nne, &live);
    } else if (a->n * 16 >= (size_t)a->V) {
        /* many candidates: one trie walk */
        s = allowed_bits(g, &nne);
        if (!s && !sift__gm_budget(g, 2 * (int64_t)a->n))
            s = g->fail;
        if (!s) {
            for (size_t i = 0; i < a->n && !live; i++)
                live = BIT(g->bits, a->c[i].id) && a->c[i].logit > -INFINITY;
            if (live) {
                for (size_t i = 0; i < a->n; i++)
                    if (!BIT(g->bits, a->c[i].id))
                        a->c[i].logit = -INFINITY;
            }
        }
    } else {
        /* few: each candidate's piece through the cached transitions;
         * decisions go to the bitmap (cleared per id) so that the array is
         * only written once the step is known to succeed */
        if (!sift__gm_budget(g, (int64_t)a->n))
            s = g->fail;
        for (size_t i = 0; i < a->n && !s; i++) {
            int32_t t = a->c[i].id;
            int32_t y = sift__gm_token_next(g, g->cur, t);
            if (y < 0) {
                s = g->fail;
                break;
            }
            if (y > 0) {
                g->bits[t >> 3] |= (uint8_t)(1u << (t & 7));
                nne += !(g->core->attr[t] & SIFT_TOKEN_EOG);
                live |= a->c[i].logit > -INFINITY;
            } else {
                g->bits[t >> 3] &= (uint8_t) ~(1u << (t & 7));
            }
        }
        if (!s && live)
            for (size_t i = 0; i < a->n; i++)
                if (!BIT(g->bits, a->c[i].id))
                    a->c[i].logit = -INFINITY;
    }
    sift__gm_end_call(g);
    if (s)
        return s;
    if (!live)
        return dead_msg(g, nne, err);
    sift__arr_touched(a);
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* Bitmasks (sift_grammar_fill_bitmask) and the mask cache             */
/* ------------------------------------------------------------------ */

/* Sets bit t of the word mask w. */
#define WSET(w, t) ((w)[(uint32_t)(t) >> 5] |= 1u << ((uint32_t)(t)&31))
#define WCLR(w, t) ((w)[(uint32_t)(t) >> 5] &= ~(1u << ((uint32_t)(t)&31)))

/* ------------------------------------------------------------------ */
/* Counted strings                                                     */
/* ------------------------------------------------------------------ */

/* The counted path takes a state whose characters of L all lead, one
 * character at a time, through one chain of states that rejects them
 * all within this many characters (a string with a maxLength, or a
 * minLength, near its end). */
#define CNT_DMAX 24
/* At most this many root entries keep their masks at a time (2 x 300 KB
 * on cl100k). */
#define CNT_DM_HELD 2

/* Builds e->dm (gm_sigent) for the L of e, a root entry: one pass over
 * the trie's paths made of L characters (the decoder as in sig_build),
 * cut below CNT_DMAX characters, then each mask OR-ed into the next. One
 * unit per node visited and two per mask word. */
static sift_status dm_build(sift_grammar *g, gm_sigent *e)
{
    const gm_core *c = g->core;
    const gm_tnode *tr = c->tr;
    size_t nw = g->mc_words, words = CNT_DMAX * nw;
    uint64_t L0 = e->loop[0], L1 = e->loop[1];
    int u8 = (L0 >> 1) & 1;
    int held = 0; /* at most CNT_DM_HELD entries keep masks */
    for (int k = 0; k < SIG_SLOTS; k++) {
        gm_sigent *o = &g->sig[k];
        if (o == e || !o->dm)
            continue;
        if (++held >= CNT_DM_HELD) {
            sift__free(&g->al, o->dm);
            o->dm = NULL;
            o->cap_dm = 0;
            o->dm_ok = 0;
        }
    }
    if (!fit(g, &e->dm, &e->cap_dm, words, sizeof *e->dm))
        return g->fail;
    if (!sift__gm_budget(g, 2 * (int64_t)words))
        return g->fail;
    memset(e->dm, 0, words * sizeof *e->dm);
    uint8_t *dec = g->sig_dec, *cd = g->sig_dec + c->tmaxd + 1;
    dec[0] = 0;
    cd[0] = 0;
    uint32_t i = 0, walked = 0;
    while (i < c->tn) {
        const gm_tnode *nd = &tr[i];
        if (!walk_tick(g, &walked))
            return g->fail;
        uint32_t d = nd->db >> 8, b = nd->db & 0xff;
        unsigned pd = dec[d - 1], ch = cd[d - 1] + (pd == 0);
        int dn = sift__gm_u8_next(pd, b);
        if (dn < 0 || (pd == 0 && !in_loop(sift__gm_group(b), L0, L1, u8)) || ch > CNT_DMAX) {
            i = nd->end; /* broken UTF-8, an exit, or too many characters */
            continue;
        }
        /* the tokens ending here come before the children's */
        uint32_t stop = i + 1 < nd->end ? tr[i + 1].slot : nd->slot_end;
        uint32_t *m = e->dm + (size_t)(ch - 1) * nw;
        for (uint32_t t = nd->slot; t < stop; t++)
            WSET(m, c->stok[t]);
        dec[d] = (uint8_t)dn;
        cd[d] = (uint8_t)ch;
        i++;
    }
    if (!sift__gm_budget(g, walked))
        return g->fail;
    for (size_t dd = 1; dd < CNT_DMAX; dd++) {
        uint32_t *m = e->dm + dd * nw;
        const uint32_t *pv = m - nw;
        for (size_t j = 0; j < nw; j++)
            m[j] |= pv[j];
    }
    e->dm_ok = 1;
    g->cnt_builds++;
    return SIFT_OK;
}

/* Whether every byte of L0 / L1 (ASCII groups other than 0) and, with
 * group 1 in L0, every multi-byte character leads from y to z (0: is
 * rejected; a character then at its lead byte): 1 yes, 0 no, -1 on
 * failure. */
static int cnt_all_to(sift_grammar *g, uint32_t y, uint64_t L0, uint64_t L1, int32_t z)
{
    for (unsigned b = 3; b < 128; b++) {
        if (!(((b < 64 ? L0 : L1) >> (b & 63)) & 1))
            continue;
        int32_t t = sift__gm_step(g, y, b);
        if (t != z)
            return t < 0 ? -1 : 0;
    }
    if (!((L0 >> 1) & 1))
        return 1;
    if (z > 0) {
        int32_t t = sift__gm_u8_target(g, y);
        return t < 0 ? -1 : t == z;
    }
    for (unsigned b = 0xC2; b <= 0xF4; b++) {
        int32_t t = sift__gm_step(g, y, b);
        if (t != 0)
            return t < 0 ? -1 : 0;
    }
    return 1;
}

/* The counted path's chain from state x (no pending sequence): L, the
 * ASCII groups but 0 whose byte leads from x to one state ys[1], and
 * group 1 when every multi-byte character does (sift__gm_u8_target);
 * then ys[k + 1] the state every character of L leads to from ys[k],
 * until a state ys[n] that rejects every one (1 <= n <= CNT_DMAX). A
 * path of L characters from x is then in ys[k] after k of them (inside
 * a character, in a live partial state while k < n) and rejected at
 * character n + 1. Returns n with L in *L0, *L1; 0 when x does not
 * qualify (kept in F_CNTNO); -1 on failure. The states come from the
 * cached transitions (each row filled once), one unit per byte asked. */
static int cnt_chain(sift_grammar *g, uint32_t x, uint32_t *ys, uint64_t *L0, uint64_t *L1)
{
    gm_state *sx = &g->m.st[x];
    if (!g->core->erase_pos || x == 0 || sx->set_len == 0 || sx->rem != 0 || (sx->flags & F_CNTNO))
        return 0;
    if (sift__gm_row_fill(g, x) < 0)
        return -1;
    sx = &g->m.st[x];
    /* a shifted loop on many groups and few bytes left: a counter of
     * one-byte copies with c of them left has mincnt <= c + 1 (a state
     * whose copies take more bytes each is left to the walk) */
    uint64_t s0 = sx->sl[0] & ~7ull, s1 = sx->sl[1];
    if (popcount64(s0) + popcount64(s1) + 1 < SIG_MIN_GROUPS || sx->mincnt > CNT_DMAX + 1) {
        sx->flags |= F_CNTNO;
        return 0;
    }
    unsigned bs = s0 ? (unsigned)__builtin_ctzll(s0) : 64 + (unsigned)__builtin_ctzll(s1);
    if (!sift__gm_budget(g, 160 * (int64_t)(CNT_DMAX + 1)))
        return -1;
    int32_t y1 = sift__gm_step(g, x, bs);
    if (y1 < 0)
        return -1;
    uint64_t l0 = 0, l1 = 0;
    for (unsigned b = 3; b < 128 && y1 > 0; b++) {
        if (sift__gm_group(b) != b)
            continue; /* group 0 */
        int32_t t = sift__gm_step(g, x, b);
        if (t < 0)
            return -1;
        if (t == y1)
            *(b < 64 ? &l0 : &l1) |= 1ull << (b & 63);
    }
    int32_t z = y1 > 0 ? sift__gm_u8_target(g, x) : 0;
    if (z < 0)
        return -1;
    if (z > 0 && z == y1)
        l0 |= 2;
    if (y1 <= 0 || popcount64(l0) + popcount64(l1) < SIG_MIN_GROUPS) {
        g->m.st[x].flags |= F_CNTNO;
        return 0;
    }
    ys[0] = x;
    ys[1] = (uint32_t)y1;
    for (int k = 1;; k++) {
        uint32_t y = ys[k];
        if (g->m.st[y].rem != 0)
            break;
        if (sift__gm_row_fill(g, y) < 0)
            return -1;
        int32_t nx = sift__gm_step(g, y, bs);
        if (nx < 0)
            return -1;
        if (nx == 0 || k == CNT_DMAX) {
            int ok = nx == 0 ? cnt_all_to(g, y, l0, l1, 0) : 0;
            if (ok < 0)
                return -1;
            if (!ok)
                break;
            *L0 = l0;
            *L1 = l1;
            return k;
        }
        int ok = cnt_all_to(g, y, l0, l1, nx);
        if (ok < 0)
            return -1;
        if (!ok)
            break;
        ys[k + 1] = (uint32_t)nx;
    }
    g->m.st[x].flags |= F_CNTNO;
    return 0;
}

/* The mask of the current state through the counted path: 1 when w
 * holds the tokens of the trie it accepts (the other tokens and the EOG
 * rule are the caller's), 0 when the state does not qualify, -1 on
 * failure; w is written only once nothing can fail. With the chain ys of
 * n states (cnt_chain) and the root entry of L (sig_build, with dm): a
 * token whose path is made of L characters is accepted exactly when it
 * starts at most n of them (dm's mask n); one that breaks UTF-8 on such
 * a path never is; one that leaves L at an exit after j characters is
 * judged by the exit's subtree walked from ys[j] when j <= n, and is
 * rejected at character n + 1 < j + 1 otherwise. */
static int cnt_mask(sift_grammar *g, uint32_t *w)
{
    const gm_core *c = g->core;
    uint32_t ys[CNT_DMAX + 1];
    uint64_t L0 = 0, L1 = 0;
    if (!g->sig_on)
        return 0;
    int n = cnt_chain(g, g->cur, ys, &L0, &L1);
    if (n <= 0)
        return n;
    /* taken only when the budget left covers building the root entry
     * and its masks, if they are not there, and a walk of every node */
    gm_sigent *e = sig_root(g, L0, L1);
    int64_t cost = (int64_t)c->tn;
    if (!e)
        cost += (int64_t)c->tn + c->tn / 64 + 1;
    if (!e || !e->dm_ok)
        cost += (int64_t)c->tn + 2 * CNT_DMAX * (int64_t)g->mc_words;
    if (g->max_work - g->work < cost)
        return 0;
    e = sig_get(g, c->tn, L0, L1);
    if (!e)
        return g->fail ? -1 : 0;
    if (!e->dm_ok && dm_build(g, e))
        return -1;
    /* the exits within reach, walked: their rejected ranges in g->rr */
    size_t nw = g->mc_words;
    uint32_t rej = 0;
    int64_t acc = 0;
    g->n_rr = 0;
    if (!sift__gm_budget(g, (int64_t)e->n_rg))
        return -1;
    for (size_t k = 0; k < e->n_rg; k++) {
        const uint32_t *r = e->rg + 4 * k;
        if (r[2] == SIG_DEAD || r[3] > (uint32_t)n)
            continue;
        const gm_tnode *nd = &c->tr[r[2]];
        g->dstk[(nd->db >> 8) - 1] = ys[r[3]];
        if (walk_range(g, r[2], nd->end, 0, &rej))
            return -1;
        acc += r[1] - r[0];
    }
    if (!sift__gm_budget(g, (int64_t)nw + acc))
        return -1;
    memcpy(w, e->dm + (size_t)(n - 1) * nw, nw * sizeof *w);
    size_t q = 0;
    for (size_t k = 0; k < e->n_rg; k++) {
        const uint32_t *r = e->rg + 4 * k;
        if (r[2] == SIG_DEAD || r[3] > (uint32_t)n)
            continue;
        uint32_t t = r[0];
        while (t < r[1]) {
            while (q < g->n_rr && g->rr[2 * q + 1] <= t)
                q++;
            if (q < g->n_rr && g->rr[2 * q] <= t) {
                t = g->rr[2 * q + 1]; /* a rejected range */
                continue;
            }
            uint32_t stop = q < g->n_rr && g->rr[2 * q] < r[1] ? g->rr[2 * q] : r[1];
            for (; t < stop; t++)
                WSET(w, c->stok[t]);
        }
    }
    g->cnt_hits++;
    return 1;
}

/* Computes the allowed set of the current state into w[0 .. mc_words):
 * bit t % 32 of word t / 32 for token t, the bits past V zero. The same
 * set as sift_grammar_ban's (walk's ranges, the other tokens banned but
 * the EOG tokens of a complete state; token elements through
 * allowed_bits). Every failure comes before the first write to w. */
static sift_status mask_compute(sift_grammar *g, uint32_t *w)
{
    const gm_core *c = g->core;
    size_t nw = g->mc_words;
    if (tok_state(g)) {
        size_t nne;
        sift_status s = allowed_bits(g, &nne);
        if (s)
            return s;
        if (!sift__gm_budget(g, (int64_t)nw))
            return g->fail;
        const uint8_t *b = g->bits;
        size_t nb = ((size_t)c->V + 7) / 8;
        for (size_t i = 0; i < nw; i++) {
            uint32_t x = 0;
            for (size_t k = 0; k < 4 && 4 * i + k < nb; k++)
                x |= (uint32_t)b[4 * i + k] << (8 * k);
            w[i] = x;
        }
        return SIFT_OK;
    }
    int complete = (g->m.st[g->cur].flags & F_COMPLETE) != 0;
    int cm = cnt_mask(g, w);
    if (cm < 0)
        return g->fail;
    if (cm) {
        if (complete)
            for (int32_t i = 0; i < c->n_eog; i++)
                WSET(w, c->eog[i]);
        return SIFT_OK;
    }
    uint32_t rej;
    sift_status s = walk(g, &rej);
    if (s)
        return s;
    uint32_t acc = c->n_slots - rej;
    /* write the smaller side: the accepted slots onto zeros, or the
     * rejected ones (and the other tokens) off ones */
    int64_t cost = (int64_t)nw + (acc < rej ? acc : rej) + c->n_other + c->n_eog;
    if (!sift__gm_budget(g, cost))
        return g->fail;
    if (acc <= rej) {
        memset(w, 0, nw * sizeof *w);
        uint32_t k = 0;
        for (size_t r = 0; r <= g->n_rr; r++) {
            uint32_t stop = r < g->n_rr ? g->rr[2 * r] : c->n_slots;
            for (; k < stop; k++)
                WSET(w, c->stok[k]);
            if (r < g->n_rr)
                k = g->rr[2 * r + 1];
        }
    } else {
        memset(w, 0xff, nw * sizeof *w);
        if (c->V & 31)
            w[nw - 1] = (1u << (c->V & 31)) - 1;
        for (uint32_t j = 0; j < c->n_other; j++)
            WCLR(w, c->other[j]);
        for (size_t r = 0; r < g->n_rr; r++)
            for (uint32_t j = g->rr[2 * r]; j < g->rr[2 * r + 1]; j++)
                WCLR(w, c->stok[j]);
    }
    if (complete)
        for (int32_t i = 0; i < c->n_eog; i++)
            WSET(w, c->eog[i]);
    return SIFT_OK;
}

/* Empties the cache when its states belong to another epoch. */
static void mc_sync_epoch(sift_grammar *g)
{
    if (g->mc_epoch == g->epoch)
        return;
    if (g->mc_of)
        memset(g->mc_of, 0, g->cap_of * sizeof *g->mc_of);
    g->mc_n = 0;
    g->mc_next = 0;
    g->mc_epoch = g->epoch;
}

/* Slot k's mask. */
static inline uint32_t *mc_at(const sift_grammar *g, uint32_t k)
{
    return g->mc_blk[k / SIFT__GM_MC_BLOCK] + (size_t)(k % SIFT__GM_MC_BLOCK) * g->mc_words;
}

/* The cached mask of state x (the current one's key), or NULL. */
static const uint32_t *mc_find(sift_grammar *g, uint32_t x)
{
    mc_sync_epoch(g);
    if (x >= g->cap_of || !g->mc_of[x])
        return NULL;
    return mc_at(g, g->mc_of[x] - 1);
}

/* A slot for the mask of state x (evicting the oldest when the
 * cache is full), or NULL when the cache is off; *fail is set when an
 * allocation failed (SIFT_E_NOMEM, nothing changed). The slot is bound
 * to the state by mc_bind once the mask is in it. */
static uint32_t *mc_slot(sift_grammar *g, uint32_t x, uint32_t *slot, int *fail)
{
    *fail = 0;
    size_t bytes = g->mc_words * sizeof(uint32_t);
    size_t max_slots = bytes ? g->mc_limit / bytes : 0;
    if (max_slots > UINT32_MAX / 2)
        max_slots = UINT32_MAX / 2;
    if (max_slots == 0)
        return NULL;
    if (x >= g->cap_of) {
        size_t cap = g->cap_of;
        if (sift__reserve(&g->al, &g->mc_of, &cap, g->cap_of, (size_t)x + 1, sizeof *g->mc_of,
                          64)) {
            *fail = 1;
            return NULL;
        }
        memset(g->mc_of + g->cap_of, 0, (cap - g->cap_of) * sizeof *g->mc_of);
        g->cap_of = cap;
    }
    if (g->mc_n < max_slots && g->mc_n == g->mc_cap) {
        /* one more block, up to the budget; the blocks never move */
        size_t nb = (max_slots + SIFT__GM_MC_BLOCK - 1) / SIFT__GM_MC_BLOCK;
        if (!g->mc_blk) {
            g->mc_blk = sift__calloc(&g->al, nb, sizeof *g->mc_blk);
            if (!g->mc_blk) {
                *fail = 1;
                return NULL;
            }
            g->n_blk = nb;
        }
        size_t want = (size_t)g->mc_cap + SIFT__GM_MC_BLOCK;
        if (want > max_slots)
            want = max_slots;
        uint32_t *ms = sift__grow(&g->al, g->mc_state, g->mc_n, g->mc_cap, want, sizeof *ms);
        if (!ms) {
            *fail = 1;
            return NULL;
        }
        g->mc_state = ms;
        uint32_t *blk = sift__malloc(&g->al, (want - g->mc_cap) * g->mc_words, sizeof *blk);
        if (!blk) {
            /* mc_state grew but the slot count stays (harmless) */
            *fail = 1;
            return NULL;
        }
        g->mc_blk[g->mc_cap / SIFT__GM_MC_BLOCK] = blk;
        g->mc_cap = (uint32_t)want;
    }
    uint32_t k;
    if (g->mc_n < g->mc_cap) {
        k = g->mc_n;
    } else {
        k = g->mc_next;
        g->mc_next = (k + 1) % g->mc_cap;
        g->mc_of[g->mc_state[k]] = 0; /* evicted */
    }
    *slot = k;
    return mc_at(g, k);
}

static void mc_bind(sift_grammar *g, uint32_t x, uint32_t k)
{
    if (k == g->mc_n)
        g->mc_n++;
    g->mc_state[k] = x;
    g->mc_of[x] = k + 1;
}

/* The bitmask of the current state into w[0 .. n_words): from the cache,
 * else computed (and cached). The words past mc_words are zeroed. */
static sift_status fill_one(sift_grammar *g, uint32_t *w, size_t n_words, sift_error *err)
{
    size_t nw = g->mc_words;
    if (g->terminated) {
        /* an end-of-generation token was accepted: nothing follows */
        memset(w, 0, nw * sizeof *w);
    } else if (sift__gm_idle(g)) {
        /* an untriggered lazy grammar allows every token */
        memset(w, 0xff, nw * sizeof *w);
        if (g->core->V & 31)
            w[nw - 1] = (1u << (g->core->V & 31)) - 1;
    } else {
        sift__gm_begin(g, err);
        /* the cache is keyed by the state with the counters no token can
         * reach capped (sift__gm_canon): such states share one mask */
        int32_t key = g->mc_limit ? sift__gm_canon(g, g->cur) : (int32_t)g->cur;
        const uint32_t *hit = key >= 0 ? mc_find(g, (uint32_t)key) : NULL;
        sift_status s = SIFT_OK;
        if (key < 0) {
            s = g->fail;
        } else if (hit) {
            g->mc_hits++;
            if (sift__gm_budget(g, (int64_t)nw))
                memcpy(w, hit, nw * sizeof *w);
            else
                s = g->fail;
        } else {
            uint32_t k = 0;
            int fail;
            uint32_t *slot = mc_slot(g, (uint32_t)key, &k, &fail);
            if (fail) {
                s = sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar's mask cache");
            } else if (!(s = mask_compute(g, w))) {
                g->mc_misses++;
                if (slot) {
                    memcpy(slot, w, nw * sizeof *w);
                    mc_bind(g, (uint32_t)key, k);
                }
            }
        }
        sift__gm_end_call(g);
        if (s)
            return s;
    }
    if (n_words > nw)
        memset(w + nw, 0, (n_words - nw) * sizeof *w);
    return SIFT_OK;
}

sift_status sift__gm_fill(sift_grammar *g, uint32_t *w, size_t n_words, sift_error *err)
{
    return fill_one(g, w, n_words, err);
}

sift_status sift_grammar_fill_bitmask(sift_grammar *g, uint32_t *mask, size_t n_words,
                                      sift_error *err)
{
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if (!mask)
        return sift__fail(err, SIFT_E_ARG, "mask is NULL");
    if (!g->core->V)
        return sift__fail(err, SIFT_E_ARG, "the grammar has no vocabulary");
    if (n_words < g->mc_words)
        return sift__fail(err, SIFT_E_ARG,
                          "mask of %zu words is too short for V = %d (needs %zu words)", n_words,
                          (int)g->core->V, g->mc_words);
    return fill_one(g, mask, n_words, err);
}

/* The batch fill: grammar i's row is rows[i] (i without rows) of a mask
 * of n_rows rows. */
static sift_status fill_rows(sift_grammar *const *grammars, size_t n, const int32_t *rows,
                             uint32_t *masks, size_t n_rows, size_t words_per_row, sift_error *err)
{
    if (n == 0)
        return SIFT_OK;
    if (!grammars || !masks)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL with n = %zu",
                          grammars ? "masks" : "grammars", n);
    if (words_per_row && n_rows > SIZE_MAX / sizeof *masks / words_per_row)
        return sift__fail(err, SIFT_E_ARG, "%zu rows of %zu words overflow", n_rows, words_per_row);
    /* every argument is checked before any row is written */
    for (size_t i = 0; i < n; i++) {
        sift_grammar *g = grammars[i];
        sift_status s = SIFT_OK;
        if (rows && (rows[i] < 0 || (size_t)rows[i] >= n_rows))
            s = sift__fail(err, SIFT_E_ARG, "rows[%zu] = %d is outside the mask's %zu rows", i,
                           (int)rows[i], n_rows);
        else if (!g)
            continue;
        else if (g->magic != MAGIC)
            s = sift__fail(err, SIFT_E_ARG, "grammar %zu is not a live grammar object", i);
        else if (!g->core->V)
            s = sift__fail(err, SIFT_E_ARG, "grammar %zu has no vocabulary", i);
        else if (words_per_row < g->mc_words)
            s = sift__fail(err, SIFT_E_ARG,
                           "rows of %zu words are too short for grammar %zu (V = %d needs %zu "
                           "words)",
                           words_per_row, i, (int)g->core->V, g->mc_words);
        if (s) {
            if (err)
                err->index = (int64_t)i;
            return s;
        }
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t *row = masks + (rows ? (size_t)rows[i] : i) * words_per_row;
        if (!grammars[i]) {
            memset(row, 0xff, words_per_row * sizeof *row);
            continue;
        }
        sift_status s = fill_one(grammars[i], row, words_per_row, err);
        if (s) {
            if (err)
                err->index = (int64_t)i;
            return s;
        }
    }
    return SIFT_OK;
}

sift_status sift_grammars_fill_bitmasks(sift_grammar *const *grammars, size_t n, uint32_t *masks,
                                        size_t words_per_row, sift_error *err)
{
    return fill_rows(grammars, n, NULL, masks, n, words_per_row, err);
}

sift_status sift_grammars_fill_bitmask_rows(sift_grammar *const *grammars, size_t n,
                                            const int32_t *rows, uint32_t *masks, size_t n_rows,
                                            size_t words_per_row, sift_error *err)
{
    if (n && !rows)
        return sift__fail(err, SIFT_E_ARG, "rows is NULL with n = %zu", n);
    return fill_rows(grammars, n, rows, masks, n_rows, words_per_row, err);
}

void sift__gm_mc_free(sift_grammar *g)
{
    for (size_t i = 0; i < g->n_blk; i++)
        sift__free(&g->al, g->mc_blk[i]);
    sift__free(&g->al, g->mc_blk);
    sift__free(&g->al, g->mc_state);
    g->mc_blk = NULL;
    g->n_blk = 0;
    g->mc_state = NULL;
    g->mc_cap = g->mc_n = g->mc_next = 0;
}

void sift__grammar_set_mask_cache(sift_grammar *g, size_t bytes)
{
    g->mc_limit = bytes;
    sift__gm_mc_free(g);
    if (g->mc_of)
        memset(g->mc_of, 0, g->cap_of * sizeof *g->mc_of);
}

void sift__grammar_mask_stats(const sift_grammar *g, uint64_t *hits, uint64_t *misses)
{
    *hits = g->mc_hits;
    *misses = g->mc_misses;
}

void sift__grammar_set_sig(sift_grammar *g, int on)
{
    g->sig_on = on != 0;
}

void sift__grammar_sig_stats(const sift_grammar *g, uint64_t *hits, uint64_t *builds)
{
    *hits = g->sig_hits;
    *builds = g->sig_builds;
}

void sift__grammar_cnt_stats(const sift_grammar *g, uint64_t *masks, uint64_t *builds)
{
    *masks = g->cnt_hits;
    *builds = g->cnt_builds;
}

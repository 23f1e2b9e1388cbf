/*
 * gbnf_match.c - the grammar matcher automaton.
 *
 * One algorithm, kept in one file: the hash-consed parse stacks, their
 * closure and successors, the DFA states over stack sets with their byte
 * transitions, a token's step through them, and the grammar objects that
 * run them over a core. A grammar is a shared immutable core (the
 * compiled rules, a copy of the vocabulary's pieces and attributes, the
 * token trie: gbnf_core.c builds it) plus a per-object matcher with its
 * caches (gbnf_match.h). The sift_grammar object and its calls are in
 * gbnf_grammar.c, the whole-vocabulary pass in gbnf_mask.c, lazy grammars
 * in gbnf_lazy.c.
 *
 * Matching model (docs/grammar.md, "Matcher"):
 * - A parse stack is a list of element positions (top = the next thing
 *   to match). Stacks are hash-consed nodes (pos, parent), so a stack is
 *   one 32-bit id, equal stacks have equal ids, and stacks share tails.
 *   Node 0 is the empty stack: the grammar is complete on it.
 * - A reference at the end of an alternative is a tail call: nothing is
 *   pushed for its return, so right-recursive repetition (R ::= S R |)
 *   keeps stacks at a constant depth however long the output is.
 * - A matcher state is a DFA state: a sorted set of stacks whose tops are
 *   terminals (or the empty stack) plus a pending partial UTF-8 sequence
 *   (the bits so far, bytes remaining, and the allowed range of the next
 *   byte, so overlong forms, surrogates and code points above U+10FFFF
 *   are rejected byte by byte, R-08/R-09). States are interned and their
 *   byte transitions cached in a 256-entry row, built on first use.
 * - A partial state keeps only the stacks whose class can still admit
 *   some completion of the pending bytes; if none can, it is the dead
 *   state. When every kept stack admits every code point the pending
 *   bytes can still become, the bits are dropped (acc = ACC_COVERED):
 *   the outcome no longer depends on them, and the prefixes of all the
 *   multi-byte characters a string admits share one state per depth. So every state but the dead
 * one (id 0) accepts a token ending in it, and the whole-vocabulary pass is one walk of the token
 * trie in preorder with one table lookup per trie edge, skipping every subtree under a dead
 * transition.
 * - EOG tokens are accepted exactly when the empty stack is in the set,
 *   and do not change the state. Token elements (<[id]>, !<[id]>) match by
 *   id when no partial code point is pending. A token with an empty piece
 *   matches only a token element, never "for free".
 * - Caches only grow during a call; between calls (on accept) they are
 *   rebuilt from the current state when they pass their soft size, so a
 *   long generation does not grow memory (and steady state allocates
 *   nothing). Every call has a work budget (units charged as the work is
 *   done, see sift__gm_budget in gbnf_match.h) and caps on live stacks
 *   (checked while a set is built) and stack depth: SIFT_E_GRAMMAR_LIMIT,
 *   state unchanged.
 * - Lazy grammars (sift_grammar_set_lazy, docs/triggers.md): while
 *   untriggered the state stays the initial one, every token is allowed,
 *   and accepted tokens go to the trigger set. If a token fires it, the
 *   replay is run from the initial state without moving `cur`; a token
 *   that is only tried (prepare) or whose replay is rejected is taken
 *   back from the set (sift__trigger_undo), so every failure leaves the
 *   grammar as it was and prepare_accept can vouch for the accept.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "gbnf_match.h"

sift_status sift__gm_fail(sift_grammar *g, sift_status code, const char *fmt, ...)
{
    if (g->fail)
        return g->fail;
    g->fail = code;
    if (g->err) {
        char buf[300];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        sift__fail(g->err, code, "%s", buf);
    }
    return code;
}

void sift__gm_free(gm_caches *m, const sift__alloc *al)
{
    sift__free(al, m->node);
    sift__free(al, m->mark);
    sift__free(al, m->nht);
    sift__free(al, m->arena);
    sift__free(al, m->st);
    sift__free(al, m->trans);
    sift__free(al, m->sht);
    sift__free(al, m->cl);
    sift__free(al, m->scr);
    sift__free(al, m->wl);
    memset(m, 0, sizeof *m);
}

/* Node 0 (empty stack) and state 0 (dead). */
static int gm_init(gm_caches *m, const sift__alloc *al)
{
    memset(m, 0, sizeof *m);
    size_t cn = 0, cs = 0;
    m->nht_cap = 1024;
    m->sht_cap = 256;
    m->nht = sift__malloc(al, m->nht_cap, sizeof *m->nht);
    m->sht = sift__malloc(al, m->sht_cap, sizeof *m->sht);
    if (!m->nht || !m->sht || !sift__gm_grow(al, &m->node, &cn, 0, 256, sizeof(gm_node)) ||
        !sift__gm_grow(al, &m->st, &cs, 0, 16, sizeof(gm_state))) {
        sift__gm_free(m, al);
        return 0;
    }
    m->cap_node = (uint32_t)cn;
    m->cap_st = (uint32_t)cs;
    m->mark = sift__calloc(al, m->cap_node, sizeof *m->mark);
    m->trans = sift__malloc(al, (size_t)m->cap_st * 256, sizeof *m->trans);
    if (!m->mark || !m->trans) {
        sift__gm_free(m, al);
        return 0;
    }
    memset(m->nht, 0xff, m->nht_cap * sizeof *m->nht);
    memset(m->sht, 0xff, m->sht_cap * sizeof *m->sht);
    memset(&m->node[0], 0, sizeof m->node[0]);
    m->node[0].succ_off = UINT32_MAX;
    m->node[0].mincnt = UINT32_MAX;
    m->n_node = 1;
    memset(&m->st[0], 0, sizeof m->st[0]);
    for (int b = 0; b < 256; b++)
        m->trans[b] = 0;
    m->n_st = 1;
    return 1;
}

static uint32_t hash2(uint32_t a, uint32_t b)
{
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

/* Units charged for creating one stack node. */
#define NODE_COST 8

/* Work of sorting n stacks: n (1 + floor(log2 n)). */
static int64_t sort_cost(size_t n)
{
    int64_t lg = 0;
    for (size_t k = n; k > 1; k >>= 1)
        lg++;
    return (int64_t)n * (1 + lg);
}

/* The max_stacks limit, checked while a set is built (n = its size so
 * far, unique), so no set larger than the limit is ever completed. */
static int stacks_ok(sift_grammar *g, size_t n)
{
    if (n <= (size_t)g->max_stacks)
        return 1;
    sift__gm_fail(g, SIFT_E_GRAMMAR_LIMIT,
                  "grammar too ambiguous: more than %d parse stacks at output byte %llu",
                  (int)g->max_stacks, (unsigned long long)g->out_len);
    return 0;
}

/* A fresh mark epoch: m->mark[x] == m->epoch means "seen" until the
 * next call. */
static void new_epoch(gm_caches *m)
{
    if (++m->epoch == 0) {
        memset(m->mark, 0, (size_t)m->cap_node * sizeof *m->mark);
        m->epoch = 1;
    }
}

static int node_rehash(sift_grammar *g)
{
    gm_caches *m = &g->m;
    uint32_t cap = m->nht_cap * 2;
    uint32_t *t = sift__malloc(&g->al, cap, sizeof *t);
    if (!t)
        return 0;
    memset(t, 0xff, (size_t)cap * sizeof *t);
    for (uint32_t i = 1; i < m->n_node; i++) {
        uint32_t h = hash2(m->node[i].pos, m->node[i].parent) & (cap - 1);
        while (t[h] != UINT32_MAX)
            h = (h + 1) & (cap - 1);
        t[h] = i;
    }
    sift__free(&g->al, m->nht);
    m->nht = t;
    m->nht_cap = cap;
    return 1;
}

/* The stack `pos` on top of `parent`; UINT32_MAX on failure (g->fail). */
static uint32_t node_get(sift_grammar *g, uint32_t pos, uint32_t parent)
{
    gm_caches *m = &g->m;
    uint32_t h = hash2(pos, parent) & (m->nht_cap - 1);
    for (; m->nht[h] != UINT32_MAX; h = (h + 1) & (m->nht_cap - 1)) {
        const gm_node *x = &m->node[m->nht[h]];
        if (x->pos == pos && x->parent == parent)
            return m->nht[h];
    }
    /* a new stack is charged like the visits its allocation and hashing
     * cost, so that the budget bounds the memory a call can take */
    if (!sift__gm_budget(g, NODE_COST))
        return UINT32_MAX;
    uint32_t depth = m->node[parent].depth + 1;
    if ((int64_t)depth > g->max_depth) {
        sift__gm_fail(g, SIFT_E_GRAMMAR_LIMIT,
                      "grammar stack depth %u exceeds %d at output byte %llu", (unsigned)depth,
                      (int)g->max_depth, (unsigned long long)g->out_len);
        return UINT32_MAX;
    }
    if (m->n_node >= UINT32_MAX / 2) {
        sift__gm_fail(g, SIFT_E_GRAMMAR_LIMIT, "grammar matcher ran out of stack ids");
        return UINT32_MAX;
    }
    if (m->n_node == m->cap_node) {
        size_t cn = m->cap_node, cm = m->cap_node;
        if (!sift__gm_grow(&g->al, &m->node, &cn, m->n_node, (size_t)m->n_node + 1,
                           sizeof(gm_node)) ||
            !sift__gm_grow(&g->al, &m->mark, &cm, m->n_node, (size_t)m->n_node + 1,
                           sizeof(uint32_t))) {
            sift__gm_fail(g, SIFT_E_NOMEM, "out of memory while growing grammar stacks");
            return UINT32_MAX;
        }
        for (size_t k = m->n_node; k < cm; k++)
            m->mark[k] = 0;
        m->cap_node = (uint32_t)(cn < cm ? cn : cm);
    }
    if ((size_t)(m->n_node + 1) * 2 > m->nht_cap) {
        if (!node_rehash(g)) {
            sift__gm_fail(g, SIFT_E_NOMEM, "out of memory while growing grammar stacks");
            return UINT32_MAX;
        }
        h = hash2(pos, parent) & (m->nht_cap - 1);
        while (m->nht[h] != UINT32_MAX)
            h = (h + 1) & (m->nht_cap - 1);
    }
    uint32_t id = m->n_node++;
    gm_node *x = &m->node[id];
    x->pos = pos;
    x->parent = parent;
    x->depth = depth;
    x->succ_off = UINT32_MAX;
    x->succ_len = 0;
    x->canon = UINT32_MAX;
    x->ecanon = UINT32_MAX;
    x->mincnt = 0;
    m->mark[id] = 0;
    m->nht[h] = id;
    return id;
}

/* Return address after `pos`: a tail call pushes nothing. */
static uint32_t cont(sift_grammar *g, uint32_t pos, uint32_t parent)
{
    if (sift__gm_is_end(sift__gm_el(g, pos)->type))
        return parent;
    return node_get(g, pos, parent);
}

static size_t sort_unique(uint32_t *v, size_t n)
{
    if (n < 2)
        return n;
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            uint32_t x = v[i];
            size_t j = i;
            while (j > 0 && v[j - 1] > x) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
    } else {
        /* Shell sort (Ciura's gaps, then x2.25): no calls, no scratch */
        static const size_t gaps[] = {1, 4, 10, 23, 57, 132, 301, 701, 1577, 3548};
        size_t gi = sizeof gaps / sizeof gaps[0];
        size_t top = gaps[gi - 1];
        while (top * 9 / 4 < n)
            top = top * 9 / 4;
        for (size_t gap = top;;) {
            for (size_t i = gap; i < n; i++) {
                uint32_t x = v[i];
                size_t j = i;
                while (j >= gap && v[j - gap] > x) {
                    v[j] = v[j - gap];
                    j -= gap;
                }
                v[j] = x;
            }
            if (gap == 1)
                break;
            if (gap > gaps[gi - 1])
                gap = gap * 4 / 9 > gaps[gi - 1] ? gap * 4 / 9 : gaps[gi - 1];
            else
                gap = gaps[--gi - 1];
        }
    }
    size_t k = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[k - 1])
            v[k++] = v[i];
    return k;
}

/* Expands the seeds until every stack's top is a terminal (or the stack
 * is empty); the result, sorted and unique, is g->m.cl[0 .. n_cl). */
static int closure(sift_grammar *g, const uint32_t *seeds, size_t ns)
{
    gm_caches *m = &g->m;
    const gm_core *c = g->core;
    m->n_cl = 0;
    new_epoch(m);
    size_t n_wl = 0;
    if (!sift__gm_budget(g, (int64_t)ns))
        return 0;
    if (!sift__gm_grow(&g->al, &m->wl, &m->cap_wl, 0, ns + 16, sizeof(uint32_t)))
        return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
    memcpy(m->wl, seeds, ns * sizeof *seeds);
    n_wl = ns;
    while (n_wl) {
        uint32_t x = m->wl[--n_wl];
        if (m->mark[x] == m->epoch)
            continue;
        m->mark[x] = m->epoch;
        if (!sift__gm_budget(g, 1))
            return 0;
        const sift__gelem *e = x ? sift__gm_el(g, m->node[x].pos) : NULL;
        if (!x || e->type != SIFT__G_REF) {
            if (m->n_cl + 1 > m->cap_cl &&
                !sift__gm_grow(&g->al, &m->cl, &m->cap_cl, m->n_cl, m->n_cl + 1, sizeof(uint32_t)))
                return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
            m->cl[m->n_cl++] = x;
            if (!stacks_ok(g, m->n_cl))
                return 0;
            continue;
        }
        uint32_t ret = cont(g, m->node[x].pos + 1, m->node[x].parent);
        if (ret == UINT32_MAX)
            return 0;
        uint32_t r = e->v;
        uint32_t na = c->alt_off[r + 1] - c->alt_off[r];
        if (!sift__gm_budget(g, na))
            return 0;
        if (!sift__gm_grow(&g->al, &m->wl, &m->cap_wl, n_wl, n_wl + na, sizeof(uint32_t)))
            return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
        for (uint32_t a = c->alt_off[r]; a < c->alt_off[r + 1]; a++) {
            uint32_t y = cont(g, c->alt[a], ret);
            if (y == UINT32_MAX)
                return 0;
            m->wl[n_wl++] = y;
        }
    }
    if (!sift__gm_budget(g, sort_cost(m->n_cl)))
        return 0;
    m->n_cl = sort_unique(m->cl, m->n_cl);
    return 1;
}

static int arena_put(sift_grammar *g, const uint32_t *v, size_t n, uint32_t *off)
{
    gm_caches *m = &g->m;
    if (m->n_arena + n >= UINT32_MAX)
        return sift__gm_fail(g, SIFT_E_GRAMMAR_LIMIT, "grammar matcher cache is full"), 0;
    if (!sift__gm_grow(&g->al, &m->arena, &m->cap_arena, m->n_arena, m->n_arena + n,
                       sizeof(uint32_t)))
        return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
    if (n)
        memcpy(m->arena + m->n_arena, v, n * sizeof *v);
    *off = (uint32_t)m->n_arena;
    m->n_arena += n;
    return 1;
}

/* The successors of stack s (its top terminal consumed), memoized. */
static int succ(sift_grammar *g, uint32_t s, uint32_t *off, uint32_t *len)
{
    gm_caches *m = &g->m;
    if (m->node[s].succ_off != UINT32_MAX) {
        *off = m->node[s].succ_off;
        *len = m->node[s].succ_len;
        return 1;
    }
    uint32_t seed = cont(g, m->node[s].pos + 1, m->node[s].parent);
    if (seed == UINT32_MAX || !closure(g, &seed, 1))
        return 0;
    uint32_t o;
    if (!sift__gm_budget(g, (int64_t)m->n_cl) || !arena_put(g, m->cl, m->n_cl, &o))
        return 0;
    m->node[s].succ_off = o;
    m->node[s].succ_len = (uint32_t)m->n_cl;
    *off = o;
    *len = (uint32_t)m->n_cl;
    return 1;
}

static uint32_t state_hash(const uint32_t *v, size_t n, uint32_t acc, uint32_t rem, uint32_t lo,
                           uint32_t hi)
{
    /* a word at a time (the sets are long; FNV went a byte at a time) */
    uint64_t h = ((uint64_t)acc << 32 | rem << 16 | lo << 8 | hi) ^ 0x9E3779B97F4A7C15ull;
    for (size_t k = 0; k < n; k++) {
        h = (h ^ v[k]) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    h *= 0xc4ceb9fe1a85ec53ull;
    return (uint32_t)(h ^ (h >> 32));
}

static int state_rehash(sift_grammar *g)
{
    gm_caches *m = &g->m;
    uint32_t cap = m->sht_cap * 2;
    uint32_t *t = sift__malloc(&g->al, cap, sizeof *t);
    if (!t)
        return 0;
    memset(t, 0xff, (size_t)cap * sizeof *t);
    for (uint32_t i = 1; i < m->n_st; i++) {
        const gm_state *s = &m->st[i];
        uint32_t h =
            state_hash(m->arena + s->set_off, s->set_len, s->acc, s->rem, s->lo, s->hi) & (cap - 1);
        while (t[h] != UINT32_MAX)
            h = (h + 1) & (cap - 1);
        t[h] = i;
    }
    sift__free(&g->al, m->sht);
    m->sht = t;
    m->sht_cap = cap;
    return 1;
}

/* Interns the state (v[0..n) sorted unique, partial). Returns its id, 0
 * for the empty set, -1 on failure. */
static int32_t state_get(sift_grammar *g, const uint32_t *v, size_t n, uint32_t acc, uint32_t rem,
                         uint32_t lo, uint32_t hi)
{
    gm_caches *m = &g->m;
    if (n == 0)
        return 0;
    if (n > (size_t)g->max_stacks) {
        sift__gm_fail(g, SIFT_E_GRAMMAR_LIMIT,
                      "grammar too ambiguous: %zu parse stacks at output byte %llu", n,
                      (unsigned long long)g->out_len);
        return -1;
    }
    if (!sift__gm_budget(g, (int64_t)n))
        return -1;
    uint32_t h = state_hash(v, n, acc, rem, lo, hi) & (m->sht_cap - 1);
    for (; m->sht[h] != UINT32_MAX; h = (h + 1) & (m->sht_cap - 1)) {
        const gm_state *s = &m->st[m->sht[h]];
        if (s->set_len == n && s->acc == acc && s->rem == rem && s->lo == lo && s->hi == hi) {
            if (!sift__gm_budget(g, (int64_t)n))
                return -1;
            if (n == 0 || memcmp(m->arena + s->set_off, v, n * sizeof *v) == 0)
                return (int32_t)m->sht[h];
        }
    }
    if (m->n_st >= (1u << 24)) {
        sift__gm_fail(g, SIFT_E_GRAMMAR_LIMIT, "grammar matcher cache is full");
        return -1;
    }
    if (!sift__gm_budget(g, 256)) /* the new state's transition row */
        return -1;
    /* v may point into the arena or scratch; copy first (arena may move) */
    uint32_t off;
    if (!arena_put(g, v, n, &off))
        return -1;
    if (m->n_st == m->cap_st) {
        size_t cs = m->cap_st;
        size_t ct = cs;
        if (!sift__gm_grow(&g->al, &m->st, &cs, m->n_st, (size_t)m->n_st + 1, sizeof(gm_state))) {
            sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
            return -1;
        }
        /* the transition rows follow the states' capacity (sift__grow) */
        int32_t *tr =
            sift__grow(&g->al, m->trans, (size_t)m->n_st * 256, ct * 256, cs * 256, sizeof *tr);
        if (!tr) {
            /* keep st grown (harmless), capacity of trans unchanged */
            m->cap_st = (uint32_t)ct;
            sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
            return -1;
        }
        m->trans = tr;
        m->cap_st = (uint32_t)cs;
    }
    if ((size_t)(m->n_st + 1) * 2 > m->sht_cap) {
        if (!state_rehash(g)) {
            sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
            return -1;
        }
        h = state_hash(m->arena + off, n, acc, rem, lo, hi) & (m->sht_cap - 1);
        while (m->sht[h] != UINT32_MAX)
            h = (h + 1) & (m->sht_cap - 1);
    }
    uint32_t id = m->n_st++;
    gm_state *s = &m->st[id];
    s->set_off = off;
    s->set_len = (uint32_t)n;
    s->acc = acc;
    s->rem = (uint8_t)rem;
    s->lo = (uint8_t)lo;
    s->hi = (uint8_t)hi;
    s->flags = 0;
    s->ctl_loops = 0;
    s->loop[0] = s->loop[1] = 0;
    s->canon = UINT32_MAX;
    s->eid = UINT32_MAX;
    s->mincnt = 0;
    s->slev = UINT32_MAX;
    s->sl[0] = s->sl[1] = 0;
    s->n_via = 0;
    const uint32_t *set = m->arena + off;
    if (set[0] == 0)
        s->flags |= F_COMPLETE;
    for (size_t k = 0; k < n; k++)
        if (set[k] && sift__gm_is_tok(sift__gm_el(g, m->node[set[k]].pos)->type)) {
            s->flags |= F_HASTOK;
            break;
        }
    for (int b = 0; b < 256; b++)
        m->trans[(size_t)id * 256 + (size_t)b] = -1;
    m->sht[h] = id;
    return (int32_t)id;
}

static int top_matches(const sift_grammar *g, const sift__gelem *e, uint32_t cp)
{
    switch (e->type) {
    case SIFT__G_CHAR: return e->v == cp;
    case SIFT__G_ANY: return 1;
    case SIFT__G_CLASS: return sift__gclass_has(&g->core->g, &g->core->g.cls[e->v], cp);
    default: return 0;
    }
}

static int top_meets(const sift_grammar *g, const sift__gelem *e, uint32_t lo, uint32_t hi)
{
    switch (e->type) {
    case SIFT__G_CHAR: return e->v >= lo && e->v <= hi;
    case SIFT__G_ANY: return 1;
    case SIFT__G_CLASS: return sift__gclass_meets(&g->core->g, &g->core->g.cls[e->v], lo, hi);
    default: return 0;
    }
}

/* True if every code point of [lo, hi] is admitted by element e (a
 * terminal). Classes hold sorted, merged ranges, so a plain class covers
 * [lo, hi] only inside one range, and a negated one when no range meets
 * it. */
static int top_covers(const sift_grammar *g, const sift__gelem *e, uint32_t lo, uint32_t hi)
{
    switch (e->type) {
    case SIFT__G_CHAR: return e->v == lo && e->v == hi;
    case SIFT__G_ANY: return 1;
    case SIFT__G_CLASS: {
        const sift__gclass *k = &g->core->g.cls[e->v];
        const uint32_t *r = g->core->g.rng + 2 * (size_t)k->first;
        for (uint32_t j = 0; j < k->n; j++) {
            if (!k->neg && r[2 * j] <= lo && hi <= r[2 * j + 1])
                return 1;
            if (k->neg && r[2 * j] <= hi && lo <= r[2 * j + 1])
                return 0;
        }
        return k->neg != 0;
    }
    default: return 0;
    }
}

/* The `acc` of a partial state whose every stack admits every code point
 * the pending sequence can still become: the bits no longer matter (the
 * outcome is the same whatever the remaining bytes are, as long as they
 * are valid), so such states are interned without them, and the many
 * prefixes of multi-byte characters inside a string share one state per
 * depth. Never a real accumulator (at most 21 bits). */
#define ACC_COVERED UINT32_MAX

/* Adds the stacks v[0 .. n) to the set being built in m->scr, skipping
 * those already in it (marked with the current epoch), and checks
 * max_stacks as it grows. Callers open the epoch with new_epoch once all
 * the successor sets they need are memoized (succ runs closures, which
 * take epochs of their own). */
static int union_add(sift_grammar *g, const uint32_t *v, size_t n)
{
    gm_caches *m = &g->m;
    if (!sift__gm_budget(g, (int64_t)n))
        return 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t y = v[k];
        if (m->mark[y] == m->epoch)
            continue;
        m->mark[y] = m->epoch;
        if (!stacks_ok(g, m->n_scr + 1))
            return 0;
        if (m->n_scr + 1 > m->cap_scr &&
            !sift__gm_grow(&g->al, &m->scr, &m->cap_scr, m->n_scr, m->n_scr + 1, sizeof(uint32_t)))
            return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
        m->scr[m->n_scr++] = y;
    }
    return 1;
}

/* Sorts the union built by union_add (unique already). */
static int union_sort(sift_grammar *g)
{
    gm_caches *m = &g->m;
    if (!sift__gm_budget(g, sort_cost(m->n_scr)))
        return 0;
    m->n_scr = sort_unique(m->scr, m->n_scr);
    return 1;
}

/* State after consuming code point cp in state x: the union of the
 * successors of the stacks whose top admits cp. First every successor
 * set is memoized, then the union is built in one epoch. */
static int32_t advance(sift_grammar *g, uint32_t x, uint32_t cp)
{
    /* a covered partial state: every stack admits the code point */
    int all = g->m.st[x].acc == ACC_COVERED;
    gm_caches *m = &g->m;
    uint32_t sl = m->st[x].set_len;
    if (!sift__gm_budget(g, 2 * (int64_t)sl))
        return -1;
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t s = m->arena[m->st[x].set_off + k];
        uint32_t o, l;
        if (s && (all || top_matches(g, sift__gm_el(g, m->node[s].pos), cp)) && !succ(g, s, &o, &l))
            return -1;
    }
    m->n_scr = 0;
    new_epoch(m);
    uint32_t so = m->st[x].set_off; /* the arena may have moved */
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t s = m->arena[so + k];
        if (!s || !(all || top_matches(g, sift__gm_el(g, m->node[s].pos), cp)))
            continue;
        if (!union_add(g, m->arena + m->node[s].succ_off, m->node[s].succ_len))
            return -1;
    }
    if (!union_sort(g))
        return -1;
    return state_get(g, m->scr, m->n_scr, 0, 0, 0, 0);
}

/* State with a pending partial sequence: keeps the stacks that admit some
 * completion. */
static int32_t partial(sift_grammar *g, uint32_t x, uint32_t acc, uint32_t rem, uint32_t lo,
                       uint32_t hi)
{
    gm_caches *m = &g->m;
    uint32_t sh = 6 * (rem - 1);
    uint32_t cmin = ((acc << 6) | (lo & 0x3Fu)) << sh;
    uint32_t cmax = (((acc << 6) | (hi & 0x3Fu)) << sh) | ((1u << sh) - 1);
    m->n_scr = 0;
    uint32_t so = m->st[x].set_off, sl = m->st[x].set_len;
    if (!sift__gm_budget(g, sl))
        return -1;
    if (!sift__gm_grow(&g->al, &m->scr, &m->cap_scr, 0, sl, sizeof(uint32_t))) {
        sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
        return -1;
    }
    int covered = 1;
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t s = m->arena[so + k];
        if (s && top_meets(g, sift__gm_el(g, m->node[s].pos), cmin, cmax)) {
            m->scr[m->n_scr++] = s;
            covered &= top_covers(g, sift__gm_el(g, m->node[s].pos), cmin, cmax);
        }
    }
    return state_get(g, m->scr, m->n_scr, covered ? ACC_COVERED : acc, rem, lo, hi);
}

/* The stack of n through erase_pos (memoized in ecanon) and the fewest
 * copies of its nodes (mincnt), as canon_node does it. */
static uint32_t erase_node(sift_grammar *g, uint32_t n)
{
    gm_caches *m = &g->m;
    const uint32_t *ep = g->core->erase_pos;
    const uint16_t *pc = g->core->pcnt;
    size_t d = 0;
    for (uint32_t y = n; m->node[y].ecanon == UINT32_MAX; y = m->node[y].parent) {
        if (!sift__gm_grow(&g->al, &m->wl, &m->cap_wl, d, d + 1, sizeof(uint32_t))) {
            sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
            return UINT32_MAX;
        }
        m->wl[d++] = y;
    }
    if (!sift__gm_budget(g, (int64_t)d + 1))
        return UINT32_MAX;
    while (d) {
        uint32_t y = m->wl[--d];
        uint32_t par = m->node[y].parent, pos = m->node[y].pos;
        uint32_t pe = m->node[par].ecanon, mc = m->node[par].mincnt;
        uint32_t z = ep[pos] == pos && pe == par ? y : node_get(g, ep[pos], pe);
        if (z == UINT32_MAX)
            return UINT32_MAX;
        m->node[y].ecanon = z;
        m->node[y].mincnt = pc[pos] != UINT16_MAX && pc[pos] < mc ? pc[pos] : mc;
    }
    return m->node[n].ecanon;
}

/* Sets eid and mincnt of state x (gm_state); 0 on failure. */
static int erase_state(sift_grammar *g, uint32_t x)
{
    gm_caches *m = &g->m;
    if (m->st[x].eid != UINT32_MAX)
        return 1;
    uint32_t so = m->st[x].set_off, sl = m->st[x].set_len;
    if (!sift__gm_budget(g, 2 * (int64_t)sl))
        return 0;
    for (uint32_t k = 0; k < sl; k++)
        if (erase_node(g, m->arena[so + k]) == UINT32_MAX)
            return 0;
    if (!sift__gm_grow(&g->al, &m->scr, &m->cap_scr, 0, sl, sizeof(uint32_t)))
        return sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
    int same = 1;
    uint32_t mc = UINT32_MAX;
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t n = m->arena[so + k];
        m->scr[k] = m->node[n].ecanon;
        same &= m->scr[k] == n;
        if (m->node[n].mincnt < mc)
            mc = m->node[n].mincnt;
    }
    int32_t y = (int32_t)x;
    if (!same) {
        if (!sift__gm_budget(g, sort_cost(sl)))
            return 0;
        size_t n = sort_unique(m->scr, sl);
        const gm_state *s = &m->st[x];
        y = state_get(g, m->scr, n, s->acc, s->rem, s->lo, s->hi);
        if (y < 0)
            return 0;
        /* its own eid; its mincnt stays 0 (unknown: no shifted loop) */
        if (m->st[y].eid == UINT32_MAX)
            m->st[y].eid = (uint32_t)y;
    }
    m->st[x].eid = (uint32_t)y;
    m->st[x].mincnt = mc;
    return 1;
}

static int32_t note_trans(sift_grammar *g, uint32_t x, unsigned b, int32_t y);

/* The ASCII code points element e (a stack's top) admits, as top_matches
 * answers them: a bit per code point below 128. */
static void top_ascii(const sift_grammar *g, const sift__gelem *e, uint64_t a[2])
{
    switch (e->type) {
    case SIFT__G_CHAR:
        if (e->v < 128)
            a[e->v >> 6] |= 1ull << (e->v & 63);
        break;
    case SIFT__G_ANY: a[0] = a[1] = ~0ull; break;
    case SIFT__G_CLASS:
        a[0] |= g->core->g.cls[e->v].ascii[0];
        a[1] |= g->core->g.cls[e->v].ascii[1];
        break;
    default: break;
    }
}

/* Whether some stack of state x (no pending sequence) admits the ASCII
 * byte b: advance(x, b) is the dead state exactly when none does, for it
 * unions the successors of the stacks whose top admits b and the empty
 * union is state 0. The set is gathered once per state (one unit per
 * stack), then each byte costs one. -1 past the budget. */
static int ascii_admitted(sift_grammar *g, uint32_t x, unsigned b)
{
    gm_caches *m = &g->m;
    gm_state *s = &m->st[x];
    if (!(s->flags & F_ADM)) {
        if (!sift__gm_budget(g, (int64_t)s->set_len))
            return -1;
        uint64_t a[2] = {0, 0};
        for (uint32_t k = 0; k < s->set_len; k++) {
            uint32_t n = m->arena[s->set_off + k];
            if (n)
                top_ascii(g, sift__gm_el(g, m->node[n].pos), a);
        }
        s->adm[0] = a[0];
        s->adm[1] = a[1];
        s->flags |= F_ADM;
    }
    if (!sift__gm_budget(g, 1))
        return -1;
    return (int)((s->adm[b >> 6] >> (b & 63)) & 1);
}

/* advance(x, b) for an ASCII byte b, through the state's memo of the
 * last transitions by the set of stacks admitting their byte (advance
 * depends on nothing else): one unit per stack tested. */
static int32_t advance_ascii(sift_grammar *g, uint32_t x, unsigned b)
{
    gm_caches *m = &g->m;
    gm_state *s = &m->st[x];
    uint32_t sl = s->set_len;
    if (sl > 64)
        return advance(g, x, b);
    if (!sift__gm_budget(g, sl))
        return -1;
    uint64_t via = 0;
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t n = m->arena[s->set_off + k];
        if (n && top_matches(g, sift__gm_el(g, m->node[n].pos), b))
            via |= 1ull << k;
    }
    uint32_t nv = s->n_via < SIFT__GM_VIA ? s->n_via : SIFT__GM_VIA;
    for (uint32_t j = 0; j < nv; j++)
        if (s->via[j] == via)
            return s->via_to[j];
    int32_t y = advance(g, x, b);
    if (y >= 0) {
        s = &m->st[x];
        s->via[s->n_via % SIFT__GM_VIA] = via;
        s->via_to[s->n_via % SIFT__GM_VIA] = y;
        s->n_via++;
    }
    return y;
}

int32_t sift__gm_trans_compute(sift_grammar *g, uint32_t x, unsigned b)
{
    const gm_state *s = &g->m.st[x];
    int32_t y;
    if (s->rem == 0) {
        if (b < 0x80) {
            int a = ascii_admitted(g, x, b);
            y = a < 0 ? -1 : a ? advance_ascii(g, x, b) : 0;
        } else {
            uint32_t rem, lo = 0x80, hi = 0xBF, acc;
            if (b >= 0xC2 && b <= 0xDF) {
                rem = 1;
                acc = b & 0x1F;
            } else if (b >= 0xE0 && b <= 0xEF) {
                rem = 2;
                acc = b & 0x0F;
                if (b == 0xE0)
                    lo = 0xA0;
                if (b == 0xED)
                    hi = 0x9F;
            } else if (b >= 0xF0 && b <= 0xF4) {
                rem = 3;
                acc = b & 0x07;
                if (b == 0xF0)
                    lo = 0x90;
                if (b == 0xF4)
                    hi = 0x8F;
            } else {
                return 0; /* not a lead byte: invalid UTF-8 */
            }
            y = partial(g, x, acc, rem, lo, hi);
        }
    } else {
        if (b < s->lo || b > s->hi)
            return 0;
        uint32_t rem = s->rem - 1u;
        if (s->acc == ACC_COVERED) {
            /* every stack stays: each admits whatever the sequence ends as */
            if (rem == 0) {
                y = advance(g, x, 0);
            } else {
                /* the set goes through the scratch: interning may move
                 * the arena it sits in */
                gm_caches *m = &g->m;
                uint32_t so = s->set_off, sl = s->set_len;
                if (!sift__gm_budget(g, sl))
                    return -1;
                if (!sift__gm_grow(&g->al, &m->scr, &m->cap_scr, 0, sl, sizeof(uint32_t))) {
                    sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
                    return -1;
                }
                memcpy(m->scr, m->arena + so, sl * sizeof *m->scr);
                m->n_scr = sl;
                y = state_get(g, m->scr, sl, ACC_COVERED, rem, 0x80, 0xBF);
            }
        } else {
            uint32_t acc = (s->acc << 6) | (b & 0x3F);
            if (rem == 0)
                y = advance(g, x, acc);
            else
                y = partial(g, x, acc, rem, 0x80, 0xBF);
        }
    }
    return y < 0 ? y : note_trans(g, x, b, y);
}

/* Stores the transition of x on b (y >= 0) and keeps x's loop groups and
 * shifted loops; y, or -1 on failure. */
static int32_t note_trans(sift_grammar *g, uint32_t x, unsigned b, int32_t y)
{
    g->m.trans[(size_t)x * 256 + b] = y;
    unsigned k = sift__gm_group(b);
    gm_state *sx = &g->m.st[x];
    if (y == (int32_t)x && k != 1) {
        /* a byte back to the same state: its group loops once all
         * its bytes do */
        if (k != 0)
            sx->loop[k >> 6] |= 1ull << (k & 63);
        else if (++sx->ctl_loops == SIFT__GM_GROUP0)
            sx->loop[0] |= 1;
    } else if (y > 0 && k >= 2 && g->core->erase_pos) {
        /* a shifted loop: y is x with fewer copies left */
        if (!erase_state(g, x) || !erase_state(g, (uint32_t)y))
            return -1;
        gm_state *s1 = &g->m.st[x];
        const gm_state *s2 = &g->m.st[y];
        if (s1->eid == s2->eid) {
            uint32_t lev = s1->mincnt < s2->mincnt ? s1->mincnt : s2->mincnt;
            s1->sl[k >> 6] |= 1ull << (k & 63);
            if (lev < s1->slev)
                s1->slev = lev;
        }
    }
    return y;
}

/* Why bytes can share a transition: in a state without a pending
 * sequence, the state after an ASCII byte is the union of the successors
 * of the stacks whose top admits it (advance), so two bytes admitted by
 * the same stacks lead to the same state, and a byte no stack admits to
 * the dead one. */
int sift__gm_row_fill(sift_grammar *g, uint32_t x)
{
    gm_caches *m = &g->m;
    if (x == 0 || (m->st[x].flags & F_ROWFULL))
        return 0;
    uint32_t sl = m->st[x].set_len;
    if (m->st[x].rem != 0 || sl > 64) {
        m->st[x].flags |= F_ROWFULL; /* nothing to share: left to the walk */
        return 0;
    }
    if (!sift__gm_budget(g, 128 * (int64_t)sl + 128))
        return -1;
    uint64_t adm[128];
    uint32_t so = m->st[x].set_off;
    memset(adm, 0, sizeof adm);
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t s = m->arena[so + k];
        if (!s)
            continue;
        uint64_t a[2] = {0, 0};
        top_ascii(g, sift__gm_el(g, m->node[s].pos), a);
        for (unsigned h = 0; h < 2; h++)
            for (uint64_t v = a[h]; v; v &= v - 1)
                adm[64 * h + (unsigned)__builtin_ctzll(v)] |= 1ull << k;
    }
    /* rep[j]: a byte with a known transition per distinct stack set */
    unsigned rep[128], n_rep = 0;
    for (unsigned b = 0; b < 128; b++) {
        int32_t y = m->trans[(size_t)x * 256 + b];
        if (y >= 0) {
            unsigned j = 0;
            while (j < n_rep && adm[rep[j]] != adm[b])
                j++;
            if (j == n_rep)
                rep[n_rep++] = b;
        }
    }
    for (unsigned b = 0; b < 128; b++) {
        if (m->trans[(size_t)x * 256 + b] >= 0)
            continue;
        int32_t y;
        unsigned j = 0;
        while (j < n_rep && adm[rep[j]] != adm[b])
            j++;
        if (!adm[b])
            y = note_trans(g, x, b, 0);
        else if (j < n_rep)
            y = note_trans(g, x, b, m->trans[(size_t)x * 256 + rep[j]]);
        else if ((y = sift__gm_trans_compute(g, x, b)) >= 0)
            rep[n_rep++] = b;
        if (y < 0)
            return -1;
        m = &g->m;
    }
    m->st[x].flags |= F_ROWFULL;
    return 0;
}

/* The canonical stack of stack n: every node's position through
 * canon_pos, memoized per node. Iterative: the path up to the first node
 * whose canonical stack is known goes through the worklist scratch.
 * UINT32_MAX on failure. */
static uint32_t canon_node(sift_grammar *g, uint32_t n)
{
    gm_caches *m = &g->m;
    const uint32_t *cp = g->core->canon_pos;
    size_t d = 0;
    for (uint32_t y = n; m->node[y].canon == UINT32_MAX; y = m->node[y].parent) {
        if (!sift__gm_grow(&g->al, &m->wl, &m->cap_wl, d, d + 1, sizeof(uint32_t))) {
            sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
            return UINT32_MAX;
        }
        m->wl[d++] = y;
    }
    if (!sift__gm_budget(g, (int64_t)d + 1))
        return UINT32_MAX;
    while (d) {
        uint32_t y = m->wl[--d];
        uint32_t pc = m->node[m->node[y].parent].canon;
        uint32_t pos = cp[m->node[y].pos];
        uint32_t z = pos == m->node[y].pos && pc == m->node[y].parent ? y : node_get(g, pos, pc);
        if (z == UINT32_MAX)
            return UINT32_MAX;
        m->node[y].canon = z;
        /* a canonical stack is its own canonical stack */
        m->node[z].canon = z;
    }
    return m->node[n].canon;
}

/* Why a capped counter keeps the allowed set (gm_core.canon_pos): a helper
 * chain R_k ::= S R_(k-1) | (R_1 ::= S |) with S unable to match without
 * a byte lets a stack in R_k match at most one more copy of S per byte.
 * A token of at most T bytes (T = the longest piece) from R_k and from
 * R_cap, k >= cap = T + 2, so never comes below R_2 on either side: the
 * two chains have the same shape over those steps, their stacks stay
 * paired one to one, and one side has a live stack after the token
 * exactly when the other does. A set of stacks is live when one of them
 * is, so a state and its canonical one (every such node moved to R_cap)
 * allow the same tokens, the end-of-generation ones included (the empty
 * stack is its own canonical stack), and token elements too (the tops
 * keep their elements). */
int32_t sift__gm_canon(sift_grammar *g, uint32_t x)
{
    gm_caches *m = &g->m;
    if (!g->core->canon_pos || x == 0)
        return (int32_t)x;
    if (m->st[x].canon != UINT32_MAX)
        return (int32_t)m->st[x].canon;
    uint32_t so = m->st[x].set_off, sl = m->st[x].set_len;
    if (!sift__gm_budget(g, 2 * (int64_t)sl))
        return -1;
    for (uint32_t k = 0; k < sl; k++)
        if (canon_node(g, m->arena[so + k]) == UINT32_MAX)
            return -1;
    if (!sift__gm_grow(&g->al, &m->scr, &m->cap_scr, 0, sl, sizeof(uint32_t))) {
        sift__gm_fail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
        return -1;
    }
    int same = 1;
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t n = m->arena[so + k];
        m->scr[k] = m->node[n].canon;
        same &= m->scr[k] == n;
    }
    int32_t y = (int32_t)x;
    if (!same) {
        if (!sift__gm_budget(g, sort_cost(sl)))
            return -1;
        size_t n = sort_unique(m->scr, sl);
        const gm_state *s = &m->st[x];
        y = state_get(g, m->scr, n, s->acc, s->rem, s->lo, s->hi);
        if (y < 0)
            return -1;
        m->st[y].canon = (uint32_t)y;
    }
    m->st[x].canon = (uint32_t)y;
    return y;
}

/* Why the test below is enough: a character of 2 to 4 bytes from x goes
 * through partial states that keep the stacks whose top meets the code
 * points the bytes so far can still become (partial). When every stack's
 * top either covers all of U+0080..U+D7FF and U+E000..U+10FFFF (the code
 * points a multi-byte sequence can decode to) or meets none of them,
 * every partial state on the way keeps the same covering stacks K,
 * marked ACC_COVERED, whatever the bytes: live when K is not empty. The
 * last byte advances every stack of K (advance with `all`), so every
 * character ends in one state z, the one after C2 80 (U+0080). The
 * state loops over them when z is x. */
int32_t sift__gm_u8_target(sift_grammar *g, uint32_t x)
{
    gm_caches *m = &g->m;
    if (m->st[x].rem != 0 || x == 0)
        return 0;
    uint32_t so = m->st[x].set_off, sl = m->st[x].set_len;
    if (!sift__gm_budget(g, 4 * (int64_t)sl))
        return -1;
    int any = 0, ok = 1;
    for (uint32_t k = 0; k < sl && ok; k++) {
        uint32_t s = m->arena[so + k];
        if (!s)
            continue;
        const sift__gelem *e = sift__gm_el(g, m->node[s].pos);
        int m1 = top_meets(g, e, 0x80, 0xD7FF), m2 = top_meets(g, e, 0xE000, 0x10FFFF);
        if (!m1 && !m2)
            continue;
        ok = top_covers(g, e, 0x80, 0xD7FF) && top_covers(g, e, 0xE000, 0x10FFFF);
        any = 1;
    }
    if (!ok || !any)
        return 0;
    int32_t p = sift__gm_step(g, x, 0xC2);
    if (p > 0)
        p = sift__gm_step(g, (uint32_t)p, 0x80);
    return p;
}

int sift__gm_u8_loop(sift_grammar *g, uint32_t x)
{
    gm_caches *m = &g->m;
    if (m->st[x].flags & F_U8TRIED)
        return (m->st[x].loop[0] >> 1) & 1;
    int32_t z = sift__gm_u8_target(g, x);
    if (z < 0)
        return -1;
    gm_state *sx = &g->m.st[x]; /* the steps may move the states */
    sx->flags |= F_U8TRIED;
    if (z > 0 && z == (int32_t)x) {
        sx->loop[0] |= 2;
        return 1;
    }
    if (z > 0 && g->core->erase_pos) {
        /* every character leads to z: a shifted loop of group 1 when z
         * is x with fewer copies left (note_trans's rule, a character
         * taken as one byte: it takes at most one copy per byte) */
        if (!erase_state(g, x) || !erase_state(g, (uint32_t)z))
            return -1;
        gm_state *s1 = &g->m.st[x];
        const gm_state *s2 = &g->m.st[z];
        if (s1->eid == s2->eid) {
            uint32_t lev = s1->mincnt < s2->mincnt ? s1->mincnt : s2->mincnt;
            s1->sl[0] |= 2;
            if (lev < s1->slev)
                s1->slev = lev;
        }
    }
    return 0;
}

/* The state after token t in state x: 0 if rejected, -1 on failure. */
int32_t sift__gm_token_next(sift_grammar *g, uint32_t x, int32_t t)
{
    const gm_core *c = g->core;
    gm_caches *m = &g->m;
    if (c->attr[t] & SIFT_TOKEN_EOG)
        return (m->st[x].flags & F_COMPLETE) ? (int32_t)x : 0;
    size_t L;
    const unsigned char *p = sift__gm_piece(c, t, &L);
    int32_t y = L ? (int32_t)x : 0;
    /* one unit per byte, cached or not, so that a prepared accept never
     * costs more than its prepare */
    if (!sift__gm_budget(g, (int64_t)L + 1))
        return -1;
    for (size_t k = 0; k < L && y > 0; k++)
        y = sift__gm_step(g, (uint32_t)y, p[k]);
    if (y < 0)
        return -1;
    if (!(m->st[x].flags & F_HASTOK) || m->st[x].rem)
        return y;
    /* token elements match by id; their successors are memoized first,
     * then the union is built in m->scr (the text path above is done
     * with it) */
    uint32_t sl = m->st[x].set_len;
    if (!sift__gm_budget(g, 2 * (int64_t)sl))
        return -1;
    int any = 0;
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t s = m->arena[m->st[x].set_off + k];
        if (!s)
            continue;
        const sift__gelem *e = sift__gm_el(g, m->node[s].pos);
        if (!((e->type == SIFT__G_TOKEN && (int32_t)e->v == t) ||
              (e->type == SIFT__G_TOKEN_NOT && (int32_t)e->v != t)))
            continue;
        uint32_t o, l;
        if (!succ(g, s, &o, &l))
            return -1;
        any |= l > 0;
    }
    if (!any)
        return y;
    m->n_scr = 0;
    new_epoch(m);
    uint32_t so = m->st[x].set_off;
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t s = m->arena[so + k];
        if (!s)
            continue;
        const sift__gelem *e = sift__gm_el(g, m->node[s].pos);
        if (!((e->type == SIFT__G_TOKEN && (int32_t)e->v == t) ||
              (e->type == SIFT__G_TOKEN_NOT && (int32_t)e->v != t)))
            continue;
        if (!union_add(g, m->arena + m->node[s].succ_off, m->node[s].succ_len))
            return -1;
    }
    /* Survivors of the text path join only when no partial code point is
     * pending after it (a set has one pending sequence). */
    if (y > 0 && m->st[y].rem == 0 && !union_add(g, m->arena + m->st[y].set_off, m->st[y].set_len))
        return -1;
    if (!union_sort(g))
        return -1;
    return state_get(g, m->scr, m->n_scr, 0, 0, 0, 0);
}

/* ------------------------------------------------------------------ */
/* Grammar objects over a core                                         */
/* ------------------------------------------------------------------ */

static int32_t initial_state(sift_grammar *g)
{
    const gm_core *c = g->core;
    uint32_t r = c->g.root;
    uint32_t na = c->alt_off[r + 1] - c->alt_off[r];
    if (!sift__gm_budget(g, na))
        return -1;
    uint32_t *seeds = sift__malloc(&g->al, na ? na : 1, sizeof *seeds);
    if (!seeds) {
        sift__gm_fail(g, SIFT_E_NOMEM, "out of memory while starting the grammar");
        return -1;
    }
    for (uint32_t a = 0; a < na; a++) {
        seeds[a] = cont(g, c->alt[c->alt_off[r] + a], 0);
        if (seeds[a] == UINT32_MAX) {
            sift__free(&g->al, seeds);
            return -1;
        }
    }
    int ok = closure(g, seeds, na);
    sift__free(&g->al, seeds);
    if (!ok)
        return -1;
    return state_get(g, g->m.cl, g->m.n_cl, 0, 0, 0, 0);
}

/* Copies state x of matcher `src` (of grammar gs) into g's caches. */
static int32_t import_state(sift_grammar *g, const sift_grammar *gs, uint32_t x)
{
    const gm_caches *sm = &gs->m;
    const gm_state *s = &sm->st[x];
    if (x == 0)
        return 0;
    if (!sift__gm_grow(&g->al, &g->imp_ids, &g->cap_imp_ids, 0, s->set_len, sizeof *g->imp_ids)) {
        sift__gm_fail(g, SIFT_E_NOMEM, "out of memory while copying a grammar state");
        return -1;
    }
    uint32_t *ids = g->imp_ids;
    int32_t res = -1;
    for (uint32_t k = 0; k < s->set_len; k++) {
        uint32_t n = sm->arena[s->set_off + k];
        size_t d = 0;
        if (!sift__gm_budget(g, 2 * (int64_t)sm->node[n].depth + 1))
            goto out;
        for (uint32_t y = n; y; y = sm->node[y].parent) {
            if (!sift__gm_grow(&g->al, &g->imp_path, &g->cap_imp_path, d, d + 1,
                               sizeof *g->imp_path)) {
                sift__gm_fail(g, SIFT_E_NOMEM, "out of memory while copying a grammar state");
                goto out;
            }
            g->imp_path[d++] = sm->node[y].pos;
        }
        const uint32_t *path = g->imp_path;
        uint32_t id = 0;
        while (d) {
            id = node_get(g, path[--d], id);
            if (id == UINT32_MAX)
                goto out;
        }
        ids[k] = id;
    }
    if (sift__gm_budget(g, sort_cost(s->set_len))) {
        size_t n = sort_unique(ids, s->set_len);
        res = state_get(g, ids, n, s->acc, s->rem, s->lo, s->hi);
    }
out:
    return res;
}

int32_t sift__gm_import(sift_grammar *g, const sift_grammar *from, uint32_t x)
{
    return import_state(g, from, x);
}

/* A grammar object over core c (a reference is taken on success). The
 * matching state is `from`'s current state, or the initial one. */
sift_status sift__gm_make(sift_grammar **out, gm_core *c, const sift__alloc *al,
                          const sift_grammar *from, const sift_grammar_params *pp, sift_error *err)
{
    sift_grammar *g = sift__calloc(al, 1, sizeof *g);
    if (!g)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while creating a grammar");
    g->magic = MAGIC;
    g->al = *al;
    g->core = c;
    if (from) {
        g->max_stacks = from->max_stacks;
        g->max_depth = from->max_depth;
        g->max_work = from->max_work;
        g->out_len = from->out_len;
        memcpy(g->tail, from->tail, sizeof g->tail);
    } else {
        g->max_stacks = pp->max_stacks;
        g->max_depth = pp->max_stack_depth;
        g->max_work = pp->max_step_work;
    }
    g->soft_nodes = from ? from->soft_nodes : SOFT_NODES;
    g->soft_states = from ? from->soft_states : SOFT_STATES;
    g->soft_arena = from ? from->soft_arena : SOFT_ARENA;
    g->mc_limit = from ? from->mc_limit : SIFT__MASK_CACHE_BYTES;
    g->sig_on = from ? from->sig_on : 1;
    g->mc_words = ((size_t)c->V + 31) / 32;
    g->err = err;
    if (!gm_init(&g->m, al))
        goto nomem;
    if (c->V) {
        g->bits = sift__malloc(al, ((size_t)c->V + 7) / 8, 1);
        g->dstk = sift__malloc(al, (size_t)c->tmaxd + 1, sizeof *g->dstk);
        if (!g->bits || !g->dstk)
            goto nomem;
    }
    g->work = 0;
    int32_t init = initial_state(g);
    int32_t cur = init;
    if (init >= 0 && from)
        cur = import_state(g, from, from->cur);
    if (init < 0 || cur < 0) {
        sift_status s = g->fail;
        sift__gm_free(&g->m, al);
        sift__free(al, g->imp_ids);
        sift__free(al, g->imp_path);
        sift__free(al, g->bits);
        sift__free(al, g->dstk);
        sift__free(al, g);
        return s;
    }
    g->init = (uint32_t)init;
    g->cur = (uint32_t)cur;
    g->err = NULL;
    g->fail = SIFT_OK;
    atomic_fetch_add(&c->refs, 1);
    *out = g;
    return SIFT_OK;
nomem:
    sift__gm_free(&g->m, al);
    sift__free(al, g->bits);
    sift__free(al, g->dstk);
    sift__free(al, g);
    return sift__fail(err, SIFT_E_NOMEM, "out of memory while creating a grammar");
}

sift_status sift__grammar_sync(sift_grammar *g, const sift_grammar *from, sift_error *err)
{
    sift_status s = sift__gm_check(g, err);
    if (s || (s = sift__gm_check(from, err)))
        return s;
    if (g->core != from->core || !g->trig != !from->trig)
        return sift__fail(err, SIFT_E_ARG, "grammars differ: a shadow grammar must be a clone");
    sift__gm_begin(g, err);
    if ((s = sift__gm_maybe_flush(g, err))) {
        sift__gm_end_call(g);
        return s;
    }
    int32_t cur = import_state(g, from, from->cur);
    if (cur < 0) {
        s = g->fail;
        sift__gm_end_call(g);
        return s;
    }
    sift__gm_end_call(g);
    if (from->trig && (s = sift__trigger_copy_state(g->trig, from->trig, err)))
        return s;
    g->cur = (uint32_t)cur;
    g->out_len = from->out_len;
    memcpy(g->tail, from->tail, sizeof g->tail);
    g->triggered = from->triggered;
    g->terminated = from->terminated;
    g->ss_valid = 0;
    /* the copy cannot roll back past the state it was given */
    g->h0 = g->hn = 0;
    return SIFT_OK;
}

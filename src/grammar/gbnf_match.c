/*
 * gbnf_match.c - the grammar matcher, the token trie and the public
 * sift_grammar_* functions.
 *
 * Owns struct sift_grammar. A grammar is a shared immutable core (the
 * compiled rules, a copy of the vocabulary's pieces and attributes, the
 * token trie) plus a per-object matcher with its caches.
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
 *   state. So every state but the dead one (id 0) accepts a token ending
 *   in it, and the whole-vocabulary pass is one walk of the token trie in
 *   preorder with one table lookup per trie edge, skipping every subtree
 *   under a dead transition.
 * - EOG tokens are accepted exactly when the empty stack is in the set,
 *   and do not change the state. Token elements (<[id]>, !<[id]>) match by
 *   id when no partial code point is pending. A token with an empty piece
 *   matches only a token element, never "for free".
 * - Caches only grow during a call; between calls (on accept) they are
 *   rebuilt from the current state when they pass their soft size, so a
 *   long generation does not grow memory (and steady state allocates
 *   nothing). Every call has a work budget (units charged as the work is
 *   done, see budget()) and caps on live stacks (checked while a set is
 *   built) and stack depth: SIFT_E_GRAMMAR_LIMIT, state unchanged.
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "gbnf.h"
#include "trigger.h"

#define MAGIC 0x47424e46u /* "GBNF" */

enum { F_COMPLETE = 1, F_HASTOK = 2 };

/* Soft cache sizes: past these the caches are rebuilt at the next accept. */
#define SOFT_NODES (1u << 20)
#define SOFT_STATES (1u << 13)
#define SOFT_ARENA (1u << 24)

/* ------------------------------------------------------------------ */
/* The shared core                                                     */
/* ------------------------------------------------------------------ */

/* A trie node: the edge byte from its parent (db & 0xff) at depth db >> 8
 * (1-based); its subtree is nodes [self, end) and the tokens of the
 * subtree are stok[slot .. slot_end), those ending at the node first. */
typedef struct tnode {
    uint32_t end, slot, slot_end, db;
} tnode;

typedef struct gcore {
    atomic_size_t refs;
    sift__alloc al;
    sift__gbnf g;
    uint32_t *alt_off; /* per rule: alternatives alt[alt_off[r] .. alt_off[r+1]) */
    uint32_t *alt;     /* first position of each alternative */
    int32_t V;         /* 0 = no vocabulary */
    uint64_t *poff;    /* V + 1 piece offsets */
    unsigned char *pbytes;
    uint8_t *attr;
    int32_t *eog;
    int32_t n_eog;
    /* token trie in preorder (tn nodes) and its tokens in trie order
     * (stok[0 .. n_slots)); tokens not in the trie (EOG, empty pieces)
     * are listed in other[0 .. n_other) */
    uint32_t tn;
    struct tnode *tr;
    int32_t *stok;
    uint32_t n_slots;
    int32_t *other;
    uint32_t n_other;
    uint32_t tmaxd;
} gcore;

static void core_unref(gcore *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    sift__alloc al = c->al;
    sift__gbnf_free(&c->g, &al);
    sift__free(&al, c->alt_off);
    sift__free(&al, c->alt);
    sift__free(&al, c->poff);
    sift__free(&al, c->pbytes);
    sift__free(&al, c->attr);
    sift__free(&al, c->eog);
    sift__free(&al, c->tr);
    sift__free(&al, c->stok);
    sift__free(&al, c->other);
    sift__free(&al, c);
}

/* ------------------------------------------------------------------ */
/* The matcher caches                                                  */
/* ------------------------------------------------------------------ */

typedef struct gnode {
    uint32_t pos, parent, depth;
    uint32_t succ_off, succ_len; /* memo of the successors; off = UINT32_MAX unknown */
} gnode;

typedef struct gstate {
    uint32_t set_off, set_len;
    uint32_t acc;
    uint8_t rem, lo, hi, flags;
} gstate;

typedef struct gm {
    gnode *node;
    uint32_t n_node, cap_node;
    uint32_t *mark;
    uint32_t epoch;
    uint32_t *nht;
    uint32_t nht_cap;
    uint32_t *arena;
    size_t n_arena, cap_arena;
    gstate *st;
    uint32_t n_st, cap_st;
    int32_t *trans;
    uint32_t *sht;
    uint32_t sht_cap;
    /* scratch */
    uint32_t *cl; /* closure output */
    size_t n_cl, cap_cl;
    uint32_t *scr; /* set unions */
    size_t n_scr, cap_scr;
    uint32_t *wl; /* closure worklist */
    size_t cap_wl;
} gm;

struct sift_grammar {
    uint32_t magic;
    sift__alloc al;
    gcore *core;
    int32_t max_stacks, max_depth;
    int64_t max_work, work;
    uint32_t soft_nodes, soft_states, soft_arena; /* cache sizes that trigger a rebuild */
    sift_status fail;                             /* set by helpers that cannot return a status */
    sift_error *err;
    gm m;
    uint32_t cur, init;
    uint8_t *bits;  /* V bits of scratch for the whole-vocabulary pass */
    uint32_t *dstk; /* trie walk: state per depth */
    uint32_t *rr;   /* trie walk: rejected slot ranges (pairs) */
    size_t n_rr, cap_rr;
    /* import_state's scratch (kept, so that re-syncing a copy of a
     * grammar allocates nothing once it fits) */
    uint32_t *imp_ids, *imp_path;
    size_t cap_imp_ids, cap_imp_path;
    uint64_t out_len; /* bytes accepted since reset */
    unsigned char tail[24];
    /* Lazy grammars (NULL trig = eager). While !triggered the matching
     * state is the initial one and every token goes to trig; a token that
     * is only tried (prepare) or whose replay is rejected is taken back
     * with sift__trigger_undo. */
    sift__trigger *trig;
    int triggered;
    /* State ids keep their meaning until the caches are rebuilt or
     * swapped; epoch counts those events. The small allowed set of state
     * ss_cur in epoch ss_epoch (sift__grammar_small_set) is cached. */
    uint32_t epoch;
    int ss_valid;
    uint32_t ss_cur, ss_epoch;
    size_t ss_n;
    int32_t ss_ids[SIFT__GRAMMAR_SMALL];
    /* 1 while a chain owns the grammar (a stage's or its check grammar):
     * a second transfer is refused. Clones start unowned. */
    int owned;
};

static sift_status lazy_step(sift_grammar *g, int32_t token, const void *bytes, size_t n,
                             int commit, sift_error *err);

static const sift__gelem *EL(const sift_grammar *g, uint32_t pos)
{
    return &g->core->g.el[pos];
}

static int is_end(uint32_t type)
{
    return type == SIFT__G_END || type == SIFT__G_ALT;
}

static int is_tok(uint32_t type)
{
    return type == SIFT__G_TOKEN || type == SIFT__G_TOKEN_NOT;
}

/* Grows *p (n_have used of *cap elements of esz bytes) to hold `need`. */
static int grow(const sift__alloc *al, void **p, size_t *cap, size_t n_have, size_t need,
                size_t esz)
{
    if (need <= *cap)
        return 1;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 4)
            return 0;
        c *= 2;
    }
    void *q = sift__grow(al, *p, n_have, *cap, c, esz);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

static sift_status gfail(sift_grammar *g, sift_status code, const char *fmt, ...)
    SIFT__PRINTF(3, 4);

static sift_status gfail(sift_grammar *g, sift_status code, const char *fmt, ...)
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

static void gm_free(gm *m, const sift__alloc *al)
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
static int gm_init(gm *m, const sift__alloc *al)
{
    memset(m, 0, sizeof *m);
    size_t cn = 0, cs = 0;
    m->nht_cap = 1024;
    m->sht_cap = 256;
    m->nht = sift__malloc(al, m->nht_cap, sizeof *m->nht);
    m->sht = sift__malloc(al, m->sht_cap, sizeof *m->sht);
    if (!m->nht || !m->sht || !grow(al, (void **)&m->node, &cn, 0, 256, sizeof(gnode)) ||
        !grow(al, (void **)&m->st, &cs, 0, 16, sizeof(gstate))) {
        gm_free(m, al);
        return 0;
    }
    m->cap_node = (uint32_t)cn;
    m->cap_st = (uint32_t)cs;
    m->mark = sift__calloc(al, m->cap_node, sizeof *m->mark);
    m->trans = sift__malloc(al, (size_t)m->cap_st * 256, sizeof *m->trans);
    if (!m->mark || !m->trans) {
        gm_free(m, al);
        return 0;
    }
    memset(m->nht, 0xff, m->nht_cap * sizeof *m->nht);
    memset(m->sht, 0xff, m->sht_cap * sizeof *m->sht);
    memset(&m->node[0], 0, sizeof m->node[0]);
    m->node[0].succ_off = UINT32_MAX;
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

/* Charges n units of work to the call (docs/grammar.md, "Limits"): one
 * unit per stack visited, pushed, scanned, copied, hashed or compared,
 * per trie node walked and per token written; a sort of n stacks costs
 * n (1 + log2 n). Every loop of the matcher charges before (or while) it
 * runs, so the budget stops a call after at most max_work units plus one
 * bounded loop, never after a set of unbounded size has been built. */
static int budget(sift_grammar *g, int64_t n)
{
    g->work += n;
    if (g->work > g->max_work) {
        gfail(g, SIFT_E_GRAMMAR_LIMIT,
              "grammar step exceeded its work budget of %lld units at output byte %llu",
              (long long)g->max_work, (unsigned long long)g->out_len);
        return 0;
    }
    return 1;
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
    gfail(g, SIFT_E_GRAMMAR_LIMIT,
          "grammar too ambiguous: more than %d parse stacks at output byte %llu",
          (int)g->max_stacks, (unsigned long long)g->out_len);
    return 0;
}

/* A fresh mark epoch: m->mark[x] == m->epoch means "seen" until the
 * next call. */
static void new_epoch(gm *m)
{
    if (++m->epoch == 0) {
        memset(m->mark, 0, (size_t)m->cap_node * sizeof *m->mark);
        m->epoch = 1;
    }
}

static int node_rehash(sift_grammar *g)
{
    gm *m = &g->m;
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
    gm *m = &g->m;
    uint32_t h = hash2(pos, parent) & (m->nht_cap - 1);
    for (; m->nht[h] != UINT32_MAX; h = (h + 1) & (m->nht_cap - 1)) {
        const gnode *x = &m->node[m->nht[h]];
        if (x->pos == pos && x->parent == parent)
            return m->nht[h];
    }
    /* a new stack is charged like the visits its allocation and hashing
     * cost, so that the budget bounds the memory a call can take */
    if (!budget(g, NODE_COST))
        return UINT32_MAX;
    uint32_t depth = m->node[parent].depth + 1;
    if ((int64_t)depth > g->max_depth) {
        gfail(g, SIFT_E_GRAMMAR_LIMIT, "grammar stack depth %u exceeds %d at output byte %llu",
              (unsigned)depth, (int)g->max_depth, (unsigned long long)g->out_len);
        return UINT32_MAX;
    }
    if (m->n_node >= UINT32_MAX / 2) {
        gfail(g, SIFT_E_GRAMMAR_LIMIT, "grammar matcher ran out of stack ids");
        return UINT32_MAX;
    }
    if (m->n_node == m->cap_node) {
        size_t cn = m->cap_node, cm = m->cap_node;
        if (!grow(&g->al, (void **)&m->node, &cn, m->n_node, (size_t)m->n_node + 1,
                  sizeof(gnode)) ||
            !grow(&g->al, (void **)&m->mark, &cm, m->n_node, (size_t)m->n_node + 1,
                  sizeof(uint32_t))) {
            gfail(g, SIFT_E_NOMEM, "out of memory while growing grammar stacks");
            return UINT32_MAX;
        }
        for (size_t k = m->n_node; k < cm; k++)
            m->mark[k] = 0;
        m->cap_node = (uint32_t)(cn < cm ? cn : cm);
    }
    if ((size_t)(m->n_node + 1) * 2 > m->nht_cap) {
        if (!node_rehash(g)) {
            gfail(g, SIFT_E_NOMEM, "out of memory while growing grammar stacks");
            return UINT32_MAX;
        }
        h = hash2(pos, parent) & (m->nht_cap - 1);
        while (m->nht[h] != UINT32_MAX)
            h = (h + 1) & (m->nht_cap - 1);
    }
    uint32_t id = m->n_node++;
    gnode *x = &m->node[id];
    x->pos = pos;
    x->parent = parent;
    x->depth = depth;
    x->succ_off = UINT32_MAX;
    x->succ_len = 0;
    m->mark[id] = 0;
    m->nht[h] = id;
    return id;
}

/* Return address after `pos`: a tail call pushes nothing. */
static uint32_t cont(sift_grammar *g, uint32_t pos, uint32_t parent)
{
    if (is_end(EL(g, pos)->type))
        return parent;
    return node_get(g, pos, parent);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
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
        qsort(v, n, sizeof *v, cmp_u32);
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
    gm *m = &g->m;
    const gcore *c = g->core;
    m->n_cl = 0;
    new_epoch(m);
    size_t n_wl = 0;
    if (!budget(g, (int64_t)ns))
        return 0;
    if (!grow(&g->al, (void **)&m->wl, &m->cap_wl, 0, ns + 16, sizeof(uint32_t)))
        return gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
    memcpy(m->wl, seeds, ns * sizeof *seeds);
    n_wl = ns;
    while (n_wl) {
        uint32_t x = m->wl[--n_wl];
        if (m->mark[x] == m->epoch)
            continue;
        m->mark[x] = m->epoch;
        if (!budget(g, 1))
            return 0;
        const sift__gelem *e = x ? EL(g, m->node[x].pos) : NULL;
        if (!x || e->type != SIFT__G_REF) {
            if (!grow(&g->al, (void **)&m->cl, &m->cap_cl, m->n_cl, m->n_cl + 1, sizeof(uint32_t)))
                return gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
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
        if (!budget(g, na))
            return 0;
        if (!grow(&g->al, (void **)&m->wl, &m->cap_wl, n_wl, n_wl + na, sizeof(uint32_t)))
            return gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
        for (uint32_t a = c->alt_off[r]; a < c->alt_off[r + 1]; a++) {
            uint32_t y = cont(g, c->alt[a], ret);
            if (y == UINT32_MAX)
                return 0;
            m->wl[n_wl++] = y;
        }
    }
    if (!budget(g, sort_cost(m->n_cl)))
        return 0;
    m->n_cl = sort_unique(m->cl, m->n_cl);
    return 1;
}

static int arena_put(sift_grammar *g, const uint32_t *v, size_t n, uint32_t *off)
{
    gm *m = &g->m;
    if (m->n_arena + n >= UINT32_MAX)
        return gfail(g, SIFT_E_GRAMMAR_LIMIT, "grammar matcher cache is full"), 0;
    if (!grow(&g->al, (void **)&m->arena, &m->cap_arena, m->n_arena, m->n_arena + n,
              sizeof(uint32_t)))
        return gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
    if (n)
        memcpy(m->arena + m->n_arena, v, n * sizeof *v);
    *off = (uint32_t)m->n_arena;
    m->n_arena += n;
    return 1;
}

/* The successors of stack s (its top terminal consumed), memoized. */
static int succ(sift_grammar *g, uint32_t s, uint32_t *off, uint32_t *len)
{
    gm *m = &g->m;
    if (m->node[s].succ_off != UINT32_MAX) {
        *off = m->node[s].succ_off;
        *len = m->node[s].succ_len;
        return 1;
    }
    uint32_t seed = cont(g, m->node[s].pos + 1, m->node[s].parent);
    if (seed == UINT32_MAX || !closure(g, &seed, 1))
        return 0;
    uint32_t o;
    if (!budget(g, (int64_t)m->n_cl) || !arena_put(g, m->cl, m->n_cl, &o))
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
    uint64_t h = sift__fnv(0, v, n * sizeof *v);
    uint32_t t[4] = {acc, rem, lo, hi};
    h = sift__fnv(h, t, sizeof t);
    return (uint32_t)(h ^ (h >> 32));
}

static int state_rehash(sift_grammar *g)
{
    gm *m = &g->m;
    uint32_t cap = m->sht_cap * 2;
    uint32_t *t = sift__malloc(&g->al, cap, sizeof *t);
    if (!t)
        return 0;
    memset(t, 0xff, (size_t)cap * sizeof *t);
    for (uint32_t i = 1; i < m->n_st; i++) {
        const gstate *s = &m->st[i];
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
    gm *m = &g->m;
    if (n == 0)
        return 0;
    if (n > (size_t)g->max_stacks) {
        gfail(g, SIFT_E_GRAMMAR_LIMIT,
              "grammar too ambiguous: %zu parse stacks at output byte %llu", n,
              (unsigned long long)g->out_len);
        return -1;
    }
    if (!budget(g, (int64_t)n))
        return -1;
    uint32_t h = state_hash(v, n, acc, rem, lo, hi) & (m->sht_cap - 1);
    for (; m->sht[h] != UINT32_MAX; h = (h + 1) & (m->sht_cap - 1)) {
        const gstate *s = &m->st[m->sht[h]];
        if (s->set_len == n && s->acc == acc && s->rem == rem && s->lo == lo && s->hi == hi) {
            if (!budget(g, (int64_t)n))
                return -1;
            if (n == 0 || memcmp(m->arena + s->set_off, v, n * sizeof *v) == 0)
                return (int32_t)m->sht[h];
        }
    }
    if (m->n_st >= (1u << 24)) {
        gfail(g, SIFT_E_GRAMMAR_LIMIT, "grammar matcher cache is full");
        return -1;
    }
    if (!budget(g, 256)) /* the new state's transition row */
        return -1;
    /* v may point into the arena or scratch; copy first (arena may move) */
    uint32_t off;
    if (!arena_put(g, v, n, &off))
        return -1;
    if (m->n_st == m->cap_st) {
        size_t cs = m->cap_st;
        size_t ct = cs;
        if (!grow(&g->al, (void **)&m->st, &cs, m->n_st, (size_t)m->n_st + 1, sizeof(gstate))) {
            gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
            return -1;
        }
        int32_t *tr = sift__malloc(&g->al, cs * 256, sizeof *tr);
        if (!tr) {
            /* keep st grown (harmless), capacity of trans unchanged */
            m->cap_st = (uint32_t)ct;
            gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
            return -1;
        }
        memcpy(tr, m->trans, (size_t)m->n_st * 256 * sizeof *tr);
        sift__free(&g->al, m->trans);
        m->trans = tr;
        m->cap_st = (uint32_t)cs;
    }
    if ((size_t)(m->n_st + 1) * 2 > m->sht_cap) {
        if (!state_rehash(g)) {
            gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
            return -1;
        }
        h = state_hash(m->arena + off, n, acc, rem, lo, hi) & (m->sht_cap - 1);
        while (m->sht[h] != UINT32_MAX)
            h = (h + 1) & (m->sht_cap - 1);
    }
    uint32_t id = m->n_st++;
    gstate *s = &m->st[id];
    s->set_off = off;
    s->set_len = (uint32_t)n;
    s->acc = acc;
    s->rem = (uint8_t)rem;
    s->lo = (uint8_t)lo;
    s->hi = (uint8_t)hi;
    s->flags = 0;
    const uint32_t *set = m->arena + off;
    if (set[0] == 0)
        s->flags |= F_COMPLETE;
    for (size_t k = 0; k < n; k++)
        if (set[k] && is_tok(EL(g, m->node[set[k]].pos)->type)) {
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

/* Adds the stacks v[0 .. n) to the set being built in m->scr, skipping
 * those already in it (marked with the current epoch), and checks
 * max_stacks as it grows. Callers open the epoch with new_epoch once all
 * the successor sets they need are memoized (succ runs closures, which
 * take epochs of their own). */
static int union_add(sift_grammar *g, const uint32_t *v, size_t n)
{
    gm *m = &g->m;
    if (!budget(g, (int64_t)n))
        return 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t y = v[k];
        if (m->mark[y] == m->epoch)
            continue;
        m->mark[y] = m->epoch;
        if (!stacks_ok(g, m->n_scr + 1))
            return 0;
        if (!grow(&g->al, (void **)&m->scr, &m->cap_scr, m->n_scr, m->n_scr + 1, sizeof(uint32_t)))
            return gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher"), 0;
        m->scr[m->n_scr++] = y;
    }
    return 1;
}

/* Sorts the union built by union_add (unique already). */
static int union_sort(sift_grammar *g)
{
    gm *m = &g->m;
    if (!budget(g, sort_cost(m->n_scr)))
        return 0;
    m->n_scr = sort_unique(m->scr, m->n_scr);
    return 1;
}

/* State after consuming code point cp in state x: the union of the
 * successors of the stacks whose top admits cp. First every successor
 * set is memoized, then the union is built in one epoch. */
static int32_t advance(sift_grammar *g, uint32_t x, uint32_t cp)
{
    gm *m = &g->m;
    uint32_t sl = m->st[x].set_len;
    if (!budget(g, 2 * (int64_t)sl))
        return -1;
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t s = m->arena[m->st[x].set_off + k];
        uint32_t o, l;
        if (s && top_matches(g, EL(g, m->node[s].pos), cp) && !succ(g, s, &o, &l))
            return -1;
    }
    m->n_scr = 0;
    new_epoch(m);
    uint32_t so = m->st[x].set_off; /* the arena may have moved */
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t s = m->arena[so + k];
        if (!s || !top_matches(g, EL(g, m->node[s].pos), cp))
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
    gm *m = &g->m;
    uint32_t sh = 6 * (rem - 1);
    uint32_t cmin = ((acc << 6) | (lo & 0x3Fu)) << sh;
    uint32_t cmax = (((acc << 6) | (hi & 0x3Fu)) << sh) | ((1u << sh) - 1);
    m->n_scr = 0;
    uint32_t so = m->st[x].set_off, sl = m->st[x].set_len;
    if (!budget(g, sl))
        return -1;
    if (!grow(&g->al, (void **)&m->scr, &m->cap_scr, 0, sl, sizeof(uint32_t))) {
        gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
        return -1;
    }
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t s = m->arena[so + k];
        if (s && top_meets(g, EL(g, m->node[s].pos), cmin, cmax))
            m->scr[m->n_scr++] = s;
    }
    return state_get(g, m->scr, m->n_scr, acc, rem, lo, hi);
}

static int32_t trans_compute(sift_grammar *g, uint32_t x, unsigned b)
{
    const gstate *s = &g->m.st[x];
    int32_t y;
    if (s->rem == 0) {
        if (b < 0x80) {
            y = advance(g, x, b);
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
        uint32_t acc = (s->acc << 6) | (b & 0x3F);
        uint32_t rem = s->rem - 1u;
        if (rem == 0)
            y = advance(g, x, acc);
        else
            y = partial(g, x, acc, rem, 0x80, 0xBF);
    }
    if (y >= 0)
        g->m.trans[(size_t)x * 256 + b] = y;
    return y;
}

static inline int32_t step(sift_grammar *g, uint32_t x, unsigned b)
{
    int32_t y = g->m.trans[(size_t)x * 256 + b];
    return y >= 0 ? y : trans_compute(g, x, b);
}

/* ------------------------------------------------------------------ */
/* Tokens                                                              */
/* ------------------------------------------------------------------ */

static const unsigned char *piece(const gcore *c, int32_t t, size_t *len)
{
    *len = (size_t)(c->poff[t + 1] - c->poff[t]);
    return c->pbytes + c->poff[t];
}

/* The state after token t in state x: 0 if rejected, -1 on failure. */
static int32_t token_next(sift_grammar *g, uint32_t x, int32_t t)
{
    const gcore *c = g->core;
    gm *m = &g->m;
    if (c->attr[t] & SIFT_TOKEN_EOG)
        return (m->st[x].flags & F_COMPLETE) ? (int32_t)x : 0;
    size_t L;
    const unsigned char *p = piece(c, t, &L);
    int32_t y = L ? (int32_t)x : 0;
    /* one unit per byte, cached or not, so that a prepared accept never
     * costs more than its prepare */
    if (!budget(g, (int64_t)L + 1))
        return -1;
    for (size_t k = 0; k < L && y > 0; k++)
        y = step(g, (uint32_t)y, p[k]);
    if (y < 0)
        return -1;
    if (!(m->st[x].flags & F_HASTOK) || m->st[x].rem)
        return y;
    /* token elements match by id; their successors are memoized first,
     * then the union is built in m->scr (the text path above is done
     * with it) */
    uint32_t sl = m->st[x].set_len;
    if (!budget(g, 2 * (int64_t)sl))
        return -1;
    int any = 0;
    for (uint32_t k = 0; k < sl; k++) {
        uint32_t s = m->arena[m->st[x].set_off + k];
        if (!s)
            continue;
        const sift__gelem *e = EL(g, m->node[s].pos);
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
        const sift__gelem *e = EL(g, m->node[s].pos);
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
/* Building                                                            */
/* ------------------------------------------------------------------ */

static int32_t initial_state(sift_grammar *g)
{
    const gcore *c = g->core;
    uint32_t r = c->g.root;
    uint32_t na = c->alt_off[r + 1] - c->alt_off[r];
    if (!budget(g, na))
        return -1;
    uint32_t *seeds = sift__malloc(&g->al, na ? na : 1, sizeof *seeds);
    if (!seeds) {
        gfail(g, SIFT_E_NOMEM, "out of memory while starting the grammar");
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
    const gm *sm = &gs->m;
    const gstate *s = &sm->st[x];
    if (x == 0)
        return 0;
    if (!grow(&g->al, (void **)&g->imp_ids, &g->cap_imp_ids, 0, s->set_len, sizeof *g->imp_ids)) {
        gfail(g, SIFT_E_NOMEM, "out of memory while copying a grammar state");
        return -1;
    }
    uint32_t *ids = g->imp_ids;
    int32_t res = -1;
    for (uint32_t k = 0; k < s->set_len; k++) {
        uint32_t n = sm->arena[s->set_off + k];
        size_t d = 0;
        if (!budget(g, 2 * (int64_t)sm->node[n].depth + 1))
            goto out;
        for (uint32_t y = n; y; y = sm->node[y].parent) {
            if (!grow(&g->al, (void **)&g->imp_path, &g->cap_imp_path, d, d + 1,
                      sizeof *g->imp_path)) {
                gfail(g, SIFT_E_NOMEM, "out of memory while copying a grammar state");
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
    if (budget(g, sort_cost(s->set_len))) {
        size_t n = sort_unique(ids, s->set_len);
        res = state_get(g, ids, n, s->acc, s->rem, s->lo, s->hi);
    }
out:
    return res;
}

static int cmp_piece_ids(const void *a, const void *b, void *c);

/* Sorts token ids by piece bytes (then id). qsort takes no context
 * argument and a file-level pointer would be global state, so this is a
 * bottom-up merge sort of our own. */
static void sort_ids_by_piece(const gcore *c, int32_t *v, int32_t *tmp, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n;
            size_t hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                if (cmp_piece_ids(&v[j], &v[i], (void *)(uintptr_t)c) < 0)
                    tmp[k++] = v[j++];
                else
                    tmp[k++] = v[i++];
            }
            while (i < mid)
                tmp[k++] = v[i++];
            while (j < hi)
                tmp[k++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof *v);
    }
}

static int cmp_piece_ids(const void *a, const void *b, void *cv)
{
    const gcore *c = (const gcore *)cv;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t lx, ly;
    const unsigned char *px = piece(c, x, &lx), *py = piece(c, y, &ly);
    size_t l = lx < ly ? lx : ly;
    int r = memcmp(px, py, l);
    if (r)
        return r;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Builds the trie of the non-empty, non-EOG pieces. */
static int build_trie(gcore *c)
{
    const sift__alloc *al = &c->al;
    size_t n = 0, n_other = 0;
    uint64_t total = 0;
    for (int32_t t = 0; t < c->V; t++) {
        size_t L = (size_t)(c->poff[t + 1] - c->poff[t]);
        if (L && !(c->attr[t] & SIFT_TOKEN_EOG)) {
            n++;
            total += L;
        } else {
            n_other++;
        }
    }
    if (total >= UINT32_MAX / 2)
        return 0;
    int32_t *ids = sift__malloc(al, n ? n : 1, sizeof *ids);
    int32_t *tmp = sift__malloc(al, n ? n : 1, sizeof *tmp);
    c->tr = sift__malloc(al, (size_t)total + 1, sizeof *c->tr);
    c->stok = sift__malloc(al, n ? n : 1, sizeof *c->stok);
    c->other = sift__malloc(al, n_other ? n_other : 1, sizeof *c->other);
    uint32_t *path = NULL;
    int ok = 0;
    if (!ids || !tmp || !c->tr || !c->stok || !c->other)
        goto out;
    n = 0;
    uint32_t maxd = 0;
    for (int32_t t = 0; t < c->V; t++) {
        size_t L = (size_t)(c->poff[t + 1] - c->poff[t]);
        if (L && !(c->attr[t] & SIFT_TOKEN_EOG)) {
            ids[n++] = t;
            if (L > maxd)
                maxd = (uint32_t)L;
        } else {
            c->other[c->n_other++] = t;
        }
    }
    if (maxd >= (1u << 24))
        goto out;
    sort_ids_by_piece(c, ids, tmp, n);
    path = sift__malloc(al, (size_t)maxd + 1, sizeof *path);
    if (!path)
        goto out;
    /* path[d] = node at depth d+1 on the current branch; a node is closed
     * (end, slot_end) when the branch leaves it */
    size_t depth = 0;
    uint32_t tn = 0, slots = 0;
    const unsigned char *prev = NULL;
    size_t prev_len = 0;
    for (size_t k = 0; k < n; k++) {
        size_t L;
        const unsigned char *p = piece(c, ids[k], &L);
        size_t lcp = 0;
        while (prev && lcp < L && lcp < prev_len && p[lcp] == prev[lcp])
            lcp++;
        while (depth > lcp) {
            tnode *x = &c->tr[path[--depth]];
            x->end = tn;
            x->slot_end = slots;
        }
        for (; depth < L; depth++) {
            tnode *x = &c->tr[tn];
            x->db = ((uint32_t)(depth + 1) << 8) | p[depth];
            x->slot = slots;
            path[depth] = tn++;
        }
        c->stok[slots++] = ids[k];
        prev = p;
        prev_len = L;
    }
    while (depth > 0) {
        tnode *x = &c->tr[path[--depth]];
        x->end = tn;
        x->slot_end = slots;
    }
    c->tn = tn;
    c->n_slots = slots;
    c->tmaxd = maxd;
    ok = 1;
out:
    sift__free(al, ids);
    sift__free(al, tmp);
    sift__free(al, path);
    return ok;
}

static sift_status core_new(gcore **out, const char *text, size_t len, const sift_vocab *vocab,
                            const sift_grammar_params *pp, const sift__alloc *al, int *needs_vocab,
                            sift_error *err)
{
    gcore *c = sift__calloc(al, 1, sizeof *c);
    if (!c)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while building a grammar");
    atomic_init(&c->refs, 1);
    c->al = *al;
    sift_status s = sift__gbnf_parse_mapped(&c->g, text, len, pp->root, pp->source_name, vocab, al,
                                            pp->map_position, pp->map_user, needs_vocab, err);
    if (s) {
        sift__free(al, c);
        return s;
    }
    const sift__gbnf *g = &c->g;
    size_t n_alt = 0;
    for (size_t i = 0; i < g->n_el; i++)
        n_alt += is_end(g->el[i].type);
    c->alt_off = sift__calloc(al, (size_t)g->n_rules + 1, sizeof *c->alt_off);
    c->alt = sift__calloc(al, n_alt + 1, sizeof *c->alt);
    if (!c->alt_off || !c->alt)
        goto nomem;
    {
        uint32_t k = 0;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            c->alt_off[r] = k;
            uint32_t p = g->rule_start[r];
            c->alt[k++] = p;
            for (; g->el[p].type != SIFT__G_END; p++)
                if (g->el[p].type == SIFT__G_ALT)
                    c->alt[k++] = p + 1;
        }
        c->alt_off[g->n_rules] = k;
    }
    if (vocab) {
        int32_t V = sift_vocab_size(vocab);
        uint64_t total = 0;
        for (int32_t t = 0; t < V; t++) {
            const char *b;
            size_t l;
            if (sift_vocab_piece(vocab, t, &b, &l, NULL) == SIFT_OK)
                total += l;
        }
        c->V = V;
        c->poff = sift__calloc(al, (size_t)V + 1, sizeof *c->poff);
        c->pbytes = sift__malloc(al, (size_t)total + 1, 1);
        c->attr = sift__calloc(al, (size_t)V, 1);
        if (!c->poff || !c->pbytes || !c->attr)
            goto nomem;
        uint64_t pos = 0;
        int32_t n_eog = 0;
        for (int32_t t = 0; t < V; t++) {
            const char *b;
            size_t l;
            c->poff[t] = pos;
            if (sift_vocab_piece(vocab, t, &b, &l, NULL) == SIFT_OK && l) {
                memcpy(c->pbytes + pos, b, l);
                pos += l;
            }
            c->attr[t] = (uint8_t)sift_vocab_attr(vocab, t);
            n_eog += (c->attr[t] & SIFT_TOKEN_EOG) != 0;
        }
        c->poff[V] = pos;
        c->eog = sift__malloc(al, n_eog ? (size_t)n_eog : 1, sizeof *c->eog);
        if (!c->eog)
            goto nomem;
        for (int32_t t = 0; t < V; t++)
            if (c->attr[t] & SIFT_TOKEN_EOG)
                c->eog[c->n_eog++] = t;
        if (!build_trie(c))
            goto nomem;
    }
    *out = c;
    return SIFT_OK;
nomem:
    core_unref(c);
    return sift__fail(err, SIFT_E_NOMEM, "out of memory while building a grammar");
}

/* A grammar object over core c (a reference is taken on success). The
 * matching state is `from`'s current state, or the initial one. */
static sift_status grammar_make(sift_grammar **out, gcore *c, const sift__alloc *al,
                                const sift_grammar *from, const sift_grammar_params *pp,
                                sift_error *err)
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
        gm_free(&g->m, al);
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
    gm_free(&g->m, al);
    sift__free(al, g->bits);
    sift__free(al, g->dstk);
    sift__free(al, g);
    return sift__fail(err, SIFT_E_NOMEM, "out of memory while creating a grammar");
}

/* ------------------------------------------------------------------ */
/* Public API                                                          */
/* ------------------------------------------------------------------ */

void sift_grammar_params_init(sift_grammar_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->max_bytes = SIFT_GRAMMAR_DEFAULT_MAX_BYTES;
    p->max_stacks = SIFT_GRAMMAR_DEFAULT_MAX_STACKS;
    p->max_stack_depth = SIFT_GRAMMAR_DEFAULT_MAX_STACK_DEPTH;
    p->max_step_work = SIFT_GRAMMAR_DEFAULT_MAX_STEP_WORK;
}

sift_status sift_grammar_new(sift_grammar **out, const char *text, size_t len,
                             const sift_vocab *vocab, const sift_grammar_params *params,
                             sift_error *err)
{
    return sift__grammar_new_ex(out, text, len, vocab, params, NULL, err);
}

sift_status sift__grammar_new_ex(sift_grammar **out, const char *text, size_t len,
                                 const sift_vocab *vocab, const sift_grammar_params *params,
                                 int *needs_vocab, sift_error *err)
{
    if (needs_vocab)
        *needs_vocab = 0;
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!text && len)
        return sift__fail(err, SIFT_E_ARG, "text is NULL but len = %zu", len);
    sift_grammar_params pp;
    sift_grammar_params_init(&pp);
    if (params) {
        if (params->struct_size == 0 || params->struct_size > sizeof pp)
            return sift__fail(err, SIFT_E_ARG, "params->struct_size is %u (expected 1..%zu)",
                              (unsigned)params->struct_size, sizeof pp);
        memcpy(&pp, params, params->struct_size);
    }
    if (pp.max_stacks < 1 || pp.max_stack_depth < 1 || pp.max_step_work < 1)
        return sift__fail(err, SIFT_E_ARG,
                          "grammar limits must be >= 1 (max_stacks %d, max_stack_depth %d, "
                          "max_step_work %lld)",
                          (int)pp.max_stacks, (int)pp.max_stack_depth, (long long)pp.max_step_work);
    const char *src = pp.source_name ? pp.source_name : "grammar";
    if (len > pp.max_bytes) {
        sift_status s = sift__fail(err, SIFT_E_GRAMMAR_LIMIT, "%s: grammar is %zu bytes; max %zu",
                                   src, len, pp.max_bytes);
        if (err)
            sift__strlcpy_utf8(err->source, src, sizeof err->source);
        return s;
    }
    sift__alloc al;
    sift_status s = sift__alloc_init(&al, pp.allocator, err);
    if (s)
        return s;
    gcore *c = NULL;
    s = core_new(&c, text ? text : "", len, vocab, &pp, &al, needs_vocab, err);
    if (s)
        return s;
    s = grammar_make(out, c, &al, NULL, &pp, err);
    core_unref(c); /* grammar_make took its own reference on success */
    return s;
}

void sift_grammar_free(sift_grammar *g)
{
    if (!g)
        return;
    sift__alloc al = g->al;
    g->magic = 0;
    gm_free(&g->m, &al);
    sift__free(&al, g->bits);
    sift__free(&al, g->dstk);
    sift__free(&al, g->rr);
    sift__free(&al, g->imp_ids);
    sift__free(&al, g->imp_path);
    sift__trigger_free(g->trig);
    core_unref(g->core);
    sift__free(&al, g);
}

static sift_status check(const sift_grammar *g, sift_error *err)
{
    if (!g)
        return sift__fail(err, SIFT_E_ARG, "grammar is NULL");
    if (g->magic != MAGIC)
        return sift__fail(err, SIFT_E_ARG, "grammar is not a live grammar object");
    return SIFT_OK;
}

sift_status sift_grammar_clone(const sift_grammar *g, sift_grammar **out, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    sift_status s = check(g, err);
    if (s)
        return s;
    if ((s = grammar_make(out, g->core, &g->al, g, NULL, err)))
        return s;
    if (g->trig) {
        sift_grammar *c = *out;
        c->triggered = g->triggered;
        if ((s = sift__trigger_clone(g->trig, &c->trig, err))) {
            sift_grammar_free(c);
            *out = NULL;
            return s;
        }
    }
    return SIFT_OK;
}

void sift_grammar_reset(sift_grammar *g)
{
    if (!g || g->magic != MAGIC)
        return;
    g->cur = g->init;
    g->out_len = 0;
    memset(g->tail, 0, sizeof g->tail);
    if (g->trig) {
        sift__trigger_reset(g->trig);
        g->triggered = 0;
    }
}

static sift_status maybe_flush(sift_grammar *g, sift_error *err);
static void begin(sift_grammar *g, sift_error *err);
static void end_call(sift_grammar *g);

sift_status sift__grammar_sync(sift_grammar *g, const sift_grammar *from, sift_error *err)
{
    sift_status s = check(g, err);
    if (s || (s = check(from, err)))
        return s;
    if (g->core != from->core || !g->trig != !from->trig)
        return sift__fail(err, SIFT_E_ARG, "grammars differ: a shadow grammar must be a clone");
    begin(g, err);
    if ((s = maybe_flush(g, err))) {
        end_call(g);
        return s;
    }
    int32_t cur = import_state(g, from, from->cur);
    if (cur < 0) {
        s = g->fail;
        end_call(g);
        return s;
    }
    end_call(g);
    if (from->trig && (s = sift__trigger_copy_state(g->trig, from->trig, err)))
        return s;
    g->cur = (uint32_t)cur;
    g->out_len = from->out_len;
    memcpy(g->tail, from->tail, sizeof g->tail);
    g->triggered = from->triggered;
    g->ss_valid = 0;
    return SIFT_OK;
}

/* An untriggered lazy grammar: constrains nothing, feeds its triggers. */
static int idle(const sift_grammar *g)
{
    return g->trig && !g->triggered;
}

int sift_grammar_is_complete(const sift_grammar *g)
{
    if (!g || g->magic != MAGIC)
        return 0;
    if (idle(g))
        return 1;
    return (g->m.st[g->cur].flags & F_COMPLETE) != 0;
}

static int caches_large(const sift_grammar *g)
{
    const gm *m = &g->m;
    return m->n_node >= g->soft_nodes || m->n_st >= g->soft_states || m->n_arena >= g->soft_arena;
}

/* Rebuilds the caches from the current state when they are large; only
 * between steps, when no state id is held elsewhere. */
static sift_status maybe_flush(sift_grammar *g, sift_error *err)
{
    if (!caches_large(g))
        return SIFT_OK;
    sift_grammar *fresh = NULL;
    sift_status s = grammar_make(&fresh, g->core, &g->al, g, NULL, err);
    if (s)
        return s;
    /* the rebuild is work of the call that triggered it (grammar_make
     * stops at max_work by itself; begin() has run) */
    g->err = err;
    if (!budget(g, fresh->work)) {
        sift_grammar_free(fresh);
        return g->fail;
    }
    gm tmp = g->m;
    g->m = fresh->m;
    fresh->m = tmp;
    g->cur = fresh->cur;
    g->init = fresh->init;
    g->epoch++;
    sift_grammar_free(fresh);
    return SIFT_OK;
}

/* Swaps the matching state and caches of a and b. */
static void swap_matcher(sift_grammar *a, sift_grammar *b)
{
    gm tm = a->m;
    a->m = b->m;
    b->m = tm;
    uint32_t t = a->cur;
    a->cur = b->cur;
    b->cur = t;
    t = a->init;
    a->init = b->init;
    b->init = t;
    a->epoch++;
    b->epoch++;
}

static void begin(sift_grammar *g, sift_error *err)
{
    g->err = err;
    g->fail = SIFT_OK;
    g->work = 0;
}

static void end_call(sift_grammar *g)
{
    g->err = NULL;
}

static void note_output(sift_grammar *g, const unsigned char *p, size_t n)
{
    if (n == 0)
        return; /* p may be NULL */
    g->out_len += n;
    size_t cap = sizeof g->tail;
    if (n >= cap) {
        memcpy(g->tail, p + n - cap, cap);
        return;
    }
    memmove(g->tail, g->tail + n, cap - n);
    memcpy(g->tail + cap - n, p, n);
}

/* The last accepted bytes, printable, for messages. */
static void tail_text(const sift_grammar *g, char *buf, size_t cap)
{
    size_t n = g->out_len < sizeof g->tail ? (size_t)g->out_len : sizeof g->tail;
    const unsigned char *p = g->tail + sizeof g->tail - n;
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i++) {
        unsigned char ch = p[i];
        if (ch >= 0x20 && ch < 0x7F && ch != '`')
            buf[k++] = (char)ch;
        else
            k += (size_t)snprintf(buf + k, cap - k, "\\x%02X", ch);
    }
    buf[k] = '\0';
}

sift_status sift_grammar_accept_bytes(sift_grammar *g, const void *bytes, size_t n, sift_error *err)
{
    sift_status s = check(g, err);
    if (s)
        return s;
    if (!bytes && n)
        return sift__fail(err, SIFT_E_ARG, "bytes is NULL but n = %zu", n);
    if (n == 0)
        return SIFT_OK; /* no text: nothing to match or to feed a trigger */
    if (idle(g))
        return lazy_step(g, -1, bytes, n, 1, err);
    begin(g, err);
    if ((s = maybe_flush(g, err))) {
        end_call(g);
        return s;
    }
    const unsigned char *p = bytes;
    int32_t y = (int32_t)g->cur;
    size_t k = 0;
    /* A long input can create more states than the caches should hold:
     * they are rebuilt from the state reached so far, and a copy of the
     * starting state is kept to restore it if the call fails later. */
    sift_grammar *orig = NULL;
    for (; k < n && y > 0; k++) {
        if (SIFT__UNLIKELY(caches_large(g))) {
            uint32_t cur0 = g->cur;
            if (!orig && (s = sift_grammar_clone(g, &orig, err)))
                break;
            g->cur = (uint32_t)y;
            s = maybe_flush(g, err);
            y = (int32_t)g->cur;
            g->cur = cur0; /* stale id if flushed; fixed below */
            if (s)
                break;
            g->work = 0;
        }
        y = step(g, (uint32_t)y, p[k]);
    }
    end_call(g);
    if (s || y <= 0) {
        if (orig) {
            swap_matcher(g, orig);
            sift_grammar_free(orig);
        }
        if (s)
            return s;
        if (y < 0)
            return g->fail;
    } else if (orig) {
        sift_grammar_free(orig);
    }
    if (y == 0) {
        /* name the place with the text before the failing byte */
        char t[128];
        uint64_t save_len = g->out_len;
        unsigned char save[sizeof g->tail];
        memcpy(save, g->tail, sizeof save);
        note_output(g, p, k - 1);
        tail_text(g, t, sizeof t);
        g->out_len = save_len;
        memcpy(g->tail, save, sizeof save);
        return sift__fail_at(err, SIFT_E_GRAMMAR_REJECT, (int64_t)(k - 1),
                             "byte %zu of the input (0x%02X) is not allowed at output byte %llu "
                             "(after `%s`)",
                             k - 1, p[k - 1], (unsigned long long)(g->out_len + k - 1), t);
    }
    note_output(g, p, n);
    g->cur = (uint32_t)y;
    return SIFT_OK;
}

static sift_status check_token(const sift_grammar *g, int32_t t, sift_error *err)
{
    if (!g->core->V)
        return sift__fail(err, SIFT_E_ARG,
                          "the grammar has no vocabulary (give one to "
                          "sift_grammar_new to work with tokens)");
    if (t < 0 || t >= g->core->V)
        return sift__fail_at(err, SIFT_E_TOKEN, t, "token %d out of range [0, %d)", (int)t,
                             (int)g->core->V);
    return SIFT_OK;
}

sift_status sift_grammar_accepts_token(sift_grammar *g, int32_t token, int *ok, sift_error *err)
{
    sift_status s = check(g, err);
    if (s)
        return s;
    if (!ok)
        return sift__fail(err, SIFT_E_ARG, "ok is NULL");
    if ((s = check_token(g, token, err)))
        return s;
    if (idle(g)) {
        *ok = 1;
        return SIFT_OK;
    }
    begin(g, err);
    int32_t y = token_next(g, g->cur, token);
    end_call(g);
    if (y < 0)
        return g->fail;
    *ok = y > 0;
    return SIFT_OK;
}

static sift_status reject_msg(sift_grammar *g, int32_t token, sift_error *err)
{
    char t[128], pc[64];
    tail_text(g, t, sizeof t);
    size_t L;
    const unsigned char *p = piece(g->core, token, &L);
    size_t k = 0;
    for (size_t i = 0; i < L && k + 5 < sizeof pc; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7F && p[i] != '`')
            pc[k++] = (char)p[i];
        else
            k += (size_t)snprintf(pc + k, sizeof pc - k, "\\x%02X", p[i]);
    }
    pc[k] = '\0';
    if (sift_grammar_is_complete(g) && g->m.st[g->cur].set_len == 1 &&
        !(g->core->attr[token] & SIFT_TOKEN_EOG))
        return sift__fail_at(err, SIFT_E_GRAMMAR_REJECT, token,
                             "token %d (`%s`) not allowed: the grammar is complete (only an "
                             "end-of-generation token can follow)",
                             (int)token, pc);
    return sift__fail_at(err, SIFT_E_GRAMMAR_REJECT, token,
                         "token %d (`%s`) not allowed at output byte %llu (after `%s`)", (int)token,
                         pc, (unsigned long long)g->out_len, t);
}

sift_status sift__grammar_prepare_accept(sift_grammar *g, int32_t token, sift_error *err)
{
    sift_status s = check(g, err);
    if (s)
        return s;
    if ((s = check_token(g, token, err)))
        return s;
    if (idle(g))
        return lazy_step(g, token, NULL, 0, 0, err);
    begin(g, err);
    if ((s = maybe_flush(g, err))) {
        end_call(g);
        return s;
    }
    int32_t y = token_next(g, g->cur, token);
    end_call(g);
    if (y < 0)
        return g->fail;
    if (y == 0)
        return reject_msg(g, token, err);
    return SIFT_OK;
}

sift_status sift_grammar_accept_token(sift_grammar *g, int32_t token, sift_error *err)
{
    if (g && g->magic == MAGIC && idle(g)) {
        sift_status r = check_token(g, token, err);
        return r ? r : lazy_step(g, token, NULL, 0, 1, err);
    }
    sift_status s = sift__grammar_prepare_accept(g, token, err);
    if (s)
        return s;
    /* Prepared: the text path is cached now; token_next only repeats
     * lookups (and, for token elements, re-interns a known state). */
    begin(g, err);
    int32_t y = token_next(g, g->cur, token);
    end_call(g);
    if (y <= 0)
        return y < 0 ? g->fail : reject_msg(g, token, err);
    if (!(g->core->attr[token] & SIFT_TOKEN_EOG)) {
        size_t L;
        const unsigned char *p = piece(g->core, token, &L);
        note_output(g, p, L);
    }
    g->cur = (uint32_t)y;
    return SIFT_OK;
}

/* The state after trie node nd: the transition over its edge byte from
 * its parent's state (ds holds the state per depth), computed when the
 * table lacks it; *trans is reloaded, as computing may move the table.
 * -1 on a matcher failure (g->fail). */
static inline int32_t trie_edge(sift_grammar *g, const uint32_t *ds, const tnode *nd,
                                const int32_t **trans)
{
    uint32_t from = ds[(nd->db >> 8) - 1], b = nd->db & 0xff;
    int32_t y = (*trans)[(size_t)from * 256 + b];
    if (SIFT__UNLIKELY(y < 0)) {
        y = trans_compute(g, from, b);
        *trans = g->m.trans;
    }
    return y;
}

/* Trie walks charge their nodes in chunks of this many (one unit each). */
#define WALK_CHUNK 1024u

/* The trie walk in the current state: g->rr[0 .. 2 n_rr) receives the
 * slot ranges of the rejected subtrees, in increasing order; *n_rej the
 * number of rejected trie tokens. One table lookup per trie edge; dead
 * subtrees are skipped whole. */
static sift_status walk(sift_grammar *g, uint32_t *n_rej)
{
    const gcore *c = g->core;
    gm *m = &g->m;
    uint32_t x = g->cur;
    uint32_t rej = 0;
    g->n_rr = 0;
    if (x == 0 || m->st[x].set_len == 0) {
        if (!grow(&g->al, (void **)&g->rr, &g->cap_rr, 0, 2, sizeof *g->rr))
            return gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
        g->rr[0] = 0;
        g->rr[1] = c->n_slots;
        g->n_rr = 1;
        *n_rej = c->n_slots;
        return SIFT_OK;
    }
    const tnode *tr = c->tr;
    uint32_t *ds = g->dstk;
    const int32_t *trans = m->trans;
    ds[0] = x;
    uint32_t i = 0, tn = c->tn, walked = 0;
    while (i < tn) {
        const tnode *nd = &tr[i];
        if (SIFT__UNLIKELY(++walked == WALK_CHUNK)) {
            walked = 0;
            if (!budget(g, WALK_CHUNK))
                return g->fail;
        }
        int32_t y = trie_edge(g, ds, nd, &trans);
        if (y < 0)
            return g->fail;
        if (y == 0) {
            if (g->n_rr && g->rr[2 * g->n_rr - 1] == nd->slot) {
                g->rr[2 * g->n_rr - 1] = nd->slot_end;
            } else {
                if (SIFT__UNLIKELY(2 * g->n_rr + 2 > g->cap_rr) &&
                    !grow(&g->al, (void **)&g->rr, &g->cap_rr, 2 * g->n_rr, 2 * g->n_rr + 2,
                          sizeof *g->rr))
                    return gfail(g, SIFT_E_NOMEM, "out of memory in the grammar matcher");
                g->rr[2 * g->n_rr] = nd->slot;
                g->rr[2 * g->n_rr + 1] = nd->slot_end;
                g->n_rr++;
            }
            rej += nd->slot_end - nd->slot;
            i = nd->end;
            continue;
        }
        ds[nd->db >> 8] = (uint32_t)y;
        i++;
    }
    if (!budget(g, walked))
        return g->fail;
    *n_rej = rej;
    return SIFT_OK;
}

/* Whether the state has token-element stacks that can match now. */
static int tok_state(const sift_grammar *g)
{
    const gstate *st = &g->m.st[g->cur];
    return (st->flags & F_HASTOK) && st->rem == 0;
}

/* Computes g->bits (by token id): the tokens the grammar accepts now,
 * from the walk's ranges, the token elements and the EOG rule. */
static sift_status allowed_bits(sift_grammar *g, size_t *n_non_eog)
{
    const gcore *c = g->core;
    gm *m = &g->m;
    uint8_t *bits = g->bits;
    size_t nb = ((size_t)c->V + 7) / 8;
    uint32_t x = g->cur;
    uint32_t rej;
    sift_status s = walk(g, &rej);
    if (s)
        return s;
    size_t cnt = c->n_slots - rej;
    /* the bitmap, the other tokens, the rejected slots, the stacks */
    if (!budget(g, (int64_t)nb + c->n_other + rej + 2 * (int64_t)m->st[x].set_len + c->n_eog))
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
            const sift__gelem *e = st ? EL(g, m->node[st].pos) : NULL;
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
            const sift__gelem *e = st ? EL(g, m->node[st].pos) : NULL;
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
    const gcore *c = g->core;
    gm *m = &g->m;
    uint32_t x = g->cur;
    size_t n = 0;
    if (x != 0 && m->st[x].set_len != 0) {
        const tnode *tr = c->tr;
        uint32_t *ds = g->dstk;
        const int32_t *trans = m->trans;
        ds[0] = x;
        uint32_t i = 0, tn = c->tn, walked = 0;
        while (i < tn) {
            const tnode *nd = &tr[i];
            if (SIFT__UNLIKELY(++walked == WALK_CHUNK)) {
                walked = 0;
                if (!budget(g, WALK_CHUNK))
                    return SIZE_MAX - 1;
            }
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
        if (!budget(g, walked))
            return SIZE_MAX - 1;
    }
    if (!budget(g, c->n_other + (int64_t)n * (int64_t)n))
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
        begin(g, err);
        n = small_walk(g);
        end_call(g);
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
    if (!g || g->magic != MAGIC || !g->core->V || idle(g))
        return SIFT_OK;
    return small_compute(g, err);
}

size_t sift__grammar_small_set(sift_grammar *g, const int32_t **ids)
{
    *ids = NULL;
    if (!g || g->magic != MAGIC || !g->core->V || idle(g))
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
    const gcore *c = g->core;
    uint32_t rej;
    sift_status s = walk(g, &rej);
    if (s)
        return s;
    *n_non_eog = c->n_slots - rej;
    /* the rejected slots and the other tokens are written below */
    if (!budget(g, (int64_t)rej + c->n_other + c->n_eog))
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
    if (!budget(g, k)) /* the liveness scan read at most k logits */
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
    tail_text(g, t, sizeof t);
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
    sift_status s = check(g, err);
    if (s)
        return s;
    if (!logits)
        return sift__fail(err, SIFT_E_ARG, "logits is NULL");
    if (!g->core->V)
        return sift__fail(err, SIFT_E_ARG, "the grammar has no vocabulary");
    if (n_vocab != g->core->V)
        return sift__fail(err, SIFT_E_ARG, "grammar vocabulary V = %d does not match row V = %d",
                          (int)g->core->V, (int)n_vocab);
    if (idle(g))
        return SIFT_OK;
    begin(g, err);
    size_t nne = 0;
    int live = 0;
    if (!tok_state(g)) {
        s = ban_dense(g, logits, sizeof *logits, &nne, &live);
        end_call(g);
        if (s)
            return s;
        return live ? SIFT_OK : dead_msg(g, nne, err);
    }
    s = allowed_bits(g, &nne);
    if (!s && !budget(g, 2 * (int64_t)n_vocab)) /* the two passes below */
        s = g->fail;
    end_call(g);
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
    sift_status s = check(g, err);
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
    if (idle(g))
        return SIFT_OK;
    begin(g, err);
    int live = 0;
    sift_status s = SIFT_OK;
    size_t nne = 0;
    if (a->dense && a->n == (size_t)a->V && !tok_state(g)) {
        s = ban_dense(g, &a->c[0].logit, sizeof a->c[0], &nne, &live);
    } else if (a->n * 16 >= (size_t)a->V) {
        /* many candidates: one trie walk */
        s = allowed_bits(g, &nne);
        if (!s && !budget(g, 2 * (int64_t)a->n))
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
        if (!budget(g, (int64_t)a->n))
            s = g->fail;
        for (size_t i = 0; i < a->n && !s; i++) {
            int32_t t = a->c[i].id;
            int32_t y = token_next(g, g->cur, t);
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
    end_call(g);
    if (s)
        return s;
    if (!live)
        return dead_msg(g, nne, err);
    sift__arr_touched(a);
    return SIFT_OK;
}

uint64_t sift__grammar_digest(const sift_grammar *g, uint64_t h)
{
    const gm *m = &g->m;
    const gstate *s = &m->st[g->cur];
    uint64_t acc = 0;
    for (uint32_t k = 0; k < s->set_len; k++) {
        uint64_t sh = 1469598103934665603ull;
        for (uint32_t y = m->arena[s->set_off + k]; y; y = m->node[y].parent)
            sh = sift__fnv(sh, &m->node[y].pos, sizeof m->node[y].pos);
        acc += sh * 0x9E3779B97F4A7C15ull; /* order-free */
    }
    uint32_t t[5] = {s->set_len, s->acc, s->rem, s->lo, s->hi};
    h = sift__fnv(h, t, sizeof t);
    h = sift__fnv(h, &acc, sizeof acc);
    if (g->trig) {
        h = sift__fnv(h, &g->triggered, sizeof g->triggered);
        h = sift__trigger_digest(g->trig, h);
    }
    return h;
}

int64_t sift__grammar_last_work(const sift_grammar *g)
{
    return g->work;
}

int32_t sift__grammar_n_vocab(const sift_grammar *g)
{
    return g->core->V;
}

int sift__grammar_owned(const sift_grammar *g)
{
    return g->owned;
}

void sift__grammar_set_owned(sift_grammar *g)
{
    g->owned = 1;
}

void sift__grammar_set_soft_limits(sift_grammar *g, uint32_t nodes, uint32_t states, uint32_t arena)
{
    g->soft_nodes = nodes;
    g->soft_states = states;
    g->soft_arena = arena;
}

/* ------------------------------------------------------------------ */
/* Lazy grammars                                                       */
/* ------------------------------------------------------------------ */

void sift_lazy_params_init(sift_lazy_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->max_window = SIFT_LAZY_DEFAULT_MAX_WINDOW;
    p->max_text = SIFT_LAZY_DEFAULT_MAX_TEXT;
    p->max_triggers = SIFT_LAZY_DEFAULT_MAX_TRIGGERS;
    p->match_limit = SIFT_LAZY_DEFAULT_MATCH_LIMIT;
    p->depth_limit = SIFT_LAZY_DEFAULT_DEPTH_LIMIT;
    p->heap_limit_kib = SIFT_LAZY_DEFAULT_HEAP_LIMIT_KIB;
}

int sift_grammar_is_triggered(const sift_grammar *g)
{
    if (!g || g->magic != MAGIC)
        return 0;
    return !idle(g);
}

/* Printable copy of bytes for messages. */
static void show(char *buf, size_t cap, const unsigned char *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7F && p[i] != '`')
            buf[k++] = (char)p[i];
        else
            k += (size_t)snprintf(buf + k, cap - k, "\\x%02X", p[i]);
    }
    buf[k] = '\0';
}

/* Tries one token (or, with token = -1, bytes of no token) on an
 * untriggered lazy grammar: the set is fed the token; if a trigger fires,
 * the replay is run through the matcher from the initial state. Without
 * `commit`, or on failure, the feed is taken back (sift__trigger_undo),
 * so only a committed success changes anything; the matcher caches may
 * grow either way, which no result can see. */
static sift_status lazy_step(sift_grammar *g, int32_t token, const void *bytes, size_t n,
                             int commit, sift_error *err)
{
    const gcore *c = g->core;
    const unsigned char *p = bytes;
    size_t L = n;
    if (token >= 0) {
        p = piece(c, token, &L);
        /* special and end-of-generation tokens produce no generated text;
         * token triggers still see their ids */
        if (c->attr[token] & (SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG))
            L = 0;
    }
    int fired = 0;
    int64_t start = -1;
    sift_status s = sift__trigger_feed(g->trig, token, (const char *)p, L, &fired, &start, err);
    if (s)
        return s;
    if (fired) {
        begin(g, err);
        if ((s = maybe_flush(g, err))) {
            end_call(g);
            sift__trigger_undo(g->trig);
            return s;
        }
        const sift__trigger *t = g->trig;
        int64_t fi = sift__trigger_fired_index(t);
        int whole = sift__trigger_kind_of(t, (size_t)fi) == SIFT__TRIGGER_TOKEN;
        size_t nr = sift__trigger_n_replay(t);
        int32_t y = (int32_t)g->init;
        for (size_t i = 0; i < nr && y > 0; i++) {
            int32_t tok;
            const char *b;
            size_t bn, pl = 0;
            sift__trigger_replay(t, i, &tok, &b, &bn);
            if (tok >= 0)
                (void)piece(c, tok, &pl);
            /* a whole token goes through token_next so that token
             * references (<[id]>) match it by id */
            if (tok >= 0 && (whole || bn == pl)) {
                y = token_next(g, (uint32_t)y, tok);
            } else {
                for (size_t k = 0; k < bn && y > 0; k++)
                    y = step(g, (uint32_t)y, (unsigned char)b[k]);
            }
        }
        end_call(g);
        if (y < 0) {
            sift__trigger_undo(g->trig);
            return g->fail;
        }
        if (y == 0) {
            /* the replayed text, up to a message's worth */
            unsigned char raw[48];
            size_t tl = 0;
            for (size_t i = 0; i < nr && tl < sizeof raw; i++) {
                int32_t tok;
                const char *b;
                size_t bn;
                sift__trigger_replay(t, i, &tok, &b, &bn);
                if (whole && tok >= 0)
                    b = (const char *)piece(c, tok, &bn);
                if (bn > sizeof raw - tl)
                    bn = sizeof raw - tl;
                if (bn)
                    memcpy(raw + tl, b, bn);
                tl += bn;
            }
            char txt[96];
            show(txt, sizeof txt, raw, tl);
            sift__trigger_undo(g->trig);
            return sift__fail_at(err, SIFT_E_GRAMMAR_REJECT, token,
                                 "token %d fires trigger %lld at output byte %lld, but the "
                                 "grammar rejects the text from the trigger on (`%s`...)",
                                 (int)token, (long long)fi, (long long)start, txt);
        }
        if (!commit) {
            sift__trigger_undo(g->trig);
            return SIFT_OK;
        }
        g->cur = (uint32_t)y;
        g->triggered = 1;
        g->out_len = 0;
        memset(g->tail, 0, sizeof g->tail);
        for (size_t i = 0; i < nr; i++) {
            int32_t tok;
            const char *b;
            size_t bn;
            sift__trigger_replay(t, i, &tok, &b, &bn);
            if (whole && tok >= 0)
                b = (const char *)piece(c, tok, &bn);
            note_output(g, (const unsigned char *)b, bn);
        }
    } else if (!commit) {
        sift__trigger_undo(g->trig);
    }
    return SIFT_OK;
}

/* Names trigger `gi` (an index over all lists) by its list in err. */
static void name_trigger(sift_error *err, const sift_lazy_params *p, int64_t gi)
{
    if (!err || gi < 0)
        return;
    static const char *const lists[4] = {"words", "patterns", "full_patterns", "tokens"};
    size_t counts[4] = {p->n_words, p->n_patterns, p->n_full_patterns, p->n_tokens};
    size_t i = (size_t)gi, l = 0;
    while (l < 3 && i >= counts[l]) {
        i -= counts[l];
        l++;
    }
    char a[48], b[48], msg[sizeof err->message];
    snprintf(a, sizeof a, "trigger pattern %lld", (long long)gi);
    snprintf(b, sizeof b, "trigger %lld", (long long)gi);
    const char *rest = err->message;
    if (!strncmp(rest, a, strlen(a)))
        rest += strlen(a);
    else if (!strncmp(rest, b, strlen(b)))
        rest += strlen(b);
    else
        b[0] = '\0';
    /* a long PCRE2 message may be cut: the start says where */
    if (snprintf(msg, sizeof msg, "%s[%zu]%s%s", lists[l], i, b[0] ? "" : ": ", rest) < 0)
        return;
    memcpy(err->message, msg, sizeof msg);
    err->index = (int64_t)i;
}

sift_status sift_grammar_set_lazy(sift_grammar *g, const sift_lazy_params *params, sift_error *err)
{
    sift_status s = check(g, err);
    if (s)
        return s;
    if (!params) {
        sift__trigger_free(g->trig);
        g->trig = NULL;
        g->triggered = 0;
        sift_grammar_reset(g);
        return SIFT_OK;
    }
    sift_lazy_params pp;
    sift_lazy_params_init(&pp);
    if (params->struct_size == 0 || params->struct_size > sizeof pp)
        return sift__fail(err, SIFT_E_ARG, "params->struct_size is %u (expected 1..%zu)",
                          (unsigned)params->struct_size, sizeof pp);
    memcpy(&pp, params, params->struct_size);
    const char *const *txt[3] = {pp.words, pp.patterns, pp.full_patterns};
    const size_t *lens[3] = {pp.word_lens, pp.pattern_lens, pp.full_pattern_lens};
    size_t cnt[3] = {pp.n_words, pp.n_patterns, pp.n_full_patterns};
    static const char *const names[3] = {"words", "patterns", "full_patterns"};
    static const sift__trigger_kind kinds[3] = {SIFT__TRIGGER_WORD, SIFT__TRIGGER_PATTERN,
                                                SIFT__TRIGGER_PATTERN_FULL};
    size_t n = 0;
    for (int l = 0; l < 3; l++) {
        if (!txt[l] && cnt[l])
            return sift__fail(err, SIFT_E_ARG, "params->%s is NULL but its count is %zu", names[l],
                              cnt[l]);
        if (cnt[l] > SIZE_MAX / 4 - n)
            return sift__fail(err, SIFT_E_LIMIT, "too many triggers");
        n += cnt[l];
    }
    if (!pp.tokens && pp.n_tokens)
        return sift__fail(err, SIFT_E_ARG, "params->tokens is NULL but n_tokens = %zu",
                          pp.n_tokens);
    if (pp.n_tokens > SIZE_MAX / 4 - n)
        return sift__fail(err, SIFT_E_LIMIT, "too many triggers");
    n += pp.n_tokens;
    if (n == 0)
        return sift__fail(err, SIFT_E_ARG, "a lazy grammar needs at least one trigger");
    if (pp.n_tokens && !g->core->V)
        return sift__fail(err, SIFT_E_ARG, "token triggers need a grammar built with a vocabulary");
    if (n > pp.max_triggers)
        return sift__fail(err, SIFT_E_LIMIT, "%zu triggers; max %zu", n, pp.max_triggers);
    sift__trigger_spec *specs = sift__malloc(&g->al, n, sizeof *specs);
    if (!specs)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for the lazy grammar's triggers");
    size_t k = 0;
    for (int l = 0; l < 3; l++)
        for (size_t i = 0; i < cnt[l]; i++, k++) {
            specs[k].kind = kinds[l];
            specs[k].text = txt[l][i];
            specs[k].len = lens[l] ? lens[l][i] : (txt[l][i] ? strlen(txt[l][i]) : 0);
            specs[k].token = -1;
        }
    for (size_t i = 0; i < pp.n_tokens; i++, k++) {
        specs[k].kind = SIFT__TRIGGER_TOKEN;
        specs[k].text = NULL;
        specs[k].len = 0;
        specs[k].token = pp.tokens[i];
    }
    sift__trigger_params tp;
    sift__trigger_params_init(&tp);
    tp.max_window = pp.max_window;
    tp.max_text = pp.max_text;
    tp.max_triggers = pp.max_triggers;
    tp.match_limit = pp.match_limit;
    tp.depth_limit = pp.depth_limit;
    tp.heap_limit_kib = pp.heap_limit_kib;
    tp.n_vocab = g->core->V;
    sift__trigger *t = NULL;
    s = sift__trigger_new(&t, specs, n, &tp, NULL, &g->al, err);
    sift__free(&g->al, specs);
    if (s) {
        if (err && err->index >= 0 && (size_t)err->index < n)
            name_trigger(err, &pp, err->index);
        return s;
    }
    sift__trigger_free(g->trig);
    g->trig = t;
    g->triggered = 0;
    sift_grammar_reset(g);
    return SIFT_OK;
}

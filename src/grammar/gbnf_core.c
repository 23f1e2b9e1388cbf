/*
 * gbnf_core.c - the shared immutable core of a grammar: the compiled
 * rules with their alternatives, the vocabulary's token index (copies of
 * the pieces and attributes, the EOG ids, the token trie) and the tables
 * the mask cache keys states by (nullable rules, canonical positions).
 *
 * A core is built once per grammar text and vocabulary, read-only after,
 * and shared by reference between the grammar objects of clones and
 * threads; the token index is built once per vocabulary and shared
 * between cores (sift__vocab_index_publish). The matcher automaton that
 * runs over a core is gbnf_match.c (its model is described there and in
 * docs/grammar.md, "Matcher").
 */
#include <stdlib.h>

#include "gbnf_match.h"

void sift__gm_core_unref(gm_core *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    sift__alloc al = c->al;
    sift__gbnf_free(&c->g, &al);
    sift__free(&al, c->alt_off);
    sift__free(&al, c->alt);
    sift__free(&al, c->canon_pos);
    sift__free(&al, c->erase_pos);
    sift__free(&al, c->pcnt);
    sift__vocab_index_unref(c->vx ? &c->vx->head : NULL);
    sift__free(&al, c);
}

static int cmp_piece_ids(const void *a, const void *b, void *c);

/* The piece of token t of the index (len bytes). */
static const unsigned char *vx_piece(const gm_vindex *c, int32_t t, size_t *len)
{
    *len = (size_t)(c->poff[t + 1] - c->poff[t]);
    return c->pbytes + c->poff[t];
}

/* Sorts token ids by piece bytes (then id). qsort takes no context
 * argument and a file-level pointer would be global state, so this is a
 * bottom-up merge sort of our own. */
static void sort_ids_by_piece(const gm_vindex *c, int32_t *v, int32_t *tmp, size_t n)
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
    const gm_vindex *c = (const gm_vindex *)cv;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t lx, ly;
    const unsigned char *px = vx_piece(c, x, &lx), *py = vx_piece(c, y, &ly);
    size_t l = lx < ly ? lx : ly;
    int r = memcmp(px, py, l);
    if (r)
        return r;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Lays the trie of the sorted pieces ids[0 .. n) out in preorder: one
 * node per (depth, byte) of a branch, its slots (positions in stok) those
 * of the pieces below it. path has room for the longest piece. */
static void trie_nodes(gm_vindex *c, const int32_t *ids, size_t n, uint32_t *path)
{
    /* path[d] = node at depth d+1 on the current branch; a node is closed
     * (end, slot_end) when the branch leaves it */
    size_t depth = 0;
    uint32_t tn = 0, slots = 0;
    const unsigned char *prev = NULL;
    size_t prev_len = 0;
    for (size_t k = 0; k < n; k++) {
        size_t L;
        const unsigned char *p = vx_piece(c, ids[k], &L);
        size_t lcp = 0;
        while (prev && lcp < L && lcp < prev_len && p[lcp] == prev[lcp])
            lcp++;
        while (depth > lcp) {
            gm_tnode *x = &c->tr[path[--depth]];
            x->end = tn;
            x->slot_end = slots;
        }
        for (; depth < L; depth++) {
            gm_tnode *x = &c->tr[tn];
            x->db = ((uint32_t)(depth + 1) << 8) | p[depth];
            x->slot = slots;
            path[depth] = tn++;
        }
        c->stok[slots++] = ids[k];
        prev = p;
        prev_len = L;
    }
    while (depth > 0) {
        gm_tnode *x = &c->tr[path[--depth]];
        x->end = tn;
        x->slot_end = slots;
    }
    c->tn = tn;
    c->n_slots = slots;
}

/* below[n]: the groups of the edges inside n's subtree, and height[n];
 * one pass in preorder with the open branch in path[] (a node is closed,
 * and its groups passed to its parent, when the walk leaves its depth).
 * u8[n] (tn + 1 bytes) collects the UTF-8 decoder states from which all
 * below n is valid. */
static void trie_groups(gm_vindex *c, uint32_t *path, uint8_t *u8)
{
    uint32_t tn = c->tn;
    size_t depth = 0;
    memset(u8, 0xff, (size_t)tn + 1);
    for (uint32_t i = 0; i <= tn; i++) {
        size_t d = i < tn ? (c->tr[i].db >> 8) - 1 : 0;
        while (depth > d) {
            uint32_t x = path[--depth];
            /* x is closed: its children have given their UTF-8 bits */
            if (!(u8[x] & 1))
                c->below[2 * x] |= 1ull << SIFT__GM_GROUP_BADU8;
            if (depth > 0) {
                uint32_t p = path[depth - 1], b = c->tr[x].db & 0xff, k = sift__gm_group(b);
                c->below[2 * p + (k >> 6)] |= 1ull << (k & 63);
                /* the bad-UTF-8 group is the node's own, not inherited */
                c->below[2 * p] |= c->below[2 * x] & ~(1ull << SIFT__GM_GROUP_BADU8);
                c->below[2 * p + 1] |= c->below[2 * x + 1];
                unsigned okd = 0;
                for (unsigned ds = 0; ds < 8; ds++) {
                    int dn = sift__gm_u8_next(ds, b);
                    if (dn >= 0 && ((u8[x] >> dn) & 1))
                        okd |= 1u << ds;
                }
                u8[p] &= (uint8_t)okd;
                /* saturated: 255 stands for 255 or more */
                unsigned hx = c->height[x] + 1u < 255u ? c->height[x] + 1u : 255u;
                if (c->height[p] < hx)
                    c->height[p] = (uint8_t)hx;
            }
        }
        if (i < tn)
            path[depth++] = i;
    }
}

/* Builds the trie of the non-empty, non-EOG pieces. */
static int build_trie(gm_vindex *c)
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
    uint8_t *u8 = NULL; /* per node: sift__gm_u8_next's states from which all below is valid */
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
    trie_nodes(c, ids, n, path);
    c->tmaxd = maxd;
    uint32_t tn = c->tn;
    c->below = sift__calloc(al, 2 * (size_t)tn + 2, sizeof *c->below);
    c->height = sift__calloc(al, (size_t)tn + 1, 1);
    u8 = sift__malloc(al, (size_t)tn + 1, 1);
    if (!c->below || !c->height || !u8)
        goto out;
    trie_groups(c, path, u8);
    ok = 1;
out:
    sift__free(al, ids);
    sift__free(al, tmp);
    sift__free(al, path);
    sift__free(al, u8);
    return ok;
}

static void vindex_release(sift__vocab_index *h)
{
    gm_vindex *c = (gm_vindex *)(void *)h;
    sift__alloc al = c->al;
    sift__free(&al, c->poff);
    sift__free(&al, c->pbytes);
    sift__free(&al, c->attr);
    sift__free(&al, c->eog);
    sift__free(&al, c->tr);
    sift__free(&al, c->stok);
    sift__free(&al, c->other);
    sift__free(&al, c->below);
    sift__free(&al, c->height);
    sift__free(&al, c);
}

/* Builds the index of a vocabulary (one reference): copies of its
 * pieces and attribute bits, the end-of-generation list, the trie. */
static sift_status vindex_build(gm_vindex **out, const sift_vocab *vocab, sift_error *err)
{
    const sift__alloc *al = sift__vocab_alloc(vocab);
    gm_vindex *c = sift__calloc(al, 1, sizeof *c);
    if (!c)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while indexing a vocabulary");
    atomic_init(&c->head.refs, 1);
    c->head.release = vindex_release;
    c->al = *al;
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
    *out = c;
    return SIFT_OK;
nomem:
    vindex_release(&c->head);
    return sift__fail(err, SIFT_E_NOMEM, "out of memory while indexing a vocabulary");
}

sift_status sift__gm_vindex(gm_vindex **out, const sift_vocab *vocab, sift_error *err)
{
    sift__vocab_index *h = sift__vocab_index_get(vocab);
    if (!h) {
        gm_vindex *x = NULL;
        sift_status s = vindex_build(&x, vocab, err);
        if (s)
            return s;
        h = sift__vocab_index_publish(vocab, &x->head);
    }
    *out = (gm_vindex *)(void *)h;
    return SIFT_OK;
}

/* Nullable rules (conservatively: a token element counts as matching
 * nothing, for it consumes no byte of the output), by passes to a fixed
 * point; 0 when the passes do not settle within a bound (then nothing is
 * known and the caller moves no position). */
static int nullable_rules(const gm_core *c, uint8_t *nul)
{
    const sift__gbnf *g = &c->g;
    memset(nul, 0, g->n_rules);
    for (int pass = 0; pass < 256; pass++) {
        int changed = 0;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (nul[r])
                continue;
            for (uint32_t a = c->alt_off[r]; a < c->alt_off[r + 1] && !nul[r]; a++) {
                uint32_t p = c->alt[a];
                for (; !sift__gm_is_end(g->el[p].type); p++) {
                    uint32_t t = g->el[p].type;
                    if (!sift__gm_is_tok(t) && !(t == SIFT__G_REF && nul[g->el[p].v]))
                        break;
                }
                if (sift__gm_is_end(g->el[p].type)) {
                    nul[r] = 1;
                    changed = 1;
                }
            }
        }
        if (!changed)
            return 1;
    }
    return 0;
}

/* minb: per rule, a lower bound on the bytes of any match, computed on
 * demand (MINB_NONE: not yet, MINB_OPEN: being computed). */
#define MINB_NONE UINT32_MAX
#define MINB_OPEN (UINT32_MAX - 1)

static uint32_t rule_min(const gm_core *c, uint32_t *minb, uint32_t r, int depth);

/* A lower bound on the bytes element e takes: a character, a class or
 * any code point 1, a token element 0, a reference its rule's. */
static uint32_t elem_min(const gm_core *c, uint32_t *minb, const sift__gelem *e, int depth)
{
    switch (e->type) {
    case SIFT__G_CHAR:
    case SIFT__G_CLASS:
    case SIFT__G_ANY: return 1;
    case SIFT__G_REF: return rule_min(c, minb, e->v, depth + 1);
    default: return 0;
    }
}

/* The bound of rule r: the least over its alternatives of the sum of
 * their elements' bounds (saturating at UINT16_MAX), depth first with
 * each rule's bound kept. A reference back to a rule being computed, or
 * one 32 levels deep, counts 0: every match is finite, so a bound that
 * takes a part of one as empty is still a lower bound, and so is every
 * bound computed from such bounds. Each rule's elements are read once. */
static uint32_t rule_min(const gm_core *c, uint32_t *minb, uint32_t r, int depth)
{
    if (minb[r] < MINB_OPEN)
        return minb[r];
    if (minb[r] == MINB_OPEN || depth >= 32)
        return 0;
    minb[r] = MINB_OPEN;
    const sift__gbnf *g = &c->g;
    uint32_t best = UINT16_MAX;
    for (uint32_t a = c->alt_off[r]; a < c->alt_off[r + 1]; a++) {
        uint32_t sum = 0;
        for (uint32_t p = c->alt[a]; !sift__gm_is_end(g->el[p].type) && sum < best; p++)
            sum += elem_min(c, minb, &g->el[p], depth);
        if (sum < best)
            best = sum;
    }
    minb[r] = best;
    return best;
}

/* The length of rule r's first alternative if r is `X | ` (two
 * alternatives, the second empty), else UINT32_MAX. */
static uint32_t opt_len(const gm_core *c, uint32_t r)
{
    if (c->alt_off[r + 1] - c->alt_off[r] != 2)
        return UINT32_MAX;
    uint32_t a0 = c->alt[c->alt_off[r]], a1 = c->alt[c->alt_off[r] + 1];
    if (c->g.el[a1].type != SIFT__G_END || a1 < a0 + 2)
        return UINT32_MAX;
    return a1 - 1 - a0;
}

static int same_elems(const sift__gelem *a, const sift__gelem *b, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (a[k].type != b[k].type || a[k].v != b[k].v)
            return 0;
    return 1;
}

/* rep[r]: for every helper with cnt[r] >= t, the helper of its chain
 * with cnt t (nxt steps down a chain); path is scratch for nr ids. */
static void chain_reps(const uint32_t *nxt, const uint32_t *cnt, uint32_t nr, uint64_t t,
                       uint32_t *rep, uint32_t *path)
{
    for (uint32_t r = 0; r < nr; r++)
        rep[r] = UINT32_MAX;
    for (uint32_t r = 0; r < nr; r++) {
        if (cnt[r] < t || rep[r] != UINT32_MAX)
            continue;
        uint32_t d = 0, q = r;
        while (rep[q] == UINT32_MAX && cnt[q] > t) {
            path[d++] = q;
            q = nxt[q];
        }
        uint32_t v = rep[q] != UINT32_MAX ? rep[q] : q;
        rep[q] = v;
        while (d)
            rep[path[--d]] = v;
    }
}

/* nxt[r]: rule r's successor in a chain of helpers (S R' | where R' is
 * S R'' | ...), UINT32_MAX for none; st[r] = 4 when the successor is the
 * chain's last helper (S |). Whether any rule has a successor. */
static int chain_links(const gm_core *c, uint32_t *nxt, uint8_t *st)
{
    const sift__gbnf *g = &c->g;
    int any = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        nxt[r] = UINT32_MAX;
        uint32_t j = opt_len(c, r);
        if (j == UINT32_MAX || j < 2)
            continue;
        const sift__gelem *e = g->el + g->rule_start[r];
        if (e[j - 1].type != SIFT__G_REF || e[j - 1].v == r)
            continue;
        uint32_t r2 = e[j - 1].v, L = j - 1;
        uint32_t j2 = opt_len(c, r2);
        const sift__gelem *e2 = g->el + g->rule_start[r2];
        if (j2 == L + 1 && e2[L].type == SIFT__G_REF && same_elems(e, e2, L)) {
            nxt[r] = r2;
            any = 1;
        } else if (j2 == L && same_elems(e, e2, L)) {
            nxt[r] = r2;
            st[r] = 4;
            any = 1;
        }
    }
    return any;
}

/* cnt[r]: the helpers left in rule r's chain from r on (0 = not a helper
 * of a chain, or on a cycle), by walking each chain once with the open
 * part in path[]; st bits 1 = on the path, 2 = done. Whether any chain
 * has 3 helpers or more (only those can be capped). */
static int chain_counts(const uint32_t *nxt, uint32_t nr, uint32_t *cnt, uint8_t *st,
                        uint32_t *path)
{
    int big = 0;
    for (uint32_t r0 = 0; r0 < nr; r0++) {
        uint32_t d = 0, r = r0;
        while (!(st[r] & 3) && nxt[r] != UINT32_MAX && !(st[r] & 4)) {
            st[r] |= 1;
            path[d++] = r;
            r = nxt[r];
        }
        uint32_t v;
        if (st[r] & 1)
            v = 0;
        else if (st[r] & 2)
            v = cnt[r];
        else {
            v = nxt[r] != UINT32_MAX ? 2 : 0; /* (st[r] & 4): R S | */
            cnt[r] = v;
            st[r] |= 2;
        }
        while (d) {
            r = path[--d];
            v = v ? v + 1 : 0;
            cnt[r] = v;
            st[r] = (uint8_t)((st[r] & ~1) | 2);
        }
    }
    for (uint32_t r = 0; r < nr; r++)
        big |= cnt[r] >= 3;
    return big;
}

/* For each helper of a chain whose S needs a byte: its positions' pcnt,
 * and their images in the chain's representative helper at 2
 * (erase_pos) and at cap (canon_pos) left. With c copies left (the
 * helper's own among them) and b the least bytes of a copy (elem_min),
 * position o of S gets min(c b, (c - 1) b + rem(o) + 1), rem(o) what
 * S's elements from o on take at least: the bytes still needed, or one
 * more once o is past an element S needed (with b = 1, c everywhere, as
 * the copies were counted before). *moved and *erased say whether any
 * canon_pos or erase_pos differs from its own position. */
static void move_positions(gm_core *c, const uint32_t *cnt, const uint8_t *nul, uint32_t *minb,
                           uint64_t cap, const uint32_t *rep_cap, const uint32_t *rep_two,
                           int *moved, int *erased)
{
    const sift__gbnf *g = &c->g;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        if (cnt[r] < 2)
            continue;
        uint32_t L = opt_len(c, r) - 1;
        const sift__gelem *e = g->el + g->rule_start[r];
        int bytes = 0; /* S needs a byte */
        for (uint32_t k = 0; k < L && !bytes; k++)
            bytes = !sift__gm_is_tok(e[k].type) && !(e[k].type == SIFT__G_REF && nul[e[k].v]);
        if (!bytes)
            continue;
        uint64_t b = 0; /* the bytes a copy of S takes, at least */
        for (uint32_t k = 0; k < L; k++)
            b += elem_min(c, minb, &e[k], 0);
        b = b > 1 ? b : 1;
        uint64_t rem = b; /* what the copy's elements from o on take */
        for (uint32_t o = 0; o < L + 3; o++) {
            uint32_t p = g->rule_start[r] + o;
            uint64_t need = (uint64_t)(cnt[r] - 1) * b + rem + 1;
            if (need > (uint64_t)cnt[r] * b)
                need = (uint64_t)cnt[r] * b;
            uint32_t eo = o < L ? elem_min(c, minb, &e[o], 0) : 0;
            rem -= rem < eo ? rem : eo;
            c->pcnt[p] = (uint16_t)(need < UINT16_MAX ? need : UINT16_MAX - 1);
            if (cnt[r] > 2)
                c->erase_pos[p] = g->rule_start[rep_two[r]] + o;
            if (cnt[r] > cap)
                c->canon_pos[p] = g->rule_start[rep_cap[r]] + o;
        }
        *moved |= cnt[r] > cap;
        *erased |= cnt[r] > 2;
    }
}

/* Whether element e needs a byte of the output to match: a character,
 * a class, any code point, or a rule that is not nullable. */
static int needs_byte(const sift__gelem *e, const uint8_t *nul)
{
    switch (e->type) {
    case SIFT__G_CHAR:
    case SIFT__G_CLASS:
    case SIFT__G_ANY: return 1;
    case SIFT__G_REF: return !nul[e->v];
    default: return 0;
    }
}

/* The inline copies of a repetition (S{m,n} writes m copies of S in
 * place): a run [a, b) of equal elements inside one alternative, each
 * needing a byte, outside the helpers move_positions handled. Position
 * q of a run has r = b - q copies still to match, all of them before
 * anything after the run can; that is the helpers' argument with a
 * mandatory count in place of an optional one (sift__gm_canon): two
 * stacks with r, r' >= M copies left read the same strings of at most
 * M - 2 bytes, pairing one to one, for neither reaches the run's end
 * within them; in bytes, when a copy takes at least w of them, r w >= M
 * is enough. So q gets pcnt r w (the bytes the copies left need: copy q
 * has not started), erase_pos b - 2 when r > 2 and
 * canon_pos b - cap when r > cap. */
static void move_runs(gm_core *c, const uint8_t *nul, uint32_t *minb, uint64_t cap, int *moved,
                      int *erased)
{
    const sift__gbnf *g = &c->g;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        for (uint32_t a = c->alt_off[r]; a < c->alt_off[r + 1]; a++) {
            uint32_t p = c->alt[a];
            while (!sift__gm_is_end(g->el[p].type)) {
                uint32_t q = p + 1;
                int ok = needs_byte(&g->el[p], nul) && c->pcnt[p] == UINT16_MAX;
                while (!sift__gm_is_end(g->el[q].type) && g->el[q].type == g->el[p].type &&
                       g->el[q].v == g->el[p].v) {
                    ok &= c->pcnt[q] == UINT16_MAX;
                    q++;
                }
                if (ok && q - p > 2) {
                    uint64_t b = elem_min(c, minb, &g->el[p], 0);
                    for (uint32_t j = p; j < q; j++) {
                        uint32_t left = q - j;
                        uint64_t need = (uint64_t)left * (b > 1 ? b : 1); /* bytes, at least */
                        c->pcnt[j] = (uint16_t)(need < UINT16_MAX ? need : UINT16_MAX - 1);
                        if (left > 2) {
                            c->erase_pos[j] = q - 2;
                            *erased = 1;
                        }
                        if (left > cap) {
                            c->canon_pos[j] = (uint32_t)(q - cap);
                            *moved = 1;
                        }
                    }
                }
                p = q;
            }
        }
    }
}

/* Whether some alternative holds three equal elements in a row (the
 * only runs move_runs moves). */
static int any_run(const gm_core *c)
{
    const sift__gbnf *g = &c->g;
    for (uint32_t r = 0; r < g->n_rules; r++)
        for (uint32_t a = c->alt_off[r]; a < c->alt_off[r + 1]; a++)
            for (uint32_t p = c->alt[a]; !sift__gm_is_end(g->el[p].type); p++)
                if (!sift__gm_is_end(g->el[p + 1].type) && !sift__gm_is_end(g->el[p + 2].type) &&
                    g->el[p + 1].type == g->el[p].type && g->el[p + 1].v == g->el[p].v &&
                    g->el[p + 2].type == g->el[p].type && g->el[p + 2].v == g->el[p].v)
                    return 1;
    return 0;
}

/* gm_core.canon_pos: finds the helper chains a bounded repetition S{m,n}
 * is rewritten to (R_k ::= S R_(k-1) | and R_1 ::= S |, S the same
 * elements in every helper, S never matching without a byte), counts the
 * copies cnt(R) each helper can still match, and moves every position of
 * a helper with cnt >= cap = longest piece + 2 to the same offset in its
 * chain's helper with cnt = cap (sift__gm_canon says why that keeps the
 * allowed set); the inline copies the same way (move_runs). Leaves
 * canon_pos NULL when nothing moves, erase_pos and pcnt NULL when nothing
 * is erased. */
static sift_status build_canon(gm_core *c, const sift__alloc *al)
{
    const sift__gbnf *g = &c->g;
    uint32_t nr = g->n_rules;
    uint64_t cap = (uint64_t)c->tmaxd + 2;
    if (!c->V || nr == 0)
        return SIFT_OK;
    uint32_t *nxt = sift__malloc(al, nr, sizeof *nxt);
    uint32_t *cnt = sift__calloc(al, nr, sizeof *cnt);
    uint32_t *path = sift__malloc(al, nr, sizeof *path);
    uint8_t *st = sift__calloc(al, nr, 1);
    uint32_t *rep_cap = NULL, *rep_two = NULL, *minb = NULL;
    sift_status s = SIFT_E_NOMEM;
    if (!nxt || !cnt || !path || !st)
        goto out;
    s = SIFT_OK;
    int chains = chain_links(c, nxt, st) && chain_counts(nxt, nr, cnt, st, path);
    if (!chains && !any_run(c))
        goto out;      /* nothing to move */
    uint8_t *nul = st; /* reused: only nullability from here */
    if (!nullable_rules(c, nul))
        goto out;
    s = SIFT_E_NOMEM;
    minb = sift__malloc(al, nr, sizeof *minb);
    if (!minb)
        goto out;
    memset(minb, 0xff, nr * sizeof *minb); /* MINB_NONE */
    c->canon_pos = sift__malloc(al, g->n_el, sizeof *c->canon_pos);
    c->erase_pos = sift__malloc(al, g->n_el, sizeof *c->erase_pos);
    c->pcnt = sift__malloc(al, g->n_el, sizeof *c->pcnt);
    rep_cap = sift__malloc(al, nr, sizeof *rep_cap);
    rep_two = sift__malloc(al, nr, sizeof *rep_two);
    if (!c->canon_pos || !c->erase_pos || !c->pcnt || !rep_cap || !rep_two)
        goto out;
    s = SIFT_OK;
    for (size_t p = 0; p < g->n_el; p++) {
        c->canon_pos[p] = c->erase_pos[p] = (uint32_t)p;
        c->pcnt[p] = UINT16_MAX;
    }
    int moved = 0, erased = 0;
    if (chains) {
        chain_reps(nxt, cnt, nr, cap, rep_cap, path);
        chain_reps(nxt, cnt, nr, 2, rep_two, path);
        move_positions(c, cnt, nul, minb, cap, rep_cap, rep_two, &moved, &erased);
    }
    move_runs(c, nul, minb, cap, &moved, &erased);
    if (!moved) {
        sift__free(al, c->canon_pos);
        c->canon_pos = NULL;
    }
    if (!erased) {
        sift__free(al, c->erase_pos);
        sift__free(al, c->pcnt);
        c->erase_pos = NULL;
        c->pcnt = NULL;
    }
out:
    if (s) {
        sift__free(al, c->canon_pos);
        sift__free(al, c->erase_pos);
        sift__free(al, c->pcnt);
        c->canon_pos = c->erase_pos = NULL;
        c->pcnt = NULL;
    }
    sift__free(al, rep_cap);
    sift__free(al, rep_two);
    sift__free(al, minb);
    sift__free(al, nxt);
    sift__free(al, cnt);
    sift__free(al, path);
    sift__free(al, st);
    return s;
}

sift_status sift__gm_core_new(gm_core **out, const char *text, size_t len, const sift_vocab *vocab,
                              const sift_grammar_params *pp, const sift__alloc *al,
                              int *needs_vocab, sift_error *err)
{
    gm_core *c = sift__calloc(al, 1, sizeof *c);
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
        n_alt += sift__gm_is_end(g->el[i].type);
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
        if ((s = sift__gm_vindex(&c->vx, vocab, err))) {
            sift__gm_core_unref(c);
            return s;
        }
        const gm_vindex *x = c->vx;
        c->V = x->V;
        c->poff = x->poff;
        c->pbytes = x->pbytes;
        c->attr = x->attr;
        c->eog = x->eog;
        c->n_eog = x->n_eog;
        c->tn = x->tn;
        c->tr = x->tr;
        c->stok = x->stok;
        c->n_slots = x->n_slots;
        c->other = x->other;
        c->n_other = x->n_other;
        c->tmaxd = x->tmaxd;
        c->below = x->below;
        c->height = x->height;
        if ((s = build_canon(c, al))) {
            sift__gm_core_unref(c);
            return sift__fail(err, s, "out of memory while building a grammar");
        }
    }
    *out = c;
    return SIFT_OK;
nomem:
    sift__gm_core_unref(c);
    return sift__fail(err, SIFT_E_NOMEM, "out of memory while building a grammar");
}

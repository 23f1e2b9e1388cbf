/*
 * json_schema_dfa.c - the subset construction for json_schema_strlen.c:
 * an automaton whose transitions read sets of code points (set nodes of
 * the pattern's parse, json_regex.h) made deterministic. The code points
 * are cut into the intervals no set boundary splits; a subset's moves
 * are computed per interval, and the intervals that lead to the same
 * subset become one transition reading their union (a new set node).
 * Bounded: more subsets, intervals or steps than the limits below give
 * SIFT_E_SCHEMA_LIMIT, and the caller keeps the automaton as it is; and
 * every elementary step (a range tested, a transition read for an
 * interval, a word of a subset compared) is charged to the conversion's
 * work, a unit per DFA_STEPS_PER_UNIT, so that max_work bounds the time
 * too (past it, the error is recorded in the conversion).
 */
#include <stdlib.h>

#include "json_regex.h"
#include "json_schema_strlen.h"

#define DFA_MAX_STATES 512
#define DFA_MAX_INTERVALS 1024
#define DFA_MAX_STEPS 8000000
#define DFA_STEPS_PER_UNIT 64

typedef struct dfa_b {
    const sift__alloc *al;
    sift__js *c;           /* charged for the work */
    int64_t work, charged; /* elementary steps; units charged for them */
    rx *r;
    size_t n_st, w;        /* NFA states, 64-bit words per subset */
    uint64_t *sub;         /* subsets, w words each */
    size_t n_sub, cap_sub; /* in subsets; cap in words */
    uint32_t *cut;         /* interval starts */
    size_t n_cut, cap_cut;
    uint32_t *e_to, *e_lab; /* the new transitions */
    size_t n_e, cap_to, cap_lab;
    uint32_t *off; /* per subset: its first transition */
    size_t cap_off;
    int64_t steps;
    uint32_t *labs; /* the set nodes made so far */
    size_t n_lab, cap_labs;
} dfa_b;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_pair(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

static sift_status add_cut(dfa_b *d, uint32_t c)
{
    if (sift__reserve(d->al, &d->cut, &d->cap_cut, d->n_cut, d->n_cut + 1, sizeof *d->cut, 64))
        return SIFT_E_NOMEM;
    d->cut[d->n_cut++] = c;
    return SIFT_OK;
}

/* The intervals: every boundary of every label's ranges. */
static sift_status cut_intervals(dfa_b *d, const uint32_t *lab, size_t n_e)
{
    sift_status st = add_cut(d, 0);
    for (size_t e = 0; !st && e < n_e; e++) {
        const rx_node *nd = &d->r->nodes[lab[e]];
        for (uint32_t k = 0; !st && k < nd->n; k++) {
            uint32_t lo = d->r->rng[2 * (nd->first + k)], hi = d->r->rng[2 * (nd->first + k) + 1];
            st = add_cut(d, lo);
            if (!st && hi < RX_MAX_CP)
                st = add_cut(d, hi + 1);
        }
        if (d->n_cut > 4 * DFA_MAX_INTERVALS) {
            /* repeats are many before they are dropped: drop them now */
            qsort(d->cut, d->n_cut, sizeof *d->cut, cmp_u32);
            size_t w = 0;
            for (size_t i = 0; i < d->n_cut; i++)
                if (w == 0 || d->cut[i] != d->cut[w - 1])
                    d->cut[w++] = d->cut[i];
            d->n_cut = w;
            if (w > DFA_MAX_INTERVALS)
                return SIFT_E_SCHEMA_LIMIT;
        }
    }
    if (st)
        return st;
    qsort(d->cut, d->n_cut, sizeof *d->cut, cmp_u32);
    size_t w = 0;
    for (size_t i = 0; i < d->n_cut; i++)
        if (w == 0 || d->cut[i] != d->cut[w - 1])
            d->cut[w++] = d->cut[i];
    d->n_cut = w;
    return w > DFA_MAX_INTERVALS ? SIFT_E_SCHEMA_LIMIT : SIFT_OK;
}

/* Charges the steps counted in d->work since the last charge (whole
 * units; all of them, rounded up, at the end of the construction). */
static sift_status charge(dfa_b *d, int end)
{
    int64_t units =
        (d->work + (end ? DFA_STEPS_PER_UNIT - 1 : 0)) / DFA_STEPS_PER_UNIT - d->charged;
    if (units <= 0)
        return SIFT_OK;
    d->charged += units;
    return sift__js_work(d->c, units);
}

static int node_has(const rx *r, uint32_t id, uint32_t c)
{
    const rx_node *nd = &r->nodes[id];
    for (uint32_t k = 0; k < nd->n; k++)
        if (c >= r->rng[2 * (nd->first + k)] && c <= r->rng[2 * (nd->first + k) + 1])
            return 1;
    return 0;
}

/* The index of subset t (w words), added when new; SIZE_MAX past the
 * bound or out of memory (*st). */
static size_t subset_id(dfa_b *d, const uint64_t *t, sift_status *st)
{
    d->work += (int64_t)(d->n_sub * d->w);
    for (size_t i = 0; i < d->n_sub; i++)
        if (!memcmp(d->sub + i * d->w, t, d->w * sizeof *t))
            return i;
    if (d->n_sub >= DFA_MAX_STATES) {
        *st = SIFT_E_SCHEMA_LIMIT;
        return SIZE_MAX;
    }
    if (sift__reserve(d->al, &d->sub, &d->cap_sub, d->n_sub * d->w, (d->n_sub + 1) * d->w,
                      sizeof *d->sub, 64)) {
        *st = SIFT_E_NOMEM;
        return SIZE_MAX;
    }
    memcpy(d->sub + d->n_sub * d->w, t, d->w * sizeof *t);
    return d->n_sub++;
}

/* A new set node: the union of the intervals pairs[k][1] for k in
 * [from, to) (ascending), merged. */
static uint32_t label_node(dfa_b *d, const uint32_t *pairs, size_t from, size_t to)
{
    rx *r = d->r;
    size_t start = r->n_rng;
    for (size_t k = from; k < to; k++) {
        size_t i = pairs[2 * k + 1];
        uint32_t lo = d->cut[i], hi = i + 1 < d->n_cut ? d->cut[i + 1] - 1 : RX_MAX_CP;
        if (r->n_rng > start && r->rng[r->n_rng - 1] + 1 == lo)
            r->rng[r->n_rng - 1] = hi;
        else if (!sift__json_regex_add_range(r, lo, hi))
            return UINT32_MAX;
    }
    size_t n = r->n_rng - start;
    for (size_t k = 0; k < d->n_lab; k++) {
        const rx_node *nd = &r->nodes[d->labs[k]];
        if (2 * (size_t)nd->n == n && !memcmp(r->rng + 2 * nd->first, r->rng + start, n * 4)) {
            r->n_rng = start; /* the same set as an earlier transition's */
            return d->labs[k];
        }
    }
    if (sift__reserve(d->al, &d->labs, &d->cap_labs, d->n_lab, d->n_lab + 1, sizeof *d->labs, 64))
        return UINT32_MAX;
    uint32_t id = sift__json_regex_new_node(r, N_SET, 0);
    if (id != UINT32_MAX) {
        d->labs[d->n_lab++] = id;
        r->nodes[id].first = (uint32_t)(start / 2);
        r->nodes[id].n = (uint32_t)((r->n_rng - start) / 2);
    }
    return id;
}

static sift_status add_edge(dfa_b *d, uint32_t to, uint32_t lab)
{
    if (sift__reserve(d->al, &d->e_to, &d->cap_to, d->n_e, d->n_e + 1, sizeof *d->e_to, 64) ||
        sift__reserve(d->al, &d->e_lab, &d->cap_lab, d->n_e, d->n_e + 1, sizeof *d->e_lab, 64))
        return SIFT_E_NOMEM;
    d->e_to[d->n_e] = to;
    d->e_lab[d->n_e++] = lab;
    return SIFT_OK;
}

/* The moves of subset `s`: per interval the subset reached (in[q * n_cut
 * + i]: label of transition q reads interval i), grouped by target. */
static sift_status moves(dfa_b *d, size_t s, const uint32_t *off, const uint32_t *to,
                         const unsigned char *in, uint64_t *t, uint32_t *pairs)
{
    size_t w = d->w, n_cut = d->n_cut, n_pairs = 0;
    memset(t, 0, n_cut * w * sizeof *t);
    for (size_t q = 0; q < d->n_st; q++) {
        if (!(d->sub[s * w + q / 64] >> (q % 64) & 1))
            continue;
        d->steps += (int64_t)(off[q + 1] - off[q]) * (int64_t)n_cut;
        d->work += (int64_t)(off[q + 1] - off[q]) * (int64_t)n_cut;
        if (d->steps > DFA_MAX_STEPS)
            return SIFT_E_SCHEMA_LIMIT;
        sift_status cs = charge(d, 0);
        if (cs)
            return cs;
        for (uint32_t e = off[q]; e < off[q + 1]; e++)
            for (size_t i = 0; i < n_cut; i++)
                if (in[(size_t)e * n_cut + i])
                    t[i * w + to[e] / 64] |= (uint64_t)1 << (to[e] % 64);
    }
    sift_status st = SIFT_OK;
    for (size_t i = 0; i < n_cut; i++) {
        int any = 0;
        for (size_t k = 0; k < w && !any; k++)
            any = t[i * w + k] != 0;
        if (!any)
            continue;
        size_t id = subset_id(d, t + i * w, &st);
        if (id == SIZE_MAX)
            return st;
        if ((st = charge(d, 0)))
            return st;
        pairs[2 * n_pairs] = (uint32_t)id;
        pairs[2 * n_pairs++ + 1] = (uint32_t)i;
    }
    qsort(pairs, n_pairs, 2 * sizeof *pairs, cmp_pair);
    for (size_t a = 0, b; !st && a < n_pairs; a = b) {
        for (b = a; b < n_pairs && pairs[2 * b] == pairs[2 * a]; b++)
            ;
        uint32_t lab = label_node(d, pairs, a, b);
        st = lab == UINT32_MAX ? (d->r->st ? d->r->st : SIFT_E_NOMEM)
                               : add_edge(d, pairs[2 * a], lab);
    }
    return st;
}

static sift_status build_dfa(dfa_b *d, size_t start, const uint32_t *off, const uint32_t *to,
                             const uint32_t *lab)
{
    size_t n_e = off[d->n_st], n_cut;
    sift_status st = cut_intervals(d, lab, n_e);
    if (st)
        return st;
    n_cut = d->n_cut;
    if ((uint64_t)n_e * n_cut > DFA_MAX_STEPS)
        return SIFT_E_SCHEMA_LIMIT;
    unsigned char *in = sift__calloc(d->al, n_e * n_cut + 1, 1);
    uint64_t *t = sift__calloc(d->al, n_cut * d->w, sizeof *t);
    uint32_t *pairs = sift__calloc(d->al, 2 * n_cut, sizeof *pairs);
    uint64_t *first = sift__calloc(d->al, d->w, sizeof *first);
    if (!in || !t || !pairs || !first) {
        st = SIFT_E_NOMEM;
        goto out;
    }
    for (size_t e = 0; !st && e < n_e; e++) {
        d->work += (int64_t)n_cut * (1 + (int64_t)d->r->nodes[lab[e]].n);
        for (size_t i = 0; i < n_cut; i++)
            in[e * n_cut + i] = (unsigned char)node_has(d->r, lab[e], d->cut[i]);
        st = charge(d, 0);
    }
    if (st)
        goto out;
    first[start / 64] |= (uint64_t)1 << (start % 64);
    subset_id(d, first, &st);
    for (size_t s = 0; !st && s < d->n_sub; s++) {
        if (sift__reserve(d->al, &d->off, &d->cap_off, s, s + 2, sizeof *d->off, 64)) {
            st = SIFT_E_NOMEM;
            break;
        }
        d->off[s] = (uint32_t)d->n_e;
        st = moves(d, s, off, to, in, t, pairs);
        d->off[s + 1] = (uint32_t)d->n_e;
    }
out:
    sift__free(d->al, in);
    sift__free(d->al, t);
    sift__free(d->al, pairs);
    sift__free(d->al, first);
    if (st == SIFT_OK || (st == SIFT_E_SCHEMA_LIMIT && d->c->work <= d->c->max_work)) {
        /* the rest, whether the construction finished or gave up */
        sift_status cs = charge(d, 1);
        st = cs ? cs : st;
    }
    return st;
}

sift_status sift__js_dfa(sift__js *c, rx *r, size_t n_st, size_t start, const uint32_t *off,
                         const uint32_t *to, const uint32_t *lab, const unsigned char *fin,
                         size_t *d_n, uint32_t **d_off, uint32_t **d_to, uint32_t **d_lab,
                         unsigned char **d_fin)
{
    dfa_b d;
    memset(&d, 0, sizeof d);
    d.al = r->al;
    d.c = c;
    d.r = r;
    d.n_st = n_st;
    d.w = (n_st + 63) / 64;
    sift_status st = build_dfa(&d, start, off, to, lab);
    unsigned char *f = NULL;
    if (!st && !(f = sift__calloc(d.al, d.n_sub, 1)))
        st = SIFT_E_NOMEM;
    for (size_t s = 0; !st && s < d.n_sub; s++)
        for (size_t q = 0; q < n_st && !f[s]; q++)
            f[s] = fin[q] && (d.sub[s * d.w + q / 64] >> (q % 64) & 1);
    sift__free(d.al, d.sub);
    sift__free(d.al, d.cut);
    sift__free(d.al, d.labs);
    if (st) {
        sift__free(d.al, f);
        sift__free(d.al, d.e_to);
        sift__free(d.al, d.e_lab);
        sift__free(d.al, d.off);
        return st;
    }
    *d_n = d.n_sub;
    *d_off = d.off;
    *d_to = d.e_to;
    *d_lab = d.e_lab;
    *d_fin = f;
    return SIFT_OK;
}

/*
 * json_schema_strlen.c - a "pattern" beside minLength / maxLength, in
 * general: the pattern's position automaton (Glushkov: one state per
 * occurrence of a set of code points, bounded repetitions unrolled,
 * each unanchored side "any character" repeated) times a counter of
 * the code points read, 0..maxLength (without maxLength, 0..minLength
 * where minLength means "minLength or more"). A rule per pair (state,
 * count) that some string reaches and from which some string of an
 * allowed length can still end; each of its alternatives reads one
 * code point (the JSON encodings of a set, as json_regex_emit.c writes
 * them) and moves to the next pair. Exact: the rules match the JSON
 * content of the strings the pattern matches whose length, in code
 * points, lies in [minLength, maxLength]. Bounded: more than
 * JS_LEN_MAX_POS states, JS_LEN_MAX_EDGES transitions, JS_LEN_MAX_PIECES
 * pieces unrolled, JS_LEN_MAX_PAIRS pairs or JS_LEN_MAX_RULES rules is
 * refused (SIFT_E_SCHEMA_UNSUPPORTED, message for the caller).
 */
#include <stdio.h>
#include <stdlib.h>

#include "json_regex.h"
#include "json_schema.h"
#include "json_schema_strlen.h"

#define JS_LEN_MAX_POS 1024
#define JS_LEN_MAX_EDGES 32768
#define JS_LEN_MAX_RULES 4096
/* pieces built while unrolling repetitions: a repeated piece that adds
 * no position (an empty group, x{0}) must still cost something */
#define JS_LEN_MAX_PIECES 65536
/* pairs (state, count) looked at before pruning */
#define JS_LEN_MAX_PAIRS 400000
/* a set written longer than this becomes a rule of its own */
#define JS_LEN_INLINE 40
#define STR_(x) #x
#define STR(x) STR_(x)

typedef struct u32v {
    uint32_t *p;
    size_t n, cap;
} u32v;

/* A piece of the automaton: its first and last positions, and whether
 * it matches the empty string. */
typedef struct frag {
    u32v first, last;
    int nullable;
} frag;

typedef struct glu {
    sift__js *c;
    rx *r;
    u32v pos_set; /* the set node of each position; UINT32_MAX: any character */
    u32v edges;   /* (from, to) pairs */
    sift_status st;
    const char *why; /* what was too large, for the message */
    uint32_t any_node;
    uint32_t pieces; /* build() calls so far */
} glu;

static int vpush(glu *g, u32v *v, uint32_t x)
{
    if (g->st)
        return 0;
    if (sift__reserve(g->c->al, &v->p, &v->cap, v->n, v->n + 1, sizeof *v->p, 8)) {
        g->st = SIFT_E_NOMEM;
        return 0;
    }
    v->p[v->n++] = x;
    return 1;
}

static int vappend(glu *g, u32v *v, const u32v *w)
{
    for (size_t k = 0; k < w->n; k++)
        if (!vpush(g, v, w->p[k]))
            return 0;
    return 1;
}

static void frag_free(glu *g, frag *f)
{
    sift__free(g->c->al, f->first.p);
    sift__free(g->c->al, f->last.p);
    memset(f, 0, sizeof *f);
}

static void too_large(glu *g, const char *why)
{
    if (!g->st) {
        g->st = SIFT_E_SCHEMA_UNSUPPORTED;
        g->why = why;
    }
}

/* A new position reading set node `set`: the piece of that one set. */
static int position(glu *g, uint32_t set, frag *f)
{
    memset(f, 0, sizeof *f);
    if (g->pos_set.n >= JS_LEN_MAX_POS) {
        too_large(g, "more than " STR(JS_LEN_MAX_POS) " automaton states");
        return 0;
    }
    uint32_t p = (uint32_t)g->pos_set.n;
    return vpush(g, &g->pos_set, set) && vpush(g, &f->first, p) && vpush(g, &f->last, p);
}

/* Transitions from every last position of a to every first one of b. */
static int link_pieces(glu *g, const u32v *from, const u32v *to)
{
    if (g->edges.n / 2 + (uint64_t)from->n * to->n > JS_LEN_MAX_EDGES) {
        too_large(g, "more than " STR(JS_LEN_MAX_EDGES) " transitions");
        return 0;
    }
    for (size_t i = 0; i < from->n; i++)
        for (size_t j = 0; j < to->n; j++)
            if (!vpush(g, &g->edges, from->p[i]) || !vpush(g, &g->edges, to->p[j]))
                return 0;
    return 1;
}

/* a becomes a then b; b is freed. */
static int concat(glu *g, frag *a, frag *b)
{
    int ok = link_pieces(g, &a->last, &b->first);
    if (ok && a->nullable)
        ok = vappend(g, &a->first, &b->first);
    if (ok && b->nullable)
        ok = vappend(g, &b->last, &a->last);
    if (ok) {
        sift__free(g->c->al, a->last.p);
        a->last = b->last;
        b->last.p = NULL;
        a->nullable = a->nullable && b->nullable;
    }
    frag_free(g, b);
    return ok;
}

/* a becomes a or b; b is freed. */
static int either(glu *g, frag *a, frag *b)
{
    int ok = vappend(g, &a->first, &b->first) && vappend(g, &a->last, &b->last);
    a->nullable |= b->nullable;
    frag_free(g, b);
    return ok;
}

static int build(glu *g, uint32_t id, frag *f, unsigned depth);

/* x{m,n}: m copies, then n - m nested optional ones (x (x ...)?)?, or
 * for an unbounded n the last copy repeated. */
static int build_rep(glu *g, const rx_node *nd, frag *f, unsigned depth)
{
    uint32_t child = nd->first, m = nd->min, x = nd->max;
    int unbounded = x == UINT32_MAX;
    frag k;
    memset(f, 0, sizeof *f);
    f->nullable = 1;
    if (x == 0)
        return 1;
    uint32_t plain = unbounded && m > 0 ? m - 1 : m;
    for (uint32_t i = 0; i < plain; i++)
        if (!build(g, child, &k, depth + 1) || !concat(g, f, &k))
            return 0;
    if (unbounded) {
        if (!build(g, child, &k, depth + 1) || !link_pieces(g, &k.last, &k.first)) {
            frag_free(g, &k);
            return 0;
        }
        k.nullable |= m == 0;
        return concat(g, f, &k);
    }
    frag opt;
    memset(&opt, 0, sizeof opt);
    opt.nullable = 1;
    for (uint32_t i = m; i < x; i++) {
        if (!build(g, child, &k, depth + 1) || !concat(g, &k, &opt)) {
            frag_free(g, &opt);
            frag_free(g, &k);
            return 0;
        }
        opt = k;
        opt.nullable = 1;
    }
    return concat(g, f, &opt);
}

static int build_node(glu *g, uint32_t id, frag *f, unsigned depth)
{
    const rx_node *nd = &g->r->nodes[id];
    memset(f, 0, sizeof *f);
    if (g->st)
        return 0;
    if (depth > 4 * RX_MAX_DEPTH) {
        too_large(g, "groups nested too deep");
        return 0;
    }
    if (++g->pieces > JS_LEN_MAX_PIECES) {
        too_large(g, "repetitions unroll into more than " STR(JS_LEN_MAX_PIECES) " pieces");
        return 0;
    }
    switch (nd->kind) {
    case N_SET: return position(g, id, f);
    case N_CAT:
    case N_ALT:
        f->nullable = nd->kind == N_CAT;
        for (uint32_t k = 0; k < nd->n; k++) {
            frag a;
            uint32_t kid = g->r->kids[nd->first + k];
            if (!build(g, kid, &a, depth + 1) ||
                !(nd->kind == N_CAT ? concat(g, f, &a) : either(g, f, &a)))
                return 0;
        }
        return 1;
    case N_REP: return build_rep(g, nd, f, depth);
    default:
        /* an anchor inside: not this construction's */
        too_large(g, "an anchor inside the pattern");
        return 0;
    }
}

/* The piece of node id in f. On failure f is left empty: the partial
 * piece built so far is freed here, so no caller frees it. */
static int build(glu *g, uint32_t id, frag *f, unsigned depth)
{
    if (build_node(g, id, f, depth))
        return 1;
    frag_free(g, f);
    return 0;
}

/* "Any character", repeated: an unanchored side. */
static int any_star(glu *g, frag *f)
{
    if (!position(g, UINT32_MAX, f) || !link_pieces(g, &f->last, &f->first)) {
        frag_free(g, f);
        return 0;
    }
    f->nullable = 1;
    return 1;
}

/* One top-level alternative (as json_regex_emit.c opens them: anchors at
 * its ends, a lone group inside opened), added to acc. */
static int branch(glu *g, uint32_t id, int bol, int eol, frag *acc, unsigned depth)
{
    const rx *r = g->r;
    const uint32_t *ids;
    size_t n;
    uint32_t grp = sift__json_regex_branch_items(r, &id, &bol, &eol, &ids, &n, depth);
    if (grp != UINT32_MAX) {
        const rx_node *gr = &r->nodes[grp];
        if (gr->kind == N_CAT)
            return branch(g, grp, bol, eol, acc, depth + 1);
        for (uint32_t k = 0; k < gr->n; k++)
            if (!branch(g, r->kids[gr->first + k], bol, eol, acc, depth + 1))
                return 0;
        return 1;
    }
    frag f, a;
    memset(&f, 0, sizeof f);
    f.nullable = 1;
    if (!bol && (!any_star(g, &a) || !concat(g, &f, &a)))
        goto fail;
    for (size_t k = 0; k < n; k++)
        if (!build(g, ids[k], &a, depth + 1) || !concat(g, &f, &a))
            goto fail;
    if (!eol && (!any_star(g, &a) || !concat(g, &f, &a)))
        goto fail;
    return either(g, acc, &f);
fail:
    frag_free(g, &f);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The product with the length counter                                 */
/* ------------------------------------------------------------------ */

typedef struct prod {
    size_t n_st;    /* states (NFA: the positions, then the start) */
    size_t start;   /* the state before the first code point */
    uint64_t k_top; /* counts 0..k_top */
    int sat;        /* k_top means "k_top or more" */
    uint64_t lo;    /* the fewest code points */
    uint32_t *off;  /* transitions of state s: to[off[s] .. off[s + 1]) */
    uint32_t *to;
    uint32_t *lab;      /* the set node each transition reads */
    unsigned char *fin; /* state may end the string */
    unsigned char *ok;  /* per pair: 1 reached, 2 reached and live */
} prod;

static size_t pair(const prod *p, size_t s, uint64_t k)
{
    return s * (size_t)(p->k_top + 1) + (size_t)k;
}

static uint64_t next_k(const prod *p, uint64_t k)
{
    return k < p->k_top ? k + 1 : p->sat ? k : UINT64_MAX;
}

/* Marks the pairs reached from (start, 0), then those live among them
 * (some allowed end reachable). Counts grow by one a step, except at a
 * saturated top, where the level is repeated to a fixpoint. */
static void mark_pairs(prod *p)
{
    p->ok[pair(p, p->start, 0)] = 1;
    for (uint64_t k = 0; k <= p->k_top; k++) {
        uint64_t nk = next_k(p, k);
        for (int changed = 1; changed && nk != UINT64_MAX;) {
            changed = 0;
            for (size_t s = 0; s < p->n_st; s++) {
                if (!p->ok[pair(p, s, k)])
                    continue;
                for (uint32_t e = p->off[s]; e < p->off[s + 1]; e++)
                    if (!p->ok[pair(p, p->to[e], nk)])
                        p->ok[pair(p, p->to[e], nk)] = 1, changed = nk == k;
            }
        }
    }
    for (uint64_t k = p->k_top + 1; k-- > 0;) {
        uint64_t nk = next_k(p, k);
        for (int changed = 1; changed;) {
            changed = 0;
            for (size_t s = 0; s < p->n_st; s++) {
                size_t i = pair(p, s, k);
                if (p->ok[i] != 1)
                    continue;
                int live = p->fin[s] && k >= p->lo;
                for (uint32_t e = p->off[s]; !live && nk != UINT64_MAX && e < p->off[s + 1]; e++)
                    live = p->ok[pair(p, p->to[e], nk)] == 2;
                if (live)
                    p->ok[i] = 2, changed = nk == k;
            }
        }
    }
}

/* The GBNF item of each set node a transition reads (a rule's name when
 * long), by node: text[node]. */
static sift_status set_texts(glu *g, const prod *p, char ***text)
{
    sift__js *c = g->c;
    rx *r = g->r;
    size_t n_nodes = r->n_nodes;
    *text = sift__calloc(c->al, n_nodes ? n_nodes : 1, sizeof **text);
    if (!*text)
        return SIFT_E_NOMEM;
    for (uint32_t e = 0; e < p->off[p->n_st]; e++) {
        uint32_t set = p->lab[e];
        if ((*text)[set])
            continue;
        r->n_out = 0;
        if (!sift__json_regex_emit_item(r, set))
            return r->st;
        sift__js_ref ref;
        sift_status st = SIFT_OK;
        const char *t = r->out;
        if (r->n_out > JS_LEN_INLINE) {
            st = sift__js_rule(c, &ref, r->out);
            t = ref.name;
        }
        if (!st && !((*text)[set] = sift__calloc(c->al, strlen(t) + 1, 1)))
            st = SIFT_E_NOMEM;
        if (st)
            return st;
        memcpy((*text)[set], t, strlen(t));
    }
    return SIFT_OK;
}

static size_t count_live(const prod *p)
{
    size_t n_pairs = p->n_st * (size_t)(p->k_top + 1), n_live = 0;
    for (size_t i = 0; i < n_pairs; i++)
        n_live += p->ok[i] == 2;
    return n_live;
}

/* Emits a rule per live pair; the string's rule in *out. */
static sift_status emit_pairs(glu *g, prod *p, sift__js_ref *out)
{
    sift__js *c = g->c;
    size_t n_pairs = p->n_st * (size_t)(p->k_top + 1), n_live = count_live(p);
    size_t start = pair(p, p->start, 0);
    if (p->ok[start] != 2) {
        out->never = 1;
        return SIFT_OK;
    }
    if (n_live > JS_LEN_MAX_RULES) {
        too_large(g, "more than " STR(JS_LEN_MAX_RULES) " grammar rules");
        return g->st;
    }
    char **text = NULL;
    sift__js_ref *names = sift__calloc(c->al, n_pairs, sizeof *names);
    sift_status st = names ? set_texts(g, p, &text) : SIFT_E_NOMEM;
    for (size_t i = 0; !st && i < n_pairs; i++)
        if (p->ok[i] == 2)
            st = sift__js_new_rule(c, &names[i]);
    sift__js_buf b = {0};
    for (size_t s = 0; !st && s < p->n_st; s++)
        for (uint64_t k = 0; !st && k <= p->k_top; k++) {
            size_t i = pair(p, s, k);
            if (p->ok[i] != 2)
                continue;
            b.n = 0;
            if (b.p)
                b.p[0] = 0;
            uint64_t nk = next_k(p, k);
            const char *sep = "";
            for (uint32_t e = p->off[s]; !st && nk != UINT64_MAX && e < p->off[s + 1]; e++) {
                size_t j = pair(p, p->to[e], nk);
                if (p->ok[j] != 2)
                    continue;
                st = sift__js_printf(c, &b, "%s%s %s", sep, text[p->lab[e]], names[j].name);
                sep = " | ";
            }
            if (!st && p->fin[s] && k >= p->lo)
                st = sift__js_printf(c, &b, "%s\"\"", sep);
            if (!st)
                st = sift__js_emit(c, &names[i], b.p);
        }
    if (!st) {
        b.n = 0;
        st = sift__js_printf(c, &b, "\"\\\"\" %s \"\\\"\"", names[start].name);
    }
    if (!st)
        st = sift__js_rule(c, out, b.p);
    sift__js_buf_free(c, &b);
    for (size_t i = 0; text && i < g->r->n_nodes; i++)
        sift__free(c->al, text[i]);
    sift__free(c->al, text);
    sift__free(c->al, names);
    return st;
}

static int cmp_edge(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] != y[1] ? (x[1] < y[1] ? -1 : 1) : 0;
}

/* Sorts the transitions and drops repeats (a star of a star links its
 * ends twice). */
static void dedup_edges(glu *g)
{
    size_t n = g->edges.n / 2, w = 0;
    if (n == 0)
        return;
    qsort(g->edges.p, n, 2 * sizeof *g->edges.p, cmp_edge);
    for (size_t i = 0; i < n; i++)
        if (w == 0 || cmp_edge(g->edges.p + 2 * i, g->edges.p + 2 * (w - 1))) {
            g->edges.p[2 * w] = g->edges.p[2 * i];
            g->edges.p[2 * w + 1] = g->edges.p[2 * i + 1];
            w++;
        }
    g->edges.n = 2 * w;
}

static void prod_free(glu *g, prod *p)
{
    sift__free(g->c->al, p->off);
    sift__free(g->c->al, p->to);
    sift__free(g->c->al, p->lab);
    sift__free(g->c->al, p->fin);
    sift__free(g->c->al, p->ok);
    memset(p, 0, sizeof *p);
}

/* The position automaton as a prod (no counter yet): states the
 * positions, then the start; each transition reads its target's set. */
static sift_status nfa_of(glu *g, const frag *whole, prod *p)
{
    sift__js *c = g->c;
    dedup_edges(g);
    p->n_st = g->pos_set.n + 1;
    p->start = p->n_st - 1;
    size_t n_e = g->edges.n / 2 + whole->first.n;
    p->off = sift__calloc(c->al, p->n_st + 1, sizeof *p->off);
    p->to = sift__calloc(c->al, n_e ? n_e : 1, sizeof *p->to);
    p->lab = sift__calloc(c->al, n_e ? n_e : 1, sizeof *p->lab);
    p->fin = sift__calloc(c->al, p->n_st, 1);
    uint32_t *fill = sift__calloc(c->al, p->n_st, sizeof *fill);
    if (!p->off || !p->to || !p->lab || !p->fin || !fill) {
        sift__free(c->al, fill);
        return SIFT_E_NOMEM;
    }
    for (size_t e = 0; e < g->edges.n; e += 2)
        p->off[g->edges.p[e] + 1]++;
    p->off[p->start + 1] = (uint32_t)whole->first.n;
    for (size_t s = 0; s < p->n_st; s++)
        p->off[s + 1] += p->off[s];
    for (size_t e = 0; e < g->edges.n; e += 2) {
        uint32_t s = g->edges.p[e];
        p->to[p->off[s] + fill[s]++] = g->edges.p[e + 1];
    }
    for (size_t k = 0; k < whole->first.n; k++)
        p->to[p->off[p->start] + k] = whole->first.p[k];
    for (uint32_t e = 0; e < p->off[p->n_st]; e++)
        p->lab[e] = g->pos_set.p[p->to[e]] == UINT32_MAX ? g->any_node : g->pos_set.p[p->to[e]];
    for (size_t k = 0; k < whole->last.n; k++)
        p->fin[whole->last.p[k]] = 1;
    p->fin[p->start] = (unsigned char)whole->nullable;
    sift__free(c->al, fill);
    return SIFT_OK;
}

/* The product of the automaton (whole: first and last of the pattern)
 * with the counter, emitted. The automaton is made deterministic first
 * when that stays small (json_schema_dfa.c), so that one pair is live at a time. */
static sift_status product(glu *g, const frag *whole, uint64_t lo, uint64_t hi, int has_hi,
                           sift__js_ref *out)
{
    sift__js *c = g->c;
    prod nfa, dfa, *p = &nfa;
    memset(&nfa, 0, sizeof nfa);
    memset(&dfa, 0, sizeof dfa);
    sift_status st = nfa_of(g, whole, &nfa);
    if (!st) {
        st = sift__js_work(c, (int64_t)(nfa.n_st + nfa.off[nfa.n_st]));
        if (!st &&
            (st = sift__js_dfa(c, g->r, nfa.n_st, nfa.start, nfa.off, nfa.to, nfa.lab, nfa.fin,
                               &dfa.n_st, &dfa.off, &dfa.to, &dfa.lab, &dfa.fin)) == SIFT_OK)
            p = &dfa;
        else if (st == SIFT_E_SCHEMA_LIMIT && c->work <= c->max_work)
            st = SIFT_OK; /* too large to determinize: the automaton as it is */
    }
    /* the deterministic product when it is small enough, else the other */
    for (int last = p == &nfa; !st; p = &nfa, last = 1) {
        p->k_top = has_hi ? hi : lo;
        p->sat = !has_hi;
        p->lo = lo;
        if (p->k_top >= JS_LEN_MAX_PAIRS || p->n_st * (p->k_top + 1) > JS_LEN_MAX_PAIRS) {
            if (!last)
                continue;
            too_large(g, "more than " STR(JS_LEN_MAX_PAIRS) " (state, length) pairs");
            st = g->st;
            break;
        }
        st = sift__js_work(c, (int64_t)(p->n_st * (p->k_top + 1)));
        if (!st && !(p->ok = sift__calloc(c->al, p->n_st * (size_t)(p->k_top + 1), 1)))
            st = SIFT_E_NOMEM;
        if (st)
            break;
        mark_pairs(p);
        if (last || count_live(p) <= JS_LEN_MAX_RULES) {
            st = emit_pairs(g, p, out);
            break;
        }
    }
    prod_free(g, &nfa);
    prod_free(g, &dfa);
    return st;
}

/* The set node of "any JSON string character". */
static int any_node(glu *g)
{
    rx *r = g->r;
    size_t start = r->n_rng;
    if (!sift__json_regex_add_range(r, 0, RX_MAX_CP))
        return 0;
    g->any_node = sift__json_regex_new_node(r, N_SET, 0);
    if (g->any_node == UINT32_MAX)
        return 0;
    r->nodes[g->any_node].first = (uint32_t)(start / 2);
    r->nodes[g->any_node].n = 1;
    return 1;
}

sift_status sift__js_pattern_lengths(sift__js *c, const char *pat, size_t len, uint64_t lo,
                                     uint64_t hi, int has_hi, sift__js_ref *out, char *why,
                                     size_t why_size)
{
    rx r;
    uint32_t root = UINT32_MAX;
    sift_error rerr;
    glu g;
    memset(&g, 0, sizeof g);
    g.c = c;
    g.r = &r;
    sift_status st = sift__json_regex_parse(&r, c->al, pat, len, c->max_grammar, &rerr, &root);
    if (st) {
        /* the plain translation parsed the same pattern; a limit here is
         * reported as this construction's refusal */
        snprintf(why, why_size, "minLength / maxLength beside this pattern: %s", rerr.message);
        if (st != SIFT_E_NOMEM)
            st = SIFT_E_SCHEMA_UNSUPPORTED;
    } else {
        frag whole;
        memset(&whole, 0, sizeof whole);
        if (any_node(&g) && branch(&g, root, 0, 0, &whole, 0))
            st = product(&g, &whole, lo, hi, has_hi, out);
        else
            st = r.st ? r.st : g.st;
        if (!st)
            st = g.st;
        if (st == SIFT_E_SCHEMA_UNSUPPORTED)
            snprintf(why, why_size, "minLength / maxLength beside this pattern: %s",
                     g.why ? g.why : "not supported");
        else if (st && r.st && r.st != SIFT_E_NOMEM) {
            /* the pattern's own translation failed here (a limit) */
            snprintf(why, why_size, "minLength / maxLength beside this pattern: %s", rerr.message);
            st = SIFT_E_SCHEMA_UNSUPPORTED;
        }
        frag_free(&g, &whole);
    }
    sift__free(c->al, g.pos_set.p);
    sift__free(c->al, g.edges.p);
    sift__free(c->al, r.out);
    sift__json_regex_free(&r);
    return st;
}

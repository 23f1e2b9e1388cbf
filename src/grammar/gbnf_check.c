/*
 * gbnf_check.c - the checks the GBNF parser runs on the compiled rules.
 *
 * What it owns: the invariants of the compiled form that the later
 * passes and the matcher index with (sift__gp_check_compiled), and the
 * left-recursion analysis (sift__gp_check_left_recursion): nullable
 * rules by a worklist, the left-edge graph, its strongly connected
 * components by an iterative Tarjan walk, and the message that names the
 * rule path of a cycle. Which cycles are errors and which (nullable
 * repetitions) the matcher closes is argued at the analysis. No
 * recursion anywhere; every array comes from the parser's allocator.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gbnf_parse.h"

static void rule_label(const gp_state *p, uint32_t id, char *buf, size_t cap)
{
    const gp_rule *r = (const gp_rule *)p->rules.p + id;
    if (r->kind == RK_NAMED) {
        snprintf(buf, cap, "%.*s", (int)(r->name_len > 64 ? 64 : r->name_len),
                 (const char *)p->s + r->name_off);
    } else {
        char lc[32];
        sift__gp_fmt_lc(p, r->pos, lc, sizeof lc);
        snprintf(buf, cap, "(%s at %s)", r->kind == RK_GROUP ? "group" : "repetition", lc);
    }
}

/* The left-edge graph of the left-recursion check: edges r -> s when an
 * alternative of r references s after only nullable references; `via`
 * is the nullable rule skipped just before (UINT32_MAX: none), `tail`
 * says the reference ends its alternative (nothing follows it). */
typedef struct lgraph {
    uint32_t *estart, *edge, *evia;
    uint8_t *etail;
} lgraph;

/* Reports the cycle cyc[0] -> cyc[1] -> ... -> cyc[n-1] -> cyc[0] whose
 * i-th edge has index ei[i], at its first rule. */
static void report_cycle(gp_state *p, const lgraph *lg, const uint32_t *cyc, const uint32_t *ei,
                         size_t n)
{
    char msg[400], lab[96];
    size_t len = 0;
    rule_label(p, cyc[0], lab, sizeof lab);
    len += (size_t)snprintf(msg + len, sizeof msg - len, "%s", lab);
    int rep = 0;
    for (size_t q = 0; q < n; q++) {
        uint32_t to = q + 1 < n ? cyc[q + 1] : cyc[0];
        rep |= sift__gp_rule(p, cyc[q])->kind == RK_REPEAT;
        if (lg->evia[ei[q]] != UINT32_MAX && len < sizeof msg) {
            rule_label(p, lg->evia[ei[q]], lab, sizeof lab);
            len += (size_t)snprintf(msg + len, sizeof msg - len, " -> (nullable %s)", lab);
        }
        if (len < sizeof msg) {
            rule_label(p, to, lab, sizeof lab);
            len += (size_t)snprintf(msg + len, sizeof msg - len, " -> %s", lab);
        }
    }
    rule_label(p, cyc[0], lab, sizeof lab);
    sift__gp_perr(p, sift__gp_rule(p, cyc[0])->pos, SIFT_E_GRAMMAR_LEFT_RECURSION,
                  "rule '%s' is left-recursive: %s%s", lab, msg,
                  rep ? " (a repeated item that can match empty text)" : "");
}

/* The compiled form's invariants, checked once before the analyses
 * (and the matcher) index anything with them: a defined rule's (off,
 * len) lies inside the arena and ends with END (so a reference is never
 * its last element), a reference names a defined rule, a class index is
 * a class, and a rule that is not defined has no elements. The builder
 * keeps them; a violation is a parser bug, reported as SIFT_E_STATE (and
 * an abort in fuzzing builds, so the fuzzer still sees it) rather than
 * an out-of-range read or write. */
int sift__gp_check_compiled(gp_state *p)
{
    uint32_t nr = (uint32_t)p->rules.n;
    const sift__gelem *el = p->arena.p;
    size_t ne = p->arena.n;
    for (uint32_t r = 0; r < nr; r++) {
        const gp_rule *ri = sift__gp_rule(p, r);
        int ok = ri->defined ? ri->len > 0 && ri->off <= ne && ri->len <= ne - ri->off &&
                                   el[ri->off + ri->len - 1].type == SIFT__G_END
                             : ri->len == 0;
        for (uint32_t k = 0; ok && k < ri->len; k++) {
            const sift__gelem *e = &el[ri->off + k];
            if (e->type == SIFT__G_REF)
                ok = e->v < nr && sift__gp_rule(p, e->v)->defined;
            else if (e->type == SIFT__G_CLASS)
                ok = e->v < p->cls.n;
            else
                ok = e->type <= SIFT__G_TOKEN_NOT;
        }
        if (!ok) {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
            abort();
#endif
            char lab[96];
            rule_label(p, r, lab, sizeof lab);
            sift__gp_perr(
                p, SIZE_MAX, SIFT_E_STATE,
                "internal error: rule %s was compiled inconsistently (please report the grammar)",
                lab);
            return 0;
        }
    }
    return 1;
}

/* The scratch arrays of the left-recursion check, all from the parser's
 * allocator and freed together by lr_free. */
typedef struct lrscratch {
    uint8_t *nullable;
    uint32_t *alt_need, *alt_rule, *occ_start, *occ, *work;
    uint32_t *ecount;
    lgraph lg;
    uint8_t *color;
    uint32_t *stk, *sit, *idx, *low, *scc, *tst;
    uint32_t *cyc, *cei;
} lrscratch;

/* Allocates the arrays sized by the rule and alternative counts (the
 * left-edge arrays come later, once their size is known); 0 after
 * reporting SIFT_E_NOMEM. */
static int lr_alloc(gp_state *p, lrscratch *w)
{
    uint32_t nr = (uint32_t)p->rules.n;
    const sift__gelem *el = p->arena.p;
    size_t ne = p->arena.n;
    w->nullable = sift__calloc(p->al, nr, 1);
    size_t n_alt = 0;
    for (uint32_t r = 0; r < nr; r++) {
        const gp_rule *ri = sift__gp_rule(p, r);
        for (uint32_t k = 0; k < ri->len; k++)
            n_alt += el[ri->off + k].type == SIFT__G_ALT || el[ri->off + k].type == SIFT__G_END;
    }
    w->alt_need = sift__calloc(p->al, n_alt + 1, sizeof *w->alt_need);
    w->alt_rule = sift__calloc(p->al, n_alt + 1, sizeof *w->alt_rule);
    w->occ_start = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->occ_start);
    w->occ = sift__calloc(p->al, ne + 1, sizeof *w->occ);
    w->work = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->work);
    w->ecount = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->ecount);
    w->color = sift__calloc(p->al, (size_t)nr + 1, 1);
    w->stk = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->stk);
    w->sit = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->sit);
    w->idx = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->idx);
    w->low = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->low);
    w->scc = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->scc);
    w->tst = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->tst);
    w->cyc = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->cyc);
    w->cei = sift__calloc(p->al, (size_t)nr + 1, sizeof *w->cei);
    if (!w->nullable || !w->alt_need || !w->alt_rule || !w->occ_start || !w->occ || !w->work ||
        !w->ecount || !w->color || !w->stk || !w->sit || !w->idx || !w->low || !w->scc || !w->tst ||
        !w->cyc || !w->cei) {
        sift__gp_nomem(p);
        return 0;
    }
    return 1;
}

/* Frees every scratch array (NULL ones included). */
static void lr_free(gp_state *p, lrscratch *w)
{
    sift__free(p->al, w->nullable);
    sift__free(p->al, w->alt_need);
    sift__free(p->al, w->alt_rule);
    sift__free(p->al, w->occ_start);
    sift__free(p->al, w->occ);
    sift__free(p->al, w->work);
    sift__free(p->al, w->ecount);
    sift__free(p->al, w->lg.estart);
    sift__free(p->al, w->lg.edge);
    sift__free(p->al, w->lg.evia);
    sift__free(p->al, w->lg.etail);
    sift__free(p->al, w->color);
    sift__free(p->al, w->stk);
    sift__free(p->al, w->sit);
    sift__free(p->al, w->idx);
    sift__free(p->al, w->low);
    sift__free(p->al, w->scc);
    sift__free(p->al, w->tst);
    sift__free(p->al, w->cyc);
    sift__free(p->al, w->cei);
}

/* 1. nullable: an alternative is nullable when it has no terminal and
 * all its references are nullable. alt_need counts references still
 * unknown; a terminal makes the alternative never nullable. The
 * occurrence lists (occ_start/occ: for each rule, the alternatives that
 * reference it, one entry per reference) drive the worklist. */
static void lr_nullable(gp_state *p, lrscratch *w)
{
    uint32_t nr = (uint32_t)p->rules.n;
    const sift__gelem *el = p->arena.p;
    uint8_t *nullable = w->nullable;
    uint32_t *alt_need = w->alt_need, *alt_rule = w->alt_rule, *occ_start = w->occ_start;
    uint32_t *occ = w->occ, *work = w->work;
    size_t a = 0;
    size_t n_work = 0;
    for (uint32_t r = 0; r < nr; r++) {
        const gp_rule *ri = sift__gp_rule(p, r);
        int term = 0;
        uint32_t need = 0;
        for (uint32_t k = 0; k < ri->len; k++) {
            const sift__gelem *e = &el[ri->off + k];
            if (e->type == SIFT__G_ALT || e->type == SIFT__G_END) {
                alt_rule[a] = r;
                alt_need[a] = term ? UINT32_MAX : need;
                if (!term && need == 0 && !nullable[r]) {
                    nullable[r] = 1;
                    work[n_work++] = r;
                }
                a++;
                term = 0;
                need = 0;
            } else if (e->type == SIFT__G_REF) {
                need++;
                occ_start[e->v]++;
            } else {
                term = 1;
            }
        }
    }
    uint32_t sum = 0;
    for (uint32_t r = 0; r <= nr; r++) {
        uint32_t c = r < nr ? occ_start[r] : 0;
        occ_start[r] = sum;
        sum += c;
    }
    uint32_t *fill = w->ecount; /* reuse as cursor */
    memcpy(fill, occ_start, (size_t)nr * sizeof *fill);
    a = 0;
    for (uint32_t r = 0; r < nr; r++) {
        const gp_rule *ri = sift__gp_rule(p, r);
        for (uint32_t k = 0; k < ri->len; k++) {
            const sift__gelem *e = &el[ri->off + k];
            if (e->type == SIFT__G_ALT || e->type == SIFT__G_END)
                a++;
            else if (e->type == SIFT__G_REF)
                occ[fill[e->v]++] = (uint32_t)a;
        }
    }
    while (n_work) {
        uint32_t r = work[--n_work];
        for (uint32_t k = occ_start[r]; k < occ_start[r + 1]; k++) {
            uint32_t al = occ[k];
            if (alt_need[al] == UINT32_MAX || alt_need[al] == 0)
                continue;
            if (--alt_need[al] == 0 && !nullable[alt_rule[al]]) {
                nullable[alt_rule[al]] = 1;
                work[n_work++] = alt_rule[al];
            }
        }
    }
}

/* One pass over the left edges of every rule: pass 0 counts them into
 * ecount[] (and *total), pass 1 fills lg from lg.estart on. */
static void lr_edge_pass(gp_state *p, lrscratch *w, int pass, size_t *total)
{
    uint32_t nr = (uint32_t)p->rules.n;
    const sift__gelem *el = p->arena.p;
    uint32_t *ecount = w->ecount;
    lgraph *lg = &w->lg;
    for (uint32_t r = 0; r < nr; r++) {
        const gp_rule *ri = sift__gp_rule(p, r);
        int open = 1;
        uint32_t via = UINT32_MAX;
        for (uint32_t k = 0; k < ri->len; k++) {
            const sift__gelem *e = &el[ri->off + k];
            if (e->type == SIFT__G_ALT || e->type == SIFT__G_END) {
                open = 1;
                via = UINT32_MAX;
            } else if (!open) {
                continue;
            } else if (e->type == SIFT__G_REF) {
                if (pass == 0) {
                    ecount[r]++;
                    (*total)++;
                } else {
                    /* a rule's elements end with END (check_compiled) */
                    uint32_t nt = el[ri->off + k + 1].type;
                    size_t j = lg->estart[r] + ecount[r];
                    lg->edge[j] = e->v;
                    lg->evia[j] = via;
                    lg->etail[j] = nt == SIFT__G_ALT || nt == SIFT__G_END;
                    ecount[r]++;
                }
                if (w->nullable[e->v])
                    via = e->v;
                else
                    open = 0;
            } else {
                open = 0;
            }
        }
    }
}

/* 2. left edges: count them, allocate the graph, fill it; 0 after
 * reporting SIFT_E_NOMEM. */
static int lr_left_edges(gp_state *p, lrscratch *w)
{
    uint32_t nr = (uint32_t)p->rules.n;
    uint32_t *ecount = w->ecount;
    lgraph *lg = &w->lg;
    memset(ecount, 0, ((size_t)nr + 1) * sizeof *ecount);
    size_t total = 0;
    lr_edge_pass(p, w, 0, &total);
    lg->estart = sift__calloc(p->al, (size_t)nr + 1, sizeof *lg->estart);
    lg->edge = sift__calloc(p->al, total + 1, sizeof *lg->edge);
    lg->evia = sift__calloc(p->al, total + 1, sizeof *lg->evia);
    lg->etail = sift__calloc(p->al, total + 1, 1);
    if (!lg->estart || !lg->edge || !lg->evia || !lg->etail) {
        sift__gp_nomem(p);
        return 0;
    }
    uint32_t s2 = 0;
    for (uint32_t r = 0; r < nr; r++) {
        lg->estart[r] = s2;
        s2 += ecount[r];
    }
    lg->estart[nr] = s2;
    memset(ecount, 0, ((size_t)nr + 1) * sizeof *ecount);
    lr_edge_pass(p, w, 1, &total);
    return 1;
}

/* 3. strongly connected components (iterative Tarjan) into scc[]: idx[]
 * is the visit number + 1 (0 = unvisited), low[] the lowest one
 * reachable, color[] 1 while on the component stack tst[] */
static void lr_components(gp_state *p, lrscratch *w)
{
    uint32_t nr = (uint32_t)p->rules.n;
    const uint32_t *estart = w->lg.estart, *edge = w->lg.edge;
    uint8_t *color = w->color;
    uint32_t *stk = w->stk, *sit = w->sit, *idx = w->idx, *low = w->low, *scc = w->scc;
    uint32_t *tst = w->tst;
    uint32_t next = 1, n_scc = 0;
    size_t nt = 0;
    for (uint32_t r0 = 0; r0 < nr; r0++) {
        if (idx[r0])
            continue;
        size_t sp = 0;
        stk[sp] = r0;
        sit[sp++] = estart[r0];
        idx[r0] = low[r0] = next++;
        tst[nt++] = r0;
        color[r0] = 1;
        while (sp) {
            uint32_t r = stk[sp - 1];
            if (sit[sp - 1] < estart[r + 1]) {
                uint32_t v = edge[sit[sp - 1]++];
                if (!idx[v]) {
                    idx[v] = low[v] = next++;
                    tst[nt++] = v;
                    color[v] = 1;
                    stk[sp] = v;
                    sit[sp++] = estart[v];
                } else if (color[v] && idx[v] < low[r]) {
                    low[r] = idx[v];
                }
                continue;
            }
            sp--;
            if (sp && low[r] < low[stk[sp - 1]])
                low[stk[sp - 1]] = low[r];
            if (low[r] == idx[r]) {
                uint32_t v;
                do {
                    v = tst[--nt];
                    color[v] = 0;
                    scc[v] = n_scc;
                } while (v != r);
                n_scc++;
            }
        }
    }
}

/* 4a. a reference that is followed by something, on a cycle: the cycle
 * is that edge r -> s and a shortest path s ->* r inside the component,
 * found breadth-first (color[] marks the visited rules, sit[v] the rule
 * before v on the path and low[v] the edge used). Reports the first such
 * cycle and returns 1; 0 when there is none. */
static int lr_pushing_cycle(gp_state *p, lrscratch *w)
{
    uint32_t nr = (uint32_t)p->rules.n;
    const uint32_t *estart = w->lg.estart, *edge = w->lg.edge;
    uint8_t *color = w->color;
    uint32_t *stk = w->stk, *sit = w->sit, *low = w->low, *scc = w->scc, *work = w->work;
    for (uint32_t r = 0; r < nr; r++) {
        for (uint32_t e0 = estart[r]; e0 < estart[r + 1]; e0++) {
            uint32_t s = edge[e0];
            if (w->lg.etail[e0] || scc[s] != scc[r])
                continue;
            size_t qh = 0, qt = 0;
            work[qt++] = s;
            color[s] = 1;
            while (qh < qt && !color[r]) {
                uint32_t u = work[qh++];
                for (uint32_t k = estart[u]; k < estart[u + 1]; k++) {
                    uint32_t v = edge[k];
                    if (color[v] || scc[v] != scc[r])
                        continue;
                    color[v] = 1;
                    sit[v] = u;
                    low[v] = k;
                    work[qt++] = v;
                }
            }
            /* walk back from r to s, then reverse into cyc[1 ..] */
            size_t len = 0;
            for (uint32_t v = r; v != s; v = sit[v])
                stk[len++] = v;
            size_t n = 0;
            w->cyc[n] = r;
            w->cei[n++] = e0;
            for (size_t q = len; q > 0; q--) {
                uint32_t v = stk[q - 1];
                w->cyc[n] = sit[v];
                w->cei[n++] = low[v];
            }
            report_cycle(p, &w->lg, w->cyc, w->cei, n);
            return 1;
        }
    }
    return 0;
}

/* 4b. a cycle of tail references through no repetition helper: a
 * depth-first search over those edges only; a gray target closes a
 * cycle. Reports the first one and returns 1; 0 when there is none. */
static int lr_tail_cycle(gp_state *p, lrscratch *w)
{
    uint32_t nr = (uint32_t)p->rules.n;
    const uint32_t *estart = w->lg.estart, *edge = w->lg.edge;
    uint8_t *color = w->color;
    uint32_t *stk = w->stk, *sit = w->sit;
    memset(color, 0, (size_t)nr + 1);
    for (uint32_t r0 = 0; r0 < nr; r0++) {
        if (color[r0] || sift__gp_rule(p, r0)->kind == RK_REPEAT)
            continue;
        size_t sp = 0;
        stk[sp] = r0;
        sit[sp] = estart[r0];
        sp++;
        color[r0] = 1;
        while (sp) {
            uint32_t r = stk[sp - 1];
            uint32_t k = sit[sp - 1];
            if (k >= estart[r + 1]) {
                color[r] = 2;
                sp--;
                continue;
            }
            sit[sp - 1]++;
            uint32_t s = edge[k];
            if (sift__gp_rule(p, s)->kind == RK_REPEAT)
                continue;
            if (color[s] == 0) {
                color[s] = 1;
                stk[sp] = s;
                sit[sp] = estart[s];
                sp++;
            } else if (color[s] == 1) {
                /* the cycle is stk[j..sp) -> s, with stk[j] == s */
                size_t j = sp - 1;
                while (stk[j] != s)
                    j--;
                size_t n = 0;
                for (size_t q = j; q < sp; q++) {
                    w->cyc[n] = stk[q];
                    w->cei[n++] = sit[q] - 1;
                }
                report_cycle(p, &w->lg, w->cyc, w->cei, n);
                return 1;
            }
        }
    }
    return 0;
}

/* Left recursion. Nullable rules are found with a worklist, then the
 * left-edge graph is built and its strongly connected components found
 * (iterative Tarjan). A cycle of left edges is an error when
 *  (a) one of its references is followed by something: every round of
 *      the cycle pushes a return address, so the matcher's stacks would
 *      grow without end (root ::= root "a"), or
 *  (b) all its references end their alternatives but none of its rules
 *      is a repetition helper (a ::= b | "x", b ::= a), as in llama.cpp.
 * The remaining cycles are nullable repetitions, ( [x]* )*, (a?)*,
 * ("")*, x ::= x?: a tail reference pushes nothing, so going round the
 * cycle comes back to the same parse stack, which the matcher's closure
 * has already seen, and the empty iteration simply ends the loop (the
 * language is the usual least fixed point). No recursion anywhere. */
int sift__gp_check_left_recursion(gp_state *p)
{
    lrscratch w;
    memset(&w, 0, sizeof w);
    int ok = 0;
    if (lr_alloc(p, &w)) {
        lr_nullable(p, &w);
        if (lr_left_edges(p, &w)) {
            lr_components(p, &w);
            ok = !lr_pushing_cycle(p, &w) && !lr_tail_cycle(p, &w);
        }
    }
    lr_free(p, &w);
    return ok;
}

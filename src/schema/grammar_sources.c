/*
 * grammar_sources.c - grammar sources other than GBNF and JSON Schema:
 * a regular expression, a choice among strings, and structural tags
 * (docs/grammar.md, "Regular expressions", "Choices", "Structural tags").
 *
 * Each source is written out as GBNF text and compiled by
 * sift_grammar_new, so it yields the same grammar object with the same
 * budgets (gparams). What each one writes:
 *
 *   regex    root ::= EXPR          (json_regex.c, raw whole-text mode)
 *   choices  root ::= "ab" c1 | "x" ; c1 ::= "" | "c" | "d"
 *            a radix tree of the strings, one rule per branching node,
 *            every reference a tail call, so matching keeps one stack
 *            per possible next character, not one per string
 *   tags     root ::= tg f-0
 *            tg   ::= BEGIN_0 b0-root END_0 | BEGIN_1 b1-root END_1 ...
 *            f-S  ::= "" | "c" f-T | "d" tr-K f-0 | [^cd] f-0
 *            tr-K ::= REST_OF_BEGIN_i bi-root END_i | ...
 *            bi-*  the tag's schema or grammar, its rules renamed
 *   and the grammar is made lazy on the triggers (words). The f-S rules
 *   are the Aho-Corasick automaton of the triggers over code points: S is
 *   the longest suffix of the free text that is a proper prefix of a
 *   trigger; the character that completes trigger K continues as one of
 *   the tags whose begin starts with K (tr-K), and after its end the text
 *   is free again (f-0). So "free again" needs no matcher machinery: the
 *   text between tags is part of the grammar.
 *
 * Invariants: triggers are non-empty, valid UTF-8, and no trigger
 * contains another, so at most one trigger ends at any character and
 * only the automaton's leaves complete one; every begin starts with a
 * trigger and every trigger starts some begin. Work is bounded by the
 * output size (max_bytes) and, for the automaton, by states x alphabet
 * <= SRC_MAX_AUTOMATON (its move table is filled breadth first, one entry
 * at a time, never walking failure chains); the checks between strings
 * are bounded by the tag and trigger counts (1024 each) times the
 * triggers' bytes (64 KiB in all); nothing recurses.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "../grammar/gbnf.h"
#include "json_regex.h"

#define SRC_MAX_TAGS 1024
#define SRC_MAX_TRIGGERS 1024
#define SRC_MAX_AUTOMATON ((uint64_t)1 << 20)
#define SRC_MAX_TRIGGER_BYTES ((size_t)64 << 10)

/* ------------------------------------------------------------------ */
/* Text being built                                                    */
/* ------------------------------------------------------------------ */

typedef struct sbuf {
    const sift__alloc *al;
    char *s;
    size_t n, cap, max;
    sift_status st; /* SIFT_E_NOMEM or SIFT_E_GRAMMAR_LIMIT once failed */
} sbuf;

static int sb_put(sbuf *b, const char *p, size_t n)
{
    if (b->st)
        return 0;
    if (n > b->max || b->n > b->max - n) {
        b->st = SIFT_E_GRAMMAR_LIMIT;
        return 0;
    }
    if (sift__reserve(b->al, &b->s, &b->cap, b->n, b->n + n + 1, 1, 256)) {
        b->st = SIFT_E_NOMEM;
        return 0;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
    return 1;
}

static int sb_puts(sbuf *b, const char *p)
{
    return sb_put(b, p, strlen(p));
}

static int sb_printf(sbuf *b, const char *fmt, ...) SIFT__PRINTF(2, 3);
static int sb_printf(sbuf *b, const char *fmt, ...)
{
    char t[96];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    return k > 0 && (size_t)k < sizeof t && sb_put(b, t, (size_t)k);
}

/* One code point as GBNF text inside a literal or a class. */
static int sb_cp(sbuf *b, uint32_t c)
{
    char t[16];
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        snprintf(t, sizeof t, "%c", (int)c);
    else if (c < 0x100)
        snprintf(t, sizeof t, "\\x%02x", (unsigned)c);
    else if (c < 0x10000)
        snprintf(t, sizeof t, "\\u%04x", (unsigned)c);
    else
        snprintf(t, sizeof t, "\\U%08x", (unsigned)c);
    return sb_puts(b, t);
}

/* The valid UTF-8 bytes p[0..n) as one GBNF literal. */
static int sb_lit(sbuf *b, const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p;
    if (!sb_puts(b, "\""))
        return 0;
    for (size_t i = 0; i < n;) {
        uint32_t c = 0;
        size_t k = sift__utf8_decode(u + i, n - i, &c);
        if (k == 0 || !sb_cp(b, c))
            return 0;
        i += k;
    }
    return sb_puts(b, "\"");
}

static void sb_free(sbuf *b)
{
    sift__free(b->al, b->s);
    b->s = NULL;
    b->n = b->cap = 0;
}

/* The GBNF budget left for the body of `root ::= BODY\n`. */
static size_t body_budget(const sift_grammar_params *gp)
{
    return gp->max_bytes > 16 ? gp->max_bytes - 16 : 0;
}

static sift_status copy_gparams(sift_grammar_params *gp, const sift_grammar_params *gparams,
                                sift_error *err)
{
    sift_grammar_params_init(gp);
    if (gparams) {
        if (gparams->struct_size == 0 || gparams->struct_size > sizeof *gp)
            return sift__fail(err, SIFT_E_ARG, "gparams->struct_size is %u (expected 1..%zu)",
                              (unsigned)gparams->struct_size, sizeof *gp);
        memcpy(gp, gparams, gparams->struct_size);
    }
    gp->root = NULL;
    gp->map_position = NULL;
    return SIFT_OK;
}

/* Rewrites an error of the generated GBNF as the source's: the text is
 * ours, so only its limits can be the input's doing. */
static sift_status map_gbnf_error(sift_status st, sift_status limit, const char *source,
                                  const char *what, sift_error *err)
{
    sift_status to = st == SIFT_E_GRAMMAR_LIMIT ? limit : st;
    if (err && st != SIFT_E_NOMEM) {
        char msg[SIFT_ERROR_MESSAGE_MAX];
        memcpy(msg, err->message, sizeof msg);
        sift__fail(err, to, "%s: %s: %s", source, what, msg);
        sift__strlcpy_utf8(err->source, source, sizeof err->source);
        err->line = err->column = 0;
        err->offset = -1;
    }
    return to;
}

/* ------------------------------------------------------------------ */
/* Regular expressions                                                 */
/* ------------------------------------------------------------------ */

sift_status sift_grammar_from_regex(sift_grammar **out, const char *regex, size_t len,
                                    const sift_vocab *vocab, const sift_grammar_params *gparams,
                                    sift_error *err)
{
    if (out)
        *out = NULL;
    if (!out || (!regex && len > 0))
        return sift__fail(err, SIFT_E_ARG, "sift_grammar_from_regex: NULL argument");
    sift_grammar_params gp;
    sift_status st = copy_gparams(&gp, gparams, err);
    if (st)
        return st;
    sift__alloc al;
    if ((st = sift__alloc_init(&al, gp.allocator, err)))
        return st;
    char *expr = NULL;
    size_t n = 0;
    st = sift__regex_to_gbnf(&al, regex, len, body_budget(&gp), &expr, &n, err);
    if (st) {
        /* the dialect's statuses, as the regex source's */
        sift_status to = st == SIFT_E_SCHEMA_LIMIT ? SIFT_E_PATTERN_LIMIT
                         : st == SIFT_E_SCHEMA_SYNTAX || st == SIFT_E_SCHEMA_UNSUPPORTED
                             ? SIFT_E_PATTERN_SYNTAX
                             : st;
        if (err && to != st)
            err->code = to;
        return to;
    }
    sbuf b = {.al = &al, .max = gp.max_bytes};
    if (sb_puts(&b, "root ::= ") && sb_put(&b, expr, n))
        sb_puts(&b, "\n");
    sift__free(&al, expr);
    if (b.st) {
        sb_free(&b);
        return b.st == SIFT_E_NOMEM
                   ? sift__fail(err, SIFT_E_NOMEM, "regex: out of memory")
                   : sift__fail(err, SIFT_E_PATTERN_LIMIT, "regex: the grammar exceeds %zu bytes",
                                gp.max_bytes);
    }
    if (!gp.source_name)
        gp.source_name = "the regex's GBNF";
    st = sift_grammar_new(out, b.s, b.n, vocab, &gp, err);
    sb_free(&b);
    return st ? map_gbnf_error(st, SIFT_E_PATTERN_LIMIT, "regex", "the regex's grammar", err)
              : SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* Choices                                                             */
/* ------------------------------------------------------------------ */

/* A choice, for sorting: its bytes and its index in the caller's list. */
typedef struct choice_ref {
    const unsigned char *p;
    size_t n;
    size_t index;
} choice_ref;

static int cmp_choice(const void *a, const void *b)
{
    const choice_ref *x = a, *y = b;
    size_t m = x->n < y->n ? x->n : y->n;
    int c = m ? memcmp(x->p, y->p, m) : 0;
    if (c)
        return c;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* A pending rule `id`: the sorted strings [lo, hi) share their first
 * `off` bytes; the rule matches what follows. */
typedef struct choice_task {
    size_t lo, hi, off, id;
} choice_task;

/* Writes the radix tree of the sorted strings r[0..n) as rules root, c1,
 * c2, ... with an explicit work list (no recursion). */
static int emit_choices(sbuf *b, const choice_ref *r, size_t n)
{
    choice_task *work = NULL;
    size_t n_work = 0, cap_work = 0, next_id = 1;
    if (sift__reserve(b->al, &work, &cap_work, 0, 1, sizeof *work, 16)) {
        b->st = SIFT_E_NOMEM;
        return 0;
    }
    work[n_work++] = (choice_task){0, n, 0, 0};
    while (n_work > 0 && !b->st) {
        choice_task t = work[--n_work];
        if (t.id == 0)
            sb_puts(b, "root ::=");
        else
            sb_printf(b, "c%zu ::=", t.id);
        size_t i = t.lo;
        int alts = 0;
        /* strings that end here (the sort puts them first) */
        if (i < t.hi && r[i].n == t.off) {
            sb_puts(b, " \"\"");
            alts++;
            while (i < t.hi && r[i].n == t.off)
                i++;
        }
        while (i < t.hi && !b->st) {
            uint32_t cp;
            size_t cl = sift__utf8_decode(r[i].p + t.off, r[i].n - t.off, &cp);
            size_t j = i + 1;
            while (j < t.hi && r[j].n >= t.off + cl && !memcmp(r[j].p + t.off, r[i].p + t.off, cl))
                j++;
            /* the group [i, j) shares a first character; its common
             * prefix is that of its first and last strings (sorted), cut
             * back to a character boundary */
            const choice_ref *f = &r[i], *l = &r[j - 1];
            size_t lcp = 0, m = (f->n < l->n ? f->n : l->n) - t.off;
            while (lcp < m && f->p[t.off + lcp] == l->p[t.off + lcp])
                lcp++;
            while (t.off + lcp < f->n && (f->p[t.off + lcp] & 0xC0) == 0x80)
                lcp--;
            sb_puts(b, alts ? " | " : " ");
            sb_lit(b, (const char *)f->p + t.off, lcp);
            alts++;
            /* more follows unless every string of the group ends here */
            if (l->n > t.off + lcp) {
                if (sift__reserve(b->al, &work, &cap_work, n_work, n_work + 1, sizeof *work, 16)) {
                    b->st = SIFT_E_NOMEM;
                    break;
                }
                work[n_work++] = (choice_task){i, j, t.off + lcp, next_id};
                sb_printf(b, " c%zu", next_id++);
            }
            i = j;
        }
        sb_puts(b, "\n");
    }
    sift__free(b->al, work);
    return !b->st;
}

sift_status sift_grammar_from_choices(sift_grammar **out, const char *const *choices,
                                      const size_t *lens, size_t n_choices, const sift_vocab *vocab,
                                      const sift_grammar_params *gparams, sift_error *err)
{
    if (out)
        *out = NULL;
    if (!out || (!choices && n_choices > 0))
        return sift__fail(err, SIFT_E_ARG, "sift_grammar_from_choices: NULL argument");
    if (n_choices == 0)
        return sift__fail(err, SIFT_E_ARG, "choices: the list is empty (nothing could match)");
    sift_grammar_params gp;
    sift_status st = copy_gparams(&gp, gparams, err);
    if (st)
        return st;
    sift__alloc al;
    if ((st = sift__alloc_init(&al, gp.allocator, err)))
        return st;
    for (size_t i = 0; i < n_choices; i++) {
        size_t n = lens ? lens[i] : choices[i] ? strlen(choices[i]) : 0;
        size_t bad = 0;
        if (!choices[i] && n > 0)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i, "choices[%zu]: NULL with length %zu",
                                 i, n);
        if (n > gp.max_bytes)
            return sift__fail_at(err, SIFT_E_GRAMMAR_LIMIT, (int64_t)i,
                                 "choices[%zu]: %zu bytes; the grammar may have at most %zu", i, n,
                                 gp.max_bytes);
        if (n && !sift__utf8_valid((const unsigned char *)choices[i], n, &bad)) {
            sift__fail_at(err, SIFT_E_GRAMMAR_SYNTAX, (int64_t)i,
                          "choices[%zu], offset %zu: invalid UTF-8", i, bad);
            if (err)
                err->offset = (int64_t)bad;
            return SIFT_E_GRAMMAR_SYNTAX;
        }
    }
    choice_ref *r = sift__malloc(&al, n_choices, sizeof *r);
    if (!r)
        return sift__fail(err, SIFT_E_NOMEM, "choices: out of memory");
    for (size_t i = 0; i < n_choices; i++) {
        r[i].p = (const unsigned char *)(choices[i] ? choices[i] : "");
        r[i].n = lens ? lens[i] : strlen((const char *)r[i].p);
        r[i].index = i;
    }
    qsort(r, n_choices, sizeof *r, cmp_choice);
    sbuf b = {.al = &al, .max = gp.max_bytes};
    emit_choices(&b, r, n_choices);
    sift__free(&al, r);
    if (b.st) {
        sb_free(&b);
        return b.st == SIFT_E_NOMEM
                   ? sift__fail(err, SIFT_E_NOMEM, "choices: out of memory")
                   : sift__fail(err, SIFT_E_GRAMMAR_LIMIT,
                                "choices: the grammar of the %zu choices exceeds %zu bytes",
                                n_choices, gp.max_bytes);
    }
    if (!gp.source_name)
        gp.source_name = "the choices' GBNF";
    st = sift_grammar_new(out, b.s, b.n, vocab, &gp, err);
    sb_free(&b);
    return st ? map_gbnf_error(st, SIFT_E_GRAMMAR_LIMIT, "choices", "the choices' grammar", err)
              : SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* Structural tags                                                     */
/* ------------------------------------------------------------------ */

/* A node of the triggers' trie over code points. */
typedef struct acnode {
    uint32_t cp;     /* the edge from the parent */
    int32_t parent;  /* -1 at the root */
    int32_t fail;    /* longest proper suffix that is a trie node */
    int32_t trigger; /* the trigger that ends here (a leaf), or -1 */
    int32_t child;   /* first child, -1 */
    int32_t sibling; /* next child of the parent, -1 */
} acnode;

typedef struct tagc {
    const sift__alloc *al;
    acnode *nd;
    size_t n_nd, cap_nd;
    int32_t *q;      /* BFS order */
    uint32_t *sigma; /* the distinct code points of the triggers, sorted */
    size_t n_sigma, cap_sigma;
    int32_t *go; /* the automaton: go[s * n_sigma + k], the move from s on sigma[k] */
} tagc;

static int32_t ac_child(const tagc *a, int32_t s, uint32_t c)
{
    for (int32_t k = a->nd[s].child; k >= 0; k = a->nd[k].sibling)
        if (a->nd[k].cp == c)
            return k;
    return -1;
}

/* The index of code point c in sigma (c is one of them). */
static size_t sigma_index(const tagc *a, uint32_t c)
{
    size_t lo = 0, hi = a->n_sigma;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->sigma[mid] <= c)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

/* Builds the trie of the triggers with failure links. */
static sift_status ac_build(tagc *a, const char *const *trig, size_t n, sift_error *err)
{
    if (sift__reserve(a->al, &a->nd, &a->cap_nd, 0, 1, sizeof *a->nd, 64))
        return sift__fail(err, SIFT_E_NOMEM, "triggers: out of memory");
    a->nd[0] = (acnode){0, -1, 0, -1, -1, -1};
    a->n_nd = 1;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = (const unsigned char *)trig[i];
        size_t len = strlen(trig[i]);
        int32_t s = 0;
        for (size_t k = 0; k < len;) {
            uint32_t c = 0;
            k += sift__utf8_decode(p + k, len - k, &c);
            int32_t x = ac_child(a, s, c);
            if (x < 0) {
                if (sift__reserve(a->al, &a->nd, &a->cap_nd, a->n_nd, a->n_nd + 1, sizeof *a->nd,
                                  64) ||
                    sift__reserve(a->al, &a->sigma, &a->cap_sigma, a->n_sigma, a->n_sigma + 1,
                                  sizeof *a->sigma, 64))
                    return sift__fail(err, SIFT_E_NOMEM, "triggers: out of memory");
                x = (int32_t)a->n_nd++;
                a->nd[x] = (acnode){c, s, 0, -1, -1, a->nd[s].child};
                a->nd[s].child = x;
                a->sigma[a->n_sigma++] = c;
            }
            s = x;
        }
        a->nd[s].trigger = (int32_t)i;
    }
    qsort(a->sigma, a->n_sigma, sizeof *a->sigma, cmp_u32);
    size_t w = 0;
    for (size_t k = 0; k < a->n_sigma; k++)
        if (w == 0 || a->sigma[w - 1] != a->sigma[k])
            a->sigma[w++] = a->sigma[k];
    a->n_sigma = w;
    if ((uint64_t)a->n_nd * (a->n_sigma + 1) > SRC_MAX_AUTOMATON)
        return sift__fail(err, SIFT_E_LIMIT,
                          "triggers: their automaton has %zu states x %zu characters; max %llu "
                          "entries",
                          a->n_nd, a->n_sigma, (unsigned long long)SRC_MAX_AUTOMATON);
    a->q = sift__malloc(a->al, a->n_nd, sizeof *a->q);
    a->go = sift__malloc(a->al, a->n_nd * a->n_sigma + 1, sizeof *a->go);
    if (!a->q || !a->go)
        return sift__fail(err, SIFT_E_NOMEM, "triggers: out of memory");
    /* Breadth first, so that a node's failure node (shallower) has its
     * moves already: a move is the child's, else the failure node's.
     * O(states x characters), whatever the failure chains. */
    size_t head = 0, tail = 0, m = a->n_sigma;
    a->q[tail++] = 0;
    while (head < tail) {
        int32_t x = a->q[head++];
        int32_t *row = a->go + (size_t)x * m;
        for (size_t k = 0; k < m; k++)
            row[k] = x == 0 ? 0 : a->go[(size_t)a->nd[x].fail * m + k];
        for (int32_t k = a->nd[x].child; k >= 0; k = a->nd[k].sibling) {
            size_t ci = sigma_index(a, a->nd[k].cp);
            a->nd[k].fail = x == 0 ? 0 : a->go[(size_t)a->nd[x].fail * m + ci];
            row[ci] = k;
            a->q[tail++] = k;
        }
    }
    return SIFT_OK;
}

static void ac_free(tagc *a)
{
    sift__free(a->al, a->nd);
    sift__free(a->al, a->q);
    sift__free(a->al, a->sigma);
    sift__free(a->al, a->go);
}

/* Appends GBNF text `t` with every rule name prefixed by `pre`. The text
 * compiled already, so it is well formed: names are the runs of
 * [A-Za-z0-9-] outside literals, classes, token references, braces and
 * comments. */
static int put_renamed(sbuf *b, const char *t, size_t n, const char *pre)
{
    size_t i = 0;
    while (i < n && !b->st) {
        size_t j = i;
        char c = t[i];
        if (c == '"' || c == '[') {
            char close = c == '"' ? '"' : ']';
            j++;
            while (j < n && t[j] != close)
                j += t[j] == '\\' && j + 1 < n ? 2 : 1;
            j = j < n ? j + 1 : n;
        } else if (c == '<') {
            while (j < n && t[j] != '>')
                j++;
            j = j < n ? j + 1 : n;
        } else if (c == '{') {
            while (j < n && t[j] != '}')
                j++;
            j = j < n ? j + 1 : n;
        } else if (c == '#') {
            while (j < n && t[j] != '\n' && t[j] != '\r')
                j++;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-') {
            while (j < n && ((t[j] >= 'a' && t[j] <= 'z') || (t[j] >= 'A' && t[j] <= 'Z') ||
                             (t[j] >= '0' && t[j] <= '9') || t[j] == '-'))
                j++;
            sb_puts(b, pre);
        } else {
            j++;
        }
        sb_put(b, t + i, j - i);
        i = j;
    }
    return !b->st;
}

/* Checks one string of a tag or a trigger: valid UTF-8, and non-empty
 * unless `may_be_empty`. */
static sift_status check_str(const char *s, const char *what, size_t i, const char *field,
                             int may_be_empty, sift_error *err)
{
    char name[64];
    snprintf(name, sizeof name, field ? "%s[%zu].%s" : "%s[%zu]", what, i, field ? field : "");
    if (!s)
        return sift__fail_at(err, SIFT_E_ARG, (int64_t)i, "%s: NULL", name);
    size_t n = strlen(s), bad = 0;
    if (!n && !may_be_empty)
        return sift__fail_at(err, SIFT_E_ARG, (int64_t)i, "%s: empty", name);
    if (!sift__utf8_valid((const unsigned char *)s, n, &bad)) {
        sift__fail_at(err, SIFT_E_ARG, (int64_t)i, "%s, offset %zu: invalid UTF-8", name, bad);
        if (err)
            err->offset = (int64_t)bad;
        return SIFT_E_ARG;
    }
    return SIFT_OK;
}

static int starts_with(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* Appends tag i's body as rules named b<i>-*, after checking it on its
 * own (so that its errors point into its own text). */
static sift_status put_body(sbuf *b, const sift_structural_tag *tag, size_t i,
                            const sift_vocab *vocab, const sift_json_schema_params *sparams,
                            const sift_grammar_params *gp, sift_error *err)
{
    char source[64], pre[32];
    snprintf(pre, sizeof pre, "b%zu-", i);
    sift_status st;
    if (tag->schema) {
        snprintf(source, sizeof source, "tags[%zu].schema", i);
        sift_json_schema_params sp;
        sift_json_schema_params_init(&sp);
        if (sparams) {
            if (sparams->struct_size == 0 || sparams->struct_size > sizeof sp)
                return sift__fail(err, SIFT_E_ARG, "sparams->struct_size is %u (expected 1..%zu)",
                                  (unsigned)sparams->struct_size, sizeof sp);
            memcpy(&sp, sparams, sparams->struct_size);
        }
        sp.source_name = source;
        sp.allocator = gp->allocator;
        char *text = NULL;
        size_t n = 0;
        st = sift_json_schema_to_gbnf(&text, &n, tag->schema, strlen(tag->schema), &sp, err);
        if (st) {
            if (err)
                err->index = (int64_t)i;
            return st;
        }
        put_renamed(b, text, n, pre);
        sift_json_schema_free_gbnf(text, &sp);
    } else {
        snprintf(source, sizeof source, "tags[%zu].grammar", i);
        sift_grammar_params p = *gp;
        p.source_name = source;
        sift_grammar *g = NULL;
        st = sift_grammar_new(&g, tag->grammar, strlen(tag->grammar), vocab, &p, err);
        sift_grammar_free(g);
        if (st) {
            if (err)
                err->index = (int64_t)i;
            return st;
        }
        put_renamed(b, tag->grammar, strlen(tag->grammar), pre);
        sb_puts(b, "\n");
    }
    return SIFT_OK;
}

/* One tag as `LIT(begin + skip) bI-root LIT(end)`. */
static int put_tag(sbuf *b, const sift_structural_tag *tag, size_t i, size_t skip)
{
    size_t bl = strlen(tag->begin) - skip, el = strlen(tag->end);
    if (bl && (!sb_lit(b, tag->begin + skip, bl) || !sb_puts(b, " ")))
        return 0;
    if (!sb_printf(b, "b%zu-root", i))
        return 0;
    return !el || (sb_puts(b, " ") && sb_lit(b, tag->end, el));
}

/* The free-text rules f-S for every state S (a trie node that is not a
 * leaf) and tr-K for every trigger K. */
static int put_automaton(sbuf *b, const tagc *a, const sift_structural_tag *tags, size_t n_tags,
                         const char *const *trig, size_t n_trig)
{
    for (size_t s = 0; s < a->n_nd && !b->st; s++) {
        if (a->nd[s].trigger >= 0)
            continue;
        sb_printf(b, "f-%zu ::= \"\"", s);
        for (size_t k = 0; k < a->n_sigma; k++) {
            uint32_t c = a->sigma[k];
            int32_t x = a->go[s * a->n_sigma + k];
            if (x == 0)
                continue;
            sb_puts(b, " | \"");
            sb_cp(b, c);
            if (a->nd[x].trigger >= 0)
                sb_printf(b, "\" tr-%d f-0", (int)a->nd[x].trigger);
            else
                sb_printf(b, "\" f-%d", (int)x);
        }
        /* every other character leads back to the root */
        sb_puts(b, " | [^");
        for (size_t k = 0; k < a->n_sigma; k++)
            if (a->go[s * a->n_sigma + k] != 0)
                sb_cp(b, a->sigma[k]);
        sb_puts(b, "] f-0\n");
    }
    for (size_t k = 0; k < n_trig && !b->st; k++) {
        sb_printf(b, "tr-%zu ::=", k);
        int first = 1;
        for (size_t i = 0; i < n_tags; i++) {
            if (!starts_with(tags[i].begin, trig[k]))
                continue;
            sb_puts(b, first ? " " : " | ");
            first = 0;
            put_tag(b, &tags[i], i, strlen(trig[k]));
        }
        sb_puts(b, "\n");
    }
    return !b->st;
}

sift_status sift_grammar_from_structural_tags(sift_grammar **out, const sift_structural_tag *tags,
                                              size_t n_tags, const char *const *triggers,
                                              size_t n_triggers, const sift_vocab *vocab,
                                              const sift_json_schema_params *sparams,
                                              const sift_grammar_params *gparams, sift_error *err)
{
    if (out)
        *out = NULL;
    if (!out || (!tags && n_tags) || (!triggers && n_triggers))
        return sift__fail(err, SIFT_E_ARG, "sift_grammar_from_structural_tags: NULL argument");
    if (n_tags == 0)
        return sift__fail(err, SIFT_E_ARG, "tags: the list is empty");
    if (n_triggers == 0)
        return sift__fail(err, SIFT_E_ARG, "triggers: the list is empty");
    if (n_tags > SRC_MAX_TAGS)
        return sift__fail(err, SIFT_E_LIMIT, "tags: %zu tags; max %d", n_tags, SRC_MAX_TAGS);
    if (n_triggers > SRC_MAX_TRIGGERS)
        return sift__fail(err, SIFT_E_LIMIT, "triggers: %zu triggers; max %d", n_triggers,
                          SRC_MAX_TRIGGERS);
    sift_grammar_params gp;
    sift_status st = copy_gparams(&gp, gparams, err);
    if (st)
        return st;
    sift__alloc al;
    if ((st = sift__alloc_init(&al, gp.allocator, err)))
        return st;
    /* the strings, one by one, in order */
    size_t trig_bytes = 0;
    for (size_t k = 0; k < n_triggers; k++) {
        if ((st = check_str(triggers[k], "triggers", k, NULL, 0, err)))
            return st;
        trig_bytes += strlen(triggers[k]);
        if (trig_bytes > SRC_MAX_TRIGGER_BYTES)
            return sift__fail_at(err, SIFT_E_LIMIT, (int64_t)k,
                                 "triggers[%zu]: the triggers exceed %zu bytes in all", k,
                                 SRC_MAX_TRIGGER_BYTES);
    }
    for (size_t i = 0; i < n_tags; i++) {
        if ((st = check_str(tags[i].begin, "tags", i, "begin", 0, err)) ||
            (st = check_str(tags[i].end, "tags", i, "end", 1, err)))
            return st;
        if (!tags[i].schema == !tags[i].grammar)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "tags[%zu]: give either a schema or a grammar (%s)", i,
                                 tags[i].schema ? "both are set" : "neither is set");
        size_t k = 0;
        while (k < n_triggers && !starts_with(tags[i].begin, triggers[k]))
            k++;
        if (k == n_triggers)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "tags[%zu].begin: starts with no trigger", i);
    }
    for (size_t k = 0; k < n_triggers; k++) {
        size_t i = 0;
        while (i < n_tags && !starts_with(tags[i].begin, triggers[k]))
            i++;
        if (i == n_tags)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)k,
                                 "triggers[%zu]: no tag's begin starts with it", k);
        for (size_t j = 0; j < n_triggers; j++)
            if (j != k && strstr(triggers[k], triggers[j]) &&
                (j < k || strcmp(triggers[k], triggers[j])))
                return sift__fail_at(err, SIFT_E_ARG, (int64_t)k,
                                     "triggers[%zu]: contains triggers[%zu]; a trigger may not "
                                     "contain another",
                                     k, j);
    }
    tagc a = {.al = &al};
    if ((st = ac_build(&a, triggers, n_triggers, err))) {
        ac_free(&a);
        return st;
    }
    sbuf b = {.al = &al, .max = gp.max_bytes};
    sb_puts(&b, "root ::= tg f-0\ntg ::=");
    for (size_t i = 0; i < n_tags; i++) {
        sb_puts(&b, i ? " | " : " ");
        put_tag(&b, &tags[i], i, 0);
    }
    sb_puts(&b, "\n");
    put_automaton(&b, &a, tags, n_tags, triggers, n_triggers);
    ac_free(&a);
    for (size_t i = 0; i < n_tags && !b.st; i++)
        if ((st = put_body(&b, &tags[i], i, vocab, sparams, &gp, err))) {
            sb_free(&b);
            return st;
        }
    if (b.st) {
        sb_free(&b);
        return b.st == SIFT_E_NOMEM
                   ? sift__fail(err, SIFT_E_NOMEM, "structural tags: out of memory")
                   : sift__fail(err, SIFT_E_GRAMMAR_LIMIT,
                                "structural tags: the grammar exceeds %zu bytes", gp.max_bytes);
    }
    if (!gp.source_name)
        gp.source_name = "the structural tags' GBNF";
    sift_grammar *g = NULL;
    st = sift_grammar_new(&g, b.s, b.n, vocab, &gp, err);
    sb_free(&b);
    if (st)
        return map_gbnf_error(st, SIFT_E_GRAMMAR_LIMIT, "structural tags", "the grammar", err);
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = triggers;
    lp.n_words = n_triggers;
    if ((st = sift_grammar_set_lazy(g, &lp, err))) {
        sift_grammar_free(g);
        return st;
    }
    *out = g;
    return SIFT_OK;
}

/*
 * gbnf_parse.c - the GBNF parser: text -> sift__gbnf (compiled rules).
 *
 * The language, as this parser implements it (after the UTF-8 and NUL
 * checks of the whole text, and after an optional UTF-8 BOM):
 *
 *   grammar      ::= skip-nl (rule skip-nl)*
 *   rule         ::= name ws "::=" skip-nl alternates (newline | end)
 *   alternates   ::= sequence (ws "|" skip-nl sequence)*
 *   sequence     ::= (item ws)*                       -- may be empty
 *   item         ::= primary postfix*
 *   primary      ::= literal | class | "." | name | token
 *                  | "(" skip-nl alternates skip-nl ")"
 *   postfix      ::= "*" | "+" | "?"
 *                  | "{" ws int ws ( "}" | "," ws int? ws "}" )
 *   literal      ::= '"' (char | escape)* '"'          -- raw newlines allowed
 *   class        ::= "[" "^"? (citem)* "]"
 *   citem        ::= cchar ("-" cchar)?                 -- "-" before "]" is literal
 *   token        ::= "!"? "<" ( "[" int "]" | text ) ">" -- text keeps its <>
 *   escape       ::= "\x" hex{2} | "\u" hex{4} | "\U" hex{8}
 *                  | "\" [tnr\\"[\]-]
 *   name         ::= [A-Za-z0-9-]+
 *   ws           ::= ([ \t] | comment)*   -- inside ( ) newlines count too
 *   skip-nl      ::= ([ \t\r\n] | comment)*
 *   comment      ::= "#" [^\r\n]*
 *   newline      ::= "\n" | "\r\n" | "\r"
 *
 * A top-level newline ends a rule, so a rule continues on the next line
 * only after "::=", after "|", or inside parentheses (as in llama.cpp).
 *
 * Compiled form: every rule is a run of elements, alternative ALT
 * alternative ... END, in one array. Literals become one CHAR per code
 * point, classes one CLASS element (sorted merged ranges), groups a
 * helper rule, and repetitions are rewritten exactly as llama.cpp does
 * (S{m,n}: m inline copies of S, then n-m nested optional helpers; S{m,}:
 * m copies and R ::= S R | ), so repetition limits and nested-repetition
 * products agree with it (2000, counted with the same symbol numbering).
 *
 * Invariants and decisions (docs/grammar.md):
 * - No recursion: groups are parsed with an explicit gp_frame stack capped
 *   at SIFT__GBNF_MAX_NESTING; the nullable and left-recursion analyses
 *   are worklist algorithms.
 * - Every error is reported once (the first wins) with source:line:col,
 *   columns in code points from 1, a BOM not counted.
 * - A rule defined twice, a reversed range and an empty class "[]" are
 *   errors; "[^]" is any code point. Left recursion, including through
 *   nullable prefixes, is an error that names the rule path; nullable
 *   repetitions such as ("")* and ( [x]* )* are accepted (their cycle is
 *   made of tail references through a repetition helper, which the
 *   matcher's merged stacks close; gbnf_check.c says why).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "gbnf_parse.h"

/* ------------------------------------------------------------------ */
/* Growable arrays through the object's allocator                      */
/* ------------------------------------------------------------------ */

static int vec_reserve(const sift__alloc *al, gp_vec *v, size_t esz, size_t need)
{
    return sift__reserve(al, &v->p, &v->cap, v->n, need, esz, 16) == SIFT_OK;
}

static void vec_free(const sift__alloc *al, gp_vec *v)
{
    sift__free(al, v->p);
    memset(v, 0, sizeof *v);
}

/* ------------------------------------------------------------------ */
/* Parser state                                                        */
/* ------------------------------------------------------------------ */

/* 1-based line and column (code points) of byte offset `off`. */
static void line_col(const gp_state *p, size_t off, int32_t *line, int32_t *col)
{
    if (p->map) {
        p->map(p->map_user, off > p->n ? p->n : off, line, col);
        return;
    }
    int32_t ln = 1;
    size_t start = p->bom;
    if (off > p->n)
        off = p->n;
    for (size_t i = p->bom; i < off; i++) {
        if (p->s[i] == '\n' || (p->s[i] == '\r' && (i + 1 >= p->n || p->s[i + 1] != '\n'))) {
            ln++;
            start = i + 1;
        }
    }
    int32_t c = 1;
    for (size_t i = start; i < off; i++)
        c += (p->s[i] & 0xC0) != 0x80;
    *line = ln;
    *col = c;
}

void sift__gp_fmt_lc(const gp_state *p, size_t off, char *buf, size_t cap)
{
    int32_t l, c;
    line_col(p, off, &l, &c);
    snprintf(buf, cap, "%d:%d", (int)l, (int)c);
}

/* Reports an error at byte offset `off` (SIZE_MAX = no position). Only
 * the first error is kept. Returns the status. */
sift_status sift__gp_perr(gp_state *p, size_t off, sift_status code, const char *fmt, ...)
{
    if (p->st)
        return p->st;
    p->st = code;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!p->err)
        return code;
    if (off == SIZE_MAX) {
        sift__fail(p->err, code, "%s: %s", p->src, msg);
    } else {
        int32_t l, c;
        line_col(p, off, &l, &c);
        sift__fail(p->err, code, "%s:%d:%d: %s", p->src, (int)l, (int)c, msg);
        p->err->line = l;
        p->err->column = c;
        p->err->offset = (int64_t)off;
    }
    sift__strlcpy_utf8(p->err->source, p->src, sizeof p->err->source);
    return code;
}

sift_status sift__gp_nomem(gp_state *p)
{
    return sift__gp_perr(p, SIZE_MAX, SIFT_E_NOMEM, "out of memory while building the grammar");
}

/* ------------------------------------------------------------------ */
/* Symbols                                                             */
/* ------------------------------------------------------------------ */

static uint64_t name_hash(const unsigned char *s, size_t n)
{
    return sift__fnv(0, s, n);
}

static int ht_grow(gp_state *p)
{
    size_t cap = p->ht_cap ? p->ht_cap * 2 : 64;
    uint32_t *ht = sift__malloc(p->al, cap, sizeof *ht);
    if (!ht)
        return 0;
    memset(ht, 0xff, cap * sizeof *ht);
    for (uint32_t id = 0; id < p->rules.n; id++) {
        gp_rule *r = sift__gp_rule(p, id);
        if (r->kind != RK_NAMED)
            continue;
        size_t h = (size_t)name_hash(p->s + r->name_off, r->name_len) & (cap - 1);
        while (ht[h] != UINT32_MAX)
            h = (h + 1) & (cap - 1);
        ht[h] = id;
    }
    sift__free(p->al, p->ht);
    p->ht = ht;
    p->ht_cap = cap;
    return 1;
}

/* A new rule id (symbol), numbered in order of first sight as llama.cpp
 * does; UINT32_MAX on failure. */
static uint32_t new_rule(gp_state *p, uint8_t kind, size_t pos)
{
    if (!vec_reserve(p->al, &p->rules, sizeof(gp_rule), p->rules.n + 1)) {
        sift__gp_nomem(p);
        return UINT32_MAX;
    }
    gp_rule *r = sift__gp_rule(p, (uint32_t)p->rules.n);
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->pos = pos;
    r->use = SIZE_MAX;
    return (uint32_t)p->rules.n++;
}

/* The id of name s[off..off+len), created at first sight. */
static uint32_t symbol(gp_state *p, size_t off, size_t len)
{
    if ((p->rules.n + 1) * 2 > p->ht_cap && !ht_grow(p)) {
        sift__gp_nomem(p);
        return UINT32_MAX;
    }
    size_t h = (size_t)name_hash(p->s + off, len) & (p->ht_cap - 1);
    for (; p->ht[h] != UINT32_MAX; h = (h + 1) & (p->ht_cap - 1)) {
        gp_rule *r = sift__gp_rule(p, p->ht[h]);
        if (r->name_len == len && memcmp(p->s + r->name_off, p->s + off, len) == 0)
            return p->ht[h];
    }
    uint32_t id = new_rule(p, RK_NAMED, off);
    if (id == UINT32_MAX)
        return id;
    sift__gp_rule(p, id)->name_off = off;
    sift__gp_rule(p, id)->name_len = len;
    p->ht[h] = id;
    return id;
}

/* Appends a finished rule's elements to the arena. */
static int define(gp_state *p, uint32_t id, const sift__gelem *e, size_t n)
{
    if (!vec_reserve(p->al, &p->arena, sizeof *e, p->arena.n + n)) {
        sift__gp_nomem(p);
        return 0;
    }
    gp_rule *r = sift__gp_rule(p, id);
    r->off = (uint32_t)p->arena.n;
    r->len = (uint32_t)n;
    r->defined = 1;
    if (n) /* an empty rule may come with no array */
        memcpy((sift__gelem *)p->arena.p + p->arena.n, e, n * sizeof *e);
    p->arena.n += n;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Lexical helpers                                                     */
/* ------------------------------------------------------------------ */

static int at_end(const gp_state *p)
{
    return p->i >= p->n;
}

static int peek(const gp_state *p, size_t k)
{
    return p->i + k < p->n ? p->s[p->i + k] : -1;
}

static int is_name_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* Skips blanks and comments; newlines too when nl is set. */
static void skip(gp_state *p, int nl)
{
    while (!at_end(p)) {
        int c = p->s[p->i];
        if (c == ' ' || c == '\t') {
            p->i++;
        } else if (c == '#') {
            while (!at_end(p) && p->s[p->i] != '\n' && p->s[p->i] != '\r')
                p->i++;
        } else if (nl && (c == '\n' || c == '\r')) {
            p->i++;
        } else {
            break;
        }
    }
}

/* Decodes one UTF-8 sequence at p->i (the text was validated, so the
 * decoder always finds one). */
static uint32_t decode(gp_state *p)
{
    uint32_t c = 0;
    size_t k = sift__utf8_decode(p->s + p->i, p->n - p->i, &c);
    p->i += k ? k : 1;
    return c;
}

/* One character of a literal or class, escapes resolved. The caller has
 * checked that p->i is not at the end. Returns UINT32_MAX on error. */
static uint32_t parse_char(gp_state *p)
{
    if (p->s[p->i] != '\\')
        return decode(p);
    size_t at = p->i;
    int e = peek(p, 1);
    if (e < 0) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "escape '\\' at the end of the grammar");
        return UINT32_MAX;
    }
    int digits = 0;
    switch (e) {
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    case 't': p->i += 2; return '\t';
    case 'n': p->i += 2; return '\n';
    case 'r': p->i += 2; return '\r';
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-': p->i += 2; return (uint32_t)e;
    default: {
        size_t save = p->i;
        p->i++;
        uint32_t c = decode(p);
        p->i = save;
        char buf[8];
        if (c >= 0x20 && c < 0x7F)
            snprintf(buf, sizeof buf, "%c", (int)c);
        else
            snprintf(buf, sizeof buf, "U+%04X", (unsigned)c);
        sift__gp_perr(
            p, at, SIFT_E_GRAMMAR_SYNTAX,
            "unknown escape '\\%s' (known: \\x \\u \\U \\t \\n \\r \\\\ \\\" \\[ \\] \\-)", buf);
        return UINT32_MAX;
    }
    }
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        int h = sift__hex_digit(peek(p, 2 + (size_t)k));
        if (h < 0) {
            sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "escape '\\%c' needs exactly %d hex digits",
                          e, digits);
            return UINT32_MAX;
        }
        v = v * 16 + (uint32_t)h;
    }
    if (v > 0x10FFFF) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "escape '\\%c%0*X' is beyond U+10FFFF", e,
                      digits, (unsigned)v);
        return UINT32_MAX;
    }
    if (v >= 0xD800 && v <= 0xDFFF) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX,
                      "escape '\\%c%0*X' is a UTF-16 surrogate, not a character", e, digits,
                      (unsigned)v);
        return UINT32_MAX;
    }
    p->i += 2 + (size_t)digits;
    return v;
}

/* Parses a decimal integer at p->i; values above 10^9 are reported as
 * "too large" (they exceed every limit anyway). */
static int parse_int(gp_state *p, uint64_t *out)
{
    size_t at = p->i;
    uint64_t v = 0;
    int big = 0;
    if (peek(p, 0) < '0' || peek(p, 0) > '9') {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "expected an integer");
        return 0;
    }
    while (peek(p, 0) >= '0' && peek(p, 0) <= '9') {
        v = v * 10 + (uint64_t)(p->s[p->i] - '0');
        if (v > 1000000000u)
            big = 1, v = 1000000001u;
        p->i++;
    }
    if (big) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "integer %.*s is too large", (int)(p->i - at),
                      (const char *)p->s + at);
        return 0;
    }
    *out = v;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Building the current sequence                                       */
/* ------------------------------------------------------------------ */

static gp_frame *top(gp_state *p)
{
    return &p->fr[p->n_fr - 1];
}

static int budget(gp_state *p, size_t more)
{
    if (more > SIFT__GBNF_MAX_ELEMENTS || p->n_elems + more > SIFT__GBNF_MAX_ELEMENTS) {
        sift__gp_perr(p, p->i, SIFT_E_GRAMMAR_LIMIT, "grammar expands to more than %u elements",
                      (unsigned)SIFT__GBNF_MAX_ELEMENTS);
        return 0;
    }
    p->n_elems += more;
    return 1;
}

static int emit(gp_state *p, uint32_t type, uint32_t v)
{
    gp_frame *f = top(p);
    if (!budget(p, 1))
        return 0;
    if (!vec_reserve(p->al, &f->buf, sizeof(sift__gelem), f->buf.n + 1)) {
        sift__gp_nomem(p);
        return 0;
    }
    sift__gelem *e = (sift__gelem *)f->buf.p + f->buf.n++;
    e->type = type;
    e->v = v;
    return 1;
}

static int push_frame(gp_state *p, uint32_t rule, size_t open)
{
    /* New frames are zero: their buffers are empty until first used. */
    if (sift__reserve(p->al, &p->fr, &p->cap_fr, p->n_fr, p->n_fr + 1, sizeof *p->fr, 8)) {
        sift__gp_nomem(p);
        return 0;
    }
    gp_frame *f = &p->fr[p->n_fr++];
    /* buffers of frames that were popped are kept for reuse */
    f->buf.n = 0;
    f->rule = rule;
    f->open = open;
    f->last = SIZE_MAX;
    f->prev = 1;
    f->sym_open = 0;
    return 1;
}

/* Rewrites the last item S of the current sequence for S{m,n} (n =
 * UINT64_MAX: unbounded), at byte offset `at` (the postfix). */
static int repeat(gp_state *p, uint64_t m, uint64_t n, size_t at)
{
    gp_frame *f = top(p);
    if (f->last == SIZE_MAX || f->last >= f->buf.n) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "repetition with no preceding item");
        return 0;
    }
    int unbounded = n == UINT64_MAX;
    if (m > SIFT__GBNF_MAX_REPETITION || (!unbounded && n > SIFT__GBNF_MAX_REPETITION)) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_LIMIT, "repetition count %llu exceeds %d",
                      (unsigned long long)(m > SIFT__GBNF_MAX_REPETITION ? m : n),
                      SIFT__GBNF_MAX_REPETITION);
        return 0;
    }
    if (!unbounded && n < m) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX,
                      "repetition {%llu,%llu} has its maximum below its minimum",
                      (unsigned long long)m, (unsigned long long)n);
        return 0;
    }
    /* llama.cpp's guard against nested explosions: the product of the
     * symbols behind the item and this repetition's count. */
    uint64_t total = !unbounded && n > 0 ? n : (m > 0 ? m : 1);
    if (f->prev * total >= SIFT__GBNF_MAX_REPETITION) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_LIMIT, "repetition expands to %llu copies (>= %d)",
                      (unsigned long long)(f->prev * total), SIFT__GBNF_MAX_REPETITION);
        return 0;
    }
    f->prev *= total;

    size_t L = f->buf.n - f->last;
    /* The scratch holds S and then one helper (S [ref] ALT END), reserved
     * here once, before S is copied: a grow keeps only tmp.n elements, so
     * a reserve after the copy would lose S and the helpers would get
     * whatever the new block held. */
    if (!vec_reserve(p->al, &p->tmp, sizeof(sift__gelem), 2 * L + 3)) {
        sift__gp_nomem(p);
        return 0;
    }
    sift__gelem *S = p->tmp.p;
    memcpy(S, (sift__gelem *)f->buf.p + f->last, L * sizeof *S);
    p->tmp.n = L;
    p->n_elems -= L;
    f->buf.n = f->last;
    if (m > 0 && (!budget(p, (size_t)m * L) ||
                  !vec_reserve(p->al, &f->buf, sizeof *S, f->buf.n + (size_t)m * L))) {
        if (!p->st)
            sift__gp_nomem(p);
        return 0;
    }
    for (uint64_t k = 0; k < m; k++) {
        memcpy((sift__gelem *)f->buf.p + f->buf.n, S, L * sizeof *S);
        f->buf.n += L;
    }
    uint64_t n_opt = unbounded ? 1 : n - m;
    uint32_t last_id = 0;
    for (uint64_t k = 0; k < n_opt; k++) {
        uint32_t id = new_rule(p, RK_REPEAT, at);
        if (id == UINT32_MAX)
            return 0;
        /* helper: S [ref] ALT END */
        size_t hl = L + 3;
        if (!budget(p, hl))
            return 0;
        sift__gelem *h = S + L;
        memcpy(h, S, L * sizeof *S);
        size_t k2 = L;
        if (k > 0 || unbounded) {
            h[k2].type = SIFT__G_REF;
            h[k2++].v = unbounded ? id : last_id;
        }
        h[k2].type = SIFT__G_ALT;
        h[k2++].v = 0;
        h[k2].type = SIFT__G_END;
        h[k2++].v = 0;
        p->n_elems -= hl - k2; /* budgeted L + 3, used k2 */
        if (!define(p, id, h, k2))
            return 0;
        last_id = id;
    }
    if (n_opt > 0 && !emit(p, SIFT__G_REF, last_id))
        return 0;
    /* The rewritten item stays "the last item" for a following postfix
     * only in llama.cpp's sense: the whole rewritten run. */
    return 1;
}

/* Sorts and merges p->crng (pairs) and appends a class; returns its index
 * or UINT32_MAX. */
static int cmp_pair(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

static uint32_t add_class(gp_state *p, int neg)
{
    uint32_t *r = p->crng.p;
    size_t n = p->crng.n / 2;
    qsort(r, n, 2 * sizeof *r, cmp_pair);
    size_t m = 0;
    for (size_t k = 0; k < n; k++) {
        if (m > 0 && r[2 * k] <= r[2 * (m - 1) + 1] + 1) {
            if (r[2 * k + 1] > r[2 * (m - 1) + 1])
                r[2 * (m - 1) + 1] = r[2 * k + 1];
        } else {
            r[2 * m] = r[2 * k];
            r[2 * m + 1] = r[2 * k + 1];
            m++;
        }
    }
    if (!vec_reserve(p->al, &p->rng, sizeof(uint32_t), p->rng.n + 2 * m) ||
        !vec_reserve(p->al, &p->cls, sizeof(sift__gclass), p->cls.n + 1)) {
        sift__gp_nomem(p);
        return UINT32_MAX;
    }
    sift__gclass *k = (sift__gclass *)p->cls.p + p->cls.n;
    memset(k, 0, sizeof *k);
    k->first = (uint32_t)(p->rng.n / 2);
    k->n = (uint32_t)m;
    k->neg = (uint32_t)neg;
    if (m) /* an empty class: rng may still be unallocated */
        memcpy((uint32_t *)p->rng.p + p->rng.n, r, 2 * m * sizeof *r);
    p->rng.n += 2 * m;
    for (size_t j = 0; j < m; j++)
        for (uint32_t c = r[2 * j]; c <= r[2 * j + 1] && c < 128; c++)
            k->ascii[c >> 6] |= (uint64_t)1 << (c & 63);
    if (neg) {
        k->ascii[0] = ~k->ascii[0];
        k->ascii[1] = ~k->ascii[1];
    }
    return (uint32_t)p->cls.n++;
}

static int parse_class(gp_state *p)
{
    size_t open = p->i;
    p->i++;
    int neg = 0;
    if (peek(p, 0) == '^')
        neg = 1, p->i++;
    p->crng.n = 0;
    for (;;) {
        if (at_end(p)) {
            sift__gp_perr(p, open, SIFT_E_GRAMMAR_SYNTAX,
                          "unterminated character class (no ']' before the end of the text)");
            return 0;
        }
        if (p->s[p->i] == ']')
            break;
        size_t at = p->i;
        uint32_t lo = parse_char(p), hi = lo;
        if (lo == UINT32_MAX)
            return 0;
        if (peek(p, 0) == '-' && peek(p, 1) != ']') {
            p->i++;
            if (at_end(p)) {
                sift__gp_perr(p, open, SIFT_E_GRAMMAR_SYNTAX,
                              "unterminated character class (no ']' before the end of the text)");
                return 0;
            }
            hi = parse_char(p);
            if (hi == UINT32_MAX)
                return 0;
            if (hi < lo) {
                sift__gp_perr(
                    p, at, SIFT_E_GRAMMAR_SYNTAX,
                    "reversed range U+%04X-U+%04X in a character class (write the smaller "
                    "bound first)",
                    (unsigned)lo, (unsigned)hi);
                return 0;
            }
        }
        if (!vec_reserve(p->al, &p->crng, sizeof(uint32_t), p->crng.n + 2)) {
            sift__gp_nomem(p);
            return 0;
        }
        ((uint32_t *)p->crng.p)[p->crng.n++] = lo;
        ((uint32_t *)p->crng.p)[p->crng.n++] = hi;
    }
    p->i++; /* ] */
    if (p->crng.n == 0) {
        if (!neg) {
            sift__gp_perr(p, open, SIFT_E_GRAMMAR_SYNTAX,
                          "empty character class '[]' matches nothing");
            return 0;
        }
        top(p)->last = top(p)->buf.n;
        return emit(p, SIFT__G_ANY, 0);
    }
    uint32_t k = add_class(p, neg);
    if (k == UINT32_MAX)
        return 0;
    top(p)->last = top(p)->buf.n;
    return emit(p, SIFT__G_CLASS, k);
}

static int parse_literal(gp_state *p)
{
    size_t open = p->i;
    p->i++;
    top(p)->last = top(p)->buf.n;
    for (;;) {
        if (at_end(p)) {
            sift__gp_perr(
                p, open, SIFT_E_GRAMMAR_SYNTAX,
                "unterminated string literal (no closing '\"' before the end of the text)");
            return 0;
        }
        if (p->s[p->i] == '"')
            break;
        uint32_t c = parse_char(p);
        if (c == UINT32_MAX || !emit(p, SIFT__G_CHAR, c))
            return 0;
    }
    p->i++;
    return 1;
}

/* A token reference without a vocabulary. For a caller that only checks
 * the grammar (needs_vocab set) it compiles to a stand-in, token 0, and
 * the parse goes on, so the grammar's own errors after it are still
 * found; that caller must not sample with the result. For every other
 * caller it is the error. */
static int no_vocab_token(gp_state *p, size_t at, int neg)
{
    if (!p->needs_vocab) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX,
                      "token references need a vocabulary (none was given)");
        return 0;
    }
    *p->needs_vocab = 1;
    top(p)->last = top(p)->buf.n;
    return emit(p, neg ? SIFT__G_TOKEN_NOT : SIFT__G_TOKEN, 0);
}

static int parse_token(gp_state *p)
{
    size_t at = p->i;
    int neg = 0;
    if (peek(p, 0) == '!') {
        neg = 1;
        p->i++;
        if (peek(p, 0) != '<') {
            sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX,
                          "expected '<' after '!' (a token exclusion)");
            return 0;
        }
    }
    size_t lt = p->i;
    int32_t id = -1;
    if (peek(p, 1) == '[') {
        p->i += 2;
        uint64_t v;
        size_t num = p->i;
        if (!parse_int(p, &v))
            return 0;
        if (peek(p, 0) != ']' || peek(p, 1) != '>') {
            sift__gp_perr(p, p->i, SIFT_E_GRAMMAR_SYNTAX, "expected ']>' to close the token id");
            return 0;
        }
        p->i += 2;
        if (!p->vocab)
            return no_vocab_token(p, at, neg);
        if (v >= (uint64_t)sift_vocab_size(p->vocab)) {
            sift__gp_perr(p, num, SIFT_E_GRAMMAR_SYNTAX, "token id %llu out of range [0, %d)",
                          (unsigned long long)v, (int)sift_vocab_size(p->vocab));
            return 0;
        }
        id = (int32_t)v;
    } else {
        size_t k = p->i + 1;
        while (k < p->n && p->s[k] != '>' && p->s[k] != '\n' && p->s[k] != '\r')
            k++;
        if (k >= p->n || p->s[k] != '>') {
            sift__gp_perr(p, lt, SIFT_E_GRAMMAR_SYNTAX,
                          "unterminated token reference (no '>' on this line)");
            return 0;
        }
        size_t tl = k + 1 - lt;
        p->i = k + 1;
        if (!p->vocab)
            return no_vocab_token(p, at, neg);
        /* The piece must equal the text exactly; a special token wins over
         * an ordinary one with the same bytes. */
        int32_t V = sift_vocab_size(p->vocab);
        for (int32_t t = 0; t < V; t++) {
            const char *b;
            size_t bl;
            if (sift_vocab_piece(p->vocab, t, &b, &bl, NULL) == SIFT_OK && bl == tl &&
                memcmp(b, p->s + lt, tl) == 0) {
                if (id < 0 || ((sift_vocab_attr(p->vocab, t) & SIFT_TOKEN_SPECIAL) &&
                               !(sift_vocab_attr(p->vocab, id) & SIFT_TOKEN_SPECIAL)))
                    id = t;
            }
        }
        if (id < 0) {
            sift__gp_perr(p, lt, SIFT_E_GRAMMAR_SYNTAX,
                          "no token of the vocabulary is exactly '%.*s'", (int)(tl > 64 ? 64 : tl),
                          (const char *)p->s + lt);
            return 0;
        }
    }
    top(p)->last = top(p)->buf.n;
    return emit(p, neg ? SIFT__G_TOKEN_NOT : SIFT__G_TOKEN, (uint32_t)id);
}

static int parse_braces(gp_state *p, int nl)
{
    size_t at = p->i;
    p->i++;
    skip(p, nl);
    uint64_t m, n;
    if (!parse_int(p, &m))
        return 0;
    skip(p, nl);
    if (peek(p, 0) == '}') {
        n = m;
    } else if (peek(p, 0) == ',') {
        p->i++;
        skip(p, nl);
        n = UINT64_MAX;
        if (peek(p, 0) >= '0' && peek(p, 0) <= '9') {
            if (!parse_int(p, &n))
                return 0;
            skip(p, nl);
        }
        if (peek(p, 0) != '}') {
            sift__gp_perr(p, p->i, SIFT_E_GRAMMAR_SYNTAX, "expected '}' to close the repetition");
            return 0;
        }
    } else {
        sift__gp_perr(p, p->i, SIFT_E_GRAMMAR_SYNTAX, "expected ',' or '}' in the repetition");
        return 0;
    }
    p->i++;
    return repeat(p, m, n, at);
}

/* Closes the innermost group gp_frame: defines its rule and references it
 * from the parent. */
static int close_group(gp_state *p)
{
    gp_frame *f = top(p);
    if (!emit(p, SIFT__G_END, 0) || !define(p, f->rule, f->buf.p, f->buf.n))
        return 0;
    p->n_elems -= f->buf.n; /* now counted in the arena */
    p->n_elems += f->buf.n;
    uint32_t id = f->rule;
    uint64_t prev = p->rules.n - f->sym_open;
    /* keep the gp_frame's buffer for reuse: swap it to the slot past the end */
    p->n_fr--;
    gp_frame *g = top(p);
    g->last = g->buf.n;
    if (!emit(p, SIFT__G_REF, id))
        return 0;
    g->prev = prev ? prev : 1;
    return 1;
}

/* A rule name used in a body: a reference to it (its first use kept for
 * messages about undefined rules). */
static int parse_ref(gp_state *p)
{
    size_t e = p->i;
    while (e < p->n && is_name_char(p->s[e]))
        e++;
    if (e < p->n && p->s[e] == '_') {
        sift__gp_perr(p, e, SIFT_E_GRAMMAR_SYNTAX,
                      "'_' is not allowed in rule names (use letters, digits and '-')");
        return 0;
    }
    uint32_t id = symbol(p, p->i, e - p->i);
    if (id == UINT32_MAX)
        return 0;
    if (sift__gp_rule(p, id)->use == SIZE_MAX)
        sift__gp_rule(p, id)->use = p->i;
    p->i = e;
    top(p)->last = top(p)->buf.n;
    top(p)->prev = 1;
    return emit(p, SIFT__G_REF, id);
}

/* '(' at `at`: a new group rule with its own gp_frame, within the nesting
 * limit. */
static int open_group(gp_state *p, size_t at)
{
    /* n_fr counts the rule's own gp_frame: the new group is at depth n_fr */
    if (p->n_fr > SIFT__GBNF_MAX_NESTING) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_LIMIT, "nesting depth %zu exceeds %d", p->n_fr,
                      SIFT__GBNF_MAX_NESTING);
        return 0;
    }
    uint32_t sym_open = (uint32_t)p->rules.n;
    uint32_t id = new_rule(p, RK_GROUP, at);
    if (id == UINT32_MAX || !push_frame(p, id, at))
        return 0;
    top(p)->sym_open = sym_open;
    p->i++;
    return 1;
}

/* Parses one rule's alternatives, groups included, iteratively. */
static int parse_body(gp_state *p)
{
    for (;;) {
        int nested = p->n_fr > 1;
        skip(p, nested);
        if (at_end(p)) {
            if (nested) {
                char lc[32];
                sift__gp_fmt_lc(p, top(p)->open, lc, sizeof lc);
                sift__gp_perr(p, p->i, SIFT_E_GRAMMAR_SYNTAX, "expected ')' (group opened at %s)",
                              lc);
                return 0;
            }
            return 1;
        }
        int c = p->s[p->i];
        size_t at = p->i;
        if (c == '"') {
            if (!parse_literal(p))
                return 0;
            top(p)->prev = 1;
        } else if (c == '[') {
            if (!parse_class(p))
                return 0;
            top(p)->prev = 1;
        } else if (c == '.') {
            p->i++;
            top(p)->last = top(p)->buf.n;
            top(p)->prev = 1;
            if (!emit(p, SIFT__G_ANY, 0))
                return 0;
        } else if (c == '<' || c == '!') {
            if (!parse_token(p))
                return 0;
            top(p)->prev = 1;
        } else if (is_name_char(c)) {
            if (!parse_ref(p))
                return 0;
        } else if (c == '(') {
            if (!open_group(p, at))
                return 0;
        } else if (c == ')') {
            if (!nested) {
                sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "unexpected ')' with no open group");
                return 0;
            }
            p->i++;
            if (!close_group(p))
                return 0;
        } else if (c == '|') {
            p->i++;
            top(p)->last = SIZE_MAX;
            if (!emit(p, SIFT__G_ALT, 0))
                return 0;
            skip(p, 1);
        } else if (c == '*' || c == '+' || c == '?') {
            p->i++;
            if (!repeat(p, c == '+' ? 1 : 0, c == '?' ? 1 : UINT64_MAX, at))
                return 0;
        } else if (c == '{') {
            if (!parse_braces(p, nested))
                return 0;
        } else if (!nested && (c == '\n' || c == '\r')) {
            return 1;
        } else if (nested) {
            char lc[32];
            sift__gp_fmt_lc(p, top(p)->open, lc, sizeof lc);
            sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "expected ')' (group opened at %s)", lc);
            return 0;
        } else {
            sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "expected newline or end");
            return 0;
        }
    }
}

static int parse_rule(gp_state *p)
{
    size_t at = p->i;
    size_t e = p->i;
    while (e < p->n && is_name_char(p->s[e]))
        e++;
    if (e == at) {
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "expected a rule name");
        return 0;
    }
    if (e < p->n && p->s[e] == '_') {
        sift__gp_perr(p, e, SIFT_E_GRAMMAR_SYNTAX,
                      "'_' is not allowed in rule names (use letters, digits and '-')");
        return 0;
    }
    uint32_t id = symbol(p, at, e - at);
    if (id == UINT32_MAX)
        return 0;
    p->i = e;
    skip(p, 0);
    if (!(peek(p, 0) == ':' && peek(p, 1) == ':' && peek(p, 2) == '=')) {
        sift__gp_perr(p, p->i, SIFT_E_GRAMMAR_SYNTAX, "expected '::='");
        return 0;
    }
    if (sift__gp_rule(p, id)->defined) {
        char lc[32];
        sift__gp_fmt_lc(p, sift__gp_rule(p, id)->pos, lc, sizeof lc);
        sift__gp_perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "rule '%.*s' is defined twice (first at %s)",
                      (int)(e - at), (const char *)p->s + at, lc);
        return 0;
    }
    sift__gp_rule(p, id)->pos = at;
    p->i += 3;
    skip(p, 1);
    p->n_fr = 0;
    if (!push_frame(p, id, at) || !parse_body(p))
        return 0;
    gp_frame *f = top(p);
    if (!emit(p, SIFT__G_END, 0) || !define(p, id, f->buf.p, f->buf.n))
        return 0;
    p->n_fr = 0;
    return 1;
}

/* First invalid UTF-8 byte or NUL, whichever comes first; returns its
 * offset or SIZE_MAX. */
static size_t first_bad_byte(const unsigned char *s, size_t n, int *is_nul)
{
    size_t bad;
    int ok = sift__utf8_valid(s, n, &bad);
    const unsigned char *nul = memchr(s, 0, bad);
    *is_nul = nul != NULL;
    if (nul)
        return (size_t)(nul - s);
    return ok ? SIZE_MAX : bad;
}

static void p_free(gp_state *p)
{
    vec_free(p->al, &p->arena);
    vec_free(p->al, &p->rules);
    vec_free(p->al, &p->cls);
    vec_free(p->al, &p->rng);
    vec_free(p->al, &p->tmp);
    vec_free(p->al, &p->crng);
    sift__free(p->al, p->ht);
    for (size_t k = 0; k < p->cap_fr; k++)
        vec_free(p->al, &p->fr[k].buf);
    sift__free(p->al, p->fr);
}

sift_status sift__gbnf_parse(sift__gbnf *out, const char *text, size_t len, const char *root,
                             const char *source, const sift_vocab *vocab, const sift__alloc *al,
                             sift_error *err)
{
    return sift__gbnf_parse_mapped(out, text, len, root, source, vocab, al, NULL, NULL, NULL, err);
}

sift_status sift__gbnf_parse_mapped(sift__gbnf *out, const char *text, size_t len, const char *root,
                                    const char *source, const sift_vocab *vocab,
                                    const sift__alloc *al,
                                    void (*map)(void *, size_t, int32_t *, int32_t *),
                                    void *map_user, int *needs_vocab, sift_error *err)
{
    gp_state p;
    memset(&p, 0, sizeof p);
    if (needs_vocab)
        *needs_vocab = 0;
    p.needs_vocab = needs_vocab;
    p.map = map;
    p.map_user = map_user;
    p.al = al;
    p.s = (const unsigned char *)text;
    p.n = len;
    p.src = source ? source : "grammar";
    p.err = err;
    p.vocab = vocab;
    if (!root)
        root = "root";
    int is_nul = 0;
    size_t bad = first_bad_byte(p.s, len, &is_nul);
    if (len >= 3 && p.s[0] == 0xEF && p.s[1] == 0xBB && p.s[2] == 0xBF)
        p.bom = 3;
    if (bad != SIZE_MAX) {
        if (is_nul)
            return sift__gp_perr(&p, bad, SIFT_E_GRAMMAR_SYNTAX, "NUL byte in the grammar");
        return sift__gp_perr(&p, bad, SIFT_E_GRAMMAR_SYNTAX, "invalid UTF-8 at byte %zu", bad);
    }
    p.i = p.bom;
    skip(&p, 1);
    while (!at_end(&p)) {
        if (!parse_rule(&p))
            break;
        skip(&p, 1);
    }
    if (!p.st) {
        /* undefined rules: report the earliest use */
        size_t best = SIZE_MAX;
        uint32_t bid = 0;
        int any_named = 0;
        for (uint32_t id = 0; id < p.rules.n; id++) {
            const gp_rule *r = sift__gp_rule(&p, id);
            any_named |= r->kind == RK_NAMED && r->defined;
            if (!r->defined && r->use < best) {
                best = r->use;
                bid = id;
            }
        }
        if (!any_named) {
            sift__gp_perr(&p, SIZE_MAX, SIFT_E_GRAMMAR_UNDEFINED, "grammar defines no rules");
        } else if (best != SIZE_MAX) {
            const gp_rule *r = sift__gp_rule(&p, bid);
            sift__gp_perr(
                &p, best, SIFT_E_GRAMMAR_UNDEFINED, "rule '%.*s' is used but never defined",
                (int)(r->name_len > 64 ? 64 : r->name_len), (const char *)p.s + r->name_off);
        }
    }
    uint32_t root_id = UINT32_MAX;
    if (!p.st) {
        size_t rl = strlen(root);
        for (uint32_t id = 0; id < p.rules.n; id++) {
            const gp_rule *r = sift__gp_rule(&p, id);
            if (r->kind == RK_NAMED && r->name_len == rl &&
                memcmp(p.s + r->name_off, root, rl) == 0)
                root_id = id;
        }
        if (root_id == UINT32_MAX)
            sift__gp_perr(&p, SIZE_MAX, SIFT_E_GRAMMAR_UNDEFINED,
                          "start symbol '%.*s' is not defined", (int)(rl > 64 ? 64 : rl), root);
    }
    if (!p.st && sift__gp_check_compiled(&p))
        sift__gp_check_left_recursion(&p);
    if (!p.st) {
        memset(out, 0, sizeof *out);
        out->rule_start = sift__calloc(al, p.rules.n, sizeof *out->rule_start);
        if (!out->rule_start) {
            sift__gp_nomem(&p);
        } else {
            for (uint32_t id = 0; id < p.rules.n; id++)
                out->rule_start[id] = sift__gp_rule(&p, id)->off;
            out->n_rules = (uint32_t)p.rules.n;
            out->el = p.arena.p;
            out->n_el = p.arena.n;
            out->cls = p.cls.p;
            out->n_cls = (uint32_t)p.cls.n;
            out->rng = p.rng.p;
            out->n_rng = p.rng.n / 2;
            out->root = root_id;
            memset(&p.arena, 0, sizeof p.arena);
            memset(&p.cls, 0, sizeof p.cls);
            memset(&p.rng, 0, sizeof p.rng);
        }
    }
    p_free(&p);
    return p.st;
}

void sift__gbnf_free(sift__gbnf *g, const sift__alloc *al)
{
    if (!g)
        return;
    sift__free(al, g->el);
    sift__free(al, g->rule_start);
    sift__free(al, g->cls);
    sift__free(al, g->rng);
    memset(g, 0, sizeof *g);
}

int sift__gclass_has(const sift__gbnf *g, const sift__gclass *k, uint32_t c)
{
    if (c < 128)
        return (int)((k->ascii[c >> 6] >> (c & 63)) & 1);
    const uint32_t *r = g->rng + 2 * (size_t)k->first;
    size_t lo = 0, hi = k->n;
    int in = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < r[2 * mid])
            hi = mid;
        else if (c > r[2 * mid + 1])
            lo = mid + 1;
        else {
            in = 1;
            break;
        }
    }
    return in != (int)k->neg;
}

int sift__gclass_meets(const sift__gbnf *g, const sift__gclass *k, uint32_t lo, uint32_t hi)
{
    const uint32_t *r = g->rng + 2 * (size_t)k->first;
    if (!k->neg) {
        for (uint32_t j = 0; j < k->n; j++)
            if (r[2 * j] <= hi && lo <= r[2 * j + 1])
                return 1;
        return 0;
    }
    /* negated: some point of [lo, hi] is outside every range */
    uint32_t c = lo;
    for (uint32_t j = 0; j < k->n && c <= hi; j++) {
        if (r[2 * j + 1] < c)
            continue;
        if (r[2 * j] > c)
            return 1;
        if (r[2 * j + 1] >= hi)
            return 0;
        c = r[2 * j + 1] + 1;
    }
    return c <= hi;
}

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
 * - No recursion: groups are parsed with an explicit frame stack capped
 *   at SIFT__GBNF_MAX_NESTING; the nullable and left-recursion analyses
 *   are worklist algorithms.
 * - Every error is reported once (the first wins) with source:line:col,
 *   columns in code points from 1, a BOM not counted.
 * - A rule defined twice, a reversed range and an empty class "[]" are
 *   errors; "[^]" is any code point. Left recursion, including through
 *   nullable prefixes, is an error that names the rule path; nullable
 *   repetitions such as ("")* and ( [x]* )* are accepted (their cycle is
 *   made of tail references through a repetition helper, which the
 *   matcher's merged stacks close; check_left_recursion says why).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "gbnf.h"

/* ------------------------------------------------------------------ */
/* Growable arrays through the object's allocator                      */
/* ------------------------------------------------------------------ */

typedef struct vec {
    void *p;
    size_t n, cap;
} vec;

static int vec_reserve(const sift__alloc *al, vec *v, size_t esz, size_t need)
{
    return sift__reserve(al, &v->p, &v->cap, v->n, need, esz, 16) == SIFT_OK;
}

static void vec_free(const sift__alloc *al, vec *v)
{
    sift__free(al, v->p);
    memset(v, 0, sizeof *v);
}

/* ------------------------------------------------------------------ */
/* Parser state                                                        */
/* ------------------------------------------------------------------ */

enum { RK_NAMED = 0, RK_GROUP = 1, RK_REPEAT = 2 };

typedef struct rinfo {
    uint32_t off, len; /* elements in the arena, once defined */
    uint8_t defined, kind;
    size_t name_off, name_len; /* named: the name in the text */
    size_t pos;                /* named: definition; helpers: where created */
    size_t use;                /* first use, SIZE_MAX if none */
} rinfo;

typedef struct frame {
    vec buf;           /* sift__gelem: this rule's alternatives so far */
    uint32_t rule;     /* rule id this frame defines */
    size_t open;       /* byte offset of "(" (groups) or of the name */
    size_t last;       /* start of the last item in buf, SIZE_MAX = none */
    uint64_t prev;     /* running repetition product of the last item */
    uint32_t sym_open; /* symbols when the group opened (before its own) */
} frame;

typedef struct P {
    const sift__alloc *al;
    const unsigned char *s;
    size_t n, i;
    const char *src;
    sift_error *err;
    sift_status st;
    const sift_vocab *vocab;
    vec arena; /* sift__gelem: finished rules */
    vec rules; /* rinfo */
    vec cls;   /* sift__gclass */
    vec rng;   /* uint32_t pairs */
    vec tmp;   /* sift__gelem scratch (repetition copies) */
    vec crng;  /* uint32_t pairs: ranges of the class being parsed */
    uint32_t *ht;
    size_t ht_cap; /* power of two */
    frame *fr;
    size_t n_fr, cap_fr;
    size_t n_elems; /* elements in arena and frames, for the budget */
    size_t bom;     /* 3 if the text starts with a BOM, else 0 */
    void (*map)(void *, size_t, int32_t *, int32_t *); /* positions in a larger file */
    void *map_user;
    int *needs_vocab; /* set when a token reference finds no vocabulary */
} P;

/* 1-based line and column (code points) of byte offset `off`. */
static void line_col(const P *p, size_t off, int32_t *line, int32_t *col)
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

static void fmt_lc(const P *p, size_t off, char *buf, size_t cap)
{
    int32_t l, c;
    line_col(p, off, &l, &c);
    snprintf(buf, cap, "%d:%d", (int)l, (int)c);
}

/* Reports an error at byte offset `off` (SIZE_MAX = no position). Only
 * the first error is kept. Returns the status. */
static sift_status perr(P *p, size_t off, sift_status code, const char *fmt, ...)
    SIFT__PRINTF(4, 5);
static sift_status perr(P *p, size_t off, sift_status code, const char *fmt, ...)
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

static sift_status nomem(P *p)
{
    return perr(p, SIZE_MAX, SIFT_E_NOMEM, "out of memory while building the grammar");
}

/* ------------------------------------------------------------------ */
/* Symbols                                                             */
/* ------------------------------------------------------------------ */

static uint64_t name_hash(const unsigned char *s, size_t n)
{
    return sift__fnv(0, s, n);
}

static rinfo *R(P *p, uint32_t id)
{
    return (rinfo *)p->rules.p + id;
}

static int ht_grow(P *p)
{
    size_t cap = p->ht_cap ? p->ht_cap * 2 : 64;
    uint32_t *ht = sift__malloc(p->al, cap, sizeof *ht);
    if (!ht)
        return 0;
    memset(ht, 0xff, cap * sizeof *ht);
    for (uint32_t id = 0; id < p->rules.n; id++) {
        rinfo *r = R(p, id);
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
static uint32_t new_rule(P *p, uint8_t kind, size_t pos)
{
    if (!vec_reserve(p->al, &p->rules, sizeof(rinfo), p->rules.n + 1)) {
        nomem(p);
        return UINT32_MAX;
    }
    rinfo *r = R(p, (uint32_t)p->rules.n);
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->pos = pos;
    r->use = SIZE_MAX;
    return (uint32_t)p->rules.n++;
}

/* The id of name s[off..off+len), created at first sight. */
static uint32_t symbol(P *p, size_t off, size_t len)
{
    if ((p->rules.n + 1) * 2 > p->ht_cap && !ht_grow(p)) {
        nomem(p);
        return UINT32_MAX;
    }
    size_t h = (size_t)name_hash(p->s + off, len) & (p->ht_cap - 1);
    for (; p->ht[h] != UINT32_MAX; h = (h + 1) & (p->ht_cap - 1)) {
        rinfo *r = R(p, p->ht[h]);
        if (r->name_len == len && memcmp(p->s + r->name_off, p->s + off, len) == 0)
            return p->ht[h];
    }
    uint32_t id = new_rule(p, RK_NAMED, off);
    if (id == UINT32_MAX)
        return id;
    R(p, id)->name_off = off;
    R(p, id)->name_len = len;
    p->ht[h] = id;
    return id;
}

/* Appends a finished rule's elements to the arena. */
static int define(P *p, uint32_t id, const sift__gelem *e, size_t n)
{
    if (!vec_reserve(p->al, &p->arena, sizeof *e, p->arena.n + n)) {
        nomem(p);
        return 0;
    }
    rinfo *r = R(p, id);
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

static int at_end(const P *p)
{
    return p->i >= p->n;
}

static int peek(const P *p, size_t k)
{
    return p->i + k < p->n ? p->s[p->i + k] : -1;
}

static int is_name_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* Skips blanks and comments; newlines too when nl is set. */
static void skip(P *p, int nl)
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
static uint32_t decode(P *p)
{
    uint32_t c = 0;
    size_t k = sift__utf8_decode(p->s + p->i, p->n - p->i, &c);
    p->i += k ? k : 1;
    return c;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class, escapes resolved. The caller has
 * checked that p->i is not at the end. Returns UINT32_MAX on error. */
static uint32_t parse_char(P *p)
{
    if (p->s[p->i] != '\\')
        return decode(p);
    size_t at = p->i;
    int e = peek(p, 1);
    if (e < 0) {
        perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "escape '\\' at the end of the grammar");
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
        perr(p, at, SIFT_E_GRAMMAR_SYNTAX,
             "unknown escape '\\%s' (known: \\x \\u \\U \\t \\n \\r \\\\ \\\" \\[ \\] \\-)", buf);
        return UINT32_MAX;
    }
    }
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        int h = hexval(peek(p, 2 + (size_t)k));
        if (h < 0) {
            perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "escape '\\%c' needs exactly %d hex digits", e,
                 digits);
            return UINT32_MAX;
        }
        v = v * 16 + (uint32_t)h;
    }
    if (v > 0x10FFFF) {
        perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "escape '\\%c%0*X' is beyond U+10FFFF", e, digits,
             (unsigned)v);
        return UINT32_MAX;
    }
    if (v >= 0xD800 && v <= 0xDFFF) {
        perr(p, at, SIFT_E_GRAMMAR_SYNTAX,
             "escape '\\%c%0*X' is a UTF-16 surrogate, not a character", e, digits, (unsigned)v);
        return UINT32_MAX;
    }
    p->i += 2 + (size_t)digits;
    return v;
}

/* Parses a decimal integer at p->i; values above 10^9 are reported as
 * "too large" (they exceed every limit anyway). */
static int parse_int(P *p, uint64_t *out)
{
    size_t at = p->i;
    uint64_t v = 0;
    int big = 0;
    if (peek(p, 0) < '0' || peek(p, 0) > '9') {
        perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "expected an integer");
        return 0;
    }
    while (peek(p, 0) >= '0' && peek(p, 0) <= '9') {
        v = v * 10 + (uint64_t)(p->s[p->i] - '0');
        if (v > 1000000000u)
            big = 1, v = 1000000001u;
        p->i++;
    }
    if (big) {
        perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "integer %.*s is too large", (int)(p->i - at),
             (const char *)p->s + at);
        return 0;
    }
    *out = v;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Building the current sequence                                       */
/* ------------------------------------------------------------------ */

static frame *top(P *p)
{
    return &p->fr[p->n_fr - 1];
}

static int budget(P *p, size_t more)
{
    if (more > SIFT__GBNF_MAX_ELEMENTS || p->n_elems + more > SIFT__GBNF_MAX_ELEMENTS) {
        perr(p, p->i, SIFT_E_GRAMMAR_LIMIT, "grammar expands to more than %u elements",
             (unsigned)SIFT__GBNF_MAX_ELEMENTS);
        return 0;
    }
    p->n_elems += more;
    return 1;
}

static int emit(P *p, uint32_t type, uint32_t v)
{
    frame *f = top(p);
    if (!budget(p, 1))
        return 0;
    if (!vec_reserve(p->al, &f->buf, sizeof(sift__gelem), f->buf.n + 1)) {
        nomem(p);
        return 0;
    }
    sift__gelem *e = (sift__gelem *)f->buf.p + f->buf.n++;
    e->type = type;
    e->v = v;
    return 1;
}

static int push_frame(P *p, uint32_t rule, size_t open)
{
    /* New frames are zero: their buffers are empty until first used. */
    if (sift__reserve(p->al, &p->fr, &p->cap_fr, p->n_fr, p->n_fr + 1, sizeof *p->fr, 8)) {
        nomem(p);
        return 0;
    }
    frame *f = &p->fr[p->n_fr++];
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
static int repeat(P *p, uint64_t m, uint64_t n, size_t at)
{
    frame *f = top(p);
    if (f->last == SIZE_MAX || f->last >= f->buf.n) {
        perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "repetition with no preceding item");
        return 0;
    }
    int unbounded = n == UINT64_MAX;
    if (m > SIFT__GBNF_MAX_REPETITION || (!unbounded && n > SIFT__GBNF_MAX_REPETITION)) {
        perr(p, at, SIFT_E_GRAMMAR_LIMIT, "repetition count %llu exceeds %d",
             (unsigned long long)(m > SIFT__GBNF_MAX_REPETITION ? m : n),
             SIFT__GBNF_MAX_REPETITION);
        return 0;
    }
    if (!unbounded && n < m) {
        perr(p, at, SIFT_E_GRAMMAR_SYNTAX,
             "repetition {%llu,%llu} has its maximum below its minimum", (unsigned long long)m,
             (unsigned long long)n);
        return 0;
    }
    /* llama.cpp's guard against nested explosions: the product of the
     * symbols behind the item and this repetition's count. */
    uint64_t total = !unbounded && n > 0 ? n : (m > 0 ? m : 1);
    if (f->prev * total >= SIFT__GBNF_MAX_REPETITION) {
        perr(p, at, SIFT_E_GRAMMAR_LIMIT, "repetition expands to %llu copies (>= %d)",
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
        nomem(p);
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
            nomem(p);
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

static uint32_t add_class(P *p, int neg)
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
        nomem(p);
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

static int parse_class(P *p)
{
    size_t open = p->i;
    p->i++;
    int neg = 0;
    if (peek(p, 0) == '^')
        neg = 1, p->i++;
    p->crng.n = 0;
    for (;;) {
        if (at_end(p)) {
            perr(p, open, SIFT_E_GRAMMAR_SYNTAX,
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
                perr(p, open, SIFT_E_GRAMMAR_SYNTAX,
                     "unterminated character class (no ']' before the end of the text)");
                return 0;
            }
            hi = parse_char(p);
            if (hi == UINT32_MAX)
                return 0;
            if (hi < lo) {
                perr(p, at, SIFT_E_GRAMMAR_SYNTAX,
                     "reversed range U+%04X-U+%04X in a character class (write the smaller "
                     "bound first)",
                     (unsigned)lo, (unsigned)hi);
                return 0;
            }
        }
        if (!vec_reserve(p->al, &p->crng, sizeof(uint32_t), p->crng.n + 2)) {
            nomem(p);
            return 0;
        }
        ((uint32_t *)p->crng.p)[p->crng.n++] = lo;
        ((uint32_t *)p->crng.p)[p->crng.n++] = hi;
    }
    p->i++; /* ] */
    if (p->crng.n == 0) {
        if (!neg) {
            perr(p, open, SIFT_E_GRAMMAR_SYNTAX, "empty character class '[]' matches nothing");
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

static int parse_literal(P *p)
{
    size_t open = p->i;
    p->i++;
    top(p)->last = top(p)->buf.n;
    for (;;) {
        if (at_end(p)) {
            perr(p, open, SIFT_E_GRAMMAR_SYNTAX,
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

static int parse_token(P *p)
{
    size_t at = p->i;
    int neg = 0;
    if (peek(p, 0) == '!') {
        neg = 1;
        p->i++;
        if (peek(p, 0) != '<') {
            perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "expected '<' after '!' (a token exclusion)");
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
            perr(p, p->i, SIFT_E_GRAMMAR_SYNTAX, "expected ']>' to close the token id");
            return 0;
        }
        p->i += 2;
        if (!p->vocab) {
            if (p->needs_vocab)
                *p->needs_vocab = 1;
            perr(p, at, SIFT_E_GRAMMAR_SYNTAX,
                 "token references need a vocabulary (none was given)");
            return 0;
        }
        if (v >= (uint64_t)sift_vocab_size(p->vocab)) {
            perr(p, num, SIFT_E_GRAMMAR_SYNTAX, "token id %llu out of range [0, %d)",
                 (unsigned long long)v, (int)sift_vocab_size(p->vocab));
            return 0;
        }
        id = (int32_t)v;
    } else {
        size_t k = p->i + 1;
        while (k < p->n && p->s[k] != '>' && p->s[k] != '\n' && p->s[k] != '\r')
            k++;
        if (k >= p->n || p->s[k] != '>') {
            perr(p, lt, SIFT_E_GRAMMAR_SYNTAX,
                 "unterminated token reference (no '>' on this line)");
            return 0;
        }
        size_t tl = k + 1 - lt;
        p->i = k + 1;
        if (!p->vocab) {
            if (p->needs_vocab)
                *p->needs_vocab = 1;
            perr(p, at, SIFT_E_GRAMMAR_SYNTAX,
                 "token references need a vocabulary (none was given)");
            return 0;
        }
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
            perr(p, lt, SIFT_E_GRAMMAR_SYNTAX, "no token of the vocabulary is exactly '%.*s'",
                 (int)(tl > 64 ? 64 : tl), (const char *)p->s + lt);
            return 0;
        }
    }
    top(p)->last = top(p)->buf.n;
    return emit(p, neg ? SIFT__G_TOKEN_NOT : SIFT__G_TOKEN, (uint32_t)id);
}

static int parse_braces(P *p, int nl)
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
            perr(p, p->i, SIFT_E_GRAMMAR_SYNTAX, "expected '}' to close the repetition");
            return 0;
        }
    } else {
        perr(p, p->i, SIFT_E_GRAMMAR_SYNTAX, "expected ',' or '}' in the repetition");
        return 0;
    }
    p->i++;
    return repeat(p, m, n, at);
}

/* Closes the innermost group frame: defines its rule and references it
 * from the parent. */
static int close_group(P *p)
{
    frame *f = top(p);
    if (!emit(p, SIFT__G_END, 0) || !define(p, f->rule, f->buf.p, f->buf.n))
        return 0;
    p->n_elems -= f->buf.n; /* now counted in the arena */
    p->n_elems += f->buf.n;
    uint32_t id = f->rule;
    uint64_t prev = p->rules.n - f->sym_open;
    /* keep the frame's buffer for reuse: swap it to the slot past the end */
    p->n_fr--;
    frame *g = top(p);
    g->last = g->buf.n;
    if (!emit(p, SIFT__G_REF, id))
        return 0;
    g->prev = prev ? prev : 1;
    return 1;
}

/* Parses one rule's alternatives, groups included, iteratively. */
static int parse_body(P *p)
{
    for (;;) {
        int nested = p->n_fr > 1;
        skip(p, nested);
        if (at_end(p)) {
            if (nested) {
                char lc[32];
                fmt_lc(p, top(p)->open, lc, sizeof lc);
                perr(p, p->i, SIFT_E_GRAMMAR_SYNTAX, "expected ')' (group opened at %s)", lc);
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
            size_t e = p->i;
            while (e < p->n && is_name_char(p->s[e]))
                e++;
            if (e < p->n && p->s[e] == '_') {
                perr(p, e, SIFT_E_GRAMMAR_SYNTAX,
                     "'_' is not allowed in rule names (use letters, digits and '-')");
                return 0;
            }
            uint32_t id = symbol(p, p->i, e - p->i);
            if (id == UINT32_MAX)
                return 0;
            if (R(p, id)->use == SIZE_MAX)
                R(p, id)->use = p->i;
            p->i = e;
            top(p)->last = top(p)->buf.n;
            top(p)->prev = 1;
            if (!emit(p, SIFT__G_REF, id))
                return 0;
        } else if (c == '(') {
            /* n_fr counts the rule's own frame: the new group is at
             * depth n_fr */
            if (p->n_fr > SIFT__GBNF_MAX_NESTING) {
                perr(p, at, SIFT_E_GRAMMAR_LIMIT, "nesting depth %zu exceeds %d", p->n_fr,
                     SIFT__GBNF_MAX_NESTING);
                return 0;
            }
            uint32_t sym_open = (uint32_t)p->rules.n;
            uint32_t id = new_rule(p, RK_GROUP, at);
            if (id == UINT32_MAX || !push_frame(p, id, at))
                return 0;
            top(p)->sym_open = sym_open;
            p->i++;
        } else if (c == ')') {
            if (!nested) {
                perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "unexpected ')' with no open group");
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
            fmt_lc(p, top(p)->open, lc, sizeof lc);
            perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "expected ')' (group opened at %s)", lc);
            return 0;
        } else {
            perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "expected newline or end");
            return 0;
        }
    }
}

static int parse_rule(P *p)
{
    size_t at = p->i;
    size_t e = p->i;
    while (e < p->n && is_name_char(p->s[e]))
        e++;
    if (e == at) {
        perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "expected a rule name");
        return 0;
    }
    if (e < p->n && p->s[e] == '_') {
        perr(p, e, SIFT_E_GRAMMAR_SYNTAX,
             "'_' is not allowed in rule names (use letters, digits and '-')");
        return 0;
    }
    uint32_t id = symbol(p, at, e - at);
    if (id == UINT32_MAX)
        return 0;
    p->i = e;
    skip(p, 0);
    if (!(peek(p, 0) == ':' && peek(p, 1) == ':' && peek(p, 2) == '=')) {
        perr(p, p->i, SIFT_E_GRAMMAR_SYNTAX, "expected '::='");
        return 0;
    }
    if (R(p, id)->defined) {
        char lc[32];
        fmt_lc(p, R(p, id)->pos, lc, sizeof lc);
        perr(p, at, SIFT_E_GRAMMAR_SYNTAX, "rule '%.*s' is defined twice (first at %s)",
             (int)(e - at), (const char *)p->s + at, lc);
        return 0;
    }
    R(p, id)->pos = at;
    p->i += 3;
    skip(p, 1);
    p->n_fr = 0;
    if (!push_frame(p, id, at) || !parse_body(p))
        return 0;
    frame *f = top(p);
    if (!emit(p, SIFT__G_END, 0) || !define(p, id, f->buf.p, f->buf.n))
        return 0;
    p->n_fr = 0;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Checks after parsing                                                */
/* ------------------------------------------------------------------ */

static void rule_label(const P *p, uint32_t id, char *buf, size_t cap)
{
    const rinfo *r = (const rinfo *)p->rules.p + id;
    if (r->kind == RK_NAMED) {
        snprintf(buf, cap, "%.*s", (int)(r->name_len > 64 ? 64 : r->name_len),
                 (const char *)p->s + r->name_off);
    } else {
        char lc[32];
        fmt_lc(p, r->pos, lc, sizeof lc);
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
static void report_cycle(P *p, const lgraph *lg, const uint32_t *cyc, const uint32_t *ei, size_t n)
{
    char msg[400], lab[96];
    size_t len = 0;
    rule_label(p, cyc[0], lab, sizeof lab);
    len += (size_t)snprintf(msg + len, sizeof msg - len, "%s", lab);
    int rep = 0;
    for (size_t q = 0; q < n; q++) {
        uint32_t to = q + 1 < n ? cyc[q + 1] : cyc[0];
        rep |= R(p, cyc[q])->kind == RK_REPEAT;
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
    perr(p, R(p, cyc[0])->pos, SIFT_E_GRAMMAR_LEFT_RECURSION, "rule '%s' is left-recursive: %s%s",
         lab, msg, rep ? " (a repeated item that can match empty text)" : "");
}

/* The compiled form's invariants, checked once before the analyses
 * (and the matcher) index anything with them: a defined rule's (off,
 * len) lies inside the arena and ends with END (so a reference is never
 * its last element), a reference names a defined rule, a class index is
 * a class, and a rule that is not defined has no elements. The builder
 * keeps them; a violation is a parser bug, reported as SIFT_E_STATE (and
 * an abort in fuzzing builds, so the fuzzer still sees it) rather than
 * an out-of-range read or write. */
static int check_compiled(P *p)
{
    uint32_t nr = (uint32_t)p->rules.n;
    const sift__gelem *el = p->arena.p;
    size_t ne = p->arena.n;
    for (uint32_t r = 0; r < nr; r++) {
        const rinfo *ri = R(p, r);
        int ok = ri->defined ? ri->len > 0 && ri->off <= ne && ri->len <= ne - ri->off &&
                                   el[ri->off + ri->len - 1].type == SIFT__G_END
                             : ri->len == 0;
        for (uint32_t k = 0; ok && k < ri->len; k++) {
            const sift__gelem *e = &el[ri->off + k];
            if (e->type == SIFT__G_REF)
                ok = e->v < nr && R(p, e->v)->defined;
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
            perr(p, SIZE_MAX, SIFT_E_STATE,
                 "internal error: rule %s was compiled inconsistently (please report the grammar)",
                 lab);
            return 0;
        }
    }
    return 1;
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
static int check_left_recursion(P *p)
{
    uint32_t nr = (uint32_t)p->rules.n;
    const sift__gelem *el = p->arena.p;
    size_t ne = p->arena.n;
    int ok = 0;
    uint8_t *nullable = sift__calloc(p->al, nr, 1);
    uint32_t *alt_need = NULL, *alt_rule = NULL, *occ_start = NULL, *occ = NULL, *work = NULL;
    uint32_t *ecount = NULL;
    lgraph lg = {NULL, NULL, NULL, NULL};
    uint8_t *color = NULL;
    uint32_t *stk = NULL, *sit = NULL, *idx = NULL, *low = NULL, *scc = NULL, *tst = NULL;
    uint32_t *cyc = NULL, *cei = NULL;
    size_t n_alt = 0;
    for (uint32_t r = 0; r < nr; r++) {
        const rinfo *ri = R(p, r);
        for (uint32_t k = 0; k < ri->len; k++)
            n_alt += el[ri->off + k].type == SIFT__G_ALT || el[ri->off + k].type == SIFT__G_END;
    }
    alt_need = sift__calloc(p->al, n_alt + 1, sizeof *alt_need);
    alt_rule = sift__calloc(p->al, n_alt + 1, sizeof *alt_rule);
    occ_start = sift__calloc(p->al, (size_t)nr + 1, sizeof *occ_start);
    occ = sift__calloc(p->al, ne + 1, sizeof *occ);
    work = sift__calloc(p->al, (size_t)nr + 1, sizeof *work);
    ecount = sift__calloc(p->al, (size_t)nr + 1, sizeof *ecount);
    color = sift__calloc(p->al, (size_t)nr + 1, 1);
    stk = sift__calloc(p->al, (size_t)nr + 1, sizeof *stk);
    sit = sift__calloc(p->al, (size_t)nr + 1, sizeof *sit);
    idx = sift__calloc(p->al, (size_t)nr + 1, sizeof *idx);
    low = sift__calloc(p->al, (size_t)nr + 1, sizeof *low);
    scc = sift__calloc(p->al, (size_t)nr + 1, sizeof *scc);
    tst = sift__calloc(p->al, (size_t)nr + 1, sizeof *tst);
    cyc = sift__calloc(p->al, (size_t)nr + 1, sizeof *cyc);
    cei = sift__calloc(p->al, (size_t)nr + 1, sizeof *cei);
    if (!nullable || !alt_need || !alt_rule || !occ_start || !occ || !work || !ecount || !color ||
        !stk || !sit || !idx || !low || !scc || !tst || !cyc || !cei) {
        nomem(p);
        goto out;
    }
    /* 1. nullable: an alternative is nullable when it has no terminal and
     * all its references are nullable. alt_need counts references still
     * unknown; a terminal makes the alternative never nullable. */
    {
        size_t a = 0;
        size_t n_work = 0;
        for (uint32_t r = 0; r < nr; r++) {
            const rinfo *ri = R(p, r);
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
        /* occurrence lists: for each rule, the alternatives that reference
         * it (one entry per reference) */
        uint32_t sum = 0;
        for (uint32_t r = 0; r <= nr; r++) {
            uint32_t c = r < nr ? occ_start[r] : 0;
            occ_start[r] = sum;
            sum += c;
        }
        uint32_t *fill = ecount; /* reuse as cursor */
        memcpy(fill, occ_start, (size_t)nr * sizeof *fill);
        a = 0;
        for (uint32_t r = 0; r < nr; r++) {
            const rinfo *ri = R(p, r);
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
    /* 2. left edges */
    {
        memset(ecount, 0, ((size_t)nr + 1) * sizeof *ecount);
        size_t total = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (uint32_t r = 0; r < nr; r++) {
                const rinfo *ri = R(p, r);
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
                            total++;
                        } else {
                            /* a rule's elements end with END (check_compiled) */
                            uint32_t nt = el[ri->off + k + 1].type;
                            size_t j = lg.estart[r] + ecount[r];
                            lg.edge[j] = e->v;
                            lg.evia[j] = via;
                            lg.etail[j] = nt == SIFT__G_ALT || nt == SIFT__G_END;
                            ecount[r]++;
                        }
                        if (nullable[e->v])
                            via = e->v;
                        else
                            open = 0;
                    } else {
                        open = 0;
                    }
                }
            }
            if (pass == 0) {
                lg.estart = sift__calloc(p->al, (size_t)nr + 1, sizeof *lg.estart);
                lg.edge = sift__calloc(p->al, total + 1, sizeof *lg.edge);
                lg.evia = sift__calloc(p->al, total + 1, sizeof *lg.evia);
                lg.etail = sift__calloc(p->al, total + 1, 1);
                if (!lg.estart || !lg.edge || !lg.evia || !lg.etail) {
                    nomem(p);
                    goto out;
                }
                uint32_t s2 = 0;
                for (uint32_t r = 0; r < nr; r++) {
                    lg.estart[r] = s2;
                    s2 += ecount[r];
                }
                lg.estart[nr] = s2;
                memset(ecount, 0, ((size_t)nr + 1) * sizeof *ecount);
            }
        }
    }
    const uint32_t *estart = lg.estart, *edge = lg.edge;
    /* 3. strongly connected components (iterative Tarjan): idx[] is the
     * visit number + 1 (0 = unvisited), low[] the lowest one reachable,
     * color[] 1 while on the component stack tst[] */
    {
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
                    uint32_t w = edge[sit[sp - 1]++];
                    if (!idx[w]) {
                        idx[w] = low[w] = next++;
                        tst[nt++] = w;
                        color[w] = 1;
                        stk[sp] = w;
                        sit[sp++] = estart[w];
                    } else if (color[w] && idx[w] < low[r]) {
                        low[r] = idx[w];
                    }
                    continue;
                }
                sp--;
                if (sp && low[r] < low[stk[sp - 1]])
                    low[stk[sp - 1]] = low[r];
                if (low[r] == idx[r]) {
                    uint32_t w;
                    do {
                        w = tst[--nt];
                        color[w] = 0;
                        scc[w] = n_scc;
                    } while (w != r);
                    n_scc++;
                }
            }
        }
    }
    /* 4a. a reference that is followed by something, on a cycle: the
     * cycle is that edge r -> s and a shortest path s ->* r inside the
     * component, found breadth-first (color[] marks the visited rules,
     * sit[w] the rule before w on the path and low[w] the edge used) */
    for (uint32_t r = 0; r < nr; r++) {
        for (uint32_t e0 = estart[r]; e0 < estart[r + 1]; e0++) {
            uint32_t s = edge[e0];
            if (lg.etail[e0] || scc[s] != scc[r])
                continue;
            size_t qh = 0, qt = 0;
            work[qt++] = s;
            color[s] = 1;
            while (qh < qt && !color[r]) {
                uint32_t u = work[qh++];
                for (uint32_t k = estart[u]; k < estart[u + 1]; k++) {
                    uint32_t w = edge[k];
                    if (color[w] || scc[w] != scc[r])
                        continue;
                    color[w] = 1;
                    sit[w] = u;
                    low[w] = k;
                    work[qt++] = w;
                }
            }
            /* walk back from r to s, then reverse into cyc[1 ..] */
            size_t len = 0;
            for (uint32_t w = r; w != s; w = sit[w])
                stk[len++] = w;
            size_t n = 0;
            cyc[n] = r;
            cei[n++] = e0;
            for (size_t q = len; q > 0; q--) {
                uint32_t w = stk[q - 1];
                cyc[n] = sit[w];
                cei[n++] = low[w];
            }
            report_cycle(p, &lg, cyc, cei, n);
            goto out;
        }
    }
    /* 4b. a cycle of tail references through no repetition helper: a
     * depth-first search over those edges only; a gray target closes a
     * cycle */
    memset(color, 0, (size_t)nr + 1);
    for (uint32_t r0 = 0; r0 < nr; r0++) {
        if (color[r0] || R(p, r0)->kind == RK_REPEAT)
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
            if (R(p, s)->kind == RK_REPEAT)
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
                    cyc[n] = stk[q];
                    cei[n++] = sit[q] - 1;
                }
                report_cycle(p, &lg, cyc, cei, n);
                goto out;
            }
        }
    }
    ok = 1;
out:
    sift__free(p->al, nullable);
    sift__free(p->al, alt_need);
    sift__free(p->al, alt_rule);
    sift__free(p->al, occ_start);
    sift__free(p->al, occ);
    sift__free(p->al, work);
    sift__free(p->al, ecount);
    sift__free(p->al, lg.estart);
    sift__free(p->al, lg.edge);
    sift__free(p->al, lg.evia);
    sift__free(p->al, lg.etail);
    sift__free(p->al, color);
    sift__free(p->al, stk);
    sift__free(p->al, sit);
    sift__free(p->al, idx);
    sift__free(p->al, low);
    sift__free(p->al, scc);
    sift__free(p->al, tst);
    sift__free(p->al, cyc);
    sift__free(p->al, cei);
    return ok;
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

static void p_free(P *p)
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
    P p;
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
            return perr(&p, bad, SIFT_E_GRAMMAR_SYNTAX, "NUL byte in the grammar");
        return perr(&p, bad, SIFT_E_GRAMMAR_SYNTAX, "invalid UTF-8 at byte %zu", bad);
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
            const rinfo *r = R(&p, id);
            any_named |= r->kind == RK_NAMED && r->defined;
            if (!r->defined && r->use < best) {
                best = r->use;
                bid = id;
            }
        }
        if (!any_named) {
            perr(&p, SIZE_MAX, SIFT_E_GRAMMAR_UNDEFINED, "grammar defines no rules");
        } else if (best != SIZE_MAX) {
            const rinfo *r = R(&p, bid);
            perr(&p, best, SIFT_E_GRAMMAR_UNDEFINED, "rule '%.*s' is used but never defined",
                 (int)(r->name_len > 64 ? 64 : r->name_len), (const char *)p.s + r->name_off);
        }
    }
    uint32_t root_id = UINT32_MAX;
    if (!p.st) {
        size_t rl = strlen(root);
        for (uint32_t id = 0; id < p.rules.n; id++) {
            const rinfo *r = R(&p, id);
            if (r->kind == RK_NAMED && r->name_len == rl &&
                memcmp(p.s + r->name_off, root, rl) == 0)
                root_id = id;
        }
        if (root_id == UINT32_MAX)
            perr(&p, SIZE_MAX, SIFT_E_GRAMMAR_UNDEFINED, "start symbol '%.*s' is not defined",
                 (int)(rl > 64 ? 64 : rl), root);
    }
    if (!p.st && check_compiled(&p))
        check_left_recursion(&p);
    if (!p.st) {
        memset(out, 0, sizeof *out);
        out->rule_start = sift__calloc(al, p.rules.n, sizeof *out->rule_start);
        if (!out->rule_start) {
            nomem(&p);
        } else {
            for (uint32_t id = 0; id < p.rules.n; id++)
                out->rule_start[id] = R(&p, id)->off;
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

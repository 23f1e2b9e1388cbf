/*
 * json_regex.c - a JSON Schema "pattern" (ECMA-262 subset) -> one GBNF
 * expression over the JSON-encoded content of a string.
 *
 * The subset this parser implements (docs/json-regex.md), over code
 * points of the pattern (which must be well-formed UTF-8):
 *
 *   pattern      ::= alternative ("|" alternative)*
 *   alternative  ::= term*
 *   term         ::= "^" | "$" | atom quantifier?
 *   quantifier   ::= ("*" | "+" | "?" | "{" int ("," int?)? "}") "?"?
 *   atom         ::= char | "." | class | escape
 *                  | "(" ("?:" | "?<" name ">")? pattern ")"
 *   class        ::= "[" "^"? (catom ("-" catom)?)* "]"
 *   escape       ::= "\" ( [dDwWsS] | [fnrtv] | "0" | "c" [A-Za-z]
 *                  | "x" hex{2} | "u" hex{4} | "u{" hex+ "}"
 *                  | any character but a letter or a digit )
 *   (in a class also "\b" = U+0008 and "\-")
 *
 * A "{" that does not start a well-formed {n}, {n,} or {n,m} is a
 * literal, as are "}" and "]" (ECMA-262 Annex B, which PCRE2 agrees
 * with); "\uD83D\uDE00" is one code point. Lazy quantifiers accept the
 * same language. Unsupported (SIFT_E_SCHEMA_UNSUPPORTED): lookahead and
 * lookbehind, backreferences (\1, \k<n>), \b and \B outside a class,
 * \p{..}, octal escapes, inline modifiers (?i), a lone surrogate, and an
 * anchor anywhere but at the start or end of a top-level alternative
 * (a group that makes up a whole top-level alternative counts as top
 * level: ^(a|b)$, (^a$|^b$)).
 *
 * What the output matches. The pattern describes decoded strings; the
 * output matches the text between the quotes of their JSON encodings, in
 * these forms of a code point c (every other form is rejected):
 *   - c raw (UTF-8), unless c is '"', '\' or a control U+0000..U+001F;
 *   - the short escapes \" \\ \/ \b \f \n \r \t for their characters;
 *   - \uXXXX (hex digits in either case) for the characters JSON must
 *     escape: U+0000..U+001F, '"' and '\'.
 * So the canonical encoding (jansson's json_dumps: raw UTF-8, the short
 * escapes, \u00XX for the other controls, '/' raw) is accepted, and no
 * accepted text decodes to a string the pattern does not match. A pattern
 * that is not anchored at one side gets "any JSON character"* there.
 *
 * The same parser serves the regex grammar source (sift_grammar_from_regex,
 * sift__regex_to_gbnf): there the output matches raw text, every code
 * point as itself (no JSON encoding), and the regex must match the whole
 * text, as if both ends of every top-level alternative were anchored.
 *
 * Bounds: groups nest at most RX_MAX_DEPTH deep (the parser and the
 * emitter recurse once per group, never deeper); counts are at most
 * SIFT__GBNF_MAX_REPETITION and the GBNF parser's nested-repetition
 * product is computed here exactly as gbnf_parse.c computes it, so every
 * output compiles; the output is at most max_out bytes and expands to at
 * most RX_MAX_ELEMENTS compiled elements. All work is linear in the
 * pattern and the output.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "../grammar/gbnf.h"
#include "json_regex.h"

#define RX_MAX_DEPTH 100
#define RX_MAX_ELEMENTS ((uint64_t)1 << 20)
#define RX_MAX_CP 0x10FFFFu

enum { N_SET, N_CAT, N_ALT, N_REP, N_BOL, N_EOL };

/* SET: ranges rng[2*first ..) as n (lo, hi) pairs, sorted and merged.
 * CAT, ALT: children kids[first .. first+n). REP: child `first`,
 * counts min..max (UINT32_MAX = unbounded). `off`: byte offset. */
typedef struct rx_node {
    uint32_t kind;
    uint32_t first, n;
    uint32_t min, max;
    size_t off;
} rx_node;

typedef struct rx {
    const sift__alloc *al;
    const unsigned char *s;
    size_t n, i;
    rx_node *nodes;
    size_t n_nodes, cap_nodes;
    uint32_t *kids;
    size_t n_kids, cap_kids;
    uint32_t *stk; /* children being collected, nested lists stacked */
    size_t n_stk, cap_stk;
    uint32_t *rng; /* (lo, hi) pairs; n_rng counts uint32_t */
    size_t n_rng, cap_rng;
    char *out;
    size_t n_out, cap_out, max_out;
    size_t at;       /* offset of the node being emitted, for limit errors */
    int raw;         /* raw text (the regex source), not JSON string content */
    const char *src; /* "pattern" or "regex": the name in messages */
    /* the string lengths (code points) the output must keep to, with
     * len_on: lo..hi (hi = UINT64_MAX: no upper bound) */
    int len_on;
    uint64_t len_lo, len_hi;
    sift_status st;
    sift_error *err;
} rx;

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

static sift_status fail(rx *r, size_t off, sift_status code, const char *fmt, ...)
    SIFT__PRINTF(4, 5);
static sift_status fail(rx *r, size_t off, sift_status code, const char *fmt, ...)
{
    if (r->st)
        return r->st;
    r->st = code;
    if (!r->err)
        return code;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (off > r->n)
        off = r->n;
    int32_t col = 1;
    for (size_t k = 0; k < off; k++)
        col += (r->s[k] & 0xC0) != 0x80;
    sift__fail(r->err, code, "%s:%d: %s", r->src, (int)col, msg);
    r->err->line = 1;
    r->err->column = col;
    r->err->offset = (int64_t)off;
    sift__strlcpy_utf8(r->err->source, r->src, sizeof r->err->source);
    return code;
}

static sift_status nomem(rx *r)
{
    if (r->st)
        return r->st;
    r->st = SIFT_E_NOMEM;
    return sift__fail(r->err, SIFT_E_NOMEM, "%s: out of memory", r->src);
}

/* ------------------------------------------------------------------ */
/* Arrays                                                              */
/* ------------------------------------------------------------------ */

static uint32_t new_node(rx *r, uint32_t kind, size_t off)
{
    if (sift__reserve(r->al, &r->nodes, &r->cap_nodes, r->n_nodes, r->n_nodes + 1, sizeof *r->nodes,
                      32) ||
        r->n_nodes >= UINT32_MAX / 2) {
        nomem(r);
        return UINT32_MAX;
    }
    rx_node *nd = &r->nodes[r->n_nodes];
    memset(nd, 0, sizeof *nd);
    nd->kind = kind;
    nd->off = off;
    return (uint32_t)r->n_nodes++;
}

static int push_kid(rx *r, uint32_t id)
{
    if (sift__reserve(r->al, &r->stk, &r->cap_stk, r->n_stk, r->n_stk + 1, sizeof *r->stk, 32)) {
        nomem(r);
        return 0;
    }
    r->stk[r->n_stk++] = id;
    return 1;
}

/* Makes a CAT or ALT node of the children stacked from `base` on and pops
 * them. */
static uint32_t list_node(rx *r, uint32_t kind, size_t base, size_t off)
{
    size_t k = r->n_stk - base;
    if (sift__reserve(r->al, &r->kids, &r->cap_kids, r->n_kids, r->n_kids + k, sizeof *r->kids,
                      32) ||
        r->n_kids + k >= UINT32_MAX) {
        nomem(r);
        return UINT32_MAX;
    }
    uint32_t id = new_node(r, kind, off);
    if (id == UINT32_MAX)
        return id;
    r->nodes[id].first = (uint32_t)r->n_kids;
    r->nodes[id].n = (uint32_t)k;
    if (k > 0)
        memcpy(r->kids + r->n_kids, r->stk + base, k * sizeof *r->kids);
    r->n_kids += k;
    r->n_stk = base;
    return id;
}

static int add_range(rx *r, uint32_t lo, uint32_t hi)
{
    if (sift__reserve(r->al, &r->rng, &r->cap_rng, r->n_rng, r->n_rng + 2, sizeof *r->rng, 64) ||
        r->n_rng >= UINT32_MAX / 2) {
        nomem(r);
        return 0;
    }
    r->rng[r->n_rng++] = lo;
    r->rng[r->n_rng++] = hi;
    return 1;
}

static int cmp_pair(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Sorts and merges the pairs rng[start ..) in place, then complements
 * them over [0, U+10FFFF] when `neg`. Returns the number of pairs. */
static size_t normalize(rx *r, size_t start, int neg)
{
    size_t n = (r->n_rng - start) / 2;
    uint32_t *p = n > 0 ? r->rng + start : NULL;
    if (n > 1)
        qsort(p, n, 2 * sizeof *p, cmp_pair);
    size_t m = 0;
    for (size_t k = 0; k < n; k++) {
        if (m > 0 && p[2 * k] <= p[2 * (m - 1) + 1] + 1) {
            if (p[2 * k + 1] > p[2 * (m - 1) + 1])
                p[2 * (m - 1) + 1] = p[2 * k + 1];
        } else {
            p[2 * m] = p[2 * k];
            p[2 * m + 1] = p[2 * k + 1];
            m++;
        }
    }
    r->n_rng = start + 2 * m;
    if (!neg)
        return m;
    /* complement: at most m + 1 pairs, written after the m pairs, then
     * moved down */
    size_t w = r->n_rng;
    uint32_t next = 0;
    int ok = 1;
    for (size_t k = 0; k < m && ok; k++) {
        uint32_t lo = r->rng[start + 2 * k], hi = r->rng[start + 2 * k + 1];
        if (lo > next)
            ok = add_range(r, next, lo - 1);
        next = hi + 1;
    }
    if (ok && next <= RX_MAX_CP)
        ok = add_range(r, next, RX_MAX_CP);
    if (!ok)
        return 0;
    size_t c = r->n_rng - w;
    if (c > 0)
        memmove(r->rng + start, r->rng + w, c * sizeof *r->rng);
    r->n_rng = start + c;
    return c / 2;
}

/* ------------------------------------------------------------------ */
/* Predefined sets                                                     */
/* ------------------------------------------------------------------ */

static const uint32_t SET_D[] = {'0', '9'};
static const uint32_t SET_W[] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
/* ECMA-262 WhiteSpace and LineTerminator less U+FEFF: the white space
 * that ECMA-262 and the Unicode-aware engines validators use (Python's
 * re: str.isspace) agree on. */
static const uint32_t SET_S[] = {0x09,   0x0D,   0x20,   0x20,   0xA0,   0xA0,
                                 0x1680, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029,
                                 0x202F, 0x202F, 0x205F, 0x205F, 0x3000, 0x3000};
/* The characters only one of the two calls white space: U+FEFF
 * (ECMA-262), U+001C..U+001F and U+0085 (Python). */
static const uint32_t SET_S_EITHER[] = {0x1C, 0x1F, 0x85, 0x85, 0xFEFF, 0xFEFF};
/* Every code point outside ASCII: Unicode-aware engines count some of
 * them as digits (\d) or word characters (\w), ECMA-262 none. */
static const uint32_t SET_NON_ASCII[] = {0x80, 0x10FFFF};
/* the complement of ".": LineTerminator */
static const uint32_t SET_NL[] = {0x0A, 0x0A, 0x0D, 0x0D, 0x2028, 0x2029};

static int add_table(rx *r, const uint32_t *t, size_t n)
{
    for (size_t k = 0; k < n; k += 2)
        if (!add_range(r, t[k], t[k + 1]))
            return 0;
    return 1;
}

#define ADD_TABLE(r, t) add_table((r), (t), sizeof(t) / sizeof *(t))

/* Appends a predefined set (letter d, w, s or '.'; upper case negated).
 * \d, \w and \s differ between ECMA-262, which JSON Schema's patterns
 * follow, and the Unicode-aware engines many validators use (Python's
 * re: any Unicode digit, letter or space). So that no validator of
 * either kind rejects what the grammar accepts, a set stands for what
 * both engines put in it (`wide` = 0), or, inside a negated class whose
 * complement is taken afterwards, for what either puts in it (`wide` =
 * 1). The characters in question are never accepted: U+001C..U+001F,
 * U+0085 and U+FEFF for \s and \S, every non-ASCII character for \D
 * and \W (sift has no Unicode tables). */
static int add_class_escape(rx *r, int letter, int wide)
{
    int neg = letter >= 'A' && letter <= 'Z';
    /* what the set holds before its complement: the narrow form of a
     * negated set is the complement of the wide form of its letter */
    int either = neg ? !wide : wide;
    size_t start = r->n_rng;
    int ok;
    switch (letter | 0x20) {
    case 'd': ok = ADD_TABLE(r, SET_D) && (!either || ADD_TABLE(r, SET_NON_ASCII)); break;
    case 'w': ok = ADD_TABLE(r, SET_W) && (!either || ADD_TABLE(r, SET_NON_ASCII)); break;
    case 's': ok = ADD_TABLE(r, SET_S) && (!either || ADD_TABLE(r, SET_S_EITHER)); break;
    default: ok = ADD_TABLE(r, SET_NL), neg = 1; break;
    }
    if (!ok)
        return 0;
    normalize(r, start, neg);
    return !r->st;
}

/* ------------------------------------------------------------------ */
/* Parser                                                              */
/* ------------------------------------------------------------------ */

static int peek(const rx *r, size_t k)
{
    return r->i + k < r->n ? r->s[r->i + k] : -1;
}

/* The code point at r->i (the pattern is valid UTF-8); advances. */
static uint32_t next_cp(rx *r)
{
    uint32_t cp = 0;
    size_t k = sift__utf8_decode(r->s + r->i, r->n - r->i, &cp);
    r->i += k ? k : 1;
    return cp;
}

/* Reads exactly `digits` hex digits at r->i + skip; -1 if absent. */
static int64_t hex_digits(const rx *r, size_t skip, int digits)
{
    int64_t v = 0;
    for (int k = 0; k < digits; k++) {
        int h = sift__hex_digit(peek(r, skip + (size_t)k));
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* A \u escape at r->i ("\u" included): one code point, a surrogate pair
 * written as two escapes joined. Returns the code point or UINT32_MAX. */
static uint32_t parse_u_escape(rx *r)
{
    size_t at = r->i;
    if (peek(r, 2) == '{') {
        size_t k = 3;
        uint32_t v = 0;
        while (sift__hex_digit(peek(r, k)) >= 0) {
            v = v * 16 + (uint32_t)sift__hex_digit(peek(r, k));
            if (v > RX_MAX_CP) {
                fail(r, at, SIFT_E_SCHEMA_SYNTAX, "escape \\u{...} is beyond U+10FFFF");
                return UINT32_MAX;
            }
            k++;
        }
        if (k == 3 || peek(r, k) != '}') {
            fail(r, at, SIFT_E_SCHEMA_SYNTAX, "escape \\u{ needs hex digits and a '}'");
            return UINT32_MAX;
        }
        if (v >= 0xD800 && v <= 0xDFFF) {
            fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "a lone surrogate (\\u{%X}) is not supported",
                 (unsigned)v);
            return UINT32_MAX;
        }
        r->i += k + 1;
        return v;
    }
    int64_t v = hex_digits(r, 2, 4);
    if (v < 0) {
        fail(r, at, SIFT_E_SCHEMA_SYNTAX, "escape \\u needs 4 hex digits");
        return UINT32_MAX;
    }
    if (v >= 0xD800 && v <= 0xDBFF && peek(r, 6) == '\\' && peek(r, 7) == 'u') {
        int64_t lo = hex_digits(r, 8, 4);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            r->i += 12;
            return 0x10000u + (((uint32_t)v - 0xD800u) << 10) + ((uint32_t)lo - 0xDC00u);
        }
    }
    if (v >= 0xD800 && v <= 0xDFFF) {
        fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "a lone surrogate (\\u%04X) is not supported",
             (unsigned)v);
        return UINT32_MAX;
    }
    r->i += 6;
    return (uint32_t)v;
}

/* An escape at r->i (the backslash). Returns 1 with *cp for one code
 * point, 2 with *set = the letter of a predefined set, 0 on error. */
static int parse_escape(rx *r, int in_class, uint32_t *cp, int *set)
{
    size_t at = r->i;
    int e = peek(r, 1);
    if (e < 0) {
        fail(r, at, SIFT_E_SCHEMA_SYNTAX, "'\\' at the end of the pattern");
        return 0;
    }
    switch (e) {
    case 'd':
    case 'D':
    case 'w':
    case 'W':
    case 's':
    case 'S': r->i += 2, *set = e; return 2;
    case 'f': r->i += 2, *cp = 0x0C; return 1;
    case 'n': r->i += 2, *cp = 0x0A; return 1;
    case 'r': r->i += 2, *cp = 0x0D; return 1;
    case 't': r->i += 2, *cp = 0x09; return 1;
    case 'v': r->i += 2, *cp = 0x0B; return 1;
    case 'b':
        if (in_class) {
            r->i += 2, *cp = 0x08;
            return 1;
        }
        fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "the word boundary \\b is not supported");
        return 0;
    case 'B':
        if (!in_class) {
            fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "the non-word-boundary \\B is not supported");
            return 0;
        }
        break;
    case 'c': {
        int l = peek(r, 2);
        if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
            r->i += 3, *cp = (uint32_t)l % 32;
            return 1;
        }
        fail(r, at, SIFT_E_SCHEMA_SYNTAX, "escape \\c needs a letter");
        return 0;
    }
    case 'x': {
        int64_t v = hex_digits(r, 2, 2);
        if (v < 0) {
            fail(r, at, SIFT_E_SCHEMA_SYNTAX, "escape \\x needs 2 hex digits");
            return 0;
        }
        r->i += 4, *cp = (uint32_t)v;
        return 1;
    }
    case 'u': {
        uint32_t v = parse_u_escape(r);
        if (v == UINT32_MAX)
            return 0;
        *cp = v;
        return 1;
    }
    case 'p':
    case 'P':
        fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
             "Unicode property escapes (\\%c{...}) are not supported", e);
        return 0;
    case 'k':
        if (!in_class && peek(r, 2) == '<') {
            fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "backreferences (\\k<name>) are not supported");
            return 0;
        }
        break;
    case '0':
        if (peek(r, 2) < '0' || peek(r, 2) > '9') {
            r->i += 2, *cp = 0;
            return 1;
        }
        fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "octal escapes are not supported");
        return 0;
    default:
        if (e >= '1' && e <= '9') {
            if (in_class)
                fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "octal escapes are not supported");
            else
                fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "backreferences (\\%c) are not supported",
                     e);
            return 0;
        }
        if (!((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))) {
            r->i++;
            *cp = next_cp(r); /* an identity escape: \. \- \/ \_ ... */
            return 1;
        }
        break;
    }
    fail(r, at, SIFT_E_SCHEMA_SYNTAX, "unknown escape '\\%c'", e);
    return 0;
}

/* Parses a class at r->i ('['); returns a SET node. */
static uint32_t parse_class(rx *r)
{
    size_t at = r->i;
    r->i++;
    int neg = peek(r, 0) == '^';
    if (neg)
        r->i++;
    size_t start = r->n_rng;
    for (;;) {
        if (r->i >= r->n) {
            fail(r, at, SIFT_E_SCHEMA_SYNTAX, "unterminated character class");
            return UINT32_MAX;
        }
        if (peek(r, 0) == ']') {
            r->i++;
            break;
        }
        size_t item = r->i;
        uint32_t lo = 0;
        int set = 0, kind = 1;
        if (peek(r, 0) == '\\')
            kind = parse_escape(r, 1, &lo, &set);
        else
            lo = next_cp(r);
        if (!kind)
            return UINT32_MAX;
        if (peek(r, 0) == '-' && peek(r, 1) != ']' && peek(r, 1) >= 0) {
            size_t dash = r->i;
            r->i++;
            uint32_t hi = 0;
            int set2 = 0, kind2 = 1;
            if (peek(r, 0) == '\\')
                kind2 = parse_escape(r, 1, &hi, &set2);
            else
                hi = next_cp(r);
            if (!kind2)
                return UINT32_MAX;
            if (kind == 2 || kind2 == 2) {
                fail(r, dash, SIFT_E_SCHEMA_SYNTAX, "a class escape cannot bound a range");
                return UINT32_MAX;
            }
            if (hi < lo) {
                fail(r, item, SIFT_E_SCHEMA_SYNTAX, "range out of order in character class");
                return UINT32_MAX;
            }
            if (!add_range(r, lo, hi))
                return UINT32_MAX;
        } else if (kind == 2) {
            if (!add_class_escape(r, set, neg))
                return UINT32_MAX;
        } else if (!add_range(r, lo, lo)) {
            return UINT32_MAX;
        }
    }
    size_t m = normalize(r, start, neg);
    if (r->st)
        return UINT32_MAX;
    uint32_t id = new_node(r, N_SET, at);
    if (id != UINT32_MAX) {
        r->nodes[id].first = (uint32_t)(start / 2);
        r->nodes[id].n = (uint32_t)m;
    }
    return id;
}

/* A SET node of one predefined set or one code point. */
static uint32_t set_node(rx *r, size_t at, int letter, uint32_t cp)
{
    size_t start = r->n_rng;
    if (letter ? !add_class_escape(r, letter, 0) : !add_range(r, cp, cp))
        return UINT32_MAX;
    uint32_t id = new_node(r, N_SET, at);
    if (id != UINT32_MAX) {
        r->nodes[id].first = (uint32_t)(start / 2);
        r->nodes[id].n = (uint32_t)((r->n_rng - start) / 2);
    }
    return id;
}

/* A decimal number at r->i + *k; values above 10^9 are clamped (they
 * exceed every limit). Returns 0 when there is no digit. */
static int read_int(const rx *r, size_t *k, uint32_t *v)
{
    uint64_t x = 0;
    size_t s = *k;
    while (peek(r, *k) >= '0' && peek(r, *k) <= '9') {
        x = x * 10 + (uint64_t)(peek(r, *k) - '0');
        if (x > 1000000000u)
            x = 1000000001u;
        (*k)++;
    }
    *v = (uint32_t)x;
    return *k > s;
}

/* Recognises a quantifier at r->i without consuming it: its length, or 0
 * when there is none ("{" not followed by a well-formed count is a
 * literal). */
static size_t quant_len(const rx *r, uint32_t *min, uint32_t *max)
{
    int c = peek(r, 0);
    if (c == '*' || c == '+' || c == '?') {
        *min = c == '+';
        *max = c == '?' ? 1 : UINT32_MAX;
        return 1;
    }
    if (c != '{')
        return 0;
    size_t k = 1;
    if (!read_int(r, &k, min))
        return 0;
    *max = *min;
    if (peek(r, k) == ',') {
        k++;
        if (!read_int(r, &k, max))
            *max = UINT32_MAX;
    }
    if (peek(r, k) != '}')
        return 0;
    return k + 1;
}

static uint32_t parse_alt(rx *r, unsigned depth);

/* One term at r->i (not at the end, not '|' or ')'). */
static uint32_t parse_term(rx *r, unsigned depth)
{
    size_t at = r->i;
    int c = peek(r, 0);
    uint32_t atom = UINT32_MAX, qmin, qmax;
    if (c == '^' || c == '$') {
        r->i++;
        if (quant_len(r, &qmin, &qmax)) {
            fail(r, r->i, SIFT_E_SCHEMA_SYNTAX, "nothing to repeat before this quantifier");
            return UINT32_MAX;
        }
        return new_node(r, c == '^' ? N_BOL : N_EOL, at);
    }
    if (quant_len(r, &qmin, &qmax)) {
        fail(r, at, SIFT_E_SCHEMA_SYNTAX, "nothing to repeat before this quantifier");
        return UINT32_MAX;
    }
    if (c == '(') {
        if (depth >= RX_MAX_DEPTH) {
            fail(r, at, SIFT_E_SCHEMA_LIMIT, "groups nest deeper than %d", RX_MAX_DEPTH);
            return UINT32_MAX;
        }
        r->i++;
        if (peek(r, 0) == '?') {
            int q = peek(r, 1);
            if (q == ':') {
                r->i += 2;
            } else if (q == '=' || q == '!') {
                fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "lookahead (?%c...) is not supported", q);
                return UINT32_MAX;
            } else if (q == '<' && (peek(r, 2) == '=' || peek(r, 2) == '!')) {
                fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "lookbehind (?<%c...) is not supported",
                     peek(r, 2));
                return UINT32_MAX;
            } else if (q == '<') {
                size_t k = 2;
                for (;; k++) {
                    int d = peek(r, k);
                    int ok = (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || d == '_' ||
                             d == '$' || (k > 2 && d >= '0' && d <= '9');
                    if (!ok)
                        break;
                }
                if (k == 2 || peek(r, k) != '>') {
                    fail(r, at, SIFT_E_SCHEMA_SYNTAX, "invalid group name");
                    return UINT32_MAX;
                }
                r->i += k + 1;
            } else if ((q >= 'a' && q <= 'z') || (q >= 'A' && q <= 'Z') || q == '-') {
                fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                     "inline modifiers (?%c...) are not supported", q);
                return UINT32_MAX;
            } else {
                fail(r, at, SIFT_E_SCHEMA_SYNTAX, "invalid group '(?'");
                return UINT32_MAX;
            }
        }
        atom = parse_alt(r, depth + 1);
        if (atom == UINT32_MAX)
            return atom;
        if (peek(r, 0) != ')') {
            fail(r, at, SIFT_E_SCHEMA_SYNTAX, "unterminated group");
            return UINT32_MAX;
        }
        r->i++;
    } else if (c == '[') {
        atom = parse_class(r);
    } else if (c == '.') {
        r->i++;
        atom = set_node(r, at, '.', 0);
    } else if (c == '\\') {
        uint32_t cp = 0;
        int set = 0;
        int kind = parse_escape(r, 0, &cp, &set);
        if (!kind)
            return UINT32_MAX;
        atom = set_node(r, at, kind == 2 ? set : 0, cp);
    } else {
        uint32_t cp = next_cp(r);
        atom = set_node(r, at, 0, cp);
    }
    if (atom == UINT32_MAX)
        return atom;
    size_t qat = r->i;
    size_t ql = quant_len(r, &qmin, &qmax);
    if (!ql)
        return atom;
    r->i += ql;
    if (peek(r, 0) == '?')
        r->i++; /* lazy: the same language */
    if (qmax < qmin) {
        fail(r, qat, SIFT_E_SCHEMA_SYNTAX, "numbers out of order in {%u,%u}", (unsigned)qmin,
             (unsigned)qmax);
        return UINT32_MAX;
    }
    if (qmin > SIFT__GBNF_MAX_REPETITION ||
        (qmax != UINT32_MAX && qmax > SIFT__GBNF_MAX_REPETITION)) {
        fail(r, qat, SIFT_E_SCHEMA_LIMIT, "repetition count %u exceeds %d",
             (unsigned)(qmin > SIFT__GBNF_MAX_REPETITION ? qmin : qmax), SIFT__GBNF_MAX_REPETITION);
        return UINT32_MAX;
    }
    uint32_t dummy1, dummy2;
    if (quant_len(r, &dummy1, &dummy2)) {
        fail(r, r->i, SIFT_E_SCHEMA_SYNTAX, "nothing to repeat before this quantifier");
        return UINT32_MAX;
    }
    uint32_t id = new_node(r, N_REP, qat);
    if (id != UINT32_MAX) {
        r->nodes[id].first = atom;
        r->nodes[id].min = qmin;
        r->nodes[id].max = qmax;
    }
    return id;
}

static uint32_t parse_seq(rx *r, unsigned depth)
{
    size_t base = r->n_stk, at = r->i;
    while (r->i < r->n && peek(r, 0) != '|' && peek(r, 0) != ')') {
        uint32_t t = parse_term(r, depth);
        if (t == UINT32_MAX || !push_kid(r, t))
            return UINT32_MAX;
    }
    if (r->n_stk - base == 1) {
        r->n_stk = base;
        return r->stk[base];
    }
    return list_node(r, N_CAT, base, at);
}

static uint32_t parse_alt(rx *r, unsigned depth)
{
    size_t base = r->n_stk, at = r->i;
    for (;;) {
        uint32_t s = parse_seq(r, depth);
        if (s == UINT32_MAX || !push_kid(r, s))
            return UINT32_MAX;
        if (peek(r, 0) != '|')
            break;
        r->i++;
    }
    if (r->n_stk - base == 1) {
        r->n_stk = base;
        return r->stk[base];
    }
    return list_node(r, N_ALT, base, at);
}

/* ------------------------------------------------------------------ */
/* Output                                                              */
/* ------------------------------------------------------------------ */

static int put(rx *r, const char *s, size_t n)
{
    if (r->st)
        return 0;
    if (n > r->max_out || r->n_out > r->max_out - n) {
        fail(r, r->at, SIFT_E_SCHEMA_LIMIT, "the grammar of the pattern exceeds %zu bytes",
             r->max_out);
        return 0;
    }
    if (sift__reserve(r->al, &r->out, &r->cap_out, r->n_out, r->n_out + n + 1, 1, 256)) {
        nomem(r);
        return 0;
    }
    memcpy(r->out + r->n_out, s, n);
    r->n_out += n;
    r->out[r->n_out] = '\0';
    return 1;
}

static int puts_(rx *r, const char *s)
{
    return put(r, s, strlen(s));
}

/* One code point inside a GBNF literal or class. */
static int put_cp(rx *r, uint32_t c, int in_class)
{
    char b[16];
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (!in_class && c >= 0x20 && c < 0x7F && c != '"' && c != '\\'))
        snprintf(b, sizeof b, "%c", (int)c);
    else if (c < 0x100)
        snprintf(b, sizeof b, "\\x%02x", (unsigned)c);
    else if (c < 0x10000)
        snprintf(b, sizeof b, "\\u%04x", (unsigned)c);
    else
        snprintf(b, sizeof b, "\\U%08x", (unsigned)c);
    return puts_(r, b);
}

/* What the parser of the output will build for one item or sequence:
 * elements in its sequence, elements in all, rules created, and the
 * nested-repetition factor gbnf_parse.c keeps for it ("prev"). */
typedef struct rx_cost {
    uint64_t seq, elems, rules, prev;
    int atom; /* one GBNF item: a postfix may follow it */
} rx_cost;

static void cost_add(rx_cost *a, const rx_cost *b)
{
    a->seq += b->seq;
    a->elems += b->elems;
    a->rules += b->rules;
}

/* ------------------------------------------------------------------ */
/* Sets of code points -> their JSON encodings                         */
/* ------------------------------------------------------------------ */

/* Code points that may appear raw in a JSON string (no surrogates). */
static const uint32_t RAW[] = {0x20, 0x21, 0x23, 0x5B, 0x5D, 0xD7FF, 0xE000, RX_MAX_CP};
#define N_RAW 4
/* In raw text (the regex source) every scalar value is written as itself. */
static const uint32_t RAW_TEXT[] = {0, 0xD7FF, 0xE000, RX_MAX_CP};
#define N_RAW_TEXT 2

/* The characters with a short escape, and its letter. */
static const struct {
    uint32_t cp;
    char letter;
} SHORT[] = {{'"', '"'},  {'\\', '\\'}, {'/', '/'},  {0x08, 'b'},
             {0x0C, 'f'}, {0x0A, 'n'},  {0x0D, 'r'}, {0x09, 't'}};

static int set_has(const uint32_t *p, size_t n, uint32_t c)
{
    for (size_t k = 0; k < n; k++)
        if (c >= p[2 * k] && c <= p[2 * k + 1])
            return 1;
    return 0;
}

/* The encoding plan of a set: raw ranges (within RAW), short-escape
 * letters, and per high nibble (0, 1) of U+0000..U+001F the low nibbles
 * present, plus '"' and '\' for \u0022 and \u005c. */
typedef struct set_plan {
    size_t raw_first, n_raw; /* the raw pairs: r->rng[raw_first ..) */
    char letters[9];
    size_t n_letters;
    uint32_t ctl[2]; /* bit k of ctl[h]: U+00hk is in the set */
    int quote, bslash;
    size_t n_alts;
    int atom; /* written as one GBNF item */
} set_plan;

/* Plans the set of n pairs at ext (or, when ext is NULL, at r->rng[2 *
 * first ..)); the raw pairs go to the end of r->rng, which the caller
 * truncates back afterwards. */
static int plan_set(rx *r, const uint32_t *ext, size_t first, size_t n, set_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->raw_first = r->n_rng;
    const uint32_t *raw = r->raw ? RAW_TEXT : RAW;
    size_t n_raw = r->raw ? N_RAW_TEXT : N_RAW;
    for (size_t k = 0; k < n; k++) {
        /* by index: add_range may move r->rng */
        uint32_t lo = ext ? ext[2 * k] : r->rng[2 * (first + k)];
        uint32_t hi = ext ? ext[2 * k + 1] : r->rng[2 * (first + k) + 1];
        for (size_t j = 0; j < n_raw; j++) {
            uint32_t a = lo > raw[2 * j] ? lo : raw[2 * j];
            uint32_t b = hi < raw[2 * j + 1] ? hi : raw[2 * j + 1];
            if (a <= b && !add_range(r, a, b))
                return 0;
        }
        for (uint32_t c = lo; c <= hi && c < 0x20 && !r->raw; c++)
            pl->ctl[c >> 4] |= 1u << (c & 15);
    }
    pl->n_raw = (r->n_rng - pl->raw_first) / 2;
    if (r->raw) {
        pl->n_alts = pl->n_raw > 0;
        pl->atom = 1;
        return 1;
    }
    const uint32_t *p = ext ? ext : n > 0 ? r->rng + 2 * first : NULL;
    for (size_t k = 0; k < sizeof SHORT / sizeof *SHORT; k++)
        if (set_has(p, n, SHORT[k].cp))
            pl->letters[pl->n_letters++] = SHORT[k].letter;
    pl->quote = set_has(p, n, '"');
    pl->bslash = set_has(p, n, '\\');
    pl->n_alts = (pl->n_raw > 0) + (pl->n_letters > 0) + (size_t)pl->quote + (size_t)pl->bslash;
    if (pl->ctl[0] && pl->ctl[0] == pl->ctl[1])
        pl->n_alts++;
    else
        pl->n_alts += (pl->ctl[0] != 0) + (pl->ctl[1] != 0);
    /* one form: raw (a class or a literal, one item) or controls only
     * ("\\u000" [..], two items); several: a group */
    pl->atom = pl->n_alts != 1 || pl->n_raw > 0;
    return 1;
}

/* A class of hex digits for the nibble mask `m` (both letter cases). */
static int put_hex_class(rx *r, uint32_t m, uint64_t *elems)
{
    (*elems)++;
    if ((m & (m - 1)) == 0) {
        int v = 0;
        while (!(m >> v & 1))
            v++;
        if (v < 10) {
            char b[4] = {'"', (char)('0' + v), '"', 0};
            return puts_(r, b);
        }
    }
    if (!puts_(r, "["))
        return 0;
    for (int pass = 0; pass < 3; pass++) {
        int from = pass == 0 ? 0 : 10, to = pass == 0 ? 10 : 16;
        char base = pass == 0 ? '0' : pass == 1 ? 'a' : 'A';
        for (int v = from; v < to; v++) {
            if (!(m >> v & 1))
                continue;
            int e = v;
            while (e + 1 < to && (m >> (e + 1) & 1))
                e++;
            char b[4] = {(char)(base + v - from), 0, 0, 0};
            if (e > v)
                b[1] = '-', b[2] = (char)(base + e - from);
            if (!puts_(r, b))
                return 0;
            v = e;
        }
    }
    return puts_(r, "]");
}

static int put_range(rx *r, uint32_t lo, uint32_t hi)
{
    return put_cp(r, lo, 1) && (hi == lo || (puts_(r, "-") && put_cp(r, hi, 1)));
}

/* The raw pairs raw[0 .. n) as one GBNF class, or its negation when that
 * lists fewer ranges. The negation lists the gaps between the pairs,
 * clipped to leave out the surrogates, which no UTF-8 text holds and a
 * GBNF escape cannot name. */
static int put_raw_class(rx *r, size_t raw_first, size_t n)
{
    size_t n_gaps = 0;
    uint32_t next = 0;
    for (int pass = 0; pass < 2; pass++) {
        next = 0;
        for (size_t k = 0; k <= n; k++) {
            uint32_t lo = k < n ? r->rng[raw_first + 2 * k] : RX_MAX_CP + 1;
            if (lo > next) {
                uint32_t a = next, b = lo - 1;
                if (a >= 0xD800 && a <= 0xDFFF)
                    a = 0xE000;
                if (b >= 0xD800 && b <= 0xDFFF)
                    b = 0xD7FF;
                if (a <= b) {
                    if (pass == 0)
                        n_gaps++;
                    else if (!put_range(r, a, b))
                        return 0;
                }
            }
            if (k < n)
                next = r->rng[raw_first + 2 * k + 1] + 1;
        }
        if (pass == 0) {
            if (n_gaps >= n)
                break;
            if (!puts_(r, "[^"))
                return 0;
        } else {
            return puts_(r, "]");
        }
    }
    if (!puts_(r, "["))
        return 0;
    for (size_t k = 0; k < n; k++)
        if (!put_range(r, r->rng[raw_first + 2 * k], r->rng[raw_first + 2 * k + 1]))
            return 0;
    return puts_(r, "]");
}

static const char *letter_text(char l, char *buf)
{
    if (l == '"')
        return "\\\"";
    if (l == '\\')
        return "\\\\";
    buf[0] = l;
    buf[1] = 0;
    return buf;
}

/* Writes the encodings of a planned set: one item when pl->atom (a
 * group when it has several forms), else a sequence of two items. */
static int put_set(rx *r, const set_plan *pl, rx_cost *c)
{
    memset(c, 0, sizeof *c);
    c->prev = 1;
    c->atom = pl->atom;
    if (pl->n_alts == 0) {
        /* the empty set: a class no code point is in */
        c->seq = c->elems = 1;
        return puts_(r, "[^\\x00-\\U0010ffff]");
    }
    int group = pl->n_alts > 1;
    if (group && !puts_(r, "("))
        return 0;
    uint64_t el = 0;
    size_t written = 0;
    char lb[2];
#define SEP() (!written++ || puts_(r, " | "))
    if (pl->n_raw > 0) {
        const uint32_t *raw = r->rng + pl->raw_first;
        written++;
        el++;
        if (pl->n_raw == 1 && raw[0] == raw[1]) {
            if (!puts_(r, "\"") || !put_cp(r, raw[0], 0) || !puts_(r, "\""))
                return 0;
        } else if (!put_raw_class(r, pl->raw_first, pl->n_raw)) {
            return 0;
        }
    }
    if (pl->n_letters > 0) {
        if (!SEP() || !puts_(r, "\"\\\\"))
            return 0;
        if (pl->n_letters == 1) {
            if (!puts_(r, letter_text(pl->letters[0], lb)) || !puts_(r, "\""))
                return 0;
        } else {
            if (!puts_(r, "\" ["))
                return 0;
            for (size_t k = 0; k < pl->n_letters; k++)
                if (!puts_(r, letter_text(pl->letters[k], lb)))
                    return 0;
            if (!puts_(r, "]"))
                return 0;
        }
        el += 2;
    }
    for (int h = 0; h < 2; h++) {
        if (!pl->ctl[h])
            continue;
        if (!SEP())
            return 0;
        if (h == 0 && pl->ctl[0] == pl->ctl[1]) {
            if (!puts_(r, "\"\\\\u00\" [01] "))
                return 0;
            el += 5;
            h = 1;
        } else {
            if (!puts_(r, h ? "\"\\\\u001\" " : "\"\\\\u000\" "))
                return 0;
            el += 5;
        }
        if (!put_hex_class(r, pl->ctl[h], &el))
            return 0;
    }
    if (pl->quote) {
        if (!SEP() || !puts_(r, "\"\\\\u0022\""))
            return 0;
        el += 6;
    }
    if (pl->bslash) {
        if (!SEP() || !puts_(r, "\"\\\\u005\" [cC]"))
            return 0;
        el += 6;
    }
#undef SEP
    if (!group) {
        c->seq = c->elems = el;
        return 1;
    }
    if (!puts_(r, ")"))
        return 0;
    /* the alternatives, their ALTs and END in the rule, one REF outside */
    c->elems = el + written + 1;
    c->seq = 1;
    c->rules = 1;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Emission                                                            */
/* ------------------------------------------------------------------ */

static int emit(rx *r, uint32_t id, rx_cost *c, unsigned depth);

static int check_elems(rx *r, const rx_cost *c)
{
    if (c->elems > RX_MAX_ELEMENTS) {
        fail(r, r->at, SIFT_E_SCHEMA_LIMIT,
             "the grammar of the pattern expands to more than %llu elements",
             (unsigned long long)RX_MAX_ELEMENTS);
        return 0;
    }
    return 1;
}

/* Emits the sequence of nodes ids[0 .. n) (items separated by spaces),
 * merging runs of single raw code points into one literal. */
static int emit_seq(rx *r, const uint32_t *ids, size_t n, rx_cost *c, unsigned depth)
{
    memset(c, 0, sizeof *c);
    c->prev = 1;
    size_t items = 0;
    int last_atom = 0;
    rx_cost last = {0, 0, 0, 1, 0};
    for (size_t k = 0; k < n; k++) {
        if (items && !puts_(r, " "))
            return 0;
        const rx_node *nd = &r->nodes[ids[k]];
        if (nd->kind == N_SET) {
            /* a run of single raw code points becomes one literal */
            size_t j = k;
            size_t run = 0;
            for (; j < n; j++) {
                const rx_node *m = &r->nodes[ids[j]];
                if (m->kind != N_SET || m->n != 1)
                    break;
                uint32_t lo = r->rng[2 * m->first], hi = r->rng[2 * m->first + 1];
                if (lo != hi || (lo >= 0xD800 && lo <= 0xDFFF) ||
                    (!r->raw && (lo < 0x20 || lo == '"' || lo == '\\' || lo == '/')))
                    break;
                run++;
            }
            if (run > 1) {
                r->at = nd->off;
                if (!puts_(r, "\""))
                    return 0;
                for (size_t q = k; q < k + run; q++)
                    if (!put_cp(r, r->rng[2 * r->nodes[ids[q]].first], 0))
                        return 0;
                if (!puts_(r, "\""))
                    return 0;
                c->seq += run, c->elems += run;
                items++;
                last_atom = 1;
                k += run - 1;
                continue;
            }
        }
        if (!emit(r, ids[k], &last, depth))
            return 0;
        cost_add(c, &last);
        last_atom = last.atom;
        items++;
    }
    if (items == 0) {
        c->atom = 1;
        return puts_(r, "\"\"");
    }
    c->atom = items == 1 && last_atom;
    if (c->atom)
        c->prev = last.prev;
    return check_elems(r, c);
}

/* Emits `id` as a group "( ... )" unless it is one item already. */
static int emit_item(rx *r, uint32_t id, rx_cost *c, unsigned depth)
{
    const rx_node *nd = &r->nodes[id];
    int wrap = nd->kind == N_CAT || nd->kind == N_REP;
    if (nd->kind == N_SET) {
        set_plan pl;
        size_t mark = r->n_rng;
        if (!plan_set(r, NULL, nd->first, nd->n, &pl))
            return 0;
        r->n_rng = mark;
        wrap = !pl.atom;
    }
    if (!wrap)
        return emit(r, id, c, depth);
    if (!puts_(r, "("))
        return 0;
    rx_cost in;
    if (!emit(r, id, &in, depth) || !puts_(r, ")"))
        return 0;
    c->seq = 1;
    c->elems = in.elems + 2; /* END and the REF */
    c->rules = in.rules + 1;
    c->prev = c->rules;
    c->atom = 1;
    return check_elems(r, c);
}

static int emit(rx *r, uint32_t id, rx_cost *c, unsigned depth)
{
    const rx_node *nd = &r->nodes[id];
    r->at = nd->off;
    memset(c, 0, sizeof *c);
    c->prev = 1;
    switch (nd->kind) {
    case N_SET: {
        set_plan pl;
        size_t mark = r->n_rng;
        if (!plan_set(r, NULL, nd->first, nd->n, &pl))
            return 0;
        int ok = put_set(r, &pl, c);
        r->n_rng = mark;
        return ok;
    }
    case N_CAT: return emit_seq(r, nd->n ? r->kids + nd->first : NULL, nd->n, c, depth + 1);
    case N_ALT: {
        if (!puts_(r, "("))
            return 0;
        for (uint32_t k = 0; k < nd->n; k++) {
            rx_cost a;
            if ((k && !puts_(r, " | ")) || !emit_seq(r, r->kids + nd->first + k, 1, &a, depth + 1))
                return 0;
            c->elems += a.elems;
            c->rules += a.rules;
        }
        if (!puts_(r, ")"))
            return 0;
        c->elems += nd->n + 1; /* ALTs and END, and the REF */
        c->rules += 1;
        c->seq = 1;
        c->prev = c->rules;
        c->atom = 1;
        return check_elems(r, c);
    }
    case N_REP: {
        uint32_t m = nd->min, x = nd->max;
        if (x == 0) { /* matches the empty string only */
            c->atom = 1;
            return puts_(r, "\"\"");
        }
        rx_cost in;
        if (!emit_item(r, nd->first, &in, depth + 1))
            return 0;
        r->at = nd->off;
        if (m == 1 && x == 1) {
            *c = in;
            return 1;
        }
        int unbounded = x == UINT32_MAX;
        uint64_t total = !unbounded ? x : (m > 0 ? m : 1);
        if (in.prev * total >= SIFT__GBNF_MAX_REPETITION) {
            fail(r, nd->off, SIFT_E_SCHEMA_LIMIT,
                 "repetition expands to %llu copies in the grammar (limit %d)",
                 (unsigned long long)(in.prev * total), SIFT__GBNF_MAX_REPETITION);
            return 0;
        }
        char b[48];
        if (m == 0 && unbounded)
            snprintf(b, sizeof b, "*");
        else if (m == 1 && unbounded)
            snprintf(b, sizeof b, "+");
        else if (m == 0 && x == 1)
            snprintf(b, sizeof b, "?");
        else if (unbounded)
            snprintf(b, sizeof b, "{%u,}", (unsigned)m);
        else if (m == x)
            snprintf(b, sizeof b, "{%u}", (unsigned)m);
        else
            snprintf(b, sizeof b, "{%u,%u}", (unsigned)m, (unsigned)x);
        if (!puts_(r, b))
            return 0;
        uint64_t n_opt = unbounded ? 1 : (uint64_t)x - m;
        c->seq = (uint64_t)m * in.seq + (n_opt > 0);
        c->elems = in.elems - in.seq + c->seq + n_opt * (in.seq + 3);
        c->rules = in.rules + n_opt;
        c->prev = 1; /* no postfix follows */
        c->atom = 0;
        return check_elems(r, c);
    }
    default:
        fail(r, nd->off, SIFT_E_SCHEMA_UNSUPPORTED,
             "the anchor '%c' is supported only at the start or end of a top-level alternative",
             nd->kind == N_BOL ? '^' : '$');
        return 0;
    }
}

/* "Any JSON string character", repeated: the unanchored sides. */
static int emit_any_star(rx *r, rx_cost *c)
{
    static const uint32_t ALL[] = {0, RX_MAX_CP};
    set_plan pl;
    size_t mark = r->n_rng;
    rx_cost in;
    if (!plan_set(r, ALL, 0, 1, &pl) || !put_set(r, &pl, &in) || !puts_(r, "*"))
        return 0;
    r->n_rng = mark;
    c->seq = 1;
    c->elems = in.elems + 4;
    c->rules = in.rules + 1;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Lengths: a pattern beside minLength / maxLength                     */
/* ------------------------------------------------------------------ */

#define LEN_INF UINT64_MAX

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > LEN_INF - b ? LEN_INF : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    return a && b > LEN_INF / a ? LEN_INF : a * b;
}

/* The fewest and most code points a string matching node `id` has. */
static void len_range(const rx *r, uint32_t id, uint64_t *lo, uint64_t *hi)
{
    const rx_node *nd = &r->nodes[id];
    *lo = *hi = 0;
    switch (nd->kind) {
    case N_SET: *lo = *hi = 1; return;
    case N_CAT:
    case N_ALT:
        for (uint32_t k = 0; k < nd->n; k++) {
            uint64_t a, b;
            len_range(r, r->kids[nd->first + k], &a, &b);
            if (nd->kind == N_CAT) {
                *lo = sat_add(*lo, a), *hi = sat_add(*hi, b);
            } else {
                *lo = k == 0 || a < *lo ? a : *lo;
                *hi = b > *hi ? b : *hi;
            }
        }
        return;
    case N_REP: {
        uint64_t a, b;
        len_range(r, nd->first, &a, &b);
        *lo = sat_mul(a, nd->min);
        *hi = nd->max == UINT32_MAX ? (b ? LEN_INF : 0) : sat_mul(b, nd->max);
        return;
    }
    default: return; /* anchors */
    }
}

/* Fits the top-level alternative ids[0..n) (anchored at the start with
 * bol, at the end with eol) to the lengths len_lo..len_hi. Its lengths
 * may already lie inside them; else exactly one part of it may vary in
 * length, a repetition of a part of fixed length w (an unanchored side
 * is "any character" repeated), whose counts are then narrowed to those
 * that give a length inside: side[0] / side[1] get the counts of the
 * unanchored start / end (UINT32_MAX twice when not narrowed). 0 with
 * r->st set when the lengths cannot be kept this way. */
static int fit_lengths(rx *r, const uint32_t *ids, size_t n, int bol, int eol, uint32_t side[2][2])
{
    uint64_t lo = 0, hi = 0, fixed = 0, w = 1, m = 0, x = LEN_INF;
    size_t var = SIZE_MAX;
    int n_var = 0;
    side[0][0] = side[0][1] = side[1][0] = side[1][1] = UINT32_MAX;
    for (size_t k = 0; k < n; k++) {
        uint64_t a, b;
        len_range(r, ids[k], &a, &b);
        lo = sat_add(lo, a), hi = sat_add(hi, b);
        if (a == b)
            fixed = sat_add(fixed, a);
        else
            n_var++, var = k;
    }
    if (!bol)
        n_var++, hi = LEN_INF, var = n;
    if (!eol)
        n_var++, hi = LEN_INF, var = n + 1;
    if (lo >= r->len_lo && hi <= r->len_hi)
        return 1; /* the lengths hold already */
    const rx_node *nd = var < n ? &r->nodes[ids[var]] : NULL;
    if (nd && nd->kind == N_REP) {
        uint64_t a, b;
        len_range(r, nd->first, &a, &b);
        w = a == b ? a : 0;
        m = nd->min;
        x = nd->max == UINT32_MAX ? LEN_INF : nd->max;
    }
    if (n_var != 1 || (nd && (nd->kind != N_REP || w == 0))) {
        fail(r, nd ? nd->off : 0, SIFT_E_SCHEMA_UNSUPPORTED,
             "minLength / maxLength beside a pattern whose length varies in more than one "
             "repetition of a fixed-length part");
        return 0;
    }
    /* lengths fixed + k w, k in m..x: keep those in len_lo..len_hi */
    uint64_t kmin = r->len_lo > fixed ? (r->len_lo - fixed + w - 1) / w : 0;
    uint64_t kmax = r->len_hi == LEN_INF ? LEN_INF
                    : r->len_hi < fixed  ? 0
                                         : (r->len_hi - fixed) / w;
    if (kmin < m)
        kmin = m;
    if (kmax > x)
        kmax = x;
    if (r->len_hi < fixed || kmin > kmax || kmin >= UINT32_MAX ||
        (kmax != LEN_INF && kmax >= UINT32_MAX)) {
        fail(r, nd ? nd->off : 0, SIFT_E_SCHEMA_UNSUPPORTED,
             "no string of the lengths minLength / maxLength allow matches the pattern this way");
        return 0;
    }
    uint32_t k0 = (uint32_t)kmin, k1 = kmax == LEN_INF ? UINT32_MAX : (uint32_t)kmax;
    if (nd) {
        r->nodes[ids[var]].min = k0;
        r->nodes[ids[var]].max = k1;
    } else {
        side[var - n][0] = k0;
        side[var - n][1] = k1;
    }
    return 1;
}

/* "Any JSON string character" repeated k0..k1 times (k1 = UINT32_MAX:
 * unbounded): an unanchored side narrowed by fit_lengths. */
static int emit_any_rep(rx *r, uint32_t k0, uint32_t k1, rx_cost *c, unsigned depth)
{
    size_t start = r->n_rng;
    if (!add_range(r, 0, RX_MAX_CP))
        return 0;
    uint32_t set = new_node(r, N_SET, r->at);
    if (set == UINT32_MAX)
        return 0;
    r->nodes[set].first = (uint32_t)(start / 2);
    r->nodes[set].n = 1;
    uint32_t rep = new_node(r, N_REP, r->at);
    if (rep == UINT32_MAX)
        return 0;
    r->nodes[rep].first = set;
    r->nodes[rep].min = k0;
    r->nodes[rep].max = k1;
    return emit(r, rep, c, depth);
}

/* One top-level alternative: anchors stripped from its ends; a lone
 * group inside is opened so that its own alternatives are top level. */
static int emit_branch(rx *r, uint32_t id, int bol, int eol, int *first, rx_cost *total,
                       unsigned depth)
{
    const rx_node *nd = &r->nodes[id];
    const uint32_t *ids = &id;
    size_t n = 1;
    if (nd->kind == N_CAT) {
        ids = nd->n ? r->kids + nd->first : NULL;
        n = nd->n;
    }
    while (n > 0 && r->nodes[ids[0]].kind == N_BOL)
        ids++, n--, bol = 1;
    while (n > 0 && r->nodes[ids[n - 1]].kind == N_EOL)
        n--, eol = 1;
    if (n == 1 && (r->nodes[ids[0]].kind == N_ALT || r->nodes[ids[0]].kind == N_CAT) &&
        depth < RX_MAX_DEPTH + 2) {
        const rx_node *g = &r->nodes[ids[0]];
        if (g->kind == N_CAT)
            return emit_branch(r, ids[0], bol, eol, first, total, depth + 1);
        for (uint32_t k = 0; k < g->n; k++)
            if (!emit_branch(r, r->kids[g->first + k], bol, eol, first, total, depth + 1))
                return 0;
        return 1;
    }
    uint32_t side[2][2] = {{UINT32_MAX, UINT32_MAX}, {UINT32_MAX, UINT32_MAX}};
    if (r->len_on && !fit_lengths(r, ids, n, bol, eol, side))
        return 0;
    if (!*first && !puts_(r, " | "))
        return 0;
    *first = 0;
    rx_cost c;
    r->at = nd->off;
    total->elems++; /* its ALT or END */
    if (!bol) {
        if (!(side[0][0] == UINT32_MAX ? emit_any_star(r, &c)
                                       : emit_any_rep(r, side[0][0], side[0][1], &c, depth + 1)) ||
            (n > 0 && !puts_(r, " ")))
            return 0;
        cost_add(total, &c);
    }
    if (n > 0 || bol) {
        if (!emit_seq(r, ids, n, &c, depth + 1))
            return 0;
        cost_add(total, &c);
    }
    if (!eol && (bol || n > 0)) {
        r->at = nd->off;
        if (!puts_(r, " ") ||
            !(side[1][0] == UINT32_MAX ? emit_any_star(r, &c)
                                       : emit_any_rep(r, side[1][0], side[1][1], &c, depth + 1)))
            return 0;
        cost_add(total, &c);
    }
    return check_elems(r, total);
}

static void rx_free(rx *r)
{
    sift__free(r->al, r->nodes);
    sift__free(r->al, r->kids);
    sift__free(r->al, r->stk);
    sift__free(r->al, r->rng);
}

/* Both translations: JSON string content, unanchored (raw = 0), or raw
 * text that must match as a whole (raw = 1). */
static sift_status translate(const sift__alloc *al, const char *pattern, size_t len, size_t max_out,
                             int raw, const uint64_t *lengths, char **out, size_t *out_len,
                             sift_error *err)
{
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!al || !out || !out_len || (!pattern && len > 0))
        return sift__fail(err, SIFT_E_ARG, "%s: NULL argument", raw ? "regex" : "pattern");
    rx r;
    memset(&r, 0, sizeof r);
    r.al = al;
    r.s = (const unsigned char *)(pattern ? pattern : "");
    r.n = len;
    r.max_out = max_out;
    r.err = err;
    r.raw = raw;
    r.src = raw ? "regex" : "pattern";
    if (lengths) {
        r.len_on = 1;
        r.len_lo = lengths[0];
        r.len_hi = lengths[1];
    }
    size_t bad = 0;
    if (!sift__utf8_valid(r.s, r.n, &bad)) {
        sift_status st = fail(&r, bad, SIFT_E_SCHEMA_SYNTAX, "invalid UTF-8");
        rx_free(&r);
        return st;
    }
    uint32_t root = parse_alt(&r, 0);
    if (root != UINT32_MAX && r.i < r.n)
        fail(&r, r.i, SIFT_E_SCHEMA_SYNTAX, "unmatched ')'");
    if (!r.st) {
        int first = 1;
        rx_cost total = {0, 0, 0, 1, 0};
        /* raw text is matched whole: both ends are anchored */
        if (puts_(&r, "(") && emit_branch(&r, root, raw, raw, &first, &total, 0))
            puts_(&r, ")");
    }
    sift_status st = r.st;
    if (st) {
        sift__free(al, r.out);
    } else {
        *out = r.out;
        *out_len = r.n_out;
    }
    rx_free(&r);
    return st;
}

sift_status sift__json_regex_to_gbnf(const sift__alloc *al, const char *pattern, size_t len,
                                     size_t max_out, char **out, size_t *out_len, sift_error *err)
{
    return translate(al, pattern, len, max_out, 0, NULL, out, out_len, err);
}

sift_status sift__json_regex_to_gbnf_len(const sift__alloc *al, const char *pattern, size_t len,
                                         uint64_t min_len, uint64_t max_len, size_t max_out,
                                         char **out, size_t *out_len, sift_error *err)
{
    const uint64_t lengths[2] = {min_len, max_len};
    return translate(al, pattern, len, max_out, 0, lengths, out, out_len, err);
}

sift_status sift__regex_to_gbnf(const sift__alloc *al, const char *regex, size_t len,
                                size_t max_out, char **out, size_t *out_len, sift_error *err)
{
    return translate(al, regex, len, max_out, 1, NULL, out, out_len, err);
}

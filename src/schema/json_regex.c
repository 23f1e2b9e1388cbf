/*
 * json_regex.c - a JSON Schema "pattern" (ECMA-262 subset) -> one GBNF
 * expression over the JSON-encoded content of a string.
 *
 * This file owns the parser (pattern -> node tree), the errors and the
 * entry points; json_regex_emit.c owns the emitter that writes the tree
 * as GBNF (the types both use are in json_regex.h).
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

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

sift_status sift__json_regex_fail(rx *r, size_t off, sift_status code, const char *fmt, ...)
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

sift_status sift__json_regex_nomem(rx *r)
{
    if (r->st)
        return r->st;
    r->st = SIFT_E_NOMEM;
    return sift__fail(r->err, SIFT_E_NOMEM, "%s: out of memory", r->src);
}

/* ------------------------------------------------------------------ */
/* Arrays                                                              */
/* ------------------------------------------------------------------ */

uint32_t sift__json_regex_new_node(rx *r, uint32_t kind, size_t off)
{
    if (sift__reserve(r->al, &r->nodes, &r->cap_nodes, r->n_nodes, r->n_nodes + 1, sizeof *r->nodes,
                      32) ||
        r->n_nodes >= UINT32_MAX / 2) {
        sift__json_regex_nomem(r);
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
        sift__json_regex_nomem(r);
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
        sift__json_regex_nomem(r);
        return UINT32_MAX;
    }
    uint32_t id = sift__json_regex_new_node(r, kind, off);
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

int sift__json_regex_add_range(rx *r, uint32_t lo, uint32_t hi)
{
    if (sift__reserve(r->al, &r->rng, &r->cap_rng, r->n_rng, r->n_rng + 2, sizeof *r->rng, 64) ||
        r->n_rng >= UINT32_MAX / 2) {
        sift__json_regex_nomem(r);
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
            ok = sift__json_regex_add_range(r, next, lo - 1);
        next = hi + 1;
    }
    if (ok && next <= RX_MAX_CP)
        ok = sift__json_regex_add_range(r, next, RX_MAX_CP);
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
        if (!sift__json_regex_add_range(r, t[k], t[k + 1]))
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
                sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX,
                                      "escape \\u{...} is beyond U+10FFFF");
                return UINT32_MAX;
            }
            k++;
        }
        if (k == 3 || peek(r, k) != '}') {
            sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX,
                                  "escape \\u{ needs hex digits and a '}'");
            return UINT32_MAX;
        }
        if (v >= 0xD800 && v <= 0xDFFF) {
            sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                                  "a lone surrogate (\\u{%X}) is not supported", (unsigned)v);
            return UINT32_MAX;
        }
        r->i += k + 1;
        return v;
    }
    int64_t v = hex_digits(r, 2, 4);
    if (v < 0) {
        sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX, "escape \\u needs 4 hex digits");
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
        sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                              "a lone surrogate (\\u%04X) is not supported", (unsigned)v);
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
        sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX, "'\\' at the end of the pattern");
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
        sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                              "the word boundary \\b is not supported");
        return 0;
    case 'B':
        if (!in_class) {
            sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                                  "the non-word-boundary \\B is not supported");
            return 0;
        }
        break;
    case 'c': {
        int l = peek(r, 2);
        if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
            r->i += 3, *cp = (uint32_t)l % 32;
            return 1;
        }
        sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX, "escape \\c needs a letter");
        return 0;
    }
    case 'x': {
        int64_t v = hex_digits(r, 2, 2);
        if (v < 0) {
            sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX, "escape \\x needs 2 hex digits");
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
        sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                              "Unicode property escapes (\\%c{...}) are not supported", e);
        return 0;
    case 'k':
        if (!in_class && peek(r, 2) == '<') {
            sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                                  "backreferences (\\k<name>) are not supported");
            return 0;
        }
        break;
    case '0':
        if (peek(r, 2) < '0' || peek(r, 2) > '9') {
            r->i += 2, *cp = 0;
            return 1;
        }
        sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED, "octal escapes are not supported");
        return 0;
    default:
        if (e >= '1' && e <= '9') {
            if (in_class)
                sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                                      "octal escapes are not supported");
            else
                sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                                      "backreferences (\\%c) are not supported", e);
            return 0;
        }
        if (!((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))) {
            r->i++;
            *cp = next_cp(r); /* an identity escape: \. \- \/ \_ ... */
            return 1;
        }
        break;
    }
    sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX, "unknown escape '\\%c'", e);
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
            sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX, "unterminated character class");
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
                sift__json_regex_fail(r, dash, SIFT_E_SCHEMA_SYNTAX,
                                      "a class escape cannot bound a range");
                return UINT32_MAX;
            }
            if (hi < lo) {
                sift__json_regex_fail(r, item, SIFT_E_SCHEMA_SYNTAX,
                                      "range out of order in character class");
                return UINT32_MAX;
            }
            if (!sift__json_regex_add_range(r, lo, hi))
                return UINT32_MAX;
        } else if (kind == 2) {
            if (!add_class_escape(r, set, neg))
                return UINT32_MAX;
        } else if (!sift__json_regex_add_range(r, lo, lo)) {
            return UINT32_MAX;
        }
    }
    size_t m = normalize(r, start, neg);
    if (r->st)
        return UINT32_MAX;
    uint32_t id = sift__json_regex_new_node(r, N_SET, at);
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
    if (letter ? !add_class_escape(r, letter, 0) : !sift__json_regex_add_range(r, cp, cp))
        return UINT32_MAX;
    uint32_t id = sift__json_regex_new_node(r, N_SET, at);
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
            sift__json_regex_fail(r, r->i, SIFT_E_SCHEMA_SYNTAX,
                                  "nothing to repeat before this quantifier");
            return UINT32_MAX;
        }
        return sift__json_regex_new_node(r, c == '^' ? N_BOL : N_EOL, at);
    }
    if (quant_len(r, &qmin, &qmax)) {
        sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX,
                              "nothing to repeat before this quantifier");
        return UINT32_MAX;
    }
    if (c == '(') {
        if (depth >= RX_MAX_DEPTH) {
            sift__json_regex_fail(r, at, SIFT_E_SCHEMA_LIMIT, "groups nest deeper than %d",
                                  RX_MAX_DEPTH);
            return UINT32_MAX;
        }
        r->i++;
        if (peek(r, 0) == '?') {
            int q = peek(r, 1);
            if (q == ':') {
                r->i += 2;
            } else if (q == '=' || q == '!') {
                sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                                      "lookahead (?%c...) is not supported", q);
                return UINT32_MAX;
            } else if (q == '<' && (peek(r, 2) == '=' || peek(r, 2) == '!')) {
                sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                                      "lookbehind (?<%c...) is not supported", peek(r, 2));
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
                    sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX, "invalid group name");
                    return UINT32_MAX;
                }
                r->i += k + 1;
            } else if ((q >= 'a' && q <= 'z') || (q >= 'A' && q <= 'Z') || q == '-') {
                sift__json_regex_fail(r, at, SIFT_E_SCHEMA_UNSUPPORTED,
                                      "inline modifiers (?%c...) are not supported", q);
                return UINT32_MAX;
            } else {
                sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX, "invalid group '(?'");
                return UINT32_MAX;
            }
        }
        atom = parse_alt(r, depth + 1);
        if (atom == UINT32_MAX)
            return atom;
        if (peek(r, 0) != ')') {
            sift__json_regex_fail(r, at, SIFT_E_SCHEMA_SYNTAX, "unterminated group");
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
        sift__json_regex_fail(r, qat, SIFT_E_SCHEMA_SYNTAX, "numbers out of order in {%u,%u}",
                              (unsigned)qmin, (unsigned)qmax);
        return UINT32_MAX;
    }
    if (qmin > SIFT__GBNF_MAX_REPETITION ||
        (qmax != UINT32_MAX && qmax > SIFT__GBNF_MAX_REPETITION)) {
        sift__json_regex_fail(r, qat, SIFT_E_SCHEMA_LIMIT, "repetition count %u exceeds %d",
                              (unsigned)(qmin > SIFT__GBNF_MAX_REPETITION ? qmin : qmax),
                              SIFT__GBNF_MAX_REPETITION);
        return UINT32_MAX;
    }
    uint32_t dummy1, dummy2;
    if (quant_len(r, &dummy1, &dummy2)) {
        sift__json_regex_fail(r, r->i, SIFT_E_SCHEMA_SYNTAX,
                              "nothing to repeat before this quantifier");
        return UINT32_MAX;
    }
    uint32_t id = sift__json_regex_new_node(r, N_REP, qat);
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

void sift__json_regex_free(rx *r)
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
        sift_status st = sift__json_regex_fail(&r, bad, SIFT_E_SCHEMA_SYNTAX, "invalid UTF-8");
        sift__json_regex_free(&r);
        return st;
    }
    uint32_t root = parse_alt(&r, 0);
    if (root != UINT32_MAX && r.i < r.n)
        sift__json_regex_fail(&r, r.i, SIFT_E_SCHEMA_SYNTAX, "unmatched ')'");
    if (!r.st) {
        int first = 1;
        rx_cost total = {0, 0, 0, 1, 0};
        /* raw text is matched whole: both ends are anchored */
        if (sift__json_regex_puts(&r, "(") &&
            sift__json_regex_emit_branch(&r, root, raw, raw, &first, &total, 0))
            sift__json_regex_puts(&r, ")");
    }
    sift_status st = r.st;
    if (st) {
        sift__free(al, r.out);
    } else {
        *out = r.out;
        *out_len = r.n_out;
    }
    sift__json_regex_free(&r);
    return st;
}

sift_status sift__json_regex_parse(rx *r, const sift__alloc *al, const char *pattern, size_t len,
                                   size_t max_out, sift_error *err, uint32_t *root)
{
    memset(r, 0, sizeof *r);
    r->al = al;
    r->s = (const unsigned char *)(pattern ? pattern : "");
    r->n = pattern ? len : 0;
    r->max_out = max_out;
    r->err = err;
    r->src = "pattern";
    size_t bad = 0;
    if (!sift__utf8_valid(r->s, r->n, &bad))
        return sift__json_regex_fail(r, bad, SIFT_E_SCHEMA_SYNTAX, "invalid UTF-8");
    *root = parse_alt(r, 0);
    if (*root != UINT32_MAX && r->i < r->n)
        sift__json_regex_fail(r, r->i, SIFT_E_SCHEMA_SYNTAX, "unmatched ')'");
    return r->st;
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

/*
 * json_schema_scalar.c - strings, integers and numbers.
 *
 * Strings: "\"" char{minLength,maxLength} "\"" where char is one JSON
 * string character (an escape counts as one: a surrogate pair written
 * as two \u escapes counts as two, partial). "pattern" goes to the regex
 * translation (json_regex.h). A "format" from the table below is an
 * exact or documented-partial grammar of its own; another format goes
 * through the unsupported policy. A pattern with lengths is one
 * translation (json_regex.h, sift__json_regex_to_gbnf_len) when it can
 * be exact; other pairs of pattern / known format / lengths go through
 * the unsupported policy (IGNORE keeps the pattern, else the format, and
 * drops the rest).
 *
 * Integers: minimum/maximum and the exclusive forms (numbers of draft 6
 * on, booleans of draft 4) become an exact grammar of the decimal digit
 * strings in [lo, hi] (range below): per digit length, a common prefix
 * and then the "at least x" / "at most y" / any-digit alternatives,
 * linear in the number of digits. Bounds beyond +-9e15 count as absent
 * (partial). "-0" is not generated.
 *
 * multipleOf k (an integer up to 1000): the digits read with their
 * remainder modulo k, a rule per remainder (gen_multiple); with a lower
 * bound in (-k, 0] the non-negative multiples; other bounds, fractions
 * and larger k through the unsupported policy.
 *
 * Numbers with bounds: exact when every bound is an integer, without
 * exponents (a bounded number written with an exponent is rejected,
 * partial); fractional bounds go through the unsupported policy.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "json_regex.h"
#include "json_schema.h"
#include "json_schema_strlen.h"

#define BOUND_MAX 9e15

static void set_name(sift__js_ref *r, const char *name)
{
    r->never = 0;
    snprintf(r->name, sizeof r->name, "%s", name);
}

/* ------------------------------------------------------------------ */
/* Formats                                                             */
/* ------------------------------------------------------------------ */

/* Month lengths exact; 02-29 only in leap years (divisible by 4, and
 * by 400 for centuries). */
#define DAY28 "(\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])"
#define LEAP                                                                                    \
    "([0-9] [0-9] (\"0\" [48] | [2468] [048] | [13579] [26]) | ([02468] [048] | [13579] [26]) " \
    "\"00\")"
#define DATE                                                                                   \
    "([0-9]{4} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (" DAY28 " | \"29\" | \"3\" [01]) | " \
    "(\"0\" [469] | \"11\") \"-\" (" DAY28 " | \"29\" | \"30\") | \"02-\" " DAY28 ") | " LEAP  \
    " \"-02-29\")"
/* A leap second (:60) only as 23:59:60 in UTC (Z or a zero offset):
 * RFC 3339 allows it at the last minute of a UTC day, which under
 * another offset is another local minute; those forms are rejected. */
#define FRAC "(\".\" [0-9]+)?"
#define TIME                                                                           \
    "(([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] " FRAC            \
    " ([Zz] | [-+] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9]) | \"23:59:60\" " FRAC \
    " ([Zz] | [-+] \"00:00\"))"
#define OCTET "(\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9])"
#define IPV4 OCTET " \".\" " OCTET " \".\" " OCTET " \".\" " OCTET
#define H16 "[0-9a-fA-F]{1,4}"
/* "ls" stands for ls32 (see format_rule) */
#define IPV6                                                                            \
    "(" H16 " \":\"){6} ls | \"::\" (" H16 " \":\"){5} ls | (" H16 ")? \"::\" (" H16    \
    " \":\"){4} ls | ((" H16 " \":\")? " H16 ")? \"::\" (" H16 " \":\"){3} ls | ((" H16 \
    " \":\"){0,2} " H16 ")? \"::\" (" H16 " \":\"){2} ls | ((" H16 " \":\"){0,3} " H16  \
    ")? \"::\" " H16 " \":\" ls | ((" H16 " \":\"){0,4} " H16 ")? \"::\" ls | ((" H16   \
    " \":\"){0,5} " H16 ")? \"::\" " H16 " | ((" H16 " \":\"){0,6} " H16 ")? \"::\""
/* RFC 1123 labels (letters, digits, inner hyphens). The whole name
 * must fit 253 bytes, which a context-free grammar can only count with a
 * rule per (length, label length) pair; the grammar is tighter instead:
 * a first label of up to 63 bytes, then at most 7 labels of up to 26
 * (63 + 7 * 27 = 252 bytes). */
/* A label never holds "--" in its 3rd and 4th places: RFC 5891 (4.2.3.1)
 * keeps that for A-labels ("xn--"), whose Punycode and IDNA rules the
 * grammar cannot check, so they are rejected. LABEL_N(k): a label of 1
 * to k + 5 bytes. */
#define LABEL_A "[a-zA-Z0-9]"
#define LABEL_M "[a-zA-Z0-9\\-]"
#define LABEL_N(k)                                                                          \
    LABEL_A " (" LABEL_A " | " LABEL_M " " LABEL_A " | " LABEL_M " " LABEL_M " " LABEL_A    \
            " | " LABEL_M " (" LABEL_A " " LABEL_M " | \"-\" " LABEL_A ") " LABEL_M "{0," k \
            "} " LABEL_A ")?"
#define LABEL LABEL_N("58")
#define LABEL26 LABEL_N("21")
#define HOST LABEL " (\".\" " LABEL26 "){0,7}"
/* RFC 3986, section 3 and appendix A (the ABNF rule names in comments);
 * characters a JSON string would have to escape do not occur in it. */
#define UNRES "a-zA-Z0-9\\-._~"
#define SUBD "!$&'()*+,;="
#define PCT "\"%\" [0-9a-fA-F] [0-9a-fA-F]"
#define PCHAR "([" UNRES SUBD ":@] | " PCT ")"
#define SEGNZ PCHAR "+"
#define SEGNZNC "([" UNRES SUBD "@] | " PCT ")+"
#define PABEMPTY "(\"/\" " PCHAR "*)*"
/* authority: [userinfo "@"] host [":" port]; host: IP-literal or
 * reg-name (which holds every IPv4address) */
#define AUTHORITY                                                                      \
    "(([" UNRES SUBD ":] | " PCT ")* \"@\")? (\"[\" (" IPV6                            \
    " | \"v\" [0-9a-fA-F]+ \".\" [" UNRES SUBD ":]+) \"]\" | ([" UNRES SUBD "] | " PCT \
    ")*) (\":\" [0-9]*)?"
/* [ "?" query ] [ "#" fragment ] */
#define QUERY_FRAGMENT \
    "(\"?\" ([" UNRES SUBD ":@/?] | " PCT ")*)? (\"#\" ([" UNRES SUBD ":@/?] | " PCT ")*)?"
/* hier-part / relative-part: "//" authority path-abempty, path-absolute,
 * path-rootless (path-noscheme for a relative reference), path-empty */
#define HIER(first_segment)                                                                 \
    "(\"//\" " AUTHORITY " " PABEMPTY " | \"/\" (" SEGNZ " " PABEMPTY ")? | " first_segment \
    " " PABEMPTY ")? " QUERY_FRAGMENT
#define URI "[a-zA-Z] [a-zA-Z0-9+.\\-]* \":\" " HIER(SEGNZ)
#define RELATIVE_REF HIER(SEGNZNC)

static const struct {
    const char *name, *body;
    /* the lengths of the strings it matches (max -1: unbounded) */
    int min_len, max_len;
} formats[] = {
    {"date", DATE, 10, 10},
    {"time", TIME, 9, -1},
    {"date-time", DATE " [Tt] " TIME, 20, -1},
    {"uuid",
     "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
     "\"-\" [0-9a-fA-F]{12}",
     36, 36},
    {"ipv4", IPV4, 7, 15},
    {"ipv6", IPV6, 2, 45},
    {"hostname", HOST, 1, 252},
    {"email",
     "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~\\-]+ (\".\" [a-zA-Z0-9!#$%&'*+/=?^_`{|}~\\-]+)* "
     "\"@\" " HOST,
     3, -1},
    {"uri", URI, 2, -1},
    {"uri-reference", "(" URI ") | (" RELATIVE_REF ")", 0, -1},
    {"byte", "([A-Za-z0-9+/]{4})* ([A-Za-z0-9+/]{2} \"==\" | [A-Za-z0-9+/]{3} \"=\")?", 0, -1},
};

/* Formats of the JSON Schema vocabulary this converter does not
 * express; other (custom) formats are annotations, ignored as a
 * validator ignores them. */
static const char *const standard_formats[] = {
    "idn-email",    "idn-hostname",          "iri",   "iri-reference", "uri-template",
    "json-pointer", "relative-json-pointer", "regex", "duration",
};

int sift__js_format_known(const char *f)
{
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (!strcmp(f, formats[i].name))
            return 1;
    for (size_t i = 0; i < sizeof standard_formats / sizeof standard_formats[0]; i++)
        if (!strcmp(f, standard_formats[i]))
            return 1;
    return 0;
}

/* The rule of format `f` (index i), made on first use. ipv6 uses "ls"
 * (ls32: two groups or an IPv4 address), written in its place. */
static sift_status format_rule(sift__js *c, size_t i, sift__js_ref *r)
{
    if (c->formats[i].name[0]) {
        *r = c->formats[i];
        return SIFT_OK;
    }
    sift__js_buf b = {0};
    sift_status st = SIFT_OK;
    const char *body = formats[i].body;
    if (strstr(body, IPV6)) {
        sift__js_ref ls;
        st = sift__js_rule(c, &ls, "[0-9a-fA-F]{1,4} \":\" [0-9a-fA-F]{1,4} | " IPV4);
        for (const char *p = body; !st && *p; p++) {
            if (p[0] == 'l' && p[1] == 's') {
                st = sift__js_puts(c, &b, ls.name);
                p++;
            } else {
                st = sift__js_put(c, &b, p, 1);
            }
        }
        body = b.p;
    }
    if (!st) {
        sift__js_buf q = {0};
        st = sift__js_printf(c, &q, "\"\\\"\" (");
        if (!st)
            st = sift__js_puts(c, &q, body);
        if (!st)
            st = sift__js_puts(c, &q, ") \"\\\"\"");
        if (!st)
            st = sift__js_rule(c, r, q.p);
        sift__js_buf_free(c, &q);
    }
    sift__js_buf_free(c, &b);
    if (!st)
        c->formats[i] = *r;
    return st;
}

/* ------------------------------------------------------------------ */
/* Strings                                                             */
/* ------------------------------------------------------------------ */

/* The pattern's rule; with lengths (lens != NULL: lo, hi, has_hi), the
 * strings it matches that have them (json_regex.h says when that is
 * exact; otherwise unsupported, at the length keyword). */
static sift_status gen_pattern(sift__js *c, const char *pat, size_t len, const int64_t *lens,
                               sift__js_ref *r, int *done)
{
    char *re = NULL;
    size_t n = 0;
    sift_error rerr;
    *done = 0;
    sift_status st =
        lens ? sift__json_regex_to_gbnf_len(c->al, pat, len, (uint64_t)lens[0],
                                            lens[2] ? (uint64_t)lens[1] : UINT64_MAX,
                                            c->max_grammar, &re, &n, &rerr)
             : sift__json_regex_to_gbnf(c->al, pat, len, c->max_grammar, &re, &n, &rerr);
    if (st == SIFT_E_SCHEMA_UNSUPPORTED && lens && strstr(rerr.message, "minLength / maxLength")) {
        /* the general construction (json_schema_strlen.c); beyond its
         * bounds, under the ignore policy the pattern alone */
        st = sift__js_pattern_lengths(c, pat, len, (uint64_t)lens[0], (uint64_t)lens[1],
                                      (int)lens[2], r, rerr.message, sizeof rerr.message);
        *done = !st;
        if (st != SIFT_E_SCHEMA_UNSUPPORTED)
            return st == SIFT_E_NOMEM ? sift__js_fail(c, st, NULL, "out of memory") : st;
        st = sift__js_unsupported(c, lens[0] ? "minLength" : "maxLength", "%s", rerr.message);
        return st ? st : gen_pattern(c, pat, len, NULL, r, done);
    }
    if (st == SIFT_E_NOMEM)
        return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
    if (st == SIFT_E_SCHEMA_UNSUPPORTED)
        return sift__js_unsupported(c, "pattern", "%s", rerr.message);
    if (st)
        return sift__js_fail(c,
                             st == SIFT_E_SCHEMA_LIMIT ? SIFT_E_SCHEMA_LIMIT : SIFT_E_SCHEMA_SYNTAX,
                             "pattern", "%s", rerr.message);
    sift__js_buf b = {0};
    st = sift__js_puts(c, &b, "\"\\\"\" ");
    if (!st)
        st = sift__js_put(c, &b, re, n);
    if (!st)
        st = sift__js_puts(c, &b, " \"\\\"\"");
    if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    sift__free(c->al, re);
    *done = !st;
    return st;
}

/* One character of a string whose length is counted. JSON Schema counts
 * code points, and a surrogate pair written as two \u escapes is one;
 * the grammar counts escapes, so it admits no surrogate escape there (a
 * character beyond U+FFFF is written raw, as UTF-8). */
static sift_status length_char(sift__js *c, const char **name)
{
    sift_status st = SIFT_OK;
    if (!c->len_char.name[0])
        st = sift__js_rule(c, &c->len_char,
                           "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
                           "([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))");
    *name = c->len_char.name;
    return st;
}

/* Lengths over the repetition limit, exactly, in blocks of 1000
 * characters: lo characters, then at most d = hi - lo more, written as
 * (fewer than q blocks and < 1000) | (q blocks and <= r), d = 1000 q + r. */
static sift_status gen_long_string(sift__js *c, int64_t lo, int64_t hi, int has_hi, sift__js_ref *r)
{
    const char *ch;
    sift_status st = length_char(c, &ch);
    if (st)
        return st;
    int64_t d = hi - lo;
    if (lo / 1000 > SIFT__JS_MAX_REPEAT || (has_hi && d / 1000 > SIFT__JS_MAX_REPEAT))
        return sift__js_fail(
            c, SIFT_E_SCHEMA_LIMIT, lo / 1000 > SIFT__JS_MAX_REPEAT ? "minLength" : "maxLength",
            "string lengths over %d are not supported", 1000 * SIFT__JS_MAX_REPEAT);
    sift__js_ref k;
    char kb[40];
    snprintf(kb, sizeof kb, "%s{1000}", ch);
    st = sift__js_rule(c, &k, kb);
    sift__js_buf b = {0};
    if (!st)
        st = sift__js_printf(c, &b, "\"\\\"\" %s{%lld} %s{%lld} ", k.name, (long long)(lo / 1000),
                             ch, (long long)(lo % 1000));
    if (!st && !has_hi)
        st = sift__js_printf(c, &b, "%s*", ch);
    else if (!st && d / 1000 == 0)
        st = sift__js_printf(c, &b, "%s{0,%lld}", ch, (long long)d);
    else if (!st)
        st = sift__js_printf(c, &b, "(%s{0,%lld} %s{0,999} | %s{%lld} %s{0,%lld})", k.name,
                             (long long)(d / 1000 - 1), ch, k.name, (long long)(d / 1000), ch,
                             (long long)(d % 1000));
    if (!st)
        st = sift__js_puts(c, &b, " \"\\\"\"");
    if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    return st;
}

sift_status sift__js_gen_string(sift__js *c, const json_t *s, sift__js_ref *r)
{
    const json_t *pat = json_object_get(s, "pattern");
    const json_t *fmt = json_object_get(s, "format");
    int done = 0, has_lo, has_hi;
    int64_t lo = 0, hi = 0;
    sift_status st = SIFT_OK;
    if (pat && !json_is_string(pat))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "pattern", "'pattern' must be a string");
    if (fmt && !json_is_string(fmt))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "format", "'format' must be a string");
    if (c->format_annotation)
        fmt = NULL;
    if ((st = sift__js_get_count(c, s, "minLength", &lo, &has_lo)) ||
        (st = sift__js_get_count(c, s, "maxLength", &hi, &has_hi)))
        return st;
    int known_fmt = 0;
    for (size_t i = 0; fmt && i < sizeof formats / sizeof formats[0]; i++)
        known_fmt |= !strcmp(json_string_value(fmt), formats[i].name);
    /* The grammar keeps one of pattern / format / lengths: two of them
     * together cannot be intersected, so they are refused (the IGNORE
     * policy keeps the first of pattern, format, lengths). */
    if (pat && known_fmt &&
        (st = sift__js_unsupported(c, "format", "'format' beside 'pattern' is not supported")))
        return st;
    if (!pat && known_fmt && (has_lo || has_hi)) {
        /* lengths every string of the format has already: the format
         * alone; lengths none of them has: no string */
        int fmin = 0, fmax = -1;
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            if (!strcmp(json_string_value(fmt), formats[i].name))
                fmin = formats[i].min_len, fmax = formats[i].max_len;
        if ((has_hi && hi < fmin) || (fmax >= 0 && lo > fmax) || (has_hi && hi < lo)) {
            r->never = 1;
            return SIFT_OK;
        }
        if (lo <= fmin && (!has_hi || (fmax >= 0 && fmax <= hi)))
            has_lo = has_hi = 0, lo = hi = 0;
        else if ((st = sift__js_unsupported(c, has_lo ? "minLength" : "maxLength",
                                            "'%s' beside 'format' is not supported",
                                            has_lo ? "minLength" : "maxLength")))
            return st;
    }
    if (pat) {
        const int64_t lens[3] = {has_lo ? lo : 0, hi, has_hi};
        if (has_hi && hi < lo) {
            r->never = 1;
            return SIFT_OK;
        }
        st = gen_pattern(c, json_string_value(pat), json_string_length(pat),
                         has_lo || has_hi ? lens : NULL, r, &done);
        if (st || done)
            return st;
    }
    if (fmt) {
        const char *f = json_string_value(fmt);
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            if (!strcmp(f, formats[i].name))
                return format_rule(c, i, r);
        for (size_t i = 0; i < sizeof standard_formats / sizeof standard_formats[0]; i++)
            if (!strcmp(f, standard_formats[i]) &&
                (st = sift__js_unsupported(c, "format", "format \"%.60s\" is not supported", f)))
                return st;
    }
    if (!has_lo && !has_hi) {
        set_name(r, sift__js_shared(c, SIFT__JS_R_STRING));
        return SIFT_OK;
    }
    if (has_hi && hi < lo) {
        r->never = 1;
        return SIFT_OK;
    }
    if (lo > SIFT__JS_MAX_REPEAT || hi > SIFT__JS_MAX_REPEAT)
        return gen_long_string(c, lo, hi, has_hi, r);
    const char *ch;
    if ((st = length_char(c, &ch)))
        return st;
    char body[96];
    if (has_hi)
        snprintf(body, sizeof body, "\"\\\"\" %s{%lld,%lld} \"\\\"\"", ch, (long long)lo,
                 (long long)hi);
    else
        snprintf(body, sizeof body, "\"\\\"\" %s{%lld,} \"\\\"\"", ch, (long long)lo);
    return sift__js_rule(c, r, body);
}

/* ------------------------------------------------------------------ */
/* Digit ranges                                                        */
/* ------------------------------------------------------------------ */

static sift_status digit_class(sift__js *c, sift__js_buf *b, int lo, int hi)
{
    if (lo == hi)
        return sift__js_printf(c, b, "\"%d\"", lo);
    return sift__js_printf(c, b, "[%d-%d]", lo, hi);
}

static sift_status any_digits(sift__js *c, sift__js_buf *b, size_t m)
{
    if (m == 0)
        return SIFT_OK;
    return m == 1 ? sift__js_puts(c, b, " [0-9]") : sift__js_printf(c, b, " [0-9]{%zu}", m);
}

static int all_of(const char *s, size_t n, char d)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != d)
            return 0;
    return 1;
}

/* Strings of length n that are >= s (ge = 1) or <= s (ge = 0). */
static sift_status bound(sift__js *c, sift__js_buf *b, const char *s, size_t n, int ge)
{
    if (n == 0)
        return SIFT_OK;
    if (all_of(s, n, ge ? '0' : '9'))
        return sift__js_printf(c, b, "[0-9]{%zu}", n);
    int d = s[0] - '0';
    sift_status st = sift__js_printf(c, b, "(\"%d\" ", d);
    if (!st)
        st = bound(c, b, s + 1, n - 1, ge);
    if (!st && (ge ? d < 9 : d > 0)) {
        st = sift__js_puts(c, b, " | ");
        if (!st)
            st = ge ? digit_class(c, b, d + 1, 9) : digit_class(c, b, 0, d - 1);
        if (!st)
            st = any_digits(c, b, n - 1);
    }
    return st ? st : sift__js_puts(c, b, ")");
}

/* Strings of equal length between x and y (x <= y). */
static sift_status same_len(sift__js *c, sift__js_buf *b, const char *x, const char *y, size_t n)
{
    size_t d = 0;
    while (d < n && x[d] == y[d])
        d++;
    sift_status st = sift__js_work(c, 1);
    if (!st && d > 0)
        st = sift__js_lit(c, b, x, d);
    if (st || d == n)
        return st;
    size_t m = n - d - 1;
    int xd = x[d] - '0', yd = y[d] - '0';
    int xz = all_of(x + d + 1, m, '0'), yn = all_of(y + d + 1, m, '9');
    int mid_lo = xz ? xd : xd + 1, mid_hi = yn ? yd : yd - 1;
    int alts = 0;
    st = sift__js_puts(c, b, d ? " (" : "(");
    if (!st && !xz) {
        st = sift__js_printf(c, b, "\"%d\" ", xd);
        if (!st)
            st = bound(c, b, x + d + 1, m, 1);
        alts++;
    }
    if (!st && mid_lo <= mid_hi) {
        st = sift__js_puts(c, b, alts++ ? " | " : "");
        if (!st)
            st = digit_class(c, b, mid_lo, mid_hi);
        if (!st)
            st = any_digits(c, b, m);
    }
    if (!st && !yn) {
        st = sift__js_printf(c, b, "%s\"%d\" ", alts++ ? " | " : "", yd);
        if (!st)
            st = bound(c, b, y + d + 1, m, 0);
    }
    return st ? st : sift__js_puts(c, b, ")");
}

/* Decimal strings (no leading zeros) of the integers in [a, b], b = inf
 * without has_b; a <= b. */
static sift_status pos_range(sift__js *c, sift__js_buf *out, uint64_t a, uint64_t b, int has_b)
{
    char xs[24], ys[24];
    int la = snprintf(xs, sizeof xs, "%llu", (unsigned long long)a);
    int lb = has_b ? snprintf(ys, sizeof ys, "%llu", (unsigned long long)b) : la;
    sift_status st = sift__js_puts(c, out, "(");
    uint64_t p10 = 1;
    for (int i = 1; i < la; i++)
        p10 *= 10;
    for (int len = la; !st && len <= lb; len++, p10 *= 10) {
        uint64_t lo = len == la ? a : p10, hi = p10 * 10 - 1;
        if (has_b && b < hi)
            hi = b;
        char x[24], y[24];
        snprintf(x, sizeof x, "%0*llu", len, (unsigned long long)lo);
        snprintf(y, sizeof y, "%0*llu", len, (unsigned long long)hi);
        if (len > la)
            st = sift__js_puts(c, out, " | ");
        if (!st)
            st = same_len(c, out, x, y, (size_t)len);
    }
    if (!st && !has_b)
        st = sift__js_printf(c, out, " | [1-9] [0-9]{%d,}", la);
    return st ? st : sift__js_puts(c, out, ")");
}

typedef struct bounds {
    int has_lo, has_hi, lo_excl, hi_excl;
    double lo, hi;
} bounds;

static sift_status read_bound(sift__js *c, const json_t *s, const char *key, const char *ekey,
                              int upper, bounds *bd)
{
    const json_t *v = json_object_get(s, key), *e = json_object_get(s, ekey);
    if (v && !json_is_number(v))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, key, "'%s' must be a number", key);
    if (e && !json_is_number(e) && !json_is_boolean(e))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, ekey, "'%s' must be a number", ekey);
    int has = 0, excl = 0;
    double x = 0;
    if (v) {
        has = 1;
        x = json_number_value(v);
        excl = json_is_true(e); /* draft 4 */
    }
    if (e && json_is_number(e)) {
        double y = json_number_value(e);
        if (!has || (upper ? y <= x : y >= x)) {
            x = y;
            excl = 1;
        }
        has = 1;
    }
    if (has && fabs(x) > BOUND_MAX) {
        /* beyond the exact digit grammars: refused (under the ignore
         * policy, a warning and no bound) */
        sift_status st = sift__js_unsupported(c, e && x == json_number_value(e) ? ekey : key,
                                              "a bound beyond +-9e15 is not supported");
        if (st)
            return st;
        has = 0;
        x = 0; /* the bound is dropped: nothing may convert it later */
    }
    if (upper) {
        bd->has_hi = has, bd->hi = x, bd->hi_excl = excl;
    } else {
        bd->has_lo = has, bd->lo = x, bd->lo_excl = excl;
    }
    return SIFT_OK;
}

/* "-"? and the ranges of integers in [lo, hi] (either may be absent). */
static sift_status int_range(sift__js *c, sift__js_buf *b, int has_lo, int64_t lo, int has_hi,
                             int64_t hi)
{
    sift_status st = SIFT_OK;
    int alts = 0;
    if (!has_hi || hi >= 0) {
        st =
            pos_range(c, b, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi ? (uint64_t)hi : 0, has_hi);
        alts++;
    }
    if (!st && (!has_lo || lo < 0)) {
        uint64_t mlo = has_hi && hi < 0 ? (uint64_t)-hi : 1;
        st = sift__js_puts(c, b, alts ? " | \"-\" " : "\"-\" ");
        if (!st)
            st = pos_range(c, b, mlo, has_lo ? (uint64_t)-lo : 0, has_lo);
    }
    return st;
}

static sift_status gen_integer(sift__js *c, const bounds *bd, sift__js_ref *r)
{
    int64_t lo = 0, hi = 0;
    if (bd->has_lo)
        lo = bd->lo_excl ? (int64_t)floor(bd->lo) + 1 : (int64_t)ceil(bd->lo);
    if (bd->has_hi)
        hi = bd->hi_excl ? (int64_t)ceil(bd->hi) - 1 : (int64_t)floor(bd->hi);
    if (bd->has_lo && bd->has_hi && lo > hi) {
        r->never = 1;
        return SIFT_OK;
    }
    /* a zero fraction keeps an integer an integer (1.0) */
    sift__js_buf b = {0};
    sift_status st = sift__js_puts(c, &b, "(");
    if (!st)
        st = int_range(c, &b, bd->has_lo, lo, bd->has_hi, hi);
    if (!st)
        st = sift__js_puts(c, &b, c->int_fraction ? ") (\".\" \"0\"+)?" : ")");
    if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    return st;
}

/* The most leading zeros (or nines) a fraction after integer part a
 * may have and still read, as a double, apart from a (or from a + 1):
 * it is then 10^-(z+1) or more from them, over half the spacing of
 * doubles there (high: near a + 1 too). -1 when no fraction is that far
 * (from 2^52 on). */
static int frac_room(uint64_t a, int high)
{
    double x = (double)a, ulp = nextafter(x + 1, INFINITY) - (x + 1);
    if (a == 0 && !high)
        ulp = nextafter(0.0, 1.0);                  /* the smallest subnormal */
    double z = floor(-log10(ulp) + log10(2.0)) - 2; /* -log10(ulp / 2), ulp / 2 may be 0 */
    return z < 0 ? -1 : z > 400 ? 400 : (int)z;
}

/* The fraction after an integer part k of a real: any (with none), or
 * one that keeps the value above k (low: exclusive lower bound k) and /
 * or below k + 1 (high: exclusive upper bound k + 1) when read as a
 * double: leading zeros (nines) at most frac_room. *none: no fraction
 * (and, under low, no k) can be written. */
static sift_status frac_part(sift__js *c, sift__js_buf *b, uint64_t k, int low, int high, int *none)
{
    int z = frac_room(k, high);
    *none = 0;
    if (!low && !high)
        return sift__js_puts(c, b, " (\".\" [0-9]+)?");
    if (z < 0) { /* the integer alone, or nothing */
        *none = low;
        return low ? SIFT_OK : sift__js_puts(c, b, " (\".\" \"0\"+)?");
    }
    sift_status st = sift__js_puts(c, b, " (\".\" ([1-8] [0-9]*");
    if (!st && !low)
        st = sift__js_puts(c, b, " | \"0\" [0-9]*");
    else if (!st && z >= 1)
        st = sift__js_printf(c, b, " | \"0\"{1,%d} [1-9] [0-9]*", z);
    if (!st && !high)
        st = sift__js_puts(c, b, " | \"9\" [0-9]*");
    else if (!st && z >= 1)
        st = sift__js_printf(c, b, " | \"9\"{1,%d} ([0-8] [0-9]*)?", z);
    if (!st)
        st = sift__js_puts(c, b, low ? "))" : "))?");
    return st;
}

/* Non-negative reals y with integer bounds: A (lower, excl_a) <= y and
 * y <= B (upper, excl_b; has_b), written without exponent. Next to an
 * exclusive bound a fraction keeps clear of it (frac_part), so that a
 * validator reading the number as a double agrees: 1.0000000000000000001
 * reads as 1. */
static sift_status pos_real(sift__js *c, sift__js_buf *b, uint64_t A, int excl_a, int has_b,
                            uint64_t B, int excl_b, int *alts)
{
    static const char zero[] = " (\".\" \"0\"+)?";
    sift_status st = SIFT_OK;
    if (has_b && B < A)
        return SIFT_OK;
    if (has_b && A == B) {
        if (excl_a || excl_b)
            return SIFT_OK;
        st = sift__js_printf(c, b, "%s\"%llu\"%s", (*alts)++ ? " | " : "", (unsigned long long)A,
                             zero);
        return st;
    }
    /* intpart = A */
    sift__js_buf f = {0};
    int none = 0;
    st = frac_part(c, &f, A, excl_a, has_b && excl_b && A + 1 == B, &none);
    if (!st && !none)
        st = sift__js_printf(c, b, "%s\"%llu\"%s", (*alts)++ ? " | " : "", (unsigned long long)A,
                             f.p);
    /* A < intpart < B (the last one apart when B is exclusive) */
    uint64_t top = has_b && excl_b ? B - 2 : B - 1;
    if (!st && (!has_b || (B >= 2 && A + 1 <= top))) {
        st = sift__js_puts(c, b, " | ");
        if (!st)
            st = pos_range(c, b, A + 1, has_b ? top : 0, has_b);
        if (!st)
            st = sift__js_puts(c, b, " (\".\" [0-9]+)?");
    }
    if (!st && has_b && excl_b && B >= 1 && B - 1 > A) {
        f.n = 0;
        st = frac_part(c, &f, B - 1, 0, 1, &none);
        if (!st)
            st = sift__js_printf(c, b, " | \"%llu\"%s", (unsigned long long)(B - 1), f.p);
    }
    sift__js_buf_free(c, &f);
    /* intpart = B */
    if (!st && has_b && !excl_b)
        st = sift__js_printf(c, b, " | \"%llu\"%s", (unsigned long long)B, zero);
    return st;
}

static int integral(double x)
{
    return x == floor(x);
}

/* The shortest decimal spelling of x > 0 that reads back as x, split at
 * its point: int_part, and the fraction digits in frac (the last one not
 * 0). 0 when it would need an exponent. */
static int decimal_parts(double x, uint64_t *int_part, char *frac, size_t cap)
{
    char t[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, x);
        if (strtod(t, NULL) == x)
            break;
    }
    const char *dot = strchr(t, '.');
    if (strpbrk(t, "eEn") || !dot || strlen(dot + 1) + 1 > cap || x >= BOUND_MAX)
        return 0;
    *int_part = (uint64_t)floor(x);
    snprintf(frac, cap, "%s", dot + 1);
    return 1;
}

/* Fraction digit strings g (not empty) with 0.g >= 0.f (ge = 1) or
 * 0.g <= 0.f (ge = 0), f not empty, its last digit not 0: digit by digit,
 * a larger (smaller) digit settles it; an equal one goes on; past f's
 * digits any digits (>=) or zeros (<=); ending early is smaller. */
static sift_status frac_cmp(sift__js *c, sift__js_buf *b, const char *f, int ge, int top)
{
    int d = *f - '0', alts = 0;
    sift_status st = sift__js_puts(c, b, "(");
    if (!st && !ge && !top)
        st = sift__js_puts(c, b, "\"\""), alts++;
    if (!st && (ge ? d < 9 : d > 0))
        st = sift__js_printf(c, b, "%s[%d-%d] [0-9]*", alts++ ? " | " : "", ge ? d + 1 : 0,
                             ge ? 9 : d - 1);
    if (!st)
        st = sift__js_printf(c, b, "%s\"%d\" ", alts++ ? " | " : "", d);
    if (!st && f[1])
        st = frac_cmp(c, b, f + 1, ge, 0);
    else if (!st)
        st = sift__js_puts(c, b, ge ? "[0-9]*" : "\"0\"*");
    return st ? st : sift__js_puts(c, b, ")");
}

/* A number range with one fractional bound, inclusive and above 0, and
 * the other bound an integer or absent (a lower one >= 0): minimum 0.5,
 * or 0 <= x <= 3.5. The fraction is compared digit by digit with the
 * bound's shortest decimal spelling; a number between that spelling and
 * the double it stands for reads as that double, so a validator that
 * compares doubles agrees. Exclusive fractional bounds (where it would
 * not), negative ones, two fractional ones: *done = 0. */
static sift_status gen_frac_bound(sift__js *c, const bounds *bd, sift__js_ref *r, int *done)
{
    int lo_frac = bd->has_lo && !integral(bd->lo), hi_frac = bd->has_hi && !integral(bd->hi);
    char frac[40];
    uint64_t ip;
    *done = 0;
    if ((lo_frac && hi_frac) || (lo_frac && (bd->lo_excl || bd->lo <= 0)) ||
        (hi_frac && (bd->hi_excl || bd->hi <= 0 || !bd->has_lo || bd->lo < 0)) ||
        !decimal_parts(lo_frac ? bd->lo : bd->hi, &ip, frac, sizeof frac) ||
        (hi_frac && bd->lo_excl && (uint64_t)bd->lo == ip))
        return SIFT_OK;
    if ((lo_frac && bd->has_hi && bd->hi < bd->lo) || (hi_frac && bd->lo > bd->hi)) {
        r->never = 1; /* an empty range */
        *done = 1;
        return SIFT_OK;
    }
    sift__js_buf b = {0};
    sift_status st = SIFT_OK;
    int alts = 0;
    if (lo_frac) {
        /* ip.frac <= x: ip "." (>= frac), then (ip, hi] as integers */
        st = sift__js_printf(c, &b, "\"%llu\" \".\" ", (unsigned long long)ip);
        if (!st)
            st = frac_cmp(c, &b, frac, 1, 1);
        alts = 1;
        if (!st && (!bd->has_hi || bd->hi >= (double)ip + 1))
            st = pos_real(c, &b, ip + 1, 0, bd->has_hi, bd->has_hi ? (uint64_t)bd->hi : 0,
                          bd->hi_excl, &alts);
    } else {
        /* lo <= x <= ip.frac: [lo, ip) with any fraction, then ip with
         * a fraction <= frac (or none) */
        uint64_t a = (uint64_t)bd->lo;
        if (a < ip)
            st = pos_real(c, &b, a, bd->lo_excl, 1, ip, 1, &alts);
        if (!st) {
            st = sift__js_printf(c, &b, "%s\"%llu\" (\".\" ", alts++ ? " | " : "",
                                 (unsigned long long)ip);
            if (!st)
                st = frac_cmp(c, &b, frac, 0, 1);
            if (!st)
                st = sift__js_puts(c, &b, ")?");
        }
    }
    if (!st && alts == 0)
        r->never = 1;
    else if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    *done = !st;
    return st;
}

/* An exclusive fractional bound as the inclusive bound of the next
 * double inward: every decimal at or past that double's shortest
 * spelling is past the bound both exactly and read as a double; the
 * decimals between the two doubles are left out (rejected, never
 * wrongly accepted). */
static bounds inclusive(const bounds *bd)
{
    bounds b = *bd;
    if (b.has_lo && b.lo_excl && !integral(b.lo)) {
        b.lo = nextafter(b.lo, INFINITY);
        b.lo_excl = 0;
    }
    if (b.has_hi && b.hi_excl && !integral(b.hi)) {
        b.hi = nextafter(b.hi, -INFINITY);
        b.hi_excl = 0;
    }
    return b;
}

static sift_status gen_real(sift__js *c, const bounds *bd0, sift__js_ref *r)
{
    bounds inc = inclusive(bd0);
    const bounds *bd = &inc;
    int done = 0;
    sift_status st0 = SIFT_OK;
    if (((bd->has_lo && !integral(bd->lo)) || (bd->has_hi && !integral(bd->hi))) &&
        ((st0 = gen_frac_bound(c, bd, r, &done)) || done))
        return st0;
    if ((bd->has_lo && !integral(bd->lo)) || (bd->has_hi && !integral(bd->hi))) {
        sift_status st =
            sift__js_unsupported(c, bd->has_lo && !integral(bd->lo) ? "minimum" : "maximum",
                                 "a number range with a fractional bound");
        if (!st)
            set_name(r, sift__js_shared(c, SIFT__JS_R_NUMBER));
        return st;
    }
    int64_t lo = (int64_t)bd->lo, hi = (int64_t)bd->hi;
    sift__js_buf b = {0};
    sift_status st = SIFT_OK;
    int alts = 0;
    /* x >= 0 */
    if (!bd->has_hi || hi > 0 || (hi == 0 && !bd->hi_excl)) {
        int from_lo = bd->has_lo && lo >= 0;
        st = pos_real(c, &b, from_lo ? (uint64_t)lo : 0, from_lo && bd->lo_excl, bd->has_hi,
                      bd->has_hi ? (uint64_t)hi : 0, bd->hi_excl, &alts);
    }
    /* x < 0: "-" y, y > 0 */
    if (!st && (!bd->has_lo || lo < 0)) {
        int from_hi = bd->has_hi && hi < 0;
        sift__js_buf n = {0};
        int nalts = 0;
        st = pos_real(c, &n, from_hi ? (uint64_t)-hi : 0, from_hi ? bd->hi_excl : 1, bd->has_lo,
                      bd->has_lo ? (uint64_t)-lo : 0, bd->lo_excl, &nalts);
        if (!st && nalts)
            st = sift__js_printf(c, &b, "%s\"-\" (%s)", alts++ ? " | " : "", n.p);
        sift__js_buf_free(c, &n);
    }
    if (!st && alts == 0)
        r->never = 1;
    else if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    return st;
}

/* Largest multipleOf with a grammar of its own: a rule per remainder. */
#define MULTIPLE_MAX 1000

/* The multiples of the integer k (2 <= k <= MULTIPLE_MAX): decimal
 * integers read digit by digit with their remainder modulo k, a rule
 * t_r per remainder r (accepting at r = 0), then a zero fraction when
 * the type allows one (6.0 is a multiple of 3). neg: negative multiples
 * too. A grammar of k rules of at most 10 alternatives. */
static sift_status gen_multiple(sift__js *c, int64_t k, int neg, int fraction, sift__js_ref *r)
{
    sift_status st = sift__js_work(c, k);
    sift__js_ref first;
    if (!st)
        st = sift__js_new_rule(c, &first);
    sift__js_ref *t = st ? NULL : sift__calloc(c->al, (size_t)k, sizeof *t);
    if (!st && !t)
        st = sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
    for (int64_t i = 0; !st && i < k; i++)
        st = sift__js_new_rule(c, &t[i]);
    sift__js_buf b = {0};
    for (int64_t rem = 0; !st && rem < k; rem++) {
        b.n = 0;
        if (b.p)
            b.p[0] = '\0';
        int alts = 0;
        if (rem == 0)
            st = sift__js_puts(c, &b, "\"\""), alts++;
        /* digits that lead to one next remainder, as one class */
        for (int d = 0; !st && d < 10; d++) {
            int64_t next = (rem * 10 + d) % k;
            int seen = 0;
            for (int e = 0; e < d; e++)
                seen |= (rem * 10 + e) % k == next;
            if (seen)
                continue;
            st = sift__js_printf(c, &b, "%s[", alts++ ? " | " : "");
            for (int e = d; !st && e < 10; e++)
                if ((rem * 10 + e) % k == next)
                    st = sift__js_printf(c, &b, "%d", e);
            if (!st)
                st = sift__js_printf(c, &b, "] %s", t[next].name);
        }
        if (!st)
            st = sift__js_emit(c, &t[rem], b.p);
    }
    /* the first digit is not 0 (except 0 itself) */
    b.n = 0;
    if (b.p)
        b.p[0] = '\0';
    if (!st)
        st = sift__js_printf(c, &b, "%s(\"0\"", neg ? "\"-\"? " : "");
    for (int d = 1; !st && d < 10; d++)
        st = sift__js_printf(c, &b, " | \"%d\" %s", d, t[d % k].name);
    if (!st)
        st = sift__js_puts(c, &b, fraction ? ") (\".\" \"0\"+)?" : ")");
    if (!st)
        st = sift__js_emit(c, &first, b.p);
    sift__js_buf_free(c, &b);
    sift__free(c->al, t);
    if (!st)
        *r = first;
    return st;
}

sift_status sift__js_gen_number(sift__js *c, const json_t *s, int integer, sift__js_ref *r)
{
    bounds bd = {0, 0, 0, 0, 0, 0};
    sift_status st = read_bound(c, s, "minimum", "exclusiveMinimum", 0, &bd);
    if (!st)
        st = read_bound(c, s, "maximum", "exclusiveMaximum", 1, &bd);
    if (st)
        return st;
    const json_t *mo = json_object_get(s, "multipleOf");
    if (mo) {
        int64_t k = 0;
        if (!json_is_number(mo) || json_number_value(mo) <= 0)
            return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "multipleOf",
                                 "'multipleOf' must be a number above 0");
        /* the non-negative multiples when the lower bound lies in
         * (-k, 0], and no upper bound */
        int integral = sift__js_integral(json_number_value(mo), &k) && k <= MULTIPLE_MAX;
        /* 0 meets the bound and -k does not */
        int lo_ok = !bd.has_lo || ((bd.lo < 0 || (bd.lo == 0 && !bd.lo_excl)) &&
                                   (bd.lo > -(double)k || (bd.lo == -(double)k && bd.lo_excl)));
        if (integral && k == 1 && !bd.has_lo && !bd.has_hi)
            integer = 1;
        else if (integral && !bd.has_hi && lo_ok)
            return gen_multiple(c, k, !bd.has_lo, !integer || c->int_fraction, r);
        else if ((st = sift__js_unsupported(c, "multipleOf",
                                            integral ? "'multipleOf' beside these bounds is not "
                                                       "supported"
                                                     : "'multipleOf' of a fraction or over 1000 "
                                                       "is not supported")))
            return st;
    }
    if (!bd.has_lo && !bd.has_hi) {
        set_name(r, sift__js_shared(c, integer ? SIFT__JS_R_INTEGER : SIFT__JS_R_NUMBER));
        return SIFT_OK;
    }
    return integer ? gen_integer(c, &bd, r) : gen_real(c, &bd, r);
}

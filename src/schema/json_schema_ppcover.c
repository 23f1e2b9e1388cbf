/*
 * json_schema_ppcover.c - declared properties that a patternProperties
 * pattern also matches.
 *
 * A key that is both a declared property and a match of a pattern must
 * hold a value valid against both schemas. The grammar reaches such a
 * key through two alternatives: the declared member and the pattern's
 * member. When the pattern's schema S implies the declared schema D
 * (D admits every value, or D equals S but for annotations, seen
 * through a $ref that stands alone), D and S together are just S: the
 * declared member takes S, and the pattern's member admits the name
 * with S too, so both ways give exactly the values JSON Schema allows.
 * Such a name is "covered" by the pattern. Only a patternProperties of
 * one pattern is considered; the match is decided by PCRE2 (an
 * ECMA-262 stand-in, as json_schema_object.c uses it), and a pattern it
 * does not take or a match that does not finish covers nothing.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema.h"

#define COVER_MATCH_LIMIT 10000
#define COVER_MATCH_UNITS 16

/* Whether every key of s is an annotation (or s is true). */
static int admits_all(const json_t *s)
{
    const char *key;
    json_t *v;
    if (json_is_true(s))
        return 1;
    if (!json_is_object(s))
        return 0;
    json_object_foreach((json_t *)s, key, v)
    {
        if (!sift__js_is_annotation(key))
            return 0;
    }
    return 1;
}

/* Whether a and b are objects with the same keywords and values, their
 * annotations left out. */
static int equal_but_annotations(const json_t *a, const json_t *b)
{
    const char *key;
    json_t *v;
    if (!json_is_object(a) || !json_is_object(b))
        return json_equal((json_t *)a, (json_t *)b);
    for (int side = 0; side < 2; side++) {
        const json_t *x = side ? b : a, *y = side ? a : b;
        json_object_foreach((json_t *)x, key, v)
        {
            if (sift__js_is_annotation(key))
                continue;
            const json_t *w = json_object_get(y, key);
            if (!w || !json_equal(v, (json_t *)w))
                return 0;
        }
    }
    return 1;
}

/* s, or the target of its $ref when s holds that and annotations only
 * (one hop). */
static const json_t *through_ref(sift__js *c, const json_t *s)
{
    if (!sift__js_only_ref(s))
        return s;
    const json_t *ref = json_object_get(s, "$ref");
    const json_t *t =
        json_is_string(ref) ? sift__js_local_target(c, s, json_string_value(ref)) : NULL;
    return t ? t : s;
}

/* Whether v holds, at any depth, a keyword that moves the base URI or
 * names a scope ($id, $anchor, ...), or (refs) a $ref: then equal text
 * need not mean equal schemas. Deeper than 32 levels counts as holding one. */
static int holds_scope(const json_t *v, int refs, int depth)
{
    static const char *const scope[] = {
        "$id",          "id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveAnchor",
        "$recursiveRef"};
    const char *key;
    json_t *x;
    size_t i;
    if (depth > 32)
        return 1;
    if (json_is_array(v)) {
        json_array_foreach((json_t *)v, i, x) if (holds_scope(x, refs, depth + 1)) return 1;
        return 0;
    }
    if (!json_is_object(v))
        return 0;
    json_object_foreach((json_t *)v, key, x)
    {
        for (i = 0; i < sizeof scope / sizeof *scope; i++)
            if (!strcmp(key, scope[i]))
                return 1;
        if ((refs && !strcmp(key, "$ref")) || holds_scope(x, refs, depth + 1))
            return 1;
    }
    return 0;
}

/* A count of ECMA-262's {n} / {m,n}: decimal digits only (no sign, no
 * space, which make the braces literal text); *stop after them, at p
 * when there are none. Past 10^6 the value is 10^6 + 1. */
static long count_digits(const char *p, char **stop)
{
    long v = 0;
    const char *q = p;
    for (; *q >= '0' && *q <= '9'; q++)
        v = v > 1000000 ? v : v * 10 + (*q - '0');
    *stop = (char *)q;
    return v > 1000000 ? 1000001 : v;
}

/* Whether every value valid against ps is valid against d: d admits
 * everything, or the two are equal but for annotations, directly or one
 * $ref hop each (the targets then holding no $ref of their own, since a
 * target elsewhere may resolve it against another base). Neither may
 * hold a scope keyword: equal text under another $id is another schema. */
static int implies(sift__js *c, const json_t *ps, const json_t *d)
{
    if (admits_all(d))
        return 1;
    if (holds_scope(ps, 0, 0) || holds_scope(d, 0, 0))
        return 0;
    if (equal_but_annotations(ps, d))
        return 1;
    const json_t *a = through_ref(c, ps), *b = through_ref(c, d);
    if (holds_scope(a, 1, 0) || holds_scope(b, 1, 0))
        return 0;
    return equal_but_annotations(a, b);
}

/* Whether pattern pat matches name: 1 yes, 0 no, -1 undecided. */
static int pattern_matches(const char *pat, const char *name)
{
    int ec, r = -1;
    PCRE2_SIZE eo;
    if (!sift__js_plain_ascii(name))
        return -1;
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    pcre2_code *re = mc ? pcre2_compile((PCRE2_SPTR)pat, strlen(pat),
                                        PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS,
                                        &ec, &eo, NULL)
                        : NULL;
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    if (md) {
        pcre2_set_match_limit(mc, COVER_MATCH_LIMIT);
        int m = pcre2_match(re, (PCRE2_SPTR)name, strlen(name), 0, 0, md, mc);
        r = m >= 0 ? 1 : m == PCRE2_ERROR_NOMATCH ? 0 : -1;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    pcre2_match_context_free(mc);
    return r;
}

const json_t *sift__js_pp_cover(sift__js *c, const json_t *s, const char *name, sift_status *st)
{
    const json_t *pp = json_object_get(s, "patternProperties");
    const json_t *d = json_object_get(json_object_get(s, "properties"), name);
    const char *pat;
    json_t *ps;
    if (*st || !d || !json_is_object(pp) || json_object_size(pp) != 1)
        return NULL;
    if ((*st = sift__js_work(c, COVER_MATCH_UNITS)))
        return NULL;
    json_object_foreach((json_t *)pp, pat, ps)
    {
        if (implies(c, ps, d) && pattern_matches(pat, name) == 1)
            return ps;
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* one class repeated: the pattern's keys but the declared names       */
/* ------------------------------------------------------------------ */

/* A pattern ^C*$ or ^C+$ (C a bracket class, bare or in one group) of
 * ASCII characters a JSON string holds unescaped: letters, digits and
 * the punctuation below, ranges between them, no negation. */
typedef struct key_class {
    unsigned char in[128];
    int lo;  /* 0 for "*", 1 for "+", m of {m,n} */
    long hi; /* -1: no bound; n of {m,n} */
} key_class;

static int class_char(int ch)
{
    return ch > 0x20 && ch < 0x7F && ch != '"' && ch != '\\' && ch != '[' && ch != ']' && ch != '^';
}

static int class_pattern(const char *p, key_class *k)
{
    size_t i = 0, n = strlen(p);
    memset(k, 0, sizeof *k);
    if (n < 5 || p[0] != '^' || p[n - 1] != '$')
        return 0;
    i = 1;
    int group = p[i] == '(';
    i += (size_t)group;
    if (p[i++] != '[')
        return 0;
    size_t start = i;
    while (i < n && p[i] != ']') {
        int a = (unsigned char)p[i];
        if (!class_char(a))
            return 0;
        if (p[i + 1] == '-' && i + 2 < n && p[i + 2] != ']') {
            int b = (unsigned char)p[i + 2];
            if (!class_char(b) || b < a)
                return 0;
            for (int ch = a; ch <= b; ch++)
                k->in[ch] = class_char(ch);
            i += 3;
        } else {
            k->in[a] = 1;
            i++;
        }
    }
    if (i >= n || i == start || p[i++] != ']')
        return 0;
    if (group && p[i++] != ')')
        return 0;
    k->hi = -1;
    if (p[i] == '{') { /* {0,n} or {1,n} */
        char *stop;
        if ((p[i + 1] != '0' && p[i + 1] != '1') || p[i + 2] != ',')
            return 0;
        k->lo = p[i + 1] - '0';
        k->hi = count_digits(p + i + 3, &stop);
        if (stop == p + i + 3 || *stop != '}' || k->hi < 1 || k->hi > 4096)
            return 0;
        return stop + 2 == p + n; /* the "}$" */
    }
    if (p[i] != '*' && p[i] != '+')
        return 0;
    k->lo = p[i++] == '+';
    return i + 1 == n; /* the "$" */
}

/* The one pattern of s's patternProperties and its schema when it is
 * a key class (class_pattern), else NULL. */
static const json_t *one_class(const json_t *s, key_class *k)
{
    const json_t *pp = json_object_get(s, "patternProperties");
    const char *pat;
    json_t *ps;
    if (!json_is_object(pp) || json_object_size(pp) != 1)
        return NULL;
    json_object_foreach((json_t *)pp, pat, ps)
    {
        if (class_pattern(pat, k))
            return ps;
    }
    return NULL;
}

static int class_matches(const key_class *k, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] >= 128 || !k->in[(unsigned char)name[i]])
            return 0;
    return n >= (size_t)k->lo && (k->hi < 0 || n <= (size_t)k->hi);
}

const json_t *sift__js_pp_claims(const json_t *s, const char *name)
{
    key_class k;
    const json_t *ps = one_class(s, &k);
    return ps && class_matches(&k, name) ? ps : NULL;
}

int sift__js_pp_class(const json_t *s)
{
    key_class k;
    return one_class(s, &k) != NULL;
}

int sift__js_pp_admits_all(const json_t *s)
{
    return admits_all(s);
}

/* The class without the characters in `used` as "[\xHH...]" into b, or
 * nothing when none is left (*any 0). */
static sift_status put_class(sift__js *c, sift__js_buf *b, const key_class *k,
                             const unsigned char *used, int *any)
{
    sift_status st = SIFT_OK;
    *any = 0;
    for (int ch = 0; !st && ch < 128; ch++) {
        if (!k->in[ch] || (used && used[ch]))
            continue;
        st = sift__js_printf(c, b, "%s\\x%02X", *any ? "" : "[", ch);
        *any = 1;
    }
    if (!st && *any)
        st = sift__js_puts(c, b, "]");
    return st;
}

/* The rule for the keys of class k that extend prefix (length len) and
 * are none of names[0..n) (those with the prefix), into *r; `free` is
 * the rule for any run of the class. */
static sift_status trie_rule(sift__js *c, const key_class *k, const char *const *names, size_t n,
                             const char *prefix, size_t len, const sift__js_ref *free_run,
                             sift__js_ref *r)
{
    unsigned char used[128] = {0};
    int is_name = 0;
    sift_status st = sift__js_work(c, 1 + (int64_t)n);
    for (size_t i = 0; !st && i < n; i++) {
        if (strncmp(names[i], prefix, len))
            continue;
        if (names[i][len] == '\0')
            is_name = 1;
        else
            used[(unsigned char)names[i][len]] = 1;
    }
    sift__js_buf b = {0};
    int any = 0;
    sift__js_ref bounded;
    if (!st && k->hi >= 0 && len + 1 < (size_t)k->hi) { /* the run left after one more */
        sift__js_buf f = {0};
        int some = 0;
        st = put_class(c, &f, k, NULL, &some);
        if (!st)
            st = sift__js_printf(c, &f, "{0,%ld}", k->hi - (long)len - 1);
        if (!st)
            st = sift__js_rule(c, &bounded, f.p);
        sift__js_buf_free(c, &f);
        free_run = &bounded;
    }
    if (!st && (k->hi < 0 || len < (size_t)k->hi))
        st = put_class(c, &b, k, used, &any);
    if (!st && any && (k->hi < 0 || len + 1 < (size_t)k->hi))
        st = sift__js_printf(c, &b, " %s", free_run->name);
    for (int ch = 0; !st && ch < 128; ch++) {
        if (!used[ch])
            continue;
        char next[260];
        sift__js_ref child;
        memcpy(next, prefix, len);
        next[len] = (char)ch;
        next[len + 1] = '\0';
        st = trie_rule(c, k, names, n, next, len + 1, free_run, &child);
        if (st || child.never)
            continue;
        st = sift__js_printf(c, &b, "%s[\\x%02X] %s", any ? " | " : "", ch, child.name);
        any = 1;
    }
    if (!st && !is_name && len >= (size_t)k->lo)
        st = sift__js_printf(c, &b, "%s\"\"", any ? " | " : "");
    r->never = !st && !any && !(!is_name && len >= (size_t)k->lo);
    if (!st && !r->never)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    return st;
}

sift_status sift__js_pp_keys_but(sift__js *c, const json_t *s, const char *const *names, size_t n,
                                 sift__js_ref *r)
{
    key_class k;
    if (!one_class(s, &k))
        return sift__js_fail(c, SIFT_E_ARG, "patternProperties", "not a key class");
    for (size_t i = 0; i < n; i++)
        if (class_matches(&k, names[i]) && strlen(names[i]) >= 256)
            return sift__js_unsupported(c, "patternProperties",
                                        "a declared name of 256 bytes or more that this "
                                        "pattern matches");
    const char **in = sift__calloc(c->al, n ? n : 1, sizeof *in);
    size_t m = 0;
    if (!in)
        return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (class_matches(&k, names[i]))
            in[m++] = names[i];
    sift__js_buf b = {0};
    sift__js_ref free_run, root;
    int any = 0;
    sift_status st = put_class(c, &b, &k, NULL, &any);
    if (!st)
        st = sift__js_puts(c, &b, "*");
    if (!st)
        st = sift__js_rule(c, &free_run, b.p);
    if (!st)
        st = trie_rule(c, &k, in, m, "", 0, &free_run, &root);
    sift__js_buf_free(c, &b);
    b = (sift__js_buf){0};
    r->never = !st && root.never;
    if (!st && !root.never)
        st = sift__js_printf(c, &b, "\"\\\"\" %s \"\\\"\"", root.name);
    if (!st && !root.never)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    sift__free(c->al, in);
    return st;
}

/* ------------------------------------------------------------------ */
/* the complement of a fixed run of atoms, with an optional tail       */
/* ------------------------------------------------------------------ */

#define SEQ_MAX_ATOMS 40
#define SEQ_ATOM_MAX 64
#define SEQ_MAX_COUNT 1000

/* One atom of a pattern: its text and its negation's, as ECMA-262. */
typedef struct seq_atom {
    char a[SEQ_ATOM_MAX], neg[SEQ_ATOM_MAX + 4];
} seq_atom;

static int seq_plain(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("_-:@#%&=,;<>'!~ /", ch));
}

/* Reads one atom at p[*i] (a plain character, an escaped punctuation
 * character, \d \D \w \W \s \S, ".", or a bracket class without nested
 * brackets) into *o; 0 when none. */
static int seq_read_atom(const char *p, size_t *i, seq_atom *o)
{
    size_t s = *i;
    char ch = p[s];
    if (ch == '.') {
        snprintf(o->a, sizeof o->a, ".");
        snprintf(o->neg, sizeof o->neg, "[\\n\\r\\u2028\\u2029]");
        *i = s + 1;
        return 1;
    }
    if (ch == '\\' && p[s + 1] && strchr("dDwWsS", p[s + 1])) {
        snprintf(o->a, sizeof o->a, "\\%c", p[s + 1]);
        snprintf(o->neg, sizeof o->neg, "\\%c", p[s + 1] ^ 0x20);
        *i = s + 2;
        return 1;
    }
    if (ch == '\\' && p[s + 1] && strchr(".-/\\+*?()[]{}|^$:_", p[s + 1])) {
        snprintf(o->a, sizeof o->a, "\\%c", p[s + 1]);
        snprintf(o->neg, sizeof o->neg, "[^\\%c]", p[s + 1]);
        *i = s + 2;
        return 1;
    }
    if (seq_plain((unsigned char)ch)) {
        snprintf(o->a, sizeof o->a, "%c", ch);
        snprintf(o->neg, sizeof o->neg, "[^%s%c]", ch == '-' ? "\\" : "", ch);
        *i = s + 1;
        return 1;
    }
    if (ch != '[')
        return 0;
    size_t e = s + 1;
    int negated = p[e] == '^';
    e += (size_t)negated;
    if (p[e] == ']')
        return 0;
    while (p[e] && p[e] != ']') {
        if (p[e] == '[')
            return 0;
        if (p[e] == '\\') {
            if (!p[e + 1])
                return 0;
            e++;
        }
        e++;
    }
    size_t inner = e - s - 1 - (size_t)negated; /* between [ or [^ and ] */
    if (p[e] != ']' || inner + 4 >= SEQ_ATOM_MAX)
        return 0;
    const char *body = p + s + 1 + negated;
    snprintf(o->a, sizeof o->a, "%.*s", (int)(e + 1 - s), p + s);
    /* [^X] becomes [X]; a leading ^ of X is then escaped, being a character */
    snprintf(o->neg, sizeof o->neg, "[%s%.*s]", negated ? (body[0] == '^' ? "\\" : "") : "^",
             (int)inner, body);
    *i = e + 1;
    return 1;
}

/* Appends to out (cap) at *n; 0 when it does not fit. */
static int seq_put(char *out, size_t cap, size_t *n, const char *s)
{
    size_t len = strlen(s);
    if (*n + len + 1 > cap)
        return 0;
    memcpy(out + *n, s, len + 1);
    *n += len;
    return 1;
}

/* "^A1..Ai" into out. */
static int seq_prefix(char *out, size_t cap, size_t *n, const seq_atom *at, size_t i, int bar)
{
    if ((bar && !seq_put(out, cap, n, "|")) || !seq_put(out, cap, n, "^"))
        return 0;
    for (size_t j = 0; j < i; j++)
        if (!seq_put(out, cap, n, at[j].a))
            return 0;
    return 1;
}

/* After the run, a tail B{lo,hi}: too few B's (the end or another
 * character first) and, under "$", a character other than B within
 * the first hi or anything after hi B's. */
static int seq_counted_tail(char *out, size_t cap, size_t *n, const seq_atom *at, size_t k,
                            const seq_atom *b, long lo, long hi, int eol)
{
    char q[64];
    if (lo > 0) {
        snprintf(q, sizeof q, "{0,%ld}", lo - 1);
        if (!seq_prefix(out, cap, n, at, k, *n > 0) || !seq_put(out, cap, n, b->a) ||
            !seq_put(out, cap, n, q) || !seq_put(out, cap, n, "$"))
            return 0;
        if (!eol && (!seq_prefix(out, cap, n, at, k, 1) || !seq_put(out, cap, n, b->a) ||
                     !seq_put(out, cap, n, q) || !seq_put(out, cap, n, b->neg)))
            return 0;
    }
    if (!eol)
        return *n > 0;
    snprintf(q, sizeof q, "{0,%ld}", hi - 1);
    if (!seq_prefix(out, cap, n, at, k, *n > 0) || !seq_put(out, cap, n, b->a) ||
        !seq_put(out, cap, n, q) || !seq_put(out, cap, n, b->neg))
        return 0;
    snprintf(q, sizeof q, "{%ld}[\\s\\S]", hi);
    return seq_prefix(out, cap, n, at, k, 1) && seq_put(out, cap, n, b->a) &&
           seq_put(out, cap, n, q);
}

int sift__js_pat_complement_seq(const char *p, char *out, size_t cap)
{
    seq_atom at[SEQ_MAX_ATOMS], tail;
    size_t k = 0, i = 1, n = 0, len = strlen(p);
    long tlo = 0, thi = 0;
    int tail_q = 0, eol = len > 1 && p[len - 1] == '$' && p[len - 2] != '\\';
    if (p[0] != '^')
        return 0;
    size_t end = len - (size_t)eol;
    while (i < end) {
        seq_atom o;
        if (!seq_read_atom(p, &i, &o))
            return 0;
        long count = 1;
        if (p[i] == '{') { /* {n}: n copies; {m,n} last: the tail */
            char *stop;
            count = count_digits(p + i + 1, &stop);
            if (stop == p + i + 1 || (*stop != '}' && *stop != ',') || count < 0 ||
                count > SEQ_MAX_COUNT)
                return 0;
            if (*stop == ',') {
                char *stop2;
                tlo = count;
                thi = count_digits(stop + 1, &stop2);
                if (stop2 == stop + 1 || *stop2 != '}' || thi < tlo || thi < 1 ||
                    thi > SEQ_MAX_COUNT || (size_t)(stop2 - p) + 1 != end)
                    return 0;
                tail = o;
                tail_q = 'r';
                i = end;
                break;
            }
            if (count < 1)
                return 0;
            i = (size_t)(stop - p) + 1;
        } else if (p[i] == '*' || p[i] == '+') {
            if (i + 1 != end)
                return 0; /* only the last atom repeats */
            tail = o;
            tail_q = p[i];
            i++;
            break;
        } else if (p[i] && strchr("?{", p[i])) {
            return 0;
        }
        if (k + (size_t)count > SEQ_MAX_ATOMS)
            return 0;
        for (long r = 0; r < count; r++)
            at[k++] = o;
    }
    if (i != end || (k == 0 && !tail_q))
        return 0;
    /* a fixed atom missing (the end, or another character) */
    for (size_t j = 0; j < k; j++) {
        if (!seq_prefix(out, cap, &n, at, j, j > 0) || !seq_put(out, cap, &n, "$") ||
            !seq_prefix(out, cap, &n, at, j, 1) || !seq_put(out, cap, &n, at[j].neg))
            return 0;
    }
    if (tail_q == 'r')
        return seq_counted_tail(out, cap, &n, at, k, &tail, tlo, thi, eol);
    if (tail_q == '+' && (!seq_prefix(out, cap, &n, at, k, k > 0) || !seq_put(out, cap, &n, "$")))
        return 0;
    if (tail_q && eol) { /* a character the tail does not take */
        if (!seq_prefix(out, cap, &n, at, k, n > 0) || !seq_put(out, cap, &n, tail.a) ||
            !seq_put(out, cap, &n, "*") || !seq_put(out, cap, &n, tail.neg))
            return 0;
    } else if (tail_q == '+') { /* unanchored: the first one after the run */
        if (!seq_prefix(out, cap, &n, at, k, 1) || !seq_put(out, cap, &n, tail.neg))
            return 0;
    } else if (!tail_q && eol) { /* anything after the run */
        if (!seq_prefix(out, cap, &n, at, k, n > 0) || !seq_put(out, cap, &n, "[\\s\\S]"))
            return 0;
    }
    return n > 0;
}

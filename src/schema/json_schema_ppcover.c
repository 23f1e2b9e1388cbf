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

/* Whether every value valid against ps is valid against d. */
static int implies(sift__js *c, const json_t *ps, const json_t *d)
{
    if (admits_all(d) || equal_but_annotations(ps, d))
        return 1;
    return equal_but_annotations(through_ref(c, ps), through_ref(c, d));
}

/* Whether pattern pat matches name: 1 yes, 0 no, -1 undecided. */
static int pattern_matches(const char *pat, const char *name)
{
    int ec, r = -1;
    PCRE2_SIZE eo;
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    pcre2_code *re = mc ? pcre2_compile((PCRE2_SPTR)pat, strlen(pat),
                                        PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL)
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
    int lo; /* 0 for "*", 1 for "+" */
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
    return n >= (size_t)k->lo;
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
    if (!st)
        st = put_class(c, &b, k, used, &any);
    if (!st && any)
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
        if (!st)
            st = sift__js_printf(c, &b, "%s[\\x%02X] %s", any ? " | " : "", ch, child.name);
        any = 1;
    }
    if (!st && !is_name && len >= (size_t)k->lo)
        st = sift__js_printf(c, &b, "%s\"\"", any ? " | " : "");
    if (!st)
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
    if (!st)
        st = sift__js_printf(c, &b, "\"\\\"\" %s \"\\\"\"", root.name);
    if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    sift__free(c->al, in);
    return st;
}

/*
 * json_schema_value.c - whether one JSON value is valid against a
 * schema: the test an enum / const value takes against the keywords
 * beside it (not, properties, lengths, ...), since a finite set of values
 * can be filtered where the grammar could not express the keyword.
 *
 * The answer is 1 (valid), 0 (invalid) or -1 (not decided here: a
 * keyword outside the ones below, a pattern outside the subset sift
 * translates or tested on a string with a quote, a backslash or a control
 * character, an asserted format, a fractional multipleOf whose decimal
 * and binary readings disagree (0.3 of 0.1), a $ref that is not a local
 * JSON Pointer, or nesting over 64 levels); the caller refuses a value
 * with -1. Decided keywords follow JSON Schema exactly, numbers by
 * value (1 and 1.0 are equal):
 *
 *   type, enum, const, minimum, maximum, exclusiveMinimum,
 *   exclusiveMaximum (numbers, and draft 4's booleans), multipleOf,
 *   minLength, maxLength (code points), pattern, minItems, maxItems,
 *   items (schema or draft-4 array), prefixItems, additionalItems,
 *   uniqueItems, contains / minContains / maxContains, minProperties,
 *   maxProperties, required, properties, patternProperties,
 *   additionalProperties, propertyNames, dependentRequired, dependencies,
 *   dependentSchemas, not, allOf, anyOf, oneOf, if / then / else, $ref
 *   (local; alone under drafts 3 to 7, whose $ref ignores its siblings),
 *   format (as an annotation, or a name outside the standard ones).
 *
 * Work: a unit per (schema, value) pair visited, charged to max_work.
 */
#include <math.h>
#include <stdlib.h>

#include "json_regex.h"
#include "json_schema.h"

#define VALUE_MAX_DEPTH 64

static int equal(const json_t *a, const json_t *b);

static int equal(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b) &&
               (!json_is_integer(a) || !json_is_integer(b) ||
                json_integer_value(a) == json_integer_value(b));
    if (json_typeof(a) != json_typeof(b))
        return 0;
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!equal(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    }
    if (json_is_object(a)) {
        const char *k;
        json_t *x;
        if (json_object_size(a) != json_object_size(b))
            return 0;
        json_object_foreach((json_t *)a, k, x)
        {
            const json_t *y = json_object_get(b, k);
            if (!y || !equal(x, y))
                return 0;
        }
        return 1;
    }
    if (json_is_string(a))
        return json_string_length(a) == json_string_length(b) &&
               !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
    return 1; /* true, false, null of one type */
}

static int is_type(const json_t *v, const char *t)
{
    if (!strcmp(t, "null"))
        return json_is_null(v);
    if (!strcmp(t, "boolean"))
        return json_is_boolean(v);
    if (!strcmp(t, "object"))
        return json_is_object(v);
    if (!strcmp(t, "array"))
        return json_is_array(v);
    if (!strcmp(t, "string"))
        return json_is_string(v);
    if (!strcmp(t, "number"))
        return json_is_number(v);
    if (!strcmp(t, "integer"))
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    return 0;
}

/* Keywords decided here, and keywords with no effect. */
static const char *const decided[] = {
    "type",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "items",
    "prefixItems",
    "additionalItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "minProperties",
    "maxProperties",
    "required",
    "properties",
    "additionalProperties",
    "propertyNames",
    "dependentRequired",
    "dependencies",
    "dependentSchemas",
    "not",
    "allOf",
    "anyOf",
    "oneOf",
    "if",
    "then",
    "else",
    "$ref",
    "format",
    "nullable",
    "pattern",
    "patternProperties",
};

typedef struct vctx {
    sift__js *c;
    sift_status st; /* a work limit reached: stop (answer -1) */
} vctx;

static int valid(vctx *x, const json_t *s, const json_t *v, int depth);

/* Combines answers: all of them must be 1. */
#define AND(r, e)     \
    do {              \
        int e_ = (e); \
        if (e_ == 0)  \
            return 0; \
        if (e_ < 0)   \
            r = -1;   \
    } while (0)

/* Whether the string str[0..n) (decoded) has a match of the pattern
 * pat[0..pn): the pattern's grammar (the one the schema's grammars use)
 * run over the string's JSON content. -1 for a pattern outside the
 * subset, and for strings with a quote, a backslash or a control
 * character (whose JSON spellings are left to the grammar). */
static int pattern_hit(vctx *x, const char *pat, size_t pn, const char *str, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)str[i] < 0x20 || str[i] == '"' || str[i] == '\\')
            return -1;
    if (memchr(pat, 0, pn) || (x->st = sift__js_work(x->c, 1 + (pn + n) / 64)))
        return -1;
    char *re = NULL;
    size_t re_len = 0;
    sift_error err;
    if (sift__json_regex_to_gbnf(x->c->al, pat, pn, x->c->max_grammar, &re, &re_len, &err))
        return -1;
    int r = -1;
    size_t tn = re_len + 16;
    char *text = sift__malloc(x->c->al, tn, 1);
    sift_grammar *g = NULL;
    if (text) {
        memcpy(text, "root ::= ", 9);
        memcpy(text + 9, re, re_len);
        if (!sift_grammar_new(&g, text, 9 + re_len, NULL, NULL, &err))
            r = !sift_grammar_accept_bytes(g, str, n, &err) && sift_grammar_is_complete(g);
        sift_grammar_free(g);
        sift__free(x->c->al, text);
    }
    sift__free(x->c->al, re);
    return r;
}

/* Whether d is a multiple of m (m > 0, not an integer): decided only
 * where the decimal reading (both numbers with at most 9 decimals, as
 * the schema writes them) and the binary quotient agree. */
static int fraction_multiple(double d, double m)
{
    double q = d / m;
    if (!isfinite(q) || fabs(d) > 1e6 || m < 1e-9)
        return -1;
    int binary = q == floor(q);
    double scale = 1;
    for (int p = 0; p <= 9; p++, scale *= 10) {
        double a = round(d * scale), b = round(m * scale);
        if (a / scale == d && b / scale == m && b > 0) {
            int decimal = fmod(a, b) == 0;
            return decimal == binary ? decimal : -1;
        }
    }
    return -1;
}

static int count_ok(const json_t *s, const char *lo_key, const char *hi_key, size_t n)
{
    const json_t *lo = json_object_get(s, lo_key), *hi = json_object_get(s, hi_key);
    if ((lo && !json_is_number(lo)) || (hi && !json_is_number(hi)))
        return -1;
    return (!lo || (double)n >= json_number_value(lo)) &&
           (!hi || (double)n <= json_number_value(hi));
}

static int number_ok(const json_t *s, double d)
{
    const json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
    const json_t *emn = json_object_get(s, "exclusiveMinimum");
    const json_t *emx = json_object_get(s, "exclusiveMaximum");
    const json_t *mo = json_object_get(s, "multipleOf");
    if ((mn && !json_is_number(mn)) || (mx && !json_is_number(mx)) ||
        (emn && !json_is_number(emn) && !json_is_boolean(emn)) ||
        (emx && !json_is_number(emx) && !json_is_boolean(emx)) || (mo && !json_is_number(mo)))
        return -1;
    if (mn && (json_is_true(emn) ? d <= json_number_value(mn) : d < json_number_value(mn)))
        return 0;
    if (mx && (json_is_true(emx) ? d >= json_number_value(mx) : d > json_number_value(mx)))
        return 0;
    if (json_is_number(emn) && d <= json_number_value(emn))
        return 0;
    if (json_is_number(emx) && d >= json_number_value(emx))
        return 0;
    if (mo) {
        int64_t a, b;
        if (json_number_value(mo) <= 0)
            return -1;
        if (!sift__js_integral(json_number_value(mo), &b))
            return fraction_multiple(d, json_number_value(mo));
        if (d != floor(d))
            return 0; /* a fraction: no multiple of an integer */
        return sift__js_integral(d, &a) ? a % b == 0 : -1;
    }
    return 1;
}

static int string_ok(const json_t *s, const json_t *v, vctx *x)
{
    size_t n = 0, len = json_string_length(v);
    const unsigned char *p = (const unsigned char *)json_string_value(v);
    for (size_t i = 0; i < len; i++)
        n += (p[i] & 0xC0) != 0x80;
    const json_t *f = json_object_get(s, "format");
    if (f && !x->c->format_annotation &&
        (!json_is_string(f) || sift__js_format_known(json_string_value(f))))
        return -1; /* a custom name is an annotation */
    int r = count_ok(s, "minLength", "maxLength", n);
    const json_t *pat = json_object_get(s, "pattern");
    if (pat && r != 0) {
        if (!json_is_string(pat))
            return -1;
        AND(r, pattern_hit(x, json_string_value(pat), json_string_length(pat), json_string_value(v),
                           len));
    }
    return r;
}

static int array_ok(vctx *x, const json_t *s, const json_t *v, int depth)
{
    int r = count_ok(s, "minItems", "maxItems", json_array_size(v));
    if (r == 0)
        return 0;
    const json_t *pre = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
    const json_t *rest = items;
    size_t n_pre = 0;
    if (json_is_array(items)) {
        pre = items;
        rest = json_object_get(s, "additionalItems");
    }
    if (pre) {
        if (!json_is_array(pre))
            return -1;
        n_pre = json_array_size(pre);
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *sub = i < n_pre ? json_array_get(pre, i) : rest;
        if (sub)
            AND(r, valid(x, sub, json_array_get(v, i), depth + 1));
    }
    if (json_is_true(json_object_get(s, "uniqueItems")))
        for (size_t i = 0; i < json_array_size(v); i++)
            for (size_t j = i + 1; j < json_array_size(v); j++)
                if (equal(json_array_get(v, i), json_array_get(v, j)))
                    return 0;
    const json_t *has = json_object_get(s, "contains");
    if (has) {
        size_t hits = 0;
        for (size_t i = 0; i < json_array_size(v); i++) {
            int h = valid(x, has, json_array_get(v, i), depth + 1);
            if (h < 0)
                return -1;
            hits += (size_t)h;
        }
        const json_t *lo = json_object_get(s, "minContains");
        if (lo && !json_is_number(lo))
            return -1;
        if ((double)hits < (lo ? json_number_value(lo) : 1))
            return 0;
        AND(r, count_ok(s, "minContains", "maxContains", hits));
    }
    return r;
}

/* The patternProperties pp (may be NULL) on the member k[0..kn) = m:
 * 0 when a matched pattern's schema rejects m, else 1 when no pattern
 * matches k, 3 when one does, 2 when a match is undecided; undecided
 * schemas make *r -1. */
static int patterns_ok(vctx *x, const json_t *pp, const char *k, size_t kn, const json_t *m,
                       int depth, int *r)
{
    int none = 1, unknown = 0;
    const char *pat;
    size_t pn;
    json_t *ps;
    json_object_keylen_foreach((json_t *)pp, pat, pn, ps)
    {
        int h = pattern_hit(x, pat, pn, k, kn);
        if (h < 0) {
            unknown = 1;
            *r = -1;
        } else if (h) {
            none = 0;
            int ok = valid(x, ps, m, depth + 1);
            if (ok == 0)
                return 0;
            if (ok < 0)
                *r = -1;
        }
    }
    return !none ? 3 : unknown ? 2 : 1;
}

static int object_ok(vctx *x, const json_t *s, const json_t *v, int depth)
{
    int r = count_ok(s, "minProperties", "maxProperties", json_object_size(v));
    if (r == 0)
        return 0;
    const json_t *req = json_object_get(s, "required");
    for (size_t i = 0; json_is_array(req) && i < json_array_size(req); i++) {
        const json_t *n = json_array_get(req, i);
        if (!json_is_string(n))
            return -1;
        if (!json_object_getn(v, json_string_value(n), json_string_length(n)))
            return 0;
    }
    const json_t *props = json_object_get(s, "properties");
    const json_t *ap = json_object_get(s, "additionalProperties");
    const json_t *names = json_object_get(s, "propertyNames");
    const json_t *pp = json_object_get(s, "patternProperties");
    if (pp && !json_is_object(pp))
        return -1;
    const char *k;
    size_t kn;
    json_t *m;
    json_object_keylen_foreach((json_t *)v, k, kn, m)
    {
        const json_t *ps = json_is_object(props) ? json_object_getn(props, k, kn) : NULL;
        int hit = patterns_ok(x, pp, k, kn, m, depth, &r);
        if (hit == 0)
            return 0;
        if (ps)
            AND(r, valid(x, ps, m, depth + 1));
        else if (ap && hit == 2)
            AND(r, -1); /* whether it applies is not known */
        else if (ap && hit == 1)
            AND(r, valid(x, ap, m, depth + 1));
        if (names) {
            json_t *key = json_stringn(k, kn);
            if (!key)
                return -1;
            int ok = valid(x, names, key, depth + 1);
            json_decref(key);
            AND(r, ok);
        }
    }
    static const char *const dep_keys[] = {"dependentRequired", "dependentSchemas", "dependencies"};
    for (size_t d = 0; d < 3; d++) {
        const json_t *deps = json_object_get(s, dep_keys[d]);
        const char *a;
        json_t *need;
        json_object_foreach((json_t *)deps, a, need)
        {
            if (!json_object_get(v, a))
                continue;
            if (json_is_array(need)) {
                for (size_t i = 0; i < json_array_size(need); i++) {
                    const json_t *n = json_array_get(need, i);
                    if (!json_is_string(n))
                        return -1;
                    if (!json_object_get(v, json_string_value(n)))
                        return 0;
                }
            } else {
                AND(r, valid(x, need, v, depth + 1));
            }
        }
    }
    return r;
}

static int valid(vctx *x, const json_t *s, const json_t *v, int depth)
{
    if (json_is_true(s))
        return 1;
    if (json_is_false(s))
        return 0;
    if (!json_is_object(s) || depth > VALUE_MAX_DEPTH || x->st)
        return -1;
    if ((x->st = sift__js_work(x->c, 1)))
        return -1;
    const json_t *ref = json_object_get(s, "$ref");
    if (ref && x->c->ref_alone) { /* drafts 3 to 7: the siblings are ignored */
        const json_t *target =
            json_is_string(ref) ? sift__js_local_target(x->c, s, json_string_value(ref)) : NULL;
        return target ? valid(x, target, v, depth + 1) : -1;
    }
    int r = 1;
    const char *key;
    json_t *kv;
    json_object_foreach((json_t *)s, key, kv)
    {
        int known = sift__js_is_annotation(key);
        for (size_t i = 0; !known && i < sizeof decided / sizeof decided[0]; i++)
            known = !strcmp(key, decided[i]);
        if (!known && (!strcmp(key, "unevaluatedProperties") || !strcmp(key, "unevaluatedItems") ||
                       !strcmp(key, "$dynamicRef") || !strcmp(key, "$recursiveRef") ||
                       !strcmp(key, "$dynamicAnchor") || !strcmp(key, "$recursiveAnchor")))
            r = -1; /* another keyword below may still say 0 */
    }
    const json_t *t = json_object_get(s, "type");
    if (t) {
        int ok = 0;
        if (json_is_string(t)) {
            ok = is_type(v, json_string_value(t));
        } else if (json_is_array(t)) {
            for (size_t i = 0; i < json_array_size(t); i++)
                ok |= json_is_string(json_array_get(t, i)) &&
                      is_type(v, json_string_value(json_array_get(t, i)));
        } else {
            return -1;
        }
        if (!ok && !(json_is_null(v) && json_is_true(json_object_get(s, "nullable"))))
            return 0;
    }
    const json_t *k = json_object_get(s, "const");
    if (k && !equal(k, v))
        return 0;
    const json_t *e = json_object_get(s, "enum");
    if (e) {
        int in = 0;
        if (!json_is_array(e))
            return -1;
        for (size_t i = 0; !in && i < json_array_size(e); i++)
            in = equal(json_array_get(e, i), v);
        if (!in)
            return 0;
    }
    if (json_is_number(v))
        AND(r, number_ok(s, json_number_value(v)));
    else if (json_is_string(v))
        AND(r, string_ok(s, v, x));
    else if (json_is_array(v))
        AND(r, array_ok(x, s, v, depth));
    else if (json_is_object(v))
        AND(r, object_ok(x, s, v, depth));
    const json_t *n = json_object_get(s, "not");
    if (n) {
        int m = valid(x, n, v, depth + 1);
        AND(r, m < 0 ? -1 : !m);
    }
    const json_t *all = json_object_get(s, "allOf");
    for (size_t i = 0; json_is_array(all) && i < json_array_size(all); i++)
        AND(r, valid(x, json_array_get(all, i), v, depth + 1));
    static const char *const alt_keys[] = {"anyOf", "oneOf"};
    for (int a = 0; a < 2; a++) {
        const json_t *alts = json_object_get(s, alt_keys[a]);
        if (!alts)
            continue;
        if (!json_is_array(alts))
            return -1;
        int hits = 0, unknown = 0;
        for (size_t i = 0; i < json_array_size(alts); i++) {
            int m = valid(x, json_array_get(alts, i), v, depth + 1);
            hits += m == 1;
            unknown += m < 0;
        }
        if (a == 0)
            AND(r, hits ? 1 : unknown ? -1 : 0);
        else
            AND(r, hits > 1 ? 0 : unknown ? -1 : hits);
    }
    const json_t *cond = json_object_get(s, "if");
    if (cond) {
        int m = valid(x, cond, v, depth + 1);
        const json_t *branch = json_object_get(s, m == 1 ? "then" : "else");
        if (m < 0)
            return -1;
        if (branch)
            AND(r, valid(x, branch, v, depth + 1));
    }
    if (ref) {
        const json_t *target =
            json_is_string(ref) ? sift__js_local_target(x->c, s, json_string_value(ref)) : NULL;
        AND(r, target ? valid(x, target, v, depth + 1) : -1);
    }
    return r;
}

sift_status sift__js_value_valid(sift__js *c, const json_t *s, const json_t *v, int *answer)
{
    vctx x = {c, SIFT_OK};
    *answer = valid(&x, s, v, 0);
    return x.st;
}

/*
 * json_schema_cond.c - keywords rewritten into the subset: if / then /
 * else, propertyNames, and the negation of more shapes for `not` (and
 * for if's "else" branch).
 *
 * if / then / else: (if and then) or (not if and else), as two
 * alternatives of the rest of the schema, each merged with its part;
 * "not if" is the negation below, and an `if` it cannot negate goes
 * through the unsupported policy. Without `if`, or with neither then
 * nor else, the keywords have no effect. The alternatives are disjoint
 * (a value meets `if` or its negation), so the grammar stays
 * unambiguous.
 *
 * propertyNames K: a finite K (const / enum) makes the names K admits
 * declared properties (the additionalProperties schema theirs) and
 * closes the object; under additionalProperties false the declared names
 * K rejects become absent; on an object without declared names or
 * patterns, an undeclared key is K's string rule (json_schema_object.c
 * asks sift__js_key_names). Other shapes are unsupported.
 *
 * Negation (sift__js_negate_more, beside the shapes negate in
 * json_schema_gen.c knows): const / enum of scalars (no string: the
 * types left out, the other boolean, the open number ranges between
 * integral values), properties (an object that has one of them with a
 * value its schema rejects), and a schema of several independent
 * keywords (not (A and B) = not A or not B). Keywords whose meaning
 * depends on a sibling (additionalProperties, items beside prefixItems,
 * contains, if, ...) are not split.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema.h"

static sift_status nomem(sift__js *c)
{
    return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
}

/* Releases x; NULL. */
static json_t *drop(json_t *x)
{
    json_decref(x);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Negation of more shapes                                             */
/* ------------------------------------------------------------------ */

/* At most this many numbers in a negated enum (one range between each
 * two). */
#define NEG_MAX_NUMBERS 16

/* The open ranges of numbers around the sorted distinct integral values
 * x[0..n), appended to alts. */
static int number_gaps(json_t *alts, const double *x, size_t n)
{
    for (size_t i = 0; i <= n; i++) {
        json_t *r = json_pack("{s:s}", "type", "number");
        if (!r)
            return -1;
        if (i > 0 && json_object_set_new(r, "exclusiveMinimum", json_integer((json_int_t)x[i - 1])))
            r = drop(r);
        if (r && i < n &&
            json_object_set_new(r, "exclusiveMaximum", json_integer((json_int_t)x[i])))
            r = drop(r);
        if (!r || json_array_append_new(alts, r))
            return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* An anyOf of alts: false when empty, its member when one. */
static json_t *any_of(json_t *alts)
{
    if (!alts)
        return NULL;
    if (json_array_size(alts) == 0) {
        json_decref(alts);
        return json_false();
    }
    if (json_array_size(alts) == 1) {
        json_t *one = json_incref(json_array_get(alts, 0));
        json_decref(alts);
        return one;
    }
    return json_pack("{s:o}", "anyOf", alts);
}

/* ------------------------------------------------------------------ */
/* Strings other than a finite set: a pattern over the set's trie      */
/* ------------------------------------------------------------------ */

#define NEG_MAX_STRINGS 32
#define NEG_MAX_CPS 64
#define NEG_PATTERN_CAP 32768

typedef struct {
    uint32_t cp[NEG_MAX_STRINGS][NEG_MAX_CPS];
    size_t len[NEG_MAX_STRINGS];
    size_t n;
    char *out;
    size_t at;
} strset;

static int put(strset *t, const char *s)
{
    size_t k = strlen(s);
    if (t->at + k + 1 > NEG_PATTERN_CAP)
        return -1;
    memcpy(t->out + t->at, s, k + 1);
    t->at += k;
    return 0;
}

/* A code point as a pattern atom: letters and digits as they are,
 * others (BMP only) as \uXXXX. */
static int put_cp(strset *t, uint32_t cp)
{
    char e[8];
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
        snprintf(e, sizeof e, "%c", (char)cp);
    else
        snprintf(e, sizeof e, "\\u%04X", (unsigned)cp);
    return put(t, e);
}

/* The rest, after the d code points strings idx[lo..hi) share, of a
 * string outside the set: empty unless one of them ends there, another
 * next code point then anything, or a next code point of theirs and the
 * rest of its group. idx is sorted by code points from d on. */
static int trie_node(strset *t, const size_t *idx, size_t lo, size_t hi, size_t d)
{
    int ends = 0, alts = 0;
    size_t first = lo;
    for (size_t i = lo; i < hi; i++)
        ends |= t->len[idx[i]] == d;
    while (first < hi && t->len[idx[first]] == d)
        first++;
    if (!ends && put(t, ""))
        return -1;
    alts = !ends;
    if (first == hi) /* no longer string: any non-empty rest */
        return put(t, alts ? "|[\\s\\S]+" : "[\\s\\S]+");
    if (put(t, alts ? "|[^" : "[^"))
        return -1;
    for (size_t i = first; i < hi; i++)
        if ((i == first || t->cp[idx[i]][d] != t->cp[idx[i - 1]][d]) && put_cp(t, t->cp[idx[i]][d]))
            return -1;
    if (put(t, "][\\s\\S]*"))
        return -1;
    for (size_t i = first; i < hi;) {
        size_t j = i;
        while (j < hi && t->cp[idx[j]][d] == t->cp[idx[i]][d])
            j++;
        if (put(t, "|") || put_cp(t, t->cp[idx[i]][d]) || put(t, "(?:") ||
            trie_node(t, idx, i, j, d + 1) || put(t, ")"))
            return -1;
        i = j;
    }
    return 0;
}

static int cmp_strings(const strset *t, size_t x, size_t y)
{
    for (size_t i = 0; i < t->len[x] && i < t->len[y]; i++)
        if (t->cp[x][i] != t->cp[y][i])
            return t->cp[x][i] < t->cp[y][i] ? -1 : 1;
    return t->len[x] < t->len[y] ? -1 : t->len[x] > t->len[y];
}

/* {"type": "string", "pattern": P} with P matching the strings that
 * strs (a JSON array of strings) does not hold, or NULL (too many or
 * too long strings, a code point outside the BMP). */
static json_t *negate_strings(const json_t *strs)
{
    strset *t = calloc(1, sizeof *t);
    if (!t || json_array_size(strs) > NEG_MAX_STRINGS) {
        free(t);
        return NULL;
    }
    for (size_t i = 0; i < json_array_size(strs); i++) {
        const unsigned char *p = (const unsigned char *)json_string_value(json_array_get(strs, i));
        size_t n = json_string_length(json_array_get(strs, i)), k = 0, at = 0;
        while (at < n) {
            uint32_t cp;
            size_t step = sift__utf8_decode(p + at, n - at, &cp);
            if (!step || cp > 0xFFFF || cp == 0 || k >= NEG_MAX_CPS) {
                free(t);
                return NULL;
            }
            t->cp[t->n][k++] = cp;
            at += step;
        }
        t->len[t->n++] = k;
    }
    size_t idx[NEG_MAX_STRINGS];
    for (size_t i = 0; i < t->n; i++) { /* insertion sort: at most 32 */
        size_t j = i;
        for (; j > 0 && cmp_strings(t, idx[j - 1], i) > 0; j--)
            idx[j] = idx[j - 1];
        idx[j] = i;
    }
    t->out = malloc(NEG_PATTERN_CAP);
    json_t *r = NULL;
    if (t->out && !put(t, "^(?:") && !trie_node(t, idx, 0, t->n, 0) && !put(t, ")$"))
        r = json_pack("{s:s,s:s}", "type", "string", "pattern", t->out);
    free(t->out);
    free(t);
    return r;
}

/* The values other than those of vals (scalars), or NULL. */
static json_t *negate_values(const json_t *vals)
{
    double x[NEG_MAX_NUMBERS];
    size_t n = 0;
    json_t *strs = json_array();
    if (!strs)
        return NULL;
    unsigned seen = 0;
    int has_true = 0, has_false = 0;
    if (!json_is_array(vals))
        return drop(strs);
    for (size_t i = 0; i < json_array_size(vals); i++) {
        const json_t *v = json_array_get(vals, i);
        int64_t k;
        if (json_is_null(v)) {
            seen |= T_NULL;
        } else if (json_is_boolean(v)) {
            seen |= T_BOOLEAN;
            has_true |= json_is_true(v);
            has_false |= json_is_false(v);
        } else if (json_is_number(v) && sift__js_integral(json_number_value(v), &k) &&
                   llabs(k) < 4503599627370496LL && n < NEG_MAX_NUMBERS) {
            seen |= T_NUMBER;
            x[n++] = (double)k;
        } else if (json_is_string(v)) {
            seen |= T_STRING;
            if (json_array_append((json_t *)strs, (json_t *)v))
                return drop(strs);
        } else {
            return drop(strs); /* containers, fractions, too many numbers */
        }
    }
    qsort(x, n, sizeof x[0], cmp_double);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || x[u - 1] != x[i])
            x[u++] = x[i];
    unsigned others = (T_NULL | T_BOOLEAN | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING) & ~seen;
    json_t *alts = json_array();
    if (alts && others) {
        json_t *types = sift__js_mask_to_types(others);
        if (!types || json_array_append_new(alts, json_pack("{s:o}", "type", types)))
            alts = drop(alts);
    }
    if (alts && has_true != has_false &&
        json_array_append_new(alts, json_pack("{s:b}", "const", has_false)))
        alts = drop(alts);
    if (alts && u && number_gaps(alts, x, u))
        alts = drop(alts);
    if (alts && json_array_size(strs)) {
        json_t *ns = negate_strings(strs);
        if (!ns || json_array_append_new(alts, ns))
            alts = drop(alts);
    }
    json_decref(strs);
    return any_of(alts);
}

/* not {"properties": P}: an object holding one of P's names with a
 * value its schema rejects. */
static json_t *negate_properties(const json_t *props, int depth)
{
    if (!json_is_object(props))
        return NULL;
    json_t *alts = json_array();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)props, k, v)
    {
        json_t *n = alts ? sift__js_negate(v, depth + 1) : NULL;
        if (n && json_is_false(n)) {
            json_decref(n);
            continue;
        }
        json_t *alt = n ? json_pack("{s:s,s:[s],s:{s:o}}", "type", "object", "required", k,
                                    "properties", k, n)
                        : NULL;
        if (!alt || json_array_append_new(alts, alt)) {
            json_decref(alts);
            return NULL;
        }
    }
    return any_of(alts);
}

/* Keywords that hold or fail on their own, whatever their siblings. */
static int independent(const char *k)
{
    static const char *const keys[] = {
        "type",          "enum",      "const",    "required",         "properties",
        "minLength",     "maxLength", "minItems", "maxItems",         "minProperties",
        "maxProperties", "minimum",   "maximum",  "exclusiveMinimum", "exclusiveMaximum",
        "not",           "anyOf",     "allOf",    "multipleOf",       "pattern",
        "format",
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(k, keys[i]))
            return 1;
    return 0;
}

/* not {k1: v1, k2: v2, ...} = anyOf [not {k1: v1}, not {k2: v2}, ...]
 * when every keyword is independent. */
static json_t *negate_split(const json_t *s, int depth)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v)
    {
        if (!sift__js_is_annotation(k) && !independent(k))
            return NULL;
    }
    json_t *alts = json_array();
    json_object_foreach((json_t *)s, k, v)
    {
        if (sift__js_is_annotation(k))
            continue;
        json_t *one = alts ? json_pack("{s:O}", k, v) : NULL;
        json_t *n = one ? sift__js_negate(one, depth + 1) : NULL;
        json_decref(one);
        if (n && json_is_false(n)) {
            json_decref(n);
            continue;
        }
        if (!n || json_is_true(n) || json_array_append_new(alts, n)) {
            json_decref(alts);
            return n && json_is_true(n) ? n : NULL;
        }
    }
    return any_of(alts);
}

json_t *sift__js_negate_more(const json_t *s, int depth)
{
    const char *key, *one = NULL;
    json_t *v;
    size_t n = 0;
    if (!json_is_object(s) || depth > 16)
        return NULL;
    json_object_foreach((json_t *)s, key, v)
    {
        if (!sift__js_is_annotation(key))
            one = key, n++;
    }
    if (n > 1)
        return negate_split(s, depth);
    if (n == 0)
        return NULL;
    v = json_object_get(s, one);
    if (!strcmp(one, "const")) {
        json_t *vals = json_pack("[O]", v);
        json_t *r = vals ? negate_values(vals) : NULL;
        json_decref(vals);
        return r;
    }
    if (!strcmp(one, "enum"))
        return negate_values(v);
    if (!strcmp(one, "properties"))
        return negate_properties(v, depth);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* if / then / else                                                    */
/* ------------------------------------------------------------------ */

static const char *const cond_keys[] = {"if", "then", "else"};

int sift__js_is_cond_key(const char *key)
{
    return !strcmp(key, "if") || !strcmp(key, "then") || !strcmp(key, "else");
}

/* Whether s's if / then / else take effect: `if` with then or else. */
static int cond_active(const json_t *s)
{
    return json_object_get(s, "if") && (json_object_get(s, "then") || json_object_get(s, "else"));
}

/* A second if / then / else unit in a merge: (if & then) | (not if &
 * else), conjoined with dst's anyOf. */
static sift_status merge_cond_any(sift__js *c, json_t *dst, const json_t *src)
{
    const json_t *ifs = json_object_get(src, "if");
    const json_t *then = json_object_get(src, "then"), *els = json_object_get(src, "else");
    json_t *yes = json_true();
    json_t *neg = json_is_boolean(ifs) ? json_incref((json_t *)ifs) : sift__js_negate(ifs, 0);
    if (!neg)
        return sift__js_unsupported(c, "if",
                                    "two if / then / else in one merged schema (allOf, $ref)");
    json_t *alts = json_pack("[{s:[OO]},{s:[OO]}]", "allOf", ifs, then ? then : yes, "allOf", neg,
                             els ? els : yes);
    json_decref(neg);
    sift_status st = alts ? sift__js_merge_any(c, dst, alts) : nomem(c);
    json_decref(alts);
    return st;
}

sift_status sift__js_merge_cond(sift__js *c, json_t *dst, const json_t *src)
{
    if (!cond_active(src))
        return SIFT_OK;
    for (size_t i = 0; i < 3; i++)
        if (json_object_get(dst, cond_keys[i]))
            return merge_cond_any(c, dst, src);
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_object_get(src, cond_keys[i]);
        if (v && json_object_set(dst, cond_keys[i], v))
            return nomem(c);
    }
    return SIFT_OK;
}

/* "a | b" of two alternatives, either of which may be never. */
static sift_status join2(sift__js *c, const sift__js_ref *a, sift__js_ref *r)
{
    if (a[0].never || a[1].never) {
        *r = a[0].never ? a[1] : a[0];
        return SIFT_OK;
    }
    char body[64];
    snprintf(body, sizeof body, "%s | %s", a[0].name, a[1].name);
    return sift__js_rule(c, r, body);
}

sift_status sift__js_gen_merged_any(sift__js *c, const json_t *s, const json_t *neg,
                                    sift__js_ref *r)
{
    const json_t *alts = json_object_get(neg, "anyOf");
    if (!json_is_array(alts) || json_object_size(neg) != 1 || !json_object_get(s, "anyOf"))
        return sift__js_gen_merged(c, s, neg, r);
    sift__js_ref acc[2];
    acc[0].never = 1;
    acc[0].name[0] = '\0';
    sift_status st = SIFT_OK;
    for (size_t i = 0; !st && i < json_array_size(alts); i++) {
        st = sift__js_gen_merged(c, s, json_array_get(alts, i), &acc[1]);
        if (!st)
            st = join2(c, acc, &acc[0]);
    }
    if (!st)
        *r = acc[0];
    return st;
}

sift_status sift__js_gen_cond(sift__js *c, const json_t *s, sift__js_ref *r)
{
    const json_t *ifs = json_object_get(s, "if");
    json_t *rest = json_copy((json_t *)s);
    if (!rest)
        return nomem(c);
    for (size_t i = 0; i < 3; i++)
        json_object_del(rest, cond_keys[i]);
    sift_status st = SIFT_OK;
    for (size_t i = 0; !st && i < 3; i++) {
        const json_t *x = json_object_get(s, cond_keys[i]);
        if (x && !json_is_object(x) && !json_is_boolean(x))
            st = sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, cond_keys[i],
                               "'%s' must be a schema (an object or a boolean)", cond_keys[i]);
    }
    json_t *neg = NULL;
    if (!st && cond_active(s) && !json_is_boolean(ifs)) {
        neg = sift__js_negate(ifs, 0);
        if (!neg)
            st = sift__js_unsupported(c, "if", "an 'if' whose negation is not supported");
    }
    if (st || !cond_active(s) || (!json_is_boolean(ifs) && !neg)) {
        /* no effect (or ignored under the unsupported policy) */
        if (!st)
            st = sift__js_gen(c, rest, r);
        json_decref(rest);
        return st;
    }
    const json_t *then = json_object_get(s, "then"), *els = json_object_get(s, "else");
    json_t *yes = json_true();
    /* not if: each alternative of an anyOf negation on its own, so that it
     * merges with an anyOf of the rest (overlapping alternatives are
     * still exact) */
    json_t *negs = json_is_true(ifs)    ? json_array()
                   : json_is_false(ifs) ? json_pack("[b]", 1)
                   : json_is_array(json_object_get(neg, "anyOf")) && json_object_size(neg) == 1
                       ? json_incref(json_object_get(neg, "anyOf"))
                       : json_pack("[O]", neg);
    json_t *part =
        json_is_false(ifs) ? json_false() : json_pack("{s:[OO]}", "allOf", ifs, then ? then : yes);
    sift__js_ref alt[2];
    if (!part || !negs)
        st = nomem(c);
    size_t mark = c->path.n;
    if (!st && !(st = sift__js_push_key(c, "then")))
        st = sift__js_gen_merged(c, rest, part, &alt[0]);
    sift__js_pop(c, mark);
    for (size_t i = 0; !st && i < json_array_size(negs); i++) {
        json_t *p = json_pack("{s:[OO]}", "allOf", json_array_get(negs, i), els ? els : yes);
        if (!p)
            st = nomem(c);
        else if (!(st = sift__js_push_key(c, "else")))
            st = sift__js_gen_merged(c, rest, p, &alt[1]);
        sift__js_pop(c, mark);
        json_decref(p);
        if (!st)
            st = join2(c, alt, &alt[0]);
    }
    if (!st)
        *r = alt[0];
    json_decref(part);
    json_decref(negs);
    json_decref(yes);
    json_decref(neg);
    json_decref(rest);
    return st;
}

/* ------------------------------------------------------------------ */
/* propertyNames                                                       */
/* ------------------------------------------------------------------ */

/* Whether K constrains nothing (true, or annotations only). */
static int admits_all(const json_t *k)
{
    if (json_is_true(k))
        return 1;
    const char *key;
    json_t *v;
    if (!json_is_object(k))
        return 0;
    json_object_foreach((json_t *)k, key, v)
    {
        if (!sift__js_is_annotation(key))
            return 0;
    }
    return 1;
}

/* Whether the undeclared properties of s are closed. */
static int closed(sift__js *c, const json_t *s)
{
    const json_t *ap = json_object_get(s, "additionalProperties");
    return json_is_false(ap) || (!ap && c->strict);
}

int sift__js_names_by_key_rule(sift__js *c, const json_t *s)
{
    const json_t *k = json_object_get(s, "propertyNames");
    const json_t *props = json_object_get(s, "properties");
    const json_t *pp = json_object_get(s, "patternProperties");
    return json_is_object(k) && !admits_all(k) && !json_object_get(k, "const") &&
           !json_object_get(k, "enum") && !closed(c, s) &&
           (!props || (json_is_object(props) && !json_object_size(props))) &&
           (!pp || (json_is_object(pp) && !json_object_size(pp))) &&
           !json_array_size(json_object_get(s, "required"));
}

sift_status sift__js_key_names(sift__js *c, const json_t *s, sift__js_ref *r)
{
    json_t *str = json_pack("{s:s}", "type", "string");
    size_t mark = c->path.n;
    sift_status st = str ? sift__js_push_key(c, "propertyNames") : nomem(c);
    if (!st)
        st = sift__js_gen_merged(c, json_object_get(s, "propertyNames"), str, r);
    sift__js_pop(c, mark);
    json_decref(str);
    return st;
}

/* Whether name is valid against K (*ok); -1 goes through the
 * unsupported policy (kept). */
static sift_status name_ok(sift__js *c, const json_t *k, const char *name, int *ok)
{
    json_t *v = json_string(name);
    sift_status st = v ? sift__js_value_valid(c, k, v, ok) : nomem(c);
    json_decref(v);
    if (!st && *ok < 0) {
        st = sift__js_unsupported(c, "propertyNames",
                                  "a property name that 'propertyNames' cannot be tested on");
        *ok = 1;
    }
    return st;
}

/* The declared properties of s (a new object): those K rejects false. */
static sift_status filter_declared(sift__js *c, const json_t *s, const json_t *k, json_t **out)
{
    const json_t *props = json_object_get(s, "properties");
    json_t *p = props ? json_copy((json_t *)props) : json_object();
    sift_status st = p ? SIFT_OK : nomem(c);
    if (!st && props && !json_is_object(props))
        st = sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "properties", "'properties' must be an object");
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)props, name, v)
    {
        int ok = 1;
        if (!st)
            st = name_ok(c, k, name, &ok);
        if (!st && !ok && json_object_set_new(p, name, json_false()))
            st = nomem(c);
    }
    if (st)
        json_decref(p);
    else
        *out = p;
    return st;
}

/* A finite K (const / enum): the names it admits become properties
 * taking the additionalProperties schema (unless declared), and the
 * object closes. */
static sift_status add_finite(sift__js *c, json_t *rest, json_t *props, const json_t *k)
{
    const json_t *kc = json_object_get(k, "const"), *ke = json_object_get(k, "enum");
    json_t *vals = kc ? json_pack("[O]", kc) : json_incref((json_t *)ke);
    const json_t *ap = json_object_get(rest, "additionalProperties");
    json_t *extra = ap ? json_incref((json_t *)ap) : json_boolean(!c->strict);
    sift_status st = vals && extra ? SIFT_OK : nomem(c);
    if (!st && !json_is_array(vals))
        st = sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "propertyNames", "'enum' must be an array");
    for (size_t i = 0; !st && i < json_array_size(vals); i++) {
        const char *name = json_string_value(json_array_get(vals, i));
        int ok = 1;
        if (!name || json_object_get(props, name))
            continue;
        st = name_ok(c, k, name, &ok);
        if (!st && ok && json_object_set(props, name, extra))
            st = nomem(c);
    }
    if (!st && json_object_set_new(rest, "additionalProperties", json_false()))
        st = nomem(c);
    json_decref(vals);
    json_decref(extra);
    return st;
}

sift_status sift__js_gen_names(sift__js *c, const json_t *s, sift__js_ref *r)
{
    const json_t *k = json_object_get(s, "propertyNames");
    json_t *rest = json_copy((json_t *)s), *props = NULL;
    sift_status st = rest ? SIFT_OK : nomem(c);
    if (!st && !json_is_object(k) && !json_is_boolean(k))
        st = sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "propertyNames",
                           "'propertyNames' must be a schema (an object or a boolean)");
    if (!st)
        json_object_del(rest, "propertyNames");
    int finite = json_is_object(k) && (json_object_get(k, "const") || json_object_get(k, "enum"));
    const json_t *pp = json_object_get(s, "patternProperties");
    if (st || admits_all(k)) {
        /* no constraint */
    } else if (pp && (!json_is_object(pp) || json_object_size(pp))) {
        st = sift__js_unsupported(c, "propertyNames", "'propertyNames' beside 'patternProperties'");
    } else if (json_is_false(k) || finite || closed(c, s)) {
        /* false admits no name: every declared one absent, the rest closed */
        st = json_is_false(k) ? SIFT_OK : filter_declared(c, s, k, &props);
        if (!st && json_is_false(k)) {
            props = json_copy(json_object_get(s, "properties"));
            if (!props)
                props = json_object();
            const char *name;
            json_t *v;
            json_object_foreach(props, name, v)
            {
                if (json_object_set_new(props, name, json_false()))
                    st = nomem(c);
            }
            if (!st && json_object_set_new(rest, "additionalProperties", json_false()))
                st = nomem(c);
        }
        if (!st && finite)
            st = add_finite(c, rest, props, k);
        if (!st && json_object_set(rest, "properties", props))
            st = nomem(c);
    } else {
        st = sift__js_unsupported(c, "propertyNames",
                                  "'propertyNames' beside declared or required properties that "
                                  "additionalProperties leaves open");
    }
    if (!st)
        st = sift__js_gen(c, rest, r);
    json_decref(props);
    json_decref(rest);
    return st;
}

/* ------------------------------------------------------------------ */
/* not {"type": [... "integer" ...]}: the numbers with a fraction       */
/* ------------------------------------------------------------------ */

/* Whether s has keywords beside "type" (annotations aside). */
static int beyond_type(const json_t *s)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (strcmp(key, "type") && !sift__js_is_annotation(key))
            return 1;
    }
    return 0;
}

/* Whether s has keywords that may constrain numbers: any but "type" and
 * the keywords of strings, objects and arrays. */
static int constrains_numbers(const json_t *s)
{
    static const char *const other[] = {
        "type",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
        "maxProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "patternProperties",
    };
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        int known = sift__js_is_annotation(key);
        for (size_t i = 0; !known && i < sizeof other / sizeof other[0]; i++)
            known = !strcmp(key, other[i]);
        if (!known)
            return 1;
    }
    return 0;
}

sift_status sift__js_gen_not_integer(sift__js *c, const json_t *s, sift__js_ref *r, int *done)
{
    const json_t *n = json_object_get(s, "not");
    *done = 0;
    if (!json_is_object(n) || beyond_type(n) || json_object_get(n, "nullable") ||
        json_object_get(s, "nullable"))
        return SIFT_OK;
    unsigned m = sift__js_type_mask(json_object_get(n, "type"));
    if (!(m & T_INTEGER) || (m & T_NUMBER))
        return SIFT_OK;
    json_t *rest = json_copy((json_t *)s);
    if (!rest)
        return nomem(c);
    json_object_del(rest, "not");
    const json_t *rt = json_object_get(rest, "type");
    int numbers = !rt || (sift__js_type_mask(rt) & T_NUMBER);
    if (numbers && constrains_numbers(rest)) { /* bounds or combinators: refused */
        json_decref(rest);
        return SIFT_OK;
    }
    unsigned others = (T_NULL | T_BOOLEAN | T_OBJECT | T_ARRAY | T_STRING) & ~m;
    json_t *types = sift__js_mask_to_types(others);
    json_t *t = types ? json_pack("{s:o}", "type", types) : NULL;
    sift__js_ref alt[2];
    alt[1].never = !numbers;
    alt[1].name[0] = '\0';
    sift_status st = t ? sift__js_gen_merged(c, rest, t, &alt[0]) : nomem(c);
    /* Written without exponent (1.5e1 is an integer), below 10^9 with at
     * most 6 fraction digits before trailing zeros: then the value is
     * 10^-6 or more from every integer, over 8 times the spacing of
     * doubles there, so a validator that reads it as a double agrees
     * (9007199254740993.5 reads as an integer). */
    if (!st && numbers)
        st = sift__js_rule(c, &alt[1],
                           "\"-\"? (\"0\" | [1-9] [0-9]{0,8}) \".\" [0-9]{0,5} [1-9] \"0\"*");
    if (!st)
        st = join2(c, alt, r);
    json_decref(t);
    json_decref(rest);
    *done = !st;
    return st;
}

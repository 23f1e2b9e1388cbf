/*
 * json_schema_oneof.c - oneOf beyond the linear tests of json_schema_gen.c.
 *
 * A oneOf is generated as an anyOf when no value matches two of its
 * branches. json_schema_gen.c decides the common shapes (types, const /
 * enum values, a common discriminator) in linear time; what they leave
 * open comes here, in three steps, each exact:
 *
 * - types that two branches admit whole (no keyword of that type, as in
 *   {"required": [...]} for a string): every value of such a type
 *   matches two branches, so the oneOf rejects it; the type is taken out
 *   of the schema (*narrow) and the branches need be disjoint only on
 *   the types left;
 * - a pairwise test, recursive: two schemas are disjoint when, on each
 *   type both admit, some pair of their parts (the schema, its allOf
 *   members, its $ref target) are: const / enum values the other
 *   rejects (json_schema_value.c decides), a name one requires that the
 *   other forbids (a false property, or additionalProperties false
 *   without it), a name both require whose schemas are disjoint (the
 *   same test, one level down), number ranges or string lengths apart,
 *   a string of length 0 the other rejects, "^literal$" patterns of
 *   different strings (or one whose string the other rejects); a branch that is an anyOf /
 *   oneOf alone is disjoint when all its alternatives are;
 * - object branches of the form {"type": "object", "required": [...],
 *   "properties": {...}} that overlap are rewritten: branch i becomes
 *   branch i and, for each overlapping branch j, "not branch j" spelled
 *   as the ways an object of branch i can fail branch j: a name that j
 *   requires is absent ({"properties": {name: false}}), or a property of
 *   j is present with a value j's schema rejects ({"required": [p],
 *   "properties": {p: way}}, a way for each keyword of that schema to
 *   fail: {"not": {keyword: value}}, or one level down for properties). A way that cannot happen
 *   (a name branch i or the siblings require, a property i or the
 *   siblings forbid) or that cannot fail (a schema equal to the one
 *   branch i or the siblings give p) is left out; when no way is left,
 *   branch i is never alone and becomes false. The choices of the
 *   branches j multiply into alternatives (at most MAX_ALTS a branch).
 *
 * Anything else stays refused by the caller. Work: a unit per schema
 * pair compared, per value tested, per name looked up.
 */
#include <string.h>

#include "json_schema.h"

/* The most branches the pairwise test compares (n^2 / 2 pairs). */
#define ONE_OF_MAX_PAIRWISE 64

#define ALL6 (T_NULL | T_BOOLEAN | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING)
#define MAX_DEPTH 8
#define MAX_FACETS 16
#define MAX_ALTS 64

static sift_status nomem(sift__js *c)
{
    return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
}

/* Integer folded into number: the types as far as overlap goes. */
static unsigned fold(unsigned m)
{
    if (m & T_INTEGER)
        m = (m & ~(unsigned)T_INTEGER) | T_NUMBER;
    return m & ALL6;
}

static unsigned value_bit(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL: return T_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return T_BOOLEAN;
    case JSON_OBJECT: return T_OBJECT;
    case JSON_ARRAY: return T_ARRAY;
    case JSON_STRING: return T_STRING;
    default: return T_NUMBER;
    }
}

/* Whether every key of s is k (NULL: none) or an annotation. */
static int only(const json_t *s, const char *k)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (!sift__js_is_annotation(key) && (!k || strcmp(key, k)))
            return 0;
    }
    return 1;
}

/* s, or the target of its local $ref when s is only that (8 hops). */
static const json_t *target(sift__js *c, const json_t *s, sift_status *st)
{
    for (int hops = 0; !*st && hops < 8 && json_is_object(s) && only(s, "$ref"); hops++) {
        const json_t *ref = json_object_get(s, "$ref");
        const json_t *t =
            json_is_string(ref) ? sift__js_local_target(c, s, json_string_value(ref)) : NULL;
        if (!t)
            return s;
        *st = sift__js_work(c, 1);
        s = t;
    }
    return s;
}

/* The const / enum values of s, or NULL. */
static const json_t *values_of(const json_t *s, json_t **owned)
{
    *owned = NULL;
    const json_t *k = json_object_get(s, "const"), *e = json_object_get(s, "enum");
    if (k)
        return *owned = json_pack("[O]", k);
    return json_is_array(e) ? e : NULL;
}

/* The types s admits (folded), from its type, const / enum. */
static unsigned own6(const json_t *s)
{
    if (json_is_false(s))
        return 0;
    if (!json_is_object(s))
        return ALL6;
    const json_t *t = json_object_get(s, "type");
    unsigned m = t ? fold(sift__js_type_mask(t)) : ALL6;
    if (t && json_is_true(json_object_get(s, "nullable")))
        m |= T_NULL;
    const json_t *k = json_object_get(s, "const"), *e = json_object_get(s, "enum");
    if (k)
        m &= value_bit(k);
    else if (json_is_array(e)) {
        unsigned v = 0;
        for (size_t i = 0; i < json_array_size(e); i++)
            v |= value_bit(json_array_get(e, i));
        m &= v;
    }
    return m;
}

/* Whether s admits every value of type `bit`: no keyword of that type
 * nor any other constraint. */
static int vacuous(const json_t *s, unsigned bit)
{
    if (json_is_true(s))
        return 1;
    if (!json_is_object(s))
        return 0;
    const json_t *t = json_object_get(s, "type");
    if (t && !(sift__js_type_mask(t) & bit))
        return 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (sift__js_is_annotation(key) || !strcmp(key, "type"))
            continue;
        unsigned own = sift__js_key_type(key);
        if (!own || own == bit)
            return 0;
    }
    return 1;
}

/* The schemas that s is a subset of: s, its allOf members, its $ref
 * target (s alone when its siblings are ignored), to MAX_FACETS. */
typedef struct {
    const json_t *f[MAX_FACETS];
    size_t n;
} facets;

static void add_facets(sift__js *c, const json_t *s, facets *out, int depth, sift_status *st)
{
    s = target(c, s, st);
    if (*st || out->n >= MAX_FACETS)
        return;
    const json_t *ref = json_is_object(s) ? json_object_get(s, "$ref") : NULL;
    if (!(ref && c->ref_alone))
        out->f[out->n++] = s;
    if (!json_is_object(s) || depth >= 3)
        return;
    const json_t *all = json_object_get(s, "allOf");
    for (size_t i = 0; !*st && json_is_array(all) && i < json_array_size(all); i++)
        add_facets(c, json_array_get(all, i), out, depth + 1, st);
    const json_t *t =
        json_is_string(ref) ? sift__js_local_target(c, s, json_string_value(ref)) : NULL;
    if (t && !*st)
        add_facets(c, t, out, depth + 1, st);
}

static sift_status disjoint(sift__js *c, const json_t *a, const json_t *b, unsigned within,
                            int depth, int *d);

/* Whether every value of type `bit` in x's const / enum fails y (*d). */
static sift_status values_apart(sift__js *c, const json_t *x, const json_t *y, unsigned bit, int *d)
{
    json_t *owned;
    const json_t *vals = values_of(x, &owned);
    sift_status st = SIFT_OK;
    *d = vals != NULL;
    for (size_t i = 0; !st && *d && i < json_array_size(vals); i++) {
        const json_t *v = json_array_get(vals, i);
        int answer = -1;
        if (value_bit(v) != bit)
            continue;
        if (!(st = sift__js_work(c, 1)))
            st = sift__js_value_valid(c, y, v, &answer);
        *d = answer == 0;
    }
    json_decref(owned);
    return st;
}

static int names_has(const json_t *names, const char *name)
{
    for (size_t i = 0; i < json_array_size(names); i++)
        if (json_is_string(json_array_get(names, i)) &&
            !strcmp(json_string_value(json_array_get(names, i)), name))
            return 1;
    return 0;
}

/* Whether s admits no property `name` (its schema false, or s closed
 * by additionalProperties false without patterns or that name). */
static int forbids(const json_t *s, const char *name)
{
    const json_t *p = json_object_get(s, "properties"),
                 *pp = json_object_get(s, "patternProperties");
    if (p && !json_is_object(p))
        return 0;
    if (json_is_false(json_object_get(p, name)))
        return 1;
    return json_is_false(json_object_get(s, "additionalProperties")) && !json_object_get(p, name) &&
           (!pp || (json_is_object(pp) && json_object_size(pp) == 0));
}

/* Whether some part in f requires `name`. */
static int parts_require(const facets *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (names_has(json_object_get(f->f[i], "required"), name))
            return 1;
    return 0;
}

/* Objects: a name that a part of one schema requires and a part of the
 * other forbids, or that both require with disjoint schemas in some
 * parts (every part's schema of a property holds) (*d). */
static sift_status objects_apart(sift__js *c, const facets *fx, const facets *fy, int depth, int *d)
{
    sift_status st = SIFT_OK;
    *d = 0;
    for (int side = 0; !st && !*d && side < 2; side++) {
        const facets *x = side ? fy : fx, *y = side ? fx : fy;
        for (size_t i = 0; !st && !*d && i < x->n; i++) {
            const json_t *rx = json_object_get(x->f[i], "required");
            for (size_t k = 0; !st && !*d && k < json_array_size(rx); k++) {
                const char *name = json_string_value(json_array_get(rx, k));
                if (!name || (st = sift__js_work(c, (int64_t)(x->n + y->n))))
                    continue;
                for (size_t j = 0; !*d && j < y->n; j++)
                    *d = json_is_object(y->f[j]) && forbids(y->f[j], name);
                if (*d || side || !parts_require(y, name))
                    continue;
                for (size_t a = 0; !st && !*d && a < x->n; a++)
                    for (size_t b = 0; !st && !*d && b < y->n; b++) {
                        const json_t *sx =
                            json_object_get(json_object_get(x->f[a], "properties"), name);
                        const json_t *sy =
                            json_object_get(json_object_get(y->f[b], "properties"), name);
                        if (sx && sy)
                            st = disjoint(c, sx, sy, ALL6, depth + 1, d);
                    }
            }
        }
    }
    if (st)
        *d = 0;
    return st;
}

/* A numeric bound of s: key's number, or the exclusive one's. */
static int bound(const json_t *s, const char *key, const char *xkey, double *v)
{
    const json_t *b = json_object_get(s, key), *x = json_object_get(s, xkey);
    if (json_is_number(b))
        *v = json_number_value(b);
    else if (json_is_number(x))
        *v = json_number_value(x);
    else
        return 0;
    return 1;
}

static int ranges_apart(const json_t *x, const json_t *y)
{
    double hx, ly;
    return bound(x, "maximum", "exclusiveMaximum", &hx) &&
           bound(y, "minimum", "exclusiveMinimum", &ly) && hx < ly;
}

static int lengths_apart(const json_t *x, const json_t *y)
{
    const json_t *hx = json_object_get(x, "maxLength"), *ly = json_object_get(y, "minLength");
    return json_is_integer(hx) && json_is_integer(ly) &&
           json_integer_value(hx) < json_integer_value(ly);
}

/* The one string that pattern "^lit$" matches (ECMA-262: without the
 * m flag, ^ and $ match only at the ends) into buf, when lit is letters,
 * digits and the punctuation below, or punctuation escaped with \;
 * else 0. */
static int literal_pattern(const json_t *s, char *buf, size_t cap)
{
    const char *p = json_string_value(json_object_get(s, "pattern"));
    size_t n = p ? strlen(p) : 0, k = 0;
    if (n < 2 || p[0] != '^' || p[n - 1] != '$' || (n >= 3 && p[n - 2] == '\\'))
        return 0;
    for (size_t i = 1; i + 1 < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\\' && i + 2 < n && strchr(".-/\\+*?()[]{}|^$:_ ", p[i + 1]))
            ch = (unsigned char)p[++i];
        else if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                   (ch >= '0' && ch <= '9') || strchr("_-:/ @#%&=,;<>'\"!~`", ch)) ||
                 ch == '\0')
            return 0;
        if (k + 1 >= cap)
            return 0;
        buf[k++] = (char)ch;
    }
    buf[k] = '\0';
    return 1;
}

/* Strings: both parts are "^lit$" patterns of different strings, or one
 * is and its string fails the other (*d). */
static sift_status literals_apart(sift__js *c, const json_t *x, const json_t *y, int *d)
{
    char a[256], b[256];
    *d = 0;
    if (!literal_pattern(x, a, sizeof a))
        return SIFT_OK;
    if (literal_pattern(y, b, sizeof b)) {
        *d = strcmp(a, b) != 0;
        return SIFT_OK;
    }
    json_t *v = json_string(a);
    int answer = -1;
    sift_status st = v ? sift__js_work(c, 1) : nomem(c);
    if (!st && !json_object_get(y, "pattern"))
        st = sift__js_value_valid(c, y, v, &answer);
    json_decref(v);
    *d = answer == 0;
    return st;
}

/* Whether parts x and y (of two schemas that both admit type `bit`)
 * share no value of that type (*d). */
static sift_status apart_on(sift__js *c, const json_t *x, const json_t *y, unsigned bit, int *d)
{
    *d = 0;
    if (!json_is_object(x) || !json_is_object(y) || vacuous(x, bit) || vacuous(y, bit))
        return SIFT_OK;
    sift_status st = values_apart(c, x, y, bit, d);
    if (!st && !*d)
        st = values_apart(c, y, x, bit, d);
    if (st || *d)
        return st;
    if (bit == T_NUMBER)
        *d = ranges_apart(x, y) || ranges_apart(y, x);
    if (bit == T_STRING) {
        *d = lengths_apart(x, y) || lengths_apart(y, x);
        if (!*d)
            st = literals_apart(c, x, y, d);
        if (!st && !*d)
            st = literals_apart(c, y, x, d);
        for (int side = 0; !st && !*d && side < 2; side++) {
            const json_t *e = side ? y : x, *o = side ? x : y;
            const json_t *h = json_object_get(e, "maxLength");
            json_t *empty =
                json_is_integer(h) && json_integer_value(h) == 0 ? json_string("") : NULL;
            int answer = -1;
            if (empty && !(st = sift__js_work(c, 1)))
                st = sift__js_value_valid(c, o, empty, &answer);
            json_decref(empty);
            *d = answer == 0;
        }
    }
    return st;
}

/* The alternatives of s when it is an anyOf or a oneOf alone. */
static const json_t *union_of(const json_t *s)
{
    if (!json_is_object(s))
        return NULL;
    const char *kw = json_object_get(s, "anyOf") ? "anyOf" : "oneOf";
    const json_t *u = json_object_get(s, kw);
    return json_is_array(u) && only(s, kw) ? u : NULL;
}

/* Whether no value of the types `within` matches both a and b (*d). */
static sift_status disjoint(sift__js *c, const json_t *a, const json_t *b, unsigned within,
                            int depth, int *d)
{
    sift_status st = sift__js_work(c, 1);
    *d = 0;
    if (st || depth > MAX_DEPTH)
        return st;
    a = target(c, a, &st);
    b = target(c, b, &st);
    if (st)
        return st;
    for (int side = 0; side < 2; side++) {
        const json_t *u = union_of(side ? b : a), *other = side ? a : b;
        if (!u)
            continue;
        *d = 1;
        for (size_t i = 0; !st && *d && i < json_array_size(u); i++)
            st = disjoint(c, json_array_get(u, i), other, within, depth + 1, d);
        return st;
    }
    facets fa = {{0}, 0}, fb = {{0}, 0};
    add_facets(c, a, &fa, 0, &st);
    add_facets(c, b, &fb, 0, &st);
    unsigned both = within & ALL6;
    for (size_t i = 0; i < fa.n; i++)
        both &= own6(fa.f[i]);
    for (size_t j = 0; j < fb.n; j++)
        both &= own6(fb.f[j]);
    *d = 1;
    for (unsigned bit = 1; !st && *d && bit <= T_STRING; bit <<= 1) {
        if (!(both & bit))
            continue;
        int apart = 0;
        for (size_t i = 0; !st && !apart && i < fa.n; i++)
            for (size_t j = 0; !st && !apart && j < fb.n; j++)
                st = apart_on(c, fa.f[i], fb.f[j], bit, &apart);
        if (!st && !apart && bit == T_OBJECT)
            st = objects_apart(c, &fa, &fb, depth, &apart);
        *d = apart;
    }
    if (st)
        *d = 0;
    return st;
}

/* ------------------------------------------------------------------ */
/* the rewrite of overlapping {required, properties} branches          */
/* ------------------------------------------------------------------ */

/* Whether b (resolved) is {"type": "object", "required", "properties"}
 * (each optional) and annotations. */
static int simple_branch(const json_t *b)
{
    const char *key;
    json_t *v;
    if (!json_is_object(b))
        return 0;
    json_object_foreach((json_t *)b, key, v)
    {
        if (sift__js_is_annotation(key) || (!strcmp(key, "properties") && json_is_object(v)) ||
            (!strcmp(key, "additionalProperties") && json_is_false(v)) ||
            (!strcmp(key, "type") && json_is_string(v) && !strcmp(json_string_value(v), "object")))
            continue;
        if (strcmp(key, "required") || !json_is_array(v))
            return 0;
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!json_is_string(json_array_get(v, i)))
                return 0;
    }
    return 1;
}

/* Whether s has keys that constrain undeclared properties. */
static int closes(const json_t *s)
{
    const json_t *ap = json_object_get(s, "additionalProperties");
    const json_t *pp = json_object_get(s, "patternProperties");
    return (ap && !json_is_true(ap)) || (pp && (!json_is_object(pp) || json_object_size(pp)));
}

/* Whether s has patternProperties with a pattern. */
static int closes_by_patterns(const json_t *s)
{
    const json_t *pp = json_object_get(s, "patternProperties");
    return pp && (!json_is_object(pp) || json_object_size(pp));
}

/* Whether a value of property p that passes branch i and the siblings
 * always passes sch too. */
static int implied(const json_t *sch, const json_t *bi, const json_t *sib, const char *p)
{
    const json_t *a = json_object_get(json_object_get(bi, "properties"), p);
    const json_t *b = json_object_get(json_object_get(sib, "properties"), p);
    return json_is_true(sch) || (json_is_object(sch) && only(sch, NULL)) ||
           (a && json_equal((json_t *)sch, (json_t *)a)) ||
           (b && json_equal((json_t *)sch, (json_t *)b));
}

/* Keywords whose meaning does not depend on their siblings: a schema
 * of them fails when one of them does ({"k": v} alone). "properties"
 * only without additionalProperties / patternProperties beside it. */
static const char *const alone_keys[] = {
    "type",          "enum",          "const",      "required",         "properties",
    "minLength",     "maxLength",     "pattern",    "format",           "minimum",
    "maximum",       "minItems",      "maxItems",   "exclusiveMinimum", "exclusiveMaximum",
    "minProperties", "maxProperties", "multipleOf",
};

/* Appends to `ways` schemas whose union is the complement of sch (a
 * value fails sch exactly when it passes one): one per keyword,
 * {"not": {k: v}} (json_schema_gen.c negates it or refuses), the
 * properties' own ways one level down; *refuse for a shape split so
 * would change the meaning. */
static sift_status fail_ways(sift__js *c, const json_t *sch, int depth, json_t *ways, int *refuse)
{
    sift_status st = sift__js_work(c, 1);
    sch = target(c, sch, &st);
    if (st || depth > 4 || !json_is_object(sch) || json_object_get(sch, "nullable") ||
        json_object_get(sch, "additionalProperties") || json_object_get(sch, "patternProperties")) {
        *refuse = 1;
        return st;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)sch, key, v)
    {
        if (st || *refuse)
            break;
        if (sift__js_is_annotation(key))
            continue;
        int known = 0;
        for (size_t i = 0; i < sizeof alone_keys / sizeof alone_keys[0]; i++)
            known |= !strcmp(key, alone_keys[i]);
        if (!known || (!strncmp(key, "exclusive", 9) && !json_is_number(v))) {
            *refuse = 1;
            break;
        }
        if (strcmp(key, "properties")) {
            if (json_array_append_new(ways, json_pack("{s:{s:O}}", "not", key, v)))
                st = nomem(c);
            continue;
        }
        const char *q;
        json_t *sq;
        json_object_foreach(v, q, sq)
        {
            json_t *inner = json_array();
            st = inner ? fail_ways(c, sq, depth + 1, inner, refuse) : nomem(c);
            for (size_t k = 0; !st && !*refuse && k < json_array_size(inner); k++)
                if (json_array_append_new(ways, json_pack("{s:s,s:[s],s:{s:O}}", "type", "object",
                                                          "required", q, "properties", q,
                                                          json_array_get(inner, k))))
                    st = nomem(c);
            json_decref(inner);
            if (st || *refuse)
                break;
        }
    }
    return st;
}

/* Branch bj closed (additionalProperties false): an object of bi
 * fails it with a name bj does not declare, from the names bi (or else
 * the siblings) admit when closed themselves ({"required": [q]} each);
 * *refuse when neither is closed (the names outside are not listed). */
static sift_status outside_closed(sift__js *c, const json_t *sib, const json_t *bi,
                                  const json_t *bj, json_t *ways, int *refuse)
{
    const json_t *pj = json_object_get(bj, "properties");
    const json_t *own =
        json_is_false(json_object_get(bi, "additionalProperties")) ? bi
        : json_is_false(json_object_get(sib, "additionalProperties")) && !closes_by_patterns(sib)
            ? sib
            : NULL;
    if (!own) {
        *refuse = 1;
        return SIFT_OK;
    }
    const json_t *names = json_object_get(own, "properties");
    sift_status st = sift__js_work(c, 1 + (int64_t)json_object_size(names));
    const char *q;
    json_t *v;
    json_object_foreach((json_t *)names, q, v)
    {
        if (st || json_object_get(pj, q) || forbids(bi, q) || forbids(sib, q))
            continue;
        if (json_array_append_new(ways, json_pack("{s:[s]}", "required", q)))
            st = nomem(c);
    }
    return st;
}

/* The ways an object of branch bi (beside the siblings sib) can fail
 * branch bj, appended to `ways`; *refuse when one cannot be spelled
 * exactly. */
static sift_status ways_to_fail(sift__js *c, const json_t *sib, const json_t *bi, const json_t *bj,
                                json_t *ways, int *refuse)
{
    const json_t *ri = json_object_get(bi, "required"), *rj = json_object_get(bj, "required");
    const json_t *rs = json_object_get(sib, "required"), *pj = json_object_get(bj, "properties");
    sift_status st =
        sift__js_work(c, 1 + (int64_t)json_array_size(rj) *
                                 (int64_t)(json_array_size(ri) + json_array_size(rs) + 1));
    for (size_t k = 0; !st && k < json_array_size(rj); k++) {
        const char *name = json_string_value(json_array_get(rj, k));
        if (names_has(ri, name) || names_has(rs, name))
            continue;
        if (json_array_append_new(ways, json_pack("{s:{s:b}}", "properties", name, 0)))
            st = nomem(c);
    }
    if (!st && json_is_false(json_object_get(bj, "additionalProperties")))
        st = outside_closed(c, sib, bi, bj, ways, refuse);
    const char *p;
    json_t *sch;
    json_object_foreach((json_t *)pj, p, sch)
    {
        if (st || *refuse)
            break;
        if (implied(sch, bi, sib, p) || forbids(bi, p) || forbids(sib, p))
            continue;
        if ((closes(bi) && !json_object_get(json_object_get(bi, "properties"), p)) ||
            (closes(sib) && !json_object_get(json_object_get(sib, "properties"), p))) {
            *refuse = 1;
            break;
        }
        json_t *inner = json_array();
        st = inner ? fail_ways(c, sch, 0, inner, refuse) : nomem(c);
        for (size_t k = 0; !st && !*refuse && k < json_array_size(inner); k++)
            if (json_array_append_new(ways, json_pack("{s:[s],s:{s:O}}", "required", p,
                                                      "properties", p, json_array_get(inner, k))))
                st = nomem(c);
        json_decref(inner);
    }
    return st;
}

/* Branch i rewritten: the product of the ways to fail each branch j it
 * overlaps, each joined with the branch (an allOf), as an anyOf. */
static sift_status rewrite_branch(sift__js *c, const json_t *sib, const json_t *orig,
                                  const json_t *bi, const json_t *const *b, const unsigned char *ov,
                                  size_t n, size_t i, json_t **out, int *refuse)
{
    json_t *per = json_array(); /* per overlapping j: its ways */
    sift_status st = per ? SIFT_OK : nomem(c);
    size_t total = 1;
    for (size_t j = 0; !st && !*refuse && j < n; j++) {
        if (j == i || !ov[i * n + j])
            continue;
        json_t *ways = json_array();
        if (!ways || json_array_append_new(per, ways))
            st = nomem(c);
        else
            st = ways_to_fail(c, sib, bi, b[j], ways, refuse);
        total *= json_array_size(ways);
        if (total > MAX_ALTS)
            *refuse = 1;
    }
    if (!st && !*refuse && total == 0)
        *out = json_false(); /* never alone */
    json_t *alts = !st && !*refuse && total ? json_array() : NULL;
    for (size_t k = 0; alts && !st && k < total; k++) {
        json_t *all = json_pack("[O]", orig);
        size_t rest = k;
        for (size_t q = 0; all && q < json_array_size(per); q++) {
            json_t *ways = json_array_get(per, q);
            json_array_append(all, json_array_get(ways, rest % json_array_size(ways)));
            rest /= json_array_size(ways);
        }
        if (!all ||
            json_array_append_new(alts, json_pack("{s:s,s:o}", "type", "object", "allOf", all)))
            st = nomem(c);
    }
    if (alts && !st)
        *out = json_array_size(alts) == 1 ? json_incref(json_array_get(alts, 0))
                                          : json_pack("{s:O}", "anyOf", alts);
    if (!st && !*refuse && !*out)
        st = nomem(c);
    json_decref(alts);
    json_decref(per);
    return st;
}

/* The rewrite of all branches, when every branch in an overlapping pair
 * is a simple object branch on the types `within`. */
static sift_status rewrite(sift__js *c, const json_t *sib, const json_t *alts,
                           const json_t *const *b, const unsigned char *ov, size_t n,
                           unsigned within, json_t **out)
{
    int refuse = 0;
    for (size_t i = 0; !refuse && i < n; i++)
        for (size_t j = 0; !refuse && j < n; j++)
            if (ov[i * n + j])
                refuse = !simple_branch(b[i]) || (own6(b[i]) & within & ~(unsigned)T_OBJECT);
    if (refuse)
        return SIFT_OK;
    json_t *res = json_array();
    sift_status st = res ? SIFT_OK : nomem(c);
    for (size_t i = 0; !st && !refuse && i < n; i++) {
        const json_t *orig = json_array_get(alts, i);
        json_t *alt = NULL;
        int involved = 0;
        for (size_t j = 0; j < n; j++)
            involved |= ov[i * n + j];
        if (!involved)
            alt = json_incref((json_t *)orig);
        else
            st = rewrite_branch(c, sib, orig, b[i], b, ov, n, i, &alt, &refuse);
        if (!st && !refuse && json_array_append_new(res, alt))
            st = nomem(c);
    }
    if (st || refuse)
        json_decref(res);
    else
        *out = res;
    return st;
}

sift_status sift__js_one_of_exact(sift__js *c, const json_t *s, const json_t *alts, unsigned outer,
                                  int *exact, unsigned *narrow, json_t **rewritten)
{
    size_t n = json_array_size(alts);
    *exact = 0;
    *narrow = 0;
    *rewritten = NULL;
    if (n > ONE_OF_MAX_PAIRWISE) /* n^2 pairs: left to the linear tests */
        return SIFT_OK;
    const json_t **b = sift__calloc(c->al, n ? n : 1, sizeof *b);
    unsigned char *ov = sift__calloc(c->al, n > 0 ? n * n : 1, 1);
    sift_status st = b && ov ? SIFT_OK : nomem(c);
    for (size_t i = 0; !st && i < n; i++)
        b[i] = target(c, json_array_get(alts, i), &st);
    /* a type two branches admit whole: no value of it passes */
    unsigned within = fold(outer);
    for (unsigned bit = 1; !st && bit <= T_STRING; bit <<= 1) {
        size_t whole = 0;
        for (size_t i = 0; i < n; i++)
            whole += vacuous(b[i], bit);
        if (whole >= 2 && (within & bit))
            *narrow |= bit;
    }
    within &= ~*narrow;
    int overlaps = 0;
    for (size_t i = 0; !st && i < n; i++)
        for (size_t j = i + 1; !st && j < n; j++) {
            int d = 0;
            st = disjoint(c, b[i], b[j], within, 0, &d);
            ov[i * n + j] = ov[j * n + i] = !d;
            overlaps |= !d;
        }
    if (!st && !overlaps)
        *exact = 1;
    else if (!st)
        st = rewrite(c, s, alts, b, ov, n, within, rewritten);
    if (!st && *rewritten)
        *exact = 1;
    sift__free(c->al, b);
    sift__free(c->al, ov);
    return st;
}

/*
 * json_schema_gen.c - one subschema to a rule: the dispatch on its
 * keywords.
 * (Merging, for allOf and the siblings of $ref and anyOf, is in
 * json_schema_merge.c.)
 *
 * The subset (docs/json-schema.md has the keyword table):
 *
 *   schema   ::= true | false | {}            -- any value / none / any
 *              | { "$ref": "#/json/pointer" }  -- local, recursive via rules
 *                                             (or a URI of $id / $anchor:
 *                                             json_schema_ref.c)
 *              | { "allOf": [...] , ... }      -- merged (simple cases)
 *              | { "anyOf" | "oneOf": [...], ... } -- alternatives, each
 *                                             merged with the siblings
 *              | { "const": v } | { "enum": [...] }
 *              | { "type": T | [T...], "nullable": bool, ... }
 *   T        ::= "object" | "array" | "string" | "integer" | "number"
 *              | "boolean" | "null"
 *
 * Without "type" every type is allowed, each constrained by the keywords
 * of its own type only ({"minLength": 2} admits 5, as JSON Schema says). Keywords with no effect on
 * validation (title, description, default, examples, $comment, ...) and keywords this converter
 * does not know (x-..., vendor keys) are ignored, as a validator would; keywords it knows but
 * cannot express (shapes of not / if that have no negation here, unevaluated*, ...) go through the
 * unsupported policy; if / then / else and propertyNames are rewritten by json_schema_cond.c,
 * contains by json_schema_contains.c. oneOf is
 * generated as anyOf when its alternatives are provably disjoint (types, const / enum values, or a
 * required property with disjoint const / enum values, or a closed object and a required name
 * it does not declare); otherwise it goes through the unsupported policy (IGNORE keeps the anyOf).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "json_schema.h"

static const struct {
    const char *name;
    unsigned bit;
} type_names[] = {
    {"null", T_NULL},     {"boolean", T_BOOLEAN}, {"object", T_OBJECT},   {"array", T_ARRAY},
    {"number", T_NUMBER}, {"string", T_STRING},   {"integer", T_INTEGER},
};

/* Keywords that constrain one type: a schema without "type" that has
 * one of them is generated type by type. */
static const struct {
    const char *key;
    unsigned bit;
} typed_keys[] = {
    {"properties", T_OBJECT},
    {"required", T_OBJECT},
    {"additionalProperties", T_OBJECT},
    {"patternProperties", T_OBJECT},
    {"minProperties", T_OBJECT},
    {"maxProperties", T_OBJECT},
    {"items", T_ARRAY},
    {"prefixItems", T_ARRAY},
    {"minItems", T_ARRAY},
    {"maxItems", T_ARRAY},
    {"additionalItems", T_ARRAY},
    {"uniqueItems", T_ARRAY},
    {"minLength", T_STRING},
    {"maxLength", T_STRING},
    {"pattern", T_STRING},
    {"format", T_STRING},
    {"minimum", T_NUMBER},
    {"maximum", T_NUMBER},
    {"exclusiveMinimum", T_NUMBER},
    {"exclusiveMaximum", T_NUMBER},
    {"multipleOf", T_NUMBER},
    {"contains", T_ARRAY},
    {"minContains", T_ARRAY},
    {"maxContains", T_ARRAY},
    {"propertyNames", T_OBJECT},
};

unsigned sift__js_key_type(const char *key)
{
    for (size_t i = 0; i < sizeof typed_keys / sizeof typed_keys[0]; i++)
        if (!strcmp(key, typed_keys[i].key))
            return typed_keys[i].bit;
    return 0;
}

static const char *const annotations[] = {
    "$schema",
    "$id",
    "id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "example",
    "readOnly",
    "writeOnly",
    "deprecated",
    "$defs",
    "definitions",
    "$anchor",
    "$vocabulary",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "markdownDescription",
    "discriminator",
    "externalDocs",
    "xml",
    "nullable",
};

/* Known keywords outside the subset. */
static const char *const unsupported[] = {
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
};

int sift__js_is_annotation(const char *key)
{
    if (key[0] == 'x' && key[1] == '-')
        return 1;
    /* the first byte before the rest: asked of every key of every
     * schema object, mostly keywords that are no annotation */
    for (size_t i = 0; i < sizeof annotations / sizeof annotations[0]; i++)
        if (key[0] == annotations[i][0] && !strcmp(key, annotations[i]))
            return 1;
    return 0;
}

sift_status sift__js_get_count(sift__js *c, const json_t *s, const char *key, int64_t *v, int *has)
{
    const json_t *x = json_object_get(s, key);
    *has = 0;
    if (!x)
        return SIFT_OK;
    double d = json_number_value(x);
    int64_t i;
    if (json_is_number(x) && d > 1e15 && d == floor(d))
        return sift__js_fail(c, SIFT_E_SCHEMA_LIMIT, key, "'%s' is over 10^15", key);
    if (!json_is_number(x) || d < 0 || !sift__js_integral(d, &i))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, key, "'%s' must be a non-negative integer",
                             key);
    *v = i;
    *has = 1;
    return SIFT_OK;
}

/* A rule whose body is the alternatives refs[0..n) (n >= 1); with one
 * alternative, that rule itself. */
static sift_status join_alternatives(sift__js *c, const sift__js_ref *refs, size_t n,
                                     sift__js_ref *r)
{
    size_t live = 0;
    for (size_t i = 0; i < n; i++)
        live += !refs[i].never;
    if (live == 0) {
        r->never = 1;
        r->name[0] = '\0';
        return SIFT_OK;
    }
    if (live == 1) {
        for (size_t i = 0; i < n; i++)
            if (!refs[i].never)
                *r = refs[i];
        return SIFT_OK;
    }
    sift__js_buf b = {0};
    sift_status st = SIFT_OK;
    int first = 1;
    for (size_t i = 0; !st && i < n; i++) {
        if (refs[i].never)
            continue;
        st = sift__js_printf(c, &b, "%s%s", first ? "" : " | ", refs[i].name);
        first = 0;
    }
    if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    return st;
}

/* ------------------------------------------------------------------ */
/* $ref                                                                */
/* ------------------------------------------------------------------ */

static sift_status gen_ref(sift__js *c, const json_t *s, const char *ref, sift__js_ref *r)
{
    const json_t *target;
    char *ptr;
    sift_status st = sift__js_resolve(c, s, ref, &target, &ptr);
    if (st)
        return st;
    /* the targets generated so far, by pointer: a hash lookup, so that
     * many $refs cost linear time */
    if (!c->ref_map && !(c->ref_map = json_object())) {
        sift__free(c->al, ptr);
        return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
    }
    const json_t *seen = json_object_get(c->ref_map, ptr);
    if (seen) {
        sift__free(c->al, ptr);
        c->refs[json_integer_value(seen)].used = 1;
        *r = c->refs[json_integer_value(seen)].ref;
        return SIFT_OK;
    }
    if (sift__reserve(c->al, &c->refs, &c->cap_refs, c->n_refs, c->n_refs + 1, sizeof *c->refs,
                      8) ||
        json_object_set_new_nocheck(c->ref_map, ptr, json_integer((json_int_t)c->n_refs))) {
        sift__free(c->al, ptr);
        return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
    }
    size_t idx = c->n_refs++;
    c->refs[idx].pointer = ptr;
    c->refs[idx].used = 0;
    if ((st = sift__js_new_rule(c, &c->refs[idx].ref)))
        return st;
    sift__js_ref alias = c->refs[idx].ref, x;
    size_t mark = c->path.n;
    st = sift__js_put(c, &c->path, "\001", 1);
    if (!st)
        st = sift__js_puts(c, &c->path, ptr);
    if (!st)
        st = sift__js_gen(c, target, &x);
    /* a target that admits no value is "never" to every $ref to it,
     * unless a $ref inside it already took its rule (a cycle) */
    if (!st && x.never && c->refs[idx].used)
        st = sift__js_fail(c, SIFT_E_SCHEMA_UNSUPPORTED, NULL,
                           "this $ref target admits no value (false)");
    sift__js_pop(c, mark);
    if (!st && x.never) {
        c->refs[idx].ref.never = 1;
        c->refs[idx].ref.name[0] = '\0';
        *r = c->refs[idx].ref;
        return SIFT_OK;
    }
    if (!st)
        st = sift__js_emit(c, &alias, x.name);
    *r = alias;
    return st;
}

/* ------------------------------------------------------------------ */
/* Type masks and keywords                                             */
/* ------------------------------------------------------------------ */

unsigned sift__js_type_mask(const json_t *t)
{
    unsigned m = 0;
    if (json_is_string(t)) {
        for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
            if (!strcmp(json_string_value(t), type_names[i].name))
                m |= type_names[i].bit;
    } else if (json_is_array(t)) {
        for (size_t k = 0; k < json_array_size(t); k++)
            m |= sift__js_type_mask(json_array_get(t, k));
    }
    return m;
}

json_t *sift__js_mask_to_types(unsigned m)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < sizeof type_names / sizeof type_names[0]; i++)
        if (m & type_names[i].bit)
            json_array_append_new(a, json_string(type_names[i].name));
    return a;
}

static sift_status nomem(sift__js *c)
{
    return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
}

/* Is `key` a keyword of the supported or the known-unsupported set? */
int sift__js_is_keyword(const char *key)
{
    static const char *const known[] = {
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "uniqueItems",
        "multipleOf",
        "not",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "if",
        "then",
        "else",
        "propertyNames",
        "contains",
        "minContains",
        "maxContains",
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(key, known[i]))
            return 1;
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (!strcmp(key, unsupported[i]))
            return 1;
    return 0;
}

/* dst[key] and v together (both present and different). */
/* ------------------------------------------------------------------ */
/* anyOf / oneOf                                                       */
/* ------------------------------------------------------------------ */

static int has_constraints(const json_t *s, const char *skip)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (strcmp(key, skip) && !sift__js_is_annotation(key))
            return 1;
    }
    return 0;
}

static unsigned value_type(const json_t *v);

/* The types a branch can have (all when unknown); integer and number
 * share one bit, as they overlap. */
static unsigned branch_types(const json_t *b)
{
    unsigned m = 0;
    const json_t *t = json_object_get(b, "type"), *k = json_object_get(b, "const");
    const json_t *e = json_object_get(b, "enum");
    if (t)
        m = sift__js_type_mask(t);
    else if (k)
        m = value_type(k);
    else if (json_is_array(e))
        for (size_t i = 0; i < json_array_size(e); i++)
            m |= value_type(json_array_get(e, i));
    else
        return ~0u;
    if (m & (T_INTEGER | T_NUMBER))
        m |= T_INTEGER | T_NUMBER;
    if (json_is_true(json_object_get(b, "nullable")))
        m |= T_NULL;
    return m;
}

/* The values a schema is limited to (its const or enum), or NULL. */
static json_t *branch_values(const json_t *b)
{
    const json_t *k = json_object_get(b, "const"), *e = json_object_get(b, "enum");
    if (k)
        return json_pack("[O]", k);
    if (json_is_array(e))
        return json_incref((json_t *)e);
    return NULL;
}

/* Whether two value lists share no value (NULL: unknown, so no), into
 * *d: a hash set of a, a lookup per value of b. */
static sift_status values_disjoint(sift__js *c, const json_t *a, const json_t *b, int *d)
{
    *d = 0;
    if (!a || !b)
        return SIFT_OK;
    json_t *set = json_object();
    sift_status st = set ? SIFT_OK : nomem(c);
    int flag = 0;
    for (size_t i = 0; !st && i < json_array_size(a); i++)
        st = sift__js_set_add(c, set, json_array_get(a, i), &flag);
    flag = 0;
    for (size_t j = 0; !st && !flag && j < json_array_size(b); j++)
        st = sift__js_set_has(c, set, json_array_get(b, j), &flag);
    json_decref(set);
    *d = !st && !flag;
    return st;
}

static sift_status values_of_disjoint(sift__js *c, const json_t *a, const json_t *b, int *d)
{
    json_t *va = branch_values(a), *vb = branch_values(b);
    sift_status st = values_disjoint(c, va, vb, d);
    json_decref(va);
    json_decref(vb);
    return st;
}

/* Property schema x, or the target of its local JSON-Pointer $ref when
 * it is only that (followed up to 8 hops, a unit of work each), so that
 * a discriminator's const / enum behind a $ref is seen; x itself when
 * the $ref is of another form or does not resolve (the generation
 * reports that). */
static const json_t *peek_ref(sift__js *c, const json_t *x, sift_status *st)
{
    for (int hops = 0; !*st && hops < 8 && sift__js_only_ref(x); hops++) {
        const char *ref = json_string_value(json_object_get(x, "$ref"));
        const json_t *t =
            ref && !(*st = sift__js_work(c, 1)) ? sift__js_local_target(c, x, ref) : NULL;
        if (!t)
            return x;
        x = t;
    }
    return x;
}

/* Whether both objects require a property limited to disjoint values
 * (*d). A unit of work per pair of required names compared. */
static sift_status discriminated(sift__js *c, const json_t *a, const json_t *b, int *d)
{
    const json_t *pa = json_object_get(a, "properties"), *pb = json_object_get(b, "properties");
    const json_t *ra = json_object_get(a, "required"), *rb = json_object_get(b, "required");
    sift_status st =
        sift__js_work(c, (int64_t)json_array_size(ra) * (int64_t)(json_array_size(rb) + 1));
    *d = 0;
    for (size_t i = 0; !st && !*d && i < json_array_size(ra); i++) {
        const char *name = json_string_value(json_array_get(ra, i));
        int in_b = 0;
        for (size_t j = 0; name && j < json_array_size(rb); j++)
            in_b |= json_is_string(json_array_get(rb, j)) &&
                    !strcmp(name, json_string_value(json_array_get(rb, j)));
        const json_t *xa = name ? peek_ref(c, json_object_get(pa, name), &st) : NULL;
        const json_t *xb = name ? peek_ref(c, json_object_get(pb, name), &st) : NULL;
        if (!st && in_b && json_is_object(xa) && json_is_object(xb))
            st = values_of_disjoint(c, xa, xb, d);
    }
    return st;
}

/* Whether object a admits no key outside its own properties
 * (additionalProperties false, no patternProperties) and b requires a
 * name a does not declare: then no object matches both (*d). A unit of
 * work per required name. */
static sift_status closed_apart(sift__js *c, const json_t *a, const json_t *b, int *d)
{
    const json_t *pa = json_object_get(a, "properties"), *rb = json_object_get(b, "required");
    const json_t *ppa = json_object_get(a, "patternProperties");
    *d = 0;
    if (!json_is_false(json_object_get(a, "additionalProperties")) ||
        (ppa && (!json_is_object(ppa) || json_object_size(ppa))) || (pa && !json_is_object(pa)))
        return SIFT_OK;
    sift_status st = sift__js_work(c, (int64_t)json_array_size(rb));
    for (size_t j = 0; !st && !*d && j < json_array_size(rb); j++) {
        const char *name = json_string_value(json_array_get(rb, j));
        *d = name && !json_object_get(pa, name);
    }
    return st;
}

/* Whether the const / enum values of the branches b[0..n) (their own
 * with prop NULL, else those of their property `prop`) repeat across
 * two branches whose masks m[] share a bit: *conflict is the union of
 * the bits such pairs share (the scan stops once it holds a bit of
 * `stop`). Each value is looked up once in a hash of value -> (last
 * branch, union of the masks of the branches holding it), so the test
 * is linear in the values: a value's new branch shares a bit with an
 * earlier holder exactly when it shares it with their union. */
static sift_status value_conflicts(sift__js *c, const json_t *const *b, const unsigned *m, size_t n,
                                   const char *prop, unsigned stop, unsigned *conflict)
{
    json_t *seen = json_object();
    sift_status st = seen ? SIFT_OK : nomem(c);
    *conflict = 0;
    for (size_t i = 0; !st && !(*conflict & stop) && i < n; i++) {
        const json_t *x =
            prop ? peek_ref(c, json_object_get(json_object_get(b[i], "properties"), prop), &st)
                 : b[i];
        if (st)
            break;
        json_t *vals = branch_values(x);
        for (size_t k = 0; !st && !(*conflict & stop) && k < json_array_size(vals); k++) {
            char *key;
            if ((st = sift__js_value_key(c, json_array_get(vals, k), &key)))
                break;
            json_t *e = json_object_get(seen, key);
            json_int_t packed = (json_int_t)i << 32 | (json_int_t)m[i];
            if (!e) {
                if (json_object_set_new_nocheck(seen, key, json_integer(packed)))
                    st = nomem(c);
            } else if ((size_t)(json_integer_value(e) >> 32) != i) {
                unsigned before = (unsigned)(json_integer_value(e) & 0xFFFFFFFF);
                *conflict |= before & m[i];
                if (json_integer_set(e, (json_int_t)i << 32 | (json_int_t)(before | m[i])))
                    st = nomem(c);
            }
            free(key);
        }
        json_decref(vals);
    }
    json_decref(seen);
    return st;
}

/* A property that every branch in b[0..n) requires, limited to const /
 * enum values that no two branches share: then every pair of them is
 * discriminated. The candidates are the first branch's required names
 * whose schema has const or enum (*found). */
static sift_status common_discriminator(sift__js *c, const json_t *const *b, const unsigned *m,
                                        size_t n, int *found)
{
    *found = 0;
    if (n == 0)
        return SIFT_OK;
    const json_t *req0 = json_object_get(b[0], "required");
    sift_status st = SIFT_OK;
    for (size_t r = 0; !st && !*found && r < json_array_size(req0); r++) {
        const char *name = json_string_value(json_array_get(req0, r));
        json_t *v0 = name ? branch_values(peek_ref(
                                c, json_object_get(json_object_get(b[0], "properties"), name), &st))
                          : NULL;
        json_decref(v0);
        if (!v0)
            continue;
        int all = 1;
        for (size_t i = 0; !st && all && i < n; i++) {
            const json_t *req = json_object_get(b[i], "required");
            const json_t *x =
                peek_ref(c, json_object_get(json_object_get(b[i], "properties"), name), &st);
            if (!st)
                st = sift__js_work(c, 1 + (int64_t)json_array_size(req));
            int has = 0;
            for (size_t k = 0; !st && !has && k < json_array_size(req); k++)
                has = json_is_string(json_array_get(req, k)) &&
                      !strcmp(name, json_string_value(json_array_get(req, k)));
            all = has && json_is_object(x) &&
                  (json_object_get(x, "const") || json_is_array(json_object_get(x, "enum")));
        }
        unsigned conflict = 1;
        if (!st && all)
            st = value_conflicts(c, b, m, n, name, ~0u, &conflict);
        *found = !st && all && !conflict;
    }
    return st;
}

/* The pairwise test, a unit of work per pair: the fallback when the
 * linear tests of one_of_disjoint cannot decide. */
static sift_status pairwise_disjoint(sift__js *c, const json_t *const *b, const unsigned *m,
                                     size_t n, int *disjoint)
{
    sift_status st = SIFT_OK;
    *disjoint = 1;
    for (size_t i = 0; !st && *disjoint && i < n; i++)
        for (size_t j = i + 1; !st && *disjoint && j < n; j++) {
            unsigned both = m[i] & m[j];
            int d = 0;
            if ((st = sift__js_work(c, 1)) || !both)
                continue;
            st = values_of_disjoint(c, b[i], b[j], &d);
            /* "required" holds of non-objects vacuously */
            if (!st && !d && both == T_OBJECT)
                st = discriminated(c, b[i], b[j], &d);
            if (!st && !d && both == T_OBJECT)
                st = closed_apart(c, b[i], b[j], &d);
            if (!st && !d && both == T_OBJECT)
                st = closed_apart(c, b[j], b[i], &d);
            *disjoint = d;
        }
    return st;
}

/* Whether no value matches two branches of a oneOf (as far as the
 * types, const / enum values or a required discriminating property
 * show, or a closed object beside a name it lacks that the other requires;
 * $ref branches are followed), within the types `outer` (the type
 * beside the oneOf). On 0 the oneOf is not exact as an
 * anyOf.
 *
 * A pair of branches is disjoint when their types are, or their values
 * are, or (sharing only the object type) a property both require has
 * disjoint values. Tested pair by pair that is quadratic in the
 * branches, so the common shapes are decided in linear time first:
 * - a branch without const / enum and another sharing a non-object type
 *   with it: not disjoint;
 * - values: no value in two branches that share a non-object type (else
 *   not disjoint), and none in two that share the object type;
 * - the branches that may be objects: a common discriminator (a
 *   tagged union).
 * Only what these leave open goes to the pairwise test. */
static sift_status one_of_disjoint(sift__js *c, const json_t *alts, unsigned outer, int *disjoint)
{
    size_t n = json_array_size(alts);
    const json_t **b = sift__calloc(c->al, n, sizeof *b);
    unsigned *m = sift__calloc(c->al, n, sizeof *m);
    if (!b || !m) {
        sift__free(c->al, b);
        sift__free(c->al, m);
        return nomem(c);
    }
    sift_status st = SIFT_OK;
    *disjoint = 1;
    for (size_t i = 0; !st && i < n; i++) {
        b[i] = json_array_get(alts, i);
        if (json_is_object(b[i]) && sift__js_only_ref(b[i]) &&
            json_is_string(json_object_get(b[i], "$ref"))) {
            char *ptr = NULL;
            st = sift__js_resolve(c, b[i], json_string_value(json_object_get(b[i], "$ref")), &b[i],
                                  &ptr);
            sift__free(c->al, ptr);
        }
        if (!json_is_object(b[i]))
            *disjoint = 0;
        else if (!(st = sift__js_work(c,
                                      1 + (int64_t)json_array_size(json_object_get(b[i], "enum")))))
            m[i] = branch_types(b[i]) & outer;
    }
    /* how many branches have each type bit */
    size_t count[32] = {0}, objects = 0;
    for (size_t i = 0; !st && *disjoint && i < n; i++)
        for (unsigned bit = 0; bit < 32; bit++)
            count[bit] += m[i] >> bit & 1;
    int open = 0; /* a pair that only the pairwise test can decide */
    for (size_t i = 0; !st && *disjoint && i < n; i++) {
        json_t *vals = branch_values(b[i]);
        json_decref(vals);
        if (vals)
            continue;
        unsigned others = 0;
        for (unsigned bit = 0; bit < 32; bit++)
            if (count[bit] > (m[i] >> bit & 1))
                others |= 1u << bit;
        if (m[i] & others & ~(unsigned)T_OBJECT)
            *disjoint = 0;
        else if (m[i] & others & T_OBJECT)
            open = 1;
    }
    unsigned conflict = 0;
    if (!st && *disjoint)
        st = value_conflicts(c, b, m, n, NULL, ~(unsigned)T_OBJECT, &conflict);
    if (!st && conflict & ~(unsigned)T_OBJECT)
        *disjoint = 0;
    if (!st && *disjoint && (open || conflict)) {
        /* pairs sharing only the object type: a common discriminator of
         * the branches that may be objects decides them all */
        const json_t **ob = sift__calloc(c->al, n, sizeof *ob);
        unsigned *om = sift__calloc(c->al, n, sizeof *om);
        int found = 0;
        st = ob && om ? SIFT_OK : nomem(c);
        for (size_t i = 0; !st && i < n; i++)
            if (m[i] & T_OBJECT) {
                om[objects] = m[i];
                ob[objects++] = b[i];
            }
        if (!st)
            st = common_discriminator(c, ob, om, objects, &found);
        sift__free(c->al, ob);
        sift__free(c->al, om);
        if (!st && !found)
            st = pairwise_disjoint(c, b, m, n, disjoint);
    }
    sift__free(c->al, b);
    sift__free(c->al, m);
    return st;
}

sift_status sift__js_alternatives_disjoint(sift__js *c, const json_t *s, const char *kw,
                                           int *disjoint)
{
    unsigned outer = json_object_get(s, "type") ? branch_types(s) : ~0u;
    return one_of_disjoint(c, json_object_get(s, kw), outer, disjoint);
}

/* oneOf whose branches are each {"required": [names]} alone: exactly
 * one of the name sets is complete. Branch i becomes an object with R_i
 * required and, for each other branch j, the one name of R_j \ R_i
 * absent ({"properties": {name: false}}); when R_j is inside R_i, branch
 * i is never alone (false). NULL when a branch has another shape or
 * R_j \ R_i has two names or more (that absence is a choice: not
 * expressed here). A value of another type meets every branch, so no
 * branch alone: the branches are typed "object". */
static const char *sole_key(const json_t *s);

static json_t *one_of_required(const json_t *alts)
{
    size_t n = json_array_size(alts);
    for (size_t i = 0; i < n; i++) {
        const json_t *b = json_array_get(alts, i);
        const json_t *req = json_is_object(b) ? json_object_get(b, "required") : NULL;
        if (!json_is_array(req) || !sole_key(b) || strcmp(sole_key(b), "required"))
            return NULL;
        for (size_t k = 0; k < json_array_size(req); k++)
            if (!json_is_string(json_array_get(req, k)))
                return NULL;
    }
    json_t *out = json_array();
    for (size_t i = 0; out && i < n; i++) {
        const json_t *ri = json_object_get(json_array_get(alts, i), "required");
        json_t *absent = json_object();
        int never = 0, open = 0;
        for (size_t j = 0; absent && j < n && !never && !open; j++) {
            if (j == i)
                continue;
            const json_t *rj = json_object_get(json_array_get(alts, j), "required");
            const char *miss = NULL;
            size_t n_miss = 0;
            for (size_t k = 0; k < json_array_size(rj); k++) {
                const char *name = json_string_value(json_array_get(rj, k));
                int in = 0;
                for (size_t q = 0; !in && q < json_array_size(ri); q++)
                    in = !strcmp(name, json_string_value(json_array_get(ri, q)));
                if (!in && (!miss || strcmp(miss, name)))
                    miss = name, n_miss++;
            }
            if (n_miss == 0)
                never = 1;
            else if (n_miss > 1 || json_object_set_new(absent, miss, json_false()))
                open = 1; /* not expressible here */
        }
        json_t *alt = never ? json_false()
                            : json_pack("{s:s,s:O,s:O}", "type", "object", "required", ri,
                                        "properties", absent);
        if (!never && (open || !absent)) {
            json_decref(alt);
            alt = NULL;
        }
        json_decref(absent);
        if (!alt || json_array_append_new(out, alt)) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* Takes the types of `narrow` (number counting integer) out of schema
 * s's "type" (all types when it has none); -1 when out of memory. */
static int narrow_types(json_t *s, unsigned narrow)
{
    if (!narrow)
        return 0;
    const json_t *t = json_object_get(s, "type");
    unsigned m = t ? sift__js_type_mask(t)
                   : T_NULL | T_BOOLEAN | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING | T_INTEGER;
    m &= ~narrow;
    if (narrow & T_NUMBER)
        m &= ~(unsigned)T_INTEGER;
    if (narrow & T_NULL)
        json_object_del(s, "nullable");
    return json_object_set_new(s, "type", sift__js_mask_to_types(m));
}

static sift_status gen_any_of(sift__js *c, const json_t *s, const char *kw, sift__js_ref *r)
{
    const json_t *alts = json_object_get(s, kw);
    json_t *rewritten = NULL;
    unsigned narrow = 0;
    if (!json_is_array(alts) || json_array_size(alts) == 0)
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, kw, "'%s' must be a non-empty array", kw);
    if (!strcmp(kw, "oneOf")) {
        /* a value outside the sibling type fails the whole schema, so
         * branches need only be disjoint within it */
        int disjoint = 0;
        unsigned outer = json_object_get(s, "type") ? branch_types(s) : ~0u;
        sift_status st0 = one_of_disjoint(c, alts, outer, &disjoint);
        if (!st0 && !disjoint)
            st0 = sift__js_one_of_exact(c, s, alts, outer, &disjoint, &narrow, &rewritten);
        if (rewritten)
            alts = rewritten;
        if (!st0 && !disjoint && (rewritten = one_of_required(alts)) != NULL)
            alts = rewritten; /* disjoint by construction */
        else if (!st0 && !disjoint)
            st0 = sift__js_unsupported(c, "oneOf",
                                       "'oneOf' whose alternatives may overlap is not supported");
        if (!st0 && rewritten)
            st0 = sift__js_work(c, (int64_t)(json_array_size(alts) * json_array_size(alts)));
        if (st0) {
            json_decref(rewritten);
            return st0;
        }
    }
    json_t *siblings = NULL;
    if (has_constraints(s, kw) || narrow) {
        siblings = json_copy((json_t *)s);
        if (!siblings || json_object_del(siblings, kw) || narrow_types(siblings, narrow))
            return json_decref(siblings), json_decref(rewritten), nomem(c);
    }
    size_t n = json_array_size(alts);
    sift__js_ref *refs = sift__calloc(c->al, n, sizeof *refs);
    sift_status st = refs ? SIFT_OK : nomem(c);
    size_t mark = c->path.n;
    for (size_t i = 0; !st && i < n; i++) {
        const json_t *a = json_array_get(alts, i);
        if (!(st = sift__js_push_key(c, kw)) && !(st = sift__js_push_index(c, i)))
            st = siblings ? sift__js_gen_merged(c, siblings, a, &refs[i])
                          : sift__js_gen(c, a, &refs[i]);
        sift__js_pop(c, mark);
    }
    if (!st)
        st = join_alternatives(c, refs, n, r);
    sift__free(c->al, refs);
    json_decref(siblings);
    json_decref(rewritten);
    return st;
}

/* ------------------------------------------------------------------ */
/* const, enum, type                                                   */
/* ------------------------------------------------------------------ */

static unsigned value_type(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return T_OBJECT;
    case JSON_ARRAY: return T_ARRAY;
    case JSON_STRING: return T_STRING;
    case JSON_INTEGER: return T_INTEGER | T_NUMBER;
    case JSON_REAL:
        /* a real beyond int64's range is still an integer when integral
         * (every double that large is) */
        return json_real_value(v) == floor(json_real_value(v)) ? T_INTEGER | T_NUMBER : T_NUMBER;
    case JSON_TRUE:
    case JSON_FALSE: return T_BOOLEAN;
    case JSON_NULL: return T_NULL;
    }
    return 0;
}

static sift_status gen_enum(sift__js *c, const json_t *s, const json_t *vals, unsigned types,
                            sift__js_ref *r)
{
    (void)s;
    sift__js_buf b = {0};
    sift_status st = SIFT_OK;
    size_t live = 0;
    for (size_t i = 0; !st && i < json_array_size(vals); i++) {
        const json_t *v = json_array_get(vals, i);
        if (types && !(value_type(v) & types))
            continue;
        if (live++)
            st = sift__js_puts(c, &b, " | ");
        if (!st)
            st = sift__js_const_value(c, &b, v);
    }
    if (!st && live == 0) {
        r->never = 1;
        r->name[0] = '\0';
    } else if (!st) {
        st = sift__js_rule(c, r, b.p);
    }
    sift__js_buf_free(c, &b);
    return st;
}

/* The values of `vals` valid against the other keywords of s, in *out
 * (a new array; json_schema_value.c decides). A value that cannot be
 * decided goes through the unsupported policy (ignored: it is kept). */
static sift_status admitted_values(sift__js *c, const json_t *s, const json_t *vals, const char *kw,
                                   json_t **out)
{
    *out = NULL;
    json_t *rest = json_copy((json_t *)s);
    if (rest) {
        /* the types are the caller's filter */
        json_object_del(rest, kw);
        json_object_del(rest, "type");
        json_object_del(rest, "nullable");
    }
    int any = 0;
    const char *key;
    json_t *x;
    json_object_foreach(rest, key, x)
    {
        any |= !sift__js_is_annotation(key); /* an enum beside const too */
    }
    json_t *a = any ? json_array() : json_incref((json_t *)vals);
    sift_status st = rest && a ? SIFT_OK : nomem(c);
    for (size_t i = 0; any && !st && i < json_array_size(vals); i++) {
        const json_t *v = json_array_get(vals, i);
        int ok = 1;
        st = sift__js_value_valid(c, rest, v, &ok);
        if (!st && ok < 0)
            st = sift__js_unsupported(c, kw,
                                      "a value of '%s' that the keywords beside it cannot be "
                                      "tested against",
                                      kw);
        if (!st && ok && json_array_append(a, (json_t *)v))
            st = nomem(c);
    }
    json_decref(rest);
    if (st) {
        json_decref(a);
        return st;
    }
    *out = a;
    return SIFT_OK;
}

static sift_status gen_typed(sift__js *c, const json_t *s, unsigned t, sift__js_ref *r)
{
    r->never = 0;
    switch (t) {
    case T_OBJECT: return sift__js_gen_object(c, s, r);
    case T_ARRAY:
        return json_object_get(s, "contains") || json_object_get(s, "minContains") ||
                       json_object_get(s, "maxContains")
                   ? sift__js_gen_contains(c, s, r)
                   : sift__js_gen_array(c, s, r);
    case T_STRING: return sift__js_gen_string(c, s, r);
    case T_INTEGER: return sift__js_gen_number(c, s, 1, r);
    case T_NUMBER: return sift__js_gen_number(c, s, 0, r);
    case T_BOOLEAN:
        snprintf(r->name, sizeof r->name, "%s", sift__js_shared(c, SIFT__JS_R_BOOLEAN));
        return SIFT_OK;
    default:
        snprintf(r->name, sizeof r->name, "%s", sift__js_shared(c, SIFT__JS_R_NULL));
        return SIFT_OK;
    }
}

static sift_status schema_types(sift__js *c, const json_t *s, unsigned *mask)
{
    const json_t *t = json_object_get(s, "type");
    *mask = 0;
    if (t) {
        int ok = json_is_string(t) || json_is_array(t);
        for (size_t i = 0; ok && json_is_array(t) && i < json_array_size(t); i++)
            ok = json_is_string(json_array_get(t, i)) && sift__js_type_mask(json_array_get(t, i));
        if (!ok || (json_is_string(t) && !sift__js_type_mask(t)))
            return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "type",
                                 "'type' must be a type name or an array of them");
        *mask = sift__js_type_mask(t);
        if (*mask == 0) /* an empty list: no value */
            return SIFT_OK;
    } else {
        /* any value: a keyword of one type constrains that type alone
         * ({"minLength": 2} admits 5) */
        *mask = ~0u;
    }
    const json_t *nullable = json_object_get(s, "nullable");
    if (json_is_true(nullable))
        *mask |= T_NULL;
    if (*mask != ~0u && (*mask & T_NUMBER) && (*mask & T_INTEGER))
        *mask &= ~(unsigned)T_INTEGER;
    return SIFT_OK;
}

static sift_status gen_types(sift__js *c, const json_t *s, sift__js_ref *r)
{
    unsigned mask;
    sift_status st = schema_types(c, s, &mask);
    if (st)
        return st;
    if (mask == ~0u) {
        int typed = 0;
        for (size_t i = 0; i < sizeof typed_keys / sizeof typed_keys[0]; i++)
            typed |= json_object_get(s, typed_keys[i].key) != NULL;
        if (!typed) {
            r->never = 0;
            snprintf(r->name, sizeof r->name, "%s", sift__js_shared(c, SIFT__JS_R_VALUE));
            return SIFT_OK;
        }
        /* every type, each with the keywords of its own */
        mask = T_NULL | T_BOOLEAN | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING;
    }
    sift__js_ref refs[7];
    size_t n = 0;
    for (size_t i = 0; !st && i < sizeof type_names / sizeof type_names[0]; i++)
        if (mask & type_names[i].bit)
            st = gen_typed(c, s, type_names[i].bit, &refs[n++]);
    if (st)
        return st;
    if (n == 0) {
        r->never = 1;
        r->name[0] = '\0';
        return SIFT_OK;
    }
    return join_alternatives(c, refs, n, r);
}

static sift_status check_unsupported(sift__js *c, const json_t *s)
{
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        if (!json_object_get(s, unsupported[i]))
            continue;
        sift_status st =
            sift__js_unsupported(c, unsupported[i], "'%s' is not supported", unsupported[i]);
        if (st)
            return st;
    }
    return SIFT_OK; /* uniqueItems: json_schema_object.c */
}

/* ------------------------------------------------------------------ */
/* dependentRequired, dependentSchemas, dependencies                   */
/* ------------------------------------------------------------------ */

static const char *const dep_keys[] = {"dependentRequired", "dependentSchemas", "dependencies"};

/* At most this many property names with a dependency in one schema:
 * each doubles the alternatives. */
#define MAX_DEPENDENCIES 4

/* A schema with dependencies, one property name `a` at a time: an
 * object without a, or one with a and what a's dependency asks (the
 * names it lists required, or its schema), as two alternatives of the
 * rest of the schema merged with {"properties": {a: false}} and with
 * {"required": [a, ...]} (and {"allOf": [schema]}). The alternatives
 * are disjoint on objects; a value of another type passes both. */
static sift_status gen_dependencies(sift__js *c, const json_t *s, sift__js_ref *r)
{
    const char *kw = NULL;
    size_t total = 0;
    for (size_t i = 0; i < sizeof dep_keys / sizeof dep_keys[0]; i++) {
        const json_t *d = json_object_get(s, dep_keys[i]);
        if (!d)
            continue;
        if (!json_is_object(d))
            return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, dep_keys[i], "'%s' must be an object",
                                 dep_keys[i]);
        if (!kw && json_object_size(d))
            kw = dep_keys[i];
        total += json_object_size(d);
    }
    if (total > MAX_DEPENDENCIES)
        return sift__js_unsupported(c, kw, "more than %d property names with a dependency",
                                    MAX_DEPENDENCIES);
    json_t *rest = json_copy((json_t *)s);
    if (!rest)
        return nomem(c);
    for (size_t i = 0; !kw && i < sizeof dep_keys / sizeof dep_keys[0]; i++)
        json_object_del(rest, dep_keys[i]); /* all empty */
    if (!kw) {
        sift_status st = sift__js_gen(c, rest, r);
        json_decref(rest);
        return st;
    }
    json_t *deps = json_copy(json_object_get(s, kw)), *without = NULL, *with = NULL;
    void *it = deps ? json_object_iter(deps) : NULL;
    /* the name outlives its entry, deleted from deps below */
    json_t *name = it ? json_string(json_object_iter_key(it)) : NULL;
    const char *a = json_string_value(name);
    json_t *v = it ? json_incref(json_object_iter_value(it)) : NULL;
    sift_status st = deps && v && name ? SIFT_OK : nomem(c);
    int names = !st && (!strcmp(kw, "dependentRequired") || json_is_array(v));
    if (!st && names) {
        int ok = json_is_array(v);
        for (size_t i = 0; ok && i < json_array_size(v); i++)
            ok = json_is_string(json_array_get(v, i));
        if (!ok)
            st = sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, kw,
                               "a dependency must be an array of property names");
    } else if (!st && !json_is_object(v) && !json_is_boolean(v)) {
        st = sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, kw,
                           "a dependency must be a schema or an array of names");
    }
    if (!st) {
        json_object_del(deps, a);
        if (json_object_size(deps) ? json_object_set(rest, kw, deps) : json_object_del(rest, kw))
            st = nomem(c);
    }
    /* the names a needs, then a (required names that "properties" does
     * not list are written in this order) */
    json_t *req = st ? NULL : json_array();
    for (size_t i = 0; req && names && i < json_array_size(v); i++)
        if (strcmp(json_string_value(json_array_get(v, i)), a) &&
            json_array_append(req, json_array_get(v, i)))
            st = nomem(c);
    if (req && json_array_append(req, name))
        st = nomem(c);
    if (!st && req) {
        without = json_pack("{s:{s:b}}", "properties", a, 0);
        with = names ? json_pack("{s:O}", "required", req)
                     : json_pack("{s:O,s:[O]}", "required", req, "allOf", v);
    }
    sift__js_ref alt[2];
    if (!st && (!without || !with))
        st = nomem(c);
    if (!st)
        st = sift__js_gen_merged(c, rest, without, &alt[0]);
    if (!st)
        st = sift__js_gen_merged(c, rest, with, &alt[1]);
    if (!st)
        st = join_alternatives(c, alt, 2, r);
    json_decref(req);
    json_decref(without);
    json_decref(with);
    json_decref(v);
    json_decref(name);
    json_decref(deps);
    json_decref(rest);
    return st;
}

/* ------------------------------------------------------------------ */
/* not                                                                 */
/* ------------------------------------------------------------------ */

/* The one keyword of schema s beside annotations, or NULL (also when s
 * has none or several). */
static const char *sole_key(const json_t *s)
{
    const char *key, *one = NULL;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (sift__js_is_annotation(key))
            continue;
        if (one)
            return NULL;
        one = key;
    }
    return one;
}

/* The schema of `type` t with `key`: n. */
static json_t *typed_bound(const char *t, const char *key, json_t *n)
{
    return n ? json_pack("{s:s,s:o}", "type", t, key, n) : NULL;
}

/* A schema admitting exactly the values s rejects, for the shapes real
 * schemas negate (a new reference), or NULL (not expressible here; also
 * when out of memory: the caller then refuses). A keyword of one type
 * holds for every other type, so its negation admits its own type
 * only: not {"minLength": 2} is {"type": "string", "maxLength": 1}. */
static json_t *negate(const json_t *s, int depth)
{
    if (json_is_boolean(s))
        return json_boolean(!json_is_true(s));
    if (!json_is_object(s) || depth > 16 || json_object_get(s, "nullable"))
        return NULL;
    const char *k = sole_key(s);
    int has_other = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        has_other |= !sift__js_is_annotation(key);
    }
    if (!has_other)
        return json_false();
    if (!k)
        return sift__js_negate_more(s, depth); /* several keywords */
    v = json_object_get(s, k);
    if (!strcmp(k, "not"))
        return json_is_boolean(v) || json_is_object(v) ? json_incref(v) : NULL;
    if (!strcmp(k, "type")) {
        unsigned m = sift__js_type_mask(v);
        if (!m || ((m & T_INTEGER) && !(m & T_NUMBER)))
            return NULL; /* not integer: the numbers with a fraction */
        m = ~m & (T_NULL | T_BOOLEAN | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING);
        if (!m)
            return json_false();
        json_t *types = sift__js_mask_to_types(m);
        return types ? json_pack("{s:o}", "type", types) : NULL;
    }
    if (!strcmp(k, "anyOf") || !strcmp(k, "allOf")) {
        if (!json_is_array(v) || !json_array_size(v))
            return NULL;
        json_t *parts = json_array();
        for (size_t i = 0; parts && i < json_array_size(v); i++) {
            json_t *n = negate(json_array_get(v, i), depth + 1);
            if (!n || json_array_append_new(parts, n)) {
                json_decref(parts);
                return NULL;
            }
        }
        return parts ? json_pack("{s:o}", !strcmp(k, "anyOf") ? "allOf" : "anyOf", parts) : NULL;
    }
    if (!strcmp(k, "required")) {
        if (!json_is_array(v) || !json_array_size(v))
            return json_is_array(v) ? json_false() : NULL;
        json_t *alts = json_array();
        for (size_t i = 0; alts && i < json_array_size(v); i++) {
            const json_t *n = json_array_get(v, i);
            json_t *p = json_is_string(n)
                            ? json_pack("{s:{s:b}}", "properties", json_string_value(n), 0)
                            : NULL;
            if (!p || json_array_append_new(alts, p)) {
                json_decref(alts);
                return NULL;
            }
        }
        if (alts && json_array_size(alts) == 1) { /* one name: no anyOf to merge */
            json_t *one = json_incref(json_array_get(alts, 0));
            json_decref(alts);
            if (json_object_set_new(one, "type", json_string("object"))) {
                json_decref(one);
                return NULL;
            }
            return one;
        }
        return alts ? json_pack("{s:s,s:o}", "type", "object", "anyOf", alts) : NULL;
    }
    static const struct {
        const char *key, *type, *other;
        int step; /* the other bound: n + step (counts), or exclusive */
    } bounds[] = {
        {"minLength", "string", "maxLength", -1},
        {"maxLength", "string", "minLength", 1},
        {"minItems", "array", "maxItems", -1},
        {"maxItems", "array", "minItems", 1},
        {"minProperties", "object", "maxProperties", -1},
        {"maxProperties", "object", "minProperties", 1},
        {"minimum", "number", "exclusiveMaximum", 0},
        {"maximum", "number", "exclusiveMinimum", 0},
        {"exclusiveMinimum", "number", "maximum", 0},
        {"exclusiveMaximum", "number", "minimum", 0},
    };
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        if (strcmp(k, bounds[i].key) || !json_is_number(v))
            continue;
        if (!bounds[i].step)
            return typed_bound(bounds[i].type, bounds[i].other, json_real(json_number_value(v)));
        int64_t n;
        if (!sift__js_integral(json_number_value(v), &n) || n < 0)
            return NULL;
        if (bounds[i].step < 0 && n == 0)
            return json_false(); /* every count is >= 0 */
        return typed_bound(bounds[i].type, bounds[i].other,
                           json_integer((json_int_t)(n + bounds[i].step)));
    }
    return sift__js_negate_more(s, depth);
}

json_t *sift__js_negate(const json_t *s, int depth)
{
    return negate(s, depth);
}

/* s with "not": the rest of s merged with the negation (negate). */
static sift_status gen_not(sift__js *c, const json_t *s, sift__js_ref *r)
{
    json_t *neg = negate(json_object_get(s, "not"), 0);
    int done = 0;
    sift_status st0 = neg ? SIFT_OK : sift__js_gen_not_integer(c, s, r, &done);
    if (st0 || done)
        return st0;
    if (!neg)
        return sift__js_unsupported(c, "not", "'not' is not supported");
    json_t *rest = json_copy((json_t *)s);
    sift_status st = rest && !json_object_del(rest, "not") ? SIFT_OK : nomem(c);
    if (!st)
        st = sift__js_gen_merged_any(c, rest, neg, r);
    json_decref(rest);
    json_decref(neg);
    return st;
}

/* s with a $dynamicRef that resolves as a $ref: s with that $ref (an
 * allOf member when s has a $ref of its own). */
static sift_status gen_dynamic_ref(sift__js *c, const json_t *s, sift__js_ref *r)
{
    const char *ref;
    sift_status st = sift__js_dynamic_ref(c, s, &ref);
    if (st)
        return st;
    json_t *s2 = json_copy((json_t *)s);
    if (!s2 || json_object_del(s2, "$dynamicRef"))
        return json_decref(s2), nomem(c);
    int bad;
    if (!json_object_get(s2, "$ref")) { /* alone, it takes the $ref's rule */
        bad = json_object_set_new(s2, "$ref", json_string(ref));
    } else {
        json_t *all = json_object_get(s2, "allOf");
        json_t *member = json_pack("{s:s}", "$ref", ref);
        all = json_is_array(all) ? json_copy(all) : json_array();
        bad =
            !member || !all || json_array_append(all, member) || json_object_set(s2, "allOf", all);
        json_decref(member);
        json_decref(all);
    }
    st = bad ? nomem(c) : sift__js_gen(c, s2, r);
    json_decref(s2);
    return st;
}

static sift_status gen_object_schema(sift__js *c, const json_t *s, sift__js_ref *r)
{
    if (sift__js_has_uneval(s))
        return sift__js_gen_uneval(c, s, r);
    if (json_object_get(s, "$dynamicRef"))
        return gen_dynamic_ref(c, s, r);
    for (size_t i = 0; i < sizeof dep_keys / sizeof dep_keys[0]; i++)
        if (json_object_get(s, dep_keys[i]))
            return gen_dependencies(c, s, r);
    /* beside enum / const, each value is tested against the keywords
     * (admitted_values), which refuses what it cannot test */
    int values = json_object_get(s, "enum") || json_object_get(s, "const");
    /* beside values, json_schema_value.c decides these keywords exactly */
    if (!values &&
        (json_object_get(s, "if") || json_object_get(s, "then") || json_object_get(s, "else")))
        return sift__js_gen_cond(c, s, r);
    if (!values && json_object_get(s, "propertyNames") && !sift__js_names_by_key_rule(c, s))
        return sift__js_gen_names(c, s, r);
    if (!values && json_object_get(s, "not")) {
        sift_status st0 = gen_not(c, s, r);
        if (st0 || r->name[0] || r->never)
            return st0;
        /* ignored: generated without it */
        json_t *rest = json_copy((json_t *)s);
        st0 = rest && !json_object_del(rest, "not") ? sift__js_gen(c, rest, r) : nomem(c);
        json_decref(rest);
        return st0;
    }
    sift_status st = values ? SIFT_OK : check_unsupported(c, s);
    if (st)
        return st;
    const json_t *ref = json_object_get(s, "$ref");
    if (ref && !json_is_string(ref))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "$ref", "'$ref' must be a string");
    if (ref && !has_constraints(s, "$ref"))
        return gen_ref(c, s, json_string_value(ref), r);
    if (ref || json_object_get(s, "allOf"))
        return sift__js_gen_merged(c, s, NULL, r);
    int any = json_object_get(s, "anyOf") != NULL, one = json_object_get(s, "oneOf") != NULL;
    /* anyOf and oneOf: each anyOf alternative merged with the rest,
     * oneOf included */
    if (any || one)
        return gen_any_of(c, s, any ? "anyOf" : "oneOf", r);
    unsigned mask;
    if ((st = schema_types(c, s, &mask)))
        return st;
    const json_t *k = json_object_get(s, "const"), *e = json_object_get(s, "enum");
    if (k || e) {
        if (!k && !json_is_array(e))
            return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "enum", "'enum' must be an array");
        json_t *given = k ? json_pack("[O]", k) : json_incref((json_t *)e), *vals = NULL;
        if (!given)
            return nomem(c);
        st = admitted_values(c, s, given, k ? "const" : "enum", &vals);
        json_decref(given);
        if (!st && mask == 0) /* "type": []: no value (0 below means no filter) */
            r->never = 1;
        else if (!st)
            st =
                gen_enum(c, s, vals, mask == ~0u ? 0 : mask | (mask & T_NUMBER ? T_INTEGER : 0), r);
        json_decref(vals);
        return st;
    }
    return gen_types(c, s, r);
}

sift_status sift__js_gen(sift__js *c, const json_t *s, sift__js_ref *r)
{
    r->never = 0;
    r->name[0] = '\0';
    sift_status st = sift__js_work(c, 1);
    if (st)
        return st;
    if (json_is_true(s)) {
        snprintf(r->name, sizeof r->name, "%s", sift__js_shared(c, SIFT__JS_R_VALUE));
        return SIFT_OK;
    }
    if (json_is_false(s)) {
        r->never = 1;
        return SIFT_OK;
    }
    if (!json_is_object(s))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, NULL,
                             "a schema must be an object or a boolean");
    if (++c->depth > SIFT__JS_MAX_DEPTH) {
        c->depth--;
        return sift__js_fail(c, SIFT_E_SCHEMA_LIMIT, NULL, "subschemas nest over %d levels",
                             SIFT__JS_MAX_DEPTH);
    }
    const char *base = c->ref_base;
    int both = c->ref_both;
    sift__js_ref_enter(c, s);
    st = gen_object_schema(c, s, r);
    c->ref_base = base;
    c->ref_both = both;
    c->depth--;
    return st;
}

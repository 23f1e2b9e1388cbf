/*
 * json_schema_merge.c - allOf, and the siblings of $ref and anyOf:
 * merging several subschemas into one (keyword by keyword: types
 * intersected, required and enum combined, bounds tightened, properties
 * and items merged per entry, additionalProperties restricted to what
 * each member leaves), for json_schema_gen.c to generate.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "json_schema.h"

/* ------------------------------------------------------------------ */
/* allOf, and siblings of $ref and anyOf: merging                      */
/* ------------------------------------------------------------------ */

static sift_status nomem(sift__js *c)
{
    return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
}

static sift_status set_new(sift__js *c, json_t *dst, const char *key, json_t *v)
{
    return v && json_object_set_new(dst, key, v) == 0 ? SIFT_OK : nomem(c);
}

static json_t *all_of2(const json_t *a, const json_t *b)
{
    return json_pack("{s:[OO]}", "allOf", a, b);
}

static sift_status merge_properties(sift__js *c, json_t *dst, const json_t *old, const json_t *add)
{
    if (!json_is_object(old) || !json_is_object(add))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "properties",
                             "'properties' must be an object");
    /* the copy costs a unit per property, so that a long allOf chain
     * (each member copying what the ones before gathered) is bounded by
     * max_work */
    sift_status st =
        sift__js_work(c, (int64_t)json_object_size(old) + (int64_t)json_object_size(add));
    if (st)
        return st;
    json_t *m = json_copy((json_t *)old);
    const char *k;
    json_t *v;
    if (!m)
        return nomem(c);
    json_object_foreach((json_t *)add, k, v)
    {
        const json_t *o = json_object_get(m, k);
        /* true beside a schema adds nothing (and a wrapper around a
         * $ref would merge its target in place) */
        int bad = o && (json_equal((json_t *)o, v) || json_is_true(v)) ? 0
                  : o && !json_is_true(o) ? json_object_set_new(m, k, all_of2(o, v)) != 0
                                          : json_object_set(m, k, v) != 0;
        if (bad) {
            json_decref(m);
            return nomem(c);
        }
    }
    return set_new(c, dst, "properties", m);
}

/* Adds the key of v to `set`; *added says whether it was new. */
sift_status sift__js_set_add(sift__js *c, json_t *set, const json_t *v, int *added)
{
    char *k;
    sift_status st = sift__js_value_key(c, v, &k);
    if (st)
        return st;
    *added = json_object_get(set, k) == NULL;
    if (*added && json_object_set_new_nocheck(set, k, json_null()))
        st = nomem(c);
    free(k);
    return st;
}

/* Whether the key of v is in `set` (*in). */
sift_status sift__js_set_has(sift__js *c, const json_t *set, const json_t *v, int *in)
{
    char *k;
    sift_status st = sift__js_value_key(c, v, &k);
    if (st)
        return st;
    *in = json_object_get(set, k) != NULL;
    free(k);
    return st;
}

static sift_status merge_required(sift__js *c, json_t *dst, const json_t *old, const json_t *add)
{
    /* the copy costs a unit per name (see merge_properties); the union
     * goes through a hash set, so that it is linear in the names */
    sift_status st = sift__js_work(c, (int64_t)json_array_size(old));
    if (st)
        return st;
    json_t *m = json_copy((json_t *)old), *seen = json_object();
    if (!m || !seen || !json_is_array(m) || !json_is_array(add)) {
        int bad = m && seen;
        json_decref(m);
        json_decref(seen);
        return bad ? sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "required",
                                   "'required' must be an array")
                   : nomem(c);
    }
    int added;
    for (size_t i = 0; !st && i < json_array_size(m); i++)
        st = sift__js_set_add(c, seen, json_array_get(m, i), &added);
    for (size_t i = 0; !st && i < json_array_size(add); i++) {
        json_t *x = json_array_get(add, i);
        st = sift__js_set_add(c, seen, x, &added);
        if (!st && added && json_array_append(m, x))
            st = nomem(c);
    }
    json_decref(seen);
    if (st) {
        json_decref(m);
        return st;
    }
    return set_new(c, dst, "required", m);
}

/* The values of `old` that `add` lists too (numbers by value), in the
 * order of `old`: one hash set of add, a lookup per value of old. */
static sift_status merge_enum(sift__js *c, json_t *dst, const json_t *old, const json_t *add)
{
    json_t *m = json_array(), *in_add = json_object();
    sift_status st = m && in_add ? SIFT_OK : nomem(c);
    int flag;
    for (size_t k = 0; !st && k < json_array_size(add); k++)
        st = sift__js_set_add(c, in_add, json_array_get(add, k), &flag);
    for (size_t i = 0; !st && i < json_array_size(old); i++) {
        json_t *x = json_array_get(old, i);
        st = sift__js_set_has(c, in_add, x, &flag);
        if (!st && flag && json_array_append(m, x))
            st = nomem(c);
    }
    json_decref(in_add);
    if (st) {
        json_decref(m);
        return st;
    }
    return set_new(c, dst, "enum", m);
}

/* Two prefixes (prefixItems, or items in its array form): position by
 * position both schemas, then the rest of the longer one. What each
 * member says of the positions past its own prefix is added by
 * restrict_merged. A unit of work per position. */
static sift_status merge_prefix(sift__js *c, json_t *dst, const char *key, const json_t *old,
                                const json_t *add)
{
    size_t na = json_array_size(old), nb = json_array_size(add), n = na > nb ? na : nb;
    sift_status st = sift__js_work(c, 1 + (int64_t)n);
    json_t *m = st ? NULL : json_array();
    if (!st && !m)
        st = nomem(c);
    for (size_t i = 0; !st && i < n; i++) {
        json_t *a = json_array_get(old, i), *b = json_array_get(add, i);
        json_t *x = !a                                          ? json_incref(b)
                    : !b || json_is_true(b) || json_equal(a, b) ? json_incref(a)
                    : json_is_true(a)                           ? json_incref(b)
                                                                : all_of2(a, b);
        if (!x || json_array_append_new(m, x))
            st = nomem(c);
    }
    if (st) {
        json_decref(m);
        return st;
    }
    return set_new(c, dst, key, m);
}

static int is_min_key(const char *k)
{
    return !strcmp(k, "minimum") || !strcmp(k, "minLength") || !strcmp(k, "minItems") ||
           !strcmp(k, "minProperties") || !strcmp(k, "exclusiveMinimum");
}

static int is_max_key(const char *k)
{
    return !strcmp(k, "maximum") || !strcmp(k, "maxLength") || !strcmp(k, "maxItems") ||
           !strcmp(k, "maxProperties") || !strcmp(k, "exclusiveMaximum");
}

/* The alternatives of (A1 | ... | An) & (B1 | ... | Bm): Ai & Bj for
 * each pair, a true side left out; NULL when out of memory. */
static json_t *any_product(const json_t *a, const json_t *b)
{
    json_t *out = json_array();
    for (size_t i = 0; out && i < json_array_size(a); i++)
        for (size_t j = 0; out && j < json_array_size(b); j++) {
            const json_t *x = json_array_get(a, i), *y = json_array_get(b, j);
            json_t *p = json_is_true(x)   ? json_incref((json_t *)y)
                        : json_is_true(y) ? json_incref((json_t *)x)
                                          : all_of2(x, y);
            if (!p || json_array_append_new(out, p)) {
                json_decref(out);
                out = NULL;
            }
        }
    return out;
}

sift_status sift__js_merge_any(sift__js *c, json_t *dst, const json_t *alts)
{
    const json_t *old = json_object_get(dst, "anyOf");
    if (!old)
        return json_object_set(dst, "anyOf", (json_t *)alts) ? nomem(c) : SIFT_OK;
    size_t n = json_array_size(old), m = json_array_size(alts);
    if (!json_is_array(old) || !json_is_array(alts) || !n || !m || n * m > 64)
        return sift__js_unsupported(c, "anyOf",
                                    "allOf members (or $ref siblings) give 'anyOf' two values "
                                    "(over 64 alternatives together)");
    sift_status st = sift__js_work(c, (int64_t)(n * m));
    return st ? st : set_new(c, dst, "anyOf", any_product(old, alts));
}

/* Two oneOf values, each with alternatives no value matches two of: both
 * are anyOf's, and so is their product. */
static sift_status merge_one_of(sift__js *c, json_t *dst, const json_t *old, const json_t *v,
                                int *done)
{
    int d[2] = {0, 0};
    const json_t *vals[2] = {old, v};
    sift_status st = SIFT_OK;
    *done = 0;
    for (int i = 0; !st && i < 2; i++) {
        json_t *t = json_is_array(vals[i]) && json_array_size(vals[i])
                        ? json_pack("{s:O}", "oneOf", vals[i])
                        : NULL;
        if (t)
            st = sift__js_alternatives_disjoint(c, t, "oneOf", &d[i]);
        json_decref(t);
    }
    if (st || !d[0] || !d[1])
        return st;
    json_t *keep = json_incref((json_t *)old);
    json_object_del(dst, "oneOf");
    st = sift__js_merge_any(c, dst, keep);
    if (!st)
        st = sift__js_merge_any(c, dst, v);
    json_decref(keep);
    *done = 1;
    return st;
}

/* Two const values: *never unless they are one value (by value: 1 and
 * 1.0 are one). */
static sift_status merge_const(sift__js *c, const json_t *old, const json_t *v, int *never)
{
    json_t *seen = json_object();
    int flag = 0;
    sift_status st = seen ? sift__js_set_add(c, seen, old, &flag) : nomem(c);
    if (!st)
        st = sift__js_set_has(c, seen, v, &flag);
    json_decref(seen);
    if (!st && !flag)
        *never = 1;
    return st;
}

static sift_status combine(sift__js *c, json_t *dst, const char *key, const json_t *old,
                           const json_t *v)
{
    if (!strcmp(key, "properties"))
        return merge_properties(c, dst, old, v);
    if (!strcmp(key, "required"))
        return merge_required(c, dst, old, v);
    if (!strcmp(key, "enum") && json_is_array(old) && json_is_array(v))
        return merge_enum(c, dst, old, v);
    if (!strcmp(key, "type")) {
        unsigned a = sift__js_type_mask(old), b = sift__js_type_mask(v);
        unsigned m = (a & b) | ((a & T_NUMBER) && (b & T_INTEGER) ? T_INTEGER : 0) |
                     ((b & T_NUMBER) && (a & T_INTEGER) ? T_INTEGER : 0);
        return set_new(c, dst, "type", sift__js_mask_to_types(m));
    }
    if (json_is_number(old) && json_is_number(v) && (is_min_key(key) || is_max_key(key))) {
        double x = json_number_value(old), y = json_number_value(v);
        int take_new = is_min_key(key) ? y > x : y < x;
        return take_new && json_object_set(dst, key, (json_t *)v) ? nomem(c) : SIFT_OK;
    }
    if ((!strcmp(key, "items") || !strcmp(key, "prefixItems")) && json_is_array(old) &&
        json_is_array(v))
        return merge_prefix(c, dst, key, old, v);
    int64_t x, y;
    if (!strcmp(key, "multipleOf") && json_is_number(old) && json_is_number(v) &&
        sift__js_integral(json_number_value(old), &x) &&
        sift__js_integral(json_number_value(v), &y) && x > 0 && y > 0) {
        /* multiples of both: of their least common multiple */
        int64_t a = x, b = y;
        while (b) {
            int64_t t = a % b;
            a = b;
            b = t;
        }
        if (x / a <= INT64_C(1000000000000000) / y)
            return set_new(c, dst, key, json_integer((json_int_t)(x / a * y)));
    }
    if (!strcmp(key, "not")) /* neither a nor b: not anyOf [a, b] */
        return set_new(c, dst, "not", json_pack("{s:[O,O]}", "anyOf", old, v));
    if (!strcmp(key, "additionalProperties") || !strcmp(key, "items")) {
        if (json_is_false(old))
            return SIFT_OK;
        if (json_is_false(v) || json_is_true(old))
            return json_object_set(dst, key, (json_t *)v) ? nomem(c) : SIFT_OK;
        if (json_is_true(v))
            return SIFT_OK;
        if (json_is_object(old) && json_is_object(v))
            return set_new(c, dst, key, all_of2(old, v));
    }
    if (!strcmp(key, "anyOf") && json_is_array(old) && json_is_array(v) && json_array_size(old) &&
        json_array_size(v))
        return sift__js_merge_any(c, dst, v);
    if (!strcmp(key, "oneOf")) {
        int done;
        sift_status st = merge_one_of(c, dst, old, v, &done);
        if (st || done)
            return st;
    }
    if (!sift__js_is_keyword(key))
        return SIFT_OK; /* an unknown key: an annotation, the first value stays */
    return sift__js_unsupported(c, key, "allOf members (or $ref siblings) give '%s' two values",
                                key);
}

static sift_status merge_into(sift__js *c, json_t *dst, const json_t *src, int depth, int *never,
                              json_t *own);

static sift_status merge_member(sift__js *c, json_t *dst, const json_t *m, int depth, int *never,
                                json_t *own)
{
    if (json_is_true(m))
        return SIFT_OK;
    if (json_is_false(m)) {
        *never = 1;
        return SIFT_OK;
    }
    if (!json_is_object(m))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, NULL,
                             "a schema must be an object or a boolean");
    return merge_into(c, dst, m, depth + 1, never, own);
}

/* Whether member s constrains what its own properties / prefix leave
 * over (additionalProperties, items after prefixItems, ...). */
static int constrains_rest(const json_t *s)
{
    const json_t *ap = json_object_get(s, "additionalProperties");
    const json_t *it = json_object_get(s, "items");
    const json_t *ai = json_object_get(s, "additionalItems");
    return (ap && !json_is_true(ap)) || (it && !json_is_true(it)) || (ai && !json_is_true(ai));
}

static sift_status merge_into(sift__js *c, json_t *dst, const json_t *src, int depth, int *never,
                              json_t *own)
{
    const char *key;
    json_t *v;
    if (sift__js_has_uneval(src)) {
        /* evaluated in its own scope first: a member without them */
        json_t *plain;
        sift_status st0 = sift__js_uneval_rewrite(c, src, &plain);
        if (!st0)
            st0 = merge_member(c, dst, plain, depth, never, own);
        json_decref(plain);
        return st0;
    }
    if (constrains_rest(src) && json_array_append(own, (json_t *)src))
        return nomem(c);
    /* a unit per key visited: a $ref target with many keys may be
     * merged once per $ref */
    sift_status st = sift__js_work(c, 1 + (int64_t)json_object_size(src));
    if (!st && depth > 32)
        st = sift__js_fail(c, SIFT_E_SCHEMA_UNSUPPORTED, NULL,
                           "allOf and $ref merge over 32 levels (a $ref cycle inside allOf?)");
    if (!st) /* if / then / else: one unit per schema object */
        st = sift__js_merge_cond(c, dst, src);
    json_object_foreach((json_t *)src, key, v)
    {
        if (st)
            break;
        if (sift__js_is_annotation(key) || sift__js_is_cond_key(key))
            continue;
        if (!strcmp(key, "allOf")) {
            if (!json_is_array(v))
                return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, key, "'allOf' must be an array");
            for (size_t i = 0; !st && i < json_array_size(v); i++)
                st = merge_member(c, dst, json_array_get(v, i), depth, never, own);
        } else if ((!strcmp(key, "$ref") || !strcmp(key, "$dynamicRef")) && json_is_string(v)) {
            const json_t *t;
            char *ptr;
            const char *ref = json_string_value(v);
            if ((key[1] == 'd' && (st = sift__js_dynamic_ref(c, src, &ref))) ||
                (st = sift__js_resolve(c, src, ref, &t, &ptr)))
                return st;
            sift__free(c->al, ptr);
            st = merge_member(c, dst, t, depth, never, own);
        } else {
            const json_t *old = json_object_get(dst, key);
            if (!old)
                st = json_object_set(dst, key, v) ? nomem(c) : SIFT_OK;
            else if (!strcmp(key, "const"))
                st = merge_const(c, old, v, never);
            else if (!json_equal((json_t *)old, v))
                st = combine(c, dst, key, old, v);
        }
    }
    return st;
}

/* The schema s with its allOf members and $ref targets merged in, and
 * `extra` (may be NULL) too; then generated. */
/* The merged schema m with the entries of `key` (an object of
 * properties or an array of prefix items) replaced: those that member
 * rest-schema `rest` applies to (want(i, name)) take allOf(entry, rest),
 * or false when rest is false. */
static sift_status restrict_entries(sift__js *c, json_t *m, const char *key, const json_t *keep,
                                    size_t keep_n, const json_t *rest)
{
    json_t *all = json_object_get(m, key);
    json_t *copy = json_copy(all);
    sift_status st =
        copy ? sift__js_work(c, 1 + (int64_t)json_object_size(all) + (int64_t)json_array_size(all))
             : nomem(c);
    if (!st && json_is_object(all)) {
        const char *k;
        json_t *v;
        json_object_foreach(all, k, v)
        {
            if (st || json_object_get(keep, k))
                continue;
            json_t *nv = json_is_false(rest) ? json_false() : all_of2(v, rest);
            if (json_object_set_new(copy, k, nv))
                st = nomem(c);
        }
    }
    for (size_t i = keep_n; !st && json_is_array(all) && i < json_array_size(all); i++) {
        json_t *v = json_array_get(all, i);
        json_t *nv = json_is_false(rest) ? json_false() : all_of2(v, rest);
        if (json_array_set_new(copy, i, nv))
            st = nomem(c);
    }
    if (st) {
        json_decref(copy);
        return st;
    }
    return set_new(c, m, key, copy);
}

/* JSON Schema evaluates additionalProperties against the properties and
 * patternProperties of its own schema object, and items against its own
 * prefixItems (additionalItems against its own array items); after a
 * merge, a property or prefix position another member declares is
 * "additional" to each member `own` lists that does not declare it. So
 * such a property (position) takes that member's rest schema too; false
 * makes it absent (never, if required). A member's patternProperties
 * differing from the merged ones would need a key-by-key decision, and
 * is refused. */
static sift_status restrict_merged(sift__js *c, json_t *m, const json_t *own)
{
    const json_t *mpp = json_object_get(m, "patternProperties");
    sift_status st = SIFT_OK;
    for (size_t i = 0; !st && i < json_array_size(own); i++) {
        const json_t *s = json_array_get(own, i);
        const json_t *ap = json_object_get(s, "additionalProperties");
        if (ap && !json_is_true(ap) && (json_is_object(ap) || json_is_false(ap))) {
            const json_t *pp = json_object_get(s, "patternProperties");
            const json_t *props = json_object_get(s, "properties");
            int others = 0;
            const char *k;
            json_t *v;
            /* a unit per merged property looked up */
            if ((st = sift__js_work(
                     c, 1 + (int64_t)json_object_size(json_object_get(m, "properties")))))
                return st;
            json_object_foreach(json_object_get(m, "properties"), k, v)
            {
                if (!json_object_get(props, k))
                    others = 1;
            }
            if ((mpp && !json_equal((json_t *)mpp, (json_t *)pp)) || (pp && others))
                return sift__js_unsupported(
                    c, "additionalProperties",
                    "'additionalProperties' beside 'patternProperties' in a merged schema "
                    "(allOf, $ref) whose members declare other properties or patterns");
            if (others)
                st = restrict_entries(c, m, "properties", props, 0, ap);
        }
        const json_t *pre = json_object_get(s, "prefixItems");
        const json_t *items = json_object_get(s, "items");
        const json_t *rest = items;
        size_t n = 0;
        if (json_is_array(pre)) {
            n = json_array_size(pre);
        } else if (json_is_array(items)) {
            n = json_array_size(items);
            rest = json_object_get(s, "additionalItems");
        }
        if (st || !rest || json_is_true(rest) || !(json_is_object(rest) || json_is_false(rest)))
            continue;
        const json_t *mpre = json_object_get(m, "prefixItems");
        const char *pk = "prefixItems";
        if (!json_is_array(mpre)) {
            mpre = json_object_get(m, "items");
            pk = "items";
        }
        if (json_is_array(mpre) && json_array_size(mpre) > n)
            st = restrict_entries(c, m, pk, NULL, n, rest);
    }
    return st;
}

sift_status sift__js_merge(sift__js *c, const json_t *s, const json_t *extra, json_t **out,
                           int *never)
{
    json_t *m = json_object(), *own = json_array();
    *out = NULL;
    *never = 0;
    if (!m || !own) {
        json_decref(m);
        json_decref(own);
        return nomem(c);
    }
    sift_status st = merge_into(c, m, s, 0, never, own);
    if (!st && extra)
        st = merge_member(c, m, extra, 0, never, own);
    if (!st && !*never)
        st = restrict_merged(c, m, own);
    json_decref(own);
    if (st)
        json_decref(m);
    else
        *out = m;
    return st;
}

sift_status sift__js_gen_merged(sift__js *c, const json_t *s, const json_t *extra, sift__js_ref *r)
{
    json_t *m;
    int never;
    sift_status st = sift__js_merge(c, s, extra, &m, &never);
    if (!st && never) {
        r->never = 1;
        r->name[0] = '\0';
    } else if (!st) {
        st = sift__js_gen(c, m, r);
    }
    json_decref(m);
    return st;
}

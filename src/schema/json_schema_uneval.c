/*
 * json_schema_uneval.c - unevaluatedProperties and unevaluatedItems.
 *
 * Both apply their schema to what the adjacent keywords and the in-place
 * applicators (allOf, $ref, anyOf, oneOf, ...) of the same schema object
 * left unevaluated. Where that set is known statically, the keyword
 * becomes one more allOf member with the additionalProperties /
 * additional-items meaning:
 *
 *   s with unevaluatedProperties U, merged (allOf members and $ref
 *   targets flattened by json_schema_merge.c) into m:
 *     m has additionalProperties        -> every property is evaluated:
 *                                          U has nothing left to judge
 *     else                              -> m and {"properties": {n: true
 *                                          for every name of m},
 *                                          "patternProperties": m's,
 *                                          "additionalProperties": U}
 *
 * and likewise for items: prefixItems of m's prefix length (all true),
 * then "items": U (the array form of items with additionalItems keeps
 * its form). A member that has the keywords itself is rewritten first,
 * over its own scope (json_schema_merge.c calls sift__js_uneval_rewrite
 * on it), so a nested unevaluatedProperties evaluates every property of
 * the outer one (an additionalProperties in the merged schema), and
 * cousins do not see each other's properties.
 *
 * anyOf / oneOf: the properties an alternative evaluates count only when
 * it matches. When each alternative evaluates nothing beyond the rest of
 * the schema, or all evaluate the same names, one member serves; when
 * they differ and the alternatives are disjoint (at most one matches:
 * the test oneOf uses), the member is distributed: alternative i becomes
 * allOf [alternative i, member over the rest's names and its own], and
 * the oneOf an anyOf (exact for disjoint alternatives). Otherwise, and
 * beside if / then / else, dependentSchemas, dependencies, $dynamicRef,
 * contains (for items) or an alternative with alternatives of its own,
 * the set depends on the instance: the unsupported policy (ignored: the
 * keyword is left out).
 */
#include <stdio.h>
#include <stdlib.h>

#include "json_schema.h"

static const char *const dynamic_keys[] = {
    "if", "then", "else", "dependentSchemas", "dependencies", "$dynamicRef", "$recursiveRef",
};

/* What a merged schema evaluates. */
typedef struct seen {
    int all_props;    /* every property (additionalProperties) */
    json_t *names;    /* the names of properties, as a set (owned) */
    const json_t *pp; /* patternProperties (borrowed), or NULL */
    int all_items;    /* every item (items after the prefix) */
    size_t n_items;   /* the prefix length */
    int tuple;        /* items in its array form (with additionalItems) */
} seen;

static sift_status nomem(sift__js *c)
{
    return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
}

int sift__js_has_uneval(const json_t *s)
{
    return json_is_object(s) &&
           (json_object_get(s, "unevaluatedProperties") || json_object_get(s, "unevaluatedItems"));
}

static void seen_free(seen *e)
{
    json_decref(e->names);
    e->names = NULL;
}

/* What the merged schema m evaluates, into *e (names: a unit of work
 * each). */
static sift_status evaluated(sift__js *c, const json_t *m, seen *e)
{
    const json_t *props = json_object_get(m, "properties");
    const json_t *pre = json_object_get(m, "prefixItems"), *it = json_object_get(m, "items");
    memset(e, 0, sizeof *e);
    /* strict: an object without additionalProperties admits no other
     * property, so none is left for the keyword */
    e->all_props = json_object_get(m, "additionalProperties") != NULL || c->strict;
    e->pp = json_object_get(m, "patternProperties");
    if (!json_is_object(e->pp) || !json_object_size(e->pp))
        e->pp = NULL;
    e->tuple = json_is_array(it);
    e->n_items = json_is_array(pre) ? json_array_size(pre) : e->tuple ? json_array_size(it) : 0;
    e->all_items = e->tuple ? json_object_get(m, "additionalItems") != NULL : it != NULL;
    e->names = json_object();
    if (!e->names)
        return nomem(c);
    sift_status st = sift__js_work(c, 1 + (int64_t)json_object_size(props));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)props, k, v)
    {
        if (!st && json_object_set_new(e->names, k, json_true()))
            st = nomem(c);
    }
    return st;
}

/* The keyword a refusal is placed at. */
static const char *uneval_key(const json_t *up)
{
    return up ? "unevaluatedProperties" : "unevaluatedItems";
}

/* Whether merged m (an alternative when alt) has a keyword whose
 * evaluated set depends on the instance (*dyn: it is named in the
 * unsupported-policy message). */
static const char *dynamic_in(const json_t *m, int items, int alt)
{
    for (size_t i = 0; i < sizeof dynamic_keys / sizeof dynamic_keys[0]; i++)
        if (json_object_get(m, dynamic_keys[i]))
            return dynamic_keys[i];
    if (items && json_object_get(m, "contains"))
        return "contains";
    if (alt && json_object_get(m, "anyOf"))
        return "anyOf";
    if (alt && json_object_get(m, "oneOf"))
        return "oneOf";
    return NULL;
}

/* Whether every name of a is in b (a unit of work per name). */
static sift_status names_in(sift__js *c, const json_t *a, const json_t *b, int *in)
{
    const char *k;
    json_t *v;
    *in = 1;
    sift_status st = sift__js_work(c, 1 + (int64_t)json_object_size(a));
    json_object_foreach((json_t *)a, k, v)
    {
        if (!json_object_get(b, k))
            *in = 0;
    }
    return st;
}

/* Whether what e evaluates (of the kinds asked for) is evaluated by base
 * too (*in). */
static sift_status seen_within(sift__js *c, const seen *e, const seen *base, int props, int items,
                               int *in)
{
    sift_status st = SIFT_OK;
    *in = 1;
    if (props && !base->all_props) {
        if (e->all_props ||
            (e->pp && !(base->pp && json_equal((json_t *)e->pp, (json_t *)base->pp))))
            *in = 0;
        else
            st = names_in(c, e->names, base->names, in);
    }
    if (!st && *in && items && !base->all_items && (e->all_items || e->n_items > base->n_items))
        *in = 0;
    return st;
}

/* base and e together, into base. *clash when their patternProperties
 * differ (the merge would refuse them anyway). */
static sift_status seen_join(sift__js *c, seen *base, const seen *e, int *clash)
{
    *clash = base->pp && e->pp && !json_equal((json_t *)base->pp, (json_t *)e->pp);
    base->all_props |= e->all_props;
    base->all_items |= e->all_items;
    base->tuple |= e->tuple;
    if (e->n_items > base->n_items)
        base->n_items = e->n_items;
    if (!base->pp)
        base->pp = e->pp;
    sift_status st = sift__js_work(c, 1 + (int64_t)json_object_size(e->names));
    if (!st && json_object_update(base->names, e->names))
        st = nomem(c);
    return st;
}

/* n copies of true. */
static json_t *trues(size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_true())) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static int set_new(json_t *o, const char *k, json_t *v)
{
    return !v || json_object_set_new(o, k, v);
}

/* The member that applies up / ui to what e leaves unevaluated, in *x
 * (NULL: it would constrain nothing). */
static sift_status make_member(sift__js *c, const seen *e, const json_t *up, const json_t *ui,
                               json_t **x)
{
    json_t *m = json_object();
    int bad = !m;
    /* true: every property (item) evaluated, nothing constrained */
    if (!bad && json_is_true(up) && !e->all_props)
        bad = json_object_set(m, "additionalProperties", (json_t *)up);
    else if (!bad && up && !e->all_props) {
        sift_status st = sift__js_work(c, 1 + (int64_t)json_object_size(e->names));
        if (st) {
            json_decref(m);
            return st;
        }
        bad = set_new(m, "properties", json_deep_copy(e->names)) ||
              (e->pp && json_object_set(m, "patternProperties", (json_t *)e->pp)) ||
              json_object_set(m, "additionalProperties", (json_t *)up);
    }
    if (!bad && json_is_true(ui) && !e->all_items)
        bad = json_object_set(m, e->tuple ? "additionalItems" : "items", (json_t *)ui);
    else if (!bad && ui && !e->all_items) {
        sift_status st = sift__js_work(c, 1 + (int64_t)e->n_items);
        if (st) {
            json_decref(m);
            return st;
        }
        if (e->tuple)
            bad = set_new(m, "items", trues(e->n_items)) ||
                  json_object_set(m, "additionalItems", (json_t *)ui);
        else
            bad = (e->n_items && set_new(m, "prefixItems", trues(e->n_items))) ||
                  json_object_set(m, "items", (json_t *)ui);
    }
    if (bad) {
        json_decref(m);
        return nomem(c);
    }
    if (!json_object_size(m)) {
        json_decref(m);
        m = NULL;
    }
    *x = m;
    return SIFT_OK;
}

/* m (merged) with member x added: a new reference. */
static sift_status with_member(sift__js *c, const json_t *m, json_t *x, json_t **out)
{
    if (!x) {
        *out = json_incref((json_t *)m);
        return SIFT_OK;
    }
    json_t *o = json_copy((json_t *)m);
    if (!o || set_new(o, "allOf", json_pack("[O]", x))) {
        json_decref(o);
        return nomem(c);
    }
    *out = o;
    return SIFT_OK;
}

/* The alternatives of merged m (m[kw]): what each evaluates, merged on
 * its own, into e[] (n of them). *why names a keyword that makes an
 * alternative's set depend on the instance. */
static sift_status alternatives_seen(sift__js *c, const json_t *alts, seen *e, int items,
                                     const char **why)
{
    sift_status st = SIFT_OK;
    *why = NULL;
    for (size_t i = 0; !st && !*why && i < json_array_size(alts); i++) {
        json_t *mb = NULL;
        int never = 0;
        st = sift__js_merge(c, json_array_get(alts, i), NULL, &mb, &never);
        if (!st && never) { /* it never matches: whatever it would evaluate */
            st = evaluated(c, json_false(), &e[i]);
            e[i].all_props = e[i].all_items = 1;
        } else if (!st && !(*why = dynamic_in(mb, items, 1)))
            st = evaluated(c, mb, &e[i]);
        json_decref(mb);
    }
    return st;
}

/* m with its alternatives m[kw] (disjoint) each joined with the member
 * over base and what the alternative evaluates; into *out. */
static sift_status distribute(sift__js *c, const json_t *m, const char *kw, const seen *base,
                              const seen *e, const json_t *up, const json_t *ui, json_t **out)
{
    const json_t *alts = json_object_get(m, kw);
    json_t *o = json_copy((json_t *)m), *na = json_array();
    sift_status st = o && na && !json_object_del(o, kw) ? SIFT_OK : nomem(c);
    for (size_t i = 0; !st && i < json_array_size(alts); i++) {
        seen u = {0};
        int clash = 0;
        json_t *x = NULL;
        u.names = json_object();
        st = u.names ? seen_join(c, &u, base, &clash) : nomem(c);
        if (!st)
            st = seen_join(c, &u, &e[i], &clash);
        if (!st && clash)
            st = sift__js_unsupported(c, uneval_key(up),
                                      "'%s' over alternatives whose patternProperties differ",
                                      uneval_key(up));
        if (!st && !clash)
            st = make_member(c, &u, up, ui, &x);
        json_t *b = json_array_get(alts, i);
        json_t *nb = st ? NULL : x ? json_pack("{s:[O,O]}", "allOf", b, x) : json_incref(b);
        if (!st && (!nb || json_array_append_new(na, nb)))
            st = nomem(c);
        json_decref(x);
        seen_free(&u);
    }
    if (!st && set_new(o, "anyOf", json_incref(na)))
        st = nomem(c);
    json_decref(na);
    if (st)
        json_decref(o);
    else
        *out = o;
    return st;
}

/* merged m with its anyOf / oneOf kw and what the rest evaluates (base):
 * the rewritten schema into *out, NULL when refused under the ignore
 * policy (the caller then leaves the keywords out). */
static sift_status over_alternatives(sift__js *c, const json_t *m, const char *kw, seen *base,
                                     const json_t *up, const json_t *ui, json_t **out)
{
    const json_t *alts = json_object_get(m, kw);
    size_t n = json_array_size(alts);
    *out = NULL;
    if (!json_is_array(alts) || !n) /* the generation reports it */
        return SIFT_OK;
    seen *e = sift__calloc(c->al, n, sizeof *e);
    if (!e)
        return nomem(c);
    const char *why = NULL;
    int props = up != NULL, items = ui != NULL, within = 1, same = 1, clash = 0;
    sift_status st = alternatives_seen(c, alts, e, items, &why);
    if (!st && why)
        st = sift__js_unsupported(c, uneval_key(up),
                                  "'%s' over an alternative with '%s' (what it evaluates "
                                  "depends on the instance)",
                                  uneval_key(up), why);
    for (size_t i = 0; !st && !why && within && i < n; i++)
        st = seen_within(c, &e[i], base, props, items, &within);
    for (size_t i = 1; !st && !why && !within && same && i < n; i++) {
        int a = 0, b = 0;
        st = seen_within(c, &e[i], &e[0], props, items, &a);
        if (!st)
            st = seen_within(c, &e[0], &e[i], props, items, &b);
        same = a && b;
    }
    json_t *x = NULL;
    if (!st && !why && (within || same)) {
        if (!within)
            st = seen_join(c, base, &e[0], &clash);
        if (!st && clash)
            st = sift__js_unsupported(c, uneval_key(up),
                                      "'%s' over alternatives whose patternProperties differ",
                                      uneval_key(up));
        if (!st && !clash)
            st = make_member(c, base, up, ui, &x);
        if (!st && !clash)
            st = with_member(c, m, x, out);
        json_decref(x);
    } else if (!st && !why) {
        int disjoint = 0;
        st = sift__js_alternatives_disjoint(c, m, kw, &disjoint);
        if (!st && !disjoint)
            st = sift__js_unsupported(c, uneval_key(up),
                                      "'%s' over '%s' alternatives that evaluate different "
                                      "properties or items and may overlap",
                                      uneval_key(up), kw);
        else if (!st)
            st = distribute(c, m, kw, base, e, up, ui, out);
    }
    for (size_t i = 0; i < n; i++)
        seen_free(&e[i]);
    sift__free(c->al, e);
    return st;
}

/* merged m and the keywords' schemas (true ones already left out): the
 * rewritten schema into *out (m itself when refused under the ignore
 * policy). */
static sift_status rewrite_merged(sift__js *c, const json_t *m, const json_t *up, const json_t *ui,
                                  json_t **out)
{
    seen base;
    sift_status st = evaluated(c, m, &base);
    if (!st && base.all_props)
        up = NULL;
    if (!st && base.all_items)
        ui = NULL;
    const char *kw = json_object_get(m, "anyOf") ? "anyOf" : "oneOf";
    const char *why = st || (!up && !ui) ? NULL : dynamic_in(m, ui != NULL, 0);
    *out = NULL;
    if (!st && why)
        st = sift__js_unsupported(c, uneval_key(up),
                                  "'%s' beside '%s' (what is evaluated depends on the instance)",
                                  uneval_key(up), why);
    else if (!st && (up || ui) && json_object_get(m, "anyOf") && json_object_get(m, "oneOf"))
        st = sift__js_unsupported(c, uneval_key(up), "'%s' beside both anyOf and oneOf",
                                  uneval_key(up));
    else if (!st && (up || ui) && json_object_get(m, kw))
        st = over_alternatives(c, m, kw, &base, up, ui, out);
    else if (!st && (up || ui)) {
        json_t *x = NULL;
        st = make_member(c, &base, up, ui, &x);
        if (!st)
            st = with_member(c, m, x, out);
        json_decref(x);
    }
    if (!st && !*out)
        *out = json_incref((json_t *)m);
    seen_free(&base);
    return st;
}

sift_status sift__js_uneval_rewrite(sift__js *c, const json_t *s, json_t **out)
{
    const json_t *up = json_object_get(s, "unevaluatedProperties");
    const json_t *ui = json_object_get(s, "unevaluatedItems");
    *out = NULL;
    if (up && !json_is_object(up) && !json_is_boolean(up))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "unevaluatedProperties",
                             "'unevaluatedProperties' must be a schema");
    if (ui && !json_is_object(ui) && !json_is_boolean(ui))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "unevaluatedItems",
                             "'unevaluatedItems' must be a schema");
    /* a $ref cycle back to s would rewrite it again: bounded here */
    if (++c->depth > SIFT__JS_MAX_DEPTH) {
        c->depth--;
        return sift__js_fail(c, SIFT_E_SCHEMA_LIMIT, NULL, "subschemas nest over %d levels",
                             SIFT__JS_MAX_DEPTH);
    }
    json_t *rest = json_copy((json_t *)s), *m = NULL;
    int never = 0;
    /* the copy resolves its $ref against s's base URI */
    const char *base = c->ref_base;
    int both = c->ref_both;
    sift__js_ref_enter(c, s);
    sift_status st = rest ? SIFT_OK : nomem(c);
    if (rest) {
        json_object_del(rest, "unevaluatedProperties");
        json_object_del(rest, "unevaluatedItems");
    }
    if (!st)
        st = sift__js_merge(c, rest, NULL, &m, &never);
    if (!st && never)
        *out = json_false();
    else if (!st)
        st = rewrite_merged(c, m, up, ui, out);
    json_decref(m);
    json_decref(rest);
    c->ref_base = base;
    c->ref_both = both;
    c->depth--;
    return st;
}

sift_status sift__js_gen_uneval(sift__js *c, const json_t *s, sift__js_ref *r)
{
    json_t *plain;
    sift_status st = sift__js_uneval_rewrite(c, s, &plain);
    if (!st)
        st = sift__js_gen(c, plain, r);
    json_decref(plain);
    return st;
}

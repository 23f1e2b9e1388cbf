/*
 * json_schema_ref.c - $ref by URI: embedded $id (resolved against the
 * base URI of the schema around it, RFC 3986 section 5.2), $anchor (and
 * $dynamicAnchor, which is an anchor too), and the draft 6/7 anchor
 * form of $id ("#name").
 *
 * When the schema text names any of them, the driver indexes the schema
 * once before generating (sift__js_ref_index): a walk over the subschema
 * positions (properties, $defs, allOf, items, not, if, ...; never enum,
 * const or an unknown keyword's value) records for each schema object
 * its base URI and its JSON Pointer from the root, and for each
 * identifier the object it names. A $ref is then resolved against the
 * base URI of the schema object holding it (json_schema_gen.c calls
 * sift__js_ref_pointer) to the JSON Pointer of its target, from the
 * root, so that the rest of the converter (the rule per target, error
 * places) stays pointer-based. A URI that names no schema in this
 * document (a remote reference) is refused. The end of the file holds
 * what every $ref goes through: the pointer of a local reference, the
 * walk from the root (sift__js_local_target) and the resolution of a
 * chain of schemas that are only $refs (sift__js_resolve).
 *
 * Work: a unit per object indexed and per $ref resolved, plus a unit
 * per 64 bytes of the schema text (the scan for identifiers), of a $ref
 * and per 16 of its target's JSON Pointer (walked from the root).
 */
#include <stdio.h>
#include <stdlib.h>

#include "json_schema.h"

static sift_status nomem(sift__js *c)
{
    return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
}

/* ------------------------------------------------------------------ */
/* URIs                                                                */
/* ------------------------------------------------------------------ */

/* The length of the scheme of u ("http" of "http://..."), 0 if none. */
static size_t scheme_len(const char *u)
{
    size_t i = 0;
    if (!((u[0] >= 'a' && u[0] <= 'z') || (u[0] >= 'A' && u[0] <= 'Z')))
        return 0;
    while (u[i] && u[i] != ':' && u[i] != '/' && u[i] != '?' && u[i] != '#')
        i++;
    return u[i] == ':' ? i : 0;
}

/* Appends path p[0..n) to b with its dot segments removed (RFC 3986
 * 5.2.4). */
static sift_status put_path(sift__js *c, sift__js_buf *b, const char *p, size_t n)
{
    size_t start = b->n;
    sift_status st = SIFT_OK;
    size_t i = 0;
    while (!st && i < n) {
        size_t j = i + 1;
        while (j < n && p[j] != '/')
            j++;
        /* the segment p[i..j), with its leading '/' when p[i] is one */
        const char *seg = p + i + (p[i] == '/');
        size_t sl = j - i - (p[i] == '/');
        if (p[i] != '/' && i == 0) {
            seg = p;
            sl = j;
        }
        if (sl == 1 && seg[0] == '.') {
            if (j == n)
                st = sift__js_puts(c, b, "/");
        } else if (sl == 2 && seg[0] == '.' && seg[1] == '.') {
            while (b->n > start && b->p[b->n - 1] != '/')
                b->n--;
            if (b->n > start)
                b->n--;
            b->p[b->n] = '\0';
            if (j == n)
                st = sift__js_puts(c, b, "/");
        } else {
            if (p[i] == '/' || b->n > start)
                st = sift__js_puts(c, b, "/");
            if (!st)
                st = sift__js_put(c, b, seg, sl);
        }
        i = j;
    }
    return st;
}

/* ref resolved against base (both without fragments), into b. */
static sift_status resolve_uri(sift__js *c, const char *base, const char *ref, sift__js_buf *b)
{
    size_t rs = scheme_len(ref), bs = scheme_len(base);
    sift_status st = SIFT_OK;
    b->n = 0;
    if (!st && (rs || !*base)) {
        /* absolute (or nothing to resolve against) */
        const char *path = ref + rs + (rs ? 1 : 0);
        st = sift__js_put(c, b, ref, (size_t)(path - ref));
        if (!st && path[0] == '/' && path[1] == '/') {
            const char *e = path + 2;
            while (*e && *e != '/' && *e != '?')
                e++;
            st = sift__js_put(c, b, path, (size_t)(e - path));
            path = e;
        }
        size_t pl = strcspn(path, "?");
        if (!st)
            st = rs && strchr(path, '/') ? put_path(c, b, path, pl) : sift__js_put(c, b, path, pl);
        return st ? st : sift__js_puts(c, b, path + pl);
    }
    /* the base's scheme and authority */
    const char *bp = base + bs + (bs ? 1 : 0);
    const char *auth_end = bp;
    if (bp[0] == '/' && bp[1] == '/') {
        auth_end = bp + 2;
        while (*auth_end && *auth_end != '/' && *auth_end != '?')
            auth_end++;
    }
    if (ref[0] == '/' && ref[1] == '/') {
        st = sift__js_put(c, b, base, (size_t)(bp - base));
        return st ? st : sift__js_puts(c, b, ref);
    }
    st = sift__js_put(c, b, base, (size_t)(auth_end - base));
    size_t bpl = strcspn(auth_end, "?");
    if (!st && !*ref)
        return sift__js_puts(c, b, auth_end);
    if (!st && ref[0] == '?') {
        st = sift__js_put(c, b, auth_end, bpl);
        return st ? st : sift__js_puts(c, b, ref);
    }
    size_t rpl = strcspn(ref, "?");
    if (!st && ref[0] == '/') {
        st = put_path(c, b, ref, rpl);
        return st ? st : sift__js_puts(c, b, ref + rpl);
    }
    /* merge: the base path up to its last '/', then ref */
    sift__js_buf merged = {0};
    size_t last = bpl;
    while (last > 0 && auth_end[last - 1] != '/')
        last--;
    if (!st && last == 0 && auth_end != bp)
        st = sift__js_puts(c, &merged, "/");
    if (!st)
        st = sift__js_put(c, &merged, auth_end, last);
    if (!st)
        st = sift__js_put(c, &merged, ref, rpl);
    if (!st)
        st = merged.p[0] == '/' || auth_end != bp ? put_path(c, b, merged.p, merged.n)
                                                  : sift__js_put(c, b, merged.p, merged.n);
    sift__js_buf_free(c, &merged);
    return st ? st : sift__js_puts(c, b, ref + rpl);
}

/* ------------------------------------------------------------------ */
/* The index                                                           */
/* ------------------------------------------------------------------ */

/* The key of a node in c->nodes: its address. */
static void node_key(const json_t *n, char *k, size_t cap)
{
    snprintf(k, cap, "%p", (const void *)n);
}

/* Keywords whose value is a subschema, an array of them, or an object
 * of them. */
static const char *const one_schema[] = {
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "contentSchema",
    "items",
};
static const char *const schema_array[] = {"allOf", "anyOf", "oneOf", "prefixItems", "items"};
static const char *const schema_map[] = {
    "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies",
};

typedef struct walk {
    sift__js *c;
    sift__js_buf ptr; /* the JSON Pointer of the node being walked */
    sift__js_buf uri; /* scratch */
    int modern;       /* $schema names 2019-09 or 2020-12 */
} walk;

static sift_status put_segment(walk *w, const char *seg)
{
    sift_status st = sift__js_puts(w->c, &w->ptr, "/");
    for (const char *p = seg; !st && *p; p++)
        st = *p == '~'   ? sift__js_puts(w->c, &w->ptr, "~0")
             : *p == '/' ? sift__js_puts(w->c, &w->ptr, "~1")
                         : sift__js_put(w->c, &w->ptr, p, 1);
    return st;
}

/* Records identifier `id` (a URI, or URI#anchor) for node n. */
static sift_status name_node(walk *w, const char *id, const json_t *n)
{
    sift__js *c = w->c;
    if (json_object_get(c->ref_ids, id))
        return SIFT_OK; /* the first one stays (a duplicate is an error of the schema) */
    json_t *v = json_integer((json_int_t)(intptr_t)n);
    return v && !json_object_set_new(c->ref_ids, id, v) ? SIFT_OK : nomem(c);
}

static sift_status walk_node(walk *w, const json_t *n, const char *base, int depth);

static sift_status walk_child(walk *w, const json_t *n, const char *base, int depth,
                              const char *seg1, const char *seg2)
{
    size_t mark = w->ptr.n;
    sift_status st = put_segment(w, seg1);
    if (!st && seg2)
        st = put_segment(w, seg2);
    if (!st)
        st = walk_node(w, n, base, depth + 1);
    w->ptr.n = mark;
    if (w->ptr.p)
        w->ptr.p[mark] = '\0';
    return st;
}

/* The base URI of node n (whose base around it is `base`), into *nb (a
 * new string). */
static sift_status node_base(walk *w, const json_t *n, const char *base, char **nb)
{
    sift__js *c = w->c;
    const json_t *id = json_object_get(n, "$id");
    const char *ids = json_string_value(id);
    /* drafts 6 and 7: the siblings of $ref, $id among them, are ignored */
    if (c->ref_alone && json_object_get(n, "$ref"))
        ids = NULL;
    sift_status st = SIFT_OK;
    size_t frag = ids ? strcspn(ids, "#") : 0;
    if (ids && frag) {
        char *u = sift__malloc(c->al, frag + 1, 1);
        if (!u)
            return nomem(c);
        memcpy(u, ids, frag);
        u[frag] = '\0';
        st = resolve_uri(c, base, u, &w->uri);
        sift__free(c->al, u);
        base = w->uri.p ? w->uri.p : "";
        if (!st)
            st = name_node(w, base, n);
    }
    size_t bl = strlen(base);
    *nb = st ? NULL : sift__malloc(c->al, bl + 1, 1);
    if (!st && !*nb)
        return nomem(c);
    if (!st)
        memcpy(*nb, base, bl + 1);
    return st;
}

/* Records n's anchors ("$anchor", "$dynamicAnchor", "$id": "#name")
 * under base. */
static sift_status name_anchors(walk *w, const json_t *n, const char *base)
{
    static const char *const keys[] = {"$anchor", "$dynamicAnchor", "$id"};
    sift_status st = SIFT_OK;
    for (size_t i = 0; !st && i < sizeof keys / sizeof keys[0]; i++) {
        const char *a = json_string_value(json_object_get(n, keys[i]));
        if (!a || (i == 2 && (a[0] != '#' || !a[1] || a[1] == '/')))
            continue;
        if (i == 2 && w->c->ref_alone && json_object_get(n, "$ref"))
            continue;
        sift__js_buf k = {0};
        if (i == 1) { /* how many schemas declare this dynamic anchor */
            st = sift__js_printf(w->c, &k, "\001%s", a);
            const json_t *was = st ? NULL : json_object_get(w->c->ref_ids, k.p);
            json_t *n1 = st ? NULL : json_integer(json_integer_value(was) + 1);
            if (!st && (!n1 || json_object_set_new(w->c->ref_ids, k.p, n1)))
                st = nomem(w->c);
            k.n = 0;
        }
        st = sift__js_printf(w->c, &k, "%s#%s", base, a + (i == 2));
        if (!st)
            st = name_node(w, k.p, n);
        sift__js_buf_free(w->c, &k);
    }
    return st;
}

static sift_status walk_node(walk *w, const json_t *n, const char *base, int depth)
{
    sift__js *c = w->c;
    if (!json_is_object(n))
        return SIFT_OK;
    sift_status st = sift__js_work(c, 1);
    if (!st && depth > SIFT__JS_MAX_DEPTH)
        st = sift__js_fail(c, SIFT_E_SCHEMA_LIMIT, NULL, "subschemas nest over %d levels",
                           SIFT__JS_MAX_DEPTH);
    char *nb = NULL;
    if (!st)
        st = node_base(w, n, base, &nb);
    if (!st)
        st = name_anchors(w, n, nb);
    char k[40];
    node_key(n, k, sizeof k);
    /* $id beside $ref: drafts 6 and 7 ignore the $id, 2019-09 on resolve
     * the $ref against it; without $schema naming one, refused there */
    int both = !c->ref_alone && !w->modern && json_object_get(n, "$ref") &&
               json_is_string(json_object_get(n, "$id")) &&
               json_string_value(json_object_get(n, "$id"))[0] != '#';
    json_t *rec = st ? NULL : json_pack("[s,s,b]", w->ptr.p ? w->ptr.p : "", nb, both);
    if (!st && (!rec || json_object_set_new(c->ref_nodes, k, rec)))
        st = nomem(c);
    for (size_t i = 0; !st && i < sizeof one_schema / sizeof one_schema[0]; i++) {
        const json_t *v = json_object_get(n, one_schema[i]);
        if (json_is_object(v))
            st = walk_child(w, v, nb, depth, one_schema[i], NULL);
    }
    for (size_t i = 0; !st && i < sizeof schema_array / sizeof schema_array[0]; i++) {
        const json_t *v = json_object_get(n, schema_array[i]);
        for (size_t j = 0; !st && j < json_array_size(v); j++) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", j);
            st = walk_child(w, json_array_get(v, j), nb, depth, schema_array[i], idx);
        }
    }
    for (size_t i = 0; !st && i < sizeof schema_map / sizeof schema_map[0]; i++) {
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(n, schema_map[i]), key, v)
        {
            if (!st)
                st = walk_child(w, v, nb, depth, schema_map[i], key);
        }
    }
    sift__free(c->al, nb);
    return st;
}

/* Whether the schema text names an identifier at all. */
static int names_ids(const sift__js *c)
{
    static const char *const marks[] = {"\"$id\"", "\"$anchor\"", "\"$dynamicAnchor\""};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        size_t ml = strlen(marks[i]);
        for (size_t p = 0; p + ml <= c->len; p++)
            if (c->text[p] == '"' && !memcmp(c->text + p, marks[i], ml))
                return 1;
    }
    return 0;
}

sift_status sift__js_ref_index(sift__js *c)
{
    if (!json_is_object(c->root) || !names_ids(c))
        return SIFT_OK;
    sift_status st = sift__js_work(c, 1 + (int64_t)(c->len >> 6));
    if (st)
        return st;
    c->ref_ids = json_object();
    c->ref_nodes = json_object();
    if (!c->ref_ids || !c->ref_nodes)
        return nomem(c);
    const char *draft = json_string_value(json_object_get(c->root, "$schema"));
    walk w = {c, {0}, {0}, draft && (strstr(draft, "2019-09") || strstr(draft, "2020-12"))};
    st = sift__js_puts(c, &w.ptr, "");
    if (!st)
        st = name_node(&w, "", c->root);
    if (!st)
        st = walk_node(&w, c->root, "", 0);
    sift__js_buf_free(c, &w.ptr);
    sift__js_buf_free(c, &w.uri);
    return st;
}

/* ------------------------------------------------------------------ */
/* Resolution                                                          */
/* ------------------------------------------------------------------ */

/* The record [pointer, base] of node n, or NULL. */
static const json_t *record(const sift__js *c, const json_t *n)
{
    char k[40];
    node_key(n, k, sizeof k);
    return json_object_get(c->ref_nodes, k);
}

void sift__js_ref_enter(sift__js *c, const json_t *s)
{
    const json_t *rec = c->ref_nodes ? record(c, s) : NULL;
    if (rec) {
        c->ref_base = json_string_value(json_array_get(rec, 1));
        c->ref_both = json_is_true(json_array_get(rec, 2));
    }
}

/* Appends the fragment f (a JSON Pointer, percent escapes decoded) to
 * b. */
static sift_status put_fragment(sift__js *c, sift__js_buf *b, const char *f)
{
    sift_status st = SIFT_OK;
    for (; !st && *f; f++) {
        if (f[0] == '%' && sift__hex_digit(f[1]) >= 0 && sift__hex_digit(f[2]) >= 0) {
            char ch = (char)(sift__hex_digit(f[1]) * 16 + sift__hex_digit(f[2]));
            st = sift__js_put(c, b, &ch, 1);
            f += 2;
        } else {
            st = sift__js_put(c, b, f, 1);
        }
    }
    return st;
}

/* The value at escaped pointer ptr from the root (*t, NULL if none) and
 * the base URI of the innermost indexed schema on the way (*base). */
static sift_status target_of(sift__js *c, const char *ptr, const json_t **t, const char **base)
{
    const json_t *rec = record(c, c->root);
    sift_status st = SIFT_OK;
    *t = c->root;
    *base = json_string_value(json_array_get(rec, 1));
    for (const char *p = ptr; !st && *t && *p == '/';) {
        const char *q = p + 1;
        sift__js_buf seg = {0};
        st = sift__js_puts(c, &seg, "");
        for (; !st && *q && *q != '/'; q++) {
            char ch = *q;
            if (ch == '~' && (q[1] == '0' || q[1] == '1'))
                ch = *++q == '0' ? '~' : '/';
            st = sift__js_put(c, &seg, &ch, 1);
        }
        char *end = NULL;
        unsigned long idx = seg.p && json_is_array(*t) ? strtoul(seg.p, &end, 10) : 0;
        *t = st                      ? NULL
             : json_is_object(*t)    ? json_object_get(*t, seg.p)
             : end && !*end && seg.n ? json_array_get(*t, idx)
                                     : NULL;
        sift__js_buf_free(c, &seg);
        if (*t && (rec = record(c, *t)) != NULL)
            *base = json_string_value(json_array_get(rec, 1));
        p = q;
    }
    return st;
}

sift_status sift__js_ref_pointer(sift__js *c, const json_t *from, const char *ref, char **ptr)
{
    const json_t *rec = from ? record(c, from) : NULL;
    /* a copy of the schema being generated (no record) is that schema */
    if (rec ? json_is_true(json_array_get(rec, 2)) : c->ref_both)
        return sift__js_fail(c, SIFT_E_SCHEMA_UNSUPPORTED, "$ref",
                             "$ref beside $id: drafts 6 and 7 resolve it against the base URI "
                             "around, 2019-09 on against the $id (name the draft in $schema)");
    const char *base = rec ? json_string_value(json_array_get(rec, 1)) : c->ref_base;
    if (!base)
        base = json_string_value(json_array_get(record(c, c->root), 1));
    size_t rl = strlen(ref), frag = strcspn(ref, "#");
    sift_status st = sift__js_work(c, 1 + (int64_t)(rl >> 6));
    sift__js_buf u = {0}, out = {0};
    char *rel = st ? NULL : sift__malloc(c->al, frag + 1, 1);
    if (!st && !rel)
        st = nomem(c);
    if (!st) {
        memcpy(rel, ref, frag);
        rel[frag] = '\0';
        st = resolve_uri(c, base ? base : "", rel, &u);
    }
    sift__free(c->al, rel);
    const char *f = ref[frag] ? ref + frag + 1 : "";
    const json_t *res = NULL;
    if (!st && (*f == '\0' || *f == '/')) {
        res = json_object_get(c->ref_ids, u.p ? u.p : "");
    } else if (!st) {
        st = sift__js_printf(c, &u, "#%s", f);
        res = st ? NULL : json_object_get(c->ref_ids, u.p);
        f = "";
    }
    const json_t *node = res ? (const json_t *)(intptr_t)json_integer_value(res) : NULL;
    const json_t *nrec = node ? record(c, node) : NULL;
    if (!st && !nrec)
        st = sift__js_fail(c, SIFT_E_SCHEMA_UNSUPPORTED, "$ref",
                           "$ref \"%.80s\" names no schema in this document (remote "
                           "references are not supported)",
                           ref);
    if (!st)
        st = sift__js_puts(c, &out, json_string_value(json_array_get(nrec, 0)));
    if (!st)
        st = put_fragment(c, &out, f);
    sift__js_buf_free(c, &u);
    if (st) {
        sift__js_buf_free(c, &out);
        return st;
    }
    if (!out.p && (st = sift__js_puts(c, &out, "")))
        return st;
    /* a target outside the subschema positions indexed (inside an
     * unknown keyword, say) takes the base URI around it */
    const json_t *t;
    const char *tbase;
    st = sift__js_work(c, 1 + (int64_t)(out.n >> 4)); /* the walk */
    if (!st)
        st = target_of(c, out.p, &t, &tbase);
    if (!st && t && !record(c, t)) {
        char k[40];
        node_key(t, k, sizeof k);
        json_t *rec2 = json_pack("[s,s,b]", out.p, tbase ? tbase : "", 0);
        if (!rec2 || json_object_set_new(c->ref_nodes, k, rec2))
            st = nomem(c);
    }
    if (st) {
        sift__js_buf_free(c, &out);
        return st;
    }
    *ptr = out.p;
    return SIFT_OK;
}

sift_status sift__js_dynamic_ref(sift__js *c, const json_t *s, const char **ref)
{
    const json_t *v = json_object_get(s, "$dynamicRef");
    *ref = json_string_value(v);
    if (!*ref)
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "$dynamicRef",
                             "'$dynamicRef' must be a string");
    const char *name = strchr(*ref, '#');
    if (!name || !name[1] || name[1] == '/' || !c->ref_ids)
        return SIFT_OK; /* no anchor named: a $ref */
    name++;
    sift__js_buf k = {0};
    sift_status st = sift__js_printf(c, &k, "\001%s", name);
    json_int_t n = st ? 0 : json_integer_value(json_object_get(c->ref_ids, k.p));
    sift__js_buf_free(c, &k);
    if (st || n <= 1)
        return st; /* the one schema declaring it is where the $ref leads */
    char *ptr = NULL;
    const json_t *t = NULL;
    if ((st = sift__js_ref_pointer(c, s, *ref, &ptr)))
        return st;
    const char *base;
    st = target_of(c, ptr, &t, &base);
    sift__free(c->al, ptr);
    const char *da = json_string_value(json_object_get(t, "$dynamicAnchor"));
    if (!st && da && !strcmp(da, name))
        st = sift__js_unsupported(c, "$dynamicRef",
                                  "'$dynamicRef' to the $dynamicAnchor \"%.60s\" that several "
                                  "schemas declare (resolved by the dynamic scope)",
                                  name);
    return st;
}

/* ------------------------------------------------------------------ */
/* Local references: JSON Pointers, and resolution of a $ref        */
/* ------------------------------------------------------------------ */

/* The escaped JSON Pointer of a local $ref (percent-decoded) of schema
 * object `from` into *ptr (allocated), or an error. */
static sift_status ref_pointer(sift__js *c, const json_t *from, const char *ref, char **ptr)
{
    if (c->ref_nodes) /* identifiers: resolved by URI */
        return sift__js_ref_pointer(c, from, ref, ptr);
    const char *hash = strchr(ref, '#');
    if (hash != ref) {
        const json_t *id = json_is_object(c->root) ? json_object_get(c->root, "$id") : NULL;
        size_t pre = hash ? (size_t)(hash - ref) : strlen(ref);
        if (!id)
            id = json_is_object(c->root) ? json_object_get(c->root, "id") : NULL;
        const char *ids = json_string_value(id);
        if (!hash || !ids || strlen(ids) < pre || strncmp(ids, ref, pre) ||
            (ids[pre] != '\0' && ids[pre] != '#'))
            return sift__js_fail(c, SIFT_E_SCHEMA_UNSUPPORTED, "$ref",
                                 "$ref \"%.80s\" is not local to this schema", ref);
    }
    const char *f = hash + 1;
    if (*f && *f != '/')
        return sift__js_fail(c, SIFT_E_SCHEMA_UNSUPPORTED, "$ref",
                             "$ref \"%.80s\" names an anchor (only JSON Pointers are supported)",
                             ref);
    size_t n = strlen(f);
    char *p = sift__malloc(c->al, n + 1, 1);
    if (!p)
        return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (f[i] == '%' && i + 2 < n + 1 && sift__hex_digit(f[i + 1]) >= 0 &&
            sift__hex_digit(f[i + 2]) >= 0) {
            p[k++] = (char)(sift__hex_digit(f[i + 1]) * 16 + sift__hex_digit(f[i + 2]));
            i += 2;
        } else {
            p[k++] = f[i];
        }
    }
    p[k] = '\0';
    *ptr = p;
    return SIFT_OK;
}

/* The value the escaped pointer names, or NULL. */
static const json_t *walk_pointer(const json_t *root, const char *p)
{
    const json_t *at = root;
    char seg[512];
    while (at && *p == '/') {
        const char *q = p + 1;
        size_t k = 0;
        for (; *q && *q != '/'; q++) {
            char ch = *q;
            if (ch == '~' && (q[1] == '0' || q[1] == '1'))
                ch = *++q == '0' ? '~' : '/';
            if (k + 1 >= sizeof seg)
                return NULL;
            seg[k++] = ch;
        }
        seg[k] = '\0';
        if (json_is_object(at)) {
            at = json_object_get(at, seg);
        } else if (json_is_array(at)) {
            char *end;
            unsigned long idx = strtoul(seg, &end, 10);
            at = *end || !k ? NULL : json_array_get(at, idx);
        } else {
            at = NULL;
        }
        p = q;
    }
    return at;
}

const json_t *sift__js_local_target(sift__js *c, const json_t *from, const char *ref)
{
    if (ref[0] != '#' || (ref[1] && ref[1] != '/'))
        return NULL;
    if (c->ref_nodes) { /* identifiers: "#" is of the resource around from */
        char *ptr = NULL;
        sift_error *keep = c->err;
        c->err = NULL; /* sets no error */
        sift_status st = sift__js_ref_pointer(c, from, ref, &ptr);
        c->err = keep;
        const json_t *t = st ? NULL : walk_pointer(c->root, ptr);
        sift__free(c->al, ptr);
        return t;
    }
    size_t n = strlen(ref + 1);
    char *p = sift__malloc(c->al, n + 1, 1);
    if (!p)
        return NULL;
    size_t k = 0;
    for (const char *f = ref + 1; *f; f++) {
        if (f[0] == '%' && sift__hex_digit(f[1]) >= 0 && sift__hex_digit(f[2]) >= 0) {
            p[k++] = (char)(sift__hex_digit(f[1]) * 16 + sift__hex_digit(f[2]));
            f += 2;
        } else {
            p[k++] = *f;
        }
    }
    p[k] = '\0';
    const json_t *t = walk_pointer(c->root, p);
    sift__free(c->al, p);
    return t;
}

int sift__js_only_ref(const json_t *s)
{
    const char *key;
    json_t *v;
    if (!json_is_object(s) || !json_object_get(s, "$ref"))
        return 0;
    json_object_foreach((json_t *)s, key, v)
    {
        if (strcmp(key, "$ref") && !sift__js_is_annotation(key))
            return 0;
    }
    return 1;
}

/* Resolves $ref `ref` to its target; a chain of schemas that are only
 * $refs is followed here (a cycle of them is an error). *ptr is the
 * final target's pointer (allocated). */
sift_status sift__js_resolve(sift__js *c, const json_t *from, const char *ref,
                             const json_t **target, char **ptr)
{
    *ptr = NULL;
    for (int hops = 0;; hops++) {
        sift_status st = ref_pointer(c, from, ref, ptr);
        if (st)
            return st;
        const json_t *t = walk_pointer(c->root, *ptr);
        /* sift__js_only_ref below visits the target's keys, once per $ref */
        if (t && (st = sift__js_work(c, 1 + (int64_t)json_object_size(t) / 8))) {
            sift__free(c->al, *ptr);
            *ptr = NULL;
            return st;
        }
        if (!t) {
            st = sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "$ref", "$ref \"%.80s\" does not resolve",
                               ref);
            sift__free(c->al, *ptr);
            *ptr = NULL;
            return st;
        }
        if (!sift__js_only_ref(t) || !json_is_string(json_object_get(t, "$ref"))) {
            *target = t;
            return SIFT_OK;
        }
        if (hops >= 64) {
            sift__free(c->al, *ptr);
            *ptr = NULL;
            return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "$ref",
                                 "$ref \"%.80s\" loops through $refs alone", ref);
        }
        sift__free(c->al, *ptr);
        *ptr = NULL;
        ref = json_string_value(json_object_get(t, "$ref"));
        from = t;
    }
}

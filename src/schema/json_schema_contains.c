/*
 * json_schema_contains.c - arrays with contains / minContains /
 * maxContains.
 *
 * With items I (a schema, or any value) and contains C, an element is Y
 * (I and C) or N (I and not C). At least m elements Y (minContains,
 * default 1), no bound above:
 *
 *   "[" ws pre Y ws ("," ws pre Y ws){m-1} post "]"
 *   pre ::= (I ws "," ws)*        post ::= ("," ws I ws)*
 *
 * (ambiguous where an element is both, but every accepted array has m
 * elements that meet C). With maxContains M (at most 64), the count is
 * kept in rules s_j (j elements Y so far), which needs N exactly, so C
 * must have a negation (json_schema_cond.c); else unsupported:
 *
 *   s_j ::= ("," ws N ws)* ("," ws Y ws s_{j+1})?   ("?" only once j >= m)
 *   s_M ::= ("," ws N ws)*
 *   array ::= "[" ws (N ws s_0 | Y ws s_1) "]"  (| "[" ws "]" when m = 0)
 *
 * minContains 0 without maxContains leaves contains without effect.
 * prefixItems (or items as an array), maxItems, a minItems above what
 * contains already asks, and uniqueItems: true beside contains are
 * unsupported.
 */
#include <stdio.h>
#include <stdlib.h>

#include "json_schema.h"

#define MAX_CONTAINS 64

static sift_status nomem(sift__js *c)
{
    return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
}

/* The rule of I merged with x (NULL: I alone). */
static sift_status element(sift__js *c, const json_t *items, const json_t *x, const char *key,
                           sift__js_ref *r)
{
    size_t mark = c->path.n;
    if (json_is_false(items)) { /* no element at all */
        r->never = 1;
        r->name[0] = '\0';
        return SIFT_OK;
    }
    sift_status st = sift__js_push_key(c, key);
    if (!st && x && !json_is_true(items))
        st = sift__js_gen_merged(c, items, x, r);
    else if (!st)
        st = sift__js_gen(c, x ? x : items, r);
    sift__js_pop(c, mark);
    return st;
}

/* At least m >= 1 elements Y among elements I. */
static sift_status gen_at_least(sift__js *c, const sift__js_ref *item, const sift__js_ref *y,
                                int64_t m, sift__js_ref *r)
{
    const char *ws = sift__js_shared(c, SIFT__JS_R_WS);
    sift__js_ref pre, post, more;
    sift__js_buf b = {0};
    sift_status st = sift__js_printf(c, &b, "(%s %s \",\" %s)*", item->name, ws, ws);
    if (!st)
        st = sift__js_rule(c, &pre, b.p);
    if (!st) {
        b.n = 0;
        st = sift__js_printf(c, &b, "(\",\" %s %s %s)*", ws, item->name, ws);
    }
    if (!st)
        st = sift__js_rule(c, &post, b.p);
    if (!st) {
        b.n = 0;
        st = sift__js_printf(c, &b, "\",\" %s %s %s %s", ws, pre.name, y->name, ws);
    }
    if (!st)
        st = sift__js_rule(c, &more, b.p);
    if (!st) {
        b.n = 0;
        st = sift__js_printf(c, &b, "\"[\" %s %s %s %s", ws, pre.name, y->name, ws);
    }
    if (!st && m > 1)
        st = sift__js_printf(c, &b, " %s{%lld,%lld}", more.name, (long long)(m - 1),
                             (long long)(m - 1));
    if (!st)
        st = sift__js_printf(c, &b, " %s \"]\"", post.name);
    if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    return st;
}

/* Between m and M elements Y, the others N (either may be never). */
static sift_status gen_between(sift__js *c, const sift__js_ref *y, const sift__js_ref *n, int64_t m,
                               int64_t mx, sift__js_ref *r)
{
    const char *ws = sift__js_shared(c, SIFT__JS_R_WS);
    sift__js_ref s[MAX_CONTAINS + 1], nrun;
    sift__js_buf b = {0};
    sift_status st = sift__js_work(c, mx + 1);
    if (!st && !n->never)
        st = sift__js_printf(c, &b, "(\",\" %s %s %s)*", ws, n->name, ws);
    else if (!st)
        st = sift__js_puts(c, &b, "\"\"");
    if (!st)
        st = sift__js_rule(c, &nrun, b.p);
    for (int64_t j = 0; !st && j <= mx; j++)
        st = sift__js_new_rule(c, &s[j]);
    for (int64_t j = mx; !st && j >= 0; j--) {
        b.n = 0;
        st = sift__js_puts(c, &b, nrun.name);
        if (!st && j < mx && !y->never)
            st = sift__js_printf(c, &b, " (\",\" %s %s %s %s)%s", ws, y->name, ws, s[j + 1].name,
                                 j + 1 > m ? "?" : "");
        if (!st)
            st = sift__js_emit(c, &s[j], b.p);
    }
    b.n = 0;
    int alts = 0;
    if (!st)
        st = sift__js_printf(c, &b, "\"[\" %s (", ws);
    if (!st && !n->never)
        st = sift__js_printf(c, &b, "%s %s %s", n->name, ws, s[0].name), alts++;
    if (!st && !y->never && mx >= 1)
        st = sift__js_printf(c, &b, "%s%s %s %s", alts++ ? " | " : "", y->name, ws, s[1].name);
    if (!st && m == 0)
        st = sift__js_printf(c, &b, "%s\"\"", alts++ ? " | " : "");
    if (!st)
        st = sift__js_puts(c, &b, ") \"]\"");
    if (!st && alts)
        st = sift__js_rule(c, r, b.p);
    else if (!st)
        r->never = 1;
    sift__js_buf_free(c, &b);
    return st;
}

/* The array without contains / minContains / maxContains. */
static sift_status gen_plain(sift__js *c, const json_t *s, sift__js_ref *r)
{
    json_t *rest = json_copy((json_t *)s);
    if (!rest)
        return nomem(c);
    json_object_del(rest, "contains");
    json_object_del(rest, "minContains");
    json_object_del(rest, "maxContains");
    sift_status st = sift__js_gen_array(c, rest, r);
    json_decref(rest);
    return st;
}

/* The shapes beside contains that this file does not combine with it. */
static sift_status check_beside(sift__js *c, const json_t *s, int64_t m)
{
    const json_t *items = json_object_get(s, "items");
    int64_t lo = 0, hi = 0;
    int has_lo, has_hi;
    sift_status st = sift__js_get_count(c, s, "minItems", &lo, &has_lo);
    if (!st)
        st = sift__js_get_count(c, s, "maxItems", &hi, &has_hi);
    if (st)
        return st;
    if (json_object_get(s, "prefixItems") || json_is_array(items))
        return sift__js_unsupported(c, "contains", "'contains' beside prefixItems");
    if (items && !json_is_object(items) && !json_is_boolean(items))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "items", "'items' must be a schema");
    if (has_hi || (has_lo && lo > (m > 1 ? m : 1)))
        return sift__js_unsupported(c, "contains", "'contains' beside these item counts");
    if (json_is_true(json_object_get(s, "uniqueItems")))
        return sift__js_unsupported(c, "contains", "'contains' beside 'uniqueItems'");
    return SIFT_OK;
}

sift_status sift__js_gen_contains(sift__js *c, const json_t *s, sift__js_ref *r)
{
    const json_t *cs = json_object_get(s, "contains");
    const json_t *items = json_object_get(s, "items");
    int64_t m = 1, mx = 0;
    int has_m, has_mx;
    sift_status st = sift__js_get_count(c, s, "minContains", &m, &has_m);
    if (!st)
        st = sift__js_get_count(c, s, "maxContains", &mx, &has_mx);
    if (st)
        return st;
    if (!has_m)
        m = 1;
    if (!cs)
        return gen_plain(c, s, r); /* min / maxContains alone: no effect */
    if (!json_is_object(cs) && !json_is_boolean(cs))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "contains", "'contains' must be a schema");
    if (has_mx && mx < m) {
        r->never = 1;
        return SIFT_OK;
    }
    if (m == 0 && !has_mx)
        return gen_plain(c, s, r);
    if (has_mx && mx > MAX_CONTAINS)
        st = sift__js_unsupported(c, "maxContains", "'maxContains' over %d", MAX_CONTAINS);
    if (!st && m > SIFT__JS_MAX_REPEAT)
        st = sift__js_unsupported(c, "minContains", "'minContains' over %d", SIFT__JS_MAX_REPEAT);
    if (!st)
        st = check_beside(c, s, m);
    if (st || (has_mx && mx > MAX_CONTAINS) || m > SIFT__JS_MAX_REPEAT)
        return st ? st : gen_plain(c, s, r); /* ignored: without contains */
    json_t *any = json_true();
    if (!items)
        items = any;
    sift__js_ref y, n, item;
    st = element(c, items, cs, "contains", &y);
    if (!st && !has_mx) {
        if (y.never) {
            r->never = 1;
            return SIFT_OK;
        }
        st = element(c, items, NULL, "items", &item);
        if (!st && item.never)
            r->never = 1;
        else if (!st)
            st = gen_at_least(c, &item, &y, m, r);
        return st;
    }
    json_t *neg = st ? NULL : sift__js_negate(cs, 0);
    if (!st && !neg) {
        st = sift__js_unsupported(c, "maxContains",
                                  "'maxContains' with a 'contains' whose negation is not "
                                  "supported");
        return st ? st : gen_plain(c, s, r);
    }
    if (!st)
        st = element(c, items, neg, "contains", &n);
    json_decref(neg);
    if (!st && y.never && m > 0)
        r->never = 1;
    else if (!st)
        st = gen_between(c, &y, &n, m, mx, r);
    return st;
}

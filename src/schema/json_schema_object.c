/*
 * json_schema_object.c - the object and array parts of a schema.
 *
 * Objects. Properties are written in definition order ("properties",
 * then required names it does not list); any of them may be left out
 * unless required; extra properties (additionalProperties true or a
 * schema, or absent outside strict mode; patternProperties) follow
 * them. With properties p0..pn-1 and the extra member X, two rule
 * chains keep the grammar linear in n:
 *
 *   first(i) ::= kv(i) ws after(i+1) [| first(i+1) when p_i is optional]
 *   after(i) ::= ("," ws kv(i) ws)[? when optional] after(i+1)
 *   first(n) ::= (X ws after(n))?        after(n) ::= ("," ws X ws)*
 *   object   ::= "{" ws first(0) "}"
 *
 * An extra key is any string but the names of "properties" (compared as
 * written: an escaped spelling of a known name is not recognised). A key
 * that matches a patternProperties pattern takes that pattern's schema;
 * as the grammar cannot also check it against additionalProperties, a
 * same-named property or a second pattern, a constraining pattern is
 * supported only alone: with additionalProperties false and no declared
 * property name it matches (tested with PCRE2); or matching every key
 * (a declared property then takes the allOf of both schemas); or, with
 * no declared property, as one atom whose complement is written as a
 * second pattern for additionalProperties (else the unsupported policy;
 * IGNORE keeps the approximation). minProperties and maxProperties
 * are exact on objects without "properties"; with properties they are
 * accepted only when the required ones already satisfy them, or for
 * minProperties 1 without a required one (the chain without its empty
 * ends).
 *
 * Arrays. prefixItems (or the array form of items) fix the first
 * elements, items (or additionalItems) the rest; minItems and maxItems
 * bound the count (uniqueItems over a finite set of scalar items: one
 * rule per set of values already written, gen_unique):
 *
 *   t(i) ::= ("," ws)? p_i ws t(i+1)   -- optional once i >= minItems
 *   t(k) ::= R ws ("," ws R ws){a,b}    -- the rest, counts from min/max
 *   array ::= "[" ws t(0) "]"
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_regex.h"
#include "json_schema.h"

typedef struct prop {
    const char *key;
    sift__js_ref value;
    int required;
} prop;

static sift_status nomem(sift__js *c)
{
    return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
}

static void set_name(sift__js_ref *r, const char *name)
{
    r->never = 0;
    snprintf(r->name, sizeof r->name, "%s", name);
}

/* Appends the JSON text of key `k` as a GBNF literal. */
static sift_status key_lit(sift__js *c, sift__js_buf *b, const char *k)
{
    json_t *s = json_string(k);
    if (!s)
        return nomem(c);
    sift_status st = sift__js_const_value(c, b, s);
    json_decref(s);
    return st;
}

static sift_status kv(sift__js *c, sift__js_buf *b, const prop *p)
{
    const char *ws = sift__js_shared(c, SIFT__JS_R_WS);
    sift_status st = key_lit(c, b, p->key);
    return st ? st : sift__js_printf(c, b, " %s \":\" %s %s", ws, ws, p->value.name);
}

/* Whether a schema accepts every value (true, or annotations only). */
static int trivial(const json_t *s)
{
    if (json_is_true(s))
        return 1;
    if (!json_is_object(s))
        return 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (!sift__js_is_annotation(key))
            return 0;
    }
    return 1;
}

/* Whether patternProperties holds a pattern whose schema constrains
 * its values: the grammar gives a key one alternative, so such a key
 * must not also be reachable through a second pattern, a declared
 * property or additionalProperties (those cases are unsupported). */
static int pp_strict(const json_t *pp)
{
    const char *pat;
    json_t *ps;
    json_object_foreach((json_t *)pp, pat, ps)
    {
        if (!trivial(ps))
            return 1;
    }
    return 0;
}

/* Whether a declared property name may match a pattern of pp (the
 * pattern compiled by PCRE2 as an ECMA-262 stand-in; a pattern PCRE2
 * does not take, or a match that fails to finish, counts as a match).
 * Each match is limited to NAME_MATCH_LIMIT steps and charged
 * NAME_MATCH_UNITS units, so that many names stay within max_work;
 * *st is set when the work runs out. */
#define NAME_MATCH_LIMIT 10000
#define NAME_MATCH_UNITS 16
static int names_may_match(sift__js *c, const json_t *pp, const char *const *names, size_t n_names,
                           sift_status *st)
{
    const char *pat;
    json_t *ps;
    int hit = 0;
    if (n_names == 0)
        return 0;
    if ((*st =
             sift__js_work(c, (int64_t)json_object_size(pp) * (int64_t)n_names * NAME_MATCH_UNITS)))
        return 1;
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    if (!mc)
        return 1;
    pcre2_set_match_limit(mc, NAME_MATCH_LIMIT);
    json_object_foreach((json_t *)pp, pat, ps)
    {
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, strlen(pat),
                                       PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS,
                                       &ec, &eo, NULL);
        pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
        for (size_t i = 0; !hit && i < n_names; i++)
            hit = !md || !sift__js_plain_ascii(names[i]) ||
                  pcre2_match(re, (PCRE2_SPTR)names[i], strlen(names[i]), 0, 0, md, mc) !=
                      PCRE2_ERROR_NOMATCH;
        pcre2_match_data_free(md);
        pcre2_code_free(re);
        if (hit)
            break;
    }
    pcre2_match_context_free(mc);
    return hit;
}

/* A pattern of one atom (".", \d \D \w \W \s \S, a bracket class, or
 * a plain character), optionally anchored at either end, repeated by
 * "+", "*", "{m}", "{m,}", "{m,n}" or once. Such a pattern's key
 * language has a complement of the same kind (below); bracket classes
 * are taken as written (no nested "[", no "]" first). */
#define ATOM_MAX_COUNT 1000
typedef struct one_atom {
    int bol, eol;
    long lo, hi; /* hi -1: no bound */
    const char *a;
    size_t a_len;
} one_atom;

static int plain_char(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-' || ch == '/' || ch == '@' || ch == ':';
}

/* Reads a count of at most ATOM_MAX_COUNT at p[*i]; -1 when none. */
static long read_count(const char *p, size_t *i)
{
    long v = -1;
    while (p[*i] >= '0' && p[*i] <= '9') {
        v = (v < 0 ? 0 : v * 10) + (p[*i] - '0');
        (*i)++;
        if (v > ATOM_MAX_COUNT)
            return -2;
    }
    return v;
}

/* The quantifier at p[*i] into o->lo, o->hi; 0 when malformed. */
static int parse_quant(const char *p, size_t *i, one_atom *o)
{
    o->lo = o->hi = 1;
    if (p[*i] == '+' || p[*i] == '*') {
        o->lo = p[*i] == '+';
        o->hi = -1;
        (*i)++;
    } else if (p[*i] == '{') {
        (*i)++;
        o->lo = read_count(p, i);
        if (o->lo < 0)
            return 0;
        o->hi = o->lo;
        if (p[*i] == ',') {
            (*i)++;
            o->hi = p[*i] == '}' ? -1 : read_count(p, i);
            if (o->hi < -1 || (o->hi == -1 && p[*i] != '}') || (o->hi >= 0 && o->hi < o->lo))
                return 0;
        }
        if (p[(*i)++] != '}')
            return 0;
    }
    return 1;
}

static int parse_one_atom(const char *p, one_atom *o)
{
    size_t i = 0;
    o->bol = p[0] == '^';
    i += (size_t)o->bol;
    o->a = p + i;
    if (p[i] == '.' || plain_char((unsigned char)p[i])) {
        i++;
    } else if (p[i] == '\\' && p[i + 1] && strchr("dDwWsS", p[i + 1])) {
        i += 2;
    } else if (p[i] == '[') {
        i++;
        if (p[i] == '^')
            i++;
        if (p[i] == ']')
            return 0;
        while (p[i] && p[i] != ']') {
            if (p[i] == '[')
                return 0;
            if (p[i] == '\\') {
                if (!p[i + 1])
                    return 0;
                i++;
            }
            i++;
        }
        if (p[i] != ']')
            return 0;
        i++;
    } else {
        return 0;
    }
    o->a_len = (size_t)(p + i - o->a);
    if (!parse_quant(p, &i, o))
        return 0;
    o->eol = p[i] == '$';
    i += (size_t)o->eol;
    return p[i] == '\0';
}

/* Whether pattern p matches every string (e.g. ".*", "^[a-z]*"). */
static int pat_universal(const char *p)
{
    one_atom o;
    return p[0] == '\0' || (parse_one_atom(p, &o) && o.lo == 0 && !(o.bol && o.eol));
}

/* "A{0,k}" for atom text a, or nothing when k is 0. */
static void upto(char *out, size_t cap, const char *a, long k)
{
    if (k > 0)
        snprintf(out, cap, "%s{0,%ld}", a, k);
    else
        out[0] = '\0';
}

/* The ECMA-262 text of a pattern matching exactly the strings that the
 * one-atom pattern p does not match, into out[cap]; 0 when p is not of
 * that shape (or is universal). With A the atom, N its complement and
 * m..n the count: unanchored, a run of m A's somewhere (every run
 * shorter: ^N*(A{1,m-1}N+)*A{0,m-1}$); ^...$, an N or a length out of
 * m..n (N|^A{0,m-1}$|^A{n+1}); ^... a leading run of m
 * (^A{0,m-1}$|^A{0,m-1}N); ...$ a trailing one. */
static int pat_complement(const char *p, char *out, size_t cap)
{
    one_atom o;
    char a[96], neg[96], u[128];
    if (!parse_one_atom(p, &o) || o.a_len + 2 >= sizeof neg)
        return 0;
    snprintf(a, sizeof a, "(?:%.*s)", (int)o.a_len, o.a);
    if (o.a[0] == '.')
        snprintf(neg, sizeof neg, "[\\n\\r\\u2028\\u2029]");
    else if (o.a[0] == '\\')
        snprintf(neg, sizeof neg, "\\%c", o.a[1] ^ 0x20);
    else if (o.a[0] == '[' && o.a[1] == '^') /* a leading ^ of the rest is a character */
        snprintf(neg, sizeof neg, "[%s%.*s", o.a[2] == '^' ? "\\" : "", (int)o.a_len - 2, o.a + 2);
    else if (o.a[0] == '[')
        snprintf(neg, sizeof neg, "[^%.*s", (int)o.a_len - 1, o.a + 1);
    else
        snprintf(neg, sizeof neg, "[^%c]", o.a[0]);
    upto(u, sizeof u, a, o.lo - 1);
    int n = -1;
    if (o.lo == 0 && !(o.bol && o.eol))
        return 0; /* universal */
    if (o.bol && o.eol) {
        char big[128] = "";
        if (o.hi >= 0)
            snprintf(big, sizeof big, "|^%s{%ld}", a, o.hi + 1);
        if (o.lo == 0)
            n = snprintf(out, cap, "%s%s", neg, big);
        else
            n = snprintf(out, cap, "%s|^%s$%s", neg, u, big);
    } else if (o.bol) {
        n = snprintf(out, cap, "^%s$|^%s%s", u, u, neg);
    } else if (o.eol) {
        n = snprintf(out, cap, "^%s$|%s%s$", u, neg, u);
    } else if (o.lo == 1) {
        n = snprintf(out, cap, "^%s*$", neg);
    } else {
        n = snprintf(out, cap, "^%s*(?:%s{1,%ld}%s+)*%s$", neg, a, o.lo - 1, neg, u);
    }
    return n > 0 && (size_t)n < cap;
}

/* The single pattern of patternProperties, when it is universal and its
 * schema constrains values: every key (declared names included) then
 * takes its schema. NULL otherwise. */
static const json_t *universal_pp(const json_t *s, const char **pat)
{
    const json_t *pp = json_object_get(s, "patternProperties");
    const char *k;
    json_t *v;
    if (!json_is_object(pp) || json_object_size(pp) != 1)
        return NULL;
    json_object_foreach((json_t *)pp, k, v)
    {
        if (pat_universal(k) && !trivial(v)) {
            *pat = k;
            return v;
        }
    }
    return NULL;
}

/* The most bytes of a complement pattern (pat_complement and
 * sift__js_pat_complement_seq). */
#define COMP_CAP 4096

/* The extra member X (key ws ":" ws value), or never. */
static sift_status gen_extra(sift__js *c, const json_t *s, const char *const *names, size_t n_names,
                             sift__js_ref *x)
{
    const char *ws = sift__js_shared(c, SIFT__JS_R_WS);
    const json_t *ap = json_object_get(s, "additionalProperties");
    const json_t *pp = json_object_get(s, "patternProperties");
    sift__js_buf b = {0};
    sift_status st = SIFT_OK;
    size_t alts = 0, mark = c->path.n;
    x->never = 1;
    if (pp && !json_is_object(pp))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "patternProperties",
                             "'patternProperties' must be an object");
    const char *pat;
    json_t *ps;
    /* one universal pattern: every key takes its schema (declared names
     * get it merged in by collect), the others are any undeclared key */
    const char *upat = NULL;
    if (universal_pp(s, &upat)) {
        sift__js_ref v, keys;
        if (!(st = sift__js_push_key(c, "patternProperties")) && !(st = sift__js_push_key(c, upat)))
            st = sift__js_gen(c, json_object_get(pp, upat), &v);
        sift__js_pop(c, mark);
        if (!st && !v.never && !(st = sift__js_not_keys(c, names, n_names, &keys)))
            st = sift__js_printf(c, &b, "%s %s \":\" %s %s", keys.name, ws, ws, v.name);
        if (!st && !v.never)
            st = sift__js_rule(c, x, b.p);
        sift__js_buf_free(c, &b);
        return st;
    }
    /* one pattern and no declared name: the keys it does not match have
     * a pattern of their own, for additionalProperties */
    int open_ap = json_is_true(ap) || (!ap && !c->strict) || json_is_object(ap);
    /* names the pattern covers (json_schema_ppcover.c) need no care */
    const char **rest = sift__calloc(c->al, n_names ? n_names : 1, sizeof *rest);
    char *comp = sift__calloc(c->al, COMP_CAP, 1);
    size_t n_rest = 0;
    if (!rest || !comp) {
        sift__free(c->al, rest);
        sift__free(c->al, comp);
        return nomem(c);
    }
    for (size_t i = 0; !st && i < n_names; i++)
        if (!sift__js_pp_cover(c, s, names[i], &st) && !sift__js_pp_claims(s, names[i]))
            rest[n_rest++] = names[i];
    if (st) {
        sift__free(c->al, rest);
        sift__free(c->al, comp);
        return st;
    }
    int use_comp = json_object_size(pp) == 1 && n_rest == 0 && open_ap && pp_strict(pp);
    json_object_foreach((json_t *)pp, pat, ps)
    {
        if (use_comp && !pat_complement(pat, comp, COMP_CAP) &&
            !sift__js_pat_complement_seq(pat, comp, COMP_CAP))
            use_comp = 0;
    }
    json_object_foreach((json_t *)pp, pat, ps)
    {
        sift__js_ref v;
        char *re = NULL;
        size_t re_len = 0;
        sift_error rerr;
        if ((st = sift__js_push_key(c, "patternProperties")) || (st = sift__js_push_key(c, pat)))
            break;
        st = sift__js_gen(c, ps, &v);
        if (!st && !v.never) {
            st = sift__json_regex_to_gbnf(c->al, pat, strlen(pat), c->max_grammar, &re, &re_len,
                                          &rerr);
            if (st == SIFT_E_NOMEM)
                st = nomem(c);
            else if (st) {
                sift__js_pop(c, mark);
                st = sift__js_push_key(c, "patternProperties");
                if (!st)
                    st = sift__js_unsupported(c, pat, "%s", rerr.message);
                sift__js_pop(c, mark);
                if (st)
                    break;
                continue;
            }
            sift__js_ref keys;
            if (sift__js_pp_class(s)) /* the declared names left out */
                st = sift__js_pp_keys_but(c, s, names, n_names, &keys);
            if (!st && sift__js_pp_class(s) && keys.never) {
                sift__free(c->al, re); /* no key is left to the pattern */
                sift__js_pop(c, mark);
                continue;
            }
            if (!st && sift__js_pp_class(s))
                st = sift__js_printf(c, &b, "%s%s", alts++ ? " | " : "", keys.name);
            else if (!st)
                st = sift__js_printf(c, &b, "%s\"\\\"\" ", alts++ ? " | " : "");
            if (!st && !sift__js_pp_class(s))
                st = sift__js_put(c, &b, re, re_len);
            if (!st && !sift__js_pp_class(s))
                st = sift__js_puts(c, &b, " \"\\\"\"");
            if (!st)
                st = sift__js_printf(c, &b, " %s \":\" %s %s", ws, ws, v.name);
            sift__free(c->al, re);
        }
        sift__js_pop(c, mark);
        if (st)
            break;
    }
    sift__js_ref av;
    av.never = 1;
    if (!st && json_object_size(pp) && !use_comp &&
        ((pp_strict(pp) && (json_object_size(pp) > 1 || (ap ? !json_is_false(ap) : !c->strict))) ||
         (names_may_match(c, pp, rest, n_rest, &st) && !st)))
        st = sift__js_unsupported(c, "patternProperties",
                                  "a key may match both this and a declared property, a "
                                  "second pattern or additionalProperties: not supported");
    if (!st && (json_is_true(ap) || (!ap && !c->strict))) {
        set_name(&av, sift__js_shared(c, SIFT__JS_R_VALUE));
    } else if (!st && json_is_object(ap)) {
        if (!(st = sift__js_push_key(c, "additionalProperties")))
            st = sift__js_gen(c, ap, &av);
        sift__js_pop(c, mark);
    } else if (!st && ap && !json_is_false(ap)) {
        st = sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "additionalProperties",
                           "'additionalProperties' must be a boolean or a schema");
    }
    if (!st && !av.never && use_comp) {
        char *re = NULL;
        size_t re_len = 0;
        sift_error rerr;
        st = sift__json_regex_to_gbnf(c->al, comp, strlen(comp), c->max_grammar, &re, &re_len,
                                      &rerr);
        if (st == SIFT_E_NOMEM)
            st = nomem(c);
        else if (st)
            st = sift__js_unsupported(c, "patternProperties",
                                      "the keys this pattern does not match: %s", rerr.message);
        if (!st && re)
            st = sift__js_printf(c, &b, "%s\"\\\"\" ", alts++ ? " | " : "");
        if (!st && re)
            st = sift__js_put(c, &b, re, re_len);
        if (!st && re)
            st = sift__js_printf(c, &b, " \"\\\"\" %s \":\" %s %s", ws, ws, av.name);
        sift__free(c->al, re);
    } else if (!st && !av.never) {
        sift__js_ref keys;
        /* propertyNames (json_schema_cond.c): only without declared names */
        if (json_object_get(s, "propertyNames") && sift__js_names_by_key_rule(c, s))
            st = sift__js_key_names(c, s, &keys);
        else
            st = sift__js_not_keys(c, names, n_names, &keys);
        if (!st && !keys.never)
            st = sift__js_printf(c, &b, "%s%s %s \":\" %s %s", alts++ ? " | " : "", keys.name, ws,
                                 ws, av.name);
    }
    if (!st && alts)
        st = sift__js_rule(c, x, b.p);
    sift__js_buf_free(c, &b);
    sift__free(c->al, rest);
    sift__free(c->al, comp);
    return st;
}

/* Collects the properties in order and generates their values. */
/* The value of a required name that `properties` does not list: it is
 * an additional property, so additionalProperties decides (false, or
 * absent under strict: no value; the object is then never valid). A
 * patternProperties pattern might claim the name instead: refused. */
static sift_status rest_value(sift__js *c, const json_t *s, sift__js_ref *v)
{
    const json_t *ap = json_object_get(s, "additionalProperties");
    const json_t *pp = json_object_get(s, "patternProperties");
    size_t mark = c->path.n;
    sift_status st = SIFT_OK;
    v->never = 0;
    if (json_object_size(pp))
        return sift__js_unsupported(c, "required",
                                    "a required name that 'properties' does not list, beside "
                                    "'patternProperties': not supported");
    if (json_is_true(ap) || (!ap && !c->strict)) {
        set_name(v, sift__js_shared(c, SIFT__JS_R_VALUE));
    } else if (json_is_object(ap)) {
        if (!(st = sift__js_push_key(c, "additionalProperties")))
            st = sift__js_gen(c, ap, v);
        sift__js_pop(c, mark);
    } else if (!ap || json_is_false(ap)) {
        v->never = 1;
        v->name[0] = '\0';
    } else {
        st = sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "additionalProperties",
                           "'additionalProperties' must be a boolean or a schema");
    }
    return st;
}

static sift_status collect(sift__js *c, const json_t *s, prop **out, size_t *n, int *never)
{
    const json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    if (props && !json_is_object(props))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "properties",
                             "'properties' must be an object");
    if (req && !json_is_array(req))
        return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "required", "'required' must be an array");
    for (size_t i = 0; i < json_array_size(req); i++)
        if (!json_is_string(json_array_get(req, i)))
            return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "required",
                                 "'required' must hold strings");
    size_t cap = json_object_size(props) + json_array_size(req);
    /* the required names as a hash set (name -> true, false once
     * listed), so that both passes below are linear in the names */
    sift_status st = sift__js_work(c, (int64_t)cap);
    if (st)
        return st;
    json_t *req_set = json_object();
    prop *p = sift__calloc(c->al, cap ? cap : 1, sizeof *p);
    for (size_t i = 0; p && req_set && i < json_array_size(req); i++)
        if (json_object_set_new_nocheck(req_set, json_string_value(json_array_get(req, i)),
                                        json_true())) {
            json_decref(req_set);
            req_set = NULL;
        }
    if (!p || !req_set) {
        sift__free(c->al, p);
        json_decref(req_set);
        return nomem(c);
    }
    size_t k = 0, mark = c->path.n;
    const char *key, *upat;
    json_t *v;
    /* a universal pattern's schema applies to every declared name too */
    const json_t *upv = universal_pp(s, &upat);
    json_object_foreach((json_t *)props, key, v)
    {
        p[k].key = key;
        p[k].required = json_object_get(req_set, key) != NULL;
        if (!(st = sift__js_push_key(c, "properties")) && !(st = sift__js_push_key(c, key))) {
            /* a class pattern claiming the name (json_schema_ppcover.c) */
            const json_t *cover = upv ? NULL : sift__js_pp_cover(c, s, key, &st);
            const json_t *claim = upv || cover ? NULL : sift__js_pp_claims(s, key);
            if (claim && sift__js_pp_admits_all(claim))
                claim = NULL;
            json_t *both =
                upv || claim ? json_pack("{s:[OO]}", "allOf", v, upv ? upv : claim) : NULL;
            if (!st)
                st = (upv || claim) && !both ? nomem(c)
                                             : sift__js_gen(c,
                                                            both    ? both
                                                            : cover ? cover
                                                                    : v,
                                                            &p[k].value);
            json_decref(both);
        }
        sift__js_pop(c, mark);
        if (st)
            break;
        if (p[k].value.never && p[k].required)
            *never = 1;
        k++;
    }
    for (size_t i = 0; !st && i < json_array_size(req); i++) {
        const char *name = json_string_value(json_array_get(req, i));
        json_t *first = json_object_get(req_set, name);
        if (json_object_get(props, name) || !json_is_true(first))
            continue;
        if (json_object_set_new_nocheck(req_set, name, json_false())) {
            st = nomem(c);
            break;
        }
        p[k].key = name;
        p[k].required = 1;
        st = rest_value(c, s, &p[k].value);
        if (st)
            break;
        if (p[k].value.never)
            *never = 1;
        k++;
    }
    json_decref(req_set);
    if (st) {
        sift__free(c->al, p);
        return st;
    }
    *out = p;
    *n = k;
    return SIFT_OK;
}

/* "{" ws (X ws ("," ws X ws){a,b})? "}" : a map with count bounds. */
static sift_status gen_map(sift__js *c, const sift__js_ref *x, int64_t lo, int64_t hi, int has_hi,
                           sift__js_ref *r)
{
    const char *ws = sift__js_shared(c, SIFT__JS_R_WS);
    sift__js_buf b = {0};
    sift_status st;
    if (x->never || (has_hi && hi == 0)) {
        if (lo > 0) {
            r->never = 1;
            return SIFT_OK;
        }
        st = sift__js_printf(c, &b, "\"{\" %s \"}\"", ws);
    } else {
        sift__js_ref more;
        char tail[64];
        if ((st = sift__js_new_rule(c, &more)))
            return st;
        int64_t a = lo > 1 ? lo - 1 : 0, bb = hi - 1;
        if (has_hi)
            snprintf(tail, sizeof tail, "{%lld,%lld}", (long long)a, (long long)bb);
        else
            snprintf(tail, sizeof tail, "{%lld,}", (long long)a);
        char body[96];
        snprintf(body, sizeof body, "\",\" %s %s %s", ws, x->name, ws);
        if ((st = sift__js_emit(c, &more, body)))
            return st;
        st = sift__js_printf(c, &b, "\"{\" %s (%s %s %s%s)%s \"}\"", ws, x->name, ws, more.name,
                             tail, lo > 0 ? "" : "?");
    }
    if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    return st;
}

static sift_status check_count(sift__js *c, const char *key, int64_t v)
{
    if (v > SIFT__JS_MAX_REPEAT)
        return sift__js_fail(c, SIFT_E_SCHEMA_LIMIT, key, "'%s' is %lld, over %d", key,
                             (long long)v, SIFT__JS_MAX_REPEAT);
    return SIFT_OK;
}

/* The two chains of the file comment. */
/* The chain above; nonempty: objects with at least one member
 * (minProperties 1 without a required property), the chain's empty ends
 * left out. */
static sift_status gen_chain(sift__js *c, const prop *p, size_t n, const sift__js_ref *x,
                             int nonempty, sift__js_ref *r)
{
    const char *ws = sift__js_shared(c, SIFT__JS_R_WS);
    sift__js_buf b = {0};
    sift_status st = SIFT_OK;
    char after[24] = "", first[24] = "";
    if (!x->never) {
        sift__js_ref a, f;
        char body[160];
        snprintf(body, sizeof body, "(\",\" %s %s %s)*", ws, x->name, ws);
        if ((st = sift__js_rule(c, &a, body)))
            return st;
        snprintf(body, sizeof body, nonempty ? "%s %s %s" : "(%s %s %s)?", x->name, ws, a.name);
        if ((st = sift__js_rule(c, &f, body)))
            return st;
        snprintf(after, sizeof after, "%s", a.name);
        snprintf(first, sizeof first, "%s", f.name);
    }
    size_t first_req = n;
    for (size_t i = 0; i < n; i++)
        if (p[i].required && !p[i].value.never) {
            first_req = i;
            break;
        }
    for (size_t i = n; !st && i-- > 0;) {
        if (p[i].value.never)
            continue;
        sift__js_ref a, f;
        b.n = 0;
        st = sift__js_printf(c, &b, "%s\",\" %s ", p[i].required ? "" : "(", ws);
        if (!st)
            st = kv(c, &b, &p[i]);
        if (!st)
            st = sift__js_printf(c, &b, " %s%s %s", ws, p[i].required ? "" : ")?", after);
        if (!st && i > 0)
            st = sift__js_rule(c, &a, b.p);
        if (!st && i <= first_req) {
            b.n = 0;
            st = kv(c, &b, &p[i]);
            if (!st)
                st = sift__js_printf(c, &b, " %s %s", ws, after);
            if (!st && !p[i].required && (first[0] || !nonempty))
                st = sift__js_printf(c, &b, " | %s", first[0] ? first : "\"\"");
            if (!st)
                st = sift__js_rule(c, &f, b.p);
            if (!st)
                snprintf(first, sizeof first, "%s", f.name);
        }
        if (!st && i > 0)
            snprintf(after, sizeof after, "%s", a.name);
    }
    if (!st && nonempty && !first[0]) {
        r->never = 1; /* no member can appear */
        r->name[0] = '\0';
        sift__js_buf_free(c, &b);
        return SIFT_OK;
    }
    if (!st) {
        b.n = 0;
        st = sift__js_printf(c, &b, "\"{\" %s %s \"}\"", ws, first);
    }
    if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    return st;
}

static sift_status gen_object(sift__js *c, const json_t *s, sift__js_ref *r)
{
    prop *p = NULL;
    size_t n = 0;
    int never = 0, has_lo, has_hi;
    int64_t lo = 0, hi = 0;
    sift_status st = sift__js_get_count(c, s, "minProperties", &lo, &has_lo);
    if (!st)
        st = sift__js_get_count(c, s, "maxProperties", &hi, &has_hi);
    if (!st && has_lo)
        st = check_count(c, "minProperties", lo);
    if (!st && has_hi)
        st = check_count(c, "maxProperties", hi);
    if (!st)
        st = collect(c, s, &p, &n, &never);
    if (st)
        return st;
    const char **names = sift__calloc(c->al, n ? n : 1, sizeof *names);
    if (!names) {
        sift__free(c->al, p);
        return nomem(c);
    }
    size_t n_req = 0;
    for (size_t i = 0; i < n; i++) {
        names[i] = p[i].key;
        n_req += p[i].required;
    }
    sift__js_ref x;
    st = gen_extra(c, s, names, n, &x);
    if (!st && never) {
        r->never = 1;
    } else if (!st && n == 0) {
        st = gen_map(c, &x, has_lo ? lo : 0, hi, has_hi, r);
    } else if (!st) {
        /* minProperties 1 without a required property: non-empty */
        int nonempty = has_lo && lo == 1 && n_req == 0;
        if ((has_lo && lo > (int64_t)n_req && !nonempty) ||
            (has_hi && (!x.never || hi < (int64_t)n)))
            st = sift__js_unsupported(
                c, has_lo && lo > (int64_t)n_req && !nonempty ? "minProperties" : "maxProperties",
                "minProperties/maxProperties with properties that do not "
                "already satisfy them");
        if (!st)
            st = gen_chain(c, p, n, &x, nonempty, r);
    }
    sift__free(c->al, names);
    sift__free(c->al, p);
    return st;
}

/* Whether a patternProperties pattern matches exactly one key, `^name$`
 * with literal characters only (a syntax character may be escaped with
 * a backslash); the name goes to name[] (cap bytes), without escapes. */
static int pat_literal(const char *pat, char *name, size_t cap)
{
    static const char syntax[] = "^$\\.*+?()[]{}|/-";
    size_t len = strlen(pat), k = 0;
    if (len < 2 || pat[0] != '^' || pat[len - 1] != '$')
        return 0;
    for (size_t i = 1; i + 1 < len; i++) {
        char ch = pat[i];
        if (ch == '\\') {
            if (i + 2 >= len || !strchr(syntax, pat[i + 1]))
                return 0;
            ch = pat[++i];
        } else if (strchr("^$\\.*+?()[]{}|", ch)) {
            return 0;
        }
        if (k + 1 >= cap)
            return 0;
        name[k++] = ch;
    }
    name[k] = '\0';
    return 1;
}

/* A schema whose literal patterns (pat_literal) are declared properties:
 * a key matches `^name$` only when it is `name`, so the pattern's schema
 * joins properties/name (an allOf with the declared one), exactly as
 * JSON Schema applies both. *out is a new reference, or NULL when there
 * is no literal pattern (then `s` is used as it is). */
static sift_status literal_pp(sift__js *c, const json_t *s, json_t **out)
{
    const json_t *pp = json_object_get(s, "patternProperties");
    const json_t *props = json_object_get(s, "properties");
    const char *pat;
    json_t *ps;
    char name[256];
    *out = NULL;
    if (!json_is_object(pp) || (props && !json_is_object(props)))
        return SIFT_OK;
    size_t n_lit = 0;
    json_object_foreach((json_t *)pp, pat, ps)
    {
        n_lit += pat_literal(pat, name, sizeof name);
    }
    if (!n_lit)
        return SIFT_OK;
    sift_status st = sift__js_work(c, (int64_t)(json_object_size(pp) + json_object_size(props)));
    if (st)
        return st;
    json_t *s2 = json_copy((json_t *)s);
    json_t *props2 = props ? json_copy((json_t *)props) : json_object();
    json_t *pp2 = json_object();
    int bad = !s2 || !props2 || !pp2;
    json_object_foreach((json_t *)pp, pat, ps)
    {
        if (bad)
            break;
        if (!pat_literal(pat, name, sizeof name)) {
            bad = json_object_set_nocheck(pp2, pat, ps) != 0;
            continue;
        }
        json_t *had = json_object_get(props2, name);
        json_t *v = had ? json_pack("{s:[OO]}", "allOf", had, ps) : json_incref(ps);
        bad = !v || json_object_set_new_nocheck(props2, name, v) != 0;
    }
    if (!bad)
        bad = json_object_set_nocheck(s2, "properties", props2) != 0;
    if (!bad && json_object_size(pp2))
        bad = json_object_set_nocheck(s2, "patternProperties", pp2) != 0;
    else if (!bad)
        json_object_del(s2, "patternProperties");
    json_decref(props2);
    json_decref(pp2);
    if (bad) {
        json_decref(s2);
        return nomem(c);
    }
    *out = s2;
    return SIFT_OK;
}

sift_status sift__js_gen_object(sift__js *c, const json_t *s, sift__js_ref *r)
{
    json_t *lit = NULL;
    sift_status st = literal_pp(c, s, &lit);
    if (st)
        return st;
    st = gen_object(c, lit ? lit : s, r);
    json_decref(lit);
    return st;
}

/* ------------------------------------------------------------------ */
/* Arrays                                                              */
/* ------------------------------------------------------------------ */

/* The rest: R ws ("," ws R ws){a,b} for counts [lo, hi] (has_hi), with
 * `lead` elements before it (then every element has its comma). */
static sift_status gen_rest(sift__js *c, const sift__js_ref *item, int64_t lo, int64_t hi,
                            int has_hi, int lead, sift__js_buf *b)
{
    const char *ws = sift__js_shared(c, SIFT__JS_R_WS);
    if (item->never || (has_hi && hi <= 0))
        return lo > 0 ? SIFT_E_SCHEMA_SYNTAX : sift__js_puts(c, b, "\"\"");
    sift__js_ref more;
    char body[96], rep[48];
    sift_status st = sift__js_new_rule(c, &more);
    if (st)
        return st;
    snprintf(body, sizeof body, "\",\" %s %s %s", ws, item->name, ws);
    if ((st = sift__js_emit(c, &more, body)))
        return st;
    if (lead) {
        if (has_hi)
            snprintf(rep, sizeof rep, "{%lld,%lld}", (long long)lo, (long long)hi);
        else
            snprintf(rep, sizeof rep, "{%lld,}", (long long)lo);
        return sift__js_printf(c, b, "%s%s", more.name, rep);
    }
    int64_t a = lo > 1 ? lo - 1 : 0;
    if (has_hi)
        snprintf(rep, sizeof rep, "{%lld,%lld}", (long long)a, (long long)(hi - 1));
    else
        snprintf(rep, sizeof rep, "{%lld,}", (long long)a);
    return sift__js_printf(c, b, "(%s %s %s%s)%s", item->name, ws, more.name, rep,
                           lo > 0 ? "" : "?");
}

static sift_status item_schemas(sift__js *c, const json_t *s, const json_t **prefix,
                                const json_t **rest)
{
    const json_t *items = json_object_get(s, "items");
    const json_t *pre = json_object_get(s, "prefixItems");
    const json_t *add = json_object_get(s, "additionalItems");
    *prefix = NULL;
    *rest = items;
    if (pre) {
        if (!json_is_array(pre))
            return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, "prefixItems",
                                 "'prefixItems' must be an array");
        *prefix = pre;
    } else if (json_is_array(items)) {
        *prefix = items;
        *rest = add;
    }
    return SIFT_OK;
}

/* uniqueItems: true over items from a finite set: the items schema is an
 * enum or const (with at most a type that every value has, and
 * annotations), or {"type": "boolean"} / {"type": "null"}, of at most
 * MAX_UNIQUE distinct values, each a string, integer, boolean or null;
 * no prefixItems. One rule per set S of values already written:
 *
 *   u(S) ::= "" (when |S| >= minItems) | "," ws v_i ws u(S+i) (i not in S,
 *            |S| < maxItems)
 *
 * the first element without its comma. *vals is NULL when the shape is
 * another one. */
#define MAX_UNIQUE 6
static int scalar_value(const json_t *v)
{
    return json_is_string(v) || json_is_integer(v) || json_is_boolean(v) || json_is_null(v);
}

static int has_type(const json_t *v, const char *t)
{
    return (!strcmp(t, "string") && json_is_string(v)) ||
           ((!strcmp(t, "integer") || !strcmp(t, "number")) && json_is_integer(v)) ||
           (!strcmp(t, "boolean") && json_is_boolean(v)) || (!strcmp(t, "null") && json_is_null(v));
}

static json_t *unique_values(const json_t *s)
{
    const json_t *items = json_object_get(s, "items");
    if (json_object_get(s, "prefixItems") || !json_is_object(items))
        return NULL;
    const json_t *e = json_object_get(items, "enum"), *k = json_object_get(items, "const");
    const json_t *t = json_object_get(items, "type");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)items, key, v)
    {
        if (strcmp(key, "enum") && strcmp(key, "const") && strcmp(key, "type") &&
            !sift__js_is_annotation(key))
            return NULL;
    }
    if ((e && k) || (t && !json_is_string(t)) || (e && !json_is_array(e)))
        return NULL;
    json_t *given = k ? json_pack("[O]", k) : e ? json_incref((json_t *)e) : NULL;
    if (!given && t && !strcmp(json_string_value(t), "boolean"))
        given = json_pack("[bb]", 0, 1);
    else if (!given && t && !strcmp(json_string_value(t), "null"))
        given = json_pack("[n]");
    json_t *out = given ? json_array() : NULL;
    for (size_t i = 0; out && i < json_array_size(given); i++) {
        const json_t *g = json_array_get(given, i);
        int dup = 0;
        if (!scalar_value(g) || (t && !has_type(g, json_string_value(t)))) {
            json_decref(out);
            out = NULL;
            break;
        }
        for (size_t j = 0; !dup && j < json_array_size(out); j++)
            dup = json_equal(json_array_get(out, j), (json_t *)g);
        if (!dup && json_array_append(out, (json_t *)g)) {
            json_decref(out);
            out = NULL;
        }
    }
    json_decref(given);
    if (out && json_array_size(out) > MAX_UNIQUE) {
        json_decref(out);
        out = NULL;
    }
    return out;
}

static sift_status gen_unique(sift__js *c, const json_t *vals, int64_t lo, int64_t hi, int has_hi,
                              sift__js_ref *r)
{
    const char *ws = sift__js_shared(c, SIFT__JS_R_WS);
    size_t k = json_array_size(vals), n_sets = (size_t)1 << k;
    if (!has_hi || hi > (int64_t)k)
        hi = (int64_t)k;
    if (lo > hi) {
        r->never = 1;
        r->name[0] = '\0';
        return SIFT_OK;
    }
    sift__js_ref u[1 << MAX_UNIQUE];
    sift__js_buf b = {0};
    sift_status st = sift__js_work(c, (int64_t)(n_sets * k));
    for (size_t m = 0; !st && m < n_sets; m++)
        if (__builtin_popcount((unsigned)m) <= hi)
            st = sift__js_new_rule(c, &u[m]);
    /* u(S) for S != {}; the empty set's rule is the array's body */
    for (size_t m = n_sets; !st && m-- > 0;) {
        int64_t size = __builtin_popcount((unsigned)m);
        if (size > hi)
            continue;
        int alts = 0;
        b.n = 0;
        if (size >= lo) {
            st = sift__js_puts(c, &b, "\"\"");
            alts++;
        }
        for (size_t i = 0; !st && i < k && size < hi; i++) {
            if (m & ((size_t)1 << i))
                continue;
            st = sift__js_printf(c, &b, "%s%s", alts++ ? " | " : "", m ? "\",\" " : "");
            if (!st && m)
                st = sift__js_printf(c, &b, "%s ", ws);
            if (!st)
                st = sift__js_const_value(c, &b, json_array_get(vals, i));
            if (!st)
                st = sift__js_printf(c, &b, " %s %s", ws, u[m | ((size_t)1 << i)].name);
        }
        if (!st)
            st = sift__js_emit(c, &u[m], b.p);
    }
    if (!st) {
        b.n = 0;
        st = sift__js_printf(c, &b, "\"[\" %s %s \"]\"", ws, u[0].name);
    }
    if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    return st;
}

sift_status sift__js_gen_array(sift__js *c, const json_t *s, sift__js_ref *r)
{
    const char *ws = sift__js_shared(c, SIFT__JS_R_WS);
    int64_t lo = 0, hi = 0;
    int has_lo, has_hi;
    const json_t *prefix, *rest;
    sift_status st = sift__js_get_count(c, s, "minItems", &lo, &has_lo);
    if (!st)
        st = sift__js_get_count(c, s, "maxItems", &hi, &has_hi);
    if (!st && has_lo)
        st = check_count(c, "minItems", lo);
    if (!st && has_hi)
        st = check_count(c, "maxItems", hi);
    if (!st)
        st = item_schemas(c, s, &prefix, &rest);
    if (!st && json_is_true(json_object_get(s, "uniqueItems"))) {
        json_t *vals = unique_values(s);
        if (vals) {
            st = gen_unique(c, vals, has_lo ? lo : 0, hi, has_hi, r);
            json_decref(vals);
            return st;
        }
        st = sift__js_unsupported(c, "uniqueItems", "'uniqueItems': true is not supported");
    }
    if (st)
        return st;
    if (has_hi && hi < lo) {
        r->never = 1;
        return SIFT_OK;
    }
    size_t mark = c->path.n;
    sift__js_ref item;
    set_name(&item, sift__js_shared(c, SIFT__JS_R_VALUE));
    if (rest) {
        const char *rk = prefix && !json_object_get(s, "prefixItems") ? "additionalItems" : "items";
        if (!(st = sift__js_push_key(c, rk)))
            st = sift__js_gen(c, rest, &item);
        sift__js_pop(c, mark);
        if (st)
            return st;
    }
    size_t k = json_array_size(prefix);
    if (has_hi && (int64_t)k > hi)
        k = (size_t)hi;
    sift__js_buf b = {0};
    /* t(k): the rest after k fixed elements */
    int64_t rlo = lo > (int64_t)k ? lo - (int64_t)k : 0, rhi = has_hi ? hi - (int64_t)k : 0;
    st = gen_rest(c, &item, rlo, rhi, has_hi, k > 0, &b);
    if (st == SIFT_E_SCHEMA_SYNTAX) { /* the rest must hold items but admits none */
        sift__js_buf_free(c, &b);
        r->never = 1;
        return SIFT_OK;
    }
    sift__js_ref t;
    if (!st)
        st = sift__js_rule(c, &t, b.p);
    const char *pk = json_object_get(s, "prefixItems") ? "prefixItems" : "items";
    for (size_t i = k; !st && i-- > 0;) {
        sift__js_ref pi;
        if (!(st = sift__js_push_key(c, pk)) && !(st = sift__js_push_index(c, i)))
            st = sift__js_gen(c, json_array_get(prefix, i), &pi);
        sift__js_pop(c, mark);
        if (st)
            break;
        b.n = 0;
        int optional = (int64_t)i >= lo;
        if (pi.never) {
            if (!optional) {
                r->never = 1;
                sift__js_buf_free(c, &b);
                return SIFT_OK;
            }
            st = sift__js_rule(c, &t, "\"\"");
            continue;
        }
        st = sift__js_printf(c, &b, "%s%s%s%s%s %s %s", optional ? "(" : "", i ? "\",\" " : "",
                             i ? ws : "", i ? " " : "", pi.name, ws, t.name);
        if (!st && optional)
            st = sift__js_puts(c, &b, ")?");
        if (!st)
            st = sift__js_rule(c, &t, b.p);
    }
    if (!st) {
        b.n = 0;
        st = sift__js_printf(c, &b, "\"[\" %s %s \"]\"", ws, t.name);
    }
    if (!st)
        st = sift__js_rule(c, r, b.p);
    sift__js_buf_free(c, &b);
    return st;
}

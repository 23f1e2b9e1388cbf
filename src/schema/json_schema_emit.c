/*
 * json_schema_emit.c - the converter's output: GBNF text in growable
 * buffers (every byte counted against max_grammar_bytes), rule names,
 * literals, the shared rules every schema grammar may use, the exclusion
 * of known keys and the exact grammar of a constant JSON value.
 *
 * Conventions of the generated grammar: a rule for a value matches the
 * value's JSON text without whitespace around it; containers put `ws`
 * after "{" and "[", around ":" and before "," and the closing bracket.
 * The shared rules:
 *
 *   ws      ::= [ \t\n\r]{0,N}        (flexible; "" when compact)
 *   char    ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
 *   string  ::= "\"" char* "\""
 *   integer ::= "-"? ("0" | [1-9] [0-9]*) ("." "0"+)?    (1.0 is an integer
 *                                      from draft 6 on; draft 4: no fraction)
 *   number  ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
 *   value   ::= object | array | string | number | "true" | "false" | "null"
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "json_schema.h"

sift_status sift__js_put(sift__js *c, sift__js_buf *b, const char *s, size_t n)
{
    if (n > c->max_grammar || b->n > c->max_grammar - n)
        return sift__js_fail(c, SIFT_E_SCHEMA_LIMIT, NULL,
                             "the grammar would exceed %zu bytes (max_grammar_bytes)",
                             c->max_grammar);
    if (b->n + n + 1 > b->cap && sift__reserve(c->al, &b->p, &b->cap, b->n, b->n + n + 1, 1, 256))
        return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return SIFT_OK;
}

sift_status sift__js_puts(sift__js *c, sift__js_buf *b, const char *s)
{
    return sift__js_put(c, b, s, strlen(s));
}

/* Whether fmt's only conversions are %s (most of the grammar's text:
 * names and keywords), which sift__js_printf then writes itself. */
static int only_s(const char *fmt)
{
    for (const char *p = strchr(fmt, '%'); p; p = strchr(p + 2, '%'))
        if (p[1] != 's')
            return 0;
    return 1;
}

sift_status sift__js_printf(sift__js *c, sift__js_buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap, ap2;
    va_start(ap, fmt);
    if (only_s(fmt)) {
        sift_status st = SIFT_OK;
        for (const char *p = fmt; !st && *p;) {
            const char *q = strchr(p, '%');
            if (!q) {
                st = sift__js_puts(c, b, p);
                break;
            }
            if (q > p)
                st = sift__js_put(c, b, p, (size_t)(q - p));
            const char *a = va_arg(ap, const char *);
            if (!st)
                st = sift__js_puts(c, b, a ? a : "(null)");
            p = q + 2;
        }
        va_end(ap);
        return st;
    }
    va_copy(ap2, ap);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sift_status st;
    if (n < 0) {
        st = sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, NULL, "unprintable text");
    } else if ((size_t)n < sizeof tmp) {
        st = sift__js_put(c, b, tmp, (size_t)n);
    } else { /* long keys and names */
        char *big = sift__malloc(c->al, (size_t)n + 1, 1);
        if (!big) {
            st = sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
        } else {
            vsnprintf(big, (size_t)n + 1, fmt, ap2);
            st = sift__js_put(c, b, big, (size_t)n);
            sift__free(c->al, big);
        }
    }
    va_end(ap2);
    return st;
}

sift_status sift__js_lit(sift__js *c, sift__js_buf *b, const char *s, size_t n)
{
    sift_status st = sift__js_put(c, b, "\"", 1);
    for (size_t i = 0; !st && i < n;) {
        size_t j = i; /* a run written as it is */
        while (j < n && s[j] != '"' && s[j] != '\\' && (unsigned char)s[j] >= 0x20 && s[j] != 0x7F)
            j++;
        if (j > i) {
            st = sift__js_put(c, b, s + i, j - i);
            i = j;
            continue;
        }
        unsigned char ch = (unsigned char)s[i++];
        if (ch == '"')
            st = sift__js_put(c, b, "\\\"", 2);
        else if (ch == '\\')
            st = sift__js_put(c, b, "\\\\", 2);
        else
            st = sift__js_printf(c, b, "\\x%02X", ch);
    }
    return st ? st : sift__js_put(c, b, "\"", 1);
}

void sift__js_buf_free(sift__js *c, sift__js_buf *b)
{
    sift__free(c->al, b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

sift_status sift__js_new_rule(sift__js *c, sift__js_ref *r)
{
    sift_status st = sift__js_work(c, 1);
    if (st)
        return st;
    r->never = 0;
    snprintf(r->name, sizeof r->name, "s%ld", (long)++c->n_rules);
    return SIFT_OK;
}

sift_status sift__js_emit(sift__js *c, const sift__js_ref *r, const char *body)
{
    sift_status st = sift__js_puts(c, &c->out, r->name);
    if (!st)
        st = sift__js_put(c, &c->out, " ::= ", 5);
    if (!st)
        st = sift__js_puts(c, &c->out, body);
    return st ? st : sift__js_put(c, &c->out, "\n", 1);
}

sift_status sift__js_rule(sift__js *c, sift__js_ref *r, const char *body)
{
    sift_status st = sift__js_new_rule(c, r);
    return st ? st : sift__js_emit(c, r, body);
}

/* ------------------------------------------------------------------ */
/* Shared rules                                                        */
/* ------------------------------------------------------------------ */

static const struct {
    unsigned bit, needs;
    const char *name, *body;
} shared[] = {
    {SIFT__JS_R_WS, 0, "ws", NULL},
    {SIFT__JS_R_CHAR, 0, "char",
     "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
     "[0-9a-fA-F]{4})"},
    {SIFT__JS_R_STRING, SIFT__JS_R_CHAR, "string", "\"\\\"\" char* \"\\\"\""},
    {SIFT__JS_R_INTEGER, 0, "integer", "\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" \"0\"+)?"},
    {SIFT__JS_R_NUMBER, 0, "number",
     "\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?"},
    {SIFT__JS_R_BOOLEAN, 0, "boolean", "\"true\" | \"false\""},
    {SIFT__JS_R_NULL, 0, "null", "\"null\""},
    {SIFT__JS_R_VALUE,
     SIFT__JS_R_OBJECT | SIFT__JS_R_ARRAY | SIFT__JS_R_STRING | SIFT__JS_R_NUMBER |
         SIFT__JS_R_BOOLEAN | SIFT__JS_R_NULL,
     "value", "object | array | string | number | boolean | null"},
    {SIFT__JS_R_OBJECT, SIFT__JS_R_WS | SIFT__JS_R_STRING | SIFT__JS_R_VALUE, "object",
     "\"{\" ws (string ws \":\" ws value ws (\",\" ws string ws \":\" ws value ws)*)? \"}\""},
    {SIFT__JS_R_ARRAY, SIFT__JS_R_WS | SIFT__JS_R_VALUE, "array",
     "\"[\" ws (value ws (\",\" ws value ws)*)? \"]\""},
};

const char *sift__js_shared(sift__js *c, unsigned which)
{
    c->used |= which;
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
        if (shared[i].bit == which)
            return shared[i].name;
    return "value";
}

sift_status sift__js_emit_shared(sift__js *c)
{
    const size_t n = sizeof shared / sizeof shared[0];
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < n; i++)
            if ((c->used & shared[i].bit) && (c->used | shared[i].needs) != c->used) {
                c->used |= shared[i].needs;
                changed = 1;
            }
    }
    sift_status st = SIFT_OK;
    for (size_t i = 0; !st && i < n; i++) {
        if (!(c->used & shared[i].bit))
            continue;
        if (shared[i].bit == SIFT__JS_R_WS)
            st = c->flexible && c->max_ws > 0
                     ? sift__js_printf(c, &c->out, "ws ::= [ \\t\\n\\r]{0,%d}\n", (int)c->max_ws)
                     : sift__js_puts(c, &c->out, "ws ::= \"\"\n");
        else if (shared[i].bit == SIFT__JS_R_INTEGER && !c->int_fraction)
            st = sift__js_puts(c, &c->out, "integer ::= \"-\"? (\"0\" | [1-9] [0-9]*)\n");
        else
            st = sift__js_printf(c, &c->out, "%s ::= %s\n", shared[i].name, shared[i].body);
    }
    return st;
}

/* ------------------------------------------------------------------ */
/* Keys other than a given set                                         */
/* ------------------------------------------------------------------ */

/* A trie over code points; node 0 is the root. A node's children are
 * a list (the order of the rules), found by (parent, code point) in an
 * open-addressing table `slot` of node indices (0 = empty: the root is
 * nobody's child), so a node with many children costs no list walk. */
typedef struct trie_node {
    uint32_t cp;
    int32_t child, next, parent; /* first child, next sibling; -1 = none */
    int terminal;
    sift__js_ref rule;
} trie_node;

typedef struct trie {
    trie_node *t;
    size_t n, cap;
    int32_t *slot;
    size_t mask; /* slots - 1; slots >= 2 * nodes (every byte of the keys
                  * can be a node) */
} trie;

static size_t trie_hash(int32_t parent, uint32_t cp, size_t mask)
{
    uint64_t h = ((uint64_t)(uint32_t)parent << 32 | cp) * 0x9E3779B97F4A7C15u;
    return (size_t)(h ^ (h >> 31)) & mask;
}

static sift_status trie_add(sift__js *c, trie *tr, const char *key)
{
    int32_t at = 0;
    size_t len = strlen(key);
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = sift__utf8_decode((const unsigned char *)key + i, len - i, &cp);
        if (k == 0)
            return sift__js_fail(c, SIFT_E_SCHEMA_SYNTAX, NULL, "a key is not UTF-8");
        i += k;
        size_t h = trie_hash(at, cp, tr->mask);
        int32_t ch;
        while ((ch = tr->slot[h]) != 0 && (tr->t[ch].parent != at || tr->t[ch].cp != cp))
            h = (h + 1) & tr->mask;
        if (ch == 0) {
            if (sift__reserve(c->al, &tr->t, &tr->cap, tr->n, tr->n + 1, sizeof *tr->t, 16))
                return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
            ch = (int32_t)tr->n++;
            tr->t[ch] = (trie_node){cp, -1, tr->t[at].child, at, 0, {{0}, 0}};
            tr->t[at].child = ch;
            tr->slot[h] = ch;
        }
        at = ch;
    }
    tr->t[at].terminal = 1;
    return sift__js_work(c, 1);
}

/* A code point as a GBNF class escape (\uXXXX or \UXXXXXXXX), written
 * by hand: this runs once per trie edge. */
static sift_status put_cp(sift__js *c, sift__js_buf *b, uint32_t cp)
{
    static const char hexd[] = "0123456789ABCDEF";
    char e[10];
    int digits = cp <= 0xFFFF ? 4 : 8;
    e[0] = '\\';
    e[1] = digits == 4 ? 'u' : 'U';
    for (int i = 0; i < digits; i++)
        e[2 + i] = hexd[(cp >> (4 * (digits - 1 - i))) & 15];
    return sift__js_put(c, b, e, (size_t)digits + 2);
}

/* Keys are told apart by their decoded value, so the grammar of other
 * keys admits one spelling per key: the canonical one, which
 * json_string_lit also writes for declared names (a character raw unless
 * JSON requires an escape: \" \\ \b \t \n \f \r, other control
 * characters as \u00xx in lowercase). A key written otherwise ("f\u006fo")
 * is rejected, so no spelling of a declared name passes as another key.
 * The trie is over code points; an edge for '"', '\' or a control
 * character is its canonical escape. */
#define KEY_ESC "\"\\\\\" [\"\\\\bfnrt] | \"\\\\u00\" (\"0\" [0-7bef] | \"1\" [0-9a-f])"

static int needs_escape(uint32_t cp)
{
    return cp < 0x20 || cp == '"' || cp == '\\';
}

/* The canonical escape of cp (needs_escape) as a GBNF literal. */
static sift_status put_escape(sift__js *c, sift__js_buf *b, uint32_t cp)
{
    static const char shortc[] = "\b\t\n\f\r\"\\";
    static const char shortl[] = "btnfr\"\\";
    char e[8];
    const char *q = cp ? strchr(shortc, (int)cp) : NULL;
    if (q)
        snprintf(e, sizeof e, "\\%c", shortl[q - shortc]);
    else
        snprintf(e, sizeof e, "\\u%04x", (unsigned)cp);
    return sift__js_lit(c, b, e, strlen(e));
}

/* Emits the rule of node `at` into `b` (reused). Children are created
 * after their parents, so visiting nodes from the last created names
 * every child's rule before its parent refers to it. Leaves that end a
 * key all have the same rule, made once per conversion; so is the
 * escape alternative when no child is an escape (any escape then leaves
 * the known keys). */
static sift_status trie_node_rule(sift__js *c, trie_node *t, int32_t at, sift__js_buf *b)
{
    if (t[at].child < 0 && t[at].terminal && c->leaf.name[0]) {
        t[at].rule = c->leaf;
        return SIFT_OK;
    }
    sift_status st = SIFT_OK;
    if (!c->key_char.name[0])
        st = sift__js_rule(c, &c->key_char, "[^\"\\\\\\x00-\\x1F] | " KEY_ESC);
    const char *ch = c->key_char.name;
    if (!st && !c->key_escape.name[0]) {
        char body[160];
        snprintf(body, sizeof body, "(" KEY_ESC ") %s*", ch);
        st = sift__js_rule(c, &c->key_escape, body);
    }
    int esc_child = 0;
    for (int32_t k = t[at].child; k >= 0; k = t[k].next)
        esc_child |= needs_escape(t[k].cp);
    b->n = 0;
    if (!st)
        st = sift__js_puts(c, b, "[^\"\\\\\\x00-\\x1F");
    for (int32_t k = t[at].child; !st && k >= 0; k = t[k].next)
        if (!needs_escape(t[k].cp))
            st = put_cp(c, b, t[k].cp);
    if (!st)
        st = sift__js_puts(c, b, "] ");
    if (!st)
        st = sift__js_puts(c, b, ch);
    if (!st)
        st = sift__js_puts(c, b, "*");
    if (!st && !esc_child) {
        st = sift__js_puts(c, b, " | ");
        if (!st)
            st = sift__js_puts(c, b, c->key_escape.name);
    }
    /* an escape child: every other escape, one alternative each */
    if (!st && esc_child)
        st = sift__js_work(c, 34);
    for (uint32_t e = 0; !st && esc_child && e < 0x60; e++) {
        int child = 0;
        if (!needs_escape(e))
            continue;
        for (int32_t k = t[at].child; k >= 0; k = t[k].next)
            child |= t[k].cp == e;
        if (child)
            continue;
        st = sift__js_puts(c, b, " | ");
        if (!st)
            st = put_escape(c, b, e);
        if (!st)
            st = sift__js_printf(c, b, " %s*", ch);
    }
    for (int32_t k = t[at].child; !st && k >= 0; k = t[k].next) {
        if (needs_escape(t[k].cp)) {
            st = sift__js_puts(c, b, " | ");
            if (!st)
                st = put_escape(c, b, t[k].cp);
            if (!st)
                st = sift__js_puts(c, b, " ");
        } else {
            st = sift__js_puts(c, b, " | [");
            if (!st)
                st = put_cp(c, b, t[k].cp);
            if (!st)
                st = sift__js_puts(c, b, "] ");
        }
        if (!st)
            st = sift__js_puts(c, b, t[k].rule.name);
    }
    if (!st && !t[at].terminal)
        st = sift__js_puts(c, b, " | \"\"");
    if (!st)
        st = sift__js_rule(c, &t[at].rule, b->p);
    if (!st && t[at].child < 0 && t[at].terminal)
        c->leaf = t[at].rule;
    return st;
}

sift_status sift__js_not_keys(sift__js *c, const char *const *keys, size_t n, sift__js_ref *r)
{
    trie tr = {0};
    size_t bytes = 1, slots = 16;
    for (size_t i = 0; i < n; i++)
        bytes += strlen(keys[i]);
    while (slots < 2 * bytes)
        slots *= 2;
    sift_status st = sift__js_work(c, (int64_t)(bytes / 16));
    if (st)
        return st;
    tr.slot = sift__calloc(c->al, slots, sizeof *tr.slot);
    tr.mask = slots - 1;
    if (!tr.slot || sift__reserve(c->al, &tr.t, &tr.cap, 0, 1, sizeof *tr.t, 16)) {
        sift__free(c->al, tr.slot);
        return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
    }
    tr.t[tr.n++] = (trie_node){0, -1, -1, -1, 0, {{0}, 0}};
    for (size_t i = 0; !st && i < n; i++)
        st = trie_add(c, &tr, keys[i]);
    sift__free(c->al, tr.slot);
    trie_node *t = tr.t;
    size_t tn = tr.n;
    sift__js_buf b = {0};
    for (size_t i = tn; !st && i-- > 0;)
        st = trie_node_rule(c, t, (int32_t)i, &b);
    sift__js_buf_free(c, &b);
    if (!st) {
        char body[64];
        snprintf(body, sizeof body, "\"\\\"\" %s \"\\\"\"", t[0].rule.name);
        st = sift__js_rule(c, r, body);
    }
    sift__free(c->al, t);
    return st;
}

/* ------------------------------------------------------------------ */
/* Constants                                                           */
/* ------------------------------------------------------------------ */

/* The JSON text of a string (the escapes jansson would write). */
static sift_status json_string_lit(sift__js *c, sift__js_buf *b, const char *s, size_t n)
{
    sift__js_buf j = {0};
    sift_status st = sift__js_put(c, &j, "\"", 1);
    for (size_t i = 0; !st && i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *e = ch == '"'    ? "\\\""
                        : ch == '\\' ? "\\\\"
                        : ch == '\n' ? "\\n"
                        : ch == '\r' ? "\\r"
                        : ch == '\t' ? "\\t"
                        : ch == '\b' ? "\\b"
                        : ch == '\f' ? "\\f"
                                     : NULL;
        if (e)
            st = sift__js_puts(c, &j, e);
        else if (ch < 0x20)
            st = sift__js_printf(c, &j, "\\u%04x", ch);
        else
            st = sift__js_put(c, &j, (const char *)&ch, 1);
    }
    if (!st)
        st = sift__js_put(c, &j, "\"", 1);
    if (!st)
        st = sift__js_lit(c, b, j.p, j.n);
    sift__js_buf_free(c, &j);
    return st;
}

/* A number: its shortest round-trip text; an integral value may also be
 * written with a zero fraction (2 and 2.0 are the same number). */
static sift_status number_lit(sift__js *c, sift__js_buf *b, const json_t *v)
{
    char num[40];
    int integral;
    if (json_is_integer(v)) {
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        integral = 1;
    } else {
        double d = json_real_value(v);
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(num, sizeof num, "%.*g", prec, d);
            if (strtod(num, NULL) == d)
                break;
        }
        integral = !strpbrk(num, ".eEn");
    }
    sift_status st = sift__js_lit(c, b, num, strlen(num));
    if (!st && integral)
        st = sift__js_puts(c, b, " (\".\" \"0\"+)?");
    return st;
}

sift_status sift__js_const_value(sift__js *c, sift__js_buf *b, const json_t *v)
{
    sift_status st = sift__js_work(c, 1);
    if (st)
        return st;
    if (++c->depth > SIFT__JS_MAX_DEPTH) {
        c->depth--;
        return sift__js_fail(c, SIFT_E_SCHEMA_LIMIT, NULL, "a constant nested over %d levels",
                             SIFT__JS_MAX_DEPTH);
    }
    const char *ws = sift__js_shared(c, SIFT__JS_R_WS);
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *val;
        int first = 1;
        st = sift__js_printf(c, b, "\"{\" %s", ws);
        json_object_foreach((json_t *)v, key, val)
        {
            if (!st && !first)
                st = sift__js_printf(c, b, " \",\" %s", ws);
            first = 0;
            if (!st)
                st = sift__js_put(c, b, " ", 1);
            if (!st)
                st = json_string_lit(c, b, key, strlen(key));
            if (!st)
                st = sift__js_printf(c, b, " %s \":\" %s ", ws, ws);
            if (!st)
                st = sift__js_const_value(c, b, val);
            if (!st)
                st = sift__js_printf(c, b, " %s", ws);
            if (st)
                break;
        }
        if (!st)
            st = sift__js_puts(c, b, " \"}\"");
        break;
    }
    case JSON_ARRAY: {
        st = sift__js_printf(c, b, "\"[\" %s", ws);
        for (size_t i = 0; !st && i < json_array_size(v); i++) {
            if (i)
                st = sift__js_printf(c, b, " \",\" %s", ws);
            if (!st)
                st = sift__js_put(c, b, " ", 1);
            if (!st)
                st = sift__js_const_value(c, b, json_array_get(v, i));
            if (!st)
                st = sift__js_printf(c, b, " %s", ws);
        }
        if (!st)
            st = sift__js_puts(c, b, " \"]\"");
        break;
    }
    case JSON_STRING:
        st = json_string_lit(c, b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
    case JSON_REAL: st = number_lit(c, b, v); break;
    case JSON_TRUE: st = sift__js_puts(c, b, "\"true\""); break;
    case JSON_FALSE: st = sift__js_puts(c, b, "\"false\""); break;
    case JSON_NULL: st = sift__js_puts(c, b, "\"null\""); break;
    }
    c->depth--;
    return st;
}

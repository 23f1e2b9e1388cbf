/*
 * tree.c - YAML bytes to a small bounded tree with positions.
 *
 * What it owns: the UTF-8 check, the libyaml event loop and the tree it
 * builds. Positions come from the line table (source.c), diagnostics go
 * to the sink (diag.c).
 *
 * Invariants and bounds:
 * - The input is checked as UTF-8 here, before libyaml sees it, so an
 *   invalid byte is reported at its own line:col (libyaml's reader only
 *   gives an offset, and its marks are 0 for reader errors).
 * - Nesting is counted on parser events (libyaml's own bookkeeping of
 *   nested flow collections is quadratic, so the loop stops at
 *   max_depth + 1 open collections, long before that matters), nodes and
 *   anchors are counted, aliases are rejected (no expansion, so no
 *   billion laughs and no cycles), tags and a second document are
 *   rejected. No recursion: the open collections are an explicit stack of
 *   at most max_depth entries.
 * - Positions: libyaml marks are 0-based lines and columns counted in
 *   characters; they are turned into 1-based line:col and a byte offset
 *   through the line table, which counts line breaks exactly as libyaml
 *   does (\n, \r\n, \r, U+0085, U+2028, U+2029).
 * - libyaml allocates with malloc (it has no allocator hook); every node
 *   and value here goes through the config's allocator. libyaml's memory
 *   is released before sift__cfg_parse_tree returns.
 */
#include <stdio.h>
#include <yaml.h>

#include "config_internal.h"

/* ------------------------------------------------------------------ */
/* The event loop                                                      */
/* ------------------------------------------------------------------ */

static sift_status add_node(sift_config *cfg, cfg_tree *t, uint32_t *out)
{
    if (t->n == UINT32_MAX) /* CFG_NONE; node indices are 32-bit */
        return SIFT_E_NOMEM;
    if (sift__reserve(&cfg->al, &t->nodes, &t->cap, t->n, (size_t)t->n + 1, sizeof *t->nodes, 64))
        return SIFT_E_NOMEM;
    cfg_node *n = &t->nodes[t->n];
    memset(n, 0, sizeof *n);
    n->first = n->next = CFG_NONE;
    *out = t->n++;
    return SIFT_OK;
}

static sift_status mark_diag(sift_config *cfg, sift_status code, yaml_mark_t m, const char *fmt,
                             const char *a)
{
    size_t off = sift__cfg_offset(&cfg->src, m.line, m.column);
    return sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, code, (int64_t)off, fmt, a);
}

/* libyaml's limit on an implicit ("simple") key: the ':' must come at most
 * 1024 characters after the key's first one (the YAML 1.1 spec's limit).
 * A longer key fails with a message that depends on where it stands
 * ("could not find expected ':'", "mapping values are not allowed ...",
 * "did not find expected ',' or '}'"), none of which names the cause, and
 * each at the ':'. So the cause is found from the text: if the byte at the
 * failure is a ':' and the key before it (from a quote, a line start, a
 * flow indicator or an earlier ": ", past "- " and "? ") is longer than
 * 1024 characters, its length and start are returned (0 otherwise). */
static size_t long_simple_key(const cfg_source *src, size_t colon, size_t *start)
{
    const unsigned char *s = (const unsigned char *)src->data;
    if (colon >= src->len || s[colon] != ':' || colon == 0)
        return 0;
    size_t b = colon;
    while (b > 0 && (s[b - 1] == ' ' || s[b - 1] == '\t'))
        b--;
    if (b > 0 && (s[b - 1] == '"' || s[b - 1] == '\'')) {
        unsigned char q = s[b - 1];
        size_t i = b - 1;
        while (i > 0 && s[i - 1] != '\n' && s[i - 1] != '\r') {
            i--;
            if (s[i] == q && !(q == '"' && i > 0 && s[i - 1] == '\\'))
                break;
        }
        b = i;
    } else {
        while (b > 0) {
            unsigned char c = s[b - 1];
            if (c == '\n' || c == '\r' || c == '{' || c == '[' || c == ',' ||
                (c == ':' && (s[b] == ' ' || s[b] == '\t')))
                break;
            b--;
        }
        for (;;) { /* indentation and block indicators */
            while (b < colon && (s[b] == ' ' || s[b] == '\t'))
                b++;
            if (b + 1 < colon && (s[b] == '-' || s[b] == '?') && s[b + 1] == ' ')
                b += 2;
            else
                break;
        }
    }
    size_t chars = 0;
    for (size_t i = b; i < colon; i++)
        chars += (s[i] & 0xC0) != 0x80;
    if (chars <= 1024)
        return 0;
    *start = b;
    return chars;
}

/* Reports a libyaml failure as a diagnostic with hints. */
static sift_status yaml_failure(sift_config *cfg, yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR)
        return SIFT_E_NOMEM;
    const char *problem = p->problem ? p->problem : "syntax error";
    char msg[512];
    size_t off;
    if (p->error == YAML_READER_ERROR) {
        off = p->problem_offset;
        if (p->problem_value >= 0)
            snprintf(msg, sizeof msg, "%s (#x%X)", problem, (unsigned)p->problem_value);
        else
            snprintf(msg, sizeof msg, "%s", problem);
    } else {
        off = sift__cfg_offset(&cfg->src, p->problem_mark.line, p->problem_mark.column);
        size_t n = strlen(problem);
        snprintf(msg, sizeof msg, "%s", problem);
        if (p->context) {
            int32_t l, c;
            size_t coff = sift__cfg_offset(&cfg->src, p->context_mark.line, p->context_mark.column);
            sift__cfg_linecol(&cfg->src, coff, &l, &c);
            snprintf(msg + n, sizeof msg - n, " (%s at %d:%d)", p->context, (int)l, (int)c);
        }
        n = strlen(msg);
        size_t kstart = 0, klen;
        if (off < cfg->src.len && cfg->src.data[off] == '\t') {
            snprintf(msg + n, sizeof msg - n, "; tabs cannot indent YAML, use spaces");
        } else if ((klen = long_simple_key(&cfg->src, off, &kstart)) > 0) {
            int32_t l, c;
            sift__cfg_linecol(&cfg->src, kstart, &l, &c);
            snprintf(msg + n, sizeof msg - n,
                     "; the key at %d:%d is %zu characters long, and a key written without "
                     "'? ' is at most 1024 (libyaml's simple-key limit)",
                     (int)l, (int)c, klen);
        }
    }
    return sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_SYNTAX, (int64_t)off, "%s", msg);
}

static sift_scalar_style style_of(yaml_scalar_style_t s)
{
    switch (s) {
    case YAML_SINGLE_QUOTED_SCALAR_STYLE: return SIFT_SCALAR_SINGLE_QUOTED;
    case YAML_DOUBLE_QUOTED_SCALAR_STYLE: return SIFT_SCALAR_DOUBLE_QUOTED;
    case YAML_LITERAL_SCALAR_STYLE: return SIFT_SCALAR_LITERAL;
    case YAML_FOLDED_SCALAR_STYLE: return SIFT_SCALAR_FOLDED;
    default: return SIFT_SCALAR_PLAIN;
    }
}

typedef struct loop_state {
    uint32_t *stack; /* open collections, at most max_depth */
    uint32_t *last;  /* last child of each open collection */
    int32_t depth;
    int32_t anchors;
    int docs;
} loop_state;

/* Links node `id` under the open collection (or as the root). */
static void attach(cfg_tree *t, loop_state *ls, uint32_t id)
{
    if (ls->depth == 0) {
        if (t->root == CFG_NONE)
            t->root = id;
        return;
    }
    uint32_t parent = ls->stack[ls->depth - 1];
    cfg_node *pn = &t->nodes[parent];
    if (pn->first == CFG_NONE)
        pn->first = id;
    else
        t->nodes[ls->last[ls->depth - 1]].next = id;
    ls->last[ls->depth - 1] = id;
    pn->n_children++;
}

/* Common checks of a node event: anchor budget and tags. Returns 1 to
 * stop the loop (a limit), 0 to go on; *bad is set for a tagged node. */
static int node_checks(sift_config *cfg, loop_state *ls, yaml_mark_t m, const yaml_char_t *anchor,
                       const yaml_char_t *tag, int *bad, sift_status *st)
{
    *bad = 0;
    if (anchor && ++ls->anchors > cfg->params.max_anchors) {
        char lim[32];
        snprintf(lim, sizeof lim, "%d", (int)cfg->params.max_anchors);
        *st =
            mark_diag(cfg, SIFT_E_CONFIG_LIMIT, m,
                      "more than %s anchors (aliases are not supported; anchors are ignored)", lim);
        return 1;
    }
    if (tag) {
        /* Show the short form users write: "!!str", not the full URI. */
        const char *t = (const char *)tag;
        char shown[128];
        if (!strncmp(t, "tag:yaml.org,2002:", 18))
            snprintf(shown, sizeof shown, "!!%s", t + 18);
        else
            snprintf(shown, sizeof shown, "%s", t);
        *st = mark_diag(cfg, SIFT_E_CONFIG_VALUE, m,
                        "tags are not supported ('%s'); write the value without it", shown);
        *bad = 1;
    }
    return 0;
}

/* Rejects input libyaml would misread: a UTF-16 byte order mark, invalid
 * UTF-8, a NUL byte. 1 when rejected, with the status to return in *st. */
static int input_rejected(sift_config *cfg, sift_status *st)
{
    const cfg_source *src = &cfg->src;
    const unsigned char *p = (const unsigned char *)src->data;
    if (src->len >= 2 && ((p[0] == 0xFF && p[1] == 0xFE) || (p[0] == 0xFE && p[1] == 0xFF))) {
        *st = sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_SYNTAX, 0,
                             "config must be UTF-8 (found a UTF-16 byte order mark)");
        return 1;
    }
    size_t bad;
    if (!sift__utf8_valid(p, src->len, &bad)) {
        *st = sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_SYNTAX, (int64_t)bad,
                             "invalid UTF-8 (byte 0x%02x at offset %zu)", p[bad], bad);
        return 1;
    }
    const void *nul = memchr(p, 0, src->len);
    if (nul) {
        *st = sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_SYNTAX,
                             (const unsigned char *)nul - p, "NUL byte in the file");
        return 1;
    }
    return 0;
}

/* A new node of `type` at mark m, after the max_nodes limit: its id in
 * *id and *st = SIFT_OK, or *st = SIFT_E_NOMEM. 1 when the limit stops
 * the parse (*st is the diagnostic's status). */
static int new_node(sift_config *cfg, cfg_tree *tree, int type, int isbad, yaml_mark_t m,
                    uint32_t *id, sift_status *st)
{
    if (tree->n >= (uint32_t)cfg->params.max_nodes) {
        char lim[32];
        snprintf(lim, sizeof lim, "%d", (int)cfg->params.max_nodes);
        *st = mark_diag(cfg, SIFT_E_CONFIG_LIMIT, m, "more than %s nodes", lim);
        return 1;
    }
    if ((*st = add_node(cfg, tree, id)) != SIFT_OK)
        return 0;
    cfg_node *n = &tree->nodes[*id];
    n->type = (uint8_t)type;
    n->bad = (uint8_t)isbad;
    n->off = (int64_t)sift__cfg_offset(&cfg->src, m.line, m.column);
    n->line = (int32_t)m.line + 1;
    n->col = (int32_t)m.column + 1;
    return 0;
}

/* A mapping or sequence opens: the depth limit, its anchor and tag, then
 * its node, entered. 1 when the parse stops with the tree unusable. */
static int on_open(sift_config *cfg, cfg_tree *tree, loop_state *ls, const yaml_event_t *ev,
                   sift_status *st)
{
    yaml_mark_t m = ev->start_mark;
    int is_seq = ev->type == YAML_SEQUENCE_START_EVENT;
    int isbad = 0;
    uint32_t id;
    if (ls->depth >= cfg->params.max_depth) {
        char lim[32];
        snprintf(lim, sizeof lim, "%d", (int)cfg->params.max_depth);
        *st = mark_diag(cfg, SIFT_E_CONFIG_LIMIT, m, "nesting deeper than %s", lim);
        return 1;
    }
    if (node_checks(cfg, ls, m,
                    is_seq ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor,
                    is_seq ? ev->data.sequence_start.tag : ev->data.mapping_start.tag, &isbad, st))
        return 1;
    if (new_node(cfg, tree, is_seq ? CFG_SEQ : CFG_MAP, isbad, m, &id, st))
        return 1;
    if (*st != SIFT_OK)
        return 0;
    attach(tree, ls, id);
    ls->stack[ls->depth++] = id;
    return 0;
}

/* A scalar or an alias (refused, kept as an empty bad scalar so the
 * checks go on): its node with a copy of the value, NUL characters
 * refused. 1 when the parse stops with the tree unusable. */
static int on_scalar(sift_config *cfg, cfg_tree *tree, loop_state *ls, const yaml_event_t *ev,
                     sift_status *st)
{
    yaml_mark_t m = ev->start_mark;
    int alias = ev->type == YAML_ALIAS_EVENT;
    int isbad = 0;
    uint32_t id;
    if (alias) {
        *st = mark_diag(cfg, SIFT_E_CONFIG_VALUE, m, "aliases are not supported ('*%s')",
                        (const char *)ev->data.alias.anchor);
        isbad = 1;
    } else if (node_checks(cfg, ls, m, ev->data.scalar.anchor,
                           ev->data.scalar.plain_implicit || ev->data.scalar.quoted_implicit
                               ? NULL
                               : ev->data.scalar.tag,
                           &isbad, st)) {
        return 1;
    }
    if (*st != SIFT_OK)
        return 0;
    if (new_node(cfg, tree, CFG_SCALAR, isbad, m, &id, st))
        return 1;
    if (*st != SIFT_OK)
        return 0;
    cfg_node *n = &tree->nodes[id];
    if (!alias) {
        n->style = (uint8_t)style_of(ev->data.scalar.style);
        n->len = ev->data.scalar.length;
        n->val = sift__memdup(&cfg->al, ev->data.scalar.value, n->len);
        if (!n->val) {
            *st = SIFT_E_NOMEM;
            return 0;
        }
        const char *z = memchr(n->val, 0, n->len);
        if (z && !isbad) {
            *st = sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_VALUE,
                                 sift__cfg_scalar_offset(cfg, n, (size_t)(z - n->val)),
                                 "NUL character in string");
            n->bad = 1;
        }
    } else {
        n->val = sift__memdup(&cfg->al, "", 0);
        if (!n->val)
            *st = SIFT_E_NOMEM;
    }
    attach(tree, ls, id);
    return 0;
}

sift_status sift__cfg_parse_tree(sift_config *cfg, cfg_tree *tree, int *usable)
{
    cfg_source *src = &cfg->src;
    const unsigned char *p = (const unsigned char *)src->data;
    *usable = 0;
    memset(tree, 0, sizeof *tree);
    tree->root = CFG_NONE;

    sift_status st = SIFT_OK;
    if (input_rejected(cfg, &st))
        return st;

    loop_state ls;
    memset(&ls, 0, sizeof ls);
    ls.stack = sift__malloc(&cfg->al, (size_t)cfg->params.max_depth + 1, sizeof *ls.stack);
    ls.last = sift__malloc(&cfg->al, (size_t)cfg->params.max_depth + 1, sizeof *ls.last);
    if (!ls.stack || !ls.last) {
        sift__free(&cfg->al, ls.stack);
        sift__free(&cfg->al, ls.last);
        return SIFT_E_NOMEM;
    }

    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        sift__free(&cfg->al, ls.stack);
        sift__free(&cfg->al, ls.last);
        return SIFT_E_NOMEM;
    }
    yaml_parser_set_input_string(&parser, p, src->len);
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);

    int ok = 1, done = 0;
    while (!done && st == SIFT_OK && !cfg->stopped) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            st = yaml_failure(cfg, &parser);
            ok = 0;
            break;
        }
        int stop = 0;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_DOCUMENT_START_EVENT:
            if (++ls.docs > 1) {
                st = mark_diag(cfg, SIFT_E_CONFIG_SYNTAX, ev.start_mark,
                               "expected one document, found a second one%s", "");
                done = 1;
            }
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: stop = on_open(cfg, tree, &ls, &ev, &st); break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            if (ls.depth > 0)
                ls.depth--;
            break;
        case YAML_SCALAR_EVENT:
        case YAML_ALIAS_EVENT: stop = on_scalar(cfg, tree, &ls, &ev, &st); break;
        default: break;
        }
        yaml_event_delete(&ev);
        if (stop) {
            ok = 0;
            done = 1;
        }
    }
    yaml_parser_delete(&parser);
    sift__free(&cfg->al, ls.stack);
    sift__free(&cfg->al, ls.last);
    if (st == SIFT_E_NOMEM)
        return st;
    *usable = ok && !cfg->stopped;
    return SIFT_OK;
}

void sift__cfg_tree_free(sift_config *cfg, cfg_tree *tree)
{
    for (uint32_t i = 0; i < tree->n; i++)
        sift__free(&cfg->al, tree->nodes[i].val);
    sift__free(&cfg->al, tree->nodes);
    memset(tree, 0, sizeof *tree);
    tree->root = CFG_NONE;
}

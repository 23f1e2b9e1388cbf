/*
 * tree.c - YAML bytes to a small bounded tree with positions.
 *
 * What it owns: the line table of a source, byte offset <-> line:col
 * conversion, the UTF-8 check, the libyaml event loop and the tree it
 * builds, and the map from a byte of a scalar's value back to the byte of
 * the file that produced it.
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

/* Length of the line break at p[0..n), 0 if none. */
static size_t break_len(const unsigned char *p, size_t n)
{
    if (n >= 1 && p[0] == '\n')
        return 1;
    if (n >= 1 && p[0] == '\r')
        return (n >= 2 && p[1] == '\n') ? 2 : 1;
    if (n >= 2 && p[0] == 0xC2 && p[1] == 0x85)
        return 2;
    if (n >= 3 && p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9))
        return 3;
    return 0;
}

sift_status sift__cfg_source_init(sift_config *cfg, cfg_source *src)
{
    const unsigned char *p = (const unsigned char *)src->data;
    size_t n = 1;
    for (size_t i = 0; i < src->len;) {
        size_t b = break_len(p + i, src->len - i);
        if (b) {
            n++;
            i += b;
        } else {
            i++;
        }
    }
    src->lines = sift__malloc(&cfg->al, n, sizeof *src->lines);
    if (!src->lines)
        return SIFT_E_NOMEM;
    size_t k = 0;
    src->lines[k++] = 0;
    for (size_t i = 0; i < src->len;) {
        size_t b = break_len(p + i, src->len - i);
        if (b) {
            i += b;
            src->lines[k++] = i;
        } else {
            i++;
        }
    }
    src->n_lines = n;
    size_t nc = src->len / 64 + 1;
    src->cp_chk = sift__malloc(&cfg->al, nc, sizeof *src->cp_chk);
    if (!src->cp_chk)
        return SIFT_E_NOMEM;
    uint32_t cp = 0;
    for (size_t j = 0; j < nc; j++) {
        src->cp_chk[j] = cp;
        size_t end = (j + 1) * 64 < src->len ? (j + 1) * 64 : src->len;
        for (size_t i = j * 64; i < end; i++)
            cp += (p[i] & 0xC0) != 0x80;
    }
    src->work = &cfg->work;
    return SIFT_OK;
}

/* Code points in data[0..off). */
static uint64_t cp_before(const cfg_source *src, size_t off)
{
    const unsigned char *p = (const unsigned char *)src->data;
    size_t j = off / 64;
    uint64_t c = src->cp_chk[j];
    for (size_t i = j * 64; i < off; i++)
        c += (p[i] & 0xC0) != 0x80;
    if (src->work)
        *src->work += off - j * 64 + 1;
    return c;
}

void sift__cfg_linecol(const cfg_source *src, size_t off, int32_t *line, int32_t *col)
{
    if (off > src->len)
        off = src->len;
    size_t lo = 0, hi = src->n_lines; /* last line start <= off */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (src->lines[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    int64_t c = 1 + (int64_t)(cp_before(src, off) - cp_before(src, src->lines[lo]));
    *line = (int32_t)(lo + 1 > INT32_MAX ? INT32_MAX : lo + 1);
    *col = (int32_t)(c > INT32_MAX ? INT32_MAX : c);
}

size_t sift__cfg_offset(cfg_source *src, size_t line0, size_t col0)
{
    if (line0 >= src->n_lines)
        return src->len;
    const unsigned char *p = (const unsigned char *)src->data;
    size_t i = src->lines[line0], c = 0;
    if (src->c_line == line0 && src->c_col <= col0 && src->c_off >= i) {
        i = src->c_off;
        c = src->c_col;
    }
    size_t end = line0 + 1 < src->n_lines ? src->lines[line0 + 1] : src->len;
    while (c < col0 && i < end) {
        i++;
        while (i < end && (p[i] & 0xC0) == 0x80)
            i++;
        c++;
    }
    src->c_line = line0;
    src->c_col = c;
    src->c_off = i;
    return i;
}

/* Offset of the first byte that is not valid UTF-8 (overlongs,
 * surrogates and code points above U+10FFFF included), or len. */
static size_t utf8_bad(const unsigned char *p, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 2;
            cp = c & 0x1F;
            min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            cp = c & 0x0F;
            min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            cp = c & 0x07;
            min = 0x10000;
        } else {
            return i;
        }
        if (len - i < n)
            return i;
        for (size_t k = 1; k < n; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return i;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return i;
        i += n;
    }
    return len;
}

/* ------------------------------------------------------------------ */
/* Value byte -> source byte                                           */
/* ------------------------------------------------------------------ */

static size_t utf8_enc_len(uint32_t cp)
{
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Walks a quoted scalar's source from its opening quote, counting value
 * bytes, until value byte k is reached; returns its source offset, or the
 * scalar's start when a line fold makes the count ambiguous. */
static int64_t quoted_offset(const cfg_source *src, const cfg_node *n, size_t k)
{
    const unsigned char *p = (const unsigned char *)src->data;
    size_t i = (size_t)n->off + 1, v = 0;
    int dq = n->style == SIFT_SCALAR_DOUBLE_QUOTED;
    while (i < src->len) {
        if (p[i] == '\n' || p[i] == '\r')
            return n->off;
        size_t raw = 1, out = 1;
        if (!dq && p[i] == '\'') {
            if (i + 1 < src->len && p[i + 1] == '\'')
                raw = 2;
            else /* closing quote: the end of the value maps to it */
                return k == v ? (int64_t)i : n->off;
        } else if (dq && p[i] == '"') {
            return k == v ? (int64_t)i : n->off;
        } else if (dq && p[i] == '\\' && i + 1 < src->len) {
            unsigned char e = p[i + 1];
            size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
            if (digits) {
                uint32_t cp = 0;
                for (size_t d = 0; d < digits && i + 2 + d < src->len; d++)
                    cp = (cp << 4) | (uint32_t)(hexval(p[i + 2 + d]) & 0xF);
                raw = 2 + digits;
                out = utf8_enc_len(cp);
            } else if (e == '\n' || e == '\r') {
                return n->off;
            } else {
                raw = 2;
                out = (e == 'N' || e == '_') ? 2 : (e == 'L' || e == 'P') ? 3 : 1;
            }
        } else if (p[i] >= 0x80) {
            /* a multi-byte character maps byte for byte */
            raw = out = 1;
        }
        if (k < v + out)
            return (int64_t)i;
        v += out;
        i += raw;
    }
    return n->off;
}

int64_t sift__cfg_scalar_offset(const sift_config *cfg, const cfg_node *n, size_t k)
{
    const cfg_source *src = &cfg->src;
    const unsigned char *p = (const unsigned char *)src->data;
    if (n->off < 0 || (size_t)n->off > src->len)
        return -1;
    if (src->work)
        *src->work += k + 1; /* every walk below is at most k steps */
    switch (n->style) {
    case SIFT_SCALAR_PLAIN:
        if (memchr(n->val, '\n', k < n->len ? k : n->len))
            return n->off;
        return n->off + (int64_t)k;
    case SIFT_SCALAR_SINGLE_QUOTED:
    case SIFT_SCALAR_DOUBLE_QUOTED: return quoted_offset(src, n, k);
    case SIFT_SCALAR_LITERAL: {
        /* Content starts on the line after the header; every value line
         * is a source line with the block's indentation removed. */
        int32_t l0, c0;
        sift__cfg_linecol(src, (size_t)n->off, &l0, &c0);
        size_t line = (size_t)l0; /* 0-based index of the next line */
        if (line >= src->n_lines)
            return n->off;
        size_t indent = 0, s = src->lines[line];
        while (s + indent < src->len && p[s + indent] == ' ')
            indent++;
        size_t vline = 0, vcol = 0;
        for (size_t b = 0; b < k && b < n->len; b++) {
            if (n->val[b] == '\n') {
                vline++;
                vcol = 0;
            } else {
                vcol++;
            }
        }
        if (line + vline >= src->n_lines)
            return n->off;
        size_t off = src->lines[line + vline] + indent + vcol;
        return (int64_t)(off > src->len ? src->len : off);
    }
    default: return n->off;
    }
}

/* ------------------------------------------------------------------ */
/* The event loop                                                      */
/* ------------------------------------------------------------------ */

static sift_status add_node(sift_config *cfg, cfg_tree *t, uint32_t *out)
{
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        cfg_node *nn = sift__grow(&cfg->al, t->nodes, t->n, t->cap, cap, sizeof *nn);
        if (!nn)
            return SIFT_E_NOMEM;
        t->nodes = nn;
        t->cap = cap;
    }
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
        if (off < cfg->src.len && cfg->src.data[off] == '\t')
            snprintf(msg + n, sizeof msg - n, "; tabs cannot indent YAML, use spaces");
        else if (!strncmp(problem, "mapping values are not allowed", 30) &&
                 p->problem_mark.column > 1024)
            snprintf(msg + n, sizeof msg - n,
                     "; a key written without '? ' is at most 1024 characters long");
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

sift_status sift__cfg_parse_tree(sift_config *cfg, cfg_tree *tree, int *usable)
{
    cfg_source *src = &cfg->src;
    const unsigned char *p = (const unsigned char *)src->data;
    *usable = 0;
    memset(tree, 0, sizeof *tree);
    tree->root = CFG_NONE;

    if (src->len >= 2 && ((p[0] == 0xFF && p[1] == 0xFE) || (p[0] == 0xFE && p[1] == 0xFF)))
        return sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_SYNTAX, 0,
                              "config must be UTF-8 (found a UTF-16 byte order mark)");
    size_t bad = utf8_bad(p, src->len);
    if (bad < src->len)
        return sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_SYNTAX, (int64_t)bad,
                              "invalid UTF-8 (byte 0x%02x at offset %zu)", p[bad], bad);
    const void *nul = memchr(p, 0, src->len);
    if (nul)
        return sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_SYNTAX,
                              (const unsigned char *)nul - p, "NUL byte in the file");

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

    sift_status st = SIFT_OK;
    int ok = 1, done = 0;
    while (!done && st == SIFT_OK && !cfg->stopped) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            st = yaml_failure(cfg, &parser);
            ok = 0;
            break;
        }
        yaml_mark_t m = ev.start_mark;
        int isbad = 0;
        uint32_t id;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_DOCUMENT_START_EVENT:
            if (++ls.docs > 1) {
                st = mark_diag(cfg, SIFT_E_CONFIG_SYNTAX, m,
                               "expected one document, found a second one%s", "");
                done = 1;
            }
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
            int is_seq = ev.type == YAML_SEQUENCE_START_EVENT;
            if (ls.depth >= cfg->params.max_depth) {
                char lim[32];
                snprintf(lim, sizeof lim, "%d", (int)cfg->params.max_depth);
                st = mark_diag(cfg, SIFT_E_CONFIG_LIMIT, m, "nesting deeper than %s", lim);
                ok = 0;
                done = 1;
                break;
            }
            if (node_checks(cfg, &ls, m,
                            is_seq ? ev.data.sequence_start.anchor : ev.data.mapping_start.anchor,
                            is_seq ? ev.data.sequence_start.tag : ev.data.mapping_start.tag, &isbad,
                            &st)) {
                ok = 0;
                done = 1;
                break;
            }
            if (tree->n >= (uint32_t)cfg->params.max_nodes)
                goto too_many;
            if ((st = add_node(cfg, tree, &id)) != SIFT_OK)
                break;
            cfg_node *n = &tree->nodes[id];
            n->type = is_seq ? CFG_SEQ : CFG_MAP;
            n->bad = (uint8_t)isbad;
            n->off = (int64_t)sift__cfg_offset(src, m.line, m.column);
            n->line = (int32_t)m.line + 1;
            n->col = (int32_t)m.column + 1;
            attach(tree, &ls, id);
            ls.stack[ls.depth++] = id;
            break;
        }
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            if (ls.depth > 0)
                ls.depth--;
            break;
        case YAML_SCALAR_EVENT:
        case YAML_ALIAS_EVENT: {
            int alias = ev.type == YAML_ALIAS_EVENT;
            if (alias) {
                st = mark_diag(cfg, SIFT_E_CONFIG_VALUE, m, "aliases are not supported ('*%s')",
                               (const char *)ev.data.alias.anchor);
                isbad = 1;
            } else if (node_checks(cfg, &ls, m, ev.data.scalar.anchor,
                                   ev.data.scalar.plain_implicit || ev.data.scalar.quoted_implicit
                                       ? NULL
                                       : ev.data.scalar.tag,
                                   &isbad, &st)) {
                ok = 0;
                done = 1;
                break;
            }
            if (st != SIFT_OK)
                break;
            if (tree->n >= (uint32_t)cfg->params.max_nodes)
                goto too_many;
            if ((st = add_node(cfg, tree, &id)) != SIFT_OK)
                break;
            cfg_node *n = &tree->nodes[id];
            n->type = CFG_SCALAR;
            n->bad = (uint8_t)isbad;
            n->off = (int64_t)sift__cfg_offset(src, m.line, m.column);
            n->line = (int32_t)m.line + 1;
            n->col = (int32_t)m.column + 1;
            if (!alias) {
                n->style = (uint8_t)style_of(ev.data.scalar.style);
                n->len = ev.data.scalar.length;
                n->val = sift__memdup(&cfg->al, ev.data.scalar.value, n->len);
                if (!n->val) {
                    st = SIFT_E_NOMEM;
                    break;
                }
                const char *z = memchr(n->val, 0, n->len);
                if (z && !isbad) {
                    st = sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_VALUE,
                                        sift__cfg_scalar_offset(cfg, n, (size_t)(z - n->val)),
                                        "NUL character in string");
                    n->bad = 1;
                }
            } else {
                n->val = sift__memdup(&cfg->al, "", 0);
                if (!n->val)
                    st = SIFT_E_NOMEM;
            }
            attach(tree, &ls, id);
            break;
        }
        default: break;
        }
        yaml_event_delete(&ev);
        continue;
    too_many:
        yaml_event_delete(&ev);
        {
            char lim[32];
            snprintf(lim, sizeof lim, "%d", (int)cfg->params.max_nodes);
            st = mark_diag(cfg, SIFT_E_CONFIG_LIMIT, m, "more than %s nodes", lim);
        }
        ok = 0;
        break;
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

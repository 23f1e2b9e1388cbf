/*
 * source.c - a configuration's source text and its positions.
 *
 * What it owns: the line table of a source (byte offset of every line
 * start, line breaks counted as libyaml counts them: \n, \r\n, \r,
 * U+0085, U+2028, U+2029), byte offset <-> 1-based line:col conversion in
 * code points, and the map from a byte of a scalar's value back to the
 * byte of the file that produced it. It calls no other file of
 * src/config/: the diagnostic sink (diag.c) and the tree (tree.c) use it.
 *
 * Bounds: every conversion walks at most 128 bytes from a checkpoint (the
 * code points before every 64-byte block are counted once at init), and
 * adds what it walks to the source's work counter.
 */
#include <stdio.h>

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

/* ------------------------------------------------------------------ */
/* Value byte -> source byte                                           */
/* ------------------------------------------------------------------ */

static size_t utf8_enc_len(uint32_t cp)
{
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
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
                    cp = (cp << 4) | (uint32_t)(sift__hex_digit(p[i + 2 + d]) & 0xF);
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

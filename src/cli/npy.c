/*
 * npy.c - the .npy reader behind `sift sample` and `sift inspect`.
 *
 * What it owns: parsing the fixed preamble (magic, version, header length),
 * the header's Python dict literal ({'descr': '<f4', 'fortran_order':
 * False, 'shape': (S, V), }) with keys in any order, and converting the
 * little-endian float32 payload to host floats.
 *
 * Invariants: every size read from the file is checked against the file's
 * actual length before use, so a lying header cannot cause a large
 * allocation or a read past the end; the payload must be exactly
 * steps * V * 4 bytes; every error message names the byte offset of the
 * problem. The parser is a flat loop (no recursion).
 */
#define _POSIX_C_SOURCE 200809L

#include "npy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift_internal.h"

static int fail(char *msg, size_t cap, int code, const char *fmt, ...)
{
    if (msg && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}

typedef struct hdr_cursor {
    const unsigned char *s;
    size_t pos, end; /* absolute offsets in the file */
} hdr_cursor;

static void skip_ws(hdr_cursor *c)
{
    while (c->pos < c->end && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t'))
        c->pos++;
}

/* Reads a quoted Python string ('...' or "...") without escapes into buf.
 * Only printable ASCII: the result is compared as a C string, so a NUL
 * (or any control byte) inside the quotes must not cut it short. */
static int read_str(hdr_cursor *c, char *buf, size_t cap)
{
    if (c->pos >= c->end || (c->s[c->pos] != '\'' && c->s[c->pos] != '"'))
        return -1;
    unsigned char q = c->s[c->pos++];
    size_t n = 0;
    while (c->pos < c->end && c->s[c->pos] != q) {
        unsigned char ch = c->s[c->pos];
        if (ch == '\\' || ch < 0x20 || ch >= 0x7f || n + 1 >= cap)
            return -1;
        buf[n++] = (char)c->s[c->pos++];
    }
    if (c->pos >= c->end)
        return -1;
    c->pos++;
    buf[n] = 0;
    return 0;
}

/* Reads a non-negative decimal integer, at most 2^53 (far above any
 * accepted size, so the later checks see the true value). */
static int read_uint(hdr_cursor *c, int64_t *v)
{
    size_t start = c->pos;
    int64_t x = 0;
    while (c->pos < c->end && c->s[c->pos] >= '0' && c->s[c->pos] <= '9') {
        if (x > ((int64_t)1 << 53))
            return -1;
        x = x * 10 + (c->s[c->pos++] - '0');
    }
    if (c->pos == start)
        return -1;
    if (c->pos < c->end && c->s[c->pos] == 'L') /* Python 2 long suffix */
        c->pos++;
    *v = x;
    return 0;
}

static int starts(const hdr_cursor *c, const char *w)
{
    size_t n = strlen(w);
    return c->end - c->pos >= n && !memcmp(c->s + c->pos, w, n);
}

/* The fixed part: magic, version, and the header's length and start. 0,
 * or 1 with msg filled. */
static int read_preamble(const unsigned char *buf, size_t len, size_t *hlen, size_t *hstart,
                         char *msg, size_t cap)
{
    static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (len < 10 || memcmp(buf, magic, 6) != 0)
        return fail(msg, cap, 1, "byte 0: not a .npy file (bad magic)");
    unsigned major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return fail(msg, cap, 1, "byte 6: unsupported .npy version %u.%u", major, minor);
    if (major == 1) {
        *hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        *hstart = 10;
    } else {
        if (len < 12)
            return fail(msg, cap, 1, "byte 8: file ends inside the header length");
        *hlen =
            (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        *hstart = 12;
    }
    if (*hlen > len - *hstart)
        return fail(msg, cap, 1,
                    "byte 8: header length %zu runs past the end of the file (%zu bytes)", *hlen,
                    len);
    return 0;
}

/* What the header dict said. */
typedef struct npy_header {
    int have_descr, have_order, have_shape;
    int64_t dims[2];
    int ndim;
} npy_header;

/* The value of 'shape' at c (its '(' at val_at): up to two dimensions. */
static int read_shape(hdr_cursor *c, npy_header *h, size_t val_at, char *msg, size_t cap)
{
    const unsigned char *buf = c->s;
    if (h->have_shape++ || c->pos >= c->end || buf[c->pos] != '(')
        return fail(msg, cap, 1, "byte %zu: bad or repeated 'shape'", val_at);
    c->pos++;
    for (;;) {
        skip_ws(c);
        if (c->pos < c->end && buf[c->pos] == ')') {
            c->pos++;
            break;
        }
        size_t at = c->pos;
        int64_t v;
        if (h->ndim == 2)
            return fail(msg, cap, 1, "byte %zu: shape has more than 2 dimensions", at);
        if (read_uint(c, &v) != 0)
            return fail(msg, cap, 1, "byte %zu: bad dimension in 'shape'", at);
        h->dims[h->ndim++] = v;
        skip_ws(c);
        if (c->pos < c->end && buf[c->pos] == ',')
            c->pos++;
        else if (c->pos >= c->end || buf[c->pos] != ')')
            return fail(msg, cap, 1, "byte %zu: expected ',' or ')' in 'shape'", c->pos);
    }
    if (h->ndim == 0)
        return fail(msg, cap, 1, "byte %zu: a 0-d array holds no row", val_at);
    return 0;
}

/* The value of `key` at c (key_at, val_at: where each starts): descr
 * must be '<f4', fortran_order False, shape one or two dimensions. */
static int read_entry(hdr_cursor *c, npy_header *h, const char *key, size_t key_at, size_t val_at,
                      char *msg, size_t cap)
{
    if (!strcmp(key, "descr")) {
        char d[32];
        if (h->have_descr++ || read_str(c, d, sizeof d) != 0)
            return fail(msg, cap, 1, "byte %zu: bad or repeated 'descr'", val_at);
        if (strcmp(d, "<f4") != 0)
            return fail(msg, cap, 1,
                        "byte %zu: dtype '%s' is not supported (need little-endian float32 "
                        "'<f4')",
                        val_at, d);
    } else if (!strcmp(key, "fortran_order")) {
        if (h->have_order++)
            return fail(msg, cap, 1, "byte %zu: repeated 'fortran_order'", val_at);
        if (starts(c, "True"))
            return fail(msg, cap, 1, "byte %zu: Fortran order is not supported", val_at);
        if (!starts(c, "False"))
            return fail(msg, cap, 1, "byte %zu: 'fortran_order' must be True or False", val_at);
        c->pos += 5;
    } else if (!strcmp(key, "shape")) {
        return read_shape(c, h, val_at, msg, cap);
    } else {
        return fail(msg, cap, 1, "byte %zu: unknown header key '%s'", key_at, key);
    }
    return 0;
}

/* The header dict buf[hstart .. hstart + hlen) into *h: every key once,
 * nothing after the closing '}' but padding. */
static int read_header(const unsigned char *buf, size_t hstart, size_t hlen, npy_header *h,
                       char *msg, size_t cap)
{
    hdr_cursor c = {buf, hstart, hstart + hlen};
    /* The header ends with '\n' after the space padding. */
    while (c.end > c.pos && (buf[c.end - 1] == '\n' || buf[c.end - 1] == ' '))
        c.end--;
    skip_ws(&c);
    if (c.pos >= c.end || buf[c.pos] != '{')
        return fail(msg, cap, 1, "byte %zu: header does not start with '{'", c.pos);
    c.pos++;
    for (;;) {
        skip_ws(&c);
        if (c.pos < c.end && buf[c.pos] == '}') {
            c.pos++;
            break;
        }
        size_t key_at = c.pos;
        char key[32];
        if (read_str(&c, key, sizeof key) != 0)
            return fail(msg, cap, 1, "byte %zu: expected a quoted key or '}'", key_at);
        skip_ws(&c);
        if (c.pos >= c.end || buf[c.pos] != ':')
            return fail(msg, cap, 1, "byte %zu: expected ':' after '%s'", c.pos, key);
        c.pos++;
        skip_ws(&c);
        int rc = read_entry(&c, h, key, key_at, c.pos, msg, cap);
        if (rc)
            return rc;
        skip_ws(&c);
        if (c.pos < c.end && buf[c.pos] == ',')
            c.pos++;
        else if (c.pos >= c.end || buf[c.pos] != '}')
            return fail(msg, cap, 1, "byte %zu: expected ',' or '}' in the header", c.pos);
    }
    skip_ws(&c);
    if (c.pos != c.end)
        return fail(msg, cap, 1, "byte %zu: trailing characters after the header dict", c.pos);
    if (!h->have_descr || !h->have_order || !h->have_shape)
        return fail(msg, cap, 1, "byte %zu: header lacks '%s'", hstart,
                    !h->have_descr   ? "descr"
                    : !h->have_order ? "fortran_order"
                                     : "shape");
    return 0;
}

/* The steps x v floats at buf[data_at ..), which must be exactly the
 * rest of the file, decoded little-endian into a new array. */
static int read_data(const unsigned char *buf, size_t len, size_t data_at, size_t hstart,
                     int64_t steps, int64_t v, float **out, char *msg, size_t cap)
{
    if (v < 1 || v > NPY_MAX_VOCAB)
        return fail(msg, cap, 1, "byte %zu: row length %lld outside [1, %d]", hstart, (long long)v,
                    NPY_MAX_VOCAB);
    if (steps < 1)
        return fail(msg, cap, 1, "byte %zu: the array has no rows", hstart);
    uint64_t have = len - data_at;
    /* steps <= 2^53 and v <= 2^24: compare without overflow via division. */
    if ((uint64_t)steps > have / 4 / (uint64_t)v || (uint64_t)steps * (uint64_t)v * 4 != have)
        return fail(
            msg, cap, 1, "byte %zu: shape (%lld, %lld) needs %s bytes of data, the file has %llu",
            data_at, (long long)steps, (long long)v,
            (uint64_t)steps > have / 4 / (uint64_t)v ? "more" : "fewer", (unsigned long long)have);
    size_t n = (size_t)steps * (size_t)v;
    float *data = malloc(n * sizeof *data);
    if (!data)
        return fail(msg, cap, 2, "out of memory for %zu floats", n);
    const unsigned char *p = buf + data_at;
    for (size_t i = 0; i < n; i++, p += 4) {
        /* Assemble the little-endian word so big-endian hosts read it too. */
        uint32_t w =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        memcpy(&data[i], &w, 4);
    }
    *out = data;
    return 0;
}

int npy_parse(const unsigned char *buf, size_t len, npy_rows *out, char *msg, size_t cap)
{
    memset(out, 0, sizeof *out);
    size_t hlen = 0, hstart = 0;
    npy_header h = {0, 0, 0, {0, 0}, 0};
    float *data = NULL;
    int rc = read_preamble(buf, len, &hlen, &hstart, msg, cap);
    if (!rc)
        rc = read_header(buf, hstart, hlen, &h, msg, cap);
    if (rc)
        return rc;
    int64_t steps = h.ndim == 2 ? h.dims[0] : 1, v = h.ndim == 2 ? h.dims[1] : h.dims[0];
    if ((rc = read_data(buf, len, hstart + hlen, hstart, steps, v, &data, msg, cap)))
        return rc;
    out->data = data;
    out->steps = steps;
    out->n_vocab = (int32_t)v;
    out->one_d = h.ndim == 1;
    return 0;
}

int npy_load(const char *path, npy_rows *out, char *msg, size_t cap)
{
    memset(out, 0, sizeof *out);
    /* The library's one file helper: no blocking on a FIFO, regular files
     * only, at most NPY_MAX_BYTES; its messages start with the path. */
    sift__alloc al;
    char *buf;
    size_t len;
    sift_error err;
    sift_status st = sift__alloc_init(&al, NULL, &err);
    if (st == SIFT_OK)
        st = sift__file_read(&al, path, (size_t)NPY_MAX_BYTES, &buf, &len, &err);
    if (st != SIFT_OK) {
        /* The helper's messages are "PATH: TEXT" (sift_internal.h). */
        size_t n = strlen(path);
        const char *text = err.message;
        if (!strncmp(text, path, n) && !strncmp(text + n, ": ", 2))
            text += n + 2;
        return fail(msg, cap, st == SIFT_E_LIMIT ? 1 : 2, "%s: error: %s", path, text);
    }
    char inner[256];
    int rc = npy_parse((const unsigned char *)buf, len, out, inner, sizeof inner);
    sift__free(&al, buf);
    if (rc)
        fail(msg, cap, rc, "%s: error: %s", path, inner);
    return rc;
}

void npy_free(npy_rows *rows)
{
    if (rows) {
        free(rows->data);
        memset(rows, 0, sizeof *rows);
    }
}

/*
 * json_schema.c - the JSON Schema API: options, parsing (jansson), the
 * places of errors, and the driver of the conversion.
 *
 * Places. jansson gives the line and column of a syntax error but keeps
 * no positions of values. An error about a valid schema names the JSON
 * Pointer of the value at fault; only then is its offset found, by one
 * walk of the text along that pointer (locate below: a light scan that
 * skips values it does not enter, O(len) and without recursion). The
 * converter keeps the current pointer as a string of escaped segments;
 * a $ref switches to its target's pointer after a '\001' mark, and the
 * part after the last mark is the place. A pointer that leads into a
 * merged schema (allOf, $ref siblings) that has no text of its own is
 * reported at the deepest prefix that exists in the text.
 *
 * Values jansson cannot hold (an integer outside int64, a number beyond
 * a double, \u0000 in a string or key) stop its parse; the offset of its
 * error is turned into the JSON Pointer of the value by one scan of the
 * text up to there (pointer_at), so they get sift's own message and
 * status at their place instead of jansson's words.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "convert.h"
#include "json_schema.h"

void sift_json_schema_params_init(sift_json_schema_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->whitespace = SIFT_JSON_WS_FLEXIBLE;
    p->max_whitespace = SIFT_JSON_SCHEMA_DEFAULT_MAX_WHITESPACE;
    p->unsupported = SIFT_JSON_UNSUPPORTED_ERROR;
    p->max_schema_bytes = SIFT_JSON_SCHEMA_DEFAULT_MAX_SCHEMA_BYTES;
    p->max_grammar_bytes = SIFT_JSON_SCHEMA_DEFAULT_MAX_GRAMMAR_BYTES;
    p->max_work = SIFT_JSON_SCHEMA_DEFAULT_MAX_WORK;
}

/* ------------------------------------------------------------------ */
/* Places: JSON Pointer -> offset -> line:col                          */
/* ------------------------------------------------------------------ */

static size_t skip_ws(const char *t, size_t n, size_t i)
{
    /* i may be n + 1 after a step over a ':' at the end of a text that
     * is not JSON (unholdable's scan): never past the end */
    if (i > n)
        return n;
    while (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r'))
        i++;
    return i;
}

/* i at '"': returns the offset after the closing quote. */
static size_t skip_string(const char *t, size_t n, size_t i)
{
    for (i++; i < n && t[i] != '"'; i++)
        if (t[i] == '\\')
            i++;
    return i < n ? i + 1 : n;
}

/* Skips one value (the text is valid JSON: jansson accepted it). */
static size_t skip_value(const char *t, size_t n, size_t i)
{
    if (i >= n)
        return n;
    if (t[i] == '"')
        return skip_string(t, n, i);
    if (t[i] != '{' && t[i] != '[') {
        while (i < n && !strchr(",]} \t\r\n", t[i]))
            i++;
        return i;
    }
    size_t depth = 0;
    while (i < n) {
        char ch = t[i];
        if (ch == '"') {
            i = skip_string(t, n, i);
            continue;
        }
        if (ch == '{' || ch == '[')
            depth++;
        else if ((ch == '}' || ch == ']') && --depth == 0)
            return i + 1;
        i++;
    }
    return n;
}

/* Does the JSON string at t[i] (a key) equal the decoded pointer segment
 * seg[0..sn)? Escapes are decoded (\uXXXX of the BMP). */
static int key_equals(const char *t, size_t n, size_t i, const char *seg, size_t sn)
{
    size_t k = 0;
    for (i++; i < n && t[i] != '"'; i++) {
        unsigned char buf[4];
        size_t bn = 1;
        buf[0] = (unsigned char)t[i];
        if (t[i] == '\\' && i + 1 < n) {
            char e = t[++i];
            static const char from[] = "bfnrt", to[] = "\b\f\n\r\t";
            const char *f = strchr(from, e);
            buf[0] = (unsigned char)(f && e ? to[f - from] : e);
            if (e == 'u' && i + 4 < n) {
                unsigned cp = 0;
                for (int d = 1; d <= 4; d++)
                    cp = cp * 16 +
                         (unsigned)(sift__hex_digit(t[i + d]) < 0 ? 0 : sift__hex_digit(t[i + d]));
                i += 4;
                if (cp < 0x80) {
                    buf[0] = (unsigned char)cp;
                } else if (cp < 0x800) {
                    buf[0] = (unsigned char)(0xC0 | (cp >> 6));
                    buf[1] = (unsigned char)(0x80 | (cp & 0x3F));
                    bn = 2;
                } else {
                    buf[0] = (unsigned char)(0xE0 | (cp >> 12));
                    buf[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                    buf[2] = (unsigned char)(0x80 | (cp & 0x3F));
                    bn = 3;
                }
            }
        }
        if (k + bn > sn || memcmp(seg + k, buf, bn))
            return 0;
        k += bn;
    }
    return k == sn;
}

/* Decodes one escaped pointer segment p[0..pn) (~1 = '/', ~0 = '~')
 * into buf (cap bytes); returns its length, or cap + 1 if too long. */
static size_t decode_segment(const char *p, size_t pn, char *buf, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < pn; i++) {
        char ch = p[i];
        if (ch == '~' && i + 1 < pn && (p[i + 1] == '0' || p[i + 1] == '1'))
            ch = p[++i] == '0' ? '~' : '/';
        if (k == cap)
            return cap + 1;
        buf[k++] = ch;
    }
    return k;
}

/* The offset of the value the escaped pointer ptr[0..pn) names, or of
 * its deepest prefix found in the text. */
static size_t locate(const char *t, size_t n, const char *ptr, size_t pn)
{
    size_t at = skip_ws(t, n, 0);
    size_t p = 0;
    char seg[512];
    while (p < pn && ptr[p] == '/') {
        size_t q = p + 1;
        while (q < pn && ptr[q] != '/')
            q++;
        size_t sn = decode_segment(ptr + p + 1, q - p - 1, seg, sizeof seg);
        if (sn > sizeof seg)
            return at;
        size_t i = at, found = (size_t)-1;
        if (i < n && t[i] == '{') {
            i = skip_ws(t, n, i + 1);
            while (i < n && t[i] == '"') {
                int eq = key_equals(t, n, i, seg, sn);
                i = skip_ws(t, n, skip_string(t, n, i));
                i = skip_ws(t, n, i + 1); /* ':' */
                if (eq)
                    found = i; /* the last of duplicate keys wins, as in jansson */
                i = skip_ws(t, n, skip_value(t, n, i));
                if (i < n && t[i] == ',')
                    i = skip_ws(t, n, i + 1);
            }
        } else if (i < n && t[i] == '[') {
            size_t want = 0, k = 0;
            for (size_t d = 0; d < sn; d++) {
                if (seg[d] < '0' || seg[d] > '9' || want > ((size_t)-1) / 16)
                    return at;
                want = want * 10 + (size_t)(seg[d] - '0');
            }
            i = skip_ws(t, n, i + 1);
            while (i < n && t[i] != ']') {
                if (k++ == want) {
                    found = i;
                    break;
                }
                i = skip_ws(t, n, skip_value(t, n, i));
                if (i < n && t[i] == ',')
                    i = skip_ws(t, n, i + 1);
            }
        }
        if (found == (size_t)-1)
            return at;
        at = found;
        p = q;
    }
    return at;
}

static void line_col(const char *t, size_t off, int32_t *line, int32_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (t[i] == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)t[i] & 0xC0) != 0x80) {
            (*col)++;
        }
    }
}

/* The current pointer: the path after its last '\001' mark. */
static const char *current_pointer(const sift__js *c, size_t *pn)
{
    const char *p = c->path.p ? c->path.p : "";
    size_t n = c->path.n;
    size_t start = n;
    while (start > 0 && p[start - 1] != '\001')
        start--;
    *pn = n - start;
    return p + start;
}

/* The length of "source:line:col: " at the start of e->message (at most
 * the message's length: a long message is cut). */
static size_t message_place_len(const sift_error *e, const char *source, int32_t line, int32_t col)
{
    int n = snprintf(NULL, 0, "%s:%d:%d: ", source, (int)line, (int)col);
    size_t have = strlen(e->message);
    return n < 0 ? 0 : (size_t)n < have ? (size_t)n : have;
}

/* Fills e with code and "source:line:col: #pointer[/key]: text". */
static void fill_at(sift__js *c, sift_error *e, sift_status code, const char *key, const char *fmt,
                    va_list ap)
{
    char text[256], ptr[160];
    vsnprintf(text, sizeof text, fmt, ap);
    size_t pn;
    const char *p = current_pointer(c, &pn);
    /* the pointer, then the key as one more segment (~ and / escaped:
     * a patternProperties key may hold them) */
    char full[600];
    size_t fl = pn < 400 ? pn : 400;
    memcpy(full, p, fl);
    if (key) {
        full[fl++] = '/';
        for (const char *k = key; *k && fl + 2 < sizeof full; k++) {
            if (*k == '~' || *k == '/') {
                full[fl++] = '~';
                full[fl++] = *k == '~' ? '0' : '1';
            } else {
                full[fl++] = *k;
            }
        }
    }
    full[fl] = '\0';
    size_t off = locate(c->text, c->len, full, fl);
    if (off > c->len)
        off = c->len;
    snprintf(ptr, sizeof ptr, "#%.*s", (int)(fl < 150 ? fl : 150), full);
    int32_t line, col;
    line_col(c->text, off, &line, &col);
    sift__fail(e, code, "%s:%d:%d: %s: %s", c->source, (int)line, (int)col, ptr, text);
    if (e == c->err)
        c->place_len = message_place_len(e, c->source, line, col);
    e->line = line;
    e->column = col;
    e->offset = (int64_t)off;
    sift__strlcpy_utf8(e->source, c->source, sizeof e->source);
}

sift_status sift__js_fail(sift__js *c, sift_status code, const char *key, const char *fmt, ...)
{
    if (c->err && code != SIFT_E_NOMEM) {
        va_list ap;
        va_start(ap, fmt);
        fill_at(c, c->err, code, key, fmt, ap);
        va_end(ap);
    } else if (code == SIFT_E_NOMEM) {
        sift__fail(c->err, code, "%s: out of memory converting the schema", c->source);
    }
    return code;
}

sift_status sift__js_unsupported(sift__js *c, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!c->ignore) {
        if (c->err)
            fill_at(c, c->err, SIFT_E_SCHEMA_UNSUPPORTED, key, fmt, ap);
        va_end(ap);
        return SIFT_E_SCHEMA_UNSUPPORTED;
    }
    if (c->warn) {
        /* placing the warning scans the text: a unit per 4 KiB, so that
         * many warnings over a large schema stay bounded */
        sift_status st = sift__js_work(c, 1 + (int64_t)(c->len >> 12));
        if (st) {
            va_end(ap);
            return st;
        }
        sift_error w;
        fill_at(c, &w, SIFT_E_SCHEMA_UNSUPPORTED, key, fmt, ap);
        c->warn(c->warn_user, &w);
    }
    va_end(ap);
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* The current place                                                   */
/* ------------------------------------------------------------------ */

sift_status sift__js_push_key(sift__js *c, const char *key)
{
    sift_status st = sift__js_put(c, &c->path, "/", 1);
    for (const char *k = key; !st && *k; k++) {
        if (*k == '~')
            st = sift__js_put(c, &c->path, "~0", 2);
        else if (*k == '/')
            st = sift__js_put(c, &c->path, "~1", 2);
        else
            st = sift__js_put(c, &c->path, k, 1);
    }
    return st;
}

sift_status sift__js_push_index(sift__js *c, size_t i)
{
    return sift__js_printf(c, &c->path, "/%zu", i);
}

void sift__js_pop(sift__js *c, size_t mark)
{
    if (c->path.p && mark <= c->path.n) {
        c->path.n = mark;
        c->path.p[mark] = '\0';
    }
}

sift_status sift__js_work(sift__js *c, int64_t units)
{
    c->work += units;
    if (c->work > c->max_work)
        return sift__js_fail(c, SIFT_E_SCHEMA_LIMIT, NULL,
                             "the conversion needs more than %lld units of work (max_work)",
                             (long long)c->max_work);
    return SIFT_OK;
}

int sift__js_plain_ascii(const char *name)
{
    for (; *name; name++)
        if ((unsigned char)*name < 0x20 || (unsigned char)*name > 0x7e)
            return 0;
    return 1;
}

int sift__js_integral(double d, int64_t *out)
{
    /* the range test comes first: converting a double outside int64's
     * range is undefined behaviour */
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != floor(d))
        return 0;
    if (out)
        *out = (int64_t)d;
    return 1;
}

sift_status sift__js_value_key(sift__js *c, const json_t *v, char **key)
{
    char num[40];
    int64_t i;
    *key = NULL;
    if (json_is_integer(v) || (json_is_real(v) && sift__js_integral(json_real_value(v), &i))) {
        long long x = json_is_integer(v) ? (long long)json_integer_value(v) : (long long)i;
        snprintf(num, sizeof num, "%lld", x);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        snprintf(num, sizeof num, "%.17g", d == 0 ? 0.0 : d);
    }
    char *k;
    if (json_is_number(v)) {
        size_t n = strlen(num) + 1;
        if ((k = malloc(n)))
            memcpy(k, num, n);
    } else {
        k = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    }
    if (!k)
        return sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
    /* a unit per value and per 64 bytes of its text: hashing and
     * comparing it are linear in that */
    sift_status st = sift__js_work(c, 1 + (int64_t)(strlen(k) / 64));
    if (st) {
        free(k);
        return st;
    }
    *key = k;
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* The driver                                                          */
/* ------------------------------------------------------------------ */

static sift_status read_params(sift_json_schema_params *pp, const sift_json_schema_params *p,
                               sift_error *err)
{
    sift_json_schema_params_init(pp);
    if (p) {
        if (p->struct_size == 0 || p->struct_size > sizeof *pp)
            return sift__fail(err, SIFT_E_ARG, "params->struct_size is %u (expected 1..%zu)",
                              (unsigned)p->struct_size, sizeof *pp);
        memcpy(pp, p, p->struct_size);
    }
    if (pp->whitespace != SIFT_JSON_WS_COMPACT && pp->whitespace != SIFT_JSON_WS_FLEXIBLE)
        return sift__fail(err, SIFT_E_ARG, "params->whitespace is %d (0 or 1)",
                          (int)pp->whitespace);
    if (pp->max_whitespace < 0 || pp->max_whitespace > 1000)
        return sift__fail(err, SIFT_E_ARG, "params->max_whitespace is %d (0 to 1000)",
                          (int)pp->max_whitespace);
    if (pp->unsupported != SIFT_JSON_UNSUPPORTED_ERROR &&
        pp->unsupported != SIFT_JSON_UNSUPPORTED_IGNORE)
        return sift__fail(err, SIFT_E_ARG, "params->unsupported is %d (0 or 1)",
                          (int)pp->unsupported);
    if (pp->format != SIFT_JSON_FORMAT_ASSERT && pp->format != SIFT_JSON_FORMAT_ANNOTATION)
        return sift__fail(err, SIFT_E_ARG, "params->format is %d (0 or 1)", (int)pp->format);
    if (pp->max_work < 1)
        return sift__fail(err, SIFT_E_ARG, "params->max_work must be >= 1");
    return SIFT_OK;
}

/* Appends the JSON string t[0..n) (between its quotes) decoded, as one
 * escaped pointer segment. The text is valid JSON up to here. */
static sift_status push_json_key(sift__js *c, const char *t, size_t n)
{
    sift_status st = sift__js_put(c, &c->path, "/", 1);
    for (size_t i = 0; !st && i < n; i++) {
        unsigned char buf[4];
        size_t bn = 1;
        uint32_t cp = (unsigned char)t[i];
        if (t[i] == '\\' && i + 1 < n) {
            static const char from[] = "bfnrt", to[] = "\b\f\n\r\t";
            char e = t[++i];
            const char *f = e ? strchr(from, e) : NULL;
            cp = (unsigned char)(f ? to[f - from] : e);
            if (e == 'u' && i + 4 < n) {
                cp = 0;
                for (int d = 1; d <= 4; d++)
                    cp = cp * 16 +
                         (uint32_t)(sift__hex_digit(t[i + d]) < 0 ? 0 : sift__hex_digit(t[i + d]));
                i += 4;
                if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < n && t[i + 1] == '\\' &&
                    t[i + 2] == 'u') {
                    uint32_t lo = 0;
                    for (int d = 3; d <= 6; d++)
                        lo = lo * 16 + (uint32_t)(sift__hex_digit(t[i + d]) < 0
                                                      ? 0
                                                      : sift__hex_digit(t[i + d]));
                    if (lo >= 0xDC00 && lo < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        i += 6;
                    }
                }
            }
        }
        if (cp < 0x80) {
            buf[0] = (unsigned char)cp;
        } else if (cp < 0x800) {
            buf[0] = (unsigned char)(0xC0 | (cp >> 6));
            buf[1] = (unsigned char)(0x80 | (cp & 0x3F));
            bn = 2;
        } else if (cp < 0x10000) {
            buf[0] = (unsigned char)(0xE0 | (cp >> 12));
            buf[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            buf[2] = (unsigned char)(0x80 | (cp & 0x3F));
            bn = 3;
        } else {
            buf[0] = (unsigned char)(0xF0 | (cp >> 18));
            buf[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            buf[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            buf[3] = (unsigned char)(0x80 | (cp & 0x3F));
            bn = 4;
        }
        if (bn == 1 && (buf[0] == '~' || buf[0] == '/'))
            st = sift__js_put(c, &c->path, buf[0] == '~' ? "~0" : "~1", 2);
        else
            st = sift__js_put(c, &c->path, (const char *)buf, bn);
    }
    return st;
}

/* One open container of the scan in pointer_at. */
typedef struct scan_frame {
    size_t mark;  /* the path's length before the container's segment */
    size_t index; /* the current element (arrays) */
    int object;
} scan_frame;

/* Sets the current place (c->path) to the JSON Pointer of the token that
 * ends at byte `pos` of the text (jansson read the text without error up
 * to there: its position after a bad token is the token's end), and
 * *tok, *tok_len to that token. A member key names the member (*is_key
 * set; the key is not pushed when `with_key` is 0). One scan, O(pos). */
static sift_status pointer_at(sift__js *c, size_t pos, int with_key, size_t *tok, size_t *tok_len,
                              int *is_key)
{
    const char *t = c->text;
    size_t n = c->len, depth = 0, cap = 0, i = 0;
    scan_frame *fr = NULL;
    int want_key = 0;
    sift_status st = sift__js_put(c, &c->path, "", 0);
    *tok = *tok_len = 0;
    *is_key = 0;
    while (!st && i < n) {
        char ch = t[i];
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == ':') {
            i++;
        } else if (ch == '{' || ch == '[') {
            if (sift__reserve(c->al, &fr, &cap, depth, depth + 1, sizeof *fr, 16)) {
                st = sift__js_fail(c, SIFT_E_NOMEM, NULL, "out of memory");
                break;
            }
            fr[depth++] = (scan_frame){c->path.n, 0, ch == '{'};
            want_key = ch == '{';
            if (ch == '[')
                st = sift__js_push_index(c, 0);
            i++;
        } else if (ch == '}' || ch == ']') {
            if (depth > 0)
                sift__js_pop(c, fr[--depth].mark);
            want_key = 0;
            i++;
        } else if (ch == ',') {
            if (depth > 0) {
                scan_frame *f = &fr[depth - 1];
                sift__js_pop(c, f->mark);
                want_key = f->object;
                if (!f->object)
                    st = sift__js_push_index(c, ++f->index);
            }
            i++;
        } else {
            size_t end = skip_value(t, n, i);
            int key = want_key && ch == '"';
            if (key && (with_key || end < pos))
                st = push_json_key(c, t + i + 1, end - i >= 2 ? end - i - 2 : 0);
            want_key = 0;
            if (end >= pos || end == i) {
                *tok = i;
                *tok_len = end - i;
                *is_key = key;
                break;
            }
            i = end;
        }
    }
    sift__free(c->al, fr);
    return st;
}

/* A parse error of a value that is JSON but that jansson cannot hold: a
 * number beyond its range or a \u0000 in a string or key. sift's own
 * message at the value's JSON Pointer. Returns 0 for other errors. */
static sift_status unholdable(sift__js *c, const json_error_t *je)
{
    enum json_error_code code = json_error_code(je);
    if (code != json_error_numeric_overflow && code != json_error_null_character &&
        code != json_error_null_byte_in_key)
        return SIFT_OK;
    size_t pos = je->position > 0 ? (size_t)je->position : 0, tok, tok_len;
    int is_key;
    int key_err = code == json_error_null_byte_in_key;
    sift_status st = pointer_at(c, pos > c->len ? c->len : pos, !key_err, &tok, &tok_len, &is_key);
    if (st)
        return st;
    int shown = tok_len > 40 ? 40 : (int)tok_len;
    const char *more = tok_len > 40 ? "..." : "";
    if (key_err)
        return sift__js_fail(c, SIFT_E_SCHEMA_UNSUPPORTED, NULL,
                             "the key %.*s%s holds \\u0000, which sift does not support", shown,
                             c->text + tok, more);
    if (code == json_error_null_character)
        return sift__js_fail(c, SIFT_E_SCHEMA_UNSUPPORTED, NULL,
                             "a string holding \\u0000 is not supported");
    if (memchr(c->text + tok, '.', tok_len) || memchr(c->text + tok, 'e', tok_len) ||
        memchr(c->text + tok, 'E', tok_len))
        return sift__js_fail(c, SIFT_E_SCHEMA_LIMIT, NULL,
                             "the number %.*s%s is beyond the range of a double", shown,
                             c->text + tok, more);
    return sift__js_fail(c, SIFT_E_SCHEMA_LIMIT, NULL,
                         "the integer %.*s%s is outside the 64-bit range sift reads (-2^63 to "
                         "2^63-1)",
                         shown, c->text + tok, more);
}

static sift_status parse(sift__js *c)
{
    json_error_t je;
    c->root = json_loadb(c->text, c->len, JSON_DECODE_ANY, &je);
    if (c->root) {
        const char *draft =
            json_string_value(json_is_object(c->root) ? json_object_get(c->root, "$schema") : NULL);
        c->int_fraction = !draft || (!strstr(draft, "draft-04") && !strstr(draft, "draft-03"));
        c->ref_alone =
            draft && (strstr(draft, "draft-07") || strstr(draft, "draft-06") || !c->int_fraction);
        return SIFT_OK;
    }
    if (json_error_code(&je) == json_error_out_of_memory)
        return sift__fail(c->err, SIFT_E_NOMEM, "%s: out of memory parsing the schema", c->source);
    sift_status st = unholdable(c, &je);
    if (st)
        return st;
    sift__fail(c->err, SIFT_E_SCHEMA_SYNTAX, "%s:%d:%d: %s", c->source, je.line, je.column,
               je.text);
    if (c->err) {
        c->place_len = message_place_len(c->err, c->source, je.line, je.column);
        c->err->line = je.line > 0 ? je.line : 0;
        c->err->column = je.column > 0 ? je.column : 0;
        c->err->offset = je.position;
        sift__strlcpy_utf8(c->err->source, c->source, sizeof c->err->source);
    }
    return SIFT_E_SCHEMA_SYNTAX;
}

static sift_status convert(sift__js *c, char **out, size_t *out_len)
{
    sift_status st = parse(c);
    if (!st)
        st = sift__js_ref_index(c);
    if (st)
        return st;
    sift__js_ref r;
    if ((st = sift__js_gen(c, c->root, &r)))
        return st;
    if (r.never)
        return sift__js_fail(c, SIFT_E_SCHEMA_UNSUPPORTED, NULL, "the schema admits no value");
    if ((st = sift__js_emit_shared(c)))
        return st;
    sift__js_buf all = {0};
    if ((st = sift__js_printf(c, &all, "root ::= %s\n", r.name)) ||
        (st = sift__js_put(c, &all, c->out.p, c->out.n))) {
        sift__js_buf_free(c, &all);
        return st;
    }
    *out = all.p;
    *out_len = all.n;
    return SIFT_OK;
}

static void cleanup(sift__js *c)
{
    json_decref(c->root);
    json_decref(c->ref_map);
    json_decref(c->ref_ids);
    json_decref(c->ref_nodes);
    sift__js_buf_free(c, &c->out);
    sift__js_buf_free(c, &c->path);
    for (size_t i = 0; i < c->n_refs; i++)
        sift__free(c->al, c->refs[i].pointer);
    sift__free(c->al, c->refs);
}

static sift_status to_gbnf(char **out, size_t *out_len, const char *schema, size_t len,
                           const sift_json_schema_params *params, sift_error *err, int64_t *work,
                           size_t *place);

sift_status sift_json_schema_to_gbnf(char **out, size_t *out_len, const char *schema, size_t len,
                                     const sift_json_schema_params *params, sift_error *err)
{
    int64_t work;
    size_t place;
    return to_gbnf(out, out_len, schema, len, params, err, &work, &place);
}

sift_status sift__json_schema_to_gbnf_work(char **out, size_t *out_len, const char *schema,
                                           size_t len, const sift_json_schema_params *params,
                                           sift_error *err, int64_t *work)
{
    size_t place;
    return to_gbnf(out, out_len, schema, len, params, err, work, &place);
}

sift_status sift__json_schema_to_gbnf_placed(char **out, size_t *out_len, const char *schema,
                                             size_t len, const sift_json_schema_params *params,
                                             sift_error *err, size_t *place_len)
{
    int64_t work;
    return to_gbnf(out, out_len, schema, len, params, err, &work, place_len);
}

static sift_status to_gbnf(char **out, size_t *out_len, const char *schema, size_t len,
                           const sift_json_schema_params *params, sift_error *err, int64_t *work,
                           size_t *place)
{
    *work = 0;
    *place = 0;
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!out || !out_len || (!schema && len > 0))
        return sift__fail(err, SIFT_E_ARG, "sift_json_schema_to_gbnf: NULL argument");
    sift_json_schema_params pp;
    sift__alloc al;
    sift_status st = read_params(&pp, params, err);
    if (st || (st = sift__alloc_init(&al, pp.allocator, err)))
        return st;
    const char *source = pp.source_name ? pp.source_name : "schema";
    if (len > pp.max_schema_bytes) {
        st = sift__fail(err, SIFT_E_SCHEMA_LIMIT, "%s: the schema has %zu bytes, over %zu", source,
                        len, pp.max_schema_bytes);
        if (err)
            sift__strlcpy_utf8(err->source, source, sizeof err->source);
        return st;
    }
    sift__js c;
    memset(&c, 0, sizeof c);
    c.al = &al;
    c.err = err;
    c.text = schema ? schema : "";
    c.len = len;
    c.source = source;
    c.flexible = pp.whitespace == SIFT_JSON_WS_FLEXIBLE;
    c.max_ws = pp.max_whitespace;
    c.strict = pp.strict != 0;
    c.ignore = pp.unsupported == SIFT_JSON_UNSUPPORTED_IGNORE;
    c.format_annotation = pp.format == SIFT_JSON_FORMAT_ANNOTATION;
    c.warn = pp.warn;
    c.warn_user = pp.warn_user;
    c.max_grammar = pp.max_grammar_bytes;
    c.max_work = pp.max_work;
    st = convert(&c, out, out_len);
    *work = c.work;
    *place = st ? c.place_len : 0;
    cleanup(&c);
    return st;
}

void sift_json_schema_free_gbnf(char *gbnf, const sift_json_schema_params *params)
{
    sift__alloc al;
    const sift_allocator *a = NULL;
    if (params && params->struct_size >=
                      offsetof(sift_json_schema_params, allocator) + sizeof params->allocator)
        a = params->allocator;
    if (gbnf && sift__alloc_init(&al, a, NULL) == SIFT_OK)
        sift__free(&al, gbnf);
}

/* GBNF errors of the generated text, as schema errors: the text is ours,
 * so only its limits and left recursion can be the schema's doing. */
static sift_status map_grammar_error(sift_status st, const char *source, sift_error *err)
{
    sift_status to = st;
    if (st == SIFT_E_GRAMMAR_LIMIT)
        to = SIFT_E_SCHEMA_LIMIT;
    else if (st == SIFT_E_GRAMMAR_LEFT_RECURSION)
        to = SIFT_E_SCHEMA_UNSUPPORTED;
    if (to != st && err) {
        char msg[SIFT_ERROR_MESSAGE_MAX];
        memcpy(msg, err->message, sizeof msg);
        sift__fail(err, to, "%s: the schema's grammar: %s", source, msg);
        sift__strlcpy_utf8(err->source, source, sizeof err->source);
    }
    return to;
}

sift_status sift_grammar_from_json_schema(sift_grammar **out, const char *schema, size_t len,
                                          const sift_vocab *vocab,
                                          const sift_json_schema_params *sparams,
                                          const sift_grammar_params *gparams, sift_error *err)
{
    if (out)
        *out = NULL;
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "sift_grammar_from_json_schema: NULL out");
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    if (gparams) {
        if (gparams->struct_size == 0 || gparams->struct_size > sizeof gp)
            return sift__fail(err, SIFT_E_ARG, "gparams->struct_size is %u (expected 1..%zu)",
                              (unsigned)gparams->struct_size, sizeof gp);
        memcpy(&gp, gparams, gparams->struct_size);
    }
    gp.root = NULL;
    gp.map_position = NULL;
    char *text = NULL;
    size_t n = 0;
    sift_status st = sift_json_schema_to_gbnf(&text, &n, schema, len, sparams, err);
    if (st)
        return st;
    const char *source = sparams && sparams->source_name ? sparams->source_name : "schema";
    if (!gp.source_name)
        gp.source_name = "the schema's GBNF";
    st = sift_grammar_new(out, text, n, vocab, &gp, err);
    sift_json_schema_free_gbnf(text, sparams);
    return st ? map_grammar_error(st, source, err) : SIFT_OK;
}

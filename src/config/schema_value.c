/*
 * schema_value.c - the values the schema reads: diagnostics, scalars, mappings.
 *
 * What it owns: the validator's diagnostics at a node (errors return 0
 * so a checker can report and fail in one statement), a printable echo
 * of a scalar, scalar typing as YAML 1.2's core schema has it (true and
 * false only, decimal integers as integers, floats parsed without the
 * locale), the checks of a mapping's keys (strings, no merge keys, no
 * duplicates, a did-you-mean for unknown ones) and token ids.
 *
 * Invariant: numbers never go through the C locale. Floats are checked
 * against the YAML grammar here and converted with strtod_l under the
 * "C" locale (or, where that is missing, with strtod after the syntax
 * check, which is exact only under a '.' locale; see docs/config.md).
 * This file calls no other schema file.
 */
#define _GNU_SOURCE 1

#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif

#include "schema.h"

void sift__cfg_vdiag(cfg_validator *v, sift_severity sev, sift_status code, int64_t off,
                     const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (sift__cfg_diag(v->cfg, sev, code, off, "%s", msg) != SIFT_OK)
        v->st = SIFT_E_NOMEM;
}

SIFT__PRINTF(4, 5)
int sift__cfg_err_at(cfg_validator *v, const cfg_node *n, sift_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sift__cfg_vdiag(v, SIFT_SEVERITY_ERROR, code, n ? n->off : -1, fmt, ap);
    va_end(ap);
    return 0;
}

SIFT__PRINTF(4, 5)
int sift__cfg_err_off(cfg_validator *v, int64_t off, sift_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sift__cfg_vdiag(v, SIFT_SEVERITY_ERROR, code, off, fmt, ap);
    va_end(ap);
    return 0;
}

SIFT__PRINTF(3, 4)
void sift__cfg_warn_at(cfg_validator *v, const cfg_node *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sift__cfg_vdiag(v, SIFT_SEVERITY_WARNING, SIFT_OK, n ? n->off : -1, fmt, ap);
    va_end(ap);
}

SIFT__PRINTF(3, 4)
void sift__cfg_warn_off(cfg_validator *v, int64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sift__cfg_vdiag(v, SIFT_SEVERITY_WARNING, SIFT_OK, off, fmt, ap);
    va_end(ap);
}

SIFT__PRINTF(4, 5)
void sift__cfg_warn_lc(cfg_validator *v, int32_t line, int32_t col, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (sift__cfg_diag_lc(v->cfg, SIFT_SEVERITY_WARNING, SIFT_OK, line, col, -1, "%s", msg) !=
        SIFT_OK)
        v->st = SIFT_E_NOMEM;
}

/* A short printable copy of a scalar for messages (two live at a time). */
const char *sift__cfg_echo(cfg_validator *v, const cfg_node *n)
{
    char *b = v->echo[v->echo_i++ & 1];
    size_t k = 0, cap = sizeof v->echo[0];
    for (size_t i = 0; i < n->len && k + 8 < cap; i++) {
        unsigned char c = (unsigned char)n->val[i];
        if (c < 0x20 || c == 0x7F)
            k += (size_t)snprintf(b + k, cap - k, "\\x%02x", c);
        else
            b[k++] = (char)c;
    }
    if (k + 8 >= cap) {
        /* cut at a UTF-8 boundary and mark the cut */
        while (k > 0 && ((unsigned char)b[k] & 0xC0) == 0x80)
            k--;
        memcpy(b + k, "...", 3);
        k += 3;
    }
    b[k] = '\0';
    return b;
}

int sift__cfg_streq(const cfg_node *n, const char *s)
{
    size_t l = strlen(s);
    return n->type == CFG_SCALAR && n->len == l && memcmp(n->val, s, l) == 0;
}

/* ------------------------------------------------------------------ */
/* Scalars                                                             */
/* ------------------------------------------------------------------ */

int sift__cfg_is_plain(const cfg_node *n)
{
    return n->type == CFG_SCALAR && n->style == SIFT_SCALAR_PLAIN;
}

int sift__cfg_is_null(const cfg_node *n)
{
    return sift__cfg_is_plain(n) &&
           (n->len == 0 || sift__cfg_streq(n, "~") || sift__cfg_streq(n, "null") ||
            sift__cfg_streq(n, "Null") || sift__cfg_streq(n, "NULL"));
}

int sift__cfg_is_bool_word(const cfg_node *n)
{
    static const char *const w[] = {"true", "false", "True", "False", "TRUE", "FALSE", "yes", "no",
                                    "Yes",  "No",    "YES",  "NO",    "on",   "off",   "On",  "Off",
                                    "ON",   "OFF",   "y",    "n",     "Y",    "N"};
    if (!sift__cfg_is_plain(n))
        return 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (sift__cfg_streq(n, w[i]))
            return 1;
    return 0;
}

/* Decimal integer syntax: [-+]?[0-9]+ */
int sift__cfg_int_syntax(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    if (i == n)
        return 0;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* Float syntax: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static int float_syntax(const char *s, size_t n)
{
    size_t i = 0, d = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, d++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, d++;
    }
    if (d == 0)
        return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        size_t e = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, e++;
        if (e == 0)
            return 0;
    }
    return i == n;
}

/* .inf, -.inf, +.inf, .nan in YAML 1.2 core spellings; 1/-1 for inf, 2
 * for nan, 0 if not special. */
static int special_float(const cfg_node *n)
{
    const char *s = n->val;
    size_t l = n->len;
    int neg = 0;
    if (l > 0 && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        s++, l--;
    }
    if ((l == 4 && (!memcmp(s, ".inf", 4) || !memcmp(s, ".Inf", 4) || !memcmp(s, ".INF", 4))))
        return neg ? -1 : 1;
    if (n->val[0] != '-' && n->val[0] != '+' && l == 4 &&
        (!memcmp(s, ".nan", 4) || !memcmp(s, ".NaN", 4) || !memcmp(s, ".NAN", 4)))
        return 2;
    return 0;
}

static double c_strtod(const char *s)
{
#if defined(__GLIBC__) || defined(__APPLE__) || defined(__FreeBSD__)
    /* glibc returns a static object for "C" without allocating. */
    locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c) {
        double d = strtod_l(s, NULL, c);
        freelocale(c);
        return d;
    }
#endif
    return strtod(s, NULL);
}

/* Explains why a plain scalar that looks numeric is not a YAML 1.2
 * decimal number; NULL if it does not look like one. */
const char *sift__cfg_number_hint(const cfg_node *n)
{
    const char *s = n->val;
    size_t l = n->len, i = 0;
    if (!sift__cfg_is_plain(n) || l == 0)
        return NULL;
    if (s[0] == '-' || s[0] == '+')
        i = 1;
    if (i + 1 < l && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X'))
        return "hexadecimal numbers are not supported; write it in decimal";
    if (i + 1 < l && s[i] == '0' && (s[i + 1] == 'o' || s[i + 1] == 'b'))
        return "octal and binary numbers are not supported; write it in decimal";
    if (memchr(s, '_', l) && s[i] >= '0' && s[i] <= '9')
        return "digit separators '_' are not supported; write the digits only";
    if (sift__cfg_int_syntax(s, l) && l > i + 1 && s[i] == '0')
        return "leading zeros are not allowed (they read as octal in YAML 1.1); drop them";
    /* C and JSON libraries print infinities and NaN as inf, -inf,
     * Infinity, nan: to YAML these are strings. */
    static const char *const words[] = {"inf", "Inf", "INF", "infinity", "Infinity", "INFINITY"};
    static const char *const nans[] = {"nan", "NaN", "NAN"};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        if (l - i == strlen(words[w]) && !memcmp(s + i, words[w], l - i))
            return s[0] == '-' ? "YAML spells negative infinity -.inf; this spelling is a string"
                               : "YAML spells infinity .inf; this spelling is a string";
    for (size_t w = 0; w < sizeof nans / sizeof nans[0]; w++)
        if (l - i == strlen(nans[w]) && !memcmp(s + i, nans[w], l - i))
            return "YAML spells NaN .nan; this spelling is a string";
    return NULL;
}

static const char *type_name(const cfg_node *n)
{
    if (n->type == CFG_SEQ)
        return "sequence";
    if (n->type == CFG_MAP)
        return "mapping";
    if (sift__cfg_is_null(n))
        return "null";
    if (sift__cfg_is_plain(n) && (sift__cfg_streq(n, "true") || sift__cfg_streq(n, "false")))
        return "boolean";
    if (sift__cfg_is_plain(n) && sift__cfg_int_syntax(n->val, n->len))
        return "integer";
    if (sift__cfg_is_plain(n) && (float_syntax(n->val, n->len) || special_float(n)))
        return "float";
    return "string";
}

int sift__cfg_type_err(cfg_validator *v, const cfg_node *n, const char *what, const char *expected)
{
    const char *t = type_name(n);
    if (n->type == CFG_SCALAR && !sift__cfg_is_null(n)) {
        const char *q = strcmp(t, "string") == 0 ? "'" : "";
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_TYPE, "%s: expected %s, got %s %s%s%s", what,
                                expected, t, q, sift__cfg_echo(v, n), q);
    }
    return sift__cfg_err_at(v, n, SIFT_E_CONFIG_TYPE, "%s: expected %s, got %s", what, expected, t);
}

/* A decimal integer. Returns 1 and *out, or 0 after reporting. */
int sift__cfg_get_int(cfg_validator *v, const cfg_node *n, const char *what, int64_t *out)
{
    if (n->bad)
        return 0;
    if (sift__cfg_is_plain(n)) {
        const char *h = sift__cfg_number_hint(n);
        if (h)
            return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: '%s': %s", what,
                                    sift__cfg_echo(v, n), h);
    }
    if (!sift__cfg_is_plain(n) || !sift__cfg_int_syntax(n->val, n->len) || sift__cfg_number_hint(n))
        return sift__cfg_type_err(v, n, what, "integer");
    const char *s = n->val;
    size_t i = 0;
    int neg = 0;
    if (s[0] == '-' || s[0] == '+')
        neg = s[i++] == '-';
    uint64_t acc = 0;
    for (; i < n->len; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (acc > (UINT64_MAX - d) / 10)
            return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: value out of range ('%s')",
                                    what, sift__cfg_echo(v, n));
        acc = acc * 10 + d;
    }
    if ((!neg && acc > (uint64_t)INT64_MAX) || (neg && acc > (uint64_t)INT64_MAX + 1))
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: value out of range ('%s')", what,
                                sift__cfg_echo(v, n));
    *out = neg ? (acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc) : (int64_t)acc;
    return 1;
}

/* An integer in [lo, hi]; the message names the range. */
int sift__cfg_get_int_in(cfg_validator *v, const cfg_node *n, const char *what, int64_t lo,
                         int64_t hi, int32_t *out)
{
    int64_t x;
    if (!sift__cfg_get_int(v, n, what, &x))
        return 0;
    if (x < lo || x > hi)
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be in [%lld, %lld], got %lld",
                                what, (long long)lo, (long long)hi, (long long)x);
    *out = (int32_t)x;
    return 1;
}

/* A number (integer or float syntax, or .inf/.nan) as a double. */
static int get_num(cfg_validator *v, const cfg_node *n, const char *what, double *out)
{
    if (n->bad)
        return 0;
    if (sift__cfg_is_plain(n)) {
        int sp = special_float(n);
        if (sp == 2) {
            *out = NAN;
            return 1;
        }
        if (sp) {
            *out = sp > 0 ? INFINITY : -INFINITY;
            return 1;
        }
        const char *h = sift__cfg_number_hint(n);
        if (h)
            return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: '%s': %s", what,
                                    sift__cfg_echo(v, n), h);
        if (float_syntax(n->val, n->len)) {
            errno = 0;
            double d = c_strtod(n->val);
            if (isinf(d))
                return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: value out of range ('%s')",
                                        what, sift__cfg_echo(v, n));
            *out = d;
            return 1;
        }
    }
    return sift__cfg_type_err(v, n, what, "number");
}

/* As get_num, then rounded to float: finite doubles beyond the float
 * range are out of range (infinities and NaN pass for range checks). */
int sift__cfg_get_float(cfg_validator *v, const cfg_node *n, const char *what, float *out)
{
    double d = 0;
    if (!get_num(v, n, what, &d))
        return 0;
    /* A double rounds to FLT_MAX up to half an ulp above it (2^103), so
     * FLT_MAX printed with %.8g (3.4028235e38) reads back as FLT_MAX. */
    if (isfinite(d) && fabs(d) >= (double)FLT_MAX + 0x1p103)
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE,
                                "%s: value out of range for a float ('%s')", what,
                                sift__cfg_echo(v, n));
    *out = (float)d;
    return 1;
}

/* A number in [lo, hi] (NaN rejected), as the message in BAD_INPUTS P-02. */
int sift__cfg_get_float_in(cfg_validator *v, const cfg_node *n, const char *what, double lo,
                           double hi, float *out)
{
    float f;
    if (!sift__cfg_get_float(v, n, what, &f))
        return 0;
    /* The bounds as floats: the value is a float, and a bound such as
     * 0.99 lies between two of them (0.99f itself is above 0.99). */
    if (!(f >= (float)lo && f <= (float)hi))
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE,
                                "%s must be a number in [%g, %g], got %s", what, lo, hi,
                                sift__cfg_echo(v, n));
    *out = f;
    return 1;
}

int sift__cfg_get_finite(cfg_validator *v, const cfg_node *n, const char *what, float *out)
{
    float f;
    if (!sift__cfg_get_float(v, n, what, &f))
        return 0;
    if (!isfinite(f))
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be a finite number, got %s",
                                what, sift__cfg_echo(v, n));
    *out = f;
    return 1;
}

int sift__cfg_get_bool(cfg_validator *v, const cfg_node *n, const char *what, int *out)
{
    if (n->bad)
        return 0;
    if (sift__cfg_streq(n, "true") && sift__cfg_is_plain(n)) {
        *out = 1;
        return 1;
    }
    if (sift__cfg_streq(n, "false") && sift__cfg_is_plain(n)) {
        *out = 0;
        return 1;
    }
    if (sift__cfg_is_bool_word(n))
        return sift__cfg_err_at(
            v, n, SIFT_E_CONFIG_VALUE,
            "%s: '%s' is not a boolean in YAML 1.2; use true or false (or quote it "
            "for a string)",
            what, sift__cfg_echo(v, n));
    return sift__cfg_type_err(v, n, what, "true or false");
}

/* Any non-null scalar as a string. */
int sift__cfg_get_str(cfg_validator *v, const cfg_node *n, const char *what)
{
    if (n->bad)
        return 0;
    if (n->type != CFG_SCALAR || sift__cfg_is_null(n))
        return sift__cfg_type_err(v, n, what, "string");
    return 1;
}

/* ------------------------------------------------------------------ */
/* Mappings                                                            */
/* ------------------------------------------------------------------ */

static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb, uint64_t *work)
{
    size_t row[65];
    if (na > 64 || nb > 64)
        return SIZE_MAX;
    *work += (uint64_t)(na + 1) * (nb + 1);
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* The closest allowed name, or NULL if none is close enough. At most 64
 * x 64 cells per name, and asked only for a diagnostic that is kept
 * (sift__cfg_keeps), so a file of 10^5 unknown keys costs 100 of them. */
const char *sift__cfg_did_you_mean(cfg_validator *v, const char *key, size_t len,
                                   const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t bd = SIZE_MAX;
    if (!sift__cfg_keeps(v->cfg, SIFT_SEVERITY_ERROR))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(names[i]);
        size_t d = edit_distance(key, len, names[i], nl, &v->cfg->work);
        size_t lim = len < 4 ? 1 : len < 8 ? 2 : 3;
        int prefix = len >= 3 && nl >= 3 &&
                     (!strncmp(names[i], key, len < nl ? len : nl) ||
                      (len > nl && !memcmp(key, names[i], nl)));
        if (prefix && d > lim)
            d = lim;
        if (d <= lim && d < bd) {
            bd = d;
            best = names[i];
        }
    }
    return best;
}

typedef struct key_ref {
    const char *s;
    size_t len;
    uint32_t idx;
} key_ref;

static int key_cmp(const void *a, const void *b)
{
    const key_ref *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    int c = memcmp(x->s, y->s, x->len);
    if (c)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Checks a mapping's keys: strings, no merge keys, no duplicates (first
 * one wins, later ones are errors naming the first), and, if `names` is
 * not NULL, only those names (with a did-you-mean). `ctx` prefixes the
 * messages ("" at top level). */
void sift__cfg_check_keys(cfg_validator *v, const cfg_node *map, const char *const *names,
                          size_t n_names, const char *ctx)
{
    size_t n = map->n_children / 2, k = 0;
    key_ref *refs = n ? sift__malloc(&v->cfg->al, n, sizeof *refs) : NULL;
    if (n && !refs) {
        v->st = SIFT_E_NOMEM;
        return;
    }
    for (uint32_t ki = map->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        uint32_t vi = key->next;
        if (key->bad) {
        } else if (key->type != CFG_SCALAR) {
            sift__cfg_err_at(v, key, SIFT_E_CONFIG_KEY, "%skeys must be strings, got a %s", ctx,
                             type_name(key));
        } else if (sift__cfg_is_plain(key) && sift__cfg_streq(key, "<<")) {
            sift__cfg_err_at(v, key, SIFT_E_CONFIG_KEY, "merge keys ('<<') are not supported");
        } else {
            refs[k].s = key->val;
            refs[k].len = key->len;
            refs[k].idx = ki;
            k++;
            if (names && sift__cfg_keeps(v->cfg, SIFT_SEVERITY_ERROR)) {
                int found = 0;
                for (size_t i = 0; i < n_names && !found; i++)
                    found = sift__cfg_streq(key, names[i]);
                if (!found) {
                    const char *dm = sift__cfg_did_you_mean(v, key->val, key->len, names, n_names);
                    if (dm)
                        sift__cfg_err_at(v, key, SIFT_E_CONFIG_KEY,
                                         "%sunknown key '%s' (did you mean '%s'?)", ctx,
                                         sift__cfg_echo(v, key), dm);
                    else
                        sift__cfg_err_at(v, key, SIFT_E_CONFIG_KEY, "%sunknown key '%s'", ctx,
                                         sift__cfg_echo(v, key));
                }
            }
        }
        ki = vi == CFG_NONE ? CFG_NONE : NODE(v, vi)->next;
    }
    if (k > 1) {
        qsort(refs, k, sizeof *refs, key_cmp);
        size_t first = 0;
        for (size_t i = 1; i < k && sift__cfg_keeps(v->cfg, SIFT_SEVERITY_ERROR); i++) {
            if (refs[i].len == refs[first].len && !memcmp(refs[i].s, refs[first].s, refs[i].len)) {
                const cfg_node *a = NODE(v, refs[first].idx), *b = NODE(v, refs[i].idx);
                sift__cfg_err_at(v, b, SIFT_E_CONFIG_KEY, "%sduplicate key '%s' (first at %d:%d)",
                                 ctx, sift__cfg_echo(v, b), (int)a->line, (int)a->col);
            } else {
                first = i;
            }
        }
    }
    sift__free(&v->cfg->al, refs);
}

/* The value of the first `name` key of a mapping, or NULL. */
const cfg_node *sift__cfg_find(cfg_validator *v, const cfg_node *map, const char *name)
{
    for (uint32_t ki = map->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        if (key->next == CFG_NONE)
            return NULL;
        if (!key->bad && sift__cfg_streq(key, name))
            return NODE(v, key->next);
        ki = NODE(v, key->next)->next;
    }
    return NULL;
}

/* The key node whose value is `val` (for positions). */
const cfg_node *sift__cfg_key_of(cfg_validator *v, const cfg_node *map, const cfg_node *val)
{
    for (uint32_t ki = map->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        if (key->next == CFG_NONE)
            return NULL;
        if (NODE(v, key->next) == val)
            return key;
        ki = NODE(v, key->next)->next;
    }
    return NULL;
}

/* A descriptor the flat form or a warning names (the registry has it). */
const sift__sampler_desc *sift__cfg_desc_named(const char *name)
{
    return sift__sampler_find(name, strlen(name));
}

/* A token id key of logit_bias / trigger tokens. */
int sift__cfg_token_id(cfg_validator *v, const cfg_node *n, const char *what, int32_t *out)
{
    if (n->bad)
        return 0;
    if (n->type == CFG_SCALAR && !sift__cfg_int_syntax(n->val, n->len) &&
        !sift__cfg_number_hint(n) && !float_syntax(n->val, n->len) && !sift__cfg_is_null(n)) {
        if (v->has_vocab_file)
            return sift__cfg_err_at(
                v, n, SIFT_E_CONFIG_TYPE,
                "%s: token text '%s' as a key is not supported yet; give the token id", what,
                sift__cfg_echo(v, n));
        return sift__cfg_err_at(
            v, n, SIFT_E_CONFIG_TYPE,
            "%s: expected a token id, got string '%s' (token text needs a vocabulary)", what,
            sift__cfg_echo(v, n));
    }
    int64_t x;
    if (!sift__cfg_get_int(v, n, what, &x))
        return 0;
    if (x < 0)
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: token %lld is negative", what,
                                (long long)x);
    int64_t lim = v->vocab_size ? v->vocab_size : SIFT_DEFAULT_MAX_VOCAB;
    if (x >= lim)
        return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE,
                                "%s: token %lld is out of range [0, %lld)%s", what, (long long)x,
                                (long long)lim, v->vocab_size ? " (vocab_size)" : " (max_vocab)");
    *out = (int32_t)x;
    return 1;
}

/*
 * schema.c - validates a configuration tree and turns it into stages.
 *
 * What it owns: the schema of docs/config.md (top-level keys, the
 * `chain:` list with its stages, llama.cpp's flat parameters, the grammar
 * section), scalar typing (YAML 1.2 core: true/false only, decimal
 * integers parsed as integers, floats parsed without the locale), every
 * error and warning about the content, and the translation of llama.cpp's
 * flat parameters into the chain its common sampler would build.
 *
 * It knows no sampler by code: a stage's name, parameters (type, range,
 * default, llama.cpp key), constructor and lint come from its descriptor
 * in the registry (src/samplers/registry.h); parsing a stage is a walk
 * over the descriptor's parameter table. What stays here is llama.cpp's
 * flat form itself: the order and no-op rules of common_sampler_init, the
 * mirostat switch, and the validation of its keys (which keeps the flat
 * form's own messages).
 *
 * Invariants:
 * - Every problem is reported, not just the first: a bad value is
 *   reported and validation goes on with the next one. A stage is pushed
 *   only when all of its values are valid, so a config with errors may
 *   hold a partial stage list, which the builder never uses.
 * - Nothing here recurses: the tree's depth is bounded by the loader and
 *   the schema itself is at most four levels deep.
 * - Numbers never go through the C locale: floats are checked against
 *   the YAML grammar here and converted with strtod_l under the "C"
 *   locale (or, where that is missing, with strtod after the syntax
 *   check, which is exact only under a '.' locale; see docs/config.md).
 */
#define _GNU_SOURCE 1

#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif

#include "../grammar/gbnf.h"
#include "../grammar/trigger.h"
#include "config_internal.h"

enum {
    MAX_TRIGGER_WORDS = 1024,
    MAX_TRIGGER_PATTERNS = 256,
    MAX_PATTERN_BYTES = 4096,
    MAX_TRIGGER_TOKENS = 1024,
    MAX_SPECIAL_TOKENS = 4096,
};

typedef struct V {
    sift_config *cfg;
    const cfg_tree *t;
    sift_status st; /* SIFT_E_NOMEM once something could not be stored */
    int32_t vocab_size;
    int has_vocab_file;
    char echo[2][96];
    int echo_i;
    int64_t *token_off; /* source offsets of the lazy trigger tokens */
    int32_t n_ctx;      /* the context size that -1 windows stand for; 0 = unset */
    const cfg_node *n_ctx_node;
    int flat; /* llama.cpp flat form */
} V;

#define NODE(v, i) (&(v)->t->nodes[(i)])

static void vdiag(V *v, sift_severity sev, sift_status code, int64_t off, const char *fmt,
                  va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (sift__cfg_diag(v->cfg, sev, code, off, "%s", msg) != SIFT_OK)
        v->st = SIFT_E_NOMEM;
}

SIFT__PRINTF(4, 5)
static int err_at(V *v, const cfg_node *n, sift_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdiag(v, SIFT_SEVERITY_ERROR, code, n ? n->off : -1, fmt, ap);
    va_end(ap);
    return 0;
}

SIFT__PRINTF(4, 5)
static int err_off(V *v, int64_t off, sift_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdiag(v, SIFT_SEVERITY_ERROR, code, off, fmt, ap);
    va_end(ap);
    return 0;
}

SIFT__PRINTF(3, 4)
static void warn_at(V *v, const cfg_node *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdiag(v, SIFT_SEVERITY_WARNING, SIFT_OK, n ? n->off : -1, fmt, ap);
    va_end(ap);
}

SIFT__PRINTF(3, 4)
static void vdiag_warn_off(V *v, int64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdiag(v, SIFT_SEVERITY_WARNING, SIFT_OK, off, fmt, ap);
    va_end(ap);
}

SIFT__PRINTF(4, 5)
static void warn_lc(V *v, int32_t line, int32_t col, const char *fmt, ...)
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
static const char *echo(V *v, const cfg_node *n)
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

static int streq(const cfg_node *n, const char *s)
{
    size_t l = strlen(s);
    return n->type == CFG_SCALAR && n->len == l && memcmp(n->val, s, l) == 0;
}

/* ------------------------------------------------------------------ */
/* Scalars                                                             */
/* ------------------------------------------------------------------ */

static int is_plain(const cfg_node *n)
{
    return n->type == CFG_SCALAR && n->style == SIFT_SCALAR_PLAIN;
}

static int is_null(const cfg_node *n)
{
    return is_plain(n) && (n->len == 0 || streq(n, "~") || streq(n, "null") || streq(n, "Null") ||
                           streq(n, "NULL"));
}

static int is_bool_word(const cfg_node *n)
{
    static const char *const w[] = {"true", "false", "True", "False", "TRUE", "FALSE", "yes", "no",
                                    "Yes",  "No",    "YES",  "NO",    "on",   "off",   "On",  "Off",
                                    "ON",   "OFF",   "y",    "n",     "Y",    "N"};
    if (!is_plain(n))
        return 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (streq(n, w[i]))
            return 1;
    return 0;
}

/* Decimal integer syntax: [-+]?[0-9]+ */
static int int_syntax(const char *s, size_t n)
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
static const char *number_hint(const cfg_node *n)
{
    const char *s = n->val;
    size_t l = n->len, i = 0;
    if (!is_plain(n) || l == 0)
        return NULL;
    if (s[0] == '-' || s[0] == '+')
        i = 1;
    if (i + 1 < l && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X'))
        return "hexadecimal numbers are not supported; write it in decimal";
    if (i + 1 < l && s[i] == '0' && (s[i + 1] == 'o' || s[i + 1] == 'b'))
        return "octal and binary numbers are not supported; write it in decimal";
    if (memchr(s, '_', l) && s[i] >= '0' && s[i] <= '9')
        return "digit separators '_' are not supported; write the digits only";
    if (int_syntax(s, l) && l > i + 1 && s[i] == '0')
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
    if (is_null(n))
        return "null";
    if (is_plain(n) && (streq(n, "true") || streq(n, "false")))
        return "boolean";
    if (is_plain(n) && int_syntax(n->val, n->len))
        return "integer";
    if (is_plain(n) && (float_syntax(n->val, n->len) || special_float(n)))
        return "float";
    return "string";
}

static int type_err(V *v, const cfg_node *n, const char *what, const char *expected)
{
    const char *t = type_name(n);
    if (n->type == CFG_SCALAR && !is_null(n)) {
        const char *q = strcmp(t, "string") == 0 ? "'" : "";
        return err_at(v, n, SIFT_E_CONFIG_TYPE, "%s: expected %s, got %s %s%s%s", what, expected, t,
                      q, echo(v, n), q);
    }
    return err_at(v, n, SIFT_E_CONFIG_TYPE, "%s: expected %s, got %s", what, expected, t);
}

/* A decimal integer. Returns 1 and *out, or 0 after reporting. */
static int get_int(V *v, const cfg_node *n, const char *what, int64_t *out)
{
    if (n->bad)
        return 0;
    if (is_plain(n)) {
        const char *h = number_hint(n);
        if (h)
            return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: '%s': %s", what, echo(v, n), h);
    }
    if (!is_plain(n) || !int_syntax(n->val, n->len) || number_hint(n))
        return type_err(v, n, what, "integer");
    const char *s = n->val;
    size_t i = 0;
    int neg = 0;
    if (s[0] == '-' || s[0] == '+')
        neg = s[i++] == '-';
    uint64_t acc = 0;
    for (; i < n->len; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (acc > (UINT64_MAX - d) / 10)
            return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: value out of range ('%s')", what,
                          echo(v, n));
        acc = acc * 10 + d;
    }
    if ((!neg && acc > (uint64_t)INT64_MAX) || (neg && acc > (uint64_t)INT64_MAX + 1))
        return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: value out of range ('%s')", what, echo(v, n));
    *out = neg ? (acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc) : (int64_t)acc;
    return 1;
}

/* An integer in [lo, hi]; the message names the range. */
static int get_int_in(V *v, const cfg_node *n, const char *what, int64_t lo, int64_t hi,
                      int32_t *out)
{
    int64_t x;
    if (!get_int(v, n, what, &x))
        return 0;
    if (x < lo || x > hi)
        return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be in [%lld, %lld], got %lld", what,
                      (long long)lo, (long long)hi, (long long)x);
    *out = (int32_t)x;
    return 1;
}

/* A number (integer or float syntax, or .inf/.nan) as a double. */
static int get_num(V *v, const cfg_node *n, const char *what, double *out)
{
    if (n->bad)
        return 0;
    if (is_plain(n)) {
        int sp = special_float(n);
        if (sp == 2) {
            *out = NAN;
            return 1;
        }
        if (sp) {
            *out = sp > 0 ? INFINITY : -INFINITY;
            return 1;
        }
        const char *h = number_hint(n);
        if (h)
            return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: '%s': %s", what, echo(v, n), h);
        if (float_syntax(n->val, n->len)) {
            errno = 0;
            double d = c_strtod(n->val);
            if (isinf(d))
                return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: value out of range ('%s')", what,
                              echo(v, n));
            *out = d;
            return 1;
        }
    }
    return type_err(v, n, what, "number");
}

/* As get_num, then rounded to float: finite doubles beyond the float
 * range are out of range (infinities and NaN pass for range checks). */
static int get_float(V *v, const cfg_node *n, const char *what, float *out)
{
    double d = 0;
    if (!get_num(v, n, what, &d))
        return 0;
    /* A double rounds to FLT_MAX up to half an ulp above it (2^103), so
     * FLT_MAX printed with %.8g (3.4028235e38) reads back as FLT_MAX. */
    if (isfinite(d) && fabs(d) >= (double)FLT_MAX + 0x1p103)
        return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: value out of range for a float ('%s')", what,
                      echo(v, n));
    *out = (float)d;
    return 1;
}

/* A number in [lo, hi] (NaN rejected), as the message in BAD_INPUTS P-02. */
static int get_float_in(V *v, const cfg_node *n, const char *what, double lo, double hi, float *out)
{
    float f;
    if (!get_float(v, n, what, &f))
        return 0;
    if (!(f >= lo && f <= hi))
        return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be a number in [%g, %g], got %s", what,
                      lo, hi, echo(v, n));
    *out = f;
    return 1;
}

static int get_finite(V *v, const cfg_node *n, const char *what, float *out)
{
    float f;
    if (!get_float(v, n, what, &f))
        return 0;
    if (!isfinite(f))
        return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be a finite number, got %s", what,
                      echo(v, n));
    *out = f;
    return 1;
}

static int get_bool(V *v, const cfg_node *n, const char *what, int *out)
{
    if (n->bad)
        return 0;
    if (streq(n, "true") && is_plain(n)) {
        *out = 1;
        return 1;
    }
    if (streq(n, "false") && is_plain(n)) {
        *out = 0;
        return 1;
    }
    if (is_bool_word(n))
        return err_at(v, n, SIFT_E_CONFIG_VALUE,
                      "%s: '%s' is not a boolean in YAML 1.2; use true or false (or quote it "
                      "for a string)",
                      what, echo(v, n));
    return type_err(v, n, what, "true or false");
}

/* Any non-null scalar as a string. */
static int get_str(V *v, const cfg_node *n, const char *what)
{
    if (n->bad)
        return 0;
    if (n->type != CFG_SCALAR || is_null(n))
        return type_err(v, n, what, "string");
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
static const char *did_you_mean(V *v, const char *key, size_t len, const char *const *names,
                                size_t n)
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
static void check_keys(V *v, const cfg_node *map, const char *const *names, size_t n_names,
                       const char *ctx)
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
            err_at(v, key, SIFT_E_CONFIG_KEY, "%skeys must be strings, got a %s", ctx,
                   type_name(key));
        } else if (is_plain(key) && streq(key, "<<")) {
            err_at(v, key, SIFT_E_CONFIG_KEY, "merge keys ('<<') are not supported");
        } else {
            refs[k].s = key->val;
            refs[k].len = key->len;
            refs[k].idx = ki;
            k++;
            if (names && sift__cfg_keeps(v->cfg, SIFT_SEVERITY_ERROR)) {
                int found = 0;
                for (size_t i = 0; i < n_names && !found; i++)
                    found = streq(key, names[i]);
                if (!found) {
                    const char *dm = did_you_mean(v, key->val, key->len, names, n_names);
                    if (dm)
                        err_at(v, key, SIFT_E_CONFIG_KEY, "%sunknown key '%s' (did you mean '%s'?)",
                               ctx, echo(v, key), dm);
                    else
                        err_at(v, key, SIFT_E_CONFIG_KEY, "%sunknown key '%s'", ctx, echo(v, key));
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
                err_at(v, b, SIFT_E_CONFIG_KEY, "%sduplicate key '%s' (first at %d:%d)", ctx,
                       echo(v, b), (int)a->line, (int)a->col);
            } else {
                first = i;
            }
        }
    }
    sift__free(&v->cfg->al, refs);
}

/* The value of the first `name` key of a mapping, or NULL. */
static const cfg_node *find(V *v, const cfg_node *map, const char *name)
{
    for (uint32_t ki = map->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        if (key->next == CFG_NONE)
            return NULL;
        if (!key->bad && streq(key, name))
            return NODE(v, key->next);
        ki = NODE(v, key->next)->next;
    }
    return NULL;
}

/* The key node whose value is `val` (for positions). */
static const cfg_node *key_of(V *v, const cfg_node *map, const cfg_node *val)
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

/* ------------------------------------------------------------------ */
/* Stages of a `chain:` list                                           */
/* ------------------------------------------------------------------ */

/* Parameter access for one stage: a scalar shorthand fills the
 * descriptor's main parameter, a mapping is looked up by name. */
typedef struct params {
    sift__lint lint; /* first: the descriptor's lint reports through it */
    V *v;
    const sift__sampler_desc *def;
    const cfg_node *scalar; /* shorthand value, or NULL */
    const cfg_node *map;    /* parameter mapping, or NULL */
    const cfg_node *at;     /* position of the stage */
    char what[64];
} params;

static const cfg_node *param(params *p, const char *key)
{
    if (p->scalar)
        return p->def->main && !strcmp(key, p->def->main) ? p->scalar : NULL;
    if (p->map)
        return find(p->v, p->map, key);
    return NULL;
}

/* "top_p" for the shorthand, "top_p.min_keep" for a mapping key. */
static const char *pname(params *p, const char *key)
{
    if (p->scalar && p->def->main && !strcmp(key, p->def->main))
        snprintf(p->what, sizeof p->what, "%s", p->def->name);
    else
        snprintf(p->what, sizeof p->what, "%s.%s", p->def->name, key);
    return p->what;
}

static int missing(params *p, const char *key)
{
    return err_at(p->v, p->map ? p->map : p->at, SIFT_E_CONFIG_KEY, "%s: missing '%s'",
                  p->def->name, key);
}

/* A window of accepted tokens; -1 is llama.cpp's "the context size",
 * which stands for n_ctx when the config gives one. */
static int window(V *v, const cfg_node *n, const char *what, int32_t *out)
{
    int64_t x;
    if (!get_int(v, n, what, &x))
        return 0;
    if (x == -1 && v->n_ctx > 0) {
        if (v->n_ctx > SIFT_DEFAULT_MAX_HISTORY)
            return err_at(v, n, SIFT_E_CONFIG_LIMIT,
                          "%s -1 is n_ctx %d, which exceeds max_history %d", what, (int)v->n_ctx,
                          SIFT_DEFAULT_MAX_HISTORY);
        *out = v->n_ctx;
        return 1;
    }
    if (x == -1)
        return err_at(v, n, SIFT_E_CONFIG_VALUE,
                      "%s is -1 (the context size): set n_ctx to the context size, or give a "
                      "window",
                      what);
    if (x < 0)
        return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be >= 0 (or -1 with n_ctx set), got %lld",
                      what, (long long)x);
    if (x > SIFT_DEFAULT_MAX_HISTORY)
        return err_at(v, n, SIFT_E_CONFIG_LIMIT, "%s %lld exceeds max_history %d", what,
                      (long long)x, SIFT_DEFAULT_MAX_HISTORY);
    *out = (int32_t)x;
    return 1;
}

/* Validates a sequence of strings (a SIFT__PT_STRING_LIST parameter, as
 * DRY's breakers) into the record. */
static int string_param(V *v, const sift__param *pm, const cfg_node *seq, const char *what,
                        void *rec)
{
    if (seq->bad)
        return 0;
    if (seq->type != CFG_SEQ)
        return type_err(v, seq, what, "sequence of strings");
    if (seq->n_children > pm->max_items)
        return err_at(v, seq, SIFT_E_CONFIG_LIMIT, "%s has %u entries; max %zu", what,
                      (unsigned)seq->n_children, pm->max_items);
    int ok = 1;
    size_t i = 0;
    for (uint32_t c = seq->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *b = NODE(v, c);
        char w[80];
        snprintf(w, sizeof w, "%s[%zu]", what, i);
        if (!get_str(v, b, w)) {
            ok = 0;
        } else if (b->len == 0) {
            ok = err_at(v, b, SIFT_E_CONFIG_VALUE, "%s %zu is empty", pm->item_noun, i);
        } else if (b->len > pm->max_item_bytes) {
            ok = err_at(v, b, SIFT_E_CONFIG_VALUE, "%s %zu is %zu bytes; max %zu", pm->item_noun, i,
                        b->len, pm->max_item_bytes);
        }
    }
    if (!ok)
        return 0;
    size_t n = seq->n_children;
    char ***strs = (char ***)(void *)((unsigned char *)rec + pm->off);
    size_t **lens = (size_t **)(void *)((unsigned char *)rec + pm->off_len);
    size_t *count = (size_t *)(void *)((unsigned char *)rec + pm->off_count);
    *strs = n ? sift__calloc(&v->cfg->al, n, sizeof **strs) : NULL;
    *lens = n ? sift__calloc(&v->cfg->al, n, sizeof **lens) : NULL;
    if (n && (!*strs || !*lens)) {
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    i = 0;
    for (uint32_t c = seq->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *b = NODE(v, c);
        (*strs)[i] = sift__memdup(&v->cfg->al, b->val, b->len);
        (*lens)[i] = b->len;
        *count = i + 1;
        if (!(*strs)[i]) {
            v->st = SIFT_E_NOMEM;
            return 0;
        }
    }
    return 1;
}

/* Copies a string list parameter's default into the record. */
static int string_default(V *v, const sift__param *pm, void *rec)
{
    size_t n = pm->n_def_strings;
    char ***strs = (char ***)(void *)((unsigned char *)rec + pm->off);
    size_t **lens = (size_t **)(void *)((unsigned char *)rec + pm->off_len);
    size_t *count = (size_t *)(void *)((unsigned char *)rec + pm->off_count);
    if (n == 0)
        return 1;
    *strs = sift__calloc(&v->cfg->al, n, sizeof **strs);
    *lens = sift__calloc(&v->cfg->al, n, sizeof **lens);
    if (!*strs || !*lens) {
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(pm->def_strings[i]);
        (*strs)[i] = sift__memdup(&v->cfg->al, pm->def_strings[i], l);
        (*lens)[i] = l;
        *count = i + 1;
        if (!(*strs)[i]) {
            v->st = SIFT_E_NOMEM;
            return 0;
        }
    }
    return 1;
}

void sift__cfg_stage_free(const sift__alloc *al, cfg_stage *st)
{
    const sift__sampler_desc *d = st->desc;
    for (size_t i = 0; d && i < d->n_params; i++) {
        const sift__param *pm = &d->params[i];
        unsigned char *rec = st->rec.b;
        if (pm->type == SIFT__PT_STRING_LIST) {
            char ***strs = (char ***)(void *)(rec + pm->off);
            size_t **lens = (size_t **)(void *)(rec + pm->off_len);
            size_t *count = (size_t *)(void *)(rec + pm->off_count);
            for (size_t k = 0; *strs && k < *count; k++)
                sift__free(al, (*strs)[k]);
            sift__free(al, *strs);
            sift__free(al, *lens);
            *strs = NULL;
            *lens = NULL;
            *count = 0;
        } else if (pm->type == SIFT__PT_ID_FLOAT_MAP) {
            sift_bias **b = (sift_bias **)(void *)(rec + pm->off);
            sift__free(al, *b);
            *b = NULL;
            *(size_t *)(void *)(rec + pm->off_count) = 0;
        }
    }
}

static void free_stage(V *v, cfg_stage *st)
{
    sift__cfg_stage_free(&v->cfg->al, st);
}

sift_status sift__cfg_push_stage(sift_config *cfg, const cfg_stage *st)
{
    if (sift__reserve(&cfg->al, &cfg->stages, &cfg->cap_stages, cfg->n_stages, cfg->n_stages + 1,
                      sizeof *cfg->stages, 8))
        return SIFT_E_NOMEM;
    cfg->stages[cfg->n_stages++] = *st;
    return SIFT_OK;
}

/* A descriptor the flat form or a warning names (the registry has it). */
static const sift__sampler_desc *desc_named(const char *name)
{
    return sift__sampler_find(name, strlen(name));
}

static int push(V *v, cfg_stage *st)
{
    if (sift__cfg_push_stage(v->cfg, st) != SIFT_OK) {
        v->st = SIFT_E_NOMEM;
        free_stage(v, st);
        return 0;
    }
    return 1;
}

/* A token id key of logit_bias / trigger tokens. */
static int token_id(V *v, const cfg_node *n, const char *what, int32_t *out)
{
    if (n->bad)
        return 0;
    if (n->type == CFG_SCALAR && !int_syntax(n->val, n->len) && !number_hint(n) &&
        !float_syntax(n->val, n->len) && !is_null(n)) {
        if (v->has_vocab_file)
            return err_at(v, n, SIFT_E_CONFIG_TYPE,
                          "%s: token text '%s' as a key is not supported yet; give the token id",
                          what, echo(v, n));
        return err_at(v, n, SIFT_E_CONFIG_TYPE,
                      "%s: expected a token id, got string '%s' (token text needs a vocabulary)",
                      what, echo(v, n));
    }
    int64_t x;
    if (!get_int(v, n, what, &x))
        return 0;
    if (x < 0)
        return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: token %lld is negative", what, (long long)x);
    int64_t lim = v->vocab_size ? v->vocab_size : SIFT_DEFAULT_MAX_VOCAB;
    if (x >= lim)
        return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s: token %lld is out of range [0, %lld)%s", what,
                      (long long)x, (long long)lim,
                      v->vocab_size ? " (vocab_size)" : " (max_vocab)");
    *out = (int32_t)x;
    return 1;
}

static int cmp_bias(const void *a, const void *b)
{
    const sift_bias *x = a, *y = b;
    return (x->token > y->token) - (x->token < y->token);
}

/* The (token, bias) entries of a logit_bias value: a mapping token id ->
 * bias, or (llama.cpp's JSON form) a sequence of [token, bias] pairs. */
typedef struct bias_entry {
    const cfg_node *key, *val;
} bias_entry;

/* A token id of logit_bias. The flat form also takes JSON's quoted ids
 * ("15"), as llama-server does; token text needs a tokenizer. */
static int bias_token(V *v, const cfg_node *n, int flat, int32_t *out)
{
    if (flat && n->type == CFG_SCALAR && !n->bad && !is_plain(n)) {
        if (n->len > 0 && int_syntax(n->val, n->len)) {
            cfg_node tmp = *n;
            tmp.style = SIFT_SCALAR_PLAIN;
            return token_id(v, &tmp, "logit_bias", out);
        }
        return err_at(v, n, SIFT_E_CONFIG_TYPE,
                      "logit_bias: token text '%s' needs a tokenizer, which sift does not have; "
                      "give the token id",
                      echo(v, n));
    }
    return token_id(v, n, "logit_bias", out);
}

/* A SIFT__PT_ID_FLOAT_MAP parameter (logit_bias) into the record. Returns 1
 * when the stage is to be added: valid, and not an empty flat map. */
static int bias_param(V *v, const sift__param *pm, const cfg_node *map, const cfg_node *at,
                      void *rec, int flat)
{
    const char *expect = flat ? "mapping of token id to bias, or a sequence of [token, bias] pairs"
                              : "mapping of token id to bias";
    if (!map || map->bad || is_null(map)) {
        if (!map || !map->bad)
            err_at(v, map ? map : at, SIFT_E_CONFIG_TYPE, "logit_bias: expected a %s", expect);
        return 0;
    }
    if (map->type != CFG_MAP && !(flat && map->type == CFG_SEQ)) {
        type_err(v, map, "logit_bias", expect);
        return 0;
    }
    size_t n = map->type == CFG_MAP ? map->n_children / 2 : map->n_children;
    int64_t cap = v->vocab_size ? v->vocab_size : SIFT_DEFAULT_MAX_VOCAB;
    if ((int64_t)n > cap) {
        err_at(v, map, SIFT_E_CONFIG_LIMIT, "logit_bias has %zu entries; max %lld", n,
               (long long)cap);
        return 0;
    }
    if (map->type == CFG_MAP)
        check_keys(v, map, NULL, 0, "logit_bias: ");
    sift_bias *b = n ? sift__malloc(&v->cfg->al, n, sizeof *b) : NULL;
    if (n && !b) {
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    size_t k = 0;
    int ok = 1;
    for (uint32_t ki = map->first; ki != CFG_NONE && !v->cfg->stopped;) {
        bias_entry e;
        const cfg_node *item = NODE(v, ki);
        if (map->type == CFG_MAP) {
            e.key = item;
            e.val = NODE(v, item->next);
            ki = e.val->next;
        } else {
            ki = item->next;
            if (item->bad) {
                ok = 0;
                continue;
            }
            if (item->type != CFG_SEQ || item->n_children != 2) {
                ok = err_at(v, item, SIFT_E_CONFIG_TYPE,
                            "logit_bias: an entry of the list is a [token, bias] pair");
                continue;
            }
            e.key = NODE(v, item->first);
            e.val = NODE(v, e.key->next);
        }
        const cfg_node *val = e.val;
        int32_t tok;
        float f = 0;
        int good = bias_token(v, e.key, flat, &tok);
        if (is_plain(val) && streq(val, "false")) {
            f = -INFINITY;
        } else if (is_plain(val) && is_bool_word(val)) {
            good = err_at(v, val, SIFT_E_CONFIG_VALUE,
                          "logit_bias: '%s' is not a bias; give a number, or false (or -.inf) "
                          "to ban the token",
                          echo(v, val));
        } else if (get_float(v, val, "logit_bias", &f)) {
            if (isnan(f) || f == INFINITY)
                good = err_at(v, val, SIFT_E_CONFIG_VALUE,
                              "logit_bias: bias must be a number or -.inf (ban), got %s",
                              echo(v, val));
        } else {
            good = 0;
        }
        if (good && ok) {
            b[k].token = tok;
            b[k].bias = f;
            k++;
        } else {
            ok = 0;
        }
    }
    if (ok && k > 1) {
        /* "15" and "+15" are different keys to YAML but the same token. */
        sift_bias *sorted = sift__malloc(&v->cfg->al, k, sizeof *sorted);
        if (!sorted) {
            v->st = SIFT_E_NOMEM;
            sift__free(&v->cfg->al, b);
            return 0;
        }
        memcpy(sorted, b, k * sizeof *b);
        qsort(sorted, k, sizeof *sorted, cmp_bias);
        for (size_t i = 1; i < k && ok; i++)
            if (sorted[i].token == sorted[i - 1].token)
                ok = err_at(v, map, SIFT_E_CONFIG_KEY, "logit_bias: token %d is listed twice",
                            (int)sorted[i].token);
        sift__free(&v->cfg->al, sorted);
    }
    if (!ok || k == 0) {
        sift__free(&v->cfg->al, b);
        if (ok && flat)
            return 0; /* an empty flat logit_bias adds no stage */
        if (!ok)
            return 0;
    }
    *(sift_bias **)(void *)((unsigned char *)rec + pm->off) = k ? b : NULL;
    *(size_t *)(void *)((unsigned char *)rec + pm->off_count) = k;
    return 1;
}

/* One number, boolean or choice parameter into the record, checked
 * against its range; `what` names it in messages. */
static int value_param(V *v, const sift__param *pm, const cfg_node *n, const char *what, void *rec)
{
    switch (pm->type) {
    case SIFT__PT_INT: {
        int32_t *out = SIFT__REC_FIELD(rec, pm, int32_t);
        if (pm->range == SIFT__R_IN)
            return get_int_in(v, n, what, (int64_t)pm->lo, (int64_t)pm->hi, out);
        if (pm->range == SIFT__R_ANY)
            return get_int_in(v, n, what, INT32_MIN, INT32_MAX, out);
        int64_t x;
        if (!get_int(v, n, what, &x))
            return 0;
        int64_t lo = (int64_t)pm->lo + (pm->range == SIFT__R_GT);
        if (x < lo || x > INT32_MAX)
            return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be %s %lld, got %lld", what,
                          pm->range == SIFT__R_GT ? ">" : ">=", (long long)pm->lo, (long long)x);
        *out = (int32_t)x;
        return 1;
    }
    case SIFT__PT_WINDOW: return window(v, n, what, SIFT__REC_FIELD(rec, pm, int32_t));
    case SIFT__PT_FLOAT: {
        float *out = SIFT__REC_FIELD(rec, pm, float);
        if (pm->range == SIFT__R_IN)
            return get_float_in(v, n, what, pm->lo, pm->hi, out);
        if (!get_finite(v, n, what, out))
            return 0;
        int bad = pm->range == SIFT__R_GE   ? *out < pm->lo
                  : pm->range == SIFT__R_GT ? !(*out > pm->lo)
                                            : 0;
        if (bad)
            return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be %s %g%s%s%s, got %s", what,
                          pm->range == SIFT__R_GT ? ">" : ">=", pm->lo, pm->range_note ? " (" : "",
                          pm->range_note ? pm->range_note : "", pm->range_note ? ")" : "",
                          echo(v, n));
        return 1;
    }
    case SIFT__PT_BOOL: return get_bool(v, n, what, SIFT__REC_FIELD(rec, pm, int));
    case SIFT__PT_ENUM: {
        if (!get_str(v, n, what))
            return 0;
        size_t nc = 0;
        for (; pm->choices[nc]; nc++)
            if (streq(n, pm->choices[nc])) {
                *SIFT__REC_FIELD(rec, pm, int) = (int)nc;
                return 1;
            }
        char list[160];
        size_t k = 0;
        for (size_t c = 0; c < nc && k < sizeof list; c++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s'%s'",
                                  c == 0        ? ""
                                  : c + 1 == nc ? " or "
                                                : ", ",
                                  pm->choices[c]);
        return err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be %s, got '%s'", what, list, echo(v, n));
    }
    case SIFT__PT_STRING_LIST: return string_param(v, pm, n, what, rec);
    case SIFT__PT_ID_FLOAT_MAP: return bias_param(v, pm, n, n, rec, 0);
    }
    return 0;
}

SIFT__PRINTF(3, 4)
static void lint_warn(sift__lint *l, const char *param_name, const char *fmt, ...)
{
    params *p = (params *)l;
    const cfg_node *n = param_name ? param(p, param_name) : NULL;
    va_list ap;
    va_start(ap, fmt);
    vdiag(p->v, SIFT_SEVERITY_WARNING, SIFT_OK, n ? n->off : p->at->off, fmt, ap);
    va_end(ap);
}

static const char *lint_text(sift__lint *l, const char *param_name)
{
    params *p = (params *)l;
    const cfg_node *n = param(p, param_name);
    return n ? echo(p->v, n) : "";
}

/* One `chain:` item. */
static void chain_item(V *v, const cfg_node *item, size_t index)
{
    if (item->bad)
        return;
    const cfg_node *name = NULL, *val = NULL;
    if (item->type == CFG_SCALAR) {
        name = item;
    } else if (item->type == CFG_MAP) {
        if (item->n_children != 2) {
            err_at(v, item, SIFT_E_CONFIG_TYPE,
                   "stage %zu: a stage is a mapping with one key (its name); this one has %u",
                   index + 1, (unsigned)(item->n_children / 2));
            return;
        }
        name = NODE(v, item->first);
        val = NODE(v, name->next);
        if (name->bad || val->bad)
            return;
        if (name->type != CFG_SCALAR) {
            err_at(v, name, SIFT_E_CONFIG_TYPE, "stage %zu: the stage name must be a string",
                   index + 1);
            return;
        }
        if (is_null(val))
            val = NULL;
    } else {
        type_err(v, item, "chain item", "a stage name or a mapping");
        return;
    }
    const sift__sampler_desc *def = sift__sampler_find(name->val, name->len);
    if (!def || name->type != CFG_SCALAR) {
        const char *names[64];
        size_t nn = 0;
        for (size_t i = 0; sift__samplers[i] && nn < 64; i++)
            names[nn++] = sift__samplers[i]->name;
        const char *dm = did_you_mean(v, name->val, name->len, names, nn);
        if (dm)
            err_at(v, name, SIFT_E_CONFIG_KEY, "unknown stage '%s' (did you mean '%s'?)",
                   echo(v, name), dm);
        else
            err_at(v, name, SIFT_E_CONFIG_KEY, "unknown stage '%s'", echo(v, name));
        return;
    }
    cfg_stage st;
    memset(&st, 0, sizeof st);
    st.desc = def;
    st.line = item->line;
    st.col = item->col;
    sift__rec_defaults(def, &st.rec, 1);
    if (def->value_is_param) {
        if (bias_param(v, &def->params[0], val, item, &st.rec, 0))
            push(v, &st);
        return;
    }
    params p = {{0}, v, def, NULL, NULL, item, {0}};
    if (!val) {
        if (!def->bare_ok) {
            err_at(v, name, SIFT_E_CONFIG_VALUE, "%s needs a value (%s: ...)", def->name,
                   def->name);
            return;
        }
    } else if (val->type == CFG_SCALAR) {
        if (!def->main) {
            err_at(v, val, SIFT_E_CONFIG_TYPE, "%s takes %s", def->name,
                   def->n_params ? "a mapping of parameters" : "no parameters");
            return;
        }
        p.scalar = val;
    } else if (val->type == CFG_MAP) {
        const char *keys[16];
        size_t nk = 0;
        for (size_t i = 0; i < def->n_params && nk < 16; i++)
            keys[nk++] = def->params[i].name;
        char ctx[64];
        snprintf(ctx, sizeof ctx, "%s: ", def->name);
        check_keys(v, val, keys, nk, ctx);
        p.map = val;
    } else {
        type_err(v, val, def->name, def->main ? "a number or a mapping" : "a mapping");
        return;
    }

    int ok = 1;
    for (size_t i = 0; i < def->n_params; i++) {
        const sift__param *pm = &def->params[i];
        const cfg_node *n = param(&p, pm->name);
        if (!n) {
            if (pm->required)
                ok = missing(&p, pm->name);
            else if (pm->type == SIFT__PT_STRING_LIST && ok && !string_default(v, pm, &st.rec)) {
                free_stage(v, &st);
                return;
            }
            continue;
        }
        ok &= value_param(v, pm, n, pname(&p, pm->name), &st.rec);
    }
    if (def->needs_vocab_size && !v->vocab_size && !v->has_vocab_file)
        ok = err_at(v, item, SIFT_E_CONFIG_VALUE,
                    "%s needs the vocabulary size: set vocab_size (or vocab)", def->name);
    if (ok && def->lint) {
        p.lint.vocab_size = v->vocab_size;
        p.lint.warn = lint_warn;
        p.lint.text = lint_text;
        def->lint(&st.rec, &p.lint);
    }
    if (ok)
        push(v, &st);
    else
        free_stage(v, &st);
}

/* "dist/greedy/..." : the selectors of the registry. */
static const char *selector_names(char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; sift__samplers[i] && k < cap; i++)
        if (sift__samplers[i]->selector)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? "/" : "", sift__samplers[i]->name);
    return buf;
}

/* The rule of P-14 over the items as written (names, not parsed stages,
 * so a bad parameter does not hide a misplaced selector). */
static void check_selectors(V *v, const cfg_node *chain)
{
    size_t i = 0, n = chain->n_children, first = SIZE_MAX;
    const cfg_node *last = NULL, *first_node = NULL;
    const char *last_name = "?", *first_name = NULL;
    for (uint32_t c = chain->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *item = NODE(v, c);
        const cfg_node *name =
            item->type == CFG_MAP && item->n_children >= 2 ? NODE(v, item->first) : item;
        const sift__sampler_desc *d =
            name->type == CFG_SCALAR ? sift__sampler_find(name->val, name->len) : NULL;
        const char *nm = d ? d->name : "?";
        if (item->bad || name->bad || name->type != CFG_SCALAR)
            return; /* already reported; a guess here would only add noise */
        last = item;
        last_name = nm;
        if (!d && NODE(v, c)->next == CFG_NONE)
            return; /* the last stage is unknown: that error says enough */
        if (!d || !d->selector)
            continue;
        if (first == SIZE_MAX) {
            first = i;
            first_node = item;
            first_name = nm;
        } else {
            err_at(v, item, SIFT_E_CONFIG_VALUE,
                   "chain has more than one selector: stage %zu (%s) and stage %zu (%s)", first + 1,
                   first_name, i + 1, nm);
        }
    }
    char sel[256];
    if (first == SIZE_MAX)
        err_at(v, last, SIFT_E_CONFIG_VALUE,
               "chain must end with exactly one of %s; stage %zu (%s) is last",
               selector_names(sel, sizeof sel), n, last_name);
    else if (first != n - 1 && first_node)
        err_at(v, first_node, SIFT_E_CONFIG_VALUE,
               "the selector must be the last stage; stage %zu (%s) is followed by stage %zu "
               "(%s)",
               first + 1, first_name, n, last_name);
}

static void chain_list(V *v, const cfg_node *chain)
{
    if (chain->bad)
        return;
    if (chain->type != CFG_SEQ) {
        type_err(v, chain, "chain", "sequence of stages");
        return;
    }
    if (chain->n_children == 0) {
        char sel[256];
        err_at(v, chain, SIFT_E_CONFIG_VALUE, "chain is empty; it must end with one of %s",
               selector_names(sel, sizeof sel));
        return;
    }
    if (chain->n_children > (uint32_t)v->cfg->params.max_stages) {
        err_at(v, chain, SIFT_E_CONFIG_LIMIT, "chain has %u stages; max %d",
               (unsigned)chain->n_children, (int)v->cfg->params.max_stages);
        return;
    }
    size_t i = 0;
    for (uint32_t c = chain->first; c != CFG_NONE && v->st == SIFT_OK; c = NODE(v, c)->next)
        chain_item(v, NODE(v, c), i++);
    check_selectors(v, chain);
}

/* ------------------------------------------------------------------ */
/* llama.cpp flat parameters                                           */
/* ------------------------------------------------------------------ */

/* The sampling keys of llama.cpp's common_params_sampling and of
 * llama-server's /completion request (params_from_json_cmpl) that belong
 * to no sampler of the registry: aliases, the sampler list, the mirostat
 * switch, and the keys sift reads only to refuse or ignore. The keys of
 * the samplers' parameters come from their descriptors (flat_key). */
static const char *const FLAT_KEYS[] = {
    "temperature",      "mirostat",        "samplers",       "n_probs",
    "ignore_eos",       "json_schema",     "grammar_lazy",   "grammar_triggers",
    "preserved_tokens", "adaptive_target", "adaptive_decay",
};
#define N_FLAT (sizeof FLAT_KEYS / sizeof FLAT_KEYS[0])

enum { MAX_REG_FLAT = 128 };

/* Every distinct flat key of the registry's parameters, with the first
 * parameter that names it (registry order). */
static size_t registry_flat_keys(const sift__param **out)
{
    size_t n = 0;
    for (size_t i = 0; sift__samplers[i]; i++)
        for (size_t k = 0; k < sift__samplers[i]->n_params; k++) {
            const sift__param *p = &sift__samplers[i]->params[k];
            int seen = !p->flat_key;
            for (size_t j = 0; j < n && !seen; j++)
                seen = !strcmp(out[j]->flat_key, p->flat_key);
            if (!seen && n < MAX_REG_FLAT)
                out[n++] = p;
        }
    return n;
}

static int is_flat_key(const cfg_node *key)
{
    const sift__param *reg[MAX_REG_FLAT];
    size_t nr = registry_flat_keys(reg);
    for (size_t i = 0; i < nr; i++)
        if (streq(key, reg[i]->flat_key))
            return 1;
    for (size_t i = 0; i < N_FLAT; i++)
        if (streq(key, FLAT_KEYS[i]))
            return 1;
    return 0;
}

/* Keys of a /completion request that are not sampling parameters: the
 * flat form accepts them so a request loads as it is, and warns that they
 * are ignored (docs/config.md). */
static const char *const IGNORED_KEYS[] = {
    "prompt",
    "n_predict",
    "max_tokens",
    "n_indent",
    "n_keep",
    "stream",
    "stream_options",
    "stop",
    "t_max_predict_ms",
    "t_max_prompt_ms",
    "id_slot",
    "cache_prompt",
    "return_tokens",
    "timings_per_token",
    "post_sampling_probs",
    "response_fields",
    "lora",
    "image_data",
    "multimodal_data",
    "return_progress",
    "n_cmpl",
    "n_discard",
    "verbose",
    "model",
    "chat_format",
    "reasoning_format",
    "backend_sampling",
    "speculative.n_max",
    "speculative.n_min",
    "speculative.p_min",
    "input_prefix",
    "input_suffix",
    "input_extra",
    "tokens",
};
#define N_IGNORED (sizeof IGNORED_KEYS / sizeof IGNORED_KEYS[0])

static const char *const BASE_KEYS[] = {"seed", "vocab_size", "vocab", "chain", "grammar", "n_ctx"};
#define N_BASE (sizeof BASE_KEYS / sizeof BASE_KEYS[0])
#define N_TOP (N_BASE + N_FLAT + MAX_REG_FLAT + N_IGNORED)

static int in_list(const cfg_node *key, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (streq(key, names[i]))
            return 1;
    return 0;
}

/* Names common's --samplers accepts that sift has no sampler for. */
static const char *const UNSUPPORTED_SAMPLERS[] = {"infill", "adaptive_p", "adaptive-p"};

/* The flat form's sampler names: every descriptor's flat names in
 * llama.cpp's default order, then the unsupported ones (desc NULL). */
typedef struct flat_name {
    const char *name;
    const sift__sampler_desc *desc;
} flat_name;

enum { MAX_FLAT_NAMES = 128, MAX_FLAT_ORDER = 32 };

/* The descriptors of the flat form in llama.cpp's default order. */
static size_t flat_order(const sift__sampler_desc **out)
{
    size_t n = 0;
    for (int o = 1; o <= MAX_FLAT_ORDER; o++)
        for (size_t i = 0; sift__samplers[i]; i++)
            if (sift__samplers[i]->flat_names && sift__samplers[i]->flat_order == o &&
                n < MAX_FLAT_ORDER)
                out[n++] = sift__samplers[i];
    return n;
}

static size_t flat_names(flat_name *out)
{
    const sift__sampler_desc *ord[MAX_FLAT_ORDER];
    size_t no = flat_order(ord), n = 0;
    for (size_t i = 0; i < no; i++)
        for (size_t k = 0; ord[i]->flat_names[k] && n < MAX_FLAT_NAMES; k++)
            out[n++] = (flat_name){ord[i]->flat_names[k], ord[i]};
    for (size_t i = 0; i < sizeof UNSUPPORTED_SAMPLERS / sizeof UNSUPPORTED_SAMPLERS[0]; i++)
        if (n < MAX_FLAT_NAMES)
            out[n++] = (flat_name){UNSUPPORTED_SAMPLERS[i], NULL};
    return n;
}

typedef struct flat {
    int32_t top_k, repeat_last_n, dry_allowed_length, dry_last_n, mirostat, min_keep;
    float top_p, min_p, typical_p, temp, dyn_range, dyn_exp, repeat, freq, presence;
    float dry_mult, dry_base, xtc_p, xtc_t, sigma, tau, eta;
} flat;

typedef struct order_item {
    const sift__sampler_desc *desc;
    int32_t line, col;
} order_item;

static int flat_float_in(V *v, const cfg_node *root, const char *key, double lo, double hi,
                         float *out)
{
    const cfg_node *n = find(v, root, key);
    return !n || get_float_in(v, n, key, lo, hi, out);
}

static int flat_finite(V *v, const cfg_node *root, const char *key, float *out)
{
    const cfg_node *n = find(v, root, key);
    return !n || get_finite(v, n, key, out);
}

/* Splits the `samplers` value ("a;b;c" or a list) into order items. */
static int sampler_order(V *v, const cfg_node *n, order_item *items, size_t *count)
{
    size_t k = 0;
    int ok = 1;
    const cfg_node *list[64];
    size_t nl = 0;
    flat_name names[MAX_FLAT_NAMES];
    size_t nn = flat_names(names);
    const sift__sampler_desc *ord[MAX_FLAT_ORDER];
    size_t no = flat_order(ord);
    char chars_of[MAX_FLAT_ORDER + 1];
    for (size_t i = 0; i < no; i++)
        chars_of[i] = ord[i]->flat_char;
    chars_of[no] = '\0';
    if (n->bad)
        return 0;
    if (n->type == CFG_SEQ) {
        for (uint32_t c = n->first; c != CFG_NONE && nl < 64; c = NODE(v, c)->next)
            list[nl++] = NODE(v, c);
        if (n->n_children > 64)
            return err_at(v, n, SIFT_E_CONFIG_LIMIT, "samplers has %u entries; max 64",
                          (unsigned)n->n_children);
    } else if (n->type == CFG_SCALAR && !is_null(n)) {
        list[nl++] = n;
    } else {
        return type_err(v, n, "samplers", "string (\"top_k;top_p;...\") or sequence");
    }
    for (size_t li = 0; li < nl; li++) {
        const cfg_node *s = list[li];
        if (!get_str(v, s, "samplers")) {
            ok = 0;
            continue;
        }
        /* llama-server reads a string as one character per sampler
         * ("kfypmt"); a string that is one of the names, or has a ';', is
         * a list of names (common's --samplers). */
        int chars = n->type == CFG_SCALAR && s->len > 0 && !memchr(s->val, ';', s->len);
        for (size_t t = 0; t < nn && chars; t++)
            if (strlen(names[t].name) == s->len && !memcmp(names[t].name, s->val, s->len))
                chars = 0;
        for (size_t c = 0; c < s->len && chars; c++)
            if (!memchr(chars_of, s->val[c], no))
                chars = 0;
        if (chars) {
            for (size_t c = 0; c < s->len; c++) {
                if (k == 64) {
                    ok = err_at(v, s, SIFT_E_CONFIG_LIMIT, "samplers: more than 64 entries");
                    break;
                }
                items[k].desc = ord[(const char *)memchr(chars_of, s->val[c], no) - chars_of];
                sift__cfg_linecol(&v->cfg->src, (size_t)sift__cfg_scalar_offset(v->cfg, s, c),
                                  &items[k].line, &items[k].col);
                k++;
            }
            continue;
        }
        size_t i = 0;
        while (i <= s->len && sift__cfg_keeps(v->cfg, SIFT_SEVERITY_ERROR)) {
            size_t j = i;
            while (j < s->len && s->val[j] != ';')
                j++;
            size_t a = i, b = j;
            while (a < b && (s->val[a] == ' ' || s->val[a] == '\t'))
                a++;
            while (b > a && (s->val[b - 1] == ' ' || s->val[b - 1] == '\t'))
                b--;
            if (b > a) {
                const flat_name *fn = NULL;
                for (size_t t = 0; t < nn && !fn; t++)
                    if (strlen(names[t].name) == b - a && !memcmp(names[t].name, s->val + a, b - a))
                        fn = &names[t];
                int64_t off = sift__cfg_scalar_offset(v->cfg, s, a);
                if (!fn) {
                    const char *nms[MAX_FLAT_NAMES];
                    for (size_t t = 0; t < nn; t++)
                        nms[t] = names[t].name;
                    char nm[48];
                    size_t l = b - a < sizeof nm - 1 ? b - a : sizeof nm - 1;
                    memcpy(nm, s->val + a, l);
                    nm[l] = '\0';
                    const char *dm = did_you_mean(v, nm, l, nms, nn);
                    ok =
                        err_off(v, off, SIFT_E_CONFIG_VALUE, "samplers: unknown sampler '%s'%s%s%s",
                                nm, dm ? " (did you mean '" : "", dm ? dm : "", dm ? "'?)" : "");
                } else if (!fn->desc) {
                    char nm[48];
                    size_t l = b - a < sizeof nm - 1 ? b - a : sizeof nm - 1;
                    memcpy(nm, s->val + a, l);
                    nm[l] = '\0';
                    ok = err_off(v, off, SIFT_E_CONFIG_VALUE,
                                 "samplers: '%s' is not supported by sift", nm);
                } else if (k < 64) {
                    items[k].desc = fn->desc;
                    sift__cfg_linecol(&v->cfg->src, (size_t)off, &items[k].line, &items[k].col);
                    k++;
                } else {
                    ok = err_off(v, off, SIFT_E_CONFIG_LIMIT, "samplers: more than 64 entries");
                    break;
                }
            }
            i = j + 1;
        }
    }
    *count = k;
    return ok;
}

/* A validated flat key and its value. */
typedef struct flat_value {
    const char *key;
    double val;
} flat_value;

/* Adds the stage of `d` with its parameters read from their flat keys
 * (llama.cpp's defaults for keys not given), if llama.cpp's constructor
 * would build it. String lists are validated only then, as llama.cpp
 * reads them only then. */
static void flat_stage(V *v, const sift__sampler_desc *d, const flat_value *fv, size_t n_fv,
                       int32_t line, int32_t col)
{
    cfg_stage st;
    memset(&st, 0, sizeof st);
    st.desc = d;
    st.line = line;
    st.col = col;
    sift__rec_defaults(d, &st.rec, 0);
    for (size_t i = 0; i < d->n_params; i++) {
        const sift__param *pm = &d->params[i];
        for (size_t k = 0; pm->flat_key && k < n_fv; k++) {
            if (strcmp(pm->flat_key, fv[k].key))
                continue;
            if (pm->type == SIFT__PT_FLOAT)
                *SIFT__REC_FIELD(&st.rec, pm, float) = (float)fv[k].val;
            else if (pm->type == SIFT__PT_INT || pm->type == SIFT__PT_WINDOW)
                *SIFT__REC_FIELD(&st.rec, pm, int32_t) = (int32_t)fv[k].val;
            else if (pm->type == SIFT__PT_BOOL || pm->type == SIFT__PT_ENUM)
                *SIFT__REC_FIELD(&st.rec, pm, int) = (int)fv[k].val;
        }
    }
    if (d->flat_active && !d->flat_active(&st.rec))
        return;
    for (size_t i = 0; i < d->n_params; i++) {
        const sift__param *pm = &d->params[i];
        if (pm->type != SIFT__PT_STRING_LIST)
            continue;
        const cfg_node *n = pm->flat_key ? find(v, NODE(v, v->t->root), pm->flat_key) : NULL;
        if (n ? !string_param(v, pm, n, pm->flat_key, &st.rec) : !string_default(v, pm, &st.rec)) {
            free_stage(v, &st);
            return;
        }
    }
    push(v, &st);
}

static void flat_params(V *v, const cfg_node *root)
{
    flat f = {40,   64,   2, -1, 0, 0,     0.95f, 0.05f, 1.0f,  0.8f, 0,
              1.0f, 1.0f, 0, 0,  0, 1.75f, 0,     0.1f,  -1.0f, 5.0f, 0.1f};
    int ok = 1;
    const cfg_node *n;
    if ((n = find(v, root, "top_k")))
        ok &= get_int_in(v, n, "top_k", INT32_MIN, INT32_MAX, &f.top_k);
    ok &= flat_float_in(v, root, "top_p", 0, 1, &f.top_p);
    ok &= flat_float_in(v, root, "min_p", 0, 1, &f.min_p);
    ok &= flat_float_in(v, root, "typical_p", 0, 1, &f.typical_p);
    /* llama-server's request says temperature, common's params temp. */
    const cfg_node *tk = find(v, root, "temperature");
    const char *tname = tk ? "temperature" : "temp";
    if (tk && find(v, root, "temp"))
        ok = err_at(v, key_of(v, root, tk), SIFT_E_CONFIG_KEY,
                    "give either 'temp' or 'temperature' (the same parameter), not both");
    ok &= flat_finite(v, root, tname, &f.temp);
    if ((n = find(v, root, tname)) && ok && f.temp < 0)
        warn_at(v, n, "%s %s < 0 acts as 0 (greedy), as in llama.cpp", tname, echo(v, n));
    if ((n = find(v, root, "dynatemp_range"))) {
        ok &= get_finite(v, n, "dynatemp_range", &f.dyn_range);
        if (ok && f.dyn_range < 0)
            ok = err_at(v, n, SIFT_E_CONFIG_VALUE, "dynatemp_range must be >= 0, got %s",
                        echo(v, n));
    }
    if ((n = find(v, root, "dynatemp_exponent"))) {
        ok &= get_finite(v, n, "dynatemp_exponent", &f.dyn_exp);
        if (ok && !(f.dyn_exp > 0))
            ok = err_at(v, n, SIFT_E_CONFIG_VALUE, "dynatemp_exponent must be > 0, got %s",
                        echo(v, n));
    }
    if ((n = find(v, root, "repeat_penalty"))) {
        ok &= get_finite(v, n, "repeat_penalty", &f.repeat);
        if (ok && !(f.repeat > 0))
            ok =
                err_at(v, n, SIFT_E_CONFIG_VALUE, "repeat_penalty must be > 0, got %s", echo(v, n));
    }
    if ((n = find(v, root, "repeat_last_n")))
        ok &= window(v, n, "repeat_last_n", &f.repeat_last_n);
    ok &= flat_finite(v, root, "frequency_penalty", &f.freq);
    ok &= flat_finite(v, root, "presence_penalty", &f.presence);
    if ((n = find(v, root, "dry_multiplier"))) {
        ok &= get_finite(v, n, "dry_multiplier", &f.dry_mult);
        if (ok && f.dry_mult < 0)
            ok = err_at(v, n, SIFT_E_CONFIG_VALUE, "dry_multiplier must be >= 0, got %s",
                        echo(v, n));
    }
    ok &= flat_finite(v, root, "dry_base", &f.dry_base);
    if ((n = find(v, root, "dry_allowed_length")))
        ok &= get_int_in(v, n, "dry_allowed_length", 0, INT32_MAX, &f.dry_allowed_length);
    const cfg_node *dry_last = find(v, root, "dry_penalty_last_n");
    int dry_on = f.dry_mult != 0 && f.dry_base >= 1;
    if (dry_last) {
        int64_t x;
        if (!get_int(v, dry_last, "dry_penalty_last_n", &x))
            ok = 0;
        else if (x == -1 && !dry_on)
            f.dry_last_n = 0;
        else if (window(v, dry_last, "dry_penalty_last_n", &f.dry_last_n) == 0)
            ok = 0;
    } else if (dry_on && ok && v->n_ctx > 0) {
        if (v->n_ctx > SIFT_DEFAULT_MAX_HISTORY)
            ok = err_at(v, v->n_ctx_node, SIFT_E_CONFIG_LIMIT,
                        "dry_penalty_last_n defaults to -1, n_ctx %d, which exceeds max_history %d",
                        (int)v->n_ctx, SIFT_DEFAULT_MAX_HISTORY);
        else
            f.dry_last_n = v->n_ctx;
    } else if (dry_on && ok) {
        ok = err_at(v, find(v, root, "dry_multiplier"), SIFT_E_CONFIG_VALUE,
                    "dry_penalty_last_n defaults to -1 (the context size): set n_ctx to the "
                    "context size, or dry_penalty_last_n to a window");
    }
    if (ok && f.dry_mult != 0 && f.dry_base < 1)
        warn_at(v, find(v, root, "dry_base"), "dry_base < 1 turns DRY off");
    ok &= flat_float_in(v, root, "xtc_probability", 0, 1, &f.xtc_p);
    ok &= flat_float_in(v, root, "xtc_threshold", 0, 1, &f.xtc_t);
    ok &= flat_finite(v, root, "top_n_sigma", &f.sigma);
    if ((n = find(v, root, "mirostat"))) {
        if (get_int_in(v, n, "mirostat", 0, 2, &f.mirostat)) {
            if (f.mirostat == 1 && !v->vocab_size && !v->has_vocab_file)
                ok = err_at(v, n, SIFT_E_CONFIG_VALUE,
                            "mirostat 1 needs the vocabulary size: set vocab_size (or vocab)");
        } else {
            ok = 0;
        }
    }
    if ((n = find(v, root, "mirostat_tau"))) {
        ok &= get_finite(v, n, "mirostat_tau", &f.tau);
        if (ok && f.tau < 0)
            ok = err_at(v, n, SIFT_E_CONFIG_VALUE, "mirostat_tau must be >= 0, got %s", echo(v, n));
    }
    if ((n = find(v, root, "mirostat_eta"))) {
        ok &= get_finite(v, n, "mirostat_eta", &f.eta);
        if (ok && f.eta < 0)
            ok = err_at(v, n, SIFT_E_CONFIG_VALUE, "mirostat_eta must be >= 0, got %s", echo(v, n));
    }
    if ((n = find(v, root, "min_keep")))
        ok &= get_int_in(v, n, "min_keep", 0, INT32_MAX, &f.min_keep);
    if ((n = find(v, root, "n_probs"))) {
        int32_t np;
        if (get_int_in(v, n, "n_probs", 0, INT32_MAX, &np))
            warn_at(v, n, "n_probs does not change sampling; ignored");
        else
            ok = 0;
    }
    if ((n = find(v, root, "ignore_eos"))) {
        int b = 0;
        if (!get_bool(v, n, "ignore_eos", &b))
            ok = 0;
        else if (b)
            ok = err_at(v, n, SIFT_E_CONFIG_VALUE,
                        "ignore_eos: true bans the vocabulary's end-of-generation tokens, which a "
                        "config does not know yet; ban them by id with logit_bias ([[id, false]])");
    }
    if ((n = find(v, root, "json_schema")) && !n->bad && !is_null(n))
        ok = err_at(v, n, SIFT_E_CONFIG_VALUE,
                    "json_schema is not supported yet; give the grammar it stands for as GBNF "
                    "(grammar)");
    if ((n = find(v, root, "grammar_lazy"))) {
        int b = 0;
        if (!get_bool(v, n, "grammar_lazy", &b))
            ok = 0;
        else if (b)
            ok = err_at(v, n, SIFT_E_CONFIG_VALUE,
                        "grammar_lazy is not supported in the flat form yet; give grammar as a "
                        "mapping with its lazy triggers (grammar.lazy)");
    }
    if ((n = find(v, root, "grammar_triggers")) && !n->bad && !is_null(n) &&
        !(n->type == CFG_SEQ && n->n_children == 0))
        ok = err_at(v, n, SIFT_E_CONFIG_VALUE,
                    "grammar_triggers is not supported in the flat form yet; give grammar as a "
                    "mapping with its lazy triggers (grammar.lazy)");
    if ((n = find(v, root, "preserved_tokens")))
        warn_at(v, n, "preserved_tokens does not change sampling; ignored");
    if ((n = find(v, root, "adaptive_target"))) {
        float t = 0;
        if (!get_finite(v, n, "adaptive_target", &t))
            ok = 0;
        else if (t >= 0)
            ok = err_at(v, n, SIFT_E_CONFIG_VALUE,
                        "adaptive_target %s turns on llama.cpp's adaptive-p sampler, which sift "
                        "does not have (a negative value leaves it off)",
                        echo(v, n));
    }
    if ((n = find(v, root, "adaptive_decay"))) {
        float d = 0;
        ok &= get_finite(v, n, "adaptive_decay", &d);
    }
    for (uint32_t ki = root->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        if (!key->bad && in_list(key, IGNORED_KEYS, N_IGNORED))
            warn_at(v, key, "'%s' is not a sampling parameter; ignored", echo(v, key));
        ki = key->next == CFG_NONE ? CFG_NONE : NODE(v, key->next)->next;
    }
    /* llama.cpp's common sampler puts the logit biases ahead of the
     * samplers list: stage 0. */
    if ((n = find(v, root, "logit_bias"))) {
        cfg_stage lb;
        memset(&lb, 0, sizeof lb);
        lb.desc = desc_named("logit_bias");
        lb.line = n->line;
        lb.col = n->col;
        size_t before = v->cfg->n_errors;
        if (bias_param(v, &lb.desc->params[0], n, n, &lb.rec, 1))
            push(v, &lb);
        if (v->cfg->n_errors != before)
            ok = 0;
    }
    order_item order[64];
    size_t n_order = 0;
    const cfg_node *sn = find(v, root, "samplers");
    if (sn) {
        ok &= sampler_order(v, sn, order, &n_order);
    } else {
        const sift__sampler_desc *ord[MAX_FLAT_ORDER];
        n_order = flat_order(ord);
        for (size_t i = 0; i < n_order; i++) {
            order[i].desc = ord[i];
            order[i].line = root->line;
            order[i].col = root->col;
        }
    }
    /* The values of llama.cpp's keys, as validated above; each stage's
     * record is filled from its parameters' flat keys. */
    const flat_value known[] = {
        {"top_k", f.top_k},
        {"top_p", f.top_p},
        {"min_p", f.min_p},
        {"typical_p", f.typical_p},
        {"temp", f.temp},
        {"dynatemp_range", f.mirostat ? 0 : f.dyn_range},
        {"dynatemp_exponent", f.dyn_exp},
        {"repeat_penalty", f.repeat},
        {"repeat_last_n", f.repeat_last_n},
        {"frequency_penalty", f.freq},
        {"presence_penalty", f.presence},
        {"dry_multiplier", f.dry_mult},
        {"dry_base", f.dry_base},
        {"dry_allowed_length", f.dry_allowed_length},
        {"dry_penalty_last_n", f.dry_last_n},
        {"xtc_probability", f.xtc_p},
        {"xtc_threshold", f.xtc_t},
        {"top_n_sigma", f.sigma},
        {"mirostat_tau", f.tau},
        {"mirostat_eta", f.eta},
        {"min_keep", f.min_keep},
    };
    flat_value fv[MAX_REG_FLAT + 32];
    size_t n_fv = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        fv[n_fv++] = known[i];
    /* The flat keys of the other samplers' number, boolean and choice
     * parameters: their descriptors' types and ranges. */
    const sift__param *reg[MAX_REG_FLAT];
    size_t nr = registry_flat_keys(reg);
    for (size_t i = 0; i < nr; i++) {
        const sift__param *pm = reg[i];
        int seen = pm->type == SIFT__PT_STRING_LIST || pm->type == SIFT__PT_ID_FLOAT_MAP;
        for (size_t k = 0; k < n_fv && !seen; k++)
            seen = !strcmp(fv[k].key, pm->flat_key);
        if (seen || n_fv == sizeof fv / sizeof fv[0])
            continue;
        sift__rec tmp;
        memset(&tmp, 0, sizeof tmp);
        sift__param at = *pm;
        at.off = 0;
        double val = pm->flat_def;
        const cfg_node *kn = find(v, root, pm->flat_key);
        if (kn && !value_param(v, &at, kn, pm->flat_key, &tmp)) {
            ok = 0;
        } else if (kn) {
            if (pm->type == SIFT__PT_FLOAT)
                val = *(const float *)(const void *)tmp.b;
            else if (pm->type == SIFT__PT_BOOL || pm->type == SIFT__PT_ENUM)
                val = *(const int *)(const void *)tmp.b;
            else
                val = *(const int32_t *)(const void *)tmp.b;
        }
        fv[n_fv++] = (flat_value){pm->flat_key, val};
    }
    if (!ok || v->st != SIFT_OK)
        return;

    /* The chain llama.cpp's common_sampler_init builds, without the
     * samplers its constructors turn into no-ops (docs/config.md). */
    if (f.mirostat == 0) {
        for (size_t i = 0; i < n_order && v->st == SIFT_OK; i++)
            flat_stage(v, order[i].desc, fv, n_fv, order[i].line, order[i].col);
        flat_stage(v, desc_named("dist"), fv, n_fv, root->line, root->col);
        return;
    }
    /* mirostat 1 or 2: temperature, then the mirostat selector; the
     * samplers list is ignored, as in llama.cpp. */
    if (sn)
        warn_at(v, sn, "samplers is ignored when mirostat is on");
    flat_stage(v, desc_named("temperature"), fv, n_fv, root->line, root->col);
    flat_stage(v, f.mirostat == 1 ? desc_named("mirostat") : desc_named("mirostat_v2"), fv, n_fv,
               root->line, root->col);
}

/* ------------------------------------------------------------------ */
/* Grammar                                                             */
/* ------------------------------------------------------------------ */

/* Checks a trigger pattern through the trigger module (its PCRE2 options
 * and compile path) to report syntax errors at their YAML place and to
 * warn about patterns that match the empty string (T-12). */
static int check_pattern(V *v, const cfg_node *n, const char *kind, size_t index, int full)
{
    if (n->len > MAX_PATTERN_BYTES)
        return err_at(v, n, SIFT_E_PATTERN_LIMIT, "%s %zu is %zu bytes; max %d", kind, index,
                      n->len, MAX_PATTERN_BYTES);
    size_t eoff = 0;
    int empty = 0;
    char msg[256];
    sift_status st = sift__trigger_check_pattern(n->val, n->len, full, &v->cfg->al, &eoff, &empty,
                                                 msg, sizeof msg);
    if (st == SIFT_E_NOMEM) {
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    if (st != SIFT_OK)
        return err_off(v, sift__cfg_scalar_offset(v->cfg, n, eoff), st, "%s %zu, offset %zu: %s",
                       kind, index, eoff, msg);
    if (empty)
        warn_at(v, n, "%s %zu matches the empty string; it fires at the first generated byte", kind,
                index);
    return 1;
}

/* Copies a sequence of strings (validated by `each`) into *out. */
static int string_list(V *v, const cfg_node *seq, const char *what, size_t cap, char ***out,
                       size_t **lens, size_t *count, int kind)
{
    if (seq->bad)
        return 0;
    if (seq->type != CFG_SEQ)
        return type_err(v, seq, what, "sequence of strings");
    if (seq->n_children > cap)
        return err_at(v, seq, kind ? SIFT_E_PATTERN_LIMIT : SIFT_E_CONFIG_LIMIT,
                      "%s has %u entries; max %zu", what, (unsigned)seq->n_children, cap);
    int ok = 1;
    size_t i = 0;
    for (uint32_t c = seq->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *s = NODE(v, c);
        char w[64];
        snprintf(w, sizeof w, "%s[%zu]", what, i);
        if (!get_str(v, s, w))
            ok = 0;
        else if (s->len == 0 && kind == 0)
            ok = err_at(v, s, SIFT_E_CONFIG_VALUE, "trigger word %zu is empty", i);
        else if (kind &&
                 !check_pattern(v, s, kind == 1 ? "trigger pattern" : "full pattern", i, kind == 2))
            ok = 0;
    }
    if (!ok || v->st != SIFT_OK)
        return 0;
    size_t n = seq->n_children;
    char **arr = sift__calloc(&v->cfg->al, n ? n : 1, sizeof *arr);
    size_t *ls = lens ? sift__calloc(&v->cfg->al, n ? n : 1, sizeof *ls) : NULL;
    if (!arr || (lens && !ls)) {
        sift__free(&v->cfg->al, arr);
        sift__free(&v->cfg->al, ls);
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    *out = arr;
    if (lens)
        *lens = ls;
    i = 0;
    for (uint32_t c = seq->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *s = NODE(v, c);
        arr[i] = sift__memdup(&v->cfg->al, s->val, s->len);
        if (!arr[i]) {
            v->st = SIFT_E_NOMEM;
            return 0;
        }
        if (ls)
            ls[i] = s->len;
        *count = i + 1;
    }
    return 1;
}

static int rule_name_ok(const cfg_node *n)
{
    if (n->len == 0)
        return 0;
    for (size_t i = 0; i < n->len; i++) {
        char c = n->val[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-'))
            return 0;
    }
    return 1;
}

/*
 * Compiles the grammar once (sift_grammar_new, without a vocabulary) so
 * that its errors are reported with the config's other problems. For an
 * inline grammar the error's byte offset in the text is mapped to the
 * YAML file through sift__cfg_scalar_offset (exact for literal blocks and
 * one-line quoted or plain scalars, the scalar's start otherwise), and the
 * grammar-relative line:col is kept in the message. For a grammar file
 * the diagnostic sits on the `file:` value and the message carries the
 * grammar file's own FILE:LINE:COL. Token references (<[id]>, <text>)
 * cannot be checked without a vocabulary: that one error is left to
 * sift_config_build_chain, which compiles with the runtime's vocabulary.
 */
static void compile_grammar_hook(V *v, const cfg_node *text_node, const cfg_node *file_node,
                                 const cfg_node *lazy_node)
{
    sift_config *cfg = v->cfg;
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.root = cfg->g_root;
    gp.source_name = cfg->g_file ? cfg->g_file : "grammar";
    gp.allocator = &cfg->al.a;
    gp.max_bytes = cfg->params.max_bytes;
    if (!file_node) {
        /* every position of an inline grammar's error, those quoted in
         * its message included, in the YAML file's coordinates */
        gp.map_position = sift__cfg_map_grammar;
        gp.map_user = cfg;
    }
    sift_grammar *g = NULL;
    sift_error ge;
    int needs_vocab = 0;
    sift_status st =
        sift__grammar_new_ex(&g, cfg->g_text, cfg->grammar.length, NULL, &gp, &needs_vocab, &ge);
    if (st == SIFT_OK && cfg->grammar.lazy &&
        cfg->grammar.n_words + cfg->grammar.n_patterns + cfg->grammar.n_full_patterns > 0) {
        /* The builder's judgement of the triggers (word and pattern
         * limits, PCRE2's options); token triggers need the vocabulary
         * and wait for sift_config_build_chain. */
        sift_lazy_params lp;
        sift_lazy_params_init(&lp);
        lp.words = (const char *const *)cfg->g_words;
        lp.word_lens = cfg->g_word_lengths;
        lp.n_words = cfg->grammar.n_words;
        lp.patterns = (const char *const *)cfg->g_patterns;
        lp.n_patterns = cfg->grammar.n_patterns;
        lp.full_patterns = (const char *const *)cfg->g_full_patterns;
        lp.n_full_patterns = cfg->grammar.n_full_patterns;
        sift_error le;
        sift_status ls = sift_grammar_set_lazy(g, &lp, &le);
        if (ls == SIFT_E_NOMEM)
            v->st = SIFT_E_NOMEM;
        else if (ls != SIFT_OK)
            err_at(v, lazy_node, ls, "grammar.lazy: %s", le.message);
    }
    sift_grammar_free(g);
    if (st == SIFT_OK)
        return;
    if (st == SIFT_E_NOMEM) {
        v->st = SIFT_E_NOMEM;
        return;
    }
    if (needs_vocab)
        return;
    if (file_node) {
        err_at(v, file_node, st, "grammar: %s", ge.message);
        return;
    }
    /* "grammar:L:C: text", L:C already the file's (map_position) */
    char prefix[64];
    snprintf(prefix, sizeof prefix, "grammar:%d:%d: ", (int)ge.line, (int)ge.column);
    const char *msg = ge.message;
    if (!strncmp(msg, prefix, strlen(prefix)))
        msg += strlen(prefix);
    int64_t off = ge.offset >= 0 ? sift__cfg_scalar_offset(cfg, text_node, (size_t)ge.offset)
                                 : text_node->off;
    err_off(v, off, st, "grammar: %s", msg);
}

static void grammar_section(V *v, const cfg_node *g)
{
    static const char *const KEYS[] = {"file", "text", "root", "mode", "lazy"};
    static const char *const LAZY_KEYS[] = {"words", "patterns", "full_patterns", "tokens"};
    sift_config *cfg = v->cfg;
    if (g->bad)
        return;
    /* llama.cpp's form: the GBNF text itself, in check mode (llama.cpp
     * samples, then checks the token against the grammar); "" = none. */
    int as_text = g->type == CFG_SCALAR && !is_null(g);
    if (as_text && g->len == 0)
        return;
    if (g->type != CFG_MAP && !as_text) {
        type_err(v, g, "grammar", "mapping (file or text, root, mode, lazy) or the grammar's text");
        return;
    }
    if (!as_text)
        check_keys(v, g, KEYS, 5, "grammar: ");
    const cfg_node *file = find(v, g, "file"), *text = as_text ? g : find(v, g, "text");
    int ok = 1;
    const cfg_node *text_node = NULL, *file_node = NULL;
    if (file && text) {
        ok = err_at(v, key_of(v, g, text), SIFT_E_CONFIG_KEY,
                    "grammar: use either 'file' or 'text', not both");
    } else if (!file && !text) {
        ok = err_at(v, g, SIFT_E_CONFIG_KEY, "grammar: missing 'file' or 'text'");
    } else if (text) {
        if (!get_str(v, text, "grammar.text")) {
            ok = 0;
        } else if (text->len == 0) {
            ok = err_at(v, text, SIFT_E_CONFIG_VALUE, "grammar.text is empty");
        } else if (text->len > cfg->params.max_bytes) {
            ok = err_at(v, text, SIFT_E_CONFIG_LIMIT, "grammar.text is %zu bytes; max %zu",
                        text->len, cfg->params.max_bytes);
        } else {
            cfg->g_text = sift__memdup(&cfg->al, text->val, text->len);
            if (!cfg->g_text) {
                v->st = SIFT_E_NOMEM;
                return;
            }
            cfg->grammar.length = text->len;
            cfg->grammar.style = (sift_scalar_style)text->style;
            cfg->g_node = *text;
            cfg->g_node.val = cfg->g_text;
            int64_t off = sift__cfg_scalar_offset(cfg, text, 0);
            sift__cfg_linecol(&cfg->src, (size_t)(off < 0 ? 0 : off), &cfg->grammar.line,
                              &cfg->grammar.column);
            text_node = text;
        }
    } else {
        if (!get_str(v, file, "grammar.file")) {
            ok = 0;
        } else {
            char msg[1024], *resolved = NULL, *data = NULL;
            size_t len = 0;
            sift_status st =
                sift__cfg_read_file(cfg, file->val, &resolved, &data, &len, msg, sizeof msg);
            if (st == SIFT_E_NOMEM) {
                sift__free(&cfg->al, resolved);
                v->st = SIFT_E_NOMEM;
                return;
            }
            if (st != SIFT_OK) {
                ok = err_at(v, file, st, "grammar: %s", msg);
                sift__free(&cfg->al, resolved);
            } else if (len == 0) {
                ok = err_at(v, file, SIFT_E_CONFIG_VALUE, "grammar: '%s' is empty", resolved);
                sift__free(&cfg->al, resolved);
                sift__free(&cfg->al, data);
            } else {
                cfg->g_file = resolved;
                file_node = file;
                cfg->g_text = data;
                cfg->grammar.length = len;
                cfg->grammar.style = SIFT_SCALAR_FILE;
                cfg->grammar.line = 1;
                cfg->grammar.column = 1;
            }
        }
    }
    const cfg_node *root = find(v, g, "root");
    const char *root_s = "root";
    size_t root_len = 4;
    if (root) {
        if (!get_str(v, root, "grammar.root")) {
            ok = 0;
        } else if (!rule_name_ok(root)) {
            ok = err_at(v, root, SIFT_E_CONFIG_VALUE,
                        "grammar.root '%s' is not a GBNF rule name (letters, digits and '-')",
                        echo(v, root));
        } else {
            root_s = root->val;
            root_len = root->len;
        }
    }
    const cfg_node *mode = find(v, g, "mode");
    cfg->grammar.mode = SIFT_GRAMMAR_CHECK;
    if (mode) {
        if (!get_str(v, mode, "grammar.mode"))
            ok = 0;
        else if (streq(mode, "constrain"))
            cfg->grammar.mode = SIFT_GRAMMAR_CONSTRAIN;
        else if (!streq(mode, "check"))
            ok = err_at(v, mode, SIFT_E_CONFIG_VALUE,
                        "grammar.mode must be 'check' or 'constrain', got '%s'", echo(v, mode));
    }
    cfg->g_root = sift__memdup(&cfg->al, root_s, root_len);
    if (!cfg->g_root) {
        v->st = SIFT_E_NOMEM;
        return;
    }
    const cfg_node *lazy = find(v, g, "lazy");
    if (lazy && !lazy->bad) {
        if (lazy->type != CFG_MAP) {
            ok = type_err(v, lazy, "grammar.lazy",
                          "mapping (words, patterns, full_patterns, "
                          "tokens)");
        } else {
            check_keys(v, lazy, LAZY_KEYS, 4, "grammar.lazy: ");
            cfg->grammar.lazy = 1;
            const cfg_node *n;
            if ((n = find(v, lazy, "words")))
                ok &= string_list(v, n, "grammar.lazy.words", MAX_TRIGGER_WORDS, &cfg->g_words,
                                  &cfg->g_word_lengths, &cfg->grammar.n_words, 0);
            if ((n = find(v, lazy, "patterns")))
                ok &= string_list(v, n, "grammar.lazy.patterns", MAX_TRIGGER_PATTERNS,
                                  &cfg->g_patterns, NULL, &cfg->grammar.n_patterns, 1);
            if ((n = find(v, lazy, "full_patterns")))
                ok &= string_list(v, n, "grammar.lazy.full_patterns", MAX_TRIGGER_PATTERNS,
                                  &cfg->g_full_patterns, NULL, &cfg->grammar.n_full_patterns, 2);
            if ((n = find(v, lazy, "tokens")) && !n->bad) {
                if (n->type != CFG_SEQ) {
                    ok = type_err(v, n, "grammar.lazy.tokens", "sequence of token ids");
                } else if (n->n_children > MAX_TRIGGER_TOKENS) {
                    ok = err_at(v, n, SIFT_E_CONFIG_LIMIT,
                                "grammar.lazy.tokens has %u entries; max %d",
                                (unsigned)n->n_children, MAX_TRIGGER_TOKENS);
                } else if (n->n_children) {
                    cfg->g_tokens = sift__calloc(&cfg->al, n->n_children, sizeof(int32_t));
                    v->token_off = sift__calloc(&cfg->al, n->n_children, sizeof(int64_t));
                    if (!cfg->g_tokens || !v->token_off) {
                        v->st = SIFT_E_NOMEM;
                        return;
                    }
                    size_t i = 0;
                    for (uint32_t c = n->first; c != CFG_NONE; c = NODE(v, c)->next) {
                        int32_t t;
                        if (token_id(v, NODE(v, c), "grammar.lazy.tokens", &t)) {
                            v->token_off[i] = NODE(v, c)->off;
                            cfg->g_tokens[i++] = t;
                        } else {
                            ok = 0;
                        }
                    }
                    cfg->grammar.n_tokens = i;
                }
            }
            if (ok && cfg->grammar.n_words + cfg->grammar.n_patterns +
                              cfg->grammar.n_full_patterns + cfg->grammar.n_tokens ==
                          0)
                warn_at(v, lazy, "grammar.lazy has no triggers; the grammar never activates");
        }
    }
    if (!ok || v->st != SIFT_OK)
        return;
    compile_grammar_hook(v, text_node, file_node, lazy);
    if (v->st != SIFT_OK || cfg->n_errors)
        return;
    cfg->grammar.text = cfg->g_text;
    cfg->grammar.root = cfg->g_root;
    cfg->grammar.file = cfg->g_file;
    cfg->grammar.words = (const char *const *)cfg->g_words;
    cfg->grammar.word_lengths = cfg->g_word_lengths;
    cfg->grammar.patterns = (const char *const *)cfg->g_patterns;
    cfg->grammar.full_patterns = (const char *const *)cfg->g_full_patterns;
    cfg->grammar.tokens = cfg->g_tokens;
    cfg->has_grammar = 1;
}

/* ------------------------------------------------------------------ */
/* Warnings over the whole chain                                       */
/* ------------------------------------------------------------------ */

/* The stage's class as its descriptor reports it; IDENTITY when it has no
 * class function (such a stage is neither a cut nor a whole-row reader
 * for these warnings). */
static sift_class stage_cls(const cfg_stage *s, int64_t *k)
{
    *k = 0;
    return s->desc->cls ? s->desc->cls(&s->rec, k) : SIFT_CLASS_IDENTITY;
}

/* A stage that needs the whole distribution (or a threshold) and so
 * forces the whole row when it runs before the first top-k. */
static int reads_whole(const cfg_stage *s)
{
    int64_t k;
    sift_class c = stage_cls(s, &k);
    return c == SIFT_CLASS_WHOLE || c == SIFT_CLASS_THRESHOLD;
}

static int is_top(const cfg_stage *s, int64_t *k)
{
    return stage_cls(s, k) == SIFT_CLASS_TOP;
}

typedef struct tok_ref {
    int32_t token;
    size_t idx;
} tok_ref;

static int tok_ref_cmp(const void *a, const void *b)
{
    const tok_ref *x = a, *y = b;
    if (x->token != y->token)
        return x->token < y->token ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* T-08 for one map of biases: each ban is looked up among the trigger
 * tokens (sorted), so the work is linear in the biases. */
static void ban_warnings(V *v, const sift_bias *biases, size_t n_biases, const tok_ref *refs,
                         size_t nt, size_t stage)
{
    for (size_t b = 0; b < n_biases; b++) {
        if (biases[b].bias != -INFINITY)
            continue;
        size_t lo = 0, hi = nt;
        v->cfg->work += 1 + 64 - (uint64_t)__builtin_clzll((unsigned long long)nt | 1);
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (refs[mid].token < biases[b].token)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < nt && refs[lo].token == biases[b].token; lo++)
            vdiag_warn_off(v, v->token_off ? v->token_off[refs[lo].idx] : -1,
                           "trigger token %d is banned by logit_bias (stage %zu); the "
                           "lazy grammar can never trigger",
                           (int)refs[lo].token, stage + 1);
    }
}

static void chain_warnings(V *v)
{
    sift_config *cfg = v->cfg;
    size_t n = cfg->n_stages, top = SIZE_MAX;
    int64_t top_k = 0;
    for (size_t i = 0; i < n && top == SIZE_MAX; i++)
        if (is_top(&cfg->stages[i], &top_k))
            top = i;
    /* a cut that is not temperature 0: a top-k of top_k tokens */
    if (top != SIZE_MAX && cfg->stages[top].desc == desc_named("top_k")) {
        for (size_t i = 0; i < top; i++) {
            const cfg_stage *s = &cfg->stages[i];
            if (!reads_whole(s))
                continue;
            const char *nm = s->desc->name;
            int64_t k;
            /* min_p keeps a superset of any top-k it does not cut below */
            if (s->desc == desc_named("min_p") &&
                *(const int32_t *)(const void *)((const unsigned char *)s->rec.b +
                                                 sift__param_find(s->desc, "min_keep")->off) <=
                    top_k)
                warn_lc(v, s->line, s->col,
                        "min_p before top_k makes every step read the whole row; put top_k "
                        "first (the two commute: same tokens, and a runtime copies only the "
                        "top %d logits)",
                        (int)top_k);
            else
                warn_lc(v, s->line, s->col,
                        "%s before top_k makes every step read the whole row; with top_k first "
                        "a runtime copies only the top %d logits (%s then sees only those)",
                        nm, (int)top_k, nm);
            (void)k;
        }
    }
    if (n > 0 && cfg->stages[n - 1].desc == desc_named("greedy")) {
        for (size_t i = 0; i + 1 < n; i++)
            if (cfg->stages[i].desc->keeps_argmax)
                warn_lc(v, cfg->stages[i].line, cfg->stages[i].col,
                        "%s before greedy cannot change the result (greedy takes the most "
                        "likely token)",
                        cfg->stages[i].desc->name);
    }
    for (size_t i = 0; i < n; i++) {
        const cfg_stage *s = &cfg->stages[i];
        if (s->desc->selector)
            continue;
        size_t first = SIZE_MAX;
        for (size_t j = 0; j < i && first == SIZE_MAX; j++)
            if (cfg->stages[j].desc == s->desc)
                first = j;
        if (first != SIZE_MAX)
            warn_lc(v, s->line, s->col,
                    "%s is listed twice (also stage %zu); both are applied in turn", s->desc->name,
                    first + 1);
    }
    /* T-08: a trigger token that a logit_bias bans can never appear. Each
     * ban is looked up among the trigger tokens (sorted copy), so the work
     * is linear in the biases, not their product with the triggers. */
    size_t nt = cfg->has_grammar ? cfg->grammar.n_tokens : 0;
    if (nt == 0)
        return;
    tok_ref *refs = sift__malloc(&cfg->al, nt, sizeof *refs);
    if (!refs) {
        v->st = SIFT_E_NOMEM;
        return;
    }
    for (size_t t = 0; t < nt; t++) {
        refs[t].token = cfg->g_tokens[t];
        refs[t].idx = t;
    }
    qsort(refs, nt, sizeof *refs, tok_ref_cmp);
    for (size_t i = 0; i < n; i++) {
        const cfg_stage *s = &cfg->stages[i];
        for (size_t pi = 0; pi < s->desc->n_params; pi++) {
            const sift__param *pm = &s->desc->params[pi];
            if (pm->type != SIFT__PT_ID_FLOAT_MAP)
                continue;
            const sift_bias *biases = *(sift_bias *const *)(const void *)(s->rec.b + pm->off);
            size_t n_biases = *(const size_t *)(const void *)(s->rec.b + pm->off_count);
            ban_warnings(v, biases, n_biases, refs, nt, i);
        }
    }
    sift__free(&cfg->al, refs);
}

/* ------------------------------------------------------------------ */
/* The document                                                        */
/* ------------------------------------------------------------------ */

/* The vocabulary file: a .tiktoken or .gguf path that must open as a
 * regular file (the same helper the loaders use, so `sift check` and
 * the build path judge it alike). Only opened: a .gguf holds the model
 * too and can be far larger than any config cap; the loaders read it. */
static void vocab_file(V *v, const cfg_node *n)
{
    sift_config *cfg = v->cfg;
    if (!get_str(v, n, "vocab"))
        return;
    size_t l = n->len;
    int tik = l > 9 && !memcmp(n->val + l - 9, ".tiktoken", 9);
    int gguf = l > 5 && !memcmp(n->val + l - 5, ".gguf", 5);
    if (!tik && !gguf) {
        err_at(v, n, SIFT_E_CONFIG_VALUE, "vocab must be a .tiktoken or .gguf file, got '%s'",
               echo(v, n));
        return;
    }
    size_t nb = strlen(cfg->base_dir);
    char *resolved;
    if (n->val[0] == '/' || nb == 0) {
        resolved = sift__memdup(&cfg->al, n->val, n->len);
    } else {
        resolved = sift__malloc(&cfg->al, nb + n->len + 2, 1);
        if (resolved) {
            memcpy(resolved, cfg->base_dir, nb);
            resolved[nb] = '/';
            memcpy(resolved + nb + 1, n->val, n->len + 1);
        }
    }
    if (!resolved) {
        v->st = SIFT_E_NOMEM;
        return;
    }
    int fd;
    uint64_t size;
    sift_error e;
    if (sift__file_open(resolved, UINT64_MAX, &fd, &size, &e) != SIFT_OK) {
        err_at(v, n, SIFT_E_IO, "vocab: %s", e.message);
        sift__free(&cfg->al, resolved);
        return;
    }
    close(fd);
    cfg->vocab_path = resolved;
    v->has_vocab_file = 1;
}

/* vocab.special: a mapping token text -> id (the tokens a tiktoken file
 * leaves out). Ids are checked against vocab_size when it is set. */
static void vocab_special(V *v, const cfg_node *map)
{
    sift_config *cfg = v->cfg;
    if (map->bad)
        return;
    if (map->type != CFG_MAP) {
        type_err(v, map, "vocab.special", "mapping of token text to id");
        return;
    }
    check_keys(v, map, NULL, 0, "vocab.special: ");
    size_t n = map->n_children / 2;
    if (n > MAX_SPECIAL_TOKENS) {
        err_at(v, map, SIFT_E_CONFIG_LIMIT, "vocab.special has %zu entries; max %d", n,
               MAX_SPECIAL_TOKENS);
        return;
    }
    if (n == 0)
        return;
    char **texts = sift__calloc(&cfg->al, n, sizeof *texts);
    int32_t *ids = sift__calloc(&cfg->al, n, sizeof *ids);
    if (!texts || !ids) {
        sift__free(&cfg->al, texts);
        sift__free(&cfg->al, ids);
        v->st = SIFT_E_NOMEM;
        return;
    }
    cfg->v_special_texts = texts;
    cfg->v_special_ids = ids;
    size_t k = 0;
    for (uint32_t ki = map->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        if (key->next == CFG_NONE)
            break;
        const cfg_node *val = NODE(v, key->next);
        ki = val->next;
        if (key->bad || key->type != CFG_SCALAR)
            continue;
        if (key->len == 0) {
            err_at(v, key, SIFT_E_CONFIG_VALUE, "vocab.special: a token text is empty");
            continue;
        }
        if (memchr(key->val, '\0', key->len)) {
            err_at(v, key, SIFT_E_CONFIG_VALUE, "vocab.special: token text contains a NUL byte");
            continue;
        }
        int64_t x;
        if (!get_int(v, val, "vocab.special", &x))
            continue;
        int64_t lim = v->vocab_size ? v->vocab_size : SIFT_DEFAULT_MAX_VOCAB;
        if (x < 0 || x >= lim) {
            err_at(v, val, SIFT_E_CONFIG_VALUE,
                   "vocab.special: '%s': token %lld is out of range [0, %lld)%s", echo(v, key),
                   (long long)x, (long long)lim, v->vocab_size ? " (vocab_size)" : " (max_vocab)");
            continue;
        }
        for (size_t j = 0; j < k; j++)
            if (ids[j] == (int32_t)x) {
                err_at(v, val, SIFT_E_CONFIG_VALUE, "vocab.special: '%s' has id %lld, as '%s' has",
                       echo(v, key), (long long)x, texts[j]);
                x = -1;
                break;
            }
        if (x < 0)
            continue;
        texts[k] = sift__memdup(&cfg->al, key->val, key->len);
        if (!texts[k]) {
            v->st = SIFT_E_NOMEM;
            return;
        }
        ids[k] = (int32_t)x;
        cfg->n_v_special = ++k;
    }
}

/* vocab.eog: a list of end-of-generation ids, or texts of special
 * tokens given in vocab.special. */
static void vocab_eog(V *v, const cfg_node *seq)
{
    sift_config *cfg = v->cfg;
    if (seq->bad)
        return;
    if (seq->type != CFG_SEQ) {
        type_err(v, seq, "vocab.eog", "sequence of token ids");
        return;
    }
    size_t n = seq->n_children;
    if (n > MAX_SPECIAL_TOKENS) {
        err_at(v, seq, SIFT_E_CONFIG_LIMIT, "vocab.eog has %zu entries; max %d", n,
               MAX_SPECIAL_TOKENS);
        return;
    }
    if (n == 0)
        return;
    int32_t *ids = sift__calloc(&cfg->al, n, sizeof *ids);
    if (!ids) {
        v->st = SIFT_E_NOMEM;
        return;
    }
    cfg->v_eog = ids;
    size_t i = 0;
    for (uint32_t c = seq->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *e = NODE(v, c);
        char what[32];
        snprintf(what, sizeof what, "vocab.eog[%zu]", i);
        if (e->bad)
            continue;
        if (e->type == CFG_SCALAR && (!is_plain(e) || !int_syntax(e->val, e->len))) {
            /* A text names a special token of this section. */
            size_t j = 0;
            while (j < cfg->n_v_special && !(strlen(cfg->v_special_texts[j]) == e->len &&
                                             !memcmp(cfg->v_special_texts[j], e->val, e->len)))
                j++;
            if (j == cfg->n_v_special) {
                err_at(v, e, SIFT_E_CONFIG_VALUE,
                       "%s: '%s' is not a token of vocab.special (give its id)", what, echo(v, e));
                continue;
            }
            ids[cfg->n_v_eog++] = cfg->v_special_ids[j];
            continue;
        }
        int32_t id;
        if (token_id(v, e, what, &id))
            ids[cfg->n_v_eog++] = id;
    }
}

/* `vocab: FILE`, or `vocab: {file: FILE, special: {TEXT: ID...}, eog:
 * [ID or TEXT...]}` (docs/config.md). */
static void vocab_key(V *v, const cfg_node *n)
{
    static const char *const KEYS[] = {"file", "special", "eog"};
    if (n->bad)
        return;
    if (n->type != CFG_MAP) {
        vocab_file(v, n);
        return;
    }
    check_keys(v, n, KEYS, 3, "vocab: ");
    const cfg_node *f = find(v, n, "file"), *sp = find(v, n, "special"), *e = find(v, n, "eog");
    if (!f)
        err_at(v, n, SIFT_E_CONFIG_KEY, "vocab: the 'file' key is required");
    else
        vocab_file(v, f);
    if (sp && v->st == SIFT_OK)
        vocab_special(v, sp);
    if (e && v->st == SIFT_OK)
        vocab_eog(v, e);
}

sift_status sift__cfg_validate(sift_config *cfg, const cfg_tree *tree)
{
    V v;
    memset(&v, 0, sizeof v);
    v.cfg = cfg;
    v.t = tree;
    if (tree->root == CFG_NONE) {
        sift__cfg_diag(cfg, SIFT_SEVERITY_ERROR, SIFT_E_CONFIG_VALUE, -1,
                       "empty configuration (expected a mapping with 'chain' or llama.cpp "
                       "sampler parameters)");
        return SIFT_OK;
    }
    const cfg_node *root = NODE(&v, tree->root);
    if (root->bad)
        return SIFT_OK;
    if (is_null(root)) {
        err_at(&v, root, SIFT_E_CONFIG_VALUE,
               "empty configuration (the document is null; expected a mapping)");
        return v.st;
    }
    if (root->type != CFG_MAP) {
        type_err(&v, root, "configuration", "mapping");
        return v.st;
    }
    const char *top[N_TOP];
    const sift__param *reg[MAX_REG_FLAT];
    size_t nr = registry_flat_keys(reg), nt = 0;
    for (size_t i = 0; i < N_BASE; i++)
        top[nt++] = BASE_KEYS[i];
    for (size_t i = 0; i < nr; i++)
        top[nt++] = reg[i]->flat_key;
    for (size_t i = 0; i < N_FLAT; i++)
        top[nt++] = FLAT_KEYS[i];
    for (size_t i = 0; i < N_IGNORED; i++)
        top[nt++] = IGNORED_KEYS[i];
    check_keys(&v, root, top, nt, "");
    const cfg_node *n;
    const cfg_node *first_flat = NULL;
    for (uint32_t ki = root->first; ki != CFG_NONE && !first_flat;) {
        const cfg_node *key = NODE(&v, ki);
        if (!key->bad && (is_flat_key(key) || in_list(key, IGNORED_KEYS, N_IGNORED)))
            first_flat = key;
        ki = key->next == CFG_NONE ? CFG_NONE : NODE(&v, key->next)->next;
    }
    const cfg_node *chain = find(&v, root, "chain");
    v.flat = first_flat && !chain;
    if ((n = find(&v, root, "n_ctx"))) {
        int64_t x;
        if (get_int(&v, n, "n_ctx", &x)) {
            if (x < 1 || x > INT32_MAX)
                err_at(&v, n, SIFT_E_CONFIG_VALUE, "n_ctx must be in [1, %d], got %lld",
                       (int)INT32_MAX, (long long)x);
            else {
                v.n_ctx = (int32_t)x;
                v.n_ctx_node = n;
            }
        }
    }
    if ((n = find(&v, root, "seed"))) {
        /* llama.cpp's "random seed": -1 (LLAMA_DEFAULT_SEED, 0xFFFFFFFF,
         * as its u32), in the flat form only. */
        if (v.flat && is_plain(n) && (streq(n, "-1") || streq(n, "4294967295"))) {
            cfg->seed_random = 1;
            warn_at(&v, n,
                    "seed %s is llama.cpp's random seed: each chain built from this config "
                    "gets a new seed, so results are not reproducible; give another number "
                    "to reproduce them",
                    echo(&v, n));
        } else if (is_plain(n) && int_syntax(n->val, n->len) && n->val[0] == '-' &&
                   strspn(n->val + 1, "0") != n->len - 1)
            err_at(&v, n, SIFT_E_CONFIG_VALUE,
                   "seed must be in [0, 18446744073709551615], got %s (sift has no random "
                   "seed; pick a number)",
                   echo(&v, n));
        else if (is_plain(n) && int_syntax(n->val, n->len) && !number_hint(n)) {
            uint64_t acc = 0;
            int over = 0;
            for (size_t i = n->val[0] == '+' || n->val[0] == '-'; i < n->len; i++) {
                unsigned d = (unsigned)(n->val[i] - '0');
                if (acc > (UINT64_MAX - d) / 10)
                    over = 1;
                acc = acc * 10 + d;
            }
            if (over)
                err_at(&v, n, SIFT_E_CONFIG_VALUE,
                       "seed must be in [0, 18446744073709551615], got %s", echo(&v, n));
            else {
                cfg->has_seed = 1;
                cfg->seed = acc;
            }
        } else {
            int64_t dummy;
            get_int(&v, n, "seed", &dummy);
        }
    }
    if ((n = find(&v, root, "vocab_size"))) {
        int64_t x;
        if (get_int(&v, n, "vocab_size", &x)) {
            if (x < 1)
                err_at(&v, n, SIFT_E_CONFIG_VALUE, "vocab_size must be >= 1, got %lld",
                       (long long)x);
            else if (x > SIFT_DEFAULT_MAX_VOCAB)
                err_at(&v, n, SIFT_E_CONFIG_LIMIT, "vocab_size %lld exceeds max_vocab %d",
                       (long long)x, SIFT_DEFAULT_MAX_VOCAB);
            else
                v.vocab_size = cfg->vocab_size = (int32_t)x;
        }
    }
    if ((n = find(&v, root, "vocab")))
        vocab_key(&v, n);

    if (chain && first_flat) {
        const cfg_node *ck = key_of(&v, root, chain);
        err_at(&v, first_flat, SIFT_E_CONFIG_KEY,
               "use either 'chain' or llama.cpp flat parameters, not both ('chain' at %d:%d)",
               (int)(ck ? ck->line : chain->line), (int)(ck ? ck->col : chain->col));
    }
    if (chain)
        chain_list(&v, chain);
    else if (first_flat)
        flat_params(&v, root);
    else
        err_at(&v, root, SIFT_E_CONFIG_KEY,
               "no sampler chain: give 'chain' (a list of stages) or llama.cpp sampler "
               "parameters");
    if ((n = find(&v, root, "grammar")) && v.st == SIFT_OK)
        grammar_section(&v, n);
    if (v.st == SIFT_OK && cfg->n_errors == 0)
        v.st = sift__cfg_trial_build(cfg);
    if (v.st == SIFT_OK && cfg->n_errors == 0)
        chain_warnings(&v);
    sift__free(&cfg->al, v.token_off);
    return v.st;
}

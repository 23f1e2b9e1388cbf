/*
 * json_regex_emit.c - the emitter half of the pattern translation
 * (json_regex.c parses): writes the GBNF expression for the node tree
 * the parser built, with every set of code points turned into the JSON
 * encodings of its members (or the raw characters for the regex source),
 * counting as it goes what the GBNF parser will build so that the
 * output stays within max_out bytes, RX_MAX_ELEMENTS elements and the
 * nested-repetition limit; and, beside minLength / maxLength, fits a
 * pattern's top-level alternatives to the string lengths.
 */
#include <stdio.h>

#include "../grammar/gbnf.h"
#include "json_regex.h"

/* ------------------------------------------------------------------ */
/* Output                                                              */
/* ------------------------------------------------------------------ */

static int put(rx *r, const char *s, size_t n)
{
    if (r->st)
        return 0;
    if (n > r->max_out || r->n_out > r->max_out - n) {
        sift__json_regex_fail(r, r->at, SIFT_E_SCHEMA_LIMIT,
                              "the grammar of the pattern exceeds %zu bytes", r->max_out);
        return 0;
    }
    if (sift__reserve(r->al, &r->out, &r->cap_out, r->n_out, r->n_out + n + 1, 1, 256)) {
        sift__json_regex_nomem(r);
        return 0;
    }
    memcpy(r->out + r->n_out, s, n);
    r->n_out += n;
    r->out[r->n_out] = '\0';
    return 1;
}

int sift__json_regex_puts(rx *r, const char *s)
{
    return put(r, s, strlen(s));
}

/* One code point inside a GBNF literal or class. */
static int put_cp(rx *r, uint32_t c, int in_class)
{
    char b[16];
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (!in_class && c >= 0x20 && c < 0x7F && c != '"' && c != '\\'))
        snprintf(b, sizeof b, "%c", (int)c);
    else if (c < 0x100)
        snprintf(b, sizeof b, "\\x%02x", (unsigned)c);
    else if (c < 0x10000)
        snprintf(b, sizeof b, "\\u%04x", (unsigned)c);
    else
        snprintf(b, sizeof b, "\\U%08x", (unsigned)c);
    return sift__json_regex_puts(r, b);
}

static void cost_add(rx_cost *a, const rx_cost *b)
{
    a->seq += b->seq;
    a->elems += b->elems;
    a->rules += b->rules;
}

/* ------------------------------------------------------------------ */
/* Sets of code points -> their JSON encodings                         */
/* ------------------------------------------------------------------ */

/* Code points that may appear raw in a JSON string (no surrogates). */
static const uint32_t RAW[] = {0x20, 0x21, 0x23, 0x5B, 0x5D, 0xD7FF, 0xE000, RX_MAX_CP};
#define N_RAW 4
/* In raw text (the regex source) every scalar value is written as itself. */
static const uint32_t RAW_TEXT[] = {0, 0xD7FF, 0xE000, RX_MAX_CP};
#define N_RAW_TEXT 2

/* The characters with a short escape, and its letter. */
static const struct {
    uint32_t cp;
    char letter;
} SHORT[] = {{'"', '"'},  {'\\', '\\'}, {'/', '/'},  {0x08, 'b'},
             {0x0C, 'f'}, {0x0A, 'n'},  {0x0D, 'r'}, {0x09, 't'}};

static int set_has(const uint32_t *p, size_t n, uint32_t c)
{
    for (size_t k = 0; k < n; k++)
        if (c >= p[2 * k] && c <= p[2 * k + 1])
            return 1;
    return 0;
}

/* The encoding plan of a set: raw ranges (within RAW), short-escape
 * letters, and per high nibble (0, 1) of U+0000..U+001F the low nibbles
 * present, plus '"' and '\' for \u0022 and \u005c. */
typedef struct set_plan {
    size_t raw_first, n_raw; /* the raw pairs: r->rng[raw_first ..) */
    char letters[9];
    size_t n_letters;
    uint32_t ctl[2]; /* bit k of ctl[h]: U+00hk is in the set */
    int quote, bslash;
    size_t n_alts;
    int atom; /* written as one GBNF item */
} set_plan;

/* Plans the set of n pairs at ext (or, when ext is NULL, at r->rng[2 *
 * first ..)); the raw pairs go to the end of r->rng, which the caller
 * truncates back afterwards. */
static int plan_set(rx *r, const uint32_t *ext, size_t first, size_t n, set_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->raw_first = r->n_rng;
    const uint32_t *raw = r->raw ? RAW_TEXT : RAW;
    size_t n_raw = r->raw ? N_RAW_TEXT : N_RAW;
    for (size_t k = 0; k < n; k++) {
        /* by index: add_range may move r->rng */
        uint32_t lo = ext ? ext[2 * k] : r->rng[2 * (first + k)];
        uint32_t hi = ext ? ext[2 * k + 1] : r->rng[2 * (first + k) + 1];
        for (size_t j = 0; j < n_raw; j++) {
            uint32_t a = lo > raw[2 * j] ? lo : raw[2 * j];
            uint32_t b = hi < raw[2 * j + 1] ? hi : raw[2 * j + 1];
            if (a <= b && !sift__json_regex_add_range(r, a, b))
                return 0;
        }
        for (uint32_t c = lo; c <= hi && c < 0x20 && !r->raw; c++)
            pl->ctl[c >> 4] |= 1u << (c & 15);
    }
    pl->n_raw = (r->n_rng - pl->raw_first) / 2;
    if (r->raw) {
        pl->n_alts = pl->n_raw > 0;
        pl->atom = 1;
        return 1;
    }
    const uint32_t *p = ext ? ext : n > 0 ? r->rng + 2 * first : NULL;
    for (size_t k = 0; k < sizeof SHORT / sizeof *SHORT; k++)
        if (set_has(p, n, SHORT[k].cp))
            pl->letters[pl->n_letters++] = SHORT[k].letter;
    pl->quote = set_has(p, n, '"');
    pl->bslash = set_has(p, n, '\\');
    pl->n_alts = (pl->n_raw > 0) + (pl->n_letters > 0) + (size_t)pl->quote + (size_t)pl->bslash;
    if (pl->ctl[0] && pl->ctl[0] == pl->ctl[1])
        pl->n_alts++;
    else
        pl->n_alts += (pl->ctl[0] != 0) + (pl->ctl[1] != 0);
    /* one form: raw (a class or a literal, one item) or controls only
     * ("\\u000" [..], two items); several: a group */
    pl->atom = pl->n_alts != 1 || pl->n_raw > 0;
    return 1;
}

/* A class of hex digits for the nibble mask `m` (both letter cases). */
static int put_hex_class(rx *r, uint32_t m, uint64_t *elems)
{
    (*elems)++;
    if ((m & (m - 1)) == 0) {
        int v = 0;
        while (!(m >> v & 1))
            v++;
        if (v < 10) {
            char b[4] = {'"', (char)('0' + v), '"', 0};
            return sift__json_regex_puts(r, b);
        }
    }
    if (!sift__json_regex_puts(r, "["))
        return 0;
    for (int pass = 0; pass < 3; pass++) {
        int from = pass == 0 ? 0 : 10, to = pass == 0 ? 10 : 16;
        char base = pass == 0 ? '0' : pass == 1 ? 'a' : 'A';
        for (int v = from; v < to; v++) {
            if (!(m >> v & 1))
                continue;
            int e = v;
            while (e + 1 < to && (m >> (e + 1) & 1))
                e++;
            char b[4] = {(char)(base + v - from), 0, 0, 0};
            if (e > v)
                b[1] = '-', b[2] = (char)(base + e - from);
            if (!sift__json_regex_puts(r, b))
                return 0;
            v = e;
        }
    }
    return sift__json_regex_puts(r, "]");
}

static int put_range(rx *r, uint32_t lo, uint32_t hi)
{
    return put_cp(r, lo, 1) && (hi == lo || (sift__json_regex_puts(r, "-") && put_cp(r, hi, 1)));
}

/* The raw pairs raw[0 .. n) as one GBNF class, or its negation when that
 * lists fewer ranges. The negation lists the gaps between the pairs,
 * clipped to leave out the surrogates, which no UTF-8 text holds and a
 * GBNF escape cannot name. */
static int put_raw_class(rx *r, size_t raw_first, size_t n)
{
    size_t n_gaps = 0;
    uint32_t next = 0;
    for (int pass = 0; pass < 2; pass++) {
        next = 0;
        for (size_t k = 0; k <= n; k++) {
            uint32_t lo = k < n ? r->rng[raw_first + 2 * k] : RX_MAX_CP + 1;
            if (lo > next) {
                uint32_t a = next, b = lo - 1;
                if (a >= 0xD800 && a <= 0xDFFF)
                    a = 0xE000;
                if (b >= 0xD800 && b <= 0xDFFF)
                    b = 0xD7FF;
                if (a <= b) {
                    if (pass == 0)
                        n_gaps++;
                    else if (!put_range(r, a, b))
                        return 0;
                }
            }
            if (k < n)
                next = r->rng[raw_first + 2 * k + 1] + 1;
        }
        if (pass == 0) {
            if (n_gaps >= n)
                break;
            if (!sift__json_regex_puts(r, "[^"))
                return 0;
        } else {
            return sift__json_regex_puts(r, "]");
        }
    }
    if (!sift__json_regex_puts(r, "["))
        return 0;
    for (size_t k = 0; k < n; k++)
        if (!put_range(r, r->rng[raw_first + 2 * k], r->rng[raw_first + 2 * k + 1]))
            return 0;
    return sift__json_regex_puts(r, "]");
}

static const char *letter_text(char l, char *buf)
{
    if (l == '"')
        return "\\\"";
    if (l == '\\')
        return "\\\\";
    buf[0] = l;
    buf[1] = 0;
    return buf;
}

/* Writes the encodings of a planned set: one item when pl->atom (a
 * group when it has several forms), else a sequence of two items. */
static int put_set(rx *r, const set_plan *pl, rx_cost *c)
{
    memset(c, 0, sizeof *c);
    c->prev = 1;
    c->atom = pl->atom;
    if (pl->n_alts == 0) {
        /* the empty set: a class no code point is in */
        c->seq = c->elems = 1;
        return sift__json_regex_puts(r, "[^\\x00-\\U0010ffff]");
    }
    int group = pl->n_alts > 1;
    if (group && !sift__json_regex_puts(r, "("))
        return 0;
    uint64_t el = 0;
    size_t written = 0;
    char lb[2];
#define SEP() (!written++ || sift__json_regex_puts(r, " | "))
    if (pl->n_raw > 0) {
        const uint32_t *raw = r->rng + pl->raw_first;
        written++;
        el++;
        if (pl->n_raw == 1 && raw[0] == raw[1]) {
            if (!sift__json_regex_puts(r, "\"") || !put_cp(r, raw[0], 0) ||
                !sift__json_regex_puts(r, "\""))
                return 0;
        } else if (!put_raw_class(r, pl->raw_first, pl->n_raw)) {
            return 0;
        }
    }
    if (pl->n_letters > 0) {
        if (!SEP() || !sift__json_regex_puts(r, "\"\\\\"))
            return 0;
        if (pl->n_letters == 1) {
            if (!sift__json_regex_puts(r, letter_text(pl->letters[0], lb)) ||
                !sift__json_regex_puts(r, "\""))
                return 0;
        } else {
            if (!sift__json_regex_puts(r, "\" ["))
                return 0;
            for (size_t k = 0; k < pl->n_letters; k++)
                if (!sift__json_regex_puts(r, letter_text(pl->letters[k], lb)))
                    return 0;
            if (!sift__json_regex_puts(r, "]"))
                return 0;
        }
        el += 2;
    }
    for (int h = 0; h < 2; h++) {
        if (!pl->ctl[h])
            continue;
        if (!SEP())
            return 0;
        if (h == 0 && pl->ctl[0] == pl->ctl[1]) {
            if (!sift__json_regex_puts(r, "\"\\\\u00\" [01] "))
                return 0;
            el += 5;
            h = 1;
        } else {
            if (!sift__json_regex_puts(r, h ? "\"\\\\u001\" " : "\"\\\\u000\" "))
                return 0;
            el += 5;
        }
        if (!put_hex_class(r, pl->ctl[h], &el))
            return 0;
    }
    if (pl->quote) {
        if (!SEP() || !sift__json_regex_puts(r, "\"\\\\u0022\""))
            return 0;
        el += 6;
    }
    if (pl->bslash) {
        if (!SEP() || !sift__json_regex_puts(r, "\"\\\\u005\" [cC]"))
            return 0;
        el += 6;
    }
#undef SEP
    if (!group) {
        c->seq = c->elems = el;
        return 1;
    }
    if (!sift__json_regex_puts(r, ")"))
        return 0;
    /* the alternatives, their ALTs and END in the rule, one REF outside */
    c->elems = el + written + 1;
    c->seq = 1;
    c->rules = 1;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Emission                                                            */
/* ------------------------------------------------------------------ */

static int emit(rx *r, uint32_t id, rx_cost *c, unsigned depth);

static int check_elems(rx *r, const rx_cost *c)
{
    if (c->elems > RX_MAX_ELEMENTS) {
        sift__json_regex_fail(r, r->at, SIFT_E_SCHEMA_LIMIT,
                              "the grammar of the pattern expands to more than %llu elements",
                              (unsigned long long)RX_MAX_ELEMENTS);
        return 0;
    }
    return 1;
}

/* Emits the sequence of nodes ids[0 .. n) (items separated by spaces),
 * merging runs of single raw code points into one literal. */
static int emit_seq(rx *r, const uint32_t *ids, size_t n, rx_cost *c, unsigned depth)
{
    memset(c, 0, sizeof *c);
    c->prev = 1;
    size_t items = 0;
    int last_atom = 0;
    rx_cost last = {0, 0, 0, 1, 0};
    for (size_t k = 0; k < n; k++) {
        if (items && !sift__json_regex_puts(r, " "))
            return 0;
        const rx_node *nd = &r->nodes[ids[k]];
        if (nd->kind == N_SET) {
            /* a run of single raw code points becomes one literal */
            size_t j = k;
            size_t run = 0;
            for (; j < n; j++) {
                const rx_node *m = &r->nodes[ids[j]];
                if (m->kind != N_SET || m->n != 1)
                    break;
                uint32_t lo = r->rng[2 * m->first], hi = r->rng[2 * m->first + 1];
                if (lo != hi || (lo >= 0xD800 && lo <= 0xDFFF) ||
                    (!r->raw && (lo < 0x20 || lo == '"' || lo == '\\' || lo == '/')))
                    break;
                run++;
            }
            if (run > 1) {
                r->at = nd->off;
                if (!sift__json_regex_puts(r, "\""))
                    return 0;
                for (size_t q = k; q < k + run; q++)
                    if (!put_cp(r, r->rng[2 * r->nodes[ids[q]].first], 0))
                        return 0;
                if (!sift__json_regex_puts(r, "\""))
                    return 0;
                c->seq += run, c->elems += run;
                items++;
                last_atom = 1;
                k += run - 1;
                continue;
            }
        }
        if (!emit(r, ids[k], &last, depth))
            return 0;
        cost_add(c, &last);
        last_atom = last.atom;
        items++;
    }
    if (items == 0) {
        c->atom = 1;
        return sift__json_regex_puts(r, "\"\"");
    }
    c->atom = items == 1 && last_atom;
    if (c->atom)
        c->prev = last.prev;
    return check_elems(r, c);
}

/* Emits `id` as a group "( ... )" unless it is one item already. */
static int emit_item(rx *r, uint32_t id, rx_cost *c, unsigned depth)
{
    const rx_node *nd = &r->nodes[id];
    int wrap = nd->kind == N_CAT || nd->kind == N_REP;
    if (nd->kind == N_SET) {
        set_plan pl;
        size_t mark = r->n_rng;
        if (!plan_set(r, NULL, nd->first, nd->n, &pl))
            return 0;
        r->n_rng = mark;
        wrap = !pl.atom;
    }
    if (!wrap)
        return emit(r, id, c, depth);
    if (!sift__json_regex_puts(r, "("))
        return 0;
    rx_cost in;
    if (!emit(r, id, &in, depth) || !sift__json_regex_puts(r, ")"))
        return 0;
    c->seq = 1;
    c->elems = in.elems + 2; /* END and the REF */
    c->rules = in.rules + 1;
    c->prev = c->rules;
    c->atom = 1;
    return check_elems(r, c);
}

static int emit(rx *r, uint32_t id, rx_cost *c, unsigned depth)
{
    const rx_node *nd = &r->nodes[id];
    r->at = nd->off;
    memset(c, 0, sizeof *c);
    c->prev = 1;
    switch (nd->kind) {
    case N_SET: {
        set_plan pl;
        size_t mark = r->n_rng;
        if (!plan_set(r, NULL, nd->first, nd->n, &pl))
            return 0;
        int ok = put_set(r, &pl, c);
        r->n_rng = mark;
        return ok;
    }
    case N_CAT: return emit_seq(r, nd->n ? r->kids + nd->first : NULL, nd->n, c, depth + 1);
    case N_ALT: {
        if (!sift__json_regex_puts(r, "("))
            return 0;
        for (uint32_t k = 0; k < nd->n; k++) {
            rx_cost a;
            if ((k && !sift__json_regex_puts(r, " | ")) ||
                !emit_seq(r, r->kids + nd->first + k, 1, &a, depth + 1))
                return 0;
            c->elems += a.elems;
            c->rules += a.rules;
        }
        if (!sift__json_regex_puts(r, ")"))
            return 0;
        c->elems += nd->n + 1; /* ALTs and END, and the REF */
        c->rules += 1;
        c->seq = 1;
        c->prev = c->rules;
        c->atom = 1;
        return check_elems(r, c);
    }
    case N_REP: {
        uint32_t m = nd->min, x = nd->max;
        if (x == 0) { /* matches the empty string only */
            c->atom = 1;
            return sift__json_regex_puts(r, "\"\"");
        }
        rx_cost in;
        if (!emit_item(r, nd->first, &in, depth + 1))
            return 0;
        r->at = nd->off;
        if (m == 1 && x == 1) {
            *c = in;
            return 1;
        }
        int unbounded = x == UINT32_MAX;
        uint64_t total = !unbounded ? x : (m > 0 ? m : 1);
        if (in.prev * total >= SIFT__GBNF_MAX_REPETITION) {
            sift__json_regex_fail(r, nd->off, SIFT_E_SCHEMA_LIMIT,
                                  "repetition expands to %llu copies in the grammar (limit %d)",
                                  (unsigned long long)(in.prev * total), SIFT__GBNF_MAX_REPETITION);
            return 0;
        }
        char b[48];
        if (m == 0 && unbounded)
            snprintf(b, sizeof b, "*");
        else if (m == 1 && unbounded)
            snprintf(b, sizeof b, "+");
        else if (m == 0 && x == 1)
            snprintf(b, sizeof b, "?");
        else if (unbounded)
            snprintf(b, sizeof b, "{%u,}", (unsigned)m);
        else if (m == x)
            snprintf(b, sizeof b, "{%u}", (unsigned)m);
        else
            snprintf(b, sizeof b, "{%u,%u}", (unsigned)m, (unsigned)x);
        if (!sift__json_regex_puts(r, b))
            return 0;
        uint64_t n_opt = unbounded ? 1 : (uint64_t)x - m;
        c->seq = (uint64_t)m * in.seq + (n_opt > 0);
        c->elems = in.elems - in.seq + c->seq + n_opt * (in.seq + 3);
        c->rules = in.rules + n_opt;
        c->prev = 1; /* no postfix follows */
        c->atom = 0;
        return check_elems(r, c);
    }
    default:
        sift__json_regex_fail(
            r, nd->off, SIFT_E_SCHEMA_UNSUPPORTED,
            "the anchor '%c' is supported only at the start or end of a top-level alternative",
            nd->kind == N_BOL ? '^' : '$');
        return 0;
    }
}

int sift__json_regex_emit_item(rx *r, uint32_t id)
{
    rx_cost c;
    return emit_item(r, id, &c, 0);
}

/* "Any JSON string character", repeated: the unanchored sides. */
static int emit_any_star(rx *r, rx_cost *c)
{
    static const uint32_t ALL[] = {0, RX_MAX_CP};
    set_plan pl;
    size_t mark = r->n_rng;
    rx_cost in;
    if (!plan_set(r, ALL, 0, 1, &pl) || !put_set(r, &pl, &in) || !sift__json_regex_puts(r, "*"))
        return 0;
    r->n_rng = mark;
    c->seq = 1;
    c->elems = in.elems + 4;
    c->rules = in.rules + 1;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Lengths: a pattern beside minLength / maxLength                     */
/* ------------------------------------------------------------------ */

#define LEN_INF UINT64_MAX

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > LEN_INF - b ? LEN_INF : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    return a && b > LEN_INF / a ? LEN_INF : a * b;
}

/* The fewest and most code points a string matching node `id` has. */
static void len_range(const rx *r, uint32_t id, uint64_t *lo, uint64_t *hi)
{
    const rx_node *nd = &r->nodes[id];
    *lo = *hi = 0;
    switch (nd->kind) {
    case N_SET: *lo = *hi = 1; return;
    case N_CAT:
    case N_ALT:
        for (uint32_t k = 0; k < nd->n; k++) {
            uint64_t a, b;
            len_range(r, r->kids[nd->first + k], &a, &b);
            if (nd->kind == N_CAT) {
                *lo = sat_add(*lo, a), *hi = sat_add(*hi, b);
            } else {
                *lo = k == 0 || a < *lo ? a : *lo;
                *hi = b > *hi ? b : *hi;
            }
        }
        return;
    case N_REP: {
        uint64_t a, b;
        len_range(r, nd->first, &a, &b);
        *lo = sat_mul(a, nd->min);
        *hi = nd->max == UINT32_MAX ? (b ? LEN_INF : 0) : sat_mul(b, nd->max);
        return;
    }
    default: return; /* anchors */
    }
}

/* Fits the top-level alternative ids[0..n) (anchored at the start with
 * bol, at the end with eol) to the lengths len_lo..len_hi. Its lengths
 * may already lie inside them; else exactly one part of it may vary in
 * length, a repetition of a part of fixed length w (an unanchored side
 * is "any character" repeated), whose counts are then narrowed to those
 * that give a length inside: side[0] / side[1] get the counts of the
 * unanchored start / end (UINT32_MAX twice when not narrowed). 0 with
 * r->st set when the lengths cannot be kept this way. */
static int fit_lengths(rx *r, const uint32_t *ids, size_t n, int bol, int eol, uint32_t side[2][2])
{
    uint64_t lo = 0, hi = 0, fixed = 0, w = 1, m = 0, x = LEN_INF;
    size_t var = SIZE_MAX;
    int n_var = 0;
    side[0][0] = side[0][1] = side[1][0] = side[1][1] = UINT32_MAX;
    for (size_t k = 0; k < n; k++) {
        uint64_t a, b;
        len_range(r, ids[k], &a, &b);
        lo = sat_add(lo, a), hi = sat_add(hi, b);
        if (a == b)
            fixed = sat_add(fixed, a);
        else
            n_var++, var = k;
    }
    if (!bol)
        n_var++, hi = LEN_INF, var = n;
    if (!eol)
        n_var++, hi = LEN_INF, var = n + 1;
    if (lo >= r->len_lo && hi <= r->len_hi)
        return 1; /* the lengths hold already */
    const rx_node *nd = var < n ? &r->nodes[ids[var]] : NULL;
    if (nd && nd->kind == N_REP) {
        uint64_t a, b;
        len_range(r, nd->first, &a, &b);
        w = a == b ? a : 0;
        m = nd->min;
        x = nd->max == UINT32_MAX ? LEN_INF : nd->max;
    }
    if (n_var != 1 || (nd && (nd->kind != N_REP || w == 0))) {
        sift__json_regex_fail(
            r, nd ? nd->off : 0, SIFT_E_SCHEMA_UNSUPPORTED,
            "minLength / maxLength beside a pattern whose length varies in more than one "
            "repetition of a fixed-length part");
        return 0;
    }
    /* lengths fixed + k w, k in m..x: keep those in len_lo..len_hi */
    uint64_t kmin = r->len_lo > fixed ? (r->len_lo - fixed + w - 1) / w : 0;
    uint64_t kmax = r->len_hi == LEN_INF ? LEN_INF
                    : r->len_hi < fixed  ? 0
                                         : (r->len_hi - fixed) / w;
    if (kmin < m)
        kmin = m;
    if (kmax > x)
        kmax = x;
    if (r->len_hi < fixed || kmin > kmax || kmin >= UINT32_MAX ||
        (kmax != LEN_INF && kmax >= UINT32_MAX)) {
        sift__json_regex_fail(
            r, nd ? nd->off : 0, SIFT_E_SCHEMA_UNSUPPORTED,
            "no string of the lengths minLength / maxLength allow matches the pattern this way");
        return 0;
    }
    uint32_t k0 = (uint32_t)kmin, k1 = kmax == LEN_INF ? UINT32_MAX : (uint32_t)kmax;
    if (nd) {
        r->nodes[ids[var]].min = k0;
        r->nodes[ids[var]].max = k1;
    } else {
        side[var - n][0] = k0;
        side[var - n][1] = k1;
    }
    return 1;
}

/* "Any JSON string character" repeated k0..k1 times (k1 = UINT32_MAX:
 * unbounded): an unanchored side narrowed by fit_lengths. */
static int emit_any_rep(rx *r, uint32_t k0, uint32_t k1, rx_cost *c, unsigned depth)
{
    size_t start = r->n_rng;
    if (!sift__json_regex_add_range(r, 0, RX_MAX_CP))
        return 0;
    uint32_t set = sift__json_regex_new_node(r, N_SET, r->at);
    if (set == UINT32_MAX)
        return 0;
    r->nodes[set].first = (uint32_t)(start / 2);
    r->nodes[set].n = 1;
    uint32_t rep = sift__json_regex_new_node(r, N_REP, r->at);
    if (rep == UINT32_MAX)
        return 0;
    r->nodes[rep].first = set;
    r->nodes[rep].min = k0;
    r->nodes[rep].max = k1;
    return emit(r, rep, c, depth);
}

/* One top-level alternative: anchors stripped from its ends; a lone
 * group inside is opened so that its own alternatives are top level. */
uint32_t sift__json_regex_branch_items(const rx *r, const uint32_t *id, int *bol, int *eol,
                                       const uint32_t **ids, size_t *n, unsigned depth)
{
    const rx_node *nd = &r->nodes[*id];
    const uint32_t *v = id;
    size_t k = 1;
    if (nd->kind == N_CAT) {
        v = nd->n ? r->kids + nd->first : NULL;
        k = nd->n;
    }
    while (k > 0 && r->nodes[v[0]].kind == N_BOL)
        v++, k--, *bol = 1;
    while (k > 0 && r->nodes[v[k - 1]].kind == N_EOL)
        k--, *eol = 1;
    *ids = v;
    *n = k;
    if (k == 1 && (r->nodes[v[0]].kind == N_ALT || r->nodes[v[0]].kind == N_CAT) &&
        depth < RX_MAX_DEPTH + 2)
        return v[0];
    return UINT32_MAX;
}

int sift__json_regex_emit_branch(rx *r, uint32_t id, int bol, int eol, int *first, rx_cost *total,
                                 unsigned depth)
{
    const rx_node *nd = &r->nodes[id];
    const uint32_t *ids;
    size_t n;
    uint32_t grp = sift__json_regex_branch_items(r, &id, &bol, &eol, &ids, &n, depth);
    if (grp != UINT32_MAX) {
        const rx_node *g = &r->nodes[grp];
        if (g->kind == N_CAT)
            return sift__json_regex_emit_branch(r, grp, bol, eol, first, total, depth + 1);
        for (uint32_t k = 0; k < g->n; k++)
            if (!sift__json_regex_emit_branch(r, r->kids[g->first + k], bol, eol, first, total,
                                              depth + 1))
                return 0;
        return 1;
    }
    uint32_t side[2][2] = {{UINT32_MAX, UINT32_MAX}, {UINT32_MAX, UINT32_MAX}};
    if (r->len_on && !fit_lengths(r, ids, n, bol, eol, side))
        return 0;
    if (!*first && !sift__json_regex_puts(r, " | "))
        return 0;
    *first = 0;
    rx_cost c;
    r->at = nd->off;
    total->elems++; /* its ALT or END */
    if (!bol) {
        if (!(side[0][0] == UINT32_MAX ? emit_any_star(r, &c)
                                       : emit_any_rep(r, side[0][0], side[0][1], &c, depth + 1)) ||
            (n > 0 && !sift__json_regex_puts(r, " ")))
            return 0;
        cost_add(total, &c);
    }
    if (n > 0 || bol) {
        if (!emit_seq(r, ids, n, &c, depth + 1))
            return 0;
        cost_add(total, &c);
    }
    if (!eol && (bol || n > 0)) {
        r->at = nd->off;
        if (!sift__json_regex_puts(r, " ") ||
            !(side[1][0] == UINT32_MAX ? emit_any_star(r, &c)
                                       : emit_any_rep(r, side[1][0], side[1][1], &c, depth + 1)))
            return 0;
        cost_add(total, &c);
    }
    return check_elems(r, total);
}

/*
 * check_json_regex.c - JSON Schema "pattern" -> GBNF (src/grammar/
 * json_regex.c). Each translation is compiled inside a string rule,
 * root ::= "\"" EXPR "\"", and fed JSON-encoded strings. The truth is
 * PCRE2 (the library's own dependency) run on the decoded string with
 * options as close to ECMA-262 as it has (UTF, \u escapes, $ only at the
 * end, [] and [^] as in JavaScript), after a rewrite of the few atoms
 * whose meaning differs ('.', \s, \S, \v). Also: the encodings accepted
 * (canonical, every alternative form, none of the invalid ones), errors
 * with their exact columns, the limits, and allocation failures.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "schema/json_regex.h"
#include "testutil.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static sift__alloc default_al(void)
{
    sift__alloc al;
    ck_assert_int_eq(sift__alloc_init(&al, NULL, NULL), SIFT_OK);
    return al;
}

/* The translation of `pat` (asserted to succeed), malloc'd. */
static char *translate(const char *pat, size_t len)
{
    sift__alloc al = default_al();
    sift_error err;
    char *out = NULL;
    size_t n = 0;
    sift_status st = sift__json_regex_to_gbnf(&al, pat, len, 1 << 20, &out, &n, &err);
    ck_assert_msg(st == SIFT_OK, "'%s': %s", pat, err.message);
    ck_assert_uint_eq(strlen(out), n);
    return out;
}

/* The string grammar around the translation of `pat`. */
static sift_grammar *string_grammar(const char *pat, size_t len)
{
    char *expr = translate(pat, len);
    size_t n = strlen(expr) + 64;
    char *g = malloc(n);
    ck_assert_ptr_nonnull(g);
    int gl = snprintf(g, n, "root ::= \"\\\"\" %s \"\\\"\"\n", expr);
    sift_grammar *gr = NULL;
    sift_error err;
    sift_status st = sift_grammar_new(&gr, g, (size_t)gl, NULL, NULL, &err);
    ck_assert_msg(st == SIFT_OK, "'%s' -> %s: %s", pat, expr, err.message);
    free(g);
    free(expr);
    return gr;
}

/* 1 if the grammar accepts "content" (quotes added) as a whole. */
static int accepts(sift_grammar *g, const char *content, size_t n)
{
    sift_grammar_reset(g);
    sift_error err;
    if (sift_grammar_accept_bytes(g, "\"", 1, &err))
        return 0;
    sift_status st = sift_grammar_accept_bytes(g, content, n, &err);
    if (st == SIFT_E_GRAMMAR_REJECT)
        return 0;
    ck_assert_msg(st == SIFT_OK, "accept: %s", err.message);
    if (sift_grammar_accept_bytes(g, "\"", 1, &err))
        return 0;
    return sift_grammar_is_complete(g);
}

static int accepts_str(sift_grammar *g, const char *content)
{
    return accepts(g, content, strlen(content));
}

/* A decoded string: code points. */
typedef struct cps {
    uint32_t c[64];
    size_t n;
} cps;

static size_t put_utf8(char *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | c >> 6);
        o[1] = (char)(0x80 | (c & 63));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12);
        o[1] = (char)(0x80 | (c >> 6 & 63));
        o[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18);
    o[1] = (char)(0x80 | (c >> 12 & 63));
    o[2] = (char)(0x80 | (c >> 6 & 63));
    o[3] = (char)(0x80 | (c & 63));
    return 4;
}

static size_t utf8_of(const cps *s, char *o)
{
    size_t n = 0;
    for (size_t k = 0; k < s->n; k++)
        n += put_utf8(o + n, s->c[k]);
    return n;
}

enum { ENC_CANONICAL, ENC_ALTERNATIVE, ENC_RAW };

/* JSON string content of s: ENC_CANONICAL as jansson's json_dumps writes
 * it (short escapes, \u00XX upper case for other controls, '/' raw);
 * ENC_ALTERNATIVE with every character that has another valid form in
 * that form (\/ for '/', \u escapes in random case for controls, '"' and
 * '\'); ENC_RAW with nothing escaped. */
static size_t encode(const cps *s, int how, tu_rng *rng, char *o)
{
    size_t n = 0;
    for (size_t k = 0; k < s->n; k++) {
        uint32_t c = s->c[k];
        const char *sh = NULL;
        switch (c) {
        case '"': sh = "\\\""; break;
        case '\\': sh = "\\\\"; break;
        case 0x08: sh = "\\b"; break;
        case 0x0C: sh = "\\f"; break;
        case 0x0A: sh = "\\n"; break;
        case 0x0D: sh = "\\r"; break;
        case 0x09: sh = "\\t"; break;
        default: break;
        }
        int needs = c < 0x20 || c == '"' || c == '\\';
        if (how == ENC_RAW || (!needs && c != '/')) {
            n += put_utf8(o + n, c);
        } else if (how == ENC_CANONICAL) {
            if (sh) {
                memcpy(o + n, sh, 2);
                n += 2;
            } else if (c == '/') {
                o[n++] = '/';
            } else {
                n += (size_t)sprintf(o + n, "\\u%04X", (unsigned)c);
            }
        } else if (c == '/') {
            memcpy(o + n, "\\/", 2);
            n += 2;
        } else {
            n += (size_t)sprintf(o + n, tu_next(rng) & 1 ? "\\u%04X" : "\\u%04x", (unsigned)c);
        }
    }
    return n;
}

/* The pattern rewritten for PCRE2 where its meaning differs from
 * ECMA-262: '.' (no line terminator of the four), \s and \S (ECMA's
 * white space and line terminators), \v (U+000B). \S inside a class is
 * not rewritten: the test patterns avoid it. */
#define ECMA_SPACE \
    "\\t\\n\\x0b\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
static void to_pcre2(const char *p, char *o, size_t cap)
{
    size_t n = 0;
    int in_class = 0;
    o[0] = 0;
    for (size_t i = 0; p[i]; i++) {
        char buf[160];
        const char *add = buf;
        buf[0] = p[i];
        buf[1] = 0;
        if (p[i] == '\\' && p[i + 1]) {
            char e = p[++i];
            if (e == 's')
                add = in_class ? ECMA_SPACE : "[" ECMA_SPACE "]";
            else if (e == 'S' && !in_class)
                add = "[^" ECMA_SPACE "]";
            else if (e == 'v')
                add = "\\x0b";
            else if (e == 'u' && p[i + 1] && strchr("dD", p[i + 1]) && p[i + 2] &&
                     strchr("89abAB", p[i + 2]) && strlen(p + i) >= 11 && p[i + 5] == '\\') {
                /* PCRE2 does not join a surrogate pair: write it as one */
                unsigned hi = (unsigned)strtoul((char[]){p[i + 1], p[i + 2], p[i + 3], p[i + 4], 0},
                                                NULL, 16);
                unsigned lo = (unsigned)strtoul(
                    (char[]){p[i + 7], p[i + 8], p[i + 9], p[i + 10], 0}, NULL, 16);
                snprintf(buf, sizeof buf, "\\u{%X}",
                         0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
                i += 10;
            } else
                buf[1] = e, buf[2] = 0;
        } else if (in_class) {
            if (p[i] == ']')
                in_class = 0;
        } else if (p[i] == '[') {
            in_class = 1;
            /* "[]", "[^]" and "[^]...]": a ']' first closes (JavaScript) */
            size_t k = 0;
            buf[k++] = '[';
            if (p[i + 1] == '^')
                buf[k++] = '^', i++;
            if (p[i + 1] == ']') {
                buf[k++] = ']', i++;
                in_class = 0;
            }
            buf[k] = 0;
        } else if (p[i] == '.') {
            add = "[^\\n\\r\\u2028\\u2029]";
        }
        size_t l = strlen(add);
        ck_assert_uint_lt(n + l, cap);
        memcpy(o + n, add, l + 1);
        n += l;
    }
}

static pcre2_code *pcre2_for(const char *pat)
{
    char rw[2048];
    to_pcre2(pat, rw, sizeof rw);
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    ck_assert_ptr_nonnull(cc);
    pcre2_set_compile_extra_options(cc, PCRE2_EXTRA_ALT_BSUX);
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile(
        (PCRE2_SPTR)rw, PCRE2_ZERO_TERMINATED,
        PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS, &ec, &eo, cc);
    pcre2_compile_context_free(cc);
    ck_assert_msg(re != NULL, "pcre2 rejects '%s' (from '%s') at %zu: %d", rw, pat, (size_t)eo, ec);
    return re;
}

static int pcre2_says(pcre2_code *re, const char *s, size_t n)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    ck_assert_msg(rc >= 0 || rc == PCRE2_ERROR_NOMATCH, "pcre2_match: %d", rc);
    return rc >= 0;
}

/* ------------------------------------------------------------------ */
/* The differential run                                                */
/* ------------------------------------------------------------------ */

/* Patterns of the kinds real schemas use, each with one string that
 * matches (mutated to get near misses). */
static const struct {
    const char *pat, *seed;
} DIFF[] = {
    {"^[a-z0-9-]+$", "abc-9"},
    {"^\\d{4}-\\d{2}-\\d{2}$", "2024-01-31"},
    {"^[A-Fa-f\\d]{6}$", "0a9Fbc"},
    {"^(\\d\\.)(\\d)$|^(\\d)$", "1.2"},
    {"(\\+)\\w+", "+ab"},
    {"^\\+?[1-9]\\d{1,14}$", "+1234"},
    {"^[0-9a-zA-Z_-]{1,255}$", "a_B-9"},
    {"^([\\w\\/-]|[\\w-][\\w\\/-]*[\\w-])$", "a/b"},
    {"^\\/api\\/v1\\/s\\/[^/]+$", "/api/v1/s/x\"y"},
    {"^([a-z]|[ ])*$", "ab c"},
    {"1.*2", "a1\"\\2"},
    {"^....$", "abcd"},
    {"^$|(^(?:\\S+\\s+){0,3}\\S+$)", "a b\tc"},
    {"^dev|alpha|beta|rc$", "xalphay"},
    {"^(http)|(https)://(.*)$", "https://x"},
    {"^[^\\\\/:\\*\\?\"<>\\|\\x01-\\x1f]+$", "ab.c"},
    {"[^\"\\\\]", "\""},
    {"\\n|\\t|\\x01|\\u0000", "\n"},
    {"^[^]$", "x"},
    {"a[]", "a"},
    {"^\\s*$", " \t"},
    {"\\S", "a"},
    {"^\\W+$", "!\""},
    {"^\\D\\d$", "a1"},
    {"^\\u00e9+\\uD83D\\uDE00?$", "\xc3\xa9\xf0\x9f\x98\x80"},
    {"^\\u{1F600}$", "\xf0\x9f\x98\x80"},
    {"^[\xc3\xa9-\xc3\xbc]+$", "\xc3\xa9\xc3\xbc"},
    {"^[^a-z]*$", "\xc3\x89\n"},
    {"^a{2,3}$", "aa"},
    {"^(ab){2}$", "abab"},
    {"^(a|ab)(c|bcd)(d*)$", "abcd"},
    {"^(?:a|b)*?c+?$", "abcc"},
    {"^(?<name>x)y$", "xy"},
    {"^\\x41\\cJ$", "A\n"},
    {"^[\\b]$", "\b"},
    {"^\\/\\.\\-\\_$", "/.-_"},
    {"^a{,2}$", "a{,2}"},
    {"^x{$", "x{"},
    {"^}]$", "}]"},
    {"^[a-]$", "-"},
    {"^[-a]$", "-"},
    {"^[a\\-z]$", "-"},
    {"(^a$|^b$)", "a"},
    {"^(a|b$)", "ab"},
    {"(a|b)$", "xb"},
    {"^\\.{1,3}\\.?$", ".."},
    {"", "x"},
    {"^", "x"},
    {"$", ""},
    {"^$", ""},
    {"a|", "b"},
    {"\\t\\n\\r\\f\\v", "\t\n\r\f\v"},
    {"^[\\t\\n\\r\\f\\v]+$", "\t\v"},
    {"^\"\\\\$", "\"\\"},
    {"^[\\u2028\\u2029]$", "\xe2\x80\xa8"},
    {"^(\\d+\\.\\d+\\.\\d+.*)$", "1.2.3-rc"},
    {"^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", "a@b.c"},
    {"^([01]\\d|2[0-3]):[0-5]\\d$", "23:59"},
    {"^[\\x00-\\x1f\"\\\\/]{2}$", "\"/"},
    {"^[^\\x20-\\x7e]$", "\x7f"},
    {"^\\d{3}(-\\d{4})?$", "123-4567"},
    {"^[A-Z]{2}[0-9]{2}[A-Z0-9]{1,30}$", "DE89ABC"},
    {"^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*)@[a-z]+$", "a.b@c"},
    {"^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
     "123e4567-e89b-12d3-a456-426614174000"},
    {"^/(([a-zA-Z0-9._~!$&'()*+,;=:@-]|%[0-9a-fA-F]{2})+(/([a-zA-Z0-9._~!$&'()*+,;=:@-]|%[0-9a-fA-"
     "F]{2})*)*)?$",
     "/a%20b/c"},
    {"^(https?:\\/\\/)?([\\da-z\\.-]+)\\.([a-z\\.]{2,6})([\\/\\w \\.-]*)*\\/?$",
     "http://ab.com/x y"},
};

/* The alphabet of random strings: the characters that need or may take
 * an escape, line terminators, multi-byte code points, and every ASCII
 * character of the pattern. */
static size_t alphabet(const char *pat, uint32_t *a)
{
    static const uint32_t base[] = {'a',  'b',    'c',  '0',    '1',    '-',     '.',  '/',
                                    '"',  '\\',   '\n', '\t',   0x01,   0x00,    ' ',  0xE9,
                                    0x1F, 0x0B,   0x7F, 0x2028, 0xFEFF, 0x1F600, 0xDC, 'A',
                                    '\r', 0x2029, 0x85, 0xA0,   0x08};
    size_t n = 0;
    for (size_t k = 0; k < N(base); k++)
        a[n++] = base[k];
    for (size_t i = 0; pat[i]; i++) {
        uint32_t c = (unsigned char)pat[i];
        if (c < 0x20 || c >= 0x7F)
            continue;
        int seen = 0;
        for (size_t k = 0; k < n; k++)
            seen |= a[k] == c;
        if (!seen)
            a[n++] = c;
    }
    return n;
}

static void decode_seed(const char *s, cps *o)
{
    o->n = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; u[i];) {
        uint32_t c = u[i];
        size_t l = 1;
        if (c >= 0xF0)
            c &= 7, l = 4;
        else if (c >= 0xE0)
            c &= 15, l = 3;
        else if (c >= 0xC0)
            c &= 31, l = 2;
        for (size_t k = 1; k < l; k++)
            c = c << 6 | (u[i + k] & 63);
        o->c[o->n++] = c;
        i += l;
    }
}

/* 1 when `pat` uses a predefined set of letter `l` or its negation. */
static int uses_set(const char *pat, char l)
{
    for (size_t i = 0; pat[i]; i++)
        if (pat[i] == '\\') {
            if (pat[i + 1] == l || pat[i + 1] == l - 32)
                return 1;
            if (pat[i + 1])
                i++;
        }
    return 0;
}

/* 1 when ECMA-262 (PCRE2 here) and Unicode-aware engines (Python's re)
 * may disagree on `s` under `pat`: a white space only one of them counts
 * (U+001C..U+001F, U+0085, U+FEFF) under \s or \S, or any non-ASCII
 * character under \d, \D, \w or \W. There the grammar takes what both
 * accept (json_regex.c, add_class_escape), so it may reject what PCRE2
 * accepts but never the reverse. */
static int disputed(const char *pat, const cps *s)
{
    int sp = uses_set(pat, 's'), dw = uses_set(pat, 'd') || uses_set(pat, 'w');
    for (size_t k = 0; k < s->n; k++) {
        uint32_t c = s->c[k];
        if (sp && ((c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xFEFF))
            return 1;
        if (dw && c >= 0x80)
            return 1;
    }
    return 0;
}

/* Compares PCRE2 and the grammar on one decoded string; counts. */
static void compare_one(sift_grammar *g, pcre2_code *re, const char *pat, const cps *s, tu_rng *rng,
                        long *matched)
{
    char dec[300], enc[800];
    size_t dn = utf8_of(s, dec);
    int want = pcre2_says(re, dec, dn);
    *matched += want;
    if (disputed(pat, s)) {
        /* never accepted where PCRE2 rejects; may be rejected where it
         * accepts */
        size_t en = encode(s, ENC_CANONICAL, rng, enc);
        ck_assert_msg(!accepts(g, enc, en) || want, "'%s' on canonical \"%.*s\": pcre2 says %d",
                      pat, (int)en, enc, want);
        return;
    }
    size_t en = encode(s, ENC_CANONICAL, rng, enc);
    ck_assert_msg(accepts(g, enc, en) == want, "'%s' on canonical \"%.*s\": pcre2 says %d", pat,
                  (int)en, enc, want);
    en = encode(s, ENC_ALTERNATIVE, rng, enc);
    ck_assert_msg(accepts(g, enc, en) == want, "'%s' on alternative \"%.*s\": pcre2 says %d", pat,
                  (int)en, enc, want);
    /* raw, s is invalid JSON when it holds '"' or a control and no '\'
     * (a raw '\' may start a valid escape) */
    int bad = 0, bslash = 0;
    for (size_t k = 0; k < s->n; k++) {
        bad |= s->c[k] < 0x20 || s->c[k] == '"';
        bslash |= s->c[k] == '\\';
    }
    if (bad && !bslash) {
        en = encode(s, ENC_RAW, rng, enc);
        ck_assert_msg(!accepts(g, enc, en), "'%s' accepts invalid JSON \"%.*s\"", pat, (int)en,
                      enc);
    }
}

static void differential(size_t from, size_t to)
{
    tu_rng rng = {0x5eed0001u + from};
    for (size_t p = from; p < to && p < N(DIFF); p++) {
        const char *pat = DIFF[p].pat;
        sift_grammar *g = string_grammar(pat, strlen(pat));
        pcre2_code *re = pcre2_for(pat);
        uint32_t a[128];
        size_t na = alphabet(pat, a);
        long matched = 0, total = 0;
        cps s;
        /* every string of length 0 and 1 */
        s.n = 0;
        compare_one(g, re, pat, &s, &rng, &matched), total++;
        for (size_t k = 0; k < na; k++) {
            s.n = 1;
            s.c[0] = a[k];
            compare_one(g, re, pat, &s, &rng, &matched), total++;
        }
        /* random strings of length 2..6 */
        for (int t = 0; t < 400; t++) {
            s.n = (size_t)tu_range(&rng, 2, 6);
            for (size_t k = 0; k < s.n; k++)
                s.c[k] = a[tu_range(&rng, 0, (int64_t)na - 1)];
            compare_one(g, re, pat, &s, &rng, &matched), total++;
        }
        /* the seed and 1 to 3 edits of it */
        cps seed;
        decode_seed(DIFF[p].seed, &seed);
        compare_one(g, re, pat, &seed, &rng, &matched), total++;
        for (int t = 0; t < 400; t++) {
            s = seed;
            int edits = (int)tu_range(&rng, 1, 3);
            for (int e = 0; e < edits; e++) {
                int op = (int)tu_range(&rng, 0, 2);
                uint32_t c = a[tu_range(&rng, 0, (int64_t)na - 1)];
                if (op == 0 && s.n > 0) {
                    s.c[tu_range(&rng, 0, (int64_t)s.n - 1)] = c;
                } else if (op == 1 && s.n < 60) {
                    size_t at = (size_t)tu_range(&rng, 0, (int64_t)s.n);
                    memmove(s.c + at + 1, s.c + at, (s.n - at) * sizeof *s.c);
                    s.c[at] = c;
                    s.n++;
                } else if (s.n > 0) {
                    size_t at = (size_t)tu_range(&rng, 0, (int64_t)s.n - 1);
                    memmove(s.c + at, s.c + at + 1, (s.n - at - 1) * sizeof *s.c);
                    s.n--;
                }
            }
            compare_one(g, re, pat, &s, &rng, &matched), total++;
        }
        /* a pattern the runs never match (or always match) tests little:
         * the seed makes at least one match; "a[]" matches nothing */
        if (strcmp(pat, "a[]") != 0)
            ck_assert_msg(matched > 0, "'%s': no string matched", pat);
        pcre2_code_free(re);
        sift_grammar_free(g);
    }
}

START_TEST(test_the_grammar_agrees_with_pcre2_on_random_strings_part_1)
{
    differential(0, 16);
}
END_TEST

START_TEST(test_the_grammar_agrees_with_pcre2_on_random_strings_part_2)
{
    differential(16, 32);
}
END_TEST

START_TEST(test_the_grammar_agrees_with_pcre2_on_random_strings_part_3)
{
    differential(32, 48);
}
END_TEST

START_TEST(test_the_grammar_agrees_with_pcre2_on_random_strings_part_4)
{
    differential(48, N(DIFF));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Encodings                                                           */
/* ------------------------------------------------------------------ */

/* \s, \d and \w mean other things to ECMA-262 and to Unicode-aware
 * engines (Python's re): the grammar takes what both accept, in a class
 * and in a negated class. */
START_TEST(test_predefined_sets_take_what_ecma_and_unicode_engines_agree_on)
{
    sift_grammar *g = string_grammar("^\\S$", 4);
    ck_assert(accepts_str(g, "a"));
    ck_assert(!accepts_str(g, "\\u001e"));
    ck_assert(!accepts_str(g, "\\u001E"));
    ck_assert(!accepts_str(g, "\xc2\x85"));     /* U+0085: Python's space */
    ck_assert(!accepts_str(g, "\xef\xbb\xbf")); /* U+FEFF: ECMA-262's */
    sift_grammar_free(g);
    g = string_grammar("^\\s$", 4);
    ck_assert(accepts_str(g, " "));
    ck_assert(accepts_str(g, "\xc2\xa0"));
    ck_assert(!accepts_str(g, "\xef\xbb\xbf"));
    ck_assert(!accepts_str(g, "\\u001f"));
    sift_grammar_free(g);
    g = string_grammar("^[^\\s]$", 7);
    ck_assert(accepts_str(g, "a"));
    ck_assert(!accepts_str(g, "\\u001c"));
    ck_assert(!accepts_str(g, "\xef\xbb\xbf"));
    sift_grammar_free(g);
    g = string_grammar("^\\W$", 4);
    ck_assert(accepts_str(g, "-"));
    ck_assert(!accepts_str(g, "\xc3\xa9"));
    sift_grammar_free(g);
    g = string_grammar("^[^\\d]$", 7);
    ck_assert(accepts_str(g, "x"));
    ck_assert(!accepts_str(g, "\xd9\xa3")); /* U+0663, a Unicode digit */
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_the_canonical_and_the_escaped_forms_of_a_quote_are_both_accepted)
{
    sift_grammar *g = string_grammar("^a\"b$", 5);
    ck_assert(accepts_str(g, "a\\\"b"));
    ck_assert(accepts_str(g, "a\\u0022b"));
    ck_assert(!accepts_str(g, "a\"b"));
    ck_assert(!accepts_str(g, "a\\\\b"));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_character_that_needs_no_escape_is_accepted_raw_only)
{
    /* documented: \uXXXX only for the characters JSON must escape */
    sift_grammar *g = string_grammar("^[a\xc3\xa9]$", 6);
    ck_assert(accepts_str(g, "a"));
    ck_assert(accepts_str(g, "\xc3\xa9"));
    ck_assert(!accepts_str(g, "\\u0061"));
    ck_assert(!accepts_str(g, "\\u00e9"));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_slash_is_accepted_raw_and_escaped)
{
    sift_grammar *g = string_grammar("^\\/$", 4);
    ck_assert(accepts_str(g, "/"));
    ck_assert(accepts_str(g, "\\/"));
    ck_assert(!accepts_str(g, "\\u002f"));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_controls_are_accepted_only_escaped)
{
    sift_grammar *g = string_grammar("^[\\x00-\\x1f]$", 12);
    char raw[2] = {0x01, 0};
    ck_assert(!accepts(g, raw, 1));
    ck_assert(!accepts_str(g, "\n"));
    ck_assert(accepts_str(g, "\\n"));
    ck_assert(accepts_str(g, "\\u000A"));
    ck_assert(accepts_str(g, "\\u000a"));
    ck_assert(accepts_str(g, "\\u0001"));
    ck_assert(accepts_str(g, "\\u001F"));
    ck_assert(accepts_str(g, "\\u0000"));
    ck_assert(!accepts_str(g, "\\u0020"));
    ck_assert(!accepts_str(g, "\\x"));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_dot_excludes_the_four_line_terminators_only)
{
    sift_grammar *g = string_grammar("^.$", 3);
    ck_assert(!accepts_str(g, "\\n"));
    ck_assert(!accepts_str(g, "\\r"));
    ck_assert(!accepts_str(g, "\\u000d"));
    ck_assert(!accepts_str(g, "\xe2\x80\xa8"));
    ck_assert(!accepts_str(g, "\xe2\x80\xa9"));
    ck_assert(accepts_str(g, "\\t"));
    ck_assert(accepts_str(g, "\\u000b"));
    ck_assert(accepts_str(g, "\\\""));
    ck_assert(accepts_str(g, "\xf0\x9f\x98\x80"));
    ck_assert(accepts_str(g, "\xc2\x85")); /* NEL is not a terminator in ECMA-262 */
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_an_unanchored_pattern_matches_anywhere_in_the_string)
{
    sift_grammar *g = string_grammar("b+", 2);
    ck_assert(accepts_str(g, "b"));
    ck_assert(accepts_str(g, "\\\"\\n abbb\\u0001c"));
    ck_assert(!accepts_str(g, "a\\\\c"));
    sift_grammar_free(g);
    g = string_grammar("^b", 2);
    ck_assert(accepts_str(g, "bxx"));
    ck_assert(!accepts_str(g, "xb"));
    sift_grammar_free(g);
    g = string_grammar("b$", 2);
    ck_assert(accepts_str(g, "xxb"));
    ck_assert(!accepts_str(g, "bx"));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_each_top_level_alternative_keeps_its_own_anchors)
{
    sift_grammar *g = string_grammar("^a|b$", 5);
    ck_assert(accepts_str(g, "axx"));
    ck_assert(accepts_str(g, "xxb"));
    ck_assert(!accepts_str(g, "xax"));
    ck_assert(!accepts_str(g, "bx"));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_the_translation_is_one_parenthesised_expression_without_rule_references)
{
    const char *pats[] = {"^a$", "abc", "^(a|b)*$", ".", "[^x]", "", "^$"};
    for (size_t k = 0; k < N(pats); k++) {
        char *e = translate(pats[k], strlen(pats[k]));
        size_t n = strlen(e);
        ck_assert_msg(n >= 2 && e[0] == '(' && e[n - 1] == ')', "%s -> %s", pats[k], e);
        /* balanced outside literals and classes: the first '(' closes last */
        int depth = 0, in_lit = 0, in_cls = 0;
        for (size_t i = 0; i < n; i++) {
            char c = e[i];
            if (c == '\\' && (in_lit || in_cls)) {
                i++;
                continue;
            }
            if (in_lit) {
                in_lit = c != '"';
            } else if (in_cls) {
                in_cls = c != ']';
            } else if (c == '"') {
                in_lit = 1;
            } else if (c == '[') {
                in_cls = 1;
            } else if (c == '(') {
                depth++;
            } else if (c == ')') {
                depth--;
                ck_assert_msg(depth > 0 || i == n - 1, "%s -> %s", pats[k], e);
            } else {
                /* no rule name: only spaces, '|' and postfixes */
                ck_assert_msg(strchr(" |*+?{},0123456789", c) != NULL, "%s -> %s", pats[k], e);
            }
        }
        free(e);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

static const struct {
    const char *pat;
    sift_status st;
    int col;
    const char *msg;
} ERRS[] = {
    {"a)", SIFT_E_SCHEMA_SYNTAX, 2, "pattern:2: unmatched ')'"},
    {"(a", SIFT_E_SCHEMA_SYNTAX, 1, "pattern:1: unterminated group"},
    {"x[a", SIFT_E_SCHEMA_SYNTAX, 2, "pattern:2: unterminated character class"},
    {"*a", SIFT_E_SCHEMA_SYNTAX, 1, "pattern:1: nothing to repeat before this quantifier"},
    {"a**", SIFT_E_SCHEMA_SYNTAX, 3, "pattern:3: nothing to repeat before this quantifier"},
    {"^*", SIFT_E_SCHEMA_SYNTAX, 2, "pattern:2: nothing to repeat before this quantifier"},
    {"{2}", SIFT_E_SCHEMA_SYNTAX, 1, "pattern:1: nothing to repeat before this quantifier"},
    {"ab{3,2}", SIFT_E_SCHEMA_SYNTAX, 3, "pattern:3: numbers out of order in {3,2}"},
    {"[z-a]", SIFT_E_SCHEMA_SYNTAX, 2, "pattern:2: range out of order in character class"},
    {"[\\d-z]", SIFT_E_SCHEMA_SYNTAX, 4, "pattern:4: a class escape cannot bound a range"},
    {"\xc3\xa9(?=x)", SIFT_E_SCHEMA_UNSUPPORTED, 2,
     "pattern:2: lookahead (?=...) is not supported"},
    {"(?!x)", SIFT_E_SCHEMA_UNSUPPORTED, 1, "pattern:1: lookahead (?!...) is not supported"},
    {"a(?<!x)", SIFT_E_SCHEMA_UNSUPPORTED, 2, "pattern:2: lookbehind (?<!...) is not supported"},
    {"(?i)abc", SIFT_E_SCHEMA_UNSUPPORTED, 1,
     "pattern:1: inline modifiers (?i...) are not supported"},
    {"(a)\\1", SIFT_E_SCHEMA_UNSUPPORTED, 4, "pattern:4: backreferences (\\1) are not supported"},
    {"(?<n>a)\\k<n>", SIFT_E_SCHEMA_UNSUPPORTED, 8,
     "pattern:8: backreferences (\\k<name>) are not supported"},
    {"a\\b", SIFT_E_SCHEMA_UNSUPPORTED, 2, "pattern:2: the word boundary \\b is not supported"},
    {"\\Ba", SIFT_E_SCHEMA_UNSUPPORTED, 1, "pattern:1: the non-word-boundary \\B is not supported"},
    {"x\\p{L}", SIFT_E_SCHEMA_UNSUPPORTED, 2,
     "pattern:2: Unicode property escapes (\\p{...}) are not supported"},
    {"[\\01]", SIFT_E_SCHEMA_UNSUPPORTED, 2, "pattern:2: octal escapes are not supported"},
    {"a^b", SIFT_E_SCHEMA_UNSUPPORTED, 2,
     "pattern:2: the anchor '^' is supported only at the start or end of a top-level "
     "alternative"},
    {"a$b", SIFT_E_SCHEMA_UNSUPPORTED, 2,
     "pattern:2: the anchor '$' is supported only at the start or end of a top-level "
     "alternative"},
    {"(^a)*", SIFT_E_SCHEMA_UNSUPPORTED, 2,
     "pattern:2: the anchor '^' is supported only at the start or end of a top-level "
     "alternative"},
    {"\\ud800", SIFT_E_SCHEMA_UNSUPPORTED, 1,
     "pattern:1: a lone surrogate (\\uD800) is not supported"},
    {"\\x4", SIFT_E_SCHEMA_SYNTAX, 1, "pattern:1: escape \\x needs 2 hex digits"},
    {"\\u12", SIFT_E_SCHEMA_SYNTAX, 1, "pattern:1: escape \\u needs 4 hex digits"},
    {"\\u{110000}", SIFT_E_SCHEMA_SYNTAX, 1, "pattern:1: escape \\u{...} is beyond U+10FFFF"},
    {"ab\\q", SIFT_E_SCHEMA_SYNTAX, 3, "pattern:3: unknown escape '\\q'"},
    {"\\c1", SIFT_E_SCHEMA_SYNTAX, 1, "pattern:1: escape \\c needs a letter"},
    {"ab\\", SIFT_E_SCHEMA_SYNTAX, 3, "pattern:3: '\\' at the end of the pattern"},
    {"(?<1a>x)", SIFT_E_SCHEMA_SYNTAX, 1, "pattern:1: invalid group name"},
    {"(?", SIFT_E_SCHEMA_SYNTAX, 1, "pattern:1: invalid group '(?'"},
    {"a\xff", SIFT_E_SCHEMA_SYNTAX, 2, "pattern:2: invalid UTF-8"},
    {"a{2001}", SIFT_E_SCHEMA_LIMIT, 2, "pattern:2: repetition count 2001 exceeds 2000"},
    {"a{2000}", SIFT_E_SCHEMA_LIMIT, 2,
     "pattern:2: repetition expands to 2000 copies in the grammar (limit 2000)"},
    {"(a?){1000}", SIFT_E_SCHEMA_LIMIT, 5,
     "pattern:5: repetition expands to 2000 copies in the grammar (limit 2000)"},
};

START_TEST(test_errors_have_their_status_and_exact_column)
{
    sift__alloc al = default_al();
    for (size_t k = 0; k < N(ERRS); k++) {
        sift_error err;
        memset(&err, 0, sizeof err);
        char *out = (char *)1;
        size_t n = 7;
        sift_status st = sift__json_regex_to_gbnf(&al, ERRS[k].pat, strlen(ERRS[k].pat), 1 << 20,
                                                  &out, &n, &err);
        ck_assert_msg(st == ERRS[k].st, "'%s': status %d (%s)", ERRS[k].pat, st, err.message);
        ck_assert_int_eq(err.code, st);
        ck_assert_str_eq(err.message, ERRS[k].msg);
        ck_assert_int_eq(err.column, ERRS[k].col);
        ck_assert_int_eq(err.line, 1);
        ck_assert_str_eq(err.source, "pattern");
        /* the offset is the byte offset of the column */
        int32_t col = 1;
        for (int64_t i = 0; i < err.offset; i++)
            col += ((unsigned char)ERRS[k].pat[i] & 0xC0) != 0x80;
        ck_assert_int_eq(col, ERRS[k].col);
        ck_assert_ptr_null(out);
        ck_assert_uint_eq(n, 0);
    }
}
END_TEST

START_TEST(test_null_arguments_are_arg_errors)
{
    sift__alloc al = default_al();
    char *out;
    size_t n;
    ck_assert_int_eq(sift__json_regex_to_gbnf(&al, NULL, 1, 100, &out, &n, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift__json_regex_to_gbnf(&al, "a", 1, 100, NULL, &n, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift__json_regex_to_gbnf(&al, "a", 1, 100, &out, NULL, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift__json_regex_to_gbnf(NULL, "a", 1, 100, &out, &n, NULL), SIFT_E_ARG);
    /* an empty pattern may be NULL */
    ck_assert_int_eq(sift__json_regex_to_gbnf(&al, NULL, 0, 1000, &out, &n, NULL), SIFT_OK);
    sift__free(&al, out);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Limits                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_the_output_never_exceeds_max_out)
{
    sift__alloc al = default_al();
    const char *pat = "^[a-z]+(-[a-z]+)*\\d?$";
    char *out;
    size_t full;
    ck_assert_int_eq(sift__json_regex_to_gbnf(&al, pat, strlen(pat), 1 << 20, &out, &full, NULL),
                     SIFT_OK);
    sift__free(&al, out);
    for (size_t cap = 0; cap <= full + 1; cap++) {
        size_t n = 0;
        sift_error err;
        sift_status st = sift__json_regex_to_gbnf(&al, pat, strlen(pat), cap, &out, &n, &err);
        if (cap < full) {
            ck_assert_int_eq(st, SIFT_E_SCHEMA_LIMIT);
            ck_assert_ptr_null(out);
            ck_assert_msg(strstr(err.message, "exceeds") != NULL, "%s", err.message);
        } else {
            ck_assert_int_eq(st, SIFT_OK);
            ck_assert_uint_eq(n, full);
            sift__free(&al, out);
        }
    }
}
END_TEST

START_TEST(test_groups_nested_past_the_limit_are_limit_errors)
{
    sift__alloc al = default_al();
    char pat[512];
    size_t n = 0;
    for (int k = 0; k < 100; k++)
        pat[n++] = '(';
    pat[n++] = 'a';
    for (int k = 0; k < 100; k++)
        pat[n++] = ')';
    char *out;
    size_t on;
    sift_error err;
    ck_assert_int_eq(sift__json_regex_to_gbnf(&al, pat, n, 1 << 20, &out, &on, &err), SIFT_OK);
    sift__free(&al, out);
    memmove(pat + 1, pat, n);
    pat[0] = '(';
    pat[n + 1] = ')';
    ck_assert_int_eq(sift__json_regex_to_gbnf(&al, pat, n + 2, 1 << 20, &out, &on, &err),
                     SIFT_E_SCHEMA_LIMIT);
    ck_assert_int_eq(err.column, 101);
    ck_assert_str_eq(err.message, "pattern:101: groups nest deeper than 100");
}
END_TEST

START_TEST(test_repetitions_just_under_the_grammar_limits_compile)
{
    const char *pats[] = {"^a{1999}$",         "^(a?){999}$", "^(ab|cd){1999}$",
                          "^((a{1999}){99})$", ".{0,1999}",   "^(?:\\S+\\s+){0,99}\\S+$"};
    for (size_t k = 0; k < N(pats); k++) {
        sift_grammar *g = string_grammar(pats[k], strlen(pats[k]));
        sift_grammar_free(g);
    }
    /* 100 words: the most the repetition allows */
    const char *pat = "^(?:\\S+\\s+){0,99}\\S+$";
    sift_grammar *g = string_grammar(pat, strlen(pat));
    char buf[512];
    size_t n = 0;
    for (int w = 0; w < 100; w++)
        n += (size_t)sprintf(buf + n, "w%d ", w);
    ck_assert(accepts(g, buf, n - 1));
    ck_assert(!accepts(g, buf, n));
    n += (size_t)sprintf(buf + n, "w100");
    ck_assert(!accepts(g, buf, n));
    sift_grammar_free(g);
}
END_TEST

/* A counting allocator that fails the Nth call. */
typedef struct fa {
    long calls, fail_at, live;
} fa;
static void *fa_alloc(void *user, size_t size)
{
    fa *f = user;
    if (++f->calls == f->fail_at)
        return NULL;
    void *p = malloc(size);
    f->live += p != NULL;
    return p;
}
static void fa_free(void *user, void *p)
{
    fa *f = user;
    f->live -= p != NULL;
    free(p);
}

START_TEST(test_failing_the_nth_allocation_is_clean_for_every_n)
{
    const char *pat = "^(?:[a-z0-9]+(-[a-z0-9]+)*|x{2,5}[^\\s\"]|\\d{3})$";
    for (long k = 1;; k++) {
        fa f = {0, k, 0};
        sift_allocator a = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
        sift__alloc al;
        ck_assert_int_eq(sift__alloc_init(&al, &a, NULL), SIFT_OK);
        char *out = NULL;
        size_t n;
        sift_error err;
        sift_status st = sift__json_regex_to_gbnf(&al, pat, strlen(pat), 1 << 20, &out, &n, &err);
        if (st == SIFT_OK) {
            sift__free(&al, out);
            ck_assert_int_eq(f.live, 0);
            ck_assert_int_gt(k, 3);
            break;
        }
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        ck_assert_ptr_null(out);
        ck_assert_int_eq(f.live, 0);
    }
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("json_regex");
    TCase *tc = tcase_create("differential");
    /* property runs: a few thousand strings per part */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_the_grammar_agrees_with_pcre2_on_random_strings_part_1);
    tcase_add_test(tc, test_the_grammar_agrees_with_pcre2_on_random_strings_part_2);
    tcase_add_test(tc, test_the_grammar_agrees_with_pcre2_on_random_strings_part_3);
    tcase_add_test(tc, test_the_grammar_agrees_with_pcre2_on_random_strings_part_4);
    suite_add_tcase(s, tc);
    tc = tcase_create("encodings");
    tcase_add_test(tc, test_the_canonical_and_the_escaped_forms_of_a_quote_are_both_accepted);
    tcase_add_test(tc, test_predefined_sets_take_what_ecma_and_unicode_engines_agree_on);
    tcase_add_test(tc, test_a_character_that_needs_no_escape_is_accepted_raw_only);
    tcase_add_test(tc, test_a_slash_is_accepted_raw_and_escaped);
    tcase_add_test(tc, test_controls_are_accepted_only_escaped);
    tcase_add_test(tc, test_dot_excludes_the_four_line_terminators_only);
    tcase_add_test(tc, test_an_unanchored_pattern_matches_anywhere_in_the_string);
    tcase_add_test(tc, test_each_top_level_alternative_keeps_its_own_anchors);
    tcase_add_test(tc,
                   test_the_translation_is_one_parenthesised_expression_without_rule_references);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_errors_have_their_status_and_exact_column);
    tcase_add_test(tc, test_null_arguments_are_arg_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("limits");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_the_output_never_exceeds_max_out);
    tcase_add_test(tc, test_groups_nested_past_the_limit_are_limit_errors);
    tcase_add_test(tc, test_repetitions_just_under_the_grammar_limits_compile);
    tcase_add_test(tc, test_failing_the_nth_allocation_is_clean_for_every_n);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_utf8.c - the one UTF-8 validator (src/core/utf8.c).
 *
 * Before issue 10 the config reader (tree.c: utf8_bad), the GBNF parser
 * (gbnf_parse.c: first_bad_byte) and the GGUF piece decoder
 * (vocab_load.c: utf8_cp) each had their own. Their code is kept here,
 * verbatim, as references: the shared validator must accept exactly what
 * they accepted, report the same offset, and decode the same code point,
 * on every string of up to three bytes, on four-byte strings over the
 * bytes where the rules change, and on the named edge cases (overlongs,
 * surrogates, code points above U+10FFFF, truncated sequences).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "sift_internal.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the three validators sift had before, as they were ----------- */

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

/* First invalid UTF-8 byte or NUL; returns its offset or SIZE_MAX. */
static size_t first_bad_byte(const unsigned char *s, size_t n, int *is_nul)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c == 0) {
            *is_nul = 1;
            return i;
        }
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0;
            if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90;
            if (c == 0xF4)
                hi = 0x8F;
        } else {
            *is_nul = 0;
            return i;
        }
        for (size_t k = 1; k < len; k++) {
            if (i + k >= n || s[i + k] < (k == 1 ? lo : 0x80) || s[i + k] > (k == 1 ? hi : 0xBF)) {
                *is_nul = 0;
                return i;
            }
        }
        i += len;
    }
    return SIZE_MAX;
}

/* Decodes one UTF-8 code point at s[0..n); returns its length (0 on
 * invalid UTF-8) and the code point through *cp. */
static size_t utf8_cp(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

/* The old GGUF decoder as a validator of whole strings. */
static size_t old_vocab_bad(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_cp(s + i, n - i, &cp);
        if (!k)
            return i;
        i += k;
    }
    return n;
}

/* ---- the comparison ------------------------------------------------ */

/* Fails the test unless the shared functions agree with all three old
 * ones on s[0..n). Plain comparisons first: Check marks the place of
 * every assertion it runs, which is slow over millions of strings. */
static void agree(const unsigned char *s, size_t n)
{
    size_t bad = 12345;
    int ok = sift__utf8_valid(s, n, &bad);
    size_t want = utf8_bad(s, n);
    int is_nul = 0;
    size_t g = first_bad_byte(s, n, &is_nul);
    /* first_bad_byte also stops at NUL, which is well-formed UTF-8 */
    int gbnf_ok = memchr(s, 0, n) != NULL || (g == SIZE_MAX ? n : g) == want;
    uint32_t a = 0xFFFFFFFF, b = 0xFFFFFFFF;
    size_t ka = n ? sift__utf8_decode(s, n, &a) : 0;
    size_t kb = n ? utf8_cp(s, n, &b) : 0;
    int dec_ok = ka == kb && (ka ? a == b : a == 0xFFFFFFFF); /* untouched on failure */
    if (bad == want && ok == (want == n) && gbnf_ok && old_vocab_bad(s, n) == want && dec_ok)
        return;
    char hex[64] = "";
    for (size_t i = 0; i < n && i < 8; i++)
        snprintf(hex + 3 * i, sizeof hex - 3 * i, "%02x ", s[i]);
    ck_abort_msg("disagree on [%s]: new %d/%zu, tree %zu, gbnf %zu, vocab %zu, decode %zu/%zu", hex,
                 ok, bad, want, g, old_vocab_bad(s, n), ka, kb);
}

START_TEST(test_utf8_agrees_with_the_old_validators_on_every_short_string)
{
    unsigned char s[3];
    for (unsigned x = 0; x < 256; x++) {
        s[0] = (unsigned char)x;
        agree(s, 1);
        for (unsigned y = 0; y < 256; y++) {
            s[1] = (unsigned char)y;
            agree(s, 2);
        }
    }
    /* Three bytes from a lead byte on (an ASCII first byte leaves a
     * two-byte string, a continuation byte fails at once: both above). */
    for (unsigned x = 0xC0; x < 256; x++)
        for (unsigned y = 0; y < 256; y++)
            for (unsigned z = 0; z < 256; z++) {
                s[0] = (unsigned char)x;
                s[1] = (unsigned char)y;
                s[2] = (unsigned char)z;
                agree(s, 3);
            }
}
END_TEST

START_TEST(test_utf8_agrees_with_the_old_validators_on_four_byte_strings)
{
    /* every byte where a rule of Table 3-7 starts or ends, and ASCII */
    static const unsigned char edge[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F,
                                         0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0,
                                         0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
    unsigned char s[4];
    for (unsigned x = 0xF0; x < 256; x++)
        for (size_t i = 0; i < N(edge); i++)
            for (size_t j = 0; j < N(edge); j++)
                for (size_t k = 0; k < N(edge); k++) {
                    s[0] = (unsigned char)x;
                    s[1] = edge[i];
                    s[2] = edge[j];
                    s[3] = edge[k];
                    agree(s, 4);
                }
}
END_TEST

typedef struct ucase {
    const char *what;
    const char *s;
    size_t bad; /* expected offset; SIZE_MAX = valid */
} ucase;

static const ucase cases[] = {
    {"empty", "", SIZE_MAX},
    {"ASCII", "abc", SIZE_MAX},
    {"U+00E9", "\xC3\xA9", SIZE_MAX},
    {"U+20AC", "a\xE2\x82\xAC", SIZE_MAX},
    {"U+10FFFF", "\xF4\x8F\xBF\xBF", SIZE_MAX},
    {"U+D7FF before the surrogates", "\xED\x9F\xBF", SIZE_MAX},
    {"U+E000 after the surrogates", "\xEE\x80\x80", SIZE_MAX},
    {"overlong NUL", "a\xC0\x80", 1},
    {"overlong '/'", "\xC1\xAF", 0},
    {"overlong three-byte", "xy\xE0\x9F\xBF", 2},
    {"overlong four-byte", "\xF0\x8F\xBF\xBF", 0},
    {"high surrogate U+D800", "\xED\xA0\x80", 0},
    {"low surrogate U+DFFF", "ab\xED\xBF\xBF", 2},
    {"U+110000", "\xF4\x90\x80\x80", 0},
    {"F5 lead", "\xF5\x80\x80\x80", 0},
    {"FF", "a\xFF", 1},
    {"stray continuation", "a\x80", 1},
    {"truncated two-byte", "abc\xC3", 3},
    {"truncated three-byte", "\xE2\x82", 0},
    {"truncated four-byte", "z\xF0\x9F\x98", 1},
    {"bad second byte", "\xE2\x28\xA1", 0},
    {"bad third byte", "\xE2\x82\x28", 0},
    {"valid then bad", "\xC3\xA9\xC3", 2},
};

START_TEST(test_utf8_reports_the_first_bad_sequence_of_each_edge_case)
{
    const ucase *c = &cases[_i];
    const unsigned char *s = (const unsigned char *)c->s;
    size_t n = strlen(c->s), bad = 0;
    int ok = sift__utf8_valid(s, n, &bad);
    ck_assert_msg(ok == (c->bad == SIZE_MAX), "%s: valid = %d", c->what, ok);
    ck_assert_msg(bad == (ok ? n : c->bad), "%s: bad at %zu", c->what, bad);
    ck_assert_int_eq(sift__utf8_valid(s, n, NULL), ok);
    agree(s, n);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("utf8");
    TCase *tc = tcase_create("agrees");
    tcase_set_timeout(tc, 60); /* a property run: 4M strings */
    tcase_add_test(tc, test_utf8_agrees_with_the_old_validators_on_every_short_string);
    tcase_add_test(tc, test_utf8_agrees_with_the_old_validators_on_four_byte_strings);
    suite_add_tcase(s, tc);
    tc = tcase_create("edge_cases");
    tcase_add_loop_test(tc, test_utf8_reports_the_first_bad_sequence_of_each_edge_case, 0,
                        (int)N(cases));
    suite_add_tcase(s, tc);
    return s;
}

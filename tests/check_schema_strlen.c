/*
 * check_schema_strlen.c - "pattern" beside minLength / maxLength
 * (src/schema/json_schema_strlen.c and the one-repetition fit in
 * json_regex_emit.c). Boundary strings of hand-picked schemas, code
 * points counted as JSON Schema counts them (a multi-byte character is
 * one), unanchored patterns, the refusal past the construction's bound,
 * and a differential run: every string over a small alphabet up to a
 * length, through the grammar and through PCRE2 plus a length check (the
 * truth), for patterns whose lengths vary in several places.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sift.h"
#include "testutil.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Whether g accepts the JSON string whose content is `s`. */
static int accepts(sift_grammar *g, const char *s)
{
    char text[256];
    snprintf(text, sizeof text, "\"%s\"", s);
    return tu_accepts(g, text);
}

static void check(const char *schema, const char *const *good, size_t ng, const char *const *bad,
                  size_t nb)
{
    sift_grammar *g = tu_schema_compile(schema);
    for (size_t k = 0; k < ng; k++)
        ck_assert_msg(accepts(g, good[k]), "%s rejects \"%s\"", schema, good[k]);
    for (size_t k = 0; k < nb; k++)
        ck_assert_msg(!accepts(g, bad[k]), "%s accepts \"%s\"", schema, bad[k]);
    sift_grammar_free(g);
}

START_TEST(test_words_joined_by_hyphens_at_the_length_boundaries)
{
    static const char *const good[] = {"abc", "a-b", "ab-c", "abcdefgh", "a-b-c-de", "abc-defg"};
    static const char *const bad[] = {"ab",  "a-",  "abcdefghi", "abc-defgh", "a-b-c-d-e",
                                      "-ab", "ab-", "a--b",      "",          "ABC"};
    check("{\"type\":\"string\",\"pattern\":\"^[a-z]+(-[a-z]+)*$\",\"minLength\":3,"
          "\"maxLength\":8}",
          good, N(good), bad, N(bad));
}
END_TEST

START_TEST(test_a_multi_byte_character_counts_as_one)
{
    /* é (2 bytes), 日 (3 bytes), 😀 (4 bytes): one code point each */
    static const char *const good[] = {"\xc3\xa9-\xc3\xa9", "\xe6\x97\xa5\xe6\x97\xa5-x",
                                       "\xf0\x9f\x98\x80-\xf0\x9f\x98\x80\xf0\x9f\x98\x80"};
    static const char *const bad[] = {"\xc3\xa9-", "\xe6\x97\xa5\xe6\x97\xa5-\xe6\x97\xa5x",
                                      "\xc3\xa9\xc3\xa9"};
    check("{\"type\":\"string\",\"pattern\":\"^[^-]+(-[^-]+)+$\",\"minLength\":3,"
          "\"maxLength\":4}",
          good, N(good), bad, N(bad));
}
END_TEST

START_TEST(test_an_unanchored_pattern_matches_anywhere_within_the_lengths)
{
    /* "a+" matches any string holding an "a" */
    static const char *const good[] = {"xax", "aaa", "bba", "abbb", "\xc3\xa9\xc3\xa9\x61"};
    static const char *const bad[] = {"aa",    "xa",    "bbb",
                                      "abbbb", "aaaaa", "\xc3\xa9\xc3\xa9\xc3\xa9"};
    check("{\"type\":\"string\",\"pattern\":\"a+\",\"minLength\":3,\"maxLength\":4}", good, N(good),
          bad, N(bad));
    /* anchored at one end only; no maxLength */
    static const char *const good2[] = {"1-x", "12-xyz", "1-xxxxxxxxxxxxxxxxxxxxx"};
    static const char *const bad2[] = {"1-", "x1-x", "-xy"};
    check("{\"type\":\"string\",\"pattern\":\"^[0-9]+-\",\"minLength\":3}", good2, N(good2), bad2,
          N(bad2));
}
END_TEST

START_TEST(test_lengths_that_no_match_has_admit_no_string)
{
    sift_grammar *g = tu_schema_compile("{\"type\":\"array\",\"items\":{\"type\":\"string\","
                                        "\"pattern\":\"^a+b+$\",\"minLength\":3,\"maxLength\":1}}");
    sift_grammar_reset(g);
    sift_error err;
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "[]", 2, &err), SIFT_OK);
    ck_assert(sift_grammar_is_complete(g));
    sift_grammar_free(g);
    g = tu_schema_compile("{\"type\":\"array\",\"items\":{\"type\":\"string\","
                          "\"pattern\":\"^(ab|c)+(xy)+$\",\"minLength\":3,\"maxLength\":3}}");
    sift_grammar_reset(g);
    /* "cxy" alone has three characters: a string opening with "a" cannot end */
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "[\"c", 3, &err), SIFT_OK);
    sift_grammar_reset(g);
    ck_assert_int_ne(sift_grammar_accept_bytes(g, "[\"a", 3, &err), SIFT_OK);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_past_the_bound_the_length_keyword_is_refused_where_it_stands)
{
    const char *schema = "{\"type\": \"string\", \"pattern\": \"^(?:[a-z]+ ){0,99}[a-z]+$\", "
                         "\"maxLength\": 500}";
    char *out = NULL;
    size_t n = 0;
    sift_error err;
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sift_status st = sift_json_schema_to_gbnf(&out, &n, schema, strlen(schema), &sp, &err);
    ck_assert_int_eq(st, SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_null(out);
    ck_assert_str_eq(err.message, "schema:1:73: #/maxLength: minLength / maxLength beside this "
                                  "pattern: more than 4096 grammar rules");
}
END_TEST

/* Blocks allocated and not yet freed, through count_alloc / count_free. */
static long live_blocks;
static void *count_alloc(void *u, size_t n)
{
    (void)u;
    void *p = malloc(n);
    live_blocks += p != NULL;
    return p;
}
static void count_free(void *u, void *p)
{
    (void)u;
    live_blocks -= p != NULL;
    free(p);
}

/* The length keyword of `schema` is refused with `msg` (after the
 * "schema:1:COL: #/maxLength: " prefix), and the refusal frees every
 * block it allocated. */
static void check_refused_with(const char *schema, const char *msg)
{
    char *out = NULL;
    size_t n = 0;
    sift_error err;
    sift_allocator al = {sizeof al, count_alloc, count_free, NULL, NULL};
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.allocator = &al;
    live_blocks = 0;
    sift_status st = sift_json_schema_to_gbnf(&out, &n, schema, strlen(schema), &sp, &err);
    ck_assert_msg(st == SIFT_E_SCHEMA_UNSUPPORTED, "%s: status %d", schema, (int)st);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(err.message, msg) != NULL, "%s: %s", schema, err.message);
    ck_assert_msg(live_blocks == 0, "%s: %ld blocks left allocated", schema, live_blocks);
}

/* Repetitions of a piece that adds no state (an empty group, x{0}) still
 * count: nested 1000 times over they are refused at once, not unrolled
 * 10^12 times; a counter past its bound names the pairs. */
START_TEST(test_unrolling_and_the_counter_are_bounded)
{
    check_refused_with(
        "{\"type\":\"string\",\"pattern\":\"a+b+(?:(?:(?:(?:){1000}){1000}){1000}){1000}\","
        "\"maxLength\":4}",
        "minLength / maxLength beside this pattern: repetitions unroll into more than "
        "65536 pieces");
    check_refused_with(
        "{\"type\":\"string\",\"pattern\":\"a+b+\",\"minLength\":1000000}",
        "minLength / maxLength beside this pattern: more than 400000 (state, length) "
        "pairs");
}
END_TEST

/* A refusal met partway through a piece (a bound reached after a
 * character in a group, in a repetition or in an alternative) frees
 * the part built so far: the fuzzer found the first of these leaking. */
START_TEST(test_a_refusal_partway_through_a_piece_frees_what_was_built)
{
    static const struct {
        const char *pat, *why;
    } cases[] = {
        {"a+(b|(?:(?:(?:(?:){1000}){1000}){1000}){1000})", "more than 65536 pieces"},
        {"a+(?:b(?:(?:(?:){1000}){1000}){1000}){1000}", "more than 65536 pieces"},
        {"a+(?:b|(?:(?:(?:){1000}){1000}){1000}){9}", "more than 65536 pieces"},
        {"(?:ab[c-e]{1100})+z", "more than 1024 automaton states"},
        {"x(a[b-z]{2,1100})y", "more than 1024 automaton states"},
        {"x(a(b|c[d-f]{1100}))*", "more than 1024 automaton states"},
        {"(a|b[c-e]{1100})z", "more than 1024 automaton states"},
    };
    char schema[200];
    for (size_t i = 0; i < N(cases); i++) {
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"pattern\":\"%s\",\"maxLength\":5}",
                 cases[i].pat);
        check_refused_with(schema, cases[i].why);
    }
}
END_TEST

START_TEST(test_an_automaton_too_large_to_determinize_is_kept_as_it_is)
{
    /* "an a, then 9 more": 2^10 subsets, over the subset bound */
    static const char *const good[] = {"abbbbbbbbb", "babbbbbbbbb", "bbabbbbbbbbb", "aaaaaaaaaa"};
    static const char *const bad[] = {"bbbbbbbbbb", "abbbbbbbb", "bbbabbbbbbbbb", "bbbbbbbbbbba",
                                      "abbbbbbbbc"};
    check("{\"type\":\"string\",\"pattern\":\"a[ab]{9}\",\"minLength\":10,\"maxLength\":12}", good,
          N(good), bad, N(bad));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Against PCRE2                                                       */
/* ------------------------------------------------------------------ */

static const struct {
    const char *pat; /* as a JSON string's content */
    int lo, hi;      /* hi < 0: no maxLength */
} DIFF[] = {
    {"^a+b+$", 3, -1},
    {"^a+b+$", 2, 4},
    {"^(ab|b)*a?b+$", 2, 5},
    {"a+b", 2, 4},
    {"b", 0, 3},
    {"^(a|bb)+$|^b*a$", 1, 4},
    {"^[ab]{1,3}(ab){0,2}$", 3, 5},
    {"^(a?b?)+$", 2, 3},
    {"(ab)+|^b", 1, 5},
    {"^a*$", 2, 4},
    {"^(\\u00e9|a)+b*$", 2, 4},
};

/* The alphabet: a, b, é (two bytes). */
static const char *const SYM[] = {"a", "b", "\xc3\xa9"};

START_TEST(test_every_short_string_is_judged_as_pcre2_and_the_lengths_judge_it)
{
    for (size_t d = 0; d < N(DIFF); d++) {
        char schema[256], pat[64];
        size_t w = 0;
        for (const char *p = DIFF[d].pat; *p; p++) {
            pat[w++] = *p;
            if (*p == '\\')
                pat[w++] = '\\';
        }
        pat[w] = 0;
        if (DIFF[d].hi >= 0)
            snprintf(schema, sizeof schema,
                     "{\"type\":\"string\",\"pattern\":\"%s\",\"minLength\":%d,\"maxLength\":%d}",
                     pat, DIFF[d].lo, DIFF[d].hi);
        else
            snprintf(schema, sizeof schema,
                     "{\"type\":\"string\",\"pattern\":\"%s\",\"minLength\":%d}", pat, DIFF[d].lo);
        sift_grammar *g = tu_schema_compile(schema);
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re =
            pcre2_compile((PCRE2_SPTR)DIFF[d].pat, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
        ck_assert_ptr_nonnull(re);
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
        /* every string of 0..7 symbols */
        for (int len = 0; len <= 7; len++) {
            int total = 1;
            for (int k = 0; k < len; k++)
                total *= (int)N(SYM);
            for (int code = 0; code < total; code++) {
                char s[64] = "";
                for (int k = 0, c = code; k < len; k++, c /= (int)N(SYM))
                    strcat(s, SYM[c % (int)N(SYM)]);
                int rc = pcre2_match(re, (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL);
                int want = rc >= 0 && len >= DIFF[d].lo && (DIFF[d].hi < 0 || len <= DIFF[d].hi);
                ck_assert_msg(accepts(g, s) == want, "%s on \"%s\": want %d", schema, s, want);
            }
        }
        pcre2_match_data_free(md);
        pcre2_code_free(re);
        sift_grammar_free(g);
    }
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("schema_strlen");
    TCase *tc = tcase_create("strlen");
    tcase_add_test(tc, test_words_joined_by_hyphens_at_the_length_boundaries);
    tcase_add_test(tc, test_a_multi_byte_character_counts_as_one);
    tcase_add_test(tc, test_an_unanchored_pattern_matches_anywhere_within_the_lengths);
    tcase_add_test(tc, test_lengths_that_no_match_has_admit_no_string);
    tcase_add_test(tc, test_past_the_bound_the_length_keyword_is_refused_where_it_stands);
    tcase_add_test(tc, test_unrolling_and_the_counter_are_bounded);
    tcase_add_test(tc, test_a_refusal_partway_through_a_piece_frees_what_was_built);
    tcase_add_test(tc, test_an_automaton_too_large_to_determinize_is_kept_as_it_is);
    tcase_add_test(tc, test_every_short_string_is_judged_as_pcre2_and_the_lengths_judge_it);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_sources.c - the grammar sources beyond GBNF and JSON Schema:
 * sift_grammar_from_regex against PCRE2 (whole-text matches) on every
 * short string over a small alphabet, sift_grammar_from_choices against
 * the list itself, sift_grammar_from_structural_tags against a direct
 * implementation of the structural-tag rules on random texts, and the
 * located errors of each source.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Whole text accepted: every byte taken and the grammar complete. */
static int accepts(sift_grammar *g, const char *s, size_t n)
{
    sift_grammar_reset(g);
    if (n && sift_grammar_accept_bytes(g, s, n, NULL) != SIFT_OK)
        return 0;
    return sift_grammar_is_complete(g);
}

/* Every string of up to `maxlen` symbols over `alpha`, in turn. */
typedef struct strings {
    const char *const *alpha;
    size_t n_alpha, maxlen;
    size_t digits[8], len;
    char buf[64];
    size_t n;
} strings;

static int strings_next(strings *w)
{
    /* odometer over lengths 0..maxlen */
    if (w->len == 0 && w->n == SIZE_MAX) {
        w->n = 0;
        w->buf[0] = 0;
        return 1;
    }
    size_t k = 0;
    while (k < w->len && ++w->digits[k] == w->n_alpha)
        w->digits[k++] = 0;
    if (k == w->len) {
        if (w->len == w->maxlen)
            return 0;
        w->len++;
        memset(w->digits, 0, sizeof w->digits);
    }
    w->n = 0;
    for (size_t i = 0; i < w->len; i++) {
        const char *a = w->alpha[w->digits[i]];
        memcpy(w->buf + w->n, a, strlen(a));
        w->n += strlen(a);
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* Regex                                                               */
/* ------------------------------------------------------------------ */

static const char *const RX_ALPHA[] = {"a", "b", "0", "\xc3\xa9", "\n", "-"};

/* Regexes whose ECMA-262 and PCRE2 meanings agree on RX_ALPHA. */
static const char *const RX_CASES[] = {
    "a",
    "ab|b",
    "a*",
    "(ab)+",
    "[ab]{2,3}",
    "[^a]*",
    "\\d+",
    "\\w*-\\w*",
    "a?b?0?",
    "(a|b)*0",
    ".*",
    ".",
    "[a-b0]{1,}",
    "(a|)b",
    "\\D\\W?",
    "^ab$|b",
    "(?:a|0)*?b",
    "\xc3\xa9+",
    ("[\xc3\xa9"
     "a]b*"),
    "\\n|a",
    "(a(b|0)?)*",
    "[]|a",
    "[^]",
    "a{2}|b{0,1}",
    "[\\-a]+",
    "\\x61\\u0062",
    "(?<n>a)b",
    "a{2,}",
    "\\s?a",
    "(((a)))",
};

static pcre2_code *pcre_whole(const char *rx)
{
    int code;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)rx, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED |
                                       PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS,
                                   &code, &at, NULL);
    ck_assert_msg(re != NULL, "PCRE2 refused %s", rx);
    return re;
}

static int pcre_matches(pcre2_code *re, const char *s, size_t n)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    ck_assert_int_ge(rc, PCRE2_ERROR_NOMATCH);
    return rc > 0;
}

/* 1 when ECMA-262 (PCRE2 here) and Unicode-aware engines (Python's re)
 * may disagree on text s under regex rx: a non-ASCII character under
 * \d, \D, \w or \W, or U+001C..U+001F, U+0085 or U+FEFF under \s or \S.
 * There sift takes what both accept (json_regex.c), so it may reject
 * what PCRE2 matches but never match what PCRE2 rejects. */
static int disputed(const char *rx, const char *s, size_t n)
{
    int sp = 0, dw = 0;
    for (size_t i = 0; rx[i]; i++)
        if (rx[i] == '\\' && rx[i + 1]) {
            char e = rx[++i];
            sp |= e == 's' || e == 'S';
            dw |= e == 'd' || e == 'D' || e == 'w' || e == 'W';
        }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (dw && c >= 0x80)
            return 1;
        if (sp && ((c >= 0x1C && c <= 0x1F) ||
                   (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] == 0x85) ||
                   (c == 0xEF && i + 2 < n && (unsigned char)s[i + 1] == 0xBB &&
                    (unsigned char)s[i + 2] == 0xBF)))
            return 1;
    }
    return 0;
}

START_TEST(test_a_regex_accepts_exactly_the_whole_texts_pcre2_matches)
{
    /* PCRE2 spells \u0062 as \x{62}; the rest is common syntax */
    for (size_t c = 0; c < N(RX_CASES); c++) {
        const char *rx = RX_CASES[c];
        char pc[128];
        snprintf(pc, sizeof pc, "%s", rx);
        char *u = strstr(pc, "\\u0062");
        if (u)
            memcpy(u, "\\x{62}", 6);
        if (!strcmp(rx, "[]|a"))
            snprintf(pc, sizeof pc, "(*FAIL)|a");
        if (!strcmp(rx, "[^]"))
            snprintf(pc, sizeof pc, "(?s:.)");
        sift_error err;
        sift_grammar *g = NULL;
        ck_assert_msg(sift_grammar_from_regex(&g, rx, strlen(rx), NULL, NULL, &err) == SIFT_OK,
                      "%s: %s", rx, err.message);
        pcre2_code *re = pcre_whole(pc);
        strings w = {RX_ALPHA, N(RX_ALPHA), 4, {0}, 0, {0}, SIZE_MAX};
        long n = 0, yes = 0;
        while (strings_next(&w)) {
            int want = pcre_matches(re, w.buf, w.n);
            int got = accepts(g, w.buf, w.n);
            if (disputed(rx, w.buf, w.n))
                ck_assert_msg(!got || want, "regex %s on \"%s\": sift %d, PCRE2 %d", rx, w.buf, got,
                              want);
            else
                ck_assert_msg(got == want, "regex %s on \"%s\": sift %d, PCRE2 %d", rx, w.buf, got,
                              want);
            n++;
            yes += want;
        }
        ck_assert_int_eq(n, 1 + 6 + 36 + 216 + 1296);
        ck_assert_msg(yes > 0, "regex %s matches none of the strings: a vacuous case", rx);
        pcre2_code_free(re);
        sift_grammar_free(g);
    }
}
END_TEST

START_TEST(test_a_regex_must_match_the_whole_text_not_a_part)
{
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_from_regex(&g, "b", 1, NULL, NULL, NULL), SIFT_OK);
    ck_assert(accepts(g, "b", 1));
    ck_assert(!accepts(g, "ab", 2));
    ck_assert(!accepts(g, "ba", 2));
    ck_assert(!accepts(g, "", 0));
    sift_grammar_free(g);
}
END_TEST

static void regex_error(const char *rx, size_t len, sift_status want, int col, const char *text)
{
    sift_error err;
    sift_grammar *g = (sift_grammar *)1;
    sift_status st = sift_grammar_from_regex(&g, rx, len, NULL, NULL, &err);
    ck_assert_msg(st == want, "%s: status %d, want %d (%s)", rx, st, want, err.message);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(err.code, want);
    if (col) {
        ck_assert_int_eq(err.column, col);
        ck_assert_str_eq(err.source, "regex");
    }
    ck_assert_msg(strstr(err.message, text), "%s: message '%s' lacks '%s'", rx, err.message, text);
}

START_TEST(test_bad_regexes_are_refused_with_their_column)
{
    regex_error("ab(c", 4, SIFT_E_PATTERN_SYNTAX, 3, "regex:3:");
    regex_error("a)", 2, SIFT_E_PATTERN_SYNTAX, 2, "unmatched ')'");
    regex_error("\xc3\xa9*+", 4, SIFT_E_PATTERN_SYNTAX, 3, "regex:3:");
    regex_error("a{3,2}", 6, SIFT_E_PATTERN_SYNTAX, 2, "regex:2:");
    regex_error("x(?=y)", 6, SIFT_E_PATTERN_SYNTAX, 2, "not supported");
    regex_error("a^b", 3, SIFT_E_PATTERN_SYNTAX, 2, "supported only");
    regex_error("(a)\\1", 5, SIFT_E_PATTERN_SYNTAX, 4, "regex:4:");
    regex_error("ab\xff", 3, SIFT_E_PATTERN_SYNTAX, 3, "invalid UTF-8");
    regex_error("x{2001}", 7, SIFT_E_PATTERN_LIMIT, 2, "2000");
    regex_error(NULL, 3, SIFT_E_ARG, 0, "NULL");
    /* the GBNF budget: a small max_bytes */
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_bytes = 64;
    sift_error err;
    sift_grammar *g = NULL;
    const char *rx = "(abc|def|ghi|jkl|mno|pqr|stu|vwx|yz0|123|456|789)+";
    ck_assert_int_eq(sift_grammar_from_regex(&g, rx, strlen(rx), NULL, &gp, &err),
                     SIFT_E_PATTERN_LIMIT);
    ck_assert_ptr_null(g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Choices                                                             */
/* ------------------------------------------------------------------ */

static const char *const CH_ALPHA[] = {"a", "b", "\xc3\xa9"};

START_TEST(test_choices_accept_exactly_the_listed_strings)
{
    tu_rng r = {0x5eed};
    for (int round = 0; round < 60; round++) {
        /* a random list of up to 12 strings of 0..4 symbols, with
         * duplicates and prefixes of one another */
        char store[12][16];
        const char *list[12];
        size_t n = (size_t)tu_range(&r, 1, 12);
        for (size_t i = 0; i < n; i++) {
            size_t len = (size_t)tu_range(&r, 0, 4), k = 0;
            for (size_t j = 0; j < len; j++) {
                const char *a = CH_ALPHA[tu_range(&r, 0, 2)];
                memcpy(store[i] + k, a, strlen(a));
                k += strlen(a);
            }
            store[i][k] = 0;
            if (i > 0 && tu_range(&r, 0, 3) == 0)
                snprintf(store[i], sizeof store[i], "%s", store[tu_range(&r, 0, (int64_t)i - 1)]);
            list[i] = store[i];
        }
        sift_error err;
        sift_grammar *g = NULL;
        ck_assert_msg(sift_grammar_from_choices(&g, list, NULL, n, NULL, NULL, &err) == SIFT_OK,
                      "%s", err.message);
        strings w = {CH_ALPHA, N(CH_ALPHA), 5, {0}, 0, {0}, SIZE_MAX};
        while (strings_next(&w)) {
            int want = 0;
            for (size_t i = 0; i < n; i++)
                want |= strlen(list[i]) == w.n && !memcmp(list[i], w.buf, w.n);
            ck_assert_msg(accepts(g, w.buf, w.n) == want, "round %d: \"%s\" should be %s", round,
                          w.buf, want ? "accepted" : "rejected");
        }
        sift_grammar_free(g);
    }
}
END_TEST

START_TEST(test_choices_with_a_shared_prefix_match_on_few_stacks)
{
    /* 3000 strings sharing "function_" need 3000 stacks as a plain
     * alternation; the radix tree holds one per next character */
    enum { NC = 3000 };
    static char store[NC][32];
    static const char *list[NC];
    for (int i = 0; i < NC; i++) {
        snprintf(store[i], sizeof store[i], "function_%d", i * 7);
        list[i] = store[i];
    }
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_stacks = 16;
    sift_error err;
    sift_grammar *g = NULL;
    ck_assert_msg(sift_grammar_from_choices(&g, list, NULL, NC, NULL, &gp, &err) == SIFT_OK, "%s",
                  err.message);
    ck_assert(accepts(g, "function_0", 10));
    ck_assert(accepts(g, "function_20993", 14));
    ck_assert(accepts(g, "function_7", 10));
    ck_assert(!accepts(g, "function_1", 10));
    ck_assert(!accepts(g, "function_", 9));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_bad_choices_are_refused_with_their_index)
{
    sift_error err;
    sift_grammar *g = NULL;
    const char *bad[] = {"ok", "fine", "b\xc3(d"};
    ck_assert_int_eq(sift_grammar_from_choices(&g, bad, NULL, 3, NULL, NULL, &err),
                     SIFT_E_GRAMMAR_SYNTAX);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(err.index, 2);
    ck_assert_int_eq(err.offset, 1);
    ck_assert_str_eq(err.message, "choices[2], offset 1: invalid UTF-8");
    ck_assert_int_eq(sift_grammar_from_choices(&g, bad, NULL, 0, NULL, NULL, &err), SIFT_E_ARG);
    const char *nul[] = {"a", NULL};
    size_t lens[] = {1, 2};
    ck_assert_int_eq(sift_grammar_from_choices(&g, nul, lens, 2, NULL, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 1);
    /* lengths: a NUL byte inside a choice is a character like any other */
    const char *withnul[] = {"a\0b"};
    size_t l3[] = {3};
    ck_assert_int_eq(sift_grammar_from_choices(&g, withnul, l3, 1, NULL, NULL, &err), SIFT_OK);
    ck_assert(accepts(g, "a\0b", 3));
    ck_assert(!accepts(g, "a", 1));
    sift_grammar_free(g);
    /* the budget */
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_bytes = 40;
    const char *many[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"};
    ck_assert_int_eq(sift_grammar_from_choices(&g, many, NULL, 6, NULL, &gp, &err),
                     SIFT_E_GRAMMAR_LIMIT);
    ck_assert_ptr_null(g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Structural tags                                                     */
/* ------------------------------------------------------------------ */

/* Tags whose bodies are finite, so that a direct implementation of the
 * rules can try every body. */
static const char *const ST_TRIG[] = {"<a", "<b>"};
static const sift_structural_tag ST_TAGS[] = {
    {.begin = "<a>", .grammar = "root ::= \"x\" | \"yy\"", .end = "</a>"},
    {.begin = "<ab", .grammar = "root ::= \"x\"", .end = ">"},
    {.begin = "<b>", .grammar = "root ::= \"\" | \"y\"", .end = "!"},
};
static const char *const ST_BODIES[3][3] = {{"x", "yy", NULL}, {"x", NULL}, {"", "y", NULL}};

/* The rules, written out: free text until the earliest-ending trigger,
 * then a tag starting with it, then free text again. */
static int st_ref(const char *s, size_t n, size_t i)
{
    for (size_t e = i + 1; e <= n; e++) {
        for (size_t k = 0; k < N(ST_TRIG); k++) {
            size_t tl = strlen(ST_TRIG[k]);
            if (e < i + tl || memcmp(s + e - tl, ST_TRIG[k], tl))
                continue;
            size_t p = e - tl;
            for (size_t t = 0; t < N(ST_TAGS); t++) {
                const char *bg = ST_TAGS[t].begin, *en = ST_TAGS[t].end;
                if (strncmp(bg, ST_TRIG[k], tl) || n - p < strlen(bg) ||
                    memcmp(s + p, bg, strlen(bg)))
                    continue;
                size_t q = p + strlen(bg);
                for (size_t b = 0; ST_BODIES[t][b]; b++) {
                    size_t bl = strlen(ST_BODIES[t][b]), el = strlen(en);
                    if (n - q >= bl + el && !memcmp(s + q, ST_BODIES[t][b], bl) &&
                        !memcmp(s + q + bl, en, el) && st_ref(s, n, q + bl + el))
                        return 1;
                }
            }
            return 0; /* the trigger fired and no tag fits */
        }
    }
    return 1; /* free to the end */
}

START_TEST(test_structural_tags_follow_the_tag_rules_on_random_texts)
{
    sift_error err;
    sift_grammar *g = NULL;
    ck_assert_msg(sift_grammar_from_structural_tags(&g, ST_TAGS, N(ST_TAGS), ST_TRIG, N(ST_TRIG),
                                                    NULL, NULL, NULL, &err) == SIFT_OK,
                  "%s", err.message);
    static const char *const parts[] = {"<a>", "</a>", "x", "yy", "<b>", "<", "a",       ">",
                                        "b",   "/",    "y", "!",  "<ab", "z", "\xc3\xa9"};
    tu_rng r = {42};
    long n_yes = 0, n_total = 0;
    for (int round = 0; round < 4000; round++) {
        char s[128];
        size_t n = 0;
        int k = (int)tu_range(&r, 0, 10);
        for (int j = 0; j < k; j++) {
            const char *p = parts[tu_range(&r, 0, (int64_t)N(parts) - 1)];
            memcpy(s + n, p, strlen(p));
            n += strlen(p);
        }
        s[n] = 0;
        int want = st_ref(s, n, 0);
        /* one byte at a time, so the earliest-ending trigger fires first */
        sift_grammar_reset(g);
        int got = 1;
        for (size_t b = 0; b < n && got; b++)
            got = sift_grammar_accept_bytes(g, s + b, 1, NULL) == SIFT_OK;
        got = got && sift_grammar_is_complete(g);
        ck_assert_msg(got == want, "\"%s\": grammar %d, rules %d", s, got, want);
        n_yes += want;
        n_total++;
    }
    /* both answers are common */
    ck_assert_int_gt(n_yes, n_total / 10);
    ck_assert_int_lt(n_yes, n_total - n_total / 10);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_structural_tag_constrains_its_body_and_frees_the_text_after_its_end)
{
    static const char *const trig[] = {"<function="};
    static const sift_structural_tag tags[] = {
        {.begin = "<function=get_weather>",
         .schema = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
                   "\"required\":[\"city\"],\"additionalProperties\":false}",
         .end = "</function>"},
        {.begin = "<function=add>",
         .grammar = "root ::= [0-9]+ \"+\" [0-9]+",
         .end = "</function>"},
    };
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.whitespace = SIFT_JSON_WS_COMPACT;
    sift_error err;
    sift_grammar *g = NULL;
    ck_assert_msg(sift_grammar_from_structural_tags(&g, tags, 2, trig, 1, NULL, &sp, NULL, &err) ==
                      SIFT_OK,
                  "%s", err.message);
    const char *free_text = "Let me check. ";
    ck_assert_int_eq(sift_grammar_accept_bytes(g, free_text, strlen(free_text), &err), SIFT_OK);
    ck_assert(!sift_grammar_is_triggered(g));
    ck_assert(sift_grammar_is_complete(g));
    const char *call = "<function=get_weather>{\"city\":\"Paris\"}";
    ck_assert_int_eq(sift_grammar_accept_bytes(g, call, strlen(call), &err), SIFT_OK);
    ck_assert(sift_grammar_is_triggered(g));
    ck_assert(!sift_grammar_is_complete(g)); /* inside the tag */
    /* the body is constrained: another property is refused */
    ck_assert_int_eq(sift_grammar_accept_bytes(g, ",", 1, NULL), SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "</function>", 11, &err), SIFT_OK);
    ck_assert(sift_grammar_is_complete(g));
    /* free again, with a '<' that starts no trigger, then a second call */
    const char *more = " and 1<2, then <function=add>12+30</function> done.";
    ck_assert_int_eq(sift_grammar_accept_bytes(g, more, strlen(more), &err), SIFT_OK);
    ck_assert(sift_grammar_is_complete(g));
    /* after a trigger only the tags' begins may follow */
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "<function=sub>", 14, NULL),
                     SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "<function=add>1+", 16, &err), SIFT_OK);
    ck_assert(!sift_grammar_is_complete(g));
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "x", 1, NULL), SIFT_E_GRAMMAR_REJECT);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_structural_tags_over_a_vocabulary_allow_free_tokens_after_the_end)
{
    static const char *const pieces[] = {"<eos>", "<tool>",     "{}",      "</tool>", "hi",
                                         " ",     "</tool> ok", "<tool>x", "<",       "tool>"};
    size_t lens[N(pieces)];
    for (size_t i = 0; i < N(pieces); i++)
        lens[i] = strlen(pieces[i]);
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, (int32_t)N(pieces), pieces, lens, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 0, SIFT_TOKEN_EOG, NULL), SIFT_OK);
    static const char *const trig[] = {"<tool>"};
    static const sift_structural_tag tag = {
        .begin = "<tool>", .schema = "{\"type\":\"object\"}", .end = "</tool>"};
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.whitespace = SIFT_JSON_WS_COMPACT;
    sift_error err;
    sift_grammar *g = NULL;
    ck_assert_msg(sift_grammar_from_structural_tags(&g, &tag, 1, trig, 1, v, &sp, NULL, &err) ==
                      SIFT_OK,
                  "%s", err.message);
    int ok = 0;
    /* untriggered: everything; EOG too */
    ck_assert_int_eq(sift_grammar_accepts_token(g, 7, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 1); /* the grammar refuses it only once fired */
    ck_assert_int_eq(sift_grammar_accept_token(g, 7, NULL), SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(sift_grammar_accept_token(g, 4, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, 8, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, 9, &err), SIFT_OK); /* "<" "tool>" fires */
    ck_assert(sift_grammar_is_triggered(g));
    ck_assert_int_eq(sift_grammar_accepts_token(g, 0, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0); /* no end of generation inside a tag */
    ck_assert_int_eq(sift_grammar_accept_token(g, 2, &err), SIFT_OK);
    /* a token that ends the tag and goes on with free text */
    ck_assert_int_eq(sift_grammar_accepts_token(g, 6, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 1);
    ck_assert_int_eq(sift_grammar_accept_token(g, 6, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accepts_token(g, 0, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 1);
    ck_assert_int_eq(sift_grammar_accepts_token(g, 4, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 1);
    ck_assert_int_eq(sift_grammar_accepts_token(g, 7, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0); /* "<tool>x": the body must be an object */
    ck_assert_int_eq(sift_grammar_accept_token(g, 1, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accepts_token(g, 3, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0);
    sift_grammar_free(g);
    sift_vocab_free(v);
}
END_TEST

static void tag_error(const sift_structural_tag *tags, size_t n_tags, const char *const *trig,
                      size_t n_trig, sift_status want, int64_t index, const char *text)
{
    sift_error err;
    sift_grammar *g = (sift_grammar *)1;
    sift_status st =
        sift_grammar_from_structural_tags(&g, tags, n_tags, trig, n_trig, NULL, NULL, NULL, &err);
    ck_assert_msg(st == want, "status %d, want %d (%s)", st, want, err.message);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(err.index, index);
    ck_assert_msg(strstr(err.message, text), "message '%s' lacks '%s'", err.message, text);
}

START_TEST(test_bad_structural_tags_are_refused_with_the_tag_and_place)
{
    static const char *const t1[] = {"<f"};
    static const char *const t2[] = {"<f", "<g"};
    sift_structural_tag ok = {.begin = "<f>", .grammar = "root ::= \"x\"", .end = "</f>"};
    sift_structural_tag tags[3] = {ok, ok, ok};
    tags[1].begin = "<g>";
    tag_error(tags, 2, t1, 1, SIFT_E_ARG, 1, "tags[1].begin: starts with no trigger");
    tag_error(tags, 1, t2, 2, SIFT_E_ARG, 1, "triggers[1]: no tag's begin starts with it");
    static const char *const t3[] = {"<f", "x<f"};
    tags[1].begin = "x<f>";
    tag_error(tags, 2, t3, 2, SIFT_E_ARG, 1, "triggers[1]: contains triggers[0]");
    static const char *const t4[] = {"<f", "<f"};
    tag_error(tags, 1, t4, 2, SIFT_E_ARG, 1, "triggers[1]: contains triggers[0]");
    static const char *const t5[] = {""};
    tag_error(tags, 1, t5, 1, SIFT_E_ARG, 0, "triggers[0]: empty");
    tags[1] = ok;
    tags[1].schema = "{}";
    tag_error(tags, 2, t1, 1, SIFT_E_ARG, 1, "both are set");
    tags[1].grammar = NULL;
    tags[1].schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{\"pattern\":\"1\"}}}}";
    tag_error(tags, 2, t1, 1, SIFT_E_SCHEMA_UNSUPPORTED, 1, "tags[1].schema:1:");
    tag_error(tags, 2, t1, 1, SIFT_E_SCHEMA_UNSUPPORTED, 1, "#/properties/a/not");
    tags[1] = ok;
    tags[2] = ok;
    tags[2].grammar = "root ::= \"x\"\nroot ::= [a";
    tag_error(tags, 3, t1, 1, SIFT_E_GRAMMAR_SYNTAX, 2, "tags[2].grammar:2:");
    tags[2] = ok;
    tags[2].end = "\xe2\x82";
    tag_error(tags, 3, t1, 1, SIFT_E_ARG, 2, "tags[2].end, offset 0: invalid UTF-8");
    tag_error(tags, 0, t1, 1, SIFT_E_ARG, -1, "tags: the list is empty");
}
END_TEST

START_TEST(test_a_long_repetitive_trigger_is_refused_by_a_limit_quickly)
{
    /* 3,800 copies of 16 letters: 60,801 states x 16 letters fits the
     * automaton's table, whose failure chains are long; the grammar
     * passes the GBNF budget, and writing it stops there. 4,100 copies
     * pass the 64 KiB of triggers. */
    static char big[16 * 4100 + 8];
    for (int k = 0; k < 4100; k++)
        memcpy(big + 16 * k, "abcdefghijklmnop", 16);
    big[16 * 3800] = 0;
    const char *trig[] = {big};
    sift_structural_tag tag = {.begin = big, .grammar = "root ::= \"x\"", .end = ""};
    tag_error(&tag, 1, trig, 1, SIFT_E_GRAMMAR_LIMIT, -1, "structural tags: the grammar exceeds");
    big[16 * 3800] = 'a';
    big[16 * 4100] = 0;
    tag_error(&tag, 1, trig, 1, SIFT_E_LIMIT, 0, "the triggers exceed 65536 bytes in all");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Allocation failure                                                  */
/* ------------------------------------------------------------------ */

static long fail_at, n_allocs;
static void *fail_alloc(void *user, size_t size)
{
    (void)user;
    if (++n_allocs == fail_at)
        return NULL;
    return malloc(size);
}
static void fail_free(void *user, void *p)
{
    (void)user;
    free(p);
}

/* Builds one of the three sources with the nth allocation failing. */
static sift_status build_source(int which, const sift_grammar_params *gp, sift_grammar **g)
{
    static const char *const list[] = {"red", "green", "grey", "blue"};
    static const char *const trig[] = {"<a", "<b>"};
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    static const sift_structural_tag tags[] = {
        {.begin = "<a>", .schema = "{\"type\":\"integer\"}", .end = "</a>"},
        {.begin = "<b>", .grammar = "root ::= [xy]+", .end = "</b>"},
    };
    switch (which) {
    case 0: return sift_grammar_from_regex(g, "(ab|c[0-9]+)*d?", 15, NULL, gp, NULL);
    case 1: return sift_grammar_from_choices(g, list, NULL, 4, NULL, gp, NULL);
    default: return sift_grammar_from_structural_tags(g, tags, 2, trig, 2, NULL, &sp, gp, NULL);
    }
}

START_TEST(test_failing_the_nth_allocation_is_clean_for_every_n)
{
    sift_allocator a = {.struct_size = sizeof a, .alloc = fail_alloc, .free = fail_free};
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.allocator = &a;
    for (int which = 0; which < 3; which++) {
        int ok = 0;
        for (fail_at = 1; fail_at < 5000 && !ok; fail_at++) {
            n_allocs = 0;
            sift_grammar *g = (sift_grammar *)1;
            sift_status st = build_source(which, &gp, &g);
            if (st == SIFT_OK) {
                ok = 1;
                fail_at = 0; /* no failure while the grammar runs */
                ck_assert(accepts(g,
                                  which == 0   ? "abc12d"
                                  : which == 1 ? "grey"
                                               : "hi <b>xy</b>",
                                  which == 0   ? 6
                                  : which == 1 ? 4
                                               : 12));
                sift_grammar_free(g);
            } else {
                ck_assert_msg(st == SIFT_E_NOMEM, "source %d, allocation %ld: status %d", which,
                              fail_at, st);
                ck_assert_ptr_null(g);
            }
        }
        ck_assert_msg(ok, "source %d never built", which);
    }
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("sources");
    TCase *tc = tcase_create("regex");
    tcase_add_test(tc, test_a_regex_accepts_exactly_the_whole_texts_pcre2_matches);
    tcase_add_test(tc, test_a_regex_must_match_the_whole_text_not_a_part);
    tcase_add_test(tc, test_bad_regexes_are_refused_with_their_column);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    tc = tcase_create("choices");
    tcase_add_test(tc, test_choices_accept_exactly_the_listed_strings);
    tcase_add_test(tc, test_choices_with_a_shared_prefix_match_on_few_stacks);
    tcase_add_test(tc, test_bad_choices_are_refused_with_their_index);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    tc = tcase_create("structural tags");
    tcase_add_test(tc, test_structural_tags_follow_the_tag_rules_on_random_texts);
    tcase_add_test(tc, test_a_structural_tag_constrains_its_body_and_frees_the_text_after_its_end);
    tcase_add_test(tc, test_structural_tags_over_a_vocabulary_allow_free_tokens_after_the_end);
    tcase_add_test(tc, test_bad_structural_tags_are_refused_with_the_tag_and_place);
    tcase_add_test(tc, test_a_long_repetitive_trigger_is_refused_by_a_limit_quickly);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    tc = tcase_create("allocation");
    tcase_add_test(tc, test_failing_the_nth_allocation_is_clean_for_every_n);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

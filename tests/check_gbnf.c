/*
 * check_gbnf.c - the GBNF grammar module: parser errors (golden files in
 * tests/data/gbnf-invalid, BAD_INPUTS G-01..G-20), the matcher over bytes
 * and tokens (UTF-8 split across tokens, EOG, empty pieces, R-01..R-13),
 * the shipped grammars in grammar/ with accept/reject tables byte by byte
 * and token by token, the whole-vocabulary and candidate bans against the
 * one-token check, limits, clone/reset, allocation failure, and the
 * constrain stage against "ban the row, then sample without it".
 *
 * Files are found through SIFT_SRCDIR (set by Makefile.am), never the
 * current directory.
 */
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "grammar/gbnf.h"
#include "testutil.h"

#ifndef SIFT_SRCDIR
#define SIFT_SRCDIR "."
#endif

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static char *read_file(const char *rel, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SIFT_SRCDIR, rel);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static sift_grammar *gnew_v(const char *text, const sift_vocab *v)
{
    sift_grammar *g = NULL;
    sift_error err;
    sift_status s = sift_grammar_new(&g, text, strlen(text), v, NULL, &err);
    ck_assert_msg(s == SIFT_OK, "grammar failed: %s", err.message);
    return g;
}

static sift_grammar *gnew(const char *text)
{
    return gnew_v(text, NULL);
}

static sift_status parse_status(const char *text, sift_error *err)
{
    sift_grammar *g = NULL;
    sift_status s = sift_grammar_new(&g, text, strlen(text), NULL, NULL, err);
    sift_grammar_free(g);
    return s;
}

/* Whole string accepted and complete. */
static int accepts_text(const char *grammar_text, const char *s)
{
    sift_grammar *g = gnew(grammar_text);
    int ok =
        sift_grammar_accept_bytes(g, s, strlen(s), NULL) == SIFT_OK && sift_grammar_is_complete(g);
    sift_grammar_free(g);
    return ok;
}

/* A vocabulary: the 256 single bytes (id = byte value), then `extra`
 * pieces, then <eos> and <eot> (EOG), then one empty piece. */
typedef struct tvocab {
    sift_vocab *v;
    int32_t n;
    int32_t eos, eot, empty;
    int32_t n_extra;
    const char **extra;
    size_t *extra_len;
} tvocab;

static tvocab make_vocab(const char *const *extra, size_t n_extra)
{
    tvocab t;
    memset(&t, 0, sizeof t);
    size_t n = 256 + n_extra + 3;
    const char **p = calloc(n, sizeof *p);
    size_t *l = calloc(n, sizeof *l);
    static char bytes[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        p[i] = &bytes[i];
        l[i] = 1;
    }
    for (size_t i = 0; i < n_extra; i++) {
        p[256 + i] = extra[i];
        l[256 + i] = strlen(extra[i]);
    }
    t.eos = (int32_t)(256 + n_extra);
    t.eot = t.eos + 1;
    t.empty = t.eos + 2;
    p[t.eos] = "<eos>";
    l[t.eos] = 5;
    p[t.eot] = "<eot>";
    l[t.eot] = 5;
    p[t.empty] = NULL;
    l[t.empty] = 0;
    ck_assert_int_eq(sift_vocab_new(&t.v, (int32_t)n, p, l, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(t.v, t.eos, SIFT_TOKEN_EOG, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(t.v, t.eot, SIFT_TOKEN_EOG | SIFT_TOKEN_SPECIAL, NULL),
                     SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(t.v, t.empty, SIFT_TOKEN_SPECIAL, NULL), SIFT_OK);
    t.n = (int32_t)n;
    free(p);
    free(l);
    return t;
}

/* Pieces that split UTF-8 sequences, join them with ASCII, and glue
 * common JSON bits together. */
static const char *const EXTRA[] = {"{\"",
                                    "\":",
                                    "\": ",
                                    "\"a\"",
                                    " \"",
                                    "true",
                                    "false",
                                    "null",
                                    "12",
                                    "0.5",
                                    "\\n",
                                    "\\u00",
                                    "\xc3",
                                    "\xa9",
                                    "\xa9\"",
                                    "\"\xc3",
                                    "\xe2\x82",
                                    "\xac",
                                    "\x82\xac",
                                    "\xf0\x9f",
                                    "\x98\x80",
                                    "\x9f\x98",
                                    "\xf0",
                                    "\x80",
                                    "abc",
                                    "ab",
                                    "- ",
                                    "\n- ",
                                    "O-O",
                                    "Nf3",
                                    "e4",
                                    "1. ",
                                    " + ",
                                    "<tool_call>",
                                    "</tool_call>",
                                    "{\"name\": \"",
                                    "\"arguments\": {",
                                    "\xed\xa0\x80",
                                    "\xc0\xaf",
                                    "\xf4\x90\x80\x80",
                                    "x\xc3",
                                    "\xa9x"};

static tvocab V1;

static void vocab_setup(void)
{
    V1 = make_vocab(EXTRA, N(EXTRA));
}

static void vocab_teardown(void)
{
    sift_vocab_free(V1.v);
    memset(&V1, 0, sizeof V1);
}

/* Token id of an exact piece, -1 if none. */
static int32_t tok_of(const tvocab *t, const char *s, size_t len)
{
    if (len == 1)
        return (unsigned char)s[0];
    for (int32_t i = 256; i < t->n; i++) {
        const char *b;
        size_t bl;
        ck_assert_int_eq(sift_vocab_piece(t->v, i, &b, &bl, NULL), SIFT_OK);
        if (bl == len && memcmp(b, s, len) == 0 && i != t->eos && i != t->eot)
            return i;
    }
    return -1;
}

/* Greedy longest-match tokenization (seeded randomness picks shorter
 * matches sometimes, so different splits are exercised). */
static size_t tokenize(const tvocab *t, const char *s, int32_t *out, size_t cap, uint64_t seed)
{
    tu_rng r = {seed};
    size_t n = strlen(s), k = 0, i = 0;
    while (i < n && k < cap) {
        size_t best = 1;
        for (size_t L = 2; L <= 16 && i + L <= n; L++)
            if (tok_of(t, s + i, L) >= 0 && tu_range(&r, 0, 3) != 0)
                best = L;
        out[k++] = tok_of(t, s + i, best);
        i += best;
    }
    return k;
}

/* Feeds s token by token; 1 if every token is accepted and the grammar
 * is complete at the end (then an EOG token is accepted too). Checks on
 * the way that accepts_token agrees with accept_token and with the
 * whole-vocabulary ban. */
static int accepts_tokens(const char *grammar_text, const char *s, uint64_t seed)
{
    sift_grammar *g = gnew_v(grammar_text, V1.v);
    int32_t toks[4096];
    size_t n = tokenize(&V1, s, toks, N(toks), seed);
    float *row = malloc((size_t)V1.n * sizeof *row);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        int a = -1;
        ck_assert_int_eq(sift_grammar_accepts_token(g, toks[i], &a, NULL), SIFT_OK);
        for (int32_t t = 0; t < V1.n; t++)
            row[t] = 0.0f;
        sift_status sb = sift_grammar_ban(g, row, V1.n, NULL);
        if (sb == SIFT_OK)
            ck_assert_int_eq(row[toks[i]] > -INFINITY, a);
        else
            ck_assert_int_eq(sb, SIFT_E_GRAMMAR_DEAD);
        sift_status s2 = sift_grammar_accept_token(g, toks[i], NULL);
        ck_assert_int_eq(s2 == SIFT_OK, a);
        ok = a;
    }
    if (ok) {
        ok = sift_grammar_is_complete(g);
        int e = -1;
        ck_assert_int_eq(sift_grammar_accepts_token(g, V1.eos, &e, NULL), SIFT_OK);
        ck_assert_int_eq(e, ok);
        ck_assert_int_eq(sift_grammar_accepts_token(g, V1.eot, &e, NULL), SIFT_OK);
        ck_assert_int_eq(e, ok);
    }
    free(row);
    sift_grammar_free(g);
    return ok;
}

/* ------------------------------------------------------------------ */
/* Parser: golden error files                                          */
/* ------------------------------------------------------------------ */

typedef struct golden {
    const char *name;
    sift_status code;
} golden;

static const golden GOLDEN[] = {
    {"g01_unterminated_string", SIFT_E_GRAMMAR_SYNTAX},
    {"g01_unterminated_class", SIFT_E_GRAMMAR_SYNTAX},
    {"g01_class_dash", SIFT_E_GRAMMAR_SYNTAX},
    {"g02_unbalanced_paren", SIFT_E_GRAMMAR_SYNTAX},
    {"g02_stray_paren", SIFT_E_GRAMMAR_SYNTAX},
    {"g03_equals", SIFT_E_GRAMMAR_SYNTAX},
    {"g03_two_assignments", SIFT_E_GRAMMAR_SYNTAX},
    {"g03_bare_repetition", SIFT_E_GRAMMAR_SYNTAX},
    {"g03_brace_no_int", SIFT_E_GRAMMAR_SYNTAX},
    {"g03_underscore", SIFT_E_GRAMMAR_SYNTAX},
    {"g03_line_starts_with_bar", SIFT_E_GRAMMAR_SYNTAX},
    {"g04_undefined", SIFT_E_GRAMMAR_UNDEFINED},
    {"g05_no_root", SIFT_E_GRAMMAR_UNDEFINED},
    {"g06_left_direct", SIFT_E_GRAMMAR_LEFT_RECURSION},
    {"g06_left_indirect", SIFT_E_GRAMMAR_LEFT_RECURSION},
    {"g06_left_nullable", SIFT_E_GRAMMAR_LEFT_RECURSION},
    {"g07_nullable_loop", SIFT_E_GRAMMAR_LEFT_RECURSION},
    {"g08_nesting", SIFT_E_GRAMMAR_LIMIT},
    {"g10_count_too_large", SIFT_E_GRAMMAR_LIMIT},
    {"g10_exactly_2000", SIFT_E_GRAMMAR_LIMIT},
    {"g10_integer_overflow", SIFT_E_GRAMMAR_SYNTAX},
    {"g10_max_below_min", SIFT_E_GRAMMAR_SYNTAX},
    {"g11_nested_product", SIFT_E_GRAMMAR_LIMIT},
    {"g12_invalid_utf8", SIFT_E_GRAMMAR_SYNTAX},
    {"g13_escape_beyond", SIFT_E_GRAMMAR_SYNTAX},
    {"g13_escape_surrogate", SIFT_E_GRAMMAR_SYNTAX},
    {"g13_escape_no_digits", SIFT_E_GRAMMAR_SYNTAX},
    {"g13_escape_unknown", SIFT_E_GRAMMAR_SYNTAX},
    {"g14_reversed_range", SIFT_E_GRAMMAR_SYNTAX},
    {"g14_empty_class", SIFT_E_GRAMMAR_SYNTAX},
    {"g15_empty", SIFT_E_GRAMMAR_UNDEFINED},
    {"g15_only_comments", SIFT_E_GRAMMAR_UNDEFINED},
    {"g16_nul", SIFT_E_GRAMMAR_SYNTAX},
    {"g17_defined_twice", SIFT_E_GRAMMAR_SYNTAX},
    {"g18_col_after_multibyte", SIFT_E_GRAMMAR_SYNTAX},
    {"g20_token_without_vocab", SIFT_E_GRAMMAR_SYNTAX},
    {"g20_token_text_without_vocab", SIFT_E_GRAMMAR_SYNTAX},
    {"g20_negative_token", SIFT_E_GRAMMAR_SYNTAX},
};

START_TEST(test_each_invalid_grammar_gets_its_golden_message_and_code)
{
    const golden *c = &GOLDEN[_i];
    char rel[256], name[128];
    snprintf(rel, sizeof rel, "tests/data/gbnf-invalid/%s.gbnf", c->name);
    snprintf(name, sizeof name, "%s.gbnf", c->name);
    size_t len, elen;
    char *text = read_file(rel, &len);
    snprintf(rel, sizeof rel, "tests/data/gbnf-invalid/%s.err", c->name);
    char *expect = read_file(rel, &elen);
    while (elen && (expect[elen - 1] == '\n' || expect[elen - 1] == '\r'))
        expect[--elen] = '\0';
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.source_name = name;
    sift_grammar *g = (sift_grammar *)1;
    sift_error err;
    sift_status s = sift_grammar_new(&g, text, len, NULL, &p, &err);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(s, c->code);
    ck_assert_int_eq(err.code, c->code);
    ck_assert_str_eq(err.message, expect);
    ck_assert_str_eq(err.source, name);
    /* the message's line:col are the struct's */
    if (err.line) {
        char pre[200];
        snprintf(pre, sizeof pre, "%s:%d:%d: ", name, (int)err.line, (int)err.column);
        ck_assert_int_eq(strncmp(err.message, pre, strlen(pre)), 0);
        ck_assert_int_ge(err.offset, 0);
        ck_assert_int_le(err.offset, (int64_t)len);
    }
    free(text);
    free(expect);
}
END_TEST

/* An allocator that counts its calls (work is counted, not timed). */
typedef struct cnt_alloc {
    long calls, live;
} cnt_alloc;

static void *ca_alloc(void *user, size_t size)
{
    cnt_alloc *c = user;
    c->calls++;
    c->live++;
    return malloc(size);
}

static void ca_free(void *user, void *p)
{
    cnt_alloc *c = user;
    if (p)
        c->live--;
    free(p);
}

START_TEST(test_grammar_over_the_byte_cap_fails_before_parsing)
{
    size_t n = 10u << 20;
    char *big = malloc(n);
    memset(big, '#', n); /* would be one long comment */
    sift_grammar *g = NULL;
    sift_error err;
    /* Before parsing: not one allocation is made for the refused text. */
    cnt_alloc ca = {0, 0};
    sift_allocator al = {sizeof(sift_allocator), ca_alloc, ca_free, &ca, NULL};
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.allocator = &al;
    ck_assert_int_eq(sift_grammar_new(&g, big, n, NULL, &p, &err), SIFT_E_GRAMMAR_LIMIT);
    ck_assert_str_eq(err.message, "grammar: grammar is 10485760 bytes; max 1048576");
    ck_assert_int_eq(ca.calls, 0);
    /* with the cap raised the same text parses (into "no rules") */
    p.max_bytes = n;
    ck_assert_int_eq(sift_grammar_new(&g, big, n, NULL, &p, &err), SIFT_E_GRAMMAR_UNDEFINED);
    free(big);
}
END_TEST

START_TEST(test_crlf_bom_tabs_and_a_final_comment_are_accepted)
{
    const char *t = "\xEF\xBB\xBFroot\t::=\t\"a\" b # c\r\nb ::= \"b\"\r\n# end";
    sift_grammar *g = gnew(t);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "ab", 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
    /* a column after the BOM counts code points, BOM excluded */
    sift_error err;
    ck_assert_int_eq(parse_status("\xEF\xBB\xBFroot ::= @", &err), SIFT_E_GRAMMAR_SYNTAX);
    ck_assert_int_eq(err.line, 1);
    ck_assert_int_eq(err.column, 10);
    /* a lone CR is a newline too */
    ck_assert_int_eq(parse_status("root ::= \"a\"\r@", &err), SIFT_E_GRAMMAR_SYNTAX);
    ck_assert_int_eq(err.line, 2);
    ck_assert_int_eq(err.column, 1);
}
END_TEST

START_TEST(test_a_caller_given_start_rule_is_used_and_checked)
{
    const char *t = "root ::= \"r\"\nalt ::= \"x\"";
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.root = "alt";
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), NULL, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "x", 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "r", 1, NULL), SIFT_E_GRAMMAR_REJECT);
    sift_grammar_free(g);
    p.root = "nope";
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), NULL, &p, &err), SIFT_E_GRAMMAR_UNDEFINED);
    ck_assert_str_eq(err.message, "grammar: start symbol 'nope' is not defined");
}
END_TEST

START_TEST(test_deep_nesting_and_long_rule_chains_do_not_recurse)
{
    /* 1000 groups is the most allowed; 10^5 is refused quickly */
    size_t n = 100000;
    char *t = malloc(2 * n + 32);
    for (int depth = 1000; depth <= 100000; depth += 99000) {
        size_t k = (size_t)sprintf(t, "root ::= ");
        for (int i = 0; i < depth; i++)
            t[k++] = '(';
        t[k++] = '"';
        t[k++] = 'a';
        t[k++] = '"';
        for (int i = 0; i < depth; i++)
            t[k++] = ')';
        t[k] = '\0';
        sift_grammar *g = NULL;
        sift_status s = sift_grammar_new(&g, t, k, NULL, NULL, NULL);
        ck_assert_int_eq(s, depth == 1000 ? SIFT_OK : SIFT_E_GRAMMAR_LIMIT);
        if (g) {
            ck_assert_int_eq(sift_grammar_accept_bytes(g, "a", 1, NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_is_complete(g), 1);
        }
        sift_grammar_free(g);
    }
    free(t);
    /* a chain of 10^5 rules r0 ::= r1, ...: parsed and checked for left
     * recursion iteratively; matching needs no stack growth (tail calls) */
    size_t cap = n * 24 + 64;
    char *c = malloc(cap);
    size_t k = (size_t)sprintf(c, "root ::= r0\n");
    for (size_t i = 0; i + 1 < n; i++)
        k += (size_t)sprintf(c + k, "r%zu ::= r%zu\n", i, i + 1);
    k += (size_t)sprintf(c + k, "r%zu ::= \"z\"\n", n - 1);
    sift_grammar *g = NULL;
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_bytes = cap;
    ck_assert_int_eq(sift_grammar_new(&g, c, k, NULL, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "z", 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
    /* the same chain left-recursive at the end: found without recursion */
    k -= strlen("\"z\"\n");
    k += (size_t)sprintf(c + k, "root \"z\"\n");
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&g, c, k, NULL, &p, &err), SIFT_E_GRAMMAR_LEFT_RECURSION);
    free(c);
}
END_TEST

/* G-07: nullable repetitions, each with strings it accepts and rejects
 * (whole input, complete). */
typedef struct nullable_case {
    const char *grammar;
    const char *accept[4];
    const char *reject[3];
} nullable_case;

static const nullable_case NULLABLE[] = {
    {"root ::= ( [x]* )*", {"", "x", "xxxx", NULL}, {"y", "xy", NULL}},
    {"root ::= (\"\")*", {"", NULL}, {"a", NULL}},
    {"root ::= (\"a\"?)* \"b\"", {"b", "ab", "aaab", NULL}, {"", "a", "ba"}},
    {"root ::= (\"x\"*)+", {"", "x", "xxx", NULL}, {"y", NULL}},
    {"root ::= (\"x\"*){2,} \"!\"", {"!", "x!", "xxxx!", NULL}, {"", "xx", "!x"}},
    {"root ::= (\"x\"?){3,5}", {"", "xx", "xxxxx", NULL}, {"xxxxxx", NULL}},
    {"root ::= ((\"x\"*)*)*", {"", "xxx", NULL}, {"xy", NULL}},
    {"root ::= (\"a\"* \"b\"*)*", {"", "ab", "ba", "abba"}, {"c", NULL}},
    {"root ::= \"a\" (\"\" | \"b\" | \"c\")*", {"a", "abcb", NULL}, {"", "b", NULL}},
    {"root ::= (ws item ws)*\nitem ::= [0-9]+\nws ::= [ ]*",
     {"", "1 2", " 12  3 ", NULL},
     {"a", NULL}},
    {"root ::= x \"!\"\nx ::= x?", {"!", NULL}, {"", "x!", NULL}},
    {"root ::= (a | b)*\na ::= \"a\"*\nb ::= \"b\"?", {"", "aab", "bbba", NULL}, {"c", NULL}},
};

START_TEST(test_a_nullable_repetition_is_accepted_with_its_meaning)
{
    const nullable_case *c = &NULLABLE[_i];
    sift_error err;
    sift_grammar *g = NULL;
    ck_assert_msg(sift_grammar_new(&g, c->grammar, strlen(c->grammar), NULL, NULL, &err) == SIFT_OK,
                  "%s: %s", c->grammar, err.message);
    sift_grammar_free(g);
    for (size_t i = 0; i < N(c->accept) && c->accept[i]; i++)
        ck_assert_msg(accepts_text(c->grammar, c->accept[i]), "%s must accept [%s]", c->grammar,
                      c->accept[i]);
    for (size_t i = 0; i < N(c->reject) && c->reject[i]; i++)
        ck_assert_msg(!accepts_text(c->grammar, c->reject[i]), "%s must reject [%s]", c->grammar,
                      c->reject[i]);
}
END_TEST

START_TEST(test_a_nullable_repetition_matches_in_constant_work_per_byte)
{
    /* the empty iteration ends the loop: 10^4 bytes keep one state size,
     * one stack depth, and a bounded count per byte */
    sift_grammar *g = gnew("root ::= ( [x]* | \"\" )* \"!\"");
    sift_error err;
    uint64_t d1 = 0;
    for (int i = 0; i < 10000; i++) {
        ck_assert_int_eq(sift_grammar_accept_bytes(g, "x", 1, &err), SIFT_OK);
        ck_assert_int_lt(sift__grammar_last_work(g), 2000);
        if (i == 1)
            d1 = sift__grammar_digest(g, 1);
    }
    ck_assert_uint_eq(sift__grammar_digest(g, 1), d1); /* the same state */
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "!", 1, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_left_recursion_through_a_nullable_loop_is_still_an_error)
{
    /* a loop whose reference is followed by something grows the stack on
     * every round; a loop of plain rules is llama.cpp's left recursion */
    static const char *const bad[] = {
        "root ::= root*",
        "root ::= (root \"a\")*",
        "root ::= x\nx ::= (\"a\"? x \"b\")*",
        "root ::= a | \"x\"\na ::= root",
        "root ::= root",
    };
    for (size_t i = 0; i < N(bad); i++) {
        sift_error err;
        ck_assert_msg(parse_status(bad[i], &err) == SIFT_E_GRAMMAR_LEFT_RECURSION, "%s", bad[i]);
        ck_assert_msg(strstr(err.message, "is left-recursive:") != NULL, "%s", err.message);
    }
}
END_TEST

/* An allocator whose new blocks are full of REF elements naming a rule
 * far out of range: a builder that reads scratch memory it never wrote
 * compiles them into the grammar. */
static void *poison_alloc(void *user, size_t size)
{
    (void)user;
    uint32_t *q = malloc(size);
    for (size_t i = 0; q && i + 1 < size / sizeof *q; i += 2) {
        q[i] = SIFT__G_REF;
        q[i + 1] = 0x7fffff00u;
    }
    return q;
}

static void poison_free(void *user, void *p)
{
    (void)user;
    free(p);
}

/* The fuzzer's heap-buffer-overflow in check_left_recursion: the
 * repetition helper's copy of the item S was taken from the scratch
 * buffer after a reserve that grew it, and a grow keeps only the
 * elements it is told are used (none), so the first helper of a parse's
 * first repetition of an item of 7 or more elements (and of any later
 * one whose item and helper outgrew the scratch) held whatever the new
 * block held: with the default allocator
 * a wrong language (root ::= "abcdefg"* rejected "abcdefgabcdefg"),
 * with stale REF elements an out-of-range rule id. */
START_TEST(test_a_repeated_item_is_copied_whole_into_its_helpers)
{
    static const char *const body[] = {"a",
                                       "abcdef",
                                       "abcdefg",
                                       "abcdefghijklmnop",
                                       "abcdefghijklmnopq",
                                       "0123456789012345678901234567890123"};
    static const char *const post[] = {"*", "+", "?", "{0,3}", "{2,}", "{1,2}"};
    sift_allocator al = {sizeof(sift_allocator), poison_alloc, poison_free, NULL, NULL};
    for (int poison = 0; poison < 2; poison++) {
        sift_grammar_params p;
        sift_grammar_params_init(&p);
        if (poison)
            p.allocator = &al;
        for (size_t b = 0; b < N(body); b++) {
            for (size_t q = 0; q < N(post); q++) {
                char text[128], two[128], four[160];
                /* the repetition first in the grammar: the scratch starts empty */
                snprintf(text, sizeof text, "root ::= \"%s\"%s \"!\"", body[b], post[q]);
                snprintf(two, sizeof two, "%s%s!", body[b], body[b]);
                snprintf(four, sizeof four, "%s%s%s%s!", body[b], body[b], body[b], body[b]);
                sift_grammar *g = NULL;
                sift_error err;
                ck_assert_msg(sift_grammar_new(&g, text, strlen(text), NULL, &p, &err) == SIFT_OK,
                              "%s: %s", text, err.message);
                int ok = sift_grammar_accept_bytes(g, two, strlen(two), NULL) == SIFT_OK &&
                         sift_grammar_is_complete(g);
                ck_assert_msg(ok == (q != 2), "%s on [%s]: %d (poison %d)", text, two, ok, poison);
                sift_grammar_reset(g);
                ok = sift_grammar_accept_bytes(g, four, strlen(four), NULL) == SIFT_OK &&
                     sift_grammar_is_complete(g);
                ck_assert_msg(ok == (q == 0 || q == 1 || q == 4), "%s on [%s]: %d (poison %d)",
                              text, four, ok, poison);
                sift_grammar_free(g);
            }
        }
        /* a repetition inside a group that is itself repeated, longer
         * items after shorter ones (the scratch grows more than once) */
        const char *nested = "root ::= (\"ab\"* \"abcdefghijk\"{1,2} [x-z]{0,9})+ tail\n"
                             "tail ::= (\"0123456789abcdefghij\" | \"-\"){0,2}";
        sift_grammar *g = NULL;
        sift_error err;
        ck_assert_msg(sift_grammar_new(&g, nested, strlen(nested), NULL, &p, &err) == SIFT_OK, "%s",
                      err.message);
        const char *in = "ababcdefghijkxyzabcdefghijkabcdefghijk0123456789abcdefghij-";
        ck_assert_int_eq(sift_grammar_accept_bytes(g, in, strlen(in), NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_is_complete(g), 1);
        sift_grammar_free(g);
    }
}
END_TEST

START_TEST(test_a_long_literal_and_many_alternatives_are_linear)
{
    size_t n = 1000000;
    char *t = malloc(n + 32);
    size_t k = (size_t)sprintf(t, "root ::= \"");
    for (size_t i = 0; i < n - 32; i++)
        t[k++] = (char)('a' + i % 26);
    t[k++] = '"';
    t[k] = '\0';
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_new(&g, t, k, NULL, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, t + 10, k - 11, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
    /* 10^5 alternatives */
    size_t m = 100000;
    char *a = malloc(m * 12 + 32);
    k = (size_t)sprintf(a, "root ::= ");
    for (size_t i = 0; i < m; i++)
        k += (size_t)sprintf(a + k, "%s\"w%zu\"", i ? "|" : "", i);
    /* every alternative is a live stack at the start: raise max_stacks */
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_stacks = 200000;
    ck_assert_int_eq(sift_grammar_new(&g, a, k, NULL, NULL, NULL), SIFT_E_GRAMMAR_LIMIT);
    ck_assert_int_eq(sift_grammar_new(&g, a, k, NULL, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "w99999", 6, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
    free(t);
    free(a);
}
END_TEST

START_TEST(test_repetition_limits_follow_llamacpp)
{
    sift_error err;
    ck_assert_int_eq(parse_status("root ::= \"a\"{1999}", &err), SIFT_OK);
    ck_assert_int_eq(parse_status("root ::= \"a\"{0,1999}", &err), SIFT_OK);
    ck_assert_int_eq(parse_status("root ::= \"a\"{0,2000}", &err), SIFT_E_GRAMMAR_LIMIT);
    ck_assert_int_eq(parse_status("root ::= (\"a\"{0,50}){0,39}", &err), SIFT_OK);
    ck_assert_int_eq(parse_status("root ::= (\"a\"{0,50}){0,40}", &err), SIFT_E_GRAMMAR_LIMIT);
    ck_assert_int_eq(
        parse_status("root ::= (((((\"a\"{0,99}){0,99}){0,99}){0,99}){0,99}){0,99}", &err),
        SIFT_E_GRAMMAR_LIMIT);
    ck_assert_int_eq(parse_status("root ::= \"a\"{ 2 , 3 }", &err), SIFT_OK);
    ck_assert(accepts_text("root ::= \"ab\"{2,3}", "ababab"));
    ck_assert(!accepts_text("root ::= \"ab\"{2,3}", "ab"));
    ck_assert(!accepts_text("root ::= \"ab\"{2,3}", "abababab"));
    ck_assert(accepts_text("root ::= \"a\"{2,}", "aaaaaaa"));
    ck_assert(!accepts_text("root ::= \"a\"{2,}", "a"));
    ck_assert(accepts_text("root ::= \"a\"{0}", ""));
    ck_assert(accepts_text("root ::= [a-c]+ \"!\"?", "abcab!"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Matcher over bytes                                                  */
/* ------------------------------------------------------------------ */

START_TEST(test_classes_ranges_negation_escapes_and_any)
{
    ck_assert(accepts_text("root ::= [a-cx]+", "abxc"));
    ck_assert(!accepts_text("root ::= [a-cx]+", "abd"));
    ck_assert(accepts_text("root ::= [^a-c]", "d"));
    ck_assert(accepts_text("root ::= [^a-c]", "\xc3\xa9"));
    ck_assert(!accepts_text("root ::= [^a-c]", "b"));
    ck_assert(accepts_text("root ::= [\\x41-\\u0043\\-\\]]+", "AB-]C"));
    ck_assert(accepts_text("root ::= [a-]+", "a-a"));
    ck_assert(accepts_text("root ::= \"\\t\\n\\r\\\\\\\"\\[\\]\"", "\t\n\r\\\"[]"));
    ck_assert(accepts_text("root ::= . . .", "a\xc3\xa9\xf0\x9f\x98\x80"));
    ck_assert(accepts_text("root ::= [^]", "\xe2\x82\xac"));
    ck_assert(accepts_text("root ::= \"\\U0001F600\"", "\xf0\x9f\x98\x80"));
    ck_assert(accepts_text("root ::= [\\u00e0-\\u00ff]", "\xc3\xa9"));
    ck_assert(!accepts_text("root ::= [\\u00e0-\\u00ff]", "\xc3\x80"));
    /* NUL is a code point like any other */
    sift_grammar *g = gnew("root ::= \"a\\x00b\"");
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "a\0b", 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
    g = gnew("root ::= [^\\x00]");
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "\0", 1, NULL), SIFT_E_GRAMMAR_REJECT);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_invalid_utf8_overlong_and_surrogates_are_rejected)
{
    static const char *bad[] = {
        "\xc0\xaf",         "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
        "\xf5\x80\x80\x80", "\x80",     "\xff",         "\xc3\x28"};
    for (size_t i = 0; i < N(bad); i++) {
        sift_grammar *g = gnew("root ::= .*");
        sift_error err;
        ck_assert_int_eq(sift_grammar_accept_bytes(g, bad[i], strlen(bad[i]), &err),
                         SIFT_E_GRAMMAR_REJECT);
        ck_assert_int_eq(sift_grammar_is_complete(g), 1); /* unchanged */
        sift_grammar_free(g);
    }
    /* a valid sequence fed one byte at a time */
    sift_grammar *g = gnew("root ::= \"\xe2\x82\xac\"");
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "\xe2", 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 0);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "\x82", 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "\xac", 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
    /* a partial sequence that can only complete outside the class dies
     * at its first byte */
    g = gnew("root ::= [a-z\\u00e9]");
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "\xe2", 1, NULL), SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "\xc3", 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "\xaa", 1, NULL), SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "\xa9", 1, NULL), SIFT_OK);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_rejected_input_leaves_the_state_unchanged)
{
    sift_grammar *g = gnew("root ::= \"ab\" \"c\"*");
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "a", 1, NULL), SIFT_OK);
    uint64_t d = sift__grammar_digest(g, 0);
    sift_error err;
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "bcx", 3, &err), SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(err.index, 2);
    ck_assert_str_eq(err.message,
                     "byte 2 of the input (0x78) is not allowed at output byte 3 (after `abc`)");
    ck_assert_uint_eq(sift__grammar_digest(g, 0), d);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "bcc", 3, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_reset(g);
    ck_assert_int_eq(sift_grammar_is_complete(g), 0);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "ab", 2, NULL), SIFT_OK);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_ambiguity_beyond_max_stacks_is_a_limit_error)
{
    /* after n "a"s, any number k <= n of "b"s may be pending: n + 1
     * distinct stacks (equal stacks are merged, so llama.cpp's classic
     * [0-9] (a? a? a? [0-9])* blow-up stays small here) */
    const char *t = "root ::= \"a\" root \"b\" | \"a\" root | \"c\"";
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_stacks = 8;
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), NULL, &p, NULL), SIFT_OK);
    sift_error err;
    sift_status s = SIFT_OK;
    const char *in = "aaaaaaaaaaaac";
    size_t i = 0;
    for (; in[i] && s == SIFT_OK; i++)
        s = sift_grammar_accept_bytes(g, in + i, 1, &err);
    ck_assert_int_eq(s, SIFT_E_GRAMMAR_LIMIT);
    ck_assert_msg(strstr(err.message, "grammar too ambiguous:") != NULL, "%s", err.message);
    sift_grammar_free(g);
    /* with the default cap the same input is exact */
    g = gnew(t);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, in, strlen(in), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_stack_depth_and_work_budget_are_enforced)
{
    /* center recursion nests: depth grows with input until the cap */
    const char *t = "root ::= \"(\" root \")\" | \"x\"";
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_stack_depth = 50;
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), NULL, &p, NULL), SIFT_OK);
    sift_status s = SIFT_OK;
    int i = 0;
    sift_error err;
    for (; i < 200 && s == SIFT_OK; i++)
        s = sift_grammar_accept_bytes(g, "(", 1, &err);
    ck_assert_int_eq(s, SIFT_E_GRAMMAR_LIMIT);
    ck_assert_msg(strstr(err.message, "stack depth") != NULL, "%s", err.message);
    ck_assert_int_lt(i, 60);
    sift_grammar_free(g);
    sift_grammar_params_init(&p);
    p.max_step_work = 10;
    const char *w = "root ::= a | b | c | d | e | f | g | h | i | j | k | l\n"
                    "a ::= \"a\"\nb ::= \"b\"\nc ::= \"c\"\nd ::= \"d\"\ne ::= \"e\"\n"
                    "f ::= \"f\"\ng ::= \"g\"\nh ::= \"h\"\ni ::= \"i\"\nj ::= \"j\"\n"
                    "k ::= \"k\"\nl ::= \"l\"";
    ck_assert_int_eq(sift_grammar_new(&g, w, strlen(w), NULL, &p, &err), SIFT_E_GRAMMAR_LIMIT);
    ck_assert_msg(strstr(err.message, "work budget") != NULL, "%s", err.message);
}
END_TEST

/* An allocator that counts live and peak bytes (the block size is kept
 * in a header), so that a test can bound memory without a clock. */
typedef struct meter {
    size_t live, peak;
} meter;

static void *m_alloc(void *u, size_t n)
{
    meter *m = u;
    size_t *p = malloc(n + sizeof(size_t) * 2);
    if (!p)
        return NULL;
    p[0] = n;
    m->live += n;
    if (m->live > m->peak)
        m->peak = m->live;
    return p + 2;
}

static void m_free(void *u, void *q)
{
    meter *m = u;
    if (!q)
        return;
    size_t *p = (size_t *)q - 2;
    m->live -= p[0];
    free(p);
}

/* r0 ::= r1 A | r1 B, r1 ::= r2 A | r2 B, ..., r<n> ::= "x": the start
 * state has 2^n stacks. With A and B empty rules and a terminal after
 * r0, the 2^n stacks are intermediate: they all return to that one. */
static char *doubling_grammar(int n, int empty)
{
    size_t cap = (size_t)n * 64 + 128;
    char *t = malloc(cap);
    const char *a = empty ? "ea" : "\"a\"", *b = empty ? "eb" : "\"b\"";
    size_t k = (size_t)snprintf(t, cap, "root ::= r0 \"z\"\nea ::= \"\"\neb ::= \"\"\n");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(t + k, cap - k, "r%d ::= r%d %s | r%d %s\n", i, i + 1, a, i + 1, b);
    snprintf(t + k, cap - k, "r%d ::= %s\n", n, empty ? "\"\"" : "\"x\"");
    return t;
}

START_TEST(test_an_exponential_start_state_fails_while_it_is_built)
{
    /* 2^30 start stacks (BAD_INPUTS: 21 s and 3.4 GB before the check):
     * max_stacks is checked as the closure grows, so the failure comes
     * after about max_stacks stacks, with memory to match */
    char *t = doubling_grammar(30, 0);
    meter mt = {0, 0};
    sift_allocator al = {sizeof(sift_allocator), m_alloc, m_free, &mt, NULL};
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.allocator = &al;
    p.max_step_work = INT64_MAX; /* only max_stacks may stop it */
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), NULL, &p, &err), SIFT_E_GRAMMAR_LIMIT);
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(err.message, "grammar too ambiguous: more than 4096 parse stacks") != NULL,
                  "%s", err.message);
    ck_assert_uint_eq(mt.live, 0);
    ck_assert_msg(mt.peak < ((size_t)16 << 20), "peak %zu bytes", mt.peak);
    /* 2^11 = 2048 stacks are within the limit, and so is 2^12 with it raised */
    free(t);
    t = doubling_grammar(11, 0);
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), NULL, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "xabababababaz", 13, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
    free(t);
}
END_TEST

START_TEST(test_an_exponential_closure_of_empty_rules_stops_at_the_work_budget)
{
    /* the 2^30 stacks return through empty rules to one terminal, so
     * max_stacks cannot fire: the work budget does, and its unit count
     * bounds the memory too */
    char *t = doubling_grammar(30, 1);
    meter mt = {0, 0};
    sift_allocator al = {sizeof(sift_allocator), m_alloc, m_free, &mt, NULL};
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.allocator = &al;
    p.max_step_work = 1000000;
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), NULL, &p, &err), SIFT_E_GRAMMAR_LIMIT);
    ck_assert_msg(strstr(err.message, "work budget of 1000000 units") != NULL, "%s", err.message);
    ck_assert_uint_eq(mt.live, 0);
    ck_assert_msg(mt.peak < ((size_t)128 << 20), "peak %zu bytes", mt.peak);
    free(t);
}
END_TEST

/* root ::= "a"? "a"? ... (n times): every byte re-unions n successor
 * sets of up to n stacks (BAD_INPUTS: 0.45 s for the first byte at
 * n = 1999, none of it charged). */
static char *optional_chain(int n)
{
    char *t = malloc((size_t)n * 5 + 16);
    size_t k = (size_t)sprintf(t, "root ::=");
    for (int i = 0; i < n; i++)
        k += (size_t)sprintf(t + k, " \"a\"?");
    return t;
}

START_TEST(test_building_a_new_state_is_charged_to_the_work_budget)
{
    /* the first byte unions 1999 successor sets of up to 1999 stacks:
     * all of it is charged, so a budget just below its count stops it,
     * state unchanged, and the count itself lets it through */
    char *t = optional_chain(1999);
    sift_grammar *g = gnew(t);
    sift_error err;
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "a", 1, &err), SIFT_OK);
    int64_t w = sift__grammar_last_work(g);
    ck_assert_int_gt(w, (int64_t)1999 * 1999); /* n sets of n/2, copied and unioned */
    ck_assert_int_lt(w, SIFT_GRAMMAR_DEFAULT_MAX_STEP_WORK);
    sift_grammar_free(g);
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    int64_t budgets[] = {w - 1, w / 2, w / 8};
    int64_t prev = w + 1;
    for (size_t i = 0; i < N(budgets); i++) {
        p.max_step_work = budgets[i];
        ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), NULL, &p, &err), SIFT_OK);
        uint64_t d0 = sift__grammar_digest(g, 1);
        ck_assert_int_eq(sift_grammar_accept_bytes(g, "a", 1, &err), SIFT_E_GRAMMAR_LIMIT);
        ck_assert_msg(strstr(err.message, "work budget of") != NULL, "%s", err.message);
        ck_assert_msg(strstr(err.message, "at output byte 0") != NULL, "%s", err.message);
        /* it stopped as soon as the budget was spent: earlier for less */
        int64_t stop = sift__grammar_last_work(g);
        ck_assert_int_gt(stop, budgets[i]);
        ck_assert_int_le(stop, budgets[i] + 1999 * 16); /* one charge: a sort */
        ck_assert_int_lt(stop, prev);
        prev = stop;
        ck_assert_uint_eq(sift__grammar_digest(g, 1), d0);
        ck_assert_int_eq(sift_grammar_is_complete(g), 1);
        sift_grammar_free(g);
    }
    p.max_step_work = w;
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), NULL, &p, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "a", 1, &err), SIFT_OK);
    sift_grammar_free(g);
    free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Tokens                                                              */
/* ------------------------------------------------------------------ */

START_TEST(test_tokens_that_split_utf8_are_matched_exactly)
{
    const char *t = "root ::= \"x\xc3\xa9\" \"\xe2\x82\xac\" \"\xf0\x9f\x98\x80\"";
    sift_grammar *g = gnew_v(t, V1.v);
    int32_t seq[] = {tok_of(&V1, "x\xc3", 2), tok_of(&V1, "\xa9", 1), tok_of(&V1, "\xe2\x82", 2),
                     tok_of(&V1, "\xac", 1),  tok_of(&V1, "\xf0", 1), tok_of(&V1, "\x9f\x98", 2),
                     tok_of(&V1, "\x80", 1)};
    for (size_t i = 0; i < N(seq); i++) {
        ck_assert_int_ge(seq[i], 0);
        ck_assert_int_eq(sift_grammar_is_complete(g), 0);
        ck_assert_int_eq(sift_grammar_accept_token(g, seq[i], NULL), SIFT_OK);
    }
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    ck_assert_int_eq(sift_grammar_accept_token(g, V1.eos, NULL), SIFT_OK);
    sift_grammar_free(g);
    /* a continuation byte where a lead byte is expected is rejected, and
     * so is a lead byte whose completions the grammar cannot take */
    g = gnew_v("root ::= [^a]*", V1.v);
    int ok = 1;
    ck_assert_int_eq(sift_grammar_accepts_token(g, 0xa9, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0);
    ck_assert_int_eq(sift_grammar_accepts_token(g, tok_of(&V1, "\xed\xa0\x80", 3), &ok, NULL),
                     SIFT_OK);
    ck_assert_int_eq(ok, 0);
    ck_assert_int_eq(sift_grammar_accepts_token(g, tok_of(&V1, "\xc0\xaf", 2), &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0);
    ck_assert_int_eq(sift_grammar_accepts_token(g, tok_of(&V1, "\xf4\x90\x80\x80", 4), &ok, NULL),
                     SIFT_OK);
    ck_assert_int_eq(ok, 0);
    ck_assert_int_eq(sift_grammar_accepts_token(g, 0xc3, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 1);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_eog_is_allowed_exactly_when_complete)
{
    sift_grammar *g = gnew_v("root ::= \"a\" \"b\"?", V1.v);
    int ok;
    float *row = calloc((size_t)V1.n, sizeof *row);
    ck_assert_int_eq(sift_grammar_accepts_token(g, V1.eos, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0);
    sift_error err;
    ck_assert_int_eq(sift_grammar_accept_token(g, V1.eot, &err), SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(sift_grammar_accept_token(g, 'a', NULL), SIFT_OK);
    for (int32_t t = 0; t < V1.n; t++)
        row[t] = 1.0f;
    ck_assert_int_eq(sift_grammar_ban(g, row, V1.n, NULL), SIFT_OK);
    for (int32_t t = 0; t < V1.n; t++)
        ck_assert_int_eq(row[t] > -INFINITY, t == 'b' || t == V1.eos || t == V1.eot);
    ck_assert_int_eq(sift_grammar_accept_token(g, 'b', NULL), SIFT_OK);
    /* complete, nothing else can follow: R-04 */
    ck_assert_int_eq(sift_grammar_accept_token(g, 'b', &err), SIFT_E_GRAMMAR_REJECT);
    ck_assert_msg(strstr(err.message, "complete") != NULL, "%s", err.message);
    /* R-02: complete with EOG banned */
    for (int32_t t = 0; t < V1.n; t++)
        row[t] = 1.0f;
    row[V1.eos] = -INFINITY;
    row[V1.eot] = -INFINITY;
    ck_assert_int_eq(sift_grammar_ban(g, row, V1.n, &err), SIFT_E_GRAMMAR_DEAD);
    ck_assert_str_eq(err.message,
                     "grammar is complete but every end-of-generation token is banned");
    ck_assert(row[0] == 1.0f); /* unchanged */
    /* EOG accepted: the grammar is terminated (and still complete); a
     * second end-of-generation token is refused */
    ck_assert_int_eq(sift_grammar_accept_token(g, V1.eos, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_terminated(g), 1);
    ck_assert_int_eq(sift_grammar_accept_token(g, V1.eot, NULL), SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    free(row);
    sift_grammar_free(g);
    /* R-02 with no EOG token in the vocabulary at all */
    const char *pc[2] = {"a", "b"};
    size_t pl[2] = {1, 1};
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, 2, pc, pl, NULL, NULL), SIFT_OK);
    g = gnew_v("root ::= \"a\"", v);
    ck_assert_int_eq(sift_grammar_accept_token(g, 0, NULL), SIFT_OK);
    float r2[2] = {0.0f, 0.0f};
    ck_assert_int_eq(sift_grammar_ban(g, r2, 2, &err), SIFT_E_GRAMMAR_DEAD);
    ck_assert_str_eq(err.message,
                     "grammar is complete but the vocabulary has no end-of-generation token");
    sift_grammar_free(g);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_an_empty_piece_is_never_accepted_for_free)
{
    sift_grammar *g = gnew_v("root ::= \"a\"*", V1.v);
    int ok = 1;
    ck_assert_int_eq(sift_grammar_accepts_token(g, V1.empty, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0);
    sift_grammar_free(g);
    /* named by a token reference, it is accepted */
    char t[64];
    snprintf(t, sizeof t, "root ::= <[%d]> \"a\"", (int)V1.empty);
    g = gnew_v(t, V1.v);
    ck_assert_int_eq(sift_grammar_accept_token(g, V1.empty, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, 'a', NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_token_references_match_by_id)
{
    char t[160];
    int32_t tc = tok_of(&V1, "<tool_call>", 11);
    snprintf(t, sizeof t, "root ::= <[%d]> !<[%d]> </tool_call>", (int)tc, 'x');
    sift_grammar *g = gnew_v(t, V1.v);
    int ok;
    /* the text "<" does not match a token reference */
    ck_assert_int_eq(sift_grammar_accepts_token(g, '<', &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0);
    ck_assert_int_eq(sift_grammar_accept_token(g, tc, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accepts_token(g, 'x', &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0);
    ck_assert_int_eq(sift_grammar_accepts_token(g, V1.eos, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0);
    float *row = calloc((size_t)V1.n, sizeof *row);
    ck_assert_int_eq(sift_grammar_ban(g, row, V1.n, NULL), SIFT_OK);
    for (int32_t i = 0; i < V1.n; i++)
        ck_assert_int_eq(row[i] > -INFINITY, i != 'x' && i != V1.eos && i != V1.eot);
    ck_assert_int_eq(sift_grammar_accept_token(g, 'y', NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of(&V1, "</tool_call>", 12), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    free(row);
    sift_grammar_free(g);
    /* errors: out of range, unknown text */
    sift_error err;
    snprintf(t, sizeof t, "root ::= <[%d]>", (int)V1.n);
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), V1.v, NULL, &err), SIFT_E_GRAMMAR_SYNTAX);
    snprintf(t, sizeof t, "grammar:1:12: token id %d out of range [0, %d)", (int)V1.n, (int)V1.n);
    ck_assert_str_eq(err.message, t);
    ck_assert_int_eq(sift_grammar_new(&g, "root ::= <nope>", 15, V1.v, NULL, &err),
                     SIFT_E_GRAMMAR_SYNTAX);
    ck_assert_str_eq(err.message, "grammar:1:10: no token of the vocabulary is exactly '<nope>'");
}
END_TEST

START_TEST(test_right_recursion_runs_1e5_tokens_in_bounded_memory)
{
    cnt_alloc ca = {0, 0};
    sift_allocator al = {sizeof(sift_allocator), ca_alloc, ca_free, &ca, NULL};
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.allocator = &al;
    const char *t = "root ::= item*\nitem ::= \"ab\" | \"x\" | [0-9]";
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), V1.v, &p, NULL), SIFT_OK);
    int32_t ab = tok_of(&V1, "ab", 2);
    for (int i = 0; i < 2000; i++)
        ck_assert_int_eq(sift_grammar_accept_token(g, i % 3 ? ab : '7', NULL), SIFT_OK);
    uint64_t d0 = sift__grammar_digest(g, 0);
    long calls = ca.calls, live = ca.live;
    for (int i = 0; i < 100000; i++)
        ck_assert_int_eq(sift_grammar_accept_token(g, i % 3 ? ab : '7', NULL), SIFT_OK);
    /* right recursion: the same state after the same tokens, and not one
     * allocation over 10^5 tokens */
    ck_assert_uint_eq(sift__grammar_digest(g, 0), d0);
    ck_assert_int_eq(ca.calls, calls);
    ck_assert_int_eq(ca.live, live);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
    ck_assert_int_eq(ca.live, 0);
}
END_TEST

START_TEST(test_bad_arguments_are_refused)
{
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(NULL, "a", 1, NULL, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_grammar_new(&g, NULL, 3, NULL, NULL, &err), SIFT_E_ARG);
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_stacks = 0;
    ck_assert_int_eq(sift_grammar_new(&g, "root ::= \"a\"", 12, NULL, &p, &err), SIFT_E_ARG);
    p.struct_size = 0;
    ck_assert_int_eq(sift_grammar_new(&g, "root ::= \"a\"", 12, NULL, &p, &err), SIFT_E_ARG);
    g = gnew("root ::= \"a\"");
    int ok;
    ck_assert_int_eq(sift_grammar_accepts_token(g, 0, &ok, &err), SIFT_E_ARG);
    float row[4] = {0};
    ck_assert_int_eq(sift_grammar_ban(g, row, 4, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, NULL, 1, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_grammar_accept_bytes(NULL, "a", 1, &err), SIFT_E_ARG);
    sift_grammar *c2 = (sift_grammar *)1;
    ck_assert_int_eq(sift_grammar_clone(NULL, &c2, &err), SIFT_E_ARG);
    ck_assert_ptr_null(c2);
    ck_assert_int_eq(sift_grammar_is_complete(NULL), 0);
    sift_grammar_reset(NULL);
    sift_grammar_free(NULL);
    sift_grammar_free(g);
    g = gnew_v("root ::= \"a\"", V1.v);
    ck_assert_int_eq(sift_grammar_accepts_token(g, V1.n, &ok, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(sift_grammar_accepts_token(g, -1, &ok, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(sift_grammar_accepts_token(g, 0, NULL, &err), SIFT_E_ARG);
    float *r2 = calloc((size_t)V1.n + 1, sizeof *r2);
    /* R-12 */
    ck_assert_int_eq(sift_grammar_ban(g, r2, V1.n + 1, &err), SIFT_E_ARG);
    char msg[128];
    snprintf(msg, sizeof msg, "grammar vocabulary V = %d does not match row V = %d", (int)V1.n,
             (int)V1.n + 1);
    ck_assert_str_eq(err.message, msg);
    sift_candidate c[2] = {{0, 0.0f}, {V1.n, 0.0f}};
    ck_assert_int_eq(sift_grammar_ban_candidates(g, c, 2, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(err.index, 1);
    free(r2);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_dead_state_is_a_status_and_changes_nothing)
{
    sift_grammar *g = gnew_v("root ::= \"a\" [0-9]", V1.v);
    float *row = malloc((size_t)V1.n * sizeof *row);
    ck_assert_int_eq(sift_grammar_accept_token(g, 'a', NULL), SIFT_OK);
    /* every allowed token already banned (R-01) */
    for (int32_t t = 0; t < V1.n; t++)
        row[t] = (t >= '0' && t <= '9') ? -INFINITY : 2.0f;
    sift_error err;
    ck_assert_int_eq(sift_grammar_ban(g, row, V1.n, &err), SIFT_E_GRAMMAR_DEAD);
    ck_assert_str_eq(err.message, "no token can continue the grammar at output byte 1 (after `a`)");
    ck_assert(row['x'] == 2.0f);
    sift_candidate c[3] = {{'x', 1.0f}, {'y', 0.5f}, {'5', -INFINITY}};
    ck_assert_int_eq(sift_grammar_ban_candidates(g, c, 3, &err), SIFT_E_GRAMMAR_DEAD);
    ck_assert(c[0].logit == 1.0f && c[1].logit == 0.5f);
    c[2].logit = 0.0f;
    ck_assert_int_eq(sift_grammar_ban_candidates(g, c, 3, &err), SIFT_OK);
    ck_assert(c[0].logit == -INFINITY && c[1].logit == -INFINITY && c[2].logit == 0.0f);
    /* R-03 */
    uint64_t d = sift__grammar_digest(g, 0);
    ck_assert_int_eq(sift_grammar_accept_token(g, 'x', &err), SIFT_E_GRAMMAR_REJECT);
    ck_assert_str_eq(err.message, "token 120 (`x`) not allowed at output byte 1 (after `a`)");
    ck_assert_int_eq(err.index, 'x');
    ck_assert_uint_eq(sift__grammar_digest(g, 0), d);
    free(row);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_clone_is_independent_and_reset_restores_the_start)
{
    sift_grammar *g = gnew_v("root ::= \"ab\" [0-9]+", V1.v);
    ck_assert_int_eq(sift_grammar_accept_token(g, 'a', NULL), SIFT_OK);
    sift_grammar *c = NULL;
    ck_assert_int_eq(sift_grammar_clone(g, &c, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__grammar_digest(c, 0), sift__grammar_digest(g, 0));
    ck_assert_int_eq(sift_grammar_accept_token(c, 'b', NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(c, '1', NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(c), 1);
    ck_assert_int_eq(sift_grammar_is_complete(g), 0);
    ck_assert_int_eq(sift_grammar_accept_token(g, '1', NULL), SIFT_E_GRAMMAR_REJECT);
    sift_grammar_free(g); /* the clone keeps the shared core alive */
    sift_grammar_reset(c);
    ck_assert_int_eq(sift_grammar_accept_token(c, tok_of(&V1, "ab", 2), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(c, '9', NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(c), 1);
    sift_grammar_free(c);
}
END_TEST

/* Random walks: at every state the trie pass, the candidate pass and the
 * one-token check agree on every token. */
START_TEST(test_whole_vocabulary_ban_equals_one_token_checks)
{
    static const char *const gfiles[] = {"grammar/json.gbnf", "grammar/c_expr.gbnf",
                                         "grammar/chess.gbnf", "grammar/tool_call.gbnf"};
    size_t len;
    char *text = read_file(gfiles[_i], &len);
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_new(&g, text, len, V1.v, NULL, NULL), SIFT_OK);
    float *row = malloc((size_t)V1.n * sizeof *row);
    sift_candidate *c = malloc((size_t)V1.n * sizeof *c);
    tu_rng r = {1234 + (uint64_t)_i};
    for (int walk = 0; walk < 6; walk++) {
        sift_grammar_reset(g);
        for (int step = 0; step < 40; step++) {
            for (int32_t t = 0; t < V1.n; t++) {
                row[t] = 0.0f;
                c[t].id = V1.n - 1 - t;
                c[t].logit = 0.0f;
            }
            sift_status s = sift_grammar_ban(g, row, V1.n, NULL);
            if (s == SIFT_E_GRAMMAR_DEAD)
                break;
            ck_assert_int_eq(s, SIFT_OK);
            /* a small slice goes through the per-token path */
            size_t k = (size_t)tu_range(&r, 1, 12);
            ck_assert_int_eq(sift_grammar_ban_candidates(g, c, (size_t)V1.n, NULL), SIFT_OK);
            int32_t allowed[512];
            size_t na = 0;
            for (int32_t t = 0; t < V1.n; t++) {
                int ok = -1;
                ck_assert_int_eq(sift_grammar_accepts_token(g, t, &ok, NULL), SIFT_OK);
                ck_assert_msg((row[t] > -INFINITY) == ok, "%s token %d", gfiles[_i], (int)t);
                ck_assert_int_eq(c[V1.n - 1 - t].logit > -INFINITY, ok);
                if (ok && na < N(allowed))
                    allowed[na++] = t;
            }
            sift_candidate sl[12];
            for (size_t j = 0; j < k; j++) {
                sl[j].id = (int32_t)tu_range(&r, 0, V1.n - 1);
                sl[j].logit = 1.0f;
            }
            sl[0].id = allowed[0];
            ck_assert_int_eq(sift_grammar_ban_candidates(g, sl, k, NULL), SIFT_OK);
            for (size_t j = 0; j < k; j++)
                ck_assert_int_eq(sl[j].logit > -INFINITY, row[sl[j].id] > -INFINITY);
            ck_assert_uint_gt(na, 0);
            int32_t pick = allowed[tu_range(&r, 0, (int64_t)na - 1)];
            ck_assert_int_eq(sift_grammar_accept_token(g, pick, NULL), SIFT_OK);
            if (pick == V1.eos || pick == V1.eot)
                break;
        }
    }
    free(row);
    free(c);
    free(text);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_cache_rebuilds_keep_the_matching_state)
{
    size_t len;
    char *text = read_file("grammar/json.gbnf", &len);
    sift_grammar *a = NULL, *b = NULL;
    ck_assert_int_eq(sift_grammar_new(&a, text, len, V1.v, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_new(&b, text, len, V1.v, NULL, NULL), SIFT_OK);
    sift__grammar_set_soft_limits(b, 64, 8, 256);
    float *ra = malloc((size_t)V1.n * sizeof *ra), *rb = malloc((size_t)V1.n * sizeof *rb);
    tu_rng r = {77};
    int steps = 0;
    for (int walk = 0; walk < 4; walk++) {
        sift_grammar_reset(a);
        sift_grammar_reset(b);
        for (int step = 0; step < 60; step++, steps++) {
            for (int32_t t = 0; t < V1.n; t++)
                ra[t] = rb[t] = 0.0f;
            ck_assert_int_eq(sift_grammar_ban(a, ra, V1.n, NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_ban(b, rb, V1.n, NULL), SIFT_OK);
            ck_assert_int_eq(memcmp(ra, rb, (size_t)V1.n * sizeof *ra), 0);
            int32_t pick;
            do
                pick = (int32_t)tu_range(&r, 0, V1.n - 1);
            while (!(ra[pick] > -INFINITY));
            ck_assert_int_eq(sift_grammar_accept_token(a, pick, NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_accept_token(b, pick, NULL), SIFT_OK);
            ck_assert_uint_eq(sift__grammar_digest(a, 0), sift__grammar_digest(b, 0));
            if (pick == V1.eos || pick == V1.eot)
                break;
        }
    }
    ck_assert_int_gt(steps, 60);
    sift_grammar_free(a);
    sift_grammar_free(b);
    free(ra);
    free(rb);
    free(text);
    /* a long input in one call: rebuilt on the way, restored on failure */
    char *lit = malloc(20000 + 32);
    size_t k = (size_t)sprintf(lit, "root ::= \"");
    for (int i = 0; i < 20000; i++)
        lit[k++] = (char)('a' + (i * 7) % 26);
    lit[k++] = '"';
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_new(&g, lit, k, NULL, NULL, NULL), SIFT_OK);
    sift__grammar_set_soft_limits(g, 1000, 100, 1u << 20);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, lit + 10, 5, NULL), SIFT_OK);
    uint64_t d = sift__grammar_digest(g, 0);
    char *in = malloc(20000);
    memcpy(in, lit + 15, 19995);
    in[19990] = '#';
    ck_assert_int_eq(sift_grammar_accept_bytes(g, in, 19995, NULL), SIFT_E_GRAMMAR_REJECT);
    ck_assert_uint_eq(sift__grammar_digest(g, 0), d);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, lit + 15, 19995, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_grammar_free(g);
    free(in);
    free(lit);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The shipped grammars                                                */
/* ------------------------------------------------------------------ */

typedef struct table {
    const char *file;
    const char *accept[10];
    const char *reject[10];
} table;

static const table TABLES[] = {
    {"grammar/json.gbnf",
     {"{}", "[]", "{\"a\": 1}", "[1, -2.5e10, \"x\\n\\u00e9\", true, false, null]",
      "\"h\xc3\xa9llo \xe2\x82\xac\xf0\x9f\x98\x80\"", "{\"a\": {\"b\": [1, {\"c\": null}]}}", "0",
      "-0.0e+1", " {\n  \"k\": [ ]\n}"},
     {"{a: 1}", "[1,]", "01", "\"unterminated", "{\"a\" 1}", "tru", "\"\x01\"", "[1 2]", "1.",
      "\"\\q\""}},
    {"grammar/json_array.gbnf",
     {"[]", "[1, \"a\", {\"b\": [true]}]", "[\n  1,\n  2\n]", "[\"\xc3\xa9\"]"},
     {"{}", "1", "[1,,2]", "[\"a\"", "[] []"}},
    {"grammar/json_object.gbnf",
     {"{}", "{\"name\": \"x\", \"args\": {\"n\": 1}}", "{\"a_b-1\": [1, 2]}",
      "{\"k\": \"\xe2\x82\xac\"}"},
     {"[]", "{\"a b\": 1}", "{\"\xc3\xa9\": 1}", "{1: 2}", "{\"a\": }"}},
    {"grammar/arithmetic.gbnf",
     {"1", "(1 + 2.5) * -3 / 4", "((2))", "-(-1)", "10/2-3", "1 + 2 + 3 * 4"},
     {"1 +", "* 2", "(1", "1..2", "a", "1 2"}},
    {"grammar/list.gbnf",
     {"- milk\n", "- milk\n- eggs\n", "- \xc3\xa9\xf0\x9f\x98\x80\n"},
     {"milk\n", "- \n", "- a", "-a\n", "- a\n\n"}},
    {"grammar/c_expr.gbnf",
     {"x", "x = a[i] + f(b, 2) * (c >> 1) ? -y : !z++", "p->next.val += 0x1F", "a && b || !c",
      "i++ + ++j", "s = \"a\\n\" == 'c'", "f()"},
     {"x +", "= 3", "f(,)", "a[1", "1x", "a = = b", "'ab'"}},
    {"grammar/chess.gbnf",
     {"e4", "1. e4 e5 2. Nf3 Nc6 3. Bb5", "O-O", "O-O-O", "exd5", "e8=Q+", "Qh4#", "Nbd7", "R1e2",
      "12... Kxh8"},
     {"e9", "Xe4", "e4  e5", "O-O-O-O", "i1", "e4 ", "0. e4"}},
    {"grammar/tool_call.gbnf",
     {"<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
      "<tool_call>{\"name\":\"a.b\",\"arguments\":{\"n\":[1,2],\"o\":{\"p\":null}}}</tool_call>"},
     {"<tool_call>{\"name\": 1, \"arguments\": {}}</tool_call>",
      "{\"name\": \"f\", \"arguments\": {}}",
      "<tool_call>{\"arguments\": {}, \"name\": \"f\"}</tool_call>",
      "<tool_call>{\"name\": \"f\", \"arguments\": {}}",
      "<tool_call>{\"name\": \"f\"}</tool_call>"}},
};

START_TEST(test_shipped_grammar_accepts_and_rejects_its_table_bytewise)
{
    const table *tb = &TABLES[_i];
    size_t len;
    char *text = read_file(tb->file, &len);
    ck_assert_msg(len > 2 && text[0] == '#', "%s must open with a comment", tb->file);
    for (size_t i = 0; i < N(tb->accept) && tb->accept[i]; i++) {
        ck_assert_msg(accepts_text(text, tb->accept[i]), "%s must accept [%s]", tb->file,
                      tb->accept[i]);
        /* byte by byte too */
        sift_grammar *g = gnew(text);
        const char *s = tb->accept[i];
        for (size_t k = 0; s[k]; k++)
            ck_assert_int_eq(sift_grammar_accept_bytes(g, s + k, 1, NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_is_complete(g), 1);
        sift_grammar_free(g);
    }
    for (size_t i = 0; i < N(tb->reject) && tb->reject[i]; i++)
        ck_assert_msg(!accepts_text(text, tb->reject[i]), "%s must reject [%s]", tb->file,
                      tb->reject[i]);
    free(text);
}
END_TEST

START_TEST(test_shipped_grammar_accepts_and_rejects_its_table_tokenwise)
{
    const table *tb = &TABLES[_i];
    size_t len;
    char *text = read_file(tb->file, &len);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        for (size_t i = 0; i < N(tb->accept) && tb->accept[i]; i++)
            ck_assert_msg(accepts_tokens(text, tb->accept[i], seed), "%s must accept [%s]",
                          tb->file, tb->accept[i]);
        for (size_t i = 0; i < N(tb->reject) && tb->reject[i]; i++)
            ck_assert_msg(!accepts_tokens(text, tb->reject[i], seed), "%s must reject [%s]",
                          tb->file, tb->reject[i]);
    }
    free(text);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The shipped grammars on the real cl100k vocabulary                  */
/* ------------------------------------------------------------------ */

static sift_vocab *cl100k;
static int32_t *cl_slot; /* open addressing: piece -> id, -1 empty */
#define CL_BITS 19

static uint32_t cl_hash(const char *b, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)b[i]) * 16777619u;
    return h;
}

static void cl100k_setup(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/cl100k_base.tiktoken", SIFT_SRCDIR);
    sift_error err;
    if (sift_vocab_load_tiktoken(&cl100k, path, NULL, &err) != SIFT_OK) {
        fprintf(stderr, "cl100k: %s\n", err.message);
        cl100k = NULL;
        return;
    }
    cl_slot = malloc(((size_t)1 << CL_BITS) * sizeof *cl_slot);
    memset(cl_slot, 0xff, ((size_t)1 << CL_BITS) * sizeof *cl_slot);
    for (int32_t id = 0; id < sift_vocab_size(cl100k); id++) {
        const char *b;
        size_t n;
        if (sift_vocab_piece(cl100k, id, &b, &n, NULL) || n == 0)
            continue;
        uint32_t h = cl_hash(b, n) & ((1u << CL_BITS) - 1);
        while (cl_slot[h] >= 0)
            h = (h + 1) & ((1u << CL_BITS) - 1);
        cl_slot[h] = id;
    }
}

static void cl100k_teardown(void)
{
    sift_vocab_free(cl100k);
    free(cl_slot);
    cl100k = NULL;
    cl_slot = NULL;
}

static int32_t cl_find(const char *b, size_t n)
{
    uint32_t h = cl_hash(b, n) & ((1u << CL_BITS) - 1);
    for (; cl_slot[h] >= 0; h = (h + 1) & ((1u << CL_BITS) - 1)) {
        const char *p;
        size_t m;
        if (!sift_vocab_piece(cl100k, cl_slot[h], &p, &m, NULL) && m == n && !memcmp(p, b, n))
            return cl_slot[h];
    }
    return -1;
}

/* Splits s into cl100k tokens: the longest piece at each position, or
 * (split_utf8) single bytes inside multi-byte characters, so that tokens
 * end in the middle of a UTF-8 sequence. Returns the count. */
static size_t cl_tokenize(const char *s, int split_utf8, int32_t *out, size_t cap)
{
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n && k < cap;) {
        size_t best = 0;
        int32_t id = -1;
        size_t max = (split_utf8 && ((unsigned char)s[i] & 0x80)) ? 1 : (n - i < 48 ? n - i : 48);
        for (size_t l = max; l >= 1 && id < 0; l--)
            if ((id = cl_find(s + i, l)) >= 0)
                best = l;
        ck_assert_msg(id >= 0, "no cl100k token for byte %zu of [%s]", i, s);
        out[k++] = id;
        i += best;
    }
    return k;
}

/* 1 if the grammar accepts the tokens of s one by one and is complete. */
static int cl_accepts(sift_grammar *g, const char *s, int split_utf8)
{
    int32_t toks[512];
    size_t n = cl_tokenize(s, split_utf8, toks, 512);
    sift_grammar_reset(g);
    for (size_t i = 0; i < n; i++) {
        int ok = -1;
        ck_assert_int_eq(sift_grammar_accepts_token(g, toks[i], &ok, NULL), SIFT_OK);
        sift_status st = sift_grammar_accept_token(g, toks[i], NULL);
        ck_assert_int_eq(ok, st == SIFT_OK); /* the check and the advance agree */
        if (st != SIFT_OK)
            return 0;
    }
    return sift_grammar_is_complete(g);
}

START_TEST(test_a_whole_vocabulary_ban_is_charged_to_the_work_budget)
{
    /* BAD_INPUTS: 2.1 s per token with a cl100k ban; the walk, the new
     * states it builds and the writes are all charged */
    ck_assert_msg(cl100k != NULL, "tests/data/cl100k_base.tiktoken did not load");
    char *t = optional_chain(1999);
    int32_t V = sift_vocab_size(cl100k);
    float *row = calloc((size_t)V, sizeof *row);
    float *row2 = calloc((size_t)V, sizeof *row2);
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), cl100k, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_ban(g, row, V, &err), SIFT_OK);
    int64_t w = sift__grammar_last_work(g);
    ck_assert_int_gt(w, V); /* at least the trie nodes and the writes */
    sift_grammar_free(g);
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_step_work = w - 1;
    ck_assert_int_eq(sift_grammar_new(&g, t, strlen(t), cl100k, &p, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_ban(g, row2, V, &err), SIFT_E_GRAMMAR_LIMIT);
    ck_assert_msg(strstr(err.message, "work budget of") != NULL, "%s", err.message);
    for (int32_t i = 0; i < V; i++)
        ck_assert_float_eq(row2[i], 0.0f); /* the row is untouched */
    /* the same budget lets the cheaper one-token checks through */
    int ok = 0;
    ck_assert_int_eq(sift_grammar_accepts_token(g, cl_find("a", 1), &ok, &err), SIFT_OK);
    ck_assert_int_eq(ok, 1);
    sift_grammar_free(g);
    free(row);
    free(row2);
    free(t);
}
END_TEST

START_TEST(test_shipped_grammar_tables_hold_token_by_token_on_cl100k)
{
    ck_assert_msg(cl100k != NULL, "tests/data/cl100k_base.tiktoken did not load");
    const table *tb = &TABLES[_i];
    size_t len;
    char *text = read_file(tb->file, &len);
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_msg(sift_grammar_new(&g, text, len, cl100k, NULL, &err) == SIFT_OK, "%s",
                  err.message);
    for (int split = 0; split <= 1; split++) {
        for (size_t i = 0; i < N(tb->accept) && tb->accept[i]; i++)
            ck_assert_msg(cl_accepts(g, tb->accept[i], split), "%s must accept [%s] (split %d)",
                          tb->file, tb->accept[i], split);
        for (size_t i = 0; i < N(tb->reject) && tb->reject[i]; i++)
            ck_assert_msg(!cl_accepts(g, tb->reject[i], split), "%s must reject [%s] (split %d)",
                          tb->file, tb->reject[i], split);
    }
    /* the whole-vocabulary pass agrees with the one-token check at the
     * start and after the first accepted string's first token */
    int32_t V = sift_vocab_size(cl100k);
    float *row = malloc((size_t)V * sizeof *row);
    for (int state = 0; state < 2; state++) {
        sift_grammar_reset(g);
        if (state == 1) {
            int32_t t[512];
            cl_tokenize(tb->accept[0], 0, t, 512);
            ck_assert_int_eq(sift_grammar_accept_token(g, t[0], NULL), SIFT_OK);
        }
        for (int32_t i = 0; i < V; i++)
            row[i] = 0.0f;
        sift_status bs = sift_grammar_ban(g, row, V, &err);
        if (bs == SIFT_E_GRAMMAR_DEAD) {
            /* complete, and cl100k's file has no end-of-generation token */
            ck_assert(sift_grammar_is_complete(g));
            continue;
        }
        ck_assert_int_eq(bs, SIFT_OK);
        for (int32_t id = 0; id < V; id += 7) {
            int ok = -1;
            ck_assert_int_eq(sift_grammar_accepts_token(g, id, &ok, NULL), SIFT_OK);
            ck_assert_msg(ok == (row[id] == 0.0f), "%s state %d token %d: check %d, ban %g",
                          tb->file, state, (int)id, ok, (double)row[id]);
        }
    }
    free(row);
    sift_grammar_free(g);
    free(text);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Allocation failure                                                  */
/* ------------------------------------------------------------------ */

typedef struct fa {
    long calls, fail_at, live;
} fa;

static void *fa_alloc(void *user, size_t size)
{
    fa *f = user;
    f->calls++;
    if (f->fail_at && f->calls >= f->fail_at)
        return NULL;
    void *p = malloc(size);
    if (p)
        f->live++;
    return p;
}

static void fa_free(void *user, void *p)
{
    fa *f = user;
    if (p)
        f->live--;
    free(p);
}

/* Builds a grammar with a vocabulary and runs a few tokens and a ban;
 * returns the first failing status (the allocator fails from call N on). */
static sift_status build_and_run(fa *f, const char *text)
{
    sift_allocator al = {sizeof(sift_allocator), fa_alloc, fa_free, f, NULL};
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.allocator = &al;
    sift_grammar *g = NULL;
    sift_error err;
    sift_status s = sift_grammar_new(&g, text, strlen(text), V1.v, &p, &err);
    if (s) {
        ck_assert_ptr_null(g);
        return s;
    }
    const char *in = "{\"a\": [1, \"\xc3\xa9\"]}";
    int32_t toks[64];
    size_t n = tokenize(&V1, in, toks, N(toks), 7);
    float *row = malloc((size_t)V1.n * sizeof *row);
    for (size_t i = 0; i < n && !s; i++) {
        uint64_t d = sift__grammar_digest(g, 0);
        for (int32_t t = 0; t < V1.n; t++)
            row[t] = 0.0f;
        s = sift_grammar_ban(g, row, V1.n, &err);
        if (!s)
            s = sift_grammar_accept_token(g, toks[i], &err);
        if (s)
            ck_assert_uint_eq(sift__grammar_digest(g, 0), d); /* unchanged */
        if (!s && i == 3) {
            sift_grammar *c = NULL;
            s = sift_grammar_clone(g, &c, &err);
            if (!s)
                sift_grammar_free(c);
            else
                ck_assert_ptr_null(c);
        }
    }
    if (!s)
        ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    free(row);
    sift_grammar_free(g);
    return s;
}

START_TEST(test_failing_the_nth_allocation_is_clean_for_every_n)
{
    size_t len;
    char *text = read_file("grammar/json.gbnf", &len);
    fa f = {0, 0, 0};
    ck_assert_int_eq(build_and_run(&f, text), SIFT_OK);
    ck_assert_int_eq(f.live, 0);
    long total = f.calls;
    ck_assert_int_gt(total, 10);
    for (long n = 1; n <= total; n++) {
        fa g = {0, n, 0};
        sift_status s = build_and_run(&g, text);
        ck_assert_msg(s == SIFT_E_NOMEM, "N=%ld of %ld: status %d", n, total, (int)s);
        ck_assert_msg(g.live == 0, "N=%ld: %ld blocks leaked", n, g.live);
    }
    free(text);
}
END_TEST

START_TEST(test_steady_state_accept_allocates_nothing)
{
    fa f = {0, 0, 0};
    sift_allocator al = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.allocator = &al;
    size_t len;
    char *text = read_file("grammar/json.gbnf", &len);
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_new(&g, text, len, V1.v, &p, NULL), SIFT_OK);
    /* the same tokens at the same nesting, round after round */
    ck_assert_int_eq(sift_grammar_accept_token(g, '[', NULL), SIFT_OK);
    const char *in = "\"abc\", 12, true, null, {\"a\": 0.5}, ";
    int32_t toks[64];
    size_t n = tokenize(&V1, in, toks, N(toks), 3);
    float *row = malloc((size_t)V1.n * sizeof *row);
    long before = 0;
    for (int round = 0; round < 5; round++) {
        if (round == 2)
            before = f.calls;
        for (size_t i = 0; i < n; i++) {
            for (int32_t t = 0; t < V1.n; t++)
                row[t] = 0.0f;
            ck_assert_int_eq(sift_grammar_ban(g, row, V1.n, NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_accept_token(g, toks[i], NULL), SIFT_OK);
        }
    }
    ck_assert_int_eq(f.calls, before);
    free(row);
    free(text);
    sift_grammar_free(g);
    ck_assert_int_eq(f.live, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The constrain stage                                                 */
/* ------------------------------------------------------------------ */

static sift_chain *chain_with(uint64_t seed, sift_grammar *g, int mode)
{
    sift_chain *c = tu_chain_new(seed, NULL);
    if (g)
        ck_assert_int_eq(sift_chain_add_grammar(c, g, NULL), SIFT_OK);
    if (mode == 1) {
        ck_assert_int_eq(sift_chain_add_top_k(c, 20, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_temp(c, 0.7f, NULL), SIFT_OK);
    } else if (mode == 2) {
        ck_assert_int_eq(sift_chain_add_min_p(c, 0.05f, 1, NULL), SIFT_OK);
    }
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

START_TEST(test_constrain_stage_equals_banning_the_row_then_sampling)
{
    size_t len;
    char *text = read_file("grammar/json.gbnf", &len);
    float *row = malloc((size_t)V1.n * sizeof *row);
    float *banned = malloc((size_t)V1.n * sizeof *banned);
    tu_rng r = {99 + (uint64_t)_i};
    int steps = 0;
    for (int run = 0; run < 8; run++) {
        uint64_t seed = tu_next(&r);
        int mode = run % 3;
        sift_grammar *ga = NULL, *gb = NULL;
        ck_assert_int_eq(sift_grammar_new(&ga, text, len, V1.v, NULL, NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_new(&gb, text, len, V1.v, NULL, NULL), SIFT_OK);
        sift_chain *a = chain_with(seed, ga, mode);
        sift_chain *b = chain_with(seed, NULL, mode);
        int64_t n = 0;
        ck_assert_int_eq(sift_chain_stage_class(a, 0, &n), SIFT_CLASS_LOWERS);
        ck_assert_int_eq(n, -1);
        for (int step = 0; step < 30; step++) {
            tu_row(&r, row, V1.n, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
            memcpy(banned, row, (size_t)V1.n * sizeof *row);
            int32_t ta = -1, tb = -1;
            sift_error ea, eb;
            sift_status sb = sift_grammar_ban(gb, banned, V1.n, &eb);
            sift_status sa = sift_chain_sample(a, row, V1.n, &ta, &ea);
            if (sb) {
                ck_assert_int_eq(sa, sb);
                break;
            }
            sb = sift_chain_sample(b, banned, V1.n, &tb, &eb);
            ck_assert_int_eq(sa, sb);
            if (sa)
                break;
            ck_assert_int_eq(ta, tb);
            uint64_t ra[4], rb[4];
            sift__chain_rng_state(a, ra);
            sift__chain_rng_state(b, rb);
            ck_assert_int_eq(memcmp(ra, rb, sizeof ra), 0);
            ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_accept_token(gb, tb, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(b, tb, NULL), SIFT_OK);
            steps++;
            if (ta == V1.eos || ta == V1.eot)
                break;
        }
        /* a clone of the chain carries the grammar state */
        sift_chain *c = NULL;
        ck_assert_int_eq(sift_chain_clone(a, &c, NULL), SIFT_OK);
        ck_assert_uint_eq(sift__chain_state_digest(c), sift__chain_state_digest(a));
        sift_chain_reset(c);
        sift_chain_free(c);
        sift_chain_free(a);
        sift_chain_free(b);
        sift_grammar_free(gb);
    }
    ck_assert_int_gt(steps, 20);
    free(row);
    free(banned);
    free(text);
}
END_TEST

START_TEST(test_adding_a_grammar_stage_checks_its_vocabulary)
{
    sift_chain *c = chain_with(1, NULL, 0);
    sift_grammar *g = gnew("root ::= \"a\"");
    sift_error err;
    ck_assert_int_eq(sift_chain_add_grammar(c, g, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_grammar(c, NULL, &err), SIFT_E_ARG);
    sift_grammar_free(g); /* still ours after the failure */
    sift_chain_free(c);
    /* a row of another size is refused (R-12) */
    sift_chain_params p;
    sift_chain_params_init(&p);
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    g = gnew_v("root ::= [a-z]+", V1.v);
    ck_assert_int_eq(sift_chain_add_grammar(c, g, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    float *row = calloc((size_t)V1.n + 10, sizeof *row);
    int32_t tok;
    ck_assert_int_eq(sift_chain_sample(c, row, V1.n + 10, &tok, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_sample(c, row, V1.n, &tok, &err), SIFT_OK);
    ck_assert_int_eq(tok, 'a'); /* the first allowed token at equal logits */
    free(row);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Small stacks (F-08)                                                 */
/* ------------------------------------------------------------------ */

static void *small_stack_work(void *arg)
{
    int *ok = arg;
    /* the deepest nesting allowed, a refused deeper one, a long rule
     * chain with left recursion at its end, and the JSON grammar on
     * 200 nested arrays */
    size_t cap = 1 << 21;
    char *t = malloc(cap);
    size_t k = (size_t)sprintf(t, "root ::= ");
    for (int i = 0; i < 1000; i++)
        t[k++] = '(';
    k += (size_t)sprintf(t + k, "\"a\"");
    for (int i = 0; i < 1000; i++)
        t[k++] = ')';
    sift_grammar *g = NULL;
    int good = sift_grammar_new(&g, t, k, NULL, NULL, NULL) == SIFT_OK &&
               sift_grammar_accept_bytes(g, "a", 1, NULL) == SIFT_OK;
    sift_grammar_free(g);
    k = (size_t)sprintf(t, "root ::= r0\n");
    for (int i = 0; i < 20000; i++)
        k += (size_t)sprintf(t + k, "r%d ::= r%d \"x\"\n", i, i + 1);
    k += (size_t)sprintf(t + k, "r20000 ::= root\n");
    good &= sift_grammar_new(&g, t, k, NULL, NULL, NULL) == SIFT_E_GRAMMAR_LEFT_RECURSION;
    size_t len;
    char *json = read_file("grammar/json.gbnf", &len);
    good &= sift_grammar_new(&g, json, len, NULL, NULL, NULL) == SIFT_OK;
    for (int i = 0; i < 200 && good; i++)
        good &= sift_grammar_accept_bytes(g, "[", 1, NULL) == SIFT_OK;
    for (int i = 0; i < 200 && good; i++)
        good &= sift_grammar_accept_bytes(g, "]", 1, NULL) == SIFT_OK;
    good &= sift_grammar_is_complete(g);
    sift_grammar_free(g);
    free(json);
    free(t);
    *ok = good;
    return NULL;
}

START_TEST(test_parser_and_matcher_run_on_a_256k_stack)
{
    pthread_attr_t at;
    pthread_attr_init(&at);
    ck_assert_int_eq(pthread_attr_setstacksize(&at, 256 * 1024), 0);
    pthread_t th;
    int ok = 0;
    ck_assert_int_eq(pthread_create(&th, &at, small_stack_work, &ok), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&at);
    ck_assert_int_eq(ok, 1);
}
END_TEST

/* The config asks the grammar module, not its message text, whether a
 * grammar needs a vocabulary (sift__grammar_new_ex): token references then
 * compile to stand-ins, and the grammar's own errors after one are still
 * found. */
START_TEST(test_a_token_reference_without_a_vocabulary_is_reported_as_needing_one)
{
    const char *with_id = "root ::= \"a\" <[5]>";
    const char *with_text = "root ::= <hello>";
    const char *then_bad = "root ::= <hello> [z-a]";
    const char *bad = "root ::= \"a";
    sift_grammar *g = NULL;
    sift_error err;
    int nv = -1;
    ck_assert_int_eq(sift__grammar_new_ex(&g, with_id, strlen(with_id), NULL, NULL, &nv, &err),
                     SIFT_OK);
    ck_assert_int_eq(nv, 1);
    sift_grammar_free(g);
    g = NULL;
    nv = -1;
    ck_assert_int_eq(sift__grammar_new_ex(&g, with_text, strlen(with_text), NULL, NULL, &nv, &err),
                     SIFT_OK);
    ck_assert_int_eq(nv, 1);
    sift_grammar_free(g);
    g = NULL;
    nv = -1;
    ck_assert_int_eq(sift__grammar_new_ex(&g, then_bad, strlen(then_bad), NULL, NULL, &nv, &err),
                     SIFT_E_GRAMMAR_SYNTAX);
    ck_assert_msg(strstr(err.message, "grammar:1:19: reversed range") != NULL, "%s", err.message);
    ck_assert_ptr_null(g);
    nv = -1;
    ck_assert_int_eq(sift__grammar_new_ex(&g, bad, strlen(bad), NULL, NULL, &nv, &err),
                     SIFT_E_GRAMMAR_SYNTAX);
    ck_assert_int_eq(nv, 0);
    ck_assert_ptr_null(g);
    /* without the question, the token reference is the error */
    ck_assert_int_eq(sift_grammar_new(&g, then_bad, strlen(then_bad), NULL, NULL, &err),
                     SIFT_E_GRAMMAR_SYNTAX);
    ck_assert_msg(strstr(err.message, "grammar:1:10: token references need a vocabulary") != NULL,
                  "%s", err.message);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("gbnf");
    TCase *tc = tcase_create("parser");
    tcase_add_loop_test(tc, test_each_invalid_grammar_gets_its_golden_message_and_code, 0,
                        (int)N(GOLDEN));
    tcase_add_test(tc, test_grammar_over_the_byte_cap_fails_before_parsing);
    tcase_add_test(tc, test_crlf_bom_tabs_and_a_final_comment_are_accepted);
    tcase_add_test(tc, test_a_caller_given_start_rule_is_used_and_checked);
    tcase_add_test(tc, test_deep_nesting_and_long_rule_chains_do_not_recurse);
    tcase_add_test(tc, test_a_long_literal_and_many_alternatives_are_linear);
    tcase_add_loop_test(tc, test_a_nullable_repetition_is_accepted_with_its_meaning, 0,
                        (int)N(NULLABLE));
    tcase_add_test(tc, test_a_nullable_repetition_matches_in_constant_work_per_byte);
    tcase_add_test(tc, test_a_left_recursion_through_a_nullable_loop_is_still_an_error);
    tcase_add_test(tc, test_a_repeated_item_is_copied_whole_into_its_helpers);
    tcase_add_test(tc, test_repetition_limits_follow_llamacpp);
    tcase_add_test(tc, test_parser_and_matcher_run_on_a_256k_stack);
    suite_add_tcase(s, tc);

    tc = tcase_create("bytes");
    tcase_add_test(tc, test_classes_ranges_negation_escapes_and_any);
    tcase_add_test(tc, test_invalid_utf8_overlong_and_surrogates_are_rejected);
    tcase_add_test(tc, test_a_rejected_input_leaves_the_state_unchanged);
    tcase_add_test(tc, test_ambiguity_beyond_max_stacks_is_a_limit_error);
    tcase_add_test(tc, test_stack_depth_and_work_budget_are_enforced);
    tcase_add_test(tc, test_an_exponential_start_state_fails_while_it_is_built);
    tcase_add_test(tc, test_an_exponential_closure_of_empty_rules_stops_at_the_work_budget);
    tcase_add_test(tc, test_building_a_new_state_is_charged_to_the_work_budget);
    suite_add_tcase(s, tc);

    tc = tcase_create("tokens");
    tcase_add_test(tc, test_a_token_reference_without_a_vocabulary_is_reported_as_needing_one);
    tcase_add_unchecked_fixture(tc, vocab_setup, vocab_teardown);
    tcase_add_test(tc, test_tokens_that_split_utf8_are_matched_exactly);
    tcase_add_test(tc, test_eog_is_allowed_exactly_when_complete);
    tcase_add_test(tc, test_an_empty_piece_is_never_accepted_for_free);
    tcase_add_test(tc, test_token_references_match_by_id);
    tcase_add_test(tc, test_right_recursion_runs_1e5_tokens_in_bounded_memory);
    tcase_add_test(tc, test_bad_arguments_are_refused);
    tcase_add_test(tc, test_a_dead_state_is_a_status_and_changes_nothing);
    tcase_add_test(tc, test_clone_is_independent_and_reset_restores_the_start);
    tcase_add_loop_test(tc, test_whole_vocabulary_ban_equals_one_token_checks, 0, 4);
    tcase_add_test(tc, test_cache_rebuilds_keep_the_matching_state);
    suite_add_tcase(s, tc);

    tc = tcase_create("grammars");
    tcase_add_unchecked_fixture(tc, vocab_setup, vocab_teardown);
    tcase_add_loop_test(tc, test_shipped_grammar_accepts_and_rejects_its_table_bytewise, 0,
                        (int)N(TABLES));
    tcase_add_loop_test(tc, test_shipped_grammar_accepts_and_rejects_its_table_tokenwise, 0,
                        (int)N(TABLES));
    suite_add_tcase(s, tc);

    tc = tcase_create("cl100k");
    tcase_add_unchecked_fixture(tc, cl100k_setup, cl100k_teardown);
    tcase_add_test(tc, test_a_whole_vocabulary_ban_is_charged_to_the_work_budget);
    tcase_add_loop_test(tc, test_shipped_grammar_tables_hold_token_by_token_on_cl100k, 0,
                        (int)N(TABLES));
    suite_add_tcase(s, tc);

    tc = tcase_create("alloc");
    tcase_add_unchecked_fixture(tc, vocab_setup, vocab_teardown);
    tcase_add_test(tc, test_failing_the_nth_allocation_is_clean_for_every_n);
    tcase_add_test(tc, test_steady_state_accept_allocates_nothing);
    tcase_set_timeout(tc, 300); /* a property run over every N */
    suite_add_tcase(s, tc);

    tc = tcase_create("stage");
    tcase_add_unchecked_fixture(tc, vocab_setup, vocab_teardown);
    tcase_add_loop_test(tc, test_constrain_stage_equals_banning_the_row_then_sampling, 0, 4);
    tcase_add_test(tc, test_adding_a_grammar_stage_checks_its_vocabulary);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_serve.c - the grammar calls of the serving loop: rollback,
 * termination, draft validation, masks along a draft, the batch fill
 * into chosen rows and the forced bytes (docs/grammar.md, "The serving
 * loop").
 *
 * The property runs draw random grammars of six families (GBNF, JSON
 * Schema, lazy GBNF, structural tags, regular expressions, choices) over
 * a small vocabulary and random sequences of accepts, tries and
 * rollbacks, and compare with oracles built from the plain calls only:
 * a fresh grammar fed the surviving tokens (state digest and mask),
 * accepting on a clone, one fill per position on a clone, and the bytes
 * accept_bytes takes one at a time. SIFT_SERVE_CASES sets the number of
 * grammars per family and property (default 40, 30 for forced bytes;
 * make check-long raises it). Each property prints the operations it
 * checked (accepts, rollbacks, validations, fills along a draft,
 * forced-bytes queries; about 21,000 in all by default, about 560 per
 * unit of SIFT_SERVE_CASES); with CK_FORK=no the run prints the total,
 * and SIFT_SERVE_MIN_OPS sets a least total: the run fails when it
 * performed fewer, when it runs forked (the total is not known there) or
 * when the value is not a whole number >= 0 (make check-long: 1,000,000).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "grammar/gbnf.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* The vocabulary                                                      */
/* ------------------------------------------------------------------ */

/* Every printable ASCII byte, some longer pieces, the two bytes of "é"
 * and "é" whole, one end-of-generation and one special token. */
static const char *const MULTI[] = {
    "ab",   "abc",  "ca", "{\"", "\":",  " \"",    "xy",  "yx",   "\"}", "((", "))",
    "\xc3", "\xa9", "é",  "na",  "name", "\": \"", "tru", "true", "12",  "ok",
};
static sift_vocab *voc;
static int32_t V, EOS, SPECIAL;
static size_t NW;

static void setup(void)
{
    const char *p[160];
    size_t l[160];
    char single[95][2];
    int32_t n = 0;
    for (int c = 0x20; c < 0x7f; c++, n++) {
        single[c - 0x20][0] = (char)c;
        single[c - 0x20][1] = 0;
        p[n] = single[c - 0x20];
        l[n] = 1;
    }
    for (size_t i = 0; i < sizeof MULTI / sizeof *MULTI; i++, n++) {
        p[n] = MULTI[i];
        l[n] = strlen(MULTI[i]);
    }
    p[n] = "<eos>";
    l[n] = 5;
    EOS = n++;
    p[n] = "<s>";
    l[n] = 3;
    SPECIAL = n++;
    V = n;
    NW = ((size_t)V + 31) / 32;
    ck_assert_int_eq(sift_vocab_new(&voc, V, p, l, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(voc, EOS, SIFT_TOKEN_EOG, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(voc, SPECIAL, SIFT_TOKEN_SPECIAL, NULL), SIFT_OK);
}

static void teardown(void)
{
    sift_vocab_free(voc);
    voc = NULL;
}

static int32_t tok_of(const char *s)
{
    for (int32_t t = 0; t < V; t++) {
        const char *b;
        size_t n;
        ck_assert_int_eq(sift_vocab_piece(voc, t, &b, &n, NULL), SIFT_OK);
        if (n == strlen(s) && !memcmp(b, s, n))
            return t;
    }
    ck_abort_msg("no token `%s`", s);
    return -1;
}

static long cases(long dflt)
{
    const char *e = getenv("SIFT_SERVE_CASES");
    return e && atol(e) > 0 ? atol(e) : dflt;
}

/* The operations the property runs perform on the grammar under test,
 * each one checked against its oracle: accepts (refused ones too),
 * rollbacks (refused ones too), validations, fills along a draft and
 * forced-bytes queries. Without fork the total is the whole run's. */
static long long ops;

/* SIFT_SERVE_MIN_OPS (environment): the least number of operations the
 * whole run must perform; unset or empty = no minimum. Anything but a
 * whole number >= 0 fails the run: a soak must not drop its minimum
 * because of a typo such as 1e6. */
static int min_ops(long long *out)
{
    const char *e = getenv("SIFT_SERVE_MIN_OPS");
    *out = 0;
    if (!e || !*e)
        return 0;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(e, &end, 10);
    if (errno || end == e || *end || n < 0) {
        fprintf(stderr, "check_serve: SIFT_SERVE_MIN_OPS=%s is not a whole number >= 0\n", e);
        return -1;
    }
    *out = n;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Random grammars                                                     */
/* ------------------------------------------------------------------ */

typedef struct gbuf {
    char s[4096];
    size_t n;
} gbuf;

static void put(gbuf *b, const char *s)
{
    size_t k = strlen(s);
    if (b->n + k < sizeof b->s) {
        memcpy(b->s + b->n, s, k);
        b->n += k;
        b->s[b->n] = 0;
    }
}

static const char *const LITS[] = {"\"a\"",    "\"ab\"",     "\"abc\"", "\"x\"",  "\"{\\\"\"",
                                   "\"name\"", "\"\\\": \"", "\"é\"",   "\"12\"", "\"true\"",
                                   "\" \"",    "\"yx\"",     "\"ok\""};
static const char *const CLASSES[] = {"[a-c]", "[xy]", "[0-9]", "[^\"{}]", "[a-zé]", "[ ]"};

/* An expression of rule `r` of nr rules (references go to later rules
 * only, so nothing recurses but rule "rec", which is right-recursive). */
static void expr(tu_rng *rng, gbuf *b, int r, int nr, int depth)
{
    int items = (int)tu_range(rng, 1, 3);
    for (int i = 0; i < items; i++) {
        if (i)
            put(b, " ");
        int k = (int)tu_range(rng, 0, depth > 2 ? 3 : 6);
        char t[32];
        switch (k) {
        case 0:
        case 1: put(b, LITS[tu_range(rng, 0, sizeof LITS / sizeof *LITS - 1)]); break;
        case 2: put(b, CLASSES[tu_range(rng, 0, sizeof CLASSES / sizeof *CLASSES - 1)]); break;
        case 3:
            if (r + 1 < nr) {
                snprintf(t, sizeof t, "r%d", (int)tu_range(rng, r + 1, nr - 1));
                put(b, t);
            } else {
                put(b, "rec");
            }
            break;
        case 4:
            put(b, "(");
            expr(rng, b, r, nr, depth + 1);
            put(b, " | ");
            expr(rng, b, r, nr, depth + 1);
            put(b, ")");
            break;
        default: {
            static const char *const qs[] = {"*", "+", "?", "{1,3}", "{0,2}", "{2}"};
            put(b, "(");
            expr(rng, b, r, nr, depth + 1);
            put(b, ")");
            put(b, qs[tu_range(rng, 0, 5)]);
        }
        }
    }
}

static void random_gbnf(tu_rng *rng, gbuf *b)
{
    b->n = 0;
    b->s[0] = 0;
    int nr = (int)tu_range(rng, 1, 4);
    for (int r = 0; r < nr; r++) {
        char t[32];
        snprintf(t, sizeof t, r ? "r%d ::= " : "root ::= ", r);
        put(b, t);
        expr(rng, b, r, nr, 0);
        put(b, "\n");
    }
    put(b, "rec ::= \"(\" rec \")\" | \"x\" | \"ab\"\n");
}

static const char *const SCHEMAS[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":4},"
    "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":3}",
    "{\"enum\":[\"abc\",\"ab\",12,true,null]}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":"
    "\"array\",\"items\":{\"type\":\"string\",\"maxLength\":2},\"maxItems\":2}},"
    "\"additionalProperties\":false}",
    "{\"type\":\"string\",\"pattern\":\"^(ab|x)+c?$\"}",
};

/* Structural tags: the triggers are pieces pick() offers a waiting
 * grammar, each begins two tags (so the text after a trigger is not all
 * forced), and the bodies are schemas or small GBNF grammars. */
static const char *const TAG_TRIGGERS[] = {"ab", "{\""};
static const sift_structural_tag TAGS[] = {
    {"ab(", NULL, "root ::= [xy]+ | \"ok\"", ")"},
    {"ab=", "{\"type\":\"integer\"}", NULL, ";"},
    {"{\"name\": \"", NULL, "root ::= [a-c]{1,3}", "\"}"},
    {"{\"ok\"", "{\"enum\":[true,12]}", NULL, ""},
};

/* Regular expressions: alternatives of random atoms with quantifiers. */
static const char *const REGEX_ATOMS[] = {"a", "ab",     "x",  "[xy]",   "[0-9]", "\\d",
                                          "é", "(ab|x)", "\"", "[^a-x]", ".",     "\\{"};
static const char *const REGEX_OPS[] = {"", "", "*", "+", "?", "{1,3}", "{2}", "*?"};

static void random_regex(tu_rng *rng, gbuf *b)
{
    b->n = 0;
    b->s[0] = 0;
    int alts = (int)tu_range(rng, 1, 3);
    for (int a = 0; a < alts; a++) {
        if (a)
            put(b, "|");
        int items = (int)tu_range(rng, 1, 4);
        for (int i = 0; i < items; i++) {
            put(b, REGEX_ATOMS[tu_range(rng, 0, sizeof REGEX_ATOMS / sizeof *REGEX_ATOMS - 1)]);
            put(b, REGEX_OPS[tu_range(rng, 0, sizeof REGEX_OPS / sizeof *REGEX_OPS - 1)]);
        }
    }
}

/* Choices: a random subset of strings that share prefixes with each
 * other and with the pieces (the empty string and a repeat included). */
static const char *const CHOICES[] = {"ab",  "abc",  "a",  "",   "x", "xy", "true",
                                      "tru", "name", "na", "12", "é", "ab", "{\"ok\"}"};

enum { FAM_GBNF, FAM_SCHEMA, FAM_LAZY, FAM_TAGS, FAM_REGEX, FAM_CHOICES, FAM_N };
static const char *const FAM_NAMES[] = {"gbnf", "schema", "lazy", "tags", "regex", "choices"};

/* Families whose grammars wait for a trigger before they constrain. */
static int lazy_family(int fam)
{
    return fam == FAM_LAZY || fam == FAM_TAGS;
}

static void report_ops(const char *property, int fam, long long n)
{
    printf("check_serve: %s, %s: %lld operations\n", property, FAM_NAMES[fam], n);
    fflush(stdout);
}

/* A random grammar of family fam with a history of `hist` entries (and,
 * sometimes, tiny matcher caches, so that rebuilds happen under the
 * history). */
static sift_grammar *random_grammar(tu_rng *rng, int fam, int32_t hist)
{
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_rollback_tokens = hist;
    sift_grammar *g = NULL;
    sift_error err;
    if (fam == FAM_TAGS) {
        /* two to four tags, both triggers always begun by one */
        sift_structural_tag t[4];
        size_t n = 0;
        for (size_t i = 0; i < 4; i++)
            if (i == 0 || i == 2 || tu_range(rng, 0, 1))
                t[n++] = TAGS[i];
        sift_json_schema_params sp;
        sift_json_schema_params_init(&sp);
        sp.whitespace = SIFT_JSON_WS_COMPACT;
        ck_assert_msg(sift_grammar_from_structural_tags(&g, t, n, TAG_TRIGGERS, 2, voc, &sp, &gp,
                                                        &err) == SIFT_OK,
                      "%s", err.message);
    } else if (fam == FAM_REGEX) {
        gbuf b;
        random_regex(rng, &b);
        ck_assert_msg(sift_grammar_from_regex(&g, b.s, b.n, voc, &gp, &err) == SIFT_OK, "%s: %s",
                      b.s, err.message);
    } else if (fam == FAM_CHOICES) {
        const char *ch[sizeof CHOICES / sizeof *CHOICES];
        size_t n = 0;
        for (size_t i = 0; i < sizeof CHOICES / sizeof *CHOICES; i++)
            if (tu_range(rng, 0, 2) == 0)
                ch[n++] = CHOICES[i];
        if (!n)
            ch[n++] = CHOICES[tu_range(rng, 0, sizeof CHOICES / sizeof *CHOICES - 1)];
        ck_assert_msg(sift_grammar_from_choices(&g, ch, NULL, n, voc, &gp, &err) == SIFT_OK, "%s",
                      err.message);
    } else if (fam == FAM_SCHEMA) {
        const char *sc = SCHEMAS[tu_range(rng, 0, sizeof SCHEMAS / sizeof *SCHEMAS - 1)];
        sift_json_schema_params sp;
        sift_json_schema_params_init(&sp);
        sp.whitespace = tu_range(rng, 0, 1) ? SIFT_JSON_WS_FLEXIBLE : SIFT_JSON_WS_COMPACT;
        sp.max_whitespace = 2;
        ck_assert_msg(sift_grammar_from_json_schema(&g, sc, strlen(sc), voc, &sp, &gp, &err) ==
                          SIFT_OK,
                      "%s: %s", sc, err.message);
    } else {
        gbuf b;
        random_gbnf(rng, &b);
        ck_assert_msg(sift_grammar_new(&g, b.s, b.n, voc, &gp, &err) == SIFT_OK, "%s\n%s", b.s,
                      err.message);
        if (fam == FAM_LAZY) {
            static const char *const words[] = {"ab", "{\""};
            static const char *const pats[] = {"x+y"};
            int32_t tt[1] = {SPECIAL};
            sift_lazy_params lp;
            sift_lazy_params_init(&lp);
            lp.words = words;
            lp.n_words = (size_t)tu_range(rng, 0, 2);
            lp.patterns = pats;
            lp.n_patterns = (size_t)tu_range(rng, 0, 1);
            lp.tokens = tt;
            lp.n_tokens = lp.n_words + lp.n_patterns == 0 ? 1 : (size_t)tu_range(rng, 0, 1);
            lp.max_window = 64;
            ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_OK);
        }
    }
    if (tu_range(rng, 0, 3) == 0)
        sift__grammar_set_soft_limits(g, 48, 6, 256);
    return g;
}

/* A token to try: mostly one the grammar allows now (from its mask),
 * sometimes any token, and for a waiting lazy grammar often a piece of
 * a trigger. -1 when the mask is empty and no random pick was made. */
static int32_t pick(tu_rng *rng, sift_grammar *g)
{
    static const char *const hints[] = {"a", "b", "ab", "x", "y", "{\"", "xy"};
    if (!sift_grammar_is_triggered(g) && tu_range(rng, 0, 1))
        return tok_of(hints[tu_range(rng, 0, 6)]);
    if (tu_range(rng, 0, 9) == 0)
        return (int32_t)tu_range(rng, 0, V - 1);
    uint32_t m[8];
    ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, NW, NULL), SIFT_OK);
    int32_t ids[256];
    int n = 0;
    for (int32_t t = 0; t < V; t++)
        if (m[t >> 5] >> (t & 31) & 1)
            ids[n++] = t;
    if (!n)
        return -1;
    /* end-of-generation now and then, not every time it is allowed */
    int32_t t = ids[tu_range(rng, 0, n - 1)];
    if (t == EOS && n > 1 && tu_range(rng, 0, 2))
        t = ids[tu_range(rng, 0, n - 2)];
    return t;
}

/* A fresh copy of `pristine` (in its initial state) fed toks[0..n). */
static sift_grammar *fresh_fed(const sift_grammar *pristine, const int32_t *toks, size_t n)
{
    sift_grammar *f;
    ck_assert_int_eq(sift_grammar_clone(pristine, &f, NULL), SIFT_OK);
    for (size_t i = 0; i < n; i++) {
        sift_error err;
        ck_assert_msg(sift_grammar_accept_token(f, toks[i], &err) == SIFT_OK,
                      "refeeding token %zu (%d): %s", i, (int)toks[i], err.message);
    }
    return f;
}

static void assert_same_state(sift_grammar *a, sift_grammar *b, const char *what)
{
    ck_assert_msg(sift__grammar_state_digest(a) == sift__grammar_state_digest(b),
                  "%s: state digests differ", what);
    ck_assert_int_eq(sift_grammar_is_terminated(a), sift_grammar_is_terminated(b));
    ck_assert_int_eq(sift_grammar_is_triggered(a), sift_grammar_is_triggered(b));
    ck_assert_int_eq(sift_grammar_is_complete(a), sift_grammar_is_complete(b));
    uint32_t ma[8], mb[8];
    ck_assert_int_eq(sift_grammar_fill_bitmask(a, ma, NW, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_fill_bitmask(b, mb, NW, NULL), SIFT_OK);
    ck_assert_msg(!memcmp(ma, mb, NW * sizeof *ma), "%s: masks differ", what);
}

/* ------------------------------------------------------------------ */
/* Rollback                                                            */
/* ------------------------------------------------------------------ */

START_TEST(test_a_rolled_back_grammar_equals_a_fresh_one_fed_the_surviving_tokens)
{
    tu_rng rng = {0x5e7e0001ull + (uint64_t)_i * 7919};
    long nc = cases(40);
    long long ops0 = ops;
    long rollbacks = 0, across_trigger = 0, across_eog = 0;
    for (long c = 0; c < nc; c++) {
        int32_t H = (int32_t)tu_range(&rng, 1, 8);
        sift_grammar *g = random_grammar(&rng, _i, H);
        sift_grammar *pristine;
        ck_assert_int_eq(sift_grammar_clone(g, &pristine, NULL), SIFT_OK);
        int32_t toks[64];
        size_t n = 0, dep = 0; /* the model of the history's depth */
        for (int op = 0; op < 40; op++) {
            size_t depth = sift_grammar_rollback_depth(g);
            ck_assert_uint_eq(depth, dep);
            int32_t t = sift_grammar_is_terminated(g) ? -1 : pick(&rng, g);
            if (t < 0 || n == 64 || tu_range(&rng, 0, 3) == 0) {
                /* roll back, sometimes past the history */
                size_t k = (size_t)tu_range(&rng, 0, (int64_t)depth + 1);
                uint64_t d0 = sift__grammar_state_digest(g);
                sift_error err;
                int trig = sift_grammar_is_triggered(g), term = sift_grammar_is_terminated(g);
                sift_status s = sift_grammar_rollback(g, k, &err);
                ops++;
                if (k > depth) {
                    ck_assert_int_eq(s, SIFT_E_STATE);
                    ck_assert(strstr(err.message, "cannot roll back") != NULL);
                    ck_assert_uint_eq(sift__grammar_state_digest(g), d0);
                    continue;
                }
                ck_assert_int_eq(s, SIFT_OK);
                n -= k;
                dep -= k;
                rollbacks += k > 0;
                across_trigger += trig && !sift_grammar_is_triggered(g);
                across_eog += term && !sift_grammar_is_terminated(g);
            } else {
                uint64_t d0 = sift__grammar_state_digest(g);
                sift_status s = sift_grammar_accept_token(g, t, NULL);
                ops++;
                if (s != SIFT_OK) {
                    ck_assert_uint_eq(sift__grammar_state_digest(g), d0);
                    continue;
                }
                toks[n++] = t;
                dep += dep < (size_t)H;
            }
            sift_grammar *f = fresh_fed(pristine, toks, n);
            assert_same_state(g, f, "after rollback");
            sift_grammar_free(f);
        }
        sift_grammar_free(pristine);
        sift_grammar_free(g);
    }
    report_ops("rollback", _i, ops - ops0);
    /* the runs reached the cases they are about */
    ck_assert_int_gt(rollbacks, nc);
    if (lazy_family(_i))
        ck_assert_int_gt(across_trigger, 0);
    if (_i != FAM_LAZY)
        ck_assert_int_gt(across_eog, 0);
}
END_TEST

START_TEST(test_a_clone_rolls_back_like_its_original)
{
    tu_rng rng = {0xc10e};
    for (int fam = 0; fam < FAM_N; fam++) {
        sift_grammar *g = random_grammar(&rng, fam, 6);
        for (int i = 0; i < 10; i++) {
            int32_t t = pick(&rng, g);
            if (t >= 0 && !sift_grammar_is_terminated(g))
                if (sift_grammar_accept_token(g, t, NULL) != SIFT_OK) {
                }
        }
        sift_grammar *c;
        ck_assert_int_eq(sift_grammar_clone(g, &c, NULL), SIFT_OK);
        size_t d = sift_grammar_rollback_depth(g);
        ck_assert_uint_eq(sift_grammar_rollback_depth(c), d);
        for (size_t k = 0; k < d; k++) {
            ck_assert_int_eq(sift_grammar_rollback(g, 1, NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_rollback(c, 1, NULL), SIFT_OK);
            assert_same_state(g, c, "clone");
        }
        sift_grammar_free(c);
        sift_grammar_free(g);
    }
}
END_TEST

START_TEST(test_a_rollback_across_the_trigger_returns_the_grammar_to_waiting)
{
    const char *gt = "root ::= \"ab\" [xy]+";
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_rollback_tokens = 4;
    sift_grammar *g;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, &gp, NULL), SIFT_OK);
    static const char *const words[] = {"ab"};
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = words;
    lp.n_words = 1;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("c"), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("a"), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("b"), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("x"), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_rollback(g, 2, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    /* waiting again: "q" passes, and "b" after "a" fires the trigger */
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("q"), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    ck_assert_int_eq(sift_grammar_rollback(g, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("b"), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_waiting_grammar_rolls_back_across_its_compacted_text)
{
    /* a window of 64 bytes: the text buffer compacts every ~100 bytes,
     * and the searched pattern moves its resume point at every "x" */
    const char *gt = "root ::= \"y\"";
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_rollback_tokens = 16;
    sift_grammar *g;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, &gp, NULL), SIFT_OK);
    static const char *const words[] = {"{\""};
    static const char *const pats[] = {"x+y", "(?<=q)b\\b"};
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = words;
    lp.n_words = 1;
    lp.patterns = pats;
    lp.n_patterns = 2;
    lp.max_window = 64;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
    sift_grammar *pristine;
    ck_assert_int_eq(sift_grammar_clone(g, &pristine, NULL), SIFT_OK);
    static const char *const alpha[] = {"a", "q", "x", "xy", "ab", "c", " ", "{", "abc"};
    tu_rng rng = {0xc0ac7};
    int32_t toks[1200];
    size_t n = 0, dep = 0;
    for (int op = 0; op < 1500 && n < 1200; op++) {
        if (tu_range(&rng, 0, 9) == 0 && dep) {
            size_t k = (size_t)tu_range(&rng, 1, (int64_t)dep);
            ck_assert_int_eq(sift_grammar_rollback(g, k, NULL), SIFT_OK);
            n -= k;
            dep -= k;
            sift_grammar *f = fresh_fed(pristine, toks, n);
            assert_same_state(g, f, "after a rollback over compacted text");
            sift_grammar_free(f);
            continue;
        }
        /* "xy" and "{" "\"" would fire; keep waiting */
        int32_t t = tok_of(alpha[tu_range(&rng, 0, 8)]);
        if (t == tok_of("xy") || t == tok_of("{"))
            t = tok_of("a");
        ck_assert_int_eq(sift_grammar_accept_token(g, t, NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
        toks[n++] = t;
        dep += dep < 16;
    }
    sift_grammar_free(pristine);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_rollback_past_the_history_is_refused_and_changes_nothing)
{
    const char *gt = "root ::= [a-c]+";
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_rollback_tokens = 2;
    sift_grammar *g;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, &gp, NULL), SIFT_OK);
    sift_error err;
    ck_assert_int_eq(sift_grammar_rollback(g, 1, &err), SIFT_E_STATE);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("a"), NULL), SIFT_OK);
    ck_assert_uint_eq(sift_grammar_rollback_depth(g), 2);
    uint64_t d = sift__grammar_state_digest(g);
    ck_assert_int_eq(sift_grammar_rollback(g, 3, &err), SIFT_E_STATE);
    ck_assert_str_eq(err.message, "cannot roll back 3 tokens: the grammar's history holds 2 (of "
                                  "max_rollback_tokens = 2)");
    ck_assert_uint_eq(sift__grammar_state_digest(g), d);
    ck_assert_int_eq(sift_grammar_rollback(g, 0, &err), SIFT_OK);
    /* reset empties the history */
    sift_grammar_reset(g);
    ck_assert_uint_eq(sift_grammar_rollback_depth(g), 0);
    ck_assert_int_eq(sift_grammar_rollback(g, 1, &err), SIFT_E_STATE);
    ck_assert_int_eq(sift_grammar_rollback(NULL, 1, &err), SIFT_E_ARG);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_grammar_without_history_or_with_an_old_params_struct_cannot_roll_back)
{
    const char *gt = "root ::= [a-c]+";
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    ck_assert_int_eq(gp.max_rollback_tokens, 0);
    gp.max_rollback_tokens = 5;
    /* a caller compiled before the field existed: its default, 0 */
    gp.struct_size = (uint32_t)offsetof(sift_grammar_params, max_rollback_tokens);
    sift_grammar *g;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, &gp, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("a"), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_rollback(g, 1, NULL), SIFT_E_STATE);
    sift_grammar_free(g);
    sift_grammar_params_init(&gp);
    sift_error err;
    gp.max_rollback_tokens = -1;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, &gp, &err), SIFT_E_ARG);
    ck_assert(strstr(err.message, "max_rollback_tokens") != NULL);
    gp.max_rollback_tokens = SIFT_GRAMMAR_MAX_ROLLBACK + 1;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, &gp, &err), SIFT_E_ARG);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Allocation                                                          */
/* ------------------------------------------------------------------ */

static long n_allocs;
static void *count_alloc(void *u, size_t n)
{
    (void)u;
    n_allocs++;
    return malloc(n);
}
static void *count_realloc(void *u, void *p, size_t old, size_t n)
{
    (void)u;
    (void)old;
    n_allocs++;
    return realloc(p, n);
}
static void count_free(void *u, void *p)
{
    (void)u;
    free(p);
}

START_TEST(test_accept_and_rollback_allocate_nothing_once_the_states_are_known)
{
    sift_allocator al = {sizeof al, count_alloc, count_free, NULL, count_realloc};
    const char *gt = "root ::= \"ab\" ( [a-c] | \"xy\" )* \"x\"";
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.allocator = &al;
    gp.max_rollback_tokens = 8;
    for (int lazy = 0; lazy < 2; lazy++) {
        sift_grammar *g;
        ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, &gp, NULL), SIFT_OK);
        if (lazy) {
            static const char *const words[] = {"ab"};
            static const char *const pats[] = {"x+y"};
            sift_lazy_params lp;
            sift_lazy_params_init(&lp);
            lp.words = words;
            lp.n_words = 1;
            lp.patterns = pats;
            lp.n_patterns = 1;
            lp.max_window = 64;
            ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
        }
        const int32_t seq[] = {tok_of("q"),  tok_of("a"), tok_of("b"), tok_of("c"),
                               tok_of("xy"), tok_of("a"), tok_of("x")};
        for (int round = 0; round < 3; round++) {
            if (round == 2)
                n_allocs = 0;
            /* long waits before the trigger, then the grammar, back and forth */
            for (int rep = 0; rep < 40 * lazy; rep++)
                ck_assert_int_eq(sift_grammar_accept_token(g, seq[0], NULL), SIFT_OK);
            for (size_t i = 1; i < sizeof seq / sizeof *seq; i++)
                ck_assert_int_eq(sift_grammar_accept_token(g, seq[i], NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_rollback(g, 5, NULL), SIFT_OK);
            for (size_t i = 2; i < sizeof seq / sizeof *seq; i++)
                ck_assert_int_eq(sift_grammar_accept_token(g, seq[i], NULL), SIFT_OK);
            sift_grammar_reset(g);
        }
        ck_assert_int_eq(n_allocs, 0);
        sift_grammar_free(g);
    }
}
END_TEST

/* Fails allocation number fail_at (from 1; 0 = none) and counts live
 * blocks. */
static long fa_n, fa_at, fa_live;
static void *fa_alloc(void *u, size_t n)
{
    (void)u;
    if (++fa_n == fa_at)
        return NULL;
    fa_live++;
    return malloc(n);
}
static void fa_free(void *u, void *p)
{
    (void)u;
    fa_live -= p != NULL;
    free(p);
}

START_TEST(test_failing_the_nth_allocation_of_a_grammar_with_history_is_clean_for_every_n)
{
    sift_allocator al = {sizeof al, fa_alloc, fa_free, NULL, NULL};
    const char *gt = "root ::= \"ab\" [xy]+";
    static const char *const words[] = {"ab"};
    static const char *const pats[] = {"x+y"};
    int done = 0;
    for (long at = 1; at < 5000 && !done; at++) {
        fa_n = 0;
        fa_at = at;
        fa_live = 0;
        sift_grammar_params gp;
        sift_grammar_params_init(&gp);
        gp.allocator = &al;
        gp.max_rollback_tokens = 4;
        sift_grammar *g = NULL, *c = NULL;
        sift_status s = sift_grammar_new(&g, gt, strlen(gt), voc, &gp, NULL);
        if (!s) {
            sift_lazy_params lp;
            sift_lazy_params_init(&lp);
            lp.words = words;
            lp.n_words = 1;
            lp.patterns = pats;
            lp.n_patterns = 1;
            s = sift_grammar_set_lazy(g, &lp, NULL);
        }
        const char *seq[] = {"q", "a", "b", "x", "y"};
        for (size_t i = 0; i < 5 && !s; i++) {
            uint64_t d = sift__grammar_state_digest(g);
            s = sift_grammar_accept_token(g, tok_of(seq[i]), NULL);
            if (s)
                ck_assert_uint_eq(sift__grammar_state_digest(g), d);
        }
        if (!s)
            s = sift_grammar_clone(g, &c, NULL);
        if (!s) {
            ck_assert_int_eq(sift_grammar_rollback(c, 4, NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_rollback(g, 4, NULL), SIFT_OK);
            ck_assert_uint_eq(sift__grammar_state_digest(c), sift__grammar_state_digest(g));
            done = 1;
        } else {
            ck_assert_int_eq(s, SIFT_E_NOMEM);
        }
        sift_grammar_free(c);
        sift_grammar_free(g);
        ck_assert_int_eq(fa_live, 0);
    }
    ck_assert(done);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Termination                                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_a_terminated_grammar_accepts_nothing_until_rolled_back)
{
    const char *gt = "root ::= \"ab\" \"c\"?";
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_rollback_tokens = 4;
    sift_grammar *g;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, &gp, NULL), SIFT_OK);
    sift_error err;
    /* not complete yet: end-of-generation is rejected, not terminating */
    ck_assert_int_eq(sift_grammar_accept_token(g, EOS, &err), SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(sift_grammar_is_terminated(g), 0);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("ab"), NULL), SIFT_OK);
    uint32_t m[8];
    ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, NW, NULL), SIFT_OK);
    ck_assert(m[EOS >> 5] >> (EOS & 31) & 1); /* may end: EOG allowed */
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    ck_assert_int_eq(sift_grammar_is_terminated(g), 0);
    /* the slice path's allowed set, cached for this state: EOG among it */
    const int32_t *few;
    ck_assert_uint_gt(sift__grammar_small_set(g, &few), 0);
    ck_assert_int_eq(sift_grammar_accept_token(g, EOS, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_terminated(g), 1);
    /* terminated: nothing allowed, though the state (and so the cache) is
     * the one before the end-of-generation token */
    ck_assert_uint_eq(sift__grammar_small_set(g, &few), 0);
    uint64_t d = sift__grammar_state_digest(g);
    int32_t c = tok_of("c");
    ck_assert_int_eq(sift_grammar_accept_token(g, c, &err), SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(err.index, c);
    ck_assert(strstr(err.message, "terminated") != NULL);
    ck_assert_int_eq(sift_grammar_accept_bytes(g, "c", 1, &err), SIFT_E_GRAMMAR_REJECT);
    int ok = 1;
    ck_assert_int_eq(sift_grammar_accepts_token(g, EOS, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0);
    ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, NW, NULL), SIFT_OK);
    for (size_t w = 0; w < NW; w++)
        ck_assert_uint_eq(m[w], 0);
    float row[256];
    for (int32_t t = 0; t < V; t++)
        row[t] = 0.0f;
    ck_assert_int_eq(sift_grammar_ban(g, row, V, &err), SIFT_E_GRAMMAR_DEAD);
    ck_assert(strstr(err.message, "terminated") != NULL);
    size_t nb = 9;
    char fb[8];
    ck_assert_int_eq(sift_grammar_forced_bytes(g, fb, sizeof fb, &nb, NULL, 0, NULL, NULL),
                     SIFT_OK);
    ck_assert_uint_eq(nb, 0);
    ck_assert_uint_eq(sift__grammar_state_digest(g), d);
    /* the rollback across the end-of-generation token ends it */
    ck_assert_int_eq(sift_grammar_rollback(g, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_terminated(g), 0);
    ck_assert_int_eq(sift_grammar_accept_token(g, c, NULL), SIFT_OK);
    sift_grammar_reset(g);
    ck_assert_int_eq(sift_grammar_is_terminated(g), 0);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_an_untriggered_lazy_grammar_terminates_on_end_of_generation)
{
    const char *gt = "root ::= \"x\"";
    sift_grammar *g;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, NULL, NULL), SIFT_OK);
    static const char *const words[] = {"ab"};
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = words;
    lp.n_words = 1;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("q"), NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, EOS, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_terminated(g), 1);
    uint32_t m[8];
    ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, NW, NULL), SIFT_OK);
    for (size_t w = 0; w < NW; w++)
        ck_assert_uint_eq(m[w], 0);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("q"), NULL), SIFT_E_GRAMMAR_REJECT);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_chain_sees_a_terminated_grammar_as_allowing_nothing)
{
    const char *gt = "root ::= \"ab\"";
    sift_grammar *g;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, NULL, NULL), SIFT_OK);
    sift_chain *c;
    ck_assert_int_eq(sift_chain_new(&c, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_grammar(c, g, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    float row[256];
    for (int32_t t = 0; t < V; t++)
        row[t] = (float)t / (float)V;
    int32_t tok;
    ck_assert_int_eq(sift_chain_sample(c, row, V, &tok, NULL), SIFT_OK);
    ck_assert_int_eq(tok, tok_of("ab"));
    ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(c, row, V, &tok, NULL), SIFT_OK);
    ck_assert_int_eq(tok, EOS);
    ck_assert_int_eq(sift_chain_accept(c, EOS, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_terminated(g), 1);
    sift_error err;
    ck_assert_int_eq(sift_chain_sample(c, row, V, &tok, &err), SIFT_E_GRAMMAR_DEAD);
    ck_assert(strstr(err.message, "terminated") != NULL);
    ck_assert_int_eq(sift_chain_accept(c, EOS, &err), SIFT_E_GRAMMAR_REJECT);
    ck_assert(strstr(err.message, "terminated") != NULL);
    sift_chain_reset(c);
    ck_assert_int_eq(sift_grammar_is_terminated(g), 0);
    ck_assert_int_eq(sift_chain_sample(c, row, V, &tok, NULL), SIFT_OK);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Drafts                                                              */
/* ------------------------------------------------------------------ */

/* A draft from g's state: a walk of allowed tokens, sometimes with one
 * token replaced by any token. */
static size_t random_draft(tu_rng *rng, sift_grammar *g, int32_t *d, size_t cap)
{
    sift_grammar *c;
    ck_assert_int_eq(sift_grammar_clone(g, &c, NULL), SIFT_OK);
    size_t n = (size_t)tu_range(rng, 0, (int64_t)cap);
    size_t k = 0;
    for (; k < n; k++) {
        int32_t t = sift_grammar_is_terminated(c) ? -1 : pick(rng, c);
        if (t < 0)
            t = (int32_t)tu_range(rng, 0, V - 1);
        d[k] = t;
        if (sift_grammar_accept_token(c, t, NULL) != SIFT_OK) {
        }
    }
    if (k && tu_range(rng, 0, 2) == 0)
        d[tu_range(rng, 0, (int64_t)k - 1)] = (int32_t)tu_range(rng, 0, V - 1);
    sift_grammar_free(c);
    return k;
}

START_TEST(test_validate_and_draft_masks_equal_accepting_and_filling_on_a_clone)
{
    tu_rng rng = {0xd4af7ull + (uint64_t)_i * 31};
    long nc = cases(40);
    long long ops0 = ops;
    long partial = 0, full = 0;
    for (long cs = 0; cs < nc; cs++) {
        sift_grammar *g = random_grammar(&rng, _i, (int32_t)tu_range(&rng, 0, 4));
        for (int step = 0; step < 12; step++) {
            int32_t d[16];
            size_t n = random_draft(&rng, g, d, 16);
            uint64_t d0 = sift__grammar_state_digest(g);
            size_t depth = sift_grammar_rollback_depth(g);
            size_t ok = 99;
            ck_assert_int_eq(sift_grammar_validate_tokens(g, d, n, &ok, NULL), SIFT_OK);
            ck_assert_uint_eq(sift__grammar_state_digest(g), d0);
            uint32_t rows[17 * 8], want[17 * 8];
            memset(rows, 0xa5, sizeof rows);
            size_t ok2 = 99;
            ck_assert_int_eq(sift_grammar_fill_bitmask_draft(g, d, n, rows, NW, &ok2, NULL),
                             SIFT_OK);
            ops += 2; /* the validation and the fill */
            ck_assert_uint_eq(sift__grammar_state_digest(g), d0);
            ck_assert_uint_eq(sift_grammar_rollback_depth(g), depth);
            ck_assert_uint_eq(ok2, ok);
            /* the oracle: a clone, one accept and one fill per position */
            sift_grammar *c;
            ck_assert_int_eq(sift_grammar_clone(g, &c, NULL), SIFT_OK);
            size_t k = 0;
            memset(want, 0, sizeof want);
            for (;;) {
                ck_assert_int_eq(sift_grammar_fill_bitmask(c, want + k * NW, NW, NULL), SIFT_OK);
                if (k == n || sift_grammar_accept_token(c, d[k], NULL) != SIFT_OK)
                    break;
                k++;
            }
            ck_assert_uint_eq(ok, k);
            ck_assert_msg(!memcmp(rows, want, (n + 1) * NW * sizeof *rows),
                          "masks along the draft differ (ok %zu of %zu)", ok, n);
            partial += ok < n;
            full += n && ok == n;
            sift_grammar_free(c);
            /* move on: accept a prefix of the draft */
            for (size_t i = 0; i < ok && i < 3; i++, ops++)
                ck_assert_int_eq(sift_grammar_accept_token(g, d[i], NULL), SIFT_OK);
        }
        sift_grammar_free(g);
    }
    report_ops("drafts", _i, ops - ops0);
    ck_assert_int_gt(partial, 0);
    ck_assert_int_gt(full, 0);
}
END_TEST

START_TEST(test_draft_ids_out_of_range_are_refused_with_their_position)
{
    const char *gt = "root ::= [a-c]+";
    sift_grammar *g;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), voc, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g, tok_of("a"), NULL), SIFT_OK);
    uint64_t d0 = sift__grammar_state_digest(g);
    int32_t d[3] = {tok_of("b"), V, tok_of("c")};
    sift_error err;
    size_t ok = 7;
    ck_assert_int_eq(sift_grammar_validate_tokens(g, d, 3, &ok, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(err.index, 1);
    ck_assert_uint_eq(ok, 0);
    ck_assert_str_eq(err.message, "draft token 1 has id 118, outside [0, 118)");
    d[1] = -1;
    uint32_t rows[4 * 8];
    memset(rows, 0x5a, sizeof rows);
    ck_assert_int_eq(sift_grammar_fill_bitmask_draft(g, d, 3, rows, NW, &ok, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(err.index, 1);
    for (size_t w = 0; w < sizeof rows / sizeof *rows; w++)
        ck_assert_uint_eq(rows[w], 0x5a5a5a5au); /* checked before any row is written */
    ck_assert_uint_eq(sift__grammar_state_digest(g), d0);
    ck_assert_int_eq(sift_grammar_fill_bitmask_draft(g, d, 1, rows, NW - 1, &ok, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_grammar_validate_tokens(g, NULL, 2, &ok, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_grammar_validate_tokens(g, d, 1, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_grammar_validate_tokens(g, d, 0, &ok, &err), SIFT_OK);
    ck_assert_uint_eq(ok, 0);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_batch_fill_writes_only_the_rows_it_is_given)
{
    const char *gt[2] = {"root ::= [a-c]+", "root ::= \"x\" \"y\""};
    sift_grammar *g[3];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(sift_grammar_new(&g[i], gt[i], strlen(gt[i]), voc, NULL, NULL), SIFT_OK);
    g[2] = NULL;
    uint32_t m[5 * 8], one[8];
    memset(m, 0x33, sizeof m);
    int32_t rows[3] = {3, 0, 1};
    ck_assert_int_eq(sift_grammars_fill_bitmask_rows(g, 3, rows, m, 5, NW, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_fill_bitmask(g[0], one, NW, NULL), SIFT_OK);
    ck_assert(!memcmp(m + 3 * NW, one, NW * sizeof *one));
    ck_assert_int_eq(sift_grammar_fill_bitmask(g[1], one, NW, NULL), SIFT_OK);
    ck_assert(!memcmp(m + 0 * NW, one, NW * sizeof *one));
    for (size_t w = 0; w < NW; w++) {
        ck_assert_uint_eq(m[1 * NW + w], 0xffffffffu); /* the NULL grammar's row */
        ck_assert_uint_eq(m[2 * NW + w], 0x33333333u); /* untouched */
        ck_assert_uint_eq(m[4 * NW + w], 0x33333333u);
    }
    sift_error err;
    rows[2] = 5;
    memset(m, 0x33, sizeof m);
    ck_assert_int_eq(sift_grammars_fill_bitmask_rows(g, 3, rows, m, 5, NW, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 2);
    ck_assert_str_eq(err.message, "rows[2] = 5 is outside the mask's 5 rows");
    for (size_t w = 0; w < sizeof m / sizeof *m; w++)
        ck_assert_uint_eq(m[w], 0x33333333u);
    ck_assert_int_eq(sift_grammars_fill_bitmask_rows(g, 3, NULL, m, 5, NW, &err), SIFT_E_ARG);
    for (int i = 0; i < 2; i++)
        sift_grammar_free(g[i]);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Forced bytes                                                        */
/* ------------------------------------------------------------------ */

/* The oracle: while the grammar cannot end and exactly one byte value
 * is accepted by accept_bytes, that byte is forced. */
static size_t brute_forced(const sift_grammar *g, char *out, size_t cap)
{
    sift_grammar *c;
    ck_assert_int_eq(sift_grammar_clone(g, &c, NULL), SIFT_OK);
    size_t k = 0;
    while (k < cap && !sift_grammar_is_complete(c) && sift_grammar_is_triggered(c) &&
           !sift_grammar_is_terminated(c)) {
        int nb = 0, b1 = 0;
        for (int b = 0; b < 256 && nb < 2; b++) {
            sift_grammar *t;
            ck_assert_int_eq(sift_grammar_clone(c, &t, NULL), SIFT_OK);
            char ch = (char)b;
            if (sift_grammar_accept_bytes(t, &ch, 1, NULL) == SIFT_OK) {
                nb++;
                b1 = b;
            }
            sift_grammar_free(t);
        }
        if (nb != 1)
            break;
        char ch = (char)b1;
        ck_assert_int_eq(sift_grammar_accept_bytes(c, &ch, 1, NULL), SIFT_OK);
        out[k++] = ch;
    }
    sift_grammar_free(c);
    return k;
}

START_TEST(test_forced_bytes_are_exactly_what_every_continuation_starts_with)
{
    tu_rng rng = {0xf0ced + (uint64_t)_i};
    long nc = cases(30);
    long long ops0 = ops;
    long nonempty = 0, with_tokens = 0;
    for (long cs = 0; cs < nc; cs++) {
        sift_grammar *g = random_grammar(&rng, _i, 0);
        for (int step = 0; step < 10; step++) {
            char fb[64], want[64];
            int32_t ids[64];
            size_t nb = 99, nt = 99;
            uint64_t d0 = sift__grammar_state_digest(g);
            ck_assert_int_eq(sift_grammar_forced_bytes(g, fb, sizeof fb, &nb, ids, 64, &nt, NULL),
                             SIFT_OK);
            ops++;
            ck_assert_uint_eq(sift__grammar_state_digest(g), d0);
            size_t nw = brute_forced(g, want, sizeof want);
            ck_assert_uint_eq(nb, nw);
            ck_assert(!memcmp(fb, want, nb));
            nonempty += nb > 0;
            /* the tokens spell a prefix of the bytes and are accepted */
            sift_grammar *c;
            ck_assert_int_eq(sift_grammar_clone(g, &c, NULL), SIFT_OK);
            size_t at = 0;
            for (size_t i = 0; i < nt; i++) {
                const char *p;
                size_t l;
                ck_assert_int_eq(sift_vocab_piece(voc, ids[i], &p, &l, NULL), SIFT_OK);
                ck_assert(at + l <= nb && !memcmp(fb + at, p, l));
                at += l;
                ck_assert_int_eq(sift_grammar_accept_token(c, ids[i], NULL), SIFT_OK);
            }
            with_tokens += nt > 0;
            sift_grammar_free(c);
            int32_t t = sift_grammar_is_terminated(g) ? -1 : pick(&rng, g);
            if (t < 0 || t == EOS)
                break;
            if (sift_grammar_accept_token(g, t, NULL) != SIFT_OK) {
            }
            ops++;
        }
        sift_grammar_free(g);
    }
    report_ops("forced bytes", _i, ops - ops0);
    if (_i != FAM_LAZY) {
        ck_assert_int_gt(nonempty, 0);
        ck_assert_int_gt(with_tokens, 0);
    }
}
END_TEST

START_TEST(test_forced_bytes_of_a_tool_call_after_its_brace)
{
    const char *gt = "root ::= \"{\" ws \"\\\"name\\\": \\\"\" [a-z]+ \"\\\"}\"\nws ::= \"\"";
    sift_grammar *g;
    sift_error err;
    ck_assert_msg(sift_grammar_new(&g, gt, strlen(gt), voc, NULL, &err) == SIFT_OK, "%s",
                  err.message);
    char fb[32];
    int32_t ids[8];
    size_t nb, nt;
    ck_assert_int_eq(sift_grammar_forced_bytes(g, fb, sizeof fb, &nb, ids, 8, &nt, NULL), SIFT_OK);
    ck_assert_uint_eq(nb, 10);
    ck_assert(!memcmp(fb, "{\"name\": \"", 10));
    /* longest tokens: {" then name then ": " */
    ck_assert_uint_eq(nt, 3);
    ck_assert_int_eq(ids[0], tok_of("{\""));
    ck_assert_int_eq(ids[1], tok_of("name"));
    ck_assert_int_eq(ids[2], tok_of("\": \""));
    /* a short buffer takes a prefix; no buffer, no bytes */
    ck_assert_int_eq(sift_grammar_forced_bytes(g, fb, 3, &nb, NULL, 0, NULL, NULL), SIFT_OK);
    ck_assert_uint_eq(nb, 3);
    ck_assert_int_eq(sift_grammar_forced_bytes(g, NULL, 0, &nb, NULL, 0, NULL, NULL), SIFT_OK);
    ck_assert_uint_eq(nb, 0);
    ck_assert_int_eq(sift_grammar_forced_bytes(g, fb, 3, NULL, NULL, 0, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_grammar_forced_bytes(g, fb, 3, &nb, NULL, 2, &nt, &err), SIFT_E_ARG);
    sift_grammar_free(g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("rollback");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_a_rolled_back_grammar_equals_a_fresh_one_fed_the_surviving_tokens,
                        0, FAM_N);
    tcase_add_test(tc, test_a_clone_rolls_back_like_its_original);
    tcase_add_test(tc, test_a_rollback_across_the_trigger_returns_the_grammar_to_waiting);
    tcase_add_test(tc, test_a_waiting_grammar_rolls_back_across_its_compacted_text);
    tcase_add_test(tc, test_rollback_past_the_history_is_refused_and_changes_nothing);
    tcase_add_test(tc,
                   test_a_grammar_without_history_or_with_an_old_params_struct_cannot_roll_back);
    tcase_add_test(tc, test_accept_and_rollback_allocate_nothing_once_the_states_are_known);
    tcase_add_test(tc,
                   test_failing_the_nth_allocation_of_a_grammar_with_history_is_clean_for_every_n);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    tc = tcase_create("termination");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_a_terminated_grammar_accepts_nothing_until_rolled_back);
    tcase_add_test(tc, test_an_untriggered_lazy_grammar_terminates_on_end_of_generation);
    tcase_add_test(tc, test_a_chain_sees_a_terminated_grammar_as_allowing_nothing);
    suite_add_tcase(s, tc);
    tc = tcase_create("drafts");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_validate_and_draft_masks_equal_accepting_and_filling_on_a_clone, 0,
                        FAM_N);
    tcase_add_test(tc, test_draft_ids_out_of_range_are_refused_with_their_position);
    tcase_add_test(tc, test_batch_fill_writes_only_the_rows_it_is_given);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    tc = tcase_create("forced");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_forced_bytes_are_exactly_what_every_continuation_starts_with, 0,
                        FAM_N);
    tcase_add_test(tc, test_forced_bytes_of_a_tool_call_after_its_brace);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

/* SIFT_SERVE_MIN_OPS, read before the run. */
static long long min_total;

/* After the run: the total of operations, and the minimum held to. */
static int judge_total(SRunner *sr, int failed)
{
    /* forked tests count in their own processes: the total is known only
     * without fork, and a minimum needs it */
    int forked = srunner_fork_status(sr) == CK_FORK;
    if (!forked)
        printf("check_serve: %lld operations in all\n", ops);
    if (min_total > 0 && forked) {
        fprintf(stderr, "check_serve: SIFT_SERVE_MIN_OPS=%lld needs CK_FORK=no to count\n",
                min_total);
        failed++;
    } else if (ops < min_total) {
        fprintf(stderr, "check_serve: %lld operations, fewer than SIFT_SERVE_MIN_OPS=%lld\n", ops,
                min_total);
        failed++;
    }
    return failed;
}

Suite *tu_suite(void)
{
    if (min_ops(&min_total))
        return NULL;
    tu_harness_at_end(judge_total);
    return suite();
}

/*
 * check_lazy.c - lazy grammars (sift_grammar_set_lazy): each trigger kind
 * end to end through a chain in constrain and check modes, the T-05 rule
 * (a token carrying the trigger plus extra bytes), the capture-group
 * rule, token-id triggers on special tokens, prompt tokens that never
 * trigger (T-07), clone and reset, the analyzer's dynamic k, exactness
 * against a naive oracle, and allocation failure at every N.
 *
 * The vocabulary is synthetic (pieces chosen so that "<tool_call>" can be
 * split across tokens); the grammar is grammar/tool_call.gbnf, read
 * through SIFT_SRCDIR. The grammar and chain digests and the RNG state
 * are read through internal helpers to prove "nothing changed" bitwise.
 */
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
/* Fixture: vocabulary and grammars                                    */
/* ------------------------------------------------------------------ */

enum {
    T_EOS = 0,
    T_TC_SPECIAL, /* "<tool_call>", a special token */
    T_HELLO,
    T_WORLD,
    T_LT_TOOL,   /* "<tool" */
    T_CALL,      /* "_call>" */
    T_LBRACE,    /* "{" */
    T_NAME,      /* "\"name\"" */
    T_COLON,     /* ":" */
    T_SPACE,     /* " " */
    T_F,         /* "\"f\"" */
    T_COMMA,     /* "," */
    T_ARGS,      /* "\"arguments\"" */
    T_EMPTY_OBJ, /* "{}" */
    T_RBRACE,    /* "}" */
    T_NL,        /* "\n" */
    T_END_TAG,   /* "</tool_call>" */
    T_CALL_OK,   /* "_call>{": trigger end plus bytes the grammar takes */
    T_CALL_BAD,  /* "_call>x": trigger end plus bytes it rejects */
    T_TC_NL,     /* "<tool_call>\n", plain text */
    T_LETTERS    /* then 'a'..'z' */
};
#define V_SIZE (T_LETTERS + 26 + 18) /* padded with "0".."9", "!"...: 64 */

static const char *const base_pieces[T_LETTERS] = {"<eos>",
                                                   "<tool_call>",
                                                   "Hello",
                                                   " world",
                                                   "<tool",
                                                   "_call>",
                                                   "{",
                                                   "\"name\"",
                                                   ":",
                                                   " ",
                                                   "\"f\"",
                                                   ",",
                                                   "\"arguments\"",
                                                   "{}",
                                                   "}",
                                                   "\n",
                                                   "</tool_call>",
                                                   "_call>{",
                                                   "_call>x",
                                                   "<tool_call>\n"};

static sift_vocab *make_vocab(void)
{
    static char extra[V_SIZE][4];
    const char *p[V_SIZE];
    size_t l[V_SIZE];
    for (int i = 0; i < V_SIZE; i++) {
        if (i < T_LETTERS) {
            p[i] = base_pieces[i];
        } else if (i < T_LETTERS + 26) {
            extra[i][0] = (char)('a' + i - T_LETTERS);
            p[i] = extra[i];
        } else {
            extra[i][0] = (char)('0' + (i - T_LETTERS - 26) % 10);
            extra[i][1] = (i - T_LETTERS - 26) >= 10 ? '!' : '\0';
            p[i] = extra[i];
        }
        l[i] = strlen(p[i]);
    }
    sift_vocab *v = NULL;
    ck_assert_int_eq(sift_vocab_new(&v, V_SIZE, p, l, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, T_EOS, SIFT_TOKEN_EOG | SIFT_TOKEN_SPECIAL, NULL),
                     SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, T_TC_SPECIAL, SIFT_TOKEN_SPECIAL, NULL), SIFT_OK);
    return v;
}

static char *read_file(const char *rel, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SIFT_SRCDIR, rel);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char *buf = malloc(1 << 16);
    ck_assert_ptr_nonnull(buf);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

/* A grammar over the fixture vocabulary: tool_call.gbnf (text = NULL) or
 * the given text; with `alloc` as its allocator. */
static sift_grammar *make_grammar(const char *text, const sift_allocator *alloc)
{
    sift_vocab *v = make_vocab();
    size_t len;
    char *buf = NULL;
    if (!text) {
        buf = read_file("grammar/tool_call.gbnf", &len);
        text = buf;
    } else {
        len = strlen(text);
    }
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.allocator = alloc;
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_msg(sift_grammar_new(&g, text, len, v, &gp, &err) == SIFT_OK, "%s", err.message);
    free(buf);
    sift_vocab_free(v);
    return g;
}

static const char *const tc_word[] = {"<tool_call>"};

static sift_grammar *lazy_word_grammar(void)
{
    sift_grammar *g = make_grammar(NULL, NULL);
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = tc_word;
    lp.n_words = 1;
    sift_error err;
    ck_assert_msg(sift_grammar_set_lazy(g, &lp, &err) == SIFT_OK, "%s", err.message);
    return g;
}

static sift_chain *chain_with(sift_grammar *g, int check_mode, uint64_t seed)
{
    sift_chain *c = tu_chain_new(seed, NULL);
    if (check_mode)
        ck_assert_int_eq(sift_chain_set_check_grammar(c, g, NULL), SIFT_OK);
    else
        ck_assert_int_eq(sift_chain_add_grammar(c, g, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, NULL), SIFT_OK);
    return c;
}

/* A row whose greedy choice is `best`, then `second`, the rest low. */
static void two_peaks(float *row, int32_t best, int32_t second)
{
    for (int i = 0; i < V_SIZE; i++)
        row[i] = -(float)i * 0.01f;
    row[best] = 10.0f;
    row[second] = 9.0f;
}

static void accept_all(sift_chain *c, const int32_t *toks, size_t n)
{
    sift_error err;
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(sift_chain_accept(c, toks[i], &err) == SIFT_OK, "token %zu: %s", i,
                      err.message);
}

/* The rest of a tool call after "<tool_call>". */
static const int32_t call_rest[] = {T_LBRACE, T_NAME,  T_COLON,     T_F,      T_COMMA,  T_ARGS,
                                    T_COLON,  T_SPACE, T_EMPTY_OBJ, T_RBRACE, T_END_TAG};

/* ------------------------------------------------------------------ */
/* Untriggered                                                          */
/* ------------------------------------------------------------------ */

START_TEST(test_untriggered_lazy_grammar_constrains_nothing)
{
    sift_grammar *g = lazy_word_grammar();
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    for (int32_t t = 0; t < V_SIZE; t++) {
        int ok = 0;
        ck_assert_int_eq(sift_grammar_accepts_token(g, t, &ok, NULL), SIFT_OK);
        ck_assert_int_eq(ok, 1);
    }
    float row[V_SIZE];
    two_peaks(row, T_HELLO, T_WORLD);
    ck_assert_int_eq(sift_grammar_ban(g, row, V_SIZE, NULL), SIFT_OK);
    for (int32_t t = 0; t < V_SIZE; t++)
        ck_assert(isfinite(row[t]));
    /* the same grammar, eager, bans "Hello" */
    sift_grammar *e = make_grammar(NULL, NULL);
    ck_assert_int_eq(sift_grammar_is_triggered(e), 1);
    ck_assert_int_eq(sift_grammar_ban(e, row, V_SIZE, NULL), SIFT_OK);
    ck_assert(row[T_HELLO] == -INFINITY);
    sift_grammar_free(e);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_untriggered_tokens_pass_freely_through_a_chain)
{
    for (int mode = 0; mode < 2; mode++) {
        sift_grammar *g = lazy_word_grammar();
        sift_chain *c = chain_with(g, mode, 1);
        float row[V_SIZE];
        int32_t tok = -1;
        for (int i = 0; i < 5; i++) {
            two_peaks(row, T_HELLO + (i & 1), T_LBRACE);
            ck_assert_int_eq(sift_chain_sample(c, row, V_SIZE, &tok, NULL), SIFT_OK);
            ck_assert_int_eq(tok, T_HELLO + (i & 1));
            ck_assert_int_eq(sift_chain_accept(c, tok, NULL), SIFT_OK);
        }
        ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
        sift_chain_free(c);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Trigger kinds                                                       */
/* ------------------------------------------------------------------ */

/* After triggering, "Hello" (the greedy pick) is banned or resampled
 * away and the grammar's choice "{" comes instead. */
static void assert_constrains(sift_chain *c)
{
    float row[V_SIZE];
    two_peaks(row, T_HELLO, T_LBRACE);
    int32_t tok = -1;
    sift_error err;
    ck_assert_msg(sift_chain_sample(c, row, V_SIZE, &tok, &err) == SIFT_OK, "%s", err.message);
    ck_assert_int_eq(tok, T_LBRACE);
}

START_TEST(test_a_trigger_word_split_across_tokens_wakes_the_grammar)
{
    for (int mode = 0; mode < 2; mode++) {
        sift_grammar *g = lazy_word_grammar();
        sift_chain *c = chain_with(g, mode, 2);
        const int32_t pre[] = {T_HELLO, T_LT_TOOL};
        accept_all(c, pre, N(pre));
        ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
        ck_assert_int_eq(sift_chain_accept(c, T_CALL, NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
        ck_assert_int_eq(sift_grammar_is_complete(g), 0);
        assert_constrains(c);
        accept_all(c, call_rest, N(call_rest));
        ck_assert_int_eq(sift_grammar_is_complete(g), 1);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_a_token_with_the_trigger_and_accepted_extra_bytes_feeds_them)
{
    sift_grammar *g = lazy_word_grammar();
    sift_chain *c = chain_with(g, 0, 3);
    const int32_t pre[] = {T_LT_TOOL, T_CALL_OK};
    accept_all(c, pre, N(pre));
    ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
    /* "{" was fed already: the grammar wants "name" now, not "{" */
    int ok = -1;
    ck_assert_int_eq(sift_grammar_accepts_token(g, T_LBRACE, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0);
    accept_all(c, call_rest + 1, N(call_rest) - 1);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    /* a plain-text token holding the whole trigger plus "\n" */
    sift_chain_reset(c);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    accept_all(c, (const int32_t[]){T_TC_NL}, 1);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
    accept_all(c, call_rest, N(call_rest));
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_a_token_with_the_trigger_and_rejected_extra_bytes_changes_nothing)
{
    for (int mode = 0; mode < 2; mode++) {
        sift_grammar *g = lazy_word_grammar();
        sift_chain *c = chain_with(g, mode, 4);
        accept_all(c, (const int32_t[]){T_LT_TOOL}, 1);
        uint64_t d0 = sift__chain_state_digest(c);
        uint64_t gd0 = sift__grammar_digest(g, 1);
        sift_error err;
        ck_assert_int_eq(sift_chain_accept(c, T_CALL_BAD, &err), SIFT_E_GRAMMAR_REJECT);
        ck_assert_str_eq(err.message, "token 18 fires trigger 0 at output byte 0, but the grammar "
                                      "rejects the text from the trigger on (`<tool_call>x`...)");
        ck_assert_int_eq(err.index, T_CALL_BAD);
        ck_assert_uint_eq(sift__chain_state_digest(c), d0);
        ck_assert_uint_eq(sift__grammar_digest(g, 1), gd0);
        ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
        /* the trigger is still armed with "<tool" pending */
        ck_assert_int_eq(sift_chain_accept(c, T_CALL, NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_a_pattern_feeds_the_grammar_from_its_first_capture_group)
{
    static const char *const pat[] = {"<tool_call>\\s*(\\{)"};
    for (int mode = 0; mode < 2; mode++) {
        sift_grammar *g = make_grammar("root ::= \"{\" [a-z]* \"}\"", NULL);
        sift_lazy_params lp;
        sift_lazy_params_init(&lp);
        lp.patterns = pat;
        lp.n_patterns = 1;
        ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
        sift_chain *c = chain_with(g, mode, 5);
        accept_all(c, (const int32_t[]){T_HELLO, T_TC_NL}, 2);
        ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
        accept_all(c, (const int32_t[]){T_LBRACE}, 1);
        ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
        ck_assert_int_eq(sift_grammar_is_complete(g), 0);
        /* the grammar got "{" only: letters then "}" complete it */
        accept_all(c, (const int32_t[]){T_LETTERS + 2, T_RBRACE}, 2);
        ck_assert_int_eq(sift_grammar_is_complete(g), 1);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_a_full_pattern_fires_when_the_whole_text_matches)
{
    static const char *const pat[] = {"(?s)[A-Za-z ]*(<tool_call>)"};
    sift_grammar *g = make_grammar(NULL, NULL);
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.full_patterns = pat;
    lp.n_full_patterns = 1;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
    sift_chain *c = chain_with(g, 0, 6);
    accept_all(c, (const int32_t[]){T_HELLO, T_WORLD, T_LT_TOOL}, 3);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    accept_all(c, (const int32_t[]){T_CALL}, 1);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
    assert_constrains(c);
    accept_all(c, call_rest, N(call_rest));
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    sift_chain_free(c);
    /* "{" before the tag: the whole text no longer matches */
    g = make_grammar(NULL, NULL);
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
    c = chain_with(g, 0, 6);
    accept_all(c, (const int32_t[]){T_LBRACE, T_LT_TOOL, T_CALL}, 3);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_a_token_trigger_fires_on_a_special_token_that_words_ignore)
{
    for (int mode = 0; mode < 2; mode++) {
        /* the word "<tool_call>" does not see the special token's text */
        sift_grammar *g = lazy_word_grammar();
        sift_chain *c = chain_with(g, mode, 7);
        accept_all(c, (const int32_t[]){T_TC_SPECIAL}, 1);
        ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
        sift_chain_free(c);
        /* a token trigger fires on its id and feeds the token whole */
        g = make_grammar(NULL, NULL);
        sift_lazy_params lp;
        sift_lazy_params_init(&lp);
        const int32_t toks[] = {T_TC_SPECIAL};
        lp.tokens = toks;
        lp.n_tokens = 1;
        ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
        c = chain_with(g, mode, 7);
        accept_all(c, (const int32_t[]){T_HELLO, T_TC_SPECIAL}, 2);
        ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
        assert_constrains(c);
        accept_all(c, call_rest, N(call_rest));
        ck_assert_int_eq(sift_grammar_is_complete(g), 1);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_prompt_tokens_never_trigger)
{
    for (int mode = 0; mode < 2; mode++) {
        sift_grammar *g = lazy_word_grammar();
        sift_chain *c = chain_with(g, mode, 8);
        const int32_t prompt[] = {T_TC_NL, T_LT_TOOL};
        for (size_t i = 0; i < N(prompt); i++)
            ck_assert_int_eq(sift_chain_accept_prompt(c, prompt[i], NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
        /* "<tool" was prompt text: "_call>" does not complete the word */
        accept_all(c, (const int32_t[]){T_CALL}, 1);
        ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
        float row[V_SIZE];
        two_peaks(row, T_HELLO, T_LBRACE);
        int32_t tok;
        ck_assert_int_eq(sift_chain_sample(c, row, V_SIZE, &tok, NULL), SIFT_OK);
        ck_assert_int_eq(tok, T_HELLO);
        sift_chain_free(c);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Clone, reset, digest                                                */
/* ------------------------------------------------------------------ */

START_TEST(test_clone_carries_and_reset_clears_the_trigger_state)
{
    sift_grammar *g = lazy_word_grammar();
    sift_chain *c = chain_with(g, 0, 9);
    accept_all(c, (const int32_t[]){T_HELLO, T_LT_TOOL}, 2);
    uint64_t d_half = sift__chain_state_digest(c);
    sift_chain *k = NULL;
    ck_assert_int_eq(sift_chain_clone(c, &k, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__chain_state_digest(k), d_half);
    accept_all(c, (const int32_t[]){T_CALL}, 1);
    ck_assert_uint_ne(sift__chain_state_digest(c), d_half);
    accept_all(k, (const int32_t[]){T_CALL}, 1);
    ck_assert_uint_eq(sift__chain_state_digest(k), sift__chain_state_digest(c));
    ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
    /* grammar-level clone, mid-word */
    sift_grammar *h = lazy_word_grammar(), *h2 = NULL;
    ck_assert_int_eq(sift_grammar_accept_token(h, T_LT_TOOL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_clone(h, &h2, NULL), SIFT_OK);
    ck_assert_uint_eq(sift__grammar_digest(h2, 1), sift__grammar_digest(h, 1));
    ck_assert_int_eq(sift_grammar_accept_token(h2, T_CALL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_triggered(h2), 1);
    ck_assert_int_eq(sift_grammar_is_triggered(h), 0);
    sift_grammar_free(h2);
    /* reset forgets the text: "_call>" alone does not fire */
    sift_grammar_reset(h);
    sift_grammar *fresh = lazy_word_grammar();
    ck_assert_uint_eq(sift__grammar_digest(h, 1), sift__grammar_digest(fresh, 1));
    ck_assert_int_eq(sift_grammar_accept_token(h, T_CALL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_triggered(h), 0);
    sift_chain_reset(c);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    sift_grammar_free(fresh);
    sift_grammar_free(h);
    sift_chain_free(k);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_set_lazy_errors_name_the_trigger)
{
    sift_grammar *g = make_grammar(NULL, NULL);
    uint64_t d0 = sift__grammar_digest(g, 1);
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    sift_error err;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_E_ARG); /* no triggers */
    static const char *const bad[] = {"ok", "(?<"};
    lp.patterns = bad;
    lp.n_patterns = 2;
    lp.words = tc_word;
    lp.n_words = 1;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_E_PATTERN_SYNTAX);
    ck_assert_int_eq(err.index, 1);
    ck_assert_str_eq(err.message,
                     "patterns[1], offset 3: subpattern name expected (PCRE2 error 162)");
    ck_assert_int_eq(err.offset, 3);
    lp.n_patterns = 0;
    const int32_t toks[] = {3, V_SIZE};
    lp.tokens = toks;
    lp.n_tokens = 2;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_E_TOKEN);
    ck_assert_int_eq(err.index, 1);
    ck_assert_str_eq(err.message, "tokens[1]: token id 64 out of range [0, 64)");
    static const char *const empty[] = {""};
    lp.n_tokens = 0;
    lp.words = empty;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_E_ARG);
    ck_assert_str_eq(err.message, "words[0]: empty word");
    lp.words = NULL;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_grammar_set_lazy(NULL, &lp, &err), SIFT_E_ARG);
    lp.struct_size = 0;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_E_ARG);
    /* still eager and unchanged */
    ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
    ck_assert_uint_eq(sift__grammar_digest(g, 1), d0);
    /* NULL params make a lazy grammar eager again */
    sift_lazy_params_init(&lp);
    lp.words = tc_word;
    lp.n_words = 1;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    ck_assert_int_eq(sift_grammar_set_lazy(g, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
    ck_assert_uint_eq(sift__grammar_digest(g, 1), d0);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_failed_set_lazy_keeps_the_previous_triggers_and_text)
{
    sift_grammar *g = lazy_word_grammar();
    ck_assert_int_eq(sift_grammar_accept_token(g, T_LT_TOOL, NULL), SIFT_OK);
    uint64_t d0 = sift__grammar_digest(g, 1);
    static const char *const bad[] = {"a{2,1}"};
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.patterns = bad;
    lp.n_patterns = 1;
    sift_error err;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_E_PATTERN_SYNTAX);
    ck_assert_int_eq(err.index, 0);
    ck_assert_uint_eq(sift__grammar_digest(g, 1), d0);
    ck_assert_int_eq(sift_grammar_accept_token(g, T_CALL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
    sift_grammar_free(g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Analyzer                                                            */
/* ------------------------------------------------------------------ */

START_TEST(test_an_untriggered_lazy_grammar_adds_nothing_to_the_dynamic_k)
{
    sift_grammar *g = lazy_word_grammar();
    sift_chain_params cp;
    sift_chain_params_init(&cp);
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &cp, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_grammar(c, g, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    sift_plan sp = {.struct_size = sizeof(sift_plan)}, dp = {.struct_size = sizeof(sift_plan)};
    ck_assert_int_eq(sift_chain_plan(c, &sp, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sp.guarantee, SIFT_GUARANTEE_CERTIFIED);
    ck_assert_int_eq(sift_chain_next_k(c, &dp, NULL), SIFT_OK);
    ck_assert_int_eq(dp.k, 40);
    ck_assert_int_eq(dp.guarantee, SIFT_GUARANTEE_EXACT);
    accept_all(c, (const int32_t[]){T_LT_TOOL, T_CALL}, 2);
    ck_assert_int_eq(sift_chain_next_k(c, &dp, NULL), SIFT_OK);
    ck_assert_int_eq(dp.guarantee, SIFT_GUARANTEE_CERTIFIED);
    ck_assert_int_eq(dp.k, sp.k);
    ck_assert_int_eq(sift_chain_plan(c, &sp, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sp.guarantee, SIFT_GUARANTEE_CERTIFIED);
    sift_chain_reset(c);
    ck_assert_int_eq(sift_chain_next_k(c, &dp, NULL), SIFT_OK);
    ck_assert_int_eq(dp.k, 40);
    sift_chain_free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Exactness                                                           */
/* ------------------------------------------------------------------ */

static int by_logit_desc(const void *a, const void *b)
{
    const sift_candidate *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Samples chain s on the prefix of k = its dynamic k; if the plan is not
 * EXACT and the slice cannot decide, on the whole row (NEED_ROW changes
 * nothing). */
static sift_status sample_on_slice(sift_chain *s, const float *row, int32_t *tok)
{
    sift_plan dp = {.struct_size = sizeof(sift_plan)};
    ck_assert_int_eq(sift_chain_next_k(s, &dp, NULL), SIFT_OK);
    if (dp.k == 0)
        return sift_chain_sample(s, row, V_SIZE, tok, NULL);
    sift_candidate all[V_SIZE];
    for (int32_t t = 0; t < V_SIZE; t++) {
        all[t].id = t;
        all[t].logit = row[t];
    }
    qsort(all, V_SIZE, sizeof all[0], by_logit_desc);
    /* the plan does not know V (the chain takes any row length): a
     * runtime copies min(k, V) */
    sift_slice sl = {V_SIZE, dp.k < V_SIZE ? dp.k : V_SIZE, all, 0, NULL, SIFT_SLICE_CANONICAL, 0};
    sift_status st = sift_chain_sample_slice(s, &sl, tok, NULL);
    if (st == SIFT_E_NEED_ROW) {
        ck_assert_int_ne(dp.guarantee, SIFT_GUARANTEE_EXACT);
        return sift_chain_sample(s, row, V_SIZE, tok, NULL);
    }
    return st;
}

/* A lazy constrain chain [grammar, top_k 8, dist] on whole rows equals
 * an oracle: a separate lazy grammar that, once triggered, bans each
 * token it rejects (naive accepts_token per token) in a copy of the row,
 * then [top_k 8, dist] with the same seed; and a clone of the lazy chain
 * sampled on slices of its dynamic k (8 while untriggered) equals both.
 * Two steps early in each run force "<tool" "_call>" so the grammar wakes
 * mid-run. */
START_TEST(test_a_lazy_chain_equals_the_naive_oracle_bitwise)
{
    tu_rng r = {0x1a2b3c};
    for (int run = 0; run < 40; run++) {
        uint64_t seed = tu_next(&r);
        sift_grammar *g = lazy_word_grammar();
        sift_grammar *og = lazy_word_grammar();
        sift_chain_params cp;
        sift_chain_params_init(&cp);
        cp.seed = seed;
        sift_chain *c = NULL, *o = NULL;
        ck_assert_int_eq(sift_chain_new(&c, &cp, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_new(&o, &cp, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_grammar(c, g, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(c, 8, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(o, 8, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(o, NULL), SIFT_OK);
        sift_chain *sc = NULL;
        ck_assert_int_eq(sift_chain_clone(c, &sc, NULL), SIFT_OK);
        int fire_at = (int)tu_range(&r, 0, 6);
        for (int step = 0; step < 40; step++) {
            float row[V_SIZE], orow[V_SIZE];
            int forced = step == fire_at || step == fire_at + 1;
            int shape = (int)tu_range(&r, 0, TU_ROW__COUNT - 1);
            tu_row(&r, row, V_SIZE, forced ? TU_ROW_NORMAL : shape);
            if (forced)
                row[step == fire_at ? T_LT_TOOL : T_CALL] = 1e30f;
            memcpy(orow, row, sizeof row);
            if (sift_grammar_is_triggered(og))
                for (int32_t t = 0; t < V_SIZE; t++) {
                    int ok = 0;
                    ck_assert_int_eq(sift_grammar_accepts_token(og, t, &ok, NULL), SIFT_OK);
                    if (!ok)
                        orow[t] = -INFINITY;
                }
            int32_t a = -1, b = -1;
            sift_status sa = sift_chain_sample(c, row, V_SIZE, &a, NULL);
            sift_status sb = sift_chain_sample(o, orow, V_SIZE, &b, NULL);
            int32_t d = -1;
            sift_status sd = sample_on_slice(sc, row, &d);
            uint64_t ra[4], rb[4], rd[4];
            sift__chain_rng_state(c, ra);
            sift__chain_rng_state(o, rb);
            sift__chain_rng_state(sc, rd);
            ck_assert_int_eq(memcmp(ra, rb, sizeof ra), 0);
            ck_assert_msg(memcmp(ra, rd, sizeof ra) == 0, "run %d step %d: slice RNG differs", run,
                          step);
            ck_assert_int_eq(sd, sa);
            if (sb != SIFT_OK) {
                /* the oracle's row was all -inf where the grammar allows */
                ck_assert_int_ne(sa, SIFT_OK);
                break;
            }
            ck_assert_int_eq(sa, SIFT_OK);
            ck_assert_int_eq(a, b);
            ck_assert_int_eq(a, d);
            ck_assert_int_eq(sift_chain_accept(c, a, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(sc, a, NULL), SIFT_OK);
            ck_assert_uint_eq(sift__chain_state_digest(sc), sift__chain_state_digest(c));
            ck_assert_int_eq(sift_chain_accept(o, b, NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_accept_token(og, b, NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_is_triggered(g), sift_grammar_is_triggered(og));
            if (step > fire_at + 1)
                ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
            if (a == T_EOS)
                break;
        }
        sift_grammar_free(og);
        sift_chain_free(sc);
        sift_chain_free(o);
        sift_chain_free(c);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Allocation failure                                                  */
/* ------------------------------------------------------------------ */

typedef struct failer {
    long calls, fail_at, live;
} failer;

static void *f_alloc(void *u, size_t n)
{
    failer *f = u;
    if (f->fail_at && ++f->calls >= f->fail_at)
        return NULL;
    void *p = malloc(n);
    if (p)
        f->live++;
    return p;
}

static void f_free(void *u, void *p)
{
    failer *f = u;
    if (p)
        f->live--;
    free(p);
}

START_TEST(test_allocation_failure_at_every_n_leaves_the_grammar_unchanged)
{
    failer f = {0, 0, 0};
    sift_allocator al = {sizeof(sift_allocator), f_alloc, f_free, &f, NULL};
    static const char *const pat[] = {"<tool_call>\\s*(\\{)"};
    const int32_t toks[] = {T_TC_SPECIAL};
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = tc_word;
    lp.n_words = 1;
    lp.patterns = pat;
    lp.n_patterns = 1;
    lp.tokens = toks;
    lp.n_tokens = 1;
    /* set_lazy */
    int done = 0;
    for (long n = 1; !done && n < 10000; n++) {
        f.fail_at = 0;
        sift_grammar *g = make_grammar(NULL, &al);
        uint64_t d0 = sift__grammar_digest(g, 1);
        f.calls = 0;
        f.fail_at = n;
        sift_status s = sift_grammar_set_lazy(g, &lp, NULL);
        f.fail_at = 0;
        if (s == SIFT_OK) {
            done = 1;
            ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
        } else {
            ck_assert_int_eq(s, SIFT_E_NOMEM);
            ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
            ck_assert_uint_eq(sift__grammar_digest(g, 1), d0);
        }
        sift_grammar_free(g);
        ck_assert_int_eq(f.live, 0);
    }
    ck_assert(done);
    /* the accept that fires the trigger */
    done = 0;
    for (long n = 1; !done && n < 10000; n++) {
        f.fail_at = 0;
        sift_grammar *g = make_grammar(NULL, &al);
        ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_token(g, T_HELLO, NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_token(g, T_LT_TOOL, NULL), SIFT_OK);
        uint64_t d0 = sift__grammar_digest(g, 1);
        f.calls = 0;
        f.fail_at = n;
        sift_status s = sift_grammar_accept_token(g, T_CALL, NULL);
        f.fail_at = 0;
        if (s == SIFT_OK) {
            done = 1;
            ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
        } else {
            ck_assert_int_eq(s, SIFT_E_NOMEM);
            ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
            ck_assert_uint_eq(sift__grammar_digest(g, 1), d0);
            /* and it still works */
            ck_assert_int_eq(sift_grammar_accept_token(g, T_CALL, NULL), SIFT_OK);
            ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
        }
        sift_grammar_free(g);
        ck_assert_int_eq(f.live, 0);
    }
    ck_assert(done);
}
END_TEST

START_TEST(test_a_waiting_lazy_grammar_allocates_nothing_per_token)
{
    failer f = {0, 0, 0};
    sift_allocator al = {sizeof(sift_allocator), f_alloc, f_free, &f, NULL};
    sift_grammar *g = make_grammar(NULL, &al);
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = tc_word;
    lp.n_words = 1;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
    for (int i = 0; i < 20000; i++) {
        if (i == 10000)
            f.fail_at = 1; /* any allocation from here on fails */
        ck_assert_int_eq(sift__grammar_prepare_accept(g, T_HELLO + (i & 1), NULL), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_token(g, T_HELLO + (i & 1), NULL), SIFT_OK);
    }
    f.fail_at = 0;
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_waiting_lazy_grammar_with_patterns_allocates_nothing_from_its_first_token)
{
    /* triggers.md: nothing allocates while a lazy grammar waits. With
     * searched patterns too, from the very first token (PCRE2's frames
     * are allocated by set_lazy): every allocation fails from here on */
    failer f = {0, 0, 0};
    sift_allocator al = {sizeof(sift_allocator), f_alloc, f_free, &f, NULL};
    sift_grammar *g = make_grammar(NULL, &al);
    static const char *const pat[] = {"<tool_call>\\s*(\\{)", "\\bfunction=(\\w+)>",
                                      "(?<=\\n)\\{\"name\""};
    const int32_t toks[] = {T_TC_SPECIAL};
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = tc_word;
    lp.n_words = 1;
    lp.patterns = pat;
    lp.n_patterns = N(pat);
    lp.tokens = toks;
    lp.n_tokens = 1;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, NULL), SIFT_OK);
    f.fail_at = 1;
    sift_error err;
    for (int i = 0; i < 3000; i++) {
        int32_t tk = i % 3 == 0 ? T_HELLO : i % 3 == 1 ? T_NL : T_LETTERS + (i % 26);
        int ok = 0;
        ck_assert_int_eq(sift_grammar_accepts_token(g, tk, &ok, &err), SIFT_OK);
        ck_assert_msg(sift__grammar_prepare_accept(g, tk, &err) == SIFT_OK, "%d: %s", i,
                      err.message);
        ck_assert_msg(sift_grammar_accept_token(g, tk, &err) == SIFT_OK, "%d: %s", i, err.message);
    }
    ck_assert_int_eq(f.calls, 0); /* not one allocation was even tried */
    f.fail_at = 0;
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    sift_grammar_free(g);
    ck_assert_int_eq(f.live, 0);
}
END_TEST

START_TEST(test_a_waiting_lazy_grammar_has_one_match_budget_for_all_its_patterns)
{
    /* 64 patterns that each search the text: their PCRE2 steps add up,
     * and the token fails once the one budget is spent, unchanged */
    static const char *pat[64];
    for (size_t i = 0; i < N(pat); i++)
        pat[i] = "(?:[a-z]+\\s?)+\\d";
    sift_grammar *g = make_grammar(NULL, NULL);
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.patterns = pat;
    lp.n_patterns = 1;
    sift_error err;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_OK);
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(sift_grammar_accept_token(g, T_LETTERS + i, &err), SIFT_OK);
    lp.n_patterns = N(pat);
    lp.match_limit = 1000;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_OK);
    sift_status st = SIFT_OK;
    int i = 0;
    for (; i < 12 && st == SIFT_OK; i++) {
        uint64_t d0 = sift__grammar_digest(g, 1);
        st = sift_grammar_accept_token(g, T_LETTERS + i, &err);
        if (st)
            ck_assert_uint_eq(sift__grammar_digest(g, 1), d0);
    }
    ck_assert_int_eq(st, SIFT_E_PATTERN_LIMIT);
    ck_assert_msg(strstr(err.message, "exceeded the match limit") != NULL, "%s", err.message);
    ck_assert_msg(strstr(err.message, "shared by all patterns") != NULL, "%s", err.message);
    ck_assert_int_gt(err.index, 0); /* not the first pattern: the sum */
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    sift_grammar_free(g);
}
END_TEST

/* A YAML config with a lazy section builds a chain whose grammar waits for
 * its trigger word, then constrains. */
START_TEST(test_a_config_with_a_lazy_section_builds_a_lazy_chain)
{
    static const char yaml[] = "chain:\n"
                               "  - greedy\n"
                               "grammar:\n"
                               "  text: |\n"
                               "    root ::= \"<tool_call>\" \"{\" [a-z\"]* \"}\"\n"
                               "  mode: constrain\n"
                               "  lazy:\n"
                               "    words: [\"<tool_call>\"]\n";
    sift_config *cfg = NULL;
    sift_error err;
    ck_assert_int_eq(sift_config_parse(&cfg, "lazy.yaml", yaml, strlen(yaml), NULL, &err), SIFT_OK);
    sift_vocab *v = make_vocab();
    sift_chain *c = NULL;
    ck_assert_msg(sift_config_build_chain(cfg, NULL, v, &c, &err) == SIFT_OK, "%s", err.message);
    ck_assert_str_eq(sift_chain_stage_name(c, 0), "grammar");
    /* untriggered: "Hello" is fine */
    ck_assert_int_eq(sift_chain_accept(c, T_HELLO, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, T_LT_TOOL, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(c, T_CALL, &err), SIFT_OK); /* fires */
    /* triggered (the grammar got "<tool_call>" from the trigger on): it
     * wants "{" now, so "Hello" is rejected */
    ck_assert_int_eq(sift_chain_accept(c, T_HELLO, &err), SIFT_E_GRAMMAR_REJECT);
    ck_assert_int_eq(sift_chain_accept(c, T_LBRACE, &err), SIFT_OK);
    sift_chain_free(c);
    sift_vocab_free(v);
    sift_config_free(cfg);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("lazy");
    TCase *tc = tcase_create("untriggered");
    tcase_add_test(tc, test_untriggered_lazy_grammar_constrains_nothing);
    tcase_add_test(tc, test_untriggered_tokens_pass_freely_through_a_chain);
    suite_add_tcase(s, tc);
    tc = tcase_create("triggers");
    tcase_add_test(tc, test_a_trigger_word_split_across_tokens_wakes_the_grammar);
    tcase_add_test(tc, test_a_token_with_the_trigger_and_accepted_extra_bytes_feeds_them);
    tcase_add_test(tc, test_a_token_with_the_trigger_and_rejected_extra_bytes_changes_nothing);
    tcase_add_test(tc, test_a_pattern_feeds_the_grammar_from_its_first_capture_group);
    tcase_add_test(tc, test_a_full_pattern_fires_when_the_whole_text_matches);
    tcase_add_test(tc, test_a_token_trigger_fires_on_a_special_token_that_words_ignore);
    tcase_add_test(tc, test_prompt_tokens_never_trigger);
    suite_add_tcase(s, tc);
    tc = tcase_create("state");
    tcase_add_test(tc, test_clone_carries_and_reset_clears_the_trigger_state);
    tcase_add_test(tc, test_set_lazy_errors_name_the_trigger);
    tcase_add_test(tc, test_a_failed_set_lazy_keeps_the_previous_triggers_and_text);
    suite_add_tcase(s, tc);
    tc = tcase_create("analyzer");
    tcase_add_test(tc, test_an_untriggered_lazy_grammar_adds_nothing_to_the_dynamic_k);
    suite_add_tcase(s, tc);
    tc = tcase_create("exactness");
    tcase_add_test(tc, test_a_lazy_chain_equals_the_naive_oracle_bitwise);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    tc = tcase_create("allocation");
    tcase_add_test(tc, test_allocation_failure_at_every_n_leaves_the_grammar_unchanged);
    tcase_add_test(tc, test_a_waiting_lazy_grammar_allocates_nothing_per_token);
    tcase_add_test(
        tc, test_a_waiting_lazy_grammar_with_patterns_allocates_nothing_from_its_first_token);
    tcase_add_test(tc, test_a_waiting_lazy_grammar_has_one_match_budget_for_all_its_patterns);
    tcase_add_test(tc, test_a_config_with_a_lazy_section_builds_a_lazy_chain);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

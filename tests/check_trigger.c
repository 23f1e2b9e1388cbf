/*
 * check_trigger.c - lazy-grammar triggers (src/grammar/trigger.c): one
 * test per row T-01..T-13 of BAD_INPUTS (T-08 is a config warning: only
 * its run-time half, "waits, bounded per token", is here), the replay
 * rule (from the trigger or the first non-empty capture group to the end
 * of the token), the window rule, work per token bounded by the window
 * (counted in bytes scanned, not time), no allocation per token once the
 * buffers are sized, clone/reset, and allocation failures.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "grammar/trigger.h"
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

static sift__trigger_spec word(const char *w)
{
    sift__trigger_spec s = {SIFT__TRIGGER_WORD, w, strlen(w), 0};
    return s;
}
static sift__trigger_spec pat(const char *p)
{
    sift__trigger_spec s = {SIFT__TRIGGER_PATTERN, p, strlen(p), 0};
    return s;
}
static sift__trigger_spec full(const char *p)
{
    sift__trigger_spec s = {SIFT__TRIGGER_PATTERN_FULL, p, strlen(p), 0};
    return s;
}
static sift__trigger_spec tok(int32_t id)
{
    sift__trigger_spec s = {SIFT__TRIGGER_TOKEN, NULL, 0, id};
    return s;
}

static sift__trigger *make(const sift__trigger_spec *specs, size_t n, const sift__trigger_params *p,
                           const sift_vocab *vocab)
{
    sift__alloc al = default_al();
    sift__trigger *t = NULL;
    sift_error err;
    ck_assert_msg(sift__trigger_new(&t, specs, n, p, vocab, &al, &err) == SIFT_OK, "%s",
                  err.message);
    return t;
}

/* Feeds text tokens pieces[0..n) (token id = position + 100) and
 * returns the position of the token at which the set fired, or -1. */
static int feed_all(sift__trigger *t, const char *const *pieces, size_t n, int64_t *start)
{
    for (size_t i = 0; i < n; i++) {
        int fired = -1; /* the feed must write it */
        sift_error err;
        sift_status st = sift__trigger_feed(t, (int32_t)(100 + i), pieces[i], strlen(pieces[i]),
                                            &fired, start, &err);
        ck_assert_msg(st == SIFT_OK, "token %zu: %s", i, err.message);
        if (fired)
            return (int)i;
    }
    return -1;
}

/* The replay as one string "tok:bytes|tok:bytes". */
static void replay_str(const sift__trigger *t, char *out, size_t cap)
{
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sift__trigger_n_replay(t); i++) {
        int32_t id;
        const char *b;
        size_t n;
        sift__trigger_replay(t, i, &id, &b, &n);
        k += (size_t)snprintf(out + k, cap - k, "%s%d:%.*s", i ? "|" : "", (int)id, (int)n, b);
        ck_assert_uint_lt(k, cap);
    }
}

static void new_err(const sift__trigger_spec *specs, size_t n, const sift__trigger_params *p,
                    const sift_vocab *vocab, sift_status code, int64_t index, const char *needle)
{
    sift__alloc al = default_al();
    sift__trigger *t = (sift__trigger *)1;
    sift_error err;
    ck_assert_int_eq(sift__trigger_new(&t, specs, n, p, vocab, &al, &err), code);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(err.code, code);
    ck_assert_int_eq(err.index, index);
    ck_assert_msg(strstr(err.message, needle) != NULL, "message '%s' lacks '%s'", err.message,
                  needle);
}

/* A counting allocator. */
typedef struct fa {
    long calls, fail_at, live;
} fa;
static void *fa_alloc(void *user, size_t size)
{
    fa *f = user;
    f->calls++;
    if (f->calls == f->fail_at)
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

/* ------------------------------------------------------------------ */
/* Validation: T-01, T-02, T-09, T-10                                  */
/* ------------------------------------------------------------------ */

START_TEST(test_t01_invalid_patterns_are_syntax_errors_with_the_pcre2_message_and_offset)
{
    static const char *const bad[] = {"(?<", "a{2,1}", "[z-a]"};
    static const char *const msg[] = {"trigger pattern 2, offset 3: subpattern name expected",
                                      "trigger pattern 2, offset 5: numbers out of order",
                                      "trigger pattern 2, offset 3: range out of order"};
    static const int64_t off[] = {3, 5, 3};
    for (size_t i = 0; i < N(bad); i++) {
        sift__trigger_spec s[3] = {word("ok"), pat("fine"), pat(bad[i])};
        sift__alloc al = default_al();
        sift__trigger *t = NULL;
        sift_error err;
        ck_assert_int_eq(sift__trigger_new(&t, s, 3, NULL, NULL, &al, &err), SIFT_E_PATTERN_SYNTAX);
        ck_assert_ptr_null(t);
        ck_assert_int_eq(err.index, 2);
        ck_assert_int_eq(err.offset, off[i]);
        ck_assert_msg(strstr(err.message, msg[i]) != NULL, "%s", err.message);
        /* The same pattern as a whole-text trigger fails the same way. */
        s[2] = full(bad[i]);
        new_err(s, 3, NULL, NULL, SIFT_E_PATTERN_SYNTAX, 2, msg[i]);
    }
}
END_TEST

START_TEST(test_t02_long_or_deeply_nested_patterns_are_limit_errors)
{
    char *big = malloc(10001);
    ck_assert_ptr_nonnull(big);
    memset(big, 'a', 10000);
    big[10000] = '\0';
    sift__trigger_spec s[3] = {word("a"), word("b"), pat(big)};
    new_err(s, 3, NULL, NULL, SIFT_E_PATTERN_LIMIT, 2, "pattern 2 is 10000 bytes; max 4096");
    free(big);
    char nest[700];
    size_t k = 0;
    for (int i = 0; i < 300; i++)
        nest[k++] = '(';
    nest[k++] = 'a';
    for (int i = 0; i < 300; i++)
        nest[k++] = ')';
    nest[k] = '\0';
    s[2] = pat(nest);
    new_err(s, 3, NULL, NULL, SIFT_E_PATTERN_LIMIT, 2, "offset 251");
    new_err(s, 3, NULL, NULL, SIFT_E_PATTERN_LIMIT, 2, "PCRE2 error 119");
}
END_TEST

START_TEST(test_t09_five_hundred_words_work_and_the_count_is_capped)
{
    static char words[1100][16];
    static sift__trigger_spec s[1100];
    for (int i = 0; i < 1100; i++) {
        snprintf(words[i], sizeof words[i], "<tool%d>", i);
        s[i] = word(words[i]);
    }
    sift__trigger *t = make(s, 500, NULL, NULL);
    const char *gen[] = {"some text <tool4", "99> and more"};
    int64_t start;
    ck_assert_int_eq(feed_all(t, gen, 2, &start), 1);
    ck_assert_int_eq(sift__trigger_fired_index(t), 499);
    ck_assert_int_eq(start, 10);
    /* Words cost the new bytes only. */
    ck_assert_uint_eq(sift__trigger_last_scanned(t), strlen(gen[1]));
    sift__trigger_free(t);
    new_err(s, 1025, NULL, NULL, SIFT_E_LIMIT, -1, "1025 triggers; max 1024");
    sift__trigger_params p;
    sift__trigger_params_init(&p);
    p.max_triggers = 1100;
    t = make(s, 1100, &p, NULL);
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_t10_empty_words_nul_bytes_and_bad_token_ids_are_located_errors)
{
    sift__trigger_spec s[3] = {word("fine"), word("x"), word("")};
    new_err(s, 3, NULL, NULL, SIFT_E_ARG, 2, "trigger 2: empty word");
    sift__trigger_spec nul = {SIFT__TRIGGER_WORD, "ab\0c", 4, 0};
    s[1] = nul;
    new_err(s, 2, NULL, NULL, SIFT_E_ARG, 1, "trigger 1: word contains a NUL byte at offset 2");
    sift__trigger_params p;
    sift__trigger_params_init(&p);
    p.n_vocab = 50;
    s[1] = tok(50);
    new_err(s, 2, &p, NULL, SIFT_E_TOKEN, 1, "trigger 1: token id 50 out of range [0, 50)");
    s[1] = tok(-1);
    new_err(s, 2, &p, NULL, SIFT_E_TOKEN, 1, "token id -1 out of range");
    new_err(s, 2, NULL, NULL, SIFT_E_TOKEN, 1, "token id -1 is negative");
    /* With a vocabulary, its size bounds the ids. */
    const char *pieces[] = {"a", "b", "c"};
    size_t lens[] = {1, 1, 1};
    sift_vocab *v;
    ck_assert_int_eq(sift_vocab_new(&v, 3, pieces, lens, NULL, NULL), SIFT_OK);
    s[1] = tok(3);
    new_err(s, 2, NULL, v, SIFT_E_TOKEN, 1, "token id 3 out of range [0, 3)");
    sift_vocab_free(v);
    /* A word longer than the window could never be found whole. */
    p.max_window = 64;
    char w[80];
    memset(w, 'w', 79);
    w[79] = '\0';
    s[1] = word(w);
    new_err(s, 2, &p, NULL, SIFT_E_ARG, 1, "word is 79 bytes; max 64");
    sift__alloc al = default_al();
    sift__trigger *t = (sift__trigger *)1;
    ck_assert_int_eq(sift__trigger_new(&t, s, 0, NULL, NULL, &al, NULL), SIFT_E_ARG);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(sift__trigger_new(NULL, s, 1, NULL, NULL, &al, NULL), SIFT_E_ARG);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Run time: T-03 .. T-07, T-11 .. T-13                                */
/* ------------------------------------------------------------------ */

START_TEST(test_t03_catastrophic_backtracking_is_a_limit_error_not_a_no_match)
{
    /* (a+)+$ on a run of a's that ends in '!': exponential without a
     * limit. Delivered as one token, since any text ending in 'a'
     * matches (and fires) at once. */
    sift__trigger_spec s[2] = {word("never"), pat("(a+)+$")};
    sift__trigger *t = make(s, 2, NULL, NULL);
    char run[64];
    memset(run, 'a', 40);
    strcpy(run + 40, "!");
    int fired = -1; /* the feed must write it */
    int64_t start;
    sift_error err;
    ck_assert_int_eq(sift__trigger_feed(t, 1, "x", 1, &fired, &start, &err), SIFT_OK);
    ck_assert_int_eq(sift__trigger_feed(t, 1, run, 41, &fired, &start, &err), SIFT_E_PATTERN_LIMIT);
    ck_assert_int_eq(err.index, 1);
    ck_assert_msg(strstr(err.message, "trigger 1 exceeded the match limit at output byte 42") !=
                      NULL,
                  "%s", err.message);
    /* The failed feed changed nothing: the same token fails the same way,
     * and a harmless token is still accepted afterwards. */
    ck_assert_int_eq(sift__trigger_feed(t, 1, run, 41, &fired, &start, &err), SIFT_E_PATTERN_LIMIT);
    ck_assert_msg(strstr(err.message, "at output byte 42") != NULL, "%s", err.message);
    sift__trigger_free(t);

    /* (.|\s)*?x over runs of spaces: any text can begin a match, so no
     * search can skip ahead and each one may read the whole window;
     * whatever the engine does, the work per token stays bounded by the
     * window and the result is an answer. A search costs O(window), so
     * the default window (4096 bytes) is filled by one token and crossed
     * by 64 one-byte tokens, and five whole windows (crossing the
     * buffer's compaction, at 3 windows + 64 bytes) are fed one byte at a
     * time with the smallest window, 64 bytes. */
    s[1] = pat("(.|\\s)*?x");
    static char spaces[4096];
    memset(spaces, ' ', sizeof spaces);
    sift__trigger_params small;
    sift__trigger_params_init(&small);
    small.max_window = 64;
    const struct {
        const sift__trigger_params *p;
        size_t window, fill, one_byte;
    } runs[] = {{NULL, 4096, 4096, 64}, {&small, 64, 0, 5 * 64}};
    for (size_t r = 0; r < N(runs); r++) {
        t = make(s, 2, runs[r].p, NULL);
        if (runs[r].fill) {
            ck_assert_int_eq(sift__trigger_feed(t, 1, spaces, runs[r].fill, &fired, &start, &err),
                             SIFT_OK);
            ck_assert_int_eq(fired, 0);
        }
        for (size_t i = 0; i < runs[r].one_byte; i++) {
            ck_assert_int_eq(sift__trigger_feed(t, 1, " ", 1, &fired, &start, &err), SIFT_OK);
            ck_assert_int_eq(fired, 0);
            ck_assert_uint_le(sift__trigger_last_scanned(t), runs[r].window + 1);
        }
        ck_assert_int_eq(sift__trigger_feed(t, 1, "x", 1, &fired, &start, &err), SIFT_OK);
        ck_assert_int_eq(fired, 1);
        sift__trigger_free(t);
    }

    /* (a+)+!b over a's and "!c": the plain search fails at once (no 'b'),
     * and the partial search that only serves to skip ahead may hit the
     * limit: that is not an error, the answer ("no match") stands. */
    s[1] = pat("(a+)+!b");
    t = make(s, 2, NULL, NULL);
    memset(run, 'a', 40);
    strcpy(run + 40, "!c");
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sift__trigger_feed(t, 1, run, 42, &fired, &start, &err), SIFT_OK);
        ck_assert_int_eq(fired, 0);
    }
    /* Once a 'b' arrives the plain search must walk the runs of a's to
     * find the leftmost match: the limit is hit, and that is an error. */
    ck_assert_int_eq(sift__trigger_feed(t, 1, "aa!b", 4, &fired, &start, &err),
                     SIFT_E_PATTERN_LIMIT);
    sift__trigger_free(t);

    /* a*a*a*a*a*$ matches at the end of every text, where the next token
     * may change it ($ is then no end): it waits, and it does not hang. */
    s[1] = pat("a*a*a*a*a*$");
    t = make(s, 2, NULL, NULL);
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(sift__trigger_feed(t, 1, "aaaa", 4, &fired, &start, &err), SIFT_OK);
        ck_assert_int_eq(fired, 0);
        ck_assert_uint_le(sift__trigger_last_scanned(t), 4096 + 4);
    }
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_t04_split_code_points_and_invalid_utf8_are_handled)
{
    /* "é" = C3 A9 split over two tokens. */
    sift__trigger_spec s[1] = {pat("caf\xc3\xa9")};
    sift__trigger *t = make(s, 1, NULL, NULL);
    const char *gen[] = {"un caf\xc3", "\xa9 noir"};
    int64_t start;
    ck_assert_int_eq(feed_all(t, gen, 2, &start), 1);
    ck_assert_int_eq(start, 3);
    char r[256];
    replay_str(t, r, sizeof r);
    ck_assert_str_eq(r, "100:caf\xc3|101:\xa9 noir");
    sift__trigger_free(t);

    /* '.' never matches an invalid byte or half a character. */
    s[0] = pat(".");
    t = make(s, 1, NULL, NULL);
    const char *bad[] = {"\xff", "\xe2\x82", "\xac"};
    ck_assert_int_eq(feed_all(t, bad, 3, &start), 2);
    ck_assert_int_eq(start, 1); /* the euro sign, completed by token 2 */
    sift__trigger_free(t);

    /* Text after an invalid byte is searched normally. */
    s[0] = pat("abc");
    t = make(s, 1, NULL, NULL);
    const char *mixed[] = {"\xff\xfe", "xabc"};
    ck_assert_int_eq(feed_all(t, mixed, 2, &start), 1);
    ck_assert_int_eq(start, 3);
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_t05_extra_bytes_after_the_trigger_are_replayed)
{
    sift__trigger_spec s[1] = {word("<function")};
    sift__trigger *t = make(s, 1, NULL, NULL);
    const char *gen[] = {"I will call ", "<function=list>"};
    int64_t start;
    char r[256];
    ck_assert_int_eq(feed_all(t, gen, 2, &start), 1);
    ck_assert_int_eq(start, 12);
    replay_str(t, r, sizeof r);
    ck_assert_str_eq(r, "101:<function=list>");
    sift__trigger_free(t);

    /* The word split over tokens, with the trigger in the middle of the
     * first one: the first replayed piece is partial. */
    t = make(s, 1, NULL, NULL);
    const char *split[] = {"ok <fun", "ction=li", "st>"};
    ck_assert_int_eq(feed_all(t, split, 3, &start), 1);
    ck_assert_int_eq(start, 3);
    replay_str(t, r, sizeof r);
    ck_assert_str_eq(r, "100:<fun|101:ction=li");
    sift__trigger_free(t);

    /* The capture-group rule: the grammar starts at the first non-empty
     * group, not at the start of the match. */
    sift__trigger_spec c[1] = {pat("<tool>\\s*(\\{)")};
    t = make(c, 1, NULL, NULL);
    const char *g2[] = {"<tool>", "  {\"a\"", ": 1}"};
    ck_assert_int_eq(feed_all(t, g2, 3, &start), 1);
    ck_assert_int_eq(start, 8);
    replay_str(t, r, sizeof r);
    ck_assert_str_eq(r, "101:{\"a\"");
    sift__trigger_free(t);

    /* An empty first group is skipped for the next non-empty one. */
    sift__trigger_spec e[1] = {pat("(x?)<a>(b+)")};
    t = make(e, 1, NULL, NULL);
    const char *g3[] = {"<a>bbb!"};
    ck_assert_int_eq(feed_all(t, g3, 1, &start), 0);
    ck_assert_int_eq(start, 3);
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_t06_a_word_fires_inside_a_longer_word)
{
    sift__trigger_spec s[1] = {word("function")};
    sift__trigger *t = make(s, 1, NULL, NULL);
    const char *gen[] = {"a func", "tional", " test"};
    int64_t start;
    char r[256];
    ck_assert_int_eq(feed_all(t, gen, 3, &start), 1);
    ck_assert_int_eq(start, 2);
    replay_str(t, r, sizeof r);
    ck_assert_str_eq(r, "100:func|101:tional");
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_t07_only_generated_text_is_scanned_and_special_text_is_not_text)
{
    /* The prompt ended with "<to"; it is never fed, so "ol>" alone does
     * not complete the word. */
    sift__trigger_spec s[2] = {word("<tool>"), tok(2)};
    const char *pieces[] = {"a", "<tool>", "<|tool|>", "ol>"};
    size_t lens[] = {1, 6, 8, 3};
    sift_vocab *v;
    ck_assert_int_eq(sift_vocab_new(&v, 4, pieces, lens, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 1, SIFT_TOKEN_SPECIAL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 2, SIFT_TOKEN_SPECIAL, NULL), SIFT_OK);
    sift__trigger *t = make(s, 2, NULL, v);
    int fired = -1; /* the feed must write it */
    int64_t start;
    ck_assert_int_eq(sift__trigger_feed(t, 3, "ol>", 3, &fired, &start, NULL), SIFT_OK);
    ck_assert_int_eq(fired, 0);
    /* A special token whose text is the word does not fire the word... */
    ck_assert_int_eq(sift__trigger_feed(t, 1, "<tool>", 6, &fired, &start, NULL), SIFT_OK);
    ck_assert_int_eq(fired, 0);
    /* ...but a token trigger fires on its id and replays it whole. */
    ck_assert_int_eq(sift__trigger_feed(t, 2, "<|tool|>", 8, &fired, &start, NULL), SIFT_OK);
    ck_assert_int_eq(fired, 1);
    ck_assert_int_eq(sift__trigger_fired_index(t), 1);
    ck_assert_int_eq(start, 3);
    char r[64];
    replay_str(t, r, sizeof r);
    ck_assert_str_eq(r, "2:<|tool|>");
    /* Fired: feeding again is a state error until reset. */
    ck_assert_int_eq(sift__trigger_feed(t, 0, "a", 1, &fired, &start, NULL), SIFT_E_STATE);
    sift__trigger_reset(t);
    ck_assert_int_eq(sift__trigger_fired_index(t), -1);
    ck_assert_uint_eq(sift__trigger_n_replay(t), 0);
    /* After reset the old text is gone: "ol>" still does not fire. */
    ck_assert_int_eq(sift__trigger_feed(t, 3, "ol>", 3, &fired, &start, NULL), SIFT_OK);
    ck_assert_int_eq(fired, 0);
    sift__trigger_free(t);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_t08_an_unreachable_trigger_waits_with_bounded_work)
{
    sift__trigger_spec s[2] = {word("</think>"), pat("<answer>(.*)")};
    sift__trigger *t = make(s, 2, NULL, NULL);
    tu_rng r = {7};
    for (int i = 0; i < 20000; i++) {
        char piece[9];
        int len = (int)tu_range(&r, 1, 8);
        for (int k = 0; k < len; k++)
            piece[k] = (char)('a' + tu_range(&r, 0, 25));
        int fired;
        int64_t start;
        ck_assert_int_eq(sift__trigger_feed(t, 1, piece, (size_t)len, &fired, &start, NULL),
                         SIFT_OK);
        ck_assert_int_eq(fired, 0);
        /* words: the new bytes; pattern: at most the window */
        ck_assert_uint_le(sift__trigger_last_scanned(t), (size_t)len + 4096);
    }
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_t11_whole_text_patterns_are_anchored_and_the_text_is_capped)
{
    sift__trigger_spec s[1] = {full("abc")};
    sift__trigger *t = make(s, 1, NULL, NULL);
    const char *no[] = {"x", "abc"};
    int64_t start;
    ck_assert_int_eq(feed_all(t, no, 2, &start), -1);
    sift__trigger_free(t);
    t = make(s, 1, NULL, NULL);
    const char *yes[] = {"a", "bc"};
    ck_assert_int_eq(feed_all(t, yes, 2, &start), 1);
    ck_assert_int_eq(start, 0);
    sift__trigger_free(t);
    /* A trailing newline is not skipped (anchored at the true end). */
    t = make(s, 1, NULL, NULL);
    const char *nl[] = {"abc\n"};
    ck_assert_int_eq(feed_all(t, nl, 1, &start), -1);
    sift__trigger_free(t);

    /* 1 MiB of text (the default cap) in 64 KiB tokens, then one byte
     * more: a limit error that changes nothing. */
    sift__trigger_spec f[1] = {full("<end>[\\s\\S]*")};
    t = make(f, 1, NULL, NULL);
    char *chunk = malloc(65536);
    ck_assert_ptr_nonnull(chunk);
    memset(chunk, 'z', 65536);
    int fired;
    sift_error err;
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(sift__trigger_feed(t, 1, chunk, 65536, &fired, &start, &err), SIFT_OK);
    ck_assert_int_eq(sift__trigger_feed(t, 1, "<", 1, &fired, &start, &err), SIFT_E_PATTERN_LIMIT);
    ck_assert_msg(strstr(err.message, "1048577 bytes while a whole-text trigger pattern waits; "
                                      "max 1048576") != NULL,
                  "%s", err.message);
    ck_assert_int_eq(sift__trigger_feed(t, 1, "<", 1, &fired, &start, &err), SIFT_E_PATTERN_LIMIT);
    sift__trigger_free(t);
    free(chunk);

    /* With a smaller cap it fires before the cap; the grammar gets the
     * whole text (the match starts at 0). */
    sift__trigger_params p;
    sift__trigger_params_init(&p);
    p.max_text = 4096;
    sift__trigger_spec g[1] = {full("[\\s\\S]*?(<end>)[\\s\\S]*")};
    t = make(g, 1, &p, NULL);
    const char *gen[] = {"blah ", "blah <e", "nd> tail"};
    ck_assert_int_eq(feed_all(t, gen, 3, &start), 2);
    ck_assert_int_eq(start, 10); /* the capture group */
    char r[128];
    replay_str(t, r, sizeof r);
    ck_assert_str_eq(r, "101:<e|102:nd> tail");
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_t12_a_pattern_matching_the_empty_string_fires_at_the_first_generated_byte)
{
    const char *pieces[] = {"<s>", "a", "b"};
    size_t lens[] = {3, 1, 1};
    sift_vocab *v;
    ck_assert_int_eq(sift_vocab_new(&v, 3, pieces, lens, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 0, SIFT_TOKEN_SPECIAL, NULL), SIFT_OK);
    sift__trigger_spec s[2] = {pat("x+"), pat("x*")};
    sift__trigger *t = make(s, 2, NULL, v);
    ck_assert_int_eq(sift__trigger_matches_empty(t, 0), 0);
    ck_assert_int_eq(sift__trigger_matches_empty(t, 1), 1);
    int fired;
    int64_t start;
    /* A special token adds no text: nothing fires yet. */
    ck_assert_int_eq(sift__trigger_feed(t, 0, "<s>", 3, &fired, &start, NULL), SIFT_OK);
    ck_assert_int_eq(fired, 0);
    ck_assert_int_eq(sift__trigger_feed(t, 1, "a", 1, &fired, &start, NULL), SIFT_OK);
    ck_assert_int_eq(fired, 1);
    ck_assert_int_eq(start, 0);
    ck_assert_int_eq(sift__trigger_fired_index(t), 1);
    char r[64];
    replay_str(t, r, sizeof r);
    ck_assert_str_eq(r, "1:a");
    sift__trigger_free(t);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_t13_depth_and_heap_limits_are_limit_errors)
{
    sift__trigger_params p;
    sift__trigger_params_init(&p);
    p.depth_limit = 10;
    sift__trigger_spec s[1] = {pat("(?:a|b)*d")};
    sift__trigger *t = make(s, 1, &p, NULL);
    char run[128];
    memset(run, 'a', 100);
    strcpy(run + 100, "xd");
    int fired;
    int64_t start;
    sift_error err;
    ck_assert_int_eq(sift__trigger_feed(t, 1, run, strlen(run), &fired, &start, &err),
                     SIFT_E_PATTERN_LIMIT);
    ck_assert_msg(strstr(err.message, "exceeded the depth limit") != NULL, "%s", err.message);
    sift__trigger_free(t);
    sift__trigger_params_init(&p);
    p.heap_limit_kib = 1;
    t = make(s, 1, &p, NULL);
    memset(run, 'a', 100);
    strcpy(run + 100, "xd");
    ck_assert_int_eq(sift__trigger_feed(t, 1, run, strlen(run), &fired, &start, &err),
                     SIFT_E_PATTERN_LIMIT);
    ck_assert_msg(strstr(err.message, "exceeded the heap limit") != NULL, "%s", err.message);
    sift__trigger_free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rules: order, window, anchors                                       */
/* ------------------------------------------------------------------ */

START_TEST(test_the_lowest_trigger_index_wins_when_several_match_at_one_token)
{
    sift__trigger_spec s[3] = {word("zzz"), pat("b(c)"), word("abc")};
    sift__trigger *t = make(s, 3, NULL, NULL);
    const char *gen[] = {"xx abcd"};
    int64_t start;
    ck_assert_int_eq(feed_all(t, gen, 1, &start), 0);
    ck_assert_int_eq(sift__trigger_fired_index(t), 1);
    ck_assert_int_eq(start, 5);
    sift__trigger_free(t);
    /* Two occurrences of the same word in one token: the first one. */
    sift__trigger_spec w[1] = {word("ab")};
    t = make(w, 1, NULL, NULL);
    const char *two[] = {"xab ab"};
    ck_assert_int_eq(feed_all(t, two, 1, &start), 0);
    ck_assert_int_eq(start, 1);
    sift__trigger_free(t);
    /* Overlapping words (a suffix of another) are all found. */
    sift__trigger_spec o[2] = {word("she"), word("he")};
    t = make(o, 2, NULL, NULL);
    const char *sh[] = {"ushe"};
    ck_assert_int_eq(feed_all(t, sh, 1, &start), 0);
    ck_assert_int_eq(sift__trigger_fired_index(t), 0);
    ck_assert_int_eq(start, 1);
    sift__trigger_free(t);
    sift__trigger_spec o2[2] = {word("hers"), word("e")};
    t = make(o2, 2, NULL, NULL);
    const char *he[] = {"h", "e"};
    ck_assert_int_eq(feed_all(t, he, 2, &start), 1);
    ck_assert_int_eq(sift__trigger_fired_index(t), 1);
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_a_bounded_pattern_fires_exactly_after_100k_bytes_of_text)
{
    sift__trigger_spec s[2] = {pat("^never"), pat("<tool_call>\\s*(\\{)")};
    sift__trigger *t = make(s, 2, NULL, NULL);
    int fired;
    int64_t start;
    for (int i = 0; i < 25000; i++) {
        ck_assert_int_eq(sift__trigger_feed(t, 1, "word", 4, &fired, &start, NULL), SIFT_OK);
        ck_assert_int_eq(fired, 0);
        ck_assert_uint_le(sift__trigger_last_scanned(t), 2 * 4096);
    }
    /* "^never" after the start of the text has scrolled away: no match. */
    ck_assert_int_eq(sift__trigger_feed(t, 1, "never", 5, &fired, &start, NULL), SIFT_OK);
    ck_assert_int_eq(fired, 0);
    const char *gen[] = {"<tool_", "call>\n", " {\"name\""};
    ck_assert_int_eq(feed_all(t, gen, 3, &start), 2);
    ck_assert_int_eq(start, 100005 + 13);
    char r[64];
    replay_str(t, r, sizeof r);
    ck_assert_str_eq(r, "102:{\"name\"");
    sift__trigger_free(t);
    /* "^never" at the start fires. */
    t = make(s, 2, NULL, NULL);
    const char *g2[] = {"nev", "er"};
    ck_assert_int_eq(feed_all(t, g2, 2, &start), 1);
    ck_assert_int_eq(start, 0);
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_lookbehind_sees_text_before_the_search_start)
{
    /* After a token that cannot start a match, the next search starts at
     * the new text; a lookbehind still sees the bytes before it. */
    sift__trigger_params p;
    sift__trigger_params_init(&p);
    p.max_window = 64;
    sift__trigger_spec s[1] = {pat("(?<=MARK.{36})!")};
    sift__trigger *t = make(s, 1, &p, NULL);
    char run[37];
    memset(run, 'a', 36);
    run[36] = '\0';
    const char *gen[] = {"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
                         "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "MARK", run, "!"};
    int64_t start;
    ck_assert_int_eq(feed_all(t, gen, 5, &start), 4);
    ck_assert_int_eq(start, 140);
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_a_searched_pattern_fires_only_when_no_later_text_can_change_its_match)
{
    /* \bfunction\b matched "function" at the end of the text, where the
     * next token may continue the word: it waits for the next byte */
    sift__trigger_spec s[1] = {pat("\\bfunction\\b")};
    sift__trigger *t = make(s, 1, NULL, NULL);
    const char *functional[] = {"the funct", "ion", "al", " call", "s"};
    int64_t start;
    ck_assert_int_eq(feed_all(t, functional, N(functional), &start), -1);
    sift__trigger_reset(t);
    const char *function[] = {"the funct", "ion", " f"};
    ck_assert_int_eq(feed_all(t, function, N(function), &start), 2);
    ck_assert_int_eq(start, 4);
    char r[64];
    replay_str(t, r, sizeof r);
    ck_assert_str_eq(r, "100:funct|101:ion|102: f");
    sift__trigger_reset(t);
    /* one token that ends the word inside it fires at once */
    const char *inside[] = {"function("};
    ck_assert_int_eq(feed_all(t, inside, 1, &start), 0);
    sift__trigger_free(t);
    /* the same for every assertion or repeat that looks past the end:
     * $, a lookahead, a negated lookahead, a greedy repeat */
    static const struct {
        const char *pat;
        const char *wait[3]; /* fed one by one: no firing */
        const char *then;    /* fires here */
    } cases[] = {
        {"end;$", {"x end", ";", NULL}, NULL},      {"call(?=\\()", {"a call", NULL, NULL}, "(x"},
        {"call(?!s)", {"a call", NULL, NULL}, "!"}, {"<n>(\\d+)", {"<n>4", "2", NULL}, " "},
        {"\\w+ing\\b", {"sing", NULL, NULL}, "."},
    };
    for (size_t i = 0; i < N(cases); i++) {
        s[0] = pat(cases[i].pat);
        t = make(s, 1, NULL, NULL);
        int fired;
        for (size_t k = 0; k < N(cases[i].wait) && cases[i].wait[k]; k++) {
            const char *w = cases[i].wait[k];
            ck_assert_int_eq(sift__trigger_feed(t, 1, w, strlen(w), &fired, &start, NULL), SIFT_OK);
            ck_assert_msg(!fired, "%s fired at [%s]", cases[i].pat, w);
        }
        if (cases[i].then) {
            const char *w = cases[i].then;
            ck_assert_int_eq(sift__trigger_feed(t, 1, w, strlen(w), &fired, &start, NULL), SIFT_OK);
            ck_assert_msg(fired, "%s did not fire at [%s]", cases[i].pat, w);
        }
        sift__trigger_free(t);
    }
}
END_TEST

/* The most PCRE2 steps one pattern takes per token on `gen`. */
static uint64_t steps_per_token(sift__trigger *t, const char *const *gen, size_t n)
{
    uint64_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        int fired;
        int64_t start;
        ck_assert_int_eq(sift__trigger_feed(t, 1, gen[i], strlen(gen[i]), &fired, &start, NULL),
                         SIFT_OK);
        ck_assert_int_eq(fired, 0);
        if (sift__trigger_last_steps(t) > worst)
            worst = sift__trigger_last_steps(t);
    }
    return worst;
}

START_TEST(test_all_patterns_of_a_set_share_one_match_budget_per_token)
{
    /* a pattern that works on ordinary text (words, no digit after) */
    static const char *const gen[] = {"alpha beta ", "gamma delta ", "epsilon zeta "};
    sift__trigger_spec one[1] = {pat("(?:\\w+\\s)+\\d")};
    sift__trigger *t = make(one, 1, NULL, NULL);
    uint64_t per = steps_per_token(t, gen, 1); /* the first token */
    sift__trigger_free(t);
    ck_assert_uint_gt(per, 20);
    /* 64 copies spend 64 times as much; a budget of 8 patterns' worth
     * lets one through and stops the set, at the pattern that spends it */
    sift__trigger_spec many[64];
    for (size_t i = 0; i < N(many); i++)
        many[i] = one[0];
    sift__trigger_params p;
    sift__trigger_params_init(&p);
    p.match_limit = (uint32_t)(8 * per);
    t = make(one, 1, &p, NULL);
    ck_assert_uint_le(steps_per_token(t, gen, 1), per);
    sift__trigger_free(t);
    t = make(many, N(many), &p, NULL);
    int fired;
    int64_t start;
    sift_error err;
    ck_assert_int_eq(sift__trigger_feed(t, 1, gen[0], strlen(gen[0]), &fired, &start, &err),
                     SIFT_E_PATTERN_LIMIT);
    ck_assert_int_ge(err.index, 6);
    ck_assert_int_le(err.index, 9);
    ck_assert_msg(strstr(err.message, "exceeded the match limit") != NULL, "%s", err.message);
    ck_assert_msg(strstr(err.message, "shared by all patterns") != NULL, "%s", err.message);
    /* the work stopped at the budget, not at 64 patterns' worth */
    ck_assert_uint_le(sift__trigger_last_steps(t), p.match_limit + 1);
    sift__trigger_free(t);
    /* with the default budget the 64 pass, each token well inside it */
    t = make(many, N(many), NULL, NULL);
    ck_assert_uint_le(steps_per_token(t, gen, N(gen)), SIFT__TRIGGER_DEFAULT_MATCH_LIMIT);
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_one_search_is_bounded_by_the_budget_over_all_its_start_positions)
{
    /* PCRE2's own match limit restarts at every start position: a*[cd]
     * (with its backtracking kept) over 4 KB of a's costs up to 4096
     * steps at each of 4096 starts, 8 million in all, far more than one
     * budget and never more than PCRE2's limit at one start. The shared
     * count stops it. */
    sift__trigger_spec s[1] = {pat("(*NO_AUTO_POSSESS)a*[cd]")};
    sift__trigger_params p;
    sift__trigger_params_init(&p);
    p.match_limit = 100000;
    sift__trigger *t = make(s, 1, &p, NULL);
    char run[4097];
    memset(run, 'a', 4096);
    run[4096] = '\0';
    int fired;
    int64_t start;
    sift_error err;
    sift_status st = SIFT_OK;
    for (int i = 0; i < 4 && st == SIFT_OK; i++) {
        st = sift__trigger_feed(t, 1, run, 4096, &fired, &start, &err);
        ck_assert_uint_le(sift__trigger_last_steps(t), p.match_limit + 1);
    }
    ck_assert_int_eq(st, SIFT_E_PATTERN_LIMIT);
    ck_assert_msg(strstr(err.message, "trigger 0 exceeded the match limit") != NULL, "%s",
                  err.message);
    sift__trigger_free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Differential test against a naive reference                         */
/* ------------------------------------------------------------------ */

/* The reference is llama.cpp's rule written plainly: keep all the text;
 * after each token, try the triggers in index order over the whole text
 * (a word: its first occurrence; a pattern: PCRE2's leftmost match over
 * everything, if final, that is if a hard partial search finds it too,
 * so that no text that may follow can change it; a full pattern: a match
 * of the whole text; a token: the id), and the first that matches fires.
 * With patterns whose matches are short and a small window the set must
 * agree with it exactly. */
typedef struct ref_case {
    sift__trigger_spec spec[8];
    pcre2_code *code[8];
    size_t n;
} ref_case;

static int ref_fire(const ref_case *rc, const char *text, size_t len, int32_t token,
                    uint64_t tok_start, pcre2_match_data *md, uint64_t *start)
{
    for (size_t i = 0; i < rc->n; i++) {
        const sift__trigger_spec *s = &rc->spec[i];
        if (s->kind == SIFT__TRIGGER_TOKEN) {
            if (s->token == token) {
                *start = tok_start;
                return (int)i;
            }
        } else if (s->kind == SIFT__TRIGGER_WORD) {
            for (size_t k = 0; k + s->len <= len; k++) {
                if (memcmp(text + k, s->text, s->len) == 0) {
                    *start = k;
                    return (int)i;
                }
            }
        } else if (len > 0) {
            uint32_t o = s->kind == SIFT__TRIGGER_PATTERN ? PCRE2_PARTIAL_HARD : 0;
            int r = pcre2_match(rc->code[i], (PCRE2_SPTR)text, len, 0, o, md, NULL);
            if (r == PCRE2_ERROR_PARTIAL)
                r = PCRE2_ERROR_NOMATCH;
            ck_assert_int_ge(r, PCRE2_ERROR_NOMATCH);
            if (r > 0) {
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                *start = ov[0];
                for (int g = 1; g < r; g++) {
                    if (ov[2 * g] != PCRE2_UNSET && ov[2 * g + 1] > ov[2 * g]) {
                        *start = ov[2 * g];
                        break;
                    }
                }
                return (int)i;
            }
        }
    }
    return -1;
}

START_TEST(test_the_window_agrees_with_whole_text_rescanning_on_random_cases)
{
    static const char *const pats[] = {
        "a(b|c)d",  "<([ab]{1,3})>", "c.d", "(?<=a)bb", "\\bab\\b", "d{3}",       "(x?)(cc)a",
        "b(a|ab)c", "(?=ab)a",       "a$",  "c(?!d)",   "(?<!<)dd", "<[^>]{0,4}>"};
    static const char *const fulls[] = {"[^<]*<a", "[abcd ]{5}<"};
    static char words[8][8];
    tu_rng r = {2024};
    pcre2_match_data *md = pcre2_match_data_create(8, NULL);
    ck_assert_ptr_nonnull(md);
    sift__trigger_params p;
    sift__trigger_params_init(&p);
    p.max_window = 64;
    p.n_vocab = 16;
    int fired_cases = 0;
    for (int c = 0; c < 400; c++) {
        ref_case rc;
        memset(&rc, 0, sizeof rc);
        rc.n = (size_t)tu_range(&r, 1, 6);
        for (size_t i = 0; i < rc.n; i++) {
            int kind = (int)tu_range(&r, 0, 9);
            if (kind < 4) {
                size_t wl = (size_t)tu_range(&r, 2, 5);
                for (size_t k = 0; k < wl; k++)
                    words[i][k] = "abcd< >"[tu_range(&r, 0, 6)];
                rc.spec[i] = (sift__trigger_spec){SIFT__TRIGGER_WORD, words[i], wl, 0};
            } else if (kind < 8) {
                rc.spec[i] = pat(pats[tu_range(&r, 0, (int64_t)N(pats) - 1)]);
            } else if (kind < 9) {
                rc.spec[i] = full(fulls[tu_range(&r, 0, (int64_t)N(fulls) - 1)]);
            } else {
                rc.spec[i] = tok((int32_t)tu_range(&r, 0, 15));
            }
            if (rc.spec[i].kind == SIFT__TRIGGER_PATTERN ||
                rc.spec[i].kind == SIFT__TRIGGER_PATTERN_FULL) {
                int ec;
                PCRE2_SIZE eo;
                uint32_t o = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
                if (rc.spec[i].kind == SIFT__TRIGGER_PATTERN_FULL)
                    o |= PCRE2_ANCHORED | PCRE2_ENDANCHORED;
                rc.code[i] =
                    pcre2_compile((PCRE2_SPTR)rc.spec[i].text, rc.spec[i].len, o, &ec, &eo, NULL);
                ck_assert_ptr_nonnull(rc.code[i]);
            }
        }
        sift__trigger *t = make(rc.spec, rc.n, &p, NULL);
        char text[4096];
        size_t len = 0;
        int ref_at = -1, got_at = -1, ref_idx = -1;
        uint64_t ref_start = 0;
        int64_t got_start = -1;
        int steps = (int)tu_range(&r, 1, 600);
        for (int step = 0; step < steps && len + 8 < sizeof text; step++) {
            char piece[8];
            size_t pl = (size_t)tu_range(&r, 0, 6);
            for (size_t k = 0; k < pl; k++)
                piece[k] = "abcd< >"[tu_range(&r, 0, 6)];
            int32_t id = (int32_t)tu_range(&r, 0, 15);
            uint64_t ts = len;
            memcpy(text + len, piece, pl);
            len += pl;
            int fired;
            int64_t start;
            ck_assert_int_eq(sift__trigger_feed(t, id, piece, pl, &fired, &start, NULL), SIFT_OK);
            /* A token with no bytes adds no text: only token triggers can
             * fire on it (text triggers were already tried on this text). */
            uint64_t rs = 0;
            int ri = -1;
            if (pl) {
                ri = ref_fire(&rc, text, len, id, ts, md, &rs);
            } else {
                for (size_t i = 0; i < rc.n && ri < 0; i++) {
                    if (rc.spec[i].kind == SIFT__TRIGGER_TOKEN && rc.spec[i].token == id) {
                        ri = (int)i;
                        rs = ts;
                    }
                }
            }
            if (ri >= 0) {
                ref_at = step;
                ref_start = rs;
                ref_idx = ri;
            }
            if (fired) {
                got_at = step;
                got_start = start;
            }
            if (fired || ri >= 0)
                break;
        }
        ck_assert_msg(ref_at == got_at, "case %d: reference fired at %d, set at %d", c, ref_at,
                      got_at);
        if (got_at >= 0) {
            fired_cases++;
            ck_assert_int_eq(sift__trigger_fired_index(t), ref_idx);
            ck_assert_msg((uint64_t)got_start == ref_start, "case %d: start %lld vs %llu", c,
                          (long long)got_start, (unsigned long long)ref_start);
        }
        sift__trigger_free(t);
        for (size_t i = 0; i < rc.n; i++)
            pcre2_code_free(rc.code[i]);
    }
    /* The cases must exercise firing, not only waiting. */
    ck_assert_int_gt(fired_cases, 200);
    pcre2_match_data_free(md);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Cost, memory, clone, reset                                          */
/* ------------------------------------------------------------------ */

START_TEST(test_work_per_token_does_not_grow_with_the_generation)
{
    sift__trigger_spec s[3] = {word("<tool_call>"), pat("<function=(\\w+)>"), tok(5)};
    sift__trigger *t = make(s, 3, NULL, NULL);
    tu_rng r = {11};
    size_t worst_early = 0, worst_late = 0;
    for (int i = 0; i < 60000; i++) {
        char piece[8];
        int len = (int)tu_range(&r, 1, 7);
        for (int k = 0; k < len; k++)
            piece[k] = (char)(' ' + tu_range(&r, 0, 94));
        piece[0] = piece[0] == '<' ? ' ' : piece[0];
        int fired;
        int64_t start;
        ck_assert_int_eq(sift__trigger_feed(t, 6, piece, (size_t)len, &fired, &start, NULL),
                         SIFT_OK);
        if (fired)
            break; /* (random text may spell a trigger; unlikely) */
        size_t sc = sift__trigger_last_scanned(t);
        ck_assert_uint_le(sc, 4096 + 7);
        if (i >= 2000 && i < 3000 && sc > worst_early)
            worst_early = sc;
        if (i >= 59000 && sc > worst_late)
            worst_late = sc;
    }
    /* Once the window is full, the work per token is flat. */
    ck_assert_uint_le(worst_late, worst_early + 7);
    sift__trigger_free(t);
}
END_TEST

START_TEST(test_feeding_allocates_nothing_once_the_buffers_are_sized)
{
    fa f = {0, 0, 0};
    sift_allocator a = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
    sift__alloc al;
    ck_assert_int_eq(sift__alloc_init(&al, &a, NULL), SIFT_OK);
    sift__trigger_spec s[3] = {word("<tool_call>"), pat("(x|y)+z"), pat("<f=(\\w+)>")};
    sift__trigger *t = NULL;
    ck_assert_int_eq(sift__trigger_new(&t, s, 3, NULL, NULL, &al, NULL), SIFT_OK);
    int fired;
    int64_t start;
    tu_rng r = {3};
    /* PCRE2's frames are allocated by the set-up too: from the first
     * feed on, nothing */
    ck_assert_int_gt(f.calls, 0);
    f.calls = 0;
    for (int i = 0; i < 3000; i++) {
        char piece[8];
        int len = (int)tu_range(&r, 1, 7);
        for (int k = 0; k < len; k++)
            piece[k] = "xyab <f"[tu_range(&r, 0, 6)];
        ck_assert_int_eq(sift__trigger_feed(t, 1, piece, (size_t)len, &fired, &start, NULL),
                         SIFT_OK);
        ck_assert_int_eq(fired, 0);
    }
    ck_assert_int_eq(f.calls, 0);
    sift__trigger_free(t);
    ck_assert_int_eq(f.live, 0);
}
END_TEST

START_TEST(test_clone_continues_like_the_original_and_reset_rearms)
{
    sift__trigger_spec s[2] = {word("<call>"), pat("END(\\d+)")};
    sift__trigger *t = make(s, 2, NULL, NULL);
    const char *gen[] = {"text <ca", "ll", "> more"};
    int64_t start;
    int fired;
    ck_assert_int_eq(sift__trigger_feed(t, 1, gen[0], strlen(gen[0]), &fired, &start, NULL),
                     SIFT_OK);
    sift__trigger *c = NULL;
    ck_assert_int_eq(sift__trigger_clone(t, &c, NULL), SIFT_OK);
    for (int k = 0; k < 2; k++) {
        sift__trigger *x = k ? c : t;
        ck_assert_int_eq(sift__trigger_feed(x, 2, gen[1], 2, &fired, &start, NULL), SIFT_OK);
        ck_assert_int_eq(fired, 0);
        ck_assert_int_eq(sift__trigger_feed(x, 3, gen[2], 6, &fired, &start, NULL), SIFT_OK);
        ck_assert_int_eq(fired, 1);
        ck_assert_int_eq(start, 5);
        char r[64];
        replay_str(x, r, sizeof r);
        ck_assert_str_eq(r, "1:<ca|2:ll|3:> more");
    }
    /* Freeing the original leaves the clone whole (its own patterns). */
    sift__trigger_free(t);
    sift__trigger_reset(c);
    /* (\d+ could go on after "42": the match is final at the blank) */
    const char *g2[] = {"END", "42", " "};
    ck_assert_int_eq(feed_all(c, g2, 3, &start), 2);
    ck_assert_int_eq(start, 3);
    sift__trigger_free(c);
    ck_assert_int_eq(sift__trigger_clone(NULL, &c, NULL), SIFT_E_ARG);
}
END_TEST

START_TEST(test_every_allocation_failure_in_new_and_clone_is_nomem_and_leaks_nothing)
{
    sift__trigger_spec s[4] = {word("<a>"), pat("b(c)"), full("[\\s\\S]*d"), tok(1)};
    for (long k = 1;; k++) {
        fa f = {0, k, 0};
        sift_allocator a = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
        sift__alloc al;
        ck_assert_int_eq(sift__alloc_init(&al, &a, NULL), SIFT_OK);
        sift__trigger *t = NULL;
        sift_status st = sift__trigger_new(&t, s, 4, NULL, NULL, &al, NULL);
        if (st == SIFT_OK) {
            ck_assert_int_gt(k, 5);
            sift__trigger_free(t);
            ck_assert_int_eq(f.live, 0);
            break;
        }
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        ck_assert_ptr_null(t);
        ck_assert_int_eq(f.live, 0);
    }
    for (long k = 1;; k++) {
        fa f = {0, 0, 0};
        sift_allocator a = {sizeof(sift_allocator), fa_alloc, fa_free, &f, NULL};
        sift__alloc al;
        ck_assert_int_eq(sift__alloc_init(&al, &a, NULL), SIFT_OK);
        sift__trigger *t = NULL;
        ck_assert_int_eq(sift__trigger_new(&t, s, 4, NULL, NULL, &al, NULL), SIFT_OK);
        int fired;
        int64_t start;
        ck_assert_int_eq(sift__trigger_feed(t, 0, "xyz", 3, &fired, &start, NULL), SIFT_OK);
        f.fail_at = f.calls + k;
        sift__trigger *c = NULL;
        sift_status st = sift__trigger_clone(t, &c, NULL);
        f.fail_at = 0;
        if (st == SIFT_OK) {
            ck_assert_int_eq(sift__trigger_feed(c, 0, "d", 1, &fired, &start, NULL), SIFT_OK);
            ck_assert_int_eq(fired, 1);
            sift__trigger_free(c);
            sift__trigger_free(t);
            ck_assert_int_eq(f.live, 0);
            break;
        }
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        ck_assert_ptr_null(c);
        sift__trigger_free(t);
        ck_assert_int_eq(f.live, 0);
    }
}
END_TEST

START_TEST(test_feed_rejects_null_arguments)
{
    sift__trigger_spec s[1] = {word("a")};
    sift__trigger *t = make(s, 1, NULL, NULL);
    int fired;
    int64_t start;
    ck_assert_int_eq(sift__trigger_feed(NULL, 0, "a", 1, &fired, &start, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift__trigger_feed(t, 0, NULL, 1, &fired, &start, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift__trigger_feed(t, 0, "a", 1, NULL, &start, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift__trigger_feed(t, 0, NULL, 0, &fired, &start, NULL), SIFT_OK);
    ck_assert_int_eq(fired, 0);
    sift__trigger_free(t);
    sift__trigger_free(NULL);
    sift__trigger_reset(NULL);
}
END_TEST

/* Every token is fed, taken back and fed again on one set, and fed once
 * on another: the two must give the same answers and digest equal, with
 * a small window so that compaction happens between feed and undo. */
START_TEST(test_undo_takes_back_a_feed_as_if_it_never_happened)
{
    const sift__trigger_spec specs[] = {word("<tool_call>"), pat("<f=(\\w+)>"), pat("ab+c"),
                                        full("(?s)q.*z"), tok(7)};
    static const char *const pieces[] = {"<tool",  "_call>", "<f=", "x>",   "a",    "b", "c",
                                         "hello ", "q",      "z",   "\xC3", "\xA9", "<", "f=yy>"};
    sift__trigger_params p;
    sift__trigger_params_init(&p);
    p.max_window = 64;
    sift__trigger *t = make(specs, N(specs), &p, NULL), *r = make(specs, N(specs), &p, NULL);
    tu_rng rng = {77};
    int fires = 0;
    for (int i = 0; i < 5000; i++) {
        int64_t k = tu_range(&rng, 0, (int64_t)N(pieces));
        int32_t id = k == (int64_t)N(pieces) ? 7 : (int32_t)(100 + k);
        const char *pc = k == (int64_t)N(pieces) ? "" : pieces[k];
        int f1 = 0, f2 = 0, f3 = 0;
        int64_t s1 = 0, s2 = 0, s3 = 0;
        ck_assert_int_eq(sift__trigger_feed(t, id, pc, strlen(pc), &f1, &s1, NULL), SIFT_OK);
        sift__trigger_undo(t);
        ck_assert_int_eq(sift__trigger_fired_index(t), -1);
        ck_assert_int_eq(sift__trigger_feed(t, id, pc, strlen(pc), &f2, &s2, NULL), SIFT_OK);
        ck_assert_int_eq(sift__trigger_feed(r, id, pc, strlen(pc), &f3, &s3, NULL), SIFT_OK);
        ck_assert_int_eq(f1, f3);
        ck_assert_int_eq(f2, f3);
        ck_assert_int_eq(s2, s3);
        ck_assert_uint_eq(sift__trigger_digest(t, 1), sift__trigger_digest(r, 1));
        if (f3) {
            fires++;
            ck_assert_uint_eq(sift__trigger_n_replay(t), sift__trigger_n_replay(r));
            sift__trigger_reset(t);
            sift__trigger_reset(r);
        }
    }
    ck_assert_int_gt(fires, 50);
    sift__trigger_free(t);
    sift__trigger_free(r);
}
END_TEST

/* ------------------------------------------------------------------ */

Suite *tu_suite(void)
{
    Suite *s = suite_create("trigger");
    struct {
        const char *name;
        const TTest *tests[8];
    } groups[] = {
        {"validation",
         {test_t01_invalid_patterns_are_syntax_errors_with_the_pcre2_message_and_offset,
          test_t02_long_or_deeply_nested_patterns_are_limit_errors,
          test_t09_five_hundred_words_work_and_the_count_is_capped,
          test_t10_empty_words_nul_bytes_and_bad_token_ids_are_located_errors}},
        {"run_time",
         {test_t03_catastrophic_backtracking_is_a_limit_error_not_a_no_match,
          test_t04_split_code_points_and_invalid_utf8_are_handled,
          test_t05_extra_bytes_after_the_trigger_are_replayed,
          test_t06_a_word_fires_inside_a_longer_word,
          test_t07_only_generated_text_is_scanned_and_special_text_is_not_text,
          test_t08_an_unreachable_trigger_waits_with_bounded_work}},
        {"run_time_2",
         {test_t11_whole_text_patterns_are_anchored_and_the_text_is_capped,
          test_t12_a_pattern_matching_the_empty_string_fires_at_the_first_generated_byte,
          test_t13_depth_and_heap_limits_are_limit_errors}},
        {"rules",
         {test_the_lowest_trigger_index_wins_when_several_match_at_one_token,
          test_a_bounded_pattern_fires_exactly_after_100k_bytes_of_text,
          test_lookbehind_sees_text_before_the_search_start,
          test_the_window_agrees_with_whole_text_rescanning_on_random_cases,
          test_a_searched_pattern_fires_only_when_no_later_text_can_change_its_match}},
        {"budget",
         {test_all_patterns_of_a_set_share_one_match_budget_per_token,
          test_one_search_is_bounded_by_the_budget_over_all_its_start_positions}},
        {"cost_and_memory",
         {test_work_per_token_does_not_grow_with_the_generation,
          test_feeding_allocates_nothing_once_the_buffers_are_sized,
          test_clone_continues_like_the_original_and_reset_rearms,
          test_every_allocation_failure_in_new_and_clone_is_nomem_and_leaks_nothing,
          test_feed_rejects_null_arguments, test_undo_takes_back_a_feed_as_if_it_never_happened}},
    };
    for (size_t g = 0; g < N(groups); g++) {
        TCase *tc = tcase_create(groups[g].name);
        for (size_t i = 0; i < N(groups[g].tests) && groups[g].tests[i]; i++)
            tcase_add_test(tc, groups[g].tests[i]);
        suite_add_tcase(s, tc);
    }
    return s;
}

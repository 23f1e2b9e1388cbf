/*
 * check_bitmask.c - the grammar's bitmask calls (sift_grammar_fill_bitmask,
 * sift_grammars_fill_bitmasks), its mask cache, and the vocabulary's
 * shared token index, on the real cl100k vocabulary (tests/data) with
 * one end-of-generation token <|endoftext|> added after its ranks.
 *
 * The truth is the one-token check: at every step of several grammars
 * (json.gbnf, token references, a lazy grammar before and after its
 * trigger, complete states) bit t of the mask must equal
 * sift_grammar_accepts_token(t) for every token t, and the mask must
 * equal sift_grammar_ban's -inf pattern. The cached masks must equal the
 * computed ones bitwise: a grammar without cache and one with a
 * one-state cache (evicting at every new state) walk in lockstep.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "../src/grammar/gbnf.h"
#include "testutil.h"

#ifndef SIFT_SRCDIR
#define SIFT_SRCDIR "."
#endif

#define N(a) (sizeof(a) / sizeof((a)[0]))

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

/* ------------------------------------------------------------------ */
/* The vocabulary                                                      */
/* ------------------------------------------------------------------ */

static sift_vocab *cl;
static int32_t V, EOG;
static size_t NW;
static int32_t *slot;
#define SLOT_BITS 19

static uint32_t hsh(const char *b, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)b[i]) * 16777619u;
    return h;
}

static sift_vocab *load_cl100k(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/cl100k_base.tiktoken", SIFT_SRCDIR);
    sift_error err;
    sift_vocab *base = NULL, *v = NULL;
    if (sift_vocab_load_tiktoken(&base, path, NULL, &err) != SIFT_OK) {
        fprintf(stderr, "cl100k: %s\n", err.message);
        return NULL;
    }
    int32_t id = sift_vocab_size(base);
    static const char *const sp[] = {"<|endoftext|>"};
    sift_vocab_extra x;
    sift_vocab_extra_init(&x);
    x.special_texts = sp;
    x.special_ids = &id;
    x.n_special = 1;
    x.eog_ids = &id;
    x.n_eog = 1;
    if (sift_vocab_extend(&v, base, &x, NULL, &err) != SIFT_OK)
        v = NULL;
    sift_vocab_free(base);
    return v;
}

static void setup(void)
{
    cl = load_cl100k();
    if (!cl)
        return;
    V = sift_vocab_size(cl);
    EOG = V - 1;
    NW = ((size_t)V + 31) / 32;
    uint32_t m = (1u << SLOT_BITS) - 1;
    slot = malloc(((size_t)1 << SLOT_BITS) * sizeof *slot);
    memset(slot, 0xff, ((size_t)1 << SLOT_BITS) * sizeof *slot);
    for (int32_t id = 0; id < EOG; id++) {
        const char *b;
        size_t n;
        if (sift_vocab_piece(cl, id, &b, &n, NULL) || n == 0)
            continue;
        uint32_t h = hsh(b, n) & m;
        while (slot[h] >= 0)
            h = (h + 1) & m;
        slot[h] = id;
    }
}

static void teardown(void)
{
    sift_vocab_free(cl);
    free(slot);
    cl = NULL;
    slot = NULL;
}

static int32_t find(const char *b, size_t n)
{
    uint32_t m = (1u << SLOT_BITS) - 1;
    for (uint32_t h = hsh(b, n) & m; slot[h] >= 0; h = (h + 1) & m) {
        const char *p;
        size_t l;
        if (!sift_vocab_piece(cl, slot[h], &p, &l, NULL) && l == n && !memcmp(p, b, n))
            return slot[h];
    }
    return -1;
}

/* Greedy longest-piece split of s (or, split_utf8, single bytes inside
 * multi-byte characters, so that tokens end mid-sequence). */
static size_t split(const char *s, int split_utf8, int32_t *out, size_t cap)
{
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n && k < cap;) {
        size_t best = 0;
        int32_t id = -1;
        size_t max = (split_utf8 && ((unsigned char)s[i] & 0x80)) ? 1 : (n - i < 48 ? n - i : 48);
        for (size_t l = max; l >= 1 && id < 0; l--)
            if ((id = find(s + i, l)) >= 0)
                best = l;
        ck_assert_msg(id >= 0, "no cl100k token for byte %zu of [%s]", i, s);
        out[k++] = id;
        i += best;
    }
    return k;
}

static sift_grammar *grammar(const char *text, size_t len)
{
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_msg(sift_grammar_new(&g, text, len, cl, NULL, &err) == SIFT_OK, "%s", err.message);
    return g;
}

#define BIT(w, t) (((w)[(t) >> 5] >> ((t)&31)) & 1u)

/* 1 if the n words at w all equal x. */
static int all_words(const uint32_t *w, size_t n, uint32_t x)
{
    for (size_t i = 0; i < n; i++)
        if (w[i] != x)
            return 0;
    return 1;
}

/* The oracle: the mask of g now, compared with the one-token check for
 * every token and with sift_grammar_ban's pattern; returns the allowed
 * count. `mask` holds the fill's result (NW + 1 words: the extra one
 * must be 0). */
static size_t check_mask(sift_grammar *g, const uint32_t *mask, const char *what, size_t step)
{
    ck_assert_uint_eq(mask[NW], 0);
    if (V & 31)
        ck_assert_uint_eq(mask[NW - 1] >> (V & 31), 0);
    size_t n = 0;
    /* plain ifs in the loops: every ck_assert writes to Check's log */
    for (int32_t t = 0; t < V; t++) {
        int ok = -1;
        if (sift_grammar_accepts_token(g, t, &ok, NULL) != SIFT_OK)
            ck_abort_msg("%s step %zu token %d: the check failed", what, step, (int)t);
        if ((int)BIT(mask, t) != ok)
            ck_abort_msg("%s step %zu token %d: mask %u, check %d", what, step, (int)t,
                         BIT(mask, t), ok);
        n += (size_t)ok;
    }
    float *row = calloc(NW * 32, sizeof *row);
    sift_error err;
    sift_status s = sift_grammar_ban(g, row, V, &err);
    if (n == 0) {
        ck_assert_int_eq(s, SIFT_E_GRAMMAR_DEAD);
    } else {
        ck_assert_msg(s == SIFT_OK, "%s", err.message);
        for (int32_t t = 0; t < V; t++)
            if ((row[t] == 0.0f) != (int)BIT(mask, t))
                ck_abort_msg("%s step %zu token %d: ban %g", what, step, (int)t, (double)row[t]);
    }
    free(row);
    return n;
}

/* Walks the tokens through g (default cache), checking every step with
 * the oracle, and through three twins, one without a mask cache, one
 * whose cache holds a single state and one whose cache holds 20 (a
 * block of 16 and part of a second, reused in turn once full): their
 * masks must be bitwise equal.
 * The EOG token is tried at the end when the grammar is complete. */
static void walk_checked(const char *gtext, size_t glen, const int32_t *tok, size_t n,
                         const char *what)
{
    sift_grammar *g = grammar(gtext, glen);
    sift_grammar *h = grammar(gtext, glen);
    sift_grammar *k = grammar(gtext, glen);
    sift_grammar *q = grammar(gtext, glen);
    sift__grammar_set_mask_cache(h, 0);
    sift__grammar_set_mask_cache(k, NW * sizeof(uint32_t));
    sift__grammar_set_mask_cache(q, 20 * NW * sizeof(uint32_t));
    uint32_t *mg = malloc((NW + 1) * sizeof *mg), *mh = malloc((NW + 1) * sizeof *mh),
             *mk = malloc((NW + 1) * sizeof *mk), *mq = malloc((NW + 1) * sizeof *mq);
    sift_error err;
    for (size_t i = 0; i <= n; i++) {
        memset(mg, 0xa5, (NW + 1) * sizeof *mg);
        ck_assert_msg(sift_grammar_fill_bitmask(g, mg, NW + 1, &err) == SIFT_OK, "%s", err.message);
        ck_assert_int_eq(sift_grammar_fill_bitmask(h, mh, NW + 1, &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_fill_bitmask(k, mk, NW + 1, &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_fill_bitmask(q, mq, NW + 1, &err), SIFT_OK);
        ck_assert_msg(memcmp(mg, mq, (NW + 1) * sizeof *mg) == 0,
                      "%s step %zu: 20-state cache differs", what, i);
        ck_assert_msg(memcmp(mg, mh, (NW + 1) * sizeof *mg) == 0,
                      "%s step %zu: cached mask "
                      "differs from the computed one",
                      what, i);
        ck_assert_msg(memcmp(mg, mk, (NW + 1) * sizeof *mg) == 0,
                      "%s step %zu: one-state "
                      "cache differs",
                      what, i);
        check_mask(g, mg, what, i);
        /* a second fill of the same state is the cached copy */
        ck_assert_int_eq(sift_grammar_fill_bitmask(g, mk, NW + 1, &err), SIFT_OK);
        ck_assert(memcmp(mg, mk, (NW + 1) * sizeof *mg) == 0);
        int32_t t = i < n ? tok[i] : EOG;
        if (i == n && !sift_grammar_is_complete(g))
            break;
        ck_assert_msg(BIT(mg, t), "%s step %zu: token %d of the text is not in the mask", what, i,
                      (int)t);
        ck_assert_msg(sift_grammar_accept_token(g, t, &err) == SIFT_OK, "%s", err.message);
        ck_assert_int_eq(sift_grammar_accept_token(h, t, &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_token(k, t, &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_token(q, t, &err), SIFT_OK);
    }
    free(mg);
    free(mh);
    free(mk);
    free(mq);
    sift_grammar_free(g);
    sift_grammar_free(h);
    sift_grammar_free(k);
    sift_grammar_free(q);
}

/* Walks the tokens through g and h (the mask caches off, h also without
 * the loop-signature and counted paths: its walk is the plain one), every
 * step's masks bitwise equal and g's against the one-token check; g must
 * end complete. */
static void lockstep_without_sig(sift_grammar *g, sift_grammar *h, const int32_t *tok, size_t n,
                                 const char *what)
{
    sift__grammar_set_mask_cache(g, 0);
    sift__grammar_set_mask_cache(h, 0);
    sift__grammar_set_sig(h, 0);
    uint32_t *a = malloc((NW + 1) * sizeof *a), *b = malloc((NW + 1) * sizeof *b);
    sift_error err;
    for (size_t i = 0; i <= n; i++) {
        a[NW] = b[NW] = 0;
        ck_assert_int_eq(sift_grammar_fill_bitmask(g, a, NW + 1, &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_fill_bitmask(h, b, NW + 1, &err), SIFT_OK);
        ck_assert_msg(memcmp(a, b, NW * sizeof *a) == 0,
                      "%s step %zu: mask differs from the plain walk", what, i);
        check_mask(g, a, what, i);
        if (i == n)
            break;
        ck_assert_int_eq(sift_grammar_accept_token(g, tok[i], &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_token(h, tok[i], &err), SIFT_OK);
    }
    ck_assert(sift_grammar_is_complete(g));
    free(a);
    free(b);
}

/* ------------------------------------------------------------------ */
/* Equal to the one-token check                                        */
/* ------------------------------------------------------------------ */

static const char *const JSON_TEXTS[] = {
    "{\"name\": \"Ada\", \"tags\": [\"x\", 1.5e3, -0], \"ok\": true, \"n\": null}",
    "[\"caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \\u00e9\\n\", {\"a\": {\"b\": []}}, false]",
};

START_TEST(test_bitmask_equals_the_token_check_along_json_texts)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    size_t len;
    char *json = read_file("grammar/json.gbnf", &len);
    int32_t tok[256];
    int split_utf8 = _i & 1;
    size_t n = split(JSON_TEXTS[_i / 2], split_utf8, tok, N(tok));
    walk_checked(json, len, tok, n, JSON_TEXTS[_i / 2]);
    free(json);
}
END_TEST

START_TEST(test_bitmask_equals_the_token_check_with_token_references)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    /* token elements: a fixed id, any token but one (two NOTs at once
     * allow everything), text after them; complete at the end */
    char g[512];
    int32_t a = find("hello", 5), b = find(" world", 6), c = find("!", 1);
    ck_assert(a >= 0 && b >= 0 && c >= 0);
    snprintf(g, sizeof g,
             "root ::= <[%d]> ( !<[%d]> | <[%d]> ) [a-z !]* tail\n"
             "tail ::= \"!\" ( !<[%d]> | !<[%d]> ) | \"?\"\n",
             (int)a, (int)b, (int)b, (int)a, (int)c);
    int32_t tok[] = {a, b, find("abc", 3), c, a};
    walk_checked(g, strlen(g), tok, N(tok), "token references");
}
END_TEST

/* Grammars whose states loop on byte sets (the walk takes a subtree
 * whose bytes all loop as accepted whole): one control byte left out of
 * the loop, letters only, digits with a tab; a text through each. */
static const struct {
    const char *grammar, *text;
} LOOPS[] = {
    {"root ::= \"\\\"\" [^\"\\x05]* \"\\\"\"\n", "\"say \t hi\n to\x01 all\x1f: {x}\""},
    {"root ::= [a-z ]* \".\"\n", "the quick brown fox jumps over the lazy dog."},
    {"root ::= ( [0-9] | \"\\t\" )* \"x\"\n", "123\t4567\t\t89x"},
    /* classes that admit part of a multi-byte range: prefixes of U+4E2D
     * (and of the Cyrillic block's neighbours) must stay exact */
    {"root ::= [^\\u4e2d\"]* \".\"\n", "\xe6\x96\x87 \xe4\xb8\x8a \xc3\xa9t\xc3\xa9."},
    {"root ::= [\\u0400-\\u04ff a-z]* \".\"\n",
     "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 world."},
    /* every multi-byte character loops (sift__gm_u8_loop): a plain class
     * spelled as ranges around the surrogates, 2-, 3- and 4-byte ones */
    {"root ::= \"\\\"\" [ !#-\\uD7FF\\uE000-\\U0010FFFF]* \"\\\"\"\n",
     "\"caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xed\x9f\xbf\xee\x80\x80 ok\""},
    /* a multi-byte character leads elsewhere (a letter must follow) */
    {"root ::= ( [a-z ] | [^\\x00-\\x7f] [a-z] )* \".\"\n",
     "caf\xc3\xa9t \xe4\xb8\xadx \xf0\x9f\x98\x80y."},
};

START_TEST(test_bitmask_equals_the_token_check_in_looping_states)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    int32_t tok[256];
    size_t n = split(LOOPS[_i].text, 0, tok, N(tok));
    walk_checked(LOOPS[_i].grammar, strlen(LOOPS[_i].grammar), tok, n, LOOPS[_i].text);
}
END_TEST

/* Bounded repetitions past the longest piece (cl100k: 128 bytes): the
 * mask cache keys a state by its counters capped at 130 copies, so the
 * states of one string with more copies left share a mask. Walked a byte
 * a token (every count from the top down through 131, 130, 129, 128 is
 * met) or greedily (the long runs of spaces, up to 48 bytes a token),
 * every step against the one-token check and an uncached twin. */
static const struct {
    const char *grammar;
    int bytewise;
    size_t len; /* characters in the string; 0: as reps_text picks */
    const char *word;
} REPS[] = {
    {"root ::= \"\\\"\" [a-z ]{0,140} \"\\\"\" \".\"\n", 1, 0, NULL},
    {"root ::= \"{\\\"k\\\": \" str \"}\"\n"
     "str ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" [\"\\\\/bfnrt] ){0,132} \"\\\"\"\n",
     1, 0, NULL},
    {"root ::= \"\\\"\" [a-z ]{0,131} \"\\\"\" \".\"\n", 1, 0, NULL},
    {"root ::= \"\\\"\" [a-z ]{3,260} \"\\\"\" \".\"\n", 0, 0, NULL},
    /* S can match nothing: no counter is capped */
    {"root ::= \"\\\"\" ( [a-z ]? ){0,150} \"\\\"\" \".\"\n", 1, 0, NULL},
    /* short counts, nested (words of at most 6 letters, at most 40 of
     * them), and multi-byte characters: the walk's shifted loops */
    {"root ::= \"\\\"\" ( [a-z]{1,6} \" \" ){0,40} \"\\\"\" \".\"\n", 0, 0, NULL},
    {"root ::= \"\\\"\" [^\"]{0,60} \"\\\"\" \".\"\n", 1, 0, NULL},
    /* the inline copies of S{m,n} (m of them written in place): a run of
     * equal elements whose positions are capped and erased like the
     * helpers' (move_runs); exactly 140, 133 to 137, a rule's copies */
    {"root ::= \"\\\"\" [a-z ]{140} \"\\\"\" \".\"\n", 1, 140, NULL},
    {"root ::= \"\\\"\" [a-z ]{133,137} \"\\\"\" \".\"\n", 0, 135, NULL},
    {"root ::= \"\\\"\" w{140} \"\\\"\" \".\"\n"
     "w ::= [a-z] | \" \"\n",
     1, 140, NULL},
    /* a literal's characters are a run too */
    {"root ::= \"\\\"\" \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" "
     "\"\\\"\" \".\"\n",
     1, 140, "a"},
    /* the JSON Schema compiler's long maxLength (blocks of copies, each
     * a run of one rule's copies), crossing from one block to the next */
    {"root ::= \"\\\"\" s1{3} ( s2{0,2} s1{0,149} | s2{3} s1{0,20} ) \"\\\"\" \".\"\n"
     "s1 ::= [a-z ]\n"
     "s2 ::= s1{150}\n",
     0, 200, NULL},
};

/* A text for REPS[i]: a string of about 130 characters, spaces in runs. */
static void reps_text(int i, char *buf, size_t cap)
{
    size_t k = 0;
    if (i == 1) {
        memcpy(buf, "{\"k\": ", 6);
        k = 6;
    }
    buf[k++] = '"';
    const char *word = REPS[i].word ? REPS[i].word
                       : i == 1     ? "ab\\n c\\\"d  "
                       : i == 5     ? "abc de fghijk l "
                       : i == 6     ? "caf\xc3\xa9 \xe4\xb8\xad  x"
                                    : "abc de  fgh    ij ";
    size_t target = REPS[i].len ? REPS[i].len : i == 3 ? 200 : i == 5 ? 160 : i == 6 ? 57 : 128;
    for (size_t n = 0; n < target; n++)
        buf[k++] = word[n % strlen(word)];
    if (i == 3)
        for (size_t n = 0; n < 48; n++)
            buf[k++] = ' ';
    if (i == 1 && buf[k - 1] == '\\')
        buf[k++] = 'n';
    buf[k++] = '"';
    buf[k++] = i == 1 ? '}' : '.';
    buf[k] = 0;
    ck_assert_uint_lt(k, cap);
}

START_TEST(test_bitmask_equals_the_token_check_in_long_bounded_repetitions)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    char text[512];
    reps_text(_i, text, sizeof text);
    int32_t tok[512];
    size_t n = 0;
    if (REPS[_i].bytewise) {
        for (size_t k = 0; text[k]; k++) {
            tok[n] = find(text + k, 1);
            ck_assert_int_ge(tok[n], 0);
            n++;
        }
    } else {
        n = split(text, 0, tok, N(tok));
    }
    walk_checked(REPS[_i].grammar, strlen(REPS[_i].grammar), tok, n, text);
}
END_TEST

START_TEST(test_states_with_more_copies_left_than_a_token_share_one_mask)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    /* 400 copies: the first 270 characters are all past the bound,
     * whether the copies are optional (helpers) or written in place */
    static const char *const GS[] = {"root ::= \"\\\"\" [a-z ]{0,400} \"\\\"\"\n",
                                     "root ::= \"\\\"\" [a-z ]{400} \"\\\"\"\n"};
    const char *G = GS[_i];
    sift_grammar *g = grammar(G, strlen(G));
    uint32_t *a = malloc(NW * sizeof *a);
    sift_error err;
    const char *text = "\"the quick brown fox jumps over the lazy dog again";
    size_t n = strlen(text);
    for (size_t k = 0; k < n; k++) {
        ck_assert_int_eq(sift_grammar_fill_bitmask(g, a, NW, &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_token(g, find(text + k, 1), &err), SIFT_OK);
    }
    uint64_t hits, misses;
    sift__grammar_mask_stats(g, &hits, &misses);
    /* the start and the first state inside the string */
    ck_assert_uint_eq(misses, 2);
    ck_assert_uint_eq(hits, n - 2);
    free(a);
    sift_grammar_free(g);
}
END_TEST

/* Strings whose characters run out within a few (the mask's counted
 * path: a chain of states, one per character left, and depth masks of
 * the trie's paths inside the string); each walked to its bound, token
 * by token and byte by byte (tokens ending inside a character or an
 * escape), every step against the one-token check and a twin without the
 * path. `counted`: the fewest masks the path must have computed, or 0
 * for none (a continuation that also admits the string's characters
 * keeps it off). */
#define JCHAR "( [^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\/bfnrt] )"
static const struct {
    const char *grammar, *text;
    int counted;
} CNTS[] = {
    {"root ::= \"{\\\"k\\\": \" str \"}\"\nstr ::= \"\\\"\" " JCHAR "{0,20} \"\\\"\"\n",
     "{\"k\": \"ab\\nc\xc3\xa9\xe4\xb8\xad d\\\"e fghijklmn\"}", 8},
    /* a minLength: 8 copies written in place, then 12 optional */
    {"root ::= \"{\\\"k\\\": \" str \"}\"\nstr ::= \"\\\"\" " JCHAR "{8,20} \"\\\"\"\n",
     "{\"k\": \"ab\\nc\xc3\xa9\xe4\xb8\xad d\\\"e fghijklmn\"}", 8},
    /* strings in a bounded list: an outer counter on the stacks */
    {"root ::= \"[\" ( str \",\" ){0,3} \"]\"\nstr ::= \"\\\"\" " JCHAR "{0,6} \"\\\"\"\n",
     "[\"abcdef\",\"xy\",\"\xc3\xa9\xe4\xb8\xad"
     "abcd\",]",
     4},
    /* blocks of blocks (the copies counted in bytes: a block of 4, one
     * of 12), 35 characters at most; then the same over [a-z ], too few
     * characters for the counted path */
    {"root ::= \"\\\"\" s3{0,2} s2{0,2} s1{0,3} \"\\\"\" \".\"\ns1 ::= " JCHAR
     "\ns2 ::= s1{4}\ns3 ::= s2{3}\n",
     "\"a\\nbc\xc3\xa9\xe4\xb8\xad d\\\"e fghijklmnopqrstuvwxyz01\".", 1},
    {"root ::= \"\\\"\" s3{0,2} s2{0,2} s1{0,3} \"\\\"\" \".\"\ns1 ::= [a-z ]\n"
     "s2 ::= s1{4}\ns3 ::= s2{3}\n",
     "\"the quick brown fox jumps over a do\".", 0},
    /* the characters stay alive past the count: never counted */
    {"root ::= \"\\\"\" [^\"\\\\\\x00-\\x1f]{0,12} [^\"\\\\\\x00-\\x1f]* \"\\\"\"\n",
     "\"abcd\xc3\xa9\xe4\xb8\xad fghijklmnopq\"", 0},
};

START_TEST(test_counted_strings_near_their_bound_keep_masks_exact)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    const char *G = CNTS[_i / 2].grammar;
    int32_t tok[128];
    size_t n = split(CNTS[_i / 2].text, _i & 1, tok, N(tok));
    sift_grammar *g = grammar(G, strlen(G)), *h = grammar(G, strlen(G));
    lockstep_without_sig(g, h, tok, n, "counted");
    uint64_t masks, builds;
    sift__grammar_cnt_stats(g, &masks, &builds);
    if (CNTS[_i / 2].counted) {
        ck_assert_uint_ge(masks, (uint64_t)CNTS[_i / 2].counted);
        ck_assert_uint_eq(builds, 1);
    } else {
        ck_assert_uint_eq(masks, 0);
    }
    sift__grammar_cnt_stats(h, &masks, &builds);
    ck_assert_uint_eq(masks + builds, 0);
    sift_grammar_free(g);
    sift_grammar_free(h);
}
END_TEST

/* The copies of a repetition of repetitions count in bytes: the JSON
 * Schema compiler's maxLength of 4096 (blocks of 1000 characters, three
 * of them optional) leaves every counter of the string's first state
 * thousands of bytes from its end, so the walk takes most subtrees whole
 * there (before, a block's copies counted 1 each and the walk visited
 * about every trie node). Masks against the one-token check. */
START_TEST(test_a_repetition_of_long_blocks_counts_its_copies_in_bytes)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    const char *G = "root ::= \"\\\"\" s2{0} s1{0} ( s2{0,3} s1{0,999} | s2{4} s1{0,96} ) "
                    "\"\\\"\" \".\"\n"
                    "s1 ::= " JCHAR "\n"
                    "s2 ::= s1{1000}\n";
    const char *text = "\"http://example.com/a?b=c&d=\\\"\xc3\xa9\\\" e\".";
    int32_t tok[64];
    size_t n = split(text, 0, tok, N(tok));
    sift_grammar *g = grammar(G, strlen(G));
    sift__grammar_set_mask_cache(g, 0);
    uint32_t *a = malloc((NW + 1) * sizeof *a);
    sift_error err;
    for (size_t i = 0; i <= n; i++) {
        a[NW] = 0;
        ck_assert_int_eq(sift_grammar_fill_bitmask(g, a, NW + 1, &err), SIFT_OK);
        if (i == 1)
            ck_assert_int_lt(sift__grammar_last_work(g), 250000); /* 313,490 when copies count 1 */
        check_mask(g, a, "blocks", i);
        if (i == n)
            break;
        ck_assert_int_eq(sift_grammar_accept_token(g, tok[i], &err), SIFT_OK);
    }
    ck_assert(sift_grammar_is_complete(g));
    free(a);
    sift_grammar_free(g);
}
END_TEST

/* Pieces for the walk's multi-byte loop test: whole characters of 2, 3
 * and 4 bytes, pieces that end inside one, and invalid UTF-8 below valid
 * prefixes (a stray continuation, an overlong form, a surrogate, a code
 * point past U+10FFFF, a byte never in UTF-8), some with a quote. */
static const char *const U8_PIECES[] = {
    "\"", "a", "\xc3\xa9", "\xc3", "\xa9", "a\xc3",
    "a\xc3\xa9"
    "b",
    "a\xc3\xa9\"", "\xe4\xb8\xad", "\xe4\xb8", "a\xe4\xb8", "\xed\x9f\xbf", "\xed\xa0\x80",
    "a\xed\xa0\x80", "\xe0\x80\x80", "a\xe0\xa0\x80", "\xc0\xaf", "a\xc1\xbf", "a\xff", "a\xa9",
    "\xf0\x9f\x98\x80", "a\xf0\x9f", "\xf4\x90\x80\x80", "a\xf4\x8f\xbf\xbf", "b", "ab\xc3\xa9",
    /* subtrees whose bytes below are all valid (c, e: taken whole when
     * every character loops; e's pieces end inside characters) or hold
     * one invalid sequence (d, f, g, h) */
    "c", "c\xc3\xa9", "c\xe4\xb8\xad",
    "c\xc3\xa9"
    "b\xf0\x9f\x98\x80",
    "d", "d\xc3\xa9", "d\xa9", "e", "e\xc3", "e\xe4\xb8", "e\xf0\x9f\x98", "f", "f\xed\x9f\xbf",
    "f\xed\xa0\x80", "g", "g\xf0\x9f\x98\x80", "g\xf4\x90\x80\x80", "h", "h\xe0\xa0\x80",
    "h\xe0\x80\x80", "<eos>"};

START_TEST(test_multibyte_loops_keep_invalid_utf8_and_other_paths_rejected)
{
    /* on a vocabulary of U8_PIECES: JSON-like strings whose states loop
     * on every character (negated and plain classes), one whose class
     * leaves U+4E2D out, one where a character must be followed by a
     * letter; mask = one-token check at every step, with the mask cache
     * off so that every step walks */
    static const char *const G[] = {
        "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1f]* \"\\\"\"\n",
        "root ::= \"\\\"\" [ !#-\\uD7FF\\uE000-\\U0010FFFF]* \"\\\"\"\n",
        "root ::= \"\\\"\" [^\\u4e2d\"]* \"\\\"\"\n",
        "root ::= \"\\\"\" ( [ab] | [^\\x00-\\x7f] \"b\" )* \"\\\"\"\n",
    };
    size_t n = N(U8_PIECES);
    ck_assert_uint_le(n, 64);
    size_t lens[N(U8_PIECES)];
    for (size_t i = 0; i < n; i++)
        lens[i] = strlen(U8_PIECES[i]);
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_int_eq(sift_vocab_new(&v, (int32_t)n, U8_PIECES, lens, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, (int32_t)n - 1, SIFT_TOKEN_EOG, &err), SIFT_OK);
    /* the text: quote, a, é, U+4E29 in two pieces, 😀, b, c, quote */
    const int32_t walk[] = {0, 1, 2, 9, 4, 20, 24, 26, 1, 0};
    for (size_t gi = 0; gi < N(G); gi++) {
        sift_grammar *g = NULL;
        ck_assert_msg(sift_grammar_new(&g, G[gi], strlen(G[gi]), v, NULL, &err) == SIFT_OK, "%s",
                      err.message);
        sift__grammar_set_mask_cache(g, 0);
        for (size_t i = 0; i < N(walk); i++) {
            uint32_t m[2] = {0, 0};
            ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, 2, &err), SIFT_OK);
            for (int32_t t = 0; t < (int32_t)n; t++) {
                int ok = -1;
                ck_assert_int_eq(sift_grammar_accepts_token(g, t, &ok, &err), SIFT_OK);
                ck_assert_msg((int)BIT(m, t) == ok,
                              "grammar %zu step %zu token %d: mask %u check %d", gi, i, (int)t,
                              BIT(m, t), ok);
            }
            /* step through the text where the grammar allows it */
            int ok = 0;
            ck_assert_int_eq(sift_grammar_accepts_token(g, walk[i], &ok, &err), SIFT_OK);
            if (!ok)
                break;
            ck_assert_int_eq(sift_grammar_accept_token(g, walk[i], &err), SIFT_OK);
        }
        sift_grammar_free(g);
    }
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_multibyte_characters_in_bounded_repetitions_keep_masks_exact)
{
    /* the shifted loops of group 1 (a character takes one copy): on the
     * U8_PIECES vocabulary (longest piece 8 bytes, so a bound of 14 has
     * its counters erased), strings of at most 14 characters whose class
     * admits every multi-byte character, all but U+4E2D, or only as the
     * start of a pair; walked to the bound, where pieces of several
     * characters must be cut off; mask = one-token check at every step,
     * mask cache off */
    static const char *const G[] = {
        "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1f]{0,14} \"\\\"\"\n",
        "root ::= \"\\\"\" [^\"\\u4e2d]{0,14} \"\\\"\"\n",
        "root ::= \"\\\"\" ( [ab] | [^\\x00-\\x7f] \"b\" ){0,14} \"\\\"\"\n",
        /* copies written in place (a run; move_runs): 15 exactly, 9 to 15 */
        "root ::= \"\\\"\" [^\"\\\\\\x00-\\x1f]{15} \"\\\"\"\n",
        "root ::= \"\\\"\" [^\"\\u4e2d]{9,15} \"\\\"\"\n",
    };
    size_t n = N(U8_PIECES);
    size_t lens[N(U8_PIECES)];
    for (size_t i = 0; i < n; i++)
        lens[i] = strlen(U8_PIECES[i]);
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_int_eq(sift_vocab_new(&v, (int32_t)n, U8_PIECES, lens, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, (int32_t)n - 1, SIFT_TOKEN_EOG, &err), SIFT_OK);
    /* quote, then a é b a é c 😀 b a é b a é b (15 characters), quote */
    const int32_t walk[] = {0, 1, 2, 24, 1, 2, 26, 20, 24, 1, 2, 24, 1, 2, 24, 0};
    for (size_t gi = 0; gi < N(G); gi++) {
        sift_grammar *g = NULL;
        ck_assert_msg(sift_grammar_new(&g, G[gi], strlen(G[gi]), v, NULL, &err) == SIFT_OK, "%s",
                      err.message);
        sift__grammar_set_mask_cache(g, 0);
        for (size_t i = 0; i < N(walk); i++) {
            uint32_t m[2] = {0, 0};
            ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, 2, &err), SIFT_OK);
            for (int32_t t = 0; t < (int32_t)n; t++) {
                int ok = -1;
                ck_assert_int_eq(sift_grammar_accepts_token(g, t, &ok, &err), SIFT_OK);
                ck_assert_msg((int)BIT(m, t) == ok,
                              "grammar %zu step %zu token %d: mask %u check %d", gi, i, (int)t,
                              BIT(m, t), ok);
            }
            int ok = 0;
            ck_assert_int_eq(sift_grammar_accepts_token(g, walk[i], &ok, &err), SIFT_OK);
            if (!ok)
                break;
            ck_assert_int_eq(sift_grammar_accept_token(g, walk[i], &err), SIFT_OK);
        }
        sift_grammar_free(g);
    }
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_a_class_that_admits_part_of_a_multibyte_range_rejects_the_rest)
{
    /* the matcher's partial states: U+4E2D (E4 B8 AD) is outside the
     * class, its neighbour U+4E0A (E4 B8 8A) inside; a partial state is
     * only merged with others when every stack admits the whole range
     * the pending bytes can still become */
    const char *gt = "root ::= [^\\u4e2d\"]* \".\"\n";
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), NULL, NULL, &err), SIFT_OK);
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(sift_grammar_accept_bytes(g, "\xe4\xb8", 2, &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_bytes(g, "\xad", 1, &err), SIFT_E_GRAMMAR_REJECT);
        ck_assert_int_eq(sift_grammar_accept_bytes(g, "\x8a", 1, &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_bytes(g, "\xe4\xb8\xad", 3, &err),
                         SIFT_E_GRAMMAR_REJECT);
        /* a whole-range prefix (U+4F00..U+4F3F) is admitted whatever follows */
        ck_assert_int_eq(sift_grammar_accept_bytes(g, "\xe4\xbc\x80\xe4\xbc\xbf", 6, &err),
                         SIFT_OK);
    }
    ck_assert_int_eq(sift_grammar_accept_bytes(g, ".", 1, &err), SIFT_OK);
    ck_assert(sift_grammar_is_complete(g));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_control_byte_outside_the_loop_is_not_skipped)
{
    /* control bytes other than \t \n \r share one group in the walk's
     * loop test: "a\x05" must stay rejected in a state where \x06 and
     * the letters loop but \x05 does not, on every visit of that state */
    static const char *const pieces[] = {"\"",    "\x05",   "\x06", "a",     "b",
                                         "a\x05", "a\x06b", "ab",   "b\x06", "<eos>"};
    size_t lens[N(pieces)];
    for (size_t i = 0; i < N(pieces); i++)
        lens[i] = strlen(pieces[i]);
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_int_eq(sift_vocab_new(&v, (int32_t)N(pieces), pieces, lens, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, (int32_t)N(pieces) - 1, SIFT_TOKEN_EOG, &err), SIFT_OK);
    const char *gt = "root ::= \"\\\"\" [^\"\\x05]* \"\\\"\"\n";
    sift_grammar *g = NULL;
    ck_assert_int_eq(sift_grammar_new(&g, gt, strlen(gt), v, NULL, &err), SIFT_OK);
    sift__grammar_set_mask_cache(g, 0); /* walk at every step */
    const int32_t walk[] = {0, 3, 4, 2, 7, 8, 3, 4, 7};
    for (size_t i = 0; i < N(walk); i++) {
        uint32_t m = 0;
        ck_assert_int_eq(sift_grammar_fill_bitmask(g, &m, 1, &err), SIFT_OK);
        for (int32_t t = 0; t < (int32_t)N(pieces); t++) {
            int ok = -1;
            ck_assert_int_eq(sift_grammar_accepts_token(g, t, &ok, &err), SIFT_OK);
            ck_assert_msg((int)((m >> t) & 1) == ok, "step %zu token %d: mask %u check %d", i,
                          (int)t, (m >> t) & 1, ok);
        }
        ck_assert_int_eq(sift_grammar_accept_token(g, walk[i], &err), SIFT_OK);
    }
    sift_grammar_free(g);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_bitmask_of_a_lazy_grammar_allows_everything_until_its_trigger)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    size_t len;
    char *json = read_file("grammar/json.gbnf", &len);
    /* the grammar receives the text from the trigger word on */
    static const char start[] = "start ::= \"CALL\" root\n";
    json = realloc(json, len + sizeof start);
    memcpy(json + len, start, sizeof start);
    len += sizeof start - 1;
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.root = "start";
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_msg(sift_grammar_new(&g, json, len, cl, &gp, &err) == SIFT_OK, "%s", err.message);
    static const char *words[] = {"CALL"};
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = words;
    lp.n_words = 1;
    ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_OK);
    uint32_t *m = malloc((NW + 1) * sizeof *m);
    int32_t pre[64];
    size_t np = split("Let me look. CALL", 0, pre, N(pre));
    for (size_t i = 0; i < np; i++) {
        ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, NW + 1, &err), SIFT_OK);
        /* every token of the vocabulary, nothing past it */
        for (size_t w = 0; w + 1 < NW; w++)
            if (m[w] != 0xffffffffu)
                ck_abort_msg("lazy, waiting: word %zu is %08x", w, m[w]);
        check_mask(g, m, "lazy, waiting", i);
        ck_assert_int_eq(sift_grammar_accept_token(g, pre[i], &err), SIFT_OK);
    }
    /* triggered: the mask is the grammar's now */
    int32_t post[64];
    size_t nq = split(" {\"a\": [1, \"b\"]}", 0, post, N(post));
    size_t allowed_first = 0;
    for (size_t i = 0; i < nq; i++) {
        memset(m, 0x5a, (NW + 1) * sizeof *m);
        ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, NW + 1, &err), SIFT_OK);
        size_t k = check_mask(g, m, "lazy, triggered", i);
        if (i == 0)
            allowed_first = k;
        ck_assert_int_eq(sift_grammar_accept_token(g, post[i], &err), SIFT_OK);
    }
    ck_assert_uint_lt(allowed_first, (size_t)V / 2);
    /* complete: EOG allowed */
    ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, NW + 1, &err), SIFT_OK);
    ck_assert(sift_grammar_is_complete(g));
    ck_assert_uint_eq(BIT(m, EOG), 1);
    check_mask(g, m, "lazy, complete", nq);
    free(m);
    free(json);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_bitmask_of_a_complete_grammar_allows_only_end_of_generation)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    const char *g = "root ::= \"yes\" | \"no\"\n";
    sift_grammar *gr = grammar(g, strlen(g));
    sift_error err;
    uint32_t *m = malloc((NW + 1) * sizeof *m);
    ck_assert_int_eq(sift_grammar_fill_bitmask(gr, m, NW + 1, &err), SIFT_OK);
    ck_assert_uint_eq(BIT(m, EOG), 0);
    ck_assert_uint_eq(BIT(m, find("yes", 3)), 1);
    ck_assert_int_eq(sift_grammar_accept_token(gr, find("yes", 3), &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_fill_bitmask(gr, m, NW + 1, &err), SIFT_OK);
    ck_assert_uint_eq(check_mask(gr, m, "complete", 1), 1);
    ck_assert_uint_eq(BIT(m, EOG), 1);
    free(m);
    sift_grammar_free(gr);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The mask cache                                                      */
/* ------------------------------------------------------------------ */

START_TEST(test_a_state_met_again_takes_its_mask_from_the_cache)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    size_t len;
    char *json = read_file("grammar/json.gbnf", &len);
    sift_grammar *g = grammar(json, len), *h = grammar(json, len);
    sift__grammar_set_mask_cache(h, 0);
    int32_t tok[256];
    size_t n = split("{\"k\": \"a long string with many words in it\", \"q\": \"more words\"}", 0,
                     tok, N(tok));
    uint32_t *a = malloc(NW * sizeof *a), *b = malloc(NW * sizeof *b);
    sift_error err;
    for (int round = 0; round < 2; round++) {
        sift_grammar_reset(g);
        sift_grammar_reset(h);
        for (size_t i = 0; i < n; i++) {
            ck_assert_int_eq(sift_grammar_fill_bitmask(g, a, NW, &err), SIFT_OK);
            ck_assert_int_eq(sift_grammar_fill_bitmask(h, b, NW, &err), SIFT_OK);
            ck_assert(memcmp(a, b, NW * sizeof *a) == 0);
            ck_assert_int_eq(sift_grammar_accept_token(g, tok[i], &err), SIFT_OK);
            ck_assert_int_eq(sift_grammar_accept_token(h, tok[i], &err), SIFT_OK);
        }
    }
    uint64_t hits, misses, hh, hm;
    sift__grammar_mask_stats(g, &hits, &misses);
    sift__grammar_mask_stats(h, &hh, &hm);
    /* inside a string the state repeats; the second round is all hits */
    ck_assert_uint_ge(hits, n);
    ck_assert_uint_lt(misses, n);
    ck_assert_uint_eq(hh, 0);
    ck_assert_uint_eq(hm, 2 * n);
    free(a);
    free(b);
    free(json);
    sift_grammar_free(g);
    sift_grammar_free(h);
}
END_TEST

/* A cycle of 18 states through a cache of 20 masks: the slots fill a
 * block of 16 and part of the next, and from the second round on every
 * state hits; each mask must equal the uncached one. */
START_TEST(test_a_cache_across_blocks_returns_each_state_its_own_mask)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    static const char gtext[] = "root ::= ( \"abcdefghijklmnopqr\" )* \".\"\n";
    sift_grammar *g = grammar(gtext, strlen(gtext)), *h = grammar(gtext, strlen(gtext));
    sift__grammar_set_mask_cache(g, 20 * NW * sizeof(uint32_t));
    sift__grammar_set_mask_cache(h, 0);
    uint32_t *a = malloc(NW * sizeof *a), *b = malloc(NW * sizeof *b);
    sift_error err;
    for (int round = 0; round < 3; round++) {
        for (char ch = 'a'; ch <= 'r'; ch++) {
            int32_t t = find(&ch, 1);
            ck_assert(t >= 0);
            ck_assert_int_eq(sift_grammar_fill_bitmask(g, a, NW, &err), SIFT_OK);
            ck_assert_int_eq(sift_grammar_fill_bitmask(h, b, NW, &err), SIFT_OK);
            ck_assert_msg(memcmp(a, b, NW * sizeof *a) == 0, "round %d before %c", round, ch);
            ck_assert_int_eq(sift_grammar_accept_token(g, t, &err), SIFT_OK);
            ck_assert_int_eq(sift_grammar_accept_token(h, t, &err), SIFT_OK);
        }
    }
    uint64_t hits, misses;
    sift__grammar_mask_stats(g, &hits, &misses);
    ck_assert_uint_eq(misses, 18);
    ck_assert_uint_eq(hits, 2 * 18);
    free(a);
    free(b);
    sift_grammar_free(g);
    sift_grammar_free(h);
}
END_TEST

START_TEST(test_loop_signatures_past_the_cache_slots_keep_masks_exact)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    /* twenty strings, each leaving one letter out of its loop: twenty
     * loop signatures through a cache of fewer slots (SIG_SLOTS), two
     * met again (evicted and rebuilt); every step against the one-token
     * check and a twin without signatures (whose walk is the plain one) */
    /* root ::= k0 " " k1 " " ... k19 " " k0 " " k1, k<i> a string
     * without letter 'a' + i */
    char G[2048];
    size_t gl = (size_t)snprintf(G, sizeof G, "root ::=");
    for (int i = 0; i < 22; i++)
        gl += (size_t)snprintf(G + gl, sizeof G - gl, "%s k%d", i ? " \" \"" : "", i % 20);
    gl += (size_t)snprintf(G + gl, sizeof G - gl, "\n");
    for (int i = 0; i < 20; i++)
        gl += (size_t)snprintf(G + gl, sizeof G - gl, "k%d ::= \"\\\"\" [^\"\\\\%c]* \"\\\"\"\n", i,
                               'a' + i);
    ck_assert_uint_lt(gl, sizeof G);
    const char *text = "\"xyz cbd\" \"hello \xe4\xb8\xad\" \"bad\" \"cab\" \"abc\" \"bcd "
                       "\xf0\x9f\x98\x80\" \"abc\" \"abc\" \"abc\" \"abc\" \"xyz\" \"xyz\" "
                       "\"xyz\" \"xyz\" \"xyz\" \"xyz\" \"xyz\" \"xyz\" \"xyz\" \"abc\" \"bcd\" "
                       "\"acd\"";
    int32_t tok[256];
    size_t n = split(text, 0, tok, N(tok));
    sift_grammar *g = grammar(G, strlen(G)), *h = grammar(G, strlen(G));
    lockstep_without_sig(g, h, tok, n, "signatures");
    uint64_t hits, builds;
    sift__grammar_sig_stats(g, &hits, &builds);
    ck_assert_uint_gt(builds, 20); /* evicted and built again */
    ck_assert_uint_gt(hits, 0);
    sift__grammar_sig_stats(h, &hits, &builds);
    ck_assert_uint_eq(builds, 0);
    sift_grammar_free(g);
    sift_grammar_free(h);
}
END_TEST

START_TEST(test_masks_stay_exact_when_the_matcher_caches_are_rebuilt)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    /* tiny soft limits: the matcher rebuilds its caches (new state ids)
     * at almost every accept; cached masks of the old ids must not be
     * served */
    size_t len;
    char *json = read_file("grammar/json.gbnf", &len);
    sift_grammar *g = grammar(json, len), *h = grammar(json, len);
    sift__grammar_set_soft_limits(g, 64, 4, 1024);
    sift__grammar_set_mask_cache(h, 0);
    int32_t tok[256];
    size_t n = split("[\"ab\", {\"c\": [1, 2, \"de\"]}, \"ab\", 3]", 0, tok, N(tok));
    uint32_t *a = malloc(NW * sizeof *a), *b = malloc(NW * sizeof *b);
    sift_error err;
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(sift_grammar_fill_bitmask(g, a, NW, &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_fill_bitmask(h, b, NW, &err), SIFT_OK);
        ck_assert_msg(memcmp(a, b, NW * sizeof *a) == 0, "step %zu", i);
        ck_assert_int_eq(sift_grammar_accept_token(g, tok[i], &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_token(h, tok[i], &err), SIFT_OK);
    }
    free(a);
    free(b);
    free(json);
    sift_grammar_free(g);
    sift_grammar_free(h);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Errors and the batched form                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_fill_bitmask_refuses_a_short_mask_and_leaves_it_unchanged)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    const char *gt = "root ::= \"a\"+\n";
    sift_grammar *g = grammar(gt, strlen(gt));
    uint32_t *m = malloc(NW * sizeof *m);
    memset(m, 0x77, NW * sizeof *m);
    sift_error err;
    ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, NW - 1, &err), SIFT_E_ARG);
    ck_assert_msg(strstr(err.message, "too short") != NULL, "%s", err.message);
    ck_assert_int_eq(sift_grammar_fill_bitmask(g, NULL, NW, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_grammar_fill_bitmask(NULL, m, NW, &err), SIFT_E_ARG);
    ck_assert(all_words(m, NW, 0x77777777u));
    sift_grammar *nv = NULL;
    ck_assert_int_eq(sift_grammar_new(&nv, gt, strlen(gt), NULL, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_fill_bitmask(nv, m, NW, &err), SIFT_E_ARG);
    sift_grammar_free(nv);
    free(m);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_fill_bitmask_over_budget_fails_and_leaves_the_grammar_usable)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    size_t len;
    char *json = read_file("grammar/json.gbnf", &len);
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_step_work = 5000; /* a whole-vocabulary walk needs far more */
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&g, json, len, cl, &p, &err), SIFT_OK);
    uint32_t *m = malloc(NW * sizeof *m);
    memset(m, 0x11, NW * sizeof *m);
    ck_assert_int_eq(sift_grammar_fill_bitmask(g, m, NW, &err), SIFT_E_GRAMMAR_LIMIT);
    ck_assert(all_words(m, NW, 0x11111111u));
    /* usable: the cheap calls still work and the state is unchanged */
    int ok = 0;
    ck_assert_int_eq(sift_grammar_accepts_token(g, find("{", 1), &ok, &err), SIFT_OK);
    ck_assert_int_eq(ok, 1);
    ck_assert_int_eq(sift_grammar_accept_token(g, find("{", 1), &err), SIFT_OK);
    free(m);
    free(json);
    sift_grammar_free(g);
}
END_TEST

/* The counted path's first use builds the root entry and its masks
 * (400,000 to 500,000 units on cl100k, found by review): with a budget
 * the plain walk fits in (300,000) and those builds do not, every mask
 * of a short string must still come out, by the walk, equal to a twin's
 * with the default budget. */
START_TEST(test_the_counted_path_stands_aside_when_the_budget_is_short)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    const char *G = "root ::= \"\\\"\" s1{0,20} \"\\\"\"\ns1 ::= " JCHAR "\n";
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_step_work = 300000;
    sift_grammar *g = NULL, *h = grammar(G, strlen(G));
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&g, G, strlen(G), cl, &p, &err), SIFT_OK);
    uint32_t *a = malloc(NW * sizeof *a), *b = malloc(NW * sizeof *b);
    const char *text = "\"abcdefghij klmnopqr\"";
    for (size_t k = 0; text[k]; k++) {
        ck_assert_msg(sift_grammar_fill_bitmask(g, a, NW, &err) == SIFT_OK, "step %zu: %s", k,
                      err.message);
        ck_assert_int_eq(sift_grammar_fill_bitmask(h, b, NW, &err), SIFT_OK);
        ck_assert_msg(memcmp(a, b, NW * sizeof *a) == 0, "step %zu: masks differ", k);
        ck_assert_int_eq(sift_grammar_accept_token(g, find(text + k, 1), &err), SIFT_OK);
        ck_assert_int_eq(sift_grammar_accept_token(h, find(text + k, 1), &err), SIFT_OK);
    }
    uint64_t masks, builds;
    sift__grammar_cnt_stats(h, &masks, &builds);
    ck_assert_uint_gt(masks, 0); /* the twin took the path */
    free(a);
    free(b);
    sift_grammar_free(g);
    sift_grammar_free(h);
}
END_TEST

START_TEST(test_batched_bitmasks_equal_one_fill_per_grammar)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    size_t len;
    char *json = read_file("grammar/json.gbnf", &len);
    const char *yn = "root ::= \"yes\" | \"no\"\n";
    sift_grammar *gs[4] = {grammar(json, len), NULL, grammar(yn, strlen(yn)), grammar(json, len)};
    sift_error err;
    ck_assert_int_eq(sift_grammar_accept_token(gs[3], find("[\"", 2), &err), SIFT_OK);
    size_t wpr = NW + 3;
    uint32_t *rows = malloc(4 * wpr * sizeof *rows), *one = malloc(wpr * sizeof *one);
    memset(rows, 0, 4 * wpr * sizeof *rows);
    ck_assert_int_eq(sift_grammars_fill_bitmasks(gs, 4, rows, wpr, &err), SIFT_OK);
    for (int i = 0; i < 4; i++) {
        if (!gs[i]) {
            ck_assert(all_words(rows + i * wpr, wpr, 0xffffffffu));
            continue;
        }
        ck_assert_int_eq(sift_grammar_fill_bitmask(gs[i], one, wpr, &err), SIFT_OK);
        ck_assert(memcmp(one, rows + i * wpr, wpr * sizeof *one) == 0);
    }
    /* n = 0 is a no-op */
    ck_assert_int_eq(sift_grammars_fill_bitmasks(NULL, 0, NULL, 0, &err), SIFT_OK);
    for (int i = 0; i < 4; i++)
        sift_grammar_free(gs[i]);
    free(rows);
    free(one);
    free(json);
}
END_TEST

START_TEST(test_batched_bitmasks_name_the_failing_grammar)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    size_t len;
    char *json = read_file("grammar/json.gbnf", &len);
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.max_step_work = 5000;
    sift_grammar *poor = NULL, *nv = NULL;
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&poor, json, len, cl, &p, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_new(&nv, json, len, NULL, NULL, &err), SIFT_OK);
    sift_grammar *gs[3] = {grammar(json, len), NULL, nv};
    uint32_t *rows = malloc(3 * NW * sizeof *rows);
    memset(rows, 0x33, 3 * NW * sizeof *rows);
    /* an argument error: nothing is written */
    ck_assert_int_eq(sift_grammars_fill_bitmasks(gs, 3, rows, NW, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 2);
    ck_assert(all_words(rows, 3 * NW, 0x33333333u));
    /* rows too short for grammar 0 */
    ck_assert_int_eq(sift_grammars_fill_bitmasks(gs, 2, rows, NW - 1, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 0);
    /* a grammar over its budget: the rows before it are filled */
    gs[2] = poor;
    ck_assert_int_eq(sift_grammars_fill_bitmasks(gs, 3, rows, NW, &err), SIFT_E_GRAMMAR_LIMIT);
    ck_assert_int_eq(err.index, 2);
    ck_assert(all_words(rows + NW, NW, 0xffffffffu));
    uint32_t *one = malloc(NW * sizeof *one);
    ck_assert_int_eq(sift_grammar_fill_bitmask(gs[0], one, NW, &err), SIFT_OK);
    ck_assert(memcmp(one, rows, NW * sizeof *one) == 0);
    ck_assert(all_words(rows + 2 * NW, NW, 0x33333333u));
    /* the grammars stay usable */
    ck_assert_int_eq(sift_grammar_accept_token(poor, find("[", 1), &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(gs[0], find("[", 1), &err), SIFT_OK);
    sift_grammar_free(gs[0]);
    sift_grammar_free(poor);
    sift_grammar_free(nv);
    free(rows);
    free(one);
    free(json);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The shared index                                                    */
/* ------------------------------------------------------------------ */

typedef struct counter {
    long calls;
    size_t bytes;
} counter;

static void *c_alloc(void *u, size_t n)
{
    counter *c = u;
    c->calls++;
    c->bytes += n;
    return malloc(n);
}

static void c_free(void *u, void *p)
{
    (void)u;
    free(p);
}

START_TEST(test_a_grammar_copies_nothing_of_an_indexed_vocabulary)
{
    ck_assert_msg(cl != NULL, "tests/data/cl100k_base.tiktoken did not load");
    size_t len;
    char *json = read_file("grammar/json.gbnf", &len);
    sift_grammar_free(grammar(json, len)); /* the vocabulary is indexed now */
    counter c = {0, 0};
    sift_allocator al = {sizeof al, c_alloc, c_free, &c, NULL};
    sift_grammar_params p;
    sift_grammar_params_init(&p);
    p.allocator = &al;
    sift_grammar *g = NULL;
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&g, json, len, cl, &p, &err), SIFT_OK);
    /* its own allocations are its rules and matcher (a bit per token of
     * scratch among them), far less than the pieces' 800 KiB and the
     * trie's 4 MiB */
    ck_assert_uint_lt(c.bytes, (size_t)V / 8 + 200000);
    sift_grammar_free(g);
    free(json);
}
END_TEST

START_TEST(test_a_grammar_outlives_its_vocabulary)
{
    sift_vocab *v = load_cl100k();
    ck_assert_ptr_nonnull(v);
    size_t len;
    char *json = read_file("grammar/json.gbnf", &len);
    sift_grammar *g = NULL, *h = NULL;
    sift_error err;
    ck_assert_int_eq(sift_grammar_new(&g, json, len, v, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_new(&h, json, len, v, NULL, &err), SIFT_OK);
    sift_vocab_free(v);
    uint32_t *a = malloc(NW * sizeof *a), *b = malloc(NW * sizeof *b);
    ck_assert_int_eq(sift_grammar_fill_bitmask(g, a, NW, &err), SIFT_OK);
    sift_grammar_free(g);
    ck_assert_int_eq(sift_grammar_fill_bitmask(h, b, NW, &err), SIFT_OK);
    ck_assert(memcmp(a, b, NW * sizeof *a) == 0);
    ck_assert_uint_eq(BIT(b, find("{", 1)), 1);
    ck_assert_int_eq(sift_grammar_accept_token(h, find("{\"", 2), &err), SIFT_OK);
    sift_grammar_free(h);
    free(a);
    free(b);
    free(json);
}
END_TEST

START_TEST(test_set_attr_reaches_later_grammars_and_not_earlier_ones)
{
    const char *pieces[] = {"a", "b", "<e>", "<f>"};
    size_t lens[] = {1, 1, 3, 3};
    sift_vocab *v = NULL;
    sift_error err;
    ck_assert_int_eq(sift_vocab_new(&v, 4, pieces, lens, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 2, SIFT_TOKEN_EOG, &err), SIFT_OK);
    const char *gt = "root ::= \"a\"\n";
    sift_grammar *g1 = NULL, *g2 = NULL;
    ck_assert_int_eq(sift_grammar_new(&g1, gt, strlen(gt), v, NULL, &err), SIFT_OK);
    /* now <f> ends generation too, and <e> no longer does */
    ck_assert_int_eq(sift_vocab_set_attr(v, 3, SIFT_TOKEN_EOG, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 2, 0, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_new(&g2, gt, strlen(gt), v, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g1, 0, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_accept_token(g2, 0, &err), SIFT_OK);
    uint32_t m1, m2;
    ck_assert_int_eq(sift_grammar_fill_bitmask(g1, &m1, 1, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_fill_bitmask(g2, &m2, 1, &err), SIFT_OK);
    ck_assert_uint_eq(m1, 1u << 2); /* built when <e> was the EOG token */
    ck_assert_uint_eq(m2, 1u << 3);
    sift_grammar_free(g1);
    sift_grammar_free(g2);
    sift_vocab_free(v);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("bitmask");
    TCase *tc = tcase_create("oracle");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60); /* property runs: every token at every step */
    tcase_add_loop_test(tc, test_bitmask_equals_the_token_check_along_json_texts, 0,
                        2 * (int)N(JSON_TEXTS));
    tcase_add_test(tc, test_bitmask_equals_the_token_check_with_token_references);
    tcase_add_loop_test(tc, test_bitmask_equals_the_token_check_in_looping_states, 0,
                        (int)N(LOOPS));
    tcase_add_test(tc, test_a_control_byte_outside_the_loop_is_not_skipped);
    tcase_add_test(tc, test_multibyte_loops_keep_invalid_utf8_and_other_paths_rejected);
    tcase_add_test(tc, test_multibyte_characters_in_bounded_repetitions_keep_masks_exact);
    tcase_add_test(tc, test_a_class_that_admits_part_of_a_multibyte_range_rejects_the_rest);
    tcase_add_test(tc, test_bitmask_of_a_lazy_grammar_allows_everything_until_its_trigger);
    tcase_add_test(tc, test_bitmask_of_a_complete_grammar_allows_only_end_of_generation);
    suite_add_tcase(s, tc);
    tc = tcase_create("counters");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120); /* property runs: every token at every step */
    tcase_add_loop_test(tc, test_bitmask_equals_the_token_check_in_long_bounded_repetitions, 0,
                        (int)N(REPS));
    tcase_add_loop_test(tc, test_states_with_more_copies_left_than_a_token_share_one_mask, 0, 2);
    tcase_add_loop_test(tc, test_counted_strings_near_their_bound_keep_masks_exact, 0,
                        2 * (int)N(CNTS));
    tcase_add_test(tc, test_a_repetition_of_long_blocks_counts_its_copies_in_bytes);
    suite_add_tcase(s, tc);
    tc = tcase_create("cache");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_a_state_met_again_takes_its_mask_from_the_cache);
    tcase_add_test(tc, test_a_cache_across_blocks_returns_each_state_its_own_mask);
    tcase_add_test(tc, test_masks_stay_exact_when_the_matcher_caches_are_rebuilt);
    tcase_add_test(tc, test_loop_signatures_past_the_cache_slots_keep_masks_exact);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_fill_bitmask_refuses_a_short_mask_and_leaves_it_unchanged);
    tcase_add_test(tc, test_fill_bitmask_over_budget_fails_and_leaves_the_grammar_usable);
    tcase_add_test(tc, test_the_counted_path_stands_aside_when_the_budget_is_short);
    tcase_add_test(tc, test_batched_bitmasks_equal_one_fill_per_grammar);
    tcase_add_test(tc, test_batched_bitmasks_name_the_failing_grammar);
    suite_add_tcase(s, tc);
    tc = tcase_create("index");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_a_grammar_copies_nothing_of_an_indexed_vocabulary);
    tcase_add_test(tc, test_a_grammar_outlives_its_vocabulary);
    tcase_add_test(tc, test_set_attr_reaches_later_grammars_and_not_earlier_ones);
    suite_add_tcase(s, tc);
    return s;
}

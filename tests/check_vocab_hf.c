/*
 * check_vocab_hf.c - Hugging Face tokenizer.json vocabularies
 * (sift_vocab_load_hf, sift_vocab_from_hf): small committed files for
 * each encoding (tests/data/hf/), the golden errors of
 * tests/data/hf-invalid/<case>.{json,config.json,err} (status, then the
 * exact message with FILE / CONFIG for the paths), every allocation
 * failure, and real tokenizers fetched by tests/bench/fetch_hf.sh
 * (SKIP when absent): Qwen3 and Llama 3 (byte level), Llama 2
 * (SentencePiece), and GPT-3.5's cl100k compared piece by piece with
 * tests/data/cl100k_base.tiktoken and encoded through its merges against
 * tiktoken's vectors (tests/data/bpe-vectors-cl100k.txt).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "testutil.h"

#ifndef SIFT_TEST_DATA_DIR
#define SIFT_TEST_DATA_DIR "tests/data"
#endif
#ifndef SIFT_HF_BUILD_DIR
#define SIFT_HF_BUILD_DIR "tests/data/hf-fetched"
#endif

static const char *data_path(char *buf, size_t cap, const char *rel)
{
    snprintf(buf, cap, "%s/%s", SIFT_TEST_DATA_DIR, rel);
    return buf;
}

static void expect_piece(const sift_vocab *v, int32_t id, const char *want, size_t n, uint32_t attr)
{
    const char *b;
    size_t l;
    ck_assert_int_eq(sift_vocab_piece(v, id, &b, &l, NULL), SIFT_OK);
    ck_assert_msg(l == n && !memcmp(b, want, n), "token %d: %zu bytes, want %zu", (int)id, l, n);
    ck_assert_msg(sift_vocab_attr(v, id) == attr, "token %d: attr %u, want %u", (int)id,
                  sift_vocab_attr(v, id), attr);
}

START_TEST(test_a_byte_level_tokenizer_decodes_pieces_through_the_gpt2_table)
{
    char p[512], c[512];
    sift_error err;
    sift_vocab *v = NULL;
    ck_assert_msg(sift_vocab_load_hf(&v, data_path(p, sizeof p, "hf/bytelevel.json"),
                                     data_path(c, sizeof c, "hf/bytelevel-generation.json"), NULL,
                                     &err) == SIFT_OK,
                  "%s", err.message);
    ck_assert_int_eq(sift_vocab_size(v), 9);
    expect_piece(v, 0, "a", 1, SIFT_TOKEN_EOG); /* named by eos_token_id */
    expect_piece(v, 1, " b", 2, 0);
    expect_piece(v, 2, "\n", 1, 0);
    expect_piece(v, 3, "ab", 2, 0);
    expect_piece(v, 4, "", 0, SIFT_TOKEN_UNUSED);
    expect_piece(v, 5, "<|endoftext|>", 13, SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    expect_piece(v, 6, "<tool_call>", 11, 0); /* added, not special */
    expect_piece(v, 7, "<|im_end|>", 10, SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    expect_piece(v, 8, "\xe9\xa9", 2, 0); /* "é" is the byte 0xE9, "©" 0xA9 */
    sift_vocab_free(v);
    /* without the config: id 0 is no end of generation */
    ck_assert_int_eq(sift_vocab_load_hf(&v, p, NULL, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_attr(v, 0), 0);
    ck_assert_int_eq(sift_vocab_attr(v, 7), SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_a_sentencepiece_tokenizer_maps_u2581_to_space_and_byte_tokens_to_bytes)
{
    char p[512], c[512];
    sift_error err;
    sift_vocab *v = NULL;
    ck_assert_msg(sift_vocab_load_hf(&v, data_path(p, sizeof p, "hf/sentencepiece.json"),
                                     data_path(c, sizeof c, "hf/sentencepiece-config.json"), NULL,
                                     &err) == SIFT_OK,
                  "%s", err.message);
    ck_assert_int_eq(sift_vocab_size(v), 8);
    expect_piece(v, 0, "<unk>", 5, SIFT_TOKEN_SPECIAL);
    expect_piece(v, 1, "<s>", 3, SIFT_TOKEN_SPECIAL);
    expect_piece(v, 2, "</s>", 4, SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    expect_piece(v, 3, "\n", 1, 0);
    expect_piece(v, 4, "\xe2", 1, 0);
    expect_piece(v, 5, " the", 4, 0);
    expect_piece(v, 6, "x y", 3, 0);
    expect_piece(v, 7, "<0x0G>", 6, 0); /* not a byte token: kept as text */
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_a_unigram_tokenizer_takes_ids_from_the_order_of_its_vocab)
{
    char p[512];
    sift_error err;
    sift_vocab *v = NULL;
    ck_assert_msg(sift_vocab_load_hf(&v, data_path(p, sizeof p, "hf/unigram.json"), NULL, NULL,
                                     &err) == SIFT_OK,
                  "%s", err.message);
    ck_assert_int_eq(sift_vocab_size(v), 5);
    expect_piece(v, 1, "</s>", 4, SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    expect_piece(v, 2, "<unk>", 5, 0);
    expect_piece(v, 3, " a", 2, 0);
    expect_piece(v, 4, "<0x41>", 6, 0); /* no byte fallback */
    sift_vocab_free(v);
}
END_TEST

/* The golden error cases of tests/data/hf-invalid/. */
static const char *const invalid_cases[] = {
    "syntax",        "not-object",       "no-model",        "model-type",       "no-decoder",
    "both-decoders", "vocab-array",      "negative-id",     "id-not-integer",   "duplicate-id",
    "duplicate-key", "id-too-large",     "too-many-gaps",   "not-byte-level",   "added-not-array",
    "added-id",      "added-empty",      "added-special",   "added-twice",      "unigram-entry",
    "empty-vocab",   "config-eos-range", "config-eos-type", "config-eos-token", "config-syntax",
};

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = malloc(1 << 16);
    *n = fread(b, 1, (1 << 16) - 1, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

/* Replaces the first `tag` in s with `with` (into out). */
static void subst(char *out, size_t cap, const char *s, const char *tag, const char *with)
{
    const char *at = strstr(s, tag);
    if (!at) {
        snprintf(out, cap, "%s", s);
        return;
    }
    snprintf(out, cap, "%.*s%s%s", (int)(at - s), s, with, at + strlen(tag));
}

START_TEST(test_each_bad_tokenizer_file_gets_its_golden_error)
{
    for (size_t k = 0; k < sizeof invalid_cases / sizeof *invalid_cases; k++) {
        const char *name = invalid_cases[k];
        char rel[128], tp[512], cp[512], ep[512];
        snprintf(rel, sizeof rel, "hf-invalid/%s.json", name);
        data_path(tp, sizeof tp, rel);
        snprintf(rel, sizeof rel, "hf-invalid/%s.config.json", name);
        data_path(cp, sizeof cp, rel);
        snprintf(rel, sizeof rel, "hf-invalid/%s.err", name);
        size_t en;
        char *e = slurp(data_path(ep, sizeof ep, rel), &en);
        ck_assert_msg(e != NULL, "%s: no .err file", name);
        FILE *cf = fopen(cp, "rb");
        int has_cfg = cf != NULL;
        if (cf)
            fclose(cf);
        int want_st = atoi(e);
        char *msg = strchr(e, '\n') + 1;
        msg[strcspn(msg, "\n")] = 0;
        char want[1024], tmp[1024];
        subst(tmp, sizeof tmp, msg, "FILE", tp);
        subst(want, sizeof want, tmp, "CONFIG", cp);
        sift_error err;
        sift_vocab *v = (sift_vocab *)1;
        sift_status st = sift_vocab_load_hf(&v, tp, has_cfg ? cp : NULL, NULL, &err);
        ck_assert_msg((int)st == want_st, "%s: status %d, want %d (%s)", name, st, want_st,
                      err.message);
        ck_assert_ptr_null(v);
        ck_assert_msg(!strcmp(err.message, want), "%s:\n got  '%s'\n want '%s'", name, err.message,
                      want);
        ck_assert_str_eq(err.source, !strncmp(msg, "CONFIG", 6) ? cp : tp);
        /* the same bytes from memory name the sources "<tokenizer.json>"
         * and "<config>" */
        size_t tn, cn = 0;
        char *t = slurp(tp, &tn), *c = has_cfg ? slurp(cp, &cn) : NULL;
        st = sift_vocab_from_hf(&v, t, tn, c, cn, NULL, &err);
        ck_assert_int_eq((int)st, want_st);
        ck_assert_ptr_null(v);
        subst(tmp, sizeof tmp, msg, "FILE", "<tokenizer.json>");
        subst(want, sizeof want, tmp, "CONFIG", "<config>");
        ck_assert_str_eq(err.message, want);
        free(t);
        free(c);
        free(e);
    }
}
END_TEST

START_TEST(test_bad_arguments_are_refused)
{
    sift_error err;
    sift_vocab *v = (sift_vocab *)1;
    ck_assert_int_eq(sift_vocab_load_hf(NULL, "x", NULL, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_load_hf(&v, NULL, NULL, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(sift_vocab_load_hf(&v, "/nonexistent/tokenizer.json", NULL, NULL, &err),
                     SIFT_E_IO);
    ck_assert_int_eq(sift_vocab_from_hf(&v, NULL, 3, NULL, 0, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_vocab_load_hf(&v, SIFT_TEST_DATA_DIR, NULL, NULL, &err), SIFT_E_IO);
}
END_TEST

/* An allocator that fails the nth allocation. */
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

START_TEST(test_failing_the_nth_allocation_is_clean_for_every_n)
{
    char p[512], c[512];
    data_path(p, sizeof p, "hf/bytelevel.json");
    data_path(c, sizeof c, "hf/bytelevel-generation.json");
    sift_allocator a = {.struct_size = sizeof a, .alloc = fail_alloc, .free = fail_free};
    int ok = 0;
    for (fail_at = 1; fail_at < 200 && !ok; fail_at++) {
        n_allocs = 0;
        sift_error err;
        sift_vocab *v = NULL;
        sift_status st = sift_vocab_load_hf(&v, p, c, &a, &err);
        if (st == SIFT_OK) {
            ok = 1;
            ck_assert_int_eq(sift_vocab_size(v), 9);
        } else {
            ck_assert_int_eq(st, SIFT_E_NOMEM);
            ck_assert_ptr_null(v);
        }
        sift_vocab_free(v);
    }
    ck_assert(ok);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Real tokenizers (tests/bench/fetch_hf.sh)                          */
/* ------------------------------------------------------------------ */

static const char *hf_dir(void)
{
    const char *d = getenv("SIFT_HF_DIR");
    return d && *d ? d : SIFT_HF_BUILD_DIR;
}

/* Loads DIR/name/tokenizer.json with its tokenizer_config.json; NULL
 * (and a SKIP line) when the files are absent. */
static sift_vocab *load_real(const char *name)
{
    char t[1024], c[1024];
    snprintf(t, sizeof t, "%s/%s/tokenizer.json", hf_dir(), name);
    snprintf(c, sizeof c, "%s/%s/tokenizer_config.json", hf_dir(), name);
    FILE *f = fopen(t, "rb");
    if (!f) {
        printf("SKIP: %s absent (run tests/bench/fetch_hf.sh DIR and set SIFT_HF_DIR=DIR)\n", t);
        return NULL;
    }
    fclose(f);
    sift_error err;
    sift_vocab *v = NULL;
    ck_assert_msg(sift_vocab_load_hf(&v, t, c, NULL, &err) == SIFT_OK, "%s: %s", name, err.message);
    return v;
}

static int32_t find_piece(const sift_vocab *v, const char *s)
{
    for (int32_t id = 0; id < sift_vocab_size(v); id++) {
        const char *b;
        size_t l;
        if (sift_vocab_piece(v, id, &b, &l, NULL) == SIFT_OK && l == strlen(s) && !memcmp(b, s, l))
            return id;
    }
    return -1;
}

START_TEST(test_qwen3s_tokenizer_json_loads_with_its_special_and_end_tokens)
{
    sift_vocab *v = load_real("qwen3");
    if (!v)
        return;
    ck_assert_int_eq(sift_vocab_size(v), 151669);
    expect_piece(v, 151643, "<|endoftext|>", 13, SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    expect_piece(v, 151644, "<|im_start|>", 12, SIFT_TOKEN_SPECIAL);
    expect_piece(v, 151645, "<|im_end|>", 10, SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    expect_piece(v, 151657, "<tool_call>", 11, 0);
    expect_piece(v, 151668, "</think>", 8, 0);
    expect_piece(v, 198, "\n", 1, 0);
    ck_assert_int_eq(find_piece(v, " the"), 279);
    /* every byte has a token of its own */
    for (int b = 0; b < 256; b++) {
        char s[2] = {(char)b, 0};
        int32_t id = -1;
        for (int32_t k = 0; k < 300 && id < 0; k++) {
            const char *p;
            size_t l;
            if (sift_vocab_piece(v, k, &p, &l, NULL) == SIFT_OK && l == 1 && p[0] == s[0])
                id = k;
        }
        ck_assert_msg(id >= 0, "byte %d has no token among the first 300", b);
    }
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_llama2s_sentencepiece_tokenizer_json_loads_with_byte_tokens)
{
    sift_vocab *v = load_real("llama2");
    if (!v)
        return;
    ck_assert_int_eq(sift_vocab_size(v), 32000);
    expect_piece(v, 0, "<unk>", 5, SIFT_TOKEN_SPECIAL);
    expect_piece(v, 1, "<s>", 3, SIFT_TOKEN_SPECIAL);
    expect_piece(v, 2, "</s>", 4, SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    for (int b = 0; b < 256; b++) {
        char s[1] = {(char)b};
        expect_piece(v, 3 + b, s, 1, 0); /* <0x00>..<0xFF> are ids 3..258 */
    }
    expect_piece(v, 272, " the", 4, 0);
    sift_vocab_free(v);
}
END_TEST

/* The pieces of a tiktoken file and of a tokenizer.json, id by id. */
static void same_pieces(const sift_vocab *hfv, const sift_vocab *tt, int32_t n)
{
    for (int32_t id = 0; id < n; id++) {
        const char *a, *b;
        size_t la, lb;
        ck_assert_int_eq(sift_vocab_piece(hfv, id, &a, &la, NULL), SIFT_OK);
        ck_assert_int_eq(sift_vocab_piece(tt, id, &b, &lb, NULL), SIFT_OK);
        ck_assert_msg(la == lb && !memcmp(a, b, la), "token %d differs", (int)id);
        ck_assert_int_eq(sift_vocab_attr(hfv, id), 0);
    }
}

START_TEST(test_cl100k_tokenizer_json_equals_the_tiktoken_file_piece_by_piece)
{
    sift_vocab *v = load_real("gpt35turbo");
    if (!v)
        return;
    char p[512];
    sift_error err;
    sift_vocab *tt = NULL;
    ck_assert_msg(sift_vocab_load_tiktoken(&tt, data_path(p, sizeof p, "cl100k_base.tiktoken"),
                                           NULL, &err) == SIFT_OK,
                  "%s", err.message);
    ck_assert_int_eq(sift_vocab_size(tt), 100256);
    ck_assert_int_eq(sift_vocab_size(v), 100277);
    same_pieces(v, tt, 100256);
    expect_piece(v, 100257, "<|endoftext|>", 13, SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    expect_piece(v, 100276, "<|endofprompt|>", 15, SIFT_TOKEN_SPECIAL);
    expect_piece(v, 100261, "", 0, SIFT_TOKEN_UNUSED);
    sift_vocab_free(tt);
    sift_vocab_free(v);
}
END_TEST

static int hexv(int c)
{
    return c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
}

START_TEST(test_cl100k_tokenizer_json_encodes_as_tiktoken_through_its_merges)
{
    sift_vocab *v = load_real("gpt35turbo");
    if (!v)
        return;
    char p[512];
    FILE *f = fopen(data_path(p, sizeof p, "bpe-vectors-cl100k.txt"), "r");
    ck_assert_ptr_nonnull(f);
    static char line[1 << 16], text[1 << 15], got[1 << 16];
    static int32_t ids[8192];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        ck_assert_ptr_nonnull(t2);
        *t2 = 0;
        size_t tl = 0;
        for (char *q = t1 + 1; *q; q += 2)
            text[tl++] = (char)(hexv(q[0]) << 4 | hexv(q[1]));
        size_t ni = 0;
        sift_error err;
        uint32_t flags = line[0] == 's' ? SIFT_ENCODE_SPECIAL : 0;
        ck_assert_msg(sift_vocab_encode(v, text, tl, flags, ids, 8192, &ni, NULL, &err) == SIFT_OK,
                      "%s", err.message);
        size_t gl = 0;
        got[0] = 0;
        for (size_t i = 0; i < ni; i++)
            gl += (size_t)sprintf(got + gl, i ? " %d" : "%d", (int)ids[i]);
        char *want = t2 + 1;
        want[strcspn(want, "\n")] = 0;
        ck_assert_msg(!strcmp(got, want), "vector %d: got %s, want %s", n, got, want);
        n++;
    }
    fclose(f);
    ck_assert_int_eq(n, 630);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_qwen3s_merges_encode_with_its_pre_tokenizer_and_added_tokens)
{
    sift_vocab *v = load_real("qwen3");
    if (!v)
        return;
    static const char text[] = "<tool_call>{\"a\": 12}</tool_call>";
    static const int32_t want[] = {151657, 4913, 64, 788, 220, 16, 17, 92, 151658};
    int32_t ids[32];
    size_t n = 0;
    ck_assert_int_eq(sift_vocab_encode(v, text, sizeof text - 1, 0, ids, 32, &n, NULL, NULL),
                     SIFT_OK);
    ck_assert_int_eq(n, sizeof want / sizeof *want);
    ck_assert(!memcmp(ids, want, sizeof want));
    sift_vocab_free(v);
}
END_TEST

/* Feeds the encoding of `text` to g token by token; 1 if all accepted. */
static int feed(sift_grammar *g, const sift_vocab *v, const char *text)
{
    int32_t ids[256];
    size_t n = 0;
    ck_assert_int_eq(sift_vocab_encode(v, text, strlen(text), 0, ids, 256, &n, NULL, NULL),
                     SIFT_OK);
    for (size_t i = 0; i < n; i++)
        if (sift_grammar_accept_token(g, ids[i], NULL) != SIFT_OK)
            return 0;
    return 1;
}

START_TEST(test_structural_tags_over_qwen3_constrain_tool_calls_between_free_text)
{
    sift_vocab *v = load_real("qwen3");
    if (!v)
        return;
    static const char *const trig[] = {"<tool_call>"};
    static const sift_structural_tag tag = {
        .begin = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
        .schema = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
                  "\"required\":[\"city\"],\"additionalProperties\":false}",
        .end = "}\n</tool_call>"};
    sift_error err;
    sift_grammar *g = NULL;
    ck_assert_msg(sift_grammar_from_structural_tags(&g, &tag, 1, trig, 1, v, NULL, NULL, &err) ==
                      SIFT_OK,
                  "%s", err.message);
    ck_assert(feed(g, v, "Let me look that up."));
    ck_assert(!sift_grammar_is_triggered(g));
    ck_assert(feed(g, v, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "));
    ck_assert(sift_grammar_is_triggered(g));
    int ok = 1;
    ck_assert_int_eq(sift_grammar_accepts_token(g, 151645, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 0); /* <|im_end|> cannot end a tool call */
    ck_assert(feed(g, v, "{\"city\": \"Paris\"}}\n</tool_call>"));
    ck_assert(sift_grammar_is_complete(g));
    /* free again: text, then the mask allows nearly everything */
    ck_assert(feed(g, v, " It is sunny in Paris."));
    size_t nw = (size_t)(sift_vocab_size(v) + 31) / 32, allowed = 0;
    uint32_t *mask = malloc(nw * sizeof *mask);
    ck_assert_int_eq(sift_grammar_fill_bitmask(g, mask, nw, &err), SIFT_OK);
    for (size_t w = 0; w < nw; w++)
        allowed += (size_t)__builtin_popcount(mask[w]);
    ck_assert_uint_gt(allowed, 150000);
    ck_assert_int_eq(sift_grammar_accepts_token(g, 151645, &ok, NULL), SIFT_OK);
    ck_assert_int_eq(ok, 1);
    /* a second call that breaks the schema is refused */
    ck_assert(!feed(g, v, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\""));
    free(mask);
    sift_grammar_free(g);
    sift_vocab_free(v);
}
END_TEST

START_TEST(test_llama3s_tokenizer_json_starts_with_cl100k_piece_by_piece)
{
    sift_vocab *v = load_real("llama3");
    if (!v)
        return;
    char p[512];
    sift_vocab *tt = NULL;
    ck_assert_int_eq(
        sift_vocab_load_tiktoken(&tt, data_path(p, sizeof p, "cl100k_base.tiktoken"), NULL, NULL),
        SIFT_OK);
    ck_assert_int_eq(sift_vocab_size(v), 128256);
    same_pieces(v, tt, 100256);
    expect_piece(v, 128000, "<|begin_of_text|>", 17, SIFT_TOKEN_SPECIAL);
    expect_piece(v, 128001, "<|end_of_text|>", 15, SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    expect_piece(v, 128009, "<|eot_id|>", 10, SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG);
    sift_vocab_free(tt);
    sift_vocab_free(v);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("vocab_hf");
    TCase *tc = tcase_create("synthetic");
    tcase_add_test(tc, test_a_byte_level_tokenizer_decodes_pieces_through_the_gpt2_table);
    tcase_add_test(tc, test_a_sentencepiece_tokenizer_maps_u2581_to_space_and_byte_tokens_to_bytes);
    tcase_add_test(tc, test_a_unigram_tokenizer_takes_ids_from_the_order_of_its_vocab);
    tcase_add_test(tc, test_each_bad_tokenizer_file_gets_its_golden_error);
    tcase_add_test(tc, test_bad_arguments_are_refused);
    tcase_add_test(tc, test_failing_the_nth_allocation_is_clean_for_every_n);
    suite_add_tcase(s, tc);
    tc = tcase_create("real");
    tcase_add_test(tc, test_qwen3s_tokenizer_json_loads_with_its_special_and_end_tokens);
    tcase_add_test(tc, test_llama2s_sentencepiece_tokenizer_json_loads_with_byte_tokens);
    tcase_add_test(tc, test_cl100k_tokenizer_json_equals_the_tiktoken_file_piece_by_piece);
    tcase_add_test(tc, test_llama3s_tokenizer_json_starts_with_cl100k_piece_by_piece);
    tcase_add_test(tc, test_cl100k_tokenizer_json_encodes_as_tiktoken_through_its_merges);
    tcase_add_test(tc, test_qwen3s_merges_encode_with_its_pre_tokenizer_and_added_tokens);
    tcase_add_test(tc, test_structural_tags_over_qwen3_constrain_tool_calls_between_free_text);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

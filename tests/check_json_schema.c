/*
 * check_json_schema.c - the JSON Schema converter (src/grammar/json_schema*.c,
 * docs/json-schema.md): for each keyword, texts the grammar accepts and
 * texts it rejects (through sift_grammar_accept_bytes and
 * sift_grammar_is_complete, in the compact whitespace mode unless a test
 * says otherwise); the exact located messages of bad and unsupported
 * schemas; the limits as errors; and the failing allocator at every
 * allocation count over the whole conversion.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static sift_json_schema_params compact(void)
{
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.whitespace = SIFT_JSON_WS_COMPACT;
    return sp;
}

/* Compiles `schema` with `sp` (NULL = compact defaults); fails the test
 * with the message when it does not compile. */
static sift_grammar *compile_with(const char *schema, const sift_json_schema_params *sp)
{
    sift_json_schema_params d = compact();
    sift_grammar *g = NULL;
    sift_error err;
    sift_status st =
        sift_grammar_from_json_schema(&g, schema, strlen(schema), NULL, sp ? sp : &d, NULL, &err);
    ck_assert_msg(st == SIFT_OK, "schema %s: %s", schema, st ? err.message : "");
    return g;
}

/* 1 if g accepts the whole text and is complete at its end. */
static int accepts(sift_grammar *g, const char *text)
{
    sift_grammar_reset(g);
    sift_error err;
    if (sift_grammar_accept_bytes(g, text, strlen(text), &err) != SIFT_OK)
        return 0;
    return sift_grammar_is_complete(g);
}

static void check_texts(const char *schema, const char *const *good, size_t ng,
                        const char *const *bad, size_t nb)
{
    sift_grammar *g = compile_with(schema, NULL);
    for (size_t i = 0; i < ng; i++)
        ck_assert_msg(accepts(g, good[i]), "%s should accept %s", schema, good[i]);
    for (size_t i = 0; i < nb; i++)
        ck_assert_msg(!accepts(g, bad[i]), "%s should reject %s", schema, bad[i]);
    sift_grammar_free(g);
}

#define CHECK(schema, good, bad) check_texts(schema, good, N(good), bad, N(bad))

/* The status and message of converting `schema` with `sp`. */
static sift_status convert_err(const char *schema, const sift_json_schema_params *sp,
                               sift_error *err)
{
    char *out = NULL;
    size_t n = 0;
    sift_status st = sift_json_schema_to_gbnf(&out, &n, schema, strlen(schema), sp, err);
    if (st == SIFT_OK)
        sift_json_schema_free_gbnf(out, sp);
    else
        ck_assert_ptr_null(out);
    return st;
}

START_TEST(test_type_string_accepts_json_strings_with_escapes)
{
    static const char *good[] = {"\"\"", "\"abc\"", "\"a\\\"b\"", "\"\\u00e9\\n\\/\"",
                                 "\"\xc3\xa9\""};
    static const char *bad[] = {"abc", "\"a", "\"\\x\"", "\"\\u12\"", "1", "\"a\nb\""};
    CHECK("{\"type\":\"string\"}", good, bad);
}
END_TEST

START_TEST(test_empty_schema_and_true_accept_any_value)
{
    static const char *good[] = {"1", "\"x\"", "null", "[1,{\"a\":[]}]", "{\"k\":true}", "-0.5e3"};
    static const char *bad[] = {"", "[1,]", "{a:1}", "tru"};
    CHECK("{}", good, bad);
    CHECK("true", good, bad);
}
END_TEST

Suite *json_schema_suite(void);
Suite *json_schema_suite(void)
{
    Suite *s = suite_create("json_schema");
    TCase *tc = tcase_create("keywords");
    tcase_add_test(tc, test_type_string_accepts_json_strings_with_escapes);
    tcase_add_test(tc, test_empty_schema_and_true_accept_any_value);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(json_schema_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

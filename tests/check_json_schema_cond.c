/*
 * check_json_schema_cond.c - the JSON Schema keywords rewritten into the
 * converter's subset (src/schema/json_schema_cond.c,
 * json_schema_contains.c): if / then / else, contains / minContains /
 * maxContains, propertyNames, the negations `not` and `else` use, and
 * the merges of allOf members beside them. For each, texts the grammar
 * accepts and texts it must reject (compact whitespace), and the shapes
 * that stay unsupported, with their located messages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sift.h"
#include "testutil.h"

/* The schema is refused as unsupported with exactly `msg`. */
static void check_refused(const char *schema, const char *msg)
{
    sift_json_schema_params sp = tu_schema_compact();
    sp.source_name = "s.json";
    char *out = NULL;
    size_t n = 0;
    sift_error err;
    sift_status st = sift_json_schema_to_gbnf(&out, &n, schema, strlen(schema), &sp, &err);
    ck_assert_msg(st == SIFT_E_SCHEMA_UNSUPPORTED, "%s: status %d", schema, (int)st);
    ck_assert_str_eq(err.message, msg);
    sift_json_schema_free_gbnf(out, &sp);
}

START_TEST(test_if_then_else_is_if_and_then_or_not_if_and_else)
{
    static const char *const g1[] = {"-1", "-10", "0", "2", "\"x\"", "null"};
    static const char *const b1[] = {"-11", "1", "3", "0.5"};
    TU_SCHEMA_CHECK("{\"if\":{\"exclusiveMaximum\":0},\"then\":{\"minimum\":-10},"
                    "\"else\":{\"multipleOf\":2}}",
                    g1, b1);
    /* not if of a const: every other value */
    static const char *const g2[] = {"2", "0", "-1", "1.5", "\"1\"", "true", "[1]"};
    static const char *const b2[] = {"1", "1.0"};
    TU_SCHEMA_CHECK("{\"if\":{\"const\":1},\"then\":false}", g2, b2);
    static const char *const g3[] = {"1", "1.0"};
    static const char *const b3[] = {"2", "0.5", "\"a\"", "null"};
    TU_SCHEMA_CHECK("{\"if\":{\"const\":1},\"else\":false}", g3, b3);
    static const char *const g4[] = {"\"yes\"", "\"other\""};
    static const char *const b4[] = {"\"no\"", "\"others\"", "\"oth\""};
    TU_SCHEMA_CHECK(
        "{\"type\":\"string\",\"then\":{\"const\":\"yes\"},\"else\":{\"const\":\"other\"},"
        "\"if\":{\"maxLength\":4}}",
        g4, b4);
    /* if true / false pick one branch; then / else alone have no effect */
    static const char *const g5[] = {"\"then\""};
    static const char *const b5[] = {"\"else\"", "1"};
    TU_SCHEMA_CHECK("{\"if\":true,\"then\":{\"const\":\"then\"},\"else\":{\"const\":\"else\"}}", g5,
                    b5);
    static const char *const g6[] = {"1", "\"a\"", "-20"};
    static const char *const b6[] = {"tru"};
    TU_SCHEMA_CHECK("{\"allOf\":[{\"if\":{\"exclusiveMaximum\":0}},{\"then\":{\"minimum\":-10}},"
                    "{\"else\":{\"multipleOf\":2}}]}",
                    g6, b6);
    /* an object condition on a property */
    static const char *const g7[] = {"{\"k\":1,\"v\":true}", "{\"k\":2,\"v\":null}",
                                     "{\"v\":false}", "{\"k\":2}"};
    static const char *const b7[] = {"{}", "{\"v\":null}", "{\"k\":1}", "{\"k\":1,\"v\":null}",
                                     "{\"k\":2,\"v\":true}"};
    TU_SCHEMA_CHECK("{\"type\":\"object\",\"if\":{\"properties\":{\"k\":{\"const\":1}}},"
                    "\"then\":{\"required\":[\"v\"],\"properties\":{\"v\":{\"type\":\"boolean\"}}},"
                    "\"else\":{\"properties\":{\"v\":{\"type\":\"null\"}}}}",
                    g7, b7);
}
END_TEST

START_TEST(test_else_beside_an_any_of)
{
    /* not if is an anyOf: each of its alternatives meets the else's own
     * anyOf (from its not) on its own */
    static const char *const g1[] = {"\"x\"", "4", "-2"};
    static const char *const b1[] = {"3", "\"y\"", "1.5", "null"};
    TU_SCHEMA_CHECK("{\"if\":{\"const\":\"x\"},\"then\":{\"const\":\"x\"},"
                    "\"else\":{\"type\":\"integer\",\"not\":{\"const\":3}}}",
                    g1, b1);
    /* likewise not beside an anyOf */
    static const char *const g2[] = {"3", "0", "\"a\"", "\"abc\""};
    static const char *const b2[] = {"1", "2", "-1", "\"ab\"", "null", "1.5"};
    TU_SCHEMA_CHECK("{\"anyOf\":[{\"type\":\"integer\",\"minimum\":0},{\"type\":\"string\"}],"
                    "\"not\":{\"enum\":[1,\"ab\",2]}}",
                    g2, b2);
}
END_TEST

START_TEST(test_if_that_cannot_be_negated_stays_refused)
{
    check_refused("{\"if\":{\"pattern\":\"^a\"},\"then\":{\"maxLength\":3}}",
                  "s.json:1:7: #/if: an 'if' whose negation is not supported");
    check_refused("{\"if\":{\"const\":[1]},\"else\":{\"maxLength\":3}}",
                  "s.json:1:7: #/if: an 'if' whose negation is not supported");
    check_refused("{\"allOf\":[{\"if\":{\"const\":1},\"then\":{\"minimum\":0}},"
                  "{\"if\":{\"pattern\":\"^a\"},\"then\":{\"maxLength\":3}}]}",
                  "s.json:1:1: #/if: two if / then / else in one merged schema (allOf, $ref)");
}
END_TEST

START_TEST(test_contains_counts_the_elements_that_match)
{
    static const char *const g1[] = {"[5]", "[3,4,5]", "[9,1]", "{}", "\"s\""};
    static const char *const b1[] = {"[]", "[2,3,4]", "[1,4.5]"};
    TU_SCHEMA_CHECK("{\"contains\":{\"minimum\":5}}", g1, b1);
    static const char *const g2[] = {"[6,12]", "[6]", "[2,6]"};
    static const char *const b2[] = {"[2,4,8]", "[3,6,9]", "[1,5]", "[]"};
    TU_SCHEMA_CHECK("{\"items\":{\"multipleOf\":2},\"contains\":{\"multipleOf\":3}}", g2, b2);
    static const char *const g3[] = {"[1,1]", "[0,1,2,1]", "[1,1,1]", "[1,0,1,0,1]"};
    static const char *const b3[] = {"[1]", "[1,1,1,1]", "[0,2]", "[]", "[1,3,1]"};
    TU_SCHEMA_CHECK("{\"contains\":{\"const\":1},\"minContains\":2,\"maxContains\":3,"
                    "\"items\":{\"enum\":[0,1,2]}}",
                    g3, b3);
    static const char *const g4[] = {"[]", "[2]", "[1,2]", "[\"a\",2]"};
    static const char *const b4[] = {"[1,1]", "[1,2,1]"};
    TU_SCHEMA_CHECK("{\"contains\":{\"const\":1},\"minContains\":0,\"maxContains\":1}", g4, b4);
    static const char *const g5[] = {"[]", "[1,1]", "\"x\""};
    static const char *const b5[] = {"[1,\"a\"]", "[null]"};
    TU_SCHEMA_CHECK("{\"contains\":{\"type\":\"string\"},\"maxContains\":0,"
                    "\"items\":{\"type\":[\"string\",\"integer\"]},\"minContains\":0}",
                    g5, b5);
    static const char *const g6[] = {"\"x\"", "{}"};
    static const char *const b6[] = {"[]", "[1]"};
    TU_SCHEMA_CHECK("{\"contains\":false}", g6, b6);
}
END_TEST

START_TEST(test_contains_shapes_that_stay_refused)
{
    check_refused("{\"contains\":{\"pattern\":\"a\"},\"maxContains\":1}",
                  "s.json:1:43: #/maxContains: 'maxContains' with a 'contains' whose negation is "
                  "not supported");
    check_refused("{\"prefixItems\":[{}],\"contains\":{\"const\":1}}",
                  "s.json:1:32: #/contains: 'contains' beside prefixItems");
    check_refused("{\"contains\":{\"const\":1},\"maxItems\":3}",
                  "s.json:1:13: #/contains: 'contains' beside these item counts");
}
END_TEST

START_TEST(test_property_names_constrain_every_key)
{
    /* key lengths count code points of the decoded key */
    static const char *const g1[] = {"{\"f\":{},\"foo\":{}}", "{}", "{\"\\u0066oo\":1}", "12",
                                     "[1,2]"};
    static const char *const b1[] = {"{\"foo\":{},\"foobar\":{}}", "{\"\\u0066oob\":1}"};
    TU_SCHEMA_CHECK("{\"propertyNames\":{\"maxLength\":3}}", g1, b1);
    static const char *const g2[] = {"{\"a\":{},\"aa\":{}}", "{}"};
    static const char *const b2[] = {"{\"aaA\":{}}", "{\"\":1}"};
    TU_SCHEMA_CHECK("{\"propertyNames\":{\"pattern\":\"^a+$\"}}", g2, b2);
    static const char *const g3[] = {"{}", "1"};
    static const char *const b3[] = {"{\"foo\":1}"};
    TU_SCHEMA_CHECK("{\"propertyNames\":false}", g3, b3);
    /* a finite set: the names become properties, the object closes */
    static const char *const g4[] = {"{\"x\":true,\"y\":\"s\"}", "{\"y\":\"t\"}", "{}"};
    static const char *const b4[] = {"{\"z\":1}", "{\"x\":1}", "{\"y\":\"st\"}", "{\"w\":\"s\"}"};
    TU_SCHEMA_CHECK("{\"type\":\"object\",\"propertyNames\":{\"enum\":[\"x\",\"y\",3]},"
                    "\"properties\":{\"x\":{\"type\":\"boolean\"},\"z\":{}},"
                    "\"additionalProperties\":{\"type\":\"string\",\"maxLength\":1}}",
                    g4, b4);
    /* closed: declared names the schema rejects are absent */
    static const char *const g5[] = {"{\"bb\":1}", "{}"};
    static const char *const b5[] = {"{\"a\":1}", "{\"bb\":\"x\"}", "{\"cc\":1}"};
    TU_SCHEMA_CHECK(
        "{\"type\":\"object\",\"propertyNames\":{\"minLength\":2},"
        "\"properties\":{\"a\":{},\"bb\":{\"type\":\"integer\"}},\"additionalProperties\":false}",
        g5, b5);
    static const char *const g6[] = {"{\"ab\":1}"};
    static const char *const b6[] = {"{\"abc\":1}", "{\"ab\":\"x\"}"};
    TU_SCHEMA_CHECK(
        "{\"propertyNames\":{\"maxLength\":2},\"additionalProperties\":{\"type\":\"number\"}}", g6,
        b6);
    /* const beside an enum: the value must be in both */
    static const char *const g7[] = {"1"};
    static const char *const b7[] = {"\"a\"", "2"};
    TU_SCHEMA_CHECK(
        "{\"anyOf\":[{\"allOf\":[{\"const\":\"a\"},{\"enum\":[1]}]},{\"const\":1,\"enum\":[1,2]}]}",
        g7, b7);
}
END_TEST

START_TEST(test_property_names_beside_open_declared_names_stay_refused)
{
    check_refused("{\"properties\":{\"a\":{}},\"propertyNames\":{\"maxLength\":2}}",
                  "s.json:1:40: #/propertyNames: 'propertyNames' beside declared or required "
                  "properties that additionalProperties leaves open");
    check_refused("{\"patternProperties\":{\"^a\":{}},\"propertyNames\":{\"maxLength\":2}}",
                  "s.json:1:48: #/propertyNames: 'propertyNames' beside 'patternProperties'");
}
END_TEST

START_TEST(test_not_of_values_properties_and_several_keywords)
{
    static const char *const g1[] = {"0", "2", "0.5", "-1", "\"1\"", "null", "{}"};
    static const char *const b1[] = {"1", "1.0", "1.00"};
    TU_SCHEMA_CHECK("{\"not\":{\"const\":1}}", g1, b1);
    static const char *const g2[] = {"false", "1", "-3", "1.5", "[]"};
    static const char *const b2[] = {"0", "2", "true", "null"};
    TU_SCHEMA_CHECK("{\"not\":{\"enum\":[0,2,true,null]}}", g2, b2);
    static const char *const g3[] = {"1", "{\"foo\":1}", "\"x\""};
    static const char *const b3[] = {"{\"foo\":\"bar\"}", "{}", "{\"bar\":1}"};
    TU_SCHEMA_CHECK(
        "{\"not\":{\"type\":\"object\",\"properties\":{\"foo\":{\"type\":\"string\"}}}}", g3, b3);
    static const char *const g4[] = {"\"a\"", "null", "\"\""};
    static const char *const b4[] = {"\"ab\"", "\"abc\""};
    TU_SCHEMA_CHECK(
        "{\"type\":[\"string\",\"null\"],\"not\":{\"type\":\"string\",\"minLength\":2}}", g4, b4);
    /* strings outside a set, by their decoded value */
    static const char *const g5[] = {"\"f\"",
                                     "\"fooo\"",
                                     "\"ba\"",
                                     "\"\"",
                                     ("\"\xc3\xa9"
                                      "e\""),
                                     "\"x\"",
                                     "1",
                                     "null"};
    static const char *const b5[] = {"\"foo\"",      "\"fo\"",        "\"bar\"",
                                     "\"a\\\"b\"",   "\"a\\u0022b\"", "\"\\u00e9\"",
                                     "\"\xc3\xa9\"", "\"\\u0066oo\""};
    TU_SCHEMA_CHECK("{\"not\":{\"enum\":[\"foo\",\"fo\",\"bar\",\"a\\\"b\",\"\xc3\xa9\"]}}", g5,
                    b5);
    static const char *const g6[] = {"\"a\"", "\"\"", "2"};
    static const char *const b6[] = {"\"\\\"\"", "\"\\u0022\"", "1"};
    TU_SCHEMA_CHECK("{\"not\":{\"enum\":[\"\\\"\",1]}}", g6, b6);
}
END_TEST

START_TEST(test_not_integer_is_the_numbers_with_a_fraction)
{
    static const char *const g1[] = {"1.5", "-0.25", "10.10", "\"x\"", "null", "[]"};
    static const char *const b1[] = {"1", "1.0", "-0.0", "true", "false", "1e5"};
    TU_SCHEMA_CHECK("{\"not\":{\"type\":[\"integer\",\"boolean\"]}}", g1, b1);
    static const char *const g2[] = {"0.5", "\"ab\""};
    static const char *const b2[] = {"2", "\"a\"", "{}"};
    TU_SCHEMA_CHECK(
        "{\"type\":[\"number\",\"string\"],\"minLength\":2,\"not\":{\"type\":\"integer\"}}", g2,
        b2);
    /* number bounds beside it: refused */
    check_refused("{\"minimum\":1,\"not\":{\"type\":\"integer\"}}",
                  "s.json:1:20: #/not: 'not' is not supported");
}
END_TEST

START_TEST(test_negations_that_stay_refused)
{
    /* nullable changes what "type" admits: not negated */
    check_refused("{\"not\":{\"type\":\"string\",\"nullable\":true}}",
                  "s.json:1:8: #/not: 'not' is not supported");
    check_refused("{\"not\":{\"const\":{\"a\":1}}}", "s.json:1:8: #/not: 'not' is not supported");
    /* a code point outside the BMP in a negated string */
    check_refused("{\"not\":{\"const\":\"\xf0\x9f\x98\x80\"}}",
                  "s.json:1:8: #/not: 'not' is not supported");
    check_refused("{\"not\":{\"properties\":{\"a\":{}},\"additionalProperties\":false}}",
                  "s.json:1:8: #/not: 'not' is not supported");
    check_refused("{\"not\":{\"const\":1.5}}", "s.json:1:8: #/not: 'not' is not supported");
}
END_TEST

START_TEST(test_merged_keywords_are_not_dropped)
{
    /* two multipleOf: multiples of both */
    static const char *const g1[] = {"12", "0", "-24"};
    static const char *const b1[] = {"4", "6", "8", "18"};
    TU_SCHEMA_CHECK("{\"allOf\":[{\"multipleOf\":4},{\"multipleOf\":6}]}", g1, b1);
    /* two prefixes: position by position; each member's rest past its own */
    static const char *const g2[] = {"[1]", "[]"};
    static const char *const b2[] = {"[1,\"a\"]", "[1,true]", "[1,\"a\",true]", "[\"a\"]"};
    TU_SCHEMA_CHECK(
        "{\"allOf\":[{\"items\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}],"
        "\"items\":[{\"type\":\"integer\"}],\"additionalItems\":{\"type\":\"boolean\"}}",
        g2, b2);
    static const char *const g3[] = {"[1,\"a\"]", "[5]"};
    static const char *const b3[] = {"[6]", "[1,\"a\",true]", "[1,true]"};
    TU_SCHEMA_CHECK(
        "{\"allOf\":[{\"prefixItems\":[{\"type\":\"integer\"}],\"items\":{\"type\":\"string\"}},"
        "{\"prefixItems\":[{\"maximum\":5},{\"minLength\":1}],\"items\":false}]}",
        g3, b3);
    check_refused("{\"allOf\":[{\"dependentRequired\":{\"a\":[\"b\"]}},"
                  "{\"dependentRequired\":{\"c\":[\"d\"]}}]}",
                  "s.json:1:1: #/dependentRequired: allOf members (or $ref siblings) give "
                  "'dependentRequired' two values");
}
END_TEST

/* Two anyOf (two if / then / else, two disjoint oneOf) in one merge:
 * (A1 | A2) & (B1 | B2) is the anyOf of the pairs Ai & Bj. */
START_TEST(test_merged_alternatives_multiply_out)
{
    static const char *const g1[] = {"5", "7", "\"a\"", "\"ab\""};
    static const char *const b1[] = {"4", "\"\"", "\"abc\"", "null", "5.5"};
    TU_SCHEMA_CHECK(
        "{\"allOf\":[{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":2}]},"
        "{\"anyOf\":[{\"type\":\"integer\",\"minimum\":5},{\"type\":\"string\",\"minLength\":1}]}"
        "]}",
        g1, b1);
    /* three if / then / else units */
    static const char *const g2[] = {"0", "5", "-7"};
    static const char *const b2[] = {"1", "2", "3", "4", "\"x\"", "1.5", "null"};
    TU_SCHEMA_CHECK("{\"allOf\":[{\"if\":{\"const\":1},\"then\":false},"
                    "{\"if\":{\"enum\":[2,3]},\"then\":false,\"else\":{\"type\":\"integer\"}},"
                    "{\"if\":{\"const\":4},\"then\":false}]}",
                    g2, b2);
    /* one beside a $ref, one in its target */
    static const char *const g3[] = {"1", "5", "10"};
    static const char *const b3[] = {"7", "2", "11", "\"x\"", "0", "5.5"};
    TU_SCHEMA_CHECK("{\"$ref\":\"#/$defs/u\",\"if\":{\"const\":7},\"then\":false,"
                    "\"else\":{\"maximum\":10},\"$defs\":{\"u\":{\"type\":\"integer\","
                    "\"if\":{\"const\":1},\"then\":true,\"else\":{\"minimum\":5}}}}",
                    g3, b3);
    /* two oneOf whose alternatives are each disjoint */
    static const char *const g4[] = {"1", "\"a\""};
    static const char *const b4[] = {"2", "\"b\"", "null", "1.5"};
    TU_SCHEMA_CHECK("{\"allOf\":[{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]},"
                    "{\"oneOf\":[{\"const\":1},{\"const\":\"a\"},{\"type\":\"null\"}]}]}",
                    g4, b4);
    /* two const values: the pair admits nothing; anyOf beside oneOf */
    static const char *const g5[] = {"{\"t\":\"a\",\"x\":1}", "{\"t\":\"b\",\"y\":\"s\"}"};
    static const char *const b5[] = {"{\"t\":\"a\",\"y\":\"s\"}", "{\"t\":\"b\",\"x\":1}",
                                     "{\"t\":\"c\"}", "{\"x\":1}"};
    TU_SCHEMA_CHECK(
        "{\"type\":\"object\",\"required\":[\"t\"],\"anyOf\":[{\"properties\":{\"t\":{\"const\":"
        "\"a\"}},"
        "\"required\":[\"x\"]},{\"properties\":{\"t\":{\"const\":\"b\"}},\"required\":[\"y\"]}],"
        "\"oneOf\":[{\"properties\":{\"t\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}}},"
        "{\"properties\":{\"t\":{\"const\":\"b\"},\"y\":{\"type\":\"string\"}}}]}",
        g5, b5);
    static const char *const g6[] = {"1", "1.0"};
    static const char *const b6[] = {"2", "\"a\""};
    TU_SCHEMA_CHECK("{\"allOf\":[{\"anyOf\":[{\"const\":1},{\"const\":\"a\"}]},"
                    "{\"anyOf\":[{\"const\":1.0},{\"const\":2}]}]}",
                    g6, b6);
}
END_TEST

START_TEST(test_merged_alternatives_that_stay_refused)
{
    /* a oneOf whose alternatives overlap: not an anyOf */
    check_refused("{\"allOf\":[{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]},"
                  "{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}]}",
                  "s.json:1:1: #/oneOf: allOf members (or $ref siblings) give 'oneOf' two values");
    /* 9 x 8 alternatives: over 64 */
    check_refused("{\"allOf\":[{\"anyOf\":[{\"const\":1},{\"const\":2},{\"const\":3},{\"const\":4},"
                  "{\"const\":5},{\"const\":6},{\"const\":7},{\"const\":8},{\"const\":9}]},"
                  "{\"anyOf\":[{\"const\":1},{\"const\":2},{\"const\":3},{\"const\":4},"
                  "{\"const\":5},{\"const\":6},{\"const\":7},{\"const\":8}]}]}",
                  "s.json:1:1: #/anyOf: allOf members (or $ref siblings) give 'anyOf' two values "
                  "(over 64 alternatives together)");
}
END_TEST

START_TEST(test_exclusive_fractional_bound)
{
    static const char *const g1[] = {"1.2", "2", "1.1000000000000003", "\"x\""};
    static const char *const b1[] = {"1.1", "0.6", "1", "1.10000000000000001"};
    TU_SCHEMA_CHECK("{\"exclusiveMinimum\":1.1}", g1, b1);
    static const char *const g2[] = {"0", "3", "3.2499", "3.2499999999999996"};
    static const char *const b2[] = {"3.25", "3.3", "-1"};
    TU_SCHEMA_CHECK("{\"minimum\":0,\"exclusiveMaximum\":3.25}", g2, b2);
}
END_TEST

/* An allocator that fails its nth call, counting live blocks. */
typedef struct {
    long calls, fail_at, live;
} fa;

static void *fa_alloc(void *user, size_t size)
{
    fa *f = user;
    if (++f->calls == f->fail_at)
        return NULL;
    void *p = malloc(size);
    f->live += p != NULL;
    return p;
}

static void fa_free(void *user, void *p)
{
    fa *f = user;
    f->live -= p != NULL;
    free(p);
}

static const char cond_schema[] =
    "{\"type\":\"array\",\"items\":{\"anyOf\":["
    "{\"if\":{\"const\":1},\"then\":{\"type\":\"integer\"},\"else\":{\"maxLength\":2}},"
    "{\"type\":\"array\",\"contains\":{\"enum\":[\"a\",\"bc\"]},\"maxContains\":2},"
    "{\"type\":\"array\",\"contains\":{\"minimum\":3},\"minContains\":2},"
    "{\"type\":\"object\",\"propertyNames\":{\"maxLength\":2}},"
    "{\"type\":\"object\",\"propertyNames\":{\"enum\":[\"x\"]},\"properties\":{\"y\":{}}},"
    "{\"not\":{\"type\":[\"integer\",\"boolean\"]}}]}}";

START_TEST(test_failing_the_nth_allocation_is_clean)
{
    sift_json_schema_params sp = tu_schema_compact();
    char *want;
    size_t want_len;
    sift_error err;
    ck_assert_int_eq(
        sift_json_schema_to_gbnf(&want, &want_len, cond_schema, strlen(cond_schema), &sp, &err),
        SIFT_OK);
    long nth;
    for (nth = 1;; nth++) {
        fa f = {0, nth, 0};
        sift_allocator al = {sizeof al, fa_alloc, fa_free, &f, NULL};
        sp.allocator = &al;
        char *out = NULL;
        size_t len = 0;
        sift_status st =
            sift_json_schema_to_gbnf(&out, &len, cond_schema, strlen(cond_schema), &sp, &err);
        if (st == SIFT_OK) {
            ck_assert_str_eq(out, want);
            sift_json_schema_free_gbnf(out, &sp);
            ck_assert_int_eq(f.live, 0);
            break;
        }
        ck_assert_msg(st == SIFT_E_NOMEM, "allocation %ld: %s", nth, err.message);
        ck_assert_ptr_null(out);
        ck_assert_int_eq(f.live, 0);
        ck_assert_int_lt(nth, 100000);
    }
    ck_assert_int_gt(nth, 20);
    sp.allocator = NULL;
    sift_json_schema_free_gbnf(want, &sp);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("json_schema_cond");
    TCase *tc = tcase_create("if then else");
    tcase_add_test(tc, test_if_then_else_is_if_and_then_or_not_if_and_else);
    tcase_add_test(tc, test_else_beside_an_any_of);
    tcase_add_test(tc, test_if_that_cannot_be_negated_stays_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("contains");
    tcase_add_test(tc, test_contains_counts_the_elements_that_match);
    tcase_add_test(tc, test_contains_shapes_that_stay_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("propertyNames");
    tcase_add_test(tc, test_property_names_constrain_every_key);
    tcase_add_test(tc, test_property_names_beside_open_declared_names_stay_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("not");
    tcase_add_test(tc, test_not_of_values_properties_and_several_keywords);
    tcase_add_test(tc, test_not_integer_is_the_numbers_with_a_fraction);
    tcase_add_test(tc, test_negations_that_stay_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("merges and bounds");
    tcase_add_test(tc, test_merged_keywords_are_not_dropped);
    tcase_add_test(tc, test_merged_alternatives_multiply_out);
    tcase_add_test(tc, test_merged_alternatives_that_stay_refused);
    tcase_add_test(tc, test_exclusive_fractional_bound);
    suite_add_tcase(s, tc);
    tc = tcase_create("allocation");
    tcase_add_test(tc, test_failing_the_nth_allocation_is_clean);
    suite_add_tcase(s, tc);
    return s;
}

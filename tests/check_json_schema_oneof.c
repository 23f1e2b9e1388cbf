/*
 * check_json_schema_oneof.c - oneOf beyond the linear disjointness tests
 * (src/schema/json_schema_oneof.c): types two branches admit whole taken
 * out, the recursive pairwise test, and the rewrite of overlapping
 * object branches; for each, texts the grammar accepts and texts it
 * rejects (each list checked against a JSON Schema 2020-12 validator when
 * written), and the near-miss shapes that stay refused.
 */
#include <stddef.h>
#include <string.h>

#include "harness.h"
#include "sift.h"
#include "testutil.h"

/* The schema is refused at #/oneOf, as overlapping. */
static void check_refused(const char *schema)
{
    sift_json_schema_params sp = tu_schema_compact();
    sp.source_name = "s.json";
    char *out = NULL;
    size_t n = 0;
    sift_error err;
    sift_status st = sift_json_schema_to_gbnf(&out, &n, schema, strlen(schema), &sp, &err);
    ck_assert_msg(st == SIFT_E_SCHEMA_UNSUPPORTED, "%s: %d", schema, (int)st);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(err.message, "#/oneOf: 'oneOf' whose alternatives may overlap") != NULL,
                  "%s", err.message);
}

START_TEST(test_one_of_types_two_branches_admit_whole_are_taken_out)
{
    /* required sets of two names each: any non-object matches both branches, and an object with
     * both sets too */
    static const char *const good[] = {"{\"r\":1,\"s\":2}", "{\"r\":1,\"s\":2,\"w\":3}",
                                       "{\"w\":1,\"x\":2}"};
    static const char *const bad[] = {
        "\"x\"", "1", "null", "[]", "{}", "{\"r\":1,\"s\":2,\"w\":3,\"x\":4}", "{\"r\":1}"};
    TU_SCHEMA_CHECK("{\"oneOf\": [{\"required\": [\"r\", \"s\"]}, {\"required\": [\"w\", "
                    "\"x\"]}]}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_required_sets_beside_declared_properties)
{
    /* the shape of function-calling schemas: one of the name sets, the properties beside the oneOf
     */
    static const char *const good[] = {"{\"r\":1}", "{\"l\":1,\"w\":2}", "{\"r\":1,\"l\":2}",
                                       "{\"r\":1,\"w\":2}"};
    static const char *const bad[] = {"{}", "{\"r\":1,\"l\":2,\"w\":3}", "{\"l\":1}",
                                      "{\"r\":\"x\"}"};
    TU_SCHEMA_CHECK("{\"type\": \"object\", \"properties\": {\"r\": {\"type\": \"number\"}, "
                    "\"l\": {\"type\": \"number\"}, \"w\": {\"type\": \"number\"}}, "
                    "\"oneOf\": [{\"required\": [\"r\"]}, {\"required\": [\"l\", \"w\"]}]}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_a_property_of_the_other_branch_that_fails)
{
    /* an object of branch 1 escapes branch 2 by a value of a that fails minLength 2 */
    static const char *const good[] = {"{\"a\":\"x\"}", "{\"b\":1}", "{\"a\":\"x\",\"b\":1}",
                                       "{\"a\":3,\"b\":1}"};
    static const char *const bad[] = {"{\"a\":\"xy\",\"b\":1}", "{\"a\":1}", "{}", "\"s\""};
    TU_SCHEMA_CHECK("{\"oneOf\": [{\"required\": [\"a\"], "
                    "\"properties\": {\"a\": {\"type\": \"string\"}}}, {\"required\": [\"b\"], "
                    "\"properties\": {\"a\": {\"minLength\": 2}}}]}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_optional_discriminators)
{
    /* not required: an object without k matches both */
    static const char *const good[] = {"{\"k\":1}", "{\"k\":2}"};
    static const char *const bad[] = {"{}", "{\"k\":3}", "\"x\"", "{\"j\":1}"};
    TU_SCHEMA_CHECK("{\"oneOf\": [{\"properties\": {\"k\": {\"const\": 1}}}, "
                    "{\"properties\": {\"k\": {\"const\": 2}}}]}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_closed_branches_with_optional_names)
{
    /* each closed: an object with a name only one declares matches that one */
    static const char *const good[] = {"{\"d\":\"f\",\"f\":true}", "{\"d\":\"f\"}", "{\"f\":true}",
                                       "{\"s\":true}", "{\"d\":\"s\",\"s\":true}"};
    static const char *const bad[] = {"{}", "{\"d\":\"s\",\"f\":true}", "{\"f\":true,\"s\":true}",
                                      "{\"x\":1}", "1"};
    TU_SCHEMA_CHECK("{\"oneOf\": [{\"type\": \"object\", "
                    "\"properties\": {\"d\": {\"const\": \"f\"}, \"f\": {\"type\": \"boolean\"}}, "
                    "\"additionalProperties\": false}, {\"type\": \"object\", "
                    "\"properties\": {\"d\": {\"const\": \"s\"}, \"s\": {\"type\": \"boolean\"}}, "
                    "\"additionalProperties\": false}]}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_required_properties_of_disjoint_types)
{
    /* a name both require, string in one and integer in the other */
    static const char *const good[] = {"{\"k\":\"s\"}", "{\"k\":1}"};
    static const char *const bad[] = {"{\"k\":null}", "{}", "{\"k\":1.5}"};
    TU_SCHEMA_CHECK("{\"oneOf\": [{\"type\": \"object\", \"required\": [\"k\"], "
                    "\"properties\": {\"k\": {\"type\": \"string\"}}}, {\"type\": \"object\", "
                    "\"required\": [\"k\"], \"properties\": {\"k\": {\"type\": \"integer\"}}}]}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_number_ranges_apart)
{
    static const char *const good[] = {"-1.5", "0", "3"};
    static const char *const bad[] = {"0.5", "\"x\""};
    TU_SCHEMA_CHECK("{\"oneOf\": [{\"type\": \"number\", \"maximum\": 0}, "
                    "{\"type\": \"integer\", \"minimum\": 1}]}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_a_discriminator_in_allof_members)
{
    /* the name required by a $ref member, its const in another member */
    static const char *const good[] = {"{\"kind\":\"a\"}", "{\"kind\":\"b\"}"};
    static const char *const bad[] = {"{\"kind\":\"c\"}", "{}", "1"};
    TU_SCHEMA_CHECK("{\"$defs\": {\"base\": {\"type\": \"object\", \"required\": [\"kind\"]}}, "
                    "\"oneOf\": [{\"allOf\": [{\"$ref\": \"#/$defs/base\"}, "
                    "{\"properties\": {\"kind\": {\"const\": \"a\"}}}]}, "
                    "{\"allOf\": [{\"$ref\": \"#/$defs/base\"}, "
                    "{\"properties\": {\"kind\": {\"const\": \"b\"}}}]}]}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_the_empty_string_and_a_minimum_length)
{
    static const char *const good[] = {"\"\"", "\"abc\""};
    static const char *const bad[] = {"\"abcd\"", "1"};
    TU_SCHEMA_CHECK("{\"type\": \"string\", \"oneOf\": [{\"maxLength\": 0}, {\"minLength\": 1, "
                    "\"maxLength\": 3}]}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_anchored_literal_patterns)
{
    /* a required name whose patterns are ^lit$ of different strings; a literal against an enum */
    static const char *const good[] = {"{\"s\":\"success\"}", "{\"s\":\"a.b\"}", "\"ab\"", "\"c\"",
                                       "\"abc\""};
    static const char *const bad[] = {"{\"s\":\"x\"}", "{\"s\":\"axb\"}", "\"x\"", "{}"};
    TU_SCHEMA_CHECK("{\"oneOf\": [{\"type\": \"object\", \"required\": [\"s\"], "
                    "\"properties\": {\"s\": {\"type\": \"string\", "
                    "\"pattern\": \"^success$\"}}}, {\"type\": \"object\", "
                    "\"required\": [\"s\"], \"properties\": {\"s\": {\"type\": \"string\", "
                    "\"pattern\": \"^a\\\\.b$\"}}}, {\"type\": \"string\", \"pattern\": \"^ab$\"}, "
                    "{\"enum\": [\"abc\", \"c\"]}]}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_every_type_taken_out)
{
    /* the type beside the oneOf is the one two branches admit whole: no value passes, an enum
     * branch none either (as type [] beside an enum) */
    static const char *const good[] = {"{}"};
    static const char *const bad[] = {"{\"p\":\"x\"}", "{\"p\":{}}", "{\"p\":1}", "{\"q\":\"x\"}",
                                      "{\"q\":1}"};
    TU_SCHEMA_CHECK("{\"properties\": {\"p\": {\"type\": \"object\", "
                    "\"oneOf\": [{\"type\": \"object\"}, {\"enum\": [\"x\", \"y\", 1]}, "
                    "{\"type\": \"object\"}]}, \"q\": {\"type\": [], \"enum\": [\"x\", 1]}}}",
                    good, bad);
}
END_TEST

START_TEST(test_one_of_overlaps_left_stay_refused)
{
    /* an unescaped dot is not a literal */
    check_refused("{\"oneOf\": [{\"type\": \"string\", \"pattern\": \"^a\\\\.b$\"}, "
                  "{\"type\": \"string\", \"pattern\": \"^a.b$\"}]}");
    /* integer beside number */
    check_refused("{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}");
    /* an open object beside a closed one that declares other names */
    check_refused("{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"a\": {}}}, "
                  "{\"type\": \"object\", \"properties\": {\"b\": {}}, "
                  "\"additionalProperties\": false}]}");
    /* a closed branch beside an open one: the names outside are not listed */
    check_refused("{\"oneOf\": [{\"type\": \"object\", \"required\": [\"b\"]}, "
                  "{\"type\": \"object\", \"properties\": {\"b\": {}}, "
                  "\"additionalProperties\": false}]}");
    /* a branch with items */
    check_refused("{\"oneOf\": [{\"type\": \"array\", \"items\": {\"type\": \"integer\"}}, "
                  "{\"type\": \"array\", \"items\": {\"type\": \"number\"}}]}");
    /* two patterns */
    check_refused("{\"oneOf\": [{\"type\": \"string\", \"pattern\": \"a\"}, "
                  "{\"type\": \"string\", \"pattern\": \"b\"}]}");
    /* a property schema with additionalProperties */
    check_refused("{\"oneOf\": [{\"type\": \"object\", \"required\": [\"a\"]}, "
                  "{\"type\": \"object\", \"required\": [\"b\"], "
                  "\"properties\": {\"a\": {\"type\": \"object\", "
                  "\"additionalProperties\": false}}}]}");
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("json_schema_oneof");
    TCase *tc = tcase_create("oneOf");
    tcase_add_test(tc, test_one_of_types_two_branches_admit_whole_are_taken_out);
    tcase_add_test(tc, test_one_of_required_sets_beside_declared_properties);
    tcase_add_test(tc, test_one_of_a_property_of_the_other_branch_that_fails);
    tcase_add_test(tc, test_one_of_optional_discriminators);
    tcase_add_test(tc, test_one_of_closed_branches_with_optional_names);
    tcase_add_test(tc, test_one_of_required_properties_of_disjoint_types);
    tcase_add_test(tc, test_one_of_number_ranges_apart);
    tcase_add_test(tc, test_one_of_a_discriminator_in_allof_members);
    tcase_add_test(tc, test_one_of_the_empty_string_and_a_minimum_length);
    tcase_add_test(tc, test_one_of_anchored_literal_patterns);
    tcase_add_test(tc, test_one_of_every_type_taken_out);
    tcase_add_test(tc, test_one_of_overlaps_left_stay_refused);
    suite_add_tcase(s, tc);
    return s;
}

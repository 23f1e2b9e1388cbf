/*
 * check_schema_scopes.c - JSON Schema keywords whose meaning depends on a
 * scope: unevaluatedProperties / unevaluatedItems (what the schema object
 * and its in-place applicators evaluated) and $ref by URI (embedded $id,
 * $anchor, base URIs). Each supported shape is checked on values it must
 * accept and values it must reject; the shapes that depend on the
 * instance stay refused at their JSON Pointer.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "sift.h"
#include "testutil.h"

/* The schema is refused with exactly this message. */
static void check_refused(const char *schema, const char *msg)
{
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.whitespace = SIFT_JSON_WS_COMPACT;
    sp.source_name = "s.json";
    char *out = NULL;
    size_t n = 0;
    sift_error err;
    sift_status st = sift_json_schema_to_gbnf(&out, &n, schema, strlen(schema), &sp, &err);
    ck_assert_msg(st == SIFT_E_SCHEMA_UNSUPPORTED, "%s: want a refusal, got %d", schema, st);
    ck_assert_ptr_null(out);
    ck_assert_str_eq(err.message, msg);
}

START_TEST(test_unevaluated_properties_see_adjacent_and_merged_members)
{
    static const char *good[] = {"{}", "{\"foo\":\"a\"}", "{\"foo\":\"a\",\"bar\":\"b\"}", "5",
                                 "[1]"};
    static const char *bad[] = {"{\"foo\":\"a\",\"baz\":1}", "{\"baz\":1}", "{\"bar\":1}"};
    TU_SCHEMA_CHECK(
        "{\"properties\":{\"foo\":{\"type\":\"string\"}},\"allOf\":[{\"properties\":{\"bar\":{"
        "\"type\":\"string\"}}}],\"unevaluatedProperties\":false}",
        good, bad);
    static const char *good2[] = {"{\"a\":\"x\"}", "{\"n\":1,\"b\":\"y\"}"};
    static const char *bad2[] = {"{\"a\":1}", "{\"n\":\"1\"}"};
    TU_SCHEMA_CHECK(
        "{\"properties\":{\"n\":{\"type\":\"integer\"}},\"unevaluatedProperties\":{\"type\":"
        "\"string\"}}",
        good2, bad2);
    /* $ref beside them: its target's properties are evaluated */
    static const char *good3[] = {"{\"bar\":\"b\",\"foo\":\"a\"}"};
    static const char *bad3[] = {"{\"bar\":\"b\",\"foo\":\"a\",\"baz\":1}"};
    TU_SCHEMA_CHECK(
        "{\"$ref\":\"#/$defs/bar\",\"properties\":{\"foo\":{\"type\":\"string\"}},"
        "\"unevaluatedProperties\":false,\"$defs\":{\"bar\":{\"properties\":{\"bar\":{\"type\":"
        "\"string\"}}}}}",
        good3, bad3);
    /* patternProperties evaluate the names they match */
    static const char *good4[] = {"{\"x1\":1,\"x2\":2}"};
    static const char *bad4[] = {"{\"y\":1}"};
    TU_SCHEMA_CHECK(
        "{\"patternProperties\":{\"^x\":{\"type\":\"integer\"}},\"unevaluatedProperties\":false}",
        good4, bad4);
}
END_TEST

START_TEST(test_nested_unevaluated_properties_have_their_own_scope)
{
    /* cousins do not see each other's properties */
    static const char *good[] = {"{}", "3"};
    static const char *bad[] = {"{\"foo\":1}"};
    TU_SCHEMA_CHECK(
        "{\"allOf\":[{\"properties\":{\"foo\":true}},{\"unevaluatedProperties\":false}]}", good,
        bad);
    /* an inner one evaluates every property of the outer one */
    static const char *good2[] = {"{\"foo\":\"a\",\"bar\":\"long\"}"};
    static const char *bad2[] = {"{\"foo\":1}"};
    TU_SCHEMA_CHECK(
        "{\"properties\":{\"foo\":{\"type\":\"string\"}},\"allOf\":[{\"unevaluatedProperties\":"
        "true}],\"unevaluatedProperties\":{\"maxLength\":2}}",
        good2, bad2);
    /* an inner false forbids what it does not see itself */
    static const char *good3[] = {"{\"foo\":\"a\"}"};
    static const char *bad3[] = {"{\"foo\":\"a\",\"bar\":\"b\"}"};
    TU_SCHEMA_CHECK(
        "{\"properties\":{\"foo\":{\"type\":\"string\"},\"bar\":true},\"allOf\":[{\"properties\":"
        "{\"foo\":true},\"unevaluatedProperties\":false}]}",
        good3, bad3);
}
END_TEST

START_TEST(test_unevaluated_properties_are_distributed_over_disjoint_alternatives)
{
    static const char *good[] = {"{\"kind\":\"a\",\"x\":1}", "{\"kind\":\"b\",\"y\":2}",
                                 "{\"id\":\"q\",\"kind\":\"a\",\"x\":1}"};
    static const char *bad[] = {"{\"kind\":\"a\",\"y\":1}", "{\"kind\":\"b\",\"x\":1}",
                                "{\"kind\":\"a\",\"z\":1}"};
    TU_SCHEMA_CHECK(
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"}},\"oneOf\":[{"
        "\"properties\":{\"kind\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},\"required\":"
        "[\"kind\"]},{\"properties\":{\"kind\":{\"const\":\"b\"},\"y\":{\"type\":\"integer\"}},"
        "\"required\":[\"kind\"]}],\"unevaluatedProperties\":false}",
        good, bad);
}
END_TEST

START_TEST(test_unevaluated_items_follow_the_longest_prefix)
{
    static const char *good[] = {"[]", "[\"a\"]", "[\"a\",1]", "{}"};
    static const char *bad[] = {"[\"a\",1,2]", "[1]", "[\"a\",\"b\"]"};
    TU_SCHEMA_CHECK(
        "{\"prefixItems\":[{\"type\":\"string\"}],\"allOf\":[{\"prefixItems\":[true,{\"type\":"
        "\"integer\"}]}],\"unevaluatedItems\":false}",
        good, bad);
    static const char *good2[] = {"[1,\"x\",\"y\"]"};
    static const char *bad2[] = {"[1,2]"};
    TU_SCHEMA_CHECK(
        "{\"prefixItems\":[{\"type\":\"integer\"}],\"unevaluatedItems\":{\"type\":\"string\"}}",
        good2, bad2);
    /* items evaluates every item after the prefix: nothing left */
    static const char *good3[] = {"[1,2,3]"};
    static const char *bad3[] = {"[\"a\"]"};
    TU_SCHEMA_CHECK("{\"items\":{\"type\":\"integer\"},\"unevaluatedItems\":false}", good3, bad3);
}
END_TEST

START_TEST(test_merged_prefixes_combine_position_by_position)
{
    static const char *good[] = {"[\"a\",1]", "[\"a\"]"};
    static const char *bad[] = {"[\"a\",1,2]", "[1,1]", "[\"a\",\"b\"]"};
    TU_SCHEMA_CHECK(
        "{\"allOf\":[{\"prefixItems\":[{\"type\":\"string\"}]},{\"prefixItems\":[true,{\"type\":"
        "\"integer\"}],\"items\":false}]}",
        good, bad);
}
END_TEST

START_TEST(test_unevaluated_keywords_that_depend_on_the_instance_are_refused)
{
    check_refused("{\"properties\":{\"foo\":true},\"anyOf\":[{\"properties\":{\"bar\":true},"
                  "\"required\":[\"bar\"]},{\"properties\":{\"baz\":true},\"required\":[\"baz\"]}],"
                  "\"unevaluatedProperties\":false}",
                  "s.json:1:156: #/unevaluatedProperties: 'unevaluatedProperties' over 'anyOf' "
                  "alternatives that evaluate different properties or items and may overlap");
    check_refused("{\"dependentSchemas\":{\"a\":{\"properties\":{\"b\":true}}},"
                  "\"unevaluatedProperties\":false}",
                  "s.json:1:77: #/unevaluatedProperties: 'unevaluatedProperties' beside "
                  "'dependentSchemas' (what is evaluated depends on the instance)");
    check_refused("{\"prefixItems\":[true],\"contains\":{\"type\":\"string\"},\"unevaluatedItems\":"
                  "false}",
                  "s.json:1:71: #/unevaluatedItems: 'unevaluatedItems' beside 'contains' (what "
                  "is evaluated depends on the instance)");
}
END_TEST

START_TEST(test_refs_resolve_anchors_and_embedded_ids)
{
    static const char *good[] = {"1", "-3"};
    static const char *bad[] = {"\"x\"", "1.5"};
    TU_SCHEMA_CHECK(
        "{\"$ref\":\"#foo\",\"$defs\":{\"A\":{\"$anchor\":\"foo\",\"type\":\"integer\"}}}", good,
        bad);
    /* draft 6/7: an $id "#name" is an anchor */
    TU_SCHEMA_CHECK(
        "{\"allOf\":[{\"$ref\":\"#foo\"}],\"definitions\":{\"A\":{\"$id\":\"#foo\",\"type\":"
        "\"integer\"}}}",
        good, bad);
    /* $id relative to the base around it; $ref relative to its own */
    static const char *good2[] = {"5", "2.5"};
    static const char *bad2[] = {"\"a\""};
    TU_SCHEMA_CHECK(
        "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"https://"
        "example.com/a/base.json\",\"$ref\":\"nested/foo.json\",\"$defs\":{\"foo\":{\"$id\":"
        "\"nested/foo.json\",\"$ref\":\"./bar.json\"},\"bar\":{\"$id\":\"nested/bar.json\","
        "\"type\":\"number\"}}}",
        good2, bad2);
    /* an absolute-path reference */
    static const char *good3[] = {"\"s\""};
    static const char *bad3[] = {"1"};
    TU_SCHEMA_CHECK(
        "{\"$id\":\"http://example.com/ref/absref.json\",\"$defs\":{\"a\":{\"$id\":\"http://"
        "example.com/ref/absref/foobar.json\",\"type\":\"number\"},\"b\":{\"$id\":\"http://"
        "example.com/absref/foobar.json\",\"type\":\"string\"}},\"allOf\":[{\"$ref\":\"/absref/"
        "foobar.json\"}]}",
        good3, bad3);
}
END_TEST

START_TEST(test_refs_by_urn_and_escaped_pointers)
{
    static const char *good[] = {"{\"foo\":37}", "{\"foo\":{\"foo\":40}}"};
    static const char *bad[] = {"{\"foo\":12}", "12"};
    TU_SCHEMA_CHECK(
        "{\"$id\":\"urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed\",\"minimum\":30,"
        "\"properties\":{\"foo\":{\"$ref\":\"urn:uuid:deadbeef-1234-ffff-ffff-4321feebdaed\"}}}",
        good, bad);
    static const char *good2[] = {"{\"p\":\"s\",\"q\":1}"};
    static const char *bad2[] = {"{\"p\":1}", "{\"q\":\"s\"}"};
    TU_SCHEMA_CHECK(
        "{\"$id\":\"http://x.example/y.json\",\"$defs\":{\"a%b\":{\"type\":\"string\"},\"c/d\":{"
        "\"type\":\"integer\"}},\"properties\":{\"p\":{\"$ref\":\"#/$defs/a%25b\"},\"q\":{\"$ref\":"
        "\"http://x.example/y.json#/$defs/c~1d\"}}}",
        good2, bad2);
}
END_TEST

START_TEST(test_refs_that_name_no_schema_here_are_refused)
{
    /* a remote document */
    check_refused(
        "{\"$id\":\"http://x.example/y.json\",\"properties\":{\"a\":{\"$ref\":"
        "\"other.json\"}}}",
        "s.json:1:60: #/properties/a/$ref: $ref \"other.json\" names no schema in this document "
        "(remote references are not supported)");
    /* an $id inside an enum value names nothing */
    check_refused("{\"$defs\":{\"e\":{\"enum\":[{\"$id\":\"http://x.example/z.json\"}]}},\"$ref\":"
                  "\"http://x.example/z.json\"}",
                  "s.json:1:68: #/$ref: $ref \"http://x.example/z.json\" names no schema in this "
                  "document (remote references are not supported)");
    /* $id beside $ref: the drafts differ, so the draft must be named */
    check_refused("{\"$id\":\"http://x.example/a/\",\"$defs\":{\"f\":{\"$id\":\"f.json\",\"type\":"
                  "\"string\"}},\"properties\":{\"a\":{\"$id\":\"http://x.example/b/\",\"$ref\":"
                  "\"f.json\"}}}",
                  "s.json:1:131: #/properties/a/$ref: $ref beside $id: drafts 6 and 7 resolve it "
                  "against the base URI around, 2019-09 on against the $id (name the draft in "
                  "$schema)");
}
END_TEST

START_TEST(test_copies_of_a_schema_with_id_beside_ref_keep_its_refusal)
{
    /* the anyOf's siblings (a copy holding the $ref) are merged into
     * each alternative: the copy is refused as the schema is */
    check_refused("{\"$id\":\"http://x.example/a/\",\"$defs\":{\"f\":{\"$id\":\"f.json\",\"type\":"
                  "\"string\"}},\"properties\":{\"a\":{\"$id\":\"http://x.example/b/\",\"$ref\":"
                  "\"f.json\",\"anyOf\":[{\"minLength\":2},{\"maxLength\":0}]}}}",
                  "s.json:1:131: #/properties/a/$ref: $ref beside $id: drafts 6 and 7 resolve it "
                  "against the base URI around, 2019-09 on against the $id (name the draft in "
                  "$schema)");
}
END_TEST

START_TEST(test_dynamic_refs_that_resolve_statically_are_refs)
{
    /* one schema declares the dynamic anchor: the $ref's target */
    static const char *good[] = {"[]", "[\"a\"]"};
    static const char *bad[] = {"[1]"};
    TU_SCHEMA_CHECK(
        "{\"$id\":\"https://e.example/root\",\"type\":\"array\",\"items\":{\"$dynamicRef\":"
        "\"#items\"},\"$defs\":{\"foo\":{\"$dynamicAnchor\":\"items\",\"type\":\"string\"}}}",
        good, bad);
    /* a JSON Pointer fragment names no anchor */
    static const char *good2[] = {"{\"t\":1}"};
    static const char *bad2[] = {"{\"f\":1}"};
    TU_SCHEMA_CHECK(
        "{\"$defs\":{\"t\":true,\"f\":false},\"properties\":{\"t\":{\"$dynamicRef\":\"#/"
        "$defs/t\"},\"f\":{\"$dynamicRef\":\"#/$defs/f\"}}}",
        good2, bad2);
    /* two schemas declare it: the dynamic scope decides, refused */
    check_refused("{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":"
                  "\"https://e.example/root\",\"$ref\":\"list\",\"$defs\":{\"foo\":{"
                  "\"$dynamicAnchor\":\"items\",\"type\":\"string\"},\"list\":{\"$id\":\"list\","
                  "\"type\":\"array\",\"items\":{\"$dynamicRef\":\"#items\"},\"$defs\":{\"items\":{"
                  "\"$dynamicAnchor\":\"items\"}}}}}",
                  "s.json:1:221: #/$defs/list/items/$dynamicRef: '$dynamicRef' to the "
                  "$dynamicAnchor \"items\" that several schemas declare (resolved by the dynamic "
                  "scope)");
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("schema_scopes");
    TCase *tc = tcase_create("unevaluated");
    tcase_add_test(tc, test_unevaluated_properties_see_adjacent_and_merged_members);
    tcase_add_test(tc, test_nested_unevaluated_properties_have_their_own_scope);
    tcase_add_test(tc, test_unevaluated_properties_are_distributed_over_disjoint_alternatives);
    tcase_add_test(tc, test_unevaluated_items_follow_the_longest_prefix);
    tcase_add_test(tc, test_merged_prefixes_combine_position_by_position);
    tcase_add_test(tc, test_unevaluated_keywords_that_depend_on_the_instance_are_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("ref");
    tcase_add_test(tc, test_refs_resolve_anchors_and_embedded_ids);
    tcase_add_test(tc, test_refs_by_urn_and_escaped_pointers);
    tcase_add_test(tc, test_refs_that_name_no_schema_here_are_refused);
    tcase_add_test(tc, test_copies_of_a_schema_with_id_beside_ref_keep_its_refusal);
    tcase_add_test(tc, test_dynamic_refs_that_resolve_statically_are_refs);
    suite_add_tcase(s, tc);
    return s;
}

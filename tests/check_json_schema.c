/*
 * check_json_schema.c - the JSON Schema converter (src/schema/json_schema*.c,
 * docs/json-schema.md): for each keyword, texts the grammar accepts and
 * texts it rejects (through sift_grammar_accept_bytes and
 * sift_grammar_is_complete, in the compact whitespace mode unless a test
 * says otherwise); the exact located messages of bad and unsupported
 * schemas; the limits as errors; tool calls (a tools array as one anyOf
 * schema inside a lazy <tool_call> rule); and the failing allocator at every
 * allocation count over the whole conversion.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
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

START_TEST(test_type_list_and_nullable_admit_each_named_type)
{
    static const char *good[] = {"\"a\"", "null", "3"};
    static const char *bad[] = {"true", "3.5", "[]"};
    CHECK("{\"type\":[\"string\",\"null\",\"integer\"]}", good, bad);
    static const char *good2[] = {"true", "null"};
    static const char *bad2[] = {"1", "\"null\""};
    CHECK("{\"type\":\"boolean\",\"nullable\":true}", good2, bad2);
}
END_TEST

START_TEST(test_enum_and_const_match_their_values_exactly)
{
    static const char *good[] = {"\"red\"", "2", "2.0", "null", "{\"a\":[1,true]}", "1.5"};
    static const char *bad[] = {"\"Red\"", "3", "2.5", "{\"a\":[1]}", "\"2\"", "1.50x"};
    CHECK("{\"enum\":[\"red\",2,null,{\"a\":[1,true]},1.5]}", good, bad);
    static const char *good2[] = {"\"a\\nb\\\"c\""};
    static const char *bad2[] = {"\"a\""};
    CHECK("{\"const\":\"a\\nb\\\"c\"}", good2, bad2);
}
END_TEST

START_TEST(test_enum_values_of_other_types_than_type_are_left_out)
{
    static const char *good[] = {"\"a\""};
    static const char *bad[] = {"1"};
    CHECK("{\"type\":\"string\",\"enum\":[\"a\",1]}", good, bad);
}
END_TEST

START_TEST(test_properties_follow_definition_order_and_required_ones_are_present)
{
    static const char *good[] = {"{\"a\":1}", "{\"a\":1,\"b\":\"x\"}", "{\"a\":1,\"c\":true}",
                                 "{\"a\":1,\"b\":\"x\",\"c\":false}"};
    static const char *bad[] = {"{}",
                                "{\"b\":\"x\"}",
                                "{\"b\":\"x\",\"a\":1}",
                                "{\"a\":\"1\"}",
                                "{\"a\":1,\"a\":1}",
                                "{\"a\":1,}",
                                "{\"a\":1,\"d\":0}"};
    CHECK("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":"
          "\"string\"},\"c\":{\"type\":\"boolean\"}},\"required\":[\"a\"],"
          "\"additionalProperties\":false}",
          good, bad);
}
END_TEST

START_TEST(test_optional_properties_before_the_first_required_one_may_be_left_out)
{
    static const char *good[] = {"{\"c\":3}", "{\"a\":1,\"c\":3}", "{\"b\":2,\"c\":3}",
                                 "{\"a\":1,\"b\":2,\"c\":3}"};
    static const char *bad[] = {"{\"a\":1}", "{\"a\":1,\"b\":2}", "{}"};
    CHECK("{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"required\":[\"c\"],"
          "\"additionalProperties\":false}",
          good, bad);
}
END_TEST

START_TEST(test_additional_properties_follow_the_declared_ones_and_exclude_their_names)
{
    static const char *good[] = {"{\"a\":1,\"x\":\"s\"}", "{\"x\":\"s\",\"ab\":\"t\"}", "{}",
                                 "{\"\":\"e\"}"};
    static const char *bad[] = {"{\"x\":1}", "{\"a\":\"s\"}", "{\"x\":\"s\",\"a\":1}"};
    CHECK("{\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":"
          "\"string\"}}",
          good, bad);
}
END_TEST

START_TEST(test_strict_mode_forbids_undeclared_properties_unless_allowed)
{
    const char *schema = "{\"properties\":{\"a\":{}}}";
    sift_json_schema_params sp = compact();
    sift_grammar *loose = compile_with(schema, &sp);
    ck_assert(accepts(loose, "{\"a\":1,\"z\":2}"));
    sift_grammar_free(loose);
    sp.strict = 1;
    sift_grammar *strict = compile_with(schema, &sp);
    ck_assert(!accepts(strict, "{\"a\":1,\"z\":2}"));
    ck_assert(accepts(strict, "{\"a\":1}"));
    sift_grammar_free(strict);
    sift_grammar *given =
        compile_with("{\"properties\":{\"a\":{}},\"additionalProperties\":true}", &sp);
    ck_assert(accepts(given, "{\"a\":1,\"z\":2}"));
    sift_grammar_free(given);
}
END_TEST

START_TEST(test_min_and_max_properties_bound_a_map)
{
    static const char *good[] = {"{\"a\":1}", "{\"a\":1,\"b\":2}"};
    static const char *bad[] = {"{}", "{\"a\":1,\"b\":2,\"c\":3}", "{\"a\":\"x\"}"};
    CHECK("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},"
          "\"minProperties\":1,\"maxProperties\":2}",
          good, bad);
}
END_TEST

START_TEST(test_items_min_items_and_max_items_bound_an_array)
{
    static const char *good[] = {"[1]", "[1,2]", "[1,2,3]"};
    static const char *bad[] = {"[]", "[1,2,3,4]", "[1,\"a\"]", "[1,]"};
    CHECK("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}",
          good, bad);
    /* without "type", items constrains arrays alone */
    static const char *good2[] = {"[]", "[[],[1]]", "{}", "1", "\"x\""};
    static const char *bad2[] = {"[1]"};
    CHECK("{\"items\":{\"type\":\"array\"}}", good2, bad2);
}
END_TEST

START_TEST(test_prefix_items_fix_the_first_elements)
{
    static const char *good[] = {"[]", "[\"a\"]", "[\"a\",1]", "[\"a\",1,true,false]"};
    static const char *bad[] = {"[1]", "[\"a\",\"b\"]", "[\"a\",1,2]"};
    CHECK("{\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":{\"type\":"
          "\"boolean\"}}",
          good, bad);
    static const char *good2[] = {"[\"a\",1]"};
    static const char *bad2[] = {"[\"a\"]", "[\"a\",1,2]"};
    CHECK("{\"items\":[{\"type\":\"string\"},{}],\"additionalItems\":false,\"minItems\":2}", good2,
          bad2);
}
END_TEST

START_TEST(test_min_length_and_max_length_count_characters)
{
    static const char *good[] = {"\"ab\"", "\"abc\"", "\"\xc3\xa9\\n\"", "\"\\u0041b\""};
    static const char *bad[] = {"\"a\"", "\"abcd\"", "\"\""};
    CHECK("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", good, bad);
}
END_TEST

START_TEST(test_lengths_past_the_repetition_limit_are_exact)
{
    const char *schema = "{\"type\":\"string\",\"minLength\":1500,\"maxLength\":2500}";
    sift_grammar *g = compile_with(schema, NULL);
    static char text[2600];
    for (int len = 1498; len <= 2502; len += len == 1501 ? 998 : 1) {
        text[0] = '"';
        memset(text + 1, 'x', (size_t)len);
        text[len + 1] = '"';
        text[len + 2] = '\0';
        ck_assert_msg(accepts(g, text) == (len >= 1500 && len <= 2500), "length %d", len);
    }
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_format_date_checks_month_lengths_and_leap_years)
{
    static const char *good[] = {"\"2024-02-29\"", "\"2000-02-29\"", "\"2023-04-30\"",
                                 "\"1999-12-31\""};
    static const char *bad[] = {"\"2023-02-29\"", "\"1900-02-29\"", "\"2023-04-31\"",
                                "\"2023-13-01\"", "\"2023-00-10\"", "\"2023-1-01\""};
    CHECK("{\"type\":\"string\",\"format\":\"date\"}", good, bad);
}
END_TEST

START_TEST(test_format_time_and_date_time_need_an_offset)
{
    static const char *good[] = {"\"2024-01-02T03:04:05Z\"", "\"2024-01-02t23:59:60.123Z\"",
                                 "\"2024-01-02T23:59:60-00:00\""};
    /* a leap second is the last second of a UTC day only */
    static const char *bad[] = {"\"2024-01-02T03:04:05\"", "\"2024-01-02T24:00:00Z\"",
                                "\"2024-01-02 03:04:05Z\"", "\"2024-01-02t23:59:60.123+05:30\"",
                                "\"2024-01-02T12:34:60Z\""};
    CHECK("{\"type\":\"string\",\"format\":\"date-time\"}", good, bad);
    static const char *good2[] = {"\"12:00:00-01:00\""};
    static const char *bad2[] = {"\"12:00\""};
    CHECK("{\"format\":\"time\"}", good2, bad2);
}
END_TEST

START_TEST(test_formats_uuid_ipv4_ipv6_email_hostname_and_uri)
{
    static const char *g1[] = {"\"123e4567-e89b-12d3-a456-426614174000\""};
    static const char *b1[] = {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b\""};
    CHECK("{\"format\":\"uuid\"}", g1, b1);
    static const char *g2[] = {"\"0.0.0.0\"", "\"255.255.255.255\"", "\"10.1.20.199\""};
    static const char *b2[] = {"\"256.1.1.1\"", "\"01.1.1.1\"", "\"1.1.1\""};
    CHECK("{\"format\":\"ipv4\"}", g2, b2);
    static const char *g3[] = {"\"::\"", "\"::1\"", "\"fe80::1:2\"", "\"1:2:3:4:5:6:7:8\"",
                               "\"::ffff:10.0.0.1\""};
    static const char *b3[] = {"\"1:2:3:4:5:6:7\"", "\"1::2::3\"", "\"12345::\""};
    CHECK("{\"format\":\"ipv6\"}", g3, b3);
    static const char *g4[] = {"\"a.b+c@example.com\"", "\"x@y\""};
    static const char *b4[] = {"\"no-at-sign\"", "\"a@\"", "\".a@b.c\"", "\"a@-b.c\""};
    CHECK("{\"format\":\"email\"}", g4, b4);
    static const char *g5[] = {"\"example.com\"", "\"a-b.c\""};
    static const char *b5[] = {"\"-a.com\"", "\"a..b\"", "\"a_b\""};
    CHECK("{\"format\":\"hostname\"}", g5, b5);
    static const char *g6[] = {"\"https://example.com/a?b=c#d\"", "\"urn:isbn:0451450523\""};
    static const char *b6[] = {"\"example.com\"", "\"http://a b\""};
    CHECK("{\"format\":\"uri\"}", g6, b6);
}
END_TEST

/* additionalProperties and items see the properties and prefix of their
 * own schema object, not those another allOf member (or $ref target)
 * declares; so what one member adds is "additional" to the others. */
START_TEST(test_merged_additional_properties_and_items_see_their_own_member)
{
    static const char *g1[] = {"{\"a\":1}", "{}"};
    static const char *b1[] = {"{\"a\":1,\"b\":2}", "{\"b\":2}"};
    CHECK("{\"allOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":false},"
          "{\"properties\":{\"b\":{}}}]}",
          g1, b1);
    static const char *g2[] = {"{\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\",\"c\":\"y\"}"};
    static const char *b2[] = {"{\"b\":2}", "{\"c\":3}"};
    CHECK("{\"$ref\":\"#/$defs/t\",\"properties\":{\"b\":{}},"
          "\"$defs\":{\"t\":{\"properties\":{\"a\":{}},\"additionalProperties\":{\"type\":"
          "\"string\"}}}}",
          g2, b2);
    static const char *g3[] = {"[\"x\",\"y\"]", "[]"};
    static const char *b3[] = {"[1]", "[\"x\",1]"};
    CHECK("{\"allOf\":[{\"items\":{\"type\":\"string\"}},{\"prefixItems\":[{}]}]}", g3, b3);
    /* the top schema's own additionalProperties: false forbids what the
     * members declare, and a required one then admits no object */
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(convert_err("{\"type\":\"object\",\"allOf\":[{\"properties\":{\"a\":{}},"
                                 "\"required\":[\"a\"]}],\"additionalProperties\":false}",
                                 &sp, &err),
                     SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "admits no value"));
    /* patternProperties in one member, additionalProperties in another:
     * refused at a pointer */
    ck_assert_int_eq(convert_err("{\"allOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":"
                                 "false},{\"patternProperties\":{\"^x\":{}}}]}",
                                 &sp, &err),
                     SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "#/additionalProperties"));
}
END_TEST

/* A required name that properties does not list is an additional
 * property: additionalProperties (or strict) decides its value. */
START_TEST(test_required_names_without_a_schema_take_additional_properties)
{
    static const char *g1[] = {"{\"a\":1,\"b\":\"x\"}"};
    static const char *b1[] = {"{\"a\":1,\"b\":2}", "{\"a\":1}"};
    CHECK("{\"properties\":{\"a\":{}},\"required\":[\"b\"],\"additionalProperties\":{\"type\":"
          "\"string\"}}",
          g1, b1);
    /* a property under false can be left out; a required one cannot */
    static const char *g2[] = {"{\"x\":{}}", "{\"x\":{\"a\":1}}"};
    static const char *b2[] = {"{\"x\":{\"a\":1,\"b\":2}}", "{\"x\":{\"b\":2}}"};
    CHECK("{\"properties\":{\"x\":{\"anyOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":"
          "false},{\"properties\":{\"a\":{}},\"required\":[\"b\"],\"additionalProperties\":false}"
          "]}}}",
          g2, b2);
}
END_TEST

/* Keys compare by decoded value: no spelling of a declared name slips
 * through the grammar of undeclared keys. */
START_TEST(test_escaped_spellings_of_declared_keys_are_not_other_keys)
{
    static const char *good[] = {
        "{\"foo\":1}",   "{\"a\\\"b\":1}",     "{\"c\\nd\":1}",
        "{\"x\":\"s\"}", "{\"a\\\"c\":\"s\"}", "{\"x\\u001fy\":\"s\",\"a\\\\c\":\"s\"}",
    };
    static const char *bad[] = {
        "{\"foo\":\"s\"}",       "{\"f\\u006fo\":\"s\"}", "{\"a\\\"b\":\"s\"}",
        "{\"a\\u0022b\":\"s\"}", "{\"c\\nd\":\"s\"}",     "{\"c\\u000ad\":\"s\"}",
        "{\"c\\u000Ad\":\"s\"}", "{\"x\\/y\":\"s\"}",     "{\"x\\u001Fy\":\"s\"}",
    };
    CHECK("{\"properties\":{\"foo\":{\"type\":\"integer\"},\"a\\\"b\":{\"type\":\"integer\"},"
          "\"c\\nd\":{\"type\":\"integer\"}}}",
          good, bad);
}
END_TEST

/* A pattern that may match a declared name would give it a second way
 * in, with the pattern's schema instead of its own. */
START_TEST(test_patterns_matching_declared_names_are_refused)
{
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(convert_err("{\"properties\":{\"a\":{\"type\":\"integer\"}},"
                                 "\"patternProperties\":{\"^a\":true}}",
                                 &sp, &err),
                     SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "#/patternProperties"));
}
END_TEST

START_TEST(test_uri_formats_follow_rfc_3986)
{
    static const char *g1[] = {"\"https://example.com/a?b=c#d\"",
                               "\"urn:isbn:0451450523\"",
                               "\"http://u:p@[::1]:8080/x%20y\"",
                               "\"mailto:a@b\"",
                               "\"file:///etc\"",
                               "\"a:\"",
                               "\"x://[v1.a]\""};
    static const char *b1[] = {"\"example.com\"", "\"http://a b\"",  "\"a:%zz\"",   "\"a:%2\"",
                               "\"1a:b\"",        "\"http://[::1\"", "\"a:b#c#d\"", "\"a:[\"",
                               "\"http://a/b^\"", "\"/x\""};
    CHECK("{\"format\":\"uri\"}", g1, b1);
    static const char *g2[] = {"\"/x\"",  "\"../a/b?c\"", "\"#f\"",   "\"\"",
                               "\"//h\"", "\"a:b\"",      "\"x/y:z\""};
    static const char *b2[] = {"\"a b\"", "\"%g0\"", "\"x[y\"", "\"//[1]\"", "\"a#b#c\""};
    CHECK("{\"format\":\"uri-reference\"}", g2, b2);
    static const char *g3[] = {"\"a.b.c\""};
    static const char *b3[] = {"\"a.b.c.d.e.f.g.h.i\"", "\"a.bbbbbbbbbbbbbbbbbbbbbbbbbbb\""};
    CHECK("{\"format\":\"hostname\"}", g3, b3);
}
END_TEST

/* JSON Schema counts code points: a surrogate pair written as two \u
 * escapes is one, so a length-counted string admits no surrogate escape
 * (the character is written raw). */
START_TEST(test_length_counted_strings_admit_no_surrogate_escapes)
{
    static const char *good[] = {"\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"", "\"\\u00e9\\u20AC\"",
                                 "\"\\\"\\\\\""};
    static const char *bad[] = {"\"\\ud83d\\ude00\"", "\"a\\uDBFF\"", "\"x\""};
    CHECK("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", good, bad);
    static const char *bad2[] = {"\"\\ud83d\\ude00\"", "\"\""};
    static const char *good2[] = {"\"ab\""};
    CHECK("{\"type\":\"string\",\"minLength\":2}", good2, bad2);
}
END_TEST

/* A $ref target that admits no value (here a required name that
 * additionalProperties: false forbids) removes what refers to it, as
 * false does, instead of failing the whole schema. */
START_TEST(test_ref_targets_admitting_no_value_remove_their_references)
{
    static const char *good[] = {"1", "[]"};
    static const char *bad[] = {"{\"b\":1}", "{}", "[{\"b\":1}]"};
    CHECK("{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},{\"type\":\"integer\"},{\"type\":\"array\","
          "\"items\":{\"$ref\":\"#/$defs/"
          "n\"}}],\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"a\":{}},"
          "\"required\":[\"b\"],\"additionalProperties\":false}}}",
          good, bad);
}
END_TEST

START_TEST(test_a_keyword_constrains_its_own_type_only)
{
    static const char *good[] = {"5", "null", "{}", "\"ab\"", "[]"};
    static const char *bad[] = {"\"a\"", "\"\""};
    CHECK("{\"minLength\":2}", good, bad);
    static const char *good2[] = {"{\"a\":1}", "\"x\"", "true"};
    static const char *bad2[] = {"{}", "{\"b\":1}"};
    CHECK("{\"required\":[\"a\"]}", good2, bad2);
    /* 1.0 is an integer, bounded or not */
    static const char *good3[] = {"1", "1.0", "-3.00", "0.0"};
    static const char *bad3[] = {"1.5", "1.", "1.01"};
    CHECK("{\"type\":\"integer\"}", good3, bad3);
    static const char *good4[] = {"2", "2.0", "4.000"};
    static const char *bad4[] = {"1.0", "5.0", "2.5"};
    CHECK("{\"type\":\"integer\",\"minimum\":2,\"maximum\":4}", good4, bad4);
    /* not under draft 4 */
    static const char *good5[] = {"{\"a\":1,\"b\":2}"};
    static const char *bad5[] = {"{\"a\":1.0}", "{\"b\":2.0}"};
    CHECK("{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"properties\":{\"a\":{"
          "\"type\":\"integer\"},\"b\":{\"type\":\"integer\",\"minimum\":1}}}",
          good5, bad5);
}
END_TEST

START_TEST(test_enum_and_const_values_meet_their_sibling_keywords)
{
    static const char *good[] = {"\"abc\"", "7"};
    static const char *bad[] = {"\"a\"", "3"};
    CHECK("{\"enum\":[\"a\",\"abc\",3,7],\"minLength\":2,\"minimum\":5}", good, bad);
    static const char *good2[] = {"{\"a\":1,\"b\":2}"};
    static const char *bad2[] = {"{\"a\":1}"};
    CHECK("{\"allOf\":[{\"enum\":[{\"a\":1},{\"a\":1,\"b\":2}]},{\"required\":[\"b\"]}]}", good2,
          bad2);
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(convert_err("{\"const\":3,\"minimum\":5}", &sp, &err),
                     SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "admits no value"));
    ck_assert_int_eq(convert_err("{\"enum\":[\"a\"],\"pattern\":\"(a)\\\\1\"}", &sp, &err),
                     SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "#/enum: a value of 'enum' that the keywords"));
    /* not, properties, anyOf, items ... decide each value */
    static const char *good3[] = {"[1,2]", "{\"a\":\"x\"}", "4"};
    static const char *bad3[] = {"[1,2,3]", "{\"a\":1}", "3", "\"s\"", "null"};
    CHECK("{\"allOf\":[{\"enum\":[[1,2],[1,2,3],{\"a\":\"x\"},{\"a\":1},3,4,\"s\",null]},{\"not\":{"
          "\"anyOf\":[{\"type\":\"array\",\"minItems\":3},{\"type\":\"object\",\"properties\":{"
          "\"a\":{"
          "\"type\":\"integer\"}}},{\"type\":\"integer\",\"multipleOf\":3},{\"type\":[\"string\","
          "\"null\"]}]}}]}",
          good3, bad3);
    /* draft 7: a $ref ignores its siblings; 2020-12: they apply too */
    static const char *good5[] = {"\"x\""};
    static const char *bad5[] = {"1"};
    CHECK("{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"definitions\":{\"a\":{"
          "\"type\":\"integer\"}},\"allOf\":[{\"enum\":[1,\"x\"]},{\"not\":{\"$ref\":\"#/"
          "definitions/a\",\"type\":\"string\"}}]}",
          good5, bad5);
    static const char *good6[] = {"\"x\"", "1"};
    check_texts("{\"definitions\":{\"a\":{\"type\":\"integer\"}},\"allOf\":[{\"enum\":[1,\"x\"]},{"
                "\"not\":{\"$ref\":\"#/definitions/a\",\"type\":\"string\"}}]}",
                good6, N(good6), NULL, 0);
    /* a value not decided beside a pattern that only strings take */
    static const char *good4[] = {"1"};
    static const char *bad4[] = {"2"};
    CHECK("{\"enum\":[1,2],\"pattern\":\"b\",\"not\":{\"const\":2.0}}", good4, bad4);
}
END_TEST

START_TEST(test_enum_values_meet_patterns_and_fractional_multiples)
{
    /* patternProperties beside additionalProperties, keys matched by value */
    static const char *good[] = {"{\"ab\":1}", "{\"c\":\"x\"}"};
    static const char *bad[] = {"{\"ab\":\"x\"}", "{\"c\":1}", "{\"xb\":true}"};
    CHECK("{\"enum\":[{\"ab\":1},{\"ab\":\"x\"},{\"c\":\"x\"},{\"c\":1},{\"xb\":true}],"
          "\"patternProperties\":{\"b$\":{\"type\":\"integer\"}},\"additionalProperties\":{"
          "\"type\":\"string\"}}",
          good, bad);
    /* pattern on a string value: a match anywhere */
    static const char *good2[] = {"\"abc\"", "\"\u00e9b\""};
    static const char *bad2[] = {"\"xyz\""};
    CHECK("{\"enum\":[\"abc\",\"\u00e9b\",\"xyz\"],\"pattern\":\"b\"}", good2, bad2);
    /* multipleOf a fraction, where decimal and binary readings agree */
    static const char *good3[] = {"4.5", "3"};
    static const char *bad3[] = {"4", "0.75"};
    CHECK("{\"enum\":[4.5,4,0.75,3],\"multipleOf\":1.5}", good3, bad3);
    /* a format name outside the standard ones is an annotation */
    static const char *good4[] = {"\"bb\""};
    static const char *bad4[] = {"\"a\""};
    CHECK("{\"type\":\"string\",\"format\":\"url\",\"enum\":[\"a\",\"bb\"],\"minLength\":2}", good4,
          bad4);
    /* undecided: the readings disagree (0.3 / 0.1), a key with a quote,
     * a pattern outside the subset beside additionalProperties */
    sift_json_schema_params sp = compact();
    sift_error err;
    static const char *const refused[] = {
        "{\"enum\":[0.3],\"multipleOf\":0.1}",
        "{\"enum\":[{\"a\\\"\":1}],\"patternProperties\":{\"a\":{\"type\":\"string\"}}}",
        ("{\"enum\":[{\"aa\":1}],\"patternProperties\":{\"(a)\\\\1\":{}},"
         "\"additionalProperties\":false}"),
        "{\"enum\":[\"a@b.c\"],\"format\":\"email\",\"minLength\":2}",
    };
    for (size_t i = 0; i < N(refused); i++) {
        ck_assert_int_eq(convert_err(refused[i], &sp, &err), SIFT_E_SCHEMA_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(err.message, "#/enum: a value of 'enum' that the keywords"));
    }
}
END_TEST

START_TEST(test_a_pattern_with_lengths_keeps_both)
{
    static const char *good[] = {"\"ab\"", "\"abc\""};
    static const char *bad[] = {"\"a\"", "\"abcd\"", "\"aB\""};
    CHECK("{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"minLength\":2,\"maxLength\":3}", good,
          bad);
    /* a repeated part two characters long, and an unanchored side */
    static const char *good2[] = {"\"x12\"", "\"x1234\""};
    static const char *bad2[] = {"\"x\"", "\"x123456\"", "\"x123\""};
    CHECK("{\"type\":\"string\",\"pattern\":\"^x(?:[0-9]{2})*$\",\"minLength\":2,\"maxLength\":"
          "6}",
          good2, bad2);
    static const char *good3[] = {"\"q\"", "\"\\nq\"", "\"\u00e9aq\""};
    static const char *bad3[] = {"\"abcq\"", "\"qa\""};
    CHECK("{\"type\":\"string\",\"pattern\":\"q$\",\"maxLength\":3}", good3, bad3);
    /* two parts of varying length (json_schema_strlen.c; more in
     * check_schema_strlen.c) */
    static const char *good4[] = {"\"ab\"", "\"aabb\"", "\"abbb\""};
    static const char *bad4[] = {"\"aabbb\"", "\"a\"", "\"ba\""};
    CHECK("{\"pattern\":\"^a+b+$\",\"maxLength\":4}", good4, bad4);
}
END_TEST

START_TEST(test_dependencies_make_names_required_with_their_trigger)
{
    static const char *good[] = {"{}", "{\"b\":1}", "{\"b\":1,\"a\":2}", "3"};
    static const char *bad[] = {"{\"a\":2}", "{\"a\":2,\"c\":1}"};
    CHECK("{\"dependentRequired\":{\"a\":[\"b\"]}}", good, bad);
    CHECK("{\"dependencies\":{\"a\":[\"b\"]}}", good, bad);
    /* a schema dependency applies with its trigger only */
    static const char *good2[] = {"{\"b\":\"x\"}", "{\"a\":1,\"b\":2}", "{}"};
    static const char *bad2[] = {"{\"a\":1,\"b\":\"x\"}", "{\"a\":1}"};
    CHECK("{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"dependentSchemas\":{\"a\":{"
          "\"properties\":{\"b\":{\"type\":\"integer\"}},\"required\":[\"b\"]}}}",
          good2, bad2);
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(convert_err("{\"dependentRequired\":{\"a\":[\"b\"],\"b\":[],\"c\":[],\"d\":[],"
                                 "\"e\":[]}}",
                                 &sp, &err),
                     SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "#/dependentRequired: more than 4"));
}
END_TEST

START_TEST(test_not_of_simple_shapes_is_its_complement)
{
    static const char *good[] = {"1", "{}", "null", "[]"};
    static const char *bad[] = {"\"a\"", "true"};
    CHECK("{\"not\":{\"type\":[\"string\",\"boolean\"]}}", good, bad);
    /* a keyword of one type: its negation admits that type only */
    static const char *good2[] = {"\"ab\"", "\"\""};
    static const char *bad2[] = {"\"abc\"", "1", "null"};
    CHECK("{\"not\":{\"minLength\":3}}", good2, bad2);
    static const char *good3[] = {"{\"a\":1}", "{\"b\":1}", "{}"};
    static const char *bad3[] = {"{\"a\":1,\"b\":2}", "[]"};
    CHECK("{\"properties\":{\"a\":{},\"b\":{}},\"not\":{\"required\":[\"a\",\"b\"]}}", good3, bad3);
    /* not anyOf: none of them; two nots in allOf; not not */
    static const char *good4[] = {"[]", "{}"};
    static const char *bad4[] = {"1", "\"x\"", "null", "true"};
    CHECK(
        "{\"allOf\":[{\"not\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"string\"}]}},{\"not\":{"
        "\"type\":\"null\"}}],\"not\":{\"not\":{\"type\":[\"object\",\"array\",\"string\"]}}}",
        good4, bad4);
    static const char *good5[] = {"6", "70"};
    static const char *bad5[] = {"5", "-1", "\"x\""};
    CHECK("{\"type\":\"integer\",\"not\":{\"maximum\":5}}", good5, bad5);
    /* not integer beside number bounds: refused (check_json_schema_cond
     * has it alone) */
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(convert_err("{\"minimum\":1,\"not\":{\"type\":\"integer\"}}", &sp, &err),
                     SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "#/not: 'not' is not supported"));
}
END_TEST

START_TEST(test_one_of_required_name_sets_admits_exactly_one)
{
    static const char *good[] = {"{\"a\":1}", "{\"b\":true,\"c\":0}"};
    static const char *bad[] = {"{\"a\":1,\"b\":true}", "{}", "{\"c\":0}", "1", "{\"a\":\"x\"}"};
    CHECK("{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{},\"c\":{}},\"oneOf\":[{"
          "\"required\":[\"a\"]},{\"required\":[\"b\"]}]}",
          good, bad);
    /* a set inside another: the larger one is never alone */
    static const char *good2[] = {"{\"x\":1}"};
    static const char *bad2[] = {"{\"x\":1,\"y\":2}", "{\"y\":2}"};
    CHECK("{\"properties\":{\"x\":{},\"y\":{}},\"oneOf\":[{\"required\":[\"x\"]},{\"required\":["
          "\"x\","
          "\"y\"]}]}",
          good2, bad2);
}
END_TEST

START_TEST(test_multiple_of_an_integer_follows_the_remainders)
{
    char text[32];
    sift_grammar *g = compile_with("{\"type\":\"integer\",\"multipleOf\":7}", NULL);
    for (int v = -300; v <= 300; v++) {
        snprintf(text, sizeof text, "%d", v);
        ck_assert_msg(accepts(g, text) == (v % 7 == 0), "%d", v);
    }
    ck_assert(accepts(g, "14.00"));
    ck_assert(!accepts(g, "14.5") && !accepts(g, "007"));
    sift_grammar_free(g);
    static const char *good[] = {"0", "12", "\"x\"", "6.0"};
    static const char *bad[] = {"-6", "13", "6.5"};
    CHECK("{\"multipleOf\":6,\"minimum\":0}", good, bad);
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(convert_err("{\"type\":\"number\",\"multipleOf\":0.01}", &sp, &err),
                     SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "#/multipleOf: 'multipleOf' of a fraction"));
    ck_assert_int_eq(
        convert_err("{\"type\":\"integer\",\"multipleOf\":2,\"maximum\":9}", &sp, &err),
        SIFT_E_SCHEMA_UNSUPPORTED);
    /* above 0: 0 itself is out, so not the non-negative multiples */
    ck_assert_int_eq(
        convert_err("{\"type\":\"integer\",\"multipleOf\":2,\"exclusiveMinimum\":0}", &sp, &err),
        SIFT_E_SCHEMA_UNSUPPORTED);
}
END_TEST

START_TEST(test_lengths_every_string_of_a_format_has_are_kept)
{
    static const char *good[] = {"\"2024-01-31\"", "[]"};
    static const char *bad[] = {"\"2024-01-32\"", "\"x\""};
    CHECK("{\"anyOf\":[{\"type\":\"string\",\"format\":\"date\",\"minLength\":1,\"maxLength\":10},{"
          "\"type\":\"array\"},{\"type\":\"string\",\"format\":\"uuid\",\"maxLength\":35}]}",
          good, bad);
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(
        convert_err("{\"type\":\"string\",\"format\":\"ipv4\",\"maxLength\":12}", &sp, &err),
        SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "#/maxLength: 'maxLength' beside 'format'"));
}
END_TEST

/* Every decimal k/1000 (and k/1000 + 0.0005) in [0, 5] against a range
 * with a fractional bound. */
static void check_frac_range(const char *schema, double lo, double hi)
{
    sift_grammar *g = compile_with(schema, NULL);
    char text[32];
    for (int k = 0; k <= 10000; k++) {
        double v = k / 2000.0;
        snprintf(text, sizeof text, k % 2 ? "%.4f" : "%.3f", v);
        ck_assert_msg(accepts(g, text) == (v >= lo && v <= hi), "%s: %s", schema, text);
    }
    ck_assert(!accepts(g, "-1") && !accepts(g, "1e0"));
    sift_grammar_free(g);
}

START_TEST(test_a_fractional_bound_compares_the_fraction_digit_by_digit)
{
    check_frac_range("{\"type\":\"number\",\"minimum\":0.25}", 0.25, 1e9);
    check_frac_range("{\"type\":\"number\",\"minimum\":1.375,\"maximum\":4}", 1.375, 4);
    check_frac_range("{\"type\":\"number\",\"minimum\":1,\"maximum\":3.5}", 1, 3.5);
    check_frac_range("{\"type\":\"number\",\"minimum\":0,\"maximum\":0.125}", 0, 0.125);
    /* exclusive: from the next double up (0.5000000000000001) */
    check_frac_range("{\"type\":\"number\",\"exclusiveMinimum\":0.5}", 0.5005, 1e9);
    /* negative or two fractional bounds: refused */
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(convert_err("{\"type\":\"number\",\"minimum\":-0.5}", &sp, &err),
                     SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_int_eq(
        convert_err("{\"type\":\"number\",\"minimum\":0.5,\"maximum\":1.5}", &sp, &err),
        SIFT_E_SCHEMA_UNSUPPORTED);
}
END_TEST

START_TEST(test_min_properties_one_without_required_means_not_empty)
{
    static const char *good[] = {"{\"a\":1}", "{\"b\":1}", "{\"a\":1,\"b\":2}", "{\"c\":3}", "[]"};
    static const char *bad[] = {"{}"};
    CHECK("{\"properties\":{\"a\":{},\"b\":{}},\"minProperties\":1}", good, bad);
    static const char *good2[] = {"{\"b\":1}"};
    static const char *bad2[] = {"{}", "{\"c\":3}"};
    CHECK("{\"type\":\"object\",\"properties\":{\"a\":false,\"b\":{}},\"minProperties\":1,"
          "\"additionalProperties\":false}",
          good2, bad2);
}
END_TEST

START_TEST(test_format_is_asserted_unless_it_is_an_annotation)
{
    const char *schema = "{\"type\":\"string\",\"format\":\"date\"}";
    sift_json_schema_params sp = compact();
    sift_grammar *g = compile_with(schema, &sp);
    ck_assert(accepts(g, "\"2024-02-29\""));
    ck_assert(!accepts(g, "\"tomorrow\""));
    sift_grammar_free(g);
    sp.format = SIFT_JSON_FORMAT_ANNOTATION;
    g = compile_with(schema, &sp);
    ck_assert(accepts(g, "\"tomorrow\""));
    ck_assert(!accepts(g, "1"));
    sift_grammar_free(g);
    /* a format sift cannot check is no refusal either */
    char *out = NULL;
    size_t n = 0;
    sift_error err;
    ck_assert_int_eq(sift_json_schema_to_gbnf(&out, &n, "{\"format\":\"iri\"}", 16, &sp, &err),
                     SIFT_OK);
    sift_json_schema_free_gbnf(out, &sp);
    sp.format = (sift_json_format)2;
    ck_assert_int_eq(sift_json_schema_to_gbnf(&out, &n, "{}", 2, &sp, &err), SIFT_E_ARG);
}
END_TEST

START_TEST(test_custom_formats_are_ignored_as_annotations)
{
    static const char *good[] = {"\"anything\""};
    static const char *bad[] = {"1"};
    CHECK("{\"type\":\"string\",\"format\":\"my-custom-format\"}", good, bad);
}
END_TEST

/* Every integer in [-1300, 1300] against the range the schema gives. */
static void check_int_range(const char *bounds, long lo, long hi)
{
    char schema[256], text[32];
    snprintf(schema, sizeof schema, "{\"type\":\"integer\",%s}", bounds);
    sift_grammar *g = compile_with(schema, NULL);
    for (long v = -1300; v <= 1300; v++) {
        snprintf(text, sizeof text, "%ld", v);
        ck_assert_msg(accepts(g, text) == (v >= lo && v <= hi), "%s: %ld", schema, v);
    }
    ck_assert(!accepts(g, "1.0e1"));
    ck_assert(!accepts(g, "007") || (lo <= 7 && 7 <= hi && 0));
    sift_grammar_free(g);
}

START_TEST(test_integer_ranges_are_exact_digit_grammars)
{
    check_int_range("\"minimum\":0,\"maximum\":150", 0, 150);
    check_int_range("\"minimum\":-1000,\"maximum\":-7", -1000, -7);
    check_int_range("\"minimum\":-99,\"maximum\":1234", -99, 1234);
    check_int_range("\"minimum\":17", 17, 100000);
    check_int_range("\"maximum\":-250", -100000, -250);
    check_int_range("\"exclusiveMinimum\":9,\"exclusiveMaximum\":1000", 10, 999);
    check_int_range("\"minimum\":1.5,\"maximum\":20.5", 2, 20);
    check_int_range("\"minimum\":5,\"exclusiveMinimum\":true,\"maximum\":100,"
                    "\"exclusiveMaximum\":true",
                    6, 99);
    check_int_range("\"minimum\":199,\"maximum\":1001", 199, 1001);
    check_int_range("\"minimum\":0,\"maximum\":0", 0, 0);
}
END_TEST

START_TEST(test_number_ranges_with_integer_bounds_are_exact)
{
    static const char *good[] = {"0", "0.0", "0.5", "1", "99.999", "100", "100.00", "-0.5", "-1"};
    static const char *bad[] = {"100.01", "101", "-1.01", "-2", "1e2", "-"};
    CHECK("{\"type\":\"number\",\"minimum\":-1,\"maximum\":100}", good, bad);
    static const char *good2[] = {"0.001", "1", "2.5"};
    static const char *bad2[] = {"0", "0.000", "-1", "-0.5"};
    CHECK("{\"type\":\"number\",\"exclusiveMinimum\":0}", good2, bad2);
    static const char *good3[] = {"-3", "-2.5"};
    static const char *bad3[] = {"-2", "-1", "0", "-3.01"};
    CHECK("{\"type\":\"number\",\"minimum\":-3,\"exclusiveMaximum\":-2}", good3, bad3);
}
END_TEST

START_TEST(test_any_of_and_one_of_are_alternatives_merged_with_siblings)
{
    static const char *good[] = {"\"a\"", "5"};
    static const char *bad[] = {"true", "-1"};
    CHECK("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\",\"minimum\":0}]}", good, bad);
    static const char *good2[] = {"{\"r\":1}", "{\"w\":1,\"h\":2}"};
    static const char *bad2[] = {"{\"w\":1}", "{}"};
    CHECK("{\"properties\":{\"r\":{},\"w\":{},\"h\":{}},\"additionalProperties\":false,"
          "\"anyOf\":[{\"required\":[\"r\"]},{\"required\":[\"w\",\"h\"]}]}",
          good2, bad2);
}
END_TEST

START_TEST(test_one_of_with_disjoint_alternatives_is_exact_as_any_of)
{
    static const char *good[] = {"\"a\"", "5", "null"};
    static const char *bad[] = {"true", "-1"};
    CHECK("{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\",\"minimum\":0},"
          "{\"const\":null}]}",
          good, bad);
    static const char *good2[] = {"{\"k\":\"a\",\"x\":1}", "{\"k\":\"b\",\"y\":\"s\"}"};
    static const char *bad2[] = {"{\"k\":\"a\",\"x\":\"s\"}", "{\"x\":1}", "{\"k\":\"c\"}"};
    CHECK("{\"$defs\":{\"b\":{\"type\":\"object\",\"required\":[\"k\"],\"properties\":"
          "{\"k\":{\"enum\":[\"b\"]},\"y\":{\"type\":\"string\"}}}},"
          "\"oneOf\":[{\"type\":\"object\",\"required\":[\"k\"],\"properties\":"
          "{\"k\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}}},{\"$ref\":\"#/$defs/b\"}]}",
          good2, bad2);
}
END_TEST

START_TEST(test_all_of_merges_properties_required_and_bounds)
{
    static const char *good[] = {"{\"a\":5,\"b\":\"x\"}"};
    static const char *bad[] = {"{\"a\":5}", "{\"a\":11,\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\"}"};
    CHECK("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"integer\",\"maximum\":10}},"
          "\"required\":[\"a\"]},{\"properties\":{\"a\":{\"minimum\":3},\"b\":{\"type\":"
          "\"string\"}},\"required\":[\"b\"]}]}",
          good, bad);
}
END_TEST

START_TEST(test_integer_bounds_beyond_the_digit_grammars_are_refused)
{
    static const char *const schemas[] = {
        "{\"type\":\"integer\",\"minimum\":9223372036854775807}",
        "{\"type\":\"integer\",\"minimum\":1e19}",
        "{\"type\":\"integer\",\"exclusiveMaximum\":-9223372036854775808}",
    };
    sift_json_schema_params sp = compact();
    for (size_t i = 0; i < N(schemas); i++) {
        sift_error err;
        ck_assert_int_eq(convert_err(schemas[i], &sp, &err), SIFT_E_SCHEMA_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(err.message, "a bound beyond +-9e15 is not supported"));
    }
}
END_TEST

START_TEST(test_a_long_all_of_chain_is_bounded_by_max_work)
{
    /* each member merges into what the ones before gathered: the copies
     * are charged, so a long chain hits max_work instead of running for
     * a time quadratic in its length */
    enum { MEMBERS = 3000 };
    size_t cap = (size_t)MEMBERS * 48 + 64, n = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    n += (size_t)snprintf(s + n, cap - n, "{\"allOf\":[");
    for (int i = 0; i < MEMBERS; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s{\"properties\":{\"p%d\":{\"type\":\"string\"}}}",
                              i ? "," : "", i);
    snprintf(s + n, cap - n, "]}");
    sift_json_schema_params sp = compact();
    sp.max_work = 100000;
    sift_error err;
    ck_assert_int_eq(convert_err(s, &sp, &err), SIFT_E_SCHEMA_LIMIT);
    ck_assert_ptr_nonnull(strstr(err.message, "max_work"));
    free(s);
}
END_TEST

START_TEST(test_a_huge_count_is_a_limit_error_not_an_overflow)
{
    /* found by fuzz_json_schema: 1e240 was converted to an integer before
     * its range was checked; a count too large is over a limit, a
     * negative one is not a count */
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(convert_err("{\"type\":\"string\",\"maxLength\":1e240}", &sp, &err),
                     SIFT_E_SCHEMA_LIMIT);
    ck_assert_str_eq(err.message, "schema:1:30: #/maxLength: 'maxLength' is over 10^15");
    ck_assert_int_eq(convert_err("{\"type\":\"array\",\"minItems\":-1e300}", &sp, &err),
                     SIFT_E_SCHEMA_SYNTAX);
}
END_TEST

START_TEST(test_refs_resolve_locally_and_recursively)
{
    static const char *good[] = {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}"};
    static const char *bad[] = {"{\"v\":1,\"next\":{}}", "{\"next\":{\"v\":1}}"};
    CHECK("{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
          "\"v\":{\"type\":\"integer\"},\"next\":{\"$ref\":\"#/$defs/node\"}},\"required\":[\"v\"],"
          "\"additionalProperties\":false}}}",
          good, bad);
    static const char *good2[] = {"[\"x\",[\"y\"]]"};
    static const char *bad2[] = {"[1]"};
    CHECK("{\"definitions\":{\"a~b/c\":{\"type\":\"string\"}},\"type\":\"array\",\"items\":{"
          "\"anyOf\":[{\"$ref\":\"#/definitions/a~0b~1c\"},{\"$ref\":\"#\"}]}}",
          good2, bad2);
}
END_TEST

START_TEST(test_false_subschemas_remove_what_they_guard)
{
    static const char *good[] = {"{\"a\":1}"};
    static const char *bad[] = {"{\"a\":1,\"b\":2}"};
    CHECK("{\"properties\":{\"a\":{},\"b\":false},\"additionalProperties\":false}", good, bad);
    static const char *good2[] = {"1"};
    static const char *bad2[] = {"\"s\""};
    CHECK("{\"anyOf\":[false,{\"type\":\"integer\"}]}", good2, bad2);
}
END_TEST

START_TEST(test_flexible_whitespace_is_bounded_by_max_whitespace)
{
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.max_whitespace = 2;
    sift_grammar *g = compile_with("{\"properties\":{\"a\":{\"type\":\"array\"}}}", &sp);
    ck_assert(accepts(g, "{ \"a\" :\n\t[ 1 ,2 ] }"));
    ck_assert(!accepts(g, "{   \"a\":[]}"));
    ck_assert(!accepts(g, " {\"a\":[]}"));
    sift_grammar_free(g);
    sift_json_schema_params c = compact();
    g = compile_with("{\"properties\":{\"a\":{}}}", &c);
    ck_assert(!accepts(g, "{ \"a\":1}"));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_pattern_goes_to_the_regex_translation)
{
    /* Either translated, or refused with its place: never ignored. */
    const char *schema = "{\"type\":\"string\",\"pattern\":\"^a+$\"}";
    sift_json_schema_params sp = compact();
    sift_grammar *g = NULL;
    sift_error err;
    sift_status st =
        sift_grammar_from_json_schema(&g, schema, strlen(schema), NULL, &sp, NULL, &err);
    if (st == SIFT_OK) {
        ck_assert(accepts(g, "\"aaa\""));
        ck_assert(!accepts(g, "\"ab\""));
        sift_grammar_free(g);
    } else {
        ck_assert_int_eq(st, SIFT_E_SCHEMA_UNSUPPORTED);
        ck_assert_msg(strstr(err.message, "schema:1:28: #/pattern: ") == err.message, "%s",
                      err.message);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

static void check_error(const char *schema, sift_status want, const char *msg, int line, int col)
{
    sift_json_schema_params sp = compact();
    sp.source_name = "s.json";
    sift_error err;
    sift_status st = convert_err(schema, &sp, &err);
    ck_assert_int_eq(st, want);
    ck_assert_str_eq(err.message, msg);
    ck_assert_int_eq(err.code, want);
    ck_assert_int_eq(err.line, line);
    ck_assert_int_eq(err.column, col);
    ck_assert_str_eq(err.source, "s.json");
}

START_TEST(test_json_syntax_errors_give_jansson_s_place)
{
    check_error("{\"type\":\n  \"string\",,}", SIFT_E_SCHEMA_SYNTAX,
                "s.json:2:12: string or '}' expected near ','", 2, 12);
}
END_TEST

START_TEST(test_unsupported_keywords_name_their_pointer_and_place)
{
    check_error("{\"properties\": {\n  \"a\": {\"not\": {\"pattern\": \"^a\"}}}}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:2:16: #/properties/a/not: 'not' is not supported", 2, 16);
    check_error("{\"items\": {\"type\": \"array\", \"uniqueItems\": true}}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:44: #/items/uniqueItems: 'uniqueItems': true is not supported", 1, 44);
}
END_TEST

START_TEST(test_one_of_whose_alternatives_may_overlap_is_refused)
{
    check_error(
        "{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}", SIFT_E_SCHEMA_UNSUPPORTED,
        "s.json:1:11: #/oneOf: 'oneOf' whose alternatives may overlap is not supported", 1, 11);
    /* name sets, optional discriminators: check_json_schema_oneof.c */
}
END_TEST

START_TEST(test_pattern_or_format_beside_lengths_or_each_other_is_refused)
{
    check_error("{\"type\": \"string\", \"pattern\": \"^(?:[a-z]+ ){0,99}[a-z]+$\", "
                "\"maxLength\": 500}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:73: #/maxLength: minLength / maxLength beside this pattern: more than "
                "4096 grammar rules",
                1, 73);
    check_error("{\"type\": \"string\", \"format\": \"email\", \"maxLength\": 20}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:52: #/maxLength: 'maxLength' beside 'format' is not supported", 1, 52);
    check_error("{\"type\": \"string\", \"format\": \"date\", \"pattern\": \"^2\"}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:30: #/format: 'format' beside 'pattern' is not supported", 1, 30);
}
END_TEST

START_TEST(test_pattern_properties_that_may_overlap_are_refused)
{
    /* open additionalProperties, a second pattern, a declared name the
     * pattern matches */
    check_error("{\"patternProperties\": {\"^x?y\": {\"type\": \"integer\"}}}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:23: #/patternProperties: a key may match both this and a declared "
                "property, a second pattern or additionalProperties: not supported",
                1, 23);
    check_error("{\"patternProperties\": {\"^x\": {\"type\": \"integer\"}, \"y$\": {}}, "
                "\"additionalProperties\": false}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:23: #/patternProperties: a key may match both this and a declared "
                "property, a second pattern or additionalProperties: not supported",
                1, 23);
    check_error("{\"properties\": {\"xa\": {\"type\": \"string\"}}, \"patternProperties\": "
                "{\"^x\": {\"type\": \"integer\"}}, \"additionalProperties\": false}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:65: #/patternProperties: a key may match both this and a declared "
                "property, a second pattern or additionalProperties: not supported",
                1, 65);
}
END_TEST

START_TEST(test_pattern_properties_alone_beside_other_names_are_exact)
{
    static const char *good[] = {"{\"a\":\"s\",\"x1\":2}", "{\"x\":1,\"xy\":2}", "{}"};
    static const char *bad[] = {"{\"x1\":\"s\"}", "{\"b\":1}", "{\"a\":1}"};
    CHECK("{\"properties\":{\"a\":{\"type\":\"string\"}},\"patternProperties\":"
          "{\"^x\":{\"type\":\"integer\"}},\"additionalProperties\":false}",
          good, bad);
}
END_TEST

START_TEST(test_invalid_schemas_name_their_pointer_and_place)
{
    check_error("{\"type\": \"strin\"}", SIFT_E_SCHEMA_SYNTAX,
                "s.json:1:10: #/type: 'type' must be a type name or an array of them", 1, 10);
    check_error("{\"$defs\": {},\n \"$ref\": \"#/$defs/x\"}", SIFT_E_SCHEMA_SYNTAX,
                "s.json:2:10: #/$ref: $ref \"#/$defs/x\" does not resolve", 2, 10);
    check_error("{\"minLength\": -1}", SIFT_E_SCHEMA_SYNTAX,
                "s.json:1:15: #/minLength: 'minLength' must be a non-negative integer", 1, 15);
    check_error("{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"$ref\": \"#/$defs/a\"}}, "
                "\"$ref\": \"#/$defs/a\"}",
                SIFT_E_SCHEMA_SYNTAX,
                "s.json:1:77: #/$ref: $ref \"#/$defs/a\" loops through $refs alone", 1, 77);
    check_error("false", SIFT_E_SCHEMA_UNSUPPORTED, "s.json:1:1: #: the schema admits no value", 1,
                1);
    check_error("{\"$ref\": \"other.json#/a\"}", SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:10: #/$ref: $ref \"other.json#/a\" is not local to this schema", 1, 10);
}
END_TEST

static int n_warnings;
static char last_warning[SIFT_ERROR_MESSAGE_MAX];

static void count_warning(void *user, const sift_error *w)
{
    (void)user;
    n_warnings++;
    ck_assert_int_eq(w->code, SIFT_E_SCHEMA_UNSUPPORTED);
    snprintf(last_warning, sizeof last_warning, "%s", w->message);
}

START_TEST(test_the_ignore_policy_warns_once_per_keyword_and_drops_it)
{
    sift_json_schema_params sp = compact();
    sp.unsupported = SIFT_JSON_UNSUPPORTED_IGNORE;
    sp.warn = count_warning;
    n_warnings = 0;
    sift_grammar *g =
        compile_with("{\"type\":\"integer\",\"multipleOf\":0.5,\"not\":{\"pattern\":\"4\"}}", &sp);
    ck_assert_int_eq(n_warnings, 2);
    ck_assert_str_eq(last_warning, "schema:1:32: #/multipleOf: 'multipleOf' of a fraction or over "
                                   "1000 is not supported");
    ck_assert(accepts(g, "4"));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_the_ignore_policy_approximates_inexact_schemas_with_a_warning)
{
    sift_json_schema_params sp = compact();
    sp.unsupported = SIFT_JSON_UNSUPPORTED_IGNORE;
    sp.warn = count_warning;
    n_warnings = 0;
    /* oneOf as anyOf: 3 matches both alternatives */
    sift_grammar *g =
        compile_with("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", &sp);
    ck_assert_int_eq(n_warnings, 1);
    ck_assert_str_eq(
        last_warning,
        "schema:1:10: #/oneOf: 'oneOf' whose alternatives may overlap is not supported");
    ck_assert(accepts(g, "3"));
    sift_grammar_free(g);
    /* the pattern wins over minLength */
    n_warnings = 0;
    g = compile_with("{\"type\":\"string\",\"pattern\":\"^(?:[a-z]+ ){0,99}[a-z]+$\","
                     "\"maxLength\":500}",
                     &sp);
    ck_assert_int_eq(n_warnings, 1);
    ck_assert_str_eq(last_warning, "schema:1:68: #/maxLength: minLength / maxLength beside this "
                                   "pattern: more than 4096 grammar rules");
    ck_assert(accepts(g, "\"ab\""));
    sift_grammar_free(g);
    /* a key matching the pattern also passes as an additional property */
    n_warnings = 0;
    g = compile_with("{\"patternProperties\":{\"^x?y\":{\"type\":\"integer\"}}}", &sp);
    ck_assert_int_eq(n_warnings, 1);
    ck_assert_str_eq(last_warning,
                     "schema:1:22: #/patternProperties: a key may match both this and a declared "
                     "property, a second pattern or additionalProperties: not supported");
    ck_assert(accepts(g, "{\"xy\":\"s\"}"));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_limits_are_errors_not_hangs)
{
    sift_json_schema_params sp = compact();
    sift_error err;
    sp.max_schema_bytes = 5;
    ck_assert_int_eq(convert_err("{\"type\":\"string\"}", &sp, &err), SIFT_E_SCHEMA_LIMIT);
    sp = compact();
    sp.max_grammar_bytes = 64;
    ck_assert_int_eq(
        convert_err("{\"enum\":[\"aaaaaaaaaaaaaaaaaaaa\",\"bbbbbbbbbbbbbbbbbbbbbbbbbbbb\","
                    "\"cccccccccccccccccccccccccccccc\"]}",
                    &sp, &err),
        SIFT_E_SCHEMA_LIMIT);
    sp = compact();
    sp.max_work = 3;
    ck_assert_int_eq(convert_err("{\"anyOf\":[{},{},{},{},{}]}", &sp, &err), SIFT_E_SCHEMA_LIMIT);
    ck_assert_str_eq(
        err.message,
        "schema:1:17: #/anyOf/2: the conversion needs more than 3 units of work (max_work)");
    sp = compact();
    ck_assert_int_eq(convert_err("{\"maxItems\":5000}", &sp, &err), SIFT_E_SCHEMA_LIMIT);
}
END_TEST

/* anyOf nested 200 deep, two alternatives each: the grammar grows
 * linearly (one rule per subschema, no cross products). */
START_TEST(test_nested_any_of_grows_linearly)
{
    static char schema[8192];
    size_t n = 0;
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(schema + n, sizeof schema - n, "{\"anyOf\":[{\"type\":\"null\"},");
    n += (size_t)snprintf(schema + n, sizeof schema - n, "{\"type\":\"integer\"}");
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(schema + n, sizeof schema - n, "]}");
    sift_json_schema_params sp = compact();
    char *out;
    size_t len;
    sift_error err;
    ck_assert_int_eq(sift_json_schema_to_gbnf(&out, &len, schema, n, &sp, &err), SIFT_OK);
    ck_assert_uint_lt(len, 200 * 40 + 2000);
    sift_json_schema_free_gbnf(out, &sp);
    sift_grammar *g = compile_with(schema, &sp);
    ck_assert(accepts(g, "7"));
    ck_assert(accepts(g, "null"));
    ck_assert(!accepts(g, "\"x\""));
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_bad_arguments_are_refused)
{
    char *out = (char *)1;
    size_t len = 9;
    sift_error err;
    sift_json_schema_params sp = compact();
    sp.struct_size = 0;
    ck_assert_int_eq(sift_json_schema_to_gbnf(&out, &len, "{}", 2, &sp, &err), SIFT_E_ARG);
    ck_assert_ptr_null(out);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(sift_json_schema_to_gbnf(NULL, &len, "{}", 2, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_json_schema_to_gbnf(&out, &len, NULL, 2, NULL, &err), SIFT_E_ARG);
    sp = compact();
    sp.max_whitespace = -1;
    ck_assert_int_eq(sift_json_schema_to_gbnf(&out, &len, "{}", 2, &sp, &err), SIFT_E_ARG);
    sift_grammar *g = (sift_grammar *)1;
    ck_assert_int_eq(sift_grammar_from_json_schema(&g, "[", 1, NULL, NULL, NULL, &err),
                     SIFT_E_SCHEMA_SYNTAX);
    ck_assert_ptr_null(g);
    sift_json_schema_free_gbnf(NULL, NULL);
    sift_json_schema_params_init(NULL);
}
END_TEST

START_TEST(test_a_shorter_struct_size_keeps_the_defaults_of_the_rest)
{
    const char *schema = "{\"properties\":{\"a\":{}}}";
    sift_json_schema_params sp = compact();
    sp.strict = 1;
    sp.struct_size = (uint32_t)offsetof(sift_json_schema_params, strict);
    sift_grammar *g = compile_with(schema, &sp);
    ck_assert(accepts(g, "{\"a\":1,\"z\":2}")); /* strict not read: 0 */
    sift_grammar_free(g);
    sp.struct_size = sizeof sp + 8;
    sift_error err;
    ck_assert_int_eq(convert_err(schema, &sp, &err), SIFT_E_ARG);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Allocation failures                                                 */
/* ------------------------------------------------------------------ */

typedef struct fa {
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

static const char rich_schema[] =
    "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"k\":{\"$ref\":\"#/$defs/n\"}}}},"
    "\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":2},"
    "\"e\":{\"enum\":[1,\"x\",{\"a\":[null]}]},\"d\":{\"format\":\"date\"},"
    "\"i\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":300},"
    "\"r\":{\"type\":\"number\",\"exclusiveMaximum\":10},"
    "\"a\":{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"}],\"maxItems\":4},"
    "\"u\":{\"anyOf\":[{\"$ref\":\"#/$defs/n\"},{\"type\":\"null\"}]},"
    "\"m\":{\"allOf\":[{\"properties\":{\"p\":{}}},{\"required\":[\"p\"]}]},"
    "\"ip\":{\"format\":\"ipv6\"}},\"required\":[\"s\"],"
    "\"additionalProperties\":{\"type\":\"boolean\"}}";

START_TEST(test_failing_the_nth_allocation_of_a_conversion_is_clean_for_every_n)
{
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    char *want;
    size_t want_len;
    sift_error err;
    ck_assert_int_eq(
        sift_json_schema_to_gbnf(&want, &want_len, rich_schema, strlen(rich_schema), &sp, &err),
        SIFT_OK);
    long nth;
    for (nth = 1;; nth++) {
        fa f = {0, nth, 0};
        sift_allocator al = {sizeof al, fa_alloc, fa_free, &f, NULL};
        sp.allocator = &al;
        char *out = NULL;
        size_t len = 0;
        sift_status st =
            sift_json_schema_to_gbnf(&out, &len, rich_schema, strlen(rich_schema), &sp, &err);
        if (st == SIFT_OK) {
            ck_assert_uint_eq(len, want_len);
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

START_TEST(test_failing_the_nth_allocation_of_a_grammar_from_a_schema_is_clean)
{
    for (long nth = 1;; nth++) {
        fa f = {0, nth, 0};
        sift_allocator al = {sizeof al, fa_alloc, fa_free, &f, NULL};
        sift_json_schema_params sp;
        sift_json_schema_params_init(&sp);
        sp.allocator = &al;
        sift_grammar_params gp;
        sift_grammar_params_init(&gp);
        gp.allocator = &al;
        sift_grammar *g = NULL;
        sift_error err;
        sift_status st = sift_grammar_from_json_schema(&g, rich_schema, strlen(rich_schema), NULL,
                                                       &sp, &gp, &err);
        if (st == SIFT_OK) {
            f.fail_at = 0; /* the matcher allocates too */
            ck_assert(accepts(g, "{\"s\":\"ab\",\"i\":300,\"zz\":true}"));
            ck_assert(!accepts(g, "{\"s\":\"ab\",\"i\":301}"));
            sift_grammar_free(g);
            ck_assert_int_eq(f.live, 0);
            break;
        }
        ck_assert_msg(st == SIFT_E_NOMEM, "allocation %ld: %s", nth, err.message);
        ck_assert_ptr_null(g);
        ck_assert_int_eq(f.live, 0);
        ck_assert_int_lt(nth, 100000);
    }
}
END_TEST

/* Tool calls (examples/tool_calls.c): an OpenAI-style tools array becomes
 * one schema, an anyOf of {name: const, arguments: parameters}, whose
 * GBNF goes inside a rule with the <tool_call> tags, lazy on the tag. */
static const char *const tool_names[] = {"get_weather", "search"};
static const char *const tool_parameters[] = {
    "{\"type\": \"object\", \"properties\": {\"location\": {\"type\": \"string\"},"
    " \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}},"
    " \"required\": [\"location\"]}",
    "{\"type\": \"object\", \"properties\": {\"query\": {\"type\": \"string\"},"
    " \"max_results\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 50}},"
    " \"required\": [\"query\"]}"};

static void tools_schema(char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "{\"anyOf\": [");
    for (size_t i = 0; i < N(tool_names); i++) {
        len += (size_t)snprintf(buf + len, cap - len,
                                "%s{\"type\": \"object\", \"properties\": {\"name\": {\"const\": "
                                "\"%s\"}, \"arguments\": %s}, \"required\": [\"name\", "
                                "\"arguments\"]}",
                                i ? ", " : "", tool_names[i], tool_parameters[i]);
        ck_assert_uint_lt(len, cap);
    }
    len += (size_t)snprintf(buf + len, cap - len, "]}");
    ck_assert_uint_lt(len, cap);
}

/* The schema of a call in strict mode with flexible whitespace, as GBNF
 * inside the tool-call rule; lazy on "<tool_call>" when `lazy`. */
static sift_grammar *tool_call_grammar(int lazy)
{
    char schema[2048];
    tools_schema(schema, sizeof schema);
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.strict = 1;
    char *gbnf = NULL;
    size_t len = 0;
    sift_error err;
    sift_status st = sift_json_schema_to_gbnf(&gbnf, &len, schema, strlen(schema), &sp, &err);
    ck_assert_msg(st == SIFT_OK, "%s", st ? err.message : "");
    static const char wrap[] =
        "\ntool-call ::= \"<tool_call>\" [ \\n]{0,2} root [ \\n]{0,2} \"</tool_call>\"\n";
    char *text = malloc(len + sizeof wrap);
    ck_assert_ptr_nonnull(text);
    memcpy(text, gbnf, len);
    memcpy(text + len, wrap, sizeof wrap);
    sift_json_schema_free_gbnf(gbnf, &sp);
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.root = "tool-call";
    sift_grammar *g = NULL;
    st = sift_grammar_new(&g, text, strlen(text), NULL, &gp, &err);
    free(text);
    ck_assert_msg(st == SIFT_OK, "%s", st ? err.message : "");
    if (lazy) {
        static const char *const words[] = {"<tool_call>"};
        sift_lazy_params lp;
        sift_lazy_params_init(&lp);
        lp.words = words;
        lp.n_words = 1;
        ck_assert_int_eq(sift_grammar_set_lazy(g, &lp, &err), SIFT_OK);
    }
    return g;
}

/* As accepts, fed `piece` bytes at a time (as tokens would come). */
static int accepts_in_pieces(sift_grammar *g, const char *text, size_t piece)
{
    sift_grammar_reset(g);
    sift_error err;
    size_t n = strlen(text);
    for (size_t at = 0; at < n; at += piece)
        if (sift_grammar_accept_bytes(g, text + at, n - at < piece ? n - at : piece, &err))
            return 0;
    return sift_grammar_is_complete(g);
}

START_TEST(test_a_tools_schema_accepts_each_tool_s_name_with_its_own_arguments)
{
    char schema[2048];
    tools_schema(schema, sizeof schema);
    static const char *const good[] = {
        "{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\"}}",
        "{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\",\"unit\":\"fahrenheit\"}}",
        "{\"name\":\"search\",\"arguments\":{\"query\":\"q\",\"max_results\":1}}",
        "{\"name\":\"search\",\"arguments\":{\"query\":\"q\",\"max_results\":50}}",
    };
    static const char *const bad[] = {
        "{\"name\":\"get_time\",\"arguments\":{\"location\":\"Paris\"}}",
        "{\"name\":\"search\",\"arguments\":{\"location\":\"Paris\"}}",
        "{\"name\":\"get_weather\",\"arguments\":{\"query\":\"q\"}}",
        "{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\",\"unit\":\"kelvin\"}}",
        "{\"name\":\"search\",\"arguments\":{\"query\":\"q\",\"max_results\":0}}",
        "{\"name\":\"search\",\"arguments\":{\"query\":\"q\",\"max_results\":51}}",
        "{\"name\":\"search\"}",
        "{\"arguments\":{\"query\":\"q\"},\"name\":\"search\"}",
    };
    check_texts(schema, good, N(good), bad, N(bad));
}
END_TEST

START_TEST(test_a_lazy_tool_call_grammar_leaves_text_before_the_trigger_free)
{
    sift_grammar *g = tool_call_grammar(1);
    ck_assert(accepts(g, "Free text: {\"name\": 1, </tool_call> <tool_cal"));
    ck_assert_int_eq(sift_grammar_is_triggered(g), 0);
    ck_assert_int_eq(sift_grammar_is_complete(g), 1);
    /* Fed 3 bytes at a time, the tag comes split over four pieces, and
     * from then on the call is owed: no longer complete. */
    sift_grammar_reset(g);
    static const char text[] = "I will look. <tool_call>";
    sift_error err;
    for (size_t at = 0; at < sizeof text - 1; at += 3)
        ck_assert_int_eq(sift_grammar_accept_bytes(g, text + at, 3, &err), SIFT_OK);
    ck_assert_int_eq(sift_grammar_is_triggered(g), 1);
    ck_assert_int_eq(sift_grammar_is_complete(g), 0);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_lazy_tool_call_grammar_accepts_valid_calls_in_the_tags)
{
    sift_grammar *g = tool_call_grammar(1);
    static const char *const good[] = {
        "Let me check. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
        "{\"location\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
        "<tool_call>{\"name\":\"search\",\"arguments\":{\"query\":\"sift\",\"max_results\":"
        "42}}</tool_call>",
    };
    for (size_t i = 0; i < N(good); i++) {
        ck_assert_msg(accepts(g, good[i]), "whole: %s", good[i]);
        ck_assert_msg(accepts_in_pieces(g, good[i], 1), "bytewise: %s", good[i]);
        ck_assert_msg(accepts_in_pieces(g, good[i], 5), "by 5: %s", good[i]);
    }
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_a_lazy_tool_call_grammar_rejects_invalid_calls_after_the_trigger)
{
    sift_grammar *g = tool_call_grammar(1);
    static const char *const bad[] = {
        /* unknown tool, wrong enum, out of range, other tool's argument,
         * an undeclared argument (strict), no closing tag, text after it */
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"x\", "
        "\"unit\": \"kelvin\"}}</tool_call>",
        "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"x\", \"max_results\": "
        "51}}</tool_call>",
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"query\": \"x\"}}</tool_call>",
        "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"x\", \"page\": 2}}"
        "</tool_call>",
        "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}",
        "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}</tool_call> ok",
        "<tool_call>Sure!",
    };
    for (size_t i = 0; i < N(bad); i++) {
        ck_assert_msg(!accepts(g, bad[i]), "whole: %s", bad[i]);
        ck_assert_msg(!accepts_in_pieces(g, bad[i], 1), "bytewise: %s", bad[i]);
        ck_assert_msg(!accepts_in_pieces(g, bad[i], 5), "by 5: %s", bad[i]);
    }
    /* The same call is accepted by the eager grammar only with its tags. */
    sift_grammar *eager = tool_call_grammar(0);
    ck_assert(!accepts(eager, "{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}"));
    ck_assert(accepts(eager, "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": "
                             "\"x\"}}</tool_call>"));
    sift_grammar_free(eager);
    sift_grammar_free(g);
}
END_TEST

START_TEST(test_one_pattern_beside_open_additional_properties_splits_the_keys)
{
    /* keys matching the pattern take its schema, the others anything */
    static const char *good[] = {"{\"ab\":1,\"a-b\":\"s\"}", "{\"\":true}", "{}", "{\"X\":[1]}",
                                 "{\"a1\":null}"};
    static const char *bad[] = {"{\"ab\":\"s\"}", "{\"a\\u0062\":\"s\"}", "{\"x\":1,\"ab\":2.5}"};
    CHECK("{\"patternProperties\":{\"^[a-z_]+$\":{\"type\":\"integer\"}}}", good, bad);
    /* an additionalProperties schema for the keys it does not match */
    static const char *good2[] = {"{\"a\":1,\"1\":\"s\"}", "{\"b\":2}"};
    static const char *bad2[] = {"{\"1\":1}", "{\"a\":\"s\"}", "{\"\":1}"};
    CHECK("{\"patternProperties\":{\"[a-z]\":{\"type\":\"integer\"}},"
          "\"additionalProperties\":{\"type\":\"string\"}}",
          good2, bad2);
    /* "." leaves out line terminators */
    static const char *good3[] = {"{\"k\":1}", "{\"\\n\":\"s\"}", "{\"\":\"s\"}"};
    static const char *bad3[] = {"{\"k\":\"s\"}", "{\"\\nk\":\"s\"}"};
    CHECK("{\"patternProperties\":{\".+\":{\"type\":\"integer\"}}}", good3, bad3);
}
END_TEST

START_TEST(test_a_universal_pattern_applies_to_every_key_and_declared_name)
{
    /* ".*" matches every key: declared names take both schemas */
    static const char *good[] = {"{\"a\":\"xy\",\"b\":\"s\"}", "{\"b\":\"s\"}", "{}"};
    static const char *bad[] = {"{\"a\":\"x\"}", "{\"a\":1}", "{\"b\":1}",
                                "{\"a\":\"xy\",\"a\":\"s\"}"};
    CHECK("{\"properties\":{\"a\":{\"minLength\":2}},"
          "\"patternProperties\":{\".*\":{\"type\":\"string\"}}}",
          good, bad);
    static const char *good2[] = {"{\"a\":1,\"zz\":2}"};
    static const char *bad2[] = {"{\"zz\":\"s\"}", "{\"a\":\"s\"}"};
    CHECK("{\"properties\":{\"a\":{}},\"patternProperties\":{\"^[a-z]*\":{\"type\":\"integer\"}},"
          "\"additionalProperties\":false}",
          good2, bad2);
}
END_TEST

START_TEST(test_patterns_of_other_shapes_beside_open_keys_stay_refused)
{
    sift_error err;
    static const char *const refused[] = {
        "{\"patternProperties\":{\"^(ab)+$\":{\"type\":\"integer\"}}}",
        "{\"patternProperties\":{\"^a?b+$\":{\"type\":\"integer\"}}}",
        "{\"properties\":{\"Q\":{}},\"patternProperties\":{\"^[a-z]+$\":{\"type\":\"integer\"}}}",
        "{\"patternProperties\":{\"^a\":{\"type\":\"integer\"},\"^b\":{}}}",
    };
    for (size_t i = 0; i < N(refused); i++) {
        ck_assert_int_eq(convert_err(refused[i], NULL, &err), SIFT_E_SCHEMA_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(err.message, "#/patternProperties"));
    }
}
END_TEST

START_TEST(test_unique_items_over_a_finite_set_admit_each_value_once)
{
    static const char *good[] = {"[]", "[\"a\"]", "[\"b\",\"a\"]", "[\"c\",1,\"a\"]",
                                 "[1,\"b\",\"a\",\"c\"]"};
    static const char *bad[] = {"[\"a\",\"a\"]", "[\"a\",\"b\",\"a\"]", "[1,1]", "[\"d\"]",
                                "[1,\"a\",\"b\",\"c\",1]"};
    CHECK("{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"enum\":[\"a\",\"b\",\"c\",1,\"a\"]"
          "}}",
          good, bad);
    /* counts, booleans */
    static const char *good2[] = {"[true]", "[false,true]"};
    static const char *bad2[] = {"[]", "[true,true]", "[false,false]", "[null]"};
    CHECK(
        "{\"type\":\"array\",\"uniqueItems\":true,\"minItems\":1,\"items\":{\"type\":\"boolean\"}}",
        good2, bad2);
    static const char *good3[] = {"[\"x\",\"y\"]", "[\"y\",\"z\"]"};
    static const char *bad3[] = {"[\"x\"]", "[\"x\",\"y\",\"z\"]", "[\"x\",\"x\"]"};
    CHECK("{\"type\":\"array\",\"uniqueItems\":true,\"minItems\":2,\"maxItems\":2,"
          "\"items\":{\"type\":\"string\",\"enum\":[\"x\",\"y\",\"z\"]}}",
          good3, bad3);
    /* uniqueItems constrains arrays only */
    static const char *good4[] = {"\"s\"", "[]"};
    static const char *bad4[] = {"[null,null]"};
    CHECK("{\"uniqueItems\":true,\"items\":{\"const\":null}}", good4, bad4);
}
END_TEST

START_TEST(test_unique_items_over_other_items_stay_refused)
{
    sift_error err;
    static const char *const refused[] = {
        "{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"string\"}}",
        "{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"enum\":[1,2,3,4,5,6,7]}}",
        "{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"enum\":[[1],2]}}",
        ("{\"type\":\"array\",\"uniqueItems\":true,\"prefixItems\":[{\"const\":1}],"
         "\"items\":{\"enum\":[1,2]}}"),
        "{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"enum\":[1.5,2]}}",
        "{\"uniqueItems\":true}",
    };
    for (size_t i = 0; i < N(refused); i++) {
        ck_assert_int_eq(convert_err(refused[i], NULL, &err), SIFT_E_SCHEMA_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(err.message, "#/uniqueItems"));
    }
}
END_TEST

START_TEST(test_literal_patterns_are_declared_names)
{
    /* ^name$ matches the one key name: beside open keys and a second
     * pattern it is a declared property with the pattern's schema */
    static const char *const good[] = {
        "{\"a.b\":1,\"c\":true,\"zz\":\"x\"}",
        "{\"c\":false}",
        "{\"zz\":null}",
        "{}",
    };
    static const char *const bad[] = {
        "{\"a.b\":\"x\"}",
        "{\"c\":1}",
        "{\"a.b\":1,\"a.b\":2}",
    };
    CHECK("{\"patternProperties\": {\"^a\\\\.b$\": {\"type\": \"integer\"}, "
          "\"^c$\": {\"type\": \"boolean\"}}}",
          good, bad);
    /* beside a declared property of the same name: both schemas apply */
    static const char *const good2[] = {"{\"n\":3}", "{\"n\":9,\"m\":1}"};
    static const char *const bad2[] = {"{\"n\":2}", "{\"n\":10}", "{\"n\":\"x\"}"};
    CHECK("{\"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 3}}, "
          "\"patternProperties\": {\"^n$\": {\"maximum\": 9}}}",
          good2, bad2);
    /* a required name held by a literal pattern alone */
    static const char *const good3[] = {"{\"id\":\"x\"}", "{\"id\":\"x\",\"k\":1}"};
    static const char *const bad3[] = {"{}", "{\"id\":1}", "{\"k\":1}"};
    CHECK("{\"required\": [\"id\"], \"patternProperties\": {\"^id$\": {\"type\": \"string\"}}}",
          good3, bad3);
    /* a literal pattern a second pattern also matches stays refused */
    check_error("{\"patternProperties\": {\"^ab$\": {\"type\": \"integer\"}, \"^a\": "
                "{\"type\": \"string\"}}, \"additionalProperties\": false}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:23: #/patternProperties: a key may match both this and a declared "
                "property, a second pattern or additionalProperties: not supported",
                1, 23);
}
END_TEST

START_TEST(test_one_of_closed_objects_apart_by_a_required_name_is_exact)
{
    /* each branch admits no key the other requires */
    static const char *const good[] = {"{\"a\":1}", "{\"b\":\"x\"}", "{\"b\":\"x\",\"c\":null}"};
    static const char *const bad[] = {"{}", "{\"a\":1,\"b\":\"x\"}", "{\"a\":\"x\"}", "{\"c\":1}",
                                      "1"};
    CHECK("{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, "
          "\"required\": [\"a\"], \"additionalProperties\": false}, {\"type\": \"object\", "
          "\"properties\": {\"b\": {\"type\": \"string\"}, \"c\": {}}, \"required\": [\"b\"], "
          "\"additionalProperties\": false}]}",
          good, bad);
    /* one closed branch suffices when the other requires a name it lacks */
    static const char *const good2[] = {"{\"a\":1}", "{\"z\":1}", "{\"z\":1,\"a\":2}"};
    static const char *const bad2[] = {"{}", "{\"a\":1,\"q\":2}"};
    CHECK("{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": "
          "[\"a\"], \"additionalProperties\": false}, {\"type\": \"object\", \"required\": "
          "[\"z\"]}]}",
          good2, bad2);
    /* the type beside the oneOf leaves the branches objects only */
    static const char *const good3[] = {"{\"a\":1,\"t\":2}", "{\"a\":1}"};
    static const char *const bad3[] = {"{\"a\":1,\"q\":2}", "\"x\"", "{\"t\":2}"};
    CHECK("{\"type\": \"object\", \"oneOf\": [{\"properties\": {\"a\": {}}, \"required\": "
          "[\"a\"], \"additionalProperties\": false}, {\"required\": [\"a\", \"t\"]}]}",
          good3, bad3);
    /* without the type: a non-object matches both, so none passes */
    static const char *const bad3b[] = {"{\"a\":1,\"q\":2}", "\"x\"", "{\"t\":2}", "1"};
    CHECK("{\"oneOf\": [{\"properties\": {\"a\": {}}, \"required\": [\"a\"], "
          "\"additionalProperties\": false}, {\"required\": [\"a\", \"t\"]}]}",
          good3, bad3b);
    /* a discriminator whose const is behind a $ref */
    static const char *const good4[] = {"{\"k\":\"a\",\"x\":1}", "{\"k\":\"b\",\"y\":\"s\"}"};
    static const char *const bad4[] = {"{\"k\":\"a\",\"x\":\"s\"}", "{\"k\":\"c\"}", "{}"};
    CHECK("{\"$defs\": {\"a\": {\"const\": \"a\"}, \"b\": {\"$ref\": \"#/$defs/b2\"}, \"b2\": "
          "{\"enum\": [\"b\"]}}, \"type\": \"object\", \"oneOf\": [{\"properties\": {\"k\": "
          "{\"$ref\": \"#/$defs/a\"}, \"x\": {\"type\": \"integer\"}}, \"required\": [\"k\"]}, "
          "{\"properties\": {\"k\": {\"$ref\": \"#/$defs/b\"}}, \"required\": [\"k\"]}]}",
          good4, bad4);
    /* the required name is declared by the closed branch: may overlap */
    check_error("{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"a\": {}}, "
                "\"additionalProperties\": false}, {\"type\": \"object\", \"required\": [\"a\"]}]}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:11: #/oneOf: 'oneOf' whose alternatives may overlap is not supported", 1,
                11);
    /* a closed branch with patternProperties may admit the name */
    check_error("{\"oneOf\": [{\"type\": \"object\", \"patternProperties\": {\"^z\": {}}, "
                "\"additionalProperties\": false}, {\"type\": \"object\", \"required\": [\"z\"]}]}",
                SIFT_E_SCHEMA_UNSUPPORTED,
                "s.json:1:11: #/oneOf: 'oneOf' whose alternatives may overlap is not supported", 1,
                11);
}
END_TEST

START_TEST(test_counted_one_atom_patterns_split_the_keys_too)
{
    /* unanchored: a run of two hex digits somewhere */
    static const char *good[] = {"{\"ag\":\"s\",\"abc\":1}", "{\"a-b\":\"s\"}", "{\"\":\"s\"}"};
    static const char *bad[] = {"{\"xab\":\"s\"}", "{\"99\":\"s\"}", "{\"g-0f\":null}"};
    CHECK("{\"patternProperties\":{\"[0-9a-f]{2}\":{\"type\":\"integer\"}}}", good, bad);
    /* both ends: an exact length */
    static const char *good2[] = {"{\"ab\":1,\"abc\":\"s\",\"a\":\"s\",\"a1\":\"s\",\"\":\"s\"}"};
    static const char *bad2[] = {"{\"zz\":\"s\"}", "{\"abc\":\"s\",\"ab\":null}"};
    CHECK("{\"patternProperties\":{\"^[a-z]{2}$\":{\"type\":\"integer\"}}}", good2, bad2);
    static const char *good3[] = {"{\"a\":1,\"aa\":\"s\",\"\":\"s\",\"b\":\"s\"}"};
    static const char *bad3[] = {"{\"a\":\"s\"}"};
    CHECK("{\"patternProperties\":{\"^a$\":{\"type\":\"integer\"}}}", good3, bad3);
    /* one end: a leading or trailing run */
    static const char *good4[] = {"{\"12x\":1,\"1x\":\"s\",\"x123\":\"s\"}"};
    static const char *bad4[] = {"{\"123\":\"s\"}", "{\"12\":[]}"};
    CHECK("{\"patternProperties\":{\"^\\\\d{2,3}\":{\"type\":\"integer\"}}}", good4, bad4);
    static const char *good5[] = {"{\"x12\":1,\"x1\":\"s\",\"12x\":\"s\"}"};
    static const char *bad5[] = {"{\"a12\":\"s\"}"};
    CHECK("{\"patternProperties\":{\"\\\\d{2}$\":{\"type\":\"integer\"}}}", good5, bad5);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("json_schema");
    TCase *tc = tcase_create("keywords");
    tcase_add_test(tc, test_type_string_accepts_json_strings_with_escapes);
    tcase_add_test(tc, test_empty_schema_and_true_accept_any_value);
    tcase_add_test(tc, test_type_list_and_nullable_admit_each_named_type);
    tcase_add_test(tc, test_enum_and_const_match_their_values_exactly);
    tcase_add_test(tc, test_enum_values_of_other_types_than_type_are_left_out);
    tcase_add_test(tc, test_properties_follow_definition_order_and_required_ones_are_present);
    tcase_add_test(tc, test_optional_properties_before_the_first_required_one_may_be_left_out);
    tcase_add_test(tc, test_additional_properties_follow_the_declared_ones_and_exclude_their_names);
    tcase_add_test(tc, test_strict_mode_forbids_undeclared_properties_unless_allowed);
    tcase_add_test(tc, test_min_and_max_properties_bound_a_map);
    tcase_add_test(tc, test_items_min_items_and_max_items_bound_an_array);
    tcase_add_test(tc, test_prefix_items_fix_the_first_elements);
    tcase_add_test(tc, test_min_length_and_max_length_count_characters);
    tcase_add_test(tc, test_lengths_past_the_repetition_limit_are_exact);
    tcase_add_test(tc, test_format_date_checks_month_lengths_and_leap_years);
    tcase_add_test(tc, test_format_time_and_date_time_need_an_offset);
    tcase_add_test(tc, test_formats_uuid_ipv4_ipv6_email_hostname_and_uri);
    tcase_add_test(tc, test_custom_formats_are_ignored_as_annotations);
    tcase_add_test(tc, test_integer_ranges_are_exact_digit_grammars);
    tcase_add_test(tc, test_number_ranges_with_integer_bounds_are_exact);
    tcase_add_test(tc, test_any_of_and_one_of_are_alternatives_merged_with_siblings);
    tcase_add_test(tc, test_all_of_merges_properties_required_and_bounds);
    tcase_add_test(tc, test_merged_additional_properties_and_items_see_their_own_member);
    tcase_add_test(tc, test_required_names_without_a_schema_take_additional_properties);
    tcase_add_test(tc, test_escaped_spellings_of_declared_keys_are_not_other_keys);
    tcase_add_test(tc, test_patterns_matching_declared_names_are_refused);
    tcase_add_test(tc, test_uri_formats_follow_rfc_3986);
    tcase_add_test(tc, test_length_counted_strings_admit_no_surrogate_escapes);
    tcase_add_test(tc, test_a_keyword_constrains_its_own_type_only);
    tcase_add_test(tc, test_enum_and_const_values_meet_their_sibling_keywords);
    tcase_add_test(tc, test_enum_values_meet_patterns_and_fractional_multiples);
    tcase_add_test(tc, test_a_pattern_with_lengths_keeps_both);
    tcase_add_test(tc, test_dependencies_make_names_required_with_their_trigger);
    tcase_add_test(tc, test_not_of_simple_shapes_is_its_complement);
    tcase_add_test(tc, test_one_of_required_name_sets_admits_exactly_one);
    tcase_add_test(tc, test_multiple_of_an_integer_follows_the_remainders);
    tcase_add_test(tc, test_lengths_every_string_of_a_format_has_are_kept);
    tcase_add_test(tc, test_a_fractional_bound_compares_the_fraction_digit_by_digit);
    tcase_add_test(tc, test_min_properties_one_without_required_means_not_empty);
    tcase_add_test(tc, test_format_is_asserted_unless_it_is_an_annotation);
    tcase_add_test(tc, test_ref_targets_admitting_no_value_remove_their_references);
    tcase_add_test(tc, test_integer_bounds_beyond_the_digit_grammars_are_refused);
    tcase_add_test(tc, test_a_long_all_of_chain_is_bounded_by_max_work);
    tcase_add_test(tc, test_a_huge_count_is_a_limit_error_not_an_overflow);
    tcase_add_test(tc, test_refs_resolve_locally_and_recursively);
    tcase_add_test(tc, test_false_subschemas_remove_what_they_guard);
    tcase_add_test(tc, test_flexible_whitespace_is_bounded_by_max_whitespace);
    tcase_add_test(tc, test_pattern_goes_to_the_regex_translation);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_json_syntax_errors_give_jansson_s_place);
    tcase_add_test(tc, test_unsupported_keywords_name_their_pointer_and_place);
    tcase_add_test(tc, test_invalid_schemas_name_their_pointer_and_place);
    tcase_add_test(tc, test_one_of_with_disjoint_alternatives_is_exact_as_any_of);
    tcase_add_test(tc, test_one_of_whose_alternatives_may_overlap_is_refused);
    tcase_add_test(tc, test_pattern_or_format_beside_lengths_or_each_other_is_refused);
    tcase_add_test(tc, test_pattern_properties_that_may_overlap_are_refused);
    tcase_add_test(tc, test_pattern_properties_alone_beside_other_names_are_exact);
    tcase_add_test(tc, test_the_ignore_policy_approximates_inexact_schemas_with_a_warning);
    tcase_add_test(tc, test_the_ignore_policy_warns_once_per_keyword_and_drops_it);
    tcase_add_test(tc, test_limits_are_errors_not_hangs);
    tcase_add_test(tc, test_nested_any_of_grows_linearly);
    tcase_add_test(tc, test_bad_arguments_are_refused);
    tcase_add_test(tc, test_a_shorter_struct_size_keeps_the_defaults_of_the_rest);
    suite_add_tcase(s, tc);
    tc = tcase_create("tool calls");
    tcase_add_test(tc, test_a_tools_schema_accepts_each_tool_s_name_with_its_own_arguments);
    tcase_add_test(tc, test_a_lazy_tool_call_grammar_leaves_text_before_the_trigger_free);
    tcase_add_test(tc, test_a_lazy_tool_call_grammar_accepts_valid_calls_in_the_tags);
    tcase_add_test(tc, test_a_lazy_tool_call_grammar_rejects_invalid_calls_after_the_trigger);
    suite_add_tcase(s, tc);
    tc = tcase_create("allocation");
    tcase_add_test(tc, test_failing_the_nth_allocation_of_a_conversion_is_clean_for_every_n);
    tcase_add_test(tc, test_failing_the_nth_allocation_of_a_grammar_from_a_schema_is_clean);
    suite_add_tcase(s, tc);
    tc = tcase_create("pattern properties beside other keys");
    tcase_add_test(tc, test_one_pattern_beside_open_additional_properties_splits_the_keys);
    tcase_add_test(tc, test_a_universal_pattern_applies_to_every_key_and_declared_name);
    tcase_add_test(tc, test_patterns_of_other_shapes_beside_open_keys_stay_refused);
    tcase_add_test(tc, test_counted_one_atom_patterns_split_the_keys_too);
    suite_add_tcase(s, tc);
    tc = tcase_create("uniqueItems");
    tcase_add_test(tc, test_unique_items_over_a_finite_set_admit_each_value_once);
    tcase_add_test(tc, test_unique_items_over_other_items_stay_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("literal patterns");
    tcase_add_test(tc, test_literal_patterns_are_declared_names);
    suite_add_tcase(s, tc);
    tc = tcase_create("oneOf of closed objects");
    tcase_add_test(tc, test_one_of_closed_objects_apart_by_a_required_name_is_exact);
    suite_add_tcase(s, tc);
    return s;
}

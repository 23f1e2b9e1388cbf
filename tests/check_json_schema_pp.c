/*
 * check_json_schema_pp.c - patternProperties beside declared names and
 * open additionalProperties (src/schema/json_schema_ppcover.c): a
 * declared name whose pattern's schema implies its own, a class pattern
 * whose keys leave the declared names out, and the keys a pattern does
 * not match written as a pattern of their own; for each, texts the
 * grammar accepts and texts it rejects (each list checked against a
 * JSON Schema 2020-12 validator when written; "$" and "." as ECMA-262
 * reads them), and the near-miss shapes that stay refused.
 */
#include <stddef.h>
#include <string.h>

#include "harness.h"
#include "sift.h"
#include "testutil.h"

/* The schema is refused at `where` with a message holding `what`. */
static void check_refused(const char *schema, const char *where, const char *what)
{
    sift_json_schema_params sp = tu_schema_compact();
    sp.source_name = "s.json";
    char *out = NULL;
    size_t n = 0;
    sift_error err;
    sift_status st = sift_json_schema_to_gbnf(&out, &n, schema, strlen(schema), &sp, &err);
    ck_assert_msg(st == SIFT_E_SCHEMA_UNSUPPORTED, "%s: %d", schema, (int)st);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(err.message, where) != NULL && strstr(err.message, what) != NULL, "%s",
                  err.message);
}

START_TEST(test_pp_pattern_schema_implies_declared)
{
    /* a declared name the pattern also matches, whose schema the pattern's implies (equal but for a
     * title): the name takes the pattern's schema */
    static const char *const good[] = {"{}", "{\"basic\":{\"t\":1}}", "{\"bx\":{\"t\":1}}",
                                       "{\"basic\":{\"t\":1},\"bz\":{\"t\":2}}"};
    static const char *const bad[] = {"{\"basic\":{}}", "{\"bx\":{}}", "{\"c\":{\"t\":1}}",
                                      "{\"basic\":1}"};
    TU_SCHEMA_CHECK(
        "{\"additionalProperties\":false,\"properties\":{\"basic\":{\"type\":\"object\","
        "\"required\":[\"t\"],\"title\":\"x\"}},\"patternProperties\":{\"^b\":{\"type\":"
        "\"object\",\"required\":[\"t\"]}}}",
        good, bad);
}
END_TEST

START_TEST(test_pp_class_leaves_declared_names_out)
{
    /* a class pattern with trivial schema: the declared names are left out of its keys (false:
     * never; ab: its own schema); an escaped spelling is not a way around */
    static const char *const good[] = {
        "{}",         "{\"a\":1}",  "{\"typ\":\"x\"}",        "{\"types\":1}",
        "{\"ab\":3}", "{\"\":[1]}", "{\"ab\":4,\"t_y\":null}"};
    static const char *const bad[] = {"{\"type\":1}",      "{\"ab\":2}", "{\"ab\":\"x\"}",
                                      "{\"a-b\":1}",       "{\"A\":1}",  "{\"ab\":3,\"type\":null}",
                                      "{\"t\\u0079pe\":1}"};
    TU_SCHEMA_CHECK(
        "{\"type\":\"object\",\"additionalProperties\":false,\"patternProperties\":{\"^([a-z_])*$"
        "\":{}},\"properties\":{\"type\":false,\"ab\":{\"type\":\"integer\",\"minimum\":3}}}",
        good, bad);
}
END_TEST

START_TEST(test_pp_class_declared_name_takes_both)
{
    /* a class pattern with a schema: a declared name it matches must pass both */
    static const char *const good[] = {"{\"ab\":4}", "{\"abc\":1}", "{\"ab\":3,\"a\":-1}"};
    static const char *const bad[] = {"{\"ab\":3.5}", "{\"ab\":2}", "{\"abc\":\"s\"}", "{\"\":1}",
                                      "{\"ab\":\"s\"}"};
    TU_SCHEMA_CHECK(
        "{\"type\":\"object\",\"additionalProperties\":false,\"patternProperties\":{\"^[a-z]+$\":"
        "{\"type\":\"integer\"}},\"properties\":{\"ab\":{\"minimum\":3}}}",
        good, bad);
}
END_TEST

START_TEST(test_pp_bounded_class)
{
    /* a bounded class ^C{1,2}$: the declared name (string and integer: never) is left out, lengths
     * outside are undeclared */
    static const char *const good[] = {"{}", "{\"a\":1}", "{\"ba\":1}", "{\"cc\":2}"};
    static const char *const bad[] = {"{\"ab\":1}",  "{\"ab\":\"s\"}", "{\"\":1}",
                                      "{\"abc\":1}", "{\"a\":\"s\"}",  "{\"d\":1}"};
    TU_SCHEMA_CHECK(
        "{\"type\":\"object\",\"additionalProperties\":false,\"patternProperties\":{\"^[a-c]{1,2}"
        "$\":{\"type\":\"integer\"}},\"properties\":{\"ab\":{\"type\":\"string\"}}}",
        good, bad);
}
END_TEST

START_TEST(test_pp_complement_prefix_and_plus_tail)
{
    /* beside open additionalProperties: keys that ^test_[a-z_]+$ does not match take any value */
    static const char *const good[] = {
        "{\"test_a\":\"s\"}", "{\"test_\":1}",   "{\"test\":1}", "{\"tesx_a\":1}",
        "{\"test_A\":1}",     "{\"test_a1\":1}", "{\"\":1}"};
    static const char *const bad[] = {"{\"test_a\":1}", "{\"test_ab_\":2}",
                                      "{\"test_a\":\"s\",\"test_b\":1}"};
    TU_SCHEMA_CHECK("{\"patternProperties\":{\"^test_[a-z_]+$\":{\"type\":\"string\"}}}", good,
                    bad);
}
END_TEST

START_TEST(test_pp_complement_unanchored_literal)
{
    /* an unanchored literal prefix: keys not starting with it take any value; an escaped spelling
     * of a matching key is not a way around */
    static const char *const good[] = {"{\"mod\":1}",       "{\"xmode\":1}", "{\"mode\":\"s\"}",
                                       "{\"modes\":\"s\"}", "{\"\":1}",      "{\"Mode\":1}"};
    static const char *const bad[] = {"{\"mode\":1}", "{\"modex\":1}", "{\"\\u006dode\":1}"};
    TU_SCHEMA_CHECK("{\"patternProperties\":{\"^mode\":{\"type\":\"string\"}}}", good, bad);
}
END_TEST

START_TEST(test_pp_complement_dot_tail)
{
    /* a "." tail under "+": ECMA-262 "." does not match a line terminator */
    static const char *const good[] = {"{\"ab\":1}", "{\"abc\":\"x\"}", "{\"ab\\n\":1}",
                                       "{\"a\":1}", "{\"ab\\nc\":1}"};
    static const char *const bad[] = {"{\"abc\":1}", "{\"abcd\":null}"};
    TU_SCHEMA_CHECK("{\"patternProperties\":{\"^ab.+$\":{\"type\":\"string\"}}}", good, bad);
}
END_TEST

START_TEST(test_pp_complement_counted_atoms)
{
    /* {n} repeats an atom; "$" forbids anything after the run */
    static const char *const good[] = {"{\"0f-x\":\"s\"}", "{\"0f-y\":1}", "{\"0f-x1\":1}",
                                       "{\"0g-x\":1}", "{\"0f\":1}"};
    static const char *const bad[] = {"{\"0f-x\":1}", "{\"aa-x\":true}"};
    TU_SCHEMA_CHECK("{\"patternProperties\":{\"^[0-9a-f]{2}-x$\":{\"type\":\"string\"}}}", good,
                    bad);
}
END_TEST

START_TEST(test_pp_complement_counted_tail)
{
    /* a last atom under {m,n}: too few, another character within n, or more than n under "$" */
    static const char *const good[] = {"{\"/\":\"s\"}", "{\"/ab\":\"s\"}", "{\"/abc\":1}",
                                       "{\"/x\":1}",    "{\"x\":1}",       "{\"/a.\":\"s\"}",
                                       "{\"\":1}"};
    static const char *const bad[] = {"{\"/\":1}", "{\"/a\":1}", "{\"/.b\":null}"};
    TU_SCHEMA_CHECK("{\"patternProperties\":{\"^/[a-c.]{0,2}$\":{\"type\":\"string\"}}}", good,
                    bad);
    static const char *const good2[] = {"{\"ab\":1}", "{\"abx\":1}", "{\"abb\":\"s\"}",
                                        "{\"abbbbb\":\"s\"}", "{\"a\":1}"};
    static const char *const bad2[] = {"{\"abb\":1}", "{\"abbbb\":1}", "{\"abbx\":[]}"};
    TU_SCHEMA_CHECK("{\"patternProperties\":{\"^ab{2,3}\":{\"type\":\"string\"}}}", good2, bad2);
}
END_TEST

START_TEST(test_pp_near_misses_stay_refused)
{
    static const char *const both = "a key may match both";
    /* a declared name outside the class, beside open additionalProperties */
    check_refused("{\"properties\":{\"X\":{}},\"patternProperties\":{\"^[a-z]+$\":{\"type\":"
                  "\"integer\"}}}",
                  "#/patternProperties", both);
    /* a declared name a non-class pattern matches, with a schema of its own */
    check_refused("{\"additionalProperties\":false,\"properties\":{\"ax\":{\"type\":\"string\"}},"
                  "\"patternProperties\":{\"^a.*x$\":{\"type\":\"integer\"}}}",
                  "#/patternProperties", both);
    /* an optional atom: no complement is written */
    check_refused("{\"patternProperties\":{\"^-?\\\\d+$\":{\"type\":\"integer\"}}}",
                  "#/patternProperties", both);
    /* a class pattern under a count starting above 1 */
    check_refused("{\"additionalProperties\":false,\"properties\":{\"ab\":{\"type\":\"string\"}},"
                  "\"patternProperties\":{\"^[a-c]{2,3}$\":{\"type\":\"integer\"}}}",
                  "#/patternProperties", both);
}
END_TEST

/* Found by review, each once accepting an object the schema forbids: a
 * negated class whose first character is ^ ([^^a]: its complement is
 * {^, a}); counts with a space or a sign ({0, 3}, {0,+3}: literal text
 * in ECMA-262); a declared name PCRE2's "." matches and ECMA-262's does
 * not ("a\r"); a declared schema under its own $id, equal in text to
 * the pattern's. */
START_TEST(test_pp_review_shapes)
{
    static const char *const g1[] = {"{\"xa\":\"s\"}", "{\"x^\":\"s\"}", "{\"xb\":1}",
                                     "{\"y\":\"s\"}"};
    static const char *const b1[] = {"{\"xb\":\"s\"}", "{\"xq\":\"s\"}"};
    TU_SCHEMA_CHECK(
        "{\"type\":\"object\",\"patternProperties\":{\"^x[^^a]\":{\"type\":\"integer\"}}}", g1, b1);
    static const char *const g2[] = {"{\"^\":\"s\"}", "{\"a\":\"s\"}", "{\"b\":1}"};
    static const char *const b2[] = {"{\"b\":\"s\"}"};
    TU_SCHEMA_CHECK("{\"patternProperties\":{\"^[^^a]\":{\"type\":\"integer\"}}}", g2, b2);
    static const char *const g3[] = {"{}"};
    static const char *const b3[] = {"{\"abc\":1}", "{\"a\":1}"};
    TU_SCHEMA_CHECK("{\"type\":\"object\",\"patternProperties\":{\"^[a-z]{0,+3}$\":{\"type\":"
                    "\"integer\"}},\"additionalProperties\":false}",
                    g3, b3);
    check_refused("{\"type\":\"object\",\"properties\":{\"a\\r\":{\"type\":\"integer\"}},"
                  "\"patternProperties\":{\"^a.$\":{\"type\":\"integer\"}}}",
                  "#/patternProperties", "a key may match both");
    check_refused("{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":"
                  "\"http://e.com/root\",\"type\":\"object\",\"$defs\":{\"A\":{\"type\":"
                  "\"integer\"}},\"properties\":{\"abc\":{\"$id\":\"http://e.com/d\",\"$defs\":{"
                  "\"A\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/A\"}},\"patternProperties\":{"
                  "\"^a\":{\"$ref\":\"#/$defs/A\"}}}",
                  "#/patternProperties", "a key may match both");
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("json_schema_pp");
    TCase *tc = tcase_create("patternProperties");
    tcase_add_test(tc, test_pp_pattern_schema_implies_declared);
    tcase_add_test(tc, test_pp_class_leaves_declared_names_out);
    tcase_add_test(tc, test_pp_class_declared_name_takes_both);
    tcase_add_test(tc, test_pp_bounded_class);
    tcase_add_test(tc, test_pp_complement_prefix_and_plus_tail);
    tcase_add_test(tc, test_pp_complement_unanchored_literal);
    tcase_add_test(tc, test_pp_complement_dot_tail);
    tcase_add_test(tc, test_pp_complement_counted_atoms);
    tcase_add_test(tc, test_pp_complement_counted_tail);
    tcase_add_test(tc, test_pp_near_misses_stay_refused);
    tcase_add_test(tc, test_pp_review_shapes);
    suite_add_tcase(s, tc);
    return s;
}

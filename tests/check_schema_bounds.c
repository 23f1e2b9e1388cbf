/*
 * check_schema_bounds.c - the JSON Schema converter's bounds: every pass
 * over a large schema is charged to max_work and costs O(size) units
 * (the charge is counted, never timed: tests/bench/bench_schema.c has the
 * times), and JSON numbers and strings the parser cannot hold or that
 * sift cannot convert fail with sift's own message at their JSON Pointer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "schema/json_schema.h"
#include "sift.h"

/* A growable text for generated schemas. */
typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...) SIFT__PRINTF(2, 3);

static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        ck_assert_int_ge(k, 0);
        if (t->p && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        t->cap = t->cap ? 2 * t->cap + (size_t)k : 4096 + (size_t)k;
        t->p = realloc(t->p, t->cap);
        ck_assert_ptr_nonnull(t->p);
    }
}

static sift_json_schema_params compact(void)
{
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.whitespace = SIFT_JSON_WS_COMPACT;
    return sp;
}

/* Converts and returns the status; *work is the units charged. */
static sift_status convert(const text *t, const sift_json_schema_params *sp, int64_t *work,
                           sift_error *err)
{
    char *out = NULL;
    size_t n = 0;
    sift_status st = sift__json_schema_to_gbnf_work(&out, &n, t->p, t->n, sp, err, work);
    if (st == SIFT_OK)
        sift_json_schema_free_gbnf(out, sp);
    else
        ck_assert_ptr_null(out);
    return st;
}

static sift_status convert_str(const char *s, const sift_json_schema_params *sp, sift_error *err)
{
    text t = {(char *)s, strlen(s), 0};
    int64_t work;
    return convert(&t, sp, &work, err);
}

/* An enum of the strings "v<lo>" .. "v<hi - 1>". */
static void put_enum(text *t, int lo, int hi)
{
    put(t, "{\"enum\":[");
    for (int i = lo; i < hi; i++)
        put(t, "%s\"v%d\"", i > lo ? "," : "", i);
    put(t, "]}");
}

/* ------------------------------------------------------------------ */
/* Work                                                                */
/* ------------------------------------------------------------------ */

enum { N = 20000 };

START_TEST(test_an_all_of_enum_intersection_is_charged_per_value_and_linear)
{
    /* every value of both enums is hashed once (a unit each), then the
     * N / 2 shared ones are generated: between 2N and a small multiple
     * of N units, where comparing every pair cost N^2 uncharged */
    text t = {0};
    put(&t, "{\"allOf\":[");
    put_enum(&t, 0, N);
    put(&t, ",");
    put_enum(&t, N / 2, N + N / 2);
    put(&t, "]}");
    sift_json_schema_params sp = compact();
    int64_t work;
    sift_error err;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_OK);
    ck_assert_int_ge(work, 2 * N);
    ck_assert_int_le(work, 4 * N);
    sp.max_work = N;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_E_SCHEMA_LIMIT);
    ck_assert_ptr_nonnull(strstr(err.message, "max_work"));
    free(t.p);
}
END_TEST

START_TEST(test_a_one_of_of_two_large_enums_is_decided_by_charged_linear_work)
{
    /* the disjointness test hashes each value once (2N units) before the
     * 2N constants are generated */
    text t = {0};
    put(&t, "{\"oneOf\":[");
    put_enum(&t, 0, N);
    put(&t, ",");
    put_enum(&t, N, 2 * N);
    put(&t, "]}");
    sift_json_schema_params sp = compact();
    int64_t work;
    sift_error err;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_OK);
    ck_assert_int_ge(work, 4 * N);
    ck_assert_int_le(work, 7 * N);
    free(t.p);
}
END_TEST

START_TEST(test_a_one_of_of_many_consts_is_decided_by_charged_linear_work)
{
    text t = {0};
    put(&t, "{\"oneOf\":[");
    for (int i = 0; i < N; i++)
        put(&t, "%s{\"const\":%d}", i ? "," : "", i);
    put(&t, "]}");
    sift_json_schema_params sp = compact();
    int64_t work;
    sift_error err;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_OK);
    ck_assert_int_ge(work, 5 * N);
    ck_assert_int_le(work, 8 * N);
    /* a repeated value is found by the same pass */
    t.n = 0;
    put(&t, "{\"oneOf\":[");
    for (int i = 0; i < N; i++)
        put(&t, "%s{\"const\":%d}", i ? "," : "", i == N - 1 ? 0 : i);
    put(&t, "]}");
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "may overlap"));
    ck_assert_int_le(work, 3 * N);
    free(t.p);
}
END_TEST

START_TEST(test_a_tagged_union_one_of_is_decided_by_charged_linear_work)
{
    /* objects told apart by a required property with distinct consts:
     * one pass over the tags, not a comparison per pair */
    text t = {0};
    put(&t, "{\"oneOf\":[");
    for (int i = 0; i < N / 4; i++)
        put(&t,
            "%s{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"k%d\"}},"
            "\"required\":[\"kind\"]}",
            i ? "," : "", i);
    put(&t, "]}");
    sift_json_schema_params sp = compact();
    sp.max_work = 100 * N;
    sp.max_grammar_bytes = (size_t)64 << 20;
    int64_t work;
    sift_error err;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_OK);
    ck_assert_int_le(work, 30 * (N / 4));
    free(t.p);
}
END_TEST

START_TEST(test_many_required_names_are_charged_and_linear)
{
    /* names with distinct first code points: one trie node with N
     * children, which a sibling walk made quadratic */
    text t = {0};
    put(&t, "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"null\"},\"required\":[");
    for (int i = 0; i < N; i++)
        put(&t, "%s\"\\u%04x\"", i ? "," : "", 0x4E00 + i);
    put(&t, "]}");
    sift_json_schema_params sp = compact();
    sp.max_grammar_bytes = (size_t)64 << 20;
    int64_t work;
    sift_error err;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_OK);
    ck_assert_int_ge(work, 4 * N);
    ck_assert_int_le(work, 8 * N);
    free(t.p);
}
END_TEST

START_TEST(test_many_refs_are_looked_up_in_linear_work)
{
    /* a linear search of the targets generated before made this
     * quadratic, uncharged; now each $ref is a hash lookup, charged with
     * the keys of its target that the resolution visits */
    enum { R = N };
    text t = {0};
    put(&t, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < R; i++)
        put(&t, "%s\"p%d\":{\"$ref\":\"#/$defs/d%d\"}", i ? "," : "", i, i);
    put(&t, "},\"$defs\":{");
    for (int i = 0; i < R; i++)
        put(&t, "%s\"d%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    put(&t, "}}");
    sift_json_schema_params sp = compact();
    sp.max_grammar_bytes = (size_t)64 << 20;
    sp.max_schema_bytes = (size_t)16 << 20;
    sp.max_work = 20 * R;
    int64_t work;
    sift_error err;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_OK);
    ck_assert_int_ge(work, 10 * R);
    ck_assert_int_le(work, 12 * R);
    free(t.p);
}
END_TEST

static void count_warning(void *user, const sift_error *w)
{
    (void)w;
    ++*(int *)user;
}

START_TEST(test_placing_warnings_is_charged_per_scan_of_the_text)
{
    /* under the ignore policy each warning locates its place by a scan
     * of the text: a unit per 4 KiB of it, so that many warnings over a
     * large schema are bounded by max_work */
    enum { W = 2000 };
    text t = {0};
    put(&t, "{\"anyOf\":[");
    for (int i = 0; i < W; i++)
        put(&t, "%s{\"type\":\"integer\",\"not\":{\"pattern\":\"%d\"}}", i ? "," : "", i);
    put(&t, "]}");
    int warnings = 0;
    sift_json_schema_params sp = compact();
    sp.unsupported = SIFT_JSON_UNSUPPORTED_IGNORE;
    sp.warn = count_warning;
    sp.warn_user = &warnings;
    int64_t work;
    sift_error err;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_OK);
    ck_assert_int_eq(warnings, W);
    ck_assert_int_ge(work, (int64_t)W * (int64_t)(1 + (t.n >> 12)));
    sp.max_work = W * 4;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_E_SCHEMA_LIMIT);
    free(t.p);
}
END_TEST

START_TEST(test_matching_declared_names_against_a_pattern_is_charged)
{
    /* one constraining patternProperties pattern beside N declared
     * names: each name is matched by PCRE2 (at most 10,000 steps) and
     * charged 16 units */
    enum { P = 2000 };
    text t = {0};
    put(&t, "{\"type\":\"object\",\"additionalProperties\":false,"
            "\"patternProperties\":{\"^x\":{\"type\":\"integer\"}},\"properties\":{");
    for (int i = 0; i < P; i++)
        put(&t, "%s\"p%d\":{}", i ? "," : "", i);
    put(&t, "}}");
    sift_json_schema_params sp = compact();
    int64_t work;
    sift_error err;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_OK);
    ck_assert_int_ge(work, 16 * P);
    free(t.p);
}
END_TEST

START_TEST(test_a_patterns_subset_construction_is_charged)
{
    /* "an a, then 9 more" beside lengths: the subset construction meets
     * its bound of 512 subsets after about 270,000 steps (mostly words
     * of subsets compared; a unit per 64), and the automaton is kept as
     * it is; the rest of the conversion charges under 300 units. So
     * max_work bounds the construction's time: below its charge the
     * conversion is a limit error. */
    text t = {0};
    put(&t, "{\"type\":\"string\",\"pattern\":\"a[ab]{9}\",\"minLength\":10,"
            "\"maxLength\":12}");
    sift_json_schema_params sp = compact();
    int64_t work;
    sift_error err;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_OK);
    ck_assert_int_ge(work, 4000);
    sp.max_work = 2000;
    ck_assert_int_eq(convert(&t, &sp, &work, &err), SIFT_E_SCHEMA_LIMIT);
    ck_assert_ptr_nonnull(strstr(err.message, "max_work"));
    free(t.p);
}
END_TEST

START_TEST(test_a_schema_at_the_size_limit_converts_or_fails_within_linear_work)
{
    /* each shape filled up to max_schema_bytes: it converts or fails
     * with SIFT_E_SCHEMA_LIMIT, having charged no more than the budget
     * (every pass is charged, so the budget bounds the time) */
    sift_json_schema_params sp = compact();
    sp.max_schema_bytes = (size_t)1 << 20;
    for (int shape = 0; shape < 4; shape++) {
        text t = {0};
        int n = 0;
        put(&t, shape == 0   ? "{\"allOf\":[{\"enum\":["
                : shape == 1 ? "{\"oneOf\":["
                : shape == 2 ? "{\"required\":["
                             : "{\"properties\":{");
        while (t.n < sp.max_schema_bytes / 2 - sp.max_schema_bytes / 16) {
            if (shape == 0 || shape == 2)
                put(&t, "%s\"v%d\"", n ? "," : "", n);
            else if (shape == 1)
                put(&t, "%s{\"const\":%d}", n ? "," : "", n);
            else
                put(&t, "%s\"p%d\":{\"$ref\":\"#/$defs/d%d\"}", n ? "," : "", n, n);
            n++;
        }
        if (shape == 0) {
            put(&t, "]},{\"enum\":[");
            for (int i = 0; i < n; i++)
                put(&t, "%s\"v%d\"", i ? "," : "", i + n / 2);
            put(&t, "]}]}");
        } else if (shape == 1 || shape == 2)
            put(&t, "]}");
        else {
            put(&t, "},\"$defs\":{");
            for (int i = 0; i < n; i++)
                put(&t, "%s\"d%d\":{}", i ? "," : "", i);
            put(&t, "}}");
        }
        ck_assert_uint_le(t.n, sp.max_schema_bytes);
        int64_t work;
        sift_error err;
        sift_status st = convert(&t, &sp, &work, &err);
        ck_assert_msg(st == SIFT_OK || st == SIFT_E_SCHEMA_LIMIT, "shape %d: %s", shape,
                      err.message);
        ck_assert_int_le(work, sp.max_work + 1);
        free(t.p);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Numbers and strings the converter cannot hold                       */
/* ------------------------------------------------------------------ */

START_TEST(test_an_integral_real_beyond_int64_is_an_integer_value)
{
    /* the test of integrality converted 1e300 to int64 (undefined; in a
     * release build it said "not an integer" and dropped the value) */
    sift_json_schema_params sp = compact();
    sift_error err;
    char *out = NULL;
    size_t n = 0;
    const char *s = "{\"type\":\"integer\",\"enum\":[1e300,-1e19]}";
    ck_assert_msg(sift_json_schema_to_gbnf(&out, &n, s, strlen(s), &sp, &err) == SIFT_OK, "%s",
                  err.message);
    ck_assert_ptr_nonnull(strstr(out, "\"1e+300\""));
    ck_assert_ptr_nonnull(strstr(out, "\"-1e+19\""));
    sift_json_schema_free_gbnf(out, &sp);
}
END_TEST

START_TEST(test_a_dropped_huge_bound_is_not_converted_to_an_integer)
{
    /* under the ignore policy a bound beyond 9e15 is dropped; its value
     * was still converted to int64 (undefined behaviour under UBSan) */
    sift_json_schema_params sp = compact();
    sp.unsupported = SIFT_JSON_UNSUPPORTED_IGNORE;
    sift_error err;
    ck_assert_int_eq(convert_str("{\"type\":\"number\",\"minimum\":1e300}", &sp, &err), SIFT_OK);
    ck_assert_int_eq(
        convert_str("{\"type\":\"number\",\"maximum\":-1e300,\"minimum\":0}", &sp, &err), SIFT_OK);
}
END_TEST

START_TEST(test_an_integer_beyond_int64_is_a_limit_at_its_pointer)
{
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(
        convert_str("{\"properties\":{\"a\":{\"enum\":[0,[1,{\"x\":123456789012345678901234}]]}}}",
                    &sp, &err),
        SIFT_E_SCHEMA_LIMIT);
    ck_assert_str_eq(err.message,
                     "schema:1:39: #/properties/a/enum/1/1/x: the integer 123456789012345678901234 "
                     "is outside the 64-bit range sift reads (-2^63 to 2^63-1)");
    ck_assert_int_eq(err.line, 1);
    ck_assert_int_eq(err.column, 39);
    ck_assert_int_eq(convert_str("{\"maxLength\":\n  -99999999999999999999}", &sp, &err),
                     SIFT_E_SCHEMA_LIMIT);
    ck_assert_str_eq(err.message, "schema:2:3: #/maxLength: the integer -99999999999999999999 is "
                                  "outside the 64-bit range sift reads (-2^63 to 2^63-1)");
}
END_TEST

START_TEST(test_a_number_beyond_a_double_is_a_limit_at_its_pointer)
{
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(convert_str("{\"type\":\"number\",\"maximum\":1e999}", &sp, &err),
                     SIFT_E_SCHEMA_LIMIT);
    ck_assert_str_eq(err.message,
                     "schema:1:28: #/maximum: the number 1e999 is beyond the range of a double");
}
END_TEST

START_TEST(test_a_nul_in_a_string_is_unsupported_at_its_pointer)
{
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(
        convert_str("{\"anyOf\":[{\"const\":\"a\"},{\"const\":\"a\\u0000b\"}]}", &sp, &err),
        SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_str_eq(err.message,
                     "schema:1:34: #/anyOf/1/const: a string holding \\u0000 is not supported");
}
END_TEST

START_TEST(test_a_nul_in_a_key_is_unsupported_at_its_object)
{
    sift_json_schema_params sp = compact();
    sift_error err;
    ck_assert_int_eq(convert_str("{\"properties\":{\"ok\":{},\"a\\u0000\":{}}}", &sp, &err),
                     SIFT_E_SCHEMA_UNSUPPORTED);
    ck_assert_str_eq(err.message, "schema:1:15: #/properties: the key \"a\\u0000\" holds \\u0000, "
                                  "which sift does not support");
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("schema_bounds");
    TCase *tc = tcase_create("work");
    tcase_add_test(tc, test_an_all_of_enum_intersection_is_charged_per_value_and_linear);
    tcase_add_test(tc, test_a_one_of_of_two_large_enums_is_decided_by_charged_linear_work);
    tcase_add_test(tc, test_a_one_of_of_many_consts_is_decided_by_charged_linear_work);
    tcase_add_test(tc, test_a_tagged_union_one_of_is_decided_by_charged_linear_work);
    tcase_add_test(tc, test_many_required_names_are_charged_and_linear);
    tcase_add_test(tc, test_a_patterns_subset_construction_is_charged);
    tcase_add_test(tc, test_many_refs_are_looked_up_in_linear_work);
    tcase_add_test(tc, test_placing_warnings_is_charged_per_scan_of_the_text);
    tcase_add_test(tc, test_matching_declared_names_against_a_pattern_is_charged);
    tcase_add_test(tc, test_a_schema_at_the_size_limit_converts_or_fails_within_linear_work);
    suite_add_tcase(s, tc);
    tc = tcase_create("numbers and strings");
    tcase_add_test(tc, test_an_integral_real_beyond_int64_is_an_integer_value);
    tcase_add_test(tc, test_a_dropped_huge_bound_is_not_converted_to_an_integer);
    tcase_add_test(tc, test_an_integer_beyond_int64_is_a_limit_at_its_pointer);
    tcase_add_test(tc, test_a_number_beyond_a_double_is_a_limit_at_its_pointer);
    tcase_add_test(tc, test_a_nul_in_a_string_is_unsupported_at_its_pointer);
    tcase_add_test(tc, test_a_nul_in_a_key_is_unsupported_at_its_object);
    suite_add_tcase(s, tc);
    return s;
}

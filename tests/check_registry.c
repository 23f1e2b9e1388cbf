/*
 * check_registry.c - the sampler descriptors (src/samplers/registry.c).
 *
 * The configuration is a walk over these tables, so a descriptor with a
 * missing doc line, a default outside its own range or a name another one
 * already has would show up as a wrong schema, not as a crash. Each test
 * walks the whole registry and checks one property of every entry.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/samplers/registry.h"

static size_t count(void)
{
    size_t n = 0;
    while (sift__samplers[n])
        n++;
    return n;
}

START_TEST(test_every_descriptor_has_a_name_a_summary_and_a_constructor)
{
    ck_assert_uint_gt(count(), 0);
    for (size_t i = 0; sift__samplers[i]; i++) {
        const sift__sampler_desc *d = sift__samplers[i];
        ck_assert_ptr_nonnull(d->name);
        ck_assert_uint_gt(strlen(d->name), 0);
        ck_assert_msg(d->summary && *d->summary, "%s has no summary", d->name);
        ck_assert_msg(d->build != NULL, "%s has no constructor", d->name);
        ck_assert_msg(d->rec_size > 0 && d->rec_size <= SIFT__REC_MAX, "%s: record of %zu bytes",
                      d->name, d->rec_size);
        ck_assert_msg(d->n_params == 0 || d->params, "%s", d->name);
    }
}
END_TEST

START_TEST(test_every_parameter_has_a_doc_line_and_a_field_inside_the_record)
{
    for (size_t i = 0; sift__samplers[i]; i++) {
        const sift__sampler_desc *d = sift__samplers[i];
        for (size_t k = 0; k < d->n_params; k++) {
            const sift__param *p = &d->params[k];
            ck_assert_msg(p->name && *p->name, "%s: parameter %zu has no name", d->name, k);
            ck_assert_msg(p->doc && *p->doc, "%s.%s has no doc line", d->name, p->name);
            ck_assert_msg(p->off < d->rec_size, "%s.%s", d->name, p->name);
            if (p->type == SIFT__PT_STRING_LIST)
                ck_assert_msg(p->off_len < d->rec_size && p->off_count < d->rec_size &&
                                  p->item_noun && p->max_items > 0 && p->max_item_bytes > 0,
                              "%s.%s", d->name, p->name);
            if (p->type == SIFT__PT_ID_FLOAT_MAP)
                ck_assert_msg(p->off_count < d->rec_size, "%s.%s", d->name, p->name);
            if (p->type == SIFT__PT_ENUM)
                ck_assert_msg(p->choices && p->choices[0], "%s.%s", d->name, p->name);
        }
        if (d->main)
            ck_assert_msg(sift__param_find(d, d->main) != NULL, "%s: main '%s' is no parameter",
                          d->name, d->main);
        if (d->value_is_param)
            ck_assert_uint_eq(d->n_params, 1);
    }
}
END_TEST

static int in_range(const sift__param *p, double v)
{
    if (p->type == SIFT__PT_INT && p->range == SIFT__R_ANY)
        return v >= INT32_MIN && v <= INT32_MAX;
    if (p->type == SIFT__PT_FLOAT && p->range == SIFT__R_ANY)
        return isfinite(v);
    switch (p->range) {
    case SIFT__R_IN: return v >= p->lo && v <= p->hi;
    case SIFT__R_GE: return v >= p->lo;
    case SIFT__R_GT: return v > p->lo;
    default: return 1;
    }
}

START_TEST(test_every_default_is_inside_its_own_range)
{
    for (size_t i = 0; sift__samplers[i]; i++) {
        const sift__sampler_desc *d = sift__samplers[i];
        for (size_t k = 0; k < d->n_params; k++) {
            const sift__param *p = &d->params[k];
            if (p->type != SIFT__PT_INT && p->type != SIFT__PT_FLOAT)
                continue;
            /* a required parameter's default is never used in YAML */
            if (!p->required)
                ck_assert_msg(in_range(p, p->def), "%s.%s default %g", d->name, p->name, p->def);
            if (p->flat_key)
                ck_assert_msg(in_range(p, p->flat_def), "%s.%s flat default %g", d->name, p->name,
                              p->flat_def);
        }
    }
}
END_TEST

START_TEST(test_names_flat_names_and_flat_characters_are_unique)
{
    for (size_t i = 0; sift__samplers[i]; i++) {
        const sift__sampler_desc *a = sift__samplers[i];
        ck_assert_ptr_eq(sift__sampler_find(a->name, strlen(a->name)), a);
        for (size_t j = i + 1; sift__samplers[j]; j++) {
            const sift__sampler_desc *b = sift__samplers[j];
            ck_assert_msg(strcmp(a->name, b->name) != 0, "%s twice", a->name);
            if (a->flat_names && b->flat_names) {
                ck_assert_msg(a->flat_char != b->flat_char, "%s and %s share '%c'", a->name,
                              b->name, a->flat_char);
                ck_assert_msg(a->flat_order != b->flat_order, "%s and %s share order %d", a->name,
                              b->name, a->flat_order);
                for (size_t x = 0; a->flat_names[x]; x++)
                    for (size_t y = 0; b->flat_names[y]; y++)
                        ck_assert_msg(strcmp(a->flat_names[x], b->flat_names[y]) != 0,
                                      "flat name %s twice", a->flat_names[x]);
            }
        }
        for (size_t x = 0; x < a->n_params; x++)
            for (size_t y = x + 1; y < a->n_params; y++)
                ck_assert_msg(strcmp(a->params[x].name, a->params[y].name) != 0, "%s.%s twice",
                              a->name, a->params[x].name);
        /* a flat selector replaces dist wherever it is named: no place
         * in the order */
        if (a->flat_names)
            ck_assert_msg(a->flat_char && (a->selector ? a->flat_order == 0 : a->flat_order > 0) &&
                              a->flat_active,
                          "%s", a->name);
    }
}
END_TEST

START_TEST(test_a_flat_key_shared_by_two_samplers_means_the_same_thing)
{
    /* min_keep, mirostat_tau: one llama.cpp key fills several stages, so
     * its type, range and default must agree wherever it appears. */
    for (size_t i = 0; sift__samplers[i]; i++)
        for (size_t k = 0; k < sift__samplers[i]->n_params; k++) {
            const sift__param *p = &sift__samplers[i]->params[k];
            for (size_t j = 0; p->flat_key && sift__samplers[j]; j++)
                for (size_t m = 0; m < sift__samplers[j]->n_params; m++) {
                    const sift__param *q = &sift__samplers[j]->params[m];
                    if (!q->flat_key || strcmp(p->flat_key, q->flat_key))
                        continue;
                    ck_assert_msg(p->type == q->type && p->range == q->range && p->lo == q->lo &&
                                      p->hi == q->hi && p->flat_def == q->flat_def,
                                  "%s differs between %s and %s", p->flat_key,
                                  sift__samplers[i]->name, sift__samplers[j]->name);
                }
        }
}
END_TEST

/* What the configuration's warnings read of a class: 1 reads the whole
 * row (WHOLE, THRESHOLD), 2 a top-k cut, 0 neither. */
static int category(sift_class c)
{
    return c == SIFT_CLASS_WHOLE || c == SIFT_CLASS_THRESHOLD ? 1 : c == SIFT_CLASS_TOP ? 2 : 0;
}

static const double SAMPLES[] = {-1, 0, 0.05, 0.5, 0.95, 1, 2, 40};

SIFT__PRINTF(4, 5)
static sift_status test_fail(const sift__build_env *env, sift_error *err, sift_status code,
                             const char *fmt, ...)
{
    (void)env;
    (void)fmt;
    return sift__fail(err, code, "stage refused");
}

/* Checks desc->cls against the built stage's class for one record. */
static void compare_class(const sift__sampler_desc *d, const sift__rec *rec, const char *what)
{
    sift_chain_params cp;
    sift_chain_params_init(&cp);
    cp.n_vocab = 100;
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_eq(sift_chain_new(&c, &cp, &err), SIFT_OK);
    sift__build_env env = {.n_vocab = 100, .trial = 1, .fail = test_fail};
    if (d->build(c, rec, &env, &err) == SIFT_OK) {
        int64_t k_desc = 0, k_stage = 0;
        sift_class cd = d->cls(rec, &k_desc);
        sift_class cs = sift_chain_stage_class(c, 0, &k_stage);
        ck_assert_msg(category(cd) == category(cs), "%s %s: descriptor class %d, stage class %d",
                      d->name, what, (int)cd, (int)cs);
        if (category(cd) == 2)
            ck_assert_msg(k_desc == k_stage, "%s %s: k %lld vs %lld", d->name, what,
                          (long long)k_desc, (long long)k_stage);
    }
    sift_chain_free(c);
}

/* The warnings' class of a record (descriptor cls) and the class the
 * built stage declares (sift_chain_stage_class) put every stage in the
 * same place: whole-row reader, top-k cut or neither. Each parameter is
 * varied over a few values from a base record. */
START_TEST(test_a_descriptor_class_agrees_with_the_built_stage_class)
{
    size_t compared = 0;
    for (size_t i = 0; sift__samplers[i]; i++) {
        const sift__sampler_desc *d = sift__samplers[i];
        if (!d->cls)
            continue;
        for (size_t k = 0; k < d->n_params; k++)
            for (size_t v = 0; v < sizeof SAMPLES / sizeof SAMPLES[0]; v++) {
                sift__rec rec;
                sift__rec_defaults(d, &rec, 1);
                /* required parameters: a middle value of their range */
                for (size_t r = 0; r < d->n_params; r++)
                    if (d->params[r].required && d->params[r].type == SIFT__PT_FLOAT)
                        *SIFT__REC_FIELD(&rec, &d->params[r], float) = 0.5f;
                    else if (d->params[r].required && d->params[r].type == SIFT__PT_INT)
                        *SIFT__REC_FIELD(&rec, &d->params[r], int32_t) = 40;
                const sift__param *p = &d->params[k];
                char what[64];
                snprintf(what, sizeof what, "%s = %g", p->name, SAMPLES[v]);
                if (p->type == SIFT__PT_FLOAT)
                    *SIFT__REC_FIELD(&rec, p, float) = (float)SAMPLES[v];
                else if (p->type == SIFT__PT_INT || p->type == SIFT__PT_WINDOW)
                    *SIFT__REC_FIELD(&rec, p, int32_t) = (int32_t)SAMPLES[v];
                else if (p->type == SIFT__PT_BOOL)
                    *SIFT__REC_FIELD(&rec, p, int) = SAMPLES[v] == 1;
                else
                    continue;
                compare_class(d, &rec, what);
                compared++;
            }
    }
    ck_assert_uint_gt(compared, 0);
}
END_TEST

/* docs/config.md, read whole (NULL if it cannot be read: the test fails). */
static char *read_doc(void)
{
    const char *dir = getenv("srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/config.md", dir ? dir : ".");
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap + 1);
    if (b)
        n = fread(b, 1, cap, f);
    fclose(f);
    if (b)
        b[n] = '\0';
    return b;
}

/* The table row of docs/config.md that starts with "| `name` |". */
static const char *row(const char *doc, const char *section, const char *name, size_t *len)
{
    const char *sec = strstr(doc, section);
    if (!sec)
        return NULL;
    char pat[128];
    snprintf(pat, sizeof pat, "\n| `%s` ", name);
    const char *r = strstr(sec, pat);
    if (!r)
        return NULL;
    r++;
    const char *end = strchr(r, '\n');
    *len = end ? (size_t)(end - r) : strlen(r);
    return r;
}

static int row_has(const char *r, size_t len, const char *name)
{
    char pat[128];
    snprintf(pat, sizeof pat, "`%s`", name);
    size_t pl = strlen(pat);
    for (size_t i = 0; i + pl <= len; i++)
        if (!memcmp(r + i, pat, pl))
            return 1;
    return 0;
}

START_TEST(test_docs_config_lists_every_stage_and_parameter_of_the_registry)
{
    char *doc = read_doc();
    ck_assert_msg(doc != NULL, "cannot read docs/config.md (srcdir=%s)", getenv("srcdir"));
    for (size_t i = 0; sift__samplers[i]; i++) {
        const sift__sampler_desc *d = sift__samplers[i];
        size_t len = 0;
        const char *r = row(doc, "## The chain: stages", d->name, &len);
        ck_assert_msg(r != NULL, "docs/config.md has no stage row for %s", d->name);
        if (d->main)
            ck_assert_msg(row_has(r, len, d->main), "%s row: no `%s`", d->name, d->main);
        for (size_t k = 0; k < d->n_params && !d->value_is_param; k++)
            ck_assert_msg(row_has(r, len, d->params[k].name), "%s row: no `%s`", d->name,
                          d->params[k].name);
        for (size_t k = 0; k < d->n_params; k++) {
            const char *fk = d->params[k].flat_key;
            if (fk)
                ck_assert_msg(row(doc, "## llama.cpp flat parameters", fk, &len) != NULL,
                              "docs/config.md has no flat-key row for %s (%s.%s)", fk, d->name,
                              d->params[k].name);
        }
    }
    free(doc);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("descriptors");
    tcase_add_test(tc, test_every_descriptor_has_a_name_a_summary_and_a_constructor);
    tcase_add_test(tc, test_every_parameter_has_a_doc_line_and_a_field_inside_the_record);
    tcase_add_test(tc, test_every_default_is_inside_its_own_range);
    tcase_add_test(tc, test_names_flat_names_and_flat_characters_are_unique);
    tcase_add_test(tc, test_a_flat_key_shared_by_two_samplers_means_the_same_thing);
    tcase_add_test(tc, test_docs_config_lists_every_stage_and_parameter_of_the_registry);
    tcase_add_test(tc, test_a_descriptor_class_agrees_with_the_built_stage_class);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

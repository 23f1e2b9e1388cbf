/*
 * check_registry.c - the sampler descriptors (src/samplers/registry.c).
 *
 * The configuration is a walk over these tables, so a descriptor with a
 * missing doc line, a default outside its own range or a name another one
 * already has would show up as a wrong schema, not as a crash. Each test
 * walks the whole registry and checks one property of every entry.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
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

/* The one range check (registry.c): the YAML validator, the flat form
 * and the constructors read it. */
static int in_range(const sift__param *p, double v)
{
    return sift__param_ok(p, v);
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

/* The errors a configuration text gets (the config is freed). */
static size_t config_errors(const char *yaml)
{
    sift_config *cfg = NULL;
    sift_error err;
    sift_status st = sift_config_parse(&cfg, "t.yaml", yaml, strlen(yaml), NULL, &err);
    size_t n = cfg ? sift_config_n_errors(cfg) : 1;
    sift_config_free(cfg);
    return st == SIFT_OK ? 0 : n ? n : 1;
}

/* x as the YAML form reads it back exactly: an integer, or a float's
 * shortest exact decimal. */
static const char *number(const sift__param *p, double x, char *out)
{
    if (p->type == SIFT__PT_FLOAT)
        snprintf(out, 48, "%.9g", x);
    else
        snprintf(out, 48, "%.0f", x);
    return out;
}

/* A record of `d` with `p` = x and every other parameter at its default
 * (a required one at a middle value, as above), into `yaml` as a stage. */
static void stage_text(const sift__sampler_desc *d, const sift__param *p, double x, char *yaml,
                       size_t cap)
{
    char num[48];
    size_t k = (size_t)snprintf(yaml, cap, "vocab_size: 100\nchain:\n  - %s: {%s: %s", d->name,
                                p->name, number(p, x, num));
    for (size_t r = 0; r < d->n_params; r++)
        if (d->params[r].required && &d->params[r] != p)
            k += (size_t)snprintf(yaml + k, cap - k, ", %s: %s", d->params[r].name,
                                  d->params[r].type == SIFT__PT_FLOAT ? "0.5" : "40");
    snprintf(yaml + k, cap - k, "}\n%s", d->selector ? "" : "  - dist\n");
}

/* Builds `d` with `p` = x through its constructor (the public
 * sift_chain_add_* call behind d->build); SIFT_OK or its status. */
static sift_status construct(const sift__sampler_desc *d, const sift__param *p, double x)
{
    sift__rec rec;
    sift__rec_defaults(d, &rec, 1);
    for (size_t r = 0; r < d->n_params; r++)
        if (d->params[r].required && d->params[r].type == SIFT__PT_FLOAT)
            *SIFT__REC_FIELD(&rec, &d->params[r], float) = 0.5f;
        else if (d->params[r].required && d->params[r].type == SIFT__PT_INT)
            *SIFT__REC_FIELD(&rec, &d->params[r], int32_t) = 40;
    if (p->type == SIFT__PT_FLOAT)
        *SIFT__REC_FIELD(&rec, p, float) = (float)x;
    else
        *SIFT__REC_FIELD(&rec, p, int32_t) = (int32_t)x;
    sift_chain_params cp;
    sift_chain_params_init(&cp);
    cp.n_vocab = 100;
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_eq(sift_chain_new(&c, &cp, &err), SIFT_OK);
    sift__build_env env = {.n_vocab = 100, .trial = 1, .fail = test_fail};
    sift_status st = d->build(c, &rec, &env, &err);
    sift_chain_free(c);
    return st;
}

/* The parameters whose constructor takes a wider range than the YAML
 * form, or is not reached by a trial build, and why. */
static const struct {
    const char *stage, *param;
} WIDER[] = {
    {"temperature", "temp"}, /* sift_chain_add_temp: a negative temp is greedy */
    /* delta <= 0 (the default) builds sift_chain_add_temp, which has no
     * delta and no exponent */
    {"temperature", "delta"},
    {"temperature", "exponent"},
    /* a trial build without ids leaves the stage out (no vocabulary) */
    {"min_tokens", "n"},
};

static int wider(const sift__sampler_desc *d, const sift__param *p)
{
    for (size_t i = 0; i < sizeof WIDER / sizeof WIDER[0]; i++)
        if (!strcmp(WIDER[i].stage, d->name) && !strcmp(WIDER[i].param, p->name))
            return 1;
    return 0;
}

/* A range is written once, in the descriptor: at each end of every
 * bounded number parameter and just past it, the YAML validator, the
 * flat form (where llama.cpp reads the key as the YAML form does) and
 * the constructor accept exactly what sift__param_ok accepts. */
START_TEST(test_every_reader_of_a_range_agrees_with_its_descriptor)
{
    size_t checked = 0;
    for (size_t i = 0; sift__samplers[i]; i++) {
        const sift__sampler_desc *d = sift__samplers[i];
        for (size_t k = 0; k < d->n_params && !d->value_is_param; k++) {
            const sift__param *p = &d->params[k];
            if ((p->type != SIFT__PT_FLOAT && p->type != SIFT__PT_INT) || p->range == SIFT__R_ANY)
                continue;
            int fl = p->type == SIFT__PT_FLOAT;
            double ends[4] = {p->lo, fl ? nextafterf((float)p->lo, -INFINITY) : p->lo - 1,
                              p->range == SIFT__R_IN ? p->hi : p->lo + 1,
                              p->range != SIFT__R_IN ? p->lo + 2
                              : fl                   ? nextafterf((float)p->hi, INFINITY)
                                                     : p->hi + 1};
            if (fl && p->range == SIFT__R_IN)
                ends[2] = (float)p->hi;
            for (size_t e = 0; e < 4; e++) {
                double x = ends[e];
                if (!fl && (x < INT32_MIN || x > INT32_MAX))
                    continue;
                int ok = sift__param_ok(p, x);
                char yaml[512], num[48];
                stage_text(d, p, x, yaml, sizeof yaml);
                ck_assert_msg((config_errors(yaml) == 0) == ok, "YAML %s.%s = %.9g: expected %s",
                              d->name, p->name, x, ok ? "accepted" : "an error");
                if (p->flat_key && p->flat_rule == SIFT__FLAT_SAME) {
                    snprintf(yaml, sizeof yaml, "n_ctx: 4096\nvocab_size: 100\n%s: %s\n",
                             p->flat_key, number(p, x, num));
                    ck_assert_msg((config_errors(yaml) == 0) == ok, "flat %s = %.9g: expected %s",
                                  p->flat_key, x, ok ? "accepted" : "an error");
                }
                if (!wider(d, p)) {
                    sift_status st = construct(d, p, x);
                    ck_assert_msg((st == SIFT_OK) == ok || (ok && st != SIFT_E_ARG),
                                  "sift_chain_add for %s.%s = %.9g: status %d", d->name, p->name, x,
                                  (int)st);
                }
                checked++;
            }
        }
    }
    ck_assert_uint_gt(checked, 40);
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

/* A bound as the docs write it: %g, with a minus sign (U+2212) in place
 * of '-' when `minus` is set (the docs use both). */
static void bound(char *out, size_t cap, double x, int minus)
{
    if (x < 0 && minus)
        snprintf(out, cap, "\xe2\x88\x92%g", -x);
    else
        snprintf(out, cap, "%g", x);
}

/* How docs/config.md's stage table writes p's range: "[0, 1]", "≥ 0",
 * "> 0"; empty for SIFT__R_ANY. */
static const char *range_text(const sift__param *p, int minus, char *out, size_t cap)
{
    char lo[32], hi[32];
    bound(lo, sizeof lo, p->lo, minus);
    bound(hi, sizeof hi, p->hi, minus);
    out[0] = '\0';
    if (p->range == SIFT__R_IN && !(p->type != SIFT__PT_FLOAT && p->hi == INT32_MAX))
        snprintf(out, cap, "[%s, %s]", lo, hi);
    else if (p->range == SIFT__R_IN || p->range == SIFT__R_GE)
        snprintf(out, cap, "\xe2\x89\xa5 %s", lo);
    else if (p->range == SIFT__R_GT)
        snprintf(out, cap, "> %s", lo);
    else if (p->range == SIFT__R_LE)
        snprintf(out, cap, "\xe2\x89\xa4 %s", hi);
    return out;
}

static int row_says(const char *r, size_t len, const char *want)
{
    size_t wl = strlen(want);
    for (size_t j = 0; j + wl <= len; j++)
        if (!memcmp(r + j, want, wl))
            return 1;
    return 0;
}

/* The stage table says each number parameter's range as its descriptor
 * has it: a range changed in the descriptor alone fails here. */
START_TEST(test_docs_config_states_every_range_of_the_registry)
{
    char *doc = read_doc();
    ck_assert_msg(doc != NULL, "cannot read docs/config.md (srcdir=%s)", getenv("srcdir"));
    size_t checked = 0;
    for (size_t i = 0; sift__samplers[i]; i++) {
        const sift__sampler_desc *d = sift__samplers[i];
        size_t len = 0;
        const char *r = row(doc, "## The chain: stages", d->name, &len);
        ck_assert_msg(r != NULL, "docs/config.md has no stage row for %s", d->name);
        for (size_t k = 0; k < d->n_params; k++) {
            const sift__param *p = &d->params[k];
            char want[96], alt[96];
            if ((p->type != SIFT__PT_FLOAT && p->type != SIFT__PT_INT) ||
                !*range_text(p, 0, want, sizeof want))
                continue;
            range_text(p, 1, alt, sizeof alt);
            ck_assert_msg(row_says(r, len, want) || row_says(r, len, alt),
                          "docs/config.md: the %s row does not say %s's range %s", d->name, p->name,
                          want);
            checked++;
        }
    }
    ck_assert_uint_gt(checked, 20);
    free(doc);
}
END_TEST

Suite *tu_suite(void)
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
    tcase_add_test(tc, test_every_reader_of_a_range_agrees_with_its_descriptor);
    tcase_add_test(tc, test_docs_config_states_every_range_of_the_registry);
    suite_add_tcase(s, tc);
    return s;
}

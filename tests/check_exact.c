/*
 * check_exact.c - the exactness property: on random chains, random
 * histories and random or adversarial rows, sift's full-row path agrees
 * bitwise with the naive oracle: same status, same token, same RNG state,
 * step after step (so the state left by accept agrees too).
 *
 * SIFT_EXACT_CASES (environment) sets the number of chains per test case
 * (default 4000; each chain runs several steps on fresh rows).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"

static long n_cases(void)
{
    const char *e = getenv("SIFT_EXACT_CASES");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : 4000;
}

typedef struct family {
    const char *name;
    const sp_kind *mids; /* non-selector kinds */
    size_t n_mids;
    const sp_kind *sels; /* selector kinds */
    size_t n_sels;
} family;

static const sp_kind core_mids[] = {SP_TOP_K, SP_TOP_K_TIES};
static const sp_kind core_sels[] = {SP_GREEDY, SP_DIST, SP_DIST_ID};
static const sp_kind trunc_mids[] = {SP_TOP_K, SP_TOP_P, SP_MIN_P, SP_TYPICAL, SP_XTC};
static const sp_kind temp_mids[] = {SP_TOP_K, SP_TEMP, SP_TEMP_EXT, SP_TOP_N_SIGMA};
static const sp_kind temp_sels[] = {SP_DIST, SP_GREEDY, SP_MIROSTAT, SP_MIROSTAT_V2};
static const sp_kind pen_mids[] = {SP_TOP_K, SP_PENALTIES, SP_DRY, SP_LOGIT_BIAS};
static const sp_kind all_mids[] = {SP_TOP_K,       SP_TOP_K_TIES, SP_TOP_P,    SP_MIN_P,
                                   SP_TYPICAL,     SP_TEMP,       SP_TEMP_EXT, SP_XTC,
                                   SP_TOP_N_SIGMA, SP_PENALTIES,  SP_DRY,      SP_LOGIT_BIAS};
static const sp_kind all_sels[] = {SP_GREEDY, SP_DIST, SP_DIST_ID, SP_MIROSTAT, SP_MIROSTAT_V2};
/* The probability cutoffs among the stages they are usually chained with,
 * and the adaptive-p selector. */
static const sp_kind cutoff_mids[] = {SP_EPSILON, SP_EPSILON, SP_ETA,       SP_ETA,       SP_TOP_K,
                                      SP_MIN_P,   SP_TEMP,    SP_PENALTIES, SP_LOGIT_BIAS};
static const sp_kind cutoff_sels[] = {SP_DIST, SP_GREEDY, SP_DIST_ID, SP_ADAPTIVE_P, SP_ADAPTIVE_P};

#define N(a) (sizeof(a) / sizeof((a)[0]))
static const family families[] = {
    {"core", core_mids, N(core_mids), core_sels, N(core_sels)},
    {"trunc", trunc_mids, N(trunc_mids), core_sels, N(core_sels)},
    {"temp", temp_mids, N(temp_mids), temp_sels, N(temp_sels)},
    {"penalties", pen_mids, N(pen_mids), core_sels, N(core_sels)},
    {"all", all_mids, N(all_mids), all_sels, N(all_sels)},
    {"prefix", NULL, 0, all_sels, N(all_sels)},
    {"cutoff", cutoff_mids, N(cutoff_mids), cutoff_sels, N(cutoff_sels)},
};

/* Chains shaped for the prefix path: lowering and monotone stages, then a
 * truncation, then anything; larger V so the prefix is much shorter than
 * the row. */
static const sp_kind pre_lows[] = {SP_PENALTIES, SP_DRY, SP_LOGIT_BIAS, SP_TEMP};
static const sp_kind pre_after[] = {SP_TOP_P, SP_MIN_P,       SP_TEMP, SP_TYPICAL,
                                    SP_XTC,   SP_TOP_N_SIGMA, SP_TOP_K};

static void gen_prefix_chain(tu_rng *r, sp_chain *spec, int32_t V, const family *f)
{
    size_t n_low = (size_t)tu_range(r, 0, 3);
    for (size_t i = 0; i < n_low; i++) {
        sp_stage *s = &spec->st[spec->n++];
        gen_stage(r, s, pre_lows[tu_range(r, 0, (int64_t)N(pre_lows) - 1)], V);
        if (s->kind == SP_LOGIT_BIAS) /* lowering only: raising needs extras */
            for (size_t b = 0; b < s->n_bias; b++)
                if (s->bias[b].bias > 0)
                    s->bias[b].bias = -s->bias[b].bias;
        if (s->kind == SP_PENALTIES) {
            if (s->f0 < 1.0f)
                s->f0 = 1.0f / s->f0;
            s->f1 = s->f1 < 0 ? -s->f1 : s->f1;
            s->f2 = s->f2 < 0 ? -s->f2 : s->f2;
        }
    }
    sp_stage *tk = &spec->st[spec->n++];
    gen_stage(r, tk, SP_TOP_K, V);
    tk->i0 = (int32_t)tu_range(r, 1, 50);
    size_t n_after = (size_t)tu_range(r, 0, 2);
    for (size_t i = 0; i < n_after; i++)
        gen_stage(r, &spec->st[spec->n++], pre_after[tu_range(r, 0, (int64_t)N(pre_after) - 1)], V);
    gen_stage(r, &spec->st[spec->n++], f->sels[tu_range(r, 0, (int64_t)f->n_sels - 1)], V);
}

static void compare_distributions(sift_chain *chain, or_chain *o, const float *row, int32_t V,
                                  const char *desc)
{
    sift_token_prob *d = malloc((size_t)V * sizeof *d);
    size_t n = 0;
    sift_status ss = sift_chain_distribution(chain, row, V, d, (size_t)V, &n, NULL);
    or_arr a;
    sift_status so = or_run_stages(o, row, V, o->spec.n - 1, &a);
    if (so == SIFT_OK && !(a.c[0].logit > -INFINITY))
        so = SIFT_E_NO_CANDIDATE; /* what the selector would say */
    ck_assert_msg(ss == so, "distribution status sift %d oracle %d\n  %s", (int)ss, (int)so, desc);
    if (ss == SIFT_OK) {
        ck_assert_msg(n == a.n, "distribution size sift %zu oracle %zu\n  %s", n, a.n, desc);
        uint64_t *w = malloc(a.n * sizeof *w);
        sift__u128 W = or_weights(&a, w);
        double Wd = sift__u128_to_double(W);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(
                d[i].id == a.c[i].id && memcmp(&d[i].logit, &a.c[i].logit, sizeof(float)) == 0 &&
                    d[i].p == (double)w[i] / Wd,
                "distribution entry %zu: sift (%d, %a, %a) oracle (%d, %a)\n  %s", i, (int)d[i].id,
                (double)d[i].logit, d[i].p, (int)a.c[i].id, (double)a.c[i].logit, desc);
        }
        free(w);
    }
    free(a.c);
    free(d);
}

static void run_family(const family *f, uint64_t seed, long cases)
{
    tu_rng r = {seed};
    long compared = 0;
    uint64_t n_decided = 0, n_fallback = 0;
    char desc[2048];
    for (long cs = 0; cs < cases; cs++) {
        int prefix = f->mids == NULL;
        int32_t V = prefix ? (int32_t)tu_range(&r, 400, cs % 100 == 0 ? 262144 : 30000)
                           : tu_rand_V(&r, cs % 100 == 0 ? 262144 : 20000);
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        if (prefix) {
            gen_prefix_chain(&r, &spec, V, f);
        } else {
            size_t n_mid = (size_t)tu_range(&r, 0, 5);
            for (size_t i = 0; i < n_mid; i++)
                gen_stage(&r, &spec.st[spec.n++], f->mids[tu_range(&r, 0, (int64_t)f->n_mids - 1)],
                          V);
            gen_stage(&r, &spec.st[spec.n++], f->sels[tu_range(&r, 0, (int64_t)f->n_sels - 1)], V);
        }
        sift_chain *chain;
        sift_error err;
        sp_describe(&spec, desc, sizeof desc);
        ck_assert_msg(sp_build(&spec, &chain, &err) == SIFT_OK, "build %s: %s", desc, err.message);
        or_chain o;
        or_init(&o, &spec);
        /* a prompt: repeats from a small alphabet so windows fill */
        int32_t alpha = V < 12 ? V : 12;
        int n_prompt = (int)tu_range(&r, 0, 40);
        for (int i = 0; i < n_prompt; i++) {
            int32_t t = (int32_t)tu_range(&r, 0, alpha - 1);
            ck_assert_int_eq(sift_chain_accept(chain, t, &err), SIFT_OK);
            or_accept(&o, t);
        }
        float *row = malloc((size_t)V * sizeof *row);
        int steps = V > 20000 ? 2 : (int)tu_range(&r, 1, 6);
        for (int step = 0; step < steps; step++) {
            int shape = (int)tu_range(&r, 0, TU_ROW__COUNT - 1);
            tu_row(&r, row, V, shape);
            /* Before the draw: the candidate set the selector sees, logits
             * and probabilities bitwise (dist selectors: the support is
             * the whole set). */
            sp_kind sel = spec.st[spec.n - 1].kind;
            if ((sel == SP_DIST || sel == SP_DIST_ID) && V <= 20000)
                compare_distributions(chain, &o, row, V, desc);
            int32_t ts = -1, to = -1;
            sift_status ss = sift_chain_sample(chain, row, V, &ts, &err);
            sift_status so = or_sample(&o, row, V, &to);
            compared++;
            uint64_t rs[4];
            sift__chain_rng_state(chain, rs);
            int same =
                ss == so && (ss != SIFT_OK || ts == to) && memcmp(rs, o.rng.s, sizeof rs) == 0;
            ck_assert_msg(same,
                          "mismatch case %ld step %d V=%d shape %d: sift %d (tok %d: %s) "
                          "oracle %d (tok %d)\n  %s",
                          cs, step, (int)V, shape, (int)ss, (int)ts, ss ? err.message : "", (int)so,
                          (int)to, desc);
            if (ss != SIFT_OK)
                break;
            /* usually accept the sampled token, sometimes another one */
            int32_t acc = tu_unif(&r) < 0.8 ? ts : (int32_t)tu_range(&r, 0, alpha - 1);
            ck_assert_int_eq(sift_chain_accept(chain, acc, &err), SIFT_OK);
            or_accept(&o, acc);
        }
        free(row);
        or_free(&o);
        n_decided += chain->n_prefix_decided;
        n_fallback += chain->n_prefix_fallback;
        sift_chain_free(chain);
    }
    /* A mismatch stops the test at its step; what is left to check is that
     * the property ran at all: every chain compared at least one step, and
     * the prefix family reached the prefix path (else it tested only the
     * whole row). */
    ck_assert_int_ge(compared, cases);
    if (f->mids == NULL)
        ck_assert_msg(n_decided > 0, "no chain of the prefix family was decided from a prefix");
    fprintf(stderr,
            "exact[%s]: %ld chains, %ld steps compared, 0 mismatches; prefix path: %llu "
            "decided, %llu sent to the whole row\n",
            f->name, cases, compared, (unsigned long long)n_decided,
            (unsigned long long)n_fallback);
}

START_TEST(test_core_samplers_agree_with_the_oracle_bitwise)
{
    run_family(&families[0], 11, n_cases());
}
END_TEST

START_TEST(test_truncating_samplers_agree_with_the_oracle_bitwise)
{
    run_family(&families[1], 12, n_cases());
}
END_TEST

START_TEST(test_temperature_family_agrees_with_the_oracle_bitwise)
{
    run_family(&families[2], 13, n_cases());
}
END_TEST

START_TEST(test_penalty_family_agrees_with_the_oracle_bitwise)
{
    run_family(&families[3], 14, n_cases());
}
END_TEST

START_TEST(test_random_chains_of_every_sampler_agree_with_the_oracle_bitwise)
{
    run_family(&families[4], 15, n_cases());
}
END_TEST

START_TEST(test_chains_decided_from_a_prefix_agree_with_the_oracle_bitwise)
{
    long n = n_cases() / 2; /* at least one chain, even with SIFT_EXACT_CASES=1 */
    run_family(&families[5], 16, n > 0 ? n : 1);
}
END_TEST

START_TEST(test_probability_cutoffs_agree_with_the_oracle_bitwise)
{
    run_family(&families[6], 17, n_cases());
}
END_TEST

/* The oracle's sort (a radix sort over canonical keys for long arrays)
 * gives the order its comparator defines: logit descending, +0 and -0
 * tied, ties by id; on rows of few distinct values (ties everywhere),
 * signed zeros, -inf and the float extremes. */
static int canon_before(sift_candidate a, sift_candidate b)
{
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

START_TEST(test_the_oracle_sort_is_the_canonical_order)
{
    static const float odd[] = {0.0f,           -0.0f,  -INFINITY, 3.4028235e38f,
                                -3.4028235e38f, 1e-45f, -1e-45f,   1.0f};
    tu_rng r = {77};
    for (int trial = 0; trial < 40; trial++) {
        size_t n = (size_t)tu_range(&r, 1, 6000);
        or_arr a = {malloc(n * sizeof(sift_candidate)), n, (int32_t)n};
        ck_assert_ptr_nonnull(a.c);
        int values = (int)tu_range(&r, 1, 40);
        for (size_t i = 0; i < n; i++) {
            float x = trial % 3 == 0   ? odd[tu_range(&r, 0, 7)]
                      : trial % 3 == 1 ? (float)tu_range(&r, 0, values) - 20.0f
                                       : (float)tu_normal(&r) * 8.0f;
            a.c[i] = (sift_candidate){(int32_t)((i * 7919u) % n), x};
        }
        or_sort(&a);
        for (size_t i = 1; i < n; i++)
            ck_assert_msg(canon_before(a.c[i - 1], a.c[i]),
                          "trial %d, n %zu: (%d, %a) before (%d, %a) at %zu", trial, n,
                          (int)a.c[i - 1].id, (double)a.c[i - 1].logit, (int)a.c[i].id,
                          (double)a.c[i].logit, i);
        free(a.c);
    }
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("exact");
    struct {
        const char *name;
        const TTest *t;
    } cases[] = {
        {"core", test_core_samplers_agree_with_the_oracle_bitwise},
        {"trunc", test_truncating_samplers_agree_with_the_oracle_bitwise},
        {"temp", test_temperature_family_agrees_with_the_oracle_bitwise},
        {"penalties", test_penalty_family_agrees_with_the_oracle_bitwise},
        {"all", test_random_chains_of_every_sampler_agree_with_the_oracle_bitwise},
        {"prefix", test_chains_decided_from_a_prefix_agree_with_the_oracle_bitwise},
        {"cutoff", test_probability_cutoffs_agree_with_the_oracle_bitwise},
        {"oracle_sort", test_the_oracle_sort_is_the_canonical_order},
    };
    for (size_t i = 0; i < N(cases); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, cases[i].t);
        suite_add_tcase(s, tc);
    }
    return s;
}

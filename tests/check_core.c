/*
 * check_core.c - the core on its own: linked with src/core/,
 * src/samplers/ and src/vocab/ only (no grammar, no schema, no config,
 * no jansson or libyaml), so it also proves that they need nothing from
 * those folders.
 *
 * Covers the one table of class semantics (core/class.c) through both of
 * its readers, the static plan and the run-time certificate, and the
 * slice fallback's work (one walk and one full pass).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "core/kernels.h"
#include "core/simd.h"
#include "core/step.h"
#include "sift_internal.h"

enum { V = 1000 };

/* A row with distinct logits in a random order (xorshift; no libm). */
static void make_row(float *row, uint64_t seed)
{
    uint64_t x = seed * 2654435761u + 1;
    for (int32_t i = 0; i < V; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        row[i] = (float)(x % 100000u) / 1000.0f - 50.0f + (float)i * 1e-6f;
    }
}

/* The canonical first k of a row (a selection sort is enough here). */
static void canonical_prefix(const float *row, int32_t k, sift_candidate *out)
{
    static unsigned char taken[V];
    memset(taken, 0, sizeof taken);
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t i = 0; i < V; i++)
            if (!taken[i] && (best < 0 || row[i] > row[best]))
                best = i;
        taken[best] = 1;
        out[j].id = best;
        out[j].logit = row[best];
    }
}

typedef struct hook_ctx {
    const float *row;
    int calls;
} hook_ctx;

static int hook(void *user, float *row, int32_t n)
{
    hook_ctx *h = user;
    memcpy(row, h->row, (size_t)n * sizeof *row);
    h->calls++;
    return 0;
}

/* The custom stage of a class: what each does is allowed by its class
 * (custom.c checks it): LOWERS lowers the first cls_n it receives (all,
 * when cls_n is -1), TOP keeps the first cls_n, the others change
 * nothing. */
typedef struct cstage {
    sift_class cls;
    int64_t n;
} cstage;

static int cstage_apply(void *user, sift_candidate *data, size_t *size)
{
    const cstage *cs = user;
    if (cs->cls == SIFT_CLASS_LOWERS)
        for (size_t i = 0; i < *size && (cs->n < 0 || (int64_t)i < cs->n); i++)
            data[i].logit -= 1000.0f;
    if (cs->cls == SIFT_CLASS_TOP && (int64_t)*size > cs->n)
        *size = (size_t)cs->n;
    return 0;
}

static sift_chain *chain_with(cstage *cs, int32_t top_k)
{
    sift_chain *c = NULL;
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 11;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    sift_custom_stage vt = {
        SIFT_CUSTOM_STAGE_ABI, "probe", cs->cls, cs->n, cstage_apply, NULL, NULL, NULL, NULL};
    ck_assert_int_eq(sift_chain_add_custom(c, &vt, cs, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, top_k, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

START_TEST(test_every_class_has_a_plan_rule_a_certificate_rule_and_an_extras_rule)
{
    for (unsigned k = 0; k < SIFT__N_CLASSES; k++) {
        const sift__class_rule *r = sift__class_rule_of((sift_class)k);
        ck_assert_ptr_nonnull(r->plan);
        ck_assert_ptr_nonnull(r->certify);
        ck_assert_ptr_nonnull(r->extras);
        ck_assert_str_eq(r->name, sift_class_str((sift_class)k));
    }
    /* Past the enum: the rules of WHOLE. */
    ck_assert_ptr_eq(sift__class_rule_of((sift_class)SIFT__N_CLASSES),
                     sift__class_rule_of(SIFT_CLASS_WHOLE));
}
END_TEST

/* Each class in front of top_k 5: what the plan says of the chain is what
 * the certificate does with a slice of the plan's k (or of 64 tokens for
 * a whole-row plan). An exact plan is decided on its slice with no row; a
 * whole-row plan is never decided on a slice; and either way the token is
 * the whole row's. */
START_TEST(test_every_class_reads_alike_in_the_plan_and_the_certificate)
{
    static const struct {
        sift_class cls;
        int64_t n;
        sift_guarantee g;
        int32_t k;
    } want[] = {
        {SIFT_CLASS_WHOLE, 0, SIFT_GUARANTEE_WHOLE_ROW, 0},
        {SIFT_CLASS_IDENTITY, 0, SIFT_GUARANTEE_EXACT, 5},
        {SIFT_CLASS_LOWERS, 3, SIFT_GUARANTEE_EXACT, 8},
        {SIFT_CLASS_RAISES, 0, SIFT_GUARANTEE_WHOLE_ROW, 0},   /* names no extras */
        {SIFT_CLASS_MONOTONE, 0, SIFT_GUARANTEE_WHOLE_ROW, 0}, /* no bound map */
        {SIFT_CLASS_TOP, 3, SIFT_GUARANTEE_EXACT, 3},
        {SIFT_CLASS_THRESHOLD, 0, SIFT_GUARANTEE_WHOLE_ROW, 0}, /* no certify */
    };
    ck_assert_uint_eq(sizeof want / sizeof want[0], SIFT__N_CLASSES);
    static float row[V];
    static sift_candidate pre[64];
    for (size_t t = 0; t < sizeof want / sizeof want[0]; t++) {
        ck_assert_int_eq(want[t].cls, (sift_class)t);
        cstage cs = {want[t].cls, want[t].n};
        sift_chain *c = chain_with(&cs, 5);
        sift_plan plan = {.struct_size = sizeof plan};
        ck_assert_int_eq(sift_chain_plan(c, &plan, NULL, NULL), SIFT_OK);
        ck_assert_int_eq(plan.guarantee, want[t].g);
        ck_assert_int_eq(plan.k, want[t].k);
        sift_chain *whole = chain_with(&cs, 5); /* the same chain, whole rows */
        for (uint64_t step = 0; step < 20; step++) {
            make_row(row, 100 * t + step);
            int32_t k = plan.k > 0 ? plan.k : 64;
            canonical_prefix(row, k, pre);
            sift_slice sl = {
                .n_vocab = V, .n_prefix = k, .prefix = pre, .flags = SIFT_SLICE_CANONICAL};
            hook_ctx h = {row, 0};
            ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
            int32_t a = -1, b = -2;
            ck_assert_int_eq(sift_chain_sample_slice(c, &sl, &a, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_sample(whole, row, V, &b, NULL), SIFT_OK);
            ck_assert_int_eq(a, b);
            if (want[t].g == SIFT_GUARANTEE_EXACT)
                ck_assert_int_eq(h.calls, 0);
            if (want[t].g == SIFT_GUARANTEE_WHOLE_ROW)
                ck_assert_int_eq(h.calls, 1);
        }
        sift_chain_free(whole);
        sift_chain_free(c);
    }
}
END_TEST

/* A slice the certificate cannot decide goes from its one failed walk
 * straight to one full pass: the row's prefix path would build the same
 * top tokens and fail the same walk again. The token is the whole row's. */
START_TEST(test_an_undecided_slice_runs_one_walk_and_one_full_pass)
{
    static float row[V];
    static sift_candidate pre[V];
    /* Lowers every token it sees: the top_k after it can never be
     * certified on a slice (plan k = 5 + slack 64). */
    cstage cs = {SIFT_CLASS_LOWERS, -1};
    sift_chain *c = chain_with(&cs, 5);
    sift_chain *whole = chain_with(&cs, 5); /* the same chain, whole rows */
    size_t k = sift__plan_prefix_k(c);
    ck_assert_uint_eq(k, 69);
    make_row(row, 5);
    canonical_prefix(row, (int32_t)k, pre);
    sift_slice sl = {
        .n_vocab = V, .n_prefix = (int32_t)k, .prefix = pre, .flags = SIFT_SLICE_CANONICAL};
    hook_ctx h = {row, 0};
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    int32_t a = -1, b = -2;
    ck_assert_int_eq(sift_chain_sample_slice(c, &sl, &a, NULL), SIFT_OK);
    ck_assert_int_eq(h.calls, 1);
    ck_assert_uint_eq(c->n_walks, 1);
    ck_assert_uint_eq(c->n_full_passes, 1);
    ck_assert_uint_eq(c->n_prefix_fallback, 0);
    /* The same row through sift_chain_sample tries its prefix (one walk)
     * before its full pass, and draws the same token. */
    ck_assert_int_eq(sift_chain_sample(whole, row, V, &b, NULL), SIFT_OK);
    ck_assert_int_eq(a, b);
    ck_assert_uint_eq(whole->n_walks, 1);
    ck_assert_uint_eq(whole->n_full_passes, 1);
    ck_assert_uint_eq(whole->n_prefix_fallback, 1);
    sift_chain_free(whole);
    sift_chain_free(c);
}
END_TEST

/* A slice shorter than the plan's k knows less than the row's canonical
 * prefix: its fallback still tries that prefix, which may decide. */
START_TEST(test_a_slice_shorter_than_the_plan_falls_back_through_the_row_prefix)
{
    static float row[V];
    static sift_candidate pre[8];
    cstage cs = {SIFT_CLASS_IDENTITY, 0};
    sift_chain *c = chain_with(&cs, 5);
    make_row(row, 9);
    canonical_prefix(row, 3, pre);
    sift_slice sl = {.n_vocab = V, .n_prefix = 3, .prefix = pre, .flags = SIFT_SLICE_CANONICAL};
    hook_ctx h = {row, 0};
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
    int32_t a = -1;
    ck_assert_int_eq(sift_chain_sample_slice(c, &sl, &a, NULL), SIFT_OK);
    ck_assert_int_eq(h.calls, 1);
    ck_assert_uint_eq(c->n_walks, 2);
    ck_assert_uint_eq(c->n_prefix_decided, 1);
    ck_assert_uint_eq(c->n_full_passes, 0);
    sift_chain_free(c);
}
END_TEST

/* The row load (core/kernels.c) writes the same bytes and flags at
 * every dispatch level the machine has as its scalar twin: lengths
 * around every vector width, rows with a NaN, a +inf, -inf runs, -0 and
 * a row of -inf only, each bad value at every position of a short row. */
static void load_levels_agree(const float *row, size_t n)
{
    static sift_candidate want[300], got[300];
    int wb, wa;
    sift__load_cand_at(SIFT__SIMD_SCALAR, row, want, n, &wb, &wa);
    for (int l = SIFT__SIMD_SSE2; l < SIFT__SIMD_LEVELS; l++) {
        int gb = -1, ga = -1;
        memset(got, 0xa5, sizeof got);
        sift__load_cand_at(l, row, got, n, &gb, &ga);
        ck_assert_int_eq(gb, wb);
        ck_assert_int_eq(ga, wa);
        ck_assert_int_eq(memcmp(got, want, n * sizeof *got), 0);
        for (size_t i = 0; i < n; i++) {
            ck_assert_int_eq(got[i].id, (int32_t)i);
            ck_assert_int_eq(memcmp(&got[i].logit, &row[i], sizeof row[i]), 0);
        }
    }
}

START_TEST(test_the_row_load_gives_the_scalar_bytes_and_flags_at_every_level)
{
    static float row[300];
    uint64_t r = 12345;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 37)) {
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            row[i] = (float)((int64_t)(r >> 40) - (1 << 23)) * 1e-5f;
        }
        load_levels_agree(row, n);
        if (n)
            row[n / 2] = -0.0f;
        load_levels_agree(row, n);
        for (size_t i = 0; i < n && n <= 40; i++) {
            static const float bad[] = {NAN, INFINITY, -INFINITY};
            for (size_t b = 0; b < 3; b++) {
                float keep = row[i];
                row[i] = bad[b];
                load_levels_agree(row, n);
                row[i] = keep;
            }
        }
        for (size_t i = 0; i < n; i++)
            row[i] = -INFINITY;
        load_levels_agree(row, n);
    }
}
END_TEST

/* top_n_sigma's lane sums (core/kernels.c) give the scalar twin's
 * lanes bit for bit, its count and its maximum at every level: rows with
 * -inf tokens at every position of the first blocks (which shift the
 * lanes), lengths around multiples of 8, with and without a mean. */
START_TEST(test_the_lane_sums_give_the_scalar_lanes_at_every_level)
{
    static sift_candidate cd[300];
    uint64_t r = 777;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 23)) {
        for (int variant = 0; variant < 4; variant++) {
            for (size_t i = 0; i < n; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                cd[i].id = (int32_t)i;
                cd[i].logit = (float)((int64_t)(r >> 40) - (1 << 23)) * 3e-6f;
                if (variant == 1 && (r >> 20) % 7 == 0)
                    cd[i].logit = -INFINITY;
                if (variant == 2 && i == n / 3)
                    cd[i].logit = -INFINITY;
                if (variant == 3)
                    cd[i].logit = -INFINITY;
            }
            for (int with_mean = 0; with_mean < 2; with_mean++) {
                double mean = 0.37;
                double want[8] = {0}, got[8];
                size_t wc = 0, gc = 0;
                float wm = 0, gm = 0;
                sift__lane_sums_at(SIFT__SIMD_SCALAR, cd, n, with_mean ? &mean : NULL, want, &wc,
                                   &wm);
                for (int l = SIFT__SIMD_SSE2; l < SIFT__SIMD_LEVELS; l++) {
                    memset(got, 0, sizeof got);
                    sift__lane_sums_at(l, cd, n, with_mean ? &mean : NULL, got, &gc, &gm);
                    ck_assert_int_eq(memcmp(got, want, sizeof got), 0);
                    ck_assert_uint_eq(gc, wc);
                    ck_assert(gm == wm);
                }
            }
        }
    }
}
END_TEST

/* The definition's threshold (docs/samplers.md, "top_n_sigma"): the
 * finite logits in id order (the arrays below are), eight-lane sums. */
static double tns_definition(const sift_candidate *cd, size_t n, float nn, double *x, size_t *cnt,
                             double *s2)
{
    size_t c = 0;
    float m = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        m = cd[i].logit > m ? cd[i].logit : m;
        if (cd[i].logit > -INFINITY)
            x[c++] = (double)cd[i].logit;
    }
    *cnt = c;
    double mean = sift__dsum_idorder(x, c) / (double)c;
    for (size_t i = 0; i < c; i++)
        x[i] = (x[i] - mean) * (x[i] - mean);
    *s2 = sift__dsum_idorder(x, c);
    double var = *s2 / (double)c;
    return (double)m - (double)nn * sift__sqrt(var);
}

/* top_n_sigma's certified threshold (samplers/top_n_sigma.c) from every
 * level's moments: whenever it decides, every candidate's verdict
 * (double)l >= thr is the definition's. Rows: random scales and offsets,
 * -inf mixed in, ties, all equal, huge and tiny magnitudes, and two
 * families built onto the boundary: dyadic rows whose threshold is a
 * float that tokens hold ({B, B + 1, B + 2} with counts k, 6k, k and
 * n = 2: thr = B + 1 exactly; exact sums for B = 0, rounded ones for B =
 * 2^20), and rows whose token t is moved onto the float at or above the
 * definition's threshold until it stays there. The fallback must be
 * taken on some of those and the certificate must decide most others. */
START_TEST(test_the_certified_top_n_sigma_threshold_gives_the_definitions_verdicts)
{
    enum { NMAX = 4096 };
    static sift_candidate cd[NMAX];
    static double x[NMAX];
    uint64_t r = 4242;
    long decided = 0, fell = 0, cases = 0, fell_by[7] = {0};
    static const float ns[] = {1.0f, 2.0f, 0.5f, 3.0f, 1e-6f, 1e6f, 0.1f};
    for (int it = 0; it < 3000; it++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = 2 + (size_t)((r >> 33) % (it < 2000 ? 300 : NMAX - 2));
        int shape = (int)((r >> 20) % 7);
        float nn = ns[(r >> 12) % 7];
        double scale = ldexp(1.0, (int)((r >> 40) % 40) - 20), off = 0.0;
        if (shape == 5)
            off = ldexp(1.0, (int)((r >> 44) % 30));
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            double v = ((double)(r >> 11) * 0x1p-53 - 0.5) * scale + off;
            cd[i].id = (int32_t)i;
            cd[i].logit = shape == 1 && (r >> 8) % 5 == 0 ? -INFINITY
                          : shape == 2                    ? (float)((r >> 13) % 4)
                          : shape == 3                    ? 7.25f
                          : shape == 4                    ? (float)(v * 1e30)
                                                          : (float)v;
        }
        if (shape == 6) {
            /* {B, B + 1, B + 2} x (k, 6k, k), n = 2 */
            size_t k = n / 8 > 0 ? n / 8 : 1;
            float B = (r >> 5) & 1 ? 1048576.0f : 0.0f;
            n = 8 * k;
            for (size_t i = 0; i < n; i++) {
                cd[i].id = (int32_t)i;
                cd[i].logit = i < k ? B : i < 7 * k ? B + 1.0f : B + 2.0f;
            }
            nn = 2.0f;
        }
        size_t c;
        double s2;
        if (shape == 0 && n > 2) {
            /* token 0 onto the float at or above the threshold */
            for (int round = 0; round < 8; round++) {
                double t = tns_definition(cd, n, nn, x, &c, &s2);
                float f = (float)t;
                cd[0].logit = (double)f < t ? nextafterf(f, INFINITY) : f;
            }
        }
        double want = tns_definition(cd, n, nn, x, &c, &s2);
        if (c < 2)
            continue;
        static float rowf[NMAX];
        for (size_t i = 0; i < n; i++)
            rowf[i] = cd[i].logit;
        for (int l = SIFT__SIMD_SCALAR; l < 2 * SIFT__SIMD_LEVELS; l++) {
            /* the candidates' moments, then the row's (sift__moments_row) */
            sift__moments mo;
            if (l < SIFT__SIMD_LEVELS)
                sift__moments_of_at(l, cd, n, &mo);
            else
                sift__moments_row_at(l - SIFT__SIMD_LEVELS, rowf, n, &mo);
            ck_assert_uint_eq(mo.count, c);
            /* the interval holds the definition's sum, and is not wide
             * on ordinary rows */
            double lo, hi;
            ck_assert(sift__tns_bounds(&mo, n, &lo, &hi));
            ck_assert_msg(lo <= s2 && s2 <= hi, "it %d shape %d n %zu level %d: %a not in [%a, %a]",
                          it, shape, n, l, s2, lo, hi);
            if (s2 > 0 && (shape == 0 || shape == 1 || shape == 4))
                ck_assert_msg(hi - lo <= s2 * 1e-9, "it %d: [%a, %a] around %a", it, lo, hi, s2);
            double got;
            cases++;
            if (!sift__tns_threshold(&mo, n, nn, &got)) {
                fell++;
                fell_by[shape]++;
                continue;
            }
            decided++;
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(((double)cd[i].logit >= got) == ((double)cd[i].logit >= want),
                              "it %d shape %d n %zu level %d: token %zu (%a): thr %a, want %a", it,
                              shape, n, l, i, (double)cd[i].logit, got, want);
        }
    }
    fprintf(stderr,
            "top_n_sigma threshold: %ld cases, %ld decided, %ld fell back (all equal %ld, large "
            "offsets %ld, on the boundary %ld)\n",
            cases, decided, fell, fell_by[3], fell_by[5], fell_by[6]);
    /* the rows on a float boundary fall back; ordinary rows almost never */
    ck_assert_int_gt(fell_by[6], 100);
    ck_assert_int_lt(fell_by[0] + fell_by[1] + fell_by[2] + fell_by[4], cases / 100);
}
END_TEST

/* The stage takes the certified threshold on an ordinary row and the
 * definition's sums on a row of one value (whose interval is as wide as
 * its spread is small): n_tns_exact counts the second step only (the
 * chain's sample; sift_chain_survivors shows the kept set), and both
 * keep the definition's set (every token of the one-value row). */
START_TEST(test_top_n_sigma_falls_back_to_the_definition_only_where_the_bound_cannot_tell)
{
    enum { NV = 5000 };
    static float row[NV];
    sift_chain_params p;
    sift_chain_params_init(&p);
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_n_sigma(c, 1.0f, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, &err), SIFT_OK);
    int32_t tok;
    uint64_t r = 5;
    for (int i = 0; i < NV; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        row[i] = (float)((double)(r >> 11) * 0x1p-53 * 4.0);
    }
    static sift_candidate out[NV];
    size_t n = 0;
    ck_assert_int_eq(sift_chain_survivors(c, row, NV, 1, out, NV, &n, &err), SIFT_OK);
    ck_assert(n > 0 && n < NV);
    ck_assert_int_eq(sift_chain_sample(c, row, NV, &tok, &err), SIFT_OK);
    ck_assert_uint_eq(c->n_tns_exact, 0);
    for (int i = 0; i < NV; i++)
        row[i] = 1.5f;
    ck_assert_int_eq(sift_chain_survivors(c, row, NV, 1, out, NV, &n, &err), SIFT_OK);
    ck_assert_uint_eq(n, NV);
    ck_assert_int_eq(sift_chain_sample(c, row, NV, &tok, &err), SIFT_OK);
    ck_assert_uint_eq(c->n_tns_exact, 1);
    sift_chain_free(c);
}
END_TEST

/* top_n_sigma first in a full pass builds its array from the row
 * (tns_apply_row): where it does not decline, the array is the one that
 * loading the row and applying the stage leaves (sift__chain_run_stages),
 * bit for bit: ids, logits, length, order, dense. Rows: peaked, coarse
 * (ties), -inf mixed in, -0 and +0 mixed in, a fence at the threshold
 * (one token on the float f at or above it, one on the float below f,
 * so that moving the scan's threshold one float either way fails),
 * rows of one value, and rows it must decline: a NaN or +inf (the load
 * names it), fewer than two finite logits. (A threshold that rounds up
 * to a zero lies within the smallest subnormal of 0, closer than the
 * bound can tell: those rows fall back.) Run
 * under every SIFT_SIMD cap by check_simd_whole. */
START_TEST(test_top_n_sigma_first_builds_from_the_row_what_the_load_and_its_apply_leave)
{
    enum { NV = 40000 };
    static float row[NV];
    static sift_candidate got[NV];
    sift_chain_params p;
    sift_chain_params_init(&p);
    static const float ns[] = {1.0f, 0.5f, 3.0f, 0.01f};
    uint64_t r = 99;
    long built = 0, declined = 0, must_decline = 0, ordinary = 0, ordinary_declined = 0;
    long fenced = 0, fenced_built = 0;
    for (int it = 0; it < 400; it++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int32_t nv = 2 + (int32_t)((r >> 33) % (it < 200 ? 3000 : NV - 2));
        int shape = (int)((r >> 20) % 8);
        float nn = ns[(r >> 12) % 4];
        for (int32_t i = 0; i < nv; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(r >> 11) * 0x1p-53;
            float v = (float)(4.0 * (u - 0.5));
            if (shape == 1 && (r >> 7) % 97 == 0)
                v += 12.0f; /* peaked */
            if (shape == 2)
                v = (float)(int)(v * 8.0f) / 8.0f; /* coarse: ties, dyadic */
            if (shape == 3 && (r >> 9) % 4 == 0)
                v = -INFINITY;
            if (shape == 4 && (r >> 9) % 3 == 0)
                v = (r >> 10) % 2 ? -0.0f : 0.0f;
            row[i] = v;
        }
        int decline = 0;
        if (shape == 5) {
            /* one value: the bound is as wide as the spread is small, and
             * decides only where n times it stays within an ulp */
            for (int32_t i = 0; i < nv; i++)
                row[i] = 2.5f;
        } else if (shape == 6) {
            row[(r >> 3) % (uint64_t)nv] = (r >> 2) % 2 ? NAN : INFINITY;
            decline = 1;
        } else if (shape == 7) {
            for (int32_t i = 1; i < nv; i++)
                row[i] = -INFINITY;
            decline = 1;
        }
        static sift_candidate cd[NV];
        static double x[NV];
        size_t cnt;
        double s2;
        if (shape == 0 && nv > 2) {
            /* the fence: token 0 onto the float f at or above the
             * threshold (kept), token 1 onto the float below f (dropped) */
            float f = 0.0f;
            for (int round = 0; round < 8; round++) {
                for (int32_t i = 0; i < nv; i++) {
                    cd[i].id = i;
                    cd[i].logit = row[i];
                }
                double t = tns_definition(cd, (size_t)nv, nn, x, &cnt, &s2);
                f = (float)t;
                f = (double)f < t ? nextafterf(f, INFINITY) : f;
                row[0] = f;
                row[1] = nextafterf(f, -INFINITY);
            }
            for (int32_t i = 0; i < nv; i++)
                cd[i].logit = row[i];
            double t = tns_definition(cd, (size_t)nv, nn, x, &cnt, &s2);
            fenced += (double)row[0] >= t && !((double)row[1] >= t);
        }
        sift_chain *c = NULL;
        sift_error err;
        ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_n_sigma(c, nn, &err), SIFT_OK);
        ck_assert_int_eq(sift__ws_reserve(&c->ws, &c->al, (size_t)nv, &err), SIFT_OK);
        const sift__stage_ops *ops = c->stages[0]->ops;
        ck_assert_ptr_nonnull(ops->apply_row);
        sift__ctx ctx;
        sift__ctx_init(c, &ctx, nv, &err);
        sift__arr a;
        int took = ops->apply_row(c->stages[0], &ctx, row, nv, &a);
        must_decline += decline;
        int plain = shape == 1 || shape == 3 || shape == 4; /* no boundary built */
        ordinary += plain;
        ordinary_declined += plain && !took;
        if (decline)
            ck_assert_msg(!took, "it %d shape %d: built an array it must decline", it, shape);
        if (!took) {
            declined++;
            sift_chain_free(c);
            continue;
        }
        built++;
        fenced_built += shape == 0;
        ck_assert_int_eq(a.V, nv);
        size_t n = a.n;
        int order = a.order, dense = a.dense;
        memcpy(got, a.c, n * sizeof *got);
        sift__arr b;
        ck_assert_int_eq(sift__chain_run_stages(c, row, nv, 1, &b, &err), SIFT_OK);
        ck_assert_msg(b.n == n && b.order == order && b.dense == dense && b.V == nv,
                      "it %d shape %d nv %d: n %zu/%zu order %d/%d dense %d/%d", it, shape, (int)nv,
                      n, b.n, order, (int)b.order, dense, (int)b.dense);
        ck_assert_msg(memcmp(got, b.c, n * sizeof *got) == 0, "it %d shape %d: arrays differ", it,
                      shape);
        sift_chain_free(c);
    }
    fprintf(stderr,
            "top_n_sigma from the row: %ld built, %ld declined (%ld had to; %ld of %ld ordinary "
            "rows); %ld rows fenced at the threshold (%ld built)\n",
            built, declined, must_decline, ordinary_declined, ordinary, fenced, fenced_built);
    ck_assert_int_gt(built, 200);
    ck_assert_int_gt(fenced_built, 20);
    ck_assert_int_lt(ordinary_declined * 50, ordinary);
}
END_TEST

/* A candidate array for the typical kernels: ids shuffled, logits from a
 * few distinct values (ties) or spread, with -inf, -0 and +0 mixed in. */
static void typ_cands(sift_candidate *cd, size_t n, uint64_t *r, int variant)
{
    for (size_t i = 0; i < n; i++) {
        *r = *r * 6364136223846793005ull + 1442695040888963407ull;
        cd[i].id = (int32_t)(n - i);
        cd[i].logit = (float)((int64_t)(*r >> 40) - (1 << 23)) * 1e-6f;
        if (variant == 1)
            cd[i].logit = (float)((*r >> 30) % 5) * 0.5f;
        if (variant == 2 && (*r >> 20) % 5 == 0)
            cd[i].logit = -INFINITY;
        if (variant == 3 && (*r >> 20) % 3 == 0)
            cd[i].logit = (*r >> 25) % 2 ? -0.0f : 0.0f;
    }
}

/* typical's score buckets (core/kernels.c) are the scalar twin's at every
 * level: lengths around multiples of 16, ties, -inf (score +inf, the top
 * bucket), -0 and +0, and H placed so that scores straddle zero and the
 * clamp. */
START_TEST(test_the_score_buckets_give_the_scalar_buckets_at_every_level)
{
    static sift_candidate cd[400];
    static uint32_t want[400], got[400];
    uint64_t r = 4242;
    for (size_t n = 0; n <= 400; n += (n < 40 ? 1 : 29)) {
        for (int variant = 0; variant < 4; variant++) {
            typ_cands(cd, n, &r, variant);
            static const double Hs[] = {0.0, 3.0, 8.375, 70.0};
            for (size_t h = 0; h < 4; h++) {
                sift__score_buckets_at(SIFT__SIMD_SCALAR, cd, n, 8.0f, 9.5, Hs[h], 64.0, 4095.0,
                                       want);
                for (int l = SIFT__SIMD_SSE2; l < SIFT__SIMD_LEVELS; l++) {
                    memset(got, 0xff, sizeof got);
                    sift__score_buckets_at(l, cd, n, 8.0f, 9.5, Hs[h], 64.0, 4095.0, got);
                    ck_assert_int_eq(memcmp(got, want, n * sizeof *got), 0);
                }
            }
        }
    }
}
END_TEST

/* The bucket search finds the same next index at every level, from every
 * start, with the bucket absent, at the ends and in long runs. */
START_TEST(test_the_bucket_search_finds_the_scalar_index_at_every_level)
{
    static uint32_t bk[300];
    uint64_t r = 99;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 31)) {
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            bk[i] = (uint32_t)((r >> 33) % 40);
        }
        for (uint32_t b = 0; b < 42; b += 3)
            for (size_t s = 0; s <= n; s++) {
                size_t want = sift__find_eq_u32_at(SIFT__SIMD_SCALAR, bk, s, n, b);
                for (int l = SIFT__SIMD_SSE2; l < SIFT__SIMD_LEVELS; l++)
                    ck_assert_uint_eq(sift__find_eq_u32_at(l, bk, s, n, b), want);
            }
    }
}
END_TEST

/* XTC's search: weights of every size (above 2^63 too, where a signed
 * compare would go wrong), thresholds at 0, at a weight, between two and
 * at UINT64_MAX, from every start. */
START_TEST(test_the_weight_search_finds_the_scalar_index_at_every_level)
{
    static uint64_t w[300];
    static const uint64_t big[] = {
        0,         1, (uint64_t)1 << 62, ((uint64_t)1 << 63) - 1, (uint64_t)1 << 63, UINT64_MAX - 1,
        UINT64_MAX};
    uint64_t r = 7;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 29)) {
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            w[i] = (r >> 60) < 3 ? big[(r >> 8) % 7] : (r >> 40) % 1000;
        }
        for (int ti = 0; ti < 16; ti++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t t = ti < 7 ? big[ti] : n && ti < 11 ? w[(r >> 33) % n] : (r >> 40) % 1100;
            for (size_t s = 0; s <= n; s++) {
                size_t want = sift__find_w_ge_at(SIFT__SIMD_SCALAR, w, s, n, t);
                ck_assert(want == n || (want >= s && w[want] >= t));
                for (int l = SIFT__SIMD_SSE2; l < SIFT__SIMD_LEVELS; l++)
                    ck_assert_uint_eq(sift__find_w_ge_at(l, w, s, n, t), want);
            }
        }
    }
}
END_TEST

/* keep_eq for the test below: keeps the ids divisible by 3, and checks
 * that it is called in index order (ids fall along the array). */
typedef struct keep_probe {
    int32_t last;
    int calls, out_of_order;
} keep_probe;

static int keep_third(const sift_candidate *x, void *arg)
{
    keep_probe *p = arg;
    p->out_of_order |= p->calls > 0 && x->id >= p->last;
    p->last = x->id;
    p->calls++;
    return x->id % 3 == 0;
}

/* The compaction by bucket keeps the scalar twin's candidates, in its
 * order, calling keep_eq on the same ones in index order, at every
 * level: every bucket below, equal to or above the cut, runs of the cut's
 * bucket, lengths around multiples of 8. */
START_TEST(test_the_keep_below_compaction_keeps_the_scalar_set_at_every_level)
{
    static sift_candidate orig[300], want[300], got[300];
    static uint32_t bk[300];
    uint64_t r = 31337;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 17)) {
        for (int variant = 0; variant < 3; variant++) {
            typ_cands(orig, n, &r, 0);
            for (size_t i = 0; i < n; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                bk[i] = variant == 0 ? (uint32_t)((r >> 33) % 6) : variant == 1 ? 3u : 2u + (i % 3);
            }
            for (uint32_t cut = 0; cut < 7; cut++) {
                keep_probe pw = {0, 0, 0}, pg = {0, 0, 0};
                memcpy(want, orig, n * sizeof *orig);
                size_t kw =
                    sift__keep_below_at(SIFT__SIMD_SCALAR, want, bk, n, cut, keep_third, &pw);
                for (int l = SIFT__SIMD_SSE2; l < SIFT__SIMD_LEVELS; l++) {
                    memcpy(got, orig, n * sizeof *orig);
                    pg = (keep_probe){0, 0, 0};
                    size_t kg = sift__keep_below_at(l, got, bk, n, cut, keep_third, &pg);
                    ck_assert_uint_eq(kg, kw);
                    ck_assert_int_eq(memcmp(got, want, kw * sizeof *got), 0);
                    ck_assert_int_eq(pg.calls, pw.calls);
                    ck_assert_int_eq(pg.out_of_order, 0);
                }
            }
        }
    }
}
END_TEST

/* The same compaction moving weights: at every level the candidates
 * are those sift__keep_below keeps, each with its own weight (typ_cands
 * gives c[i] the id n - i), and the sum is the kept weights' exact sum, on
 * weights up to 2^62 (the 32-bit halves carry into each other). */
START_TEST(test_the_keep_below_compaction_moves_the_weights_at_every_level)
{
    static sift_candidate orig[300], want[300], got[300];
    static uint32_t bk[300];
    static uint64_t wo[300], wg[300];
    uint64_t r = 4242;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 17)) {
        for (int variant = 0; variant < 3; variant++) {
            typ_cands(orig, n, &r, 0);
            for (size_t i = 0; i < n; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                bk[i] = variant == 0 ? (uint32_t)((r >> 33) % 6) : variant == 1 ? 3u : 2u + (i % 3);
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                wo[i] = variant == 2 ? (1ull << 62) - (i & 1) : r >> 2;
            }
            for (uint32_t cut = 0; cut < 7; cut++) {
                keep_probe pw = {0, 0, 0};
                memcpy(want, orig, n * sizeof *orig);
                size_t kw =
                    sift__keep_below_at(SIFT__SIMD_SCALAR, want, bk, n, cut, keep_third, &pw);
                sift__u128 sum = {0, 0};
                for (size_t i = 0; i < kw; i++)
                    sum = sift__u128_add64(sum, wo[n - (size_t)want[i].id]);
                for (int l = SIFT__SIMD_SCALAR; l < SIFT__SIMD_LEVELS; l++) {
                    keep_probe pg = {0, 0, 0};
                    sift__u128 kept = {1, 1};
                    memcpy(got, orig, n * sizeof *orig);
                    memcpy(wg, wo, n * sizeof *wo);
                    size_t kg =
                        sift__keep_below_w_at(l, got, wg, bk, n, cut, keep_third, &pg, &kept);
                    ck_assert_uint_eq(kg, kw);
                    ck_assert_int_eq(memcmp(got, want, kw * sizeof *got), 0);
                    for (size_t i = 0; i < kg; i++)
                        ck_assert_uint_eq(wg[i], wo[n - (size_t)got[i].id]);
                    ck_assert_uint_eq(kept.lo, sum.lo);
                    ck_assert_uint_eq(kept.hi, sum.hi);
                    ck_assert_int_eq(pg.calls, pw.calls);
                    ck_assert_int_eq(pg.out_of_order, 0);
                }
            }
        }
    }
}
END_TEST

/* top_n_sigma's cut keeps the scalar twin's candidates in its order at
 * every level: thresholds at a logit (ties, a float's exact double),
 * between two, beyond all, NaN; -inf and -0/+0 logits. */
START_TEST(test_the_logit_cut_keeps_the_scalar_set_at_every_level)
{
    static sift_candidate orig[300], want[300], got[300];
    uint64_t r = 5150;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 19)) {
        for (int variant = 0; variant < 4; variant++) {
            typ_cands(orig, n, &r, variant);
            double thrs[6] = {0.0, -0.0, 1e-7, -INFINITY, INFINITY, NAN};
            if (n)
                thrs[2] = (double)orig[n / 2].logit;
            for (int t = 0; t < 6; t++) {
                memcpy(want, orig, n * sizeof *orig);
                size_t kw = sift__keep_logit_ge_at(SIFT__SIMD_SCALAR, want, n, thrs[t]);
                for (int l = SIFT__SIMD_SSE2; l < SIFT__SIMD_LEVELS; l++) {
                    memcpy(got, orig, n * sizeof *orig);
                    ck_assert_uint_eq(sift__keep_logit_ge_at(l, got, n, thrs[t]), kw);
                    ck_assert_int_eq(memcmp(got, want, kw * sizeof *got), 0);
                }
            }
        }
    }
}
END_TEST

/* min_p's count is the plain loop's at every level: the thresholds of
 * the test above, as floats, and arrays with NaN logits (an ordered
 * compare counts none: a NaN threshold or logit). */
START_TEST(test_the_logit_count_is_the_plain_loops_at_every_level)
{
    static sift_candidate orig[300];
    uint64_t r = 5151;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 19)) {
        for (int variant = 0; variant < 5; variant++) {
            typ_cands(orig, n, &r, variant < 4 ? variant : 1);
            for (size_t i = 0; variant == 4 && i < n; i += 3)
                orig[i].logit = NAN;
            float thrs[6] = {0.0f, -0.0f, 1e-7f, -INFINITY, INFINITY, NAN};
            if (n)
                thrs[2] = orig[n / 2].logit;
            for (int t = 0; t < 6; t++) {
                size_t kw = 0;
                for (size_t i = 0; i < n; i++)
                    kw += orig[i].logit >= thrs[t];
                for (int l = SIFT__SIMD_SCALAR; l < SIFT__SIMD_LEVELS; l++)
                    ck_assert_uint_eq(sift__count_logit_ge_at(l, orig, n, thrs[t]), kw);
            }
        }
    }
}
END_TEST

/* mirostat v2's cut by weight (core/kernels.c) keeps, at every level, the
 * candidates with w >= ws in order with their weights, and their sum: the
 * same as a plain loop, for thresholds at a weight (ties), between two,
 * 0, 2^62 (the largest weight), above every weight and above 2^63 (an
 * unsigned order), on lengths around multiples of 4 and 8. */
START_TEST(test_the_weight_cut_keeps_the_plain_set_and_sum_at_every_level)
{
    static sift_candidate orig[300], want[300], got[300];
    static uint64_t wo[300], ww[300], wg[300];
    uint64_t r = 6160;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 23)) {
        for (int variant = 0; variant < 3; variant++) {
            typ_cands(orig, n, &r, 0);
            for (size_t i = 0; i < n; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                wo[i] = variant == 0 ? r >> 2 : (variant == 1 ? (r >> 60) << 58 : r >> 40);
                if (i == n / 3)
                    wo[i] = (uint64_t)1 << 62;
            }
            uint64_t wss[7] = {0,        1, (uint64_t)1 << 62, ((uint64_t)1 << 62) + 1,
                               1u << 23, 0, UINT64_MAX - 5};
            if (n)
                wss[5] = wo[n / 2];
            for (int t = 0; t < 7; t++) {
                size_t kw = 0;
                sift__u128 sw = {0, 0};
                for (size_t i = 0; i < n; i++)
                    if (wo[i] >= wss[t]) {
                        want[kw] = orig[i];
                        ww[kw++] = wo[i];
                        sw = sift__u128_add64(sw, wo[i]);
                    }
                for (int l = SIFT__SIMD_SCALAR; l < SIFT__SIMD_LEVELS; l++) {
                    memcpy(got, orig, n * sizeof *orig);
                    memcpy(wg, wo, n * sizeof *wo);
                    sift__u128 sg = {1, 1};
                    ck_assert_uint_eq(sift__keep_w_ge_at(l, got, wg, n, wss[t], &sg), kw);
                    ck_assert_int_eq(memcmp(got, want, kw * sizeof *got), 0);
                    ck_assert_int_eq(memcmp(wg, ww, kw * sizeof *wg), 0);
                    ck_assert(sg.lo == sw.lo && sg.hi == sw.hi);
                }
            }
        }
    }
}
END_TEST

/* The drawn token's place: the first candidate with the id at every
 * level, and n for an absent id, also when a logit's bits equal the id
 * (the kernels compare ids only). */
START_TEST(test_the_id_search_finds_the_first_match_at_every_level)
{
    static sift_candidate cd[200];
    uint64_t r = 7170;
    for (size_t n = 0; n <= 200; n += (n < 40 ? 1 : 13)) {
        typ_cands(cd, n, &r, 0);
        for (size_t i = 0; i < n; i++)
            cd[i].id = (int32_t)(3 * i + 1);
        int32_t ids[4] = {1, (int32_t)(3 * (n / 2) + 1), (int32_t)(3 * n - 2), 2};
        for (int q = 0; q < 4; q++) {
            /* a logit whose bits are the searched id, before it */
            if (n > 1) {
                uint32_t b = (uint32_t)ids[q];
                memcpy(&cd[0].logit, &b, sizeof b);
            }
            size_t want = 0;
            while (want < n && cd[want].id != ids[q])
                want++;
            for (int l = SIFT__SIMD_SCALAR; l < SIFT__SIMD_LEVELS; l++)
                ck_assert_uint_eq(sift__find_id_at(l, cd, n, ids[q]), want);
        }
    }
}
END_TEST

/* The filtering load keeps, at every level, the tokens the definition
 * keeps (not <= t: above it, NaN, +inf), in id order with their bits,
 * and flags exactly the rows where one of them is a NaN or +inf: ties
 * at t, -0 and +0 around a zero t, -inf, t = -inf and t = -FLT_MAX,
 * lengths around the vector widths, kept shares from none to all. */
START_TEST(test_the_filtering_load_keeps_the_definitions_tokens_at_every_level)
{
    static float row[700];
    static sift_candidate got[700], want[700];
    uint64_t r = 9310;
    for (size_t n = 0; n <= 700; n += (n < 70 ? 1 : 37)) {
        for (int variant = 0; variant < 6; variant++) {
            float t = variant == 4 ? -INFINITY : variant == 5 ? -FLT_MAX : 0.0f;
            for (size_t i = 0; i < n; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                unsigned u = (unsigned)(r >> 40) % 16;
                float v = (float)((int)((r >> 20) % 9) - 4) * 0.5f; /* ties, on t too */
                row[i] = u == 0                   ? -INFINITY
                         : u == 1                 ? -0.0f
                         : u == 2 && variant == 1 ? NAN
                         : u == 3 && variant == 2 ? INFINITY
                         : variant == 3           ? v - 3.0f
                                                  : v;
            }
            size_t wm = 0;
            int wbad = 0;
            for (size_t i = 0; i < n; i++) {
                if (!(row[i] <= t)) {
                    want[wm].id = (int32_t)i;
                    want[wm].logit = row[i];
                    wm++;
                    wbad |= !(row[i] < INFINITY);
                }
            }
            for (int l = SIFT__SIMD_SCALAR; l < SIFT__SIMD_LEVELS; l++) {
                int bad = -1;
                size_t m = sift__load_above_at(l, row, n, t, got, &bad);
                ck_assert_msg(m == wm && bad == wbad,
                              "level %d, n %zu, variant %d: %zu/%d vs %zu/%d", l, n, variant, m,
                              bad, wm, wbad);
                ck_assert_msg(memcmp(got, want, m * sizeof *got) == 0,
                              "level %d, n %zu, variant %d", l, n, variant);
            }
        }
    }
}
END_TEST

/* typical's band pass gives the definition's sums, count and list at
 * every level: buckets below, inside and above the band (lo = 0, lo = hi,
 * the last bucket), weights up to 2^62, lengths around the widths. */
START_TEST(test_the_bucket_band_gives_the_definitions_sums_and_list_at_every_level)
{
    static uint32_t bk[600];
    static uint64_t w[600], bidx[600], bw[600];
    uint64_t r = 9410;
    for (size_t n = 0; n <= 600; n += (n < 40 ? 1 : 29)) {
        for (int variant = 0; variant < 4; variant++) {
            uint32_t lo = variant == 0 ? 0 : variant == 1 ? 7 : variant == 2 ? 9 : 4090;
            uint32_t hi = variant == 1 ? 7 : variant == 3 ? 4095 : lo + 5;
            for (size_t i = 0; i < n; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                bk[i] = variant == 3 ? 4080 + (uint32_t)(r >> 60) : (uint32_t)(r >> 59) % 20;
                w[i] = (r >> 33) % 3 == 0 ? (uint64_t)1 << 62 : (r ^ (r << 17)) >> 2;
            }
            sift__u128 mass = {0, 0};
            size_t below = 0, m = 0;
            for (size_t i = 0; i < n; i++) {
                if (bk[i] < lo) {
                    mass = sift__u128_add64(mass, w[i]);
                    below++;
                }
                m += bk[i] >= lo && bk[i] <= hi;
            }
            for (int l = SIFT__SIMD_SCALAR; l < SIFT__SIMD_LEVELS; l++) {
                sift__band_sums o;
                sift__bucket_band_at(l, bk, w, n, lo, hi, &o, bidx, bw);
                sift__u128 got = sift__u128_halves(o.lo, o.hi);
                ck_assert_msg(sift__u128_cmp(got, mass) == 0 && o.below == below && o.m == m,
                              "level %d, n %zu, variant %d", l, n, variant);
                size_t j = 0;
                for (size_t i = 0; i < n; i++) {
                    if (bk[i] >= lo && bk[i] <= hi) {
                        ck_assert_msg(bidx[j] == i && bw[j] == w[i], "level %d, n %zu, entry %zu",
                                      l, n, j);
                        j++;
                    }
                }
            }
        }
    }
}
END_TEST

/* The logits' copy gives the candidates' logit bits at every level:
 * NaN payloads, -0, infinities, lengths around the vector widths. */
START_TEST(test_the_logits_copy_gives_the_logit_bits_at_every_level)
{
    static sift_candidate cd[300];
    static float got[300], want[300];
    uint64_t r = 9190;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 23)) {
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t b = (uint32_t)(r >> 32);
            cd[i].id = (int32_t)(r >> 7);
            memcpy(&cd[i].logit, &b, sizeof b); /* any bits: NaNs, -0, infinities */
            if (i % 7 == 3)
                cd[i].logit = -0.0f;
            memcpy(&want[i], &cd[i].logit, sizeof want[i]);
        }
        for (int l = SIFT__SIMD_SCALAR; l < SIFT__SIMD_LEVELS; l++) {
            memset(got, 0x5a, sizeof got);
            sift__cand_logits_at(l, cd, n, got);
            ck_assert_msg(memcmp(got, want, n * sizeof *got) == 0, "level %d, n %zu", l, n);
            if (n < 300) { /* nothing written past n */
                uint32_t after;
                memcpy(&after, &got[n], sizeof after);
                ck_assert_uint_eq(after, 0x5a5a5a5au);
            }
        }
    }
}
END_TEST

/* The search for the largest logit's first place agrees with a plain
 * loop at every level from every start: ties, -0 equal to +0, -inf,
 * and an id whose bits equal the logit's (logits only are compared). */
START_TEST(test_the_logit_search_finds_the_first_equal_logit_at_every_level)
{
    static sift_candidate cd[160];
    uint64_t r = 8180;
    for (size_t n = 0; n <= 160; n += (n < 40 ? 1 : 17)) {
        for (int variant = 0; variant < 4; variant++) {
            typ_cands(cd, n, &r, variant);
            float ms[4] = {0.0f, -0.0f, -INFINITY, 1.0f};
            if (n)
                ms[3] = cd[n - 1].logit;
            if (n > 2)
                memcpy(&cd[1].id, &ms[3], sizeof cd[1].id);
            for (int q = 0; q < 4; q++)
                for (size_t from = 0; from <= n; from += 1 + n / 7) {
                    size_t want = from;
                    while (want < n && !(cd[want].logit == ms[q]))
                        want++;
                    for (int l = SIFT__SIMD_SCALAR; l < SIFT__SIMD_LEVELS; l++)
                        ck_assert_uint_eq(sift__find_logit_eq_at(l, cd, from, n, ms[q]), want);
                }
        }
    }
}
END_TEST

/* The copy of the candidates at or above a canonical key (mirostat v1's,
 * and in place top_p's and top_k's), at the level this process runs
 * (check_simd_env.sh runs it capped to scalar) and at every level by
 * sift__keep_ge_into_at, equals a plain loop over
 * sift__ckey, into another buffer and in place: keys of present
 * candidates (ties by logit decided by id), -0 and +0, -inf, 0, the
 * largest key, and a block of 64 alternating -0 and +0 logits (the
 * AVX-512 form's length) cut at +0 with id 31. */
START_TEST(test_the_key_cut_copies_the_plain_set_in_and_out_of_place)
{
    static sift_candidate cd[300], want[300], got[300];
    uint64_t r = 9190;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 19)) {
        for (int variant = 0; variant < 5; variant++) {
            typ_cands(cd, n, &r, variant < 4 ? variant : 0);
            if (variant == 4)
                for (size_t i = 0; i < n; i++) {
                    cd[i].id = (int32_t)i;
                    cd[i].logit = i % 2 ? -0.0f : 0.0f;
                }
            uint64_t cuts[5] = {0, UINT64_MAX, 0, 0, sift__ckey(0.0f, 31)};
            if (n) {
                cuts[2] = sift__ckey(cd[n / 2].logit, cd[n / 2].id);
                cuts[3] = sift__ckey(cd[n / 5].logit, cd[n / 5].id);
            }
            for (int q = 0; q < 5; q++) {
                size_t kw = 0;
                for (size_t i = 0; i < n; i++)
                    if (sift__ckey(cd[i].logit, cd[i].id) >= cuts[q])
                        want[kw++] = cd[i];
                ck_assert_uint_eq(sift__keep_ge_into(cd, n, cuts[q], got), kw);
                ck_assert_int_eq(memcmp(got, want, kw * sizeof *got), 0);
                memcpy(got, cd, n * sizeof *cd);
                ck_assert_uint_eq(sift__keep_ge_into(got, n, cuts[q], got), kw);
                ck_assert_int_eq(memcmp(got, want, kw * sizeof *got), 0);
                for (int l = SIFT__SIMD_SCALAR; l < SIFT__SIMD_LEVELS; l++) {
                    ck_assert_uint_eq(sift__keep_ge_into_at(l, cd, n, cuts[q], got), kw);
                    ck_assert_int_eq(memcmp(got, want, kw * sizeof *got), 0);
                    memcpy(got, cd, n * sizeof *cd);
                    ck_assert_uint_eq(sift__keep_ge_into_at(l, got, n, cuts[q], got), kw);
                    ck_assert_int_eq(memcmp(got, want, kw * sizeof *got), 0);
                }
            }
        }
    }
}
END_TEST

/* qsort's comparison for canonical order (the largest key first). */
static int canon_cmp_for_test(const void *x, const void *y)
{
    const sift_candidate *a = x, *b = y;
    return sift__canon_before(a, b) ? -1 : sift__canon_before(b, a);
}

/* The cuts that move weights (top_p's, for the dist after it: exact
 * weights, and float ones after its float cut) keep the plain loop's
 * candidates in order, each with its own weight, and sum the kept
 * weights (exactly; the float ones in double within the roundings of at
 * most n additions a term), at every level: the cases of the test above
 * on an array in id order (the compaction path) and in canonical order
 * (a prefix), weights up to 2^62, float weights over 40 binades. */
START_TEST(test_the_key_cut_moves_the_weights_at_every_level)
{
    static sift_candidate cd[300], want[300], got[300];
    static uint64_t wo[300], wg[300];
    static float vo[300], vw[300], vg[300];
    uint64_t r = 7717;
    for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 19)) {
        for (int variant = 0; variant < 6; variant++) {
            typ_cands(cd, n, &r, variant < 4 ? variant : 0);
            for (size_t i = 0; i < n; i++) {
                if (variant == 4)
                    cd[i].logit = i % 2 ? -0.0f : 0.0f;
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                wo[i] = variant == 2 ? (1ull << 62) - (i & 1) : r >> 2;
                vo[i] = variant == 2 ? 1.0f : ldexpf((float)(r >> 40) + 1.0f, -(int)(r % 40) - 24);
            }
            if (variant == 5) /* ids stay n - i: the weights follow them */
                qsort(cd, n, sizeof *cd, canon_cmp_for_test);
            uint64_t cuts[5] = {0, UINT64_MAX, 0, 0, sift__ckey(0.0f, 31)};
            if (n) {
                cuts[2] = sift__ckey(cd[n / 2].logit, cd[n / 2].id);
                cuts[3] = sift__ckey(cd[n / 5].logit, cd[n / 5].id);
            }
            for (int q = 0; q < 5; q++) {
                size_t kw = 0;
                sift__u128 sum = {0, 0};
                long double fsum = 0.0L;
                for (size_t i = 0; i < n; i++)
                    if (sift__ckey(cd[i].logit, cd[i].id) >= cuts[q]) {
                        vw[kw] = vo[n - (size_t)cd[i].id];
                        want[kw++] = cd[i];
                        sum = sift__u128_add64(sum, wo[n - (size_t)cd[i].id]);
                        fsum += (long double)vo[n - (size_t)cd[i].id];
                    }
                int order = variant == 5 ? SIFT__ORDER_CANON : SIFT__ORDER_NONE;
                for (int l = SIFT__SIMD_SCALAR; l < SIFT__SIMD_LEVELS; l++) {
                    for (size_t i = 0; i < n; i++) {
                        wg[i] = wo[n - (size_t)cd[i].id];
                        vg[i] = vo[n - (size_t)cd[i].id];
                    }
                    memcpy(got, cd, n * sizeof *cd);
                    sift__arr a = {got, n, (int32_t)n + 1, order, 0};
                    sift__u128 kept = sift__arr_keep_ge_w_at(l, &a, cuts[q], wg);
                    ck_assert_uint_eq(a.n, kw);
                    ck_assert_int_eq(memcmp(got, want, kw * sizeof *got), 0);
                    for (size_t i = 0; i < kw; i++)
                        ck_assert_uint_eq(wg[i], wo[n - (size_t)got[i].id]);
                    ck_assert_uint_eq(kept.lo, sum.lo);
                    ck_assert_uint_eq(kept.hi, sum.hi);
                    memcpy(got, cd, n * sizeof *cd);
                    sift__arr b = {got, n, (int32_t)n + 1, order, 0};
                    double S = sift__arr_keep_ge_f_at(l, &b, cuts[q], vg);
                    ck_assert_uint_eq(b.n, kw);
                    ck_assert_int_eq(memcmp(got, want, kw * sizeof *got), 0);
                    ck_assert_int_eq(memcmp(vg, vw, kw * sizeof *vg), 0);
                    ck_assert(fabsl((long double)S - fsum) <=
                              fsum * (long double)(n + 1) * 0x1p-53L);
                }
            }
        }
    }
}
END_TEST

/* The canonical first candidate (mirostat 2.0's fallback) is the plain
 * loop's largest key: ties across -0 and +0 and among equal logits in
 * any storage order, and the first of them when the order is known. */
START_TEST(test_the_canonical_first_is_the_largest_key)
{
    static sift_candidate cd[200];
    uint64_t r = 10200;
    for (size_t n = 1; n <= 200; n += (n < 40 ? 1 : 11)) {
        for (int variant = 0; variant < 4; variant++) {
            typ_cands(cd, n, &r, variant);
            for (size_t i = 0; i < n; i++) /* distinct ids, not in order */
                cd[i].id = (int32_t)((i * 7919u) % 211u);
            uint64_t best = 0;
            size_t bi = 0;
            float m = -INFINITY;
            for (size_t i = 0; i < n; i++) {
                uint64_t k = sift__ckey(cd[i].logit, cd[i].id);
                if (k > best) {
                    best = k;
                    bi = i;
                }
                m = cd[i].logit > m ? cd[i].logit : m;
            }
            if (!(m > -INFINITY))
                continue;
            ck_assert_uint_eq(sift__canon_first(cd, n, m, 0), bi);
            /* in id order, the first equal logit is the least id */
            size_t first = 0;
            while (!(cd[first].logit == m))
                first++;
            ck_assert_uint_eq(sift__canon_first(cd, n, m, 1), first);
        }
    }
}
END_TEST

/* The row step's cost model: a prefix of at most 256 tokens is always
 * walked (up to V / 8), a longer one only while it is at most a 256th of
 * the row, whichever builder (the one-pass top-k or the block path)
 * would build it. */
START_TEST(test_the_row_step_walks_a_prefix_only_where_it_costs_less_than_the_full_pass)
{
    ck_assert_int_eq(sift__step_takes_prefix(248320, 0), 0);
    ck_assert_int_eq(sift__step_takes_prefix(248320, 40), 1);
    ck_assert_int_eq(sift__step_takes_prefix(1000, 40), 1);
    ck_assert_int_eq(sift__step_takes_prefix(1000, 125), 1);
    ck_assert_int_eq(sift__step_takes_prefix(1000, 126), 0);
    ck_assert_int_eq(sift__step_takes_prefix(248320, 256), 1);
    ck_assert_int_eq(sift__step_takes_prefix(248320, 248320 / 256), 1);
    ck_assert_int_eq(sift__step_takes_prefix(248320, 248320 / 256 + 1), 0);
    ck_assert_int_eq(sift__step_takes_prefix(248320, 2088), 0);
    ck_assert_int_eq(sift__step_takes_prefix(248320, 4136), 0);
    ck_assert_int_eq(sift__step_takes_prefix(1 << 22, 4136), 1);
    ck_assert_int_eq(sift__step_takes_prefix(1 << 21, 4097), 1);
    ck_assert_int_eq(sift__step_takes_prefix(1 << 21, 8193), 0);
}
END_TEST

/* DRY with a 4,096-token window before top_k 40 asks for a prefix of
 * 4,136 tokens, beyond the one-pass top-k; with a full window accepted
 * without samples (unsettled) the dynamic plan asks for 40 + 4,095: on a
 * 248,320-token row the step goes straight to the full pass (no walk)
 * and draws the token a forced full pass draws. */
START_TEST(test_a_prefix_the_cost_model_refuses_goes_straight_to_the_full_pass)
{
    enum { BV = 248320 };
    float *row = malloc(BV * sizeof *row);
    ck_assert_ptr_nonnull(row);
    for (int32_t i = 0; i < BV; i++)
        row[i] = (float)((i * 7919) % 1009) * 0.01f;
    static const int32_t b0[] = {13};
    const int32_t *seqs[] = {b0};
    const size_t lens[] = {1};
    sift_chain *c[2];
    int32_t tok[2] = {-1, -2};
    for (int j = 0; j < 2; j++) {
        sift_chain_params p;
        sift_chain_params_init(&p);
        p.seed = 7;
        ck_assert_int_eq(sift_chain_new(&c[j], &p, NULL), SIFT_OK);
        ck_assert_int_eq(
            sift__chain_add_dry_tokens(c[j], 0.8f, 1.75f, 2, 4096, seqs, lens, 1, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_top_k(c[j], 40, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c[j], NULL), SIFT_OK);
        for (int32_t h = 0; h < 4200; h++)
            ck_assert_int_eq(sift_chain_accept(c[j], (h * 31) % 5, NULL), SIFT_OK);
    }
    ck_assert_uint_eq(sift__plan_prefix_k(c[0]), 4136);
    ck_assert_uint_eq(sift__plan_row_k_dynamic(c[0]), 4135);
    ck_assert_int_eq(sift_chain_sample(c[0], row, BV, &tok[0], NULL), SIFT_OK);
    ck_assert_uint_eq(c[0]->n_full_passes, 1);
    ck_assert_uint_eq(c[0]->n_walks, 0);
    ck_assert_uint_eq(c[0]->n_prefix_decided + c[0]->n_prefix_fallback, 0);
    c[1]->busy = 1;
    ck_assert_int_eq(sift__sample_row(c[1], row, BV, &tok[1], 0, NULL), SIFT_OK);
    c[1]->busy = 0;
    ck_assert_int_eq(tok[0], tok[1]);
    sift_chain_free(c[0]);
    sift_chain_free(c[1]);
    free(row);
}
END_TEST

/* Slice validation marks ids with the chain's generation instead of
 * clearing a set: when the generation wraps the array is zeroed, so the
 * marks of the generation before cannot pass for duplicates, and a real
 * duplicate is still found. */
START_TEST(test_slice_id_set_is_emptied_when_its_generation_wraps)
{
    static float row[V];
    static sift_candidate pre[8];
    cstage cs = {SIFT_CLASS_IDENTITY, 0};
    sift_chain *c = chain_with(&cs, 5);
    make_row(row, 9);
    canonical_prefix(row, 8, pre);
    sift_slice sl = {.n_vocab = V, .n_prefix = 8, .prefix = pre, .flags = SIFT_SLICE_CANONICAL};
    int32_t t = -1;
    ck_assert_int_eq(sift_chain_sample_slice(c, &sl, &t, NULL), SIFT_OK);
    ck_assert_uint_eq(c->seen_gen, 1); /* the ids of pre are marked 1 */
    c->seen_gen = UINT32_MAX;          /* as after 2^32 - 1 validations */
    ck_assert_int_eq(sift_chain_sample_slice(c, &sl, &t, NULL), SIFT_OK); /* wraps to 1 */
    ck_assert_uint_eq(c->seen_gen, 1);
    sift_candidate dup[8];
    memcpy(dup, pre, sizeof dup);
    dup[5].id = dup[1].id;
    sift_slice sd = sl;
    sd.prefix = dup;
    sift_error err;
    ck_assert_int_eq(sift_chain_sample_slice(c, &sd, &t, &err), SIFT_E_SLICE);
    ck_assert_msg(strstr(err.message, "positions 1 and 5") != NULL, "%s", err.message);
    ck_assert_int_eq(sift_chain_sample_slice(c, &sl, &t, NULL), SIFT_OK);
    sift_chain_free(c);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("core");
    TCase *t = tcase_create("classes");
    tcase_add_test(t, test_every_class_has_a_plan_rule_a_certificate_rule_and_an_extras_rule);
    tcase_add_test(t, test_every_class_reads_alike_in_the_plan_and_the_certificate);
    suite_add_tcase(s, t);
    t = tcase_create("slice fallback");
    /* check_simd_whole.sh runs the "simd" cases again under each SIFT_SIMD cap */
    tcase_set_tags(t, "simd");
    tcase_add_test(t, test_an_undecided_slice_runs_one_walk_and_one_full_pass);
    tcase_add_test(t, test_a_slice_shorter_than_the_plan_falls_back_through_the_row_prefix);
    tcase_add_test(t, test_slice_id_set_is_emptied_when_its_generation_wraps);
    tcase_add_test(t, test_the_row_step_walks_a_prefix_only_where_it_costs_less_than_the_full_pass);
    tcase_add_test(t, test_a_prefix_the_cost_model_refuses_goes_straight_to_the_full_pass);
    suite_add_tcase(s, t);
    t = tcase_create("row kernels");
    tcase_add_test(t, test_the_row_load_gives_the_scalar_bytes_and_flags_at_every_level);
    tcase_add_test(t, test_the_lane_sums_give_the_scalar_lanes_at_every_level);
    tcase_add_test(t, test_the_certified_top_n_sigma_threshold_gives_the_definitions_verdicts);
    tcase_add_test(t,
                   test_top_n_sigma_falls_back_to_the_definition_only_where_the_bound_cannot_tell);
    tcase_add_test(t, test_the_score_buckets_give_the_scalar_buckets_at_every_level);
    tcase_add_test(t, test_the_bucket_search_finds_the_scalar_index_at_every_level);
    tcase_add_test(t, test_the_weight_search_finds_the_scalar_index_at_every_level);
    tcase_add_test(t, test_the_keep_below_compaction_keeps_the_scalar_set_at_every_level);
    tcase_add_test(t, test_the_keep_below_compaction_moves_the_weights_at_every_level);
    tcase_add_test(t, test_the_logit_cut_keeps_the_scalar_set_at_every_level);
    tcase_add_test(t, test_the_logit_count_is_the_plain_loops_at_every_level);
    tcase_add_test(t, test_the_weight_cut_keeps_the_plain_set_and_sum_at_every_level);
    tcase_add_test(t, test_the_id_search_finds_the_first_match_at_every_level);
    tcase_add_test(t, test_the_logits_copy_gives_the_logit_bits_at_every_level);
    tcase_add_test(t, test_the_bucket_band_gives_the_definitions_sums_and_list_at_every_level);
    tcase_add_test(t, test_the_filtering_load_keeps_the_definitions_tokens_at_every_level);
    tcase_add_test(t, test_the_logit_search_finds_the_first_equal_logit_at_every_level);
    tcase_add_test(t, test_the_key_cut_copies_the_plain_set_in_and_out_of_place);
    tcase_add_test(t, test_the_key_cut_moves_the_weights_at_every_level);
    tcase_add_test(t, test_the_canonical_first_is_the_largest_key);
    suite_add_tcase(s, t);
    t = tcase_create("row first");
    /* check_simd_whole.sh runs it again under each SIFT_SIMD cap */
    tcase_set_tags(t, "simd");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_top_n_sigma_first_builds_from_the_row_what_the_load_and_its_apply_leave);
    suite_add_tcase(s, t);
    return s;
}

/*
 * check_tail.c - slices with a tail-mass bound (SIFT_SLICE_TAIL_MASS):
 * top_p and dist decided on a slice from a bound on the absent tokens'
 * mass, through penalties and temperature (docs/analyzer.md, "Tail
 * mass").
 *
 * The property suite samples the OpenAI-style chains (temperature ->
 * top_p -> dist, temperature -> dist, dist alone, vLLM's order penalties
 * -> temperature -> top_p -> min_p -> dist, xtc -> temperature -> dist,
 * and random temperatures and p, some ending in mirostat v1 or v2) on peaked, bf16, flat and the
 * test library's adversarial rows, from slices of several k with the tight bound (the exact tail
 * sum rounded up), the free bound (no flag), a loose one (x 1000) and a tail of 0 when every absent
 * token is -inf; canonical slices and device ones (any order, ties re-chosen). Every slice sample's
 * token and RNG must equal the oracle's; without a hook the step may only answer SIFT_E_NEED_ROW,
 * with nothing changed; a chain driven by slices and accept must end every step in the state
 * (digest, RNG) of a chain driven by rows.
 *
 * SIFT_TAIL_MIN_SAMPLES (environment) is the least number of slice
 * samples compared (default 40,000; make check-long sets 10,000,000);
 * SIFT_TAIL_SEED another stream of chains.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static long min_samples(void)
{
    const char *e = getenv("SIFT_TAIL_MIN_SAMPLES");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : 40000;
}

static uint64_t tail_seed(void)
{
    const char *e = getenv("SIFT_TAIL_SEED");
    return e && *e ? strtoull(e, NULL, 10) : 1414;
}

typedef struct hook_ctx {
    const float *row;
    int calls;
} hook_ctx;

static int hook(void *user, float *row, int32_t V)
{
    hook_ctx *h = user;
    h->calls++;
    memcpy(row, h->row, (size_t)V * sizeof *row);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Rows (issue 12's kinds) and the exact tail sum                      */
/* ------------------------------------------------------------------ */

enum { ROW_PEAKED, ROW_BF16, ROW_FLAT, ROW_LIB, ROW__COUNT };

/* Peaked: N(0, 2) per token plus a head of up to 50 ids raised by
 * U(5, 15); bf16: the same rounded to bf16; flat: U[-1, 1]; lib: one of
 * the test library's shapes (ties, -inf runs, huge values...). */
static void make_row(tu_rng *r, float *row, int32_t V, int kind)
{
    if (kind == ROW_LIB) {
        tu_row(r, row, V, (int)tu_range(r, 0, TU_ROW__COUNT - 1));
        return;
    }
    for (int32_t i = 0; i < V; i++)
        row[i] = kind == ROW_FLAT ? (float)(2.0 * tu_unif(r) - 1.0) : (float)(2.0 * tu_normal(r));
    if (kind != ROW_FLAT) {
        int32_t head = V < 50 ? V : 50;
        for (int32_t j = 0; j < head; j++) {
            int32_t at = (int32_t)tu_range(r, 0, V - 1); /* (one draw, then the other) */
            row[at] += (float)(5.0 + 10.0 * tu_unif(r));
        }
    }
    if (kind == ROW_BF16)
        for (int32_t i = 0; i < V; i++)
            row[i] = tu_bf16(row[i]);
}

/* The sum over the tokens not in the slice of exp(l_i - m), m the row's
 * largest logit, in long double, rounded up by a relative 2^-40 (far
 * above the sum's rounding error for any V here). `in` marks the slice's
 * ids (1), scratch of V entries. */
static double tight_tail(const float *row, int32_t V, const sift_slice *s, unsigned char *in)
{
    memset(in, 0, (size_t)V);
    float m = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        m = row[i] > m ? row[i] : m;
    for (int32_t i = 0; i < s->n_prefix; i++)
        in[s->prefix[i].id] = 1;
    for (int32_t i = 0; i < s->n_extras; i++)
        in[s->extras[i].id] = 1;
    long double sum = 0;
    for (int32_t i = 0; i < V; i++)
        if (!in[i] && row[i] > -INFINITY)
            sum += expl((long double)row[i] - (long double)m);
    double d = (double)sum;
    return d * (1.0 + 0x1p-40) + 0x1p-1000;
}

/* ------------------------------------------------------------------ */
/* Chains                                                              */
/* ------------------------------------------------------------------ */

enum { CH_TEMP_TOP_P, CH_TEMP_DIST, CH_DIST, CH_VLLM, CH_XTC, CH_RANDOM, CH__COUNT };

static void stage(sp_chain *c, sp_kind kind, float f0, int32_t i0)
{
    sp_stage *s = &c->st[c->n++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->f0 = f0;
    s->i0 = i0;
}

static void gen_tail_chain(tu_rng *r, sp_chain *c, int family, int32_t V)
{
    switch (family) {
    case CH_TEMP_TOP_P:
        stage(c, SP_TEMP, 0.7f, 0);
        stage(c, SP_TOP_P, 0.9f, 0);
        break;
    case CH_TEMP_DIST: stage(c, SP_TEMP, tu_unif(r) < 0.5 ? 1.0f : 0.7f, 0); break;
    case CH_DIST: break;
    case CH_VLLM: {
        sp_stage *p = &c->st[c->n++];
        gen_stage(r, p, SP_PENALTIES, V);
        stage(c, SP_TEMP, 0.8f, 0);
        stage(c, SP_TOP_P, 0.95f, 0);
        stage(c, SP_MIN_P, 0.05f, 0);
        break;
    }
    case CH_XTC: {
        /* xtc -> temperature -> dist, with xtc's probability, threshold and
         * min_keep random (sometimes firing every step) */
        sp_stage *x = &c->st[c->n++];
        gen_stage(r, x, SP_XTC, V);
        if (tu_unif(r) < 0.5)
            x->f0 = 1.0f;
        if (tu_unif(r) < 0.5)
            x->f1 = (float)(0.5 * tu_unif(r));
        stage(c, SP_TEMP, (float)(0.3 + 1.4 * tu_unif(r)), 0);
        if (tu_unif(r) < 0.3)
            stage(c, SP_TOP_P, (float)tu_unif(r), 0);
        break;
    }
    default: {
        /* random temperatures (below and above 1, sometimes two), top_p
         * with a min_keep, penalties and biases before */
        if (tu_unif(r) < 0.4)
            gen_stage(r, &c->st[c->n++], SP_PENALTIES, V);
        if (tu_unif(r) < 0.2)
            gen_stage(r, &c->st[c->n++], SP_LOGIT_BIAS, V);
        int nt = (int)tu_range(r, 0, 2);
        for (int i = 0; i < nt; i++)
            stage(c, SP_TEMP, (float)(0.2 + 1.8 * tu_unif(r)), 0);
        if (tu_unif(r) < 0.7)
            stage(c, SP_TOP_P, (float)tu_unif(r),
                  tu_unif(r) < 0.2 ? (int32_t)tu_range(r, 0, 9) : 0);
        if (tu_unif(r) < 0.3)
            stage(c, SP_MIN_P, (float)(0.2 * tu_unif(r)), 0);
        /* sometimes a mirostat selector instead of dist */
        double u = tu_unif(r);
        if (u < 0.3) {
            gen_stage(r, &c->st[c->n++], u < 0.15 ? SP_MIROSTAT : SP_MIROSTAT_V2, V);
            return;
        }
        break;
    }
    }
    stage(c, SP_DIST, 0, 0);
}

/* ------------------------------------------------------------------ */
/* The property                                                        */
/* ------------------------------------------------------------------ */

enum { B_TIGHT, B_FREE, B_LOOSE, B__COUNT };

typedef struct tally {
    long compared, decided[B__COUNT], tried[B__COUNT], hooked, need_row, device;
    long steps;
} tally;

/* One slice sample: builds the slice of k (canonical or device), sets its
 * bound, samples with or without the hook and compares with the oracle's
 * token and RNG; restores the RNG. Returns 1 when decided on the slice. */
static int one_slice(sift_chain *c, sift_slicer *sl, const float *row, int32_t V, int32_t k,
                     int bound, int device, int with_hook, int32_t to, const uint64_t ors[4],
                     tally *ty, tu_device_slice *dv, unsigned char *in, tu_rng *r, const char *desc)
{
    int32_t ids[256];
    size_t ne = 0;
    sift_error err;
    ck_assert_int_eq(sift_chain_extras(c, ids, N(ids), &ne, &err), SIFT_OK);
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(sl, row, V, k, ids, ne, &s, &err), SIFT_OK);
    if (device)
        tu_devicify(dv, r, row, V, &s, ids, ne);
    if (bound != B_FREE) {
        double t = tight_tail(row, V, &s, in);
        s.flags |= SIFT_SLICE_TAIL_MASS;
        s.tail_mass = bound == B_LOOSE ? t * 1000.0 : t;
    }
    hook_ctx h = {row, 0};
    ck_assert_int_eq(sift_chain_set_row_hook(c, with_hook ? hook : NULL, &h, NULL), SIFT_OK);
    uint64_t before[4], rs[4];
    sift__chain_rng_state(c, before);
    uint64_t dig = sift__chain_state_digest(c);
    int32_t ts = -1;
    sift_status ss = sift_chain_sample_slice(c, &s, &ts, &err);
    sift__chain_rng_state(c, rs);
    ty->compared++;
    ty->device += device;
    if (ss == SIFT_E_NEED_ROW) {
        ck_assert_msg(!with_hook, "NEED_ROW with a hook\n  %s", desc);
        ck_assert_msg(memcmp(before, rs, sizeof rs) == 0 && dig == sift__chain_state_digest(c),
                      "NEED_ROW changed the chain\n  %s", desc);
        ty->need_row++;
        ty->tried[bound]++;
        return 0;
    }
    ck_assert_msg(ss == SIFT_OK && ts == to && memcmp(rs, ors, sizeof rs) == 0,
                  "slice k=%d V=%d bound=%d device=%d hook=%d: sift %d (tok %d: %s) oracle tok "
                  "%d\n  %s",
                  (int)k, (int)V, bound, device, with_hook, (int)ss, (int)ts, ss ? err.message : "",
                  (int)to, desc);
    /* put the RNG back for the next sample of this step */
    sift__rng back;
    memcpy(back.s, before, sizeof back.s);
    c->rng = back;
    ty->hooked += h.calls;
    ty->tried[bound]++;
    ty->decided[bound] += h.calls == 0;
    return h.calls == 0;
}

/* Chains of every family until `min` slice samples are compared. */
static void property(uint64_t seed, long min, tally *ty)
{
    tu_rng r = {seed};
    char desc[2048];
    for (long cs = 0; ty->compared < min || cs < 2 * CH__COUNT * ROW__COUNT; cs++) {
        int family = (int)(cs % CH__COUNT);
        int kind = (int)((cs / CH__COUNT) % ROW__COUNT);
        int32_t V = cs % 50 == 0 ? (int32_t)tu_range(&r, 20000, 160000)
                                 : (cs % 9 == 0 ? (int32_t)tu_range(&r, 2, 40)
                                                : (int32_t)tu_range(&r, 200, 3000));
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        gen_tail_chain(&r, &spec, family, V);
        sp_describe(&spec, desc, sizeof desc);
        sift_chain *c, *rowc;
        sift_error err;
        ck_assert_msg(sp_build(&spec, &c, &err) == SIFT_OK, "build %s: %s", desc, err.message);
        ck_assert_int_eq(sp_build(&spec, &rowc, &err), SIFT_OK);
        or_chain o;
        or_init(&o, &spec);
        /* a short history for the penalties */
        int32_t alpha = V < 12 ? V : 12;
        int n_prompt = (int)tu_range(&r, 0, 20);
        for (int i = 0; i < n_prompt; i++) {
            int32_t t = (int32_t)tu_range(&r, 0, alpha - 1);
            ck_assert_int_eq(sift_chain_accept(c, t, &err), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(rowc, t, &err), SIFT_OK);
            or_accept(&o, t);
        }
        sift_plan plan = {.struct_size = sizeof plan};
        ck_assert_int_eq(sift_chain_plan(c, &plan, NULL, &err), SIFT_OK);
        ck_assert_msg(plan.guarantee != SIFT_GUARANTEE_WHOLE_ROW && plan.k > 0, "plan of %s is %s",
                      desc, plan.why);
        sift_slicer *sl;
        ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
        float *row = malloc((size_t)V * sizeof *row);
        unsigned char *in = malloc((size_t)V);
        tu_device_slice dv;
        ck_assert(tu_device_init(&dv, V));
        int steps = V > 20000 ? 1 : (int)tu_range(&r, 1, 4);
        for (int step = 0; step < steps; step++) {
            make_row(&r, row, V, kind);
            int32_t to = -1;
            sift_status so = or_sample(&o, row, V, &to);
            if (so != SIFT_OK)
                break; /* errors are the row path's (check_slice) */
            uint64_t ors[4];
            memcpy(ors, o.rng.s, sizeof ors);
            int32_t ks[4] = {plan.k, 64, 16, 2};
            int decided_k = 0;
            for (int v = 0; v < 4; v++) {
                int32_t k = ks[v] < V ? ks[v] : V;
                for (int bound = 0; bound < B__COUNT; bound++) {
                    int device = (int)tu_range(&r, 0, 1);
                    int d = one_slice(c, sl, row, V, k, bound, device, 1, to, ors, ty, &dv, in, &r,
                                      desc);
                    one_slice(c, sl, row, V, k, bound, device, 0, to, ors, ty, &dv, in, &r, desc);
                    if (d && v == 0)
                        decided_k = 1;
                }
            }
            /* the chain driven by slices: sample at the plan's k with the
             * tight bound, then accept; the other by rows */
            int32_t ids[256];
            size_t ne = 0;
            ck_assert_int_eq(sift_chain_extras(c, ids, N(ids), &ne, &err), SIFT_OK);
            sift_slice s;
            int32_t k = plan.k < V ? plan.k : V;
            ck_assert_int_eq(sift_slicer_build(sl, row, V, k, ids, ne, &s, &err), SIFT_OK);
            s.flags |= SIFT_SLICE_TAIL_MASS;
            s.tail_mass = tight_tail(row, V, &s, in);
            hook_ctx h = {row, 0};
            ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
            int32_t ts = -1, tr = -1;
            ck_assert_int_eq(sift_chain_sample_slice(c, &s, &ts, &err), SIFT_OK);
            ck_assert_int_eq(sift_chain_sample(rowc, row, V, &tr, &err), SIFT_OK);
            ck_assert_msg(ts == to && tr == to, "slice %d row %d oracle %d\n  %s", (int)ts, (int)tr,
                          (int)to, desc);
            ck_assert_int_eq(sift_chain_accept(c, ts, &err), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(rowc, tr, &err), SIFT_OK);
            or_accept(&o, to);
            uint64_t a[4], b[4];
            sift__chain_rng_state(c, a);
            sift__chain_rng_state(rowc, b);
            ck_assert_msg(memcmp(a, b, sizeof a) == 0 && memcmp(a, o.rng.s, sizeof a) == 0 &&
                              sift__chain_state_digest(c) == sift__chain_state_digest(rowc),
                          "state after accept\n  %s", desc);
            ty->steps++;
            (void)decided_k;
        }
        tu_device_free(&dv);
        free(in);
        free(row);
        sift_slicer_free(sl);
        or_free(&o);
        sift_chain_free(c);
        sift_chain_free(rowc);
    }
}

START_TEST(test_tail_bound_slices_agree_with_the_oracle_bitwise_or_ask_for_the_row)
{
    tally ty;
    memset(&ty, 0, sizeof ty);
    long min = min_samples();
    property(tail_seed(), min, &ty);
    fprintf(stderr,
            "tail: %ld slice samples compared (%ld device-order), 0 mismatches, %ld steps; "
            "decided on the slice: tight bound %ld/%ld, free bound %ld/%ld, loose x1000 %ld/%ld; "
            "hook calls %ld, need_row %ld\n",
            ty.compared, ty.device, ty.steps, ty.decided[B_TIGHT], ty.tried[B_TIGHT],
            ty.decided[B_FREE], ty.tried[B_FREE], ty.decided[B_LOOSE], ty.tried[B_LOOSE], ty.hooked,
            ty.need_row);
    ck_assert_int_ge(ty.compared, min);
    /* every part exercised: slices decided with each bound, the tight one
     * more often than the free one, and the row asked for */
    ck_assert_int_gt(ty.decided[B_FREE], 0);
    ck_assert_int_gt(ty.decided[B_LOOSE], 0);
    ck_assert_int_gt(ty.decided[B_TIGHT], ty.decided[B_FREE]);
    ck_assert_int_gt(ty.hooked, 0);
    ck_assert_int_gt(ty.need_row, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Focused tests                                                       */
/* ------------------------------------------------------------------ */

static sift_chain *chain_of(const sp_chain *spec)
{
    sift_chain *c;
    ck_assert_int_eq(sp_build(spec, &c, NULL), SIFT_OK);
    return c;
}

/* A peaked row of V tokens: token 7 far above the rest. */
static void peaked(float *row, int32_t V)
{
    for (int32_t i = 0; i < V; i++)
        row[i] = (float)(i % 97) * 0.01f;
    row[7] = 30.0f;
}

START_TEST(test_a_bad_tail_mass_is_a_slice_error_and_changes_nothing)
{
    sp_chain spec = {.seed = 3};
    stage(&spec, SP_TEMP, 0.7f, 0);
    stage(&spec, SP_TOP_P, 0.9f, 0);
    stage(&spec, SP_DIST, 0, 0);
    sift_chain *c = chain_of(&spec);
    enum { V = 1000 };
    static float row[V];
    peaked(row, V);
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    sift_slice s;
    sift_error err;
    ck_assert_int_eq(sift_slicer_build(sl, row, V, 16, NULL, 0, &s, &err), SIFT_OK);
    const double bad[] = {NAN, -1.0, INFINITY, -INFINITY, -0x1p-1074};
    uint64_t before[4], after[4];
    sift__chain_rng_state(c, before);
    for (size_t i = 0; i < N(bad); i++) {
        s.flags = SIFT_SLICE_CANONICAL | SIFT_SLICE_TAIL_MASS;
        s.tail_mass = bad[i];
        int32_t t = -1;
        ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE);
        ck_assert_ptr_nonnull(strstr(err.message, "tail_mass"));
        ck_assert_int_eq(t, -1);
    }
    /* without the flag the field is not read: any value is fine */
    s.flags = SIFT_SLICE_CANONICAL;
    s.tail_mass = NAN;
    int32_t t = -1;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_OK);
    ck_assert_int_eq(t, 7);
    /* unknown bits are still refused */
    s.flags = 4u;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, &err), SIFT_E_SLICE);
    sift__chain_rng_state(c, after);
    (void)after;
    sift_slicer_free(sl);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_plan_of_temperature_then_top_p_is_certified_with_a_tail_mass_bound)
{
    sp_chain spec = {.seed = 1};
    stage(&spec, SP_TEMP, 0.7f, 0);
    stage(&spec, SP_TOP_P, 0.9f, 0);
    stage(&spec, SP_DIST, 0, 0);
    sift_chain *c = chain_of(&spec);
    sift_plan p = {.struct_size = sizeof p};
    sift_plan_stage st[3];
    for (int i = 0; i < 3; i++)
        st[i].struct_size = sizeof st[i];
    ck_assert_int_eq(sift_chain_plan(c, &p, st, NULL), SIFT_OK);
    ck_assert_int_eq(p.guarantee, SIFT_GUARANTEE_CERTIFIED);
    ck_assert_int_eq(p.decided_at, 1);
    ck_assert_int_eq(p.k, 256 + 8);
    ck_assert_ptr_nonnull(strstr(p.why, "top_p after temp: certified with a tail-mass bound"));
    ck_assert_ptr_nonnull(strstr(st[1].why, "recommended k = 264"));
    sift_chain_free(c);
    /* dist alone */
    sp_chain d = {.seed = 1};
    stage(&d, SP_DIST, 0, 0);
    c = chain_of(&d);
    ck_assert_int_eq(sift_chain_plan(c, &p, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(p.guarantee, SIFT_GUARANTEE_CERTIFIED);
    ck_assert_int_eq(p.k, 256);
    sift_chain_free(c);
    /* xtc (threshold 0.1f, just above 0.1: at most 9 tokens reach it, 8
     * are removed) -> temp -> dist */
    sp_chain x = {.seed = 1};
    stage(&x, SP_XTC, 0.5f, 1);
    x.st[0].f1 = 0.1f;
    stage(&x, SP_TEMP, 0.8f, 0);
    stage(&x, SP_DIST, 0, 0);
    c = chain_of(&x);
    ck_assert_int_eq(sift_chain_plan(c, &p, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(p.guarantee, SIFT_GUARANTEE_CERTIFIED);
    ck_assert_int_eq(p.k, 256 + 8 + 8);
    ck_assert_int_eq(p.decided_at, 2);
    sift_chain_free(c);
}
END_TEST

/* A peaked row: the free bound cannot place the draw (V - k absent
 * tokens could weigh as much as the 16th), the tight one can; the slice
 * is decided without the hook and gives the row's token and RNG. */
START_TEST(test_the_tight_bound_decides_where_the_free_bound_asks_for_the_row)
{
    sp_chain spec = {.seed = 11};
    stage(&spec, SP_TEMP, 0.7f, 0);
    stage(&spec, SP_TOP_P, 0.9f, 0);
    stage(&spec, SP_DIST, 0, 0);
    enum { V = 50000 };
    static float row[V];
    static unsigned char in[V];
    for (int32_t i = 0; i < V; i++)
        row[i] = -5.0f;
    for (int32_t i = 0; i < 16; i++)
        row[i * 31] = 10.0f - (float)i * 0.1f;
    sift_chain *c = chain_of(&spec), *rowc = chain_of(&spec);
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(sl, row, V, 16, NULL, 0, &s, NULL), SIFT_OK);
    int32_t t = -1, tr = -1;
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, NULL), SIFT_E_NEED_ROW);
    s.flags |= SIFT_SLICE_TAIL_MASS;
    s.tail_mass = tight_tail(row, V, &s, in);
    ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(rowc, row, V, &tr, NULL), SIFT_OK);
    ck_assert_int_eq(t, tr);
    uint64_t a[4], b[4];
    sift__chain_rng_state(c, a);
    sift__chain_rng_state(rowc, b);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    sift_slicer_free(sl);
    sift_chain_free(c);
    sift_chain_free(rowc);
}
END_TEST

/* The bound itself against the integer mass it bounds: random absent
 * sets (ties, -inf, huge and tiny logits, many tokens at the bound),
 * the exact tail sum rounded up, lowering, then zero to two temperatures
 * below and above 1 applied to the absent logits as temp applies them
 * (one float division each); the bound on the absent tokens' integer
 * mass at the final maximum must cover sum trunc(expf(z - m) 2^62). The
 * free bound is made useless (the bound logit is the maximum) so that
 * the tail bound is what is checked. */
/* n absent logits at or below top, of shape 0 (spread over 30), 1 (all
 * near top), 2 (ties, and -inf), 5 (weights near 1 at top) or other
 * (spread over 200); returns their sum of exp(z - ref) in long double. */
static long double absent_set(tu_rng *r, float *z, int32_t n, int shape, float top, float ref)
{
    long double S = 0;
    for (int32_t i = 0; i < n; i++) {
        double d = shape == 0   ? -30.0 * tu_unif(r)
                   : shape == 1 ? -0.5 * tu_unif(r)
                   : shape == 2 ? (tu_unif(r) < 0.1 ? -INFINITY : -2.0)
                   : shape == 5 ? -42.0 - 2.5 * tu_unif(r)
                                : -200.0 * tu_unif(r);
        z[i] = (float)((double)top + d);
        if (z[i] > top)
            z[i] = top;
        S += expl((long double)z[i] - (long double)ref);
    }
    return S;
}

START_TEST(test_the_tail_bound_covers_the_exact_integer_mass_through_temperatures)
{
    tu_rng r = {99};
    enum { NMAX = 3000 };
    static float z[NMAX];
    long checked = 0, tight = 0;
    for (int it = 0; it < 4000; it++) {
        int32_t n = (int32_t)tu_range(&r, 1, NMAX);
        int shape = (int)tu_range(&r, 0, 4);
        float m = (float)(40.0 * tu_unif(&r) - 20.0);
        if (shape == 4)
            m = (float)(2000.0 * tu_unif(&r) - 1000.0);
        long double S = absent_set(&r, z, n, shape, m, m);
        sift__bound b;
        memset(&b, 0, sizeof b);
        b.logit = m;
        b.n_absent = (uint64_t)n;
        sift__tail_start(&b, m, (double)S * (1.0 + 0x1p-40));
        ck_assert(b.has_tail);
        /* lowering: some absent tokens go down (in half the sets) */
        int lowered = tu_unif(&r) < 0.5;
        for (int32_t i = 0; lowered && i < n; i++)
            if (tu_unif(&r) < 0.2)
                z[i] -= (float)(5.0 * tu_unif(&r));
        float mx = m;
        int nt = (int)tu_range(&r, 0, 2);
        for (int k = 0; k < nt; k++) {
            float t = tu_unif(&r) < 0.5 ? (float)(0.05 + 0.95 * tu_unif(&r))
                                        : (float)(1.0 + 4.0 * tu_unif(&r));
            if (t == 1.0f)
                continue;
            float before = b.logit;
            for (int32_t i = 0; i < n; i++)
                z[i] = z[i] / t;
            mx = mx / t;
            b.logit = before / t;
            sift__tail_divide(&b, before, t, mx);
        }
        if (!b.has_tail)
            continue;
        sift__u128 W = {0, 0};
        for (int32_t i = 0; i < n; i++)
            W = sift__u128_add64(W, sift__weight(sift__expf(z[i] - mx)));
        sift__u128 B = sift__tail_absent_mass(&b, mx);
        ck_assert_msg(sift__u128_cmp(W, B) <= 0,
                      "it %d: n %d shape %d m %g: mass %.17g above the bound %.17g", it, (int)n,
                      shape, (double)m, sift__u128_to_double(W), sift__u128_to_double(B));
        checked++;
        tight +=
            nt == 0 && !lowered && sift__u128_to_double(B) <= sift__u128_to_double(W) * 1.001 + 2;
    }
    /* most sets keep a bound, and without a temperature it is tight */
    ck_assert_int_gt(checked, 3000);
    ck_assert_int_gt(tight, 300);
}
END_TEST

/* The lower end (sift__tail_absent_mass_lo): random absent sets whose
 * exact real mass sum exp(z - ref) is given (rounded down, as the route's
 * kernel bound is below it), at a present maximum m at or below ref (XTC
 * removes the largest present tokens): the exact integer mass at m must
 * never be below it, and on sets of ordinary tokens it is within 10^-5 of
 * it, less one unit a token. Tokens of weight about 1 (x near -43, where
 * the truncation loses up to half) and at -44, -inf and ties are among
 * them; and sift__tail_set_lower takes the present tokens' share off. */
START_TEST(test_the_tail_lower_end_stays_below_the_exact_integer_mass)
{
    tu_rng r = {314};
    enum { NMAX = 3000 };
    static float z[NMAX];
    long checked = 0, tight = 0;
    double worst = 2.0;
    for (int it = 0; it < 4000; it++) {
        int32_t n = (int32_t)tu_range(&r, 1, NMAX);
        int shape = (int)tu_range(&r, 0, 5);
        float ref = (float)(40.0 * tu_unif(&r) - 20.0);
        if (shape == 4)
            ref = (float)(2000.0 * tu_unif(&r) - 1000.0);
        /* the present maximum: the row's, or below it by up to 3, and
         * every absent token at or below it */
        float m = tu_unif(&r) < 0.5 ? ref : (float)((double)ref - 3.0 * tu_unif(&r));
        long double S = absent_set(&r, z, n, shape, m, ref);
        sift__bound b;
        memset(&b, 0, sizeof b);
        b.logit = m;
        b.n_absent = (uint64_t)n;
        sift__tail_start(&b, ref, (double)S * (1.0 + 0x1p-40));
        ck_assert(b.has_tail && b.tail_lo == 0.0);
        ck_assert(sift__tail_absent_mass_lo(&b, m).lo == 0);
        /* no present token below lk: the lower end is S itself */
        sift__tail_set_lower(&b, (double)(S * (1.0L - 0x1p-40L)), 0, m);
        sift__u128 W = {0, 0};
        for (int32_t i = 0; i < n; i++)
            W = sift__u128_add64(W, sift__weight(sift__expf(z[i] - m)));
        sift__u128 L = sift__tail_absent_mass_lo(&b, m);
        ck_assert_msg(sift__u128_cmp(L, W) <= 0,
                      "it %d: n %d shape %d ref %g m %g: mass %.17g below the lower end %.17g", it,
                      (int)n, shape, (double)ref, (double)m, sift__u128_to_double(W),
                      sift__u128_to_double(L));
        checked++;
        double Wd = sift__u128_to_double(W), Ld = sift__u128_to_double(L);
        tight += shape != 5 && Wd > 1e15 && Ld >= Wd * (1.0 - 1e-5) - n;
        worst = Wd > 1e15 && Ld / Wd < worst ? Ld / Wd : worst;
        /* the present tokens' share: n_present tokens at lk */
        float lk = z[0];
        uint64_t np = (uint64_t)tu_range(&r, 1, 5);
        sift__tail_set_lower(&b, (double)(S * (1.0L - 0x1p-40L)), np, lk);
        long double cut = S - (long double)np * expl((long double)lk - (long double)ref);
        ck_assert_msg((long double)b.tail_lo <= (cut > 0 ? cut : 0),
                      "it %d: lower end %.17g above the absent share %.17Lg", it, b.tail_lo, cut);
    }
    ck_assert_int_eq(checked, 4000);
    ck_assert_int_gt(tight, 1000);
    fprintf(stderr, "tail lower end: %ld sets, %ld within 1e-5 of the mass, least ratio %.7f\n",
            checked, tight, worst);
    /* a division (temperature) takes the lower end away */
    sift__bound b;
    memset(&b, 0, sizeof b);
    b.logit = 0.0f;
    b.n_absent = 10;
    sift__tail_start(&b, 0.0f, 5.0);
    sift__tail_set_lower(&b, 4.0, 0, 0.0f);
    ck_assert(b.tail_lo > 3.99 && b.tail_lo <= 4.0);
    ck_assert(sift__tail_absent_mass_lo(&b, 0.0f).hi == 0 &&
              sift__tail_absent_mass_lo(&b, 0.0f).lo > ((uint64_t)1 << 63));
    sift__tail_divide(&b, 0.0f, 0.5f, 0.0f);
    ck_assert(b.tail_lo == 0.0 && sift__tail_absent_mass_lo(&b, 0.0f).lo == 0);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("tail");
    TCase *t = tcase_create("api");
    tcase_add_test(t, test_a_bad_tail_mass_is_a_slice_error_and_changes_nothing);
    tcase_add_test(t, test_plan_of_temperature_then_top_p_is_certified_with_a_tail_mass_bound);
    tcase_add_test(t, test_the_tight_bound_decides_where_the_free_bound_asks_for_the_row);
    tcase_add_test(t, test_the_tail_bound_covers_the_exact_integer_mass_through_temperatures);
    tcase_add_test(t, test_the_tail_lower_end_stays_below_the_exact_integer_mass);
    suite_add_tcase(s, t);
    TCase *p = tcase_create("property");
    tcase_set_timeout(p, 900); /* the property runs; the rest: Check's default */
    tcase_add_test(p, test_tail_bound_slices_agree_with_the_oracle_bitwise_or_ask_for_the_row);
    suite_add_tcase(s, p);
    return s;
}

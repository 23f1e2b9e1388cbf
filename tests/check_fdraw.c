/*
 * check_fdraw.c - the facts about sift's exact weights that the proof of
 * the float-certified draw starts from (docs/analyzer.md, "Float-certified
 * draw"), checked against the code.
 *
 * Lemma 1 there: with rho = 2^-24 + 2^-50, every float x <= 0 has
 *     2^62 e^x (1 - rho) - 1 < w(x) <= 2^62 e^x (1 + rho),
 * w(x) = sift__weight(sift__expf(x)); and Lemma 2 takes w(x) = 0 for
 * x < -44. A float path built on the lemma trusts these bounds to decide
 * a token, so a change of sift__expf or sift__weight that breaks them must
 * fail here. The reference is expl in long double (64-bit significand on
 * x86-64, error far below the lemma's slack); it checks accuracy, never
 * bits. The sweep is strided over every float in [-104, 0], with the
 * values around the point where the weight becomes 0 taken one by one.
 *
 * Then the draw built on it (core/fdraw.c): its float exponential F
 * against its scalar definition (bits) and e^x (the bound of Lemma 4);
 * the draw against a sorted walk over exact weights on random and
 * adversarial rows at every kernel level, where it must give the walk's
 * token or none; rows built so that the float prefix sits on the wrong
 * side of the target, which a certificate with half the proven kappa
 * lets through and the real one must not; whole chains with and
 * without the draw, which must agree bit for bit (token and RNG); and a
 * soak of the draw, the cut and XTC's test against the exact prefixes
 * (SIFT_FDRAW_MIN_STEPS decided steps each; make check-long: 10^7).
 */
#include "harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift_internal.h"
#include "testutil.h"

/* The lemma's rho. */
#define LEMMA_RHO (0x1p-24L + 0x1p-50L)

static float bfloat(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

typedef struct lemma_stats {
    long double worst; /* the largest |2^62 E(x) - 2^62 e^x| / (2^62 e^x) seen */
    size_t checked, zero_below;
    int failed;
} lemma_stats;

static void check_one(float x, lemma_stats *st)
{
    uint64_t w = sift__weight(sift__expf(x));
    long double e = ldexpl(expl((long double)x), 62);
    long double lo = e * (1.0L - LEMMA_RHO) - 1.0L, hi = e * (1.0L + LEMMA_RHO);
    st->checked++;
    if (!((long double)w > lo && (long double)w <= hi)) {
        if (st->failed++ < 5)
            printf("check_fdraw: x = %a: w = %llu outside (%.6Lg, %.6Lg]\n", (double)x,
                   (unsigned long long)w, lo, hi);
    }
    if (x < -44.0f) {
        st->zero_below += w == 0;
        if (w != 0 && st->failed++ < 5)
            printf("check_fdraw: x = %a below -44 has weight %llu\n", (double)x,
                   (unsigned long long)w);
    }
    float E = sift__expf(x);
    if (E >= 0x1p-62f) {
        long double r = fabsl((long double)E - expl((long double)x)) / expl((long double)x);
        if (r > st->worst)
            st->worst = r;
    }
}

START_TEST(test_exact_weight_is_within_rho_of_e_to_the_x)
{
    lemma_stats st = {0, 0, 0, 0};
    /* -0 .. -104 by bit pattern: the negative floats grow in magnitude
     * with their bits */
    uint32_t end = fbits(-104.0f);
    for (uint32_t u = 0x80000000u; u <= end; u += 397)
        check_one(bfloat(u), &st);
    /* one by one around the last nonzero weight (e^x 2^62 near 1,
     * x near -62 ln 2 = -42.975) and around -44 */
    const float centres[] = {-42.975f, -43.0f, -44.0f, -0.0f, -1.0f, -0.5f};
    for (size_t c = 0; c < sizeof centres / sizeof centres[0]; c++) {
        uint32_t b = fbits(centres[c]);
        for (uint32_t d = 0; d < 40000; d++) {
            if (b + d <= end)
                check_one(bfloat(b + d), &st);
            if (d <= b - 0x80000000u)
                check_one(bfloat(b - d), &st);
        }
    }
    check_one(0.0f, &st);
    printf("check_fdraw: %zu values, largest relative error of sift__expf (normal range of "
           "weights) %.4Lg = 2^%.3Lf; rho = 2^%.3Lf\n",
           st.checked, st.worst, log2l(st.worst), log2l(LEMMA_RHO));
    ck_assert_msg(st.failed == 0, "%d values break Lemma 1 or the zero below -44", st.failed);
    ck_assert(st.worst <= LEMMA_RHO);
    ck_assert(st.zero_below > 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The float exponential F                                             */
/* ------------------------------------------------------------------ */

#define F_EPS (0x1.2p-24L) /* Lemma 4 */

/* The kernel levels this machine runs. */
static int n_levels(void)
{
    return sift__fdraw_level() + 1;
}

static void check_fexp_block(const float *x, size_t n, long double *worst, int *bad)
{
    sift_candidate c[64];
    float v[64];
    for (size_t i = 0; i < n; i++) {
        c[i].id = (int32_t)i;
        c[i].logit = x[i];
    }
    for (int level = 0; level < n_levels(); level++) {
        float xlow;
        double S = sift__fexp_pass(level, c, n, 0.0f, v, &xlow);
        double want_S = 0.0;
        for (size_t i = 0; i < n; i++) {
            float f = sift__fexp(x[i]);
            want_S += (double)f;
            if (fbits(f) != fbits(v[i]) && (*bad)++ < 5)
                printf("check_fdraw: level %d, x = %a: kernel %a, definition %a\n", level,
                       (double)x[i], (double)v[i], (double)f);
            if (x[i] >= -44.0f) {
                long double e = expl((long double)x[i]);
                long double r = fabsl((long double)f - e) / e;
                *worst = r > *worst ? r : *worst;
            }
        }
        /* sums in another order: equal to a few ulps */
        ck_assert(fabs(S - want_S) <= 1e-12 * want_S);
    }
}

START_TEST(test_float_exponential_kernels_match_the_definition_within_the_bound)
{
    long double worst = 0;
    int bad = 0;
    float x[64];
    size_t n = 0;
    uint32_t end = fbits(-50.0f);
    for (uint32_t u = 0x80000000u; u <= end; u += 1021) {
        x[n++] = bfloat(u);
        if (n == 64 || u + 1021 > end) {
            check_fexp_block(x, n, &worst, &bad);
            n = 0;
        }
    }
    /* around the table's seams (x 32/ln2 near k + 1/2), the clamp at -44,
     * zeros, -inf, and every block length (the kernels' tails) */
    const float seams[] = {-0.0108304f, -0.0216608f, -0.34657359f, -0.6931472f, -1.0f,
                           -43.99999f,  -44.0f,      -44.00001f,   -0.0f,       0.0f};
    for (size_t k = 0; k < sizeof seams / sizeof seams[0]; k++) {
        uint32_t b = fbits(seams[k]);
        for (uint32_t d = 0; d < 4096; d += 64) {
            for (size_t i = 0; i < 64; i++)
                x[i] =
                    seams[k] == 0.0f ? -bfloat(b + d + (uint32_t)i) : bfloat(b + d + (uint32_t)i);
            check_fexp_block(x, 1 + d / 64 % 64, &worst, &bad);
        }
    }
    x[0] = -INFINITY;
    x[1] = 0.0f;
    x[2] = -0.0f;
    check_fexp_block(x, 3, &worst, &bad);
    ck_assert(sift__fexp(-INFINITY) == sift__fexp(-44.0f));
    ck_assert(sift__fexp(0.0f) == 1.0f && sift__fexp(-0.0f) == 1.0f);
    printf("check_fdraw: F at %d level(s): largest relative error %.4Lg = 2^%.3Lf (bound "
           "2^%.3Lf)\n",
           n_levels(), worst, log2l(worst), log2l(F_EPS));
    ck_assert_msg(bad == 0, "%d values where a kernel's F differs from the definition", bad);
    ck_assert(worst <= F_EPS);
}
END_TEST

START_TEST(test_the_float_pass_reports_a_nan)
{
    sift_candidate c[40];
    float v[40];
    for (int i = 0; i < 40; i++) {
        c[i].id = i;
        c[i].logit = -0.01f * (float)i;
    }
    for (int where = 0; where < 40; where += 13) {
        c[where].logit = NAN;
        for (int level = 0; level < n_levels(); level++) {
            float xlow;
            ck_assert(isnan(sift__fexp_pass(level, c, 40, 0.0f, v, &xlow)));
        }
        c[where].logit = 0.0f;
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The draw against a sorted walk over exact weights                   */
/* ------------------------------------------------------------------ */

static sift__ws ws;
static sift__alloc al;
#define MAX_N 60000

static void setup(void)
{
    ck_assert_int_eq(sift__alloc_init(&al, NULL, NULL), SIFT_OK);
    memset(&ws, 0, sizeof ws);
    ck_assert_int_eq(sift__ws_reserve(&ws, &al, MAX_N, NULL), SIFT_OK);
}

static void teardown(void)
{
    sift__ws_free(&ws, &al);
}

static int canon_cmp(const void *a, const void *b)
{
    const sift_candidate *x = a, *y = b;
    return sift__canon_before(x, y) ? -1 : sift__canon_before(y, x) ? 1 : 0;
}

/* The oracle: dist's definition, a walk in sorted order over exact
 * weights, for the RNG output u. Also gives the canonical position. */
static int32_t oracle_draw(const sift_candidate *c, size_t n, uint64_t u, size_t *pos)
{
    sift_candidate *s = malloc(n * sizeof *s);
    ck_assert_ptr_nonnull(s);
    memcpy(s, c, n * sizeof *s);
    qsort(s, n, sizeof *s, canon_cmp);
    float m = s[0].logit;
    sift__u128 W = {0, 0};
    for (size_t i = 0; i < n; i++)
        W = sift__u128_add64(W, sift__weight(sift__expf(s[i].logit - m)));
    sift__u128 T = sift__u128_scale_u64(W, u), run = {0, 0};
    size_t i = 0;
    for (; i < n; i++) {
        run = sift__u128_add64(run, sift__weight(sift__expf(s[i].logit - m)));
        if (sift__u128_cmp(run, T) > 0)
            break;
    }
    i = i < n ? i : n - 1;
    int32_t id = s[i].id;
    if (pos)
        *pos = i;
    free(s);
    return id;
}

static float max_logit(const sift_candidate *c, size_t n)
{
    float m = -INFINITY;
    for (size_t i = 0; i < n; i++)
        m = c[i].logit > m ? c[i].logit : m;
    return m;
}

/* Row shapes: the bench's three (peaked: N(0, 2) with 50 ids raised by
 * U(5, 15); bf16: the same rounded; flat: U[-1, 1]) and the test
 * utilities' adversarial ones. */
enum { SH_PEAKED, SH_BF16, SH_FLAT, SH_TU, SH__COUNT };

static void make_row(tu_rng *r, int shape, sift_candidate *c, size_t n)
{
    float *row = malloc(n * sizeof *row);
    ck_assert_ptr_nonnull(row);
    if (shape == SH_TU) {
        tu_row(r, row, (int32_t)n, (int)tu_range(r, 0, TU_ROW__COUNT - 1));
    } else {
        for (size_t i = 0; i < n; i++)
            row[i] =
                shape == SH_FLAT ? (float)(2.0 * tu_unif(r) - 1.0) : (float)(2.0 * tu_normal(r));
        if (shape != SH_FLAT)
            for (int k = 0; k < 50; k++)
                row[tu_range(r, 0, (int64_t)n - 1)] += (float)(5.0 + 10.0 * tu_unif(r));
        if (shape == SH_BF16)
            for (size_t i = 0; i < n; i++)
                row[i] = tu_bf16(row[i]);
    }
    for (size_t i = 0; i < n; i++) {
        c[i].id = (int32_t)i;
        c[i].logit = row[i];
    }
    free(row);
    /* half the arrays in a random storage order */
    if (tu_unif(r) < 0.5)
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)tu_range(r, 0, (int64_t)i - 1);
            sift_candidate t = c[i - 1];
            c[i - 1] = c[j];
            c[j] = t;
        }
}

START_TEST(test_the_float_draw_gives_the_walks_token_or_none)
{
    static const char *names[SH__COUNT] = {"peaked", "bf16", "flat", "adversarial"};
    tu_rng r = {0x5eed0f0d12a3ull};
    sift_candidate *c = malloc(MAX_N * sizeof *c);
    ck_assert_ptr_nonnull(c);
    int steps = 24;
    for (int level = 0; level < n_levels(); level++) {
        for (int shape = 0; shape < SH__COUNT; shape++) {
            int decided = 0, tried = 0;
            for (int k = 0; k < steps; k++) {
                size_t n = (size_t)tu_range(&r, 16384, 40000);
                make_row(&r, shape, c, n);
                float m = max_logit(c, n);
                if (!(m > -INFINITY && m < INFINITY))
                    continue;
                uint64_t u = tu_next(&r);
                sift__ctx ctx;
                memset(&ctx, 0, sizeof ctx);
                ctx.ws = &ws;
                sift__arr a = {c, n, (int32_t)n, SIFT__ORDER_NONE, 0};
                int32_t id = -1;
                tried++;
                if (sift__fdraw_at(&ctx, &a, m, u, level, sift__fdraw_kappa(), &id)) {
                    decided++;
                    ck_assert_msg(id == oracle_draw(c, n, u, NULL),
                                  "level %d, %s row, n %zu: the float draw gave %d", level,
                                  names[shape], n, (int)id);
                }
            }
            printf("check_fdraw: level %d, %s rows: %d of %d draws decided\n", level, names[shape],
                   decided, tried);
            /* the three model-like shapes decide most draws: a path that
             * never decides would pass the check above */
            if (shape != SH_TU)
                ck_assert_int_ge(decided, tried * 2 / 3);
        }
    }
    free(c);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rows on the bound's edge                                            */
/* ------------------------------------------------------------------ */

/* A float x in [lo, hi] where F(x) and E(x) = sift__expf(x) differ by
 * one ulp in the direction `up` (F above E when up), searched upward. */
static float find_split(float lo, float hi, int up)
{
    for (uint32_t u = fbits(hi); u <= fbits(lo); u++) {
        float x = bfloat(u), f = sift__fexp(x), e = sift__expf(x);
        if (up ? f > e : f < e)
            return x;
    }
    return NAN;
}

/* A row whose first group (at xa, where F misses the exact weight by an
 * ulp, about 2^-23 relative) sits ahead of a large second group (at xb,
 * where F misses it by an ulp the other way): the float prefix through
 * the first group runs ahead of the exact one (ahead = 1) or lags
 * behind it (ahead = 0) by about 2^-22 of itself. A target chosen
 * between the two makes the float walk stop one token early (ahead) or
 * late (behind): test (b) must refuse the first, test (a) the second.
 * The certificate allows kappa (about 2^-22.9) on every weight in either
 * direction, so it refuses; with kappa / 2 it lets the wrong token
 * through, which shows that the test can fail. */
typedef struct edge_row {
    sift_candidate *c;
    size_t n, na;
    float xa, xb;
    uint64_t wa;
    sift__u128 W; /* the exact total */
} edge_row;

static void edge_row_make(int ahead, edge_row *e)
{
    e->xa = find_split(-0.69f, -0.6f, ahead);
    e->xb = find_split(-1.38f, -1.3f, !ahead);
    ck_assert(e->xa == e->xa && e->xb == e->xb);
    e->na = 1000;
    e->n = 1 + e->na + 40000;
    e->c = malloc(e->n * sizeof *e->c);
    ck_assert_ptr_nonnull(e->c);
    e->c[0].id = 0;
    e->c[0].logit = 0.0f;
    for (size_t i = 1; i < e->n; i++) {
        e->c[i].id = (int32_t)i;
        e->c[i].logit = i <= e->na ? e->xa : e->xb;
    }
    e->wa = sift__weight(sift__expf(e->xa));
    uint64_t wb = sift__weight(sift__expf(e->xb));
    e->W = sift__u128_from((uint64_t)1 << 62);
    for (size_t i = 1; i < e->n; i++)
        e->W = sift__u128_add64(e->W, i <= e->na ? e->wa : wb);
}

/* The exact prefix through canonical position j <= na (the max, then
 * the first group by id). */
static sift__u128 edge_prefix(const edge_row *e, size_t j)
{
    sift__u128 P = sift__u128_from((uint64_t)1 << 62);
    for (size_t i = 1; i <= j; i++)
        P = sift__u128_add64(P, e->wa);
    return P;
}

/* The draw on the edge row, for targets around each 50th position of
 * the first group, at every level. */
static void edge_rows(int ahead, int *wrong_half, int *wrong_real, int *decided_real)
{
    edge_row e;
    edge_row_make(ahead, &e);
    sift_candidate *c = e.c;
    size_t n = e.n, na = e.na;
    sift__u128 W = e.W;
    for (size_t j = 50; j < na; j += 50) {
        sift__u128 Pj = edge_prefix(&e, j);
        /* the smallest u with T(u) >= P_j: from there up the walk passes
         * position j, below it the walk stops there */
        uint64_t lo = 0, hi = UINT64_MAX;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (sift__u128_cmp(sift__u128_scale_u64(W, mid), Pj) >= 0)
                hi = mid;
            else
                lo = mid + 1;
        }
        for (int d = 0; d < 4; d++) {
            uint64_t step = (uint64_t)1 << (28 + 2 * d);
            uint64_t u = ahead ? lo + step : lo - step;
            size_t pos;
            int32_t want = oracle_draw(c, n, u, &pos);
            ck_assert_uint_eq(pos, ahead ? j + 1 : j);
            for (int level = 0; level < n_levels(); level++) {
                sift__ctx ctx;
                memset(&ctx, 0, sizeof ctx);
                ctx.ws = &ws;
                sift__arr a = {c, n, (int32_t)n, SIFT__ORDER_ID, 0};
                int32_t id = -1;
                if (sift__fdraw_at(&ctx, &a, 0.0f, u, level, sift__fdraw_kappa(), &id)) {
                    ++*decided_real;
                    *wrong_real += id != want;
                }
                if (sift__fdraw_at(&ctx, &a, 0.0f, u, level, sift__fdraw_kappa() / 2, &id))
                    *wrong_half += id != want;
            }
        }
    }
    printf("check_fdraw: edge rows, float prefix %s (xa = %a, xb = %a): with kappa %d decided, "
           "%d wrong; with kappa / 2, %d wrong\n",
           ahead ? "ahead" : "behind", (double)e.xa, (double)e.xb, *decided_real, *wrong_real,
           *wrong_half);
    free(c);
}

START_TEST(test_rows_on_the_bounds_edge_never_pass_a_wrong_token)
{
    for (int ahead = 0; ahead < 2; ahead++) {
        int wrong_half = 0, wrong_real = 0, decided_real = 0;
        edge_rows(ahead, &wrong_half, &wrong_real, &decided_real);
        ck_assert_int_eq(wrong_real, 0);
        ck_assert_int_gt(wrong_half, 0);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* top_p's cut                                                         */
/* ------------------------------------------------------------------ */

/* The oracle: the shortest canonical prefix whose exact mass reaches
 * ceil(p W): its length and its last token's key. */
static size_t oracle_cut(const sift_candidate *c, size_t n, float p, uint64_t *key)
{
    sift_candidate *s = malloc(n * sizeof *s);
    ck_assert_ptr_nonnull(s);
    memcpy(s, c, n * sizeof *s);
    qsort(s, n, sizeof *s, canon_cmp);
    float m = s[0].logit;
    sift__u128 W = {0, 0};
    for (size_t i = 0; i < n; i++)
        W = sift__u128_add64(W, sift__weight(sift__expf(s[i].logit - m)));
    sift__u128 T = sift__u128_scale_float(W, p, 1), run = {0, 0};
    size_t i = 0;
    for (; i < n; i++) {
        run = sift__u128_add64(run, sift__weight(sift__expf(s[i].logit - m)));
        if (sift__u128_cmp(run, T) >= 0)
            break;
    }
    i = i < n ? i : n - 1;
    *key = sift__ckey(s[i].logit, s[i].id);
    free(s);
    return i + 1;
}

START_TEST(test_the_float_cut_gives_the_walks_prefix_or_none)
{
    static const char *names[SH__COUNT] = {"peaked", "bf16", "flat", "adversarial"};
    tu_rng r = {0xc07c07ull};
    sift_candidate *c = malloc(MAX_N * sizeof *c);
    ck_assert_ptr_nonnull(c);
    for (int level = 0; level < n_levels(); level++) {
        for (int shape = 0; shape < SH__COUNT; shape++) {
            int decided = 0, tried = 0;
            for (int k = 0; k < 16; k++) {
                size_t n = (size_t)tu_range(&r, 16384, 40000);
                make_row(&r, shape, c, n);
                float m = max_logit(c, n);
                if (!(m > -INFINITY && m < INFINITY))
                    continue;
                float p = k % 4 == 0 ? 0.95f : (float)tu_unif(&r);
                sift__ctx ctx;
                memset(&ctx, 0, sizeof ctx);
                ctx.ws = &ws;
                sift__arr a = {c, n, (int32_t)n, SIFT__ORDER_NONE, 0};
                uint64_t key = 0, want_key;
                size_t len = 0;
                tried++;
                if (sift__fcut_at(&ctx, &a, m, p, level, sift__fdraw_kappa(), &key, &len)) {
                    decided++;
                    size_t want = oracle_cut(c, n, p, &want_key);
                    ck_assert_msg(len == want && key == want_key,
                                  "level %d, %s row, n %zu, p %a: the float cut gave %zu, the "
                                  "walk %zu",
                                  level, names[shape], n, (double)p, len, want);
                }
            }
            printf("check_fdraw: level %d, %s rows: %d of %d cuts decided\n", level, names[shape],
                   decided, tried);
            if (shape != SH_TU)
                ck_assert_int_ge(decided, tried * 2 / 3);
        }
    }
    free(c);
}
END_TEST

static float fnext(float p, int up)
{
    return nextafterf(p, up ? 1.0f : 0.0f);
}

/* The edge rows of test_rows_on_the_bounds_edge_never_pass_a_wrong_token
 * for the cut: p is chosen so that T = ceil(p W) lies just above the
 * exact prefix through position j (ahead: the float prefix reaches it a
 * token early) or at most that prefix (behind: a token late). */
static void edge_cuts(int ahead, int *wrong_half, int *wrong_real, int *decided_real)
{
    edge_row e;
    edge_row_make(ahead, &e);
    sift_candidate *c = e.c;
    size_t n = e.n, na = e.na;
    sift__u128 W = e.W;
    for (size_t j = 50; j < na; j += 50) {
        sift__u128 Pj = edge_prefix(&e, j);
        /* the smallest float p with ceil(p W) > P_j, by its bits */
        uint32_t lo = fbits(0.0f), hi = fbits(1.0f);
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (sift__u128_cmp(sift__u128_scale_float(W, bfloat(mid), 1), Pj) > 0)
                hi = mid;
            else
                lo = mid + 1;
        }
        float p = bfloat(lo);
        for (int d = 0; d < 3; d++) {
            /* ahead: p and above (the cut passes j); behind: below it */
            p = ahead ? (d ? fnext(p, 1) : p) : fnext(p, 0);
            uint64_t want_key;
            size_t want = oracle_cut(c, n, p, &want_key);
            ck_assert_uint_eq(want, ahead ? j + 2 : j + 1);
            for (int level = 0; level < n_levels(); level++) {
                sift__ctx ctx;
                memset(&ctx, 0, sizeof ctx);
                ctx.ws = &ws;
                sift__arr a = {c, n, (int32_t)n, SIFT__ORDER_ID, 0};
                uint64_t key;
                size_t len;
                if (sift__fcut_at(&ctx, &a, 0.0f, p, level, sift__fdraw_kappa(), &key, &len)) {
                    ++*decided_real;
                    *wrong_real += len != want || key != want_key;
                }
                if (sift__fcut_at(&ctx, &a, 0.0f, p, level, sift__fdraw_kappa() / 2, &key, &len))
                    *wrong_half += len != want || key != want_key;
            }
        }
    }
    printf("check_fdraw: edge rows for the cut, float prefix %s: with kappa %d decided, %d wrong; "
           "with kappa / 2, %d wrong\n",
           ahead ? "ahead" : "behind", *decided_real, *wrong_real, *wrong_half);
    free(c);
}

START_TEST(test_cuts_on_the_bounds_edge_never_pass_a_wrong_prefix)
{
    for (int ahead = 0; ahead < 2; ahead++) {
        int wrong_half = 0, wrong_real = 0, decided_real = 0;
        edge_cuts(ahead, &wrong_half, &wrong_real, &decided_real);
        ck_assert_int_eq(wrong_real, 0);
        ck_assert_int_gt(wrong_half, 0);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* XTC's removal set                                                   */
/* ------------------------------------------------------------------ */

/* The oracle: |{i : w_i >= max(ceil(t W), 1)}|. */
static size_t oracle_xtc_count(const sift_candidate *c, size_t n, float t)
{
    float m = max_logit(c, n);
    sift__u128 W = {0, 0};
    for (size_t i = 0; i < n; i++)
        W = sift__u128_add64(W, sift__weight(sift__expf(c[i].logit - m)));
    sift__u128 T = sift__u128_scale_float(W, t, 1);
    if (T.lo == 0 && T.hi == 0)
        T.lo = 1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += sift__u128_cmp(sift__u128_from(sift__weight(sift__expf(c[i].logit - m))), T) >= 0;
    return k;
}

/* Random rows: a "nothing to remove" answer always matches the oracle,
 * and flat rows (no token near the threshold) get it. Then rows where
 * the second token's exact weight sits at the threshold, for every float
 * threshold near it: the answer is never "nothing" when the oracle
 * counts two. */
START_TEST(test_xtc_none_only_when_the_set_has_at_most_one_token)
{
    static const char *names[SH__COUNT] = {"peaked", "bf16", "flat", "adversarial"};
    tu_rng r = {0x7c7c7cull};
    sift_candidate *c = malloc(MAX_N * sizeof *c);
    ck_assert_ptr_nonnull(c);
    for (int level = 0; level < n_levels(); level++) {
        for (int shape = 0; shape < SH__COUNT; shape++) {
            int none = 0, tried = 0;
            for (int k = 0; k < 12; k++) {
                size_t n = (size_t)tu_range(&r, 16384, 40000);
                make_row(&r, shape, c, n);
                float m = max_logit(c, n);
                if (!(m > -INFINITY && m < INFINITY))
                    continue;
                float t = k % 3 == 0 ? 0.1f : (float)(0.5 * tu_unif(&r));
                sift__ctx ctx;
                memset(&ctx, 0, sizeof ctx);
                ctx.ws = &ws;
                sift__arr a = {c, n, (int32_t)n, SIFT__ORDER_NONE, 0};
                tried++;
                if (sift__fxtc_none_at(&ctx, &a, m, t, level, sift__fdraw_kappa())) {
                    none++;
                    ck_assert_uint_le(oracle_xtc_count(c, n, t), 1);
                }
            }
            printf("check_fdraw: level %d, %s rows: %d of %d xtc sets shown to hold at most one "
                   "token\n",
                   level, names[shape], none, tried);
            if (shape == SH_FLAT)
                ck_assert_int_ge(none, tried * 2 / 3);
        }
    }
    /* the second token at the threshold: top at 0, the second at x2
     * (its float weight an ulp below the exact one), a flat rest */
    float x2 = find_split(-0.69f, -0.6f, 0);
    size_t n = 20000;
    for (size_t i = 0; i < n; i++) {
        c[i].id = (int32_t)i;
        c[i].logit = i == 0 ? 0.0f : i == 1 ? x2 : -9.0f - (float)(i % 7) * 0.01f;
    }
    float m = 0.0f;
    sift__u128 W = {0, 0};
    for (size_t i = 0; i < n; i++)
        W = sift__u128_add64(W, sift__weight(sift__expf(c[i].logit - m)));
    sift__u128 w2 = sift__u128_from(sift__weight(sift__expf(x2)));
    /* the largest float t with ceil(t W) <= w2, and its neighbours */
    uint32_t lo = fbits(0.0f), hi = fbits(0.5f);
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (sift__u128_cmp(sift__u128_scale_float(W, bfloat(mid), 1), w2) <= 0)
            lo = mid;
        else
            hi = mid - 1;
    }
    int wrong = 0, wrong0 = 0, checked = 0;
    for (uint32_t b = lo - 8; b <= lo + 8; b++) {
        float t = bfloat(b);
        size_t want = oracle_xtc_count(c, n, t);
        for (int level = 0; level < n_levels(); level++) {
            sift__ctx ctx;
            memset(&ctx, 0, sizeof ctx);
            ctx.ws = &ws;
            sift__arr a = {c, n, (int32_t)n, SIFT__ORDER_ID, 0};
            checked++;
            wrong += sift__fxtc_none_at(&ctx, &a, m, t, level, sift__fdraw_kappa()) && want > 1;
            wrong0 += sift__fxtc_none_at(&ctx, &a, m, t, level, 0.0) && want > 1;
        }
    }
    printf("check_fdraw: xtc at the threshold: %d checks, %d wrong (%d with kappa 0)\n", checked,
           wrong, wrong0);
    ck_assert_int_eq(wrong, 0);
    free(c);
}
END_TEST

/* XTC's float test backs off on rows where it keeps failing (two head
 * tokens above the threshold, the full pass after the tail route), and
 * the back-off is chain state: reset clears it, clone copies it. Only
 * the cost depends on it: the tokens match a chain without the test. */
START_TEST(test_xtc_back_off_is_reset_and_cloned)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 5;
    sift_chain *on, *off;
    ck_assert_int_eq(sift_chain_new(&on, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_new(&off, &p, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp_ext(on, 0.8f, 0.5f, 1.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp_ext(off, 0.8f, 0.5f, 1.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_xtc(on, 1.0f, 0.05f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_xtc(off, 1.0f, 0.05f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(on, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(off, NULL), SIFT_OK);
    off->fdraw_off = 1;
    tu_rng r = {0xbac0ff};
    int32_t V = 20011;
    float *row = malloc((size_t)V * sizeof *row);
    ck_assert_ptr_nonnull(row);
    for (int k = 0; k < 12; k++) {
        /* three tokens far above a flat rest: each holds about a third */
        for (int32_t i = 0; i < V; i++)
            row[i] = (float)(tu_unif(&r) - 0.5);
        for (int h = 0; h < 3; h++)
            row[(k * 7919 + h * 104729) % V] = 14.0f + 0.01f * (float)h;
        int32_t a = -1, b = -1;
        ck_assert_int_eq(sift_chain_sample(on, row, V, &a, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(off, row, V, &b, NULL), SIFT_OK);
        ck_assert_int_eq(a, b);
    }
    if (sift__fdraw_level() != SIFT__FDRAW_SCALAR) {
        ck_assert_uint_gt(on->fx_fails, 0);
        sift_chain *cl;
        ck_assert_int_eq(sift_chain_clone(on, &cl, NULL), SIFT_OK);
        ck_assert_uint_eq(cl->fx_fails, on->fx_fails);
        ck_assert_uint_eq(cl->fx_skip, on->fx_skip);
        sift_chain_free(cl);
        sift_chain_reset(on);
        ck_assert_uint_eq(on->fx_fails, 0);
        ck_assert_uint_eq(on->fx_skip, 0);
    }
    free(row);
    sift_chain_free(on);
    sift_chain_free(off);
}
END_TEST

/* top_p's min_keep in the chains below (chain_pair). */
static int32_t pair_min_keep = 1;

/* Two chains alike, seeded with seed: a temperature 0.7, temp_ext
 * 0.8/0.5/1, XTC 1.0/0.1 and top_p (min_keep pair_min_keep) where asked,
 * in that order, then dist; the second (*off) without the float paths. */
static void chain_pair(uint64_t seed, int temp, int temp_ext, int xtc, float top_p, sift_chain **on,
                       sift_chain **off)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = seed;
    sift_chain **cs[2] = {on, off};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(sift_chain_new(cs[k], &p, NULL), SIFT_OK);
        sift_chain *c = *cs[k];
        if (temp)
            ck_assert_int_eq(sift_chain_add_temp(c, 0.7f, NULL), SIFT_OK);
        if (temp_ext)
            ck_assert_int_eq(sift_chain_add_temp_ext(c, 0.8f, 0.5f, 1.0f, NULL), SIFT_OK);
        if (xtc)
            ck_assert_int_eq(sift_chain_add_xtc(c, 1.0f, 0.1f, 1, NULL), SIFT_OK);
        if (top_p < 1.0f)
            ck_assert_int_eq(sift_chain_add_top_p(c, top_p, pair_min_keep, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    }
    (*off)->fdraw_off = 1;
}

/* Slices of 40,000 present tokens (a flat head over a far tail, with the
 * tail's mass): the walk over the present tokens runs the certificate
 * rules (certify_mass) between the stages' applies, and they write the
 * scratch where XTC's float weights would wait; the float draw must not
 * trust a record left there (it once did: 126 of 200 wrong tokens for
 * xtc + dist, every one for xtc + top_p + dist). The tokens and the RNG
 * must match a chain without the float paths, step by step. */
static int canon_cmp_desc(const void *a, const void *b)
{
    return canon_cmp(a, b);
}

static void slices_agree(float top_p)
{
    sift_chain *on, *off;
    chain_pair(9, 0, 0, 1, top_p, &on, &off);
    int32_t V = 150000, K = 40000;
    sift_candidate *all = malloc((size_t)V * sizeof *all);
    ck_assert_ptr_nonnull(all);
    tu_rng r = {0x51ce};
    int decided = 0;
    for (int step = 0; step < 24; step++) {
        for (int32_t i = 0; i < V; i++) {
            all[i].id = i;
            all[i].logit = i < K ? (float)(-0.008 * tu_unif(&r)) : (float)(-30.0 - tu_unif(&r));
        }
        qsort(all, (size_t)V, sizeof *all, canon_cmp_desc);
        double tail = 0.0;
        for (int32_t i = K; i < V; i++)
            tail += exp((double)all[i].logit - (double)all[0].logit);
        sift_slice sl = {V,          K, all, 0, NULL, SIFT_SLICE_CANONICAL | SIFT_SLICE_TAIL_MASS,
                         tail * 1.01};
        int32_t a = -1, b = -1;
        sift_status sa = sift_chain_sample_slice(on, &sl, &a, NULL);
        sift_status sb = sift_chain_sample_slice(off, &sl, &b, NULL);
        ck_assert_int_eq(sa, sb);
        if (sa != SIFT_OK)
            continue;
        decided++;
        ck_assert_int_eq(a, b);
        ck_assert(memcmp(&on->rng, &off->rng, sizeof on->rng) == 0);
        ck_assert_int_eq(sift_chain_accept(on, a, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(off, b, NULL), SIFT_OK);
    }
    printf("check_fdraw: slices, xtc + %s: %d of 24 steps decided on the slice, all equal\n",
           top_p < 1.0f ? "top_p + dist" : "dist", decided);
    ck_assert_int_gt(decided, 12);
    free(all);
    sift_chain_free(on);
    sift_chain_free(off);
}

START_TEST(test_slices_with_xtc_agree_with_and_without_the_float_paths)
{
    slices_agree(1.0f);
    slices_agree(0.5f);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Whole chains                                                        */
/* ------------------------------------------------------------------ */

/* SIFT_FDRAW_CHAIN_STEPS (environment): the steps of each chain below
 * (default 80; make check-long sets 25,000). */
static int chain_steps(void)
{
    const char *e = getenv("SIFT_FDRAW_CHAIN_STEPS");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 && n < 100000000 ? (int)n : 80;
}

/* dist over whole flat and peaked rows, with the draw and without it
 * (the chain's switch): the same tokens and the same RNG, step by step.
 * dist alone draws from the row (select_row); after a temperature it
 * draws from the loaded array (dist_apply). At the AVX2 and AVX-512
 * levels the draw must have decided most steps. */
static void chains_agree(int with_temp, float top_p, int xtc, int temp_ext)
{
    sift_chain *on, *off;
    chain_pair(77, with_temp, temp_ext, xtc, top_p, &on, &off);
    on->carry_verify = 1; /* every take of carried weights checked afresh */
    tu_rng r = {0xd157};
    int32_t V = 30011;
    float *row = malloc((size_t)V * sizeof *row);
    ck_assert_ptr_nonnull(row);
    int steps = chain_steps();
    for (int k = 0; k < steps; k++) {
        int flat = k % 4 != 3;
        for (int32_t i = 0; i < V; i++)
            row[i] = flat ? (float)(2.0 * tu_unif(&r) - 1.0) : (float)(2.0 * tu_normal(&r));
        int32_t a = -1, b = -1;
        ck_assert_int_eq(sift_chain_sample(on, row, V, &a, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(off, row, V, &b, NULL), SIFT_OK);
        ck_assert_int_eq(a, b);
        ck_assert(memcmp(&on->rng, &off->rng, sizeof on->rng) == 0);
    }
    printf("check_fdraw: chain %s%s%s: the float draw and cut decided %llu of %llu attempts in "
           "%d steps, %llu carried float weights taken\n",
           with_temp  ? "temp + "
           : temp_ext ? "temp_ext + "
                      : "",
           xtc ? "xtc + " : "", top_p < 1.0f ? "top_p + dist" : "dist",
           (unsigned long long)on->n_fdraw, (unsigned long long)on->n_fdraw_tries, steps,
           (unsigned long long)on->n_fcarried);
    ck_assert_uint_eq(off->n_fdraw_tries, 0);
    ck_assert_uint_eq(on->n_carry_bad, 0);
    if (sift__fdraw_level() != SIFT__FDRAW_SCALAR) {
        ck_assert_uint_ge(on->n_fdraw, (uint64_t)steps / 2);
        /* XTC's weights (flat rows) and top_p's when it keeps enough
         * (p = 0.9 and 0.95 on flat rows) reach the next stage */
        if (xtc || (top_p >= 0.9f && top_p < 1.0f))
            ck_assert_uint_ge(on->n_fcarried, (uint64_t)steps / 2);
    } else {
        ck_assert_uint_eq(on->n_fdraw_tries, 0);
    }
    free(row);
    sift_chain_free(on);
    sift_chain_free(off);
}

START_TEST(test_chains_with_and_without_the_float_draw_agree)
{
    chains_agree(0, 1.0f, 0, 0);
    chains_agree(1, 1.0f, 0, 0);
    chains_agree(0, 0.9f, 0, 0);
    chains_agree(1, 0.5f, 0, 0);
    chains_agree(0, 1.0f, 1, 0);
    chains_agree(0, 0.95f, 1, 0);
    /* temp_ext keeps the row's tail route away, so dist's route inside
     * the full pass runs, and must not run over float weights left by
     * xtc (it writes their scratch) */
    chains_agree(0, 1.0f, 1, 1);
    chains_agree(0, 0.95f, 1, 1);
}
END_TEST

/* top_p's float carry where it keeps a canonical prefix and where
 * min_keep sets the cut: flat rows of 30,011, as above, sampled whole
 * with top_p 0.05 and min_keep 20,000 (the cut from sift__cut_top, 20,000
 * kept), and as complete canonical slices (the walk over the whole set
 * keeps a prefix of a canonical array) with top_p 0.9, alone and after
 * XTC. The same tokens and RNG as without the float paths, every take
 * checked afresh (carry_verify), and the takes required. */
static void carry_edges_agree(int slices, int xtc, float top_p, int32_t min_keep)
{
    sift_chain *on, *off;
    pair_min_keep = min_keep;
    chain_pair(78, 0, 0, xtc, top_p, &on, &off);
    pair_min_keep = 1;
    on->carry_verify = 1;
    tu_rng r = {0xca11};
    int32_t V = 30011;
    float *row = malloc((size_t)V * sizeof *row);
    sift_candidate *all = malloc((size_t)V * sizeof *all);
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(all);
    int steps = chain_steps();
    for (int k = 0; k < steps; k++) {
        for (int32_t i = 0; i < V; i++) {
            row[i] = (float)(2.0 * tu_unif(&r) - 1.0);
            all[i].id = i;
            all[i].logit = row[i];
        }
        int32_t a = -1, b = -1;
        if (slices) {
            qsort(all, (size_t)V, sizeof *all, canon_cmp_desc);
            sift_slice sl = {V, V, all, 0, NULL, SIFT_SLICE_CANONICAL, 0.0};
            ck_assert_int_eq(sift_chain_sample_slice(on, &sl, &a, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_sample_slice(off, &sl, &b, NULL), SIFT_OK);
        } else {
            ck_assert_int_eq(sift_chain_sample(on, row, V, &a, NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_sample(off, row, V, &b, NULL), SIFT_OK);
        }
        ck_assert_int_eq(a, b);
        ck_assert(memcmp(&on->rng, &off->rng, sizeof on->rng) == 0);
    }
    printf("check_fdraw: %s, %stop_p %.2f (min_keep %d) + dist: %llu carried float weights "
           "taken in %d steps, all equal\n",
           slices ? "complete canonical slices" : "rows", xtc ? "xtc + " : "", (double)top_p,
           (int)min_keep, (unsigned long long)on->n_fcarried, steps);
    ck_assert_uint_eq(on->n_carry_bad, 0);
    if (sift__fdraw_level() != SIFT__FDRAW_SCALAR)
        ck_assert_uint_ge(on->n_fcarried, (uint64_t)steps * (xtc ? 3u : 1u) / 2);
    free(row);
    free(all);
    sift_chain_free(on);
    sift_chain_free(off);
}

START_TEST(test_top_ps_float_carry_at_min_keep_and_on_canonical_arrays)
{
    carry_edges_agree(0, 0, 0.05f, 20000);
    carry_edges_agree(1, 0, 0.9f, 1);
    carry_edges_agree(1, 1, 0.9f, 1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The soak                                                            */
/* ------------------------------------------------------------------ */

/* SIFT_FDRAW_MIN_STEPS (environment): the soak's least number of decided
 * steps per path (default 2,000; make check-long sets 10,000,000);
 * SIFT_FDRAW_SEED another stream of rows. */
static long soak_min_steps(void)
{
    const char *e = getenv("SIFT_FDRAW_MIN_STEPS");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : 2000;
}

/* The first i < n with P[i] > T (strict) or P[i] >= T; n when none. */
static size_t first_prefix(const sift__u128 *P, size_t n, sift__u128 T, int strict)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = sift__u128_cmp(P[mid], T);
        if (strict ? c > 0 : c >= 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Random rows (the four shapes, 16,384 to 24,000 candidates, half in a
 * random storage order), 64 targets each for the draw, the cut and XTC's
 * test, at a kernel level cycling over the machine's (the scalar one on
 * every eighth row): every decided answer against the definition, read
 * off the row's exact weights in canonical order and their prefix sums
 * (the walk of the oracles above, once per row). Runs until each path
 * has decided soak_min_steps() steps. */
START_TEST(test_soak_the_float_paths_against_the_exact_prefixes)
{
    const char *e = getenv("SIFT_FDRAW_SEED");
    tu_rng r = {e && *e ? strtoull(e, NULL, 10) : 0x50a4f10a7ull};
    enum { SOAK_N = 24000, PER_ROW = 64 };
    sift_candidate *c = malloc(SOAK_N * sizeof *c), *sc = malloc(SOAK_N * sizeof *sc);
    uint64_t *w = malloc(SOAK_N * sizeof *w);
    sift__u128 *P = malloc(SOAK_N * sizeof *P);
    ck_assert(c && sc && w && P);
    const long need = soak_min_steps();
    long done[3] = {0, 0, 0}, tried[3] = {0, 0, 0}, rows = 0;
    int top = sift__fdraw_level();
    while (done[0] < need || done[1] < need || done[2] < need) {
        int shape = (int)(rows % SH__COUNT);
        int level =
            top == SIFT__FDRAW_SCALAR || rows % 8 == 7 ? SIFT__FDRAW_SCALAR : 1 + (int)(rows % top);
        rows++;
        size_t n = (size_t)tu_range(&r, 16384, SOAK_N);
        make_row(&r, shape, c, n);
        float m = max_logit(c, n);
        if (!(m > -INFINITY && m < INFINITY))
            continue;
        memcpy(sc, c, n * sizeof *c);
        qsort(sc, n, sizeof *sc, canon_cmp);
        sift__u128 run = {0, 0};
        uint64_t w1 = 0, w2 = 0; /* the two largest weights */
        for (size_t i = 0; i < n; i++) {
            w[i] = sift__weight(sift__expf(sc[i].logit - m));
            run = sift__u128_add64(run, w[i]);
            P[i] = run;
            w2 = w[i] > w1 ? w1 : (w[i] > w2 ? w[i] : w2);
            w1 = w[i] > w1 ? w[i] : w1;
        }
        sift__arr a = {c, n, (int32_t)n, SIFT__ORDER_NONE, 0};
        for (int k = 0; k < PER_ROW; k++) {
            sift__ctx ctx;
            memset(&ctx, 0, sizeof ctx);
            ctx.ws = &ws;
            /* the draw */
            uint64_t u = tu_next(&r);
            int32_t id = -1;
            tried[0]++;
            if (sift__fdraw_at(&ctx, &a, m, u, level, sift__fdraw_kappa(), &id)) {
                size_t i = first_prefix(P, n, sift__u128_scale_u64(P[n - 1], u), 1);
                i = i < n ? i : n - 1;
                ck_assert_msg(id == sc[i].id,
                              "row %ld (shape %d, n %zu, level %d): draw %d, want %d", rows, shape,
                              n, level, id, sc[i].id);
                done[0]++;
            }
            /* the cut */
            float p = k % 4 == 0 ? 0.95f : (float)tu_unif(&r);
            uint64_t key = 0;
            size_t len = 0;
            tried[1]++;
            if (p > 0.0f && p < 1.0f &&
                sift__fcut_at(&ctx, &a, m, p, level, sift__fdraw_kappa(), &key, &len)) {
                size_t i = first_prefix(P, n, sift__u128_scale_float(P[n - 1], p, 1), 0);
                i = i < n ? i : n - 1;
                ck_assert_msg(len == i + 1 && key == sift__ckey(sc[i].logit, sc[i].id),
                              "row %ld (shape %d, n %zu, level %d), p %a: cut %zu, want %zu", rows,
                              shape, n, level, (double)p, len, i + 1);
                done[1]++;
            }
            /* XTC's test: at most one weight reaches T = max(ceil(t W),
             * 1) when the second largest does not */
            float t = (float)(0.5 * tu_unif(&r));
            tried[2]++;
            if (t > 0.0f && sift__fxtc_none_at(&ctx, &a, m, t, level, sift__fdraw_kappa())) {
                sift__u128 T = sift__u128_scale_float(P[n - 1], t, 1);
                uint64_t Tl = T.hi ? UINT64_MAX : (T.lo ? T.lo : 1);
                ck_assert_msg(T.hi || w2 < Tl,
                              "row %ld (shape %d, n %zu, level %d), t %a: XTC's set has two tokens",
                              rows, shape, n, level, (double)t);
                done[2]++;
            }
        }
    }
    printf("check_fdraw: soak over %ld rows: draw %ld of %ld decided, cut %ld of %ld, xtc %ld "
           "of %ld, each equal to the exact prefixes\n",
           rows, done[0], tried[0], done[1], tried[1], done[2], tried[2]);
    free(c);
    free(sc);
    free(w);
    free(P);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("fdraw");
    TCase *tc = tcase_create("lemma");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_exact_weight_is_within_rho_of_e_to_the_x);
    tcase_add_test(tc, test_float_exponential_kernels_match_the_definition_within_the_bound);
    tcase_add_test(tc, test_the_float_pass_reports_a_nan);
    suite_add_tcase(s, tc);
    TCase *td = tcase_create("draw");
    tcase_set_timeout(td, 300);
    tcase_add_checked_fixture(td, setup, teardown);
    tcase_add_test(td, test_the_float_draw_gives_the_walks_token_or_none);
    tcase_add_test(td, test_rows_on_the_bounds_edge_never_pass_a_wrong_token);
    tcase_add_test(td, test_the_float_cut_gives_the_walks_prefix_or_none);
    tcase_add_test(td, test_cuts_on_the_bounds_edge_never_pass_a_wrong_prefix);
    tcase_add_test(td, test_xtc_none_only_when_the_set_has_at_most_one_token);
    tcase_add_test(td, test_xtc_back_off_is_reset_and_cloned);
    tcase_add_test(td, test_slices_with_xtc_agree_with_and_without_the_float_paths);
    tcase_add_test(td, test_chains_with_and_without_the_float_draw_agree);
    tcase_add_test(td, test_top_ps_float_carry_at_min_keep_and_on_canonical_arrays);
    tcase_add_test(td, test_soak_the_float_paths_against_the_exact_prefixes);
    suite_add_tcase(s, td);
    return s;
}

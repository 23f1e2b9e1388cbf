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
 */
#include "harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift_internal.h"

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

Suite *tu_suite(void)
{
    Suite *s = suite_create("fdraw");
    TCase *tc = tcase_create("lemma");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_exact_weight_is_within_rho_of_e_to_the_x);
    suite_add_tcase(s, tc);
    return s;
}

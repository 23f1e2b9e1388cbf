/*
 * check_select.c - canonical order, top-k cuts and weighted prefixes
 * against plain sorting, on random and adversarial arrays.
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"

static sift__ws ws;
static sift__alloc al;

static void setup(void)
{
    ck_assert_int_eq(sift__alloc_init(&al, NULL, NULL), SIFT_OK);
    memset(&ws, 0, sizeof ws);
    ck_assert_int_eq(sift__ws_reserve(&ws, &al, 300000, NULL), SIFT_OK);
}

static void teardown(void)
{
    sift__ws_free(&ws, &al);
}

static sift__ctx make_ctx(void)
{
    sift__ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.ws = &ws;
    ctx.selected = -1;
    return ctx;
}

/* A random array: a row of some shape, then a random subset of it in
 * random storage order, so ids are unique but not contiguous. */
static size_t random_cands(tu_rng *r, sift_candidate *c, int32_t maxV)
{
    int32_t V = tu_rand_V(r, maxV);
    float *row = malloc((size_t)V * sizeof *row);
    tu_row(r, row, V, (int)tu_range(r, 0, TU_ROW__COUNT - 1));
    size_t n = 0;
    double keep = tu_unif(r) < 0.5 ? 1.0 : tu_unif(r);
    for (int32_t i = 0; i < V; i++)
        if (tu_unif(r) < keep || n == 0) {
            c[n].id = i;
            c[n].logit = row[i];
            n++;
        }
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)tu_range(r, 0, (int64_t)i - 1);
        sift_candidate t = c[i - 1];
        c[i - 1] = c[j];
        c[j] = t;
    }
    free(row);
    return n;
}

START_TEST(test_sort_canon_matches_qsort_with_ties_and_neg_inf)
{
    tu_rng r = {1000 + (uint64_t)_i};
    sift_candidate *c = malloc(300000 * sizeof *c), *d = malloc(300000 * sizeof *d);
    for (int rep = 0; rep < 50; rep++) {
        size_t n = random_cands(&r, c, rep % 10 == 0 ? 100000 : 3000);
        memcpy(d, c, n * sizeof *c);
        or_arr oa = {d, n, 0};
        or_sort(&oa);
        sift__sort_canon(c, n, ws.cand2);
        for (size_t i = 0; i < n; i++) {
            ck_assert_int_eq(c[i].id, d[i].id);
            ck_assert(memcmp(&c[i].logit, &d[i].logit, 4) == 0 || c[i].logit == d[i].logit);
        }
        sift__sort_id(c, n, ws.cand2);
        for (size_t i = 1; i < n; i++)
            ck_assert_int_lt(c[i - 1].id, c[i].id);
    }
    free(c);
    free(d);
}
END_TEST

/* Value sets that stress a canonical sort: all tied, few distinct values
 * (as bf16 rows), -inf mixed in, -0 and +0 mixed (equal: ties by id),
 * runs already in order or reversed, and plain random values. */
enum { ADV_TIED, ADV_FEW, ADV_NEG_INF, ADV_ZEROS, ADV_SORTED, ADV_REVERSED, ADV_RANDOM, ADV__N };

static void adversarial(tu_rng *r, sift_candidate *c, size_t n, int kind)
{
    /* unique ids from a wide range, in random order */
    int32_t base = (int32_t)tu_range(r, 0, 1 << 20);
    for (size_t i = 0; i < n; i++)
        c[i].id = base + (int32_t)(i * (size_t)tu_range(r, 1, 3) + i);
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)tu_range(r, 0, (int64_t)i - 1);
        int32_t t = c[i - 1].id;
        c[i - 1].id = c[j].id;
        c[j].id = t;
    }
    for (size_t i = 0; i < n; i++) {
        float v;
        switch (kind) {
        case ADV_TIED: v = 1.5f; break;
        case ADV_FEW: v = (float)tu_range(r, -2, 2) * 0.25f; break;
        case ADV_NEG_INF: v = tu_unif(r) < 0.4 ? -INFINITY : (float)tu_normal(r); break;
        case ADV_ZEROS: v = tu_unif(r) < 0.5 ? -0.0f : (tu_unif(r) < 0.8 ? 0.0f : -1.0f); break;
        case ADV_SORTED: v = (float)(n - i) * 0.5f; break;
        case ADV_REVERSED: v = (float)i * 0.5f; break;
        default: v = (float)(4.0 * tu_normal(r)); break;
        }
        c[i].logit = v;
    }
}

static void assert_same_order(const sift_candidate *c, const sift_candidate *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(c[i].id, d[i].id);
        ck_assert(memcmp(&c[i].logit, &d[i].logit, sizeof c[i].logit) == 0);
    }
}

/* Sizes at and around the method thresholds of sift__sort_canon (24 and
 * 1024) and of its merge runs (16), on every adversarial value set: the
 * order is the oracle's qsort order, element for element, bits included. */
START_TEST(test_sort_canon_matches_qsort_at_sizes_around_its_thresholds)
{
    static const size_t sizes[] = {0,   1,   2,   3,    15,   16,   17,   23,   24,   25,  31,
                                   32,  33,  47,  48,   49,   63,   64,   65,   103,  104, 105,
                                   255, 256, 257, 1000, 1023, 1024, 1025, 1100, 2048, 2049};
    tu_rng r = {77 + (uint64_t)_i};
    sift_candidate *c = malloc(4096 * sizeof *c), *d = malloc(4096 * sizeof *d);
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
        for (int kind = 0; kind < ADV__N; kind++) {
            size_t n = sizes[z];
            adversarial(&r, c, n, kind);
            memcpy(d, c, n * sizeof *c);
            or_arr oa = {d, n, 0};
            or_sort(&oa);
            sift__sort_canon(c, n, ws.cand2);
            assert_same_order(c, d, n);
        }
    free(c);
    free(d);
}
END_TEST

/* A canonical array of which a few candidates changed (lowered, raised,
 * set to -inf, to -0/+0, to another candidate's logit, as penalties, DRY
 * or a bias do): the unchanged ones kept in place and the changed ones
 * set aside in random order or, for a monotone change, in their order,
 * sift__canon_merge gives the qsort order; from none changed to all,
 * around the sort thresholds. */
START_TEST(test_canon_merge_restores_canonical_order_after_some_candidates_change)
{
    static const size_t sizes[] = {1, 2, 5, 24, 25, 40, 104, 300, 1100};
    tu_rng r = {99 + (uint64_t)_i};
    sift_candidate *c = malloc(2048 * sizeof *c), *d = malloc(2048 * sizeof *d);
    sift_candidate *side = malloc(2048 * sizeof *side);
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
        for (int rep = 0; rep < 40; rep++) {
            size_t n = sizes[z];
            adversarial(&r, c, n, rep % ADV__N);
            or_arr oa = {c, n, 0};
            or_sort(&oa); /* a canonical array */
            size_t nt = rep < 3 ? (size_t)rep * n / 2 : (size_t)tu_range(&r, 0, (int64_t)n);
            if (rep % 5 == 4) /* around the insertion threshold */
                nt = (size_t)tu_range(&r, 20, 30) < n ? (size_t)tu_range(&r, 20, 30) : n;
            double p = n ? (double)nt / (double)n : 0.0;
            /* Every eighth: only the penalty's monotone change, the
             * changed ones in the order they had (canonical, but for
             * ties it makes). */
            int monotone = rep % 8 == 7;
            size_t u = 0, t = 0;
            for (size_t i = 0; i < n; i++) {
                sift_candidate x = c[i];
                if (tu_unif(&r) < p) {
                    switch (monotone ? 0 : tu_range(&r, 0, 5)) {
                    case 0: x.logit = x.logit > 0 ? x.logit / 1.1f : x.logit * 1.1f; break;
                    case 1: x.logit = x.logit > 0 ? x.logit * 1.7f : x.logit / 1.7f; break;
                    case 2: x.logit = -INFINITY; break;
                    case 3: x.logit = tu_unif(&r) < 0.5 ? -0.0f : 0.0f; break;
                    case 4: x.logit = c[tu_range(&r, 0, (int64_t)n - 1)].logit; break;
                    default: x.logit = (float)(4.0 * tu_normal(&r)); break;
                    }
                    side[t++] = x;
                } else {
                    c[u++] = x;
                }
            }
            for (size_t i = monotone ? 0 : t; i > 1; i--) {
                size_t j = (size_t)tu_range(&r, 0, (int64_t)i - 1);
                sift_candidate tt = side[i - 1];
                side[i - 1] = side[j];
                side[j] = tt;
            }
            memcpy(d, c, u * sizeof *c);
            memcpy(d + u, side, t * sizeof *side);
            or_arr od = {d, n, 0};
            or_sort(&od);
            sift__canon_merge(c, u, side, t);
            assert_same_order(c, d, n);
        }
    free(c);
    free(d);
    free(side);
}
END_TEST

START_TEST(test_cut_top_keeps_exactly_the_canonical_first_k)
{
    tu_rng r = {2000 + (uint64_t)_i};
    sift_candidate *c = malloc(300000 * sizeof *c), *d = malloc(300000 * sizeof *d);
    for (int rep = 0; rep < 100; rep++) {
        size_t n = random_cands(&r, c, rep % 10 == 0 ? 262144 : 5000);
        memcpy(d, c, n * sizeof *c);
        or_arr oa = {d, n, 0};
        or_sort(&oa);
        size_t k = (size_t)tu_range(&r, 1, (int64_t)n);
        if (rep % 3 == 0)
            k = (size_t)tu_range(&r, 1, n < 300 ? (int64_t)n : 300);
        sift__ctx ctx = make_ctx();
        uint64_t cut = sift__cut_top(&ctx, c, n, k);
        ck_assert_uint_eq(cut, sift__ckey(d[k - 1].logit, d[k - 1].id));
        size_t cnt = 0;
        for (size_t i = 0; i < n; i++)
            cnt += sift__ckey(c[i].logit, c[i].id) >= cut;
        ck_assert_uint_eq(cnt, k);
    }
    free(c);
    free(d);
}
END_TEST

/* sift__cut_top's counting path (n >= 65,536, k above n / 256): rows
 * whose keys crowd one 16-bit group (every logit equal; two values; -inf
 * and -0/+0 mixed; spread), n just below, at and above the threshold, k
 * on a group's edge, inside it, at 1 and at n - 1. */
START_TEST(test_cut_top_counting_path_keeps_exactly_the_canonical_first_k)
{
    static const size_t sizes[] = {65535, 65536, 65537, 100003};
    tu_rng r = {9100 + (uint64_t)_i};
    sift_candidate *c = malloc(110000 * sizeof *c), *d = malloc(110000 * sizeof *d);
    for (size_t si = 0; si < 4; si++) {
        size_t n = sizes[si];
        for (int kind = 0; kind < 4; kind++) {
            for (size_t i = 0; i < n; i++) {
                float x;
                switch (kind) {
                case 0: x = 0.75f; break;
                case 1: x = tu_unif(&r) < 0.3 ? 2.0f : 1.0f; break;
                case 2: {
                    double u = tu_unif(&r);
                    x = u < 0.3 ? -INFINITY : u < 0.5 ? -0.0f : u < 0.7 ? 0.0f : (float)u;
                    break;
                }
                default: x = (float)(2.0 * tu_normal(&r)); break;
                }
                c[i].id = (int32_t)((i * 7919) % n);
                c[i].logit = x;
            }
            memcpy(d, c, n * sizeof *c);
            or_arr oa = {d, n, 0};
            or_sort(&oa);
            size_t ks[6] = {1, n - 1, n / 2, n / 255 + 1, 0, 0};
            /* the first index where the top 16 bits of the key change */
            for (size_t i = 1; i < n; i++)
                if (sift__fkey(d[i].logit) >> 16 != sift__fkey(d[i - 1].logit) >> 16) {
                    ks[4] = i;
                    ks[5] = i + 1 < n ? i + 1 : i;
                    break;
                }
            for (int t = 0; t < 6; t++) {
                size_t k = ks[t];
                if (k == 0)
                    continue;
                sift__ctx ctx = make_ctx();
                uint64_t cut = sift__cut_top(&ctx, c, n, k);
                ck_assert_msg(cut == sift__ckey(d[k - 1].logit, d[k - 1].id), "n %zu kind %d k %zu",
                              n, kind, k);
            }
        }
    }
    free(c);
    free(d);
}
END_TEST

START_TEST(test_mass_prefix_matches_a_canonical_walk)
{
    tu_rng r = {3000 + (uint64_t)_i};
    sift_candidate *c = malloc(300000 * sizeof *c), *d = malloc(300000 * sizeof *d);
    uint64_t *w = malloc(300000 * sizeof *w), *wd = malloc(300000 * sizeof *wd);
    for (int rep = 0; rep < 200; rep++) {
        size_t n = random_cands(&r, c, rep % 20 == 0 ? 262144 : 3000);
        memcpy(d, c, n * sizeof *c);
        or_arr oa = {d, n, 0};
        or_sort(&oa);
        float m = d[0].logit;
        if (!(m > -INFINITY))
            continue;
        sift__u128 W = sift__weights(c, n, m, w);
        sift__u128 Wo = or_weights(&oa, wd);
        ck_assert(sift__u128_cmp(W, Wo) == 0);
        for (int t = 0; t < 5; t++) {
            int strict = (int)tu_range(&r, 0, 1);
            sift__u128 T;
            if (t == 0)
                T = sift__u128_from(0);
            else if (t == 1)
                T = W;
            else
                T = sift__u128_scale_u64(W, tu_next(&r));
            sift__ctx ctx = make_ctx();
            uint64_t cut;
            size_t len = sift__mass_prefix(&ctx, c, w, n, T, strict, &cut);
            size_t i = or_walk(wd, n, T, strict);
            if (i == n) {
                ck_assert_uint_eq(len, n);
            } else {
                ck_assert_uint_eq(len, i + 1);
                ck_assert_uint_eq(cut, sift__ckey(d[i].logit, d[i].id));
            }
        }
    }
    free(c);
    free(d);
    free(w);
    free(wd);
}
END_TEST

/* Rows for the band path of sift__mass_prefix (n >= 16,384): kind 0
 * flat U[-1, 1]; 1 peaked (N(0, 2) plus a head of 50 raised by U(5, 15));
 * 2 a heavy head placed only at indices the estimate's sample skips
 * (i mod 16 != 0); 3 few distinct logits (ties), a third of them -inf;
 * 4 every logit equal (all heavy: the estimate gives up); 5 bf16-rounded
 * peaked; 6 two tiers, a million times apart; 7 forty distinct logits
 * in [-1, 0] (every weight bucket one tie group of thousands, searched by
 * id); 8 +0, -0 (equal: one tie group), -0.25 and -inf. Ids are a
 * permutation. */
static void band_row(tu_rng *r, sift_candidate *c, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) {
        float x;
        switch (kind) {
        case 0: x = (float)(2.0 * tu_unif(r) - 1.0); break;
        case 3: {
            int64_t v = tu_range(r, 0, 5);
            x = v < 2 ? -INFINITY : (float)v * 0.75f;
            break;
        }
        case 4: x = 1.5f; break;
        case 6: x = tu_unif(r) < 0.01 ? 14.0f : (float)tu_unif(r); break;
        case 7: x = -(float)tu_range(r, 0, 39) / 39.0f; break;
        case 8: {
            static const float v8[4] = {0.0f, -0.0f, -0.25f, -INFINITY};
            x = v8[tu_range(r, 0, 3)];
            break;
        }
        default: x = (float)(2.0 * tu_normal(r)); break;
        }
        c[i].id = (int32_t)i;
        c[i].logit = x;
    }
    if (kind == 1 || kind == 5)
        for (int h = 0; h < 50; h++)
            c[tu_range(r, 0, (int64_t)n - 1)].logit += (float)(5.0 + 10.0 * tu_unif(r));
    if (kind == 2)
        for (int h = 0; h < 200; h++) {
            size_t i = (size_t)tu_range(r, 0, (int64_t)n - 1);
            if (i % 16 == 0)
                i++;
            c[i < n ? i : n - 1].logit = (float)(10.0 + 5.0 * tu_unif(r));
        }
    if (kind == 5)
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &c[i].logit, sizeof u);
            u = (u + 0x8000u) & 0xffff0000u;
            memcpy(&c[i].logit, &u, sizeof u);
        }
    for (size_t i = n; i > 1; i--) { /* shuffle the ids */
        size_t j = (size_t)tu_range(r, 0, (int64_t)i - 1);
        int32_t t = c[i - 1].id;
        c[i - 1].id = c[j].id;
        c[j].id = t;
    }
}

START_TEST(test_mass_prefix_band_path_matches_a_canonical_walk_on_adversarial_rows)
{
    static const size_t sizes[] = {16383, 16384, 16385, 16391, 40000, 262144};
    tu_rng r = {7000 + (uint64_t)_i};
    sift_candidate *c = malloc(300000 * sizeof *c), *d = malloc(300000 * sizeof *d);
    uint64_t *w = malloc(300000 * sizeof *w), *wd = malloc(300000 * sizeof *wd);
    unsigned long long answered = 0, handed_over = 0;
    size_t tie_cuts = 0;
    for (int kind = 0; kind < 9; kind++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si];
            if (n == 262144 && (kind + _i) % 3 != 0)
                continue; /* the largest size for some kinds only */
            band_row(&r, c, n, kind);
            memcpy(d, c, n * sizeof *c);
            or_arr oa = {d, n, 0};
            or_sort(&oa);
            float m = d[0].logit;
            sift__u128 W = sift__weights(c, n, m, w);
            sift__u128 Wo = or_weights(&oa, wd);
            ck_assert(sift__u128_cmp(W, Wo) == 0);
            for (int t = 0; t < 12; t++) {
                int strict = t % 2;
                sift__u128 T;
                if (t < 2) {
                    T = sift__u128_from(t == 0 ? 0 : 1);
                } else if (t < 4) {
                    T = t == 2 ? W : sift__u128_sub(W, sift__u128_from(1));
                } else if (t < 8) {
                    /* exactly the mass of a canonical prefix, or one less:
                     * T on a token's edge (and so on a bucket's) */
                    size_t k = (size_t)tu_range(&r, 1, (int64_t)n);
                    if (t < 6)
                        k = (size_t)tu_range(&r, 1, 60);
                    sift__u128 p = {0, 0};
                    for (size_t i = 0; i < k; i++)
                        p = sift__u128_add64(p, wd[i]);
                    T = (t & 1) || (p.lo == 0 && p.hi == 0) ? p
                                                            : sift__u128_sub(p, sift__u128_from(1));
                } else {
                    T = sift__u128_scale_u64(W, tu_next(&r));
                }
                size_t want = or_walk(wd, n, T, strict);
                /* the cut inside a tie group: only the id decides it */
                tie_cuts += want > 0 && want < n && d[want].logit == d[want - 1].logit;
                for (int mode = SIFT__MASS_DEFAULT; mode <= SIFT__MASS_HIST; mode++) {
                    sift__ctx ctx = make_ctx();
                    ctx.mass_path = mode;
                    uint64_t cut;
                    size_t len = sift__mass_prefix(&ctx, c, w, n, T, strict, &cut);
                    answered += ctx.band_answered;
                    handed_over += ctx.band_handed_over;
                    if (want == n) {
                        ck_assert_msg(len == n, "kind %d n %zu t %d mode %d", kind, n, t, mode);
                    } else {
                        ck_assert_msg(len == want + 1 &&
                                          cut == sift__ckey(d[want].logit, d[want].id),
                                      "kind %d n %zu t %d mode %d: len %zu, want %zu", kind, n, t,
                                      mode, len, want + 1);
                    }
                }
            }
        }
    }
    /* both outcomes of the band path were exercised */
    ck_assert_uint_gt(answered, 100);
    ck_assert_uint_gt(handed_over, 0);
    ck_assert_uint_gt(tie_cuts, 50);
    free(c);
    free(d);
    free(w);
    free(wd);
}
END_TEST

/* Targets a weight can reach: the canonical first token answers exactly
 * when its own weight reaches T (mass.c takes it without the band path
 * then). Weights computed at a reference above the row's maximum make
 * that weight less than 2^62, and T is put on both sides of it, on
 * 2^62 and around both, strict and not, at every mass path; ties at the
 * maximum (kinds with a raised head, a coarse row) and shuffled ids make
 * the first token the least id among them. */
START_TEST(test_mass_prefix_takes_the_first_token_only_where_its_weight_reaches_t)
{
    static const size_t sizes[] = {16384, 40000};
    tu_rng r = {7300 + (uint64_t)_i};
    sift_candidate *c = malloc(40000 * sizeof *c), *d = malloc(40000 * sizeof *d);
    uint64_t *w = malloc(40000 * sizeof *w), *wd = malloc(40000 * sizeof *wd);
    unsigned long long first = 0, other = 0;
    for (int kind = 0; kind < 9; kind++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si];
            band_row(&r, c, n, kind);
            if (kind == 8) /* ten tokens tied at the maximum */
                for (int h = 0; h < 10; h++)
                    c[tu_range(&r, 0, (int64_t)n - 1)].logit = 40.0f;
            memcpy(d, c, n * sizeof *c);
            or_arr oa = {d, n, 0};
            or_sort(&oa);
            static const float above[] = {0.0f, 0.25f, 3.0f};
            for (size_t ai = 0; ai < 3; ai++) {
                float m = d[0].logit + above[ai];
                sift__weights(c, n, m, w);
                sift__weights(d, n, m, wd);
                uint64_t w0 = wd[0], one = (uint64_t)1 << 62;
                const uint64_t ts[] = {0, 1, w0 - 1, w0, w0 + 1, one - 1, one, one + 1};
                for (size_t ti = 0; ti < 2 * sizeof ts / sizeof ts[0]; ti++) {
                    int strict = (int)(ti & 1);
                    sift__u128 T = sift__u128_from(ts[ti / 2]);
                    size_t want = or_walk(wd, n, T, strict);
                    first += want == 0;
                    other += want > 0 && want < n;
                    for (int mode = SIFT__MASS_DEFAULT; mode <= SIFT__MASS_HIST; mode++) {
                        sift__ctx ctx = make_ctx();
                        ctx.mass_path = mode;
                        uint64_t cut;
                        size_t len = sift__mass_prefix(&ctx, c, w, n, T, strict, &cut);
                        if (want == n) { /* the whole row does not reach T */
                            ck_assert_uint_eq(len, n);
                            continue;
                        }
                        ck_assert_msg(len == want + 1 &&
                                          cut == sift__ckey(d[want].logit, d[want].id),
                                      "kind %d n %zu above %g T %llu strict %d mode %d: len %zu, "
                                      "want %zu",
                                      kind, n, (double)above[ai], (unsigned long long)T.lo, strict,
                                      mode, len, want + 1);
                    }
                }
            }
        }
    }
    ck_assert_uint_gt(first, 100);
    ck_assert_uint_gt(other, 100);
    free(c);
    free(d);
    free(w);
    free(wd);
}
END_TEST

/* sift__max_logit (its vector form at the level SIFT_SIMD allows) is bit
 * for bit the sequential scan m = l > m ? l : m from -inf: NaN logits
 * skipped, -0 and +0 as the scan meets them, -inf rows. */
START_TEST(test_max_logit_matches_the_sequential_scan)
{
    static const size_t sizes[] = {1, 255, 256, 257, 1000, 4099, 65536};
    tu_rng r = {9100 + (uint64_t)_i};
    sift_candidate *c = malloc(65536 * sizeof *c);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (int kind = 0; kind < 6; kind++) {
            size_t n = sizes[si];
            for (size_t i = 0; i < n; i++) {
                float x;
                switch (kind) {
                case 0: x = (float)(3.0 * tu_normal(&r)); break;
                case 1: x = tu_range(&r, 0, 9) ? -INFINITY : (float)tu_normal(&r); break;
                case 2: x = tu_range(&r, 0, 1) ? 0.0f : -0.0f; break;
                case 3: x = tu_range(&r, 0, 7) ? (float)-tu_unif(&r) : NAN; break;
                case 4: x = -INFINITY; break;
                default: x = tu_range(&r, 0, 3) ? -0.0f : -1.0f; break;
                }
                c[i].id = (int32_t)i;
                c[i].logit = x;
            }
            if (kind == 3 && n > 1)
                c[n - 1].logit = NAN;
            float want = -INFINITY;
            for (size_t i = 0; i < n; i++)
                want = c[i].logit > want ? c[i].logit : want;
            float got = sift__max_logit(c, n);
            uint32_t a, b;
            memcpy(&a, &want, sizeof a);
            memcpy(&b, &got, sizeof b);
            ck_assert_msg(a == b, "n %zu kind %d: %08x, want %08x", n, kind, b, a);
        }
    }
    free(c);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("select");
    TCase *tc = tcase_create("canonical order");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    /* check_simd_whole.sh runs the "simd" cases again under each SIFT_SIMD cap */
    tcase_set_tags(tc, "simd");
    tcase_add_loop_test(tc, test_sort_canon_matches_qsort_with_ties_and_neg_inf, 0, 4);
    tcase_add_loop_test(tc, test_sort_canon_matches_qsort_at_sizes_around_its_thresholds, 0, 4);
    tcase_add_loop_test(tc, test_canon_merge_restores_canonical_order_after_some_candidates_change,
                        0, 4);
    tcase_add_loop_test(tc, test_cut_top_keeps_exactly_the_canonical_first_k, 0, 4);
    tcase_add_loop_test(tc, test_mass_prefix_matches_a_canonical_walk, 0, 4);
    tcase_add_loop_test(tc, test_cut_top_counting_path_keeps_exactly_the_canonical_first_k, 0, 2);
    tcase_add_loop_test(tc, test_mass_prefix_band_path_matches_a_canonical_walk_on_adversarial_rows,
                        0, 3);
    tcase_add_loop_test(tc, test_mass_prefix_takes_the_first_token_only_where_its_weight_reaches_t,
                        0, 2);
    tcase_add_loop_test(tc, test_max_logit_matches_the_sequential_scan, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

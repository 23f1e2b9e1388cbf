/*
 * check_carry.c - weights carried from one stage to the next.
 *
 * top_p and typical leave the weights of the tokens they keep (xtc those
 * of an array it did not change) to the dist right after them (sift__carry_leave / sift__carry_take
 * in sift_internal.h), and dist draws from them instead of computing them again. These cases
 * compare chains around that pair with the naive oracle, token and RNG state bit for bit over
 * several steps (accepting each token, so the penalties' history moves), on random rows of every
 * tu_row shape and on rows built so that a stage in between changes kept logits without moving the
 * array, its length or its largest logit (only the rule that the carry
 * goes to the very next stage tells those weights are stale):
 *
 * - [top_p, dist]: the weights are carried (counted in n_carried) when
 *   top_p keeps enough tokens for it to pay;
 * - [top_p, temp, dist] on rows whose largest logit is 0 (temp keeps it);
 * - [top_p, logit_bias, dist] biasing kept tokens below the largest;
 * - [top_p, penalties, dist] and [top_p, min_p, dist];
 * - [xtc, dist], which carries when xtc removes nothing, on rows that
 *   include ties at the largest logit (a removal that keeps it);
 * - [typical, dist] on rows where typical keeps the largest logit and
 *   where it drops it, and [typical, X, dist] with the stages above;
 * - the take's rule on a context set up by hand.
 *
 * Every chain here checks each take against weights computed afresh
 * (carry_verify): a carried weight or sum that is off fails even when
 * the token happens to agree.
 *
 * The oracle cases are tagged "simd": check_simd_whole.sh runs them again
 * under each SIFT_SIMD cap (the weights kernel, the compaction that moves
 * the weights and the mass prefix at every level).
 */
#include "harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "oracle/oracle.h"
#include "testutil.h"

/* Samples `steps` tokens from spec's chain and the oracle on row,
 * accepting each; every token and RNG state must agree, and every take
 * of carried weights must find them equal, weight for weight and in
 * sum, to those computed afresh (carry_verify). Returns the chain's
 * count of carried weights. */
static uint64_t agree(const sp_chain *spec, const float *row, int32_t V, int steps)
{
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_msg(sp_build(spec, &c, &err) == SIFT_OK, "build: %s", err.message);
    /* every take is checked against weights computed afresh */
    c->carry_verify = 1;
    or_chain o;
    or_init(&o, spec);
    char desc[512];
    for (int s = 0; s < steps; s++) {
        int32_t ts = -1, to = -1;
        sift_status ss = sift_chain_sample(c, row, V, &ts, NULL);
        sift_status so = or_sample(&o, row, V, &to);
        ck_assert_int_eq(ss, so);
        if (ss != SIFT_OK)
            break;
        if (ts != to) {
            sp_describe(spec, desc, sizeof desc);
            ck_abort_msg("V %d step %d: sift %d, oracle %d (%s)", V, s, ts, to, desc);
        }
        uint64_t rs[4];
        sift__chain_rng_state(c, rs);
        ck_assert_mem_eq(rs, o.rng.s, sizeof rs);
        ck_assert_int_eq(sift_chain_accept(c, ts, NULL), SIFT_OK);
        or_accept(&o, ts);
    }
    uint64_t n = c->n_carried;
    ck_assert_uint_eq(c->n_carry_bad, 0);
    or_free(&o);
    sift_chain_free(c);
    return n;
}

/* top_p with a p that keeps many tokens, or a random one. */
static sp_stage top_p_stage(tu_rng *r, int32_t V)
{
    sp_stage s;
    memset(&s, 0, sizeof s);
    gen_stage(r, &s, SP_TOP_P, V);
    if (tu_unif(r) < 0.6)
        s.f0 = tu_unif(r) < 0.5 ? 0.95f : (float)(0.5 + 0.5 * tu_unif(r));
    return s;
}

/* typical with p = 0.9 or a random p and a min_keep of 0 to 3. */
static sp_stage typical_stage(tu_rng *r)
{
    sp_stage s;
    memset(&s, 0, sizeof s);
    s.kind = SP_TYPICAL;
    s.f0 = tu_unif(r) < 0.5 ? 0.9f : (float)(0.2 + 0.8 * tu_unif(r));
    s.i0 = (int32_t)tu_range(r, 0, 3);
    return s;
}

static float row_max(const float *row, int32_t V)
{
    float m = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        m = row[i] > m ? row[i] : m;
    return m;
}

/* Sets two to four random tokens to the row's largest logit (a tie at
 * the top: a cut may fall among them, ranked by id). */
static void tie_at_max(tu_rng *r, float *row, int32_t V)
{
    float m = row_max(row, V);
    int k = (int)tu_range(r, 2, 4);
    for (int t = 0; t < k && m > -INFINITY; t++)
        row[tu_range(r, 0, V - 1)] = m;
}

/* Ids of up to n of the row's largest logits after the largest (ranks 2
 * to n + 1 by a selection on a copy), the tokens top_p keeps. */
static size_t runners_up(const float *row, int32_t V, int32_t *ids, size_t n)
{
    size_t k = 0;
    float above = row_max(row, V);
    while (k < n) {
        int32_t best = -1;
        for (int32_t i = 0; i < V; i++)
            if (row[i] < above && row[i] > -INFINITY && (best < 0 || row[i] > row[best]))
                best = i;
        if (best < 0)
            break;
        ids[k++] = best;
        above = row[best];
    }
    return k;
}

/* Every fourth row large: top_p leaves its weights only when it keeps
 * at least 4096 tokens (CARRY_MIN_KEPT in top_p.c). */
static int32_t pick_V(tu_rng *r, int i)
{
    return i % 4 == 3 ? (int32_t)tu_range(r, 8192, 70000) : tu_rand_V(r, 4096);
}

START_TEST(test_top_p_dist_carries)
{
    tu_rng r = {0x5eed0001u + (uint64_t)_i};
    float *row = malloc(70000 * sizeof *row);
    ck_assert_ptr_nonnull(row);
    uint64_t carried = 0;
    for (int i = 0; i < 96; i++) {
        int32_t V = pick_V(&r, i);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        spec.n = 2;
        spec.st[0] = top_p_stage(&r, V);
        spec.st[1].kind = SP_DIST;
        carried += agree(&spec, row, V, 3);
    }
    free(row);
    /* the pair does carry: the cases above test the carried path */
    ck_assert_uint_gt(carried, 0);
}
END_TEST

/* A stage between top_p (or typical) and dist that keeps the array, its
 * length and its largest logit but changes kept logits: dist must not
 * take the first stage's weights (and takes none: only the very next
 * stage may). */
START_TEST(test_stage_between_voids_the_carry)
{
    tu_rng r = {0x5eed0100u + (uint64_t)_i};
    float *row = malloc(70000 * sizeof *row);
    ck_assert_ptr_nonnull(row);
    for (int i = 0; i < 96; i++) {
        int32_t V = pick_V(&r, i);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        spec.n = 3;
        spec.st[0] = (i / 4) % 2 ? typical_stage(&r) : top_p_stage(&r, V);
        spec.st[2].kind = SP_DIST;
        sp_stage *mid = &spec.st[1];
        switch (i % 4) {
        case 0: {
            /* temp on a row whose largest logit is 0: the largest stays 0 */
            float m = row_max(row, V);
            for (int32_t j = 0; j < V; j++)
                row[j] = row[j] > -INFINITY ? row[j] - m : row[j];
            mid->kind = SP_TEMP;
            mid->f0 = tu_unif(&r) < 0.5 ? 0.5f : (float)(0.2 + 2.0 * tu_unif(&r));
            break;
        }
        case 1: {
            /* biases on kept tokens that leave them below the largest */
            int32_t ids[8];
            size_t k = runners_up(row, V, ids, 8);
            mid->kind = SP_LOGIT_BIAS;
            mid->n_bias = k;
            for (size_t b = 0; b < k; b++) {
                mid->bias[b].token = ids[b];
                mid->bias[b].bias = tu_unif(&r) < 0.2 ? -INFINITY : -(float)(0.1 + 3 * tu_unif(&r));
            }
            break;
        }
        case 2:
            gen_stage(&r, mid, SP_PENALTIES, V);
            mid->i0 = 64;
            mid->f0 = 1.5f;
            mid->f1 = 0.5f;
            break;
        default: gen_stage(&r, mid, SP_MIN_P, V); break;
        }
        ck_assert_uint_eq(agree(&spec, row, V, 4), 0);
    }
    free(row);
}
END_TEST

/* xtc with probability 1 (it always draws and computes the weights) or a
 * random one, a threshold in [0, 0.5] and now and then a min_keep that
 * stops the removal. */
static sp_stage xtc_stage(tu_rng *r, int32_t V)
{
    sp_stage s;
    memset(&s, 0, sizeof s);
    s.kind = SP_XTC;
    s.f0 = tu_unif(r) < 0.7 ? 1.0f : (float)tu_unif(r);
    s.f1 = tu_unif(r) < 0.2 ? 0.0f : (float)(0.5 * tu_unif(r));
    s.i0 = tu_unif(r) < 0.25 ? V : (int32_t)tu_range(r, 0, 3);
    return s;
}

/* [xtc, dist]: xtc leaves its weights when it computed them and removed
 * nothing, and dist draws from them; when it removes, it leaves none.
 * Every third row gets two to four tokens at its largest logit, so that
 * a removal keeps the largest logit bit for bit (A's members tie) and
 * only shortens the array: weights left on that path would be stale.
 * Token and RNG state must agree with the oracle either way. */
START_TEST(test_xtc_dist_carries)
{
    tu_rng r = {0x5eed0200u + (uint64_t)_i};
    float *row = malloc(70000 * sizeof *row);
    ck_assert_ptr_nonnull(row);
    uint64_t carried = 0;
    for (int i = 0; i < 96; i++) {
        int32_t V = pick_V(&r, i);
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        if (i % 3 == 0)
            tie_at_max(&r, row, V);
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        spec.n = 2;
        spec.st[0] = xtc_stage(&r, V);
        spec.st[1].kind = SP_DIST;
        carried += agree(&spec, row, V, 3);
    }
    free(row);
    ck_assert_uint_gt(carried, 0);
}
END_TEST

/* [typical, dist]: typical leaves the weights of the tokens it keeps,
 * moved with them by its compaction, and dist takes them when the kept
 * set's largest logit is the row's. Every fourth row is large (typical's
 * histogram path, which leaves weights only with 4096 tokens known
 * kept), uniform on [-1, 1] (at p = 0.9 typical keeps about three
 * quarters and the largest) or, every other time, on [-12, 0] with p =
 * 0.99 or 0.999 (weights that are not multiples of 2^32, kept and
 * dropped: the low halves of the sums count); other rows are of every
 * tu_row shape (the small path). Every third row gets one token 2.5
 * above its largest logit, which typical keeps (then it may carry) or
 * drops (then it leaves nothing, and no stale weights reach dist), and
 * every third after that two to four tokens at its largest logit (the
 * cut may fall among them: ranked by id). Both paths must carry. */
START_TEST(test_typical_dist_carries)
{
    tu_rng r = {0x5eed0300u + (uint64_t)_i};
    float *row = malloc(70000 * sizeof *row);
    ck_assert_ptr_nonnull(row);
    uint64_t carried_big = 0, carried_small = 0;
    for (int i = 0; i < 96; i++) {
        int32_t V;
        int wide = 0;
        if (i % 4 == 3) {
            V = (int32_t)tu_range(&r, 16384, 70000);
            wide = i % 8 == 7;
            for (int32_t j = 0; j < V; j++)
                row[j] = wide ? (float)(-12.0 * tu_unif(&r)) : (float)(2.0 * tu_unif(&r) - 1.0);
        } else {
            V = tu_rand_V(&r, 4096);
            tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        }
        float m = row_max(row, V);
        if (i % 3 == 1 && m > -INFINITY && m < 1e30f) {
            row[tu_range(&r, 0, V - 1)] = m + 2.5f;
        } else if (i % 3 == 2) {
            tie_at_max(&r, row, V);
        }
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        spec.n = 2;
        spec.st[0] = typical_stage(&r);
        if (wide)
            spec.st[0].f0 = tu_unif(&r) < 0.5 ? 0.99f : 0.999f;
        spec.st[1].kind = SP_DIST;
        uint64_t n = agree(&spec, row, V, 3);
        if (V >= 16384)
            carried_big += n;
        else
            carried_small += n;
    }
    free(row);
    ck_assert_uint_gt(carried_big, 0);
    ck_assert_uint_gt(carried_small, 0);
}
END_TEST

/* The take's own rule, on a context set up by hand: the weights go
 * only to the stage right after the one that left them, in a loop whose
 * next stage takes them, on the same array and length, at the same
 * largest logit bit for bit (+0 and -0 differ), and once. */
START_TEST(test_the_take_checks_stage_array_and_largest_logit)
{
    static sift_candidate cd[4];
    static uint64_t wa[4];
    sift__ws ws;
    memset(&ws, 0, sizeof ws);
    ws.u64a = wa;
    sift__ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.ws = &ws;
    sift__arr a = {cd, 4, 4, SIFT__ORDER_ID, 1};
    sift__u128 W = {12345, 0}, got;
    for (int v = 0; v < 9; v++) {
        float m = v >= 5 ? -0.0f : 0.0f;
        sift__carry_clear(&ctx);
        ctx.carry_armed = 1;
        ctx.carry_next = v != 1;
        ctx.stage = 3;
        a.n = 4;
        sift__carry_leave(&ctx, &a, m, W);
        ctx.stage = v == 2 ? 5 : 4;
        sift__arr b = a;
        if (v == 3)
            b.n = 3;
        if (v == 4)
            b.c = cd + 1;
        float mt = v == 5 ? -m : v == 6 ? 1.0f : m;
        ctx.carry_next = 0;
        ctx.carry_armed = v != 7;
        got.lo = got.hi = 0;
        const uint64_t *w = sift__carry_take(&ctx, &b, mt, &got);
        if (v == 0 || v == 8) {
            /* the leave's own record: taken once */
            ck_assert_ptr_eq(w, wa);
            ck_assert_uint_eq(got.lo, 12345);
            ck_assert_ptr_null(sift__carry_take(&ctx, &b, mt, &got));
        } else {
            ck_assert_ptr_null(w);
        }
    }
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("carry");
    TCase *tc = tcase_create("oracle");
    tcase_set_timeout(tc, 600);
    tcase_set_tags(tc, "simd");
    tcase_add_loop_test(tc, test_top_p_dist_carries, 0, 2);
    tcase_add_loop_test(tc, test_stage_between_voids_the_carry, 0, 2);
    tcase_add_loop_test(tc, test_xtc_dist_carries, 0, 2);
    tcase_add_loop_test(tc, test_typical_dist_carries, 0, 2);
    tcase_add_test(tc, test_the_take_checks_stage_array_and_largest_logit);
    suite_add_tcase(s, tc);
    return s;
}

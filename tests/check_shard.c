/*
 * check_shard.c - sift_shards_merge: one slice from the top-k lists of
 * vocabulary shards (docs/analyzer.md, "Vocabulary shards").
 *
 * The property: random rows (bf16 with ties across shard boundaries,
 * the test library's adversarial shapes, shards pushed entirely below
 * another's minimum) split into 1 to 8 shards of random sizes (one-token
 * shards included), each shard's top-k taken as a device takes it
 * (shuffled, its boundary ties re-chosen among the shard's tied ids),
 * with a tight, loose or no tail mass. The merged slice must be a valid
 * device slice of the row (its prefix the row's top n_prefix as a set,
 * its extras below it), its tail bound must cover the exact mass of the
 * tokens it does not hold (in long double, and as sift's integer mass),
 * and sampling it must give the whole row's token and RNG, through the
 * hook when the slice cannot decide, or SIFT_E_NEED_ROW with nothing
 * changed without a hook; never a different token. Also: bad input
 * (each error names the shard and the position, nothing changes), the
 * tail's rescaling, and the plan's device_k.
 *
 * SIFT_SHARD_CASES (environment) is the number of chains (default
 * 3,000, about 12 steps each); SIFT_SHARD_MIN_STEPS the least number of
 * merged steps sampled (make check-long: 10,000,000), drawing more
 * chains until reached.
 */
#include "harness.h"
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sift_internal.h"
#include "testutil.h"

/* Check records the place of every ck_assert in a file: in the hot loop
 * only a failure may call into it. */
#define MUST(c)                                                \
    do {                                                       \
        if (!(c))                                              \
            ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #c); \
    } while (0)
#define MUST_MSG(c, ...)               \
    do {                               \
        if (!(c))                      \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)

#define S_MAX 8
#define V_MAX 8192

static long env_long(const char *name, long dflt)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return dflt;
    char *end = NULL;
    errno = 0;
    long n = strtol(e, &end, 10);
    if (errno || end == e || *end || n < 0) {
        fprintf(stderr, "check_shard: %s=%s is not a whole number >= 0\n", name, e);
        exit(EXIT_FAILURE);
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* Shards as devices give them                                         */
/* ------------------------------------------------------------------ */

static float row[V_MAX];
static sift_candidate lists[V_MAX], buf[2 * V_MAX + 512], scratch[V_MAX];
static int32_t tied[V_MAX];
static unsigned char held[V_MAX];

static int canon_cmp(const void *a, const void *b)
{
    const sift_candidate *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Shard [lo, lo + n)'s top-k as a device gives it, written to out[0..k):
 * the canonical top k of the range, its tokens tied at the smallest
 * re-chosen among every tied id of the range, shuffled. */
static void shard_topk(tu_rng *r, int32_t lo, int32_t n, int32_t k, sift_candidate *out)
{
    for (int32_t i = 0; i < n; i++)
        scratch[i] = (sift_candidate){lo + i, row[lo + i]};
    qsort(scratch, (size_t)n, sizeof *scratch, canon_cmp);
    memcpy(out, scratch, (size_t)k * sizeof *out);
    float lmin = out[k - 1].logit;
    int32_t nt = 0, ni = 0;
    for (int32_t i = 0; i < n; i++)
        if (row[lo + i] == lmin)
            tied[nt++] = lo + i;
    for (int32_t i = 0; i < k; i++)
        ni += out[i].logit == lmin;
    for (int32_t i = 0; i < ni; i++) {
        int32_t j = (int32_t)tu_range(r, i, nt - 1);
        int32_t t = tied[i];
        tied[i] = tied[j];
        tied[j] = t;
    }
    for (int32_t i = 0, q = 0; i < k; i++)
        if (out[i].logit == lmin) {
            out[i].id = tied[q++];
            out[i].logit = row[out[i].id];
        }
    for (int32_t i = k - 1; i > 0; i--) {
        int32_t j = (int32_t)tu_range(r, 0, i);
        sift_candidate t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}

/* The exact sum over the range's tokens not in out[0..k) of
 * exp(l - m_s), m_s the list's largest logit, rounded up. */
static double shard_tail_exact(int32_t lo, int32_t n, const sift_candidate *out, int32_t k)
{
    float ms = -INFINITY;
    for (int32_t i = 0; i < k; i++) {
        held[out[i].id] = 1;
        ms = out[i].logit > ms ? out[i].logit : ms;
    }
    long double sum = 0;
    for (int32_t i = lo; i < lo + n; i++)
        if (!held[i] && row[i] > -INFINITY && ms > -INFINITY)
            sum += expl((long double)row[i] - (long double)ms);
    for (int32_t i = 0; i < k; i++)
        held[out[i].id] = 0;
    return (double)sum * (1.0 + 0x1p-40) + 0x1p-1000;
}

/* Splits [0, V) into S shards of random sizes (some of one token) and
 * fills their device lists into `lists`; k_want is the per-shard k most
 * shards use. */
static size_t make_shards(tu_rng *r, int32_t V, int32_t k_want, sift_shard *sh)
{
    size_t S = (size_t)tu_range(r, 1, V < S_MAX ? V : S_MAX);
    int32_t cut[S_MAX + 1];
    cut[0] = 0;
    cut[S] = V;
    /* S - 1 distinct cut points in [1, V - 1], sorted */
    for (size_t i = 1; i < S; i++) {
        int again;
        do {
            cut[i] = (int32_t)tu_range(r, 1, V - 1);
            again = 0;
            for (size_t j = 1; j < i; j++)
                again |= cut[j] == cut[i];
        } while (again);
    }
    for (size_t i = 1; i < S; i++)
        for (size_t j = i + 1; j < S; j++)
            if (cut[j] < cut[i]) {
                int32_t t = cut[i];
                cut[i] = cut[j];
                cut[j] = t;
            }
    /* sometimes one shard's logits sink far below the rest */
    if (S > 1 && tu_unif(r) < 0.2) {
        size_t s = (size_t)tu_range(r, 0, (int64_t)S - 1);
        for (int32_t i = cut[s]; i < cut[s + 1]; i++)
            row[i] = row[i] > -INFINITY ? row[i] - 1000.0f : row[i];
    }
    size_t used = 0;
    for (size_t s = 0; s < S; s++) {
        int32_t n = cut[s + 1] - cut[s];
        double u = tu_unif(r);
        int32_t k = u < 0.7 ? k_want : u < 0.8 ? 1 : u < 0.9 ? n : (int32_t)tu_range(r, 1, n);
        k = k < n ? k : n;
        k = k > 0 ? k : 1;
        sift_shard x = {.struct_size = sizeof x};
        x.offset = cut[s];
        x.n_ids = n;
        x.n_prefix = k;
        x.prefix = lists + used;
        shard_topk(r, cut[s], n, k, lists + used);
        double t = tu_unif(r);
        if (t < 0.5) {
            x.flags = SIFT_SHARD_TAIL_MASS;
            x.tail_mass = shard_tail_exact(cut[s], n, lists + used, k);
        } else if (t < 0.7) {
            x.flags = SIFT_SHARD_TAIL_MASS;
            x.tail_mass = shard_tail_exact(cut[s], n, lists + used, k) * 1000.0;
        }
        used += (size_t)k;
        sh[s] = x;
    }
    return S;
}

/* ------------------------------------------------------------------ */
/* The merged slice against the row                                    */
/* ------------------------------------------------------------------ */

/* The prefix is the row's top n_prefix as a set, the extras below it, no
 * id twice; the tail bound covers the exact mass of what it does not
 * hold, in long double and as sift's integer mass. */
static void check_slice_of_row(const sift_slice *s, int32_t V)
{
    MUST((s->n_vocab) == (V));
    MUST((s->n_prefix) >= (1));
    MUST(s->flags == SIFT_SLICE_TAIL_MASS);
    memset(held, 0, (size_t)V);
    float q = INFINITY, m = -INFINITY;
    for (int32_t i = 0; i < s->n_prefix; i++) {
        sift_candidate c = s->prefix[i];
        MUST(c.id >= 0 && c.id < V && !held[c.id]);
        MUST(c.logit == row[c.id]);
        held[c.id] = 1;
        q = c.logit < q ? c.logit : q;
        m = c.logit > m ? c.logit : m;
    }
    for (int32_t i = 0; i < s->n_extras; i++) {
        sift_candidate c = s->extras[i];
        MUST(c.id >= 0 && c.id < V && !held[c.id]);
        MUST(c.logit == row[c.id]);
        MUST_MSG(c.logit <= q, "extra %d (%g) above the prefix's smallest %g", (int)c.id,
                 (double)c.logit, (double)q);
        held[c.id] = 2;
    }
    long double sum = 0;
    sift__u128 W = {0, 0};
    uint64_t n_absent = 0;
    for (int32_t i = 0; i < V; i++) {
        if (held[i] == 1)
            continue;
        MUST_MSG(row[i] <= q, "token %d (%g) outside the prefix is above its smallest %g", (int)i,
                 (double)row[i], (double)q);
        if (held[i])
            continue;
        n_absent++;
        if (m > -INFINITY && row[i] > -INFINITY) {
            sum += expl((long double)row[i] - (long double)m);
            W = sift__u128_add64(W, sift__weight(sift__expf(row[i] - m)));
        }
    }
    memset(held, 0, (size_t)V); /* shard_tail_exact expects it clear */
    MUST_MSG((long double)s->tail_mass >= sum, "tail %.17g below the exact mass %.17Lg",
             s->tail_mass, sum);
    if (m > -INFINITY && m < INFINITY) {
        sift__bound b;
        memset(&b, 0, sizeof b);
        b.logit = m; /* the free bound made useless: the tail bound is checked */
        b.n_absent = n_absent;
        sift__tail_start(&b, m, s->tail_mass);
        MUST(b.has_tail);
        sift__u128 B = sift__tail_absent_mass(&b, m);
        MUST_MSG(sift__u128_cmp(W, B) <= 0, "integer mass %.17g above the bound %.17g",
                 sift__u128_to_double(W), sift__u128_to_double(B));
    }
}

/* ------------------------------------------------------------------ */
/* Chains                                                              */
/* ------------------------------------------------------------------ */

typedef struct hook_ctx {
    long calls;
} hook_ctx;

static int hook(void *user, float *out, int32_t n)
{
    ((hook_ctx *)user)->calls++;
    memcpy(out, row, (size_t)n * sizeof *out);
    return 0;
}

enum { CH_LLAMA, CH_TOPK_GREEDY, CH_TEMP_TOP_P, CH_MIN_P, CH_DIST, CH_BIAS, CH__COUNT };

static sift_chain *make_chain(int which, uint64_t seed, int32_t V, int32_t K)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = seed;
    sift_chain *c;
    MUST((sift_chain_new(&c, &p, NULL)) == (SIFT_OK));
    int bad = 0;
    switch (which) {
    case CH_LLAMA:
        bad = sift_chain_add_top_k(c, K, NULL) || sift_chain_add_top_p(c, 0.95f, 1, NULL) ||
              sift_chain_add_min_p(c, 0.05f, 1, NULL) || sift_chain_add_temp(c, 0.8f, NULL) ||
              sift_chain_add_dist(c, NULL);
        break;
    case CH_TOPK_GREEDY:
        bad = sift_chain_add_top_k(c, K, NULL) || sift_chain_add_greedy(c, NULL);
        break;
    case CH_TEMP_TOP_P:
        bad = sift_chain_add_temp(c, 0.7f, NULL) || sift_chain_add_top_p(c, 0.9f, 1, NULL) ||
              sift_chain_add_dist(c, NULL);
        break;
    case CH_MIN_P:
        bad = sift_chain_add_min_p(c, 0.1f, 1, NULL) || sift_chain_add_temp(c, 1.5f, NULL) ||
              sift_chain_add_dist(c, NULL);
        break;
    case CH_DIST: bad = sift_chain_add_dist(c, NULL); break;
    case CH_BIAS: {
        sift_bias b[2] = {{0, 3.0f}, {V - 1, 2.0f}};
        bad = sift_chain_add_penalties(c, 16, 1.2f, 0.0f, 0.0f, NULL) ||
              sift_chain_add_logit_bias(c, b, 2, NULL) || sift_chain_add_top_k(c, K, NULL) ||
              sift_chain_add_dist(c, NULL);
        break;
    }
    }
    MUST(!bad);
    return c;
}

/* The merged steps the property sampled (all cases of the run). */
static long long steps_done;

static void run_case(tu_rng *r)
{
    int32_t V = tu_rand_V(r, V_MAX);
    int which = (int)tu_range(r, 0, CH__COUNT - 1);
    int32_t K = (int32_t)tu_range(r, 1, 60);
    uint64_t seed = tu_next(r);
    sift_chain *ref = make_chain(which, seed, V, K), *hooked = make_chain(which, seed, V, K),
               *bare = make_chain(which, seed, V, K);
    hook_ctx h = {0};
    MUST((sift_chain_set_row_hook(hooked, hook, &h, NULL)) == (SIFT_OK));
    sift_plan pl = {.struct_size = sizeof pl};
    MUST((sift_chain_plan(ref, &pl, NULL, NULL)) == (SIFT_OK));
    int n_steps = (int)tu_range(r, 4, 20);
    static const int shapes[] = {TU_ROW_BF16,      TU_ROW_BF16,      TU_ROW_TIES,
                                 TU_ROW_NORMAL,    TU_ROW_PEAKED,    TU_ROW_NEG_INF,
                                 TU_ROW_ALL_EQUAL, TU_ROW_NEAR_EQUAL};
    for (int step = 0; step < n_steps; step++) {
        tu_row(r, row, V, shapes[tu_range(r, 0, (int64_t)(sizeof shapes / sizeof *shapes) - 1)]);
        int32_t k = pl.device_k > 0 ? pl.device_k : (int32_t)tu_range(r, 1, 64);
        if (tu_unif(r) < 0.2)
            k = (int32_t)tu_range(r, 1, 80);
        k = k < V ? k : V;
        sift_shard sh[S_MAX];
        size_t S = make_shards(r, V, k, sh);
        int32_t want;
        sift_status sr = sift_chain_sample(ref, row, V, &want, NULL);
        if (sr == SIFT_E_NO_CANDIDATE)
            break; /* a row of -inf: nothing to compare */
        MUST((sr) == (SIFT_OK));
        int32_t ids[256];
        size_t ne = 0;
        MUST((sift_chain_extras(hooked, ids, 256, &ne, NULL)) == (SIFT_OK));
        sift_candidate ext[256];
        for (size_t i = 0; i < ne; i++)
            ext[i] = (sift_candidate){ids[i], row[ids[i]]};
        sift_slice s = {0};
        sift_error e;
        MUST_MSG(sift_shards_merge(sh, S, V, k, ext, (int32_t)ne, buf, sizeof buf / sizeof *buf, &s,
                                   &e) == SIFT_OK,
                 "merge: %s", e.message);
        check_slice_of_row(&s, V);
        /* with the hook: the row's token, always */
        int32_t got;
        MUST((sift_chain_sample_slice(hooked, &s, &got, &e)) == (SIFT_OK));
        MUST((got) == (want));
        /* without: the row's token or SIFT_E_NEED_ROW, nothing changed */
        uint64_t before[4], after[4];
        sift__chain_rng_state(bare, before);
        sift_status sb = sift_chain_sample_slice(bare, &s, &got, &e);
        if (sb == SIFT_E_NEED_ROW) {
            sift__chain_rng_state(bare, after);
            MUST(memcmp(before, after, sizeof before) == 0);
            MUST((sift_chain_sample(bare, row, V, &got, NULL)) == (SIFT_OK));
        } else {
            MUST_MSG(sb == SIFT_OK, "%s", e.message);
        }
        MUST((got) == (want));
        uint64_t a[4], b[4], c[4];
        sift__chain_rng_state(ref, a);
        sift__chain_rng_state(hooked, b);
        sift__chain_rng_state(bare, c);
        MUST(memcmp(a, b, sizeof a) == 0 && memcmp(a, c, sizeof a) == 0);
        MUST((sift_chain_accept(ref, want, NULL)) == (SIFT_OK));
        MUST((sift_chain_accept(hooked, want, NULL)) == (SIFT_OK));
        MUST((sift_chain_accept(bare, want, NULL)) == (SIFT_OK));
        steps_done++;
    }
    sift_chain_free(ref);
    sift_chain_free(hooked);
    sift_chain_free(bare);
}

START_TEST(test_merged_shard_slices_give_the_whole_rows_token_or_ask_for_the_row)
{
    long cases = env_long("SIFT_SHARD_CASES", 3000);
    long long min_steps = env_long("SIFT_SHARD_MIN_STEPS", 0);
    tu_rng r = {(uint64_t)env_long("SIFT_SHARD_SEED", 20261204)};
    for (long i = 0; i < cases || steps_done < min_steps; i++)
        run_case(&r);
    printf("check_shard: %lld merged steps, every token the whole row's\n", steps_done);
    ck_assert_int_ge(steps_done, min_steps);
    ck_assert_int_gt(steps_done, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Bad input                                                           */
/* ------------------------------------------------------------------ */

/* Two shards over 8 ids: [0, 4) with top-2 {1: 5, 3: 4}, [4, 8) with
 * top-2 {6: 6, 4: 3}. */
static sift_candidate good_a[2] = {{1, 5.0f}, {3, 4.0f}}, good_b[2] = {{6, 6.0f}, {4, 3.0f}};

static void two_shards(sift_shard sh[2], sift_candidate *a, sift_candidate *b)
{
    memcpy(a, good_a, sizeof good_a);
    memcpy(b, good_b, sizeof good_b);
    sh[0] = (sift_shard){
        .struct_size = sizeof *sh, .offset = 0, .n_ids = 4, .n_prefix = 2, .prefix = a};
    sh[1] = (sift_shard){
        .struct_size = sizeof *sh, .offset = 4, .n_ids = 4, .n_prefix = 2, .prefix = b};
}

/* The call fails with `code`, a message holding `part`, index `index`
 * (unless -2), and *out untouched. */
static void expect_fail(const sift_shard *sh, size_t S, int32_t V, int32_t k,
                        const sift_candidate *ext, int32_t ne, sift_status code, int64_t index,
                        const char *part)
{
    sift_slice out, before;
    memset(&out, 0x5a, sizeof out);
    before = out;
    sift_error e;
    sift_candidate b[32];
    ck_assert_int_eq(sift_shards_merge(sh, S, V, k, ext, ne, b, 32, &out, &e), code);
    ck_assert_msg(strstr(e.message, part), "message '%s' lacks '%s'", e.message, part);
    if (index != -2)
        ck_assert_int_eq(e.index, index);
    ck_assert(memcmp(&out, &before, sizeof out) == 0);
}

START_TEST(test_bad_shards_name_the_shard_and_the_position_and_change_nothing)
{
    sift_shard sh[2];
    sift_candidate a[2], b[2];
    /* the good case merges: prefix 6, 5 (k = 2; B = max(4, 3) = 4, so the
     * union's top 2 are certain) */
    two_shards(sh, a, b);
    sift_slice out;
    sift_candidate bb[8];
    ck_assert_int_eq(sift_shards_merge(sh, 2, 8, 2, NULL, 0, bb, 8, &out, NULL), SIFT_OK);
    ck_assert_int_eq(out.n_prefix, 2);
    ck_assert_int_eq(out.prefix[0].id, 6);
    ck_assert_int_eq(out.prefix[1].id, 1);
    ck_assert_int_eq(out.n_extras, 2);
    /* k = 3: the third largest of the union (4.0, id 3) is >= B = 4 */
    ck_assert_int_eq(sift_shards_merge(sh, 2, 8, 3, NULL, 0, bb, 8, &out, NULL), SIFT_OK);
    ck_assert_int_eq(out.n_prefix, 3);
    /* k = 4: 3.0 (id 4) is below B = 4 (shard 0 may hide a 4.0): cut to 3 */
    ck_assert_int_eq(sift_shards_merge(sh, 2, 8, 4, NULL, 0, bb, 8, &out, NULL), SIFT_OK);
    ck_assert_int_eq(out.n_prefix, 3);
    ck_assert_int_eq(out.n_extras, 1);

    /* a gap, an overlap, short of V, past V */
    two_shards(sh, a, b);
    sh[1].offset = 5;
    sh[1].n_ids = 3;
    b[1].id = 5;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_SLICE, 1, "ids 4..4 are in no shard");
    two_shards(sh, a, b);
    sh[1].offset = 3;
    sh[1].n_ids = 5;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_SLICE, 1, "overlap");
    two_shards(sh, a, b);
    expect_fail(sh, 2, 9, 2, NULL, 0, SIFT_E_SLICE, 1, "ids 8..8 are in no shard");
    two_shards(sh, a, b);
    expect_fail(sh, 2, 7, 2, NULL, 0, SIFT_E_SLICE, 1, "past the row's 7 ids");
    /* k = 0, k above n_ids */
    two_shards(sh, a, b);
    sh[1].n_prefix = 0;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_SLICE, 1, "shard 1: n_prefix is 0");
    two_shards(sh, a, b);
    sh[0].n_prefix = 5;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_SLICE, 0, "shard 0: n_prefix is 5");
    /* an id outside the shard's range, an id twice */
    two_shards(sh, a, b);
    b[1].id = 2;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_SLICE, 1, "shard 1, prefix[1]: id 2 is outside");
    two_shards(sh, a, b);
    a[1].id = 1;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_SLICE, 1, "shard 0: id 1 is in its top-k twice");
    /* NaN, negative, infinite tail; unknown flags */
    two_shards(sh, a, b);
    sh[1].flags = SIFT_SHARD_TAIL_MASS;
    sh[1].tail_mass = NAN;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_SLICE, 1, "shard 1: tail_mass is nan");
    sh[1].tail_mass = -1.0;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_SLICE, 1, "shard 1: tail_mass is -1");
    sh[1].tail_mass = INFINITY;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_SLICE, 1, "shard 1: tail_mass is inf");
    two_shards(sh, a, b);
    sh[0].flags = 4u;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_SLICE, 0, "shard 0: unknown flag bits 0x4");
    /* NaN and +inf logits */
    two_shards(sh, a, b);
    b[0].logit = NAN;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_ROW_VALUE, 6, "shard 1, prefix[0]: id 6");
    two_shards(sh, a, b);
    a[0].logit = INFINITY;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_ROW_VALUE, 1, "shard 0, prefix[0]: id 1");
    /* extras: out of range, above a shard's minimum it lacks, a logit
     * that differs from its shard's, twice */
    two_shards(sh, a, b);
    sift_candidate x[2] = {{8, 0.0f}, {0, 0.0f}};
    expect_fail(sh, 2, 8, 2, x, 2, SIFT_E_SLICE, 0, "extras[0]: id 8 is outside");
    x[0] = (sift_candidate){5, 3.5f};
    expect_fail(sh, 2, 8, 2, x, 2, SIFT_E_SLICE, 0, "of shard 1, whose top-k does not hold it");
    x[0] = (sift_candidate){2, 1.0f};
    x[1] = (sift_candidate){6, 5.5f};
    expect_fail(sh, 2, 8, 2, x, 2, SIFT_E_SLICE, 1,
                "extras[1]: id 6 has logit 5.5, shard 1 gives 6");
    x[1] = (sift_candidate){2, 1.0f};
    expect_fail(sh, 2, 8, 2, x, 2, SIFT_E_SLICE, 1, "extras[1]: id 2 is in the extras twice");
    /* more shards than ids */
    sift_shard three[3];
    for (int i = 0; i < 3; i++)
        three[i] = (sift_shard){
            .struct_size = sizeof *three, .offset = i, .n_ids = 1, .n_prefix = 1, .prefix = a};
    expect_fail(three, 3, 2, 1, NULL, 0, SIFT_E_SLICE, -2, "3 shards for 2 ids");
    /* arguments */
    two_shards(sh, a, b);
    expect_fail(sh, 0, 8, 2, NULL, 0, SIFT_E_ARG, -2, "n_shards is 0");
    expect_fail(sh, 2, 8, 0, NULL, 0, SIFT_E_ARG, -2, "k is 0");
    expect_fail(sh, 2, 8, 9, NULL, 0, SIFT_E_ARG, -2, "k is 9");
    sh[1].struct_size = 8;
    expect_fail(sh, 2, 8, 2, NULL, 0, SIFT_E_ARG, 1, "shards[1].struct_size");
    two_shards(sh, a, b);
    ck_assert_int_eq(sift_shards_merge(sh, 2, 8, 2, NULL, 0, bb, 3, &out, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_shards_merge(NULL, 2, 8, 2, NULL, 0, bb, 8, &out, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_shards_merge(sh, 2, 8, 2, NULL, 0, NULL, 8, &out, NULL), SIFT_E_ARG);
    ck_assert_int_eq(sift_shards_merge(sh, 2, 8, 2, NULL, 0, bb, 8, NULL, NULL), SIFT_E_ARG);
}
END_TEST

/* The tail: a shard's own bound is rescaled to the row's maximum; a
 * shard without one gets its free bound; a complete shard adds 0. */
START_TEST(test_the_merged_tail_rescales_each_shards_bound_to_the_row_maximum)
{
    sift_shard sh[2];
    sift_candidate a[2], b[2];
    two_shards(sh, a, b);
    sift_slice out;
    sift_candidate bb[8];
    sh[0].flags = SIFT_SHARD_TAIL_MASS;
    sh[0].tail_mass = 0.5; /* relative to shard 0's maximum, 5 */
    ck_assert_int_eq(sift_shards_merge(sh, 2, 8, 2, NULL, 0, bb, 8, &out, NULL), SIFT_OK);
    /* 0.5 e^(5 - 6) + shard 1's free bound 2 e^(3 - 6) */
    double want = 0.5 * exp(-1.0) + 2.0 * exp(-3.0);
    ck_assert(out.tail_mass >= want && out.tail_mass <= want * (1.0 + 1e-9));
    /* a loose bound: the shard's free bound, 2 e^(4 - 6), is smaller */
    sh[0].tail_mass = 100.0;
    ck_assert_int_eq(sift_shards_merge(sh, 2, 8, 2, NULL, 0, bb, 8, &out, NULL), SIFT_OK);
    want = 2.0 * exp(-2.0) + 2.0 * exp(-3.0);
    ck_assert(out.tail_mass >= want && out.tail_mass <= want * (1.0 + 1e-9));
    /* complete shards: nothing outside the union */
    sift_candidate all[4] = {{0, 1.0f}, {2, 2.0f}, {1, 0.5f}, {3, -INFINITY}};
    sift_shard one = {
        .struct_size = sizeof one, .offset = 0, .n_ids = 4, .n_prefix = 4, .prefix = all};
    ck_assert_int_eq(sift_shards_merge(&one, 1, 4, 2, NULL, 0, bb, 8, &out, NULL), SIFT_OK);
    ck_assert(out.tail_mass == 0.0);
    ck_assert_int_eq(out.n_prefix, 2);
    ck_assert_int_eq(out.prefix[0].id, 2);
    ck_assert_int_eq(out.n_extras, 2);
}
END_TEST

/* The plan's device_k: k + SIFT_PLAN_DEVICE_MARGIN, at most the chain's
 * n_vocab, 0 with k = 0, and not written for a caller's older, shorter
 * sift_plan. */
START_TEST(test_plan_device_k_is_k_plus_the_margin_capped_at_the_row)
{
    ck_assert_int_eq(SIFT_PLAN_DEVICE_MARGIN, 8);
    sift_chain *c = make_chain(CH_LLAMA, 1, 1000, 40);
    sift_plan p = {.struct_size = sizeof p};
    ck_assert_int_eq(sift_chain_plan(c, &p, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(p.k, 40);
    ck_assert_int_eq(p.device_k, 48);
    ck_assert_int_eq(sift_chain_next_k(c, &p, NULL), SIFT_OK);
    ck_assert_int_eq(p.device_k, p.k + 8);
    /* an older caller's struct ends before device_k: left as it was */
    sift_plan old;
    memset(&old, 0x5a, sizeof old);
    old.struct_size = (uint32_t)offsetof(sift_plan, device_k);
    ck_assert_int_eq(sift_chain_plan(c, &old, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(old.k, 40);
    int32_t sentinel;
    memset(&sentinel, 0x5a, sizeof sentinel);
    ck_assert_int_eq(old.device_k, sentinel);
    sift_chain_free(c);
    /* capped at the chain's n_vocab */
    sift_chain_params cp;
    sift_chain_params_init(&cp);
    cp.n_vocab = 30;
    ck_assert_int_eq(sift_chain_new(&c, &cp, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 25, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_plan(c, &p, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(p.k, 25);
    ck_assert_int_eq(p.device_k, 30);
    sift_chain_free(c);
    /* a chain that needs whole rows: 0 */
    sift_chain_params_init(&cp);
    ck_assert_int_eq(sift_chain_new(&c, &cp, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_typical(c, 0.9f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_plan(c, &p, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(p.k, 0);
    ck_assert_int_eq(p.device_k, 0);
    sift_chain_free(c);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("shard");
    TCase *t = tcase_create("api");
    tcase_add_test(t, test_bad_shards_name_the_shard_and_the_position_and_change_nothing);
    tcase_add_test(t, test_the_merged_tail_rescales_each_shards_bound_to_the_row_maximum);
    tcase_add_test(t, test_plan_device_k_is_k_plus_the_margin_capped_at_the_row);
    suite_add_tcase(s, t);
    TCase *p = tcase_create("property");
    tcase_set_timeout(p, 900);
    tcase_add_test(p, test_merged_shard_slices_give_the_whole_rows_token_or_ask_for_the_row);
    suite_add_tcase(s, p);
    return s;
}

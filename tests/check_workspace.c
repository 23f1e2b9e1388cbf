/*
 * check_workspace.c - shared scratch (sift_workspace, core/workspace.c):
 * chains that borrow a workspace for each call give bitwise what chains
 * with their own scratch give, and the workspace's rules hold.
 *
 * The property test is the proof of exactness: random chains (every
 * stage family the oracle models) in pairs, one with its own scratch and
 * one with a workspace attached that every chain of the case shares (and
 * that outlives the case, so it meets rows of every length and grows);
 * random steps of every kind that uses scratch (a whole row, a slice at
 * the chain's k or too short so the row hook runs, distributions of both,
 * survivors, a batch) in a random chain order. After every step the
 * statuses, tokens, outputs, RNG states, state digests and
 * sift_chain_stats counters of the two are equal.
 *
 * The unit tests pin the rules: an idle chain with a workspace holds no
 * scratch (the memory goal, at V = 151,936), a workspace too small for a
 * row grows, bad arguments, a freed workspace lives until its last chain
 * lets go, a second call on a workspace in use is refused with nothing
 * changed (and the call in progress is not disturbed), the failing
 * allocator at every count, and the verifier's shadow uses the chain's
 * workspace.
 *
 * SIFT_WORKSPACE_CASES (environment) sets the number of property cases
 * (default 120).
 */
#include "harness.h"
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "oracle/oracle.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static long n_cases(void)
{
    const char *e = getenv("SIFT_WORKSPACE_CASES");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : 120;
}

/* ------------------------------------------------------------------ */
/* A counting allocator that can fail its nth allocation               */
/* ------------------------------------------------------------------ */

typedef struct counter {
    long live_blocks;
    size_t live_bytes;
    long n_allocs;
    long fail_at; /* the allocation (0-based) that fails; -1 = none */
} counter;

typedef union header {
    size_t size;
    max_align_t align;
} header;

static void *ct_alloc(void *u, size_t n)
{
    counter *c = u;
    if (c->fail_at >= 0 && c->n_allocs++ == c->fail_at)
        return NULL;
    if (c->fail_at < 0)
        c->n_allocs++;
    header *h = malloc(sizeof *h + n);
    if (!h)
        return NULL;
    h->size = n;
    c->live_blocks++;
    c->live_bytes += n;
    return h + 1;
}

static void ct_free(void *u, void *p)
{
    counter *c = u;
    if (!p)
        return;
    header *h = (header *)p - 1;
    c->live_blocks--;
    c->live_bytes -= h->size;
    free(h);
}

static sift_allocator counting(counter *c)
{
    c->live_blocks = 0;
    c->live_bytes = 0;
    c->n_allocs = 0;
    c->fail_at = -1;
    sift_allocator a = {sizeof(sift_allocator), ct_alloc, ct_free, c, NULL};
    return a;
}

/* ------------------------------------------------------------------ */
/* Chains, snapshots, hooks                                            */
/* ------------------------------------------------------------------ */

static sift_workspace *new_ws(int32_t n_vocab, const sift_allocator *al)
{
    sift_workspace_params p;
    sift_workspace_params_init(&p);
    p.n_vocab = n_vocab;
    p.allocator = al;
    sift_workspace *w = NULL;
    ck_assert_int_eq(sift_workspace_new(&w, &p, NULL), SIFT_OK);
    ck_assert_ptr_nonnull(w);
    return w;
}

/* Everything of a chain a call may change, for bitwise comparison. */
typedef struct snap {
    uint64_t rng[4];
    uint64_t digest;
    sift_stats st;
} snap;

static void take(const sift_chain *c, snap *s)
{
    memset(s, 0, sizeof *s);
    sift__chain_rng_state(c, s->rng);
    s->digest = sift__chain_state_digest(c);
    s->st.struct_size = sizeof s->st;
    ck_assert_int_eq(sift_chain_stats(c, &s->st, NULL), SIFT_OK);
}

static int same(const sift_chain *a, const sift_chain *b)
{
    snap x, y;
    take(a, &x);
    take(b, &y);
    return memcmp(&x, &y, sizeof x) == 0;
}

/* A chain's row hook: one row, and an optional nested call. */
typedef struct row_hook {
    const float *row;
    int calls;
    void (*nested)(void *);
    void *nested_user;
} row_hook;

static int hook_one(void *user, float *row, int32_t V)
{
    row_hook *h = user;
    h->calls++;
    if (h->nested)
        h->nested(h->nested_user);
    memcpy(row, h->row, (size_t)V * sizeof *row);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The property test                                                   */
/* ------------------------------------------------------------------ */

static const sp_kind lows[] = {SP_PENALTIES, SP_DRY, SP_LOGIT_BIAS, SP_TEMP, SP_NO_REPEAT_NGRAM};
static const sp_kind cuts[] = {SP_TOP_K, SP_TOP_K, SP_TOP_K_TIES, SP_MIN_P, SP_TOP_P};
static const sp_kind mids[] = {
    SP_TOP_P,   SP_MIN_P, SP_TEMP,        SP_TYPICAL,        SP_XTC,
    SP_EPSILON, SP_ETA,   SP_TOP_N_SIGMA, SP_ALLOWED_TOKENS, SP_TEMP_EXT};
static const sp_kind sels[] = {SP_GREEDY,   SP_DIST,        SP_DIST_ID,
                               SP_MIROSTAT, SP_MIROSTAT_V2, SP_ADAPTIVE_P};

static void gen_chain(tu_rng *r, sp_chain *spec, int32_t V)
{
    memset(spec, 0, sizeof *spec);
    spec->seed = tu_next(r);
    size_t n_low = (size_t)tu_range(r, 0, 3);
    for (size_t i = 0; i < n_low; i++)
        gen_stage(r, &spec->st[spec->n++], lows[tu_range(r, 0, (int64_t)N(lows) - 1)], V);
    if (tu_unif(r) < 0.85) {
        sp_stage *cut = &spec->st[spec->n++];
        gen_stage(r, cut, cuts[tu_range(r, 0, (int64_t)N(cuts) - 1)], V);
        if (cut->kind == SP_TOP_K || cut->kind == SP_TOP_K_TIES)
            cut->i0 = (int32_t)tu_range(r, 1, 50);
    }
    size_t n_after = (size_t)tu_range(r, 0, 2);
    for (size_t i = 0; i < n_after; i++)
        gen_stage(r, &spec->st[spec->n++], mids[tu_range(r, 0, (int64_t)N(mids) - 1)], V);
    gen_stage(r, &spec->st[spec->n++], sels[tu_range(r, 0, (int64_t)N(sels) - 1)], V);
}

#define MAXC 5
#define STEPS 10

/* One pair: the chain with its own scratch (a) and its twin with the
 * shared workspace (b). */
typedef struct pair {
    sp_chain spec;
    sift_chain *a, *b;
    row_hook ha, hb;
    float *row;
} pair;

typedef struct tally {
    long steps, rows, slices, hooks, dists, survivors, batches, failed;
} tally;

/* The same status and, on success, the same token and state. */
static void check_pair(const pair *p, sift_status sa, sift_status sb, int32_t ta, int32_t tb,
                       const char *what, long cs, int step)
{
    ck_assert_msg(sa == sb, "case %ld step %d %s: status %d private, %d shared", cs, step, what,
                  (int)sa, (int)sb);
    ck_assert_msg(ta == tb, "case %ld step %d %s: token %d private, %d shared", cs, step, what,
                  (int)ta, (int)tb);
    ck_assert_msg(same(p->a, p->b), "case %ld step %d %s: the states differ", cs, step, what);
}

/* A slice of the row for p's chains at k (the chains' extras added). */
static int build_slice(pair *p, sift_slicer *sl, int32_t V, int32_t k, int32_t *ids, size_t cap,
                       sift_slice *out)
{
    size_t na = 0, nb = 0;
    int32_t *idb = ids + cap;
    ck_assert_int_eq(sift_chain_extras(p->a, ids, cap, &na, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_extras(p->b, idb, cap, &nb, NULL), SIFT_OK);
    ck_assert_uint_eq(na, nb);
    ck_assert(memcmp(ids, idb, na * sizeof *ids) == 0);
    return sift_slicer_build(sl, p->row, V, k, ids, na, out, NULL) == SIFT_OK;
}

static void step_pair(pair *p, tu_rng *r, int32_t V, sift_slicer *sl, int32_t *ids, size_t cap,
                      sift_token_prob *da, sift_token_prob *db, sift_candidate *ca,
                      sift_candidate *cb, tally *ty, long cs, int step)
{
    int op = (int)tu_range(r, 0, 5);
    int32_t ta = -1, tb = -1;
    sift_status sa, sb;
    sift_plan plan = {.struct_size = sizeof plan};
    ck_assert_int_eq(sift_chain_next_k(p->a, &plan, NULL), SIFT_OK);
    int32_t k = plan.k > V ? V : plan.k;
    if ((op == 1 || op == 3) && k > 0 && tu_unif(r) < 0.3)
        k = (int32_t)tu_range(r, 1, k); /* may be too short: the hook */
    if ((op == 1 || op == 3) && k == 0)
        op = op == 1 ? 0 : 2;
    sift_slice s;
    memset(&s, 0, sizeof s);
    if ((op == 1 || op == 3) && !build_slice(p, sl, V, k, ids, cap, &s))
        op = op == 1 ? 0 : 2;
    int hooks = p->ha.calls;
    switch (op) {
    case 0:
        sa = sift_chain_sample(p->a, p->row, V, &ta, NULL);
        sb = sift_chain_sample(p->b, p->row, V, &tb, NULL);
        ty->rows++;
        break;
    case 1:
        sa = sift_chain_sample_slice(p->a, &s, &ta, NULL);
        sb = sift_chain_sample_slice(p->b, &s, &tb, NULL);
        ty->slices++;
        break;
    case 2:
    case 3: {
        size_t na = 0, nb = 0;
        if (op == 2) {
            sa = sift_chain_distribution(p->a, p->row, V, da, (size_t)V, &na, NULL);
            sb = sift_chain_distribution(p->b, p->row, V, db, (size_t)V, &nb, NULL);
        } else {
            sa = sift_chain_distribution_slice(p->a, &s, da, (size_t)V, &na, NULL);
            sb = sift_chain_distribution_slice(p->b, &s, db, (size_t)V, &nb, NULL);
        }
        check_pair(p, sa, sb, 0, 0, "distribution", cs, step);
        if (sa == SIFT_OK) {
            ck_assert_uint_eq(na, nb);
            ck_assert(memcmp(da, db, (na < (size_t)V ? na : (size_t)V) * sizeof *da) == 0);
        }
        ty->dists++;
        return;
    }
    default: {
        size_t end = sift_chain_n_stages(p->a) - 1; /* stages before the selector */
        size_t n_st = (size_t)tu_range(r, 0, (int64_t)end);
        size_t na = 0, nb = 0;
        sa = sift_chain_survivors(p->a, p->row, V, n_st, ca, (size_t)V, &na, NULL);
        sb = sift_chain_survivors(p->b, p->row, V, n_st, cb, (size_t)V, &nb, NULL);
        check_pair(p, sa, sb, 0, 0, "survivors", cs, step);
        if (sa == SIFT_OK) {
            ck_assert_uint_eq(na, nb);
            ck_assert(memcmp(ca, cb, na * sizeof *ca) == 0);
        }
        ty->survivors++;
        return;
    }
    }
    ty->hooks += p->ha.calls - hooks;
    check_pair(p, sa, sb, ta, tb, op ? "slice" : "row", cs, step);
    if (sa) {
        ty->failed++;
        return;
    }
    ck_assert_int_eq(sift_chain_accept(p->a, ta, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_accept(p->b, tb, NULL), SIFT_OK);
}

/* A batch of every shared-workspace chain against single calls on the
 * private ones, on rows. */
static void batch_step(pair *ps, size_t n, int32_t V, tally *ty, long cs, int step)
{
    sift_chain *chains[MAXC];
    const float *rows[MAXC];
    int32_t tokens[MAXC];
    sift_status st[MAXC];
    for (size_t i = 0; i < n; i++) {
        chains[i] = ps[i].b;
        rows[i] = ps[i].row;
    }
    sift_batch_args a;
    sift_batch_args_init(&a);
    a.chains = chains;
    a.n = n;
    a.rows = rows;
    a.n_vocab = V;
    a.flags = SIFT_BATCH_ACCEPT;
    sift_status bs = sift_chains_sample(&a, tokens, st, NULL);
    (void)bs; /* the statuses per slot are compared */
    for (size_t i = 0; i < n; i++) {
        int32_t t = -1;
        sift_status s = sift_chain_sample(ps[i].a, rows[i], V, &t, NULL);
        if (s == SIFT_OK)
            s = sift_chain_accept(ps[i].a, t, NULL);
        check_pair(&ps[i], s, st[i], s ? -1 : t, tokens[i], "batch", cs, step);
    }
    ty->batches++;
}

static void property(uint64_t seed, long cases, tally *ty)
{
    tu_rng r = {seed};
    sift_workspace *w = NULL;
    for (long cs = 0; cs < cases; cs++) {
        int32_t V = cs % 6 == 0 ? (int32_t)tu_range(&r, 2, 16) : (int32_t)tu_range(&r, 40, 3000);
        /* Mostly one workspace across cases (it meets every V and
         * grows); sometimes a new one, sized for nothing, too little or
         * exactly this V. */
        if (!w || tu_unif(&r) < 0.15) {
            sift_workspace_free(w);
            int64_t pick = tu_range(&r, 0, 2);
            w = new_ws(pick == 0 ? 0 : pick == 1 ? (int32_t)tu_range(&r, 1, V) : V, NULL);
        }
        size_t n = (size_t)tu_range(&r, 1, MAXC);
        pair ps[MAXC];
        memset(ps, 0, sizeof ps);
        float *rows = malloc(n * (size_t)V * sizeof *rows);
        size_t cap = (size_t)V + 4096;
        int32_t *ids = malloc(2 * cap * sizeof *ids);
        sift_token_prob *da = malloc((size_t)V * sizeof *da), *db = malloc((size_t)V * sizeof *db);
        sift_candidate *ca = malloc((size_t)V * sizeof *ca), *cb = malloc((size_t)V * sizeof *cb);
        ck_assert(rows && ids && da && db && ca && cb);
        sift_slicer *sl = NULL;
        ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
        int with_hook = tu_unif(&r) < 0.7;
        for (size_t i = 0; i < n; i++) {
            pair *p = &ps[i];
            gen_chain(&r, &p->spec, V);
            p->row = rows + i * (size_t)V;
            ck_assert_int_eq(sp_build(&p->spec, &p->a, NULL), SIFT_OK);
            ck_assert_int_eq(sp_build(&p->spec, &p->b, NULL), SIFT_OK);
            /* Sometimes the chain has scratch of its own before it is
             * attached (attaching frees it). */
            if (tu_unif(&r) < 0.3) {
                int32_t t;
                tu_row(&r, p->row, V, TU_ROW_NORMAL);
                sift_status s1 = sift_chain_sample(p->a, p->row, V, &t, NULL);
                sift_status s2 = sift_chain_sample(p->b, p->row, V, &t, NULL);
                ck_assert_int_eq(s1, s2);
            }
            ck_assert_int_eq(sift_chain_set_workspace(p->b, w, NULL), SIFT_OK);
            p->ha = (row_hook){p->row, 0, NULL, NULL};
            p->hb = (row_hook){p->row, 0, NULL, NULL};
            if (with_hook) {
                ck_assert_int_eq(sift_chain_set_row_hook(p->a, hook_one, &p->ha, NULL), SIFT_OK);
                ck_assert_int_eq(sift_chain_set_row_hook(p->b, hook_one, &p->hb, NULL), SIFT_OK);
            }
            int32_t n_prompt = (int32_t)tu_range(&r, 0, 6);
            for (int32_t t = 0; t < n_prompt; t++) {
                int32_t tok = (int32_t)tu_range(&r, 0, V - 1);
                ck_assert_int_eq(sift_chain_accept_prompt(p->a, tok, NULL), SIFT_OK);
                ck_assert_int_eq(sift_chain_accept_prompt(p->b, tok, NULL), SIFT_OK);
            }
        }
        for (int step = 0; step < STEPS; step++) {
            for (size_t i = 0; i < n; i++)
                tu_row(&r, ps[i].row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
            ty->steps++;
            if (tu_unif(&r) < 0.15) {
                batch_step(ps, n, V, ty, cs, step);
                continue;
            }
            /* every chain once, from a random first one */
            size_t first = (size_t)tu_range(&r, 0, (int64_t)n - 1);
            for (size_t j = 0; j < n; j++)
                step_pair(&ps[(first + j) % n], &r, V, sl, ids, cap, da, db, ca, cb, ty, cs, step);
        }
        for (size_t i = 0; i < n; i++) {
            sift_chain_free(ps[i].a);
            sift_chain_free(ps[i].b);
        }
        sift_slicer_free(sl);
        free(rows);
        free(ids);
        free(da);
        free(db);
        free(ca);
        free(cb);
    }
    sift_workspace_free(w);
}

START_TEST(test_chains_sharing_a_workspace_match_chains_with_their_own_bitwise)
{
    tally ty;
    memset(&ty, 0, sizeof ty);
    property(0x5eedf00dULL, n_cases(), &ty);
    /* the run reached every kind of step */
    ck_assert_int_gt(ty.rows, 0);
    ck_assert_int_gt(ty.slices, 0);
    ck_assert_int_gt(ty.hooks, 0);
    ck_assert_int_gt(ty.dists, 0);
    ck_assert_int_gt(ty.survivors, 0);
    ck_assert_int_gt(ty.batches, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Memory                                                              */
/* ------------------------------------------------------------------ */

enum { BIG_V = 151936 };

/* A realistic chain: penalties, DRY, top_k, top_p, min_p, temp, dist. */
static sift_chain *server_chain(uint64_t seed, const sift_allocator *al)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = seed;
    p.allocator = al;
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_chain_new(&c, &p, NULL), SIFT_OK);
    sift_dry_params dp;
    sift_dry_params_init(&dp);
    dp.multiplier = 0.8f;
    dp.base = 1.75f;
    dp.allowed_length = 2;
    dp.last_n = 1024;
    ck_assert_int_eq(sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dry(c, &dp, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 40, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_p(c, 0.95f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_min_p(c, 0.05f, 1, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.8f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    return c;
}

START_TEST(test_an_idle_chain_with_a_workspace_holds_no_scratch)
{
    counter cc, cw;
    sift_allocator ac = counting(&cc), aw = counting(&cw);
    float *row = malloc((size_t)BIG_V * sizeof *row);
    ck_assert_ptr_nonnull(row);
    tu_rng r = {77};
    sift_chain *c = server_chain(5, &ac);
    size_t built = cc.live_bytes; /* the chain, its stages and their history */
    printf("server chain: %zu bytes in %ld blocks before its first row\n", built, cc.live_blocks);
    /* With its own scratch, the first row costs ~68 bytes per token. */
    tu_row(&r, row, BIG_V, TU_ROW_NORMAL);
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, BIG_V, &t, NULL), SIFT_OK);
    ck_assert_uint_gt(cc.live_bytes, built + (size_t)BIG_V * 40);
    /* Attached: the chain's scratch is freed, and rows and slices (with
     * the hook's row and the slice id set) are paid by the workspace. */
    sift_workspace *w = new_ws(0, &aw);
    ck_assert_int_eq(sift_chain_set_workspace(c, w, NULL), SIFT_OK);
    ck_assert_uint_eq(cc.live_bytes, built);
    row_hook h = {row, 0, NULL, NULL};
    ck_assert_int_eq(sift_chain_set_row_hook(c, hook_one, &h, NULL), SIFT_OK);
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, BIG_V, NULL, NULL), SIFT_OK);
    for (int s = 0; s < 6; s++) {
        tu_row(&r, row, BIG_V, s % 2 ? TU_ROW_NORMAL : TU_ROW_BF16);
        if (s % 3 == 0) {
            ck_assert_int_eq(sift_chain_sample(c, row, BIG_V, &t, NULL), SIFT_OK);
        } else {
            sift_slice slice;
            ck_assert_int_eq(
                sift_slicer_build(sl, row, BIG_V, s % 3 == 1 ? 1 : 64, NULL, 0, &slice, NULL),
                SIFT_OK);
            ck_assert_int_eq(sift_chain_sample_slice(c, &slice, &t, NULL), SIFT_OK);
        }
        ck_assert_int_eq(sift_chain_accept(c, t, NULL), SIFT_OK);
    }
    ck_assert_int_gt(h.calls, 0); /* a slice of 1 needed the row */
    /* The goal of docs/api.md, "Memory of a chain": at most 64 KiB plus
     * the history; this chain holds no scratch at all. */
    ck_assert_uint_eq(cc.live_bytes, built);
    ck_assert_uint_le(cc.live_bytes, 65536 + (64 + 1024) * 16);
    /* The workspace holds it, once: about 68 bytes per token. */
    ck_assert_uint_gt(cw.live_bytes, (size_t)BIG_V * 60);
    ck_assert_uint_lt(cw.live_bytes, (size_t)BIG_V * 80);
    sift_slicer_free(sl);
    sift_chain_free(c);
    ck_assert_uint_eq(cc.live_bytes, 0);
    ck_assert_uint_gt(cw.live_bytes, 0); /* the handle still holds it */
    sift_workspace_free(w);
    ck_assert_uint_eq(cw.live_bytes, 0);
    free(row);
}
END_TEST

START_TEST(test_a_workspace_sized_up_front_does_not_allocate_on_the_first_call)
{
    enum { V = 5000 };
    counter cw;
    sift_allocator aw = counting(&cw);
    sift_workspace *w = new_ws(V, &aw);
    long made = cw.n_allocs;
    sift_chain *c = tu_small_chain(9, NULL);
    ck_assert_int_eq(sift_chain_set_workspace(c, w, NULL), SIFT_OK);
    float row[V];
    tu_rng r = {8};
    tu_row(&r, row, V, TU_ROW_NORMAL);
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, V, &t, NULL), SIFT_OK);
    ck_assert_int_eq(cw.n_allocs, made);
    sift_chain_free(c);
    sift_workspace_free(w);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Growth, arguments, lifetime                                         */
/* ------------------------------------------------------------------ */

START_TEST(test_a_workspace_too_small_for_the_row_grows_and_changes_no_result)
{
    enum { V = 700 };
    counter cw;
    sift_allocator aw = counting(&cw);
    sift_workspace *w = new_ws(8, &aw);
    size_t small = cw.live_bytes;
    sift_chain *a = tu_small_chain(3, NULL), *b = tu_small_chain(3, NULL);
    ck_assert_int_eq(sift_chain_set_workspace(b, w, NULL), SIFT_OK);
    tu_rng r = {4};
    float row[V];
    for (int s = 0; s < 5; s++) {
        tu_row(&r, row, V, TU_ROW_NORMAL);
        int32_t ta, tb;
        ck_assert_int_eq(sift_chain_sample(a, row, V, &ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(b, row, V, &tb, NULL), SIFT_OK);
        ck_assert_int_eq(ta, tb);
        ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b, tb, NULL), SIFT_OK);
        ck_assert(same(a, b));
    }
    ck_assert_uint_gt(cw.live_bytes, small + (size_t)V * 50);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_workspace_free(w);
    ck_assert_uint_eq(cw.live_bytes, 0);
}
END_TEST

START_TEST(test_bad_arguments_are_refused_with_nothing_changed)
{
    sift_error err;
    sift_workspace *w = (sift_workspace *)1;
    ck_assert_int_eq(sift_workspace_new(NULL, NULL, &err), SIFT_E_ARG);
    sift_workspace_params p;
    sift_workspace_params_init(&p);
    p.struct_size = 0;
    ck_assert_int_eq(sift_workspace_new(&w, &p, &err), SIFT_E_ARG);
    ck_assert_ptr_null(w);
    ck_assert(strstr(err.message, "struct_size") != NULL);
    sift_workspace_params_init(&p);
    p.struct_size = sizeof p + 8;
    ck_assert_int_eq(sift_workspace_new(&w, &p, &err), SIFT_E_ARG);
    sift_workspace_params_init(&p);
    p.n_vocab = -1;
    ck_assert_int_eq(sift_workspace_new(&w, &p, &err), SIFT_E_ARG);
    ck_assert(strstr(err.message, "n_vocab") != NULL);
    sift_allocator half = {sizeof(sift_allocator), ct_alloc, NULL, NULL, NULL};
    sift_workspace_params_init(&p);
    p.allocator = &half;
    ck_assert_int_eq(sift_workspace_new(&w, &p, &err), SIFT_E_ARG);
    ck_assert_ptr_null(w);
    /* a caller built against a layout without n_vocab: its default */
    sift_workspace_params_init(&p);
    p.struct_size = (uint32_t)offsetof(sift_workspace_params, n_vocab);
    p.n_vocab = -1;
    ck_assert_int_eq(sift_workspace_new(&w, &p, &err), SIFT_OK);
    sift_workspace_free(w);
    /* NULL params: the defaults */
    ck_assert_int_eq(sift_workspace_new(&w, NULL, &err), SIFT_OK);
    sift_workspace_params_init(NULL);
    sift_workspace_free(NULL);
    /* a NULL chain; something that is not a workspace */
    ck_assert_int_eq(sift_chain_set_workspace(NULL, w, &err), SIFT_E_ARG);
    sift_chain *c = tu_small_chain(1, NULL);
    snap before;
    take(c, &before);
    uint64_t junk[32] = {0};
    ck_assert_int_eq(sift_chain_set_workspace(c, (sift_workspace *)(void *)junk, &err), SIFT_E_ARG);
    ck_assert(strstr(err.message, "workspace") != NULL);
    ck_assert_ptr_null(c->workspace);
    /* detaching what is not attached, attaching twice: no-ops */
    ck_assert_int_eq(sift_chain_set_workspace(c, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_set_workspace(c, w, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_set_workspace(c, w, &err), SIFT_OK);
    ck_assert_ptr_eq(c->workspace, w);
    snap after;
    take(c, &after);
    ck_assert(memcmp(&before, &after, sizeof before) == 0);
    sift_chain_free(c);
    sift_workspace_free(w);
}
END_TEST

START_TEST(test_a_freed_workspace_lives_until_its_last_chain_lets_go)
{
    enum { V = 300 };
    counter cw;
    sift_allocator aw = counting(&cw);
    sift_workspace *w = new_ws(V, &aw);
    sift_chain *a = tu_small_chain(2, NULL), *b = tu_small_chain(2, NULL),
               *ref = tu_small_chain(2, NULL);
    ck_assert_int_eq(sift_chain_set_workspace(a, w, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_set_workspace(b, w, NULL), SIFT_OK);
    sift_workspace_free(w); /* the handle goes; a and b still use it */
    ck_assert_int_gt(cw.live_blocks, 0);
    tu_rng r = {5};
    float row[V];
    for (int s = 0; s < 3; s++) {
        tu_row(&r, row, V, TU_ROW_NORMAL);
        int32_t ta, tb, tr;
        ck_assert_int_eq(sift_chain_sample(a, row, V, &ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(b, row, V, &tb, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_sample(ref, row, V, &tr, NULL), SIFT_OK);
        ck_assert_int_eq(ta, tr);
        ck_assert_int_eq(tb, tr);
        ck_assert_int_eq(sift_chain_accept(a, ta, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(b, tb, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(ref, tr, NULL), SIFT_OK);
    }
    sift_chain_free(a);
    ck_assert_int_gt(cw.live_blocks, 0);
    /* b detaches: the last reference; b then sizes scratch of its own */
    ck_assert_int_eq(sift_chain_set_workspace(b, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(cw.live_blocks, 0);
    ck_assert_uint_eq(cw.live_bytes, 0);
    tu_row(&r, row, V, TU_ROW_NORMAL);
    int32_t tb, tr;
    ck_assert_int_eq(sift_chain_sample(b, row, V, &tb, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample(ref, row, V, &tr, NULL), SIFT_OK);
    ck_assert_int_eq(tb, tr);
    ck_assert(same(b, ref));
    sift_chain_free(b);
    sift_chain_free(ref);
}
END_TEST

START_TEST(test_a_clone_does_not_inherit_the_workspace)
{
    sift_workspace *w = new_ws(0, NULL);
    sift_chain *c = tu_small_chain(4, NULL);
    ck_assert_int_eq(sift_chain_set_workspace(c, w, NULL), SIFT_OK);
    sift_chain *d = NULL;
    ck_assert_int_eq(sift_chain_clone(c, &d, NULL), SIFT_OK);
    ck_assert_ptr_null(d->workspace);
    sift_chain_free(c);
    sift_workspace_free(w);
    sift_chain_free(d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* One call at a time                                                  */
/* ------------------------------------------------------------------ */

enum { RV = 64 };

/* The calls a hook makes on another chain `other` that shares the busy
 * workspace, and on `free_chain` whose workspace is a different one. */
typedef struct nested {
    sift_chain *other, *free_chain;
    const float *row;
    sift_slicer *sl;
    int ran;
    sift_status got[6];
    sift_status free_got;
    int32_t tokens[2];
    int changed;
    sift_error err;
} nested;

static void nested_calls(void *user)
{
    nested *n = user;
    snap before;
    take(n->other, &before);
    int32_t t = 77;
    size_t nn = 0;
    sift_token_prob tp[RV];
    sift_candidate cd[RV];
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(n->sl, n->row, RV, 8, NULL, 0, &s, NULL), SIFT_OK);
    n->got[0] = sift_chain_sample(n->other, n->row, RV, &t, &n->err);
    n->got[1] = sift_chain_sample_slice(n->other, &s, &t, NULL);
    n->got[2] = sift_chain_distribution(n->other, n->row, RV, tp, RV, &nn, NULL);
    n->got[3] = sift_chain_distribution_slice(n->other, &s, tp, RV, &nn, NULL);
    n->got[4] = sift_chain_survivors(n->other, n->row, RV, 1, cd, RV, &nn, NULL);
    sift_chain *chains[1] = {n->other};
    const float *rows[1] = {n->row};
    sift_batch_args a;
    sift_batch_args_init(&a);
    a.chains = chains;
    a.n = 1;
    a.rows = rows;
    a.n_vocab = RV;
    sift_status st[1];
    sift_status bs = sift_chains_sample(&a, n->tokens, st, NULL);
    ck_assert_int_eq(bs, SIFT_E_STATE);
    n->got[5] = st[0];
    snap after;
    take(n->other, &after);
    n->changed = memcmp(&before, &after, sizeof before) != 0 || t != 77 || n->tokens[0] != -1;
    /* a chain with another workspace is free to run */
    n->free_got = sift_chain_sample(n->free_chain, n->row, RV, &n->tokens[1], NULL);
    n->ran++;
}

START_TEST(test_a_second_call_on_a_workspace_in_use_is_refused_and_changes_nothing)
{
    tu_rng r = {11};
    float row[RV], other_row[RV];
    tu_row(&r, row, RV, TU_ROW_NORMAL);
    tu_row(&r, other_row, RV, TU_ROW_NORMAL);
    sift_workspace *w = new_ws(0, NULL), *w2 = new_ws(0, NULL);
    sift_chain *a = tu_small_chain(6, NULL), *ref = tu_small_chain(6, NULL);
    sift_chain *other = tu_small_chain(7, NULL), *free_chain = tu_small_chain(8, NULL);
    ck_assert_int_eq(sift_chain_set_workspace(a, w, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_set_workspace(other, w, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_set_workspace(free_chain, w2, NULL), SIFT_OK);
    sift_slicer *sl, *sl2; /* the outer slice's, the nested calls' */
    ck_assert_int_eq(sift_slicer_new(&sl, RV, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_slicer_new(&sl2, RV, NULL, NULL), SIFT_OK);
    nested n;
    memset(&n, 0, sizeof n);
    n.other = other;
    n.free_chain = free_chain;
    n.row = other_row;
    n.sl = sl2;
    row_hook h = {row, 0, nested_calls, &n}, hr = {row, 0, NULL, NULL};
    ck_assert_int_eq(sift_chain_set_row_hook(a, hook_one, &h, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_set_row_hook(ref, hook_one, &hr, NULL), SIFT_OK);
    /* A slice of 1 cannot decide top_k 8: the hook runs inside a's call,
     * while a has the workspace. */
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(sl, row, RV, 1, NULL, 0, &s, NULL), SIFT_OK);
    int32_t ta, tr;
    ck_assert_int_eq(sift_chain_sample_slice(a, &s, &ta, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_sample_slice(ref, &s, &tr, NULL), SIFT_OK);
    ck_assert_int_eq(n.ran, 1);
    for (size_t i = 0; i < N(n.got); i++)
        ck_assert_msg(n.got[i] == SIFT_E_STATE, "nested call %zu returned %d", i, (int)n.got[i]);
    ck_assert(!n.changed);
    ck_assert_int_eq(n.free_got, SIFT_OK);
    /* the call in progress is not disturbed */
    ck_assert_int_eq(ta, tr);
    ck_assert(same(a, ref));
    /* the refusal says why */
    ck_assert_msg(strstr(n.err.message, "workspace is in use") != NULL, "%s", n.err.message);
    /* and once a's call is over, other runs */
    ck_assert_int_eq(sift_chain_sample(other, other_row, RV, &ta, NULL), SIFT_OK);
    sift_chain_free(a);
    sift_chain_free(ref);
    sift_chain_free(other);
    sift_chain_free(free_chain);
    sift_slicer_free(sl);
    sift_slicer_free(sl2);
    sift_workspace_free(w);
    sift_workspace_free(w2);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The failing allocator                                               */
/* ------------------------------------------------------------------ */

START_TEST(test_failing_the_nth_workspace_allocation_is_clean_for_every_n)
{
    enum { V = 400 };
    tu_rng r = {12};
    float row[V];
    tu_row(&r, row, V, TU_ROW_NORMAL);
    sift_chain *ref = tu_small_chain(13, NULL);
    row_hook hr = {row, 0, NULL, NULL};
    ck_assert_int_eq(sift_chain_set_row_hook(ref, hook_one, &hr, NULL), SIFT_OK);
    sift_slicer *sl;
    ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(sl, row, V, 1, NULL, 0, &s, NULL), SIFT_OK);
    int32_t want;
    ck_assert_int_eq(sift_chain_sample_slice(ref, &s, &want, NULL), SIFT_OK);
    long nth = 0;
    for (;; nth++) {
        counter cw;
        sift_allocator aw = counting(&cw);
        sift_workspace *w = new_ws(0, &aw);
        cw.fail_at = cw.n_allocs + nth;
        sift_chain *c = tu_small_chain(13, NULL);
        row_hook h = {row, 0, NULL, NULL};
        ck_assert_int_eq(sift_chain_set_row_hook(c, hook_one, &h, NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_set_workspace(c, w, NULL), SIFT_OK);
        snap before;
        take(c, &before);
        int32_t t = -5;
        sift_error err;
        sift_status st = sift_chain_sample_slice(c, &s, &t, &err);
        if (st == SIFT_OK) {
            ck_assert_int_eq(t, want);
            sift_chain_free(c);
            sift_workspace_free(w);
            ck_assert_int_eq(cw.live_blocks, 0);
            break;
        }
        ck_assert_int_eq(st, SIFT_E_NOMEM);
        snap after;
        take(c, &after);
        after.st = before.st; /* the hook call and need-row counts may move */
        ck_assert(memcmp(&before.rng, &after.rng, sizeof before.rng) == 0);
        ck_assert_uint_eq(before.digest, after.digest);
        /* the workspace is usable after the failure */
        cw.fail_at = -1;
        ck_assert_int_eq(sift_chain_sample_slice(c, &s, &t, NULL), SIFT_OK);
        ck_assert_int_eq(t, want);
        sift_chain_free(c);
        sift_workspace_free(w);
        ck_assert_int_eq(cw.live_blocks, 0);
        ck_assert_msg(nth < 100, "too many allocations");
    }
    ck_assert_int_gt(nth, 8); /* the eight arrays, the row, the id set */
    sift_slicer_free(sl);
    sift_chain_free(ref);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The verifier                                                        */
/* ------------------------------------------------------------------ */

START_TEST(test_the_verifier_uses_the_chain_workspace)
{
    enum { V = 3000, D = 3 };
    tu_rng r = {14};
    float *buf = malloc((size_t)(D + 1) * V * sizeof *buf);
    ck_assert_ptr_nonnull(buf);
    const float *rows[D + 1];
    for (int i = 0; i <= D; i++) {
        tu_row(&r, buf + (size_t)i * V, V, TU_ROW_NORMAL);
        rows[i] = buf + (size_t)i * V;
    }
    int32_t drafts[D] = {1, 2, 3};
    counter cb;
    sift_allocator ab = counting(&cb);
    sift_chain *a = tu_small_chain(15, NULL), *b = tu_small_chain(15, &ab);
    sift_workspace *w = new_ws(V, NULL);
    ck_assert_int_eq(sift_chain_set_workspace(b, w, NULL), SIFT_OK);
    sift_verifier *va, *vb;
    ck_assert_int_eq(sift_verifier_new(&va, a, D, NULL), SIFT_OK);
    ck_assert_int_eq(sift_verifier_new(&vb, b, D, NULL), SIFT_OK);
    size_t before = cb.live_bytes;
    sift_verify_args args;
    sift_verify_args_init(&args);
    args.drafts = drafts;
    args.n_drafts = D;
    args.rows = rows;
    args.n_vocab = V;
    sift_token_prob *oa = malloc((size_t)(D + 1) * V * sizeof *oa);
    sift_token_prob *ob = malloc((size_t)(D + 1) * V * sizeof *ob);
    size_t na[D + 1], nb[D + 1];
    int32_t pa, pb;
    ck_assert_int_eq(sift_verifier_distributions(va, a, &args, oa, V, na, &pa, NULL), SIFT_OK);
    ck_assert_int_eq(sift_verifier_distributions(vb, b, &args, ob, V, nb, &pb, NULL), SIFT_OK);
    ck_assert_int_eq(pa, pb);
    for (int32_t i = 0; i < pa; i++) {
        ck_assert_uint_eq(na[i], nb[i]);
        ck_assert(memcmp(oa + (size_t)i * V, ob + (size_t)i * V, na[i] * sizeof *oa) == 0);
    }
    /* the shadow sampled with the workspace: no scratch on b's allocator */
    ck_assert_uint_lt(cb.live_bytes, before + (size_t)V * 4);
    sift_verify_result ra = {.struct_size = sizeof ra}, rb = {.struct_size = sizeof rb};
    ck_assert_int_eq(sift_chain_verify(a, &args, &ra, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_verify(b, &args, &rb, NULL), SIFT_OK);
    ck_assert(memcmp(&ra, &rb, sizeof ra) == 0);
    ck_assert(same(a, b));
    ck_assert_uint_lt(cb.live_bytes, before + (size_t)V * 4);
    sift_verifier_free(va);
    sift_verifier_free(vb);
    sift_chain_free(a);
    sift_chain_free(b);
    sift_workspace_free(w);
    free(oa);
    free(ob);
    free(buf);
}
END_TEST

/* The logprob call's kept set is scratch too: a chain with a workspace
 * gives the same tokens and logprobs as one with its own scratch, and
 * holds none of it between calls. */
START_TEST(test_logprob_calls_on_a_workspace_match_own_scratch_and_leave_the_chain_idle)
{
    counter cc, cw;
    sift_allocator ac = counting(&cc), aw = counting(&cw);
    float *row = malloc((size_t)BIG_V * sizeof *row);
    ck_assert_ptr_nonnull(row);
    tu_rng r = {91};
    sift_chain *c = server_chain(8, &ac), *own = server_chain(8, NULL);
    size_t built = cc.live_bytes;
    sift_workspace *w = new_ws(0, &aw);
    ck_assert_int_eq(sift_chain_set_workspace(c, w, NULL), SIFT_OK);
    sift_logprob rt[2][5], pt[2][5];
    for (int s = 0; s < 4; s++) {
        tu_row(&r, row, BIG_V, s % 2 ? TU_ROW_NORMAL : TU_ROW_BF16);
        sift_logprobs lp[2];
        int32_t t[2];
        sift_chain *cs[2] = {c, own};
        for (int i = 0; i < 2; i++) {
            memset(&lp[i], 0, sizeof lp[i]);
            lp[i].struct_size = sizeof lp[i];
            lp[i].flags = SIFT_LOGPROBS_RAW | SIFT_LOGPROBS_PROCESSED;
            lp[i].n_top = 5;
            lp[i].raw_top = rt[i];
            lp[i].processed_top = pt[i];
            ck_assert_int_eq(sift_chain_sample_logprobs(cs[i], row, BIG_V, &t[i], &lp[i], NULL),
                             SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(cs[i], t[i], NULL), SIFT_OK);
        }
        ck_assert_int_eq(t[0], t[1]);
        ck_assert_uint_eq(lp[0].n_processed_top, lp[1].n_processed_top);
        ck_assert(memcmp(&lp[0].processed, &lp[1].processed, sizeof lp[0].processed) == 0);
        ck_assert(memcmp(&lp[0].raw, &lp[1].raw, sizeof lp[0].raw) == 0);
        ck_assert(memcmp(pt[0], pt[1], lp[0].n_processed_top * sizeof pt[0][0]) == 0);
        ck_assert(memcmp(rt[0], rt[1], lp[0].n_raw_top * sizeof rt[0][0]) == 0);
        ck_assert_uint_eq(cc.live_bytes, built); /* the kept set is the workspace's */
    }
    ck_assert(same(c, own));
    sift_chain_free(c);
    sift_chain_free(own);
    sift_workspace_free(w);
    ck_assert_uint_eq(cw.live_bytes, 0);
    free(row);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("workspace");
    TCase *tc = tcase_create("exact");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_chains_sharing_a_workspace_match_chains_with_their_own_bitwise);
    suite_add_tcase(s, tc);
    tc = tcase_create("memory");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_an_idle_chain_with_a_workspace_holds_no_scratch);
    tcase_add_test(tc, test_a_workspace_sized_up_front_does_not_allocate_on_the_first_call);
    tcase_add_test(tc, test_a_workspace_too_small_for_the_row_grows_and_changes_no_result);
    tcase_add_test(tc,
                   test_logprob_calls_on_a_workspace_match_own_scratch_and_leave_the_chain_idle);
    suite_add_tcase(s, tc);
    tc = tcase_create("rules");
    tcase_add_test(tc, test_bad_arguments_are_refused_with_nothing_changed);
    tcase_add_test(tc, test_a_freed_workspace_lives_until_its_last_chain_lets_go);
    tcase_add_test(tc, test_a_clone_does_not_inherit_the_workspace);
    tcase_add_test(tc, test_a_second_call_on_a_workspace_in_use_is_refused_and_changes_nothing);
    tcase_add_test(tc, test_failing_the_nth_workspace_allocation_is_clean_for_every_n);
    tcase_add_test(tc, test_the_verifier_uses_the_chain_workspace);
    suite_add_tcase(s, tc);
    return s;
}

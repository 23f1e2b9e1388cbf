/*
 * check_ban.c - the samplers that ban listed token ids (min_tokens,
 * allowed_tokens, no_repeat_ngram, bad_words) and their shared helpers
 * (src/samplers/ban.c).
 *
 * Each sampler is compared bitwise with its naive oracle (tests/oracle)
 * on random chains that mix it with every other sampler, on random and
 * adversarial rows, through the row path (sift_chain_sample) and the
 * slice path (sift_chain_sample_slice at the static, dynamic and a
 * smaller k, with the row hook and without it).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"
#include "../src/samplers/registry.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

START_TEST(test_sort_unique_gives_the_distinct_ids_in_ascending_order)
{
    tu_rng r = {7};
    int32_t v[300], w[300];
    for (int rep = 0; rep < 500; rep++) {
        size_t n = (size_t)tu_range(&r, 0, 300);
        int32_t span = (int32_t)tu_range(&r, 1, 400);
        for (size_t i = 0; i < n; i++)
            v[i] = w[i] = (int32_t)tu_range(&r, 0, span - 1);
        size_t m = sift__ids_sort_unique(v, n);
        if (n)
            qsort(w, n, sizeof *w, cmp_i32);
        size_t k = n ? 1 : 0;
        for (size_t i = 1; i < n; i++)
            if (w[i] != w[k - 1])
                w[k++] = w[i];
        ck_assert_uint_eq(m, k);
        ck_assert(m == 0 || memcmp(v, w, m * sizeof *v) == 0);
    }
}
END_TEST

START_TEST(test_parse_ids_reads_separated_decimal_ids_and_refuses_the_rest)
{
    int32_t out[4];
    ck_assert_uint_eq(sift__parse_ids("15", 2, out, 4), 1);
    ck_assert_int_eq(out[0], 15);
    ck_assert_uint_eq(sift__parse_ids(" 1, 22\t333 ", 11, out, 4), 3);
    ck_assert_int_eq(out[0], 1);
    ck_assert_int_eq(out[1], 22);
    ck_assert_int_eq(out[2], 333);
    ck_assert_uint_eq(sift__parse_ids("2147483647", 10, out, 4), 1);
    ck_assert_int_eq(out[0], INT32_MAX);
    ck_assert_uint_eq(sift__parse_ids("", 0, out, 4), 0);
    ck_assert_uint_eq(sift__parse_ids("  ", 2, NULL, SIZE_MAX), 0);
    ck_assert_uint_eq(sift__parse_ids("2147483648", 10, out, 4), SIZE_MAX);
    ck_assert_uint_eq(sift__parse_ids("-1", 2, out, 4), SIZE_MAX);
    ck_assert_uint_eq(sift__parse_ids("1x", 2, out, 4), SIZE_MAX);
    ck_assert_uint_eq(sift__parse_ids("abc", 3, out, 4), SIZE_MAX);
    ck_assert_uint_eq(sift__parse_ids("1 2 3 4 5", 9, out, 4), SIZE_MAX);
    ck_assert_uint_eq(sift__parse_ids("1 2 3 4 5", 9, NULL, SIZE_MAX), 5);
}
END_TEST

/* A dense row and the same tokens as a shuffled incomplete set: both
 * ban exactly the listed (or the unlisted) ids, and nothing else moves. */
START_TEST(test_ban_ids_and_ban_others_touch_exactly_the_listed_ids_on_rows_and_sets)
{
    tu_rng r = {8};
    enum { V = 64 };
    for (int rep = 0; rep < 300; rep++) {
        int32_t ids[V];
        size_t n = (size_t)tu_range(&r, 0, 20);
        for (size_t i = 0; i < n; i++)
            ids[i] = (int32_t)tu_range(&r, 0, V + 3); /* some beyond the row */
        n = sift__ids_sort_unique(ids, n);
        float row[V];
        tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
        for (int others = 0; others < 2; others++) {
            sift_candidate dense[V], sparse[V];
            for (int32_t i = 0; i < V; i++) {
                dense[i].id = i;
                dense[i].logit = row[i];
            }
            size_t m = 0;
            for (int32_t i = V - 1; i >= 0; i -= 2) /* every other id, reversed */
                sparse[m++] = dense[i];
            sift__arr a = {dense, V, V, SIFT__ORDER_ID, 1};
            sift__arr b = {sparse, m, V, SIFT__ORDER_NONE, 0};
            if (others) {
                sift__ban_others(&a, ids, n);
                sift__ban_others(&b, ids, n);
            } else {
                sift__ban_ids(&a, ids, n);
                sift__ban_ids(&b, ids, n);
            }
            ck_assert_uint_eq(a.n, V);
            ck_assert_uint_eq(b.n, m);
            for (int32_t i = 0; i < V; i++) {
                int listed = sift__ids_has(ids, n, i);
                float want = listed != others ? -INFINITY : row[i];
                ck_assert(memcmp(&dense[i].logit, &want, sizeof want) == 0);
            }
            for (size_t i = 0; i < m; i++) {
                int32_t id = sparse[i].id;
                float want = sift__ids_has(ids, n, id) != others ? -INFINITY : row[id];
                ck_assert(memcmp(&sparse[i].logit, &want, sizeof want) == 0);
            }
        }
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* The property: row path and slice path against the oracle            */
/* ------------------------------------------------------------------ */

static long n_cases(void)
{
    const char *e = getenv("SIFT_BAN_CASES");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : 200;
}

static const sp_kind mids[] = {SP_TOP_K,       SP_TOP_K_TIES, SP_TOP_P,    SP_MIN_P,
                               SP_TYPICAL,     SP_TEMP,       SP_TEMP_EXT, SP_XTC,
                               SP_TOP_N_SIGMA, SP_PENALTIES,  SP_DRY,      SP_LOGIT_BIAS};
static const sp_kind lows[] = {SP_PENALTIES, SP_DRY, SP_LOGIT_BIAS, SP_TEMP};
static const sp_kind cuts[] = {SP_TOP_K, SP_TOP_K, SP_TOP_K_TIES, SP_MIN_P, SP_GREEDY};
static const sp_kind sels[] = {SP_GREEDY, SP_DIST, SP_DIST_ID, SP_MIROSTAT, SP_MIROSTAT_V2};

/* A random chain with `mine` in it once or twice: most chains are shaped
 * for slices (lowering and monotone stages with `mine` among them, then
 * a truncation), the others are anything in any order. */
static void gen_chain(tu_rng *r, sp_chain *spec, int32_t V, sp_kind mine)
{
    if (tu_unif(r) < 0.7) {
        size_t n_low = (size_t)tu_range(r, 0, 2);
        size_t at = (size_t)tu_range(r, 0, n_low);
        for (size_t i = 0; i <= n_low; i++) {
            sp_kind k = i == at ? mine : lows[tu_range(r, 0, (int64_t)N(lows) - 1)];
            gen_stage(r, &spec->st[spec->n++], k, V);
        }
        sp_stage *cut = &spec->st[spec->n++];
        gen_stage(r, cut, cuts[tu_range(r, 0, (int64_t)N(cuts) - 1)], V);
        if (cut->kind == SP_GREEDY)
            return;
        if (cut->kind != SP_MIN_P)
            cut->i0 = (int32_t)tu_range(r, 1, 50);
        size_t n_after = (size_t)tu_range(r, 0, 2);
        for (size_t i = 0; i < n_after; i++) {
            sp_kind k = tu_unif(r) < 0.2 ? mine : mids[tu_range(r, 0, (int64_t)N(mids) - 1)];
            gen_stage(r, &spec->st[spec->n++], k, V);
        }
    } else {
        size_t n_mid = (size_t)tu_range(r, 1, 5);
        size_t at = (size_t)tu_range(r, 0, n_mid - 1);
        for (size_t i = 0; i < n_mid; i++) {
            sp_kind k = i == at ? mine : mids[tu_range(r, 0, (int64_t)N(mids) - 1)];
            gen_stage(r, &spec->st[spec->n++], k, V);
        }
    }
    gen_stage(r, &spec->st[spec->n++], sels[tu_range(r, 0, (int64_t)N(sels) - 1)], V);
}

typedef struct tally {
    long steps, slices, decided, hooked, need_row;
    long exact_steps;   /* slices at the static or dynamic k of EXACT plans */
    long banned;        /* steps where `mine` set a finite logit to -inf */
    long distributions; /* steps whose selector distribution was compared */
} tally;

/* The row hook: copies the step's row. */
typedef struct hook_ctx {
    const float *row;
    int32_t V;
    int calls;
} hook_ctx;

static int hook(void *user, float *row, int32_t V)
{
    hook_ctx *h = user;
    h->calls++;
    if (V != h->V)
        return 1;
    memcpy(row, h->row, (size_t)V * sizeof *row);
    return 0;
}

/* One slice sample at prefix length k, compared with the oracle's token
 * and RNG state; the chain's RNG is restored. Returns 1 if the row was
 * needed (the hook ran, or SIFT_E_NEED_ROW without it). */
static int one_slice(sift_chain *c, sift_slicer *sl, const float *row, int32_t V, int32_t k,
                     int with_hook, sift_status so, int32_t to, const uint64_t ors[4], tally *ty,
                     const char *desc)
{
    int32_t ids[4096];
    size_t ne = 0;
    sift_error err;
    ck_assert_int_eq(sift_chain_extras(c, ids, N(ids), &ne, &err), SIFT_OK);
    sift_slice s;
    ck_assert_int_eq(sift_slicer_build(sl, row, V, k, ids, ne, &s, &err), SIFT_OK);
    hook_ctx h = {row, V, 0};
    ck_assert_int_eq(sift_chain_set_row_hook(c, with_hook ? hook : NULL, &h, NULL), SIFT_OK);
    sift__rng saved = c->rng;
    int32_t ts = -1;
    sift_status ss = sift_chain_sample_slice(c, &s, &ts, &err);
    uint64_t rs[4];
    sift__chain_rng_state(c, rs);
    ty->slices++;
    if (ss == SIFT_E_NEED_ROW) {
        ck_assert_msg(!with_hook, "NEED_ROW with a hook\n  %s", desc);
        ck_assert_msg(memcmp(&saved, &c->rng, sizeof saved) == 0, "NEED_ROW moved the RNG\n  %s",
                      desc);
        ty->need_row++;
        return 1;
    }
    ck_assert_msg(ss == so && (ss != SIFT_OK || ts == to) &&
                      (ss != SIFT_OK || memcmp(rs, ors, 4 * sizeof(uint64_t)) == 0),
                  "slice k=%d V=%d hook=%d: sift %d (tok %d: %s) oracle %d (tok %d)\n  %s", (int)k,
                  (int)V, with_hook, (int)ss, (int)ts, ss ? err.message : "", (int)so, (int)to,
                  desc);
    c->rng = saved;
    ty->hooked += h.calls;
    ty->decided += h.calls == 0;
    return h.calls > 0;
}

/* 1 if the stages up to and including the first `mine` turn a finite
 * logit of this row to -inf that the stages before it left finite. */
static int mine_banned(or_chain *o, const float *row, int32_t V, sp_kind mine)
{
    size_t at = 0;
    while (o->spec.st[at].kind != mine)
        at++;
    or_arr before, after;
    if (or_run_stages(o, row, V, at, &before) != SIFT_OK) {
        free(before.c);
        return 0;
    }
    sift_status s = or_run_stages(o, row, V, at + 1, &after);
    size_t fb = 0, fa = 0;
    for (size_t i = 0; s == SIFT_OK && i < before.n; i++)
        fb += before.c[i].logit > -INFINITY;
    for (size_t i = 0; s == SIFT_OK && i < after.n; i++)
        fa += after.c[i].logit > -INFINITY;
    free(before.c);
    free(after.c);
    return s == SIFT_OK && fa < fb;
}

/* The distribution the selector draws from (sift_chain_distribution on
 * the row) equals the oracle's set after the same stages, bitwise. */
static void compare_distribution(sift_chain *chain, or_chain *o, const float *row, int32_t V,
                                 const char *desc)
{
    sift_token_prob *d = malloc((size_t)V * sizeof *d);
    size_t n = 0;
    sift_status ss = sift_chain_distribution(chain, row, V, d, (size_t)V, &n, NULL);
    or_arr a;
    sift_status so = or_run_stages(o, row, V, o->spec.n - 1, &a);
    if (so == SIFT_OK && !(a.c[0].logit > -INFINITY))
        so = SIFT_E_NO_CANDIDATE;
    ck_assert_msg(ss == so, "distribution status sift %d oracle %d\n  %s", (int)ss, (int)so, desc);
    if (ss == SIFT_OK) {
        ck_assert_msg(n == a.n, "distribution size sift %zu oracle %zu\n  %s", n, a.n, desc);
        uint64_t *w = malloc(a.n * sizeof *w);
        double W = sift__u128_to_double(or_weights(&a, w));
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(
                d[i].id == a.c[i].id && memcmp(&d[i].logit, &a.c[i].logit, sizeof(float)) == 0 &&
                    d[i].p == (double)w[i] / W,
                "distribution entry %zu: sift (%d, %a) oracle (%d, %a)\n  %s", i, (int)d[i].id,
                (double)d[i].logit, (int)a.c[i].id, (double)a.c[i].logit, desc);
        free(w);
    }
    free(a.c);
    free(d);
}

/* Random chains holding `mine`, several steps each on fresh rows: the
 * row path and slices at the static k, the dynamic k, a smaller k and
 * k = V, with and without the hook, all equal to the oracle (status,
 * token, RNG state, and the state left by accept, step after step). */
static void property(sp_kind mine, uint64_t seed, long cases, tally *ty)
{
    tu_rng r = {seed};
    char desc[2048];
    for (long cs = 0; cs < cases; cs++) {
        int32_t V = cs % 50 == 0 ? (int32_t)tu_range(&r, 1, 20000)
                                 : (cs % 7 == 0 ? (int32_t)tu_range(&r, 1, 12)
                                                : (int32_t)tu_range(&r, 50, 1200));
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        gen_chain(&r, &spec, V, mine);
        sift_chain *chain;
        sift_error err;
        sp_describe(&spec, desc, sizeof desc);
        ck_assert_msg(sp_build(&spec, &chain, &err) == SIFT_OK, "build %s: %s", desc, err.message);
        or_chain o;
        or_init(&o, &spec);
        /* a history from a small alphabet, so that n-grams and word
         * prefixes repeat */
        int32_t alpha = V < 8 ? V : 8;
        int n_prompt = (int)tu_range(&r, 0, 24);
        /* the history as a prompt (min_tokens does not count it) or as
         * generated tokens (it does), the oracle told which */
        int as_prompt = (int)tu_range(&r, 0, 1);
        for (int i = 0; i < n_prompt; i++) {
            int32_t t = (int32_t)tu_range(&r, 0, alpha - 1);
            if (as_prompt) {
                ck_assert_int_eq(sift_chain_accept_prompt(chain, t, &err), SIFT_OK);
                or_accept_prompt(&o, t);
            } else {
                ck_assert_int_eq(sift_chain_accept(chain, t, &err), SIFT_OK);
                or_accept(&o, t);
            }
        }
        sift_plan sp = {.struct_size = sizeof(sift_plan)}, dp = {.struct_size = sizeof(sift_plan)};
        ck_assert_int_eq(sift_chain_plan(chain, &sp, NULL, NULL), SIFT_OK);
        sift_slicer *sl;
        ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
        float *row = malloc((size_t)V * sizeof *row);
        int steps = V > 5000 ? 2 : (int)tu_range(&r, 2, 6);
        for (int step = 0; step < steps; step++) {
            tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
            ck_assert_int_eq(sift_chain_next_k(chain, &dp, NULL), SIFT_OK);
            ck_assert_msg(dp.k <= sp.k && (dp.k == 0) == (sp.k == 0),
                          "dynamic k %d vs static %d\n  %s", (int)dp.k, (int)sp.k, desc);
            ty->banned += mine_banned(&o, row, V, mine);
            sp_kind sel = spec.st[spec.n - 1].kind;
            if ((sel == SP_DIST || sel == SP_DIST_ID) && V <= 5000) {
                compare_distribution(chain, &o, row, V, desc);
                ty->distributions++;
            }
            int32_t to = -1;
            sift_status so = or_sample(&o, row, V, &to);
            uint64_t ors[4];
            memcpy(ors, o.rng.s, sizeof ors);
            int32_t ks[4] = {sp.k, dp.k, 0, V};
            ks[2] = (int32_t)tu_range(&r, 1, sp.k > 1 ? sp.k - 1 : 16);
            for (int v = 0; v < 4; v++) {
                int32_t k = ks[v] < V ? ks[v] : V;
                if (k <= 0)
                    continue;
                int row_needed = one_slice(chain, sl, row, V, k, 1, so, to, ors, ty, desc);
                one_slice(chain, sl, row, V, k, 0, so, to, ors, ty, desc);
                if (v == 3)
                    ck_assert_msg(!row_needed, "k = V needed the row\n  %s", desc);
                /* an EXACT plan promises no row for a canonical prefix at
                 * its static and dynamic k (errors come from the row) */
                if (v < 2 && so == SIFT_OK && sp.guarantee == SIFT_GUARANTEE_EXACT) {
                    ty->exact_steps++;
                    ck_assert_msg(!row_needed, "EXACT plan k=%d needed the row\n  %s", (int)k,
                                  desc);
                }
            }
            int32_t ts = -1;
            sift_status ss = sift_chain_sample(chain, row, V, &ts, &err);
            uint64_t rs[4];
            sift__chain_rng_state(chain, rs);
            ty->steps++;
            ck_assert_msg(ss == so && (ss || ts == to) && memcmp(rs, o.rng.s, sizeof rs) == 0,
                          "row path step %d V=%d: sift %d (tok %d: %s) oracle %d (tok %d)\n  %s",
                          step, (int)V, (int)ss, (int)ts, ss ? err.message : "", (int)so, (int)to,
                          desc);
            if (ss != SIFT_OK)
                break;
            int32_t acc = tu_unif(&r) < 0.6 ? ts : (int32_t)tu_range(&r, 0, alpha - 1);
            ck_assert_int_eq(sift_chain_accept(chain, acc, &err), SIFT_OK);
            or_accept(&o, acc);
            if (step == 1) { /* a clone carries the state the accepts left */
                sift_chain *cl = NULL;
                ck_assert_int_eq(sift_chain_clone(chain, &cl, &err), SIFT_OK);
                ck_assert_uint_eq(sift__chain_state_digest(cl), sift__chain_state_digest(chain));
                sift_chain_free(cl);
            }
        }
        free(row);
        sift_slicer_free(sl);
        or_free(&o);
        sift_chain_free(chain);
    }
}

/* Runs the property for `mine` and checks that every part of it ran:
 * steps where the sampler really banned something, slices decided
 * without the row, and rows asked for. */
static void check_property(sp_kind mine, const char *name, uint64_t seed)
{
    tally ty;
    memset(&ty, 0, sizeof ty);
    long cases = n_cases();
    property(mine, seed, cases, &ty);
    fprintf(stderr,
            "ban[%s]: %ld chains, %ld row steps and %ld slice samples compared, 0 mismatches; "
            "%ld steps with a ban, %ld distributions compared; slices decided %ld, hook calls "
            "%ld, need_row %ld; %ld slices at an EXACT plan's k\n",
            name, cases, ty.steps, ty.slices, ty.banned, ty.distributions, ty.decided, ty.hooked,
            ty.need_row, ty.exact_steps);
    ck_assert_int_ge(ty.steps, cases);
    ck_assert(ty.banned > 0);
    ck_assert(ty.distributions > 0);
    ck_assert(ty.decided > 0);
    ck_assert(ty.hooked > 0);
}

/* ------------------------------------------------------------------ */
/* Shared fixtures                                                     */
/* ------------------------------------------------------------------ */

/* Not tu_chain_new: these chains fix n_vocab, the row length the chain
 * checks rows and token ids against. */
static sift_chain *new_chain(int32_t n_vocab)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.n_vocab = n_vocab;
    sift_chain *c = NULL;
    sift_error err;
    ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
    return c;
}

static int32_t greedy_of(sift_chain *c, const float *row, int32_t V)
{
    int32_t t = -1;
    sift_error err;
    ck_assert_msg(sift_chain_sample(c, row, V, &t, &err) == SIFT_OK, "%s", err.message);
    return t;
}

static void accept_ok(sift_chain *c, int32_t t)
{
    sift_error err;
    ck_assert_msg(sift_chain_accept(c, t, &err) == SIFT_OK, "%s", err.message);
}

static sift_config *parse_ok(const char *yaml)
{
    sift_config *cfg = NULL;
    sift_error err;
    sift_status st = sift_config_parse(&cfg, "t.yaml", yaml, strlen(yaml), NULL, &err);
    ck_assert_msg(st == SIFT_OK, "config did not load: %d:%d: %s", (int)err.line, (int)err.column,
                  err.message);
    return cfg;
}

/* The static plan's k and guarantee. */
static void expect_plan(sift_chain *c, int32_t k, sift_guarantee g, int dynamic)
{
    sift_plan p = {.struct_size = sizeof p};
    if (dynamic)
        ck_assert_int_eq(sift_chain_next_k(c, &p, NULL), SIFT_OK);
    else
        ck_assert_int_eq(sift_chain_plan(c, &p, NULL, NULL), SIFT_OK);
    ck_assert_msg(p.k == k && p.guarantee == g, "plan k %d (%s), expected %d; %s", (int)p.k,
                  sift_guarantee_str(p.guarantee), (int)k, p.why);
}

/* ------------------------------------------------------------------ */
/* min_tokens                                                          */
/* ------------------------------------------------------------------ */

START_TEST(test_min_tokens_bans_its_ids_until_n_tokens_were_accepted)
{
    sift_chain *c = new_chain(8);
    sift_error err;
    const int32_t ids[] = {3, 5};
    ck_assert_int_eq(sift_chain_add_min_tokens(c, 2, ids, 2, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    const float row[8] = {0, 1, 2, 9, 3, 8, 4, 5}; /* 3 first, then 5, then 7 */
    ck_assert_int_eq(greedy_of(c, row, 8), 7);
    accept_ok(c, 7);
    ck_assert_int_eq(greedy_of(c, row, 8), 7);
    accept_ok(c, 7);
    ck_assert_int_eq(greedy_of(c, row, 8), 3); /* two tokens out: nothing banned */
    sift_chain_reset(c);
    ck_assert_int_eq(greedy_of(c, row, 8), 7); /* reset: the count starts again */
    sift_chain_free(c);
}
END_TEST

START_TEST(test_min_tokens_minus_one_bans_forever_and_zero_bans_nothing)
{
    const float row[4] = {0, 5, 1, 2};
    const int32_t id = 1;
    sift_error err;
    for (int n = -1; n <= 0; n++) {
        sift_chain *c = new_chain(4);
        ck_assert_int_eq(sift_chain_add_min_tokens(c, n, &id, 1, NULL, &err), SIFT_OK);
        ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
        for (int i = 0; i < 50; i++) {
            ck_assert_int_eq(greedy_of(c, row, 4), n < 0 ? 3 : 1);
            accept_ok(c, 0);
        }
        int64_t k = 9;
        ck_assert_int_eq(sift_chain_stage_class(c, 0, &k),
                         n < 0 ? SIFT_CLASS_LOWERS : SIFT_CLASS_IDENTITY);
        ck_assert_int_eq(k, n < 0 ? 1 : 0);
        sift_chain_free(c);
    }
}
END_TEST

START_TEST(test_min_tokens_bans_the_vocabulary_end_of_generation_ids)
{
    sift_vocab *v = NULL;
    sift_error err;
    const char *pieces[6] = {"a", "b", "</s>", "c", "<eot>", "d"};
    const size_t lens[6] = {1, 1, 4, 1, 5, 1};
    ck_assert_int_eq(sift_vocab_new(&v, 6, pieces, lens, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 2, SIFT_TOKEN_EOG, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 4, SIFT_TOKEN_EOG | SIFT_TOKEN_SPECIAL, &err), SIFT_OK);
    sift_chain *c = new_chain(6);
    const int32_t extra = 5;
    ck_assert_int_eq(sift_chain_add_min_tokens(c, 1, &extra, 1, v, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    sift_vocab_free(v); /* only read during the call */
    int64_t n = 0;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 3); /* 2, 4 and the given 5 */
    const float row[6] = {1, 0, 9, 2, 8, 7};
    ck_assert_int_eq(greedy_of(c, row, 6), 3);
    accept_ok(c, 3);
    ck_assert_int_eq(greedy_of(c, row, 6), 2);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_min_tokens_counts_generated_tokens_only_and_not_prompt_tokens)
{
    sift_chain *c = new_chain(8);
    sift_error err;
    const int32_t id = 3;
    ck_assert_int_eq(sift_chain_add_min_tokens(c, 2, &id, 1, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    const float row[8] = {0, 1, 2, 9, 3, 8, 4, 5};
    /* a prompt longer than n leaves the ban on */
    for (int32_t t = 0; t < 5; t++)
        ck_assert_int_eq(sift_chain_accept_prompt(c, t, &err), SIFT_OK);
    ck_assert_int_eq(greedy_of(c, row, 8), 5);
    expect_plan(c, 2, SIFT_GUARANTEE_EXACT, 1);
    accept_ok(c, 5); /* generated: 1 of 2 */
    ck_assert_int_eq(greedy_of(c, row, 8), 5);
    /* text a runtime inserts between generated tokens does not count */
    ck_assert_int_eq(sift_chain_accept_prompt(c, 0, &err), SIFT_OK);
    ck_assert_int_eq(greedy_of(c, row, 8), 5);
    accept_ok(c, 5); /* generated: 2 of 2 */
    ck_assert_int_eq(greedy_of(c, row, 8), 3);
    expect_plan(c, 1, SIFT_GUARANTEE_EXACT, 1);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_min_tokens_plan_counts_its_ids_until_n_and_nothing_after)
{
    sift_chain *c = new_chain(0);
    sift_error err;
    const int32_t ids[] = {0, 1, 2};
    ck_assert_int_eq(sift_chain_add_min_tokens(c, 1, ids, 3, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 10, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, &err), SIFT_OK);
    expect_plan(c, 13, SIFT_GUARANTEE_EXACT, 0);
    expect_plan(c, 13, SIFT_GUARANTEE_EXACT, 1);
    accept_ok(c, 7);
    expect_plan(c, 13, SIFT_GUARANTEE_EXACT, 0);
    expect_plan(c, 10, SIFT_GUARANTEE_EXACT, 1);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_min_tokens_refuses_bad_arguments_and_adds_nothing)
{
    sift_chain *c = new_chain(0);
    sift_error err;
    const int32_t ids[] = {4, -2};
    ck_assert_int_eq(sift_chain_add_min_tokens(c, -2, ids, 1, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_min_tokens(c, 3, NULL, 1, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_min_tokens(c, 3, ids, 2, NULL, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 1);
    ck_assert_int_eq(sift_chain_add_min_tokens(c, 3, NULL, 0, NULL, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "nothing to ban"));
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    ck_assert_int_eq(sift_chain_add_min_tokens(c, 0, NULL, 0, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_min_tokens(c, 2, ids, 1, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    float row[4] = {0, 1, 2, 3};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, 4, &t, &err), SIFT_E_ARG); /* id 4 >= V */
    sift_chain_free(c);
}
END_TEST

START_TEST(test_min_tokens_yaml_stage_takes_ids_or_the_vocabulary)
{
    sift_error err;
    sift_config *cfg = parse_ok("chain:\n  - min_tokens: {n: 2, ids: [3, 5]}\n  - greedy\n");
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_OK);
    int64_t n = 0;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 2);
    const float row[8] = {0, 1, 2, 9, 3, 8, 4, 5};
    ck_assert_int_eq(greedy_of(c, row, 8), 7);
    sift_chain_free(c);
    sift_config_free(cfg);
    /* the scalar is n; the ids default to the vocabulary's EOG tokens */
    cfg = parse_ok("chain:\n  - min_tokens: 4\n  - greedy\n");
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "no vocabulary"));
    sift_vocab *v = NULL;
    const char *pieces[3] = {"a", "b", "<eos>"};
    const size_t lens[3] = {1, 1, 5};
    ck_assert_int_eq(sift_vocab_new(&v, 3, pieces, lens, NULL, &err), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_attr(v, 2, SIFT_TOKEN_EOG, &err), SIFT_OK);
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, v, &c, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 1);
    sift_chain_free(c);
    sift_vocab_free(v);
    sift_config_free(cfg);
    /* a bad id is a load-time error at the stage */
    sift_config *bad = NULL;
    const char *y = "chain:\n  - min_tokens: {n: 1, ids: [3, x]}\n  - greedy\n";
    ck_assert_int_ne(sift_config_parse(&bad, "t.yaml", y, strlen(y), NULL, &err), SIFT_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "not a token id"));
    sift_config_free(bad);
}
END_TEST

START_TEST(test_min_tokens_agrees_with_the_oracle_on_rows_and_slices)
{
    check_property(SP_MIN_TOKENS, "min_tokens", 101);
}
END_TEST

/* ------------------------------------------------------------------ */
/* allowed_tokens                                                      */
/* ------------------------------------------------------------------ */

START_TEST(test_allowed_tokens_bans_every_other_id)
{
    sift_chain *c = new_chain(6);
    sift_error err;
    const int32_t ids[] = {4, 1, 4};
    ck_assert_int_eq(sift_chain_add_allowed_tokens(c, ids, 3, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    const float row[6] = {9, 1, 8, 7, 2, 6};
    ck_assert_int_eq(greedy_of(c, row, 6), 4);
    const float row2[6] = {9, 3, 8, 7, 2, -INFINITY};
    ck_assert_int_eq(greedy_of(c, row2, 6), 1);
    const float row3[6] = {9, -INFINITY, 8, 7, -INFINITY, 6};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row3, 6, &t, &err), SIFT_E_NO_CANDIDATE);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_allowed_tokens_names_short_lists_as_extras_in_a_certified_plan)
{
    sift_chain *c = new_chain(0);
    sift_error err;
    const int32_t ids[] = {900, 7, 31};
    ck_assert_int_eq(sift_chain_add_allowed_tokens(c, ids, 3, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 2, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, &err), SIFT_OK);
    sift_plan p = {.struct_size = sizeof p};
    ck_assert_int_eq(sift_chain_plan(c, &p, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(p.k, 2 + 64);
    ck_assert_int_eq(p.guarantee, SIFT_GUARANTEE_CERTIFIED);
    ck_assert_int_eq(p.max_extras, 3);
    int32_t got[8];
    size_t n = 0;
    ck_assert_int_eq(sift_chain_extras(c, got, 8, &n, &err), SIFT_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert(got[0] == 7 && got[1] == 31 && got[2] == 900);
    sift_chain_free(c);
    /* a long list is not named */
    int32_t *many = malloc(1025 * sizeof *many);
    for (int32_t i = 0; i < 1025; i++)
        many[i] = 2 * i;
    c = new_chain(0);
    ck_assert_int_eq(sift_chain_add_allowed_tokens(c, many, 1025, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 2, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_plan(c, &p, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(p.max_extras, 0);
    ck_assert_int_eq(sift_chain_extras(c, got, 8, &n, &err), SIFT_OK);
    ck_assert_uint_eq(n, 0);
    free(many);
    sift_chain_free(c);
}
END_TEST

/* The allowed tokens are extras: a slice of one prefix token and the
 * extras decides every step where enough of them are finite, with the
 * oracle's token, and never calls the hook. */
START_TEST(test_a_one_token_slice_decides_when_the_allowed_tokens_are_extras)
{
    tu_rng r = {31};
    enum { V = 5000 };
    long decided = 0;
    float *row = malloc(V * sizeof *row);
    for (int cs = 0; cs < 60; cs++) {
        sp_chain spec;
        memset(&spec, 0, sizeof spec);
        spec.seed = tu_next(&r);
        sp_stage *a = &spec.st[spec.n++];
        a->kind = SP_ALLOWED_TOKENS;
        a->n_ids = (size_t)tu_range(&r, 3, SP_MAX_IDS);
        for (size_t j = 0; j < a->n_ids; j++)
            a->ids[j] = (int32_t)tu_range(&r, 0, V - 1);
        spec.st[spec.n++] = (sp_stage){.kind = SP_TOP_K, .i0 = 3};
        spec.st[spec.n++] = (sp_stage){.kind = SP_TEMP, .f0 = 0.8f};
        spec.st[spec.n++] = (sp_stage){.kind = tu_unif(&r) < 0.5 ? SP_DIST : SP_GREEDY};
        sift_chain *c;
        sift_error err;
        ck_assert_int_eq(sp_build(&spec, &c, &err), SIFT_OK);
        or_chain o;
        or_init(&o, &spec);
        sift_slicer *sl;
        ck_assert_int_eq(sift_slicer_new(&sl, V, NULL, NULL), SIFT_OK);
        for (int step = 0; step < 5; step++) {
            tu_row(&r, row, V, (int)tu_range(&r, 0, TU_ROW__COUNT - 1));
            int32_t to = -1;
            sift_status so = or_sample(&o, row, V, &to);
            int32_t ids[SP_MAX_IDS];
            size_t ne = 0;
            ck_assert_int_eq(sift_chain_extras(c, ids, SP_MAX_IDS, &ne, &err), SIFT_OK);
            sift_slice s;
            ck_assert_int_eq(sift_slicer_build(sl, row, V, 1, ids, ne, &s, &err), SIFT_OK);
            hook_ctx h = {row, V, 0};
            ck_assert_int_eq(sift_chain_set_row_hook(c, hook, &h, NULL), SIFT_OK);
            int32_t ts = -1;
            sift_status ss = sift_chain_sample_slice(c, &s, &ts, &err);
            ck_assert_int_eq(ss, so);
            if (so != SIFT_OK)
                break;
            ck_assert_int_eq(ts, to);
            ck_assert_int_eq(h.calls, 0);
            uint64_t rs[4];
            sift__chain_rng_state(c, rs);
            ck_assert(memcmp(rs, o.rng.s, sizeof rs) == 0);
            decided++;
            accept_ok(c, ts);
            or_accept(&o, ts);
        }
        sift_slicer_free(sl);
        or_free(&o);
        sift_chain_free(c);
    }
    free(row);
    ck_assert_int_gt(decided, 100);
}
END_TEST

START_TEST(test_allowed_tokens_refuses_an_empty_list_and_bad_ids)
{
    sift_chain *c = new_chain(0);
    sift_error err;
    const int32_t ids[] = {3, -1};
    ck_assert_int_eq(sift_chain_add_allowed_tokens(c, ids, 0, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "empty"));
    ck_assert_int_eq(sift_chain_add_allowed_tokens(c, NULL, 2, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_allowed_tokens(c, ids, 2, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 1);
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    ck_assert_int_eq(sift_chain_add_allowed_tokens(c, ids, 1, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    const float row[3] = {0, 1, 2};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, 3, &t, &err), SIFT_E_ARG); /* id 3 >= V */
    sift_chain_free(c);
}
END_TEST

START_TEST(test_allowed_tokens_yaml_stage_takes_a_list_of_ids)
{
    sift_error err;
    sift_config *cfg = parse_ok("chain:\n  - allowed_tokens: {ids: [2, 5]}\n  - greedy\n");
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_OK);
    const float row[8] = {0, 1, 2, 9, 3, 8, 4, 5};
    ck_assert_int_eq(greedy_of(c, row, 8), 5);
    sift_chain_free(c);
    sift_config_free(cfg);
    const char *bad[] = {"chain:\n  - allowed_tokens: {ids: []}\n  - greedy\n",
                         "chain:\n  - allowed_tokens: {ids: [1, 2x]}\n  - greedy\n",
                         "vocab_size: 10\nchain:\n  - allowed_tokens: {ids: [10]}\n  - greedy\n",
                         "chain:\n  - allowed_tokens: {}\n  - greedy\n"};
    for (size_t i = 0; i < N(bad); i++) {
        sift_config *b = NULL;
        ck_assert_msg(sift_config_parse(&b, "t.yaml", bad[i], strlen(bad[i]), NULL, &err) !=
                          SIFT_OK,
                      "%s", bad[i]);
        sift_config_free(b);
    }
}
END_TEST

START_TEST(test_allowed_tokens_agrees_with_the_oracle_on_rows_and_slices)
{
    check_property(SP_ALLOWED_TOKENS, "allowed_tokens", 102);
}
END_TEST

/* ------------------------------------------------------------------ */
/* no_repeat_ngram                                                     */
/* ------------------------------------------------------------------ */

static sift_chain *ngram_chain(int32_t n, int32_t last_n, const int32_t *hist, size_t n_hist)
{
    sift_chain *c = new_chain(8);
    sift_error err;
    ck_assert_int_eq(sift_chain_add_no_repeat_ngram(c, n, last_n, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    for (size_t i = 0; i < n_hist; i++)
        accept_ok(c, hist[i]);
    return c;
}

START_TEST(test_no_repeat_ngram_bans_the_token_that_would_repeat_an_ngram)
{
    const float row[8] = {0, 1, 9, 8, 7, 6, 5, 4}; /* 2, then 3, then 4 */
    const int32_t h1[] = {1, 2, 3, 1};             /* bigram (1, 2) seen: 2 banned */
    sift_chain *c = ngram_chain(2, 16, h1, N(h1));
    ck_assert_int_eq(greedy_of(c, row, 8), 3);
    sift_chain_free(c);
    const int32_t h2[] = {1, 2, 3, 1, 2}; /* trigram (1, 2, 3) seen: 3 banned */
    c = ngram_chain(3, 16, h2, N(h2));
    ck_assert_int_eq(greedy_of(c, row, 8), 2);
    sift_chain_free(c);
    const int32_t h3[] = {2, 3, 2, 4, 2}; /* after 2 came 3 and 4 */
    c = ngram_chain(2, 16, h3, N(h3));
    const float row3[8] = {0, 1, 2, 9, 8, 7, 6, 5}; /* 3, then 4, then 5 */
    ck_assert_int_eq(greedy_of(c, row3, 8), 5);
    sift_chain_free(c);
    const int32_t h4[] = {2, 3, 0, 0, 2}; /* window of 3 (0, 0, 2): the (2, 3) left it */
    c = ngram_chain(2, 3, h4, N(h4));
    ck_assert_int_eq(greedy_of(c, row, 8), 2);
    sift_chain_reset(c); /* an empty window bans nothing */
    ck_assert_int_eq(greedy_of(c, row, 8), 2);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_no_repeat_ngram_of_one_bans_every_token_of_the_window)
{
    const float row[8] = {0, 1, 9, 8, 7, 6, 5, 4};
    const int32_t h[] = {2, 3, 4, 2, 3};
    sift_chain *c = ngram_chain(1, 3, h, N(h)); /* window (4, 2, 3) */
    ck_assert_int_eq(greedy_of(c, row, 8), 5);
    sift_chain_free(c);
    const int32_t same[] = {2, 2, 2, 2, 2, 2}; /* one repeated token, n = 3 */
    c = ngram_chain(3, 6, same, N(same));
    ck_assert_int_eq(greedy_of(c, row, 8), 3);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_no_repeat_ngram_plan_counts_the_window_and_dynamically_the_banned_set)
{
    sift_chain *c = new_chain(0);
    sift_error err;
    ck_assert_int_eq(sift_chain_add_no_repeat_ngram(c, 2, 10, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 5, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, &err), SIFT_OK);
    expect_plan(c, 5 + 9, SIFT_GUARANTEE_EXACT, 0);
    expect_plan(c, 5, SIFT_GUARANTEE_EXACT, 1);
    accept_ok(c, 1);
    accept_ok(c, 2);
    accept_ok(c, 1);
    expect_plan(c, 6, SIFT_GUARANTEE_EXACT, 1); /* 2 is banned */
    accept_ok(c, 3);
    expect_plan(c, 5, SIFT_GUARANTEE_EXACT, 1); /* 3 never came before */
    expect_plan(c, 5 + 9, SIFT_GUARANTEE_EXACT, 0);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_no_repeat_ngram_refuses_bad_sizes_and_adds_nothing)
{
    sift_chain *c = new_chain(0);
    sift_error err;
    ck_assert_int_eq(sift_chain_add_no_repeat_ngram(c, -1, 10, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_no_repeat_ngram(c, 2, -1, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_no_repeat_ngram(c, 11, 10, &err), SIFT_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "no n-gram would fit"));
    ck_assert_int_eq(sift_chain_add_no_repeat_ngram(c, 2, (1 << 20) + 1, &err), SIFT_E_LIMIT);
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    ck_assert_int_eq(sift_chain_add_no_repeat_ngram(c, 0, 10, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_no_repeat_ngram(c, 5, 0, &err), SIFT_OK);
    int64_t n = 7;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_IDENTITY);
    ck_assert_int_eq(sift_chain_stage_class(c, 1, &n), SIFT_CLASS_IDENTITY);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_no_repeat_ngram_yaml_stage_takes_n_and_a_window)
{
    sift_error err;
    sift_config *cfg = parse_ok("chain:\n  - no_repeat_ngram: 2\n  - greedy\n");
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_OK);
    int64_t n = 0;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 4096 - 2 + 1);
    sift_chain_free(c);
    sift_config_free(cfg);
    cfg = parse_ok("n_ctx: 100\nchain:\n  - no_repeat_ngram: {n: 3, last_n: -1}\n  - greedy\n");
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 98);
    sift_chain_free(c);
    sift_config_free(cfg);
    sift_config *bad = NULL;
    const char *y = "chain:\n  - no_repeat_ngram: {n: 3, last_n: 2}\n  - greedy\n";
    ck_assert_int_ne(sift_config_parse(&bad, "t.yaml", y, strlen(y), NULL, &err), SIFT_OK);
    ck_assert_ptr_nonnull(strstr(err.message, "longer than the window"));
    sift_config_free(bad);
}
END_TEST

START_TEST(test_no_repeat_ngram_agrees_with_the_oracle_on_rows_and_slices)
{
    check_property(SP_NO_REPEAT_NGRAM, "no_repeat_ngram", 103);
}
END_TEST

/* ------------------------------------------------------------------ */
/* bad_words                                                           */
/* ------------------------------------------------------------------ */

static const int32_t bw_a[] = {1, 2, 3}, bw_b[] = {6}, bw_c[] = {2, 4};
static const int32_t *const bw_seqs[] = {bw_a, bw_b, bw_c};
static const size_t bw_lens[] = {3, 1, 2};

START_TEST(test_bad_words_bans_a_last_token_after_the_rest_of_its_sequence)
{
    sift_chain *c = new_chain(8);
    sift_error err;
    ck_assert_int_eq(sift_chain_add_bad_words(c, bw_seqs, bw_lens, 3, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    const float row[8] = {0, 1, 2, 9, 8, 5, 10, 4}; /* 6, then 3, then 4, then 5 */
    ck_assert_int_eq(greedy_of(c, row, 8), 3);      /* 6 is a one-token word */
    accept_ok(c, 1);
    ck_assert_int_eq(greedy_of(c, row, 8), 3);
    accept_ok(c, 2); /* (1, 2) ends the history: 3 banned; (2) too: 4 banned */
    ck_assert_int_eq(greedy_of(c, row, 8), 5);
    accept_ok(c, 5);
    ck_assert_int_eq(greedy_of(c, row, 8), 3);
    accept_ok(c, 2); /* (2) alone: 4 banned, not 3 */
    ck_assert_int_eq(greedy_of(c, row, 8), 3);
    const float row2[8] = {0, 1, 2, 3, 9, 5, 10, 4};
    ck_assert_int_eq(greedy_of(c, row2, 8), 5);
    sift_chain_reset(c); /* the history is gone, the one-token word stays */
    ck_assert_int_eq(greedy_of(c, row2, 8), 4);
    sift_chain_free(c);
}
END_TEST

START_TEST(test_bad_words_plan_counts_distinct_last_tokens_and_dynamically_the_banned_set)
{
    sift_chain *c = new_chain(0);
    sift_error err;
    const int32_t d[] = {9, 3}; /* a fourth word ending like the first */
    const int32_t *const seqs[] = {bw_a, bw_b, bw_c, d};
    const size_t lens[] = {3, 1, 2, 2};
    ck_assert_int_eq(sift_chain_add_bad_words(c, seqs, lens, 4, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_top_k(c, 5, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, &err), SIFT_OK);
    expect_plan(c, 5 + 3, SIFT_GUARANTEE_EXACT, 0); /* last tokens 3, 6, 4 */
    expect_plan(c, 5 + 1, SIFT_GUARANTEE_EXACT, 1); /* only 6 now */
    accept_ok(c, 1);
    accept_ok(c, 2);
    expect_plan(c, 5 + 3, SIFT_GUARANTEE_EXACT, 1); /* 6, 3 and 4 */
    accept_ok(c, 9);
    expect_plan(c, 5 + 2, SIFT_GUARANTEE_EXACT, 1); /* 6 and 3 (after 9) */
    sift_chain_free(c);
}
END_TEST

START_TEST(test_bad_words_refuses_empty_and_negative_sequences_and_adds_nothing)
{
    sift_chain *c = new_chain(0);
    sift_error err;
    const int32_t neg[] = {1, -4};
    const int32_t *const seqs[] = {bw_a, neg};
    const size_t lens[] = {3, 2}, lens0[] = {3, 0};
    ck_assert_int_eq(sift_chain_add_bad_words(c, NULL, lens, 2, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_bad_words(c, seqs, NULL, 2, &err), SIFT_E_ARG);
    ck_assert_int_eq(sift_chain_add_bad_words(c, seqs, lens0, 2, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 1);
    ck_assert_int_eq(sift_chain_add_bad_words(c, seqs, lens, 2, &err), SIFT_E_ARG);
    ck_assert_int_eq(err.index, 1);
    ck_assert_uint_eq(sift_chain_n_stages(c), 0);
    ck_assert_int_eq(sift_chain_add_bad_words(c, NULL, NULL, 0, &err), SIFT_OK);
    int64_t n = 5;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_IDENTITY);
    ck_assert_int_eq(sift_chain_add_bad_words(c, seqs, lens, 1, &err), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
    const float row[3] = {0, 1, 2};
    int32_t t;
    ck_assert_int_eq(sift_chain_sample(c, row, 3, &t, &err), SIFT_E_ARG); /* id 3 >= V */
    sift_chain_free(c);
}
END_TEST

START_TEST(test_bad_words_yaml_stage_takes_sequences_of_ids)
{
    sift_error err;
    sift_config *cfg =
        parse_ok("chain:\n  - bad_words: {sequences: [1 2 3, \"6\", \"2,4\"]}\n  - greedy\n");
    sift_chain *c = NULL;
    ck_assert_int_eq(sift_config_build_chain(cfg, NULL, NULL, &c, &err), SIFT_OK);
    int64_t n = 0;
    ck_assert_int_eq(sift_chain_stage_class(c, 0, &n), SIFT_CLASS_LOWERS);
    ck_assert_int_eq(n, 3);
    const float row[8] = {0, 1, 2, 9, 8, 5, 10, 4};
    accept_ok(c, 1);
    accept_ok(c, 2);
    ck_assert_int_eq(greedy_of(c, row, 8), 5);
    sift_chain_free(c);
    sift_config_free(cfg);
    const char *bad[] = {"chain:\n  - bad_words: {sequences: [\"1 -2\"]}\n  - greedy\n",
                         "chain:\n  - bad_words: {sequences: [\" \"]}\n  - greedy\n",
                         "vocab_size: 5\nchain:\n  - bad_words: {sequences: [1 5]}\n  - greedy\n",
                         "chain:\n  - bad_words: {}\n  - greedy\n"};
    for (size_t i = 0; i < N(bad); i++) {
        sift_config *b = NULL;
        ck_assert_msg(sift_config_parse(&b, "t.yaml", bad[i], strlen(bad[i]), NULL, &err) !=
                          SIFT_OK,
                      "%s", bad[i]);
        sift_config_free(b);
    }
}
END_TEST

START_TEST(test_bad_words_agrees_with_the_oracle_on_rows_and_slices)
{
    check_property(SP_BAD_WORDS, "bad_words", 104);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Out of memory                                                       */
/* ------------------------------------------------------------------ */

/* An allocator that fails its call number `fail_at` (0 = never). */
typedef struct failing {
    long calls, fail_at;
} failing;

static void *failing_alloc(void *user, size_t size)
{
    failing *f = user;
    if (++f->calls == f->fail_at)
        return NULL;
    return malloc(size);
}

static void failing_free(void *user, void *p)
{
    (void)user;
    free(p);
}

/* Adds stage `which` (0 min_tokens, 1 allowed_tokens, 2 no_repeat_ngram,
 * 3 bad_words). */
static sift_status add_which(sift_chain *c, int which, sift_error *err)
{
    const int32_t ids[] = {3, 1, 2};
    switch (which) {
    case 0: return sift_chain_add_min_tokens(c, 4, ids, 3, NULL, err);
    case 1: return sift_chain_add_allowed_tokens(c, ids, 3, err);
    case 2: return sift_chain_add_no_repeat_ngram(c, 2, 64, err);
    default: return sift_chain_add_bad_words(c, bw_seqs, bw_lens, 3, err);
    }
}

/* Failing the Nth allocation of each constructor gives SIFT_E_NOMEM and
 * leaves the chain as it was: it still samples with its other stages,
 * and the next try adds the stage. */
START_TEST(test_out_of_memory_while_adding_leaves_the_chain_unchanged)
{
    for (int which = 0; which < 4; which++) {
        long failed = 0;
        for (long at = 1;; at++) {
            failing f = {0, 0};
            sift_allocator al = {sizeof al, failing_alloc, failing_free, &f, NULL};
            sift_chain_params p;
            sift_chain_params_init(&p);
            p.allocator = &al;
            sift_chain *c = NULL;
            sift_error err;
            ck_assert_int_eq(sift_chain_new(&c, &p, &err), SIFT_OK);
            f.fail_at = f.calls + at;
            sift_status s = add_which(c, which, &err);
            f.fail_at = 0;
            if (s == SIFT_OK) {
                sift_chain_free(c);
                break;
            }
            ck_assert_int_eq(s, SIFT_E_NOMEM);
            ck_assert_uint_eq(sift_chain_n_stages(c), 0);
            ck_assert_int_eq(add_which(c, which, &err), SIFT_OK);
            ck_assert_int_eq(sift_chain_add_greedy(c, &err), SIFT_OK);
            const float row[8] = {0, 1, 2, 9, 8, 5, 10, 4};
            int32_t t;
            ck_assert_int_eq(sift_chain_sample(c, row, 8, &t, &err), SIFT_OK);
            sift_chain_free(c);
            failed++;
        }
        ck_assert_int_gt(failed, 0);
    }
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("ban");
    TCase *tc = tcase_create("helpers");
    tcase_add_test(tc, test_sort_unique_gives_the_distinct_ids_in_ascending_order);
    tcase_add_test(tc, test_parse_ids_reads_separated_decimal_ids_and_refuses_the_rest);
    tcase_add_test(tc, test_ban_ids_and_ban_others_touch_exactly_the_listed_ids_on_rows_and_sets);
    suite_add_tcase(s, tc);
    tc = tcase_create("min_tokens");
    tcase_add_test(tc, test_min_tokens_bans_its_ids_until_n_tokens_were_accepted);
    tcase_add_test(tc, test_min_tokens_minus_one_bans_forever_and_zero_bans_nothing);
    tcase_add_test(tc, test_min_tokens_bans_the_vocabulary_end_of_generation_ids);
    tcase_add_test(tc, test_min_tokens_counts_generated_tokens_only_and_not_prompt_tokens);
    tcase_add_test(tc, test_min_tokens_plan_counts_its_ids_until_n_and_nothing_after);
    tcase_add_test(tc, test_min_tokens_refuses_bad_arguments_and_adds_nothing);
    tcase_add_test(tc, test_min_tokens_yaml_stage_takes_ids_or_the_vocabulary);
    tcase_add_test(tc, test_min_tokens_agrees_with_the_oracle_on_rows_and_slices);
    suite_add_tcase(s, tc);
    tc = tcase_create("allowed_tokens");
    tcase_add_test(tc, test_allowed_tokens_bans_every_other_id);
    tcase_add_test(tc, test_allowed_tokens_names_short_lists_as_extras_in_a_certified_plan);
    tcase_add_test(tc, test_a_one_token_slice_decides_when_the_allowed_tokens_are_extras);
    tcase_add_test(tc, test_allowed_tokens_refuses_an_empty_list_and_bad_ids);
    tcase_add_test(tc, test_allowed_tokens_yaml_stage_takes_a_list_of_ids);
    tcase_add_test(tc, test_allowed_tokens_agrees_with_the_oracle_on_rows_and_slices);
    suite_add_tcase(s, tc);
    tc = tcase_create("no_repeat_ngram");
    tcase_add_test(tc, test_no_repeat_ngram_bans_the_token_that_would_repeat_an_ngram);
    tcase_add_test(tc, test_no_repeat_ngram_of_one_bans_every_token_of_the_window);
    tcase_add_test(tc, test_no_repeat_ngram_plan_counts_the_window_and_dynamically_the_banned_set);
    tcase_add_test(tc, test_no_repeat_ngram_refuses_bad_sizes_and_adds_nothing);
    tcase_add_test(tc, test_no_repeat_ngram_yaml_stage_takes_n_and_a_window);
    tcase_add_test(tc, test_no_repeat_ngram_agrees_with_the_oracle_on_rows_and_slices);
    suite_add_tcase(s, tc);
    tc = tcase_create("bad_words");
    tcase_add_test(tc, test_bad_words_bans_a_last_token_after_the_rest_of_its_sequence);
    tcase_add_test(tc,
                   test_bad_words_plan_counts_distinct_last_tokens_and_dynamically_the_banned_set);
    tcase_add_test(tc, test_bad_words_refuses_empty_and_negative_sequences_and_adds_nothing);
    tcase_add_test(tc, test_bad_words_yaml_stage_takes_sequences_of_ids);
    tcase_add_test(tc, test_bad_words_agrees_with_the_oracle_on_rows_and_slices);
    suite_add_tcase(s, tc);
    tc = tcase_create("nomem");
    tcase_add_test(tc, test_out_of_memory_while_adding_leaves_the_chain_unchanged);
    suite_add_tcase(s, tc);
    return s;
}

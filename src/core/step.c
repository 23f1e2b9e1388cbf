/*
 * step.c - the row step: sample, accept and distribution over a whole
 * row (with the prefix fast path), and check mode.
 *
 * Invariants:
 * - sample() works on a copy of the RNG and on scratch buffers; it
 *   commits the RNG only when it returns SIFT_OK, so a failed sample
 *   changes nothing. Only accept() changes stage state.
 * - No step allocates once the scratch space is sized for V.
 */
#include <math.h>

#include "../sift_internal.h"
#include "kernels.h"
#include "simd.h"
#include "step.h"

/* Stages (a grammar) and checkers that decide per token of their own
 * vocabulary: one of another size than the row is refused before any
 * stage runs, on every path (else the outcome would depend on which token
 * is drawn). */
sift_status sift__chain_check_vocab(const sift_chain *c, int32_t V, sift_error *err)
{
    int32_t cv = c->check_ops && c->check_ops->n_vocab ? c->check_ops->n_vocab(c->check) : 0;
    if (cv && cv != V)
        return sift__fail(err, SIFT_E_ARG, "the %s's vocabulary has %d tokens, the row has %d",
                          c->check_ops->name, (int)cv, (int)V);
    for (size_t i = 0; i < c->n_stages; i++) {
        const sift__stage *st = c->stages[i];
        int32_t sv = st->ops->n_vocab ? st->ops->n_vocab(st) : 0;
        if (sv && sv != V)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "stage %zu (%s) has a vocabulary of %d tokens, the row has %d", i,
                                 sift__stage_name(st), (int)sv, (int)V);
    }
    return SIFT_OK;
}

/* Everything sample and distribution check before touching the row
 * (the buffers are sized by the caller). */
sift_status sift__step_check(sift_chain *c, int32_t V, int need_selector, sift_error *err)
{
    if (V < 1)
        return sift__fail(err, SIFT_E_ARG, "row length must be >= 1, got %d", (int)V);
    if (V > c->max_vocab)
        return sift__fail(err, SIFT_E_LIMIT, "V = %d exceeds max_vocab %d", (int)V,
                          (int)c->max_vocab);
    if (c->n_vocab && V != c->n_vocab)
        return sift__fail(err, SIFT_E_ARG, "row has %d entries, chain expects %d", (int)V,
                          (int)c->n_vocab);
    sift_status s = sift__chain_check_vocab(c, V, err);
    if (s)
        return s;
    /* A selector before the last stage is named first, whether or not
     * the last stage is one: it is the stage to move. */
    for (size_t i = 0; i + 1 < c->n_stages; i++)
        if (c->stages[i]->ops->is_selector)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "stage %zu (%s) is a selector but not the last stage", i,
                                 sift__stage_name(c->stages[i]));
    if (c->n_stages == 0 || !c->stages[c->n_stages - 1]->ops->is_selector) {
        if (need_selector || c->n_stages == 0)
            return sift__fail(err, SIFT_E_ARG,
                              "chain must end with exactly one selector (greedy, dist, "
                              "dist_id_order, mirostat, mirostat_v2, adaptive_p)%s",
                              c->n_stages ? "" : "; it has no stages");
    }
    for (size_t i = 0; i < c->n_stages; i++) {
        const sift__stage *st = c->stages[i];
        if (st->ops->max_token) {
            int32_t mt = st->ops->max_token(st);
            if (mt >= V)
                return sift__fail_at(err, SIFT_E_ARG, mt,
                                     "stage %zu (%s) refers to token %d, outside the row's "
                                     "vocabulary [0, %d)",
                                     i, sift__stage_name(st), (int)mt, (int)V);
        }
    }
    return SIFT_OK;
}

/* Copies and validates the row into the working array. */
static sift_status load_row(sift_chain *c, const float *logits, int32_t V, sift__arr *a,
                            sift_error *err)
{
    sift_candidate *cd = c->ws.cand;
    /* One pass that both copies and looks for bad values
     * (core/kernels.c: vector forms with a scalar twin, the same bytes
     * and flags). */
    int bad = 0, any = 0;
    sift__load_cand(logits, cd, (size_t)V, &bad, &any);
    if (bad || !any)
        return sift__row_error(logits, V, err);
    a->c = cd;
    a->n = (size_t)V;
    a->V = V;
    a->order = SIFT__ORDER_ID;
    a->dense = 1;
    return SIFT_OK;
}

sift_status sift__no_candidate(sift__ctx *ctx, const char *stage_name)
{
    return sift__fail_at(ctx->err, SIFT_E_NO_CANDIDATE, (int64_t)ctx->stage,
                         "no candidate left at stage %zu (%s): every logit is -inf", ctx->stage,
                         stage_name);
}

/* SIFT_E_NO_CANDIDATE naming the stage after which every candidate was
 * -inf (ctx->banned_at), for a later stage that found none left. */
sift_status sift__no_candidate_left(const sift_chain *c, const sift__ctx *ctx)
{
    size_t j = ctx->banned_at;
    return sift__fail_at(ctx->err, SIFT_E_NO_CANDIDATE, (int64_t)j,
                         "no candidate left: stage %zu (%s) removed the last candidate (every "
                         "logit is -inf after it)",
                         j, sift__stage_name(c->stages[j]));
}

void sift__ctx_init(sift_chain *c, sift__ctx *ctx, int32_t V, sift_error *err)
{
    ctx->rng = c->rng;
    ctx->ws = &c->ws;
    ctx->err = err;
    ctx->V = V;
    ctx->stage = 0;
    ctx->selected = -1;
    ctx->banned_at = SIZE_MAX;
    ctx->mass_path = SIFT__MASS_DEFAULT;
    ctx->band_answered = 0;
    ctx->band_handed_over = 0;
    ctx->carry_armed = 0;
    ctx->carry_next = 0;
    ctx->carry_used = 0;
    ctx->carry_bad = c->carry_verify ? &c->n_carry_bad : NULL;
    sift__carry_clear(ctx);
    ctx->absent_lo = sift__u128_from(0);
    ctx->tns_exact = 0;
    ctx->tail_want = ctx->tail_ok = 0;
    ctx->tail_S = ctx->tail_lower = 0.0;
    ctx->arr_top = 0;
    ctx->arr_top_off = c->arr_top_off;
    ctx->arr_skip = &c->arr_skip;
    ctx->arr_fails = &c->arr_fails;
    ctx->arr_whole = 0;
    ctx->fdraw_tries = ctx->fdraw_done = 0;
    ctx->fdraw_off = c->fdraw_off;
    ctx->fstage = SIZE_MAX;
    ctx->fc = NULL;
    ctx->fcarry_used = 0;
    ctx->fx_skip = &c->fx_skip;
    ctx->fx_fails = &c->fx_fails;
}

int sift__carry_check(sift__ctx *ctx, const sift__arr *a, float m, sift__u128 W)
{
    sift__u128 W2 = sift__weights(a->c, a->n, m, ctx->ws->u64b);
    return W2.lo == W.lo && W2.hi == W.hi &&
           memcmp(ctx->ws->u64a, ctx->ws->u64b, a->n * sizeof *ctx->ws->u64a) == 0;
}

int sift__carry_next(const sift_chain *c, size_t i, size_t end)
{
    return i + 1 < end && c->stages[i + 1]->ops->takes_carry;
}

static sift_status load_row(sift_chain *c, const float *logits, int32_t V, sift__arr *a,
                            sift_error *err);

/* The stage loop of every row step: applies stages [from, end) to `a` in
 * order (from = 1 when the first stage's apply_row built `a`). Returns
 * SIFT_OK with *at = end, or the first failure with *at = the stage that
 * failed; *emptied = 1 when that stage left no candidate at all
 * (SIFT_E_NO_CANDIDATE naming it). */
static sift_status apply_stages(sift_chain *c, sift__ctx *ctx, sift__arr *a, size_t from,
                                size_t end, size_t *at, int *emptied)
{
    sift_status s = SIFT_OK;
    size_t i = from;
    *emptied = 0;
    /* The stages run back to back on `a`: a stage may leave its weights
     * to the next one (sift__carry_leave). Nothing between two applies
     * here touches the array or ws->u64a. */
    sift__carry_clear(ctx);
    for (; i < end; i++) {
        sift__stage *st = c->stages[i];
        ctx->stage = i;
        ctx->carry_armed = 1;
        ctx->carry_next = sift__carry_next(c, i, end);
        s = st->ops->apply(st, ctx, a);
        ctx->carry_armed = 0;
        if (s != SIFT_OK)
            break;
        if (a->n == 0) {
            *emptied = 1;
            s = sift__fail_at(ctx->err, SIFT_E_NO_CANDIDATE, (int64_t)i,
                              "stage %zu (%s) removed the last candidate", i, sift__stage_name(st));
            break;
        }
    }
    *at = i;
    return s;
}

sift_status sift__chain_run_stages(sift_chain *c, const float *row, int32_t V, size_t end,
                                   sift__arr *a, sift_error *err)
{
    sift_status s = load_row(c, row, V, a, err);
    if (s)
        return s;
    sift__ctx ctx;
    sift__ctx_init(c, &ctx, V, err);
    size_t at;
    int emptied;
    return apply_stages(c, &ctx, a, 0, end, &at, &emptied);
}

/* Applies stages [0, end) to the row `logits` loaded into `a`.
 *
 * A stage that finds every candidate at -inf reports SIFT_E_NO_CANDIDATE
 * under its own name, but the stage to name is the one that set the last
 * finite logit to -inf. Checking after every stage would cost a scan of
 * the row per stage, so only a failing step finds it: the stages run
 * again from the row and the same RNG state (apply changes no stage
 * state; a custom stage's apply is called again) and the last run
 * of stages that leave nothing finite is found (a custom stage may
 * raise a -inf logit again). The same holds when the stages before a
 * distribution's selector leave nothing finite (SIFT_OK with every
 * candidate at -inf; ctx->banned_at is then set). */
static sift_status run_stages(sift_chain *c, sift__ctx *ctx, sift__arr *a, size_t from, size_t end,
                              const float *logits)
{
    sift__ctx start = *ctx;
    size_t i;
    int emptied;
    ctx->arr_whole = 1; /* every caller loaded the whole row */
    sift_status s = apply_stages(c, ctx, a, from, end, &i, &emptied);
    ctx->arr_whole = 0;
    if (emptied)
        return s;
    int selected = end > 0 && c->stages[end - 1]->ops->is_selector;
    if (s == SIFT_OK && (selected || !sift__all_banned(a->c, a->n)))
        return SIFT_OK;
    if (s != SIFT_OK && (s != SIFT_E_NO_CANDIDATE || i == 0))
        return s;
    /* A custom stage notes it when it leaves nothing finite (core/custom.c),
     * and no built-in stage makes a -inf logit finite again, so its note
     * stands; built-in stages are found by running the stages again. */
    if (ctx->banned_at < i)
        return sift__no_candidate_left(c, ctx);
    /* Find the stage that banned the last candidate. */
    sift__ctx re = start;
    re.err = NULL;
    ctx->banned_at = SIZE_MAX;
    sift__arr b = *a;
    if (load_row(c, logits, a->V, &b, NULL) == SIFT_OK) {
        for (size_t j = 0; j < i; j++) {
            re.stage = j;
            if (c->stages[j]->ops->apply(c->stages[j], &re, &b) != SIFT_OK || b.n == 0)
                break;
            sift__note_banned(ctx, j, &b);
        }
    }
    *a = b; /* the same buffer; the set as far as the stages ran again */
    if (ctx->banned_at == SIZE_MAX)
        return s;
    return sift__no_candidate_left(c, ctx);
}

/* Appends to the prefix in `a` the extras this step asks for, with their
 * row logits, in canonical order (they all rank after the prefix). */
/* Returns 0 when the list did not fit (the step then takes the full
 * pass: a walk without every extra could certify a wrong token); the
 * workspace is sized so that it does (ws_need). */
static int add_row_extras(sift_chain *c, sift__arr *a, const float *row, const sift__bound *b)
{
    int32_t *ids = (int32_t *)c->ws.u32;
    size_t cap = c->ws.cap - a->n;
    size_t n = sift__chain_extras(c, ids, cap);
    if (n == 0)
        return 1;
    if (n > cap)
        return 0;
    size_t start = a->n;
    for (size_t i = 0; i < n; i++) {
        sift_candidate x = {ids[i], row[ids[i]]};
        if (sift__ckey(x.logit, x.id) < b->key)
            a->c[a->n++] = x;
    }
    sift__sort_canon(a->c + start, a->n - start, c->ws.cand2);
    return 1;
}

/* The workspace a row step reserves: the row, and after a prefix of at
 * most V tokens room for the list of extras as the stages give it, before
 * the ids several stages name are merged (so it can exceed V). */
static size_t ws_need(const sift_chain *c, int32_t V)
{
    return (size_t)V + (size_t)sift__chain_max_extras(c);
}

/* The cost model of the row step: 1 when the prefix walk over the row's
 * top k is expected to be cheaper than the full pass. Measured with
 * `make bench` (the "(full pass)" cases; docs/samplers.md,
 * "Performance"): on V = 248,320 the full pass of DRY -> top_k 40 ->
 * dist costs about 0.45 ns per token of the row (110-140 us), the prefix
 * walk about 50 us plus 50-75 ns per prefix token (the one-pass top-k's
 * sort of k keys and the walk over them): DRY windows before top_k 40
 * gave k = 1,064 a tie, k = 2,088 lost by 1.3-1.5 times, k = 4,136 (the
 * block path) lost ten times before the full pass got faster (2.2 ms
 * against 0.2 ms). The crossover is near k = V / 250.
 * - k <= V / 8, and a prefix of at most SIFT__STEP_PREFIX_K0 tokens is
 *   always taken: its work is a few microseconds at most, and the rows
 *   on which it could lose to the full pass are that short too.
 * - a longer prefix only when k * SIFT__STEP_PREFIX_RATIO <= V. That
 *   covers the block path of sift__row_prefix too (k > SIFT__TOPK_MAX),
 *   which reads again every block whose maximum reaches the k-th largest
 *   (at least 64 k tokens, the whole row once k reaches V / 64). */
#define SIFT__STEP_PREFIX_K0 256
#define SIFT__STEP_PREFIX_RATIO 256
int sift__step_takes_prefix(int32_t V, size_t k)
{
    if (k == 0 || k > (size_t)V / 8)
        return 0;
    return k <= SIFT__STEP_PREFIX_K0 || k <= (size_t)V / SIFT__STEP_PREFIX_RATIO;
}

/* The tail route's back-off: after the f-th failed attempt in a row the
 * route skips the next min(2^(f-1), SIFT__TAIL_SKIP_MAX) - 1 whole-row
 * steps (none after a first failure, so that rows where most attempts
 * decide lose little; then 1, 3, 7, ... up to 63 on rows where the
 * prefix holds almost no mass, such as flat ones); a decided attempt
 * clears it. Both paths give the same bits, so this only moves cost. */
#define SIFT__TAIL_SKIP_MAX 64u

static int tail_route_due(sift_chain *c)
{
    if (c->tail_skip == 0)
        return 1;
    c->tail_skip--;
    return 0;
}

static void tail_route_done(sift_chain *c, int decided)
{
    if (decided) {
        c->tail_fails = 0;
        return;
    }
    if (c->tail_fails < 7)
        c->tail_fails++;
    c->tail_skip = (c->tail_fails >= 7 ? SIFT__TAIL_SKIP_MAX : 1u << (c->tail_fails - 1)) - 1;
}

/* The tail route's bound on the tokens outside the row's top k (a->c[0..k),
 * followed by the extras, all at or below the k-th logit lk): the kernel's
 * S from above and, from the same S, the absent tokens' mass from below
 * (the present tokens at or below lk, which the kernel counted, taken
 * out). */
static void tail_bound(sift__bound *b, const sift__ctx *ctx, const sift__arr *a,
                       const float *logits, size_t k)
{
    float m = a->c[0].logit, lk = a->c[k - 1].logit;
    double S, lower;
    if (ctx->tail_ok) {
        /* the top-k pass summed them (sift__tail_join) */
        S = ctx->tail_S;
        lower = ctx->tail_lower;
    } else {
        S = sift__simd()->tail_mass(logits, (size_t)a->V, m, lk);
        lower = sift__tail_mass_lower(S, (size_t)a->V);
    }
    sift__tail_start(b, m, S);
    uint64_t n_present = 0;
    for (size_t i = 0; i < a->n; i++)
        n_present += a->c[i].logit <= lk;
    sift__tail_set_lower(b, lower, n_present, lk);
}

static int arr_top_try(sift__stage *st, sift__ctx *ctx, const sift__arr *a, size_t k);

/* The tail route inside a full pass (sift__arr_top_select in
 * sift_internal.h). The array's logits are copied to a float row in the
 * weights buffer (free until the exact pass computes weights there), in
 * the array's order, which is ascending id: an index then ranks ties as
 * the id does, and the top-k pass's canonical first k, mapped back to
 * ids, are the set's canonical first k. The bound is tail_bound's on
 * that row, and the certificate the walk's (cert_whole). */
int sift__arr_top_select(sift__stage *st, sift__ctx *ctx, const sift__arr *a)
{
    size_t n = a->n, k = SIFT__ROW_TAIL_K;
    if (!ctx->arr_whole || ctx->arr_top_off || !ctx->arr_skip || !st->ops->certify_mass ||
        a->order != SIFT__ORDER_ID || n < SIFT__ARR_TOP_MIN || n > (size_t)INT32_MAX ||
        !sift__step_takes_prefix((int32_t)n, k) || !sift__topk_fits((int32_t)n, k) ||
        ctx->absent_lo.lo || ctx->absent_lo.hi)
        return 0;
    /* the row route's back-off (tail_route_due, tail_route_done) */
    uint32_t *skip = ctx->arr_skip, *fails = ctx->arr_fails;
    if (*skip) {
        --*skip;
        return 0;
    }
    int ok = arr_top_try(st, ctx, a, k);
    if (ok) {
        *fails = 0;
        ctx->arr_top++;
    } else {
        if (*fails < 7)
            ++*fails;
        *skip = (*fails >= 7 ? SIFT__TAIL_SKIP_MAX : 1u << (*fails - 1)) - 1;
    }
    return ok;
}

static int arr_top_try(sift__stage *st, sift__ctx *ctx, const sift__arr *a, size_t k)
{
    size_t n = a->n;
    float *row = (float *)(void *)ctx->ws->u64a;
    sift__cand_logits(a->c, n, row);
    sift_candidate *p = ctx->ws->cand2;
    /* A row the top-k pass refuses (NaN, +inf: not in a loaded array;
     * all -inf) goes to the exact pass, which reports what it must; the
     * pass's message is not kept. */
    sift_error scratch;
    sift_error *user_err = ctx->err;
    ctx->err = &scratch;
    ctx->tail_want = 1;
    sift_status s = sift__topk_row(ctx, row, (int32_t)n, k, p);
    ctx->tail_want = 0;
    ctx->err = user_err;
    if (s) {
        ctx->tail_ok = 0;
        return 0;
    }
    for (size_t j = 0; j < k; j++)
        p[j].id = a->c[p[j].id].id;
    sift__arr pa = {p, k, (int32_t)n, SIFT__ORDER_CANON, 0};
    sift__bound b = sift__bound_of(&p[k - 1]);
    tail_bound(&b, ctx, &pa, row, k);
    ctx->tail_ok = 0;
    b.n_absent = (uint64_t)(n - k);
    int ok = st->ops->certify_mass(st, ctx, &pa, &b) && st->ops->apply(st, ctx, &pa) == SIFT_OK;
    ctx->absent_lo = sift__u128_from(0);
    return ok;
}

/* One pass of the chain over a whole row, starting from RNG state *rng:
 * the token, and *rng advanced past the draws. Commits nothing. The
 * caller has checked the chain and sized the buffers. try_prefix = 0
 * skips the prefix fast path (a slice that failed its walk on the same
 * or more of the row's top tokens).
 *
 * The prefix path has two forms. A plan that a prefix of k decides
 * (top_k, min_p, ...) walks the row's top k against the free bound. A
 * plan whose certificate rests on the tail mass (dist, top_p, XTC,
 * mirostat: sift__plan_row_k is 0) takes the tail route: the row's top
 * k of sift__plan_row_tail_k, and a bound on the mass of every token at
 * or below the prefix's last logit from one vector pass over the row
 * (sift__simd_ops.tail_mass), so that the walk certifies these stages as
 * it certifies a slice with SIFT_SLICE_TAIL_MASS (docs/analyzer.md,
 * "Tail mass"). A walk that decides gives the full pass's token, RNG and
 * state; one that does not sends the step to the full pass. */
static sift_status run_row(sift_chain *c, const float *logits, int32_t V, sift__rng *rng,
                           int32_t *token, int try_prefix, sift_error *err)
{
    sift_status s = SIFT_OK;
    sift__ctx ctx;
    sift__arr a;
    /* Fast path: decide from the row's top k when the chain allows it. */
    size_t k = try_prefix ? sift__plan_row_k(c) : 0;
    int prefix = sift__step_takes_prefix(V, k), tail = 0;
    if (k && !prefix) {
        /* Too long for the prefix path from the configuration (a DRY
         * window): the chain's current state may ask for much less. */
        k = sift__plan_row_k_dynamic(c);
        prefix = sift__step_takes_prefix(V, k);
    }
    if (try_prefix && k == 0) {
        k = sift__plan_row_tail_k(c);
        tail = prefix = sift__step_takes_prefix(V, k) && tail_route_due(c);
    }
    /* A chain the row's tail route serves certifies its stages on the
     * row's top tokens there (or backs off); its full pass does not try
     * the route again on the array (sift__arr_top_select), which would
     * mostly repeat that work. */
    int arr_top_off = sift__plan_row_k(c) == 0 && sift__plan_row_tail_k(c) > 0;
    /* The prefix needs the extras of this step; a grammar that cannot
     * list its allowed tokens within its work budget sends the step to
     * the whole row, which does not need them (out of memory is the
     * step's error). */
    sift_status ps = prefix ? sift__chain_prepare_extras(c, NULL) : SIFT_OK;
    if (ps == SIFT_E_NOMEM)
        return sift__fail(err, SIFT_E_NOMEM,
                          "out of memory while listing a grammar's allowed tokens");
    if (prefix && ps == SIFT_OK) {
        sift__ctx_init(c, &ctx, V, err);
        ctx.rng = *rng;
        ctx.tail_want = tail;
        if ((s = sift__row_prefix(&ctx, logits, V, k, c->ws.cand)))
            return s;
        a.c = c->ws.cand;
        a.n = k;
        a.V = V;
        a.order = SIFT__ORDER_CANON;
        a.dense = 0;
        sift__bound b = sift__bound_of(&a.c[k - 1]);
        int decided = add_row_extras(c, &a, logits, &b);
        /* The row is valid (sift__row_prefix checked it) and a.c[0] is
         * its largest logit; the bound counts every token at or below the
         * prefix's last logit: the absent ones, and perhaps extras and
         * tied prefix tokens (a larger bound is allowed; the lower end
         * takes those present ones out). */
        if (tail && decided)
            tail_bound(&b, &ctx, &a, logits, k);
        decided = decided && sift__walk(c, &ctx, &a, c->n_stages, &b, &s) == SIFT__WALK_DECIDED;
        if (tail)
            tail_route_done(c, decided);
        if (decided) {
            if (s)
                return s;
            c->n_prefix_decided++;
            goto selected;
        }
        c->n_prefix_fallback++;
    }
    sift__ctx_init(c, &ctx, V, err);
    ctx.rng = *rng;
    ctx.arr_top_off |= arr_top_off;
    /* The first stage may build its result from the row itself
     * (apply_row: top_n_sigma); else the row is loaded whole. */
    size_t from = 0;
    const sift__stage_ops *first = c->n_stages ? c->stages[0]->ops : NULL;
    /* A selector alone may draw from the row itself (select_row: dist's
     * float-certified draw). */
    if (c->n_stages == 1 && first->select_row && first->select_row(c->stages[0], &ctx, logits, V)) {
        c->n_full_passes++;
        goto selected;
    }
    if (first && first->apply_row && first->apply_row(c->stages[0], &ctx, logits, V, &a))
        from = 1;
    else if ((s = load_row(c, logits, V, &a, err)))
        return s;
    c->n_full_passes++;
    s = run_stages(c, &ctx, &a, from, c->n_stages, logits);
    if (s)
        return s;
selected:
    if (ctx.selected < 0 || ctx.selected >= V)
        return sift__fail(err, SIFT_E_STATE, "selector %s did not select a token",
                          sift__stage_name(c->stages[c->n_stages - 1]));
    c->n_carried += ctx.carry_used;
    c->n_tns_exact += ctx.tns_exact;
    c->n_arr_top += ctx.arr_top;
    c->n_fdraw_tries += ctx.fdraw_tries;
    c->n_fdraw += ctx.fdraw_done;
    c->n_fcarried += ctx.fcarry_used;
    *rng = ctx.rng;
    *token = ctx.selected;
    return SIFT_OK;
}

/* The row buffer (for the hook and for check-mode bans), sized once. */
sift_status sift__row_buffer(sift_chain *c, int32_t V, sift_error *err)
{
    if ((size_t)V <= c->row_cap)
        return SIFT_OK;
    const sift__alloc *al = sift__scratch_alloc(c);
    float *r = sift__malloc(al, (size_t)V, sizeof *r);
    if (!r)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while sizing a %d-token row buffer",
                          (int)V);
    sift__free(al, c->row);
    c->row = r;
    c->row_cap = (size_t)V;
    return SIFT_OK;
}

/* Check mode, once for both steps: if the chain's checker refuses
 * *token, ban every token it refuses in (a copy of) the row and sample
 * again, continuing from the RNG state the first draw left. `row` is the
 * step's row (it may be c->row, banned in place), or NULL for a slice
 * step: then the row comes from the hook (SIFT_E_NEED_ROW without one)
 * and is checked against `sl`. *resampled = 1 when the token was refused. */
sift_status sift__check_mode(sift_chain *c, const float *row, const sift_slice *sl, int32_t V,
                             sift__rng *rng, int32_t *token, int *resampled, sift_error *err)
{
    *resampled = 0;
    if (!c->check_ops)
        return SIFT_OK;
    int ok = 0;
    sift_status s = c->check_ops->accepts(c->check, *token, &ok, err);
    if (s || ok)
        return s;
    *resampled = 1;
    if (!row) {
        /* The bans need the whole row. */
        if (!c->hook) {
            c->n_need_row++;
            return sift__fail_at(err, SIFT_E_NEED_ROW, *token,
                                 "the %s rejects token %d; banning needs the whole row and no "
                                 "row hook is set",
                                 c->check_ops->name, (int)*token);
        }
        if ((s = sift__slice_fetch_row(c, sl, err)) ||
            (s = sift__ws_reserve(&c->ws, &c->al, (size_t)V, err)))
            return s;
        row = c->row;
    }
    if ((s = sift__row_buffer(c, V, err)))
        return s;
    if (row != c->row)
        memcpy(c->row, row, (size_t)V * sizeof *row);
    c->n_grammar_resamples++;
    if ((s = c->check_ops->ban(c->check, c->row, V, err)))
        return s;
    return run_row(c, c->row, V, rng, token, 1, err);
}

sift_status sift__sample_row(sift_chain *c, const float *logits, int32_t V, int32_t *token,
                             int try_prefix, sift_error *err)
{
    sift_status s = SIFT_OK;
    if (!token)
        return sift__fail(err, SIFT_E_ARG, "token is NULL");
    if (!logits)
        return sift__fail(err, SIFT_E_ARG, "logits is NULL");
    if ((s = sift__step_check(c, V, 1, err)) ||
        (s = sift__ws_reserve(&c->ws, &c->al, ws_need(c, V), err)))
        return s;
    sift__rng rng = c->rng;
    int32_t tok = -1;
    int resampled;
    if ((s = run_row(c, logits, V, &rng, &tok, try_prefix, err)) ||
        (s = sift__check_mode(c, logits, NULL, V, &rng, &tok, &resampled, err)))
        return s;
    c->rng = rng;
    c->last_V = V;
    c->settle_due = 1;
    *token = tok;
    return SIFT_OK;
}

/* prompt = 1: a token of the prompt (or any text the model did not
 * generate): history windows take it, generated_only stages (grammars)
 * and the checker do not. */
sift_status sift__accept(sift_chain *c, int32_t token, int prompt, sift_error *err)
{
    int32_t lim = c->n_vocab ? c->n_vocab : (c->last_V ? c->last_V : c->max_vocab);
    if (token < 0 || token >= lim)
        return sift__fail_at(err, SIFT_E_TOKEN, token, "token %d out of range [0, %d)", (int)token,
                             (int)lim);
    /* Stages and the checker can refuse a token (prepare_accept); ask
     * them all before anything changes. */
    sift_status s;
    if (!prompt && c->check_ops && (s = c->check_ops->prepare_accept(c->check, token, err)))
        return s;
    for (size_t i = 0; i < c->n_stages; i++) {
        sift__stage *st = c->stages[i];
        if (st->ops->prepare_accept && !(prompt && st->ops->generated_only) &&
            (s = st->ops->prepare_accept(st, token, err)))
            return s;
    }
    if (!prompt && c->check_ops && (s = c->check_ops->accept(c->check, token, err)))
        return s; /* prepared: cannot fail */
    for (size_t i = 0; i < c->n_stages; i++) {
        sift__stage *st = c->stages[i];
        if (st->ops->accept && !(prompt && st->ops->generated_only))
            st->ops->accept(st, token);
    }
    if (!prompt && c->settle_due)
        for (size_t i = 0; i < c->n_stages; i++)
            if (c->stages[i]->ops->settle)
                c->stages[i]->ops->settle(c->stages[i]);
    c->settle_due = 0;
    return SIFT_OK;
}

/* The stages before the selector: [0, sift__selector_end). */
size_t sift__selector_end(const sift_chain *c)
{
    size_t end = c->n_stages;
    if (end && c->stages[end - 1]->ops->is_selector)
        end--;
    return end;
}

/* The selector's support of the set the stages before it left in `a`,
 * sorted canonically into ws.cand2 (*sorted, *n), with its largest logit
 * *m and its total weight *Wd: token i's probability is
 * sift__weight(sift__expf(logit - m)) / Wd. a->c is scratch. */
sift_status sift__distribution_sorted(sift_chain *c, sift__ctx *ctx, sift__arr *a, size_t end,
                                      const sift_candidate **sorted, size_t *n, float *m,
                                      double *Wd)
{
    sift_status s = SIFT_OK;
    sift__stage *sel = end < c->n_stages ? c->stages[end] : NULL;
    if (sel && sel->ops->support) {
        ctx->stage = end;
        if ((s = sel->ops->support(sel, ctx, a)))
            return s;
    }
    *m = sift__max_logit(a->c, a->n);
    if (!(*m > -INFINITY)) {
        if (ctx->banned_at < end)
            return sift__no_candidate_left(c, ctx);
        return sift__fail(ctx->err, SIFT_E_NO_CANDIDATE, "every candidate is -inf after stage %zu",
                          end ? end - 1 : 0);
    }
    if (sel && sel->ops->is_greedy)
        sift__arr_keep_top(ctx, a, 1);
    sift__u128 W = sift__weights(a->c, a->n, *m, c->ws.u64a);
    *Wd = sift__u128_to_double(W);
    /* Report in canonical order. This is a diagnostic call, not the hot
     * path, so it sorts what survived. A weight is a pure function of the
     * logit and m, so it is recomputed after the sort. */
    sift_candidate *out = c->ws.cand2;
    memcpy(out, a->c, a->n * sizeof *out);
    sift__sort_canon(out, a->n, a->c);
    *sorted = out;
    *n = a->n;
    return SIFT_OK;
}

/* The selector's support and the probabilities, from the set the stages
 * before it left in `a`. */
sift_status sift__finish_distribution(sift_chain *c, sift__ctx *ctx, sift__arr *a, size_t end,
                                      sift_token_prob *out, size_t capacity, size_t *n_out)
{
    const sift_candidate *sorted;
    size_t n;
    float m;
    double Wd;
    sift_status s = sift__distribution_sorted(c, ctx, a, end, &sorted, &n, &m, &Wd);
    if (s)
        return s;
    size_t k = n < capacity ? n : capacity;
    for (size_t i = 0; i < k; i++) {
        out[i].id = sorted[i].id;
        out[i].logit = sorted[i].logit;
        out[i].p = (double)sift__weight(sift__expf(sorted[i].logit - m)) / Wd;
    }
    *n_out = n;
    return SIFT_OK;
}

sift_status sift__distribution_row(sift_chain *c, const float *logits, int32_t V,
                                   sift_token_prob *out, size_t capacity, size_t *n_out,
                                   sift_error *err)
{
    sift_status s = SIFT_OK;
    if (!n_out || (!out && capacity))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", n_out ? "out" : "n_out");
    if (!logits)
        return sift__fail(err, SIFT_E_ARG, "logits is NULL");
    if ((s = sift__step_check(c, V, 0, err)) ||
        (s = sift__ws_reserve(&c->ws, &c->al, ws_need(c, V), err)))
        return s;
    sift__arr a;
    if ((s = load_row(c, logits, V, &a, err)))
        return s;
    sift__ctx ctx;
    sift__ctx_init(c, &ctx, V, err);
    size_t end = sift__selector_end(c);
    s = run_stages(c, &ctx, &a, 0, end, logits);
    if (s)
        return s;
    return sift__finish_distribution(c, &ctx, &a, end, out, capacity, n_out);
}

/* The public entry points: refuse a busy chain, and hold the chain for
 * the whole call, so that any callback (allocator, custom stage) that
 * calls back into it gets SIFT_E_STATE. */
sift_status sift_chain_sample(sift_chain *c, const float *logits, int32_t V, int32_t *token,
                              sift_error *err)
{
    SIFT__CHAIN_SCRATCH_CALL(c, err, sift__sample_row(c, logits, V, token, 1, err));
}

sift_status sift_chain_accept(sift_chain *c, int32_t token, sift_error *err)
{
    SIFT__CHAIN_CALL(c, err, sift__accept(c, token, 0, err));
}

sift_status sift_chain_accept_prompt(sift_chain *c, int32_t token, sift_error *err)
{
    SIFT__CHAIN_CALL(c, err, sift__accept(c, token, 1, err));
}

sift_status sift_chain_distribution(sift_chain *c, const float *logits, int32_t V,
                                    sift_token_prob *out, size_t capacity, size_t *n_out,
                                    sift_error *err)
{
    SIFT__CHAIN_SCRATCH_CALL(c, err,
                             sift__distribution_row(c, logits, V, out, capacity, n_out, err));
}

/* For the logprobs call (core/logprobs.c): the row step's pieces. */
size_t sift__row_ws_need(const sift_chain *c, int32_t V)
{
    return ws_need(c, V);
}

sift_status sift__row_load(sift_chain *c, const float *logits, int32_t V, sift__arr *a,
                           sift_error *err)
{
    return load_row(c, logits, V, a, err);
}

sift_status sift__row_run_stages(sift_chain *c, sift__ctx *ctx, sift__arr *a, size_t end,
                                 const float *logits)
{
    return run_stages(c, ctx, a, 0, end, logits);
}

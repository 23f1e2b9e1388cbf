/*
 * slice_step.c - the slice step: sift_slice input and its validation,
 * the row hook's row and its check against the slice, and sample /
 * distribution over a slice (the certificate walk is in certify.c).
 *
 * Invariants: validation is O(k + extras) with the chain's id set, which
 * a new generation empties without touching it (seen_begin); an
 * undecided slice asks for the row (hook) or fails with SIFT_E_NEED_ROW,
 * never a different token.
 */
#include <math.h>

#include "../sift_internal.h"
#include "step.h"

/* ------------------------------------------------------------------ */
/* Slices                                                              */
/* ------------------------------------------------------------------ */

static sift_status seen_reserve(sift_chain *c, int32_t V, sift_error *err)
{
    if ((size_t)V <= c->seen_cap)
        return SIFT_OK;
    const sift__alloc *al = sift__scratch_alloc(c);
    uint32_t *b = sift__calloc(al, (size_t)V, sizeof *b);
    if (!b)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while sizing a %d-token id set",
                          (int)V);
    sift__free(al, c->seen);
    c->seen = b;
    c->seen_cap = (size_t)V;
    c->seen_gen = 0;
    return SIFT_OK;
}

/* Empties the id set by starting a new generation; returns it. Once in
 * 2^32 - 1 calls the generation wraps and the array is zeroed. */
static uint32_t seen_begin(sift_chain *c)
{
    if (++c->seen_gen == 0) {
        memset(c->seen, 0, c->seen_cap * sizeof *c->seen);
        c->seen_gen = 1;
    }
    return c->seen_gen;
}

/* Adds id to the set of generation g; whether it was there. */
static int seen_test_set(uint32_t *m, uint32_t g, int32_t id)
{
    int was = m[id] == g;
    m[id] = g;
    return was;
}

/* One candidate of a slice: id range, value. `what` names the array. */
static sift_status check_entry(const sift_candidate *x, int32_t V, const char *what, int32_t pos,
                               sift_error *err)
{
    if (x->id < 0 || x->id >= V)
        return sift__fail_at(err, SIFT_E_SLICE, pos, "%s %d has id %d, outside [0, %d)", what,
                             (int)pos, (int)x->id, (int)V);
    if (x->logit != x->logit)
        return sift__fail_at(err, SIFT_E_ROW_VALUE, x->id, "%s %d (token %d) is NaN", what,
                             (int)pos, (int)x->id);
    if (x->logit == INFINITY)
        return sift__fail_at(err, SIFT_E_ROW_VALUE, x->id, "%s %d (token %d) is +inf", what,
                             (int)pos, (int)x->id);
    return SIFT_OK;
}

/* The position of id in c[0..n) (it is there). */
static int32_t find_pos(const sift_candidate *c, size_t n, int32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (c[i].id == id)
            return (int32_t)i;
    return -1;
}

/* Every extra id the chain asks for this step is in the slice (whose ids
 * are in the id set m of generation g). */
static sift_status check_requested(sift_chain *c, const sift_slice *sl, const uint32_t *m,
                                   uint32_t g, sift_error *err)
{
    int32_t *ids = (int32_t *)c->ws.u32;
    size_t n = sift__chain_extras(c, ids, c->ws.cap);
    if (n > c->ws.cap) /* load_slice sized ws for the whole list */
        return sift__fail(err, SIFT_E_LIMIT,
                          "the chain asks for %zu extra ids, more than its workspace holds (%zu)",
                          n, c->ws.cap);
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id >= sl->n_vocab) /* sift__step_check reports a stage's token outside V */
            continue;
        if (m[id] != g)
            return sift__fail_at(
                err, SIFT_E_SLICE, id,
                "extra token %d, which the chain asks for this step (sift_chain_extras), is "
                "missing from the slice",
                (int)id);
    }
    return SIFT_OK;
}

/* Validates a slice in O(k + extras) with the chain's id set (a new
 * generation of it) and copies it into ws.cand. The ids the chain asks
 * for as extras are written to ws.u32 scratch first, so ws must hold
 * them. */
static sift_status validate_slice(sift_chain *c, const sift_slice *sl, sift_error *err)
{
    int32_t V = sl->n_vocab, k = sl->n_prefix, e = sl->n_extras;
    if (k < 1)
        return sift__fail(err, SIFT_E_SLICE, "slice has %d prefix candidates; at least 1 is needed",
                          (int)k);
    if (k > V)
        return sift__fail(err, SIFT_E_SLICE, "k = %d > V = %d", (int)k, (int)V);
    if (e < 0 || (int64_t)k + e > V)
        return sift__fail(err, SIFT_E_SLICE,
                          "slice has %d extras; with k = %d it must fit in V = %d", (int)e, (int)k,
                          (int)V);
    if (!sl->prefix || (e > 0 && !sl->extras))
        return sift__fail(err, SIFT_E_SLICE, "slice.%s is NULL", sl->prefix ? "extras" : "prefix");
    const uint32_t known = SIFT_SLICE_CANONICAL | SIFT_SLICE_TAIL_MASS;
    if (sl->flags & ~known)
        return sift__fail(err, SIFT_E_SLICE, "slice.flags has unknown bits 0x%x",
                          (unsigned)(sl->flags & ~known));
    if ((sl->flags & SIFT_SLICE_TAIL_MASS) && !(sl->tail_mass >= 0.0 && sl->tail_mass < INFINITY))
        return sift__fail(err, SIFT_E_SLICE,
                          "slice.tail_mass is %g; with SIFT_SLICE_TAIL_MASS it must be a finite "
                          "number >= 0",
                          sl->tail_mass);
    const int canon = (sl->flags & SIFT_SLICE_CANONICAL) != 0;
    /* The common case first, one pass per array with no branch but the
     * id range, which also copies the slice into ws.cand (the work set;
     * scratch until the slice is valid): every id in range, every value
     * finite or -inf, ids unique, and the extras below the prefix: below
     * its last key for a canonical prefix (whose keys must then strictly
     * decrease), else at or below its smallest logit. Only a slice that fails it goes through the
     * checks below, which find the first problem and name it. The id set
     * takes only ids in range. */
    uint32_t *m = c->seen, g = seen_begin(c);
    sift_candidate *out = c->ws.cand;
    int bad = 0;
    uint64_t prev = UINT64_MAX;
    float lmin = INFINITY;
    int32_t nk = 0, ne = 0;
    if (canon) {
        /* Strictly falling keys between a first value below +inf and a
         * last one at or above -inf hold neither NaN (whose keys lie
         * above +inf's or below -inf's) nor +inf: two checks, not k. */
        for (; nk < k; nk++) {
            sift_candidate x = sl->prefix[nk];
            if ((uint32_t)x.id >= (uint32_t)V) {
                bad = 1;
                break;
            }
            out[nk] = x;
            uint64_t key = sift__ckey(x.logit, x.id);
            bad |= (key >= prev) | seen_test_set(m, g, x.id);
            prev = key;
        }
        bad |= (sl->prefix[0].logit < INFINITY ? 0 : 1) |
               (sl->prefix[k - 1].logit >= -INFINITY ? 0 : 1);
    } else {
        for (; nk < k; nk++) {
            sift_candidate x = sl->prefix[nk];
            if ((uint32_t)x.id >= (uint32_t)V) {
                bad = 1;
                break;
            }
            out[nk] = x;
            bad |= (x.logit < INFINITY ? 0 : 1) | seen_test_set(m, g, x.id);
            lmin = x.logit < lmin ? x.logit : lmin;
        }
    }
    for (; !bad && ne < e; ne++) {
        sift_candidate x = sl->extras[ne];
        if ((uint32_t)x.id >= (uint32_t)V) {
            bad = 1;
            break;
        }
        out[k + ne] = x;
        int below = canon ? sift__ckey(x.logit, x.id) < prev : x.logit <= lmin;
        bad |= (x.logit < INFINITY ? 0 : 1) | (below ^ 1) | seen_test_set(m, g, x.id);
    }
    if (!bad) {
        /* Valid, and the ids are in the set: check the requested extras. */
        return c->plan_max_extras == 0 ? SIFT_OK : check_requested(c, sl, m, g, err);
    }
    /* Let the detailed checks name the first problem. */
    sift_status s = SIFT_OK;
    for (int32_t i = 0; i < k && !s; i++) {
        s = check_entry(&sl->prefix[i], V, "prefix position", i, err);
        if (!s && canon && i > 0 && !sift__canon_before(&sl->prefix[i - 1], &sl->prefix[i]) &&
            sl->prefix[i - 1].id != sl->prefix[i].id)
            s = sift__fail_at(err, SIFT_E_SLICE, i,
                              "prefix positions %d/%d are out of canonical order (token %d, "
                              "logit %.9g before token %d, logit %.9g)",
                              (int)(i - 1), (int)i, (int)sl->prefix[i - 1].id,
                              (double)sl->prefix[i - 1].logit, (int)sl->prefix[i].id,
                              (double)sl->prefix[i].logit);
    }
    for (int32_t i = 0; i < e && !s; i++)
        s = check_entry(&sl->extras[i], V, "extra", i, err);
    if (s)
        return s;
    /* Duplicates, then the extras the chain asks for. */
    g = seen_begin(c);
    for (int32_t i = 0; i < k && !s; i++)
        if (seen_test_set(m, g, sl->prefix[i].id))
            s = sift__fail_at(err, SIFT_E_SLICE, sl->prefix[i].id,
                              "token %d appears at prefix positions %d and %d",
                              (int)sl->prefix[i].id,
                              (int)find_pos(sl->prefix, (size_t)i, sl->prefix[i].id), (int)i);
    for (int32_t i = 0; i < e && !s; i++)
        if (seen_test_set(m, g, sl->extras[i].id)) {
            int32_t p = find_pos(sl->prefix, (size_t)k, sl->extras[i].id);
            s = p >= 0
                    ? sift__fail_at(err, SIFT_E_SLICE, sl->extras[i].id,
                                    "extra token %d is already in the prefix (position %d)",
                                    (int)sl->extras[i].id, (int)p)
                    : sift__fail_at(err, SIFT_E_SLICE, sl->extras[i].id,
                                    "extra token %d appears twice (extras %d and %d)",
                                    (int)sl->extras[i].id,
                                    (int)find_pos(sl->extras, (size_t)i, sl->extras[i].id), (int)i);
        }
    const sift_candidate *last = &sl->prefix[k - 1];
    for (int32_t i = 0; i < e && !s; i++)
        if (canon && sift__canon_before(&sl->extras[i], last))
            s = sift__fail_at(err, SIFT_E_SLICE, sl->extras[i].id,
                              "extra token %d (logit %.9g) ranks before the prefix's last "
                              "token %d (logit %.9g); it belongs in the prefix",
                              (int)sl->extras[i].id, (double)sl->extras[i].logit, (int)last->id,
                              (double)last->logit);
        else if (!canon && sl->extras[i].logit > lmin)
            s = sift__fail_at(err, SIFT_E_SLICE, sl->extras[i].id,
                              "extra token %d (logit %.9g) is above the prefix's smallest logit "
                              "%.9g; it belongs in the prefix",
                              (int)sl->extras[i].id, (double)sl->extras[i].logit, (double)lmin);
    if (!s)
        s = check_requested(c, sl, m, g, err);
    if (!s) { /* valid after all: the work set as the fast path leaves it */
        memcpy(out, sl->prefix, (size_t)k * sizeof *out);
        if (e > 0)
            memcpy(out + k, sl->extras, (size_t)e * sizeof *out);
    }
    return s;
}

/* Checks and sizes everything for a slice call; fills `a` and `b`. */
static sift_status load_slice(sift_chain *c, const sift_slice *sl, int need_selector, sift__arr *a,
                              sift__bound *b, sift_error *err)
{
    sift_status s;
    int32_t V = sl->n_vocab;
    if ((s = sift__step_check(c, V, need_selector, err)))
        return s;
    /* Room for the slice (at most V once validated) and for the list of
     * extras the chain asks for as the stages give it, before the ids
     * several stages name are merged (check_requested): that list can
     * be longer than V. */
    int64_t want = (int64_t)sift__chain_max_extras(c);
    int64_t n =
        (int64_t)(sl->n_prefix > 0 ? sl->n_prefix : 0) + (sl->n_extras > 0 ? sl->n_extras : 0);
    if (n > V)
        n = V;
    if (want < n)
        want = n;
    if (want < 1)
        want = 1;
    if ((s = sift__ws_reserve(&c->ws, &c->al, (size_t)want, err)) ||
        (s = seen_reserve(c, V, err)) || (s = sift__chain_prepare_extras(c, err)))
        return s;
    if ((s = validate_slice(c, sl, err)))
        return s;
    size_t k = (size_t)sl->n_prefix, e = (size_t)sl->n_extras;
    /* validate_slice copied the prefix and the extras into ws.cand. */
    if (!(sl->flags & SIFT_SLICE_CANONICAL))
        sift__order_top_set(c->ws.cand, k, c->ws.cand2);
    /* Every absent token and every extra ranks after the prefix's last
     * token: a prefix that starts at -inf means a row of -inf, refused
     * before any stage as the row paths refuse it. */
    if (!(c->ws.cand[0].logit > -INFINITY))
        return sift__fail(err, SIFT_E_NO_CANDIDATE,
                          "all %d tokens are banned (-inf) in the input slice (its largest "
                          "logit is -inf)",
                          (int)V);
    /* A canonical prefix: every absent token comes after its last token
     * in canonical order. A device's top-k set: every absent token's
     * logit is at most the smallest present one, with any id, so only a
     * strictly larger logit is certainly ahead (docs/analyzer.md, "The
     * slice contract"). */
    if (sl->flags & SIFT_SLICE_CANONICAL) {
        *b = sift__bound_of(&c->ws.cand[k - 1]);
    } else {
        *b = sift__bound_of(&c->ws.cand[k - 1]);
        b->by_key = 0;
        b->key = 0;
    }
    /* The caller's bound on the absent tokens' mass, relative to the
     * row's largest logit: the prefix's first (core/tail.c). */
    if (sl->flags & SIFT_SLICE_TAIL_MASS)
        sift__tail_start(b, c->ws.cand[0].logit, sl->tail_mass);
    if (e > 0 && (sl->flags & SIFT_SLICE_CANONICAL)) {
        /* Every extra comes after the prefix's last key (validated). */
        sift__sort_canon(c->ws.cand + k, e, c->ws.cand2);
    } else if (e > 0) {
        /* A device set's extras may tie its smallest logit with a smaller
         * id than a tied prefix token, and so belong before it: merged in
         * canonically, not appended. */
        memcpy(c->ws.cand2, c->ws.cand + k, e * sizeof *c->ws.cand2);
        sift__canon_merge(c->ws.cand, k, c->ws.cand2, e);
    }
    a->c = c->ws.cand;
    a->n = k + e;
    a->V = V;
    a->order = SIFT__ORDER_CANON;
    a->dense = 0;
    return SIFT_OK;
}

/* Calls the row hook into c->row and checks the row against the slice. */
sift_status sift__slice_fetch_row(sift_chain *c, const sift_slice *sl, sift_error *err)
{
    int32_t V = sl->n_vocab;
    sift_status s = sift__row_buffer(c, V, err);
    if (s)
        return s;
    c->n_hook_calls++;
    int rc = c->hook(c->hook_user, c->row, V);
    if (rc != 0)
        return sift__fail(err, SIFT_E_HOOK, "row hook failed (status %d)", rc);
    const float *row = c->row;
    for (int32_t i = 0; i < sl->n_prefix + sl->n_extras; i++) {
        const sift_candidate *x = i < sl->n_prefix ? &sl->prefix[i] : &sl->extras[i - sl->n_prefix];
        if (memcmp(&row[x->id], &x->logit, sizeof x->logit) != 0)
            return sift__fail_at(err, SIFT_E_HOOK, x->id,
                                 "row disagrees with slice at token %d (%.9g vs %.9g)", (int)x->id,
                                 (double)row[x->id], (double)x->logit);
    }
    /* Exactly the prefix ranks ahead of what the slice leaves out: for a
     * canonical prefix, the tokens at or before its last token in
     * canonical order; for a top-k set, the tokens with a logit above its
     * smallest (the ones tied at the smallest may be any of them). */
    const int canon = (sl->flags & SIFT_SLICE_CANONICAL) != 0;
    uint64_t bkey = 0;
    float lmin = INFINITY;
    int64_t want = sl->n_prefix;
    if (canon) {
        bkey = sift__ckey(sl->prefix[sl->n_prefix - 1].logit, sl->prefix[sl->n_prefix - 1].id);
    } else {
        for (int32_t i = 0; i < sl->n_prefix; i++)
            lmin = sl->prefix[i].logit < lmin ? sl->prefix[i].logit : lmin;
        want = 0;
        for (int32_t i = 0; i < sl->n_prefix; i++)
            want += sl->prefix[i].logit > lmin;
    }
    int64_t ahead = 0;
    int bad = 0;
    for (int32_t i = 0; i < V; i++) {
        float x = row[i];
        bad |= !(x < INFINITY);
        ahead += canon ? sift__ckey(x, i) >= bkey : x > lmin;
    }
    if (bad) {
        for (int32_t i = 0; i < V; i++)
            if (!(row[i] < INFINITY))
                return sift__fail_at(err, SIFT_E_HOOK, i, "row hook's row[%d] is %s", (int)i,
                                     row[i] != row[i] ? "NaN" : "+inf");
    }
    if (ahead != want) {
        uint32_t *m = c->seen, g = seen_begin(c);
        for (int32_t i = 0; i < sl->n_prefix; i++)
            m[sl->prefix[i].id] = g;
        int32_t culprit = -1;
        for (int32_t i = 0; i < V && culprit < 0; i++)
            if ((canon ? sift__ckey(row[i], i) >= bkey : row[i] > lmin) && m[i] != g)
                culprit = i;
        return sift__fail_at(err, SIFT_E_HOOK, culprit,
                             canon ? "row disagrees with slice: token %d (logit %.9g) ranks before "
                                     "the prefix's last token but is not in the prefix"
                                   : "row disagrees with slice: token %d (logit %.9g) is above the "
                                     "prefix's smallest logit but is not in the prefix",
                             (int)culprit, culprit >= 0 ? (double)row[culprit] : 0.0);
    }
    return SIFT_OK;
}

static sift_status need_row(sift_chain *c, const sift_slice *sl, const sift__ctx *ctx,
                            sift_error *err)
{
    c->n_need_row++;
    size_t i = ctx->stage < c->n_stages ? ctx->stage : c->n_stages - 1;
    return sift__fail_at(err, SIFT_E_NEED_ROW, (int64_t)i,
                         "a slice of k = %d cannot decide stage %zu (%s) and no row hook is set",
                         (int)sl->n_prefix, i, sift__stage_name(c->stages[i]));
}

static sift_status sample_slice_impl(sift_chain *c, const sift_slice *sl, int32_t *token,
                                     sift_error *err)
{
    if (!sl || !token)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", sl ? "token" : "slice");
    sift__arr a;
    sift__bound b;
    sift_status s = load_slice(c, sl, 1, &a, &b, err);
    if (s)
        return s;
    sift__ctx ctx;
    sift__ctx_init(c, &ctx, sl->n_vocab, err);
    if (sift__walk(c, &ctx, &a, c->n_stages, &b, &s) == SIFT__WALK_DECIDED) {
        if (s)
            return s;
        if (ctx.selected < 0 || ctx.selected >= sl->n_vocab)
            return sift__fail(err, SIFT_E_STATE, "selector %s did not select a token",
                              sift__stage_name(c->stages[c->n_stages - 1]));
        sift__rng rng = ctx.rng;
        int32_t tok = ctx.selected;
        int resampled;
        if ((s = sift__check_mode(c, NULL, sl, sl->n_vocab, &rng, &tok, &resampled, err)))
            return s;
        if (!resampled)
            c->n_slice_decided++;
        c->n_fcarried += ctx.fcarry_used;
        c->rng = rng;
        c->last_V = sl->n_vocab;
        c->settle_due = 1;
        *token = tok;
        return SIFT_OK;
    }
    if (!c->hook)
        return need_row(c, sl, &ctx, err);
    if ((s = sift__slice_fetch_row(c, sl, err)))
        return s;
    /* The walk above failed on the slice; the row's prefix path would
     * build the row's top plan-k and run the same walk on no more than the
     * slice held (a canonical slice of at least that many tokens), so the
     * step goes straight to the full pass. A shorter or device-order
     * slice knows less than the row's canonical prefix: that one may
     * still decide, and is tried first; so may the row step's tail route
     * after a slice that carried no tail mass (it computes one). */
    int try_prefix = !(sl->flags & SIFT_SLICE_CANONICAL) ||
                     (size_t)sl->n_prefix < sift__plan_prefix_k(c) ||
                     (!(sl->flags & SIFT_SLICE_TAIL_MASS) && sift__plan_row_tail_k(c) > 0);
    return sift__sample_row(c, c->row, sl->n_vocab, token, try_prefix, err);
}

static sift_status distribution_slice_impl(sift_chain *c, const sift_slice *sl,
                                           sift_token_prob *out, size_t capacity, size_t *n_out,
                                           sift_error *err)
{
    if (!sl || !n_out || (!out && capacity))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", !sl ? "slice" : (n_out ? "out" : "n_out"));
    sift__arr a;
    sift__bound b;
    sift_status s = load_slice(c, sl, 0, &a, &b, err);
    if (s)
        return s;
    sift__ctx ctx;
    sift__ctx_init(c, &ctx, sl->n_vocab, err);
    size_t end = sift__selector_end(c);
    int w = sift__walk(c, &ctx, &a, end, &b, &s);
    int decided = w == SIFT__WALK_DECIDED;
    if (decided && s)
        return s;
    if (w == SIFT__WALK_RAN && end < c->n_stages && c->stages[end]->ops->is_greedy && a.n > 0) {
        /* Greedy's support is the first token: decided if it is ahead.
         * Only when every stage before it ran: a walk that stopped early
         * leaves the candidates half processed. */
        sift__arr_canon(&ctx, &a);
        if (sift__bound_ahead(&b, &a.c[0])) {
            a.n = 1;
            decided = 1;
        }
    }
    if (decided)
        return sift__finish_distribution(c, &ctx, &a, end, out, capacity, n_out);
    if (!c->hook)
        return need_row(c, sl, &ctx, err);
    if ((s = sift__slice_fetch_row(c, sl, err)))
        return s;
    return sift__distribution_row(c, c->row, sl->n_vocab, out, capacity, n_out, err);
}

sift_status sift__sample_slice(sift_chain *c, const sift_slice *slice, int32_t *token,
                               sift_error *err)
{
    sift__xc_step before;
    sift__cross_check_begin(c, token, &before);
    sift_status s = sample_slice_impl(c, slice, token, err);
    return sift__cross_check_end(c, &before, slice, token, s, err);
}

sift_status sift__distribution_slice(sift_chain *c, const sift_slice *slice, sift_token_prob *out,
                                     size_t capacity, size_t *n_out, sift_error *err)
{
    return distribution_slice_impl(c, slice, out, capacity, n_out, err);
}

sift_status sift_chain_sample_slice(sift_chain *c, const sift_slice *slice, int32_t *token,
                                    sift_error *err)
{
    SIFT__CHAIN_SCRATCH_CALL(c, err, sift__sample_slice(c, slice, token, err));
}

sift_status sift_chain_distribution_slice(sift_chain *c, const sift_slice *slice,
                                          sift_token_prob *out, size_t capacity, size_t *n_out,
                                          sift_error *err)
{
    SIFT__CHAIN_SCRATCH_CALL(c, err, sift__distribution_slice(c, slice, out, capacity, n_out, err));
}

/* For the logprobs call (core/logprobs.c). */
sift_status sift__slice_load(sift_chain *c, const sift_slice *sl, int need_selector, sift__arr *a,
                             sift__bound *b, sift_error *err)
{
    return load_slice(c, sl, need_selector, a, b, err);
}

sift_status sift__slice_need_row(sift_chain *c, const sift_slice *sl, const sift__ctx *ctx,
                                 sift_error *err)
{
    return need_row(c, sl, ctx, err);
}

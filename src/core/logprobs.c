/*
 * logprobs.c - sampling with logprobs: sift_chain_sample_logprobs and
 * sift_chain_sample_slice_logprobs.
 *
 * One pass of the chain: the stages before the selector run once (the
 * row step's full pass, or the certificate walk on a slice), the set
 * they leave is kept in c->lp_set while the selector draws from it, and
 * the processed distribution is computed from the kept set as
 * sift_chain_distribution computes it from its own pass (the same
 * stages from the same RNG state: the same bits).
 *
 * Invariants:
 * - The token, the RNG and the state are sift_chain_sample's (or
 *   sift_chain_sample_slice's): the stages and the selector run on the
 *   same set from the same RNG state, and check mode continues from the
 *   RNG state the first draw left, as it does there.
 * - Nothing is written to the caller's sift_logprobs, and nothing of the
 *   chain changes, until every step that can fail has run.
 * - No allocation once c->lp_set is sized for the row (or slice) and
 *   n_top.
 */
#include <math.h>

#include "../sift_internal.h"
#include "simd.h"
#include "step.h"

#define LP_KNOWN (SIFT_LOGPROBS_RAW | SIFT_LOGPROBS_PROCESSED | SIFT_LOGPROBS_ROW_LSE)

static sift_status check_request(const sift_logprobs *lp, const int32_t *token, size_t limit,
                                 const char *limit_name, sift_error *err)
{
    if (!token)
        return sift__fail(err, SIFT_E_ARG, "token is NULL");
    if (!lp)
        return sift__fail(err, SIFT_E_ARG, "lp (the sift_logprobs request) is NULL");
    if (lp->struct_size != sizeof *lp)
        return sift__fail(err, SIFT_E_ARG,
                          "sift_logprobs.struct_size is %u; this library knows %zu",
                          (unsigned)lp->struct_size, sizeof *lp);
    if (lp->flags & ~LP_KNOWN)
        return sift__fail(err, SIFT_E_ARG, "sift_logprobs.flags has unknown bits 0x%x",
                          (unsigned)(lp->flags & ~LP_KNOWN));
    if (!(lp->flags & (SIFT_LOGPROBS_RAW | SIFT_LOGPROBS_PROCESSED)))
        return sift__fail(err, SIFT_E_ARG,
                          "sift_logprobs.flags asks for no logprobs (set SIFT_LOGPROBS_RAW "
                          "and/or SIFT_LOGPROBS_PROCESSED)");
    if (lp->n_top > limit)
        return sift__fail(err, SIFT_E_ARG, "sift_logprobs.n_top = %zu is above the %s (%zu)",
                          lp->n_top, limit_name, limit);
    if (lp->n_top > 0 && (lp->flags & SIFT_LOGPROBS_RAW) && !lp->raw_top)
        return sift__fail(err, SIFT_E_ARG,
                          "sift_logprobs.raw_top is NULL with SIFT_LOGPROBS_RAW and n_top = %zu",
                          lp->n_top);
    if (lp->n_top > 0 && (lp->flags & SIFT_LOGPROBS_PROCESSED) && !lp->processed_top)
        return sift__fail(err, SIFT_E_ARG,
                          "sift_logprobs.processed_top is NULL with SIFT_LOGPROBS_PROCESSED and "
                          "n_top = %zu",
                          lp->n_top);
    return SIFT_OK;
}

/* c->lp_set holds at least n candidates. */
static sift_status lp_reserve(sift_chain *c, size_t n, sift_error *err)
{
    if (n <= c->lp_cap)
        return SIFT_OK;
    const sift__alloc *al = sift__scratch_alloc(c);
    sift_candidate *b = sift__malloc(al, n, sizeof *b);
    if (!b)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while sizing a %zu-entry logprob set",
                          n);
    sift__free(al, c->lp_set);
    c->lp_set = b;
    c->lp_cap = n;
    return SIFT_OK;
}

/* The terms exp(x_i - m) of a block of LSE_BLOCK tokens (0 for -inf), in
 * double, by one branch-free loop the compiler may vectorize: t = x_i - m
 * exactly (clamped at -708: exp(-708) < 1e-307 changes no sum of at
 * least 1 a double holds), t = k ln 2 + r with |r| <= ln(2)/2 + a little,
 * exp(r) by Taylor to degree 12 (remainder below 3e-16 relative there),
 * times 2^k built from the bits of the rounding of t log2(e) (1.5 * 2^52
 * + k holds k in its low bits). About 1e-15 relative, as sift__exp. */
#define LSE_BLOCK 256
#define LSE_TERMS_BODY                                            \
    {                                                             \
        const double LOG2E = 1.44269504088896338700e+00;          \
        const double LN2_HI = 6.93147180369123816490e-01;         \
        const double LN2_LO = 1.90821492927058770002e-10;         \
        const double MAGIC = 6755399441055744.0; /* 1.5 * 2^52 */ \
        const double md = (double)m;                              \
        for (int i = 0; i < LSE_BLOCK; i++) {                     \
            double t = (double)x[i] - md;                         \
            t = t > -708.0 ? t : -708.0;                          \
            double kb = t * LOG2E + MAGIC;                        \
            double kd = kb - MAGIC;                               \
            double r = (t - kd * LN2_HI) - kd * LN2_LO;           \
            double p = 1.0 / 479001600.0;                         \
            p = p * r + 1.0 / 39916800.0;                         \
            p = p * r + 1.0 / 3628800.0;                          \
            p = p * r + 1.0 / 362880.0;                           \
            p = p * r + 1.0 / 40320.0;                            \
            p = p * r + 1.0 / 5040.0;                             \
            p = p * r + 1.0 / 720.0;                              \
            p = p * r + 1.0 / 120.0;                              \
            p = p * r + 1.0 / 24.0;                               \
            p = p * r + 1.0 / 6.0;                                \
            p = p * r + 0.5;                                      \
            p = p * r + 1.0;                                      \
            p = p * r + 1.0;                                      \
            union {                                               \
                double d;                                         \
                uint64_t u;                                       \
            } sc = {kb};                                          \
            sc.u = (sc.u + 1023u) << 52;                          \
            out[i] = x[i] > -INFINITY ? p * sc.d : 0.0;           \
        }                                                         \
    }
/* GCC vectorizes the loop once it may evaluate both sides of the
 * selects (no trapping math: the same IEEE results; no trap is enabled). */
#if defined(__GNUC__) && !defined(__clang__)
#define LSE_VECTORIZE \
    __attribute__((optimize("no-trapping-math", "tree-vectorize", "vect-cost-model=dynamic")))
#else
#define LSE_VECTORIZE
#endif
LSE_VECTORIZE static void lse_terms(const float *x, float m, double *out) LSE_TERMS_BODY
#if defined(__x86_64__) && !defined(SIFT_NO_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define LSE_AVX2 1
    /* The same loop in 256-bit vectors (no FMA: the same bits). */
    LSE_VECTORIZE
    __attribute__((target("avx2"))) static void lse_terms_avx2(const float *x, float m,
                                                               double *out) LSE_TERMS_BODY
#endif

    /* ln(sum exp(x_i)) over the finite entries of a valid row (no NaN, no
     * +inf, at least one finite) whose largest value is m: the terms of
     * lse_terms (the last block padded with -inf), summed in four
     * interleaved partial sums. */
    static double row_lse(const float *x, int32_t V, float m)
{
    float pad[LSE_BLOCK];
    double w[LSE_BLOCK], s[4] = {0.0, 0.0, 0.0, 0.0};
#ifdef LSE_AVX2
    const int avx2 = sift__simd()->level >= SIFT__SIMD_AVX2;
#endif
    for (int64_t i = 0; i < V; i += LSE_BLOCK) {
        const float *blk = x + i;
        if (V - i < LSE_BLOCK) {
            int32_t n = (int32_t)(V - i);
            memcpy(pad, blk, (size_t)n * sizeof *pad);
            for (int j = n; j < LSE_BLOCK; j++)
                pad[j] = -INFINITY;
            blk = pad;
        }
#ifdef LSE_AVX2
        if (avx2)
            lse_terms_avx2(blk, m, w);
        else
#endif
            lse_terms(blk, m, w);
        for (int j = 0; j < LSE_BLOCK; j += 4) {
            s[0] += w[j];
            s[1] += w[j + 1];
            s[2] += w[j + 2];
            s[3] += w[j + 3];
        }
    }
    return (double)m + sift__log((s[0] + s[1]) + (s[2] + s[3]));
}

static sift_logprob raw_entry(int32_t id, float logit, double lse)
{
    sift_logprob e;
    e.id = id;
    e.logit = logit;
    e.logprob = logit > -INFINITY ? (double)logit - lse : -INFINITY;
    e.p = sift__exp(e.logprob);
    return e;
}

/* What a step found, written to the caller's struct only at the end. */
typedef struct lp_step {
    sift__arr keep;               /* the set before the selector (in c->lp_set) */
    sift__ctx before;             /* the step's context before the selector ran */
    const sift_candidate *sorted; /* its first n_top tokens, canonical (ws.cand2) */
    size_t n_sorted, n_support;
    sift_candidate tok_cand; /* the sampled token in the support, if tok_found */
    int tok_found;
    float m;
    double Wd;
    const sift_candidate *raw_top; /* the raw top n, canonical */
    double lse;
    float tok_logit; /* the sampled token's raw logit */
} lp_step;

static sift_logprob processed_entry(const lp_step *st, const sift_candidate *x)
{
    sift_logprob e;
    e.id = x->id;
    e.logit = x->logit;
    e.p = (double)sift__weight(sift__expf(x->logit - st->m)) / st->Wd;
    e.logprob = e.p > 0.0 ? sift__log(e.p) : -INFINITY;
    return e;
}

static void write_result(sift_logprobs *lp, const lp_step *st, int32_t tok)
{
    size_t n = lp->n_top;
    if (lp->flags & SIFT_LOGPROBS_RAW) {
        for (size_t i = 0; i < n; i++)
            lp->raw_top[i] = raw_entry(st->raw_top[i].id, st->raw_top[i].logit, st->lse);
        lp->raw = raw_entry(tok, st->tok_logit, st->lse);
        lp->n_raw_top = n;
        lp->lse = st->lse;
    }
    if (lp->flags & SIFT_LOGPROBS_PROCESSED) {
        size_t k = st->n_sorted;
        for (size_t i = 0; i < k; i++)
            lp->processed_top[i] = processed_entry(st, &st->sorted[i]);
        /* The sampled token's entry: it is in the support unless check
         * mode made the step resample outside it. */
        sift_logprob e = {tok, -INFINITY, -INFINITY, 0.0};
        if (st->tok_found)
            e = processed_entry(st, &st->tok_cand);
        lp->processed = e;
        lp->n_processed_top = k;
        lp->n_support = st->n_support;
    }
}

/* Runs the selector on the set the stages before it left in `a` (ctx at
 * that point), keeping a copy of the set at `keep` (room for a->n) and
 * the context in *st for processed_support. *token is the selector's
 * draw; ctx->rng is advanced past it. */
static sift_status select_and_keep(sift_chain *c, sift__ctx *ctx, sift__arr *a, size_t end,
                                   sift_candidate *keep, int32_t *token, lp_step *st)
{
    st->keep = *a;
    st->before = *ctx;
    if (keep) {
        memcpy(keep, a->c, a->n * sizeof *a->c);
        st->keep.c = keep;
    }
    sift__stage *sel = c->stages[end];
    ctx->stage = end;
    sift_status s = sel->ops->apply(sel, ctx, a);
    if (s)
        return s;
    if (a->n == 0)
        return sift__fail_at(ctx->err, SIFT_E_NO_CANDIDATE, (int64_t)end,
                             "stage %zu (%s) removed the last candidate", end,
                             sift__stage_name(sel));
    if (ctx->selected < 0 || ctx->selected >= ctx->V)
        return sift__fail(ctx->err, SIFT_E_STATE, "selector %s did not select a token",
                          sift__stage_name(sel));
    *token = ctx->selected;
    return SIFT_OK;
}

/* The processed support of the kept set, as sift_chain_distribution
 * computes it from the same set (the context before the selector drew:
 * the selector's support, its largest logit and total weight, so the
 * same p for every token), but only its first `want` tokens in canonical
 * order (a selection, then a sort of those), into ws.cand2, and the
 * entry of token `tok`. Runs after check mode, which may use the
 * workspace. */
static sift_status processed_support(sift_chain *c, size_t end, lp_step *st, size_t want,
                                     int32_t tok)
{
    sift__ctx *ctx = &st->before;
    sift__arr *a = &st->keep;
    sift__stage *sel = c->stages[end];
    sift_status s;
    if (sel->ops->support) {
        ctx->stage = end;
        if ((s = sel->ops->support(sel, ctx, a)))
            return s;
    }
    float m = sift__max_logit(a->c, a->n);
    if (!(m > -INFINITY)) {
        if (ctx->banned_at < end)
            return sift__no_candidate_left(c, ctx);
        return sift__fail(ctx->err, SIFT_E_NO_CANDIDATE, "every candidate is -inf after stage %zu",
                          end ? end - 1 : 0);
    }
    if (sel->ops->is_greedy)
        sift__arr_keep_top(ctx, a, 1);
    st->m = m;
    st->Wd = sift__u128_to_double(sift__weights(a->c, a->n, m, c->ws.u64a));
    st->n_support = a->n;
    st->tok_found = 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->c[i].id == tok) {
            st->tok_cand = a->c[i];
            st->tok_found = 1;
            break;
        }
    size_t n = a->n, k = want < n ? want : n;
    sift_candidate *out = c->ws.cand2;
    if (k > 0 && k < n) {
        uint64_t cut = sift__cut_top(ctx, a->c, n, k);
        k = sift__keep_ge_into(a->c, n, cut, out);
    } else if (k > 0) {
        memcpy(out, a->c, n * sizeof *out);
    }
    sift__sort_canon(out, k, a->c);
    st->sorted = out;
    st->n_sorted = k;
    return SIFT_OK;
}

static void commit(sift_chain *c, sift__rng rng, int32_t V, int32_t tok, int32_t *token)
{
    c->rng = rng;
    c->last_V = V;
    c->settle_due = 1;
    *token = tok;
}

/* The whole-row step (the chain entered; the request checked). */
static sift_status logprobs_row(sift_chain *c, const float *logits, int32_t V, int32_t *token,
                                sift_logprobs *lp, sift_error *err)
{
    sift_status s;
    if (!logits)
        return sift__fail(err, SIFT_E_ARG, "logits is NULL");
    if ((s = sift__step_check(c, V, 1, err)))
        return s;
    size_t need = sift__row_ws_need(c, V), n_top = lp->n_top;
    if ((s = sift__ws_reserve(&c->ws, &c->al, need, err)) || (s = lp_reserve(c, n_top + need, err)))
        return s;
    const int raw = (lp->flags & SIFT_LOGPROBS_RAW) != 0;
    const int processed = (lp->flags & SIFT_LOGPROBS_PROCESSED) != 0;
    lp_step st = {0};
    /* The row's top n first, into c->lp_set[0, n_top) (the kept set goes
     * after it); it checks the row as loading it does. */
    if (raw && n_top > 0) {
        sift__ctx tctx;
        sift__ctx_init(c, &tctx, V, err);
        if ((s = sift__row_prefix(&tctx, logits, V, n_top, c->lp_set)))
            return s;
    }
    /* The raw log-sum-exp before anything samples: check mode may ban
     * refused tokens in place when `logits` is the chain's own row
     * buffer (a slice that fetched the row). */
    if (raw)
        st.lse = row_lse(logits, V, sift__simd()->max_f32(logits, (size_t)V));
    if (!processed) {
        /* Raw only: the step is sift_chain_sample's own (its prefix fast
         * path included), and what follows it cannot fail. */
        int32_t tok = -1;
        if ((s = sift__sample_row(c, logits, V, &tok, 1, err)))
            return s;
        st.raw_top = c->lp_set;
        st.tok_logit = logits[tok];
        write_result(lp, &st, tok);
        *token = tok;
        return SIFT_OK;
    }
    sift__arr a;
    if ((s = sift__row_load(c, logits, V, &a, err)))
        return s;
    sift__ctx ctx;
    sift__ctx_init(c, &ctx, V, err);
    size_t end = c->n_stages - 1;
    c->n_full_passes++;
    if ((s = sift__row_run_stages(c, &ctx, &a, end, logits)))
        return s;
    int32_t tok = -1;
    if ((s = select_and_keep(c, &ctx, &a, end, c->lp_set + n_top, &tok, &st)))
        return s;
    sift__rng rng = ctx.rng;
    int resampled;
    if ((s = sift__check_mode(c, logits, NULL, V, &rng, &tok, &resampled, err)) ||
        (s = processed_support(c, end, &st, lp->n_top, tok)))
        return s;
    if (raw) {
        st.raw_top = c->lp_set;
        st.tok_logit = logits[tok];
    }
    write_result(lp, &st, tok);
    commit(c, rng, V, tok, token);
    return SIFT_OK;
}

/* The logit a slice gives `id`, or the row's (the hook fetched it for a
 * check-mode resample) when the slice does not hold it. */
static float slice_logit(const sift_chain *c, const sift_slice *sl, int32_t id)
{
    for (int32_t i = 0; i < sl->n_prefix; i++)
        if (sl->prefix[i].id == id)
            return sl->prefix[i].logit;
    for (int32_t i = 0; i < sl->n_extras; i++)
        if (sl->extras[i].id == id)
            return sl->extras[i].logit;
    return c->row ? c->row[id] : -INFINITY;
}

static sift_status logprobs_slice(sift_chain *c, const sift_slice *sl, int32_t *token,
                                  sift_logprobs *lp, sift_error *err)
{
    sift_status s;
    const int raw = (lp->flags & SIFT_LOGPROBS_RAW) != 0;
    const int processed = (lp->flags & SIFT_LOGPROBS_PROCESSED) != 0;
    const int has_lse = (lp->flags & SIFT_LOGPROBS_ROW_LSE) != 0;
    if (has_lse && !(lp->row_lse > -INFINITY && lp->row_lse < INFINITY))
        return sift__fail(err, SIFT_E_ARG, "sift_logprobs.row_lse is %g; it must be finite",
                          lp->row_lse);
    sift__arr a;
    sift__bound b;
    if ((s = sift__slice_load(c, sl, 1, &a, &b, err)))
        return s;
    int32_t V = sl->n_vocab;
    const sift_candidate *pre = c->ws.cand;
    size_t k = (size_t)sl->n_prefix;
    if (has_lse) {
        /* ln(sum exp(l_i)) >= the largest logit, and <= it + ln(V). */
        double m = (double)pre[0].logit;
        double hi = m + sift__log((double)V) + 1e-6;
        if (!(lp->row_lse >= m && lp->row_lse <= hi))
            return sift__fail(err, SIFT_E_ARG,
                              "sift_logprobs.row_lse is %.17g; the slice's largest logit %.9g "
                              "puts it in [%.17g, %.17g]",
                              lp->row_lse, m, m, hi);
    }
    if (lp->n_top > k)
        return sift__fail(err, SIFT_E_ARG,
                          "sift_logprobs.n_top = %zu is above the slice's n_prefix (%zu)",
                          lp->n_top, k);
    sift__ctx ctx;
    sift__ctx_init(c, &ctx, V, err);
    /* Raw values need the row's log-sum-exp, and n_top certain ids: a
     * device set's absent tokens may tie its smallest logit. */
    int decided = !raw || (has_lse && (lp->n_top == 0 || (sl->flags & SIFT_SLICE_CANONICAL) ||
                                       pre[lp->n_top - 1].logit > pre[k - 1].logit));
    /* The walk keeps its sets in the workspace: at most ws.cap tokens. */
    size_t n_top = lp->n_top;
    if ((s = lp_reserve(c, n_top + c->ws.cap, err)))
        return s;
    /* The raw top n in c->lp_set[0, n_top), the kept set after it. */
    if (decided && raw && n_top > 0)
        memcpy(c->lp_set, pre, n_top * sizeof *pre);
    lp_step st = {0};
    int32_t tok = -1;
    size_t end = c->n_stages - 1;
    if (decided && processed) {
        /* The set before the selector, exactly (the walk of
         * sift_chain_distribution_slice), then the selector's draw. */
        int w = sift__walk(c, &ctx, &a, end, &b, &s);
        decided = w == SIFT__WALK_DECIDED;
        if (decided && s)
            return s;
        if (w == SIFT__WALK_RAN && c->stages[end]->ops->is_greedy && a.n > 0) {
            sift__arr_canon(&ctx, &a);
            if (sift__bound_ahead(&b, &a.c[0])) {
                a.n = 1;
                decided = 1;
            }
        }
        if (decided && (s = select_and_keep(c, &ctx, &a, end, c->lp_set + n_top, &tok, &st)))
            return s;
    } else if (decided) {
        /* Raw only: the walk of sift_chain_sample_slice. */
        decided = sift__walk(c, &ctx, &a, c->n_stages, &b, &s) == SIFT__WALK_DECIDED;
        if (decided && s)
            return s;
        if (decided && (ctx.selected < 0 || ctx.selected >= V))
            return sift__fail(err, SIFT_E_STATE, "selector %s did not select a token",
                              sift__stage_name(c->stages[end]));
        tok = ctx.selected;
    }
    if (!decided) {
        if (!c->hook)
            return sift__slice_need_row(c, sl, &ctx, err);
        if ((s = sift__slice_fetch_row(c, sl, err)))
            return s;
        return logprobs_row(c, c->row, V, token, lp, err);
    }
    sift__rng rng = ctx.rng;
    int resampled;
    if ((s = sift__check_mode(c, NULL, sl, V, &rng, &tok, &resampled, err)) ||
        (processed && (s = processed_support(c, end, &st, lp->n_top, tok))))
        return s;
    if (raw) {
        st.raw_top = c->lp_set;
        st.lse = lp->row_lse;
        st.tok_logit = slice_logit(c, sl, tok);
    }
    write_result(lp, &st, tok);
    if (!resampled)
        c->n_slice_decided++;
    commit(c, rng, V, tok, token);
    return SIFT_OK;
}

static sift_status sample_logprobs(sift_chain *c, const float *logits, int32_t V, int32_t *token,
                                   sift_logprobs *lp, sift_error *err)
{
    sift_status s = check_request(lp, token, V > 0 ? (size_t)V : 0, "row length", err);
    return s ? s : logprobs_row(c, logits, V, token, lp, err);
}

static sift_status sample_slice_logprobs(sift_chain *c, const sift_slice *sl, int32_t *token,
                                         sift_logprobs *lp, sift_error *err)
{
    if (!sl)
        return sift__fail(err, SIFT_E_ARG, "slice is NULL");
    sift_status s =
        check_request(lp, token, sl->n_vocab > 0 ? (size_t)sl->n_vocab : 0, "row length", err);
    if (s)
        return s;
    sift__xc_step before;
    sift__cross_check_begin(c, token, &before);
    s = logprobs_slice(c, sl, token, lp, err);
    return sift__cross_check_end(c, &before, sl, token, s, err);
}

sift_status sift_chain_sample_logprobs(sift_chain *c, const float *logits, int32_t V,
                                       int32_t *token, sift_logprobs *lp, sift_error *err)
{
    SIFT__CHAIN_SCRATCH_CALL(c, err, sample_logprobs(c, logits, V, token, lp, err));
}

sift_status sift_chain_sample_slice_logprobs(sift_chain *c, const sift_slice *slice, int32_t *token,
                                             sift_logprobs *lp, sift_error *err)
{
    SIFT__CHAIN_SCRATCH_CALL(c, err, sample_slice_logprobs(c, slice, token, lp, err));
}

/*
 * mirostat.c - the mirostat v1 and v2 selectors.
 *
 * Both keep a running target mu (double, 2 tau at creation and reset),
 * truncate the candidates with it, draw from what is left, and move mu
 * towards the target surprise tau once the token is accepted. Weights are
 * sift's exact ones: m the largest logit, w_i = trunc(expf(l_i - m) * 2^62),
 * W = sum w_i as a 128-bit integer.
 *
 * v1 (n_vocab, tau, eta, m): over the canonical first M = min(m, n)
 * candidates, the P consecutive pairs (i, i+1) with both logits finite
 * (a prefix, as -inf sorts last) give, summed in pair order in double,
 *   t_i = log((i + 2) / (i + 1)),  b_i = (double)(l_i - l_{i+1})  (float -)
 *   s_hat = sum t_i b_i / sum t_i^2            (0 if P == 0)
 *   eps = s_hat - 1
 *   k = pow(eps * pow(2, mu) / (1 - pow(n_vocab, -eps)), 1 / s_hat)
 * (b_i is log(p_i / p_{i+1}) computed from the logits, as the softmax
 * ratio of two tokens is exp of their logit difference). k NaN or < 1
 * gives 1, k > n gives n, and the stage keeps the canonical top (size_t)k.
 * v2 (tau, eta): with thr = exp(-mu ln 2), keeps the tokens with
 * (double)w_i / (double)W >= thr (a canonical prefix, as w is monotone in
 * the logit), or the canonical first one if none qualifies.
 *
 * Then, over the kept set, one 64-bit RNG output U gives the target
 * T = floor(W' * U / 2^64) and the selected token is the first, in
 * canonical order, whose inclusive prefix weight exceeds T (as dist); a
 * single kept token is selected without a draw. The surprise of the
 * selection, -log((double)w_sel / (double)W') / ln 2, is recorded with the
 * token as a pending record; accept(token) moves
 *   mu <- mu - eta * (surprise - tau)
 * only if `token` is the pending token, and clears the record either way.
 * The record is written only by a successful apply (the selector is the
 * last stage, so nothing after it can fail); it is scratch, not state.
 *
 * Reference behaviour: llama.cpp updates mu inside apply, so a rejected or
 * re-sampled draw moves mu too; sift keeps sample free of state changes
 * and updates mu on accept of the sampled token. llama.cpp estimates s_hat
 * from float probabilities and uses float powf; sift uses the logit
 * differences and double arithmetic of its own pow/log. Its v1 clone
 * writes into the source; sift's clone is a plain copy (mu and the
 * pending record included). llama.cpp masks nothing here either: it
 * shrinks the array, as sift does.
 * Capability class: WHOLE (both read the whole distribution). Selectors.
 * On a slice both are certified (miro_certify_mass): v1 from the top
 * tokens alone, v2 with the absent tokens' mass bound.
 */
#include <math.h>

#include "../core/kernels.h"
#include "../sift_internal.h"
#include "registry.h"

/* The descriptors (end of the file): the constructors check their
 * arguments against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_mirostat;
extern const sift__sampler_desc sift__desc_mirostat_v2;

#define LN2 0.6931471805599453

typedef struct miro_stage {
    sift__stage base;
    int v2;
    int32_t n_vocab; /* v1 */
    int32_t m;       /* v1 */
    float tau;
    float eta;
    double mu;
    int has_pending;
    int32_t pending_token;
    double pending_surprise;
} miro_stage;

/* ------------------------------------------------------------------ */
/* v1: the Zipf estimate                                               */
/* ------------------------------------------------------------------ */

/* Heap sort of c[0..n) into canonical order, in place: the top M of v1
 * is copied out and sorted without scratch (M is the user's m, small in
 * practice; this stays O(M log M) if it is not). */
static void sift_down(sift_candidate *c, size_t i, size_t n)
{
    for (;;) {
        size_t l = 2 * i + 1, big = i;
        /* max-heap on "comes later canonically", so the root goes last */
        if (l < n && sift__canon_before(&c[big], &c[l]))
            big = l;
        if (l + 1 < n && sift__canon_before(&c[big], &c[l + 1]))
            big = l + 1;
        if (big == i)
            return;
        sift_candidate t = c[i];
        c[i] = c[big];
        c[big] = t;
        i = big;
    }
}

static void heap_sort_canon(sift_candidate *c, size_t n)
{
    if (n < 2)
        return;
    for (size_t i = n / 2; i-- > 0;)
        sift_down(c, i, n);
    for (size_t e = n - 1; e > 0; e--) {
        sift_candidate t = c[0];
        c[0] = c[e];
        c[e] = t;
        sift_down(c, 0, e);
    }
}

/* The number of tokens v1 keeps, in [1, a->n]. */
static size_t v1_k(const miro_stage *s, sift__ctx *ctx, const sift__arr *a)
{
    size_t M = (size_t)s->m < a->n ? (size_t)s->m : a->n;
    const sift_candidate *top;
    if (a->order == SIFT__ORDER_CANON) {
        top = a->c;
    } else {
        sift_candidate *t = ctx->ws->cand2;
        uint64_t cut = sift__cut_top(ctx, a->c, a->n, M);
        size_t j = sift__keep_ge_into(a->c, a->n, cut, t);
        heap_sort_canon(t, j);
        top = t;
    }
    double sum_tb = 0.0, sum_t2 = 0.0;
    for (size_t i = 0; i + 1 < M && top[i + 1].logit > -INFINITY; i++) {
        double ti = sift__log(((double)i + 2.0) / ((double)i + 1.0));
        double bi = (double)(top[i].logit - top[i + 1].logit);
        sum_tb += ti * bi;
        sum_t2 += ti * ti;
    }
    double s_hat = sum_t2 == 0.0 ? 0.0 : sum_tb / sum_t2;
    double eps = s_hat - 1.0;
    double k = sift__pow(eps * sift__pow(2.0, s->mu) / (1.0 - sift__pow((double)s->n_vocab, -eps)),
                         1.0 / s_hat);
    if (k != k || k < 1.0)
        k = 1.0;
    if (k > (double)a->n)
        return a->n;
    return (size_t)k;
}

/* ------------------------------------------------------------------ */
/* Truncation shared by apply and support                              */
/* ------------------------------------------------------------------ */

/* Reduces `a` to the set the selector draws from, with the weights of
 * that set in ws->u64a (aligned with a->c) and their sum in *W. */
static sift_status miro_truncate(miro_stage *s, sift__ctx *ctx, sift__arr *a, sift__u128 *W)
{
    float m = sift__max_logit(a->c, a->n);
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, s->base.ops->name);
    uint64_t *w = ctx->ws->u64a;
    if (!s->v2) {
        sift__arr_keep_top(ctx, a, v1_k(s, ctx, a));
        *W = sift__weights(a->c, a->n, m, w);
        return SIFT_OK;
    }
    sift__u128 all = sift__weights(a->c, a->n, m, w);
    /* On a slice, plus the absent mass's lower end that the certificate
     * used (0 elsewhere): the cut it certified. */
    double Wd = sift__u128_to_double(sift__u128_add(all, ctx->absent_lo));
    double thr = sift__exp(-s->mu * LN2);
    /* The test (double)w / Wd >= thr is monotone in w (the conversion and
     * the correctly rounded division by Wd > 0 never decrease), so it
     * holds exactly for w >= ws, the least weight that passes it (2^62 +
     * 1, above every weight, when none does): found by bisection with the
     * test itself, it turns a division per token into an integer compare,
     * with the same verdict for every token. */
    uint64_t lo = 0, hi = ((uint64_t)1 << 62) + 1; /* ws in [lo, hi] */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((double)mid / Wd >= thr)
            hi = mid;
        else
            lo = mid + 1;
    }
    const uint64_t ws = lo;
    /* Every candidate with w >= ws is kept, with its weight; ws <= 2^62,
     * the weight of the largest logit (m), keeps at least that one.
     * Otherwise nothing is looked at (the row's canonical first token is
     * taken below). */
    size_t j = 0;
    sift__u128 kept = {0, 0};
    if (ws <= (uint64_t)1 << 62)
        j = sift__keep_w_ge(a->c, w, a->n, ws, &kept);
    if (j == 0) {
        /* nothing is likely enough: the canonical first token alone */
        size_t bi = sift__canon_first(a->c, a->n, m, a->order != SIFT__ORDER_NONE);
        a->c[0] = a->c[bi];
        w[0] = w[bi];
        kept = sift__u128_from(w[0]);
        j = 1;
    }
    if (j != a->n)
        a->dense = 0;
    a->n = j;
    *W = kept;
    return SIFT_OK;
}

static sift_status miro_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    miro_stage *s = (miro_stage *)st;
    sift__u128 W;
    sift_status r = miro_truncate(s, ctx, a, &W);
    if (r)
        return r;
    const uint64_t *w = ctx->ws->u64a;
    size_t sel = 0;
    if (a->n > 1) {
        sift__u128 T = sift__u128_scale_u64(W, sift__rng_next(&ctx->rng));
        uint64_t cut;
        sift__mass_prefix(ctx, a->c, w, a->n, T, 1, &cut);
        /* cut is the key of a kept candidate: its id is found */
        sel = sift__find_id(a->c, a->n, sift__ckey_id(cut));
    }
    ctx->selected = a->c[sel].id;
    s->has_pending = 1;
    s->pending_token = a->c[sel].id;
    s->pending_surprise = -sift__log((double)w[sel] / sift__u128_to_double(W)) / LN2;
    return SIFT_OK;
}

static sift_status miro_support(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    sift__u128 W;
    return miro_truncate((miro_stage *)st, ctx, a, &W);
}

static void miro_accept(sift__stage *st, int32_t token)
{
    miro_stage *s = (miro_stage *)st;
    if (s->has_pending && token == s->pending_token)
        s->mu = s->mu - (double)s->eta * (s->pending_surprise - (double)s->tau);
    s->has_pending = 0;
}

static void miro_reset(sift__stage *st)
{
    miro_stage *s = (miro_stage *)st;
    s->mu = 2.0 * (double)s->tau;
    s->has_pending = 0;
    s->pending_token = 0;
    s->pending_surprise = 0.0;
}

static uint64_t miro_digest(const sift__stage *st, uint64_t h)
{
    const miro_stage *s = (const miro_stage *)st;
    h = sift__fnv(h, &s->mu, sizeof s->mu);
    h = sift__fnv(h, &s->has_pending, sizeof s->has_pending);
    if (s->has_pending) {
        h = sift__fnv(h, &s->pending_token, sizeof s->pending_token);
        h = sift__fnv(h, &s->pending_surprise, sizeof s->pending_surprise);
    }
    return h;
}

static sift_class miro_cls(const sift__stage *st, int64_t *n)
{
    (void)st;
    *n = 0;
    return SIFT_CLASS_WHOLE;
}

/* On a slice (present tokens canonical, absent ones bounded by b;
 * docs/analyzer.md, "Tail mass"). The present maximum must not be below
 * the bound, so it is the row's and the present weights are the row's.
 * v1: the estimate reads the canonical first M = min(m, n) logits, which
 * must all be present and ahead of the bound (then M is the same on the
 * row, whose n is larger); its k, clamped to the slice's count, must be
 * below that count (else the row's clamp could differ) and its first k
 * tokens ahead of the bound: the row keeps the same k, and no mass is
 * needed. v2: (double)w / (double)W is non-increasing in W (both
 * conversions and the division round monotonically), so with W in
 * [W_lo, W_hi] a present token passing at W_hi passes everywhere; equal
 * counts at both ends fix the kept set, and the bound's weight (the
 * largest absent one) failing at W_lo keeps every absent token out; the
 * passing tokens outweigh every absent one, so they are ahead of it. If
 * none passes, the row keeps its canonical first token, which must be
 * ahead. The kept set is then complete, and the draw, the selection and
 * the surprise over it are the row's. W_lo is the present mass plus the
 * absent mass's lower end (sift__tail_absent_mass_lo, 0 without one),
 * W_hi the present mass plus its upper end; the apply cuts at W_lo too
 * (ctx->absent_lo), where the certified cut is. */
static int miro_certify_mass(const sift__stage *st, sift__ctx *ctx, const sift__arr *a,
                             const sift__bound *b)
{
    const miro_stage *s = (const miro_stage *)st;
    if (a->n == 0 || a->order != SIFT__ORDER_CANON || !(a->c[0].logit > -INFINITY) ||
        a->c[0].logit < b->logit || b->n_absent == 0)
        return 0;
    if (!s->v2) {
        size_t M = (size_t)s->m;
        if (M > a->n || !sift__bound_ahead(b, &a->c[M - 1]))
            return 0;
        size_t k = v1_k(s, ctx, a);
        return k < a->n && sift__bound_ahead(b, &a->c[k - 1]);
    }
    float m = a->c[0].logit;
    uint64_t *w = ctx->ws->u64a;
    sift__u128 A_lo, W_lo, W_hi;
    if (!sift__tail_mass_range(b, m, sift__weights(a->c, a->n, m, w), &A_lo, &W_lo, &W_hi))
        return 0;
    double Wd_lo = sift__u128_to_double(W_lo), Wd_hi = sift__u128_to_double(W_hi);
    double thr = sift__exp(-s->mu * LN2);
    double wb = (double)sift__weight(sift__expf(b->logit - m));
    if (!(wb / Wd_lo < thr))
        return 0;
    size_t pass_lo = 0, pass_hi = 0;
    for (size_t i = 0; i < a->n; i++) {
        pass_lo += (double)w[i] / Wd_lo >= thr;
        pass_hi += (double)w[i] / Wd_hi >= thr;
    }
    if (pass_lo != pass_hi || !(pass_lo > 0 || sift__bound_ahead(b, &a->c[0])))
        return 0;
    ctx->absent_lo = A_lo;
    return 1;
}

static const sift__stage_ops miro_v1_ops = {
    .name = "mirostat",
    .apply = miro_apply,
    .support = miro_support,
    .is_selector = 1,
    .cls = miro_cls,
    .certify_mass = miro_certify_mass,
    .accept = miro_accept,
    .reset = miro_reset,
    .digest = miro_digest,
};

static const sift__stage_ops miro_v2_ops = {
    .name = "mirostat_v2",
    .apply = miro_apply,
    .support = miro_support,
    .is_selector = 1,
    .cls = miro_cls,
    .certify_mass = miro_certify_mass,
    .accept = miro_accept,
    .reset = miro_reset,
    .digest = miro_digest,
};

static sift_status add(sift_chain *chain, const sift__stage_ops *ops, int v2, int32_t n_vocab,
                       float tau, float eta, int32_t m, sift_error *err)
{
    miro_stage *s = (miro_stage *)sift__stage_alloc(sift__chain_alloc(chain), ops, sizeof *s);
    if (!s)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding %s", ops->name);
    s->v2 = v2;
    s->n_vocab = n_vocab;
    s->m = m;
    s->tau = tau;
    s->eta = eta;
    miro_reset(&s->base);
    return sift__chain_push(chain, &s->base, err);
}

sift_status sift_chain_add_mirostat(sift_chain *chain, int32_t n_vocab, float tau, float eta,
                                    int32_t m, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_mirostat, "tau", tau, err)) ||
        (s = sift__param_check(&sift__desc_mirostat, "eta", eta, err)) ||
        (s = sift__param_check(&sift__desc_mirostat, "m", m, err)))
        return s;
    if (n_vocab < 1)
        return sift__fail(err, SIFT_E_ARG, "mirostat: n_vocab must be >= 1, got %d", (int)n_vocab);
    return add(chain, &miro_v1_ops, 0, n_vocab, tau, eta, m, err);
}

sift_status sift_chain_add_mirostat_v2(sift_chain *chain, float tau, float eta, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_mirostat_v2, "tau", tau, err)) ||
        (s = sift__param_check(&sift__desc_mirostat_v2, "eta", eta, err)))
        return s;
    return add(chain, &miro_v2_ops, 1, 0, tau, eta, 1, err);
}

/* ------------------------------------------------------------------ */
/* Descriptors                                                         */
/* ------------------------------------------------------------------ */

typedef struct miro_rec {
    float tau, eta;
    int32_t m;
} miro_rec;

static const sift__param miro_params[] = {
    {.name = "tau",
     .doc = "target surprise in bits, >= 0",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_GE,
     .lo = 0,
     .def = 5,
     .off = offsetof(miro_rec, tau),
     .flat_key = "mirostat_tau",
     .flat_def = 5},
    {.name = "eta",
     .doc = "learning rate, >= 0",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_GE,
     .lo = 0,
     .def = 0.1,
     .off = offsetof(miro_rec, eta),
     .flat_key = "mirostat_eta",
     .flat_def = 0.1},
    {.name = "m",
     .doc = "tokens used to estimate the Zipf exponent, >= 1",
     .type = SIFT__PT_INT,
     .range = SIFT__R_IN,
     .lo = 1,
     .hi = INT32_MAX,
     .def = 100,
     .off = offsetof(miro_rec, m),
     .flat_def = 100},
};

static sift_status miro_build(sift_chain *c, const void *rec, const sift__build_env *env,
                              sift_error *err)
{
    const miro_rec *r = rec;
    int32_t nv = env->n_vocab ? env->n_vocab : (env->vocab ? sift_vocab_size(env->vocab) : 0);
    if (nv < 1)
        return env->fail(env, err, SIFT_E_ARG, "mirostat needs the vocabulary size (vocab_size)");
    return sift_chain_add_mirostat(c, nv, r->tau, r->eta, r->m, err);
}

static sift_status miro2_build(sift_chain *c, const void *rec, const sift__build_env *env,
                               sift_error *err)
{
    const miro_rec *r = rec;
    (void)env;
    return sift_chain_add_mirostat_v2(c, r->tau, r->eta, err);
}

const sift__sampler_desc sift__desc_mirostat = {
    .name = "mirostat",
    .summary = "Mirostat 1.0: draws at a target surprise (needs the vocabulary size)",
    .params = miro_params,
    .n_params = sizeof miro_params / sizeof miro_params[0],
    .rec_size = sizeof(miro_rec),
    .main = "tau",
    .bare_ok = 1,
    .selector = 1,
    .needs_vocab_size = 1,
    .build = miro_build,
};

const sift__sampler_desc sift__desc_mirostat_v2 = {
    .name = "mirostat_v2",
    .summary = "Mirostat 2.0: draws at a target surprise",
    .params = miro_params,
    .n_params = 2, /* tau and eta: v2 has no m */
    .rec_size = sizeof(miro_rec),
    .main = "tau",
    .bare_ok = 1,
    .selector = 1,
    .build = miro2_build,
};

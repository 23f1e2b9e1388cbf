/*
 * top_n_sigma.c - keep the tokens within n standard deviations of the top.
 *
 * Formula (docs/samplers.md, "top_n_sigma"), for n > 0 and at least two
 * candidates: over the finite candidates only (logit != -inf), c of them,
 * x_i = (double)l_i taken in ascending id order,
 *   mean  = dsum(x) / c
 *   var   = dsum((x_i - mean) * (x_i - mean)) / c      (population)
 *   sigma = sqrt(var)
 *   thr   = (double)max - (double)n * sigma
 * and the stage keeps the candidates with (double)l >= thr, which removes
 * every -inf token. dsum is sift__dsum_idorder (eight lanes, fixed
 * combination), so the result depends only on the candidate set. All
 * logits equal gives sigma = 0 and keeps every finite token. A single
 * candidate is left alone; every candidate -inf is SIFT_E_NO_CANDIDATE.
 * Doubles hold every float square and sum without overflow, so no row of
 * finite logits can give NaN here.
 *
 * How: the definition's sums are eight chains of dependent adds, bound by
 * their latency. The apply first takes one pass of moments in any order
 * (core/kernels.c) and an interval that provably holds the definition's
 * sum of squared deviations (sift__tns_bounds); when the thresholds at
 * its two ends give every float logit the same verdict, that is the
 * definition's kept set. Otherwise (a row of one value, a mean far above
 * the spread, a threshold within rounding of a float) the definition's
 * sums run as written. First in a full pass, the stage does not wait for
 * the row to be loaded whole (tns_apply_row): the moments come from the
 * row itself and the kept tokens from one filtering load of it
 * (sift__load_above).
 *
 * Reference behaviour: llama.cpp computes the mean and the variance in
 * float (squares through double pow) in array order and masks the
 * removed tokens to -inf keeping the size; sift sums in double in id
 * order and removes them. n <= 0 is a no-op in both (llama.cpp PR 13345).
 * Capability class: IDENTITY for n <= 0, else WHOLE (sigma reads every
 * finite logit).
 */
#include <math.h>
#include <string.h>

#include "../core/kernels.h"
#include "../core/simd.h"
#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_top_n_sigma;

typedef struct tns_stage {
    sift__stage base;
    float n;
} tns_stage;

/* Lanes of sift__dsum_idorder: the finite candidates' j-th value goes to
 * lane j mod 8, the lanes are combined as it combines them. */
static double lanes_sum(const double s[8])
{
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Outward roundings: a bound of the real value that a double
 * computation of a few correctly rounded operations gave as x. */
static double up(double x)
{
    return x + fabs(x) * 0x1p-50 + 0x1p-1060;
}

static double dn(double x)
{
    return x - fabs(x) * 0x1p-50 - 0x1p-1060;
}

/* The smallest float f with (double)f >= t: the verdict (double)l >= t of
 * every float l is l >= ceil_float(t). */
static float ceil_float(double t)
{
    float f = (float)t;
    return (double)f < t ? nextafterf(f, INFINITY) : f;
}

/* The certified threshold (docs/samplers.md, "top_n_sigma's certified
 * threshold"). sift__tns_bounds gives the interval of the definition's
 * sum of squared deviations, sift__tns_threshold the decision. u =
 * 2^-53, c the finite count, N = n_terms + 8 the most additions a term
 * passes through in the kernel's sums and in the definition's (eight
 * lanes of at most ceil(c / 8) terms, three levels to combine them), g =
 * N u / (1 - N u). With P = sum x^2 and S = sum x (real), A = sum |x| <=
 * sqrt(c P):
 *  - the kernel: sumsq in P [(1 - u)(1 - g), (1 + u)(1 + g)] (positive
 *    terms, each square rounded once, or added exactly by a fused
 *    multiply-add, which leaves only the g), |sum - S| <= g A;
 *  - Q = sum (x - xbar)^2 = P - S^2 / c exactly, bounded from those;
 *  - the definition's mean is S1 / c rounded, |S1 - S| <= g A, so it is
 *    within D = (g + 2u) A / c of xbar, and sum (x - mean)^2 = Q +
 *    c (xbar - mean)^2 lies in [Q, Q + c D^2]; each of its terms rounds
 *    twice and is squared ((1 +- u)^3) and their sum is within g of it;
 *  - var = fl(S2 / c), sigma = sqrt(var) and thr = fl(m - fl(n sigma))
 *    are monotone in S2, so the definition's thr lies between the same
 *    expressions evaluated at the two ends of S2's interval.
 * If those two thresholds have the same ceil_float, every float logit
 * gets the same verdict from each threshold between them. */
int sift__tns_bounds(const sift__moments *mo, size_t n_terms, double *s2_lo, double *s2_hi)
{
    const double u = 0x1p-53;
    double c = (double)mo->count, N = (double)n_terms + 8.0;
    if (mo->count < 2 || !(mo->max > -INFINITY) || N * u > 0x1p-20)
        return 0;
    double g = up(N * u / (1.0 - N * u));
    double P_lo = dn(mo->sumsq / ((1.0 + u) * (1.0 + g)));
    double P_hi = up(mo->sumsq / ((1.0 - u) * (1.0 - g)));
    double A = up(sqrt(up(c * P_hi)));
    double gA = up(g * A);
    double S_lo = dn(mo->sum - gA), S_hi = up(mo->sum + gA);
    double sq_lo = dn(S_lo * S_lo), sq_hi = up(S_hi * S_hi);
    double S2_max = up(sq_lo > sq_hi ? sq_lo : sq_hi);
    double S2_min = S_lo <= 0.0 && S_hi >= 0.0 ? 0.0 : dn(sq_lo < sq_hi ? sq_lo : sq_hi);
    double Q_lo = dn(P_lo - up(S2_max / c)), Q_hi = up(P_hi - dn(S2_min / c));
    if (Q_lo < 0.0)
        Q_lo = 0.0;
    double D = up(up((g + 2.0 * u) * A) / c);
    double V_lo = dn(Q_lo * ((1.0 - 3.0 * u) * (1.0 - g)));
    double V_hi = up(up(Q_hi + up(c * up(D * D))) * ((1.0 + 4.0 * u) * (1.0 + g)));
    if (!(V_hi < INFINITY))
        return 0;
    *s2_lo = V_lo;
    *s2_hi = V_hi;
    return 1;
}

int sift__tns_threshold(const sift__moments *mo, size_t n_terms, float n, double *thr)
{
    double V_lo, V_hi, c = (double)mo->count;
    if (!(n > 0.0f) || !sift__tns_bounds(mo, n_terms, &V_lo, &V_hi))
        return 0;
    /* the definition's own operations, at both ends */
    double t_lo = (double)mo->max - (double)n * sift__sqrt(V_hi / c);
    double t_hi = (double)mo->max - (double)n * sift__sqrt(V_lo / c);
    float f_lo = ceil_float(t_lo), f_hi = ceil_float(t_hi);
    if (memcmp(&f_lo, &f_hi, sizeof f_lo) != 0)
        return 0;
    *thr = t_hi;
    return 1;
}

static sift_status tns_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const tns_stage *s = (const tns_stage *)st;
    if (!(s->n > 0.0f) || a->n <= 1)
        return SIFT_OK;
    /* The certified threshold from one pass of moments in any order;
     * the definition's sums (two passes of eight dependent chains) only
     * when it cannot tell. Either way the kept set is the definition's. */
    sift__moments mo;
    sift__moments_of(a->c, a->n, &mo);
    double thr;
    if (sift__tns_threshold(&mo, a->n, s->n, &thr)) {
        size_t j = sift__keep_logit_ge(a->c, a->n, thr);
        if (j != a->n)
            a->dense = 0;
        a->n = j;
        return SIFT_OK;
    }
    ctx->tns_exact++;
    sift__arr_idorder(ctx, a);
    /* dsum over the finite logits, then over the squared deviations, each
     * summed straight into the eight lanes of sift__dsum_idorder while
     * the candidates are read (no array of doubles, two passes instead
     * of four): the same terms in the same lanes in the same order, so
     * the sums are the definition's bit for bit. */
    double s1[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s2[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float m, m2;
    size_t c, c2;
    sift__lane_sums(a->c, a->n, NULL, s1, &c, &m); /* core/kernels.c */
    if (c == 0)
        return sift__no_candidate(ctx, st->ops->name);
    double mean = lanes_sum(s1) / (double)c;
    sift__lane_sums(a->c, a->n, &mean, s2, &c2, &m2);
    double var = lanes_sum(s2) / (double)c;
    thr = (double)m - (double)s->n * sift__sqrt(var);
    /* keep (double)logit >= thr, in place (core/kernels.c) */
    size_t j = sift__keep_logit_ge(a->c, a->n, thr);
    if (j != a->n)
        a->dense = 0;
    a->n = j;
    return SIFT_OK;
}

/* The stage first in a full pass (sift__stage_ops.apply_row): the
 * moments of the row itself (the loaded candidates' values, in another
 * order: the certified threshold does not depend on it), and, when they
 * certify the threshold, the kept tokens loaded by one filtering pass
 * over the row in id order (sift__load_above). (double)l >= thr holds exactly for the floats
 * l >= f = ceil_float(thr), that is l > the float below f (-0 and +0
 * alike; f = -FLT_MAX makes it l > -inf), so the array is the one tns_apply
 * leaves on the loaded row: the same tokens, id order, dense when it
 * kept them all. Declines on a row the threshold cannot decide, a NaN or
 * +inf (the load names it) and a row of fewer than two finite logits. */
static int tns_apply_row(sift__stage *st, sift__ctx *ctx, const float *row, int32_t V, sift__arr *a)
{
    const tns_stage *s = (const tns_stage *)st;
    size_t n = (size_t)V;
    if (!(s->n > 0.0f) || V < 2)
        return 0;
    sift__moments mo;
    sift__moments_row(row, n, &mo);
    double thr;
    if (!sift__tns_threshold(&mo, n, s->n, &thr))
        return 0;
    float t = nextafterf(ceil_float(thr), -INFINITY);
    sift_candidate *c = ctx->ws->cand;
    int bad;
    size_t m = sift__load_above(row, n, t, c, &bad);
    if (bad || m == 0)
        return 0;
    a->c = c;
    a->n = m;
    a->V = V;
    a->order = SIFT__ORDER_ID;
    a->dense = m == n;
    return 1;
}

static sift_class tns_cls(const sift__stage *st, int64_t *n)
{
    *n = 0;
    return ((const tns_stage *)st)->n > 0.0f ? SIFT_CLASS_WHOLE : SIFT_CLASS_IDENTITY;
}

static const sift__stage_ops tns_ops = {
    .name = "top_n_sigma",
    .apply = tns_apply,
    .apply_row = tns_apply_row,
    .cls = tns_cls,
};

sift_status sift_chain_add_top_n_sigma(sift_chain *chain, float n, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_top_n_sigma, "n", n, err)))
        return s;
    tns_stage *t = (tns_stage *)sift__stage_alloc(sift__chain_alloc(chain), &tns_ops, sizeof *t);
    if (!t)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding top_n_sigma");
    t->n = n;
    return sift__chain_push(chain, &t->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct tns_rec {
    float n;
} tns_rec;

static const sift__param tns_params[] = {
    {.name = "n",
     .doc = "keep logits within n standard deviations of the largest; <= 0 = off",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_ANY,
     .required = 1,
     .off = offsetof(tns_rec, n),
     .flat_key = "top_n_sigma",
     .flat_def = -1},
};

static sift_status tns_build(sift_chain *c, const void *rec, const sift__build_env *env,
                             sift_error *err)
{
    (void)env;
    return sift_chain_add_top_n_sigma(c, ((const tns_rec *)rec)->n, err);
}

static sift_class tns_desc_cls(const void *rec, int64_t *k)
{
    *k = 0;
    return ((const tns_rec *)rec)->n > 0 ? SIFT_CLASS_THRESHOLD : SIFT_CLASS_IDENTITY;
}

static void tns_lint(const void *rec, sift__lint *l)
{
    if (((const tns_rec *)rec)->n <= 0)
        l->warn(l, "n", "top_n_sigma %s turns the stage off (n <= 0)", l->text(l, "n"));
}

static int tns_flat_active(void *rec)
{
    return ((const tns_rec *)rec)->n > 0;
}

static const char *const tns_flat_names[] = {"top_n_sigma", "top-n-sigma", NULL};

const sift__sampler_desc sift__desc_top_n_sigma = {
    .name = "top_n_sigma",
    .summary = "keeps the logits within n standard deviations of the largest",
    .params = tns_params,
    .n_params = sizeof tns_params / sizeof tns_params[0],
    .rec_size = sizeof(tns_rec),
    .main = "n",
    .keeps_argmax = 1,
    .build = tns_build,
    .cls = tns_desc_cls,
    .lint = tns_lint,
    .flat_names = tns_flat_names,
    .flat_char = 's',
    .flat_order = 3,
    .flat_active = tns_flat_active,
};

/*
 * oracle_temp.c - the naive oracle of temp, temp_ext, top_n_sigma,
 * mirostat and mirostat_v2 (see oracle.h and docs/samplers.md).
 *
 * Written again from the definitions: the array arrives sorted
 * canonically, so "the canonical first token" is c[0], "the top k" is the
 * first k elements, and a walk is a plain loop. Sums the definitions take
 * in ascending id order run over a qsort-by-id copy, through the oracle's
 * own or_dsum_idorder. Only the numeric primitives are shared with sift.
 */
#include "oracle.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#define OR_LN2 0.6931471805599453

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort(); /* test code: out of memory is fatal */
    return p;
}

/* temp(t) on a sorted array. */
static sift_status temp_on(or_arr *a, float t)
{
    if (t == 1.0f)
        return SIFT_OK;
    int greedy = !(t > 0.0f);
    if (!greedy) {
        /* the largest logit decides whether any quotient overflows */
        float m = a->c[0].logit;
        if (m > -INFINITY && isinf(m / t))
            greedy = 1;
    }
    if (greedy) {
        if (!(a->c[0].logit > -INFINITY))
            return SIFT_E_NO_CANDIDATE;
        a->n = 1;
        return SIFT_OK;
    }
    for (size_t i = 0; i < a->n; i++)
        a->c[i].logit = a->c[i].logit / t;
    return SIFT_OK;
}

sift_status or_temp(or_chain *o, size_t si, or_arr *a)
{
    return temp_on(a, o->spec.st[si].f0);
}

sift_status or_temp_ext(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    float t = s->f0, delta = s->f1, expo = s->f2;
    if (!(delta > 0.0f))
        return temp_on(a, t);
    if (a->n <= 1)
        return SIFT_OK;
    float m = a->c[0].logit;
    if (!(m > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    /* entropy of the softmax, terms in ascending id order */
    sift_candidate *byid = xmalloc(a->n * sizeof *byid);
    memcpy(byid, a->c, a->n * sizeof *byid);
    or_sort_by_id(byid, a->n);
    uint64_t *w = xmalloc(a->n * sizeof *w);
    double *terms = xmalloc(a->n * sizeof *terms);
    sift__u128 W = {0, 0};
    for (size_t i = 0; i < a->n; i++) {
        w[i] = sift__weight(sift__expf(byid[i].logit - m));
        W = sift__u128_add64(W, w[i]);
    }
    double S = sift__u128_to_double(W);
    double LS = sift__log(S) - 62.0 * OR_LN2;
    for (size_t i = 0; i < a->n; i++) {
        terms[i] = 0.0;
        if (w[i] > 0) {
            double surprise = LS - (double)(byid[i].logit - m);
            double p = (double)w[i] * (1.0 / S);
            terms[i] = p * surprise;
        }
    }
    double H = or_dsum_idorder(terms, a->n);
    free(byid);
    free(w);
    free(terms);
    double min_t = (double)t - (double)delta;
    if (min_t < 0.0)
        min_t = 0.0;
    double max_t = (double)t + (double)delta;
    double Hmax = sift__log((double)a->n);
    double dyn = min_t + (max_t - min_t) * sift__pow(H / Hmax, (double)expo);
    float ft = dyn > (double)FLT_MAX ? FLT_MAX : (float)dyn;
    return temp_on(a, ft);
}

sift_status or_top_n_sigma(or_chain *o, size_t si, or_arr *a)
{
    float n = o->spec.st[si].f0;
    if (!(n > 0.0f) || a->n <= 1)
        return SIFT_OK;
    sift_candidate *byid = xmalloc(a->n * sizeof *byid);
    memcpy(byid, a->c, a->n * sizeof *byid);
    or_sort_by_id(byid, a->n);
    double *x = xmalloc(a->n * sizeof *x);
    size_t c = 0;
    for (size_t i = 0; i < a->n; i++)
        if (byid[i].logit != -INFINITY)
            x[c++] = (double)byid[i].logit;
    free(byid);
    if (c == 0) {
        free(x);
        return SIFT_E_NO_CANDIDATE;
    }
    double mean = or_dsum_idorder(x, c) / (double)c;
    double *sq = xmalloc(c * sizeof *sq);
    for (size_t i = 0; i < c; i++)
        sq[i] = (x[i] - mean) * (x[i] - mean);
    double var = or_dsum_idorder(sq, c) / (double)c;
    free(x);
    free(sq);
    double sigma = sift__sqrt(var);
    double thr = (double)a->c[0].logit - (double)n * sigma;
    /* sorted: the kept tokens are a prefix */
    size_t k = 0;
    while (k < a->n && (double)a->c[k].logit >= thr)
        k++;
    a->n = k;
    return SIFT_OK;
}

/* Draws from the (sorted) kept set and records the pending surprise. */
static sift_status draw(or_chain *o, size_t si, or_arr *a, int32_t *token)
{
    uint64_t *w = xmalloc(a->n * sizeof *w);
    sift__u128 W = or_weights(a, w);
    size_t sel = 0;
    if (a->n > 1) {
        sift__u128 T = sift__u128_scale_u64(W, sift__rng_next(&o->rng));
        sel = or_walk(w, a->n, T, 1);
    }
    or_stage_state *st = &o->st[si];
    *token = a->c[sel].id;
    st->has_pending = 1;
    st->pending_token = a->c[sel].id;
    st->pending_surprise = -sift__log((double)w[sel] / sift__u128_to_double(W)) / OR_LN2;
    free(w);
    return SIFT_OK;
}

sift_status or_mirostat(or_chain *o, size_t si, or_arr *a, int32_t *token)
{
    const sp_stage *s = &o->spec.st[si];
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    double mu = o->st[si].mu;
    size_t M = (size_t)s->i0 < a->n ? (size_t)s->i0 : a->n;
    double sum_tb = 0.0, sum_t2 = 0.0;
    for (size_t i = 0; i + 1 < M; i++) {
        if (a->c[i].logit == -INFINITY || a->c[i + 1].logit == -INFINITY)
            break;
        double ti = sift__log(((double)i + 2.0) / ((double)i + 1.0));
        double bi = (double)(a->c[i].logit - a->c[i + 1].logit);
        sum_tb += ti * bi;
        sum_t2 += ti * ti;
    }
    double s_hat = 0.0;
    if (sum_t2 != 0.0)
        s_hat = sum_tb / sum_t2;
    double eps = s_hat - 1.0;
    double num = eps * sift__pow(2.0, mu);
    double den = 1.0 - sift__pow((double)s->i1, -eps);
    double k = sift__pow(num / den, 1.0 / s_hat);
    size_t kk;
    if (isnan(k) || k < 1.0)
        kk = 1;
    else if (k > (double)a->n)
        kk = a->n;
    else
        kk = (size_t)k;
    a->n = kk;
    return draw(o, si, a, token);
}

sift_status or_mirostat_v2(or_chain *o, size_t si, or_arr *a, int32_t *token)
{
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    double mu = o->st[si].mu;
    uint64_t *w = xmalloc(a->n * sizeof *w);
    sift__u128 W = or_weights(a, w);
    double Wd = sift__u128_to_double(W);
    double thr = sift__exp(-mu * OR_LN2);
    size_t k = 0;
    while (k < a->n && (double)w[k] / Wd >= thr)
        k++;
    free(w);
    a->n = k > 0 ? k : 1;
    return draw(o, si, a, token);
}

void or_mirostat_accept(or_chain *o, size_t si, int32_t token)
{
    or_stage_state *st = &o->st[si];
    const sp_stage *s = &o->spec.st[si];
    if (st->has_pending && st->pending_token == token)
        st->mu = st->mu - (double)s->f1 * (st->pending_surprise - (double)s->f0);
    st->has_pending = 0;
}

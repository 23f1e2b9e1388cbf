/*
 * oracle_cutoff.c - the naive oracle of the probability cutoffs
 * (epsilon, eta) and of the adaptive-p selector (see oracle.h and
 * docs/samplers.md).
 *
 * Each function receives the candidates sorted canonically and applies
 * its definition with plain loops over the whole array: the exact u128
 * mass, the exact threshold, a compaction of the tokens that pass, and
 * the canonical first max(min_keep, 1) when too few do. Only the numeric
 * primitives that define the arithmetic are shared with sift.
 */
#include "oracle.h"

#include <math.h>
#include <stdlib.h>

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort(); /* test code: out of memory is fatal */
    return p;
}

/* Keeps the tokens whose weight is >= T (a canonical compaction), or
 * the canonical first max(min_keep, 1) when fewer pass. */
static void keep_at_threshold(or_arr *a, const uint64_t *w, sift__u128 T, int32_t min_keep)
{
    size_t mk = min_keep > 1 ? (size_t)min_keep : 1;
    size_t pass = 0;
    for (size_t i = 0; i < a->n; i++)
        pass += sift__u128_cmp(sift__u128_from(w[i]), T) >= 0;
    if (pass < mk) {
        if (mk < a->n)
            a->n = mk;
        return;
    }
    size_t j = 0;
    for (size_t i = 0; i < a->n; i++)
        if (sift__u128_cmp(sift__u128_from(w[i]), T) >= 0)
            a->c[j++] = a->c[i];
    a->n = j;
}

sift_status or_epsilon(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    if (!(s->f0 > 0.0f))
        return SIFT_OK;
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    uint64_t *w = xmalloc(a->n * sizeof *w);
    sift__u128 W = or_weights(a, w);
    keep_at_threshold(a, w, sift__u128_scale_float(W, s->f0, 1), s->i0);
    free(w);
    return SIFT_OK;
}

static int cmp_by_id(const void *pa, const void *pb)
{
    const sift_candidate *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

sift_status or_eta(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    if (!(s->f0 > 0.0f))
        return SIFT_OK;
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    size_t n = a->n;
    float m = a->c[0].logit;
    uint64_t *w = xmalloc(n * sizeof *w);
    sift__u128 W = or_weights(a, w);
    double S = sift__u128_to_double(W);
    double LS = sift__log(S) - 62.0 * 0.6931471805599453;
    double inv = 1.0 / S;
    /* the entropy terms, summed in ascending id order */
    sift_candidate *byid = xmalloc(n * sizeof *byid);
    double *t = xmalloc(n * sizeof *t);
    memcpy(byid, a->c, n * sizeof *byid);
    qsort(byid, n, sizeof *byid, cmp_by_id);
    for (size_t i = 0; i < n; i++) {
        uint64_t wi = sift__weight(sift__expf(byid[i].logit - m));
        t[i] = wi > 0 ? ((double)wi * inv) * (LS - (double)(byid[i].logit - m)) : 0.0;
    }
    double H = or_dsum_idorder(t, n);
    double e = (double)s->f0;
    double cut = sift__sqrt(e) * sift__exp(-H);
    if (cut > e)
        cut = e;
    keep_at_threshold(a, w, sift__u128_scale_float(W, (float)cut, 1), s->i0);
    free(t);
    free(byid);
    free(w);
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* adaptive_p                                                          */
/* ------------------------------------------------------------------ */

void or_adaptive_p_reset(or_chain *o, size_t si)
{
    const sp_stage *s = &o->spec.st[si];
    or_stage_state *st = &o->st[si];
    st->ap_sum = (double)s->f0 / (1.0 - (double)s->f1);
    st->ap_weight = 1.0 / (1.0 - (double)s->f1);
    st->has_pending = 0;
}

/* dist on a sorted array: the index drawn. */
static size_t or_draw(or_chain *o, or_arr *a)
{
    if (a->n == 1)
        return 0;
    uint64_t *w = xmalloc(a->n * sizeof *w);
    sift__u128 W = or_weights(a, w);
    sift__u128 T = sift__u128_scale_u64(W, sift__rng_next(&o->rng));
    size_t i = or_walk(w, a->n, T, 1);
    free(w);
    return i < a->n ? i : a->n - 1;
}

sift_status or_adaptive_p(or_chain *o, size_t si, or_arr *a, int32_t *token)
{
    const sp_stage *s = &o->spec.st[si];
    or_stage_state *st = &o->st[si];
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    if (s->f0 < 0.0f) {
        *token = a->c[or_draw(o, a)].id;
        return SIFT_OK;
    }
    size_t n = a->n;
    uint64_t *w = xmalloc(n * sizeof *w);
    double *p = xmalloc(n * sizeof *p);
    int32_t *pid = xmalloc(n * sizeof *pid);
    double S = sift__u128_to_double(or_weights(a, w));
    double A = 2.0 * (double)s->f0 - st->ap_sum / st->ap_weight;
    if (A < 0.0)
        A = 0.0;
    if (A > 1.0)
        A = 1.0;
    for (size_t i = 0; i < n; i++) {
        p[i] = (double)w[i] / S;
        pid[i] = a->c[i].id;
        if (a->c[i].logit == -INFINITY)
            continue;
        double d = fabs(p[i] - A) / 0.3;
        a->c[i].logit = (float)(5.0 - 10.0 * d * d / (1.0 + d));
    }
    or_sort(a);
    int32_t tok = a->c[or_draw(o, a)].id;
    double ptok = -1.0;
    for (size_t i = 0; i < n; i++)
        if (pid[i] == tok)
            ptok = p[i];
    *token = tok;
    st->has_pending = 1;
    st->pending_token = tok;
    st->pending_surprise = ptok;
    free(pid);
    free(p);
    free(w);
    return SIFT_OK;
}

void or_adaptive_p_accept(or_chain *o, size_t si, int32_t token)
{
    const sp_stage *s = &o->spec.st[si];
    or_stage_state *st = &o->st[si];
    if (st->has_pending && st->pending_token == token) {
        st->ap_sum = st->pending_surprise + (double)s->f1 * st->ap_sum;
        st->ap_weight = 1.0 + (double)s->f1 * st->ap_weight;
    }
    st->has_pending = 0;
}

/*
 * oracle_cutoff.c - the naive oracle of the probability cutoffs
 * (epsilon, eta; see oracle.h and docs/samplers.md).
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

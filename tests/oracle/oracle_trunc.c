/*
 * oracle_trunc.c - the naive oracle of top_p, min_p, typical and xtc.
 *
 * Each function receives the candidates sorted canonically (logit
 * descending, id ascending) and applies its definition from
 * docs/samplers.md with plain loops: cumulative u128 sums walked from the
 * front, a qsort into typicality order, a scan for xtc's above-threshold
 * prefix. Nothing here calls the library's selection helpers; only the
 * numeric primitives that define the arithmetic are shared. Every
 * function leaves the array sorted canonically.
 */
#include "oracle.h"

#include <math.h>
#include <stdlib.h>

/* max(min_keep, 1) */
static size_t keep_at_least(int32_t min_keep)
{
    return min_keep > 1 ? (size_t)min_keep : 1;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort(); /* test code: out of memory is fatal */
    return p;
}

sift_status or_top_p(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    float p = s->f0;
    if (p >= 1.0f)
        return SIFT_OK;
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    uint64_t *w = xmalloc(a->n * sizeof *w);
    sift__u128 W = or_weights(a, w);
    sift__u128 T = sift__u128_scale_float(W, p, 1);
    /* shortest prefix with mass >= T */
    size_t i = or_walk(w, a->n, T, 0);
    size_t keep = i < a->n ? i + 1 : a->n;
    size_t mk = keep_at_least(s->i0);
    if (keep < mk)
        keep = mk < a->n ? mk : a->n;
    a->n = keep;
    free(w);
    return SIFT_OK;
}

sift_status or_min_p(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    float p = s->f0;
    if (p <= 0.0f)
        return SIFT_OK;
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    float L = a->c[0].logit + sift__logf(p);
    size_t keep = 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->c[i].logit >= L)
            keep++;
    size_t mk = keep_at_least(s->i0);
    if (keep < mk)
        keep = mk < a->n ? mk : a->n;
    /* the survivors of a logit threshold are the sorted array's front */
    a->n = keep;
    return SIFT_OK;
}

typedef struct typ_row {
    size_t pos; /* canonical position */
    int32_t id;
    double t; /* entropy term */
    double score;
} typ_row;

static int cmp_row_id(const void *pa, const void *pb)
{
    const typ_row *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

/* score ascending, then canonical position ascending */
static int cmp_row_typical(const void *pa, const void *pb)
{
    const typ_row *a = pa, *b = pb;
    if (a->score < b->score)
        return -1;
    if (a->score > b->score)
        return 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

sift_status or_typical(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    float p = s->f0;
    if (p >= 1.0f)
        return SIFT_OK;
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    size_t n = a->n;
    float m = or_max(a);
    uint64_t *w = xmalloc(n * sizeof *w);
    typ_row *r = xmalloc(n * sizeof *r);
    double *tv = xmalloc(n * sizeof *tv);
    sift__u128 W = or_weights(a, w);
    double S = sift__u128_to_double(W);
    double LS = sift__log(S) - 62.0 * 0.6931471805599453;
    double inv = 1.0 / S;
    for (size_t i = 0; i < n; i++) {
        double surprise = LS - (double)(a->c[i].logit - m);
        double pi = (double)w[i] * inv;
        r[i].pos = i;
        r[i].id = a->c[i].id;
        r[i].t = w[i] > 0 ? pi * surprise : 0.0;
        r[i].score = surprise; /* finished below, once H is known */
    }
    /* entropy: the terms in ascending id order */
    qsort(r, n, sizeof *r, cmp_row_id);
    for (size_t i = 0; i < n; i++)
        tv[i] = r[i].t;
    double H = or_dsum_idorder(tv, n);
    for (size_t i = 0; i < n; i++) {
        double d = r[i].score - H;
        r[i].score = d < 0 ? -d : d;
    }
    qsort(r, n, sizeof *r, cmp_row_typical);
    /* walk typicality order: first prefix with mass > floor(p W) and at
     * least max(min_keep, 1) tokens */
    sift__u128 T = sift__u128_scale_float(W, p, 0);
    size_t mk = keep_at_least(s->i0);
    sift__u128 mass = {0, 0};
    size_t keep = n;
    for (size_t j = 0; j < n; j++) {
        mass = sift__u128_add64(mass, w[r[j].pos]);
        if (sift__u128_cmp(mass, T) > 0 && j + 1 >= mk) {
            keep = j + 1;
            break;
        }
    }
    /* mark the kept canonical positions, then compact in canonical order */
    unsigned char *kept = xmalloc(n);
    memset(kept, 0, n);
    for (size_t j = 0; j < keep; j++)
        kept[r[j].pos] = 1;
    size_t out = 0;
    for (size_t i = 0; i < n; i++)
        if (kept[i])
            a->c[out++] = a->c[i];
    a->n = out;
    free(kept);
    free(tv);
    free(r);
    free(w);
    return SIFT_OK;
}

sift_status or_xtc(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    float prob = s->f0, thr = s->f1;
    if (prob <= 0.0f || thr > 0.5f)
        return SIFT_OK;
    if (a->n < 2)
        return SIFT_OK;
    float u = sift__rng_float(&o->rng);
    if (u > prob)
        return SIFT_OK;
    if (!(a->c[0].logit > -INFINITY))
        return SIFT_E_NO_CANDIDATE;
    uint64_t *w = xmalloc(a->n * sizeof *w);
    sift__u128 W = or_weights(a, w);
    sift__u128 T = sift__u128_scale_float(W, thr, 1);
    /* A zero-weight token (-inf, or below 2^-62 of the top) is never
     * above the threshold, even when the threshold is 0. */
    if (T.lo == 0 && T.hi == 0)
        T.lo = 1;
    /* index of the last token of the above-threshold run at the front */
    size_t last = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (sift__u128_cmp(sift__u128_from(w[i]), T) >= 0)
            last = i;
        else
            break;
    }
    free(w);
    if (last > 0 && a->n - last >= (size_t)s->i0) {
        memmove(a->c, a->c + last, (a->n - last) * sizeof *a->c);
        a->n -= last;
    }
    return SIFT_OK;
}

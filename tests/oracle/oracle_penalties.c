/*
 * oracle_penalties.c - the naive oracle of penalties, DRY and logit_bias,
 * written again from docs/samplers.md with plain loops: counts by scanning
 * the history, common suffixes by direct comparison (O(N^2)), breakers by
 * scanning the breaker list, biases by a linear search per entry. The
 * histories are kept by or_accept (penalties: window i0, DRY: window i1).
 * Every function leaves the array sorted canonically.
 */
#include <math.h>
#include <stdlib.h>

#include "oracle.h"

static int finite_or_neg_inf_ok(float l)
{
    return l < INFINITY; /* false for +inf and NaN */
}

sift_status or_penalties(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    const or_stage_state *h = &o->st[si];
    float repeat = s->f0, freq = s->f1, presence = s->f2;
    if (s->i0 == 0 || (repeat == 1.0f && freq == 0.0f && presence == 0.0f))
        return SIFT_OK;
    int bad = 0;
    for (size_t i = 0; i < a->n; i++) {
        int32_t c = 0;
        for (size_t k = 0; k < h->hist_n; k++)
            c += h->hist[k] == a->c[i].id;
        if (c == 0 || a->c[i].logit == -INFINITY)
            continue;
        float l = a->c[i].logit;
        if (l <= 0.0f)
            l = l * repeat;
        else
            l = l / repeat;
        l = l - ((float)c * freq + (float)(c > 0) * presence);
        a->c[i].logit = l;
        if (!finite_or_neg_inf_ok(l))
            bad = 1;
    }
    if (bad)
        return SIFT_E_ROW_VALUE;
    or_sort(a);
    return SIFT_OK;
}

sift_status or_dry(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    const int32_t *h = o->st[si].hist;
    float mult = s->f0, base = s->f1;
    int32_t allowed = s->i0, last_n = s->i1;
    if (!(mult != 0.0f && base >= 1.0f && last_n != 0))
        return SIFT_OK;
    int32_t N = (int32_t)o->st[si].hist_n;
    if (N <= allowed)
        return SIFT_OK;
    /* The most recent breaker occurrence limits the repeat length. */
    int32_t rep_limit = N;
    for (int32_t i = 0; i < N; i++) {
        int32_t longest = -1;
        for (size_t b = 0; b < s->n_breakers; b++) {
            if (s->breaker[b][0] != h[N - 1 - i])
                continue;
            int32_t tail = (int32_t)s->breaker_len[b] - 1;
            if (tail > i)
                continue;
            int match = 1;
            for (int32_t k = 0; k < tail; k++)
                if (s->breaker[b][1 + k] != h[N - 1 - (i - k - 1)])
                    match = 0;
            if (match && tail > longest)
                longest = tail;
        }
        if (longest >= 0) {
            rep_limit = i - longest;
            break;
        }
    }
    if (rep_limit < allowed)
        return SIFT_OK;
    int32_t *best = malloc((size_t)a->V * sizeof *best);
    if (!best)
        abort();
    for (int32_t t = 0; t < a->V; t++)
        best[t] = -1;
    for (int32_t j = 0; j + 1 < N; j++) {
        int32_t L = 0;
        while (L <= j && h[j - L] == h[N - 1 - L])
            L++;
        if (L > rep_limit)
            L = rep_limit;
        if (L < allowed)
            continue;
        int32_t t = h[j + 1];
        if (t < a->V && best[t] < L)
            best[t] = L;
    }
    int32_t max_exp = 0;
    if (base > 1.000001f)
        max_exp = (int32_t)floor(88.7228391 / sift__log((double)base));
    for (size_t i = 0; i < a->n; i++) {
        int32_t t = a->c[i].id;
        if (best[t] < 0)
            continue;
        int single = 0;
        for (size_t b = 0; b < s->n_breakers; b++)
            single |= s->breaker_len[b] == 1 && s->breaker[b][0] == t;
        if (single)
            continue;
        int32_t e = best[t] - allowed;
        if (max_exp > 0 && e > max_exp)
            e = max_exp;
        double pen = (double)mult * sift__pow((double)base, (double)e);
        /* IEEE rounding to float overflows from FLT_MAX + half an ulp on */
        float pf = pen >= 0x1.ffffffp127 ? INFINITY : (float)pen;
        a->c[i].logit -= pf;
    }
    free(best);
    or_sort(a);
    return SIFT_OK;
}

sift_status or_logit_bias(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    for (size_t j = 0; j < s->n_bias; j++)
        for (size_t i = 0; i < a->n; i++)
            if (a->c[i].id == s->bias[j].token) {
                a->c[i].logit += s->bias[j].bias;
                break;
            }
    for (size_t i = 0; i < a->n; i++)
        if (!finite_or_neg_inf_ok(a->c[i].logit))
            return SIFT_E_ROW_VALUE;
    or_sort(a);
    return SIFT_OK;
}

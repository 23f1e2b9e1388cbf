/*
 * ban.c - helpers of the samplers that ban listed token ids.
 *
 * min_tokens, allowed_tokens, no_repeat_ngram and bad_words all keep a
 * sorted list of distinct token ids and set the logits of some candidates
 * to -inf from it; their YAML parameters give token ids as the strings of
 * a SIFT__PT_STRING_LIST (the configuration's item type: "15", or "15 27"
 * for a sequence). These functions are that shared part: banning from a
 * sorted list on a dense row or on an incomplete set, sorting a list in
 * place without allocating, and reading ids from such strings.
 *
 * Banning only writes -inf over a finite logit; it never removes a
 * candidate, so the stages stay LOWERS on a slice (the walk requires the
 * set's size to stay the same).
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

int sift__ids_has(const int32_t *ids, size_t n, int32_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ids[lo] == id;
}

static int ban_one(sift_candidate *c)
{
    if (c->logit == -INFINITY)
        return 0;
    c->logit = -INFINITY;
    return 1;
}

void sift__ban_ids(sift__arr *a, const int32_t *ids, size_t n)
{
    int changed = 0;
    if (n == 0)
        return;
    if (a->dense) {
        for (size_t i = 0; i < n && ids[i] < a->V; i++)
            changed |= ban_one(&a->c[ids[i]]);
    } else {
        for (size_t i = 0; i < a->n; i++)
            if (sift__ids_has(ids, n, a->c[i].id))
                changed |= ban_one(&a->c[i]);
    }
    if (changed)
        sift__arr_touched(a);
}

void sift__ban_others(sift__arr *a, const int32_t *ids, size_t n)
{
    int changed = 0;
    if (a->dense) {
        size_t q = 0;
        for (size_t i = 0; i < a->n; i++) {
            int32_t id = a->c[i].id;
            while (q < n && ids[q] < id)
                q++;
            if (!(q < n && ids[q] == id))
                changed |= ban_one(&a->c[i]);
        }
    } else {
        for (size_t i = 0; i < a->n; i++)
            if (!sift__ids_has(ids, n, a->c[i].id))
                changed |= ban_one(&a->c[i]);
    }
    if (changed)
        sift__arr_touched(a);
}

static void sift_down(int32_t *v, size_t root, size_t n)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && v[child + 1] > v[child])
            child++;
        if (v[root] >= v[child])
            return;
        int32_t t = v[root];
        v[root] = v[child];
        v[child] = t;
        root = child;
    }
}

size_t sift__ids_sort_unique(int32_t *ids, size_t n)
{
    if (n < 2)
        return n;
    /* heapsort: in place, O(n log n) on every input, no allocation */
    for (size_t i = n / 2; i-- > 0;)
        sift_down(ids, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        int32_t t = ids[0];
        ids[0] = ids[end];
        ids[end] = t;
        sift_down(ids, 0, end);
    }
    size_t j = 1;
    for (size_t i = 1; i < n; i++)
        if (ids[i] != ids[j - 1])
            ids[j++] = ids[i];
    return j;
}

static int is_sep(char ch)
{
    return ch == ' ' || ch == ',' || ch == '\t';
}

size_t sift__parse_ids(const char *s, size_t len, int32_t *out, size_t cap)
{
    size_t n = 0, i = 0;
    for (;;) {
        while (i < len && is_sep(s[i]))
            i++;
        if (i == len)
            return n;
        if (s[i] < '0' || s[i] > '9')
            return SIZE_MAX;
        int64_t v = 0;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
            v = v * 10 + (s[i] - '0');
            if (v > INT32_MAX)
                return SIZE_MAX;
        }
        if (i < len && !is_sep(s[i]))
            return SIZE_MAX;
        if (n == cap)
            return SIZE_MAX;
        if (out)
            out[n] = (int32_t)v;
        n++;
    }
}

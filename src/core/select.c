/*
 * select.c - canonical order without sorting the row.
 *
 * Owns the sorts (canonical and by id), the top-k cut, the weighted
 * prefix search and the softmax weights. Every function here computes a
 * property of the *set* of candidates it is given, defined on canonical
 * order (logit descending, id ascending), and never depends on the order
 * the array is stored in. That is what lets a whole row be processed in
 * O(V) with selection while the oracle sorts everything.
 *
 * Keys: sift__ckey(l, id) is a 64-bit integer that is larger exactly when
 * the candidate comes first canonically; ids are unique so keys are too.
 */
#include <math.h>

#include "../sift_internal.h"

/* ------------------------------------------------------------------ */
/* Sorting                                                             */
/* ------------------------------------------------------------------ */

static void insertion_canon(sift_candidate *c, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        sift_candidate x = c[i];
        size_t j = i;
        while (j > 0 && sift__canon_before(&x, &c[j - 1])) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = x;
    }
}

/* LSD radix sort of c by an unsigned 64-bit key taken from each element,
 * ascending, 8 bits a pass, skipping passes whose digit is constant. */
static void radix_by(sift_candidate *c, size_t n, sift_candidate *tmp,
                     uint64_t (*key)(const sift_candidate *), int bytes)
{
    size_t count[256];
    sift_candidate *src = c, *dst = tmp;
    for (int pass = 0; pass < bytes; pass++) {
        int sh = pass * 8;
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++)
            count[(key(&src[i]) >> sh) & 0xff]++;
        size_t nz = 0;
        for (int d = 0; d < 256; d++)
            nz += count[d] != 0;
        if (nz <= 1)
            continue;
        size_t pos = 0;
        for (int d = 0; d < 256; d++) {
            size_t t = count[d];
            count[d] = pos;
            pos += t;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[(key(&src[i]) >> sh) & 0xff]++] = src[i];
        sift_candidate *t = src;
        src = dst;
        dst = t;
    }
    if (src != c)
        memcpy(c, src, n * sizeof *c);
}

static uint64_t key_canon_asc(const sift_candidate *x)
{
    return ~sift__ckey(x->logit, x->id);
}

static uint64_t key_id(const sift_candidate *x)
{
    return (uint32_t)x->id;
}

void sift__sort_canon(sift_candidate *c, size_t n, sift_candidate *tmp)
{
    if (n <= 48)
        insertion_canon(c, n);
    else
        radix_by(c, n, tmp, key_canon_asc, 8);
}

void sift__sort_id(sift_candidate *c, size_t n, sift_candidate *tmp)
{
    if (n <= 48) {
        for (size_t i = 1; i < n; i++) {
            sift_candidate x = c[i];
            size_t j = i;
            while (j > 0 && c[j - 1].id > x.id) {
                c[j] = c[j - 1];
                j--;
            }
            c[j] = x;
        }
    } else {
        radix_by(c, n, tmp, key_id, 4);
    }
}

void sift__arr_canon(sift__ctx *ctx, sift__arr *a)
{
    if (a->order == SIFT__ORDER_CANON)
        return;
    sift__sort_canon(a->c, a->n, ctx->ws->cand2);
    a->order = SIFT__ORDER_CANON;
    a->dense = 0;
}

void sift__arr_idorder(sift__ctx *ctx, sift__arr *a)
{
    if (a->order == SIFT__ORDER_ID)
        return;
    sift__sort_id(a->c, a->n, ctx->ws->cand2);
    a->order = SIFT__ORDER_ID;
    a->dense = a->n == (size_t)a->V;
}

/* ------------------------------------------------------------------ */
/* Selection of the k-th largest key                                   */
/* ------------------------------------------------------------------ */

static inline void swap64(uint64_t *a, uint64_t *b)
{
    uint64_t t = *a;
    *a = *b;
    *b = t;
}

/* The k-th largest of v[0..n) by bisection on the value: 64 counting
 * passes, O(n) whatever the data. Used when quickselect stalls. */
static uint64_t kth_by_bisection(const uint64_t *v, size_t n, size_t k)
{
    uint64_t lo = 0, hi = UINT64_MAX; /* answer in [lo, hi] */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2 + 1; /* > lo */
        size_t cnt = 0;
        for (size_t i = 0; i < n; i++)
            cnt += v[i] >= mid;
        if (cnt >= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Returns the k-th largest (1-based) of v[0..n), reordering v. Expected
 * O(n) (three-way quickselect on pseudo-random medians of three); if it
 * stalls, bisection finishes in O(n), so the worst case stays linear. */
static uint64_t kth_largest(uint64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n; /* the answer is the k-th largest of v[lo..hi) */
    uint64_t seed = 0x2545F4914F6CDD1Dull ^ n;
    int rounds = 0;
    while (hi - lo > 16) {
        if (++rounds > 64)
            return kth_by_bisection(v + lo, hi - lo, k);
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t m = hi - lo;
        uint64_t a = v[lo + (seed >> 33) % m];
        uint64_t b = v[lo + (seed >> 13) % m];
        uint64_t c = v[lo + (seed % m)];
        uint64_t p = a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
        size_t i = lo, lt = lo, gt = hi;
        while (i < gt) {
            if (v[i] > p) {
                swap64(&v[i], &v[lt]);
                lt++;
                i++;
            } else if (v[i] < p) {
                gt--;
                swap64(&v[i], &v[gt]);
            } else {
                i++;
            }
        }
        size_t n_gt = lt - lo, n_eq = gt - lt;
        if (k <= n_gt) {
            hi = lt;
        } else if (k <= n_gt + n_eq) {
            return p;
        } else {
            k -= n_gt + n_eq;
            lo = gt;
        }
    }
    for (size_t i = lo + 1; i < hi; i++) {
        uint64_t x = v[i];
        size_t j = i;
        while (j > lo && v[j - 1] < x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
    return v[lo + k - 1];
}

uint64_t sift__cut_top(sift__ctx *ctx, const sift_candidate *c, size_t n, size_t k)
{
    uint64_t *keys = ctx->ws->u64b;
    if (k >= n) {
        uint64_t mn = UINT64_MAX;
        for (size_t i = 0; i < n; i++) {
            uint64_t kk = sift__ckey(c[i].logit, c[i].id);
            if (kk < mn)
                mn = kk;
        }
        return mn;
    }
    size_t m = 0;
    /* Prefilter for a small k on a large array: the k-th largest of the
     * block maxima is a lower bound of the k-th largest logit (k blocks
     * have a maximum at least that large), so only elements at or above
     * it can be in the top k. */
    if (n >= 8192 && k <= n / 256) {
        size_t B = 64;
        size_t nb = (n + B - 1) / B;
        uint64_t *bm = ctx->ws->u64c;
        for (size_t b = 0; b < nb; b++) {
            size_t s = b * B, e = s + B < n ? s + B : n;
            float mx = c[s].logit;
            for (size_t i = s + 1; i < e; i++)
                mx = c[i].logit > mx ? c[i].logit : mx;
            bm[b] = sift__fkey(mx);
        }
        uint32_t tau = (uint32_t)kth_largest(bm, nb, k);
        for (size_t i = 0; i < n; i++)
            if (sift__fkey(c[i].logit) >= tau)
                keys[m++] = sift__ckey(c[i].logit, c[i].id);
    } else {
        for (size_t i = 0; i < n; i++)
            keys[i] = sift__ckey(c[i].logit, c[i].id);
        m = n;
    }
    return kth_largest(keys, m, k);
}

void sift__arr_keep_ge(sift__arr *a, uint64_t cut)
{
    size_t j = 0;
    for (size_t i = 0; i < a->n; i++) {
        sift_candidate x = a->c[i];
        if (sift__ckey(x.logit, x.id) >= cut)
            a->c[j++] = x;
    }
    if (j != a->n)
        a->dense = 0;
    a->n = j;
}

void sift__arr_keep_top(sift__ctx *ctx, sift__arr *a, size_t k)
{
    if (k >= a->n)
        return;
    if (a->order == SIFT__ORDER_CANON) {
        a->n = k;
        a->dense = 0;
        return;
    }
    sift__arr_keep_ge(a, sift__cut_top(ctx, a->c, a->n, k));
}

/* ------------------------------------------------------------------ */
/* Weights                                                             */
/* ------------------------------------------------------------------ */

float sift__max_logit(const sift_candidate *c, size_t n)
{
    float m = -INFINITY;
    for (size_t i = 0; i < n; i++)
        m = c[i].logit > m ? c[i].logit : m;
    return m;
}

sift__u128 sift__weights(const sift_candidate *c, size_t n, float m, uint64_t *w)
{
    sift__u128 W = {0, 0};
    for (size_t i = 0; i < n; i++) {
        uint64_t x = sift__weight(sift__expf(c[i].logit - m));
        w[i] = x;
        W = sift__u128_add64(W, x);
    }
    return W;
}

/* ------------------------------------------------------------------ */
/* Weighted prefix                                                     */
/* ------------------------------------------------------------------ */

static int reaches(sift__u128 mass, sift__u128 T, int strict)
{
    int c = sift__u128_cmp(mass, T);
    return strict ? c > 0 : c >= 0;
}

/* The fallback of weighted_select when its pivots stall: bisection on
 * the key value, 64 passes of O(n). mass{K >= x} only shrinks as x
 * grows, so the largest x that still reaches T is a key. */
static int weighted_bisection(const uint64_t *K, const uint64_t *Wt, size_t n, sift__u128 T,
                              int strict, size_t above, uint64_t *cut, size_t *len)
{
    sift__u128 total = {0, 0};
    for (size_t i = 0; i < n; i++)
        total = sift__u128_add64(total, Wt[i]);
    if (!reaches(total, T, strict))
        return 0;
    uint64_t lo = 0, hi = UINT64_MAX;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2 + 1;
        sift__u128 mass = {0, 0};
        for (size_t i = 0; i < n; i++)
            if (K[i] >= mid)
                mass = sift__u128_add64(mass, Wt[i]);
        if (reaches(mass, T, strict))
            lo = mid;
        else
            hi = mid - 1;
    }
    size_t cnt = 0;
    uint64_t kmax = 0;
    for (size_t i = 0; i < n; i++) {
        cnt += K[i] >= lo;
        kmax = K[i] > kmax ? K[i] : kmax;
    }
    if (cnt == 0) { /* T == 0: the prefix still holds one token */
        lo = kmax;
        cnt = 1;
    }
    *cut = lo;
    *len = above + cnt;
    return 1;
}

/* On K[0..n) (unique keys) with weights Wt: the largest key x such that
 * the mass of {K >= x} reaches T; *len = |{K >= x}|. Reorders K and Wt.
 * Returns 0 if even the whole set does not reach T. */
static int weighted_select(uint64_t *K, uint64_t *Wt, size_t n, sift__u128 T, int strict,
                           uint64_t *cut, size_t *len)
{
    size_t lo = 0, hi = n, above = 0;
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ n;
    int rounds = 0;
    while (hi > lo) {
        size_t m = hi - lo;
        if (++rounds > 64)
            return weighted_bisection(K + lo, Wt + lo, m, T, strict, above, cut, len);
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t p;
        if (m <= 2) {
            p = K[lo];
            if (m == 2 && K[lo + 1] > p)
                p = K[lo + 1];
        } else {
            uint64_t a = K[lo + (seed >> 33) % m];
            uint64_t b = K[lo + (seed >> 13) % m];
            uint64_t c = K[lo + seed % m];
            p = a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
        }
        /* partition [> p] [== p] [< p]; keys are unique so == is one */
        size_t i = lo, lt = lo, gt = hi;
        sift__u128 mass_gt = {0, 0};
        uint64_t w_eq = 0;
        while (i < gt) {
            if (K[i] > p) {
                mass_gt = sift__u128_add64(mass_gt, Wt[i]);
                swap64(&K[i], &K[lt]);
                swap64(&Wt[i], &Wt[lt]);
                lt++;
                i++;
            } else if (K[i] < p) {
                gt--;
                swap64(&K[i], &K[gt]);
                swap64(&Wt[i], &Wt[gt]);
            } else {
                w_eq = Wt[i];
                i++;
            }
        }
        if (lt > lo && reaches(mass_gt, T, strict)) {
            hi = lt;
            continue;
        }
        sift__u128 with_p = sift__u128_add64(mass_gt, w_eq);
        if (reaches(with_p, T, strict)) {
            *cut = p;
            *len = above + (lt - lo) + 1;
            return 1;
        }
        T = sift__u128_sub(T, with_p);
        above += (lt - lo) + 1;
        lo = gt;
    }
    return 0;
}

size_t sift__mass_prefix(sift__ctx *ctx, const sift_candidate *c, const uint64_t *w, size_t n,
                         sift__u128 T, int strict, uint64_t *cut)
{
    uint64_t *K = ctx->ws->u64c;
    uint64_t *Wt = ctx->ws->u64d;
    size_t len = 0;
    /* Most of the mass usually sits in the first few tokens: try the top
     * 64, then the top 4096, before working on everything. The answer is
     * the same; only the work differs. */
    static const size_t tries[] = {64, 4096};
    for (int t = 0; t < 2; t++) {
        size_t m = tries[t];
        if (n <= m * 4)
            break;
        uint64_t cm = sift__cut_top(ctx, c, n, m);
        size_t j = 0;
        sift__u128 mass = {0, 0};
        for (size_t i = 0; i < n; i++) {
            uint64_t k = sift__ckey(c[i].logit, c[i].id);
            if (k >= cm) {
                K[j] = k;
                Wt[j] = w[i];
                mass = sift__u128_add64(mass, w[i]);
                j++;
            }
        }
        if (reaches(mass, T, strict)) {
            if (weighted_select(K, Wt, j, T, strict, cut, &len))
                return len;
        }
    }
    for (size_t i = 0; i < n; i++) {
        K[i] = sift__ckey(c[i].logit, c[i].id);
        Wt[i] = w[i];
    }
    if (weighted_select(K, Wt, n, T, strict, cut, &len))
        return len;
    /* No prefix reaches T: everything, cut at the smallest key. */
    uint64_t mn = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = sift__ckey(c[i].logit, c[i].id);
        mn = k < mn ? k : mn;
    }
    *cut = mn;
    return n;
}

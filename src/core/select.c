/*
 * select.c - canonical order without sorting the row.
 *
 * Owns the sorts (canonical and by id), the top-k cut, the largest logit
 * and the weighted prefix search (the softmax weights themselves are in
 * core/weights.c). Every function here computes a
 * property of the *set* of candidates it is given, defined on canonical
 * order (logit descending, id ascending), and never depends on the order
 * the array is stored in. That is what lets a whole row be processed in
 * O(V) with selection while the oracle sorts everything.
 *
 * Keys: sift__ckey(l, id) is a 64-bit integer that is larger exactly when
 * the candidate comes first canonically; ids are unique so keys are too.
 *
 * Speed (numbers: tests/bench, `make bench`). The whole-row loops are the
 * cost of every step, so they are written to be fast while computing
 * exactly the definitions: the weights (core/weights.c) use a fast expf
 * that is proven to round like sift__expf, the mass prefix sums
 * weights per logit bucket and searches one bucket, and small top-k cuts
 * read only the 64-element blocks that can hold a survivor. Each of these
 * is checked bit for bit against the plain definition in check_num and
 * check_select; results never depend on which path ran.
 */
#include <math.h>

#include "../sift_internal.h"
#include "simd.h"

/* The AVX-512 forms of this file (max_logit_avx512, band_pass_avx512,
 * heavy_scan_avx512), chosen at run time. */
#if defined(__x86_64__) && !defined(SIFT_NO_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define SIFT__BAND_AVX512 1
#include <immintrin.h>
#endif

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

/* Merges the canonical runs a[0..na) and b[0..nb) into out (which
 * overlaps neither). */
static void merge_canon(const sift_candidate *a, size_t na, const sift_candidate *b, size_t nb,
                        sift_candidate *out)
{
    size_t i = 0, j = 0, o = 0;
    while (i < na && j < nb) {
        if (sift__canon_before(&b[j], &a[i]))
            out[o++] = b[j++];
        else
            out[o++] = a[i++];
    }
    while (i < na)
        out[o++] = a[i++];
    while (j < nb)
        out[o++] = b[j++];
}

/* Bottom-up merge sort: insertion-sorted runs of MERGE_RUN, then passes
 * that double the run length, alternating between c and tmp. */
enum { MERGE_RUN = 16 };

static void merge_sort_canon(sift_candidate *c, size_t n, sift_candidate *tmp)
{
    for (size_t s = 0; s < n; s += MERGE_RUN)
        insertion_canon(c + s, n - s < MERGE_RUN ? n - s : MERGE_RUN);
    sift_candidate *src = c, *dst = tmp;
    for (size_t w = MERGE_RUN; w < n; w *= 2) {
        for (size_t s = 0; s < n; s += 2 * w) {
            size_t m = s + w < n ? s + w : n, e = s + 2 * w < n ? s + 2 * w : n;
            merge_canon(src + s, m - s, src + m, e - m, dst + s);
        }
        sift_candidate *t = src;
        src = dst;
        dst = t;
    }
    if (src != c)
        memcpy(c, src, n * sizeof *c);
}

/* Sizes at which sift__sort_canon changes method (comparison sorts cost
 * fewer instructions than eight radix passes over a few hundred
 * elements; tests/check_select.c checks every method at and around both
 * thresholds against the plain definition). */
#define SORT_INSERTION_MAX 24
#define SORT_MERGE_MAX 1024

void sift__sort_canon(sift_candidate *c, size_t n, sift_candidate *tmp)
{
    if (n <= SORT_INSERTION_MAX)
        insertion_canon(c, n);
    else if (n <= SORT_MERGE_MAX)
        merge_sort_canon(c, n, tmp);
    else
        radix_by(c, n, tmp, key_canon_asc, 8);
}

void sift__canon_merge(sift_candidate *c, size_t u, sift_candidate *side, size_t t)
{
    /* The changed ones are often in canonical order already (a monotone
     * change such as a repetition penalty keeps the order they had in
     * c): one pass finds that. c[u..u + t) is free until the merge
     * reaches it: the scratch. */
    size_t s = 1;
    while (s < t && sift__canon_before(&side[s - 1], &side[s]))
        s++;
    if (s < t)
        sift__sort_canon(side, t, c + u);
    /* Backwards, so that c[0..u) can be merged in place: the slot being
     * written is never one still to be read. */
    size_t i = u, j = t, o = u + t;
    while (j > 0) {
        if (i > 0 && sift__canon_before(&side[j - 1], &c[i - 1]))
            c[--o] = c[--i];
        else
            c[--o] = side[--j];
    }
}

/* A device top-k comes in any order, though usually sorted by logit with
 * only the ties out of id order (torch.topk and most kernels sort by
 * value): one pass finds an already canonical array, a second one an
 * array sorted by logit, whose runs of equal logits are then sorted by
 * id; anything else is sorted whole. */
void sift__order_top_set(sift_candidate *c, size_t n, sift_candidate *tmp)
{
    size_t i = 1;
    while (i < n && sift__canon_before(&c[i - 1], &c[i]))
        i++;
    if (i >= n)
        return;
    for (; i < n; i++)
        if (!(c[i - 1].logit >= c[i].logit)) {
            sift__sort_canon(c, n, tmp);
            return;
        }
    for (size_t s = 0; s < n;) {
        size_t e = s + 1;
        while (e < n && c[e].logit == c[s].logit)
            e++;
        if (e - s > 1)
            sift__sort_id(c + s, e - s, tmp);
        s = e;
    }
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

/* Block maxima for the prefilter: blocks of PF_B elements. */
enum { PF_B = 64 };

/* Largest logit of c[s..e), four running maxima so the loop is not one
 * long dependency chain. Only its fkey is used, so the sign of a zero
 * maximum does not matter here. */
static inline float block_max(const sift_candidate *c, size_t s, size_t e)
{
    float m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
    size_t i = s;
    for (; i + 4 <= e; i += 4) {
        m0 = c[i].logit > m0 ? c[i].logit : m0;
        m1 = c[i + 1].logit > m1 ? c[i + 1].logit : m1;
        m2 = c[i + 2].logit > m2 ? c[i + 2].logit : m2;
        m3 = c[i + 3].logit > m3 ? c[i + 3].logit : m3;
    }
    for (; i < e; i++)
        m0 = c[i].logit > m0 ? c[i].logit : m0;
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    return m2 > m0 ? m2 : m0;
}

/* Prefilter for a small k on a large array. The k-th largest of the block
 * maxima, tau, is a lower bound of the k-th largest logit (k blocks have
 * a maximum at least that large), so only elements with fkey >= tau can
 * be among the canonical first k, and those sit in blocks whose maximum
 * is >= tau: usually about k blocks, so the second scan is tiny. Writes
 * to `out` the survivors' canonical keys (want_keys) or their indices,
 * ascending, and returns their count (>= k). Uses u64c and u64d. */
static size_t prefilter_top(sift__ctx *ctx, const sift_candidate *c, size_t n, size_t k,
                            uint64_t *out, int want_keys)
{
    size_t nb = (n + PF_B - 1) / PF_B;
    uint64_t *bm = ctx->ws->u64c;  /* block maxima, in block order */
    uint64_t *sel = ctx->ws->u64d; /* a copy the selection reorders */
    for (size_t b = 0; b < nb; b++) {
        size_t s = b * PF_B, e = s + PF_B < n ? s + PF_B : n;
        bm[b] = sift__fkey(block_max(c, s, e));
    }
    memcpy(sel, bm, nb * sizeof *sel);
    uint32_t tau = (uint32_t)kth_largest(sel, nb, k);
    size_t m = 0;
    for (size_t b = 0; b < nb; b++) {
        if (bm[b] < tau)
            continue;
        size_t s = b * PF_B, e = s + PF_B < n ? s + PF_B : n;
        for (size_t i = s; i < e; i++)
            if (sift__fkey(c[i].logit) >= tau)
                out[m++] = want_keys ? sift__ckey(c[i].logit, c[i].id) : (uint64_t)i;
    }
    return m;
}

static int use_prefilter(size_t n, size_t k)
{
    return n >= 8192 && k <= n / 256;
}

/* From this many elements on, sift__cut_top selects among one group of
 * keys after a counting pass (below, among all the keys). */
#define RADIX_KTH_MIN 65536

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
    size_t m;
    if (use_prefilter(n, k)) {
        m = prefilter_top(ctx, c, n, k, keys, 1);
    } else if (n >= RADIX_KTH_MIN) {
        /* One counting pass by the top 16 bits of the logit's key finds
         * the group that holds the k-th largest key (keys are larger in
         * a larger group, so the groups above hold fewer than k); only
         * that group's keys are selected among. */
        uint32_t *cnt = (uint32_t *)(void *)ctx->ws->u64c; /* 65536 <= 2 n */
        memset(cnt, 0, 65536 * sizeof *cnt);
        for (size_t i = 0; i < n; i++)
            cnt[sift__fkey(c[i].logit) >> 16]++;
        size_t above = 0;
        uint32_t g = 65535;
        while (above + cnt[g] < k)
            above += cnt[g--];
        m = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t f = sift__fkey(c[i].logit);
            keys[m] = ((uint64_t)f << 32) | (uint32_t) ~(uint32_t)c[i].id;
            m += (f >> 16) == g;
        }
        return kth_largest(keys, m, k - above);
    } else {
        for (size_t i = 0; i < n; i++)
            keys[i] = sift__ckey(c[i].logit, c[i].id);
        m = n;
    }
    return kth_largest(keys, m, k);
}

#ifdef SIFT__BAND_AVX512
static int keep_ge_vec_available(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("bmi2");
}

/* The compaction loop of sift__arr_keep_ge eight candidates at a time:
 * the same test (logit > cl, or logit == cl and id <= cid, unsigned;
 * ordered compares, so a NaN is never kept) on the odd (logit) and even
 * (id) 32-bit lanes, the verdicts of each candidate's pair folded into
 * one bit by pext, and the kept ones compressed and stored whole (a
 * later store overwrites the lanes past the kept ones; j <= i, so no
 * store reaches a candidate not yet read when out is c). Returns where
 * it stopped; *j is the count kept. In order: the scalar loop's result. */
__attribute__((target("avx512f,bmi2"))) static size_t
keep_ge_avx512(const sift_candidate *c, size_t n, float cl, uint32_t cid, sift_candidate *out,
               size_t *jout)
{
    const __m512 clv = _mm512_set1_ps(cl);
    const __m512i cidv = _mm512_set1_epi32((int32_t)cid);
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i v = _mm512_loadu_si512((const void *)(c + i));
        __m512 f = _mm512_castsi512_ps(v);
        unsigned gt = _mm512_cmp_ps_mask(f, clv, _CMP_GT_OQ);
        unsigned eq = _mm512_cmp_ps_mask(f, clv, _CMP_EQ_OQ);
        unsigned le = _mm512_cmp_epu32_mask(v, cidv, _MM_CMPINT_LE);
        unsigned k16 = (gt | (eq & (le << 1))) & 0xAAAAu;
        __mmask8 k = (__mmask8)_pext_u32(k16, 0xAAAAu);
        _mm512_storeu_si512((void *)(out + j), _mm512_maskz_compress_epi64(k, v));
        j += (size_t)__builtin_popcount((unsigned)k);
    }
    *jout = j;
    return i;
}
#endif

void sift__arr_keep_ge(sift__arr *a, uint64_t cut)
{
    if (a->order == SIFT__ORDER_CANON) {
        /* Keys fall along a canonical array: the kept ones are a prefix,
         * found by bisection. */
        size_t lo = 0, hi = a->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (sift__ckey(a->c[mid].logit, a->c[mid].id) >= cut)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo != a->n)
            a->dense = 0;
        a->n = lo;
        return;
    }
    size_t j = sift__keep_ge_into(a->c, a->n, cut, a->c);
    if (j != a->n)
        a->dense = 0;
    a->n = j;
}

size_t sift__keep_ge_into(const sift_candidate *c, size_t n, uint64_t cut, sift_candidate *out)
{
    /* ckey(x) >= cut, with the cut as a logit and an id: a larger logit,
     * or an equal one (-0 and +0 are equal both ways) and an id no larger.
     * Float compares on the row instead of a key per element; written
     * without a branch on the (unpredictable) verdict. */
    uint32_t k = (uint32_t)(cut >> 32);
    uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    float cl;
    memcpy(&cl, &u, sizeof cl);
    uint32_t cid = ~(uint32_t)cut;
    size_t j = 0;
    if (SIFT__UNLIKELY((u & 0x7fffffffu) > 0x7f800000u)) {
        /* a cut beyond every float (keep all or none): by the key */
        for (size_t i = 0; i < n; i++) {
            sift_candidate x = c[i];
            if (sift__ckey(x.logit, x.id) >= cut)
                out[j++] = x;
        }
        return j;
    }
    size_t i = 0;
#ifdef SIFT__BAND_AVX512
    if (n >= 64 && sift__simd()->level >= SIFT__SIMD_AVX512 && keep_ge_vec_available())
        i = keep_ge_avx512(c, n, cl, cid, out, &j);
#endif
    for (; i < n; i++) {
        sift_candidate x = c[i];
        int keep = (x.logit > cl) | ((x.logit == cl) & ((uint32_t)x.id <= cid));
        out[j] = x;
        j += (size_t)keep;
    }
    return j;
}

#ifdef SIFT__BAND_AVX512
/* keep_ge_avx512 with the weights: the same mask compresses w (eight
 * 64-bit lanes) and adds the kept ones' 32-bit halves into *lo and *hi
 * (each weight is at most 2^62, so neither lane sum overflows below 2^31
 * tokens). The stores of w reach no weight not yet read, as for c. */
__attribute__((target("avx512f,bmi2"))) static size_t
keep_ge_w_avx512(sift_candidate *c, uint64_t *w, size_t n, float cl, uint32_t cid, size_t *jout,
                 uint64_t *lo, uint64_t *hi)
{
    const __m512 clv = _mm512_set1_ps(cl);
    const __m512i cidv = _mm512_set1_epi32((int32_t)cid);
    const __m512i low32 = _mm512_set1_epi64(0xffffffffll);
    __m512i slo = _mm512_setzero_si512(), shi = _mm512_setzero_si512();
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i v = _mm512_loadu_si512((const void *)(c + i));
        __m512i wv = _mm512_loadu_si512((const void *)(w + i));
        __m512 f = _mm512_castsi512_ps(v);
        unsigned gt = _mm512_cmp_ps_mask(f, clv, _CMP_GT_OQ);
        unsigned eq = _mm512_cmp_ps_mask(f, clv, _CMP_EQ_OQ);
        unsigned le = _mm512_cmp_epu32_mask(v, cidv, _MM_CMPINT_LE);
        unsigned k16 = (gt | (eq & (le << 1))) & 0xAAAAu;
        __mmask8 k = (__mmask8)_pext_u32(k16, 0xAAAAu);
        _mm512_storeu_si512((void *)(c + j), _mm512_maskz_compress_epi64(k, v));
        _mm512_storeu_si512((void *)(w + j), _mm512_maskz_compress_epi64(k, wv));
        slo = _mm512_mask_add_epi64(slo, k, slo, _mm512_and_si512(wv, low32));
        shi = _mm512_mask_add_epi64(shi, k, shi, _mm512_srli_epi64(wv, 32));
        j += (size_t)__builtin_popcount((unsigned)k);
    }
    *lo += (uint64_t)_mm512_reduce_add_epi64(slo);
    *hi += (uint64_t)_mm512_reduce_add_epi64(shi);
    *jout = j;
    return i;
}
#endif

sift__u128 sift__arr_keep_ge_w(sift__arr *a, uint64_t cut, uint64_t *w)
{
    uint64_t lo = 0, hi = 0;
    size_t n = a->n, from = 0;
    if (a->order == SIFT__ORDER_CANON) {
        /* The kept ones are a prefix: their weights stay where they are. */
        sift__arr_keep_ge(a, cut);
    } else {
        /* sift__keep_ge_into's test, in place, moving w[i] with c[i]. */
        sift_candidate *c = a->c;
        uint32_t k = (uint32_t)(cut >> 32);
        uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
        float cl;
        memcpy(&cl, &u, sizeof cl);
        uint32_t cid = ~(uint32_t)cut;
        size_t i = 0, j = 0;
        if (SIFT__UNLIKELY((u & 0x7fffffffu) > 0x7f800000u)) {
            for (; i < n; i++) {
                sift_candidate x = c[i];
                uint64_t wi = w[i];
                if (sift__ckey(x.logit, x.id) >= cut) {
                    c[j] = x;
                    w[j++] = wi;
                }
            }
        } else {
#ifdef SIFT__BAND_AVX512
            if (n >= 64 && sift__simd()->level >= SIFT__SIMD_AVX512 && keep_ge_vec_available()) {
                i = keep_ge_w_avx512(c, w, n, cl, cid, &j, &lo, &hi);
                from = j; /* the vector loop summed w[0..j) */
            }
#endif
            for (; i < n; i++) {
                sift_candidate x = c[i];
                uint64_t wi = w[i];
                int keep = (x.logit > cl) | ((x.logit == cl) & ((uint32_t)x.id <= cid));
                c[j] = x;
                w[j] = wi;
                j += (size_t)keep;
            }
        }
        if (j != n)
            a->dense = 0;
        a->n = j;
    }
    for (size_t i = from; i < a->n; i++) {
        lo += w[i] & 0xffffffffu;
        hi += w[i] >> 32;
    }
    sift__u128 W = {lo, 0};
    return sift__u128_add(W, (sift__u128){hi << 32, hi >> 32});
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
    if (!use_prefilter(a->n, k)) {
        sift__arr_keep_ge(a, sift__cut_top(ctx, a->c, a->n, k));
        return;
    }
    /* Every survivor is among the prefiltered elements, whose indices
     * come out ascending: cut among them and compact them in place,
     * without another pass over the whole array. */
    uint64_t *idx = ctx->ws->u64b;
    size_t m = prefilter_top(ctx, a->c, a->n, k, idx, 0);
    uint64_t *keys = ctx->ws->u64c;
    for (size_t j = 0; j < m; j++) {
        const sift_candidate *x = &a->c[idx[j]];
        keys[j] = sift__ckey(x->logit, x->id);
    }
    uint64_t cut = kth_largest(keys, m, k);
    size_t out = 0;
    for (size_t j = 0; j < m; j++) {
        sift_candidate x = a->c[idx[j]];
        if (sift__ckey(x.logit, x.id) >= cut)
            a->c[out++] = x;
    }
    a->n = out;
    a->dense = 0;
}

/* ------------------------------------------------------------------ */
/* Largest logit                                                       */
/* ------------------------------------------------------------------ */

#ifdef SIFT__BAND_AVX512
/* block_max(c, 0, n) with four AVX-512 accumulators over the logits (the
 * odd floats of the candidates; the even lanes, the ids, stay -inf).
 * vmaxps returns its second operand when one is a NaN, so a NaN logit is
 * skipped as the scalar compare skips it; the value is the same, the sign
 * of a zero maximum aside. */
__attribute__((target("avx512f"))) static float max_logit_avx512(const sift_candidate *c, size_t n)
{
    const __mmask16 odd = 0xAAAA;
    __m512 a0 = _mm512_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const float *f = (const float *)(const void *)(c + i);
        a0 = _mm512_mask_max_ps(a0, odd, _mm512_loadu_ps(f), a0);
        a1 = _mm512_mask_max_ps(a1, odd, _mm512_loadu_ps(f + 16), a1);
        a2 = _mm512_mask_max_ps(a2, odd, _mm512_loadu_ps(f + 32), a2);
        a3 = _mm512_mask_max_ps(a3, odd, _mm512_loadu_ps(f + 48), a3);
    }
    float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3)));
    float t = block_max(c, i, n);
    return t > m ? t : m;
}
#endif

float sift__max_logit(const sift_candidate *c, size_t n)
{
    /* Four running maxima break the dependency chain. Their combination
     * is the same value as one left-to-right scan, except that the sign
     * of a zero maximum could differ (-0 == +0): then rescan plainly, so
     * the result is bit-identical to the sequential definition. The
     * AVX-512 form (through sift__simd()) is the same value. */
    float m;
#ifdef SIFT__BAND_AVX512
    if (n >= 256 && sift__simd()->level >= SIFT__SIMD_AVX512)
        m = max_logit_avx512(c, n);
    else
#endif
        m = block_max(c, 0, n);
    if (m == 0.0f) {
        m = -INFINITY;
        for (size_t i = 0; i < n; i++)
            m = c[i].logit > m ? c[i].logit : m;
    }
    return m;
}

float sift__arr_max_logit(const sift__arr *a)
{
    /* The canonical first candidate has the largest logit and is the
     * first one a left-to-right scan meets among those equal to it, so it
     * is bitwise the scan's result (-0 and +0 included). */
    if (a->order == SIFT__ORDER_CANON && a->n > 0)
        return a->c[0].logit;
    return sift__max_logit(a->c, a->n);
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

/* Histogram buckets of the weighted prefix: 2^HB of them, a monotone
 * function of the weight (mass_bucket). */
enum { HB = 12, HBUCKETS = 1 << HB };

/* The bucket of a weight w <= 2^62: the exponent of (double)w and the top
 * 6 bits of its mantissa, 64 buckets per binade of weight, 0 for w <= 1
 * (at most 62 * 64 + 63 < HBUCKETS). The conversion rounds, but is
 * non-decreasing, so a larger weight never has a smaller bucket; a
 * larger logit has a weight at least as large, so buckets never increase
 * along canonical order. Tokens of equal weight share a bucket, which is
 * searched exactly. On a flat row (every weight within a few binades of
 * the largest) this still gives about 64 buckets per binade, where the
 * top 11 bits of the logit's key gave 4. */
static inline uint32_t mass_bucket(uint64_t w)
{
    double d = (double)(int64_t)w;
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    uint32_t e = (uint32_t)(u >> 46), one = 1023u << 6;
    return e > one ? e - one : 0;
}

/* ------------------------------------------------------------------ */
/* The band path of sift__mass_prefix                                  */
/* ------------------------------------------------------------------ */

/* The top 18 bits of (double)w (w <= 2^62): mass_bucket(w) is e - (1023
 * << 6) when e exceeds that, else 0, so bucket > b <=> e > b + (1023 <<
 * 6) for every b >= 0, and bucket >= b <=> e >= b + (1023 << 6) for
 * b >= 1. */
static inline uint32_t mass_e(uint64_t w)
{
    double d = (double)(int64_t)w;
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return (uint32_t)(u >> 46);
}

/* One pass over w[0..n) for the band [e_lo, e_hi] of mass_e: the exact
 * mass of the elements above it (e > e_hi) in 32-bit halves added to
 * *lo and *hi, their count added to *above, and the indices of the
 * elements in it (e_lo <= e <= e_hi) written ascending to band[];
 * returns how many. The definition; band_pass_avx512 gives the same
 * results. */
static size_t band_pass_scalar(const uint64_t *w, size_t i, size_t n, uint32_t e_lo, uint32_t e_hi,
                               uint64_t *lo, uint64_t *hi, size_t *above, uint64_t *band, size_t m)
{
    uint64_t sl = 0, sh = 0;
    size_t na = 0;
    for (; i < n; i++) {
        uint32_t e = mass_e(w[i]);
        uint64_t a = e > e_hi;
        sl += (w[i] & 0xffffffffu) & -a;
        sh += (w[i] >> 32) & -a;
        na += (size_t)a;
        band[m] = i;
        m += (size_t)((e >= e_lo) & (e <= e_hi));
    }
    *lo += sl;
    *hi += sh;
    *above += na;
    return m;
}

#ifdef SIFT__BAND_AVX512

/* band_pass_scalar eight lanes at a time (AVX-512F and DQ, for the
 * conversion to double, which rounds as C's does). Branch-free: every
 * block compresses its band lanes into a register and stores all eight,
 * advancing by their count (a later block overwrites the rest; m <= i,
 * so the store stays inside band[0..n)). The same sums, count and
 * indices as the scalar form: integer additions in another order. */
__attribute__((target("avx512f,avx512dq"))) static size_t
band_pass_avx512(const uint64_t *w, size_t n, uint32_t e_lo, uint32_t e_hi, uint64_t *lo,
                 uint64_t *hi, size_t *above, uint64_t *band)
{
    const __m512i vhi = _mm512_set1_epi64(e_hi), vlo = _mm512_set1_epi64(e_lo);
    const __m512i lo32 = _mm512_set1_epi64(0xffffffff), eight = _mm512_set1_epi64(8);
    __m512i acc_lo = _mm512_setzero_si512(), acc_hi = acc_lo, cnt = acc_lo;
    __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i one = _mm512_set1_epi64(1);
    size_t m = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i wv = _mm512_loadu_si512((const void *)(w + i));
        __m512i e = _mm512_srli_epi64(_mm512_castpd_si512(_mm512_cvtepi64_pd(wv)), 46);
        __mmask8 ka = _mm512_cmpgt_epu64_mask(e, vhi);
        __mmask8 kb = _mm512_mask_cmpge_epu64_mask((__mmask8)~ka, e, vlo);
        acc_lo = _mm512_mask_add_epi64(acc_lo, ka, acc_lo, _mm512_and_si512(wv, lo32));
        acc_hi = _mm512_mask_add_epi64(acc_hi, ka, acc_hi, _mm512_srli_epi64(wv, 32));
        cnt = _mm512_mask_add_epi64(cnt, ka, cnt, one);
        _mm512_storeu_si512((void *)(band + m), _mm512_maskz_compress_epi64(kb, iota));
        m += (size_t)__builtin_popcount((unsigned)kb);
        iota = _mm512_add_epi64(iota, eight);
    }
    *lo += (uint64_t)_mm512_reduce_add_epi64(acc_lo);
    *hi += (uint64_t)_mm512_reduce_add_epi64(acc_hi);
    *above += (size_t)_mm512_reduce_add_epi64(cnt);
    return band_pass_scalar(w, i, n, e_lo, e_hi, lo, hi, above, band, m);
}
#endif

/* The band pass through the level of sift__simd() (1 when the AVX-512
 * form runs; tests compare it with the scalar one). */
static size_t band_pass(int vec, const uint64_t *w, size_t n, uint32_t e_lo, uint32_t e_hi,
                        sift__u128 *mass, size_t *above, uint64_t *band)
{
    uint64_t lo = 0, hi = 0;
    size_t m;
    *above = 0;
#ifdef SIFT__BAND_AVX512
    if (vec)
        m = band_pass_avx512(w, n, e_lo, e_hi, &lo, &hi, above, band);
    else
#endif
        m = band_pass_scalar(w, 0, n, e_lo, e_hi, &lo, &hi, above, band, 0);
    (void)vec;
    sift__u128 M = {lo, 0};
    *mass = sift__u128_add(M, (sift__u128){hi << 32, hi >> 32});
    return m;
}

static int band_vec_available(void)
{
#ifdef SIFT__BAND_AVX512
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

/* Appends to heavy[] the indices i in [i0, n) with w[i] >= theta,
 * ascending, while fewer than cap are stored; returns the new count, or
 * cap + 1 when there were more. */
static size_t heavy_scan_scalar(const uint64_t *w, size_t i, size_t n, uint64_t theta,
                                uint64_t *heavy, size_t h, size_t cap)
{
    for (; i < n; i++) {
        if (w[i] >= theta) {
            if (h == cap)
                return cap + 1;
            heavy[h++] = i;
        }
    }
    return h;
}

#ifdef SIFT__BAND_AVX512
__attribute__((target("avx512f"))) static size_t
heavy_scan_avx512(const uint64_t *w, size_t n, uint64_t theta, uint64_t *heavy, size_t cap)
{
    const __m512i t = _mm512_set1_epi64((int64_t)theta);
    size_t h = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        __mmask8 k = _mm512_cmpge_epu64_mask(_mm512_loadu_si512((const void *)(w + i)), t);
        if (SIFT__UNLIKELY(k)) {
            for (unsigned b = k; b; b &= b - 1) {
                if (h == cap)
                    return cap + 1;
                heavy[h++] = i + (size_t)__builtin_ctz(b);
            }
        }
    }
    return heavy_scan_scalar(w, i, n, theta, heavy, h, cap);
}
#endif

static size_t heavy_scan(int vec, const uint64_t *w, size_t n, uint64_t theta, uint64_t *heavy,
                         size_t cap)
{
#ifdef SIFT__BAND_AVX512
    if (vec)
        return heavy_scan_avx512(w, n, theta, heavy, cap);
#endif
    (void)vec;
    return heavy_scan_scalar(w, 0, n, theta, heavy, 0, cap);
}

/* The estimate takes every weight of at least 1/HEAVY_PART of the
 * estimated total exactly (at most HEAVY_CAP of them) and every
 * SAMPLE_S-th of the others. */
#define HEAVY_PART 4096
#define HEAVY_CAP 8192

/* Every SAMPLE_S-th weight goes into the estimate of the band path. */
enum { SAMPLE_S = 16 };
/* Bands of at most this many elements are searched by weighted_select
 * directly; larger ones get a histogram of their own first. */
#define BAND_DIRECT_MAX 2048

/* On the band's elements (indices band[0..m) into c, weights Wt[0..m),
 * every weight with mass_bucket in [b_lo, b_hi]) and T, with the whole
 * band reaching T: the same answer as weighted_select on their keys,
 * after an exact histogram of the weights (h: 2 * HBUCKETS entries of
 * scratch) narrows the search to one bucket; only that bucket's keys are
 * formed (in K, its weights moved to the front of Wt). */
static int band_hist_select(const sift_candidate *c, const uint64_t *band, uint64_t *K,
                            uint64_t *Wt, size_t m, sift__u128 T, int strict, uint32_t b_lo,
                            uint32_t b_hi, uint64_t *h, uint64_t *cut, size_t *len)
{
    memset(h + 2 * (size_t)b_lo, 0, 2 * (size_t)(b_hi - b_lo + 1) * sizeof *h);
    for (size_t i = 0; i < m; i++) {
        uint32_t b = mass_bucket(Wt[i]);
        h[2 * b] += Wt[i] & 0xffffffffu;
        h[2 * b + 1] += Wt[i] >> 32;
    }
    sift__u128 above = {0, 0};
    int64_t bstar = -1;
    for (int64_t b = b_hi; b >= (int64_t)b_lo; b--) {
        uint64_t lo = h[2 * b], hi = h[2 * b + 1];
        sift__u128 mb = sift__u128_add((sift__u128){lo, 0}, (sift__u128){hi << 32, hi >> 32});
        sift__u128 with = sift__u128_add(above, mb);
        if (reaches(with, T, strict)) {
            bstar = b;
            break;
        }
        above = with;
    }
    if (bstar < 0)
        return 0;
    size_t k = 0, n_above = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t b = mass_bucket(Wt[i]);
        n_above += b > (uint32_t)bstar;
        if (b == (uint32_t)bstar) {
            const sift_candidate *x = &c[band[i]];
            K[k] = sift__ckey(x->logit, x->id);
            Wt[k] = Wt[i];
            k++;
        }
    }
    size_t l = 0;
    if (!weighted_select(K, Wt, k, sift__u128_sub(T, above), strict, cut, &l))
        return 0;
    *len = n_above + l;
    return 1;
}

/* The band path: an estimate of the mass above each weight bucket from
 * every SAMPLE_S-th weight picks a band of buckets that should hold the
 * answer (with a margin of four standard deviations of the estimate;
 * the weights of at least 1/HEAVY_PART of the estimated total, found by
 * a vector scan, enter it exactly);
 * one vector pass finds the exact mass and count above the band and the
 * band's elements, and the answer is searched among those. The estimate
 * only chooses where to look: when the exact sums show that the answer
 * lies outside the band, this returns 0 and the caller takes the full
 * histogram. Needs n >= 4 * HBUCKETS; uses u64b, u64c and u64d. */
static int mass_prefix_band(sift__ctx *ctx, const sift_candidate *c, const uint64_t *w, size_t n,
                            sift__u128 T, int strict, int vec, uint64_t *cut, size_t *len)
{
    double *hm = (double *)(void *)ctx->ws->u64c, *hq = hm + HBUCKETS;
    uint64_t *heavy = ctx->ws->u64d;
    /* One strided pass: the sample's histogram and its total. */
    memset(hm, 0, 2 * HBUCKETS * sizeof *hm);
    double total = 0;
    for (size_t i = 0; i < n; i += SAMPLE_S) {
        uint32_t b = mass_bucket(w[i]);
        double d = (double)(int64_t)w[i] * SAMPLE_S;
        total += d;
        hm[b] += d;
        hq[b] += d * d;
    }
    /* The heavy weights (1 <= theta): none can reach a theta above 2^62,
     * the largest weight there is, and then the scan is skipped. Each one
     * found enters exactly, and a sampled one leaves the sample's part
     * (an estimate: the rounding of the subtraction does not matter). */
    double td = total / HEAVY_PART;
    uint64_t theta = td < 1.0 ? 1 : td > 0x1p62 ? ((uint64_t)1 << 62) + 1 : (uint64_t)td;
    size_t nh = theta > (uint64_t)1 << 62 ? 0 : heavy_scan(vec, w, n, theta, heavy, HEAVY_CAP);
    if (nh > HEAVY_CAP)
        return 0;
    for (size_t j = 0; j < nh; j++) {
        uint64_t x = w[heavy[j]];
        uint32_t b = mass_bucket(x);
        hm[b] += (double)(int64_t)x;
        if (heavy[j] % SAMPLE_S == 0) {
            double d = (double)(int64_t)x * SAMPLE_S;
            hm[b] -= d;
            hq[b] -= d * d;
        }
    }
    double Td = sift__u128_to_double(T);
    double cm = 0, cq = 0;
    int bhat = 0;
    for (int b = HBUCKETS - 1; b >= 0; b--) {
        cm += hm[b];
        cq += hq[b];
        if (cm >= Td) {
            bhat = b;
            break;
        }
    }
    /* the estimate of the mass at or above a bucket: the heavy weights
     * there and SAMPLE_S times the sampled light ones, whose variance is
     * about SAMPLE_S^2 times their squares (hq holds the scaled ones) */
    double delta = 4.0 * sqrt(cq > 0 ? cq : 0) + (double)theta;
    int b_hi = -1, b_lo = 0;
    cm = 0;
    for (int b = HBUCKETS - 1; b >= 0; b--) {
        cm += hm[b];
        if (b_hi < 0 && cm > Td - delta)
            b_hi = b;
        if (cm >= Td + delta) {
            b_lo = b;
            break;
        }
    }
    if (b_hi < 0)
        b_hi = bhat;
    if (b_lo > b_hi)
        b_lo = b_hi;
    const uint32_t one = 1023u << 6;
    uint32_t e_hi = (uint32_t)b_hi + one, e_lo = b_lo ? (uint32_t)b_lo + one : 0;
    uint64_t *band = ctx->ws->u64b;
    sift__u128 above;
    size_t n_above;
    size_t m = band_pass(vec, w, n, e_lo, e_hi, &above, &n_above, band);
    if (reaches(above, T, strict))
        return 0; /* the answer lies above the band */
    uint64_t *K = ctx->ws->u64c, *Wt = ctx->ws->u64d;
    uint64_t sl = 0, sh = 0;
    for (size_t j = 0; j < m; j++) {
        uint64_t x = w[band[j]];
        Wt[j] = x;
        sl += x & 0xffffffffu;
        sh += x >> 32;
    }
    sift__u128 with = sift__u128_add(
        above, sift__u128_add((sift__u128){sl, 0}, (sift__u128){sh << 32, sh >> 32}));
    if (!reaches(with, T, strict))
        return 0; /* below the band, or nowhere */
    sift__u128 Tb = sift__u128_sub(T, above);
    size_t l = 0;
    int ok;
    if (m <= BAND_DIRECT_MAX) {
        for (size_t j = 0; j < m; j++)
            K[j] = sift__ckey(c[band[j]].logit, c[band[j]].id);
        ok = weighted_select(K, Wt, m, Tb, strict, cut, &l);
    } else {
        /* the histogram goes past the band's indices in u64b; a band too
         * large to leave room for it is handed over */
        if (m + 2 * HBUCKETS > n)
            return 0;
        ok = band_hist_select(c, band, K, Wt, m, Tb, strict, (uint32_t)b_lo, (uint32_t)b_hi,
                              band + m, cut, &l);
    }
    if (!ok)
        return 0; /* unreachable: the band reaches what is left of T */
    *len = n_above + l;
    return 1;
}

/* Below this many candidates, sift__mass_prefix sorts and walks. */
#define SMALL_MASS_N 48

size_t sift__arr_mass_prefix(sift__ctx *ctx, const sift__arr *a, const uint64_t *w, sift__u128 T,
                             int strict, uint64_t *cut)
{
    if (a->order != SIFT__ORDER_CANON)
        return sift__mass_prefix(ctx, a->c, w, a->n, T, strict, cut);
    /* Stored in canonical order: the definition itself, a walk that
     * stops where the prefix mass reaches T. */
    sift__u128 run = {0, 0};
    for (size_t i = 0; i < a->n; i++) {
        run = sift__u128_add64(run, w[i]);
        if (reaches(run, T, strict)) {
            *cut = sift__ckey(a->c[i].logit, a->c[i].id);
            return i + 1;
        }
    }
    *cut = a->n ? sift__ckey(a->c[a->n - 1].logit, a->c[a->n - 1].id) : UINT64_MAX;
    return a->n;
}

size_t sift__mass_prefix(sift__ctx *ctx, const sift_candidate *c, const uint64_t *w, size_t n,
                         sift__u128 T, int strict, uint64_t *cut)
{
    uint64_t *K = ctx->ws->u64c;
    uint64_t *Wt = ctx->ws->u64d;
    size_t len = 0;
    if (n <= SMALL_MASS_N) {
        /* Few candidates (a slice after a truncation): sort the keys with
         * their weights by insertion and walk them; the same definition,
         * less machinery. */
        for (size_t i = 0; i < n; i++) {
            uint64_t k = sift__ckey(c[i].logit, c[i].id), wi = w[i];
            size_t j = i;
            for (; j > 0 && K[j - 1] < k; j--) {
                K[j] = K[j - 1];
                Wt[j] = Wt[j - 1];
            }
            K[j] = k;
            Wt[j] = wi;
        }
        sift__u128 run = {0, 0};
        for (size_t i = 0; i < n; i++) {
            run = sift__u128_add64(run, Wt[i]);
            if (reaches(run, T, strict)) {
                *cut = K[i];
                return i + 1;
            }
        }
        *cut = n ? K[n - 1] : UINT64_MAX;
        return n;
    }
    if (n >= 4 * HBUCKETS) {
        /* One pass sums the weights per weight bucket (mass_bucket) and
         * stores each element's bucket; walking the buckets from the top
         * finds the one where the prefix mass reaches T, and only that
         * bucket's elements need an exact search. Each weight is split
         * into 32-bit halves summed in separate 64-bit counters, which
         * cannot overflow for n < 2^32, so no carries are tracked in the
         * loop. */
        if (!strict && T.hi == 0 && T.lo == 0) {
            /* Every prefix reaches 0; the shortest one still holds the
             * canonical first token. */
            uint64_t mx = 0;
            for (size_t i = 0; i < n; i++) {
                uint64_t k = sift__ckey(c[i].logit, c[i].id);
                mx = k > mx ? k : mx;
            }
            *cut = mx;
            return 1;
        }
        /* By default the band path runs only with its AVX-512 pass: the
         * scalar pass (which the tests run) costs more than the full
         * histogram does. */
        int mode = ctx->mass_path;
        int bvec = band_vec_available() &&
                   (mode == SIFT__MASS_BAND_VEC ||
                    (mode == SIFT__MASS_DEFAULT && sift__simd()->level >= SIFT__SIMD_AVX512));
        if (bvec || mode == SIFT__MASS_BAND_VEC || mode == SIFT__MASS_BAND_SCALAR) {
            if (mass_prefix_band(ctx, c, w, n, T, strict, bvec, cut, &len)) {
                ctx->band_answered++;
                return len;
            }
            ctx->band_handed_over++;
        }
        uint64_t *h = ctx->ws->u64c; /* h[2b] low halves, h[2b + 1] high */
        /* Each element's bucket, 16 bits, in u64b (n / 4 of its n
         * entries). */
        uint16_t *bk = (uint16_t *)(void *)ctx->ws->u64b;
        /* Four histograms, element i going to copy i mod 4, merged after:
         * neighbours often share a bucket (weights crowd a few binades),
         * and with one copy every add waited for the previous store to
         * the same counter. The copies fill u64c and u64d (2 * 2 *
         * HBUCKETS entries each, which n >= 4 * HBUCKETS guarantees); K
         * and Wt reuse them only after the merge. Integer sums, so the
         * merge order does not matter. */
        uint64_t *hc[4] = {h, h + 2 * HBUCKETS, ctx->ws->u64d, ctx->ws->u64d + 2 * HBUCKETS};
        for (int q = 0; q < 4; q++)
            memset(hc[q], 0, 2 * HBUCKETS * sizeof *h);
        uint64_t *h0 = hc[0], *h1 = hc[1], *h2 = hc[2], *h3 = hc[3];
        size_t i = 0;
        for (; i + 4 <= n; i += 4) {
            uint64_t w0 = w[i], w1 = w[i + 1], w2 = w[i + 2], w3 = w[i + 3];
            uint32_t b0 = mass_bucket(w0), b1 = mass_bucket(w1);
            uint32_t b2 = mass_bucket(w2), b3 = mass_bucket(w3);
            bk[i] = (uint16_t)b0;
            bk[i + 1] = (uint16_t)b1;
            bk[i + 2] = (uint16_t)b2;
            bk[i + 3] = (uint16_t)b3;
            h0[2 * b0] += w0 & 0xffffffffu;
            h0[2 * b0 + 1] += w0 >> 32;
            h1[2 * b1] += w1 & 0xffffffffu;
            h1[2 * b1 + 1] += w1 >> 32;
            h2[2 * b2] += w2 & 0xffffffffu;
            h2[2 * b2 + 1] += w2 >> 32;
            h3[2 * b3] += w3 & 0xffffffffu;
            h3[2 * b3 + 1] += w3 >> 32;
        }
        for (; i < n; i++) {
            uint32_t b = mass_bucket(w[i]);
            bk[i] = (uint16_t)b;
            h[2 * b] += w[i] & 0xffffffffu;
            h[2 * b + 1] += w[i] >> 32;
        }
        for (size_t b = 0; b < 2 * HBUCKETS; b++)
            h[b] += hc[1][b] + hc[2][b] + hc[3][b];
        sift__u128 above = {0, 0};
        int bstar = -1;
        for (int b = HBUCKETS - 1; b >= 0; b--) {
            uint64_t lo = h[2 * b], hi = h[2 * b + 1];
            sift__u128 mb = {lo + (hi << 32), hi >> 32};
            if (mb.lo < lo)
                mb.hi++;
            sift__u128 with = sift__u128_add(above, mb);
            if (reaches(with, T, strict)) {
                bstar = b;
                break;
            }
            above = with;
        }
        if (bstar >= 0) {
            /* Gather the bucket (K and Wt overwrite the histogram, which
             * is no longer needed) and count what lies above it. */
            size_t m = 0, n_above = 0;
            uint16_t bs = (uint16_t)bstar;
            const int vec = sift__simd()->level > SIFT__SIMD_SCALAR;
            (void)vec;
            /* Blocks of 64: a branch-free count (it vectorizes) and a
             * look at the elements only in a block that holds the bucket. */
            for (size_t s0 = 0; s0 < n; s0 += 64) {
                size_t e0 = n - s0 > 64 ? s0 + 64 : n;
                uint32_t cnt = 0, eq = 0;
                size_t j = s0;
#if defined(__GNUC__) || defined(__clang__)
                /* Eight buckets at a time with the compiler's generic
                 * vectors (SSE2, NEON); the same count as the scalar
                 * loop below, which SIFT_SIMD=scalar selects (so the
                 * tests run both). */
                typedef uint16_t v8u __attribute__((vector_size(16)));
                typedef int16_t v8s __attribute__((vector_size(16)));
                if (e0 - s0 == 64 && vec) {
                    v8u bv = {bs, bs, bs, bs, bs, bs, bs, bs};
                    v8s gt = {0, 0, 0, 0, 0, 0, 0, 0}, q = gt;
                    for (; j < e0; j += 8) {
                        v8u x;
                        memcpy(&x, bk + j, sizeof x);
                        gt -= (v8s)(x > bv); /* a true lane is -1 */
                        q |= (v8s)(x == bv);
                    }
                    for (int l = 0; l < 8; l++) {
                        cnt += (uint32_t)gt[l];
                        eq |= (uint32_t)(q[l] != 0);
                    }
                }
#endif
                for (; j < e0; j++) {
                    cnt += bk[j] > bs;
                    eq |= bk[j] == bs;
                }
                n_above += cnt;
                if (!eq)
                    continue;
                for (j = s0; j < e0; j++) {
                    if (bk[j] == bs) {
                        K[m] = sift__ckey(c[j].logit, c[j].id);
                        Wt[m] = w[j];
                        m++;
                    }
                }
            }
            if (weighted_select(K, Wt, m, sift__u128_sub(T, above), strict, cut, &len))
                return n_above + len;
            /* unreachable: the bucket's mass reaches what is left of T;
             * the general path below would still answer correctly */
        } else {
            goto none; /* no bucket reaches T, so no prefix does */
        }
    }
    for (size_t i = 0; i < n; i++) {
        K[i] = sift__ckey(c[i].logit, c[i].id);
        Wt[i] = w[i];
    }
    if (weighted_select(K, Wt, n, T, strict, cut, &len))
        return len;
none:;
    /* No prefix reaches T: everything, cut at the smallest key. */
    uint64_t mn = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = sift__ckey(c[i].logit, c[i].id);
        mn = k < mn ? k : mn;
    }
    *cut = mn;
    return n;
}

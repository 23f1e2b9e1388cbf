/*
 * select.c - canonical order without sorting the row.
 *
 * Owns the sorts (canonical and by id), the top-k cut and the largest
 * logit (the weighted prefix search is in core/mass.c, the softmax
 * weights themselves in core/weights.c). Every function here computes a
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
 * that is proven to round like sift__expf, the mass prefix (core/mass.c)
 * sums weights per weight bucket and searches one bucket, and small top-k cuts
 * read only the 64-element blocks that can hold a survivor. Each of these
 * is checked bit for bit against the plain definition in check_num and
 * check_select; results never depend on which path ran.
 */
#include <math.h>

#include "../sift_internal.h"
#include "simd.h"

/* The AVX-512 forms of this file (max_logit_avx512, keep_ge_avx512,
 * keep_ge_w_avx512, keep_ge_f_avx512) and the AVX2 ones (max_logit_avx2,
 * keep_ge_avx2, keep_ge_w_avx2, keep_ge_f_avx2), chosen at run time. */
#if defined(__x86_64__) && !defined(SIFT_NO_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define SIFT__BAND_AVX512 1
#include <immintrin.h>

#include "compress_avx2.h"
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

/* The keep bits of the eight candidates in v (bit l: candidate l):
 * sift__arr_keep_ge's test (logit > cl, or logit == cl and id <= cid,
 * unsigned; ordered compares, so a NaN is never kept) on the odd (logit)
 * and even (id) 32-bit lanes, the verdicts of each candidate's pair
 * folded into one bit by pext. */
__attribute__((target("avx512f,bmi2"), always_inline)) static inline __mmask8
keep8_avx512(__m512i v, __m512 clv, __m512i cidv)
{
    __m512 f = _mm512_castsi512_ps(v);
    unsigned gt = _mm512_cmp_ps_mask(f, clv, _CMP_GT_OQ);
    unsigned eq = _mm512_cmp_ps_mask(f, clv, _CMP_EQ_OQ);
    unsigned le = _mm512_cmp_epu32_mask(v, cidv, _MM_CMPINT_LE);
    unsigned k16 = (gt | (eq & (le << 1))) & 0xAAAAu;
    return (__mmask8)_pext_u32(k16, 0xAAAAu);
}

/* The compaction loop of sift__arr_keep_ge eight candidates at a time
 * (keep8_avx512), the kept ones compressed and stored whole (a later
 * store overwrites the lanes past the kept ones; j <= i, so no store
 * reaches a candidate not yet read when out is c). Returns where it
 * stopped; *j is the count kept. In order: the scalar loop's result. */
__attribute__((target("avx512f,bmi2"))) static size_t
keep_ge_avx512(const sift_candidate *c, size_t n, float cl, uint32_t cid, sift_candidate *out,
               size_t *jout)
{
    const __m512 clv = _mm512_set1_ps(cl);
    const __m512i cidv = _mm512_set1_epi32((int32_t)cid);
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i v = _mm512_loadu_si512((const void *)(c + i));
        __mmask8 k = keep8_avx512(v, clv, cidv);
        _mm512_storeu_si512((void *)(out + j), _mm512_maskz_compress_epi64(k, v));
        j += (size_t)__builtin_popcount((unsigned)k);
    }
    *jout = j;
    return i;
}
#endif

#ifdef SIFT__BAND_AVX512
/* The keep bits of the four candidates in v (bit l: candidate l): the
 * test of keep_ge_avx512 on the odd (logit) and even (id) 32-bit lanes,
 * the id compared unsigned by flipping the sign bits (cidf = cid with
 * its sign bit flipped); the pair's verdicts folded into one bit. */
__attribute__((target("avx2"))) static inline unsigned keep4_ge_avx2(__m256i v, __m256 clv,
                                                                     __m256i cidf)
{
    const __m256i flip = _mm256_set1_epi32((int32_t)0x80000000u);
    __m256 f = _mm256_castsi256_ps(v);
    unsigned gt = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(f, clv, _CMP_GT_OQ));
    unsigned eq = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(f, clv, _CMP_EQ_OQ));
    unsigned idgt = (unsigned)_mm256_movemask_ps(
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_xor_si256(v, flip), cidf)));
    unsigned k8 = (gt | (eq & ~(idgt << 1))) & 0xAAu;
    return ((k8 >> 1) & 1u) | ((k8 >> 2) & 2u) | ((k8 >> 3) & 4u) | ((k8 >> 4) & 8u);
}

/* keep_ge_avx512 at AVX2: eight candidates a step, both halves loaded
 * before either is stored (at j <= i, or into a buffer of n), each moved
 * to the front by one permute (compress_avx2.h). */
__attribute__((target("avx2"))) static size_t keep_ge_avx2(const sift_candidate *c, size_t n,
                                                           float cl, uint32_t cid,
                                                           sift_candidate *out, size_t *jout)
{
    const __m256 clv = _mm256_set1_ps(cl);
    const __m256i cidf = _mm256_set1_epi32((int32_t)(cid ^ 0x80000000u));
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)(c + i));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(c + i + 4));
        unsigned keep = keep4_ge_avx2(v0, clv, cidf) | keep4_ge_avx2(v1, clv, cidf) << 4;
        if (keep)
            j += sift__compress8_store(out + j, c + i, keep);
    }
    *jout = j;
    return i;
}

/* keep_ge_avx2 moving the weights too, their kept 32-bit halves summed
 * into *lo and *hi (as keep_ge_w_avx512). */
__attribute__((target("avx2"))) static size_t keep_ge_w_avx2(sift_candidate *c, uint64_t *w,
                                                             size_t n, float cl, uint32_t cid,
                                                             size_t *jout, uint64_t *lo,
                                                             uint64_t *hi)
{
    const __m256 clv = _mm256_set1_ps(cl);
    const __m256i cidf = _mm256_set1_epi32((int32_t)(cid ^ 0x80000000u));
    __m256i slo = _mm256_setzero_si256(), shi = _mm256_setzero_si256();
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)(c + i));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(c + i + 4));
        unsigned keep = keep4_ge_avx2(v0, clv, cidf) | keep4_ge_avx2(v1, clv, cidf) << 4;
        if (!keep)
            continue;
        sift__sum8_halves(w + i, keep, &slo, &shi);
        sift__compress8_store(w + j, w + i, keep);
        j += sift__compress8_store(c + j, c + i, keep);
    }
    *lo += sift__lanes4_sum(slo);
    *hi += sift__lanes4_sum(shi);
    *jout = j;
    return i;
}
#endif

/* ckey(x) >= cut, with the cut as a logit *cl and an id *cid: a larger
 * logit, or an equal one (-0 and +0 are equal both ways) and an id no
 * larger. Returns 1 when the cut lies beyond every float (keep all or
 * none), where only the key itself can be compared. */
static int cut_split(uint64_t cut, float *cl, uint32_t *cid)
{
    uint32_t k = (uint32_t)(cut >> 32);
    uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    memcpy(cl, &u, sizeof *cl);
    *cid = ~(uint32_t)cut;
    return (u & 0x7fffffffu) > 0x7f800000u;
}

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
    return sift__keep_ge_into_at(sift__simd()->level, c, n, cut, out);
}

size_t sift__keep_ge_into_at(int level, const sift_candidate *c, size_t n, uint64_t cut,
                             sift_candidate *out)
{
    level = sift__simd_ops_at(level)->level;
    /* Float compares on the row instead of a key per element (cut_split);
     * written without a branch on the (unpredictable) verdict. */
    float cl;
    uint32_t cid;
    size_t j = 0;
    if (SIFT__UNLIKELY(cut_split(cut, &cl, &cid))) {
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
    if (n >= 64 && level >= SIFT__SIMD_AVX512 && keep_ge_vec_available())
        i = keep_ge_avx512(c, n, cl, cid, out, &j);
    else if (n >= 64 && level >= SIFT__SIMD_AVX2)
        i = keep_ge_avx2(c, n, cl, cid, out, &j);
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
        __mmask8 k = keep8_avx512(v, clv, cidv);
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

#ifdef SIFT__BAND_AVX512
/* keep_ge_avx512 with float weights, sixteen candidates a step: the same
 * masks compress vf (the stores reach vf[j..j + 16), j <= i, nothing not
 * yet read, as for c) and add the kept weights, in double, into sixteen
 * lane sums. */
__attribute__((target("avx512f,bmi2"))) static size_t keep_ge_f_avx512(sift_candidate *c, float *vf,
                                                                       size_t n, float cl,
                                                                       uint32_t cid, size_t *jout,
                                                                       double *sum)
{
    const __m512 clv = _mm512_set1_ps(cl);
    const __m512i cidv = _mm512_set1_epi32((int32_t)cid);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    size_t i = 0, j = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v0 = _mm512_loadu_si512((const void *)(c + i));
        __m512i v1 = _mm512_loadu_si512((const void *)(c + i + 8));
        __m512 f = _mm512_loadu_ps(vf + i);
        __mmask8 k0 = keep8_avx512(v0, clv, cidv), k1 = keep8_avx512(v1, clv, cidv);
        s0 = _mm512_mask_add_pd(s0, k0, s0, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
        s1 = _mm512_mask_add_pd(
            s1, k1, s1,
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1))));
        size_t n0 = (size_t)__builtin_popcount((unsigned)k0);
        _mm512_storeu_si512((void *)(c + j), _mm512_maskz_compress_epi64(k0, v0));
        _mm512_storeu_si512((void *)(c + j + n0), _mm512_maskz_compress_epi64(k1, v1));
        __mmask16 k = (__mmask16)((unsigned)k0 | (unsigned)k1 << 8);
        _mm512_storeu_ps(vf + j, _mm512_maskz_compress_ps(k, f));
        j += n0 + (size_t)__builtin_popcount((unsigned)k1);
    }
    *sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    *jout = j;
    return i;
}

/* keep_ge_f_avx512 at AVX2: eight candidates a step (keep_ge_avx2), their
 * float weights compressed a half at a time (compress_avx2.h). */
__attribute__((target("avx2,popcnt"))) static size_t keep_ge_f_avx2(sift_candidate *c, float *vf,
                                                                    size_t n, float cl,
                                                                    uint32_t cid, size_t *jout,
                                                                    double *sum)
{
    const __m256 clv = _mm256_set1_ps(cl);
    const __m256i cidf = _mm256_set1_epi32((int32_t)(cid ^ 0x80000000u));
    const __m256i bits = _mm256_set_epi32(128, 64, 32, 16, 8, 4, 2, 1);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    size_t i = 0, j = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)(c + i));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(c + i + 4));
        unsigned keep = keep4_ge_avx2(v0, clv, cidf) | keep4_ge_avx2(v1, clv, cidf) << 4;
        if (!keep)
            continue;
        __m256 f = _mm256_loadu_ps(vf + i);
        __m256i km = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)keep), bits), bits);
        __m256 kf = _mm256_and_ps(f, _mm256_castsi256_ps(km)); /* a lane not kept adds +0 */
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(kf)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(kf, 1)));
        sift__compress8x32_store(vf + j, f, keep);
        j += sift__compress8_store(c + j, c + i, keep);
    }
    __m256d t = _mm256_add_pd(s0, s1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
    *sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    *jout = j;
    return i;
}
#endif

/* What the vector loops of the moving cuts summed: the 32-bit halves of
 * exact weights, or float weights in double. */
typedef struct keep_sums {
    uint64_t lo, hi;
    double f;
} keep_sums;

/* sift__arr_keep_ge moving the payload p with the candidates: exact
 * weights (sz = 8, the vector loops summing them into ks->lo and ks->hi)
 * or float weights (sz = 4, into ks->f). Returns how many of the kept
 * ones, from the first, the vector loops summed. Inlined with a constant
 * sz, so the scalar loop moves one entry by one load and one store. */
static inline size_t keep_ge_moving(int level, sift__arr *a, uint64_t cut, void *p, size_t sz,
                                    keep_sums *ks)
{
    if (a->order == SIFT__ORDER_CANON) {
        /* The kept ones are a prefix: their payload stays where it is. */
        sift__arr_keep_ge(a, cut);
        return 0;
    }
    /* sift__keep_ge_into's test, in place, moving entry i of p with c[i]
     * (stored whether kept or not, as the loop of sift__keep_ge_into) */
    level = sift__simd_ops_at(level)->level;
    sift_candidate *c = a->c;
    unsigned char *q = p;
    size_t n = a->n, i = 0, j = 0, from = 0;
    float cl;
    uint32_t cid;
    int by_key = cut_split(cut, &cl, &cid);
#ifdef SIFT__BAND_AVX512
    if (!by_key && n >= 64 && level >= SIFT__SIMD_AVX512 && keep_ge_vec_available()) {
        i = sz == 8 ? keep_ge_w_avx512(c, p, n, cl, cid, &j, &ks->lo, &ks->hi)
                    : keep_ge_f_avx512(c, p, n, cl, cid, &j, &ks->f);
        from = j; /* the vector loop summed the first j */
    } else if (!by_key && n >= 64 && level >= SIFT__SIMD_AVX2 &&
               (sz == 8 || __builtin_cpu_supports("popcnt"))) {
        i = sz == 8 ? keep_ge_w_avx2(c, p, n, cl, cid, &j, &ks->lo, &ks->hi)
                    : keep_ge_f_avx2(c, p, n, cl, cid, &j, &ks->f);
        from = j;
    }
#endif
    for (; i < n; i++) {
        sift_candidate x = c[i];
        unsigned char v[8];
        memcpy(v, q + i * sz, sz);
        int keep = by_key ? sift__ckey(x.logit, x.id) >= cut
                          : (x.logit > cl) | ((x.logit == cl) & ((uint32_t)x.id <= cid));
        c[j] = x;
        memcpy(q + j * sz, v, sz);
        j += (size_t)keep;
    }
    if (j != n)
        a->dense = 0;
    a->n = j;
    return from;
}

sift__u128 sift__arr_keep_ge_w(sift__arr *a, uint64_t cut, uint64_t *w)
{
    return sift__arr_keep_ge_w_at(sift__simd()->level, a, cut, w);
}

sift__u128 sift__arr_keep_ge_w_at(int level, sift__arr *a, uint64_t cut, uint64_t *w)
{
    keep_sums ks = {0, 0, 0.0};
    for (size_t i = keep_ge_moving(level, a, cut, w, sizeof *w, &ks); i < a->n; i++) {
        ks.lo += w[i] & 0xffffffffu;
        ks.hi += w[i] >> 32;
    }
    return sift__u128_halves(ks.lo, ks.hi);
}

double sift__arr_keep_ge_f(sift__arr *a, uint64_t cut, float *vf)
{
    return sift__arr_keep_ge_f_at(sift__simd()->level, a, cut, vf);
}

double sift__arr_keep_ge_f_at(int level, sift__arr *a, uint64_t cut, float *vf)
{
    keep_sums ks = {0, 0, 0.0};
    for (size_t i = keep_ge_moving(level, a, cut, vf, sizeof *vf, &ks); i < a->n; i++)
        ks.f += (double)vf[i];
    return ks.f;
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

/* max_logit_avx512 with four AVX2 accumulators: the logits (odd floats)
 * blended over -inf, vmaxps keeping the accumulator where a logit is a
 * NaN, as the scalar compare skips it. */
__attribute__((target("avx2"))) static float max_logit_avx2(const sift_candidate *c, size_t n)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float *f = (const float *)(const void *)(c + i);
        a0 = _mm256_max_ps(_mm256_blend_ps(ninf, _mm256_loadu_ps(f), 0xAA), a0);
        a1 = _mm256_max_ps(_mm256_blend_ps(ninf, _mm256_loadu_ps(f + 8), 0xAA), a1);
        a2 = _mm256_max_ps(_mm256_blend_ps(ninf, _mm256_loadu_ps(f + 16), 0xAA), a2);
        a3 = _mm256_max_ps(_mm256_blend_ps(ninf, _mm256_loadu_ps(f + 24), 0xAA), a3);
    }
    __m256 a = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
    float t[8];
    _mm256_storeu_ps(t, a);
    float m = block_max(c, i, n);
    for (int l = 1; l < 8; l += 2)
        m = t[l] > m ? t[l] : m;
    return m;
}
#endif

float sift__max_logit(const sift_candidate *c, size_t n)
{
    /* Four running maxima break the dependency chain. Their combination
     * is the same value as one left-to-right scan, except that the sign
     * of a zero maximum could differ (-0 == +0): then rescan plainly, so
     * the result is bit-identical to the sequential definition. The
     * AVX-512 and AVX2 forms (through sift__simd()) are the same value. */
    float m;
#ifdef SIFT__BAND_AVX512
    if (n >= 256 && sift__simd()->level >= SIFT__SIMD_AVX512)
        m = max_logit_avx512(c, n);
    else if (n >= 256 && sift__simd()->level >= SIFT__SIMD_AVX2 && __builtin_cpu_supports("avx2"))
        m = max_logit_avx2(c, n);
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

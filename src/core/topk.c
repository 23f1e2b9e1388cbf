/*
 * topk.c - the canonical first k tokens of a row in one pass.
 *
 * Owns sift__topk_fits, sift__topk_row and sift__topk_row_at: the prefix
 * builder of the slicer and of the whole-row step for k up to
 * SIFT__TOPK_MAX (core/simd.h), at about the cost of one read of the row.
 *
 * Method. The row is read once, in ascending id order, against a running
 * threshold t: the logit of the k-th canonical token among those read so
 * far. A token not yet read has a larger id than every token read, so it
 * ranks after a read token of equal logit: only a logit strictly above t
 * can enter the final k. The scan kernel (core/cpu.c, one per dispatch
 * level) compares 16-64 logits at a time with t and writes the indices of
 * the rare candidates; their canonical keys (sift__ckey: -0 and +0 are
 * one value, ties go to the smaller id) go to a buffer of `cap` keys.
 * When the buffer is nearly full it is reduced to its k largest keys and
 * t rises to the logit of the smallest of them. At the end the k largest
 * keys are sorted; each names its id, and the logit is read back from the
 * row, so a -0 stays -0.
 *
 * Sampled threshold. For k >= SIFT__TOPK_SAMPLE_MIN_K on a long row, the
 * pass first reads a sample: evenly spaced runs of 64 tokens (about
 * SIFT__TOPK_SAMPLE_MU of the row's first k expected among them, a
 * sixteenth of the row at most), each reduced to its maximum by the
 * floor's own kind of kernel, and takes the r-th largest maximum as t, r
 * three standard deviations above the expected count. Then about
 * (r / mu) k tokens beat t instead of k (1 + ln(V / k)) and the cuts that
 * follow behind a running threshold, and the buffer is seldom cut. It is
 * only a filter: when at least k tokens beat it, every token of the true
 * first k is among them and the result is the same; when fewer do (a row
 * whose sample is not like the rest: about 0.3 % of random rows for
 * k >= 40 and about 0.4 % at k = 16, where about one run maximum is
 * expected above the k-th value and r is rounded to nearest), the exact
 * pass runs after it.
 *
 * The end: when the sampled pass held without a cut of its buffer, its
 * keys are in ascending id order, and when there are at least
 * SIFT__TOPK_RADIX_MIN of them (k from about 75 up) a stable radix sort by the logit
 * alone gives the canonical order (radix_top: no compare of ids, no
 * branch on the keys). It executes about as many instructions as the
 * quicksort did on those keys, but the quicksort's branches on the keys
 * were mispredicted: at k = 256, V = 151,936 callgrind's branch model
 * counts about 390 fewer mispredicted branches per call (1,176 -> 787),
 * and the builder's median fell by a fifth to a quarter
 * (tests/bench/bench_slice --slicer). Float rows' survivors are sorted by
 * the top 16 bits of their span in two passes, and the few keys that
 * share those are put in order by insertion (a third pass cost more);
 * the pass loop that makes the keys also finds the span, and checks
 * NaN and +inf once per batch. Those cut the builder's instructions at
 * k = 256 by about a fifth outside the scan kernel (callgrind, about
 * 67,000 -> 54,000 per call at V = 151,936) and its median by about 3 %.
 * Otherwise (the exact pass, a cut,
 * or fewer keys) the k largest keys are found and sorted by one quicksort
 * that drops the parts after the k-th key (sort_top).
 *
 * Validation rides on the same pass: each kernel raises a flag when its
 * range holds a NaN or +inf (core/cpu.c: running sums, which may also
 * overflow on a valid row of huge values), and a candidate that is NaN
 * or +inf raises it too. A raised flag hands the row to sift__row_error,
 * which names the first bad value as the block path does; if it finds
 * none, the pass goes on (a row without NaN loses nothing to a max). A
 * row of -inf only ends with a -inf first key: the same error.
 *
 * The tail route's bound (ctx->tail_want: core/step.c; docs/analyzer.md,
 * "Tail mass"). The route needs, beside the first k, a bound on the mass
 * of every token at or below the k-th logit lk, which a second pass of
 * the tail kernel over the row gave at about 1.8 times the floor. The
 * sampled pass gives it in the same read: its scan is the fused kernel
 * (scan_tail_gt), which adds each token at or below the threshold t to
 * the tail kernel's lanes at reference t and keeps each candidate's
 * logit. When the pass held without a cut, those are every token of the
 * row, once; the candidates at or below lk go through the tail kernel at
 * the row's maximum once the sort has found lk, and sift__tail_join
 * (core/tail.c) puts the two sums at one reference with their bounds
 * rounded outwards. A cut or the exact pass leaves ctx->tail_ok at 0 and
 * the route reads the row again.
 *
 * Invariants: the result is a function of the row and k alone (the
 * canonical Prefix(k)), whichever level ran and wherever the reductions
 * fell and whether the sample held; work is at most two passes (the
 * sampled one and the exact one) plus O(cap log cap) per reduction,
 * bounded on every row (a rising row makes every token a candidate: then there are
 * at most V / (cap - k) reductions).
 */
#include <math.h>
#include <string.h>

#include "simd.h"

int sift__topk_fits(int32_t V, size_t k)
{
    return V > 0 && k >= 1 && k <= SIFT__TOPK_MAX && k + 2 * SIFT__SCAN_BLOCK <= (size_t)V;
}

/* ------------------------------------------------------------------ */
/* Distinct keys, largest first                                        */
/* ------------------------------------------------------------------ */

static inline void swap64(uint64_t *a, uint64_t *b)
{
    uint64_t t = *a;
    *a = *b;
    *b = t;
}

static void insertion_desc(uint64_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] < x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Heap sort into descending order (a min-heap), the bounded fallback. */
static void down_min(uint64_t *v, size_t n, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && v[c + 1] < v[c])
            c++;
        if (v[i] <= v[c])
            return;
        swap64(&v[i], &v[c]);
        i = c;
    }
}

static void heap_desc(uint64_t *v, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        down_min(v, n, i);
    for (size_t e = n; e > 1; e--) {
        swap64(&v[0], &v[e - 1]);
        down_min(v, e - 1, 0);
    }
}

/* The index of the median of v[a], v[b], v[c] (distinct keys). */
static size_t median3(const uint64_t *v, size_t a, size_t b, size_t c)
{
    if (v[a] > v[b])
        return v[b] > v[c] ? b : (v[a] > v[c] ? c : a);
    return v[a] > v[c] ? a : (v[b] > v[c] ? c : b);
}

/* Partitions v[0..n) (n >= 3, distinct keys) around the median of three,
 * in place and without branching on the keys (a branch per key would be
 * mispredicted half the time): the pivot is parked at the end, each key
 * is swapped with the first key not above the pivot, and that boundary
 * moves on when the key is above it; then the pivot joins the keys above
 * it. Keys >= the pivot end in front; returns their count, in [2, n - 1]:
 * the median of three distinct keys is neither the smallest nor the
 * largest. */
static size_t partition_desc(uint64_t *v, size_t n)
{
    swap64(&v[median3(v, 0, n / 2, n - 1)], &v[n - 1]);
    uint64_t p = v[n - 1];
    size_t lo = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        uint64_t x = v[i];
        v[i] = v[lo];
        v[lo] = x;
        lo += x > p;
    }
    swap64(&v[lo], &v[n - 1]);
    return lo + 1;
}

static int depth_for(size_t n)
{
    int d = 8;
    for (; n > 1; n >>= 1)
        d += 2;
    return d;
}

/* Sorts v[0..n) (distinct keys) into descending order. */
static void sort_desc(uint64_t *v, size_t n)
{
    int depth = depth_for(n);
    while (n > 16) {
        if (depth-- == 0) {
            heap_desc(v, n);
            return;
        }
        size_t j = partition_desc(v, n);
        /* Recurse into the smaller side, loop on the larger. */
        if (j < n - j) {
            sort_desc(v, j);
            v += j;
            n -= j;
        } else {
            sort_desc(v + j, n - j);
            n = j;
        }
    }
    insertion_desc(v, n);
}

/* Sorts the k largest keys of v[0..n) (1 <= k <= n, distinct keys) into
 * v[0..k), descending: a quicksort that drops every part after the k-th
 * key, so the partitions that find the k largest also sort them. */
static void sort_top(uint64_t *v, size_t n, size_t k)
{
    int depth = depth_for(n);
    while (n > 16) {
        if (depth-- == 0) {
            heap_desc(v, n);
            return;
        }
        size_t j = partition_desc(v, n);
        if (j >= k) {
            n = j;
        } else {
            sort_desc(v, j);
            v += j;
            n -= j;
            k -= j;
        }
    }
    insertion_desc(v, n);
}

/* Moves the k largest keys of v[0..n) (1 <= k < n, distinct keys) to
 * v[0..k), in no particular order. */
static void select_top(uint64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    int depth = depth_for(n);
    while (hi - lo > 16) {
        if (depth-- == 0) {
            sort_desc(v + lo, hi - lo);
            return;
        }
        size_t j = lo + partition_desc(v + lo, hi - lo);
        if (k == j)
            return;
        if (k < j)
            hi = j;
        else
            lo = j;
    }
    insertion_desc(v + lo, hi - lo);
}

/* What the sampled pass saw of its keys' logit halves: lo, the key of
 * its threshold; hi, the largest; diff, the OR of every key's bits that
 * differ from lo's (radix_top sorts only the bits above diff's lowest). */
typedef struct span {
    uint32_t lo, hi, diff;
} span;

/* The passes of radix_top sort by at most this many of the top bits of
 * the span (two passes of 8): a third pass of the lowest bits would cost
 * more than ordering the few keys that share their top 16 bits. */
#define SIFT__TOPK_RADIX_BITS 16

/* Orders v[0..k) canonically when v[0..n) (distinct keys, 1 <= k <= n) is
 * sorted descending by (key >> 32) - lo >> sh alone, ties in ascending id
 * order: only keys of one such group can be out of order, so an
 * insertion sort of the groups up to the one that holds v[k - 1] (which
 * may reach past k) moves only them. A row whose survivors share their
 * top bits in large groups (adversarial) would make that quadratic: past
 * a budget of moves the quicksort of all n keys finishes instead. */
static void fix_groups(uint64_t *v, size_t n, size_t k, uint32_t lo, int sh)
{
    uint32_t g = (((uint32_t)(v[k - 1] >> 32)) - lo) >> sh;
    size_t e = k;
    while (e < n && ((((uint32_t)(v[e] >> 32)) - lo) >> sh) == g)
        e++;
    size_t budget = 4 * e + 64;
    for (size_t i = 1; i < e; i++) {
        uint64_t x = v[i];
        if (SIFT__LIKELY(v[i - 1] > x))
            continue;
        size_t j = i;
        do {
            v[j] = v[j - 1];
            j--;
        } while (j > 0 && v[j - 1] < x);
        v[j] = x;
        if (SIFT__UNLIKELY(i - j > budget)) {
            sort_top(v, n, k);
            return;
        }
        budget -= i - j;
    }
}

/* The canonical first k of v[0..n) (k <= n; keys of distinct ids, stored
 * in ascending id order, each logit above the one whose key is lo),
 * sorted: a stable LSD radix sort by the logit key (the high 32 bits,
 * descending), ties keeping the stored order, that is ascending id: the
 * canonical order with no compare of ids and no branch on the keys. Only
 * the bits that differ are sorted: the key less lo, shifted past the low
 * bits every key shares with lo (a bf16 logit's low 16 bits), and past
 * all but the top SIFT__TOPK_RADIX_BITS of the rest, in P <= 2 passes of
 * w <= 10 bits (a bf16 row's survivors differ in about 8 bits: one pass;
 * a float row's in about 24: two passes of the top 16, then fix_groups
 * orders the keys that share those). Before the passes, the keys whose
 * top digit ranks after the digit that holds the k-th key are dropped
 * (at k = 256, about 600 survivors leave about 270): they cannot be
 * among the first k. sp is what the pass saw (span); hist holds
 * P << w <= 1024 counts; tmp, n keys. Returns v or tmp, whichever holds
 * the result. */
/* The fewest collected keys that go to radix_top: below, its fixed cost
 * (about 10,000 instructions for float rows when it made three passes'
 * counts over 256 digits) outweighs the quicksort's mispredicted branches (callgrind
 * at V = 151,936: k = 16 and 40 collect about 80 and 140 keys, and took
 * about 10,000 more instructions for 16-60 fewer mispredicts; k = 104
 * collects about 260, and k = 75 about 192). */
#define SIFT__TOPK_RADIX_MIN 192

static uint64_t *radix_top(uint64_t *v, size_t n, size_t k, const span *sp, uint64_t *tmp,
                           uint32_t *hist)
{
    uint32_t lo = sp->lo, hi = sp->hi, diff = sp->diff;
    if (!diff)
        return v;         /* (no key above lo: not a caller's case) */
    int sh = 0, bits = 0; /* plain loops: once a call, and no compiler builtin */
    while (!((diff >> sh) & 1))
        sh++;
    uint32_t width = (hi - lo) >> sh;
    while (bits < 32 && width >> bits)
        bits++;
    /* At most the top SIFT__TOPK_RADIX_BITS bits of the span: the keys
     * the dropped bits alone would order are put right after the passes
     * (fix_groups). */
    int coarse = bits > SIFT__TOPK_RADIX_BITS;
    if (coarse) {
        sh += bits - SIFT__TOPK_RADIX_BITS;
        bits = SIFT__TOPK_RADIX_BITS;
    }
    int P = (bits + 9) / 10, w = (bits + P - 1) / P;
    uint32_t mask = (1u << w) - 1;
    memset(hist, 0, ((size_t)P << w) * sizeof *hist);
    /* Digit p of a key, counted from the largest: mask - its p-th w bits. */
#define RADIX_DIGIT(x, p) (mask - ((((uint32_t)((x) >> 32) - lo) >> (sh + w * (p))) & mask))
    if (P > 1) {
        uint32_t *top = hist + ((size_t)(P - 1) << w);
        for (size_t i = 0; i < n; i++)
            top[RADIX_DIGIT(v[i], P - 1)]++;
        /* cut: the digit of the k-th key, found from the smallest digit
         * (the dense end): the keys after it are at most n - k */
        uint32_t cut = mask;
        size_t after = 0;
        while (after + top[cut] <= n - k)
            after += top[cut--];
        /* digit <= cut: the key's logit half at least lo + that digit's
         * start, a single compare */
        uint64_t least = (uint64_t)(lo + ((mask - cut) << (sh + w * (P - 1)))) << 32;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t x = v[i];
            tmp[m] = x;
            m += x >= least;
        }
        memset(top, 0, ((size_t)1 << w) * sizeof *top);
        uint64_t *t = v;
        v = tmp;
        tmp = t;
        n = m;
    }
    uint32_t *h0 = hist, *h1 = hist + ((size_t)1 << w);
    if (P == 1) {
        for (size_t i = 0; i < n; i++)
            h0[RADIX_DIGIT(v[i], 0)]++;
    } else {
        for (size_t i = 0; i < n; i++) {
            h0[RADIX_DIGIT(v[i], 0)]++;
            h1[RADIX_DIGIT(v[i], 1)]++;
        }
    }
    for (int p = 0; p < P; p++) {
        uint32_t *h = hist + ((size_t)p << w), sum = 0;
        for (uint32_t b = 0; b <= mask; b++) {
            uint32_t c = h[b];
            h[b] = sum;
            sum += c;
        }
        int s = sh + w * p;
        for (size_t i = 0; i < n; i++) {
            uint64_t x = v[i];
            tmp[h[mask - ((((uint32_t)(x >> 32) - lo) >> s) & mask)]++] = x;
        }
        uint64_t *t = v;
        v = tmp;
        tmp = t;
    }
#undef RADIX_DIGIT
    if (coarse)
        fix_groups(v, n, k, lo, sh);
    return v;
}

static uint64_t min_key(const uint64_t *v, size_t n)
{
    uint64_t m = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

/* ------------------------------------------------------------------ */
/* The pass                                                            */
/* ------------------------------------------------------------------ */

/* The pass hands the scan kernel at most this many tokens a call, and
 * makes the keys of a chunk's candidates right after it, while their
 * logits are still in the first-level cache (16 KB of row): the keys'
 * reads of the row by index then hit it, where after a scan of the whole
 * row they missed. Measured with tests/bench/bench_slice --slicer (10
 * interleaved runs, machine loaded): k = 256 1.84-2.01 -> 1.68-1.88
 * times the floor at V = 151,936, 1.55-1.64 -> 1.36-1.50 at 248,320;
 * k = 16 1.28-1.30 -> 1.21-1.24; k = 1 (no candidates to speak of)
 * unchanged. A multiple of every kernel's block. */
#ifndef SIFT__TOPK_CHUNK
#define SIFT__TOPK_CHUNK 4096
#endif

/* The tail route's sum in the same pass (ctx->tail_want): the tail
 * kernel's lanes of the tokens at or below the threshold, at reference
 * the threshold, from the fused scan (sift__simd_ops.scan_tail_gt, the
 * same read of the row), and the logits of the tokens above it (the
 * candidates), in the order of their keys. */
typedef struct fused {
    float lanes[64];
    float *cand; /* n_cand logits */
} fused;

/* Adds to key[*pm..) the canonical key of every x[j] > t, j in [i, n),
 * cutting the buffer back to its k largest keys (and raising *pt, the
 * threshold, to the smallest of them, and setting *cut: the keys are then
 * in no particular order) whenever the kernel stops for room below cap. On a
 * raised bad flag: when check is set, the row x[0..n) is checked (its
 * error is returned through err, which may be NULL, or the pass goes on
 * when it has none); otherwise SIFT_E_ROW_VALUE is returned at once.
 * With fu (not NULL), each token at or below t adds its tail term to
 * fu->lanes and each candidate's logit goes to fu->cand[*pm..), until a
 * cut (then both mean nothing). */
static sift_status pass(const sift__simd_ops *ops, const float *x, size_t i, size_t n, float *pt,
                        size_t k, size_t cap, uint64_t *key, size_t *pm, int *cut, span *sp,
                        fused *fu, sift__ctx *ctx, int check, sift_error *err)
{
    float t = *pt;
    uint32_t *idx = ctx->ws->u32;
    size_t m = *pm;
    uint32_t lo = sift__fkey(t), hi = lo, diff = 0;
    int bad = 0, checked = 0; /* checked: the row was found valid despite a raised flag */
    while (i < n) {
        size_t c = 0, e = n - i > SIFT__TOPK_CHUNK ? i + SIFT__TOPK_CHUNK : n;
        if (fu) {
            /* Every NaN and +inf is a candidate: amax below sees it. */
            i = ops->scan_tail_gt(x, i, e, t, idx, &c, cap - m, fu->lanes);
            for (size_t j = 0; j < c; j++)
                fu->cand[m + j] = x[idx[j]];
        } else {
            i = ops->scan_gt(x, i, e, t, idx, &c, cap - m, &bad);
        }
        uint32_t amax = 0; /* the largest |candidate|'s bits */
        for (size_t j = 0; j < c; j++) {
            float v = x[idx[j]];
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            u &= 0x7fffffffu;
            amax = u > amax ? u : amax;
            uint64_t y = sift__ckey(v, (int32_t)idx[j]);
            uint32_t f = (uint32_t)(y >> 32);
            hi = f > hi ? f : hi;
            diff |= f ^ lo;
            key[m + j] = y;
        }
        /* a candidate is above t or NaN, never -inf: NaN or +inf */
        bad |= amax >= 0x7f800000u;
        m += c;
        if (SIFT__UNLIKELY(bad) && !checked) {
            if (!check)
                return SIFT_E_ROW_VALUE;
            sift_status st = sift__row_error(x, (int32_t)n, err);
            if (st)
                return st;
            checked = 1; /* no NaN or +inf: the sums overflowed */
        }
        if (i < e) {
            /* The kernel stopped for room: keep the k best, raise t. */
            select_top(key, m, k);
            m = k;
            *cut = 1;
            fu = NULL;
            t = x[sift__ckey_id(min_key(key, k))];
        }
    }
    *pm = m;
    *pt = t;
    if (sp) {
        sp->lo = lo;
        sp->hi = hi;
        sp->diff = diff;
    }
    return SIFT_OK;
}

/* Room for k kept keys and 2k (at least 128) new ones between reductions:
 * a small buffer keeps t close to the running k-th value (measured at
 * V = 248,320: 1024 new keys cost 20-40 % more time than 2k for
 * k <= 256). */
static size_t cap_for(size_t k, size_t n)
{
    size_t cap = k + (2 * k > 128 ? 2 * k : 128);
    return cap < n ? cap : n;
}

/* Room for the tokens that beat a sampled threshold: about k r / mu are
 * expected (mu = segs * SEG * k / n), so twice that and a block's slack
 * make a cut of the buffer rare. */
static size_t sampled_cap(size_t k, size_t r, size_t segs, size_t n)
{
    double mu = (double)(segs * SIFT__TOPK_SAMPLE_SEG) * (double)k / (double)n;
    size_t cap = k + (size_t)(2.0 * (double)k * (double)r / mu) + 2 * SIFT__SCAN_BLOCK;
    return cap < n ? cap : n;
}

/* The exact pass: the first k tokens are the first threshold's set, so
 * every later threshold is the k-th canonical logit of a read prefix. */
static sift_status exact_pass(const sift__simd_ops *ops, sift__ctx *ctx, const float *x, size_t n,
                              size_t k, uint64_t *key, size_t *pm, int check, sift_error *err)
{
    int bad = 0;
    for (size_t i = 0; i < k; i++) {
        float v = x[i];
        bad |= !(v < INFINITY);
        key[i] = sift__ckey(v, (int32_t)i);
    }
    if (bad)
        return check ? sift__row_error(x, (int32_t)n, err) : SIFT_E_ROW_VALUE;
    *pm = k;
    float t = x[sift__ckey_id(min_key(key, k))];
    int cut = 0;
    return pass(ops, x, k, n, &t, k, cap_for(k, n), key, pm, &cut, NULL, NULL, ctx, check, err);
}

int sift__topk_sample_plan(int32_t V, size_t k, size_t *segs, size_t *stride, size_t *r)
{
    size_t n = (size_t)V;
    if (k < SIFT__TOPK_SAMPLE_MIN_K || n / SIFT__TOPK_SAMPLE_MIN_RATIO < k)
        return 0;
    /* About SIFT__TOPK_SAMPLE_MU sampled tokens expected above the k-th
     * value, at most a part of the row. */
    size_t s = SIFT__TOPK_SAMPLE_MU * (n / k);
    s = s < n / SIFT__TOPK_SAMPLE_MAX_PART ? s : n / SIFT__TOPK_SAMPLE_MAX_PART;
    size_t g = s / SIFT__TOPK_SAMPLE_SEG;
    double mu = (double)(g * SIFT__TOPK_SAMPLE_SEG) * (double)k / (double)n;
    /* r: 3 standard deviations above the expected count, plus one,
     * rounded to nearest, so that the r-th largest run maximum falls
     * below the k-th value of the row on all but about 0.3 % of rows like
     * these (each costs a second pass). Truncated, r was 4 at mu = 1
     * (k = 16), where the count is about Poisson(1) and reaches 4 on about
     * 2 % of rows; rounded it is 5, reached on about 0.4 %, and large k
     * keep theirs (17 at mu = 8). */
    size_t rr = (size_t)(mu + 3.0 * sqrt(mu) + 1.5);
    if (g < 1 || rr > g || rr > SIFT__TOPK_SAMPLE_MAX_R)
        return 0;
    *segs = g;
    *stride = n / g;
    *r = rr;
    return 1;
}

/* A threshold that about (r / mu) k tokens of the row beat: the r-th
 * largest of the maxima of the sampled runs (segs runs of
 * SIFT__TOPK_SAMPLE_SEG tokens, evenly spaced), each found by the floor's
 * own kernel. A run maximum is a token of the row, and two of the few
 * tokens above the k-th value seldom share a run, so the r-th run maximum
 * is about the r-th largest sampled token. Only an estimate: the caller
 * checks that at least k tokens beat it. Returns 0 when the sample gives
 * none (a maximum is NaN or +inf, the r-th is -inf or ties with the
 * largest). */
static int sample_threshold(const sift__simd_ops *ops, const float *row, size_t segs, size_t stride,
                            size_t r, float *mx, float *pt)
{
    float best[SIFT__TOPK_SAMPLE_MAX_R]; /* the r largest so far, descending */
    size_t nb = 0;
    ops->runs_max(row, stride, segs, mx);
    for (size_t j = 0; j < segs; j++) {
        float v = mx[j];
        if (!(v < INFINITY))
            return 0; /* NaN or +inf: the exact pass names it */
        if (nb == r && !(v > best[r - 1]))
            continue;
        size_t i = nb < r ? nb++ : r - 1;
        for (; i > 0 && best[i - 1] < v; i--)
            best[i] = best[i - 1];
        best[i] = v;
    }
    float v = best[r - 1];
    if (!(v > -INFINITY) || !(v < best[0]))
        return 0;
    *pt = v;
    return 1;
}

static sift_status topk(const sift__simd_ops *ops, sift__ctx *ctx, const float *row, int32_t V,
                        size_t k, sift_candidate *out, int *passes)
{
    size_t n = (size_t)V;
    uint64_t *key = ctx->ws->u64b;
    size_t m = 0, segs, stride, r;
    int cut = 0;
    span sp = {0, 0, 0};
    float t, t0 = 0.0f;
    sift_status st;
    fused fu, *pf = NULL;
    ctx->tail_ok = 0;
    /* A sampled threshold first: few tokens beat it, so the pass seldom
     * stops to cut the buffer. It is exact when k tokens beat it (they
     * are all taken, and every token of the true k beats it); otherwise
     * the exact pass runs instead. */
    if (sift__topk_sample_plan(V, k, &segs, &stride, &r) &&
        sample_threshold(ops, row, segs, stride, r, (float *)(void *)ctx->ws->u32, &t)) {
        if (ctx->tail_want) {
            /* ws->f64 holds n doubles, room for the cap <= n floats */
            memset(fu.lanes, 0, sizeof fu.lanes);
            fu.cand = (float *)(void *)ctx->ws->f64;
            pf = &fu;
            t0 = t;
        }
        st = pass(ops, row, 0, n, &t, k, sampled_cap(k, r, segs, n), key, &m, &cut, &sp, pf, ctx, 1,
                  ctx->err);
        if (st)
            return st;
        ++*passes;
    }
    if (m < k) {
        ++*passes;
        m = 0;
        cut = 1;
        st = exact_pass(ops, ctx, row, n, k, key, &m, 1, ctx->err);
        if (st)
            return st;
    }
    /* radix_top's counts (at most 1,024) live in ws->u32, which holds n
     * entries: the sampled plan implies n >= 256 * 16, and the test says
     * so on its own, whatever those constants become. */
    if (!cut && m >= SIFT__TOPK_RADIX_MIN && n >= 4096)
        key = radix_top(key, m, k, &sp, ctx->ws->u64c, ctx->ws->u32);
    else
        sort_top(key, m, k);
    if (!(row[sift__ckey_id(key[0])] > -INFINITY))
        return sift__row_error(row, V, ctx->err);
    for (size_t j = 0; j < k; j++) {
        int32_t id = sift__ckey_id(key[j]);
        out[j].id = id;
        out[j].logit = row[id];
    }
    /* The sampled pass ran without a cut: its lanes hold every token at
     * or below t0 and fu.cand the m tokens above it (the row is valid by
     * now, and its k-th logit is above t0: k tokens beat it). */
    if (pf && !cut && m >= k && out[k - 1].logit > t0) {
        float mx = out[0].logit, lk = out[k - 1].logit;
        double S_c = ops->tail_mass(fu.cand, m, mx, lk);
        ctx->tail_ok = sift__tail_join(sift__tail_finish(fu.lanes, n), n, t0, S_c, m, mx,
                                       &ctx->tail_S, &ctx->tail_lower);
    }
    return SIFT_OK;
}

sift_status sift__topk_row_at(int level, sift__ctx *ctx, const float *row, int32_t V, size_t k,
                              sift_candidate *out)
{
    int passes = 0;
    return topk(sift__simd_ops_at(level), ctx, row, V, k, out, &passes);
}

sift_status sift__topk_row_passes(int level, sift__ctx *ctx, const float *row, int32_t V, size_t k,
                                  sift_candidate *out, int *passes)
{
    *passes = 0;
    return topk(sift__simd_ops_at(level), ctx, row, V, k, out, passes);
}

sift_status sift__topk_row(sift__ctx *ctx, const float *row, int32_t V, size_t k,
                           sift_candidate *out)
{
    if (!sift__topk_fits(V, k))
        return sift__row_prefix(ctx, row, V, k, out);
    int passes = 0;
    return topk(sift__simd(), ctx, row, V, k, out, &passes);
}

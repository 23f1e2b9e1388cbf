/*
 * typical.c - locally typical sampling.
 *
 * Owns sift_chain_add_typical and its stage.
 *
 * Formula (docs/samplers.md, "typical"), over the current candidates with
 * m the largest logit, w_i = trunc(sift__expf(l_i - m) * 2^62) and the
 * exact mass W = sum w_i:
 *   S    = W as a double (correctly rounded),
 *   LS   = sift__log(S) - 62 * ln2      (ln of the softmax normaliser
 *                                        relative to the max, in double),
 *   d_i  = (double)(l_i - m)            (float subtraction, then widened),
 *   s_i  = LS - d_i                     (surprise, -ln p_i; +inf at -inf),
 *   p_i  = (double)w_i * (1.0 / S),
 *   H    = sum of t_i in ascending id order (sift__dsum_idorder), with
 *          t_i = p_i * s_i when w_i > 0 and 0 when w_i = 0,
 *   score_i = |s_i - H|.
 * Candidates are ranked by (score ascending, then canonical order: logit
 * descending, id ascending); the stage keeps the shortest prefix of that
 * ranking whose mass is > T = floor(p * W) (strict, exact integers) and
 * holds at least max(min_keep, 1) tokens. p >= 1 is a no-op.
 *
 * Every quantity is a function of one candidate and of set-wide values
 * (m, W, H) that do not depend on storage order (H is summed in id order),
 * so the ranking is a total order on the set and the result is a set
 * property. The cut is found by weighted selection on the 128-bit key
 * (score bits, inverted canonical key): expected O(n), with a bisection
 * fallback that is O(n) too. It never sorts the row. Rows of TYP_BIG
 * (16384) candidates or more first sum counts and masses into TYP_NB
 * (4096) buckets of the score (a monotone function of it: 64 buckets per
 * unit, the last one open-ended), in passes without unpredictable
 * branches; walking the buckets in ascending order finds the first one
 * whose inclusive prefix qualifies. Where a few heavy tokens hold most
 * of the mass, exact bounds on each bucket's prefix narrow that bucket
 * to a band first, and only the band's tokens are histogrammed
 * (typ_cut_band); the sums it walks are exact all the same. Everything in earlier buckets ranks
 * before the cut and is kept, everything in later ones is dropped, and
 * the selection runs only on that bucket's elements, starting from the
 * mass and count of the earlier buckets. Only those elements ever get a
 * 128-bit key; a last pass keeps the survivors in place without a branch
 * on the verdict. Both paths compute the same cut, so the result does
 * not depend on which ran.
 *
 * The weights of the kept tokens go to a dist right after this stage
 * (sift__carry_leave in sift_internal.h): the compaction moves them with
 * the candidates, and dist takes them only when the kept set's largest
 * logit is m bit for bit (then each is the weight dist would compute).
 *
 * Reference behaviour: llama.cpp computes a float softmax, a float entropy
 * -sum p log p in sorted order, float scores, sorts by score with an
 * unstable sort and walks a float running sum with `cum > p`, then leaves
 * the survivors in typicality order. Deliberate differences: exact masses,
 * double entropy summed in id order, a total tie order, zero-probability
 * tokens contribute 0 to H (llama.cpp gets NaN from 0 * -inf), and the
 * storage order of the survivors is not meaningful (sift's later stages
 * work on the set; dist walks canonical order).
 *
 * Capability class: WHOLE; IDENTITY when p >= 1.
 */
#include <math.h>

#include "../core/kernels.h"
#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_typical;

typedef struct typical_stage {
    sift__stage base;
    float p;
    int32_t min_keep;
} typical_stage;

/* Quickselect rounds before rank_select switches to bisection. Only a
 * test build changes it (to exercise the fallback on every call). */
#ifndef SIFT__TYPICAL_MAX_ROUNDS
#define SIFT__TYPICAL_MAX_ROUNDS 64
#endif

/* Rows of at least TYP_BIG candidates find the cut through a histogram
 * of TYP_NB score buckets, TYP_SCALE buckets per unit of score. */
enum { TYP_BIG = 16384, TYP_NB = 4096 };
#define TYP_SCALE 64.0

/* Rows of TYP_BIG or more: when fewer tokens than this are known kept,
 * typical leaves no weights (dist computes those few itself). */
#define TYP_CARRY_MIN 4096

/* ln 2 as a double; 62 * LN2 is one rounded product. */
#define TYP_LN2 0.6931471805599453

/* The ranking key: smaller comes first. Scores are >= 0 (or +inf), so
 * their IEEE bits order like their values once -0 is folded to +0. */
static inline uint64_t score_bits(double s)
{
    uint64_t u;
    if (s == 0.0)
        s = 0.0;
    memcpy(&u, &s, sizeof u);
    return u;
}

static inline int key_lt(uint64_t a1, uint64_t a2, uint64_t b1, uint64_t b2)
{
    return a1 < b1 || (a1 == b1 && a2 < b2);
}

static inline void swap3(uint64_t *K1, uint64_t *K2, uint64_t *Wt, size_t i, size_t j)
{
    uint64_t t;
    t = K1[i], K1[i] = K1[j], K1[j] = t;
    t = K2[i], K2[i] = K2[j], K2[j] = t;
    t = Wt[i], Wt[i] = Wt[j], Wt[j] = t;
}

/* A prefix qualifies when its mass exceeds T and it holds >= kmin. */
static inline int reaches(sift__u128 mass, size_t cnt, sift__u128 T, size_t kmin)
{
    return cnt >= kmin && sift__u128_cmp(mass, T) > 0;
}

/* Fallback of rank_select when pivots stall: bisection on the first key
 * word, then on the second among the elements that share it. `below` and
 * `cnt_below` are the mass and count of elements ranked before all of
 * K[0..n). Returns 0 if even the whole set does not qualify. */
static int rank_bisection(const uint64_t *K1, const uint64_t *K2, const uint64_t *Wt, size_t n,
                          sift__u128 T, size_t kmin, sift__u128 below, size_t cnt_below,
                          uint64_t *cut1, uint64_t *cut2)
{
    sift__u128 mass = below;
    for (size_t i = 0; i < n; i++)
        mass = sift__u128_add64(mass, Wt[i]);
    if (!reaches(mass, cnt_below + n, T, kmin))
        return 0;
    /* smallest h such that {K1 <= h} qualifies */
    uint64_t lo = 0, hi = UINT64_MAX;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        sift__u128 ms = below;
        size_t cnt = cnt_below;
        for (size_t i = 0; i < n; i++)
            if (K1[i] <= mid) {
                ms = sift__u128_add64(ms, Wt[i]);
                cnt++;
            }
        if (reaches(ms, cnt, T, kmin))
            hi = mid;
        else
            lo = mid + 1;
    }
    uint64_t h = lo;
    for (size_t i = 0; i < n; i++)
        if (K1[i] < h) {
            below = sift__u128_add64(below, Wt[i]);
            cnt_below++;
        }
    /* smallest b such that {K1 < h} + {K1 == h, K2 <= b} qualifies */
    lo = 0;
    hi = UINT64_MAX;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        sift__u128 ms = below;
        size_t cnt = cnt_below;
        for (size_t i = 0; i < n; i++)
            if (K1[i] == h && K2[i] <= mid) {
                ms = sift__u128_add64(ms, Wt[i]);
                cnt++;
            }
        if (reaches(ms, cnt, T, kmin))
            hi = mid;
        else
            lo = mid + 1;
    }
    *cut1 = h;
    *cut2 = lo;
    return 1;
}

/* On unique keys (K1, K2) with weights Wt: the smallest key x such that
 * the elements with key <= x, together with `below` / `cnt_below` (the
 * mass and count of elements ranked before all of them), qualify (mass
 * > T, count >= kmin). Expected O(n) weighted quickselect; reorders the
 * three arrays together. Returns 0 if the whole set does not qualify. */
static int rank_select(uint64_t *K1, uint64_t *K2, uint64_t *Wt, size_t n, sift__u128 T,
                       size_t kmin, sift__u128 below, size_t cnt_below, uint64_t *cut1,
                       uint64_t *cut2)
{
    size_t lo = 0, hi = n;
    uint64_t seed = 0xD1B54A32D192ED03ull ^ n;
    int rounds = 0;
    while (hi > lo) {
        size_t m = hi - lo;
        if (++rounds > SIFT__TYPICAL_MAX_ROUNDS)
            return rank_bisection(K1 + lo, K2 + lo, Wt + lo, m, T, kmin, below, cnt_below, cut1,
                                  cut2);
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        /* median of three pseudo-random elements */
        size_t ia = lo + (size_t)((seed >> 33) % m);
        size_t ib = lo + (size_t)((seed >> 13) % m);
        size_t ic = lo + (size_t)(seed % m);
        if (key_lt(K1[ib], K2[ib], K1[ia], K2[ia])) {
            size_t t = ia;
            ia = ib;
            ib = t;
        }
        /* now a <= b; the median is b clamped into [a, c] */
        size_t ip = ib;
        if (key_lt(K1[ic], K2[ic], K1[ib], K2[ib]))
            ip = key_lt(K1[ic], K2[ic], K1[ia], K2[ia]) ? ia : ic;
        uint64_t p1 = K1[ip], p2 = K2[ip], pw = Wt[ip];
        /* partition [< p] [== p] [> p]; keys are unique so == is one */
        size_t i = lo, lt = lo, gt = hi;
        sift__u128 mass_lt = below;
        while (i < gt) {
            if (key_lt(K1[i], K2[i], p1, p2)) {
                mass_lt = sift__u128_add64(mass_lt, Wt[i]);
                swap3(K1, K2, Wt, i, lt);
                lt++;
                i++;
            } else if (key_lt(p1, p2, K1[i], K2[i])) {
                gt--;
                swap3(K1, K2, Wt, i, gt);
            } else {
                i++;
            }
        }
        size_t cnt_lt = cnt_below + (lt - lo);
        if (lt > lo && reaches(mass_lt, cnt_lt, T, kmin)) {
            hi = lt;
            continue;
        }
        sift__u128 with_p = sift__u128_add64(mass_lt, pw);
        if (reaches(with_p, cnt_lt + 1, T, kmin)) {
            *cut1 = p1;
            *cut2 = p2;
            return 1;
        }
        below = with_p;
        cnt_below = cnt_lt + 1;
        lo = gt;
    }
    return 0;
}

/* s_i = |(LS - d_i) - H|, exactly as defined above. */
static inline double typ_score(float l, float m, double LS, double H)
{
    double x = (LS - (double)(l - m)) - H;
    return x < 0 ? -x : x;
}

/* The bucket of a candidate's score on rows of TYP_BIG or more
 * (sift__score_buckets in core/kernels.c computes it): TYP_SCALE buckets per unit of score, the
 * last one also holding everything from there on (+inf, and NaN, which ranks last too). It is a
 * monotone function of the ranking's first key (a lower bucket means a smaller score_bits). |x| is
 * taken by clearing the sign bit, not by typ_score's unpredictable test (the two differ only on -0,
 * which score_bits folds to +0 anyway, and on NaN); the clamp is rarely hit. */

/* typ_cut_hist's histogram, two words a bucket: hb[0] the mass modulo
 * 2^64, hb[1] the count in its high 32 bits and the number of times the
 * first word wrapped in its low 32 (each add wraps at most once, so that
 * number is at most the count, below 2^31 for n < 2^31, and never
 * reaches the count's bits). Two read-modify-writes a token: the loops
 * are bound by their stores. */
static inline void typ_hist_add(uint64_t *hb, uint64_t x)
{
    uint64_t s = hb[0] + x;
    hb[1] += ((uint64_t)1 << 32) + (s < x);
    hb[0] = s;
}

/* The first of the nb buckets of h whose inclusive prefix, from *below
 * and *cnt_below (the mass and count before h[0]), qualifies; nb when
 * none does. *below and *cnt_below end as the prefix before it. */
static size_t typ_hist_walk(const uint64_t *h, size_t nb, sift__u128 T, size_t kmin,
                            sift__u128 *below, size_t *cnt_below)
{
    for (size_t b = 0; b < nb; b++) {
        sift__u128 mb = {h[2 * b], h[2 * b + 1] & 0xffffffffu};
        sift__u128 with = sift__u128_add(*below, mb);
        size_t cnt = *cnt_below + (size_t)(h[2 * b + 1] >> 32);
        if (reaches(with, cnt, T, kmin))
            return b;
        *below = with;
        *cnt_below = cnt;
    }
    return nb;
}

/* The band path's heavy tokens: those with a weight of at least W /
 * TYP_HEAVY_PART, at most TYP_HEAVY_MAX of them. */
enum { TYP_HEAVY_PART = 4096, TYP_HEAVY_MAX = 64 };

/* The cut of typ_cut_hist without the histogram of every token, where
 * most of the mass lies in a few heavy tokens (peaked rows). With L the
 * exact mass of the light tokens (W less the heavy ones) and HP(b) the
 * exact heavy mass in the buckets up to b, the mass P(b) of the buckets
 * up to b lies in [HP(b), HP(b) + L]: so the first bucket whose prefix
 * exceeds T lies in [b_lo, b_hi], b_lo the first with HP(b) + L > T,
 * b_hi the first with HP(b) > T (the last bucket if none). One vector
 * pass (sift__bucket_band) sums the mass and count below b_lo exactly and
 * lists the band's tokens; their histogram finds the bucket as the full
 * one would, from the same exact sums, and the bucket's tokens come from
 * that list. The bounds only choose where to look: a band that does not
 * hold the answer (a min_keep not met in it) returns -1, as does a row
 * whose light tokens hold an eighth of W or more, and the full histogram
 * runs. Otherwise returns what typ_cut_hist returns, with the same
 * outputs. Uses u64b, u64c and u64d. */
static int typ_cut_band(sift__ctx *ctx, const sift_candidate *c, const uint64_t *w, size_t n,
                        float m, double LS, double H, sift__u128 W, sift__u128 T, size_t kmin,
                        const uint32_t *bk, uint32_t *bstar, size_t *n_below, uint64_t *cut1,
                        uint64_t *cut2)
{
    double td = sift__u128_to_double(W) / TYP_HEAVY_PART;
    if (!(td >= 1.0 && td <= 0x1p62))
        return -1; /* no weight reaches it: the light tokens are everything */
    uint64_t *heavy = ctx->ws->u64c;
    size_t nh = sift__heavy_scan(w, n, (uint64_t)td, heavy, TYP_HEAVY_MAX);
    if (nh > TYP_HEAVY_MAX)
        return -1;
    sift__u128 L = W;
    for (size_t j = 0; j < nh; j++) { /* by bucket (insertion: few of them) */
        uint64_t x = heavy[j];
        size_t i = j;
        for (; i > 0 && bk[heavy[i - 1]] > bk[x]; i--)
            heavy[i] = heavy[i - 1];
        heavy[i] = x;
        L = sift__u128_sub(L, sift__u128_from(w[x]));
    }
    sift__u128 L8 = {L.lo << 3, (L.hi << 3) | (L.lo >> 61)};
    if (L.hi >> 61 || sift__u128_cmp(L8, W) >= 0)
        return -1;
    uint32_t b_lo = UINT32_MAX, b_hi = TYP_NB - 1;
    sift__u128 hp = {0, 0};
    if (sift__u128_cmp(L, T) > 0)
        b_lo = 0;
    for (size_t j = 0; j < nh; j++) {
        hp = sift__u128_add64(hp, w[heavy[j]]);
        uint32_t b = bk[heavy[j]];
        if (j + 1 < nh && bk[heavy[j + 1]] == b)
            continue; /* the bucket's last heavy token closes it */
        if (b_lo == UINT32_MAX && sift__u128_cmp(sift__u128_add(hp, L), T) > 0)
            b_lo = b;
        if (sift__u128_cmp(hp, T) > 0) {
            b_hi = b;
            break;
        }
    }
    if (b_lo == UINT32_MAX)
        return -1; /* not reached (T < W makes it impossible) */
    uint64_t *bidx = ctx->ws->u64c, *bw = ctx->ws->u64d;
    sift__band_sums o;
    sift__bucket_band(bk, w, n, b_lo, b_hi, &o, bidx, bw);
    sift__u128 below = sift__u128_halves(o.lo, o.hi);
    size_t cnt_below = o.below;
    if (reaches(below, cnt_below, T, kmin))
        return -1; /* the bound says it cannot; the full histogram decides */
    /* The band's histogram (typ_hist_add) and its walk. */
    size_t nb = (size_t)(b_hi - b_lo) + 1;
    uint64_t *h = ctx->ws->u64b; /* 2 nb <= 2 TYP_NB <= n */
    memset(h, 0, 2 * nb * sizeof *h);
    for (size_t j = 0; j < o.m; j++)
        typ_hist_add(h + 2 * (size_t)(bk[bidx[j]] - b_lo), bw[j]);
    size_t b = typ_hist_walk(h, nb, T, kmin, &below, &cnt_below);
    if (b == nb)
        return -1; /* not reached in the band (min_keep) */
    uint32_t bs = b_lo + (uint32_t)b;
    /* That bucket's tokens from the list (K2 and Wt overwrite the list
     * behind the reads: k <= j; K1 the histogram). */
    uint64_t *K1 = ctx->ws->u64b, *K2 = ctx->ws->u64c, *Wt = ctx->ws->u64d;
    size_t k = 0;
    for (size_t j = 0; j < o.m; j++) {
        size_t i = (size_t)bidx[j];
        if (bk[i] != bs)
            continue;
        uint64_t x = bw[j];
        K1[k] = score_bits(typ_score(c[i].logit, m, LS, H));
        K2[k] = ~sift__ckey(c[i].logit, c[i].id);
        Wt[k] = x;
        k++;
    }
    *bstar = bs;
    *n_below = cnt_below;
    return rank_select(K1, K2, Wt, k, T, kmin, below, cnt_below, cut1, cut2);
}

/* The cut (cut1, cut2) of the ranking on a large row, through a
 * histogram of the scores; bk receives every element's bucket, *bstar
 * the bucket the cut lies in and *n_below how many elements the buckets
 * before it hold (all kept). Returns 0 if the whole set does not
 * qualify. */
static int typ_cut_hist(sift__ctx *ctx, const sift_candidate *c, const uint64_t *w, size_t n,
                        float m, double LS, double H, sift__u128 W, sift__u128 T, size_t kmin,
                        uint32_t *bk, uint32_t *bstar, size_t *n_below, uint64_t *cut1,
                        uint64_t *cut2)
{
    /* every element's bucket (core/kernels.c, vector and scalar twins) */
    sift__score_buckets(c, n, m, LS, H, TYP_SCALE, (double)(TYP_NB - 1), bk);
    int r = typ_cut_band(ctx, c, w, n, m, LS, H, W, T, kmin, bk, bstar, n_below, cut1, cut2);
    if (r >= 0)
        return r;
    /* Per bucket two words (typ_hist_add); the first bucket whose
     * inclusive prefix qualifies: every element in the buckets before it
     * ranks before the cut, every one after it after the cut. */
    uint64_t *h = ctx->ws->u64b; /* 2 * TYP_NB <= TYP_BIG <= n <= its capacity */
    memset(h, 0, 2 * TYP_NB * sizeof *h);
    for (size_t i = 0; i < n; i++)
        typ_hist_add(h + 2 * (size_t)bk[i], w[i]);
    sift__u128 below = {0, 0};
    size_t cnt_below = 0;
    size_t bb = typ_hist_walk(h, TYP_NB, T, kmin, &below, &cnt_below);
    if (bb == TYP_NB)
        return 0;
    uint32_t b = (uint32_t)bb;
    /* Resolve that bucket exactly (K1 overwrites the histogram). */
    uint64_t *K1 = ctx->ws->u64b, *K2 = ctx->ws->u64c, *Wt = ctx->ws->u64d;
    size_t k = 0;
    for (size_t i = sift__find_eq_u32(bk, 0, n, b); i < n; i = sift__find_eq_u32(bk, i + 1, n, b)) {
        K1[k] = score_bits(typ_score(c[i].logit, m, LS, H));
        K2[k] = ~sift__ckey(c[i].logit, c[i].id);
        Wt[k] = w[i];
        k++;
    }
    *bstar = b;
    *n_below = cnt_below;
    /* Always 1: the prefix through this bucket qualifies. */
    return rank_select(K1, K2, Wt, k, T, kmin, below, cnt_below, cut1, cut2);
}

/* The verdict on an element of the cut's bucket: its key is at most the
 * cut. */
typedef struct typ_cut_arg {
    float m;
    double LS, H;
    uint64_t cut1, cut2;
} typ_cut_arg;

static int typ_keep_in_cut_bucket(const sift_candidate *x, void *p)
{
    const typ_cut_arg *a = p;
    return !key_lt(a->cut1, a->cut2, score_bits(typ_score(x->logit, a->m, a->LS, a->H)),
                   ~sift__ckey(x->logit, x->id));
}

/* 1 when the kept set holds a token at the largest logit m: their
 * score's bits (the ranking's first key) are at most cut1. Exact: when
 * they equal cut1, the first token at m (the smallest id) is the
 * smallest key of that score and the cut, which keeps a whole prefix of
 * the ranking from the smallest key up, keeps it. A kept set without
 * such a token has another largest logit and its weights at m are not
 * the dist's; typical then leaves none (and sift__carry_take's check of
 * m would refuse them). */
static int typ_max_kept(float m, double LS, double H, uint64_t cut1)
{
    return score_bits(typ_score(m, m, LS, H)) <= cut1;
}

static sift_status typical_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const typical_stage *t = (const typical_stage *)st;
    if (t->p >= 1.0f)
        return SIFT_OK;
    float m = sift__max_logit(a->c, a->n);
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    size_t kmin = t->min_keep > 1 ? (size_t)t->min_keep : 1;
    if (kmin >= a->n)
        return SIFT_OK;
    /* The entropy is summed in id order, so store the array that way (a
     * no-op for the usual full row). */
    sift__arr_idorder(ctx, a);
    size_t n = a->n;
    sift_candidate *c = a->c;
    uint64_t *w = ctx->ws->u64a;
    double *f = ctx->ws->f64;
    sift__u128 W = sift__weights(c, n, m, w);
    double S = sift__u128_to_double(W);
    double inv = 1.0 / S;
    double LS = sift__log(S) - 62.0 * TYP_LN2;
    /* H = dsum_idorder of w_i ? ((double)w_i * inv) * s_i : 0, in one
     * vector pass (core/weights.c) */
    double H = sift__entropy_sum(c, w, n, m, LS, inv);
    sift__u128 T = sift__u128_scale_float(W, t->p, 0);
    uint64_t cut1, cut2;
    size_t j = 0;
    /* Carry (sift__carry_leave): where `carried` is set, w[i] is the
     * weight of c[i] at m for every i < j (the compaction moved the
     * weights with the candidates; the logits are unchanged) and `kept`
     * their sum. The dist right after this stage takes them when the
     * kept set's largest logit is still m, bit for bit. */
    int carried = 0;
    sift__u128 kept = {0, 0};
    if (n >= TYP_BIG) {
        uint32_t *bk = ctx->ws->u32, bstar;
        size_t n_below;
        if (!typ_cut_hist(ctx, c, w, n, m, LS, H, W, T, kmin, bk, &bstar, &n_below, &cut1, &cut2)) {
            /* not reached (W >= 2^62 and p < 1, so T = floor(p W) < W
             * and the whole set qualifies; kmin < n): everything kept,
             * weights and sum as computed */
            sift__carry_leave(ctx, a, m, W);
            return SIFT_OK;
        }
        /* Keep the buckets before the cut's and, in it, the keys up to
         * the cut (core/kernels.c compacts without a branch on the
         * verdict). Moving the weights costs a share of that pass; for a
         * few kept tokens dist's own weights cost less. */
        typ_cut_arg arg = {m, LS, H, cut1, cut2};
        if (sift__carry_wanted(ctx) && n_below >= TYP_CARRY_MIN && typ_max_kept(m, LS, H, cut1)) {
            j = sift__keep_below_w(c, w, bk, n, bstar, typ_keep_in_cut_bucket, &arg, &kept);
            carried = 1;
        } else {
            j = sift__keep_below(c, bk, n, bstar, typ_keep_in_cut_bucket, &arg);
        }
    } else {
        uint64_t *K1 = ctx->ws->u64b, *K2 = ctx->ws->u64c, *Wt = ctx->ws->u64d;
        for (size_t i = 0; i < n; i++) {
            f[i] = typ_score(c[i].logit, m, LS, H);
            K1[i] = score_bits(f[i]);
            K2[i] = ~sift__ckey(c[i].logit, c[i].id);
            Wt[i] = w[i];
        }
        sift__u128 zero = {0, 0};
        if (!rank_select(K1, K2, Wt, n, T, kmin, zero, 0, &cut1, &cut2)) {
            /* not reached either (as above) */
            sift__carry_leave(ctx, a, m, W);
            return SIFT_OK;
        }
        /* the weights move with the candidates in the same pass */
        carried = sift__carry_wanted(ctx) && typ_max_kept(m, LS, H, cut1);
        for (size_t i = 0; i < n; i++) {
            sift_candidate x = c[i];
            uint64_t k1 = score_bits(f[i]), k2 = ~sift__ckey(x.logit, x.id);
            if (!key_lt(cut1, cut2, k1, k2)) {
                if (carried) {
                    w[j] = w[i];
                    kept = sift__u128_add64(kept, w[i]);
                }
                c[j++] = x;
            }
        }
    }
    if (j != n)
        a->dense = 0;
    a->n = j;
    if (carried)
        sift__carry_leave(ctx, a, m, kept);
    return SIFT_OK;
}

static sift_class typical_cls(const sift__stage *st, int64_t *n)
{
    const typical_stage *t = (const typical_stage *)st;
    *n = 0;
    return t->p >= 1.0f ? SIFT_CLASS_IDENTITY : SIFT_CLASS_WHOLE;
}

static const sift__stage_ops typical_ops = {
    .name = "typical",
    .apply = typical_apply,
    .cls = typical_cls,
};

sift_status sift_chain_add_typical(sift_chain *chain, float p, int32_t min_keep, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_typical, "p", p, err)))
        return s;
    if ((s = sift__param_check(&sift__desc_typical, "min_keep", min_keep, err)))
        return s;
    typical_stage *t =
        (typical_stage *)sift__stage_alloc(sift__chain_alloc(chain), &typical_ops, sizeof *t);
    if (!t)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding typical");
    t->p = p;
    t->min_keep = min_keep;
    return sift__chain_push(chain, &t->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct typical_rec {
    float p;
    int32_t min_keep;
} typical_rec;

static const sift__param typical_params[] = {
    {.name = "p",
     .doc = "probability mass to keep, in [0, 1]",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_IN,
     .lo = 0,
     .hi = 1,
     .required = 1,
     .off = offsetof(typical_rec, p),
     .flat_key = "typical_p",
     .flat_def = 1.0},
    SIFT__PARAM_MIN_KEEP(typical_rec),
};

static sift_status typical_build(sift_chain *c, const void *rec, const sift__build_env *env,
                                 sift_error *err)
{
    const typical_rec *r = rec;
    (void)env;
    return sift_chain_add_typical(c, r->p, r->min_keep, err);
}

static sift_class typical_desc_cls(const void *rec, int64_t *k)
{
    const typical_rec *r = rec;
    *k = 0;
    return r->p < 1 ? SIFT_CLASS_WHOLE : SIFT_CLASS_IDENTITY;
}

static void typical_lint(const void *rec, sift__lint *l)
{
    const typical_rec *r = rec;
    if (r->p >= 1)
        l->warn(l, "p", "typical 1 turns the stage off");
}

static int typical_flat_active(void *rec)
{
    const typical_rec *r = rec;
    return r->p < 1;
}

static const char *const typical_flat_names[] = {"typ_p", "typical-p", "typical",
                                                 "typ-p", "typ",       NULL};

const sift__sampler_desc sift__desc_typical = {
    .name = "typical",
    .summary = "locally typical sampling",
    .params = typical_params,
    .n_params = sizeof typical_params / sizeof typical_params[0],
    .rec_size = sizeof(typical_rec),
    .main = "p",
    .keeps_argmax = 1,
    .build = typical_build,
    .cls = typical_desc_cls,
    .lint = typical_lint,
    .flat_names = typical_flat_names,
    .flat_char = 'y',
    .flat_order = 5,
    .flat_active = typical_flat_active,
};

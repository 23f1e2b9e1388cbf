/*
 * tail.c - the tail-mass bound: what the tokens a slice does not hold can
 * weigh, as an upper bound on sift's exact integer mass.
 *
 * Owns sift__tail_start, sift__tail_divide, sift__tail_absent_mass, the
 * lower end (sift__tail_mass_lower, sift__tail_set_lower,
 * sift__tail_absent_mass_lo), the interval of both
 * (sift__tail_mass_range) and sift__u128_mul64.
 *
 * The bound (sift__bound, has_tail) says: there are reals y_i, one per
 * absent token, with sum exp(y_i - ref) <= tail, and every absent token
 * whose current logit z_i is >= -lam has z_i <= y_i + delta. A slice
 * starts it with y_i = l_i, ref = m (the row's largest logit), delta = 0,
 * lam = +inf and tail = the caller's bound. Stages that only lower keep it
 * (z_i goes down, y_i stays). A division by t (temperature) maps it with
 * the closed forms below; any other monotone map drops it. At a decision
 * it gives an upper bound on the integer mass W_A of the absent tokens,
 * which sift__tail_absent_mass returns together with the free bound
 * n_absent * w(b->logit). The row step's tail route also knows the mass
 * from below (tail_lo: the kernel's terms are within 6.2 % of their
 * exponentials); that lower end holds only while no stage has changed an
 * absent logit, and gives sift__tail_absent_mass_lo. docs/analyzer.md,
 * "Tail mass", has the proofs; the comments here name the steps.
 *
 * Every double computation below is rounded outwards with up(): a few
 * correctly rounded operations and sift's own exp/log (relative error
 * below 2^-50, absolute below 2^-1000 near underflow) are covered by a
 * relative margin of 2^-40 and an absolute one. A bound that is not
 * finite, or too large to help, is dropped (has_tail = 0), never guessed.
 */
#include <math.h>

#include "../sift_internal.h"

#define LN2 0.6931471805599453
/* A token with a positive weight has sift__expf(fl(z - m)) >= 2^-62, so
 * fl(z - m) > -43.1 (e^-43.1 < 2^-62 by a factor of 1.13, far more than
 * expf's error): every such token has fl(z - m) in [-CONTRIB, 0]. */
#define CONTRIB 44.0

/* An upper bound of the real value that a double computation of a few
 * correctly rounded operations gave as x. */
static double up(double x)
{
    return x + fabs(x) * 0x1p-40 + 0x1p-1000;
}

static double exp_up(double x)
{
    return up(sift__exp(up(x)));
}

/* A lower bound of the real value that a double computation of a few
 * correctly rounded operations gave as x, and of exp. */
static double down(double x)
{
    return x - fabs(x) * 0x1p-40 - 0x1p-1000;
}

static double exp_down(double x)
{
    return down(sift__exp(down(x)));
}

/* An upper bound of log(x), x > 0 (an absolute margin too: near x = 1
 * the error of sift__log is absolute). */
static double log_up(double x)
{
    double l = sift__log(x);
    return l + fabs(l) * 0x1p-40 + 0x1p-40;
}

sift__u128 sift__u128_mul64(uint64_t a, uint64_t b)
{
    uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    sift__u128 r;
    r.lo = (mid << 32) | (p00 & 0xffffffffu);
    r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    return r;
}

void sift__tail_start(sift__bound *b, float m, double S)
{
    b->has_tail = 0;
    if (!(S >= 0.0 && S < INFINITY) || !(m > -INFINITY && m < INFINITY))
        return;
    b->has_tail = 1;
    b->tail = S;
    b->tail_lo = 0.0;
    b->ref = (double)m;
    b->delta = 0.0;
    b->lam = INFINITY;
}

/* Every absent logit was <= `before` before the division, so y_i may be
 * taken <= before (replacing y_i by min(y_i, before) keeps z_i <= y_i +
 * delta, as z_i <= before, and only lowers the sum): each term exp(y_i -
 * ref) is then at most U = min(tail, exp(before - ref)). With p = 1/t and
 * u_i = exp(y_i - ref), y'_i = y_i / t and ref' = ref / t:
 *   p > 1 (t < 1): sum u_i^p <= U^(p-1) sum u_i <= U^(p-1) tail;
 *   p < 1 (t > 1): sum u_i^p <= N^(1-p) (sum u_i)^p (power means, N the
 *                  number of absent tokens).
 * The new lam' is chosen so that z' >= -lam' implies z >= -lam, and
 * delta' covers the division's rounding: z' = fl(z / t) <= z / t +
 * 2^-24 |z'| + 2^-149 with |z'| <= max(lam', |b'|). */
void sift__tail_divide(sift__bound *b, float before, float t, float m_after)
{
    /* The lower end is not carried through a division (docs/analyzer.md,
     * "Tail mass": what it would take). */
    b->tail_lo = 0.0;
    if (!b->has_tail)
        return;
    if (!(t > 0.0f && t < INFINITY) || !(m_after > -INFINITY && m_after < INFINITY) ||
        !(before < INFINITY)) {
        b->has_tail = 0;
        return;
    }
    if (before == -INFINITY || b->tail == 0.0 || b->n_absent == 0) {
        /* Every absent token is -inf (or there are none): no mass, ever. */
        b->tail = 0.0;
        b->ref = 0.0;
        b->delta = 0.0;
        b->lam = INFINITY;
        return;
    }
    double td = (double)t, pd = 1.0 / td;
    /* The real p = 1/t lies in [p_lo, p_hi]. */
    double p_lo = pd * (1.0 - 0x1p-50), p_hi = pd * (1.0 + 0x1p-50);
    double LT = log_up(b->tail);
    double LB = up((double)before - b->ref);
    double LU = LT < LB ? LT : LB;
    double E;
    if (t < 1.0f) {
        /* (p - 1) LU + LT, p - 1 > 0: the largest p - 1 when LU >= 0,
         * the smallest when LU < 0 (p_lo - 1 is below the real p - 1 by
         * far more than the subtraction's rounding) */
        double pm = LU >= 0 ? up(p_hi - 1.0) : p_lo - 1.0;
        E = up(up(pm * LU) + LT);
    } else {
        double LN = log_up((double)b->n_absent);
        double q = up(1.0 - p_lo); /* 1 - p >= 0 */
        E = up(up(q * LN) + up((LT >= 0 ? p_hi : p_lo) * LT));
    }
    double ref2 = b->ref / td;
    /* exp(ref / t - ref2) with |ref / t - ref2| <= 2^-53 |ref2| */
    E = up(E + fabs(ref2) * 0x1p-51);
    double bnew = (double)before / td; /* about the new bound, for |z'| */
    double lam2 = 2.0 * (89.0 + fabs((double)m_after)) + fabs(bnew) * 2.0;
    if (b->lam < INFINITY) {
        double cap = (b->lam - 0x1p-100) * (1.0 - 0x1p-20) / td;
        lam2 = cap < lam2 ? cap : lam2;
    }
    double mag = lam2 > fabs(bnew) * 1.01 + 1.0 ? lam2 : fabs(bnew) * 1.01 + 1.0;
    double delta2 = up(up(b->delta * p_hi) + mag * 0x1p-24 + 0x1p-100);
    if (!(E < 700.0) || !(delta2 < 1.0) || !(lam2 == lam2)) {
        b->has_tail = 0;
        return;
    }
    b->tail = exp_up(E);
    b->ref = ref2;
    b->delta = delta2;
    b->lam = lam2;
}

/* floor(X) for 0 <= X < 2^126: hi = floor(X / 2^64) is exact, the
 * remainder X - hi 2^64 too, and its conversion truncates. */
static sift__u128 u128_below(double X)
{
    sift__u128 r;
    r.hi = (uint64_t)(X * 0x1p-64);
    double rem = X - (double)r.hi * 0x1p64;
    r.lo = (uint64_t)rem;
    return r;
}

/* floor(X) + 1, above X (so truncation errors need no care). */
static sift__u128 u128_above(double X)
{
    return sift__u128_add64(u128_below(X), 1);
}

/* For an absent token with a positive weight, fl(z - m) >= -CONTRIB, so
 * z >= m - CONTRIB (1 + 2^-23); if that is >= -lam, z <= y + delta. Then
 *   w = trunc(2^62 expf(fl(z - m))) <= 2^62 e^(z - m + 2^-24 CONTRIB)
 *       (1 + 2^-23)
 * (the float subtraction's rounding, expf's error: 2^-51 before its one
 * rounding to float, 2^-24 for that rounding; truncation only lowers),
 * and the sum over those tokens is at most
 *   2^62 (1 + 2^-23) e^(delta + 2^-24 CONTRIB) tail e^(ref - m).
 * Tokens of weight 0 add nothing. */
static int tail_mass(const sift__bound *b, float m, sift__u128 *out)
{
    if (!b->has_tail)
        return 0;
    if (b->tail == 0.0) {
        out->lo = out->hi = 0;
        return 1;
    }
    if (b->lam < INFINITY && !((double)m - CONTRIB * (1.0 + 0x1p-22) >= -b->lam))
        return 0;
    double E = 62.0 * LN2 + 0x1p-40;
    E = up(E + log_up(b->tail));
    E = up(E + up(b->ref - (double)m));
    E = up(E + b->delta + CONTRIB * 0x1p-24 + 0x1p-22);
    if (!(E < 125.0 * LN2))
        return 0;
    *out = u128_above(exp_up(E));
    return 1;
}

sift__u128 sift__tail_absent_mass(const sift__bound *b, float m)
{
    sift__u128 none = {0, 0};
    if (b->n_absent == 0)
        return none;
    /* The free bound: every absent z <= b->logit, so fl(z - m) <=
     * fl(b->logit - m) and, expf and the weight being monotone, every
     * absent weight is at most the bound's. Exact. */
    uint64_t wb = sift__weight(sift__expf(b->logit - m));
    sift__u128 W = sift__u128_mul64(b->n_absent, wb);
    sift__u128 T;
    if (tail_mass(b, m, &T) && sift__u128_cmp(T, W) < 0)
        W = T;
    return W;
}

/* The kernel's terms from below (core/cpu.c, "Tail mass", gives the
 * kernel and its upper bound). With t = x - m, the term T of a token
 * whose q was not raised to TAIL_LO is 2^e (1 + f) with i = 2^23 (e + f)
 * = trunc(q) < q + 1 and q = fl(fl(t) C) <= t C (1 - 2^-24)^2 (t <= 0;
 * both roundings can only shrink a magnitude by 2^-24), C / (2^23 log2 e)
 * >= 1 - 2^-26.1: so i / 2^23 <= t log2 e (1 - 2^-22.8) + 2^-23, and as
 * q > -126 * 2^23 bounds |t log2 e| by 126.1, 2^(i / 2^23) <= e^t
 * 2^(2^-15.8), at most e^t (1 + 2^-16.3). (1 + f) / 2^f is at most
 * 1.061476 (at f = 1 / ln 2 - 1), so T <= 1.061489 e^t < 1.0616 e^t. A
 * raised term is 2^-126 exactly. Summed: sum T <= 1.0616 sum e^t +
 * n 2^-126.
 * The computed sums. A lane's float sum is at most (1 + g) times its
 * true sum of terms, 1 + g <= 1 / (1 - 2 nl u) (u = 2^-24, nl = ceil(n /
 * 64), nl u <= 1/4); the double sum of the lanes, `sum`, at most (1 +
 * 2^-46) times theirs; S = sum (1 + 2^-16) / (1 - 2 nl u) (1 + 2^-40)
 * with three roundings, so sum >= S (1 - 2 nl u) / ((1 + 2^-16) (1 +
 * 2^-40) (1 + 2^-51)). Together:
 *   sum e^t >= (S (1 - 2 nl u)^2 / ((1 + 2^-16)(1 + 2^-39)) - n 2^-126)
 *              / 1.0616,
 * which is evaluated below with every operation rounded down. The bound
 * is within about 6 % of the sum (the kernel's own spread), plus the
 * n 2^-126 that can matter only for sums near the float floor. */
double sift__tail_mass_lower(double S, size_t n)
{
    if (!(S >= 0.0 && S < INFINITY) || n >= ((size_t)1 << 28))
        return 0.0;
    double nl = (double)((n + 63) / 64);
    double shrink = up(2.0 * nl * 0x1p-24); /* 2 nl u, exact or above */
    double f = down(down(1.0 - shrink) * down(1.0 - shrink));
    double v = down(down(S * f) / up((1.0 + 0x1p-16) * (1.0 + 0x1p-39)));
    v = down(v - up((double)n * 0x1p-126));
    v = down(v / 1.0616);
    return v > 0.0 ? v : 0.0;
}

/* The tokens at or below lk are the absent ones and n_present present
 * ones, each of mass exp(l - m) <= exp(lk - m) (l <= lk): the absent ones
 * hold at least lower - n_present exp(lk - m). */
void sift__tail_set_lower(sift__bound *b, double lower, uint64_t n_present, float lk)
{
    b->tail_lo = 0.0;
    if (!b->has_tail || !(lower > 0.0) || !(lk > -INFINITY))
        return;
    double present = up((double)n_present * exp_up(up((double)lk - b->ref)));
    double lo = down(lower - present);
    if (lo > 0.0 && lo <= b->tail)
        b->tail_lo = lo;
}

/* Every absent token with current logit z (unchanged since tail_lo was
 * set: z_i are the logits the bound was built from) has
 *   w = trunc(2^62 expf(fl(z - m))) >= 2^62 c e^(z - m) - 1,
 *   c = (1 - 2^-23) e^(-44 * 2^-24) >= 1 - 2^-18.
 * If x = fl(z - m) >= -44: expf(x) >= e^x (1 - 2^-23) (2^-51 before its
 * one rounding to a normal float, 2^-24), the truncation loses less than
 * 1, and x >= (z - m) - 44 * 2^-24 (the float subtraction's rounding,
 * at most 2^-24 |x|). If x < -44: z - m <= x (1 - 2^-24) < -43.99, so
 * 2^62 c e^(z - m) < 0.37 and the right side is negative; -inf gives -1.
 * Summed over the N absent tokens, with sum e^(z - ref) >= tail_lo:
 *   W_A >= 2^62 c e^(ref - m) tail_lo - N,
 * evaluated rounded down, and 0 when it is not positive or the double
 * product leaves the range where it is exact enough to use (2^120). */
sift__u128 sift__tail_absent_mass_lo(const sift__bound *b, float m)
{
    sift__u128 none = {0, 0};
    if (!b->has_tail || !(b->tail_lo > 0.0) || b->n_absent == 0 || !(m > -INFINITY && m < INFINITY))
        return none;
    double gap = down(b->ref - (double)m);
    if (!(gap < 80.0))
        return none;
    double X = down(down(b->tail_lo * exp_down(gap)) * 0x1p62);
    X = down(X * (1.0 - 0x1p-18));
    if (!(X >= 1.0 && X < 0x1p120))
        return none;
    sift__u128 W = u128_below(X);
    if (W.hi == 0 && W.lo <= b->n_absent)
        return none;
    return sift__u128_sub(W, sift__u128_from(b->n_absent));
}

/* The row's tokens at or below lk (lk > t) are those at or below t, the
 * n_t <= n tokens the lanes of S_t hold, and those in (t, lk], which
 * S_c's kernel counted among the n_c above t. So
 *   sum_{l <= lk} e^(l - m) = e^(t - m) sum_{l <= t} e^(l - t)
 *                             + sum_{t < l <= lk} e^(l - m),
 * and each sum lies between its S and its sift__tail_mass_lower: the
 * kernel's proof (core/cpu.c) asks only that every term's l - ref be
 * <= 0 (l <= t for the first, l <= lk <= m for the second), that the
 * lanes hold at most ceil(n / 64) terms each (token j in lane j mod 64)
 * and that the row hold no NaN or +inf. Both ends are evaluated rounded
 * outwards. */
int sift__tail_join(double S_t, size_t n, float t, double S_c, size_t n_c, float m, double *S,
                    double *lower)
{
    if (!(S_t >= 0.0 && S_t < INFINITY) || !(S_c >= 0.0 && S_c < INFINITY) ||
        !(t > -INFINITY && t < m && m < INFINITY))
        return 0;
    double gap = (double)t - (double)m; /* < 0; up() and down() cover its rounding */
    double hi = up(up(S_t * exp_up(gap)) + S_c);
    double lo_t = sift__tail_mass_lower(S_t, n), lo_c = sift__tail_mass_lower(S_c, n_c);
    double lo = down(down(lo_t * exp_down(gap)) + lo_c);
    if (!(hi < INFINITY))
        return 0;
    *S = hi;
    *lower = lo > 0.0 ? lo : 0.0;
    return 1;
}

int sift__tail_mass_range(const sift__bound *b, float m, sift__u128 present, sift__u128 *A_lo,
                          sift__u128 *W_lo, sift__u128 *W_hi)
{
    *A_lo = sift__tail_absent_mass_lo(b, m);
    *W_lo = sift__u128_add(present, *A_lo);
    *W_hi = sift__u128_add(present, sift__tail_absent_mass(b, m));
    /* the two ends cannot disagree when the bounds hold; no decision on
     * them if they do */
    return sift__u128_cmp(*W_lo, *W_hi) <= 0;
}

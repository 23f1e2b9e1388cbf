/*
 * shard.c - one slice from the top-k lists of vocabulary shards.
 *
 * Owns sift_shards_merge.
 *
 * Under a tensor split each device holds a range of ids and sends the
 * k_s largest logits of its range as a set (any order, any tie choice),
 * optionally with the mass of the rest of its range relative to its own
 * maximum. The union of the lists is not "the row's top N": a shard
 * whose list is short may hide tokens above another shard's smallest
 * entry. What the union does certify: every token outside it is at most
 * the smallest entry of its own shard's list, so at most B, the largest
 * of those smallest entries over the shards that sent less than their
 * whole range. Every union token at or above B is therefore in the
 * row's top as a set, and the prefix is the k largest of the union when
 * the k-th of them is >= B (always when every shard sent k or its whole
 * range), else those at or above B (docs/analyzer.md, "Vocabulary
 * shards", has the proof). The rest of the union and the chain's extras
 * become the slice's extras, and the tail bound is each shard's bound
 * rescaled to the row's maximum, rounded upwards.
 *
 * Invariants: reads its inputs only; writes `buf` (its second half is
 * the sorts' scratch) and, on success only, *out; allocates nothing.
 */
#include <math.h>

#include "../sift_internal.h"

/* An upper bound of the real value that a double computation of a few
 * correctly rounded operations gave as x, and of exp(x) through sift's
 * own exp (relative error below 2^-50): the margins core/tail.c uses. */
static double up(double x)
{
    return x + fabs(x) * 0x1p-40 + 0x1p-1000;
}

static double exp_up(double x)
{
    return up(sift__exp(up(x)));
}

/* What the merge keeps of one shard after validation. */
typedef struct shard_info {
    float max, min; /* largest and smallest logit of its list */
} shard_info;

/* Shard i of the caller's array (elements of `stride` bytes), zero-filled
 * past the caller's size. */
static sift_shard shard_at(const sift_shard *shards, size_t stride, size_t i)
{
    sift_shard s;
    memset(&s, 0, sizeof s);
    memcpy(&s, (const char *)shards + i * stride, stride);
    return s;
}

/* The shard holding `id` (ranges validated: ascending, contiguous). */
static size_t shard_of(const sift_shard *shards, size_t stride, size_t n, int32_t id)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (shard_at(shards, stride, mid).offset <= id)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Checks one shard's range, counts and list; fills *info. `expect` is
 * where its range must start. */
static sift_status check_shard(const sift_shard *sh, size_t i, int64_t expect, int32_t V,
                               shard_info *info, sift_error *err)
{
    int64_t lo = sh->offset, end = (int64_t)sh->offset + sh->n_ids;
    if (sh->n_ids < 1)
        return sift__fail_at(err, SIFT_E_SLICE, (int64_t)i, "shard %zu: n_ids is %d, must be >= 1",
                             i, (int)sh->n_ids);
    if (lo > expect)
        return sift__fail_at(err, SIFT_E_SLICE, (int64_t)i,
                             "shard %zu starts at id %d: ids %lld..%lld are in no shard (shard %zu "
                             "must start where the one before it ends)",
                             i, (int)sh->offset, (long long)expect, (long long)(lo - 1), i);
    if (lo < expect)
        return sift__fail_at(err, SIFT_E_SLICE, (int64_t)i,
                             "shard %zu starts at id %d: ids %lld..%lld are in shard %zu and the "
                             "shard before it (ranges overlap)",
                             i, (int)sh->offset, (long long)lo,
                             (long long)((expect < end ? expect : end) - 1), i);
    if (end > V)
        return sift__fail_at(err, SIFT_E_SLICE, (int64_t)i,
                             "shard %zu covers ids %lld..%lld, past the row's %d ids", i,
                             (long long)lo, (long long)(end - 1), (int)V);
    if (sh->n_prefix < 1 || sh->n_prefix > sh->n_ids)
        return sift__fail_at(err, SIFT_E_SLICE, (int64_t)i,
                             "shard %zu: n_prefix is %d, must be in [1, n_ids = %d]", i,
                             (int)sh->n_prefix, (int)sh->n_ids);
    if (!sh->prefix)
        return sift__fail_at(err, SIFT_E_ARG, (int64_t)i, "shard %zu: prefix is NULL", i);
    if (sh->flags & ~SIFT_SHARD_TAIL_MASS)
        return sift__fail_at(err, SIFT_E_SLICE, (int64_t)i, "shard %zu: unknown flag bits 0x%x", i,
                             (unsigned)(sh->flags & ~SIFT_SHARD_TAIL_MASS));
    if ((sh->flags & SIFT_SHARD_TAIL_MASS) && !(sh->tail_mass >= 0.0 && sh->tail_mass < INFINITY))
        return sift__fail_at(err, SIFT_E_SLICE, (int64_t)i,
                             "shard %zu: tail_mass is %g; a tail mass is finite and >= 0", i,
                             sh->tail_mass);
    info->max = -INFINITY;
    info->min = INFINITY;
    for (int32_t j = 0; j < sh->n_prefix; j++) {
        sift_candidate c = sh->prefix[j];
        if (c.id < lo || c.id >= end)
            return sift__fail_at(err, SIFT_E_SLICE, j,
                                 "shard %zu, prefix[%d]: id %d is outside the shard's ids "
                                 "%lld..%lld",
                                 i, (int)j, (int)c.id, (long long)lo, (long long)(end - 1));
        if (isnan(c.logit) || c.logit == INFINITY)
            return sift__fail_at(err, SIFT_E_ROW_VALUE, c.id,
                                 "shard %zu, prefix[%d]: id %d has logit %g (NaN and +inf are "
                                 "not logits)",
                                 i, (int)j, (int)c.id, (double)c.logit);
        info->max = c.logit > info->max ? c.logit : info->max;
        info->min = c.logit < info->min ? c.logit : info->min;
    }
    return SIFT_OK;
}

/* The rescaled tail bound of one shard at the row's maximum m (finite). */
static double shard_tail(const sift_shard *sh, const shard_info *info, float m)
{
    if (sh->n_prefix == sh->n_ids || info->min == -INFINITY)
        return 0.0; /* nothing outside the list, or only -inf */
    double free_bound =
        up((double)(sh->n_ids - sh->n_prefix) * exp_up((double)info->min - (double)m));
    if (!(sh->flags & SIFT_SHARD_TAIL_MASS))
        return free_bound;
    double given = up(sh->tail_mass * exp_up((double)info->max - (double)m));
    return given < free_bound ? given : free_bound;
}

/* The position in given[0..n) of the nth (0-based) entry with `id`. */
static size_t pos_of(const sift_candidate *given, size_t n, int32_t id, size_t nth)
{
    for (size_t j = 0; j < n; j++)
        if (given[j].id == id && nth-- == 0)
            return j;
    return 0;
}

/* The smallest logit of shard s's list. */
static float shard_min(const sift_shard *sh)
{
    float mn = INFINITY;
    for (int32_t j = 0; j < sh->n_prefix; j++)
        mn = sh->prefix[j].logit < mn ? sh->prefix[j].logit : mn;
    return mn;
}

/* The extras: each with its shard's logit when the shard's list holds
 * it (then dropped: the union has it), else at most that list's smallest
 * logit. u[0..nu) is the union sorted by id; x[0..nx) a copy of the
 * caller's extras given[0..nx) (ids in range, values checked); writes the
 * kept extras to x[0..*kept) or fails naming the caller's position. */
static sift_status merge_extras(const sift_shard *shards, size_t stride, size_t n_shards,
                                const sift_candidate *u, size_t nu, sift_candidate *x, size_t nx,
                                const sift_candidate *given, sift_candidate *tmp, size_t *kept,
                                sift_error *err)
{
    sift__sort_id(x, nx, tmp);
    size_t w = 0, ui = 0;
    for (size_t i = 0; i < nx; i++) {
        sift_candidate c = x[i];
        if (i > 0 && x[i - 1].id == c.id) {
            size_t pos = pos_of(given, nx, c.id, 1);
            return sift__fail_at(err, SIFT_E_SLICE, (int64_t)pos,
                                 "extras[%zu]: id %d is in the extras twice", pos, (int)c.id);
        }
        while (ui < nu && u[ui].id < c.id)
            ui++;
        size_t s = shard_of(shards, stride, n_shards, c.id);
        if (ui < nu && u[ui].id == c.id) {
            if (u[ui].logit != c.logit || signbit(u[ui].logit) != signbit(c.logit)) {
                size_t pos = pos_of(given, nx, c.id, 0);
                return sift__fail_at(err, SIFT_E_SLICE, (int64_t)pos,
                                     "extras[%zu]: id %d has logit %g, shard %zu gives %g", pos,
                                     (int)c.id, (double)c.logit, s, (double)u[ui].logit);
            }
            continue; /* the union holds it */
        }
        sift_shard sh = shard_at(shards, stride, s);
        float mn = shard_min(&sh);
        if (c.logit > mn) {
            size_t pos = pos_of(given, nx, c.id, 0);
            return sift__fail_at(err, SIFT_E_SLICE, (int64_t)pos,
                                 "extras[%zu]: id %d has logit %g, above the smallest logit %g of "
                                 "shard %zu, whose top-k does not hold it (that top-k is wrong)",
                                 pos, (int)c.id, (double)c.logit, (double)mn, s);
        }
        x[w++] = c;
    }
    *kept = w;
    return SIFT_OK;
}

/* The arguments that need no shard read: pointers, counts, k, and the
 * element size every shard must share with shards[0]. */
static sift_status check_args(const sift_shard *shards, size_t n_shards, int32_t n_vocab, int32_t k,
                              const sift_candidate *extras, int32_t n_extras,
                              const sift_candidate *buf, const sift_slice *out, sift_error *err)
{
    if (!shards || !out || !buf)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", !shards ? "shards" : !out ? "out" : "buf");
    if (n_shards == 0)
        return sift__fail(err, SIFT_E_ARG, "n_shards is 0");
    if (n_vocab < 1)
        return sift__fail(err, SIFT_E_ARG, "n_vocab is %d, must be >= 1", (int)n_vocab);
    if (k < 1 || k > n_vocab)
        return sift__fail(err, SIFT_E_ARG, "k is %d, must be in [1, n_vocab = %d]", (int)k,
                          (int)n_vocab);
    if (n_extras < 0 || (n_extras > 0 && !extras))
        return sift__fail(err, SIFT_E_ARG, "n_extras is %d with extras %s", (int)n_extras,
                          extras ? "set" : "NULL");
    if (n_shards > (size_t)n_vocab)
        return sift__fail(err, SIFT_E_SLICE, "%zu shards for %d ids: a shard holds >= 1 id",
                          n_shards, (int)n_vocab);
    return sift__check_struct_size(err, "sift_shard", shards[0].struct_size, sizeof *shards);
}

/* Pass 1: every shard's size, range, counts and list, the ranges
 * covering [0, n_vocab) exactly; gives the lists' total length and the
 * row's maximum m. */
static sift_status check_shards(const sift_shard *shards, size_t stride, size_t n_shards,
                                int32_t n_vocab, size_t *total, float *m, sift_error *err)
{
    int64_t expect = 0;
    *total = 0;
    *m = -INFINITY;
    for (size_t i = 0; i < n_shards; i++) {
        uint32_t si;
        memcpy(&si, (const char *)shards + i * stride, sizeof si);
        if (si != stride)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "shards[%zu].struct_size is %u, shards[0].struct_size %u: set "
                                 "every element's to sizeof(sift_shard)",
                                 i, (unsigned)si, (unsigned)stride);
        sift_shard sh = shard_at(shards, stride, i);
        shard_info inf = {-INFINITY, INFINITY};
        sift_status st = check_shard(&sh, i, expect, n_vocab, &inf, err);
        if (st)
            return st;
        expect = (int64_t)sh.offset + sh.n_ids;
        *total += (size_t)sh.n_prefix;
        *m = inf.max > *m ? inf.max : *m;
    }
    if (expect != n_vocab)
        return sift__fail_at(err, SIFT_E_SLICE, (int64_t)n_shards - 1,
                             "the last shard (%zu) ends at id %lld: ids %lld..%d are in no shard",
                             n_shards - 1, (long long)(expect - 1), (long long)expect,
                             (int)n_vocab - 1);
    return SIFT_OK;
}

/* The caller's extras, each on its own: an id in range, a logit. */
static sift_status check_extras(const sift_candidate *extras, int32_t n_extras, int32_t n_vocab,
                                sift_error *err)
{
    for (int32_t j = 0; j < n_extras; j++) {
        sift_candidate c = extras[j];
        if (c.id < 0 || c.id >= n_vocab)
            return sift__fail_at(err, SIFT_E_SLICE, j, "extras[%d]: id %d is outside [0, %d)",
                                 (int)j, (int)c.id, (int)n_vocab);
        if (isnan(c.logit) || c.logit == INFINITY)
            return sift__fail_at(err, SIFT_E_ROW_VALUE, c.id,
                                 "extras[%d]: id %d has logit %g (NaN and +inf are not logits)",
                                 (int)j, (int)c.id, (double)c.logit);
    }
    return SIFT_OK;
}

/* Pass 2: the union into buf[0..*nu), by id (tmp is the sort's scratch):
 * a repeated id is a shard's error. */
static sift_status merge_union(const sift_shard *shards, size_t stride, size_t n_shards,
                               sift_candidate *buf, sift_candidate *tmp, size_t *nu,
                               sift_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < n_shards; i++) {
        sift_shard sh = shard_at(shards, stride, i);
        memcpy(buf + n, sh.prefix, (size_t)sh.n_prefix * sizeof *buf);
        n += (size_t)sh.n_prefix;
    }
    sift__sort_id(buf, n, tmp);
    for (size_t j = 1; j < n; j++)
        if (buf[j].id == buf[j - 1].id)
            return sift__fail_at(err, SIFT_E_SLICE, buf[j].id,
                                 "shard %zu: id %d is in its top-k twice",
                                 shard_of(shards, stride, n_shards, buf[j].id), (int)buf[j].id);
    *nu = n;
    return SIFT_OK;
}

/* B, the largest smallest entry of a shard that sent less than its
 * whole range (every token outside the union is <= B), and the tail:
 * each shard's bound at the row's maximum m, summed upwards. */
static void bound_and_tail(const sift_shard *shards, size_t stride, size_t n_shards, float m,
                           float *B, double *tail)
{
    *B = -INFINITY;
    *tail = 0.0;
    for (size_t i = 0; i < n_shards; i++) {
        sift_shard sh = shard_at(shards, stride, i);
        shard_info inf = {-INFINITY, INFINITY};
        for (int32_t j = 0; j < sh.n_prefix; j++) {
            float l = sh.prefix[j].logit;
            inf.max = l > inf.max ? l : inf.max;
            inf.min = l < inf.min ? l : inf.min;
        }
        if (sh.n_prefix < sh.n_ids && inf.min > *B)
            *B = inf.min;
        if (m > -INFINITY)
            *tail = up(*tail + shard_tail(&sh, &inf, m));
    }
}

sift_status sift_shards_merge(const sift_shard *shards, size_t n_shards, int32_t n_vocab, int32_t k,
                              const sift_candidate *extras, int32_t n_extras, sift_candidate *buf,
                              size_t capacity, sift_slice *out, sift_error *err)
{
    sift_status st = check_args(shards, n_shards, n_vocab, k, extras, n_extras, buf, out, err);
    if (st)
        return st;
    size_t stride = shards[0].struct_size;
    size_t total = 0;
    float m = -INFINITY;
    if ((st = check_shards(shards, stride, n_shards, n_vocab, &total, &m, err)))
        return st;
    if ((st = check_extras(extras, n_extras, n_vocab, err)))
        return st;
    size_t need = total + (size_t)n_extras;
    if (capacity / 2 < need)
        return sift__fail(err, SIFT_E_ARG,
                          "buf holds %zu candidates; the merge needs %zu (twice the shards' "
                          "n_prefix plus n_extras)",
                          capacity, 2 * need);
    sift_candidate *tmp = buf + need; /* the second half: sort scratch */
    size_t nu = 0;
    if ((st = merge_union(shards, stride, n_shards, buf, tmp, &nu, err)))
        return st;
    float B = -INFINITY;
    double tail = 0.0;
    bound_and_tail(shards, stride, n_shards, m, &B, &tail);
    /* The extras, behind the union in buf. */
    size_t nx = 0;
    if (n_extras > 0) {
        sift_candidate *x = buf + nu;
        memcpy(x, extras, (size_t)n_extras * sizeof *x);
        st = merge_extras(shards, stride, n_shards, buf, nu, x, (size_t)n_extras, extras, tmp, &nx,
                          err);
        if (st)
            return st;
    }
    /* The union in canonical order; the prefix: its k largest, cut back
     * to the tokens at or above B when fewer than k are. */
    sift__sort_canon(buf, nu, tmp);
    size_t kp = (size_t)k < nu ? (size_t)k : nu;
    while (kp > 1 && buf[kp - 1].logit < B)
        kp--;
    /* Every token not held is at most its shard's smallest entry (<= B
     * <= buf[kp - 1]) and weighs at most exp(buf[kp - 1] - m) <= 1. */
    double held = (double)(nu + nx);
    if (tail > (double)n_vocab - held)
        tail = (double)n_vocab - held;
    /* Field by field: fields a later sift_slice adds stay as the caller
     * set them (zero-initialised). */
    out->n_vocab = n_vocab;
    out->n_prefix = (int32_t)kp;
    out->prefix = buf;
    out->n_extras = (int32_t)(nu - kp + nx);
    out->extras = out->n_extras > 0 ? buf + kp : NULL;
    out->flags = SIFT_SLICE_TAIL_MASS;
    out->tail_mass = tail;
    return SIFT_OK;
}

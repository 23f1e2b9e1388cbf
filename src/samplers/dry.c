/*
 * dry.c - DRY ("don't repeat yourself"): penalises the tokens that would
 * extend a repetition of the recent history.
 *
 * Owns the "dry" stage, its history window and its sequence breakers, and
 * the internal test constructor sift__chain_add_dry_tokens.
 *
 * Math (docs/samplers.md, "dry"). Let t_0..t_{N-1} be the last N accepted
 * tokens (t_{N-1} the most recent), N = min(accepted, last_n).
 * 1. If N <= allowed_length: nothing.
 * 2. Breakers are (head token, tail sequence) pairs. Scan back from the
 *    most recent token, distance i = 0, 1, ...: at the first token that is
 *    a head whose tail (of length <= i) equals the tokens after it, the
 *    longest such tail (length s) sets rep_limit = i - s; by default
 *    rep_limit = N. If rep_limit < allowed_length: nothing.
 * 3. For every j in [0, N-2], L_j = min(rep_limit, length of the longest
 *    common suffix of t_0..t_j and t_0..t_{N-1}). Computed with the
 *    Z-algorithm on the reversed window (O(N) per step).
 * 4. For every j with L_j >= allowed_length, best[t_{j+1}] = max(best,
 *    L_j): emitting t_{j+1} would extend that repeat.
 * 5. Every candidate with a best entry that is not a single-token breaker
 *    (a head with an empty tail) gets e = best - allowed_length, clamped to
 *    floor(88.7228391 / sift__log(base)) when base > 1.000001f, and
 *        l = l - (float)(multiplier * sift__pow((double)base, (double)e))
 *    with the product in double and one rounding to float (a product
 *    beyond the float range becomes +inf, so the token becomes -inf).
 * The result never becomes +inf or NaN (the penalty is >= 0).
 *
 * Breakers given as strings are matched through the vocabulary: every
 * token whose bytes contain the breaker becomes a head with an empty tail;
 * otherwise, for every way the token's bytes end with a proper prefix of
 * the breaker, the token becomes a head whose tail is the rest of the
 * breaker split into tokens by greedy longest match over the vocabulary
 * pieces (smallest id among equal pieces), truncated to 20 tokens; a rest
 * that cannot be split is skipped; duplicate pairs are kept once.
 *
 * Reference behaviour: llama.cpp's DRY sampler (same steps, same penalty
 * expression). Deliberate differences: last_n = -1 (context size) is not
 * supported (give a window) and n_ctx_train plays no part; a breaker over
 * 40 bytes, an empty one, more than 64, or a NULL vocabulary are errors
 * (llama truncates or skips); token-sequence breakers longer than 21
 * tokens (head + 20) are rejected; tails come from greedy longest match,
 * not from the model's tokenizer; the exponent clamp divides in double
 * with sift__log; the penalty goes through sift__pow.
 *
 * State layout: one allocation. After the struct: the ring (last_n
 * tokens), the per-step scratch (reversed window, Z values, a sparse
 * best map as an open-addressing hash with capacity >= 2 last_n and the
 * list of slots touched, emptied again before apply returns, or holding
 * the settled penalised set between dry_settle and the next accept), and the
 * breakers (a hash head -> head index, per head the range of its tails
 * and whether it has an empty tail, the tails' offsets and lengths, the
 * pooled tail tokens, a bitmap of the head ids); dry_regions names each
 * one. Everything is addressed by offset, so the default flat clone is a
 * deep copy. apply and accept never allocate.
 *
 * Capability class: LOWERS(last_n) when enabled (multiplier != 0,
 * base >= 1, last_n != 0); IDENTITY otherwise.
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_dry;

#define DRY_MAX_BREAKERS 64
#define DRY_MAX_BREAKER_BYTES 40
#define DRY_MAX_TAIL 20

/* The int32_t regions after the stage struct, as byte offsets from the
 * start of the block, in the order dry_layout places them (each on a
 * 16-byte boundary). */
typedef struct dry_regions {
    size_t ring;     /* the window: last_n tokens */
    size_t rev;      /* scratch: the window reversed (last_n) */
    size_t z;        /* scratch: the Z values (last_n) */
    size_t bkey;     /* best map: token per slot, -1 = empty (2^bbits) */
    size_t bval;     /* best map: best length per slot (2^bbits) */
    size_t touch;    /* best map: the slots in use (last_n) */
    size_t hkey;     /* head hash: head token per slot, -1 = empty (2^hbits) */
    size_t hidx;     /* head hash: head index per slot (2^hbits) */
    size_t hstart;   /* per head index: its first tail entry (n_ent) */
    size_t hcount;   /* per head index: how many tail entries (n_ent) */
    size_t hsingle;  /* per head index: 1 when it has an empty tail (n_ent) */
    size_t toff;     /* per tail entry: its offset in the pool (n_ent) */
    size_t tlen;     /* per tail entry: its length (n_ent) */
    size_t pool;     /* the tails' tokens, pooled */
    size_t headbits; /* bitmap of the head ids (max_head / 32 + 1 words) */
} dry_regions;

typedef struct dry_stage {
    sift__stage base;
    float multiplier, dbase;
    int32_t allowed, last_n;
    int active;
    int32_t max_exp;   /* exponent clamp, 0 = none */
    int32_t head, len; /* ring: oldest at ring[head], len entries */
    uint32_t bbits;    /* best-map capacity = 1 << bbits */
    uint32_t hbits;    /* head-hash capacity = 1 << hbits (0 entries: 0) */
    int32_t n_heads, n_ent;
    /* The penalised set of the next step, settled after the accept of a
     * generated token (dry_settle): while p_valid, the best map holds it
     * (n_touch entries listed in touch) and p_count is how many of them
     * are penalised (not single-token breakers). Any accept clears it. */
    int p_valid;
    int32_t n_touch, p_count;
    int32_t max_head; /* largest head id, -1 if none (the head bitmap's size) */
    dry_regions at;   /* where each region lies in the block */
} dry_stage;

static int32_t *dry_arr(dry_stage *d, size_t off)
{
    return (int32_t *)(void *)((char *)d + off);
}

static const int32_t *dry_carr(const dry_stage *d, size_t off)
{
    return (const int32_t *)(const void *)((const char *)d + off);
}

static uint32_t hash32(int32_t t, uint32_t bits)
{
    return ((uint32_t)t * 2654435761u) >> (32 - bits);
}

/* 1 when token t may be a breaker head: the exact bitmap of head ids
 * (a test per window token, before the hash lookup). */
static int dry_may_head(const dry_stage *d, int32_t t)
{
    if (t > d->max_head)
        return 0;
    const uint32_t *bits = (const uint32_t *)(const void *)((const char *)d + d->at.headbits);
    return (int)((bits[(uint32_t)t >> 5] >> ((uint32_t)t & 31)) & 1u);
}

/* Head index of token t, or -1. */
static int32_t dry_head(const dry_stage *d, int32_t t)
{
    if (!dry_may_head(d, t))
        return -1;
    const int32_t *hkey = dry_carr(d, d->at.hkey);
    uint32_t mask = (1u << d->hbits) - 1;
    for (uint32_t i = hash32(t, d->hbits);; i = (i + 1) & mask) {
        if (hkey[i] == -1)
            return -1;
        if (hkey[i] == t)
            return dry_carr(d, d->at.hidx)[i];
    }
}

/* Slot of t in the best map, or the empty slot where it would go. */
static uint32_t dry_best_slot(const dry_stage *d, int32_t t)
{
    const int32_t *bkey = dry_carr(d, d->at.bkey);
    uint32_t mask = (1u << d->bbits) - 1;
    uint32_t i = hash32(t, d->bbits);
    while (bkey[i] != -1 && bkey[i] != t)
        i = (i + 1) & mask;
    return i;
}

/* Step 2: the repetition limit set by the most recent breaker. */
static int32_t dry_rep_limit(const dry_stage *d, const int32_t *rev, int32_t N)
{
    if (d->n_heads == 0)
        return N;
    const int32_t *hstart = dry_carr(d, d->at.hstart);
    const int32_t *hcount = dry_carr(d, d->at.hcount);
    const int32_t *toff = dry_carr(d, d->at.toff);
    const int32_t *tlen = dry_carr(d, d->at.tlen);
    const int32_t *pool = dry_carr(d, d->at.pool);
    for (int32_t i = 0; i < N; i++) {
        int32_t h = dry_head(d, rev[i]);
        if (h < 0)
            continue;
        int32_t longest = -1;
        for (int32_t e = hstart[h]; e < hstart[h] + hcount[h]; e++) {
            int32_t s = tlen[e];
            if (s <= longest || s > i)
                continue;
            int32_t o = 0;
            /* the tail follows the head: rev[i-1], rev[i-2], ... */
            while (o < s && pool[toff[e] + o] == rev[i - o - 1])
                o++;
            if (o == s)
                longest = s;
        }
        if (longest >= 0)
            return i - longest;
    }
    return N;
}

/* Step 4 for one position: best[t] = max(best[t], L). */
static void dry_note(dry_stage *d, int32_t t, int32_t L)
{
    int32_t *bkey = dry_arr(d, d->at.bkey);
    int32_t *bval = dry_arr(d, d->at.bval);
    uint32_t s = dry_best_slot(d, t);
    if (bkey[s] == -1) {
        bkey[s] = t;
        bval[s] = L;
        dry_arr(d, d->at.touch)[d->n_touch++] = (int32_t)s;
    } else if (bval[s] < L) {
        bval[s] = L;
    }
}

/* Steps 1-4: fills the best map (d->n_touch slots, listed in touch) from
 * the window; leaves it empty when nothing is penalised. Uses the
 * scratch arrays: not for a stage other threads read. */
static void dry_compute(dry_stage *d)
{
    d->n_touch = 0;
    int32_t N = d->len;
    if (N <= d->allowed)
        return;
    const int32_t *ring = dry_carr(d, d->at.ring);
    int32_t *rev = dry_arr(d, d->at.rev);
    int32_t *z = dry_arr(d, d->at.z);
    /* rev[x] = t_{N-1-x}: the ring's two runs, newest first. */
    int32_t first = d->last_n - d->head; /* entries from head to the end */
    int32_t n1 = N < first ? N : first;  /* t_0 .. t_{n1-1} at ring[head..] */
    for (int32_t x = 0; x < n1; x++)
        rev[N - 1 - x] = ring[d->head + x];
    for (int32_t x = n1; x < N; x++)
        rev[N - 1 - x] = ring[x - n1];
    int32_t rep_limit = dry_rep_limit(d, rev, N);
    if (rep_limit < d->allowed)
        return;

    /* Step 3: z[k] = longest common prefix of rev and rev[k..], the exact
     * Z-algorithm; the common suffix ending at t_{N-1-k} has that length.
     * Outside the rightmost match window, a position whose token differs
     * from rev[0] has z = 0; with allowed_length >= 1 such a position
     * contributes nothing, so runs of them are skipped four at a time. */
    int32_t zl = 0, zr = 0; /* rightmost match window [zl, zr) */
    const int32_t r0 = rev[0], lim = d->allowed;
    for (int32_t k = 1; k < N; k++) {
        if (k >= zr && lim >= 1) {
            while (k + 4 <= N && ((rev[k] == r0) | (rev[k + 1] == r0) | (rev[k + 2] == r0) |
                                  (rev[k + 3] == r0)) == 0) {
                z[k] = z[k + 1] = z[k + 2] = z[k + 3] = 0;
                k += 4;
            }
            if (k >= N)
                break;
        }
        int32_t v = 0;
        if (k < zr) {
            v = zr - k;
            if (z[k - zl] < v)
                v = z[k - zl];
        }
        while (k + v < N && rev[v] == rev[k + v])
            v++;
        if (k + v > zr) {
            zl = k;
            zr = k + v;
        }
        z[k] = v;
        /* Step 4, fused. */
        int32_t L = v < rep_limit ? v : rep_limit;
        if (L >= lim)
            dry_note(d, rev[k - 1], L);
    }
}

/* Empties the best map. */
static void dry_clear(dry_stage *d)
{
    int32_t *bkey = dry_arr(d, d->at.bkey);
    const int32_t *touch = dry_carr(d, d->at.touch);
    for (int32_t i = 0; i < d->n_touch; i++)
        bkey[touch[i]] = -1;
    d->n_touch = 0;
}

/* The penalty of a best length (step 5), rounded to float once. */
static float dry_penalty(const dry_stage *d, int32_t best)
{
    int32_t e = best - d->allowed;
    if (d->max_exp > 0 && e > d->max_exp)
        e = d->max_exp;
    double pen = (double)d->multiplier * sift__pow((double)d->dbase, (double)e);
    return pen >= 0x1.ffffffp127 ? INFINITY : (float)pen;
}

/* Step 5 from the filled best map. The single-token-breaker test and the
 * penalty depend only on the token id and its best length, so each
 * candidate is handled on its own and the storage order cannot matter. */
static void dry_penalise(const dry_stage *d, sift__arr *a)
{
    const int32_t *bkey = dry_carr(d, d->at.bkey);
    const int32_t *bval = dry_carr(d, d->at.bval);
    const int32_t *touch = dry_carr(d, d->at.touch);
    const int32_t *hsingle = dry_carr(d, d->at.hsingle);
    int changed = 0;
    if (a->dense) {
        for (int32_t i = 0; i < d->n_touch; i++) {
            int32_t t = bkey[touch[i]];
            if (t >= a->V)
                continue;
            int32_t h = dry_head(d, t);
            if (h >= 0 && hsingle[h])
                continue;
            a->c[t].logit = a->c[t].logit - dry_penalty(d, bval[touch[i]]);
            changed = 1;
        }
    } else if (d->n_touch > 0) {
        for (size_t i = 0; i < a->n; i++) {
            int32_t t = a->c[i].id;
            uint32_t s = dry_best_slot(d, t);
            if (bkey[s] == -1)
                continue;
            int32_t h = dry_head(d, t);
            if (h >= 0 && hsingle[h])
                continue;
            a->c[i].logit = a->c[i].logit - dry_penalty(d, bval[s]);
            changed = 1;
        }
    }
    if (changed)
        sift__arr_touched(a);
}

static sift_status dry_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    (void)ctx;
    dry_stage *d = (dry_stage *)st;
    if (!d->active)
        return SIFT_OK;
    if (d->p_valid) {
        /* settled after the last accept: read only */
        dry_penalise(d, a);
        return SIFT_OK;
    }
    dry_compute(d);
    dry_penalise(d, a);
    dry_clear(d); /* leave the scratch map empty for the next step */
    return SIFT_OK;
}

static void dry_accept(sift__stage *st, int32_t t)
{
    dry_stage *d = (dry_stage *)st;
    if (!d->active)
        return;
    if (d->p_valid) {
        dry_clear(d);
        d->p_valid = 0;
    }
    int32_t *ring = dry_arr(d, d->at.ring);
    if (d->len == d->last_n) {
        ring[d->head] = t;
        d->head = (d->head + 1) % d->last_n;
    } else {
        ring[(d->head + d->len) % d->last_n] = t;
        d->len++;
    }
}

/* After the accept of a generated token: settles the next step's
 * penalised set, so that the step reads it (apply) and the dynamic plan
 * counts it exactly (dry_lowers). Prompt tokens do not settle: a prompt
 * is accepted token by token, and settling each would cost a pass over
 * the window per token; the first step after it computes the set in
 * apply, as before, and its dynamic plan takes the window bound. */
static void dry_settle(sift__stage *st)
{
    dry_stage *d = (dry_stage *)st;
    if (!d->active || d->p_valid)
        return;
    dry_compute(d);
    const int32_t *bkey = dry_carr(d, d->at.bkey);
    const int32_t *touch = dry_carr(d, d->at.touch);
    const int32_t *hsingle = dry_carr(d, d->at.hsingle);
    int32_t n = 0;
    for (int32_t i = 0; i < d->n_touch; i++) {
        int32_t h = dry_head(d, bkey[touch[i]]);
        n += !(h >= 0 && hsingle[h]);
    }
    d->p_count = n;
    d->p_valid = 1;
}

static void dry_reset(sift__stage *st)
{
    dry_stage *d = (dry_stage *)st;
    if (d->active && d->p_valid)
        dry_clear(d);
    d->p_valid = 0;
    d->head = d->len = 0;
}

static uint64_t dry_digest(const sift__stage *st, uint64_t h)
{
    const dry_stage *d = (const dry_stage *)st;
    if (!d->active)
        return h;
    const int32_t *ring = dry_carr(d, d->at.ring);
    h = sift__fnv(h, &d->len, sizeof d->len);
    for (int32_t i = 0; i < d->len; i++) {
        int32_t t = ring[(d->head + i) % d->last_n];
        h = sift__fnv(h, &t, sizeof t);
    }
    return h;
}

static sift_class dry_cls(const sift__stage *st, int64_t *n)
{
    const dry_stage *d = (const dry_stage *)st;
    if (!d->active) {
        *n = 0;
        return SIFT_CLASS_IDENTITY;
    }
    *n = d->last_n;
    return SIFT_CLASS_LOWERS;
}

/* Static: the window. Dynamic: the settled penalised set when there is
 * one (dry_settle); else DRY penalises only tokens that followed an
 * earlier occurrence of the current suffix, so at most len - 1 distinct
 * tokens, and none while the history is not longer than allowed_length. */
static int64_t dry_lowers(const sift__stage *st, int dynamic)
{
    const dry_stage *d = (const dry_stage *)st;
    if (!d->active)
        return 0;
    if (!dynamic)
        return d->last_n;
    if (d->p_valid)
        return d->p_count;
    return d->len <= d->allowed ? 0 : d->len - 1;
}

static const sift__stage_ops dry_ops = {
    .name = "dry",
    .apply = dry_apply,
    .cls = dry_cls,
    .lowers = dry_lowers,
    .accept = dry_accept,
    .settle = dry_settle,
    .reset = dry_reset,
    .digest = dry_digest,
};

/* ------------------------------------------------------------------ */
/* Construction                                                        */
/* ------------------------------------------------------------------ */

/* Breaker pairs collected before the stage block is sized. */
typedef struct brk_list {
    const sift__alloc *al;
    int32_t *head, *toff, *tlen;
    size_t n, cap;
    int32_t *pool;
    size_t pn, pcap;
    int nomem;
} brk_list;

/* Grows one of the lists' arrays, of capacity `cap`, to hold `need`
 * (sift__reserve): used entries kept, the rest 0. */
static sift_status grow32(const sift__alloc *al, int32_t **p, size_t cap, size_t used, size_t need,
                          size_t first)
{
    return sift__reserve(al, p, &cap, used, need, sizeof **p, first);
}

static void brk_free(brk_list *b)
{
    sift__free(b->al, b->head);
    sift__free(b->al, b->toff);
    sift__free(b->al, b->tlen);
    sift__free(b->al, b->pool);
}

/* Appends (head, tail) unless the same pair already exists among the
 * entries from index `from` on (the entries of the current head). */
static void brk_add(brk_list *b, size_t from, int32_t head, const int32_t *tail, size_t tl)
{
    if (b->nomem)
        return;
    for (size_t i = from; i < b->n; i++)
        if (b->head[i] == head && (size_t)b->tlen[i] == tl &&
            (tl == 0 || memcmp(b->pool + b->toff[i], tail, tl * sizeof *tail) == 0))
            return;
    if (b->n == b->cap) {
        /* three parallel arrays of one capacity: grow each, then commit */
        size_t cap = b->cap ? 2 * b->cap : 16;
        if (grow32(b->al, &b->head, b->cap, b->n, cap, 16) ||
            grow32(b->al, &b->toff, b->cap, b->n, cap, 16) ||
            grow32(b->al, &b->tlen, b->cap, b->n, cap, 16)) {
            b->nomem = 1;
            return;
        }
        b->cap = cap;
    }
    if (b->pn + tl > b->pcap &&
        sift__reserve(b->al, &b->pool, &b->pcap, b->pn, b->pn + tl, sizeof *b->pool, 64)) {
        b->nomem = 1;
        return;
    }
    b->head[b->n] = head;
    b->toff[b->n] = (int32_t)b->pn;
    b->tlen[b->n] = (int32_t)tl;
    if (tl)
        memcpy(b->pool + b->pn, tail, tl * sizeof *tail);
    b->pn += tl;
    b->n++;
}

static const char *vpiece(const sift_vocab *v, int32_t id, size_t *len)
{
    const char *p = NULL;
    if (sift_vocab_piece(v, id, &p, len, NULL) != SIFT_OK) {
        *len = 0;
        return "";
    }
    return p ? p : "";
}

/* Pieces of 1..40 bytes -> smallest token id with those bytes. */
typedef struct piece_map {
    int32_t *slot;
    uint32_t bits;
} piece_map;

static uint32_t piece_home(const char *s, size_t n, uint32_t bits)
{
    uint64_t h = sift__fnv(0, s, n);
    return (uint32_t)((h ^ (h >> 32)) * 2654435761u) >> (32 - bits);
}

static int32_t piece_find(const piece_map *m, const sift_vocab *v, const char *s, size_t n,
                          uint32_t *where)
{
    uint32_t mask = (1u << m->bits) - 1;
    for (uint32_t i = piece_home(s, n, m->bits);; i = (i + 1) & mask) {
        int32_t id = m->slot[i];
        if (id < 0) {
            if (where)
                *where = i;
            return -1;
        }
        size_t len;
        const char *p = vpiece(v, id, &len);
        if (len == n && memcmp(p, s, n) == 0)
            return id;
    }
}

/* SIFT_OK, or SIFT_E_NOMEM (m->slot NULL). */
static sift_status piece_map_build(piece_map *m, const sift__alloc *al, const sift_vocab *v)
{
    int32_t V = sift_vocab_size(v);
    uint32_t bits = 2;
    while (((size_t)1 << bits) < 2 * (size_t)V)
        bits++;
    m->bits = bits;
    m->slot = sift__calloc(al, (size_t)1 << bits, sizeof *m->slot);
    if (!m->slot)
        return SIFT_E_NOMEM;
    memset(m->slot, 0xff, ((size_t)1 << bits) * sizeof *m->slot);
    for (int32_t id = 0; id < V; id++) {
        size_t len;
        const char *p = vpiece(v, id, &len);
        if (len == 0 || len > DRY_MAX_BREAKER_BYTES)
            continue;
        uint32_t where;
        if (piece_find(m, v, p, len, &where) < 0)
            m->slot[where] = id; /* ascending ids: the first one stays */
    }
    return SIFT_OK;
}

/* Greedy longest-match split of s[0..n) into at most 39 tokens; returns
 * the count, or -1 if some position starts no piece. */
static int split_greedy(const piece_map *m, const sift_vocab *v, const char *s, size_t n,
                        int32_t *out)
{
    size_t pos = 0;
    int cnt = 0;
    while (pos < n) {
        size_t l = n - pos < DRY_MAX_BREAKER_BYTES ? n - pos : DRY_MAX_BREAKER_BYTES;
        int32_t id = -1;
        for (; l > 0; l--)
            if ((id = piece_find(m, v, s + pos, l, NULL)) >= 0)
                break;
        if (id < 0)
            return -1;
        out[cnt++] = id;
        pos += l;
    }
    return cnt;
}

static int contains(const char *w, size_t wl, const char *s, size_t sl)
{
    for (size_t p = 0; p + sl <= wl; p++)
        if (w[p] == s[0] && memcmp(w + p, s, sl) == 0)
            return 1;
    return 0;
}

/* Compiles string breakers against the vocabulary into b. */
static sift_status compile_strings(brk_list *b, const sift__alloc *al, const sift_vocab *v,
                                   const char *const *brk, const size_t *lens, size_t nb,
                                   sift_error *err)
{
    /* tails[k][i]: the split of breaker k from byte i (1 <= i < len),
     * computed once per breaker; tl[k][i] = -1 when it cannot be split. */
    int32_t(*tails)[DRY_MAX_BREAKER_BYTES][DRY_MAX_BREAKER_BYTES] = NULL;
    int32_t(*tl)[DRY_MAX_BREAKER_BYTES] = NULL;
    piece_map m = {NULL, 0};
    int need_split = 0;
    for (size_t k = 0; k < nb; k++)
        need_split |= lens[k] > 1;
    tails = sift__calloc(al, nb, sizeof *tails);
    tl = sift__calloc(al, nb, sizeof *tl);
    if (!tails || !tl || (need_split && piece_map_build(&m, al, v))) {
        sift__free(al, tails);
        sift__free(al, tl);
        sift__free(al, m.slot);
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while compiling dry breakers");
    }
    for (size_t k = 0; k < nb; k++)
        for (size_t i = 1; i < lens[k]; i++) {
            int c = split_greedy(&m, v, brk[k] + i, lens[k] - i, tails[k][i]);
            tl[k][i] = c < 0 ? -1 : (c > DRY_MAX_TAIL ? DRY_MAX_TAIL : c);
        }
    int32_t V = sift_vocab_size(v);
    for (int32_t id = 0; id < V && !b->nomem; id++) {
        size_t wl;
        const char *w = vpiece(v, id, &wl);
        size_t from = b->n; /* this token's entries start here */
        for (size_t k = 0; k < nb; k++) {
            const char *s = brk[k];
            size_t sl = lens[k];
            if (contains(w, wl, s, sl)) {
                brk_add(b, from, id, NULL, 0);
                continue;
            }
            /* w ends with the proper prefix s[0..i) of the breaker */
            for (size_t pos = 0; pos < wl; pos++) {
                size_t i = wl - pos;
                if (i >= sl || w[pos] != s[0] || memcmp(w + pos, s, i) != 0)
                    continue;
                if (tl[k][i] >= 0)
                    brk_add(b, from, id, tails[k][i], (size_t)tl[k][i]);
            }
        }
    }
    sift__free(al, tails);
    sift__free(al, tl);
    sift__free(al, m.slot);
    if (b->nomem)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while compiling dry breakers");
    return SIFT_OK;
}

static size_t align16(size_t x)
{
    return (x + 15) & ~(size_t)15;
}

/* The smallest bits >= 2 with 2^bits >= n: an open-addressing table of
 * 2^bits slots holds n / 2 keys at most half full. */
static uint32_t dry_table_bits(size_t n)
{
    uint32_t bits = 2;
    while (((size_t)1 << bits) < n)
        bits++;
    return bits;
}

/* Places a region of `count` int32_t at *at = off; returns where the
 * next region starts. */
static size_t dry_region(size_t *at, size_t off, size_t count)
{
    *at = off;
    return align16(off + count * sizeof(int32_t));
}

/* Lays out the regions of an enabled stage in the order of dry_regions,
 * for a window of W tokens, a best map of 2^bbits slots, a head hash of
 * hcap slots, the breaker entries of b and a largest head id max_head;
 * returns the size of the whole block. */
static size_t dry_layout(dry_regions *at, size_t W, uint32_t bbits, size_t hcap, const brk_list *b,
                         int32_t max_head)
{
    size_t bcap = (size_t)1 << bbits;
    size_t hwords = max_head < 0 ? 0 : (size_t)max_head / 32 + 1;
    size_t off = align16(sizeof(dry_stage));
    off = dry_region(&at->ring, off, W);
    off = dry_region(&at->rev, off, W);
    off = dry_region(&at->z, off, W);
    off = dry_region(&at->bkey, off, bcap);
    off = dry_region(&at->bval, off, bcap);
    off = dry_region(&at->touch, off, W);
    off = dry_region(&at->hkey, off, hcap);
    off = dry_region(&at->hidx, off, hcap);
    off = dry_region(&at->hstart, off, b->n);
    off = dry_region(&at->hcount, off, b->n);
    off = dry_region(&at->hsingle, off, b->n);
    off = dry_region(&at->toff, off, b->n);
    off = dry_region(&at->tlen, off, b->n);
    off = dry_region(&at->pool, off, b->pn);
    return dry_region(&at->headbits, off, hwords);
}

/* Allocates the block of an enabled stage for a window of last_n tokens
 * and the breaker entries of b: the regions laid out, the best map and
 * the head hash empty, everything else zero. NULL when out of memory. */
static dry_stage *dry_alloc_enabled(const sift__alloc *al, int32_t last_n, const brk_list *b)
{
    uint32_t bbits = dry_table_bits(2 * (size_t)last_n);
    uint32_t hbits = b->n ? dry_table_bits(2 * b->n) : 0;
    size_t hcap = b->n ? (size_t)1 << hbits : 0;
    int32_t max_head = -1;
    for (size_t e = 0; e < b->n; e++)
        max_head = b->head[e] > max_head ? b->head[e] : max_head;
    dry_regions at;
    size_t size = dry_layout(&at, (size_t)last_n, bbits, hcap, b, max_head);
    dry_stage *d = (dry_stage *)sift__stage_alloc(al, &dry_ops, size);
    if (!d)
        return NULL;
    d->at = at;
    d->bbits = bbits;
    d->hbits = hbits;
    d->max_head = max_head;
    memset(dry_arr(d, d->at.bkey), 0xff, ((size_t)1 << bbits) * sizeof(int32_t));
    memset(dry_arr(d, d->at.hkey), 0xff, hcap * sizeof(int32_t));
    return d;
}

/* Files the breaker entries of b into the stage: the head hash and
 * bitmap, per head its range of tail entries and whether one is empty,
 * the entries' tails and the pooled tail tokens. */
static void dry_index_breakers(dry_stage *d, const brk_list *b)
{
    int32_t *hkey = dry_arr(d, d->at.hkey), *hidx = dry_arr(d, d->at.hidx);
    int32_t *hstart = dry_arr(d, d->at.hstart), *hcount = dry_arr(d, d->at.hcount);
    int32_t *hsingle = dry_arr(d, d->at.hsingle);
    int32_t *toff = dry_arr(d, d->at.toff), *tlen = dry_arr(d, d->at.tlen);
    uint32_t *headbits = (uint32_t *)(void *)((char *)d + d->at.headbits);
    /* Pass 1: an index per distinct head, in order of first appearance,
     * its bit, its count of entries and whether one has an empty tail. */
    uint32_t mask = (1u << d->hbits) - 1;
    for (size_t e = 0; e < b->n; e++) {
        int32_t t = b->head[e];
        uint32_t i = hash32(t, d->hbits);
        while (hkey[i] != -1 && hkey[i] != t)
            i = (i + 1) & mask;
        if (hkey[i] == -1) {
            hkey[i] = t;
            hidx[i] = d->n_heads++;
            headbits[(uint32_t)t >> 5] |= 1u << ((uint32_t)t & 31);
        }
        hcount[hidx[i]]++;
        if (b->tlen[e] == 0)
            hsingle[hidx[i]] = 1;
    }
    /* Pass 2: ranges, then each entry placed in its head's range (hcount
     * is rebuilt as the fill cursor). */
    int32_t run = 0;
    for (int32_t h = 0; h < d->n_heads; h++) {
        hstart[h] = run;
        run += hcount[h];
        hcount[h] = 0;
    }
    for (size_t e = 0; e < b->n; e++) {
        int32_t h = dry_head(d, b->head[e]);
        int32_t at = hstart[h] + hcount[h]++;
        toff[at] = b->toff[e];
        tlen[at] = b->tlen[e];
    }
    if (b->pn)
        memcpy(dry_arr(d, d->at.pool), b->pool, b->pn * sizeof(int32_t));
    d->n_ent = (int32_t)b->n;
}

/* Sizes, allocates and pushes the stage; reads the breaker list (which
 * the caller frees). */
static sift_status dry_finish(sift_chain *chain, float multiplier, float base, int32_t allowed,
                              int32_t last_n, const brk_list *b, sift_error *err)
{
    const sift__alloc *al = sift__chain_alloc(chain);
    int active = multiplier != 0.0f && base >= 1.0f && last_n != 0;
    dry_stage *d;
    if (!active) {
        d = (dry_stage *)sift__stage_alloc(al, &dry_ops, sizeof *d);
        if (!d)
            return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding dry");
        d->max_head = -1;
    } else {
        d = dry_alloc_enabled(al, last_n, b);
        if (!d)
            return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding dry (last_n %d)",
                              (int)last_n);
        dry_index_breakers(d, b);
    }
    d->multiplier = multiplier;
    d->dbase = base;
    d->allowed = allowed;
    d->last_n = last_n;
    d->active = active;
    if (active && base > 1.000001f) {
        double q = 88.7228391 / sift__log((double)base);
        d->max_exp = q >= 2147483647.0 ? INT32_MAX : (int32_t)q; /* floor: q > 0 */
    }
    return sift__chain_push(chain, &d->base, err);
}

static sift_status check_common(sift_chain *chain, float multiplier, float base, int32_t allowed,
                                int32_t last_n, size_t n_breakers, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if ((s = sift__param_check(&sift__desc_dry, "multiplier", multiplier, err)) ||
        (s = sift__param_check(&sift__desc_dry, "base", base, err)) ||
        (s = sift__param_check(&sift__desc_dry, "allowed_length", allowed, err)) ||
        (s = sift__window_check(&sift__desc_dry, "last_n", last_n, chain, err)))
        return s;
    if (n_breakers > DRY_MAX_BREAKERS)
        return sift__fail(err, SIFT_E_LIMIT, "dry: %zu sequence breakers; max %d", n_breakers,
                          DRY_MAX_BREAKERS);
    return SIFT_OK;
}

void sift_dry_params_init(sift_dry_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof *params);
    params->struct_size = (uint32_t)sizeof *params;
    params->multiplier = 0.0f;
    params->base = 1.75f;
    params->allowed_length = 2;
    params->last_n = 4096;
}

sift_status sift_chain_add_dry(sift_chain *chain, const sift_dry_params *in,
                               const sift_vocab *vocab, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if (!in)
        return sift__fail(err, SIFT_E_ARG, "dry: params is NULL");
    if ((s = sift__check_struct_size(err, "sift_dry_params", in->struct_size, sizeof *in)))
        return s;
    /* A caller's older, smaller layout: the fields it lacks keep their
     * defaults. */
    sift_dry_params full;
    sift_dry_params_init(&full);
    memcpy(&full, in, in->struct_size);
    const sift_dry_params *params = &full;
    size_t nb = params->n_breakers;
    if ((s = check_common(chain, params->multiplier, params->base, params->allowed_length,
                          params->last_n, nb, err)))
        return s;
    if (nb > 0 && (!params->breakers || !params->breaker_lengths))
        return sift__fail(err, SIFT_E_ARG, "dry: n_breakers = %zu but %s is NULL", nb,
                          params->breakers ? "breaker_lengths" : "breakers");
    for (size_t i = 0; i < nb; i++) {
        size_t len = params->breaker_lengths[i];
        if (len == 0)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i, "dry: breaker %zu is empty", i);
        if (len > DRY_MAX_BREAKER_BYTES)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "dry: breaker %zu is %zu bytes; max %d", i, len,
                                 DRY_MAX_BREAKER_BYTES);
        if (!params->breakers[i])
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i, "dry: breaker %zu is NULL", i);
    }
    if (nb > 0 && !vocab)
        return sift__fail(err, SIFT_E_ARG, "dry: %zu sequence breakers need a vocabulary, got NULL",
                          nb);
    brk_list b;
    memset(&b, 0, sizeof b);
    b.al = sift__chain_alloc(chain);
    int active = params->multiplier != 0.0f && params->base >= 1.0f && params->last_n != 0;
    if (active && nb > 0 &&
        (s = compile_strings(&b, b.al, vocab, params->breakers, params->breaker_lengths, nb,
                             err))) {
        brk_free(&b);
        return s;
    }
    s = dry_finish(chain, params->multiplier, params->base, params->allowed_length, params->last_n,
                   &b, err);
    brk_free(&b);
    return s;
}

sift_status sift__chain_add_dry_tokens(sift_chain *chain, float multiplier, float base,
                                       int32_t allowed_length, int32_t last_n,
                                       const int32_t *const *seqs, const size_t *lens, size_t n,
                                       sift_error *err)
{
    sift_status s = check_common(chain, multiplier, base, allowed_length, last_n, n, err);
    if (s)
        return s;
    if (n > 0 && (!seqs || !lens))
        return sift__fail(err, SIFT_E_ARG, "dry: n_breakers = %zu but %s is NULL", n,
                          seqs ? "lens" : "seqs");
    for (size_t i = 0; i < n; i++) {
        if (lens[i] == 0)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i, "dry: breaker %zu is empty", i);
        if (lens[i] > DRY_MAX_TAIL + 1)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "dry: breaker %zu is %zu tokens; max %d (a head and a tail "
                                 "of %d)",
                                 i, lens[i], DRY_MAX_TAIL + 1, DRY_MAX_TAIL);
        if (!seqs[i])
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i, "dry: breaker %zu is NULL", i);
        for (size_t j = 0; j < lens[i]; j++)
            if (seqs[i][j] < 0)
                return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                     "dry: breaker %zu has token %d; ids must be >= 0", i,
                                     (int)seqs[i][j]);
    }
    brk_list b;
    memset(&b, 0, sizeof b);
    b.al = sift__chain_alloc(chain);
    for (size_t i = 0; i < n; i++)
        brk_add(&b, 0, seqs[i][0], seqs[i] + 1, lens[i] - 1);
    if (b.nomem) {
        brk_free(&b);
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding dry");
    }
    s = dry_finish(chain, multiplier, base, allowed_length, last_n, &b, err);
    brk_free(&b);
    return s;
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct dry_rec {
    float multiplier, base;
    int32_t allowed_length, last_n;
    char **breakers;
    size_t *breaker_lengths;
    size_t n_breakers;
} dry_rec;

static const char *const dry_default_breakers[] = {"\n", ":", "\"", "*"};

static const sift__param dry_params[] = {
    {.name = "multiplier",
     .doc = "penalty scale; 0 = off, >= 0",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_GE,
     .lo = 0,
     .required = 1,
     .off = offsetof(dry_rec, multiplier),
     .flat_key = "dry_multiplier",
     .flat_def = 0},
    {.name = "base",
     .doc = "exponential base; < 1 = off",
     .type = SIFT__PT_FLOAT,
     .def = 1.75,
     .off = offsetof(dry_rec, base),
     .flat_key = "dry_base",
     .flat_def = 1.75},
    {.name = "allowed_length",
     .doc = "repeats up to this length are free",
     .type = SIFT__PT_INT,
     .range = SIFT__R_GE,
     .lo = 0,
     .def = 2,
     .off = offsetof(dry_rec, allowed_length),
     .flat_key = "dry_allowed_length",
     .flat_def = 2},
    {.name = "last_n",
     .doc = "window of accepted tokens; 0 = off, -1 = n_ctx",
     .type = SIFT__PT_WINDOW,
     .def = 4096,
     .off = offsetof(dry_rec, last_n),
     .flat_key = "dry_penalty_last_n",
     /* llama.cpp reads it only when DRY is on, and its -1 then; the flat
      * form resolves it from the other DRY keys (schema_flat.c). */
     .flat_rule = SIFT__FLAT_OWN,
     .flat_def = -1},
    {.name = "breakers",
     .doc = "sequence breakers: strings of 1 to 40 bytes, at most 64",
     .type = SIFT__PT_STRING_LIST,
     .def_strings = dry_default_breakers,
     .n_def_strings = 4,
     .item_noun = "breaker",
     .max_items = 64,
     .max_item_bytes = 40,
     .off = offsetof(dry_rec, breakers),
     .off_len = offsetof(dry_rec, breaker_lengths),
     .off_count = offsetof(dry_rec, n_breakers),
     .flat_key = "dry_sequence_breakers"},
};

static sift_status dry_build(sift_chain *c, const void *rec, const sift__build_env *env,
                             sift_error *err)
{
    const dry_rec *r = rec;
    sift_dry_params dp;
    sift_dry_params_init(&dp);
    dp.multiplier = r->multiplier;
    dp.base = r->base;
    dp.allowed_length = r->allowed_length;
    dp.last_n = r->last_n;
    /* A trial build has no vocabulary to match breakers against; their
     * bytes were validated with the parameters. */
    if (!env->trial) {
        dp.breakers = (const char *const *)r->breakers;
        dp.breaker_lengths = r->breaker_lengths;
        dp.n_breakers = r->n_breakers;
    }
    if (dp.n_breakers > 0 && !env->vocab)
        return env->fail(env, err, SIFT_E_ARG,
                         "dry has sequence breakers and no vocabulary was given");
    return sift_chain_add_dry(c, &dp, env->vocab, err);
}

static int dry_off(const dry_rec *r)
{
    return r->multiplier == 0 || r->base < 1 || r->last_n == 0;
}

static void dry_lint(const void *rec, sift__lint *l)
{
    const dry_rec *r = rec;
    if (dry_off(r))
        l->warn(l, NULL, "dry is off with these values (%s)",
                r->multiplier == 0 ? "multiplier 0"
                : r->base < 1      ? "base < 1"
                                   : "last_n 0");
}

static int dry_flat_active(void *rec)
{
    return !dry_off(rec);
}

static const char *const dry_flat_names[] = {"dry", NULL};

const sift__sampler_desc sift__desc_dry = {
    .name = "dry",
    .summary = "DRY: penalises tokens that would extend a repeat of the history",
    .params = dry_params,
    .n_params = sizeof dry_params / sizeof dry_params[0],
    .rec_size = sizeof(dry_rec),
    .main = "multiplier",
    .build = dry_build,
    .lint = dry_lint,
    .flat_names = dry_flat_names,
    .flat_char = 'd',
    .flat_order = 2,
    .flat_active = dry_flat_active,
};

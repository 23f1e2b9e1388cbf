/*
 * penalties.c - repetition, frequency and presence penalties.
 *
 * Owns the "penalties" stage: a window of the last `last_n` accepted
 * tokens and, per distinct token in it, its count c. For every candidate
 * whose id has c > 0 (docs/samplers.md, "penalties"):
 *
 *     l = (l <= 0) ? l * repeat : l / repeat;              (float)
 *     l = l - ((float)c * freq + (float)(c > 0) * presence) (float, as written)
 *
 * A -inf logit stays -inf (it is not touched, so -inf - -inf cannot make
 * a NaN). A finite logit that becomes +inf or NaN (a tiny repeat, a huge
 * negative freq) fails the sample with SIFT_E_ROW_VALUE naming the
 * smallest such token id, instead of letting a NaN reach a selector
 * (BAD_INPUTS L-14).
 *
 * Reference behaviour: llama.cpp's penalties sampler, same float
 * expressions in the same order. Deliberate differences:
 * - last_n < 0 is an error (llama clamps it to 0 = off, so `-1` silently
 *   disables penalties); last_n above max_history is SIFT_E_LIMIT because
 *   the window is allocated up front.
 * - repeat must be finite and > 0, with 1 / repeat finite; freq and
 *   presence finite, and c * freq + presence finite for every count c in
 *   1 .. last_n (these overflow whatever the row holds, so they are
 *   refused when the stage is added).
 * - clone copies the counts (llama's clone copies the ring but forgets the
 *   counts until tokens are re-accepted).
 * - -inf logits are left alone and +inf/NaN results are errors.
 *
 * State layout: the stage is one allocation. After the struct come the
 * ring (last_n tokens), an open-addressing hash token -> slot of the
 * distinct list (linear probing, backward-shift deletion, capacity a power
 * of two >= 2 * last_n so it is never more than half full), and the
 * distinct list itself (token, count) kept compact by swap-removal, so
 * apply on a dense row touches exactly the distinct tokens of the window;
 * then a filter of PEN_FILT counts, the distinct tokens per id &
 * PEN_FILT_MASK, so that apply on a slice probes the hash only for the
 * candidates whose count is not 0.
 * Arrays are addressed by offsets, not pointers, so the default flat clone
 * (memcpy of the block) is a correct deep copy. Nothing is allocated after
 * construction.
 *
 * Capability class: IDENTITY when off (last_n = 0 or 1/0/0); LOWERS(last_n)
 * when repeat >= 1, freq >= 0, presence >= 0; RAISES(last_n) otherwise
 * (the raised ids are the window's tokens).
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

/* The descriptor (end of the file): the constructor checks its arguments
 * against the parameters' ranges written there. */
extern const sift__sampler_desc sift__desc_penalties;

typedef struct pen_stage {
    sift__stage base;
    int32_t last_n;
    float repeat, freq, presence;
    int active;         /* 0: the stage is a no-op and keeps no history */
    uint32_t hbits;     /* hash capacity = 1 << hbits */
    int32_t head, len;  /* ring: oldest at ring[head], len entries */
    int32_t n_distinct; /* entries of dtok/dcnt in use */
    size_t off_ring, off_keys, off_idx, off_dtok, off_dcnt, off_filt;
} pen_stage;

/* The filter: per id & PEN_FILT_MASK, how many distinct window tokens
 * fall there (a count, as wide as the window). A slice's candidate whose
 * count is 0 is not in the window, and most are not: one load instead
 * of a hash probe. */
#define PEN_FILT 2048u
#define PEN_FILT_MASK (PEN_FILT - 1u)

static uint32_t *pen_filt(pen_stage *p)
{
    return (uint32_t *)(void *)((char *)p + p->off_filt);
}

static int32_t *pen_arr(pen_stage *p, size_t off)
{
    return (int32_t *)(void *)((char *)p + off);
}

static const int32_t *pen_carr(const pen_stage *p, size_t off)
{
    return (const int32_t *)(const void *)((const char *)p + off);
}

static uint32_t pen_home(const pen_stage *p, int32_t t)
{
    return ((uint32_t)t * 2654435761u) >> (32 - p->hbits);
}

/* Slot holding `t`, or the empty slot where it would go. The table is at
 * most half full, so the probe ends. */
static uint32_t pen_find(const pen_stage *p, int32_t t)
{
    const int32_t *keys = pen_carr(p, p->off_keys);
    uint32_t mask = (1u << p->hbits) - 1;
    uint32_t i = pen_home(p, t);
    while (keys[i] != -1 && keys[i] != t)
        i = (i + 1) & mask;
    return i;
}

/* Removes the key in slot i by shifting later members of its probe run
 * back, so lookups never need tombstones. */
static void pen_hash_delete(pen_stage *p, uint32_t i)
{
    int32_t *keys = pen_arr(p, p->off_keys);
    int32_t *idx = pen_arr(p, p->off_idx);
    uint32_t mask = (1u << p->hbits) - 1;
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (keys[j] == -1)
            break;
        uint32_t k = pen_home(p, keys[j]);
        /* The entry at j may stay if its home lies cyclically in (i, j]. */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        keys[i] = keys[j];
        idx[i] = idx[j];
        i = j;
    }
    keys[i] = -1;
}

static void pen_inc(pen_stage *p, int32_t t)
{
    int32_t *keys = pen_arr(p, p->off_keys);
    int32_t *idx = pen_arr(p, p->off_idx);
    int32_t *dtok = pen_arr(p, p->off_dtok);
    int32_t *dcnt = pen_arr(p, p->off_dcnt);
    uint32_t s = pen_find(p, t);
    if (keys[s] == -1) {
        keys[s] = t;
        idx[s] = p->n_distinct;
        dtok[p->n_distinct] = t;
        dcnt[p->n_distinct] = 1;
        p->n_distinct++;
        pen_filt(p)[(uint32_t)t & PEN_FILT_MASK]++;
    } else {
        dcnt[idx[s]]++;
    }
}

static void pen_dec(pen_stage *p, int32_t t)
{
    int32_t *keys = pen_arr(p, p->off_keys);
    int32_t *idx = pen_arr(p, p->off_idx);
    int32_t *dtok = pen_arr(p, p->off_dtok);
    int32_t *dcnt = pen_arr(p, p->off_dcnt);
    uint32_t s = pen_find(p, t);
    if (keys[s] == -1)
        return; /* cannot happen: every ring token is counted */
    int32_t d = idx[s];
    if (--dcnt[d] > 0)
        return;
    int32_t last = p->n_distinct - 1;
    if (d != last) {
        dtok[d] = dtok[last];
        dcnt[d] = dcnt[last];
        idx[pen_find(p, dtok[d])] = d;
    }
    p->n_distinct--;
    pen_hash_delete(p, s);
    pen_filt(p)[(uint32_t)t & PEN_FILT_MASK]--;
}

/* Applies the penalty to one candidate with count c > 0; records the
 * smallest id that turned +inf or NaN. */
static inline float pen_value(const pen_stage *p, float l, int32_t c)
{
    if (l <= 0.0f)
        l = l * p->repeat;
    else
        l = l / p->repeat;
    return l - ((float)c * p->freq + (float)(c > 0) * p->presence);
}

static void pen_one(const pen_stage *p, sift_candidate *cd, int32_t c, int64_t *bad, float *bad_val,
                    int *changed)
{
    float l = cd->logit;
    if (l == -INFINITY)
        return;
    *changed = 1;
    l = pen_value(p, l, c);
    cd->logit = l;
    if (!(l < INFINITY) && (*bad < 0 || cd->id < *bad)) {
        *bad = cd->id;
        *bad_val = l;
    }
}

/* Whether no penalty can raise a logit: repeat >= 1, freq >= 0 and
 * presence >= 0 (the LOWERS class). Then every penalised value is at or
 * below the one it came from, float rounding being monotone: l * repeat
 * <= l for l <= 0, l / repeat <= l for l > 0, and l - amount <= l for an
 * amount >= 0; so it is at or after its old place in canonical order. */
static int pen_never_raises(const pen_stage *p)
{
    return p->repeat >= 1.0f && p->freq >= 0.0f && p->presence >= 0.0f;
}

/* A canonical set under a penalty that never raises (pen_never_raises),
 * in one forward pass in place. A penalised candidate goes to the pending
 * list side[h..t), kept in canonical order (insertion; it usually goes
 * last). Before an untouched candidate x at position i, the output takes
 * the pending ones that rank before x: every candidate that ranks before
 * x comes from a position below i (an untouched one keeps its value, and
 * a penalised one from after i ranks after its old place, so after x),
 * so nothing from later is missing, and the output never passes the
 * input (o <= i). -inf candidates are left alone. */
static void pen_apply_falling(const pen_stage *p, sift__arr *a, sift_candidate *side, int64_t *bad,
                              float *bad_val)
{
    const int32_t *keys = pen_carr(p, p->off_keys);
    const int32_t *idx = pen_carr(p, p->off_idx);
    const int32_t *dcnt = pen_carr(p, p->off_dcnt);
    const uint32_t *filt = (const uint32_t *)(const void *)((const char *)p + p->off_filt);
    sift_candidate *c = a->c;
    size_t n = a->n, o = 0, h = 0, t = 0;
    for (size_t i = 0; i < n; i++) {
        sift_candidate x = c[i];
        if (filt[(uint32_t)x.id & PEN_FILT_MASK] && x.logit != -INFINITY) {
            uint32_t s = pen_find(p, x.id);
            if (keys[s] != -1) {
                x.logit = pen_value(p, x.logit, dcnt[idx[s]]);
                if (!(x.logit < INFINITY) && (*bad < 0 || x.id < *bad)) {
                    *bad = x.id; /* only from a +inf that came in */
                    *bad_val = x.logit;
                }
                size_t j = t++;
                while (j > h && sift__canon_before(&x, &side[j - 1])) {
                    side[j] = side[j - 1];
                    j--;
                }
                side[j] = x;
                continue;
            }
        }
        while (h < t && sift__canon_before(&side[h], &x))
            c[o++] = side[h++];
        c[o++] = x;
    }
    while (h < t)
        c[o++] = side[h++];
}

static sift_status pen_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    pen_stage *p = (pen_stage *)st;
    if (!p->active || p->n_distinct == 0)
        return SIFT_OK;
    int64_t bad = -1;
    float bad_val = 0.0f;
    int changed = 0;
    const int32_t *dcnt = pen_carr(p, p->off_dcnt);
    if (a->dense) {
        /* c[t] is token t: touch only the window's distinct tokens. */
        const int32_t *dtok = pen_carr(p, p->off_dtok);
        for (int32_t d = 0; d < p->n_distinct; d++)
            if (dtok[d] < a->V)
                pen_one(p, &a->c[dtok[d]], dcnt[d], &bad, &bad_val, &changed);
    } else if (a->order == SIFT__ORDER_CANON && a->c != ctx->ws->cand2 && a->n <= ctx->ws->cap &&
               pen_never_raises(p)) {
        /* A canonical set (a slice) stays canonical in one pass. */
        pen_apply_falling(p, a, ctx->ws->cand2, &bad, &bad_val);
        if (bad >= 0)
            a->order = SIFT__ORDER_NONE; /* as below */
    } else if (a->order == SIFT__ORDER_CANON && a->c != ctx->ws->cand2 && a->n <= ctx->ws->cap) {
        /* A canonical set (a slice): the untouched candidates stay in
         * order, so set the penalised ones aside and merge them back
         * instead of sorting the whole set again at the next stage that
         * needs the order. */
        const int32_t *keys = pen_carr(p, p->off_keys);
        const int32_t *idx = pen_carr(p, p->off_idx);
        const uint32_t *filt = (const uint32_t *)(const void *)((const char *)p + p->off_filt);
        sift_candidate *side = ctx->ws->cand2;
        size_t u = 0, t = 0;
        for (size_t i = 0; i < a->n; i++) {
            sift_candidate x = a->c[i];
            if (!filt[(uint32_t)x.id & PEN_FILT_MASK]) {
                a->c[u++] = x;
                continue;
            }
            uint32_t s = pen_find(p, x.id);
            if (keys[s] != -1 && x.logit != -INFINITY) {
                pen_one(p, &x, dcnt[idx[s]], &bad, &bad_val, &changed);
                side[t++] = x;
            } else {
                a->c[u++] = x;
            }
        }
        if (bad >= 0) { /* the error below; leave a consistent set */
            memcpy(a->c + u, side, t * sizeof *side);
            a->order = SIFT__ORDER_NONE;
        } else {
            sift__canon_merge(a->c, u, side, t);
            changed = 0; /* still canonical */
        }
    } else {
        const int32_t *keys = pen_carr(p, p->off_keys);
        const int32_t *idx = pen_carr(p, p->off_idx);
        for (size_t i = 0; i < a->n; i++) {
            uint32_t s = pen_find(p, a->c[i].id);
            if (keys[s] != -1)
                pen_one(p, &a->c[i], dcnt[idx[s]], &bad, &bad_val, &changed);
        }
    }
    if (bad >= 0)
        return sift__fail_at(ctx->err, SIFT_E_ROW_VALUE, bad,
                             "stage %zu (penalties) produced %s at token %d", ctx->stage,
                             bad_val != bad_val ? "NaN" : "+inf", (int)bad);
    if (changed)
        sift__arr_touched(a);
    return SIFT_OK;
}

static void pen_accept(sift__stage *st, int32_t t)
{
    pen_stage *p = (pen_stage *)st;
    if (!p->active)
        return;
    int32_t *ring = pen_arr(p, p->off_ring);
    /* Count the new token first, then evict (llama's order); a token that
     * replaces itself never leaves the table. */
    pen_inc(p, t);
    if (p->len == p->last_n) {
        int32_t old = ring[p->head];
        ring[p->head] = t;
        p->head = (p->head + 1) % p->last_n;
        pen_dec(p, old);
    } else {
        ring[(p->head + p->len) % p->last_n] = t;
        p->len++;
    }
}

static void pen_reset(sift__stage *st)
{
    pen_stage *p = (pen_stage *)st;
    if (!p->active)
        return;
    p->head = p->len = p->n_distinct = 0;
    memset(pen_arr(p, p->off_keys), 0xff, ((size_t)1 << p->hbits) * sizeof(int32_t));
    memset(pen_filt(p), 0, PEN_FILT * sizeof(uint32_t));
}

/* The window in order (oldest first) and each entry's count; the hash
 * layout depends on past deletions, so it is deliberately not hashed. */
static uint64_t pen_digest(const sift__stage *st, uint64_t h)
{
    const pen_stage *p = (const pen_stage *)st;
    if (!p->active)
        return h;
    const int32_t *ring = pen_carr(p, p->off_ring);
    const int32_t *keys = pen_carr(p, p->off_keys);
    const int32_t *idx = pen_carr(p, p->off_idx);
    const int32_t *dcnt = pen_carr(p, p->off_dcnt);
    h = sift__fnv(h, &p->len, sizeof p->len);
    for (int32_t i = 0; i < p->len; i++) {
        int32_t t = ring[(p->head + i) % p->last_n];
        uint32_t s = pen_find(p, t);
        int32_t c = keys[s] == t ? dcnt[idx[s]] : 0;
        h = sift__fnv(h, &t, sizeof t);
        h = sift__fnv(h, &c, sizeof c);
    }
    return h;
}

static sift_class pen_cls(const sift__stage *st, int64_t *n)
{
    const pen_stage *p = (const pen_stage *)st;
    if (!p->active) {
        *n = 0;
        return SIFT_CLASS_IDENTITY;
    }
    *n = p->last_n;
    if (p->repeat >= 1.0f && p->freq >= 0.0f && p->presence >= 0.0f)
        return SIFT_CLASS_LOWERS;
    return SIFT_CLASS_RAISES;
}

/* Static: the window; dynamic: the distinct tokens in it now (only they
 * are penalised). */
static int64_t pen_lowers(const sift__stage *st, int dynamic)
{
    const pen_stage *p = (const pen_stage *)st;
    if (!p->active)
        return 0;
    return dynamic ? p->n_distinct : p->last_n;
}

/* A raising penalty can move any token of the window, and only those. */
static size_t pen_extras(const sift__stage *st, int32_t *ids, size_t cap)
{
    const pen_stage *p = (const pen_stage *)st;
    if (!p->active)
        return 0;
    const int32_t *dtok = pen_carr(p, p->off_dtok);
    for (int32_t i = 0; i < p->n_distinct && (size_t)i < cap; i++)
        ids[i] = dtok[i];
    return (size_t)p->n_distinct;
}

static int64_t pen_max_extras(const sift__stage *st)
{
    const pen_stage *p = (const pen_stage *)st;
    return p->active ? p->last_n : 0;
}

static const sift__stage_ops pen_ops = {
    .name = "penalties",
    .apply = pen_apply,
    .cls = pen_cls,
    .lowers = pen_lowers,
    .extras = pen_extras,
    .max_extras = pen_max_extras,
    .accept = pen_accept,
    .reset = pen_reset,
    .digest = pen_digest,
};

static size_t pen_align(size_t x)
{
    return (x + 15) & ~(size_t)15;
}

sift_status sift_chain_add_penalties(sift_chain *chain, int32_t last_n, float repeat, float freq,
                                     float presence, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    const sift__sampler_desc *d = &sift__desc_penalties;
    /* The argument is freq, the parameter frequency: the message keeps
     * the argument's name; the range is the parameter's. */
    if ((s = sift__window_check(d, "last_n", last_n, chain, err)) ||
        (s = sift__param_check(d, "repeat", repeat, err)) ||
        (s = sift__param_check_arg(sift__param_find(d, "frequency"), d->name, "freq", freq, err)) ||
        (s = sift__param_check(d, "presence", presence, err)))
        return s;
    int active = last_n > 0 && !(repeat == 1.0f && freq == 0.0f && presence == 0.0f);
    if (active) {
        /* What overflows whatever the row holds is refused here: a repeat
         * whose reciprocal is +inf turns every positive logit into +inf,
         * and an amount c * freq + presence beyond the float range (for
         * some count c in 1..last_n; the float operations are monotone in
         * c, so the two ends decide) makes every penalised logit +inf or
         * NaN. What depends on the row (a logit of 10 divided by 1e-38)
         * still fails the step with SIFT_E_ROW_VALUE. */
        if (!(1.0f / repeat < INFINITY))
            return sift__fail(err, SIFT_E_ARG,
                              "penalties: repeat %g overflows every positive logit (1 / repeat "
                              "is beyond the float range)",
                              (double)repeat);
        float lo = 1.0f * freq + presence, hi = (float)last_n * freq + presence;
        if (!(lo > -INFINITY && lo < INFINITY) || !(hi > -INFINITY && hi < INFINITY))
            return sift__fail(err, SIFT_E_ARG,
                              "penalties: freq %g and presence %g overflow: count * freq + "
                              "presence must stay finite for counts 1 .. last_n (%d)",
                              (double)freq, (double)presence, (int)last_n);
    }
    const sift__alloc *al = sift__chain_alloc(chain);
    pen_stage *p;
    if (!active) {
        p = (pen_stage *)sift__stage_alloc(al, &pen_ops, sizeof *p);
    } else {
        uint32_t bits = 2;
        while (((size_t)1 << bits) < 2 * (size_t)last_n)
            bits++;
        size_t cap = (size_t)1 << bits;
        size_t n1 = (size_t)last_n + 1; /* inc runs before the eviction's dec */
        size_t off = pen_align(sizeof *p);
        size_t off_ring = off;
        off = pen_align(off + (size_t)last_n * sizeof(int32_t));
        size_t off_keys = off;
        off = pen_align(off + cap * sizeof(int32_t));
        size_t off_idx = off;
        off = pen_align(off + cap * sizeof(int32_t));
        size_t off_dtok = off;
        off = pen_align(off + n1 * sizeof(int32_t));
        size_t off_dcnt = off;
        off = pen_align(off + n1 * sizeof(int32_t));
        size_t off_filt = off;
        off = pen_align(off + PEN_FILT * sizeof(uint32_t));
        p = (pen_stage *)sift__stage_alloc(al, &pen_ops, off);
        if (p) {
            p->hbits = bits;
            p->off_ring = off_ring;
            p->off_keys = off_keys;
            p->off_idx = off_idx;
            p->off_dtok = off_dtok;
            p->off_dcnt = off_dcnt;
            p->off_filt = off_filt;
            memset(pen_arr(p, off_keys), 0xff, cap * sizeof(int32_t));
            memset(pen_filt(p), 0, PEN_FILT * sizeof(uint32_t));
        }
    }
    if (!p)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding penalties (last_n %d)",
                          (int)last_n);
    p->last_n = last_n;
    p->repeat = repeat;
    p->freq = freq;
    p->presence = presence;
    p->active = active;
    return sift__chain_push(chain, &p->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct pen_rec {
    int32_t last_n;
    float repeat, frequency, presence;
} pen_rec;

static const sift__param pen_params[] = {
    {.name = "last_n",
     .doc = "window of accepted tokens; 0 = off, -1 = n_ctx",
     .type = SIFT__PT_WINDOW,
     .def = 64,
     .off = offsetof(pen_rec, last_n),
     .flat_key = "repeat_last_n",
     .flat_def = 64},
    {.name = "repeat",
     .doc = "repetition penalty; 1 = off, > 0",
     .type = SIFT__PT_FLOAT,
     .range = SIFT__R_GT,
     .lo = 0,
     .required = 1,
     .def = 1,
     .off = offsetof(pen_rec, repeat),
     .flat_key = "repeat_penalty",
     .flat_def = 1},
    {.name = "frequency",
     .doc = "subtracted once per occurrence in the window",
     .type = SIFT__PT_FLOAT,
     .off = offsetof(pen_rec, frequency),
     .flat_key = "frequency_penalty",
     .flat_def = 0},
    {.name = "presence",
     .doc = "subtracted once if the token occurs in the window",
     .type = SIFT__PT_FLOAT,
     .off = offsetof(pen_rec, presence),
     .flat_key = "presence_penalty",
     .flat_def = 0},
};

static sift_status pen_build(sift_chain *c, const void *rec, const sift__build_env *env,
                             sift_error *err)
{
    const pen_rec *r = rec;
    (void)env;
    return sift_chain_add_penalties(c, r->last_n, r->repeat, r->frequency, r->presence, err);
}

static int pen_off(const pen_rec *r)
{
    return r->last_n == 0 || (r->repeat == 1.0f && r->frequency == 0 && r->presence == 0);
}

static void pen_lint(const void *rec, sift__lint *l)
{
    const pen_rec *r = rec;
    if (pen_off(r))
        l->warn(l, NULL, "penalties does nothing with these values (%s)",
                r->last_n == 0 ? "last_n 0" : "repeat 1, frequency 0, presence 0");
}

static int pen_flat_active(void *rec)
{
    return !pen_off(rec);
}

static const char *const pen_flat_names[] = {"penalties", NULL};

const sift__sampler_desc sift__desc_penalties = {
    .name = "penalties",
    .summary = "repetition, frequency and presence penalties over a window",
    .params = pen_params,
    .n_params = sizeof pen_params / sizeof pen_params[0],
    .rec_size = sizeof(pen_rec),
    .main = "repeat",
    .build = pen_build,
    .lint = pen_lint,
    .flat_names = pen_flat_names,
    .flat_char = 'e',
    .flat_order = 1,
    .flat_active = pen_flat_active,
};

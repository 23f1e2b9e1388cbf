/*
 * logit_bias.c - fixed per-token logit biases.
 *
 * Owns the "logit_bias" stage. For every entry (token, bias), in the order
 * the caller gave them, a candidate with that id gets l = l + bias (float).
 * Entries for the same token therefore add up one after the other,
 * ((l + b1) + b2) + ..., exactly as llama.cpp applies them. A bias of -inf
 * bans the token. Entries of one token whose sum (in order, from 0)
 * reaches +inf (3e38 + 3e38) are refused when the stage is added; a
 * result of +inf or NaN that depends on the row (a logit of 1e38 plus a
 * bias of 3e38) fails the sample with SIFT_E_ROW_VALUE naming the
 * smallest such token id (BAD_INPUTS L-14). Tokens absent from the candidate set
 * are ignored; ids >= the row length are rejected before the row is read,
 * through the max_token hook.
 *
 * Reference behaviour: llama.cpp's logit_bias sampler (same float adds,
 * same per-token entry order). Deliberate differences: bias NaN or +inf
 * and negative token ids are rejected when the stage is added; a token
 * outside the row is an error at sample time instead of being skipped;
 * +inf/NaN results are errors.
 *
 * The entries are stored sorted by token with a stable sort, so the
 * per-token entry order is kept and a lookup is a binary search; on a
 * dense row the entries are applied straight to c[token]. The entries
 * live after the struct in one block (addressed by offset), so the
 * default flat clone copies the stage. The stage has no mutable state.
 *
 * Capability class: IDENTITY for n = 0; LOWERS(number of distinct tokens)
 * when every bias is <= 0; RAISES(number of distinct tokens) when any bias
 * is > 0 (lb_raised_ids lists the tokens that may go up).
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

typedef struct lb_stage {
    sift__stage base;
    size_t n;          /* entries */
    size_t n_distinct; /* distinct tokens */
    size_t off_ent;    /* sift_candidate[n]: id = token, logit = bias */
    size_t off_raise;  /* int32_t[n_raise]: the ids lb_raised_ids lists */
    size_t n_raise;    /* distinct tokens with a positive entry */
    size_t n_lower;    /* distinct tokens with a negative entry */
} lb_stage;

static const sift_candidate *lb_ent(const lb_stage *b)
{
    return (const sift_candidate *)(const void *)((const char *)b + b->off_ent);
}

/* Writes (up to cap of) the distinct tokens that have at least one
 * positive bias, ascending, and returns how many there are: the extras
 * the analyzer gathers beside the prefix (stored once at construction). */
static size_t lb_raised_ids(const lb_stage *b, int32_t *out, size_t cap)
{
    const sift_candidate *e = lb_ent(b);
    size_t cnt = 0;
    for (size_t i = 0; i < b->n;) {
        size_t j = i;
        int raises = 0;
        for (; j < b->n && e[j].id == e[i].id; j++)
            raises |= e[j].logit > 0.0f;
        if (raises) {
            if (out && cnt < cap)
                out[cnt] = e[i].id;
            cnt++;
        }
        i = j;
    }
    return cnt;
}

/* First entry with token >= id. */
static size_t lb_lower_bound(const sift_candidate *e, size_t n, int32_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Applies the run of entries starting at e[i] (all for cd->id); returns
 * the index after the run. */
static size_t lb_run(const sift_candidate *e, size_t n, size_t i, sift_candidate *cd, int64_t *bad,
                     float *bad_val, int *changed)
{
    float l = cd->logit;
    int32_t t = e[i].id;
    for (; i < n && e[i].id == t; i++)
        l = l + e[i].logit;
    *changed |= memcmp(&l, &cd->logit, sizeof l) != 0;
    cd->logit = l;
    if (!(l < INFINITY) && (*bad < 0 || t < *bad)) {
        *bad = t;
        *bad_val = l;
    }
    return i;
}

static sift_status lb_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    const lb_stage *b = (const lb_stage *)st;
    const sift_candidate *e = lb_ent(b);
    int64_t bad = -1;
    float bad_val = 0.0f;
    int changed = 0;
    if (b->n == 0)
        return SIFT_OK;
    if (a->dense) {
        for (size_t i = 0; i < b->n;) {
            if (e[i].id >= a->V)
                break; /* sorted: the rest are outside too (max_token forbids it anyway) */
            i = lb_run(e, b->n, i, &a->c[e[i].id], &bad, &bad_val, &changed);
        }
    } else {
        for (size_t k = 0; k < a->n; k++) {
            size_t i = lb_lower_bound(e, b->n, a->c[k].id);
            if (i < b->n && e[i].id == a->c[k].id)
                lb_run(e, b->n, i, &a->c[k], &bad, &bad_val, &changed);
        }
    }
    if (bad >= 0)
        return sift__fail_at(ctx->err, SIFT_E_ROW_VALUE, bad,
                             "stage %zu (logit_bias) produced %s at token %d", ctx->stage,
                             bad_val != bad_val ? "NaN" : "+inf", (int)bad);
    if (changed)
        sift__arr_touched(a);
    return SIFT_OK;
}

static sift_class lb_cls(const sift__stage *st, int64_t *n)
{
    const lb_stage *b = (const lb_stage *)st;
    if (b->n == 0) {
        *n = 0;
        return SIFT_CLASS_IDENTITY;
    }
    *n = (int64_t)b->n_distinct;
    return b->n_raise ? SIFT_CLASS_RAISES : SIFT_CLASS_LOWERS;
}

static int32_t lb_max_token(const sift__stage *st)
{
    const lb_stage *b = (const lb_stage *)st;
    return b->n ? lb_ent(b)[b->n - 1].id : -1;
}

/* The distinct tokens with a negative (or -inf) entry: the only ones that
 * can go down. The same with or without state. */
static size_t lb_lowered_count(const lb_stage *b)
{
    const sift_candidate *e = lb_ent(b);
    size_t cnt = 0;
    for (size_t i = 0; i < b->n;) {
        size_t j = i;
        int lowers = 0;
        for (; j < b->n && e[j].id == e[i].id; j++)
            lowers |= e[j].logit < 0.0f;
        cnt += lowers;
        i = j;
    }
    return cnt;
}

static int64_t lb_lowers(const sift__stage *st, int dynamic)
{
    (void)dynamic;
    return (int64_t)((const lb_stage *)st)->n_lower;
}

static size_t lb_extras(const sift__stage *st, int32_t *ids, size_t cap)
{
    const lb_stage *b = (const lb_stage *)st;
    const int32_t *r = (const int32_t *)(const void *)((const char *)b + b->off_raise);
    size_t n = b->n_raise < cap ? b->n_raise : cap;
    if (ids && n)
        memcpy(ids, r, n * sizeof *ids);
    return b->n_raise;
}

static int64_t lb_max_extras(const sift__stage *st)
{
    return (int64_t)((const lb_stage *)st)->n_raise;
}

static const sift__stage_ops lb_ops = {
    .name = "logit_bias",
    .apply = lb_apply,
    .cls = lb_cls,
    .max_token = lb_max_token,
    .lowers = lb_lowers,
    .extras = lb_extras,
    .max_extras = lb_max_extras,
};

sift_status sift_chain_add_logit_bias(sift_chain *chain, const sift_bias *biases, size_t n,
                                      sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if (!biases && n > 0)
        return sift__fail(err, SIFT_E_ARG, "logit_bias: biases is NULL but n = %zu", n);
    if (n > (size_t)SIFT_DEFAULT_MAX_VOCAB)
        return sift__fail(err, SIFT_E_LIMIT, "logit_bias: %zu entries exceed the limit of %d", n,
                          (int)SIFT_DEFAULT_MAX_VOCAB);
    for (size_t i = 0; i < n; i++) {
        if (biases[i].token < 0)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "logit_bias: entry %zu has token %d; token ids must be >= 0", i,
                                 (int)biases[i].token);
        float v = biases[i].bias;
        if (v != v || v == INFINITY)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "logit_bias: entry %zu (token %d) has bias %g; it must be "
                                 "finite or -inf",
                                 i, (int)biases[i].token, (double)v);
    }
    const sift__alloc *al = sift__chain_alloc(chain);
    size_t off = (sizeof(lb_stage) + 15) & ~(size_t)15;
    size_t off_raise = off + n * sizeof(sift_candidate);
    lb_stage *b = (lb_stage *)sift__stage_alloc(al, &lb_ops, off_raise + n * sizeof(int32_t));
    sift_candidate *tmp = n > 48 ? sift__calloc(al, n, sizeof *tmp) : NULL;
    if (!b || (n > 48 && !tmp)) {
        sift__free(al, b);
        sift__free(al, tmp);
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding logit_bias (%zu entries)",
                          n);
    }
    b->n = n;
    b->off_ent = off;
    sift_candidate *e = (sift_candidate *)(void *)((char *)b + off);
    for (size_t i = 0; i < n; i++) {
        e[i].id = biases[i].token;
        e[i].logit = biases[i].bias;
    }
    /* Stable: entries of one token keep the caller's order, which decides
     * the float rounding of their sum. */
    sift__sort_id(e, n, tmp);
    sift__free(al, tmp);
    /* The entries of one token, added in order from 0, must stay below
     * +inf: two biases of 3e38 on one token overflow on every row whose
     * logit for it is not itself near -FLT_MAX, so they are refused here
     * rather than failing every sample (SIFT_E_ROW_VALUE). */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        float sum = 0.0f;
        for (; j < n && e[j].id == e[i].id; j++) {
            sum = sum + e[j].logit;
            if (sum == INFINITY)
                break;
        }
        if (j < n && e[j].id == e[i].id) {
            /* the caller's index of the entry that reached +inf */
            size_t k = j - i, at = 0;
            for (size_t q = 0; q < n; q++)
                if (biases[q].token == e[i].id && k-- == 0) {
                    at = q;
                    break;
                }
            int32_t tok = e[i].id;
            sift__free(al, b);
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)at,
                                 "logit_bias: the entries for token %d add up to +inf at entry "
                                 "%zu; the sum of one token's biases must stay below the float "
                                 "range",
                                 (int)tok, at);
        }
        i = j;
    }
    for (size_t i = 0; i < n; i++)
        b->n_distinct += i == 0 || e[i].id != e[i - 1].id;
    b->off_raise = off_raise;
    b->n_raise = lb_raised_ids(b, (int32_t *)(void *)((char *)b + off_raise), n);
    b->n_lower = lb_lowered_count(b);
    return sift__chain_push(chain, &b->base, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct lb_rec {
    sift_bias *biases;
    size_t n_biases;
} lb_rec;

static const sift__param lb_params[] = {
    {.name = "biases",
     .doc = "token id -> bias added to its logit (false or -.inf bans it)",
     .type = SIFT__PT_ID_FLOAT_MAP,
     .off = offsetof(lb_rec, biases),
     .off_count = offsetof(lb_rec, n_biases),
     .flat_key = "logit_bias"},
};

static sift_status lb_build(sift_chain *c, const void *rec, const sift__build_env *env,
                            sift_error *err)
{
    const lb_rec *r = rec;
    (void)env;
    return sift_chain_add_logit_bias(c, r->biases, r->n_biases, err);
}

const sift__sampler_desc sift__desc_logit_bias = {
    .name = "logit_bias",
    .summary = "adds a bias to the logits of given token ids",
    .params = lb_params,
    .n_params = sizeof lb_params / sizeof lb_params[0],
    .rec_size = sizeof(lb_rec),
    .value_is_param = 1,
    .build = lb_build,
};

/*
 * plan.c - the analyzer: how many of a row's top tokens a chain needs.
 *
 * Owns sift_chain_plan, sift_chain_next_k, sift_chains_next_k,
 * sift_chains_next_k_batch, sift_chain_extras and the walk they share (rules and proofs:
 * docs/analyzer.md).
 *
 * The walk reads each stage's capability class in chain order until the
 * first stage that decides the step's candidate set from the top of the
 * row (a TOP truncation, or a THRESHOLD that is certified per step), and
 * adds up what the stages before it can do to that top: tokens lowered
 * (they may leave the top, so more must be copied), tokens raised (they
 * must be copied as extras), a monotone map (ties may merge: a margin,
 * and the step is certified rather than exact). A stage that reads the
 * whole distribution before that point means the whole row. What each
 * class contributes is its plan rule in class.c, the table the run-time
 * certificate (certify.c) reads too.
 *
 * Invariants: reads the chain only (safe on a chain shared by threads);
 * the dynamic plan's k is never above the static plan's, because every
 * stage's dynamic count is at most its static one.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "../sift_internal.h"

/* The caller's sift_plan_stage array: elements of `stride` bytes. */
typedef struct sift__plan_stages {
    char *base;
    size_t stride;
} sift__plan_stages;

#define K_MAX SIFT__PLAN_K_MAX
#define put sift__why_put

const char *sift_guarantee_str(sift_guarantee g)
{
    switch (g) {
    case SIFT_GUARANTEE_EXACT: return "exact";
    case SIFT_GUARANTEE_CERTIFIED: return "certified";
    case SIFT_GUARANTEE_WHOLE_ROW: return "whole_row";
    }
    return "unknown";
}

/* A count as a plan's int32 field (the per-stage k), saturating. */
static int32_t sat_i32(int64_t v)
{
    return v > INT32_MAX ? INT32_MAX : v < 0 ? 0 : (int32_t)v;
}

static sift_class stage_cls(const sift__stage *st, int64_t *n)
{
    *n = 0;
    return st->ops->cls ? st->ops->cls(st, n) : SIFT_CLASS_WHOLE;
}

/* Writes stage i's trace entry into the caller's array, whose elements
 * are `stride` bytes (the caller's sizeof(sift_plan_stage), <= ours):
 * only that many bytes, its struct_size unchanged. */
static void put_stage(sift__plan_stages *out, size_t i, sift_class cls, int64_t n, int32_t k,
                      const char *why)
{
    sift_plan_stage t;
    memset(&t, 0, sizeof t);
    t.struct_size = (uint32_t)out->stride;
    t.cls = cls;
    t.n = n;
    t.k = k;
    sift__strlcpy_utf8(t.why, why, sizeof t.why);
    memcpy(out->base + i * out->stride, &t, out->stride);
}

/* The walk; words = 0 skips every message (the sampling paths call it
 * per step). `stages` may be NULL; `whole_at` (may be NULL) receives the
 * stage at which the walk needs the whole row, -1 if none. */
static void walk(const sift_chain *c, int dynamic, int words, sift_plan *plan,
                 sift__plan_stages *stages, int32_t *whole_at)
{
    int64_t lowered = 0, extras = 0;
    int monotone = 0, unbounded = 0, done = 0;
    const char *mono_name = NULL;
    int certified = 0;
    char terms_buf[SIFT_PLAN_WHY_MAX];
    terms_buf[0] = 0;
    char *terms = words ? terms_buf : NULL;
    char *pwhy = words ? plan->why : NULL;
    plan->why[0] = 0;
    plan->k = plan->recommended_k = plan->max_extras = 0;
    plan->decided_at = -1;
    plan->guarantee = SIFT_GUARANTEE_WHOLE_ROW;
    put(pwhy, "no stage truncates before the selector: whole row");
    if (whole_at)
        *whole_at = -1;
    for (size_t i = 0; i < c->n_stages; i++) {
        const sift__stage *st = c->stages[i];
        const char *name = sift__stage_name(st);
        int64_t n = 0;
        sift_class cls = stage_cls(st, &n);
        char why_buf[SIFT_PLAN_WHY_MAX];
        why_buf[0] = 0;
        char *why = words || stages ? why_buf : NULL;
        int64_t k_here = 0;
        if (done) {
            put(why, "runs on the complete candidate set");
        } else {
            /* The class's plan rule (core/class.c), the same table the
             * certificate reads. */
            sift__plan_acc acc = {.st = st,
                                  .name = name,
                                  .n = n,
                                  .dynamic = dynamic,
                                  .i = i,
                                  .lowered = lowered,
                                  .extras = extras,
                                  .monotone = monotone,
                                  .unbounded = unbounded,
                                  .mono_name = mono_name,
                                  .certified = certified,
                                  .why = why,
                                  .terms = terms,
                                  .pwhy = pwhy,
                                  .plan = plan};
            sift__class_rule_of(cls)->plan(&acc);
            lowered = acc.lowered;
            extras = acc.extras;
            monotone = acc.monotone;
            unbounded = acc.unbounded;
            mono_name = acc.mono_name;
            certified = acc.certified;
            done = acc.done;
            k_here = acc.k_here;
            if (done == 2) {
                put(pwhy, "stage %zu (%s) %s", i, name,
                    cls == SIFT_CLASS_WHOLE || cls == SIFT_CLASS_LOWERS
                        ? "reads the whole distribution before any "
                          "truncation: whole row"
                        : "cannot be bounded: whole row");
                plan->k = 0;
                plan->recommended_k = 0;
                plan->decided_at = -1;
                plan->guarantee = SIFT_GUARANTEE_WHOLE_ROW;
                if (whole_at)
                    *whole_at = (int32_t)i;
            }
        }
        if (stages)
            put_stage(stages, i, cls, n, done == 2 ? 0 : sat_i32(k_here), why_buf);
        if (done == 2) {
            /* Later stages are not reached by the analysis. */
            for (size_t j = i + 1; stages && j < c->n_stages; j++) {
                int64_t nj = 0;
                sift_class cj = stage_cls(c->stages[j], &nj);
                put_stage(stages, j, cj, nj, 0, "after a whole-row stage");
            }
            break;
        }
    }
    plan->max_extras = plan->k > 0 ? (int32_t)(extras < K_MAX ? extras : K_MAX) : 0;
    /* A chain that knows its row length never asks for more than the row. */
    if (c->n_vocab > 0 && plan->k > c->n_vocab)
        plan->k = plan->recommended_k = c->n_vocab;
    /* A device set of k' decides a TOP(K) boundary only when its K-th
     * largest logit is strictly above its smallest (its bound on absent
     * tokens has no id tie-break): a fixed margin past k, measured in
     * docs/analyzer.md. */
    int64_t dk = plan->k > 0 ? (int64_t)plan->k + SIFT_PLAN_DEVICE_MARGIN : 0;
    if (dk > K_MAX)
        dk = K_MAX;
    if (c->n_vocab > 0 && dk > c->n_vocab)
        dk = c->n_vocab;
    plan->device_k = (int32_t)dk;
}

int32_t sift__plan_whole_at(const sift_chain *c)
{
    sift_plan p;
    int32_t at = -1;
    walk(c, 0, 0, &p, NULL, &at);
    return at;
}

void sift__plan_walk(const sift_chain *c, int dynamic, sift_plan *plan, sift_plan_stage *stages)
{
    sift__plan_stages out = {(char *)stages, sizeof *stages};
    walk(c, dynamic, 1, plan, stages ? &out : NULL, NULL);
}

/* Checks the caller's struct sizes (include/sift.h, "ABI") before
 * anything is written; stages may be NULL. */
static sift_status check_plan_sizes(const sift_chain *c, const sift_plan *plan,
                                    const sift_plan_stage *stages, sift__plan_stages *out,
                                    sift_error *err)
{
    sift_status s = sift__check_struct_size(err, "sift_plan", plan->struct_size, sizeof *plan);
    if (s || !stages || c->n_stages == 0)
        return s;
    uint32_t stride = stages[0].struct_size;
    if ((s = sift__check_struct_size(err, "sift_plan_stage", stride, sizeof *stages)))
        return s;
    out->base = (char *)(uintptr_t)stages;
    out->stride = stride;
    for (size_t i = 1; i < c->n_stages; i++) {
        uint32_t si;
        memcpy(&si, out->base + i * stride, sizeof si);
        if (si != stride)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "stages[%zu].struct_size is %u, stages[0].struct_size %u: set "
                                 "every element's to sizeof(sift_plan_stage)",
                                 i, (unsigned)si, (unsigned)stride);
    }
    return SIFT_OK;
}

/* Copies a full plan into the first plan->struct_size bytes of the
 * caller's. */
static void put_plan(sift_plan *plan, sift_plan *full)
{
    full->struct_size = plan->struct_size;
    memcpy(plan, full, plan->struct_size);
}

void sift__plan_cache(sift_chain *c)
{
    sift_plan p;
    walk(c, 0, 0, &p, NULL, NULL);
    c->plan_k = p.k;
    c->plan_decided_at = p.decided_at;
    c->plan_max_extras = p.max_extras;
    c->plan_stages = c->n_stages;
}

/* The static plan's numbers, cached by sift__chain_push (stages never
 * change after they are added), so that the const entry points only
 * read the chain. */
static void cached(const sift_chain *c, int32_t *k, int32_t *decided_at, int32_t *max_extras)
{
    if (c->plan_stages != c->n_stages) {
        sift_plan p;
        walk(c, 0, 0, &p, NULL, NULL);
        *k = p.k;
        *decided_at = p.decided_at;
        *max_extras = p.max_extras;
        return;
    }
    *k = c->plan_k;
    *decided_at = c->plan_decided_at;
    *max_extras = c->plan_max_extras;
}

size_t sift__plan_prefix_k(const sift_chain *c)
{
    int32_t k, d, e;
    cached(c, &k, &d, &e);
    return (size_t)k;
}

/* The row step's k from a plan's k and decided_at (sift__plan_row_k). */
static size_t row_k(const sift_chain *c, int32_t k, int32_t d)
{
    if (k > 0 && d >= 0 && (size_t)d < c->n_stages && c->stages[d]->ops->certify_mass)
        return 0;
    return (size_t)k;
}

size_t sift__plan_row_k(const sift_chain *c)
{
    int32_t k, d, e;
    cached(c, &k, &d, &e);
    return row_k(c, k, d);
}

size_t sift__plan_row_tail_k(const sift_chain *c)
{
    int32_t k, d, e;
    cached(c, &k, &d, &e);
    if (row_k(c, k, d) != 0 || k <= 0 || d < 0)
        return 0;
    /* k = SIFT__PLAN_MASS_K + lowered + margin + slack (class.c) */
    if (k < SIFT__PLAN_MASS_K)
        return (size_t)k;
    return (size_t)k - SIFT__PLAN_MASS_K + SIFT__ROW_TAIL_K;
}

size_t sift__plan_row_k_dynamic(const sift_chain *c)
{
    sift_plan p;
    walk(c, 1, 0, &p, NULL, NULL);
    return row_k(c, p.k, p.decided_at);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The stages that may raise tokens before the first truncation. */
static size_t raising_end(const sift_chain *c)
{
    int32_t k, d, e;
    cached(c, &k, &d, &e);
    return d < 0 ? 0 : (size_t)d;
}

size_t sift__chain_extras(const sift_chain *c, int32_t *ids, size_t cap)
{
    size_t end = raising_end(c), total = 0;
    for (size_t i = 0; i < end; i++) {
        /* (a grammar's allowed set updates its matcher caches: the stage
         * is not const, though the chain is) */
        sift__stage *st = c->stages[i];
        int64_t n;
        sift_class cls = stage_cls(st, &n);
        size_t room = total < cap ? cap - total : 0;
        int32_t *at = ids ? ids + (total < cap ? total : cap) : NULL;
        total += sift__class_rule_of(cls)->extras(st, at, room);
    }
    if (total > cap || !ids || total < 2)
        return total;
    qsort(ids, total, sizeof *ids, cmp_i32);
    size_t j = 1;
    for (size_t i = 1; i < total; i++)
        if (ids[i] != ids[j - 1])
            ids[j++] = ids[i];
    return j;
}

sift_status sift__chain_prepare_extras(const sift_chain *c, sift_error *err)
{
    size_t end = raising_end(c);
    for (size_t i = 0; i < end; i++) {
        sift__stage *st = c->stages[i];
        sift_status s = st->ops->allowed && st->ops->prepare_allowed
                            ? st->ops->prepare_allowed(st, err)
                            : SIFT_OK;
        if (s)
            return s;
    }
    return SIFT_OK;
}

int64_t sift__chain_max_extras(const sift_chain *c)
{
    int32_t k, d, e;
    cached(c, &k, &d, &e);
    return e;
}

sift_status sift_chain_plan(const sift_chain *c, sift_plan *plan, sift_plan_stage *stages,
                            sift_error *err)
{
    if (!c || !plan)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", c ? "plan" : "chain");
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    sift__plan_stages out = {NULL, 0};
    s = check_plan_sizes(c, plan, stages, &out, err);
    if (s)
        return s;
    sift_plan full;
    walk(c, 0, 1, &full, out.base ? &out : NULL, NULL);
    put_plan(plan, &full);
    return SIFT_OK;
}

sift_status sift_chain_next_k(const sift_chain *c, sift_plan *plan, sift_error *err)
{
    if (!c || !plan)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", c ? "plan" : "chain");
    sift_status s = sift__chain_enter(c, err);
    if (s)
        return s;
    sift__plan_stages out = {NULL, 0};
    s = check_plan_sizes(c, plan, NULL, &out, err);
    if (s)
        return s;
    sift_plan full;
    walk(c, 1, 1, &full, NULL, NULL);
    put_plan(plan, &full);
    return SIFT_OK;
}

/* The busy check of every chain of a batch, before anything is read:
 * SIFT_E_ARG for a NULL chain, SIFT_E_STATE for a busy one (err->index =
 * its slot). */
static sift_status enter_all(const sift_chain *const *chains, size_t n, sift_error *err)
{
    for (size_t i = 0; i < n; i++) {
        sift_status s = sift__chain_enter(chains[i], err);
        if (s)
            return sift__fail_at(err, s, (int64_t)i, "chains[%zu] is %s", i,
                                 s == SIFT_E_ARG ? "NULL"
                                                 : "busy (called from one of its callbacks)");
    }
    return SIFT_OK;
}

sift_status sift_chains_next_k(const sift_chain *const *chains, size_t n, int32_t *k,
                               sift_error *err)
{
    if ((!chains && n) || !k)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", k ? "chains" : "k");
    int32_t best = 0;
    sift_status s = enter_all(chains, n, err);
    if (s)
        return s;
    for (size_t i = 0; i < n; i++) {
        int32_t ki = sift__chain_next_k(chains[i]);
        if (ki == 0) {
            best = 0;
            break;
        }
        best = ki > best ? ki : best;
    }
    *k = best;
    return SIFT_OK;
}

int32_t sift__chain_next_k(const sift_chain *c)
{
    sift_plan p;
    walk(c, 1, 0, &p, NULL, NULL);
    return p.k;
}

/* The weaker of two guarantees (EXACT < CERTIFIED < WHOLE_ROW). */
static sift_guarantee weaker(sift_guarantee a, sift_guarantee b)
{
    return a > b ? a : b;
}

sift_status sift_chains_next_k_batch(const sift_chain *const *chains, size_t n, int32_t *k_each,
                                     size_t *whole, sift_batch_k *batch, sift_error *err)
{
    if ((!chains && n) || !batch)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", batch ? "chains" : "batch");
    sift_status s = sift__check_struct_size(err, "sift_batch_k", batch->struct_size, sizeof *batch);
    if (s)
        return s;
    if ((s = enter_all(chains, n, err)))
        return s;
    /* Filled in full, then copied up to the caller's size. */
    sift_batch_k full;
    memset(&full, 0, sizeof full);
    full.struct_size = batch->struct_size;
    full.guarantee = SIFT_GUARANTEE_EXACT;
    for (size_t i = 0; i < n; i++) {
        sift_plan p;
        walk(chains[i], 1, 0, &p, NULL, NULL);
        if (k_each)
            k_each[i] = p.k;
        if (p.k == 0) {
            if (whole)
                whole[full.n_whole] = i;
            full.n_whole++;
            continue;
        }
        full.n_slice++;
        full.k = p.k > full.k ? p.k : full.k;
        full.max_extras = p.max_extras > full.max_extras ? p.max_extras : full.max_extras;
        full.guarantee = weaker(full.guarantee, p.guarantee);
    }
    if (full.n_slice == 0)
        full.guarantee = SIFT_GUARANTEE_WHOLE_ROW;
    memcpy(batch, &full, batch->struct_size);
    return SIFT_OK;
}

static sift_status extras(sift_chain *c, int32_t *ids, size_t capacity, size_t *n, sift_error *err)
{
    if (!n || (!ids && capacity))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", !n ? "n" : "ids");
    sift_status s = sift__chain_prepare_extras(c, err);
    if (s)
        return s;
    size_t total = sift__chain_extras(c, NULL, 0);
    if (total > capacity) {
        *n = total;
        return sift__fail(err, SIFT_E_LIMIT,
                          "the next step needs up to %zu extra ids; capacity %zu", total, capacity);
    }
    *n = sift__chain_extras(c, ids, capacity);
    return SIFT_OK;
}

/* Holds the chain: a grammar stage's allowed set may allocate through
 * the grammar's own allocator (caller code). */
sift_status sift_chain_extras(sift_chain *c, int32_t *ids, size_t capacity, size_t *n,
                              sift_error *err)
{
    SIFT__CHAIN_CALL(c, err, extras(c, ids, capacity, n, err));
}

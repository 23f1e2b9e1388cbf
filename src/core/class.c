/*
 * class.c - the one table of capability-class semantics.
 *
 * A stage's class (sift_class) is a promise about what it does to the top
 * of a row. Two readers rely on it: the static analyzer (plan.c: how many
 * of the row's top tokens a chain needs, before any row exists) and the
 * run-time certificate (certify.c: whether the tokens a slice holds
 * decided the step). The exactness promise rests on the two agreeing, so
 * each class's plan rule and certificate rule sit side by side below, and
 * both readers reach them only through sift__class_rule_of.
 *
 * The table is built from SIFT__CLASSES (sift_internal.h): a class listed
 * there without its plan_<name> and cert_<name> rule does not compile, and
 * the count of listed classes is asserted against the enum, so a class
 * one reader handles and the other does not cannot be written.
 *
 * Invariants: the plan rules read the stage only; the certificate rules
 * apply the stage to the present tokens and keep the bound on every
 * absent token true (docs/analyzer.md, "The certificate").
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "../sift_internal.h"

/* ------------------------------------------------------------------ */
/* Helpers of the plan rules                                          */
/* ------------------------------------------------------------------ */

void sift__why_put(char *buf, const char *fmt, ...)
{
    if (!buf)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, SIFT_PLAN_WHY_MAX, fmt, ap);
    va_end(ap);
}

void sift__why_append(char *buf, const char *fmt, ...)
{
    if (!buf)
        return;
    size_t used = strlen(buf);
    if (used + 1 >= SIFT_PLAN_WHY_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, SIFT_PLAN_WHY_MAX - used, fmt, ap);
    va_end(ap);
}

#define put sift__why_put
#define append sift__why_append

/* a + b for counts >= 0, saturating at INT64_MAX: stages declare their
 * own counts (a custom stage may say LOWERS or TOP with any int64), and
 * a sum past SIFT__PLAN_K_MAX means the whole row anyway. */
static int64_t sat_add(int64_t a, int64_t b)
{
    if (a < 0)
        a = 0;
    if (b < 0)
        b = 0;
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* ------------------------------------------------------------------ */
/* Helpers of the certificate rules                                   */
/* ------------------------------------------------------------------ */

/* 1 when a stage with ops->allowed has, on the present tokens, banned
 * every token it does not allow and all the tokens it allows are
 * present: then it has banned every absent token too. */
static int confines(sift__stage *st, const sift__arr *a)
{
    const int32_t *ids;
    size_t m = st->ops->allowed(st, &ids);
    if (m == SIZE_MAX || m == 0)
        return 0;
    size_t found = 0;
    for (size_t i = 0; i < a->n && found < m; i++) {
        /* ids is ascending: a binary search per present token */
        size_t lo = 0, hi = m;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ids[mid] < a->c[i].id)
                lo = mid + 1;
            else
                hi = mid;
        }
        found += lo < m && ids[lo] == a->c[i].id;
    }
    return found == m;
}

static int cmp_id(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* TOP(n) when every absent token is -inf (bound -inf without the id
 * tie-break) but the present tokens do not reach n finite ones: the
 * whole row's first n are the finite present tokens followed by the
 * -inf tokens of smallest id, present or not. Writes exactly those into
 * `a` (canonical order, the -inf ones by id) and returns 1, or returns
 * 0 when they do not fit in the workspace or no present token is finite. */
static int fill_banned(sift__ctx *ctx, sift__arr *a, size_t n)
{
    if (n > (size_t)a->V || n > ctx->ws->cap || a->c != ctx->ws->cand)
        return 0;
    size_t f = 0;
    while (f < a->n && a->c[f].logit > -INFINITY)
        f++;
    if (f == 0 || f > n)
        return 0; /* no finite token: the whole row names the error */
    int32_t *fin = (int32_t *)ctx->ws->u32;
    for (size_t i = 0; i < f; i++)
        fin[i] = a->c[i].id;
    qsort(fin, f, sizeof *fin, cmp_id);
    size_t j = f, q = 0;
    for (int32_t id = 0; j < n; id++) {
        if (q < f && fin[q] == id) {
            q++;
            continue;
        }
        a->c[j].id = id;
        a->c[j].logit = -INFINITY;
        j++;
    }
    a->n = n;
    a->order = SIFT__ORDER_CANON;
    return 1;
}

/* ------------------------------------------------------------------ */
/* WHOLE: reads the whole distribution                                */
/* ------------------------------------------------------------------ */

static void plan_truncation(sift__plan_acc *p, int threshold);
static void plan_lowers_raises(sift__plan_acc *p, int raises);

/* A WHOLE stage with a mass certificate is planned as a certified
 * truncation (top_p, dist, mirostat: plan_truncation) or, when it keeps
 * the absent tokens (XTC), as a stage that lowers (removes) at most
 * `lowers` tokens and leaves the plan CERTIFIED; any other reads the
 * whole row. */
static void plan_whole(sift__plan_acc *p)
{
    if (p->st->ops->certify_mass && p->st->ops->mass_keeps) {
        /* removes at most `lowers` top tokens, decided per step */
        plan_lowers_raises(p, 0);
        p->certified = 1;
        append(p->why, "; decided per step with a tail-mass bound");
        return;
    }
    if (p->st->ops->certify_mass) {
        plan_truncation(p, 2);
        return;
    }
    put(p->why, "reads the whole distribution before any truncation: whole row");
    p->done = 2;
}

/* A WHOLE stage reads every token's mass; one whose outcome depends on
 * the absent tokens only through their total mass is decided when its
 * certificate holds for every mass the bound allows (core/tail.c). */
static int cert_whole(sift__stage *st, int64_t n, sift__ctx *ctx, sift__arr *a, sift__bound *b)
{
    (void)n;
    if (!st->ops->certify_mass)
        return SIFT__CERT_ROW;
    sift__arr_canon(ctx, a);
    /* The rule may leave a lower bound of the absent mass in
     * ctx->absent_lo for this apply only. */
    int ok =
        st->ops->certify_mass(st, ctx, a, b) && st->ops->apply(st, ctx, a) == SIFT_OK && a->n != 0;
    ctx->absent_lo = sift__u128_from(0);
    if (!ok)
        return SIFT__CERT_ROW;
    if (st->ops->is_selector)
        return SIFT__CERT_SELECTED;
    /* XTC: the absent tokens are untouched, the set stays incomplete */
    return st->ops->mass_keeps ? SIFT__CERT_KEEP : SIFT__CERT_COMPLETE;
}

/* ------------------------------------------------------------------ */
/* IDENTITY: changes nothing                                          */
/* ------------------------------------------------------------------ */

static void plan_identity(sift__plan_acc *p)
{
    put(p->why, "changes nothing");
}

static int cert_identity(sift__stage *st, int64_t n, sift__ctx *ctx, sift__arr *a, sift__bound *b)
{
    (void)st, (void)n, (void)ctx, (void)a, (void)b;
    return SIFT__CERT_KEEP;
}

/* ------------------------------------------------------------------ */
/* LOWERS (at most n logits) and RAISES (known ids)                   */
/* ------------------------------------------------------------------ */

/* Lowered tokens may leave the top, so the plan copies that many more;
 * raised ids must be copied as extras. */
static void plan_lowers_raises(sift__plan_acc *p, int raises)
{
    const sift__stage *st = p->st;
    if (raises && !st->ops->extras) {
        put(p->why, "raises tokens it cannot name: whole row");
        p->done = 2;
        return;
    }
    int64_t m = st->ops->lowers ? st->ops->lowers(st, p->dynamic) : p->n;
    if (m < 0) {
        p->unbounded = 1;
        put(p->why, "lowers an unbounded number of tokens: certified per step");
    } else if (m > 0) {
        p->lowered = sat_add(p->lowered, m);
        p->k_here = m;
        put(p->why, "lowers at most %lld tokens: +%lld", (long long)m, (long long)m);
        append(p->terms, " + %s %lld", p->name, (long long)m);
    } else {
        put(p->why, "lowers nothing%s", p->dynamic ? " now" : "");
    }
    if (raises) {
        int64_t e = st->ops->max_extras ? st->ops->max_extras(st) : 0;
        p->extras = sat_add(p->extras, e);
        append(p->why, "; raises up to %lld ids, gathered as extras", (long long)e);
    } else if (st->ops->allowed) {
        int64_t e = st->ops->max_extras ? st->ops->max_extras(st) : 0;
        p->extras = sat_add(p->extras, e);
        append(p->why, "; names what it allows as extras when that is at most %lld ids",
               (long long)e);
    }
}

/* Absent tokens can only go down (a raising stage raises only extras,
 * which are present), so the bound still holds. A raising stage that
 * cannot name its extras (a custom stage) might raise an absent token:
 * the analyzer gives such a chain the whole row, and so does the walk.
 * A lowered absent token takes mass away, so the tail mass's lower end
 * goes. */
static int cert_lowers_raises(sift__stage *st, sift__ctx *ctx, sift__arr *a, sift__bound *b,
                              int raises)
{
    size_t before = a->n;
    b->tail_lo = 0.0;
    if (raises && !st->ops->extras)
        return SIFT__CERT_ROW;
    if (st->ops->apply(st, ctx, a) != SIFT_OK || a->n != before)
        return SIFT__CERT_ROW;
    if (!raises && st->ops->allowed && confines(st, a)) {
        /* every absent token is now -inf */
        b->by_key = 0;
        b->logit = -INFINITY;
    }
    return SIFT__CERT_KEEP;
}

static void plan_lowers(sift__plan_acc *p)
{
    plan_lowers_raises(p, 0);
}

static int cert_lowers(sift__stage *st, int64_t n, sift__ctx *ctx, sift__arr *a, sift__bound *b)
{
    (void)n;
    return cert_lowers_raises(st, ctx, a, b, 0);
}

static void plan_raises(sift__plan_acc *p)
{
    plan_lowers_raises(p, 1);
}

static int cert_raises(sift__stage *st, int64_t n, sift__ctx *ctx, sift__arr *a, sift__bound *b)
{
    (void)n;
    return cert_lowers_raises(st, ctx, a, b, 1);
}

/* The extras of this step: a RAISES stage's raised ids, a LOWERS stage's
 * few allowed ids (a grammar); written up to `room` at `at` (may be
 * NULL), returns how many there are. */
static size_t extras_raises(sift__stage *st, int32_t *at, size_t room)
{
    return st->ops->extras ? st->ops->extras(st, at, room) : 0;
}

static size_t extras_lowers(sift__stage *st, int32_t *at, size_t room)
{
    if (!st->ops->allowed)
        return 0;
    const int32_t *few;
    size_t m = st->ops->allowed(st, &few);
    if (m == SIZE_MAX)
        return 0;
    if (at && m)
        memcpy(at, few, (m < room ? m : room) * sizeof *at);
    return m;
}

static size_t extras_none(sift__stage *st, int32_t *at, size_t room)
{
    (void)st, (void)at, (void)room;
    return 0;
}

/* ------------------------------------------------------------------ */
/* MONOTONE: keeps the order up to rounding ties                      */
/* ------------------------------------------------------------------ */

static void plan_monotone(sift__plan_acc *p)
{
    if (!p->st->ops->map_bound) {
        put(p->why, "monotone without a bound map: whole row");
        p->done = 2;
        return;
    }
    p->monotone = 1;
    p->mono_name = p->name;
    p->k_here = SIFT__PLAN_MONOTONE_MARGIN;
    put(p->why, "keeps the order up to rounding ties: margin %d, certified",
        SIFT__PLAN_MONOTONE_MARGIN);
}

static int cert_monotone(sift__stage *st, int64_t n, sift__ctx *ctx, sift__arr *a, sift__bound *b)
{
    (void)n;
    size_t before = a->n;
    float nb = st->ops->map_bound ? st->ops->map_bound(st, b->logit) : NAN;
    if (nb != nb || nb == INFINITY)
        return SIFT__CERT_ROW;
    /* A monotone stage may decide on the set's largest logit (temperature
     * falls back to greedy when it overflows, and then removes every
     * other token, absent ones included). The present maximum must map
     * to a finite value: then the row's maximum, which lies between it
     * and the bound, does too, and neither the slice nor the row falls
     * back. */
    float pm = st->ops->map_bound(st, sift__arr_max_logit(a));
    if (!(pm > -INFINITY && pm < INFINITY))
        return SIFT__CERT_ROW;
    float old = b->logit;
    if (st->ops->apply(st, ctx, a) != SIFT_OK || a->n != before)
        return SIFT__CERT_ROW;
    b->by_key = 0;
    b->logit = nb;
    /* The tail mass follows a division (temperature); any other map
     * drops it, and the free bound remains (core/tail.c). */
    float t = st->ops->tail_divisor ? st->ops->tail_divisor(st) : NAN;
    if (t == t)
        sift__tail_divide(b, old, t, sift__arr_max_logit(a));
    else {
        b->has_tail = 0;
        b->tail_lo = 0.0;
    }
    return SIFT__CERT_KEEP;
}

/* ------------------------------------------------------------------ */
/* TOP (a canonical prefix of at most n) and THRESHOLD (certified)    */
/* ------------------------------------------------------------------ */

/* The first truncation: decides the plan's k from what the stages
 * before it may do to the top. */
static void plan_truncation(sift__plan_acc *p, int threshold)
{
    const sift__stage *st = p->st;
    sift_plan *plan = p->plan;
    int64_t n = p->n;
    if (threshold == 1 && !st->ops->certify) {
        put(p->why, "threshold stage that cannot be certified: whole row");
        p->done = 2;
        return;
    }
    if (threshold == 2 && !st->ops->certify_mass) {
        put(p->why, "reads the whole distribution: whole row");
        p->done = 2;
        return;
    }
    /* threshold 2: a whole-distribution stage with a mass certificate */
    int64_t base = threshold == 2        ? SIFT__PLAN_MASS_K
                   : threshold && n <= 0 ? SIFT__PLAN_THRESHOLD_K
                                         : n;
    int64_t k =
        sat_add(sat_add(base, p->lowered), (p->monotone ? SIFT__PLAN_MONOTONE_MARGIN : 0) +
                                               (p->unbounded ? SIFT__PLAN_UNBOUNDED_SLACK : 0));
    if (base <= 0 || k > SIFT__PLAN_K_MAX) {
        put(p->why, "bound out of range: whole row");
        p->done = 2;
        return;
    }
    plan->k = (int32_t)k;
    plan->recommended_k = (int32_t)k;
    plan->decided_at = (int32_t)p->i;
    plan->guarantee = threshold || p->monotone || p->unbounded || p->certified
                          ? SIFT_GUARANTEE_CERTIFIED
                          : SIFT_GUARANTEE_EXACT;
    if (threshold == 2)
        put(p->pwhy, "%s%s%s: certified with a tail-mass bound: recommended %d", p->name,
            p->mono_name ? " after " : "", p->mono_name ? p->mono_name : "", SIFT__PLAN_MASS_K);
    else if (threshold && n <= 0)
        put(p->pwhy, "%s has no static bound: recommended %d", p->name, SIFT__PLAN_THRESHOLD_K);
    else
        put(p->pwhy, "%s %lld", p->name, (long long)n);
    append(p->pwhy, "%s", p->terms ? p->terms : "");
    if (p->monotone)
        append(p->pwhy, " + margin %d", SIFT__PLAN_MONOTONE_MARGIN);
    if (p->unbounded)
        append(p->pwhy, " + slack %d", SIFT__PLAN_UNBOUNDED_SLACK);
    append(p->pwhy, " = %lld, %s", (long long)k, sift_guarantee_str(plan->guarantee));
    if (threshold == 2)
        put(p->why,
            "reads the distribution's mass: certified with a tail-mass bound "
            "(SIFT_SLICE_TAIL_MASS, else the free bound); recommended k = %lld",
            (long long)k);
    else if (threshold)
        put(p->why, "threshold decided per step by the certificate: k = %lld", (long long)k);
    else
        put(p->why, "keeps the first %lld: k = %lld", (long long)n, (long long)k);
    p->k_here = base;
    p->done = 1;
}

static void plan_top(sift__plan_acc *p)
{
    plan_truncation(p, 0);
}

static int cert_top(sift__stage *st, int64_t n, sift__ctx *ctx, sift__arr *a, sift__bound *b)
{
    if (n <= 0)
        return SIFT__CERT_ROW;
    sift__arr_canon(ctx, a);
    if ((size_t)n > a->n || !sift__bound_ahead(b, &a->c[n - 1])) {
        /* With every absent token at -inf the first n are known even when
         * they run into -inf tokens. */
        int banned = !b->by_key && b->logit == -INFINITY &&
                     b->n_absent + a->n == (uint64_t)a->V; /* nothing removed (XTC) */
        if (!banned || !fill_banned(ctx, a, (size_t)n))
            return SIFT__CERT_ROW;
    }
    /* Certified: the stage's result on the present tokens is its result
     * on the row, and every later stage sees the whole candidate set. */
    if (st->ops->apply(st, ctx, a) != SIFT_OK || a->n == 0)
        return SIFT__CERT_ROW;
    if (st->ops->is_selector)
        return SIFT__CERT_SELECTED;
    if (a->n > (size_t)n)
        return SIFT__CERT_ROW;
    return SIFT__CERT_COMPLETE;
}

static void plan_threshold(sift__plan_acc *p)
{
    plan_truncation(p, 1);
}

static int cert_threshold(sift__stage *st, int64_t n, sift__ctx *ctx, sift__arr *a, sift__bound *b)
{
    (void)n;
    if (!st->ops->certify)
        return SIFT__CERT_ROW;
    sift__arr_canon(ctx, a);
    if (!st->ops->certify(st, ctx, a, b))
        return SIFT__CERT_ROW;
    if (st->ops->apply(st, ctx, a) != SIFT_OK || a->n == 0)
        return SIFT__CERT_ROW;
    if (st->ops->is_selector)
        return SIFT__CERT_SELECTED;
    return SIFT__CERT_COMPLETE;
}

/* ------------------------------------------------------------------ */
/* The table                                                          */
/* ------------------------------------------------------------------ */

#define SIFT__RULE(C, name, extras) [SIFT_CLASS_##C] = {#name, plan_##name, cert_##name, extras},
static const sift__class_rule rules[] = {SIFT__CLASSES(SIFT__RULE)};
#undef SIFT__RULE

#define SIFT__ONE(C, name, extras) +1
enum { N_LISTED = 0 SIFT__CLASSES(SIFT__ONE) };
#undef SIFT__ONE

_Static_assert(sizeof rules / sizeof rules[0] == SIFT__N_CLASSES,
               "the class table has one entry per sift_class");
_Static_assert(N_LISTED == SIFT__N_CLASSES, "SIFT__CLASSES lists every sift_class once");

const sift__class_rule *sift__class_rule_of(sift_class cls)
{
    /* A class outside the enum (custom stages are checked when added)
     * reads as WHOLE. */
    if ((unsigned)cls >= SIFT__N_CLASSES)
        cls = SIFT_CLASS_WHOLE;
    return &rules[cls];
}

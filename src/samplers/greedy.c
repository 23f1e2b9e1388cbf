/*
 * greedy.c - the greedy selector.
 *
 * Selects the canonical first candidate: the largest logit, the smallest
 * id among equal logits. llama.cpp takes the first maximum in array order,
 * which for its unsorted full row is also the smallest id; sift's rule does
 * not depend on the array order at all.
 * Capability class: TOP(1). Draws nothing.
 */
#include <math.h>

#include "../sift_internal.h"
#include "registry.h"

static sift_status greedy_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    uint64_t best = 0;
    float m = -INFINITY;
    for (size_t i = 0; i < a->n; i++) {
        uint64_t k = sift__ckey(a->c[i].logit, a->c[i].id);
        best = k > best ? k : best;
        m = a->c[i].logit > m ? a->c[i].logit : m;
    }
    if (!(m > -INFINITY))
        return sift__no_candidate(ctx, st->ops->name);
    ctx->selected = sift__ckey_id(best);
    return SIFT_OK;
}

static sift_class greedy_cls(const sift__stage *st, int64_t *n)
{
    (void)st;
    *n = 1;
    return SIFT_CLASS_TOP;
}

static const sift__stage_ops greedy_ops = {
    .name = "greedy",
    .apply = greedy_apply,
    .is_selector = 1,
    .is_greedy = 1,
    .cls = greedy_cls,
};

sift_status sift_chain_add_greedy(sift_chain *chain, sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    sift__stage *st = sift__stage_alloc(sift__chain_alloc(chain), &greedy_ops, sizeof *st);
    if (!st)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding greedy");
    return sift__chain_push(chain, st, err);
}

/* ------------------------------------------------------------------ */
/* Descriptor                                                          */
/* ------------------------------------------------------------------ */

typedef struct greedy_rec {
    int unused;
} greedy_rec;

static sift_status greedy_build(sift_chain *c, const void *rec, const sift__build_env *env,
                                sift_error *err)
{
    (void)rec;
    (void)env;
    return sift_chain_add_greedy(c, err);
}

const sift__sampler_desc sift__desc_greedy = {
    .name = "greedy",
    .summary = "picks the most likely token",
    .rec_size = sizeof(greedy_rec),
    .bare_ok = 1,
    .selector = 1,
    .build = greedy_build,
};

/*
 * custom.c - caller-defined stages behind a versioned vtable.
 *
 * The chain hands a custom stage its candidates in canonical order and
 * checks what comes back: the size may only shrink, every id must stay in
 * [0, V) and no logit may be NaN or +inf. The stage's capability class is
 * what the caller declares; undeclared means WHOLE. The vtable is read by
 * the size of the layout its abi_version names (every version from 1 to
 * SIFT_CUSTOM_STAGE_ABI), so a caller built against an older sift.h
 * keeps working; an unknown version is refused.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "../sift_internal.h"

typedef struct custom_stage {
    sift__stage base;
    sift_custom_stage vt;
    void *user;
    char name[64];
} custom_stage;

static sift_status custom_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    custom_stage *cs = (custom_stage *)st;
    sift__arr_canon(ctx, a);
    size_t n = a->n;
    int rc = cs->vt.apply(cs->user, a->c, &n);
    if (rc != 0)
        return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                             "custom stage '%s' failed with code %d", cs->name, rc);
    if (n > a->n)
        return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                             "custom stage '%s' grew the array from %zu to %zu", cs->name, a->n, n);
    for (size_t i = 0; i < n; i++) {
        const sift_candidate *c = &a->c[i];
        if (c->id < 0 || c->id >= a->V)
            return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                                 "custom stage '%s' produced token id %d outside [0, %d)", cs->name,
                                 (int)c->id, (int)a->V);
        if (c->logit != c->logit || c->logit == INFINITY)
            return sift__fail_at(ctx->err, SIFT_E_ROW_VALUE, c->id,
                                 "custom stage '%s' produced %s at token %d", cs->name,
                                 c->logit != c->logit ? "NaN" : "+inf", (int)c->id);
    }
    a->n = n;
    a->dense = 0;
    /* The stage may have reordered the array and changed logits. */
    a->order = SIFT__ORDER_NONE;
    return SIFT_OK;
}

static void custom_accept(sift__stage *st, int32_t token)
{
    custom_stage *cs = (custom_stage *)st;
    if (cs->vt.accept)
        (void)cs->vt.accept(cs->user, token);
}

static void custom_reset(sift__stage *st)
{
    custom_stage *cs = (custom_stage *)st;
    if (cs->vt.reset)
        cs->vt.reset(cs->user);
}

static sift_status custom_clone(const sift__stage *st, sift__stage **out, const sift__alloc *al,
                                sift_error *err)
{
    const custom_stage *cs = (const custom_stage *)st;
    if (!cs->vt.clone)
        return sift__fail(err, SIFT_E_STATE, "custom stage '%s' has no clone function", cs->name);
    custom_stage *d = sift__calloc(al, 1, sizeof *d);
    if (!d)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while cloning stage '%s'", cs->name);
    *d = *cs;
    d->user = cs->vt.clone(cs->user);
    if (!d->user) {
        sift__free(al, d);
        return sift__fail(err, SIFT_E_NOMEM, "custom stage '%s' clone returned NULL", cs->name);
    }
    *out = &d->base;
    return SIFT_OK;
}

static void custom_destroy(sift__stage *st, const sift__alloc *al)
{
    (void)al;
    custom_stage *cs = (custom_stage *)st;
    if (cs->vt.free)
        cs->vt.free(cs->user);
}

static sift_class custom_cls(const sift__stage *st, int64_t *n)
{
    const custom_stage *cs = (const custom_stage *)st;
    *n = cs->vt.cls_n;
    return cs->vt.cls;
}

static const char *custom_name(const sift__stage *st)
{
    return ((const custom_stage *)st)->name;
}

/* The size of each published layout of sift_custom_stage, by
 * abi_version. A version adds fields at the end only, and gets one entry
 * here: a vtable of an older version is read by its own size. */
static const size_t LAYOUT_SIZE[SIFT_CUSTOM_STAGE_ABI + 1] = {
    [1] = offsetof(sift_custom_stage, free) + sizeof(void (*)(void *)),
};

static const sift__stage_ops custom_ops = {
    .display_name = custom_name,
    .name = "custom",
    .apply = custom_apply,
    .accept = custom_accept,
    .reset = custom_reset,
    .clone = custom_clone,
    .destroy = custom_destroy,
    .cls = custom_cls,
};

sift_status sift_chain_add_custom(sift_chain *chain, const sift_custom_stage *vt, void *user,
                                  sift_error *err)
{
    sift_status s = sift__chain_enter(chain, err);
    if (s)
        return s;
    if (!vt)
        return sift__fail(err, SIFT_E_ARG, "custom stage vtable is NULL");
    if (vt->abi_version == 0 || vt->abi_version > SIFT_CUSTOM_STAGE_ABI)
        return sift__fail(err, SIFT_E_ARG,
                          "custom stage ABI version %u is not supported: this library knows "
                          "versions 1 to %u%s",
                          (unsigned)vt->abi_version, (unsigned)SIFT_CUSTOM_STAGE_ABI,
                          vt->abi_version ? " (a sift.h newer than the library?)"
                                          : " (set it to SIFT_CUSTOM_STAGE_ABI)");
    /* Read the caller's vtable by the size of its version's layout; the
     * fields of later versions stay 0 (their documented default). */
    sift_custom_stage full;
    memset(&full, 0, sizeof full);
    memcpy(&full, vt, LAYOUT_SIZE[vt->abi_version]);
    vt = &full;
    if (!vt->apply)
        return sift__fail(err, SIFT_E_ARG, "custom stage has no apply function");
    if ((unsigned)vt->cls > (unsigned)SIFT_CLASS_THRESHOLD)
        return sift__fail(err, SIFT_E_ARG, "custom stage class %d is not a sift_class",
                          (int)vt->cls);
    custom_stage *cs =
        (custom_stage *)sift__stage_alloc(sift__chain_alloc(chain), &custom_ops, sizeof *cs);
    if (!cs)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding a custom stage");
    cs->vt = *vt;
    cs->user = user;
    sift__strlcpy_utf8(cs->name, vt->name ? vt->name : "custom", sizeof cs->name);
    /* On failure push frees the block via destroy, which would free the
     * caller's user data: ownership passes on success only, so detach. */
    cs->vt.free = NULL;
    s = sift__chain_push(chain, &cs->base, err);
    if (s == SIFT_OK)
        cs->vt.free = vt->free;
    return s;
}

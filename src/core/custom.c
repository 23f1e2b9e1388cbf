/*
 * custom.c - caller-defined stages behind a versioned vtable.
 *
 * The chain hands a custom stage its candidates in canonical order and
 * checks what comes back as it checks any input: the size may only
 * shrink, every id must be one the stage was given, at most once, no
 * logit may be NaN or +inf, and the output must keep the class the stage
 * declares (the analyzer and the slice path trust it): IDENTITY changes
 * nothing, LOWERS lowers at most n logits (a removed token counts as
 * lowered) and raises none, TOP keeps a canonical prefix of at most K of
 * its input and THRESHOLD a canonical prefix, both with their logits
 * unchanged. Undeclared means WHOLE, which promises nothing.
 *
 * Ownership: `user` passes to the chain on a successful add only (the
 * stage's free is detached while the push may fail). A `user` that a
 * custom stage of the same chain already owns is refused: it would be
 * freed twice.
 *
 * The vtable is read by the size of the layout its abi_version names
 * (every version from 1 to SIFT_CUSTOM_STAGE_ABI), so a caller built
 * against an older sift.h keeps working; an unknown version is refused.
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

/* The output checks below view 64-bit scratch as candidate arrays. */
typedef char custom_cand_is_8_bytes[sizeof(sift_candidate) == sizeof(uint64_t) ? 1 : -1];

static int same_logit(float x, float y)
{
    return memcmp(&x, &y, sizeof x) == 0;
}

/* Checks the output out[0..m) against the input in[0..n) (canonical,
 * as given to the stage), both copies that may be reordered: ids given
 * at most once, and the declared class kept. tmp has room for n. */
static sift_status check_output(const custom_stage *cs, sift__ctx *ctx, sift_candidate *in,
                                size_t n, sift_candidate *out, size_t m, sift_candidate *tmp)
{
    int64_t k = cs->vt.cls_n;
    sift_class cls = cs->vt.cls;
    int prefix = cls == SIFT_CLASS_TOP || cls == SIFT_CLASS_THRESHOLD;
    if (cls == SIFT_CLASS_TOP && k >= 0 && (uint64_t)m > (uint64_t)k)
        return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                             "custom stage '%s' declares TOP %lld but kept %zu tokens", cs->name,
                             (long long)k, m);
    if (cls == SIFT_CLASS_IDENTITY && m != n)
        return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                             "custom stage '%s' declares IDENTITY but removed %zu tokens", cs->name,
                             n - m);
    /* A prefix class keeps the canonical first m of its input. */
    size_t ni = prefix ? m : n;
    sift__sort_id(in, ni, tmp);
    sift__sort_id(out, m, tmp);
    size_t j = 0;
    int64_t lowered = (int64_t)(n - m);
    for (size_t i = 0; i < m; i++) {
        int32_t id = out[i].id;
        if (i > 0 && out[i - 1].id == id)
            return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                                 "custom stage '%s' produced token %d twice", cs->name, (int)id);
        while (j < ni && in[j].id < id)
            j++;
        if (j == ni || in[j].id != id) {
            if (prefix)
                return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                                     "custom stage '%s' declares %s but kept token %d, which is "
                                     "not among the first %zu of its input",
                                     cs->name, sift_class_str(cls), (int)id, m);
            return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                                 "custom stage '%s' produced token %d, which it was not given",
                                 cs->name, (int)id);
        }
        float was = in[j].logit, now = out[i].logit;
        if ((cls == SIFT_CLASS_IDENTITY || prefix) && !same_logit(was, now))
            return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                                 "custom stage '%s' declares %s but changed the logit of token %d",
                                 cs->name, sift_class_str(cls), (int)id);
        if (cls == SIFT_CLASS_LOWERS) {
            if (now > was)
                return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                                     "custom stage '%s' declares LOWERS but raised token %d",
                                     cs->name, (int)id);
            lowered += now < was;
        }
    }
    if (cls == SIFT_CLASS_LOWERS && k >= 0 && lowered > k)
        return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                             "custom stage '%s' declares LOWERS %lld but lowered or removed %lld "
                             "tokens",
                             cs->name, (long long)k, (long long)lowered);
    return SIFT_OK;
}

static sift_status custom_apply(sift__stage *st, sift__ctx *ctx, sift__arr *a)
{
    custom_stage *cs = (custom_stage *)st;
    sift__arr_canon(ctx, a);
    size_t n = a->n;
    /* The input as given, for the checks (the scratch arrays hold at
     * least as many entries as the working array). */
    sift_candidate *in = ctx->ws->cand2;
    sift_candidate *out = (sift_candidate *)(void *)ctx->ws->u64a;
    sift_candidate *tmp = (sift_candidate *)(void *)ctx->ws->u64b;
    if (n)
        memcpy(in, a->c, n * sizeof *in);
    int in_finite = !sift__all_banned(in, n), out_finite = 0;
    size_t m = n;
    int rc = cs->vt.apply(cs->user, a->c, &m);
    if (rc != 0)
        return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                             "custom stage '%s' failed with code %d", cs->name, rc);
    if (m > n)
        return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                             "custom stage '%s' grew the array from %zu to %zu", cs->name, n, m);
    for (size_t i = 0; i < m; i++) {
        const sift_candidate *c = &a->c[i];
        if (c->id < 0 || c->id >= a->V)
            return sift__fail_at(ctx->err, SIFT_E_ARG, (int64_t)ctx->stage,
                                 "custom stage '%s' produced token id %d outside [0, %d)", cs->name,
                                 (int)c->id, (int)a->V);
        if (c->logit != c->logit || c->logit == INFINITY)
            return sift__fail_at(ctx->err, SIFT_E_ROW_VALUE, c->id,
                                 "custom stage '%s' produced %s at token %d", cs->name,
                                 c->logit != c->logit ? "NaN" : "+inf", (int)c->id);
        out_finite |= c->logit >= -FLT_MAX;
    }
    if (m)
        memcpy(out, a->c, m * sizeof *out);
    sift_status s = check_output(cs, ctx, in, n, out, m, tmp);
    if (s)
        return s;
    a->n = m;
    a->dense = 0;
    /* Who left nothing finite, noted here where the output is scanned
     * anyway: the row step names this stage without running the stages
     * again, which would call user code a second time and may not give
     * the same answer (sift__note_banned; a set the certificate walk only
     * partly holds is no row's answer, and the walk keeps its own note). */
    if (!out_finite && in_finite)
        ctx->banned_at = ctx->stage;
    else if (out_finite)
        ctx->banned_at = SIZE_MAX;
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
    .name = "custom",
    .display_name = custom_name,
    .apply = custom_apply,
    .cls = custom_cls,
    .accept = custom_accept,
    .reset = custom_reset,
    .clone = custom_clone,
    .destroy = custom_destroy,
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
    for (size_t i = 0; user && vt->free && i < sift_chain_n_stages(chain); i++) {
        const custom_stage *o = (const custom_stage *)sift__chain_stage(chain, i);
        if (o->base.ops == &custom_ops && o->user == user && o->vt.free)
            return sift__fail_at(err, SIFT_E_ARG, (int64_t)i,
                                 "custom stage user data is already owned by a chain (stage %zu, "
                                 "'%s', of this one)",
                                 i, o->name);
    }
    custom_stage *cs =
        (custom_stage *)sift__stage_alloc(sift__chain_alloc(chain), &custom_ops, sizeof *cs);
    if (!cs)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while adding a custom stage");
    cs->vt = *vt;
    cs->user = user;
    sift__strlcpy_utf8(cs->name, vt->name ? vt->name : "custom", sizeof cs->name);
    cs->vt.name = NULL; /* the caller's string, read during this call only */
    /* On failure push frees the block via destroy, which would free the
     * caller's user data: ownership passes on success only, so detach. */
    cs->vt.free = NULL;
    s = sift__chain_push(chain, &cs->base, err);
    if (s == SIFT_OK)
        cs->vt.free = vt->free;
    return s;
}

/*
 * registry.c - the list of samplers the configuration knows.
 *
 * One line per sampler file: the name of its descriptor (see
 * registry.h). The order is the order of docs/config.md's stage tables;
 * did-you-mean suggestions prefer the earlier of two equally close names.
 */
#include <math.h>
#include <string.h>

#include "registry.h"

/* The list: X(name) for the descriptor sift__desc_<name> of each file,
 * one per line, so that adding a sampler adds one line here. */
/* clang-format off */
#define SAMPLERS(X) \
    X(penalties) \
    X(dry) \
    X(logit_bias) \
    X(top_k) \
    X(top_p) \
    X(min_p) \
    X(typical) \
    X(top_n_sigma) \
    X(xtc) \
    X(epsilon) \
    X(eta) \
    X(temperature) \
    X(dist) \
    X(greedy) \
    X(mirostat) \
    X(mirostat_v2) \
    X(adaptive_p) \
    X(min_tokens) \
    X(allowed_tokens) \
    X(no_repeat_ngram) \
    X(bad_words) \
    /* end of the list */
/* clang-format on */

#define DECLARE(name) extern const sift__sampler_desc sift__desc_##name;
SAMPLERS(DECLARE)

#define ENTRY(name) &sift__desc_##name,
const sift__sampler_desc *const sift__samplers[] = {SAMPLERS(ENTRY) NULL};

const sift__sampler_desc *sift__sampler_find(const char *name, size_t len)
{
    for (size_t i = 0; sift__samplers[i]; i++) {
        const char *n = sift__samplers[i]->name;
        if (strlen(n) == len && !memcmp(n, name, len))
            return sift__samplers[i];
    }
    return NULL;
}

const sift__param *sift__param_find(const sift__sampler_desc *d, const char *name)
{
    for (size_t i = 0; i < d->n_params; i++)
        if (!strcmp(d->params[i].name, name))
            return &d->params[i];
    return NULL;
}

void sift__rec_defaults(const sift__sampler_desc *d, void *rec, int yaml)
{
    memset(rec, 0, d->rec_size);
    for (size_t i = 0; i < d->n_params; i++) {
        const sift__param *p = &d->params[i];
        double v = yaml ? p->def : p->flat_def;
        switch (p->type) {
        case SIFT__PT_INT:
        case SIFT__PT_WINDOW: *SIFT__REC_FIELD(rec, p, int32_t) = (int32_t)v; break;
        case SIFT__PT_FLOAT: *SIFT__REC_FIELD(rec, p, float) = (float)v; break;
        case SIFT__PT_BOOL:
        case SIFT__PT_ENUM: *SIFT__REC_FIELD(rec, p, int) = (int)v; break;
        case SIFT__PT_STRING_LIST:
        case SIFT__PT_ID_FLOAT_MAP: break;
        }
    }
}

int sift__param_ok(const sift__param *p, double v)
{
    if (p->type == SIFT__PT_INT || p->type == SIFT__PT_WINDOW) {
        if (p->range == SIFT__R_ANY)
            return v >= INT32_MIN && v <= INT32_MAX;
        if (!(v <= INT32_MAX))
            return 0;
    } else if (!isfinite(v)) {
        /* A float parameter is finite whatever its range. */
        return 0;
    }
    switch (p->range) {
    case SIFT__R_ANY: return 1;
    /* The bounds as floats for a float: the value is a float, and a
     * bound such as 0.99 lies between two of them. */
    case SIFT__R_IN:
        return p->type == SIFT__PT_FLOAT ? v >= (float)p->lo && v <= (float)p->hi
                                         : v >= p->lo && v <= p->hi;
    case SIFT__R_GE: return v >= p->lo;
    case SIFT__R_GT: return v > p->lo;
    case SIFT__R_LE: return v <= p->hi;
    }
    return 0;
}

sift_status sift__param_check(const sift__sampler_desc *d, const char *param, double v,
                              sift_error *err)
{
    return sift__param_check_arg(sift__param_find(d, param), d->name, param, v, err);
}

sift_status sift__param_check_arg(const sift__param *p, const char *who, const char *arg, double v,
                                  sift_error *err)
{
    if (sift__param_ok(p, v))
        return SIFT_OK;
    const char *n0 = p->range_note ? " (" : "", *n1 = p->range_note ? p->range_note : "",
               *n2 = p->range_note ? ")" : "";
    if (p->type != SIFT__PT_FLOAT)
        /* Only the lower bound can be broken by an int32_t argument. */
        return sift__fail(err, SIFT_E_ARG, "%s: %s must be >= %d%s%s%s, got %d", who, arg,
                          (int)p->lo, n0, n1, n2, (int)v);
    switch (p->range) {
    case SIFT__R_IN:
        return sift__fail(err, SIFT_E_ARG, "%s: %s must be a number in [%g, %g]%s%s%s, got %g", who,
                          arg, p->lo, p->hi, n0, n1, n2, v);
    case SIFT__R_GE:
    case SIFT__R_GT:
        return sift__fail(err, SIFT_E_ARG, "%s: %s must be finite and %s %g%s%s%s, got %g", who,
                          arg, p->range == SIFT__R_GT ? ">" : ">=", p->lo, n0, n1, n2, v);
    case SIFT__R_LE:
        return sift__fail(err, SIFT_E_ARG, "%s: %s must be finite and <= %g, got %g", who, arg,
                          p->hi, v);
    case SIFT__R_ANY: break;
    }
    return sift__fail(err, SIFT_E_ARG, "%s: %s must be finite, got %g", who, arg, v);
}

sift__param sift__param_flat(const sift__param *p)
{
    sift__param f = *p;
    if (p->flat_rule == SIFT__FLAT_NEG_GREEDY || p->flat_rule == SIFT__FLAT_NEG_OFF ||
        p->flat_rule == SIFT__FLAT_CLAMP) {
        f.range = p->flat_range;
        f.lo = p->flat_lo;
        f.hi = p->flat_hi;
        f.range_note = NULL;
    }
    return f;
}

sift_status sift__window_check(const sift__sampler_desc *d, const char *param, int32_t v,
                               const sift_chain *chain, sift_error *err)
{
    if (v < 0)
        return sift__fail(err, SIFT_E_ARG,
                          "%s: %s must be >= 0 (give a window; -1 = context is not supported), "
                          "got %d",
                          d->name, param, (int)v);
    int32_t maxh = sift__chain_max_history(chain);
    if (v > maxh)
        return sift__fail(err, SIFT_E_LIMIT, "%s: %s = %d exceeds max_history %d", d->name, param,
                          (int)v, (int)maxh);
    return SIFT_OK;
}

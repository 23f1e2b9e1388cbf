/*
 * registry.c - the list of samplers the configuration knows.
 *
 * One line per sampler file: its descriptor (see registry.h). The order is
 * the order of docs/config.md's stage tables; did-you-mean suggestions
 * prefer the earlier of two equally close names.
 */
#include <string.h>

#include "registry.h"

extern const sift__sampler_desc sift__desc_penalties, sift__desc_dry, sift__desc_logit_bias,
    sift__desc_top_k, sift__desc_top_p, sift__desc_min_p, sift__desc_typical,
    sift__desc_top_n_sigma, sift__desc_xtc, sift__desc_temperature, sift__desc_dist,
    sift__desc_greedy, sift__desc_mirostat, sift__desc_mirostat_v2;

const sift__sampler_desc *const sift__samplers[] = {
    &sift__desc_penalties,   &sift__desc_dry,         &sift__desc_logit_bias,
    &sift__desc_top_k,       &sift__desc_top_p,       &sift__desc_min_p,
    &sift__desc_typical,     &sift__desc_top_n_sigma, &sift__desc_xtc,
    &sift__desc_temperature, &sift__desc_dist,        &sift__desc_greedy,
    &sift__desc_mirostat,    &sift__desc_mirostat_v2, NULL,
};

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

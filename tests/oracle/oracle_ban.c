/*
 * oracle_ban.c - the naive oracle of the samplers that ban listed ids
 * (min_tokens, allowed_tokens, no_repeat_ngram, bad_words), written again
 * from docs/samplers.md with plain loops over the whole candidate set and
 * the whole history. Every function leaves the array sorted canonically.
 */
#include <math.h>

#include "oracle.h"

static int listed(const int32_t *ids, size_t n, int32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

/* min_tokens: while fewer than n tokens were accepted (or always, n =
 * -1), every listed id is -inf. */
sift_status or_min_tokens(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    if (!(s->i0 < 0 || o->st[si].n_accepted < s->i0))
        return SIFT_OK;
    for (size_t i = 0; i < a->n; i++)
        if (listed(s->ids, s->n_ids, a->c[i].id))
            a->c[i].logit = -INFINITY;
    or_sort(a);
    return SIFT_OK;
}

/* allowed_tokens: every id not listed is -inf. */
sift_status or_allowed_tokens(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    for (size_t i = 0; i < a->n; i++)
        if (!listed(s->ids, s->n_ids, a->c[i].id))
            a->c[i].logit = -INFINITY;
    or_sort(a);
    return SIFT_OK;
}

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

/* min_tokens: while fewer than n generated tokens were accepted (or
 * always, n = -1), every listed id is -inf; or_accept_prompt does not
 * count. */
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

/* no_repeat_ngram: every token that follows an occurrence of the
 * window's last n - 1 tokens earlier in the window is -inf; each start
 * position compared token by token. */
sift_status or_no_repeat_ngram(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    const int32_t *h = o->st[si].hist;
    int32_t n = s->i0, N = (int32_t)o->st[si].hist_n;
    if (n == 0 || s->i1 == 0 || N < n)
        return SIFT_OK;
    for (int32_t i = 0; i + n <= N; i++) {
        int same = 1;
        for (int32_t k = 0; k < n - 1; k++)
            same &= h[i + k] == h[N - (n - 1) + k];
        if (!same)
            continue;
        for (size_t c = 0; c < a->n; c++)
            if (a->c[c].id == h[i + n - 1])
                a->c[c].logit = -INFINITY;
    }
    or_sort(a);
    return SIFT_OK;
}

/* bad_words: the last token of every sequence whose other tokens end the
 * history (a one-token sequence: always) is -inf. */
sift_status or_bad_words(or_chain *o, size_t si, or_arr *a)
{
    const sp_stage *s = &o->spec.st[si];
    const int32_t *h = o->st[si].hist;
    size_t N = o->st[si].hist_n;
    for (size_t w = 0; w < s->n_words; w++) {
        size_t pre = s->word_len[w] - 1;
        if (pre > N)
            continue;
        int ends = 1;
        for (size_t k = 0; k < pre; k++)
            ends &= h[N - pre + k] == s->word[w][k];
        if (!ends)
            continue;
        for (size_t c = 0; c < a->n; c++)
            if (a->c[c].id == s->word[w][pre])
                a->c[c].logit = -INFINITY;
    }
    or_sort(a);
    return SIFT_OK;
}

/*
 * slicer.c - the slice builder: Prefix(k) and the extras from a whole row.
 *
 * Owns sift_slicer_new, sift_slicer_free and sift_slicer_build: the CPU
 * reference for what a device top-k kernel must hand sift (the canonical
 * first k tokens, ties broken by ascending id, then the logits of the
 * requested extra ids that are not in the prefix).
 *
 * It runs the same prefix builder as the full-row path (sift__row_prefix,
 * which for k <= SIFT__TOPK_MAX is the one-pass top-k of core/topk.c: a
 * sampled threshold, one filtered read of the row, a sort of the k
 * survivors), so it costs about one read of the row.
 *
 * Invariants: buffers are sized on the first build for a given V and
 * reused; the slice it returns points into them.
 */
#include <stdlib.h>

#include "../sift_internal.h"

struct sift_slicer {
    sift__alloc al;
    int32_t max_vocab;
    sift__ws ws;
    sift_candidate *ext; /* extras, ws.cap entries */
};

sift_status sift_slicer_new(sift_slicer **out, int32_t max_vocab, const sift_allocator *allocator,
                            sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (max_vocab < 1)
        return sift__fail(err, SIFT_E_ARG, "max_vocab must be >= 1, got %d", (int)max_vocab);
    if (max_vocab > SIFT_DEFAULT_MAX_VOCAB)
        return sift__fail(err, SIFT_E_LIMIT, "max_vocab = %d exceeds %d", (int)max_vocab,
                          (int)SIFT_DEFAULT_MAX_VOCAB);
    sift__alloc al;
    sift_status ast = sift__alloc_init(&al, allocator, err);
    if (ast)
        return ast;
    sift_slicer *s = sift__calloc(&al, 1, sizeof *s);
    if (!s)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while creating a slicer");
    s->al = al;
    s->max_vocab = max_vocab;
    *out = s;
    return SIFT_OK;
}

void sift_slicer_free(sift_slicer *s)
{
    if (!s)
        return;
    sift__alloc al = s->al;
    sift__ws_free(&s->ws, &al);
    sift__free(&al, s->ext);
    sift__free(&al, s);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static sift_status reserve(sift_slicer *s, int32_t V, sift_error *err)
{
    if ((size_t)V <= s->ws.cap && s->ext)
        return SIFT_OK;
    sift_candidate *ext = sift__malloc(&s->al, (size_t)V, sizeof *ext);
    if (!ext)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while sizing a slicer for %d tokens",
                          (int)V);
    sift_status st = sift__ws_reserve(&s->ws, &s->al, (size_t)V, err);
    if (st) {
        sift__free(&s->al, ext);
        return st;
    }
    sift__free(&s->al, s->ext);
    s->ext = ext;
    return SIFT_OK;
}

sift_status sift_slicer_build(sift_slicer *s, const float *row, int32_t V, int32_t k,
                              const int32_t *ids, size_t n_ids, sift_slice *slice, sift_error *err)
{
    if (!s || !row || !slice || (!ids && n_ids))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL",
                          !s ? "slicer" : (!row ? "row" : (!slice ? "slice" : "ids")));
    if (V < 1 || V > s->max_vocab)
        return sift__fail(err, SIFT_E_ARG, "row length %d is outside [1, %d]", (int)V,
                          (int)s->max_vocab);
    if (k < 1)
        return sift__fail(err, SIFT_E_ARG, "k must be >= 1, got %d", (int)k);
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return sift__fail_at(err, SIFT_E_TOKEN, ids[i],
                                 "extra id %d (entry %zu) is outside "
                                 "[0, %d)",
                                 (int)ids[i], i, (int)V);
    sift_status st = reserve(s, V, err);
    if (st)
        return st;
    if (k > V)
        k = V;
    sift__ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.ws = &s->ws;
    ctx.err = err;
    ctx.V = V;
    sift_candidate *p = s->ws.cand;
    if (k < V) {
        if ((st = sift__row_prefix(&ctx, row, V, (size_t)k, p)))
            return st;
    } else {
        if ((st = sift__row_error(row, V, err)))
            return st;
        for (int32_t i = 0; i < V; i++) {
            p[i].id = i;
            p[i].logit = row[i];
        }
        sift__sort_canon(p, (size_t)V, s->ws.cand2);
    }
    /* Extras: unique ids that rank after the prefix's last token. */
    size_t ne = 0;
    if (n_ids > 0 && k < V) {
        int32_t *tmp = (int32_t *)s->ws.u32;
        size_t m = n_ids < (size_t)V ? n_ids : (size_t)V;
        size_t used = 0;
        /* More ids than V means duplicates; dedupe in chunks of V. */
        for (size_t off = 0; off < n_ids; off += m) {
            size_t len = n_ids - off < m ? n_ids - off : m;
            memcpy(tmp, ids + off, len * sizeof *tmp);
            used = len;
            qsort(tmp, used, sizeof *tmp, cmp_i32);
            uint64_t bkey = sift__ckey(p[k - 1].logit, p[k - 1].id);
            for (size_t i = 0; i < used; i++) {
                if (i > 0 && tmp[i] == tmp[i - 1])
                    continue;
                sift_candidate x = {tmp[i], row[tmp[i]]};
                if (sift__ckey(x.logit, x.id) >= bkey)
                    continue;
                int dup = 0; /* against an earlier chunk */
                for (size_t j = 0; off > 0 && j < ne && !dup; j++)
                    dup = s->ext[j].id == x.id;
                if (!dup)
                    s->ext[ne++] = x;
            }
        }
    }
    slice->n_vocab = V;
    slice->n_prefix = k;
    slice->prefix = p;
    slice->n_extras = (int32_t)ne;
    slice->extras = ne ? s->ext : NULL;
    slice->flags = SIFT_SLICE_CANONICAL;
    return SIFT_OK;
}

/*
 * workspace.c - the chain's scratch buffers (sift__ws).
 *
 * Invariants: the buffers are sized on the first step for a given V and
 * only grow; no step after the first allocates. A failed resize leaves
 * the old buffers in place.
 */
#include "../sift_internal.h"

void sift__ws_free(sift__ws *ws, const sift__alloc *al)
{
    sift__free(al, ws->cand);
    sift__free(al, ws->cand2);
    sift__free(al, ws->u64a);
    sift__free(al, ws->u64b);
    sift__free(al, ws->u64c);
    sift__free(al, ws->u64d);
    sift__free(al, ws->f64);
    sift__free(al, ws->u32);
    memset(ws, 0, sizeof *ws);
}

sift_status sift__ws_reserve(sift__ws *ws, const sift__alloc *al, size_t n, sift_error *err)
{
    if (n <= ws->cap)
        return SIFT_OK;
    sift__ws w;
    memset(&w, 0, sizeof w);
    w.cap = n;
    w.cand = sift__malloc(al, n, sizeof *w.cand);
    w.cand2 = sift__malloc(al, n, sizeof *w.cand2);
    w.u64a = sift__malloc(al, n, sizeof *w.u64a);
    w.u64b = sift__malloc(al, n, sizeof *w.u64b);
    w.u64c = sift__malloc(al, n, sizeof *w.u64c);
    w.u64d = sift__malloc(al, n, sizeof *w.u64d);
    w.f64 = sift__malloc(al, n, sizeof *w.f64);
    w.u32 = sift__malloc(al, n, sizeof *w.u32);
    if (!w.cand || !w.cand2 || !w.u64a || !w.u64b || !w.u64c || !w.u64d || !w.f64 || !w.u32) {
        sift__ws_free(&w, al);
        return sift__fail(err, SIFT_E_NOMEM,
                          "out of memory while sizing scratch buffers for %zu tokens", n);
    }
    sift__ws_free(ws, al);
    *ws = w;
    return SIFT_OK;
}

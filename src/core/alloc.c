/*
 * alloc.c - the per-object allocator hook.
 *
 * Every allocation sift makes goes through a sift__alloc that an object
 * carries; there is no global allocator and no global setter. Sizes are
 * checked for multiplication overflow before any call. Every growable
 * buffer grows through sift__grow, the one place that uses the hook's
 * optional realloc (or alloc + copy + free without one); every array that
 * grows by doubling does so through sift__reserve, the one growable array
 * of src/ (its capacity policy, overflow checks and failure rule).
 *
 * A caller's allocator is caller code: while it runs, the object it
 * serves (sift__alloc.hold) is busy, so an allocator that calls back into
 * that object gets SIFT_E_STATE from whichever entry point allocated.
 * The default allocator runs no caller code and holds nothing.
 */
#include <stdlib.h>

#include "../sift_internal.h"

static void *default_alloc(void *user, size_t size)
{
    (void)user;
    return malloc(size);
}

static void default_free(void *user, void *ptr)
{
    (void)user;
    free(ptr);
}

/* The C library's realloc: a large block (a grammar's transition table)
 * is moved by remapping its pages, not copied and touched again. */
static void *default_realloc(void *user, void *ptr, size_t old_size, size_t new_size)
{
    (void)user;
    (void)old_size;
    return realloc(ptr, new_size);
}

sift_status sift__alloc_init(sift__alloc *al, const sift_allocator *user, sift_error *err)
{
    memset(&al->a, 0, sizeof al->a);
    al->hold = NULL;
    al->a.struct_size = (uint32_t)sizeof al->a;
    if (!user) {
        al->a.alloc = default_alloc;
        al->a.free = default_free;
        al->a.realloc = default_realloc;
        return SIFT_OK;
    }
    sift_status s = sift__check_struct_size(err, "sift_allocator", user->struct_size, sizeof *user);
    if (s)
        return s;
    sift_allocator in;
    memset(&in, 0, sizeof in);
    memcpy(&in, user, user->struct_size);
    if (!in.alloc != !in.free)
        return sift__fail(err, SIFT_E_ARG, "sift_allocator has %s but no %s",
                          in.alloc ? "alloc" : "free", in.alloc ? "free" : "alloc");
    if (!in.alloc) {
        /* Neither: the defaults (a realloc alone is ignored with them). */
        al->a.alloc = default_alloc;
        al->a.free = default_free;
        al->a.realloc = default_realloc;
        return SIFT_OK;
    }
    al->a = in;
    al->a.struct_size = (uint32_t)sizeof al->a;
    return SIFT_OK;
}

/* Counts the served object busy around a call into a caller's hook. */
static void hold(const sift__alloc *al)
{
    if (al->hold && al->a.alloc != default_alloc)
        ++*al->hold;
}

static void release(const sift__alloc *al)
{
    if (al->hold && al->a.alloc != default_alloc)
        --*al->hold;
}

void *sift__malloc(const sift__alloc *al, size_t n, size_t size)
{
    if (n == 0 || size == 0)
        n = size = 1;
    if (n > SIZE_MAX / size)
        return NULL;
    hold(al);
    void *p = al->a.alloc(al->a.user, n * size);
    release(al);
    return p;
}

/* With the default allocator, calloc: for a large block the C library
 * takes zeroed pages from the system, which cost nothing until touched
 * (a chain's V-sized id set, say, of which a step touches k entries). */
void *sift__calloc(const sift__alloc *al, size_t n, size_t size)
{
    if (al->a.alloc == default_alloc) {
        if (n == 0 || size == 0)
            n = size = 1;
        return n > SIZE_MAX / size ? NULL : calloc(n, size);
    }
    void *p = sift__malloc(al, n, size);
    if (p)
        memset(p, 0, (n && size) ? n * size : 1);
    return p;
}

void sift__free(const sift__alloc *al, void *p)
{
    if (!p)
        return;
    hold(al);
    al->a.free(al->a.user, p);
    release(al);
}

char *sift__memdup(const sift__alloc *al, const void *p, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    char *d = sift__calloc(al, n + 1, 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

void *sift__grow(const sift__alloc *al, void *p, size_t n_used, size_t old_cap, size_t new_cap,
                 size_t esz)
{
    if (new_cap == 0 || esz == 0 || new_cap > SIZE_MAX / esz || n_used > old_cap)
        return NULL;
    if (p && old_cap && al->a.realloc) {
        hold(al);
        void *q = al->a.realloc(al->a.user, p, old_cap * esz, new_cap * esz);
        release(al);
        return q;
    }
    void *q = sift__malloc(al, new_cap, esz);
    if (!q)
        return NULL;
    if (p && n_used)
        memcpy(q, p, (n_used < new_cap ? n_used : new_cap) * esz);
    sift__free(al, p);
    return q;
}

sift_status sift__reserve(const sift__alloc *al, void *arr, size_t *cap, size_t used, size_t need,
                          size_t esz, size_t first)
{
    if (need <= *cap)
        return SIFT_OK;
    if (esz == 0 || used > *cap)
        return SIFT_E_NOMEM;
    size_t c = *cap ? *cap : (first ? first : 1);
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return SIFT_E_NOMEM;
        c *= 2;
    }
    if (c > SIZE_MAX / esz)
        return SIFT_E_NOMEM;
    /* `arr` is a T ** for some T; the pointer is read and written with
     * memcpy, which is defined for any object pointer type. */
    void *old;
    memcpy(&old, arr, sizeof old);
    unsigned char *q = sift__grow(al, old, used, *cap, c, esz);
    if (!q)
        return SIFT_E_NOMEM;
    memset(q + used * esz, 0, (c - used) * esz);
    void *p = q;
    memcpy(arr, &p, sizeof p);
    *cap = c;
    return SIFT_OK;
}

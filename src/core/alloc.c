/*
 * alloc.c - the per-object allocator hook.
 *
 * Every allocation sift makes goes through a sift__alloc that an object
 * carries; there is no global allocator and no global setter. Sizes are
 * checked for multiplication overflow before any call.
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

void sift__alloc_init(sift__alloc *al, const sift_allocator *user)
{
    if (user && user->alloc && user->free) {
        al->a = *user;
    } else {
        al->a.alloc = default_alloc;
        al->a.free = default_free;
        al->a.user = NULL;
    }
}

void *sift__malloc(const sift__alloc *al, size_t n, size_t size)
{
    if (n == 0 || size == 0)
        n = size = 1;
    if (n > SIZE_MAX / size)
        return NULL;
    return al->a.alloc(al->a.user, n * size);
}

void *sift__calloc(const sift__alloc *al, size_t n, size_t size)
{
    void *p = sift__malloc(al, n, size);
    if (p)
        memset(p, 0, (n && size) ? n * size : 1);
    return p;
}

void sift__free(const sift__alloc *al, void *p)
{
    if (p)
        al->a.free(al->a.user, p);
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

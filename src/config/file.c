/*
 * file.c - the files a configuration reads.
 *
 * What it owns: resolving a path against the config's base directory and
 * reading a regular file of at most a given size (the config itself and
 * the grammar files it names) through the one file helper, core/file.c.
 * Messages go to the caller's buffer; this file calls nothing else of
 * src/config/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

/* Joins base_dir and path unless path is absolute or base_dir empty. */
static char *resolve(const sift__alloc *al, const char *base, const char *path)
{
    if (path[0] == '/' || !base || !base[0])
        return sift__memdup(al, path, strlen(path));
    size_t nb = strlen(base), np = strlen(path);
    char *r = sift__malloc(al, nb + np + 2, 1);
    if (!r)
        return NULL;
    memcpy(r, base, nb);
    r[nb] = '/';
    memcpy(r + nb + 1, path, np + 1);
    return r;
}

/* Reads a regular file of at most cap bytes through the one file helper
 * (core/file.c: no blocking, regular files only). The message names the
 * path first; a file over cap is SIFT_E_CONFIG_LIMIT. */
sift_status sift__cfg_read_capped(const sift__alloc *al, const char *path, size_t cap, char **data,
                                  size_t *len, char *msg, size_t msg_cap)
{
    sift_error e;
    sift_status st = sift__file_read(al, path, cap, data, len, &e);
    if (st == SIFT_OK)
        return SIFT_OK;
    snprintf(msg, msg_cap, "%s", e.message);
    return st == SIFT_E_LIMIT ? SIFT_E_CONFIG_LIMIT : st;
}

sift_status sift__cfg_read_file(const sift_config *cfg, const char *path, char **resolved,
                                char **data, size_t *len, char *msg, size_t msg_cap)
{
    *resolved = resolve(&cfg->al, cfg->base_dir, path);
    if (!*resolved) {
        snprintf(msg, msg_cap, "out of memory");
        return SIFT_E_NOMEM;
    }
    return sift__cfg_read_capped(&cfg->al, *resolved, cfg->params.max_bytes, data, len, msg,
                                 msg_cap);
}

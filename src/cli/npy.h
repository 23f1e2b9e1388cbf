/*
 * npy.h - a small, bounded reader for NumPy .npy files of logits.
 *
 * Accepts format versions 1.0, 2.0 and 3.0 holding little-endian float32
 * ('<f4') in C order with shape (steps, V) or (V,). Nothing in the file is
 * trusted: the header length, the shape and the data size are checked
 * against the file's real size before anything is allocated from them.
 */
#ifndef SIFT_CLI_NPY_H
#define SIFT_CLI_NPY_H

#include <stddef.h>
#include <stdint.h>

/* The largest row length accepted (the library's own limit, 2^24). */
#define NPY_MAX_VOCAB (1 << 24)
/* The largest file read (1 GiB): a guard against mistaken paths. */
#define NPY_MAX_BYTES ((int64_t)1 << 30)

typedef struct npy_rows {
    float *data;     /* steps * n_vocab floats, row-major; malloc'ed */
    int64_t steps;   /* number of rows (1 for a 1-D file) */
    int32_t n_vocab; /* row length V */
    int one_d;       /* 1 if the file's shape was (V,) */
} npy_rows;

/* Loads `path` into *out. Returns 0 on success; 1 for a malformed or
 * unsupported file (msg names the byte offset); 2 when the file cannot be
 * opened or read, or memory runs out. On failure *out is zeroed. */
int npy_load(const char *path, npy_rows *out, char *msg, size_t msg_cap);

/* Parses an in-memory .npy image; same contract as npy_load. */
int npy_parse(const unsigned char *buf, size_t len, npy_rows *out, char *msg, size_t msg_cap);

/* Frees the rows; a zeroed struct is a no-op. */
void npy_free(npy_rows *rows);

#endif

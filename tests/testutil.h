/*
 * testutil.h - shared helpers for the Check suites: a test RNG, the row
 * generators (random and adversarial), a device-style slice, the chains
 * most tests start from, the JSON Schema suites' compile-and-match
 * helpers, and small assertions.
 */
#ifndef SIFT_TESTUTIL_H
#define SIFT_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "sift.h"

typedef struct tu_rng {
    uint64_t s;
} tu_rng;

uint64_t tu_next(tu_rng *r);
/* uniform in [0, 1) */
double tu_unif(tu_rng *r);
/* uniform integer in [lo, hi] */
int64_t tu_range(tu_rng *r, int64_t lo, int64_t hi);
double tu_normal(tu_rng *r);
/* x rounded to bfloat16 (nearest even), returned as a float */
float tu_bf16(float x);

/* Row shapes, each adversarial in its own way. */
enum {
    TU_ROW_NORMAL = 0, /* N(0, s) with a random scale, like model logits */
    TU_ROW_PEAKED,     /* a few large logits over a flat tail */
    TU_ROW_TIES,       /* few distinct values: ties at every boundary */
    TU_ROW_NEG_INF,    /* runs of -inf among normal values */
    TU_ROW_BF16,       /* normal values rounded to bf16 */
    TU_ROW_NEAR_EQUAL, /* values one ulp apart: collapse under temperature */
    TU_ROW_ALL_EQUAL,  /* one value everywhere */
    TU_ROW_HUGE,       /* magnitudes near the float limits */
    TU_ROW__COUNT
};

/* Fills row[0..V) with a row of the given shape; never NaN or +inf,
 * always at least one finite value. */
void tu_row(tu_rng *r, float *row, int32_t V, int shape);
/* A random vocabulary size: mostly small, sometimes up to max_V. */
int32_t tu_rand_V(tu_rng *r, int32_t max_V);

/* What a device top-k (torch.topk, CUB, FlashInfer) may hand sift instead
 * of the slicer's canonical prefix: the same k largest logits as a set,
 * with the tokens tied at the smallest of them re-chosen at random among
 * every token of the row with that logit, the whole prefix shuffled, and
 * the extras rebuilt for the new set (the requested ids it lacks). The
 * buffers hold V entries; the slice points into them until the next
 * tu_devicify on the same tu_device_slice. */
typedef struct tu_device_slice {
    sift_candidate *pre, *ext;
    int32_t *tied;
    long rechosen; /* slices whose tied tokens changed */
} tu_device_slice;

/* Buffers for rows of up to V tokens and rechosen = 0. Returns 0 when an
 * allocation fails (tu_device_free is still safe then). */
int tu_device_init(tu_device_slice *d, int32_t V);
void tu_device_free(tu_device_slice *d);
/* Turns s, a canonical slice of row[0..V) built with the requested extra
 * ids[0..ne), into a device one: shuffled, its boundary ties re-chosen,
 * its extras rebuilt, flags 0 (no canonical promise, no tail mass: the
 * re-chosen set may leave out a token the old one held as an extra).
 * Draws from r; counts a change of tied tokens in d->rechosen. */
void tu_devicify(tu_device_slice *d, tu_rng *r, const float *row, int32_t V, sift_slice *s,
                 const int32_t *ids, size_t ne);

/* A chain with the default parameters but seed and allocator al (NULL:
 * malloc). Fails the running Check test when sift_chain_new fails. */
sift_chain *tu_chain_new(uint64_t seed, const sift_allocator *al);
/* tu_chain_new's chain with penalties (last 16, repeat 1.3, frequency
 * 0.1, presence 0.2), top_k 8, temp 0.9 and dist, after the five prompt
 * tokens 0, 3, 6, 9, 12: a short chain of every kind of stage. */
sift_chain *tu_small_chain(uint64_t seed, const sift_allocator *al);

/* The parameters the JSON Schema suites compile with: the defaults with
 * compact whitespace. */
sift_json_schema_params tu_schema_compact(void);
/* The grammar of `schema` under tu_schema_compact(); fails the running
 * Check test (naming the schema and the message) when it does not
 * compile. */
sift_grammar *tu_schema_compile(const char *schema);
/* 1 when g, reset, takes the whole of text and is complete at its end. */
int tu_accepts(sift_grammar *g, const char *text);
/* Fails the running test unless the grammar of `schema` accepts every
 * good[i] and rejects every bad[i] (whole JSON texts). */
void tu_schema_check(const char *schema, const char *const *good, size_t ng, const char *const *bad,
                     size_t nb);
/* tu_schema_check over two arrays. */
#define TU_SCHEMA_CHECK(schema, good, bad)                                     \
    tu_schema_check((schema), (good), sizeof(good) / sizeof((good)[0]), (bad), \
                    sizeof(bad) / sizeof((bad)[0]))

/* SHA-256 of data[0..n) into out[32] (FIPS 180-4), so tests can check
 * the data files they read without a new dependency. */
void tu_sha256(const void *data, size_t n, unsigned char out[32]);
/* The same digest as 64 lowercase hex digits and a NUL. */
void tu_sha256_hex(const void *data, size_t n, char out[65]);

#endif

/*
 * batch_k.c - a batch of slots sampled together, one k per batch.
 *
 * Each slot has its own chain (its own history, RNG and settings). Before
 * each batched step the runtime asks sift for the k of the whole batch:
 * the largest k any slot needs now, or 0 if one slot needs whole rows.
 * Then it copies k candidates per slot (plus each slot's extras) and each
 * chain samples from its slice.
 */
#include <stdio.h>
#include <stdlib.h>

#include <sift.h>

#define V 32000
#define SLOTS 4
#define STEPS 16

static float rows[SLOTS][V];

static void device_rows(int t)
{
    for (int s = 0; s < SLOTS; s++) {
        unsigned x = 40503u * (unsigned)(t + 1) + 977u * (unsigned)s;
        for (int i = 0; i < V; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            rows[s][i] = (float)(x % 1000) / 200.0f;
        }
        rows[s][(t * 31 + s) % V] = 12.0f;
    }
}

int main(void)
{
    sift_error err;
    sift_chain *slot[SLOTS] = {NULL};
    sift_slicer *slicer = NULL;
    int rc = 1;
    for (int s = 0; s < SLOTS; s++) {
        sift_chain_params p;
        sift_chain_params_init(&p);
        p.seed = (uint64_t)s;
        if (sift_chain_new(&slot[s], &p, &err) ||
            sift_chain_add_penalties(slot[s], 16 * (s + 1), 1.2f, 0.0f, 0.0f, &err) ||
            sift_chain_add_top_k(slot[s], 10 + 10 * s, &err) ||
            sift_chain_add_dist(slot[s], &err)) {
            fprintf(stderr, "slot %d: %s\n", s, err.message);
            goto done;
        }
    }
    if (sift_slicer_new(&slicer, V, NULL, &err))
        goto done;
    for (int t = 0; t < STEPS; t++) {
        device_rows(t);
        int32_t k;
        if (sift_chains_next_k((const sift_chain *const *)slot, SLOTS, &k, &err))
            goto done;
        printf("step %2d: batch k = %d, tokens", t, (int)k);
        for (int s = 0; s < SLOTS; s++) {
            int32_t tok;
            sift_slice slice;
            sift_status st =
                k > 0 ? sift_slicer_build(slicer, rows[s], V, k, NULL, 0, &slice, &err) : SIFT_OK;
            if (!st)
                st = k > 0 ? sift_chain_sample_slice(slot[s], &slice, &tok, &err)
                           : sift_chain_sample(slot[s], rows[s], V, &tok, &err);
            if (st || sift_chain_accept(slot[s], tok, &err)) {
                fprintf(stderr, "slot %d: %s\n", s, err.message);
                goto done;
            }
            printf(" %d", (int)tok);
        }
        printf("\n");
    }
    rc = 0;
done:
    sift_slicer_free(slicer);
    for (int s = 0; s < SLOTS; s++)
        sift_chain_free(slot[s]);
    return rc;
}

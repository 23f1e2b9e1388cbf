/*
 * batch_k.c - a batch of slots sampled together, one k per batch.
 *
 * Each slot has its own chain (its own history, RNG and settings). Before
 * each batched step the runtime asks sift for the batch's plan
 * (sift_chains_next_k_batch): each slot's k, the largest k among the
 * slots that can use a slice, and the slots that need whole rows. Then it
 * copies that one k of candidates for every slice slot (plus each slot's
 * extras) and whole rows only for the listed slots. Slot 3 here runs
 * typical sampling before dist, which reads the entropy of the whole
 * distribution: it needs whole rows every step, and the other slots
 * still get slices.
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
            (s < SLOTS - 1 ? sift_chain_add_top_k(slot[s], 10 + 10 * s, &err)
                           : sift_chain_add_typical(slot[s], 0.9f, 1, &err)) ||
            sift_chain_add_dist(slot[s], &err)) {
            fprintf(stderr, "slot %d: %s\n", s, err.message);
            goto done;
        }
    }
    if (sift_slicer_new(&slicer, V, NULL, &err))
        goto done;
    long copied = 0, whole_bytes = 0;
    for (int t = 0; t < STEPS; t++) {
        device_rows(t);
        int32_t k_each[SLOTS];
        size_t whole[SLOTS];
        sift_batch_k batch = {.struct_size = sizeof batch};
        if (sift_chains_next_k_batch((const sift_chain *const *)slot, SLOTS, k_each, whole, &batch,
                                     &err))
            goto done;
        printf("step %2d: batch k = %d for %zu slots, whole rows for %zu (slot", t, (int)batch.k,
               batch.n_slice, batch.n_whole);
        for (size_t w = 0; w < batch.n_whole; w++)
            printf(" %zu", whole[w]);
        printf("), tokens");
        size_t next_whole = 0;
        for (int s = 0; s < SLOTS; s++) {
            int32_t tok;
            sift_slice slice;
            sift_status st;
            int use_row = next_whole < batch.n_whole && whole[next_whole] == (size_t)s;
            if (use_row) {
                next_whole++;
                copied += (long)V * (long)sizeof(float);
                st = sift_chain_sample(slot[s], rows[s], V, &tok, &err);
            } else {
                /* one device top-k of batch.k serves every slice slot */
                copied += (long)batch.k * (long)sizeof(sift_candidate);
                st = sift_slicer_build(slicer, rows[s], V, batch.k, NULL, 0, &slice, &err);
                if (!st)
                    st = sift_chain_sample_slice(slot[s], &slice, &tok, &err);
            }
            whole_bytes += (long)V * (long)sizeof(float);
            if (st || sift_chain_accept(slot[s], tok, &err)) {
                fprintf(stderr, "slot %d: %s\n", s, err.message);
                goto done;
            }
            printf(" %d", (int)tok);
        }
        printf("\n");
    }
    printf("copied %ld bytes, whole rows for every slot: %ld bytes\n", copied, whole_bytes);
    rc = 0;
done:
    sift_slicer_free(slicer);
    for (int s = 0; s < SLOTS; s++)
        sift_chain_free(slot[s]);
    return rc;
}

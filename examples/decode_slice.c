/*
 * decode_slice.c - a decode loop that copies only the top of each row.
 *
 * Plans once, then per step gathers a slice (the canonical top k plus the
 * extras the chain asks for), samples from it with the row hook set, and
 * checks each token against sampling the whole row with a twin chain.
 * A made-up "device" row stands in for the model; sift's slice builder
 * stands in for the device's top-k kernel. A second loop samples an
 * OpenAI-style temperature + top_p chain from slices that carry a
 * tail-mass bound.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sift.h>

#define V 50000
#define STEPS 64

static float logits[V];

/* The device's row for step t (deterministic, a few peaked tokens). */
static void device_row(int t)
{
    unsigned s = 2166136261u ^ (unsigned)t;
    for (int i = 0; i < V; i++) {
        s = s * 1664525u + 1013904223u;
        logits[i] = (float)((s >> 9) % 2000) / 400.0f;
    }
    for (int j = 0; j < 5; j++)
        logits[(t * 7919 + j * 104729) % V] = 9.0f + (float)j;
}

/* The row hook: a runtime would copy the whole row off the device here. */
static int fetch_row(void *user, float *row, int32_t n)
{
    int *calls = user;
    (*calls)++;
    memcpy(row, logits, (size_t)n * sizeof *row);
    return 0;
}

static int fail(const char *what, const sift_error *err)
{
    fprintf(stderr, "%s: %s\n", what, err->message);
    return 1;
}

static sift_status build(sift_chain **c, sift_error *err)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 7;
    sift_bias bias[1] = {{123, 4.0f}}; /* a raised token: gathered as an extra */
    sift_status s;
    if ((s = sift_chain_new(c, &p, err)) || (s = sift_chain_add_logit_bias(*c, bias, 1, err)) ||
        (s = sift_chain_add_penalties(*c, 64, 1.1f, 0.0f, 0.0f, err)) ||
        (s = sift_chain_add_top_k(*c, 20, err)) || (s = sift_chain_add_top_p(*c, 0.95f, 1, err)) ||
        (s = sift_chain_add_temp(*c, 0.8f, err)) || (s = sift_chain_add_dist(*c, err)))
        return s;
    return SIFT_OK;
}

/* What a device computes in the pass of its top-k for a tail-mass bound:
 * the sum of exp(l - max) over the tokens the slice leaves out, rounded
 * up (docs/analyzer.md, "Tail mass"). */
static double tail_mass(const sift_slice *sl)
{
    static unsigned char in[V];
    memset(in, 0, sizeof in);
    for (int32_t i = 0; i < sl->n_prefix; i++)
        in[sl->prefix[i].id] = 1;
    for (int32_t i = 0; i < sl->n_extras; i++)
        in[sl->extras[i].id] = 1;
    double m = sl->prefix[0].logit, sum = 0;
    for (int i = 0; i < V; i++)
        if (!in[i])
            sum += exp((double)logits[i] - m);
    return sum * (1.0 + 1e-9);
}

/* The most common OpenAI-style request, temperature + top_p: slices with
 * a tail-mass bound decide it without the whole row. */
static int openai_loop(sift_slicer *slicer)
{
    sift_error err;
    sift_chain *c = NULL, *twin = NULL;
    int rc = 1, hook_calls = 0, same = 0;
    for (int i = 0; i < 2; i++) {
        sift_chain_params p;
        sift_chain_params_init(&p);
        p.seed = 11;
        sift_chain **x = i ? &twin : &c;
        if (sift_chain_new(x, &p, &err) || sift_chain_add_temp(*x, 0.7f, &err) ||
            sift_chain_add_top_p(*x, 0.9f, 1, &err) || sift_chain_add_dist(*x, &err)) {
            fail("build", &err);
            goto done;
        }
    }
    sift_plan plan = {.struct_size = sizeof(sift_plan)};
    if (sift_chain_plan(c, &plan, NULL, &err) ||
        sift_chain_set_row_hook(c, fetch_row, &hook_calls, &err)) {
        fail("setup", &err);
        goto done;
    }
    printf("temperature 0.7 + top_p 0.9: k = %d (%s): %s\n", (int)plan.k,
           sift_guarantee_str(plan.guarantee), plan.why);
    for (int t = 0; t < STEPS; t++) {
        /* a row with a clearer head (a confident step): on a flat bulk
         * the nucleus reaches into the tokens left out, and the row is
         * fetched (docs/analyzer.md, "Tail mass") */
        device_row(t);
        for (int i = 0; i < V; i++)
            if (logits[i] < 9.0f)
                logits[i] -= 3.0f;
        sift_slice slice;
        int32_t tok, ref;
        if (sift_slicer_build(slicer, logits, V, plan.k, NULL, 0, &slice, &err)) {
            fail("step", &err);
            goto done;
        }
        slice.flags |= SIFT_SLICE_TAIL_MASS;
        slice.tail_mass = tail_mass(&slice);
        if (sift_chain_sample_slice(c, &slice, &tok, &err) ||
            sift_chain_sample(twin, logits, V, &ref, &err) || sift_chain_accept(c, tok, &err) ||
            sift_chain_accept(twin, ref, &err)) {
            fail("step", &err);
            goto done;
        }
        same += tok == ref;
    }
    printf("steps %d, exact %d/%d, hook calls %d, bytes copied per step %d (whole row %d)\n", STEPS,
           same, STEPS, hook_calls, (int)(plan.k * sizeof(sift_candidate) + 8),
           (int)(V * sizeof(float)));
    rc = same == STEPS ? 0 : 1;
done:
    sift_chain_free(twin);
    sift_chain_free(c);
    return rc;
}

int main(void)
{
    sift_error err;
    sift_chain *chain = NULL, *twin = NULL;
    sift_slicer *slicer = NULL;
    int rc = 1, hook_calls = 0, same = 0;
    if (build(&chain, &err) || build(&twin, &err))
        return fail("build", &err);
    sift_plan plan = {.struct_size = sizeof(sift_plan)};
    if (sift_chain_plan(chain, &plan, NULL, &err) ||
        sift_chain_set_row_hook(chain, fetch_row, &hook_calls, &err) ||
        sift_slicer_new(&slicer, V, NULL, &err)) {
        fail("setup", &err);
        goto done;
    }
    printf("plan: k = %d (%s): %s\n", (int)plan.k, sift_guarantee_str(plan.guarantee), plan.why);
    int32_t *ids = malloc((size_t)(plan.max_extras > 0 ? plan.max_extras : 1) * sizeof *ids);
    for (int t = 0; ids && t < STEPS; t++) {
        device_row(t);
        sift_plan next = {.struct_size = sizeof(sift_plan)};
        size_t n_ids = 0;
        sift_slice slice;
        int32_t tok, ref;
        if (sift_chain_next_k(chain, &next, &err) ||
            sift_chain_extras(chain, ids, (size_t)plan.max_extras, &n_ids, &err) ||
            sift_slicer_build(slicer, logits, V, next.k, ids, n_ids, &slice, &err) ||
            sift_chain_sample_slice(chain, &slice, &tok, &err) ||
            sift_chain_sample(twin, logits, V, &ref, &err) || sift_chain_accept(chain, tok, &err) ||
            sift_chain_accept(twin, ref, &err)) {
            fail("step", &err);
            goto done;
        }
        same += tok == ref;
    }
    printf("steps %d, exact %d/%d, hook calls %d\n", STEPS, same, STEPS, hook_calls);
    rc = same == STEPS ? 0 : 1;
    free(ids);
    if (rc == 0)
        rc = openai_loop(slicer);
done:
    sift_slicer_free(slicer);
    sift_chain_free(twin);
    sift_chain_free(chain);
    return rc;
}

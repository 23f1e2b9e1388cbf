/*
 * logprobs_slice.c - a slice decode loop that returns logprobs with every
 * token, as a server does for `logprobs` / `top_logprobs`.
 *
 * Per step the "device" hands over the top k of its row (sift's slice
 * builder stands in for its top-k kernel) and the row's log-sum-exp (one
 * more float64 reduction in the same pass); sift samples from the slice
 * and reports, in the same call, the token's raw logprob (the row's
 * log-softmax, what OpenAI and vLLM return by default) and processed one
 * (after the chain), with the top 3 of each. A twin chain fed whole rows
 * checks every token and value.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <sift.h>

#define V 32000
#define STEPS 16
#define NTOP 3

static float logits[V];

static void device_row(int t)
{
    unsigned s = 2166136261u ^ (unsigned)t;
    for (int i = 0; i < V; i++) {
        s = s * 1664525u + 1013904223u;
        logits[i] = (float)((s >> 9) % 2000) / 300.0f;
    }
    for (int j = 0; j < 6; j++)
        logits[(t * 7919 + j * 104729) % V] = 8.0f + 0.5f * (float)j;
}

/* What the device computes beside its top-k: ln(sum exp(l_i)) in float64. */
static double device_lse(void)
{
    double m = -INFINITY, sum = 0.0;
    for (int i = 0; i < V; i++)
        m = logits[i] > m ? logits[i] : m;
    for (int i = 0; i < V; i++)
        sum += exp((double)logits[i] - m);
    return m + log(sum);
}

static int fetch_row(void *user, float *row, int32_t n)
{
    (void)user;
    memcpy(row, logits, (size_t)n * sizeof *row);
    return 0;
}

static sift_status build(sift_chain **c, sift_error *err)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = 11;
    sift_status s;
    if ((s = sift_chain_new(c, &p, err)) ||
        (s = sift_chain_add_penalties(*c, 32, 1.1f, 0.0f, 0.0f, err)) ||
        (s = sift_chain_add_top_k(*c, 40, err)) || (s = sift_chain_add_temp(*c, 0.7f, err)) ||
        (s = sift_chain_add_dist(*c, err)))
        return s;
    return SIFT_OK;
}

int main(void)
{
    sift_error err;
    sift_chain *c = NULL, *twin = NULL;
    sift_slicer *slicer = NULL;
    if (build(&c, &err) || build(&twin, &err) || sift_slicer_new(&slicer, V, NULL, &err) ||
        sift_chain_set_row_hook(c, fetch_row, NULL, &err)) {
        fprintf(stderr, "setup: %s\n", err.message);
        return 1;
    }
    int bad = 0;
    for (int t = 0; t < STEPS && !bad; t++) {
        device_row(t);
        sift_plan plan = {.struct_size = sizeof plan};
        int32_t ids[256];
        size_t n_ids = 0;
        sift_slice slice;
        if (sift_chain_next_k(c, &plan, &err) || sift_chain_extras(c, ids, 256, &n_ids, &err) ||
            sift_slicer_build(slicer, logits, V, plan.k > 0 ? plan.k : V, ids, n_ids, &slice,
                              &err)) {
            fprintf(stderr, "step %d: %s\n", t, err.message);
            return 1;
        }
        sift_logprob raw_top[NTOP], proc_top[NTOP], raw_b[NTOP], proc_b[NTOP];
        sift_logprobs lp = {.struct_size = sizeof lp,
                            .flags =
                                SIFT_LOGPROBS_RAW | SIFT_LOGPROBS_PROCESSED | SIFT_LOGPROBS_ROW_LSE,
                            .n_top = NTOP,
                            .raw_top = raw_top,
                            .processed_top = proc_top,
                            .row_lse = device_lse()};
        sift_logprobs lb = lp;
        lb.raw_top = raw_b;
        lb.processed_top = proc_b;
        int32_t tok, tok_b;
        if (sift_chain_sample_slice_logprobs(c, &slice, &tok, &lp, &err) ||
            sift_chain_sample_logprobs(twin, logits, V, &tok_b, &lb, &err)) {
            fprintf(stderr, "step %d: %s\n", t, err.message);
            return 1;
        }
        /* the same token, the same processed values bit for bit, raw ones
         * within the float64 rounding of the two log-sum-exps */
        bad = tok != tok_b || memcmp(&lp.processed, &lb.processed, sizeof lp.processed) != 0 ||
              lp.n_processed_top != lb.n_processed_top ||
              memcmp(proc_top, proc_b, lp.n_processed_top * sizeof *proc_top) != 0 ||
              fabs(lp.raw.logprob - lb.raw.logprob) > 1e-9;
        printf("step %2d: token %5d  raw %7.3f  processed %7.3f  raw top", t, (int)tok,
               lp.raw.logprob, lp.processed.logprob);
        for (int i = 0; i < NTOP; i++)
            printf(" %d:%.3f", (int)raw_top[i].id, raw_top[i].logprob);
        printf("  processed top");
        for (size_t i = 0; i < lp.n_processed_top; i++)
            printf(" %d:%.3f", (int)proc_top[i].id, proc_top[i].logprob);
        printf("\n");
        if (sift_chain_accept(c, tok, &err) || sift_chain_accept(twin, tok_b, &err)) {
            fprintf(stderr, "accept: %s\n", err.message);
            return 1;
        }
    }
    sift_slicer_free(slicer);
    sift_chain_free(c);
    sift_chain_free(twin);
    if (bad) {
        fprintf(stderr, "the slice and the whole row disagree\n");
        return 1;
    }
    printf("%d steps: slice logprobs equal the whole row's\n", STEPS);
    return 0;
}

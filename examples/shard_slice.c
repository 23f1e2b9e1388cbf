/*
 * shard_slice.c - a decode loop over a vocabulary split across two
 * devices (tensor parallelism): each device takes a top-k of its half of
 * the row, in its own order, and the sum of the rest of its half
 * relative to its own maximum; the host merges the two lists into one
 * slice (sift_shards_merge) and samples from it.
 *
 * The chain is llama.cpp's default (top_k 40, top_p 0.95, min_p 0.05,
 * temperature 0.8) with a raised token, whose logit is gathered from the
 * device that holds it as an extra. Each token is checked against a twin
 * chain that samples the whole row. The rows are rounded to bf16, so
 * ties occur and some cross the split; the device k is the plan's
 * device_k (docs/analyzer.md, "The k a device slice needs").
 *
 * Logprobs come with each token (sift_chain_sample_slice_logprobs on the
 * merged slice). Raw ones need the whole row's log-sum-exp: each device
 * computes its half's in the same pass, and the host combines the two
 * (the log-sum-exp of the halves' log-sum-exps).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sift.h>

#define V 60000
#define HALF (V / 2)
#define STEPS 64
#define MAX_K 256
#define NTOP 3

static float logits[V];

/* x rounded to bfloat16 (nearest even), as a bf16 model's logits are. */
static float bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The model's row for step t (deterministic: a bell-shaped bulk and a few
 * peaked tokens on either half, rounded to bf16, so that ties occur and
 * some cross the split). */
static void model_row(int t)
{
    unsigned s = 2166136261u ^ (unsigned)t;
    for (int i = 0; i < V; i++) {
        float x = 0.0f;
        for (int j = 0; j < 4; j++) {
            s = s * 1664525u + 1013904223u;
            x += (float)(s >> 8) / 16777216.0f;
        }
        logits[i] = bf16(2.0f * (x - 2.0f));
    }
    for (int j = 0; j < 6; j++)
        logits[(t * 7919 + j * 104729) % V] = bf16(6.0f + 0.75f * (float)(j % 3));
}

/* One device's work on ids [lo, lo + n): the k largest logits as a set
 * (a simple selection stands in for the kernel; it keeps its own order,
 * not sift's), the rest's mass relative to its own maximum, rounded up,
 * and its ids' log-sum-exp ln(sum exp(l_i)) in float64. */
static void device_topk(int32_t lo, int32_t n, int32_t k, sift_candidate *out, double *tail,
                        double *lse)
{
    int32_t filled = 0;
    for (int32_t i = lo; i < lo + n; i++) {
        sift_candidate c = {i, logits[i]};
        if (filled < k) {
            out[filled++] = c;
            continue;
        }
        int32_t low = 0; /* replace the smallest held entry if c beats it */
        for (int32_t j = 1; j < k; j++)
            if (out[j].logit < out[low].logit)
                low = j;
        if (c.logit > out[low].logit)
            out[low] = c;
    }
    float m = out[0].logit;
    for (int32_t j = 1; j < k; j++)
        m = out[j].logit > m ? out[j].logit : m;
    static unsigned char in[V];
    for (int32_t j = 0; j < k; j++)
        in[out[j].id] = 1;
    double sum = 0, all = 0;
    for (int32_t i = lo; i < lo + n; i++) {
        double e = exp((double)logits[i] - (double)m);
        all += e;
        if (!in[i])
            sum += e;
    }
    for (int32_t j = 0; j < k; j++)
        in[out[j].id] = 0;
    *tail = sum * (1.0 + 1e-9);
    *lse = (double)m + log(all);
}

/* On the host: the whole row's log-sum-exp from the shards' own. */
static double combine_lse(const double *lse, int n)
{
    double m = lse[0], sum = 0;
    for (int d = 1; d < n; d++)
        m = lse[d] > m ? lse[d] : m;
    for (int d = 0; d < n; d++)
        sum += exp(lse[d] - m);
    return m + log(sum);
}

/* The row hook: a runtime would gather the whole row from both devices. */
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
    p.seed = 5;
    sift_bias bias[1] = {{HALF + 17, 3.0f}}; /* a raised token on device 1 */
    sift_status s;
    if ((s = sift_chain_new(c, &p, err)) || (s = sift_chain_add_logit_bias(*c, bias, 1, err)) ||
        (s = sift_chain_add_top_k(*c, 40, err)) || (s = sift_chain_add_top_p(*c, 0.95f, 1, err)) ||
        (s = sift_chain_add_min_p(*c, 0.05f, 1, err)) || (s = sift_chain_add_temp(*c, 0.8f, err)) ||
        (s = sift_chain_add_dist(*c, err)))
        return s;
    return SIFT_OK;
}

int main(void)
{
    sift_error err;
    sift_chain *chain = NULL, *twin = NULL;
    int rc = 1, hook_calls = 0, same = 0, same_lp = 0;
    static sift_candidate lists[2][MAX_K], buf[2 * (2 * MAX_K + 8)], extras[8];
    if (build(&chain, &err) || build(&twin, &err))
        return fail("build", &err);
    sift_plan plan = {.struct_size = sizeof(sift_plan)};
    if (sift_chain_plan(chain, &plan, NULL, &err) ||
        sift_chain_set_row_hook(chain, fetch_row, &hook_calls, &err)) {
        fail("setup", &err);
        goto done;
    }
    int32_t k = plan.device_k;
    printf("plan: k = %d (%s), device k = %d: %s\n", (int)plan.k,
           sift_guarantee_str(plan.guarantee), (int)k, plan.why);
    if (k < 1 || k > MAX_K || plan.max_extras > 8) {
        fprintf(stderr, "unexpected plan\n");
        goto done;
    }
    for (int t = 0; t < STEPS; t++) {
        model_row(t);
        /* on the devices: a top-k and a tail mass per half */
        sift_shard shards[2];
        double lse[2];
        for (int d = 0; d < 2; d++) {
            double tail;
            device_topk(d * HALF, HALF, k, lists[d], &tail, &lse[d]);
            shards[d] = (sift_shard){.struct_size = sizeof(sift_shard),
                                     .offset = d * HALF,
                                     .n_ids = HALF,
                                     .n_prefix = k,
                                     .prefix = lists[d],
                                     .flags = SIFT_SHARD_TAIL_MASS,
                                     .tail_mass = tail};
        }
        /* the extra ids the chain asks for, from the device holding each */
        int32_t ids[8];
        size_t n_ids = 0;
        sift_slice slice = {0};
        int32_t tok, ref;
        if (sift_chain_extras(chain, ids, 8, &n_ids, &err)) {
            fail("extras", &err);
            goto done;
        }
        for (size_t i = 0; i < n_ids; i++)
            extras[i] = (sift_candidate){ids[i], logits[ids[i]]};
        /* on the host: one slice, one sample with its logprobs */
        sift_logprob raw_top[NTOP], proc_top[NTOP], raw_ref[NTOP], proc_ref[NTOP];
        sift_logprobs lp = {.struct_size = sizeof lp,
                            .flags =
                                SIFT_LOGPROBS_RAW | SIFT_LOGPROBS_PROCESSED | SIFT_LOGPROBS_ROW_LSE,
                            .n_top = NTOP,
                            .raw_top = raw_top,
                            .processed_top = proc_top,
                            .row_lse = combine_lse(lse, 2)};
        sift_logprobs lr = lp; /* the twin's, on the whole row */
        lr.raw_top = raw_ref;
        lr.processed_top = proc_ref;
        if (sift_shards_merge(shards, 2, V, k, extras, (int32_t)n_ids, buf,
                              sizeof buf / sizeof *buf, &slice, &err) ||
            sift_chain_sample_slice_logprobs(chain, &slice, &tok, &lp, &err) ||
            sift_chain_sample_logprobs(twin, logits, V, &ref, &lr, &err) ||
            sift_chain_accept(chain, tok, &err) || sift_chain_accept(twin, ref, &err)) {
            fail("step", &err);
            goto done;
        }
        same += tok == ref;
        /* processed values bit for bit; raw ones within the float64
         * rounding of the two log-sum-exps */
        int ok = memcmp(&lp.processed, &lr.processed, sizeof lp.processed) == 0 &&
                 lp.n_processed_top == lr.n_processed_top &&
                 memcmp(proc_top, proc_ref, lp.n_processed_top * sizeof *proc_top) == 0 &&
                 lp.raw.id == lr.raw.id && fabs(lp.raw.logprob - lr.raw.logprob) <= 1e-9;
        for (int i = 0; i < NTOP; i++)
            ok = ok && raw_top[i].id == raw_ref[i].id &&
                 fabs(raw_top[i].logprob - raw_ref[i].logprob) <= 1e-9;
        same_lp += ok;
    }
    printf("steps %d, exact %d/%d, logprobs equal %d/%d, hook calls %d, candidates copied per "
           "step %d of %d\n",
           STEPS, same, STEPS, same_lp, STEPS, hook_calls, (int)(2 * k), V);
    rc = same == STEPS && same_lp == STEPS ? 0 : 1;
done:
    sift_chain_free(twin);
    sift_chain_free(chain);
    return rc;
}

/*
 * verify.c - speculative decoding: verify a draft of n tokens per slot in
 * one call, copying k candidates per position instead of whole rows.
 *
 * Four slots, each with its own chain (penalties 64/1.1, top_k 40, top_p
 * 0.95, min_p 0.05, temp 0.8, dist) at V = 151,936. Per verify step:
 *   1. sift_verifiers_plan: for every slot and every position 0..n, the
 *      k and the extras for the state after the drafts before it (no
 *      chain clone per step);
 *   2. "the device" copies k candidates + extras per position (sift's
 *      slice builder stands in for a device top-k);
 *   3. sift_chain_verify: drafts accepted and the corrected or bonus
 *      token; a position the slice cannot decide asks the row hook for
 *      that position's row.
 * A twin chain per slot runs the sequential sample/accept loop on whole
 * rows; every token must agree ("exact: N/N"). The draft model is a
 * stand-in that usually guesses the target's top token.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sift.h>

#define V 151936
#define SLOTS 4
#define MAXD 49
#define CAP 512 /* candidates one position may copy (k + extras) */

static float *rows[MAXD + 1];            /* the target model's rows of one slot */
static sift_candidate *copied[MAXD + 1]; /* what the device copied per position */
static unsigned rng_state = 12345u;

static unsigned next_u(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* A peaked row: a flat tail, a few likely tokens, one clear favourite. */
static void model_row(float *row, int32_t *top)
{
    for (int i = 0; i < V; i++)
        row[i] = (float)(next_u() % 4000) / 1000.0f;
    for (int j = 0; j < 4; j++)
        row[next_u() % V] = 9.0f + (float)j * 0.25f;
    *top = (int32_t)(next_u() % V);
    row[*top] = 16.0f;
}

typedef struct hook_ctx {
    int calls;
} hook_ctx;

static int row_at(void *user, int32_t position, float *row, int32_t n_vocab)
{
    ((hook_ctx *)user)->calls++;
    memcpy(row, rows[position], (size_t)n_vocab * sizeof *row);
    return 0;
}

static int make_chain(sift_chain **c, uint64_t seed, sift_error *err)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = seed;
    p.n_vocab = V;
    return sift_chain_new(c, &p, err) || sift_chain_add_penalties(*c, 64, 1.1f, 0.0f, 0.0f, err) ||
           sift_chain_add_top_k(*c, 40, err) || sift_chain_add_top_p(*c, 0.95f, 1, err) ||
           sift_chain_add_min_p(*c, 0.05f, 1, err) || sift_chain_add_temp(*c, 0.8f, err) ||
           sift_chain_add_dist(*c, err);
}

int main(void)
{
    sift_error err;
    memset(&err, 0, sizeof err);
    sift_chain *chain[SLOTS] = {NULL}, *twin[SLOTS] = {NULL};
    sift_verifier *ver[SLOTS] = {NULL};
    sift_slicer *slicer = NULL;
    static sift_verify_step steps[SLOTS][MAXD + 1];
    static int32_t drafts[SLOTS][MAXD];
    static int32_t tops[SLOTS][MAXD + 1];
    int rc = 1, all_exact = 1;
    for (int i = 0; i <= MAXD; i++) {
        rows[i] = malloc((size_t)V * sizeof *rows[i]);
        copied[i] = malloc(CAP * sizeof *copied[i]);
        if (!rows[i] || !copied[i])
            goto done;
    }
    for (int s = 0; s < SLOTS; s++)
        if (make_chain(&chain[s], (uint64_t)s, &err) || make_chain(&twin[s], (uint64_t)s, &err) ||
            sift_verifier_new(&ver[s], chain[s], MAXD, &err)) {
            fprintf(stderr, "slot %d: %s\n", s, err.message);
            goto done;
        }
    if (sift_slicer_new(&slicer, V, NULL, &err))
        goto done;
    const int32_t lengths[] = {3, 3, 49, 49, 3, 49};
    for (int t = 0; t < (int)(sizeof lengths / sizeof lengths[0]); t++) {
        int32_t n = lengths[t];
        /* The rows of every slot are regenerated from a per-step seed, so
         * the draft model's guesses can be made before the plan. */
        int32_t nd[SLOTS];
        const int32_t *dp[SLOTS];
        sift_verify_step *sp[SLOTS];
        unsigned seed_of[SLOTS];
        for (int s = 0; s < SLOTS; s++) {
            seed_of[s] = 2654435761u * (unsigned)(t * SLOTS + s + 1);
            rng_state = seed_of[s];
            for (int32_t i = 0; i <= n; i++)
                model_row(rows[i], &tops[s][i]);
            for (int32_t i = 0; i < n; i++) /* a guess that is right 90% of the time */
                drafts[s][i] = next_u() % 10 ? tops[s][i] : (int32_t)(next_u() % V);
            nd[s] = n;
            dp[s] = drafts[s];
            sp[s] = steps[s];
            steps[s][0].struct_size = sizeof steps[s][0];
        }
        int32_t k_max = 0;
        if (sift_verifiers_plan(ver, chain, dp, nd, SLOTS, sp, &k_max, &err)) {
            fprintf(stderr, "plan: %s\n", err.message);
            goto done;
        }
        printf("step %d: %2d drafts, batch k %d; accepted", t, (int)n, (int)k_max);
        long long bytes = 0, whole = 0;
        int hooks = 0, exact = 0, total = 0;
        for (int s = 0; s < SLOTS; s++) {
            rng_state = seed_of[s];
            for (int32_t i = 0; i <= n; i++)
                model_row(rows[i], &tops[s][i]);
            /* the device copy: k candidates + the extras per position */
            sift_slice sl[MAXD + 1];
            for (int32_t i = 0; i <= n; i++) {
                const sift_verify_step *st = &steps[s][i];
                int32_t k = st->k > 0 ? st->k : V;
                sift_slice b;
                if (sift_slicer_build(slicer, rows[i], V, k, st->extras, (size_t)st->n_extras, &b,
                                      &err))
                    goto done;
                if (b.n_prefix + b.n_extras > CAP) { /* a whole row: keep the slicer's */
                    fprintf(stderr, "position %d needs the whole row\n", (int)i);
                    goto done;
                }
                memcpy(copied[i], b.prefix, (size_t)b.n_prefix * sizeof *b.prefix);
                if (b.n_extras)
                    memcpy(copied[i] + b.n_prefix, b.extras, (size_t)b.n_extras * sizeof *b.extras);
                sl[i] = b;
                sl[i].prefix = copied[i];
                sl[i].extras = b.n_extras ? copied[i] + b.n_prefix : NULL;
                bytes += (long long)(b.n_prefix + b.n_extras) * (long long)sizeof(sift_candidate);
                whole += (long long)V * (long long)sizeof(float);
            }
            hook_ctx h = {0};
            sift_verify_args args;
            sift_verify_args_init(&args);
            args.drafts = drafts[s];
            args.n_drafts = n;
            args.slices = sl;
            args.hook = row_at;
            args.hook_user = &h;
            sift_verify_result res = {.struct_size = sizeof res};
            if (sift_chain_verify(chain[s], &args, &res, &err)) {
                fprintf(stderr, "slot %d: %s\n", s, err.message);
                goto done;
            }
            hooks += h.calls;
            bytes += (long long)h.calls * V * (long long)sizeof(float);
            /* the twin: the sequential loop on whole rows */
            for (int32_t i = 0; i <= res.n_accepted; i++) {
                int32_t tok;
                if (sift_chain_sample(twin[s], rows[i], V, &tok, &err) ||
                    sift_chain_accept(twin[s], tok, &err))
                    goto done;
                int want = i < res.n_accepted ? drafts[s][i] : res.token;
                int stop = i == n || tok != drafts[s][i];
                exact += tok == want && stop == (i == res.n_accepted);
                total++;
                if (stop)
                    break;
            }
            printf(" %2d", (int)res.n_accepted);
        }
        printf("; copied %lld bytes against %lld for whole rows (%.4f%%); hook calls %d; "
               "exact: %d/%d\n",
               bytes, whole, 100.0 * (double)bytes / (double)whole, hooks, exact, total);
        all_exact &= exact == total;
    }
    rc = all_exact ? 0 : 1;
done:
    if (rc && err.message[0])
        fprintf(stderr, "error: %s\n", err.message);
    for (int s = 0; s < SLOTS; s++) {
        sift_verifier_free(ver[s]);
        sift_chain_free(chain[s]);
        sift_chain_free(twin[s]);
    }
    sift_slicer_free(slicer);
    for (int i = 0; i <= MAXD; i++) {
        free(rows[i]);
        free(copied[i]);
    }
    return rc;
}

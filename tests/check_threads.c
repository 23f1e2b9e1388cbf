/*
 * check_threads.c - the threading contract of sift.h (BAD_INPUTS X-01,
 * no global mutable state, one chain per thread, and const
 * functions (clone, stage queries) safe on a chain nobody mutates.
 *
 * - several threads, each with its own chain built from the same
 *   spec, sample concurrently; every thread's token sequence equals the
 *   one a serial run gives.
 * - one shared, idle chain; every thread clones it (clone takes
 *   a const chain) and queries it (n_stages, stage_name, stage_class)
 *   while sampling on its own clone; the results equal a serial run.
 *
 * - grammars built from one vocabulary on several threads at once (the
 *   first ones race to build and publish its shared token index) walk
 *   like a serial run, masks included.
 * - A vocabulary shared by threads that encode text builds its encoder
 *   once, whichever thread gets there first (vocab/bpe.c).
 *
 * - A batch (sift_chains_sample) sharded across threads, each thread
 *   calling it on its own range of slots of shared arrays, gives the
 *   tokens of the sequential loop of single calls.
 *
 * - Chains sharing scratch (sift_workspace): chains that move between
 *   threads, each thread attaching its own workspace before it samples
 *   one, and threads whose chains share one workspace (a call that finds
 *   it in use is refused and retried), give the serial run's tokens.
 *
 * CI runs this binary under ThreadSanitizer (--enable-tsan), so every
 * piece of shared test data is written before the threads start and only
 * read while they run; results go to per-thread slots joined afterwards.
 */
#define _POSIX_C_SOURCE 200809L /* pthread barriers under -std=c11 */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "oracle/oracle.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define THREADS 4
#define STEPS 60
#define V 3000

/* ------------------------------------------------------------------ */
/* The chain and the rows                                              */
/* ------------------------------------------------------------------ */

static sift_status build(uint64_t seed, int sel, sift_chain **out)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = seed;
    sift_status s = sift_chain_new(out, &p, NULL);
    if (s)
        return s;
    sift_chain *c = *out;
    static const sift_bias bias[2] = {{3, 2.0f}, {9, -INFINITY}};
    sift_dry_params dp = {sizeof(sift_dry_params), 0.8f, 1.75f, 2, 64, NULL, NULL, 0};
    if ((s = sift_chain_add_logit_bias(c, bias, 2, NULL)) ||
        (s = sift_chain_add_penalties(c, 64, 1.1f, 0.05f, 0.05f, NULL)) ||
        (s = sift_chain_add_dry(c, &dp, NULL, NULL)) || (s = sift_chain_add_top_k(c, 200, NULL)) ||
        (s = sift_chain_add_typical(c, 0.98f, 1, NULL)) ||
        (s = sift_chain_add_top_p(c, 0.95f, 1, NULL)) ||
        (s = sift_chain_add_min_p(c, 0.02f, 1, NULL)) ||
        (s = sift_chain_add_xtc(c, 0.3f, 0.1f, 1, NULL)) ||
        (s = sift_chain_add_top_n_sigma(c, 3.0f, NULL)) ||
        (s = sift_chain_add_temp_ext(c, 0.9f, 0.2f, 1.0f, NULL)))
        goto fail;
    switch (sel) {
    case 0: s = sift_chain_add_dist(c, NULL); break;
    case 1: s = sift_chain_add_mirostat(c, V, 5.0f, 0.1f, 100, NULL); break;
    default: s = sift_chain_add_mirostat_v2(c, 5.0f, 0.1f, NULL); break;
    }
    if (s)
        goto fail;
    return SIFT_OK;
fail:
    sift_chain_free(c);
    *out = NULL;
    return s;
}

static void make_row(float *row, uint64_t seed, int step)
{
    tu_rng r = {seed * 1000003u + (uint64_t)step};
    tu_row(&r, row, V, step % 5);
}

/* Runs STEPS sample+accept steps; returns a non-zero status on error. */
static sift_status run(sift_chain *c, uint64_t row_seed, int32_t *tok, float *row)
{
    for (int s = 0; s < STEPS; s++) {
        make_row(row, row_seed, s);
        sift_status st = sift_chain_sample(c, row, V, &tok[s], NULL);
        if (st)
            return st;
        if ((st = sift_chain_accept(c, tok[s], NULL)))
            return st;
    }
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* own chains                                                    */
/* ------------------------------------------------------------------ */

typedef struct job {
    int index;
    int sel;
    pthread_barrier_t *start;
    const sift_chain *shared; /* */
    int32_t tok[STEPS];
    sift_status status;
    int queries_ok;
} job;

static void *own_chain_thread(void *arg)
{
    job *j = arg;
    float *row = malloc(V * sizeof *row);
    sift_chain *c = NULL;
    j->status = row ? build(100 + (uint64_t)j->index, j->sel, &c) : SIFT_E_NOMEM;
    pthread_barrier_wait(j->start);
    if (j->status == SIFT_OK)
        j->status = run(c, (uint64_t)j->index, j->tok, row);
    sift_chain_free(c);
    free(row);
    return NULL;
}

START_TEST(test_threads_with_their_own_chains_match_a_serial_run)
{
    int sel = _i;
    /* serial reference */
    int32_t ref[THREADS][STEPS];
    float *row = malloc(V * sizeof *row);
    for (int t = 0; t < THREADS; t++) {
        sift_chain *c;
        ck_assert_int_eq(build(100 + (uint64_t)t, sel, &c), SIFT_OK);
        ck_assert_int_eq(run(c, (uint64_t)t, ref[t], row), SIFT_OK);
        sift_chain_free(c);
    }
    free(row);
    /* concurrent: two rounds, to let the scheduler interleave */
    for (int round = 0; round < 2; round++) {
        pthread_barrier_t start;
        ck_assert_int_eq(pthread_barrier_init(&start, NULL, THREADS), 0);
        job jobs[THREADS];
        pthread_t th[THREADS];
        for (int t = 0; t < THREADS; t++) {
            memset(&jobs[t], 0, sizeof jobs[t]);
            jobs[t].index = t;
            jobs[t].sel = sel;
            jobs[t].start = &start;
            ck_assert_int_eq(pthread_create(&th[t], NULL, own_chain_thread, &jobs[t]), 0);
        }
        for (int t = 0; t < THREADS; t++)
            ck_assert_int_eq(pthread_join(th[t], NULL), 0);
        pthread_barrier_destroy(&start);
        for (int t = 0; t < THREADS; t++) {
            ck_assert_int_eq(jobs[t].status, SIFT_OK);
            ck_assert_msg(memcmp(jobs[t].tok, ref[t], sizeof ref[t]) == 0,
                          "thread %d differs from the serial run", t);
        }
    }
}
END_TEST

START_TEST(test_threads_with_identical_chains_get_identical_tokens)
{
    /* same seed and same rows in every thread: all equal */
    pthread_barrier_t start;
    ck_assert_int_eq(pthread_barrier_init(&start, NULL, THREADS), 0);
    job jobs[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].index = 0; /* same seed, same rows */
        jobs[t].start = &start;
        ck_assert_int_eq(pthread_create(&th[t], NULL, own_chain_thread, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    pthread_barrier_destroy(&start);
    for (int t = 0; t < THREADS; t++) {
        ck_assert_int_eq(jobs[t].status, SIFT_OK);
        ck_assert(memcmp(jobs[t].tok, jobs[0].tok, sizeof jobs[0].tok) == 0);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* one shared read-only chain                             */
/* ------------------------------------------------------------------ */

static const char *const want_names[] = {"logit_bias",  "penalties", "dry",   "top_k",
                                         "typical",     "top_p",     "min_p", "xtc",
                                         "top_n_sigma", "temp_ext",  "dist"};

/* The analyzer's answers for the shared chain, taken before the threads
 * start; every thread must get the same ones (the analyzer only reads). */
static sift_plan ref_plan = {.struct_size = sizeof(sift_plan)},
                 ref_next = {.struct_size = sizeof(sift_plan)};

static int same_plan(const sift_plan *a, const sift_plan *b)
{
    return a->k == b->k && a->guarantee == b->guarantee && a->max_extras == b->max_extras &&
           a->decided_at == b->decided_at && strcmp(a->why, b->why) == 0;
}

static int query(const sift_chain *c)
{
    sift_plan p = {.struct_size = sizeof(sift_plan)}, q = {.struct_size = sizeof(sift_plan)};
    /* (sift_chain_extras is a use of the chain, not a read: not here.) */
    if (sift_chain_plan(c, &p, NULL, NULL) || sift_chain_next_k(c, &q, NULL))
        return 0;
    if (ref_plan.why[0] && (!same_plan(&p, &ref_plan) || !same_plan(&q, &ref_next)))
        return 0;
    if (sift_chain_n_stages(c) != N(want_names))
        return 0;
    for (size_t i = 0; i < N(want_names); i++) {
        const char *n = sift_chain_stage_name(c, i);
        if (!n || strcmp(n, want_names[i]) != 0)
            return 0;
        int64_t b = -99;
        sift_class cls = sift_chain_stage_class(c, i, &b);
        if ((int)cls < SIFT_CLASS_WHOLE || (int)cls > SIFT_CLASS_THRESHOLD || b == -99)
            return 0;
    }
    return sift_chain_stage_name(c, N(want_names)) == NULL;
}

static void *shared_chain_thread(void *arg)
{
    job *j = arg;
    float *row = malloc(V * sizeof *row);
    pthread_barrier_wait(j->start);
    j->queries_ok = 1;
    j->status = SIFT_OK;
    /* clone and query the shared chain many times while others do too */
    for (int k = 0; k < 20; k++) {
        sift_chain *tmp = NULL;
        sift_status s = sift_chain_clone(j->shared, &tmp, NULL);
        if (s) {
            j->status = s;
            break;
        }
        j->queries_ok &= query(j->shared) && query(tmp);
        sift_chain_free(tmp);
    }
    sift_chain *mine = NULL;
    if (j->status == SIFT_OK)
        j->status = sift_chain_clone(j->shared, &mine, NULL);
    if (j->status == SIFT_OK && row)
        j->status = run(mine, 7, j->tok, row);
    j->queries_ok &= query(j->shared);
    sift_chain_free(mine);
    free(row);
    return NULL;
}

START_TEST(test_threads_cloning_and_querying_one_shared_chain_match_a_serial_run)
{
    sift_chain *shared;
    ck_assert_int_eq(build(55, 0, &shared), SIFT_OK);
    /* give it a history and sized buffers before it goes read-only */
    float *row = malloc(V * sizeof *row);
    int32_t warm[STEPS];
    ck_assert_int_eq(run(shared, 3, warm, row), SIFT_OK);
    uint64_t dig = sift__chain_state_digest(shared);
    memset(&ref_plan, 0, sizeof ref_plan);
    ref_plan.struct_size = sizeof ref_plan;
    ck_assert(query(shared));
    ck_assert_int_eq(sift_chain_plan(shared, &ref_plan, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_next_k(shared, &ref_next, NULL), SIFT_OK);
    ck_assert(query(shared));
    /* serial reference: a clone samples the rows of seed 7 */
    int32_t ref[STEPS];
    sift_chain *c;
    ck_assert_int_eq(sift_chain_clone(shared, &c, NULL), SIFT_OK);
    ck_assert_int_eq(run(c, 7, ref, row), SIFT_OK);
    sift_chain_free(c);
    free(row);
    pthread_barrier_t start;
    ck_assert_int_eq(pthread_barrier_init(&start, NULL, THREADS), 0);
    job jobs[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].index = t;
        jobs[t].start = &start;
        jobs[t].shared = shared;
        ck_assert_int_eq(pthread_create(&th[t], NULL, shared_chain_thread, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    pthread_barrier_destroy(&start);
    for (int t = 0; t < THREADS; t++) {
        ck_assert_int_eq(jobs[t].status, SIFT_OK);
        ck_assert_msg(jobs[t].queries_ok, "thread %d saw a wrong description", t);
        ck_assert_msg(memcmp(jobs[t].tok, ref, sizeof ref) == 0,
                      "thread %d differs from the serial run", t);
    }
    /* the shared chain was only read */
    ck_assert_uint_eq(sift__chain_state_digest(shared), dig);
    sift_chain_free(shared);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Grammars built from one vocabulary on several threads               */
/* ------------------------------------------------------------------ */

/* A vocabulary of V tokens: single characters, then pairs and triples of
 * them (deterministic), so that the token trie has depth. */
static sift_vocab *grammar_vocab(void)
{
    static const char alpha[] = "abcdefghij0123456789[],";
    const size_t na = sizeof alpha - 1;
    char(*store)[4] = malloc(V * sizeof *store);
    const char **pieces = malloc(V * sizeof *pieces);
    size_t *lens = malloc(V * sizeof *lens);
    for (int32_t i = 0; i < V; i++) {
        size_t k = (size_t)i, n = 0;
        do {
            store[i][n++] = alpha[k % na];
            k /= na;
        } while (k && n < 3);
        pieces[i] = store[i];
        lens[i] = n;
    }
    sift_vocab *v = NULL;
    if (sift_vocab_new(&v, V, pieces, lens, NULL, NULL) ||
        sift_vocab_set_attr(v, V - 1, SIFT_TOKEN_EOG, NULL))
        v = NULL;
    free(store);
    free(pieces);
    free(lens);
    return v;
}

static const char G_LIST[] = "root ::= \"[\" item ( \",\" item )* \"]\"\n"
                             "item ::= [a-j] [a-j0-9]{0,6}\n";

typedef struct gjob {
    const sift_vocab *vocab;
    pthread_barrier_t *start;
    uint64_t digest; /* of every mask along the walk */
    sift_status status;
} gjob;

/* Builds a grammar from the shared vocabulary and walks it: at each step
 * the bitmask, then the lowest allowed non-EOG token. */
static sift_status walk_grammar(const sift_vocab *vocab, uint64_t *digest)
{
    sift_grammar *g = NULL;
    sift_status s = sift_grammar_new(&g, G_LIST, sizeof G_LIST - 1, vocab, NULL, NULL);
    if (s)
        return s;
    uint32_t mask[(V + 31) / 32];
    uint64_t h = 1469598103934665603ull;
    for (int step = 0; step < 40 && !s; step++) {
        if ((s = sift_grammar_fill_bitmask(g, mask, N(mask), NULL)))
            break;
        for (size_t w = 0; w < N(mask); w++) {
            h ^= mask[w];
            h *= 1099511628211ull;
        }
        int32_t t = -1;
        for (int32_t k = (step * 7) % (V - 1); k < V - 1 && t < 0; k++)
            if ((mask[k >> 5] >> (k & 31)) & 1)
                t = k;
        for (int32_t k = 0; k < V - 1 && t < 0; k++)
            if ((mask[k >> 5] >> (k & 31)) & 1)
                t = k;
        if (t < 0)
            break;
        s = sift_grammar_accept_token(g, t, NULL);
    }
    sift_grammar_free(g);
    *digest = h;
    return s;
}

static void *grammar_thread(void *arg)
{
    gjob *j = arg;
    pthread_barrier_wait(j->start);
    j->status = walk_grammar(j->vocab, &j->digest);
    return NULL;
}

START_TEST(test_threads_building_grammars_from_one_vocabulary_match_a_serial_run)
{
    /* the vocabulary is fresh: the threads race to build and publish its
     * shared token index; every one must see a complete index */
    sift_vocab *ref_v = grammar_vocab();
    ck_assert_ptr_nonnull(ref_v);
    uint64_t ref = 0;
    ck_assert_int_eq(walk_grammar(ref_v, &ref), SIFT_OK);
    sift_vocab_free(ref_v);
    for (int round = 0; round < 3; round++) {
        sift_vocab *v = grammar_vocab();
        ck_assert_ptr_nonnull(v);
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, THREADS);
        pthread_t th[THREADS];
        gjob jobs[THREADS];
        for (int t = 0; t < THREADS; t++) {
            jobs[t] = (gjob){v, &start, 0, SIFT_OK};
            ck_assert_int_eq(pthread_create(&th[t], NULL, grammar_thread, &jobs[t]), 0);
        }
        for (int t = 0; t < THREADS; t++)
            ck_assert_int_eq(pthread_join(th[t], NULL), 0);
        pthread_barrier_destroy(&start);
        for (int t = 0; t < THREADS; t++) {
            ck_assert_int_eq(jobs[t].status, SIFT_OK);
            ck_assert_msg(jobs[t].digest == ref, "round %d thread %d differs", round, t);
        }
        sift_vocab_free(v);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* A shared vocabulary encoding (vocab/bpe.c)                          */
/* ------------------------------------------------------------------ */

typedef struct enc_job {
    pthread_barrier_t *go;
    const sift_vocab *v;
    const char *text;
    int32_t ids[128];
    size_t n;
    sift_status st;
} enc_job;

static void *enc_run(void *p)
{
    enc_job *j = p;
    pthread_barrier_wait(j->go);
    j->st = sift_vocab_encode(j->v, j->text, strlen(j->text), 0, j->ids, 128, &j->n, NULL, NULL);
    return NULL;
}

/* A vocabulary with a pre-tokenizer but no encoder yet (extend passes the
 * pre-tokenizer, not the encoder): four threads released together race
 * to build it on a const vocabulary; all must get the serial ids. */
START_TEST(test_threads_encoding_with_one_shared_vocabulary_match_a_serial_run)
{
    const char *pieces[260];
    size_t lengths[260];
    static char bytes[256];
    static const char *const merged[] = {"ab", "abc", " a", "  "};
    for (int b = 0; b < 256; b++) {
        bytes[b] = (char)b;
        pieces[b] = bytes + b;
        lengths[b] = 1;
    }
    for (int i = 0; i < 4; i++) {
        pieces[256 + i] = merged[i];
        lengths[256 + i] = strlen(merged[i]);
    }
    sift_vocab *base, *v;
    ck_assert_int_eq(sift_vocab_new(&base, 260, pieces, lengths, NULL, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_set_pretokenizer(base, SIFT_PRETOK_CL100K, NULL, 0, NULL), SIFT_OK);
    ck_assert_int_eq(sift_vocab_extend(&v, base, NULL, NULL, NULL), SIFT_OK);
    const char *text = "abc ab  abcab a\n  abc";
    int32_t want[128];
    size_t nw;
    ck_assert_int_eq(sift_vocab_encode(base, text, strlen(text), 0, want, 128, &nw, NULL, NULL),
                     SIFT_OK);
    pthread_barrier_t go;
    ck_assert_int_eq(pthread_barrier_init(&go, NULL, 4), 0);
    enc_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i].go = &go;
        jobs[i].v = v;
        jobs[i].text = text;
        ck_assert_int_eq(pthread_create(&th[i], NULL, enc_run, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(jobs[i].st, SIFT_OK);
        ck_assert_uint_eq(jobs[i].n, nw);
        ck_assert(memcmp(jobs[i].ids, want, nw * sizeof *want) == 0);
    }
    sift_vocab_free(v);
    sift_vocab_free(base);
}
END_TEST

/* ------------------------------------------------------------------ */
/* A batch sharded across threads (docs/api.md, "Batches")             */
/* ------------------------------------------------------------------ */

#define SLOTS 16
#define BSTEPS 20

/* Written before the threads start, read only while they run. */
static const float *shard_rows[BSTEPS][SLOTS];

typedef struct shard {
    size_t lo, hi;
    pthread_barrier_t *start;
    sift_chain **chains;          /* the whole batch's array */
    int32_t (*tok)[SLOTS];        /* tok[step][slot], shared */
    sift_status (*status)[SLOTS]; /* likewise */
    sift_status ret;
} shard;

static void *shard_thread(void *arg)
{
    shard *j = arg;
    pthread_barrier_wait(j->start);
    for (int s = 0; s < BSTEPS && !j->ret; s++) {
        sift_batch_args a;
        sift_batch_args_init(&a);
        a.chains = j->chains + j->lo;
        a.n = j->hi - j->lo;
        a.rows = shard_rows[s] + j->lo;
        a.n_vocab = V;
        a.flags = SIFT_BATCH_ACCEPT;
        j->ret = sift_chains_sample(&a, j->tok[s] + j->lo, j->status[s] + j->lo, NULL);
    }
    return NULL;
}

START_TEST(test_a_batch_sharded_across_threads_matches_the_sequential_loop)
{
    float *buf = malloc((size_t)BSTEPS * SLOTS * V * sizeof *buf);
    ck_assert_ptr_nonnull(buf);
    for (int s = 0; s < BSTEPS; s++)
        for (int i = 0; i < SLOTS; i++) {
            float *row = buf + ((size_t)s * SLOTS + (size_t)i) * V;
            make_row(row, 500 + (uint64_t)i, s);
            shard_rows[s][i] = row;
        }
    /* the sequential loop of single calls */
    static int32_t ref[BSTEPS][SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        sift_chain *c;
        ck_assert_int_eq(build(300 + (uint64_t)i, i % 3, &c), SIFT_OK);
        for (int s = 0; s < BSTEPS; s++) {
            ck_assert_int_eq(sift_chain_sample(c, shard_rows[s][i], V, &ref[s][i], NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(c, ref[s][i], NULL), SIFT_OK);
        }
        sift_chain_free(c);
    }
    sift_chain *chains[SLOTS];
    for (int i = 0; i < SLOTS; i++)
        ck_assert_int_eq(build(300 + (uint64_t)i, i % 3, &chains[i]), SIFT_OK);
    static int32_t tok[BSTEPS][SLOTS];
    static sift_status status[BSTEPS][SLOTS];
    pthread_barrier_t start;
    ck_assert_int_eq(pthread_barrier_init(&start, NULL, THREADS), 0);
    shard jobs[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        /* uneven ranges: 1, 3, 5, 7 slots */
        size_t lo = (size_t)(t * t), hi = (size_t)((t + 1) * (t + 1));
        jobs[t] = (shard){lo, hi, &start, chains, tok, status, SIFT_OK};
        ck_assert_int_eq(pthread_create(&th[t], NULL, shard_thread, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    pthread_barrier_destroy(&start);
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(jobs[t].ret, SIFT_OK);
    for (int s = 0; s < BSTEPS; s++)
        for (int i = 0; i < SLOTS; i++) {
            ck_assert_int_eq(status[s][i], SIFT_OK);
            ck_assert_msg(tok[s][i] == ref[s][i], "step %d slot %d: %d, sequential %d", s, i,
                          (int)tok[s][i], (int)ref[s][i]);
        }
    for (int i = 0; i < SLOTS; i++)
        sift_chain_free(chains[i]);
    free(buf);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Chains sharing scratch (sift_workspace)                             */
/* ------------------------------------------------------------------ */

#define WS_CHAINS 8
#define WS_ROUNDS 12

/* A server's loop: chains move between threads from round to round, and
 * each thread attaches its own workspace to the chain it samples. */
typedef struct ws_job {
    int t;
    pthread_barrier_t *round;
    sift_chain **chains;       /* shared array, WS_CHAINS */
    int32_t (*tok)[WS_ROUNDS]; /* tok[chain][round], shared */
    sift_status ret;
} ws_job;

static void *ws_thread(void *arg)
{
    ws_job *j = arg;
    float *row = malloc(V * sizeof *row);
    sift_workspace *w = NULL;
    j->ret = row ? sift_workspace_new(&w, NULL, NULL) : SIFT_E_NOMEM;
    for (int r = 0; r < WS_ROUNDS; r++) {
        pthread_barrier_wait(j->round);
        for (int c = 0; c < WS_CHAINS && !j->ret; c++) {
            if ((c + r) % THREADS != j->t)
                continue;
            sift_chain *ch = j->chains[c];
            make_row(row, 700 + (uint64_t)c, r);
            if (!(j->ret = sift_chain_set_workspace(ch, w, NULL)) &&
                !(j->ret = sift_chain_sample(ch, row, V, &j->tok[c][r], NULL)))
                j->ret = sift_chain_accept(ch, j->tok[c][r], NULL);
        }
    }
    sift_workspace_free(w); /* chains attached to it keep it alive */
    free(row);
    return NULL;
}

START_TEST(test_chains_moving_between_threads_with_a_workspace_each_match_a_serial_run)
{
    static int32_t ref[WS_CHAINS][WS_ROUNDS], tok[WS_CHAINS][WS_ROUNDS];
    float *row = malloc(V * sizeof *row);
    ck_assert_ptr_nonnull(row);
    sift_chain *chains[WS_CHAINS];
    for (int c = 0; c < WS_CHAINS; c++) {
        ck_assert_int_eq(build(800 + (uint64_t)c, c % 3, &chains[c]), SIFT_OK);
        for (int r = 0; r < WS_ROUNDS; r++) {
            make_row(row, 700 + (uint64_t)c, r);
            ck_assert_int_eq(sift_chain_sample(chains[c], row, V, &ref[c][r], NULL), SIFT_OK);
            ck_assert_int_eq(sift_chain_accept(chains[c], ref[c][r], NULL), SIFT_OK);
        }
        sift_chain_free(chains[c]);
        ck_assert_int_eq(build(800 + (uint64_t)c, c % 3, &chains[c]), SIFT_OK);
    }
    free(row);
    pthread_barrier_t round;
    ck_assert_int_eq(pthread_barrier_init(&round, NULL, THREADS), 0);
    ws_job jobs[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (ws_job){t, &round, chains, tok, SIFT_OK};
        ck_assert_int_eq(pthread_create(&th[t], NULL, ws_thread, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    pthread_barrier_destroy(&round);
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(jobs[t].ret, SIFT_OK);
    for (int c = 0; c < WS_CHAINS; c++)
        for (int r = 0; r < WS_ROUNDS; r++)
            ck_assert_msg(tok[c][r] == ref[c][r], "chain %d round %d: %d, serial %d", c, r,
                          (int)tok[c][r], (int)ref[c][r]);
    for (int c = 0; c < WS_CHAINS; c++)
        sift_chain_free(chains[c]); /* the last ones free the workspaces */
}
END_TEST

/* Threads whose chains share one workspace: a call that finds it in use
 * gets SIFT_E_STATE and changes nothing, so each thread retries; the
 * atomic flag orders their use of the buffers (TSan sees no race). */
typedef struct turn_job {
    pthread_barrier_t *start;
    sift_chain *chain;
    uint64_t row_seed;
    int32_t tok[STEPS];
    long refused;
    sift_status ret;
} turn_job;

static void *turn_thread(void *arg)
{
    turn_job *j = arg;
    float *row = malloc(V * sizeof *row);
    if (!row)
        j->ret = SIFT_E_NOMEM;
    pthread_barrier_wait(j->start);
    for (int s = 0; s < STEPS && !j->ret; s++) {
        make_row(row, j->row_seed, s);
        while ((j->ret = sift_chain_sample(j->chain, row, V, &j->tok[s], NULL)) == SIFT_E_STATE)
            j->refused++;
        if (!j->ret)
            j->ret = sift_chain_accept(j->chain, j->tok[s], NULL);
    }
    free(row);
    return NULL;
}

START_TEST(test_threads_sharing_one_workspace_take_turns_and_match_a_serial_run)
{
    int32_t ref[THREADS][STEPS];
    float *row = malloc(V * sizeof *row);
    ck_assert_ptr_nonnull(row);
    sift_chain *c;
    for (int t = 0; t < THREADS; t++) {
        ck_assert_int_eq(build(900 + (uint64_t)t, t % 3, &c), SIFT_OK);
        ck_assert_int_eq(run(c, 40 + (uint64_t)t, ref[t], row), SIFT_OK);
        sift_chain_free(c);
    }
    free(row);
    sift_workspace *w;
    ck_assert_int_eq(sift_workspace_new(&w, NULL, NULL), SIFT_OK);
    pthread_barrier_t start;
    ck_assert_int_eq(pthread_barrier_init(&start, NULL, THREADS), 0);
    static turn_job jobs[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].start = &start;
        jobs[t].row_seed = 40 + (uint64_t)t;
        ck_assert_int_eq(build(900 + (uint64_t)t, t % 3, &jobs[t].chain), SIFT_OK);
        ck_assert_int_eq(sift_chain_set_workspace(jobs[t].chain, w, NULL), SIFT_OK);
    }
    sift_workspace_free(w);
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_create(&th[t], NULL, turn_thread, &jobs[t]), 0);
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    pthread_barrier_destroy(&start);
    for (int t = 0; t < THREADS; t++) {
        ck_assert_int_eq(jobs[t].ret, SIFT_OK);
        ck_assert_msg(memcmp(jobs[t].tok, ref[t], sizeof ref[t]) == 0,
                      "thread %d differs from the serial run", t);
        sift_chain_free(jobs[t].chain);
    }
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("own_chains");
    tcase_add_loop_test(tc, test_threads_with_their_own_chains_match_a_serial_run, 0, 3);
    tcase_add_test(tc, test_threads_with_identical_chains_get_identical_tokens);
    tcase_add_test(tc, test_a_batch_sharded_across_threads_matches_the_sequential_loop);
    suite_add_tcase(s, tc);
    tc = tcase_create("shared_chain");
    tcase_add_test(tc, test_threads_cloning_and_querying_one_shared_chain_match_a_serial_run);
    suite_add_tcase(s, tc);
    tc = tcase_create("shared_vocabulary");
    tcase_add_test(tc, test_threads_building_grammars_from_one_vocabulary_match_a_serial_run);
    suite_add_tcase(s, tc);
    tc = tcase_create("vocab_encoding");
    tcase_add_test(tc, test_threads_encoding_with_one_shared_vocabulary_match_a_serial_run);
    suite_add_tcase(s, tc);
    tc = tcase_create("shared_scratch");
    tcase_add_test(tc, test_chains_moving_between_threads_with_a_workspace_each_match_a_serial_run);
    tcase_add_test(tc, test_threads_sharing_one_workspace_take_turns_and_match_a_serial_run);
    suite_add_tcase(s, tc);
    return s;
}

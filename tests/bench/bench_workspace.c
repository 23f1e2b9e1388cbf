/*
 * bench_workspace.c - the memory of a server's chains, with and without
 * shared scratch (sift_workspace; docs/api.md, "Memory of a chain").
 *
 *   bench_workspace [--own | --shared] [--no-top-k] [--chains N]
 *                   [--threads T] [--steps S] [--vocab V]
 *
 * Builds N chains of a realistic configuration (penalties over 64 tokens,
 * DRY over 1,024, top_k 40, top_p 0.95, min_p 0.05, temp 0.8, dist) at
 * V = 151,936 (Qwen's vocabulary); --no-top-k leaves top_k out, so that
 * every row step is a full pass over the row, which writes every page of
 * the scratch (with top_k the prefix path touches a small part of it).
 * It samples them on T threads, chain i
 * on thread i % T, S steps each: even steps on whole rows, odd steps on
 * slices (the chain's dynamic k and extras; a row hook gives the row
 * when a slice cannot decide). With --shared each thread makes one
 * workspace and attaches it to its chains; with --own (the default) each
 * chain has its own scratch. It reports the resident set
 * (/proc/self/statm) before the chains exist, once they are built (idle,
 * never sampled) and after the steps, the peak (getrusage), and the
 * bytes the chains' and the workspaces' allocators hold (exact, from a
 * counting allocator).
 *
 * Memory only, no time: make bench-workspace runs both modes.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sift.h"
#include "testutil.h"

#define N_ROWS 8

/* ------------------------------------------------------------------ */
/* A thread-safe counting allocator                                    */
/* ------------------------------------------------------------------ */

typedef union header {
    size_t size;
    max_align_t align;
} header;

typedef struct counter {
    atomic_size_t live;
} counter;

static void *ct_alloc(void *u, size_t n)
{
    header *h = malloc(sizeof *h + n);
    if (!h)
        return NULL;
    h->size = n;
    atomic_fetch_add(&((counter *)u)->live, n);
    return h + 1;
}

static void ct_free(void *u, void *p)
{
    if (!p)
        return;
    header *h = (header *)p - 1;
    atomic_fetch_sub(&((counter *)u)->live, h->size);
    free(h);
}

static counter chain_bytes, ws_bytes;

/* ------------------------------------------------------------------ */
/* Resident memory                                                     */
/* ------------------------------------------------------------------ */

static double rss_mb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1e6;
}

static double peak_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss * 1024.0 / 1e6; /* Linux: KiB */
}

/* ------------------------------------------------------------------ */
/* The chains and the threads                                          */
/* ------------------------------------------------------------------ */

typedef struct run {
    int shared, top_k;
    int n_chains, n_threads, steps;
    int32_t V;
    sift_chain **chains;
    const float *rows[N_ROWS];
} run;

static sift_chain *server_chain(uint64_t seed, int top_k)
{
    static const sift_allocator al = {sizeof(sift_allocator), ct_alloc, ct_free, &chain_bytes,
                                      NULL};
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = seed;
    p.allocator = &al;
    sift_chain *c = NULL;
    sift_dry_params dp;
    sift_dry_params_init(&dp);
    dp.multiplier = 0.8f;
    dp.base = 1.75f;
    dp.allowed_length = 2;
    dp.last_n = 1024;
    sift_error err;
    if (sift_chain_new(&c, &p, &err) || sift_chain_add_penalties(c, 64, 1.1f, 0, 0, &err) ||
        sift_chain_add_dry(c, &dp, NULL, &err) || (top_k && sift_chain_add_top_k(c, 40, &err)) ||
        sift_chain_add_top_p(c, 0.95f, 1, &err) || sift_chain_add_min_p(c, 0.05f, 1, &err) ||
        sift_chain_add_temp(c, 0.8f, &err) || sift_chain_add_dist(c, &err)) {
        fprintf(stderr, "bench_workspace: %s\n", err.message);
        exit(1);
    }
    return c;
}

typedef struct job {
    const run *r;
    int t;
    const float *cur; /* the row the hook gives */
    long slice_steps, row_steps, hook_calls;
} job;

static int hook(void *user, float *row, int32_t V)
{
    job *j = user;
    j->hook_calls++;
    memcpy(row, j->cur, (size_t)V * sizeof *row);
    return 0;
}

static void die(const char *what, const sift_error *err)
{
    fprintf(stderr, "bench_workspace: %s: %s\n", what, err->message);
    exit(1);
}

static void *thread(void *arg)
{
    job *j = arg;
    const run *r = j->r;
    sift_error err;
    sift_workspace *w = NULL;
    if (r->shared) {
        static const sift_allocator al = {sizeof(sift_allocator), ct_alloc, ct_free, &ws_bytes,
                                          NULL};
        sift_workspace_params p;
        sift_workspace_params_init(&p);
        p.allocator = &al;
        p.n_vocab = r->V;
        if (sift_workspace_new(&w, &p, &err))
            die("workspace", &err);
    }
    sift_slicer *sl;
    if (sift_slicer_new(&sl, r->V, NULL, &err))
        die("slicer", &err);
    int32_t *ids = malloc(4096 * sizeof *ids);
    for (int i = j->t; i < r->n_chains; i += r->n_threads) {
        sift_chain *c = r->chains[i];
        if ((w && sift_chain_set_workspace(c, w, &err)) ||
            sift_chain_set_row_hook(c, hook, j, &err))
            die("attach", &err);
    }
    sift_workspace_free(w); /* the chains hold it now */
    for (int s = 0; s < r->steps; s++)
        for (int i = j->t; i < r->n_chains; i += r->n_threads) {
            sift_chain *c = r->chains[i];
            j->cur = r->rows[(i + s) % N_ROWS];
            int32_t tok;
            if (s % 2 == 0) {
                if (sift_chain_sample(c, j->cur, r->V, &tok, &err))
                    die("sample", &err);
                j->row_steps++;
            } else {
                sift_plan plan = {.struct_size = sizeof plan};
                size_t n_ids = 0;
                sift_slice slice;
                if (sift_chain_next_k(c, &plan, &err) ||
                    sift_chain_extras(c, ids, 4096, &n_ids, &err) ||
                    sift_slicer_build(sl, j->cur, r->V, plan.k > 0 ? plan.k : 64, ids, n_ids,
                                      &slice, &err) ||
                    sift_chain_sample_slice(c, &slice, &tok, &err))
                    die("slice step", &err);
                j->slice_steps++;
            }
            if (sift_chain_accept(c, tok, &err))
                die("accept", &err);
        }
    sift_slicer_free(sl);
    free(ids);
    return NULL;
}

int main(int argc, char **argv)
{
    run r = {.shared = 0, .top_k = 1, .n_chains = 256, .n_threads = 2, .steps = 4, .V = 151936};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shared"))
            r.shared = 1;
        else if (!strcmp(argv[i], "--own"))
            r.shared = 0;
        else if (!strcmp(argv[i], "--no-top-k"))
            r.top_k = 0;
        else if (!strcmp(argv[i], "--chains") && i + 1 < argc)
            r.n_chains = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            r.n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            r.steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--vocab") && i + 1 < argc)
            r.V = (int32_t)atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--own | --shared] [--no-top-k] [--chains N] "
                    "[--threads T] [--steps S] [--vocab V]\n",
                    argv[0]);
            return 2;
        }
    }
    if (r.n_chains < 1 || r.n_threads < 1 || r.n_threads > 64 || r.steps < 0 || r.V < 2) {
        fprintf(stderr, "bench_workspace: bad arguments\n");
        return 2;
    }
    float *buf = malloc((size_t)N_ROWS * (size_t)r.V * sizeof *buf);
    r.chains = calloc((size_t)r.n_chains, sizeof *r.chains);
    if (!buf || !r.chains)
        return 1;
    tu_rng g = {2026};
    for (int i = 0; i < N_ROWS; i++) {
        tu_row(&g, buf + (size_t)i * (size_t)r.V, r.V, i % 2 ? TU_ROW_BF16 : TU_ROW_NORMAL);
        r.rows[i] = buf + (size_t)i * (size_t)r.V;
    }
    double base = rss_mb();
    for (int i = 0; i < r.n_chains; i++)
        r.chains[i] = server_chain((uint64_t)i + 1, r.top_k);
    double built = rss_mb();
    size_t built_bytes = atomic_load(&chain_bytes.live);
    job jobs[64];
    pthread_t th[64];
    for (int t = 0; t < r.n_threads; t++) {
        jobs[t] = (job){&r, t, NULL, 0, 0, 0};
        if (pthread_create(&th[t], NULL, thread, &jobs[t]))
            return 1;
    }
    long rows = 0, slices = 0, hooks = 0;
    for (int t = 0; t < r.n_threads; t++) {
        pthread_join(th[t], NULL);
        rows += jobs[t].row_steps;
        slices += jobs[t].slice_steps;
        hooks += jobs[t].hook_calls;
    }
    double after = rss_mb();
    size_t after_bytes = atomic_load(&chain_bytes.live);
    size_t ws = atomic_load(&ws_bytes.live);
    printf("mode %s%s: %d chains, V = %d, %d threads, %d steps each (%ld row steps, %ld slice "
           "steps, %ld hook calls)\n",
           r.shared ? "shared" : "own", r.top_k ? "" : " (no top_k)", r.n_chains, (int)r.V,
           r.n_threads, r.steps, rows, slices, hooks);
    printf("  resident: %.1f MB before the chains, %.1f MB built (idle), %.1f MB after the "
           "steps; peak %.1f MB\n",
           base, built, after, peak_mb());
    printf("  chains' allocators: %.1f KB per chain built, %.1f KB per chain after the steps\n",
           (double)built_bytes / r.n_chains / 1e3, (double)after_bytes / r.n_chains / 1e3);
    printf("  workspaces' allocators: %.1f MB in all, %.1f MB per thread\n", (double)ws / 1e6,
           (double)ws / r.n_threads / 1e6);
    printf("  resident growth per chain: %.1f KB built, %.1f KB after the steps\n",
           (built - base) * 1e3 / r.n_chains, (after - base) * 1e3 / r.n_chains);
    for (int i = 0; i < r.n_chains; i++)
        sift_chain_free(r.chains[i]);
    free(r.chains);
    free(buf);
    return 0;
}

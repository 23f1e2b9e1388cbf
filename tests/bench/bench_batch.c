/*
 * bench_batch.c - one sift_chains_sample call against the loop of single
 * calls it replaces (`make bench-batch`; not a test).
 *
 * The production chain (penalties 64/1.1 -> top_k 40 -> top_p 0.95 ->
 * min_p 0.05 -> temp 0.8 -> dist) at V = 151,936, one chain per slot, a
 * full penalty window each, n = 1, 8, 64 and 256 slots, each step sample
 * + accept:
 *   batch  one sift_chains_sample call with SIFT_BATCH_ACCEPT
 *   loop   n times sift_chain_sample(_slice) + sift_chain_accept
 * on slices (k = the plan's k, 104, and the chain's extras, built before
 * timing: the device's work) and on whole rows. The two sides run twin
 * chains (same seeds, same inputs), so they do the same sampling work
 * and give the same tokens (checked). Rows are peaked (N(0, 2) plus a
 * head of 50 ids raised by U(5, 15)); slot i of round r reads row
 * (i + r) mod 8 of a pool of 8 (4.9 MB, beyond a core's L2). Each
 * timed pass is preceded by an untimed max-reduction over its rows, so
 * every pass finds them in the same cache state (the sides alternate
 * which goes first). On rows, the floor (the library's max-reduction
 * through its run-time dispatch, SIFT_SIMD caps it) and memcpy are timed
 * over the same n rows in the same round, primed alike. Times are CPU time of the thread per slot;
 * medians over rounds, with the spread (min - max); ratios are medians of same-round pairs. The
 * machine may be loaded: the callgrind instruction counts of tests/bench/bench_batch.sh are the
 * repeatable figures (each side is a function of its own, bench_batch_call and bench_loop_call).
 *
 * Usage: bench_batch [--reps R] [--mode slices|rows] [--n N] [--only batch|loop]
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/simd.h"
#include "testutil.h"

#define V 151936
#define NROWS 8
#define MAXN 256

static float *pool[NROWS];
static volatile float sink_f;

static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const char *what, const sift_error *err)
{
    fprintf(stderr, "bench_batch: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

static sift_chain *make_chain(uint64_t seed)
{
    sift_error err;
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = seed;
    p.n_vocab = V;
    sift_chain *c = NULL;
    if (sift_chain_new(&c, &p, &err) || sift_chain_add_penalties(c, 64, 1.1f, 0.0f, 0.0f, &err) ||
        sift_chain_add_top_k(c, 40, &err) || sift_chain_add_top_p(c, 0.95f, 1, &err) ||
        sift_chain_add_min_p(c, 0.05f, 1, &err) || sift_chain_add_temp(c, 0.8f, &err) ||
        sift_chain_add_dist(c, &err))
        die("chain", &err);
    for (int32_t t = 0; t < 64; t++) /* a full penalty window */
        if (sift_chain_accept_prompt(c, (int32_t)((seed * 7919u + (uint64_t)t * 104729u) % V),
                                     &err))
            die("prompt", &err);
    return c;
}

static void make_rows(void)
{
    tu_rng r = {20261201};
    for (int i = 0; i < NROWS; i++) {
        pool[i] = malloc((size_t)V * sizeof *pool[i]);
        if (!pool[i])
            die("out of memory", NULL);
        for (int32_t j = 0; j < V; j++)
            pool[i][j] = (float)(2.0 * tu_normal(&r));
        for (int h = 0; h < 50; h++)
            pool[i][tu_range(&r, 0, V - 1)] += (float)(5.0 + 10.0 * tu_unif(&r));
    }
}

/* The inputs of one round: slot i's row, and its slice (copied out of
 * the slicer into storage of its own, so all n slices live at once). */
typedef struct inputs {
    const float *rows[MAXN];
    sift_slice slices[MAXN];
    sift_candidate *cand[MAXN];
    int32_t ids[MAXN][256];
} inputs;

static void build_slices(inputs *in, sift_chain *const *chains, int n, int32_t k, sift_slicer *sl)
{
    sift_error err;
    for (int i = 0; i < n; i++) {
        size_t ne = 0;
        if (sift_chain_extras(chains[i], in->ids[i], 256, &ne, &err))
            die("extras", &err);
        sift_slice s;
        if (sift_slicer_build(sl, in->rows[i], V, k, in->ids[i], ne, &s, &err))
            die("slicer", &err);
        memcpy(in->cand[i], s.prefix, (size_t)s.n_prefix * sizeof *s.prefix);
        if (s.n_extras)
            memcpy(in->cand[i] + s.n_prefix, s.extras, (size_t)s.n_extras * sizeof *s.extras);
        in->slices[i] = s;
        in->slices[i].prefix = in->cand[i];
        in->slices[i].extras = in->cand[i] + s.n_prefix;
    }
}

static void batch_side(sift_chain *const *chains, int n, const inputs *in, int rows,
                       int32_t *tokens)
{
    sift_batch_args a;
    sift_batch_args_init(&a);
    a.chains = chains;
    a.n = (size_t)n;
    if (rows) {
        a.rows = in->rows;
        a.n_vocab = V;
    } else {
        a.slices = in->slices;
    }
    a.flags = SIFT_BATCH_ACCEPT;
    sift_status st[MAXN];
    sift_error err;
    if (sift_chains_sample(&a, tokens, st, &err))
        die("batch", &err);
}

static void loop_side(sift_chain *const *chains, int n, const inputs *in, int rows, int32_t *tokens)
{
    sift_error err;
    for (int i = 0; i < n; i++) {
        sift_status s = rows ? sift_chain_sample(chains[i], in->rows[i], V, &tokens[i], &err)
                             : sift_chain_sample_slice(chains[i], &in->slices[i], &tokens[i], &err);
        if (s || sift_chain_accept(chains[i], tokens[i], &err))
            die("loop", &err);
    }
}

static void prime(const inputs *in, int n)
{
    const sift__simd_ops *ops = sift__simd();
    for (int i = 0; i < n; i++)
        sink_f = ops->max_f32(in->rows[i], V);
}

/* The timed calls, each a function of its own for callgrind; the warm-up
 * rounds call the sides directly, so they are not counted. */
__attribute__((noinline)) static void bench_batch_call(sift_chain *const *chains, int n,
                                                       const inputs *in, int rows, int32_t *tokens)
{
    batch_side(chains, n, in, rows, tokens);
}

__attribute__((noinline)) static void bench_loop_call(sift_chain *const *chains, int n,
                                                      const inputs *in, int rows, int32_t *tokens)
{
    loop_side(chains, n, in, rows, tokens);
}

typedef struct result {
    double batch, loop, ratio, floor, memcpy_us, x_floor;
    double batch_lo, batch_hi, loop_lo, loop_hi;
} result;

static void run(int n, int rows, int reps, const char *only, int32_t k, result *res)
{
    sift_chain *A[MAXN], *B[MAXN];
    for (int i = 0; i < n; i++) {
        A[i] = make_chain(1000 + (uint64_t)i);
        B[i] = make_chain(1000 + (uint64_t)i);
    }
    static inputs in;
    for (int i = 0; i < n; i++) {
        in.cand[i] = malloc(((size_t)k + 256) * sizeof *in.cand[i]);
        if (!in.cand[i])
            die("out of memory", NULL);
    }
    sift_slicer *sl = NULL;
    sift_error err;
    if (sift_slicer_new(&sl, V, NULL, &err))
        die("slicer", &err);
    float *dst = malloc((size_t)V * sizeof *dst);
    double *tb = malloc((size_t)reps * sizeof *tb), *tl = malloc((size_t)reps * sizeof *tl);
    double *rt = malloc((size_t)reps * sizeof *rt), *tf = malloc((size_t)reps * sizeof *tf);
    double *tm = malloc((size_t)reps * sizeof *tm), *xf = malloc((size_t)reps * sizeof *xf);
    if (!dst || !tb || !tl || !rt || !tf || !tm || !xf)
        die("out of memory", NULL);
    const sift__simd_ops *ops = sift__simd();
    int32_t ta[MAXN], tbk[MAXN];
    /* NROWS warm-up rounds: every slot sees every row of the pool once,
     * so buffers are sized and their pages touched before timing (a
     * slice's id set is touched at its ids only). */
    for (int r = -NROWS; r < reps; r++) {
        for (int i = 0; i < n; i++)
            in.rows[i] = pool[(i + r + NROWS) % NROWS];
        if (!rows)
            build_slices(&in, A, n, k, sl); /* A and B hold the same state */
        double b = 0, l = 0;
        /* alternate which side goes first; before each timed pass an
         * untimed max-reduction reads its rows, so that every pass finds
         * them in the same cache state whatever ran before it */
        for (int side = 0; side < 2; side++) {
            int do_batch = (side == 0) == ((r + NROWS) % 2 == 0);
            prime(&in, n);
            if (do_batch && strcmp(only, "loop")) {
                double t0 = cpu_us();
                if (r < 0)
                    batch_side(A, n, &in, rows, ta);
                else
                    bench_batch_call(A, n, &in, rows, ta);
                b = cpu_us() - t0;
            } else if (!do_batch && strcmp(only, "batch")) {
                double t0 = cpu_us();
                if (r < 0)
                    loop_side(B, n, &in, rows, tbk);
                else
                    bench_loop_call(B, n, &in, rows, tbk);
                l = cpu_us() - t0;
            }
        }
        if (!only[0])
            for (int i = 0; i < n; i++)
                if (ta[i] != tbk[i]) {
                    fprintf(stderr, "bench_batch: slot %d: batch token %d, loop %d\n", i,
                            (int)ta[i], (int)tbk[i]);
                    exit(1);
                }
        double f = 0, m = 0;
        if (rows && !only[0]) {
            prime(&in, n);
            double t0 = cpu_us();
            for (int i = 0; i < n; i++)
                sink_f = ops->max_f32(in.rows[i], V);
            double t1 = cpu_us();
            for (int i = 0; i < n; i++) {
                memcpy(dst, in.rows[i], (size_t)V * sizeof *dst);
                sink_f = dst[i];
            }
            double t2 = cpu_us();
            f = t1 - t0;
            m = t2 - t1;
        }
        if (r >= 0) {
            tb[r] = b / n;
            tl[r] = l / n;
            rt[r] = l > 0 ? b / l : 0;
            tf[r] = f / n;
            tm[r] = m / n;
            xf[r] = f > 0 ? b / f : 0;
        }
    }
    res->batch = median(tb, reps);
    res->batch_lo = tb[0];
    res->batch_hi = tb[reps - 1];
    res->loop = median(tl, reps);
    res->loop_lo = tl[0];
    res->loop_hi = tl[reps - 1];
    res->ratio = median(rt, reps);
    res->floor = median(tf, reps);
    res->memcpy_us = median(tm, reps);
    res->x_floor = median(xf, reps);
    free(dst);
    free(tb);
    free(tl);
    free(rt);
    free(tf);
    free(tm);
    free(xf);
    sift_slicer_free(sl);
    for (int i = 0; i < n; i++) {
        free(in.cand[i]);
        sift_chain_free(A[i]);
        sift_chain_free(B[i]);
    }
}

int main(int argc, char **argv)
{
    int reps = 0, only_n = 0;
    const char *only = "", *mode = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            only_n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
            mode = argv[++i];
        else {
            fprintf(stderr, "usage: bench_batch [--reps R] [--mode slices|rows] [--n N] "
                            "[--only batch|loop]\n");
            return 2;
        }
    }
    if (only_n < 0 || only_n > MAXN) {
        fprintf(stderr, "bench_batch: --n is 1 .. %d\n", MAXN);
        return 2;
    }
    make_rows();
    sift_chain *c = make_chain(1);
    sift_plan plan = {.struct_size = sizeof plan};
    sift_error err;
    if (sift_chain_plan(c, &plan, NULL, &err))
        die("plan", &err);
    sift_chain_free(c);
    static const int ns[] = {1, 8, 64, 256};
    if (!only[0])
        printf("# production chain, V = %d, slices of k = %d (+ extras); floor: the library's "
               "max-reduction (%s)\n"
               "# per slot: CPU us, median over rounds [min - max]; batch/loop and x floor: "
               "medians of same-round ratios\n"
               "%-7s %5s %6s %26s %26s %10s %9s %9s %8s\n",
               V, (int)plan.k, sift__simd()->name, "mode", "slots", "rounds", "batch us/slot",
               "loop us/slot", "batch/loop", "floor us", "memcpy us", "x floor");
    for (int m = 0; m < 2; m++) {
        int rows = m == 1;
        if (mode[0] && strcmp(mode, rows ? "rows" : "slices"))
            continue;
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
            int n = ns[j];
            if (only_n && n != only_n)
                continue;
            /* about the same slots per measurement at every n */
            int R = reps ? reps : (rows ? (n >= 64 ? 7 : 31) : (n >= 64 ? 31 : 201));
            result res;
            run(n, rows, R, only, plan.k, &res);
            if (only[0])
                continue;
            char bs[64], ls[64];
            snprintf(bs, sizeof bs, "%.2f [%.2f - %.2f]", res.batch, res.batch_lo, res.batch_hi);
            snprintf(ls, sizeof ls, "%.2f [%.2f - %.2f]", res.loop, res.loop_lo, res.loop_hi);
            if (rows)
                printf("%-7s %5d %6d %26s %26s %10.3f %9.2f %9.2f %8.2f\n", "rows", n, R, bs, ls,
                       res.ratio, res.floor, res.memcpy_us, res.x_floor);
            else
                printf("%-7s %5d %6d %26s %26s %10.3f %9s %9s %8s\n", "slices", n, R, bs, ls,
                       res.ratio, "-", "-", "-");
            fflush(stdout);
        }
    }
    for (int i = 0; i < NROWS; i++)
        free(pool[i]);
    return 0;
}

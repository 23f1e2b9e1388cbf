/*
 * cmd_bench.c - `sift bench [CONFIG]`: times a config's chain on
 * synthetic rows.
 *
 * What it owns: the bench subcommand. Rows are N(0, 2) noise plus a few
 * peaks (splitmix64 + Box-Muller, fixed seed, so runs compare). It times,
 * per call, sift_chain_sample on the whole row; when the plan gives a
 * prefix length k > 0, sift_chain_sample_slice on Prefix(k) + extras (the
 * slice is built untimed, as a device would build it; the row hook serves
 * the row when a step needs it); and two limits on the same row in the
 * same round: the floor, the library's own vectorized max-reduction
 * through its run-time CPU dispatch (core/cpu.c: SSE2, AVX2 or AVX-512F,
 * capped by SIFT_SIMD), the least any pass over every logit costs, and
 * memcpy of the row. Every timed call reads a row that an untimed
 * max-reduction has just read, so all of them see it in cache alike.
 * Reports medians, and each ratio as the median over rounds of the
 * round's pair, so a load that changes during the run moves both.
 * Each path has its own chain so the histories do not mix.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "core/simd.h"
#include "npy.h"
#include "sift.h"

#define BENCH_ROWS 8
#define BENCH_DEFAULT_V 151936

static void help(FILE *f)
{
    fprintf(f,
            "usage: sift bench [CONFIG] [--vocab N] [--reps R] [--json]\n"
            "\n"
            "Times CONFIG's chain (default: the production chain of\n"
            "examples/production.yaml) on synthetic rows of N logits: sift_chain_sample\n"
            "on the whole row and sift_chain_sample_slice at the planned k (when the\n"
            "plan has one), against two limits measured on the same rows in the same\n"
            "run: the library's vectorized max-reduction (the floor; SSE2, AVX2 or\n"
            "AVX-512F as the CPU and SIFT_SIMD allow) and memcpy of the row. Prints the\n"
            "medians per call and the ratios (medians over rounds).\n"
            "\n"
            "options:\n"
            "  --vocab N   row length (default: the config's vocab_size, else %d)\n"
            "  --reps R    timed calls per path (default 200)\n"
            "  --json      print one JSON object\n"
            "  -h, --help  print this help\n"
            "\n"
            "exit status: 0 ok, 1 invalid config, 2 usage or I/O error\n",
            BENCH_DEFAULT_V);
}

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s)
{
    return ((double)(mix(s) >> 11) + 0.5) / 9007199254740992.0;
}

static void fill_rows(float *rows, int32_t V)
{
    uint64_t s = 20261130;
    for (size_t i = 0; i < (size_t)BENCH_ROWS * (size_t)V; i++)
        rows[i] = (float)(2.0 * sqrt(-2.0 * log(unit(&s))) * cos(6.283185307179586 * unit(&s)));
    for (int r = 0; r < BENCH_ROWS; r++)
        for (int j = 0; j < 5; j++) /* a few clear winners, as real rows have */
            rows[(size_t)r * (size_t)V + mix(&s) % (uint64_t)V] = (float)(8.0 + 4.0 * unit(&s));
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The round's ratio a / b, 0 when b is 0 (a clock too coarse). */
static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

typedef struct bench_hook {
    const float *row;
} bench_hook;

static int serve_row(void *user, float *row, int32_t n_vocab)
{
    memcpy(row, ((const bench_hook *)user)->row, (size_t)n_vocab * sizeof *row);
    return 0;
}

int cmd_bench(int argc, char **argv, FILE *out, FILE *errout)
{
    const char *config = NULL, *prog = "sift bench";
    long vocab = 0, reps = 200;
    int json = 0;
    if (argc > 1 && !strcmp(argv[1], "maskbench"))
        return cmd_maskbench(argc - 1, argv + 1, out, errout);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(out);
            return cmd_finish(out, errout, CMD_OK);
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if ((!strcmp(a, "--vocab") || !strcmp(a, "--reps")) && i + 1 < argc) {
            const char *v = argv[++i];
            char *end;
            errno = 0;
            long x = strtol(v, &end, 10);
            long hi = !strcmp(a, "--vocab") ? NPY_MAX_VOCAB : 1000000;
            if (end == v || *end || errno || x < 1 || x > hi) {
                fprintf(errout, "%s: %s needs an integer in [1, %ld], got '%s'\n", prog, a, hi, v);
                return CMD_USAGE;
            }
            *(!strcmp(a, "--vocab") ? &vocab : &reps) = x;
        } else if (a[0] != '-' && !config) {
            config = a;
        } else {
            fprintf(errout, "%s: unexpected argument '%s'\n", prog, a);
            fprintf(errout, "Run 'sift bench --help' for the options.\n");
            return CMD_USAGE;
        }
    }
    /* The row length: --vocab, else the config's vocab_size, else the
     * production default. cli_load_chain rejects a --vocab that differs
     * from the config's vocab_size. */
    int32_t V = (int32_t)vocab;
    if (V == 0) {
        int32_t cv = cli_config_vocab_size(config);
        V = cv > 0 ? cv : BENCH_DEFAULT_V;
    }
    sift_chain *whole = NULL, *sliced = NULL;
    sift_slicer *slicer = NULL;
    float *rows = NULL;
    double *t_sample = NULL, *t_slice = NULL, *t_floor = NULL, *t_memcpy = NULL;
    double *r_floor = NULL, *r_memcpy = NULL, *r_slice = NULL;
    float *dst = NULL;
    int32_t *ids = NULL;
    int status = cli_load_chain(prog, config, V, 0, &whole, errout);
    if (status == CMD_OK)
        status = cli_load_chain(prog, config, V, 0, &sliced, errout);
    if (status != CMD_OK)
        goto done;
    sift_error err;
    sift_plan plan = {.struct_size = sizeof(sift_plan)};
    if (sift_chain_plan(whole, &plan, NULL, &err) != SIFT_OK) {
        fprintf(errout, "%s: %s\n", prog, err.message);
        status = CMD_FAIL;
        goto done;
    }
    size_t ids_cap = plan.max_extras > 0 ? (size_t)plan.max_extras : 1;
    rows = malloc((size_t)BENCH_ROWS * (size_t)V * sizeof *rows);
    t_sample = malloc((size_t)reps * sizeof *t_sample);
    t_slice = malloc((size_t)reps * sizeof *t_slice);
    t_floor = malloc((size_t)reps * sizeof *t_floor);
    t_memcpy = malloc((size_t)reps * sizeof *t_memcpy);
    r_floor = malloc((size_t)reps * sizeof *r_floor);
    r_memcpy = malloc((size_t)reps * sizeof *r_memcpy);
    r_slice = malloc((size_t)reps * sizeof *r_slice);
    dst = malloc((size_t)V * sizeof *dst);
    ids = malloc(ids_cap * sizeof *ids);
    if (!rows || !t_sample || !t_slice || !t_floor || !t_memcpy || !r_floor || !r_memcpy ||
        !r_slice || !dst || !ids) {
        fprintf(errout, "%s: out of memory\n", prog);
        status = CMD_USAGE;
        goto done;
    }
    fill_rows(rows, V);
    bench_hook hook = {rows};
    int do_slice = plan.k > 0;
    if (do_slice && (sift_slicer_new(&slicer, V, NULL, &err) != SIFT_OK ||
                     sift_chain_set_row_hook(sliced, serve_row, &hook, &err) != SIFT_OK)) {
        fprintf(errout, "%s: %s\n", prog, err.message);
        status = CMD_USAGE;
        goto done;
    }
    const sift__simd_ops *ops = sift__simd();
    volatile float sink = 0;
    for (long r = -2; r < reps; r++) { /* two untimed warm-up rounds */
        const float *row = rows + (size_t)((r + 2) % BENCH_ROWS) * (size_t)V;
        int32_t tok;
        sink = sink + ops->max_f32(row, (size_t)V); /* the row in cache for all */
        double t4 = now_ns();
        float m = ops->max_f32(row, (size_t)V);
        double t5 = now_ns();
        memcpy(dst, row, (size_t)V * sizeof *dst);
        double t6 = now_ns();
        sink = sink + m + dst[(size_t)(r + 2) % (size_t)V];
        double t0 = now_ns();
        sift_status st = sift_chain_sample(whole, row, V, &tok, &err);
        double t1 = now_ns();
        if (st == SIFT_OK)
            st = sift_chain_accept(whole, tok, &err);
        if (st == SIFT_OK && do_slice) {
            size_t n_ids = 0;
            sift_slice slice;
            st = sift_chain_extras(sliced, ids, ids_cap, &n_ids, &err);
            if (st == SIFT_OK)
                st = sift_slicer_build(slicer, row, V, plan.k, ids, n_ids, &slice, &err);
            hook.row = row;
            double t2 = now_ns();
            if (st == SIFT_OK)
                st = sift_chain_sample_slice(sliced, &slice, &tok, &err);
            double t3 = now_ns();
            if (st == SIFT_OK)
                st = sift_chain_accept(sliced, tok, &err);
            if (r >= 0) {
                t_slice[r] = t3 - t2;
                r_slice[r] = ratio(t3 - t2, t5 - t4);
            }
        }
        if (st != SIFT_OK) {
            fprintf(errout, "%s: %s\n", prog, err.message);
            status = CMD_FAIL;
            goto done;
        }
        if (r >= 0) {
            t_sample[r] = t1 - t0;
            t_floor[r] = t5 - t4;
            t_memcpy[r] = t6 - t5;
            r_floor[r] = ratio(t1 - t0, t5 - t4);
            r_memcpy[r] = ratio(t1 - t0, t6 - t5);
        }
    }
    (void)sink;
    sift_stats stats = {.struct_size = sizeof(sift_stats)};
    if (sift_chain_stats(sliced, &stats, NULL))
        memset(&stats.slice_decided, 0, sizeof stats - offsetof(sift_stats, slice_decided));
    double ms = median(t_sample, (size_t)reps), mf = median(t_floor, (size_t)reps);
    double mm = median(t_memcpy, (size_t)reps);
    double ml = do_slice ? median(t_slice, (size_t)reps) : 0.0;
    double xf = median(r_floor, (size_t)reps), xm = median(r_memcpy, (size_t)reps);
    double xl = do_slice ? median(r_slice, (size_t)reps) : 0.0;
    const char *name = config ? config : "production (built in)";
    if (json) {
        fprintf(out, "{\"config\": ");
        cli_json_str(out, config ? config : "production");
        fprintf(out,
                ", \"n_vocab\": %" PRId32 ", \"reps\": %ld, \"k\": %" PRId32
                ", \"guarantee\": \"%s\", \"sample_ns\": %.0f, \"floor\": \"%s\", "
                "\"floor_ns\": %.0f, \"memcpy_ns\": %.0f, \"sample_over_floor\": %.3f, "
                "\"sample_over_memcpy\": %.3f",
                V, reps, plan.k, sift_guarantee_str(plan.guarantee), ms, ops->name, mf, mm, xf, xm);
        if (do_slice)
            fprintf(out,
                    ", \"slice_ns\": %.0f, \"sample_over_slice\": %.3f, \"slice_over_floor\": "
                    "%.3f, \"hook_calls\": %" PRIu64,
                    ml, ml > 0 ? ms / ml : 0.0, xl, stats.hook_calls);
        fprintf(out, "}\n");
    } else {
        fprintf(out, "config      %s\nV           %" PRId32 "\nreps        %ld\n", name, V, reps);
        fprintf(out, "plan        k = %" PRId32 " (%s): %s\n", plan.k,
                sift_guarantee_str(plan.guarantee), plan.why);
        fprintf(out, "floor       %12.0f ns/row (median): the library's max-reduction (%s)\n", mf,
                ops->name);
        fprintf(out, "memcpy      %12.0f ns/row (median)\n", mm);
        fprintf(out, "sample      %12.0f ns/call (median) = %.2fx the floor, %.2fx memcpy\n", ms,
                xf, xm);
        if (do_slice)
            fprintf(out,
                    "slice       %12.0f ns/call (median) = %.2fx the floor, %.1fx faster than "
                    "sample; hook calls %" PRIu64 "\n",
                    ml, xl, ml > 0 ? ms / ml : 0.0, stats.hook_calls);
        else
            fprintf(out, "slice       n/a (the plan needs the whole row)\n");
    }
done:
    free(ids);
    free(dst);
    free(r_slice);
    free(r_memcpy);
    free(r_floor);
    free(t_memcpy);
    free(t_floor);
    free(t_slice);
    free(t_sample);
    free(rows);
    sift_slicer_free(slicer);
    sift_chain_free(sliced);
    sift_chain_free(whole);
    return cmd_finish(out, errout, status);
}

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

/* What the command line asked for. */
typedef struct bench_opts {
    const char *config;
    long vocab, reps;
    int json;
} bench_opts;

/* One run: the two chains (whole row, slice), the plan, the rows and
 * buffers, and per round the times of each path and the round's ratios. */
typedef struct bench_run {
    sift_chain *whole, *sliced;
    sift_slicer *slicer;
    sift_plan plan;
    int32_t V;
    long reps;
    int do_slice;
    float *rows, *dst;
    int32_t *ids;
    size_t ids_cap;
    bench_hook hook;
    double *t_sample, *t_slice, *t_floor, *t_memcpy;
    double *r_floor, *r_memcpy, *r_slice;
} bench_run;

/* Reads the options into *o: -1 to go on, else the exit status (help
 * printed, or a usage error reported). */
static int parse_args(int argc, char **argv, bench_opts *o, FILE *out, FILE *errout)
{
    const char *prog = "sift bench";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(out);
            return cmd_finish(out, errout, CMD_OK);
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
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
            *(!strcmp(a, "--vocab") ? &o->vocab : &o->reps) = x;
        } else if (a[0] != '-' && !o->config) {
            o->config = a;
        } else {
            fprintf(errout, "%s: unexpected argument '%s'\n", prog, a);
            fprintf(errout, "Run 'sift bench --help' for the options.\n");
            return CMD_USAGE;
        }
    }
    return -1;
}

/* Allocates the rows, the buffers and the per-round arrays; 0 when one
 * is missing (the caller frees what was allocated). */
static int bench_alloc(bench_run *b)
{
    size_t reps = (size_t)b->reps;
    b->ids_cap = b->plan.max_extras > 0 ? (size_t)b->plan.max_extras : 1;
    b->rows = malloc((size_t)BENCH_ROWS * (size_t)b->V * sizeof *b->rows);
    b->t_sample = malloc(reps * sizeof *b->t_sample);
    b->t_slice = malloc(reps * sizeof *b->t_slice);
    b->t_floor = malloc(reps * sizeof *b->t_floor);
    b->t_memcpy = malloc(reps * sizeof *b->t_memcpy);
    b->r_floor = malloc(reps * sizeof *b->r_floor);
    b->r_memcpy = malloc(reps * sizeof *b->r_memcpy);
    b->r_slice = malloc(reps * sizeof *b->r_slice);
    b->dst = malloc((size_t)b->V * sizeof *b->dst);
    b->ids = malloc(b->ids_cap * sizeof *b->ids);
    return b->rows && b->t_sample && b->t_slice && b->t_floor && b->t_memcpy && b->r_floor &&
           b->r_memcpy && b->r_slice && b->dst && b->ids;
}

/* Frees everything bench_run holds (NULL members are fine). */
static void bench_free(bench_run *b)
{
    free(b->ids);
    free(b->dst);
    free(b->r_slice);
    free(b->r_memcpy);
    free(b->r_floor);
    free(b->t_memcpy);
    free(b->t_floor);
    free(b->t_slice);
    free(b->t_sample);
    free(b->rows);
    sift_slicer_free(b->slicer);
    sift_chain_free(b->sliced);
    sift_chain_free(b->whole);
}

/* Round r on `row`: the sliced path (extras, untimed slice build, timed
 * sample_slice, accept); its time and ratio to `floor_ns` stored when
 * r >= 0. */
static sift_status bench_slice_round(bench_run *b, long r, const float *row, double floor_ns,
                                     sift_error *err)
{
    int32_t tok;
    size_t n_ids = 0;
    sift_slice slice;
    sift_status st = sift_chain_extras(b->sliced, b->ids, b->ids_cap, &n_ids, err);
    if (st == SIFT_OK)
        st = sift_slicer_build(b->slicer, row, b->V, b->plan.k, b->ids, n_ids, &slice, err);
    b->hook.row = row;
    double t2 = now_ns();
    if (st == SIFT_OK)
        st = sift_chain_sample_slice(b->sliced, &slice, &tok, err);
    double t3 = now_ns();
    if (st == SIFT_OK)
        st = sift_chain_accept(b->sliced, tok, err);
    if (r >= 0) {
        b->t_slice[r] = t3 - t2;
        b->r_slice[r] = ratio(t3 - t2, floor_ns);
    }
    return st;
}

/* Two untimed warm-up rounds, then reps timed ones: per round the floor,
 * memcpy, the whole-row sample and (when planned) the slice, on a row an
 * untimed max-reduction has just read. CMD_OK or CMD_FAIL (reported). */
static int bench_rounds(bench_run *b, const char *prog, FILE *errout)
{
    const sift__simd_ops *ops = sift__simd();
    int32_t V = b->V;
    sift_error err;
    volatile float sink = 0;
    for (long r = -2; r < b->reps; r++) {
        const float *row = b->rows + (size_t)((r + 2) % BENCH_ROWS) * (size_t)V;
        int32_t tok;
        sink = sink + ops->max_f32(row, (size_t)V); /* the row in cache for all */
        double t4 = now_ns();
        float m = ops->max_f32(row, (size_t)V);
        double t5 = now_ns();
        memcpy(b->dst, row, (size_t)V * sizeof *b->dst);
        double t6 = now_ns();
        sink = sink + m + b->dst[(size_t)(r + 2) % (size_t)V];
        double t0 = now_ns();
        sift_status st = sift_chain_sample(b->whole, row, V, &tok, &err);
        double t1 = now_ns();
        if (st == SIFT_OK)
            st = sift_chain_accept(b->whole, tok, &err);
        if (st == SIFT_OK && b->do_slice)
            st = bench_slice_round(b, r, row, t5 - t4, &err);
        if (st != SIFT_OK) {
            fprintf(errout, "%s: %s\n", prog, err.message);
            return CMD_FAIL;
        }
        if (r >= 0) {
            b->t_sample[r] = t1 - t0;
            b->t_floor[r] = t5 - t4;
            b->t_memcpy[r] = t6 - t5;
            b->r_floor[r] = ratio(t1 - t0, t5 - t4);
            b->r_memcpy[r] = ratio(t1 - t0, t6 - t5);
        }
    }
    (void)sink;
    return CMD_OK;
}

/* Prints the medians and ratios, as text or one JSON object. */
static void bench_report(bench_run *b, const bench_opts *o, FILE *out)
{
    const sift__simd_ops *ops = sift__simd();
    const char *config = o->config;
    size_t reps = (size_t)b->reps;
    int do_slice = b->do_slice;
    sift_stats stats = {.struct_size = sizeof(sift_stats)};
    if (sift_chain_stats(b->sliced, &stats, NULL))
        memset(&stats.slice_decided, 0, sizeof stats - offsetof(sift_stats, slice_decided));
    double ms = median(b->t_sample, reps), mf = median(b->t_floor, reps);
    double mm = median(b->t_memcpy, reps);
    double ml = do_slice ? median(b->t_slice, reps) : 0.0;
    double xf = median(b->r_floor, reps), xm = median(b->r_memcpy, reps);
    double xl = do_slice ? median(b->r_slice, reps) : 0.0;
    const char *name = config ? config : "production (built in)";
    if (o->json) {
        fprintf(out, "{\"config\": ");
        cli_json_str(out, config ? config : "production");
        fprintf(out,
                ", \"n_vocab\": %" PRId32 ", \"reps\": %ld, \"k\": %" PRId32
                ", \"guarantee\": \"%s\", \"sample_ns\": %.0f, \"floor\": \"%s\", "
                "\"floor_ns\": %.0f, \"memcpy_ns\": %.0f, \"sample_over_floor\": %.3f, "
                "\"sample_over_memcpy\": %.3f",
                b->V, b->reps, b->plan.k, sift_guarantee_str(b->plan.guarantee), ms, ops->name, mf,
                mm, xf, xm);
        if (do_slice)
            fprintf(out,
                    ", \"slice_ns\": %.0f, \"sample_over_slice\": %.3f, \"slice_over_floor\": "
                    "%.3f, \"hook_calls\": %" PRIu64,
                    ml, ml > 0 ? ms / ml : 0.0, xl, stats.hook_calls);
        fprintf(out, "}\n");
        return;
    }
    fprintf(out, "config      %s\nV           %" PRId32 "\nreps        %ld\n", name, b->V, b->reps);
    fprintf(out, "plan        k = %" PRId32 " (%s): %s\n", b->plan.k,
            sift_guarantee_str(b->plan.guarantee), b->plan.why);
    fprintf(out, "floor       %12.0f ns/row (median): the library's max-reduction (%s)\n", mf,
            ops->name);
    fprintf(out, "memcpy      %12.0f ns/row (median)\n", mm);
    fprintf(out, "sample      %12.0f ns/call (median) = %.2fx the floor, %.2fx memcpy\n", ms, xf,
            xm);
    if (do_slice)
        fprintf(out,
                "slice       %12.0f ns/call (median) = %.2fx the floor, %.1fx faster than "
                "sample; hook calls %" PRIu64 "\n",
                ml, xl, ml > 0 ? ms / ml : 0.0, stats.hook_calls);
    else
        fprintf(out, "slice       n/a (the plan needs the whole row)\n");
}

int cmd_bench(int argc, char **argv, FILE *out, FILE *errout)
{
    const char *prog = "sift bench";
    bench_opts o = {.config = NULL, .vocab = 0, .reps = 200, .json = 0};
    if (argc > 1 && !strcmp(argv[1], "maskbench"))
        return cmd_maskbench(argc - 1, argv + 1, out, errout);
    int rc = parse_args(argc, argv, &o, out, errout);
    if (rc >= 0)
        return rc;
    /* The row length: --vocab, else the config's vocab_size, else the
     * production default. cli_load_chain rejects a --vocab that differs
     * from the config's vocab_size. */
    bench_run b = {.V = (int32_t)o.vocab, .reps = o.reps};
    b.plan = (sift_plan){.struct_size = sizeof(sift_plan)};
    if (b.V == 0) {
        int32_t cv = cli_config_vocab_size(o.config);
        b.V = cv > 0 ? cv : BENCH_DEFAULT_V;
    }
    int status = cli_load_chain(prog, o.config, b.V, 0, &b.whole, errout);
    if (status == CMD_OK)
        status = cli_load_chain(prog, o.config, b.V, 0, &b.sliced, errout);
    if (status != CMD_OK)
        goto done;
    sift_error err;
    if (sift_chain_plan(b.whole, &b.plan, NULL, &err) != SIFT_OK) {
        fprintf(errout, "%s: %s\n", prog, err.message);
        status = CMD_FAIL;
        goto done;
    }
    if (!bench_alloc(&b)) {
        fprintf(errout, "%s: out of memory\n", prog);
        status = CMD_USAGE;
        goto done;
    }
    fill_rows(b.rows, b.V);
    b.hook.row = b.rows;
    b.do_slice = b.plan.k > 0;
    if (b.do_slice && (sift_slicer_new(&b.slicer, b.V, NULL, &err) != SIFT_OK ||
                       sift_chain_set_row_hook(b.sliced, serve_row, &b.hook, &err) != SIFT_OK)) {
        fprintf(errout, "%s: %s\n", prog, err.message);
        status = CMD_USAGE;
        goto done;
    }
    status = bench_rounds(&b, prog, errout);
    if (status == CMD_OK)
        bench_report(&b, &o, out);
done:
    bench_free(&b);
    return cmd_finish(out, errout, status);
}

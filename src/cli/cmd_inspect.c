/*
 * cmd_inspect.c - `sift inspect CONFIG --logits ROW.npy`: walks one row
 * through a config's chain and shows what every stage leaves.
 *
 * What it owns: the inspect subcommand. For each stage before the
 * selector it runs the chain's first i stages on the row (the public
 * sift_chain_survivors, so the view is the sampling path's own
 * arithmetic) and prints the survivors in canonical order with p = the
 * softmax over that stage's survivors (double; for display only). The
 * last block is sift_chain_distribution: what the selector draws from.
 * The row is the .npy file's first row; --history is fed as prompt first.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "npy.h"
#include "sift.h"

static void help(FILE *f)
{
    fprintf(f, "usage: sift inspect CONFIG --logits ROW.npy [--history IDS] [--top N] [--json]\n"
               "\n"
               "Walks the first row of ROW.npy through the chain of CONFIG stage by stage:\n"
               "after each stage, the number of surviving tokens and the first N of them\n"
               "(logit descending, id ascending) with their logit and p, the softmax over\n"
               "that stage's survivors; last, the distribution the selector draws from.\n"
               "\n"
               "options:\n"
               "  --logits FILE  the row of logits (.npy, shape (V,) or (steps, V)); required\n"
               "  --history IDS  comma-separated token ids fed as prompt first\n"
               "  --top N        tokens shown per stage (default 10, 0 = all)\n"
               "  --json         print one JSON object: {\"stages\": [{\"name\", \"size\",\n"
               "                 \"tokens\": [{\"id\", \"logit\", \"p\"}...]}...]}\n"
               "  -h, --help     print this help\n"
               "\n"
               "exit status: 0 ok, 1 invalid input or config, 2 usage or I/O error\n");
}

/* Prints a float so that JSON readers get it back exactly (-inf has no
 * JSON form: it never occurs, survivors are finite). */
static void print_stage(FILE *out, int json, int first, const char *name, size_t size,
                        const sift_candidate *c, const double *p, size_t shown)
{
    if (json) {
        fprintf(out, "%s{\"name\": \"%s\", \"size\": %zu, \"tokens\": [", first ? "" : ", ", name,
                size);
        for (size_t i = 0; i < shown; i++)
            fprintf(out, "%s{\"id\": %" PRId32 ", \"logit\": %.9g, \"p\": %.17g}", i ? ", " : "",
                    c[i].id, (double)c[i].logit, p[i]);
        fprintf(out, "]}");
        return;
    }
    fprintf(out, "%s: %zu token%s\n", name, size, size == 1 ? "" : "s");
    for (size_t i = 0; i < shown; i++)
        fprintf(out, "  %8" PRId32 "  logit %12.6g  p %.6f\n", c[i].id, (double)c[i].logit, p[i]);
    if (shown < size)
        fprintf(out, "  ... %zu more\n", size - shown);
}

/* p = softmax over all `n` survivors (canonical order: c[0] is the max). */
static void softmax(const sift_candidate *c, size_t n, double *p, size_t shown)
{
    double sum = 0.0;
    for (size_t i = n; i-- > 0;) /* smallest first, for accuracy */
        sum += exp((double)c[i].logit - (double)c[0].logit);
    for (size_t i = 0; i < shown; i++)
        p[i] = exp((double)c[i].logit - (double)c[0].logit) / sum;
}

/* What the command line asked for. */
typedef struct inspect_opts {
    const char *config, *logits, *history;
    long top; /* candidates shown per stage, 0 for all */
    int json;
} inspect_opts;

/* Reads the options into *o: -1 to go on, else the exit status (help
 * printed, or a usage error reported). */
static int parse_args(int argc, char **argv, inspect_opts *o, const char *prog, FILE *out,
                      FILE *errout)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(out);
            return cmd_finish(out, errout, CMD_OK);
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if ((!strcmp(a, "--logits") || !strcmp(a, "--top") || !strcmp(a, "--history")) &&
                   i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(a, "--logits")) {
                o->logits = v;
            } else if (!strcmp(a, "--history")) {
                o->history = v;
            } else {
                char *end;
                errno = 0;
                o->top = strtol(v, &end, 10);
                if (end == v || *end || errno || o->top < 0 || o->top > NPY_MAX_VOCAB) {
                    fprintf(errout, "%s: --top needs an integer in [0, %d], got '%s'\n", prog,
                            NPY_MAX_VOCAB, v);
                    return CMD_USAGE;
                }
            }
        } else if (a[0] != '-' && !o->config) {
            o->config = a;
        } else {
            fprintf(errout, "%s: unexpected argument '%s'\n", prog, a);
            fprintf(errout, "Run 'sift inspect --help' for the options.\n");
            return CMD_USAGE;
        }
    }
    if (!o->config || !o->logits) {
        fprintf(errout, "%s: %s\n", prog, !o->config ? "no config given" : "--logits is required");
        help(errout);
        return CMD_USAGE;
    }
    return -1;
}

/* Prints the survivors after each stage of `chain` on `row` (the input
 * first), then the final distribution dist[0 .. n_dist), at most `limit`
 * each; cand and p hold V entries. CMD_OK or CMD_FAIL (reported). */
static int print_stages(sift_chain *chain, const float *row, int32_t V, const sift_token_prob *dist,
                        size_t n_dist, size_t limit, sift_candidate *cand, double *p, int json,
                        const char *prog, FILE *out, FILE *errout)
{
    sift_error err;
    if (json)
        fprintf(out, "{\"n_vocab\": %" PRId32 ", \"stages\": [", V);
    size_t n_stages = sift_chain_n_stages(chain);
    for (size_t i = 0; i < n_stages; i++) {
        /* i = 0 is the input row, i >= 1 the first i stages; the selector
         * (the last stage) is shown by the distribution below. */
        size_t n = 0;
        if (sift_chain_survivors(chain, row, V, i, cand, (size_t)V, &n, &err) != SIFT_OK) {
            fprintf(errout, "%s: stage %zu: %s\n", prog, i, err.message);
            return CMD_FAIL;
        }
        size_t shown = n < limit ? n : limit;
        softmax(cand, n, p, shown);
        print_stage(out, json, i == 0, i == 0 ? "input" : sift_chain_stage_name(chain, i - 1), n,
                    cand, p, shown);
    }
    size_t shown = n_dist < limit ? n_dist : limit;
    for (size_t i = 0; i < shown; i++) {
        cand[i].id = dist[i].id;
        cand[i].logit = dist[i].logit;
        p[i] = dist[i].p;
    }
    char name[96];
    snprintf(name, sizeof name, "%s (final distribution)",
             sift_chain_stage_name(chain, n_stages - 1));
    print_stage(out, json, 0, name, n_dist, cand, p, shown);
    if (json)
        fprintf(out, "]}\n");
    return CMD_OK;
}

int cmd_inspect(int argc, char **argv, FILE *out, FILE *errout)
{
    const char *prog = "sift inspect";
    inspect_opts o = {.config = NULL, .logits = NULL, .history = NULL, .top = 10, .json = 0};
    int rc = parse_args(argc, argv, &o, prog, out, errout);
    if (rc >= 0)
        return rc;
    int32_t *hist = NULL;
    size_t n_hist = 0;
    if (o.history && cli_parse_history(prog, o.history, &hist, &n_hist, errout) != CMD_OK)
        return CMD_USAGE;
    npy_rows rows;
    char msg[512];
    rc = npy_load(o.logits, &rows, msg, sizeof msg);
    if (rc) {
        fprintf(errout, "%s: %s\n", prog, msg);
        free(hist);
        return rc == 1 ? CMD_FAIL : CMD_USAGE;
    }
    const int32_t V = rows.n_vocab;
    sift_chain *chain = NULL;
    sift_candidate *cand = NULL;
    sift_token_prob *dist = NULL;
    double *p = NULL;
    int status = cli_load_chain(prog, o.config, V, 0, &chain, errout);
    if (status == CMD_OK)
        status = cli_feed_history(prog, chain, hist, n_hist, V, errout);
    if (status != CMD_OK)
        goto done;
    cand = malloc((size_t)V * sizeof *cand);
    dist = malloc((size_t)V * sizeof *dist);
    p = malloc((size_t)V * sizeof *p);
    if (!cand || !dist || !p) {
        fprintf(errout, "%s: out of memory\n", prog);
        status = CMD_USAGE;
        goto done;
    }
    sift_error err;
    size_t n_dist = 0;
    /* The distribution first: it validates the row and the chain. */
    if (sift_chain_distribution(chain, rows.data, V, dist, (size_t)V, &n_dist, &err) != SIFT_OK) {
        fprintf(errout, "%s: %s\n", prog, err.message);
        status = CMD_FAIL;
        goto done;
    }
    size_t limit = o.top == 0 ? (size_t)V : (size_t)o.top;
    status =
        print_stages(chain, rows.data, V, dist, n_dist, limit, cand, p, o.json, prog, out, errout);
done:
    free(p);
    free(dist);
    free(cand);
    free(hist);
    sift_chain_free(chain);
    npy_free(&rows);
    return cmd_finish(out, errout, status);
}

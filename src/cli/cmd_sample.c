/*
 * cmd_sample.c - `sift sample CONFIG --logits ROWS.npy`: runs a config's
 * chain over recorded logits, one token per row.
 *
 * What it owns: the sample subcommand and the helpers the other commands
 * share (cli_load_chain, the CLI's one chain loader: config + vocabulary
 * + chain, for sample, inspect, bench and plan; cli_parse_history;
 * cli_feed_history). Invariant the test suite checks: the token sequence
 * with --slice K is the one without, for every K, because every step goes
 * through sift_chain_sample_slice with the row hook serving that step's
 * row (the slice path may fall back to it, never guess).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "npy.h"
#include "sift.h"

/* The chain `sift bench` uses without a CONFIG: examples/production.yaml
 * without its vocab_size (so any row length works). */
static const char PRODUCTION_YAML[] =
    "seed: 1234\n"
    "chain:\n"
    "  - penalties: {last_n: 64, repeat: 1.1, frequency: 0.0, presence: 0.0}\n"
    "  - top_k: 20\n"
    "  - top_p: 0.95\n"
    "  - min_p: 0.05\n"
    "  - temperature: 0.8\n"
    "  - dist\n";

/* The form of the configs loaded (cli_set_form). */
static int32_t g_form = SIFT_CONFIG_FORM_DOCUMENT;

void cli_set_form(int32_t form)
{
    g_form = form;
}

int32_t cli_form(void)
{
    return g_form;
}

int cli_parse_form(const char *prog, const char *name, int32_t *form, FILE *errout)
{
    if (!strcmp(name, "openai"))
        *form = SIFT_CONFIG_FORM_OPENAI;
    else if (!strcmp(name, "llama.cpp"))
        *form = SIFT_CONFIG_FORM_LLAMA_CPP;
    else if (!strcmp(name, "document"))
        *form = SIFT_CONFIG_FORM_DOCUMENT;
    else {
        fprintf(errout, "%s: --form must be openai, llama.cpp or document, got '%s'\n", prog, name);
        return CMD_USAGE;
    }
    return CMD_OK;
}

static sift_status load_config(sift_config **cfg, const char *path, sift_error *err)
{
    if (!path)
        return sift_config_parse(cfg, "<production>", PRODUCTION_YAML, sizeof PRODUCTION_YAML - 1,
                                 NULL, err);
    sift_config_params p;
    sift_config_params_init(&p);
    p.form = g_form;
    return sift_config_load(cfg, path, &p, err);
}

int32_t cli_config_vocab_size(const char *path)
{
    sift_config *cfg = NULL;
    sift_error err;
    if (load_config(&cfg, path, &err) != SIFT_OK) {
        sift_config_free(cfg);
        return 0; /* cli_load_chain reports it */
    }
    int32_t v = sift_config_vocab_size(cfg);
    sift_config_free(cfg);
    return v;
}

void cli_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
    fputc('"', out);
}

void cli_diag(FILE *errout, const char *prog, const char *path, const char *severity,
              const sift_error *err)
{
    const char *m = err->message, *pp = prog ? prog : "", *sep = prog ? ": " : "";
    size_t n = strlen(err->source);
    if (n && !strncmp(m, err->source, n) && m[n] == ':') {
        /* The place: SOURCE, then ":LINE:COL" or ": offset N" if present. */
        const char *q = m + n;
        for (int k = 0; k < 2 && q[0] == ':' && q[1] >= '0' && q[1] <= '9'; k++)
            for (q++; *q >= '0' && *q <= '9'; q++)
                ;
        if (!strncmp(q, ": offset ", 9) && q[9] >= '0' && q[9] <= '9')
            for (q += 9; *q >= '0' && *q <= '9'; q++)
                ;
        if (q[0] == ':' && q[1] == ' ') {
            fprintf(errout, "%s%s%.*s: %s: %s\n", pp, sep, (int)(q - m), m, severity, q + 2);
            return;
        }
    }
    fprintf(errout, "%s%s%s: %s: %s\n", pp, sep, path, severity, m);
}

void cli_error(FILE *errout, const char *prog, const char *path, const sift_error *err)
{
    cli_diag(errout, prog, path, "error", err);
}

int cli_config_vocab(const char *prog, const char *path, const sift_config *cfg, sift_vocab **vocab,
                     FILE *errout)
{
    sift_error err;
    *vocab = NULL;
    sift_status st = sift_config_load_vocab(cfg, NULL, vocab, &err);
    if (st != SIFT_OK) {
        cli_error(errout, prog, path, &err);
        return st == SIFT_E_IO ? CMD_USAGE : CMD_FAIL;
    }
    /* What needs a vocabulary the file does not name (a grammar, DRY's
     * breakers) is left to sift_config_build_chain, so that plan, sample
     * and inspect say it at the place and in the words sift check uses. */
    return CMD_OK;
}

int cli_load_chain(const char *prog, const char *path, int32_t n_vocab, unsigned flags,
                   sift_chain **chain, FILE *errout)
{
    *chain = NULL;
    sift_config *cfg = NULL;
    sift_error err;
    int like_check = (flags & CLI_LOAD_LIKE_CHECK) != 0;
    sift_status st = load_config(&cfg, path, &err);
    if (!path)
        path = "<production>";
    if (!cfg) {
        cli_error(errout, prog, path, &err);
        return like_check || st == SIFT_E_IO ? CMD_USAGE : CMD_FAIL;
    }
    if (st != SIFT_OK || like_check)
        for (size_t i = 0; i < sift_config_n_diagnostics(cfg); i++)
            fprintf(errout, "%s\n", sift_config_diagnostic(cfg, i)->text);
    if (st != SIFT_OK) {
        sift_config_free(cfg);
        return !like_check && st == SIFT_E_IO ? CMD_USAGE : CMD_FAIL;
    }
    int32_t cfg_v = sift_config_vocab_size(cfg);
    if (n_vocab > 0 && cfg_v > 0 && cfg_v != n_vocab) {
        fprintf(errout, "%s: %s: vocab_size %" PRId32 " but the logits rows have %" PRId32 "\n",
                prog, path, cfg_v, n_vocab);
        sift_config_free(cfg);
        return CMD_FAIL;
    }
    sift_vocab *vocab = NULL;
    int rc = cli_config_vocab(prog, path, cfg, &vocab, errout);
    if (rc != CMD_OK) {
        sift_config_free(cfg);
        return rc;
    }
    if (n_vocab > 0 && vocab && sift_vocab_size(vocab) != n_vocab) {
        fprintf(errout,
                "%s: vocabulary %s has %" PRId32 " tokens but the logits rows have %" PRId32 "\n",
                prog, sift_config_vocab_path(cfg), sift_vocab_size(vocab), n_vocab);
        sift_vocab_free(vocab);
        sift_config_free(cfg);
        return CMD_FAIL;
    }
    sift_chain_params params;
    sift_chain_params_init(&params);
    params.n_vocab = n_vocab;
    st = sift_config_build_chain(cfg, n_vocab > 0 ? &params : NULL, vocab, chain, &err);
    sift_vocab_free(vocab);
    sift_config_free(cfg);
    if (st != SIFT_OK) {
        cli_error(errout, prog, path, &err);
        return CMD_FAIL;
    }
    return CMD_OK;
}

int cli_parse_history(const char *prog, const char *text, int32_t **ids, size_t *n, FILE *errout)
{
    *ids = NULL;
    *n = 0;
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == ',';
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) {
        fprintf(errout, "%s: out of memory\n", prog);
        return CMD_USAGE;
    }
    const char *p = text;
    size_t k = 0;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            fprintf(errout, "%s: --history: bad token id at character %zu of '%s'\n", prog,
                    (size_t)(p - text) + 1, text);
            free(v);
            return CMD_USAGE;
        }
        v[k++] = (int32_t)x;
        p = *end ? end + 1 : end;
    }
    *ids = v;
    *n = k;
    return CMD_OK;
}

int cli_feed_history(const char *prog, sift_chain *chain, const int32_t *ids, size_t n,
                     int32_t n_vocab, FILE *errout)
{
    sift_error err;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= n_vocab) {
            fprintf(errout,
                    "%s: --history token %zu: id %" PRId32 " is not below V = %" PRId32 "\n", prog,
                    i, ids[i], n_vocab);
            return CMD_FAIL;
        }
        if (sift_chain_accept_prompt(chain, ids[i], &err) != SIFT_OK) {
            fprintf(errout, "%s: --history token %zu: %s\n", prog, i, err.message);
            return CMD_FAIL;
        }
    }
    return CMD_OK;
}

static void help(FILE *f)
{
    fprintf(f, "usage: sift sample CONFIG --logits ROWS.npy [--slice K] [--history IDS] [--json]\n"
               "\n"
               "Builds the chain of CONFIG (docs/config.md) and samples one token per row\n"
               "of ROWS.npy (little-endian float32, shape (steps, V) or (V,)), accepting\n"
               "each token before the next step. Prints one token id per line.\n"
               "\n"
               "options:\n"
               "  --logits FILE  the rows of logits (.npy); required\n"
               "  --slice K      sample each step from Prefix(K) + the chain's extras, with\n"
               "                 the row hook serving the whole row when the slice cannot\n"
               "                 decide; prints a summary of the bytes copied on stderr\n"
               "  --history IDS  comma-separated token ids fed as prompt before step 0\n"
               "  --json         print one JSON object (tokens and summary) instead\n"
               "  --form NAME    read CONFIG as a request of that form: openai or\n"
               "                 llama.cpp (default: the document's `form` key)\n"
               "  -h, --help     print this help\n"
               "\n"
               "exit status: 0 ok, 1 invalid input or config, 2 usage or I/O error\n");
}

typedef struct hook_ctx {
    const float *row;
} hook_ctx;

static int serve_row(void *user, float *row, int32_t n_vocab)
{
    const hook_ctx *h = user;
    memcpy(row, h->row, (size_t)n_vocab * sizeof *row);
    return 0;
}

/* What the command line asked for. */
typedef struct sample_opts {
    const char *config, *logits, *history;
    long k; /* --slice K, 0 for whole rows */
    int json;
    int32_t form; /* --form, SIFT_CONFIG_FORM_DOCUMENT by default */
} sample_opts;

/* One run over the rows: the chain, and for --slice the slicer, the
 * extras buffer, the hook's row and the (id, logit) pairs copied. */
typedef struct sample_run {
    sift_chain *chain;
    sift_slicer *slicer;
    int32_t V;
    int32_t *ids;
    size_t ids_cap;
    hook_ctx hook;
    uint64_t slice_pairs;
} sample_run;

/* Reads the options into *o: -1 to go on, else the exit status (help
 * printed, or a usage error reported). */
static int parse_args(int argc, char **argv, sample_opts *o, FILE *out, FILE *errout)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(out);
            return cmd_finish(out, errout, CMD_OK);
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--form") && i + 1 < argc) {
            if (cli_parse_form("sift sample", argv[++i], &o->form, errout) != CMD_OK)
                return CMD_USAGE;
        } else if ((!strcmp(a, "--logits") || !strcmp(a, "--slice") || !strcmp(a, "--history")) &&
                   i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(a, "--logits")) {
                o->logits = v;
            } else if (!strcmp(a, "--history")) {
                o->history = v;
            } else {
                char *end;
                errno = 0;
                o->k = strtol(v, &end, 10);
                if (end == v || *end || errno || o->k < 1 || o->k > NPY_MAX_VOCAB) {
                    fprintf(errout, "sift sample: --slice needs an integer in [1, %d], got '%s'\n",
                            NPY_MAX_VOCAB, v);
                    return CMD_USAGE;
                }
            }
        } else if (a[0] != '-' && !o->config) {
            o->config = a;
        } else {
            fprintf(errout, "sift sample: unexpected argument '%s'\n", a);
            fprintf(errout, "Run 'sift sample --help' for the options.\n");
            return CMD_USAGE;
        }
    }
    if (!o->config || !o->logits) {
        fprintf(errout, "sift sample: %s\n",
                !o->config ? "no config given" : "--logits is required");
        help(errout);
        return CMD_USAGE;
    }
    return -1;
}

/* For --slice: the slicer, the row hook and an extras buffer of the
 * plan's bound. CMD_OK, or CMD_USAGE (reported). */
static int slice_setup(sample_run *r, const char *prog, FILE *errout)
{
    sift_error err;
    sift_plan plan = {.struct_size = sizeof(sift_plan)};
    if (sift_chain_plan(r->chain, &plan, NULL, &err) != SIFT_OK ||
        sift_slicer_new(&r->slicer, r->V, NULL, &err) != SIFT_OK ||
        sift_chain_set_row_hook(r->chain, serve_row, &r->hook, &err) != SIFT_OK) {
        fprintf(errout, "%s: %s\n", prog, err.message);
        return CMD_USAGE;
    }
    r->ids_cap = plan.max_extras > 0 ? (size_t)plan.max_extras : 1;
    r->ids = malloc(r->ids_cap * sizeof *r->ids);
    if (!r->ids) {
        fprintf(errout, "%s: out of memory\n", prog);
        return CMD_USAGE;
    }
    return CMD_OK;
}

/* One step on Prefix(k) + the chain's extras of `row` (the extras buffer
 * grown when the dynamic set outgrew the plan's bound). *oom is set when
 * growing it failed. */
static sift_status slice_step(sample_run *r, const float *row, int32_t k, int32_t *tok,
                              sift_error *err, int *oom)
{
    size_t n_ids = 0;
    sift_status st = sift_chain_extras(r->chain, r->ids, r->ids_cap, &n_ids, err);
    if (st == SIFT_E_LIMIT) { /* the dynamic set outgrew the plan's bound */
        int32_t *grown = realloc(r->ids, n_ids * sizeof *r->ids);
        if (!grown) {
            *oom = 1;
            return st;
        }
        r->ids = grown;
        r->ids_cap = n_ids;
        st = sift_chain_extras(r->chain, r->ids, r->ids_cap, &n_ids, err);
    }
    sift_slice slice;
    if (st == SIFT_OK)
        st = sift_slicer_build(r->slicer, row, r->V, k, r->ids, n_ids, &slice, err);
    if (st == SIFT_OK) {
        r->hook.row = row;
        r->slice_pairs += (uint64_t)slice.n_prefix + (uint64_t)slice.n_extras;
        st = sift_chain_sample_slice(r->chain, &slice, tok, err);
    }
    return st;
}

/* Prints the JSON object, or for --slice the summary of bytes copied on
 * errout (the tokens themselves were printed as they came). */
static void sample_report(const sample_run *r, const sample_opts *o, const npy_rows *rows,
                          const int32_t *tokens, FILE *out, FILE *errout)
{
    sift_stats stats = {.struct_size = sizeof(sift_stats)};
    if (sift_chain_stats(r->chain, &stats, NULL))
        memset(&stats.slice_decided, 0, sizeof stats - offsetof(sift_stats, slice_decided));
    uint64_t whole = (uint64_t)rows->steps * (uint64_t)r->V * 4;
    uint64_t copied = r->slice_pairs * 8 + stats.hook_calls * (uint64_t)r->V * 4;
    if (o->json) {
        fprintf(out, "{\"n_vocab\": %" PRId32 ", \"steps\": %" PRId64 ", \"tokens\": [", r->V,
                rows->steps);
        for (int64_t s = 0; s < rows->steps; s++)
            fprintf(out, "%s%" PRId32, s ? ", " : "", tokens[s]);
        fprintf(out, "]");
        if (o->k > 0)
            fprintf(out,
                    ", \"k\": %ld, \"slice_decided\": %" PRIu64 ", \"hook_calls\": %" PRIu64
                    ", \"bytes_copied\": %" PRIu64 ", \"bytes_whole_rows\": %" PRIu64,
                    o->k, stats.slice_decided, stats.hook_calls, copied, whole);
        fprintf(out, "}\n");
    } else if (o->k > 0) {
        fprintf(errout,
                "sift sample: steps %" PRId64 ", k %ld, decided on the slice %" PRIu64
                ", hook calls %" PRIu64 ", bytes copied %" PRIu64 " vs whole rows %" PRIu64
                " (%.2f%%)\n",
                rows->steps, o->k, stats.slice_decided, stats.hook_calls, copied, whole,
                whole ? 100.0 * (double)copied / (double)whole : 0.0);
    }
}

int cmd_sample(int argc, char **argv, FILE *out, FILE *errout)
{
    sample_opts o = {.config = NULL,
                     .logits = NULL,
                     .history = NULL,
                     .k = 0,
                     .json = 0,
                     .form = SIFT_CONFIG_FORM_DOCUMENT};
    int rc = parse_args(argc, argv, &o, out, errout);
    if (rc >= 0)
        return rc;
    const char *prog = "sift sample";
    cli_set_form(o.form);
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
    sample_run r = {.chain = NULL, .V = V};
    int32_t *tokens = NULL;
    int status = cli_load_chain(prog, o.config, V, 0, &r.chain, errout);
    if (status == CMD_OK)
        status = cli_feed_history(prog, r.chain, hist, n_hist, V, errout);
    if (status != CMD_OK)
        goto done;
    tokens = malloc((size_t)rows.steps * sizeof *tokens);
    if (!tokens) {
        fprintf(errout, "%s: out of memory\n", prog);
        status = CMD_USAGE;
        goto done;
    }
    if (o.k > 0 && (status = slice_setup(&r, prog, errout)) != CMD_OK)
        goto done;
    for (int64_t s = 0; s < rows.steps; s++) {
        const float *row = rows.data + (size_t)s * (size_t)V;
        sift_error err;
        sift_status st;
        int oom = 0;
        if (o.k == 0)
            st = sift_chain_sample(r.chain, row, V, &tokens[s], &err);
        else
            st = slice_step(&r, row, (int32_t)o.k, &tokens[s], &err, &oom);
        if (oom) {
            fprintf(errout, "%s: out of memory\n", prog);
            status = CMD_USAGE;
            goto done;
        }
        if (st == SIFT_OK)
            st = sift_chain_accept(r.chain, tokens[s], &err);
        if (st != SIFT_OK) {
            fprintf(errout, "%s: %s: step %" PRId64 ": %s\n", prog, o.logits, s, err.message);
            status = CMD_FAIL;
            goto done;
        }
        if (!o.json)
            fprintf(out, "%" PRId32 "\n", tokens[s]);
    }
    sample_report(&r, &o, &rows, tokens, out, errout);
done:
    free(r.ids);
    free(tokens);
    free(hist);
    sift_slicer_free(r.slicer);
    sift_chain_free(r.chain);
    npy_free(&rows);
    return cmd_finish(out, errout, status);
}

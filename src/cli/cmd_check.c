/*
 * cmd_check.c - `sift check CONFIG...`: validates YAML chain configs.
 *
 * What it owns: the check subcommand and the shared cmd_finish helper.
 * Every diagnostic of every file goes to `out`, one per line, in GCC's
 * "FILE:LINE:COL: error: MESSAGE" form so editors and CI annotate them;
 * then, unless --quiet, one summary line per file. Exit status: 0 when
 * every file is valid (warnings allowed), 1 when one has errors, 2 for a
 * usage error or a file that cannot be read (the most severe wins).
 * A valid config is then built as `sift plan` builds it (with the
 * vocabulary it names), so check refuses what plan and sample refuse,
 * but for a chain that needs a vocabulary the file does not name: a
 * warning here, the same words as an error there (docs/cli.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "sift.h"

int cmd_finish(FILE *out, FILE *errout, int status)
{
    if (fflush(out) != 0 || ferror(out)) {
        fprintf(errout, "sift: cannot write output: %s\n", strerror(errno ? errno : EIO));
        return CMD_USAGE;
    }
    return status;
}

static void help(FILE *f)
{
    fprintf(f, "usage: sift check [--quiet] [--werror] [--form NAME] [--print] CONFIG...\n"
               "\n"
               "Loads and validates each YAML chain config (docs/config.md) and prints\n"
               "every problem as FILE:LINE:COL: error|warning: MESSAGE.\n"
               "\n"
               "options:\n"
               "  -q, --quiet   print only the diagnostics, no summary lines\n"
               "  --werror      treat warnings as errors (exit 1)\n"
               "  --form NAME   read each CONFIG as a request of that form: openai or\n"
               "                llama.cpp (default: the document's `form` key)\n"
               "  --print       print the chain each valid CONFIG maps to, in the chain\n"
               "                form (stages and parameters, grammar, logprobs)\n"
               "  -h, --help    print this help\n"
               "\n"
               "exit status: 0 valid (warnings allowed), 1 invalid, 2 usage or I/O error\n");
}

/* What the command line asked for. */
typedef struct check_opts {
    int quiet, werror, print;
    int32_t form;
} check_opts;

/* Reads the options into *o: -1 to go on, else the exit status (help
 * printed, or a usage error reported, no config given included). */
static int parse_args(int argc, char **argv, check_opts *o, FILE *out, FILE *errout)
{
    int n_files = 0, only_files = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_files || a[0] != '-' || !a[1]) {
            n_files++;
        } else if (!strcmp(a, "--form") && i + 1 < argc) {
            if (cli_parse_form("sift check", argv[++i], &o->form, errout) != CMD_OK)
                return CMD_USAGE;
        } else if (!strcmp(a, "--print")) {
            o->print = 1;
        } else if (!strcmp(a, "--")) {
            only_files = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(out);
            return cmd_finish(out, errout, CMD_OK);
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o->quiet = 1;
        } else if (!strcmp(a, "--werror")) {
            o->werror = 1;
        } else {
            fprintf(errout, "sift check: unknown option '%s'\n", a);
            fprintf(errout, "Run 'sift check --help' for the options.\n");
            return CMD_USAGE;
        }
    }
    if (n_files == 0) {
        fprintf(errout, "sift check: no config given\n");
        help(errout);
        return CMD_USAGE;
    }
    return -1;
}

/* Builds the valid config's chain as `sift plan` builds it, with the
 * vocabulary the config names (it must load), so check refuses what plan
 * and sample refuse. A config that names no vocabulary but needs one (a
 * grammar, DRY's sequence breakers) is a warning, not an error: a
 * runtime that passes the model's vocabulary builds it (a llama-server
 * request names none), only the CLI cannot. Returns CMD_OK (*n_warn
 * counts such a warning), CMD_FAIL, or CMD_USAGE for a vocabulary file
 * that cannot be read; the error is printed to `out`. */
static int check_build(const sift_config *cfg, const char *path, FILE *out, size_t *n_warn)
{
    sift_error err;
    sift_vocab *vocab = NULL;
    sift_chain *chain = NULL;
    int vrc = CMD_OK;
    sift_status vs = sift_config_load_vocab(cfg, NULL, &vocab, &err);
    if (vs != SIFT_OK) {
        cli_error(out, NULL, path, &err);
        vrc = vs == SIFT_E_IO ? CMD_USAGE : CMD_FAIL;
    } else if ((vs = sift_config_build_chain(cfg, NULL, vocab, &chain, &err))) {
        if (!vocab && vs == SIFT_E_ARG) {
            /* Say why plan and sample would refuse it. */
            size_t len = strlen(err.message);
            snprintf(err.message + len, sizeof err.message - len,
                     "; sift plan and sift sample cannot build this chain");
            cli_diag(out, NULL, path, "warning", &err);
            (*n_warn)++;
        } else {
            cli_error(out, NULL, path, &err);
            vrc = CMD_FAIL;
        }
    }
    sift_chain_free(chain);
    sift_vocab_free(vocab);
    return vrc;
}

/* --print: the chain the valid config maps to. CMD_USAGE when out of
 * memory. */
static int print_chain(const sift_config *cfg, FILE *out, FILE *errout)
{
    size_t len = sift_config_describe(cfg, NULL, 0);
    char *text = malloc(len + 1);
    if (!text) {
        fprintf(errout, "sift check: out of memory\n");
        return CMD_USAGE;
    }
    sift_config_describe(cfg, text, len + 1);
    fputs(text, out);
    free(text);
    return CMD_OK;
}

/* The file's summary line: ok, ok with warnings, or its counts. */
static void print_summary(FILE *out, const char *path, int bad, size_t n_err, size_t n_warn)
{
    if (!bad && n_warn == 0)
        fprintf(out, "%s: ok\n", path);
    else if (!bad)
        fprintf(out, "%s: ok (%zu warning%s)\n", path, n_warn, n_warn == 1 ? "" : "s");
    else
        fprintf(out, "%s: %zu error%s, %zu warning%s\n", path, n_err, n_err == 1 ? "" : "s", n_warn,
                n_warn == 1 ? "" : "s");
}

/* Checks one config file: its diagnostics, the chain's build, --print,
 * the summary. Returns the file's exit status. */
static int check_file(const char *path, const check_opts *o, FILE *out, FILE *errout)
{
    sift_config *cfg = NULL;
    sift_error err;
    sift_config_params cp;
    sift_config_params_init(&cp);
    cp.form = o->form;
    sift_status st = sift_config_load(&cfg, path, &cp, &err);
    if (!cfg) {
        cli_error(errout, NULL, path, &err);
        return CMD_USAGE;
    }
    int status = CMD_OK;
    size_t n = sift_config_n_diagnostics(cfg), n_err = sift_config_n_errors(cfg);
    for (size_t k = 0; k < n; k++)
        fprintf(out, "%s\n", sift_config_diagnostic(cfg, k)->text);
    size_t n_warn = n - n_err;
    if (st == SIFT_OK) {
        int vrc = check_build(cfg, path, out, &n_warn);
        if (vrc != CMD_OK) {
            st = SIFT_E_ARG;
            n_err++;
            if (vrc == CMD_USAGE)
                status = CMD_USAGE;
        }
    }
    if (o->print && st == SIFT_OK && print_chain(cfg, out, errout) != CMD_OK)
        status = CMD_USAGE;
    int bad = st != SIFT_OK || (o->werror && n_warn > 0);
    if (!o->quiet)
        print_summary(out, path, bad, n_err, n_warn);
    if (bad && status == CMD_OK)
        status = CMD_FAIL;
    sift_config_free(cfg);
    return status;
}

int cmd_check(int argc, char **argv, FILE *out, FILE *errout)
{
    check_opts o = {.quiet = 0, .werror = 0, .print = 0, .form = SIFT_CONFIG_FORM_DOCUMENT};
    int rc = parse_args(argc, argv, &o, out, errout);
    if (rc >= 0)
        return rc;
    /* The most severe file's status wins. */
    int status = CMD_OK, only_files = 0;
    for (int i = 1; i < argc; i++) {
        const char *path = argv[i];
        if (!only_files && !strcmp(path, "--form")) {
            i++; /* its NAME is no file */
            continue;
        }
        if (!only_files && !strcmp(path, "--")) {
            only_files = 1;
            continue;
        }
        if (!only_files && path[0] == '-' && path[1])
            continue;
        int fs = check_file(path, &o, out, errout);
        status = fs > status ? fs : status;
    }
    return cmd_finish(out, errout, status);
}

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

int cmd_check(int argc, char **argv, FILE *out, FILE *errout)
{
    int quiet = 0, werror = 0, n_files = 0, only_files = 0, print = 0;
    int32_t form = SIFT_CONFIG_FORM_DOCUMENT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_files || a[0] != '-' || !a[1]) {
            n_files++;
        } else if (!strcmp(a, "--form") && i + 1 < argc) {
            if (cli_parse_form("sift check", argv[++i], &form, errout) != CMD_OK)
                return CMD_USAGE;
        } else if (!strcmp(a, "--print")) {
            print = 1;
        } else if (!strcmp(a, "--")) {
            only_files = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(out);
            return cmd_finish(out, errout, CMD_OK);
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--werror")) {
            werror = 1;
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
    int status = CMD_OK;
    only_files = 0;
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
        sift_config *cfg = NULL;
        sift_error err;
        sift_config_params cp;
        sift_config_params_init(&cp);
        cp.form = form;
        sift_status st = sift_config_load(&cfg, path, &cp, &err);
        if (!cfg) {
            cli_error(errout, NULL, path, &err);
            status = CMD_USAGE;
            continue;
        }
        size_t n = sift_config_n_diagnostics(cfg), n_err = sift_config_n_errors(cfg);
        for (size_t k = 0; k < n; k++)
            fprintf(out, "%s\n", sift_config_diagnostic(cfg, k)->text);
        size_t n_warn = n - n_err;
        /* The chain is built as `sift plan` builds it, with the vocabulary
         * the config names (it must load), so check refuses what plan and
         * sample refuse. A config that names no vocabulary but needs one
         * (a grammar, DRY's sequence breakers) is a warning, not an error:
         * a runtime that passes the model's vocabulary builds it (a
         * llama-server request names none), only the CLI cannot. */
        if (st == SIFT_OK) {
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
                    n_warn++;
                } else {
                    cli_error(out, NULL, path, &err);
                    vrc = CMD_FAIL;
                }
            }
            sift_chain_free(chain);
            sift_vocab_free(vocab);
            if (vrc != CMD_OK) {
                st = SIFT_E_ARG;
                n_err++;
                if (vrc == CMD_USAGE)
                    status = CMD_USAGE;
            }
        }
        if (print && st == SIFT_OK) {
            size_t len = sift_config_describe(cfg, NULL, 0);
            char *text = malloc(len + 1);
            if (text) {
                sift_config_describe(cfg, text, len + 1);
                fputs(text, out);
                free(text);
            } else {
                fprintf(errout, "sift check: out of memory\n");
                status = CMD_USAGE;
            }
        }
        int bad = st != SIFT_OK || (werror && n_warn > 0);
        if (!quiet) {
            if (!bad && n_warn == 0)
                fprintf(out, "%s: ok\n", path);
            else if (!bad)
                fprintf(out, "%s: ok (%zu warning%s)\n", path, n_warn, n_warn == 1 ? "" : "s");
            else
                fprintf(out, "%s: %zu error%s, %zu warning%s\n", path, n_err, n_err == 1 ? "" : "s",
                        n_warn, n_warn == 1 ? "" : "s");
        }
        if (bad && status == CMD_OK)
            status = CMD_FAIL;
        sift_config_free(cfg);
    }
    return cmd_finish(out, errout, status);
}

/*
 * cmd.h - the sift command's subcommands; main.c only dispatches.
 *
 * Every subcommand is a function cmd_<name>(argc, argv, out, errout):
 * argv[0] is the subcommand's name, `out` takes its normal output and
 * `errout` usage and I/O messages. Nothing here calls exit(), so each one
 * can be tested in-process. Each returns the process exit status: 0 ok,
 * 1 failure (an invalid input), 2 usage or I/O error.
 */
#ifndef SIFT_CLI_CMD_H
#define SIFT_CLI_CMD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sift.h"

enum { CMD_OK = 0, CMD_FAIL = 1, CMD_USAGE = 2 };

int cmd_demo(int argc, char **argv, FILE *out, FILE *errout);
int cmd_check(int argc, char **argv, FILE *out, FILE *errout);
int cmd_plan(int argc, char **argv, FILE *out, FILE *errout);
int cmd_grammar(int argc, char **argv, FILE *out, FILE *errout);

/* ---- sample, inspect, bench (cmd_sample.c, cmd_inspect.c, cmd_bench.c) */
int cmd_sample(int argc, char **argv, FILE *out, FILE *errout);
int cmd_inspect(int argc, char **argv, FILE *out, FILE *errout);
int cmd_bench(int argc, char **argv, FILE *out, FILE *errout);
/* `sift bench maskbench DIR --vocab FILE` (cmd_maskbench.c), reached from
 * cmd_bench; argv[0] is "maskbench". */
int cmd_maskbench(int argc, char **argv, FILE *out, FILE *errout);

/* cli_load_chain's flags. CLI_LOAD_LIKE_CHECK: report the config as
 * `sift check` does (sift plan): every diagnostic is printed, warnings of
 * a valid config too, and a config with errors is CMD_FAIL whatever they
 * are about (an unreadable file it names included); a config file that
 * cannot be loaded at all is CMD_USAGE. */
enum { CLI_LOAD_LIKE_CHECK = 1u };

/* Loads the config at `path` (and the vocabulary it names, by extension:
 * .gguf or tiktoken) and builds its chain for rows of n_vocab tokens
 * (n_vocab 0: the chain the config alone describes, no row to match).
 * `path` NULL = the built-in production chain (sift bench's default).
 * Messages go to errout prefixed with `prog` (NULL: no prefix). Without
 * flags, only a failing config's diagnostics are printed. Returns CMD_OK,
 * CMD_FAIL (an invalid config, a vocab_size or vocabulary size that is
 * not n_vocab) or CMD_USAGE (a file that cannot be read). The only chain
 * loader of the CLI: sample, inspect, bench and plan use it. */
int cli_load_chain(const char *prog, const char *path, int32_t n_vocab, unsigned flags,
                   sift_chain **chain, FILE *errout);
/* The vocab_size of the config at `path` (NULL = the built-in production
 * chain), 0 if unset or unreadable. */
int32_t cli_config_vocab_size(const char *path);
/* Writes `s` as a JSON string literal. */
void cli_json_str(FILE *out, const char *s);
/* Parses "1,2,3" into a malloc'ed array; CMD_USAGE on a malformed list. */
int cli_parse_history(const char *prog, const char *text, int32_t **ids, size_t *n, FILE *errout);
/* Feeds ids as prompt tokens (sift_chain_accept_prompt); CMD_FAIL on an id
 * outside [0, n_vocab). */
int cli_feed_history(const char *prog, sift_chain *chain, const int32_t *ids, size_t n,
                     int32_t n_vocab, FILE *errout);

/* Prints a library error about the file at `path` as
 * "[PROG: ]PLACE: error: TEXT". A sift message that names its file starts
 * with err->source (and its line:col or ": offset N"); PLACE is then that
 * prefix, so the file is named once; otherwise PLACE is `path`. `prog`
 * may be NULL. */
void cli_error(FILE *errout, const char *prog, const char *path, const sift_error *err);
/* cli_error with another severity word ("warning"). */
void cli_diag(FILE *errout, const char *prog, const char *path, const char *severity,
              const sift_error *err);
/* Loads the vocabulary the config names (sift_config_load_vocab: special
 * tokens, EOG ids, padding to vocab_size) into *vocab (NULL if none). What
 * needs a vocabulary the file does not name is left to the chain's build,
 * which says it at its place for `sift check` (a warning) and for the
 * commands that build the chain (an error). Messages go to `errout`
 * ("[PROG: ]PATH: error: ..."). Returns CMD_OK, CMD_FAIL, or CMD_USAGE for
 * a vocabulary file that cannot be read. */
int cli_config_vocab(const char *prog, const char *path, const sift_config *cfg, sift_vocab **vocab,
                     FILE *errout);

/* The request form every config the CLI loads is read in
 * (sift_config_params.form; SIFT_CONFIG_FORM_DOCUMENT: the document's
 * own `form` key). Set by `--form NAME` of check, plan and sample. */
void cli_set_form(int32_t form);
int32_t cli_form(void);
/* Reads the NAME of `--form NAME` ("openai", "llama.cpp" or "document")
 * into *form; CMD_USAGE with a message for another name. */
int cli_parse_form(const char *prog, const char *name, int32_t *form, FILE *errout);

/* Flushes `out` and reports a write error (a closed pipe, a full disk)
 * on errout; returns CMD_USAGE in that case, `status` otherwise. */
int cmd_finish(FILE *out, FILE *errout, int status);

#endif

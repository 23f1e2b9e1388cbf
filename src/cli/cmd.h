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

#include <stdio.h>

enum { CMD_OK = 0, CMD_FAIL = 1, CMD_USAGE = 2 };

int cmd_demo(int argc, char **argv, FILE *out, FILE *errout);
int cmd_check(int argc, char **argv, FILE *out, FILE *errout);
int cmd_plan(int argc, char **argv, FILE *out, FILE *errout);
int cmd_grammar(int argc, char **argv, FILE *out, FILE *errout);

/* Flushes `out` and reports a write error (a closed pipe, a full disk)
 * on errout; returns CMD_USAGE in that case, `status` otherwise. */
int cmd_finish(FILE *out, FILE *errout, int status);

#endif

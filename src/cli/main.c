/*
 * main.c - the sift command: dispatches to the cmd_<name> functions.
 *
 * What it owns: the table of subcommands, `sift --help`, `sift --version`,
 * and the process-wide settings a library must never touch: SIGPIPE is
 * ignored so that a closed stdout shows up as a write error (EPIPE) that
 * the subcommand reports and turns into a non-zero exit status, instead of
 * killing the process silently (BAD_INPUTS F-07).
 *
 * New subcommands (plan, sample, inspect, grammar, bench) are one line in
 * the table below and one cmd_<name>.c file.
 */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "sift.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv, FILE *out, FILE *errout);
    const char *summary;
} command;

static const command COMMANDS[] = {
    {"check", cmd_check, "validate YAML chain configs (FILE:LINE:COL diagnostics)"},
    {"demo", cmd_demo, "run a generation loop over a built-in toy model"},
    {"grammar", cmd_grammar, "check a GBNF grammar, or match text against it"},
    {"plan", cmd_plan, "print the analyzer's plan for a config's chain (k, guarantee, why)"},
    {"bench", cmd_bench, "time a config's chain on synthetic rows (whole row, slice, floor)"},
    {"inspect", cmd_inspect, "show what each stage of a config's chain leaves of a row"},
    {"sample", cmd_sample, "sample tokens from recorded logits (.npy) with a config's chain"},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: sift <command> [options]\n"
               "       sift --version | --help\n"
               "\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-9s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f, "  %-9s %s\n", "version", "print the library version");
    fprintf(f, "\nRun 'sift <command> --help' for a command's options; man sift for more.\n");
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return CMD_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return cmd_finish(stdout, stderr, CMD_OK);
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("sift %s\n", sift_version());
        return cmd_finish(stdout, stderr, CMD_OK);
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, COMMANDS[i].name))
            return COMMANDS[i].run(argc - 1, argv + 1, stdout, stderr);
    fprintf(stderr, "sift: unknown command '%s'\n", cmd);
    usage(stderr);
    return CMD_USAGE;
}

/* cmd.h - the sift command's subcommands; main.c only dispatches. */
#ifndef SIFT_CLI_CMD_H
#define SIFT_CLI_CMD_H

#include <stdio.h>

/* Each returns the process exit status: 0 ok, 1 failure, 2 usage or I/O. */
int cmd_demo(int argc, char **argv, FILE *out, FILE *errout);

#endif

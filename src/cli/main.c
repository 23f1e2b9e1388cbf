/*
 * main.c - the sift command: dispatches to cmd_<name>.c.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "sift.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: sift <command> [options]\n"
               "\n"
               "commands:\n"
               "  demo      run a generation loop over a built-in toy model\n"
               "  version   print the library version\n"
               "\n"
               "Run 'sift <command> --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("sift %s\n", sift_version());
        return 0;
    }
    if (!strcmp(cmd, "demo"))
        return cmd_demo(argc - 1, argv + 1, stdout, stderr);
    fprintf(stderr, "sift: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}

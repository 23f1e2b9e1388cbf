/* placeholder */
#include "cmd.h"
int cmd_demo(int argc, char **argv, FILE *out, FILE *errout) { (void)argc; (void)argv; (void)out; fprintf(errout, "demo: not yet\n"); return 1; }

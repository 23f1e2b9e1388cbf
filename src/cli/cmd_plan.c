/*
 * cmd_plan.c - `sift plan CONFIG [--json]`: the analyzer's static plan.
 *
 * Loads a YAML chain config through cli_load_chain (diagnostics go to
 * stderr as `sift check` prints them: CLI_LOAD_LIKE_CHECK), builds its
 * chain, and prints the plan: k, the guarantee, the recommended k, the
 * extra ids gathered beside the prefix, and each stage's part in words
 * (docs/analyzer.md). --json prints one object:
 * {"k", "guarantee", "recommended_k", "device_k", "extras", "max_extras", "why",
 *  "stages": [{"name", "class", "k", "why"}]}.
 * Exit status: 0 planned, 1 invalid config, 2 usage or I/O error.
 */
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "sift.h"

static void help(FILE *f)
{
    fprintf(f, "usage: sift plan [--json] CONFIG\n"
               "\n"
               "Prints the analyzer's static plan for the chain of a YAML config: how many\n"
               "of a row's largest logits a runtime must copy (k; 0 = the whole row), the\n"
               "guarantee (exact, certified, whole_row), the extra token ids to gather,\n"
               "and why, stage by stage (docs/analyzer.md).\n"
               "\n"
               "options:\n"
               "  --json      one JSON object instead of text\n"
               "  --form NAME read CONFIG as a request of that form: openai or llama.cpp\n"
               "              (default: the document's `form` key)\n"
               "  -h, --help  print this help\n"
               "\n"
               "exit status: 0 planned, 1 invalid config, 2 usage or I/O error\n");
}

static const char *class_upper(sift_class c)
{
    switch (c) {
    case SIFT_CLASS_WHOLE: return "WHOLE";
    case SIFT_CLASS_IDENTITY: return "IDENTITY";
    case SIFT_CLASS_LOWERS: return "LOWERS";
    case SIFT_CLASS_RAISES: return "RAISES";
    case SIFT_CLASS_MONOTONE: return "MONOTONE";
    case SIFT_CLASS_TOP: return "TOP";
    case SIFT_CLASS_THRESHOLD: return "THRESHOLD";
    }
    return "UNKNOWN";
}

int cmd_plan(int argc, char **argv, FILE *out, FILE *errout)
{
    int json = 0;
    int32_t form = SIFT_CONFIG_FORM_DOCUMENT;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(out);
            return cmd_finish(out, errout, CMD_OK);
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--form") && i + 1 < argc) {
            if (cli_parse_form("sift plan", argv[++i], &form, errout) != CMD_OK)
                return CMD_USAGE;
        } else if (a[0] == '-' && a[1]) {
            fprintf(errout, "sift plan: unknown option '%s'\n", a);
            fprintf(errout, "Run 'sift plan --help' for the options.\n");
            return CMD_USAGE;
        } else if (path) {
            fprintf(errout, "sift plan: one config at a time ('%s' and '%s')\n", path, a);
            return CMD_USAGE;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(errout, "sift plan: no config given\n");
        help(errout);
        return CMD_USAGE;
    }
    sift_chain *chain;
    cli_set_form(form);
    int rc = cli_load_chain(NULL, path, 0, CLI_LOAD_LIKE_CHECK, &chain, errout);
    if (rc != CMD_OK)
        goto done;
    size_t n = sift_chain_n_stages(chain);
    sift_plan plan = {.struct_size = sizeof(sift_plan)};
    sift_plan_stage *st = calloc(n ? n : 1, sizeof *st);
    for (size_t i = 0; st && i < n; i++)
        st[i].struct_size = sizeof *st;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    sift_error err;
    if (!st || sift_chain_plan(chain, &plan, st, &err)) {
        fprintf(errout, "sift plan: %s\n", st ? err.message : "out of memory");
        free(st);
        rc = CMD_USAGE;
        goto done;
    }
    size_t cap = plan.max_extras > 0 ? (size_t)plan.max_extras : 0;
    ids = cap ? malloc(cap * sizeof *ids) : NULL;
    if (cap && (!ids || sift_chain_extras(chain, ids, cap, &n_ids, &err)))
        n_ids = 0;
    if (json) {
        fprintf(out, "{\"k\": %d, \"guarantee\": ", (int)plan.k);
        cli_json_str(out, sift_guarantee_str(plan.guarantee));
        fprintf(out, ", \"recommended_k\": %d, \"device_k\": %d, \"extras\": [",
                (int)plan.recommended_k, (int)plan.device_k);
        for (size_t i = 0; i < n_ids; i++)
            fprintf(out, "%s%d", i ? ", " : "", (int)ids[i]);
        fprintf(out, "], \"max_extras\": %d, \"why\": ", (int)plan.max_extras);
        cli_json_str(out, plan.why);
        fprintf(out, ", \"stages\": [");
        for (size_t i = 0; i < n; i++) {
            fprintf(out, "%s{\"name\": ", i ? ", " : "");
            cli_json_str(out, sift_chain_stage_name(chain, i));
            fprintf(out, ", \"class\": \"%s\", \"k\": %d, \"why\": ", class_upper(st[i].cls),
                    (int)st[i].k);
            cli_json_str(out, st[i].why);
            fputc('}', out);
        }
        fprintf(out, "]}\n");
    } else {
        fprintf(out,
                "k: %d\nguarantee: %s\nrecommended k: %d\ndevice k: %d (a device top-k in any "
                "order)\nwhy: %s\n",
                (int)plan.k, sift_guarantee_str(plan.guarantee), (int)plan.recommended_k,
                (int)plan.device_k, plan.why);
        if (plan.max_extras > 0) {
            fprintf(out, "extras (up to %d per step):", (int)plan.max_extras);
            for (size_t i = 0; i < n_ids; i++)
                fprintf(out, " %d", (int)ids[i]);
            fputc('\n', out);
        }
        fprintf(out, "stages:\n");
        for (size_t i = 0; i < n; i++)
            fprintf(out, "  %2zu  %-14s %-10s %s\n", i, sift_chain_stage_name(chain, i),
                    class_upper(st[i].cls), st[i].why);
    }
    free(ids);
    free(st);
    rc = cmd_finish(out, errout, CMD_OK);
done:
    sift_chain_free(chain);
    return rc;
}

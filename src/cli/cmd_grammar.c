/*
 * cmd_grammar.c - `sift grammar check FILE.gbnf`,
 * `sift grammar match (FILE.gbnf | --schema SCHEMA.json) (--text STRING | --file F)`
 * and `sift grammar from-schema SCHEMA.json`.
 *
 * from-schema: prints the GBNF a JSON Schema becomes (docs/json-schema.md);
 * exit 0, or 2 when the schema cannot be converted (with its located
 * message). match --schema: exit 0 accepted, 1 rejected, 2 when the
 * schema cannot be compiled (or usage and I/O errors).
 *
 * check: compiles the grammar (no vocabulary) and prints its first error
 * as FILE:LINE:COL: error: MESSAGE; a token reference, which needs a
 * vocabulary, is that error only when the grammar has no other.
 * match: feeds the whole input to the grammar byte by byte; exit 0 when it
 * is accepted and the grammar is complete there, 1 otherwise with the
 * place it failed (byte offset and line:column of the input).
 * Exit status: 0 ok, 1 invalid grammar or no match, 2 usage or I/O error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "grammar/gbnf.h"
#include "sift.h"
#include "sift_internal.h"

#define GRAMMAR_MAX_INPUT ((size_t)16 << 20)

static void help(FILE *f)
{
    fprintf(f, "usage: sift grammar check FILE.gbnf\n"
               "       sift grammar match FILE.gbnf (--text STRING | --file F) [--root NAME]\n"
               "       sift grammar match --schema SCHEMA.json (--text STRING | --file F)\n"
               "       sift grammar from-schema SCHEMA.json\n"
               "\n"
               "check        compiles a GBNF grammar and prints each error as\n"
               "             FILE:LINE:COL: error: MESSAGE\n"
               "match        tells whether the grammar (or the JSON Schema's grammar) accepts\n"
               "             the whole input and is complete at its end; on failure prints\n"
               "             where the input was rejected\n"
               "from-schema  prints the GBNF grammar of a JSON Schema\n"
               "\n"
               "options:\n"
               "  --root NAME           start rule (default root)\n"
               "  --schema FILE         match against a JSON Schema instead of GBNF\n"
               "  --compact             JSON Schema: no whitespace between tokens\n"
               "  --max-ws N            JSON Schema: longest whitespace run (default 20)\n"
               "  --strict              JSON Schema: no undeclared properties\n"
               "  --ignore-unsupported  JSON Schema: leave unsupported keywords out, with a\n"
               "                        warning on stderr\n"
               "  -h, --help            print this help\n"
               "\n"
               "exit status: 0 ok / accepted, 1 invalid grammar / not accepted, 2 usage or I/O\n"
               "(with a JSON Schema: 2 also when it cannot be compiled)\n");
}

/* Reads a whole regular file of at most `max` bytes through the library's
 * one file helper (no blocking on a FIFO, no directories or devices). */
static char *slurp(const char *path, size_t max, size_t *len, FILE *errout)
{
    sift__alloc al;
    char *data;
    sift_error err;
    if (sift__alloc_init(&al, NULL, &err) != SIFT_OK ||
        sift__file_read(&al, path, max, &data, len, &err) != SIFT_OK) {
        cli_error(errout, NULL, path, &err);
        return NULL;
    }
    return data;
}

/* Compiles the grammar file. For check (`for_check`) token references
 * first compile to stand-ins, so that the grammar's own first error is
 * the one reported even after a token reference; only a grammar with no
 * other error is compiled again to report its first token reference. */
static int compile(const char *path, const char *root, int for_check, sift_grammar **g,
                   FILE *errout)
{
    size_t len = 0;
    char *text = slurp(path, (size_t)2 << 20, &len, errout);
    if (!text)
        return CMD_USAGE;
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.source_name = path;
    gp.root = root;
    sift_error err;
    int needs_vocab = 0;
    sift_status st = for_check ? sift__grammar_new_ex(g, text, len, NULL, &gp, &needs_vocab, &err)
                               : sift_grammar_new(g, text, len, NULL, &gp, &err);
    if (st == SIFT_OK && needs_vocab) {
        sift_grammar_free(*g);
        *g = NULL;
        st = sift_grammar_new(g, text, len, NULL, &gp, &err);
    }
    free(text);
    if (st) {
        cli_error(errout, NULL, path, &err);
        return st == SIFT_E_NOMEM ? CMD_USAGE : CMD_FAIL;
    }
    return CMD_OK;
}

static void warn_stderr(void *user, const sift_error *w)
{
    fprintf((FILE *)user, "warning: %s\n", w->message);
}

/* The JSON Schema options of the command line. */
typedef struct schema_opts {
    int compact, strict, ignore;
    long max_ws;
} schema_opts;

static void schema_params(sift_json_schema_params *sp, const char *path, const schema_opts *o,
                          FILE *errout)
{
    sift_json_schema_params_init(sp);
    sp->source_name = path;
    if (o->compact)
        sp->whitespace = SIFT_JSON_WS_COMPACT;
    if (o->max_ws >= 0)
        sp->max_whitespace = (int32_t)o->max_ws;
    sp->strict = o->strict;
    if (o->ignore) {
        sp->unsupported = SIFT_JSON_UNSUPPORTED_IGNORE;
        sp->warn = warn_stderr;
        sp->warn_user = errout;
    }
}

static int compile_schema(const char *path, const schema_opts *o, sift_grammar **g, FILE *errout)
{
    size_t len = 0;
    char *text = slurp(path, SIFT_JSON_SCHEMA_DEFAULT_MAX_SCHEMA_BYTES, &len, errout);
    if (!text)
        return CMD_USAGE;
    sift_json_schema_params sp;
    schema_params(&sp, path, o, errout);
    sift_error err;
    sift_status st = sift_grammar_from_json_schema(g, text, len, NULL, &sp, NULL, &err);
    free(text);
    if (st) {
        fprintf(errout, "%s\n", err.message);
        return CMD_USAGE;
    }
    return CMD_OK;
}

static int from_schema(const char *path, const schema_opts *o, FILE *out, FILE *errout)
{
    size_t len = 0;
    char *text = slurp(path, SIFT_JSON_SCHEMA_DEFAULT_MAX_SCHEMA_BYTES, &len, errout);
    if (!text)
        return CMD_USAGE;
    sift_json_schema_params sp;
    schema_params(&sp, path, o, errout);
    sift_error err;
    char *gbnf = NULL;
    size_t n = 0;
    sift_status st = sift_json_schema_to_gbnf(&gbnf, &n, text, len, &sp, &err);
    free(text);
    if (st) {
        fprintf(errout, "%s\n", err.message);
        return CMD_USAGE;
    }
    fwrite(gbnf, 1, n, out);
    sift_json_schema_free_gbnf(gbnf, &sp);
    return CMD_OK;
}

/* Line and column (code points) of byte `off` in `s`. */
static void where(const char *s, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)s[i] & 0xC0) != 0x80) {
            (*col)++;
        }
    }
}

static int match(sift_grammar *g, const char *input, size_t len, const char *name, FILE *out,
                 FILE *errout)
{
    sift_error err;
    /* Byte by byte, so a rejection names its byte. */
    for (size_t i = 0; i < len; i++) {
        if (sift_grammar_accept_bytes(g, input + i, 1, &err)) {
            int line, col;
            where(input, i, &line, &col);
            fprintf(out, "%s:%d:%d: rejected at byte %zu: %s\n", name, line, col, i, err.message);
            return CMD_FAIL;
        }
    }
    if (!sift_grammar_is_complete(g)) {
        int line, col;
        where(input, len, &line, &col);
        fprintf(out, "%s:%d:%d: the input ends before the grammar is complete\n", name, line, col);
        return CMD_FAIL;
    }
    (void)errout;
    fprintf(out, "%s: accepted\n", name);
    return CMD_OK;
}

int cmd_grammar(int argc, char **argv, FILE *out, FILE *errout)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        help(argc < 2 ? errout : out);
        return argc < 2 ? CMD_USAGE : cmd_finish(out, errout, CMD_OK);
    }
    const char *sub = argv[1], *path = NULL, *text = NULL, *file = NULL, *root = NULL;
    const char *schema = NULL;
    schema_opts so = {0, 0, 0, -1};
    if (strcmp(sub, "check") && strcmp(sub, "match") && strcmp(sub, "from-schema")) {
        fprintf(errout, "sift grammar: unknown subcommand '%s' (check, match or from-schema)\n",
                sub);
        return CMD_USAGE;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(out);
            return cmd_finish(out, errout, CMD_OK);
        } else if (!strcmp(a, "--text") && i + 1 < argc) {
            text = argv[++i];
        } else if (!strcmp(a, "--file") && i + 1 < argc) {
            file = argv[++i];
        } else if (!strcmp(a, "--root") && i + 1 < argc) {
            root = argv[++i];
        } else if (!strcmp(a, "--schema") && i + 1 < argc) {
            schema = argv[++i];
        } else if (!strcmp(a, "--compact")) {
            so.compact = 1;
        } else if (!strcmp(a, "--strict")) {
            so.strict = 1;
        } else if (!strcmp(a, "--ignore-unsupported")) {
            so.ignore = 1;
        } else if (!strcmp(a, "--max-ws") && i + 1 < argc) {
            char *end;
            errno = 0;
            so.max_ws = strtol(argv[++i], &end, 10);
            if (errno || *end || so.max_ws < 0 || so.max_ws > 1000) {
                fprintf(errout, "sift grammar %s: --max-ws takes 0 to 1000\n", sub);
                return CMD_USAGE;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(errout, "sift grammar %s: unknown option or missing value '%s'\n", sub, a);
            return CMD_USAGE;
        } else if (path) {
            fprintf(errout, "sift grammar %s: one grammar at a time\n", sub);
            return CMD_USAGE;
        } else {
            path = a;
        }
    }
    if (!strcmp(sub, "from-schema")) {
        if (!path || schema || text || file || root) {
            fprintf(errout, "sift grammar from-schema: give one SCHEMA.json and no --text, "
                            "--file, --root or --schema\n");
            return CMD_USAGE;
        }
        return cmd_finish(out, errout, from_schema(path, &so, out, errout));
    }
    if (schema && (path || root || strcmp(sub, "match"))) {
        fprintf(errout,
                "sift grammar %s: --schema replaces the grammar file (match only, no "
                "--root)\n",
                sub);
        return CMD_USAGE;
    }
    if (!path && !schema) {
        fprintf(errout, "sift grammar %s: no grammar file given\n", sub);
        return CMD_USAGE;
    }
    int is_match = !strcmp(sub, "match");
    if (is_match && !!text == !!file) {
        fprintf(errout, "sift grammar match: give exactly one of --text and --file\n");
        return CMD_USAGE;
    }
    if (!is_match && (text || file)) {
        fprintf(errout, "sift grammar check: --text and --file belong to 'match'\n");
        return CMD_USAGE;
    }
    sift_grammar *g = NULL;
    int rc = schema ? compile_schema(schema, &so, &g, errout)
                    : compile(path, root, !is_match, &g, errout);
    if (rc != CMD_OK)
        return rc;
    if (!is_match) {
        fprintf(out, "%s: ok\n", path);
    } else if (text) {
        rc = match(g, text, strlen(text), "<text>", out, errout);
    } else {
        size_t len = 0;
        char *input = slurp(file, GRAMMAR_MAX_INPUT, &len, errout);
        rc = input ? match(g, input, len, file, out, errout) : CMD_USAGE;
        free(input);
    }
    sift_grammar_free(g);
    return cmd_finish(out, errout, rc);
}

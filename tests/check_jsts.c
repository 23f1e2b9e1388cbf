/*
 * check_jsts - the JSON-Schema-Test-Suite as a ratchet.
 *
 * For every schema of the suite's files under tests/data/jsts (the
 * required files of draft2020-12 and draft7, and the optional/format
 * files of the formats sift claims), compiles the schema through the
 * public API (sift_grammar_from_json_schema, compact whitespace) and
 * feeds each instance's compact JSON text (keys in the file's order,
 * strings in UTF-8, reals in their shortest round-trip spelling) through
 * sift_grammar_accept_bytes / sift_grammar_is_complete. Each instance
 * gets a verdict:
 *
 *   accept-valid, reject-invalid   right
 *   reject-valid                   a false negative
 *   refused                        the schema does not compile
 *   accept-invalid                 the grammar admits a value the schema
 *                                  forbids: always a failure
 *
 * and is compared with tests/data/jsts/expected.tsv (file, schema index,
 * instance index, verdict). A right verdict that is no longer right, or a
 * schema that compiled and no longer does, fails; a verdict that got
 * better prints a note to regenerate the table:
 *
 *     make -C BUILD jsts-table
 *     # or: BUILD/tests/check_jsts --write SRCDIR/tests/data/jsts/expected.tsv
 *
 * The required files run with format as an annotation (the suite's
 * meaning there), the format files with format asserted. Schemas with a
 * $ref to the suite's remote server (http://localhost:1234/) are
 * skipped, as refRemote.json is.
 */
#include <sift.h>

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SIFT_SRCDIR
#define SIFT_SRCDIR "."
#endif

typedef struct {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) {
            fprintf(stderr, "out of memory\n");
            exit(99);
        }
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* The shortest spelling of d that reads back as d, as Python writes a
 * float: positional from 1e-4 to 1e16 (300.0, 0.001), else with an
 * exponent (1e+16); a ".0" when it would otherwise read as an integer. */
static void put_real(buf *b, double d)
{
    char t[400];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, d);
        if (strtod(t, NULL) == d)
            break;
    }
    double a = fabs(d);
    if (a != 0 && a >= 1e-4 && a < 1e16) {
        int decimals = prec - 1 - (int)floor(log10(a));
        snprintf(t, sizeof t, "%.*f", decimals > 0 ? decimals : 0, d);
    } else {
        snprintf(t, sizeof t, "%.*g", prec, d);
    }
    puts_(b, t);
    if (!strpbrk(t, ".eEn"))
        puts_(b, ".0");
}

static void put_string(buf *b, const char *s, size_t n)
{
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[8];
        if (ch == '"' || ch == '\\') {
            e[0] = '\\';
            e[1] = (char)ch;
            put(b, e, 2);
        } else if (ch < 0x20) {
            const char *named = ch == '\n'   ? "\\n"
                                : ch == '\t' ? "\\t"
                                : ch == '\r' ? "\\r"
                                : ch == '\b' ? "\\b"
                                : ch == '\f' ? "\\f"
                                             : NULL;
            if (named) {
                puts_(b, named);
            } else {
                snprintf(e, sizeof e, "\\u%04x", ch);
                puts_(b, e);
            }
        } else {
            put(b, (const char *)&s[i], 1);
        }
    }
    put(b, "\"", 1);
}

/* The compact JSON text of v. */
static void canon(buf *b, const json_t *v)
{
    char t[32];
    switch (json_typeof(v)) {
    case JSON_NULL: puts_(b, "null"); break;
    case JSON_TRUE: puts_(b, "true"); break;
    case JSON_FALSE: puts_(b, "false"); break;
    case JSON_INTEGER:
        snprintf(t, sizeof t, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        puts_(b, t);
        break;
    case JSON_REAL: put_real(b, json_real_value(v)); break;
    case JSON_STRING: put_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_ARRAY:
        put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                put(b, ",", 1);
            canon(b, json_array_get(v, i));
        }
        put(b, "]", 1);
        break;
    case JSON_OBJECT: {
        const char *k;
        size_t kn;
        json_t *x;
        int first = 1;
        put(b, "{", 1);
        json_object_keylen_foreach((json_t *)v, k, kn, x)
        {
            if (!first)
                put(b, ",", 1);
            first = 0;
            put_string(b, k, kn);
            put(b, ":", 1);
            canon(b, x);
        }
        put(b, "}", 1);
        break;
    }
    }
}

/* Whether v holds a $ref to the suite's remote server. */
static int remote_ref(const json_t *v)
{
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            if (remote_ref(json_array_get(v, i)))
                return 1;
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            if (!strcmp(k, "$ref") && json_is_string(x) &&
                strstr(json_string_value(x), "localhost:1234"))
                return 1;
            if (remote_ref(x))
                return 1;
        }
    }
    return 0;
}

enum { ACCEPT_VALID, REJECT_INVALID, REJECT_VALID, REFUSED, ACCEPT_INVALID, N_VERDICTS };
static const char *const verdict_names[] = {"accept-valid", "reject-invalid", "reject-valid",
                                            "refused", "accept-invalid"};

static int right(int v)
{
    return v == ACCEPT_VALID || v == REJECT_INVALID;
}

typedef struct {
    const char *dir; /* under tests/data/jsts */
    int format_files;
} group;

static const group groups[] = {
    {"draft2020-12", 0},
    {"draft7", 0},
    {"draft2020-12/optional/format", 1},
    {"draft7/optional/format", 1},
};

typedef struct {
    long schemas, compiled, skipped, judged, right, rejected_valid, accepted_invalid;
} totals;

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *write_to = NULL;
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        write_to = argv[2];
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [--write EXPECTED.tsv]\n", argv[0]);
        return 64;
    }
    const char *srcdir = getenv("srcdir") ? getenv("srcdir") : SIFT_SRCDIR;
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/jsts/expected.tsv", srcdir);

    /* the expected verdicts, by "file\tschema\tinstance" */
    json_t *expected = json_object();
    FILE *ef = write_to ? NULL : fopen(path, "r");
    if (!write_to && !ef) {
        perror(path);
        return 1;
    }
    char line[1024];
    while (ef && fgets(line, sizeof line, ef)) {
        char *tab = strrchr(line, '\t');
        if (!tab || line[0] == '#')
            continue;
        *tab++ = '\0';
        tab[strcspn(tab, "\r\n")] = '\0';
        json_object_set_new(expected, line, json_string(tab));
    }
    if (ef)
        fclose(ef);

    buf table = {0}, text = {0};
    totals tot[2] = {{0}};
    long failures = 0, improvements = 0;
    sift_json_schema_params sp;
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    sift_error err;

    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
        const group *grp = &groups[gi];
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/tests/data/jsts/%s", srcdir, grp->dir);
        DIR *d = opendir(dir);
        if (!d) {
            perror(dir);
            return 1;
        }
        char *names[256];
        size_t n_names = 0;
        struct dirent *de;
        while ((de = readdir(d)) && n_names < 256) {
            size_t nl = strlen(de->d_name);
            if (nl > 5 && nl < 200 && !strcmp(de->d_name + nl - 5, ".json")) {
                names[n_names] = malloc(nl + 1);
                if (!names[n_names])
                    return 99;
                memcpy(names[n_names++], de->d_name, nl + 1);
            }
        }
        closedir(d);
        qsort(names, n_names, sizeof names[0], cmp_names);
        totals *t = &tot[grp->format_files];
        sift_json_schema_params_init(&sp);
        sp.whitespace = SIFT_JSON_WS_COMPACT;
        sp.format = grp->format_files ? SIFT_JSON_FORMAT_ASSERT : SIFT_JSON_FORMAT_ANNOTATION;

        for (size_t fi = 0; fi < n_names; fi++) {
            char file[4400], rel[600];
            snprintf(file, sizeof file, "%s/%s", dir, names[fi]);
            snprintf(rel, sizeof rel, "%s/%s", grp->dir, names[fi]);
            json_error_t je;
            json_t *cases = json_load_file(file, JSON_ALLOW_NUL, &je);
            if (!json_is_array(cases)) {
                fprintf(stderr, "%s:%d: %s\n", file, je.line, je.text);
                return 1;
            }
            for (size_t si = 0; si < json_array_size(cases); si++) {
                const json_t *cs = json_array_get(cases, si);
                const json_t *schema = json_object_get(cs, "schema");
                const json_t *tests = json_object_get(cs, "tests");
                t->schemas++;
                if (remote_ref(schema) || !strcmp(names[fi], "refRemote.json")) {
                    t->skipped++;
                    continue;
                }
                text.n = 0;
                canon(&text, schema);
                sift_grammar *g = NULL;
                int compiled = sift_grammar_from_json_schema(&g, text.p, text.n, NULL, &sp, &gp,
                                                             &err) == SIFT_OK;
                t->compiled += compiled;
                for (size_t ii = 0; ii < json_array_size(tests); ii++) {
                    const json_t *tc = json_array_get(tests, ii);
                    int valid = json_is_true(json_object_get(tc, "valid"));
                    int v = REFUSED;
                    if (compiled) {
                        text.n = 0;
                        canon(&text, json_object_get(tc, "data"));
                        sift_grammar_reset(g);
                        int acc = sift_grammar_accept_bytes(g, text.p, text.n, &err) == SIFT_OK &&
                                  sift_grammar_is_complete(g);
                        v = acc ? (valid ? ACCEPT_VALID : ACCEPT_INVALID)
                                : (valid ? REJECT_VALID : REJECT_INVALID);
                        t->judged++;
                        t->right += right(v);
                        t->rejected_valid += v == REJECT_VALID;
                        t->accepted_invalid += v == ACCEPT_INVALID;
                    }
                    char key[700];
                    snprintf(key, sizeof key, "%s\t%zu\t%zu", rel, si, ii);
                    char row[800];
                    snprintf(row, sizeof row, "%s\t%s\n", key, verdict_names[v]);
                    puts_(&table, row);
                    const char *was = json_string_value(json_object_get(expected, key));
                    int w = -1;
                    for (int k = 0; was && k < N_VERDICTS; k++)
                        if (!strcmp(was, verdict_names[k]))
                            w = k;
                    const char *desc = json_string_value(json_object_get(tc, "description"));
                    if (v == ACCEPT_INVALID) {
                        failures++;
                        fprintf(stderr, "FAIL %s: accepts an invalid instance (%s)\n", key,
                                desc ? desc : "");
                    } else if (write_to) {
                        continue;
                    } else if (w < 0) {
                        failures++;
                        fprintf(stderr, "FAIL %s: not in the table (regenerate it)\n", key);
                    } else if ((right(w) && v != w) || (w != REFUSED && v == REFUSED)) {
                        failures++;
                        fprintf(stderr, "FAIL %s: %s, was %s (%s)\n", key, verdict_names[v],
                                verdict_names[w], desc ? desc : "");
                    } else if (v != w) {
                        improvements++;
                    }
                }
                sift_grammar_free(g);
            }
            json_decref(cases);
            free(names[fi]);
        }
    }
    for (int k = 0; k < 2; k++)
        printf("%s: schemas compiled %ld / %ld (%ld with remote refs skipped); instances right "
               "%ld / %ld judged (%.1f%%); valid rejected %ld; invalid accepted %ld\n",
               k ? "optional/format" : "required", tot[k].compiled, tot[k].schemas - tot[k].skipped,
               tot[k].skipped, tot[k].right, tot[k].judged,
               tot[k].judged ? 100.0 * (double)tot[k].right / (double)tot[k].judged : 0.0,
               tot[k].rejected_valid, tot[k].accepted_invalid);
    if (write_to) {
        FILE *wf = fopen(write_to, "w");
        if (!wf || fputs("# file\tschema\tinstance\tverdict (tests/check_jsts.c)\n", wf) < 0 ||
            fwrite(table.p, 1, table.n, wf) != table.n || fclose(wf)) {
            perror(write_to);
            return 1;
        }
        printf("wrote %s\n", write_to);
    } else if (improvements) {
        printf("%ld verdicts are better than the table: regenerate it with `make jsts-table` "
               "(tests/check_jsts --write SRCDIR/tests/data/jsts/expected.tsv)\n",
               improvements);
    }
    free(table.p);
    free(text.p);
    json_decref(expected);
    if (failures)
        fprintf(stderr, "%ld failures\n", failures);
    return failures ? 1 : 0;
}

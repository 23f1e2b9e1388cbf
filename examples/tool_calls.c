/*
 * tool_calls.c - tool calls constrained by the tools' JSON Schemas.
 *
 * A request's OpenAI-style `tools` array gives each function a name and a
 * JSON Schema for its arguments. The model writes free text, and when it
 * writes "<tool_call>" it must go on with
 *
 *     {"name": "<a tool's name>", "arguments": <that tool's arguments>}</tool_call>
 *
 * The program builds one JSON Schema with an anyOf over the tools (each a
 * const name and its parameters as "arguments"), converts it to GBNF with
 * sift_json_schema_to_gbnf, adds one rule for the tags around it, compiles
 * that and makes it lazy, triggered by the word "<tool_call>". Then it
 * feeds texts a model might write (sift_grammar_accept_bytes; a runtime
 * would add the grammar to its chain instead, which bans every token the
 * grammar rejects) and prints whether each is accepted. It exits 1 when
 * an outcome is not the expected one, or on any sift error.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sift.h>

/* The tools of one request: the name and the "parameters" schema of each
 * function, as a server finds them in the request's JSON. */
typedef struct tool {
    const char *name;
    const char *parameters;
} tool;

static const tool tools[] = {
    {"get_weather", "{\"type\": \"object\", \"properties\": {"
                    "\"location\": {\"type\": \"string\"},"
                    "\"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}},"
                    "\"required\": [\"location\"]}"},
    {"search", "{\"type\": \"object\", \"properties\": {"
               "\"query\": {\"type\": \"string\"},"
               "\"max_results\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 50}},"
               "\"required\": [\"query\"]}"},
};
#define N_TOOLS (sizeof tools / sizeof tools[0])

/* Appends printf's text to buf[0..cap) at *len; -1 if it does not fit. */
static int append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len)
        return -1;
    *len += (size_t)n;
    return 0;
}

/* Writes the schema of one call: {"anyOf": [{name: const, arguments:
 * parameters}, ...]}. Tool names are [A-Za-z0-9_-] (as OpenAI requires),
 * so they need no JSON escaping; another name is refused. */
static int calls_schema(char *buf, size_t cap)
{
    size_t len = 0;
    if (append(buf, cap, &len, "{\"anyOf\": ["))
        return -1;
    for (size_t i = 0; i < N_TOOLS; i++) {
        if (strspn(tools[i].name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789_-") != strlen(tools[i].name))
            return -1;
        if (append(buf, cap, &len,
                   "%s{\"type\": \"object\", \"properties\": {\"name\": {\"const\": \"%s\"},",
                   i ? ", " : "", tools[i].name) ||
            append(buf, cap, &len, "\"arguments\": %s}, \"required\": [\"name\", \"arguments\"]}",
                   tools[i].parameters))
            return -1;
    }
    return append(buf, cap, &len, "]}");
}

/* The schema's grammar starts at "root" and names its rules root, sN,
 * ws, char, string, value and the like; "tool-call" and "tool-space" are
 * free. The tags allow a newline or two around the JSON. */
static const char wrapper[] = "\ntool-call ::= \"<tool_call>\" tool-space root tool-space "
                              "\"</tool_call>\"\n"
                              "tool-space ::= [ \\n]{0,2}\n";

typedef struct sample {
    const char *what;
    const char *text;
    int valid; /* 1 = the grammar must accept the whole text and be complete */
} sample;

static const sample samples[] = {
    {"free text, no call yet", "Let me check {that} for you. ", 1},
    {"a get_weather call",
     "Let me check. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
     "{\"location\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
     1},
    {"a search call",
     "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"sift\", \"max_results\": "
     "50}}</tool_call>",
     1},
    {"an unknown tool", "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>", 0},
    {"a unit outside the enum",
     "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\", "
     "\"unit\": \"kelvin\"}}</tool_call>",
     0},
    {"max_results over 50",
     "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"x\", \"max_results\": "
     "51}}</tool_call>",
     0},
    {"search's argument given to get_weather",
     "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"query\": \"x\"}}</tool_call>", 0},
    {"a call without its closing tag",
     "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}", 0},
};
#define N_SAMPLES (sizeof samples / sizeof samples[0])
#define CHUNK ((size_t)4)

int main(void)
{
    static char schema[4096];
    sift_error err;
    if (calls_schema(schema, sizeof schema)) {
        fprintf(stderr, "tool_calls: the tools do not fit the schema buffer\n");
        return 1;
    }

    /* OpenAI's strict mode: the arguments have no property the tool does
     * not declare. Flexible whitespace (the default) between JSON tokens. */
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.source_name = "tools";
    sp.strict = 1;
    char *gbnf = NULL;
    size_t gbnf_len = 0;
    if (sift_json_schema_to_gbnf(&gbnf, &gbnf_len, schema, strlen(schema), &sp, &err)) {
        fprintf(stderr, "tool_calls: %s\n", err.message);
        return 1;
    }
    size_t text_len = gbnf_len + sizeof wrapper - 1;
    char *text = malloc(text_len);
    if (!text) {
        sift_json_schema_free_gbnf(gbnf, &sp);
        return 1;
    }
    memcpy(text, gbnf, gbnf_len);
    memcpy(text + gbnf_len, wrapper, sizeof wrapper - 1);
    sift_json_schema_free_gbnf(gbnf, &sp);

    /* No vocabulary: this program feeds bytes. A runtime passes the
     * model's vocabulary and adds the grammar to its chain. */
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.root = "tool-call";
    gp.source_name = "tool_calls";
    sift_grammar *g = NULL;
    sift_status st = sift_grammar_new(&g, text, text_len, NULL, &gp, &err);
    free(text);
    if (st) {
        fprintf(stderr, "tool_calls: %s\n", err.message);
        return 1;
    }
    static const char *const words[] = {"<tool_call>"};
    sift_lazy_params lp;
    sift_lazy_params_init(&lp);
    lp.words = words;
    lp.n_words = 1;
    if (sift_grammar_set_lazy(g, &lp, &err)) {
        fprintf(stderr, "tool_calls: %s\n", err.message);
        sift_grammar_free(g);
        return 1;
    }
    printf("tools: %zu, schema: %zu bytes, grammar: %zu bytes, trigger: <tool_call>\n",
           (size_t)N_TOOLS, strlen(schema), text_len);

    int wrong = 0;
    for (size_t i = 0; i < N_SAMPLES; i++) {
        const sample *s = &samples[i];
        sift_grammar_reset(g); /* untriggered again */
        /* Fed 4 bytes at a time, as a model's tokens would come. */
        size_t n = strlen(s->text), at = 0;
        st = SIFT_OK;
        for (; at < n && st == SIFT_OK; at += CHUNK)
            st = sift_grammar_accept_bytes(g, s->text + at, n - at < CHUNK ? n - at : CHUNK, &err);
        int ok = st == SIFT_OK && sift_grammar_is_complete(g);
        if (st == SIFT_OK)
            printf("%-40s %s (%s)\n", s->what, ok ? "accepted" : "incomplete",
                   sift_grammar_is_triggered(g) ? "triggered" : "not triggered");
        else if (st == SIFT_E_GRAMMAR_REJECT)
            printf("%-40s rejected at byte %zu: \"%.*s\"\n", s->what, at - CHUNK, (int)CHUNK,
                   s->text + at - CHUNK);
        else {
            fprintf(stderr, "tool_calls: %s\n", err.message);
            sift_grammar_free(g);
            return 1;
        }
        if (ok != s->valid) {
            printf("  wrong: expected %s\n", s->valid ? "accepted" : "rejected");
            wrong++;
        }
    }
    sift_grammar_free(g);
    printf("%s\n", wrong ? "FAILED" : "all outcomes as expected");
    return wrong ? 1 : 0;
}

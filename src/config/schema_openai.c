/*
 * schema_openai.c - an OpenAI-compatible request body (the openai form).
 *
 * What it owns: the keys of an OpenAI chat-completions or completions
 * request, read with the semantics OpenAI-compatible servers give them
 * (vLLM's), and the chain they make, in vLLM's order: allowed_token_ids,
 * min_tokens and logit_bias, then the penalties (repetition, frequency,
 * presence), then greedy when the temperature is below 1e-5, else
 * temperature, min_p, top_k, top_p and the draw (min_p is placed after
 * top_k, with which it commutes). A stage is added only when the request
 * asks for it (a value other than the neutral one).
 * response_format and tools + tool_choice become a JSON-Schema grammar
 * applied as a constrain stage (vLLM masks before it samples); logprobs
 * and top_logprobs become the config's log-probability setting. Keys
 * that do not change sampling are accepted with a warning; unknown keys
 * are errors (schema.c checks them against sift__cfg_openai_keys).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../grammar/gbnf.h"
#include "../grammar/trigger.h"
#include "schema.h"

/* The keys that change what is sampled. */
static const char *const SAMPLING_KEYS[] = {
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "seed",
    "logit_bias",
    "response_format",
    "tools",
    "tool_choice",
    "logprobs",
    "top_logprobs",
    "min_tokens",
    "allowed_token_ids",
    "tool_call_patterns",
};

/* Keys of a request that do not change sampling: accepted, with a
 * warning. max_tokens and max_completion_tokens also size the penalty
 * window (the whole generated text). */
static const char *const IGNORED_KEYS[] = {
    "messages",
    "prompt",
    "model",
    "max_tokens",
    "max_completion_tokens",
    "stream",
    "stream_options",
    "n",
    "stop",
    "stop_token_ids",
    "user",
    "echo",
    "suffix",
    "parallel_tool_calls",
    "store",
    "metadata",
    "service_tier",
    "modalities",
    "audio",
    "reasoning_effort",
    "prediction",
    "ignore_eos",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "include_stop_str_in_output",
    "add_generation_prompt",
    "continue_final_message",
    "add_special_tokens",
    "chat_template",
    "chat_template_kwargs",
    "documents",
    "priority",
    "request_id",
    "return_tokens_as_token_ids",
    "prompt_logprobs",
    "truncate_prompt_tokens",
    "cache_salt",
};

/* Keys that change sampling in some servers and that the openai form
 * does not take: errors naming them. */
static const char *const UNSUPPORTED_KEYS[] = {
    "best_of",       "use_beam_search",   "length_penalty", "bad_words",          "guided_json",
    "guided_regex",  "guided_choice",     "guided_grammar", "structured_outputs", "functions",
    "function_call", "logits_processors",
};

#define N_OF(a) (sizeof(a) / sizeof(a)[0])

_Static_assert(N_OF(SAMPLING_KEYS) + N_OF(IGNORED_KEYS) + N_OF(UNSUPPORTED_KEYS) <=
                   SIFT__CFG_MAX_FLAT_FORM_KEYS,
               "sift__cfg_openai_keys may write more keys than its callers hold");

/* vLLM treats a temperature below this as greedy (_SAMPLING_EPS). */
#define OPENAI_GREEDY_EPS 1e-5

/* The penalty window when the request bounds the generated text
 * neither by max_tokens nor by n_ctx. */
enum { OPENAI_DEFAULT_WINDOW = 4096 };

/* The default trigger of tool_choice "auto": a call written as
 * <tool_call>{...} (Hermes, Qwen); the grammar starts at the "{". */
static const char DEFAULT_TOOL_PATTERN[] = "<tool_call>\\s*(\\{)";

size_t sift__cfg_openai_keys(const char **out)
{
    size_t n = 0;
    for (size_t i = 0; i < N_OF(SAMPLING_KEYS); i++)
        out[n++] = SAMPLING_KEYS[i];
    for (size_t i = 0; i < N_OF(IGNORED_KEYS); i++)
        out[n++] = IGNORED_KEYS[i];
    for (size_t i = 0; i < N_OF(UNSUPPORTED_KEYS); i++)
        out[n++] = UNSUPPORTED_KEYS[i];
    return n;
}

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

/* A number in [lo, hi] at key `k` (absent: *out = def). */
static int num(cfg_validator *v, const cfg_node *root, const char *k, double lo, double hi,
               float def, float *out)
{
    const cfg_node *n = sift__cfg_find(v, root, k);
    float f;
    *out = def;
    if (!n || sift__cfg_is_null(n))
        return 1;
    if (isinf(hi)) { /* a finite number >= lo */
        if (!sift__cfg_get_finite(v, n, k, &f))
            return 0;
        if (f < lo)
            return sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "%s must be >= %g, got %s", k, lo,
                                    sift__cfg_echo(v, n));
    } else if (!sift__cfg_get_float_in(v, n, k, lo, hi, &f)) {
        return 0;
    }
    *out = f;
    return 1;
}

/* A stage with its YAML defaults, at node `at`. */
static void stage_init(cfg_stage *st, const char *name, const cfg_node *at)
{
    memset(st, 0, sizeof *st);
    st->desc = sift__cfg_desc_named(name);
    st->line = at->line;
    st->col = at->col;
    sift__rec_defaults(st->desc, &st->rec, 1);
}

static void set_f(cfg_stage *st, const char *param, float x)
{
    *SIFT__REC_FIELD(&st->rec, sift__param_find(st->desc, param), float) = x;
}

static void set_i(cfg_stage *st, const char *param, int32_t x)
{
    *SIFT__REC_FIELD(&st->rec, sift__param_find(st->desc, param), int32_t) = x;
}

/* ------------------------------------------------------------------ */
/* JSON text of YAML nodes (for the schemas)                           */
/* ------------------------------------------------------------------ */

static void jputs(cfg_json *o, const char *s)
{
    sift__cfg_json_put(o, s, strlen(s));
}

/* ------------------------------------------------------------------ */
/* The grammar: response_format, tools                                 */
/* ------------------------------------------------------------------ */

/* Converts the schema in `o` to GBNF and makes it the config's grammar
 * (constrain mode, lazy with the patterns if any); errors at the YAML
 * node nearest the converter's JSON offset, prefixed with `what`. */
static int set_grammar(cfg_validator *v, cfg_json *o, const cfg_node *at, const char *what,
                       int strict, const cfg_node *const *patterns, size_t n_patterns)
{
    sift_config *cfg = v->cfg;
    if (o->bad) {
        if (o->p && o->n >= cfg->params.max_bytes)
            return sift__cfg_err_at(v, at, SIFT_E_CONFIG_LIMIT, "%s: the schema is too large",
                                    what);
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    sift_json_schema_params sp;
    sift_json_schema_params_init(&sp);
    sp.allocator = &cfg->al.a;
    sp.source_name = what;
    sp.max_grammar_bytes = cfg->params.max_bytes;
    sp.strict = strict;
    sift_error e;
    char *gbnf = NULL;
    size_t n = 0;
    sift_status st = sift_json_schema_to_gbnf(&gbnf, &n, o->p, o->n, &sp, &e);
    if (st == SIFT_E_NOMEM) {
        v->st = st;
        return 0;
    }
    if (st != SIFT_OK) {
        const char *msg = strstr(e.message, ": #");
        msg = msg ? msg + 2 : e.message;
        int64_t off = at->off;
        for (size_t i = 0; i < o->n_at && e.offset >= 0 && o->at[i][0] <= e.offset; i++)
            off = o->at[i][1];
        return sift__cfg_err_off(v, off, st, "%s: %s", what, msg);
    }
    cfg->g_text = gbnf;
    cfg->grammar.length = n;
    cfg->g_root = sift__memdup(&cfg->al, "root", 4);
    if (!cfg->g_root) {
        v->st = SIFT_E_NOMEM;
        return 0;
    }
    if (n_patterns) {
        cfg->g_patterns = sift__calloc(&cfg->al, n_patterns, sizeof *cfg->g_patterns);
        if (!cfg->g_patterns) {
            v->st = SIFT_E_NOMEM;
            return 0;
        }
        for (size_t i = 0; i < n_patterns; i++) {
            cfg->g_patterns[i] =
                patterns[i]
                    ? sift__memdup(&cfg->al, patterns[i]->val, patterns[i]->len)
                    : sift__memdup(&cfg->al, DEFAULT_TOOL_PATTERN, sizeof DEFAULT_TOOL_PATTERN - 1);
            if (!cfg->g_patterns[i]) {
                v->st = SIFT_E_NOMEM;
                return 0;
            }
            cfg->grammar.n_patterns = i + 1; /* sift_config_free frees them */
        }
        cfg->grammar.lazy = 1;
        cfg->grammar.patterns = (const char *const *)cfg->g_patterns;
    }
    /* the grammar's places are the schema node's first character */
    cfg->grammar.style = SIFT_SCALAR_PLAIN;
    cfg->g_node = *at;
    cfg->g_node.style = SIFT_SCALAR_FOLDED;
    cfg->g_node.val = cfg->g_text;
    cfg->g_node.len = n;
    sift__cfg_linecol(&cfg->src, (size_t)(at->off < 0 ? 0 : at->off), &cfg->grammar.line,
                      &cfg->grammar.column);
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.source_name = what;
    gp.allocator = &cfg->al.a;
    gp.max_bytes = cfg->params.max_bytes;
    sift_grammar *g = NULL;
    int needs_vocab = 0;
    st = sift__grammar_new_ex(&g, cfg->g_text, n, NULL, &gp, &needs_vocab, &e);
    sift_grammar_free(g);
    if (st == SIFT_E_NOMEM) {
        v->st = st;
        return 0;
    }
    if (st != SIFT_OK)
        return sift__cfg_err_at(v, at, st, "%s: %s", what, e.message);
    cfg->grammar.text = cfg->g_text;
    cfg->grammar.root = cfg->g_root;
    cfg->grammar.mode = SIFT_GRAMMAR_CONSTRAIN;
    cfg->has_grammar = 1;
    return 1;
}

/* response_format: {type: text | json_object | json_schema, json_schema:
 * {name, schema, strict, description}}. Returns 1 and *js the schema
 * node (NULL for json_object: any JSON object; *none = 1 for text). */
static int response_format(cfg_validator *v, const cfg_node *rf, const cfg_node **js, int *strict,
                           int *none)
{
    static const char *const KEYS[] = {"type", "json_schema"};
    static const char *const JS_KEYS[] = {"name", "schema", "strict", "description"};
    *js = NULL;
    *strict = 0;
    *none = 0;
    if (rf->bad)
        return 0;
    if (rf->type != CFG_MAP)
        return sift__cfg_type_err(v, rf, "response_format", "mapping {type, json_schema}");
    sift__cfg_check_keys(v, rf, KEYS, 2, "response_format: ");
    const cfg_node *t = sift__cfg_find(v, rf, "type");
    if (!t)
        return sift__cfg_err_at(v, rf, SIFT_E_CONFIG_KEY, "response_format: missing 'type'");
    if (!sift__cfg_get_str(v, t, "response_format.type"))
        return 0;
    if (sift__cfg_streq(t, "text")) {
        *none = 1;
        return 1;
    }
    if (sift__cfg_streq(t, "json_object"))
        return 1;
    if (!sift__cfg_streq(t, "json_schema"))
        return sift__cfg_err_at(v, t, SIFT_E_CONFIG_VALUE,
                                "response_format.type must be text, json_object or json_schema, "
                                "got '%s'",
                                sift__cfg_echo(v, t));
    const cfg_node *j = sift__cfg_find(v, rf, "json_schema");
    if (!j || j->type != CFG_MAP)
        return j ? sift__cfg_type_err(v, j, "response_format.json_schema",
                                      "mapping {name, schema, strict}")
                 : sift__cfg_err_at(v, rf, SIFT_E_CONFIG_KEY,
                                    "response_format: json_schema needs 'json_schema'");
    sift__cfg_check_keys(v, j, JS_KEYS, 4, "response_format.json_schema: ");
    const cfg_node *s = sift__cfg_find(v, j, "schema"), *st = sift__cfg_find(v, j, "strict");
    if (st && !sift__cfg_is_null(st) && !sift__cfg_get_bool(v, st, "strict", strict))
        return 0;
    if (!s)
        return sift__cfg_err_at(v, j, SIFT_E_CONFIG_KEY,
                                "response_format.json_schema: missing 'schema'");
    *js = s;
    return 1;
}

/* A tool's function: its name (*name) and parameters (*params, NULL =
 * any object). */
static int tool_function(cfg_validator *v, const cfg_node *tool, size_t i, const cfg_node **name,
                         const cfg_node **params, int *strict)
{
    static const char *const KEYS[] = {"type", "function"};
    static const char *const FN_KEYS[] = {"name", "description", "parameters", "strict"};
    char what[48];
    snprintf(what, sizeof what, "tools[%zu]", i);
    if (tool->bad)
        return 0;
    if (tool->type != CFG_MAP)
        return sift__cfg_type_err(v, tool, what, "mapping {type: function, function}");
    sift__cfg_check_keys(v, tool, KEYS, 2, "tools: ");
    const cfg_node *t = sift__cfg_find(v, tool, "type"), *f = sift__cfg_find(v, tool, "function");
    if (t && !sift__cfg_streq(t, "function"))
        return sift__cfg_err_at(v, t, SIFT_E_CONFIG_VALUE, "%s: type must be 'function'", what);
    if (!f || f->type != CFG_MAP)
        return f ? sift__cfg_type_err(v, f, what, "mapping {name, parameters}")
                 : sift__cfg_err_at(v, tool, SIFT_E_CONFIG_KEY, "%s: missing 'function'", what);
    sift__cfg_check_keys(v, f, FN_KEYS, 4, "tools.function: ");
    *name = sift__cfg_find(v, f, "name");
    *params = sift__cfg_find(v, f, "parameters");
    const cfg_node *st = sift__cfg_find(v, f, "strict");
    int s = 0;
    if (st && !sift__cfg_is_null(st) && !sift__cfg_get_bool(v, st, "strict", &s))
        return 0;
    *strict |= s;
    if (!*name)
        return sift__cfg_err_at(v, f, SIFT_E_CONFIG_KEY, "%s: missing 'name'", what);
    if (!sift__cfg_get_str(v, *name, "tools.function.name"))
        return 0;
    if (*params && sift__cfg_is_null(*params))
        *params = NULL;
    return 1;
}

/* tool_choice: "none", "auto", "required", or {type: function,
 * function: {name}}; *named the name node for the last. */
enum { TC_NONE, TC_AUTO, TC_REQUIRED, TC_NAMED };

static int tool_choice(cfg_validator *v, const cfg_node *tc, int *choice, const cfg_node **named)
{
    *named = NULL;
    if (tc->bad)
        return 0;
    if (tc->type == CFG_SCALAR) {
        if (!sift__cfg_get_str(v, tc, "tool_choice"))
            return 0;
        if (sift__cfg_streq(tc, "none"))
            *choice = TC_NONE;
        else if (sift__cfg_streq(tc, "auto"))
            *choice = TC_AUTO;
        else if (sift__cfg_streq(tc, "required"))
            *choice = TC_REQUIRED;
        else
            return sift__cfg_err_at(v, tc, SIFT_E_CONFIG_VALUE,
                                    "tool_choice must be none, auto, required or {type: function, "
                                    "function: {name}}, got '%s'",
                                    sift__cfg_echo(v, tc));
        return 1;
    }
    if (tc->type != CFG_MAP)
        return sift__cfg_type_err(v, tc, "tool_choice", "string or {type: function, function}");
    static const char *const KEYS[] = {"type", "function"};
    sift__cfg_check_keys(v, tc, KEYS, 2, "tool_choice: ");
    const cfg_node *f = sift__cfg_find(v, tc, "function");
    const cfg_node *nm = f && f->type == CFG_MAP ? sift__cfg_find(v, f, "name") : NULL;
    if (!nm || !sift__cfg_get_str(v, nm, "tool_choice.function.name"))
        return nm ? 0
                  : sift__cfg_err_at(v, f ? f : tc, SIFT_E_CONFIG_KEY,
                                     "tool_choice: missing function.name");
    *choice = TC_NAMED;
    *named = nm;
    return 1;
}

/* The parameters of a tool as JSON (any object when it has none). */
static void tool_params(cfg_validator *v, cfg_json *o, const cfg_node *params)
{
    if (params)
        sift__cfg_json_value(v, o, params, 0);
    else
        jputs(o, "{\"type\":\"object\"}");
}

/* tool_call_patterns (tool_choice auto only; a warning otherwise): each
 * a valid PCRE2 pattern, kept in pats[0..*np); none given, the default
 * pattern (a NULL entry) under auto. pats holds 256. */
static int call_patterns(cfg_validator *v, const cfg_node *root, int choice, const cfg_node **pats,
                         size_t *np)
{
    *np = 0;
    const cfg_node *pn = sift__cfg_find(v, root, "tool_call_patterns");
    if (pn && choice == TC_AUTO) {
        if (pn->type != CFG_SEQ || pn->n_children == 0 || pn->n_children > 256)
            return sift__cfg_type_err(v, pn, "tool_call_patterns",
                                      "sequence of 1 .. 256 PCRE2 patterns");
        int ok = 1;
        for (uint32_t c = pn->first; c != CFG_NONE; c = NODE(v, c)->next) {
            const cfg_node *p = NODE(v, c);
            size_t eoff = 0;
            int empty = 0;
            char msg[256];
            if (!sift__cfg_get_str(v, p, "tool_call_patterns")) {
                ok = 0;
                continue;
            }
            sift_status st = sift__trigger_check_pattern(p->val, p->len, 0, &v->cfg->al, &eoff,
                                                         &empty, msg, sizeof msg);
            if (st == SIFT_E_NOMEM) {
                v->st = st;
                return 0;
            }
            if (st != SIFT_OK)
                ok = sift__cfg_err_off(v, sift__cfg_scalar_offset(v->cfg, p, eoff), st,
                                       "tool_call_patterns, offset %zu: %s", eoff, msg);
            pats[(*np)++] = p;
        }
        if (!ok)
            return 0;
    } else if (pn) {
        sift__cfg_warn_at(v, pn, "tool_call_patterns apply to tool_choice auto only; ignored");
    }
    if (choice == TC_AUTO && *np == 0)
        pats[(*np)++] = NULL; /* the default pattern */
    return 1;
}

/* The tools' JSON schema into o for a choice other than none: auto, one
 * call {"name", "arguments"} of any tool; required, an array of calls
 * {"name", "parameters"}; named, that function's parameters (an error
 * when no tool has that name). *strict is set when a tool asks for it. */
static int tools_schema(cfg_validator *v, cfg_json *o, const cfg_node *tools, int choice,
                        const cfg_node *named, int *strict)
{
    int ok = 1, found = 0;
    size_t i = 0;
    if (choice == TC_AUTO)
        jputs(o, "{\"anyOf\":[");
    else if (choice == TC_REQUIRED)
        jputs(o, "{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":\"object\",\"anyOf\":[");
    for (uint32_t c = tools->first; c != CFG_NONE; c = NODE(v, c)->next, i++) {
        const cfg_node *name = NULL, *params = NULL;
        if (!tool_function(v, NODE(v, c), i, &name, &params, strict)) {
            ok = 0;
            continue;
        }
        if (choice == TC_NAMED) {
            if (name->len == named->len && !memcmp(name->val, named->val, name->len)) {
                found = 1;
                tool_params(v, o, params);
            }
            continue;
        }
        const char *args = choice == TC_AUTO ? "arguments" : "parameters";
        jputs(o, i ? ",{" : "{");
        sift__cfg_json_mark(o, NODE(v, c));
        jputs(o, "\"type\":\"object\",\"properties\":{\"name\":{\"const\":");
        sift__cfg_json_string(o, name->val, name->len);
        jputs(o, "},\"");
        jputs(o, args);
        jputs(o, "\":");
        tool_params(v, o, params);
        jputs(o, "},\"required\":[\"name\",\"");
        jputs(o, args);
        jputs(o, "\"]}");
    }
    if (choice == TC_AUTO)
        jputs(o, "]}");
    else if (choice == TC_REQUIRED)
        jputs(o, "]}}");
    if (ok && choice == TC_NAMED && !found)
        ok = sift__cfg_err_at(v, named, SIFT_E_CONFIG_VALUE,
                              "tool_choice names '%s', which is not among the tools",
                              sift__cfg_echo(v, named));
    return ok;
}

/* tools + tool_choice -> the grammar (docs/config.md, "OpenAI form"):
 * auto, a lazy grammar of one call {"name", "arguments"} after the
 * trigger; required, vLLM's array of calls {"name", "parameters"} from
 * the first token; a named function, that function's parameters from
 * the first token; none, nothing. */
static int tools_grammar(cfg_validator *v, const cfg_node *root, const cfg_node *tools,
                         const cfg_node *tc, int *made)
{
    int choice = TC_AUTO;
    const cfg_node *named = NULL;
    *made = 0;
    if (tc && !sift__cfg_is_null(tc) && !tool_choice(v, tc, &choice, &named))
        return 0;
    if (!tools || sift__cfg_is_null(tools)) {
        if (tc && (choice == TC_REQUIRED || choice == TC_NAMED))
            return sift__cfg_err_at(v, tc, SIFT_E_CONFIG_VALUE, "tool_choice '%s' needs tools",
                                    choice == TC_NAMED ? "function" : "required");
        return 1;
    }
    if (tools->bad)
        return 0;
    if (tools->type != CFG_SEQ || tools->n_children == 0)
        return sift__cfg_type_err(v, tools, "tools", "non-empty sequence of {type, function}");
    if (choice == TC_NONE)
        return 1;
    const cfg_node *pats[256];
    size_t np = 0;
    if (!call_patterns(v, root, choice, pats, &np))
        return 0;
    cfg_json o;
    memset(&o, 0, sizeof o);
    o.al = &v->cfg->al;
    int strict = 0;
    int ok = tools_schema(v, &o, tools, choice, named, &strict);
    if (ok) {
        ok = set_grammar(v, &o, tools, "tools", strict, pats, choice == TC_AUTO ? np : 0);
        *made = ok;
    }
    sift__free(o.al, o.p);
    sift__free(o.al, o.at);
    return ok;
}

/* response_format, then tools: one grammar at most. */
static int openai_grammar(cfg_validator *v, const cfg_node *root)
{
    const cfg_node *rf = sift__cfg_find(v, root, "response_format");
    const cfg_node *tools = sift__cfg_find(v, root, "tools");
    const cfg_node *tc = sift__cfg_find(v, root, "tool_choice");
    int made = 0;
    if (!tools_grammar(v, root, tools, tc, &made))
        return 0;
    if (!rf || sift__cfg_is_null(rf))
        return 1;
    const cfg_node *js;
    int strict, none;
    if (!response_format(v, rf, &js, &strict, &none))
        return 0;
    if (none)
        return 1;
    if (made)
        return sift__cfg_err_at(v, rf, SIFT_E_CONFIG_KEY,
                                "response_format and tools both constrain the output; give one");
    cfg_json o;
    memset(&o, 0, sizeof o);
    o.al = &v->cfg->al;
    if (js)
        sift__cfg_json_value(v, &o, js, 0);
    else
        jputs(&o, "{\"type\":\"object\"}");
    int ok = set_grammar(v, &o, js ? js : rf, "response_format", strict, NULL, 0);
    sift__free(o.al, o.p);
    sift__free(o.al, o.at);
    return ok;
}

/* logprobs (a boolean; the completions API's integer is the count) and
 * top_logprobs (0 .. 20, with logprobs true). */
static int openai_logprobs(cfg_validator *v, const cfg_node *root)
{
    const cfg_node *lp = sift__cfg_find(v, root, "logprobs");
    const cfg_node *top = sift__cfg_find(v, root, "top_logprobs");
    sift_config_logprobs *out = &v->cfg->logprobs;
    if (lp && !sift__cfg_is_null(lp)) {
        if (sift__cfg_is_plain(lp) && sift__cfg_is_bool_word(lp)) {
            int b;
            if (!sift__cfg_get_bool(v, lp, "logprobs", &b))
                return 0;
            out->enabled = b;
        } else {
            int32_t k;
            if (!sift__cfg_get_int_in(v, lp, "logprobs (the completions API's count)", 0, 20, &k))
                return 0;
            out->enabled = 1;
            out->top_n = k;
        }
    }
    if (top && !sift__cfg_is_null(top)) {
        int32_t k;
        if (!sift__cfg_get_int_in(v, top, "top_logprobs", 0, 20, &k))
            return 0;
        if (!out->enabled)
            return sift__cfg_err_at(v, top, SIFT_E_CONFIG_VALUE,
                                    "top_logprobs needs logprobs: true");
        out->top_n = k;
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* The chain                                                           */
/* ------------------------------------------------------------------ */

/* The window of the penalties: the whole generated text, bounded by
 * max_tokens (or max_completion_tokens), else n_ctx, else 4096 (warned). */
static int32_t penalty_window(cfg_validator *v, const cfg_node *root, const cfg_node *at)
{
    static const char *const KEYS[] = {"max_completion_tokens", "max_tokens"};
    for (size_t i = 0; i < 2; i++) {
        const cfg_node *n = sift__cfg_find(v, root, KEYS[i]);
        int64_t x;
        if (n && sift__cfg_is_plain(n) && sift__cfg_int_syntax(n->val, n->len) &&
            sift__cfg_get_int(v, n, KEYS[i], &x) && x >= 1)
            return x > SIFT_DEFAULT_MAX_HISTORY ? SIFT_DEFAULT_MAX_HISTORY : (int32_t)x;
    }
    if (v->n_ctx > 0)
        return v->n_ctx > SIFT_DEFAULT_MAX_HISTORY ? SIFT_DEFAULT_MAX_HISTORY : v->n_ctx;
    sift__cfg_warn_at(v, at,
                      "the penalties count the whole generated text; without max_tokens or "
                      "n_ctx the window is %d tokens",
                      OPENAI_DEFAULT_WINDOW);
    return OPENAI_DEFAULT_WINDOW;
}

/* allowed_token_ids and min_tokens (vLLM's first processors). */
static int openai_leading(cfg_validator *v, const cfg_node *root)
{
    const cfg_node *n;
    int ok = 1;
    if ((n = sift__cfg_find(v, root, "allowed_token_ids")) && !sift__cfg_is_null(n)) {
        if (n->type != CFG_SEQ || n->n_children == 0 || n->n_children > 65536)
            return sift__cfg_type_err(v, n, "allowed_token_ids",
                                      "sequence of 1 .. 65536 token ids");
        int32_t id;
        for (uint32_t c = n->first; c != CFG_NONE; c = NODE(v, c)->next)
            ok &= sift__cfg_token_id(v, NODE(v, c), "allowed_token_ids", &id);
        if (!ok)
            return 0;
        cfg_stage st;
        stage_init(&st, "allowed_tokens", n);
        if (!sift__cfg_string_param(v, sift__param_find(st.desc, "ids"), n, "allowed_token_ids",
                                    &st.rec)) {
            sift__cfg_stage_free(&v->cfg->al, &st);
            return 0;
        }
        sift__cfg_push(v, &st);
    }
    if ((n = sift__cfg_find(v, root, "min_tokens")) && !sift__cfg_is_null(n)) {
        int32_t m;
        if (!sift__cfg_get_int_in(v, n, "min_tokens", 0, INT32_MAX, &m))
            return 0;
        if (m > 0) {
            cfg_stage st;
            stage_init(&st, "min_tokens", n);
            set_i(&st, "n", m);
            sift__cfg_push(v, &st);
        }
    }
    return ok;
}

void sift__cfg_openai_params(cfg_validator *v, const cfg_node *root)
{
    for (uint32_t ki = root->first; ki != CFG_NONE;) {
        const cfg_node *key = NODE(v, ki);
        for (size_t i = 0; !key->bad && i < N_OF(IGNORED_KEYS); i++)
            if (sift__cfg_streq(key, IGNORED_KEYS[i]))
                sift__cfg_warn_at(
                    v, key, "'%s' does not change sampling; ignored%s", IGNORED_KEYS[i],
                    !strncmp(IGNORED_KEYS[i], "max_", 4) ? " (it bounds the penalties' window)"
                                                         : "");
        for (size_t i = 0; !key->bad && i < N_OF(UNSUPPORTED_KEYS); i++)
            if (sift__cfg_streq(key, UNSUPPORTED_KEYS[i]))
                sift__cfg_err_at(v, key, SIFT_E_CONFIG_KEY,
                                 "'%s' changes sampling but the openai form does not take it",
                                 UNSUPPORTED_KEYS[i]);
        ki = key->next == CFG_NONE ? CFG_NONE : NODE(v, key->next)->next;
    }
    float temp, top_p, min_p, freq, pres, rep;
    int ok = num(v, root, "temperature", 0, INFINITY, 1.0f, &temp);
    ok &= num(v, root, "top_p", 0, 1, 1.0f, &top_p);
    ok &= num(v, root, "min_p", 0, 1, 0.0f, &min_p);
    ok &= num(v, root, "frequency_penalty", -2, 2, 0.0f, &freq);
    ok &= num(v, root, "presence_penalty", -2, 2, 0.0f, &pres);
    ok &= num(v, root, "repetition_penalty", 0, INFINITY, 1.0f, &rep);
    const cfg_node *n = sift__cfg_find(v, root, "top_k");
    int32_t top_k = -1;
    if (n && !sift__cfg_is_null(n) && !sift__cfg_get_int_in(v, n, "top_k", -1, INT32_MAX, &top_k))
        ok = 0;
    if ((n = sift__cfg_find(v, root, "top_p")) && top_p <= 0)
        ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "top_p must be in (0, 1], got %s",
                              sift__cfg_echo(v, n));
    if ((n = sift__cfg_find(v, root, "repetition_penalty")) && rep <= 0)
        ok = sift__cfg_err_at(v, n, SIFT_E_CONFIG_VALUE, "repetition_penalty must be > 0, got %s",
                              sift__cfg_echo(v, n));
    ok &= openai_logprobs(v, root);
    ok &= openai_leading(v, root);
    if ((n = sift__cfg_find(v, root, "logit_bias")) && !sift__cfg_is_null(n)) {
        size_t before = v->cfg->n_errors;
        sift__cfg_request_bias(v, n, 1);
        ok &= v->cfg->n_errors == before;
    }
    if (v->st == SIFT_OK)
        ok &= openai_grammar(v, root);
    if (!ok || v->st != SIFT_OK || v->cfg->n_errors)
        return;
    cfg_stage st;
    if (rep != 1 || freq != 0 || pres != 0) {
        const cfg_node *at = sift__cfg_find(v, root,
                                            rep != 1    ? "repetition_penalty"
                                            : freq != 0 ? "frequency_penalty"
                                                        : "presence_penalty");
        stage_init(&st, "penalties", at);
        set_i(&st, "last_n", penalty_window(v, root, at));
        set_f(&st, "repeat", rep);
        set_f(&st, "frequency", freq);
        set_f(&st, "presence", pres);
        sift__cfg_push(v, &st);
    }
    if (temp < OPENAI_GREEDY_EPS) {
        stage_init(&st, "greedy", root);
        sift__cfg_push(v, &st);
        return;
    }
    if (temp != 1) {
        stage_init(&st, "temperature", sift__cfg_find(v, root, "temperature"));
        set_f(&st, "temp", temp);
        sift__cfg_push(v, &st);
    }
    if (top_k > 0) {
        stage_init(&st, "top_k", sift__cfg_find(v, root, "top_k"));
        set_i(&st, "k", top_k);
        sift__cfg_push(v, &st);
    }
    /* vLLM applies min_p before top_k; the two commute (min_p keeps a
     * prefix of the canonical order, top_k the first k of what it gets),
     * so top_k goes first: the same tokens, and the plan does not rest on
     * min_p's certificate (the warning "min_p before top_k leaves the plan
     * certified"). */
    if (min_p > 0) {
        stage_init(&st, "min_p", sift__cfg_find(v, root, "min_p"));
        set_f(&st, "p", min_p);
        sift__cfg_push(v, &st);
    }
    if (top_p < 1) {
        stage_init(&st, "top_p", sift__cfg_find(v, root, "top_p"));
        set_f(&st, "p", top_p);
        sift__cfg_push(v, &st);
    }
    stage_init(&st, "dist", root);
    sift__cfg_push(v, &st);
}

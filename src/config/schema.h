/*
 * schema.h - shared between the files of the schema validator.
 *
 * The validator walks a configuration tree (tree.c) once and fills the
 * stage list and the grammar section of the config. Its files, from the
 * bottom of the call graph up (a file calls only files above it in this
 * list; tests/check_config_layering.sh checks that no two call each other
 * in a loop):
 *
 *   schema_value.c    diagnostics at a node, YAML 1.2 scalar typing,
 *                     mapping keys (duplicates, did-you-mean), token ids
 *   schema_stage.c    the stages of a `chain:` list: a walk over each
 *                     descriptor's parameter table (src/samplers/)
 *   schema_flat.c     llama.cpp's flat form and llama-server's request
 *                     keys, translated into the chain common_sampler_init
 *                     would build
 *   schema_grammar.c  the `grammar:` section (text or file, root, lazy
 *                     triggers, checked through the grammar and trigger
 *                     modules)
 *   schema_vocab.c    the `vocab:` key (file, special tokens, eog)
 *   schema_lint.c     the warnings over the whole valid chain
 *   schema.c          the document: top-level keys, seed, n_ctx,
 *                     vocab_size, and the order of the walk
 *
 * Every function here reports through the config's diagnostics and goes
 * on: a function that validates returns 1 for a valid value and 0 after
 * reporting (see the invariants in schema.c). Nothing here is API.
 */
#ifndef SIFT_CONFIG_SCHEMA_H
#define SIFT_CONFIG_SCHEMA_H

#include <stdarg.h>

#include "config_internal.h"

/* The state of one validation walk (sift__cfg_validate). */
typedef struct cfg_validator {
    sift_config *cfg;
    const cfg_tree *t;
    sift_status st; /* SIFT_E_NOMEM once something could not be stored */
    int32_t vocab_size;
    int has_vocab_file;
    char echo[2][96];
    int echo_i;
    int64_t *token_off; /* source offsets of the lazy trigger tokens */
    int32_t n_ctx;      /* the context size that -1 windows stand for; 0 = unset */
    const cfg_node *n_ctx_node;
    int flat; /* llama.cpp flat form */
} cfg_validator;

#define NODE(v, i) (&(v)->t->nodes[(i)])

/* The most top-level keys the flat form knows (sift__cfg_flat_form_keys). */
enum { SIFT__CFG_MAX_FLAT_FORM_KEYS = 256 };

/* ------------------------------------------------------------------ */
/* schema_value.c: diagnostics, scalars, mappings                      */
/* ------------------------------------------------------------------ */

/* A diagnostic at byte offset `off` of the source (-1: none); a failure
 * to store it sets v->st to SIFT_E_NOMEM. */
SIFT__HIDDEN void sift__cfg_vdiag(cfg_validator *v, sift_severity sev, sift_status code,
                                  int64_t off, const char *fmt, va_list ap);
/* An error at node `n` (NULL: no place), or at offset `off`; both
 * return 0, so `return sift__cfg_err_at(...)` reports and fails. */
SIFT__HIDDEN int sift__cfg_err_at(cfg_validator *v, const cfg_node *n, sift_status code,
                                  const char *fmt, ...) SIFT__PRINTF(4, 5);
SIFT__HIDDEN int sift__cfg_err_off(cfg_validator *v, int64_t off, sift_status code, const char *fmt,
                                   ...) SIFT__PRINTF(4, 5);
/* A warning at node `n`, at offset `off`, or at a 1-based line:col. */
SIFT__HIDDEN void sift__cfg_warn_at(cfg_validator *v, const cfg_node *n, const char *fmt, ...)
    SIFT__PRINTF(3, 4);
SIFT__HIDDEN void sift__cfg_warn_off(cfg_validator *v, int64_t off, const char *fmt, ...)
    SIFT__PRINTF(3, 4);
SIFT__HIDDEN void sift__cfg_warn_lc(cfg_validator *v, int32_t line, int32_t col, const char *fmt,
                                    ...) SIFT__PRINTF(4, 5);
/* A short printable copy of a scalar for messages (two live at a time). */
SIFT__HIDDEN const char *sift__cfg_echo(cfg_validator *v, const cfg_node *n);
/* 1 if `n` is a scalar whose value is exactly `s`. */
SIFT__HIDDEN int sift__cfg_streq(const cfg_node *n, const char *s);
/* A plain (unquoted) scalar; a plain null (empty, ~, null, Null, NULL);
 * a plain word YAML 1.1 reads as a boolean (true, yes, on, y, ... in
 * their three cases). */
SIFT__HIDDEN int sift__cfg_is_plain(const cfg_node *n);
SIFT__HIDDEN int sift__cfg_is_null(const cfg_node *n);
SIFT__HIDDEN int sift__cfg_is_bool_word(const cfg_node *n);
/* Decimal integer syntax: [-+]?[0-9]+ */
SIFT__HIDDEN int sift__cfg_int_syntax(const char *s, size_t n);
/* Explains why a plain scalar that looks numeric is not a YAML 1.2
 * decimal number; NULL if it does not look like one. */
SIFT__HIDDEN const char *sift__cfg_number_hint(const cfg_node *n);
/* "WHAT: expected EXPECTED, got TYPE [VALUE]" at `n`; returns 0. */
SIFT__HIDDEN int sift__cfg_type_err(cfg_validator *v, const cfg_node *n, const char *what,
                                    const char *expected);
/* Typed scalars. Each returns 1 and *out, or 0 after reporting; `what`
 * names the value in messages. get_int: a decimal integer; get_int_in:
 * one in [lo, hi] (the message names the range); get_float: a number
 * rounded to float (finite doubles beyond the float range are out of
 * range; infinities and NaN pass for range checks); get_float_in: a
 * number in [lo, hi], NaN rejected (BAD_INPUTS P-02); get_finite: a
 * finite float; get_bool: true or false; get_str: any non-null scalar. */
SIFT__HIDDEN int sift__cfg_get_int(cfg_validator *v, const cfg_node *n, const char *what,
                                   int64_t *out);
SIFT__HIDDEN int sift__cfg_get_int_in(cfg_validator *v, const cfg_node *n, const char *what,
                                      int64_t lo, int64_t hi, int32_t *out);
SIFT__HIDDEN int sift__cfg_get_float(cfg_validator *v, const cfg_node *n, const char *what,
                                     float *out);
SIFT__HIDDEN int sift__cfg_get_float_in(cfg_validator *v, const cfg_node *n, const char *what,
                                        double lo, double hi, float *out);
SIFT__HIDDEN int sift__cfg_get_finite(cfg_validator *v, const cfg_node *n, const char *what,
                                      float *out);
SIFT__HIDDEN int sift__cfg_get_bool(cfg_validator *v, const cfg_node *n, const char *what,
                                    int *out);
SIFT__HIDDEN int sift__cfg_get_str(cfg_validator *v, const cfg_node *n, const char *what);
/* The closest allowed name, or NULL if none is close enough. At most 64
 * x 64 cells per name, and asked only for a diagnostic that is kept
 * (sift__cfg_keeps), so a file of 10^5 unknown keys costs 100 of them. */
SIFT__HIDDEN const char *sift__cfg_did_you_mean(cfg_validator *v, const char *key, size_t len,
                                                const char *const *names, size_t n);
/* Checks a mapping's keys: strings, no merge keys, no duplicates (first
 * one wins, later ones are errors naming the first), and, if `names` is
 * not NULL, only those names (with a did-you-mean). `ctx` prefixes the
 * messages ("" at top level). */
SIFT__HIDDEN void sift__cfg_check_keys(cfg_validator *v, const cfg_node *map,
                                       const char *const *names, size_t n_names, const char *ctx);
/* The value of the first `name` key of a mapping, or NULL. */
SIFT__HIDDEN const cfg_node *sift__cfg_find(cfg_validator *v, const cfg_node *map,
                                            const char *name);
/* The key node whose value is `val` (for positions). */
SIFT__HIDDEN const cfg_node *sift__cfg_key_of(cfg_validator *v, const cfg_node *map,
                                              const cfg_node *val);
/* A token id key of logit_bias / trigger tokens. */
SIFT__HIDDEN int sift__cfg_token_id(cfg_validator *v, const cfg_node *n, const char *what,
                                    int32_t *out);
/* A descriptor the flat form or a warning names (the registry has it). */
SIFT__HIDDEN const sift__sampler_desc *sift__cfg_desc_named(const char *name);

/* ------------------------------------------------------------------ */
/* schema_stage.c: the stages of a `chain:` list                       */
/* ------------------------------------------------------------------ */

/* The `chain:` list: every item checked and, when valid, pushed. */
SIFT__HIDDEN void sift__cfg_chain_list(cfg_validator *v, const cfg_node *chain);
/* Parameter readers the flat form shares. A window of accepted tokens
 * (-1 is llama.cpp's "the context size", which stands for n_ctx when the
 * config gives one); a sequence of strings (a SIFT__PT_STRING_LIST
 * parameter, as DRY's breakers) into the record, or its default; one
 * number, boolean or choice parameter into the record, checked against
 * its range (`what` names it in messages); a SIFT__PT_ID_FLOAT_MAP
 * parameter (logit_bias) into the record, 1 when the stage is to be
 * added: valid, and not an empty flat map. */
SIFT__HIDDEN int sift__cfg_window(cfg_validator *v, const cfg_node *n, const char *what,
                                  int32_t *out);
SIFT__HIDDEN int sift__cfg_string_param(cfg_validator *v, const sift__param *pm,
                                        const cfg_node *seq, const char *what, void *rec);
SIFT__HIDDEN int sift__cfg_string_default(cfg_validator *v, const sift__param *pm, void *rec);
SIFT__HIDDEN int sift__cfg_value_param(cfg_validator *v, const sift__param *pm, const cfg_node *n,
                                       const char *what, void *rec);
SIFT__HIDDEN int sift__cfg_bias_param(cfg_validator *v, const sift__param *pm, const cfg_node *map,
                                      const cfg_node *at, void *rec, int flat);
/* Pushes a valid stage (the config takes it); on SIFT_E_NOMEM the stage
 * is freed, v->st set and 0 returned. */
SIFT__HIDDEN int sift__cfg_push(cfg_validator *v, cfg_stage *st);

/* ------------------------------------------------------------------ */
/* schema_flat.c: llama.cpp's flat form                                */
/* ------------------------------------------------------------------ */

/* Writes the top-level keys of the flat form (the registry's flat keys,
 * the flat form's own keys, then the request keys it ignores) to out[]
 * (room for SIFT__CFG_MAX_FLAT_FORM_KEYS); returns how many. */
SIFT__HIDDEN size_t sift__cfg_flat_form_keys(const char **out);
/* 1 if `key` is one of those keys. */
SIFT__HIDDEN int sift__cfg_is_flat_form_key(const cfg_node *key);
/* The flat form at `root`: its keys checked, its chain built in
 * llama.cpp's order. */
SIFT__HIDDEN void sift__cfg_flat_params(cfg_validator *v, const cfg_node *root);

/* ------------------------------------------------------------------ */
/* schema_grammar.c, schema_vocab.c, schema_lint.c                     */
/* ------------------------------------------------------------------ */

/* The `grammar:` section (docs/config.md). */
SIFT__HIDDEN void sift__cfg_grammar_section(cfg_validator *v, const cfg_node *g);

/* JSON text written from YAML nodes (an inline json_schema, an OpenAI
 * request's schemas), and for each value written the offset of its YAML
 * node: a converter error at a JSON offset is shown at the node whose
 * text starts last at or before it. Zero it and set `al`; `bad` is set
 * on the first failed allocation (or a tree deeper than 256), after
 * which writing does nothing. */
typedef struct cfg_json {
    const sift__alloc *al;
    char *p;
    size_t n, cap;
    int64_t (*at)[2]; /* (json offset, yaml offset) */
    size_t n_at, cap_at;
    int bad;
} cfg_json;

/* Appends s[0..n) (kept NUL-terminated). */
SIFT__HIDDEN void sift__cfg_json_put(cfg_json *o, const char *s, size_t n);
/* Appends s[0..n) as a JSON string (quotes, '"', '\\' and controls
 * escaped). */
SIFT__HIDDEN void sift__cfg_json_string(cfg_json *o, const char *s, size_t n);
/* Records that what is written next comes from node n. */
SIFT__HIDDEN void sift__cfg_json_mark(cfg_json *o, const cfg_node *n);
/* Appends node n as JSON: plain null, true, false and JSON numbers as
 * themselves, other scalars as strings, mappings as objects, sequences
 * as arrays (marked node by node). */
SIFT__HIDDEN void sift__cfg_json_value(cfg_validator *v, cfg_json *o, const cfg_node *n, int depth);
/* The flat form's json_schema (a mapping, or a schema file's name): a
 * check-mode grammar, as llama.cpp's. */
SIFT__HIDDEN void sift__cfg_flat_json_schema(cfg_validator *v, const cfg_node *js);
/* `vocab: FILE`, or `vocab: {file: FILE, special: {TEXT: ID...}, eog:
 * [ID or TEXT...]}` (docs/config.md). */
SIFT__HIDDEN void sift__cfg_vocab_key(cfg_validator *v, const cfg_node *n);
/* The warnings over a valid chain (run after the trial build). */
SIFT__HIDDEN void sift__cfg_chain_warnings(cfg_validator *v);

/* ------------------------------------------------------------------ */
/* schema_bias.c, schema_openai.c: request bodies                      */
/* ------------------------------------------------------------------ */

/* A request's `logit_bias` (docs/config.md): llama-server's (openai = 0:
 * a mapping or a list of [token, bias] pairs, tokens as ids or text,
 * repeated ids summed) or an OpenAI-compatible server's (openai = 1: a
 * mapping of token ids, biases clamped to [-100, 100]); pushes the stage
 * when it has entries. */
SIFT__HIDDEN void sift__cfg_request_bias(cfg_validator *v, const cfg_node *map, int openai);
/* 1 if `d` is the stage that carries token text to the build. */
SIFT__HIDDEN int sift__cfg_is_text_bias(const sift__sampler_desc *d);
/* The top-level keys of the OpenAI form into out[] (room for
 * SIFT__CFG_MAX_FLAT_FORM_KEYS); returns how many. */
SIFT__HIDDEN size_t sift__cfg_openai_keys(const char **out);
/* The OpenAI form at `root`: its keys checked, its chain built in
 * vLLM's order, its grammar and log-probability setting filled. */
SIFT__HIDDEN void sift__cfg_openai_params(cfg_validator *v, const cfg_node *root);

#endif

/*
 * json_schema.h - the JSON Schema converter's private interface, shared
 * by the json_schema*.c files:
 *
 *   json_schema.c         API, options, parsing, error places (JSON
 *                         Pointer -> line:col), the driver
 *   json_schema_emit.c    the output: rules, literals, shared rules
 *                         (ws, string, number, value), key exclusion
 *   json_schema_gen.c     dispatch on a subschema: type, enum, const,
 *                         anyOf/oneOf/allOf, $ref, nullable, true/false
 *   json_schema_merge.c   allOf and the siblings of $ref and anyOf:
 *                         subschemas merged into one
 *   json_schema_cond.c    if / then / else, propertyNames and more
 *                         negations, rewritten into the subset
 *   json_schema_contains.c  arrays with contains / minContains /
 *                         maxContains
 *   json_schema_object.c  objects and arrays
 *   json_schema_oneof.c   oneOf that the linear tests leave open: types
 *                         two branches admit whole, the pairwise test,
 *                         overlapping object branches rewritten
 *   json_schema_scalar.c  strings (lengths, formats, pattern), integer
 *                         and number ranges
 *   json_schema_value.c   one value against a schema (enum / const
 *                         values against the keywords beside them)
 *   json_schema_ref.c     $ref by URI: $id, $anchor, base URIs
 *   json_schema_uneval.c  unevaluatedProperties / unevaluatedItems as
 *                         members over what the merged schema evaluates
 *
 * Every subschema becomes at most a few rules named sN (N counts up), so
 * the grammar grows linearly with the schema: alternatives are rules
 * side by side, never cross products. Every path is bounded by the work
 * counter (max_work), the output size (max_grammar_bytes) and the
 * nesting depth (SIFT__JS_MAX_DEPTH).
 */
#ifndef SIFT_JSON_SCHEMA_H
#define SIFT_JSON_SCHEMA_H

#include <jansson.h>

#include "../sift_internal.h"

#define SIFT__JS_MAX_DEPTH 256
/* Largest count in a {m,n} repetition the GBNF parser takes (its limit
 * is 2000 copies). */
#define SIFT__JS_MAX_REPEAT 1999

/* A growable byte buffer, always NUL-terminated when p != NULL. */
typedef struct sift__js_buf {
    char *p;
    size_t n, cap;
} sift__js_buf;

/* What a subschema became: a rule reference (name) or nothing at all
 * (never = 1: the schema admits no value, e.g. false). */
typedef struct sift__js_ref {
    char name[24];
    int never;
} sift__js_ref;

typedef struct sift__js_refent {
    char *pointer; /* the $ref's target, decoded, NUL-terminated */
    sift__js_ref ref;
    int used; /* referred to again (a cycle, while it is generated) */
} sift__js_refent;

/* Shared rules, emitted once at the end when used. */
enum {
    SIFT__JS_R_WS = 1u << 0,
    SIFT__JS_R_VALUE = 1u << 1,
    SIFT__JS_R_STRING = 1u << 2,
    SIFT__JS_R_NUMBER = 1u << 3,
    SIFT__JS_R_INTEGER = 1u << 4,
    SIFT__JS_R_BOOLEAN = 1u << 5,
    SIFT__JS_R_NULL = 1u << 6,
    SIFT__JS_R_CHAR = 1u << 7,
    SIFT__JS_R_OBJECT = 1u << 8,
    SIFT__JS_R_ARRAY = 1u << 9
};

typedef struct sift__js {
    const sift__alloc *al;
    sift_error *err;
    const char *text; /* the schema text, for error places */
    /* The length of the "source:line:col: " that opens err->message when
     * the error was located in the text, else 0 (convert.h). */
    size_t place_len;
    size_t len;
    const char *source;
    json_t *root;
    /* options */
    int flexible;
    int32_t max_ws;
    int strict;
    int ignore;
    int format_annotation; /* SIFT_JSON_FORMAT_ANNOTATION */
    /* integers may have a zero fraction (1.0): from draft 6 on, so unless
     * the root's $schema names draft 3 or 4 */
    int int_fraction;
    /* a $ref beside other keywords stands alone (drafts 3 to 7) */
    int ref_alone;
    void (*warn)(void *, const sift_error *);
    void *warn_user;
    size_t max_grammar;
    int64_t max_work;
    int64_t work;
    int depth;
    /* output */
    sift__js_buf out;
    int32_t n_rules;
    unsigned used;
    /* the current place: JSON Pointer segments (escaped, each starting
     * with '/'); a $ref switches to its target after a '\001' mark */
    sift__js_buf path;
    sift__js_refent *refs;
    size_t n_refs, cap_refs;
    json_t *ref_map; /* pointer -> index in refs */
    /* identifiers ($id, $anchor; json_schema_ref.c), when the schema has
     * any: URI or URI#anchor -> node address; node address -> [JSON
     * Pointer, base URI]; the base URI of the subschema being generated */
    json_t *ref_ids, *ref_nodes;
    const char *ref_base;
    int ref_both; /* ref_base is of a schema with $id beside $ref (below) */
    /* the rules of formats, made once per conversion */
    sift__js_ref formats[16];
    /* the rule of any non-empty key rest (a trie leaf), made once */
    sift__js_ref leaf;
    sift__js_ref key_escape; /* an escape, then any key rest */
    sift__js_ref key_char;   /* one character of a key, canonically spelled */
    sift__js_ref len_char;   /* one code point of a length-counted string */
} sift__js;

/* sift_json_schema_to_gbnf, which also says how many units of work the
 * conversion charged (*work; tests check the charges against the
 * schema's size). */
SIFT__HIDDEN sift_status sift__json_schema_to_gbnf_work(char **out, size_t *out_len,
                                                        const char *schema, size_t len,
                                                        const sift_json_schema_params *params,
                                                        sift_error *err, int64_t *work);

/* json_schema.c: errors at the current place (path + extra segment) */
SIFT__HIDDEN sift_status sift__js_fail(sift__js *c, sift_status code, const char *key,
                                       const char *fmt, ...) SIFT__PRINTF(4, 5);
/* An unsupported keyword `key` of the current schema: an error, or under
 * the ignore policy a warning and SIFT_OK (the caller then skips it). */
SIFT__HIDDEN sift_status sift__js_unsupported(sift__js *c, const char *key, const char *fmt, ...)
    SIFT__PRINTF(3, 4);
SIFT__HIDDEN sift_status sift__js_push_key(sift__js *c, const char *key);
SIFT__HIDDEN sift_status sift__js_push_index(sift__js *c, size_t i);
SIFT__HIDDEN void sift__js_pop(sift__js *c, size_t mark);
SIFT__HIDDEN sift_status sift__js_work(sift__js *c, int64_t units);

/* Whether d is an integer in int64's range (then *out, if not NULL):
 * the test to make before every double-to-integer conversion. */
SIFT__HIDDEN int sift__js_integral(double d, int64_t *out);
/* The key of v in a set of values (a jansson object used as a hash
 * set): its compact JSON text with sorted keys, and a number at the top
 * by its value, so that 1 and 1.0 are one key and two keys are equal
 * exactly when the values are (json_equal, numbers by value). *key is
 * from malloc (free it); charges work for the length of the text. */
SIFT__HIDDEN sift_status sift__js_value_key(sift__js *c, const json_t *v, char **key);

/* json_schema_emit.c */
SIFT__HIDDEN sift_status sift__js_put(sift__js *c, sift__js_buf *b, const char *s, size_t n);
SIFT__HIDDEN sift_status sift__js_puts(sift__js *c, sift__js_buf *b, const char *s);
SIFT__HIDDEN sift_status sift__js_printf(sift__js *c, sift__js_buf *b, const char *fmt, ...)
    SIFT__PRINTF(3, 4);
/* Appends a GBNF literal "..." holding the bytes s[0..n). */
SIFT__HIDDEN sift_status sift__js_lit(sift__js *c, sift__js_buf *b, const char *s, size_t n);
SIFT__HIDDEN void sift__js_buf_free(sift__js *c, sift__js_buf *b);
/* A fresh rule name (sN) in *r. */
SIFT__HIDDEN sift_status sift__js_new_rule(sift__js *c, sift__js_ref *r);
/* Emits "name ::= body" for r (body NUL-terminated). */
SIFT__HIDDEN sift_status sift__js_emit(sift__js *c, const sift__js_ref *r, const char *body);
/* Emits a new rule with `body` and returns it in *r. */
SIFT__HIDDEN sift_status sift__js_rule(sift__js *c, sift__js_ref *r, const char *body);
/* The name of a shared rule (SIFT__JS_R_*), marked used. */
SIFT__HIDDEN const char *sift__js_shared(sift__js *c, unsigned which);
/* Appends the shared rules that were used. */
SIFT__HIDDEN sift_status sift__js_emit_shared(sift__js *c);
/* A rule matching the JSON text of string keys other than keys[0..n)
 * (their content compared as written, unescaped code points). */
SIFT__HIDDEN sift_status sift__js_not_keys(sift__js *c, const char *const *keys, size_t n,
                                           sift__js_ref *r);
/* Appends the GBNF of the JSON value v exactly (constants and enum). */
SIFT__HIDDEN sift_status sift__js_const_value(sift__js *c, sift__js_buf *b, const json_t *v);

/* json_schema_gen.c */
SIFT__HIDDEN sift_status sift__js_gen(sift__js *c, const json_t *schema, sift__js_ref *r);
/* Is `key` a keyword with no effect on validation (title, ...)? */
SIFT__HIDDEN int sift__js_is_annotation(const char *key);

/* Whether `format` name f is one this converter checks or refuses (the
 * standard names); any other name is an annotation (json_schema_scalar.c). */
SIFT__HIDDEN int sift__js_format_known(const char *f);
/* Reads a non-negative integer keyword (absent: *v unchanged, *has 0). */
SIFT__HIDDEN sift_status sift__js_get_count(sift__js *c, const json_t *s, const char *key,
                                            int64_t *v, int *has);

/* The one type a keyword constrains (T_OBJECT, T_ARRAY, T_STRING or
 * T_NUMBER; integers count as numbers), 0 for the others. */
SIFT__HIDDEN unsigned sift__js_key_type(const char *key);
/* Whether s is an object holding a $ref and annotations only. */
SIFT__HIDDEN int sift__js_only_ref(const json_t *s);
/* 1 when every byte of name is printable ASCII (0x20..0x7E): where
 * PCRE2 and ECMA-262 read the converter's patterns alike ("." and \s
 * differ on line terminators and Unicode spaces), so a PCRE2 verdict on
 * such a name holds for JSON Schema. */
SIFT__HIDDEN int sift__js_plain_ascii(const char *name);
/* The target of a $ref of the form "#" or "#/json/pointer" (percent
 * escapes decoded) in schema object `from`, or NULL; sets no error. */
SIFT__HIDDEN const json_t *sift__js_local_target(sift__js *c, const json_t *from, const char *ref);

/* json_schema_ppcover.c: the schema of the one patternProperties
 * pattern of s when declared property `name` matches it and that
 * schema implies the declared one (their allOf is then that schema:
 * the name is "covered"), else NULL; *st set when work runs out. */
SIFT__HIDDEN const json_t *sift__js_pp_cover(sift__js *c, const json_t *s, const char *name,
                                             sift_status *st);

/* The schema of the one patternProperties pattern of s when it is ^C*$
 * or ^C+$ (C a class of plain ASCII characters) and declared property
 * `name` matches it, else NULL: the pattern's member then leaves the
 * declared names out (sift__js_pp_keys_but) and the declared member
 * takes both schemas. */
SIFT__HIDDEN const json_t *sift__js_pp_claims(const json_t *s, const char *name);
/* Whether s's patternProperties is one such class pattern. */
SIFT__HIDDEN int sift__js_pp_class(const json_t *s);
/* Whether schema s admits every value (true, or annotations only). */
SIFT__HIDDEN int sift__js_pp_admits_all(const json_t *s);
/* The key rule (quotes included) for the keys the one class pattern of
 * s matches, but names[0..n). */
SIFT__HIDDEN sift_status sift__js_pp_keys_but(sift__js *c, const json_t *s,
                                              const char *const *names, size_t n, sift__js_ref *r);

/* The ECMA-262 text of a pattern matching exactly the strings that
 * pattern p does not match, into out[cap], when p is "^" then a run of
 * single atoms (a character, an escape, a class; "{n}" repeats one),
 * the last one optionally under "*", "+" or "{m,n}", then "$" or nothing; else
 * 0. Alternatives: the run cut short (the end, or a character the next
 * atom rejects), and past it what the tail or the "$" forbids. */
SIFT__HIDDEN int sift__js_pat_complement_seq(const char *p, char *out, size_t cap);

/* The JSON types as bits, for type masks. */
enum {
    T_NULL = 1,
    T_BOOLEAN = 2,
    T_OBJECT = 4,
    T_ARRAY = 8,
    T_NUMBER = 16,
    T_STRING = 32,
    T_INTEGER = 64
};
/* The mask of a "type" value (a name or an array of names). */
SIFT__HIDDEN unsigned sift__js_type_mask(const json_t *t);
/* The "type" array of mask m (NULL when out of memory). */
SIFT__HIDDEN json_t *sift__js_mask_to_types(unsigned m);
/* Is `key` a keyword of the supported or the known-unsupported set? */
SIFT__HIDDEN int sift__js_is_keyword(const char *key);
/* Resolves $ref `ref` of schema object `from` (NULL: the one being
 * generated) to its target; a chain of schemas that are only $refs is
 * followed (a cycle of them is an error). *ptr is the final target's
 * pointer (allocated). */
SIFT__HIDDEN sift_status sift__js_resolve(sift__js *c, const json_t *from, const char *ref,
                                          const json_t **target, char **ptr);

/* json_schema_ref.c: $id and anchors */
/* Indexes the identifiers of c->root, when its text names any. */
SIFT__HIDDEN sift_status sift__js_ref_index(sift__js *c);
/* Makes the base URI of s (when indexed) the current one; the caller
 * saves and restores c->ref_base. */
SIFT__HIDDEN void sift__js_ref_enter(sift__js *c, const json_t *s);
/* The JSON Pointer from the root (allocated, escaped) of the target of
 * $ref `ref` in schema object `from` (NULL or not indexed: the current
 * base URI), through the index. */
SIFT__HIDDEN sift_status sift__js_ref_pointer(sift__js *c, const json_t *from, const char *ref,
                                              char **ptr);

/* json_schema_merge.c: allOf and the siblings of $ref and anyOf */
/* Adds the key of v to `set`; *added says whether it was new. */
SIFT__HIDDEN sift_status sift__js_set_add(sift__js *c, json_t *set, const json_t *v, int *added);
/* Whether the key of v is in `set` (*in). */
SIFT__HIDDEN sift_status sift__js_set_has(sift__js *c, const json_t *set, const json_t *v, int *in);
/* The rule for schema s with its allOf members and $ref targets merged
 * in, and `extra` (a schema, or NULL) merged too. */
SIFT__HIDDEN sift_status sift__js_gen_merged(sift__js *c, const json_t *s, const json_t *extra,
                                             sift__js_ref *r);

/* The schema s with its allOf members and $ref targets merged in, and
 * `extra` (a schema, or NULL) too, as a new object in *out (NULL on
 * error); *never when a member admits no value. */
SIFT__HIDDEN sift_status sift__js_merge(sift__js *c, const json_t *s, const json_t *extra,
                                        json_t **out, int *never);
/* dst's anyOf and the alternatives `alts` both hold: alts becomes dst's
 * anyOf, or the two are multiplied out (Ai & Bj for each pair), at most
 * 64 alternatives (beyond: the unsupported policy). */
SIFT__HIDDEN sift_status sift__js_merge_any(sift__js *c, json_t *dst, const json_t *alts);
/* json_schema_gen.c: whether no value of the types of s matches two of
 * the alternatives s[kw] (anyOf or oneOf), as far as types, const /
 * enum values or a discriminating property show (*disjoint). */
SIFT__HIDDEN sift_status sift__js_alternatives_disjoint(sift__js *c, const json_t *s,
                                                        const char *kw, int *disjoint);

/* The value of s's $dynamicRef (*ref), when it resolves as a $ref does:
 * its fragment names no anchor, or a $dynamicAnchor that one schema of
 * the document declares at most, or the $ref's target does not declare
 * it. Otherwise (the dynamic scope decides) the unsupported policy. */
SIFT__HIDDEN sift_status sift__js_dynamic_ref(sift__js *c, const json_t *s, const char **ref);

/* json_schema_uneval.c: unevaluatedProperties and unevaluatedItems */
/* Whether s (an object) has unevaluatedProperties or unevaluatedItems. */
SIFT__HIDDEN int sift__js_has_uneval(const json_t *s);
/* s rewritten without them (a new reference in *out): s with its allOf
 * members and $ref targets merged, and a member that applies their
 * schemas to the properties (items) the merged schema leaves
 * unevaluated; distributed over anyOf / oneOf alternatives when they
 * evaluate different ones and are disjoint. What is not statically
 * known goes through the unsupported policy (ignored: dropped). */
SIFT__HIDDEN sift_status sift__js_uneval_rewrite(sift__js *c, const json_t *s, json_t **out);
/* The rule of s with unevaluatedProperties / unevaluatedItems. */
SIFT__HIDDEN sift_status sift__js_gen_uneval(sift__js *c, const json_t *s, sift__js_ref *r);
/* json_schema_oneof.c: whether oneOf `alts` of schema s (the types
 * `outer` beside it) is exact as an anyOf (*exact), after the types in
 * *narrow are taken out of s (no value of them passes: two branches
 * admit them whole) and the branches replaced by *rewritten (owned; NULL
 * when they stay). */
SIFT__HIDDEN sift_status sift__js_one_of_exact(sift__js *c, const json_t *s, const json_t *alts,
                                               unsigned outer, int *exact, unsigned *narrow,
                                               json_t **rewritten);

/* json_schema_value.c: whether the value v is valid against schema s:
 * *answer 1 (valid), 0 (invalid) or -1 (not decided there: a keyword it
 * does not test). Fails only when max_work is reached. */
SIFT__HIDDEN sift_status sift__js_value_valid(sift__js *c, const json_t *s, const json_t *v,
                                              int *answer);

/* json_schema_object.c: the schema's object / array part */
SIFT__HIDDEN sift_status sift__js_gen_object(sift__js *c, const json_t *s, sift__js_ref *r);
SIFT__HIDDEN sift_status sift__js_gen_array(sift__js *c, const json_t *s, sift__js_ref *r);

/* json_schema_scalar.c */
SIFT__HIDDEN sift_status sift__js_gen_string(sift__js *c, const json_t *s, sift__js_ref *r);
SIFT__HIDDEN sift_status sift__js_gen_number(sift__js *c, const json_t *s, int integer,
                                             sift__js_ref *r);

/* json_schema_gen.c: a schema admitting exactly the values s rejects
 * (a new reference), or NULL when not expressible here. */
SIFT__HIDDEN json_t *sift__js_negate(const json_t *s, int depth);

/* json_schema_cond.c: if / then / else, propertyNames, more negations */
/* The negation of the shapes negate does not know, or NULL. */
SIFT__HIDDEN json_t *sift__js_negate_more(const json_t *s, int depth);
/* sift__js_gen_merged(s, neg), where neg (a negation) that is an anyOf
 * alone, beside an anyOf of s, is merged one alternative at a time. */
SIFT__HIDDEN sift_status sift__js_gen_merged_any(sift__js *c, const json_t *s, const json_t *neg,
                                                 sift__js_ref *r);
/* Is key "if", "then" or "else"? */
SIFT__HIDDEN int sift__js_is_cond_key(const char *key);
/* Merges src's if / then / else into dst as one unit (when they take
 * effect); a second unit is unsupported. */
SIFT__HIDDEN sift_status sift__js_merge_cond(sift__js *c, json_t *dst, const json_t *src);
/* s with if / then / else. */
SIFT__HIDDEN sift_status sift__js_gen_cond(sift__js *c, const json_t *s, sift__js_ref *r);
/* Whether s's propertyNames is generated as the rule of its undeclared
 * keys (sift__js_key_names), by json_schema_object.c. */
SIFT__HIDDEN int sift__js_names_by_key_rule(sift__js *c, const json_t *s);
/* The rule of a key s's propertyNames admits (the JSON string text). */
SIFT__HIDDEN sift_status sift__js_key_names(sift__js *c, const json_t *s, sift__js_ref *r);
/* s with "not": {"type": [...]} naming integer but not number: the
 * other types and the numbers with a fraction (*done; 0 when s has
 * another shape, e.g. number bounds beside it). */
SIFT__HIDDEN sift_status sift__js_gen_not_integer(sift__js *c, const json_t *s, sift__js_ref *r,
                                                  int *done);
/* s with propertyNames, rewritten without it (or unsupported). */
SIFT__HIDDEN sift_status sift__js_gen_names(sift__js *c, const json_t *s, sift__js_ref *r);

/* json_schema_contains.c: the array part of s with contains /
 * minContains / maxContains. */
SIFT__HIDDEN sift_status sift__js_gen_contains(sift__js *c, const json_t *s, sift__js_ref *r);

#endif

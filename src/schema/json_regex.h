/*
 * json_regex.h - JSON Schema "pattern" regular expressions (an ECMA-262
 * subset, docs/json-regex.md) translated into GBNF over the JSON-encoded
 * content of a string. Nothing here is API.
 */
#ifndef SIFT_JSON_REGEX_H
#define SIFT_JSON_REGEX_H

#include "../sift_internal.h"

/* Translates the ECMA-262 regular expression pattern[0..len) (JSON Schema "pattern": it matches a
 * string when it matches anywhere in it, unless anchored with ^ / $) into one self-contained
 * parenthesised GBNF expression (no rule references) that matches exactly the JSON-encoded content
 * of such strings, as it appears between the quotes. On success *out (allocated from al;
 * NUL-terminated) and *out_len. SIFT_E_SCHEMA_SYNTAX for an invalid pattern,
 * SIFT_E_SCHEMA_UNSUPPORTED for a feature outside the subset (backreferences, lookaround, ...),
 * SIFT_E_SCHEMA_LIMIT when the expression would exceed max_out bytes; err->offset = byte offset in
 * the pattern; message "pattern:COL: ..." . */
SIFT__HIDDEN sift_status sift__json_regex_to_gbnf(const sift__alloc *al, const char *pattern,
                                                  size_t len, size_t max_out, char **out,
                                                  size_t *out_len, sift_error *err);

/* The same translation for strings whose length is also bounded: only
 * strings of min_len..max_len code points (max_len = UINT64_MAX: no upper
 * bound) are matched. Exact when the pattern's matches have such lengths
 * already, or when one part of each top-level alternative varies in
 * length (a repetition of a fixed-length part, or an unanchored side);
 * else SIFT_E_SCHEMA_UNSUPPORTED. */
SIFT__HIDDEN sift_status sift__json_regex_to_gbnf_len(const sift__alloc *al, const char *pattern,
                                                      size_t len, uint64_t min_len,
                                                      uint64_t max_len, size_t max_out, char **out,
                                                      size_t *out_len, sift_error *err);

/* The same dialect as the regex source (sift_grammar_from_regex): the expression matches raw
 * text (every code point as itself, no JSON encoding) that the regex matches as a whole (both ends
 * anchored; ^ and $ at the ends of a top-level alternative change nothing). Same statuses and
 * limits; messages are "regex:COL: ..." and err->source is "regex". */
SIFT__HIDDEN sift_status sift__regex_to_gbnf(const sift__alloc *al, const char *regex, size_t len,
                                             size_t max_out, char **out, size_t *out_len,
                                             sift_error *err);

/* ------------------------------------------------------------------ */
/* Shared by json_regex.c (the parser) and json_regex_emit.c (the      */
/* emitter that writes GBNF); nothing else uses these.                 */
/* ------------------------------------------------------------------ */

#define RX_MAX_DEPTH 100
#define RX_MAX_ELEMENTS ((uint64_t)1 << 20)
#define RX_MAX_CP 0x10FFFFu

enum { N_SET, N_CAT, N_ALT, N_REP, N_BOL, N_EOL };

/* SET: ranges rng[2*first ..) as n (lo, hi) pairs, sorted and merged.
 * CAT, ALT: children kids[first .. first+n). REP: child `first`,
 * counts min..max (UINT32_MAX = unbounded). `off`: byte offset. */
typedef struct rx_node {
    uint32_t kind;
    uint32_t first, n;
    uint32_t min, max;
    size_t off;
} rx_node;

typedef struct rx {
    const sift__alloc *al;
    const unsigned char *s;
    size_t n, i;
    rx_node *nodes;
    size_t n_nodes, cap_nodes;
    uint32_t *kids;
    size_t n_kids, cap_kids;
    uint32_t *stk; /* children being collected, nested lists stacked */
    size_t n_stk, cap_stk;
    uint32_t *rng; /* (lo, hi) pairs; n_rng counts uint32_t */
    size_t n_rng, cap_rng;
    char *out;
    size_t n_out, cap_out, max_out;
    size_t at;       /* offset of the node being emitted, for limit errors */
    int raw;         /* raw text (the regex source), not JSON string content */
    const char *src; /* "pattern" or "regex": the name in messages */
    /* the string lengths (code points) the output must keep to, with
     * len_on: lo..hi (hi = UINT64_MAX: no upper bound) */
    int len_on;
    uint64_t len_lo, len_hi;
    sift_status st;
    sift_error *err;
} rx;

/* What the parser of the output will build for one item or sequence:
 * elements in its sequence, elements in all, rules created, and the
 * nested-repetition factor gbnf_parse.c keeps for it ("prev"). */
typedef struct rx_cost {
    uint64_t seq, elems, rules, prev;
    int atom; /* one GBNF item: a postfix may follow it */
} rx_cost;

/* Records the first error: `code`, message "SRC:COL: ..." for byte
 * offset `off` of the pattern; returns r->st. */
SIFT__HIDDEN sift_status sift__json_regex_fail(rx *r, size_t off, sift_status code, const char *fmt,
                                               ...) SIFT__PRINTF(4, 5);
/* Records SIFT_E_NOMEM (unless an error came first); returns r->st. */
SIFT__HIDDEN sift_status sift__json_regex_nomem(rx *r);
/* A new node of `kind` at byte offset `off`, or UINT32_MAX (out of memory). */
SIFT__HIDDEN uint32_t sift__json_regex_new_node(rx *r, uint32_t kind, size_t off);
/* Appends the pair (lo, hi) to r->rng; 0 when out of memory. */
SIFT__HIDDEN int sift__json_regex_add_range(rx *r, uint32_t lo, uint32_t hi);

/* Parses the JSON Schema pattern[0..len) into r (initialised here; free it with
 * sift__json_regex_free even on failure): the root node in *root. SIFT_OK, or the error the
 * translation would report (err filled). */
SIFT__HIDDEN sift_status sift__json_regex_parse(rx *r, const sift__alloc *al, const char *pattern,
                                                size_t len, size_t max_out, sift_error *err,
                                                uint32_t *root);
/* Frees what r holds (not r itself). */
SIFT__HIDDEN void sift__json_regex_free(rx *r);
/* Writes node `id` (any kind but an anchor) as one GBNF item (a group when it has several forms)
 * at the end of r->out. 0 on an error (recorded in r->st). */
SIFT__HIDDEN int sift__json_regex_emit_item(rx *r, uint32_t id);

/* Appends s to the output; 0 on an error (recorded in r->st). */
SIFT__HIDDEN int sift__json_regex_puts(rx *r, const char *s);
/* The items of top-level alternative *id (a concatenation's children,
 * else *id itself, so id must outlive *ids) in (*ids)[0 .. *n), with its
 * leading ^ and trailing $ taken off (*bol, *eol set when there were
 * any). Returns the group to open instead when what is left is one
 * alternation or concatenation and depth allows, else UINT32_MAX. */
SIFT__HIDDEN uint32_t sift__json_regex_branch_items(const rx *r, const uint32_t *id, int *bol,
                                                    int *eol, const uint32_t **ids, size_t *n,
                                                    unsigned depth);
/* Emits one top-level alternative, node `id` (anchors stripped from its
 * ends, a lone group inside opened), " | "-separated unless *first;
 * adds its cost to *total. 0 on an error (recorded in r->st). */
SIFT__HIDDEN int sift__json_regex_emit_branch(rx *r, uint32_t id, int bol, int eol, int *first,
                                              rx_cost *total, unsigned depth);

#endif

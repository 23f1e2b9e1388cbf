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

#endif

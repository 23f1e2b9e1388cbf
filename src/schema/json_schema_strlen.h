/*
 * json_schema_strlen.h - a "pattern" beside minLength / maxLength, in
 * general (json_schema_strlen.c). Nothing here is API.
 */
#ifndef SIFT_JSON_SCHEMA_STRLEN_H
#define SIFT_JSON_SCHEMA_STRLEN_H

#include "json_schema.h"

/* The rule (in *out; out->never when no string qualifies) of the JSON
 * strings that JSON Schema pattern pat[0..len) matches and that have lo
 * to hi code points (has_hi = 0: lo or more). SIFT_OK; or
 * SIFT_E_SCHEMA_UNSUPPORTED when the grammar would exceed this
 * construction's bounds (or the pattern has an anchor inside), another
 * status for an invalid pattern, with the reason in why[0..why_size)
 * and no error recorded in c, so that the caller can refuse at its
 * keyword; SIFT_E_NOMEM; or an error recorded in c (max_work). */
SIFT__HIDDEN sift_status sift__js_pattern_lengths(sift__js *c, const char *pat, size_t len,
                                                  uint64_t lo, uint64_t hi, int has_hi,
                                                  sift__js_ref *out, char *why, size_t why_size);

#endif

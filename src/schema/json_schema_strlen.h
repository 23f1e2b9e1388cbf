/*
 * json_schema_strlen.h - a "pattern" beside minLength / maxLength, in
 * general (json_schema_strlen.c). Nothing here is API.
 */
#ifndef SIFT_JSON_SCHEMA_STRLEN_H
#define SIFT_JSON_SCHEMA_STRLEN_H

#include "json_regex.h"
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

/* json_schema_dfa.c: the automaton of n_st states (transitions of state
 * s: to[off[s] .. off[s + 1]), each reading the code points of set node
 * lab[e] of r; fin: the states a string may end in) made deterministic:
 * *d_n states, state 0 the subset {start}, its transitions and finals in
 * new arrays (*d_off has *d_n + 1 entries; free them with r->al), the
 * set nodes of the new transitions added to r; the steps are charged to
 * c's work. SIFT_E_SCHEMA_LIMIT when the construction exceeds its bounds
 * (nothing is returned then) or c's work passes max_work (recorded in
 * c: c->work > c->max_work tells the two apart), SIFT_E_NOMEM, or r's
 * error status. */
SIFT__HIDDEN sift_status sift__js_dfa(sift__js *c, rx *r, size_t n_st, size_t start,
                                      const uint32_t *off, const uint32_t *to, const uint32_t *lab,
                                      const unsigned char *fin, size_t *d_n, uint32_t **d_off,
                                      uint32_t **d_to, uint32_t **d_lab, unsigned char **d_fin);

#endif

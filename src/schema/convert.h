/*
 * convert.h - what the other folders of src/ may ask the JSON Schema
 * converter beyond the API (include/sift.h). Free of jansson, so a folder
 * that may not include <jansson.h> (src/config/) can include it.
 */
#ifndef SIFT_SCHEMA_CONVERT_H
#define SIFT_SCHEMA_CONVERT_H

#include "../sift_internal.h"

/* sift_json_schema_to_gbnf, for a caller that reports a failure at a
 * place of its own (the YAML node of an inline schema): *place_len is
 * then the length of the "source:line:col: " that opens err->message when
 * the converter located the error in the schema text (so the message
 * without the converter's place is err->message + *place_len), else 0.
 * place_len is 0 on success and when err is NULL. */
SIFT__HIDDEN sift_status sift__json_schema_to_gbnf_placed(char **out, size_t *out_len,
                                                          const char *schema, size_t len,
                                                          const sift_json_schema_params *params,
                                                          sift_error *err, size_t *place_len);

#endif

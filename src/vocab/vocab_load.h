/*
 * vocab_load.h - what the vocabulary file loaders (vocab_tiktoken.c,
 * vocab_gguf.c) share; defined in vocab_load.c.
 */
#ifndef SIFT_VOCAB_LOAD_H
#define SIFT_VOCAB_LOAD_H

#include "vocab.h"

/* Fails with `code` and a message that names its place in `src`:
 * "src:line:col: msg" when line > 0, else "src: offset N: msg" when
 * off >= 0, else "src: msg"; token `index` (or -1) goes to err like
 * sift__fail_at's. Fills err->line, column, offset and source to match.
 * Returns `code`; a NULL err is allowed. */
SIFT__HIDDEN sift_status sift__vocab_fail_place(sift_error *err, sift_status code, const char *src,
                                                int32_t line, int32_t col, int64_t off,
                                                int64_t index, const char *fmt, ...)
    SIFT__PRINTF(8, 9);

#endif

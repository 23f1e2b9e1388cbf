/*
 * vocab_load.c - what the vocabulary file loaders share: the tiktoken
 * loader (vocab_tiktoken.c) and the GGUF loader (vocab_gguf.c).
 *
 * Both build the offset table, the byte block and the attribute array of
 * a vocabulary directly and hand them to sift__vocab_adopt, so each
 * piece is copied once. The rules both keep:
 * - Nothing the file says is trusted: every count and length is checked
 *   against the bytes that are actually left before anything is allocated
 *   for it, so a hostile header cannot make us allocate more than a small
 *   multiple of the file's size (plus each loader's fixed caps).
 * - Every failure names its place: tiktoken errors carry `source:line:col`
 *   (1-based, columns in bytes, which equal code points in a tiktoken file
 *   since it is ASCII), GGUF errors the byte offset and the metadata key.
 *   err->line, column, offset and source are filled to match
 *   (sift__vocab_fail_place below).
 * - Files are opened without blocking and must be regular files (a FIFO
 *   or a directory is SIFT_E_IO); a GGUF file is read up to the end of
 *   its key/value section only, never its tensor infos or weights.
 * - On failure *out is NULL and nothing leaks.
 */
#include <stdarg.h>
#include <stdio.h>

#include "vocab.h"
#include "vocab_load.h"

sift_status sift__vocab_fail_place(sift_error *err, sift_status code, const char *src, int32_t line,
                                   int32_t col, int64_t off, int64_t index, const char *fmt, ...)
{
    if (!err)
        return code;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        sift__fail_at(err, code, index, "%s:%d:%d: %s", src, (int)line, (int)col, msg);
    else if (off >= 0)
        sift__fail_at(err, code, index, "%s: offset %lld: %s", src, (long long)off, msg);
    else
        sift__fail_at(err, code, index, "%s: %s", src, msg);
    err->line = line;
    err->column = col;
    err->offset = off;
    sift__strlcpy_utf8(err->source, src, sizeof err->source);
    return code;
}

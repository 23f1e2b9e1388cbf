/*
 * error.c - status strings and filling of sift_error.
 *
 * Owns sift_status_str, sift_class_str and the sift__fail helpers. The
 * error struct is caller-owned and fixed-size: nothing here allocates, and
 * messages are cut at a UTF-8 boundary so a truncated message is still
 * valid text.
 */
#include <stdarg.h>
#include <stdio.h>

#include "../sift_internal.h"

const char *sift_status_str(sift_status status)
{
    switch (status) {
    case SIFT_OK: return "ok";
    case SIFT_E_ARG: return "invalid argument";
    case SIFT_E_NOMEM: return "out of memory";
    case SIFT_E_LIMIT: return "limit exceeded";
    case SIFT_E_STATE: return "invalid state";
    case SIFT_E_IO: return "input/output error";
    case SIFT_E_TOKEN: return "token id out of range";
    case SIFT_E_ROW_VALUE: return "invalid value in row";
    case SIFT_E_NO_CANDIDATE: return "no candidate left";
    case SIFT_E_SLICE: return "invalid slice";
    case SIFT_E_NEED_ROW: return "whole row needed";
    case SIFT_E_HOOK: return "row hook failed";
    case SIFT_E_SLICE_MISMATCH: return "slice disagrees with the whole row";
    case SIFT_E_GRAMMAR_SYNTAX: return "grammar syntax error";
    case SIFT_E_GRAMMAR_UNDEFINED: return "grammar rule undefined";
    case SIFT_E_GRAMMAR_LEFT_RECURSION: return "grammar is left-recursive";
    case SIFT_E_GRAMMAR_LIMIT: return "grammar limit exceeded";
    case SIFT_E_GRAMMAR_DEAD: return "grammar admits no token";
    case SIFT_E_GRAMMAR_REJECT: return "grammar rejects token";
    case SIFT_E_PATTERN_SYNTAX: return "pattern syntax error";
    case SIFT_E_PATTERN_LIMIT: return "pattern limit exceeded";
    case SIFT_E_CONFIG_SYNTAX: return "configuration syntax error";
    case SIFT_E_CONFIG_TYPE: return "configuration type error";
    case SIFT_E_CONFIG_KEY: return "configuration key error";
    case SIFT_E_CONFIG_VALUE: return "configuration value error";
    case SIFT_E_CONFIG_LIMIT: return "configuration limit exceeded";
    case SIFT_E_SCHEMA_SYNTAX: return "invalid JSON Schema";
    case SIFT_E_SCHEMA_UNSUPPORTED: return "unsupported JSON Schema feature";
    case SIFT_E_SCHEMA_LIMIT: return "JSON Schema limit exceeded";
    }
    return "unknown status";
}

const char *sift_class_str(sift_class cls)
{
    switch (cls) {
    case SIFT_CLASS_WHOLE: return "whole";
    case SIFT_CLASS_IDENTITY: return "identity";
    case SIFT_CLASS_LOWERS: return "lowers";
    case SIFT_CLASS_RAISES: return "raises";
    case SIFT_CLASS_MONOTONE: return "monotone";
    case SIFT_CLASS_TOP: return "top";
    case SIFT_CLASS_THRESHOLD: return "threshold";
    }
    return "unknown";
}

void sift__strlcpy_utf8(char *dst, const char *src, size_t cap)
{
    if (cap == 0)
        return;
    size_t n = strlen(src);
    if (n >= cap) {
        n = cap - 1;
        /* back off continuation bytes so no sequence is split */
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void vfill(sift_error *err, sift_status code, int64_t index, const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    err->code = code;
    err->line = 0;
    err->column = 0;
    err->offset = -1;
    err->index = index;
    err->source[0] = '\0';
    sift__strlcpy_utf8(err->message, buf, sizeof err->message);
}

sift_status sift__fail(sift_error *err, sift_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vfill(err, code, -1, fmt, ap);
        va_end(ap);
    }
    return code;
}

sift_status sift__fail_at(sift_error *err, sift_status code, int64_t index, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vfill(err, code, index, fmt, ap);
        va_end(ap);
    }
    return code;
}

sift_status sift__check_struct_size(sift_error *err, const char *type, uint32_t got, size_t have)
{
    if (got == 0)
        return sift__fail(err, SIFT_E_ARG, "%s.struct_size is 0; set it to sizeof(%s)", type, type);
    if (got > have)
        return sift__fail(err, SIFT_E_ARG,
                          "%s.struct_size is %u, larger than this library's %zu (a sift.h newer "
                          "than the library?)",
                          type, (unsigned)got, have);
    return SIFT_OK;
}

/*
 * diag.c - the configuration's diagnostic sink.
 *
 * What it owns: the list of diagnostics of a config (message, GCC-style
 * text "name:line:col: severity: message", code and position), the cap of
 * max_diagnostics (errors stop collection, warnings stop being kept) and
 * the final sort by position. Positions come from the line table
 * (source.c); this file calls nothing else of src/config/.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

/* Whether a diagnostic of this severity would still be kept: errors until
 * max_diagnostics of them (then collection stops), warnings until
 * max_diagnostics of them. Callers ask before they compute a position or
 * a did-you-mean, so the work per dropped problem is constant. */
int sift__cfg_keeps(const sift_config *cfg, sift_severity sev)
{
    if (cfg->stopped)
        return 0;
    return sev == SIFT_SEVERITY_ERROR || cfg->n_warnings < (size_t)cfg->params.max_diagnostics;
}

uint64_t sift__cfg_work(const sift_config *cfg)
{
    return cfg ? cfg->work : 0;
}

static sift_status vdiag(sift_config *cfg, sift_severity sev, sift_status code, int32_t line,
                         int32_t col, int64_t off, const char *fmt, va_list ap)
{
    if (!sift__cfg_keeps(cfg, sev))
        return SIFT_OK;
    if (sift__reserve(&cfg->al, &cfg->diags, &cfg->cap_diags, cfg->n_diags, cfg->n_diags + 1,
                      sizeof *cfg->diags, 16))
        return SIFT_E_NOMEM;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const char *sevs = sev == SIFT_SEVERITY_ERROR ? "error" : "warning";
    size_t tcap = strlen(cfg->name) + strlen(msg) + 64;
    char *text = sift__malloc(&cfg->al, tcap, 1);
    char *m = sift__memdup(&cfg->al, msg, strlen(msg));
    if (!text || !m) {
        sift__free(&cfg->al, text);
        sift__free(&cfg->al, m);
        return SIFT_E_NOMEM;
    }
    if (line > 0)
        snprintf(text, tcap, "%s:%d:%d: %s: %s", cfg->name, (int)line, (int)col, sevs, msg);
    else
        snprintf(text, tcap, "%s: %s: %s", cfg->name, sevs, msg);
    cfg_diag *d = &cfg->diags[cfg->n_diags];
    d->d.severity = sev;
    d->d.code = sev == SIFT_SEVERITY_ERROR ? code : SIFT_OK;
    d->d.line = line;
    d->d.column = col;
    d->d.offset = off;
    d->d.message = m;
    d->d.text = text;
    d->seq = cfg->n_diags++;
    if (sev == SIFT_SEVERITY_WARNING)
        cfg->n_warnings++;
    if (sev == SIFT_SEVERITY_ERROR && ++cfg->n_errors >= (size_t)cfg->params.max_diagnostics)
        cfg->stopped = 1;
    return SIFT_OK;
}

sift_status sift__cfg_diag(sift_config *cfg, sift_severity sev, sift_status code, int64_t off,
                           const char *fmt, ...)
{
    int32_t line = 0, col = 0;
    if (!sift__cfg_keeps(cfg, sev))
        return SIFT_OK;
    if (off >= 0)
        sift__cfg_linecol(&cfg->src, (size_t)off, &line, &col);
    va_list ap;
    va_start(ap, fmt);
    sift_status st = vdiag(cfg, sev, code, line, col, off, fmt, ap);
    va_end(ap);
    return st;
}

sift_status sift__cfg_diag_lc(sift_config *cfg, sift_severity sev, sift_status code, int32_t line,
                              int32_t col, int64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sift_status st = vdiag(cfg, sev, code, line, col, off, fmt, ap);
    va_end(ap);
    return st;
}

static int diag_cmp(const void *a, const void *b)
{
    const cfg_diag *x = a, *y = b;
    if (x->d.line != y->d.line)
        return x->d.line < y->d.line ? -1 : 1;
    if (x->d.column != y->d.column)
        return x->d.column < y->d.column ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Position order; diagnostics without a position first; discovery order
 * among equal positions (seq is unique, so qsort's order is total and the
 * result stable; O(n log n) however many warnings there are). */
void sift__cfg_diag_sort(sift_config *cfg)
{
    if (cfg->n_diags > 1)
        qsort(cfg->diags, cfg->n_diags, sizeof *cfg->diags, diag_cmp);
}

/* A build-time error at a place of the config: "NAME:LINE:COL: MESSAGE"
 * (or "NAME: MESSAGE" for line 0) with err->source, line and column set,
 * like every other message that names a file. */
sift_status sift__cfg_fail(sift_error *err, sift_status code, const sift_config *cfg, int32_t line,
                           int32_t col, const char *fmt, ...)
{
    if (!err)
        return code;
    char msg[SIFT_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        sift__fail(err, code, "%s:%d:%d: %s", cfg->name, (int)line, (int)col, msg);
    else
        sift__fail(err, code, "%s: %s", cfg->name, msg);
    err->line = line;
    err->column = line > 0 ? col : 0;
    sift__strlcpy_utf8(err->source, cfg->name, sizeof err->source);
    return code;
}

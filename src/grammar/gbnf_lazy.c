/*
 * gbnf_lazy.c - lazy grammars (docs/triggers.md).
 *
 * What it owns: sift_lazy_params, sift_grammar_set_lazy and the step of
 * an untriggered grammar: every token is allowed and fed to the trigger
 * set; when a token fires it, the text from the trigger on is replayed
 * through the matcher from the initial state. A token that is only tried
 * (prepare) or whose replay is rejected is taken back from the set
 * (sift__trigger_undo), so every failure leaves the grammar as it was.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gbnf_match.h"

void sift_lazy_params_init(sift_lazy_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->max_window = SIFT_LAZY_DEFAULT_MAX_WINDOW;
    p->max_text = SIFT_LAZY_DEFAULT_MAX_TEXT;
    p->max_triggers = SIFT_LAZY_DEFAULT_MAX_TRIGGERS;
    p->match_limit = SIFT_LAZY_DEFAULT_MATCH_LIMIT;
    p->depth_limit = SIFT_LAZY_DEFAULT_DEPTH_LIMIT;
    p->heap_limit_kib = SIFT_LAZY_DEFAULT_HEAP_LIMIT_KIB;
}

int sift_grammar_is_triggered(const sift_grammar *g)
{
    if (!g || g->magic != MAGIC)
        return 0;
    return !sift__gm_idle(g);
}

/* Printable copy of bytes for messages. */
static void show(char *buf, size_t cap, const unsigned char *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7F && p[i] != '`')
            buf[k++] = (char)p[i];
        else
            k += (size_t)snprintf(buf + k, cap - k, "\\x%02X", p[i]);
    }
    buf[k] = '\0';
}

/* Tries one token (or, with token = -1, bytes of no token) on an
 * untriggered lazy grammar: the set is fed the token; if a trigger fires,
 * the replay is run through the matcher from the initial state. Without
 * `commit`, or on failure, the feed is taken back (sift__trigger_undo),
 * so only a committed success changes anything; the matcher caches may
 * grow either way, which no result can see. */
sift_status sift__gm_lazy_step(sift_grammar *g, int32_t token, const void *bytes, size_t n,
                               int commit, sift_error *err)
{
    const gm_core *c = g->core;
    const unsigned char *p = bytes;
    size_t L = n;
    if (token >= 0) {
        p = sift__gm_piece(c, token, &L);
        /* special and end-of-generation tokens produce no generated text;
         * token triggers still see their ids */
        if (c->attr[token] & (SIFT_TOKEN_SPECIAL | SIFT_TOKEN_EOG))
            L = 0;
    }
    int fired = 0;
    int64_t start = -1;
    sift_status s = sift__trigger_feed(g->trig, token, (const char *)p, L, &fired, &start, err);
    if (s)
        return s;
    if (fired) {
        sift__gm_begin(g, err);
        if ((s = sift__gm_maybe_flush(g, err))) {
            sift__gm_end_call(g);
            sift__trigger_undo(g->trig);
            return s;
        }
        const sift__trigger *t = g->trig;
        int64_t fi = sift__trigger_fired_index(t);
        int whole = sift__trigger_kind_of(t, (size_t)fi) == SIFT__TRIGGER_TOKEN;
        size_t nr = sift__trigger_n_replay(t);
        int32_t y = (int32_t)g->init;
        for (size_t i = 0; i < nr && y > 0; i++) {
            int32_t tok;
            const char *b;
            size_t bn, pl = 0;
            sift__trigger_replay(t, i, &tok, &b, &bn);
            if (tok >= 0)
                (void)sift__gm_piece(c, tok, &pl);
            /* a whole token goes through token_next so that token
             * references (<[id]>) match it by id */
            if (tok >= 0 && (whole || bn == pl)) {
                y = sift__gm_token_next(g, (uint32_t)y, tok);
            } else {
                for (size_t k = 0; k < bn && y > 0; k++)
                    y = sift__gm_step(g, (uint32_t)y, (unsigned char)b[k]);
            }
        }
        sift__gm_end_call(g);
        if (y < 0) {
            sift__trigger_undo(g->trig);
            return g->fail;
        }
        if (y == 0) {
            /* the replayed text, up to a message's worth */
            unsigned char raw[48];
            size_t tl = 0;
            for (size_t i = 0; i < nr && tl < sizeof raw; i++) {
                int32_t tok;
                const char *b;
                size_t bn;
                sift__trigger_replay(t, i, &tok, &b, &bn);
                if (whole && tok >= 0)
                    b = (const char *)sift__gm_piece(c, tok, &bn);
                if (bn > sizeof raw - tl)
                    bn = sizeof raw - tl;
                if (bn)
                    memcpy(raw + tl, b, bn);
                tl += bn;
            }
            char txt[96];
            show(txt, sizeof txt, raw, tl);
            sift__trigger_undo(g->trig);
            return sift__fail_at(err, SIFT_E_GRAMMAR_REJECT, token,
                                 "token %d fires trigger %lld at output byte %lld, but the "
                                 "grammar rejects the text from the trigger on (`%s`...)",
                                 (int)token, (long long)fi, (long long)start, txt);
        }
        if (!commit) {
            sift__trigger_undo(g->trig);
            return SIFT_OK;
        }
        g->cur = (uint32_t)y;
        g->triggered = 1;
        g->out_len = 0;
        memset(g->tail, 0, sizeof g->tail);
        for (size_t i = 0; i < nr; i++) {
            int32_t tok;
            const char *b;
            size_t bn;
            sift__trigger_replay(t, i, &tok, &b, &bn);
            if (whole && tok >= 0)
                b = (const char *)sift__gm_piece(c, tok, &bn);
            sift__gm_note_output(g, (const unsigned char *)b, bn);
        }
    } else if (!commit) {
        sift__trigger_undo(g->trig);
    }
    return SIFT_OK;
}

/* Names trigger `gi` (an index over all lists) by its list in err. */
static void name_trigger(sift_error *err, const sift_lazy_params *p, int64_t gi)
{
    if (!err || gi < 0)
        return;
    static const char *const lists[4] = {"words", "patterns", "full_patterns", "tokens"};
    size_t counts[4] = {p->n_words, p->n_patterns, p->n_full_patterns, p->n_tokens};
    size_t i = (size_t)gi, l = 0;
    while (l < 3 && i >= counts[l]) {
        i -= counts[l];
        l++;
    }
    char a[48], b[48], msg[sizeof err->message];
    snprintf(a, sizeof a, "trigger pattern %lld", (long long)gi);
    snprintf(b, sizeof b, "trigger %lld", (long long)gi);
    const char *rest = err->message;
    if (!strncmp(rest, a, strlen(a)))
        rest += strlen(a);
    else if (!strncmp(rest, b, strlen(b)))
        rest += strlen(b);
    else
        b[0] = '\0';
    /* a long PCRE2 message may be cut: the start says where */
    if (snprintf(msg, sizeof msg, "%s[%zu]%s%s", lists[l], i, b[0] ? "" : ": ", rest) < 0)
        return;
    memcpy(err->message, msg, sizeof msg);
    err->index = (int64_t)i;
}

sift_status sift_grammar_set_lazy(sift_grammar *g, const sift_lazy_params *params, sift_error *err)
{
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if (!params) {
        sift__trigger_free(g->trig);
        g->trig = NULL;
        g->triggered = 0;
        sift_grammar_reset(g);
        return SIFT_OK;
    }
    sift_lazy_params pp;
    sift_lazy_params_init(&pp);
    if (params->struct_size == 0 || params->struct_size > sizeof pp)
        return sift__fail(err, SIFT_E_ARG, "params->struct_size is %u (expected 1..%zu)",
                          (unsigned)params->struct_size, sizeof pp);
    memcpy(&pp, params, params->struct_size);
    const char *const *txt[3] = {pp.words, pp.patterns, pp.full_patterns};
    const size_t *lens[3] = {pp.word_lens, pp.pattern_lens, pp.full_pattern_lens};
    size_t cnt[3] = {pp.n_words, pp.n_patterns, pp.n_full_patterns};
    static const char *const names[3] = {"words", "patterns", "full_patterns"};
    static const sift__trigger_kind kinds[3] = {SIFT__TRIGGER_WORD, SIFT__TRIGGER_PATTERN,
                                                SIFT__TRIGGER_PATTERN_FULL};
    size_t n = 0;
    for (int l = 0; l < 3; l++) {
        if (!txt[l] && cnt[l])
            return sift__fail(err, SIFT_E_ARG, "params->%s is NULL but its count is %zu", names[l],
                              cnt[l]);
        if (cnt[l] > SIZE_MAX / 4 - n)
            return sift__fail(err, SIFT_E_LIMIT, "too many triggers");
        n += cnt[l];
    }
    if (!pp.tokens && pp.n_tokens)
        return sift__fail(err, SIFT_E_ARG, "params->tokens is NULL but n_tokens = %zu",
                          pp.n_tokens);
    if (pp.n_tokens > SIZE_MAX / 4 - n)
        return sift__fail(err, SIFT_E_LIMIT, "too many triggers");
    n += pp.n_tokens;
    if (n == 0)
        return sift__fail(err, SIFT_E_ARG, "a lazy grammar needs at least one trigger");
    if (pp.n_tokens && !g->core->V)
        return sift__fail(err, SIFT_E_ARG, "token triggers need a grammar built with a vocabulary");
    if (n > pp.max_triggers)
        return sift__fail(err, SIFT_E_LIMIT, "%zu triggers; max %zu", n, pp.max_triggers);
    sift__trigger_spec *specs = sift__malloc(&g->al, n, sizeof *specs);
    if (!specs)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for the lazy grammar's triggers");
    size_t k = 0;
    for (int l = 0; l < 3; l++)
        for (size_t i = 0; i < cnt[l]; i++, k++) {
            specs[k].kind = kinds[l];
            specs[k].text = txt[l][i];
            specs[k].len = lens[l] ? lens[l][i] : (txt[l][i] ? strlen(txt[l][i]) : 0);
            specs[k].token = -1;
        }
    for (size_t i = 0; i < pp.n_tokens; i++, k++) {
        specs[k].kind = SIFT__TRIGGER_TOKEN;
        specs[k].text = NULL;
        specs[k].len = 0;
        specs[k].token = pp.tokens[i];
    }
    sift__trigger_params tp;
    sift__trigger_params_init(&tp);
    tp.max_window = pp.max_window;
    tp.max_text = pp.max_text;
    tp.max_triggers = pp.max_triggers;
    tp.match_limit = pp.match_limit;
    tp.depth_limit = pp.depth_limit;
    tp.heap_limit_kib = pp.heap_limit_kib;
    tp.n_vocab = g->core->V;
    tp.max_history = g->hcap;
    sift__trigger *t = NULL;
    s = sift__trigger_new(&t, specs, n, &tp, NULL, &g->al, err);
    sift__free(&g->al, specs);
    if (s) {
        if (err && err->index >= 0 && (size_t)err->index < n)
            name_trigger(err, &pp, err->index);
        return s;
    }
    sift__trigger_free(g->trig);
    g->trig = t;
    g->triggered = 0;
    sift_grammar_reset(g);
    return SIFT_OK;
}

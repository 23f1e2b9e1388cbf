/*
 * gbnf_grammar.c - the sift_grammar object and its calls.
 *
 * What it owns: the public lifecycle (params, new, clone, free, reset),
 * accepting bytes and tokens (with the two-phase prepare_accept the chain
 * uses), and the bookkeeping every call shares: the live-object check,
 * the error sink and work budget of a call, the cache rebuild between
 * steps, and the tail of the output that messages quote. The matching
 * itself is gbnf_match.c. Every call that fails leaves the grammar as it
 * was (its caches may have grown, which no result can see).
 */
#include <stdio.h>
#include <stdlib.h>

#include "gbnf_match.h"

void sift_grammar_params_init(sift_grammar_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->max_bytes = SIFT_GRAMMAR_DEFAULT_MAX_BYTES;
    p->max_stacks = SIFT_GRAMMAR_DEFAULT_MAX_STACKS;
    p->max_stack_depth = SIFT_GRAMMAR_DEFAULT_MAX_STACK_DEPTH;
    p->max_step_work = SIFT_GRAMMAR_DEFAULT_MAX_STEP_WORK;
}

sift_status sift_grammar_new(sift_grammar **out, const char *text, size_t len,
                             const sift_vocab *vocab, const sift_grammar_params *params,
                             sift_error *err)
{
    return sift__grammar_new_ex(out, text, len, vocab, params, NULL, err);
}

sift_status sift__grammar_new_ex(sift_grammar **out, const char *text, size_t len,
                                 const sift_vocab *vocab, const sift_grammar_params *params,
                                 int *needs_vocab, sift_error *err)
{
    if (needs_vocab)
        *needs_vocab = 0;
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!text && len)
        return sift__fail(err, SIFT_E_ARG, "text is NULL but len = %zu", len);
    sift_grammar_params pp;
    sift_grammar_params_init(&pp);
    if (params) {
        if (params->struct_size == 0 || params->struct_size > sizeof pp)
            return sift__fail(err, SIFT_E_ARG, "params->struct_size is %u (expected 1..%zu)",
                              (unsigned)params->struct_size, sizeof pp);
        memcpy(&pp, params, params->struct_size);
    }
    if (pp.max_rollback_tokens < 0 || pp.max_rollback_tokens > SIFT_GRAMMAR_MAX_ROLLBACK)
        return sift__fail(err, SIFT_E_ARG, "max_rollback_tokens is %d (expected 0..%d)",
                          (int)pp.max_rollback_tokens, SIFT_GRAMMAR_MAX_ROLLBACK);
    if (pp.max_stacks < 1 || pp.max_stack_depth < 1 || pp.max_step_work < 1)
        return sift__fail(err, SIFT_E_ARG,
                          "grammar limits must be >= 1 (max_stacks %d, max_stack_depth %d, "
                          "max_step_work %lld)",
                          (int)pp.max_stacks, (int)pp.max_stack_depth, (long long)pp.max_step_work);
    const char *src = pp.source_name ? pp.source_name : "grammar";
    if (len > pp.max_bytes) {
        sift_status s = sift__fail(err, SIFT_E_GRAMMAR_LIMIT, "%s: grammar is %zu bytes; max %zu",
                                   src, len, pp.max_bytes);
        if (err)
            sift__strlcpy_utf8(err->source, src, sizeof err->source);
        return s;
    }
    sift__alloc al;
    sift_status s = sift__alloc_init(&al, pp.allocator, err);
    if (s)
        return s;
    gm_core *c = NULL;
    s = sift__gm_core_new(&c, text ? text : "", len, vocab, &pp, &al, needs_vocab, err);
    if (s)
        return s;
    s = sift__gm_make(out, c, &al, NULL, &pp, err);
    sift__gm_core_unref(c); /* grammar_make took its own reference on success */
    if (!s && (s = sift__gm_hist_alloc(*out, (uint32_t)pp.max_rollback_tokens, err))) {
        sift_grammar_free(*out);
        *out = NULL;
    }
    return s;
}

void sift_grammar_free(sift_grammar *g)
{
    if (!g)
        return;
    sift__alloc al = g->al;
    g->magic = 0;
    sift__gm_free(&g->m, &al);
    sift__free(&al, g->bits);
    sift__free(&al, g->dstk);
    sift__free(&al, g->rr);
    sift__free(&al, g->imp_ids);
    sift__free(&al, g->imp_path);
    sift__gm_mc_free(g);
    sift__free(&al, g->mc_of);
    sift__free(&al, g->sig_dec);
    sift__free(&al, g->hist);
    sift__free(&al, g->hscr);
    for (int k = 0; k < SIG_SLOTS; k++) {
        sift__free(&al, g->sig[k].onp);
        sift__free(&al, g->sig[k].rg);
        sift__free(&al, g->sig[k].dm);
    }
    sift__trigger_free(g->trig);
    sift__gm_core_unref(g->core);
    sift__free(&al, g);
}

sift_status sift__gm_check(const sift_grammar *g, sift_error *err)
{
    if (!g)
        return sift__fail(err, SIFT_E_ARG, "grammar is NULL");
    if (g->magic != MAGIC)
        return sift__fail(err, SIFT_E_ARG, "grammar is not a live grammar object");
    return SIFT_OK;
}

sift_status sift_grammar_clone(const sift_grammar *g, sift_grammar **out, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if ((s = sift__gm_make(out, g->core, &g->al, g, NULL, err)))
        return s;
    sift_grammar *c = *out;
    c->terminated = g->terminated;
    if ((s = sift__gm_hist_copy(c, g, err))) {
        sift_grammar_free(c);
        *out = NULL;
        return s;
    }
    if (g->trig) {
        c->triggered = g->triggered;
        if ((s = sift__trigger_clone(g->trig, &c->trig, err))) {
            sift_grammar_free(c);
            *out = NULL;
            return s;
        }
    }
    return SIFT_OK;
}

void sift_grammar_reset(sift_grammar *g)
{
    if (!g || g->magic != MAGIC)
        return;
    g->cur = g->init;
    g->out_len = 0;
    g->terminated = 0;
    g->h0 = g->hn = 0;
    memset(g->tail, 0, sizeof g->tail);
    if (g->trig) {
        sift__trigger_reset(g->trig);
        g->triggered = 0;
    }
}

/* An untriggered lazy grammar: constrains nothing, feeds its triggers. */
int sift__gm_idle(const sift_grammar *g)
{
    return g->trig && !g->triggered;
}

int sift_grammar_is_complete(const sift_grammar *g)
{
    if (!g || g->magic != MAGIC)
        return 0;
    if (sift__gm_idle(g))
        return 1;
    return (g->m.st[g->cur].flags & F_COMPLETE) != 0;
}

static int caches_large(const sift_grammar *g)
{
    const gm_caches *m = &g->m;
    return m->n_node >= g->soft_nodes || m->n_st >= g->soft_states || m->n_arena >= g->soft_arena;
}

/* Rebuilds the caches from the current state when they are large; only
 * between steps, when no state id is held elsewhere. */
sift_status sift__gm_maybe_flush(sift_grammar *g, sift_error *err)
{
    if (!caches_large(g))
        return SIFT_OK;
    sift_grammar *fresh = NULL;
    sift_status s = sift__gm_make(&fresh, g->core, &g->al, g, NULL, err);
    if (s)
        return s;
    /* the rebuild is work of the call that triggered it (grammar_make
     * stops at max_work by itself; begin() has run) */
    /* the history's states move to the new caches too */
    fresh->err = err;
    if (sift__gm_hist_remap(fresh, g) < 0) {
        s = fresh->fail;
        sift_grammar_free(fresh);
        return s;
    }
    g->err = err;
    if (!sift__gm_budget(g, fresh->work)) {
        sift_grammar_free(fresh);
        return g->fail;
    }
    gm_caches tmp = g->m;
    g->m = fresh->m;
    fresh->m = tmp;
    g->cur = fresh->cur;
    g->init = fresh->init;
    g->epoch++;
    sift_grammar_free(fresh);
    return SIFT_OK;
}

/* Swaps the matching state and caches of a and b. */
static void swap_matcher(sift_grammar *a, sift_grammar *b)
{
    gm_caches tm = a->m;
    a->m = b->m;
    b->m = tm;
    uint32_t t = a->cur;
    a->cur = b->cur;
    b->cur = t;
    t = a->init;
    a->init = b->init;
    b->init = t;
    a->epoch++;
    b->epoch++;
}

void sift__gm_begin(sift_grammar *g, sift_error *err)
{
    g->err = err;
    g->fail = SIFT_OK;
    g->work = 0;
}

void sift__gm_end_call(sift_grammar *g)
{
    g->err = NULL;
}

void sift__gm_note_output(sift_grammar *g, const unsigned char *p, size_t n)
{
    if (n == 0)
        return; /* p may be NULL */
    g->out_len += n;
    size_t cap = sizeof g->tail;
    if (n >= cap) {
        memcpy(g->tail, p + n - cap, cap);
        return;
    }
    memmove(g->tail, g->tail + n, cap - n);
    memcpy(g->tail + cap - n, p, n);
}

/* The last accepted bytes, printable, for messages. */
void sift__gm_tail_text(const sift_grammar *g, char *buf, size_t cap)
{
    size_t n = g->out_len < sizeof g->tail ? (size_t)g->out_len : sizeof g->tail;
    const unsigned char *p = g->tail + sizeof g->tail - n;
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i++) {
        unsigned char ch = p[i];
        if (ch >= 0x20 && ch < 0x7F && ch != '`')
            buf[k++] = (char)ch;
        else
            k += (size_t)snprintf(buf + k, cap - k, "\\x%02X", ch);
    }
    buf[k] = '\0';
}

/* The error of an accept on a terminated grammar: a rejection (as for
 * any token the grammar does not allow; a chain treats it so), which
 * says why. index: the token, or -1 for bytes (err->index 0: the first
 * byte fails). */
static sift_status terminated_msg(sift_error *err, int64_t index)
{
    if (index >= 0)
        return sift__fail_at(err, SIFT_E_GRAMMAR_REJECT, index,
                             "token %lld not accepted: the grammar is terminated (an "
                             "end-of-generation token was accepted); roll it back or reset it",
                             (long long)index);
    return sift__fail_at(err, SIFT_E_GRAMMAR_REJECT, 0,
                         "bytes not accepted: the grammar is terminated (an end-of-generation "
                         "token was accepted); roll it back or reset it");
}

sift_status sift_grammar_accept_bytes(sift_grammar *g, const void *bytes, size_t n, sift_error *err)
{
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if (!bytes && n)
        return sift__fail(err, SIFT_E_ARG, "bytes is NULL but n = %zu", n);
    if (g->terminated)
        return terminated_msg(err, -1);
    if (n == 0)
        return SIFT_OK; /* no text: nothing to match or to feed a trigger */
    gm_hist h;
    if (sift__gm_idle(g)) {
        sift__gm_hist_save(g, &h, 1);
        if (!(s = sift__gm_lazy_step(g, -1, bytes, n, 1, err))) {
            sift__trigger_commit(g->trig);
            sift__gm_hist_push(g, &h);
        }
        return s;
    }
    sift__gm_begin(g, err);
    if ((s = sift__gm_maybe_flush(g, err))) {
        sift__gm_end_call(g);
        return s;
    }
    sift__gm_hist_save(g, &h, 0);
    const unsigned char *p = bytes;
    int32_t y = (int32_t)g->cur;
    size_t k = 0;
    /* A long input can create more states than the caches should hold:
     * they are rebuilt from the state reached so far, and a copy of the
     * starting state is kept to restore it if the call fails later. */
    sift_grammar *orig = NULL;
    for (; k < n && y > 0; k++) {
        if (SIFT__UNLIKELY(caches_large(g))) {
            uint32_t cur0 = g->cur;
            if (!orig && (s = sift_grammar_clone(g, &orig, err)))
                break;
            g->cur = (uint32_t)y;
            s = sift__gm_maybe_flush(g, err);
            y = (int32_t)g->cur;
            g->cur = cur0; /* stale id if flushed; fixed below */
            if (s)
                break;
            /* the history entry of this call names the starting state,
             * which orig holds: its id in the new caches */
            int32_t hc = sift__gm_import(g, orig, orig->cur);
            if (hc < 0) {
                s = g->fail;
                break;
            }
            h.cur = (uint32_t)hc;
            g->work = 0;
        }
        y = sift__gm_step(g, (uint32_t)y, p[k]);
    }
    sift__gm_end_call(g);
    if (s || y <= 0) {
        if (orig) {
            swap_matcher(g, orig);
            sift__gm_hist_swap(g, orig);
            sift_grammar_free(orig);
        }
        if (s)
            return s;
        if (y < 0)
            return g->fail;
    } else if (orig) {
        sift_grammar_free(orig);
    }
    if (y == 0) {
        /* name the place with the text before the failing byte */
        char t[128];
        uint64_t save_len = g->out_len;
        unsigned char save[sizeof g->tail];
        memcpy(save, g->tail, sizeof save);
        sift__gm_note_output(g, p, k - 1);
        sift__gm_tail_text(g, t, sizeof t);
        g->out_len = save_len;
        memcpy(g->tail, save, sizeof save);
        return sift__fail_at(err, SIFT_E_GRAMMAR_REJECT, (int64_t)(k - 1),
                             "byte %zu of the input (0x%02X) is not allowed at output byte %llu "
                             "(after `%s`)",
                             k - 1, p[k - 1], (unsigned long long)(g->out_len + k - 1), t);
    }
    sift__gm_note_output(g, p, n);
    g->cur = (uint32_t)y;
    sift__gm_hist_push(g, &h);
    return SIFT_OK;
}

static sift_status check_token(const sift_grammar *g, int32_t t, sift_error *err)
{
    if (!g->core->V)
        return sift__fail(err, SIFT_E_ARG,
                          "the grammar has no vocabulary (give one to "
                          "sift_grammar_new to work with tokens)");
    if (t < 0 || t >= g->core->V)
        return sift__fail_at(err, SIFT_E_TOKEN, t, "token %d out of range [0, %d)", (int)t,
                             (int)g->core->V);
    return SIFT_OK;
}

sift_status sift_grammar_accepts_token(sift_grammar *g, int32_t token, int *ok, sift_error *err)
{
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if (!ok)
        return sift__fail(err, SIFT_E_ARG, "ok is NULL");
    if ((s = check_token(g, token, err)))
        return s;
    if (g->terminated || sift__gm_idle(g)) {
        *ok = !g->terminated;
        return SIFT_OK;
    }
    sift__gm_begin(g, err);
    int32_t y = sift__gm_token_next(g, g->cur, token);
    sift__gm_end_call(g);
    if (y < 0)
        return g->fail;
    *ok = y > 0;
    return SIFT_OK;
}

static sift_status reject_msg(sift_grammar *g, int32_t token, sift_error *err)
{
    char t[128], pc[64];
    sift__gm_tail_text(g, t, sizeof t);
    size_t L;
    const unsigned char *p = sift__gm_piece(g->core, token, &L);
    size_t k = 0;
    for (size_t i = 0; i < L && k + 5 < sizeof pc; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7F && p[i] != '`')
            pc[k++] = (char)p[i];
        else
            k += (size_t)snprintf(pc + k, sizeof pc - k, "\\x%02X", p[i]);
    }
    pc[k] = '\0';
    if (sift_grammar_is_complete(g) && g->m.st[g->cur].set_len == 1 &&
        !(g->core->attr[token] & SIFT_TOKEN_EOG))
        return sift__fail_at(err, SIFT_E_GRAMMAR_REJECT, token,
                             "token %d (`%s`) not allowed: the grammar is complete (only an "
                             "end-of-generation token can follow)",
                             (int)token, pc);
    return sift__fail_at(err, SIFT_E_GRAMMAR_REJECT, token,
                         "token %d (`%s`) not allowed at output byte %llu (after `%s`)", (int)token,
                         pc, (unsigned long long)g->out_len, t);
}

sift_status sift__grammar_prepare_accept(sift_grammar *g, int32_t token, sift_error *err)
{
    sift_status s = sift__gm_check(g, err);
    if (s)
        return s;
    if ((s = check_token(g, token, err)))
        return s;
    if (g->terminated)
        return terminated_msg(err, token);
    if (sift__gm_idle(g))
        return sift__gm_lazy_step(g, token, NULL, 0, 0, err);
    sift__gm_begin(g, err);
    if ((s = sift__gm_maybe_flush(g, err))) {
        sift__gm_end_call(g);
        return s;
    }
    int32_t y = sift__gm_token_next(g, g->cur, token);
    sift__gm_end_call(g);
    if (y < 0)
        return g->fail;
    if (y == 0)
        return reject_msg(g, token, err);
    return SIFT_OK;
}

sift_status sift_grammar_accept_token(sift_grammar *g, int32_t token, sift_error *err)
{
    gm_hist h;
    if (g && g->magic == MAGIC && !g->terminated && sift__gm_idle(g)) {
        sift_status r = check_token(g, token, err);
        if (r)
            return r;
        sift__gm_hist_save(g, &h, 1);
        if ((r = sift__gm_lazy_step(g, token, NULL, 0, 1, err)))
            return r;
        sift__trigger_commit(g->trig);
        sift__gm_hist_push(g, &h);
        if (g->core->attr[token] & SIFT_TOKEN_EOG)
            g->terminated = 1;
        return SIFT_OK;
    }
    sift_status s = sift__grammar_prepare_accept(g, token, err);
    if (s)
        return s;
    sift__gm_hist_save(g, &h, 0); /* after prepare's cache rebuild */
    /* Prepared: the text path is cached now; token_next only repeats
     * lookups (and, for token elements, re-interns a known state). */
    sift__gm_begin(g, err);
    int32_t y = sift__gm_token_next(g, g->cur, token);
    sift__gm_end_call(g);
    if (y <= 0)
        return y < 0 ? g->fail : reject_msg(g, token, err);
    if (!(g->core->attr[token] & SIFT_TOKEN_EOG)) {
        size_t L;
        const unsigned char *p = sift__gm_piece(g->core, token, &L);
        sift__gm_note_output(g, p, L);
    } else {
        g->terminated = 1;
    }
    g->cur = (uint32_t)y;
    sift__gm_hist_push(g, &h);
    return SIFT_OK;
}

uint64_t sift__grammar_digest(const sift_grammar *g, uint64_t h)
{
    const gm_caches *m = &g->m;
    const gm_state *s = &m->st[g->cur];
    uint64_t acc = 0;
    for (uint32_t k = 0; k < s->set_len; k++) {
        uint64_t sh = 1469598103934665603ull;
        for (uint32_t y = m->arena[s->set_off + k]; y; y = m->node[y].parent)
            sh = sift__fnv(sh, &m->node[y].pos, sizeof m->node[y].pos);
        acc += sh * 0x9E3779B97F4A7C15ull; /* order-free */
    }
    uint32_t t[5] = {s->set_len, s->acc, s->rem, s->lo, s->hi};
    h = sift__fnv(h, t, sizeof t);
    h = sift__fnv(h, &acc, sizeof acc);
    h = sift__fnv(h, &g->terminated, sizeof g->terminated);
    if (g->trig) {
        h = sift__fnv(h, &g->triggered, sizeof g->triggered);
        h = sift__trigger_digest(g->trig, h);
    }
    return h;
}

int64_t sift__grammar_last_work(const sift_grammar *g)
{
    return g->work;
}

int32_t sift__grammar_n_vocab(const sift_grammar *g)
{
    return g->core->V;
}

int sift__grammar_owned(const sift_grammar *g)
{
    return g->owned;
}

void sift__grammar_set_owned(sift_grammar *g)
{
    g->owned = 1;
}

void sift__grammar_set_soft_limits(sift_grammar *g, uint32_t nodes, uint32_t states, uint32_t arena)
{
    g->soft_nodes = nodes;
    g->soft_states = states;
    g->soft_arena = arena;
}

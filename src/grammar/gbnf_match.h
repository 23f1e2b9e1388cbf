/*
 * gbnf_match.h - shared between the files of the grammar matcher.
 *
 * struct sift_grammar and its parts: the shared immutable core (compiled
 * rules, the vocabulary's pieces, the token trie), the per-object matcher
 * caches (stack nodes, DFA states and their byte transitions), and the
 * helpers every matcher file uses. The files:
 *
 *   gbnf_core.c     the shared core: compiled rules, the vocabulary's
 *                   token index and trie, the mask cache's key tables
 *   gbnf_match.c    the matcher automaton: stacks, closure, states,
 *                   transitions, token steps, grammar objects over a core
 *   gbnf_grammar.c  the sift_grammar object: params, new/clone/free/reset,
 *                   accepting bytes and tokens, the per-call bookkeeping
 *   gbnf_mask.c     the whole-vocabulary pass: the trie walk, the allowed
 *                   set, bans on a row, candidates or a slice
 *   gbnf_lazy.c     lazy grammars: triggers, replay, sift_grammar_set_lazy
 *
 * Nothing here is API.
 */
#ifndef SIFT_GRAMMAR_GBNF_MATCH_H
#define SIFT_GRAMMAR_GBNF_MATCH_H

#include <stdatomic.h>

#include "../vocab/vocab.h"
#include "gbnf.h"
#include "trigger.h"

#define MAGIC 0x47424e46u /* "GBNF" */

/* F_U8TRIED: sift__gm_u8_loop has run on the state (its answer is loop
 * group 1); F_ROWFULL: sift__gm_row_fill has run (every ASCII transition
 * is known when the state has at most 64 stacks and no pending sequence,
 * so loop[] is complete for the ASCII groups); F_SIGYES / F_SIGNO: the
 * mask's loop signatures take / skip the state (gbnf_mask.c, sig_for);
 * F_CNTNO: the mask's counted path does not take the state (gbnf_mask.c,
 * cnt_chain); F_ADM: gm_state.adm is known. */
enum {
    F_COMPLETE = 1,
    F_HASTOK = 2,
    F_U8TRIED = 4,
    F_ROWFULL = 8,
    F_SIGYES = 16,
    F_SIGNO = 32,
    F_CNTNO = 64,
    F_ADM = 128
};

/* Soft cache sizes: past these the caches are rebuilt at the next accept. */
#define SOFT_NODES (1u << 20)
#define SOFT_STATES (1u << 13)
#define SOFT_ARENA (1u << 24)

/* ------------------------------------------------------------------ */
/* The shared core                                                     */
/* ------------------------------------------------------------------ */

/* A trie node: the edge byte from its parent (db & 0xff) at depth db >> 8
 * (1-based); its subtree is nodes [self, end) and the tokens of the
 * subtree are stok[slot .. slot_end), those ending at the node first. */
typedef struct gm_tnode {
    uint32_t end, slot, slot_end, db;
} gm_tnode;

/* The vocabulary's token index: everything the matcher needs of a
 * vocabulary, built once per vocabulary (sift__gm_vindex) and shared
 * read-only by every grammar and thread, reference counted through its
 * head (the vocabulary holds one reference, every core one more, so a
 * grammar outlives the vocabulary it was built from). Allocated with the
 * vocabulary's allocator. */
typedef struct gm_vindex {
    sift__vocab_index head; /* first: vocab/vocab.c sees only this */
    sift__alloc al;
    int32_t V;
    uint64_t *poff; /* V + 1 piece offsets */
    unsigned char *pbytes;
    uint8_t *attr; /* the attribute bits when the index was built */
    int32_t *eog;
    int32_t n_eog;
    /* token trie in preorder (tn nodes) and its tokens in trie order
     * (stok[0 .. n_slots)); tokens not in the trie (EOG, empty pieces)
     * are listed in other[0 .. n_other) */
    uint32_t tn;
    struct gm_tnode *tr;
    int32_t *stok;
    uint32_t n_slots;
    int32_t *other;
    uint32_t n_other;
    uint32_t tmaxd;
    /* per trie node n, below[2 n .. 2 n + 2): the byte groups
     * (sift__gm_group) of the edges strictly inside its subtree, and
     * group SIFT__GM_GROUP_BADU8 when the bytes below n, read from a
     * character boundary at n, are not all valid UTF-8 (a token below
     * may end inside a character) */
    uint64_t *below;
    /* per trie node: the most edges below it in its subtree */
    uint8_t *height;
} gm_vindex;

/* A compiled grammar: its rules and alternatives, its own; the
 * vocabulary's fields below are aliases of vx's arrays (NULL / 0 without
 * a vocabulary), kept here so the matcher reads them in one hop. */
typedef struct gm_core {
    atomic_size_t refs;
    sift__alloc al;
    sift__gbnf g;
    uint32_t *alt_off; /* per rule: alternatives alt[alt_off[r] .. alt_off[r+1]) */
    uint32_t *alt;     /* first position of each alternative */
    gm_vindex *vx;     /* one reference, or NULL */
    int32_t V;         /* 0 = no vocabulary */
    const uint64_t *poff;
    const unsigned char *pbytes;
    const uint8_t *attr;
    const int32_t *eog;
    int32_t n_eog;
    uint32_t tn;
    const struct gm_tnode *tr;
    const int32_t *stok;
    uint32_t n_slots;
    const int32_t *other;
    uint32_t n_other;
    uint32_t tmaxd;
    const uint64_t *below;
    const uint8_t *height;
    /* Repetition counters the masks cannot see (sift__gm_canon): per
     * element position, the position the mask cache keys it as; NULL
     * when no position moves (no vocabulary, or no bounded repetition,
     * helper chain or copies written in place, longer than the longest
     * token + 2). */
    uint32_t *canon_pos;
    /* The same with every helper that can still match two copies or more
     * moved to its chain's helper with two, and every inline copy with
     * more than two left to the one with two (NULL when none moves), and
     * per position a lower bound on the bytes the copies its helper or
     * run can still match need, to within one byte (gbnf_core.c,
     * move_positions; UINT16_MAX outside them): the walk's shifted loops
     * (gm_state.sl). */
    uint32_t *erase_pos;
    uint16_t *pcnt;
} gm_core;

/* ------------------------------------------------------------------ */
/* The matcher caches                                                  */
/* ------------------------------------------------------------------ */

typedef struct gm_node {
    uint32_t pos, parent, depth;
    uint32_t succ_off, succ_len; /* memo of the successors; off = UINT32_MAX unknown */
    uint32_t canon;              /* sift__gm_canon's stack; UINT32_MAX unknown */
    uint32_t ecanon;             /* the stack through erase_pos; UINT32_MAX unknown */
    uint32_t mincnt;             /* the fewest copies (pcnt) of its nodes */
} gm_node;

#define SIFT__GM_VIA 2

typedef struct gm_state {
    uint32_t set_off, set_len;
    uint32_t acc;
    uint8_t rem, lo, hi, flags;
    /* loop[]: the byte groups (sift__gm_group) whose every byte has a
     * computed transition back to this state (kept by
     * sift__gm_trans_compute; ctl_loops counts the group-0 bytes), and
     * group 1 when every multi-byte character leads back to it through
     * live states (sift__gm_u8_loop). The trie walk takes a subtree whose
     * bytes below are all in loop[] as accepted whole. */
    uint32_t ctl_loops;
    uint64_t loop[2];
    uint32_t canon; /* sift__gm_canon of the state; UINT32_MAX unknown */
    /* Shifted loops: eid is the state through erase_pos (UINT32_MAX
     * unknown), mincnt the least pcnt of its stacks' nodes (bytes their
     * copies still need). sl[] holds the ASCII groups but 0 whose byte
     * has a computed transition to a state y with the same eid (and group
     * 1 when every multi-byte character does, sift__gm_u8_loop), and slev
     * the least min(mincnt) of those pairs: two states with the same eid
     * whose nodes' copies all need M bytes or more (one byte of slack in
     * pcnt aside) keep the same strings of at most M - 2 bytes alive
     * (sift__gm_canon's argument with cap M), so a trie subtree of height
     * h <= slev - 1 whose bytes are all in loop[] or sl[] is accepted
     * whole (by induction on the length, every byte of it leading to a
     * state equivalent for the bytes that remain). */
    uint32_t eid, mincnt, slev;
    uint64_t sl[2];
    /* adm[]: the ASCII bytes some stack's top admits (F_ADM once known;
     * sift__gm_trans_compute): every other ASCII byte of a state without
     * a pending sequence leads to the dead state. */
    uint64_t adm[2];
    /* The last ASCII transitions computed through advance, by the stacks
     * that admitted the byte (a bit per stack; states of at most 64
     * stacks): a byte the same stacks admit leads to the same state. */
    uint64_t via[SIFT__GM_VIA];
    int32_t via_to[SIFT__GM_VIA];
    uint32_t n_via;
} gm_state;

typedef struct gm_caches {
    gm_node *node;
    uint32_t n_node, cap_node;
    uint32_t *mark;
    uint32_t epoch;
    uint32_t *nht;
    uint32_t nht_cap;
    uint32_t *arena;
    size_t n_arena, cap_arena;
    gm_state *st;
    uint32_t n_st, cap_st;
    int32_t *trans;
    uint32_t *sht;
    uint32_t sht_cap;
    /* scratch */
    uint32_t *cl; /* closure output */
    size_t n_cl, cap_cl;
    uint32_t *scr; /* set unions */
    size_t n_scr, cap_scr;
    uint32_t *wl; /* closure worklist */
    size_t cap_wl;
} gm_caches;

/* One entry of the loop-signature cache (gbnf_mask.c, sig_build): for a
 * set L of loop groups and an anchor node (the root: tn), its subtree
 * read from a state looping on L: onp (a bit per trie node from base to
 * end) marks the character-boundary nodes of the paths made of L bytes
 * from the anchor, rg[0 .. 4 n_rg) the ranges of slots below them that
 * are not accepted by the loop alone: (slot_lo, slot_hi, the exit node
 * to walk, or SIG_DEAD, the characters on the path from the anchor to
 * the exit's parent, at most 255). They depend on the trie, L and the anchor,
 * never on a state, so nothing invalidates them. */
typedef struct gm_sigent {
    uint64_t loop[2];
    uint32_t anchor, base, end;
    uint64_t *onp;
    size_t cap_onp;
    uint32_t *rg;
    size_t n_rg, cap_rg;
    int used;
    /* Root entries read by the counted path (gbnf_mask.c, cnt_mask): dm
     * holds CNT_DMAX masks of mc_words words, mask d - 1 the tokens whose
     * path is made of L characters (a partial one counted) and starts at
     * most d characters; dm_ok once built for this entry's L. */
    uint32_t *dm;
    size_t cap_dm;
    int dm_ok;
} gm_sigent;

#define SIG_SLOTS 16
/* The mask cache's slots per block (sift_grammar.mc_blk). */
#define SIFT__GM_MC_BLOCK 16u

/* One entry of the rollback history (gbnf_serve.c): the state a grammar
 * had before one accept (a token, or a sift_grammar_accept_bytes call).
 * `fed`: the accept went to the trigger set of an untriggered lazy
 * grammar, which keeps its own record of it (sift__trigger_commit). */
typedef struct gm_hist {
    uint64_t out_len;
    uint32_t cur;
    uint8_t term, trig, fed;
    unsigned char tail[24];
} gm_hist;

struct sift_grammar {
    uint32_t magic;
    sift__alloc al;
    gm_core *core;
    int32_t max_stacks, max_depth;
    int64_t max_work, work;
    uint32_t soft_nodes, soft_states, soft_arena; /* cache sizes that trigger a rebuild */
    sift_status fail;                             /* set by helpers that cannot return a status */
    sift_error *err;
    gm_caches m;
    uint32_t cur, init;
    uint8_t *bits;  /* V bits of scratch for the whole-vocabulary pass */
    uint32_t *dstk; /* trie walk: state per depth */
    uint32_t *rr;   /* trie walk: rejected slot ranges (pairs) */
    size_t n_rr, cap_rr;
    /* import_state's scratch (kept, so that re-syncing a copy of a
     * grammar allocates nothing once it fits) */
    uint32_t *imp_ids, *imp_path;
    size_t cap_imp_ids, cap_imp_path;
    uint64_t out_len; /* bytes accepted since reset */
    unsigned char tail[24];
    /* Lazy grammars (NULL trig = eager). While !triggered the matching
     * state is the initial one and every token goes to trig; a token that
     * is only tried (prepare) or whose replay is rejected is taken back
     * with sift__trigger_undo. */
    sift__trigger *trig;
    int triggered;
    /* State ids keep their meaning until the caches are rebuilt or
     * swapped; epoch counts those events. The small allowed set of state
     * ss_cur in epoch ss_epoch (sift__grammar_small_set) is cached. */
    uint32_t epoch;
    int ss_valid;
    uint32_t ss_cur, ss_epoch;
    size_t ss_n;
    int32_t ss_ids[SIFT__GRAMMAR_SMALL];
    /* The mask cache (sift_grammar_fill_bitmask): the bitmask of a state
     * is a function of the state, so the masks of up to mc_cap states of
     * epoch mc_epoch are kept, mc_words words each, in blocks of
     * SIFT__GM_MC_BLOCK slots allocated as the cache fills, never moved
     * (slot k at mc_blk[k / SIFT__GM_MC_BLOCK] + k % SIFT__GM_MC_BLOCK *
     * mc_words, holding state mc_state[k]); mc_of[x] is state x's slot
     * + 1 (0 = none) for x < cap_of. Slots are taken in turn once all
     * are used (the oldest entry is evicted). mc_limit bounds the bytes
     * of the masks (0 = no cache). */
    uint32_t **mc_blk;
    size_t n_blk;
    uint32_t *mc_state;
    uint32_t *mc_of;
    size_t cap_of, mc_words, mc_limit;
    uint32_t mc_n, mc_cap, mc_next, mc_epoch;
    uint64_t mc_hits, mc_misses;
    /* the loop-signature cache, taken in turn once full; sig_on = 0
     * turns it off (tests) */
    gm_sigent sig[SIG_SLOTS];
    uint8_t *sig_dec; /* sig_build's scratch: 2 (tmaxd + 1) bytes */
    uint32_t sig_next;
    int sig_on;
    uint64_t sig_hits, sig_builds;
    uint64_t cnt_hits, cnt_builds; /* the counted path's masks and dm builds */
    /* 1 while a chain owns the grammar (a stage's or its check grammar):
     * a second transfer is refused. Clones start unowned. */
    int owned;
    /* 1 once an end-of-generation token was accepted: only rollback and
     * reset change the grammar then. */
    int terminated;
    /* The rollback history: hist[(h0 + k) % hcap] for k < hn, oldest
     * first; state ids in it are remapped whenever the caches are rebuilt
     * (sift__gm_maybe_flush), with hscr (hcap ids) as scratch. */
    gm_hist *hist;
    uint32_t *hscr;
    uint32_t hcap, h0, hn;
};

/* ------------------------------------------------------------------ */
/* gbnf_core.c                                                         */
/* ------------------------------------------------------------------ */

/* The vocabulary's shared token index with a reference for the caller:
 * the published one, or one built now and published (thread-safe; see
 * sift__vocab_index_publish). SIFT_E_NOMEM (nothing published). */
SIFT__HIDDEN sift_status sift__gm_vindex(gm_vindex **out, const sift_vocab *vocab, sift_error *err);
/* Compiles `text` into a new core (one reference) over the vocabulary. */
SIFT__HIDDEN sift_status sift__gm_core_new(gm_core **out, const char *text, size_t len,
                                           const sift_vocab *vocab, const sift_grammar_params *pp,
                                           const sift__alloc *al, int *needs_vocab,
                                           sift_error *err);
/* Drops a reference to a core; the last one frees it. NULL is a no-op. */
SIFT__HIDDEN void sift__gm_core_unref(gm_core *c);

/* ------------------------------------------------------------------ */
/* gbnf_match.c                                                        */
/* ------------------------------------------------------------------ */

/* Records the first failure of a call (g->fail) and its message in
 * g->err; returns the status that stands. */
SIFT__HIDDEN sift_status sift__gm_fail(sift_grammar *g, sift_status code, const char *fmt, ...)
    SIFT__PRINTF(3, 4);
/* A grammar object over core c (a reference is taken on success). The
 * matching state is `from`'s current state, or the initial one. */
SIFT__HIDDEN sift_status sift__gm_make(sift_grammar **out, gm_core *c, const sift__alloc *al,
                                       const sift_grammar *from, const sift_grammar_params *pp,
                                       sift_error *err);
/* Frees the matcher caches. */
SIFT__HIDDEN void sift__gm_free(gm_caches *m, const sift__alloc *al);
/* Computes and caches the transition of state x on byte b (the miss path
 * of sift__gm_step). */
SIFT__HIDDEN int32_t sift__gm_trans_compute(sift_grammar *g, uint32_t x, unsigned b);
/* The state the mask cache keys state x as: x with the repetition
 * counters no token can reach capped (gm_core.canon_pos), a state with
 * exactly x's allowed set; x itself when nothing moves. -1 on failure
 * (g->fail). Memoized per state. */
SIFT__HIDDEN int32_t sift__gm_canon(sift_grammar *g, uint32_t x);
/* Whether every valid multi-byte UTF-8 character leads from state x
 * back to x, every prefix of one to a live state: then loop group 1 of x
 * is set (and F_U8TRIED, once asked). When every character leads to one
 * state with x's erase id instead, group 1 goes to x's shifted loops
 * (sl, slev). 1 yes (an exact loop), 0 no, -1 on failure. */
SIFT__HIDDEN int sift__gm_u8_loop(sift_grammar *g, uint32_t x);
/* The state z > 0 that every valid multi-byte UTF-8 character leads to
 * from state x (no pending sequence), every prefix of one to a live
 * state; 0 when they do not all lead to one live state that way (or x is
 * dead, or inside a sequence), -1 on failure. */
SIFT__HIDDEN int32_t sift__gm_u8_target(sift_grammar *g, uint32_t x);
/* Computes every ASCII transition of state x (no pending sequence, at
 * most 64 stacks; otherwise only marks it), one advance per distinct set
 * of stacks admitting a byte. 0, or -1 on failure. */
SIFT__HIDDEN int sift__gm_row_fill(sift_grammar *g, uint32_t x);
/* The state after token t in state x: 0 if rejected, -1 on failure. */
SIFT__HIDDEN int32_t sift__gm_token_next(sift_grammar *g, uint32_t x, int32_t t);

/* ------------------------------------------------------------------ */
/* gbnf_grammar.c: per-call bookkeeping                                */
/* ------------------------------------------------------------------ */

/* SIFT_E_ARG unless g is a live grammar object. */
SIFT__HIDDEN sift_status sift__gm_check(const sift_grammar *g, sift_error *err);
/* An untriggered lazy grammar: constrains nothing, feeds its triggers. */
SIFT__HIDDEN int sift__gm_idle(const sift_grammar *g);
/* Rebuilds the caches from the current state when they are large; only
 * between steps, when no state id is held elsewhere. */
SIFT__HIDDEN sift_status sift__gm_maybe_flush(sift_grammar *g, sift_error *err);
/* Starts a call (error sink, no failure, work 0) and ends it. */
SIFT__HIDDEN void sift__gm_begin(sift_grammar *g, sift_error *err);
SIFT__HIDDEN void sift__gm_end_call(sift_grammar *g);
/* Counts n accepted output bytes and keeps the last ones for messages. */
SIFT__HIDDEN void sift__gm_note_output(sift_grammar *g, const unsigned char *p, size_t n);
/* The last accepted bytes, printable, for messages. */
SIFT__HIDDEN void sift__gm_tail_text(const sift_grammar *g, char *buf, size_t cap);

/* ------------------------------------------------------------------ */
/* gbnf_serve.c: the rollback history                                  */
/* ------------------------------------------------------------------ */

/* Allocates a history of cap entries (0: none), empty. SIFT_E_NOMEM. */
SIFT__HIDDEN sift_status sift__gm_hist_alloc(sift_grammar *g, uint32_t cap, sift_error *err);
/* The current state as a history entry (taken before an accept). */
SIFT__HIDDEN void sift__gm_hist_save(const sift_grammar *g, gm_hist *h, int fed);
/* Appends h after a successful accept, dropping the oldest entry when
 * the history is full. Allocates nothing. */
SIFT__HIDDEN void sift__gm_hist_push(sift_grammar *g, const gm_hist *h);
/* Maps every history entry's state into `fresh`, the rebuilt caches of
 * g, through hscr; the entries are rewritten only when all succeed
 * (-1 and fresh->fail otherwise). */
SIFT__HIDDEN int sift__gm_hist_remap(sift_grammar *fresh, sift_grammar *g);
/* Copies from's history into g, a new clone (same capacity), importing
 * its states. SIFT_E_NOMEM, SIFT_E_GRAMMAR_LIMIT. */
SIFT__HIDDEN sift_status sift__gm_hist_copy(sift_grammar *g, const sift_grammar *from,
                                            sift_error *err);
/* Swaps the histories of two clones (after swap_matcher). */
SIFT__HIDDEN void sift__gm_hist_swap(sift_grammar *a, sift_grammar *b);

/* gbnf_mask.c: the bitmask of the current state into w[0 .. n_words)
 * (n_words >= the grammar's words), as sift_grammar_fill_bitmask. */
SIFT__HIDDEN sift_status sift__gm_fill(sift_grammar *g, uint32_t *w, size_t n_words,
                                       sift_error *err);
/* gbnf_mask.c: frees the mask cache's blocks and slots (the cache is
 * empty after it; mc_of is the caller's). */
SIFT__HIDDEN void sift__gm_mc_free(sift_grammar *g);

/* gbnf_match.c: state x of `from` (a grammar over the same core) interned
 * in g's caches; -1 on failure (g->fail). */
SIFT__HIDDEN int32_t sift__gm_import(sift_grammar *g, const sift_grammar *from, uint32_t x);

/* ------------------------------------------------------------------ */
/* gbnf_lazy.c                                                         */
/* ------------------------------------------------------------------ */

/* One token (its bytes) through an untriggered lazy grammar; see the
 * definition for the replay and undo rules. */
SIFT__HIDDEN sift_status sift__gm_lazy_step(sift_grammar *g, int32_t token, const void *bytes,
                                            size_t n, int commit, sift_error *err);

/* ------------------------------------------------------------------ */
/* Small helpers, inline in every file                                 */
/* ------------------------------------------------------------------ */

/* Whether an element of this type ends an alternative. */
static inline int sift__gm_is_end(uint32_t type)
{
    return type == SIFT__G_END || type == SIFT__G_ALT;
}

/* Whether an element of this type matches a token id (<[id]>, !<[id]>). */
static inline int sift__gm_is_tok(uint32_t type)
{
    return type == SIFT__G_TOKEN || type == SIFT__G_TOKEN_NOT;
}

/* Element `pos` of the compiled rules. */
static inline const sift__gelem *sift__gm_el(const sift_grammar *g, uint32_t pos)
{
    return &g->core->g.el[pos];
}

/* Grows *p (n_have used of *cap elements of esz bytes) to hold `need`
 * (sift__reserve, first capacity 64); 1 on success. */
static inline int sift__gm_grow(const sift__alloc *al, void *p, size_t *cap, size_t n_have,
                                size_t need, size_t esz)
{
    return need <= *cap || sift__reserve(al, p, cap, n_have, need, esz, 64) == SIFT_OK;
}

/* Charges n units of work to the call (docs/grammar.md, "Limits"): one
 * unit per stack visited, pushed, scanned, copied, hashed or compared,
 * per trie node walked and per token written; a sort of n stacks costs
 * n (1 + log2 n). Every loop of the matcher charges before (or while) it
 * runs, so the budget stops a call after at most max_work units plus one
 * bounded loop, never after a set of unbounded size has been built. */
static inline int sift__gm_budget(sift_grammar *g, int64_t n)
{
    g->work += n;
    if (g->work > g->max_work) {
        sift__gm_fail(g, SIFT_E_GRAMMAR_LIMIT,
                      "grammar step exceeded its work budget of %lld units at output byte %llu",
                      (long long)g->max_work, (unsigned long long)g->out_len);
        return 0;
    }
    return 1;
}

/* The state after byte b in state x (cached transition, computed on a
 * miss): 0 = dead, -1 on failure (g->fail). */
static inline int32_t sift__gm_step(sift_grammar *g, uint32_t x, unsigned b)
{
    int32_t y = g->m.trans[(size_t)x * 256 + b];
    return y >= 0 ? y : sift__gm_trans_compute(g, x, b);
}

/* The group of byte b, 0..127, for the walk's self-loop test: an ASCII
 * byte is its own group but the control bytes other than \t \n \r,
 * which share group 0; every byte >= 0x80 is group 1 (a UTF-8 byte never
 * loops back to the same state: it starts or continues a sequence). */
static inline unsigned sift__gm_group(unsigned b)
{
    if (b >= 0x80)
        return 1;
    if (b < 0x20 && b != '\t' && b != '\n' && b != '\r')
        return 0;
    return b;
}

/* The number of bytes of group 0. */
#define SIFT__GM_GROUP0 29

/* A group no byte has (byte 2 is in group 0): in gm_vindex.below, invalid
 * UTF-8 below a trie node; never in a state's loop[]. */
#define SIFT__GM_GROUP_BADU8 2

/* The piece of token t (len bytes). */
static inline const unsigned char *sift__gm_piece(const gm_core *c, int32_t t, size_t *len)
{
    *len = (size_t)(c->poff[t + 1] - c->poff[t]);
    return c->pbytes + c->poff[t];
}

/* The UTF-8 decoder of the matcher (sift__gm_trans_compute), as 8 states:
 * 0 between characters; 1 one continuation byte (80..BF) to go; 2, 3, 4
 * two to go, the first in 80..BF, A0..BF (after E0) or 80..9F (after
 * ED); 5, 6, 7 three to go, the first in 80..BF, 90..BF (after F0) or
 * 80..8F (after F4). The state after byte b in state d, or -1 where the
 * matcher rejects b (a dead transition in every grammar). The trie's
 * build (gbnf_core.c) and the mask walk (gbnf_mask.c) share it. */
static inline int sift__gm_u8_next(unsigned d, unsigned b)
{
    static const unsigned char lo[8] = {0, 0x80, 0x80, 0xA0, 0x80, 0x80, 0x90, 0x80};
    static const unsigned char hi[8] = {0, 0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0xBF, 0x8F};
    static const signed char nx[8] = {0, 0, 1, 1, 1, 2, 2, 2};
    if (d == 0) {
        if (b < 0x80)
            return 0;
        if (b >= 0xC2 && b <= 0xDF)
            return 1;
        if (b == 0xE0)
            return 3;
        if (b == 0xED)
            return 4;
        if (b >= 0xE1 && b <= 0xEF)
            return 2;
        if (b == 0xF0)
            return 6;
        if (b == 0xF4)
            return 7;
        if (b >= 0xF1 && b <= 0xF3)
            return 5;
        return -1;
    }
    return b >= lo[d] && b <= hi[d] ? nx[d] : -1;
}

#endif

/*
 * trigger.h - lazy-grammar triggers (internal; docs/triggers.md).
 *
 * A trigger set watches the generated text, token by token, and says when
 * a lazy grammar must wake up and which text it must receive. Four kinds:
 *
 *   WORD          a byte string found anywhere in the generated text
 *                 (substring: "function" fires inside "functional");
 *   PATTERN       a PCRE2 pattern searched in the recent text;
 *   PATTERN_FULL  a PCRE2 pattern that must match the whole generated text
 *                 so far (anchored at both ends);
 *   TOKEN         a token id, matched on the id (special tokens included).
 *
 * Use:
 *
 *     sift__trigger *t;
 *     sift__trigger_new(&t, specs, n, &params, vocab, &al, &err);
 *     for each accepted, generated token:
 *         sift__trigger_feed(t, token, piece, piece_len, &fired, &start, &err);
 *         if (fired) {
 *             for (i = 0; i < sift__trigger_n_replay(t); i++) {
 *                 sift__trigger_replay(t, i, &tok, &bytes, &len);
 *                 feed (tok, bytes, len) to the grammar;   // the first may
 *             }                                            // be a partial piece
 *             break;   // the set stays fired until reset
 *         }
 *
 * Only generated text may be fed: never the prompt or a prefill (T-07).
 * The text of tokens the vocabulary marks SIFT_TOKEN_SPECIAL is not part
 * of the generated text (TOKEN triggers still see their ids).
 *
 * Cost per fed token does not grow with the generation: words go through
 * one Aho-Corasick automaton whose state is carried across tokens;
 * PATTERN triggers search a window of the last max_window bytes, from
 * where a partial-match search showed a match could still start (usually
 * just the new bytes); only PATTERN_FULL triggers look at the whole text,
 * which is capped at max_text bytes. Buffers are sized when the set is
 * built (without full patterns), so feeding allocates nothing unless a
 * token is longer than the window.
 *
 * Not thread-safe per object; clones are independent.
 */
#ifndef SIFT_GRAMMAR_TRIGGER_H
#define SIFT_GRAMMAR_TRIGGER_H

#include "../sift_internal.h"

typedef enum sift__trigger_kind {
    SIFT__TRIGGER_WORD = 0,
    SIFT__TRIGGER_PATTERN = 1,
    SIFT__TRIGGER_PATTERN_FULL = 2,
    SIFT__TRIGGER_TOKEN = 3
} sift__trigger_kind;

/* One trigger as the caller describes it. `text`/`len` for words and
 * patterns (not NUL-terminated), `token` for TOKEN. */
typedef struct sift__trigger_spec {
    sift__trigger_kind kind;
    const char *text;
    size_t len;
    int32_t token;
} sift__trigger_spec;

#define SIFT__TRIGGER_DEFAULT_WINDOW 4096
#define SIFT__TRIGGER_DEFAULT_MAX_TEXT ((size_t)1 << 20)
#define SIFT__TRIGGER_DEFAULT_MAX_TRIGGERS 1024
#define SIFT__TRIGGER_MAX_PATTERN 4096
#define SIFT__TRIGGER_DEFAULT_MATCH_LIMIT 1000000u
#define SIFT__TRIGGER_DEFAULT_DEPTH_LIMIT 10000u
#define SIFT__TRIGGER_DEFAULT_HEAP_LIMIT_KIB 16384u

/* Limits; sift__trigger_params_init gives the defaults. */
typedef struct sift__trigger_params {
    size_t max_window;       /* bytes PATTERN triggers search (>= 64) */
    size_t max_text;         /* bytes PATTERN_FULL triggers may see */
    size_t max_triggers;     /* count cap (SIFT_E_LIMIT) */
    uint32_t match_limit;    /* PCRE2 steps per fed token, all patterns */
    uint32_t depth_limit;    /* PCRE2 depth limit */
    uint32_t heap_limit_kib; /* PCRE2 heap limit, KiB */
    int32_t n_vocab;         /* TOKEN ids must be < n_vocab (0 = vocab's size or no check) */
    size_t max_history;      /* committed feeds sift__trigger_rollback can take back (0) */
} sift__trigger_params;

typedef struct sift__trigger sift__trigger;

SIFT__HIDDEN void sift__trigger_params_init(sift__trigger_params *p);

/* Builds a trigger set from specs[0..n) (n >= 1). `params` may be NULL
 * (defaults). `vocab` may be NULL; when given it is borrowed (it must
 * outlive the set) to read SIFT_TOKEN_SPECIAL and to bound TOKEN ids.
 * Errors carry the trigger's index in err->index:
 *   SIFT_E_ARG      empty word, word with a NUL byte, a word longer than
 *                   the window, a bad kind, NULL text, bad params;
 *   SIFT_E_TOKEN    TOKEN id < 0 or >= the vocabulary size;
 *   SIFT_E_LIMIT    more than max_triggers triggers;
 *   SIFT_E_PATTERN_SYNTAX  PCRE2 compile error: "trigger pattern 2,
 *                   offset 3: <PCRE2 message>" (err->offset = 3);
 *   SIFT_E_PATTERN_LIMIT   pattern over 4096 bytes, or a PCRE2 compile
 *                   limit (nesting, size);
 *   SIFT_E_NOMEM. */
SIFT__HIDDEN sift_status sift__trigger_new(sift__trigger **out, const sift__trigger_spec *specs,
                                           size_t n, const sift__trigger_params *params,
                                           const sift_vocab *vocab, const sift__alloc *al,
                                           sift_error *err);

/* Compiles one pattern as a trigger set would (its PCRE2 options; full =
 * anchored at both ends) and throws it away: the configuration's check of
 * a pattern at load. SIFT_OK with *matches_empty (the pattern matches the
 * empty string); SIFT_E_PATTERN_SYNTAX or SIFT_E_PATTERN_LIMIT with
 * PCRE2's message in msg and the pattern offset in *err_off; SIFT_E_NOMEM. */
SIFT__HIDDEN sift_status sift__trigger_check_pattern(const char *text, size_t len, int full,
                                                     const sift__alloc *al, size_t *err_off,
                                                     int *matches_empty, char *msg, size_t msg_cap);
SIFT__HIDDEN void sift__trigger_free(sift__trigger *t);

/* Deep copy (patterns are compiled again for the copy's allocator). */
SIFT__HIDDEN sift_status sift__trigger_clone(const sift__trigger *t, sift__trigger **out,
                                             sift_error *err);

/* Copies the matching state of `src` into `dst`, a clone of the same
 * set (the text held, spans, automaton state, fired, the undo record).
 * Allocates only when dst's buffers are smaller than src's text;
 * SIFT_E_NOMEM then, with dst unchanged. Since 0.2 (speculative
 * verification keeps a shadow copy of a chain in sync with it). */
SIFT__HIDDEN sift_status sift__trigger_copy_state(sift__trigger *dst, const sift__trigger *src,
                                                  sift_error *err);

/* Forgets all text and re-arms the set. Keeps buffers. */
SIFT__HIDDEN void sift__trigger_reset(sift__trigger *t);

/* Feeds one accepted, generated token and its piece bytes[0..n).
 * *fired = 1 when a trigger matched at this token, and then *start is
 * the offset in the generated text (bytes since reset) from which the
 * grammar must receive the text: the start of the first non-empty
 * capture group of the pattern that matched, or else the start of the
 * match (the word, the token). The text runs to the end of this token.
 * When several triggers match at the same token the lowest index wins.
 * Errors leave the set unchanged:
 *   SIFT_E_ARG            NULL t/fired/start, or bytes NULL with n > 0;
 *   SIFT_E_STATE          the set has already fired (reset it first);
 *   SIFT_E_PATTERN_LIMIT  a PCRE2 limit was hit ("trigger 1 exceeded the
 *                         match limit at output byte 51200 ..."; the match
 *                         limit is one budget for the token, spent by all
 *                         the patterns together), or the text
 *                         passed max_text while a PATTERN_FULL trigger is
 *                         alive;
 *   SIFT_E_NOMEM          a buffer could not grow. */
SIFT__HIDDEN sift_status sift__trigger_feed(sift__trigger *t, int32_t token, const char *bytes,
                                            size_t n, int *fired, int64_t *start, sift_error *err);

/* After firing: the index of the trigger that fired, -1 before. */
SIFT__HIDDEN int64_t sift__trigger_fired_index(const sift__trigger *t);

/* After firing: the tokens the grammar must receive, in order. The first
 * one's bytes start at the trigger (a suffix of its piece); the others are
 * whole. A TOKEN trigger replays that token with its whole piece. */
SIFT__HIDDEN size_t sift__trigger_n_replay(const sift__trigger *t);
SIFT__HIDDEN void sift__trigger_replay(const sift__trigger *t, size_t i, int32_t *token,
                                       const char **bytes, size_t *n);

/* Bytes the last feed scanned (automaton bytes + searched window bytes +
 * full-pattern text bytes), a measure of work for tests. */
SIFT__HIDDEN size_t sift__trigger_last_scanned(const sift__trigger *t);

/* PCRE2 steps the last feed took over all its patterns (the per-token
 * budget, params.match_limit, is spent in these units: one automatic
 * callout per pattern item tried), a measure of work for tests. */
SIFT__HIDDEN uint64_t sift__trigger_last_steps(const sift__trigger *t);

/* 1 if trigger i is a pattern that matches the empty string (it fires at
 * the first generated byte; configs warn about it, T-12). */
SIFT__HIDDEN int sift__trigger_matches_empty(const sift__trigger *t, size_t i);

/* The kind of trigger i (i < the number of triggers). */
SIFT__HIDDEN sift__trigger_kind sift__trigger_kind_of(const sift__trigger *t, size_t i);

/* Takes back the last successful sift__trigger_feed (fired or not), as
 * if it had not happened. Only valid right after that feed, before any
 * other feed or reset. Allocates nothing. A lazy grammar feeds a token,
 * then keeps it or takes it back (prepare, or a rejected replay). */
SIFT__HIDDEN void sift__trigger_undo(sift__trigger *t);

/* Rollback history. A lazy grammar commits each feed it keeps
 * (sift__trigger_commit, right after the feed); the set remembers the
 * state before each of the last p.max_history committed feeds, and
 * sift__trigger_rollback(t, k) returns to the state before the k-th last
 * (k <= sift__trigger_history(t)), not fired, as if the k feeds had not
 * happened. The text those states need is kept from compaction, so the
 * buffer holds the text of the history's feeds plus the usual window.
 * Allocates nothing (sized in sift__trigger_new). Reset and copy_state
 * empty the history; clone copies it. */
SIFT__HIDDEN void sift__trigger_commit(sift__trigger *t);
SIFT__HIDDEN size_t sift__trigger_history(const sift__trigger *t);
SIFT__HIDDEN void sift__trigger_rollback(sift__trigger *t, size_t k);

/* A checkpoint for trying several feeds without committing them (a draft
 * of tokens): sift__trigger_checkpoint saves the state (the set must not
 * have fired), any number of feeds follow, and sift__trigger_restore
 * returns to the saved state (not fired). Allocates nothing. */
SIFT__HIDDEN void sift__trigger_checkpoint(sift__trigger *t);
SIFT__HIDDEN void sift__trigger_restore(sift__trigger *t);

/* Digest of the state that decides future results (not buffer layout). */
SIFT__HIDDEN uint64_t sift__trigger_digest(const sift__trigger *t, uint64_t h);

#endif /* SIFT_GRAMMAR_TRIGGER_H */

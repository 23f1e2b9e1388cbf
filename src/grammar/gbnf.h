/*
 * gbnf.h - internal interface of the GBNF grammar module (src/grammar/).
 *
 * The parser (gbnf_parse.c, with its checks in gbnf_check.c) turns GBNF
 * text into a sift__gbnf: a flat, immutable array of elements where
 * every rule is a list of alternatives separated by ALT and closed by
 * END, plus a table of character classes. The matcher (gbnf_match.c, and
 * the files gbnf_match.h lists) runs pushdown stacks over that array and
 * implements the public sift_grammar_* functions; gbnf_stage.c wraps a
 * grammar as a chain stage. Nothing here is API.
 */
#ifndef SIFT_GBNF_H
#define SIFT_GBNF_H

#include "../sift_internal.h"

/* Element types of the compiled form. A position (an index into the
 * element array) that holds END or ALT is the end of an alternative. */
enum {
    SIFT__G_END = 0,   /* end of the rule's last alternative */
    SIFT__G_ALT,       /* end of an alternative, another follows */
    SIFT__G_REF,       /* v = rule id */
    SIFT__G_CHAR,      /* v = one code point */
    SIFT__G_CLASS,     /* v = class index */
    SIFT__G_ANY,       /* any code point */
    SIFT__G_TOKEN,     /* v = token id */
    SIFT__G_TOKEN_NOT, /* any single token but v */
};

typedef struct sift__gelem {
    uint32_t type;
    uint32_t v;
} sift__gelem;

/* A character class: sorted, merged, non-overlapping ranges
 * rng[2*first .. 2*(first+n)) as (lo, hi) pairs, then negated if `neg`.
 * `ascii` is the membership bitmap of code points < 128 with the
 * negation already applied. */
typedef struct sift__gclass {
    uint64_t ascii[2];
    uint32_t first, n;
    uint32_t neg;
} sift__gclass;

typedef struct sift__gbnf {
    sift__gelem *el;
    size_t n_el;
    uint32_t *rule_start; /* per rule: index of its first element */
    uint32_t n_rules;
    sift__gclass *cls;
    uint32_t n_cls;
    uint32_t *rng; /* (lo, hi) pairs */
    size_t n_rng;
    uint32_t root;
} sift__gbnf;

/* Parser limits (docs/grammar.md, "Limits"). */
#define SIFT__GBNF_MAX_NESTING 1000
#define SIFT__GBNF_MAX_REPETITION 2000
#define SIFT__GBNF_MAX_ELEMENTS (1u << 22)

/* Parses text[0..len) into `out` (zeroed by the caller). `root` is the
 * start rule's name (NULL = "root"), `source` the name used in messages,
 * `vocab` resolves token references (NULL: they are errors). On failure
 * `out` owns nothing and err says where. The byte cap is the caller's. */
SIFT__HIDDEN sift_status sift__gbnf_parse(sift__gbnf *out, const char *text, size_t len,
                                          const char *root, const char *source,
                                          const sift_vocab *vocab, const sift__alloc *al,
                                          sift_error *err);
/* As sift__gbnf_parse, with every position of an error (and every one
 * quoted in its message) given by map(user, offset, &line, &col) when map
 * is not NULL (sift_grammar_params.map_position). With needs_vocab not
 * NULL and `vocab` NULL, a token reference is no error: it compiles to a
 * stand-in (token 0) and sets *needs_vocab to 1 (else 0), so the parse
 * goes on and reports the grammar's own errors; such a result is for
 * checking only, never for sampling. */
SIFT__HIDDEN sift_status sift__gbnf_parse_mapped(sift__gbnf *out, const char *text, size_t len,
                                                 const char *root, const char *source,
                                                 const sift_vocab *vocab, const sift__alloc *al,
                                                 void (*map)(void *, size_t, int32_t *, int32_t *),
                                                 void *map_user, int *needs_vocab, sift_error *err);
/* sift_grammar_new; with needs_vocab not NULL and no vocabulary, token
 * references compile to stand-ins as in sift__gbnf_parse_mapped and
 * *needs_vocab says whether there was one. The config checks a grammar
 * at load this way (every other error is found) and leaves the missing
 * vocabulary to the build; it never samples with that grammar. */
SIFT__HIDDEN sift_status sift__grammar_new_ex(sift_grammar **out, const char *text, size_t len,
                                              const sift_vocab *vocab,
                                              const sift_grammar_params *params, int *needs_vocab,
                                              sift_error *err);
SIFT__HIDDEN void sift__gbnf_free(sift__gbnf *g, const sift__alloc *al);

/* True if code point c is in class k. */
SIFT__HIDDEN int sift__gclass_has(const sift__gbnf *g, const sift__gclass *k, uint32_t c);
/* True if some code point of [lo, hi] is in class k. */
SIFT__HIDDEN int sift__gclass_meets(const sift__gbnf *g, const sift__gclass *k, uint32_t lo,
                                    uint32_t hi);

/* ------------------------------------------------------------------ */
/* Hooks for the chain (check mode, all-or-nothing accept)              */
/* ------------------------------------------------------------------ */

/* The grammar a "grammar" stage holds, or NULL if `st` is another stage. */
SIFT__HIDDEN sift_grammar *sift__grammar_of_stage(sift__stage *st);

/* Bans, in the candidate array `a`, every token the grammar rejects now
 * (sets its logit to -inf; nothing is removed). SIFT_E_GRAMMAR_DEAD if no
 * candidate with a finite logit is left (then `a` is unchanged). */
SIFT__HIDDEN sift_status sift__grammar_ban_arr(sift_grammar *g, sift__arr *a, sift_error *err);

/* Makes a later accept of `token` unable to fail: checks the token
 * (SIFT_E_GRAMMAR_REJECT, SIFT_E_GRAMMAR_LIMIT, SIFT_E_NOMEM) and caches
 * every transition the accept will follow. Changes no matching state. A
 * chain calls it on every grammar stage before calling the stages'
 * accept, so that a rejected token leaves the whole chain unchanged. */
SIFT__HIDDEN sift_status sift__grammar_prepare_accept(sift_grammar *g, int32_t token,
                                                      sift_error *err);

/* The most allowed tokens sift__grammar_small_set lists. */
#define SIFT__GRAMMAR_SMALL 32

/* The tokens the grammar allows now, when there are at most
 * SIFT__GRAMMAR_SMALL of them: *ids (ascending, valid until the grammar
 * next changes) and their count, possibly 0. SIZE_MAX (and *ids = NULL)
 * when there are more, when the grammar constrains nothing yet (a lazy
 * grammar that has not triggered), in states with token elements, or
 * when the matcher hits a limit. Changes no matching state (the matcher
 * caches may grow); the answer is cached per state. */
SIFT__HIDDEN size_t sift__grammar_small_set(sift_grammar *g, const int32_t **ids);
/* Computes and caches the answer sift__grammar_small_set gives in the
 * current state, reporting what that call cannot: SIFT_E_NOMEM or
 * SIFT_E_GRAMMAR_LIMIT when the walk fails (nothing is cached then).
 * The chain calls it before a step that asks for extras, so that an
 * allocation failure is the step's SIFT_E_NOMEM, not a shorter list. */
SIFT__HIDDEN sift_status sift__grammar_small_prepare(sift_grammar *g, sift_error *err);

/* Units of work the grammar's last call charged to its budget
 * (max_step_work): tests bound work with it instead of time. */
SIFT__HIDDEN int64_t sift__grammar_last_work(const sift_grammar *g);

/* Size of the grammar's vocabulary (0 = none). */
SIFT__HIDDEN int32_t sift__grammar_n_vocab(const sift_grammar *g);

/* Ownership by a chain: 1 once sift__grammar_set_owned was called (the
 * chain took it, as a stage or as its check grammar); a grammar is freed
 * with its owner, so it is owned at most once. */
SIFT__HIDDEN int sift__grammar_owned(const sift_grammar *g);
SIFT__HIDDEN void sift__grammar_set_owned(sift_grammar *g);

/* Sets the cache sizes past which the matcher rebuilds its caches (tests
 * use small values to exercise the rebuild). */
SIFT__HIDDEN void sift__grammar_set_soft_limits(sift_grammar *g, uint32_t nodes, uint32_t states,
                                                uint32_t arena);

/* Sets the byte budget of the grammar's mask cache (0 = no cache; the
 * default is SIFT__MASK_CACHE_BYTES) and empties it; tests compare the
 * cached masks with the computed ones. */
SIFT__HIDDEN void sift__grammar_set_mask_cache(sift_grammar *g, size_t bytes);
/* The mask cache's hits and misses since the grammar was made. */
SIFT__HIDDEN void sift__grammar_mask_stats(const sift_grammar *g, uint64_t *hits, uint64_t *misses);
/* Turns the loop-signature and counted paths of the mask (gbnf_mask.c)
 * on or off (on by default; tests compare both), and the signatures'
 * builds and reuses since the grammar was made. */
SIFT__HIDDEN void sift__grammar_set_sig(sift_grammar *g, int on);
SIFT__HIDDEN void sift__grammar_sig_stats(const sift_grammar *g, uint64_t *hits, uint64_t *builds);
/* The masks the counted path computed, and its builds of depth masks,
 * since the grammar was made. */
SIFT__HIDDEN void sift__grammar_cnt_stats(const sift_grammar *g, uint64_t *masks, uint64_t *builds);
/* Default byte budget of a grammar's mask cache: 2 MiB, about 160 states
 * of cl100k (12.5 KiB a mask), 80 of o200k. */
#define SIFT__MASK_CACHE_BYTES ((size_t)2 << 20)

/* Puts `g`, a clone of `from` (the same compiled grammar), in from's
 * matching state: stacks, pending UTF-8, output tail, lazy trigger
 * state. Its caches keep what they learned, so once they hold from's
 * states the copy allocates nothing new. SIFT_E_ARG for grammars that
 * are not clones of one another, SIFT_E_NOMEM, SIFT_E_GRAMMAR_LIMIT (the
 * state is beyond the work budget); `g` may then be half copied. */
SIFT__HIDDEN sift_status sift__grammar_sync(sift_grammar *g, const sift_grammar *from,
                                            sift_error *err);

/* Digest of the matching state (stacks and pending UTF-8), independent
 * of cache layout: two grammars in the same state digest equal. */
SIFT__HIDDEN uint64_t sift__grammar_digest(const sift_grammar *g, uint64_t h);

/* Digest of everything a grammar's future results depend on: the
 * matching state (sift__grammar_digest, with the terminated flag and the
 * lazy trigger state) and the output counters messages quote. A grammar
 * rolled back to a point digests as a fresh one fed the same accepts. */
SIFT__HIDDEN uint64_t sift__grammar_state_digest(const sift_grammar *g);

#endif /* SIFT_GBNF_H */

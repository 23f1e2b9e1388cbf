/*
 * vocab.h - the vocabulary's internals, shared by the files of src/vocab/
 * (the object, its file loaders, the BPE encoder) and, for the shared
 * token index only, by src/grammar/.
 *
 * The public side (sift_vocab_*) is in include/sift.h; the samplers use
 * only that (size, attribute bits, pieces), never this header.
 */
#ifndef SIFT_VOCAB_H
#define SIFT_VOCAB_H

#include "../sift_internal.h"

/* ------------------------------------------------------------------ */
/* Vocabulary builders (vocab.c), for the file loaders                 */
/* ------------------------------------------------------------------ */

/* Wraps arrays the caller built with `al` into a vocabulary of n tokens
 * (1 <= n <= SIFT_DEFAULT_MAX_VOCAB): off[0..n] ascending offsets into
 * `bytes` (off[0] = 0), attr[0..n) SIFT_TOKEN_* bits. Takes ownership of
 * the three arrays in every case: on SIFT_E_NOMEM they are freed. */
SIFT__HIDDEN sift_status sift__vocab_adopt(sift_vocab **out, const sift__alloc *al, int32_t n,
                                           uint64_t *off, char *bytes, uint8_t *attr,
                                           sift_error *err);

/* ------------------------------------------------------------------ */
/* The vocabulary's shared index (vocab.c holds it, grammar/ builds it) */
/* ------------------------------------------------------------------ */

/* The head of a structure built once per vocabulary and shared read-only
 * by every grammar and thread (the grammar module's token index). The
 * vocabulary holds one reference, every user one more; the last
 * sift__vocab_index_unref calls `release`, which frees the whole
 * structure. vocab/ knows only this head, so it depends on no grammar. */
typedef struct sift__vocab_index {
    atomic_size_t refs;
    void (*release)(struct sift__vocab_index *x);
} sift__vocab_index;

/* The index published on v with one more reference for the caller, or
 * NULL when none is (yet, or since sift_vocab_set_attr changed a bit). */
SIFT__HIDDEN sift__vocab_index *sift__vocab_index_get(const sift_vocab *v);
/* Publishes x (built by the caller, x->refs = 1: the caller's reference)
 * on v unless another thread published one first (a compare-exchange):
 * returns the index that stands, with a reference for the caller; when x
 * lost, the caller's reference to x is dropped (freeing it). */
SIFT__HIDDEN sift__vocab_index *sift__vocab_index_publish(const sift_vocab *v,
                                                          sift__vocab_index *x);
/* Drops a reference; the last one releases. NULL is a no-op. */
SIFT__HIDDEN void sift__vocab_index_unref(sift__vocab_index *x);
/* The vocabulary's allocator (the index is allocated with it, so that it
 * may outlive the grammar that built it). */
SIFT__HIDDEN const sift__alloc *sift__vocab_alloc(const sift_vocab *v);

/* ------------------------------------------------------------------ */
/* BPE encoding of a vocabulary (bpe.c)                                */
/* ------------------------------------------------------------------ */

/* What a vocabulary knows about encoding text: its pre-tokenizer (kind,
 * custom pattern) and the encoder built from it, built on first use and
 * published once (an atomic compare-and-swap, so a const vocabulary
 * shared by threads builds it safely). Opaque outside bpe.c; vocab.c
 * holds one slot per vocabulary (NULL = no pre-tokenizer). */
typedef struct sift__bpe_slot sift__bpe_slot;

/* Frees a slot (NULL is a no-op). */
SIFT__HIDDEN void sift__bpe_slot_free(sift__bpe_slot *slot, const sift__alloc *al);
/* A new slot with the same pre-tokenizer (not the built encoder) in
 * *dst (NULL when src is NULL); SIFT_E_NOMEM. */
SIFT__HIDDEN sift_status sift__bpe_slot_copy(sift__bpe_slot **dst, const sift__bpe_slot *src,
                                             const sift__alloc *al, sift_error *err);
/* Drops the built encoder (the attributes it indexed changed). */
SIFT__HIDDEN void sift__bpe_slot_invalidate(sift__bpe_slot *slot, const sift__alloc *al);

/* The default pre-tokenizer of a tiktoken file of n ranks: cl100k for
 * 100,256, o200k for 199,998, none otherwise. SIFT_E_NOMEM. */
SIFT__HIDDEN sift_status sift__bpe_default_tiktoken(sift_vocab *v, sift_error *err);

/* What a GGUF file says about encoding (vocab_gguf.c reads it): the
 * pre-tokenizer its `tokenizer.ggml.pre` names (NONE when sift has none
 * for it; `why` then says so to sift_vocab_encode), Llama 3's
 * ignore_merges, the merges as byte strings (merge k: left piece
 * bytes[off[2k], off[2k+1]), right piece bytes[off[2k+1], off[2k+2])),
 * and the ids of the user-defined tokens. */
typedef struct sift__bpe_gguf {
    sift_pretokenizer kind;
    int ignore_merges;
    const char *why;
    size_t n_merges;
    const uint64_t *off; /* 2 n_merges + 1 */
    const char *bytes;
    const int32_t *user;
    size_t n_user;
} sift__bpe_gguf;

/* Gives v (tokens and attributes loaded) the encoder of a GGUF file: the
 * merges are resolved to ids through the index of v's tokens, and the
 * encoder is built now unless kind is NONE or v lacks a token for some
 * byte (then encoding fails with SIFT_E_STATE naming the byte).
 * SIFT_E_ARG when merge *bad_merge names a piece that is not a token
 * (*bad_part: 0 the left piece, 1 the right, 2 the two together);
 * SIFT_E_NOMEM. On failure v is unchanged. */
SIFT__HIDDEN sift_status sift__bpe_set_gguf(sift_vocab *v, const sift__bpe_gguf *g,
                                            size_t *bad_merge, int *bad_part, sift_error *err);

/* Accessors vocab.c gives bpe.c. The slot is replaced only through calls
 * that take a non-const vocabulary; _set frees the old one. */
SIFT__HIDDEN sift__bpe_slot *sift__vocab_bpe(const sift_vocab *v);
/* The moves the automaton of the special texts made in encodes with
 * this scratch, summed (tests check them against the text's length). */
SIFT__HIDDEN uint64_t sift__encode_scratch_cut_steps(const sift_encode_scratch *s);
SIFT__HIDDEN void sift__vocab_set_bpe(sift_vocab *v, sift__bpe_slot *slot);
SIFT__HIDDEN void sift__vocab_arrays(const sift_vocab *v, const uint64_t **off, const char **bytes,
                                     const uint8_t **attr, const sift__alloc **al);

#endif /* SIFT_VOCAB_H */

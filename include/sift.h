/*
 * sift.h - exact LLM token sampling, the whole public API.
 *
 * sift turns a row of logits into the next token through a configurable
 * chain of samplers (logit bias, penalties, DRY, top-k, top-p, min-p,
 * typical, XTC, top-n-sigma, epsilon, eta, temperature, mirostat,
 * adaptive-p, greedy, dist, and the bans of min_tokens, allowed_tokens,
 * no_repeat_ngram and bad_words).
 *
 * Usage walkthrough
 * -----------------
 *
 *     sift_chain_params params;
 *     sift_chain_params_init(&params);
 *     params.seed = 42;
 *
 *     sift_chain *chain;
 *     sift_error err;
 *     if (sift_chain_new(&chain, &params, &err) != SIFT_OK) { report(&err); }
 *     sift_chain_add_penalties(chain, 64, 1.1f, 0.0f, 0.0f, &err);
 *     sift_chain_add_top_k(chain, 40, &err);
 *     sift_chain_add_top_p(chain, 0.95f, 1, &err);
 *     sift_chain_add_min_p(chain, 0.05f, 1, &err);
 *     sift_chain_add_temp(chain, 0.8f, &err);
 *     sift_chain_add_dist(chain, &err);
 *
 *     for (;;) {
 *         const float *row = model_logits(...);   // n_vocab floats
 *         int32_t tok;
 *         if (sift_chain_sample(chain, row, n_vocab, &tok, &err)) break;
 *         if (sift_chain_accept(chain, tok, &err)) break;
 *         ...
 *     }
 *     sift_chain_free(chain);
 *
 * Contract
 * --------
 * - A step is sample (reads the row, draws from the chain's RNG, changes
 *   nothing else) followed by accept (updates every piece of state:
 *   penalty and DRY history, mirostat's mu).
 * - Every fallible function returns a sift_status (0 = SIFT_OK) and, when
 *   given a non-NULL sift_error, fills it on failure. A failed call
 *   changes nothing: the RNG, the history and every other piece of state
 *   are as they were, and the chain stays usable.
 * - No function aborts, prints or exits. No function allocates per sampled
 *   token once the first step has sized the chain's buffers.
 * - Every (pointer, length) pair accepts (NULL, 0) and treats it exactly
 *   as a valid pointer with length 0 (no byte is read or written).
 * - A function that takes ownership of an object (sift_chain_add_grammar,
 *   sift_chain_set_check_grammar, sift_chain_add_custom's `user`) takes
 *   it on success only, and refuses (SIFT_E_ARG) an object a chain
 *   already owns.
 *
 * Callbacks and re-entrancy
 * -------------------------
 * sift calls caller code from inside its calls: the row hook
 * (sift_row_hook) and the positional hook (sift_row_hook_at), a custom
 * stage's apply, accept, reset, clone and free, and a chain's allocator
 * (sift_allocator). While that code runs, the objects of the call in
 * progress are *busy*:
 * - a chain, for the whole of each call that takes it and may run caller
 *   code: sample, sample_slice, accept, accept_prompt, distribution,
 *   distribution_slice, survivors, extras, verify, set_check_grammar,
 *   reset, free and sift_verifier_new; and for the whole of each call
 *   into its own allocator, whichever function allocates on its behalf
 *   (the _add functions included);
 * - every chain of sift_chains_sample, for the whole batch (every slot,
 *   not only the one whose callback runs);
 * - a verifier and its chain (every one of sift_verifiers_plan), for the
 *   whole of sift_verifier_plan, sift_verifiers_plan and
 *   sift_verifier_distributions (which holds its chain though it takes it
 *   const: the chain's row hook runs inside it).
 * Every public function given a busy chain or verifier returns
 * SIFT_E_STATE before it reads or writes anything (a failed call changes
 * nothing; a slot of sift_chains_sample whose chain is busy gets
 * SIFT_E_STATE and the other slots run), except:
 * - sift_chain_free, sift_chain_reset and sift_verifier_free, which
 *   return nothing: on a busy object they do nothing;
 * - sift_chain_n_stages, sift_chain_stage_name, sift_chain_stage_class and
 *   sift_chain_stats, which only read and are safe: they report the chain
 *   as it is at that moment (inside sift_chain_free, a chain without
 *   stages).
 * Functions that take a `const sift_chain *` and run caller code
 * (sift_chain_clone: a custom stage's clone, the allocator) refuse a
 * busy chain but do not make it busy, since many threads may call them
 * on one chain at once (see Threads): their callbacks must not change
 * the chain, as no other thread may while they run. The other objects
 * (vocabularies, grammars, configs, slicers, encode scratches) are never
 * busy and their functions do not check: an allocator given to one of
 * them must not call back into that object, and a grammar a chain owns
 * is the chain's (the caller does not call it). A grammar's
 * map_position and a JSON Schema conversion's warn run before the object
 * they build exists, and may call anything.
 *
 * Threads
 * -------
 * sift has no global mutable state. A chain is used by one thread at a
 * time; different chains may be used on different threads at once.
 * Functions that take a `const sift_chain *` (clone, describe, count) only
 * read, so many threads may call them on one chain that nobody is mutating.
 * sift_chain_extras takes a non-const chain: with a grammar stage it
 * updates the grammar's caches, so it is a use of the chain like a sample.
 * sift_verifier_distributions takes a const chain but runs its row hook
 * and makes it busy (see above): it too is a use of the chain like a
 * sample.
 * A vocabulary that nobody mutates may be read by many threads at once,
 * and grammars may be built from it on many threads at once (the first
 * ones build its shared token index; the others use it).
 * A workspace (sift_workspace, shared scratch) serves one call at a
 * time: a call whose chain's workspace is in use by another call, on
 * any thread, fails with SIFT_E_STATE and changes nothing.
 *
 * ABI
 * ---
 * Handles are opaque. Every struct the caller allocates and sift reads or
 * writes (the params structs, sift_allocator, sift_dry_params, sift_plan,
 * sift_plan_stage, sift_stats, sift_batch_k, sift_logprobs) starts with
 * `uint32_t struct_size`: the size of the struct as the caller compiled
 * it, set by its _init function or by hand
 * (`plan.struct_size = sizeof plan;`). sift reads and writes only the
 * first struct_size bytes: fields past them take their defaults (inputs)
 * or are left untouched (outputs), so a caller built against an older,
 * smaller layout keeps working when fields are added at the end.
 * struct_size 0 (not set) or larger than the struct this library knows
 * (a header newer than the library) is SIFT_E_ARG. sift never writes
 * struct_size. The custom-stage vtable is versioned by abi_version
 * instead, which names its layout. Fixed for a major version, never grown:
 * sift_error (every call takes one, NULL allowed: a fixed size needs no
 * setup) and the plain element types of arrays and views (sift_candidate,
 * sift_token_prob, sift_bias, sift_slice, sift_logprob), whose size is
 * the stride of arrays callers pass: a new input of a slice step never
 * becomes a sift_slice field but comes in the struct of the call that
 * reads it, as the row's log-sum-exp comes in sift_logprobs. Structs
 * sift allocates and returns by pointer (sift_diagnostic,
 * sift_config_grammar) may grow at the end. Status
 * numbers are fixed and never renumbered. Only symbols prefixed `sift_`
 * are exported. SIFT_VERSION_* give the version compiled against;
 * sift_version_number() the version linked at run time. docs/api.md,
 * "ABI policy", says what a minor release may change.
 */
#ifndef SIFT_H
#define SIFT_H

#include <stddef.h>
#include <stdint.h>

#include "sift_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(SIFT_BUILDING)
#define SIFT_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define SIFT_API __attribute__((visibility("default")))
#else
#define SIFT_API
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SIFT_NODISCARD __attribute__((warn_unused_result))
#else
#define SIFT_NODISCARD
#endif

/* ------------------------------------------------------------------ */
/* Version                                                             */
/* ------------------------------------------------------------------ */

/**
 * Returns the version of the linked library as
 * MAJOR * 10000 + MINOR * 100 + PATCH; equals SIFT_VERSION_NUMBER when
 * the headers and the library match.
 * Since: 0.1.
 */
SIFT_API uint32_t sift_version_number(void);

/**
 * Returns the version of the linked library as a static "MAJOR.MINOR.PATCH"
 * string; never NULL.
 * Since: 0.1.
 */
SIFT_API const char *sift_version(void);

/* ------------------------------------------------------------------ */
/* Status codes and the error detail                                   */
/* ------------------------------------------------------------------ */

/**
 * Status of a call. 0 is success; every other value is an error of a
 * family (tens digit). The numbers are part of the ABI and never change.
 */
typedef enum sift_status {
    SIFT_OK = 0,
    /* General. */
    SIFT_E_ARG = 1,   /**< An argument is NULL, out of range or malformed. */
    SIFT_E_NOMEM = 2, /**< The allocator returned NULL. */
    SIFT_E_LIMIT = 3, /**< A size limit (vocabulary, history, stages) was hit. */
    SIFT_E_STATE = 4, /**< The object is busy (re-entrant call) or in the wrong state. */
    SIFT_E_IO = 5,    /**< A file could not be read. */
    SIFT_E_TOKEN = 6, /**< A token id is outside [0, V). */
    /* Rows and candidates. */
    SIFT_E_ROW_VALUE = 10,    /**< NaN or +inf in a row, or produced by a stage. */
    SIFT_E_NO_CANDIDATE = 11, /**< Every token is banned (-inf). */
    /* Slices (top-k input). */
    SIFT_E_SLICE = 20,    /**< A slice is malformed. */
    SIFT_E_NEED_ROW = 21, /**< The slice cannot decide this step; nothing changed. */
    SIFT_E_HOOK = 22,     /**< The row hook failed or returned an inconsistent row. */
    /** A cross-check found that a slice was not the row's top k, or that
     * its token was not the whole row's (sift_chain_set_cross_check);
     * nothing changed. Since: 0.2. */
    SIFT_E_SLICE_MISMATCH = 23,
    /* Grammars. */
    SIFT_E_GRAMMAR_SYNTAX = 30,
    SIFT_E_GRAMMAR_UNDEFINED = 31,
    SIFT_E_GRAMMAR_LEFT_RECURSION = 32,
    SIFT_E_GRAMMAR_LIMIT = 33,
    SIFT_E_GRAMMAR_DEAD = 34,
    SIFT_E_GRAMMAR_REJECT = 35,
    /* Trigger patterns (PCRE2). */
    SIFT_E_PATTERN_SYNTAX = 40,
    SIFT_E_PATTERN_LIMIT = 41,
    /* Configuration files. */
    SIFT_E_CONFIG_SYNTAX = 50,
    SIFT_E_CONFIG_TYPE = 51,
    SIFT_E_CONFIG_KEY = 52,
    SIFT_E_CONFIG_VALUE = 53,
    SIFT_E_CONFIG_LIMIT = 54,
    /* JSON Schemas. */
    SIFT_E_SCHEMA_SYNTAX = 60,      /**< The schema is not JSON or not a valid schema. */
    SIFT_E_SCHEMA_UNSUPPORTED = 61, /**< The schema uses a keyword or form sift does not support. */
    SIFT_E_SCHEMA_LIMIT = 62        /**< The schema's grammar would exceed a size or work limit. */
} sift_status;

/**
 * Returns a short static description of a status ("invalid argument"),
 * or "unknown status" for a number sift does not define. Never NULL.
 * Since: 0.1.
 */
SIFT_API const char *sift_status_str(sift_status status);

/** Capacity of sift_error.message, terminating NUL included. */
#define SIFT_ERROR_MESSAGE_MAX 256
/** Capacity of sift_error.source, terminating NUL included. */
#define SIFT_ERROR_SOURCE_MAX 128

/**
 * Details of a failure. Caller-owned and fixed-size; sift never allocates
 * for it. Every function that takes a `sift_error *` accepts NULL. On
 * failure the struct is filled completely: fields that do not apply are
 * 0 (line, column) or -1 (offset, index). On success it is not touched.
 * Messages are truncated at a UTF-8 boundary and always NUL-terminated.
 */
typedef struct sift_error {
    sift_status code; /**< Same value as the function returned. */
    int32_t line;     /**< 1-based line in `source`, 0 if none. */
    int32_t column;   /**< 1-based column (code points), 0 if none. */
    int64_t offset;   /**< Byte offset in `source`, -1 if none. */
    int64_t index;    /**< Token id, row index or stage index the message names, -1 if none. */
    char source[SIFT_ERROR_SOURCE_MAX];   /**< File or object name, "" if none. */
    char message[SIFT_ERROR_MESSAGE_MAX]; /**< One line, no trailing newline. */
} sift_error;

/* ------------------------------------------------------------------ */
/* Allocation                                                          */
/* ------------------------------------------------------------------ */

/**
 * A custom allocator. `alloc` returns memory aligned for any object type
 * (max_align_t) or NULL; `free` releases what `alloc` returned and accepts
 * NULL. `user` is passed back unchanged. `realloc` (optional, since 0.2)
 * resizes a block `alloc` or `realloc` returned from `old_size` to
 * `new_size` bytes (both > 0), keeping the first min(old, new) bytes, and
 * returns the new block, or NULL with the old block still valid; with
 * `realloc` NULL, sift grows a block by alloc, copy and free. An object
 * created with an allocator does every allocation of its life through
 * it, including the ones of objects cloned from it.
 *
 * Set struct_size to sizeof(sift_allocator) (since 0.2; see "ABI" above):
 *
 *     sift_allocator al = {sizeof(sift_allocator), my_alloc, my_free, ctx, NULL};
 *
 * A function given an allocator whose struct_size is 0 or too large, or
 * that has `alloc` or `free` but not both, fails with SIFT_E_ARG.
 */
typedef struct sift_allocator {
    uint32_t struct_size; /**< sizeof(sift_allocator). Since: 0.2. */
    void *(*alloc)(void *user, size_t size);
    void (*free)(void *user, void *ptr);
    void *user;
    /** NULL = alloc + copy + free. Since: 0.2. */
    void *(*realloc)(void *user, void *ptr, size_t old_size, size_t new_size);
} sift_allocator;

/* ------------------------------------------------------------------ */
/* Candidates and capability classes                                   */
/* ------------------------------------------------------------------ */

/** One candidate token: its id and its current logit (-inf = banned). */
typedef struct sift_candidate {
    int32_t id;
    float logit;
} sift_candidate;

/** A token of a final distribution, as sift_chain_distribution reports it. */
typedef struct sift_token_prob {
    int32_t id;  /**< Token id. */
    float logit; /**< Logit after every stage before the selector. */
    double p;    /**< Probability the selector gives it (0 <= p <= 1). */
} sift_token_prob;

/**
 * How a stage relates to the order of the row; the analyzer reads it.
 * See docs/analyzer.md for the rules.
 */
typedef enum sift_class {
    SIFT_CLASS_WHOLE = 0,    /**< Reads the whole distribution (default). */
    SIFT_CLASS_IDENTITY = 1, /**< Changes nothing. */
    SIFT_CLASS_LOWERS = 2,   /**< Lowers at most n logits, raises none. */
    SIFT_CLASS_RAISES = 3,   /**< May raise the logits of known ids. */
    SIFT_CLASS_MONOTONE = 4, /**< Keeps the order up to rounding ties. */
    SIFT_CLASS_TOP = 5,      /**< Keeps a canonical prefix of at most K. */
    SIFT_CLASS_THRESHOLD = 6 /**< Keeps a prefix decided by a logit threshold. */
    /* A new class goes last, with its rules in src/core/class.c. */
} sift_class;

/** Returns "whole", "identity", ... for a class; never NULL. Since: 0.1. */
SIFT_API const char *sift_class_str(sift_class cls);

/* ------------------------------------------------------------------ */
/* Vocabulary                                                          */
/* ------------------------------------------------------------------ */

/** A vocabulary: token id -> bytes, plus end-of-generation ids. */
typedef struct sift_vocab sift_vocab;

/**
 * Creates a vocabulary of `n_tokens` tokens from their byte strings.
 * `pieces[i]` points to `lengths[i]` bytes (any bytes, not NUL-terminated;
 * NULL is allowed when the length is 0). The bytes are copied.
 * `allocator` may be NULL (malloc/free).
 * Returns SIFT_E_ARG for NULL pointers or n_tokens < 1, SIFT_E_LIMIT if
 * n_tokens exceeds 2^24, SIFT_E_NOMEM. On failure *out is NULL.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_new(sift_vocab **out, int32_t n_tokens,
                                                   const char *const *pieces, const size_t *lengths,
                                                   const sift_allocator *allocator,
                                                   sift_error *err);

/** Frees a vocabulary; NULL is a no-op. Since: 0.1. */
SIFT_API void sift_vocab_free(sift_vocab *vocab);

/** Returns the number of tokens, or 0 for NULL. Since: 0.1. */
SIFT_API int32_t sift_vocab_size(const sift_vocab *vocab);

/**
 * Gives the bytes of token `id` (not NUL-terminated, valid as long as the
 * vocabulary lives). SIFT_E_ARG for NULL pointers, SIFT_E_TOKEN if `id` is
 * outside [0, size). Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_piece(const sift_vocab *vocab, int32_t id,
                                                     const char **bytes, size_t *length,
                                                     sift_error *err);

/** Token attribute bits (sift_vocab_set_attr, sift_vocab_attr). */
enum {
    SIFT_TOKEN_EOG = 1u << 0,     /**< Ends generation (<eos>, <eot>, <|im_end|>...). */
    SIFT_TOKEN_SPECIAL = 1u << 1, /**< A control token; its text is not generated text. */
    SIFT_TOKEN_UNUSED = 1u << 2,  /**< An id the tokenizer never produces. */
    SIFT_TOKEN_ATTR_ALL = 7u      /**< Every defined bit. */
};

/**
 * Sets the attribute bits of token `id` (an OR of SIFT_TOKEN_*), replacing
 * the previous ones; a new vocabulary has 0 everywhere. Call it before the
 * vocabulary is shared (a grammar or chain reads the bits): not while
 * another thread uses the vocabulary. A grammar built earlier keeps the
 * bits it was built with; grammars built afterwards see the new ones.
 * SIFT_E_ARG for NULL or undefined bits, SIFT_E_TOKEN for an id outside
 * [0, size). Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_set_attr(sift_vocab *vocab, int32_t id,
                                                        uint32_t attr, sift_error *err);

/** Returns the attribute bits of token `id`; 0 for NULL or an id out of range. Since: 0.1. */
SIFT_API uint32_t sift_vocab_attr(const sift_vocab *vocab, int32_t id);

/* ------------------------------------------------------------------ */
/* Vocabulary files (tiktoken, GGUF, tokenizer.json)                   */
/* ------------------------------------------------------------------ */

/**
 * Loads a vocabulary from a tiktoken rank file (cl100k_base.tiktoken,
 * o200k_base.tiktoken): one `base64(bytes) SP rank` line per token, the
 * rank being the token id. The vocabulary has max rank + 1 tokens; an id
 * no line names is an unused token (empty piece, SIFT_TOKEN_UNUSED).
 * Special tokens (<|endoftext|>...) are not in such files. A final
 * newline and CRLF line ends are accepted. docs/vocab.md has the details.
 * A file of 100,256 ranks gets the cl100k pre-tokenizer, one of 199,998
 * ranks the o200k one, others none (see sift_vocab_set_pretokenizer;
 * since 0.2).
 *
 * `path` is read whole (it must be a regular file of at most 256 MiB).
 * `allocator` may be NULL (malloc/free); the vocabulary keeps a copy.
 * Errors name the place as "path:line:col: message" and fill err->line,
 * column (bytes, 1-based), offset, index and source:
 * - SIFT_E_ARG: NULL `out` or `path`; an empty file; a line without a
 *   space and a rank, an empty line, bad base64 (a character outside the
 *   alphabet, a length not a multiple of 4, misplaced '='), a rank that is
 *   not a decimal number, a duplicate rank (err->index = the rank);
 * - SIFT_E_LIMIT: a line over 4096 bytes, a rank >= 2^24, more unused ids
 *   than lines + 65536, a file over 256 MiB;
 * - SIFT_E_IO: the file cannot be opened or read, or is not a regular
 *   file (a directory, a FIFO: never blocks);
 * - SIFT_E_NOMEM.
 * On failure *out is NULL. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_load_tiktoken(sift_vocab **out, const char *path,
                                                             const sift_allocator *allocator,
                                                             sift_error *err);

/**
 * As sift_vocab_load_tiktoken, from `len` bytes at `data` (not
 * NUL-terminated; read only during the call). Messages name the source
 * "<memory>". SIFT_E_ARG also for NULL `data` with len > 0; SIFT_E_LIMIT
 * for len over 256 MiB. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_from_tiktoken(sift_vocab **out, const char *data,
                                                             size_t len,
                                                             const sift_allocator *allocator,
                                                             sift_error *err);

/**
 * Loads the vocabulary of a GGUF model file (versions 2 and 3, little
 * endian) from its tokenizer metadata, without reading tensor infos or
 * weights: the file is read up to the end of its key/value section.
 *
 * Reads `tokenizer.ggml.model` ("gpt2": byte-level BPE, pieces such as
 * "Ġthe" decoded through the GPT-2 byte table; "llama": SentencePiece,
 * "▁" becomes a space and byte tokens "<0xHH>" the byte HH),
 * `tokenizer.ggml.tokens`, `tokenizer.ggml.token_type` (control and
 * unknown tokens get SIFT_TOKEN_SPECIAL and keep their text, unused ones
 * SIFT_TOKEN_UNUSED) and `tokenizer.ggml.{eos,eot,eom}_token_id`
 * (SIFT_TOKEN_EOG; so do control tokens whose text is a well-known end of
 * turn, listed in docs/vocab.md). Every other key is skipped by type.
 *
 * Since 0.2, a gpt2 file with `tokenizer.ggml.merges` gets an encoder
 * (sift_vocab_encode; docs/encoding.md): merges rank pairs of tokens as
 * in Hugging Face's BPE, and `tokenizer.ggml.pre` names the
 * pre-tokenizer: "llama-bpe", "llama3", "llama-v3" (SIFT_PRETOK_CL100K,
 * a pre-token that is a token taken whole), "qwen2" (SIFT_PRETOK_QWEN2),
 * "gpt-2" (SIFT_PRETOK_GPT2). Another name, no `pre` key, or no token for
 * some byte loads the vocabulary without a pre-tokenizer, and
 * sift_vocab_encode says why (SIFT_E_STATE). User-defined tokens (type 4)
 * are then cut out of any text before it is pre-tokenized.
 *
 * Every count and length is checked against the bytes left in the file
 * before anything is allocated, so a hostile file cannot make sift
 * allocate much more than its own size. Errors name the source, the byte
 * offset and the key ("model.gguf: offset 24: key 'tokenizer.ggml.tokens':
 * ...") and fill err->offset and source (err->index = the token id for
 * errors about one token):
 * - SIFT_E_ARG: NULL `out` or `path`; bad magic; a version other than 2
 *   or 3 (or big endian); a file that ends inside a field; a length or
 *   count larger than the bytes left; an unknown value type, an array of
 *   arrays; a key of the wrong type; a duplicate tokenizer key; no tokens
 *   or no model key; an unsupported model; a token type outside 1..6 or a
 *   count that differs from the tokens'; a byte token that is not
 *   "<0xHH>"; a gpt2 piece that is not byte-level text; an EOG id out of
 *   range or negative (other than -1, "none"); a key that is not
 *   printable ASCII (bytes of the file are escaped in messages); in a
 *   gpt2 file, a merge that is not two non-empty byte-level pieces around
 *   one space, or whose pieces, or the two together, are not tokens
 *   (err->index = the merge index; since 0.2);
 * - SIFT_E_LIMIT: more than 2^24 tokens, a key over 65535 bytes, a piece
 *   over 1 MiB, pieces over 1 GiB in total, more than 2^26 merges;
 * - SIFT_E_IO: the file cannot be opened or read, or is not a regular file;
 * - SIFT_E_NOMEM.
 * On failure *out is NULL. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_load_gguf(sift_vocab **out, const char *path,
                                                         const sift_allocator *allocator,
                                                         sift_error *err);

/**
 * As sift_vocab_load_gguf, from `len` bytes at `data` (the whole file or
 * any prefix that holds its key/value section; read only during the
 * call). Messages name the source "<memory>". SIFT_E_ARG also for NULL
 * `data` with len > 0. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_from_gguf(sift_vocab **out, const void *data,
                                                         size_t len,
                                                         const sift_allocator *allocator,
                                                         sift_error *err);

/**
 * Loads the vocabulary of a Hugging Face `tokenizer.json` (docs/vocab.md,
 * "tokenizer.json files"), and optionally the end-of-generation tokens of
 * a second file, `generation_config.json` or `tokenizer_config.json`
 * (`config_path`, NULL = none).
 *
 * Reads `/model/vocab` (BPE: {piece: id}; Unigram: [[piece, score]...],
 * the index being the id), `/model/type` ("BPE" or absent, or "Unigram"),
 * `/model/byte_fallback` and `/added_tokens` ({id, content, special}: the
 * piece is the content as written, renaming a vocabulary id if both name
 * it; special = true gives SIFT_TOKEN_SPECIAL). The pieces of the model's
 * vocabulary are decoded to the bytes the model emits by the encoding the
 * `/decoder` or `/pre_tokenizer` names: ByteLevel (GPT-2's byte table:
 * Qwen, Llama 3, GPT-2, cl100k, o200k; "Ġthe" is " the") or
 * SentencePiece style (Metaspace, a Replace of U+2581, ByteFallback, or a
 * Unigram model: U+2581 is a space and, with byte fallback, "<0x0A>" the
 * byte 0x0A; Llama 2, Mistral, Gemma). The vocabulary has largest id + 1
 * tokens; ids nobody names are unused (empty piece, SIFT_TOKEN_UNUSED).
 * SIFT_TOKEN_EOG goes to special added tokens whose text is a well-known
 * end of turn (the GGUF list with "</s>", "<eos>", "<|end_of_text|>",
 * "<|return|>", "<|call|>") and to what the config file names:
 * `/eos_token_id` (an id or an array of ids) and `/eos_token` (a string
 * or {"content": string}, looked up among the added tokens, then the
 * pieces as written).
 *
 * A byte-level BPE tokenizer gets an encoder (sift_vocab_encode) from
 * `/model/merges` ("A B" strings or ["A", "B"] pairs, ranked by their
 * order, as for GGUF merges), `/model/ignore_merges` and the
 * pre-tokenizer its `/pre_tokenizer` Split pattern names: Llama 3's and
 * cl100k's (SIFT_PRETOK_CL100K), Qwen2's (SIFT_PRETOK_QWEN2), o200k's
 * (SIFT_PRETOK_O200K), or a ByteLevel pre-tokenizer that splits itself
 * (SIFT_PRETOK_GPT2); added tokens that are not special are cut out of
 * the text first. `/normalizer` is not applied (Qwen's NFC: give NFC
 * text). Another pre-tokenizer, a SentencePiece-style tokenizer or no
 * merges leave it without one: sift_vocab_encode then fails with
 * SIFT_E_STATE and says why.
 *
 * Each file is read whole (a regular file of at most 256 MiB). JSON is
 * parsed with jansson (its allocations go through malloc). Errors name
 * the file and, for JSON syntax, "path:line:col: jansson's message"
 * (err->line, column, offset set); for a malformed value, the JSON
 * Pointer of the value: "tokenizer.json: /added_tokens/3/id: token id -1
 * is negative" (err->index = the token id where one is known):
 * - SIFT_E_ARG: NULL `out` or `tokenizer_path`; not JSON, or duplicate
 *   keys; a value of the wrong type; a model type other than BPE and
 *   Unigram; no ByteLevel or SentencePiece-style decoder, or both; a
 *   negative or non-integer id; an id named twice by the vocabulary or by
 *   the added tokens; an empty added token; a byte-level piece with a
 *   code point that stands for no byte; an eos_token that is no token;
 *   a merge that is not two pieces, or whose pieces (or the two
 *   together) are not tokens ("/model/merges/7: its left piece is not
 *   a token", err->index = the merge);
 * - SIFT_E_TOKEN: an eos_token_id outside the vocabulary;
 * - SIFT_E_LIMIT: an id >= 2^24, more than 65,536 unused ids beyond the
 *   named ones, a file over 256 MiB;
 * - SIFT_E_IO: a file cannot be opened or read, or is not a regular file;
 * - SIFT_E_NOMEM.
 * On failure *out is NULL. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_load_hf(sift_vocab **out, const char *tokenizer_path,
                                                       const char *config_path,
                                                       const sift_allocator *allocator,
                                                       sift_error *err);

/**
 * As sift_vocab_load_hf, from `len` bytes of tokenizer.json at
 * `tokenizer_json` and, unless `config_json` is NULL, `config_len` bytes
 * of the config file (neither NUL-terminated; read only during the
 * call). Messages name the sources "<tokenizer.json>" and "<config>".
 * SIFT_E_ARG also for NULL `tokenizer_json` with len > 0; SIFT_E_LIMIT
 * for either length over 256 MiB. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_from_hf(sift_vocab **out, const char *tokenizer_json,
                                                       size_t len, const char *config_json,
                                                       size_t config_len,
                                                       const sift_allocator *allocator,
                                                       sift_error *err);

/**
 * What sift_vocab_extend adds to a vocabulary: special tokens, the
 * end-of-generation marks and padding to the model's logits width.
 * Initialise with sift_vocab_extra_init, then set what you need.
 */
typedef struct sift_vocab_extra {
    uint32_t struct_size;             /**< sizeof(sift_vocab_extra); set by _init. */
    const char *const *special_texts; /**< n_special texts ("<|endoftext|>"); bytes. */
    const size_t *special_lengths;    /**< Their lengths in bytes; NULL = strlen. */
    const int32_t *special_ids;       /**< Their ids. */
    size_t n_special;                 /**< Special tokens (default 0). */
    const int32_t *eog_ids;           /**< Ids to mark SIFT_TOKEN_EOG. */
    size_t n_eog;                     /**< End-of-generation ids (default 0). */
    int32_t n_vocab;                  /**< Pad to this many tokens; 0 = no padding. */
} sift_vocab_extra;

/** Fills `extra` with the defaults (nothing added); NULL is a no-op. Since: 0.2. */
SIFT_API void sift_vocab_extra_init(sift_vocab_extra *extra);

/**
 * Creates a new vocabulary: `base` (unchanged; only read during the call)
 * plus the special tokens, end-of-generation ids and padding of `extra`
 * (NULL = a copy). For a tiktoken file, whose special tokens are not in
 * the file, and a model whose logits row is wider than its tokenizer
 * (cl100k: 100,256 tokens in the file, <|endoftext|> = 100257, rows of
 * 100,277 or more).
 *
 * - Special token i has the bytes special_texts[i] (1 byte to 1 MiB) and
 *   id special_ids[i], which must be past the end of `base` or an unused
 *   id of it (SIFT_TOKEN_UNUSED with an empty piece); it gets
 *   SIFT_TOKEN_SPECIAL (its text is not generated text: trigger words
 *   never see it, token triggers fire on its id, a grammar names it as
 *   a token element such as <[<|endoftext|>]>).
 * - The new vocabulary has max(size of base, largest special id + 1,
 *   n_vocab) tokens. Ids no one names (gaps and padding) have an empty
 *   piece and SIFT_TOKEN_UNUSED: a grammar never allows them (an empty
 *   piece matches only a token element naming its id).
 * - eog_ids[i] (in [0, new size)) get SIFT_TOKEN_EOG on top of their
 *   other bits; a grammar allows them exactly where it is complete.
 *   Other tokens keep the bits of `base`.
 * - The new vocabulary has the pre-tokenizer of `base` (since 0.2), so
 *   its special tokens can be encoded from text (sift_vocab_encode).
 *
 * `allocator` may be NULL (malloc/free). Returns SIFT_E_ARG for NULL
 * `out` or `base`, a bad struct_size, NULL arrays with a count > 0, an
 * empty special text, a special id that is already a token of `base`,
 * two specials with one id, n_vocab < 0 or smaller than the size of
 * `base`; SIFT_E_TOKEN for a special id below 0 or not below n_vocab (when
 * set), an EOG id outside the new vocabulary; SIFT_E_LIMIT for ids or
 * n_vocab above 2^24, a special text over 1 MiB, texts over 1 GiB in
 * total; SIFT_E_NOMEM. err->index names the id at fault. On failure *out
 * is NULL. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_extend(sift_vocab **out, const sift_vocab *base,
                                                      const sift_vocab_extra *extra,
                                                      const sift_allocator *allocator,
                                                      sift_error *err);

/* ------------------------------------------------------------------ */
/* Encoding (text -> token ids, byte-level BPE)                        */
/* ------------------------------------------------------------------ */

/*
 * A vocabulary with a pre-tokenizer turns text into token ids the way
 * OpenAI's tiktoken does: the text is split into pre-tokens by a
 * pattern, and each pre-token is merged from single bytes into tokens,
 * always merging the adjacent pair whose merged bytes have the smallest
 * rank (the token id of a tiktoken file; the leftmost pair on ties). A
 * pre-token that is itself a token is that token. A GGUF file's merges
 * rank pairs of tokens instead (Hugging Face's BPE; since 0.2).
 * docs/encoding.md has the details and what was checked against the
 * reference.
 *
 *     sift_vocab *v;
 *     sift_vocab_load_tiktoken(&v, "cl100k_base.tiktoken", NULL, &err);
 *     // cl100k's pre-tokenizer is chosen from the file's size
 *     int32_t ids[256];
 *     size_t n;
 *     if (sift_vocab_encode(v, text, len, 0, ids, 256, &n, NULL, &err) ==
 *         SIFT_E_LIMIT) { ... n ids are needed ... }
 *
 * Thread safety: a vocabulary with a pre-tokenizer may be shared by any
 * number of threads calling sift_vocab_encode (the encoder is built once,
 * on the first call or by sift_vocab_set_pretokenizer, and published
 * atomically; when two threads race to build it, both do the work and
 * one copy is kept). A scratch is used by one thread at a time.
 */

/** The pre-tokenizer of a vocabulary. The numbers are ABI. */
typedef enum sift_pretokenizer {
    SIFT_PRETOK_NONE = 0,    /**< No encoder: sift_vocab_encode fails with SIFT_E_STATE. */
    SIFT_PRETOK_CL100K = 1,  /**< tiktoken's cl100k_base (also GGUF pre "llama-bpe"). */
    SIFT_PRETOK_O200K = 2,   /**< The pattern of tiktoken's o200k_base. */
    SIFT_PRETOK_PATTERN = 3, /**< A PCRE2 pattern the caller gives. */
    SIFT_PRETOK_GPT2 = 4,    /**< GPT-2's pattern (GGUF pre "gpt-2"). Since: 0.2. */
    SIFT_PRETOK_QWEN2 = 5    /**< Qwen2's: cl100k's with single digits. Since: 0.2. */
} sift_pretokenizer;

/** Largest text sift_vocab_encode takes, in bytes (64 MiB). */
#define SIFT_ENCODE_MAX_BYTES ((size_t)1 << 26)

/** sift_vocab_encode flag: texts of special tokens become their ids. */
#define SIFT_ENCODE_SPECIAL 1u

/**
 * Sets the pre-tokenizer of `vocab` and builds its encoder now (so the
 * first sift_vocab_encode does not). `kind` is one of sift_pretokenizer;
 * for SIFT_PRETOK_PATTERN, `pattern` holds `pattern_len` bytes of a PCRE2
 * pattern (compiled with PCRE2_UTF and PCRE2_UCP; copied), otherwise
 * `pattern` must be NULL. SIFT_PRETOK_NONE removes the encoder.
 *
 * A vocabulary loaded from a tiktoken file gets a default: cl100k's
 * pre-tokenizer for a file of 100,256 ranks (cl100k_base), o200k's for
 * 199,998 ranks (o200k_base), none otherwise; a GGUF file with merges the
 * one its `tokenizer.ggml.pre` names (sift_vocab_load_gguf).
 * sift_vocab_extend passes the pre-tokenizer (not the encoder) on to the
 * new vocabulary. On a vocabulary with the merges of a GGUF file, only
 * the pattern changes: those merges and its user-defined tokens stay,
 * through SIFT_PRETOK_NONE too.
 *
 * The encoder indexes every token that is neither SIFT_TOKEN_SPECIAL nor
 * SIFT_TOKEN_UNUSED and has a piece, by its bytes (of tokens with the
 * same bytes the smallest id), and needs a token for each of the 256
 * single bytes. Call before the vocabulary is shared (as
 * sift_vocab_set_attr, which drops the built encoder: the next encode
 * builds it again).
 *
 * Returns SIFT_E_ARG for a NULL vocab, an unknown kind, a pattern given
 * with another kind or missing with SIFT_PRETOK_PATTERN, or a vocabulary
 * without a token for some single byte (the message names it);
 * SIFT_E_PATTERN_SYNTAX for a pattern PCRE2 rejects (err->offset = the
 * byte PCRE2 names); SIFT_E_LIMIT for a pattern over 64 KiB;
 * SIFT_E_NOMEM. On failure the vocabulary keeps its previous
 * pre-tokenizer. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_set_pretokenizer(sift_vocab *vocab,
                                                                sift_pretokenizer kind,
                                                                const char *pattern,
                                                                size_t pattern_len,
                                                                sift_error *err);

/** Returns the pre-tokenizer of `vocab`; SIFT_PRETOK_NONE for NULL. Since: 0.2. */
SIFT_API sift_pretokenizer sift_vocab_pretokenizer(const sift_vocab *vocab);

/**
 * Scratch memory for sift_vocab_encode: kept between calls so that, once
 * it has grown to the longest pre-token seen, encoding allocates nothing.
 * Not tied to a vocabulary; one thread at a time.
 */
typedef struct sift_encode_scratch sift_encode_scratch;

/**
 * Creates a scratch. `allocator` may be NULL (malloc/free); the scratch
 * grows through it. SIFT_E_ARG for NULL `out` or a bad allocator,
 * SIFT_E_NOMEM. On failure *out is NULL. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_encode_scratch_new(sift_encode_scratch **out,
                                                            const sift_allocator *allocator,
                                                            sift_error *err);

/** Frees a scratch; NULL is a no-op. Since: 0.2. */
SIFT_API void sift_encode_scratch_free(sift_encode_scratch *scratch);

/**
 * Encodes `len` bytes at `text` (any bytes; not NUL-terminated) into
 * token ids. Valid UTF-8 is split by the pre-tokenizer; a run of bytes
 * that is not well-formed UTF-8 is a pre-token of its own, so every byte
 * string encodes and decoding the ids (the pieces, concatenated) gives
 * `text` back. Without SIFT_ENCODE_SPECIAL in `flags`, the text of a
 * special token is encoded as ordinary text (tiktoken's encode_ordinary);
 * with it, each occurrence of the text of a token with SIFT_TOKEN_SPECIAL
 * (the leftmost, then the longest) becomes that token, and the text
 * between them is encoded on its own. The user-defined tokens of a GGUF
 * file are cut out so with or without the flag (since 0.2).
 *
 * Writes at most `cap` ids to `ids` (NULL allowed with cap 0) and the
 * number of ids the text has to *n_out. When that is more than `cap`,
 * returns SIFT_E_LIMIT with the first `cap` ids written, so a call with
 * cap 0 counts and a second call with cap = *n_out encodes.
 *
 * `scratch` may be NULL: the call then allocates its working memory from
 * the vocabulary's allocator and frees it before returning. The merges
 * of a pre-token of m bytes take O(m log m) steps and 24 m bytes of
 * scratch; finding the special and user-defined texts takes O(len)
 * steps however long they are (and 4 bytes of scratch per byte of the
 * longest, at least 16 KiB); so no input costs more than O(len log len).
 *
 * Returns SIFT_E_ARG for a NULL `vocab` or `n_out`, NULL `text` with
 * len > 0, NULL `ids` with cap > 0, unknown flag bits; SIFT_E_STATE for a
 * vocabulary without a pre-tokenizer (for a GGUF file, the message says
 * why: the `tokenizer.ggml.pre` name sift has no pattern for, no such
 * key, or a byte without a token); SIFT_E_LIMIT for len over
 * SIFT_ENCODE_MAX_BYTES, or more ids than `cap`; SIFT_E_PATTERN_LIMIT
 * when a custom pattern exceeds PCRE2's match limit (10,000,000 per
 * match) or reports a match that does not start at or after the end of
 * the previous one (\K), at err->offset; SIFT_E_NOMEM (building the encoder on first use,
 * or growing the scratch). On SIFT_E_LIMIT for cap, *n_out is the count
 * needed; on every other failure it is 0. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_vocab_encode(const sift_vocab *vocab, const char *text,
                                                      size_t len, uint32_t flags, int32_t *ids,
                                                      size_t cap, size_t *n_out,
                                                      sift_encode_scratch *scratch,
                                                      sift_error *err);

/* ------------------------------------------------------------------ */
/* Grammars                                                            */
/* ------------------------------------------------------------------ */

/*
 * A grammar constrains generated text to a GBNF language (the format
 * llama.cpp users write; docs/grammar.md). It reads bytes, decodes UTF-8
 * across token boundaries, and answers per token: accepted or not.
 *
 *     sift_grammar_params gp;
 *     sift_grammar_params_init(&gp);
 *     gp.source_name = "json.gbnf";                  // used in messages
 *     sift_grammar *g;
 *     if (sift_grammar_new(&g, text, len, vocab, &gp, &err)) {
 *         fprintf(stderr, "%s\n", err.message);     // "json.gbnf:3:7: ..."
 *     }
 *     // constrain mode: the chain bans what the grammar rejects
 *     sift_chain_add_grammar(chain, g, &err);        // the chain owns g now
 *     sift_chain_add_dist(chain, &err);
 *
 *     // or by hand, with any sampler:
 *     sift_grammar_ban(g, row, n_vocab, &err);       // -inf on rejected tokens
 *     ... pick tok ...
 *     sift_grammar_accept_token(g, tok, &err);       // advance
 *
 * A grammar object is used by one thread at a time (its caches change even
 * in calls that do not change its matching state); clones are independent
 * and share the immutable compiled form. Every failed call leaves the
 * matching state unchanged.
 */

/** A compiled grammar with its matching state. */
typedef struct sift_grammar sift_grammar;

/** Default limits of sift_grammar_params. */
#define SIFT_GRAMMAR_DEFAULT_MAX_BYTES ((size_t)1 << 20)
#define SIFT_GRAMMAR_DEFAULT_MAX_STACKS 4096
#define SIFT_GRAMMAR_DEFAULT_MAX_STACK_DEPTH 10000
#define SIFT_GRAMMAR_DEFAULT_MAX_STEP_WORK ((int64_t)50000000)
/** Largest sift_grammar_params.max_rollback_tokens. Since: 0.3. */
#define SIFT_GRAMMAR_MAX_ROLLBACK 65536

/**
 * Parameters of sift_grammar_new. Initialise with
 * sift_grammar_params_init; fields added later keep their defaults.
 */
typedef struct sift_grammar_params {
    uint32_t struct_size;    /**< sizeof(sift_grammar_params); set by _init. */
    const char *root;        /**< Start rule name; NULL = "root". Read during the call. */
    const char *source_name; /**< Name in messages; NULL = "grammar". Read during the call. */
    const sift_allocator *allocator; /**< NULL = malloc/free; copied. */
    size_t max_bytes;                /**< Largest grammar text in bytes (default 1 MiB). */
    int32_t max_stacks;      /**< Largest number of live parse stacks, >= 1 (default 4096). */
    int32_t max_stack_depth; /**< Largest depth of one parse stack, >= 1 (default 10000). */
    int64_t max_step_work;   /**< Units of matcher work per call, >= 1 (default 5e7). */
    /**
     * Where the text sits in a larger file, for messages: called with a
     * byte offset of the text, it sets the 1-based line and column (code
     * points) to show, e.g. in the YAML config that embeds the grammar.
     * Every position of an error, and every position quoted inside its
     * message, goes through it; err->line and err->column are its
     * answers, err->offset stays the offset in the text. NULL (default) =
     * the text's own lines and columns. Called during sift_grammar_new
     * only. Since: 0.2.
     */
    void (*map_position)(void *user, size_t offset, int32_t *line, int32_t *column);
    void *map_user; /**< Passed to map_position. */
    /**
     * How many of the last accepts sift_grammar_rollback can take back,
     * 0 to SIFT_GRAMMAR_MAX_ROLLBACK (default 0: no history). The history
     * is allocated with the grammar (about 48 bytes an entry, plus, for a
     * lazy grammar, 48 bytes and 12 per searched pattern), so accepting
     * allocates nothing for it; a lazy grammar also keeps the generated
     * text of the entries' tokens. Since: 0.3.
     */
    int32_t max_rollback_tokens;
} sift_grammar_params;

/** Fills `params` with the defaults; NULL is a no-op. Since: 0.1. */
SIFT_API void sift_grammar_params_init(sift_grammar_params *params);

/**
 * Compiles GBNF text into a grammar in its initial state.
 *
 * `text[0..len)` is the grammar (not NUL-terminated; a NUL byte inside is
 * an error). `vocab` (may be NULL) lets the grammar work on tokens and
 * resolves token references (<[id]>, <text>, !<...>); its pieces and
 * attributes are copied, so it may be freed afterwards. The copy (with
 * the token trie the matcher walks) is made once per vocabulary, by the
 * first grammar built over it, and shared read-only by every later
 * grammar and thread (reference counted); a grammar takes the attribute
 * bits the vocabulary has when it is built. That shared copy is
 * allocated, and at last freed, through the vocabulary's allocator, so
 * the allocator (and its `user` state) must stay valid until the last
 * grammar built over the vocabulary is freed. Without a
 * vocabulary only sift_grammar_accept_bytes and sift_grammar_is_complete
 * work. `params` may be NULL (defaults).
 *
 * Errors (*out is NULL; messages are "source:line:col: text", and
 * err->line, err->column (code points, from 1), err->offset are set):
 * - SIFT_E_ARG: NULL out, NULL text with len > 0, bad params;
 * - SIFT_E_GRAMMAR_SYNTAX: any syntax error, invalid UTF-8, a NUL byte,
 *   a bad escape, a rule defined twice, a token reference without a
 *   vocabulary or out of range;
 * - SIFT_E_GRAMMAR_UNDEFINED: a rule used but not defined, no rules, no
 *   start rule;
 * - SIFT_E_GRAMMAR_LEFT_RECURSION: a left-recursive rule (the message
 *   gives the rule path);
 * - SIFT_E_GRAMMAR_LIMIT: text over max_bytes (checked first), nesting
 *   over 1000, a repetition over 2000 copies, over 2^22 elements;
 * - SIFT_E_NOMEM.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_new(sift_grammar **out, const char *text,
                                                     size_t len, const sift_vocab *vocab,
                                                     const sift_grammar_params *params,
                                                     sift_error *err);

/** Frees a grammar; NULL is a no-op. Since: 0.1. */
SIFT_API void sift_grammar_free(sift_grammar *grammar);

/**
 * Makes an independent copy of `grammar` in its current matching state,
 * with the same allocator and limits. The compiled form is shared
 * (read-only, reference counted). SIFT_E_ARG for NULL pointers,
 * SIFT_E_NOMEM. On failure *out is NULL. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_clone(const sift_grammar *grammar,
                                                       sift_grammar **out, sift_error *err);

/** Returns the grammar to its initial state; NULL is a no-op. Since: 0.1. */
SIFT_API void sift_grammar_reset(sift_grammar *grammar);

/**
 * Returns 1 if the text accepted so far is a complete sentence of the
 * grammar (an end-of-generation token would be accepted, unless the
 * grammar is terminated: see sift_grammar_is_terminated), else 0 (also
 * for NULL). Since: 0.1.
 */
SIFT_API int sift_grammar_is_complete(const sift_grammar *grammar);

/**
 * Feeds `n` bytes of generated text (any split of UTF-8 sequences is
 * fine; invalid, overlong, surrogate and > U+10FFFF sequences are
 * rejected). All or nothing: SIFT_E_GRAMMAR_REJECT (err->index = the
 * first byte that failed) leaves the state unchanged. A successful call
 * with n > 0 is one entry of the rollback history (as one token). On a
 * terminated grammar every call fails with SIFT_E_GRAMMAR_REJECT
 * (err->index 0, the message says why). SIFT_E_ARG for NULL pointers,
 * SIFT_E_GRAMMAR_LIMIT when a limit is hit, SIFT_E_NOMEM.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_accept_bytes(sift_grammar *grammar,
                                                              const void *bytes, size_t n,
                                                              sift_error *err);

/**
 * Says whether `token` would be accepted now (*ok = 1) or not (*ok = 0),
 * without changing the matching state. End-of-generation tokens are
 * accepted exactly when the grammar is complete; a token with an empty
 * piece only when a token reference names it; no token once the grammar
 * is terminated. SIFT_E_ARG for NULL
 * pointers or a grammar without vocabulary, SIFT_E_TOKEN for an id outside
 * [0, V), SIFT_E_GRAMMAR_LIMIT, SIFT_E_NOMEM. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_accepts_token(sift_grammar *grammar, int32_t token,
                                                               int *ok, sift_error *err);

/**
 * Advances the grammar by `token`: its piece, or, for an
 * end-of-generation token (accepted where the grammar may end), makes it
 * terminated (sift_grammar_is_terminated; since 0.3). Each success is one
 * entry of the rollback history (sift_grammar_rollback).
 * SIFT_E_GRAMMAR_REJECT if the grammar does not accept it (also after
 * completion, unless it is an end-of-generation token), and for every
 * token once it is terminated (the message says so); errors as
 * sift_grammar_accepts_token. On failure the state is unchanged.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_accept_token(sift_grammar *grammar, int32_t token,
                                                              sift_error *err);

/**
 * Sets logits[t] to -inf for every token t the grammar rejects now (the
 * whole-vocabulary pass). n_vocab must equal the vocabulary's size
 * (SIFT_E_ARG otherwise, or with no vocabulary). SIFT_E_GRAMMAR_DEAD when
 * no token with a finite logit would be left (the row is then unchanged):
 * the grammar admits nothing (as when it is terminated), or only
 * end-of-generation tokens that are banned. SIFT_E_GRAMMAR_LIMIT,
 * SIFT_E_NOMEM. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_ban(sift_grammar *grammar, float *logits,
                                                     int32_t n_vocab, sift_error *err);

/**
 * As sift_grammar_ban over a candidate array (a slice, any order): sets
 * the logit of each rejected candidate to -inf and removes nothing.
 * SIFT_E_TOKEN (err->index = position) for an id outside [0, V); other
 * errors as sift_grammar_ban. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_ban_candidates(sift_grammar *grammar,
                                                                sift_candidate *candidates,
                                                                size_t n, sift_error *err);

/*
 * Bitmasks (the layout of vLLM, SGLang and XGrammar): the allowed set of
 * the current step as uint32_t words, bit (t % 32) of word t / 32 set
 * exactly when token t is allowed. The set is sift_grammar_ban's: a
 * token is allowed when sift_grammar_accepts_token says so;
 * end-of-generation tokens exactly when the grammar is complete. An
 * untriggered lazy grammar allows every token; a terminated grammar
 * allows none (every word 0). A grammar keeps the masks
 * of the states it has met (up to 2 MiB of them, the oldest evicted
 * first), so a state met again costs a copy of its mask.
 *
 *     size_t nw = (n_vocab + 31) / 32;
 *     uint32_t *mask = malloc(nw * sizeof *mask);
 *     sift_grammar_fill_bitmask(g, mask, nw, &err);  // each step
 */

/**
 * Writes the allowed set of the current step into mask[0 .. n_words):
 * bit t % 32 of mask[t / 32] is 1 exactly when token t is allowed, for t
 * in [0, V); every other bit (ids >= V, words past (V + 31) / 32) is 0.
 * The matching state is unchanged. SIFT_E_ARG for NULL pointers, a
 * grammar without vocabulary, or n_words < (V + 31) / 32;
 * SIFT_E_GRAMMAR_LIMIT (the work budget), SIFT_E_NOMEM. On failure the
 * mask is unchanged and the grammar stays usable. Unlike
 * sift_grammar_ban, an empty set is not an error (every word is 0).
 * Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_fill_bitmask(sift_grammar *grammar, uint32_t *mask,
                                                              size_t n_words, sift_error *err);

/**
 * sift_grammar_fill_bitmask for a batch: row i (masks + i * words_per_row,
 * words_per_row words) receives grammar i's allowed set; a NULL grammar's
 * row has every bit set (no constraint). The grammars may have different
 * vocabularies; each needs words_per_row >= (its V + 31) / 32. The
 * arguments of every row are checked before any row is written
 * (SIFT_E_ARG, err->index = the grammar at fault: not a live grammar, no
 * vocabulary, rows too short; or NULL grammars/masks with n > 0). A
 * failure while filling (SIFT_E_GRAMMAR_LIMIT, SIFT_E_NOMEM) sets
 * err->index to the failing grammar: the rows before it are filled, the
 * later ones are not written; every grammar stays usable. n = 0 is a
 * no-op. One thread: the grammars are used as by sift_grammar_fill_bitmask.
 * Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammars_fill_bitmasks(sift_grammar *const *grammars,
                                                                size_t n, uint32_t *masks,
                                                                size_t words_per_row,
                                                                sift_error *err);

/**
 * sift_grammars_fill_bitmasks into chosen rows: grammar i's allowed set
 * goes to row rows[i] (masks + rows[i] * words_per_row) of a mask of
 * n_rows rows; no other row is written (an engine fills only the rows of
 * its grammar-constrained requests). A NULL grammar's row gets every bit
 * set. Give distinct rows: with a row named twice the later grammar's
 * set stays. Checks and errors as sift_grammars_fill_bitmasks, plus
 * SIFT_E_ARG (err->index = i) for rows[i] outside [0, n_rows), and for
 * NULL rows with n > 0. n = 0 is a no-op. Since: 0.3.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammars_fill_bitmask_rows(sift_grammar *const *grammars,
                                                                    size_t n, const int32_t *rows,
                                                                    uint32_t *masks, size_t n_rows,
                                                                    size_t words_per_row,
                                                                    sift_error *err);

/*
 * The serving loop (docs/grammar.md, "The serving loop"): what SGLang's
 * and vLLM's grammar backends call besides accept and fill. A grammar
 * built with max_rollback_tokens = R keeps the state before each of its
 * last R accepts, so a speculative step can try a draft and take back
 * what the target model rejected:
 *
 *     size_t ok;
 *     sift_grammar_validate_tokens(g, draft, n, &ok, &err); // trim the draft
 *     sift_grammar_fill_bitmask_draft(g, draft, ok, masks, nw, NULL, &err);
 *     ... the target model scores positions 0..ok, keeps m tokens ...
 *     for (i = 0; i < ok; i++) sift_grammar_accept_token(g, draft[i], &err);
 *     sift_grammar_rollback(g, ok - m, &err);        // keep the first m
 *
 * Accepting an end-of-generation token where the grammar may end makes it
 * terminated: it then accepts nothing and its masks are empty until a
 * rollback (across that token) or a reset.
 */

/** Largest number of bytes sift_grammar_forced_bytes writes. Since: 0.3. */
#define SIFT_GRAMMAR_MAX_FORCED_BYTES 4096

/**
 * Takes back the last `n_tokens` accepts (sift_grammar_accept_token, and
 * sift_grammar_accept_bytes calls, each one entry): the grammar is then
 * in the state it had before them, bit for bit as a fresh grammar fed
 * the accepts that remain (terminated flag, lazy trigger state
 * included: a rollback across the token that fired a trigger returns the
 * grammar to waiting, one across an end-of-generation token ends its
 * termination). Costs O(n_tokens) and allocates nothing. n_tokens = 0 is
 * a no-op. SIFT_E_ARG for a NULL or dead grammar; SIFT_E_STATE when
 * n_tokens is more than the history holds
 * (sift_grammar_rollback_depth: at most max_rollback_tokens, fewer
 * after a reset, a sift_grammar_set_lazy or early on), with nothing
 * changed. Since: 0.3.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_rollback(sift_grammar *grammar, size_t n_tokens,
                                                          sift_error *err);

/**
 * Returns how many accepts sift_grammar_rollback can take back now: the
 * entries of the grammar's history. Each accept adds one (beyond
 * max_rollback_tokens the oldest is dropped), each token rolled back
 * removes one, and a reset or sift_grammar_set_lazy empties it; a clone
 * starts with its original's. 0 for NULL. Since: 0.3.
 */
SIFT_API size_t sift_grammar_rollback_depth(const sift_grammar *grammar);

/**
 * Returns 1 if the grammar is terminated: it accepted an
 * end-of-generation token (SIFT_TOKEN_EOG) where it could end, and
 * accepts nothing more (accepts: SIFT_E_GRAMMAR_REJECT, err->index = the
 * token, "... the grammar is terminated ..."; masks: no bit; ban:
 * SIFT_E_GRAMMAR_DEAD) until a rollback or reset. 0 otherwise (also for
 * NULL). sift_grammar_is_complete, by contrast, says the text could end
 * here. Since: 0.3.
 */
SIFT_API int sift_grammar_is_terminated(const sift_grammar *grammar);

/**
 * The longest prefix of the draft ids[0..n) the grammar accepts from its
 * current state, as accepting the tokens one by one on a clone would
 * find (end-of-generation tokens included: nothing is accepted after
 * one), in *n_ok (0..n); the grammar is not changed (its caches may
 * grow). The work budget applies per draft token. An untriggered lazy
 * grammar runs its triggers over the draft. Errors (*n_ok = 0, nothing
 * changed): SIFT_E_ARG for NULL grammar or n_ok, NULL ids with n > 0, a
 * grammar without a vocabulary; SIFT_E_TOKEN (err->index = the draft
 * position) for an id outside [0, V), checked before any work;
 * SIFT_E_GRAMMAR_LIMIT, SIFT_E_PATTERN_LIMIT, SIFT_E_NOMEM.
 * Since: 0.3.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_validate_tokens(sift_grammar *grammar,
                                                                 const int32_t *ids, size_t n,
                                                                 size_t *n_ok, sift_error *err);

/**
 * The masks along a draft in one call: row k (masks + k * words_per_row,
 * k = 0..n, so n + 1 rows) receives the allowed set of the state after
 * the first k draft tokens, as sift_grammar_fill_bitmask would after
 * accepting them; the rows after a token the grammar rejects are all
 * zero, and *n_ok (may be NULL) receives the accepted prefix's length as
 * sift_grammar_validate_tokens. The grammar is not changed. Costs at most
 * n + 1 fills and n token steps: no clone, no allocation once the caches
 * hold the states. Errors (nothing changed; the rows may be partly
 * written): as sift_grammar_validate_tokens, plus SIFT_E_ARG for NULL
 * masks, words_per_row < (V + 31) / 32 or rows that overflow.
 * Since: 0.3.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_fill_bitmask_draft(sift_grammar *grammar,
                                                                    const int32_t *ids, size_t n,
                                                                    uint32_t *masks,
                                                                    size_t words_per_row,
                                                                    size_t *n_ok, sift_error *err);

/**
 * The bytes the grammar forces next (jump-forward): buf[0 .. *n_bytes)
 * receives the longest byte string every continuation of the text starts
 * with, found one byte at a time while exactly one byte can follow and
 * the grammar cannot end (a multi-byte character's bytes one by one). At
 * most min(cap, SIFT_GRAMMAR_MAX_FORCED_BYTES) bytes, at most 256
 * transitions each (the work budget covers the call). Empty
 * (*n_bytes = 0) when the next byte is not forced, in a state where a
 * token reference (<[id]>) may match, on a terminated grammar and on an
 * untriggered lazy one.
 *
 * With ids_cap > 0 (the grammar needs a vocabulary), ids[0 .. *n_ids)
 * receives tokens that spell a prefix of those bytes, each the longest
 * ordinary token (not SIFT_TOKEN_SPECIAL or UNUSED) starting at its byte,
 * stopping before a byte where some token could run past the forced
 * bytes (the text after them might change the choice) and after ids_cap
 * tokens; the bytes they leave are for the model. These are the tokens a
 * tokenizer that prefers the longest match would write; a BPE tokenizer
 * may split the text otherwise. ids, n_ids may be NULL with ids_cap = 0.
 * Nothing is changed. SIFT_E_ARG for NULL grammar or n_bytes, NULL buf
 * with cap > 0, NULL ids or n_ids with ids_cap > 0, ids_cap > 0 without a
 * vocabulary; SIFT_E_GRAMMAR_LIMIT, SIFT_E_NOMEM (then *n_bytes = 0).
 * Since: 0.3.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_forced_bytes(sift_grammar *grammar, char *buf,
                                                              size_t cap, size_t *n_bytes,
                                                              int32_t *ids, size_t ids_cap,
                                                              size_t *n_ids, sift_error *err);

/* The chain type (declared again, identically, in the chain section). */
typedef struct sift_chain sift_chain;

/**
 * Adds `grammar` as a constrain stage: every candidate it rejects in its
 * current state gets -inf (nothing is removed), and sift_chain_accept
 * advances it. Class LOWERS with n = -1 (unbounded). The grammar must have
 * a vocabulary whose size equals the row length (else SIFT_E_ARG at add
 * or sample time). Ownership: the chain owns `grammar` on success (freed
 * with the chain; cloned and reset with it); on failure it stays the
 * caller's, unchanged. A grammar that a chain already owns (added before,
 * to this chain or another, or set as a check grammar) is refused with
 * SIFT_E_ARG "... already owned by a chain"; add a sift_grammar_clone of
 * it instead. Sampling fails with SIFT_E_GRAMMAR_DEAD when the grammar
 * leaves no candidate. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_grammar(sift_chain *chain, sift_grammar *grammar,
                                                           sift_error *err);

/**
 * Sets (or, with grammar = NULL, removes) the chain's **check-mode**
 * grammar: the chain samples without it; if it rejects the sampled token,
 * every token it rejects is banned in the whole row and the chain samples
 * again, continuing from the RNG state the first draw left (the same
 * draws on the row path and the slice path). On a slice, a rejection
 * needs the whole row: the row hook, or SIFT_E_NEED_ROW with nothing
 * changed. sift_chain_accept advances it (SIFT_E_GRAMMAR_REJECT, chain
 * unchanged, for a token it rejects); clone and reset carry it. Grammar
 * errors of a step (SIFT_E_GRAMMAR_DEAD when it leaves no candidate) are
 * the step's errors. The grammar needs a vocabulary of the row's length.
 * Ownership: the chain owns `grammar` on success (a previous one is
 * freed); on failure it stays the caller's, unchanged. SIFT_E_ARG for a
 * NULL chain, a grammar without a vocabulary or of another size than
 * n_vocab, or a grammar a chain already owns (this one or another, as a
 * stage or as its check grammar: "... already owned by a chain"),
 * SIFT_E_STATE inside a callback. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_set_check_grammar(sift_chain *chain,
                                                                 sift_grammar *grammar,
                                                                 sift_error *err);

/* ------------------------------------------------------------------ */
/* JSON Schema                                                         */
/* ------------------------------------------------------------------ */

/*
 * A JSON Schema (the subset docs/json-schema.md lists, keyword by
 * keyword) becomes a GBNF grammar that matches exactly the JSON texts
 * the schema accepts, within the documented partial cases:
 *
 *     sift_json_schema_params sp;
 *     sift_json_schema_params_init(&sp);
 *     sp.source_name = "person.json";                // used in messages
 *     sift_grammar *g;
 *     if (sift_grammar_from_json_schema(&g, schema, len, vocab, &sp, NULL, &err))
 *         fprintf(stderr, "%s\n", err.message);
 *         // "person.json:4:16: #/properties/age/not: 'not' is not supported"
 *
 * Properties are matched in the order the schema defines them (the order
 * of "properties", then required names it does not list, then extra
 * properties); every engine in the field does the same. Schemas are
 * parsed with jansson, whose own allocations go through malloc (jansson
 * has only a process-wide allocator hook, which sift does not set).
 */

/** How a JSON Schema grammar treats whitespace between JSON tokens. */
typedef enum sift_json_whitespace {
    /** No whitespace at all: the compact form. */
    SIFT_JSON_WS_COMPACT = 0,
    /** Runs of space, tab, CR and LF of at most max_whitespace bytes. */
    SIFT_JSON_WS_FLEXIBLE = 1
} sift_json_whitespace;

/** What the converter does with a keyword or form it does not support. */
typedef enum sift_json_unsupported {
    /** Fail with SIFT_E_SCHEMA_UNSUPPORTED naming its place (default). */
    SIFT_JSON_UNSUPPORTED_ERROR = 0,
    /** Leave the keyword out (the grammar is then looser than the
     * schema) and report it through `warn`. */
    SIFT_JSON_UNSUPPORTED_IGNORE = 1
} sift_json_unsupported;

/** What the converter makes of the "format" keyword (docs/json-schema.md
 * lists the formats it can check). */
typedef enum sift_json_format {
    /** A format sift checks constrains the string (the default: what a
     * caller that validates its output expects); a standard format it
     * cannot check goes through `unsupported`; another name is ignored. */
    SIFT_JSON_FORMAT_ASSERT = 0,
    /** Every format is an annotation and constrains nothing (the meaning
     * JSON Schema 2020-12 gives it by default). */
    SIFT_JSON_FORMAT_ANNOTATION = 1
} sift_json_format;

/** Default limits of sift_json_schema_params. */
#define SIFT_JSON_SCHEMA_DEFAULT_MAX_WHITESPACE 20
#define SIFT_JSON_SCHEMA_DEFAULT_MAX_SCHEMA_BYTES ((size_t)4 << 20)
#define SIFT_JSON_SCHEMA_DEFAULT_MAX_GRAMMAR_BYTES ((size_t)1 << 20)
#define SIFT_JSON_SCHEMA_DEFAULT_MAX_WORK ((int64_t)1000000)

/**
 * Options of the JSON Schema converter. Initialise with
 * sift_json_schema_params_init; fields added later keep their defaults.
 * Since: 0.2.
 */
typedef struct sift_json_schema_params {
    uint32_t struct_size; /**< sizeof(sift_json_schema_params); set by _init. */
    /** NULL = malloc/free; copied. The GBNF text of
     * sift_json_schema_to_gbnf is allocated from it. */
    const sift_allocator *allocator;
    const char *source_name; /**< Name in messages; NULL = "schema". Read during the call. */
    sift_json_whitespace whitespace; /**< Default SIFT_JSON_WS_FLEXIBLE. */
    int32_t max_whitespace; /**< Longest whitespace run, 0 to 1000 (default 20); FLEXIBLE only. */
    /** 1 = OpenAI-style strict mode: an object schema without
     * "additionalProperties" allows no other property. 0 (default) = the
     * JSON Schema meaning: other properties are allowed. */
    int strict;
    sift_json_unsupported unsupported; /**< Default SIFT_JSON_UNSUPPORTED_ERROR. */
    /** Called once per ignored keyword under SIFT_JSON_UNSUPPORTED_IGNORE,
     * with the message an error would have had (code
     * SIFT_E_SCHEMA_UNSUPPORTED, line, column, offset); NULL = silent.
     * Called during the conversion only. */
    void (*warn)(void *user, const sift_error *warning);
    void *warn_user;          /**< Passed to warn. */
    size_t max_schema_bytes;  /**< Largest schema text (default 4 MiB). */
    size_t max_grammar_bytes; /**< Largest GBNF text produced (default 1 MiB). */
    /** Units of conversion work, >= 1 (default 10^6): one per subschema
     * visited, per rule and per enum value or digit range emitted, and
     * more for the larger steps (docs/json-schema.md lists them). */
    int64_t max_work;
    /** Default SIFT_JSON_FORMAT_ASSERT. Since: 0.3. */
    sift_json_format format;
} sift_json_schema_params;

/** Fills `params` with the defaults; NULL is a no-op. Since: 0.2. */
SIFT_API void sift_json_schema_params_init(sift_json_schema_params *params);

/**
 * Converts the JSON Schema `schema[0..len)` (UTF-8 JSON text, not
 * NUL-terminated; any JSON value, so `true` and `false` are schemas) to
 * GBNF text whose start rule is "root". `params` may be NULL (defaults).
 * On success *out (allocated from params->allocator, NUL-terminated; free
 * it with sift_json_schema_free_gbnf) and *out_len (without the NUL).
 *
 * Errors (*out is NULL, *out_len 0; messages are
 * "source:line:col: #/json/pointer: text", err->line and err->column
 * (code points, from 1) and err->offset give the place in the schema
 * text: of the syntax error, or of the value of the keyword at fault):
 * - SIFT_E_ARG: NULL out or out_len, NULL schema with len > 0, bad params;
 * - SIFT_E_SCHEMA_SYNTAX: not JSON (jansson's message), or not a valid
 *   schema (a keyword with a value of the wrong type, a $ref that does
 *   not resolve or that loops through $refs alone);
 * - SIFT_E_SCHEMA_UNSUPPORTED: a keyword or form outside the supported
 *   subset under SIFT_JSON_UNSUPPORTED_ERROR, a schema that admits no
 *   value (false at the root), a string or key holding \u0000;
 * - SIFT_E_SCHEMA_LIMIT: schema over max_schema_bytes, GBNF over
 *   max_grammar_bytes, work over max_work, nesting over 256 subschemas,
 *   minItems, maxItems, minProperties or maxProperties over 1999, a
 *   string length bound over 1,999,000, a count over 10^15, an integer
 *   outside the 64-bit range or a number beyond a double's (at its JSON
 *   Pointer);
 * - SIFT_E_NOMEM.
 * Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_json_schema_to_gbnf(char **out, size_t *out_len,
                                                             const char *schema, size_t len,
                                                             const sift_json_schema_params *params,
                                                             sift_error *err);

/**
 * Frees GBNF text that sift_json_schema_to_gbnf returned, through the
 * allocator of `params` (the same one the conversion used; NULL params =
 * malloc/free). NULL text is a no-op. Since: 0.2.
 */
SIFT_API void sift_json_schema_free_gbnf(char *gbnf, const sift_json_schema_params *params);

/**
 * Compiles a JSON Schema into a grammar in its initial state: the GBNF
 * of sift_json_schema_to_gbnf given to sift_grammar_new with `vocab` and
 * `gparams` (both may be NULL, as there; gparams->root and
 * gparams->map_position are ignored: the start rule is the schema's, and
 * GBNF positions would not be the schema's). Errors as sift_json_schema_to_gbnf, plus:
 * the GBNF limits of `gparams` hit by the generated text are
 * SIFT_E_SCHEMA_LIMIT; a schema that recurses through $ref without
 * consuming text (a left-recursive grammar) is SIFT_E_SCHEMA_UNSUPPORTED;
 * other statuses of sift_grammar_new as there. On failure *out is NULL.
 * Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_from_json_schema(
    sift_grammar **out, const char *schema, size_t len, const sift_vocab *vocab,
    const sift_json_schema_params *sparams, const sift_grammar_params *gparams, sift_error *err);

/* ------------------------------------------------------------------ */
/* Lazy grammars                                                       */
/* ------------------------------------------------------------------ */

/*
 * A lazy grammar constrains nothing until a trigger fires in the generated
 * text (docs/triggers.md): a word (substring, bytes), a PCRE2 pattern
 * searched in the recent text, a PCRE2 pattern that must match the whole
 * text so far, or a token id. Then the grammar starts from its root and
 * receives the text from the trigger on (from the first non-empty capture
 * group of the pattern that fired, else from the start of the match), up
 * to the end of the token that fired; from then on it is an ordinary
 * grammar.
 *
 *     static const char *words[] = {"<tool_call>"};
 *     sift_lazy_params lp;
 *     sift_lazy_params_init(&lp);
 *     lp.words = words;
 *     lp.n_words = 1;
 *     if (sift_grammar_set_lazy(g, &lp, &err)) ...    // before adding g
 *     sift_chain_add_grammar(chain, g, &err);
 *
 * Only accepted generated tokens reach the trigger: the chain never feeds
 * prompt tokens (sift_chain_accept_prompt) to grammars. The text of tokens
 * the vocabulary marks SIFT_TOKEN_SPECIAL or SIFT_TOKEN_EOG is not
 * generated text; token-id triggers still fire on them.
 */

/** Default limits of sift_lazy_params. */
#define SIFT_LAZY_DEFAULT_MAX_WINDOW 4096
#define SIFT_LAZY_DEFAULT_MAX_TEXT ((size_t)1 << 20)
#define SIFT_LAZY_DEFAULT_MAX_TRIGGERS 1024
#define SIFT_LAZY_DEFAULT_MATCH_LIMIT 1000000u
#define SIFT_LAZY_DEFAULT_DEPTH_LIMIT 10000u
#define SIFT_LAZY_DEFAULT_HEAP_LIMIT_KIB 16384u

/**
 * Triggers and limits of a lazy grammar. Initialise with
 * sift_lazy_params_init; fields added later keep their defaults. Every
 * pointer is read during sift_grammar_set_lazy only (the grammar copies
 * what it needs). A `*_lens` array may be NULL: the strings are then
 * NUL-terminated. Triggers are numbered words first, then patterns, full
 * patterns and tokens; when several fire at one token the lowest number
 * wins.
 */
typedef struct sift_lazy_params {
    uint32_t struct_size;             /**< sizeof(sift_lazy_params); set by _init. */
    const char *const *words;         /**< Byte strings found anywhere in the text. */
    const size_t *word_lens;          /**< Their lengths (>= 1), or NULL. */
    size_t n_words;                   /**< Number of words. */
    const char *const *patterns;      /**< PCRE2 patterns searched in the recent text. */
    const size_t *pattern_lens;       /**< Their lengths, or NULL. */
    size_t n_patterns;                /**< Number of searched patterns. */
    const char *const *full_patterns; /**< PCRE2 patterns matching the whole text. */
    const size_t *full_pattern_lens;  /**< Their lengths, or NULL. */
    size_t n_full_patterns;           /**< Number of whole-text patterns. */
    const int32_t *tokens;            /**< Token ids in [0, V) that fire when accepted. */
    size_t n_tokens;                  /**< Number of token ids. */
    size_t max_window;                /**< Bytes a searched pattern sees, >= 64 (default 4096). */
    size_t max_text;                  /**< Text a whole-text pattern may see (default 1 MiB). */
    size_t max_triggers;              /**< Largest number of triggers (default 1024). */
    uint32_t match_limit;             /**< PCRE2 steps per token, all patterns (default 10^6). */
    uint32_t depth_limit;             /**< PCRE2 depth limit (default 10^4). */
    uint32_t heap_limit_kib;          /**< PCRE2 heap limit in KiB (default 16384). */
} sift_lazy_params;

/** Fills `params` with no triggers and the default limits; NULL is a no-op. Since: 0.1. */
SIFT_API void sift_lazy_params_init(sift_lazy_params *params);

/**
 * Makes `grammar` lazy with the triggers of `params`, or eager again with
 * params = NULL. Either way the grammar is reset: a lazy one is then
 * untriggered.
 *
 * While untriggered, the grammar constrains nothing:
 * sift_grammar_accepts_token says yes to every token, sift_grammar_ban and
 * sift_grammar_ban_candidates ban nothing, and sift_grammar_is_complete
 * returns 1 (generation may end). sift_grammar_accept_token (and
 * sift_grammar_accept_bytes, as text of no token) feed the triggers; at
 * the token that fires one, the grammar starts from its root and accepts
 * the text from the trigger on, token by token (the first one cut at the
 * trigger, so token references still match by id; a token trigger feeds
 * its token whole). If the grammar rejects that text the call fails with
 * SIFT_E_GRAMMAR_REJECT and nothing changes (the trigger has not fired).
 * sift_grammar_clone copies, and sift_grammar_reset clears, the trigger
 * state.
 *
 * The grammar uses its own allocator. Errors (the grammar is unchanged;
 * err->index is the index of the trigger in its own list, and the message
 * names it, e.g. "patterns[2]: ..."):
 * - SIFT_E_ARG: NULL grammar, bad struct_size, no triggers, a NULL string,
 *   an empty word, a word with a NUL byte or longer than max_window, bad
 *   limits, token triggers on a grammar without a vocabulary;
 * - SIFT_E_TOKEN: a token id outside [0, V);
 * - SIFT_E_LIMIT: more than max_triggers triggers;
 * - SIFT_E_PATTERN_SYNTAX: a PCRE2 compile error (err->offset = the
 *   offset in the pattern, the message has PCRE2's text);
 * - SIFT_E_PATTERN_LIMIT: a pattern over 4096 bytes, or a PCRE2 compile
 *   limit;
 * - SIFT_E_NOMEM.
 * At run time, accepting a token may also fail with SIFT_E_PATTERN_LIMIT
 * (a PCRE2 limit hit, or the text passed max_text while a whole-text
 * pattern waits), the grammar unchanged. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_set_lazy(sift_grammar *grammar,
                                                          const sift_lazy_params *params,
                                                          sift_error *err);

/**
 * Returns 1 if `grammar` constrains the text now: it is not lazy, or it
 * is lazy and a trigger has fired. 0 for an untriggered lazy grammar (and
 * NULL). Since: 0.1.
 */
SIFT_API int sift_grammar_is_triggered(const sift_grammar *grammar);

/* ------------------------------------------------------------------ */
/* More grammar sources: regex, choices, structural tags              */
/* ------------------------------------------------------------------ */

/*
 * Three more ways to make the same sift_grammar object as GBNF
 * (docs/grammar.md, "Regular expressions", "Choices", "Structural
 * tags"). Each writes GBNF text and compiles it with sift_grammar_new, so
 * the grammar has the same budgets (the sift_grammar_params given) and
 * works with every sift_grammar_* call and the chain:
 *
 *     sift_grammar_from_regex(&g, "[0-9]{3}-[0-9]{4}", 17, vocab, NULL, &err);
 *
 *     static const char *const yn[] = {"yes", "no"};
 *     sift_grammar_from_choices(&g, yn, NULL, 2, vocab, NULL, &err);
 *
 *     static const char *const trig[] = {"<function="};
 *     sift_structural_tag tag = {.begin = "<function=get_weather>",
 *                                .schema = "{\"type\":\"object\"}",
 *                                .end = "</function>"};
 *     sift_grammar_from_structural_tags(&g, &tag, 1, trig, 1, vocab,
 *                                       NULL, NULL, &err);
 */

/**
 * Compiles a regular expression into a grammar whose language is the
 * texts the expression matches **as a whole** (both ends anchored, as
 * vLLM's and SGLang's `regex` requests mean it). The dialect is the
 * ECMA-262 subset of JSON Schema's `pattern` (docs/json-regex.md, "The
 * subset"): classes, `\d \w \s` and their negations, escapes, groups,
 * alternation, greedy and lazy quantifiers; `.` matches any code point
 * but `\n`, `\r`, U+2028 and U+2029. Characters are matched as
 * themselves (raw UTF-8, no JSON encoding). `^` and `$` are accepted only
 * at the start or end of a top-level alternative, where they change
 * nothing. `regex[0..len)` must be valid UTF-8 (not NUL-terminated).
 * `vocab` and `gparams` as for sift_grammar_new (gparams->root and
 * map_position are ignored). On failure *out is NULL.
 *
 * Errors (messages "regex:COL: text"; err->source "regex", err->line 1,
 * err->column the code point from 1, err->offset the byte offset in the
 * regex):
 * - SIFT_E_ARG: NULL out, NULL regex with len > 0, bad gparams;
 * - SIFT_E_PATTERN_SYNTAX: an invalid regex (unmatched parenthesis,
 *   nothing to repeat, `{3,2}`, `[z-a]`, an unknown escape, invalid UTF-8)
 *   or a feature outside the subset, whose message says "not supported"
 *   (lookaround, backreferences, `\b`, `\p{..}`, inline flags, an anchor
 *   inside the expression);
 * - SIFT_E_PATTERN_LIMIT: groups nested over 100 deep, a count over 2000,
 *   a repetition expanding to 2000 copies or more, or the grammar over
 *   gparams->max_bytes or another GBNF limit;
 * - SIFT_E_NOMEM.
 * Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_from_regex(sift_grammar **out, const char *regex,
                                                            size_t len, const sift_vocab *vocab,
                                                            const sift_grammar_params *gparams,
                                                            sift_error *err);

/**
 * Compiles a choice among strings: the grammar's language is exactly the
 * strings `choices[0 .. n_choices)` (vLLM's `choice`). Each string has
 * length `lens[i]` in bytes, or is NUL-terminated when `lens` is NULL;
 * it must be valid UTF-8 and may be empty or repeat another. The strings
 * are written as a radix tree (one rule per point where they branch), so
 * matching holds one parse stack per character that can come next, not
 * one per string that shares the text so far.
 * `vocab` and `gparams` as for sift_grammar_new (gparams->root and
 * map_position are ignored). On failure *out is NULL.
 *
 * Errors (err->index is the choice's index where one is at fault):
 * - SIFT_E_ARG: NULL out, NULL choices with n_choices > 0, no choices,
 *   a NULL string with a length > 0 ("choices[2]: NULL with length 3"),
 *   bad gparams;
 * - SIFT_E_GRAMMAR_SYNTAX: a string that is not valid UTF-8
 *   ("choices[1], offset 4: invalid UTF-8", err->offset = 4);
 * - SIFT_E_GRAMMAR_LIMIT: a string, or the grammar, over
 *   gparams->max_bytes, or another GBNF limit;
 * - SIFT_E_NOMEM.
 * Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_from_choices(
    sift_grammar **out, const char *const *choices, const size_t *lens, size_t n_choices,
    const sift_vocab *vocab, const sift_grammar_params *gparams, sift_error *err);

/**
 * One structural tag (xgrammar's): the text `begin`, then a body that a
 * JSON Schema or a GBNF grammar constrains, then the text `end`. All
 * strings are NUL-terminated UTF-8 and read during the call only.
 * Since: 0.2.
 */
typedef struct sift_structural_tag {
    const char *begin;   /**< Non-empty; must start with one of the triggers. */
    const char *schema;  /**< JSON Schema text of the body, or NULL. */
    const char *grammar; /**< GBNF of the body (start rule "root"), or NULL; exactly one of
                              schema and grammar is set. */
    const char *end;     /**< May be empty. */
} sift_structural_tag;

/**
 * Compiles structural tags for tool calls into a lazy grammar. The text
 * is free until one of `triggers` (words, matched as bytes anywhere)
 * appears; from the trigger on, the text must be the begin of a tag that
 * starts with that trigger, the tag's body, and its end; after the end
 * the text is free again, until the next trigger, any number of times.
 * Generation may end wherever the text is free (sift_grammar_is_complete
 * is 1 there), never inside a tag.
 *
 * Until the first trigger the grammar is an untriggered lazy grammar
 * (docs/triggers.md: it bans nothing, and the first trigger is found by
 * those rules). From then on the free text between tags is part of the
 * grammar (docs/grammar.md, "Structural tags"): any text in which no
 * trigger appears, as valid UTF-8 (a token whose bytes can never complete
 * a character is rejected there), the text of special tokens counted as
 * text. `sparams` (may be NULL) applies to every schema body (its
 * source_name and allocator are replaced); `vocab` and `gparams` as for
 * sift_grammar_new (the bodies' GBNF is compiled with them too; root and
 * map_position are ignored). On failure *out is NULL.
 *
 * Errors (err->index is the tag's or the trigger's index):
 * - SIFT_E_ARG: NULL out, NULL lists with counts, no tags, no triggers,
 *   bad params; a NULL, empty or invalid UTF-8 string ("tags[1].begin:
 *   empty", "triggers[0], offset 2: invalid UTF-8"); a tag with both or
 *   neither of schema and grammar; a begin that starts with no trigger
 *   ("tags[2].begin: starts with no trigger"); a trigger that starts no
 *   begin ("triggers[1]: no tag's begin starts with it"); a trigger that
 *   contains another (or repeats it);
 * - a schema body's errors as sift_json_schema_to_gbnf, with the source
 *   "tags[i].schema" and the JSON Pointer in the message
 *   ("tags[1].schema:LINE:COL: #/properties/a/not: ...");
 * - a grammar body's errors as sift_grammar_new, with the source
 *   "tags[i].grammar" ("tags[0].grammar:2:5: ...");
 * - SIFT_E_LIMIT: over 1024 tags or triggers, triggers over 64 KiB in
 *   all, or a trigger automaton of over 2^20 states x characters;
 * - SIFT_E_GRAMMAR_LIMIT: the combined grammar over gparams->max_bytes or
 *   another GBNF limit;
 * - SIFT_E_NOMEM.
 * Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_grammar_from_structural_tags(
    sift_grammar **out, const sift_structural_tag *tags, size_t n_tags, const char *const *triggers,
    size_t n_triggers, const sift_vocab *vocab, const sift_json_schema_params *sparams,
    const sift_grammar_params *gparams, sift_error *err);

/* ------------------------------------------------------------------ */
/* The chain                                                           */
/* ------------------------------------------------------------------ */

/** A sampler chain: ordered stages, an RNG, scratch buffers. */
typedef struct sift_chain sift_chain;

/** Default and hard limits (see docs/api.md). */
#define SIFT_DEFAULT_MAX_VOCAB (1 << 24)
#define SIFT_DEFAULT_MAX_HISTORY (1 << 20)
#define SIFT_DEFAULT_MAX_STAGES 256
#define SIFT_HARD_MAX_VOCAB 2147483647
#define SIFT_HARD_MAX_HISTORY (1 << 26)
#define SIFT_HARD_MAX_STAGES 4096

/**
 * Parameters of sift_chain_new. Initialise with sift_chain_params_init,
 * then set what you need; fields added later keep their defaults.
 */
typedef struct sift_chain_params {
    uint32_t struct_size;            /**< sizeof(sift_chain_params); set by _init. */
    uint64_t seed;                   /**< RNG seed; every value is valid (default 0). */
    const sift_allocator *allocator; /**< NULL = malloc/free; copied. */
    int32_t n_vocab;                 /**< Row length the chain expects; 0 = any (default). */
    int32_t max_vocab;               /**< Largest accepted row length (default 2^24). */
    int32_t max_history;             /**< Largest penalty/DRY window (default 2^20). */
    int32_t max_stages;              /**< Largest number of stages (default 256). */
} sift_chain_params;

/** Fills `params` with the defaults; NULL is a no-op. Since: 0.1. */
SIFT_API void sift_chain_params_init(sift_chain_params *params);

/**
 * Creates an empty chain. `params` may be NULL (all defaults).
 * SIFT_E_ARG if `out` is NULL, `params->struct_size` is 0 or too large, or
 * a limit is negative or above its hard cap; SIFT_E_NOMEM.
 * On failure *out is NULL. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_new(sift_chain **out,
                                                   const sift_chain_params *params,
                                                   sift_error *err);

/**
 * Frees a chain and everything it owns; NULL is a no-op, and so is a busy
 * chain (called from one of its callbacks: the call in progress still
 * uses it). Since: 0.1.
 */
SIFT_API void sift_chain_free(sift_chain *chain);

/**
 * Makes an independent deep copy of `chain`: stages, history, mirostat mu,
 * RNG state, seed and allocator. Nothing mutable is shared. Reads `chain`
 * only, and does not make it busy (custom stages' clone functions run
 * on the source unmarked; they must not change it). SIFT_E_ARG for NULL
 * pointers, SIFT_E_NOMEM, SIFT_E_STATE if a custom stage has no clone
 * function or inside a callback of the chain. On failure *out is NULL.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_clone(const sift_chain *chain, sift_chain **out,
                                                     sift_error *err);

/**
 * Restores the state the chain had when its last stage was added: the RNG
 * restarts from the seed, histories are emptied, mirostat's mu is 2*tau.
 * Buffers are kept. NULL is a no-op, and so is a busy chain (called from
 * one of its callbacks). Since: 0.1.
 */
SIFT_API void sift_chain_reset(sift_chain *chain);

/** Returns the number of stages, 0 for NULL. Safe inside a callback.
 *  Since: 0.1. */
SIFT_API size_t sift_chain_n_stages(const sift_chain *chain);

/**
 * Returns the name of stage `i` ("top_k", "dist", a custom stage's name),
 * or NULL if `i` is out of range or `chain` is NULL. Safe inside a
 * callback. Since: 0.1.
 */
SIFT_API const char *sift_chain_stage_name(const sift_chain *chain, size_t i);

/**
 * Returns the capability class stage `i` declares, and through `n` (may be
 * NULL) its bound: the number of tokens it may lower (LOWERS, -1 =
 * unbounded) or raise (RAISES), K for TOP and for top_k_ties' THRESHOLD,
 * 0 otherwise. SIFT_CLASS_WHOLE for an out-of-range `i`. Safe inside a
 * callback. Since: 0.1.
 */
SIFT_API sift_class sift_chain_stage_class(const sift_chain *chain, size_t i, int64_t *n);

/**
 * Samples one token from a whole row of logits.
 *
 * `logits[0..n_vocab)` are the raw logits; each is finite or -inf
 * (banned). The chain applies its stages in order; the last stage must be
 * a selector (greedy, dist, mirostat). The RNG advances by the draws the
 * stages make; nothing else changes until sift_chain_accept.
 *
 * Errors (nothing changes, RNG included):
 * - SIFT_E_ARG: NULL pointer, n_vocab < 1, n_vocab differs from the
 *   chain's n_vocab or from the vocabulary size of a grammar of the chain
 *   (a stage or the check grammar, lazy or not; checked before anything
 *   else, on every path: rows, slices, distributions), the chain has no
 *   final selector, or a stage refers to a token id >= n_vocab;
 * - SIFT_E_LIMIT: n_vocab above max_vocab;
 * - SIFT_E_ROW_VALUE: logits[i] is NaN or +inf (err->index = i, the first);
 * - SIFT_E_NO_CANDIDATE: every token is -inf on entry ("all N tokens are
 *   banned (-inf) in the input row", err->index = -1) or after a stage
 *   (err->index = the stage that removed the last candidate, named in
 *   the message);
 * - SIFT_E_STATE: called from inside a callback of this chain;
 * - SIFT_E_NOMEM: the first call for a given n_vocab could not size the
 *   scratch buffers.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_sample(sift_chain *chain, const float *logits,
                                                      int32_t n_vocab, int32_t *token,
                                                      sift_error *err);

/**
 * Tells the chain that `token` was emitted (a sampled token, a prompt
 * token or an accepted draft): penalty and DRY windows take it, mirostat
 * updates mu if `token` is the token the last sample returned. After a
 * sample, DRY settles here the set it will penalise at the next step (a
 * pass over its window, the work its apply did before), so that the
 * next step and sift_chain_next_k read it.
 * SIFT_E_ARG for NULL, SIFT_E_TOKEN if token < 0 or >= the row length
 * the chain knows (n_vocab, or the last row's length), SIFT_E_STATE from
 * inside a callback. On failure nothing changes. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_accept(sift_chain *chain, int32_t token,
                                                      sift_error *err);

/**
 * As sift_chain_accept for a token the model did not generate (the
 * prompt, a system message, text a runtime inserts): penalty and DRY
 * windows take it, grammars (check mode and constrain stages) do not, as
 * llama.cpp feeds its grammar generated tokens only, and min_tokens
 * does not count it (vLLM and HF count generated tokens). Errors as
 * sift_chain_accept. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_accept_prompt(sift_chain *chain, int32_t token,
                                                             sift_error *err);

/**
 * Runs every stage but the final selector on a whole row and writes the
 * distribution the selector would draw from: the surviving tokens in
 * canonical order (logit descending, id ascending) with their
 * probabilities. Nothing changes (the RNG is copied, not advanced).
 * At most `capacity` entries are written; `*n_out` receives the full count.
 * For greedy, the support is the selected token alone: one entry, p = 1.
 * A check-mode grammar (sift_chain_set_check_grammar) is not a stage and
 * does not enter: this is the distribution of the first draw; a step
 * whose first draw it rejects samples from that distribution with the
 * rejected tokens removed. For logprobs under a grammar, add it as a
 * stage (sift_chain_add_grammar). The chain need not end with a selector
 * (the report is then the softmax of what the last stage left). Errors as
 * sift_chain_sample, but for that missing selector. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_distribution(sift_chain *chain, const float *logits,
                                                            int32_t n_vocab, sift_token_prob *out,
                                                            size_t capacity, size_t *n_out,
                                                            sift_error *err);

/**
 * What the first `n_stages` stages of the chain leave of a whole row: runs
 * stages [0, n_stages) over `logits[0..n_vocab)` as sift_chain_sample
 * does and writes the surviving tokens (logit > -inf) in canonical order
 * (logit descending, id ascending) with their logits after those stages;
 * n_stages = 0 gives the row itself. At most `capacity` entries are
 * written; `*n_out` receives the full count. A debugging view (`sift
 * inspect`): nothing of the chain changes but its scratch buffers, the
 * RNG included (a stage that draws, such as xtc, draws from a copy).
 * Errors: SIFT_E_ARG for NULL pointers (`out` may be NULL with capacity
 * 0), a bad n_vocab, n_stages above sift_chain_n_stages, or a selector
 * among the stages (err->index = the stage; use sift_chain_distribution
 * for the selector's view); SIFT_E_ROW_VALUE, SIFT_E_NO_CANDIDATE,
 * SIFT_E_NOMEM as sift_chain_sample; SIFT_E_STATE inside a callback.
 * Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_survivors(sift_chain *chain, const float *logits,
                                                         int32_t n_vocab, size_t n_stages,
                                                         sift_candidate *out, size_t capacity,
                                                         size_t *n_out, sift_error *err);

/* ------------------------------------------------------------------ */
/* Slices, the analyzer and the row hook (docs/analyzer.md)            */
/*                                                                     */
/* A runtime that wants to copy less than a whole row off the device:  */
/*   1. once: sift_chain_plan(chain, &plan) -> plan.device_k (0 =      */
/*      whole row); optionally sift_chain_set_row_hook(chain, f, u);   */
/*   2. per step: k = plan.device_k (or sift_chain_next_k's device_k   */
/*      for this state), ids = sift_chain_extras(...); on the device   */
/*      take a top-k of (id, logit) pairs (any order, any tie choice)  */
/*      and the logits of `ids`; build a zeroed sift_slice;            */
/*      sift_chain_sample_slice(chain, &slice, &tok, &err);            */
/*      sift_chain_accept(chain, tok, &err).                           */
/* The token, the RNG state and the state after accept are bitwise the */
/* ones sift_chain_sample gives on the whole row. When the slice cannot */
/* decide a step, sift calls the row hook (and continues on the whole  */
/* row) or, with no hook, returns SIFT_E_NEED_ROW with nothing changed. */
/* plan.k is for canonical slices (sift_slicer, SIFT_SLICE_CANONICAL): */
/* an EXACT plan's k always decides them. plan.device_k = k + 8 is for */
/* device top-k sets, which need the row only when ties span the 8     */
/* (docs/analyzer.md, "The k a device slice needs").                   */
/* ------------------------------------------------------------------ */

/**
 * sift_slice.flags: the prefix is exactly Prefix(k), the row's first k
 * tokens in canonical order (logit descending, ties by ascending id).
 * sift_slicer_build sets it; a device kernel that sorts by (logit, -id)
 * may. It sharpens the certificate: every absent token then ranks after
 * the last prefix token, ties included. Since: 0.2.
 */
#define SIFT_SLICE_CANONICAL 1u

/**
 * sift_slice.flags: sift_slice.tail_mass is set. sift reads tail_mass
 * only when this bit is set, so a caller that never sets it keeps
 * working (the free bound is used instead). Since: 0.2.
 */
#define SIFT_SLICE_TAIL_MASS 2u

/**
 * What a runtime hands sift instead of a whole row: the row's length,
 * k of its largest logits and the logits of the extra tokens the chain
 * asked for (sift_chain_extras) that are not among them. All arrays are
 * read-only for sift and only during the call. Zero-initialise it
 * (`sift_slice s = {0};`) so that flags and tail_mass read as 0. Its size
 * never changes (see ABI: it is the stride of the slice arrays of
 * sift_verifier_plan and sift_chains_sample), so new inputs of a slice
 * step come beside it, in the struct of the call that reads them (the
 * row's log-sum-exp: sift_logprobs.row_lse).
 *
 * By default (flags = 0) the prefix is what a device top-k returns: the
 * k largest logits as a set, in any order, with any choice among the
 * tokens tied at the smallest of them. sift orders it itself (O(k) when
 * it comes sorted by logit) and treats every absent token as possibly
 * equal to the smallest present logit, with any id: a step whose outcome
 * depends on which of those tied tokens are present needs the row (the
 * hook, or SIFT_E_NEED_ROW), never a different token. With
 * SIFT_SLICE_CANONICAL the prefix must be exactly Prefix(k), in that
 * order (docs/analyzer.md, "The slice contract").
 */
typedef struct sift_slice {
    int32_t n_vocab;              /**< V, the whole row's length. */
    int32_t n_prefix;             /**< k, 1 <= k <= V. */
    const sift_candidate *prefix; /**< k largest logits (any order; see flags). */
    int32_t n_extras;             /**< Entries in `extras`, >= 0. */
    const sift_candidate *extras; /**< Extra tokens (any order), none of them in the prefix. */
    uint32_t flags; /**< SIFT_SLICE_CANONICAL, SIFT_SLICE_TAIL_MASS or 0; other bits are an
                       error. Since: 0.2. */
    /**
     * Read only with SIFT_SLICE_TAIL_MASS: an upper bound on the mass of
     * the tokens the slice does not hold (neither prefix nor extras),
     * relative to the row's largest logit m: tail_mass >= the sum over
     * those tokens of exp(l_i - m) in real arithmetic; any larger number
     * is allowed (the sum over every token outside the prefix is one).
     * A device computes it in the pass of its top-k, rounded up. It lets
     * top_p, dist, xtc and mirostat (after penalties and temperature) be
     * decided on the slice; a loose value only makes the row hook more frequent, a value
     * below the true sum may give a different token. Without the flag
     * sift uses the free bound (V - k) exp(l_min - m). NaN, negative or
     * infinite is SIFT_E_SLICE (docs/analyzer.md, "Tail mass"). Since: 0.2.
     */
    double tail_mass;
} sift_slice;

/**
 * The row hook: writes the whole row of the current step, `n_vocab`
 * floats, into `row` (a buffer sift owns) and returns 0, or returns any
 * non-zero value to report a failure (sift then returns SIFT_E_HOOK and
 * changes nothing). It runs inside a chain call: calling back into the
 * chain, or any other object that call made busy, gets SIFT_E_STATE (see
 * "Callbacks and re-entrancy").
 */
typedef int (*sift_row_hook)(void *user, float *row, int32_t n_vocab);

/**
 * Sets (or, with hook = NULL, clears) the chain's row hook. `user` is
 * passed back unchanged. Clones do not inherit it.
 * SIFT_E_ARG for a NULL chain, SIFT_E_STATE inside a callback. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_set_row_hook(sift_chain *chain, sift_row_hook hook,
                                                            void *user, sift_error *err);

/**
 * Samples one token from a slice; the same result as sift_chain_sample on
 * the row the slice was taken from, bit for bit.
 *
 * The slice is validated in O(k + extras) first:
 * - SIFT_E_SLICE: n_prefix < 1 or > n_vocab, NULL arrays, unknown flag
 *   bits, an id outside [0, V), an id twice (err->index = the id), an
 *   extra token above the prefix's smallest logit (with
 *   SIFT_SLICE_CANONICAL: the prefix out of canonical order, err->index =
 *   the position, or an extra ranking before its last token), or an
 *   extra the chain asked for missing (err->index = the id);
 * - SIFT_E_ROW_VALUE: NaN or +inf in the slice (err->index = the id);
 * - SIFT_E_ARG, SIFT_E_LIMIT: as sift_chain_sample for n_vocab.
 * When the slice cannot decide the step: with a hook, sift calls it once,
 * checks that the row agrees with the slice (SIFT_E_HOOK if the hook
 * fails or if a slice token's logit differs, or a token absent from the
 * prefix has a logit above its smallest one, or with
 * SIFT_SLICE_CANONICAL ranks before its last token) and samples the
 * whole row; without
 * a hook it returns SIFT_E_NEED_ROW. Every failure changes nothing, RNG
 * included. The first call that needs the whole row sizes the row
 * buffers (SIFT_E_NOMEM if that fails); a grammar stage before the first
 * truncation that cannot list the tokens it allows is SIFT_E_NOMEM or
 * SIFT_E_GRAMMAR_LIMIT. A slice whose prefix starts at -inf is a row of
 * -inf: SIFT_E_NO_CANDIDATE, as sift_chain_sample. With cross-check
 * mode on (sift_chain_set_cross_check), a due step whose slice or token
 * disagrees with the whole row is SIFT_E_SLICE_MISMATCH, nothing
 * changed. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_sample_slice(sift_chain *chain,
                                                            const sift_slice *slice, int32_t *token,
                                                            sift_error *err);

/**
 * sift_chain_distribution on a slice: the tokens of the final
 * distribution of this step in canonical order, with their probabilities:
 * the distribution after the chain (llama.cpp's post_sampling_probs), not
 * the raw softmax that OpenAI, vLLM and llama-server return as logprobs
 * by default, which needs the whole row. Exact on the
 * slice whenever the plan is not WHOLE_ROW and the slice decides; else
 * the row hook or SIFT_E_NEED_ROW, as sift_chain_sample_slice. Nothing
 * changes. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_distribution_slice(sift_chain *chain,
                                                                  const sift_slice *slice,
                                                                  sift_token_prob *out,
                                                                  size_t capacity, size_t *n_out,
                                                                  sift_error *err);

/* ------------------------------------------------------------------ */
/* Logprobs in the sampling call                                       */
/*                                                                     */
/* sift_chain_sample_logprobs and sift_chain_sample_slice_logprobs     */
/* sample as sift_chain_sample / sift_chain_sample_slice do (the same  */
/* token, RNG and state, bit for bit) and report, in the same call,    */
/* the sampled token's logprob and the top n alternatives: raw (the    */
/* log-softmax of the row as the model gave it, what OpenAI and vLLM   */
/* return by default) and/or processed (the distribution after the     */
/* chain, as sift_chain_distribution reports it). The chain runs once. */
/* ------------------------------------------------------------------ */

/** sift_logprobs.flags: report raw logprobs (the row's log-softmax). Since: 0.3. */
#define SIFT_LOGPROBS_RAW 1u
/** sift_logprobs.flags: report processed logprobs (after the chain). Since: 0.3. */
#define SIFT_LOGPROBS_PROCESSED 2u
/**
 * sift_logprobs.flags: sift_logprobs.row_lse holds the row's
 * log-sum-exp (slices; see row_lse). Ignored on a whole row. Since: 0.3.
 */
#define SIFT_LOGPROBS_ROW_LSE 4u

/**
 * One reported token: its id, its logit and its logprob. For raw
 * entries the logit is the row's and p = exp(logprob); for processed
 * entries the logit and p are bitwise the ones sift_chain_distribution
 * reports for that token and logprob = ln(p) by sift's own logarithm
 * (accurate to about 1e-15, the same bits on every platform), -inf
 * where p = 0.
 */
typedef struct sift_logprob {
    int32_t id;     /**< Token id. */
    float logit;    /**< Raw: the row's logit; processed: after the stages before the selector. */
    double logprob; /**< ln of the probability. */
    double p;       /**< The probability. */
} sift_logprob;

/**
 * The request and the result of a logprobs call. Set struct_size to
 * sizeof(sift_logprobs) (any other value is SIFT_E_ARG: this is the
 * struct's first layout; later ones grow at the end, see ABI), the
 * inputs, and zero the rest (`sift_logprobs lp = {.struct_size = sizeof
 * lp, ...}`). The output arrays belong to the caller and are written
 * only during the call.
 *
 * Raw values on a whole row are computed from the row in float64:
 * lse = m + ln(sum_i exp(l_i - m)) over the finite logits (m the
 * largest, each term by sift's own double exp, summed in row order), and
 * a token's raw logprob is l_i - lse rounded once. Its error is at most
 * about V * 2^-53 (the float64 sum) plus a few roundings of the values
 * involved: below 1e-9 for V <= 2^22 and |logits| < 1e5
 * (tests/check_logprobs.c compares it with a float64 log-softmax at
 * that tolerance). A -inf logit has raw logprob -inf.
 *
 * On a slice the row is not there: raw logprobs need the row's
 * log-sum-exp from the device (SIFT_LOGPROBS_ROW_LSE and row_lse, one
 * more reduction in the pass of its top-k), and without it sift asks
 * for the row (the row hook, or SIFT_E_NEED_ROW): it does not report an
 * interval. Processed values never need the LSE.
 */
typedef struct sift_logprobs {
    uint32_t struct_size; /**< sizeof(sift_logprobs). */
    /** In: SIFT_LOGPROBS_RAW, SIFT_LOGPROBS_PROCESSED (at least one of
     * them) and SIFT_LOGPROBS_ROW_LSE; other bits are SIFT_E_ARG. */
    uint32_t flags;
    /** In: alternatives wanted per kind asked for; 0 reports only the
     * sampled token. At most the row's length (whole row) or the
     * slice's n_prefix (slice): more is SIFT_E_ARG. */
    size_t n_top;
    /** In: room for n_top entries when RAW is asked and n_top > 0 (else
     * may be NULL). Out: the row's n_top largest logits in canonical
     * order (logit descending, id ascending) with their raw logprobs. */
    sift_logprob *raw_top;
    /** In: room for n_top entries when PROCESSED is asked and n_top > 0
     * (else may be NULL). Out: the first n_top entries of
     * sift_chain_distribution's report (canonical order). */
    sift_logprob *processed_top;
    /**
     * In, read only with SIFT_LOGPROBS_ROW_LSE on a slice: ln(sum_i
     * exp(l_i)) over the whole row's finite logits. Raw logprobs are then
     * l_i - row_lse: their error is row_lse's error plus one rounding.
     * Computed as m + log(sum exp(l_i - m)) in float64 its error is below
     * V * 2^-52 (about 5e-11 at V = 248,320); a float32 reduction is off
     * by up to about 1e-7 * log-range and the logprobs with it. NaN,
     * infinite, below the slice's largest logit or above it by more than
     * ln(V) + 1e-6 is SIFT_E_ARG: compute it in the form m + log(sum
     * exp(l_i - m)), in float32 too, which is never below m (a direct
     * log(sum exp(l_i)) may round below m on a peaked row).
     */
    double row_lse;
    sift_logprob raw;       /**< Out (RAW): the sampled token's raw entry. */
    sift_logprob processed; /**< Out (PROCESSED): the sampled token's processed entry. */
    size_t n_raw_top;       /**< Out: entries written to raw_top (n_top, or 0 without RAW). */
    /** Out: entries written to processed_top: min(n_top, n_support). */
    size_t n_processed_top;
    /** Out (PROCESSED): the size of the processed distribution (its
     * support), as sift_chain_distribution's *n_out. */
    size_t n_support;
    double lse; /**< Out (RAW): the log-sum-exp the raw values used. */
} sift_logprobs;

/**
 * sift_chain_sample with logprobs: the same token, RNG and state as
 * sift_chain_sample on this row, and the logprobs `lp` asks for, from
 * one pass of the chain over the row.
 *
 * Processed values are the distribution the selector draws from, bit
 * for bit sift_chain_distribution's on this row at this state: with a
 * check-mode grammar (not a stage) that is the first draw's; a token it
 * made the step resample gets its p there (0 and -inf outside that
 * support). Raw values: see sift_logprobs.
 *
 * Errors: those of sift_chain_sample, and SIFT_E_ARG for a NULL `lp`, a
 * wrong struct_size, unknown flag bits or neither kind, n_top above
 * n_vocab, or a NULL array for a kind asked for with n_top > 0. On
 * failure nothing of the chain changes, RNG included, and `lp` is left
 * as it was. With PROCESSED the step takes the full pass over the row
 * (not the prefix fast path of sift_chain_sample); RAW alone takes
 * sift_chain_sample's own step. RAW adds one pass for the log-sum-exp
 * and one top-n for the alternatives.
 * Since: 0.3.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_sample_logprobs(sift_chain *chain,
                                                               const float *logits, int32_t n_vocab,
                                                               int32_t *token, sift_logprobs *lp,
                                                               sift_error *err);

/**
 * sift_chain_sample_slice with logprobs: the same token, RNG and state
 * as sift_chain_sample_slice on this slice (so as sift_chain_sample on
 * the row), and the logprobs `lp` asks for.
 *
 * The slice decides the step when it decides sift_chain_distribution_slice
 * (PROCESSED asked) or sift_chain_sample_slice (RAW only), and, for RAW,
 * when lp carries SIFT_LOGPROBS_ROW_LSE and the n_top alternatives are
 * certain: with SIFT_SLICE_CANONICAL always; with a device top-k set when
 * the n_top-th largest logit is above the prefix's smallest (else absent
 * tokens tied there could rank before it). Otherwise sift calls the row
 * hook and answers from the row (raw values then from the row, row_lse
 * unused), or returns SIFT_E_NEED_ROW with nothing changed.
 *
 * Errors: those of sift_chain_sample_slice and of
 * sift_chain_sample_logprobs (n_top is bounded by the slice's n_prefix),
 * and SIFT_E_ARG for a bad row_lse (see sift_logprobs). On failure the
 * chain is unchanged, RNG included; `lp` is left as it was, except after
 * a cross-check mismatch (SIFT_E_SLICE_MISMATCH, where the outputs may
 * have been written). Since: 0.3.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_sample_slice_logprobs(
    sift_chain *chain, const sift_slice *slice, int32_t *token, sift_logprobs *lp, sift_error *err);

/** How far a plan's k can be trusted. */
typedef enum sift_guarantee {
    /** For canonical slices: a canonical slice of plan.k (exactly
     * Prefix(k), as sift_slicer_build gives it; SIFT_SLICE_CANONICAL),
     * plus the extras, always decides the step. Not a promise for device
     * slices (flags = 0: any order, any choice among the tokens tied at
     * the smallest logit): a device top-k of exactly plan.k never decides
     * a step whose k ends at a TOP stage's boundary, and one of
     * plan.device_k needs the row (the hook or SIFT_E_NEED_ROW) only when
     * a tie at the boundary runs on to the device_k-th largest logit
     * (0.2 % of the measured bf16 rows, none of the fp16 or float32 ones;
     * docs/analyzer.md, "The k a device slice needs"). */
    SIFT_GUARANTEE_EXACT = 0,
    /** No static bound: each step checks its certificate and may need the
     * row (hook); k is the recommended prefix length. */
    SIFT_GUARANTEE_CERTIFIED = 1,
    /** A stage reads the whole distribution before any truncation: k = 0. */
    SIFT_GUARANTEE_WHOLE_ROW = 2
} sift_guarantee;

/** Returns "exact", "certified" or "whole_row"; never NULL. Since: 0.1. */
SIFT_API const char *sift_guarantee_str(sift_guarantee g);

/** Capacity of sift_plan.why and sift_plan_stage.why, NUL included. */
#define SIFT_PLAN_WHY_MAX 256

/**
 * The analyzer's answer for a chain (sift_chain_plan, sift_chain_next_k).
 * Set struct_size to sizeof(sift_plan) before the call (since 0.2):
 * sift writes only that many bytes.
 */
typedef struct sift_plan {
    uint32_t struct_size;        /**< Set by the caller; sift reads it only. Since: 0.2. */
    int32_t k;                   /**< Prefix length to copy; 0 = the whole row. */
    sift_guarantee guarantee;    /**< What k promises. */
    int32_t recommended_k;       /**< = k (0 for WHOLE_ROW): the k for canonical slices;
                                      device top-k sets use device_k. */
    int32_t max_extras;          /**< Most extra ids a step can ask for (0 = none). */
    int32_t decided_at;          /**< Stage whose truncation decides; -1 = none. */
    char why[SIFT_PLAN_WHY_MAX]; /**< The sum in words: "top_k 20 + penalties 64 = 84". */
    /**
     * The prefix length to copy when the prefix is a device top-k (flags
     * without SIFT_SLICE_CANONICAL: any order, any choice among the tokens
     * tied at its smallest logit): k + SIFT_PLAN_DEVICE_MARGIN, at most
     * the chain's n_vocab when it knows it; 0 with k = 0 (the whole row).
     * Why a margin: a device set's bound on an absent token is "logit <=
     * the smallest present one, any id", so a TOP(K) boundary is decided
     * only by a set of k' > K tokens whose K-th largest logit is strictly
     * above its smallest; a device set of exactly k never decides a step
     * whose k ends at a TOP boundary, and one of k + m needs the row only
     * when the row's K-th to (K + m)-th largest logits are all equal. No
     * k' below V always decides (a row of equal logits); the hook rate at
     * device_k, per chain and per row precision, is measured in
     * docs/analyzer.md ("The k a device slice needs"). Written only when
     * struct_size covers it. Since: 0.3.
     */
    int32_t device_k;
} sift_plan;

/** What sift_plan.device_k adds to sift_plan.k (docs/analyzer.md, "The k
 *  a device slice needs"). Since: 0.3. */
#define SIFT_PLAN_DEVICE_MARGIN 8

/**
 * One stage's part of a plan. Set struct_size of every element to
 * sizeof(sift_plan_stage) before sift_chain_plan (since 0.2): the first
 * element's struct_size is the stride of the array, and sift writes only
 * that many bytes of each element.
 */
typedef struct sift_plan_stage {
    uint32_t struct_size;        /**< Set by the caller; sift reads it only. Since: 0.2. */
    sift_class cls;              /**< The class the stage declares now. */
    int64_t n;                   /**< Its bound (sift_chain_stage_class). */
    int32_t k;                   /**< What the stage adds to the plan's k (its K, the tokens
                                      it lowers, a margin); 0 = nothing. */
    char why[SIFT_PLAN_WHY_MAX]; /**< What the stage adds, in words. */
} sift_plan_stage;

/**
 * The static plan, from the configuration alone (no state): k, its
 * guarantee and the reason. `stages` may be NULL, or an array of
 * sift_chain_n_stages(chain) entries that receive the per-stage trace.
 * Safe on a chain shared between threads (reads only).
 * SIFT_E_ARG for NULL chain or plan, a plan->struct_size 0 or above
 * sizeof(sift_plan), a stages[0].struct_size 0 or above
 * sizeof(sift_plan_stage), or an element whose struct_size differs from
 * the first (err->index = its position); nothing is written then.
 * SIFT_E_STATE inside a callback of the chain.
 * Since: 0.1; struct_size since 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_plan(const sift_chain *chain, sift_plan *plan,
                                                    sift_plan_stage *stages, sift_error *err);

/**
 * The dynamic plan, from the chain's current state: lowering stages count
 * what they can lower now (the distinct tokens in a penalty window, the
 * DRY window's length), so k is never above the static plan's. Use it
 * for the next sample only. SIFT_E_ARG for NULL or a bad
 * plan->struct_size (as sift_chain_plan), SIFT_E_STATE inside a callback
 * of the chain. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_next_k(const sift_chain *chain, sift_plan *plan,
                                                      sift_error *err);

/**
 * The k for a batch of chains sampled together: the largest dynamic k, or
 * 0 if any chain needs the whole row (0 also for n = 0, where `chains`
 * may be NULL). All or nothing: sift_chains_next_k_batch gives each
 * slot's k and the slots that need whole rows. SIFT_E_ARG for a NULL
 * `k`, NULL `chains` with n > 0, or a NULL chain in the array
 * (err->index = its position); SIFT_E_STATE for a busy chain in it
 * (err->index = its position). Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chains_next_k(const sift_chain *const *chains, size_t n,
                                                       int32_t *k, sift_error *err);

/**
 * A batch's plan for its next step (sift_chains_next_k_batch). Set
 * struct_size to sizeof(sift_batch_k) before the call: sift writes only
 * that many bytes. Since: 0.2.
 */
typedef struct sift_batch_k {
    uint32_t struct_size;     /**< Set by the caller; sift reads it only. */
    int32_t k;                /**< Largest dynamic k among the slots that can use a
                                   slice; 0 when none can (or n = 0). */
    size_t n_slice;           /**< Slots that can use a slice (k_each[i] > 0). */
    size_t n_whole;           /**< Slots that need whole rows (k_each[i] = 0). */
    int32_t max_extras;       /**< Largest plan max_extras among the slice slots. */
    sift_guarantee guarantee; /**< The weakest guarantee among the slice
                                   slots; WHOLE_ROW when there are none. */
} sift_batch_k;

/**
 * The plan of a batch of chains sampled together, slot by slot, so that a
 * runtime copies whole rows only for the slots that need them. Reads each
 * chain's dynamic plan (sift_chain_next_k) and writes:
 * - `k_each` (NULL, or n entries): slot i's dynamic k, 0 = whole row;
 * - `whole` (NULL, or n entries): the positions of the slots whose k is
 *   0, ascending, in whole[0 .. batch->n_whole); the rest is untouched;
 * - `batch`: the largest k among the other slots, their count, their
 *   largest max_extras and their weakest guarantee.
 * A canonical slice of any k' >= k_each[i] (at most the row's length)
 * serves slot i too, with the same guarantee, so one top-k of batch->k
 * for every slice slot is enough when the slices are canonical; a device
 * top-k in any order with its own tie choices takes batch->k +
 * SIFT_PLAN_DEVICE_MARGIN (at most the row's length), as sift_plan's
 * device_k does for one chain; each slot still gathers its own extras
 * (sift_chain_extras). Unlike sift_chains_next_k, one slot that needs the
 * whole row does not send the others to whole rows. Reads the chains
 * only (safe on chains shared between threads; no allocation).
 * SIFT_E_ARG (nothing written) for a NULL `batch`, NULL `chains` with
 * n > 0, a NULL chain in the array (err->index = its position), or a
 * batch->struct_size 0 or above sizeof(sift_batch_k); SIFT_E_STATE
 * (nothing written) for a busy chain in the array (err->index = its
 * position). Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chains_next_k_batch(const sift_chain *const *chains,
                                                             size_t n, int32_t *k_each,
                                                             size_t *whole, sift_batch_k *batch,
                                                             sift_error *err);

/**
 * The extra token ids the next sample needs beside the prefix, ascending
 * and unique: tokens a stage before the first truncation may raise
 * (positive logit biases, the window of a raising penalty) and, for a
 * grammar stage there, the tokens the grammar allows when there are at
 * most 32 of them (forced tokens: with them present the slice decides
 * the step; docs/analyzer.md). `*n` receives the count; SIFT_E_LIMIT when
 * it exceeds `capacity` (nothing written; call again with
 * sift_plan.max_extras entries). SIFT_E_ARG for NULL pointers;
 * SIFT_E_STATE inside a callback of the chain; SIFT_E_NOMEM or SIFT_E_GRAMMAR_LIMIT when a grammar
 * stage cannot list the tokens it allows (never a shorter list). With a grammar stage this updates
 * the grammar's caches, so the chain is not const: it is a use of the chain (one thread at a time,
 * as a sample); the sampling state (RNG, histories, grammar matching state) is unchanged. Since:
 * 0.1; a non-const chain since 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_extras(sift_chain *chain, int32_t *ids,
                                                      size_t capacity, size_t *n, sift_error *err);

/**
 * Counters of a chain's slice and prefix paths (sift_chain_stats). Set
 * struct_size to sizeof(sift_stats) before the call (since 0.2).
 */
typedef struct sift_stats {
    uint32_t struct_size;         /**< Set by the caller; sift reads it only. Since: 0.2. */
    uint64_t slice_decided;       /**< sift_chain_sample_slice steps decided on the slice. */
    uint64_t hook_calls;          /**< Row hook calls. */
    uint64_t need_row;            /**< SIFT_E_NEED_ROW returns. */
    uint64_t row_prefix_decided;  /**< Whole-row steps decided from the row's prefix. */
    uint64_t row_prefix_fallback; /**< Whole-row steps that tried the prefix, then ran the row. */
    uint64_t grammar_resamples;   /**< Steps whose check grammar rejected the first token. */
    /** Cross-checks run (sift_chain_set_cross_check): due slice steps
     * compared with the whole row. Since: 0.2. */
    uint64_t cross_checks;
    /** Cross-checks that found a mismatch (SIFT_E_SLICE_MISMATCH). Since: 0.2. */
    uint64_t cross_check_mismatches;
    /** Due cross-checks skipped because no row hook was set. Since: 0.2. */
    uint64_t cross_check_skipped;
} sift_stats;

/**
 * Copies the chain's counters into the first stats->struct_size bytes of
 * `stats`. SIFT_E_ARG (nothing written) for NULL pointers or a
 * struct_size 0 or above sizeof(sift_stats). Reads the chain only; safe
 * inside a callback (the counters so far). Since: 0.1; struct_size and
 * the status since 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_stats(const sift_chain *chain, sift_stats *stats,
                                                     sift_error *err);

/**
 * Cross-check mode, how an operator finds a broken device kernel: on some
 * successful sift_chain_sample_slice steps, sift fetches the whole row
 * through the row hook and checks the slice and the token against it.
 *
 * A step is due when it is the every_n-th successful slice step since
 * this call (every_n = 0: never by count), or with `probability` (0 to
 * 1; 0: never by chance), drawn from an RNG of its own seeded with
 * `seed`, so the chain's RNG stream and its tokens are bitwise the same
 * with the mode on or off. every_n = 0 and probability = 0 turn the mode
 * off. Each call restarts the count and reseeds the check's RNG; the
 * schedule moves only on steps that return SIFT_OK, and
 * sift_chain_reset does not restart it. Clones inherit the setting and
 * the schedule (not the hook, so a clone skips its due checks until it
 * has one).
 *
 * On a due step decided on the slice, sift calls the hook once and
 * checks, in this order: every slice token's logit equals the row's, bit
 * for bit; the prefix holds the row's k largest logits (by value: any
 * choice among the tokens tied at the smallest is right, unless the
 * slice has SIFT_SLICE_CANONICAL, when it must be exactly Prefix(k) in
 * order); sampling the whole row from the same RNG state gives the same
 * token and RNG state. The first failure is SIFT_E_SLICE_MISMATCH,
 * with err->index the first wrong position: the prefix entry (its index
 * in slice.prefix as passed, extras[j] as n_prefix + j) whose value
 * disagrees with the row or that is not among the row's k largest
 * (canonical: the first position that differs from Prefix(k)), or -1
 * when the set is right but the token differs; the message names the
 * tokens and logits. A mismatch leaves the chain as it was before the
 * call (RNG, *token and every state; the schedule does not move, so a
 * retry checks again) and counts in sift_stats.cross_check_mismatches.
 * A failing hook or a row with NaN or +inf is SIFT_E_HOOK, nothing
 * changed. A due step that needed the row anyway was already checked
 * against it (the hook's row, "row hook" above) and counts as a
 * cross-check; a due step without a hook is skipped and counted in
 * cross_check_skipped. The first check sizes the row and scratch buffers
 * for the row's length (SIFT_E_NOMEM if that fails). Cross-checks do
 * not count as hook_calls, and sift_chain_distribution_slice is never
 * cross-checked.
 *
 * SIFT_E_ARG for a NULL chain or a probability that is NaN or outside
 * [0, 1]; SIFT_E_STATE inside a callback. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_set_cross_check(sift_chain *chain, uint32_t every_n,
                                                               double probability, uint64_t seed,
                                                               sift_error *err);

/** A slice builder: the CPU reference of a device top-k. */
typedef struct sift_slicer sift_slicer;

/**
 * Creates a slice builder for rows of up to `max_vocab` tokens (its
 * buffers are sized once). `allocator` may be NULL. SIFT_E_ARG for NULL
 * `out` or max_vocab < 1, SIFT_E_LIMIT above 2^24, SIFT_E_NOMEM.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_slicer_new(sift_slicer **out, int32_t max_vocab,
                                                    const sift_allocator *allocator,
                                                    sift_error *err);

/** Frees a slice builder; NULL is a no-op. Since: 0.1. */
SIFT_API void sift_slicer_free(sift_slicer *slicer);

/**
 * Builds the slice of `row[0..n_vocab)` for prefix length k (clamped to
 * n_vocab) and the extra ids `ids[0..n_ids)` (duplicates and ids already
 * in the prefix are dropped): `*slice` points into the builder's buffers,
 * valid until the next build or free. Runs in one pass over the row
 * without sorting it. SIFT_E_ARG for NULL pointers, k < 1, n_vocab < 1 or
 * above max_vocab; SIFT_E_TOKEN for an id outside [0, n_vocab);
 * SIFT_E_ROW_VALUE for NaN or +inf (err->index = the first);
 * SIFT_E_NO_CANDIDATE if every value is -inf. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_slicer_build(sift_slicer *slicer, const float *row,
                                                      int32_t n_vocab, int32_t k,
                                                      const int32_t *ids, size_t n_ids,
                                                      sift_slice *slice, sift_error *err);

/* ------------------------------------------------------------------ */
/* Stages. Each adds one stage at the end of the chain, all or nothing: */
/* on failure the chain is unchanged. Parameter math, defaults and     */
/* ranges: docs/samplers.md. All return SIFT_E_ARG for a NULL chain or  */
/* a parameter out of range (the message names it), SIFT_E_LIMIT when   */
/* max_stages is reached, SIFT_E_NOMEM, SIFT_E_STATE inside a callback. */
/* ------------------------------------------------------------------ */

/** Selector: the canonical first token (largest logit, smallest id). Since: 0.1. */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_greedy(sift_chain *chain, sift_error *err);

/**
 * Selector: draws from the softmax of the current logits, walking tokens in
 * canonical order. One 64-bit RNG output per draw; none with one
 * candidate. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_dist(sift_chain *chain, sift_error *err);

/**
 * Selector: as dist, but the walk visits the candidates in ascending id
 * order (the convention of some predictor-style runtimes). Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_dist_id_order(sift_chain *chain,
                                                                 sift_error *err);

/**
 * Keeps the `k` canonical first tokens. k <= 0 is a no-op; k above the
 * number of candidates keeps them all. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_top_k(sift_chain *chain, int32_t k,
                                                         sift_error *err);

/**
 * As top_k, but also keeps every token whose logit equals the k-th
 * token's logit (the cut never splits a tie). Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_top_k_ties(sift_chain *chain, int32_t k,
                                                              sift_error *err);

/**
 * Nucleus: keeps the shortest canonical prefix whose probability mass is
 * >= p, and at least max(min_keep, 1) tokens. p in [0, 1]; p >= 1 is a
 * no-op, p = 0 keeps max(min_keep, 1). min_keep >= 0. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_top_p(sift_chain *chain, float p,
                                                         int32_t min_keep, sift_error *err);

/**
 * Keeps tokens whose logit is >= max + ln(p) (probability >= p * p_max),
 * and at least max(min_keep, 1). p in [0, 1]; p = 0 is a no-op.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_min_p(sift_chain *chain, float p,
                                                         int32_t min_keep, sift_error *err);

/**
 * Locally typical sampling: keeps the tokens whose surprise is closest to
 * the entropy until their mass exceeds p. p in [0, 1]; p >= 1 is a no-op.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_typical(sift_chain *chain, float p,
                                                           int32_t min_keep, sift_error *err);

/**
 * Epsilon sampling (Hugging Face's epsilon_cutoff): keeps the tokens
 * whose probability is at least `epsilon`, and at least max(min_keep, 1)
 * tokens (the canonical first ones when fewer pass; all of them if there
 * are fewer). Probabilities are sift's exact masses: a token passes when
 * its weight w_i >= ceil(epsilon * W) (docs/samplers.md, "epsilon").
 * epsilon in [0, 1]; epsilon = 0 is a no-op. min_keep >= 0. SIFT_E_ARG
 * for a value out of range (the chain is unchanged), SIFT_E_NOMEM,
 * SIFT_E_STATE inside a callback. Class: threshold (certified on slices
 * when the absent tokens cannot matter, docs/analyzer.md). Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_epsilon(sift_chain *chain, float epsilon,
                                                           int32_t min_keep, sift_error *err);

/**
 * Eta sampling (Hugging Face's eta_cutoff): with H the entropy of the
 * candidates in nats, keeps the tokens whose probability is at least
 * min(eta, sqrt(eta) * exp(-H)) (rounded to float once), and at least
 * max(min_keep, 1) tokens (the canonical first ones when fewer pass).
 * Masses are exact and H is typical's id-order sum (docs/samplers.md,
 * "eta"). eta in [0, 1]; eta = 0 is a no-op. min_keep >= 0. SIFT_E_ARG
 * for a value out of range (the chain is unchanged), SIFT_E_NOMEM,
 * SIFT_E_STATE inside a callback. Class: whole (the entropy reads every
 * candidate). Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_eta(sift_chain *chain, float eta,
                                                       int32_t min_keep, sift_error *err);

/**
 * Divides logits by `temp`. temp = 1 is a no-op; temp <= 0 keeps only the
 * canonical first token (greedy), and so does a temperature so small that
 * the largest logit divided by it overflows. NaN or infinite temp is
 * SIFT_E_ARG.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_temp(sift_chain *chain, float temp,
                                                        sift_error *err);

/**
 * Dynamic temperature: the temperature moves in [max(0, temp - delta),
 * temp + delta] with the normalised entropy raised to `exponent`.
 * delta = 0 is plain temperature. temp, delta and exponent must be finite;
 * delta < 0 or exponent <= 0 is SIFT_E_ARG. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_temp_ext(sift_chain *chain, float temp,
                                                            float delta, float exponent,
                                                            sift_error *err);

/**
 * Exclude Top Choices: with chance `probability` removes every token whose
 * probability is >= threshold (and > 0) except the least likely of them.
 * probability in [0, 1], threshold in [0, 1]; probability 0 or threshold
 * > 0.5 is a no-op. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_xtc(sift_chain *chain, float probability,
                                                       float threshold, int32_t min_keep,
                                                       sift_error *err);

/**
 * Keeps tokens whose logit is >= max - n * sigma (sigma: standard
 * deviation of the finite logits). n <= 0 is a no-op; NaN or +-inf is
 * SIFT_E_ARG.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_top_n_sigma(sift_chain *chain, float n,
                                                               sift_error *err);

/**
 * Selector: mirostat v1 with target surprise `tau`, learning rate `eta`,
 * `m` tokens for the Zipf estimate, `n_vocab` the vocabulary size used in
 * the formula. tau, eta finite and >= 0; m >= 1; n_vocab >= 1. mu starts
 * at 2 tau and moves on accept. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_mirostat(sift_chain *chain, int32_t n_vocab,
                                                            float tau, float eta, int32_t m,
                                                            sift_error *err);

/** Selector: mirostat v2 (tau, eta as for v1). Since: 0.1. */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_mirostat_v2(sift_chain *chain, float tau,
                                                               float eta, sift_error *err);

/**
 * Selector: adaptive-p (llama.cpp's adaptive_p sampler). Each step turns
 * the candidates' probabilities p_i into logits 5 - 10 d^2 / (1 + d) with
 * d = |p_i - A| / 0.3, where the adapted target A = clamp(2 target -
 * s / t, 0, 1) comes from a moving average of the probabilities of the
 * accepted tokens (s = target / (1 - decay), t = 1 / (1 - decay) at
 * creation and reset), then draws as dist does over the new logits (one
 * 64-bit RNG output; none with one candidate). Accepting the sampled
 * token updates s <- p + decay s and t <- 1 + decay t with its original
 * probability p; accepting another token leaves s and t. target in
 * [-1, 1], a negative target makes the stage plain dist; decay in
 * [0, 0.99]. SIFT_E_ARG for a value out of range (the chain is
 * unchanged), SIFT_E_NOMEM, SIFT_E_STATE inside a callback. Class: whole.
 * Formula in docs/samplers.md, "adaptive_p". Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_adaptive_p(sift_chain *chain, float target,
                                                              float decay, sift_error *err);

/**
 * Repetition, frequency and presence penalties over the last `last_n`
 * accepted tokens. last_n = 0 or (repeat = 1, freq = 0, presence = 0) is a
 * no-op. last_n < 0 is SIFT_E_ARG (give a window), above max_history
 * SIFT_E_LIMIT. repeat must be finite and > 0; freq and presence finite.
 * Values that overflow whatever the row holds are SIFT_E_ARG too: a
 * repeat whose reciprocal is beyond the float range (1e-39), and a freq
 * and presence whose penalty c * freq + presence is not finite for some
 * count c in 1 .. last_n (freq 3e38 with presence 3e38). Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_penalties(sift_chain *chain, int32_t last_n,
                                                             float repeat, float freq,
                                                             float presence, sift_error *err);

/**
 * Parameters of DRY; see docs/samplers.md. Initialise with
 * sift_dry_params_init (since 0.2), then set what you need; fields added
 * later keep their defaults.
 */
typedef struct sift_dry_params {
    uint32_t struct_size;          /**< sizeof(sift_dry_params); set by _init. Since: 0.2. */
    float multiplier;              /**< Penalty scale; 0 = off. Finite, >= 0. */
    float base;                    /**< Exponential base; < 1 = off. Finite. */
    int32_t allowed_length;        /**< Repeats up to this length are free; >= 0. */
    int32_t last_n;                /**< Window in tokens; 0 = off; <= max_history. */
    const char *const *breakers;   /**< Sequence breakers as byte strings. */
    const size_t *breaker_lengths; /**< Their lengths (1..40 bytes). */
    size_t n_breakers;             /**< At most 64. */
} sift_dry_params;

/**
 * Fills `params` with the defaults: multiplier 0 (off), base 1.75,
 * allowed_length 2, last_n 4096, no breakers (the values of a YAML dry
 * stage, without its default breakers). NULL is a no-op. Since: 0.2.
 */
SIFT_API void sift_dry_params_init(sift_dry_params *params);

/**
 * DRY ("don't repeat yourself"). Breakers are matched on token text
 * through `vocab` (required when n_breakers > 0; only read during the
 * call). SIFT_E_ARG also for a params->struct_size 0 or above
 * sizeof(sift_dry_params). Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_dry(sift_chain *chain,
                                                       const sift_dry_params *params,
                                                       const sift_vocab *vocab, sift_error *err);

/** One logit bias entry. */
typedef struct sift_bias {
    int32_t token; /**< Token id >= 0 (checked against the row length at sample). */
    float bias;    /**< Added to the logit; -inf bans; NaN and +inf are errors. */
} sift_bias;

/**
 * Adds fixed biases to token logits. Entries for the same token add up,
 * in the order given. n = 0 is a no-op stage. The array is copied.
 * SIFT_E_ARG (err->index = the entry) for a NULL array with n > 0, a
 * negative token, a NaN or +inf bias, and for entries of one token whose
 * running sum from 0 reaches +inf (two biases of 3e38): that sum would
 * overflow on every row. SIFT_E_LIMIT above 2^24 entries. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_logit_bias(sift_chain *chain,
                                                              const sift_bias *biases, size_t n,
                                                              sift_error *err);

/**
 * Bans end-of-generation tokens until `min_tokens` tokens have been
 * generated (vLLM min_tokens, HF min_new_tokens; -1 = for the whole
 * generation, llama.cpp's ignore_eos). The banned ids are ids[0..n_ids)
 * together with every id `vocab` marks SIFT_TOKEN_EOG (vocab may be NULL;
 * it is only read during the call; the list is copied). While the stage
 * has accepted fewer than min_tokens tokens since the chain was created
 * or reset, their logits are -inf; then the stage changes nothing.
 * min_tokens = 0 is a no-op stage. The count is of generated tokens
 * only: sift_chain_accept counts a token, sift_chain_accept_prompt does
 * not (as for grammars), so min_tokens = n bans until n tokens have been
 * generated after a prompt of any length.
 * Ids are checked against the row length at sample time (SIFT_E_ARG).
 * SIFT_E_ARG for min_tokens < -1, a NULL ids with n_ids > 0, a negative
 * id (err->index = its position), and for min_tokens != 0 with nothing to
 * ban; SIFT_E_LIMIT above 2^24 ids. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_min_tokens(sift_chain *chain, int32_t min_tokens,
                                                              const int32_t *ids, size_t n_ids,
                                                              const sift_vocab *vocab,
                                                              sift_error *err);

/**
 * Lets only ids[0..n) be sampled (vLLM allowed_token_ids): every other
 * candidate's logit becomes -inf. The list is copied; repeated ids count
 * once. With at most 1024 ids the stage names them as extras
 * (sift_chain_extras), so a slice holds all of them wherever they rank
 * and every token it lacks is known to be -inf after the stage
 * (docs/samplers.md, "allowed_tokens", says when that decides a step).
 * Ids are checked against the row length at sample time (SIFT_E_ARG).
 * SIFT_E_ARG for n = 0, a NULL ids, a negative id (err->index = its
 * position); SIFT_E_LIMIT above 2^24 ids. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_allowed_tokens(sift_chain *chain,
                                                                  const int32_t *ids, size_t n,
                                                                  sift_error *err);

/**
 * Bans every token that would complete an n-gram already in the window of
 * the last `last_n` accepted tokens (HF no_repeat_ngram_size): with s the
 * window's last n - 1 tokens, each token that follows an occurrence of s
 * in the window gets -inf (n = 1: every token of the window). Prompt
 * tokens count, as in HF. n = 0 or last_n = 0 is a no-op. Accept
 * recomputes the banned set B: O(last_n) to find it, plus sorting it,
 * O(|B| log |B|) with |B| <= last_n; nothing is allocated after the
 * call. SIFT_E_ARG for n < 0, last_n < 0, and
 * n > last_n > 0 (no n-gram fits); SIFT_E_LIMIT for last_n above
 * max_history. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_no_repeat_ngram(sift_chain *chain, int32_t n,
                                                                   int32_t last_n, sift_error *err);

/**
 * Bans the last token of each sequence seqs[i][0..lens[i]) when the
 * accepted tokens end with the rest of it (HF bad_words_ids; vLLM
 * bad_words once its words are tokenized): a one-token sequence is
 * always banned. Every accepted token counts, prompt tokens included.
 * The sequences are copied; n = 0 is a no-op. Accept recomputes the
 * banned set: O(total sequence length + n log n) per token; nothing is
 * allocated after the call.
 * Ids are checked against the row length at sample time (SIFT_E_ARG).
 * SIFT_E_ARG for NULL arrays with n > 0, an empty or NULL sequence, a
 * negative id (err->index = the sequence); SIFT_E_LIMIT for a sequence
 * longer than max_history + 1 or more than 2^24 ids in all. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_bad_words(sift_chain *chain,
                                                             const int32_t *const *seqs,
                                                             const size_t *lens, size_t n,
                                                             sift_error *err);

/* ------------------------------------------------------------------ */
/* Configuration files                                                 */
/* ------------------------------------------------------------------ */

/*
 * A YAML file describes a chain (docs/config.md is the schema):
 *
 *     sift_config *cfg = NULL;
 *     sift_error err;
 *     sift_status st = sift_config_load(&cfg, "chain.yaml", NULL, &err);
 *     for (size_t i = 0; i < sift_config_n_diagnostics(cfg); i++)
 *         fprintf(stderr, "%s\n", sift_config_diagnostic(cfg, i)->text);
 *     if (st == SIFT_OK) {
 *         sift_chain *chain;
 *         if (sift_config_build_chain(cfg, NULL, NULL, &chain, &err) == SIFT_OK) { ... }
 *     }
 *     sift_config_free(cfg);
 *
 * Loading validates everything and collects every problem (not just the
 * first) as diagnostics in GCC style, "FILE:LINE:COL: error: MESSAGE" or
 * "... warning: ..."; a YAML syntax error ends the load, and a grammar or
 * JSON Schema gives its first error only (docs/config.md, "Diagnostics").
 * A config object is read-only after loading, so many threads may read
 * one and build chains from it at once.
 *
 * libyaml allocates through malloc (it has no allocator hook); everything
 * sift itself allocates for a config goes through the allocator given in
 * sift_config_params. libyaml's memory is released before the load returns.
 */

/** A loaded configuration: the validated chain, seed, grammar, diagnostics. */
typedef struct sift_config sift_config;

/** Default and hard limits of the configuration loader. */
#define SIFT_CONFIG_DEFAULT_MAX_BYTES (1 << 20)
#define SIFT_CONFIG_HARD_MAX_BYTES (64 << 20)
#define SIFT_CONFIG_DEFAULT_MAX_DEPTH 64
#define SIFT_CONFIG_HARD_MAX_DEPTH 1000
#define SIFT_CONFIG_DEFAULT_MAX_NODES 100000
#define SIFT_CONFIG_DEFAULT_MAX_ANCHORS 64
#define SIFT_CONFIG_DEFAULT_MAX_DIAGNOSTICS 100

/**
 * Parameters of sift_config_load and sift_config_parse. Initialise with
 * sift_config_params_init, then set what you need.
 */
typedef struct sift_config_params {
    uint32_t struct_size;            /**< sizeof(sift_config_params); set by _init. */
    const sift_allocator *allocator; /**< NULL = malloc/free; copied. */
    size_t max_bytes;        /**< Largest file, grammar or vocabulary path read (default 1 MiB). */
    int32_t max_depth;       /**< Deepest YAML nesting, counted on parser events (default 64). */
    int32_t max_nodes;       /**< Most YAML nodes (default 100000). */
    int32_t max_anchors;     /**< Most anchors (default 64); aliases are always rejected. */
    int32_t max_stages;      /**< Most chain stages (default 256, as sift_chain_params). */
    int32_t max_diagnostics; /**< Stop after this many errors; keep at most this many
                                  warnings too (default 100). */
    const char *base_dir;    /**< Directory relative paths in the file are resolved
                                  against; NULL = the config file's directory
                                  (sift_config_load) or the current directory
                                  (sift_config_parse). Copied. */
    /** The form of the document, chosen by the caller (sift_config_form):
     * SIFT_CONFIG_FORM_DOCUMENT (0, the default) reads the document's own
     * `form` key; another value requires that form (a `form` key that
     * names another one is an error). Since: 0.3. */
    int32_t form;
} sift_config_params;

/**
 * The form a configuration document is written in (docs/config.md,
 * "Request forms"). Which form applies is never guessed from the keys:
 * it is the document's `form` key or sift_config_params.form.
 */
typedef enum sift_config_form {
    /** The document's `form` key decides; without one, a `chain:` list or
     * llama.cpp's flat parameters (a llama-server /completion body). */
    SIFT_CONFIG_FORM_DOCUMENT = 0,
    /** llama.cpp's flat parameters, a llama-server /completion body. */
    SIFT_CONFIG_FORM_LLAMA_CPP = 1,
    /** An OpenAI-compatible request body (chat completions or
     * completions), with vLLM's sampling semantics and order. */
    SIFT_CONFIG_FORM_OPENAI = 2
} sift_config_form;

/** Fills `params` with the defaults; NULL is a no-op. Since: 0.1. */
SIFT_API void sift_config_params_init(sift_config_params *params);

/** Severity of a diagnostic. */
typedef enum sift_severity {
    SIFT_SEVERITY_ERROR = 0,  /**< The configuration is invalid. */
    SIFT_SEVERITY_WARNING = 1 /**< Legal, but probably not what was meant. */
} sift_severity;

/** One problem found in a configuration. Owned by the config object. */
typedef struct sift_diagnostic {
    sift_severity severity;
    sift_status code; /**< SIFT_E_CONFIG_*, SIFT_E_PATTERN_*, SIFT_E_IO...; SIFT_OK for warnings. */
    int32_t line;     /**< 1-based line, 0 if the problem is the whole file. */
    int32_t column;   /**< 1-based column in code points, 0 if none. */
    int64_t offset;   /**< Byte offset in the file, -1 if none. */
    const char *message; /**< The message alone, one line. */
    const char *text;    /**< "FILE:LINE:COL: error: MESSAGE", one line. */
} sift_diagnostic;

/**
 * Loads and validates the YAML file at `path` (see docs/config.md).
 * `params` may be NULL (defaults).
 *
 * Returns SIFT_OK when the file has no errors (warnings allowed) and sets
 * *out to the config. When the file has errors, returns the code of the
 * first one in file order (SIFT_E_CONFIG_SYNTAX, _TYPE, _KEY, _VALUE,
 * _LIMIT, SIFT_E_PATTERN_SYNTAX, _LIMIT, or SIFT_E_IO for a grammar or
 * vocabulary file that cannot be read), fills `err` with it (source =
 * `path`, line, column, offset) and still sets *out to a config holding
 * every diagnostic; such a config cannot build a chain, and the caller
 * frees it. *out is NULL only for SIFT_E_ARG (NULL `out` or `path`, bad
 * params), SIFT_E_NOMEM, and SIFT_E_IO when `path` itself cannot be read
 * or is not a regular file. A file over max_bytes is SIFT_E_CONFIG_LIMIT
 * with *out set.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_config_load(sift_config **out, const char *path,
                                                     const sift_config_params *params,
                                                     sift_error *err);

/**
 * As sift_config_load, from `len` bytes at `data` (not NUL-terminated;
 * NUL bytes are reported as errors). `name` (may be NULL: "<config>") is
 * the file name diagnostics show. The bytes are copied.
 * Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_config_parse(sift_config **out, const char *name,
                                                      const char *data, size_t len,
                                                      const sift_config_params *params,
                                                      sift_error *err);

/** Frees a config; NULL is a no-op. Since: 0.1. */
SIFT_API void sift_config_free(sift_config *cfg);

/** Returns the number of diagnostics (errors and warnings), 0 for NULL. Since: 0.1. */
SIFT_API size_t sift_config_n_diagnostics(const sift_config *cfg);

/** Returns the number of errors among the diagnostics, 0 for NULL. Since: 0.1. */
SIFT_API size_t sift_config_n_errors(const sift_config *cfg);

/**
 * Returns diagnostic `i` (sorted by position in the file; the ones without
 * a position first), or NULL if `i` is out of range or `cfg` is NULL.
 * Valid as long as the config lives. Since: 0.1.
 */
SIFT_API const sift_diagnostic *sift_config_diagnostic(const sift_config *cfg, size_t i);

/**
 * Builds a new chain from a valid config. `params` may be NULL (defaults);
 * the config's seed, when it has one, replaces params->seed (llama.cpp's
 * random seed -1 in the flat form draws a new seed for every call, from
 * the clocks: such chains are not reproducible), and its vocab_size
 * fills params->n_vocab when that is 0. An inline grammar's errors name
 * the config file and its line and column. `vocab` (may be NULL;
 * only read during the call) is the vocabulary DRY sequence breakers are
 * matched against, the grammar is compiled with, and a request's
 * logit_bias text is tokenized with (sift_vocab_encode, special tokens as
 * text, as llama-server does); a config whose DRY stage has breakers,
 * that has a grammar, or whose logit_bias has text needs one. A grammar in
 * check mode becomes the chain's check-mode grammar, one in constrain
 * mode a stage ahead of the configured stages; a lazy section makes it
 * lazy (sift_grammar_set_lazy) with the config's triggers.
 * Returns SIFT_E_ARG for NULL `cfg` or `out`, or a missing vocabulary;
 * SIFT_E_STATE if the config has errors; any status of sift_chain_new,
 * sift_grammar_new and the sift_chain_add_* calls (for instance
 * SIFT_E_LIMIT when params->max_stages is smaller than the chain). On
 * failure *out is NULL. Since: 0.1.
 */
SIFT_API SIFT_NODISCARD sift_status sift_config_build_chain(const sift_config *cfg,
                                                            const sift_chain_params *params,
                                                            const sift_vocab *vocab,
                                                            sift_chain **out, sift_error *err);

/**
 * Gives the config's seed through *seed (may be NULL) and returns 1 if the
 * file sets one, 0 if not (or `cfg` is NULL). Since: 0.1.
 */
SIFT_API int sift_config_seed(const sift_config *cfg, uint64_t *seed);

/** Returns the config's vocab_size, 0 if unset or `cfg` is NULL. Since: 0.1. */
SIFT_API int32_t sift_config_vocab_size(const sift_config *cfg);

/**
 * Returns the vocabulary file the config names (resolved against the base
 * directory), or NULL if none. Since: 0.1.
 */
SIFT_API const char *sift_config_vocab_path(const sift_config *cfg);

/**
 * Loads the vocabulary the config names (`vocab`, docs/config.md) the way
 * sift's CLI does: by extension (.gguf: sift_vocab_load_gguf, else
 * sift_vocab_load_tiktoken), then, when the config asks for it, through
 * sift_vocab_extend: the special tokens of `vocab.special`, the
 * end-of-generation ids of `vocab.eog`, and padding to `vocab_size` (the
 * model's logits width) when that is larger than the file's tokens.
 * `allocator` may be NULL (malloc/free); the caller frees *out.
 * Returns SIFT_OK with *out NULL when the config names no vocabulary;
 * SIFT_E_ARG for NULL `cfg` or `out`, a vocab_size smaller than the
 * file's tokens, or a special token on an id the file already uses;
 * SIFT_E_STATE if the config has errors; any status of the loaders and
 * of sift_vocab_extend (messages name the file). On failure *out is NULL.
 * Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_config_load_vocab(const sift_config *cfg,
                                                           const sift_allocator *allocator,
                                                           sift_vocab **out, sift_error *err);

/** How a grammar applies (docs/config.md, "grammar"). */
typedef enum sift_grammar_mode {
    SIFT_GRAMMAR_CHECK = 0,    /**< Sample freely, resample on rejection. */
    SIFT_GRAMMAR_CONSTRAIN = 1 /**< Mask candidates at its place in the chain. */
} sift_grammar_mode;

/** YAML style of the scalar that held a grammar (to map positions back). */
typedef enum sift_scalar_style {
    SIFT_SCALAR_FILE = 0,          /**< The grammar came from a file. */
    SIFT_SCALAR_PLAIN = 1,         /**< text: root ::= "a" */
    SIFT_SCALAR_SINGLE_QUOTED = 2, /**< text: 'root ::= "a"' */
    SIFT_SCALAR_DOUBLE_QUOTED = 3, /**< text: "root ::= \"a\"" */
    SIFT_SCALAR_LITERAL = 4,       /**< text: | (exact positions) */
    SIFT_SCALAR_FOLDED = 5         /**< text: > */
} sift_scalar_style;

/** The grammar section of a config, as plain data owned by the config. */
typedef struct sift_config_grammar {
    const char *text; /**< GBNF source (inline or the file's bytes). */
    size_t length;    /**< Bytes of text. */
    const char *root; /**< Start rule, default "root". */
    sift_grammar_mode mode;
    const char *file; /**< The grammar file (resolved), NULL if inline. */
    sift_scalar_style style;
    int32_t line;   /**< Where the text starts in the YAML file (first */
    int32_t column; /**< character of the grammar), 1-based. */
    int lazy;       /**< 1 if a lazy section is present. */
    size_t n_words; /**< Trigger words (byte strings, NUL-terminated copies). */
    const char *const *words;
    const size_t *word_lengths;
    size_t n_patterns; /**< PCRE2 patterns searched in the generated text. */
    const char *const *patterns;
    size_t n_full_patterns; /**< PCRE2 patterns matched against the whole text. */
    const char *const *full_patterns;
    size_t n_tokens; /**< Trigger token ids. */
    const int32_t *tokens;
} sift_config_grammar;

/**
 * Returns the grammar section of a valid config, or NULL if it has none
 * (or `cfg` is NULL or has errors). Valid as long as the config lives.
 * Since: 0.1.
 */
SIFT_API const sift_config_grammar *sift_config_grammar_info(const sift_config *cfg);

/**
 * The log-probabilities a request asks the runtime to return with each
 * sampled token (llama-server's `n_probs` and `post_sampling_probs`,
 * OpenAI's `logprobs` and `top_logprobs`). They change nothing in the
 * chain: the runtime reads them and computes the values. The caller sets
 * struct_size; fields added later are left alone when it is smaller.
 */
typedef struct sift_config_logprobs {
    uint32_t struct_size; /**< sizeof(sift_config_logprobs); set by the caller. */
    int enabled;          /**< 1 if the request asks for log-probabilities. */
    int32_t top_n;        /**< Most likely tokens to list per step (0: the sampled one only). */
    /** 1: probabilities after the chain (llama-server's post_sampling_probs,
     * sift_chain_distribution); 0: the softmax of the raw row, as
     * OpenAI, vLLM (raw_logprobs) and llama-server by default return. */
    int post_sampling;
} sift_config_logprobs;

/**
 * Fills *out with the log-probability setting of a valid config (all 0
 * when the request asks for none) and returns 1 if it asks for some, 0 if
 * not. Returns -1 for NULL `cfg` or `out`, a config with errors, or an
 * out->struct_size below 4 (it must hold struct_size itself); only the
 * first struct_size bytes are written.
 * Since: 0.3.
 */
SIFT_API int sift_config_get_logprobs(const sift_config *cfg, sift_config_logprobs *out);

/**
 * Returns the form the config was read in (sift_config_form):
 * SIFT_CONFIG_FORM_LLAMA_CPP, SIFT_CONFIG_FORM_OPENAI, or
 * SIFT_CONFIG_FORM_DOCUMENT for a `chain:` list (and for NULL).
 * Since: 0.3.
 */
SIFT_API int32_t sift_config_form_of(const sift_config *cfg);

/**
 * Writes the chain a valid config builds, in the chain form of
 * docs/config.md, to buf (at most cap bytes, NUL-terminated when cap >
 * 0): its seed, the stages with every parameter as the builder receives
 * it, the grammar's mode, root, size and triggers, and the
 * log-probability setting. A request in a flat or OpenAI form is thus
 * shown as what it maps to (`sift check --print`). Returns the length
 * of the whole text (as snprintf: more than cap - 1 means it was cut),
 * 0 for NULL `cfg` or a config with errors. Since: 0.3.
 */
SIFT_API size_t sift_config_describe(const sift_config *cfg, char *buf, size_t cap);

/* ------------------------------------------------------------------ */
/* Custom stages                                                       */
/* ------------------------------------------------------------------ */

/**
 * ABI version of sift_custom_stage this header describes. Each version
 * names one layout; a later one only adds fields at the end (whose 0 is
 * the old behaviour), and sift_chain_add_custom accepts every version
 * from 1 to the library's, reading the vtable by its version's size.
 */
#define SIFT_CUSTOM_STAGE_ABI 1

/**
 * A caller-defined stage. `apply` receives the candidates in canonical
 * order and may change logits (never to NaN or +inf), reorder, and shrink
 * `*size`; it must not add tokens. It returns 0, or any other int to fail
 * the sample (reported as SIFT_E_ARG with that number). `accept`, `reset`,
 * `clone` and `free` may be NULL. A stage whose `cls` is left 0 is WHOLE.
 * A call back into the chain from a callback gets SIFT_E_STATE (see
 * "Callbacks and re-entrancy"), except from `clone` run by
 * sift_chain_clone, which must not change the chain.
 */
typedef struct sift_custom_stage {
    uint32_t abi_version; /**< SIFT_CUSTOM_STAGE_ABI. */
    const char *name;     /**< Copied; NULL = "custom". */
    sift_class cls;       /**< Capability class; 0 = WHOLE. */
    int64_t cls_n;        /**< n of LOWERS (-1 unbounded), K of TOP. */
    int (*apply)(void *user, sift_candidate *data, size_t *size);
    int (*accept)(void *user, int32_t token);
    void (*reset)(void *user);
    void *(*clone)(void *user); /**< NULL return = out of memory. */
    void (*free)(void *user);
} sift_custom_stage;

/**
 * Adds a custom stage. The vtable is copied (vt->name is read during the
 * call only); with a non-NULL vt->free, `user` is owned by the chain on
 * success (freed with vt->free) and untouched on failure; without one it
 * stays the caller's. SIFT_E_ARG for an abi_version of 0 or above the
 * library's SIFT_CUSTOM_STAGE_ABI (the message says which versions it
 * knows; older versions are read by their own layout's size), a NULL
 * apply, a class that is not a sift_class, or a `user` that a custom
 * stage of this chain already owns ("... already owned by a chain"; a
 * chain cannot see what another chain owns: handing owned user data to
 * two chains frees it twice).
 *
 * Each apply's output is checked as an input is (a failed check fails
 * the step, nothing changed): SIFT_E_ARG when the size grew, an id is
 * outside [0, V), was not in the input or appears twice, or the output
 * breaks the declared class (IDENTITY changed something; LOWERS raised a
 * logit or lowered or removed more than cls_n tokens; TOP kept more than
 * cls_n tokens; TOP and THRESHOLD kept anything but a canonical prefix of
 * the input, logits unchanged); SIFT_E_ROW_VALUE for a NaN or +inf logit.
 * Since: 0.1; older abi_versions accepted since 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_add_custom(sift_chain *chain,
                                                          const sift_custom_stage *vt, void *user,
                                                          sift_error *err);

/* ------------------------------------------------------------------ */
/* Speculative verification (docs/analyzer.md, "Speculative            */
/* verification")                                                      */
/*                                                                     */
/* A draft model proposes n tokens; the target model's one forward pass */
/* gives n + 1 rows. Per verify step, for each slot:                   */
/*   sift_verifier_plan(v, chain, drafts, n, steps)  -> per position   */
/*      k and extras (computed on a private copy of the chain's state  */
/*      as if drafts 0..i-1 were accepted: no clone per step);         */
/*   copy k candidates + extras per position off the device;           */
/*   sift_chain_verify(chain, args, &res) -> drafts accepted, the      */
/*      corrected (or bonus) token; the chain ends as the sequential   */
/*      sample/accept loop leaves it, bit for bit.                     */
/* ------------------------------------------------------------------ */

/** A reusable planning workspace for one chain (or for chains of the
 *  same configuration): a private shadow of the chain's state, sized
 *  once. Not thread-safe; one per slot. Since: 0.2. */
typedef struct sift_verifier sift_verifier;

/**
 * Creates a verifier for `chain` and drafts of up to `max_drafts` tokens
 * (1 <= max_drafts <= 4096). Allocates the shadow (a clone of the
 * chain, its check grammar included, without its row hook) and the
 * extras buffers here, once. A chain with a custom stage, whose state
 * cannot be copied into the shadow (with or without a clone function),
 * still gets a verifier: its plans give k = 0 for every position after
 * the first (SIFT_VERIFY_NO_SHADOW), and sift_verifier_distributions
 * fails on it with SIFT_E_STATE, whatever the number of drafts.
 * SIFT_E_ARG for NULL pointers or max_drafts out of range, SIFT_E_STATE
 * inside a callback, SIFT_E_NOMEM. On failure *out is NULL. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_verifier_new(sift_verifier **out, sift_chain *chain,
                                                      int32_t max_drafts, sift_error *err);

/** Frees a verifier; NULL is a no-op, and so is a busy verifier (called
 *  from a callback of one of its calls). Since: 0.2. */
SIFT_API void sift_verifier_free(sift_verifier *verifier);

/** sift_verify_step.flags: a draft before this position can never be
 *  sampled (a grammar stage rejects it), so verification stops earlier;
 *  nothing needs to be copied for it (k = 0, no extras). Since: 0.2. */
#define SIFT_VERIFY_UNREACHABLE 1u
/** sift_verify_step.flags: the chain has a check grammar; if it rejects
 *  the token sampled here, the position needs its whole row (the hook,
 *  or SIFT_E_NEED_ROW). Since: 0.2. */
#define SIFT_VERIFY_CHECK_GRAMMAR 2u
/** sift_verify_step.flags: k = 0 because a stage's state cannot be
 *  copied into the shadow (a custom stage): the state after a draft is
 *  unknown, so the position needs the whole row. Since: 0.2. */
#define SIFT_VERIFY_NO_SHADOW 4u

/** What a runtime copies for one position of a verify step. Since: 0.2. */
typedef struct sift_verify_step {
    uint32_t struct_size;  /**< Set by the caller in steps[0]; sift reads it only. */
    int32_t k;             /**< Prefix length for this position's state, 0 = whole row. */
    int32_t k_static;      /**< The static plan's k (sift_chain_plan), the same for all. */
    int32_t n_extras;      /**< Ids at extras[0..n_extras). */
    const int32_t *extras; /**< Ascending; owned by the verifier, valid until its next call. */
    uint32_t flags;        /**< SIFT_VERIFY_* bits. */
} sift_verify_step;

/**
 * Plans a verify step: for positions i = 0..n_drafts, the k and the
 * extras that sift_chain_next_k and sift_chain_extras would give after
 * drafts[0..i) were sampled and accepted (position n_drafts is the bonus
 * token's). Position 0 is read from `chain`; the others from the
 * verifier's shadow, re-synced from `chain` (no allocation once its
 * buffers fit: a grammar's matcher caches grow as a step would grow
 * them) and advanced by accepting the drafts. `chain` changes only in
 * the caches sift_chain_extras fills. `steps` has n_drafts + 1 elements
 * of steps[0].struct_size bytes. SIFT_E_ARG for NULL pointers, a
 * struct_size 0 or too large, or a chain whose stages differ from the
 * verifier's; SIFT_E_LIMIT for n_drafts above max_drafts; SIFT_E_TOKEN
 * for a draft outside the vocabulary (err->index = the draft);
 * SIFT_E_STATE inside a callback; SIFT_E_NOMEM. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_verifier_plan(sift_verifier *verifier, sift_chain *chain,
                                                       const int32_t *drafts, int32_t n_drafts,
                                                       sift_verify_step *steps, sift_error *err);

/**
 * sift_verifier_plan over `n_slots` slots (verifiers[i] for chains[i],
 * drafts[i][0..n_drafts[i]), steps[i] with n_drafts[i] + 1 elements), and
 * *k_max = the largest k > 0 among all positions of all slots (0 if every
 * position needs the whole row): the k of one device top-k call for the
 * batch; positions with k = 0 need whole rows. A slot whose verifier or
 * chain is refused as sift_verifier_plan refuses it (NULL, busy, another
 * layout) fails the call before any slot is planned (err->index = the
 * slot); otherwise the call stops at the first slot that fails
 * (err->index = the slot; earlier slots are planned). Every verifier and
 * chain of the call is busy until it returns. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_verifiers_plan(sift_verifier *const *verifiers,
                                                        sift_chain *const *chains,
                                                        const int32_t *const *drafts,
                                                        const int32_t *n_drafts, size_t n_slots,
                                                        sift_verify_step *const *steps,
                                                        int32_t *k_max, sift_error *err);

/**
 * The row hook of a verify call: as sift_row_hook, and `position` (0 =
 * the row after the accepted context, i = the row after drafts[0..i))
 * says which of the n + 1 rows to write. Since: 0.2.
 */
typedef int (*sift_row_hook_at)(void *user, int32_t position, float *row, int32_t n_vocab);

/** sift_verify_args.flags: do not accept the last token (the corrected
 *  or bonus one); the runtime accepts it itself. Since: 0.2. */
#define SIFT_VERIFY_KEEP_LAST 1u

/** The inputs of a verify call; sift_verify_args_init sets the defaults.
 *  Since: 0.2. */
typedef struct sift_verify_args {
    uint32_t struct_size;     /**< sizeof(sift_verify_args); set by _init. */
    const int32_t *drafts;    /**< The n draft tokens (may be NULL when n = 0). */
    int32_t n_drafts;         /**< n >= 0. */
    const sift_slice *slices; /**< n + 1 slices, one per position; or NULL. */
    const float *const *rows; /**< n + 1 whole rows; or NULL (exactly one of the two). */
    int32_t n_vocab;          /**< Row length, with `rows`. */
    sift_row_hook_at hook;    /**< NULL = the chain's row hook (it is told no position). */
    void *hook_user;          /**< Passed back to `hook`. */
    uint32_t flags;           /**< 0 or SIFT_VERIFY_KEEP_LAST. */
} sift_verify_args;

/** Fills `args` with the defaults (no drafts, no inputs, no hook);
 *  NULL is a no-op. Since: 0.2. */
SIFT_API void sift_verify_args_init(sift_verify_args *args);

/** The outcome of a verify call. Since: 0.2. */
typedef struct sift_verify_result {
    uint32_t struct_size; /**< Set by the caller; sift reads it only. */
    int32_t n_accepted;   /**< Drafts accepted: 0..n. */
    int32_t token;        /**< The token sampled at position n_accepted, -1 on failure. */
    int32_t position;     /**< The last position sampled, or the one that failed. */
    uint32_t hook_calls;  /**< Row hook calls during the call. */
} sift_verify_result;

/**
 * Verifies n drafts in one call: for i = 0, 1, ... samples position i
 * (from slices[i] as sift_chain_sample_slice, or rows[i] as
 * sift_chain_sample) and accepts the token (sift_chain_accept); while it
 * equals drafts[i], goes on; it stops at the first mismatch (the token is
 * the corrected one) or at position n (the bonus token). So the chain
 * ends exactly as that sequential loop leaves it: RNG, penalty windows,
 * DRY, mirostat mu, grammars, lazy triggers, the check grammar, and the
 * counters of sift_chain_stats. A slice that cannot decide its position
 * calls args->hook with that position (or the chain's hook). With
 * SIFT_VERIFY_KEEP_LAST the last token is sampled but not accepted.
 *
 * Errors: SIFT_E_ARG for NULL pointers, n < 0, none or both of slices and
 * rows, a struct_size 0 or too large; SIFT_E_TOKEN for a draft < 0
 * (nothing changed). A failure at position i (SIFT_E_NEED_ROW, SIFT_E_HOOK,
 * SIFT_E_SLICE, ... as the sequential calls return them) leaves positions
 * 0..i-1 accepted and result->n_accepted = i, result->position = i,
 * result->token = -1 (err->index as the failing call sets it); the chain
 * is then as the sequential loop leaves it: a failed sample changed
 * nothing (the RNG included), a failed accept (a lazy grammar refusing
 * the token that fired it) follows the sample that drew it.
 * SIFT_E_STATE inside a callback. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_verify(sift_chain *chain,
                                                      const sift_verify_args *args,
                                                      sift_verify_result *result, sift_error *err);

/**
 * The target distribution at every position of a verify step, for a
 * rejection-sampling verifier: for i = 0..n, what
 * sift_chain_distribution_slice (slices) or sift_chain_distribution
 * (rows) gives after drafts[0..i) were accepted with sift_chain_accept
 * (mirostat's mu and adaptive_p's average move only for a token the
 * selector sampled, so they stay).
 * Certified on slices as those calls are: a position the slice cannot
 * decide calls args->hook with the position (or the chain's hook), else
 * SIFT_E_NEED_ROW. Runs on the verifier's shadow: `chain` is read only.
 * Position i's entries go to out[i * capacity ..] (at most `capacity`),
 * its full count to n_out[i]; *n_positions receives the positions
 * written (n + 1, or fewer when a grammar stage rejects a draft: later
 * positions are unreachable). args->flags is ignored. Errors as
 * sift_verifier_plan and the distribution calls (err->index as they set
 * it; *n_positions says how far it got); SIFT_E_STATE also, for every n
 * (0 included) and before any position, when a stage's state cannot be
 * copied into the shadow, as for a chain with a custom stage
 * (err->index = that stage, or -1 when the verifier has no shadow: a
 * custom stage without clone). The verifier and the chain are busy for
 * the whole call (the chain's row hook runs inside it): a call back
 * into either from the hook gets SIFT_E_STATE. Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_verifier_distributions(
    sift_verifier *verifier, const sift_chain *chain, const sift_verify_args *args,
    sift_token_prob *out, size_t capacity, size_t *n_out, int32_t *n_positions, sift_error *err);

/* ------------------------------------------------------------------ */
/* Batches (docs/api.md, "Batches")                                    */
/*                                                                     */
/* A server with many slots, or a runtime sampling the positions of a  */
/* speculative step one by one, samples n chains in one call:          */
/*   sift_batch_args a; sift_batch_args_init(&a);                      */
/*   a.chains = chains; a.n = n; a.slices = slices (or a.rows = rows,  */
/*   a.n_vocab = V); a.flags = SIFT_BATCH_ACCEPT;                      */
/*   sift_chains_sample(&a, tokens, statuses, &err);                   */
/* Each slot is the single call it replaces (sift_chain_sample_slice   */
/* or sift_chain_sample, then sift_chain_accept), in slot order, on    */
/* the calling thread: the tokens, the RNG, the penalty windows and    */
/* the counters are bitwise those of that loop. One slot that fails    */
/* does not stop the others or change what they return.                */
/* ------------------------------------------------------------------ */

/** sift_batch_args.flags: accept each sampled token (sift_chain_accept)
 *  in the same call, the runtime loop's sample + accept. Since: 0.2. */
#define SIFT_BATCH_ACCEPT 1u

/**
 * The inputs of a batch; sift_batch_args_init sets the defaults. All
 * arrays are read by sift only during the call; slot i is chains[i]
 * with rows[i] or slices[i] (and errors[i]). Since: 0.2.
 */
typedef struct sift_batch_args {
    uint32_t struct_size;      /**< sizeof(sift_batch_args); set by _init. */
    sift_chain *const *chains; /**< n chains, no chain twice (may be NULL when n = 0). */
    size_t n;                  /**< Slots, 0 <= n <= INT32_MAX. */
    const float *const *rows;  /**< n whole rows of n_vocab floats; or NULL. */
    int32_t n_vocab;           /**< The length of every row, with `rows`. */
    const sift_slice *slices;  /**< n slices; or NULL (with n > 0, exactly one of the two). */
    sift_row_hook_at hook;     /**< Slices only: NULL = each chain's own row hook;
                                    else called instead of it with position = the slot. */
    void *hook_user;           /**< Passed back to `hook`. */
    uint32_t flags;            /**< 0 or SIFT_BATCH_ACCEPT. */
    /** NULL, or n errors: errors[i] is filled when slot i fails, as the
     *  single call fills its error (err->index its own), and untouched
     *  when it succeeds. */
    sift_error *errors;
} sift_batch_args;

/** Fills `args` with the defaults (no slots, no inputs, no hook, no
 *  flags); NULL is a no-op. Since: 0.2. */
SIFT_API void sift_batch_args_init(sift_batch_args *args);

/**
 * Samples every slot of a batch: for i = 0 .. n-1 in order, slot i runs
 * sift_chain_sample_slice(chains[i], &slices[i], ...) or
 * sift_chain_sample(chains[i], rows[i], n_vocab, ...) and, with
 * SIFT_BATCH_ACCEPT and a sampled token, sift_chain_accept(chains[i],
 * token). So each chain ends exactly as that loop of single calls
 * leaves it (RNG, penalty and DRY windows, mirostat's mu, grammars,
 * sift_chain_stats counters), and its row hook (or args->hook, told the
 * slot) is called when its slice cannot decide.
 *
 * Per slot: statuses[i] is the status of slot i's calls (SIFT_OK, or
 * the first that failed: the sample's, or with SIFT_BATCH_ACCEPT the
 * accept's); tokens[i] is the sampled token, or -1 when the sample
 * failed (a failed accept keeps its token: the chain is then as the
 * loop leaves it, the sample done, the accept refused). A failing slot
 * changes only its own chain, as its single call would (a failed sample
 * changes nothing); every other slot runs and returns as if it were
 * alone. With args->errors, errors[i] has slot i's detail.
 *
 * Returns SIFT_OK when every slot succeeded; else the status of the
 * first failing slot, with `err` filled from that slot's error:
 * err->index = the slot, the message "slot i: " and the slot's message.
 *
 * Refused as a whole, no chain changed: SIFT_E_ARG for a NULL `args`,
 * a struct_size 0 or too large, n above INT32_MAX, NULL chains, tokens
 * or statuses with n > 0, none or both of rows and slices with n > 0,
 * unknown flag bits, or the same chain in two slots (err->index = the
 * later slot). Then, when n could be read (args not NULL, a struct_size
 * that covers it, n <= INT32_MAX), statuses[i] = SIFT_E_ARG and
 * tokens[i] = -1 for every slot, in those of the two arrays that are
 * not NULL. A NULL chain in a slot is that slot's
 * SIFT_E_ARG, and a busy chain (the batch was started from one of its
 * callbacks) that slot's SIFT_E_STATE, the chain untouched. Every chain
 * of the batch is busy from before the first slot runs until after the
 * last: a hook or other callback of any slot that calls into any chain
 * of the batch gets SIFT_E_STATE. The duplicate scan is O(n) and allocates nothing: it marks
 * each chain and clears the marks before sampling, so chains in a batch
 * must not be used by another thread during the call (as for any
 * call). sift_chains_sample creates no thread and allocates nothing
 * itself; the first sample of each chain sizes its buffers, as a single
 * call would (SIFT_E_NOMEM in that slot). To use several threads, call
 * it once per thread on disjoint ranges of slots (docs/api.md,
 * "Batches"). Since: 0.2.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chains_sample(const sift_batch_args *args, int32_t *tokens,
                                                       sift_status *statuses, sift_error *err);

/* ------------------------------------------------------------------ */
/* Shared scratch: workspaces                                          */
/* ------------------------------------------------------------------ */

/**
 * Scratch memory that chains share: the buffers a sample, a
 * distribution or a survivors call uses only while it runs (about 68
 * bytes per token of the row: 10.3 MB at V = 151,936), which a chain
 * without a workspace keeps for its whole life. A server gives each of
 * its threads one workspace and attaches it to the chains that thread
 * samples (sift_chain_set_workspace): the scratch is then paid once per
 * thread instead of once per chain, and an idle chain holds only its
 * stages and their history (docs/api.md, "Memory of a chain").
 *
 * Rules:
 * - A workspace serves one call at a time. A call that needs it while
 *   another call uses it (another thread, or a callback of the call in
 *   progress) fails with SIFT_E_STATE before it changes anything; the
 *   check is atomic, so two threads that share a workspace never race
 *   on it, but one of them gets SIFT_E_STATE. Calls one after another,
 *   on any threads, may share it.
 * - Sharing changes no result: a chain samples the same tokens, RNG and
 *   state with a workspace as without one.
 * - It grows to the longest row (plus the extras its chains ask for) it
 *   has served, through its own allocator, and never shrinks; once that
 *   size is reached no call allocates. A row longer than it was sized
 *   for grows it (SIFT_E_NOMEM in that call if that fails, nothing
 *   changed); a chain's max_vocab bounds what it accepts.
 * - It lives until sift_workspace_free has been called and every chain
 *   it is attached to has detached it or been freed: freeing a
 *   workspace that chains still use is safe.
 * Since: 0.3.
 */
typedef struct sift_workspace sift_workspace;

/**
 * Parameters of sift_workspace_new. Initialise with
 * sift_workspace_params_init, then set what you need; fields added later
 * keep their defaults. Since: 0.3.
 */
typedef struct sift_workspace_params {
    uint32_t struct_size;            /**< sizeof(sift_workspace_params); set by _init. */
    const sift_allocator *allocator; /**< NULL = malloc/free; copied. Every buffer of
                                          the workspace is allocated and freed through
                                          it. */
    int32_t n_vocab;                 /**< Row length to size the buffers for at creation,
                                          in tokens, 0 to 2^31 - 1; 0 = on first use
                                          (default). */
} sift_workspace_params;

/** Fills `params` with the defaults; NULL is a no-op. Since: 0.3. */
SIFT_API void sift_workspace_params_init(sift_workspace_params *params);

/**
 * Creates a workspace, sized for rows of params->n_vocab tokens when that
 * is positive (so that the first call at that length allocates nothing:
 * it may still grow once for the extra ids a chain names, see
 * sift_workspace). `params` may be NULL (all defaults). SIFT_E_ARG if
 * `out` is NULL, params->struct_size is 0 or too large, n_vocab is
 * negative or the allocator is bad; SIFT_E_NOMEM. On failure *out is
 * NULL. The caller owns the workspace and releases it with
 * sift_workspace_free. Since: 0.3.
 */
SIFT_API SIFT_NODISCARD sift_status sift_workspace_new(sift_workspace **out,
                                                       const sift_workspace_params *params,
                                                       sift_error *err);

/**
 * Releases the caller's handle to a workspace; NULL is a no-op. The
 * memory is freed now if no chain has the workspace attached, else when
 * the last such chain detaches it (sift_chain_set_workspace) or is
 * freed; until then those chains keep using it. The handle must not be
 * used after this call (freeing it twice is a caller bug, as for any
 * object). Since: 0.3.
 */
SIFT_API void sift_workspace_free(sift_workspace *ws);

/**
 * Attaches workspace `ws` to `chain`, or detaches the chain's workspace
 * when `ws` is NULL. From then on sift_chain_sample,
 * sift_chain_sample_slice, sift_chain_distribution,
 * sift_chain_distribution_slice, sift_chain_survivors, sift_chain_verify,
 * sift_chain_sample_logprobs, sift_chain_sample_slice_logprobs, the
 * chain's slots of sift_chains_sample and sift_verifier_distributions
 * on the chain use the workspace's buffers for the time of the call
 * instead of the chain's own, and fail with SIFT_E_STATE (nothing
 * changed) when another call is using the workspace at that moment.
 *
 * Attaching frees the chain's own scratch buffers (the chain keeps its
 * stages, history, RNG and every other piece of state; results do not
 * change) and takes a reference to `ws`, so the workspace stays valid
 * while the chain has it, whatever sift_workspace_free is called on.
 * Detaching drops that reference; the chain's next call sizes buffers of
 * its own again. Attaching the workspace the chain already has does
 * nothing. Neither allocates. Clones (sift_chain_clone) do not inherit
 * the attachment: a clone has no workspace.
 *
 * Any number of chains may have one workspace attached; the rule that
 * makes that safe is the workspace's (one call at a time): attach a
 * workspace to the chains one thread samples, or attach the thread's
 * workspace to a chain before sampling it on that thread.
 *
 * SIFT_E_ARG for a NULL chain or a `ws` that is not a live workspace;
 * SIFT_E_STATE inside a callback of the chain (the chain is busy).
 * Since: 0.3.
 */
SIFT_API SIFT_NODISCARD sift_status sift_chain_set_workspace(sift_chain *chain, sift_workspace *ws,
                                                             sift_error *err);

/* ------------------------------------------------------------------ */
/* Vocabulary shards (docs/analyzer.md, "Vocabulary shards")           */
/*                                                                     */
/* Under a tensor split of the output head each device holds the       */
/* logits of a range of ids and takes a top-k of its range only. The   */
/* host merges the S partial lists into one sift_slice:                */
/*   sift_shards_merge(shards, S, V, plan.device_k, extras, n_extras,  */
/*                     buf, capacity, &slice, &err);                   */
/*   sift_chain_sample_slice(chain, &slice, &tok, &err);               */
/* ------------------------------------------------------------------ */

/** sift_shard.flags: sift_shard.tail_mass is set. Since: 0.3. */
#define SIFT_SHARD_TAIL_MASS 1u

/**
 * One shard of a row whose vocabulary is split into contiguous id
 * ranges (a tensor-parallel output head): what one device computed for
 * its range. Set struct_size of every element to sizeof(sift_shard) and
 * zero the rest (`sift_shard s = {.struct_size = sizeof s};`), so that
 * fields added later read as 0.
 */
typedef struct sift_shard {
    uint32_t struct_size; /**< sizeof(sift_shard); the first element's is the array's stride. */
    int32_t offset;       /**< The first id of the shard's range. */
    int32_t n_ids;        /**< The range's length, >= 1: ids [offset, offset + n_ids). */
    int32_t n_prefix;     /**< k_s, 1 <= k_s <= n_ids: entries in `prefix`. */
    /** The k_s largest logits of the range as a set, with the row's
     *  (global) ids: in any order, with any choice among the tokens tied
     *  at the smallest of them. */
    const sift_candidate *prefix;
    uint32_t flags; /**< SIFT_SHARD_TAIL_MASS or 0; other bits are an error. */
    /**
     * Read only with SIFT_SHARD_TAIL_MASS: an upper bound on the sum over
     * the range's tokens not in `prefix` of exp(l_i - m_s), m_s the
     * largest logit of `prefix` (the shard's own maximum, not the row's),
     * as a device computes it in the pass of its top-k, rounded up. NaN,
     * negative or infinite is SIFT_E_SLICE. Without it the merge uses the
     * shard's free bound (n_ids - k_s) exp(l_min,s - m).
     */
    double tail_mass;
} sift_shard;

/**
 * Merges the top-k lists of S vocabulary shards into one slice of the
 * whole row, valid for sift_chain_sample_slice and
 * sift_chain_distribution_slice: a step sampled from it gives the token,
 * RNG and state the whole row gives, or needs the row (the hook, or
 * SIFT_E_NEED_ROW), never a different token.
 *
 * `shards[0..n_shards)` must cover [0, n_vocab) in ascending order
 * without gaps or overlaps (shard i starts where shard i - 1 ends).
 * `extras[0..n_extras)` (may be NULL with 0) are the logits of the ids
 * the chain asked for (sift_chain_extras), gathered from whichever shard
 * holds them; an extra that a shard's prefix holds too must carry the
 * same logit. `k` (1 <= k <= n_vocab) is the prefix length wanted,
 * normally sift_plan.device_k.
 *
 * The result, written to *out with its arrays in `buf`: prefix = the k
 * largest logits of the union of the shard lists, sorted by logit
 * descending (ids ascending within a run of equal logits), or fewer
 * when the lists cannot certify k (then every union token at or above
 * the largest smallest logit of a shard that sent less than its whole
 * range: the prefix is the row's top n_prefix as a set, proof in
 * docs/analyzer.md); extras = the rest of the union and the extras not
 * in it, any order; flags = SIFT_SLICE_TAIL_MASS with tail_mass = the
 * sum over shards of each shard's bound rescaled to the row's largest
 * logit m (tail_mass_s exp(m_s - m), or the shard's free bound when
 * smaller or not given), every operation rounded upwards. The slice
 * holds no canonical promise (flags has no SIFT_SLICE_CANONICAL). Only
 * the fields named here are written; zero-initialise *out so that fields
 * a later version adds read as 0.
 * `buf` needs capacity >= 2 N entries, N = the sum of the shards'
 * n_prefix + n_extras: the slice's storage (its first N) until the
 * caller reuses it, and the sorts' scratch. O(N log N); allocates
 * nothing.
 *
 * Errors (*out unchanged; `buf` is scratch, its contents unspecified):
 * - SIFT_E_ARG: NULL shards, out or buf, n_shards 0, n_vocab < 1, k out
 *   of [1, n_vocab], a struct_size 0 or above sizeof(sift_shard) or an
 *   element whose struct_size differs from the first (err->index = the
 *   shard), a NULL prefix or extras with entries, capacity too small;
 * - SIFT_E_SLICE, the message naming the shard and the position: a gap
 *   or an overlap between ranges, ranges that stop short of or run past
 *   n_vocab (err->index = the shard), more shards than ids; a shard with n_prefix 0 or
 *   above n_ids, unknown flag bits, a NaN, negative or infinite tail
 *   mass (err->index = the shard); an id outside the shard's range
 *   (err->index = the position in its prefix); an id twice (err->index
 *   = the id); an extra outside [0, n_vocab), twice, with a logit other
 *   than its shard's, or above the smallest logit of a shard that does
 *   not hold it (err->index = the position in extras);
 * - SIFT_E_ROW_VALUE: NaN or +inf in a prefix or the extras
 *   (err->index = the id).
 * Thread-safe: reads its inputs only. Since: 0.3.
 */
SIFT_API SIFT_NODISCARD sift_status sift_shards_merge(const sift_shard *shards, size_t n_shards,
                                                      int32_t n_vocab, int32_t k,
                                                      const sift_candidate *extras,
                                                      int32_t n_extras, sift_candidate *buf,
                                                      size_t capacity, sift_slice *out,
                                                      sift_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SIFT_H */

/*
 * bpe.c - text -> token ids for byte-level BPE vocabularies (tiktoken).
 *
 * Owns sift_vocab_set_pretokenizer, sift_vocab_pretokenizer,
 * sift_vocab_encode and the encode scratch; docs/encoding.md is the
 * user's description.
 *
 * What encoding is (tiktoken's definition, which sift matches bitwise on
 * the vectors of tests/data/bpe-vectors-*.txt):
 * 1. With SIFT_ENCODE_SPECIAL, the text is cut at every occurrence of the
 *    text of a special token (leftmost first, then longest), which
 *    becomes that token; each part between is encoded on its own.
 * 2. A part is cut into maximal runs of well-formed UTF-8 (core/utf8.c
 *    decides) and of ill-formed bytes. An ill-formed run is one
 *    pre-token. tiktoken takes only Unicode text, so nothing is lost on
 *    the inputs it defines, and every byte string still encodes.
 * 3. A well-formed run is cut by the pre-tokenizer pattern: successive
 *    non-empty leftmost matches (PCRE2, searched from the end of the
 *    previous one). Text no match covers (possible only with a custom
 *    pattern) is a pre-token of its own: tiktoken drops it, which would
 *    break the round trip.
 * 4. A pre-token that is a token is that token. Otherwise it starts as
 *    single bytes, and the adjacent pair whose concatenation is the token
 *    of lowest rank (= id) is merged, the leftmost on ties, until no
 *    pair is a token. The parts left are the ids.
 *
 * A vocabulary loaded from a GGUF file with `tokenizer.ggml.merges`
 * (sift__bpe_set_gguf, called by vocab_gguf.c) encodes the way
 * Hugging Face's BPE model does instead, which is what llama.cpp
 * implements too:
 * 4'. The merge list ranks pairs of tokens, not merged bytes: merge k is
 *    (left id, right id) -> merged id, and its rank is k. A pre-token
 *    starts as single bytes; the adjacent pair of parts that is a merge
 *    of lowest rank is replaced by its merged token, the leftmost on
 *    ties, until no adjacent pair is a merge. Two parts whose bytes
 *    concatenate to a token but that are not a listed pair stay apart.
 *    Only with `ignore_merges` (Llama 3's tokenizer) is a pre-token that
 *    is a token taken whole first.
 * 1'. Tokens of GGUF type "user defined" are cut out of the text before
 *    the pre-tokenizer whether or not SIFT_ENCODE_SPECIAL is given (as
 *    added tokens are in Hugging Face's tokenizers and in llama.cpp);
 *    control tokens, as every SIFT_TOKEN_SPECIAL token, only with it.
 *    With the flag, both kinds compete in one leftmost-longest search.
 *
 * Invariants and bounds:
 * - The merge loop keeps the parts as a linked list over the byte
 *   offsets of the pre-token and an indexed binary heap of the parts
 *   whose pair with the next part is a token, keyed by (rank, offset):
 *   popping the heap is exactly "lowest rank, leftmost", and a merge
 *   changes two keys, so a pre-token of m bytes costs O(m log m) steps,
 *   each hashing at most max_len bytes (a pair longer than the longest
 *   token is never looked up).
 * - The pair table of a GGUF vocabulary maps (left id, right id) to the
 *   lowest merge index listing that pair (open addressing over 32-bit
 *   slots that hold the index; the ids are compared in the merge list,
 *   which the slot owns), so each heap update costs one probe sequence.
 * - The pattern: the built-in ones are the public patterns of
 *   tiktoken's cl100k_base and o200k_base, GPT-2's and Qwen2's (cl100k's
 *   with single digits), with \s written out as the
 *   Unicode White_Space set (the \s of the Rust regex crate tiktoken
 *   uses; PCRE2's \s under UCP leaves out U+0085) and $ not used. Their
 *   work per match is linear in the text the match and its failed
 *   alternatives scan, which stay inside one class run, so they run
 *   without a match limit; a custom pattern gets PCRE2's default limit
 *   per match, and reaching it is SIFT_E_PATTERN_LIMIT.
 * - Cutting out special texts (step 1) costs O(len) steps however long
 *   they are: an Aho-Corasick automaton of the texts written backwards
 *   (built with the encoder, O(their total bytes)) gives, run backwards
 *   over a block of the text, the longest text starting at each of its
 *   positions; a block is at least as long as the longest text, so the
 *   overlap the runs read twice is at most the block itself. (Trying
 *   each position against the sorted texts cost O(len x text length)
 *   on a text that keeps almost matching a long special.)
 * - The encoder (index, specials, compiled pattern) is immutable once
 *   built and published with one compare-and-swap on the slot, so a
 *   const vocabulary encodes from many threads. It points into the
 *   vocabulary's arrays, which live as long as the vocabulary.
 * - Every PCRE2 allocation goes through the allocator of its owner (the
 *   vocabulary for the code, the scratch for match data), so the
 *   allocation-failure loop covers them. JIT compilation is tried and,
 *   when it fails, the interpreter is used; a match that overflows the
 *   JIT stack is run again by the interpreter.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>
#include <stdatomic.h>
#include <stdio.h>

#include "vocab.h"

#define RANK_NONE UINT32_MAX
#define PATTERN_MAX ((size_t)64 << 10)
#define CUSTOM_MATCH_LIMIT 10000000u

/* Unicode White_Space, the \s of the Rust regex crate. */
#define WS                                                                                   \
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
    "\\x{202F}\\x{205F}\\x{3000}"

/* tiktoken cl100k_base:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static const char cl100k_pattern[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
                                     "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
                                     "|\\p{N}{1,3}"
                                     "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
                                     "|[" WS "]*[\\r\\n]+"
                                     "|[" WS "]+(?![^" WS "])"
                                     "|[" WS "]+";

/* tiktoken o200k_base: the same shape, with letters split into an upper
 * or title case head and a lower case tail (marks go with either), the
 * contractions glued to the word, and '/' kept with a newline run. */
static const char o200k_pattern[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}"
    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*"
    "|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?![^" WS "])"
    "|[" WS "]+";

/* GPT-2's (encoder.py; the ByteLevel default of Hugging Face's
 * tokenizers): 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
 *  ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static const char gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d"
                                   "| ?\\p{L}+"
                                   "| ?\\p{N}+"
                                   "| ?[^" WS "\\p{L}\\p{N}]+"
                                   "|[" WS "]+(?![^" WS "])"
                                   "|[" WS "]+";

/* Qwen2's tokenizer.json: cl100k's with one digit per pre-token. */
static const char qwen2_pattern[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
                                    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
                                    "|\\p{N}"
                                    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
                                    "|[" WS "]*[\\r\\n]+"
                                    "|[" WS "]+(?![^" WS "])"
                                    "|[" WS "]+";

/* ------------------------------------------------------------------ */
/* The encoder of a vocabulary                                         */
/* ------------------------------------------------------------------ */

/* A state of the automaton of a set of cut-out texts: a node of the
 * trie of the texts written backwards. */
typedef struct acnode {
    uint32_t fail;   /* the state of the longest proper suffix in the trie */
    uint32_t out;    /* the deepest state on the fail chain (itself too)
                      * where a whole text ends; 0 = none */
    uint32_t parent; /* the trie edge into this state: parent, byte */
    uint32_t depth;
    int32_t id;   /* the token whose text ends here, or -1 */
    uint8_t byte; /* see parent */
} acnode;

/* A set of texts cut out of the text before it is pre-tokenized. */
typedef struct spset {
    int32_t *ids; /* sorted by their bytes */
    size_t n;
    /* The Aho-Corasick automaton of the texts written backwards: run
     * over the text from its end, the state after byte p names the
     * longest text that starts at p (spset_longest), so every start
     * position is decided in O(1) amortised steps, however long the
     * texts are. Edges in an open-addressing table keyed by
     * (state << 8 | byte) + 1 (0 = empty). */
    acnode *ac;
    size_t n_ac;
    uint64_t *ekey;
    uint32_t *eto;
    uint64_t emask;
    size_t max_len; /* the longest text */
} spset;

typedef struct bpe_enc {
    sift__alloc al; /* the vocabulary's allocator */
    pcre2_general_context *gctx;
    pcre2_match_context *mctx;
    pcre2_code *code;
    int jit;             /* code has JIT code: pcre2_jit_match, the fast path */
    const uint64_t *off; /* the vocabulary's arrays */
    const char *bytes;
    uint64_t *slots; /* (hash tag << 32) | (id + 1); 0 = empty */
    uint64_t mask;   /* slots - 1 (a power of two minus one) */
    size_t max_len;  /* longest indexed piece */
    uint32_t byte_id[256];
    /* Texts cut out before pre-tokenizing: with SIFT_ENCODE_SPECIAL the
     * special and user-defined tokens, without it the user-defined ones
     * only. Ids sorted by their bytes, one id per text (the smallest). */
    spset sp_all, sp_user;
    /* GGUF merges (NULL: rank = id, tiktoken's rule). */
    const uint32_t *merges; /* the slot's: 3 per merge, left, right, merged */
    uint32_t *pairs;        /* merge index + 1; 0 = empty */
    uint64_t pmask;
    int ignore_merges;
} bpe_enc;

struct sift__bpe_slot {
    sift_pretokenizer kind;
    char *pattern; /* SIFT_PRETOK_PATTERN only */
    size_t pattern_len;
    /* From a GGUF file; kept when the pre-tokenizer is changed. */
    uint32_t *merges; /* 3 per merge; NULL = none */
    size_t n_merges;
    int ignore_merges;
    int32_t *user; /* user-defined token ids */
    size_t n_user;
    char *why;              /* kind NONE: why there is no encoder (or NULL) */
    _Atomic(bpe_enc *) enc; /* NULL until built */
};

struct sift_encode_scratch {
    sift__alloc al;
    pcre2_general_context *gctx;
    pcre2_match_data *md;
    uint32_t *w;   /* 6 arrays of the longest pre-token merged so far */
    size_t cap;    /* elements of w */
    uint32_t *cut; /* a block of the cut-out texts' states (spset_longest) */
    size_t cut_cap;
    uint64_t cut_steps; /* automaton moves made so far (the tests' count) */
};

static void *pcre_alloc(size_t size, void *user)
{
    return sift__malloc((const sift__alloc *)user, 1, size ? size : 1);
}

static void pcre_free(void *p, void *user)
{
    sift__free((const sift__alloc *)user, p);
}

/* A hash of n bytes: eight at a time, then the tail, each step a
 * multiply and a shift (tokens are short; most lookups are 2..16 bytes). */
static uint64_t hash_bytes(const unsigned char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15u * (uint64_t)(n + 1);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDu;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)s[i] << (8 * i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53u;
    h ^= h >> 29;
    return h;
}

/* The id of the indexed token whose bytes are s[0..n), or RANK_NONE. */
static uint32_t lookup(const bpe_enc *e, const unsigned char *s, size_t n)
{
    if (n > e->max_len || n == 0)
        return RANK_NONE;
    uint64_t h = hash_bytes(s, n);
    uint32_t tag = (uint32_t)(h >> 32);
    for (uint64_t i = h & e->mask;; i = (i + 1) & e->mask) {
        uint64_t x = e->slots[i];
        if (!x)
            return RANK_NONE;
        if ((uint32_t)(x >> 32) == tag) {
            uint32_t id = (uint32_t)x - 1;
            if (e->off[id + 1] - e->off[id] == n && memcmp(e->bytes + e->off[id], s, n) == 0)
                return id;
        }
    }
}

static void enc_free(bpe_enc *e)
{
    if (!e)
        return;
    sift__alloc al = e->al;
    pcre2_code_free(e->code);
    pcre2_match_context_free(e->mctx);
    pcre2_general_context_free(e->gctx);
    sift__free(&al, e->slots);
    sift__free(&al, e->sp_all.ids);
    sift__free(&al, e->sp_user.ids);
    sift__free(&al, e->sp_all.ac);
    sift__free(&al, e->sp_all.ekey);
    sift__free(&al, e->sp_all.eto);
    sift__free(&al, e->sp_user.ac);
    sift__free(&al, e->sp_user.ekey);
    sift__free(&al, e->sp_user.eto);
    sift__free(&al, e->pairs);
    sift__free(&al, e);
}

/* Orders special ids by their bytes (memcmp order, a prefix first). */
static int special_less(const bpe_enc *e, int32_t a, int32_t b)
{
    size_t la = (size_t)(e->off[a + 1] - e->off[a]), lb = (size_t)(e->off[b + 1] - e->off[b]);
    int c = memcmp(e->bytes + e->off[a], e->bytes + e->off[b], la < lb ? la : lb);
    if (c != 0)
        return c < 0;
    if (la != lb)
        return la < lb;
    return a < b;
}

/* Bottom-up merge sort of ids[0..n) with tmp[0..n): stable and
 * O(n log n) whatever the vocabulary holds. */
static void sort_special(const bpe_enc *e, int32_t *ids, int32_t *tmp, size_t n)
{
    int32_t *src = ids, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = special_less(e, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        int32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != ids)
        memcpy(ids, src, n * sizeof *ids);
}

/* Sorts a set of cut-out texts (equal texts by id) and keeps one id
 * per text (the smallest). */
static void spset_finish(const bpe_enc *e, spset *set, int32_t *tmp)
{
    sort_special(e, set->ids, tmp, set->n);
    size_t k = 0;
    for (size_t i = 0; i < set->n; i++) {
        int32_t id = set->ids[i];
        if (k > 0) {
            int32_t prev = set->ids[k - 1];
            size_t lp = (size_t)(e->off[prev + 1] - e->off[prev]),
                   li = (size_t)(e->off[id + 1] - e->off[id]);
            if (lp == li && memcmp(e->bytes + e->off[prev], e->bytes + e->off[id], li) == 0)
                continue;
        }
        set->ids[k++] = id;
    }
    set->n = k;
}

static uint64_t ac_slot(const spset *set, uint32_t from, unsigned char c)
{
    uint64_t h = (((uint64_t)from << 8 | c) + 1) * 0x9E3779B97F4A7C15u;
    return (h ^ (h >> 29)) & set->emask;
}

/* The trie edge (from, c), or 0 (the root is nobody's child). */
static uint32_t ac_edge(const spset *set, uint32_t from, unsigned char c)
{
    uint64_t key = ((uint64_t)from << 8 | c) + 1;
    for (uint64_t i = ac_slot(set, from, c);; i = (i + 1) & set->emask) {
        if (set->ekey[i] == key)
            return set->eto[i];
        if (set->ekey[i] == 0)
            return 0;
    }
}

/* The automaton's move on byte c: the edge, or the fail chain's; adds
 * the edges tried to *steps. */
static uint32_t ac_step(const spset *set, uint32_t at, unsigned char c, uint64_t *steps)
{
    for (;;) {
        ++*steps;
        uint32_t to = ac_edge(set, at, c);
        if (to || at == 0)
            return to;
        at = set->ac[at].fail;
    }
}

/* Builds the automaton of a finished set: the trie of the texts
 * backwards, then fail and out links in order of depth (a state's fail
 * state is shallower, so it is done first). O(total bytes) steps. */
static sift_status spset_automaton(const bpe_enc *e, spset *set, sift_error *err)
{
    size_t total = 1;
    for (size_t i = 0; i < set->n; i++)
        total += (size_t)(e->off[set->ids[i] + 1] - e->off[set->ids[i]]);
    if (set->n == 0)
        return SIFT_OK;
    if (total > UINT32_MAX / 4)
        return sift__fail(err, SIFT_E_LIMIT, "the special texts hold %zu bytes", total);
    size_t slots = 16;
    while (slots < 2 * total)
        slots *= 2;
    set->ac = sift__malloc(&e->al, total, sizeof *set->ac);
    set->ekey = sift__calloc(&e->al, slots, sizeof *set->ekey);
    set->eto = sift__malloc(&e->al, slots, sizeof *set->eto);
    uint32_t *order = sift__malloc(&e->al, total, sizeof *order);
    size_t *at_depth = NULL;
    if (!set->ac || !set->ekey || !set->eto || !order)
        goto nomem;
    set->emask = slots - 1;
    set->ac[0] = (acnode){0, 0, 0, 0, -1, 0};
    set->n_ac = 1;
    for (size_t i = 0; i < set->n; i++) {
        int32_t id = set->ids[i];
        size_t len = (size_t)(e->off[id + 1] - e->off[id]);
        const unsigned char *t = (const unsigned char *)e->bytes + e->off[id];
        uint32_t at = 0;
        if (len > set->max_len)
            set->max_len = len;
        for (size_t k = len; k-- > 0;) {
            uint32_t to = ac_edge(set, at, t[k]);
            if (!to) {
                to = (uint32_t)set->n_ac++;
                set->ac[to] = (acnode){0, 0, at, set->ac[at].depth + 1, -1, t[k]};
                uint64_t j = ac_slot(set, at, t[k]);
                while (set->ekey[j])
                    j = (j + 1) & set->emask;
                set->ekey[j] = ((uint64_t)at << 8 | t[k]) + 1;
                set->eto[j] = to;
            }
            at = to;
        }
        set->ac[at].id = id; /* the set holds each text once */
    }
    /* states by depth (a counting sort) */
    at_depth = sift__calloc(&e->al, set->max_len + 2, sizeof *at_depth);
    if (!at_depth)
        goto nomem;
    for (size_t q = 0; q < set->n_ac; q++)
        at_depth[set->ac[q].depth + 1]++;
    for (size_t d = 1; d < set->max_len + 2; d++)
        at_depth[d] += at_depth[d - 1];
    for (size_t q = 0; q < set->n_ac; q++)
        order[at_depth[set->ac[q].depth]++] = (uint32_t)q;
    for (size_t k = 1; k < set->n_ac; k++) {
        acnode *x = &set->ac[order[k]];
        uint32_t f = 0;
        uint64_t steps = 0;
        if (x->parent != 0)
            f = ac_step(set, set->ac[x->parent].fail, x->byte, &steps);
        x->fail = f;
        x->out = x->id >= 0 ? order[k] : set->ac[f].out;
    }
    sift__free(&e->al, at_depth);
    sift__free(&e->al, order);
    return SIFT_OK;
nomem:
    sift__free(&e->al, at_depth);
    sift__free(&e->al, order);
    return sift__fail(err, SIFT_E_NOMEM, "out of memory for the encoder's special texts");
}

static uint64_t hash_pair(uint32_t a, uint32_t b)
{
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15u;
    return h ^ (h >> 29);
}

/* The lowest merge index of the pair (a, b), or RANK_NONE. */
static uint32_t pair_find(const bpe_enc *e, uint32_t a, uint32_t b)
{
    for (uint64_t i = hash_pair(a, b) & e->pmask;; i = (i + 1) & e->pmask) {
        uint32_t x = e->pairs[i];
        if (!x)
            return RANK_NONE;
        const uint32_t *m = e->merges + 3 * (size_t)(x - 1);
        if (m[0] == a && m[1] == b)
            return x - 1;
    }
}

/* The pair table of the slot's merges. A merge naming a token that is
 * now special or unused (sift_vocab_set_attr) is left out; of merges
 * listing the same pair, the first counts. */
static sift_status pairs_build(bpe_enc *e, const sift__bpe_slot *slot, const uint8_t *attr,
                               int32_t n, sift_error *err)
{
    size_t slots = 16;
    while (slots < 2 * slot->n_merges)
        slots *= 2;
    e->pairs = sift__calloc(&e->al, slots, sizeof *e->pairs);
    if (!e->pairs)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for the encoder's %zu merges",
                          slot->n_merges);
    e->pmask = slots - 1;
    e->merges = slot->merges;
    e->ignore_merges = slot->ignore_merges;
    const uint8_t skip = SIFT_TOKEN_SPECIAL | SIFT_TOKEN_UNUSED;
    for (size_t k = 0; k < slot->n_merges; k++) {
        const uint32_t *m = slot->merges + 3 * k;
        if (m[0] >= (uint32_t)n || m[1] >= (uint32_t)n || m[2] >= (uint32_t)n ||
            ((attr[m[0]] | attr[m[1]] | attr[m[2]]) & skip))
            continue;
        if (pair_find(e, m[0], m[1]) != RANK_NONE)
            continue;
        uint64_t i = hash_pair(m[0], m[1]) & e->pmask;
        while (e->pairs[i])
            i = (i + 1) & e->pmask;
        e->pairs[i] = (uint32_t)k + 1;
    }
    return SIFT_OK;
}

static sift_status pattern_error(sift_error *err, int ec, PCRE2_SIZE eo, const char *what)
{
    PCRE2_UCHAR msg[200];
    if (pcre2_get_error_message(ec, msg, sizeof msg) < 0)
        strcpy((char *)msg, "unknown error");
    sift_status st = sift__fail(err, SIFT_E_PATTERN_SYNTAX, "%s pattern, byte %zu: %s", what,
                                (size_t)eo, (const char *)msg);
    if (err)
        err->offset = (int64_t)eo;
    return st;
}

static sift_status enc_pattern(bpe_enc *e, const sift__bpe_slot *slot, sift_error *err);

static sift_status enc_build(bpe_enc **out, const sift_vocab *v, const sift__bpe_slot *slot,
                             sift_error *err)
{
    *out = NULL;
    const uint64_t *off;
    const char *bytes;
    const uint8_t *attr;
    const sift__alloc *val;
    sift__vocab_arrays(v, &off, &bytes, &attr, &val);
    int32_t n = sift_vocab_size(v);
    bpe_enc *e = sift__calloc(val, 1, sizeof *e);
    if (!e)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for the encoder");
    e->al = *val;
    e->off = off;
    e->bytes = bytes;
    size_t n_index = 0, n_special = 0;
    for (int32_t id = 0; id < n; id++) {
        if (off[id + 1] == off[id])
            continue;
        if (attr[id] & SIFT_TOKEN_SPECIAL)
            n_special++;
        else if (!(attr[id] & SIFT_TOKEN_UNUSED))
            n_index++;
    }
    size_t n_all = n_special + slot->n_user; /* an upper bound */
    /* Load at most 1/2: short probe runs for linear probing. */
    size_t slots = 16;
    while (slots < 2 * n_index)
        slots *= 2;
    e->slots = sift__calloc(&e->al, slots, sizeof *e->slots);
    e->sp_all.ids = sift__malloc(&e->al, n_all ? n_all : 1, sizeof *e->sp_all.ids);
    e->sp_user.ids = sift__malloc(&e->al, slot->n_user ? slot->n_user : 1, sizeof *e->sp_user.ids);
    int32_t *tmp = sift__malloc(&e->al, n_all ? n_all : 1, sizeof *tmp);
    sift_status st = SIFT_OK;
    if (!e->slots || !e->sp_all.ids || !e->sp_user.ids || !tmp) {
        st = sift__fail(err, SIFT_E_NOMEM, "out of memory for the encoder's index of %zu tokens",
                        n_index);
        goto fail;
    }
    e->mask = slots - 1;
    for (int32_t id = 0; id < n; id++) {
        size_t len = (size_t)(off[id + 1] - off[id]);
        if (len == 0)
            continue;
        if (attr[id] & SIFT_TOKEN_SPECIAL) {
            e->sp_all.ids[e->sp_all.n++] = id;
            continue;
        }
        if (attr[id] & SIFT_TOKEN_UNUSED)
            continue;
        const unsigned char *p = (const unsigned char *)bytes + off[id];
        if (len > e->max_len)
            e->max_len = len;
        if (lookup(e, p, len) != RANK_NONE)
            continue; /* the same bytes with a smaller id */
        uint64_t h = hash_bytes(p, len);
        uint64_t i = h & e->mask;
        while (e->slots[i])
            i = (i + 1) & e->mask;
        e->slots[i] = (h >> 32) << 32 | (uint64_t)((uint32_t)id + 1);
    }
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        e->byte_id[b] = lookup(e, &c, 1);
        /* NONE: the index only (sift__bpe_set_gguf); it decides */
        if (e->byte_id[b] == RANK_NONE && slot->kind != SIFT_PRETOK_NONE) {
            st = sift__fail(err, SIFT_E_ARG,
                            "the vocabulary has no token for the byte 0x%02x: byte-level BPE "
                            "needs one for each of the 256 bytes",
                            (unsigned)b);
            goto fail;
        }
    }
    /* User-defined tokens (GGUF) join both sets; a token that has become
     * special or unused, or has no piece, is left out. */
    for (size_t i = 0; i < slot->n_user; i++) {
        int32_t id = slot->user[i];
        if (id < 0 || id >= n || off[id + 1] == off[id] ||
            (attr[id] & (SIFT_TOKEN_SPECIAL | SIFT_TOKEN_UNUSED)))
            continue;
        e->sp_all.ids[e->sp_all.n++] = id;
        e->sp_user.ids[e->sp_user.n++] = id;
    }
    spset_finish(e, &e->sp_all, tmp);
    spset_finish(e, &e->sp_user, tmp);
    if ((st = spset_automaton(e, &e->sp_all, err)) != SIFT_OK ||
        (st = spset_automaton(e, &e->sp_user, err)) != SIFT_OK)
        goto fail;
    if (slot->merges && (st = pairs_build(e, slot, attr, n, err)) != SIFT_OK)
        goto fail;
    if (slot->kind != SIFT_PRETOK_NONE && (st = enc_pattern(e, slot, err)) != SIFT_OK)
        goto fail;
    sift__free(&e->al, tmp);
    *out = e;
    return SIFT_OK;
fail:
    sift__free(&e->al, tmp);
    enc_free(e);
    return st;
}

/* Compiles the pre-tokenizer of `slot` into e. */
static sift_status enc_pattern(bpe_enc *e, const sift__bpe_slot *slot, sift_error *err)
{
    const char *pat;
    size_t pat_len;
    const char *what;
    switch (slot->kind) {
    case SIFT_PRETOK_CL100K:
        pat = cl100k_pattern;
        pat_len = sizeof cl100k_pattern - 1;
        what = "the cl100k";
        break;
    case SIFT_PRETOK_O200K:
        pat = o200k_pattern;
        pat_len = sizeof o200k_pattern - 1;
        what = "the o200k";
        break;
    case SIFT_PRETOK_GPT2:
        pat = gpt2_pattern;
        pat_len = sizeof gpt2_pattern - 1;
        what = "the GPT-2";
        break;
    case SIFT_PRETOK_QWEN2:
        pat = qwen2_pattern;
        pat_len = sizeof qwen2_pattern - 1;
        what = "the Qwen2";
        break;
    default:
        pat = slot->pattern;
        pat_len = slot->pattern_len;
        what = "the pre-tokenizer";
        break;
    }
    e->gctx = pcre2_general_context_create(pcre_alloc, pcre_free, &e->al);
    pcre2_compile_context *cctx = e->gctx ? pcre2_compile_context_create(e->gctx) : NULL;
    e->mctx = e->gctx ? pcre2_match_context_create(e->gctx) : NULL;
    if (!cctx || !e->mctx) {
        pcre2_compile_context_free(cctx);
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for the pre-tokenizer");
    }
    int ec = 0;
    PCRE2_SIZE eo = 0;
    e->code = pcre2_compile((PCRE2_SPTR)pat, pat_len, PCRE2_UTF | PCRE2_UCP, &ec, &eo, cctx);
    pcre2_compile_context_free(cctx);
    if (!e->code) {
        if (ec == PCRE2_ERROR_HEAP_FAILED)
            return sift__fail(err, SIFT_E_NOMEM, "out of memory compiling the pre-tokenizer");
        return pattern_error(err, ec, eo, what);
    }
    /* A failed JIT compilation (no JIT, or no memory) leaves the
     * interpreter, which gives the same matches. */
    e->jit = pcre2_jit_compile(e->code, PCRE2_JIT_COMPLETE) == 0;
    pcre2_set_match_limit(e->mctx,
                          slot->kind == SIFT_PRETOK_PATTERN ? CUSTOM_MATCH_LIMIT : UINT32_MAX);
    return SIFT_OK;
}

/* The encoder of `v`, built now if no thread has built it yet. */
static sift_status enc_get(const sift_vocab *v, const bpe_enc **out, sift_error *err)
{
    sift__bpe_slot *slot = sift__vocab_bpe(v);
    if (slot && slot->kind == SIFT_PRETOK_NONE && slot->why)
        return sift__fail(err, SIFT_E_STATE, "the vocabulary has no pre-tokenizer: %s", slot->why);
    if (!slot || slot->kind == SIFT_PRETOK_NONE)
        return sift__fail(err, SIFT_E_STATE,
                          "the vocabulary has no pre-tokenizer (see "
                          "sift_vocab_set_pretokenizer)");
    bpe_enc *e = atomic_load_explicit(&slot->enc, memory_order_acquire);
    if (!e) {
        sift_status st = enc_build(&e, v, slot, err);
        if (st != SIFT_OK)
            return st;
        bpe_enc *seen = NULL;
        if (!atomic_compare_exchange_strong_explicit(&slot->enc, &seen, e, memory_order_acq_rel,
                                                     memory_order_acquire)) {
            enc_free(e); /* another thread published first */
            e = seen;
        }
    }
    *out = e;
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* Slots (the vocabulary's side)                                       */
/* ------------------------------------------------------------------ */

void sift__bpe_slot_invalidate(sift__bpe_slot *slot, const sift__alloc *al)
{
    (void)al;
    if (!slot)
        return;
    enc_free(atomic_exchange(&slot->enc, NULL));
}

void sift__bpe_slot_free(sift__bpe_slot *slot, const sift__alloc *al)
{
    if (!slot)
        return;
    sift__bpe_slot_invalidate(slot, al);
    sift__free(al, slot->pattern);
    sift__free(al, slot->merges);
    sift__free(al, slot->user);
    sift__free(al, slot->why);
    sift__free(al, slot);
}

/* Gives dst the GGUF part of src (merges, user-defined ids): what a
 * vocabulary keeps whatever its pre-tokenizer. */
static sift_status slot_copy_gguf(sift__bpe_slot *dst, const sift__bpe_slot *src,
                                  const sift__alloc *al, sift_error *err)
{
    if (!src)
        return SIFT_OK;
    if (src->merges) {
        dst->merges = (uint32_t *)(void *)sift__memdup(al, src->merges,
                                                       3 * src->n_merges * sizeof *src->merges);
        if (!dst->merges)
            return sift__fail(err, SIFT_E_NOMEM, "out of memory for %zu merges", src->n_merges);
        dst->n_merges = src->n_merges;
    }
    if (src->user) {
        dst->user = (int32_t *)(void *)sift__memdup(al, src->user, src->n_user * sizeof *src->user);
        if (!dst->user)
            return sift__fail(err, SIFT_E_NOMEM, "out of memory for the pre-tokenizer");
        dst->n_user = src->n_user;
    }
    dst->ignore_merges = src->ignore_merges;
    return SIFT_OK;
}

static sift_status slot_new(sift__bpe_slot **out, sift_pretokenizer kind, const char *pattern,
                            size_t len, const sift__alloc *al, sift_error *err)
{
    sift__bpe_slot *s = sift__calloc(al, 1, sizeof *s);
    if (!s)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for the pre-tokenizer");
    atomic_init(&s->enc, NULL);
    s->kind = kind;
    if (kind == SIFT_PRETOK_PATTERN) {
        s->pattern = sift__memdup(al, pattern, len);
        if (!s->pattern) {
            sift__free(al, s);
            return sift__fail(err, SIFT_E_NOMEM, "out of memory for the pre-tokenizer");
        }
        s->pattern_len = len;
    }
    *out = s;
    return SIFT_OK;
}

sift_status sift__bpe_slot_copy(sift__bpe_slot **dst, const sift__bpe_slot *src,
                                const sift__alloc *al, sift_error *err)
{
    *dst = NULL;
    if (!src)
        return SIFT_OK;
    sift__bpe_slot *s = NULL;
    sift_status st = slot_new(&s, src->kind, src->pattern, src->pattern_len, al, err);
    if (st == SIFT_OK)
        st = slot_copy_gguf(s, src, al, err);
    if (st == SIFT_OK && src->why && !(s->why = sift__memdup(al, src->why, strlen(src->why) + 1)))
        st = sift__fail(err, SIFT_E_NOMEM, "out of memory for the pre-tokenizer");
    if (st != SIFT_OK) {
        sift__bpe_slot_free(s, al);
        return st;
    }
    *dst = s;
    return SIFT_OK;
}

sift_status sift__bpe_default_tiktoken(sift_vocab *v, sift_error *err)
{
    int32_t n = sift_vocab_size(v);
    sift_pretokenizer kind = n == 100256   ? SIFT_PRETOK_CL100K
                             : n == 199998 ? SIFT_PRETOK_O200K
                                           : SIFT_PRETOK_NONE;
    if (kind == SIFT_PRETOK_NONE)
        return SIFT_OK;
    const uint64_t *off;
    const char *bytes;
    const uint8_t *attr;
    const sift__alloc *al;
    sift__vocab_arrays(v, &off, &bytes, &attr, &al);
    sift__bpe_slot *s = NULL;
    sift_status st = slot_new(&s, kind, NULL, 0, al, err);
    if (st != SIFT_OK)
        return st;
    sift__vocab_set_bpe(v, s);
    return SIFT_OK;
}

sift_status sift__bpe_set_gguf(sift_vocab *v, const sift__bpe_gguf *g, size_t *bad_merge,
                               int *bad_part, sift_error *err)
{
    *bad_merge = SIZE_MAX;
    *bad_part = -1;
    const uint64_t *off;
    const char *bytes;
    const uint8_t *attr;
    const sift__alloc *al;
    sift__vocab_arrays(v, &off, &bytes, &attr, &al);
    sift__bpe_slot *s = NULL;
    /* NONE while the index is built and the merges checked */
    sift_status st = slot_new(&s, SIFT_PRETOK_NONE, NULL, 0, al, err);
    if (st != SIFT_OK)
        return st;
    bpe_enc *e = NULL;
    s->ignore_merges = g->ignore_merges;
    if (g->why && !(s->why = sift__memdup(al, g->why, strlen(g->why) + 1)))
        st = sift__fail(err, SIFT_E_NOMEM, "out of memory for the pre-tokenizer");
    if (st == SIFT_OK && g->n_user &&
        !(s->user = (int32_t *)(void *)sift__memdup(al, g->user, g->n_user * sizeof *g->user)))
        st = sift__fail(err, SIFT_E_NOMEM, "out of memory for the pre-tokenizer");
    s->n_user = s->user ? g->n_user : 0;
    uint32_t *m = NULL;
    if (st == SIFT_OK && !(m = sift__malloc(al, g->n_merges ? 3 * g->n_merges : 1, sizeof *m)))
        st = sift__fail(err, SIFT_E_NOMEM, "out of memory for %zu merges", g->n_merges);
    /* The index of the tokens (built with no merges yet) resolves the
     * pieces of every merge to ids; then the pair table is added. */
    if (st == SIFT_OK)
        st = enc_build(&e, v, s, err);
    for (size_t k = 0; st == SIFT_OK && k < g->n_merges; k++) {
        const unsigned char *p = (const unsigned char *)g->bytes;
        uint64_t a = g->off[2 * k], b = g->off[2 * k + 1], c = g->off[2 * k + 2];
        uint32_t l = lookup(e, p + a, (size_t)(b - a)), r = lookup(e, p + b, (size_t)(c - b)),
                 x = lookup(e, p + a, (size_t)(c - a));
        if (l == RANK_NONE || r == RANK_NONE || x == RANK_NONE) {
            *bad_merge = k;
            *bad_part = l == RANK_NONE ? 0 : r == RANK_NONE ? 1 : 2;
            st = sift__fail(err, SIFT_E_ARG, "merge %zu names a piece that is not a token", k);
            break;
        }
        m[3 * k] = l;
        m[3 * k + 1] = r;
        m[3 * k + 2] = x;
    }
    if (st == SIFT_OK) {
        s->merges = m;
        s->n_merges = g->n_merges;
        m = NULL;
        int32_t n = sift_vocab_size(v);
        st = pairs_build(e, s, attr, n, err);
    }
    sift__free(al, m);
    int missing = -1; /* a byte without a token: no encoder, and encode says so */
    for (int b = 0; st == SIFT_OK && b < 256 && missing < 0; b++)
        if (e->byte_id[b] == RANK_NONE)
            missing = b;
    if (st == SIFT_OK && missing >= 0) {
        char why[160];
        snprintf(why, sizeof why,
                 "the GGUF vocabulary has no token for the byte 0x%02x, which byte-level BPE "
                 "needs",
                 (unsigned)missing);
        sift__free(al, s->why);
        if (!(s->why = sift__memdup(al, why, strlen(why) + 1)))
            st = sift__fail(err, SIFT_E_NOMEM, "out of memory for the pre-tokenizer");
    } else if (st == SIFT_OK && g->kind != SIFT_PRETOK_NONE) {
        s->kind = g->kind;
        st = enc_pattern(e, s, err);
    }
    if (st != SIFT_OK) {
        enc_free(e);
        sift__bpe_slot_free(s, al);
        return st;
    }
    if (s->kind == SIFT_PRETOK_NONE)
        enc_free(e); /* built for the checks only; encode says why there is none */
    else
        atomic_store(&s->enc, e);
    sift__vocab_set_bpe(v, s);
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* Public: the pre-tokenizer                                           */
/* ------------------------------------------------------------------ */

sift_status sift_vocab_set_pretokenizer(sift_vocab *vocab, sift_pretokenizer kind,
                                        const char *pattern, size_t pattern_len, sift_error *err)
{
    if (!vocab)
        return sift__fail(err, SIFT_E_ARG, "vocab is NULL");
    if ((int)kind < (int)SIFT_PRETOK_NONE || (int)kind > (int)SIFT_PRETOK_QWEN2)
        return sift__fail(err, SIFT_E_ARG, "unknown pre-tokenizer %d", (int)kind);
    if (kind == SIFT_PRETOK_PATTERN && !pattern)
        return sift__fail(err, SIFT_E_ARG, "pattern is NULL with SIFT_PRETOK_PATTERN");
    if (kind != SIFT_PRETOK_PATTERN && pattern)
        return sift__fail(err, SIFT_E_ARG,
                          "a pattern is given with pre-tokenizer %d (only SIFT_PRETOK_PATTERN "
                          "takes one)",
                          (int)kind);
    if (kind == SIFT_PRETOK_PATTERN && pattern_len > PATTERN_MAX)
        return sift__fail(err, SIFT_E_LIMIT, "the pattern is %zu bytes long; max %zu", pattern_len,
                          PATTERN_MAX);
    const uint64_t *off;
    const char *bytes;
    const uint8_t *attr;
    const sift__alloc *al;
    sift__vocab_arrays(vocab, &off, &bytes, &attr, &al);
    const sift__bpe_slot *old = sift__vocab_bpe(vocab);
    int gguf = old && (old->merges || old->user);
    if (kind == SIFT_PRETOK_NONE && !gguf) {
        sift__vocab_set_bpe(vocab, NULL);
        return SIFT_OK;
    }
    sift__bpe_slot *s = NULL;
    sift_status st = slot_new(&s, kind, pattern, pattern_len, al, err);
    if (st != SIFT_OK)
        return st;
    /* The merges and user-defined tokens of a GGUF file stay. */
    if ((st = slot_copy_gguf(s, old, al, err)) != SIFT_OK) {
        sift__bpe_slot_free(s, al);
        return st;
    }
    if (kind == SIFT_PRETOK_NONE) {
        sift__vocab_set_bpe(vocab, s);
        return SIFT_OK;
    }
    bpe_enc *e = NULL;
    st = enc_build(&e, vocab, s, err);
    if (st != SIFT_OK) {
        sift__bpe_slot_free(s, al);
        return st;
    }
    atomic_store(&s->enc, e);
    sift__vocab_set_bpe(vocab, s);
    return SIFT_OK;
}

sift_pretokenizer sift_vocab_pretokenizer(const sift_vocab *vocab)
{
    if (!vocab)
        return SIFT_PRETOK_NONE;
    const sift__bpe_slot *s = sift__vocab_bpe(vocab);
    return s ? s->kind : SIFT_PRETOK_NONE;
}

/* ------------------------------------------------------------------ */
/* Scratch                                                             */
/* ------------------------------------------------------------------ */

uint64_t sift__encode_scratch_cut_steps(const sift_encode_scratch *s)
{
    return s ? s->cut_steps : 0;
}

static void scratch_release(sift_encode_scratch *s)
{
    pcre2_match_data_free(s->md);
    pcre2_general_context_free(s->gctx);
    sift__free(&s->al, s->w);
    sift__free(&s->al, s->cut);
    s->md = NULL;
    s->gctx = NULL;
    s->w = NULL;
    s->cap = 0;
    s->cut = NULL;
    s->cut_cap = 0;
}

/* Match data on first use (the scratch's allocator is at a stable
 * address from here on). */
static sift_status scratch_md(sift_encode_scratch *s, sift_error *err)
{
    if (s->md)
        return SIFT_OK;
    if (!s->gctx)
        s->gctx = pcre2_general_context_create(pcre_alloc, pcre_free, &s->al);
    s->md = s->gctx ? pcre2_match_data_create(1, s->gctx) : NULL;
    if (!s->md)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for the encoder's match data");
    return SIFT_OK;
}

sift_status sift_encode_scratch_new(sift_encode_scratch **out, const sift_allocator *allocator,
                                    sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    sift__alloc al;
    sift_status st = sift__alloc_init(&al, allocator, err);
    if (st != SIFT_OK)
        return st;
    sift_encode_scratch *s = sift__calloc(&al, 1, sizeof *s);
    if (!s)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for an encode scratch");
    s->al = al;
    *out = s;
    return SIFT_OK;
}

void sift_encode_scratch_free(sift_encode_scratch *scratch)
{
    if (!scratch)
        return;
    scratch_release(scratch);
    sift__alloc al = scratch->al;
    sift__free(&al, scratch);
}

/* ------------------------------------------------------------------ */
/* Encoding                                                            */
/* ------------------------------------------------------------------ */

typedef struct sink {
    int32_t *ids;
    size_t cap, n;
} sink;

static inline void emit(sink *k, uint32_t id)
{
    if (k->n < k->cap)
        k->ids[k->n] = (int32_t)id;
    k->n++;
}

/* The merge state of one pre-token: arrays over its byte offsets. */
typedef struct merge {
    const bpe_enc *e;
    const unsigned char *p;
    uint32_t m;
    uint32_t *nxt;  /* start of the next part (m at the end) */
    uint32_t *prv;  /* start of the previous part (RANK_NONE at 0) */
    uint32_t *rk;   /* rank of the pair (part, next part), RANK_NONE if none */
    uint32_t *tid;  /* the token of the part */
    uint32_t *heap; /* part starts whose rk is a rank, a min-heap on (rk, start) */
    uint32_t *hpos; /* index in heap, RANK_NONE if not there */
    uint32_t hn;
} merge;

static inline int hless(const merge *g, uint32_t a, uint32_t b)
{
    return g->rk[a] < g->rk[b] || (g->rk[a] == g->rk[b] && a < b);
}

static void hset(merge *g, uint32_t i, uint32_t x)
{
    g->heap[i] = x;
    g->hpos[x] = i;
}

static void hup(merge *g, uint32_t i)
{
    uint32_t x = g->heap[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!hless(g, x, g->heap[p]))
            break;
        hset(g, i, g->heap[p]);
        i = p;
    }
    hset(g, i, x);
}

static void hdown(merge *g, uint32_t i)
{
    uint32_t x = g->heap[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= g->hn)
            break;
        if (c + 1 < g->hn && hless(g, g->heap[c + 1], g->heap[c]))
            c++;
        if (!hless(g, g->heap[c], x))
            break;
        hset(g, i, g->heap[c]);
        i = c;
    }
    hset(g, i, x);
}

static void hremove(merge *g, uint32_t x)
{
    uint32_t i = g->hpos[x];
    g->hpos[x] = RANK_NONE;
    g->hn--;
    if (i == g->hn)
        return;
    uint32_t y = g->heap[g->hn];
    hset(g, i, y);
    hup(g, i);
    hdown(g, g->hpos[y]);
}

/* Recomputes the pair rank of part x (its pair ends at `end`) and moves
 * it in, out of or within the heap. */
static void hupdate(merge *g, uint32_t x, uint32_t end)
{
    if (g->e->merges) /* GGUF: the pair of x and its next part */
        g->rk[x] = g->nxt[x] < g->m ? pair_find(g->e, g->tid[x], g->tid[g->nxt[x]]) : RANK_NONE;
    else
        g->rk[x] = end <= g->m && g->nxt[x] < g->m ? lookup(g->e, g->p + x, end - x) : RANK_NONE;
    if (g->rk[x] == RANK_NONE) {
        if (g->hpos[x] != RANK_NONE)
            hremove(g, x);
        return;
    }
    if (g->hpos[x] == RANK_NONE) {
        hset(g, g->hn++, x);
        hup(g, g->hpos[x]);
        return;
    }
    uint32_t i = g->hpos[x];
    hup(g, i);
    hdown(g, g->hpos[x]);
}

static sift_status encode_piece(const bpe_enc *e, sift_encode_scratch *s, const unsigned char *p,
                                size_t m, sink *k, sift_error *err)
{
    if (m == 0)
        return SIFT_OK;
    /* tiktoken, and GGUF merges with ignore_merges, take a pre-token that
     * is a token whole; plain merges always build it from its bytes. */
    uint32_t whole = !e->merges || e->ignore_merges ? lookup(e, p, m) : RANK_NONE;
    if (whole != RANK_NONE) {
        emit(k, whole);
        return SIFT_OK;
    }
    if (m == 1) {
        emit(k, e->byte_id[p[0]]);
        return SIFT_OK;
    }
    if (m > s->cap / 6 &&
        sift__reserve(&s->al, &s->w, &s->cap, 0, 6 * m, sizeof *s->w, 6 * 64) != SIFT_OK)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for a pre-token of %zu bytes", m);
    merge g;
    g.e = e;
    g.p = p;
    g.m = (uint32_t)m;
    g.nxt = s->w;
    g.prv = g.nxt + m;
    g.rk = g.prv + m;
    g.tid = g.rk + m;
    g.heap = g.tid + m;
    g.hpos = g.heap + m;
    g.hn = 0;
    for (uint32_t i = 0; i < g.m; i++) {
        g.nxt[i] = i + 1;
        g.prv[i] = i ? i - 1 : RANK_NONE;
        g.tid[i] = e->byte_id[p[i]];
        if (e->merges)
            g.rk[i] = i + 1 < g.m ? pair_find(e, g.tid[i], e->byte_id[p[i + 1]]) : RANK_NONE;
        else
            g.rk[i] = i + 1 < g.m ? lookup(e, p + i, 2) : RANK_NONE;
        g.hpos[i] = RANK_NONE;
        if (g.rk[i] != RANK_NONE)
            hset(&g, g.hn++, i);
    }
    for (uint32_t i = g.hn / 2; i-- > 0;)
        hdown(&g, i);
    while (g.hn > 0) {
        uint32_t i = g.heap[0], j = g.nxt[i];
        g.tid[i] = e->merges ? e->merges[3 * (size_t)g.rk[i] + 2] : g.rk[i];
        g.nxt[i] = g.nxt[j];
        if (g.nxt[j] < g.m)
            g.prv[g.nxt[j]] = i;
        if (g.hpos[j] != RANK_NONE)
            hremove(&g, j);
        /* The pair of i with its new next part, then the pair of the
         * part before i, which now ends where i does. */
        hupdate(&g, i, g.nxt[i] < g.m ? g.nxt[g.nxt[i]] : g.m + 1);
        if (g.prv[i] != RANK_NONE)
            hupdate(&g, g.prv[i], g.nxt[i]);
    }
    for (uint32_t i = 0; i < g.m; i = g.nxt[i])
        emit(k, g.tid[i]);
    return SIFT_OK;
}

/* Pre-tokenizes one well-formed UTF-8 run (at byte `at` of the text). */
static sift_status encode_run(const bpe_enc *e, sift_encode_scratch *s, const unsigned char *t,
                              size_t n, size_t at, sink *k, sift_error *err)
{
    sift_status st = scratch_md(s, err);
    if (st != SIFT_OK)
        return st;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
    size_t pos = 0;
    while (pos < n) {
        uint32_t opt = PCRE2_NO_UTF_CHECK | PCRE2_NOTEMPTY;
        /* pcre2_jit_match skips the checks pcre2_match repeats on every
         * call (the options and the subject are known good here). */
        int rc = e->jit ? pcre2_jit_match(e->code, t, n, pos, opt, s->md, e->mctx)
                        : pcre2_match(e->code, t, n, pos, opt, s->md, e->mctx);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(e->code, t, n, pos, opt | PCRE2_NO_JIT, s->md, e->mctx);
        if (rc == PCRE2_ERROR_NOMATCH)
            return encode_piece(e, s, t + pos, n - pos, k, err);
        if (rc < 0) {
            PCRE2_UCHAR msg[200];
            if (pcre2_get_error_message(rc, msg, sizeof msg) < 0)
                strcpy((char *)msg, "unknown error");
            st = sift__fail(err, rc == PCRE2_ERROR_NOMEMORY ? SIFT_E_NOMEM : SIFT_E_PATTERN_LIMIT,
                            "pre-tokenizer at byte %zu: %s", at + pos, (const char *)msg);
            if (err)
                err->offset = (int64_t)(at + pos);
            return st;
        }
        size_t a = ov[0], b = ov[1];
        if (a < pos || b <= a || b > n) {
            /* \K can report such a match; no pre-token comes of it. */
            st = sift__fail(err, SIFT_E_PATTERN_LIMIT,
                            "pre-tokenizer at byte %zu: the match [%zu, %zu) is not after the "
                            "previous one",
                            at + pos, at + a, at + b);
            if (err)
                err->offset = (int64_t)(at + pos);
            return st;
        }
        if (a > pos && (st = encode_piece(e, s, t + pos, a - pos, k, err)) != SIFT_OK)
            return st;
        if ((st = encode_piece(e, s, t + a, b - a, k, err)) != SIFT_OK)
            return st;
        pos = b;
    }
    return SIFT_OK;
}

/* Encodes text without special tokens: well-formed runs through the
 * pre-tokenizer, ill-formed runs as pre-tokens of their own. */
static sift_status encode_ordinary(const bpe_enc *e, sift_encode_scratch *s, const unsigned char *t,
                                   size_t n, size_t at, sink *k, sift_error *err)
{
    size_t pos = 0;
    while (pos < n) {
        size_t bad;
        int ok = sift__utf8_valid(t + pos, n - pos, &bad);
        size_t run = ok ? n - pos : bad;
        if (run) {
            sift_status st = encode_run(e, s, t + pos, run, at + pos, k, err);
            if (st != SIFT_OK)
                return st;
        }
        pos += run;
        if (ok)
            break;
        size_t q = pos;
        uint32_t cp;
        while (q < n && sift__utf8_decode(t + q, n - q, &cp) == 0)
            q++;
        sift_status st = encode_piece(e, s, t + pos, q - pos, k, err);
        if (st != SIFT_OK)
            return st;
        pos = q;
    }
    return SIFT_OK;
}

/* The longest cut-out text starting at each position of the block
 * t[from..to) (of a text of n bytes): its state in the automaton, or 0,
 * into st[0..to - from). The automaton runs backwards from to plus the
 * longest text's length (no text that starts in the block reaches
 * further), so a block costs O(to - from + max_len) steps. */
static void spset_longest(const spset *set, const unsigned char *t, size_t n, size_t from,
                          size_t to, uint32_t *st, uint64_t *steps)
{
    size_t end = n - to > set->max_len ? to + set->max_len : n;
    uint32_t at = 0;
    for (size_t p = end; p-- > from;) {
        at = ac_step(set, at, t[p], steps);
        if (p < to)
            st[p - from] = set->ac[at].out;
    }
}

sift_status sift_vocab_encode(const sift_vocab *vocab, const char *text, size_t len, uint32_t flags,
                              int32_t *ids, size_t cap, size_t *n_out, sift_encode_scratch *scratch,
                              sift_error *err)
{
    if (n_out)
        *n_out = 0;
    if (!vocab || !n_out)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", !vocab ? "vocab" : "n_out");
    if (!text && len)
        return sift__fail(err, SIFT_E_ARG, "text is NULL with len %zu", len);
    if (!ids && cap)
        return sift__fail(err, SIFT_E_ARG, "ids is NULL with cap %zu", cap);
    if (flags & ~(uint32_t)SIFT_ENCODE_SPECIAL)
        return sift__fail(err, SIFT_E_ARG, "unknown flag bits 0x%x",
                          (unsigned)(flags & ~(uint32_t)SIFT_ENCODE_SPECIAL));
    if (len > SIFT_ENCODE_MAX_BYTES)
        return sift__fail(err, SIFT_E_LIMIT, "text of %zu bytes; max %zu", len,
                          SIFT_ENCODE_MAX_BYTES);
    const bpe_enc *e = NULL;
    sift_status st = enc_get(vocab, &e, err);
    if (st != SIFT_OK)
        return st;
    sift_encode_scratch local;
    sift_encode_scratch *s = scratch;
    if (!s) {
        memset(&local, 0, sizeof local);
        local.al = e->al;
        s = &local;
    }
    sink k = {ids, cap, 0};
    const unsigned char *t = (const unsigned char *)(text ? text : "");
    const spset *set = (flags & SIFT_ENCODE_SPECIAL) ? &e->sp_all : &e->sp_user;
    if (set->n > 0) {
        /* leftmost, then longest: the longest text at each position of
         * a block, then the cuts; a block is at least as long as the
         * longest text, so the backward runs cost O(len) in all */
        size_t seg = 0, block = set->max_len > 4096 ? set->max_len : 4096;
        uint32_t *at = NULL;
        if (sift__reserve(&s->al, &s->cut, &s->cut_cap, 0, block, sizeof *s->cut, 4096) != SIFT_OK)
            st = sift__fail(err, SIFT_E_NOMEM, "out of memory for the encode scratch");
        for (size_t pos = 0; pos < len && st == SIFT_OK;) {
            size_t from = pos, to = len - pos > block ? pos + block : len;
            at = s->cut;
            spset_longest(set, t, len, from, to, at, &s->cut_steps);
            while (pos < to && st == SIFT_OK) {
                uint32_t q = at[pos - from];
                if (q) {
                    st = encode_ordinary(e, s, t + seg, pos - seg, seg, &k, err);
                    emit(&k, (uint32_t)set->ac[q].id);
                    pos += set->ac[q].depth;
                    seg = pos;
                } else {
                    pos++;
                }
            }
        }
        if (st == SIFT_OK)
            st = encode_ordinary(e, s, t + seg, len - seg, seg, &k, err);
    } else {
        st = encode_ordinary(e, s, t, len, 0, &k, err);
    }
    if (s == &local)
        scratch_release(&local);
    if (st != SIFT_OK)
        return st;
    *n_out = k.n;
    if (k.n > cap)
        return sift__fail(err, SIFT_E_LIMIT, "the text has %zu tokens; ids holds %zu", k.n, cap);
    return SIFT_OK;
}

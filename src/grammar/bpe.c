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
 * Invariants and bounds:
 * - The merge loop keeps the parts as a linked list over the byte
 *   offsets of the pre-token and an indexed binary heap of the parts
 *   whose pair with the next part is a token, keyed by (rank, offset):
 *   popping the heap is exactly "lowest rank, leftmost", and a merge
 *   changes two keys, so a pre-token of m bytes costs O(m log m) steps,
 *   each hashing at most max_len bytes (a pair longer than the longest
 *   token is never looked up).
 * - The pattern: the two built-in ones are the public patterns of
 *   tiktoken's cl100k_base and o200k_base, with \s written out as the
 *   Unicode White_Space set (the \s of the Rust regex crate tiktoken
 *   uses; PCRE2's \s under UCP leaves out U+0085) and $ not used. Their
 *   work per match is linear in the text the match and its failed
 *   alternatives scan, which stay inside one class run, so they run
 *   without a match limit; a custom pattern gets PCRE2's default limit
 *   per match, and reaching it is SIFT_E_PATTERN_LIMIT.
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

#include "../sift_internal.h"

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

/* ------------------------------------------------------------------ */
/* The encoder of a vocabulary                                         */
/* ------------------------------------------------------------------ */

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
    int32_t *special; /* special token ids, sorted by their bytes */
    size_t n_special;
    uint8_t special_first[32]; /* bit set of their first bytes */
} bpe_enc;

struct sift__bpe_slot {
    sift_pretokenizer kind;
    char *pattern; /* SIFT_PRETOK_PATTERN only */
    size_t pattern_len;
    _Atomic(bpe_enc *) enc; /* NULL until built */
};

struct sift_encode_scratch {
    sift__alloc al;
    pcre2_general_context *gctx;
    pcre2_match_data *md;
    uint32_t *w; /* 6 arrays of the longest pre-token merged so far */
    size_t cap;  /* elements of w */
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
    sift__free(&al, e->special);
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
    /* Load at most 1/2: short probe runs for linear probing. */
    size_t slots = 16;
    while (slots < 2 * n_index)
        slots *= 2;
    e->slots = sift__calloc(&e->al, slots, sizeof *e->slots);
    e->special = sift__malloc(&e->al, n_special ? n_special : 1, sizeof *e->special);
    int32_t *tmp = sift__malloc(&e->al, n_special ? n_special : 1, sizeof *tmp);
    sift_status st = SIFT_OK;
    if (!e->slots || !e->special || !tmp) {
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
            e->special[e->n_special++] = id;
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
        if (e->byte_id[b] == RANK_NONE) {
            st = sift__fail(err, SIFT_E_ARG,
                            "the vocabulary has no token for the byte 0x%02x: byte-level BPE "
                            "needs one for each of the 256 bytes",
                            (unsigned)b);
            goto fail;
        }
    }
    /* Specials: sorted, one id per text (the smallest). */
    sort_special(e, e->special, tmp, e->n_special);
    size_t k = 0;
    for (size_t i = 0; i < e->n_special; i++) {
        int32_t id = e->special[i];
        if (k > 0) {
            int32_t prev = e->special[k - 1];
            size_t lp = (size_t)(off[prev + 1] - off[prev]), li = (size_t)(off[id + 1] - off[id]);
            if (lp == li && memcmp(bytes + off[prev], bytes + off[id], li) == 0)
                continue;
        }
        e->special[k++] = id;
        unsigned char first = (unsigned char)bytes[off[id]];
        e->special_first[first >> 3] |= (uint8_t)(1u << (first & 7));
    }
    e->n_special = k;

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
        st = sift__fail(err, SIFT_E_NOMEM, "out of memory for the pre-tokenizer");
        goto fail;
    }
    int ec = 0;
    PCRE2_SIZE eo = 0;
    e->code = pcre2_compile((PCRE2_SPTR)pat, pat_len, PCRE2_UTF | PCRE2_UCP, &ec, &eo, cctx);
    pcre2_compile_context_free(cctx);
    if (!e->code) {
        if (ec == PCRE2_ERROR_HEAP_FAILED)
            st = sift__fail(err, SIFT_E_NOMEM, "out of memory compiling the pre-tokenizer");
        else
            st = pattern_error(err, ec, eo, what);
        goto fail;
    }
    /* A failed JIT compilation (no JIT, or no memory) leaves the
     * interpreter, which gives the same matches. */
    e->jit = pcre2_jit_compile(e->code, PCRE2_JIT_COMPLETE) == 0;
    pcre2_set_match_limit(e->mctx,
                          slot->kind == SIFT_PRETOK_PATTERN ? CUSTOM_MATCH_LIMIT : UINT32_MAX);
    sift__free(&e->al, tmp);
    *out = e;
    return SIFT_OK;
fail:
    sift__free(&e->al, tmp);
    enc_free(e);
    return st;
}

/* The encoder of `v`, built now if no thread has built it yet. */
static sift_status enc_get(const sift_vocab *v, const bpe_enc **out, sift_error *err)
{
    sift__bpe_slot *slot = sift__vocab_bpe(v);
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

static void slot_invalidate(sift__bpe_slot *slot, const sift__alloc *al)
{
    (void)al;
    if (!slot)
        return;
    enc_free(atomic_exchange(&slot->enc, NULL));
}

static void slot_free(sift__bpe_slot *slot, const sift__alloc *al)
{
    if (!slot)
        return;
    slot_invalidate(slot, al);
    sift__free(al, slot->pattern);
    sift__free(al, slot);
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

static sift_status slot_copy(sift__bpe_slot **dst, const sift__bpe_slot *src, const sift__alloc *al,
                             sift_error *err)
{
    *dst = NULL;
    if (!src)
        return SIFT_OK;
    return slot_new(dst, src->kind, src->pattern, src->pattern_len, al, err);
}

static const sift__bpe_ops slot_ops = {
    .free = slot_free,
    .copy = slot_copy,
    .invalidate = slot_invalidate,
};

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
    sift__vocab_set_bpe(v, s, &slot_ops);
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
    if ((int)kind < (int)SIFT_PRETOK_NONE || (int)kind > (int)SIFT_PRETOK_PATTERN)
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
    if (kind == SIFT_PRETOK_NONE) {
        sift__vocab_set_bpe(vocab, NULL, NULL);
        return SIFT_OK;
    }
    sift__bpe_slot *s = NULL;
    sift_status st = slot_new(&s, kind, pattern, pattern_len, al, err);
    if (st != SIFT_OK)
        return st;
    bpe_enc *e = NULL;
    st = enc_build(&e, vocab, s, err);
    if (st != SIFT_OK) {
        slot_free(s, al);
        return st;
    }
    atomic_store(&s->enc, e);
    sift__vocab_set_bpe(vocab, s, &slot_ops);
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

static void scratch_release(sift_encode_scratch *s)
{
    pcre2_match_data_free(s->md);
    pcre2_general_context_free(s->gctx);
    sift__free(&s->al, s->w);
    s->md = NULL;
    s->gctx = NULL;
    s->w = NULL;
    s->cap = 0;
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
    uint32_t whole = lookup(e, p, m);
    if (whole != RANK_NONE) {
        emit(k, whole);
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
        g.rk[i] = i + 1 < g.m ? lookup(e, p + i, 2) : RANK_NONE;
        g.hpos[i] = RANK_NONE;
        if (g.rk[i] != RANK_NONE)
            hset(&g, g.hn++, i);
    }
    for (uint32_t i = g.hn / 2; i-- > 0;)
        hdown(&g, i);
    while (g.hn > 0) {
        uint32_t i = g.heap[0], j = g.nxt[i];
        g.tid[i] = g.rk[i];
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

/* The longest special token whose text starts t[0..n): its length (0 if
 * none) and id. The sorted specials sharing the first j bytes with the
 * text form a range; each step narrows it to byte j by binary search. */
static size_t special_at(const bpe_enc *e, const unsigned char *t, size_t n, int32_t *id)
{
    size_t lo = 0, hi = e->n_special, best = 0;
    for (size_t j = 0; lo < hi; j++) {
        int32_t first = e->special[lo];
        if ((size_t)(e->off[first + 1] - e->off[first]) == j) {
            best = j;
            *id = first;
            if (++lo == hi)
                break;
        }
        if (j == n)
            break;
        unsigned char c = t[j];
        size_t a = lo, b = hi;
        while (a < b) { /* first with byte j >= c */
            size_t mid = a + (b - a) / 2;
            if ((unsigned char)e->bytes[e->off[e->special[mid]] + j] < c)
                a = mid + 1;
            else
                b = mid;
        }
        size_t z = a, y = hi;
        while (z < y) { /* first with byte j > c */
            size_t mid = z + (y - z) / 2;
            if ((unsigned char)e->bytes[e->off[e->special[mid]] + j] <= c)
                z = mid + 1;
            else
                y = mid;
        }
        lo = a;
        hi = z;
    }
    return best;
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
    if ((flags & SIFT_ENCODE_SPECIAL) && e->n_special > 0) {
        size_t seg = 0;
        for (size_t pos = 0; pos < len && st == SIFT_OK;) {
            int32_t id;
            size_t ml;
            if ((e->special_first[t[pos] >> 3] >> (t[pos] & 7) & 1) &&
                (ml = special_at(e, t + pos, len - pos, &id)) > 0) {
                st = encode_ordinary(e, s, t + seg, pos - seg, seg, &k, err);
                emit(&k, (uint32_t)id);
                pos += ml;
                seg = pos;
            } else {
                pos++;
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

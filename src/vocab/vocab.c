/*
 * vocab.c - the vocabulary: token id -> bytes.
 *
 * Immutable after creation (except the attribute bits, set before the
 * vocabulary is shared). All pieces live in one block of bytes with an
 * offset table, so a vocabulary is four allocations whatever its size.
 * Invariants: off[0] = 0, off[i] <= off[i + 1], off[n] = bytes used;
 * attr[i] only holds SIFT_TOKEN_* bits. The file loaders (vocab_tiktoken.c,
 * vocab_gguf.c)
 * build the three arrays themselves and hand them over through
 * sift__vocab_adopt, so loading a 200k-token file copies each piece once.
 *
 * The shared index: a vocabulary also holds, from the first grammar built
 * over it on, the grammar module's token index (sift__vocab_index, built
 * once and shared read-only by every grammar and thread). It is
 * published with a compare-exchange (two threads that build at once
 * both finish; the loser frees its copy), reference counted, and
 * dropped by sift_vocab_set_attr when a bit changes; grammars keep the
 * reference they took, so they may outlive the vocabulary.
 *
 * The BPE encoder's slot (bpe.c) is the one other member: set with the
 * pre-tokenizer before the vocabulary is shared, and dropped when an
 * attribute bit changes, since the encoder's index depends on the bits.
 * Its built encoder is published atomically inside the slot, which is
 * what lets a const vocabulary build it on first use.
 */
#include "vocab.h"

struct sift_vocab {
    sift__alloc al;
    int32_t n;
    uint64_t *off; /* n + 1 offsets into bytes */
    char *bytes;
    uint8_t *attr; /* n attribute bit sets (SIFT_TOKEN_*) */
    /* The shared token index (sift__vocab_index_get): NULL until the
     * first grammar over the vocabulary publishes one; dropped when
     * sift_vocab_set_attr changes a bit, as it is built from them. */
    _Atomic(sift__vocab_index *) index;
    /* BPE encoding (bpe.c): the pre-tokenizer and the encoder built from
     * it; NULL = no pre-tokenizer. */
    sift__bpe_slot *bpe;
};

sift_status sift_vocab_new(sift_vocab **out, int32_t n, const char *const *pieces,
                           const size_t *lengths, const sift_allocator *allocator, sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (n < 1)
        return sift__fail(err, SIFT_E_ARG, "a vocabulary needs at least one token, got %d", (int)n);
    if (n > SIFT_DEFAULT_MAX_VOCAB)
        return sift__fail(err, SIFT_E_LIMIT, "vocabulary of %d tokens exceeds %d", (int)n,
                          (int)SIFT_DEFAULT_MAX_VOCAB);
    if (!pieces || !lengths)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL", pieces ? "lengths" : "pieces");
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (lengths[i] && !pieces[i])
            return sift__fail_at(err, SIFT_E_ARG, i, "token %d has length %zu but no bytes", (int)i,
                                 lengths[i]);
        if (lengths[i] > ((uint64_t)1 << 32))
            return sift__fail_at(err, SIFT_E_LIMIT, i, "token %d is %zu bytes long", (int)i,
                                 lengths[i]);
        total += lengths[i];
    }
    sift__alloc al;
    sift_status ast = sift__alloc_init(&al, allocator, err);
    if (ast)
        return ast;
    sift_vocab *v = sift__calloc(&al, 1, sizeof *v);
    if (!v)
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while creating a vocabulary");
    v->al = al;
    atomic_init(&v->index, NULL);
    v->n = n;
    v->off = sift__calloc(&al, (size_t)n + 1, sizeof *v->off);
    v->bytes = sift__calloc(&al, (size_t)total + 1, 1);
    v->attr = sift__calloc(&al, (size_t)n, 1);
    if (!v->off || !v->bytes || !v->attr) {
        sift_vocab_free(v);
        return sift__fail(err, SIFT_E_NOMEM,
                          "out of memory while creating a vocabulary of %d tokens", (int)n);
    }
    uint64_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        v->off[i] = pos;
        if (lengths[i])
            memcpy(v->bytes + pos, pieces[i], lengths[i]);
        pos += lengths[i];
    }
    v->off[n] = pos;
    *out = v;
    return SIFT_OK;
}

void sift_vocab_free(sift_vocab *v)
{
    if (!v)
        return;
    sift__alloc al = v->al;
    sift__vocab_index_unref(atomic_load_explicit(&v->index, memory_order_acquire));
    sift__bpe_slot_free(v->bpe, &al);
    sift__free(&al, v->off);
    sift__free(&al, v->bytes);
    sift__free(&al, v->attr);
    sift__free(&al, v);
}

int32_t sift_vocab_size(const sift_vocab *v)
{
    return v ? v->n : 0;
}

sift_status sift_vocab_piece(const sift_vocab *v, int32_t id, const char **bytes, size_t *length,
                             sift_error *err)
{
    if (!v || !bytes || !length)
        return sift__fail(err, SIFT_E_ARG, "%s is NULL",
                          !v ? "vocab" : (!bytes ? "bytes" : "length"));
    if (id < 0 || id >= v->n)
        return sift__fail_at(err, SIFT_E_TOKEN, id, "token %d out of range [0, %d)", (int)id,
                             (int)v->n);
    *bytes = v->bytes + v->off[id];
    *length = (size_t)(v->off[id + 1] - v->off[id]);
    return SIFT_OK;
}

sift_status sift_vocab_set_attr(sift_vocab *v, int32_t id, uint32_t attr, sift_error *err)
{
    if (!v)
        return sift__fail(err, SIFT_E_ARG, "vocab is NULL");
    if (id < 0 || id >= v->n)
        return sift__fail_at(err, SIFT_E_TOKEN, id, "token %d out of range [0, %d)", (int)id,
                             (int)v->n);
    if (attr & ~(uint32_t)SIFT_TOKEN_ATTR_ALL)
        return sift__fail_at(err, SIFT_E_ARG, id, "token %d: unknown attribute bits 0x%x", (int)id,
                             (unsigned)(attr & ~(uint32_t)SIFT_TOKEN_ATTR_ALL));
    if (v->attr[id] != (uint8_t)attr) {
        /* grammars built before keep the index (and the bits) they took;
         * the next grammar builds a new one from the new bits */
        sift__vocab_index_unref(atomic_exchange(&v->index, NULL));
        sift__bpe_slot_invalidate(v->bpe, &v->al); /* its index reads the bits */
        v->attr[id] = (uint8_t)attr;
    }
    return SIFT_OK;
}

uint32_t sift_vocab_attr(const sift_vocab *v, int32_t id)
{
    if (!v || id < 0 || id >= v->n)
        return 0;
    return v->attr[id];
}

sift_status sift__vocab_adopt(sift_vocab **out, const sift__alloc *al, int32_t n, uint64_t *off,
                              char *bytes, uint8_t *attr, sift_error *err)
{
    sift_vocab *v = sift__calloc(al, 1, sizeof *v);
    if (!v) {
        sift__free(al, off);
        sift__free(al, bytes);
        sift__free(al, attr);
        return sift__fail(err, SIFT_E_NOMEM, "out of memory while creating a vocabulary");
    }
    v->al = *al;
    atomic_init(&v->index, NULL);
    v->n = n;
    v->off = off;
    v->bytes = bytes;
    v->attr = attr;
    *out = v;
    return SIFT_OK;
}

/* ------------------------------------------------------------------ */
/* The shared index                                                    */
/* ------------------------------------------------------------------ */

sift__vocab_index *sift__vocab_index_get(const sift_vocab *v)
{
    /* The const is the API's (many threads read one vocabulary): the
     * index is a cache published atomically, not a change of the
     * vocabulary's contents. */
    sift__vocab_index *x = atomic_load_explicit(&((sift_vocab *)v)->index, memory_order_acquire);
    if (x)
        atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
    return x;
}

sift__vocab_index *sift__vocab_index_publish(const sift_vocab *v, sift__vocab_index *x)
{
    sift_vocab *w = (sift_vocab *)v;
    sift__vocab_index *expect = NULL;
    atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed); /* the vocabulary's */
    if (atomic_compare_exchange_strong_explicit(&w->index, &expect, x, memory_order_acq_rel,
                                                memory_order_acquire))
        return x;
    /* another thread published first: use its index, drop ours (both of
     * the references taken above) */
    atomic_fetch_add_explicit(&expect->refs, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&x->refs, 1, memory_order_relaxed);
    sift__vocab_index_unref(x);
    return expect;
}

void sift__vocab_index_unref(sift__vocab_index *x)
{
    if (x && atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) == 1)
        x->release(x);
}

const sift__alloc *sift__vocab_alloc(const sift_vocab *v)
{
    return &v->al;
}

/* ------------------------------------------------------------------ */
/* Special tokens, end-of-generation ids, padding                      */
/* ------------------------------------------------------------------ */

void sift_vocab_extra_init(sift_vocab_extra *extra)
{
    if (!extra)
        return;
    memset(extra, 0, sizeof *extra);
    extra->struct_size = (uint32_t)sizeof *extra;
}

/* The largest special token text (as a GGUF piece). */
#define SPECIAL_MAX_LEN ((size_t)1 << 20)

/* The caller's extra (or the defaults) into *x, checked against base:
 * its struct_size, the arrays its counts need, n_vocab. */
static sift_status read_extra(sift_vocab_extra *x, const sift_vocab_extra *extra,
                              const sift_vocab *base, sift_error *err)
{
    sift_vocab_extra_init(x);
    if (extra) {
        if (extra->struct_size == 0 || extra->struct_size > sizeof *x)
            return sift__fail(err, SIFT_E_ARG, "sift_vocab_extra.struct_size is %u (expected %zu)",
                              (unsigned)extra->struct_size, sizeof *x);
        memcpy(x, extra, extra->struct_size);
    }
    if (x->n_special > 0 && (!x->special_texts || !x->special_ids))
        return sift__fail(err, SIFT_E_ARG, "%s is NULL with n_special = %zu",
                          x->special_texts ? "special_ids" : "special_texts", x->n_special);
    if (x->n_eog > 0 && !x->eog_ids)
        return sift__fail(err, SIFT_E_ARG, "eog_ids is NULL with n_eog = %zu", x->n_eog);
    if (x->n_vocab < 0 || x->n_vocab > SIFT_DEFAULT_MAX_VOCAB)
        return sift__fail(err, x->n_vocab < 0 ? SIFT_E_ARG : SIFT_E_LIMIT,
                          "n_vocab %d outside [0, %d]", (int)x->n_vocab,
                          (int)SIFT_DEFAULT_MAX_VOCAB);
    if (x->n_vocab > 0 && x->n_vocab < base->n)
        return sift__fail(err, SIFT_E_ARG,
                          "n_vocab %d is smaller than the vocabulary's %d tokens (padding "
                          "cannot remove tokens)",
                          (int)x->n_vocab, (int)base->n);
    return SIFT_OK;
}

/* Checks every special token and EOG id before anything is allocated:
 * each text 1..SPECIAL_MAX_LEN bytes, each id in range and free in base.
 * Gives the new size in *n_out and the special texts' bytes in *bytes_out. */
static sift_status check_specials(const sift_vocab_extra *x, const sift_vocab *base, int32_t *n_out,
                                  uint64_t *bytes_out, sift_error *err)
{
    int32_t n = x->n_vocab > 0 ? x->n_vocab : base->n;
    uint64_t extra_bytes = 0;
    for (size_t i = 0; i < x->n_special; i++) {
        int32_t id = x->special_ids[i];
        const char *t = x->special_texts[i];
        if (!t)
            return sift__fail_at(err, SIFT_E_ARG, id, "special token %zu has no text", i);
        size_t len = x->special_lengths ? x->special_lengths[i] : strlen(t);
        if (len == 0 || len > SPECIAL_MAX_LEN)
            return sift__fail_at(err, len ? SIFT_E_LIMIT : SIFT_E_ARG, id,
                                 "special token %zu (id %d) is %zu bytes long; expected 1..%zu", i,
                                 (int)id, len, SPECIAL_MAX_LEN);
        if (id < 0 || id >= SIFT_DEFAULT_MAX_VOCAB || (x->n_vocab > 0 && id >= x->n_vocab))
            return sift__fail_at(err, SIFT_E_TOKEN, id,
                                 "special token '%.*s': id %d out of range [0, %d)",
                                 (int)(len > 64 ? 64 : len), t, (int)id,
                                 (int)(x->n_vocab > 0 ? x->n_vocab : SIFT_DEFAULT_MAX_VOCAB));
        if (id < base->n &&
            (!(base->attr[id] & SIFT_TOKEN_UNUSED) || base->off[id + 1] != base->off[id]))
            return sift__fail_at(err, SIFT_E_ARG, id,
                                 "special token '%.*s': id %d is already a token of the "
                                 "vocabulary (only unused ids and ids past its end can be given)",
                                 (int)(len > 64 ? 64 : len), t, (int)id);
        if (id >= n)
            n = id + 1;
        extra_bytes += len;
        if (extra_bytes > ((uint64_t)1 << 30))
            return sift__fail(err, SIFT_E_LIMIT, "special token texts exceed %llu bytes in total",
                              (unsigned long long)1 << 30);
    }
    for (size_t i = 0; i < x->n_eog; i++)
        if (x->eog_ids[i] < 0 || x->eog_ids[i] >= n)
            return sift__fail_at(err, SIFT_E_TOKEN, x->eog_ids[i],
                                 "end-of-generation id %d out of range [0, %d)", (int)x->eog_ids[i],
                                 (int)n);
    *n_out = n;
    *bytes_out = extra_bytes;
    return SIFT_OK;
}

/* Fills the n-token tables: each id's piece from its special token
 * (who[id] >= 0), from base, or none (padding, unused); then the EOG
 * bits. */
static void fill_extended(const sift_vocab_extra *x, const sift_vocab *base, const int32_t *who,
                          int32_t n, uint64_t *off, char *bytes, uint8_t *attr)
{
    uint64_t pos = 0;
    for (int32_t id = 0; id < n; id++) {
        off[id] = pos;
        if (who[id] >= 0) {
            size_t i = (size_t)who[id];
            size_t len = x->special_lengths ? x->special_lengths[i] : strlen(x->special_texts[i]);
            memcpy(bytes + pos, x->special_texts[i], len);
            pos += len;
            attr[id] = SIFT_TOKEN_SPECIAL;
        } else if (id < base->n) {
            uint64_t len = base->off[id + 1] - base->off[id];
            if (len)
                memcpy(bytes + pos, base->bytes + base->off[id], (size_t)len);
            pos += len;
            attr[id] = base->attr[id];
        } else {
            attr[id] = SIFT_TOKEN_UNUSED; /* padding: no bytes */
        }
    }
    off[n] = pos;
    for (size_t i = 0; i < x->n_eog; i++)
        attr[x->eog_ids[i]] |= SIFT_TOKEN_EOG;
}

sift_status sift_vocab_extend(sift_vocab **out, const sift_vocab *base,
                              const sift_vocab_extra *extra, const sift_allocator *allocator,
                              sift_error *err)
{
    if (!out)
        return sift__fail(err, SIFT_E_ARG, "out is NULL");
    *out = NULL;
    if (!base)
        return sift__fail(err, SIFT_E_ARG, "base is NULL");
    sift_vocab_extra x;
    int32_t n = 0;
    uint64_t extra_bytes = 0;
    sift_status st = read_extra(&x, extra, base, err);
    if (st == SIFT_OK)
        st = check_specials(&x, base, &n, &extra_bytes, err);
    if (st != SIFT_OK)
        return st;
    sift__alloc al;
    sift_status ast = sift__alloc_init(&al, allocator, err);
    if (ast)
        return ast;
    uint64_t base_bytes = base->off[base->n];
    int32_t *who = sift__malloc(&al, (size_t)n, sizeof *who); /* special index per id, or -1 */
    uint64_t *off = sift__malloc(&al, (size_t)n + 1, sizeof *off);
    char *bytes = sift__malloc(&al, (size_t)(base_bytes + extra_bytes) + 1, 1);
    uint8_t *attr = sift__calloc(&al, (size_t)n, 1);
    if (!who || !off || !bytes || !attr) {
        sift__free(&al, who);
        sift__free(&al, off);
        sift__free(&al, bytes);
        sift__free(&al, attr);
        return sift__fail(err, SIFT_E_NOMEM, "out of memory for a vocabulary of %d tokens", (int)n);
    }
    for (int32_t id = 0; id < n; id++)
        who[id] = -1;
    for (size_t i = 0; i < x.n_special; i++) {
        int32_t id = x.special_ids[i];
        if (who[id] >= 0) {
            int first = (int)who[id];
            sift__free(&al, who);
            sift__free(&al, off);
            sift__free(&al, bytes);
            sift__free(&al, attr);
            return sift__fail_at(err, SIFT_E_ARG, id,
                                 "special tokens %d and %zu have the same id %d", first, i,
                                 (int)id);
        }
        who[id] = (int32_t)i;
    }
    fill_extended(&x, base, who, n, off, bytes, attr);
    sift__free(&al, who);
    st = sift__vocab_adopt(out, &al, n, off, bytes, attr, err);
    if (st == SIFT_OK && base->bpe) {
        /* The new vocabulary encodes as the base does. */
        st = sift__bpe_slot_copy(&(*out)->bpe, base->bpe, &al, err);
        if (st != SIFT_OK) {
            sift_vocab_free(*out);
            *out = NULL;
        }
    }
    return st;
}

/* ------------------------------------------------------------------ */
/* Accessors for the BPE encoder (bpe.c)                               */
/* ------------------------------------------------------------------ */

sift__bpe_slot *sift__vocab_bpe(const sift_vocab *v)
{
    return v->bpe;
}

void sift__vocab_set_bpe(sift_vocab *v, sift__bpe_slot *slot)
{
    sift__bpe_slot_free(v->bpe, &v->al);
    v->bpe = slot;
}

void sift__vocab_arrays(const sift_vocab *v, const uint64_t **off, const char **bytes,
                        const uint8_t **attr, const sift__alloc **al)
{
    *off = v->off;
    *bytes = v->bytes;
    *attr = v->attr;
    *al = &v->al;
}

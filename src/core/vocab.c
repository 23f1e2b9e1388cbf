/*
 * vocab.c - the vocabulary: token id -> bytes.
 *
 * Immutable after creation (except the attribute bits, set before the
 * vocabulary is shared). All pieces live in one block of bytes with an
 * offset table, so a vocabulary is four allocations whatever its size.
 * Invariants: off[0] = 0, off[i] <= off[i + 1], off[n] = bytes used;
 * attr[i] only holds SIFT_TOKEN_* bits. The file loaders
 * (grammar/vocab_load.c) build the three arrays themselves and hand them
 * over through sift__vocab_adopt, so loading a 200k-token file copies
 * each piece once.
 */
#include "../sift_internal.h"

struct sift_vocab {
    sift__alloc al;
    int32_t n;
    uint64_t *off; /* n + 1 offsets into bytes */
    char *bytes;
    uint8_t *attr; /* n attribute bit sets (SIFT_TOKEN_*) */
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
    v->attr[id] = (uint8_t)attr;
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
    v->n = n;
    v->off = off;
    v->bytes = bytes;
    v->attr = attr;
    *out = v;
    return SIFT_OK;
}

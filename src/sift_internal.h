/*
 * sift_internal.h - private types and helpers shared across src/.
 *
 * Nothing here is API. Cross-file functions are named sift__*.
 *
 * The numeric model (docs/samplers.md, "Arithmetic") in one paragraph:
 * a stage that needs probabilities computes, over the current candidates,
 * m = the largest logit, e_i = sift__expf(l_i - m) (a float in [0, 1]) and
 * the integer weight w_i = trunc(e_i * 2^62). The mass W = sum of w_i is an
 * exact 128-bit integer, so it does not depend on the order of the
 * candidates; every threshold on probability mass and every draw is an
 * exact integer comparison against prefix sums of w in canonical order.
 * Other aggregates (entropy, mean, variance) are double sums taken in
 * ascending token id order with sift__dsum_idorder. With that, a stage's
 * result depends only on the *set* of (id, logit) pairs it receives, never
 * on how the array happens to be ordered, which is what lets the fast
 * paths use selection instead of sorting and still agree bitwise with the
 * naive oracle in tests/oracle.
 */
#ifndef SIFT_INTERNAL_H
#define SIFT_INTERNAL_H

#include <float.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sift.h"

#if defined(__GNUC__) || defined(__clang__)
#define SIFT__HIDDEN __attribute__((visibility("hidden")))
#define SIFT__LIKELY(x) __builtin_expect(!!(x), 1)
#define SIFT__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SIFT__PRINTF(f, a) __attribute__((format(printf, f, a)))
#define SIFT__NOINLINE __attribute__((noinline))
#else
#define SIFT__HIDDEN
#define SIFT__LIKELY(x) (x)
#define SIFT__UNLIKELY(x) (x)
#define SIFT__PRINTF(f, a)
#define SIFT__NOINLINE
#endif

/* ------------------------------------------------------------------ */
/* Errors (core/error.c)                                               */
/* ------------------------------------------------------------------ */

/* Fills `err` (if non-NULL) with `code` and a formatted message; returns
 * `code` so callers can `return sift__fail(...)`. */
SIFT__HIDDEN sift_status sift__fail(sift_error *err, sift_status code, const char *fmt, ...)
    SIFT__PRINTF(3, 4);
/* As sift__fail, and sets err->index. */
SIFT__HIDDEN sift_status sift__fail_at(sift_error *err, sift_status code, int64_t index,
                                       const char *fmt, ...) SIFT__PRINTF(4, 5);
/* The struct_size rule of include/sift.h ("ABI"): SIFT_E_ARG naming
 * `type` when `got` is 0 or above `have` (this library's sizeof). */
SIFT__HIDDEN sift_status sift__check_struct_size(sift_error *err, const char *type, uint32_t got,
                                                 size_t have);
/* Copies at most cap-1 bytes of src into dst without splitting a UTF-8
 * sequence; always NUL-terminates (cap >= 1). */
SIFT__HIDDEN void sift__strlcpy_utf8(char *dst, const char *src, size_t cap);

/* ------------------------------------------------------------------ */
/* UTF-8 (core/utf8.c): the one decoder and validator                  */
/* ------------------------------------------------------------------ */

/* Decodes the sequence at s[0..n): returns its length (1 to 4) and the
 * code point through *cp, or 0 (*cp untouched) when s does not start with
 * a well-formed sequence: an overlong form, a surrogate, a code point
 * above U+10FFFF, a sequence cut by the end, a stray continuation byte,
 * or n = 0. */
SIFT__HIDDEN size_t sift__utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* 1 if s[0..n) is well-formed UTF-8 (as sift__utf8_decode), with *bad =
 * n; 0 otherwise, with *bad = the offset of the first byte of the first
 * ill-formed sequence. `bad` may be NULL. NUL is well-formed. */
SIFT__HIDDEN int sift__utf8_valid(const unsigned char *s, size_t n, size_t *bad);
/* The value of the hexadecimal digit c ('0'-'9', 'a'-'f', 'A'-'F'), or -1
 * for any other c (a negative char and EOF included). The one hex-digit
 * reader of src/: \xHH and \uXXXX escapes, <0xHH> byte pieces, %HH. */
SIFT__HIDDEN int sift__hex_digit(int c);

/* ------------------------------------------------------------------ */
/* Allocation (core/alloc.c)                                           */
/* ------------------------------------------------------------------ */

typedef struct sift__alloc {
    sift_allocator a; /* always complete: defaults filled in */
    /* The busy counter of the object this allocator serves (NULL: none).
     * Every call into a caller's allocator (not the default one) counts
     * it up for the call, so an allocator that calls back into the object
     * finds it busy whatever entry point allocates (the busy rule,
     * core/chain.c). Never copied into another object unchanged: an
     * object that copies an allocator points it at its own counter. */
    int *hold;
} sift__alloc;

/* Checks the caller's allocator (NULL = malloc/free; struct_size; alloc
 * and free both or neither) and fills `al`. SIFT_E_ARG on a bad one. */
SIFT__HIDDEN sift_status sift__alloc_init(sift__alloc *al, const sift_allocator *user,
                                          sift_error *err) SIFT_NODISCARD;
/* Grows the block `p` (old_cap elements of esz bytes, the first n_used in
 * use; p may be NULL with old_cap 0) to new_cap elements, keeping the
 * first n_used. Through the hook's realloc when it has one, else alloc +
 * copy + free. Returns the new block, or NULL with `p` untouched and still
 * owned by the caller. The bytes past n_used are unspecified. */
SIFT__HIDDEN void *sift__grow(const sift__alloc *al, void *p, size_t n_used, size_t old_cap,
                              size_t new_cap, size_t esz);
/* The growable array of src/: every array that grows by doubling grows
 * here, so the overflow checks and the failure rule are written once.
 * Makes the array *arr (of *cap elements of `esz` bytes, the first `used`
 * of them live) hold at least `need` elements: nothing happens when need
 * <= *cap; otherwise the capacity becomes *cap (`first` when *cap is 0)
 * doubled until it holds `need`, the block grows through sift__grow, and
 * the elements from `used` on are zero. `arr` is the address of the array
 * pointer (a T ** passed as void *); used <= *cap. SIFT_E_NOMEM when the
 * allocation fails or the size overflows size_t, with *arr and *cap
 * unchanged. Writes no sift_error: each caller names its own array. */
SIFT__HIDDEN sift_status sift__reserve(const sift__alloc *al, void *arr, size_t *cap, size_t used,
                                       size_t need, size_t esz, size_t first) SIFT_NODISCARD;
/* Returns NULL on failure or when n * size overflows. Memory is zeroed. */
SIFT__HIDDEN void *sift__calloc(const sift__alloc *al, size_t n, size_t size);
/* As sift__calloc without the zeroing (scratch that is always written
 * before it is read). */
SIFT__HIDDEN void *sift__malloc(const sift__alloc *al, size_t n, size_t size);
SIFT__HIDDEN void sift__free(const sift__alloc *al, void *p);
/* Duplicates n bytes (+ a NUL); NULL on failure. */
SIFT__HIDDEN char *sift__memdup(const sift__alloc *al, const void *p, size_t n);

/* ------------------------------------------------------------------ */
/* Files (core/file.c): every file sift reads is opened here            */
/* ------------------------------------------------------------------ */

/* Opens `path` for reading without blocking and checks on the descriptor
 * that it is a regular file of at most `max` bytes. Gives the descriptor
 * (blocking mode, close-on-exec; the caller closes it) and the size.
 * SIFT_E_IO when it cannot be opened or is not a regular file (a FIFO, a
 * directory, a device), SIFT_E_LIMIT above `max`; messages start with
 * the path, err->source is the path. On failure *fd is -1. */
SIFT__HIDDEN sift_status sift__file_open(const char *path, uint64_t max, int *fd, uint64_t *size,
                                         sift_error *err);
/* Reads the whole regular file at `path` (at most `max` bytes) into
 * *data, allocated from `al` with a NUL after the *len bytes. Statuses as
 * sift__file_open, plus SIFT_E_IO for a read error or a file that changed
 * size while it was read, SIFT_E_NOMEM. On failure *data is NULL. */
SIFT__HIDDEN sift_status sift__file_read(const sift__alloc *al, const char *path, size_t max,
                                         char **data, size_t *len, sift_error *err);

/* ------------------------------------------------------------------ */
/* RNG (core/rng.c): xoshiro256** seeded through splitmix64            */
/* ------------------------------------------------------------------ */

typedef struct sift__rng {
    uint64_t s[4];
} sift__rng;

SIFT__HIDDEN void sift__rng_seed(sift__rng *r, uint64_t seed);
SIFT__HIDDEN uint64_t sift__rng_next(sift__rng *r);
/* u = (next >> 40) * 2^-24: a float in [0, 1). */
SIFT__HIDDEN float sift__rng_float(sift__rng *r);

/* ------------------------------------------------------------------ */
/* Numbers (core/num.c): sift's own elementary functions and exact sums */
/* ------------------------------------------------------------------ */

/* Elementary functions built only from IEEE-754 +, -, *, / and exact bit
 * operations, so every platform and compiler gives the same bits (no
 * libm, no FMA: the library is built with -ffp-contract=off).
 * sift__expf is monotone non-decreasing; expf(0) = 1, expf(-inf) = 0. */
SIFT__HIDDEN float sift__expf(float x);
SIFT__HIDDEN float sift__logf(float x); /* x > 0; logf(0) = -inf */
SIFT__HIDDEN double sift__exp(double x);
SIFT__HIDDEN double sift__log(double x); /* x > 0; log(0) = -inf */
/* x^y for x >= 0 (x = 0: 0 for y > 0, 1 for y = 0). */
SIFT__HIDDEN double sift__pow(double x, double y);
SIFT__HIDDEN double sift__sqrt(double x); /* IEEE square root (correctly rounded) */

/* Vector form of w[i] = sift__weight(sift__expf(l[i] - m)); bit-identical
 * to the scalar composition. Returns the exact sum through *sum. */
typedef struct sift__u128 {
    uint64_t lo, hi;
} sift__u128;

/* w = trunc(e * 2^62) for e in [0, 1]. */
SIFT__HIDDEN uint64_t sift__weight(float e);

static inline sift__u128 sift__u128_from(uint64_t x)
{
    sift__u128 r = {x, 0};
    return r;
}
static inline sift__u128 sift__u128_add(sift__u128 a, sift__u128 b)
{
    sift__u128 r;
    r.lo = a.lo + b.lo;
    r.hi = a.hi + b.hi + (r.lo < a.lo);
    return r;
}
static inline sift__u128 sift__u128_add64(sift__u128 a, uint64_t b)
{
    sift__u128 r;
    r.lo = a.lo + b;
    r.hi = a.hi + (r.lo < b);
    return r;
}
/* lo + hi * 2^32 exactly: the sum of weights kept as two 64-bit sums of
 * their 32-bit halves (each weight at most 2^62, so over fewer than
 * 2^31 of them neither sum overflows). */
static inline sift__u128 sift__u128_halves(uint64_t lo, uint64_t hi)
{
    sift__u128 r = {hi << 32, hi >> 32};
    return sift__u128_add64(r, lo);
}
static inline sift__u128 sift__u128_sub(sift__u128 a, sift__u128 b)
{
    sift__u128 r;
    r.lo = a.lo - b.lo;
    r.hi = a.hi - b.hi - (a.lo < b.lo);
    return r;
}
/* -1, 0, 1 */
static inline int sift__u128_cmp(sift__u128 a, sift__u128 b)
{
    if (a.hi != b.hi)
        return a.hi < b.hi ? -1 : 1;
    if (a.lo != b.lo)
        return a.lo < b.lo ? -1 : 1;
    return 0;
}
/* Correctly rounded (nearest, ties to even) conversion to double. */
SIFT__HIDDEN double sift__u128_to_double(sift__u128 a);
/* floor(W * u / 2^64): the draw target for a 64-bit uniform u. */
SIFT__HIDDEN sift__u128 sift__u128_scale_u64(sift__u128 W, uint64_t u);
/* ceil(W * p) (ceil = 1) or floor(W * p) (ceil = 0), exactly, for a float
 * p in [0, 1]. */
SIFT__HIDDEN sift__u128 sift__u128_scale_float(sift__u128 W, float p, int ceil);

/* Sum of v[0..n) taken in the documented id-order scheme: eight running
 * double sums, v[i] going to lane i % 8, combined as
 * ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)). The caller passes the values in
 * ascending token-id order. */
SIFT__HIDDEN double sift__dsum_idorder(const double *v, size_t n);

/* ------------------------------------------------------------------ */
/* Canonical order (core/order.c)                                      */
/* ------------------------------------------------------------------ */

/* Order-preserving map of a float to an unsigned integer; -0 and +0 map
 * to the same value, as they compare equal. NaN never reaches it. */
static inline uint32_t sift__fkey(float f)
{
    /* Branch-free (the "-0 becomes +0" test used to compile to a branch
     * and a store/reload that made whole-row loops several times slower):
     * -0 (0x80000000) is mapped to +0, then negative floats are
     * complemented and positive ones get the top bit. Same values as
     * before for every non-NaN float (checked exhaustively). */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = u == 0x80000000u ? 0u : u;
    uint32_t neg = (uint32_t)((int32_t)u >> 31);
    return u ^ (neg | 0x80000000u);
}
/* Canonical key: a before b  <=>  ckey(a) > ckey(b). */
static inline uint64_t sift__ckey(float logit, int32_t id)
{
    return ((uint64_t)sift__fkey(logit) << 32) | (uint32_t) ~(uint32_t)id;
}
static inline int sift__canon_before(const sift_candidate *a, const sift_candidate *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* ------------------------------------------------------------------ */
/* Candidate arrays                                                    */
/* ------------------------------------------------------------------ */

enum { SIFT__ORDER_ID = 0, SIFT__ORDER_CANON = 1, SIFT__ORDER_NONE = 2 };

/* The working set of a step. The set of (id, logit) pairs is what the
 * stages define their result on; `order` only says how it is stored:
 * ascending id, canonical, or neither. Stages that drop tokens keep the
 * storage order; stages that change logits call sift__arr_touched; stages
 * that need an order ask for it (sift__arr_canon, sift__arr_idorder).
 * `dense` means n == V and c[i].id == i. */
typedef struct sift__arr {
    sift_candidate *c;
    size_t n;
    int32_t V;
    uint8_t order;
    uint8_t dense;
} sift__arr;

/* Logits of `a` were changed in place: canonical storage order may be
 * lost (id order cannot be). */
static inline void sift__arr_touched(sift__arr *a)
{
    if (a->order == SIFT__ORDER_CANON)
        a->order = SIFT__ORDER_NONE;
}

/* ------------------------------------------------------------------ */
/* Scratch space, one per chain, sized to the largest V seen           */
/* ------------------------------------------------------------------ */

typedef struct sift__ws {
    size_t cap; /* elements in every buffer below */
    /* The allocator the buffers belong to when they are a workspace's
     * (sift_workspace, lent to a chain for one call): reserve and free
     * use it instead of the one they are given. NULL for a chain's own
     * scratch, which uses the chain's allocator. */
    const sift__alloc *al;
    sift_candidate *cand;  /* the working array */
    sift_candidate *cand2; /* a second array (sorts, copies) */
    uint64_t *u64a;        /* weights */
    uint64_t *u64b;        /* keys */
    uint64_t *u64c;        /* selection scratch */
    uint64_t *u64d;        /* selection scratch */
    double *f64;           /* per-token doubles */
    uint32_t *u32;         /* indices, histograms */
} sift__ws;

SIFT__HIDDEN sift_status sift__ws_reserve(sift__ws *ws, const sift__alloc *al, size_t n,
                                          sift_error *err);
SIFT__HIDDEN void sift__ws_free(sift__ws *ws, const sift__alloc *al);

/* ------------------------------------------------------------------ */
/* Per-sample context                                                  */
/* ------------------------------------------------------------------ */

/* The record of carried weights: w = ws->u64a holds, for i < n,
 * w[i] = sift__weight(sift__expf(c[i].logit - m)) of the array c[0..n)
 * as the stage `stage` left it, with m the largest logit (bits m_bits)
 * and W the exact sum of w[0..n). stage = SIZE_MAX: none. */
typedef struct sift__carry {
    size_t stage;
    const sift_candidate *c;
    size_t n;
    uint32_t m_bits;
    sift__u128 W;
} sift__carry;

typedef struct sift__ctx {
    sift__rng rng; /* working copy, committed on success */
    sift__ws *ws;
    sift_error *err;
    int32_t V;
    size_t stage;     /* index of the stage being applied */
    int32_t selected; /* token id chosen by the selector, -1 */
    /* The first stage after which every candidate was -inf, SIZE_MAX
     * when none (yet): what a "no candidate left" message names. */
    size_t banned_at;
    /* For tests (0 otherwise): the path sift__mass_prefix takes on large
     * arrays (SIFT__MASS_*), and how often its band path answered and
     * handed over to the full histogram in this context. Results never
     * depend on them. */
    int mass_path;
    uint32_t band_answered, band_handed_over;
    /* Weights one stage leaves in ws->u64a for the stage right after it
     * (sift__carry_leave / sift__carry_take). carry_armed is 1 only while
     * a stage loop that runs the stages back to back (step.c's
     * apply_stages, the complete branch of certify.c's walk) is inside a
     * stage's apply; every other caller of apply leaves it 0, so nothing
     * is carried there. carry_used counts the takes (for tests).
     * carry_next is 1 while the stage being applied is followed, in that
     * loop, by a stage that takes weights (ops->takes_carry): only then
     * is leaving them worth a producer's extra work. carry_bad, for
     * tests (NULL otherwise), makes every take recompute the weights and
     * compare; a mismatch is counted there and the take refused. */
    int carry_armed;
    int carry_next;
    uint32_t carry_used;
    uint64_t *carry_bad;
    sift__carry carry;
    /* top_n_sigma applies in this step that ran the definition's sums
     * (for tests: added to the chain's n_tns_exact). */
    uint32_t tns_exact;
    /* On an incomplete set only: a lower bound on the integer mass of the
     * absent tokens (sift__tail_absent_mass_lo) that a certify_mass rule
     * used and that the apply right after it adds to the present mass
     * where its outcome is a monotone function of the total (mirostat
     * 2.0's cut, XTC's threshold), so that it computes the outcome the
     * rule certified for every total from there up. The walk sets it back
     * to 0 after that apply; 0 everywhere else. */
    sift__u128 absent_lo;
    /* The row step's tail route (core/step.c) sets tail_want before it
     * builds the row's prefix; the one-pass top-k (core/topk.c) then
     * sums the tail kernel's terms of the row in the same pass where it
     * can, and sets tail_ok with tail_S and tail_lower: an upper and a
     * lower bound of the sum over every token at or below the prefix's
     * last logit lk of exp(l - m), m the row's largest logit
     * (sift__tail_join), the bounds the route would otherwise get from
     * a second pass. tail_ok = 0 (no fused sum): the route reads the row
     * again. */
    int tail_want, tail_ok;
    double tail_S, tail_lower;
    /* The tail route inside a full pass (sift__arr_top_select): arr_top
     * counts its decisions in this step (added to the chain's n_arr_top);
     * arr_top_off turns it off (the chain's switch, a chain the row's
     * tail route serves, a cross-check's reference step); arr_skip and
     * arr_fails point to the chain's back-off. */
    uint32_t arr_top;
    int arr_top_off;
    /* The float-certified draw (sift__fdraw): its attempts and decisions
     * in this step (added to the chain's n_fdraw_tries, n_fdraw), and
     * its switch (the chain's fdraw_off; a cross-check's reference). */
    uint32_t fdraw_tries, fdraw_done;
    int fdraw_off;
    /* Float weights a stage left in ws->u64a for the next one
     * (sift__fxtc_none, sift__fcut_keep): fstage = the stage that left
     * them (SIZE_MAX: none), for the array fc[0..fn) at the largest logit
     * whose bits are fm, with their double sum fS and a lower bound fxlow
     * on their clamped differences (core/fdraw.c reuses them instead of
     * its float pass); fsamp = 1 when ws->u32 holds the pass's sample of
     * that array too (XTC's record; top_p's moved the weights). */
    size_t fstage;
    /* sift__fxtc_none's back-off: the chain's fx_skip and fx_fails (NULL
     * outside a chain's step: no back-off). */
    uint32_t *fx_skip, *fx_fails;
    const sift_candidate *fc;
    size_t fn;
    uint32_t fm;
    double fS;
    float fxlow;
    int fsamp;
    /* The takes of such float weights in this step (added to the chain's
     * n_fcarried; for tests). */
    uint32_t fcarry_used;
    uint32_t *arr_skip, *arr_fails;
    /* 1 while the stages run over a loaded whole row (step.c's
     * run_stages): the array a stage sees is then the whole set, which
     * the route inside the full pass needs. 0 everywhere else (a walk's
     * present tokens, a slice). */
    int arr_whole;
} sift__ctx;

enum {
    SIFT__MASS_DEFAULT = 0,     /* the band path with its AVX2 or AVX-512 pass where
                                   sift__simd() allows one, else the full histogram */
    SIFT__MASS_BAND_VEC = 1,    /* the band path, the widest vector pass sift__simd()
                                   allows (scalar if none) */
    SIFT__MASS_BAND_SCALAR = 2, /* the band path, scalar pass */
    SIFT__MASS_HIST = 3         /* the full histogram only */
};

/* 1 when every candidate of c[0..n) is -inf (or n = 0). Stops at the
 * first finite logit. */
static inline int sift__all_banned(const sift_candidate *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (c[i].logit >= -FLT_MAX)
            return 0;
    return 1;
}

/* Called after stage i left the set `a`: ctx->banned_at becomes the
 * first stage of the current run of stages after which nothing is
 * finite, or SIZE_MAX once something is finite again. */
static inline void sift__note_banned(sift__ctx *ctx, size_t i, const sift__arr *a)
{
    if (!sift__all_banned(a->c, a->n))
        ctx->banned_at = SIZE_MAX;
    else if (ctx->banned_at == SIZE_MAX)
        ctx->banned_at = i;
}

/* Carrying weights from one stage to the next.
 *
 * The rule: weights are reused only by the stage right after the one
 * that left them (ctx->stage one more), inside a stage loop that armed
 * the context, on the same array (pointer and length), at the same
 * largest logit bit for bit. A stage that changes a logit, the set or
 * its storage order in between is a stage in between, so it voids the
 * record by its place alone: a stage need not declare anything for its
 * changes to void the carry. A producer must leave the record only when
 * ws->u64a[i] is the weight of a->c[i] at m for every i < a->n on its
 * return, and the consumer takes it (once) before it writes u64a.
 * Which SIMD path computed the weights does not matter: every path of
 * sift__weights gives the same bits. A record is left only when the
 * next stage of the loop takes weights (ops->takes_carry, ctx->carry_next:
 * sift__carry_wanted), so no producer moves weights nobody takes. */
/* For tests (ctx->carry_bad set): 1 when ws->u64a holds the weights of
 * a's candidates at m and W is their sum, recomputed into ws->u64b (free
 * while a take is being decided). */
SIFT__HIDDEN int sift__carry_check(sift__ctx *ctx, const sift__arr *a, float m, sift__u128 W);
static inline void sift__carry_clear(sift__ctx *ctx)
{
    ctx->carry.stage = SIZE_MAX;
}
static inline uint32_t sift__carry_bits(float m)
{
    uint32_t u;
    memcpy(&u, &m, sizeof u);
    return u;
}
/* 1 when a stage's weights would be taken if it left them: the loop is
 * armed and the next stage takes weights. A producer asks before doing
 * work only a taker needs (moving the weights with a compaction). */
static inline int sift__carry_wanted(const sift__ctx *ctx)
{
    return ctx->carry_armed && ctx->carry_next;
}
/* Called by a stage whose apply leaves in ws->u64a the weights of its
 * output a at m (sum W); a no-op unless sift__carry_wanted. */
static inline void sift__carry_leave(sift__ctx *ctx, const sift__arr *a, float m, sift__u128 W)
{
    if (!sift__carry_wanted(ctx))
        return;
    ctx->carry.stage = ctx->stage;
    ctx->carry.c = a->c;
    ctx->carry.n = a->n;
    ctx->carry.m_bits = sift__carry_bits(m);
    ctx->carry.W = W;
}
/* The weights of a's candidates at m left by the stage just before
 * this one (ws->u64a, their sum through *W), or NULL when there are none
 * that match; clears the record either way. */
/* 1 when the stage right before this one left weights for this very
 * array (whatever their m): sift__carry_take may then give them. */
static inline int sift__carry_pending(const sift__ctx *ctx, const sift__arr *a)
{
    const sift__carry *k = &ctx->carry;
    return ctx->carry_armed && k->stage != SIZE_MAX && k->stage + 1 == ctx->stage && k->c == a->c &&
           k->n == a->n;
}

/* 1 when the stage right before this one left float weights for this
 * very array (ctx->fstage: sift__fxtc_none, sift__fcut_keep): nothing may
 * write ws->u64a (nor, after XTC's test, ws->u32) before the float draw
 * or cut takes them. */
static inline int sift__fcarry_pending(const sift__ctx *ctx, const sift__arr *a)
{
    return ctx->carry_armed && ctx->fstage != SIZE_MAX && ctx->fstage + 1 == ctx->stage &&
           ctx->fc == a->c && ctx->fn == a->n;
}

static inline const uint64_t *sift__carry_take(sift__ctx *ctx, const sift__arr *a, float m,
                                               sift__u128 *W)
{
    const sift__carry k = ctx->carry;
    sift__carry_clear(ctx);
    if (!ctx->carry_armed || k.stage == SIZE_MAX || k.stage + 1 != ctx->stage || k.c != a->c ||
        k.n != a->n || k.m_bits != sift__carry_bits(m))
        return NULL;
    if (SIFT__UNLIKELY(ctx->carry_bad != NULL) && !sift__carry_check(ctx, a, m, k.W)) {
        ++*ctx->carry_bad;
        return NULL;
    }
    ctx->carry_used++;
    *W = k.W;
    return ctx->ws->u64a;
}

/* SIFT_E_NO_CANDIDATE naming the stage about to run, for stages that
 * find every candidate at -inf. */
SIFT__HIDDEN sift_status sift__no_candidate(sift__ctx *ctx, const char *stage_name);
/* SIFT_E_NO_CANDIDATE naming stage ctx->banned_at, after which every
 * candidate was -inf ("no candidate left: stage 2 (logit_bias) removed the last candidate ..."). */
SIFT__HIDDEN sift_status sift__no_candidate_left(const sift_chain *chain, const sift__ctx *ctx);
/* The token id of a canonical key. */
static inline int32_t sift__ckey_id(uint64_t key)
{
    return (int32_t) ~(uint32_t)(key & 0xffffffffu);
}

/* ------------------------------------------------------------------ */
/* Stages                                                              */
/* ------------------------------------------------------------------ */

typedef struct sift__stage sift__stage;
struct sift__bound;

/* What the chain asks of a stage, in four groups. Every slot but `name`
 * and `apply` may be NULL (or 0): the comment on each says what NULL
 * means. Stage tables use designated initialisers, so the order below is
 * free to follow the groups. */
typedef struct sift__stage_ops {
    const char *name;
    /* The stage's name when it is not ops->name (custom stages); NULL =
     * ops->name. Use sift__stage_name. */
    const char *(*display_name)(const sift__stage *st);

    /* -- Apply: what the stage does to a step's candidate set. -------- */
    /* Transforms the candidate set. A selector sets ctx->selected.
     * Must not change stage state (that is accept's job) except the
     * selector's pending record (see mirostat). */
    sift_status (*apply)(sift__stage *st, sift__ctx *ctx, sift__arr *a);
    /* Optional, for a stage that comes first in a whole-row step's full
     * pass: builds in `a` (ctx->ws->cand) the array that loading the row
     * (every token, in id order, ORDER_ID, dense) and applying the stage
     * would leave, bit for bit, without loading every token, and returns
     * 1; returns 0 to decline (nothing written that the step reads: it
     * loads the row and applies the stage as usual, and any error of the
     * row or the stage comes from there). May use ctx->ws; must not use
     * the RNG. NULL = never. */
    int (*apply_row)(sift__stage *st, sift__ctx *ctx, const float *row, int32_t V, sift__arr *a);
    /* Optional, for a selector that is the chain's only stage: selects
     * from the whole row without loading it and returns 1, with
     * ctx->selected and ctx->rng bit for bit what loading the row and
     * apply would leave; or returns 0 with nothing changed that the step
     * reads (it then loads the row as usual, and any error of the row
     * comes from there). May use ctx->ws. NULL = never. */
    int (*select_row)(sift__stage *st, sift__ctx *ctx, const float *row, int32_t V);
    /* For selectors: reduces `a` to the support of the final draw (for
     * sift_chain_distribution). NULL = the whole array is the support.
     * Greedy is special-cased by the chain. */
    sift_status (*support)(sift__stage *st, sift__ctx *ctx, sift__arr *a);
    /* 1: the stage draws the token (sets ctx->selected). */
    uint8_t is_selector;
    /* 1: the selector is greedy (the chain special-cases it). */
    uint8_t is_greedy;
    /* 1: apply takes the weights the stage right before it left
     * (sift__carry_take; dist). A stage loop lets a stage leave weights
     * only when the next stage has this. */
    uint8_t takes_carry;

    /* -- Class and plan: what the analyzer and the slice path may assume
     * about apply, and the bounds they size a step with. --------------- */
    /* Capability class (and its bound through *n). NULL = WHOLE. */
    sift_class (*cls)(const sift__stage *st, int64_t *n);
    /* The size of the vocabulary the stage decides over: a row of another
     * length is refused before any stage runs, on every path (else the
     * outcome would depend on which token is drawn). 0 = any length. */
    int32_t (*n_vocab)(const sift__stage *st);
    /* Largest token id the stage refers to, -1 if none (checked
     * against V at sample time). NULL = none. */
    int32_t (*max_token)(const sift__stage *st);
    /* LOWERS and RAISES stages: how many tokens the stage may lower, from
     * its configuration (dynamic = 0) or from its current state (dynamic =
     * 1, e.g. the distinct tokens in a penalty window); -1 = unbounded.
     * NULL = the n that cls reports. */
    int64_t (*lowers)(const sift__stage *st, int dynamic);
    /* MONOTONE stages: the image of a logit bound under the stage's map
     * (for temperature: b / t), or NaN when the stage cannot say (then the
     * slice path falls back to the whole row). NULL = cannot say. */
    float (*map_bound)(const sift__stage *st, float bound);
    /* MONOTONE stages that map every logit z to fl(z / t), one IEEE float
     * division by a positive t: returns t, so the tail-mass bound can
     * follow (core/tail.c); NaN or NULL = another map (the tail bound is
     * then dropped and the free bound is used after the stage). */
    float (*tail_divisor)(const sift__stage *st);
    /* RAISES stages: the ids the stage may raise this step (written up to
     * cap, ascending or not, no duplicates), returns how many there are.
     * NULL = none. */
    size_t (*extras)(const sift__stage *st, int32_t *ids, size_t cap);
    /* RAISES stages: the most ids `extras` can ever return; stages with
     * `allowed`: the most ids it can list. */
    int64_t (*max_extras)(const sift__stage *st);
    /* LOWERS stages that may ban all but a few tokens (a grammar): the
     * ids the stage lets through this step when there are few of them
     * (*ids ascending, valid until the stage next changes), else
     * SIZE_MAX. The chain asks for them as extras; when a slice holds all
     * of them, the stage has banned every absent token (docs/analyzer.md,
     * "Forced tokens"). NULL = never. */
    size_t (*allowed)(sift__stage *st, const int32_t **ids);
    /* Stages with `allowed`: computes and caches this step's answer of
     * `allowed`, reporting what that call cannot (SIFT_E_NOMEM, a work
     * limit). Changes no state apply reads (caches only). */
    sift_status (*prepare_allowed)(sift__stage *st, sift_error *err);

    /* -- Certificate: whether apply on a slice gives the whole row's
     * result (docs/analyzer.md). ---------------------------------------- */
    /* THRESHOLD stages on an incomplete set (a slice): given the present
     * tokens in canonical order and the bound on every absent token,
     * returns 1 when applying the stage to the present tokens gives its
     * whole-row result with every absent token removed, 0 when the absent
     * tokens could change the outcome. NULL = never certified. */
    int (*certify)(const sift__stage *st, sift__ctx *ctx, const sift__arr *a,
                   const struct sift__bound *b);
    /* WHOLE stages whose outcome depends on the tokens a slice does not
     * hold only through their total mass (top_p's cut, dist's draw):
     * given the present tokens in canonical order and the bound *b (its
     * tail mass included), returns 1 when applying the stage to the
     * present tokens gives its whole-row result with every absent token
     * removed (a truncation), or is the whole-row selection (a
     * selector); 0 when it cannot tell. Pure: draws from a copy of the
     * RNG. NULL = never certified (docs/analyzer.md, "Tail mass"). */
    int (*certify_mass)(const sift__stage *st, sift__ctx *ctx, const sift__arr *a,
                        const struct sift__bound *b);
    /* With certify_mass: 1 when a certified apply only removes present
     * tokens and leaves every absent token as it was (XTC drops its top
     * choices): the set stays incomplete and the bound holds; `lowers`
     * then gives how many tokens it may remove (-1 unbounded). 0 = a
     * truncation or a selector. */
    uint8_t mass_keeps;

    /* -- State: the tokens a stage takes and the life of its block. ----- */
    /* The fallible half of accept: makes a later accept of `token` unable
     * to fail (checks the token, caches or reserves what accept needs),
     * changing no state the stage's apply reads. The chain calls it on
     * every stage that takes the token before it calls any accept, so a
     * refused token leaves the whole chain unchanged. */
    sift_status (*prepare_accept)(sift__stage *st, int32_t token, sift_error *err);
    /* Takes an accepted token. Cannot fail (buffers are preallocated). */
    void (*accept)(sift__stage *st, int32_t token);
    /* 1: the stage takes only generated tokens (sift_chain_accept);
     * prompt tokens (sift_chain_accept_prompt) do not reach its
     * prepare_accept or accept (a grammar constrains what is generated,
     * not the prompt). */
    uint8_t generated_only;
    /* After every stage took a generated token (not a prompt token):
     * precomputes from the state what the next step reads (DRY's
     * penalised set), so that apply and the dynamic plan read it. Cannot
     * fail. NULL = nothing to settle. */
    void (*settle)(sift__stage *st);
    /* Back to the state after construction. NULL = nothing to reset. */
    void (*reset)(sift__stage *st);
    /* Mixes the stage's mutable state into a digest; NULL = stateless. */
    uint64_t (*digest)(const sift__stage *st, uint64_t h);
    /* Deep copy; NULL = the stage has no state beyond its constant
     * parameters and is copied with memcpy of `size` bytes. */
    sift_status (*clone)(const sift__stage *st, sift__stage **out, const sift__alloc *al,
                         sift_error *err);
    /* Stages whose clone is not flat: copies the mutable state of `src`
     * into `dst`, a clone of a stage with the same configuration (the
     * speculative-verification shadow, core/verify.c), without allocating
     * once dst's buffers have grown to src's sizes. On failure dst may be
     * half copied (the caller re-syncs it before any use). NULL = the
     * state cannot be copied: a shadow holding the stage cannot stand
     * for the chain (positions after the first need the whole row). */
    sift_status (*sync)(sift__stage *dst, const sift__stage *src, sift_error *err);
    /* Frees what the stage owns besides its own block; NULL = nothing. */
    void (*destroy)(sift__stage *st, const sift__alloc *al);
} sift__stage_ops;

/* Check mode's checker: an object that judges the token a step drew and,
 * when it refuses it, bans what it refuses in a row so the step can draw
 * again (docs/analyzer.md, "Check mode"). The chain owns it; the module
 * that defines it installs it with sift__chain_set_checker (the grammar:
 * sift_chain_set_check_grammar, src/grammar/gbnf_check_mode.c), so the core
 * knows its behaviour only through these functions. */
typedef struct sift__checker_ops {
    /* What messages call it ("check grammar"). */
    const char *name;
    /* *ok = 1 when the checker allows `token` now, else 0. */
    sift_status (*accepts)(void *self, int32_t token, int *ok, sift_error *err);
    /* Sets to -inf every entry of row[0..V) whose token it refuses. */
    sift_status (*ban)(void *self, float *row, int32_t V, sift_error *err);
    /* As sift__stage_ops.prepare_accept; accept after it cannot fail. */
    sift_status (*prepare_accept)(void *self, int32_t token, sift_error *err);
    sift_status (*accept)(void *self, int32_t token, sift_error *err);
    void (*reset)(void *self);
    /* A deep copy, owned by the chain it is installed on. */
    sift_status (*clone)(const void *self, void **out, sift_error *err);
    void (*destroy)(void *self);
    /* Mixes the matching state into a digest (sift__chain_state_digest). */
    uint64_t (*digest)(const void *self, uint64_t h);
    /* The vocabulary size, as sift__stage_ops.n_vocab (0 = any). */
    int32_t (*n_vocab)(const void *self);
    /* As sift__stage_ops.sync, for the speculative-verification shadow
     * (core/verify.c): copies the state of `from`, a checker of the same
     * configuration, into self; SIFT_E_ARG when `from` is not a clone of
     * the same checker (the shadow then takes a clone). NULL = cannot. */
    sift_status (*sync)(void *self, const void *from, sift_error *err);
} sift__checker_ops;

/* The certificate's bound on the tokens a slice does not hold: with
 * by_key, every absent token x has ckey(x) < key (it comes after the
 * prefix in canonical order); otherwise every absent logit is <= logit
 * (after a monotone stage, which can merge logits and so loses the id
 * tie-break). */
typedef struct sift__bound {
    int by_key;
    uint64_t key;
    float logit;
    /* The tail-mass bound (core/tail.c, docs/analyzer.md "Tail mass"),
     * valid when has_tail: there are reals y_i, one per absent token,
     * with sum exp(y_i - ref) <= tail (real arithmetic), and every absent
     * token whose current logit z_i is >= -lam has z_i <= y_i + delta.
     * has_tail = 0 (a zeroed struct) = no such bound: only the free bound
     * n_absent * w(logit) is used. n_absent is the count of tokens that
     * are neither present nor removed (set by sift__walk).
     * tail_lo, with has_tail: sum over the absent tokens of exp(z_i - ref)
     * >= tail_lo (real arithmetic, z_i their current logits). Only the
     * row step's tail route sets it (sift__tail_set_lower); every stage
     * that may change an absent logit sets it back to 0 (no lower bound),
     * IDENTITY stages and XTC's removal of present tokens keep it. */
    int has_tail;
    double tail, ref, delta, lam;
    double tail_lo;
    uint64_t n_absent;
} sift__bound;

/* 1 if candidate x is certainly ahead of every absent token. */
static inline int sift__bound_ahead(const sift__bound *b, const sift_candidate *x)
{
    if (b->by_key)
        return sift__ckey(x->logit, x->id) >= b->key;
    return x->logit > b->logit;
}

struct sift__stage {
    const sift__stage_ops *ops;
    size_t size; /* bytes of the whole stage block, for the default clone */
};

#define SIFT__CHAIN_MAGIC 0x53494654u /* "SIFT" */

/* The chain (opaque in the API; core files share its layout). */
struct sift_chain {
    uint32_t magic;
    sift__alloc al;
    uint64_t seed;
    sift__rng rng;
    int32_t n_vocab; /* expected row length, 0 = any */
    int32_t max_vocab;
    int32_t max_history;
    int32_t max_stages;
    int32_t last_V; /* length of the last row sampled, 0 = none */
    /* A sample was committed since the last accept: the next accept of a
     * generated token settles the stages (ops->settle). Accepts without
     * samples between them (a replayed history) do not, so their cost
     * stays what it was. */
    uint8_t settle_due;
    int busy;
    sift__stage **stages;
    size_t n_stages, cap_stages;
    sift__ws ws;
    /* Steps decided from a prefix / sent to the whole row after trying. */
    uint64_t n_prefix_decided, n_prefix_fallback;
    /* Slice steps decided on the slice, hook calls, SIFT_E_NEED_ROW. */
    uint64_t n_slice_decided, n_hook_calls, n_need_row;
    /* The row hook and the row buffer it fills (V floats, sized on the
     * first call that needs it). */
    sift_row_hook hook;
    void *hook_user;
    float *row;
    size_t row_cap;
    /* A set over token ids without clearing (slice validation): id is in
     * it when seen[id] == seen_gen; a new generation empties it. */
    uint32_t *seen;
    size_t seen_cap;
    uint32_t seen_gen;
    /* The check-mode checker (owned; check_ops NULL = none), and how
     * often it made a step resample. */
    const sift__checker_ops *check_ops;
    void *check;
    uint64_t n_grammar_resamples;
    /* The static plan's decisive stage and extras bound, cached for
     * the sampling paths; valid while plan_stages == n_stages. */
    size_t plan_stages;
    int32_t plan_decided_at, plan_max_extras, plan_k;
    /* Work done, for tests that count it: certificate walks (sift__walk)
     * and full passes of the stages over a whole row. */
    uint64_t n_walks, n_full_passes;
    /* Weights a stage took from the stage before it (sift__carry_take),
     * counted over the steps that succeeded. */
    uint64_t n_carried;
    /* top_n_sigma applies whose certified threshold could not tell and
     * ran the definition's sums (sift__tns_threshold), counted over the
     * steps that succeeded. */
    uint64_t n_tns_exact;
    /* Decisions of the tail route inside a full pass
     * (sift__arr_top_select), counted over the steps that succeeded; and
     * a switch that turns that route off (tests; a cross-check's
     * reference step), 0 otherwise. */
    uint64_t n_arr_top;
    uint8_t arr_top_off;
    /* The float-certified paths (sift__fdraw, sift__fcut,
     * sift__fxtc_none): attempts and decisions, counted over the
     * whole-row steps that succeeded (as n_arr_top; a slice's steps are
     * not counted); and a switch that turns them off (tests; a
     * cross-check's reference step), 0 otherwise. */
    uint64_t n_fdraw_tries, n_fdraw;
    uint8_t fdraw_off;
    /* The takes of float weights left by the stage before (sift__fxtc_none,
     * sift__fcut_keep), over the same steps and the slice steps a walk
     * decided; with carry_verify each is checked against a float pass
     * afresh (n_carry_bad). */
    uint64_t n_fcarried;
    /* For tests (0 otherwise): every take of carried weights is checked
     * against weights computed afresh (sift__carry_check), a mismatch
     * counted in n_carry_bad (and the take refused). */
    uint8_t carry_verify;
    uint64_t n_carry_bad;
    /* The tail route's back-off (core/step.c, run_row): whole-row steps
     * it still skips, and its failed attempts in a row (capped). Only
     * the cost of a step depends on them, never its outcome; clone
     * copies them, sift_chain_reset clears them. */
    uint32_t tail_skip, tail_fails;
    /* The same back-off for the tail route inside a full pass
     * (sift__arr_top_select): large arrays it still skips, and its failed
     * attempts in a row. Clone copies them, reset clears them. */
    uint32_t arr_skip, arr_fails;
    /* The same back-off for XTC's float test (sift__fxtc_none), which
     * fails when two tokens pass the threshold: attempts it still skips,
     * and its failures in a row. Clone copies them, reset clears them. */
    uint32_t fx_skip, fx_fails;
    /* Cross-check mode (core/crosscheck.c): the setting, the schedule
     * (successful slice steps since it was set, and its own RNG) and the
     * counters sift_chain_stats reports. */
    uint32_t xc_every;
    double xc_p;
    uint64_t xc_steps;
    sift__rng xc_rng;
    uint64_t n_xc, n_xc_mismatch, n_xc_skipped;
    /* core/batch.c: slot + 1 while sift_chains_sample scans its slots
     * for a chain given twice, 0 at every other time (the scan clears
     * what it set before it returns or samples anything). */
    size_t batch_mark;
    /* The attached workspace (sift_chain_set_workspace; the chain holds
     * one of its references), NULL = the chain's own scratch. While a
     * call that needs scratch runs, ws, row, seen and lp_set are the
     * workspace's, lent for that call (core/workspace.c); between calls
     * they are the chain's own, empty while a workspace is attached. */
    sift_workspace *workspace;
    /* core/logprobs.c: the set before the selector, kept while the
     * selector draws, then the raw top n (sized once per need). */
    sift_candidate *lp_set;
    size_t lp_cap;
};

/* The allocator of the scratch the chain uses now: the lent
 * workspace's during a call that has one, else the chain's own. */
static inline const sift__alloc *sift__scratch_alloc(const sift_chain *c)
{
    return c->ws.al ? c->ws.al : &c->al;
}

/* What a chain had in its scratch fields while a workspace is lent to
 * it, put back by sift__ws_return. */
typedef struct sift__lent {
    sift_workspace *w; /* NULL: nothing lent */
    sift__ws ws;
    float *row;
    size_t row_cap;
    uint32_t *seen;
    size_t seen_cap;
    uint32_t seen_gen;
    sift_candidate *lp_set;
    size_t lp_cap;
} sift__lent;

/* Lends workspace `w` (NULL = none: a no-op that cannot fail) to chain
 * `c` for one call: marks it in use, or refuses with SIFT_E_STATE when
 * another call uses it, changing nothing; then swaps its buffers into
 * c's scratch fields, keeping c's own in *own. Every successful lend is
 * followed by one sift__ws_return on the same thread, before the call
 * returns. */
SIFT__HIDDEN sift_status sift__ws_lend(sift_chain *c, sift_workspace *w, sift__lent *own,
                                       sift_error *err);
/* Gives the buffers back to the workspace (they may have grown), puts
 * c's own back and marks the workspace free. */
SIFT__HIDDEN void sift__ws_return(sift_chain *c, sift__lent *own);
/* Drops one reference to a workspace: the caller's handle
 * (sift_workspace_free) or a chain's attachment. The last one frees it. */
SIFT__HIDDEN void sift__workspace_unref(sift_workspace *w);

/* What a slice step was before it ran, for the cross-check around it
 * (core/crosscheck.c). */
typedef struct sift__xc_step {
    sift__rng rng;
    int32_t last_V;
    uint8_t settle_due;
    int32_t token;
    uint64_t slice_decided;
} sift__xc_step;
/* Called by sift_chain_sample_slice before and after sample_slice_impl:
 * the second runs the check when the step is due and undoes the step on
 * a mismatch (SIFT_E_SLICE_MISMATCH) or a hook failure. `status` is what
 * the step returned; the result is the call's status. */
SIFT__HIDDEN void sift__cross_check_begin(const sift_chain *chain, const int32_t *token,
                                          sift__xc_step *before);
SIFT__HIDDEN sift_status sift__cross_check_end(sift_chain *chain, const sift__xc_step *before,
                                               const sift_slice *slice, int32_t *token,
                                               sift_status status, sift_error *err);

static inline const char *sift__stage_name(const sift__stage *st)
{
    return st->ops->display_name ? st->ops->display_name(st) : st->ops->name;
}

/* Allocates a zeroed stage block of `size` bytes (size >= sizeof
 * sift__stage) with its ops set. */
SIFT__HIDDEN sift__stage *sift__stage_alloc(const sift__alloc *al, const sift__stage_ops *ops,
                                            size_t size);
/* Default clone: memcpy of st->size bytes. */
SIFT__HIDDEN sift_status sift__stage_clone_flat(const sift__stage *st, sift__stage **out,
                                                const sift__alloc *al, sift_error *err);
/* Appends a finished stage to the chain (takes ownership on success). */
SIFT__HIDDEN sift_status sift__chain_push(sift_chain *chain, sift__stage *st, sift_error *err);
SIFT__HIDDEN const sift__alloc *sift__chain_alloc(const sift_chain *chain);
/* Stage i of the chain (i < n_stages). */
SIFT__HIDDEN sift__stage *sift__chain_stage(const sift_chain *chain, size_t i);
SIFT__HIDDEN int32_t sift__chain_max_history(const sift_chain *chain);
/* SIFT_E_ARG if a stage or the checker of the chain decides over a
 * vocabulary of another size than V (ops->n_vocab). */
SIFT__HIDDEN sift_status sift__chain_check_vocab(const sift_chain *chain, int32_t V,
                                                 sift_error *err);
/* The row step's own stage loop over a whole row, for sift inspect
 * (core/inspect.c): loads row[0..V) into the chain's workspace as `a`
 * (the caller has checked the chain and reserved the workspace for V)
 * and applies stages [0, end) in order from the chain's RNG state,
 * stopping at the first stage that fails or leaves no candidate
 * (SIFT_E_NO_CANDIDATE naming it). Commits nothing. */
SIFT__HIDDEN sift_status sift__chain_run_stages(sift_chain *chain, const float *row, int32_t V,
                                                size_t end, sift__arr *a, sift_error *err);
/* Installs `self` (owned by the chain from now on; NULL ops = none) as
 * the chain's checker, destroying the one it had. Cannot fail. */
SIFT__HIDDEN void sift__chain_set_checker(sift_chain *chain, const sift__checker_ops *ops,
                                          void *self);
/* The busy rule (include/sift.h, "Callbacks and re-entrancy"; the
 * invariants of core/chain.c). Every public entry point that takes a
 * chain starts with sift__chain_enter, before it reads or writes
 * anything: SIFT_E_ARG for NULL, SIFT_E_STATE for a busy chain. An entry
 * point that may run caller code on the chain's behalf (the row hook, a
 * custom stage, a grammar's allocator) holds the chain for the whole
 * call, through SIFT__CHAIN_CALL; the chain's own allocator holds it by
 * itself (sift__alloc.hold). The counter nests: a held chain stays busy
 * until its outermost hold is released. Internal code never calls a
 * public entry point on a chain it holds: it calls the body. */
SIFT__HIDDEN sift_status sift__chain_enter(const sift_chain *chain, sift_error *err);
SIFT__HIDDEN void sift__chain_hold(sift_chain *chain);
SIFT__HIDDEN void sift__chain_release(sift_chain *chain);
/* The body of a public entry point that holds its chain: refuses a NULL
 * or busy chain, holds it, evaluates `body` (a sift_status expression),
 * releases it and returns the status. */
#define SIFT__CHAIN_CALL(chain, err, body)                          \
    do {                                                            \
        sift_status sift__cc_s = sift__chain_enter((chain), (err)); \
        if (sift__cc_s)                                             \
            return sift__cc_s;                                      \
        sift__chain_hold(chain);                                    \
        sift__cc_s = (body);                                        \
        sift__chain_release(chain);                                 \
        return sift__cc_s;                                          \
    } while (0)
/* SIFT__CHAIN_CALL for the entry points that use scratch (a sample, a
 * distribution, survivors, verify): the chain's attached workspace, if
 * any, is lent to it for the whole call, and a workspace in use by
 * another call makes the call SIFT_E_STATE before anything changes. */
#define SIFT__CHAIN_SCRATCH_CALL(chain, err, body)                                       \
    do {                                                                                 \
        sift__lent sift__cc_l;                                                           \
        sift_status sift__cc_s = sift__chain_enter((chain), (err));                      \
        if (!sift__cc_s)                                                                 \
            sift__cc_s = sift__ws_lend((chain), (chain)->workspace, &sift__cc_l, (err)); \
        if (sift__cc_s)                                                                  \
            return sift__cc_s;                                                           \
        sift__chain_hold(chain);                                                         \
        sift__cc_s = (body);                                                             \
        sift__chain_release(chain);                                                      \
        sift__ws_return((chain), &sift__cc_l);                                           \
        return sift__cc_s;                                                               \
    } while (0)
/* The bodies of sift_chain_accept (prompt = 0) and
 * sift_chain_accept_prompt (prompt = 1), sift_chain_sample_slice (the
 * cross-check included) and sift_chain_distribution_slice, for entry
 * points that hold the chain (verify.c, batch.c). */
SIFT__HIDDEN sift_status sift__accept(sift_chain *c, int32_t token, int prompt, sift_error *err);
SIFT__HIDDEN sift_status sift__sample_slice(sift_chain *c, const sift_slice *slice, int32_t *token,
                                            sift_error *err);
SIFT__HIDDEN sift_status sift__distribution_slice(sift_chain *c, const sift_slice *slice,
                                                  sift_token_prob *out, size_t capacity,
                                                  size_t *n_out, sift_error *err);
/* sift_chain_clone's body, without the busy check (sift_verifier_new,
 * which holds the chain). */
SIFT__HIDDEN sift_status sift__chain_clone(const sift_chain *chain, sift_chain **out,
                                           sift_error *err);
/* The k of sift_chains_next_k for one chain, without the busy check (a
 * verifier's shadow, which its verifier holds). */
SIFT__HIDDEN int32_t sift__chain_next_k(const sift_chain *chain);

/* ------------------------------------------------------------------ */
/* Selection and order helpers (core/select.c)                        */
/* ------------------------------------------------------------------ */

/* Sorts c[0..n) into canonical order (insertion sort for small n, merge
 * sort for a few hundred, LSD radix sort on the canonical key for
 * large n); tmp has room for n. */
SIFT__HIDDEN void sift__sort_canon(sift_candidate *c, size_t n, sift_candidate *tmp);
/* Canonical order again after a stage changed a few candidates of a
 * canonical array: c[0..u) are the unchanged ones (still canonical),
 * side[0..t) the changed ones in any order; leaves the whole set in
 * canonical order in c[0..u + t). c has room for u + t; side must not
 * overlap it and is clobbered. O(u + t) plus the sort of the t changed
 * ones. */
SIFT__HIDDEN void sift__canon_merge(sift_candidate *c, size_t u, sift_candidate *side, size_t t);
/* Canonical order for a set that may come in any order (a device top-k):
 * O(n) when it is canonical already or sorted by logit with small tie
 * runs, else sift__sort_canon. tmp holds n candidates. */
SIFT__HIDDEN void sift__order_top_set(sift_candidate *c, size_t n, sift_candidate *tmp);
/* Sorts c[0..n) by ascending id; tmp has room for n. */
SIFT__HIDDEN void sift__sort_id(sift_candidate *c, size_t n, sift_candidate *tmp);
/* Puts `a` in canonical / id storage order. */
SIFT__HIDDEN void sift__arr_canon(sift__ctx *ctx, sift__arr *a);
SIFT__HIDDEN void sift__arr_idorder(sift__ctx *ctx, sift__arr *a);

/* The canonical key of the k-th (1-based) canonical element of c[0..n),
 * 1 <= k <= n, so that exactly k elements have ckey >= *cut. Does not
 * reorder c; uses ctx->ws->u64b. */
SIFT__HIDDEN uint64_t sift__cut_top(sift__ctx *ctx, const sift_candidate *c, size_t n, size_t k);
/* Keeps the elements with ckey >= cut, preserving storage order. */
SIFT__HIDDEN void sift__arr_keep_ge(sift__arr *a, uint64_t cut);
/* sift__arr_keep_ge that also moves the weights w (w[i] of a->c[i]) with
 * their candidates, and returns the exact sum of the kept ones: the same
 * array as sift__arr_keep_ge, bit for bit. */
SIFT__HIDDEN sift__u128 sift__arr_keep_ge_w(sift__arr *a, uint64_t cut, uint64_t *w);
/* sift__arr_keep_ge_w by the kernels of `level` (or the best level
 * below it this build and machine have); tests compare the levels. */
SIFT__HIDDEN sift__u128 sift__arr_keep_ge_w_at(int level, sift__arr *a, uint64_t cut, uint64_t *w);
/* sift__arr_keep_ge that also moves the float weights vf (vf[i] of
 * a->c[i]) with their candidates, and returns the sum of the kept ones in
 * double (in id order: lane sums, then a tree, then the rest one by one;
 * a canonical array's prefix: one by one; either way no term passes
 * through more than n inexact additions, n the array's length before).
 * For top_p's float carry (core/fdraw.c); the same array as
 * sift__arr_keep_ge, bit for bit. */
SIFT__HIDDEN double sift__arr_keep_ge_f(sift__arr *a, uint64_t cut, float *vf);
/* sift__arr_keep_ge_f by the kernels of `level` (or the best level below
 * it this build and machine have); tests compare the levels. */
SIFT__HIDDEN double sift__arr_keep_ge_f_at(int level, sift__arr *a, uint64_t cut, float *vf);
/* Writes the elements of c[0..n) with ckey >= cut (no NaN logit) to out,
 * in order, and returns how many: out may be c (in place) or a buffer of
 * n elements, every one of which may be written. */
SIFT__HIDDEN size_t sift__keep_ge_into(const sift_candidate *c, size_t n, uint64_t cut,
                                       sift_candidate *out);
/* sift__keep_ge_into by the kernels of `level` (tests compare the
 * levels). */
SIFT__HIDDEN size_t sift__keep_ge_into_at(int level, const sift_candidate *c, size_t n,
                                          uint64_t cut, sift_candidate *out);
/* Keeps the canonical first k elements (k >= 1), preserving storage
 * order; k >= n is a no-op. */
SIFT__HIDDEN void sift__arr_keep_top(sift__ctx *ctx, sift__arr *a, size_t k);

/* Largest logit of c[0..n) (n >= 1); -inf if all are -inf. */
SIFT__HIDDEN float sift__max_logit(const sift_candidate *c, size_t n);
/* sift__max_logit of a's candidates, bitwise; O(1) when a is stored in
 * canonical order. */
SIFT__HIDDEN float sift__arr_max_logit(const sift__arr *a);

/* w[i] = sift__weight(sift__expf(c[i].logit - m)) with m the largest
 * logit (which must be finite); returns W = sum w exactly. The kernel and
 * its fast expf are in core/weights.c. */
SIFT__HIDDEN sift__u128 sift__weights(const sift_candidate *c, size_t n, float m, uint64_t *w);

/* sift__weights by a named path: 0 the scalar functions, 1 portable
 * vectors, 2 AVX2, 3 AVX-512F (chosen at run time on x86-64; the library
 * uses the best one SIFT_SIMD allows). Every path gives the
 * same bits; check_num runs each one the machine has against path 0. */
SIFT__HIDDEN int sift__weights_path_available(int path);
SIFT__HIDDEN sift__u128 sift__weights_path(int path, const sift_candidate *c, size_t n, float m,
                                           uint64_t *w);
/* The fast expf of the weights kernel (core/weights.c) on its own:
 * e[i] = sift__expf(x[i]) bit for bit, computed by path 0 (scalar), 1
 * (portable vectors), 2 (AVX2) or 3 (AVX-512F) as sift__weights_path
 * numbers them.
 * Values outside [-104, 0] go to sift__expf directly. Returns how many
 * values in [-104, 0] were doubtful and came from sift__expf. */
SIFT__HIDDEN size_t sift__expf_path(int path, const float *x, float *e, size_t n);
/* The softmax entropy sum of temp_ext and typical, over c[0..n) in
 * ascending id order with their weights w (sift__weights at m): the terms
 * w_i ? ((double)w_i * inv) * (LS - (double)(l_i - m)) : 0, summed as
 * sift__dsum_idorder sums an array of them, bit for bit, without storing
 * the array. _path as sift__weights_path numbers the paths (0 = the
 * scalar definition). */
SIFT__HIDDEN double sift__entropy_sum(const sift_candidate *c, const uint64_t *w, size_t n, float m,
                                      double LS, double inv);
SIFT__HIDDEN double sift__entropy_path(int path, const sift_candidate *c, const uint64_t *w,
                                       size_t n, float m, double LS, double inv);

/* The indices i of w[0..n) (weights of at most 2^62) with w[i] >= theta,
 * ascending, to heavy[0..), while at most cap are found; returns their
 * count, or cap + 1 when there are more (core/mass.c, its vector forms
 * at the level sift__simd() allows). */
SIFT__HIDDEN size_t sift__heavy_scan(const uint64_t *w, size_t n, uint64_t theta, uint64_t *heavy,
                                     size_t cap);
/* (core/mass.c) The shortest canonical prefix of c[0..n) whose mass
 * (sum of w over the prefix) is >= T (strict = 0) or > T (strict = 1). Returns its length
 * (n if no prefix qualifies) and its last element's canonical key through
 * *cut. Does not reorder c; uses scratch from ctx. */
SIFT__HIDDEN size_t sift__mass_prefix(sift__ctx *ctx, const sift_candidate *c, const uint64_t *w,
                                      size_t n, sift__u128 T, int strict, uint64_t *cut);
/* sift__mass_prefix on a's candidates with weights w (w[i] of a->c[i]);
 * a walk that stops at the prefix when a is stored in canonical order. */
SIFT__HIDDEN size_t sift__arr_mass_prefix(sift__ctx *ctx, const sift__arr *a, const uint64_t *w,
                                          sift__u128 T, int strict, uint64_t *cut);

/* ------------------------------------------------------------------ */
/* Prefix path (core/prefix.c, core/certify.c)                        */
/* ------------------------------------------------------------------ */

/* The first bad value of a row as an error (NaN, +inf), or
 * SIFT_E_NO_CANDIDATE if every value is -inf; SIFT_OK if the row is valid. */
SIFT__HIDDEN sift_status sift__row_error(const float *row, int32_t V, sift_error *err);
/* Validates row[0..V) and writes its canonical first k tokens (k < V) to
 * out[0..k) in canonical order, without sorting the row. Uses ws->u32,
 * ws->cand, ws->cand2 and the selection scratch; out may be ws->cand. */
SIFT__HIDDEN sift_status sift__row_prefix(sift__ctx *ctx, const float *row, int32_t V, size_t k,
                                          sift_candidate *out);
/* The analyzer's walk (core/plan.c): the plan from the configuration
 * (dynamic = 0) or from the current state (dynamic = 1); `stages` (may
 * be NULL) receives one entry per stage. */
SIFT__HIDDEN void sift__plan_walk(const sift_chain *chain, int dynamic, sift_plan *plan,
                                  sift_plan_stage *stages);
/* The stage the static plan blames for needing the whole row: the
 * stage at which its walk gives up (the plan is then WHOLE_ROW, and its
 * `why` names that stage), or -1 when the walk never gives up (a plan
 * that is not WHOLE_ROW, or a chain with no stage that truncates or
 * reads the whole distribution). */
SIFT__HIDDEN int32_t sift__plan_whole_at(const sift_chain *chain);
/* Recomputes the chain's cached static plan (after a stage is added). */
SIFT__HIDDEN void sift__plan_cache(sift_chain *chain);
/* The static plan's k: the prefix a slice needs (0 = whole row). */
SIFT__HIDDEN size_t sift__plan_prefix_k(const sift_chain *chain);
/* The prefix length the whole-row step walks with the free bound (0 =
 * none): the plan's k, or 0 when the plan's certificate rests on the
 * tail mass (top_p, dist), which the free bound alone rarely decides: the
 * step takes the tail route for those (sift__plan_row_tail_k). */
SIFT__HIDDEN size_t sift__plan_row_k(const sift_chain *chain);
/* The prefix length of the row step's tail route (core/step.c): for a
 * plan whose certificate rests on the tail mass (where sift__plan_row_k
 * is 0), the plan's k with SIFT__ROW_TAIL_K in place of
 * SIFT__PLAN_MASS_K; 0 for every other plan. */
SIFT__HIDDEN size_t sift__plan_row_tail_k(const sift_chain *chain);
/* As sift__plan_row_k from the dynamic plan (the chain's current state:
 * the distinct tokens of a penalty window, DRY's settled set), never
 * above it; a walk over the stages per call. */
SIFT__HIDDEN size_t sift__plan_row_k_dynamic(const sift_chain *chain);
/* The extras of this step: ids the stages before the first truncation may
 * raise, sorted and unique, written up to cap; returns how many. */
SIFT__HIDDEN size_t sift__chain_extras(const sift_chain *chain, int32_t *ids, size_t cap);
/* Makes sift__chain_extras unable to fail silently: computes what the
 * stages before the first truncation need for their extras this step
 * (a grammar's allowed set), SIFT_E_NOMEM or SIFT_E_GRAMMAR_LIMIT if that
 * fails. Changes no matching state (caches only). */
SIFT__HIDDEN sift_status sift__chain_prepare_extras(const sift_chain *chain, sift_error *err);
/* The most extras the chain can ask for in any state. */
SIFT__HIDDEN int64_t sift__chain_max_extras(const sift_chain *chain);
/* What sift__walk found. */
enum {
    SIFT__WALK_ROW = 0,     /* the whole row is needed; `a` and *b are stale */
    SIFT__WALK_DECIDED = 1, /* the outcome is certainly the whole row's */
    SIFT__WALK_RAN = 2      /* every stage ran on the present tokens, the set
                               is incomplete; `a` and *b are valid */
};
/* Runs stages [0, end) over the present tokens in `a` (canonical order:
 * a canonical prefix of the row, then tokens that rank after it), with
 * *b bounding every absent token. Returns SIFT__WALK_DECIDED when the
 * outcome is certainly the whole row's (then *status is the step's
 * status; the set in `a` is the complete surviving set, or ctx->selected
 * is the token when the selector ran). ctx->err is the same on return as
 * on entry. */
SIFT__HIDDEN int sift__walk(sift_chain *chain, sift__ctx *ctx, sift__arr *a, size_t end,
                            sift__bound *b, sift_status *status);
/* The initial bound of a slice whose prefix ends with `last` (no tail
 * mass). */
static inline sift__bound sift__bound_of(const sift_candidate *last)
{
    sift__bound b;
    memset(&b, 0, sizeof b);
    b.by_key = 1;
    b.key = sift__ckey(last->logit, last->id);
    b.logit = last->logit;
    return b;
}

/* Tail mass (core/tail.c; docs/analyzer.md, "Tail mass"). */
/* Starts the tail bound of a slice whose largest present logit is m:
 * the caller's bound S >= sum over absent tokens of exp(l_i - m). */
SIFT__HIDDEN void sift__tail_start(sift__bound *b, float m, double S);
/* Carries the tail bound through a stage that divided every logit by t
 * (b->logit is already the new bound, `before` the old one; m_after the
 * present maximum after the stage); drops it when it cannot. */
SIFT__HIDDEN void sift__tail_divide(sift__bound *b, float before, float t, float m_after);
/* An upper bound on the exact integer mass of the absent tokens,
 * sum of trunc(expf(z_i - m) * 2^62), for the current largest logit m
 * (present, finite, >= b->logit): the smaller of the free bound
 * n_absent * w(b->logit) and the tail bound. */
SIFT__HIDDEN sift__u128 sift__tail_absent_mass(const sift__bound *b, float m);
/* A lower bound of sum over x[i] <= lk of exp(x[i] - m) (real
 * arithmetic) from S, what sift__simd_ops.tail_mass returned for the n
 * tokens of that row at that m and lk; 0 when S is not finite. */
SIFT__HIDDEN double sift__tail_mass_lower(double S, size_t n);
/* Gives the tail bound started by sift__tail_start(b, m, S) its lower
 * end: `lower` bounds from below the mass sum exp(l - m) of every token
 * at or below lk (sift__tail_mass_lower), n_present of which are present
 * (in the prefix or extras, all <= lk). Sets b->tail_lo. */
SIFT__HIDDEN void sift__tail_set_lower(sift__bound *b, double lower, uint64_t n_present, float lk);
/* A lower bound on the exact integer mass of the absent tokens, as
 * sift__tail_absent_mass bounds it from above: 0 without b->tail_lo. */
SIFT__HIDDEN sift__u128 sift__tail_absent_mass_lo(const sift__bound *b, float m);
/* The row's mass W in [*W_lo, *W_hi] for a certificate at present
 * maximum m: the present mass plus the absent mass's lower end (*A_lo,
 * which the apply after a decision adds: ctx->absent_lo) and plus its
 * upper end. 0 when the ends disagree (no decision then). */
SIFT__HIDDEN int sift__tail_mass_range(const sift__bound *b, float m, sift__u128 present,
                                       sift__u128 *A_lo, sift__u128 *W_lo, sift__u128 *W_hi);
/* The tail route's bounds from one pass (core/topk.c): S_t is
 * sift__tail_finish over the n tokens of a row read with the tail
 * kernel at reference t and cut-off t (the tokens at or below t), S_c
 * sift__simd_ops.tail_mass over the n_c tokens above t (the candidates)
 * at m, the row's largest logit, and cut-off lk > t. Sets *S and *lower
 * to an upper and a lower bound of the sum over the row's tokens at or
 * below lk of exp(l - m); 0 when it cannot (then the route reads the row
 * again). */
SIFT__HIDDEN int sift__tail_join(double S_t, size_t n, float t, double S_c, size_t n_c, float m,
                                 double *S, double *lower);
/* a * b exactly, for 64-bit a and b. */
SIFT__HIDDEN sift__u128 sift__u128_mul64(uint64_t a, uint64_t b);

/* ------------------------------------------------------------------ */
/* Class semantics (core/class.c): the one table both readers use     */
/* ------------------------------------------------------------------ */

/* Every sift_class once, with its extras rule: X(CLASS, name, extras).
 * core/class.c builds its table from this list and must define
 * plan_<name> and cert_<name> for each entry (or it does not compile). A
 * new class goes last in the enum of include/sift.h, here, and into
 * SIFT__N_CLASSES. */
#define SIFT__CLASSES(X)               \
    X(WHOLE, whole, extras_none)       \
    X(IDENTITY, identity, extras_none) \
    X(LOWERS, lowers, extras_lowers)   \
    X(RAISES, raises, extras_raises)   \
    X(MONOTONE, monotone, extras_none) \
    X(TOP, top, extras_none)           \
    X(THRESHOLD, threshold, extras_none)
#define SIFT__N_CLASSES ((unsigned)SIFT_CLASS_THRESHOLD + 1u)

/* The analyzer's constants (docs/analyzer.md): the margin after a
 * monotone stage (rounding can merge logits that differ by an ulp, so
 * the k-th kept token must beat the bound strictly; a few spare tokens
 * make a failed check rare), the recommended prefix of a threshold
 * stage with no static bound (min_p), the slack for an unbounded
 * lowering stage (a grammar in constrain mode), and the largest prefix
 * (a sum above it is reported as the whole row). */
#define SIFT__PLAN_MONOTONE_MARGIN 8
#define SIFT__PLAN_THRESHOLD_K 64
/* The recommended prefix of a whole-distribution stage certified by the
 * tail mass (top_p, dist: docs/analyzer.md, "Tail mass"). */
#define SIFT__PLAN_MASS_K 256
/* Its part of the row step's tail route (sift__plan_row_tail_k), where
 * the route computes the tail mass itself (docs/samplers.md,
 * "Performance", has the measurements that chose it). */
#ifndef SIFT__ROW_TAIL_K
#define SIFT__ROW_TAIL_K 256
#endif

/* The tail route inside a full pass, for a WHOLE selector `st` with a
 * certificate on the absent mass (certify_mass) about to run on `a`, an
 * array of at least SIFT__ARR_TOP_MIN candidates in id order: takes its
 * canonical first SIFT__ROW_TAIL_K tokens by the top-k pass (with the
 * fused tail sum) and certifies `st` on them with the bound on the rest,
 * as the row step's tail route does on a row (docs/analyzer.md, "Tail
 * mass"). Returns 1 when the certificate holds; the stage has then run on
 * those tokens and selected the token (and advanced the RNG) that its
 * apply on `a` would have. Returns 0 otherwise, with `a`, the RNG and
 * ctx->err untouched; ws->u64a, ws->cand2 and the top-k pass's scratch
 * are overwritten, and ctx's tail_want, tail_ok, tail_S, tail_lower and
 * absent_lo are left at 0 after an attempt. Returns 0 at once unless
 * ctx->arr_whole says that `a` is the whole set the stage draws from
 * (the full pass over a loaded row), when ctx->arr_top_off is set, or
 * when the chain's back-off skips this array (as the row route's: after
 * the f-th failure in a row, the next min(2^(f-1), 64) - 1 arrays). */
#define SIFT__ARR_TOP_MIN 16384
SIFT__HIDDEN int sift__arr_top_select(sift__stage *st, sift__ctx *ctx, const sift__arr *a);

/* The float-certified draw (core/fdraw.c; docs/analyzer.md,
 * "Float-certified draw"). F(x), sift__fexp: a float exponential with
 * relative error at most 1.125 * 2^-24 on [-44, 0] (clamped below -44).
 * Kernel levels, in order: SIFT__FDRAW_SCALAR (the definition, fmaf),
 * SIFT__FDRAW_AVX2 and SIFT__FDRAW_AVX512 (both with FMA), which give
 * the same bits. */
enum { SIFT__FDRAW_SCALAR = 0, SIFT__FDRAW_AVX2 = 1, SIFT__FDRAW_AVX512 = 2 };
/* Arrays below this many candidates take dist's exact pass directly. */
#define SIFT__FDRAW_MIN 16384
SIFT__HIDDEN float sift__fexp(float x);
/* The widest kernel level this machine and sift__simd() allow. */
SIFT__HIDDEN int sift__fdraw_level(void);
/* vf[i] = sift__fexp(c[i].logit - m), i < n, at `level`; returns their
 * sum in double (lanes, then a tree: at most n additions per term), NaN
 * when a difference is NaN; *xlow = the smallest max(c[i].logit - m, -44). */
SIFT__HIDDEN double sift__fexp_pass(int level, const sift_candidate *c, size_t n, float m,
                                    float *vf, float *xlow);
/* The kappa of Lemma 2 for F: (eps + rho) / (1 - eps), rounded up. */
SIFT__HIDDEN double sift__fdraw_kappa(void);
/* dist's draw on a (n >= 2, largest logit m, finite) with the RNG output
 * u, decided from float weights at `level` with the bound kappa: 1 with
 * *id = the token dist's exact pass selects with u (when kappa bounds F,
 * as sift__fdraw_kappa does), 0 when the tests (a) and (b) do not hold
 * or a logit is NaN. Uses ws->u64a..u64d, f64 and u32 as scratch; reads
 * nothing else of ctx. Tests pass a smaller kappa to see it fail. */
SIFT__HIDDEN int sift__fdraw_at(sift__ctx *ctx, const sift__arr *a, float m, uint64_t u, int level,
                                double kappa, int32_t *id);
/* dist's entry: sift__fdraw_at with the next RNG output (peeked, not
 * taken) on an array of at least SIFT__FDRAW_MIN candidates at the
 * AVX2 or AVX-512 level, unless ctx->fdraw_off or an absent mass is pending
 * (ctx->absent_lo); counts its attempts and decisions in ctx. On 1 the
 * caller selects *id and takes the one RNG output; on 0 it runs the
 * exact pass, from the same state. */
SIFT__HIDDEN int sift__fdraw(sift__ctx *ctx, const sift__arr *a, float m, int32_t *id);
/* The same two on a whole row (token i has id i and logit row[i]):
 * sift__fdraw_row_at with the row's largest logit m given, and
 * sift__fdraw_row, which finds m (declining a row whose largest value is
 * not finite: the loaded path reports it). */
SIFT__HIDDEN int sift__fdraw_row_at(sift__ctx *ctx, const float *row, int32_t V, float m,
                                    uint64_t u, int level, double kappa, int32_t *id);
SIFT__HIDDEN int sift__fdraw_row(sift__ctx *ctx, const float *row, int32_t V, int32_t *id);
/* top_p's cut decided the same way (docs/analyzer.md, (a') and (b')):
 * for 0 < p < 1, 1 with *key the canonical key of the last token of the
 * shortest canonical prefix whose exact mass reaches ceil(p W) and *len
 * its length, as sift__arr_mass_prefix gives them (when kappa bounds
 * F); 0 otherwise, with only scratch changed. sift__fcut is the stage's
 * entry, with the preconditions and counts of sift__fdraw; a decided cut
 * fills *fp for sift__fcut_keep (ws->u64a then holds the float weights of
 * all of a's candidates). */
SIFT__HIDDEN int sift__fcut_at(sift__ctx *ctx, const sift__arr *a, float m, float p, int level,
                               double kappa, uint64_t *key, size_t *len);
/* The float pass behind a decided sift__fcut: its double sum over the
 * whole array and its lowest clamped difference. */
typedef struct sift__fpass {
    double S;
    float xlow;
} sift__fpass;
SIFT__HIDDEN int sift__fcut(sift__ctx *ctx, const sift__arr *a, float m, float p, uint64_t *key,
                            size_t *len, sift__fpass *fp);
/* top_p's keep after a decided sift__fcut: keeps the candidates with
 * ckey >= cut (n_kept of them, sift__arr_keep_ge). When the dist right
 * after can take them (sift__carry_wanted, n_kept >= SIFT__FDRAW_MIN),
 * the float weights move with their candidates (sift__arr_keep_ge_f)
 * and stay for its float draw, with a record as XTC's (ctx->fstage; the
 * sample is taken again). */
SIFT__HIDDEN void sift__fcut_keep(sift__ctx *ctx, sift__arr *a, float m, uint64_t cut,
                                  size_t n_kept, const sift__fpass *fp);
/* XTC's removal set A = {i : w_i >= max(ceil(t W), 1)}: 1 when the
 * float weights prove |A| <= 1 (XTC then removes nothing), leaving them
 * for the next stage's float draw or cut (ctx->fstage); 0 otherwise, with
 * only scratch changed. sift__fxtc_none_at is the test's form (level,
 * kappa); sift__fxtc_none the stage's, with the preconditions and counts
 * of sift__fdraw, and only while the stages run armed (a full pass, a
 * walk over the whole set), where the record is taken before anything
 * writes the scratch; the take (core/fdraw.c) checks that too. */
SIFT__HIDDEN int sift__fxtc_none_at(sift__ctx *ctx, const sift__arr *a, float m, float t, int level,
                                    double kappa);
SIFT__HIDDEN int sift__fxtc_none(sift__ctx *ctx, const sift__arr *a, float m, float t);

#define SIFT__PLAN_UNBOUNDED_SLACK 64
#define SIFT__PLAN_K_MAX ((int64_t)1 << 30)

/* What the static plan's walk (core/plan.c) carries from stage to stage,
 * and what a plan rule reads and writes for stage `i`. */
typedef struct sift__plan_acc {
    /* The stage, its display name, its class's n, static or dynamic. */
    const sift__stage *st;
    const char *name;
    int64_t n;
    int dynamic;
    size_t i;
    /* Carried: tokens the stages so far may lower (saturating), extras
     * they may ask for, whether a monotone or an unbounded lowering stage
     * came before. */
    int64_t lowered, extras;
    int monotone, unbounded;
    /* The last monotone stage's name (for the trace), NULL = none;
     * whether a stage decided per step by its mass certificate came
     * before (XTC): the plan is then at most CERTIFIED. */
    const char *mono_name;
    int certified;
    /* Out: 1 = this stage decides the plan, 2 = the whole row; the
     * stage's own k in the trace; its message (why, may be NULL), the
     * plan's terms and message (NULL when messages are off). */
    int done;
    int64_t k_here;
    char *why, *terms, *pwhy;
    sift_plan *plan;
} sift__plan_acc;

/* What a certificate rule found (core/certify.c's walk reads it). */
enum {
    SIFT__CERT_ROW = 0,      /* the absent tokens could matter: the whole row */
    SIFT__CERT_KEEP = 1,     /* applied; the set is still incomplete, *b holds */
    SIFT__CERT_COMPLETE = 2, /* applied; the set is the whole row's survivors */
    SIFT__CERT_SELECTED = 3  /* a selector ran on a certified set: decided */
};

typedef struct sift__class_rule {
    const char *name; /* as sift_class_str */
    /* The static rule: what a stage of this class does to the plan. */
    void (*plan)(sift__plan_acc *acc);
    /* The run-time rule: applies stage `st` (class bound n) to the
     * present tokens `a` (canonical storage when a rule needs it) under
     * the bound *b on every absent token, and says what that proves. */
    int (*certify)(sift__stage *st, int64_t n, sift__ctx *ctx, sift__arr *a, sift__bound *b);
    /* The ids a stage of this class asks for as extras this step, written
     * up to room at `at` (may be NULL); returns how many. */
    size_t (*extras)(sift__stage *st, int32_t *at, size_t room);
} sift__class_rule;

/* The rules of `cls`; a value outside the enum reads as WHOLE. */
SIFT__HIDDEN const sift__class_rule *sift__class_rule_of(sift_class cls);
/* snprintf into / append to a SIFT_PLAN_WHY_MAX message buffer; NULL is
 * ignored. */
SIFT__HIDDEN void sift__why_put(char *buf, const char *fmt, ...) SIFT__PRINTF(2, 3);
SIFT__HIDDEN void sift__why_append(char *buf, const char *fmt, ...) SIFT__PRINTF(2, 3);

/* ------------------------------------------------------------------ */
/* Stage constructors shared with tests                                */
/* ------------------------------------------------------------------ */

/* DRY with breakers given as token sequences (head = first token, the
 * rest its tail), as llama.cpp's test constructor takes them. */
SIFT__HIDDEN sift_status sift__chain_add_dry_tokens(sift_chain *chain, float multiplier, float base,
                                                    int32_t allowed_length, int32_t last_n,
                                                    const int32_t *const *seqs, const size_t *lens,
                                                    size_t n, sift_error *err);

/* The chain's RNG state, for tests that compare it bitwise. */
SIFT__HIDDEN void sift__chain_rng_state(const sift_chain *chain, uint64_t out[4]);
/* A digest of every stage's mutable state (history, mu...), for tests
 * that compare two chains after accept. */
SIFT__HIDDEN uint64_t sift__chain_state_digest(const sift_chain *chain);
/* FNV-1a helper for digests. */
static inline uint64_t sift__fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    if (h == 0)
        h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

#endif /* SIFT_INTERNAL_H */

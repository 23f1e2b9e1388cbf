/*
 * gbnf_parse.h - shared between the GBNF parser (gbnf_parse.c) and the
 * checks it runs on the compiled rules (gbnf_check.c).
 *
 * The parser state, the rule table it builds, and the error reporting
 * both files use (the first error wins; positions in line:col code
 * points). gbnf_check.c calls only sift__gp_perr, sift__gp_nomem and
 * sift__gp_fmt_lc here; gbnf_parse.c calls the two checks. Its types
 * are named gp_*, its functions sift__gp_*. Nothing here is API.
 */
#ifndef SIFT_GRAMMAR_GBNF_PARSE_H
#define SIFT_GRAMMAR_GBNF_PARSE_H

#include "gbnf.h"

/* A growable array through the object's allocator (sift__reserve). */
typedef struct gp_vec {
    void *p;
    size_t n, cap;
} gp_vec;

enum { RK_NAMED = 0, RK_GROUP = 1, RK_REPEAT = 2 };

typedef struct gp_rule {
    uint32_t off, len; /* elements in the arena, once defined */
    uint8_t defined, kind;
    size_t name_off, name_len; /* named: the name in the text */
    size_t pos;                /* named: definition; helpers: where created */
    size_t use;                /* first use, SIZE_MAX if none */
} gp_rule;

typedef struct gp_frame {
    gp_vec buf;        /* sift__gelem: this rule's alternatives so far */
    uint32_t rule;     /* rule id this gp_frame defines */
    size_t open;       /* byte offset of "(" (groups) or of the name */
    size_t last;       /* start of the last item in buf, SIZE_MAX = none */
    uint64_t prev;     /* running repetition product of the last item */
    uint32_t sym_open; /* symbols when the group opened (before its own) */
} gp_frame;

typedef struct gp_state {
    const sift__alloc *al;
    const unsigned char *s;
    size_t n, i;
    const char *src;
    sift_error *err;
    sift_status st;
    const sift_vocab *vocab;
    gp_vec arena; /* sift__gelem: finished rules */
    gp_vec rules; /* gp_rule */
    gp_vec cls;   /* sift__gclass */
    gp_vec rng;   /* uint32_t pairs */
    gp_vec tmp;   /* sift__gelem scratch (repetition copies) */
    gp_vec crng;  /* uint32_t pairs: ranges of the class being parsed */
    uint32_t *ht;
    size_t ht_cap; /* power of two */
    gp_frame *fr;
    size_t n_fr, cap_fr;
    size_t n_elems; /* elements in arena and frames, for the budget */
    size_t bom;     /* 3 if the text starts with a BOM, else 0 */
    void (*map)(void *, size_t, int32_t *, int32_t *); /* positions in a larger file */
    void *map_user;
    int *needs_vocab; /* set when a token reference finds no vocabulary */
} gp_state;

/* Rule `id` of the table. */
static inline gp_rule *sift__gp_rule(gp_state *p, uint32_t id)
{
    return (gp_rule *)p->rules.p + id;
}

/* Reports an error at byte offset `off` (SIZE_MAX = no position). Only
 * the first error is kept. Returns the status. */
SIFT__HIDDEN sift_status sift__gp_perr(gp_state *p, size_t off, sift_status code, const char *fmt,
                                       ...) SIFT__PRINTF(4, 5);
/* sift__gp_perr(SIFT_E_NOMEM) with the parser's out-of-memory message. */
SIFT__HIDDEN sift_status sift__gp_nomem(gp_state *p);
/* "LINE:COL" of byte offset `off` into buf. */
SIFT__HIDDEN void sift__gp_fmt_lc(const gp_state *p, size_t off, char *buf, size_t cap);

/* gbnf_check.c. The invariants every later pass relies on (a violation
 * is a parser bug: SIFT_E_STATE); 1 if they hold. */
SIFT__HIDDEN int sift__gp_check_compiled(gp_state *p);
/* Left recursion, through nullable prefixes too: an error that names the
 * rule path (SIFT_E_GRAMMAR_LEFT_RECURSION); 1 if there is none. */
SIFT__HIDDEN int sift__gp_check_left_recursion(gp_state *p);

#endif

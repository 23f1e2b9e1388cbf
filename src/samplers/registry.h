/*
 * registry.h - the sampler descriptors and their registry.
 *
 * Every sampler file exports one descriptor: its name, a typed parameter
 * table (type, range, default, llama.cpp's flat key, one doc line), a
 * constructor that adds the stage from a parsed parameter record, and the
 * few facts the configuration's warnings need. The configuration
 * (src/config/) walks these tables and the constructors check their
 * arguments against them (sift__param_check), so a parameter's range is
 * written once, here; a new sampler touches its own file, one line of
 * registry.c, its public sift_chain_add_* declaration, its source line in
 * Makefile.am, its line in tests/check_reentry.c's TABLE and its docs
 * rows (docs/samplers.md, "Adding a sampler").
 *
 * A parameter record is the sampler's own struct (for example
 * sift__top_k_rec); a table entry names its field by offsetof. Records are
 * plain data: list parameters point to memory the configuration owns.
 * Nothing here is API.
 */
#ifndef SIFT_SAMPLERS_REGISTRY_H
#define SIFT_SAMPLERS_REGISTRY_H

#include <stddef.h>

#include "../sift_internal.h"

/* How a parameter is written and where it goes in the record. */
typedef enum sift__ptype {
    SIFT__PT_INT,    /* int32_t */
    SIFT__PT_WINDOW, /* int32_t window of accepted tokens; -1 = n_ctx */
    SIFT__PT_FLOAT,  /* float, finite unless the range is SIFT__R_IN */
    SIFT__PT_BOOL,   /* int, 0 or 1 */
    SIFT__PT_ENUM,   /* int, the index of the string in .choices */
    /* char ** at .off, size_t * (byte lengths) at .off_len, size_t at
     * .off_count: a sequence of non-empty strings */
    SIFT__PT_STRING_LIST,
    /* sift_bias * at .off, size_t at .off_count: token id -> bias */
    SIFT__PT_ID_FLOAT_MAP
} sift__ptype;

/* The range check of a number (the message names it). */
typedef enum sift__prange {
    SIFT__R_ANY, /* int: any int32; float: any finite value */
    SIFT__R_IN,  /* [lo, hi] */
    SIFT__R_GE,  /* >= lo (ints: and <= INT32_MAX) */
    SIFT__R_GT,  /* > lo */
    SIFT__R_LE   /* <= hi (floats only) */
} sift__prange;

/* How llama.cpp reads a flat key, where it differs from the YAML
 * parameter (common_sampler_init and the samplers' constructors take
 * values the YAML form refuses, and fold them as written here). */
typedef enum sift__flat_rule {
    SIFT__FLAT_SAME,       /* the parameter's own type and range */
    SIFT__FLAT_NEG_GREEDY, /* a negative value acts as 0; warned ("temp") */
    SIFT__FLAT_NEG_OFF,    /* a negative value is -1, "off" (adaptive_target) */
    SIFT__FLAT_CLAMP,      /* clamped to the range [lo, hi]; warned */
    /* read by the flat form's own step, as llama.cpp resolves it from
     * other keys (DRY's window: -1 counts only when DRY is on) */
    SIFT__FLAT_OWN
} sift__flat_rule;

typedef struct sift__param {
    const char *name; /* the YAML key */
    const char *doc;  /* one line for docs/config.md */
    sift__ptype type;
    sift__prange range;
    double lo, hi;
    const char *range_note; /* said after the bound: "0 = greedy" */
    int required;
    double def;                       /* numbers and booleans */
    const char *const *def_strings;   /* SIFT__PT_STRING_LIST default */
    size_t n_def_strings;             /* (NULL = empty) */
    const char *const *choices;       /* SIFT__PT_ENUM, NULL-terminated */
    const char *item_noun;            /* SIFT__PT_STRING_LIST: "breaker" */
    size_t max_items, max_item_bytes; /* SIFT__PT_STRING_LIST limits */
    size_t off, off_len, off_count;   /* offsetof in the record */
    /* llama.cpp's key for this parameter (common_params_sampling, a
     * llama-server request), or NULL; more than one descriptor may share
     * one (min_keep). */
    const char *flat_key;
    double flat_def; /* llama.cpp's default */
    /* The flat key's reading when it is not the parameter's own: what
     * llama.cpp does with values outside the range, and the range it
     * accepts (flat_range, flat_lo, flat_hi: read only when flat_rule is
     * SIFT__FLAT_NEG_GREEDY, SIFT__FLAT_NEG_OFF or SIFT__FLAT_CLAMP). */
    sift__flat_rule flat_rule;
    sift__prange flat_range;
    double flat_lo, flat_hi;
    /* A second name llama.cpp takes for the flat key (llama-server's
     * "temperature" for common's "temp"), or NULL. */
    const char *flat_alias;
} sift__param;

/* What a constructor needs besides the record. */
typedef struct sift__build_env sift__build_env;
struct sift__build_env {
    const sift_vocab *vocab; /* NULL if none */
    int32_t n_vocab;         /* 0 if unknown */
    /* A trial build (the configuration's load-time judgement): there is
     * no vocabulary, and what needs one is left out. */
    int trial;
    /* Fails with a message placed at the stage ("config:line:col: ...",
     * err's source, line and column set); returns code. */
    sift_status (*fail)(const sift__build_env *env, sift_error *err, sift_status code,
                        const char *fmt, ...) SIFT__PRINTF(4, 5);
    void *user; /* for fail */
};

/* The largest record, in bytes (the registry test checks every one). */
enum { SIFT__REC_MAX = 96 };

typedef union sift__rec {
    double d;
    void *p;
    int64_t i;
    unsigned char b[SIFT__REC_MAX];
} sift__rec;

/* Where a descriptor's lint reports (the configuration implements it). */
typedef struct sift__lint sift__lint;
struct sift__lint {
    int32_t vocab_size; /* 0 if unknown */
    /* Warns at the value of parameter `param`, or at the stage if NULL. */
    void (*warn)(sift__lint *l, const char *param, const char *fmt, ...) SIFT__PRINTF(3, 4);
    /* The value of `param` as written (for messages). */
    const char *(*text)(sift__lint *l, const char *param);
};

typedef struct sift__sampler_desc {
    const char *name;    /* the stage name in a `chain:` list */
    const char *summary; /* one line for docs/config.md */
    const sift__param *params;
    size_t n_params;
    size_t rec_size;
    /* The parameter a scalar value gives ("top_p: 0.9"), or NULL. */
    const char *main;
    int bare_ok; /* may be written with no value at all */
    /* The stage's value is the parameter itself (logit_bias's mapping). */
    int value_is_param;
    int selector;         /* picks the token: the chain's last stage */
    int needs_vocab_size; /* cannot be built without the vocabulary size */
    int keeps_argmax;     /* never changes the most likely token */
    /* Adds the stage to `c`. */
    sift_status (*build)(sift_chain *c, const void *rec, const sift__build_env *env,
                         sift_error *err);
    /* The stage's capability class from its record, before any chain
     * exists (TOP with *k: a top-k cut), or NULL for "not a cut and not
     * a whole-row reader". It must agree with the built stage's
     * sift__stage_ops.cls (check_registry builds each to compare). The
     * configuration's warnings no longer read it: they ask the plan of
     * the trial-built chain (schema_lint.c). */
    sift_class (*cls)(const void *rec, int64_t *k);
    /* Warnings about values that turn the stage off, or NULL. */
    void (*lint)(const void *rec, sift__lint *l);

    /* The flat llama.cpp form: the names common's --samplers takes for
     * this stage (NULL-terminated; the first is llama.cpp's own), its
     * character in llama-server's "samplers" string, its place in
     * common's default order (0 = not in it, else 1-based), and whether
     * llama.cpp's constructor would build it from these values (its
     * no-op rules; it may adjust the record as llama.cpp does).
     * flat_names NULL: not in the flat form's order. A selector with
     * flat_names has flat_order 0: naming it anywhere in the list makes
     * it the final selector in place of dist, as llama.cpp does for
     * adaptive_p. */
    const char *const *flat_names;
    char flat_char;
    int flat_order;
    int (*flat_active)(void *rec);
} sift__sampler_desc;

/* The registry (registry.c): every descriptor, NULL-terminated. */
SIFT__HIDDEN extern const sift__sampler_desc *const sift__samplers[];

/* The descriptor named `name` (`len` bytes), or NULL. */
SIFT__HIDDEN const sift__sampler_desc *sift__sampler_find(const char *name, size_t len);

/* The parameter `name` of `d`, or NULL. */
SIFT__HIDDEN const sift__param *sift__param_find(const sift__sampler_desc *d, const char *name);

/* 1 if v is inside p's range (the YAML form's, the constructors'). NaN
 * is outside every range but SIFT__R_ANY of an int; a float's SIFT__R_ANY
 * is any finite value. The bounds are compared as the parameter's type
 * (a float's bounds as floats: 0.99 is read as 0.99f). */
SIFT__HIDDEN int sift__param_ok(const sift__param *p, double v);

/* The argument check of a sift_chain_add_* call, read from its
 * descriptor's parameter: SIFT_OK, or SIFT_E_ARG with "<stage>: <param>
 * must be <range>, got <v>" in err. */
SIFT__HIDDEN sift_status sift__param_check(const sift__sampler_desc *d, const char *param, double v,
                                           sift_error *err);

/* As sift__param_check for parameter p, given to the stage `who` as the
 * argument `arg` where those names are not the descriptor's (temp_ext is
 * a form of "temperature"; penalties' argument freq is its parameter
 * frequency): "<who>: <arg> must be <range>, got <v>". */
SIFT__HIDDEN sift_status sift__param_check_arg(const sift__param *p, const char *who,
                                               const char *arg, double v, sift_error *err);

/* p as llama.cpp's flat form reads it: the flat range (flat_range,
 * flat_lo, flat_hi) in place of its own when flat_rule is
 * SIFT__FLAT_NEG_GREEDY, SIFT__FLAT_NEG_OFF or SIFT__FLAT_CLAMP, else p
 * unchanged. A constructor that takes what llama.cpp takes checks its
 * argument against it (sift_chain_add_temp: any finite temperature,
 * <= 0 greedy). */
SIFT__HIDDEN sift__param sift__param_flat(const sift__param *p);

/* The check of a window argument (a SIFT__PT_WINDOW parameter) of a
 * sift_chain_add_* call: 0 .. the chain's max_history. The -1 of the YAML
 * and flat forms (the context size) is theirs to resolve; here it is
 * SIFT_E_ARG like any negative window, and above max_history is
 * SIFT_E_LIMIT. */
SIFT__HIDDEN sift_status sift__window_check(const sift__sampler_desc *d, const char *param,
                                            int32_t v, const sift_chain *chain, sift_error *err);

/* Fills a record with the parameters' defaults (yaml = 1: the YAML
 * defaults, 0: llama.cpp's flat defaults). String-list defaults are not
 * copied: the configuration copies them (it owns the memory). */
SIFT__HIDDEN void sift__rec_defaults(const sift__sampler_desc *d, void *rec, int yaml);

/* The min_keep parameter that top_p, min_p, typical and xtc share: one
 * entry, so its doc, range, default and flat key are written once.
 * `rec_type` is the sampler's record type; it has an int32_t min_keep. */
#define SIFT__PARAM_MIN_KEEP(rec_type)                                                      \
    {                                                                                       \
        .name = "min_keep", .doc = "keep at least this many tokens", .type = SIFT__PT_INT,  \
        .range = SIFT__R_IN, .lo = 0, .hi = INT32_MAX, .off = offsetof(rec_type, min_keep), \
        .flat_key = "min_keep", .flat_def = 0                                               \
    }

/* Record access by parameter. */
#define SIFT__REC_FIELD(rec, p, type) ((type *)(void *)((unsigned char *)(rec) + (p)->off))

/* ------------------------------------------------------------------ */
/* Ban lists (ban.c): the samplers that ban listed token ids           */
/* ------------------------------------------------------------------ */

/* 1 if `id` is in ids[0..n) (ascending). */
SIFT__HIDDEN int sift__ids_has(const int32_t *ids, size_t n, int32_t id);
/* Sets to -inf every candidate of `a` whose id is in ids[0..n)
 * (ascending, distinct); ids >= a->V are skipped. Removes nothing. */
SIFT__HIDDEN void sift__ban_ids(sift__arr *a, const int32_t *ids, size_t n);
/* Sets to -inf every candidate of `a` whose id is not in ids[0..n)
 * (ascending, distinct). Removes nothing. */
SIFT__HIDDEN void sift__ban_others(sift__arr *a, const int32_t *ids, size_t n);
/* Sorts ids[0..n) ascending in place and drops repeats; returns the
 * distinct count. O(n log n), no allocation. */
SIFT__HIDDEN size_t sift__ids_sort_unique(int32_t *ids, size_t n);
/* Reads the token ids written in s[0..len) (decimal numbers 0 ..
 * INT32_MAX, separated by spaces, tabs or commas) into out[0..cap) (out
 * may be NULL to count). Returns how many, or SIZE_MAX for anything else
 * in the text or more than cap ids. */
SIFT__HIDDEN size_t sift__parse_ids(const char *s, size_t len, int32_t *out, size_t cap);

#endif /* SIFT_SAMPLERS_REGISTRY_H */

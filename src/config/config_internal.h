/*
 * config_internal.h - shared between the configuration loader's files.
 *
 * tree.c turns YAML bytes into a small bounded tree with positions;
 * schema.c and the schema_*.c files it drives (schema.h lists them) walk
 * the tree, validate it against the sampler descriptors
 * (src/samplers/registry.h) and fill the stage list and the grammar
 * section; config.c owns the public API, the diagnostics and the
 * chain builder. Nothing here is API.
 */
#ifndef SIFT_CONFIG_INTERNAL_H
#define SIFT_CONFIG_INTERNAL_H

#include "../sift_internal.h"
#include "../samplers/registry.h"

/* ------------------------------------------------------------------ */
/* The tree (tree.c)                                                   */
/* ------------------------------------------------------------------ */

#define CFG_NONE UINT32_MAX

typedef enum cfg_type { CFG_SCALAR = 0, CFG_SEQ = 1, CFG_MAP = 2 } cfg_type;

/* A node. Children of a container form a list (first, next); a mapping's
 * children alternate key, value. Scalars own a NUL-terminated copy of
 * their value (which may contain NUL bytes before `len`). */
typedef struct cfg_node {
    uint8_t type;
    uint8_t style; /* sift_scalar_style for scalars */
    uint8_t bad;   /* an alias or a tagged node, already reported: skipped */
    int32_t line, col;
    int64_t off; /* byte offset of the node's first character */
    char *val;
    size_t len;
    uint32_t first, next, n_children;
} cfg_node;

typedef struct cfg_tree {
    cfg_node *nodes;
    uint32_t n;
    size_t cap;
    uint32_t root; /* CFG_NONE if the document is empty */
} cfg_tree;

/* The source and its line table (byte offset of every line start, lines
 * ending at \n, \r\n, \r, U+0085, U+2028, U+2029 as libyaml counts them). */
typedef struct cfg_source {
    const char *data;
    size_t len;
    size_t *lines;
    size_t n_lines;
    /* The last line/column -> offset conversion: events arrive in file
     * order, so walking on from it keeps long lines linear. */
    size_t c_line, c_col, c_off;
    /* Code points before byte 64 * j, for every j: a column is then at
     * most 128 bytes of counting away from any offset, so a diagnostic
     * costs the same on a one-line 1 MiB file as on a short line. */
    uint32_t *cp_chk;
    /* Bytes and cells the diagnostics paths walk (line:col conversions,
     * edit distances, scalar offset walks): tests bound it by the input
     * size (every rejected input is rejected in linear time). */
    uint64_t *work;
} cfg_source;

/* ------------------------------------------------------------------ */
/* Stages and grammar as validated (schema*.c -> config.c)            */
/* ------------------------------------------------------------------ */

/* A validated stage: its sampler's descriptor and parameter record (list
 * parameters point to memory the config owns; sift__cfg_stage_free). */
typedef struct cfg_stage {
    const sift__sampler_desc *desc;
    int32_t line, col;
    sift__rec rec;
} cfg_stage;

/* Frees what a stage's record owns (its list parameters; schema_stage.c). */
SIFT__HIDDEN void sift__cfg_stage_free(const sift__alloc *al, cfg_stage *st);

/* A diagnostic while it is being collected. */
typedef struct cfg_diag {
    sift_diagnostic d;
    size_t seq; /* discovery order, for a stable sort */
} cfg_diag;

struct sift_config {
    sift__alloc al;
    char *name;
    char *base_dir; /* "" = current directory */
    sift_config_params params;
    cfg_source src;
    char *src_copy;

    cfg_diag *diags;
    size_t n_diags, cap_diags, n_errors, n_warnings;
    uint64_t work; /* see cfg_source.work */
    int stopped;   /* max_diagnostics reached */

    int has_seed;
    int seed_random; /* llama.cpp's -1: a new seed for every built chain */
    uint64_t seed;
    int32_t vocab_size;
    char *vocab_path;
    /* The vocab section's special tokens and end-of-generation ids
     * (sift_config_load_vocab applies them). */
    char **v_special_texts;
    int32_t *v_special_ids;
    size_t n_v_special;
    int32_t *v_eog;
    size_t n_v_eog;

    cfg_stage *stages;
    size_t n_stages, cap_stages;

    int has_grammar;
    sift_config_grammar grammar;
    char *g_text, *g_root, *g_file;
    /* The inline grammar's scalar (val = g_text), kept after the tree is
     * freed so build-time grammar errors map to the file too; style
     * SIFT_SCALAR_FILE when the grammar comes from a file. */
    cfg_node g_node;
    char **g_words;
    size_t *g_word_lengths;
    char **g_patterns;
    char **g_full_patterns;
    int32_t *g_tokens;

    /* Request forms (schema_flat.c, schema_openai.c): the form the
     * document was read in (sift_config_form) and the log-probabilities
     * it asks for. */
    int32_t form;
    sift_config_logprobs logprobs;
};

/* Records a diagnostic at a byte offset (line/col computed; off < 0 = no
 * position). Returns SIFT_E_NOMEM if it could not be stored. */
SIFT__HIDDEN sift_status sift__cfg_diag(sift_config *cfg, sift_severity sev, sift_status code,
                                        int64_t off, const char *fmt, ...) SIFT__PRINTF(5, 6);
/* As sift__cfg_diag at a known line and column (1-based). */
SIFT__HIDDEN sift_status sift__cfg_diag_lc(sift_config *cfg, sift_severity sev, sift_status code,
                                           int32_t line, int32_t col, int64_t off, const char *fmt,
                                           ...) SIFT__PRINTF(7, 8);
/* Appends a stage (copied); SIFT_E_NOMEM on failure. */
SIFT__HIDDEN sift_status sift__cfg_push_stage(sift_config *cfg, const cfg_stage *st);

/* sift_grammar_params.map_position for the inline grammar (user = the
 * config): a byte of the grammar text -> its line:col in the YAML file. */
SIFT__HIDDEN void sift__cfg_map_grammar(void *user, size_t off, int32_t *line, int32_t *col);

/* Adds every validated stage to a throw-away chain and reports what the
 * sift_chain_add_* calls refuse, at the stage's position. SIFT_OK (even
 * with diagnostics) or SIFT_E_NOMEM. */
SIFT__HIDDEN sift_status sift__cfg_trial_build(sift_config *cfg);

/* The trial build's chain, kept (the lint asks its plan): the config
 * stages order[0..n) (indices into cfg->stages, each at most once; NULL
 * = the first n as written), added as the trial build adds them, with no
 * grammar; at[j] receives the config stage that added chain stage j (a
 * stage the trial leaves out adds none), so `at` holds n entries.
 * SIFT_OK with *out the chain (the caller frees it), or the first
 * failure with *out NULL. */
SIFT__HIDDEN sift_status sift__cfg_trial_chain(const sift_config *cfg, const size_t *order,
                                               size_t n, sift_chain **out, size_t *at);

/* Whether a diagnostic of severity `sev` would be kept (see config.c). */
SIFT__HIDDEN int sift__cfg_keeps(const sift_config *cfg, sift_severity sev);
/* The work counter of a loaded config (tests). */
SIFT__HIDDEN uint64_t sift__cfg_work(const sift_config *cfg);

/* tree.c */
SIFT__HIDDEN sift_status sift__cfg_source_init(sift_config *cfg, cfg_source *src);
/* line:col (1-based, code points) of byte offset `off`. */
SIFT__HIDDEN void sift__cfg_linecol(const cfg_source *src, size_t off, int32_t *line, int32_t *col);
/* Byte offset of 0-based line/column (code points) as libyaml marks. */
SIFT__HIDDEN size_t sift__cfg_offset(cfg_source *src, size_t line0, size_t col0);
/* Parses src into tree; reports problems as diagnostics. Returns SIFT_OK
 * (even with diagnostics) or SIFT_E_NOMEM. *usable is set when the tree is
 * complete enough to validate (no syntax or limit error). */
SIFT__HIDDEN sift_status sift__cfg_parse_tree(sift_config *cfg, cfg_tree *tree, int *usable);
SIFT__HIDDEN void sift__cfg_tree_free(sift_config *cfg, cfg_tree *tree);
/* Byte offset in the source of byte `k` of a scalar's value (exact for
 * plain, quoted and literal one-line runs; the scalar's start otherwise). */
SIFT__HIDDEN int64_t sift__cfg_scalar_offset(const sift_config *cfg, const cfg_node *n, size_t k);

/* schema.c (the walk; the sections are in schema_*.c) */
SIFT__HIDDEN sift_status sift__cfg_validate(sift_config *cfg, const cfg_tree *tree);

/* diag.c: a build-time error at a place of the config, "NAME:LINE:COL:
 * MESSAGE" (or "NAME: MESSAGE" for line 0), with err->source, line and
 * column set. Returns code. */
SIFT__HIDDEN sift_status sift__cfg_fail(sift_error *err, sift_status code, const sift_config *cfg,
                                        int32_t line, int32_t col, const char *fmt, ...)
    SIFT__PRINTF(6, 7);
/* diag.c: position order (diagnostics without a position first),
 * discovery order among equal positions. */
SIFT__HIDDEN void sift__cfg_diag_sort(sift_config *cfg);

/* file.c: reads at most cap bytes of a regular file into *data (NUL
 * terminated). SIFT_E_IO / SIFT_E_CONFIG_LIMIT / SIFT_E_NOMEM with a
 * message in msg. */
SIFT__HIDDEN sift_status sift__cfg_read_capped(const sift__alloc *al, const char *path, size_t cap,
                                               char **data, size_t *len, char *msg, size_t msg_cap);

/* file.c: reads a file relative to the base directory, at most
 * max_bytes. On failure returns SIFT_E_IO / SIFT_E_CONFIG_LIMIT /
 * SIFT_E_NOMEM with a message in msg. */
SIFT__HIDDEN sift_status sift__cfg_read_file(const sift_config *cfg, const char *path,
                                             char **resolved, char **data, size_t *len, char *msg,
                                             size_t msg_cap);

#endif /* SIFT_CONFIG_INTERNAL_H */

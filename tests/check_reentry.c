/*
 * check_reentry.c - the busy rule (include/sift.h, "Callbacks and
 * re-entrancy"): from inside every kind of callback sift runs, every
 * public function given an object that is busy at that moment returns
 * SIFT_E_STATE and changes nothing (or, for the functions sift.h names,
 * does nothing or only reads), and the call in progress returns what it
 * returns when the callback does not call back, bit for bit.
 *
 * The functions are one table, keyed by name, with what each does to a
 * busy object (refuses it, ignores it, reads it, or takes none). The
 * first test reads the names sift.h declares (as tests/check_symbols.sh
 * does) and fails for a function missing from the table, so a new entry
 * point cannot go untested. A scenario is a callback kind inside an
 * outer call (the row hook inside sift_chain_sample_slice, a custom
 * stage's accept inside sift_chain_accept, the allocator inside
 * sift_chain_add_top_k, ...); each callback runs the whole table on every
 * busy object, and the scenario runs twice, once with the calls and once
 * without, and compares the outer results and the chains' states.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sift_internal.h"
#include "testutil.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
enum { V = 32, MAXE = 64 };

/* ------------------------------------------------------------------ */
/* The context of the calls made from a callback                       */
/* ------------------------------------------------------------------ */

/* What a callback may call into: the objects busy at that moment. */
typedef struct reent {
    int armed;           /* the callbacks run the table */
    int running;         /* the table is running (no nested runs) */
    sift_chain *busy[2]; /* the busy chains (NULL: none) */
    sift_verifier *v;    /* a verifier for busy[0] (busy or not) */
    int v_busy;          /* v is busy */
    sift_chain *idle;    /* a chain of busy[0]'s layout that is not busy */
    int in_free;         /* inside sift_chain_free: the chain has no stages */
    int runs;            /* table runs */
    char fail[256];      /* the first failure, "" = none */
    /* the inputs of the calls */
    float row[V];
    sift_slice slice;
    sift_slicer *slicer;
    sift_vocab *vocab;
} reent;

static reent R;

static void note_fail(const char *fmt, const char *name, int a, int b)
{
    if (R.fail[0])
        return;
    snprintf(R.fail, sizeof R.fail, fmt, name, a, b);
}

/* ------------------------------------------------------------------ */
/* The table                                                           */
/* ------------------------------------------------------------------ */

typedef enum kind {
    REFUSES, /* returns SIFT_E_STATE for a busy chain or verifier */
    IGNORES, /* returns nothing; does nothing to a busy object */
    READS,   /* a getter sift.h names as safe inside a callback */
    NONE     /* takes no chain and no verifier: never given a busy object */
} kind;

typedef sift_status (*call_fn)(sift_chain *c);

typedef struct entry {
    const char *name;
    kind kind;
    call_fn call; /* NULL for NONE */
    int verifier; /* takes a verifier (R.v) */
} entry;

static int pass_apply(void *user, sift_candidate *data, size_t *size)
{
    (void)user;
    (void)data;
    (void)size;
    return 0;
}

static int one_hook(void *user, float *row, int32_t n)
{
    (void)user;
    memcpy(row, R.row, (size_t)n * sizeof *row);
    return 0;
}

static sift_grammar *new_grammar(void)
{
    sift_grammar *g = NULL;
    const char *text = "root ::= [a-z]+";
    ck_assert_int_eq(sift_grammar_new(&g, text, strlen(text), R.vocab, NULL, NULL), SIFT_OK);
    return g;
}

/* A call that took ownership (it should not have) keeps it; else the
 * grammar is freed here. */
static sift_status with_grammar(sift_chain *c, int check)
{
    sift_grammar *g = new_grammar();
    sift_status s =
        check ? sift_chain_set_check_grammar(c, g, NULL) : sift_chain_add_grammar(c, g, NULL);
    if (s)
        sift_grammar_free(g);
    return s;
}

static sift_status c_accept(sift_chain *c)
{
    return sift_chain_accept(c, 1, NULL);
}
static sift_status c_accept_prompt(sift_chain *c)
{
    return sift_chain_accept_prompt(c, 1, NULL);
}
static sift_status c_adaptive_p(sift_chain *c)
{
    return sift_chain_add_adaptive_p(c, 0.5f, 0.9f, NULL);
}
static sift_status c_allowed(sift_chain *c)
{
    int32_t ids[2] = {1, 2};
    return sift_chain_add_allowed_tokens(c, ids, 2, NULL);
}
static sift_status c_bad_words(sift_chain *c)
{
    int32_t w[2] = {3, 4};
    const int32_t *seqs[1] = {w};
    size_t lens[1] = {2};
    return sift_chain_add_bad_words(c, seqs, lens, 1, NULL);
}
static sift_status c_custom(sift_chain *c)
{
    sift_custom_stage vt = {.abi_version = SIFT_CUSTOM_STAGE_ABI, .apply = pass_apply};
    return sift_chain_add_custom(c, &vt, NULL, NULL);
}
static sift_status c_dist(sift_chain *c)
{
    return sift_chain_add_dist(c, NULL);
}
static sift_status c_dist_id(sift_chain *c)
{
    return sift_chain_add_dist_id_order(c, NULL);
}
static sift_status c_dry(sift_chain *c)
{
    sift_dry_params p;
    sift_dry_params_init(&p);
    p.multiplier = 0.8f;
    return sift_chain_add_dry(c, &p, NULL, NULL);
}
static sift_status c_epsilon(sift_chain *c)
{
    return sift_chain_add_epsilon(c, 0.01f, 1, NULL);
}
static sift_status c_eta(sift_chain *c)
{
    return sift_chain_add_eta(c, 0.01f, 1, NULL);
}
static sift_status c_grammar(sift_chain *c)
{
    return with_grammar(c, 0);
}
static sift_status c_greedy(sift_chain *c)
{
    return sift_chain_add_greedy(c, NULL);
}
static sift_status c_logit_bias(sift_chain *c)
{
    sift_bias b = {5, 1.0f};
    return sift_chain_add_logit_bias(c, &b, 1, NULL);
}
static sift_status c_min_p(sift_chain *c)
{
    return sift_chain_add_min_p(c, 0.05f, 1, NULL);
}
static sift_status c_min_tokens(sift_chain *c)
{
    int32_t eog = 0;
    return sift_chain_add_min_tokens(c, 1, &eog, 1, NULL, NULL);
}
static sift_status c_mirostat(sift_chain *c)
{
    return sift_chain_add_mirostat(c, V, 5.0f, 0.1f, 10, NULL);
}
static sift_status c_mirostat_v2(sift_chain *c)
{
    return sift_chain_add_mirostat_v2(c, 5.0f, 0.1f, NULL);
}
static sift_status c_no_repeat(sift_chain *c)
{
    return sift_chain_add_no_repeat_ngram(c, 2, 16, NULL);
}
static sift_status c_penalties(sift_chain *c)
{
    return sift_chain_add_penalties(c, 8, 1.1f, 0.0f, 0.0f, NULL);
}
static sift_status c_temp(sift_chain *c)
{
    return sift_chain_add_temp(c, 0.8f, NULL);
}
static sift_status c_temp_ext(sift_chain *c)
{
    return sift_chain_add_temp_ext(c, 0.8f, 0.0f, 1.0f, NULL);
}
static sift_status c_top_k(sift_chain *c)
{
    return sift_chain_add_top_k(c, 5, NULL);
}
static sift_status c_top_k_ties(sift_chain *c)
{
    return sift_chain_add_top_k_ties(c, 5, NULL);
}
static sift_status c_top_n_sigma(sift_chain *c)
{
    return sift_chain_add_top_n_sigma(c, 1.0f, NULL);
}
static sift_status c_top_p(sift_chain *c)
{
    return sift_chain_add_top_p(c, 0.9f, 1, NULL);
}
static sift_status c_typical(sift_chain *c)
{
    return sift_chain_add_typical(c, 0.9f, 1, NULL);
}
static sift_status c_xtc(sift_chain *c)
{
    return sift_chain_add_xtc(c, 0.5f, 0.1f, 1, NULL);
}
static sift_status c_clone(sift_chain *c)
{
    sift_chain *d = NULL;
    sift_status s = sift_chain_clone(c, &d, NULL);
    sift_chain_free(d);
    return s;
}
static sift_status c_distribution(sift_chain *c)
{
    sift_token_prob out[V];
    size_t n = 0;
    return sift_chain_distribution(c, R.row, V, out, V, &n, NULL);
}
static sift_status c_distribution_slice(sift_chain *c)
{
    sift_token_prob out[V];
    size_t n = 0;
    return sift_chain_distribution_slice(c, &R.slice, out, V, &n, NULL);
}
static sift_status c_extras(sift_chain *c)
{
    int32_t ids[MAXE];
    size_t n = 0;
    return sift_chain_extras(c, ids, MAXE, &n, NULL);
}
static sift_status c_next_k(sift_chain *c)
{
    sift_plan p = {.struct_size = sizeof p};
    return sift_chain_next_k(c, &p, NULL);
}
static sift_status c_plan(sift_chain *c)
{
    sift_plan p = {.struct_size = sizeof p};
    return sift_chain_plan(c, &p, NULL, NULL);
}
static sift_status c_sample(sift_chain *c)
{
    int32_t t;
    return sift_chain_sample(c, R.row, V, &t, NULL);
}
static sift_status c_sample_slice(sift_chain *c)
{
    int32_t t;
    return sift_chain_sample_slice(c, &R.slice, &t, NULL);
}
static sift_status c_check_grammar(sift_chain *c)
{
    return with_grammar(c, 1);
}
static sift_status c_cross_check(sift_chain *c)
{
    return sift_chain_set_cross_check(c, 1, 0.0, 7, NULL);
}
static sift_status c_row_hook(sift_chain *c)
{
    return sift_chain_set_row_hook(c, one_hook, NULL, NULL);
}
static sift_status c_survivors(sift_chain *c)
{
    sift_candidate out[V];
    size_t n = 0;
    return sift_chain_survivors(c, R.row, V, 0, out, V, &n, NULL);
}
static sift_status c_verify(sift_chain *c)
{
    const float *rows[1] = {R.row};
    sift_verify_args a;
    sift_verify_args_init(&a);
    a.rows = rows;
    a.n_vocab = V;
    sift_verify_result r = {.struct_size = sizeof r};
    return sift_chain_verify(c, &a, &r, NULL);
}
static sift_status c_chains_next_k(sift_chain *c)
{
    const sift_chain *cs[1] = {c};
    int32_t k;
    return sift_chains_next_k(cs, 1, &k, NULL);
}
static sift_status c_chains_next_k_batch(sift_chain *c)
{
    const sift_chain *cs[1] = {c};
    sift_batch_k b = {.struct_size = sizeof b};
    return sift_chains_next_k_batch(cs, 1, NULL, NULL, &b, NULL);
}
static sift_status c_chains_sample(sift_chain *c)
{
    sift_chain *cs[1] = {c};
    const float *rows[1] = {R.row};
    sift_batch_args a;
    sift_batch_args_init(&a);
    a.chains = cs;
    a.n = 1;
    a.rows = rows;
    a.n_vocab = V;
    a.flags = SIFT_BATCH_ACCEPT;
    int32_t t;
    sift_status st;
    sift_status s = sift_chains_sample(&a, &t, &st, NULL);
    return s == st ? s : SIFT_E_ARG; /* the slot's status is the call's */
}
static sift_status c_verifier_new(sift_chain *c)
{
    sift_verifier *v = NULL;
    sift_status s = sift_verifier_new(&v, c, 4, NULL);
    sift_verifier_free(v);
    return s;
}

/* The verifier calls: on the busy chain with R.v, and when R.v is busy,
 * on the idle chain too. The first status that is not SIFT_E_STATE. */
static sift_status first_not_state(sift_status a, sift_status b)
{
    return a != SIFT_E_STATE ? a : b;
}

static sift_status plan_on(sift_verifier *v, sift_chain *c)
{
    int32_t d[1] = {1};
    sift_verify_step steps[2] = {{.struct_size = sizeof steps[0]}};
    return sift_verifier_plan(v, c, d, 1, steps, NULL);
}
static sift_status c_verifier_plan(sift_chain *c)
{
    sift_status s = plan_on(R.v, c);
    return R.v_busy ? first_not_state(s, plan_on(R.v, R.idle)) : s;
}
static sift_status plans_on(sift_verifier *v, sift_chain *c)
{
    int32_t d[1] = {1};
    const int32_t *ds[1] = {d};
    int32_t nd[1] = {1};
    sift_verify_step steps[2] = {{.struct_size = sizeof steps[0]}};
    sift_verify_step *ss[1] = {steps};
    sift_verifier *vs[1] = {v};
    sift_chain *cs[1] = {c};
    int32_t k;
    return sift_verifiers_plan(vs, cs, ds, nd, 1, ss, &k, NULL);
}
static sift_status c_verifiers_plan(sift_chain *c)
{
    sift_status s = plans_on(R.v, c);
    return R.v_busy ? first_not_state(s, plans_on(R.v, R.idle)) : s;
}
static sift_status dists_on(sift_verifier *v, sift_chain *c)
{
    const float *rows[1] = {R.row};
    sift_verify_args a;
    sift_verify_args_init(&a);
    a.rows = rows;
    a.n_vocab = V;
    sift_token_prob out[V];
    size_t n_out[1];
    int32_t np;
    return sift_verifier_distributions(v, c, &a, out, V, n_out, &np, NULL);
}
static sift_status c_verifier_distributions(sift_chain *c)
{
    sift_status s = dists_on(R.v, c);
    return R.v_busy ? first_not_state(s, dists_on(R.v, R.idle)) : s;
}

static sift_status c_free(sift_chain *c)
{
    sift_chain_free(c);
    return SIFT_OK;
}
static sift_status c_reset(sift_chain *c)
{
    sift_chain_reset(c);
    return SIFT_OK;
}
static sift_status c_verifier_free(sift_chain *c)
{
    (void)c;
    if (R.v_busy)
        sift_verifier_free(R.v);
    return SIFT_OK;
}

static sift_status c_n_stages(sift_chain *c)
{
    return sift_chain_n_stages(c) == c->n_stages ? SIFT_OK : SIFT_E_ARG;
}
static sift_status c_stage_name(sift_chain *c)
{
    for (size_t i = 0; i < sift_chain_n_stages(c); i++)
        if (!sift_chain_stage_name(c, i))
            return SIFT_E_ARG;
    return SIFT_OK;
}
static sift_status c_stage_class(sift_chain *c)
{
    int64_t n;
    for (size_t i = 0; i < sift_chain_n_stages(c); i++)
        (void)sift_chain_stage_class(c, i, &n);
    return SIFT_OK;
}
static sift_status c_stats(sift_chain *c)
{
    sift_stats st = {.struct_size = sizeof st};
    return sift_chain_stats(c, &st, NULL);
}
static sift_status c_set_workspace(sift_chain *c)
{
    return sift_chain_set_workspace(c, NULL, NULL);
}

static sift_status c_sample_logprobs(sift_chain *c)
{
    int32_t t;
    sift_logprobs lp = {.struct_size = sizeof lp, .flags = SIFT_LOGPROBS_PROCESSED};
    return sift_chain_sample_logprobs(c, R.row, V, &t, &lp, NULL);
}
static sift_status c_sample_slice_logprobs(sift_chain *c)
{
    int32_t t;
    sift_logprobs lp = {.struct_size = sizeof lp, .flags = SIFT_LOGPROBS_PROCESSED};
    return sift_chain_sample_slice_logprobs(c, &R.slice, &t, &lp, NULL);
}

/* One line per function: its name (as sift.h spells it), what it does
 * to a busy object, and the call. */
#define REF(fname, fn)                              \
    {                                               \
        .name = #fname, .kind = REFUSES, .call = fn \
    }
#define NO(fname)                    \
    {                                \
        .name = #fname, .kind = NONE \
    }

static const entry TABLE[] = {
    /* the chain */
    REF(sift_chain_accept, c_accept),
    REF(sift_chain_accept_prompt, c_accept_prompt),
    REF(sift_chain_add_adaptive_p, c_adaptive_p),
    REF(sift_chain_add_allowed_tokens, c_allowed),
    REF(sift_chain_add_bad_words, c_bad_words),
    REF(sift_chain_add_custom, c_custom),
    REF(sift_chain_add_dist, c_dist),
    REF(sift_chain_add_dist_id_order, c_dist_id),
    REF(sift_chain_add_dry, c_dry),
    REF(sift_chain_add_epsilon, c_epsilon),
    REF(sift_chain_add_eta, c_eta),
    REF(sift_chain_add_grammar, c_grammar),
    REF(sift_chain_add_greedy, c_greedy),
    REF(sift_chain_add_logit_bias, c_logit_bias),
    REF(sift_chain_add_min_p, c_min_p),
    REF(sift_chain_add_min_tokens, c_min_tokens),
    REF(sift_chain_add_mirostat, c_mirostat),
    REF(sift_chain_add_mirostat_v2, c_mirostat_v2),
    REF(sift_chain_add_no_repeat_ngram, c_no_repeat),
    REF(sift_chain_add_penalties, c_penalties),
    REF(sift_chain_add_temp, c_temp),
    REF(sift_chain_add_temp_ext, c_temp_ext),
    REF(sift_chain_add_top_k, c_top_k),
    REF(sift_chain_add_top_k_ties, c_top_k_ties),
    REF(sift_chain_add_top_n_sigma, c_top_n_sigma),
    REF(sift_chain_add_top_p, c_top_p),
    REF(sift_chain_add_typical, c_typical),
    REF(sift_chain_add_xtc, c_xtc),
    REF(sift_chain_clone, c_clone),
    REF(sift_chain_distribution, c_distribution),
    REF(sift_chain_distribution_slice, c_distribution_slice),
    REF(sift_chain_extras, c_extras),
    REF(sift_chain_next_k, c_next_k),
    REF(sift_chain_plan, c_plan),
    REF(sift_chain_sample, c_sample),
    REF(sift_chain_sample_slice, c_sample_slice),
    REF(sift_chain_set_check_grammar, c_check_grammar),
    REF(sift_chain_set_cross_check, c_cross_check),
    REF(sift_chain_set_row_hook, c_row_hook),
    REF(sift_chain_survivors, c_survivors),
    REF(sift_chain_verify, c_verify),
    REF(sift_chains_next_k, c_chains_next_k),
    REF(sift_chains_next_k_batch, c_chains_next_k_batch),
    REF(sift_chains_sample, c_chains_sample),
    REF(sift_verifier_new, c_verifier_new),
    REF(sift_chain_sample_logprobs, c_sample_logprobs),
    REF(sift_chain_sample_slice_logprobs, c_sample_slice_logprobs),
    {.name = "sift_verifier_plan", .kind = REFUSES, .call = c_verifier_plan, .verifier = 1},
    {.name = "sift_verifiers_plan", .kind = REFUSES, .call = c_verifiers_plan, .verifier = 1},
    {.name = "sift_verifier_distributions",
     .kind = REFUSES,
     .call = c_verifier_distributions,
     .verifier = 1},
    {.name = "sift_chain_free", .kind = IGNORES, .call = c_free},
    {.name = "sift_chain_reset", .kind = IGNORES, .call = c_reset},
    {.name = "sift_verifier_free", .kind = IGNORES, .call = c_verifier_free, .verifier = 1},
    {.name = "sift_chain_n_stages", .kind = READS, .call = c_n_stages},
    {.name = "sift_chain_stage_name", .kind = READS, .call = c_stage_name},
    {.name = "sift_chain_stage_class", .kind = READS, .call = c_stage_class},
    {.name = "sift_chain_stats", .kind = READS, .call = c_stats},
    /* no chain, no verifier: never busy (sift.h says an allocator given
     * to these objects must not call back into them) */
    NO(sift_batch_args_init),
    NO(sift_chain_new),
    NO(sift_chain_params_init),
    NO(sift_class_str),
    NO(sift_config_build_chain),
    NO(sift_config_diagnostic),
    NO(sift_config_free),
    NO(sift_config_grammar_info),
    NO(sift_config_load),
    NO(sift_config_load_vocab),
    NO(sift_config_n_diagnostics),
    NO(sift_config_n_errors),
    NO(sift_config_params_init),
    NO(sift_config_parse),
    NO(sift_config_seed),
    NO(sift_config_vocab_path),
    NO(sift_config_vocab_size),
    NO(sift_dry_params_init),
    NO(sift_encode_scratch_free),
    NO(sift_encode_scratch_new),
    NO(sift_grammar_accept_bytes),
    NO(sift_grammar_accept_token),
    NO(sift_grammar_accepts_token),
    NO(sift_grammar_ban),
    NO(sift_grammar_ban_candidates),
    NO(sift_grammar_clone),
    NO(sift_grammar_fill_bitmask),
    NO(sift_grammar_free),
    NO(sift_grammar_from_json_schema),
    NO(sift_grammar_is_complete),
    NO(sift_grammar_is_triggered),
    NO(sift_grammar_new),
    NO(sift_grammar_params_init),
    NO(sift_grammar_reset),
    NO(sift_grammar_set_lazy),
    NO(sift_grammars_fill_bitmasks),
    NO(sift_vocab_from_hf),
    NO(sift_vocab_load_hf),
    NO(sift_grammar_from_structural_tags),
    NO(sift_grammar_from_choices),
    NO(sift_grammar_from_regex),
    NO(sift_grammar_forced_bytes),
    NO(sift_grammars_fill_bitmask_rows),
    NO(sift_grammar_fill_bitmask_draft),
    NO(sift_grammar_validate_tokens),
    NO(sift_grammar_is_terminated),
    NO(sift_grammar_rollback_depth),
    NO(sift_grammar_rollback),
    NO(sift_guarantee_str),
    NO(sift_json_schema_free_gbnf),
    NO(sift_json_schema_params_init),
    NO(sift_json_schema_to_gbnf),
    NO(sift_lazy_params_init),
    NO(sift_slicer_build),
    NO(sift_slicer_free),
    NO(sift_slicer_new),
    NO(sift_status_str),
    NO(sift_verify_args_init),
    NO(sift_version),
    NO(sift_version_number),
    NO(sift_vocab_attr),
    NO(sift_vocab_encode),
    NO(sift_vocab_extend),
    NO(sift_vocab_extra_init),
    NO(sift_vocab_free),
    NO(sift_vocab_from_gguf),
    NO(sift_vocab_from_tiktoken),
    NO(sift_vocab_load_gguf),
    NO(sift_vocab_load_tiktoken),
    NO(sift_vocab_new),
    NO(sift_vocab_piece),
    NO(sift_vocab_pretokenizer),
    NO(sift_vocab_set_attr),
    NO(sift_vocab_set_pretokenizer),
    NO(sift_vocab_size),
    REF(sift_chain_set_workspace, c_set_workspace),
    NO(sift_workspace_free),
    NO(sift_workspace_new),
    NO(sift_workspace_params_init),
    NO(sift_shards_merge),
    NO(sift_config_get_logprobs),
    NO(sift_config_form_of),
    NO(sift_config_describe),
};

static const entry *find(const char *name)
{
    for (size_t i = 0; i < N(TABLE); i++)
        if (strcmp(TABLE[i].name, name) == 0)
            return &TABLE[i];
    return NULL;
}

/* The state a call must not change: the matching state (RNG, stages,
 * check grammar), the layout and the hook. */
static uint64_t state_of(const sift_chain *c)
{
    uint64_t h = sift__chain_state_digest(c);
    h = sift__fnv(h, &c->n_stages, sizeof c->n_stages);
    h = sift__fnv(h, &c->hook, sizeof c->hook);
    h = sift__fnv(h, &c->xc_every, sizeof c->xc_every);
    return sift__fnv(h, &c->check, sizeof c->check);
}

/* Runs every table entry on every busy chain (the callbacks call this). */
static void run_table(void)
{
    if (!R.armed || R.running)
        return;
    R.running = 1;
    R.runs++;
    /* A busy verifier without a busy chain (sift_verifier_free): the
     * calls that take a verifier, on a chain that is not busy. */
    int v_only = !R.busy[0] && R.v_busy;
    for (size_t b = 0; b < N(R.busy) && (R.busy[b] || (v_only && b == 0)); b++) {
        sift_chain *c = v_only ? R.idle : R.busy[b];
        for (size_t i = 0; i < N(TABLE); i++) {
            const entry *e = &TABLE[i];
            if (e->kind == NONE || (v_only && !e->verifier))
                continue;
            uint64_t before = state_of(c);
            uint64_t before_idle = R.idle ? state_of(R.idle) : 0;
            sift_status s = e->call(c);
            if (e->kind == REFUSES && s != SIFT_E_STATE)
                note_fail("%s on busy chain %d returned %d, not SIFT_E_STATE", e->name, (int)b,
                          (int)s);
            if (e->kind == READS && s != SIFT_OK)
                note_fail("%s on busy chain %d (a safe getter) returned %d", e->name, (int)b,
                          (int)s);
            if (state_of(c) != before)
                note_fail("%s on busy chain %d changed it (%d)", e->name, (int)b, (int)s);
            if (R.idle && state_of(R.idle) != before_idle)
                note_fail("%s with busy verifier changed the idle chain (%d, %d)", e->name, (int)b,
                          (int)s);
        }
    }
    R.running = 0;
}

/* ------------------------------------------------------------------ */
/* Callbacks                                                           */
/* ------------------------------------------------------------------ */

static int hook(void *user, float *row, int32_t n)
{
    (void)user;
    run_table();
    memcpy(row, R.row, (size_t)n * sizeof *row);
    return 0;
}

static int hook_at(void *user, int32_t position, float *row, int32_t n)
{
    (void)position;
    return hook(user, row, n);
}

/* A custom stage that changes nothing and calls back from every
 * callback; its user data is a counter of its own (cloned, freed). */
static int cu_apply(void *user, sift_candidate *data, size_t *size)
{
    (void)user;
    (void)data;
    (void)size;
    run_table();
    return 0;
}
static int cu_accept(void *user, int32_t token)
{
    (void)token;
    ++*(int *)user;
    run_table();
    return 0;
}
static void cu_reset(void *user)
{
    *(int *)user = 0;
    run_table();
}
static void *cu_clone(void *user)
{
    run_table();
    int *p = malloc(sizeof *p);
    if (p)
        *p = *(int *)user;
    return p;
}
static void cu_free(void *user)
{
    run_table();
    free(user);
}

/* The chains' allocator: malloc, calling back when armed. */
static long n_frees;

static void *al_alloc(void *user, size_t n)
{
    (void)user;
    run_table();
    return malloc(n);
}
static void al_free(void *user, void *p)
{
    (void)user;
    n_frees++;
    run_table();
    free(p);
}

/* ------------------------------------------------------------------ */
/* Scenarios                                                           */
/* ------------------------------------------------------------------ */

/* A chain: penalties, [custom], top_k, temp, dist, through the calling
 * allocator. */
static sift_chain *make_chain(uint64_t seed, int custom)
{
    sift_allocator al = {sizeof al, al_alloc, al_free, NULL, NULL};
    sift_chain *c = tu_chain_new(seed, &al);
    ck_assert_int_eq(sift_chain_add_penalties(c, 8, 1.2f, 0.1f, 0.0f, NULL), SIFT_OK);
    if (custom) {
        sift_custom_stage vt = {.abi_version = SIFT_CUSTOM_STAGE_ABI,
                                .name = "calls_back",
                                .apply = cu_apply,
                                .accept = cu_accept,
                                .reset = cu_reset,
                                .clone = cu_clone,
                                .free = cu_free};
        int *u = calloc(1, sizeof *u);
        ck_assert_int_eq(sift_chain_add_custom(c, &vt, u, NULL), SIFT_OK);
    }
    ck_assert_int_eq(sift_chain_add_top_k(c, 20, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_temp(c, 0.9f, NULL), SIFT_OK);
    ck_assert_int_eq(sift_chain_add_dist(c, NULL), SIFT_OK);
    /* a history, so that accept and reset have something to change */
    for (int32_t t = 3; t < 7; t++)
        ck_assert_int_eq(sift_chain_accept_prompt(c, t, NULL), SIFT_OK);
    return c;
}

/* What an outer call returned: its status, the bytes of its outputs and
 * the states of the chains it ran on. */
typedef struct outcome {
    sift_status status;
    uint64_t h;
} outcome;

static void out_add(outcome *o, const void *p, size_t n)
{
    o->h = sift__fnv(o->h, p, n);
}

/* The objects of a scenario: two chains of one layout, a verifier for
 * the first, a slice of the row that cannot decide (so the hook runs). */
typedef struct world {
    sift_chain *c[2];
    sift_verifier *v;
    sift_chain *idle;
} world;

static void world_new(world *w, int custom)
{
    w->c[0] = make_chain(11, custom);
    w->c[1] = make_chain(12, custom);
    w->idle = make_chain(13, custom);
    ck_assert_int_eq(sift_verifier_new(&w->v, w->c[0], 4, NULL), SIFT_OK);
    ck_assert_int_eq(sift_slicer_build(R.slicer, R.row, V, 2, NULL, 0, &R.slice, NULL), SIFT_OK);
}

static void world_free(world *w, outcome *o)
{
    for (int i = 0; i < 2; i++)
        if (w->c[i]) {
            uint64_t d = state_of(w->c[i]);
            out_add(o, &d, sizeof d);
        }
    sift_verifier_free(w->v);
    sift_chain_free(w->c[0]);
    sift_chain_free(w->c[1]);
    sift_chain_free(w->idle);
}

/* Arms the callbacks with the busy objects of the outer call. */
static void arm(int on, sift_chain *c0, sift_chain *c1, world *w, int v_busy)
{
    R.armed = on;
    R.busy[0] = c0;
    R.busy[1] = c1;
    R.v = w->v;
    R.v_busy = v_busy;
    R.idle = w->idle;
}

static void disarm(void)
{
    R.armed = 0;
    memset(R.busy, 0, sizeof R.busy);
    R.v = NULL;
    R.v_busy = 0;
    R.idle = NULL;
}

typedef outcome (*scenario_fn)(int reenter);

static outcome sc_hook_sample_slice(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 0);
    ck_assert_int_eq(sift_chain_set_row_hook(w.c[0], hook, NULL, NULL), SIFT_OK);
    arm(on, w.c[0], NULL, &w, 0);
    int32_t t = -1;
    o.status = sift_chain_sample_slice(w.c[0], &R.slice, &t, NULL);
    disarm();
    out_add(&o, &t, sizeof t);
    world_free(&w, &o);
    return o;
}

static outcome sc_hook_distribution_slice(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 0);
    ck_assert_int_eq(sift_chain_set_row_hook(w.c[0], hook, NULL, NULL), SIFT_OK);
    arm(on, w.c[0], NULL, &w, 0);
    sift_token_prob out[V];
    size_t n = 0;
    o.status = sift_chain_distribution_slice(w.c[0], &R.slice, out, V, &n, NULL);
    disarm();
    out_add(&o, out, n * sizeof *out);
    world_free(&w, &o);
    return o;
}

static outcome verify_with(int on, int positional)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 0);
    if (!positional)
        ck_assert_int_eq(sift_chain_set_row_hook(w.c[0], hook, NULL, NULL), SIFT_OK);
    sift_slice sl[3] = {R.slice, R.slice, R.slice};
    int32_t drafts[2] = {-1, -1};
    /* drafts: what the chain samples, so every position runs */
    sift_chain *twin = NULL;
    ck_assert_int_eq(sift_chain_clone(w.c[0], &twin, NULL), SIFT_OK);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(sift_chain_sample(twin, R.row, V, &drafts[i], NULL), SIFT_OK);
        ck_assert_int_eq(sift_chain_accept(twin, drafts[i], NULL), SIFT_OK);
    }
    sift_chain_free(twin);
    sift_verify_args a;
    sift_verify_args_init(&a);
    a.drafts = drafts;
    a.n_drafts = 2;
    a.slices = sl;
    if (positional)
        a.hook = hook_at;
    sift_verify_result r = {.struct_size = sizeof r};
    arm(on, w.c[0], NULL, &w, 0);
    o.status = sift_chain_verify(w.c[0], &a, &r, NULL);
    disarm();
    out_add(&o, &r, sizeof r);
    world_free(&w, &o);
    return o;
}

static outcome sc_hook_verify(int on)
{
    return verify_with(on, 0);
}

static outcome sc_hook_at_verify(int on)
{
    return verify_with(on, 1);
}

static outcome distributions_with(int on, int positional)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 0);
    if (!positional)
        ck_assert_int_eq(sift_chain_set_row_hook(w.c[0], hook, NULL, NULL), SIFT_OK);
    sift_slice sl[3] = {R.slice, R.slice, R.slice};
    int32_t drafts[2] = {7, 9};
    sift_verify_args a;
    sift_verify_args_init(&a);
    a.drafts = drafts;
    a.n_drafts = 2;
    a.slices = sl;
    if (positional)
        a.hook = hook_at;
    sift_token_prob out[3 * V];
    memset(out, 0, sizeof out);
    size_t n_out[3] = {0, 0, 0};
    int32_t np = 0;
    arm(on, w.c[0], NULL, &w, 1);
    o.status = sift_verifier_distributions(w.v, w.c[0], &a, out, V, n_out, &np, NULL);
    disarm();
    out_add(&o, out, sizeof out);
    out_add(&o, n_out, sizeof n_out);
    out_add(&o, &np, sizeof np);
    world_free(&w, &o);
    return o;
}

static outcome sc_hook_distributions(int on)
{
    return distributions_with(on, 0);
}

static outcome sc_hook_at_distributions(int on)
{
    return distributions_with(on, 1);
}

static outcome batch_with(int on, int positional, int rows)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, rows);
    for (int i = 0; i < 2 && !positional && !rows; i++)
        ck_assert_int_eq(sift_chain_set_row_hook(w.c[i], hook, NULL, NULL), SIFT_OK);
    sift_slice sl[2] = {R.slice, R.slice};
    const float *rs[2] = {R.row, R.row};
    sift_batch_args a;
    sift_batch_args_init(&a);
    a.chains = w.c;
    a.n = 2;
    if (rows) {
        a.rows = rs;
        a.n_vocab = V;
    } else {
        a.slices = sl;
    }
    if (positional)
        a.hook = hook_at;
    a.flags = SIFT_BATCH_ACCEPT;
    int32_t t[2] = {-1, -1};
    sift_status st[2] = {SIFT_OK, SIFT_OK};
    arm(on, w.c[0], w.c[1], &w, 0);
    o.status = sift_chains_sample(&a, t, st, NULL);
    disarm();
    out_add(&o, t, sizeof t);
    out_add(&o, st, sizeof st);
    world_free(&w, &o);
    return o;
}

static outcome sc_hook_batch(int on)
{
    return batch_with(on, 0, 0);
}

static outcome sc_hook_at_batch(int on)
{
    return batch_with(on, 1, 0);
}

static outcome sc_apply_batch(int on)
{
    return batch_with(on, 0, 1);
}

static outcome sc_apply_sample(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 1);
    arm(on, w.c[0], NULL, &w, 0);
    int32_t t = -1;
    o.status = sift_chain_sample(w.c[0], R.row, V, &t, NULL);
    disarm();
    out_add(&o, &t, sizeof t);
    world_free(&w, &o);
    return o;
}

static outcome sc_apply_distribution(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 1);
    arm(on, w.c[0], NULL, &w, 0);
    sift_token_prob out[V];
    size_t n = 0;
    o.status = sift_chain_distribution(w.c[0], R.row, V, out, V, &n, NULL);
    disarm();
    out_add(&o, out, n * sizeof *out);
    world_free(&w, &o);
    return o;
}

static outcome sc_apply_survivors(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 1);
    arm(on, w.c[0], NULL, &w, 0);
    sift_candidate out[V];
    size_t n = 0;
    o.status = sift_chain_survivors(w.c[0], R.row, V, 3, out, V, &n, NULL);
    disarm();
    out_add(&o, out, n * sizeof *out);
    world_free(&w, &o);
    return o;
}

static outcome sc_apply_verify(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 1);
    const float *rs[2] = {R.row, R.row};
    int32_t drafts[1] = {4};
    sift_verify_args a;
    sift_verify_args_init(&a);
    a.drafts = drafts;
    a.n_drafts = 1;
    a.rows = rs;
    a.n_vocab = V;
    sift_verify_result r = {.struct_size = sizeof r};
    arm(on, w.c[0], NULL, &w, 0);
    o.status = sift_chain_verify(w.c[0], &a, &r, NULL);
    disarm();
    out_add(&o, &r, sizeof r);
    world_free(&w, &o);
    return o;
}

static outcome accept_with(int on, int prompt)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 1);
    arm(on, w.c[0], NULL, &w, 0);
    o.status =
        prompt ? sift_chain_accept_prompt(w.c[0], 9, NULL) : sift_chain_accept(w.c[0], 9, NULL);
    disarm();
    world_free(&w, &o);
    return o;
}

static outcome sc_accept(int on)
{
    return accept_with(on, 0);
}

static outcome sc_accept_prompt(int on)
{
    return accept_with(on, 1);
}

static outcome sc_reset(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 1);
    arm(on, w.c[0], NULL, &w, 0);
    sift_chain_reset(w.c[0]);
    disarm();
    world_free(&w, &o);
    return o;
}

static outcome sc_clone_in_verifier_new(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 1);
    sift_verifier *v = NULL;
    arm(on, w.c[0], NULL, &w, 0);
    o.status = sift_verifier_new(&v, w.c[0], 3, NULL);
    disarm();
    int made = v != NULL;
    out_add(&o, &made, sizeof made);
    sift_verifier_free(v);
    world_free(&w, &o);
    return o;
}

/* sift_chain_free of a chain with the calling custom stage: its free
 * (and the allocator's) call back into the chain being freed. */
static outcome sc_free(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 1);
    long f0 = n_frees;
    sift_chain *c = w.c[0];
    w.c[0] = NULL;
    arm(on, c, NULL, &w, 0);
    sift_chain_free(c);
    disarm();
    long freed = n_frees - f0;
    out_add(&o, &freed, sizeof freed);
    world_free(&w, &o);
    return o;
}

/* The allocator frees the verifier's shadow and buffers. */
static outcome sc_verifier_free(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 0);
    long f0 = n_frees;
    sift_verifier *v = w.v;
    w.v = NULL;
    arm(on, NULL, NULL, &w, 1);
    R.v = v;
    sift_verifier_free(v);
    disarm();
    long freed = n_frees - f0;
    out_add(&o, &freed, sizeof freed);
    world_free(&w, &o);
    return o;
}

static outcome sc_alloc_add(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 0);
    arm(on, w.c[0], NULL, &w, 0);
    o.status = sift_chain_add_top_k(w.c[0], 3, NULL);
    disarm();
    world_free(&w, &o);
    return o;
}

/* The first sample sizes the chain's buffers through its allocator. */
static outcome sc_alloc_first_sample(int on)
{
    outcome o = {0, 0};
    world w;
    world_new(&w, 0);
    arm(on, w.c[0], NULL, &w, 0);
    int32_t t = -1;
    o.status = sift_chain_sample(w.c[0], R.row, V, &t, NULL);
    disarm();
    out_add(&o, &t, sizeof t);
    world_free(&w, &o);
    return o;
}

typedef struct scenario {
    const char *name;
    scenario_fn run;
} scenario;

static const scenario SCENARIOS[] = {
    {"row hook in sift_chain_sample_slice", sc_hook_sample_slice},
    {"row hook in sift_chain_distribution_slice", sc_hook_distribution_slice},
    {"row hook in sift_chain_verify", sc_hook_verify},
    {"positional hook in sift_chain_verify", sc_hook_at_verify},
    {"row hook in sift_verifier_distributions", sc_hook_distributions},
    {"positional hook in sift_verifier_distributions", sc_hook_at_distributions},
    {"row hook in sift_chains_sample", sc_hook_batch},
    {"positional hook in sift_chains_sample", sc_hook_at_batch},
    {"custom apply in sift_chains_sample", sc_apply_batch},
    {"custom apply in sift_chain_sample", sc_apply_sample},
    {"custom apply in sift_chain_distribution", sc_apply_distribution},
    {"custom apply in sift_chain_survivors", sc_apply_survivors},
    {"custom apply in sift_chain_verify", sc_apply_verify},
    {"custom accept in sift_chain_accept", sc_accept},
    {"custom accept in sift_chain_accept_prompt", sc_accept_prompt},
    {"custom reset in sift_chain_reset", sc_reset},
    {"custom clone in sift_verifier_new", sc_clone_in_verifier_new},
    {"custom free and allocator free in sift_chain_free", sc_free},
    {"allocator free in sift_verifier_free", sc_verifier_free},
    {"allocator in sift_chain_add_top_k", sc_alloc_add},
    {"allocator in the first sift_chain_sample", sc_alloc_first_sample},
};

/* ------------------------------------------------------------------ */
/* Tests                                                               */
/* ------------------------------------------------------------------ */

static void setup(void)
{
    memset(&R, 0, sizeof R);
    tu_rng r = {99};
    tu_row(&r, R.row, V, TU_ROW_NORMAL);
    ck_assert_int_eq(sift_slicer_new(&R.slicer, V, NULL, NULL), SIFT_OK);
    const char *pieces[V];
    size_t lens[V];
    static char bytes[V][2];
    for (int i = 0; i < V; i++) {
        bytes[i][0] = (char)(i < 26 ? 'a' + i : '0' + (i - 26));
        bytes[i][1] = '\0';
        pieces[i] = bytes[i];
        lens[i] = 1;
    }
    ck_assert_int_eq(sift_vocab_new(&R.vocab, V, pieces, lens, NULL, NULL), SIFT_OK);
}

static void teardown(void)
{
    sift_slicer_free(R.slicer);
    sift_vocab_free(R.vocab);
}

static int is_ident(char ch)
{
    return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9');
}

START_TEST(test_every_function_of_sift_h_is_in_the_table)
{
    FILE *f = fopen(SIFT_SRCDIR "/include/sift.h", "r");
    ck_assert_ptr_nonnull(f);
    static char text[1 << 18];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    ck_assert_uint_lt(n, sizeof text - 1);
    text[n] = '\0';
    /* every "sift_[a-z0-9_]*(" as check_symbols.sh finds the exports */
    size_t declared = 0;
    for (const char *p = text; (p = strstr(p, "sift_")) != NULL;) {
        if (p > text && is_ident(p[-1])) {
            p++;
            continue;
        }
        const char *q = p + 5;
        while ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_')
            q++;
        if (*q == '(') {
            char name[128];
            size_t len = (size_t)(q - p);
            ck_assert_uint_lt(len, sizeof name);
            memcpy(name, p, len);
            name[len] = '\0';
            ck_assert_msg(find(name), "%s is declared in sift.h but not in the re-entry table",
                          name);
            declared++;
        }
        p = q;
    }
    ck_assert_uint_gt(declared, N(TABLE)); /* names repeat in the text */
    /* and every table name is declared */
    for (size_t i = 0; i < N(TABLE); i++) {
        char pat[128];
        snprintf(pat, sizeof pat, "%s(", TABLE[i].name);
        int found = 0;
        for (const char *p = text; !found && (p = strstr(p, pat)) != NULL; p++)
            found = p == text || !is_ident(p[-1]);
        ck_assert_msg(found, "%s is in the table but not declared in sift.h", TABLE[i].name);
    }
}
END_TEST

/* The table can fail: on a chain that is not busy, no refusing call
 * returns SIFT_E_STATE. */
START_TEST(test_every_refusing_call_runs_on_a_chain_that_is_not_busy)
{
    for (size_t i = 0; i < N(TABLE); i++) {
        const entry *e = &TABLE[i];
        if (e->kind != REFUSES)
            continue;
        world w;
        world_new(&w, 0);
        R.v = w.v;
        R.idle = w.idle;
        sift_status s = e->call(w.c[0]);
        ck_assert_msg(s != SIFT_E_STATE, "%s on an idle chain returned SIFT_E_STATE", e->name);
        outcome o = {0, 0};
        R.v = NULL;
        R.idle = NULL;
        world_free(&w, &o);
    }
}
END_TEST

START_TEST(test_calls_back_from_each_callback_are_refused_and_change_no_result)
{
    const scenario *sc = &SCENARIOS[_i];
    outcome want = sc->run(0);
    ck_assert_int_eq(R.runs, 0);
    outcome got = sc->run(1);
    ck_assert_msg(R.runs > 0, "%s: the callback never ran", sc->name);
    ck_assert_msg(R.fail[0] == '\0', "%s: %s", sc->name, R.fail);
    ck_assert_msg(got.status == want.status, "%s: the outer call returned %d, %d without the calls",
                  sc->name, (int)got.status, (int)want.status);
    ck_assert_msg(got.h == want.h,
                  "%s: the outer call's results differ from a run without the calls", sc->name);
}
END_TEST

Suite *tu_suite(void)
{
    Suite *s = suite_create("reentry");
    TCase *tc = tcase_create("table");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_every_function_of_sift_h_is_in_the_table);
    tcase_add_test(tc, test_every_refusing_call_runs_on_a_chain_that_is_not_busy);
    suite_add_tcase(s, tc);
    tc = tcase_create("callbacks");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_calls_back_from_each_callback_are_refused_and_change_no_result, 0,
                        (int)N(SCENARIOS));
    suite_add_tcase(s, tc);
    return s;
}

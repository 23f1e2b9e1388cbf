/*
 * step.h - what the row step (step.c) lends the slice step
 * (slice_step.c). Private to src/core/.
 */
#ifndef SIFT_CORE_STEP_H
#define SIFT_CORE_STEP_H

#include "../sift_internal.h"

/* Everything sample and distribution check before touching the row
 * (the buffers are sized by the caller). */
SIFT__HIDDEN sift_status sift__step_check(sift_chain *c, int32_t V, int need_selector,
                                          sift_error *err);
/* A fresh per-step context over the chain's RNG and workspace. */
SIFT__HIDDEN void sift__ctx_init(sift_chain *c, sift__ctx *ctx, int32_t V, sift_error *err);
/* 1 when stage i + 1 runs in a loop of stages [0, end) and takes the
 * weights stage i may leave (ops->takes_carry): a stage loop sets
 * ctx->carry_next from it around each apply. */
SIFT__HIDDEN int sift__carry_next(const sift_chain *c, size_t i, size_t end);
/* The row buffer (for the hook and for check-mode bans), sized once. */
SIFT__HIDDEN sift_status sift__row_buffer(sift_chain *c, int32_t V, sift_error *err);
/* Check mode, written once for the row and the slice step: if the
 * chain's checker refuses *token, bans what it refuses in (a copy of) the
 * row and samples again from the RNG state the first draw left. `row` is
 * the step's row, or NULL for a slice step (the row then comes from the
 * hook, checked against `sl`; SIFT_E_NEED_ROW without a hook).
 * *resampled = 1 when the token was refused. */
SIFT__HIDDEN sift_status sift__check_mode(sift_chain *c, const float *row, const sift_slice *sl,
                                          int32_t V, sift__rng *rng, int32_t *token, int *resampled,
                                          sift_error *err);
/* The row step's cost model: 1 when a step whose plan asks for the top
 * k of a V-token row takes the prefix walk, 0 when it goes straight to
 * the full pass (k = 0 is the whole row). */
SIFT__HIDDEN int sift__step_takes_prefix(int32_t V, size_t k);
/* sift_chain_sample's body (the chain is entered and busy). try_prefix
 * = 0 goes straight to the full pass (the slice fallback, which has run
 * the certificate walk already). */
SIFT__HIDDEN sift_status sift__sample_row(sift_chain *c, const float *logits, int32_t V,
                                          int32_t *token, int try_prefix, sift_error *err);
/* Calls the row hook into c->row and checks the row against the slice
 * (slice_step.c). */
SIFT__HIDDEN sift_status sift__slice_fetch_row(sift_chain *c, const sift_slice *sl,
                                               sift_error *err);
/* sift_chain_distribution's body. */
SIFT__HIDDEN sift_status sift__distribution_row(sift_chain *c, const float *logits, int32_t V,
                                                sift_token_prob *out, size_t capacity,
                                                size_t *n_out, sift_error *err);
/* The stages before the selector: [0, sift__selector_end). */
SIFT__HIDDEN size_t sift__selector_end(const sift_chain *c);
/* The selector's support and the probabilities, from the set the stages
 * before it left in `a`. */
SIFT__HIDDEN sift_status sift__finish_distribution(sift_chain *c, sift__ctx *ctx, sift__arr *a,
                                                   size_t end, sift_token_prob *out,
                                                   size_t capacity, size_t *n_out);
/* The selector's support of the set in `a`, sorted canonically into
 * ws.cand2, with its largest logit and total weight (the probabilities
 * sift__finish_distribution reports); a->c is scratch. */
SIFT__HIDDEN sift_status sift__distribution_sorted(sift_chain *c, sift__ctx *ctx, sift__arr *a,
                                                   size_t end, const sift_candidate **sorted,
                                                   size_t *n, float *m, double *Wd);
/* The row step's pieces, for the logprobs call (core/logprobs.c): the
 * workspace a row step reserves, the row loaded into ws.cand, and the
 * stages [0, end) run over it as every row step runs them. */
SIFT__HIDDEN size_t sift__row_ws_need(const sift_chain *c, int32_t V);
SIFT__HIDDEN sift_status sift__row_load(sift_chain *c, const float *logits, int32_t V, sift__arr *a,
                                        sift_error *err);
SIFT__HIDDEN sift_status sift__row_run_stages(sift_chain *c, sift__ctx *ctx, sift__arr *a,
                                              size_t end, const float *logits);
/* The slice step's pieces (slice_step.c): the slice checked and loaded
 * into ws.cand in canonical order with the bound on absent tokens, and
 * SIFT_E_NEED_ROW for a slice that cannot decide the step. */
SIFT__HIDDEN sift_status sift__slice_load(sift_chain *c, const sift_slice *sl, int need_selector,
                                          sift__arr *a, sift__bound *b, sift_error *err);
SIFT__HIDDEN sift_status sift__slice_need_row(sift_chain *c, const sift_slice *sl,
                                              const sift__ctx *ctx, sift_error *err);

#endif /* SIFT_CORE_STEP_H */

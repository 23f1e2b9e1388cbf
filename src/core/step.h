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
/* The row buffer (for the hook and for check-mode bans), sized once. */
SIFT__HIDDEN sift_status sift__row_buffer(sift_chain *c, int32_t V, sift_error *err);
/* Check mode: if the chain's check grammar rejects *token, ban every token
 * it rejects in (a copy of) the row and sample again, continuing from the
 * RNG state the first draw left. `row` may be c->row (banned in place). */
SIFT__HIDDEN sift_status sift__check_mode(sift_chain *c, const float *row, int32_t V,
                                          sift__rng *rng, int32_t *token, sift_error *err);
/* sift_chain_sample's body (the chain is entered and busy). */
SIFT__HIDDEN sift_status sift__sample_row(sift_chain *c, const float *logits, int32_t V,
                                          int32_t *token, sift_error *err);
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

#endif /* SIFT_CORE_STEP_H */

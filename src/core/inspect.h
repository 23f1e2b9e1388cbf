/*
 * inspect.h - internal: the survivors of a chain's first stages (inspect.c).
 */
#ifndef SIFT_CORE_INSPECT_H
#define SIFT_CORE_INSPECT_H

#include "sift_internal.h"

/* Runs stages [0, n_stages) of `chain` (none of them the selector) over
 * the whole row `row[0..V)` and writes the surviving tokens (logit >
 * -inf) in canonical order, at most `cap` of them; *n_out = the full
 * count. Nothing of the chain changes but its scratch buffers.
 * SIFT_E_ARG for NULL pointers, a bad V, n_stages past the chain or
 * covering the selector; SIFT_E_ROW_VALUE, SIFT_E_NO_CANDIDATE as
 * sift_chain_sample; SIFT_E_STATE inside a callback; SIFT_E_NOMEM. */
SIFT__HIDDEN sift_status sift__chain_run_prefix_stages(sift_chain *chain, const float *row,
                                                       int32_t V, size_t n_stages,
                                                       sift_candidate *out, size_t cap,
                                                       size_t *n_out, sift_error *err);

#endif

/* top_n_sigma.c - placeholder while the sampler is being written. */
#include "../sift_internal.h"
sift_status sift_chain_add_top_n_sigma(sift_chain *c, float n, sift_error *err) { (void)c; (void)n; return sift__fail(err, SIFT_E_ARG, "not implemented"); }

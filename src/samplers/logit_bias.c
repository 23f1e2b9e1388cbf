/* logit_bias.c - placeholder while the sampler is being written. */
#include "../sift_internal.h"
sift_status sift_chain_add_logit_bias(sift_chain *c, const sift_bias *b, size_t n, sift_error *err) { (void)c; (void)b; (void)n; return sift__fail(err, SIFT_E_ARG, "not implemented"); }

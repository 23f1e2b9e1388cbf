/* min_p.c - placeholder while the sampler is being written. */
#include "../sift_internal.h"
sift_status sift_chain_add_min_p(sift_chain *c, float p, int32_t k, sift_error *err) { (void)c; (void)p; (void)k; return sift__fail(err, SIFT_E_ARG, "not implemented"); }

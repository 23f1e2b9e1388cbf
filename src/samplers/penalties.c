/* penalties.c - placeholder while the sampler is being written. */
#include "../sift_internal.h"
sift_status sift_chain_add_penalties(sift_chain *c, int32_t n, float r, float f, float p, sift_error *err) { (void)c; (void)n; (void)r; (void)f; (void)p; return sift__fail(err, SIFT_E_ARG, "not implemented"); }

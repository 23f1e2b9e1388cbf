/* temp.c - placeholder while the sampler is being written. */
#include "../sift_internal.h"
sift_status sift_chain_add_temp(sift_chain *c, float t, sift_error *err) { (void)c; (void)t; return sift__fail(err, SIFT_E_ARG, "not implemented"); }
sift_status sift_chain_add_temp_ext(sift_chain *c, float t, float d, float e, sift_error *err) { (void)c; (void)t; (void)d; (void)e; return sift__fail(err, SIFT_E_ARG, "not implemented"); }

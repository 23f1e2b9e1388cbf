/* mirostat.c - placeholder while the sampler is being written. */
#include "../sift_internal.h"
sift_status sift_chain_add_mirostat(sift_chain *c, int32_t nv, float t, float e, int32_t m, sift_error *err) { (void)c; (void)nv; (void)t; (void)e; (void)m; return sift__fail(err, SIFT_E_ARG, "not implemented"); }
sift_status sift_chain_add_mirostat_v2(sift_chain *c, float t, float e, sift_error *err) { (void)c; (void)t; (void)e; return sift__fail(err, SIFT_E_ARG, "not implemented"); }

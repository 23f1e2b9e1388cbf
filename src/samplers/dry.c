/* dry.c - placeholder while the sampler is being written. */
#include "../sift_internal.h"
sift_status sift_chain_add_dry(sift_chain *c, const sift_dry_params *p, const sift_vocab *v, sift_error *err) { (void)c; (void)p; (void)v; return sift__fail(err, SIFT_E_ARG, "not implemented"); }
sift_status sift__chain_add_dry_tokens(sift_chain *c, float m, float b, int32_t a, int32_t n, const int32_t *const *s, const size_t *l, size_t k, sift_error *err) { (void)c; (void)m; (void)b; (void)a; (void)n; (void)s; (void)l; (void)k; return sift__fail(err, SIFT_E_ARG, "not implemented"); }

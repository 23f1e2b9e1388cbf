/* placeholder */
#include "oracle.h"
sift_status or_temp(or_chain *o, size_t si, or_arr *a) { (void)o; (void)si; (void)a; return SIFT_E_ARG; }
sift_status or_temp_ext(or_chain *o, size_t si, or_arr *a) { (void)o; (void)si; (void)a; return SIFT_E_ARG; }
sift_status or_top_n_sigma(or_chain *o, size_t si, or_arr *a) { (void)o; (void)si; (void)a; return SIFT_E_ARG; }
sift_status or_mirostat(or_chain *o, size_t si, or_arr *a, int32_t *t) { (void)o; (void)si; (void)a; (void)t; return SIFT_E_ARG; }
sift_status or_mirostat_v2(or_chain *o, size_t si, or_arr *a, int32_t *t) { (void)o; (void)si; (void)a; (void)t; return SIFT_E_ARG; }
void or_mirostat_accept(or_chain *o, size_t si, int32_t t) { (void)o; (void)si; (void)t; }

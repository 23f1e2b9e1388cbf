/* placeholder */
#include "oracle.h"
sift_status or_penalties(or_chain *o, size_t si, or_arr *a) { (void)o; (void)si; (void)a; return SIFT_E_ARG; }
sift_status or_dry(or_chain *o, size_t si, or_arr *a) { (void)o; (void)si; (void)a; return SIFT_E_ARG; }
sift_status or_logit_bias(or_chain *o, size_t si, or_arr *a) { (void)o; (void)si; (void)a; return SIFT_E_ARG; }

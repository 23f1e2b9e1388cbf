/* placeholder */
#include "oracle.h"
sift_status or_top_p(or_chain *o, size_t si, or_arr *a) { (void)o; (void)si; (void)a; return SIFT_E_ARG; }
sift_status or_min_p(or_chain *o, size_t si, or_arr *a) { (void)o; (void)si; (void)a; return SIFT_E_ARG; }
sift_status or_typical(or_chain *o, size_t si, or_arr *a) { (void)o; (void)si; (void)a; return SIFT_E_ARG; }
sift_status or_xtc(or_chain *o, size_t si, or_arr *a) { (void)o; (void)si; (void)a; return SIFT_E_ARG; }

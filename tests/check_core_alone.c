/*
 * check_core_alone.c - src/core/ linked on its own, with no other folder
 * of src/ and no library but libc and libm. The test is the link: if a
 * core file called into the samplers, the vocabulary, the grammar, the
 * schema or the config, this program would not build. It then makes one
 * chain, so that the objects are not only linked but run.
 */
#include <stdio.h>

#include "sift_internal.h"

int main(void)
{
    sift_chain_params p;
    sift_chain_params_init(&p);
    sift_chain *chain = NULL;
    sift_error err;
    if (sift_chain_new(&chain, &p, &err) != SIFT_OK) {
        fprintf(stderr, "check_core_alone: sift_chain_new: %s\n", err.message);
        return 1;
    }
    sift_chain_free(chain);
    return 0;
}

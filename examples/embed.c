/*
 * embed.c - the smallest complete use of sift: build a chain, then per
 * step sample a token from a row of logits and accept it; free the chain.
 * A real runtime takes the row from its model; here a fake one is made up.
 * Build: cc -std=c11 embed.c $(pkg-config --cflags --libs sift)
 */
#include <stdio.h>

#include <sift.h>

#define N_VOCAB 1000

int main(void)
{
    static float row[N_VOCAB];
    sift_chain_params params;
    sift_chain_params_init(&params);
    params.seed = 42;
    params.n_vocab = N_VOCAB;

    sift_chain *chain = NULL;
    sift_error err;
    if (sift_chain_new(&chain, &params, &err) != SIFT_OK ||
        sift_chain_add_penalties(chain, 64, 1.1f, 0.0f, 0.0f, &err) != SIFT_OK ||
        sift_chain_add_top_k(chain, 40, &err) != SIFT_OK ||
        sift_chain_add_top_p(chain, 0.95f, 1, &err) != SIFT_OK ||
        sift_chain_add_temp(chain, 0.8f, &err) != SIFT_OK ||
        sift_chain_add_dist(chain, &err) != SIFT_OK)
        goto fail;

    int32_t prev = 0;
    for (int step = 0; step < 16; step++) {
        /* The fake model: logits that fall with the id, plus a bump after
         * the previous token. -inf would ban a token. */
        for (int i = 0; i < N_VOCAB; i++)
            row[i] = -0.01f * (float)i + ((i + N_VOCAB - prev) % N_VOCAB < 3 ? 4.0f : 0.0f);
        int32_t token;
        if (sift_chain_sample(chain, row, N_VOCAB, &token, &err) != SIFT_OK ||
            sift_chain_accept(chain, token, &err) != SIFT_OK)
            goto fail;
        printf("%d ", (int)token);
        prev = token;
    }
    printf("\n");
    sift_chain_free(chain);
    return 0;

fail:
    fprintf(stderr, "embed: %s (%s)\n", err.message, sift_status_str(err.code));
    sift_chain_free(chain);
    return 1;
}

/*
 * gen_npy.c - writes synthetic logits as a .npy file for the CLI tests
 * (tests/check_cli_sample.sh), so the tests need neither python3 nor
 * NumPy. Usage: gen_npy OUT STEPS V SEED [VERSION]
 *
 * Rows are N(0, 2) noise (Box-Muller over a splitmix64 stream, fixed by
 * SEED) plus a few peaks, rounded to multiples of 1/8 so that rows carry
 * ties (the canonical order's id tie-break is exercised). STEPS = 0 writes
 * a 1-D array of shape (V,). VERSION is the .npy format version, 1..3.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
    return ((double)(next(s) >> 11) + 0.5) / 9007199254740992.0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: gen_npy OUT STEPS V SEED [VERSION]\n");
        return 2;
    }
    long steps = strtol(argv[2], NULL, 10), v = strtol(argv[3], NULL, 10);
    uint64_t seed = strtoull(argv[4], NULL, 10);
    int version = argc > 5 ? atoi(argv[5]) : 1;
    if (steps < 0 || v < 1 || version < 1 || version > 3)
        return 2;
    char dict[128];
    if (steps == 0)
        snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%ld,), }",
                 v);
    else
        snprintf(dict, sizeof dict, "{'shape': (%ld, %ld), 'fortran_order': False, 'descr': '<f4'}",
                 steps, v);
    size_t pre = version == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = (pre + dl + 1 + 63) / 64 * 64; /* NumPy pads to 64 bytes */
    size_t hlen = total - pre;
    FILE *f = fopen(argv[1], "wb");
    if (!f)
        return 2;
    unsigned char head[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)version, 0};
    head[8] = (unsigned char)(hlen & 0xff);
    head[9] = (unsigned char)(hlen >> 8);
    head[10] = head[11] = 0;
    fwrite(head, 1, pre, f);
    fputs(dict, f);
    for (size_t i = pre + dl; i + 1 < total; i++)
        fputc(' ', f);
    fputc('\n', f);
    uint64_t s = seed;
    long rows = steps ? steps : 1;
    for (long r = 0; r < rows; r++) {
        for (long i = 0; i < v; i++) {
            double g = sqrt(-2.0 * log(uniform(&s))) * cos(6.283185307179586 * uniform(&s));
            double x = 2.0 * g;
            if (next(&s) % 97 == 0)
                x += 6.0 + 4.0 * uniform(&s); /* a peak */
            float fv = (float)(round(x * 8.0) / 8.0);
            uint32_t w;
            memcpy(&w, &fv, 4);
            unsigned char b[4] = {(unsigned char)w, (unsigned char)(w >> 8),
                                  (unsigned char)(w >> 16), (unsigned char)(w >> 24)};
            fwrite(b, 1, 4, f);
        }
    }
    return fclose(f) == 0 ? 0 : 2;
}

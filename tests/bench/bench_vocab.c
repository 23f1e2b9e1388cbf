/*
 * bench_vocab.c - time to load vocabulary files (make bench-vocab): each
 * path on the command line: the first load (fresh memory: page faults
 * included) and the best of 10 (memory reused), wall and CPU time.
 * make bench-vocab passes tests/data/cl100k_base.tiktoken and
 * o200k_base.tiktoken, fetched into the build directory by
 * tests/bench/fetch_o200k.sh.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sift.h"

/* CPU time of the process (user + system), in ms: on a shared machine
 * the wall time also counts time spent waiting for a core. */
static double cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        size_t n = strlen(argv[i]);
        int gguf = n > 5 && strcmp(argv[i] + n - 5, ".gguf") == 0;
        double best = 1e300, cpu_best = 1e300, first = 0, cpu_first = 0;
        int32_t size = 0;
        for (int r = 0; r < 10; r++) {
            double c0 = cpu_ms();
            sift_vocab *v;
            sift_error err;
            double t0 = now_ms();
            sift_status st = gguf ? sift_vocab_load_gguf(&v, argv[i], NULL, &err)
                                  : sift_vocab_load_tiktoken(&v, argv[i], NULL, &err);
            double dt = now_ms() - t0, dc = cpu_ms() - c0;
            if (st) {
                fprintf(stderr, "bench_vocab: %s\n", err.message);
                return 1;
            }
            size = sift_vocab_size(v);
            sift_vocab_free(v);
            if (r == 0)
                first = dt, cpu_first = dc;
            if (dt < best)
                best = dt;
            if (dc < cpu_best)
                cpu_best = dc;
        }
        printf("%s: %d tokens\n  first load %8.2f ms wall %8.2f ms cpu\n"
               "  best of 10 %8.2f ms wall %8.2f ms cpu\n",
               argv[i], (int)size, first, cpu_first, best, cpu_best);
    }
    return 0;
}

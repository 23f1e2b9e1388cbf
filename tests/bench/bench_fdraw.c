/*
 * bench_fdraw.c - what a float-certified draw could save (docs/analyzer.md,
 * "Float-certified draw"): the measurements that sized the path before
 * core/fdraw.c built it (bench.c times the built path; this one times
 * its own unproven float exponential, below).
 *
 * On rows of V = 151,936 shaped as in bench.c (peaked: N(0, 2) plus 50 ids
 * raised by U(5, 15); bf16: the same rounded to bfloat16; flat: U[-1, 1]),
 * eight rows per shape, cycled, it times per round, interleaved:
 *   - the floor: the library's vector max over the float row (the limit
 *     bench.c relates every case to);
 *   - the exact weights kernel (sift__weights at the dispatched level) on
 *     the row's candidates, as dist and top_p run it today;
 *   - a float32 exponential of l - m with double lane sums over the same
 *     candidates (AVX-512F where the machine and SIFT_SIMD allow it, else
 *     a scalar loop): the pass a float-certified draw would run instead.
 * It prints the medians over rounds (µs, and the median of each round's
 * time over its floor's), the float exponential's largest error measured
 * against the exact weights (the kappa of Lemma 2, observed, not proven),
 * and the predicted fallback rate sum_j min(4 Delta, w_j) / W with
 * Delta = kappa W + n for kappa = 2^-20, 2^-22, 2^-24 and 2^-26, from the
 * exact weights. The float exponential here has no proven bound: it only
 * measures cost and sizes the rate; it decides nothing.
 *
 * Usage: bench_fdraw [ROUNDS]   (make bench-fdraw; default 15 rounds)
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"
#include "core/simd.h"
#include "sift_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FD_AVX512 1
#endif

#define FD_V 151936
#define FD_NROWS 8
#define FD_MAX_ROUNDS 101

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double unif(void)
{
    return (double)(next() >> 11) * (1.0 / 9007199254740992.0);
}

static double gauss(void)
{
    double u = unif() + 1e-300, v = unif();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static float to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void make_row(int shape, float *row)
{
    for (size_t i = 0; i < FD_V; i++)
        row[i] = shape == 2 ? (float)(2.0 * unif() - 1.0) : (float)(2.0 * gauss());
    if (shape == 2)
        return;
    for (int h = 0; h < 50; h++)
        row[next() % FD_V] += (float)(5.0 + 10.0 * unif());
    if (shape == 1)
        for (size_t i = 0; i < FD_V; i++)
            row[i] = to_bf16(row[i]);
}

static double cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* The float exponential: k = round(x log2 e), r = x - k ln2 (ln2 in two
 * floats, the first with 16 significant bits), a degree-6 Taylor
 * polynomial, the scaling by 2^k. Measured, not proven. */
static float fexp_scalar(float x)
{
    if (x < -87.0f)
        return 0.0f;
    float k = nearbyintf(x * 1.44269504f);
    float r = (x - k * 0.693145751953125f) - k * 1.428606765330187e-06f;
    float p = 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return ldexpf(p, (int)k);
}

static double fsum_scalar(const sift_candidate *c, size_t n, float m, float *e)
{
    double s[16] = {0};
    for (size_t i = 0; i < n; i++) {
        e[i] = fexp_scalar(c[i].logit - m);
        s[i % 16] += e[i];
    }
    double t = 0;
    for (int j = 0; j < 16; j++)
        t += s[j];
    return t;
}

#ifdef FD_AVX512
__attribute__((target("avx512f,avx512dq,fma"))) static double
fsum_avx512(const sift_candidate *c, size_t n, float m, float *e)
{
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512 mv = _mm512_set1_ps(m), lo = _mm512_set1_ps(-87.0f);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_loadu_ps((const float *)(const void *)(c + i));
        __m512 b = _mm512_loadu_ps((const float *)(const void *)(c + i + 8));
        __m512 x = _mm512_max_ps(_mm512_sub_ps(_mm512_permutex2var_ps(a, odd, b), mv), lo);
        __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), 0);
        __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), x);
        r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.428606765330187e-06f), r);
        __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 720), r, _mm512_set1_ps(1.0f / 120));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
        __m512 v = _mm512_scalef_ps(p, k);
        _mm512_storeu_ps(e + i, v);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        s1 = _mm512_add_pd(
            s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) + fsum_scalar(c + i, n - i, m, e + i);
}
#endif

static int use_avx512(void)
{
#ifdef FD_AVX512
    return sift__simd()->level >= SIFT__SIMD_AVX512 && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

static double fsum(const sift_candidate *c, size_t n, float m, float *e)
{
#ifdef FD_AVX512
    if (use_avx512())
        return fsum_avx512(c, n, m, e);
#endif
    return fsum_scalar(c, n, m, e);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_d);
    return x[n / 2];
}

static volatile double sink;

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    if (rounds < 1 || rounds > FD_MAX_ROUNDS) {
        fprintf(stderr, "bench_fdraw: ROUNDS must be 1..%d\n", FD_MAX_ROUNDS);
        return 2;
    }
    static const char *const shapes[] = {"peaked", "bf16", "flat"};
    float *rows[FD_NROWS];
    sift_candidate *cands[FD_NROWS];
    float ms[FD_NROWS];
    uint64_t *w = malloc(FD_V * sizeof *w);
    float *e = malloc(FD_V * sizeof *e);
    for (int r = 0; r < FD_NROWS; r++) {
        rows[r] = malloc(FD_V * sizeof *rows[r]);
        cands[r] = malloc(FD_V * sizeof *cands[r]);
        if (!rows[r] || !cands[r])
            return 1;
    }
    if (!w || !e)
        return 1;
    const sift__simd_ops *ops = sift__simd();
    printf("# V = %d, %d rows per shape, %d rounds; level %s, float pass %s\n", FD_V, FD_NROWS,
           rounds, ops->name, use_avx512() ? "avx512" : "scalar");
    printf("%-7s %9s %9s %7s %9s %7s %11s  %s\n", "rows", "floor_us", "exact_us", "x_floor",
           "float_us", "x_floor", "kappa_obs", "fallback rate at kappa 2^-20 / -22 / -24 / -26");
    for (int sh = 0; sh < 3; sh++) {
        for (int r = 0; r < FD_NROWS; r++) {
            make_row(sh, rows[r]);
            for (size_t i = 0; i < FD_V; i++) {
                cands[r][i].id = (int32_t)i;
                cands[r][i].logit = rows[r][i];
            }
            ms[r] = ops->max_f32(rows[r], FD_V);
        }
        double tf[FD_MAX_ROUNDS], te[FD_MAX_ROUNDS], tx[FD_MAX_ROUNDS];
        double rf[FD_MAX_ROUNDS], rx[FD_MAX_ROUNDS];
        for (int k = 0; k < rounds; k++) {
            double t0 = cpu_us();
            for (int r = 0; r < FD_NROWS; r++)
                sink = ops->max_f32(rows[r], FD_V);
            double t1 = cpu_us();
            for (int r = 0; r < FD_NROWS; r++)
                sink = (double)sift__weights(cands[r], FD_V, ms[r], w).lo;
            double t2 = cpu_us();
            for (int r = 0; r < FD_NROWS; r++)
                sink = fsum(cands[r], FD_V, ms[r], e);
            double t3 = cpu_us();
            tf[k] = (t1 - t0) / FD_NROWS;
            te[k] = (t2 - t1) / FD_NROWS;
            tx[k] = (t3 - t2) / FD_NROWS;
            rf[k] = te[k] / tf[k];
            rx[k] = tx[k] / tf[k];
        }
        /* kappa observed and the predicted fallback rates, over the rows */
        double kobs = 0, rate[4] = {0};
        for (int r = 0; r < FD_NROWS; r++) {
            sift__u128 Wi = sift__weights(cands[r], FD_V, ms[r], w);
            double W = ldexp((double)Wi.hi, 64) + (double)Wi.lo;
            (void)fsum(cands[r], FD_V, ms[r], e);
            for (size_t i = 0; i < FD_V; i++) {
                double v = ldexp((double)e[i], 62), d = fabs(v - (double)w[i]) - 1.0;
                if (v > 0 && d > 0 && d / v > kobs)
                    kobs = d / v;
            }
            for (int j = 0; j < 4; j++) {
                double D = ldexp(W, -20 - 2 * j) + FD_V, s = 0;
                for (size_t i = 0; i < FD_V; i++)
                    s += fmin(4.0 * D, (double)w[i]);
                rate[j] += s / W / FD_NROWS;
            }
        }
        printf("%-7s %9.2f %9.2f %7.2f %9.2f %7.2f %11.3g  %.2f%% / %.2f%% / %.2f%% / %.2f%%\n",
               shapes[sh], median(tf, rounds), median(te, rounds), median(rf, rounds),
               median(tx, rounds), median(rx, rounds), kobs, 100 * rate[0], 100 * rate[1],
               100 * rate[2], 100 * rate[3]);
    }
    for (int r = 0; r < FD_NROWS; r++) {
        free(rows[r]);
        free(cands[r]);
    }
    free(w);
    free(e);
    return 0;
}

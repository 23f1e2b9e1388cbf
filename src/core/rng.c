/*
 * rng.c - the chain's random number generator.
 *
 * xoshiro256** (Blackman and Vigna, 2018), seeded by running splitmix64
 * on the 64-bit seed four times. Both are specified in docs/samplers.md
 * ("Random numbers") so that any implementation reproduces sift's draws.
 * Integer arithmetic only: identical on every platform.
 */
#include "../sift_internal.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sift__rng_seed(sift__rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t sift__rng_next(sift__rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float sift__rng_float(sift__rng *r)
{
    return (float)(sift__rng_next(r) >> 40) * 0x1p-24f;
}

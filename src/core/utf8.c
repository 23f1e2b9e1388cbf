/*
 * utf8.c - the one UTF-8 decoder and validator of src/.
 *
 * What it owns: well-formedness as Unicode defines it (Table 3-7 of the
 * standard, RFC 3629): no overlong forms, no surrogates (U+D800..DFFF),
 * nothing above U+10FFFF, no truncated sequence, no stray continuation
 * byte. The config reader, the GBNF parser and the GGUF piece decoder all
 * ask here, so a byte string one of them accepts every other accepts too.
 * (The grammar matcher's byte automaton walks the same table one byte at
 * a time; it is an automaton, not a second validator of whole strings.)
 * It also owns the one reader of a hexadecimal digit, which every escape
 * decoder in src/ uses.
 */
#include "../sift_internal.h"

size_t sift__utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v;
    unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
        if (c == 0xE0)
            lo = 0xA0; /* no overlong three-byte form */
        if (c == 0xED)
            hi = 0x9F; /* no surrogate */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
        if (c == 0xF0)
            lo = 0x90; /* no overlong four-byte form */
        if (c == 0xF4)
            hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        return 0; /* a continuation byte, C0, C1 or F5..FF */
    }
    if (n < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        unsigned b = s[k];
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF))
            return 0;
        v = v << 6 | (b & 0x3F);
    }
    *cp = v;
    return len;
}

int sift__utf8_valid(const unsigned char *s, size_t n, size_t *bad)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t k = sift__utf8_decode(s + i, n - i, &cp);
        if (k == 0) {
            if (bad)
                *bad = i;
            return 0;
        }
        i += k;
    }
    if (bad)
        *bad = n;
    return 1;
}

int sift__hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

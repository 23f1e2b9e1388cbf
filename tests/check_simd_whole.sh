#!/bin/sh
# check_simd_whole.sh - the whole-row step's kernels (core/kernels.c: the
# row load and top_n_sigma's lane sums; the mass prefix's vector count in
# core/mass.c) under each SIFT_SIMD cap: the cases of check_core,
# check_select (the mass prefix against a sorted walk on rows of up to
# 300,000 candidates), check_trunc and check_temp (the oracle comparisons of
# the whole-distribution samplers over whole rows, check_carry's weights
# carried from top_p, xtc and typical to dist) and check_tailrow (the
# row step's tail route, its kernel at the capped level) that go through
# the library's dispatch and compare with the oracle - those tagged "simd"
# (CK_INCLUDE_TAGS) - again with the dispatch capped at scalar, sse2 and
# avx2, so the scalar twins and each vector level below the machine's best
# (which the plain runs use: AVX-512 where present) judge bitwise against
# the oracle. The weights kernel follows the cap too (scalar: the
# definition), and below AVX2 the mass prefix takes its full histogram.
# The cases that compare every level directly (check_core's row kernels)
# or test no row run once, in the plain runs. SIFT_SIMD_CAPS (default
# "scalar sse2 avx2") names the caps; a suite that runs no case fails.
fail=0
caps=${SIFT_SIMD_CAPS:-scalar sse2 avx2}
for bin in ./tests/check_core ./tests/check_select ./tests/check_trunc ./tests/check_temp ./tests/check_tailrow ./tests/check_carry; do
    [ -x "$bin" ] || { echo "check_simd_whole: $bin not built" >&2; exit 99; }
    for level in $caps; do
        out=$(SIFT_SIMD=$level CK_INCLUDE_TAGS=simd "$bin" 2>&1)
        st=$?
        line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
        n=$(printf '%s\n' "$line" | sed -n -E 's/.*Checks: ([0-9]+).*/\1/p')
        if [ "$st" -eq 0 ] && [ -n "$n" ] && [ "$n" -gt 0 ]; then
            echo "ok: SIFT_SIMD=$level $bin ($n simd checks)"
        else
            echo "FAIL: $bin under SIFT_SIMD=$level (status $st, ${n:-no} simd checks)"
            printf '%s\n' "$out" | tail -n 20
            fail=1
        fi
    done
done
exit $fail

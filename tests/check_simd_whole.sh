#!/bin/sh
# check_simd_whole.sh - the whole-row step's kernels (core/kernels.c: the
# row load and top_n_sigma's lane sums; the mass prefix's vector count in
# core/select.c) under each SIFT_SIMD cap: check_core (which also compares
# every level with the scalar twin directly), check_select (the mass
# prefix against a sorted walk on rows of up to 300,000 candidates),
# check_trunc and check_temp (the oracle comparisons of the
# whole-distribution samplers over whole rows) and check_tailrow (the
# row step's tail route, its kernel at the capped level) again with the library's dispatch capped at scalar, sse2 and avx2,
# so the scalar twins and each vector level below the machine's best (which the plain runs use: AVX-512 where
# present) judge bitwise against the oracle. The weights kernel follows the cap too (scalar: the definition), and
# below AVX-512 the mass prefix takes its full histogram.
fail=0
for bin in ./tests/check_core ./tests/check_select ./tests/check_trunc ./tests/check_temp ./tests/check_tailrow; do
    [ -x "$bin" ] || { echo "check_simd_whole: $bin not built" >&2; exit 99; }
    for level in scalar sse2 avx2; do
        if SIFT_SIMD=$level "$bin" >/dev/null 2>&1; then
            echo "ok: SIFT_SIMD=$level $bin"
        else
            echo "FAIL: $bin under SIFT_SIMD=$level"
            SIFT_SIMD=$level "$bin" 2>&1 | tail -5
            fail=1
        fi
    done
done
exit $fail

#!/bin/sh
# check_simd_env.sh - SIFT_SIMD caps the run-time dispatch: check_topk
# again under each cap, so the library's own choice (sift__simd(), which
# the slicer and the whole-row path use) runs as the scalar twin and as
# each vector level, and its dispatch test checks that the cap was taken.
# check_topk itself compares every level the machine has, whatever the cap.
bin=./tests/check_topk
[ -x "$bin" ] || { echo "check_simd_env: $bin not built" >&2; exit 99; }
fail=0
for level in scalar sse2 avx2 avx512; do
    if SIFT_SIMD=$level "$bin" >/dev/null 2>&1; then
        echo "ok: SIFT_SIMD=$level"
    else
        echo "FAIL: check_topk under SIFT_SIMD=$level"
        SIFT_SIMD=$level "$bin" 2>&1 | tail -5
        fail=1
    fi
done
exit $fail

#!/bin/sh
# check_simd_env.sh - SIFT_SIMD caps the run-time dispatch: check_topk's
# cases that go through the library's own choice (sift__simd(), which the
# slicer and the whole-row path use), tagged "simd" (CK_INCLUDE_TAGS),
# again under each cap, so the slicer runs as the scalar twin and as each
# vector level, and its dispatch test checks that the cap was taken. The
# rest of check_topk compares every level the machine has, whatever the
# cap, and runs once, in the plain run. SIFT_SIMD_CAPS (default "scalar
# sse2 avx2 avx512") names the caps; a run of no case fails.
bin=./tests/check_topk
[ -x "$bin" ] || { echo "check_simd_env: $bin not built" >&2; exit 99; }
fail=0
for level in ${SIFT_SIMD_CAPS:-scalar sse2 avx2 avx512}; do
    out=$(SIFT_SIMD=$level CK_INCLUDE_TAGS=simd "$bin" 2>&1)
    st=$?
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
    n=$(printf '%s\n' "$line" | sed -n -E 's/.*Checks: ([0-9]+).*/\1/p')
    if [ "$st" -eq 0 ] && [ -n "$n" ] && [ "$n" -gt 0 ]; then
        echo "ok: SIFT_SIMD=$level ($n simd checks)"
    else
        echo "FAIL: check_topk under SIFT_SIMD=$level (status $st, ${n:-no} simd checks)"
        printf '%s\n' "$out" | tail -n 20
        fail=1
    fi
done
exit $fail

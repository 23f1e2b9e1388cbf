#!/bin/sh
# bench_slice_step.sh - the slice step of the production chain (issue 11):
# median time and callgrind instructions per step, at V = 32,768 and
# 1,048,576 (`make bench-slice`; not a test).
#
# Usage: bench_slice_step.sh BENCH_SLICE [STEPS]
#
# The time comes from bench_slice --step-only (noisy on a loaded machine).
# The instructions come from a second run under callgrind that collects
# only inside sift_chain_sample_slice and sift_chain_accept
# (--toggle-collect), so building the rows and slices is not counted:
# the total over the run divided by its steps, the 64 warm-up steps
# included. Without valgrind the instruction column says so.
set -eu
bench=$1
steps=${2:-2000}
"$bench" --step-only --steps "$steps"
if ! command -v valgrind >/dev/null 2>&1; then
    echo "(valgrind not found: no instruction counts)"
    exit 0
fi
tmp=${TMPDIR:-/tmp}/bench_slice_step.$$
trap 'rm -f "$tmp".*' EXIT INT TERM
for v in 32768 1048576; do
    valgrind --tool=callgrind --callgrind-out-file="$tmp.out" \
        --toggle-collect=sift_chain_sample_slice --toggle-collect=sift_chain_accept \
        "$bench" --step-only --no-clock --v "$v" --steps "$steps" >"$tmp.txt" 2>"$tmp.err"
    ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$tmp.out")
    total=$((steps + 64))
    echo "slice step instructions (callgrind) V = $v: $((ir / total)) per step" \
        "($ir over $total steps)"
done

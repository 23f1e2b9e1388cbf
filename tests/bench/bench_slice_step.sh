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
# and the first call's one-time sizing (the zeroed id set of V entries)
# included; and "steady", the instructions that STEPS more steps add (a
# second run of 2 * STEPS steps), which leaves the one-time work out.
# Without valgrind the instruction column says so.
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
ir_of() { # V STEPS: the instructions collected over a run
    valgrind --tool=callgrind --callgrind-out-file="$tmp.out" \
        --toggle-collect=sift_chain_sample_slice --toggle-collect=sift_chain_accept \
        "$bench" --step-only --no-clock --v "$1" --steps "$2" >"$tmp.txt" 2>"$tmp.err"
    sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$tmp.out"
}
for v in 32768 1048576; do
    ir=$(ir_of "$v" "$steps")
    ir2=$(ir_of "$v" $((2 * steps)))
    total=$((steps + 64))
    echo "slice step instructions (callgrind) V = $v: $((ir / total)) per step" \
        "($ir over $total steps); steady $(((ir2 - ir) / steps)) per step" \
        "(the $steps steps a run of $((2 * steps)) adds)"
done

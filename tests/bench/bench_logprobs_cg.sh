#!/bin/sh
# bench_logprobs_cg.sh - callgrind instructions per step of bench_logprobs:
# runs each case alone (--only CASE --reps N) under callgrind with
# collection on only inside its op_ function, and divides by N.
# Usage: bench_logprobs_cg.sh ./tests/bench/bench_logprobs [REPS]
bin=$1
reps=${2:-16}
command -v valgrind >/dev/null 2>&1 || { echo "bench_logprobs_cg: valgrind not installed, skipped"; exit 0; }
out=${TMPDIR:-/tmp}/bench_logprobs_cg.$$
trap 'rm -f "$out" "$out.log"' EXIT
[ -x "$(dirname "$bin")/.libs/$(basename "$bin")" ] && bin="$(dirname "$bin")/.libs/$(basename "$bin")"
echo "callgrind instructions per step ($reps steps per case)"
for v in 151936 248320; do
    for k in topk topp dist; do
        for m in sample:op_sample base:op_base proc:op_logprobs raw:op_logprobs both:op_logprobs; do
            name=$k/$v/${m%%:*}
            fn=${m#*:}
            rm -f "$out"
            valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$fn" \
                "$bin" --only "$name" --reps "$reps" >"$out.log" 2>&1 || { cat "$out.log"; exit 1; }
            ir=$(callgrind_annotate "$out" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
            printf '  %-22s %12s per step\n' "$name" "$((ir / reps))"
        done
    done
done

#!/bin/sh
# bench_verify.sh BINARY [REPS] - bench_verify's medians, then (with
# valgrind) the instructions of each measured call, counted by callgrind
# with collection on inside that call only, divided by the repetitions.
set -eu
bin=$1
reps=${2:-200}
"$bin" --reps "$reps"
command -v valgrind >/dev/null 2>&1 || { echo "bench_verify: no valgrind, no instruction counts"; exit 0; }
creps=20
tmp=${TMPDIR:-/tmp}/bench_verify.$$
trap 'rm -f "$tmp".*' EXIT
printf '%-12s %6s %14s\n' name drafts instructions
for n in 3 49; do
    for m in plan:bench_plan plan_clone:bench_plan_clone verify:bench_verify_call loop:bench_loop; do
        name=${m%%:*}
        fn=${m#*:}
        valgrind --tool=callgrind --toggle-collect="$fn" --toggle-collect="$fn.*" --callgrind-out-file="$tmp.out" \
            "$bin" --reps "$creps" --only "$name" --n "$n" >/dev/null 2>"$tmp.err" ||
            { cat "$tmp.err"; exit 1; }
        total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$tmp.out")
        printf '%-12s %6d %14d\n' "$name" "$n" $((total / creps))
    done
done

#!/bin/sh
# bench_batch.sh BINARY [REPS] - bench_batch's medians, then (with
# valgrind) the instructions per slot of each side, counted by callgrind
# with collection on inside bench_batch_call or bench_loop_call only,
# divided by the rounds and the slots.
set -eu
bin=$1
if [ $# -ge 2 ]; then "$bin" --reps "$2"; else "$bin"; fi
command -v valgrind >/dev/null 2>&1 || { echo "bench_batch: no valgrind, no instruction counts"; exit 0; }
tmp=${TMPDIR:-/tmp}/bench_batch.$$
trap 'rm -f "$tmp".*' EXIT
echo "# callgrind: instructions per slot (sample + accept), the same calls as above"
printf '%-7s %5s %14s %14s %12s\n' mode slots batch loop "batch-loop"
for mode in slices rows; do
    for n in 1 8 64 256; do
        case "$mode" in
        slices) creps=5 ;;
        *) creps=$((n >= 64 ? 1 : 3)) ;;
        esac
        set --
        for side in batch loop; do
            valgrind --tool=callgrind --toggle-collect="bench_${side}_call" \
                --toggle-collect="bench_${side}_call.*" --callgrind-out-file="$tmp.out" \
                "$bin" --reps "$creps" --mode "$mode" --n "$n" --only "$side" >/dev/null 2>"$tmp.err" ||
                { cat "$tmp.err"; exit 1; }
            total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$tmp.out")
            set -- "$@" $((total / (creps * n)))
        done
        printf '%-7s %5d %14d %14d %12d\n' "$mode" "$n" "$1" "$2" $(($1 - $2))
    done
done

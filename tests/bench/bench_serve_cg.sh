#!/bin/sh
# bench_serve_cg.sh - callgrind instructions per operation of bench_serve:
# runs each case alone (--only CASE --reps N) under callgrind with
# collection on only inside the case's op_ function, and divides the
# instructions by the operations bench_serve reports.
# Usage: bench_serve_cg.sh ./tests/bench/bench_serve [REPS [VOCAB ARGS]]
# where VOCAB ARGS are bench_serve's (--hf path/to/tokenizer.json).
bin=$1
reps=${2:-200}
shift
[ $# -gt 0 ] && shift
out=${TMPDIR:-/tmp}/bench_serve_cg.$$
trap 'rm -f "$out" "$out.log"' EXIT
[ -x "$(dirname "$bin")/.libs/$(basename "$bin")" ] && bin="$(dirname "$bin")/.libs/$(basename "$bin")"
for c in rollback1:op_rollback rollback16:op_rollback validate16:op_validate \
    clone_accept16:op_clone_accept accept_rb16:op_accept_rb draft5:op_draft \
    clone_fills5:op_clone_fills seq_fills5:op_seq_fills draft16:op_draft \
    clone_fills16:op_clone_fills seq_fills16:op_seq_fills forced:op_forced \
    forced_ids:op_forced; do
    name=${c%%:*}
    fn=${c#*:}
    rm -f "$out"
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$fn" \
        "$bin" "$@" --only "$name" --reps "$reps" >"$out.log" 2>&1 || { cat "$out.log"; exit 1; }
    n=$(sed -n "s/^  $name  *reps  *\([0-9]*\).*/\1/p" "$out.log")
    ir=$(callgrind_annotate "$out" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
    printf '  %-15s %12s instructions over %5s ops: %10s per op\n' "$name" "$ir" "$n" \
        "$((ir / n))"
done

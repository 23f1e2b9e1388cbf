#!/bin/sh
# bench_mask_cg.sh - callgrind instructions per mask call of bench_mask:
# runs it once (--quick and the given arguments) under callgrind with
# collection on only inside sift_grammar_fill_bitmask (or sift_grammar_ban
# with --ban), and divides the instructions by the calls.
# Usage: bench_mask_cg.sh ./tests/bench/bench_mask [ARGS...]
bin=$1
shift
fn=sift_grammar_fill_bitmask
for a in "$@"; do
    [ "$a" = --ban ] && fn=sift_grammar_ban
done
out=${TMPDIR:-/tmp}/bench_mask_cg.$$
trap 'rm -f "$out" "$out.log"' EXIT
# libtool wrapper scripts: run the real binary
[ -x "$(dirname "$bin")/.libs/$(basename "$bin")" ] && bin="$(dirname "$bin")/.libs/$(basename "$bin")"
valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$fn" \
    "$bin" --quick "$@" >"$out.log" 2>&1 || { cat "$out.log"; exit 1; }
steps=$(sed -n 's/^  all  *steps *\([0-9]*\).*/\1/p' "$out.log")
ir=$(callgrind_annotate "$out" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
echo "$fn: $ir instructions over $steps calls: $((ir / steps)) per call (callgrind)"

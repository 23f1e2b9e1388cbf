#!/bin/sh
# examples_check.sh - every examples/*.yaml runs with the shipped CLI, so
# the examples cannot rot: `sift check --werror` (no errors, no warnings),
# `sift plan`, `sift sample` over synthetic logits as wide as the
# example's vocab_size (1000 without one) and `sift inspect` of one row
# all exit 0. The .npy rows come from tests/gen_npy (built by make check).
# Absolute, so that paths stay right after a cd and inside configs written
# to a temporary directory (make distcheck passes a relative srcdir).
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
sift=./sift
gen=tests/gen_npy
status=0
n=0
tmp=${TMPDIR:-/tmp}/sift_examples.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
run() { # run DESCRIPTION CMD...
    desc=$1
    shift
    timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" != 0 ]; then
        echo "FAIL $desc: exit status $rc: $(cat "$tmp/err")"
        status=1
    fi
}
for f in "$srcdir"/examples/*.yaml; do
    n=$((n + 1))
    name=$(basename "$f")
    v=$(sed -n 's/^vocab_size: *\([0-9][0-9]*\).*$/\1/p' "$f")
    [ -n "$v" ] || v=1000
    $gen "$tmp/rows.npy" 6 "$v" "$n" || exit 99
    $gen "$tmp/row.npy" 0 "$v" "$n" || exit 99
    run "check $name" $sift check --werror "$f"
    run "plan $name" $sift plan "$f"
    grep -q '^guarantee: ' "$tmp/out" || { echo "FAIL plan $name: $(cat "$tmp/out")"; status=1; }
    run "sample $name" $sift sample "$f" --logits "$tmp/rows.npy"
    [ "$(wc -l <"$tmp/out")" -eq 6 ] || { echo "FAIL sample $name: $(cat "$tmp/out")"; status=1; }
    run "sample $name --slice 64" $sift sample "$f" --logits "$tmp/rows.npy" --slice 64
    run "inspect $name" $sift inspect "$f" --logits "$tmp/row.npy" --top 3
    grep -q "^input: $v tokens" "$tmp/out" || { echo "FAIL inspect $name: $(head -3 "$tmp/out")"; status=1; }
done
[ "$n" -ge 5 ] || { echo "examples_check: found only $n examples"; status=1; }
echo "examples_check: $n examples through check, plan, sample and inspect"
exit $status

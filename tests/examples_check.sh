#!/bin/sh
# examples_check.sh - every examples/*.yaml is a valid config with no
# warnings (`sift check --werror`), so the examples cannot rot.
# Absolute, so that paths stay right after a cd and inside configs written
# to a temporary directory (make distcheck passes a relative srcdir).
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
status=0
n=0
for f in "$srcdir"/examples/*.yaml; do
    n=$((n + 1))
    ./sift check --werror "$f" || status=1
done
[ "$n" -ge 5 ] || { echo "examples_check: found only $n examples"; status=1; }
exit $status

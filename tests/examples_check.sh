#!/bin/sh
# examples_check.sh - every examples/*.yaml is a valid config with no
# warnings (`sift check --werror`), so the examples cannot rot.
srcdir=${srcdir:-.}
status=0
n=0
for f in "$srcdir"/examples/*.yaml; do
    n=$((n + 1))
    ./sift check --werror "$f" || status=1
done
[ "$n" -ge 5 ] || { echo "examples_check: found only $n examples"; status=1; }
exit $status

#!/bin/sh
# config_golden.sh - every tests/data/config-invalid/<case>.yaml makes
# `sift check -q` print exactly <case>.err and exit 1; every
# tests/data/config-valid/<case>.yaml exits 0 and prints exactly
# <case>.err (its warnings) or nothing. Runs in each case's directory so the
# file names in the diagnostics are the bare case names.
# Absolute, so that paths stay right after a cd and inside configs written
# to a temporary directory (make distcheck passes a relative srcdir).
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
sift=$(pwd)/sift
status=0
n=0
for kind in invalid valid; do
    dir=$srcdir/tests/data/config-$kind
    want_rc=1
    [ "$kind" = valid ] && want_rc=0
    for yaml in "$dir"/*.yaml; do
        case=$(basename "$yaml" .yaml)
        n=$((n + 1))
        out=$(cd "$dir" && "$sift" check -q "$case.yaml")
        rc=$?
        if [ -f "$dir/$case.err" ]; then
            want=$(cat "$dir/$case.err")
        else
            want=
        fi
        if [ "$rc" != "$want_rc" ]; then
            echo "FAIL config-$kind/$case: exit status $rc, expected $want_rc"
            status=1
        fi
        if [ "$out" != "$want" ]; then
            echo "FAIL config-$kind/$case: diagnostics differ"
            echo "--- expected"
            echo "$want"
            echo "--- got"
            echo "$out"
            status=1
        fi
    done
done
echo "config_golden: $n cases"
exit $status

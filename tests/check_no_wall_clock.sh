#!/bin/sh
# check_no_wall_clock.sh - no test under tests/ bounds anything by the
# clock (the benchmarks in tests/bench/ may time; tests count work instead,
# STYLE.md), so a loaded machine cannot fail a test and a slow path cannot
# hide behind a fast one.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
hits=$(grep -n -E '(^|[^A-Za-z0-9_.>])(clock_gettime|gettimeofday|clock|time|difftime|timespec_get)\(' \
    "$srcdir"/tests/*.c "$srcdir"/tests/*.h "$srcdir"/tests/oracle/*.c "$srcdir"/tests/oracle/*.h \
    2>/dev/null)
if [ -n "$hits" ]; then
    echo "FAIL wall-clock calls in tests (count work instead):"
    echo "$hits"
    exit 1
fi
echo "check_no_wall_clock: no wall-clock calls in tests/"

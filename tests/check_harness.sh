#!/bin/sh
# check_harness.sh - every Check suite takes its main() from the harness
# (tests/harness.c): no tests/check_*.c defines main(), and each one
# defines tu_suite(), the suite the harness runs. Two exceptions, plain
# programs rather than Check suites: check_core_alone.c (its test is a
# link with nothing but src/core/ and libc) and check_jsts.c (a table
# ratchet over the JSON-Schema-Test-Suite, with a --write mode that
# rewrites the table).
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
fail=0
for f in "$srcdir"/tests/check_*.c; do
    name=$(basename "$f")
    case $name in check_core_alone.c | check_jsts.c) continue ;; esac
    if grep -n -E '^([a-z].*[^A-Za-z0-9_])?main *\(' "$f"; then
        echo "FAIL $name defines main(): define tu_suite() and let tests/harness.c run it"
        fail=1
    fi
    if ! grep -q -E '^Suite \*tu_suite\(void\)$' "$f"; then
        echo "FAIL $name defines no tu_suite(), the suite tests/harness.c runs"
        fail=1
    fi
done
[ "$fail" -eq 0 ] && echo "check_harness: every tests/check_*.c suite runs under tests/harness.c"
exit $fail

#!/bin/sh
# run_examples.sh - make check runs the Python examples with the package
# built in this build tree (make check-python or .ci/test-python builds it
# into python/lib); SKIP (77) when it is not built or not importable, as
# in make distcheck, which does not build it.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
lib=$(pwd)/python/lib
py=${SIFT_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || { echo "SKIP: no $py"; exit 77; }
[ -d "$lib/sift" ] || { echo "SKIP: the Python package is not built here (make check-python)"; exit 77; }
PYTHONPATH=$lib "$py" -c "import sift" 2>/dev/null || { echo "SKIP: sift does not import"; exit 77; }
fail=0
ran=0
for ex in engine_loop grammar_backend hf_processor; do
    PYTHONPATH=$lib "$py" "$srcdir/examples/python/$ex.py"
    rc=$?
    case $rc in
    0) ran=$((ran + 1)) ;;
    77) echo "SKIP $ex" ;;
    *) echo "FAIL $ex (exit $rc)"; fail=1 ;;
    esac
done
[ $fail -eq 0 ] || exit 1
[ $ran -gt 0 ] || exit 77
exit 0

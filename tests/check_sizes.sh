#!/bin/sh
# check_sizes.sh - the house limits on src/, so that they hold from one
# change to the next: at most 8 functions over 100 lines, none over 200,
# no source file over 1,500 lines (tests/fnsize.py says how it counts).
# Skipped (77) where no Python 3 is at hand.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=$(command -v python3) || exit 77
cd "$srcdir" && "$py" tests/fnsize.py

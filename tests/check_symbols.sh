#!/bin/sh
# check_symbols.sh HEADER LIBRARY - the library exports exactly the
# functions the public header declares (STYLE.md: exported symbols equal
# the documented list).
set -eu
header=$1
lib=$2
[ -f "$lib" ] || { echo "check_symbols: $lib not built (static-only build?), skipped"; exit 0; }
tmp=${TMPDIR:-/tmp}/sift-symbols.$$
trap 'rm -f "$tmp".*' EXIT
grep -o 'sift_[a-z0-9_]*(' "$header" | tr -d '(' | sort -u > "$tmp.declared"
nm -D --defined-only "$lib" | awk '{print $3}' | grep '^sift' | sort -u > "$tmp.exported"
if ! diff -u "$tmp.declared" "$tmp.exported"; then
    echo "check_symbols: exported symbols differ from include/sift.h (- declared, + exported)"
    exit 1
fi
echo "check_symbols: $(wc -l < "$tmp.exported") exported symbols match include/sift.h"

#!/bin/sh
# check_docs_api.sh - the "Function reference" of docs/api.md names every
# function include/sift.h declares (the same list check_symbols.sh
# compares with the exported symbols), and names no function the header
# lacks, so the reference cannot fall behind the API; and no sift_ name
# anywhere in docs/, README.md or the man pages is one the API lacks.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
header=$srcdir/include/sift.h
doc=$srcdir/docs/api.md
tmp=${TMPDIR:-/tmp}/sift_docs_api.$$
trap 'rm -f "$tmp".*' EXIT
grep -o 'sift_[a-z0-9_]*(' "$header" | tr -d '(' | sort -u >"$tmp.declared"
[ -s "$tmp.declared" ] || { echo "FAIL no function found in $header"; exit 1; }
sed -n '/^## Function reference/,$p' "$doc" >"$tmp.ref"
[ -s "$tmp.ref" ] || { echo "FAIL $doc has no '## Function reference' section"; exit 1; }
fail=0
while read -r f; do
    grep -q "\`[^\`]*\\b$f(" "$tmp.ref" || { echo "FAIL $f is declared in sift.h but not in the reference of docs/api.md"; fail=1; }
done <"$tmp.declared"
# The other way: every function the reference lists exists.
grep -o '`[a-z_ *]*\bsift_[a-z0-9_]*(' "$tmp.ref" | grep -o 'sift_[a-z0-9_]*' | sort -u >"$tmp.listed"
for f in $(comm -13 "$tmp.declared" "$tmp.listed"); do
    echo "FAIL docs/api.md lists $f, which sift.h does not declare"
    fail=1
done
# Every public-looking sift_ name the docs, the README and the man pages
# give (sift__ names are internal; file names like sift_internal.h are
# left out) exists: in sift.h, sift_version.h.in or configure.ac.
cat "$header" "$srcdir/include/sift_version.h.in" "$srcdir/configure.ac" |
    grep -o '\bsift_[a-z0-9_]*' | sort -u >"$tmp.known"
for d in "$srcdir"/docs/*.md "$srcdir"/docs/sift.1 "$srcdir"/docs/sift.3 "$srcdir/README.md"; do
    sed 's/sift_[a-z0-9_]*\.[a-z]//g' "$d" | grep -o '\bsift_[a-z0-9][a-z0-9_]*' | sort -u |
        comm -23 - "$tmp.known" | while read -r n; do
        echo "FAIL ${d#"$srcdir"/} names $n, which neither sift.h nor configure.ac has"
    done
done >"$tmp.names"
[ -s "$tmp.names" ] && { cat "$tmp.names"; fail=1; }
[ "$fail" = 0 ] && echo "check_docs_api: all $(wc -l <"$tmp.declared") functions of sift.h are in docs/api.md"
exit $fail

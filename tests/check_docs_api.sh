#!/bin/sh
# check_docs_api.sh - the "Function reference" of docs/api.md names every
# function include/sift.h declares (the same list check_symbols.sh
# compares with the exported symbols), and names no function the header
# lacks, so the reference cannot fall behind the API.
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
[ "$fail" = 0 ] && echo "check_docs_api: all $(wc -l <"$tmp.declared") functions of sift.h are in docs/api.md"
exit $fail

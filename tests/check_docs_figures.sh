#!/bin/sh
# check_docs_figures.sh - every measured figure the API docs quote lives in
# one place: the table under "## Measured figures" in docs/api.md, one row
# per figure with the command that measures it. Elsewhere the docs name
# the figure by its key (figure `slice-step-32k`). Fails when
#  - a figure of the table (1,000 or more; smaller ones are too common to
#    search for) appears anywhere else in docs/, README.md, sift.h or the
#    man pages: a second copy, which would drift;
#  - README.md, sift.h, the man pages or docs/{api,cli,config}.md outside
#    the table quote an instruction count ("11,500 instructions"): a
#    figure that is not in the table;
#  - a key named with "figure `KEY`" is not a row of the table.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
doc=$srcdir/docs/api.md
tmp=${TMPDIR:-/tmp}/sift_docs_figures.$$
trap 'rm -f "$tmp".*' EXIT
# The table: from its heading to the next heading; rows "| `key` | value |".
sed -n '/^## Measured figures/,/^## /p' "$doc" | sed '$d' >"$tmp.sec"
grep '^| `[a-z0-9-]*` |' "$tmp.sec" >"$tmp.rows"
[ -s "$tmp.rows" ] || { echo "FAIL docs/api.md has no '## Measured figures' table"; exit 1; }
fail=0
sed 's/^| `\([a-z0-9-]*\)` | \([^|]*\) |.*/\1 \2/' "$tmp.rows" >"$tmp.kv"
# Every other place, with the table's own lines left out of api.md.
others="$srcdir/README.md $srcdir/include/sift.h $srcdir/docs/sift.1 $srcdir/docs/sift.3"
for d in "$srcdir"/docs/*.md; do
    [ "$d" = "$doc" ] || others="$others $d"
done
sed '/^## Measured figures/,/^## /{/^## Function reference/!d;}' "$doc" >"$tmp.api"
while read -r key value; do
    v=$(printf '%s' "$value" | sed 's/ *$//')
    digits=$(printf '%s' "$v" | tr -cd '0-9')
    [ -n "$digits" ] || { echo "FAIL figure \`$key\` has no number: '$v'"; fail=1; continue; }
    [ "$digits" -ge 1000 ] 2>/dev/null || continue
    for f in $others "$tmp.api"; do
        if grep -n -F -- "$v" "$f" >"$tmp.hit"; then
            name=${f#"$srcdir"/}
            [ "$f" = "$tmp.api" ] && name="docs/api.md (outside the table)"
            sed "s|^|FAIL a second copy of figure \`$key\` ($v) in $name:|" "$tmp.hit"
            fail=1
        fi
    done
done <"$tmp.kv"
# Instruction counts outside the table in the API docs.
for f in "$srcdir/README.md" "$srcdir/include/sift.h" "$srcdir/docs/sift.1" "$srcdir/docs/sift.3" \
    "$srcdir/docs/cli.md" "$srcdir/docs/config.md" "$tmp.api"; do
    name=${f#"$srcdir"/}
    [ "$f" = "$tmp.api" ] && name="docs/api.md (outside the table)"
    grep -n -E '[0-9][0-9,.]* (more )?instructions' "$f" |
        sed "s|^|FAIL an instruction count outside docs/api.md's figures table, in $name:|"
done >"$tmp.counts"
[ -s "$tmp.counts" ] && { cat "$tmp.counts"; fail=1; }
# Every key the docs name is a row.
cut -d' ' -f1 "$tmp.kv" | sort -u >"$tmp.keys"
cat "$srcdir/README.md" "$srcdir/include/sift.h" "$srcdir"/docs/*.md |
    grep -o 'figure `[a-z0-9-]*`' | sed 's/figure `\(.*\)`/\1/' | sort -u >"$tmp.named"
for k in $(comm -23 "$tmp.named" "$tmp.keys"); do
    echo "FAIL the docs name figure \`$k\`, which docs/api.md's table lacks"
    fail=1
done
[ "$fail" = 0 ] && echo "check_docs_figures: $(wc -l <"$tmp.kv") figures, each in one place"
exit $fail

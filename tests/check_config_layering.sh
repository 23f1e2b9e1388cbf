#!/bin/sh
# check_config_layering.sh - the files of src/config/ do not call each
# other in a loop. For every file, the sift__cfg_* functions it defines
# (a definition starts at column 0 and its line has no ';') and those it
# calls elsewhere give an edge file -> file; the graph must reduce to
# nothing by removing, again and again, the files that call no remaining
# file (a cycle never does).
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
dir="$srcdir/src/config"
tmp=${TMPDIR:-/tmp}/sift_layer.$$
trap 'rm -f "$tmp".*' EXIT
: >"$tmp.def"
for f in "$dir"/*.c; do
    b=$(basename "$f" .c)
    grep -E '^[a-z].*[ *]sift__cfg_[a-z_]+\(' "$f" | grep -v ';' |
        sed -E 's/.*(sift__cfg_[a-z_]+)\(.*/\1/' | sed "s/\$/ $b/" >>"$tmp.def"
done
: >"$tmp.edge"
for f in "$dir"/*.c; do
    b=$(basename "$f" .c)
    for fn in $(grep -oE 'sift__cfg_[a-z_]+\(' "$f" | tr -d '(' | sort -u); do
        owner=$(awk -v fn="$fn" '$1 == fn { print $2 }' "$tmp.def")
        [ -n "$owner" ] && [ "$owner" != "$b" ] && echo "$b $owner" >>"$tmp.edge"
    done
done
sort -u "$tmp.edge" -o "$tmp.edge"
nodes=$(for f in "$dir"/*.c; do basename "$f" .c; done)
while [ -n "$nodes" ]; do
    left=""
    removed=0
    for n in $nodes; do
        out=$(awk -v n="$n" '$1 == n { print $2 }' "$tmp.edge")
        if [ -z "$out" ]; then
            sed -i.bak "/ $n\$/d" "$tmp.edge"
            removed=1
        else
            left="$left $n"
        fi
    done
    if [ "$removed" = 0 ]; then
        echo "FAIL src/config/ files call each other in a loop among:$left"
        cat "$tmp.edge"
        exit 1
    fi
    nodes=$left
done
echo "check_config_layering: src/config/ call graph has no cycle"

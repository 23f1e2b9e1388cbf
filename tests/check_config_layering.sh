#!/bin/sh
# check_config_layering.sh - the files of src/config/ do not call each
# other in a loop. For every file, the functions it defines that other
# files may call (sift__cfg_* and the public sift_config_*; a definition
# starts at column 0 and its line has no ';') and those it calls give an
# edge file -> file; the graph must reduce to nothing by removing, again
# and again, the files that call no remaining file (a cycle never does).
# So that no helper escapes the graph, a function of src/config/ that is
# not static must have one of those two prefixes.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
dir="$srcdir/src/config"
tmp=${TMPDIR:-/tmp}/sift_layer.$$
trap 'rm -f "$tmp".*' EXIT
: >"$tmp.def"
for f in "$dir"/*.c; do
    b=$(basename "$f" .c)
    grep -E '^[a-z].*[ *]sift_(_cfg|config)_[a-z_]+\(' "$f" | grep -v ';' |
        sed -E 's/.*(sift_(_cfg|config)_[a-z_]+)\(.*/\1/' | sed "s/\$/ $b/" >>"$tmp.def"
    other=$(grep -E '^[a-z][^;]*[ *][a-z_][a-z0-9_]*\(' "$f" | grep -v '^static' | grep -v ';' |
        sed -E 's/^[^(]*[ *]([a-z_][a-z0-9_]*)\(.*/\1/' | grep -vE '^sift_(_cfg|config)_')
    if [ -n "$other" ]; then
        echo "FAIL $b.c defines non-static functions outside sift__cfg_/sift_config_:" $other
        exit 1
    fi
done
: >"$tmp.edge"
for f in "$dir"/*.c; do
    b=$(basename "$f" .c)
    for fn in $(grep -oE 'sift_(_cfg|config)_[a-z_]+\(' "$f" | tr -d '(' | sort -u); do
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

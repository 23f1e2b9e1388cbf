#!/bin/sh
# check_include_graph.sh - the include graph of src/ between folders:
# src/core/ includes only include/, src/sift_internal.h and its own
# files, and no two folders of src/ include each other, directly or
# around a loop (tsort finds the loop). An #include "x" is resolved as
# the compiler does with -Iinclude -Isrc: next to the file first, then
# under src/, then under include/.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
src="$srcdir/src"
tmp=${TMPDIR:-/tmp}/sift_incl.$$
trap 'rm -f "$tmp".*' EXIT
: >"$tmp.edge"
fail=0
for d in "$src"/*/; do
    from=$(basename "$d")
    for f in "$d"*.c "$d"*.h; do
        [ -f "$f" ] || continue
        for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
            if [ -f "$d$inc" ]; then
                # next to the file: its folder, or another one through ../
                case "$inc" in
                ../*/*) to=$(echo "$inc" | sed 's|^\.\./\([^/]*\)/.*|\1|') ;;
                ../*) to=. ;;
                *) to=$from ;;
                esac
            elif [ -f "$src/$inc" ]; then
                case "$inc" in
                */*) to=${inc%%/*} ;;
                *) to=. ;;
                esac
            elif [ -f "$srcdir/include/$inc" ] || [ "$inc" = sift_version.h ]; then
                to=include
            else
                echo "check_include_graph: ${f#"$srcdir"/}: cannot resolve \"$inc\"" >&2
                fail=1
                continue
            fi
            case "$to" in
            . | include | "$from") continue ;;
            esac
            echo "$from $to" >>"$tmp.edge"
            if [ "$from" = core ]; then
                echo "check_include_graph: ${f#"$srcdir"/} includes \"$inc\" (src/$to/):" \
                    "src/core/ includes only include/, src/sift_internal.h and its own files" >&2
                fail=1
            fi
        done
    done
done
sort -u "$tmp.edge" -o "$tmp.edge"
if ! tsort "$tmp.edge" >/dev/null 2>"$tmp.err"; then
    echo "check_include_graph: the folders of src/ include each other in a loop:" >&2
    cat "$tmp.err" >&2
    fail=1
fi
exit $fail

#!/bin/sh
# check_include_graph.sh - the include graph of src/ between folders.
#
# An #include "x" is resolved as the compiler does with -Iinclude -Isrc:
# next to the file first, then under src/, then under include/. Every
# file may include include/ and src/sift_internal.h. Between folders:
#
# - Arrows that must never exist (README.md, "Layout"): core -> any other
#   folder (samplers, vocab, grammar, schema, config, cli); vocab ->
#   grammar, schema; grammar -> schema; samplers -> grammar, schema,
#   config; any library folder -> cli. Each forbidden include fails with
#   the file, the include and the rule.
# - No two folders include each other, directly or around a loop (tsort
#   finds the loop).
# - Third-party headers only where they belong: <jansson.h> in schema/
#   (JSON Schema) and vocab/ (tokenizer.json), and in cli/ (sift bench
#   maskbench, not part of the library); <yaml.h> in config/ only;
#   <pcre2.h> in vocab/, grammar/ and schema/ only.
#
# The samplers read vocabularies through the public API (sift.h) only,
# which this graph cannot see; tests/check_core links the core, the
# samplers and the vocabulary without the other folders, and
# tests/check_core_alone the core alone, so a call across a forbidden
# arrow through sift.h fails to link there.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
src="$srcdir/src"
tmp=${TMPDIR:-/tmp}/sift_incl.$$
trap 'rm -f "$tmp".*' EXIT
: >"$tmp.edge"
fail=0

# forbidden FROM TO: prints the rule when the arrow FROM -> TO is one
# that must never exist, else nothing.
forbidden() {
    case "$1:$2" in
    core:*) echo "src/core/ includes no other folder of src/" ;;
    vocab:grammar | vocab:schema) echo "src/vocab/ never includes src/grammar/ or src/schema/" ;;
    grammar:schema) echo "src/grammar/ never includes src/schema/" ;;
    samplers:grammar | samplers:schema | samplers:config)
        echo "src/samplers/ never includes src/grammar/, src/schema/ or src/config/" ;;
    *:cli) echo "no folder of the library includes src/cli/" ;;
    esac
}

# allowed_lib HEADER FOLDER: 0 when FOLDER may include <HEADER>.
allowed_lib() {
    case "$1" in
    jansson.h) case "$2" in schema | vocab | cli) return 0 ;; esac; return 1 ;;
    yaml.h) case "$2" in config) return 0 ;; esac; return 1 ;;
    pcre2.h) case "$2" in vocab | grammar | schema) return 0 ;; esac; return 1 ;;
    esac
    return 0
}

for d in "$src"/*/; do
    from=$(basename "$d")
    for f in "$d"*.c "$d"*.h; do
        [ -f "$f" ] || continue
        for lib in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\([^>]*\)>.*/\1/p' "$f"); do
            if ! allowed_lib "$lib" "$from"; then
                echo "check_include_graph: ${f#"$srcdir"/} includes <$lib>, which src/$from/ may not" >&2
                fail=1
            fi
        done
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
            rule=$(forbidden "$from" "$to")
            if [ -n "$rule" ]; then
                echo "check_include_graph: ${f#"$srcdir"/} includes \"$inc\" (src/$to/): $rule" >&2
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
[ $fail = 0 ] && echo "check_include_graph: $(wc -l <"$tmp.edge") arrows between folders, none forbidden"
exit $fail

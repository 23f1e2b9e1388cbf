#!/usr/bin/env bash
# tests/fuzz/build_all.sh [OUTDIR] - builds every libFuzzer target (clang,
# ASan + UBSan) into OUTDIR (default _build/fuzz), each named after its
# source (tests/fuzz/fuzz_*.c), compiling the library sources once, as
# many at a time as there are cores, and linking each target against
# them; the one-target scripts (build.sh, build_config.sh and the ones
# that call it) compile the whole library per target. .ci/run uses this.
# The flags are the stricter of theirs: every sanitizer check aborts, and
# FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION turns the grammar compiler's
# internal consistency check into an abort.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/_build/fuzz}
obj=$out/obj
inc=$out/include
rm -rf "$obj"
mkdir -p "$obj"
bash "$top/tests/fuzz/version_h.sh" "$inc"
flags="-std=c11 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all \
 -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -ffp-contract=off -fno-math-errno -DSIFT_BUILDING \
 -I$top/include -I$inc -I$top/src $(pkg-config --cflags yaml-0.1 libpcre2-8 jansson)"
export flags obj
# every library source but the command line, as obj/DIR_NAME.o
ls "$top"/src/*/*.c | grep -v /src/cli/ |
    xargs -P "$(nproc)" -I{} bash -c \
        'f={}; d=$(basename "$(dirname "$f")"); clang $flags -fsanitize=fuzzer-no-link -c "$f" -o "$obj/${d}_$(basename "$f" .c).o"'
targets=$(ls "$top"/tests/fuzz/fuzz_*.c)
for t in $targets; do
    echo "$t"
done | xargs -P "$(nproc)" -I{} bash -c \
    'clang $flags -fsanitize=fuzzer "{}" "$obj"/*.o $(pkg-config --libs yaml-0.1 libpcre2-8 jansson) -lm -lpthread -o "'"$out"'/$(basename {} .c)"'
for t in $targets; do
    [ -x "$out/$(basename "$t" .c)" ] || {
        echo "build_all.sh: $(basename "$t" .c) was not built" >&2
        exit 1
    }
done
echo "built:" $(for t in $targets; do basename "$t" .c; done)

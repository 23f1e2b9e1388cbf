#!/usr/bin/env bash
# tests/fuzz/build_bpe.sh [OUT] - builds the BPE encoder's libFuzzer
# target (clang, ASan + UBSan) as OUT (default _build/fuzz/fuzz_bpe).
# Compiles the library sources directly, so it needs no configure run.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/_build/fuzz/fuzz_bpe}
mkdir -p "$(dirname "$out")/include"
inc=$(dirname "$out")/include
part() { sed -n "s/^m4_define(\[sift_$1\], \[\([0-9]*\)\])/\1/p" "$top/configure.ac"; }
major=$(part major)
minor=$(part minor)
patch=$(part patch)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] || {
    echo "build_bpe.sh: no version in configure.ac" >&2
    exit 1
}
ver=$major.$minor.$patch
sed -e "s/@SIFT_VERSION_MAJOR@/$major/" -e "s/@SIFT_VERSION_MINOR@/$minor/" \
    -e "s/@SIFT_VERSION_PATCH@/$patch/" -e "s/@PACKAGE_VERSION@/$ver/" \
    "$top/include/sift_version.h.in" > "$inc/sift_version.h"
srcs=$(ls "$top"/src/*/*.c | grep -v /src/cli/)
clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -ffp-contract=off -fno-math-errno -DSIFT_BUILDING \
    -I"$top/include" -I"$inc" -I"$top/src" \
    $(pkg-config --cflags yaml-0.1 libpcre2-8 jansson) \
    $srcs "$top/tests/fuzz/fuzz_bpe.c" \
    $(pkg-config --libs yaml-0.1 libpcre2-8 jansson) -lm -lpthread -o "$out"
echo "built $out"

#!/usr/bin/env bash
# tests/fuzz/build_config.sh [OUT [TARGET]] - builds a libFuzzer target
# over the whole library (clang, ASan + UBSan): tests/fuzz/TARGET.c
# (default fuzz_config, the configuration loader; build_bpe.sh passes
# fuzz_bpe) as OUT (default _build/fuzz/TARGET). Compiles the library
# sources directly, so it needs no configure run.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
target=${2:-fuzz_config}
out=${1:-$top/_build/fuzz/$target}
inc=$(dirname "$out")/include
bash "$top/tests/fuzz/version_h.sh" "$inc"
srcs=$(ls "$top"/src/*/*.c | grep -v /src/cli/)
clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -ffp-contract=off -fno-math-errno -DSIFT_BUILDING \
    -I"$top/include" -I"$inc" -I"$top/src" \
    $(pkg-config --cflags yaml-0.1 libpcre2-8 jansson) \
    $srcs "$top/tests/fuzz/$target.c" \
    $(pkg-config --libs yaml-0.1 libpcre2-8 jansson) -lm -lpthread -o "$out"
echo "built $out"

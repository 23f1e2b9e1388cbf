#!/usr/bin/env bash
# tests/fuzz/build.sh [OUTDIR] - builds the libFuzzer targets with clang
# (-fsanitize=fuzzer,address,undefined) straight from the sources; not
# part of make check. Needs a configured tree for sift_version.h: the
# script configures _build/fuzz-hdr if no build has one.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/_build/fuzz}
mkdir -p "$out"
ver=$(ls "$top"/_build/*/include/sift_version.h 2>/dev/null | head -1 || true)
if [ -z "$ver" ]; then
    bash "$top/.ci/build" fuzz-hdr CC=clang
    ver=$top/_build/fuzz-hdr/include/sift_version.h
fi
inc=$(dirname "$ver")
srcs=$(ls "$top"/src/core/*.c "$top"/src/samplers/*.c "$top"/src/vocab/*.c "$top"/src/grammar/*.c \
    "$top"/src/schema/*.c)
flags="-std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION \
 -ffp-contract=off -I$top/include -I$inc -I$top/src"
for t in fuzz_gbnf_parse fuzz_gbnf_tokens fuzz_json_regex fuzz_json_schema; do
    clang $flags $(pkg-config --cflags jansson) -o "$out/$t" "$top/tests/fuzz/$t.c" $srcs -lm \
        -lpcre2-8 -lyaml $(pkg-config --libs jansson)
done
echo "built: $out/fuzz_gbnf_parse $out/fuzz_gbnf_tokens $out/fuzz_json_regex $out/fuzz_json_schema"

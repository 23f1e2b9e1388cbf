#!/bin/sh
# bench_schema_cg.sh - callgrind instruction counts of bench_schema: each
# shape at n, 2n, 4n and 8n (one run each, collection only inside the
# converter or the encoder), with the instructions per item, which stays
# flat when the growth is linear. Prints "valgrind not found" and exits 0
# without valgrind.
# Usage: bench_schema_cg.sh ./tests/bench/bench_schema
bin=$1
command -v valgrind >/dev/null 2>&1 || { echo "bench_schema_cg: valgrind not found"; exit 0; }
out=${TMPDIR:-/tmp}/bench_schema_cg.$$
trap 'rm -f "$out" "$out.log"' EXIT
# libtool wrapper scripts: run the real binary, with the library it
# links from the build tree (tests/bench/ is two levels below it)
if [ -x "$(dirname "$bin")/.libs/$(basename "$bin")" ]; then
    LD_LIBRARY_PATH="$(cd "$(dirname "$bin")/../.." && pwd)/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
    bin="$(dirname "$bin")/.libs/$(basename "$bin")"
fi
printf '%-12s %7s %15s %12s\n' shape n instructions "per item"
for shape in enum-allof enum-oneof const-oneof required ref encode; do
    fn=sift_json_schema_to_gbnf
    base=2500
    unit=1
    if [ "$shape" = encode ]; then
        fn=sift_vocab_encode
        base=64
        unit=1024
    fi
    for m in 1 2 4 8; do
        n=$((base * m))
        valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$fn" \
            "$bin" --once "$shape" "$n" >"$out.log" 2>&1 || { cat "$out.log"; exit 1; }
        ir=$(callgrind_annotate "$out" 2>/dev/null |
            sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
        printf '%-12s %7d %15d %12d\n' "$shape" "$n" "$ir" $((ir / (n * unit)))
    done
done

#!/bin/sh
# slicer_callgrind.sh BENCH_SLICE [V] - instructions per call of the slice
# builder and of the floor (the dispatched max-reduction) and memcpy of
# the row, counted by callgrind, for peaked, bf16 and flat rows and k in
# {1, 16, 40, 104, 256}: counts do not depend on the load of the machine, as
# times do. Run by `make bench-slicer-cg`. Valgrind does not run AVX-512,
# so the dispatch picks AVX2 here (SIFT_SIMD caps it further). The memcpy
# column counts glibc's copy as valgrind sees it (a `rep movsb` counts one
# instruction per byte), so it is no guide to the time of a copy.
b=${1:?usage: slicer_callgrind.sh BENCH_SLICE [V]}
V=${2:-248320}
reps=${REPS:-10}
calls=$((reps + 3)) # bench_slice adds three rounds of warm-up
command -v valgrind >/dev/null || { echo "slicer_callgrind: valgrind not found" >&2; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
printf '%-7s %7s %5s %12s %12s %12s %8s\n' rows V k builder floor memcpy ratio
for rows in peaked bf16 flat; do
    for k in 1 16 40 104 256; do
        valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$b" --slicer --v "$V" \
            --k "$k" --rows "$rows" --reps "$reps" >/dev/null 2>"$tmp/log" ||
            { cat "$tmp/log" >&2; exit 1; }
        callgrind_annotate --inclusive=yes "$tmp/cg" >"$tmp/ann" 2>/dev/null
        # the largest inclusive count among the lines that name it
        ir() { grep -E "$1" "$tmp/ann" | awk '{gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0}
            END { print m + 0 }'; }
        bl=$(ir ':sift_slicer_build ')
        fl=$(ir 'cpu.c:max_(sse2|avx2|avx512|scalar) ')
        mc=$(ir ':copy_row ')
        awk -v r="$rows" -v V="$V" -v k="$k" -v b="${bl:-0}" -v f="${fl:-0}" -v m="${mc:-0}" \
            -v c="$calls" 'BEGIN { printf "%-7s %7d %5d %12.0f %12.0f %12.0f %8.2f\n",
                r, V, k, b / c, f / c, m / c, (f > 0 ? b / f : 0) }'
    done
done

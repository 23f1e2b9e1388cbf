#!/bin/sh
# bench_shard.sh BENCH_SHARD - sift_shards_merge for S = 2, 4, 8 shards of
# k = 105 at V = 151,936 and 248,320: the median time of a merge (2,001
# calls) and, when valgrind is installed, the instructions per merge
# counted by callgrind (REPS calls, default 20; counts do not depend on
# the load of the machine, as times do). Run by `make bench-shard`.
b=${1:?usage: bench_shard.sh BENCH_SHARD}
reps=${REPS:-20}
calls=$((reps + 3)) # bench_shard adds three rounds of warm-up
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
printf '%2s %7s %4s %10s %14s\n' S V k median_us instructions
for V in 151936 248320; do
    for S in 2 4 8; do
        line=$("$b" --s "$S" --v "$V" --k 105) || exit 1
        med=$(printf '%s\n' "$line" | sed 's/.*"median_us":\([0-9.]*\).*/\1/')
        ir=-
        if command -v valgrind >/dev/null; then
            valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$b" --s "$S" --v "$V" \
                --k 105 --reps "$reps" >/dev/null 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
            ir=$(callgrind_annotate --inclusive=yes "$tmp/cg" 2>/dev/null |
                grep -E ':sift_shards_merge ' | awk -v c="$calls" '{gsub(",", "", $1);
                if ($1 + 0 > m) m = $1 + 0} END { printf "%.0f", m / c }')
        fi
        printf '%2d %7d %4d %10s %14s\n' "$S" "$V" 105 "$med" "$ir"
    done
done

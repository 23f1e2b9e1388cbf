#!/bin/sh
# check_cli_sample.sh - `sift sample` and the .npy reader: the token
# sequence with --slice K equals the one without, for several chains and
# every K tried (1 included); --history, --json, exit statuses; malformed
# .npy files are exit 1 with the byte offset in the message. The .npy files
# come from tests/gen_npy (built by make check) and from printf.
# Absolute, so that paths stay right after a cd and inside configs written
# to a temporary directory (make distcheck passes a relative srcdir).
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
sift=./sift
gen=tests/gen_npy
fail=0
tmp=${TMPDIR:-/tmp}/sift_cli_sample.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
t() { # t WANT_STATUS DESCRIPTION CMD...
    want=$1 desc=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ "$got" != "$want" ]; then
        echo "FAIL $desc: exit status $got, expected $want ($(cat "$tmp/err"))"
        fail=1
    fi
}
V=300
$gen "$tmp/rows.npy" 40 $V 7 || exit 99
$gen "$tmp/rows3.npy" 40 $V 7 3 || exit 99
$gen "$tmp/row.npy" 0 $V 9 || exit 99

# Chains: truncation-decided, penalties (extras + a window), a positive
# logit bias (an extra token), min_p (certified), greedy, and no truncation.
cat >"$tmp/c_topk.yaml" <<YAML
seed: 3
vocab_size: $V
chain: [{top_k: 20}, {top_p: 0.9}, {temperature: 0.8}, dist]
YAML
cat >"$tmp/c_pen.yaml" <<YAML
seed: 5
chain:
  - penalties: {last_n: 16, repeat: 1.3, frequency: 0.2, presence: -0.5}
  - logit_bias: {250: 4.0, 3: -.inf}
  - top_k: 10
  - temperature: 1.2
  - dist
YAML
cat >"$tmp/c_minp.yaml" <<YAML
seed: 11
chain: [{min_p: 0.05}, {temperature: 0.9}, dist]
YAML
cat >"$tmp/c_greedy.yaml" <<YAML
chain: [{penalties: {last_n: 8, repeat: 1.5}}, greedy]
YAML
cat >"$tmp/c_dist.yaml" <<YAML
seed: 1
chain: [{temperature: 1.0}, dist]
YAML

for c in topk pen minp greedy dist; do
    cfg=$tmp/c_$c.yaml
    t 0 "sample $c" $sift sample "$cfg" --logits "$tmp/rows.npy" --history 1,2,250,2
    cp "$tmp/out" "$tmp/want"
    n=$(wc -l <"$tmp/want")
    [ "$n" -eq 40 ] || { echo "FAIL sample $c: $n tokens, expected 40"; fail=1; }
    for k in 1 2 5 20 64 299 300 1000; do
        t 0 "sample $c --slice $k" $sift sample "$cfg" --logits "$tmp/rows.npy" --slice $k \
            --history 1,2,250,2
        cmp -s "$tmp/want" "$tmp/out" || { echo "FAIL sample $c: --slice $k changes the tokens"; fail=1; }
        grep -q "^sift sample: steps 40, k $k, " "$tmp/err" || { echo "FAIL sample $c --slice $k: no summary"; fail=1; }
    done
    # The same rows in format 3.0 give the same tokens.
    t 0 "sample $c (npy 3.0)" $sift sample "$cfg" --logits "$tmp/rows3.npy" --history 1,2,250,2
    cmp -s "$tmp/want" "$tmp/out" || { echo "FAIL sample $c: npy 3.0 differs"; fail=1; }
done

# A grammar over the real cl100k vocabulary (no EOG token: the grammar
# repeats), in both modes: the tokens with
# --slice K equal the whole-row ones (a constrain grammar names its forced
# tokens as extras; check mode fetches the row when it rejects a draw).
VC=100256
$gen "$tmp/rows_cl.npy" 24 $VC 5 || exit 99
for mode in constrain check; do
    cat >"$tmp/c_g_$mode.yaml" <<YAML
seed: 9
vocab: $srcdir/tests/data/cl100k_base.tiktoken
chain: [{top_k: 40}, {temperature: 0.8}, dist]
grammar:
  text: 'root ::= ("{\\"name\\": \\"" [a-z]+ "\\", \\"ok\\": " ("true" | "false") "}\\n")+'
  mode: $mode
YAML
    cfg=$tmp/c_g_$mode.yaml
    t 0 "sample grammar $mode" $sift sample "$cfg" --logits "$tmp/rows_cl.npy"
    cp "$tmp/out" "$tmp/want"
    [ "$(wc -l <"$tmp/want")" -eq 24 ] || { echo "FAIL sample grammar $mode: $(cat "$tmp/err")"; fail=1; }
    for k in 1 40 104; do
        t 0 "sample grammar $mode --slice $k" $sift sample "$cfg" --logits "$tmp/rows_cl.npy" --slice $k
        cmp -s "$tmp/want" "$tmp/out" || { echo "FAIL sample grammar $mode: --slice $k changes the tokens"; fail=1; }
    done
done

# The history matters for penalties (the test can fail): greedy with a
# repeat penalty on the first row's best token changes the first token.
t 0 "greedy without history" $sift sample "$tmp/c_greedy.yaml" --logits "$tmp/row.npy"
first=$(cat "$tmp/out")
t 0 "greedy with history" $sift sample "$tmp/c_greedy.yaml" --logits "$tmp/row.npy" --history "$first"
[ "$(cat "$tmp/out")" != "$first" ] || { echo "FAIL --history has no effect"; fail=1; }

# A large k decides on the slice: no hook call, bytes = 40 * (k + extras) * 8.
t 0 "topk --slice 20 --json" $sift sample "$tmp/c_topk.yaml" --logits "$tmp/rows.npy" --slice 20 --json
grep -q '"steps": 40, "tokens": \[' "$tmp/out" || { echo "FAIL json: $(cat "$tmp/out")"; fail=1; }
grep -q '"hook_calls": 0, "bytes_copied": 6400, "bytes_whole_rows": 48000}' "$tmp/out" ||
    { echo "FAIL json summary: $(cat "$tmp/out")"; fail=1; }

# Errors.
$gen "$tmp/small.npy" 3 100 1 || exit 99
t 1 "vocab_size 300, rows of 100" $sift sample "$tmp/c_topk.yaml" --logits "$tmp/small.npy"
grep -q "vocab_size 300 but the logits rows have 100" "$tmp/err" || { echo "FAIL mismatch message"; fail=1; }
t 1 "history id >= V" $sift sample "$tmp/c_dist.yaml" --logits "$tmp/rows.npy" --history 5,300
t 2 "history not a list" $sift sample "$tmp/c_dist.yaml" --logits "$tmp/rows.npy" --history 5,x
t 2 "no --logits" $sift sample "$tmp/c_dist.yaml"
t 2 "no config" $sift sample --logits "$tmp/rows.npy"
t 2 "--slice 0" $sift sample "$tmp/c_dist.yaml" --logits "$tmp/rows.npy" --slice 0
t 2 "missing logits file" $sift sample "$tmp/c_dist.yaml" --logits "$tmp/nope.npy"
t 2 "missing config" $sift sample "$tmp/nope.yaml" --logits "$tmp/rows.npy"
t 2 "unknown option" $sift sample "$tmp/c_dist.yaml" --logits "$tmp/rows.npy" --frob
t 1 "invalid config" $sift sample "$srcdir/tests/data/config-invalid/p14_no_selector.yaml" --logits "$tmp/rows.npy"
t 0 "sample --help" $sift sample --help
grep -q '^usage: sift sample' "$tmp/out" || { echo "FAIL sample --help"; fail=1; }

# Malformed .npy files: exit 1, the message names the byte offset.
bad() { # bad DESCRIPTION EXPECTED_MESSAGE_PART  (file in $tmp/bad.npy)
    t 1 "npy: $1" $sift sample "$tmp/c_dist.yaml" --logits "$tmp/bad.npy"
    grep -q "$2" "$tmp/err" || { echo "FAIL npy: $1: message $(cat "$tmp/err")"; fail=1; }
}
hdr() { # hdr DICT : a v1.0 file whose header is DICT padded to 128 bytes, no data
    d=$1
    n=$((117 - ${#d}))
    { printf '\223NUMPY\001\000\166\000%s' "$d"; printf "%${n}s\n" ""; } >"$tmp/bad.npy"
}
printf 'NUMPY' >"$tmp/bad.npy"
bad "too short" "byte 0: not a .npy file"
printf '\223NUMPX\001\000\000\000' >"$tmp/bad.npy"
bad "bad magic" "byte 0: not a .npy file"
printf '\223NUMPY\004\000\000\000' >"$tmp/bad.npy"
bad "version 4" "byte 6: unsupported .npy version 4.0"
printf '\223NUMPY\001\000\377\377{}' >"$tmp/bad.npy"
bad "header length past the end" "byte 8: header length 65535 runs past"
hdr "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }"
bad "big-endian" "byte 20: dtype '>f4' is not supported"
hdr "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }"
bad "float64" "dtype '<f8' is not supported"
hdr "{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }"
bad "fortran order" "byte 44: Fortran order"
hdr "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }"
bad "3-d" "shape has more than 2 dimensions"
hdr "{'descr': '<f4', 'fortran_order': False, 'shape': (), }"
bad "0-d" "a 0-d array"
hdr "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 300), }"
bad "shape larger than the file" "needs more bytes of data, the file has 0"
hdr "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }"
bad "no rows" "the array has no rows"
hdr "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 99999999), }"
bad "row too long" "row length 99999999 outside"
hdr "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}"
bad "unknown key" "unknown header key 'x'"
hdr "{'descr': '<f4', 'shape': (3,), }"
bad "missing key" "header lacks 'fortran_order'"
hdr "['descr', '<f4']"
bad "not a dict" "byte 10: header does not start with '{'"
hdr "{'descr': '<f4', 'fortran_order': False, 'shape': (3,) } x"
bad "trailing characters" "trailing characters"
# A (2,) row with 4 bytes of data too few, and one with a NaN.
d="{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
{ printf '\223NUMPY\001\000\166\000%s' "$d"; printf "%$((117 - ${#d}))s\n" ""; printf '\000\000\200\077'; } >"$tmp/bad.npy"
bad "data too short" "byte 128: shape (1, 2) needs more bytes of data, the file has 4"
{ printf '\223NUMPY\001\000\166\000%s' "$d"; printf "%$((117 - ${#d}))s\n" ""; printf '\000\000\200\077\000\000\300\177'; } >"$tmp/bad.npy"
bad "NaN logit" "step 0"
# A good hand-written file: logits (1.0, 2.0) with greedy picks token 1.
printf 'chain: [greedy]\n' >"$tmp/g.yaml"
{ printf '\223NUMPY\001\000\166\000%s' "$d"; printf "%$((117 - ${#d}))s\n" ""; printf '\000\000\200\077\000\000\000\100'; } >"$tmp/ok.npy"
t 0 "hand-written npy" $sift sample "$tmp/g.yaml" --logits "$tmp/ok.npy"
[ "$(cat "$tmp/out")" = 1 ] || { echo "FAIL hand-written npy: $(cat "$tmp/out")"; fail=1; }

# A config with `vocab:` loads the vocabulary (DRY breakers need it); its
# size must be the rows' length.
data=$srcdir/tests/data
printf 'seed: 2\nvocab: %s\nchain:\n  - dry: {multiplier: 0.8}\n  - top_k: 40\n  - dist\n' \
    "$data/cl100k_base.tiktoken" >"$tmp/c_vocab.yaml"
$gen "$tmp/big.npy" 3 100256 4 || exit 99
t 0 "sample with a vocabulary" $sift sample "$tmp/c_vocab.yaml" --logits "$tmp/big.npy"
cp "$tmp/out" "$tmp/want"
t 0 "sample with a vocabulary, --slice 50" $sift sample "$tmp/c_vocab.yaml" --logits "$tmp/big.npy" --slice 50
cmp -s "$tmp/want" "$tmp/out" || { echo "FAIL vocabulary: --slice 50 changes the tokens"; fail=1; }
t 1 "vocabulary size differs from V" $sift sample "$tmp/c_vocab.yaml" --logits "$tmp/rows.npy"
grep -q "has 100256 tokens but the logits rows have 300" "$tmp/err" || { echo "FAIL vocabulary mismatch message"; fail=1; }

# sift inspect: stage sizes follow the chain (top_k 20 leaves 20, top_p
# fewer), the final distribution has the last stage's tokens in the same
# order, and --top bounds what is shown.
t 0 "inspect" $sift inspect "$tmp/c_topk.yaml" --logits "$tmp/row.npy" --top 0
grep -q '^input: 300 tokens$' "$tmp/out" || { echo "FAIL inspect input: $(cat "$tmp/out")"; fail=1; }
grep -q '^top_k: 20 tokens$' "$tmp/out" || { echo "FAIL inspect top_k: $(cat "$tmp/out")"; fail=1; }
np=$(sed -n 's/^top_p: \([0-9]*\) tokens*$/\1/p' "$tmp/out")
nd=$(sed -n 's/^dist (final distribution): \([0-9]*\) tokens*$/\1/p' "$tmp/out")
[ -n "$np" ] && [ "$np" -le 20 ] && [ "$np" = "$nd" ] || { echo "FAIL inspect sizes top_p=$np dist=$nd"; fail=1; }
ids_temp=$(sed -n '/^temp:/,/^dist/p' "$tmp/out" | awk '$2 == "logit" {print $1}')
ids_dist=$(sed -n '/^dist/,$p' "$tmp/out" | awk '$2 == "logit" {print $1}')
[ -n "$ids_dist" ] && [ "$ids_temp" = "$ids_dist" ] || { echo "FAIL inspect: final ids differ"; fail=1; }
t 0 "inspect --json --top 3" $sift inspect "$tmp/c_topk.yaml" --logits "$tmp/row.npy" --top 3 --json
grep -q '^{"n_vocab": 300, "stages": \[{"name": "input", "size": 300, "tokens": \[{"id": [0-9]*, "logit": [-0-9.e]*, "p": [0-9.e-]*}, {' "$tmp/out" ||
    { echo "FAIL inspect --json: $(cat "$tmp/out")"; fail=1; }
most=$(grep -o '"tokens": \[[^]]*\]' "$tmp/out" | awk -F'"id"' '{ if (NF - 1 > m) m = NF - 1 } END { print m }')
[ "$most" = 3 ] || { echo "FAIL inspect --top 3 shows $most tokens in a stage"; fail=1; }
t 1 "inspect, history id >= V" $sift inspect "$tmp/c_topk.yaml" --logits "$tmp/row.npy" --history 300
t 2 "inspect without --logits" $sift inspect "$tmp/c_topk.yaml"
t 2 "inspect --top -1" $sift inspect "$tmp/c_topk.yaml" --logits "$tmp/row.npy" --top -1
t 1 "inspect of a NaN row" $sift inspect "$tmp/c_dist.yaml" --logits "$tmp/bad.npy"
t 0 "inspect --help" $sift inspect --help

# sift bench: small runs (the timings are not checked, only the report).
t 0 "bench --json" $sift bench --vocab 1000 --reps 5 --json
grep -q '^{"config": "production", "n_vocab": 1000, "reps": 5, "k": 84, "guarantee": "exact", "sample_ns": [0-9]*, "floor": "\(scalar\|sse2\|avx2\|avx512\)", "floor_ns": [0-9]*, "memcpy_ns": [0-9]*, "sample_over_floor": [0-9.]*, "sample_over_memcpy": [0-9.]*, "slice_ns": [0-9]*, "sample_over_slice": [0-9.]*, "slice_over_floor": [0-9.]*, "hook_calls": 0}$' "$tmp/out" ||
    { echo "FAIL bench --json: $(cat "$tmp/out")"; fail=1; }
SIFT_SIMD=scalar
export SIFT_SIMD
t 0 "bench with SIFT_SIMD=scalar" $sift bench --vocab 1000 --reps 3
unset SIFT_SIMD
grep -q "^floor .* ns/row (median): the library's max-reduction (scalar)$" "$tmp/out" ||
    { echo "FAIL bench names the floor's kernels: $(cat "$tmp/out")"; fail=1; }
grep -q '^memcpy .* ns/row (median)$' "$tmp/out" || { echo "FAIL bench memcpy: $(cat "$tmp/out")"; fail=1; }
grep -q '^sample .* = [0-9.]*x the floor, [0-9.]*x memcpy$' "$tmp/out" ||
    { echo "FAIL bench sample ratios: $(cat "$tmp/out")"; fail=1; }
t 0 "bench of a config" $sift bench "$tmp/c_topk.yaml" --reps 3
grep -q '^V  *300$' "$tmp/out" || { echo "FAIL bench takes V from vocab_size: $(cat "$tmp/out")"; fail=1; }
t 1 "bench --vocab differs from vocab_size" $sift bench "$tmp/c_topk.yaml" --vocab 100 --reps 3
t 2 "bench --vocab 0" $sift bench --vocab 0
t 2 "bench of a missing config" $sift bench "$tmp/nope.yaml"
t 0 "bench --help" $sift bench --help

echo "check_cli_sample: done"
exit $fail

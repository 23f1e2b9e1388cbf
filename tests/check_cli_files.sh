#!/bin/sh
# check_cli_files.sh - every CLI command that takes a file refuses a FIFO,
# a directory and a device at once (exit 2, "PATH: error: not a regular
# file (...)", the path named once), without blocking: each run is under
# `timeout 10`, so a command that would wait on a FIFO fails instead of
# hanging. Also the other "file named twice" paths: one message per
# command names its file once.
srcdir=${srcdir:-.}
sift=$(pwd)/sift
gen=$(pwd)/tests/gen_npy
fail=0
tmp=${TMPDIR:-/tmp}/sift_cli_files.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
case $srcdir in /*) data=$srcdir/tests/data ;; *) data=$(pwd)/$srcdir/tests/data ;; esac
t() { # t WANT_STATUS DESCRIPTION CMD...
    want=$1 desc=$2
    shift 2
    timeout 10 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    got=$?
    if [ "$got" = 124 ]; then
        echo "FAIL $desc: still running after 10 s (blocked on the file?)"
        fail=1
    elif [ "$got" != "$want" ]; then
        echo "FAIL $desc: exit status $got, expected $want ($(cat "$tmp/err" "$tmp/out"))"
        fail=1
    fi
}
# once TEXT DESCRIPTION: the output names TEXT exactly once, on a line
# that says "error".
once() {
    n=$(cat "$tmp/err" "$tmp/out" | grep -F -o -- "$1" | wc -l)
    if [ "$n" -ne 1 ] || ! cat "$tmp/err" "$tmp/out" | grep -F -- "$1" | grep -q 'error\|warning'; then
        echo "FAIL $2: '$1' named $n times: $(cat "$tmp/err" "$tmp/out")"
        fail=1
    fi
}
mkfifo "$tmp/fifo" || exit 99
mkdir "$tmp/dir" || exit 99
printf 'chain: [greedy]\n' >"$tmp/g.yaml"
printf 'root ::= "a"\n' >"$tmp/a.gbnf"
$gen "$tmp/rows.npy" 2 50 1 || exit 99

for bad in "$tmp/fifo" "$tmp/dir" /dev/null /dev/zero; do
    t 2 "check $bad" $sift check "$bad"
    grep -q "^$bad: error: not a regular file (" "$tmp/err" || { echo "FAIL check $bad: $(cat "$tmp/err")"; fail=1; }
    once "$bad" "check $bad"
    t 2 "plan $bad" $sift plan "$bad"
    once "$bad" "plan $bad"
    t 2 "grammar check $bad" $sift grammar check "$bad"
    once "$bad" "grammar check $bad"
    t 2 "grammar match --file $bad" $sift grammar match "$tmp/a.gbnf" --file "$bad"
    once "$bad" "grammar match --file $bad"
    t 2 "sample --logits $bad" $sift sample "$tmp/g.yaml" --logits "$bad"
    once "$bad" "sample --logits $bad"
    t 2 "inspect --logits $bad" $sift inspect "$tmp/g.yaml" --logits "$bad"
    once "$bad" "inspect --logits $bad"
    t 2 "sample of config $bad" $sift sample "$bad" --logits "$tmp/rows.npy"
    once "$bad" "sample of config $bad"
    t 2 "inspect of config $bad" $sift inspect "$bad" --logits "$tmp/rows.npy"
    once "$bad" "inspect of config $bad"
    t 2 "bench of config $bad" $sift bench "$bad" --reps 1
    once "$bad" "bench of config $bad"
done

# Files a config names: a vocabulary and a grammar file that are FIFOs
# (through symbolic links with the expected extensions).
ln -s "$tmp/fifo" "$tmp/v.tiktoken" || exit 99
ln -s "$tmp/fifo" "$tmp/f.gbnf" || exit 99
printf 'vocab: v.tiktoken\nchain: [greedy]\n' >"$tmp/cv.yaml"
t 1 "check of a config whose vocab is a FIFO" $sift check "$tmp/cv.yaml"
grep -q "cv.yaml:1:8: error: vocab: $tmp/v.tiktoken: not a regular file (a FIFO)" "$tmp/out" ||
    { echo "FAIL vocab FIFO message: $(cat "$tmp/out")"; fail=1; }
t 1 "plan of a config whose vocab is a FIFO" $sift plan "$tmp/cv.yaml"
printf 'chain: [greedy]\ngrammar:\n  file: f.gbnf\n' >"$tmp/cf.yaml"
t 1 "check of a config whose grammar file is a FIFO" $sift check "$tmp/cf.yaml"
grep -q "cf.yaml:3:9: error: grammar: $tmp/f.gbnf: not a regular file (a FIFO)" "$tmp/out" ||
    { echo "FAIL grammar FIFO message: $(cat "$tmp/out")"; fail=1; }

# One message per command names its file once.
printf 'root ::= "a\n' >"$tmp/bad.gbnf"
t 1 "grammar check of a bad grammar" $sift grammar check "$tmp/bad.gbnf"
grep -q "^$tmp/bad.gbnf:1:10: error: unterminated string literal" "$tmp/err" ||
    { echo "FAIL grammar check message: $(cat "$tmp/err")"; fail=1; }
once "$tmp/bad.gbnf" "grammar check of a bad grammar"
# A token reference (which needs a vocabulary) does not hide the
# grammar's own error after it; alone, it is the error.
printf 'root ::= <think> undefined-rule [z-a]\n' >"$tmp/tok.gbnf"
t 1 "grammar check of a token reference and a reversed range" $sift grammar check "$tmp/tok.gbnf"
grep -q "^$tmp/tok.gbnf:1:34: error: reversed range" "$tmp/err" ||
    { echo "FAIL grammar check after a token reference: $(cat "$tmp/err")"; fail=1; }
printf 'root ::= "a" <think>\n' >"$tmp/tok.gbnf"
t 1 "grammar check of a token reference alone" $sift grammar check "$tmp/tok.gbnf"
grep -q "^$tmp/tok.gbnf:1:14: error: token references need a vocabulary" "$tmp/err" ||
    { echo "FAIL grammar check of a token reference: $(cat "$tmp/err")"; fail=1; }
t 2 "grammar check of a missing file" $sift grammar check "$tmp/nope.gbnf"
once "$tmp/nope.gbnf" "grammar check of a missing file"
printf 'chain: [greedy]\ngrammar:\n  text: root ::= "a"\n' >"$tmp/nv.yaml"
# sift check warns (an error with --werror) where plan refuses: a
# runtime that passes the model's vocabulary can build the chain.
t 1 "check --werror of a grammar without vocabulary" $sift check --werror "$tmp/nv.yaml"
grep -q "^$tmp/nv.yaml:3:9: warning: the grammar needs a vocabulary" "$tmp/out" ||
    { echo "FAIL check: no 'needs a vocabulary' warning ($(cat "$tmp/out" "$tmp/err"))"; fail=1; }
once "$tmp/nv.yaml:3:9: warning" "check of a grammar without vocabulary"
t 1 "plan of a grammar without vocabulary" $sift plan "$tmp/nv.yaml"
# plan refuses it at the place and in the words of check's warning
grep -q "^$tmp/nv.yaml:3:9: error: the grammar needs a vocabulary (name one with 'vocab', or pass one to sift_config_build_chain)$" "$tmp/err" ||
    { echo "FAIL plan: no 'needs a vocabulary' at 3:9 ($(cat "$tmp/out" "$tmp/err"))"; fail=1; }
once "$tmp/nv.yaml:3:9: error" "plan of a grammar without vocabulary"
for cmd in sample inspect; do
    t 1 "$cmd of a grammar without vocabulary" $sift $cmd "$tmp/nv.yaml" --logits "$tmp/rows.npy"
    once "$tmp/nv.yaml" "$cmd of a grammar without vocabulary"
done
printf 'vocab: %s\nchain: [greedy]\n' "$tmp/missing.gguf" >"$tmp/mv.yaml"
t 1 "check of a missing vocabulary" $sift check "$tmp/mv.yaml"
once "$tmp/missing.gguf" "check of a missing vocabulary"
printf 'IQ== 0\nIg== x\n' >"$tmp/bad.tiktoken"
printf 'vocab: bad.tiktoken\nchain: [greedy]\n' >"$tmp/bv.yaml"
for cmd in check plan; do
    t 1 "$cmd of a corrupt vocabulary" $sift $cmd "$tmp/bv.yaml"
    grep -q "^$tmp/bad.tiktoken:2:6: error: bad rank" "$tmp/out" "$tmp/err" ||
        grep -q ":$tmp/bad.tiktoken:2:6: error: bad rank" "$tmp/out" "$tmp/err" ||
        { echo "FAIL $cmd corrupt vocabulary: $(cat "$tmp/out" "$tmp/err")"; fail=1; }
    once "$tmp/bad.tiktoken" "$cmd of a corrupt vocabulary"
done
t 1 "sample of a corrupt vocabulary" $sift sample "$tmp/bv.yaml" --logits "$tmp/rows.npy"
once "$tmp/bad.tiktoken" "sample of a corrupt vocabulary"

# sift check judges what needs a vocabulary as sift plan does, at the
# same place with the same words: DRY's sequence breakers need one.
printf 'chain:\n  - dry: {multiplier: 0.8}\n  - dist\n' >"$tmp/dry.yaml"
t 1 "check --werror of dry without a vocabulary" $sift check --werror "$tmp/dry.yaml"
grep -q "^$tmp/dry.yaml:2:5: warning: dry has sequence breakers and no vocabulary was given; " "$tmp/out" ||
    { echo "FAIL check dry: $(cat "$tmp/out")"; fail=1; }
t 1 "plan of dry without a vocabulary" $sift plan "$tmp/dry.yaml"
grep -q "^$tmp/dry.yaml:2:5: error: dry has sequence breakers and no vocabulary was given$" "$tmp/err" ||
    { echo "FAIL plan dry: $(cat "$tmp/err")"; fail=1; }

echo "check_cli_files: done"
exit $fail

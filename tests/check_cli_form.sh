#!/bin/sh
# check_cli_form.sh - `sift check`, `sift plan` and `sift sample` take a
# request body in the form the command line names (--form openai,
# --form llama.cpp): the form is never guessed from the keys, the body
# samples the tokens of the chain `sift check --print` says it maps to,
# and a --form the document contradicts is an error. The .npy rows come
# from tests/gen_npy.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
sift=./sift
gen=tests/gen_npy
fail=0
tmp=${TMPDIR:-/tmp}/sift_cli_form.$$
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
$gen "$tmp/rows.npy" 40 $V 11 || exit 99
# An OpenAI body: no form key, so the command line chooses (without
# --form it is a llama-server body: top_k 40 first, temperature last).
cat >"$tmp/req.json" <<'JSON'
{"model": "m", "seed": 9,
 "temperature": 0.7, "top_p": 0.9, "min_p": 0.02, "top_k": 50,
 "frequency_penalty": 0.4, "presence_penalty": 0.2, "max_tokens": 30}
JSON

# plan: the OpenAI order with --form openai, llama.cpp's without it
t 0 "plan --form openai" $sift plan --form openai "$tmp/req.json"
grep -q '^   0  penalties ' "$tmp/out" && grep -q '^   1  temp ' "$tmp/out" &&
    grep -q '^   2  top_k ' "$tmp/out" && grep -q '^   3  min_p ' "$tmp/out" ||
    { echo "FAIL plan --form openai: not vLLM's order"; cat "$tmp/out"; fail=1; }
t 0 "plan without --form" $sift plan "$tmp/req.json"
grep -q '^   1  top_k ' "$tmp/out" ||
    { echo "FAIL plan without --form: not llama.cpp's chain"; cat "$tmp/out"; fail=1; }
t 2 "plan --form bogus" $sift plan --form vllm "$tmp/req.json"
grep -q "openai, llama.cpp or document" "$tmp/err" ||
    { echo "FAIL plan --form bogus: message"; fail=1; }

# check --print writes the chain form; that chain samples the same tokens
t 0 "check --print --form openai" $sift check -q --print --form openai "$tmp/req.json"
grep -v 'warning:' "$tmp/out" >"$tmp/chain.yaml"
t 0 "the printed chain loads" $sift check -q "$tmp/chain.yaml"
t 0 "sample --form openai" $sift sample --form openai "$tmp/req.json" --logits "$tmp/rows.npy"
cp "$tmp/out" "$tmp/tok_req"
t 0 "sample the printed chain" $sift sample "$tmp/chain.yaml" --logits "$tmp/rows.npy"
cmp -s "$tmp/out" "$tmp/tok_req" ||
    { echo "FAIL sample --form openai: tokens differ from the printed chain's"; fail=1; }
t 0 "sample --form openai --slice 8" $sift sample --form openai "$tmp/req.json" \
    --logits "$tmp/rows.npy" --slice 8
cmp -s "$tmp/out" "$tmp/tok_req" ||
    { echo "FAIL sample --form openai --slice 8: tokens differ"; fail=1; }
[ "$(wc -l <"$tmp/tok_req")" -eq 40 ] || { echo "FAIL sample: not 40 tokens"; fail=1; }

# a form key the command line contradicts; the same key agreeing
printf '{"form": "llama.cpp", "top_k": 3}\n' >"$tmp/llama.json"
t 1 "check --form openai on a llama.cpp body" $sift check -q --form openai "$tmp/llama.json"
grep -q "llama.json:1:10: error: form 'llama.cpp' differs" "$tmp/out" ||
    { echo "FAIL check --form conflict: message"; cat "$tmp/out"; fail=1; }
t 0 "check --form llama.cpp" $sift check -q --form llama.cpp "$tmp/llama.json"
t 1 "sample --form openai on a llama.cpp body" $sift sample --form openai "$tmp/llama.json" \
    --logits "$tmp/rows.npy"
exit $fail

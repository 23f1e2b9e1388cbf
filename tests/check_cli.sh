#!/bin/sh
# check_cli.sh - the sift command's contract: exit statuses of `sift
# check` (0 valid, 1 invalid, 2 usage or I/O), --help for sift and every
# subcommand, --version, and a closed stdout reported as an error with a
# non-zero status (BAD_INPUTS F-07).
# Absolute, so that paths stay right after a cd and inside configs written
# to a temporary directory (make distcheck passes a relative srcdir).
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
sift=./sift
fail=0
t() { # t WANT_STATUS DESCRIPTION CMD...
    want=$1 desc=$2
    shift 2
    "$@" >/dev/null 2>&1
    got=$?
    if [ "$got" != "$want" ]; then
        echo "FAIL $desc: exit status $got, expected $want"
        fail=1
    fi
}
valid=$srcdir/tests/data/config-valid/p13_seed_max.yaml
warn=$srcdir/tests/data/config-valid/p15_stage_twice.yaml
invalid=$srcdir/tests/data/config-invalid/p14_no_selector.yaml
t 0 "check of a valid config" $sift check "$valid"
t 0 "check of a config with warnings" $sift check "$warn"
t 1 "check --werror of a config with warnings" $sift check --werror "$warn"
t 1 "check of an invalid config" $sift check "$invalid"
t 1 "check of a valid and an invalid config" $sift check "$valid" "$invalid"
t 2 "check of a missing file" $sift check "$srcdir/no/such.yaml"
t 2 "check of a directory" $sift check "$srcdir/tests"
t 2 "check of a missing and an invalid file" $sift check "$invalid" "$srcdir/no/such.yaml"
t 2 "check with no file" $sift check
t 2 "check with an unknown option" $sift check --frobnicate "$valid"
t 2 "sift with no command" $sift
t 2 "sift with an unknown command" $sift frobnicate
for cmd in "" check demo; do
    t 0 "sift $cmd --help" $sift $cmd --help
    out=$($sift $cmd --help 2>&1)
    case $out in
    usage:*) ;;
    *) echo "FAIL sift $cmd --help prints no usage"; fail=1 ;;
    esac
done
t 0 "sift --version" $sift --version
$sift --version | grep -q '^sift [0-9][0-9.]*$' || { echo "FAIL --version output"; fail=1; }

# Diagnostics go to stdout in GCC form; the summary line follows.
out=$($sift check "$invalid")
echo "$out" | grep -q 'p14_no_selector.yaml:4:5: error: chain must end with' ||
    { echo "FAIL check output: $out"; fail=1; }
echo "$out" | tail -n 1 | grep -q ': 1 error, 0 warnings$' || { echo "FAIL summary: $out"; fail=1; }

# F-07: stdout closed. The command must fail with a message, not crash.
err=$($sift check "$valid" 2>&1 >&-)
st=$?
[ "$st" -ne 0 ] || { echo "FAIL closed stdout: exit status 0"; fail=1; }
echo "$err" | grep -q 'cannot write output' || { echo "FAIL closed stdout: no message ($err)"; fail=1; }
err=$($sift --help 2>&1 >&-)
[ $? -ne 0 ] || { echo "FAIL closed stdout (--help): exit status 0"; fail=1; }

# sift grammar from-schema / match --schema (docs/json-schema.md): 0
# accepted, 1 rejected, 2 a schema that cannot be compiled (located).
tmp=${TMPDIR:-/tmp}/sift_cli_schema.$$
mkdir -p "$tmp"
printf '{"type":"object","properties":{"n":{"type":"integer","maximum":9}},"required":["n"]}' >"$tmp/s.json"
printf '{"type":"object",\n "properties":{"n":{"not":{"pattern":"1"}}}}' >"$tmp/bad.json"
t 0 "grammar from-schema" $sift grammar from-schema "$tmp/s.json"
$sift grammar from-schema "$tmp/s.json" | grep -q '^root ::= ' || { echo "FAIL from-schema prints no root rule"; fail=1; }
t 0 "grammar match --schema, accepted" $sift grammar match --schema "$tmp/s.json" --text '{"n":7}'
t 1 "grammar match --schema, rejected" $sift grammar match --schema "$tmp/s.json" --text '{"n":10}'
t 2 "grammar match --schema, schema not compiled" $sift grammar match --schema "$tmp/bad.json" --text '{}'
t 2 "grammar from-schema, schema not compiled" $sift grammar from-schema "$tmp/bad.json"
t 0 "grammar match --schema --ignore-unsupported" $sift grammar match --schema "$tmp/bad.json" --ignore-unsupported --text '{"n":1}'
t 2 "grammar match --schema and a grammar file" $sift grammar match "$tmp/s.json" --schema "$tmp/s.json" --text '{}'
err=$($sift grammar from-schema "$tmp/bad.json" 2>&1 >/dev/null)
case $err in
*"bad.json:2:27: #/properties/n/not: 'not' is not supported") ;;
*) echo "FAIL from-schema message: $err"; fail=1 ;;
esac
rm -rf "$tmp"

# sift bench maskbench over four hand-written files (tests/data/maskbench-mini:
# two schemas that pass, one that does not compile, one file that is not
# *.json): the counts are exact, the times are not checked.
mb=$srcdir/tests/data/maskbench-mini
cl=$srcdir/tests/data/cl100k_base.tiktoken
t 0 "bench maskbench" $sift bench maskbench "$mb" --vocab "$cl"
t 2 "bench maskbench without a vocabulary" $sift bench maskbench "$mb"
t 2 "bench maskbench of a missing directory" $sift bench maskbench "$srcdir/no/such" --vocab "$cl"
out=$($sift bench maskbench "$mb" --vocab "$cl" --json)
case $out in
'{"schemas": 3, "passing": 2, "compile_errors": 1, "validation_errors": 0, "invalidation_errors": 0, "timeouts": 0, "tests": 6, "tokens": 40, "mask_us": {"n": 36,'*) ;;
*) echo "FAIL bench maskbench counts: $out"; fail=1 ;;
esac
err=$($sift bench maskbench "$mb" --vocab "$cl" --verbose 2>&1 >/dev/null)
case $err in
*"c_unsupported.json: compile error: schema:1:24: #/not: 'not' is not supported"*) ;;
*) echo "FAIL bench maskbench --verbose: $err"; fail=1 ;;
esac
echo "check_cli: done"
exit $fail

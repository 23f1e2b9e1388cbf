#!/bin/sh
# Generation fuzz of the JSON Schema converter: samples texts from the
# grammar of each schema in tests/data/schema-genfuzz (a random walk over
# the bytes the grammar accepts, tests/schema_genfuzz.c) and checks every
# complete one with python3-jsonschema (tests/schema_genfuzz.py). A
# sample the schema rejects (or that is not JSON) fails the run.
#
#     tests/schema_genfuzz.sh SECONDS [GENFUZZ_BINARY]
#
# runs rounds over the corpus, each with new seeds, until SECONDS have
# passed (at least one round). The binary defaults to
# $GENFUZZ, else tests/schema_genfuzz in the build directory
# (`make tests/schema_genfuzz`, or `make schema-genfuzz SECONDS=60`).
# Exit 0 clean, 1 on a bad sample, 77 when the validator is missing.
set -u
secs=${1:-60}
bin=${2:-${GENFUZZ:-./tests/schema_genfuzz}}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON_JSONSCHEMA:-/usr/bin/python3}
if ! "$py" -c 'import jsonschema' 2>/dev/null; then
    echo "schema_genfuzz: $py cannot import jsonschema: skipped"
    exit 77
fi
if [ ! -x "$bin" ]; then
    echo "schema_genfuzz: no binary $bin (make tests/schema_genfuzz)" >&2
    exit 2
fi
tmp=${TMPDIR:-/tmp}/schema_genfuzz.$$
trap 'rm -f "$tmp"' EXIT
end=$(($(date +%s) + secs))
seed=${SEED:-$(date +%s)}
rounds=0 samples=0
while :; do
    for s in "$here"/data/schema-genfuzz/*.json; do
        seed=$((seed + 1))
        "$bin" "$s" "$seed" 40 160 > "$tmp"
        rc=$?
        if [ $rc -ne 0 ]; then
            echo "schema_genfuzz: $s (seed $seed): generator exit $rc" >&2
            exit 1
        fi
        if ! "$py" "$here/schema_genfuzz.py" "$s" < "$tmp"; then
            echo "schema_genfuzz: $s (seed $seed): the grammar accepted the samples above" >&2
            exit 1
        fi
        samples=$((samples + $(tr -cd '\000' < "$tmp" | wc -c)))
    done
    rounds=$((rounds + 1))
    [ "$(date +%s)" -ge "$end" ] && break
done
echo "schema_genfuzz: $rounds rounds, $samples samples, all valid"

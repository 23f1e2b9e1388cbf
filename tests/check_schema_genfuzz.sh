#!/bin/sh
# make check's short run of the JSON Schema generation fuzz
# (tests/schema_genfuzz.sh): one round over the corpus with fixed seeds,
# a few seconds. Longer runs: `make schema-genfuzz SECONDS=60`.
#
# First, the reference validator's reading of patterns (ECMA-262, as JSON
# Schema has them): under patternProperties ^\S+$, the key "a\n" does not
# match (Python's own `$` would match before the final newline), so its
# value falls to additionalProperties, {"const": null}; the key "a" does
# match, so null is invalid there. A validator reading the patterns with
# Python's meaning failed a CI run on such a key.
top=${srcdir:-.}
py=${PYTHON_JSONSCHEMA:-/usr/bin/python3}
if "$py" -c 'import jsonschema' 2>/dev/null; then
    s="$top/tests/data/schema-genfuzz/pp_nonspace.json"
    if ! printf '{"a\\n":null}\000' | "$py" "$top/tests/schema_genfuzz.py" "$s"; then
        echo "check_schema_genfuzz: the validator read ^\\S+\$ as Python's re does" >&2
        exit 1
    fi
    if printf '{"a":null}\000' | "$py" "$top/tests/schema_genfuzz.py" "$s" >/dev/null; then
        echo "check_schema_genfuzz: the validator accepted null under ^\\S+\$" >&2
        exit 1
    fi
fi
SEED=1 exec sh "$top/tests/schema_genfuzz.sh" 1 ./tests/schema_genfuzz

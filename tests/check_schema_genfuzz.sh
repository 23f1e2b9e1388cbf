#!/bin/sh
# make check's short run of the JSON Schema generation fuzz
# (tests/schema_genfuzz.sh): one round over the corpus with fixed seeds,
# a few seconds. Longer runs: `make schema-genfuzz SECONDS=60`.
SEED=1 exec sh "${srcdir:-.}/tests/schema_genfuzz.sh" 1 ./tests/schema_genfuzz

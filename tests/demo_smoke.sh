#!/bin/sh
# demo_smoke.sh - the README's demo runs, and its slice run reproduces
# every whole-row token.
out=$(./sift demo --quiet --steps 8) || { echo "sift demo failed"; exit 1; }
echo "$out"
echo "$out" | grep -q 'exact: 8/8' || { echo "the slice run diverged"; exit 1; }

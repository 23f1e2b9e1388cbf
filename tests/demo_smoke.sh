#!/bin/sh
# demo_smoke.sh - the README's demo runs, and its clone replays the same
# tokens.
out=$(./sift demo --quiet --steps 8) || { echo "sift demo failed"; exit 1; }
echo "$out"
echo "$out" | grep -q 'deterministic: 8/8' || { echo "demo is not deterministic"; exit 1; }

#!/usr/bin/env bash
# tests/fuzz/build_vocab_hf.sh [OUT] - builds the fuzz_vocab_hf libFuzzer target
# (clang, ASan + UBSan) as OUT (default _build/fuzz/fuzz_vocab_hf), the same
# way as the configuration loader's (build_config.sh).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
exec bash "$top/tests/fuzz/build_config.sh" "${1:-$top/_build/fuzz/fuzz_vocab_hf}" fuzz_vocab_hf

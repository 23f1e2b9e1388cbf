#!/bin/sh
# check_vzeroupper.sh - no vector kernel of the built library calls,
# jumps to or returns into other code with the upper halves of the
# vector registers dirty. GCC leaves out the vzeroupper it owes when an
# AVX2 or AVX-512 kernel ends in a call to a scalar helper, and the SSE
# code after it then ran about 4 times slower on this project's AMD EPYC
# host (docs/samplers.md, "The float-certified draw"); the kernels call
# sift__vzeroupper() (src/core/simd.h) first. This reads the library's
# disassembly in address order: a %ymm or %zmm operand marks a function
# dirty, a vzeroupper clean, and a call, a return or a jump to another
# function while dirty is reported (a jump to a function's cold part,
# which GCC splits off, is the same function). Skipped (77) without objdump or a
# built library. Run from the build directory (make check does).
command -v objdump >/dev/null 2>&1 || exit 77
lib=
for f in .libs/libsift.so .libs/libsift.a; do
    [ -f "$f" ] && { lib=$f; break; }
done
[ -n "$lib" ] || exit 77
out=$(objdump -d --no-show-raw-insn "$lib" | awk '
/^[0-9a-f]+ <.*>:$/ { fn = $2; dirty = 0; next }
/vzeroupper/ { dirty = 0; next }
/%[yz]mm/ { dirty = 1; next }
/\tjmp +[0-9a-f]+ <[^+]*\.cold>$/ { next }
/\tcall|\tret|\tjmp +[0-9a-f]+ <[^+]*>$/ { if (dirty) print fn, $0 }')
if [ -n "$out" ]; then
    echo "check_vzeroupper: wide registers dirty at a call, jump or return:"
    echo "$out"
    exit 1
fi
echo "check_vzeroupper: $lib: no call, jump or return after a wide operation without vzeroupper"
exit 0

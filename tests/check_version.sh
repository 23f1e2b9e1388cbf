#!/bin/sh
# check_version.sh - the version is written once (configure.ac) and every
# copy agrees: configure's PACKAGE_VERSION (in the environment, from
# Makefile.am), SIFT_VERSION_STRING and SIFT_VERSION_MAJOR/MINOR/PATCH of
# the generated include/sift_version.h, and `sift --version`, which prints
# the run-time sift_version() (tests/check_chain.c compares the macros
# with the run-time calls inside one program), and the .TH lines of the
# man pages.
: "${SIFT_PACKAGE_VERSION:?set by Makefile.am}"
hdr=include/sift_version.h
[ -f "$hdr" ] || { echo "FAIL $hdr not generated"; exit 1; }
fail=0
str=$(sed -n 's/^#define SIFT_VERSION_STRING "\(.*\)"$/\1/p' "$hdr")
maj=$(sed -n 's/^#define SIFT_VERSION_MAJOR \([0-9]*\)$/\1/p' "$hdr")
min=$(sed -n 's/^#define SIFT_VERSION_MINOR \([0-9]*\)$/\1/p' "$hdr")
pat=$(sed -n 's/^#define SIFT_VERSION_PATCH \([0-9]*\)$/\1/p' "$hdr")
[ "$str" = "$SIFT_PACKAGE_VERSION" ] ||
    { echo "FAIL SIFT_VERSION_STRING is '$str', configure says '$SIFT_PACKAGE_VERSION'"; fail=1; }
[ "$maj.$min.$pat" = "$SIFT_PACKAGE_VERSION" ] ||
    { echo "FAIL SIFT_VERSION_MAJOR.MINOR.PATCH is '$maj.$min.$pat', configure says '$SIFT_PACKAGE_VERSION'"; fail=1; }
run=$(./sift --version) || { echo "FAIL sift --version failed"; exit 1; }
[ "$run" = "sift $SIFT_PACKAGE_VERSION" ] ||
    { echo "FAIL sift --version prints '$run', configure says '$SIFT_PACKAGE_VERSION'"; fail=1; }
# The man pages are written by hand; their header names MAJOR.MINOR.
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
for m in "$srcdir/docs/sift.1" "$srcdir/docs/sift.3"; do
    grep -q "^\.TH .*\"sift $maj\.$min\"" "$m" ||
        { echo "FAIL $m does not say \"sift $maj.$min\" in its .TH line"; fail=1; }
done
[ "$fail" = 0 ] && echo "check_version: $SIFT_PACKAGE_VERSION everywhere"
exit $fail

#!/usr/bin/env bash
# tests/fuzz/version_h.sh DIR - writes DIR/sift_version.h from
# include/sift_version.h.in with the version configure.ac defines (as
# m4_define([sift_major], [N]) and its minor and patch twins), so that a
# fuzz build needs no configure run.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
inc=$1
mkdir -p "$inc"
part() { sed -n "s/^m4_define(\[sift_$1\], \[\([0-9]*\)\])/\1/p" "$top/configure.ac"; }
major=$(part major)
minor=$(part minor)
patch=$(part patch)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] || {
    echo "version_h.sh: no version in configure.ac" >&2
    exit 1
}
ver=$major.$minor.$patch
sed -e "s/@SIFT_VERSION_MAJOR@/$major/" -e "s/@SIFT_VERSION_MINOR@/$minor/" \
    -e "s/@SIFT_VERSION_PATCH@/$patch/" -e "s/@PACKAGE_VERSION@/$ver/" \
    "$top/include/sift_version.h.in" >"$inc/sift_version.h"

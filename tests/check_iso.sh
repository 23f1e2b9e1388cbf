#!/bin/sh
# check_iso.sh - every source file is ISO C11 (-std=c11 -pedantic-errors:
# no `return (void)expr;` in a void function, no GNU extensions) and no
# static function takes a name the C library declares under _GNU_SOURCE
# (truncate, finite, index, ...): each file is compiled with the glibc
# headers force-included first, so such a name is a "static declaration
# follows non-static declaration" error. Syntax only, no objects.
: "${CC:?set by Makefile.am}"
srcdir=$(cd "${srcdir:-.}" && pwd) || exit 99
inc=""
for h in stdlib.h stdio.h string.h strings.h math.h unistd.h signal.h time.h \
    fcntl.h ctype.h search.h sys/stat.h sys/select.h sys/time.h dirent.h \
    libgen.h pthread.h; do
    inc="$inc -include $h"
done
fail=0
n=0
for f in "$srcdir"/src/*/*.c; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    $CC -std=c11 -pedantic-errors -D_GNU_SOURCE -DSIFT_BUILDING -fsyntax-only $inc \
        -I"$srcdir/include" -Iinclude -I"$srcdir/src" $SIFT_ISO_CFLAGS "$f" ||
        { echo "FAIL $f is not ISO C11, or shadows a libc name under _GNU_SOURCE"; fail=1; }
done
[ "$fail" = 0 ] && echo "check_iso: $n files are ISO C11 and shadow no libc name"
exit $fail

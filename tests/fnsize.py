#!/usr/bin/env python3
"""fnsize.py - function and file sizes of src/, against the house limits.

A function is counted from a line that is exactly '{' to the next line
that is exactly '}', both included (clang-format puts a function's braces
alone at column 0, and nothing else there). Prints every function over
--fn lines (default 100) with its file and the line of its signature,
and every source file over --file lines (default 1500).

Exit status: 0 when at most --max-over functions are over --fn lines,
none is over --fn-hard lines (default 200) and no file is over --file
lines; 1 otherwise. Run from the top of the tree: python3 tests/fnsize.py
"""
import argparse
import glob
import sys


def functions(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    start = None
    for i, line in enumerate(lines):
        if line == "{":
            start = i
        elif line == "}" and start is not None:
            # the signature: back over the lines of the declarator
            j = start - 1
            while j > 0 and lines[j - 1].strip() and not lines[j - 1].startswith(
                    ("}", "/*", " *", "#")) and not lines[j - 1].endswith(";"):
                j -= 1
            yield i - start + 1, j + 1
            start = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fn", type=int, default=100)
    ap.add_argument("--fn-hard", type=int, default=200)
    ap.add_argument("--max-over", type=int, default=8)
    ap.add_argument("--file", type=int, default=1500)
    a = ap.parse_args()
    paths = sorted(glob.glob("src/**/*.c", recursive=True))
    if not paths:
        sys.exit("fnsize.py: no src/**/*.c here; run it from the top of the tree")
    big, long_files = [], []
    for p in paths:
        n_lines = open(p, encoding="utf-8").read().count("\n")
        if n_lines > a.file:
            long_files.append((n_lines, p))
        big += [(n, p, at) for n, at in functions(p) if n > a.fn]
    big.sort(reverse=True)
    print("%d functions over %d lines" % (len(big), a.fn))
    for n, p, at in big:
        print("  %4d  %s:%d" % (n, p, at))
    print("%d files over %d lines" % (len(long_files), a.file))
    for n, p in sorted(long_files, reverse=True):
        print("  %5d  %s" % (n, p))
    bad = len(big) > a.max_over or any(n > a.fn_hard for n, _, _ in big) or long_files
    if bad:
        print("over the limits: at most %d functions over %d lines, none over %d, no file "
              "over %d lines" % (a.max_over, a.fn, a.fn_hard, a.file))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

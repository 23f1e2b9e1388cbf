"""Builds sift's Python package: the C extension sift._sift over the
public header include/sift.h, plus the pure-Python package `sift`.

Where libsift comes from, in this order:
  1. SIFT_BUILD_DIR: a configured and built source tree (out of tree is
     fine): headers from the checkout next to this file and from the
     build directory, the library from BUILD_DIR/.libs, found at run time
     through an rpath;
  2. pkg-config sift (after `make install`).
Build offline with `pip install --no-build-isolation ./python`.
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["c-ext/" + f for f in ("module.c", "errors.c", "buffers.c", "vocab.c",
                                   "grammar.c", "chain.c", "batch.c", "workspace.c")]


def library_flags():
    build = os.environ.get("SIFT_BUILD_DIR")
    if build:
        build = os.path.abspath(build)
        src = os.environ.get("SIFT_SOURCE_DIR", os.path.dirname(HERE))
        libs = os.path.join(build, ".libs")
        if not os.path.exists(os.path.join(libs, "libsift.so")):
            raise SystemExit("sift: %s has no .libs/libsift.so: build sift first (make)" % build)
        return dict(include_dirs=[os.path.join(src, "include"), os.path.join(build, "include")],
                    library_dirs=[libs], runtime_library_dirs=[libs], libraries=["sift"])
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags", "sift"], text=True)
        libs = subprocess.check_output(["pkg-config", "--libs", "sift"], text=True)
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit("sift: libsift not found: install it (make install; pkg-config sift) "
                         "or set SIFT_BUILD_DIR to a built source tree")
    flags = dict(include_dirs=[], library_dirs=[], runtime_library_dirs=[], libraries=[])
    for tok in shlex.split(cflags):
        if tok.startswith("-I"):
            flags["include_dirs"].append(tok[2:])
    for tok in shlex.split(libs):
        if tok.startswith("-L"):
            flags["library_dirs"].append(tok[2:])
            flags["runtime_library_dirs"].append(tok[2:])
        elif tok.startswith("-l"):
            flags["libraries"].append(tok[2:])
    return flags


ext = Extension(
    "sift._sift",
    sources=SOURCES,
    depends=["c-ext/sift_py.h"],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                        "-fno-strict-aliasing"]
    + shlex.split(os.environ.get("SIFT_PY_CFLAGS", "")),
    **library_flags(),
)

# Always rebuild the extension: a build directory left by an install
# against another libsift (pip builds in the source tree) must not be
# reused with its rpath.
setup(ext_modules=[ext], options={"build_ext": {"force": True}})

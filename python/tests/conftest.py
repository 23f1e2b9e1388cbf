"""Shared fixtures of sift's Python tests.

The suite compares the binding with the C library itself, never with
itself: tokens with the `sift sample` CLI (SIFT_CLI, set by
.ci/test-python), masks with the C matcher's per-token answers, slices
with whole-row samples of the same chain.
"""
import os
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import sift

settings.register_profile("ci", max_examples=50, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def cli_path():
    p = os.environ.get("SIFT_CLI") or shutil.which("sift")
    return p if p and os.path.exists(p) else None


@pytest.fixture(scope="session")
def sift_cli():
    p = cli_path()
    if not p:
        pytest.skip("the sift CLI is not available (set SIFT_CLI)")
    return p


def run_cli_sample(cli, config_path, rows_path, history=None, slice_k=None):
    args = [cli, "sample", config_path, "--logits", rows_path, "--json"]
    if history:
        args += ["--history", ",".join(str(t) for t in history)]
    if slice_k:
        args += ["--slice", str(slice_k)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("sift sample failed (%d): %s" % (r.returncode, r.stderr))
    import json
    return json.loads(r.stdout)["tokens"]


# A small byte-level vocabulary: the 256 single bytes, some words, and an
# end-of-generation token (id EOS).
WORDS = [b"true", b"false", b"null", b'{"', b'":', b'",', b'"}', b"ab", b"abc", b"  ",
         b"\xc3\xa9", b"12", b"345"]
EOS = 256 + len(WORDS)


def small_pieces():
    return [bytes([i]) for i in range(256)] + WORDS


@pytest.fixture(scope="session")
def vocab():
    return sift.Vocab.from_pieces(small_pieces(), special={EOS: b"</s>"}, eog_ids=[EOS])


@pytest.fixture(scope="session")
def data_dir():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data")


def rng_row(seed, V, kind="peaked"):
    r = np.random.default_rng(seed)
    if kind == "flat":
        return r.uniform(-1, 1, V).astype(np.float32)
    row = r.normal(0, 2, V).astype(np.float32)
    hot = r.choice(V, size=min(V, 8), replace=False)
    row[hot] += r.uniform(5, 15, len(hot)).astype(np.float32)
    return row

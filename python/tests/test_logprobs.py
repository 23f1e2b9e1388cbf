"""Chain.sample_logprobs: the token of sample(), processed entries equal
to distribution(), raw entries equal to a float64 log-softmax."""
import math

import numpy as np
import pytest

import sift
from conftest import rng_row

YAML = "seed: 9\nchain:\n  - penalties: {last_n: 16, repeat: 1.3}\n  - top_k: 30\n" \
       "  - top_p: 0.95\n  - temperature: 0.8\n  - dist\n"


def test_sample_logprobs_is_sample_plus_both_kinds_of_logprobs():
    a, b = sift.Chain.from_yaml(YAML), sift.Chain.from_yaml(YAML)
    for step in range(8):
        row = rng_row(40 + step, 5000)
        dist = a.distribution(row)
        ta = a.sample(row)
        tb, lp = b.sample_logprobs(row, 5)
        assert ta == tb
        # processed: bitwise the distribution's p, in its order
        assert lp["n_support"] == len(dist)
        assert [(i, l, p) for i, l, _, p in lp["processed_top"]] == dist[:5]
        pid, _, plp, pp = lp["processed"]
        assert pid == tb and pp == dict((i, p) for i, _, p in dist)[tb]
        assert plp == pytest.approx(math.log(pp), rel=1e-14)
        # raw: a float64 log-softmax of the row
        x = row.astype(np.float64)
        ref = x - (x.max() + np.log(np.exp(x - x.max()).sum()))
        top = sorted(range(len(row)), key=lambda i: (-row[i], i))[:5]
        assert [e[0] for e in lp["raw_top"]] == top
        for i, _, l, _ in lp["raw_top"] + [lp["raw"]]:
            assert abs(l - ref[i]) <= 1e-9
        a.accept(ta)
        b.accept(tb)


def test_sample_logprobs_bad_requests_raise_and_change_nothing():
    a, b = sift.Chain.from_yaml(YAML), sift.Chain.from_yaml(YAML)
    row = rng_row(3, 100)
    with pytest.raises(sift.SiftError):
        b.sample_logprobs(row, 101)
    with pytest.raises(sift.SiftError):
        b.sample_logprobs(row, 2, raw=False, processed=False)
    assert a.sample(row) == b.sample_logprobs(row, 0, raw=False)[0]

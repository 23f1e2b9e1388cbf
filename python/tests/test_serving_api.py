"""The serving calls of the 0.3 API: the plan's device_k, shared
workspaces, and logprobs on slices (sample_slice_logprobs with row_lse),
each checked against whole rows of the same chain."""

import numpy as np
import pytest

import sift
from conftest import rng_row

YAML = "seed: 9\nchain:\n  - penalties: {last_n: 16, repeat: 1.3}\n  - top_k: 30\n" \
       "  - top_p: 0.95\n  - temperature: 0.8\n  - dist\n"


def row_lse(row):
    x = row.astype(np.float64)
    m = x.max()
    return float(m + np.log(np.exp(x - m).sum()))


def top_slice(row, k):
    ids = np.argpartition(-row, k - 1)[:k].astype(np.int64)
    return ids, row[ids].copy()


def test_plan_has_the_device_k():
    c = sift.Chain.from_yaml(YAML)
    p = c.plan()
    assert p.k > 0 and p.device_k == p.k + 8
    assert c.next_k().device_k == c.next_k().k + 8
    small = sift.Chain(seed=1, n_vocab=45).add_top_k(40).add_dist()
    assert small.plan().k == 40 and small.plan().device_k == 45  # at most n_vocab


def test_sample_slice_logprobs_equals_the_whole_rows():
    a, b = sift.Chain.from_yaml(YAML), sift.Chain.from_yaml(YAML)
    k = a.plan().device_k
    for step in range(8):
        row = rng_row(70 + step, 5000)
        ids, vals = top_slice(row, k)
        tr, lr = a.sample_logprobs(row, 4)
        ts, ls = b.sample_slice_logprobs(ids, vals, len(row), n=4, row_lse=row_lse(row))
        assert ts == tr
        assert ls["processed"] == lr["processed"]
        assert ls["processed_top"] == lr["processed_top"]
        assert [e[0] for e in ls["raw_top"]] == [e[0] for e in lr["raw_top"]]
        for (_, _, x, _), (_, _, y, _) in zip(ls["raw_top"] + [ls["raw"]],
                                              lr["raw_top"] + [lr["raw"]]):
            assert abs(x - y) <= 1e-9
        a.accept(tr)
        b.accept(ts)


def test_sample_slice_logprobs_needs_the_lse_or_the_row_for_raw_values():
    c = sift.Chain.from_yaml(YAML)
    row = rng_row(5, 2000)
    ids, vals = top_slice(row, c.plan().device_k)
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice_logprobs(ids, vals, len(row), n=2)
    assert e.value.status == sift.status.NEED_ROW
    # processed values alone need no LSE
    tok, lp = c.sample_slice_logprobs(ids, vals, len(row), n=2, raw=False)
    assert "raw" not in lp and lp["processed"][0] == tok
    # a bad LSE is an error with the C message, and changes nothing
    d = sift.Chain.from_yaml(YAML)
    with pytest.raises(sift.SiftError) as e:
        d.sample_slice_logprobs(ids, vals, len(row), row_lse=float("nan"))
    assert e.value.status == sift.status.ARG and "lse" in e.value.message
    d.accept(d.sample_slice_logprobs(ids, vals, len(row), raw=False)[0])
    d2 = sift.Chain.from_yaml(YAML)
    d2.accept(d2.sample(row))
    assert d.sample(row) == d2.sample(row)


def test_workspace_changes_no_token_and_outlives_close():
    ref = [sift.Chain.from_yaml(YAML) for _ in range(3)]
    with sift.Workspace(n_vocab=4000) as ws:
        chains = [sift.Chain.from_yaml(YAML) for _ in range(3)]
        for c in chains:
            c.set_workspace(ws)
    assert ws.closed
    with pytest.raises(sift.SiftError) as e:
        sift.Chain(seed=1).set_workspace(ws)
    assert e.value.status == sift.status.STATE
    for step in range(6):  # the chains keep the closed workspace's memory
        row = rng_row(100 + step, 4000)
        for c, r in zip(chains, ref):
            t = c.sample(row)
            assert t == r.sample(row)
            tok, lp = c.sample_logprobs(row, 3)
            assert (tok, lp) == r.sample_logprobs(row, 3)
            c.accept(t)
            r.accept(t)
    chains[0].set_workspace(None)
    assert chains[0].sample(rng_row(1, 4000)) == ref[0].sample(rng_row(1, 4000))
    ws.close()  # twice is a no-op


def test_workspace_bad_arguments():
    with pytest.raises(TypeError):
        sift.Chain(seed=1).set_workspace(object())
    with pytest.raises(sift.SiftError):
        sift.Workspace(n_vocab=-1)
    with pytest.raises(TypeError):
        sift.Workspace(4000)  # keyword only


def test_torch_slices_carry_the_row_lse_and_shards_combine_theirs():
    torch = pytest.importorskip("torch")
    import sift.torch as st
    V, half = 6000, 3000
    a, b = sift.Chain.from_yaml(YAML), sift.Chain.from_yaml(YAML)
    k = a.plan().device_k
    for step in range(6):
        row = rng_row(200 + step, V)
        x = torch.from_numpy(row).unsqueeze(0)
        whole = st.make_slices(x, k)
        assert abs(whole.row_lse[0] - row_lse(row)) <= 1e-9
        shards = [st.make_shard_slices(x[:, lo:lo + half], k, lo) for lo in (0, half)]
        merged = st.merge_shards(shards, k, V)
        assert abs(merged.row_lse[0] - row_lse(row)) <= 1e-9
        s = merged[0]
        tr, lr = a.sample_logprobs(row, 3)
        ts, ls = b.sample_slice_logprobs(s.ids, s.logits, V, tail_mass=s.tail_mass, n=3,
                                         row_lse=float(merged.row_lse[0]))
        assert ts == tr and ls["processed"] == lr["processed"]
        assert abs(ls["raw"][2] - lr["raw"][2]) <= 1e-9
        a.accept(tr)
        b.accept(ts)
    assert st.combine_lse([np.array([-np.inf]), np.array([-np.inf])])[0] == -np.inf
    assert st.combine_lse([np.array([0.0]), None]) is None


def test_request_forms_build_the_chain_they_describe():
    body = {"temperature": 0.7, "top_p": 0.9, "top_k": 50, "min_p": 0.05,
            "presence_penalty": 0.3, "max_tokens": 64, "seed": 3, "top_logprobs": 4,
            "logprobs": True}
    c = sift.Chain.from_request(body)
    assert c.config["form"] == "openai"
    assert c.config["logprobs"] == {"top_n": 4, "post_sampling": False}
    d = sift.Chain.from_yaml(c.config["description"])  # the chain form it maps to
    assert d.config["form"] == "document" and d.stages == c.stages
    for step in range(6):
        row = rng_row(300 + step, 3000)
        t = c.sample(row)
        assert t == d.sample(row)
        c.accept(t)
        d.accept(t)
    # the same body as text, the form given by the caller
    import json
    e = sift.Chain.from_yaml(json.dumps(body), form="openai")
    assert e.stages == c.stages and e.config == c.config
    assert sift.Chain.from_yaml('{"temperature": 0.5}', form="openai").config["logprobs"] is None
    assert sift.Chain(seed=1).add_dist().config is None


def test_request_form_errors_carry_the_c_message():
    with pytest.raises(ValueError) as e:
        sift.Chain.from_request({"temperature": 0.5}, form="anthropic")
    assert "form" in str(e.value)
    with pytest.raises(sift.SiftError) as e:  # a form key naming another form
        sift.Chain.from_yaml('{"form": "llama.cpp", "temperature": 0.5}', form="openai")
    assert "form" in e.value.message
    with pytest.raises(sift.SiftError) as e:
        sift.Chain.from_request({"top_p": "high"})
    assert "top_p" in str(e.value)

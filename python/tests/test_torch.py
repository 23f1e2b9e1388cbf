"""sift.torch on CPU tensors: slices give the whole row's token or call
the row hook, never a different token (bf16, fp16 and float32 rows, whole
rows and merged vocabulary shards); tail masses bound the true sums."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

torch = pytest.importorskip("torch")

import sift  # noqa: E402
import sift.torch as stt  # noqa: E402

CHAINS = [
    "seed: 7\nchain:\n  - top_k: 20\n  - temperature: 0.8\n  - dist\n",
    "seed: 8\nchain:\n  - temperature: 0.7\n  - top_p: 0.9\n  - dist\n",
    "seed: 9\nchain:\n  - penalties: {last_n: 8, repeat: 1.3}\n  - top_k: 10\n  - top_p: 0.95\n"
    "  - min_p: 0.05\n  - temperature: 0.8\n  - dist\n",
    "seed: 10\nchain:\n  - xtc: {probability: 0.5, threshold: 0.1}\n  - temperature: 0.8\n"
    "  - dist\n",
    "seed: 11\nchain:\n  - logit_bias: {3: 5.0, 7: -2.0}\n  - top_k: 5\n  - greedy\n",
    "seed: 12\nchain:\n  - temperature: 1.0\n  - dist\n",
]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def make_rows(seed, n, V, dtype, kind):
    g = torch.Generator().manual_seed(seed)
    if kind == "flat":
        x = torch.rand(n, V, generator=g) * 2 - 1
    else:
        x = torch.randn(n, V, generator=g) * 2
        hot = torch.randint(0, V, (n, 4), generator=g)
        x.scatter_add_(1, hot, torch.rand(n, 4, generator=g) * 10 + 5)
    return x.to(DTYPES[dtype])


def run(chain_yaml, rows, k, shards):
    """Samples every row twice: whole rows, and slices (with the hook)."""
    n, V = rows.shape
    whole = sift.Chain.from_yaml(chain_yaml)
    sliced = sift.Chain.from_yaml(chain_yaml)
    current = {}
    hooks = [0]

    def hook():
        hooks[0] += 1
        return current["row"]

    sliced.set_row_hook(hook)
    for i in range(n):
        row32 = rows[i].float().numpy()
        want = whole.sample(row32)
        whole.accept(want)
        extras = sliced.extras()
        if shards:
            bounds = np.linspace(0, V, shards + 1).astype(int)
            parts = [stt.make_shard_slices(rows[i:i + 1, a:b], k, a)
                     for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
            ex = None
            if extras:
                e = np.asarray(extras, dtype=np.int64)
                ex = [(e, rows[i, torch.as_tensor(e)].float().numpy())]
            s = stt.merge_shards(parts, k, V, extras=ex)[0]
        else:
            s = stt.make_slices(rows[i:i + 1], k, extras=[extras])[0]
        current["row"] = row32
        got = sliced.sample_slice_obj(s)
        assert got == want
        sliced.accept(got)
    return hooks[0]


@given(st.sampled_from(CHAINS), st.integers(0, 2**31), st.integers(8, 400),
       st.sampled_from(list(DTYPES)), st.sampled_from(["peaked", "flat"]),
       st.integers(1, 80), st.sampled_from([0, 0, 2, 3]))
def test_slices_give_the_whole_row_token_or_call_the_hook(chain, seed, V, dtype, kind, k,
                                                          shards):
    rows = make_rows(seed, 3, V, dtype, kind)
    run(chain, rows, k, shards)


def test_a_peaked_row_is_decided_on_the_slice():
    # Without the tail mass (the free bound (V - k) exp(l_min - m)) these
    # steps need the row; with it they are decided on 64 pairs.
    g = torch.Generator().manual_seed(1)
    rows = torch.randn(4, 5000, generator=g)
    rows[:, :3] += 20
    assert run(CHAINS[1], rows, 64, 0) == 0
    assert run(CHAINS[1], rows, 64, 4) == 0


@given(st.integers(0, 2**31), st.integers(2, 300), st.sampled_from(list(DTYPES)),
       st.integers(1, 40))
def test_tail_mass_is_an_upper_bound_of_the_exact_sum(seed, V, dtype, k):
    x = make_rows(seed, 2, V, dtype, "peaked")
    s = stt.make_slices(x, k)
    sh = stt.merge_shards([stt.make_shard_slices(x[:, :V // 2], k, 0),
                           stt.make_shard_slices(x[:, V // 2:], k, V // 2)], k, V)
    for sl in (s, sh):
        for i in range(2):
            row = x[i].float().numpy().astype(np.float64)
            m = row.max()
            inside = set(int(t) for t in sl.ids[i])
            exact = math.fsum(math.exp(v - m) for j, v in enumerate(row) if j not in inside)
            assert sl.tail_mass[i] >= exact
            assert sl.tail_mass[i] <= exact * (1 + 2**-18) + 2**-900
            # the prefix holds the row's k largest values (as a set)
            top = np.sort(row)[::-1][:min(k, V)]
            assert (np.sort(sl.logits[i].astype(np.float64))[::-1] == top).all()


def test_make_slices_ids_are_int64_and_values_float32():
    x = torch.randn(2, 100, dtype=torch.bfloat16)
    s = stt.make_slices(x, 10)
    assert s.ids.dtype == np.int64 and s.logits.dtype == np.float32
    assert s.ids.shape == (2, 10) and s.tail_mass.dtype == np.float64
    assert s.bytes_copied() == 2 * 10 * 8 + 2 * 8


def test_rows_of_minus_inf_have_no_candidate():
    x = torch.full((1, 10), float("-inf"))
    s = stt.make_slices(x, 3)
    c = sift.Chain(1).add_dist()
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice_obj(s[0])
    assert e.value.status == sift.status.NO_CANDIDATE

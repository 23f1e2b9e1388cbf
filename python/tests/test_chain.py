"""Chains through the binding: zero-copy rows, the type errors, slices,
the row hook, all-or-nothing calls, plans, verify, batches, threads."""
import threading
import tracemalloc

import numpy as np
import pytest

import sift
from conftest import rng_row

YAML = "seed: 5\nchain:\n  - penalties: {last_n: 16, repeat: 1.3}\n  - top_k: 30\n" \
       "  - top_p: 0.95\n  - temperature: 0.8\n  - dist\n"


def test_a_read_only_row_is_read_in_place():
    row = rng_row(1, 151936)
    row.flags.writeable = False
    c = sift.Chain.from_yaml(YAML)
    c.sample(row)  # sizes the chain's buffers
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(5):
        c.sample(row)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak - before < 4096  # a copy of the row would be 607,744 bytes


def test_torch_rows_equal_numpy_rows():
    torch = pytest.importorskip("torch")
    row = rng_row(2, 5000)
    a, b = sift.Chain.from_yaml(YAML), sift.Chain.from_yaml(YAML)
    for _ in range(5):
        t1, t2 = a.sample(row), b.sample(torch.from_numpy(row))
        assert t1 == t2
        a.accept(t1)
        b.accept(t2)
    assert b.sample(torch.from_numpy(row).requires_grad_()) == a.sample(row)


def test_rows_sift_cannot_read_in_place_are_type_errors():
    c = sift.Chain.from_yaml(YAML)
    row = rng_row(3, 100)
    with pytest.raises(TypeError, match="float64"):
        c.sample(row.astype(np.float64))
    with pytest.raises(TypeError, match="stride"):
        c.sample(np.repeat(row, 2)[::2])
    with pytest.raises(TypeError, match="dimensions"):
        c.sample(row.reshape(10, 10))
    with pytest.raises(TypeError, match="list"):
        c.sample(list(row))
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="bfloat16"):
        c.sample(torch.zeros(100, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="device meta"):
        c.sample(torch.zeros(100, device="meta"))
    with pytest.raises(TypeError, match="stride"):
        c.sample(torch.zeros(100, 2)[:, 0])


def test_slice_ids_may_be_int32_or_int64():
    row = rng_row(4, 2000)
    c = sift.Chain.from_yaml(YAML)
    k = c.plan().k + 1
    ids = np.argpartition(-row, k)[:k]
    t64 = c.clone().sample_slice(ids.astype(np.int64), row[ids], 2000)
    t32 = c.clone().sample_slice(ids.astype(np.int32), row[ids], 2000)
    assert t64 == t32 == c.clone().sample(row)


def test_extras_carry_raised_tokens():
    c = sift.Chain(3).add_logit_bias({17: 30.0, 5: -1.0}).add_top_k(4).add_greedy()
    assert c.extras() == [17]
    assert c.plan().max_extras >= 1
    row = rng_row(5, 1000)
    ids = np.argpartition(-row, 5)[:5]
    extras = (np.array([17, int(ids[0])]), np.array([row[17], row[ids[0]]], dtype=np.float32))
    assert c.sample_slice(ids, row[ids], 1000, extras=extras) == 17


def test_the_row_hook_serves_undecided_steps():
    row = rng_row(6, 3000, "flat")
    c = sift.Chain(1).add_temp(1.0).add_dist()
    calls = []
    c.set_row_hook(lambda: calls.append(1) or row)
    ids = np.argpartition(-row, 10)[:10]
    assert c.sample_slice(ids, row[ids], 3000) == sift.Chain(1).add_temp(1.0).add_dist().sample(row)
    assert calls and c.stats()["hook_calls"] == 1
    c.set_row_hook(None)
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice(ids, row[ids], 3000)
    assert e.value.status == sift.status.NEED_ROW


def test_an_exception_in_the_hook_is_the_cause_of_the_hook_error():
    row = rng_row(7, 500, "flat")
    c = sift.Chain(1).add_dist()

    def bad():
        raise KeyError("device lost")

    c.set_row_hook(bad)
    ids = np.argpartition(-row, 4)[:4]
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice(ids, row[ids], 500)
    assert e.value.status == sift.status.HOOK
    assert isinstance(e.value.__cause__, KeyError)
    c.set_row_hook(lambda: row[:10])  # wrong length
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice(ids, row[ids], 500)
    assert isinstance(e.value.__cause__, ValueError)


def test_a_hook_calling_its_own_chain_gets_a_state_error():
    row = rng_row(8, 500, "flat")
    c = sift.Chain(1).add_dist()
    c.set_row_hook(lambda: c.sample(row))
    ids = np.argpartition(-row, 4)[:4]
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice(ids, row[ids], 500)
    assert e.value.status == sift.status.HOOK
    assert isinstance(e.value.__cause__, sift.SiftError)
    assert e.value.__cause__.status == sift.status.STATE


def test_accept_prompt_is_all_or_nothing():
    row = np.zeros(100, dtype=np.float32)
    row[[1, 2]] = 5.0
    c = sift.Chain(1).add_penalties(8, 2.0).add_dist()
    fresh = c.distribution(row)
    with pytest.raises(sift.SiftError) as e:
        c.sample(row)
        c.accept_prompt([1, 2, 100])
    assert e.value.status == sift.status.TOKEN
    assert "tokens[2]" in e.value.message
    assert c.distribution(row) == fresh
    c.accept_prompt(np.array([1, 2], dtype=np.int64))
    assert c.distribution(row) != fresh


def test_a_failed_sample_changes_nothing():
    row = rng_row(9, 200)
    c = sift.Chain.from_yaml(YAML)
    twin = c.clone()
    bad = row.copy()
    bad[42] = np.nan
    with pytest.raises(sift.SiftError) as e:
        c.sample(bad)
    assert e.value.status == sift.status.ROW_VALUE and e.value.index == 42
    assert c.sample(row) == twin.sample(row)


def test_reset_and_clone_replay_the_same_tokens():
    rows = [rng_row(s, 300) for s in range(6)]
    c = sift.Chain.from_yaml(YAML)
    first = []
    for r in rows:
        first.append(c.sample(r))
        c.accept(first[-1])
    c.reset()
    again = []
    for r in rows:
        again.append(c.sample(r))
        c.accept(again[-1])
    assert first == again


def test_plans_and_distributions():
    c = sift.Chain.from_yaml(YAML)
    p = c.plan()
    assert p.k == 46 and p.guarantee in ("exact", "certified") and "top_k" in p.why
    assert [s.name for s in p.stages] == list(c.stages)
    assert c.next_k().k <= p.k
    row = rng_row(10, 1000)
    d = c.distribution(row)
    assert abs(sum(x[2] for x in d) - 1.0) < 1e-9 and len(d) <= 30
    lp = c.logprobs(row, 3)
    assert [i for i, _ in lp] == [x[0] for x in d[:3]]


def test_verify_equals_the_sequential_loop():
    rows = np.stack([rng_row(s, 400) for s in range(4)])
    a, b = sift.Chain.from_yaml(YAML), sift.Chain.from_yaml(YAML)
    seq = []
    for r in rows[:3]:
        t = a.sample(r)
        a.accept(t)
        seq.append(t)
    drafts = seq[:2] + [(seq[2] + 1) % 400]
    n_acc, tok = b.verify(drafts, rows)
    assert n_acc == 2 and tok == seq[2]
    assert a.sample(rows[3]) == b.sample(rows[3])


def test_sample_batch_reports_each_slot():
    x = np.stack([rng_row(s, 100) for s in range(3)])
    x[1, 7] = np.inf
    cs = [sift.Chain.from_yaml(YAML) for _ in range(3)]
    tokens, errors = sift.sample_batch(cs, x)
    assert errors[0] is None and errors[2] is None
    assert isinstance(errors[1], sift.SiftError) and errors[1].status == sift.status.ROW_VALUE
    assert tokens[1] == -1
    with pytest.raises(sift.SiftError) as e:
        sift.sample_batch([cs[0], cs[0]], x[:2])
    assert e.value.status == sift.status.ARG and e.value.index == 1


def test_two_threads_sample_two_chains_as_one_thread_does():
    rows = [rng_row(s, 20000) for s in range(20)]

    def run(c, out):
        for r in rows:
            t = c.sample(r)
            c.accept(t)
            out.append(t)

    want = []
    run(sift.Chain.from_yaml(YAML), want)
    outs = [[], []]
    ts = [threading.Thread(target=run, args=(sift.Chain.from_yaml(YAML), outs[i]))
          for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert outs == [want, want]


def test_a_chain_in_use_by_another_thread_is_refused():
    row = rng_row(11, 500, "flat")
    c = sift.Chain(1).add_dist()
    entered, release = threading.Event(), threading.Event()

    def hook():
        entered.set()
        release.wait(10)
        return row

    c.set_row_hook(hook)
    ids = np.argpartition(-row, 4)[:4]
    th = threading.Thread(target=lambda: c.sample_slice(ids, row[ids], 500))
    th.start()
    assert entered.wait(10)
    try:
        with pytest.raises(sift.SiftError) as e:
            c.accept(1)
        assert e.value.status == sift.status.STATE
    finally:
        release.set()
        th.join()


def test_numpy_integer_scalars_are_tokens():
    c = sift.Chain(1).add_penalties(4, 2.0).add_greedy()
    row = np.zeros(10, dtype=np.float32)
    row[3], row[4] = 1.0, 0.8  # the penalty makes 3's logit 0.5 or 0.25
    c.accept_prompt(np.int64(3))
    c.accept(np.int32(3))
    assert c.sample(row) != 3


BUILDER_YAML = """seed: 77
vocab_size: 64
chain:
  - logit_bias: {3: 2.0, 9: -.inf}
  - penalties: {last_n: 8, repeat: 1.2, frequency: 0.1, presence: 0.2}
  - dry: {multiplier: 0.8, base: 1.75, allowed_length: 2, last_n: 32, breakers: []}
  - min_tokens: {n: 2, ids: [5]}
  - no_repeat_ngram: {n: 2, last_n: 16}
  - bad_words: {sequences: ["1 2", "7"]}
  - allowed_tokens: {ids: [1, 2, 3, 4, 5, 6, 8, 10, 11, 12, 20, 30, 40, 50, 60]}
  - top_k: {k: 12, ties: true}
  - typical: 0.95
  - top_n_sigma: 2.5
  - temperature: {temp: 0.9, delta: 0.2, exponent: 1.5}
  - %s
"""


@pytest.mark.parametrize("selector,build", [
    ("dist: {order: id}", lambda c: c.add_dist_id_order()),
    ("mirostat: {tau: 4.0, eta: 0.2, m: 50}", lambda c: c.add_mirostat(64, 4.0, 0.2, 50)),
    ("adaptive_p: {target: 0.4, decay: 0.8}", lambda c: c.add_adaptive_p(0.4, 0.8)),
])
def test_the_builder_equals_the_yaml_for_every_stage(selector, build):
    built = (sift.Chain(77).add_logit_bias([(3, 2.0), (9, -np.inf)])
             .add_penalties(8, 1.2, 0.1, 0.2).add_dry(0.8, 1.75, 2, 32)
             .add_min_tokens(2, [5]).add_no_repeat_ngram(2, 16).add_bad_words([[1, 2], [7]])
             .add_allowed_tokens([1, 2, 3, 4, 5, 6, 8, 10, 11, 12, 20, 30, 40, 50, 60])
             .add_top_k_ties(12).add_typical(0.95).add_top_n_sigma(2.5)
             .add_temp_ext(0.9, 0.2, 1.5))
    build(built)
    yaml = sift.Chain.from_yaml(BUILDER_YAML % selector)
    assert built.stages == yaml.stages
    built.accept_prompt([1, 2, 3])
    yaml.accept_prompt([1, 2, 3])
    for s in range(30):
        row = rng_row(100 + s, 64)
        a, b = built.sample(row), yaml.sample(row)
        assert a == b
        built.accept(a)
        yaml.accept(b)


def test_distribution_slice_equals_the_whole_rows():
    row = rng_row(12, 3000)
    c = sift.Chain.from_yaml(YAML)
    k = c.plan().k + 1
    ids = np.argpartition(-row, k)[:k]
    assert c.distribution_slice(ids, row[ids], 3000) == c.distribution(row)


def test_verify_and_batches_take_slices():
    import sift.torch as stt
    torch = pytest.importorskip("torch")
    rows = np.stack([rng_row(s, 600) for s in range(4)])
    a, b = sift.Chain.from_yaml(YAML), sift.Chain.from_yaml(YAML)
    n_a, t_a = a.verify([1, 2, 3], rows)
    sl = stt.make_slices(torch.from_numpy(rows), 200)
    b.set_row_hook(lambda: (_ for _ in ()).throw(AssertionError("not needed")))
    n_b, t_b = b.verify([1, 2, 3], slices=list(sl))
    assert (n_a, t_a) == (n_b, t_b)
    cs = [sift.Chain.from_yaml(YAML) for _ in range(4)]
    ref = [sift.Chain.from_yaml(YAML) for _ in range(4)]
    tokens, errors = sift.sample_batch(cs, list(sl))
    assert errors == [None] * 4
    assert tokens == [r.sample(row) for r, row in zip(ref, rows)]


def test_torch_apply_takes_row_indices():
    torch = pytest.importorskip("torch")
    import sift.torch as stt
    mask = stt.allocate_token_bitmask(3, 40)
    mask[:, 0] = 0  # ban tokens 0..31 in every row
    for logits in (torch.zeros(3, 40), np.zeros((3, 40), dtype=np.float32)):
        sift.apply_token_bitmask_inplace(logits, mask if isinstance(logits, torch.Tensor)
                                         else mask.numpy(), indices=[2])
        logits = np.asarray(logits)
        assert np.isfinite(logits[:2]).all()
        assert np.isneginf(logits[2, :32]).all() and np.isfinite(logits[2, 32:]).all()


def test_extras_and_biases_may_be_lists():
    c = sift.Chain(3).add_logit_bias([[17, 30.0]]).add_top_k(4).add_greedy()
    row = rng_row(5, 1000)
    ids = np.argpartition(-row, 5)[:5]
    ex = c.extras()
    assert c.sample_slice(ids, row[ids], 1000, extras=(ex, [float(row[i]) for i in ex])) == 17


def test_objects_with_only_an_array_interface_are_read_in_place():
    row = rng_row(13, 500)

    class Wrapped:
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__
            self._keep = a

    c = sift.Chain.from_yaml(YAML)
    assert c.clone().sample(Wrapped(row)) == c.clone().sample(row)
    with pytest.raises(TypeError, match="float64"):
        c.sample(Wrapped(row.astype(np.float64)))

"""make bench-python: the Python package against the bare C calls, in one
process and one run (not a timed test; nothing here fails on a number).

Figures (medians of rounds; ns per call):
  1. chain.sample on a V = 151,936 numpy row vs sift_chain_sample looped
     in C (goal: within 1.1x);
  2. chain.sample_slice with 105 int64 ids (torch.topk's dtype) + float32
     logits + a tail mass vs sift_chain_sample_slice on the same slice
     built once (goal: at most 2 us above);
  3. grammar.fill_next_token_bitmask vs sift_grammar_fill_bitmask, cl100k
     vocabulary, a JSON Schema grammar in a cached state (goal: at most
     1 us above);
  4. no copy of the row: chain.sample on a read-only row, tracemalloc peak;
  5. two threads sampling two chains vs one thread sampling both (goal:
     at least 1.8x; needs two idle cores).
"""
import argparse
import os
import statistics
import threading
import time
import tracemalloc

import numpy as np

import sift
from sift import _sift

PRODUCTION = """seed: 1234
chain:
  - penalties: {last_n: 64, repeat: 1.1, frequency: 0.0, presence: 0.0}
  - top_k: 20
  - top_p: 0.95
  - min_p: 0.05
  - temperature: 0.8
  - dist
"""
V = 151936


def peaked_row(seed):
    r = np.random.default_rng(seed)
    row = r.normal(0, 2, V).astype(np.float32)
    row[r.choice(V, 50, replace=False)] += r.uniform(5, 15, 50).astype(np.float32)
    return row


def per_call_py(fn, reps):
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        fn()
    return (time.perf_counter_ns() - t0) / reps


def rounds(fn_py, fn_c, n_rounds, reps):
    """Alternates the two, median of each over the rounds."""
    py, c = [], []
    for _ in range(n_rounds):
        py.append(per_call_py(fn_py, reps))
        c.append(fn_c(reps))
    return statistics.median(py), statistics.median(c)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                   "tests", "data"))
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    print("sift %s, Python package vs the C calls (same process)" % sift.version())

    # 1. whole row
    row = peaked_row(1)
    chain = sift.Chain.from_yaml(PRODUCTION)
    chain.sample(row)
    py, c = rounds(lambda: chain.sample(row), lambda n: _sift._time_c_sample(chain, row, n),
                   args.rounds, 50)
    print("sample, V = %d:          python %9.0f ns   C %9.0f ns   ratio %.3fx (goal <= 1.1x)"
          % (V, py, c, py / c))

    # 2. slice of 105 pairs, int64 ids as torch.topk gives them
    k = 105
    ids = np.argpartition(-row, k)[:k].astype(np.int64)
    vals = row[ids]
    m = float(row.max())
    inside = np.zeros(V, dtype=bool)
    inside[ids] = True
    tail = float(np.sum(np.exp(row[~inside].astype(np.float64) - m))) * (1 + 2**-20)
    s = sift.Slice(ids, vals, V, tail)
    chain.sample_slice(ids, vals, V, tail_mass=tail)
    py, c = rounds(lambda: chain.sample_slice(ids, vals, V, tail_mass=tail),
                   lambda n: _sift._time_c_sample_slice(chain, s, n), args.rounds, 2000)
    print("sample_slice, k = %d:     python %9.0f ns   C %9.0f ns   above C %.2f us (goal <= 2 us)"
          % (k, py, c, (py - c) / 1000))

    # 3. bitmask fill
    tk = os.path.join(args.data, "cl100k_base.tiktoken")
    if os.path.exists(tk):
        vocab = sift.Vocab.from_tiktoken(tk).extend(eog_ids=[100257], n_vocab=100277)
        g = sift.Grammar.from_json_schema({"type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": "integer"}}}, vocab)
        g.accept_string('{"name": "Al')
        mask = sift.allocate_token_bitmask(8, len(vocab))
        g.fill_next_token_bitmask(mask, 3)
        py, c = rounds(lambda: g.fill_next_token_bitmask(mask, 3),
                       lambda n: _sift._time_c_fill(g, mask[3], n), args.rounds, 2000)
        print("fill_next_token_bitmask:  python %9.0f ns   C %9.0f ns   above C %.2f us "
              "(goal <= 1 us)" % (py, c, (py - c) / 1000))
    else:
        print("fill_next_token_bitmask: skipped (no %s)" % tk)

    # 4. zero copy
    ro = row.copy()
    ro.flags.writeable = False
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(10):
        chain.sample(ro)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    print("no copy: 10 samples of a read-only row, tracemalloc peak %d bytes (a row is %d)"
          % (peak, row.nbytes))

    # 5. two threads
    # A chain that reads the whole row every step (the softmax of dist over
    # 151,936 logits), so that a step is long against thread start-up.
    rows = [np.random.default_rng(s).uniform(-1, 1, V).astype(np.float32) for s in range(8)]
    whole = "seed: 1\nchain:\n  - temperature: 1.0\n  - dist\n"
    chains = [sift.Chain.from_yaml(whole) for _ in range(2)]
    N = 150

    def work(c):
        for i in range(N):
            c.sample(rows[i % 8])

    for c in chains:
        work(c)
    ones, twos = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        work(chains[0])
        work(chains[1])
        ones.append(time.perf_counter() - t0)
        ts = [threading.Thread(target=work, args=(c,)) for c in chains]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        twos.append(time.perf_counter() - t0)
    one, two = min(ones), min(twos)
    print("two threads, two chains: one thread %.3f s, two threads %.3f s, speed-up %.2fx "
          "(goal >= 1.8x; needs two idle cores, %d here)" % (one, two, one / two,
                                                               os.cpu_count()))


if __name__ == "__main__":
    main()

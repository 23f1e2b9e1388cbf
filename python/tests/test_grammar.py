"""Grammars through the binding: masks equal the C matcher's per-token
answers, bitmask helpers follow the xgrammar layout, errors name places."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import sift
from conftest import EOS

GBNF = r'''
root ::= item ("," item)*
item ::= "true" | "false" | "null" | [0-9]+ | "ab" "c"? | "\u00e9"
'''


def bits_of(mask_row, V):
    """The allowed set of one mask row, read with numpy's unpackbits."""
    b = np.unpackbits(np.ascontiguousarray(mask_row).view(np.uint8), bitorder="little")
    return b[:V].astype(bool), b[V:]


@given(st.lists(st.integers(0, 10**6), max_size=12))
def test_bitmask_equals_the_c_matchers_answer_for_every_token(vocab, choices):
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    V = len(vocab)
    mask = sift.allocate_token_bitmask(3, V)
    for c in choices:
        assert g.fill_next_token_bitmask(mask, 1) is True
        allowed, rest = bits_of(mask[1], V)
        assert not rest.any()  # bits past V are 0
        assert (mask[0] == -1).all() and (mask[2] == -1).all()  # other rows untouched
        want = np.array([g.accepts_token(t) for t in range(V)])
        assert (allowed == want).all()
        ids = np.flatnonzero(allowed)
        if len(ids) == 0:
            break
        tok = int(ids[c % len(ids)])
        if tok == EOS:
            break
        assert g.accept_token(tok)


def test_ban_and_bitmask_agree(vocab):
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    g.accept_string("ab")
    row = np.zeros(len(vocab), dtype=np.float32)
    g.ban(row)
    mask = sift.allocate_token_bitmask(1, len(vocab))
    g.fill_next_token_bitmask(mask)
    allowed, _ = bits_of(mask[0], len(vocab))
    assert ((row == 0) == allowed).all()


def test_torch_bitmask_is_filled_in_place(vocab):
    torch = pytest.importorskip("torch")
    import sift.torch as st_
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    tm = st_.allocate_token_bitmask(2, len(vocab))
    assert tm.dtype == torch.int32 and tuple(tm.shape) == sift.get_bitmask_shape(2, len(vocab))
    g.fill_next_token_bitmask(tm, 1)
    nm = sift.allocate_token_bitmask(2, len(vocab))
    g.fill_next_token_bitmask(nm, 1)
    assert (tm.numpy() == nm).all()


def test_batch_fill_equals_single_fills(vocab):
    gs = [sift.Grammar.from_gbnf(GBNF, vocab) for _ in range(3)]
    gs[1].accept_string("12")
    batch = sift.allocate_token_bitmask(4, len(vocab))
    sift.fill_next_token_bitmasks([gs[0], None, gs[1], gs[2]], batch)
    for row, g in ((0, gs[0]), (2, gs[1]), (3, gs[2])):
        one = sift.allocate_token_bitmask(1, len(vocab))
        g.fill_next_token_bitmask(one)
        assert (one[0] == batch[row]).all()
    assert (batch[1] == -1).all()  # None: every bit set, no constraint


@pytest.mark.parametrize("V", [1, 31, 32, 33, 1024, 32001])
def test_apply_bitmask_sets_minus_inf_exactly_where_bits_are_zero(V):
    r = np.random.default_rng(V)
    mask = r.integers(-2**31, 2**31, size=(2, (V + 31) // 32), dtype=np.int64).astype(np.int32)
    logits = r.normal(size=(2, V + 5)).astype(np.float32)  # wider than the mask's V
    orig = logits.copy()
    sift.apply_token_bitmask_inplace(logits, mask, vocab_size=V)
    allowed = np.unpackbits(mask.view(np.uint8), axis=1, bitorder="little")[:, :V].astype(bool)
    assert (np.isneginf(logits[:, :V]) == ~allowed).all()
    assert (logits[:, :V][allowed] == orig[:, :V][allowed]).all()
    assert (logits[:, V:] == orig[:, V:]).all()
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(orig.copy())
    sift.apply_token_bitmask_inplace(t, torch.from_numpy(mask), vocab_size=V)
    assert (t.numpy() == logits).all()


def test_columns_past_the_mask_are_banned():
    mask = np.full((1, 1), -1, dtype=np.int32)  # 32 tokens allowed
    logits = np.zeros((1, 40), dtype=np.float32)
    sift.apply_token_bitmask_inplace(logits, mask)
    assert (logits[0, :32] == 0).all() and np.isneginf(logits[0, 32:]).all()


def test_lazy_grammar_needs_no_mask_until_triggered(vocab):
    g = sift.Grammar.from_gbnf('root ::= "true"', vocab)
    g.set_lazy(words=["ab"])
    mask = sift.allocate_token_bitmask(1, len(vocab))
    mask[:] = 0
    assert g.fill_next_token_bitmask(mask) is False
    allowed, _ = bits_of(mask[0], len(vocab))
    assert allowed.all()
    assert not g.is_triggered()


def test_json_schema_from_a_dict(vocab):
    g = sift.Grammar.from_json_schema({"type": "boolean"}, vocab, whitespace="compact")
    assert g.accept_string("tru")
    assert not g.accept_string("x")  # rejected, state unchanged
    assert g.accept_string("e") and g.is_completed()
    gbnf = sift.json_schema_to_gbnf('{"type": "integer"}')
    assert "root" in gbnf


def test_copy_is_independent(vocab):
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    h = g.copy()
    assert g.accept_string("true")
    assert h.accepts_token(ord("n")) and not g.accepts_token(ord("n"))
    g.reset()
    assert g.accepts_token(ord("n"))


def test_accept_token_rejects_without_changing_state(vocab):
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    assert not g.accept_token(ord("x"))
    assert g.accept_token(ord("t"))


def test_cl100k_encodes_as_tiktoken(data_dir):
    """Vocab.from_tiktoken and encode against tiktoken's own vectors
    (tests/data/bpe-vectors-cl100k.txt, the 'o' lines)."""
    import os
    path = os.path.join(data_dir, "cl100k_base.tiktoken")
    vec = os.path.join(data_dir, "bpe-vectors-cl100k.txt")
    if not os.path.exists(path):
        pytest.skip("no cl100k_base.tiktoken")
    v = sift.Vocab.from_tiktoken(path)
    assert len(v) == 100256
    n = 0
    for line in open(vec, encoding="ascii"):
        parts = line.rstrip("\n").split("\t")
        if parts[0] != "o" or len(parts) != 3:
            continue
        text = bytes.fromhex(parts[1])
        assert v.encode(text) == [int(t) for t in parts[2].split()], text
        assert b"".join(v.piece(t) for t in v.encode(text)) == text
        n += 1
        if n == 60:
            break
    assert n > 0


def test_a_mask_with_more_rows_than_the_logits_masks_the_first_rows():
    mask = sift.allocate_token_bitmask(8, 40)
    mask[:, 0] = 0
    logits = np.zeros((2, 40), dtype=np.float32)
    sift.apply_token_bitmask_inplace(logits, mask)
    assert np.isneginf(logits[:, :32]).all() and np.isfinite(logits[:, 32:]).all()
    torch = pytest.importorskip("torch")
    t = torch.zeros(2, 40)
    sift.apply_token_bitmask_inplace(t, torch.from_numpy(mask))
    assert (t.numpy() == logits).all()


def test_one_grammar_may_fill_two_rows(vocab):
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    mask = sift.allocate_token_bitmask(2, len(vocab))
    sift.fill_next_token_bitmasks([g, g], mask)
    assert (mask[0] == mask[1]).all() and not (mask[0] == -1).all()
    g.reset()  # not left busy

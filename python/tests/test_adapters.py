"""The engine adapters: Hugging Face processors (torch and numpy) and the
SGLang grammar backend, against the stand-in of SGLang's
base_grammar_backend.py at 99e1c516 (tests/standin/README.md)."""
import importlib
import os
import sys
import types

import numpy as np
import pytest

import sift
import sift.hf
from conftest import EOS

GBNF = 'root ::= ("ab" | "true") "!"'


def test_grammar_processor_masks_every_rejected_token(vocab):
    torch = pytest.importorskip("torch")
    V = len(vocab)
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    proc = sift.hf.GrammarLogitsProcessor(g)
    scores = torch.zeros(2, V + 3)  # the model's row is wider than the vocabulary
    out = proc(torch.tensor([[1, 2], [3, 4]]), scores)
    for row in out:
        finite = set(torch.nonzero(torch.isfinite(row)).flatten().tolist())
        assert finite == {t for t in range(V) if g.accepts_token(t)}
    # next step: row 0 accepted "a", row 1 "t"
    out = proc(torch.tensor([[1, ord("a")], [3, ord("t")]]), torch.zeros(2, V + 3))
    h = g.copy()
    h.accept_token(ord("a"))
    assert set(torch.nonzero(torch.isfinite(out[0])).flatten().tolist()) == \
        {t for t in range(V) if h.accepts_token(t)}
    with pytest.raises(ValueError):
        proc(torch.tensor([[1, ord("b")], [3, ord("x")]]), torch.zeros(2, V + 3))
    # row 1 rejected its token, so row 0 did not take "b" either
    out = proc(torch.tensor([[1, ord("b")], [3, ord("r")]]), torch.zeros(2, V + 3))
    assert set(torch.nonzero(torch.isfinite(out[0])).flatten().tolist()) == {ord("!")}


def test_grammar_processor_on_numpy_rows(vocab):
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    proc = sift.hf.GrammarLogitsProcessor(g)
    scores = np.zeros(len(vocab), dtype=np.float32)
    proc(np.array([5]), scores)
    assert set(np.flatnonzero(np.isfinite(scores))) == {ord("a"), ord("t"), 256 + 7, 256}


def test_chain_processor_makes_sifts_token_the_only_finite_logit():
    torch = pytest.importorskip("torch")
    yaml = "seed: 3\nchain:\n  - penalties: {last_n: 8, repeat: 1.5}\n  - top_k: 10\n" \
           "  - temperature: 0.9\n  - dist\n"
    proc = sift.hf.ChainLogitsProcessor(sift.Chain.from_yaml(yaml))
    ref = [sift.Chain.from_yaml(yaml) for _ in range(2)]
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    for r, p in zip(ref, prompt):
        r.accept_prompt(p.tolist())
    g = torch.Generator().manual_seed(0)
    ids = prompt
    for step in range(4):
        scores = torch.randn(2, 50, generator=g)
        want = [r.sample(scores[i].numpy()) for i, r in enumerate(ref)]
        out = proc(ids, scores.clone())
        assert torch.argmax(out, dim=1).tolist() == want
        assert (torch.isfinite(out).sum(dim=1) == 1).all()
        for r, t in zip(ref, want):
            r.accept(t)
        ids = torch.cat([ids, torch.tensor(want).unsqueeze(1)], dim=1)


@pytest.fixture
def sglang_standin():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standin")
    sys.path.insert(0, here)
    sys.modules.pop("sift.sglang", None)
    try:
        mod = importlib.import_module("sift.sglang")
        base = importlib.import_module("sglang.srt.constrained.base_grammar_backend")
        yield mod, base
    finally:
        sys.path.remove(here)
        for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
            del sys.modules[name]
        sys.modules.pop("sift.sglang", None)


def test_sglang_backend_registers_and_serves_requests(vocab, sglang_standin):
    torch = pytest.importorskip("torch")
    ss, base = sglang_standin
    assert issubclass(ss.SiftGrammarObject, base.BaseGrammarObject)
    assert issubclass(ss.SiftGrammarBackend, base.BaseGrammarBackend)
    ss.register(lambda tok, V, eos: vocab)
    backend = base.create_grammar_backend(types.SimpleNamespace(grammar_backend="sift"),
                                          None, len(vocab), {EOS})
    fut, hit = backend.get_cached_or_future_value(("json", '{"type": "boolean"}'))
    assert not hit
    gobj = fut.result()
    backend.set_cache(("json", '{"type": "boolean"}'), gobj)
    V = len(vocab)
    mask = gobj.allocate_vocab_mask(V, 2, "cpu")
    assert mask.dtype == torch.int32 and tuple(mask.shape) == (2, (V + 31) // 32)
    assert (mask == -1).all()
    gobj.fill_vocab_mask(mask, 1)
    logits = torch.zeros(2, V)
    gobj.apply_vocab_mask(logits, gobj.move_vocab_mask(mask, "cpu"))
    assert torch.isfinite(logits[0]).all()
    allowed = set(torch.nonzero(torch.isfinite(logits[1])).flatten().tolist())
    assert allowed == {t for t in range(V) if gobj.grammar.accepts_token(t)}
    gobj.accept_token(ord("t"))
    with pytest.raises(ValueError):
        gobj.accept_token(ord("x"))
    fresh, hit = backend.get_cached_or_future_value(("json", '{"type": "boolean"}'))
    assert hit and fresh.grammar.accepts_token(ord("f"))  # a copy in the initial state
    # after "t" the grammar forces "rue"; SGLang retokenizes the text
    helper = gobj.try_jump_forward(None)
    assert helper == ([], "rue")
    assert gobj.jump_forward_str_state(helper) == ("rue", -1)
    # old output "t", retokenized "t" "r" "u" "e": keep "t", accept the rest
    gobj.jump_and_retokenize([ord("t")], [ord("t"), ord("r"), ord("u"), ord("e")], -1)
    assert gobj.grammar.is_completed() and gobj.try_jump_forward(None) is None
    # retokenized differently from the first token on: roll back past it
    gobj.jump_and_retokenize([ord("t"), ord("r"), ord("u"), ord("e")], [ord("f")], -1)
    assert gobj.grammar.accepts_token(ord("a")) and not gobj.grammar.accepts_token(ord("r"))
    gobj.rollback(1)
    assert gobj.grammar.accepts_token(ord("t")) and gobj.grammar.rollback_depth == 0
    assert gobj.is_terminated() is False
    for t in b"true":
        gobj.accept_token(t)
    gobj.accept_token(EOS)
    assert gobj.is_terminated() is True
    gobj.rollback(1)
    assert gobj.is_terminated() is False and gobj.grammar.is_completed()
    bad, _ = backend.get_cached_or_future_value(("ebnf", "root ::= ("))
    assert bad.result() is base.INVALID_GRAMMAR_OBJ
    anyj = backend.dispatch_json("$$ANY$$")
    assert anyj.grammar.accepts_token(ord("["))


def test_sglang_dispatches_regex_and_structural_tags(vocab, sglang_standin):
    ss, base = sglang_standin
    backend = ss.SiftGrammarBackend(vocab)
    r = backend.dispatch_regex("[0-9]+x")
    assert r.grammar.accepts_token(ord("7")) and not r.grammar.accepts_token(ord("x"))
    assert backend.dispatch_regex("(a") is base.INVALID_GRAMMAR_OBJ
    spec = '{"structures": [{"begin": "<f>", "schema": {"type": "boolean"}, "end": "</f>"}],' \
           ' "triggers": ["<f"]}'
    st = backend.dispatch_structural_tag(spec)
    assert not st.grammar.is_triggered()
    assert st.grammar.accept_string("hi <f>") and st.grammar.is_triggered()
    assert st.grammar.accepts_token(ord("t")) and not st.grammar.accepts_token(ord("1"))
    assert backend.dispatch_structural_tag('{"format": {}}') is base.INVALID_GRAMMAR_OBJ


def test_sglang_register_builds_the_vocabulary_from_tokenizer_json(data_dir, sglang_standin):
    ss, base = sglang_standin
    path = os.path.join(data_dir, "hf", "bytelevel.json")
    ref = sift.Vocab.from_hf(path)
    ss.register(tokenizer_json=path, name="sift-hf")
    backend = base.create_grammar_backend(types.SimpleNamespace(grammar_backend="sift-hf"),
                                          None, len(ref) + 5, {1})
    v = backend.vocab
    assert len(v) == len(ref) + 5
    assert [v.piece(t) for t in range(len(ref))] == [ref.piece(t) for t in range(len(ref))]
    assert 1 in v.eog_ids()
    with pytest.raises(TypeError):
        ss.register()


def test_grammar_processor_stops_feeding_a_terminated_row(vocab):
    g = sift.Grammar.from_gbnf('root ::= "ab"', vocab)
    proc = sift.hf.GrammarLogitsProcessor(g)
    V = len(vocab)
    proc(np.array([[0], [0]]), np.zeros((2, V), dtype=np.float32))
    proc(np.array([[0, ord("a")], [0, ord("a")]]), np.zeros((2, V), dtype=np.float32))
    proc(np.array([[0, ord("a"), ord("b")], [0, ord("a"), ord("b")]]),
         np.zeros((2, V), dtype=np.float32))
    s = np.zeros((2, V), dtype=np.float32)
    proc(np.array([[0, ord("a"), ord("b"), EOS], [0, ord("a"), ord("b"), EOS]]), s)
    assert np.isfinite(s).all()
    # generate() pads the finished rows (here with token 5): no ValueError
    s = np.zeros((2, V), dtype=np.float32)
    proc(np.array([[0, ord("a"), ord("b"), EOS, 5], [0, ord("a"), ord("b"), EOS, 5]]), s)
    assert np.isfinite(s).all()


def test_sift_sglang_imports_without_sglang():
    sys.modules.pop("sift.sglang", None)
    mod = importlib.import_module("sift.sglang")
    assert mod.INVALID_GRAMMAR_OBJ is None
    with pytest.raises(ImportError):
        mod.register(lambda *a: None)

"""The serving loop through the binding (rollback, termination, draft
validation and masks, jump-forward, batch rows) and the other grammar
sources (regex, choices, structural tags) and tokenizer.json
vocabularies. Each answer is compared with another C call that must
agree with it: a fresh grammar fed the surviving tokens, accepts on a
copy, one fill per step, Python's re on the same strings, the golden
error files of tests/data/hf-invalid/."""
import json
import os
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

import sift
from conftest import EOS
from sift.status import Status

GBNF = r'''
root ::= item ("," item)*
item ::= "true" | "false" | "null" | [0-9]+ | "ab" "c"? | "\u00e9" | "{\"k\":" item "}"
'''


def mask_of(g, V):
    m = sift.allocate_token_bitmask(1, V)
    g.fill_next_token_bitmask(m)
    return m[0].copy()


def allowed(g, V):
    b = np.unpackbits(mask_of(g, V).view(np.uint8), bitorder="little")[:V]
    return np.flatnonzero(b)


def walk(g, V, choices, stop_at_eos=False):
    """Accepts tokens picked by `choices` among the allowed ones; returns
    them. EOS is taken only when stop_at_eos (it ends the walk)."""
    out = []
    for c in choices:
        ids = [t for t in allowed(g, V) if stop_at_eos or t != EOS]
        if not ids:
            break
        t = int(ids[c % len(ids)])
        assert g.accept_token(t)
        out.append(t)
        if t == EOS:
            break
    return out


@given(st.lists(st.integers(0, 10**6), max_size=14), st.integers(0, 20), st.booleans())
def test_rollback_equals_a_fresh_grammar_fed_the_surviving_tokens(vocab, choices, k, eos):
    V = len(vocab)
    g = sift.Grammar.from_gbnf(GBNF, vocab, max_rollback_tokens=8)
    toks = walk(g, V, choices, stop_at_eos=eos)
    assert g.rollback_depth == min(len(toks), 8)
    if k > g.rollback_depth:
        before = mask_of(g, V)
        with pytest.raises(sift.SiftError) as e:
            g.rollback(k)
        assert e.value.status == Status.STATE
        assert (mask_of(g, V) == before).all()  # nothing changed
        return
    g.rollback(k)
    fresh = sift.Grammar.from_gbnf(GBNF, vocab)
    for t in toks[:len(toks) - k]:
        assert fresh.accept_token(t)
    assert (mask_of(g, V) == mask_of(fresh, V)).all()
    assert g.is_terminated() == fresh.is_terminated()
    assert g.is_completed() == fresh.is_completed()


def test_is_terminated_after_an_accepted_eos_until_rollback(vocab):
    V = len(vocab)
    g = sift.Grammar.from_gbnf('root ::= "ab"', vocab, max_rollback_tokens=1)
    assert g.accept_string("ab") and g.is_completed() and not g.is_terminated()
    assert g.accept_token(EOS) and g.is_terminated()
    assert len(allowed(g, V)) == 0 and not g.accept_token(EOS)
    g.rollback()
    assert not g.is_terminated() and list(allowed(g, V)) == [EOS]


@given(st.lists(st.integers(0, 10**6), max_size=8), st.lists(st.integers(0, 10**6), max_size=10))
def test_validate_tokens_equals_accepting_on_a_copy(vocab, prefix, draft_choices):
    V = len(vocab)
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    walk(g, V, prefix)
    before = mask_of(g, V)
    # a draft that mostly follows the grammar, with stray tokens
    c = g.copy()
    draft = []
    for x in draft_choices:
        ids = allowed(c, V)
        t = int(ids[x % len(ids)]) if len(ids) and x % 5 else x % V
        draft.append(t)
        if not c.accept_token(t):
            c = sift.Grammar.from_gbnf('root ::= "unused"', vocab)  # stays rejecting
    ref = g.copy()
    n_ok = 0
    for t in draft:
        if not ref.accept_token(t):
            break
        n_ok += 1
    assert g.validate_tokens(draft) == n_ok
    assert g.validate_tokens(np.array(draft, dtype=np.int32)) == n_ok
    assert (mask_of(g, V) == before).all()


@given(st.lists(st.integers(0, 10**6), max_size=6), st.lists(st.integers(0, 10**6), max_size=8),
       st.integers(0, 3))
def test_draft_masks_equal_one_fill_per_step(vocab, prefix, draft_choices, start):
    V = len(vocab)
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    walk(g, V, prefix)
    ref = g.copy()
    draft = []
    for x in draft_choices:
        ids = allowed(ref, V)
        t = int(ids[x % len(ids)]) if len(ids) and x % 4 else x % V
        draft.append(t)
        ref.accept_token(t)  # a rejected token leaves ref as it was
    n = len(draft)
    masks = sift.allocate_token_bitmask(start + n + 2, V)
    n_ok = g.fill_next_token_bitmasks_draft(masks, draft, start)
    seq = g.copy()
    want_ok = None
    for k in range(n + 1):
        row = masks[start + k]
        if want_ok is None:
            assert (row == mask_of(seq, V)).all(), k
            if k < n and not seq.accept_token(draft[k]):
                want_ok = k
        else:
            assert not row.any(), k  # after a rejected token: all zero
    assert n_ok == (n if want_ok is None else want_ok)
    assert (masks[:start] == -1).all() and (masks[start + n + 1:] == -1).all()


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=30))
def test_forced_text_is_a_prefix_of_every_accepted_completion(vocab, choices):
    V = len(vocab)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3},
                                               "ok": {"type": "boolean"}},
              "required": ["name", "ok"], "additionalProperties": False}
    g = sift.Grammar.from_json_schema(schema, vocab, whitespace="compact")
    forced, text = [], b""
    for c in choices:
        fb, ids = g.find_jump_forward_bytes(max_tokens=16)
        s = g.find_jump_forward_string()
        assert fb.startswith(s.encode())
        assert len(fb.decode("utf-8", "ignore").encode()) == len(s.encode())
        assert b"".join(vocab.piece(t) for t in ids) == fb[:sum(len(vocab.piece(t)) for t in ids)]
        forced.append((len(text), fb))
        ids_ok = [t for t in allowed(g, V) if t != EOS]
        if not ids_ok:
            break
        t = int(ids_ok[c % len(ids_ok)])
        assert g.accept_token(t)
        text += vocab.piece(t)
    for at, fb in forced:
        # every continuation starts with the forced bytes: the text went on
        # with them as far as it went
        tail = text[at:]
        n = min(len(tail), len(fb))
        assert tail[:n] == fb[:n]


def test_forced_text_of_a_fixed_prefix_and_its_tokens(vocab):
    g = sift.Grammar.from_gbnf(r'root ::= "{\"k\":" [0-9]', vocab)
    assert g.find_jump_forward_string() == '{"k":'
    fb, ids = g.find_jump_forward_bytes(max_tokens=8)
    assert fb == b'{"k":'
    assert b"".join(vocab.piece(t) for t in ids) == b'{"k":'
    assert ids[0] == 256 + 3  # the longest token at byte 0 is '{"'
    assert g.find_jump_forward_bytes() == (b'{"k":', [])
    # a forced character cut by nothing: the string keeps whole characters
    e = sift.Grammar.from_gbnf(r'root ::= "x\u00e9"', vocab)
    assert e.accept_token(ord("x")) and e.accept_token(0xC3)
    fb, _ = e.find_jump_forward_bytes()
    assert fb == b"\xa9" and e.find_jump_forward_string() == ""


REGEXES = [r"[0-9]{2,3}-[a-c]+", r"(ab|a)*c?", r"a.b", r"x\d+(\.\d*)?", r"(?:ab|b)c{0,2}"]


@pytest.mark.parametrize("rx", REGEXES)
@given(text=st.text(alphabet="abcx0129-.\n\u00e9", max_size=8))
def test_regex_grammar_accepts_exactly_the_full_matches(vocab, rx, text):
    g = sift.Grammar.from_regex(rx, vocab)
    ok = g.accept_string(text) and g.is_completed()
    assert ok == (re.fullmatch(rx, text) is not None)


@given(st.lists(st.text(alphabet="ab\u00e9", max_size=4), min_size=1, max_size=5),
       st.text(alphabet="ab\u00e9", max_size=5))
def test_choices_grammar_accepts_exactly_the_choices(vocab, choices, text):
    g = sift.Grammar.from_choices(choices, vocab)
    ok = g.accept_string(text) and g.is_completed()
    assert ok == (text in choices)
    b = sift.Grammar.from_choices([c.encode() for c in choices], vocab)
    assert (b.accept_string(text) and b.is_completed()) == ok


TAG_SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"],
              "additionalProperties": False}


def tag_forms():
    class Item:  # xgrammar's StructuralTagItem shape
        def __init__(self, begin, schema, end):
            self.begin, self.schema, self.end = begin, schema, end
    return [
        ([{"begin": "<f=a>", "schema": TAG_SCHEMA, "end": "</f>"}], ["<f="]),
        ([{"begin": "<f=a>", "schema": json.dumps(TAG_SCHEMA), "end": "</f>"}], ["<f="]),
        ([Item("<f=a>", TAG_SCHEMA, "</f>")], ["<f="]),
        ([("<f=a>", json.dumps(TAG_SCHEMA), None, "</f>")], ["<f="]),
        ({"structures": [{"begin": "<f=a>", "schema": TAG_SCHEMA, "end": "</f>"}],
          "triggers": ["<f="]}, None),
    ]


@pytest.mark.parametrize("form", range(5))
def test_structural_tags_in_each_shape_constrain_only_the_tag(vocab, form):
    tags, triggers = tag_forms()[form]
    g = sift.Grammar.from_structural_tags(tags, triggers, vocab, whitespace="compact")
    assert not g.is_triggered() and g.is_completed()
    assert g.accept_string("free text <f=a>") and g.is_triggered()
    assert not g.is_completed()
    c = g.copy()
    assert not c.accept_string('{"y":1}')
    assert g.accept_string('{"x":12}</f>') and g.is_completed()
    assert g.accept_string(" more")


def test_a_grammar_body_in_a_structural_tag(vocab):
    g = sift.Grammar.from_structural_tags([{"begin": "<t>", "grammar": 'root ::= "ab"',
                                            "end": "</t>"}], ["<t>"], vocab)
    assert g.accept_string("x<t>ab</t>") and g.is_completed()


def test_batch_fill_writes_only_the_chosen_rows(vocab):
    V = len(vocab)
    gs = [sift.Grammar.from_gbnf(GBNF, vocab), sift.Grammar.from_regex("[0-9]+", vocab), None]
    gs[0].accept_string("ab")
    masks = sift.allocate_token_bitmask(6, V)
    masks[:] = 7
    sift.fill_next_token_bitmasks(gs, masks, [4, 1, 2])
    assert (masks[4] == mask_of(gs[0], V)).all()
    assert (masks[1] == mask_of(gs[1], V)).all()
    assert (masks[2] == -1).all()
    assert (masks[[0, 3, 5]] == 7).all()
    with pytest.raises(sift.SiftError) as e:
        sift.fill_next_token_bitmasks(gs, masks, [4, 6, 2])
    assert e.value.status == Status.ARG and e.value.index == 1
    with pytest.raises(sift.SiftError):
        sift.fill_next_token_bitmasks(gs, masks, [4, 1])


def test_max_rollback_tokens_on_every_constructor(vocab):
    makers = [
        lambda: sift.Grammar.from_gbnf('root ::= "abc"', vocab, max_rollback_tokens=2),
        lambda: sift.Grammar.from_json_schema({"const": "abc"}, vocab, max_rollback_tokens=2),
        lambda: sift.Grammar.from_regex("abc", vocab, max_rollback_tokens=2),
        lambda: sift.Grammar.from_choices(["abc"], vocab, max_rollback_tokens=2),
    ]
    for make in makers:
        g = make()
        for t in g.find_jump_forward_bytes()[0][:3]:
            assert g.accept_token(t)
        assert g.rollback_depth == 2
        g.rollback(2)
        with pytest.raises(sift.SiftError) as e:
            g.rollback(1)
        assert e.value.status == Status.STATE
    g = sift.Grammar.from_gbnf('root ::= "a"', vocab)
    assert g.accept_token(ord("a")) and g.rollback_depth == 0
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_gbnf('root ::= "a"', vocab, max_rollback_tokens=-1)
    assert e.value.status == Status.ARG


# --- errors: a status and the place --------------------------------------

def test_serving_call_errors_name_the_place(vocab):
    V = len(vocab)
    g = sift.Grammar.from_gbnf(GBNF, vocab)
    for call in (lambda: g.validate_tokens([ord("t"), V + 3]),
                 lambda: g.fill_next_token_bitmasks_draft(sift.allocate_token_bitmask(3, V),
                                                          [ord("t"), -1])):
        with pytest.raises(sift.SiftError) as e:
            call()
        assert e.value.status == Status.TOKEN and e.value.index == 1
    with pytest.raises(sift.SiftError) as e:
        g.fill_next_token_bitmasks_draft(sift.allocate_token_bitmask(3, V), [1, 2, 3])
    assert e.value.status == Status.ARG
    with pytest.raises(sift.SiftError) as e:
        g.rollback(-1)
    assert e.value.status == Status.ARG
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_gbnf('root ::= "a"').find_jump_forward_bytes(max_tokens=1)
    assert e.value.status == Status.ARG


def test_source_errors_name_the_place(vocab):
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_regex("ab(c", vocab)
    assert e.value.status == Status.PATTERN_SYNTAX and e.value.source == "regex"
    assert e.value.line == 1 and e.value.column >= 3 and e.value.message.startswith("regex:")
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_regex("a(?=b)", vocab)
    assert e.value.status == Status.PATTERN_SYNTAX and "not supported" in e.value.message
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_choices(["ok", b"ab\xffc"], vocab)
    assert e.value.status == Status.GRAMMAR_SYNTAX and e.value.index == 1
    assert e.value.offset == 2
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_choices([], vocab)
    assert e.value.status == Status.ARG
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_structural_tags([{"begin": "<a>", "schema": {}, "end": ""},
                                           {"begin": "[b]", "schema": {}, "end": ""}],
                                          ["<"], vocab)
    assert e.value.status == Status.ARG and e.value.index == 1
    assert "tags[1].begin" in e.value.message
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_structural_tags(
            [{"begin": "<a>", "schema": {"not": {"pattern": "1"}}, "end": ""}], ["<a"], vocab)
    assert e.value.status == Status.SCHEMA_UNSUPPORTED and e.value.source == "tags[0].schema"
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_structural_tags([{"begin": "<a>", "grammar": "root ::= (",
                                            "end": ""}], ["<a"], vocab)
    assert e.value.status == Status.GRAMMAR_SYNTAX and e.value.source == "tags[0].grammar"
    assert e.value.line == 1 and e.value.column > 0
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_structural_tags([{"begin": "<a>", "grammar": 'root ::= "x"',
                                            "end": "</a\0>"}], ["<a"], vocab)
    assert e.value.status == Status.ARG and e.value.index == 0 and "tags[0].end" in e.value.message
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_structural_tags([{"begin": "<a>", "grammar": 'root ::= "x"',
                                            "end": ""}], ["<\0"], vocab)
    assert e.value.status == Status.ARG and "triggers[0]" in e.value.message


# --- tokenizer.json -------------------------------------------------------

def gpt2_bytes():
    """The GPT-2 byte-to-character table, written out independently."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def expected_pieces(tok):
    """id -> bytes from a byte-level tokenizer.json read with json."""
    table = gpt2_bytes()
    out = {i: bytes(table[ch] for ch in p) for p, i in tok["model"]["vocab"].items()}
    for a in tok.get("added_tokens", []):
        out[a["id"]] = a["content"].encode()
    return out


def test_from_hf_reads_the_committed_byte_level_tokenizer(data_dir):
    p = os.path.join(data_dir, "hf", "bytelevel.json")
    cfg = os.path.join(data_dir, "hf", "bytelevel-generation.json")
    want = expected_pieces(json.load(open(p, encoding="utf-8")))
    for v in (sift.Vocab.from_hf(p, cfg),
              sift.Vocab.from_hf(open(p, "rb").read(), open(cfg, "rb").read())):
        assert len(v) == max(want) + 1
        for i in range(len(v)):
            assert v.piece(i) == want.get(i, b""), i
        assert set(v.eog_ids()) == {0, 5, 7}  # the config's eos ids and the special <|endoftext|>
    assert set(sift.Vocab.from_hf(p).eog_ids()) == {5, 7}
    import pathlib
    assert len(sift.Vocab.from_hf(pathlib.Path(p), pathlib.Path(cfg))) == max(want) + 1
    g = sift.Grammar.from_regex("(ab)+", sift.Vocab.from_hf(p))
    assert g.accept_token(3) and g.accept_token(0) and not g.accept_token(1)
    with pytest.raises(TypeError):
        sift.Vocab.from_hf(p, open(cfg, "rb").read())


def sentencepiece_piece(p, byte_fallback):
    """A SentencePiece-style piece as text: U+2581 is a space, <0xHH> a
    byte (with byte fallback)."""
    m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", p)
    if m and byte_fallback:
        return bytes([int(m.group(1), 16)])
    return p.replace("\u2581", " ").encode()


@pytest.mark.parametrize("name,config", [("sentencepiece", "sentencepiece-config.json"),
                                         ("unigram", None)])
def test_from_hf_reads_the_sentencepiece_style_tokenizers(data_dir, name, config):
    p = os.path.join(data_dir, "hf", name + ".json")
    tok = json.load(open(p, encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    if isinstance(vocab, list):  # Unigram: ids are the order
        vocab = {e[0]: i for i, e in enumerate(vocab)}
    fallback = bool(tok["model"].get("byte_fallback"))
    want = {i: sentencepiece_piece(q, fallback) for q, i in vocab.items()}
    special = {a["id"] for a in tok["added_tokens"] if a.get("special")}
    for a in tok["added_tokens"]:
        want[a["id"]] = a["content"].encode()
    v = sift.Vocab.from_hf(p, os.path.join(data_dir, "hf", config) if config else None)
    assert len(v) == max(want) + 1
    for i in range(len(v)):
        assert v.piece(i) == want[i], i
        assert bool(v.attr(i) & sift.TOKEN_SPECIAL) == (i in special), i
    assert b"</s>" in [v.piece(i) for i in v.eog_ids()]


def hf_invalid_cases(data_dir):
    d = os.path.join(data_dir, "hf-invalid")
    return sorted(f[:-4] for f in os.listdir(d) if f.endswith(".err"))


def test_each_bad_tokenizer_file_raises_its_golden_error(data_dir):
    d = os.path.join(data_dir, "hf-invalid")
    cases = hf_invalid_cases(data_dir)
    assert len(cases) >= 25
    for name in cases:
        tp = os.path.join(d, name + ".json")
        cp = os.path.join(d, name + ".config.json")
        cp = cp if os.path.exists(cp) else None
        status, msg = open(os.path.join(d, name + ".err"), encoding="utf-8").read().split("\n")[:2]
        with pytest.raises(sift.SiftError) as e:
            sift.Vocab.from_hf(tp, cp)
        assert e.value.status == int(status), name
        assert e.value.message == msg.replace("FILE", tp).replace("CONFIG", cp or ""), name
        assert e.value.source == (cp if msg.startswith("CONFIG") else tp)
        with pytest.raises(sift.SiftError) as e:
            sift.Vocab.from_hf(open(tp, "rb").read(), open(cp, "rb").read() if cp else None)
        assert e.value.message == msg.replace("FILE", "<tokenizer.json>").replace(
            "CONFIG", "<config>"), name
    with pytest.raises(sift.SiftError) as e:
        sift.Vocab.from_hf("/nonexistent/tokenizer.json")
    assert e.value.status == Status.IO


def real_hf_dirs():
    d = os.environ.get("SIFT_HF_DIR")
    if not d or not os.path.isdir(d):
        return []
    return sorted(n for n in os.listdir(d) if os.path.exists(os.path.join(d, n, "tokenizer.json")))


@pytest.mark.parametrize("name", real_hf_dirs() or [pytest.param(None, marks=pytest.mark.skip(
    reason="SIFT_HF_DIR is not set (tests/bench/fetch_hf.sh DIR)"))])
def test_from_hf_on_real_tokenizers_matches_their_json(name):
    d = os.path.join(os.environ["SIFT_HF_DIR"], name)
    tok = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    cfg = os.path.join(d, "tokenizer_config.json")
    v = sift.Vocab.from_hf(os.path.join(d, "tokenizer.json"), cfg if os.path.exists(cfg) else None)
    if (tok.get("decoder") or {}).get("type") == "ByteLevel":
        want = expected_pieces(tok)
    else:  # SentencePiece-style (Llama 2)
        fallback = bool(tok["model"].get("byte_fallback"))
        want = {i: sentencepiece_piece(q, fallback) for q, i in tok["model"]["vocab"].items()}
        for a in tok.get("added_tokens", []):
            want[a["id"]] = a["content"].encode()
    assert len(v) == max(want) + 1
    for i, b in want.items():
        assert v.piece(i) == b, (name, i)


def test_the_stub_names_only_what_the_package_has():
    import ast
    stub = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sift", "__init__.pyi")
    tree = ast.parse(open(stub, encoding="utf-8").read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and hasattr(sift, node.name):
            cls = getattr(sift, node.name)
            for item in node.body:  # methods (instance attributes are not on the class)
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                    assert hasattr(cls, item.name), "%s.%s" % (node.name, item.name)
        elif isinstance(node, ast.FunctionDef):
            assert hasattr(sift, node.name), node.name

"""Every documented error comes back as SiftError (a ValueError) with the
C status and the place the C library names; a failed call changes
nothing."""
import os
import tempfile

import numpy as np
import pytest

import sift
from sift.status import Status


def test_sift_error_is_a_value_error():
    assert issubclass(sift.SiftError, ValueError)


def test_yaml_errors_name_file_line_and_column():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "bad.yaml")
        with open(p, "w") as f:
            f.write("seed: 1\nchain:\n  - top_p: 2.5\n  - dist\n")
        with pytest.raises(sift.SiftError) as e:
            sift.Chain.from_yaml_file(p)
    err = e.value
    assert err.status == Status.CONFIG_VALUE
    assert (err.line, err.column) == (3, 12)
    assert str(err).startswith(p + ":3:12: error:")
    assert err.diagnostics and err.diagnostics[0].startswith(p + ":3:12")


def test_yaml_syntax_and_unknown_keys():
    with pytest.raises(sift.SiftError) as e:
        sift.Chain.from_yaml("chain: [dist\n", name="x.yaml")
    assert e.value.status == Status.CONFIG_SYNTAX and e.value.line >= 1
    with pytest.raises(sift.SiftError) as e:
        sift.Chain.from_yaml("chain:\n  - tpo_k: 3\n  - dist\n", name="y.yaml")
    assert e.value.status == Status.CONFIG_KEY and (e.value.line, e.value.column) == (2, 5)


def test_missing_files_are_io_errors():
    with pytest.raises(sift.SiftError) as e:
        sift.Chain.from_yaml_file("/nonexistent/chain.yaml")
    assert e.value.status == Status.IO
    with pytest.raises(sift.SiftError) as e:
        sift.Vocab.from_tiktoken("/nonexistent/x.tiktoken")
    assert e.value.status == Status.IO


def test_gbnf_errors_name_line_and_column(vocab):
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_gbnf('root ::= "a"\nitem ::= [a-\n', vocab, name="g.gbnf")
    assert e.value.status == Status.GRAMMAR_SYNTAX and e.value.line == 2
    assert str(e.value).startswith("g.gbnf:2:")
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_gbnf("root ::= item", vocab)
    assert e.value.status == Status.GRAMMAR_UNDEFINED
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_gbnf("root ::= root \"a\"", vocab)
    assert e.value.status == Status.GRAMMAR_LEFT_RECURSION


def test_json_schema_errors_name_the_pointer(vocab):
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_json_schema('{"type": "object",\n "properties": {"a": {"not": {"pattern": "1"}}}}',
                                      vocab, name="s.json")
    assert e.value.status == Status.SCHEMA_UNSUPPORTED
    assert "#/properties/a/not" in str(e.value) and e.value.line == 2
    with pytest.raises(sift.SiftError) as e:
        sift.Grammar.from_json_schema("{", vocab)
    assert e.value.status == Status.SCHEMA_SYNTAX


def test_token_and_row_errors_carry_the_index(vocab):
    c = sift.Chain(1).add_dist()
    row = np.zeros(10, dtype=np.float32)
    row[3] = np.inf
    with pytest.raises(sift.SiftError) as e:
        c.sample(row)
    assert e.value.status == Status.ROW_VALUE and e.value.index == 3
    c.sample(np.zeros(10, dtype=np.float32))
    with pytest.raises(sift.SiftError) as e:
        c.accept(10)
    assert e.value.status == Status.TOKEN
    with pytest.raises(sift.SiftError) as e:
        c.sample(np.full(10, -np.inf, dtype=np.float32))
    assert e.value.status == Status.NO_CANDIDATE
    with pytest.raises(sift.SiftError) as e:
        vocab.piece(len(vocab))
    assert e.value.status == Status.TOKEN


def test_slice_errors_name_the_id():
    c = sift.Chain(1).add_top_k(2).add_greedy()
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice(np.array([4, 4, 1]), np.array([3, 2, 1], dtype=np.float32), 10)
    assert e.value.status == Status.SLICE and e.value.index == 4
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice(np.array([4, 12]), np.array([3, 2], dtype=np.float32), 10)
    assert e.value.status == Status.SLICE
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice(np.array([4, 1]), np.array([3, np.nan], dtype=np.float32), 10)
    assert e.value.status == Status.ROW_VALUE and e.value.index == 1
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice(np.array([4]), np.array([3, 1], dtype=np.float32), 10)
    assert e.value.status == Status.SLICE
    with pytest.raises(sift.SiftError) as e:
        c.sample_slice(np.array([4, 1]), np.array([3, 2], dtype=np.float32), 10,
                       tail_mass=float("nan"))
    assert e.value.status == Status.SLICE


def test_stage_parameters_out_of_range_change_nothing():
    c = sift.Chain(1).add_top_k(3)
    with pytest.raises(sift.SiftError) as e:
        c.add_top_p(1.5)
    assert e.value.status == Status.ARG
    assert c.stages == ("top_k",)
    with pytest.raises(sift.SiftError) as e:
        c.add_penalties(-1)
    assert e.value.status == Status.ARG


def test_a_dead_grammar_is_grammar_dead(vocab):
    g = sift.Grammar.from_gbnf('root ::= "ab"', vocab)
    c = sift.Chain(1).add_grammar(g).add_dist()
    row = np.full(len(vocab), -np.inf, dtype=np.float32)
    row[ord("x")] = 0
    with pytest.raises(sift.SiftError) as e:
        c.sample(row)
    assert e.value.status == Status.GRAMMAR_DEAD


def test_lazy_trigger_errors_name_the_trigger(vocab):
    g = sift.Grammar.from_gbnf('root ::= "a"', vocab)
    with pytest.raises(sift.SiftError) as e:
        g.set_lazy(patterns=["ok", "(unclosed"])
    assert e.value.status == Status.PATTERN_SYNTAX and e.value.index == 1
    with pytest.raises(sift.SiftError) as e:
        g.set_lazy(tokens=[10**6])
    assert e.value.status == Status.TOKEN


def test_tiktoken_errors_name_the_line():
    with pytest.raises(sift.SiftError) as e:
        sift.Vocab.from_tiktoken(b"YQ== 0\nYg== x\n")
    assert e.value.status == Status.ARG and e.value.line == 2
    v = sift.Vocab.from_tiktoken(b"YQ== 0\nYg== 1\n")
    assert len(v) == 2 and v.piece(1) == b"b"


def test_bitmask_arguments_are_checked(vocab):
    g = sift.Grammar.from_gbnf('root ::= "a"', vocab)
    with pytest.raises(sift.SiftError) as e:
        g.fill_next_token_bitmask(np.zeros((1, 2), dtype=np.int32))
    assert e.value.status == Status.ARG
    with pytest.raises(sift.SiftError) as e:
        g.fill_next_token_bitmask(sift.allocate_token_bitmask(2, len(vocab)), 2)
    assert e.value.status == Status.ARG and e.value.index == 2
    with pytest.raises(TypeError, match="int64"):
        g.fill_next_token_bitmask(np.zeros((1, 9), dtype=np.int64))
    ro = sift.allocate_token_bitmask(1, len(vocab))
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="read-only"):
        g.fill_next_token_bitmask(ro)


def test_gguf_errors_name_the_offset():
    with pytest.raises(sift.SiftError) as e:
        sift.Vocab.from_gguf(b"GGUX\x03\x00\x00\x00")
    assert e.value.status == Status.ARG and "offset" in str(e.value)

"""sift.sglang: a grammar backend for SGLang, with SGLang's method names.

Written against python/sglang/srt/constrained/base_grammar_backend.py of
sgl-project/sglang at 99e1c516 (BaseGrammarObject, BaseGrammarBackend,
INVALID_GRAMMAR_OBJ, register_grammar_backend). When SGLang is importable
the classes subclass its own; otherwise they stand alone with the same
methods, so the module imports without SGLang (and is tested that way,
against a stand-in of that file; docs/python.md says so).

    import sift, sift.sglang
    sift.sglang.register(lambda tokenizer, vocab_size, eos_ids: my_vocab)
    # or: sift.sglang.register(tokenizer_json="/models/qwen/tokenizer.json")
    # then run SGLang with --grammar-backend sift

Mask buffers are xgrammar's: int32 [batch, ceil(V/32)] on the CPU, filled
with -1 (rows of unconstrained requests keep "allow everything").
"""
import json
import logging

from ._grammar import Grammar
from ._sift import SiftError, Vocab

logger = logging.getLogger(__name__)

try:  # SGLang's own base classes when it is installed
    from sglang.srt.constrained import base_grammar_backend as _base

    _BaseObject = _base.BaseGrammarObject
    _BaseBackend = _base.BaseGrammarBackend
    INVALID_GRAMMAR_OBJ = _base.INVALID_GRAMMAR_OBJ
    _register = _base.register_grammar_backend
except ImportError:  # pragma: no cover - exercised when SGLang is absent
    _base = None

    class _BaseObject:
        def __init__(self):
            self.finished = False
            self.grammar_stats = None
            self.current_token = None

    class _BaseBackend:
        def __init__(self):
            from concurrent.futures import ThreadPoolExecutor
            self.executor = ThreadPoolExecutor()
            self.cache = {}

    INVALID_GRAMMAR_OBJ = None
    _register = None

__all__ = ["SiftGrammarObject", "SiftGrammarBackend", "register", "vocab_from_hf",
           "INVALID_GRAMMAR_OBJ"]


class SiftGrammarObject(_BaseObject):
    """One request's grammar (a sift.Grammar) behind SGLang's
    BaseGrammarObject methods."""

    def __init__(self, grammar: Grammar):
        super().__init__()
        self.grammar = grammar

    def accept_token(self, token: int) -> None:
        """Advances; ValueError on a rejected token (the scheduler then
        aborts the request, as with the xgrammar backend)."""
        if not self.grammar.accept_token(int(token)):
            raise ValueError("sift grammar rejects token %d" % token)

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device):
        from . import torch as st
        return st.allocate_token_bitmask(batch_size, vocab_size)

    def fill_vocab_mask(self, vocab_mask, idx: int) -> None:
        self.grammar.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def move_vocab_mask(vocab_mask, device):
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits, vocab_mask) -> None:
        from . import torch as st
        st.apply_token_bitmask_inplace(logits, vocab_mask)

    def rollback(self, k: int) -> None:
        """Takes back the last k accepted tokens (EAGLE's tree walk,
        jump_and_retokenize); the grammar keeps the backend's
        max_rollback_tokens of history."""
        self.grammar.rollback(int(k))

    def is_terminated(self) -> bool:
        """True once an end-of-generation token was accepted."""
        return self.grammar.is_terminated()

    def copy(self) -> "SiftGrammarObject":
        """A fresh matcher in the initial state sharing the compiled form
        (what SGLang hands a request on a cache hit)."""
        g = self.grammar.copy()
        g.reset()
        return SiftGrammarObject(g)

    def try_jump_forward(self, tokenizer):
        """([], text) when the grammar forces the next text (its whole
        UTF-8 characters, find_jump_forward_string), else None; as the
        xgrammar backend does, the tokens are left to SGLang, which
        retokenizes and calls jump_and_retokenize."""
        s = self.grammar.find_jump_forward_string()
        if s:
            return [], s
        return None

    def jump_forward_str_state(self, helper):
        """(text, -1): the text try_jump_forward found; no state id."""
        _, data = helper
        return data, -1

    def jump_and_retokenize(self, old_output_ids, new_output_ids, next_state) -> None:
        """Rolls back to the common prefix of the old and new output ids
        and accepts the rest of the new ones (ValueError if one is
        rejected, as accept_token)."""
        k = 0
        for a, b in zip(old_output_ids, new_output_ids):
            if a != b:
                break
            k += 1
        if k < len(old_output_ids):
            self.grammar.rollback(len(old_output_ids) - k)
        for t in new_output_ids[k:]:
            self.accept_token(t)


class SiftGrammarBackend(_BaseBackend):
    """SGLang's grammar backend over one shared sift.Vocab. dispatch_json
    (a JSON Schema; "$$ANY$$" = any JSON value) and dispatch_ebnf (GBNF)
    compile with the GIL released, on SGLang's executor; a bad spec is
    logged and returns INVALID_GRAMMAR_OBJ, as the xgrammar backend does."""

    def __init__(self, vocab, *, whitespace="flexible", max_rollback_tokens=200):
        super().__init__()
        self.vocab = vocab
        self.whitespace = whitespace
        self.max_rollback_tokens = max_rollback_tokens

    def _invalid(self, kind, key_string, e):
        logger.warning("sift: invalid %s grammar: %s (%r)", kind, e, key_string[:200])
        return INVALID_GRAMMAR_OBJ

    def _build(self, kind, key_string, make):
        try:
            g = make()
        except (SiftError, ValueError, TypeError) as e:
            return self._invalid(kind, key_string, e)
        return SiftGrammarObject(g)

    def dispatch_json(self, key_string: str):
        schema = "true" if key_string == "$$ANY$$" else key_string
        return self._build("json", key_string, lambda: Grammar.from_json_schema(
            schema, self.vocab, whitespace=self.whitespace,
            max_rollback_tokens=self.max_rollback_tokens))

    def dispatch_ebnf(self, key_string: str):
        return self._build("ebnf", key_string, lambda: Grammar.from_gbnf(
            key_string, self.vocab, name="ebnf", max_rollback_tokens=self.max_rollback_tokens))

    def dispatch_regex(self, key_string: str):
        return self._build("regex", key_string, lambda: Grammar.from_regex(
            key_string, self.vocab, max_rollback_tokens=self.max_rollback_tokens))

    def dispatch_structural_tag(self, key_string: str):
        """xgrammar's legacy form {"structures": [{"begin", "schema",
        "end"}, ...], "triggers": [...]}; the newer {"format": ...} form
        is not supported (INVALID_GRAMMAR_OBJ, logged)."""
        def make():
            spec = json.loads(key_string)
            if not isinstance(spec, dict) or "structures" not in spec:
                raise ValueError("only the {\"structures\", \"triggers\"} form of "
                                 "structural tags is supported")
            return Grammar.from_structural_tags(spec, vocab=self.vocab,
                                                whitespace=self.whitespace,
                                                max_rollback_tokens=self.max_rollback_tokens)
        return self._build("structural_tag", key_string, make)


def vocab_from_hf(tokenizer_json, vocab_size, eos_token_ids=None, generation_config=None):
    """A sift.Vocab for SGLang from a tokenizer.json (path or bytes) and
    optionally generation_config.json: sift.Vocab.from_hf, padded to the
    model's vocab_size and with SGLang's eos_token_ids marked as
    end-of-generation (Vocab.extend)."""
    v = Vocab.from_hf(tokenizer_json, generation_config)
    eos = sorted(int(t) for t in (eos_token_ids or ()))
    if eos or vocab_size > len(v):
        v = v.extend(eog_ids=eos, n_vocab=max(int(vocab_size), len(v)))
    return v


def register(vocab_factory=None, name="sift", *, tokenizer_json=None, generation_config=None,
             **backend_kw):
    """Registers the backend with SGLang's register_grammar_backend under
    `name` (select it with --grammar-backend NAME). The vocabulary comes
    from vocab_factory(tokenizer, vocab_size, eos_token_ids), which
    returns the sift.Vocab of the model (padded to vocab_size, the EOS
    ids marked: sift.Vocab.from_pieces(..., eog_ids=..., n_vocab=
    vocab_size)), or, without one, from `tokenizer_json` (a
    tokenizer.json path or bytes; with `generation_config`, through
    vocab_from_hf). backend_kw: whitespace, max_rollback_tokens (default
    200, as SGLang's xgrammar backend). Returns the init function."""
    if _register is None:
        raise ImportError("sift.sglang.register needs SGLang (sglang.srt.constrained)")
    if (vocab_factory is None) == (tokenizer_json is None):
        raise TypeError("register needs exactly one of vocab_factory and tokenizer_json")
    if vocab_factory is None:
        def vocab_factory(tokenizer, vocab_size, eos_token_ids):
            return vocab_from_hf(tokenizer_json, vocab_size, eos_token_ids, generation_config)

    def init(server_args, tokenizer, vocab_size, eos_token_ids=None):
        return SiftGrammarBackend(vocab_factory(tokenizer, vocab_size, eos_token_ids),
                                  **backend_kw)

    _register(name, init)
    return init

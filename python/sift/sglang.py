"""sift.sglang: a grammar backend for SGLang, with SGLang's method names.

Written against python/sglang/srt/constrained/base_grammar_backend.py of
sgl-project/sglang at 99e1c516 (BaseGrammarObject, BaseGrammarBackend,
INVALID_GRAMMAR_OBJ, register_grammar_backend). When SGLang is importable
the classes subclass its own; otherwise they stand alone with the same
methods, so the module imports without SGLang (and is tested that way,
against a stand-in of that file; docs/python.md says so).

    import sift, sift.sglang
    sift.sglang.register(lambda tokenizer, vocab_size, eos_ids: my_vocab)
    # then run SGLang with --grammar-backend sift

Mask buffers are xgrammar's: int32 [batch, ceil(V/32)] on the CPU, filled
with -1 (rows of unconstrained requests keep "allow everything").
"""
import logging

from ._grammar import Grammar
from ._sift import SiftError

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

__all__ = ["SiftGrammarObject", "SiftGrammarBackend", "register", "INVALID_GRAMMAR_OBJ"]


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

    def copy(self) -> "SiftGrammarObject":
        """A fresh matcher in the initial state sharing the compiled form
        (what SGLang hands a request on a cache hit)."""
        g = self.grammar.copy()
        g.reset()
        return SiftGrammarObject(g)

    def try_jump_forward(self, tokenizer):
        """None: no jump forward (sift has no forced-bytes query yet)."""
        return None


class SiftGrammarBackend(_BaseBackend):
    """SGLang's grammar backend over one shared sift.Vocab. dispatch_json
    (a JSON Schema; "$$ANY$$" = any JSON value) and dispatch_ebnf (GBNF)
    compile with the GIL released, on SGLang's executor; a bad spec is
    logged and returns INVALID_GRAMMAR_OBJ, as the xgrammar backend does."""

    def __init__(self, vocab, *, whitespace="flexible"):
        super().__init__()
        self.vocab = vocab
        self.whitespace = whitespace

    def _invalid(self, kind, key_string, e):
        logger.warning("sift: invalid %s grammar: %s (%r)", kind, e, key_string[:200])
        return INVALID_GRAMMAR_OBJ

    def dispatch_json(self, key_string: str):
        schema = "true" if key_string == "$$ANY$$" else key_string
        try:
            g = Grammar.from_json_schema(schema, self.vocab, whitespace=self.whitespace)
        except SiftError as e:
            return self._invalid("json", key_string, e)
        return SiftGrammarObject(g)

    def dispatch_ebnf(self, key_string: str):
        try:
            g = Grammar.from_gbnf(key_string, self.vocab, name="ebnf")
        except SiftError as e:
            return self._invalid("ebnf", key_string, e)
        return SiftGrammarObject(g)


def register(vocab_factory, name="sift", **backend_kw):
    """Registers the backend with SGLang's register_grammar_backend under
    `name` (select it with --grammar-backend NAME). vocab_factory(tokenizer,
    vocab_size, eos_token_ids) returns the sift.Vocab of the model (padded
    to vocab_size, the EOS ids marked: sift.Vocab.from_pieces(...,
    eog_ids=..., n_vocab=vocab_size)). Returns the init function."""
    if _register is None:
        raise ImportError("sift.sglang.register needs SGLang (sglang.srt.constrained)")

    def init(server_args, tokenizer, vocab_size, eos_token_ids=None):
        return SiftGrammarBackend(vocab_factory(tokenizer, vocab_size, eos_token_ids),
                                  **backend_kw)

    _register(name, init)
    return init

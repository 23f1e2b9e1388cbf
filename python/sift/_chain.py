"""sift.Chain (the C type plus a few pure-Python helpers) and sift.Slice."""
import json
import math
from typing import NamedTuple, Optional, Any

from . import _sift


class Slice(NamedTuple):
    """What a runtime copies off the device instead of a whole row.

    ids: int32 or int64 [k] (torch.topk gives int64), logits: float32 [k],
    the k largest logits of the row in any order; n_vocab: V;
    tail_mass: an upper bound on sum(exp(l - max)) over the tokens the
    slice does not hold (docs/analyzer.md, "Tail mass"), or None;
    canonical: the prefix is exactly the row's canonical Prefix(k);
    extras: (ids, logits) of the chain's extras, or None.
    """

    ids: Any
    logits: Any
    n_vocab: int
    tail_mass: Optional[float] = None
    canonical: bool = False
    extras: Optional[tuple] = None


class Chain(_sift.Chain):
    __slots__ = ()
    __doc__ = _sift.Chain.__doc__

    def logprobs(self, logits, n=20):
        """The first n entries of the selector's distribution as
        (id, logprob) pairs, canonical order (what servers return)."""
        return [(i, math.log(p) if p > 0 else -math.inf)
                for i, _, p in self.distribution(logits, n)]

    def sample_slice_obj(self, s: Slice) -> int:
        """sample_slice with a sift.Slice."""
        return self.sample_slice(s.ids, s.logits, s.n_vocab, tail_mass=s.tail_mass,
                                 canonical=s.canonical, extras=s.extras)

    def __repr__(self):
        return "<sift.Chain %s>" % " -> ".join(self.stages)

    @classmethod
    def from_request(cls, body, *, form="openai", vocab=None, name=None):
        """A chain from a request body (a dict, or its JSON text) of an
        OpenAI-compatible server (form="openai", vLLM's semantics) or of
        llama-server (form="llama.cpp"): from_yaml with that form. What the
        body asks besides the chain (logprobs, the chain it maps to) is in
        chain.config."""
        if not isinstance(body, (str, bytes)):
            body = json.dumps(body)
        return cls.from_yaml(body, vocab, name=name, form=form)

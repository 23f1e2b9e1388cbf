"""sift.hf: Hugging Face generate() processors, without importing
transformers (a processor is any callable (input_ids, scores) -> scores;
LogitsProcessorList only calls it).

- GrammarLogitsProcessor(grammar): masks the tokens a grammar rejects (one
  copy of the grammar per row, as xgrammar's contrib/hf.py does);
- ChainLogitsProcessor(chain): runs a whole sift chain on each row and
  returns rows whose only finite logit is sift's token, so whatever
  generate() does next (argmax under do_sample=False, or a softmax draw)
  picks exactly that token. Configure sampling in sift and leave
  generate()'s own warpers and penalties off: they run before a custom
  processor (penalties) or see a one-hot row (warpers), and cannot change
  the pick.

One instance serves one generate() call (it keeps per-row state); beam
search reorders rows between steps, which per-row state cannot follow.
Both accept torch tensors on any device (the scores come back to the
host only for ChainLogitsProcessor, which needs the whole row) and numpy
arrays (llama-cpp-python's (input_ids, scores) processors, 1-D scores).
"""
import numpy as np

from ._sift import SiftError

__all__ = ["GrammarLogitsProcessor", "ChainLogitsProcessor"]


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _rows(input_ids):
    """input_ids as a list of per-row id lists (torch [B, L], numpy [B, L] or [L])."""
    a = input_ids.cpu().numpy() if _is_torch(input_ids) else np.asarray(input_ids)
    return a.reshape(1, -1) if a.ndim == 1 else a


class GrammarLogitsProcessor:
    """Masks every token the grammar rejects: (input_ids, scores) -> scores.

    grammar: a sift.Grammar (copied once per row) or a list of them, one
    per row. The first call records the batch; later calls first accept
    each row's last input id. A row whose grammar rejects its last token
    raises ValueError (as the engines' backends do). Once a row's grammar
    has accepted an end-of-generation token (is_terminated()) the row is
    finished: its later ids (generate()'s padding) are not fed to the
    grammar and its scores are left unmasked."""

    def __init__(self, grammar):
        self._proto = grammar
        self._grammars = None
        self._mask = None
        self._torch_mask = None

    def __call__(self, input_ids, scores):
        ids = _rows(input_ids)
        one = scores.ndim == 1 if not _is_torch(scores) else scores.dim() == 1
        B = 1 if one else scores.shape[0]
        if self._grammars is None:
            if isinstance(self._proto, (list, tuple)):
                if len(self._proto) != B:
                    raise ValueError("%d grammars for a batch of %d" % (len(self._proto), B))
                self._grammars = [g.copy() for g in self._proto]
            else:
                self._grammars = [self._proto.copy() for _ in range(B)]
            V = self._grammars[0].vocab_size
            self._mask = np.full((B, (V + 31) // 32), -1, dtype=np.int32)
        else:
            # Check every row first, so that a rejected token changes no row.
            # A terminated row (its end-of-generation token accepted) is
            # finished: generate() pads it, and its grammar takes no more.
            toks = [int(ids[i, -1]) for i in range(len(self._grammars))]
            live = [not g.is_terminated() for g in self._grammars]
            for i, (g, tok) in enumerate(zip(self._grammars, toks)):
                if live[i] and not g.accepts_token(tok):
                    raise ValueError("row %d: the grammar rejects token %d" % (i, tok))
            for i, (g, tok) in enumerate(zip(self._grammars, toks)):
                if live[i]:
                    g.accept_token(tok)
        for i, g in enumerate(self._grammars):
            if g.is_terminated():
                self._mask[i] = -1  # a finished row: its scores are the padding's
            else:
                g.fill_next_token_bitmask(self._mask, i)
        if _is_torch(scores):
            from . import torch as st
            st.apply_token_bitmask_inplace(scores, self._mask)
        else:
            from ._bitmask import apply_token_bitmask_inplace
            apply_token_bitmask_inplace(scores, self._mask[0] if one else self._mask)
        return scores


class ChainLogitsProcessor:
    """Runs a sift chain per row: (input_ids, scores) -> scores where sift's
    token is the only finite logit (0) of each row.

    chain: a sift.Chain (cloned once per row) or a list, one per row. The
    first call feeds each row's input ids as prompt tokens
    (accept_prompt); later calls accept each row's last id, which is the
    token sift chose unless generate() padded a finished row. Rows are
    sampled in one sift.sample_batch call (the GIL released)."""

    def __init__(self, chain):
        self._proto = chain
        self._chains = None

    def __call__(self, input_ids, scores):
        from ._sift import sample_batch
        ids = _rows(input_ids)
        torch_scores = _is_torch(scores)
        one = (scores.dim() if torch_scores else scores.ndim) == 1
        B = 1 if one else scores.shape[0]
        if self._chains is None:
            if isinstance(self._proto, (list, tuple)):
                if len(self._proto) != B:
                    raise ValueError("%d chains for a batch of %d" % (len(self._proto), B))
                self._chains = list(self._proto)
            else:
                self._chains = [self._proto.clone() for _ in range(B)]
            for i, c in enumerate(self._chains):
                c.accept_prompt(ids[i])
        else:
            for i, c in enumerate(self._chains):
                c.accept(int(ids[i, -1]))
        if torch_scores:
            host = scores.detach().float().cpu().reshape(B, -1).contiguous().numpy()
        else:
            host = np.ascontiguousarray(np.asarray(scores, dtype=np.float32).reshape(B, -1))
        tokens, errors = sample_batch(self._chains, host, accept=False)
        for e in errors:
            if e is not None:
                raise e
        if torch_scores:
            import torch
            out = scores.reshape(B, -1)
            out.fill_(float("-inf"))
            idx = torch.as_tensor(tokens, dtype=torch.long, device=scores.device).unsqueeze(1)
            out.scatter_(1, idx, 0.0)
        else:
            out = np.asarray(scores).reshape(B, -1)
            out.fill(-np.inf)
            out[np.arange(B), tokens] = 0.0
        return scores


# SiftError is a ValueError: the processors let it through unchanged.
_ = SiftError

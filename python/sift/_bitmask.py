"""Token bitmasks in the layout of vLLM, SGLang and xgrammar, for numpy
(and torch, through sift.torch): int32 [batch, ceil(V/32)], bit t % 32
of word t // 32 set when token t is allowed. Names and semantics follow
xgrammar's matcher.py so that engine code can swap imports."""
import numpy as np

bitmask_dtype = np.int32


def get_bitmask_shape(batch_size, vocab_size):
    """(batch_size, ceil(vocab_size / 32))."""
    return (batch_size, (vocab_size + 31) // 32)


def allocate_token_bitmask(batch_size, vocab_size):
    """A numpy int32 [batch_size, ceil(V/32)] bitmask filled with -1 (every
    token allowed). sift.torch.allocate_token_bitmask gives a torch tensor."""
    return np.full(get_bitmask_shape(batch_size, vocab_size), -1, dtype=np.int32)


def reset_token_bitmask(bitmask):
    """Sets every bit (every token allowed), in place."""
    bitmask.fill(-1) if isinstance(bitmask, np.ndarray) else bitmask.fill_(-1)


def _allowed(bitmask, n):
    """bool [rows, n]: bit t of each row (little-endian bit order)."""
    b = np.ascontiguousarray(bitmask).view(np.uint8)
    bits = np.unpackbits(b, axis=-1, bitorder="little")
    if bits.shape[-1] < n:
        pad = np.zeros(bits.shape[:-1] + (n - bits.shape[-1],), dtype=bits.dtype)
        bits = np.concatenate([bits, pad], axis=-1)
    return bits[..., :n].astype(bool)


def apply_token_bitmask_inplace(logits, bitmask, *, vocab_size=None, indices=None):
    """Sets -inf on every logit whose bit is 0, in place.

    logits: float [batch, V] or [V] (numpy, or a torch tensor on any device:
    then sift.torch's version runs); bitmask: int32 [batch, W] or [W].
    Logits past 32 * W (a mask narrower than the row) are set to -inf, as
    SGLang's apply_packed_vocab_mask does; vocab_size limits the columns
    touched (default: the row's width); indices: the rows to mask (logits
    row j with mask row j, as xgrammar's; default every row of the mask)."""
    if not isinstance(logits, np.ndarray):
        from . import torch as _st
        return _st.apply_token_bitmask_inplace(logits, bitmask, vocab_size=vocab_size,
                                               indices=indices)
    bitmask = np.asarray(bitmask)
    one = logits.ndim == 1
    lg = logits[None, :] if one else logits
    bm = bitmask.reshape(1, -1) if bitmask.ndim == 1 else bitmask
    v = lg.shape[-1] if vocab_size is None else min(vocab_size, lg.shape[-1])
    rows = range(min(bm.shape[0], lg.shape[0])) if indices is None else list(indices)
    masked_rows = np.asarray(list(rows), dtype=np.intp)
    src = bm[masked_rows]
    allowed = _allowed(src, v)
    sub = lg[masked_rows, :v]
    sub[~allowed] = -np.inf
    lg[masked_rows, :v] = sub
    return logits

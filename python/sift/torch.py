"""sift.torch: the device side of sift, in torch (imported only here).

make_slices(logits, k) turns a [n, V] logits tensor on any device into
what sift.Chain.sample_slice needs, per row: the ids and values of an
unsorted top-k, and the tail mass, an upper bound on sum(exp(l - m)) over
the tokens outside the top-k (m = the row's largest logit), computed as
docs/analyzer.md, "What a device kernel computes", prescribes: summed
directly over the tokens outside the top-k (never the row's total minus
the top-k's share), in float64, then rounded up. Only 8k + 8 bytes per
row (plus the extras) cross to the host.

The rounding up: the exponent l - m of a float32 (or fp16, bf16) logit is
computed in float64 with a relative error of at most 2^-53, so exp(l - m)
is within |l - m| 2^-53 + 2^-52 < 2^-42 relative for every term that does
not underflow; a float64 sum of V <= 2^24 non-negative terms is within
V 2^-53 <= 2^-29 relative, whatever the reduction order. The result is
multiplied by 1 + 2^-20 (which covers both with a margin of 2^9) and
2^-1000 is added, which covers every term that underflowed (fewer than
2^24 terms, each below 2^-1022). A bound looser than the true sum only
makes the row hook more frequent; a bound below it could change a token,
so the margin is deliberate.

Tensor-parallel vocabularies: make_shard_slices(shard, k, offset) runs
the same on one shard (ids offset to the whole row's), keeping the
shard's own maximum, and merge_shards() does the host-side merge: the k
largest of the shards' candidates (every token above the merged set's
smallest logit is in it, so it is the row's k largest as a set), and the
tail rescaled to the row's maximum: sum over shards of
tail_s * exp(m_s - m) plus exp(l - m) for the candidates left out, in
float64, multiplied by 1 + 2^-20 again. tail_s is an upper bound of its
shard's sum and every other term is computed within a few ulp (k + number
of shards terms, far below 2^20), so the merged value is an upper bound
of the row's tail: merged slices are exact inputs for sample_slice.

Logprobs: every slice also carries its row's log-sum-exp (Slices.row_lse,
float64 [n]): m + log(sum exp(l - m)) over the whole row's finite logits,
from the same float64 pass as the tail, which
Chain.sample_slice_logprobs(..., row_lse=...) needs for raw logprobs.
Shards carry their own (ShardSlices.lse) and merge_shards combines them:
M + log(sum_s exp(lse_s - M)), M the largest lse_s.
"""
import numpy as np
import torch

from ._chain import Slice

__all__ = ["Slices", "make_slices", "ShardSlices", "make_shard_slices", "merge_shards",
           "combine_lse",
           "allocate_token_bitmask", "apply_token_bitmask_inplace", "get_bitmask_shape",
           "bitmask_dtype", "TAIL_SLACK"]

#: Relative margin of every tail mass this module computes (see above).
TAIL_SLACK = 2.0 ** -20
_TINY = 2.0 ** -1000
#: Rows per float64 chunk, so that a batch never needs n x V doubles at once.
_CHUNK = 8

bitmask_dtype = torch.int32


class Slices:
    """The slices of one step, on the host: ids int64 [n, k], logits
    float32 [n, k], tail_mass float64 [n] (numpy arrays), n_vocab, per
    row the extras (ids, logits) or None, and row_lse float64 [n] (each
    row's log-sum-exp, for raw logprobs; None when not computed).
    slices[i] is a sift.Slice."""

    def __init__(self, ids, logits, tail_mass, n_vocab, extras=None, row_lse=None):
        self.row_lse = row_lse
        self.ids = ids
        self.logits = logits
        self.tail_mass = tail_mass
        self.n_vocab = int(n_vocab)
        self.extras = extras if extras is not None else [None] * ids.shape[0]

    def __len__(self):
        return self.ids.shape[0]

    def __getitem__(self, i):
        return Slice(self.ids[i], self.logits[i], self.n_vocab, float(self.tail_mass[i]),
                     False, self.extras[i])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def k(self):
        return self.ids.shape[1]

    def bytes_copied(self):
        """Bytes that crossed to the host: 8 per pair, 8 per tail mass."""
        n = self.ids.shape[0] * self.ids.shape[1] * 8 + self.tail_mass.shape[0] * 8
        for e in self.extras:
            if e is not None:
                n += len(e[0]) * 8
        return n


def _as_2d(logits):
    if not isinstance(logits, torch.Tensor):
        raise TypeError("logits must be a torch tensor, not %s" % type(logits).__name__)
    if logits.dim() == 1:
        return logits.unsqueeze(0)
    if logits.dim() != 2:
        raise TypeError("logits must be [V] or [n, V], not %d-D" % logits.dim())
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError("logits have dtype %s; expected float32, float16 or bfloat16"
                        % logits.dtype)
    return logits


def _topk_and_tail(x, k):
    """Unsorted top-k of each row of x [n, W] and, per row, the row's
    maximum and the rounded-up tail sum relative to it (float64)."""
    if x.dtype == torch.float16 and x.device.type == "cpu":
        # torch 1.13 has no fp16 topk on the CPU; float32 holds fp16 exactly.
        x = x.float()
    vals, ids = torch.topk(x, k, dim=-1, sorted=False)
    n = x.shape[0]
    m = vals.max(dim=-1).values.double() if k > 0 else torch.full((n,), -np.inf,
                                                                  dtype=torch.float64)
    tails, lses = [], []
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        mm = m[lo:hi]
        safe = torch.where(torch.isfinite(mm), mm, torch.zeros_like(mm)).unsqueeze(1)
        w = torch.exp(x[lo:hi].double() - safe)
        w.scatter_(1, ids[lo:hi], 0.0)
        w = torch.where(torch.isnan(w), torch.zeros_like(w), w)
        top = torch.exp(vals[lo:hi].double() - safe)
        top = torch.where(torch.isnan(top), torch.zeros_like(top), top)
        total = w.sum(dim=-1) + top.sum(dim=-1)
        lses.append(torch.where(torch.isfinite(mm), mm + torch.log(total), mm))
        s = w.sum(dim=-1) * (1.0 + TAIL_SLACK) + _TINY
        tails.append(torch.where(torch.isfinite(mm), s, torch.zeros_like(s)))
    tail = torch.cat(tails) if tails else torch.zeros(0, dtype=torch.float64)
    lse = torch.cat(lses) if lses else torch.zeros(0, dtype=torch.float64)
    return vals, ids, m, tail, lse


def _gather_extras(x, extras, offset=0):
    if extras is None:
        return None
    out = []
    for i, e in enumerate(extras):
        if e is None or len(e) == 0:
            out.append(None)
            continue
        idx = torch.as_tensor(np.asarray(e, dtype=np.int64) - offset, device=x.device)
        v = x[i].index_select(0, idx).float().cpu().numpy()
        out.append((np.asarray(e, dtype=np.int64), v))
    return out


def make_slices(logits, k, *, extras=None):
    """Slices of every row of `logits` ([n, V] or [V]; float32, float16 or
    bfloat16; any device): an unsorted torch.topk of k (clamped to V), the
    values as float32 (exact for fp16 and bf16), the tail mass, and for
    row i the logits of extras[i] (the ids chain.extras() gave, or None).
    Copy at least plan.k + 1 for a device top-k (docs/analyzer.md, "The
    slice contract"). Returns Slices (host numpy arrays)."""
    x = _as_2d(logits)
    n, V = x.shape
    k = max(1, min(int(k), V))
    with torch.no_grad():
        vals, ids, _, tail, lse = _topk_and_tail(x, k)
        ex = _gather_extras(x, extras)
        return Slices(ids.cpu().numpy(), vals.float().cpu().numpy(),
                      tail.cpu().numpy(), V, ex, lse.cpu().numpy())


class ShardSlices:
    """One vocabulary shard's part of a step: ids (int64, already offset to
    the whole row), logits float32 [n, k_s], the shard's maximum m [n] and
    its tail relative to m [n] and its log-sum-exp lse [n] (float64; None
    when not computed), all on the host."""

    def __init__(self, ids, logits, m, tail, lse=None):
        self.ids, self.logits, self.m, self.tail, self.lse = ids, logits, m, tail, lse


def make_shard_slices(shard_logits, k, offset):
    """make_slices for the shard of the vocabulary [offset, offset + W) on
    its own device: what one tensor-parallel rank copies to the host."""
    x = _as_2d(shard_logits)
    W = x.shape[1]
    k = max(1, min(int(k), W))
    with torch.no_grad():
        vals, ids, m, tail, lse = _topk_and_tail(x, k)
        return ShardSlices((ids + offset).cpu().numpy(), vals.float().cpu().numpy(),
                           m.cpu().numpy(), tail.cpu().numpy(), lse.cpu().numpy())


def merge_shards(shards, k, n_vocab, *, extras=None):
    """The host merge of make_shard_slices' results (in any order) into the
    row's slices: the k largest candidates per row and the tail rescaled
    to the row's maximum, rounded up (module docstring). extras[i], when
    given, is (ids, logits) already gathered for row i."""
    ids = np.concatenate([s.ids for s in shards], axis=1)
    vals = np.concatenate([s.logits for s in shards], axis=1)
    n, c = ids.shape
    k = max(1, min(int(k), c))
    m_s = np.stack([s.m for s in shards], axis=1)  # [n, shards]
    t_s = np.stack([s.tail for s in shards], axis=1)
    part = np.argpartition(-vals, k - 1, axis=1)
    keep, drop = part[:, :k], part[:, k:]
    out_ids = np.take_along_axis(ids, keep, axis=1)
    out_vals = np.take_along_axis(vals, keep, axis=1)
    m = m_s.max(axis=1)
    tails = np.zeros(n, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        for i in range(n):
            if not np.isfinite(m[i]):
                continue
            fin = np.isfinite(m_s[i])
            s = float(np.sum(t_s[i][fin] * np.exp(m_s[i][fin] - m[i])))
            d = np.take(vals[i], drop[i]).astype(np.float64)
            d = d[np.isfinite(d)]
            s += float(np.sum(np.exp(d - m[i])))
            tails[i] = s * (1.0 + TAIL_SLACK) + _TINY
    return Slices(np.ascontiguousarray(out_ids), np.ascontiguousarray(out_vals), tails,
                  n_vocab, extras, combine_lse([s.lse for s in shards]))


def combine_lse(lses):
    """The row's log-sum-exp from its shards' (float64 [n] each, or None):
    M + log(sum_s exp(lse_s - M)), M the largest; None if any is None."""
    if any(x is None for x in lses):
        return None
    a = np.stack([np.asarray(x, dtype=np.float64) for x in lses], axis=1)
    top = a.max(axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = safe + np.log(np.exp(a - safe[:, None]).sum(axis=1))
    return np.where(np.isfinite(top), out, top)


# ---------------------------------------------------------------- bitmasks

def get_bitmask_shape(batch_size, vocab_size):
    """(batch_size, ceil(vocab_size / 32))."""
    return (batch_size, (vocab_size + 31) // 32)


def allocate_token_bitmask(batch_size, vocab_size):
    """A CPU torch.int32 [batch, ceil(V/32)] bitmask filled with -1 (every
    token allowed), as xgrammar's; never pinned."""
    return torch.full(get_bitmask_shape(batch_size, vocab_size), -1, dtype=torch.int32)


_SHIFTS = {}


def _shifts(device):
    s = _SHIFTS.get(device)
    if s is None:
        s = _SHIFTS[device] = torch.arange(32, dtype=torch.int32, device=device)
    return s


def apply_token_bitmask_inplace(logits, bitmask, *, vocab_size=None, indices=None):
    """Sets -inf on every logit whose bit is 0, in place, on the logits'
    device (the mask is moved there). logits: [batch, V] or [V], any float
    dtype; bitmask: int32 [batch, W] or [W]. Columns past 32 * W are set to
    -inf (SGLang's apply_packed_vocab_mask); vocab_size limits the columns
    (default the row's width); indices: the rows to mask (logits row j
    with mask row j, as xgrammar's; default every row of the mask). Plain
    shifts and masked_fill_ (no torch.compile, which torch 1.13 lacks)."""
    if isinstance(logits, np.ndarray):
        from ._bitmask import apply_token_bitmask_inplace as np_apply
        return np_apply(logits, bitmask, vocab_size=vocab_size, indices=indices)
    one = logits.dim() == 1
    lg = logits.unsqueeze(0) if one else logits
    bm = torch.as_tensor(bitmask)
    bm = bm.unsqueeze(0) if bm.dim() == 1 else bm
    bm = bm.to(lg.device, non_blocking=True)
    V = lg.shape[-1] if vocab_size is None else min(int(vocab_size), lg.shape[-1])
    W = bm.shape[-1]
    rows = None if indices is None else torch.as_tensor(indices, dtype=torch.long,
                                                        device=lg.device)
    sel = bm[: lg.shape[0]] if rows is None else bm.index_select(0, rows)
    nb = sel.shape[0]
    bits = (sel.unsqueeze(-1) >> _shifts(lg.device)) & 1  # [nb, W, 32]
    allowed = bits.reshape(nb, W * 32)[:, :V].bool()
    if W * 32 < V:
        pad = torch.zeros((nb, V - W * 32), dtype=torch.bool, device=lg.device)
        allowed = torch.cat([allowed, pad], dim=1)
    if rows is None:
        lg[:nb, :V].masked_fill_(~allowed, float("-inf"))
    else:
        sub = lg.index_select(0, rows)
        sub[:, :V].masked_fill_(~allowed, float("-inf"))
        lg.index_copy_(0, rows, sub)
    return logits

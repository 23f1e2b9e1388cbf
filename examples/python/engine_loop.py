"""The decode loop of an engine with a GPU top-k, in torch.

Each step the model gives a [batch, V] logits tensor on its device. sift
needs only k + 1 (id, logit) pairs per row, the logits of the chain's
extras and one tail mass (sift.torch.make_slices, on any device); the
whole row crosses to the host only when a slice cannot decide (the row
hook). The tokens are bitwise the ones whole rows give: this example
checks that against a second set of chains fed whole rows.

Run: PYTHONPATH=<build>/python/lib python3 examples/python/engine_loop.py
"""
import sys

try:
    import torch
except ImportError:
    print("engine_loop: torch is not installed; skipped")
    sys.exit(77)

import sift
import sift.torch as st

CHAIN = """
seed: 1234
chain:
  - penalties: {last_n: 64, repeat: 1.1}
  - top_k: 20
  - top_p: 0.95
  - min_p: 0.05
  - temperature: 0.8
  - dist
"""
BATCH, V, STEPS = 4, 32000, 24
device = "cuda" if torch.cuda.is_available() else "cpu"
gen = torch.Generator(device=device).manual_seed(0)


def model_step():
    """Stands in for a forward pass: peaked bf16 logits on the device."""
    x = torch.randn(BATCH, V, generator=gen, device=device) * 2
    x[:, :50] += 8 * torch.rand(BATCH, 50, generator=gen, device=device)
    return x.to(torch.bfloat16)


chains = [sift.Chain.from_yaml(CHAIN) for _ in range(BATCH)]
check = [sift.Chain.from_yaml(CHAIN) for _ in range(BATCH)]
k = chains[0].plan().k + 1  # a device top-k needs one more (docs/analyzer.md)
current = {}
for i, c in enumerate(chains):
    c.set_row_hook(lambda i=i: current["logits"][i].float().cpu().numpy())

copied = whole = 0
for step in range(STEPS):
    logits = model_step()
    current["logits"] = logits
    extras = [c.extras() for c in chains]
    slices = st.make_slices(logits, k, extras=extras)  # on the device, then 8k + 8 bytes/row
    tokens, errors = sift.sample_batch(chains, list(slices))
    assert errors == [None] * BATCH, errors
    rows = logits.float().cpu().numpy()
    want, _ = sift.sample_batch(check, rows)
    assert tokens == want, (step, tokens, want)
    copied += slices.bytes_copied()
    whole += BATCH * V * 4

hooks = sum(c.stats()["hook_calls"] for c in chains)
copied += hooks * V * 4
print("engine_loop: %d steps x %d rows on %s, k = %d, tokens equal the whole rows', "
      "row hook calls %d, bytes to the host %d vs %d (%.2f%%)"
      % (STEPS, BATCH, device, k, hooks, copied, whole, 100.0 * copied / whole))

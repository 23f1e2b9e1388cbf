"""sift inside Hugging Face generate(), without transformers installed.

generate() calls each logits processor as processor(input_ids, scores);
this example runs the same loop generate() runs (processors, then argmax)
over a stand-in model. With transformers, pass the processor as
model.generate(..., logits_processor=[proc], do_sample=False).

Run: PYTHONPATH=<build>/python/lib python3 examples/python/hf_processor.py
"""
import sys

try:
    import torch
except ImportError:
    print("hf_processor: torch is not installed; skipped")
    sys.exit(77)

import sift
import sift.hf

pieces = [bytes([b]) for b in range(256)] + [b"true", b"false"]
EOS = len(pieces)
vocab = sift.Vocab.from_pieces(pieces, special={EOS: b"</s>"}, eog_ids=[EOS])
V = len(vocab) + 5  # the model's row is wider than the tokenizer

chain = sift.Chain.from_yaml("seed: 3\nchain:\n  - top_k: 40\n  - temperature: 0.9\n"
                             "  - dist\n")
grammar = sift.Grammar.from_json_schema({"type": "array", "items": {"type": "boolean"},
                                         "maxItems": 3}, vocab, whitespace="compact")


def generate(processors, steps=30):
    g = torch.Generator().manual_seed(0)
    ids = torch.tensor([[1, 2, 3]])
    for _ in range(steps):
        scores = torch.randn(1, V, generator=g)  # stands in for model(ids).logits[:, -1]
        for p in processors:
            scores = p(ids, scores)
        tok = int(torch.argmax(scores, dim=-1))
        if tok == EOS:
            break
        ids = torch.cat([ids, torch.tensor([[tok]])], dim=1)
    return ids[0, 3:].tolist()


out = generate([sift.hf.GrammarLogitsProcessor(grammar)])
text = b"".join(vocab.piece(t) for t in out)
print("hf_processor: grammar-constrained:", text.decode())
assert text.startswith(b"[") and text.endswith(b"]")

# The whole chain: sift picks the token, generate()'s argmax follows it.
out = generate([sift.hf.ChainLogitsProcessor(chain.clone())], steps=10)
ref = chain.clone()
ref.accept_prompt([1, 2, 3])
g = torch.Generator().manual_seed(0)
want = []
for _ in range(10):
    row = torch.randn(1, V, generator=g)[0].numpy()
    t = ref.sample(row)
    ref.accept(t)
    want.append(t)
print("hf_processor: chain tokens:", out)
assert out == [t for t in want][:len(out)]

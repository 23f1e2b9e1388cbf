"""Structured output the way SGLang and vLLM drive a grammar backend.

One sift.Vocab per server; per request a sift.Grammar (here from a JSON
Schema given as a dict); per step one int32 [batch, ceil(V/32)] bitmask
filled on the host (the GIL released) and applied to the logits. The
SGLang adapter (sift.sglang) wraps exactly these calls.

Run: PYTHONPATH=<build>/python/lib python3 examples/python/grammar_backend.py
"""
import numpy as np

import sift
import sift.sglang

# A toy byte-level vocabulary: every single byte, a few words, and <eos>.
pieces = [bytes([b]) for b in range(256)] + [b'{"', b'":', b"true", b"false", b'"}']
EOS = len(pieces)
vocab = sift.Vocab.from_pieces(pieces, special={EOS: b"<eos>"}, eog_ids=[EOS])
V = len(vocab)

schema = {"type": "object", "properties": {"ok": {"type": "boolean"}},
          "required": ["ok"], "additionalProperties": False}
backend = sift.sglang.SiftGrammarBackend(vocab, whitespace="compact")
requests = [backend.dispatch_json(__import__("json").dumps(schema)) for _ in range(2)]
requests.append(backend.dispatch_ebnf('root ::= "yes" | "no"'))

rng = np.random.default_rng(7)
mask = sift.allocate_token_bitmask(len(requests), V)
texts = [b""] * len(requests)
done = [False] * len(requests)
for step in range(40):
    sift.reset_token_bitmask(mask)
    sift.fill_next_token_bitmasks([None if d else r.grammar for r, d in zip(requests, done)],
                                  mask)
    logits = rng.normal(size=(len(requests), V)).astype(np.float32)
    sift.apply_token_bitmask_inplace(logits, mask)
    for i, r in enumerate(requests):
        if done[i]:
            continue
        tok = int(np.argmax(logits[i]))  # greedy over the allowed tokens
        if tok == EOS:
            done[i] = True
            continue
        r.accept_token(tok)
        texts[i] += vocab.piece(tok)
    if all(done):
        break

for t in texts:
    print("grammar_backend:", t.decode())
assert all(done)
assert texts[0].startswith(b'{"ok":') and texts[2] in (b"yes", b"no")

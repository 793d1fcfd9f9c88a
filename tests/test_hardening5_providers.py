"""Hardening 5 (issue 43), the native providers, their configuration and token estimates: each test is
named after the hostile input that broke today's code.

The hostile servers here are raw HTTP servers on 127.0.0.1 answering in Anthropic's and Gemini's wire
formats (their public API references), scripted per test: a stream that never ends, a body nested
10,000 deep, an error body of 3 MB full of terminal escape sequences.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rolecast.errors import LLMAPIError, LLMResponseError, LLMTimeoutError

pytestmark = pytest.mark.allow_model_requests  # (servers on 127.0.0.1 started here)

KEY = "test-key"

Answer = Callable[[BaseHTTPRequestHandler, dict[str, Any]], None]


class Hostile:
    """A server on 127.0.0.1 answering every POST with ``answer(handler, body)``."""

    def __init__(self, answer: Answer):
        self.answer = answer
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                try:
                    outer.answer(self, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def hostile() -> Iterator[Callable[[Answer], Hostile]]:
    servers: list[Hostile] = []

    def start(answer: Answer) -> Hostile:
        servers.append(Hostile(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, kind: str = "application/json") -> None:
    handler.send_response(status)
    handler.send_header("content-type", kind)
    handler.send_header("content-length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _events_then_drip(handler: BaseHTTPRequestHandler, first: list[bytes], drip: bytes, stopping: threading.Event,
                      ) -> None:
    """A stream that opens, sends ``first``, then keeps the connection open with ``drip`` every 0.3 s."""
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("connection", "close")
    handler.end_headers()
    for event in first:
        handler.wfile.write(event)
    handler.wfile.flush()
    ends = time.monotonic() + 30
    while not stopping.is_set() and time.monotonic() < ends:
        handler.wfile.write(drip)
        handler.wfile.flush()
        time.sleep(0.3)


def _sse(name: str | None, data: Any) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


_CLAUDE_START = [
    _sse("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-6",
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
    _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hel"}}),
]


def _claude(url: str, **kwargs: Any) -> Any:
    from rolecast.llm.anthropic import AnthropicLLM

    return AnthropicLLM("claude-sonnet-4-6", api_key=KEY, base_url=url, **kwargs)


def _gemini(url: str, **kwargs: Any) -> Any:
    from rolecast.llm.gemini import GeminiLLM

    return GeminiLLM("gemini-2.5-flash", api_key=KEY, base_url=url, **kwargs)


def _gemini_chunk(text: str) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}],
            "modelVersion": "gemini-2.5-flash"}


def _claude_message(text: str) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 2}}


# -------------------------------------------------------------- 8: a stream kept open is stopped at the deadline
@pytest.mark.parametrize("which", ["anthropic", "gemini"])
async def test_a_stream_kept_open_by_the_server_stops_at_the_calls_deadline(which, hostile):
    def answer(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        if which == "anthropic":
            _events_then_drip(handler, _CLAUDE_START, _sse("ping", {"type": "ping"}), server.stopping)
        else:
            _events_then_drip(handler, [_sse(None, _gemini_chunk("Hel"))], _sse(None, _gemini_chunk(".")),
                              server.stopping)

    server = hostile(answer)
    llm = (_claude if which == "anthropic" else _gemini)(server.url, timeout=2, max_retries=0)
    llm._get_client()  # the SDK's first import (seconds on a busy machine) is not the call's time
    pieces: list[str] = []
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError, match="deadline") as caught:
        async for piece in llm.stream("hi"):
            pieces.append(piece)
    elapsed = time.monotonic() - started
    assert elapsed < 3.5, f"the stream ran {elapsed:.1f} s past a 2 s deadline"
    assert pieces and pieces[0] == "Hel" and caught.value.partial.startswith("Hel")


# ------------------------------------------------------------- 9: one bounded decoder for every provider
_DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("which", ["anthropic", "gemini"])
async def test_an_answer_nested_100000_deep_is_a_typed_error_not_a_recursion_error(which, hostile):
    def answer(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        inner = _claude_message("x") if which == "anthropic" else _gemini_chunk("x")
        _send(handler, 200, json.dumps(inner).encode()[:-1] + b', "deep": ' + _DEEP + b"}")

    server = hostile(answer)
    llm = (_claude if which == "anthropic" else _gemini)(server.url, timeout=10, max_retries=0)
    with pytest.raises(LLMResponseError, match="nested deeper"):
        await llm.ask("hi")


async def test_a_stream_event_nested_100000_deep_is_a_typed_error(hostile):
    def answer(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        deep = b'event: content_block_delta\ndata: {"type": "ping", "x": ' + _DEEP + b"}\n\n"
        _events_then_drip(handler, [*_CLAUDE_START, deep], b"", server.stopping)

    server = hostile(answer)
    with pytest.raises(LLMResponseError, match="nested deeper"):
        _ = [piece async for piece in _claude(server.url, timeout=10, max_retries=0).stream("hi")]


@pytest.mark.parametrize("which", ["anthropic", "gemini"])
async def test_a_body_over_the_cap_is_refused_as_openais_is(which, hostile, monkeypatch):
    monkeypatch.setattr("rolecast.llm.hosted.MAX_BODY_BYTES", 1_000_000)  # (64 MiB in use: 1 MB in the test)

    def answer(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        text = "y" * 2_000_000
        _send(handler, 200, json.dumps(_claude_message(text) if which == "anthropic" else _gemini_chunk(text))
              .encode())

    server = hostile(answer)
    llm = (_claude if which == "anthropic" else _gemini)(server.url, timeout=10, max_retries=0)
    with pytest.raises(LLMResponseError, match="1,000,000 bytes"):
        await llm.ask("hi")


# ------------------------------------------ 10: an error body of escape sequences, 3 MB, is escaped and bounded
_ESCAPES = "\x1b[2J\x1b]0;owned\x07\r"


@pytest.mark.parametrize("which", ["anthropic", "gemini"])
async def test_a_3_mb_error_body_of_escape_sequences_is_escaped_and_bounded(which, hostile):
    message = _ESCAPES + "z" * 3_000_000

    def answer(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        if which == "anthropic":
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        else:
            error = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
        _send(handler, 400, json.dumps(error).encode())

    server = hostile(answer)
    llm = (_claude if which == "anthropic" else _gemini)(server.url, timeout=10, max_retries=0)
    with pytest.raises(LLMAPIError) as caught:
        await llm.ask("hi")
    text = str(caught.value)
    assert len(text) < 5_000 and "more characters" in text
    assert "\x1b" not in text and "\r" not in text and "\\x1b[2J" in text
    assert len(repr(caught.value.body)) < 5_000

"""Hardening 5 (issue 43), the native providers, their configuration and token estimates: each test is
named after the hostile input that broke today's code.

The hostile servers here are raw HTTP servers on 127.0.0.1 answering in Anthropic's and Gemini's wire
formats (their public API references), scripted per test: a stream that never ends, a body nested
10,000 deep, an error body of 3 MB full of terminal escape sequences.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from rolecast.core.config import LLMConfig
from rolecast.errors import LLMAPIError, LLMConnectionError, LLMResponseError, LLMTimeoutError
from roles import Role

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


# ------------------------------------------------------- 14: credentials in base_url / proxy URLs are secrets
def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Ask(Action):
    name: str = "Ask"

    async def run(self, with_messages: list[Message] | None = None, **kwargs: Any) -> str:
        return await self._aask("Say hello")


class Asker(Role):
    name: str = "Ann"
    profile: str = "Asker"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.set_actions([Ask])
        self._watch([UserRequirement])


async def test_a_password_in_base_url_is_not_in_the_error_the_store_runs_show_or_spans(tmp_path):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rolecast.observe.tracing import instrument
    from rolecast.runs.inspection import show_run
    from rolecast.runs.store import SQLiteRunStore

    url = f"http://alice:hunter2pw@127.0.0.1:{_closed_port()}"
    llm = _claude(url, timeout=5, max_retries=0)
    with pytest.raises(LLMConnectionError) as caught:
        await llm.ask("hi")
    assert "hunter2pw" not in str(caught.value) and "***@127.0.0.1" in str(caught.value)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = SQLiteRunStore(tmp_path / "runs.db")
    team = Team(llm=_claude(url, timeout=5, max_retries=0), roles=[Asker()], store=store)
    instrument(team, provider)
    with pytest.raises(Exception) as failed:
        await team.run(idea="hello", n_round=1)
    assert "hunter2pw" not in str(failed.value)
    store.close()
    assert b"hunter2pw" not in (tmp_path / "runs.db").read_bytes()
    shown = show_run(SQLiteRunStore(tmp_path / "runs.db"), team.run_id)
    assert "could not reach" in shown and "hunter2pw" not in shown
    spans = exporter.get_finished_spans()
    assert spans and all("hunter2pw" not in f"{s.attributes} {s.status.description} {s.events}" for s in spans)


def _info(config: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config2.yaml"
    path.write_text(yaml.safe_dump(config))
    root = Path(__file__).resolve().parent.parent
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(root), "ROLECAST_CONFIG": str(path),
           "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "rolecast.cli", "info"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)


def test_rolecast_info_shows_no_password_of_base_url_or_proxy(tmp_path):
    out = _info({"llm": {"api_type": "claude", "api_key": KEY, "base_url": "https://alice:hunter2pw@claude.example"},
                 "proxy": "http://bob:proxypw@proxy.example:3128"}, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "https://***@claude.example" in out.stdout and "http://***@proxy.example:3128" in out.stdout
    assert "hunter2pw" not in out.stdout + out.stderr and "proxypw" not in out.stdout + out.stderr


# ----------------------------------------------------- 15: the token bound holds for digits and hex
@pytest.mark.parametrize("text", ["1234567890" * 300, "deadbeef0123" * 250, "0x3f, 0xa9, " * 250, "日本語" * 400],
                         ids=["digits", "hex", "hex-bytes", "cjk"])
def test_the_bound_before_counting_of_digits_and_hex_is_at_least_one_token_per_byte(text):
    from rolecast.llm.openai import OpenAILLM

    # a tokenizer that splits digits one by one (Llama's, SmolLM's) or falls back to bytes reaches one per byte
    llm = OpenAILLM("a-llama-cpp-server", api_key=KEY, base_url="http://127.0.0.1:9/v1")
    assert llm.token_bound(text, 1) >= len(text.encode())


async def test_1544_tokens_of_digits_on_a_1024_window_are_refused_before_the_server_is_asked():
    from servers import FakeOpenAIServer

    from rolecast.errors import ContextOverflow
    from rolecast.llm.openai import OpenAILLM

    server = FakeOpenAIServer().start()  # (the llama.cpp server that refused it: here, one that counts requests)
    try:
        llm = OpenAILLM("a-llama-cpp-server", api_key=KEY, base_url=server.url, max_retries=0)
        llm.context_window = 1024
        with pytest.raises(ContextOverflow):
            await llm.ask("Sum these: " + "1234567890" * 150, settings={"max_tokens": 16})
        assert server.requests == []
        assert await llm.ask("Sum these: 1 2 3", settings={"max_tokens": 16}) == "Hello world"  # a short one fits
    finally:
        server.stop()


@pytest.mark.integration
async def test_the_token_bound_is_above_the_embedded_models_count_for_digits_and_hex():
    from rolecast.llm import create_llm
    from rolecast.llm.window import messages_text, token_upper_bound

    llm = create_llm(LLMConfig(provider="local"))
    texts = ["1234567890" * 300, "deadbeef0123" * 250, "a1b2c3d4e5f6" * 250, "word " * 500]
    for text in texts:  # (one message: SmolLM2's template adds its default system prompt to it)
        messages = [{"role": "user", "content": text}]
        counted = await llm.count_tokens(messages)
        assert token_upper_bound(messages_text(messages), 1) >= counted, text[:20]


# ------------------------------------------- a proxy in config2.yaml, each SDK; a bad one refused at info
def _proxy(answer: Callable[[dict[str, Any], str], bytes]) -> Answer:
    """A forward proxy standing in for the service: it answers an absolute-form request itself."""

    def serve(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        assert handler.path.startswith("http://"), handler.path  # a request sent to a proxy
        _send(handler, 200, answer(body, handler.path))

    return serve


@pytest.mark.parametrize("which", ["anthropic", "gemini", "openai"])
async def test_a_metagpt_proxy_reaches_each_providers_sdk(which, hostile, tmp_path, monkeypatch):
    import importlib

    from rolecast.core.config import Config
    from rolecast.llm import create_llm

    sdk = importlib.import_module("google.genai" if which == "gemini" else which)
    library = "" if which == "gemini" else next(
        c for c in sdk.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient").__module__
    if library.startswith("httpx2"):
        # the SDK sends through httpx2: a proxy must not need httpx (not installed by rolecast's base install)
        monkeypatch.setitem(sys.modules, "httpx", None)
    paths: list[str] = []

    def answer(body: dict[str, Any], path: str) -> bytes:
        paths.append(path)
        if which == "anthropic":
            return json.dumps(_claude_message("via the proxy")).encode()
        if which == "gemini":
            chunk = {**_gemini_chunk("via the proxy"), "usageMetadata": {"promptTokenCount": 3}}
            chunk["candidates"][0]["finishReason"] = "STOP"
            return json.dumps(chunk).encode()
        return json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": "via the proxy"}}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}}).encode()

    proxy = hostile(_proxy(answer))
    api_type = {"anthropic": "claude", "gemini": "gemini", "openai": "openai"}[which]
    config = Config.from_data({"llm": {"api_type": api_type, "api_key": KEY, "model": "m", "timeout": 10,
                                       "max_retries": 0, "base_url": f"http://{which}.api.invalid/v1"},
                               "proxy": proxy.url})
    llm = create_llm(config.llm)
    try:
        assert await llm.ask("hi") == "via the proxy"
    finally:
        await llm.aclose()
    assert paths and paths[0].startswith(f"http://{which}.api.invalid/")


@pytest.mark.parametrize("proxy", ["YOUR_PROXY", "proxy.example:3128", "ftp://proxy.example"])
def test_metagpts_placeholder_proxy_is_a_config_error_at_info(proxy, tmp_path):
    out = _info({"llm": {"api_type": "claude", "api_key": KEY}, "proxy": proxy}, tmp_path)
    assert out.returncode == 2
    assert "ConfigError" in out.stderr and "llm.proxy" in out.stderr and "not a proxy URL" in out.stderr


# ------------------------------------------------ a missing SDK extra: named, at info and at the first call
@pytest.mark.parametrize(("api_type", "module", "extra"), [("claude", "anthropic", "anthropic"),
                                                           ("gemini", "google.genai", "gemini")])
def test_a_missing_sdk_extra_says_pip_install_at_info_and_at_the_first_call(api_type, module, extra, monkeypatch,
                                                                           tmp_path, capsys):
    from rolecast.cli import main
    from rolecast.core.config import Config
    from rolecast.errors import ConfigError
    from rolecast.llm import create_llm

    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    hint = f'pip install -e ".[{extra}]"'
    config = Config.from_data({"llm": {"api_type": api_type, "api_key": KEY}})
    with pytest.raises(ConfigError, match=re.escape(hint)):
        create_llm(config.llm)
    path = tmp_path / "config2.yaml"
    path.write_text(yaml.safe_dump({"llm": {"api_type": api_type, "api_key": KEY}}))
    monkeypatch.setenv("ROLECAST_CONFIG", str(path))
    assert main(["info"]) == 2
    assert hint in capsys.readouterr().err


# ------------------------------------------------------------- MetaGPT's roles: section, per-role models
class Greeter(Asker):
    name: str = "Gus"
    profile: str = "Greeter"


async def test_metagpts_roles_section_gives_the_named_role_its_own_model(hostile):
    from rolecast.core.config import Config

    def server(text: str) -> Answer:
        return lambda handler, body: _send(handler, 200, json.dumps(_claude_message(text)).encode())

    default, own = hostile(server("from the default model")), hostile(server("from the role's own model"))
    claude = {"api_type": "claude", "api_key": KEY, "max_retries": 0}
    config = Config.from_data({"llm": {**claude, "base_url": default.url},
                               "roles": [{"role": "Greeter", "llm": {**claude, "base_url": own.url}}]})
    team = Team(config=config, roles=[Asker(), Greeter()], store=None)
    history = await team.run(idea="hello", n_round=1)
    said = {m.sent_from: m.content for m in history if m.sent_from in ("Ann", "Gus")}
    assert said == {"Ann": "from the default model", "Gus": "from the role's own model"}


@pytest.mark.parametrize("roles", [[{"role": "Greeter"}], [{"llm": {"api_type": "claude"}}], "Greeter",
                                   [{"role": "Greeter", "llm": {"api_type": "claude"}, "model": "x"}]])
def test_a_malformed_roles_section_is_a_config_error_naming_it(roles):
    from rolecast.core.config import Config
    from rolecast.errors import ConfigError

    with pytest.raises(ConfigError, match="roles"):
        Config.from_data({"llm": {"api_type": "claude", "api_key": KEY}, "roles": roles})



def test_rolecast_info_lists_each_roles_own_model(tmp_path):
    out = _info({"llm": {"api_type": "claude", "api_key": KEY},
                 "roles": [{"role": "Engineer", "llm": {"api_type": "gemini", "api_key": KEY,
                                                         "model": "gemini-2.5-pro"}}]}, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Engineer (gemini: gemini-2.5-pro)" in out.stdout


@pytest.mark.parametrize("which", ["openai", "gemini"])
async def test_a_password_in_base_url_is_not_in_any_providers_connection_error(which):
    from rolecast.llm import create_llm

    url = f"http://alice:hunter2pw@127.0.0.1:{_closed_port()}/v1"
    cfg = LLMConfig(provider="openai" if which == "openai" else "gemini", api_key=KEY, base_url=url, timeout=5,
                    max_retries=0)
    llm = create_llm(cfg)
    with pytest.raises(LLMConnectionError) as caught:
        await llm.ask("hi")
    assert "hunter2pw" not in str(caught.value)
    await llm.aclose()

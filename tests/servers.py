"""Test servers that run on 127.0.0.1 only: a scriptable fake OpenAI API and a real llama.cpp server.

* :class:`FakeOpenAIServer` speaks just enough of ``POST /v1/chat/completions`` (JSON
  and server-sent events) to test a client, records every request, and injects
  faults on demand: a status code, a delay, a rejected field.
* :class:`LlamaServerProcess` runs ``python -m llama_cpp.server`` as a subprocess and
  waits until it answers ``/v1/models``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- fake OpenAI API
@dataclass
class Reply:
    """What the fake server answers to one request.

    ``body`` is the JSON answer (``None``: a default completion of ``text``); with
    ``stream=True`` requests, ``chunks`` (text pieces) are sent as server-sent events.
    """

    status: int = 200
    body: Any = None
    text: str = "Hello world"
    usage: tuple[int, int] = (11, 2)
    delay: float = 0.0
    tool_calls: list[dict[str, Any]] | None = None
    chunks: list[str] | None = None


def completion_body(
    text: str | None,
    usage: tuple[int, int] | None = (11, 2),
    *,
    model: str = "fake-model",
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """A chat.completion JSON body."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
        finish_reason = "tool_calls"
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        }
    return body


def error_body(
    message: str, *, type_: str = "invalid_request_error", param: str | None = None
) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": type_, "param": param, "code": None}}


Handler = Callable[[dict[str, Any]], Reply]


@dataclass
class FakeOpenAIServer:
    """A threaded fake of the chat-completions endpoint.

    Replies come from ``queue`` (``push``) first, then from ``handler(request)``.
    Every request body (parsed JSON) is appended to ``requests``.
    """

    handler: Handler | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    queue: deque[Reply | Handler] = field(default_factory=deque)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The base URL to give the client (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *replies: Reply | Handler) -> None:
        """Answer the next requests with these, in order."""
        self.queue.extend(replies)

    def _next_reply(self, request: dict[str, Any]) -> Reply:
        item: Reply | Handler | None = self.queue.popleft() if self.queue else self.handler
        if item is None:
            return Reply()
        return item if isinstance(item, Reply) else item(request)

    def start(self) -> FakeOpenAIServer:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                request["_path"] = self.path
                server.requests.append(request)
                reply = server._next_reply(request)
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    if reply.status == 200 and request.get("stream") and reply.body is None:
                        self._stream(request, reply)
                    else:
                        body = reply.body
                        if body is None:
                            body = completion_body(reply.text, reply.usage, tool_calls=reply.tool_calls)
                        self._json(reply.status, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, request: dict[str, Any], reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                pieces = reply.chunks if reply.chunks is not None else [reply.text[:5], reply.text[5:]]
                base = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": "fake-model",
                }
                for i, piece in enumerate(pieces):
                    delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
                    self._event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                self._event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                if (request.get("stream_options") or {}).get("include_usage"):
                    p, c = reply.usage
                    usage = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
                    self._event({**base, "choices": [], "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _event(self, data: dict[str, Any]) -> None:
                self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
                self.wfile.flush()

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a handler sleeping in a timeout test must not hold teardown
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


# --------------------------------------------------------------------------- llama.cpp server
class LlamaServerProcess:
    """``python -m llama_cpp.server`` on 127.0.0.1 and a free port, as a subprocess."""

    def __init__(
        self, model: str | Path, *, n_ctx: int = 4096, startup_timeout: float = 180.0, extra_args: tuple[str, ...] = ()
    ):
        self.model = str(model)
        self.extra_args = extra_args
        self.n_ctx = n_ctx
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log_tail(self, n: int = 3000) -> str:
        return Path(self._log.name).read_text(errors="replace")[-n:]

    def start(self) -> LlamaServerProcess:
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            *self.extra_args,
        ]
        # OpenMP workers that sleep instead of spinning: much faster on a shared, busy machine
        env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"llama_cpp.server exited with {code}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"llama_cpp.server not ready in {self.startup_timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)

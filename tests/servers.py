"""Test servers that run on 127.0.0.1 only: a scriptable fake OpenAI API and a real llama.cpp server.

* :class:`FakeOpenAIServer` speaks just enough of ``POST /v1/chat/completions`` (JSON
  and server-sent events) to test a client, records every request, and injects
  faults on demand: a status code, a delay, a rejected field, a raw body of any
  content type (malformed JSON, an HTML page), extra headers (``Retry-After``), a body
  trickled byte by byte, a stream cut off before it ends, garbled event lines.
* :class:`LlamaServerProcess` runs llama.cpp's own server (the embedded model's engine,
  xllamacpp, listening on 127.0.0.1) as a subprocess and waits until it answers ``/v1/models``.
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
    text: str | None = "Hello world"
    usage: tuple[int, int] = (11, 2)
    delay: float = 0.0
    tool_calls: list[dict[str, Any]] | None = None
    chunks: list[str] | None = None
    #: sent as the body as is, with ``content_type`` (a malformed JSON body, an HTML page)
    raw: bytes | None = None
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    #: seconds between single bytes of the body (a server trickling its answer)
    trickle: float = 0.0
    #: a stream that stops after its text chunks: no finish_reason, no [DONE]
    cut: bool = False
    #: a stream of these lines instead of well-formed events (garbled SSE)
    sse_lines: list[bytes] | None = None


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
                request["_headers"] = {k.lower(): v for k, v in self.headers.items()}
                request["_t"] = time.monotonic()
                server.requests.append(request)
                reply = server._next_reply(request)
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    if reply.raw is not None:
                        self._send(reply.status, reply.raw, reply)
                    elif reply.status == 200 and request.get("stream") and reply.body is None:
                        self._stream(request, reply)
                    else:
                        body = reply.body
                        if body is None:
                            body = completion_body(reply.text, reply.usage, tool_calls=reply.tool_calls)
                        self._send(reply.status, json.dumps(body).encode(), reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _send(self, status: int, data: bytes, reply: Reply) -> None:
                self.send_response(status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if reply.trickle:
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(reply.trickle)
                else:
                    self.wfile.write(data)

            def _stream(self, request: dict[str, Any], reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if reply.sse_lines is not None:
                    for line in reply.sse_lines:
                        self.wfile.write(line + b"\n")
                    self.wfile.flush()
                    return
                text = reply.text or ""
                pieces = reply.chunks if reply.chunks is not None else [text[:5], text[5:]]
                base = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": "fake-model",
                }
                for i, piece in enumerate(pieces):
                    delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
                    self._event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                    if reply.trickle:
                        time.sleep(reply.trickle)
                if reply.cut:
                    return  # the connection closes here: no finish_reason, no [DONE]
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


#: clients made by :func:`fast_openai_client`, closed after each test (``tests/conftest.py``)
OPEN_CLIENTS: list[Any] = []


def fast_openai_client(url: str, **kwargs: Any) -> Any:
    """An ``OpenAILLM`` for a server on 127.0.0.1: a 5 s timeout and retries 10-20 ms apart
    (``kwargs`` override them). Closed when the test ends."""
    from rolecast.llm.openai.provider import OpenAILLM

    params: dict[str, Any] = {
        "base_url": url, "timeout": 5.0, "max_retries": 2,
        "retry_initial": 0.01, "retry_max": 0.02, "retry_jitter": 0.0,
    }  # fmt: skip
    llm = OpenAILLM("gpt-4o-mini", **{**params, **kwargs})
    OPEN_CLIENTS.append(llm)
    return llm


# --------------------------------------------------------------------------- llama.cpp server
# The child: llama.cpp's server from the xllamacpp wheel, listening on 127.0.0.1:<port> until SIGTERM.
_SERVER_MAIN = """
import json, signal, sys, threading
import xllamacpp as xlc
options = json.loads(sys.argv[1])
params = xlc.CommonParams()
params.model.path = options["model"]
params.hostnames = ["127.0.0.1"]
params.port = options["port"]
params.n_ctx = options["n_ctx"]
params.n_parallel = options["n_parallel"]
params.kv_unified = True
params.cpuparams.n_threads = params.cpuparams_batch.n_threads = options["threads"]
params.warmup = False
params.verbosity = options["verbosity"]
if options["embedding"]:
    params.embedding = True
    params.n_batch = params.n_ubatch = options["n_ctx"]
    if options["mean_pooling"]:
        params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
server = xlc.Server(params)
print("listening on", server.listening_address, flush=True)
stop = threading.Event()
for sig in (signal.SIGTERM, signal.SIGINT):  # ours, not the engine's: exit through Python's shutdown
    signal.signal(sig, lambda *_: stop.set())
stop.wait()
del server
"""


class LlamaServerProcess:
    """llama.cpp's OpenAI-compatible server (xllamacpp) on 127.0.0.1 and a free port, as a subprocess."""

    def __init__(
        self, model: str | Path, *, n_ctx: int = 4096, startup_timeout: float = 180.0, embedding: bool = False,
        n_parallel: int = 2, threads: int = 1, verbosity: int = 2, mean_pooling: bool = False,
    ):
        """``mean_pooling``: an embedding server averages the token vectors (for a model with no pooling of
        its own, as the embedded model does in process)."""
        self.model = str(model)
        self.n_ctx = n_ctx
        self.embedding = embedding
        self.n_parallel = n_parallel
        self.threads = threads
        self.verbosity = verbosity
        self.mean_pooling = mean_pooling
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
        options = {"model": self.model, "port": self.port, "n_ctx": self.n_ctx, "n_parallel": self.n_parallel,
                   "threads": self.threads, "embedding": self.embedding, "verbosity": self.verbosity,
                   "mean_pooling": self.mean_pooling}
        cmd = [sys.executable, "-c", _SERVER_MAIN, json.dumps(options)]
        # OpenMP workers that sleep instead of spinning: much faster on a shared, busy machine
        env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"the llama.cpp server exited with {code}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"the llama.cpp server was not ready in {self.startup_timeout:.0f} s:\n{self.log_tail()}")

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

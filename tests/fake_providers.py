"""Fakes of Anthropic's Messages API and Google's Gemini API on 127.0.0.1, written from their public
API references, that validate requests the way the real services do and answer in their wire format.

Each fake answers from a ``respond(request) -> Canned`` function (scripted per test), or from
``push``-ed replies first; every request (path, headers, JSON body) is kept in ``requests``.
Validation failures are the service's own error shapes (HTTP 400, 401), so a client that sends
what the real service would refuse fails here too. ``tests/test_native_providers.py`` checks
the fakes with the official SDKs (``anthropic``, ``google-genai``) as well as through rolecast.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass
class Canned:
    """One answer: text and/or tool calls ``(name, arguments)``, its usage, or an error status."""

    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    usage: tuple[int, int] = (10, 3)
    status: int = 200
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    #: a stream cut before its last event
    cut: bool = False
    #: seconds to wait before answering (a slow service)
    delay: float = 0.0


class Invalid(Exception):
    """A request the real service refuses: ``status`` and its error's ``kind`` and ``message``."""

    def __init__(self, message: str, status: int = 400, kind: str = ""):
        super().__init__(message)
        self.status, self.kind = status, kind


@dataclass
class Sent:
    """What the fake answers on the wire: a JSON body, or server-sent events."""

    status: int
    body: Any = None
    events: list[bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class FakeService:
    """The HTTP plumbing the fakes share: a threaded server on 127.0.0.1 and a random port."""

    def __init__(self, respond: Callable[[dict[str, Any]], Canned] | None = None, key: str = "test-key"):
        self.respond = respond or (lambda request: Canned(text="Hello"))
        self.key = key
        self.requests: list[dict[str, Any]] = []
        self.queue: deque[Canned] = deque()
        self._httpd: ThreadingHTTPServer | None = None

    def push(self, *replies: Canned) -> None:
        self.queue.extend(replies)

    def canned(self, request: dict[str, Any]) -> Canned:
        return self.queue.popleft() if self.queue else self.respond(request)

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def serve(self, path: str, query: dict[str, list[str]], headers: dict[str, str], body: Any) -> Sent:
        raise NotImplementedError

    def start(self) -> FakeService:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                url = urlparse(self.path)
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = None
                service.requests.append({"path": url.path, "query": url.query, "headers": headers, "body": body})
                sent = service.serve(url.path, parse_qs(url.query), headers, body)
                if sent.delay:
                    time.sleep(sent.delay)
                try:
                    self._send(sent)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send(self, sent: Sent) -> None:
                self.send_response(sent.status)
                for name, value in sent.headers.items():
                    self.send_header(name, value)
                if sent.events is not None:
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for event in sent.events:
                        self.wfile.write(event)
                        self.wfile.flush()
                    self.close_connection = True
                    return
                data = json.dumps(sent.body).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, name=type(self).__name__, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def bodies(self) -> list[Any]:
        return [r["body"] for r in self.requests]


# ------------------------------------------------------------------------------------------ Anthropic
def _need(condition: bool, message: str) -> None:
    if not condition:
        raise Invalid(message, 400, "invalid_request_error")


class FakeAnthropic(FakeService):
    """``POST /v1/messages`` (Anthropic's Messages API reference): JSON and streaming answers."""

    def serve(self, path: str, query: dict[str, list[str]], headers: dict[str, str], body: Any) -> Sent:
        try:
            if path != "/v1/messages":
                raise Invalid(f"Not found: {path}", 404, "not_found_error")
            # the key as x-api-key, or as a bearer token (what the SDK sends since its 2.x releases)
            if self.key not in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer ")):
                raise Invalid("invalid x-api-key", 401, "authentication_error")
            _need(bool(headers.get("anthropic-version")), "anthropic-version: header is required")
            self.validate(body)
            canned = self.canned(body)
        except Invalid as exc:
            return self.error(exc.status, exc.kind, str(exc))
        if canned.status != 200:
            return self.error(canned.status, canned.error or "api_error", f"canned {canned.status}", canned.headers)
        if body.get("stream"):
            return Sent(200, events=self.events(body, canned), headers=canned.headers, delay=canned.delay)
        return Sent(200, self.message(body, canned), headers=canned.headers, delay=canned.delay)

    @staticmethod
    def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Sent:
        kinds = {429: "rate_limit_error", 529: "overloaded_error", 500: "api_error"}
        error = {"type": "error", "error": {"type": kinds.get(status, kind), "message": message}}
        return Sent(status, error, headers=headers or {})

    @staticmethod
    def validate(body: Any) -> None:
        _need(isinstance(body, dict), "body: Input should be an object")
        _need(isinstance(body.get("model"), str) and bool(body["model"]), "model: Field required")
        _need(isinstance(body.get("max_tokens"), int) and body["max_tokens"] >= 1, "max_tokens: Field required")
        system = body.get("system")
        _need(system is None or isinstance(system, (str, list)), "system: Input should be a valid string")
        messages = body.get("messages")
        _need(isinstance(messages, list) and bool(messages), "messages: Field required")
        pending: set[str] = set()  # tool_use ids the next user turn must answer
        for i, message in enumerate(messages):
            role = message.get("role")
            _need(role != "system", f"messages.{i}: Unexpected role \"system\". The Messages API accepts a "
                  "top-level `system` parameter, not \"system\" as an input message role.")
            _need(role in ("user", "assistant"), f"messages.{i}.role: Input should be 'user' or 'assistant'")
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            _need(isinstance(blocks, list) and bool(blocks), f"messages.{i}: content must be non-empty")
            answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            _need(role == "assistant" or pending <= answered, f"messages.{i}: `tool_use` ids were found without "
                  f"`tool_result` blocks immediately after: {sorted(pending - answered)}")
            pending = set()
            for block in blocks:
                kind = block.get("type")
                if kind == "text":
                    _need(bool(block.get("text")), f"messages.{i}: text content blocks must be non-empty")
                elif kind == "tool_use":
                    _need(role == "assistant" and isinstance(block.get("input"), dict), f"messages.{i}: bad tool_use")
                    pending.add(block.get("id"))
                elif kind == "tool_result":
                    _need(role == "user", f"messages.{i}: tool_result blocks belong in user turns")
                else:
                    _need(False, f"messages.{i}: unknown content block type {kind!r}")
        names = set()
        for tool in body.get("tools") or []:
            schema = tool.get("input_schema")
            _need(isinstance(schema, dict) and schema.get("type") == "object",
                  "tools.input_schema: type must be 'object'")
            names.add(tool.get("name"))
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and choice.get("type") == "tool":
            _need(choice.get("name") in names, f"tool_choice: tool {choice.get('name')!r} not found in tools")

    def message(self, body: dict[str, Any], canned: Canned) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": canned.text}] if canned.text else []
        for name, arguments in canned.calls:
            content.append({"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": name,
                            "input": arguments})
        return {"id": f"msg_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
                "model": body["model"], "content": content,
                "stop_reason": "tool_use" if canned.calls else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": canned.usage[0], "output_tokens": canned.usage[1]}}

    def events(self, body: dict[str, Any], canned: Canned) -> list[bytes]:
        message = {**self.message(body, canned), "content": [], "stop_reason": None}
        message["usage"] = {"input_tokens": canned.usage[0], "output_tokens": 1}
        events = [("message_start", {"type": "message_start", "message": message}),
                  ("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}}),
                  ("ping", {"type": "ping"})]
        for piece in _pieces(canned.text):
            events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                   "delta": {"type": "text_delta", "text": piece}}))
        if canned.cut:
            return [_sse(name, data) for name, data in events]
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                                         "stop_sequence": None},
                                      "usage": {"output_tokens": canned.usage[1]}}),
                   ("message_stop", {"type": "message_stop"})]
        return [_sse(name, data) for name, data in events]


def _pieces(text: str) -> Iterator[str]:
    for start in range(0, len(text), 4):
        yield text[start:start + 4]


def _sse(name: str | None, data: Any) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


# --------------------------------------------------------------------------------------------- Gemini
def _check(condition: bool, message: str) -> None:
    if not condition:
        raise Invalid(message, 400, "INVALID_ARGUMENT")


#: the opaque thought signature the fake attaches to function calls (base64, as the API sends bytes)
SIGNATURE = "c2lnbmF0dXJlLW9mLWEtdGhvdWdodA=="

#: the data fields a Part may have (exactly one)
_PART_FIELDS = ("text", "inlineData", "functionCall", "functionResponse", "fileData", "executableCode",
                "codeExecutionResult")


class FakeGemini(FakeService):
    """``models/{model}:generateContent``, ``:streamGenerateContent?alt=sse`` and ``:batchEmbedContents``
    (the Gemini API reference): the ``v1`` and ``v1beta`` REST API with ``x-goog-api-key``."""

    dimensions = 8

    def serve(self, path: str, query: dict[str, list[str]], headers: dict[str, str], body: Any) -> Sent:
        try:
            model, _, method = path.rpartition(":")
            if not model.startswith(("/v1beta/models/", "/v1/models/")):
                raise Invalid(f"unknown path {path}", 404, "NOT_FOUND")
            if headers.get("x-goog-api-key") != self.key:
                raise Invalid("API key not valid. Please pass a valid API key.", 400, "INVALID_ARGUMENT")
            if method == "batchEmbedContents":
                return self.embed(body)
            if method not in ("generateContent", "streamGenerateContent"):
                raise Invalid(f"unknown method {method}", 404, "NOT_FOUND")
            version = model.rsplit("/", 1)[-1]
            self.validate(body, signatures_required=version.startswith("gemini-3"))
            canned = self.canned(body)
        except Invalid as exc:
            return self.error(exc.status, exc.kind, str(exc))
        if canned.status != 200:
            return self.error(canned.status, canned.error, f"canned {canned.status}", canned.headers)
        if method == "streamGenerateContent":
            _check(query.get("alt") == ["sse"], "only alt=sse streams are faked")
            return Sent(200, events=self.events(version, canned), headers=canned.headers)
        return Sent(200, self.response(version, canned, canned.text, final=True), headers=canned.headers)

    @staticmethod
    def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Sent:
        statuses = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 400: "INVALID_ARGUMENT"}
        return Sent(status, {"error": {"code": status, "message": message,
                                       "status": kind or statuses.get(status, "UNKNOWN")}}, headers=headers or {})

    @staticmethod
    def validate(body: Any, *, signatures_required: bool = False) -> None:
        """As the API checks a request; Gemini 3 models also want each functionCall's thoughtSignature back."""
        _check(isinstance(body, dict), "Invalid JSON payload")
        contents = body.get("contents")
        _check(isinstance(contents, list) and bool(contents), "* GenerateContentRequest.contents: contents is not "
               "specified")
        calls: list[str] = []
        for i, content in enumerate(contents):
            role = content.get("role")
            _check(role in ("user", "model"), f"Please use a valid role: user, model. (contents[{i}].role={role!r})")
            parts = content.get("parts")
            _check(isinstance(parts, list) and bool(parts), f"* GenerateContentRequest.contents[{i}].parts: "
                   "contents.parts must not be empty.")
            answered = []
            for part in parts:
                present = [f for f in _PART_FIELDS if f in part]
                _check(len(present) == 1, f"contents[{i}]: a part must have exactly one data field: {present}")
                if "text" in part:
                    _check(bool(part["text"]), "Unable to submit request because it has an empty text "
                           "parameter. Add a value to the parameter and try again.")
                if "functionCall" in part:
                    _check(role == "model", "functionCall parts belong to the model")
                    _check(not signatures_required or bool(part.get("thoughtSignature")),
                           "Function call is missing a thought_signature in functionCall parts.")
                    calls.append(part["functionCall"].get("name"))
                if "functionResponse" in part:
                    answered.append(part["functionResponse"].get("name"))
            if answered:
                _check(sorted(answered) == sorted(calls), "Please ensure that the number of function response "
                       "parts is equal to the number of function call parts of the function call turn.")
                calls = []
        system = body.get("systemInstruction")
        if system is not None:
            texts = [p.get("text") for p in system.get("parts") or []]
            _check(bool(texts) and all(texts), "systemInstruction: parts must not be empty")
        for tool in body.get("tools") or []:
            for declaration in tool.get("functionDeclarations") or []:
                _check(bool(declaration.get("name")), "functionDeclarations.name is required")
                _check(not ("parameters" in declaration and "parametersJsonSchema" in declaration),
                       "parameters and parametersJsonSchema are exclusive")
        config = body.get("generationConfig") or {}
        mime = config.get("responseMimeType")
        if "responseSchema" in config:
            _check(mime in ("application/json", "text/x.enum"), "responseSchema needs responseMimeType "
                   "application/json or text/x.enum")
            schema = config["responseSchema"]
            if "enum" in schema:
                _check(str(schema.get("type")).upper() == "STRING" and all(isinstance(v, str) for v in schema["enum"]),
                       "enum is only supported for STRING type")
        if "responseJsonSchema" in config:
            _check(mime == "application/json", "responseJsonSchema needs responseMimeType application/json")

    def response(self, version: str, canned: Canned, text: str, *, final: bool) -> dict[str, Any]:
        parts: list[dict[str, Any]] = [{"text": text}] if text else []
        if final:
            parts += [{"functionCall": {"name": name, "args": args}, "thoughtSignature": SIGNATURE}
                      for name, args in canned.calls]
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        answer: dict[str, Any] = {"candidates": [candidate], "modelVersion": version,
                                  "responseId": uuid.uuid4().hex[:16]}
        if final:
            candidate["finishReason"] = "STOP"
            p, c = canned.usage
            answer["usageMetadata"] = {"promptTokenCount": p, "candidatesTokenCount": c, "totalTokenCount": p + c}
        return answer

    def events(self, version: str, canned: Canned) -> list[bytes]:
        pieces = list(_pieces(canned.text)) or [""]
        events = [_sse(None, self.response(version, canned, piece, final=False)) for piece in pieces[:-1]]
        if not canned.cut:
            events.append(_sse(None, self.response(version, canned, pieces[-1], final=True)))
        return events

    def embed(self, body: Any) -> Sent:
        requests = body.get("requests") if isinstance(body, dict) else None
        _check(isinstance(requests, list) and bool(requests), "requests must not be empty")
        vectors = []
        for request in requests:
            text = "".join(p.get("text", "") for p in (request.get("content") or {}).get("parts") or [])
            _check(bool(text), "Unable to submit request because it has an empty text parameter.")
            repeated = (text * self.dimensions)[: self.dimensions]  # a vector that depends on the text
            vectors.append({"values": [float((ord(ch) + i) % 7 + 1) for i, ch in enumerate(repeated)]})
        return Sent(200, {"embeddings": vectors})

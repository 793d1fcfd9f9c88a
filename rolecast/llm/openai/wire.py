"""The OpenAI wire format, read strictly: chat completions, server-sent events, ``Retry-After``.

Whatever a server sends that is not a usable chat completion becomes a typed error
here (:class:`~rolecast.errors.LLMResponseError` and its kinds), never an
``AttributeError`` or a silently short answer.

Every JSON body a server sends — a completion, embeddings, each event of a stream — is
decoded here by :func:`load_body`, bounded: at most :data:`MAX_BODY_BYTES`, nested at
most :data:`MAX_BODY_DEPTH` deep. A hostile or broken server (200 kB of ``[[[…]]]``)
gets an ``LLMResponseError``, never a ``RecursionError`` from the JSON decoder or from
the SDK's recursive model building afterwards.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

from ...errors import LLMAPIError, LLMEmptyAnswerError, LLMResponseError
from ..base import Usage

__all__ = [
    "MAX_BODY_BYTES", "MAX_BODY_DEPTH", "StreamState", "check_response", "load_body", "read_model", "retry_after",
]

#: the largest body decoded (embeddings of a large batch fit; a completion is a few kB)
MAX_BODY_BYTES = 64 * 1024 * 1024
#: the deepest nesting of a server's JSON accepted (a chat completion with logprobs nests 6 deep)
MAX_BODY_DEPTH = 32


def load_body(data: bytes | str, what: str = "answer") -> Any:
    """Decode one JSON body of a server, bounded in size and depth; :class:`LLMResponseError` otherwise.

    Nesting deeper than :data:`MAX_BODY_DEPTH` is found by one linear scan before anything
    recursive — the standard library's decoder, the SDK's model building, ``repr``, the run
    log's encoder — sees the body.
    """
    if len(data) > MAX_BODY_BYTES:
        raise LLMResponseError(
            f"the model server's {what} is {len(data):,} bytes, more than the {MAX_BODY_BYTES:,} accepted",
            body=data[:200],
        )
    if _nests_deeper(data, MAX_BODY_DEPTH):
        raise LLMResponseError(
            f"the model server's {what} is JSON nested deeper than {MAX_BODY_DEPTH} levels", body=data[:200]
        )
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # (RecursionError: not after the check above; kept typed anyway)
        raise LLMResponseError(
            f"the model server's {what} is not JSON ({exc}): {data[:200]!r}", body=data[:2000]
        ) from exc


# a whole JSON string (skipped: brackets in it do not nest), or one bracket; linear, no backtracking
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_STRUCTURE_BYTES = re.compile(_STRUCTURE.pattern.encode())


def _nests_deeper(data: bytes | str, limit: int) -> bool:
    """Whether the JSON text ``data`` opens more than ``limit`` arrays/objects inside each other.

    One pass of a regular expression over the text: strings are skipped whole in C, so only the
    brackets cost Python work (an embeddings body of 100 × 1,536 numbers has about 200)."""
    depth = 0
    pattern = _STRUCTURE_BYTES if isinstance(data, bytes) else _STRUCTURE
    opening = (b"[", b"{") if isinstance(data, bytes) else ("[", "{")
    closing = (b"]", b"}") if isinstance(data, bytes) else ("]", "}")
    for match in pattern.finditer(data):  # type: ignore[arg-type]
        token = match.group()
        if token in opening:
            depth += 1
            if depth > limit:
                return True
        elif token in closing:
            depth -= 1
    return False


def read_model(http_response: Any, model: Any, what: str = "answer") -> Any:
    """The SDK's ``model`` type (``ChatCompletion``, ``CreateEmbeddingResponse``) built from a read
    HTTP response after :func:`load_body` bounded it; a body that is not an object is refused."""
    data = load_body(http_response.content, what)
    if not isinstance(data, dict):
        raise LLMResponseError(
            f"the model server's {what} is not a JSON object: {http_response.content[:200]!r}", body=data
        )
    return model.construct(**data)


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds a server asked to wait (``retry-after-ms`` or ``Retry-After``: seconds or an HTTP date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        if value.strip().replace(".", "", 1).isdigit():
            return max(0.0, float(value))
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(timezone.utc)).total_seconds())
    except (TypeError, ValueError, OverflowError):
        return None


def check_response(response: Any) -> Any:
    """The response if it is a chat completion with at least one choice, else :class:`LLMResponseError`."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list):
        body = response if isinstance(response, (str, bytes)) else repr(response)
        raise LLMResponseError(f"the model server's answer is not a chat completion: {str(body)[:200]!r}", body=body)
    if not choices or getattr(choices[0], "message", None) is None:
        raise LLMResponseError("the model server returned no choices", body=repr(response)[:2000])
    message = choices[0].message
    if not getattr(message, "content", None) and not getattr(message, "tool_calls", None):
        raise LLMEmptyAnswerError(
            f"the model answered with no text and no tool call (finish_reason={choices[0].finish_reason!r})"
        )
    return response


class StreamState:
    """Server-sent events of a chat-completions stream, parsed strictly, one line at a time."""

    def __init__(self) -> None:
        self.data: list[str] = []
        self.parts: list[str] = []
        self.usage: Usage | None = None
        self.done = False  # [DONE] seen
        self.finished = False  # a finish_reason seen

    def feed(self, line: str | None) -> list[str]:
        """Take one line (``None`` at the end of the body); returns the text pieces it completed."""
        if line is None or line == "":
            try:
                return self._dispatch()
            except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong type
                raise LLMResponseError(f"the stream sent a malformed event: {exc}") from exc
        if line.startswith(":"):
            return []  # a comment (keep-alive)
        name, _, value = line.partition(":")
        if name == "data":
            self.data.append(value[1:] if value.startswith(" ") else value)
        elif name not in ("event", "id", "retry"):
            raise LLMResponseError(f"the stream sent a line that is not a server-sent event: {line[:200]!r}")
        return []

    def _dispatch(self) -> list[str]:
        if not self.data:
            return []
        data, self.data = "\n".join(self.data), []
        if data.strip() == "[DONE]":
            self.done = True
            return []
        event = load_body(data, "stream event")
        if not isinstance(event, dict):
            raise LLMResponseError(f"the stream sent an event that is not an object: {data[:200]!r}")
        if event.get("error"):
            raise LLMAPIError(f"the model server reported an error mid-stream: {event['error']}", body=event)
        if isinstance(event.get("usage"), dict):
            raw = event["usage"]
            self.usage = Usage(int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0))
        choices = event.get("choices") or []
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            raise LLMResponseError(f"the stream sent malformed choices: {data[:200]!r}")
        pieces = []
        for choice in choices:
            if choice.get("index", 0) != 0:
                continue
            self.finished = self.finished or choice.get("finish_reason") is not None
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str) and content:
                self.parts.append(content)
                pieces.append(content)
        return pieces



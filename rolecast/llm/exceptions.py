"""The one place where provider libraries' exceptions become rolecast's.

In the style of httpx's ``map_exceptions``: a mapping from foreign exception types to
functions making the rolecast error, applied around a block with one ``with``. The
most specific mapped type wins (the first of the exception's MRO found in the
mapping), the new error always chains the original as ``__cause__``, and exceptions
not in the mapping pass through untouched::

    with openai_errors(attempts=lambda: attempts):
        response = await client.chat.completions.create(...)

The SDKs are imported only when their mapping is first used.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from pydantic import ValidationError

from ..core.jsonutil import check_depth
from ..errors import (
    ConfigError,
    ContextOverflow,
    LLMAPIError,
    LLMConnectionError,
    LLMRateLimitError,
    LLMResponseError,
    LLMTimeoutError,
    RolecastError,
    UsageError,
)
from .errortext import bounded_body, error_text
from .openai.wire import MAX_BODY_DEPTH

__all__ = [
    "ExceptionMapping",
    "anthropic_mapping",
    "gemini_mapping",
    "llama_error",
    "llama_load_errors",
    "map_exceptions",
    "openai_errors",
    "openai_mapping",
]

ExceptionMapping = Mapping[type[BaseException], Callable[[Any], RolecastError]]


@contextmanager
def map_exceptions(mapping: ExceptionMapping) -> Iterator[None]:
    """Raise ``mapping[type](exc) from exc`` for an exception of a mapped type leaving the block."""
    try:
        yield
    except Exception as exc:
        make = next((mapping[cls] for cls in type(exc).__mro__ if cls in mapping), None)
        if make is None:
            raise
        ours = _raised_by_rolecast(exc)
        if ours is not None:  # rolecast's own check inside the SDK's HTTP client (a bounded body): as it was
            raise ours from None
        raise _safe(make(exc)) from exc


def _raised_by_rolecast(exc: BaseException) -> RolecastError | None:
    """The rolecast error an SDK wrapped (``APIConnectionError`` from one raised while reading), if any."""
    cause = exc.__cause__ or exc.__context__
    for _ in range(8):
        if cause is None or isinstance(cause, RolecastError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def _safe(error: RolecastError) -> RolecastError:
    """``error`` with its text and body as the console, logs and stores may hold them (see errortext)."""
    if error.args and isinstance(error.args[0], str):
        error.args = (error_text(error.args[0]), *error.args[1:])
    if getattr(error, "body", None) is not None:
        error.body = bounded_body(error.body)  # type: ignore[attr-defined]
    return error


def _attempts_text(n: int) -> str:
    return f" after {n} attempt{'s' if n != 1 else ''}"


def openai_mapping(attempts: Callable[[], int] = lambda: 1, url: str = "") -> ExceptionMapping:
    """OpenAI SDK exceptions → rolecast errors; ``attempts()`` is read when one is raised.

    ``url`` (the server's address) is named by connection and timeout errors.
    """
    import openai

    where = f" {url}" if url else ""

    def status_error(exc: Any) -> RolecastError:
        if exc.status_code in (400, 413) and _context_exceeded(getattr(exc, "code", None), exc.message):
            return ContextOverflow(detail=f"the model server answered HTTP {exc.status_code}: {exc.message}",
                                   status_code=exc.status_code, body=_bounded_body(exc))
        if exc.status_code == 429:
            return LLMRateLimitError(f"rate limited (HTTP 429){_attempts_text(attempts())}: {exc.message}")
        return LLMAPIError(
            f"the model server answered HTTP {exc.status_code}: {exc.message}",
            status_code=exc.status_code,
            body=_bounded_body(exc),
        )

    def too_slow(exc: Any) -> RolecastError:
        return LLMTimeoutError(f"the model server{where} did not answer in time{_attempts_text(attempts())}")

    return {
        openai.APITimeoutError: too_slow,
        asyncio.TimeoutError: too_slow,  # an attempt past its whole-call timeout (not a single slow read)
        TimeoutError: too_slow,
        json.JSONDecodeError: lambda exc: LLMResponseError(
            f"the model server's answer is not valid JSON{_attempts_text(attempts())}: {exc}"
        ),
        openai.APIConnectionError: lambda exc: LLMConnectionError(
            f"could not reach the model server{where}{_attempts_text(attempts())}: {exc}"
        ),
        openai.APIStatusError: status_error,
        # anything else the SDK raises: an answer that could not be used
        openai.OpenAIError: lambda exc: LLMAPIError(
            f"the model server's answer could not be used: {exc}", status_code=getattr(exc, "status_code", None)
        ),
    }


def _bounded_body(exc: Any) -> Any:
    """An error status's body as the SDK decoded it, or its first 2,000 characters when it nests too
    deep for the run log's encoder and ``repr`` (a hostile server's ``[[[…]]]``)."""
    try:
        check_depth(exc.body, MAX_BODY_DEPTH)
    except RolecastError:
        return str(getattr(getattr(exc, "response", None), "text", ""))[:2000]
    return exc.body


def openai_errors(attempts: Callable[[], int] = lambda: 1, url: str = "") -> AbstractContextManager[None]:
    """``with openai_errors(...):`` maps the OpenAI SDK's exceptions (see :func:`openai_mapping`)."""
    return map_exceptions(openai_mapping(attempts, url))


def llama_error(error: Mapping[str, Any]) -> RolecastError:
    """The error the embedded engine (llama.cpp's server) answered a request with, as rolecast's.

    Its body is OpenAI's error object: ``{"code": 400, "message": ..., "type": ...}``. A
    grammar llama.cpp cannot parse is the caller's mistake (:class:`UsageError`); anything
    else, such as "request (9031 tokens) exceeds the available context size", is a refusal.
    """
    message = str(error.get("message") or dict(error))
    if _context_exceeded(error.get("type"), message):
        prompt, window = error.get("n_prompt_tokens"), error.get("n_ctx")
        code = error.get("code")
        return ContextOverflow(prompt_tokens=prompt if isinstance(prompt, int) else None,
                               window=window if isinstance(window, int) else None,
                               detail=f"the local model rejected the request: {message}",
                               status_code=code if isinstance(code, int) else None, body=dict(error))
    if "grammar" in message.lower():
        return UsageError(f"llama.cpp cannot parse the grammar: {message}")
    code = error.get("code")
    return LLMAPIError(f"the local model rejected the request: {message}",
                       status_code=code if isinstance(code, int) else None, body=dict(error))


#: how servers say a request does not fit: OpenAI's code, llama.cpp's error type and messages, vLLM's
_CONTEXT_CODES = ("context_length_exceeded", "exceed_context_size_error")
_CONTEXT_WORDS = ("context size has been exceeded", "exceeds the available context size",
                  "maximum context length", "context length exceeded", "context_length_exceeded")


def _context_exceeded(code: Any, message: Any) -> bool:
    """Whether an error answer says the request does not fit the model's context window."""
    if isinstance(code, str) and code in _CONTEXT_CODES:
        return True
    text = str(message or "").lower()
    return any(words in text for words in _CONTEXT_WORDS)


def llama_load_errors(path: str) -> AbstractContextManager[None]:
    """``with llama_load_errors(path):`` maps a GGUF file llama.cpp cannot load to a ConfigError.

    The engine says only "Failed to init server": the message says what to check.
    """

    def cannot_load(exc: Any) -> RolecastError:
        return ConfigError(f"could not load the GGUF model {path}: {exc} "
                           "(is it a GGUF file llama.cpp supports, and does n_ctx fit in memory?)")

    return map_exceptions({ValueError: cannot_load, RuntimeError: cannot_load, OSError: cannot_load})


def _status_mapping(
    status_error: type[BaseException], connection_error: type[BaseException], root: type[BaseException],
    code_of: Callable[[Any], int], message_of: Callable[[Any], str], body_of: Callable[[Any], Any],
    attempts: Callable[[], int], where: str,
) -> ExceptionMapping:
    """The mapping every hosted SDK shares: 429 (and Anthropic's 529) a rate limit, other statuses
    an :class:`LLMAPIError` with the server's body, connection errors and timeouts their kinds."""

    def status(exc: Any) -> RolecastError:
        code = code_of(exc)
        if code in (429, 529):
            what = "overloaded (HTTP 529)" if code == 529 else "rate limited (HTTP 429)"
            return LLMRateLimitError(f"{where}: {what}{_attempts_text(attempts())}: {message_of(exc)}")
        return LLMAPIError(f"{where} answered HTTP {code}: {message_of(exc)}", status_code=code, body=body_of(exc))

    def too_slow(exc: Any) -> RolecastError:
        return LLMTimeoutError(f"{where} did not answer in time{_attempts_text(attempts())}")

    mapping: dict[type[BaseException], Callable[[Any], RolecastError]] = {
        asyncio.TimeoutError: too_slow,
        TimeoutError: too_slow,
        connection_error: lambda exc: LLMConnectionError(f"could not reach {where}{_attempts_text(attempts())}: {exc}"),
        status_error: status,
    }
    # anything else the SDK raises: an answer that could not be used
    mapping.setdefault(root, lambda exc: LLMAPIError(f"{where}'s answer could not be used: {exc}"))
    return mapping


def anthropic_mapping(attempts: Callable[[], int] = lambda: 1, url: str = "") -> ExceptionMapping:
    """Anthropic SDK exceptions → rolecast errors (529 overloaded and 429 are rate limits)."""
    import anthropic

    def message(exc: Any) -> str:
        body: dict[str, Any] = exc.body if isinstance(getattr(exc, "body", None), dict) else {}
        error: dict[str, Any] = body["error"] if isinstance(body.get("error"), dict) else {}
        return str(error.get("message") or exc.message)

    mapping = dict(_status_mapping(
        anthropic.APIStatusError, anthropic.APIConnectionError, anthropic.AnthropicError,
        lambda exc: int(exc.status_code), message, _bounded_body, attempts, f"the Anthropic API {url}".rstrip(),
    ))
    mapping[anthropic.APITimeoutError] = mapping[TimeoutError]
    return mapping


def gemini_mapping(attempts: Callable[[], int] = lambda: 1, url: str = "") -> ExceptionMapping:
    """google-genai exceptions → rolecast errors (429 RESOURCE_EXHAUSTED is a rate limit)."""
    from google.genai import errors

    def body(exc: Any) -> Any:
        try:
            check_depth(exc.details, MAX_BODY_DEPTH)
        except RolecastError:
            return str(exc.details)[:2000]
        return exc.details

    mapping = dict(_status_mapping(
        errors.APIError, ConnectionError, errors.APIError, lambda exc: int(exc.code or 0),
        lambda exc: str(exc.message or exc.status or ""), body, attempts, f"the Gemini API {url}".rstrip(),
    ))
    # the SDK validates the request's config itself: a field it does not know (from settings.extra)
    mapping[ValidationError] = lambda exc: UsageError(f"google-genai refused the request's config: {exc}")
    # google-genai sends through httpx or its fork httpx2 (whichever is installed): each one's errors
    for name in ("httpx", "httpx2"):
        try:
            library = importlib.import_module(name)
        except ImportError:
            continue
        mapping[library.TimeoutException] = mapping[TimeoutError]
        mapping[library.TransportError] = mapping[ConnectionError]
    return mapping

"""What the native hosted providers (Anthropic, Gemini) share: attempts, retries, deadlines.

Each call's attempts are retried here with tenacity — exponential backoff with jitter, or
the server's ``Retry-After`` (capped at ``retry_after_max``) — on transient failures only
(the provider's :meth:`HostedLLM._is_transient`: connection errors, timeouts, 429, 529,
5xx); each attempt must finish within ``timeout`` as a whole, and all of them, with the
waits between, within ``deadline``. A failed attempt is metered. The SDK's exceptions
become rolecast's through the provider's mapping (:mod:`rolecast.llm.exceptions`), chained.
SDK retries are off: they would hide attempts from the budget and the run log. A stream is held to
the same deadline as a whole (:meth:`HostedLLM._events`): a server that keeps it open is cut off.

The SDK sends through an HTTP client made here (:func:`bounded_http_client`) of the HTTP library the
SDK takes (httpx or its fork httpx2), through the configured ``proxy`` or the environment's: every
answer is bounded as the OpenAI provider's is (at most ``MAX_BODY_BYTES``, JSON nested at most
``MAX_BODY_DEPTH`` deep, per event for a stream), an ``LLMResponseError`` otherwise.
"""

from __future__ import annotations

import asyncio
import importlib
import random
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from loguru import logger

from ..core.providers import require_sdk
from ..errors import ConfigError, LLMError, LLMResponseError, LLMTimeoutError
from .base import BaseLLM, LLMSettings
from .errortext import error_text
from .exceptions import ExceptionMapping, map_exceptions
from .openai.wire import MAX_BODY_BYTES, MAX_BODY_DEPTH, _nests_deeper, retry_after

T = TypeVar("T")

__all__ = ["HostedLLM", "bounded_http_client", "proxied_http_client"]


def proxied_http_client(proxy: str, timeout: float) -> Any:
    """An async HTTP client sending through ``proxy`` (MetaGPT's ``proxy``), of the HTTP library the
    OpenAI SDK takes (``httpx``, or its fork ``httpx2`` in recent SDKs)."""
    import openai

    return openai.DefaultAsyncHttpxClient(proxy=proxy, timeout=timeout)


def bounded_http_client(default_client: type, proxy: str | None, timeout: float, url: str) -> Any:
    """An SDK's async HTTP client (``default_client``: its ``DefaultAsyncHttpxClient`` or the library's
    ``AsyncClient``) whose answers are bounded (:class:`_BoundedStream`), sending through ``proxy``,
    else through the environment's proxy for ``url`` (``HTTPS_PROXY``, ``NO_PROXY``) as the SDK would."""
    lib = importlib.import_module(next(c for c in default_client.__mro__ if c.__name__ == "AsyncClient").__module__
                                  .partition(".")[0])
    if proxy is None and url:
        host = urlsplit(url).hostname or ""
        proxies = urllib.request.getproxies()
        if not urllib.request.proxy_bypass(host):
            proxy = proxies.get(urlsplit(url).scheme or "https") or proxies.get("all")
    transport = _bounded_transport(lib, lib.AsyncHTTPTransport(proxy=proxy))
    return default_client(transport=transport, timeout=timeout)


def _bounded_transport(lib: Any, inner: Any) -> Any:
    """``inner`` (an ``AsyncHTTPTransport`` of ``lib``, httpx or httpx2) with every answer's body bounded."""

    class BoundedStream(lib.AsyncByteStream):  # type: ignore[misc, name-defined]
        """A JSON body read whole, at most MAX_BODY_BYTES and nested at most MAX_BODY_DEPTH deep (then
        decoded by the SDK); a stream of server-sent events passed on as it comes, each line bounded so."""

        def __init__(self, stream: Any, events: bool):
            self.stream, self.events = stream, events

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if not self.events:
                chunks, size = [], 0
                async for chunk in self.stream:
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise LLMResponseError(f"the model server's answer is more than the "
                                               f"{MAX_BODY_BYTES:,} bytes accepted")
                    chunks.append(chunk)
                body = b"".join(chunks)
                if _nests_deeper(body, MAX_BODY_DEPTH):
                    raise LLMResponseError(f"the model server's answer is JSON nested deeper than "
                                           f"{MAX_BODY_DEPTH} levels", body=body[:200])
                yield body
                return
            line: list[bytes] = []  # the pieces of the line not yet ended
            size = 0
            async for chunk in self.stream:
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    line.append(chunk[start:end])
                    _check_event_line(b"".join(line))
                    line, size, start = [], 0, end + 1
                if start < len(chunk):
                    line.append(chunk[start:])
                    size += len(chunk) - start
                    if size > MAX_BODY_BYTES:
                        raise LLMResponseError(f"an event of the model server's stream is more than the "
                                               f"{MAX_BODY_BYTES:,} bytes accepted")
                yield chunk
            if line:
                _check_event_line(b"".join(line))

        async def aclose(self) -> None:
            await self.stream.aclose()

    class BoundedTransport(lib.AsyncBaseTransport):  # type: ignore[misc, name-defined]
        async def handle_async_request(self, request: Any) -> Any:
            response = await inner.handle_async_request(request)
            events = "text/event-stream" in response.headers.get("content-type", "")
            response.stream = BoundedStream(response.stream, events)
            return response

        async def aclose(self) -> None:
            await inner.aclose()

    return BoundedTransport()


def _check_event_line(line: bytes) -> None:
    if _nests_deeper(line, MAX_BODY_DEPTH):
        raise LLMResponseError(f"an event of the model server's stream is JSON nested deeper than "
                               f"{MAX_BODY_DEPTH} levels", body=line[:200])


class HostedLLM(BaseLLM):
    """A model behind a hosted API reached through its official SDK (see the module)."""

    #: the provider's name in OpenTelemetry's ``gen_ai.system``
    gen_ai_system = ""
    #: the provider's name in rolecast (``api_type``): which SDK and extra it needs
    provider_name = ""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        deadline: float | None = None,
        settings: LLMSettings | None = None,
        retry_initial: float = 0.5,
        retry_max: float = 8.0,
        retry_jitter: float = 0.5,
        retry_after_max: float = 30.0,
        http_client: Any = None,
        proxy: str | None = None,
    ):
        super().__init__(model, settings)
        require_sdk(self.provider_name)  # the extra to install, said before any call
        if deadline is not None and not deadline > 0:
            raise ConfigError(f"{type(self).__name__}(deadline=...) must be a positive number of seconds")
        self.api_key = api_key
        self.base_url = base_url
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.deadline = deadline
        self.retry_initial, self.retry_max, self.retry_jitter = retry_initial, retry_max, retry_jitter
        self.retry_after_max = retry_after_max
        self.proxy = proxy
        self._http_client = http_client  # the caller's: never closed here
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(model={self.model!r})"

    # -------------------------------------------------------------- provider hooks
    def _new_client(self) -> Any:
        """The SDK's async client (imported here, on first use)."""
        raise NotImplementedError

    def _is_transient(self, exc: BaseException) -> bool:
        """Whether another attempt could succeed (connection, timeout, 429, 529, 5xx)."""
        raise NotImplementedError

    def _mapping(self, attempts: Callable[[], int]) -> ExceptionMapping:
        """The SDK's exceptions -> rolecast's (``attempts()``: how many were made)."""
        raise NotImplementedError

    # -------------------------------------------------------------------- plumbing
    def _get_client(self) -> Any:
        """One SDK client per running event loop (a pooled connection must not cross loops)."""
        loop = None if self._http_client is not None else asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = self._new_client()
            self._client_loop = loop
        return self._client

    def _http(self, default_client: type, default_url: str) -> Any:
        """The caller's ``http_client``, else a new one of the SDK's HTTP library (``default_client``) with
        its answers bounded, through ``proxy`` when one is configured (see :func:`bounded_http_client`)."""
        if self._http_client is not None:
            return self._http_client
        return bounded_http_client(default_client, self.proxy, self.timeout, self.base_url or default_url)

    def _limit(self, settings: LLMSettings | None) -> float:
        return float((settings.timeout if settings is not None else None) or self.timeout)

    def _ends(self, settings: LLMSettings | None) -> float:
        """When a call must be over, on the running loop's clock (the SDK's client made first: importing
        it on first use is not the call's time)."""
        self._get_client()
        limit = self._limit(settings)
        total = self.deadline if self.deadline is not None else limit * (self.max_retries + 1)
        return asyncio.get_running_loop().time() + total

    async def _attempts(self, make: Callable[[Any], Awaitable[T]], settings: LLMSettings | None,
                        ends: float | None = None) -> T:
        """``await make(client)`` until it succeeds, a failure is not transient, or retries or time run out
        (``ends``: when the call must be over, on the loop's clock; by default :meth:`_ends`)."""
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, stop_any

        client = self._get_client()
        loop = asyncio.get_running_loop()
        ends = self._ends(settings) if ends is None else ends
        limit = self._limit(settings)
        attempts = 0
        cut_short = ""

        def out_of_time(state: Any) -> bool:
            nonlocal cut_short
            left = ends - loop.time()
            if float(state.upcoming_sleep or 0.0) < left:
                return False
            cut_short = f"not retried: the next wait would end past the call's deadline ({max(0.0, left):.2g} s left)"
            return True

        retrying = AsyncRetrying(
            retry=retry_if_exception(self._is_transient),
            stop=stop_any(stop_after_attempt(self.max_retries + 1), cast(Any, out_of_time)),
            wait=self._wait, before_sleep=self._before_sleep, reraise=True,
        )
        try:
            with map_exceptions(self._mapping(lambda: attempts)):
                async for attempt in retrying:
                    with attempt:
                        attempts += 1
                        return await asyncio.wait_for(make(client), min(limit, max(0.0, ends - loop.time())))
        except LLMError as exc:
            if cut_short and exc.args:
                exc.args = (f"{exc.args[0]}; {cut_short}", *exc.args[1:])
            raise
        raise AssertionError("unreachable: tenacity either returns or re-raises")  # pragma: no cover

    async def _events(self, stream: Any, ends: float, settings: LLMSettings | None) -> AsyncIterator[Any]:
        """The events of an opened stream, each awaited within what is left of the call's deadline: a
        server that keeps the stream open (or drips it) stops at the deadline, as an opening does."""
        loop = asyncio.get_running_loop()
        events = stream.__aiter__()
        while True:
            try:
                event = await asyncio.wait_for(events.__anext__(), max(0.0, ends - loop.time()))
            except StopAsyncIteration:
                return
            except (asyncio.TimeoutError, TimeoutError) as exc:
                total = self.deadline if self.deadline is not None else self._limit(settings) * (self.max_retries + 1)
                raise LLMTimeoutError(f"the streamed answer did not finish within the call's deadline "
                                      f"({total:g} s)") from exc
            yield event

    def _wait(self, state: Any) -> float:
        asked = retry_after(state.outcome.exception() if state.outcome else None)
        if asked is not None:
            return min(asked, self.retry_after_max)
        backoff = min(self.retry_max, self.retry_initial * 2.0 ** (int(state.attempt_number) - 1))
        return float(backoff + random.uniform(0, self.retry_jitter))

    def _before_sleep(self, state: Any) -> None:
        exc = state.outcome.exception() if state.outcome else None
        logger.debug("{}: attempt {} failed ({}); retrying", self, state.attempt_number, error_text(exc))
        if exc is not None:
            self._attempt_failed(exc)  # the seam meters the last attempt; the retried ones are metered here

    async def aclose(self) -> None:
        """Close the connections this instance opened (a caller's ``http_client`` stays open)."""
        client, self._client, self._client_loop = self._client, None, None
        if client is None:
            return
        # google-genai's async half closes with aio.aclose(); anthropic's client with close()
        close = getattr(getattr(client, "aio", None), "aclose", None) or getattr(client, "close", None)
        if close is not None:
            result = close()
            if asyncio.iscoroutine(result):
                await result

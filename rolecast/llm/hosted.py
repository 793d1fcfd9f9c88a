"""What the native hosted providers (Anthropic, Gemini) share: attempts, retries, deadlines.

Each call's attempts are retried here with tenacity — exponential backoff with jitter, or
the server's ``Retry-After`` (capped at ``retry_after_max``) — on transient failures only
(the provider's :meth:`HostedLLM._is_transient`: connection errors, timeouts, 429, 529,
5xx); each attempt must finish within ``timeout`` as a whole, and all of them, with the
waits between, within ``deadline``. A failed attempt is metered. The SDK's exceptions
become rolecast's through the provider's mapping (:mod:`rolecast.llm.exceptions`), chained.
SDK retries are off: they would hide attempts from the budget and the run log.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from loguru import logger

from ..errors import ConfigError, LLMError
from .base import BaseLLM, LLMSettings
from .exceptions import ExceptionMapping, map_exceptions
from .openai.wire import retry_after

T = TypeVar("T")

__all__ = ["HostedLLM", "proxied_http_client"]


def proxied_http_client(proxy: str, timeout: float) -> Any:
    """An ``httpx.AsyncClient`` sending through ``proxy`` (MetaGPT's ``proxy``; the SDKs' HTTP library)."""
    import httpx

    return httpx.AsyncClient(proxy=proxy, timeout=timeout)


class HostedLLM(BaseLLM):
    """A model behind a hosted API reached through its official SDK (see the module)."""

    #: the provider's name in OpenTelemetry's ``gen_ai.system``
    gen_ai_system = ""

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

    def _proxied_client(self) -> Any:
        """The caller's ``http_client``, else one through ``proxy`` when one is configured, else None."""
        if self._http_client is None and self.proxy:
            self._http_client = proxied_http_client(self.proxy, self.timeout)
        return self._http_client

    def _limit(self, settings: LLMSettings | None) -> float:
        return float((settings.timeout if settings is not None else None) or self.timeout)

    def _ends(self, settings: LLMSettings | None) -> float:
        """When a call must be over, on the running loop's clock."""
        limit = self._limit(settings)
        total = self.deadline if self.deadline is not None else limit * (self.max_retries + 1)
        return asyncio.get_running_loop().time() + total

    async def _attempts(self, make: Callable[[Any], Awaitable[T]], settings: LLMSettings | None) -> T:
        """``await make(client)`` until it succeeds, a failure is not transient, or retries or time run out."""
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, stop_any

        client = self._get_client()
        loop = asyncio.get_running_loop()
        ends = self._ends(settings)
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

    def _wait(self, state: Any) -> float:
        asked = retry_after(state.outcome.exception() if state.outcome else None)
        if asked is not None:
            return min(asked, self.retry_after_max)
        backoff = min(self.retry_max, self.retry_initial * 2.0 ** (int(state.attempt_number) - 1))
        return float(backoff + random.uniform(0, self.retry_jitter))

    def _before_sleep(self, state: Any) -> None:
        exc = state.outcome.exception() if state.outcome else None
        logger.debug("{}: attempt {} failed ({}); retrying", self, state.attempt_number, exc)
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

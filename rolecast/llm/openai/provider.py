"""The OpenAI-compatible provider: OpenAI, Azure, vLLM, Ollama, a llama.cpp server, DeepSeek …

``openai`` is imported on first use, never when rolecast is imported (it costs ~0.45 s).
The SDK's own retries are off; transient failures (connection errors, timeouts, HTTP
429 and 5xx) are retried here with tenacity — exponential backoff with jitter — and
then mapped to the rolecast error tree (:class:`~rolecast.errors.LLMConnectionError`,
:class:`~rolecast.errors.LLMTimeoutError`, :class:`~rolecast.errors.LLMRateLimitError`,
:class:`~rolecast.errors.LLMAPIError`) by :func:`rolecast.llm.exceptions.openai_errors`,
always chaining the SDK's exception.

An ``http_client`` (an ``httpx.AsyncClient`` of the HTTP library the SDK uses) may be
given: the SDK then sends through it (proxies, custom transports, a mock transport in
tests) and :meth:`OpenAILLM.aclose` leaves it open — it belongs to the caller.

Servers differ in what they accept. Three optional request fields are learned per
instance: ``response_format`` with a JSON schema (see ``OpenAIConfig.structured_outputs``;
OpenAI's ``json_schema`` dialect first, then llama-cpp-python's ``json_object`` +
``schema``), ``stream_options`` (usage in the last stream chunk) and a GBNF grammar
(``grammar=`` on ``complete``/``ask``: sent as llama.cpp's ``grammar`` and vLLM's
``guided_grammar`` together — each server reads its own and ignores the other's). When a
server rejects one of them (HTTP 400/422, or an error naming the field), the request is
sent again without it and, if that works, the field is not sent again by this instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator
from typing import Any, cast

from loguru import logger

from ...core.config import OpenAIConfig
from ...errors import (
    ConfigError,
    LLMAPIError,
    LLMEmptyAnswerError,
    LLMError,
    LLMIncompleteError,
    LLMResponseError,
    LLMTimeoutError,
)
from ..base import (
    BaseLLM,
    Completion,
    Embeddings,
    EmbedPurpose,
    LLMSettings,
    Messages,
    StructuredRequest,
    ToolCall,
    Usage,
    choice_schema,
    pooled_vector,
    truncate_at_stop,
)
from ..errortext import error_text
from ..exceptions import openai_errors
from ..hosted import proxied_http_client
from .wire import StreamState, check_response, read_model, retry_after

DEFAULT_MODEL = "gpt-4o-mini"
# Local OpenAI-compatible servers (llama.cpp, vLLM, Ollama) ignore the key, but the SDK wants one.
PLACEHOLDER_API_KEY = "sk-no-key-required"
# Status codes with which a server says "I do not understand this request field".
_REJECTS_FIELD = (400, 422)
# response_format dialects, best first: OpenAI's (also vLLM, Ollama, llama.cpp's llama-server),
# then llama-cpp-python's server, which takes {"type": "json_object", "schema": ...} only.
_FORMAT_KINDS = ("json_schema", "json_object")
# where servers take a GBNF grammar: llama.cpp's server (C++ and llama-cpp-python), vLLM
_GRAMMAR_FIELDS = ("grammar", "guided_grammar")


def _is_transient(exc: BaseException) -> bool:
    """Connection errors, timeouts, 429, 5xx and unusable answers are worth another try; nothing else is."""
    import openai

    if isinstance(exc, (openai.APIConnectionError, asyncio.TimeoutError, TimeoutError, json.JSONDecodeError)):
        return True  # APIConnectionError includes the SDK's per-read APITimeoutError
    if isinstance(exc, LLMResponseError):  # malformed, empty or not JSON at all: a proxy's error page, a glitch
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def _rejects_field(exc: LLMAPIError, field: str) -> bool:
    """Whether an error status reads as "this server does not take ``field``"."""
    if exc.status_code in _REJECTS_FIELD:
        return True
    # llama-cpp-python's server answers a request-validation error with HTTP 500
    return exc.status_code is not None and field in str(exc)


def _response_format(kind: str, request: StructuredRequest) -> dict[str, Any]:
    if kind == "json_object":
        return {"type": "json_object", "schema": request.schema}
    return {
        "type": "json_schema",
        "json_schema": {"name": _schema_name(request.name), "schema": request.schema, "strict": False},
    }


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    return Usage(int(raw.prompt_tokens or 0), int(raw.completion_tokens or 0))


class OpenAILLM(BaseLLM):
    """A model behind an OpenAI-compatible chat-completions API.

    ``retry_initial``, ``retry_max`` and ``retry_jitter`` (seconds) shape the backoff
    between attempts; tests make them tiny. ``max_retries`` is the number of retries
    after the first attempt. A server's ``Retry-After`` (or ``retry-after-ms``) is
    honoured, up to ``retry_after_max`` seconds. ``timeout`` (or the call's
    ``settings.timeout``) bounds each attempt as a whole — not each read, so a server
    trickling bytes cannot stretch a call — and every attempt, failed ones too, is
    metered.

    ``deadline`` bounds one call in all: its attempts and the waits between them
    together (default: ``timeout × (max_retries + 1)``, what the attempts alone could
    take). No attempt runs past it, and a wait that would end past it — a
    ``Retry-After: 3600``, a long backoff — is not begun: the call fails at once with
    the last attempt's error, which says so.
    """

    supports_json_schema = True
    supports_tools = True
    supports_embeddings = True
    gen_ai_system = "openai"  # OpenTelemetry's gen_ai.system (presets over this provider set their own)

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        structured_outputs: bool | None = None,
        settings: LLMSettings | None = None,
        retry_initial: float = 0.5,
        retry_max: float = 8.0,
        retry_jitter: float = 0.5,
        retry_after_max: float = 30.0,
        http_client: Any = None,
        grammars: bool | None = None,
        deadline: float | None = None,
    ):
        super().__init__(model, settings)
        if api_key is None and not base_url:
            raise ConfigError(
                "the OpenAI provider needs an API key: set OPENAI_API_KEY (or llm.api_key), "
                "or a base_url pointing to a local OpenAI-compatible server"
            )
        self.api_key = api_key or PLACEHOLDER_API_KEY
        self.base_url = base_url
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.retry_jitter = retry_jitter
        self.retry_after_max = retry_after_max
        if deadline is not None and not deadline > 0:
            raise ConfigError(f"OpenAILLM(deadline=...) must be a positive number of seconds, not {deadline!r}")
        self.deadline = deadline
        # True = always send response_format, False = never, None = try and learn.
        self.structured_outputs = structured_outputs
        self.supports_json_schema = structured_outputs is not False
        self._format_kind: str | None = None  # which response_format dialect the server took
        self._stream_usage: bool | None = None  # same three states as structured_outputs, for stream_options
        self._http_client = http_client  # the caller's: used for every call, never closed here
        # same three states, for the grammar fields; False: a grammar given to complete() is ignored
        self.grammars = grammars
        self.supports_grammar = grammars is not False
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def from_config(cls, cfg: OpenAIConfig, **kwargs: Any) -> OpenAILLM:
        """Build from an :class:`~rolecast.core.config.OpenAIConfig`; ``kwargs`` override it."""
        if not isinstance(cfg, OpenAIConfig):
            raise ConfigError(f"the openai provider needs an OpenAIConfig, not {type(cfg).__name__}")
        params: dict[str, Any] = {
            "model": cfg.model or DEFAULT_MODEL,
            "api_key": cfg.api_key.get_secret_value() if cfg.api_key is not None else None,
            "base_url": cfg.base_url,
            "timeout": cfg.timeout,
            "max_retries": cfg.max_retries,
            "deadline": cfg.deadline,
            "structured_outputs": cfg.structured_outputs,
            "grammars": cfg.grammars,
            "settings": cfg.settings,
            "http_client": proxied_http_client(cfg.proxy, cfg.timeout) if cfg.proxy else None,  # MetaGPT's proxy
        }
        params.update(kwargs)
        return cls(**params)

    @property
    def server_url(self) -> str:
        """Where the calls go: ``base_url``, else the OpenAI API's address."""
        return self.base_url or "https://api.openai.com/v1"

    # ------------------------------------------------------------------ plumbing
    def _get_client(self) -> Any:
        """The SDK client: one over the caller's ``http_client``, else one per running loop.

        A pooled connection must not cross event loops, so without a caller's client a
        new SDK client is made when the loop changes.
        """
        loop = None if self._http_client is not None else asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = self._new_client()
            self._client_loop = loop
            # the SDK imports its resources on first use: here, not inside the first call's deadline
            _ = self._client.chat.completions.with_raw_response, _sdk_type("chat")
        return self._client

    def _new_client(self) -> Any:
        """The SDK's client (Azure's provider makes ``AsyncAzureOpenAI`` here)."""
        import openai

        return openai.AsyncOpenAI(api_key=self.api_key, base_url=self.base_url, timeout=self.timeout,
                                  max_retries=0, http_client=self._http_client)

    async def aclose(self) -> None:
        """Close the HTTP connections this instance opened (optional; they are closed at exit too).

        A caller's ``http_client`` is left open: its owner closes it.
        """
        if self._client is not None and self._http_client is None:
            await self._client.close()
        self._client = None
        self._client_loop = None

    def _params(
        self,
        messages: Messages,
        stop: list[str] | None,
        settings: LLMSettings,
        tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        for name in ("temperature", "max_tokens", "top_p", "seed"):
            value = getattr(settings, name)
            if value is not None:
                params[name] = value
        if stop:
            params["stop"] = stop
        if tools:
            params["tools"] = tools
        if settings.timeout is not None:
            params["timeout"] = settings.timeout
        if settings.extra:
            # unknown to us, maybe known to the server (tool_choice, top_k, repetition_penalty …)
            params["extra_body"] = dict(settings.extra)
        return params

    async def _create(
        self, params: dict[str, Any], probe: str | None = None, *, check: bool = True, raw: bool = False,
        endpoint: str = "chat", ends: float | None = None,
    ) -> Any:
        """One request, retried on transient errors, SDK errors mapped to rolecast errors.

        ``endpoint`` is ``"chat"`` (chat completions) or ``"embeddings"``.

        ``probe`` names an optional field whose support is being learned: an error that
        names it is an answer about the field, not a transient failure, so it is not retried.
        Each attempt must finish within the timeout (as a whole); with ``check`` its
        answer must be a usable chat completion, or it counts as a failed attempt. With
        ``raw`` the HTTP response comes back unread (a stream, parsed by :meth:`_stream`).
        ``ends`` is the call's deadline on the loop's clock (see the class's ``deadline``);
        a call that makes several requests (learning a server's fields) passes its own.
        """
        import openai
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, stop_any

        def should_retry(exc: BaseException) -> bool:
            if probe and isinstance(exc, openai.APIStatusError) and probe in str(exc):
                return False
            return _is_transient(exc)

        client = self._get_client()
        attempts = 0
        limit = float(params.get("timeout") or self.timeout)
        loop = asyncio.get_running_loop()
        if ends is None:
            ends = loop.time() + self._total(limit)
        cut_short = ""  # why the retries stopped before they were all used

        def out_of_time(state: Any) -> bool:
            """Stop when the wait before the next attempt would end at or past the deadline."""
            nonlocal cut_short
            left = ends - loop.time()
            wait = float(state.upcoming_sleep or 0.0)
            if wait < left:
                return False
            asked = retry_after(state.outcome.exception() if state.outcome else None)
            why = f"the server asked to wait {asked:g} s" if asked is not None else f"the next wait is {wait:.2g} s"
            cut_short = f"not retried: {why}, past the call's deadline ({max(0.0, left):.2g} s left)"
            return True

        retrying = AsyncRetrying(
            retry=retry_if_exception(should_retry),
            stop=stop_any(stop_after_attempt(self.max_retries + 1), cast(Any, out_of_time)),
            wait=self._wait,
            before_sleep=self._before_sleep,
            reraise=True,
        )
        try:
            with openai_errors(attempts=lambda: attempts, url=self.server_url):
                async for attempt in retrying:
                    with attempt:
                        attempts += 1
                        # each attempt within its own timeout and what is left of the call's deadline
                        limit = min(limit, max(0.0, ends - loop.time()))
                        # the body comes back unread by the SDK: it is decoded here, bounded (openai_wire)
                        if endpoint == "embeddings":
                            create = client.embeddings.with_raw_response.create
                            response = await asyncio.wait_for(create(**params), limit)
                            return read_model(response.http_response, _sdk_type("embeddings"), "embeddings")
                        create = client.chat.completions.with_raw_response.create
                        response = await asyncio.wait_for(create(**params), limit)
                        if raw:
                            return response.http_response
                        completion = read_model(response.http_response, _sdk_type("chat"))
                        return check_response(completion) if check else completion
        except LLMError as exc:
            if cut_short and exc.args:
                exc.args = (f"{exc.args[0]}; {cut_short}", *exc.args[1:])
            raise
        raise AssertionError("unreachable: tenacity either returns or re-raises")  # pragma: no cover

    def _ends(self, params: dict[str, Any]) -> float:
        """When a call with these ``params`` must be over, on the running loop's clock."""
        return asyncio.get_running_loop().time() + self._total(float(params.get("timeout") or self.timeout))

    def _total(self, limit: float) -> float:
        """The deadline of one call in seconds: ``deadline``, else what its attempts alone could take."""
        return self.deadline if self.deadline is not None else limit * (self.max_retries + 1)

    def _wait(self, state: Any) -> float:
        """Exponential backoff with jitter, or the server's ``Retry-After`` (capped) when it sent one."""
        asked = retry_after(state.outcome.exception() if state.outcome else None)
        if asked is not None:
            return min(asked, self.retry_after_max)
        attempt = int(state.attempt_number)
        backoff = min(self.retry_max, self.retry_initial * 2.0 ** (attempt - 1))
        return float(backoff + random.uniform(0, self.retry_jitter))

    def _before_sleep(self, state: Any) -> None:
        exc = state.outcome.exception() if state.outcome else None
        logger.debug("{}: attempt {} failed ({}); retrying", self, state.attempt_number, error_text(exc))
        if exc is not None:
            self._attempt_failed(exc)  # the seam meters the last attempt; the retried ones are metered here

    async def _create_structured(self, params: dict[str, Any], request: StructuredRequest, ends: float) -> Any:
        """Send ``params`` constrained to ``request.schema`` in the best format the server takes.

        Formats are tried in order — OpenAI's ``json_schema``, then llama-cpp-python's
        ``json_object`` with a ``schema`` — until one is accepted (and remembered). When
        every one is rejected the request goes without ``response_format`` and
        ``structured_outputs`` becomes False: the schema is in the prompt anyway.
        """
        if self.structured_outputs is False:
            return await self._create(params, ends=ends)
        if self.structured_outputs is True:
            kinds = [self._format_kind or "json_schema"]
        else:
            kinds = list(_FORMAT_KINDS)
        learning = self.structured_outputs is None
        for kind in kinds:
            fmt = _response_format(kind, request)
            try:
                response = await self._create({**params, "response_format": fmt},
                                              probe="response_format" if learning else None, ends=ends)
            except LLMAPIError as exc:
                if not learning or not _rejects_field(exc, "response_format"):
                    raise
                logger.info("{}: the server rejected response_format {} ({})", self, kind, exc)
                self._attempt_failed(exc)
                continue
            if learning:
                self.structured_outputs = True
                self._format_kind = kind
            return response
        response = await self._create(params, ends=ends)
        # only now: the format, not the request, was the problem
        self.structured_outputs = False
        self.supports_json_schema = False
        return response

    async def _create_grammar(self, params: dict[str, Any], grammar: str, ends: float) -> Any:
        """Send ``params`` with ``grammar`` in the fields servers read it from, learning whether they may."""
        if self.grammars is False:
            return await self._create(params, ends=ends)
        extra = {**params.get("extra_body", {}), **{name: grammar for name in _GRAMMAR_FIELDS}}
        learning = self.grammars is None
        try:
            response = await self._create(
                {**params, "extra_body": extra}, probe="grammar" if learning else None, ends=ends
            )
        except LLMAPIError as exc:
            if not learning or not _rejects_field(exc, "grammar"):
                raise
            logger.info("{}: the server rejected a grammar ({}); asking without one", self, exc)
            response = await self._create(params, ends=ends)
            # only now: the grammar, not the request, was the problem
            self.grammars = False
            self.supports_grammar = False
            return response
        if learning:
            self.grammars = True
        return response

    async def _create_stream(self, params: dict[str, Any], ends: float) -> Any:
        """Open a stream, asking for usage in its last chunk unless the server is known to refuse."""
        params = {**params, "stream": True}
        if self._stream_usage is False:
            return await self._create(params, raw=True, ends=ends)
        with_usage = {**params, "stream_options": {"include_usage": True}}
        if self._stream_usage:
            return await self._create(with_usage, raw=True, ends=ends)
        try:
            stream = await self._create(with_usage, probe="stream_options", raw=True, ends=ends)
        except LLMAPIError as exc:
            if not _rejects_field(exc, "stream_options"):
                raise
            logger.info("{}: the server rejected stream_options ({}); streaming without usage", self, exc)
            self._attempt_failed(exc)
            stream = await self._create(params, raw=True, ends=ends)
            self._stream_usage = False
            return stream
        self._stream_usage = True
        return stream

    @staticmethod
    def _completion(response: Any, stop: list[str] | None) -> Completion:
        choice = check_response(response).choices[0]
        message = choice.message
        calls: list[ToolCall] = []
        for tc in message.tool_calls or []:
            function = getattr(tc, "function", None)
            if function is not None:
                calls.append(ToolCall(id=tc.id, name=function.name, arguments=function.arguments or ""))
        return Completion(
            # a server that ignores `stop` must not leak text past it
            text=truncate_at_stop(message.content or "", stop),
            usage=_usage(response.usage),
            model=response.model or "",
            finish_reason=choice.finish_reason,
            tool_calls=calls,
        )

    # ------------------------------------------------------------ provider hooks
    async def _complete(
        self,
        messages: Messages,
        *,
        stop: list[str] | None,
        settings: LLMSettings,
        structured: StructuredRequest | None = None,
        tools: list[dict[str, Any]] | None = None,
        grammar: str | None = None,
    ) -> Completion:
        params = self._params(messages, stop, settings, tools)
        ends = self._ends(params)
        if structured is not None:
            response = await self._create_structured(params, structured, ends)
        elif grammar is not None:
            response = await self._create_grammar(params, grammar, ends)
        else:
            response = await self._create(params, ends=ends)
        return self._completion(response, stop)

    async def _stream(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings
    ) -> AsyncIterator[str | Usage]:
        """Read the server-sent events ourselves: a stream must end with ``[DONE]`` or a
        ``finish_reason``; a cut, garbled or non-SSE stream is a typed error, never a short answer."""
        params = self._params(messages, stop, settings)
        loop = asyncio.get_running_loop()
        deadline = self._ends(params)  # the whole call's: opening the stream (retried) and reading it
        response = await self._create_stream(params, deadline)
        state = StreamState()
        try:
            kind = response.headers.get("content-type", "")
            if "text/event-stream" not in kind:
                raise LLMResponseError(f"the server answered a stream request with {kind or 'no content type'}")
            lines = response.aiter_lines().__aiter__()
            while not state.done:
                try:
                    line = await asyncio.wait_for(lines.__anext__(), max(0.0, deadline - loop.time()))
                except StopAsyncIteration:
                    line = None
                except (asyncio.TimeoutError, TimeoutError) as exc:
                    raise LLMTimeoutError(
                        f"the streamed answer did not finish within the call's deadline "
                        f"({self._total(float(params.get('timeout') or self.timeout)):g} s)"
                    ) from exc
                except Exception as exc:  # the connection broke mid-stream
                    raise LLMIncompleteError(f"the stream broke off: {type(exc).__name__}: {exc}") from exc
                for piece in state.feed(line):
                    yield piece
                if line is None:
                    break
        except LLMError as exc:
            exc.partial = "".join(state.parts)
            raise
        finally:
            with contextlib.suppress(Exception):
                await response.aclose()
        if not (state.done or state.finished):
            error = LLMIncompleteError(
                f"the stream ended before the answer did (no [DONE], no finish_reason; {len(state.parts)} piece(s))"
            )
            error.partial = "".join(state.parts)
            raise error
        if not state.parts:
            raise LLMEmptyAnswerError("the model streamed no text")
        if state.usage is not None:
            yield state.usage

    async def _embed(self, texts: list[str], *, purpose: EmbedPurpose) -> Embeddings:
        """``POST /v1/embeddings`` (OpenAI, a llama.cpp server started with embeddings on, Ollama, vLLM …).

        Vectors are put back in the order of ``texts`` by their ``index``; ``purpose`` is not
        part of the OpenAI API, so a model that wants query prefixes gets them in the text.
        """
        params: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.settings.timeout is not None:
            params["timeout"] = self.settings.timeout
        response = await self._create(params, endpoint="embeddings", ends=self._ends(params))
        data = sorted(response.data or [], key=lambda d: d.index)
        if len(data) != len(texts) or any(not d.embedding for d in data):
            raise LLMAPIError(f"the embeddings server returned {len(data)} vectors for {len(texts)} texts")
        vectors = [_flat_vector(d.embedding) for d in data]
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        return Embeddings(vectors, Usage(prompt_tokens, 0), model=response.model or self.model)

    async def _choose_text(self, messages: Messages, n_options: int, settings: LLMSettings) -> Completion:
        """Ask for ``{"choice": k}`` with k in a JSON-schema enum where the server supports it.

        The returned text is the bare number, so the base class's strict parse applies
        either way; without structured outputs it is the model's plain answer.
        """
        if self.structured_outputs is False:
            return await self._complete(messages, stop=None, settings=settings)
        completion = await self._complete(
            messages, stop=None, settings=settings,
            structured=StructuredRequest(schema=choice_schema(n_options), name="choice"),
        )
        completion.text = _choice_from_json(completion.text)
        return completion


def _sdk_type(endpoint: str) -> Any:
    """The SDK's model of an endpoint's answer (imported on first use, as ``openai`` is)."""
    if endpoint == "embeddings":
        from openai.types import CreateEmbeddingResponse

        return CreateEmbeddingResponse
    from openai.types.chat import ChatCompletion

    return ChatCompletion


def _choice_from_json(text: str) -> str:
    """``{"choice": 3}`` → ``"3"``; anything else is returned as is for strict parsing."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # the model's text, nested absurdly deep: not a choice
        return text
    if isinstance(value, dict):
        value = value.get("choice")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return text


def _flat_vector(embedding: Any) -> list[float]:
    """One unit vector (per-token vectors from a llama.cpp server are mean-pooled, as in-process)."""
    if isinstance(embedding, str):
        raise LLMAPIError("the embeddings server answered base64; rolecast asks for floats")
    return pooled_vector(embedding)


def _schema_name(name: str) -> str:
    """OpenAI wants ``^[a-zA-Z0-9_-]{1,64}$`` as a schema name."""
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64]
    return cleaned or "output"


__all__ = ["DEFAULT_MODEL", "OpenAILLM"]

"""Gemini through the Gemini API, with Google's ``google-genai`` SDK (``pip install "rolecast[gemini]"``).

``google.genai`` is imported when the provider is first used, never when rolecast is
imported. The system prompt is ``systemInstruction``; tools are ``functionDeclarations``
answered by ``functionCall`` / ``functionResponse`` parts; structured output is
``responseMimeType: application/json`` with the JSON schema (``responseJsonSchema``); a
state choice is Gemini's enum mode (``text/x.enum`` with a ``responseSchema`` enum of
the valid numbers), so it is valid by construction and still parsed strictly here. Usage
is ``usageMetadata``; embeddings are ``batchEmbedContents`` (``embedding_model``). 429,
5xx, timeouts and connection errors are retried (honouring ``retry-after``); the rest is typed.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from ...core.config import HostedConfig
from ...errors import ConfigError, LLMAPIError, LLMEmptyAnswerError, LLMError, LLMIncompleteError
from ..base import (
    Completion,
    Embeddings,
    EmbedPurpose,
    LLMSettings,
    Messages,
    StructuredRequest,
    Usage,
    pooled_vector,
    truncate_at_stop,
)
from ..exceptions import ExceptionMapping, gemini_mapping, map_exceptions
from ..hosted import HostedLLM
from .wire import choice_config, contents_of, declarations_of, response_parts, usage_of

__all__ = ["DEFAULT_EMBEDDING_MODEL", "DEFAULT_MODEL", "GeminiLLM"]

DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_EMBEDDING_MODEL = "gemini-embedding-001"
_TASK = {"document": "RETRIEVAL_DOCUMENT", "query": "RETRIEVAL_QUERY"}


def _http_library() -> Any:
    """The HTTP library google-genai sends through: ``httpx2`` (its fork of httpx) where installed, else httpx."""
    try:
        import httpx2

        return httpx2
    except ImportError:
        import httpx

        return httpx


class GeminiLLM(HostedLLM):
    """A Gemini model (see the module). ``base_url`` defaults to the SDK's Gemini API address;
    ``api_version`` to the SDK's (``v1beta``)."""

    supports_json_schema = True
    supports_tools = True
    supports_embeddings = True
    gen_ai_system = "gcp.gemini"
    provider_name = "gemini"

    def __init__(self, model: str = DEFAULT_MODEL, *, api_version: str | None = None,
                 embedding_model: str = DEFAULT_EMBEDDING_MODEL, **kwargs: Any):
        super().__init__(model, **kwargs)
        if not self.api_key:
            raise ConfigError("the Gemini provider needs an API key: set GEMINI_API_KEY (or llm.api_key)")
        self.api_version = api_version
        self.embedding_model = embedding_model
        self._call_ids = itertools.count()
        #: the thought signature of each function call made to this instance, sent back with the call
        self._signatures: dict[str, bytes] = {}

    @classmethod
    def from_config(cls, cfg: HostedConfig, **kwargs: Any) -> GeminiLLM:
        if not isinstance(cfg, HostedConfig):
            raise ConfigError(f"the gemini provider needs a HostedConfig, not {type(cfg).__name__}")
        params: dict[str, Any] = {
            "model": cfg.model or DEFAULT_MODEL,
            "api_key": cfg.api_key.get_secret_value() if cfg.api_key is not None else None,
            "base_url": cfg.base_url, "api_version": cfg.api_version, "timeout": cfg.timeout,
            "max_retries": cfg.max_retries, "deadline": cfg.deadline, "settings": cfg.settings, "proxy": cfg.proxy,
        }
        return cls(**{**params, **kwargs})

    # ---------------------------------------------------------------- plumbing
    def _new_client(self) -> Any:
        from google import genai

        options: dict[str, Any] = {"timeout": int(self.timeout * 1000)}
        if self.base_url:
            options["base_url"] = self.base_url
        if self.api_version:
            options["api_version"] = self.api_version
        options["httpx_async_client"] = self._http(_http_library().AsyncClient,
                                                   "https://generativelanguage.googleapis.com")
        client = genai.Client(api_key=self.api_key, http_options=cast(Any, options))
        _ = client.aio.models  # the SDK's resources imported here, not inside a call's deadline
        return client

    def _is_transient(self, exc: BaseException) -> bool:
        from google.genai import errors

        if isinstance(exc, TimeoutError):
            return True
        # httpx's, or httpx2's (the fork google-genai may send through), connection errors and timeouts
        if any(cls.__name__ in ("TransportError", "TimeoutException") for cls in type(exc).__mro__):
            return True
        if isinstance(exc, errors.APIError):
            return exc.code in (408, 429) or (exc.code or 0) >= 500
        return False

    def _mapping(self, attempts: Callable[[], int]) -> ExceptionMapping:
        return gemini_mapping(attempts, self.base_url or "")

    def _config(self, messages: Messages, stop: list[str] | None, settings: LLMSettings) -> tuple[Any, Any]:
        system, contents = contents_of(messages, self._signatures)
        config: dict[str, Any] = {"max_output_tokens": settings.max_tokens or self.default_max_tokens,
                                  "automatic_function_calling": {"disable": True}}
        if system:
            config["system_instruction"] = system
        for name, key in (("temperature", "temperature"), ("top_p", "top_p"), ("seed", "seed")):
            if getattr(settings, name) is not None:
                config[key] = getattr(settings, name)
        if stop:
            config["stop_sequences"] = stop
        if settings.extra:
            config.update(settings.extra)  # the SDK's own fields (top_k, safety_settings, thinking_config …)
        return contents, config

    # ------------------------------------------------------------ provider hooks
    async def _generate(self, messages: Messages, stop: list[str] | None, settings: LLMSettings,
                        **extra: Any) -> Completion:
        contents, config = self._config(messages, stop, settings)
        config.update(extra)
        response = await self._attempts(
            lambda client: client.aio.models.generate_content(model=self.model, contents=contents, config=config),
            settings,
        )
        text, calls, finish = response_parts(response, next(self._call_ids) * 100, self._signatures)
        if not text and not calls:
            raise LLMEmptyAnswerError(f"Gemini answered with no text and no function call (finish_reason={finish})")
        return Completion(text=truncate_at_stop(text, stop), usage=usage_of(response.usage_metadata),
                          model=str(getattr(response, "model_version", None) or self.model),
                          finish_reason=finish, tool_calls=calls)

    async def _complete(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings,
        structured: StructuredRequest | None = None, tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        extra: dict[str, Any] = {}
        if tools:
            extra["tools"] = declarations_of(tools)
        elif structured is not None:
            extra = {"response_mime_type": "application/json", "response_json_schema": structured.schema}
        return await self._generate(messages, stop, settings, **extra)

    async def _choose_text(self, messages: Messages, n_options: int, settings: LLMSettings) -> Completion:
        return await self._generate(messages, None, settings, **choice_config(n_options))

    async def _stream(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings
    ) -> AsyncIterator[str | Usage]:
        contents, config = self._config(messages, stop, settings)
        ends = self._ends(settings)  # the whole call's: opening the stream (retried) and reading it
        stream = await self._attempts(
            lambda client: client.aio.models.generate_content_stream(
                model=self.model, contents=contents, config=config),
            settings, ends,
        )
        parts: list[str] = []
        usage = Usage()
        finished = False
        try:
            with map_exceptions(self._mapping(lambda: 1)):  # an error mid-stream, a cut connection
                async for chunk in self._events(stream, ends, settings):
                    text, _, finish = response_parts(chunk)
                    if chunk.usage_metadata is not None:
                        usage = usage_of(chunk.usage_metadata)
                    finished = finished or finish is not None
                    if text:
                        parts.append(text)
                        yield text
        except LLMError as exc:
            exc.partial = "".join(parts)
            raise
        if not finished:
            error = LLMIncompleteError(f"the stream ended before a finishReason ({len(parts)} piece(s))")
            error.partial = "".join(parts)
            raise error
        if not parts:
            raise LLMEmptyAnswerError("Gemini streamed no text")
        yield usage

    async def _embed(self, texts: list[str], *, purpose: EmbedPurpose) -> Embeddings:
        config = {"task_type": _TASK[purpose]}
        response = await self._attempts(
            lambda client: client.aio.models.embed_content(model=self.embedding_model, contents=texts, config=config),
            None,
        )
        vectors = [pooled_vector(e.values or []) for e in response.embeddings or []]
        if len(vectors) != len(texts):
            raise LLMAPIError(f"the Gemini API returned {len(vectors)} embeddings for {len(texts)} texts")
        meta = getattr(response, "metadata", None)
        tokens = int(getattr(meta, "billable_character_count", 0) or 0) // 4 if meta is not None else 0
        return Embeddings(vectors, Usage(tokens, 0), model=self.embedding_model)

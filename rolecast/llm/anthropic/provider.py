"""Claude through Anthropic's Messages API, with the ``anthropic`` SDK (``pip install "rolecast[anthropic]"``).

``anthropic`` is imported when the provider is first used, never when rolecast is
imported. Every request sends ``max_tokens`` (the API requires it) and the system prompt
as its own ``system`` field. Native tool calls are ``tool_use`` / ``tool_result`` blocks;
structured output and state choice are a forced tool whose input schema is the schema
(for :meth:`choose`: an ``enum`` of the valid numbers), so the answer is constrained by
the API and still parsed strictly here. Streams are the SDK's server-sent events; usage
comes from ``message_start`` and ``message_delta``. 429 (honouring ``retry-after``),
529 overloaded, 5xx, timeouts and connection errors are retried; the rest is typed.
Anthropic has no embeddings endpoint.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from ...core.config import HostedConfig
from ...errors import ConfigError, LLMEmptyAnswerError, LLMError, LLMIncompleteError
from ..base import Completion, LLMSettings, Messages, StructuredRequest, Usage, choice_schema, truncate_at_stop
from ..exceptions import ExceptionMapping, anthropic_mapping, map_exceptions
from ..hosted import HostedLLM
from .wire import request_messages, response_parts, tools_of, usage_of

__all__ = ["DEFAULT_MODEL", "AnthropicLLM"]

DEFAULT_MODEL = "claude-sonnet-4-6"
_ANSWER_TOOL = "answer"


class AnthropicLLM(HostedLLM):
    """A Claude model (see the module). ``base_url`` defaults to ``https://api.anthropic.com``."""

    supports_json_schema = True
    supports_tools = True
    gen_ai_system = "anthropic"
    provider_name = "anthropic"

    def __init__(self, model: str = DEFAULT_MODEL, **kwargs: Any):
        super().__init__(model, **kwargs)
        if not self.api_key:
            raise ConfigError("the Anthropic provider needs an API key: set ANTHROPIC_API_KEY (or llm.api_key)")

    @classmethod
    def from_config(cls, cfg: HostedConfig, **kwargs: Any) -> AnthropicLLM:
        if not isinstance(cfg, HostedConfig):
            raise ConfigError(f"the anthropic provider needs a HostedConfig, not {type(cfg).__name__}")
        params: dict[str, Any] = {
            "model": cfg.model or DEFAULT_MODEL,
            "api_key": cfg.api_key.get_secret_value() if cfg.api_key is not None else None,
            "base_url": cfg.base_url, "timeout": cfg.timeout, "max_retries": cfg.max_retries,
            "deadline": cfg.deadline, "settings": cfg.settings, "proxy": cfg.proxy,
        }
        return cls(**{**params, **kwargs})

    # ---------------------------------------------------------------- plumbing
    def _new_client(self) -> Any:
        import anthropic

        client = anthropic.AsyncAnthropic(
            api_key=self.api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0,
            http_client=self._http(anthropic.DefaultAsyncHttpxClient, "https://api.anthropic.com"),
        )
        _ = client.messages  # the SDK imports its resources on first use: here, not inside a call's deadline
        return client

    def _is_transient(self, exc: BaseException) -> bool:
        import anthropic

        if isinstance(exc, (anthropic.APIConnectionError, TimeoutError)):  # (APITimeoutError is one)
            return True
        if isinstance(exc, anthropic.APIStatusError):
            return exc.status_code in (408, 429, 529) or exc.status_code >= 500
        return False

    def _mapping(self, attempts: Callable[[], int]) -> ExceptionMapping:
        return anthropic_mapping(attempts, self.base_url or "")

    def _params(
        self, messages: Messages, stop: list[str] | None, settings: LLMSettings,
        tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        system, turns = request_messages(messages)
        params: dict[str, Any] = {"model": self.model, "messages": turns,
                                  "max_tokens": settings.max_tokens or self.default_max_tokens}
        if system:
            params["system"] = system
        if stop:
            params["stop_sequences"] = stop
        if tools:
            params["tools"] = tools_of(tools)
        # sampling fields in the body as is: recent SDKs no longer list them as arguments (newer models
        # refuse them), older models take them; settings.extra: fields the API knows (top_k, thinking …)
        pairs = (("temperature", settings.temperature), ("top_p", settings.top_p))
        sampling = {k: v for k, v in pairs if v is not None}
        if sampling or settings.extra:
            params["extra_body"] = {**sampling, **settings.extra}
        return params

    # ------------------------------------------------------------ provider hooks
    async def _complete(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings,
        structured: StructuredRequest | None = None, tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        params = self._params(messages, stop, settings, tools)
        if structured is not None and not tools:  # a forced tool whose input is the answer
            params["tools"] = [{"name": _ANSWER_TOOL, "description": f"Give the {structured.name}.",
                                "input_schema": structured.schema}]
            params["tool_choice"] = {"type": "tool", "name": _ANSWER_TOOL}
        response = await self._attempts(lambda client: client.messages.create(**params), settings)
        text, calls = response_parts(response.content)
        if structured is not None and not tools:
            answer = next((c for c in calls if c.name == _ANSWER_TOOL), None)
            text, calls = (answer.arguments if answer is not None else text), []
        if not text and not calls:
            raise LLMEmptyAnswerError(f"Claude answered with no text and no tool call "
                                      f"(stop_reason={response.stop_reason!r})")
        return Completion(text=truncate_at_stop(text, stop), usage=usage_of(response.usage),
                          model=str(response.model or self.model), finish_reason=response.stop_reason,
                          tool_calls=calls)

    async def _choose_text(self, messages: Messages, n_options: int, settings: LLMSettings) -> Completion:
        """A forced tool whose one argument is an enum of the valid numbers; its value is the answer."""
        completion = await self._complete(
            messages, stop=None, settings=settings,
            structured=StructuredRequest(schema=choice_schema(n_options), name="choice"),
        )
        try:
            value = json.loads(completion.text)
        except ValueError:
            return completion  # parsed strictly by the seam
        if isinstance(value, dict) and isinstance(value.get("choice"), int):
            completion.text = str(value["choice"])
        return completion

    async def _stream(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings
    ) -> AsyncIterator[str | Usage]:
        params = {**self._params(messages, stop, settings), "stream": True}
        ends = self._ends(settings)  # the whole call's: opening the stream (retried) and reading it
        stream = await self._attempts(lambda client: client.messages.create(**params), settings, ends)
        parts: list[str] = []
        prompt = output = 0
        finished = False
        try:
            with map_exceptions(self._mapping(lambda: 1)):  # an error event, a cut connection
                async for event in self._events(stream, ends, settings):
                    kind = getattr(event, "type", "")
                    if kind == "message_start":
                        prompt = usage_of(event.message.usage).prompt_tokens
                        output = int(getattr(event.message.usage, "output_tokens", 0) or 0)
                    elif kind == "content_block_delta" and getattr(event.delta, "type", "") == "text_delta":
                        parts.append(event.delta.text)
                        yield event.delta.text
                    elif kind == "message_delta":
                        output = int(getattr(event.usage, "output_tokens", 0) or 0) or output
                    elif kind == "message_stop":
                        finished = True
        except LLMError as exc:
            exc.partial = "".join(parts)  # streamed, and paid for, before it broke
            raise
        finally:
            await stream.close()
        if not finished:
            error = LLMIncompleteError(f"the stream ended before message_stop ({len(parts)} piece(s))")
            error.partial = "".join(parts)
            raise error
        if not parts:
            raise LLMEmptyAnswerError("Claude streamed no text")
        yield Usage(prompt, output)


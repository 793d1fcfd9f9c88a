"""The one interface every model call in rolecast goes through.

A provider implements :meth:`BaseLLM._complete` (and, when it can do better than the
defaults, ``_stream``, ``_choose_text`` and ``_embed``). The public methods — :meth:`ask`,
:meth:`complete`, :meth:`stream`, :meth:`choose`, :meth:`structured` and :meth:`embed` —
live here once, so budget checks, usage accounting, the run log, strict choice parsing
and structured-output re-asks are the same for every provider.

Messages are OpenAI chat dictionaries (``{"role": "user", "content": "..."}``).
"""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

from loguru import logger
from pydantic import BaseModel, ValidationError

from ..accounting.cost import Reservation, estimate_tokens, max_prompt_tokens
from ..accounting.metering import Meter, current_meter
from ..core.jsonutil import extract_json
from ..core.settings import LLMSettings as LLMSettings  # re-exported: the seam's settings type
from ..errors import ContextOverflow, LLMAPIError, LLMError, ModelRequestsBlocked, OutputParseError, UsageError
from ..runs.events import LLMCallData, ResponseData
from ..runs.log import FullRequest, current_action
from .errortext import error_text
from .metagpt_calls import MetaGPTCalls
from .recording import describe_request
from .switch import ALLOW_MODEL_REQUESTS_ENV, model_requests_allowed, set_model_requests_allowed
from .types import (  # the seam's data types: re-exported, see __all__
    DEFAULT_FIX,
    Completion,
    Embeddings,
    EmbedPurpose,
    Messages,
    StructuredRequest,
    ToolCall,
    Usage,
    choice_schema,
    messages_text,
    parse_choice,
    pooled_vector,
    to_messages,
    truncate_at_stop,
)
from .window import ContextWindow

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


#: what a metered call returns: a chat answer or embeddings
R = TypeVar("R", Completion, Embeddings)

class BaseLLM(MetaGPTCalls, ContextWindow, ABC):
    """Abstract model provider. Subclasses implement :meth:`_complete`.

    Class attributes describe capabilities: ``supports_json_schema`` (the provider
    can constrain output to a JSON schema), ``grammar_constrained`` (it decodes under
    a grammar, so constrained output is guaranteed), ``supports_tools`` (native tool
    calls), ``supports_embeddings`` (:meth:`embed` works), ``free`` (usage is counted but
    costs nothing, e.g. a local model),
    ``supports_grammar`` (it takes a GBNF grammar: ``complete(..., grammar=...)``; its
    ``_complete`` then accepts a ``grammar`` keyword — others never get one).
    """

    supports_json_schema: bool = False
    supports_tools: bool = False
    supports_embeddings: bool = False
    #: decodes under a GBNF grammar given to complete/ask (a grammar given to a model
    #: without it is ignored: callers parse strictly and re-ask, as for ``choose``)
    supports_grammar: bool = False
    #: decodes under a grammar built from the schema: the output *always* matches it, so
    #: callers may ask with tighter schemas than a prompt-following model could honour
    grammar_constrained: bool = False
    free: bool = False
    #: ``max_tokens`` of a call whose settings name none: every call has a worst case the budget can reserve
    default_max_tokens: int = 4096
    #: ``max_tokens`` of a state-selection answer whose settings name none ("-1", "12": a few tokens)
    choice_max_tokens: int = 32
    #: it asks a real model (a server, or a model it loads): its requests raise
    #: :class:`~rolecast.errors.ModelRequestsBlocked` while model requests are off (see
    #: :func:`model_requests_allowed`). Scripted doubles and a person (``HumanProvider``) say False.
    reaches_a_model: bool = True
    #: the provider in OpenTelemetry's ``gen_ai.system`` ("openai", "anthropic", "gcp.gemini" …), in the run log
    gen_ai_system: str = ""

    def __init__(self, model: str, settings: LLMSettings | None = None):
        self.model = model
        self.settings = settings or LLMSettings()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    # ------------------------------------------------------------ provider hooks
    @abstractmethod
    async def _complete(
        self,
        messages: Messages,
        *,
        stop: list[str] | None,
        settings: LLMSettings,
        structured: StructuredRequest | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        """Make one call. Honour ``stop``; constrain to ``structured.schema`` if able."""

    async def _stream(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings
    ) -> AsyncIterator[str | Usage]:
        """Yield text chunks, then optionally one :class:`Usage`. Default: one chunk."""
        completion = await self._complete(messages, stop=stop, settings=settings)
        yield completion.text
        yield completion.usage

    async def _choose_text(self, messages: Messages, n_options: int, settings: LLMSettings) -> Completion:
        """Answer a state-selection prompt; constrained providers override this."""
        return await self._complete(messages, stop=None, settings=settings)

    async def _embed(self, texts: list[str], *, purpose: EmbedPurpose) -> Embeddings:
        """Embed ``texts`` (one vector each, in order); providers with ``supports_embeddings`` override it."""
        raise UsageError(f"{self!r} cannot embed text")

    # ----------------------------------------------------------------- metering
    def _check_budget(self, messages: Messages) -> None:
        meter = current_meter()
        meter.cost_manager.check(self.model, estimate_tokens(messages_text(messages)), role=meter.role, free=self.free)

    def _reserve(
        self, messages: Messages, max_tokens: int, request: dict[str, Any], meter: Meter | None = None
    ) -> Reservation:
        """Reserve the call's worst case: an upper bound of its prompt (tools and schema too) plus ``max_tokens``."""
        meter = meter or current_meter()
        if self.free:  # it costs nothing whatever its prompt: only the budget's state is checked
            prompt = 0
        else:
            tools, schema = request.get("tools"), request.get("schema")
            extra = json.dumps([tools, schema], default=str) if tools or schema else ""
            prompt = max_prompt_tokens(messages_text(messages) + extra, len(messages))
        return meter.cost_manager.reserve(self.model, prompt, max_tokens, role=meter.role, free=self.free)

    def _record(
        self, messages: Messages, usage: Usage, text: str, reservation: Reservation | None = None,
        meter: Meter | None = None,
    ) -> float:
        if not usage.prompt_tokens and not usage.completion_tokens:
            usage = Usage(estimate_tokens(messages_text(messages)), estimate_tokens(text), estimated=True)
        meter = meter or current_meter()
        if reservation is not None:
            return meter.cost_manager.settle(reservation, usage.prompt_tokens, usage.completion_tokens)
        return meter.cost_manager.record(
            self.model, usage.prompt_tokens, usage.completion_tokens, role=meter.role, free=self.free
        )

    def _attempt_failed(
        self, exc: BaseException, *, messages: Messages | None = None, partial: str = "",
        full: FullRequest | None = None, **logged: Any,
    ) -> None:
        """Count one failed attempt in usage and the run log (every attempt is metered, also a retried one).

        A partial answer (a stream cut off) was paid for: its prompt and text are charged by estimate.
        """
        meter = current_meter()
        prompt = estimate_tokens(messages_text(messages)) if partial and messages else 0
        meter.cost_manager.record_failure(
            self.model, prompt, estimate_tokens(partial), role=meter.role, free=self.free
        )
        if meter.run_log is not None and not meter.run_log.idle:
            meter.run_log.record_call(meter.role or "", {
                "action": current_action(), "model": self.model, **logged,
                "error": f"{type(exc).__name__}: {error_text(exc)}",
            }, full)

    def _effective(self, settings: LLMSettings, default_max_tokens: int | None = None) -> LLMSettings:
        """``settings`` with a finite ``max_tokens`` (the provider's default when none is asked)."""
        if settings.max_tokens:
            return settings
        # a default (not asked for) leaves at least half the window to the prompt
        limit = min(default_max_tokens or self.default_max_tokens, max(1, self.context_window // 2))
        if settings is self.settings:  # the common case, every call: made once
            cached = self.__dict__.get("_effective_default")
            if cached is None or cached[0] is not settings or cached[1] != limit:
                cached = (settings, limit, settings.merged({"max_tokens": limit}))
                self.__dict__["_effective_default"] = cached
            return cached[2]
        return settings.merged({"max_tokens": limit})

    async def _metered(
        self,
        kind: str,
        messages: Messages,
        call: Callable[[], Awaitable[R]],
        *,
        result_type: type[Completion] | type[Embeddings] | None = None,
        max_tokens: int | None = None,
        **request: Any,
    ) -> R:
        """Every model call goes through here: answered from the run log when the log holds it
        (a resumed or replayed run: nothing reaches the model, nothing is paid twice), else
        its worst case (prompt plus ``max_tokens``) reserved against the budget, made,
        metered, and logged before its answer is used. A failed attempt is counted too.

        ``result_type`` (:class:`Completion` or :class:`Embeddings`) reads a logged answer back.
        """
        meter = current_meter()
        log = meter.run_log
        if log is not None and log.idle:  # nothing would read the call's record
            log = None
        role = meter.role or ""
        action = current_action() if log is not None else ""  # the action's name is for the log
        fp, summary = describe_request(kind, messages, **request) if log is not None else ("", {})
        if log is not None:
            recorded = log.answer(role, action, fp, summary)
            if recorded is not None:
                result = cast(R, (result_type or Completion).from_json(recorded[0]))
                if recorded[1]:  # the run's totals span restarts (an answer reused from another run is free)
                    self._record(messages, result.usage, result.text)
                return result
        if self.reaches_a_model and not model_requests_allowed():  # before anything reaches the model
            raise ModelRequestsBlocked(repr(self))
        reserved = self.default_max_tokens if max_tokens is None else max_tokens
        if kind != "embed":  # nothing leaves the process when it cannot fit
            await self._check_window(messages, reserved, request, role)
        costs = meter.cost_manager
        # until the model is known to stop at max_tokens (nothing to wait for when free or without a budget)
        alone = None if self.free or costs.max_budget is None else await costs.admit(self.model, free=self.free)
        try:
            reservation = self._reserve(messages, reserved, request, meter)
            started = time.monotonic()
            try:
                result = await call()
            except BaseException as exc:
                costs.release(reservation)
                if isinstance(exc, Exception):  # counted, and logged as a failed call
                    self._attempt_failed(exc, messages=messages, partial=getattr(exc, "partial", ""),
                                         full=(messages, request, max_tokens) if log is not None else None,
                                         fingerprint=fp, request=summary, latency=time.monotonic() - started)
                if isinstance(exc, ContextOverflow):  # the provider's own "context exceeded": name the call
                    raise exc.located(role, current_action()) from exc
                raise
            cost = self._record(messages, result.usage, result.text, reservation, meter)
        finally:
            if alone is not None:
                costs.dismiss(alone)
        if log is not None:  # durable before the answer is used
            logged: LLMCallData = {
                "action": action, "model": self.model, "fingerprint": fp, "request": summary,
                "response": cast(ResponseData, result.to_json()), "cost": cost, "latency": time.monotonic() - started,
            }
            if self.gen_ai_system:
                logged["system"] = self.gen_ai_system
            written = log.log_call(role, cast(dict[str, Any], logged), (messages, request, max_tokens))
            if written is not None:  # (a store without a journal: the write this turn's calls share)
                await written
        return result

    async def _metered_embed(self, texts: list[str], purpose: EmbedPurpose) -> Embeddings:
        """:meth:`_metered` for embeddings: an embedding's cost is its input (nothing is generated)."""
        messages: Messages = [{"role": "user", "content": t} for t in texts]  # for fingerprints and estimates
        return await self._metered(
            "embed", messages, lambda: self._embed(texts, purpose=purpose), result_type=Embeddings, max_tokens=0,
            purpose=purpose,
        )

    @property
    def _streams(self) -> bool:
        """Whether this provider really streams (overrides ``_stream``)."""
        return type(self)._stream is not BaseLLM._stream

    async def _complete_streaming(
        self, messages: Messages, stop: list[str] | None, settings: LLMSettings, sink: Callable[[str], None]
    ) -> Completion:
        """One call made by streaming, each chunk passed to ``sink``: the same Completion as ``_complete``."""
        parts: list[str] = []
        usage = Usage()
        async for chunk in self._stream(messages, stop=stop, settings=settings):
            if isinstance(chunk, Usage):
                usage = chunk
            elif chunk:
                parts.append(chunk)
                sink(chunk)
        return Completion(text=truncate_at_stop("".join(parts), stop), usage=usage, model=self.model)

    # --------------------------------------------------------------- public API
    async def embed(self, texts: Sequence[str], *, purpose: EmbedPurpose = "document") -> list[list[float]]:
        """One vector per text, in order: a metered call like any other (budget, usage, run log).

        ``purpose="query"`` marks search queries for models that embed them differently
        from documents (E5, nomic …); the others embed both alike.
        """
        if isinstance(texts, str):
            raise UsageError("embed() takes a list of texts, not one string")
        items = list(texts)
        bad = [type(t).__name__ for t in items if not isinstance(t, str)]
        if bad:
            raise UsageError(f"embed() takes texts (str), not {', '.join(sorted(set(bad)))}")
        if purpose not in ("document", "query"):
            raise UsageError(f"embed(purpose=...) must be 'document' or 'query', not {purpose!r}")
        if not self.supports_embeddings:
            raise UsageError(f"{self!r} cannot embed text: use an embedding model (rolecast.llm.embedders)")
        if not items:
            return []
        result = await self._metered_embed(items, purpose)
        if len(result.vectors) != len(items):
            raise LLMAPIError(f"{self!r} returned {len(result.vectors)} vectors for {len(items)} texts")
        return result.vectors

    async def complete(
        self,
        messages: Messages,
        *,
        stop: Sequence[str] | None = None,
        settings: LLMSettings | dict[str, Any] | None = None,
        structured: StructuredRequest | None = None,
        tools: list[dict[str, Any]] | None = None,
        grammar: str | None = None,
    ) -> Completion:
        """One metered call returning the full :class:`Completion` (text, usage, tool calls).

        ``grammar`` (GBNF text, see :mod:`rolecast.llm.grammar`) constrains decoding on
        providers with ``supports_grammar``; the others ignore it, so the caller still
        parses the answer strictly.
        """
        if tools and not self.supports_tools:
            raise UsageError(f"{self!r} does not support native tool calls")
        if grammar is not None and structured is not None:
            raise UsageError("give either a grammar or a structured-output schema, not both")
        # a reader watches the tokens (the live console): stream a plain-text call, same answer
        sink = _token_sink() if structured is None and grammar is None and not tools and self._streams else None
        stops = list(stop) if stop else None
        merged = self.settings if settings is None else self.settings.merged(settings)
        effective = merged if merged.max_tokens else self._effective(merged)
        room = await self._answer_room(messages, effective.max_tokens or 0, tools,
                                       structured.schema if structured else None)
        if effective.max_tokens and room < effective.max_tokens:  # what the window leaves of the answer's room
            effective = effective.merged(LLMSettings(max_tokens=room))
        # only a provider that declares the capability gets the keyword
        extra: dict[str, Any] = {"grammar": grammar} if grammar and self.supports_grammar else {}
        return await self._metered(
            "complete", messages,
            lambda: self._complete_streaming(messages, stops, effective, sink) if sink is not None
            else self._complete(messages, stop=stops, settings=effective, structured=structured, tools=tools, **extra),
            max_tokens=effective.max_tokens, stop=stops, settings=merged,
            schema=structured.schema if structured else None, tools=tools, grammar=grammar,
        )

    async def ask(
        self,
        prompt: str | Sequence[dict[str, Any]],
        system_msgs: Sequence[str] | None = None,
        *,
        stop: Sequence[str] | None = None,
        settings: LLMSettings | dict[str, Any] | None = None,
        grammar: str | None = None,
    ) -> str:
        """Ask and return the answer's text (``grammar``: see :meth:`complete`)."""
        completion = await self.complete(
            to_messages(prompt, system_msgs), stop=stop, settings=settings, grammar=grammar
        )
        return completion.text

    async def stream(
        self,
        prompt: str | Sequence[dict[str, Any]],
        system_msgs: Sequence[str] | None = None,
        *,
        stop: Sequence[str] | None = None,
        settings: LLMSettings | dict[str, Any] | None = None,
    ) -> AsyncIterator[str]:
        """Yield the answer in chunks as the model writes it; usage is recorded at the end."""
        messages = to_messages(prompt, system_msgs)
        sink = _token_sink()
        stops = list(stop) if stop else None
        merged = self.settings.merged(settings)
        effective = self._effective(merged)
        chunks: asyncio.Queue[str | None] = asyncio.Queue()

        async def call() -> Completion:
            parts: list[str] = []
            usage = Usage()
            try:
                async for chunk in self._stream(messages, stop=stops, settings=effective):
                    if isinstance(chunk, Usage):
                        usage = chunk
                    elif chunk:
                        parts.append(chunk)
                        chunks.put_nowait(chunk)
                        if sink is not None:
                            sink(chunk)
            except LLMError as exc:
                exc.partial = "".join(parts)  # what was streamed (and paid for) before it broke
                raise
            return Completion(text="".join(parts), usage=usage, model=self.model)

        # the same metered path as every call; chunks are passed on as they come
        task = asyncio.ensure_future(self._metered(
            "complete", messages, call, max_tokens=effective.max_tokens, stop=stops, settings=merged
        ))
        task.add_done_callback(lambda _: chunks.put_nowait(None))
        streamed = False
        try:
            while (chunk := await chunks.get()) is not None:
                streamed = True
                yield chunk
            completion = await task
        finally:
            if not task.done():
                task.cancel()
        if not streamed and completion.text:
            yield completion.text  # answered from the run log: the whole answer at once

    async def choose(
        self,
        prompt: str | Sequence[dict[str, Any]],
        n_options: int,
        system_msgs: Sequence[str] | None = None,
        *,
        settings: LLMSettings | dict[str, Any] | None = None,
    ) -> int:
        """Pick one of ``n_options`` states: an int in ``-1 … n_options-1``.

        Providers that constrain decoding only ever return valid answers; for the
        others the answer is parsed strictly and anything else raises
        :class:`~rolecast.errors.InvalidChoice` (with the raw text).
        """
        if n_options < 1:
            raise UsageError("choose() needs at least one option")
        messages = to_messages(prompt, system_msgs)
        merged = self.settings.merged(settings)
        effective = self._effective(merged, self.choice_max_tokens)
        completion = await self._metered(
            "choose", messages, lambda: self._choose_text(messages, n_options, effective),
            max_tokens=effective.max_tokens, n_options=n_options, settings=merged,
        )
        return parse_choice(completion.text, n_options)

    async def ask_valid(
        self,
        prompt: str | Sequence[dict[str, Any]],
        parse: Callable[[str], T],
        system_msgs: Sequence[str] | None = None,
        *,
        tries: int = 3,
        fix: str = DEFAULT_FIX,
        stop: Sequence[str] | None = None,
        settings: LLMSettings | dict[str, Any] | None = None,
        structured: StructuredRequest | None = None,
        grammar: str | None = None,
    ) -> T:
        """Ask until ``parse(answer)`` accepts an answer: the one ask → parse → fix → re-ask loop.

        ``parse`` raises :class:`~rolecast.errors.OutputParseError`, a pydantic
        ``ValidationError`` or a ``ValueError`` for an answer it cannot use; that answer
        and ``fix.format(error=...)`` go back to the model, up to ``tries`` answers in
        all. Then :class:`~rolecast.errors.OutputParseError` carries the last answer
        (``raw``) and every attempt's error (``errors``). Each answer is a metered call;
        ``grammar`` constrains each on models that take one (see :meth:`complete`).
        """
        if tries < 1:
            raise UsageError("ask_valid() needs at least one try")
        asked = to_messages(prompt, system_msgs)
        messages = asked
        errors: list[str] = []
        raw = ""
        for attempt in range(1, tries + 1):
            completion = await self._reask(asked, messages, stop=stop, settings=settings, structured=structured,
                                           grammar=grammar)
            raw = completion.text
            try:
                return parse(raw)
            except (OutputParseError, ValidationError, ValueError) as exc:
                errors.append(str(exc))
                logger.debug("{}: answer {} of {} unusable: {}", self, attempt, tries, exc)
                messages = [
                    *messages,
                    {"role": "assistant", "content": raw},
                    {"role": "user", "content": fix.format(error=exc)},
                ]
        attempts = f"{tries} attempt{'s' if tries != 1 else ''}"
        raise OutputParseError(f"no usable answer after {attempts}: {errors[-1]}", raw=raw, errors=errors)

    async def _reask(self, asked: Messages, messages: Messages, **kwargs: Any) -> Completion:
        """Send ``messages`` (the prompt ``asked``, then the failed answers and the fixes). A prompt fitted to
        the window leaves room for one answer, not for the failed ones: a re-ask that does not fit
        (ContextOverflow, raised before anything is sent) keeps only the last failed answer and its fix,
        and then only the prompt (a fresh answer); a prompt that cannot fit alone still overflows."""
        candidates = [messages]
        if len(messages) > len(asked) + 2:
            candidates.append([*asked, *messages[-2:]])
        if len(messages) > len(asked):
            candidates.append(asked)
        for i, candidate in enumerate(candidates):
            try:
                return await self.complete(candidate, **kwargs)
            except ContextOverflow:
                if i == len(candidates) - 1:
                    raise
                logger.debug("{}: a re-ask with {} messages passes the window; asking with fewer", self,
                             len(candidate))
        raise AssertionError("unreachable")  # the loop returns or raises

    async def structured(
        self,
        prompt: str | Sequence[dict[str, Any]],
        output_type: type[M],
        system_msgs: Sequence[str] | None = None,
        *,
        retries: int = 2,
        validate: Callable[[M], None] | None = None,
        settings: LLMSettings | dict[str, Any] | None = None,
    ) -> M:
        """Ask for an instance of ``output_type`` (a pydantic model).

        The JSON schema goes to providers that can constrain decoding and into the
        prompt for all. A parse or validation error — including a ``ValueError`` from
        ``validate`` — is sent back to the model (:meth:`ask_valid`), up to ``retries``
        more times; then :class:`~rolecast.errors.OutputParseError` carries the last raw
        answer and every error.
        """
        schema = output_type.model_json_schema()
        messages = to_messages(prompt, system_msgs)
        note = "Answer with one JSON object that follows this JSON schema, and nothing else:\n" + json.dumps(
            schema, ensure_ascii=False
        )
        if messages and messages[-1]["role"] == "user":
            messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{note}"}
        else:
            messages.append({"role": "user", "content": note})

        def parse(raw: str) -> M:
            value = output_type.model_validate(_load_object(raw))
            if validate is not None:
                validate(value)
            return value

        try:
            return await self.ask_valid(
                messages, parse, tries=retries + 1, settings=settings,
                structured=StructuredRequest(schema=schema, name=output_type.__name__),
            )
        except OutputParseError as exc:
            raise OutputParseError(
                f"no valid {output_type.__name__} after {retries + 1} attempts: {exc.errors[-1]}",
                raw=exc.raw, errors=exc.errors,
            ) from exc


def _token_sink() -> Callable[[str], None] | None:
    """Where streamed chunks go when a reader of the running team's log wants tokens (else None)."""
    meter = current_meter()
    log = meter.run_log
    if log is None or not log.stream_tokens:
        return None
    role = meter.role or ""

    def sink(text: str) -> None:
        log.notify("llm_token", {"text": text}, role=role)

    return sink


def _load_object(text: str) -> Any:
    return extract_json(text, expect=dict)


__all__ = [
    "ALLOW_MODEL_REQUESTS_ENV",
    "DEFAULT_FIX",
    "BaseLLM",
    "Completion",
    "EmbedPurpose",
    "Embeddings",
    "LLMSettings",
    "Messages",
    "StructuredRequest",
    "ToolCall",
    "Usage",
    "choice_schema",
    "messages_text",
    "model_requests_allowed",
    "parse_choice",
    "pooled_vector",
    "set_model_requests_allowed",
    "to_messages",
    "truncate_at_stop",
]

"""The one interface every model call in rolecast goes through.

A provider implements :meth:`BaseLLM._complete` (and, when it can do better than the
defaults, ``_stream`` and ``_choose_text``). The public methods — :meth:`ask`,
:meth:`complete`, :meth:`stream`, :meth:`choose` and :meth:`structured` — live here
once, so budget checks, usage accounting, strict choice parsing and structured-output
re-asks are the same for every provider.

Messages are OpenAI chat dictionaries (``{"role": "user", "content": "..."}``).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from loguru import logger
from pydantic import BaseModel, ValidationError

from ..cost import estimate_tokens
from ..errors import InvalidChoice, OutputParseError, UsageError
from ..jsonutil import extract_json
from ..metering import current_meter
from ..runlog import current_action
from ..settings import LLMSettings as LLMSettings  # re-exported: the seam's settings type
from .recording import describe_request

Messages = list[dict[str, Any]]
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

#: what :meth:`BaseLLM.ask_valid` says to the model after an unusable answer
DEFAULT_FIX = "That answer is invalid: {error}\nAnswer again with corrected JSON only."


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class ToolCall:
    """A native (OpenAI-style) tool call; ``arguments`` is the model's JSON text."""

    id: str
    name: str
    arguments: str


@dataclass
class Completion:
    """One model answer: text, usage, and native tool calls if any were made."""

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """This answer as the run log keeps it."""
        return {
            "text": self.text,
            "model": self.model,
            "finish_reason": self.finish_reason,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "usage": {"prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens,
                      "estimated": self.usage.estimated},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Completion:
        """An answer read back from the run log."""
        usage = data.get("usage") or {}
        return cls(
            text=str(data.get("text") or ""),
            usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                        bool(usage.get("estimated"))),
            model=str(data.get("model") or ""),
            finish_reason=data.get("finish_reason"),
            tool_calls=[ToolCall(str(c["id"]), str(c["name"]), str(c["arguments"]))
                        for c in data.get("tool_calls") or []],
        )


@dataclass
class StructuredRequest:
    """What a provider needs to constrain output to JSON of a schema."""

    schema: dict[str, Any]
    name: str = "output"


def to_messages(prompt: str | Sequence[dict[str, Any]], system_msgs: Sequence[str] | None = None) -> Messages:
    """Turn a prompt (text or chat messages) plus optional system prompts into chat messages."""
    messages: Messages = [{"role": "system", "content": s} for s in (system_msgs or []) if s]
    if isinstance(prompt, str):
        messages.append({"role": "user", "content": prompt})
    else:
        messages.extend(dict(m) for m in prompt)
    return messages


def messages_text(messages: Messages) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def truncate_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """Cut ``text`` at the first stop sequence, as a server does."""
    if not stop:
        return text
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]


_CHOICE = re.compile(r"""^\s*[`'"]?\s*(-?\d+)\s*[`'"]?\s*\.?\s*$""")


def parse_choice(text: str, n_options: int) -> int:
    """Strictly parse a state-selection answer: one whole number in ``-1 … n_options-1``.

    "3", " 3.", "`10`" parse; "stage 1 or 2", "I choose 2" and "3.5" raise
    :class:`InvalidChoice`. Never "the first digit found" (MetaGPT's bug: "10" → 1).
    """
    match = _CHOICE.match(text)
    if not match:
        raise InvalidChoice(text, n_options)
    value = int(match.group(1))
    if not -1 <= value < n_options:
        raise InvalidChoice(text, n_options)
    return value


def choice_schema(n_options: int) -> dict[str, Any]:
    """JSON schema admitting exactly the valid choices, for providers with structured output."""
    return {
        "type": "object",
        "properties": {"choice": {"type": "integer", "enum": list(range(-1, n_options))}},
        "required": ["choice"],
        "additionalProperties": False,
    }


class BaseLLM(ABC):
    """Abstract model provider. Subclasses implement :meth:`_complete`.

    Class attributes describe capabilities: ``supports_json_schema`` (the provider
    can constrain output to a JSON schema), ``grammar_constrained`` (it decodes under
    a grammar, so constrained output is guaranteed), ``supports_tools`` (native tool
    calls), ``free`` (usage is counted but costs nothing, e.g. a local model),
    ``supports_grammar`` (it takes a GBNF grammar: ``complete(..., grammar=...)``; its
    ``_complete`` then accepts a ``grammar`` keyword — others never get one).
    """

    supports_json_schema: bool = False
    supports_tools: bool = False
    #: decodes under a GBNF grammar given to complete/ask (a grammar given to a model
    #: without it is ignored: callers parse strictly and re-ask, as for ``choose``)
    supports_grammar: bool = False
    #: decodes under a grammar built from the schema: the output *always* matches it, so
    #: callers may ask with tighter schemas than a prompt-following model could honour
    grammar_constrained: bool = False
    free: bool = False

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

    # ----------------------------------------------------------------- metering
    def _check_budget(self, messages: Messages) -> None:
        meter = current_meter()
        meter.cost_manager.check(self.model, estimate_tokens(messages_text(messages)), role=meter.role, free=self.free)

    def _record(self, messages: Messages, usage: Usage, text: str) -> float:
        if not usage.prompt_tokens and not usage.completion_tokens:
            usage = Usage(estimate_tokens(messages_text(messages)), estimate_tokens(text), estimated=True)
        meter = current_meter()
        return meter.cost_manager.record(
            self.model, usage.prompt_tokens, usage.completion_tokens, role=meter.role, free=self.free
        )

    async def _metered(
        self, kind: str, messages: Messages, call: Callable[[], Awaitable[Completion]], **request: Any
    ) -> Completion:
        """Every model call goes through here: answered from the run log when the log holds it
        (a resumed or replayed run: nothing reaches the model, nothing is paid twice), else
        checked against the budget, made, metered, and logged before its answer is used."""
        meter = current_meter()
        log = meter.run_log
        role, action = meter.role or "", current_action()
        fp, summary = describe_request(kind, messages, **request) if log is not None else ("", {})
        if log is not None:
            recorded = log.lookup(role, action, fp, summary)
            if recorded is not None:
                completion = Completion.from_json(recorded)
                self._record(messages, completion.usage, completion.text)  # the run's totals span restarts
                return completion
        self._check_budget(messages)
        started = time.monotonic()
        try:
            completion = await call()
        except Exception as exc:
            if log is not None:
                log.record_call(role, {"action": action, "model": self.model, "fingerprint": fp, "request": summary,
                                       "error": f"{type(exc).__name__}: {exc}", "latency": time.monotonic() - started})
            raise
        cost = self._record(messages, completion.usage, completion.text)
        if log is not None:
            log.record_call(role, {
                "action": action, "model": self.model, "fingerprint": fp, "request": summary,
                "response": completion.to_json(), "cost": cost, "latency": time.monotonic() - started,
            })
        return completion

    # --------------------------------------------------------------- public API
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
        stops = list(stop) if stop else None
        merged = self.settings.merged(settings)
        # only a provider that declares the capability gets the keyword
        extra: dict[str, Any] = {"grammar": grammar} if grammar and self.supports_grammar else {}
        return await self._metered(
            "complete", messages,
            lambda: self._complete(messages, stop=stops, settings=merged, structured=structured, tools=tools, **extra),
            stop=stops, settings=merged.model_dump(exclude_none=True),
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
        stops = list(stop) if stop else None
        merged = self.settings.merged(settings)
        chunks: asyncio.Queue[str | None] = asyncio.Queue()

        async def call() -> Completion:
            parts: list[str] = []
            usage = Usage()
            async for chunk in self._stream(messages, stop=stops, settings=merged):
                if isinstance(chunk, Usage):
                    usage = chunk
                elif chunk:
                    parts.append(chunk)
                    chunks.put_nowait(chunk)
            return Completion(text="".join(parts), usage=usage, model=self.model)

        # the same metered path as every call; chunks are passed on as they come
        task = asyncio.ensure_future(self._metered(
            "complete", messages, call, stop=stops, settings=merged.model_dump(exclude_none=True)
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
        completion = await self._metered(
            "choose", messages, lambda: self._choose_text(messages, n_options, merged),
            n_options=n_options, settings=merged.model_dump(exclude_none=True),
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
        messages = to_messages(prompt, system_msgs)
        errors: list[str] = []
        raw = ""
        for attempt in range(1, tries + 1):
            completion = await self.complete(
                messages, stop=stop, settings=settings, structured=structured, grammar=grammar
            )
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


def _load_object(text: str) -> Any:
    return extract_json(text, expect=dict)

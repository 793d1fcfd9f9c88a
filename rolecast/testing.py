"""Test doubles for models, shipped so that users can test their own roles and actions.

* :class:`ScriptedLLM` answers from a list, in order, and fails loudly when called
  too often (:class:`~rolecast.errors.ScriptExhausted`) or too rarely
  (:meth:`ScriptedLLM.assert_complete`).
* :class:`FunctionLLM` answers with ``fn(messages)`` (OpenAI chat format), sync or async.

Both honour stop sequences and ``max_tokens`` like a real server (the answer is cut at
the first stop, or at ``max_tokens`` by the estimate), count usage by a character
estimate, and record every call in ``calls``. A scripted :class:`~rolecast.llm.Completion`
keeps the usage it was given, so a test can script an answer that overruns its reservation. Pass either
as ``Team(llm=...)``, ``Role(llm=...)`` or ``Action(llm=...)``.

Both also embed, deterministically and without using a scripted reply: words hashed
into ``embed_dim`` dimensions (:func:`~rolecast.llm.embedders.hashed_vector`), so texts
sharing words are near; each embed call is recorded with ``kind="embed"``.

:func:`allow_model_requests` (False) — or ``ROLECAST_ALLOW_MODEL_REQUESTS=0`` in the environment —
makes every request to a real model (an OpenAI-compatible server, the embedded local model, a
model-backed embedder) raise :class:`~rolecast.errors.ModelRequestsBlocked` before it reaches the
model, so a test cannot call one by accident; these doubles are unaffected.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, cast

from .accounting.cost import estimate_tokens, max_prompt_tokens
from .accounting.metering import current_meter
from .errors import ScriptExhausted, UsageError
from .llm.base import (
    BaseLLM,
    Completion,
    Embeddings,
    EmbedPurpose,
    LLMSettings,
    Messages,
    R,
    StructuredRequest,
    Usage,
    messages_text,
    set_model_requests_allowed,
    truncate_at_stop,
)
from .llm.embedders import hashed_vector
from .llm.recording import describe_request
from .runs.log import RunLog, current_action
from .runs.store import RunStore, open_store

Reply = "str | Completion | BaseException | Callable[[Messages], str | Completion]"


def ordinal(n: int) -> str:
    """``1`` → ``"1st"``, ``2`` → ``"2nd"``, ``11`` → ``"11th"``, ``23`` → ``"23rd"``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass
class Call:
    """One recorded call to a test double."""

    messages: Messages
    stop: list[str] | None
    settings: LLMSettings
    structured: StructuredRequest | None = None
    tools: list[dict[str, Any]] | None = None
    kind: str = "complete"
    extra: dict[str, Any] = field(default_factory=dict)
    grammar: str | None = None

    @property
    def prompt(self) -> str:
        """The text of the last message (usually the prompt that was asked)."""
        return str(self.messages[-1].get("content") or "") if self.messages else ""


#: the window of a test double given none: larger than any prompt a test builds
NO_WINDOW = 1 << 40


class _DoubleBase(BaseLLM):
    reaches_a_model = False  # scripted: unaffected by ROLECAST_ALLOW_MODEL_REQUESTS=0
    supports_json_schema = True
    supports_tools = True
    supports_embeddings = True
    #: dimensions of the deterministic embeddings
    embed_dim: int = 256
    # takes a grammar and records it (``call.grammar``); the scripted replies are not checked against it
    supports_grammar = True

    def __init__(
        self, model: str, *, delay: float = 0.0, settings: LLMSettings | None = None, keep_calls: bool = True,
        context_window: int | None = None,
    ):
        super().__init__(model, settings)
        self.context_window = context_window  # None: no window (a test gives one to test fitting)
        # a double with no real model name costs nothing; name a priced model to test budgets
        self.free = model in ("scripted", "function")
        self.delay = delay
        #: False: answer without keeping each call in ``calls`` (a simulation of a million agents
        #: would keep every prompt it was asked)
        self.keep_calls = keep_calls
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # shipped to another process (a Ray worker): everything but the lock
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _finish(
        self, reply: str | Completion, messages: Messages, stop: list[str] | None, max_tokens: int | None = None
    ) -> Completion:
        if type(reply) is str:  # the usual reply: the Completion made once, with its usage
            text = truncate_at_stop(reply, stop) if stop else reply
            finish_reason = None
            tokens = estimate_tokens(text)
            if max_tokens and tokens > max_tokens:  # cut at max_tokens, as below
                text = text[: max_tokens * 4]
                finish_reason = "length"
                tokens = estimate_tokens(text)
            usage = Usage(estimate_tokens(messages_text(messages)), tokens, estimated=True)
            return Completion(text, usage, self.model, finish_reason)
        if isinstance(reply, Completion):
            completion = reply
            completion.text = truncate_at_stop(completion.text, stop)
        else:
            completion = Completion(text=truncate_at_stop(str(reply), stop))
        if max_tokens and estimate_tokens(completion.text) > max_tokens:
            # like a server: the answer ends at max_tokens (by the same estimate its usage is counted with)
            completion.text = completion.text[: max_tokens * 4]
            completion.finish_reason = "length"
        if not completion.usage.prompt_tokens and not completion.usage.completion_tokens:
            completion.usage = Usage(
                estimate_tokens(messages_text(messages)), estimate_tokens(completion.text), estimated=True
            )
        completion.model = completion.model or self.model
        return completion

    async def _choose_text(self, messages: Messages, n_options: int, settings: LLMSettings) -> Completion:
        return await self._answer(messages, None, settings, None, None, kind="choose", n_options=n_options)

    async def _embed(self, texts: list[str], *, purpose: EmbedPurpose) -> Embeddings:
        messages: Messages = [{"role": "user", "content": t} for t in texts]
        with self._lock:
            self.calls.append(Call(messages, None, self.settings, kind="embed", extra={"purpose": purpose}))
        if self.delay:
            await asyncio.sleep(self.delay)
        usage = Usage(sum(estimate_tokens(t) for t in texts), 0, estimated=True)
        return Embeddings([hashed_vector(t, self.embed_dim) for t in texts], usage, model=self.model)

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
        return await self._answer(messages, stop, settings, structured, tools, grammar=grammar)

    async def _answer(
        self,
        messages: Messages,
        stop: list[str] | None,
        settings: LLMSettings,
        structured: StructuredRequest | None,
        tools: list[dict[str, Any]] | None,
        kind: str = "complete",
        grammar: str | None = None,
        **extra: Any,
    ) -> Completion:
        call = Call(list(map(dict, messages)), stop, settings, structured, tools, kind, extra, grammar)
        if self.keep_calls:
            with self._lock:
                self.calls.append(call)
        if self.delay:
            await asyncio.sleep(self.delay)
        reply = await self._reply(call)
        return self._finish(reply, messages, stop, settings.max_tokens)

    def _default_context_window(self) -> int:
        """A double without ``context_window=`` is not a model: it has no window to overflow."""
        return NO_WINDOW

    def token_bound(self, text: str, messages: int = 0) -> int:
        """The double's own tokenizer, deterministic: three ASCII characters a token, two tokens for any
        other character, a few per chat message (a tokenizer's counts, not the byte bound a model without
        one is fitted by: see :func:`rolecast.llm.window.token_upper_bound`)."""
        return max_prompt_tokens(text, messages)

    async def _reply(self, call: Call) -> str | Completion:  # pragma: no cover - abstract
        raise NotImplementedError


class ScriptedLLM(_DoubleBase):
    """Answers with ``replies`` in order.

    A reply may be a string, a :class:`~rolecast.llm.Completion` (to script tool calls
    or usage), an exception instance (raised, to script failures) or a callable taking
    the messages. Calling more often than scripted raises :class:`ScriptExhausted`.
    """

    def __init__(
        self, replies: Iterable[Any], *, model: str = "scripted", delay: float = 0.0, context_window: int | None = None,
    ):
        super().__init__(model, delay=delay, context_window=context_window)
        self._replies = list(replies)
        self._next = 0

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._next

    async def _reply(self, call: Call) -> str | Completion:
        with self._lock:
            if self._next >= len(self._replies):
                raise ScriptExhausted(
                    f"ScriptedLLM has {len(self._replies)} replies but was called a "
                    f"{ordinal(len(self.calls))} time; last prompt: {call.prompt[-300:]!r}"
                )
            reply = self._replies[self._next]
            self._next += 1
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(call.messages)
            if inspect.isawaitable(reply):
                reply = await reply
        if not isinstance(reply, (str, Completion)):
            raise UsageError(f"a scripted reply must be text or a Completion, not {type(reply).__name__}")
        return reply

    def assert_complete(self) -> None:
        """Fail if some scripted replies were never used."""
        if self.remaining:
            unused = self._replies[self._next :]
            raise AssertionError(f"ScriptedLLM: {self.remaining} scripted replies unused: {unused!r}")


class FunctionLLM(_DoubleBase):
    """Answers with ``fn(messages)``; ``fn`` may be async and may return a Completion.

    If ``fn`` takes a second parameter it also gets the :class:`Call` (stop sequences,
    settings, the requested schema or tools, and ``kind`` — ``"choose"`` for
    state-selection).
    """

    def __init__(
        self,
        fn: Callable[..., str | Completion | Awaitable[str | Completion]],
        *,
        model: str = "function",
        delay: float = 0.0,
        keep_calls: bool = True,
        context_window: int | None = None,
    ):
        super().__init__(model, delay=delay, keep_calls=keep_calls, context_window=context_window)
        self.fn = fn
        try:
            params = inspect.signature(fn).parameters
            self._wants_call = len(params) >= 2
        except (TypeError, ValueError):
            self._wants_call = False

    async def _reply(self, call: Call) -> str | Completion:
        result = self.fn(call.messages, call) if self._wants_call else self.fn(call.messages)
        if type(result) is not str and inspect.isawaitable(result):
            result = await result
        return result




class ReplayLLM(BaseLLM):
    """A model that answers from a recorded run, and never from a model (cassettes for your tests).

    ::

        team = Team(llm=ReplayLLM.from_store(".rolecast/runs.db", run_id), store=None)
        history = await team.run(n_round=5, idea="the same idea")

    Each call is matched, per role, by a fingerprint of its request to the calls the
    run recorded (concurrent roles may interleave differently). A call the run never
    made raises :class:`~rolecast.errors.ReplayMissing`; a role asking something else
    than it did at that point raises :class:`~rolecast.errors.ReplayMismatch`.
    """

    reaches_a_model = False  # answers from a run log
    supports_json_schema = True
    supports_tools = True
    supports_embeddings = True

    def __init__(self, log: RunLog, *, model: str = "replay"):
        super().__init__(model)
        self.free = True
        self.log = log

    @classmethod
    def from_store(cls, store: str | os.PathLike[str] | RunStore, run_id: str) -> ReplayLLM:
        """Replay run ``run_id`` of a store (a SQLite path or a RunStore)."""
        opened = open_store(store)
        assert opened is not None
        log = RunLog(opened, run_id, mode="replay")
        if log.is_new:
            raise UsageError(f"the store {store} has no run {run_id!r}")
        return cls(log)

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
        """The recorded answer to this call (every call, chat or embeddings, comes here)."""
        fp, summary = describe_request(kind, messages, **request)
        recorded = self.log.lookup(current_meter().role or "", current_action(), fp, summary)
        assert recorded is not None  # replay mode raises instead of returning None
        result = cast(R, (result_type or Completion).from_json(recorded))
        self._record(messages, result.usage, result.text)
        return result

    async def _complete(self, messages: Messages, **kwargs: Any) -> Completion:  # pragma: no cover
        raise UsageError("ReplayLLM answers only through the metered path")


class allow_model_requests:  # lower case: called like a function (pydantic-ai's override_allow_model_requests)
    """Allow (True) or block (False) requests to real models in this process, from now on; used as a
    context manager, the previous setting comes back at its end::

        allow_model_requests(False)          # this test session: no real model can be asked
        with allow_model_requests(True):     # this block may (a test that starts its own server)
            ...

    A blocked request raises :class:`~rolecast.errors.ModelRequestsBlocked` before it reaches the
    model. The setting overrides ``ROLECAST_ALLOW_MODEL_REQUESTS`` (``allow_model_requests(None)``:
    the environment variable decides again)."""

    def __init__(self, allowed: bool | None = True) -> None:
        self._previous = set_model_requests_allowed(allowed)

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        set_model_requests_allowed(self._previous)


__all__ = ["Call", "FunctionLLM", "ReplayLLM", "ScriptedLLM", "allow_model_requests"]

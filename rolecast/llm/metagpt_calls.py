"""MetaGPT's names for model calls — ``aask``, ``aask_batch``, ``acompletion``, ``acompletion_text``
and the synchronous ``completion`` — on rolecast's seam, so that custom ``_think``/``_act`` code ports unchanged.

They are thin spellings of :meth:`~rolecast.llm.base.BaseLLM.ask`, ``stream`` and
``complete``: every call goes through the same metered path (budget, usage, run log).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

from ..errors import UsageError

if TYPE_CHECKING:
    from .base import BaseLLM, Completion

Messages = list[dict[str, Any]]


def _messages(msg: str | Sequence[Any], system_msgs: Sequence[str] | None, format_msgs: Sequence[dict[str, Any]] | None
              ) -> Messages:
    messages: Messages = [{"role": "system", "content": s} for s in (system_msgs or []) if s]
    messages.extend(dict(m) for m in format_msgs or [])
    if isinstance(msg, str):
        messages.append({"role": "user", "content": msg})
    else:
        for item in msg:
            messages.append(dict(item) if isinstance(item, dict) else {"role": "user", "content": str(item)})
    return messages


def _settings(timeout: float | None) -> dict[str, Any] | None:
    return {"timeout": timeout} if timeout is not None else None


def _seam(obj: object) -> BaseLLM:
    return cast("BaseLLM", obj)  # the mixin only ever lives in BaseLLM


class MetaGPTCalls:
    """Mixed into :class:`~rolecast.llm.base.BaseLLM`: MetaGPT's call names."""

    async def aask(
        self,
        msg: str | Sequence[Any],
        system_msgs: Sequence[str] | None = None,
        format_msgs: Sequence[dict[str, Any]] | None = None,
        images: Any = None,
        timeout: float | None = None,
        stream: bool = False,
    ) -> str:
        """MetaGPT's ``aask``: the answer's text (streamed from the model when ``stream``)."""
        if images:
            raise UsageError("aask(images=...) is not supported: rolecast's seam sends text")
        messages = _messages(msg, system_msgs, format_msgs)
        if stream:
            return "".join([chunk async for chunk in _seam(self).stream(messages, settings=_settings(timeout))])
        return await _seam(self).ask(messages, settings=_settings(timeout))

    async def aask_batch(self, msgs: Sequence[str], timeout: float | None = None) -> str:
        """MetaGPT's ``aask_batch``: ask each message in turn, the earlier answers as context."""
        context: Messages = []
        answers = []
        for msg in msgs:
            context.append({"role": "user", "content": msg})
            answer = await _seam(self).ask(list(context), settings=_settings(timeout))
            context.append({"role": "assistant", "content": answer})
            answers.append(answer)
        return "\n".join(answers)

    async def acompletion(self, messages: Messages, timeout: float | None = None) -> Completion:
        """MetaGPT's ``acompletion``: one call on chat messages, the full :class:`Completion` back."""
        return await _seam(self).complete(list(messages), settings=_settings(timeout))

    async def acompletion_text(
        self, messages: Messages, stream: bool = False, timeout: float | None = None
    ) -> str:
        """MetaGPT's ``acompletion_text``: the text of one call on chat messages."""
        if stream:
            chunks: AsyncIterator[str] = _seam(self).stream(list(messages), settings=_settings(timeout))
            return "".join([chunk async for chunk in chunks])
        return (await _seam(self).complete(list(messages), settings=_settings(timeout))).text

    def completion(self, messages: Messages, timeout: float | None = None) -> Completion:
        """MetaGPT's synchronous ``completion`` (its providers that had one): one call on chat
        messages, the full :class:`Completion` back. Called inside a running event loop (an async
        script), it blocks that loop for the call, which runs on a worker thread in its own loop;
        either way it is charged where the caller's calls are."""
        call = contextvars.copy_context().run  # the worker runs in the caller's scope (budget, role)

        def run() -> Completion:
            return asyncio.run(self.acompletion(messages, timeout=timeout))

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return call(run)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rolecast-completion") as pool:
            return pool.submit(call, run).result()


__all__ = ["MetaGPTCalls"]

"""HumanProvider: a person answers where a model would (MetaGPT's ``HumanProvider``).

``Role(is_human=True)`` gives every action of the role this "model", so a person plays
the role: each prompt is shown and the person's answer is the action's result. The
answer comes from standard input, or from a callable given in code (a UI, a test)::

    reviewer = SimpleReviewer(is_human=True)                       # reads stdin
    reviewer = SimpleReviewer(llm=HumanProvider(lambda prompt: "LGTM"))

It is a :class:`~rolecast.llm.base.BaseLLM` like any provider, so every call passes the
seam (usage is counted, at no cost); it never calls a model. Answering ``exit`` or
``quit`` — or closing the input — ends the run with
:class:`~rolecast.errors.HumanStopped`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import HumanStopped
from .base import BaseLLM, Completion, LLMSettings, Messages, StructuredRequest

Answer = Callable[[str], "str | Awaitable[str]"]
STOP_WORDS = frozenset({"exit", "quit"})
TURN_NOTE = "It's your turn: type your answer (exit or quit to stop). The request:\n"


class HumanProvider(BaseLLM):
    """Answers with what a person types (``answer=None``: standard input) or with ``answer(prompt)``."""

    free = True
    reaches_a_model = False  # a person answers

    def __init__(self, answer: Answer | None = None, *, model: str = "human", settings: LLMSettings | None = None):
        super().__init__(model, settings)
        self.answer = answer

    async def _complete(
        self,
        messages: Messages,
        *,
        stop: list[str] | None,
        settings: LLMSettings,
        structured: StructuredRequest | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> Completion:
        prompt = str(messages[-1].get("content") or "") if messages else ""
        if self.answer is not None:
            reply = self.answer(prompt)
            text = await reply if inspect.isawaitable(reply) else reply
        else:
            try:
                # in a thread: a person typing must not stop the other roles' turns
                text = await asyncio.to_thread(input, f"{TURN_NOTE}{prompt}\n> ")
            except EOFError:
                raise HumanStopped("the input ended while a person was to answer") from None
        text = str(text)
        if text.strip().lower() in STOP_WORDS:
            raise HumanStopped(f"the person answered {text.strip()!r}")
        return Completion(text=text, model=self.model, finish_reason="stop")


def from_config(config: Any, **kwargs: Any) -> HumanProvider:
    """MetaGPT's ``api_type: human``: a person answers on standard input."""
    return HumanProvider(settings=getattr(config, "settings", None), **kwargs)


__all__ = ["HumanProvider", "from_config"]

"""Running an action for its owner: the one path from an action's result to a remembered Message.

Every action a role runs — a react or by_order step (``Role._act``), a task of a
``plan_and_act`` plan, a tool loop of a :class:`~roles.ToolAgent` — goes through
:func:`perform`, which

1. calls the action (or the role's ``_act`` override),
2. types a failure: a foreign exception, or the model server failing (connection,
   timeout, rate limit, error status), becomes :class:`~rolecast.errors.ActionFailed`
   with the original as ``__cause__``; rolecast's other errors pass unchanged,
3. normalises the result to a :class:`~memory.Message` (:func:`to_message`), and
4. remembers it in the owner's memory, once (memory never stores a message twice).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from loguru import logger
from pydantic import BaseModel

from memory import Message, any_to_str
from memory.message import plain_message
from memory.views import memory_view
from rolecast.errors import (
    ActionFailed,
    ContextOverflow,
    LLMAPIError,
    LLMConnectionError,
    LLMRateLimitError,
    LLMTimeoutError,
    RolecastError,
)

from .action import Action
from .action_node import ActionNode, ActionOutput

#: how much of its memory budget a MetaGPT-style action keeps when run again after an overflow
TIGHTEN = 0.5

# failures of the model server, not of the model's answer: they surface as ActionFailed
# (role, action, the LLM error as cause); format errors and control flow keep their type
_TRANSPORT = (LLMConnectionError, LLMTimeoutError, LLMRateLimitError, LLMAPIError)


class Performer(Protocol):
    """What running an action needs of its owner (a :class:`~roles.Role` is one)."""

    name: str
    profile: str

    def remember(self, message: Message) -> None:
        """Keep ``message`` in the owner's memory."""


def to_message(result: Any, action: Action, owner: Performer) -> Message:
    """An action's result as the Message its owner publishes.

    A Message is completed (``cause_by``, ``sent_from``) and kept. A pydantic model
    becomes ``instruct_content``; its text is its own ``__str__`` when it defines one
    (an agent's answer), else its JSON, and a ``message_metadata`` property of the
    model goes into ``metadata``. An :class:`ActionOutput` or a filled :class:`ActionNode`
    gives its ``content`` and ``instruct_content``. Anything else is published as its text.
    """
    if type(result) is str:  # the usual result (the checks below, skipped)
        return plain_message(result, owner.profile, action, owner.name)
    if isinstance(result, Message):
        if "cause_by" not in result.model_fields_set:  # defaulted to the user's requirement
            result.cause_by = any_to_str(action)
        if not result.sent_from:
            result.sent_from = owner.name
        return result
    if isinstance(result, (ActionOutput, ActionNode)):
        return Message(
            content=result.content,
            instruct_content=result.instruct_content,
            role=owner.profile,
            cause_by=action,
            sent_from=owner.name,
        )
    if isinstance(result, BaseModel):
        custom_str = type(result).__str__ is not BaseModel.__str__
        metadata = getattr(result, "message_metadata", None)
        return Message(
            content=str(result) if custom_str else result.model_dump_json(),
            instruct_content=result,
            role=owner.profile,
            cause_by=action,
            sent_from=owner.name,
            metadata=dict(metadata) if isinstance(metadata, dict) else {},
        )
    # Message(content=..., role=owner.profile, cause_by=action, sent_from=owner.name), unvalidated when plain
    return plain_message("" if result is None else str(result), owner.profile, action, owner.name)


async def perform(
    owner: Performer,
    action: Action,
    history: Sequence[Message] = (),
    *,
    invoke: Callable[[], Awaitable[Any]] | None = None,
) -> Message:
    """Run ``action`` for ``owner`` on ``history`` (or call ``invoke()`` instead, e.g. a role's
    ``_act`` override); returns the result as a Message that is in the owner's memory."""
    log = action.context.run_log
    if log is not None and not log.idle:  # a passing event for live readers (the console): who works on what
        log.notify("thinking", {"action": action.name}, role=owner.name)
    fitter = getattr(owner, "memory_fitter", None) if invoke is not None else None
    try:
        if fitter is None:
            result = await (invoke() if invoke is not None else action.run(list(history)))
        else:
            result = await _invoke_fitted(owner, action, invoke, fitter)  # type: ignore[arg-type]
    except ContextOverflow as exc:  # not a failure of the server: the prompt must change (it names role and action)
        if getattr(owner, "memory_fitter", None) is not None and not exc.fitted:
            raise exc.after_fitting() from None  # the history was fitted: the advice must not be "compaction"
        raise
    except _TRANSPORT as exc:
        # the model could not be reached or answered: the action failed (the cause says why)
        logger.error("{}: action {} failed: {}", owner.name, action.name, exc)
        raise ActionFailed(owner.name, action.name, exc) from exc
    except RolecastError:
        raise
    except Exception as exc:
        logger.error("{}: action {} raised {}: {}", owner.name, action.name, type(exc).__name__, exc)
        raise ActionFailed(owner.name, action.name, exc) from exc
    message = to_message(result, action, owner)
    owner.remember(message)
    return message


async def _invoke_fitted(owner: Any, action: Action, invoke: Callable[[], Awaitable[Any]],
                         fitter: Callable[[Action, float], Any]) -> Any:
    """``invoke()`` (a role's own ``_act``, MetaGPT's way: it reads the role's memory itself) with the role's
    memory shown fitted to the window (:mod:`memory.views`); when the prompt it built still overflows (the
    check before sending), the fit is tightened and the action runs once more, rather than ending the run."""
    view = fitter(action, 1.0)
    try:
        with memory_view(owner.rc.memory, view), _news_view(owner, view):
            return await invoke()
    except ContextOverflow as exc:
        tighter = fitter(action, TIGHTEN)
        logger.info("{}: the prompt of {} overflowed the window ({}); fitting its memory tighter and running it "
                    "again", owner.name, action.name, exc)
        with memory_view(owner.rc.memory, tighter), _news_view(owner, tighter):
            try:
                return await invoke()
            except ContextOverflow as again:
                raise again.after_fitting() from None


@contextmanager
def _news_view(owner: Any, view: Any) -> Iterator[None]:
    """``rc.news`` (the turn's new messages, MetaGPT's ``self.rc.news[-1]``) as ``view.fit_news`` shows it
    while the action runs: the same messages, the longest cut to fit; as it was afterwards."""
    fit = getattr(view, "fit_news", None)
    news = owner.rc.news
    shown = fit(news) if fit is not None and news else news
    if shown is news:
        yield
        return
    owner.rc.news = shown
    try:
        yield
    finally:
        if owner.rc.news is shown:  # (an action that set news itself keeps what it set)
            owner.rc.news = news


__all__ = ["Performer", "perform", "to_message"]

"""A role's runtime state: its inbox (:class:`MessageQueue`) and :class:`RoleContext`."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

from loguru import logger
from pydantic import ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from actions import Action
from memory import Memory, Message
from rolecast.models import Model


class RoleReactMode(str, Enum):
    REACT = "react"
    BY_ORDER = "by_order"
    PLAN_AND_ACT = "plan_and_act"

    @classmethod
    def values(cls) -> list[str]:
        return [m.value for m in cls]


class MessageQueue:
    """A role's inbox, read at the start of its turn.

    The environment delivers a round's messages when the round ends (see
    :meth:`environment.Environment.publish_message`), so a message published during a
    round is read at the next one, whichever role the scheduler happened to run first.

    A listener (the environment's, see :meth:`set_listener`) is told whenever messages
    arrive, so the scheduler knows which roles have something to read without asking
    every role every round. A message the role cannot react to is only counted
    (:meth:`ignore`): the inbox is not empty, as in MetaGPT, until the next round drops
    it, and the role takes no turn for it.
    """

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._queue: deque[Message] = deque(messages)
        self._ignored = 0  # messages received that the role cannot react to (not kept)
        self._listener: Callable[[bool], None] | None = None
        #: every waiting message came through :meth:`push_screened` (the role's own check at
        #: delivery), so the turn that reads them need not check them again
        self.screened = not self._queue

    def __getstate__(self) -> dict[str, Any]:
        # the listener is the environment of this process: a copy shipped elsewhere gets its own
        state = dict(self.__dict__)
        state["_listener"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("screened", False)
        self.__dict__.update(state)

    def set_listener(self, listener: Callable[[bool], None] | None) -> None:
        """Call ``listener(True)`` when a push finds the inbox empty and after a requeue, and
        ``listener(False)`` for the first ignored message (None: nobody listens)."""
        self._listener = listener

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # a field of this type validates from, and dumps to, the list of waiting messages
        from_list = core_schema.no_info_after_validator_function(cls, handler.generate_schema(list[Message]))
        return core_schema.union_schema(
            [core_schema.is_instance_schema(cls), from_list],
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda queue: [m.model_dump(mode="json") for m in queue._queue]
            ),
        )

    def push(self, message: Message) -> None:
        queue = self._queue
        queue.append(message)
        self.screened = False
        if len(queue) == 1 and self._listener is not None:  # only news when the inbox was empty
            self._listener(True)

    def push_screened(self, message: Message) -> None:
        """:meth:`push` a message the role has checked it can react to (see :attr:`screened`)."""
        queue = self._queue
        queue.append(message)
        if len(queue) == 1 and self._listener is not None:
            self._listener(True)

    def ignore(self) -> None:
        """Count a message the role cannot react to (see :meth:`roles.Role.can_react`)."""
        self._ignored += 1
        if self._ignored == 1 and self._listener is not None:
            self._listener(False)

    def drop_ignored(self) -> None:
        """Forget the ignored messages (the scheduler does, at the next round)."""
        self._ignored = 0

    def pop(self) -> Message | None:
        """The oldest readable message, or None."""
        return self._queue.popleft() if self._queue else None

    def pop_all(self) -> list[Message]:
        """Every readable message, oldest first."""
        items = list(self._queue)
        self._queue.clear()
        self._ignored = 0
        self.screened = True
        return items

    async def dump(self) -> str:
        """The messages as a JSON list of :meth:`Message.dump` strings; nothing is removed."""
        return json.dumps([m.dump() for m in self._queue], ensure_ascii=False)

    @staticmethod
    def load(data: str) -> MessageQueue:
        """A queue of the messages :meth:`dump` wrote (empty, with a warning, if ``data`` is not JSON)."""
        queue = MessageQueue()
        try:
            items = json.loads(data)
        except json.JSONDecodeError as err:
            logger.warning("MessageQueue.load: not JSON ({}); an empty queue", err)
            return queue
        for item in items:
            message = Message.load(item) if isinstance(item, str) else Message.model_validate(item)
            if message is not None:
                queue.push(message)
        return queue

    def requeue(self, messages: list[Message]) -> None:
        """Put ``messages`` back at the front, in order (a failed turn's input, read again next time)."""
        self._queue.extendleft(reversed(messages))
        self.screened = False
        if messages and self._listener is not None:
            self._listener(True)

    def empty(self) -> bool:
        """Nothing received since the last read (ignored messages count until they are dropped)."""
        return not self._queue and not self._ignored

    def __len__(self) -> int:
        return len(self._queue)


class RoleContext(Model):
    """A role's runtime state: environment, inbox, memory, current state and todo, watch list."""

    model_config = ConfigDict(arbitrary_types_allowed=True, defer_build=True)

    env: Any = Field(default=None, exclude=True)
    msg_buffer: MessageQueue = Field(default_factory=MessageQueue)
    memory: Memory = Field(default_factory=Memory)
    state: int = -1
    todo: Action | None = Field(default=None, exclude=True)
    watch: set[str] = Field(default_factory=set)
    news: list[Message] = Field(default_factory=list, exclude=True)
    react_mode: RoleReactMode = RoleReactMode.REACT
    max_react_loop: int = 1

    @property
    def important_memory(self) -> list[Message]:
        """Messages caused by the actions this role watches."""
        return self.memory.get_by_actions(self.watch)

    @property
    def history(self) -> list[Message]:
        return self.memory.get()


__all__ = ["MessageQueue", "RoleContext", "RoleReactMode"]

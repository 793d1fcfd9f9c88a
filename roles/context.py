"""A role's runtime state: its inbox (:class:`MessageQueue`) and :class:`RoleContext`."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from actions import Action
from memory import Memory, Message


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
    """

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._queue: deque[Message] = deque(messages)

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
        self._queue.append(message)

    def pop_all(self) -> list[Message]:
        items = list(self._queue)
        self._queue.clear()
        return items

    def requeue(self, messages: list[Message]) -> None:
        """Put ``messages`` back at the front, in order (a failed turn's input, read again next time)."""
        self._queue.extendleft(reversed(messages))

    def empty(self) -> bool:
        return not self._queue

    def __len__(self) -> int:
        return len(self._queue)


class RoleContext(BaseModel):
    """A role's runtime state: environment, inbox, memory, current state and todo, watch list."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

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

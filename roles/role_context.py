"""A role's runtime state: its inbox (:class:`MessageQueue`) and :class:`RoleContext`."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from enum import Enum
from typing import Any

from loguru import logger
from pydantic import ConfigDict, Field, GetCoreSchemaHandler, field_validator
from pydantic_core import CoreSchema, core_schema

from actions import Action
from memory import Memory, Message
from rolecast.core.models import Model


class RoleReactMode(str, Enum):
    REACT = "react"
    BY_ORDER = "by_order"
    PLAN_AND_ACT = "plan_and_act"

    @classmethod
    def values(cls) -> list[str]:
        return [m.value for m in cls]


class WatchSet(set[str]):
    """A role's watch list (``rc.watch``): a set that tells its listener (the environment's watcher
    index, see :meth:`RoleContext.set_watch_listener`) whenever it changes in place. A copy or a
    pickled one leaves the listener behind."""

    __slots__ = ("_on_change",)

    def __init__(self, items: Iterable[str] = ()) -> None:
        super().__init__(items)
        self._on_change: Callable[[], None] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (WatchSet, (list(self),))

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    def add(self, element: str) -> None:
        super().add(element)
        self._changed()

    def discard(self, element: object) -> None:
        super().discard(element)
        self._changed()

    def remove(self, element: str) -> None:
        super().remove(element)
        self._changed()

    def pop(self) -> str:
        element = super().pop()
        self._changed()
        return element

    def clear(self) -> None:
        super().clear()
        self._changed()

    def update(self, *others: Iterable[str]) -> None:
        super().update(*others)
        self._changed()

    def difference_update(self, *others: Iterable[Any]) -> None:
        super().difference_update(*others)
        self._changed()

    def intersection_update(self, *others: Iterable[Any]) -> None:
        super().intersection_update(*others)
        self._changed()

    def symmetric_difference_update(self, other: Iterable[str]) -> None:
        super().symmetric_difference_update(other)
        self._changed()

    def __ior__(self, other: AbstractSet[str]) -> WatchSet:  # type: ignore[override,misc]
        super().__ior__(other)
        self._changed()
        return self

    def __iand__(self, other: AbstractSet[object]) -> WatchSet:
        super().__iand__(other)
        self._changed()
        return self

    def __isub__(self, other: AbstractSet[object]) -> WatchSet:
        super().__isub__(other)
        self._changed()
        return self

    def __ixor__(self, other: AbstractSet[str]) -> WatchSet:  # type: ignore[override,misc]
        super().__ixor__(other)
        self._changed()
        return self


class SkipLedger:
    """The broadcasts an environment handed only to the roles that may react to them, kept once for
    all the others: each of those inboxes counts them as ignored (see :meth:`MessageQueue.ignore`)
    without being called for each one.

    The arithmetic: ``count`` broadcasts were recorded since the round began (``epoch``), which
    ``ignorers`` inboxes in all count as ignored. An inbox remembers the ledger's ``count`` when it
    last read its messages (its base) and how many broadcasts since were handed to it or its own
    (its credit); it ignored ``count - base - credit`` of them (see :meth:`MessageQueue._skipped`).
    When the round ends the ledger is dropped (a new epoch): every inbox's base and credit are
    then stale, and read as zero."""

    __slots__ = ("count", "epoch", "ignorers")

    def __init__(self) -> None:
        self.count = 0
        self.epoch = 0
        self.ignorers = 0

    def record(self, ignorers: int, handed: Iterable[MessageQueue]) -> None:
        """A broadcast that ``ignorers`` roles were not handed; ``handed``: the inboxes that were
        (or sent it), each credited with it. Nothing is recorded when every role was handed it."""
        if ignorers <= 0:
            return
        self.count += 1
        self.ignorers += ignorers
        for inbox in handed:
            inbox.credit(self)

    def drop(self) -> None:
        """Every inbox forgets what it ignored (the scheduler's next round; see :meth:`MessageQueue.drop_ignored`)."""
        if self.count:
            self.epoch += 1
            self.count = 0
            self.ignorers = 0


#: an empty inbox's queue (see :meth:`MessageQueue.__init__`)
_NO_MESSAGES: tuple[()] = ()


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

    The broadcasts the environment did not hand to this inbox (it neither watches them nor is
    addressed) count as ignored too, through the environment's :class:`SkipLedger`: the
    ledger's broadcasts since this inbox last read or dropped them, less the ones it was
    handed or sent itself (:meth:`credit`).
    """

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        # an empty inbox holds no deque (an empty deque is a 760-byte block, and most of a large
        # simulation's inboxes are empty most of the time): one is made by the first message that
        # arrives, and let go when the role reads them all (bench/bench_scale.py)
        self._queue: deque[Message] | tuple[()] = deque(messages) or _NO_MESSAGES
        self._ignored = 0  # messages received that the role cannot react to (not kept)
        self._listener: Callable[[bool], None] | None = None
        #: every waiting message came through :meth:`push_screened` (the role's own check at
        #: delivery), so the turn that reads them need not check them again
        self.screened = not self._queue
        self._ledger: SkipLedger | None = None
        # the ledger's epoch and count when this inbox last read, and how many of the ledger's
        # broadcasts since then were not ignored by it
        self._epoch = 0
        self._base = 0
        self._credit = 0

    def __getstate__(self) -> dict[str, Any]:
        # the listener and the ledger are the environment's of this process: a copy shipped
        # elsewhere gets its own, and keeps the count of what it ignored
        state = dict(self.__dict__)
        state["_ignored"] = self._ignored + self._skipped()
        state["_listener"] = state["_ledger"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("screened", False)
        for key in ("_ledger", "_epoch", "_base", "_credit"):
            state.setdefault(key, None if key == "_ledger" else 0)
        self.__dict__.update(state)

    def set_ledger(self, ledger: SkipLedger | None) -> None:
        """Count ``ledger``'s broadcasts from now on as ignored unless :meth:`credit`-ed (None: none)."""
        self._ledger = ledger
        self._read_ledger()

    def credit(self, ledger: SkipLedger) -> None:
        """The ledger's newest broadcast was not ignored by this inbox (handed to it, or its own)."""
        if ledger is not self._ledger:
            return
        if self._epoch != ledger.epoch:  # the ledger was dropped since this inbox last read: start afresh
            self._epoch, self._base, self._credit = ledger.epoch, 0, 0
        self._credit += 1

    def _read_ledger(self) -> None:
        """This inbox has read (or dropped) everything: the ledger's broadcasts so far are no longer ignored."""
        ledger = self._ledger
        if ledger is not None:
            self._epoch, self._base, self._credit = ledger.epoch, ledger.count, 0

    def _skipped(self) -> int:
        """The ledger's broadcasts this inbox counts as ignored: those since it last read, less the
        ones credited to it (see :class:`SkipLedger`); all of the round's after a drop."""
        ledger = self._ledger
        if ledger is None:
            return 0
        if self._epoch != ledger.epoch:
            return ledger.count
        return ledger.count - self._base - self._credit

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

    def _writable(self) -> deque[Message]:
        queue = self._queue
        if type(queue) is not deque:  # (the empty tuple, also after a copy or a pickle)
            queue = self._queue = deque()
        return queue  # type: ignore[return-value]  # (a deque once it is not the empty tuple)

    def push(self, message: Message) -> None:
        queue = self._writable()
        queue.append(message)
        self.screened = False
        if len(queue) == 1 and self._listener is not None:  # only news when the inbox was empty
            self._listener(True)

    def push_screened(self, message: Message) -> None:
        """:meth:`push` a message the role has checked it can react to (see :attr:`screened`)."""
        queue = self._writable()
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
        self._read_ledger()

    def pop(self) -> Message | None:
        """The oldest readable message, or None."""
        queue = self._queue
        return queue.popleft() if queue else None  # type: ignore[union-attr]  # (not empty: a deque)

    def pop_all(self) -> list[Message]:
        """Every readable message, oldest first."""
        items = list(self._queue)
        self._queue = _NO_MESSAGES
        self._ignored = 0
        if self._ledger is not None:
            self._read_ledger()
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
        self._writable().extendleft(reversed(messages))
        self.screened = False
        if messages and self._listener is not None:
            self._listener(True)

    def empty(self) -> bool:
        """Nothing received since the last read (ignored messages count until they are dropped)."""
        return not self._queue and not self._ignored and not self._skipped()

    def __len__(self) -> int:
        return len(self._queue)


#: RoleContext's fields that are set as they are (no validation on assignment, no listener)
_PLAIN_FIELDS = frozenset({"env", "msg_buffer", "memory", "state", "todo", "news", "react_mode", "max_react_loop"})


#: the fields :meth:`RoleContext.set_state` sets
_STATE_FIELDS = ("state", "todo")


class RoleContext(Model):
    """A role's runtime state: environment, inbox, memory, current state and todo, watch list."""

    model_config = ConfigDict(arbitrary_types_allowed=True, defer_build=True)

    env: Any = Field(default=None, exclude=True)
    msg_buffer: MessageQueue = Field(default_factory=MessageQueue)
    memory: Memory = Field(default_factory=Memory)
    state: int = -1
    todo: Action | None = Field(default=None, exclude=True)
    watch: set[str] = Field(default_factory=WatchSet)
    news: list[Message] = Field(default_factory=list, exclude=True)
    react_mode: RoleReactMode = RoleReactMode.REACT
    max_react_loop: int = 1

    @field_validator("watch", mode="after")
    @classmethod
    def _watch_set(cls, value: set[str]) -> WatchSet:
        return value if isinstance(value, WatchSet) else WatchSet(value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "watch":
            if name in _PLAIN_FIELDS and type(self) is RoleContext:
                # what pydantic does for a field without assignment validation, without its calls: a
                # react step sets state and todo four times, and through pydantic it made 83 Python
                # calls instead of 67 (bench/bench_framework.py (d); tests/test_bench.py bounds it at 80)
                self.__dict__[name] = value
                self.__pydantic_fields_set__.add(name)
                return
            super().__setattr__(name, value)
            return
        # a new watch list keeps the old one's listener, and tells it
        old = self.__dict__.get("watch")
        listener = old._on_change if isinstance(old, WatchSet) else None
        watch = WatchSet(value)
        watch._on_change = listener
        super().__setattr__(name, watch)
        if listener is not None:
            listener()

    def set_state(self, state: int, todo: Action | None) -> None:
        """``self.state = state; self.todo = todo`` in one call (every turn sets both, twice: see
        :meth:`__setattr__` for why plain fields are set directly)."""
        if type(self) is RoleContext:  # the plain fields' assignment below, both at once
            values = self.__dict__
            values["state"] = state
            values["todo"] = todo
            self.__pydantic_fields_set__.update(_STATE_FIELDS)
        else:
            self.state = state
            self.todo = todo

    def set_watch_listener(self, listener: Callable[[], None] | None) -> None:
        """Call ``listener()`` whenever the watch list changes (assigned, or changed in place)."""
        watch = self.watch
        if not isinstance(watch, WatchSet):  # put in the instance's dict past validation
            watch = self.__dict__["watch"] = WatchSet(watch)
        watch._on_change = listener

    @property
    def important_memory(self) -> list[Message]:
        """Messages caused by the actions this role watches."""
        return self.memory.get_by_actions(self.watch)

    @property
    def history(self) -> list[Message]:
        return self.memory.get()


__all__ = ["MessageQueue", "RoleContext", "RoleReactMode", "SkipLedger", "WatchSet"]

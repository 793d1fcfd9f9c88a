"""A role's runtime state: its inbox (:class:`MessageQueue`) and :class:`RoleContext`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from enum import Enum
from typing import Any

from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, core_schema

from actions import Action
from memory import Memory, Message
from rolecast.core.classes import shared_names
from rolecast.errors import UsageError


class RoleReactMode(str, Enum):
    """How a role's ``_think`` picks its next action: ``react`` (the model chooses a state by
    number), ``by_order`` (the actions in turn) or ``plan_and_act`` (a plan first, then its tasks)."""

    REACT = "react"
    BY_ORDER = "by_order"
    PLAN_AND_ACT = "plan_and_act"

    @classmethod
    def values(cls) -> list[str]:
        return [m.value for m in cls]


class WatchSet(set[str]):
    """A role's watch list as ``rc.watch`` hands it out: a set whose changes in place reach the role's
    context (which keeps the list as a shared frozenset, see :attr:`RoleContext.watch`) and so the
    environment's watcher index. A copy or a pickled one is a plain list of names, tied to nothing."""

    __slots__ = ("_rc",)

    def __init__(self, items: Iterable[str] = (), rc: RoleContext | None = None) -> None:
        super().__init__(items)
        self._rc = rc

    def __reduce__(self) -> tuple[Any, ...]:
        return (WatchSet, (list(self),))

    @property
    def _on_change(self) -> Callable[[], None] | None:
        """What a change in place calls (None: a copy, tied to no context)."""
        return self._changed if self._rc is not None else None

    def _changed(self) -> None:
        rc = self._rc
        if rc is not None:
            rc._watch_changed(self)

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

    __slots__ = ("_base", "_credit", "_epoch", "_ignored", "_ledger", "_listener", "_owner", "_queue", "screened")

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        # an empty inbox holds no list: one is made by the first message that arrives, and let go when
        # the role reads them all. A list, not a deque: a deque is a 760-byte block however few it
        # holds, and at the end of each round every agent of a large simulation holds a few
        # (bench/bench_scale.py, 10,000 agents: 760 -> ~120 bytes an agent); the framework reads an
        # inbox whole (pop_all), so pop()'s shifting the rest only touches what MetaGPT's API pops
        self._queue: list[Message] | tuple[()] = list(messages) or _NO_MESSAGES
        self._ignored = 0  # messages received that the role cannot react to (not kept)
        self._listener: Callable[..., None] | None = None
        self._owner: Any = None  # given to the listener first, when set (see set_listener)
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
        state = {name: getattr(self, name) for name in self.__slots__}
        state["_ignored"] = self._ignored + self._skipped()
        state["_listener"] = state["_ledger"] = state["_owner"] = None
        state["_epoch"] = state["_base"] = state["_credit"] = 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        defaults = {"screened": False, "_ledger": None, "_listener": None, "_owner": None, "_epoch": 0, "_base": 0,
                    "_credit": 0, "_ignored": 0, "_queue": _NO_MESSAGES}
        for name in self.__slots__:
            setattr(self, name, state.get(name, defaults[name]))

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

    def set_listener(self, listener: Callable[..., None] | None, owner: Any = None) -> None:
        """Call ``listener(True)`` when a push finds the inbox empty and after a requeue, and
        ``listener(False)`` for the first ignored message (None: nobody listens). With an ``owner``,
        ``listener(owner, news)``: an environment gives every inbox its one method and the role, not a
        closure per role."""
        self._listener = listener
        self._owner = owner

    def _tell(self, news: bool) -> None:
        listener = self._listener
        if listener is not None:
            owner = self._owner
            if owner is None:
                listener(news)
            else:
                listener(owner, news)

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

    def _writable(self) -> list[Message]:
        queue = self._queue
        if type(queue) is not list:  # (the empty tuple, also after a copy or a pickle)
            queue = self._queue = []
        return queue  # type: ignore[return-value]  # (a list once it is not the empty tuple)

    def push(self, message: Message) -> None:
        queue = self._writable()
        queue.append(message)
        self.screened = False
        if len(queue) == 1 and self._listener is not None:  # only news when the inbox was empty
            self._tell(True)

    def push_screened(self, message: Message) -> None:
        """:meth:`push` a message the role has checked it can react to (see :attr:`screened`)."""
        queue = self._queue
        if type(queue) is not list:
            queue = self._writable()
        queue.append(message)  # type: ignore[union-attr]  # (a list now)
        if len(queue) == 1:
            listener = self._listener  # (_tell, inlined: every delivery comes here)
            if listener is not None:
                owner = self._owner
                if owner is None:
                    listener(True)
                else:
                    listener(owner, True)

    def ignore(self) -> None:
        """Count a message the role cannot react to (see :meth:`roles.Role.can_react`)."""
        self._ignored += 1
        if self._ignored == 1 and self._listener is not None:
            self._tell(False)

    def drop_ignored(self) -> None:
        """Forget the ignored messages (the scheduler does, at the next round)."""
        self._ignored = 0
        self._read_ledger()

    def pop(self) -> Message | None:
        """The oldest readable message, or None."""
        queue = self._queue
        if not queue:
            return None
        message = queue.pop(0)  # type: ignore[union-attr]  # (not empty: a list)
        if not queue:
            self._queue = _NO_MESSAGES
        return message

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
        queue = self._writable()
        queue[:0] = messages
        self.screened = False
        if messages and self._listener is not None:
            self._tell(True)

    def empty(self) -> bool:
        """Nothing received since the last read (ignored messages count until they are dropped)."""
        return not self._queue and not self._ignored and not self._skipped()

    def __len__(self) -> int:
        return len(self._queue)


class _SavedContext(BaseModel):
    """What a dump of a :class:`RoleContext` holds, and how it is validated (MetaGPT's RoleContext fields)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, defer_build=True, extra="forbid")

    msg_buffer: MessageQueue = Field(default_factory=MessageQueue)
    memory: Memory = Field(default_factory=Memory)
    state: int = -1
    watch: set[str] = Field(default_factory=set)
    react_mode: RoleReactMode = RoleReactMode.REACT
    max_react_loop: int = 1


#: the fields a RoleContext's dump holds, in order (``env``, ``todo`` and ``news`` are not saved)
_SAVED = tuple(_SavedContext.model_fields)
#: every field the constructor takes
_FIELDS = frozenset({*_SAVED, "env", "todo", "news"})
#: the watch list of a role that watches nothing (shared)
_NOTHING: frozenset[str] = frozenset()


class RoleContext:
    """A role's runtime state: environment, inbox, memory, current state and todo, watch list.

    A plain class with slots (a million roles have a million of these): the fields of MetaGPT's
    pydantic RoleContext, with its ``model_dump``/``model_validate`` surface, usable as a pydantic
    field (it validates from a dump and dumps to one). ``watch`` is kept as a shared, immutable set
    (roles that watch the same causes share one); reading ``rc.watch`` hands out a
    :class:`WatchSet` whose changes in place come back here.
    """

    __slots__ = ("_listener", "_owner", "_watch", "env", "max_react_loop", "memory", "msg_buffer", "news",
                 "react_mode", "reactions", "state", "todo")

    def __init__(self, **data: Any) -> None:
        unknown = set(data) - _FIELDS
        if unknown:
            raise ValidationError.from_exception_data("RoleContext", [
                {"type": "extra_forbidden", "loc": (name,), "input": data[name]} for name in sorted(unknown)])
        runtime = {name: data.pop(name) for name in ("env", "todo", "news") if name in data}
        saved = _SavedContext(**data) if data else None
        self._listener: Callable[..., None] | None = None
        self._owner: Any = None
        self.env: Any = runtime.get("env")
        self.todo: Action | None = runtime.get("todo")
        self.news: list[Message] = runtime.get("news", [])
        #: the role's reactions finished (a by_order turn whose _act ran one of its own ends there)
        self.reactions = 0
        if saved is None:
            self.msg_buffer = MessageQueue()
            self.memory = Memory()
            self.state = -1
            self._watch: AbstractSet[str] = _NOTHING
            self.react_mode = RoleReactMode.REACT
            self.max_react_loop = 1
        else:
            self._take(saved)

    def __getstate__(self) -> dict[str, Any]:
        # a copy, or a context shipped elsewhere, leaves the environment's listener behind
        state = {name: getattr(self, name) for name in self.__slots__}
        state["_listener"] = state["_owner"] = None
        state["_watch"] = frozenset(self._watch)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "__dict__" in state:  # pickled when RoleContext was a pydantic model
            state = {**state["__dict__"], "_watch": state["__dict__"].get("watch", ())}
        defaults = RoleContext()
        for name in self.__slots__:
            setattr(self, name, state[name] if name in state else getattr(defaults, name))
        self._watch = shared_names(self._watch)
        self._listener = self._owner = None

    def _take(self, saved: _SavedContext) -> None:
        self.msg_buffer = saved.msg_buffer
        self.memory = saved.memory
        self.state = saved.state
        self._watch = shared_names(saved.watch)
        self.react_mode = saved.react_mode
        self.max_react_loop = saved.max_react_loop

    # ------------------------------------------------------------ watch list
    @property
    def watch(self) -> set[str]:
        """The causes this role reacts to: a :class:`WatchSet` (changes in place are heard)."""
        watch = self._watch
        if type(watch) is not WatchSet:
            watch = self._watch = WatchSet(watch, self)  # made when asked for: most roles never are
        return watch

    @watch.setter
    def watch(self, value: Iterable[str]) -> None:
        old = self._watch
        if type(old) is WatchSet:
            old._rc = None  # a list handed out before is no longer this role's
        self._watch = shared_names(value)
        self._tell_watch()

    def _watch_changed(self, watch: WatchSet) -> None:
        if self._watch is watch:
            self._tell_watch()

    def _tell_watch(self) -> None:
        listener = self._listener
        if listener is not None:
            owner = self._owner
            if owner is None:
                listener()
            else:
                listener(owner)

    @property
    def watched(self) -> AbstractSet[str]:
        """The watch list as kept (a shared frozenset, or the :class:`WatchSet` handed out): to read, not change."""
        return self._watch

    def set_watch_listener(self, listener: Callable[..., None] | None, owner: Any = None) -> None:
        """Call ``listener()`` whenever the watch list changes (assigned, or changed in place); with an
        ``owner``, ``listener(owner)`` (one method for every role, not a closure per role)."""
        self._listener = listener
        self._owner = owner

    def set_state(self, state: int, todo: Action | None) -> None:
        """``self.state = state; self.todo = todo`` in one call."""
        self.state = state
        self.todo = todo

    def set_react_mode(self, react_mode: str | RoleReactMode, max_react_loop: int, n_actions: int) -> RoleReactMode:
        """Set the react mode and its loop bound (``react``: ``max_react_loop``; ``by_order``: one turn an
        action); a mode that is not one, or a bound under 1, is a UsageError."""
        try:
            mode = RoleReactMode(react_mode)
        except ValueError:
            raise UsageError(f"react_mode must be one of {RoleReactMode.values()}, not {react_mode!r}") from None
        if mode == RoleReactMode.REACT and max_react_loop < 1:
            raise UsageError("max_react_loop must be at least 1")
        self.react_mode = mode
        if mode == RoleReactMode.REACT:
            self.max_react_loop = max_react_loop
        elif mode == RoleReactMode.BY_ORDER:
            self.max_react_loop = n_actions
        return mode

    @property
    def important_memory(self) -> list[Message]:
        """Messages caused by the actions this role watches."""
        return self.memory.get_by_actions(self._watch)

    @property
    def history(self) -> list[Message]:
        return self.memory.get()

    # ------------------------------------------------------ pydantic surface
    def _saved(self) -> _SavedContext:
        return _SavedContext.model_construct(
            msg_buffer=self.msg_buffer, memory=self.memory, state=self.state, watch=set(self._watch),
            react_mode=self.react_mode, max_react_loop=self.max_react_loop)

    def model_dump(self, *, mode: str = "python", **kwargs: Any) -> dict[str, Any]:
        """The saved fields (MetaGPT's dump: ``msg_buffer``, ``memory``, ``state``, ``watch`` …)."""
        dumped = self._saved().model_dump(mode=mode, **kwargs)
        if mode == "json" and isinstance(dumped.get("watch"), list):
            dumped["watch"] = sorted(dumped["watch"])
        return dumped

    def model_dump_json(self, **kwargs: Any) -> str:
        return json.dumps(self.model_dump(mode="json", **kwargs), ensure_ascii=False)

    @classmethod
    def model_validate(cls, value: Any) -> RoleContext:
        """A context from a RoleContext, a dump (a dict), or a :class:`_SavedContext`."""
        if isinstance(value, RoleContext):
            return value
        rc = cls()
        rc._take(value if isinstance(value, _SavedContext) else _SavedContext.model_validate(value))
        return rc

    @classmethod
    def model_validate_json(cls, data: str | bytes) -> RoleContext:
        return cls.model_validate(_SavedContext.model_validate_json(data))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # a field of this type takes a RoleContext or a dump of one, and dumps to a dict
        return core_schema.no_info_plain_validator_function(
            cls.model_validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda rc, info: rc.model_dump(mode=info.mode), info_arg=True),
        )

    def __repr__(self) -> str:
        return (f"RoleContext(state={self.state}, todo={self.todo!r}, watch={sorted(self._watch)}, "
                f"react_mode={self.react_mode.value!r}, max_react_loop={self.max_react_loop})")


__all__ = ["MessageQueue", "RoleContext", "RoleReactMode", "SkipLedger", "WatchSet"]

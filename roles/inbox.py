"""A role's side of the bus: what it receives (its inbox, screened on delivery), reads at the start
of its turn (``_observe``), remembers and publishes. A mixin of :class:`~roles.Role`."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from loguru import logger

from memory import MESSAGE_ROUTE_TO_ALL, Message
from rolecast.core.classes import unshare_for

from .footprint import SharedPrivate, compact_addresses, shared_private
from .role_context import RoleContext

#: attributes whose change the environment's watcher index hears of (see :meth:`Inbox.__setattr__`)
_WIRED = frozenset({"rc", "observe_all_msg_from_buffer"})


def reacts_to(message: Message, name: str, addresses: AbstractSet[str], watch: AbstractSet[str]) -> bool:
    """The rule of who reacts to a message, written once: a role named ``name``, answering to
    ``addresses`` and watching the causes ``watch``, reacts to ``message`` when it is not its own
    and is addressed to it, or is a broadcast caused by an action it watches."""
    if message.sent_from == name:
        return False
    send_to = message.send_to
    return not addresses.isdisjoint(send_to) or (message.cause_by in watch and MESSAGE_ROUTE_TO_ALL in send_to)


#: Role class → whether its fields are set as they are (no validation on assignment, not frozen)
_PLAIN_ASSIGNMENT: dict[type, bool] = {}

#: (Role class, method name) → whether the class overrides Inbox's method (see :func:`_overrides`)
_OVERRIDES: dict[tuple[type, str], bool] = {}


def _overrides(cls: type, method: str) -> bool:
    """Whether a role class overrides :class:`Inbox`'s ``method`` (asked once per class: a pydantic
    class's attribute lookup is slow). A class that overrides ``_observe`` reads its inbox its own
    way, and is handed every message as it came, unscreened."""
    key = (cls, method)
    found = _OVERRIDES.get(key)
    if found is None:
        found = _OVERRIDES[key] = getattr(cls, method) is not getattr(Inbox, method)
    return found


def _keeps_everything(role: Inbox) -> bool:
    """Whether ``role`` keeps every message delivered, unscreened: its class reads its inbox its own
    way, or it remembers everything (``observe_all_msg_from_buffer``)."""
    return _overrides(type(role), "_observe") or role.observe_all_msg_from_buffer


def hears_everything(role: Inbox) -> bool:
    """Whether every message delivered must reach ``role.put_message``: its class overrides
    ``put_message`` or ``_observe``, or it remembers everything (``observe_all_msg_from_buffer``).
    An environment hands any other role only the broadcasts it watches (see
    :meth:`environment.Environment.rewire_role`)."""
    cls = type(role)
    return _overrides(cls, "_observe") or _overrides(cls, "put_message") or role.observe_all_msg_from_buffer


class Inbox:
    """Receiving, reading, remembering and publishing messages (see the module docstring)."""

    if TYPE_CHECKING:
        name: str
        rc: RoleContext
        addresses: set[str]
        recovered: bool
        latest_observed_msg: Message | None
        observe_all_msg_from_buffer: bool

        @property
        def _setting(self) -> str: ...

    def __setattr__(self, name: str, value: Any) -> None:
        """Set an attribute; a new context (its watch list and inbox) or a new
        ``observe_all_msg_from_buffer`` brings the environment's watcher index up to date."""
        if name[:1] == "_":
            private = self.__pydantic_private__  # type: ignore[attr-defined]
            if type(private) is SharedPrivate and name in type(self).__private_attributes__:  # type: ignore[attr-defined]
                object.__setattr__(self, "__pydantic_private__", shared_private({**private, name: value}))
                return
        env = self._env_to_rewire() if name in _WIRED else None
        unshare_for(self, name)  # (the fields-set and extras are shared: see Role.__init__)
        super().__setattr__(name, value)
        if env is not None:
            env.rewire_role(self)

    def __delattr__(self, name: str) -> None:
        private = self.__pydantic_private__  # type: ignore[attr-defined]
        if type(private) is SharedPrivate and name in private:  # (not in the dict other roles share)
            object.__setattr__(self, "__pydantic_private__", dict(private))
        super().__delattr__(name)

    def _set_field(self, name: str, value: Any) -> None:
        """``self.name = value`` for a plain field, as pydantic sets one (the value in the instance's dict,
        the name in its fields-set), without its calls where the class validates no assignment: every
        turn sets one (bench/bench_framework.py (d) counts a react step's calls)."""
        cls = type(self)
        plain = _PLAIN_ASSIGNMENT.get(cls)
        if plain is None:
            config = cls.model_config  # type: ignore[attr-defined]
            plain = _PLAIN_ASSIGNMENT[cls] = not (config.get("validate_assignment") or config.get("frozen"))
        if not plain or name in _WIRED:
            setattr(self, name, value)
            return
        unshare_for(self, name)  # (its fields-set holds the name now: pydantic's add would find it there)
        self.__dict__[name] = value

    def _env_to_rewire(self) -> Any:
        """The environment this role is wired into, read from its current context (a new context
        has none yet), if it keeps a watcher index (has ``rewire_role``); else None."""
        old = self.__dict__.get("rc")
        env = old.env if old is not None else None
        return env if callable(getattr(env, "rewire_role", None)) else None

    def set_addresses(self, addresses: Iterable[str]) -> None:
        """Answer to these names: ``addresses`` reads as their set (immutable: set others with this; kept
        compact, see :class:`roles.footprint.Addresses`); the environment indexes them."""
        self._set_field("addresses", compact_addresses(self.name, addresses))
        env = self.rc.env
        if env is not None and hasattr(env, "set_addresses"):
            env.set_addresses(self, self.addresses)

    def put_message(self, message: Message | None) -> None:
        """Put a message into this role's inbox (read at its next turn).

        A message this role could not react to (see :meth:`can_react`) is only counted (the
        role is not idle until the next round drops it) and not kept: it would be read and
        dropped at a turn taken for nothing. A role that
        overrides ``_observe``, or sets ``observe_all_msg_from_buffer``, receives everything.

        An environment calls this for the broadcasts a role watches and the messages addressed
        to it; it counts the other broadcasts as ignored for the role without calling it (see
        :class:`~roles.role_context.SkipLedger`), unless the role :func:`hears_everything`.
        """
        if message is None:
            return
        buffer = self.rc.msg_buffer
        if _keeps_everything(self):
            buffer.push(message)
        elif reacts_to(message, self.name, self.addresses, self.rc._watch):
            buffer.push_screened(message)  # _observe need not check it again
        else:
            buffer.ignore()

    def can_react(self, message: Message) -> bool:
        """Whether ``message`` is news to this role: not its own, and addressed to it, or a broadcast
        caused by an action it watches (whether it was already remembered is checked when observed)."""
        return reacts_to(message, self.name, self.addresses, self.rc._watch)

    def publish_message(self, message: Message | None) -> None:
        """Publish on the environment bus (signed with this role's name)."""
        if message is None:
            return
        if not message.sent_from:
            message.sent_from = self.name
        env = self.rc.env
        if env is not None:
            env.publish_message(message)

    def remember(self, message: Message) -> None:
        """Keep ``message`` in this role's memory (a message is never stored twice)."""
        self.rc.memory.add(message)

    @property
    def history(self) -> list[Message]:
        """Everything this role remembers, oldest first."""
        return self.rc.memory.get()

    def get_memories(self, k: int = 0) -> list[Message]:
        """The last ``k`` remembered messages (all for 0)."""
        return self.rc.memory.get(k=k)

    @property
    def is_idle(self) -> bool:
        """Nothing to read, nothing to do."""
        return not self.rc.news and self.rc.todo is None and self.rc.msg_buffer.empty()

    async def _observe(self) -> int:
        """Move new messages from the inbox into memory; keep as news those this role watches.

        A message counts when its ``cause_by`` is watched (and it is addressed to
        everyone or to this role), or when it is addressed to this role by name or
        profile. A role's own messages never count.
        """
        news: list[Message] = []
        rc = self.rc
        if self.recovered and self.latest_observed_msg:
            news = rc.memory.find_news(observed=[self.latest_observed_msg], k=10)
        screened = not news and rc.msg_buffer.screened  # each checked by put_message on delivery
        if not news:
            news = rc.msg_buffer.pop_all()
        memory = rc.memory
        if screened:
            kept = memory.unseen(news)
        else:
            name, addresses, watch = self.name, self.addresses, rc._watch  # (rc.watched, without a call)
            kept = [m for m in memory.unseen(news) if reacts_to(m, name, addresses, watch)]
        self.rc.news = kept
        memory.add_batch(news if self.observe_all_msg_from_buffer else kept)
        self._set_field("latest_observed_msg", kept[-1] if kept else None)
        if kept:
            logger.debug("{} observed {} new message(s)", self._setting, len(kept))
        return len(kept)

    def _requeue_news(self) -> None:
        """A failed turn loses nothing: the news it was reacting to is read again at the next turn."""
        news = self.rc.news
        for message in news:
            self.rc.memory.delete(message)
        self.rc.msg_buffer.requeue(news)


__all__ = ["Inbox", "hears_everything", "reacts_to"]

"""Environment: the message bus the roles of a team publish to, and the round runner."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from functools import partial
from typing import Any, Literal

from loguru import logger
from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    SerializeAsAny,
    field_validator,
    model_validator,
)

from memory import MESSAGE_ROUTE_TO_ALL, Memory, Message
from memory.archive import attach_archive
from rolecast.const import MESSAGE_ROUTE_TO_NONE
from rolecast.context import Context
from rolecast.core.misuse import checks_keywords
from rolecast.core.models import Model
from rolecast.errors import ActionFailed, ApprovalPending, BudgetExceeded, RolecastError, UsageError
from rolecast.runs.log import RunLog
from rolecast.runs.store import ROUND_FINISHED, ROUND_STARTED
from roles import Role
from roles.footprint import Addresses
from roles.inbox import hears_everything
from roles.role_context import SkipLedger

from .runtime import Runtime, logged_turn
from .turns import DEFAULT_MAX_CONCURRENT_TURNS, check_concurrency, run_turns


class _BusState:
    """What every publish and round reads: the round's outbox (None between rounds), the run log,
    the roles whose inbox received something since their last turn, each role's place in the order,
    and the watcher index (see :meth:`Environment.rewire_role`)."""

    __slots__ = ("hear_all", "index_watch", "ledger", "mark", "outbox", "rank", "ready", "run_log", "skipped",
                 "watched", "watchers")

    def __init__(self) -> None:
        self.outbox: list[Message] | None = None
        self.run_log: RunLog | None = None
        self.ready: dict[str, Role] = {}
        self.skipped: dict[str, Role] = {}  # roles that received only what they cannot react to
        self.rank: dict[str, int] = {}
        #: cause_by → the roles that watch it (by id), and each role's indexed causes
        #: (keyed by the role itself, hashed by identity: a key of id(role) was a 32-byte int per entry)
        self.watchers: dict[str, dict[Role, Role]] = {}
        self.watched: dict[Role, frozenset[str]] = {}
        #: the roles every message is handed to (see :func:`roles.inbox.hears_everything`)
        self.hear_all: dict[Role, Role] = {}
        #: the broadcasts counted as ignored by the roles they were not handed to
        self.ledger = SkipLedger()
        #: the environment's methods every member's inbox and watch list call with the role (bound
        #: once: a closure per role cost about 300 bytes each, two per role)
        self.mark: Any = None
        self.index_watch: Any = None


class RoleMap(dict[str, Any]):
    """The roles of an environment (or their dumps), by name.

    A key that is no role's name finds the one role whose ``profile`` it is, so that
    MetaGPT's lookups by profile (``env.roles["Engineer"]``, ``env.get_role(profile)``)
    find what they meant. A profile that several roles share finds none: name the role.
    ``in`` and iteration are by name.
    """

    def __missing__(self, key: str) -> Any:
        found = [v for v in self.values() if _profile_of(v) == key]
        if len(found) == 1:
            return found[0]
        if found:
            raise KeyError(f"{len(found)} roles have the profile {key!r}; look them up by name: "
                           f"{sorted(str(_name_of(v)) for v in found)}")
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default


def _profile_of(value: Any) -> Any:
    return value.get("profile") if isinstance(value, dict) else getattr(value, "profile", None)


def _name_of(value: Any) -> Any:
    return value.get("name") if isinstance(value, dict) else getattr(value, "name", None)


@checks_keywords
class Environment(Model):
    """Holds roles and routes messages between them.

    Routing is an index lookup: ``send_to`` names (a role's name, profile or class
    path) map straight to the roles; ``"<all>"`` reaches every role. The sender never
    receives its own message. Each role filters what it receives by what it watches
    (see :meth:`roles.Role._observe`); a broadcast is handed only to the roles that watch
    its cause, the others counting it as received and ignored (see :meth:`rewire_role`).

    ``on_error``: ``"stop"`` (default) re-raises the first failure of a round after
    every role has finished its turn; ``"continue"`` records failures in ``errors``
    and goes on. :class:`~rolecast.errors.BudgetExceeded` and usage errors (a mistake
    in the script, such as a scripted test model called too often) always stop.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, defer_build=True)

    desc: str = ""
    roles: dict[str, SerializeAsAny[Role]] = Field(default_factory=RoleMap)  # subclasses dump their own fields
    history: Memory = Field(default_factory=Memory)
    context: Context = Field(default_factory=Context, exclude=True)
    on_error: Literal["stop", "continue"] = "stop"
    errors: list[RolecastError] = Field(default_factory=list, exclude=True)
    #: where the roles run: None in this process; a :class:`~environment.runtime.Runtime` (Ray) elsewhere
    runtime: Runtime | None = Field(default=None, exclude=True)
    #: how many turns of a round run at once in this process (each in a task; the others start, in the
    #: roles' order, as turns finish): a round of a million roles holds this many tasks, not a million
    max_concurrent_turns: int = Field(default=DEFAULT_MAX_CONCURRENT_TURNS, exclude=True)

    #: address → the role answering to it, or the list of them when several do (a list of one per role
    #: name cost 88 bytes a role)
    _by_address: dict[str, Role | list[Role]] = PrivateAttr(default_factory=dict)
    #: role name → the addresses it is indexed under (the role's own immutable ones, or a tuple of them)
    _indexed: dict[str, Collection[str]] = PrivateAttr(default_factory=dict)
    #: the bus's state: outbox, run log, ready roles, watcher index, ledger
    bus: _BusState = Field(default_factory=lambda: _BusState(), exclude=True, repr=False)

    @property
    def run_log(self) -> RunLog | None:
        """The write-ahead log of the team run this environment belongs to (None: not logged)."""
        return self.bus.run_log

    def set_run_log(self, run_log: RunLog | None) -> None:
        self.bus.run_log = run_log
        # a bounded memory finds what its window let go in the run's store (memory.archive)
        attach_archive((role.rc.memory for role in self.roles.values()), run_log)

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """The environment's fields; its ``roles`` a :class:`RoleMap` of the roles' dumps (found by profile too)."""
        dumped = super().model_dump(**kwargs)
        if isinstance(dumped.get("roles"), dict):
            dumped["roles"] = RoleMap(dumped["roles"])
        return dumped

    @field_validator("max_concurrent_turns", mode="before")
    @classmethod
    def _check_concurrency(cls, value: Any) -> int:
        return check_concurrency(value, "Environment")

    @model_validator(mode="after")
    def _wire_roles(self) -> Environment:
        """Roles that came in as data (a dump reloaded) join this environment like hired ones."""
        if not isinstance(self.roles, RoleMap):
            self.__dict__["roles"] = RoleMap(self.roles)
        for role in list(self.roles.values()):
            self._join(role)
        return self

    # ---------------------------------------------------------------- roles
    def add_role(self, role: Role) -> None:
        if role.name in self.roles and self.roles[role.name] is not role:
            raise UsageError(f"a role named {role.name!r} is already in this environment")
        self.roles[role.name] = role
        self._join(role)
        if self.runtime is not None:
            self.runtime.add_role(role)

    def _join(self, role: Role) -> None:
        """Wire a role in: its environment, its addresses, its place in the order, its inbox's listener."""
        bus = self.bus
        bus.rank.setdefault(role.name, len(bus.rank))
        role.set_env(self)
        self.set_addresses(role, role.addresses)
        self.rewire_role(role)
        if bus.run_log is not None:  # (hired after the run's log opened)
            attach_archive((role.rc.memory,), bus.run_log)

    def rewire_role(self, role: Role) -> None:
        """(Re)wire a member's context: its inbox's listener and ledger, and what it watches.

        A broadcast is handed only to the roles that watch its ``cause_by`` (and to those that
        :func:`~roles.inbox.hears_everything`); every other role counts it as ignored through
        the bus's :class:`~roles.role_context.SkipLedger`, as if it had received and dropped it. The
        role tells the environment when its watch list, context or
        ``observe_all_msg_from_buffer`` changes, and this brings the index up to date.
        """
        if self.roles.get(role.name) is not role:
            return
        rc = role.rc
        if rc.env is None:  # a new context for a role still in this environment
            rc.env = self
        bus = self.bus
        if bus.mark is None:
            bus.mark, bus.index_watch = self._mark, self._index_watch
        inbox = rc.msg_buffer
        inbox.set_listener(bus.mark, role)
        inbox.set_ledger(bus.ledger)
        rc.set_watch_listener(bus.index_watch, role)
        self._index_watch(role)
        if not role.is_idle:  # e.g. a restored role with messages in its inbox
            self._mark_ready(role)

    def _index_watch(self, role: Role) -> None:
        """Index ``role`` under the causes it watches now (or among those handed everything)."""
        self._unindex(role)
        if self.roles.get(role.name) is role:
            self._index(role)

    def _unindex(self, role: Role) -> None:
        """Take ``role`` out of the watcher index (its causes, and the roles handed everything)."""
        bus = self.bus
        key = role
        for cause in bus.watched.pop(key, ()):
            watchers = bus.watchers.get(cause)
            if watchers is not None:
                watchers.pop(key, None)
                if not watchers:
                    del bus.watchers[cause]
        bus.hear_all.pop(key, None)

    def _index(self, role: Role) -> None:
        """Put a member into the watcher index: among the roles handed every message if it
        :func:`~roles.inbox.hears_everything`, else under each cause it watches."""
        bus = self.bus
        key = role
        if hears_everything(role):
            bus.hear_all[key] = role
            return
        watched = role.rc.watched
        causes = watched if type(watched) is frozenset else frozenset(watched)  # (shared by the roles of a class)
        bus.watched[key] = causes
        for cause in causes:
            bus.watchers.setdefault(cause, {})[key] = role

    def _mark_ready(self, role: Role) -> None:
        self.bus.ready[role.name] = role

    def _mark(self, role: Role, news: bool) -> None:
        (self.bus.ready if news else self.bus.skipped)[role.name] = role

    def _take_ready(self) -> list[Role]:
        """The roles with something to do, in the roles' order; the ready set starts afresh, and
        the messages roles received but cannot react to are dropped (they take no turn for them)."""
        bus = self.bus
        skipped, bus.skipped = bus.skipped, {}
        for role in skipped.values():
            role.rc.msg_buffer.drop_ignored()
        bus.ledger.drop()
        ready, bus.ready = bus.ready, {}
        active = [role for role in ready.values() if not role.is_idle]
        if len(active) > 1:
            rank = bus.rank
            active.sort(key=lambda role: rank.get(role.name, len(rank)))
        return active

    def _keep_unfinished(self, active: list[Role]) -> None:
        """A role that ran but still has something to do (a turn that failed before reading) stays ready."""
        for role in active:
            if not role.is_idle:
                self._mark_ready(role)

    def add_roles(self, roles: Iterable[Role] | Role) -> None:
        """Add roles; one role (or a Role class, made with no arguments) means a list of one."""
        if isinstance(roles, Role) or isinstance(roles, type):
            roles = [roles]  # type: ignore[list-item]
        elif isinstance(roles, (str, bytes, Mapping)) or not isinstance(roles, Iterable):
            raise UsageError(f"roles are added as a list of Role instances, not {type(roles).__name__} {roles!r:.80}")
        for role in roles:
            if isinstance(role, type) and issubclass(role, Role):
                role = role()
            if not isinstance(role, Role):
                raise UsageError(f"only roles (Role instances) can be hired, not {type(role).__name__} {role!r:.80}")
            self.add_role(role)
        if self.desc:  # each member's identity prompt names the environment and all the others
            for member in self.roles.values():
                member.set_env(self)

    def set_addresses(self, role: Role, addresses: Iterable[str]) -> None:
        """(Re)index the names a role answers to."""
        by_address = self._by_address
        for address in self._indexed.pop(role.name, ()):
            held = by_address.get(address)
            if isinstance(held, list):
                rest = [r for r in held if r is not role]
                if len(rest) == 1:
                    by_address[address] = rest[0]
                elif rest:
                    by_address[address] = rest
                else:
                    del by_address[address]
            elif held is role:
                del by_address[address]
        if type(addresses) is not Addresses and type(addresses) is not frozenset:  # (kept as it is: immutable)
            addresses = tuple(dict.fromkeys(addresses))  # (a tuple, in order: a set per role cost 216 bytes)
        self._indexed[role.name] = addresses
        for address in addresses:
            held = by_address.get(address)
            if held is None:
                by_address[address] = role
            elif isinstance(held, list):
                held.append(role)
            elif held is not role:
                by_address[address] = [held, role]

    def get_addresses(self, role: Role) -> set[str]:
        """The names ``role`` receives messages under (empty if it is not here)."""
        return set(self._indexed.get(role.name, ())) if self.roles.get(role.name) is role else set()

    @property
    def member_addrs(self) -> dict[Role, set[str]]:
        """Each role and the names it receives messages under (MetaGPT's routing table)."""
        return {role: set(self._indexed.get(name, ())) for name, role in self.roles.items()}

    def get_role(self, name: str) -> Role | None:
        """The role called ``name`` — or, failing that, the one role whose profile it is (MetaGPT's key)."""
        return self.roles.get(name)

    def get_roles(self) -> RoleMap:
        """The roles by name (a copy; a profile one role has finds it too, see :class:`RoleMap`)."""
        return RoleMap(self.roles)

    def role_names(self) -> list[str]:
        return list(self.roles)

    # ------------------------------------------------------------ messaging
    def publish_message(self, message: Message) -> bool:
        """Log the message, then record it in ``history`` and deliver it to every addressed role.

        During a round, delivery waits for the round's end: every role's turn sees the
        same inbox whatever the scheduler ran first, and the round's messages are then
        delivered in a fixed order (the roles' order, then each role's order), so a run
        is reproducible however long each model call took.
        """
        bus = self.bus
        log = bus.run_log
        if log is not None and not log.idle:
            known = log.recorded_message(message.sent_from, message.content, message.cause_by)
            if known is not None:
                message.id = known  # re-executing a recorded run: the message keeps its logged id
            else:
                log.message(message)
        if bus.outbox is not None:
            bus.outbox.append(message)
        else:
            self._deliver(message)
        return True

    def _deliver(self, message: Message) -> None:
        self.history.add(message)
        if self.runtime is not None:
            self.runtime.deliver(message)
            return
        send_to = message.send_to
        if MESSAGE_ROUTE_TO_ALL in send_to:
            if len(send_to) == 1 and MESSAGE_ROUTE_TO_ALL not in self._by_address:
                self._broadcast(message)
                return
            targets: Iterable[Role] = self.roles.values()  # also addressed by name: every role checks
        else:
            found: dict[int, Role] = {}
            by_address = self._by_address
            for address in message.send_to:
                held = by_address.get(address)
                if isinstance(held, list):
                    for role in held:
                        found[id(role)] = role
                elif held is not None:
                    found[id(held)] = held
            targets = found.values()
            if not found and send_to != {MESSAGE_ROUTE_TO_NONE}:
                logger.warning("message {} is addressed to {} but no role has that name", message.id,
                               sorted(message.send_to))
        sender = message.sent_from
        for role in targets:
            if role.name != sender:
                role.put_message(message)

    def _broadcast(self, message: Message) -> None:
        """Hand a broadcast to the roles that may react to it (see :meth:`rewire_role`); the others
        count it as ignored through the bus's ledger."""
        bus = self.bus
        sender = message.sent_from
        # the watcher index is reacts_to's rule for a message addressed to <all> alone (its cause
        # watched, not the role's own): a watcher's inbox takes it as already screened, as put_message
        # would; through put_message a delivery made 2.3x the Python calls (bench_framework.py (b))
        watchers = [role for role in bus.watchers.get(message.cause_by, {}).values() if role.name != sender]
        for role in watchers:
            role.rc.msg_buffer.push_screened(message)
        hearers = [role for role in bus.hear_all.values() if role.name != sender]
        for role in hearers:
            role.put_message(message)
        handed = watchers + hearers
        own = self.roles.get(sender)
        if own is not None and own.name == sender:
            handed.append(own)  # not sent to itself, and not ignored by it either
        bus.ledger.record(len(self.roles) - len(handed), (role.rc.msg_buffer for role in handed))

    def _deliver_round(self, outbox: list[Message]) -> None:
        """Deliver a round's messages in a fixed order: by sender (the roles' order), then as sent."""
        rank = self.bus.rank
        last = len(rank)
        order = sorted(range(len(outbox)), key=lambda i: (rank.get(outbox[i].sent_from, last), i))
        for i in order:
            self._deliver(outbox[i])

    @property
    def is_idle(self) -> bool:
        """True when no role has anything to read or do (only roles that received something are asked)."""
        if self.runtime is not None:
            return self.runtime.is_idle
        bus = self.bus
        return not bus.skipped and not bus.ledger.ignorers and all(role.is_idle for role in bus.ready.values())

    # ------------------------------------------------------------------ run
    async def run(self, k: int = 1) -> None:
        """Run ``k`` rounds; in each, every role with news takes its turn concurrently (at most
        ``max_concurrent_turns`` turns at once, started in the roles' order).

        Only roles whose inbox received something since their last turn are looked at
        (the inbox tells the environment), so a round costs what its active roles do,
        not the size of the team.
        """
        if self.runtime is not None:
            await self._run_on(self.runtime, k)
            return
        for _ in range(k):
            active = self._take_ready()
            if not active:
                return
            log = self.bus.run_log
            if log is not None and log.idle:  # nobody reads the turns' events
                log = None
            limit = check_concurrency(self.max_concurrent_turns, "Environment")  # (set after it was made)
            self.bus.outbox = []
            try:
                if log is None:
                    results = await run_turns(_run_role, active, limit)
                else:
                    # the round's start and messages ride with its calls' commits and its end (one
                    # write, before any message is delivered)
                    with log.hold():
                        log.emit(ROUND_STARTED, {"roles": [r.name for r in active]})
                        results = await run_turns(partial(logged_turn, log=log, in_round=True), active, limit)
                        # each turn that finished, with its message (a failed one logged its failure)
                        log.emit(ROUND_FINISHED, {"messages": len(self.bus.outbox or ()), "turns": {
                            role.name: (rsp.id if rsp is not None else None)
                            for role, rsp in zip(active, results, strict=True) if not isinstance(rsp, BaseException)
                        }})
            finally:
                outbox, self.bus.outbox = self.bus.outbox or [], None
                self._deliver_round(outbox)
            self._keep_unfinished(active)
            self._handle_failures(active, results)

    async def _run_on(self, runtime: Runtime, k: int) -> None:
        """Rounds whose turns are taken where ``runtime`` keeps the roles; the rest is as above."""
        for _ in range(k):
            if runtime.is_idle:
                return
            log = self.bus.run_log
            if log is not None:
                log.emit(ROUND_STARTED, {"runtime": type(runtime).__name__})
            outcome = await runtime.run_round(self)
            self._deliver_round(outcome.messages)
            if log is not None:
                log.emit(ROUND_FINISHED, {"messages": len(outcome.messages)})
            active = [self.roles[name] for name in outcome.active]
            self._handle_failures(active, [outcome.failures.get(name) for name in outcome.active])

    def _handle_failures(self, active: list[Role], results: list[Any]) -> None:
        failed = [(role, r) for role, r in zip(active, results, strict=True) if isinstance(r, BaseException)]
        if not failed:
            return
        errors = [(role, _typed(role, failure)) for role, failure in failed]
        for _, error in errors:
            if not isinstance(error, RolecastError):  # CancelledError, KeyboardInterrupt
                raise error
        for _, error in errors:
            if isinstance(error, (BudgetExceeded, UsageError, ApprovalPending)):  # (a pause: the run waits)
                raise error
        if self.on_error == "stop":
            raise errors[0][1]
        for role, error in errors:
            assert isinstance(error, RolecastError)
            self.errors.append(error)
            logger.error("{} failed this round and the team goes on: {}", role, error)


def _run_role(role: Role) -> Any:
    return role.run()  # (its class's run: an override too)


def _typed(role: Role, failure: BaseException) -> BaseException:
    """A role's failure as a rolecast error (a foreign one is chained, never flattened)."""
    if isinstance(failure, RolecastError) or not isinstance(failure, Exception):
        return failure
    error = ActionFailed(role.name, "run", failure)
    error.__cause__ = failure
    return error


__all__ = ["Environment"]

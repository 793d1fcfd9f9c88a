"""Environment: the message bus the roles of a team publish to, and the round runner."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Literal

from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SerializeAsAny, model_validator

from memory import MESSAGE_ROUTE_TO_ALL, Memory, Message
from rolecast.context import Context
from rolecast.errors import ActionFailed, BudgetExceeded, RolecastError, UsageError
from rolecast.runlog import RunLog
from rolecast.store import ROUND_FINISHED, ROUND_STARTED, TURN_FAILED, TURN_FINISHED, TURN_STARTED
from roles import Role


class Environment(BaseModel):
    """Holds roles and routes messages between them.

    Routing is an index lookup: ``send_to`` names (a role's name, profile or class
    path) map straight to the roles; ``"<all>"`` reaches every role. The sender never
    receives its own message. Each role filters what it receives by what it watches
    (see :meth:`roles.Role._observe`).

    ``on_error``: ``"stop"`` (default) re-raises the first failure of a round after
    every role has finished its turn; ``"continue"`` records failures in ``errors``
    and goes on. :class:`~rolecast.errors.BudgetExceeded` and usage errors (a mistake
    in the script, such as a scripted test model called too often) always stop.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    desc: str = ""
    roles: dict[str, SerializeAsAny[Role]] = Field(default_factory=dict)  # subclasses dump their own fields
    history: Memory = Field(default_factory=Memory)
    context: Context = Field(default_factory=Context, exclude=True)
    on_error: Literal["stop", "continue"] = "stop"
    errors: list[RolecastError] = Field(default_factory=list, exclude=True)

    _by_address: dict[str, list[Role]] = PrivateAttr(default_factory=dict)
    _indexed: dict[str, set[str]] = PrivateAttr(default_factory=dict)
    _outbox: list[Message] | None = PrivateAttr(default=None)  # a round's messages, delivered at its end
    _run_log: RunLog | None = PrivateAttr(default=None)

    @property
    def run_log(self) -> RunLog | None:
        """The write-ahead log of the team run this environment belongs to (None: not logged)."""
        return self._run_log

    def set_run_log(self, run_log: RunLog | None) -> None:
        self._run_log = run_log

    @model_validator(mode="after")
    def _wire_roles(self) -> Environment:
        """Roles that came in as data (a dump reloaded) join this environment like hired ones."""
        for role in list(self.roles.values()):
            role.set_env(self)
            self.set_addresses(role, role.addresses)
        return self

    # ---------------------------------------------------------------- roles
    def add_role(self, role: Role) -> None:
        if role.name in self.roles and self.roles[role.name] is not role:
            raise UsageError(f"a role named {role.name!r} is already in this environment")
        self.roles[role.name] = role
        role.set_env(self)
        self.set_addresses(role, role.addresses)

    def add_roles(self, roles: Iterable[Role]) -> None:
        for role in roles:
            self.add_role(role)

    def set_addresses(self, role: Role, addresses: Iterable[str]) -> None:
        """(Re)index the names a role answers to."""
        for address in self._indexed.pop(role.name, ()):
            self._by_address[address] = [r for r in self._by_address.get(address, []) if r is not role]
        self._indexed[role.name] = set(addresses)
        for address in addresses:
            self._by_address.setdefault(address, []).append(role)

    def get_role(self, name: str) -> Role | None:
        return self.roles.get(name)

    def get_roles(self) -> dict[str, Role]:
        return dict(self.roles)

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
        log = self._run_log
        if log is not None:
            known = log.recorded_message(message.sent_from, message.content, message.cause_by)
            if known is not None:
                message.id = known  # re-executing a recorded run: the message keeps its logged id
            else:
                log.message(message.model_dump(mode="json"))
        if self._outbox is not None:
            self._outbox.append(message)
        else:
            self._deliver(message)
        return True

    def _deliver(self, message: Message) -> None:
        self.history.add(message)
        if MESSAGE_ROUTE_TO_ALL in message.send_to:
            targets: Iterable[Role] = self.roles.values()
        else:
            found: dict[int, Role] = {}
            for address in message.send_to:
                for role in self._by_address.get(address, ()):
                    found[id(role)] = role
            targets = found.values()
            if not found:
                logger.warning("message {} is addressed to {} but no role has that name", message.id,
                               sorted(message.send_to))
        sender = message.sent_from
        for role in targets:
            if role.name != sender:
                role.put_message(message)

    def _deliver_round(self, outbox: list[Message]) -> None:
        """Deliver a round's messages in a fixed order: by sender (the roles' order), then as sent."""
        rank = {name: i for i, name in enumerate(self.roles)}
        last = len(rank)
        order = sorted(range(len(outbox)), key=lambda i: (rank.get(outbox[i].sent_from, last), i))
        for i in order:
            self._deliver(outbox[i])

    @property
    def is_idle(self) -> bool:
        """True when no role has anything to read or do."""
        return all(role.is_idle for role in self.roles.values())

    # ------------------------------------------------------------------ run
    async def run(self, k: int = 1) -> None:
        """Run ``k`` rounds; in each, every role with news takes its turn concurrently."""
        for _ in range(k):
            active = [role for role in self.roles.values() if not role.is_idle]
            if not active:
                return
            log = self._run_log
            if log is not None:
                log.emit(ROUND_STARTED, {"roles": [r.name for r in active]})
            self._outbox = []
            try:
                results = await asyncio.gather(*(self._turn(role) for role in active), return_exceptions=True)
            finally:
                outbox, self._outbox = self._outbox, None
                self._deliver_round(outbox)
            if log is not None:
                log.emit(ROUND_FINISHED, {"messages": len(outbox)})
            self._handle_failures(active, results)

    async def _turn(self, role: Role) -> Message | None:
        """One role's turn, logged: started, then finished (with its message) or failed."""
        log = self._run_log
        if log is None:
            return await role.run()
        log.emit(TURN_STARTED, role=role.name)
        try:
            rsp = await role.run()
        except BaseException as exc:
            log.emit(TURN_FAILED, {"type": type(exc).__name__, "error": str(exc)}, role=role.name)
            raise
        log.emit(TURN_FINISHED, {"message_id": rsp.id if rsp is not None else None}, role=role.name)
        return rsp

    def _handle_failures(self, active: list[Role], results: list[Any]) -> None:
        failed = [(role, r) for role, r in zip(active, results, strict=True) if isinstance(r, BaseException)]
        if not failed:
            return
        errors = [(role, _typed(role, failure)) for role, failure in failed]
        for _, error in errors:
            if not isinstance(error, RolecastError):  # CancelledError, KeyboardInterrupt
                raise error
        for _, error in errors:
            if isinstance(error, (BudgetExceeded, UsageError)):
                raise error
        if self.on_error == "stop":
            raise errors[0][1]
        for role, error in errors:
            assert isinstance(error, RolecastError)
            self.errors.append(error)
            logger.error("{} failed this round and the team goes on: {}", role, error)


def _typed(role: Role, failure: BaseException) -> BaseException:
    """A role's failure as a rolecast error (a foreign one is chained, never flattened)."""
    if isinstance(failure, RolecastError) or not isinstance(failure, Exception):
        return failure
    error = ActionFailed(role.name, "run", failure)
    error.__cause__ = failure
    return error

"""The runtime seam under :class:`~environment.Environment`: where roles live and take their turns.

The environment owns the history and the rules of a round; a runtime owns the roles.

* In-process (the default, ``runtime=None`` or ``"local"``): the roles are the
  environment's own objects and a round runs their turns side by side on one event loop
  (at most ``max_concurrent_turns`` at once, :mod:`environment.turns`) —
  :meth:`Environment.run`, unchanged and as fast as it was.
* :class:`~environment.ray_runtime.RayRuntime` (``"ray"``): roles are placed in groups
  on Ray actors; the environment hands it each message to deliver and asks it to run a
  round, which is a barrier across all actors.

Both follow the same rules, so a script gives the same history under either: a message
reaches the roles its ``send_to`` names (``"<all>"``: every role), never its sender;
messages published during a round are delivered when the round ends, ordered by sender
(the order the roles were hired) and then as each sender sent them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memory import MESSAGE_ROUTE_TO_ALL, Message
from rolecast.runs.log import RunLog
from rolecast.runs.store import TURN_FAILED, TURN_FINISHED, TURN_STARTED

if TYPE_CHECKING:
    from roles import Role


@dataclass
class RoundOutcome:
    """What one round gave: who took a turn, what they published, who failed."""

    active: list[str] = field(default_factory=list)
    #: every message published this round, each sender's in the order it sent them
    messages: list[Message] = field(default_factory=list)
    failures: dict[str, BaseException] = field(default_factory=dict)


@runtime_checkable
class Runtime(Protocol):
    """Where an environment's roles run (see the module docstring)."""

    def add_role(self, role: Role) -> None:
        """Take ``role`` into the runtime (it may be shipped elsewhere when the run starts)."""

    def deliver(self, message: Message) -> None:
        """Deliver ``message`` by the bus's addressing rules (read at the receivers' next turn)."""

    @property
    def is_idle(self) -> bool:
        """True when no role has anything to read or do."""

    async def run_round(self, env: Any) -> RoundOutcome:
        """Run one round of every role with news, as a barrier: return when all turns are done."""

    def close(self) -> None:
        """Release workers and connections."""


class Router:
    """The bus's addressing rules over role names: who receives a message."""

    def __init__(self) -> None:
        self.names: list[str] = []
        #: each name's place in the hiring order
        self.rank: dict[str, int] = {}
        self._by_address: dict[str, list[str]] = {}
        self._indexed: dict[str, set[str]] = {}

    def add(self, name: str, addresses: Iterable[str]) -> None:
        if name not in self.rank:
            self.rank[name] = len(self.names)
            self.names.append(name)
        self.set_addresses(name, addresses)

    def set_addresses(self, name: str, addresses: Iterable[str]) -> None:
        for address in self._indexed.pop(name, ()):
            self._by_address[address] = [n for n in self._by_address.get(address, []) if n != name]
        wanted = set(addresses)
        self._indexed[name] = wanted
        for address in wanted:
            self._by_address.setdefault(address, []).append(name)

    def addresses(self) -> dict[str, set[str]]:
        """Each role's addresses."""
        return self._indexed

    def targets(self, message: Message) -> list[str]:
        """The names of the roles ``message`` reaches, in hiring order, without its sender."""
        if MESSAGE_ROUTE_TO_ALL in message.send_to:
            found: Iterable[str] = self.names
        else:
            hit: set[str] = set()
            for address in message.send_to:
                hit.update(self._by_address.get(address, ()))
            found = sorted(hit, key=self.rank.__getitem__)
        return [name for name in found if name != message.sent_from]


async def logged_turn(role: Role, log: RunLog, *, in_round: bool = False) -> Message | None:
    """One role's turn, logged: started, then finished (with its message) or failed (every runtime).

    ``in_round=True``: the round's own events hold this turn's start and end — the in-process
    runtime runs a round's turns side by side (environment.turns), so its ``round_started``
    names the turns it starts and its ``round_finished`` each turn that finished, with the
    message it returned. The start and the end are then only passed to the log's subscribers
    (a console, traces), not written again. A failure is written as its own event either way.
    """
    if in_round:
        log.notify(TURN_STARTED, role=role.name)
    else:
        log.emit(TURN_STARTED, role=role.name)
    try:
        rsp = await role.run()
    except BaseException as exc:
        log.emit(TURN_FAILED, {"type": type(exc).__name__, "error": str(exc)}, role=role.name)
        raise
    end = {"message_id": rsp.id if rsp is not None else None}
    if in_round:
        log.notify(TURN_FINISHED, end, role=role.name)
    else:
        log.emit(TURN_FINISHED, end, role=role.name)
    return rsp


__all__ = ["RoundOutcome", "Router", "Runtime", "logged_turn"]

"""Mail between the Ray runtime's actors: each actor routes its own roles' messages, the driver none.

A :class:`Mailroom` lives in every :class:`~environment.ray_worker.RoleWorker`. It knows the
team's addressing (a :class:`~environment.runtime.Router` over every role's name, in hiring
order) and which actor holds each role. At the start of round ``r`` an actor routes what its
roles published in round ``r - 1``: what reaches its own roles stays in the actor; what
reaches another actor's roles goes there in one batch per actor and round, actor to actor
(an actor with nothing for a peer sends it an empty batch, so each knows when its mail is
complete). It then delivers its own and its peers' messages in the order the in-process
environment delivers a round's messages (by the sender's place in the hiring order, then as
each sender sent them), so every role's inbox, and the history, are the same.

Routing at the start of the next round, not at the end of this one, lets the driver first
hand every actor the addresses roles changed in the round (the in-process environment
delivers by the addresses as they are at the round's end).

Each actor keeps the batches it sent: an actor that died and was restarted asks its peers
for what they sent it, to re-execute its past rounds. Nothing here imports Ray.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from memory import Message

from .runtime import Router

#: where a message sits in the round's delivery order: (its sender's rank, the sending actor, its place there)
OrderKey = tuple[int, int, int]
#: messages for one actor: each with its order key and the names of the roles there that receive it
Batch = list[tuple[OrderKey, list[str], Message]]


class Routing:
    """The team's addressing and placement, as the driver sends it to every actor."""

    def __init__(
        self, names: list[str], addresses: Mapping[str, Iterable[str]], actor_of: Mapping[str, int],
        joined: Mapping[str, int] | None = None,
    ):
        self.names = names
        self.addresses = {name: sorted(addresses.get(name, ())) for name in names}
        self.actor_of = dict(actor_of)
        #: roles hired during the run: the rounds finished before they joined (their messages missed them)
        self.joined = dict(joined or {})

    def router(self) -> Router:
        router = Router()
        for name in self.names:
            router.add(name, self.addresses[name])
        return router


class Mailroom:
    """One actor's end of the mail (see the module docstring)."""

    def __init__(self, index: int):
        self.index = index
        self.peers: list[Any] = []  # every actor's handle, this one's included, by index
        self.router = Router()
        self.actor_of: dict[str, int] = {}
        self.joined: dict[str, int] = {}
        #: what this actor's roles published in its last round: routed at the start of the next
        self.outbox: list[Message] = []
        self.outbox_round = 0
        self._plan: tuple[Batch, dict[int, Batch]] | None = None
        self._incoming: dict[int, dict[int, Batch]] = {}
        self._arrived = asyncio.Event()
        self._consumed = 0  # the last round whose incoming mail was delivered
        #: the batches this actor sent, by round and receiving actor (asked for by a restarted peer)
        self.sent_log: dict[int, dict[int, Batch]] = {}

    def connect(self, peers: list[Any], routing: Routing) -> None:
        self.peers = peers
        self.router = routing.router()
        self.actor_of = routing.actor_of
        self.joined = routing.joined
        self._plan = None

    def set_outbox(self, messages: list[Message], round_no: int) -> tuple[int, int]:
        """Keep round ``round_no``'s messages for the next round; returns the deliveries they make (here,
        elsewhere)."""
        self.outbox, self.outbox_round = messages, round_no
        local, out = self._plan = self._route()
        return sum(len(names) for _, names, _ in local), sum(len(n) for b in out.values() for _, n, _ in b)

    def _route(self) -> tuple[Batch, dict[int, Batch]]:
        rank, last = self.router.rank, len(self.router.names)
        joined, sent_in = self.joined, self.outbox_round
        local: Batch = []
        out: dict[int, Batch] = {i: [] for i in range(len(self.peers)) if i != self.index}
        for pos, message in enumerate(self.outbox):
            key = (rank.get(message.sent_from, last), self.index, pos)
            by_actor: dict[int, list[str]] = {}
            for name in self.router.targets(message):
                if joined and joined.get(name, 0) >= sent_in:
                    continue  # hired after the round that sent it: in process it was delivered before
                by_actor.setdefault(self.actor_of[name], []).append(name)
            for actor, names in by_actor.items():
                (local if actor == self.index else out[actor]).append((key, names, message))
        return local, out

    def post(self, round_no: int) -> tuple[Batch, dict[int, Batch]]:
        """Route the last round's messages for ``round_no`` (by the addresses as they are now) and log the
        batches for the peers; returns what stays here and what goes to each peer."""
        local, out = self._plan if self._plan is not None else self._route()
        self._plan, self.outbox = None, []
        self.sent_log[round_no] = out
        return local, out

    def receive(self, round_no: int, sender: int, batch: Batch) -> None:
        """A peer's batch for ``round_no`` (again after a restart: the same batch, kept once)."""
        if round_no <= self._consumed:
            return
        self._incoming.setdefault(round_no, {})[sender] = batch
        self._arrived.set()

    async def collect(self, round_no: int) -> Batch:
        """Wait for every peer's batch for ``round_no``; returns them, merged."""
        expected = len(self.peers) - 1
        while len(self._incoming.get(round_no, {})) < expected:
            self._arrived = asyncio.Event()
            await self._arrived.wait()
        got = self._incoming.pop(round_no, {})
        self._consumed = max(self._consumed, round_no)
        return [entry for batch in got.values() for entry in batch]

    def sent_to(self, index: int) -> dict[int, Batch]:
        """Every batch this actor sent to actor ``index``, by round."""
        return {r: out[index] for r, out in self.sent_log.items() if index in out}


def in_order(*batches: Batch) -> list[tuple[list[str], Message]]:
    """A round's mail in the in-process delivery order (see the module docstring)."""
    merged = [entry for batch in batches for entry in batch]
    merged.sort(key=lambda entry: entry[0])
    return [(names, message) for _, names, message in merged]


__all__ = ["Batch", "Mailroom", "Routing", "in_order"]

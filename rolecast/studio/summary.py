"""What the studio keeps of each run between requests, and how much of it.

A run's :class:`RunSummary` is built from its events once and then brought up to date with the
events written since. There are two kinds, kept apart because they cost very differently:

* a *light* summary (its status, totals per role, lineage, pending approvals: a few hundred bytes
  whatever the run's length) is what the runs list needs, for every run, each time an open tab
  refreshes it; :class:`Summaries` keeps up to :data:`LIGHT_KEPT` of them;
* a *detailed* one also holds the run's messages (their text cut at 2,000 characters) and model
  calls, for a run's page (its graph) and a comparison; it is kept for the runs opened last, while
  they weigh at most :data:`DETAIL_BUDGET` bytes together (one bigger than that is read for its page
  and not kept). A detailed summary that goes is kept on as a light one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..runs import LLM_CALL, MESSAGE, RUN_STARTED, RUN_STOPPED, TURN_FAILED
from ..runs.events import APPROVAL_DECIDED, APPROVAL_REQUESTED, LINEAGE

ALL = "<all>"
#: the error a turn stops with to wait for a deferred approval (logged as its turn_failed)
PAUSE_ERROR = "ApprovalPending"
#: the kind of an event whose payload could not be read (see rolecast.studio.source)
DAMAGED = "damaged"
_WHOLE_PAYLOAD = frozenset({RUN_STARTED, RUN_STOPPED, TURN_FAILED, LINEAGE, APPROVAL_REQUESTED, APPROVAL_DECIDED})
#: light summaries kept (each a few hundred bytes)
LIGHT_KEPT = 20_000
#: what the detailed summaries kept may weigh together (bytes, about: their messages' texts and more)
DETAIL_BUDGET = 32 << 20
#: detailed summaries kept at most
DETAIL_KEPT = 32
#: the most of a run's idea a summary keeps (the list shows its start)
IDEA_KEPT = 2000


@dataclass
class RoleTotals:
    role: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency: float = 0.0
    failures: int = 0
    messages: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class MessageView:
    seq: int
    round: int
    sender: str
    receivers: list[str]
    content: str
    action: str
    #: sent to everyone on the bus (``send_to`` ``<all>``): ``receivers`` are then every other role
    to_all: bool = False


@dataclass
class PendingApproval:
    """An approval a run is waiting for (from the runs package's deferred approvals)."""

    approval_id: str
    role: str
    kind: str
    name: str
    arguments: dict[str, Any]
    schema: dict[str, Any] | None = None
    round: int = 0


def receivers_of(message: dict[str, Any], roles: list[str]) -> list[str]:
    """Whom a logged message went to: its ``send_to``, or every other role when sent to all."""
    sender = message.get("sent_from") or "user"
    targets = message.get("send_to") or [ALL]
    if ALL in targets:
        return [r for r in roles if r != sender]
    return [t for t in targets if t != sender]


class RunSummary:
    """What the studio keeps of a run between requests: its totals (and, ``detail``, its messages and
    calls), up to ``last_seq``.

    Built from the run's events once, then extended with the events written since (:meth:`add`):
    runs only grow, so a kept summary is never wrong, only behind."""

    def __init__(self, run_id: str, detail: bool = False):
        self.run_id = run_id
        self.detail = detail
        #: about how many bytes its messages and calls take
        self.weight = 0
        self.lock = threading.Lock()
        self.version = -1  # the store's data_version when last brought up to date (SQLite)
        self.last_seq = 0
        self.events = 0
        self.started = 0.0
        self.ended = 0.0
        self.last_round = 0
        self.first_start: dict[str, Any] = {}
        self.roles: list[str] = []
        self.starts = 0
        self.stops: list[str | None] = []
        self.totals: dict[str, RoleTotals] = {}
        self.messages: list[MessageView] = []
        self.calls: list[tuple[int, int, str, str, str]] = []
        #: a fork's or a rerun's origin: its lineage event's data
        self.lineage: dict[str, Any] = {}
        #: deferred approvals asked and not answered yet, by id
        self.pending: dict[str, PendingApproval] = {}
        #: events whose payload could not be read (not a JSON object)
        self.damaged = 0
        #: the command line that last started the run, as recorded (``argv``, ``cwd``, ``module``), if any
        self.command: dict[str, Any] = {}

    @property
    def stopped(self) -> bool:
        """Stopped since it last started (its status is then its stop's, whoever holds it)."""
        return bool(self.stops) and self.starts <= len(self.stops)

    def _totals(self, role: str) -> RoleTotals:
        row = self.totals.get(role)
        if row is None:
            row = self.totals[role] = RoleTotals(role)
        return row

    def add(self, news: Iterable[tuple[int, float, str, int, str, Any, str | None]]) -> None:
        for seq, ts, kind, rnd, role, facts, content in news:
            if kind in _WHOLE_PAYLOAD and not isinstance(facts, dict):
                facts = None  # (a payload of the wrong shape: read as an empty one)
            if not self.events:
                self.started = ts
            self.events += 1
            self.last_seq, self.ended = seq, ts
            self.last_round = max(self.last_round, rnd)
            if kind == LLM_CALL:
                prompt, completion, cost, latency, error, action, fp = facts
                row = self._totals(role or "-")
                row.calls += 1
                row.prompt_tokens += int(prompt or 0)
                row.completion_tokens += int(completion or 0)
                row.cost += float(cost or 0)
                row.latency += float(latency or 0)
                row.failures += bool(error)
                if self.detail:
                    self.calls.append((seq, rnd, role, str(action or ""), str(fp or "")))
                    self.weight += 200
            elif kind == MESSAGE:
                sender, send_to, cause = facts
                sender = str(sender or "user")
                send_to = [str(t) for t in send_to] if isinstance(send_to, list) else None
                self._totals(role or sender).messages += 1
                if self.detail:
                    receivers = receivers_of({"sent_from": sender, "send_to": send_to or []}, self.roles)
                    self.messages.append(MessageView(seq, rnd, sender, receivers, content or "",
                                                     str(cause or "").rsplit(".", 1)[-1], ALL in (send_to or [ALL])))
                    self.weight += 300 + 2 * len(content or "")
            elif kind == DAMAGED:
                self.damaged += 1
            elif kind == TURN_FAILED and (facts or {}).get("type") != PAUSE_ERROR:
                self._totals(role or "-").failures += 1
            elif kind == RUN_STARTED:
                self.starts += 1
                command = (facts or {}).get("command")
                if isinstance(command, dict) and isinstance(command.get("argv"), list) and command["argv"]:
                    self.command = command
                if not self.first_start:
                    first = facts or {}
                    self.first_start = {"idea": str(first.get("idea", ""))[:IDEA_KEPT],
                                        "team": str(first.get("team", ""))[:IDEA_KEPT]}
                    self.roles = [str(r.get("name", "?")) for r in first.get("roles", [])]
            elif kind == RUN_STOPPED:
                self.stops.append((facts or {}).get("reason"))
            elif kind == LINEAGE:
                self.lineage = facts or {}
            elif kind == APPROVAL_REQUESTED and facts:
                key = str(facts.get("id", ""))
                self.pending[key] = PendingApproval(
                    key, str(facts.get("role", role)), str(facts.get("kind", "tool")), str(facts.get("name", "")),
                    facts.get("arguments") or {}, facts.get("schema"), int(facts.get("round", rnd) or 0))
            elif kind == APPROVAL_DECIDED and facts:
                self.pending.pop(str(facts.get("id", "")), None)

    def lightened(self) -> RunSummary:
        """A light copy (everything but the messages and calls; called holding :attr:`lock`)."""
        light = RunSummary(self.run_id)
        light.version, light.last_seq, light.events = self.version, self.last_seq, self.events
        light.started, light.ended, light.last_round = self.started, self.ended, self.last_round
        light.first_start, light.roles, light.starts = dict(self.first_start), list(self.roles), self.starts
        light.stops, light.lineage, light.pending = list(self.stops), dict(self.lineage), dict(self.pending)
        light.totals = {role: replace(t) for role, t in self.totals.items()}
        light.command, light.damaged = self.command, self.damaged
        return light


class Summaries:
    """The kept summaries: light ones by run id, detailed ones by run id, each least recently used first.

    :meth:`take` gives the summary to bring up to date and use; :meth:`settle` then applies the
    bounds. A detailed summary serves a light request too (it holds all a light one does)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.light: dict[str, RunSummary] = {}
        self.detailed: dict[str, RunSummary] = {}

    def take(self, run_id: str, detail: bool) -> RunSummary:
        with self.lock:
            found = self.detailed.pop(run_id, None)
            if found is not None:
                self.detailed[run_id] = found  # (most recently used last)
                return found
            if detail:
                self.light.pop(run_id, None)
                found = self.detailed[run_id] = RunSummary(run_id, detail=True)
                return found
            found = self.light.pop(run_id, None) or RunSummary(run_id)
            self.light[run_id] = found
            return found

    def replace(self, summary: RunSummary) -> RunSummary:
        """A fresh summary in the place of ``summary`` (its run was deleted, and maybe written anew)."""
        fresh = RunSummary(summary.run_id, detail=summary.detail)
        fresh.lock = summary.lock
        with self.lock:
            (self.detailed if summary.detail else self.light)[summary.run_id] = fresh
        return fresh

    def forget(self, run_id: str) -> None:
        with self.lock:
            self.light.pop(run_id, None)
            self.detailed.pop(run_id, None)

    def settle(self) -> None:
        """Apply the bounds: the oldest detailed summaries become light ones while they weigh too much
        (the one just read too, when it alone is over the budget), the oldest light ones go."""
        with self.lock:
            while self.detailed and (len(self.detailed) > DETAIL_KEPT
                                     or sum(s.weight for s in self.detailed.values()) > DETAIL_BUDGET):
                run_id = next(iter(self.detailed))
                summary = self.detailed.pop(run_id)
                if summary.lock.acquire(blocking=False):  # (one being read now is dropped: read again later)
                    try:
                        self.light[run_id] = summary.lightened()
                    finally:
                        summary.lock.release()
            while len(self.light) > LIGHT_KEPT:
                self.light.pop(next(iter(self.light)))


__all__ = ["DETAIL_BUDGET", "LIGHT_KEPT", "MessageView", "PendingApproval", "RoleTotals", "RunSummary", "Summaries",
           "receivers_of"]

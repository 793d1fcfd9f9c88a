"""The studio's one door to the runs: everything the pages show or change goes through here.

The web layer (:mod:`rolecast.studio.app`) never touches a store itself; it asks a
:class:`RunSource` for plain values (:class:`RunRow`, :class:`EventView`, :class:`RoleTotals`,
:class:`MessageEdge` …) and for the steering operations. Keeping it in one small module means
the studio follows the run store (:mod:`rolecast.runs`: stores opened by path or URL, leases;
forks and approvals from outside the process as they come) by changing this file only.

Reading is built for big runs. A page of events is one range read on the store's primary key
``(run_id, seq)``. What a page shows of the whole run (its totals per role, its messages for the
graph, its calls for a comparison, its status and pending approvals) is a :class:`RunSummary`,
built once from the run's events, with SQLite's ``json_extract`` picking the few fields it needs
out of each payload (no prompt text is decoded in Python), then kept and brought up to date with
the events written since; with nothing written (SQLite's ``data_version``), not even that. A
``postgresql://`` store, or a store object, gives the same answers through its ``events()``.
The model calls of a page come with their full requests (every message, the settings:
:mod:`rolecast.runs.requests`), their texts read from the store's ``texts`` table at once.

Steering goes through the runs package too: an approval a run waits for is answered with
:func:`rolecast.runs.approvals.decide` (an ``approval_decided`` event; the run goes on when its
script runs again under its id), and a fork is :func:`rolecast.runs.lineage.fork_run`. For those
two steps only, the store is opened to write.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, StoreError, UsageError
from ..runs import (
    LLM_CALL,
    MESSAGE,
    RUN_STARTED,
    RUN_STOPPED,
    TURN_FAILED,
    RunEvent,
    RunStore,
    open_store,
)
from ..runs.approvals import VERDICTS
from ..runs.approvals import decide as decide_approval
from ..runs.events import APPROVAL_DECIDED, APPROVAL_REQUESTED, FORMAT_VERSION, LINEAGE, decode_payload, upgrade
from ..runs.lease import Holder, gone
from ..runs.lineage import fork_run
from ..runs.requests import CallRequest, requests_of
from ..runs.store import POSTGRES_SCHEMES

ALL = "<all>"
#: the graph's node for the messages sent to everyone
EVERYONE = "everyone"
#: events on one page of a run (the rest is a click, or the JSON API, away)
PAGE_SIZE = 200
#: the most a client may ask for in one page of the JSON API
MAX_PAGE = 2000
#: runs whose summary (totals, messages, calls) the studio keeps between requests
SUMMARIES_KEPT = 256

# a run's status, as the list and the run's header show it
RUNNING, FINISHED, FAILED, WAITING = "running", "finished", "failed", "waiting for approval"
#: started, never stopped, and no live process holds it: its process died (or it predates leases)
INTERRUPTED = "interrupted"
#: stopped for a deferred approval that has been answered since: its script, run again, goes on
PAUSED = "paused"
STATUSES = (RUNNING, WAITING, PAUSED, FINISHED, FAILED, INTERRUPTED)
_FINISHED_REASONS = frozenset({"n_round", "idle"})
#: the error a turn stops with to wait for a deferred approval (logged as its turn_failed)
PAUSE_ERROR = "ApprovalPending"


@dataclass
class RunRow:
    """One run as the list shows it."""

    run_id: str
    status: str
    stop_reason: str | None
    roles: list[str]
    rounds: int
    calls: int
    tokens: int
    cost: float
    started: float
    ended: float
    events: int
    idea: str = ""
    team: str = ""
    #: the run this one was forked from or re-run against, with how ("fork", "reuse") and where
    parent: str | None = None
    lineage: str = ""
    failures: int = 0
    #: a fork's round: its events of rounds 1 … this were copied from the parent (None: not a fork)
    fork_at: int | None = None

    @property
    def duration(self) -> float:
        return max(0.0, self.ended - self.started)

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "status": self.status, "stop_reason": self.stop_reason, "roles": self.roles,
            "rounds": self.rounds, "calls": self.calls, "tokens": self.tokens, "cost": self.cost,
            "started": self.started, "duration": self.duration, "events": self.events, "idea": self.idea,
            "team": self.team, "parent": self.parent, "lineage": self.lineage, "failures": self.failures,
        }


@dataclass
class EventView:
    """One event of a run, decoded, with what the page needs to draw it."""

    seq: int
    ts: float
    kind: str
    round: int
    role: str
    data: dict[str, Any]
    #: a model call's full request (every message, the settings), read from the store's texts
    request: CallRequest | None = None

    def as_json(self) -> dict[str, Any]:
        out = {"seq": self.seq, "ts": self.ts, "kind": self.kind, "round": self.round, "role": self.role,
               "data": self.data}
        if self.request is not None:
            out["request"] = self.request.as_json()
        return out

    @property
    def failed(self) -> bool:
        if self.kind == LLM_CALL:
            return bool(self.data.get("error"))
        return self.kind == TURN_FAILED and not self.paused

    @property
    def paused(self) -> bool:
        """A turn that stopped to wait for a deferred approval: a pause, not a failure."""
        return self.kind == TURN_FAILED and self.data.get("type") == PAUSE_ERROR


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
class MessageEdge:
    """Who said something to whom in a round: the graph's edges (one per sender, receiver, round)."""

    round: int
    sender: str
    receiver: str
    seqs: list[int] = field(default_factory=list)


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


def status_of(starts: int, stops: list[str | None], waiting: bool = False, held: bool | None = True) -> str:
    """A run's status from its log: the reason of its last stop, unless it started again since.
    ``held``: whether a live process holds the run's lease (None: the store cannot tell); a run
    that has not stopped and that nobody holds was interrupted."""
    if waiting:
        return WAITING
    if not stops or starts > len(stops):
        return INTERRUPTED if held is False else RUNNING
    reason = stops[-1] or ""
    if reason.startswith("waiting"):
        return PAUSED
    return FINISHED if reason in _FINISHED_REASONS else FAILED


def receivers_of(message: dict[str, Any], roles: list[str]) -> list[str]:
    """Whom a logged message went to: its ``send_to``, or every other role when sent to all."""
    sender = message.get("sent_from") or "user"
    targets = message.get("send_to") or [ALL]
    if ALL in targets:
        return [r for r in roles if r != sender]
    return [t for t in targets if t != sender]


class RunSummary:
    """What the studio keeps of a run between requests: its totals, messages and calls, up to ``last_seq``.

    Built from the run's events once, then extended with the events written since (:meth:`add`):
    runs only grow, so a kept summary is never wrong, only behind."""

    def __init__(self, run_id: str):
        self.run_id = run_id
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
                self.calls.append((seq, rnd, role, str(action or ""), str(fp or "")))
            elif kind == MESSAGE:
                sender, send_to, cause = facts
                sender = sender or "user"
                self._totals(role or sender).messages += 1
                receivers = receivers_of({"sent_from": sender, "send_to": send_to or []}, self.roles)
                self.messages.append(MessageView(seq, rnd, sender, receivers, content or "",
                                                 str(cause or "").rsplit(".", 1)[-1], ALL in (send_to or [ALL])))
            elif kind == TURN_FAILED and (facts or {}).get("type") != PAUSE_ERROR:
                self._totals(role or "-").failures += 1
            elif kind == RUN_STARTED:
                self.starts += 1
                if not self.first_start:
                    self.first_start = facts or {}
                    self.roles = [str(r.get("name", "?")) for r in self.first_start.get("roles", [])]
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


class RunSource:
    """The runs of one store, for the studio (see the module docstring).

    ``store`` is a path to a SQLite run store or a ``sqlite:///`` URL (the studio opens the file
    read-only: it never writes the file a team is running into), a ``postgresql://`` URL, or a
    :class:`~rolecast.runs.RunStore` (which stays its owner's to close).
    """

    def __init__(self, store: str | os.PathLike[str] | RunStore):
        self.store: RunStore | None = None
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._summaries: dict[str, RunSummary] = {}  # by run id, least recently used first
        self._ids: tuple[int, list[str]] | None = None  # the run ids, newest first, and the data_version read at
        self._location = store if isinstance(store, RunStore) else os.fspath(store)
        #: the store as it may be shown (a URL's password hidden)
        self.where = redact(os.fspath(store)) if isinstance(store, (str, os.PathLike)) else repr(store)
        self.path: Path | None = None
        if isinstance(store, (str, os.PathLike)) and not os.fspath(store).strip().startswith(POSTGRES_SCHEMES):
            self.path = Path(sqlite_path(os.fspath(store)))
            if not self.path.exists():
                raise ConfigError(f"no run store at {self.path} (run a team first, or pass --store PATH|URL)")
            try:
                # read-only: a page view must never take the write lock from a running team
                self._db = sqlite3.connect(f"file:{self.path.resolve()}?mode=ro", uri=True, check_same_thread=False)
                self._db.execute("SELECT 1 FROM events LIMIT 1").fetchall()
                found = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            except sqlite3.Error as exc:
                raise ConfigError(f"cannot read the run store {self.path}: {exc}") from exc
            if found > FORMAT_VERSION:  # (the fields picked by SQL below are those of formats 1 and 2)
                self._db.close()
                raise ConfigError(f"the run store {self.path} holds payload format {found}; this version of "
                                  f"rolecast reads formats 1 to {FORMAT_VERSION}: upgrade rolecast to read it")
        elif isinstance(store, (str, os.PathLike, RunStore)):
            self.store = open_store(store, read_only=True)  # a postgresql:// URL, or a store object
            self.path = getattr(self.store, "path", None)
        else:
            raise ConfigError(f"the studio reads a store path, URL or RunStore, not {type(store).__name__}")
        self._owned = not isinstance(store, RunStore)  # (closed by close())

    def __repr__(self) -> str:
        return f"RunSource({self.where!r})"

    def close(self) -> None:
        """Close what this source opened (a store object it was given stays open: it is its owner's)."""
        if self._db is not None:
            self._db.close()
            self._db = None
        elif self.store is not None and self._owned:
            self.store.close()

    # ------------------------------------------------------------------ reading
    def _sql(self, query: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        assert self._db is not None
        with self._lock:
            try:
                return self._db.execute(query, tuple(params)).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"could not read the run store {self.path}: {exc}") from exc

    def _all(self, run_id: str, kinds: Iterable[str] | None = None) -> Iterator[RunEvent]:
        assert self.store is not None
        return self.store.events(run_id, kinds)

    def runs(self, search: str = "", status: str = "", limit: int = 200) -> list[RunRow]:
        """The runs, newest first; ``search`` matches the id, the idea, the team or a role (any case),
        ``status`` one of running / finished / failed / waiting for approval."""
        if self._db is not None:
            version = self._version()
            if self._ids is None or self._ids[0] != version:  # (a scan of the table: only after a write)
                self._ids = (version, [run_id for (run_id,) in self._sql(
                    "SELECT run_id FROM events GROUP BY run_id ORDER BY MIN(ts) DESC")])
            ids = self._ids[1]
        else:
            assert self.store is not None
            ids = [info.run_id for info in self.store.runs()]
        rows = []
        needle = search.strip().lower()
        for run_id in ids:
            try:
                row = self._row(self.summary(run_id))
            except StoreError as exc:  # (a damaged run: listed as such; the others read)
                row = RunRow(run_id, "damaged", str(exc), [], 0, 0, 0, 0.0, 0.0, 0.0, 0)
            if needle and not any(needle in text.lower() for text in (row.run_id, row.idea, row.team, *row.roles)):
                continue
            if status and row.status != status:
                continue
            rows.append(row)
            if len(rows) >= limit:
                break
        return rows

    def _row(self, summary: RunSummary) -> RunRow:
        first = summary.first_start
        totals = summary.totals.values()
        parent, lineage = _lineage(summary.lineage)
        return RunRow(
            summary.run_id,
            status_of(summary.starts, summary.stops, bool(summary.pending),
                      self.held(summary.run_id) if not summary.stopped else None),
            summary.stops[-1] if summary.stops else None, list(summary.roles), summary.last_round,
            sum(t.calls for t in totals), sum(t.tokens for t in totals), sum(t.cost for t in totals),
            summary.started, summary.ended, summary.events, idea=str(first.get("idea", "")),
            team=str(first.get("team", "")), parent=parent, lineage=lineage, failures=sum(t.failures for t in totals),
            fork_at=summary.lineage.get("at") if summary.lineage.get("relation") == "fork" else None,
        )

    def summary(self, run_id: str) -> RunSummary:
        """The run's totals, messages and model calls, read once and then kept: a later call reads
        only the events written since (a finished run costs nothing more; a running one, its news)."""
        with self._lock:
            summary = self._summaries.pop(run_id, None)
            if summary is None:
                summary = RunSummary(run_id)
            self._summaries[run_id] = summary  # most recently used last
            while len(self._summaries) > SUMMARIES_KEPT:
                self._summaries.pop(next(iter(self._summaries)))
        with summary.lock:
            if self._db is None:
                summary.add(self._news(run_id, summary.last_seq))
                return summary
            version = self._version()
            if summary.version == version:
                return summary  # nothing was written to the file since it was read
            if summary.last_seq and self.last_seq(run_id) < summary.last_seq:  # deleted (and written anew?)
                fresh = RunSummary(run_id)
                fresh.lock = summary.lock
                summary = fresh
                with self._lock:
                    self._summaries[run_id] = summary
            summary.add(self._news(run_id, summary.last_seq))
            summary.version = version
        return summary

    def _version(self) -> int:
        """SQLite's ``data_version``: another connection's commit changes it (so a kept answer is current
        while it stays the same; one call, no read of the file)."""
        return int(self._sql("PRAGMA data_version")[0][0])

    def _news(self, run_id: str, after: int) -> Iterator[tuple[int, float, str, int, str, Any, str | None]]:
        """``(seq, ts, kind, round, role, facts, content)`` of the run's events after ``after``: for a model
        call its usage, cost, latency, error, action and fingerprint (a list); for a message its sender,
        addressees and action (a list) and its text (cut at 2,000 characters); for a start, stop or failure
        its payload (a dict); nothing for the others."""
        if self._db is not None:
            # SQLite picks the few fields out of each payload itself (one parse: json_extract of several
            # paths gives them as one JSON array): no prompt text crosses into Python
            rows = self._sql(
                """SELECT seq, ts, kind, round, role,
                          CASE kind
                            WHEN 'llm_call' THEN json_extract(data, '$.response.usage.prompt_tokens',
                                 '$.response.usage.completion_tokens', '$.cost', '$.latency', '$.error', '$.action',
                                 '$.fingerprint')
                            WHEN 'message' THEN json_extract(data, '$.message.sent_from', '$.message.send_to',
                                 '$.message.cause_by')
                            WHEN 'run_started' THEN data WHEN 'run_stopped' THEN data WHEN 'turn_failed' THEN data
                            WHEN 'lineage' THEN data WHEN 'approval_requested' THEN data
                            WHEN 'approval_decided' THEN data
                          END,
                          CASE kind WHEN 'message' THEN substr(json_extract(data, '$.message.content'), 1, 2000) END
                   FROM events WHERE run_id = ? AND seq > ? ORDER BY seq""", (run_id, after))
            for seq, ts, kind, rnd, role, picked, content in rows:
                yield seq, ts, kind, rnd, role, json.loads(picked) if picked is not None else None, content
            return
        for e in self._all(run_id):
            if e.seq <= after:
                continue
            d = e.data
            facts: Any = None
            content = None
            if e.kind == LLM_CALL:
                usage = d.get("response", {}).get("usage", {})
                facts = [usage.get("prompt_tokens"), usage.get("completion_tokens"), d.get("cost"), d.get("latency"),
                         d.get("error"), d.get("action"), d.get("fingerprint")]
            elif e.kind == MESSAGE:
                m = d.get("message", {})
                facts = [m.get("sent_from"), m.get("send_to"), m.get("cause_by")]
                content = str(m.get("content", ""))[:2000]
            elif e.kind in (RUN_STARTED, RUN_STOPPED, TURN_FAILED, LINEAGE, APPROVAL_REQUESTED, APPROVAL_DECIDED):
                facts = d
            yield e.seq, e.ts, e.kind, e.round, e.role, facts, content

    def run(self, run_id: str) -> RunRow:
        """One run's header; a :class:`~rolecast.errors.UsageError` naming recent runs when there is none."""
        summary = self.summary(run_id)
        if not summary.events:
            with self._lock:
                self._summaries.pop(run_id, None)  # (not kept for a run that is not there)
            recent = ", ".join(r.run_id for r in self.runs(limit=5)) or "none"
            raise UsageError(f"no run {run_id!r} in the store (recent runs: {recent})")
        return self._row(summary)

    def events(self, run_id: str, after: int = 0, limit: int = PAGE_SIZE) -> list[EventView]:
        """The run's events with ``seq > after``, in order, at most ``limit`` of them (one range read
        on the store's primary key)."""
        limit = max(1, min(int(limit), MAX_PAGE))
        if self._db is not None:
            rows = self._sql("SELECT seq, ts, kind, round, role, data FROM events WHERE run_id = ? AND seq > ? "
                             "ORDER BY seq LIMIT ?", (run_id, int(after), limit))
            out = [EventView(seq, ts, kind, rnd, role, upgrade(kind, decode_payload(run_id, seq, kind, data)))
                   for seq, ts, kind, rnd, role, data in rows]
        else:
            out = []
            for e in self._all(run_id):
                if e.seq > after:
                    out.append(EventView(e.seq, e.ts, e.kind, e.round, e.role, upgrade(e.kind, e.data)))
                    if len(out) >= limit:
                        break
        calls = [view for view in out if view.kind == LLM_CALL]
        for view, request in zip(calls, requests_of(self.texts, [view.data for view in calls]), strict=True):
            view.request = request  # (the page's calls' texts: one read)
        return out

    def texts(self, keys: Iterable[str]) -> dict[str, str]:
        """The store's texts under ``keys`` (model calls' messages: see rolecast.runs.requests)."""
        if self._db is None:
            assert self.store is not None
            return self.store.texts(keys)
        wanted, found = list(keys), dict[str, str]()
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            try:
                found.update(self._sql(f"SELECT key, text FROM texts WHERE key IN ({', '.join('?' * len(chunk))})",
                                       chunk))
            except StoreError as exc:
                if "no such table" in str(exc):  # a store of an older format: no texts (calls show their summary)
                    return {}
                raise
        return found

    def held(self, run_id: str) -> bool | None:
        """Whether a live process holds the run (its lease; see :mod:`rolecast.runs.lease`); None when
        the store cannot say (a store of an earlier version, with no leases)."""
        if self._db is not None:
            try:
                row = self._sql("SELECT host, pid, started, token, since, heartbeat FROM leases WHERE run_id = ?",
                                (run_id,))
            except StoreError:
                return None  # no leases table: written before leases were
            return bool(row) and not gone(Holder(*row[0]))
        assert self.store is not None
        return self.store.holder(run_id) is not None

    def last_seq(self, run_id: str) -> int:
        if self._db is not None:
            return int(self._sql("SELECT MAX(seq) FROM events WHERE run_id = ?", (run_id,))[0][0] or 0)
        return max((e.seq for e in self._all(run_id)), default=0)

    def page_starts(self, run_id: str, size: int = PAGE_SIZE) -> list[int]:
        """The ``after`` of each page of the run: the pager's links (a run's seqs are 1, 2, 3 …)."""
        return list(range(0, self.summary(run_id).last_seq, size))

    def role_totals(self, run_id: str) -> list[RoleTotals]:
        """Per role: model calls, tokens, cost, latency, failures and messages sent."""
        return [replace(t) for t in self.summary(run_id).totals.values()]

    def messages(self, run_id: str) -> list[MessageView]:
        """Every message of the run (its text cut at 2,000 characters), for the graph and the comparison."""
        return list(self.summary(run_id).messages)

    def edges(self, messages: list[MessageView]) -> list[MessageEdge]:
        """The message graph: one edge per (round, sender, receiver), with the messages on it; a message
        to everyone is one edge to :data:`EVERYONE` (not one to each role: the graph would be a hairball)."""
        found: dict[tuple[int, str, str], MessageEdge] = {}
        for m in messages:
            for receiver in [EVERYONE] if m.to_all else (m.receivers or ["(nobody)"]):
                edge = found.setdefault((m.round, m.sender, receiver), MessageEdge(m.round, m.sender, receiver))
                edge.seqs.append(m.seq)
        return list(found.values())

    def call_keys(self, run_id: str) -> list[tuple[int, int, str, str, str]]:
        """Each model call as ``(seq, round, role, action, fingerprint)``: where two runs' calls part."""
        return list(self.summary(run_id).calls)

    # ----------------------------------------------------------------- steering
    def pending_approvals(self, run_id: str) -> list[PendingApproval]:
        """The deferred approvals ``run_id`` waits for (asked in its log, not answered yet), in order."""
        return list(self.summary(run_id).pending.values())

    @contextmanager
    def _writable(self) -> Iterator[RunStore]:
        """The store, opened to write for one steering step (the studio reads it read-only otherwise);
        a SQLite file that is no longer there is an error, never a new, empty store."""
        if self.store is not None and not self._owned:
            yield self.store  # a store object the studio was given: its owner's, written as it is
            return
        if self.path is not None and not self.path.exists():
            raise ConfigError(f"the run store {self.path} is gone: nothing to steer")
        store = open_store(str(self.path) if self.path is not None else self._location)
        assert store is not None
        try:
            yield store
        finally:
            store.close()

    def decide(self, run_id: str, approval_id: str, verdict: str, *, reason: str = "",
               arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Answer a pending approval: ``approve``, ``reject`` (with a reason) or ``edit`` (with arguments,
        checked against the tool's schema); the decision written. The run goes on when its script runs
        again under its id (:meth:`continue_command`)."""
        if verdict not in VERDICTS:
            raise UsageError(f"an approval is answered with approve, reject or edit, not {verdict!r}")
        if verdict == "edit" and not isinstance(arguments, dict):
            raise UsageError("an edit gives the call's arguments as a JSON object")
        if verdict == "reject" and not reason.strip():
            raise UsageError("a rejection needs a reason (the role is told it)")
        with self._writable() as store:
            return decide_approval(store, run_id, approval_id, verdict, reason=reason,
                                   arguments=arguments if verdict == "edit" else None, by="rolecast studio")

    def fork(self, run_id: str, at_round: int) -> str:
        """A new run that starts as ``run_id`` was at the end of round ``at_round`` (its events of rounds
        1 … ``at_round`` copied after a lineage event; the parent is only read); its id."""
        with self._writable() as store:
            return fork_run(store, run_id, at_round)

    def continue_command(self, run: RunRow) -> str:
        """How a person continues ``run``: its script, run again under its id (the logged rounds, or a
        fork's copied ones, are answered from the log; a decided approval goes on as decided)."""
        store = shlex.quote(str(self.path) if self.path else self.where)
        return (f"ROLECAST_STORE={store} python your_script.py   "
                f"# with Team(run_id={run.run_id!r}): the logged rounds replay, then the run goes on")


def redact(where: str) -> str:
    """A store's path or URL as it may be printed or shown: a URL's password replaced by ``***``."""
    scheme, sep, rest = where.partition("://")
    credentials, at, host = rest.rpartition("@")
    if sep and at and ":" in credentials:
        return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"
    return where


def sqlite_path(where: str) -> str:
    """The file of a SQLite store given as a path or a ``sqlite:///`` URL (as :func:`~rolecast.runs.open_store`
    reads it: ``sqlite:///rel.db`` is relative, ``sqlite:////abs.db`` absolute)."""
    text = where.strip()
    if text.startswith("sqlite://"):
        text = text[len("sqlite://"):]
        if text.startswith("/") and not text.startswith("//"):
            text = text[1:]
    return text


def _lineage(lineage: dict[str, Any]) -> tuple[str | None, str]:
    """The parent run and how this run came from it (its lineage event: a fork at a round, or a rerun
    reusing the parent's answers); ``(None, "")`` for a run of its own."""
    parent = lineage.get("parent")
    if not parent:
        return None, ""
    if lineage.get("relation") == "fork":
        return str(parent), f"fork at round {lineage.get('at', '?')}"
    return str(parent), "reuses" if lineage.get("relation") == "reuse" else str(lineage.get("relation", ""))


__all__ = [
    "EVERYONE", "FAILED", "FINISHED", "INTERRUPTED", "PAGE_SIZE", "PAUSED", "RUNNING", "STATUSES", "WAITING",
    "EventView", "MessageEdge", "MessageView", "PendingApproval", "RoleTotals", "RunRow", "RunSource", "receivers_of",
    "redact", "sqlite_path", "status_of",
]

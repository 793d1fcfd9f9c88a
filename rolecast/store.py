"""The run store: an append-only log of everything a run does, written before it takes effect.

A run is a sequence of :class:`RunEvent` records — run started, round begun, message
published, model call answered, role turn started / finished / failed, round ended,
run stopped — each with the run's id, a sequence number, the round and the role it
belongs to, and a JSON payload. Where a round starts every turn at once and gathers them
(in process), the round's events hold its turns: ``round_started`` lists the roles it
starts and ``round_finished`` each turn that finished, with the id of the message it
returned (a failed turn has its ``turn_failed``); where turns start and end apart (the Ray
runtime's workers), each has a ``turn_started`` and a ``turn_finished`` event of its own.
The log is the single source of truth for resuming a run, replaying it with no model,
and inspecting it (``rolecast runs ...``).

:class:`RunStore` is deliberately narrow — ``append``, ``extend`` (a batch in one
transaction), ``events``, ``runs``, ``close`` — so that a PostgreSQL store (for runs
spread over several machines) implements the same five methods.
:class:`SQLiteRunStore` is the embedded default: one file, WAL mode, one committed
transaction per write, and a journal (:mod:`rolecast.journal`) that makes a model call
durable with one copy, before the transaction that writes it. The run's
:class:`~rolecast.runlog.RunLog` decides when to write: a model call answered is durable
before its answer is used, so a crash (even ``kill -9``) loses at most the model calls in
flight.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from loguru import logger
from pydantic_core import to_json

from . import journal as _journal
from .errors import ConfigError, StoreError

DEFAULT_STORE_PATH = Path(".rolecast") / "runs.db"

# Event kinds, in the order a run writes them.
RUN_STARTED = "run_started"
ROUND_STARTED = "round_started"
MESSAGE = "message"
LLM_CALL = "llm_call"
TURN_STARTED = "turn_started"
#: a role's answer to "which action next?" was not a valid choice; its turn ended ({"raw", "n_options"})
STATE_INVALID = "state_invalid"
TURN_FINISHED = "turn_finished"
TURN_FAILED = "turn_failed"
ROUND_FINISHED = "round_finished"
RUN_STOPPED = "run_stopped"
CHECKPOINT = "checkpoint"
# Events the run log writes at once (a model call: before its answer is used). The others
# ride with the next write: they are re-derived by re-executing the run, while a model call
# (paid for) must never be lost once answered.
DURABLE_KINDS = frozenset({RUN_STARTED, LLM_CALL, TURN_FAILED, ROUND_FINISHED, RUN_STOPPED, CHECKPOINT})
EVENT_KINDS = (
    RUN_STARTED, ROUND_STARTED, MESSAGE, LLM_CALL, TURN_STARTED, STATE_INVALID, TURN_FINISHED, TURN_FAILED,
    ROUND_FINISHED, RUN_STOPPED, CHECKPOINT,
)


class RunEvent:
    """One record of a run's log.

    ``data`` is the payload; ``text`` its JSON, which is what a store writes. An event made from
    JSON text (``RunEvent(..., text=...)``: a message the writer encoded already, a record the log
    encoded when it was logged) decodes ``data`` only when something reads it, and an event made
    from ``data`` encodes its text once, when a store first asks."""

    __slots__ = ("_data", "_text", "kind", "role", "round", "run_id", "seq", "ts")

    def __init__(
        self, run_id: str, kind: str, data: dict[str, Any] | None = None, round: int = 0, role: str = "",
        seq: int = 0, ts: float | None = None, *, text: str | None = None,
    ):
        self.run_id = run_id
        self.kind = kind
        self._data = data if data is not None or text is not None else {}
        self._text = text
        self.round = round
        self.role = role
        self.seq = seq  # assigned by the store on append
        self.ts = time.time() if ts is None else ts

    @property
    def data(self) -> dict[str, Any]:
        data = self._data
        if data is None:
            data = self._data = json.loads(self._text) if self._text is not None else {}
        return data

    @data.setter
    def data(self, value: dict[str, Any]) -> None:
        self._data, self._text = value, None

    @property
    def text(self) -> str:
        """``data`` as JSON text (:func:`encode_data`): what a store writes."""
        text = self._text
        if text is None:
            text = self._text = encode_data(self._data if self._data is not None else {})
        return text

    def seal(self) -> None:
        """Encode ``data`` now and let the dict go (it is decoded again if read): an event waiting
        to be written then holds one string, not a tree of objects for the collector to walk."""
        if self._text is None:
            self._text = encode_data(self._data if self._data is not None else {})
        self._data = None

    def __repr__(self) -> str:
        return (f"RunEvent(run_id={self.run_id!r}, kind={self.kind!r}, data={self.data!r}, round={self.round!r}, "
                f"role={self.role!r}, seq={self.seq!r}, ts={self.ts!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunEvent):
            return NotImplemented
        return (self.run_id, self.kind, self.data, self.round, self.role, self.seq, self.ts) == (
            other.run_id, other.kind, other.data, other.round, other.role, other.seq, other.ts)

    __hash__ = None  # type: ignore[assignment]  # (mutable, like the dataclass it was)

    def to_json(self) -> str:
        return json.dumps(
            {"run_id": self.run_id, "seq": self.seq, "ts": self.ts, "kind": self.kind,
             "round": self.round, "role": self.role, "data": self.data},
            ensure_ascii=False,
        )


def encode_data(data: dict[str, Any]) -> str:
    """An event's payload as JSON text (what every store writes); anything JSON has no type for
    is written as its ``str()``. pydantic-core's encoder: four times the standard library's speed."""
    return to_json(data, fallback=str).decode()


@dataclass
class RunInfo:
    """A run as ``rolecast runs list`` shows it."""

    run_id: str
    started: float
    events: int
    messages: int
    llm_calls: int
    last_round: int
    stop_reason: str | None
    team: str = ""
    idea: str = ""


@runtime_checkable
class RunStore(Protocol):
    """Where runs are logged. ``append`` and ``extend`` are durable when they return.

    A store may also offer ``stage(events) -> bool``: make ``events`` durable now, cheaply, ahead of
    the ``extend`` that writes them (and that the caller must make). :class:`SQLiteRunStore` does,
    with its journal; the run log then never waits for a transaction before using a model's answer.
    """

    def append(self, event: RunEvent) -> RunEvent:
        """Write ``event`` (its ``seq`` set to the next number of its run) and return it."""

    def extend(self, events: Sequence[RunEvent]) -> None:
        """Write ``events`` in order, all or none (one transaction), each ``seq`` set as by ``append``."""

    def events(self, run_id: str, kinds: Iterable[str] | None = None) -> Iterator[RunEvent]:
        """The events of ``run_id`` in order (only those of ``kinds`` when given)."""

    def runs(self) -> list[RunInfo]:
        """Every run in the store, newest first."""

    def close(self) -> None:
        """Release the store's resources."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    ts     REAL NOT NULL,
    kind   TEXT NOT NULL,
    round  INTEGER NOT NULL DEFAULT 0,
    role   TEXT NOT NULL DEFAULT '',
    data   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
"""


class SQLiteRunStore:
    """The embedded run store: one SQLite file (stdlib ``sqlite3``) in WAL mode.

    Each ``append`` or ``extend`` is one committed transaction (a batch of events is one
    ``executemany``). With WAL and ``synchronous=NORMAL`` a commit survives the process
    being killed; only a power loss may drop the last commits. The write lock is held
    only while writing, never across a wait, so another process appending to the same
    file (a second team, ``rolecast runs show`` reading it) waits microseconds. Safe to
    share between threads; several processes may write the same file (SQLite serialises
    them, and an event numbered meanwhile by another process is renumbered).

    :meth:`stage` makes events durable with one append to this process's journal
    (:mod:`rolecast.journal`), ahead of the transaction that writes them; opening the store
    writes the events of a journal whose process died into the database. ``journal=False``
    (or a platform without POSIX file locks) keeps none: :meth:`stage` then returns False.
    """

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_STORE_PATH, *, journal: bool = True):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level "DEFERRED": sqlite3 opens a transaction before the first INSERT itself
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level="DEFERRED", timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA + _journal.SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot open the run store {self.path}: {exc}") from exc
        self._lock = threading.Lock()
        self._next: dict[str, int] = {}
        in_memory = str(path) == ":memory:" or str(path).startswith("file::memory:")
        self._journals = (
            _journal.directory_for(self.path) if journal and _journal.available and not in_memory else None
        )
        self._journal: _journal.Journal | None = None  # this process's, made at the first stage()
        if self._journals is not None:
            self._recover()

    def __repr__(self) -> str:
        return f"SQLiteRunStore({str(self.path)!r})"

    def _next_seq(self, run_id: str) -> int:
        seq = self._next.get(run_id)
        if seq is None:
            row = self._db.execute("SELECT MAX(seq) FROM events WHERE run_id = ?", (run_id,)).fetchone()
            seq = (row[0] or 0) + 1
        self._next[run_id] = seq + 1
        return seq

    def append(self, event: RunEvent) -> RunEvent:
        self.extend((event,))
        return event

    def stage(self, events: Sequence[RunEvent]) -> bool:
        """Make ``events`` durable now: one append to this process's journal, no transaction.

        They are in the database once an ``extend`` that includes them returns (the caller makes
        it: the run log's next write); until then a reader of the database does not see them, and
        if this process dies first, the next process to open the store writes them there. False
        when this store keeps no journal (nothing was written: ``extend`` them and wait)."""
        if self._journals is None:
            return False
        with self._lock:
            journal = self._journal or self._open_journal()
            if journal is None:
                return False
            try:
                journal.write(events)
            except OSError as exc:
                raise StoreError(f"could not write to the run store's journal {journal.path}: {exc}") from exc
        return True

    def extend(self, events: Sequence[RunEvent]) -> None:
        if not events:
            return
        payloads = [e.text for e in events]
        with self._lock:
            try:
                try:
                    folded = self._insert(events, payloads)
                except sqlite3.IntegrityError:
                    # another process appended to one of these runs meanwhile: number them again
                    self._db.rollback()
                    for event in events:
                        self._next.pop(event.run_id, None)
                    folded = self._insert(events, payloads)
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                for event in events:
                    self._next.pop(event.run_id, None)
                raise StoreError(f"could not write to the run store {self.path}: {exc}") from exc
            if self._journal is not None:
                self._journal_committed(events, folded)

    def _insert(self, events: Sequence[RunEvent], payloads: list[str]) -> int:
        """Insert the rows (in the open transaction) and, when ``events`` include staged ones, record
        how far the journal is in the database with them; that offset."""
        rows = []
        for event, payload in zip(events, payloads, strict=True):
            event.seq = self._next_seq(event.run_id)
            rows.append((event.run_id, event.seq, event.ts, event.kind, event.round, event.role, payload))
        self._db.executemany(
            "INSERT INTO events (run_id, seq, ts, kind, round, role, data) VALUES (?, ?, ?, ?, ?, ?, ?)", rows
        )
        journal = self._journal
        if journal is None:
            return 0
        folded = journal.folded_with(events)
        if folded != journal.folded:
            self._db.execute("UPDATE journals SET folded = ? WHERE name = ?", (folded, journal.name))
        return folded

    # ------------------------------------------------------------------ journal
    def _open_journal(self) -> _journal.Journal | None:
        """This process's journal (the store's lock held): made, locked, then registered (a row). None
        when the file system cannot hold one (no memory map, say): the store then keeps none."""
        assert self._journals is not None
        try:
            journal = _journal.Journal.create(self._journals)
        except (OSError, ValueError) as exc:
            logger.warning("run store {}: no journal ({}); each model call waits for its commit instead",
                           self.path, exc)
            self._journals = None
            return None
        try:
            self._db.execute("INSERT INTO journals (name, folded) VALUES (?, 0)", (journal.name,))
            self._db.commit()
        except sqlite3.Error as exc:
            self._db.rollback()
            journal.close(remove=True)
            raise StoreError(f"could not write to the run store {self.path}: {exc}") from exc
        self._journal = journal
        weakref.finalize(self, _journal.release, journal)  # deleted at exit when the database holds it all
        return journal

    def _journal_committed(self, events: Sequence[RunEvent], folded: int) -> None:
        """After a commit (the store's lock held): the journal's bookkeeping, and the file emptied
        once it is large and all in the database (the empty offset committed before the next append)."""
        journal = self._journal
        assert journal is not None
        journal.committed(events, folded)
        if journal.size >= _journal.ROTATE_BYTES and journal.folded == journal.size:
            try:
                journal.cut()
                self._db.execute("UPDATE journals SET folded = 0 WHERE name = ?", (journal.name,))
                self._db.commit()
            except (OSError, sqlite3.Error) as exc:
                # the file is empty and its row says otherwise: recovery reads nothing past the end
                self._db.rollback()
                raise StoreError(f"could not empty the run store's journal {journal.path}: {exc}") from exc

    def _recover(self) -> None:
        """Write into the database the events of the journals whose process died, then delete them."""
        assert self._journals is not None
        with self._lock:
            try:
                rows = dict(self._db.execute("SELECT name, folded FROM journals").fetchall())
            except sqlite3.Error as exc:
                raise ConfigError(f"cannot read the run store {self.path}: {exc}") from exc
        for name, fd in _journal.orphans(self._journals):
            try:
                folded = rows.pop(name, None)
                events = [] if folded is None else [
                    RunEvent(run_id, kind, None, rnd, role, 0, ts, text=text)
                    for run_id, kind, rnd, role, ts, text in _journal.read(fd, folded, name)
                ]
                with self._lock:
                    try:
                        if events:
                            self._insert_recovered(events)
                        self._db.execute("DELETE FROM journals WHERE name = ?", (name,))
                        self._db.commit()
                    except sqlite3.Error as exc:
                        self._db.rollback()
                        raise StoreError(f"could not recover the run store's journal {name}: {exc}") from exc
                if events:
                    logger.info("run store {}: {} event(s) of a process that stopped recovered from its journal {}",
                                self.path, len(events), name)
                (self._journals / name).unlink(missing_ok=True)
            finally:
                os.close(fd)
        stale = [name for name in rows if not (self._journals / name).exists()]  # deleted at their process's exit
        if stale:
            with self._lock:
                self._db.executemany("DELETE FROM journals WHERE name = ?", [(name,) for name in stale])
                self._db.commit()

    def _insert_recovered(self, events: list[RunEvent]) -> None:
        for event in events:
            self._next.pop(event.run_id, None)  # numbered after what the file holds now
        self._db.executemany(
            "INSERT INTO events (run_id, seq, ts, kind, round, role, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(e.run_id, self._next_seq(e.run_id), e.ts, e.kind, e.round, e.role, e.text) for e in events],
        )

    def flush(self) -> None:
        """Nothing is left unwritten after ``append``/``extend``; kept for callers of earlier versions."""
        with self._lock:
            self._db.commit()

    def events(self, run_id: str, kinds: Iterable[str] | None = None) -> Iterator[RunEvent]:
        query = "SELECT run_id, seq, ts, kind, round, role, data FROM events WHERE run_id = ?"
        params: list[Any] = [run_id]
        wanted = list(kinds) if kinds is not None else None
        if wanted is not None:
            query += f" AND kind IN ({', '.join('?' * len(wanted))})"
            params += wanted
        with self._lock:
            try:
                self._db.commit()
                rows = self._db.execute(query + " ORDER BY seq", params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"could not read the run store {self.path}: {exc}") from exc
        for run, seq, ts, kind, rnd, role, data in rows:
            yield RunEvent(run, kind, None, rnd, role, seq, ts, text=data)  # decoded when read

    def runs(self) -> list[RunInfo]:
        self.flush()
        query = """
            SELECT run_id, MIN(ts), COUNT(*), SUM(kind = 'message'), SUM(kind = 'llm_call'), MAX(round)
            FROM events GROUP BY run_id ORDER BY MIN(ts) DESC
        """
        with self._lock:
            rows = self._db.execute(query).fetchall()
        return run_infos(self, rows)

    def close(self) -> None:
        """Commit, write any staged event the log never wrote, delete the journal, and close the file."""
        with self._lock:
            journal, self._journal = self._journal, None
            if journal is not None:
                try:
                    left = journal.unfolded
                    if left:
                        self._insert(left, [e.text for e in left])  # (and the journal's row goes with them)
                    self._db.execute("DELETE FROM journals WHERE name = ?", (journal.name,))
                    self._db.commit()
                except sqlite3.Error as exc:
                    self._db.rollback()
                    journal.close(remove=False)  # recovered by the next process to open the store
                    self._db.close()
                    raise StoreError(f"could not write to the run store {self.path}: {exc}") from exc
                journal.close(remove=True)
            self._db.commit()
            self._db.close()


class MemoryRunStore:
    """A run store in a list, for tests and for runs that need no file."""

    def __init__(self) -> None:
        self._events: list[RunEvent] = []
        self._counts: dict[str, int] = {}  # events per run: the next seq without a scan
        self._lock = threading.Lock()

    def append(self, event: RunEvent) -> RunEvent:
        self.extend((event,))
        return event

    def extend(self, events: Sequence[RunEvent]) -> None:
        with self._lock:
            for event in events:
                event.seq = self._counts.get(event.run_id, 0) + 1
                self._counts[event.run_id] = event.seq
                self._events.append(event)

    def events(self, run_id: str, kinds: Iterable[str] | None = None) -> Iterator[RunEvent]:
        wanted = set(kinds) if kinds is not None else None
        with self._lock:
            found = [e for e in self._events if e.run_id == run_id and (wanted is None or e.kind in wanted)]
        return iter(found)

    def runs(self) -> list[RunInfo]:
        ids = list(dict.fromkeys(e.run_id for e in self._events))
        out = []
        for run_id in reversed(ids):
            events = list(self.events(run_id))
            stops = [e for e in events if e.kind == RUN_STOPPED]
            start = next((e for e in events if e.kind == RUN_STARTED), None)
            out.append(RunInfo(
                run_id, events[0].ts, len(events), sum(e.kind == MESSAGE for e in events),
                sum(e.kind == LLM_CALL for e in events), max(e.round for e in events),
                stops[-1].data.get("reason") if stops else None,
                team=start.data.get("team", "") if start else "", idea=start.data.get("idea", "") if start else "",
            ))
        return out

    def close(self) -> None:
        pass


def run_infos(store: RunStore, rows: Iterable[tuple[Any, ...]]) -> list[RunInfo]:
    """:class:`RunInfo` rows from ``(run_id, started, events, messages, calls, last_round)`` totals
    (what every store's ``runs()`` query gives), with the team, idea and stop reason from the log."""
    infos = []
    for run_id, started, count, messages, calls, last_round in rows:
        first = next(store.events(run_id, [RUN_STARTED]), None)
        stops = list(store.events(run_id, [RUN_STOPPED]))
        infos.append(RunInfo(
            run_id, started, count, messages or 0, calls or 0, last_round or 0,
            stops[-1].data.get("reason") if stops else None,
            team=first.data.get("team", "") if first else "",
            idea=first.data.get("idea", "") if first else "",
        ))
    return infos


def default_store() -> RunStore | None:
    """The store a team uses when none is given: ``$ROLECAST_STORE`` (a path, or ``none``/``off``
    for no log), else ``./.rolecast/runs.db``."""
    configured = os.environ.get("ROLECAST_STORE", "").strip()
    if configured.lower() in ("none", "off", "0", "false"):
        return None
    return SQLiteRunStore(configured or DEFAULT_STORE_PATH)


def open_store(store: str | os.PathLike[str] | RunStore | None) -> RunStore | None:
    """A store from what a user passed: a path (SQLite), a store, or None (no store)."""
    if store is None or isinstance(store, RunStore):
        return store
    if isinstance(store, (str, os.PathLike)):
        return SQLiteRunStore(store)
    raise ConfigError(f"store must be a path, a RunStore or None, not {type(store).__name__}")


__all__ = [
    "DEFAULT_STORE_PATH",
    "EVENT_KINDS",
    "MemoryRunStore",
    "RunEvent",
    "RunInfo",
    "RunStore",
    "SQLiteRunStore",
    "default_store",
    "encode_data",
    "open_store",
    "run_infos",
]

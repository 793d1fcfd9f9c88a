"""The run store's interface: what every backend (SQLite, PostgreSQL, memory, yours) offers.

A reader or writer of runs (the run log, ``Team``, the CLI, a web page) talks to a
:class:`RunStore` and never asks which backend it is: every capability is a method here,
with a default that says what a store without it does. A backend subclasses
:class:`RunStore` and implements the five core methods — ``append``, ``extend``,
``events``, ``runs``, ``close`` — and overrides the others where it can do better.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DamagedRun, RunInUse, UsageError
from .events import FORMAT_VERSION, LINEAGE, RUN_STARTED, RUN_STOPPED, RunEvent
from .lease import LEASE_TTL, Holder, gone


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
    #: where the run comes from (its lineage event): ``"fork"`` of ``parent`` at round ``at``, or
    #: ``"reuse"`` (a rerun answering from ``parent``'s log); empty for a run of its own
    relation: str = ""
    parent: str = ""
    at: int | None = None
    #: what is wrong with the run's log, when an event of it cannot be read (:class:`DamagedRun`); the
    #: counts above are the store's, the rest of the fields empty
    damaged: str = ""

    @property
    def origin(self) -> str:
        """The lineage in words (empty for a run of its own)."""
        if self.relation == "fork":
            return f"fork of {self.parent} at round {self.at}"
        return f"reuses {self.parent}" if self.relation == "reuse" else ""


class RunStore(ABC):
    """Where runs are logged. ``append`` and ``extend`` are durable when they return.

    The five abstract methods are what a backend must write; the others have defaults (see each).
    """

    #: the payload format the store held when opened (1: written before formats were kept); new
    #: events are written in :data:`~rolecast.runs.events.FORMAT_VERSION`
    format: int = FORMAT_VERSION

    #: set while :meth:`prune` deletes runs: a backend's ``delete`` then leaves the unused texts to
    #: prune's one :meth:`drop_orphan_texts` at the end (a sweep reads every model call)
    _pruning: bool = False

    #: a folder for the files that go beside the store (a failed run's checkpoint); None: the
    #: default folder (``./.rolecast``)
    home: Path | None = None

    # ------------------------------------------------------------------ the core
    @abstractmethod
    def append(self, event: RunEvent) -> RunEvent:
        """Write ``event`` (its ``seq`` set to the next number of its run) and return it."""

    @abstractmethod
    def extend(self, events: Sequence[RunEvent]) -> None:
        """Write ``events`` in order, all or none (one transaction), each ``seq`` set as by ``append``."""

    @abstractmethod
    def events(self, run_id: str, kinds: Iterable[str] | None = None) -> Iterator[RunEvent]:
        """The events of ``run_id`` in order (only those of ``kinds`` when given)."""

    @abstractmethod
    def runs(self) -> list[RunInfo]:
        """Every run in the store, newest first."""

    @abstractmethod
    def close(self) -> None:
        """Release the store's resources."""

    # ------------------------------------------------------- with defaults
    def stage(self, events: Sequence[RunEvent]) -> bool:
        """Make ``events`` durable now, cheaply, ahead of the ``extend`` that writes them (which the
        caller must still make). True when done; False (the default) when this store cannot: the
        caller then ``extend``s them and waits. The SQLite store does it with its journal."""
        return False

    @property
    def writes_behind(self) -> bool:
        """Whether :meth:`extend_behind` writes after it returns (then the run log sends it smaller
        batches: :data:`~rolecast.runs.log.BEHIND_EVENTS`); False by default."""
        return False

    def extend_behind(self, events: Sequence[RunEvent]) -> None:
        """``extend(events)``, possibly finished after this returns (the caller goes on meanwhile): for
        events that are durable already (:meth:`stage`) or may be re-derived. Every other call of the
        store comes after it, in order, as if it had been written on return; a failure is raised by the
        next call that writes. The default (and any store that cannot) writes them now. The SQLite
        store, with ``rolecast.runs.sqlite.WRITE_BEHIND``, writes them in a thread of their own (see
        :meth:`SQLiteRunStore.extend_behind <rolecast.runs.sqlite.SQLiteRunStore.extend_behind>`)."""
        self.extend(events)

    def append_checked(
        self, event: RunEvent, kinds: Iterable[str], check: Callable[[list[RunEvent]], None],
    ) -> RunEvent:
        """Append ``event`` if ``check`` accepts its run's events of ``kinds`` (it raises to refuse), with
        no other write to the run between the read and the append: two processes answering one approval
        cannot both pass. The SQLite, PostgreSQL and memory stores do it in one transaction (or under one
        lock); this default reads, then appends, and is atomic only for a store one thread writes."""
        check(list(self.events(event.run_id, kinds)))
        return self.append(event)

    def flush(self) -> None:
        """Make every write visible to other readers now (the default: they are already)."""
        return None

    def shared(self) -> Any:
        """The store as other processes (a runtime's workers) can open it: a picklable value that
        :func:`~rolecast.runs.store.open_store` turns back into a store. By default the store itself
        (it must pickle: the PostgreSQL store pickles as its connection string)."""
        return self

    # ------------------------------------------------------------ texts
    # The texts model calls' requests refer to, kept once per store (see rolecast.runs.requests):
    # a backend writes ``event.texts`` with the events (in the same transaction) and reads them here.
    def texts(self, keys: Iterable[str]) -> dict[str, str]:
        """The texts kept under ``keys`` (those the store lacks are left out). The default: none
        (a store that keeps no texts; its calls read as their summaries)."""
        return {}

    def drop_orphan_texts(self) -> int:
        """Delete the texts no event refers to any more (after runs were deleted); how many.
        The default: nothing to do (a store that keeps no texts)."""
        return 0

    # ------------------------------------------------------------ keeping it small
    def delete(self, run_id: str) -> int:
        """Delete run ``run_id``'s events (and its lease, and the texts only it referred to); how many.
        The default: this store cannot."""
        raise UsageError(f"{type(self).__name__} cannot delete runs")

    def vacuum(self) -> None:
        """Give the space of deleted runs back to the file system (the default: nothing to do)."""
        return None

    def size(self) -> int | None:
        """The store's size in bytes, when it can tell (the default: None)."""
        return None

    def prune(self, *, keep: int | None = None, older_than: float | None = None) -> list[str]:
        """Delete every run but the newest ``keep``, and/or those started more than ``older_than``
        seconds ago; never a run a live process holds. Then :meth:`vacuum`. The runs deleted."""
        if keep is None and older_than is None:
            raise UsageError("prune what? give keep=N (runs to keep) and/or older_than=SECONDS")
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
            raise UsageError(f"keep is a number of runs, >= 0; not {keep!r}")
        if older_than is not None and older_than < 0:
            raise UsageError(f"older_than is a number of seconds, >= 0; not {older_than!r}")
        runs = self.runs()  # newest first
        doomed = set()
        if keep is not None:
            doomed |= {r.run_id for r in runs[keep:]}
        if older_than is not None:
            cutoff = time.time() - older_than
            doomed |= {r.run_id for r in runs if r.started < cutoff}
        deleted = []
        self._pruning = True  # (delete() leaves the texts to one sweep at the end)
        try:
            for info in runs:
                if info.run_id in doomed and self.holder(info.run_id) is None:
                    self.delete(info.run_id)
                    deleted.append(info.run_id)
        finally:
            self._pruning = False
        if deleted:
            self.drop_orphan_texts()
            self.vacuum()
        return deleted

    def has_run(self, run_id: str) -> bool:
        """Whether the store holds any event of ``run_id``."""
        return next(self.events(run_id, [RUN_STARTED]), None) is not None or next(
            self.events(run_id), None) is not None

    # ------------------------------------------------------------ one writer per run
    # The default keeps the leases in this object: enough for a store no other process opens
    # (memory). The SQLite and PostgreSQL stores keep them in the database (see rolecast.runs.lease).
    def acquire(self, run_id: str, holder: Holder, ttl: float = LEASE_TTL) -> None:
        """Take ``run_id``'s lease for ``holder``; :class:`~rolecast.errors.RunInUse` when a live holder
        (see :func:`~rolecast.runs.lease.gone`) has it."""
        leases = self.__dict__.setdefault("_leases", {})
        current: Holder | None = leases.get(run_id)
        if current is not None and current.token != holder.token and not gone(current, ttl=ttl):
            raise RunInUse(run_id, host=current.host, pid=current.pid, since=current.since,
                           heartbeat=current.heartbeat)
        leases[run_id] = holder

    def renew(self, run_id: str, holder: Holder) -> None:
        """Record ``holder``'s heartbeat (its lease stays its own)."""
        self.__dict__.setdefault("_leases", {})[run_id] = holder

    def release(self, run_id: str, holder: Holder) -> None:
        """Give ``run_id``'s lease back, if ``holder`` has it."""
        leases = self.__dict__.setdefault("_leases", {})
        if run_id in leases and leases[run_id].token == holder.token:
            del leases[run_id]

    def holder(self, run_id: str) -> Holder | None:
        """Who holds ``run_id``'s lease now (None: nobody, or a holder that is gone)."""
        current: Holder | None = self.__dict__.get("_leases", {}).get(run_id)
        return None if current is None or gone(current) else current

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_infos(store: RunStore, rows: Iterable[tuple[Any, ...]]) -> list[RunInfo]:
    """:class:`RunInfo` rows from ``(run_id, started, events, messages, calls, last_round)`` totals
    (what every store's ``runs()`` query gives), with the team, idea and stop reason from the log; a
    fork's start is when it was made (its lineage event), not its parent's. Newest first."""
    infos = []
    for run_id, started, count, messages, calls, last_round in rows:
        try:
            first = next(store.events(run_id, [RUN_STARTED]), None)
            stops = list(store.events(run_id, [RUN_STOPPED]))
            lineage = next(store.events(run_id, [LINEAGE]), None)
            origin = lineage.data if lineage is not None else {}
            if lineage is not None and origin.get("relation") == "fork":
                started = lineage.ts  # (a fork's first events are its parent's, with their times: it began here)
            infos.append(RunInfo(
                run_id, started, count, messages or 0, calls or 0, last_round or 0,
                stops[-1].data.get("reason") if stops else None,
                team=first.data.get("team", "") if first else "",
                idea=first.data.get("idea", "") if first else "",
                relation=origin.get("relation", ""), parent=origin.get("parent", ""), at=origin.get("at"),
            ))
        except DamagedRun as exc:  # (one damaged run is listed as such; the others read)
            infos.append(RunInfo(run_id, started, count, messages or 0, calls or 0, last_round or 0, None,
                                 damaged=str(exc)))
    infos.sort(key=lambda info: info.started, reverse=True)  # (newest first, a fork by when it was made)
    return infos


__all__ = ["RunInfo", "RunStore", "run_infos"]

"""A run store in a list (:class:`MemoryRunStore`), for tests and for runs that need no file."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..errors import RunInUse, UsageError
from .base import RunInfo, RunStore, run_infos
from .events import LLM_CALL, MESSAGE, RunEvent
from .requests import keys_of


class MemoryRunStore(RunStore):
    """A run store in a list, for tests and for runs that need no file."""

    def __init__(self) -> None:
        self._events: list[RunEvent] = []  # (events of a run are in order; runs interleave)
        self._counts: dict[str, int] = {}  # events per run: the next seq without a scan
        self._texts: dict[str, str] = {}  # the texts model calls refer to, by key
        self._lock = threading.Lock()

    def append(self, event: RunEvent) -> RunEvent:
        self.extend((event,))
        return event

    def extend(self, events: Sequence[RunEvent]) -> None:
        with self._lock:
            self._add(events)

    def _add(self, events: Sequence[RunEvent]) -> None:
        for event in events:
            event.seq = self._counts.get(event.run_id, 0) + 1
            self._counts[event.run_id] = event.seq
            self._events.append(event)
            if event.texts:
                for key, text in event.texts.items():
                    self._texts.setdefault(key, text)

    def append_checked(
        self, event: RunEvent, kinds: Iterable[str], check: Callable[[list[RunEvent]], None],
    ) -> RunEvent:
        wanted = set(kinds)
        with self._lock:  # (the check and the append: one writer at a time)
            check([e for e in self._events if e.run_id == event.run_id and e.kind in wanted])
            self._add((event,))
        return event

    def events(self, run_id: str, kinds: Iterable[str] | None = None) -> Iterator[RunEvent]:
        wanted = set(kinds) if kinds is not None else None
        with self._lock:
            found = [e for e in self._events if e.run_id == run_id and (wanted is None or e.kind in wanted)]
        return iter(found)

    def runs(self) -> list[RunInfo]:
        ids = list(dict.fromkeys(e.run_id for e in self._events))
        rows = []
        for run_id in reversed(ids):
            events = list(self.events(run_id))
            rows.append((run_id, events[0].ts, len(events), sum(e.kind == MESSAGE for e in events),
                         sum(e.kind == LLM_CALL for e in events), max(e.round for e in events)))
        return run_infos(self, rows)

    def close(self) -> None:
        pass

    def delete(self, run_id: str) -> int:
        current = self.holder(run_id)
        if current is not None:
            raise RunInUse(run_id, host=current.host, pid=current.pid, since=current.since,
                           heartbeat=current.heartbeat)
        with self._lock:
            kept = [e for e in self._events if e.run_id != run_id]
            count = len(self._events) - len(kept)
            self._events = kept
            self._counts.pop(run_id, None)
        if not self._pruning:
            self.drop_orphan_texts()
        return count

    def texts(self, keys: Iterable[str]) -> dict[str, str]:
        with self._lock:
            return {key: self._texts[key] for key in keys if key in self._texts}

    def drop_orphan_texts(self) -> int:
        with self._lock:
            used: set[str] = set()
            for event in self._events:
                if event.kind == LLM_CALL:
                    used |= keys_of(event.data)
            orphans = self._texts.keys() - used
            for key in orphans:
                del self._texts[key]
        return len(orphans)

    def shared(self) -> Any:
        raise UsageError(
            "an in-memory store cannot be shared with other processes: give Team(store=...) a PostgresRunStore "
            "(or a SQLite file, on one machine)"
        )


__all__ = ["MemoryRunStore"]

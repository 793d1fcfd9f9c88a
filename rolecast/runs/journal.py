"""The call journal: how a SQLite run store makes one event durable with one memory copy.

A model call's answer must be durable before it is used. Committing it to SQLite alone
costs a transaction (about 20 µs of CPU in a tight loop, several times that inside a
run: a WAL frame of whole pages, file locks); making each call wait for a shared
transaction at the end of the event loop's turn (a group commit) suspends every caller.
The journal does neither: :meth:`SQLiteRunStore.stage <rolecast.runs.store.SQLiteRunStore.stage>`
copies the event into a file of this process, mapped into memory (``mmap``, shared), and
returns; the event reaches the database with the log's next write, in order with the
others, and the same transaction records how far the journal is now in the database (its
*folded* offset, in the store's ``journals`` table).

The mapping's pages are the operating system's page cache of the file: a copy that has
returned survives the process being killed (``kill -9``), exactly as a SQLite WAL commit
with ``synchronous=NORMAL`` does (neither survives a power loss before the OS writes it
out). A copy costs no system call (an ``os.write`` would cost several µs inside a run: the
file system updates the file's times on every write); the file grows by whole chunks.

Each process writing a store keeps one journal, ``<store>.journals/<pid>-<random>.jsonl``,
and holds an exclusive ``flock`` on it while it lives. Opening the store recovers the
journals whose process died (the lock can be taken): their events past the folded offset
go into the database, in order, and the journal is deleted. A live process's journal is
never touched.

A line is ``[run_id, kind, round, role, ts]``, a tab, the event's JSON payload, and a
newline; the texts an event brings (a model call's messages: :mod:`rolecast.runs.requests`)
are a line of kind ``texts`` just before it, ``{key: text}``, written in the same copy. JSON
text never holds a raw tab, newline or NUL byte, and the file's unwritten space is all NUL
bytes: a line is whole exactly when it ends with a newline and holds no NUL (a copy cut short
by the process dying leaves NULs in it), and recovery stops at the first line that is not whole.
"""

from __future__ import annotations

import json
import mmap
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from ..errors import DamagedRun, StoreError
from .events import TEXTS, decode_payload, encode_data

if TYPE_CHECKING:
    from .events import RunEvent

try:  # POSIX: a journal's owner holds an exclusive lock on it while it lives
    import fcntl
except ImportError:  # pragma: no cover - Windows: no journal, the log waits for its group commit instead
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".jsonl"
#: the file is made, and grows, by this much
CHUNK_BYTES = 1 << 20
#: a journal whose events are all in the database is cut back to empty once it holds this much
ROTATE_BYTES = CHUNK_BYTES
#: a journal line longer than this is not an event this module wrote
_LONGEST_HEADER = 64 * 1024
#: the pages of the file mapping a process lets go of once they are in the database (Linux)
_PAGE = mmap.PAGESIZE
_DONTNEED: int | None = getattr(mmap, "MADV_DONTNEED", None)

SCHEMA = """
CREATE TABLE IF NOT EXISTS journals (
    name   TEXT PRIMARY KEY,
    folded INTEGER NOT NULL
);
"""

available = fcntl is not None


def directory_for(db: Path) -> Path:
    """Where the journals of the store in file ``db`` live."""
    return db.with_name(db.name + ".journals")


#: a string as JSON writes it (``rolecast.runs.log.quote_json``, which imports this module's store)
_quote: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]


_TEXTS = _quote(TEXTS)


class Journal:
    """One process's journal of a store: appended to by :meth:`write`, folded as the store commits."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self.name = path.name
        self.fd = fd
        self.size = 0  # bytes written
        self.folded = 0  # bytes whose events are in the database
        # id(event) -> the event and where its line starts, for the events not yet in the database, in
        # file order (two dicts: no object made per event, for the collector to count)
        self._open: dict[int, RunEvent] = {}
        self._starts: dict[int, int] = {}
        self._map: mmap.mmap | None = None
        self._grow(CHUNK_BYTES)

    @classmethod
    def create(cls, directory: Path) -> Journal:
        """A new journal in ``directory``, locked by this process. It is made under a temporary name
        and renamed once locked, so that no other process ever sees it unlocked."""
        if fcntl is None:  # pragma: no cover
            raise StoreError("the run store's journal needs POSIX file locks")
        directory.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        temporary = directory / (name + ".tmp")
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path = directory / (name + SUFFIX)
            journal = cls(path, fd)
            os.replace(temporary, path)
        except BaseException:
            os.close(fd)
            temporary.unlink(missing_ok=True)
            raise
        return journal

    def _grow(self, capacity: int) -> None:
        """Make the file ``capacity`` bytes (the new space reads as NULs) and map all of it. The space is
        allocated on disk now, so that a full disk is an error here rather than a fault (SIGBUS) when a
        page of the map is first written."""
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(self.fd, 0, capacity)
        else:  # pragma: no cover - macOS
            os.ftruncate(self.fd, capacity)
        if self._map is not None:
            self._map.close()
            self._map = None
        self._map = mmap.mmap(self.fd, capacity)  # shared, read and write

    @property
    def unfolded(self) -> list[RunEvent]:
        """The events written here and not yet in the database, in order."""
        return list(self._open.values())

    def write(self, events: Sequence[RunEvent]) -> None:
        """Append ``events``: durable (against the process dying) when this returns."""
        for event in events:
            # a line's header is [run_id, kind, round, role, ts] (the module's docstring); after the kind:
            rest = f",{int(event.round)},{_quote(event.role)},{float(event.ts)!r}]\t"
            run = _quote(event.run_id)
            line = f"[{run},{_quote(event.kind)}{rest}{event.text}\n"
            if event.texts:  # the texts it refers to, in a line of their own just before it (same copy)
                line = f"[{run},{_TEXTS}{rest}{encode_data(event.texts)}\n{line}"
            if "\0" in line:  # (never in JSON text: recovery would take it for a copy cut short)
                raise ValueError(f"a {event.kind} event's text holds a NUL byte")
            data = line.encode()
            start = self.size
            end = start + len(data)
            journal = self._map
            if journal is None or end > len(journal):
                self._grow(max(end, 2 * (len(journal) if journal is not None else CHUNK_BYTES)))
                journal = self._map
                assert journal is not None
            journal[start:end] = data
            self._open[id(event)] = event
            self._starts[id(event)] = start
            self.size = end

    def folded_with(self, events: Sequence[RunEvent]) -> int:
        """How far the journal is in the database once ``events`` are (the offset the same transaction
        records): up to the first line whose event is neither in the database already nor among ``events``."""
        if not self._open:
            return self.folded
        batch = {id(event) for event in events}
        for key, start in self._starts.items():
            if key not in batch:
                return start
        return self.size

    def committed(self, events: Sequence[RunEvent], folded: int) -> None:
        """``events`` are in the database now, and the journal up to ``folded``: the mapping lets go of
        the whole pages before that (they stay in the file), so that the process holds in memory only
        the part of the journal that is not in the database, however large the file grows."""
        if self._open:
            for event in events:
                self._open.pop(id(event), None)
                self._starts.pop(id(event), None)
        start, end = self.folded - self.folded % _PAGE, folded - folded % _PAGE
        self.folded = folded
        if end > start and self._map is not None and _DONTNEED is not None:
            self._map.madvise(_DONTNEED, start, end - start)

    def cut(self) -> None:
        """Empty the file (every event in it is in the database): all NULs again."""
        assert self._map is not None
        self._map.close()
        self._map = None
        os.ftruncate(self.fd, 0)
        self.size = self.folded = 0
        self._grow(CHUNK_BYTES)

    def close(self, *, remove: bool) -> None:
        if self.fd < 0:
            return
        if self._map is not None:
            self._map.close()  # (its pages stay in the file)
            self._map = None
        if remove:
            self.path.unlink(missing_ok=True)
        os.close(self.fd)  # (releases the lock)
        self.fd = -1


def release(journal: Journal) -> None:
    """At interpreter exit: the journal is deleted when the database holds all of it, else left to be recovered."""
    journal.close(remove=journal.folded == journal.size)


def orphans(directory: Path) -> Iterator[tuple[str, int]]:
    """``(name, fd)`` of each journal in ``directory`` whose process is gone, locked by this one while the
    caller recovers it (the caller closes ``fd``). A temporary file left by a process that died while
    making its journal is deleted."""
    if fcntl is None or not directory.is_dir():
        return
    for name in sorted(os.listdir(directory)):
        if not (name.endswith(SUFFIX) or name.endswith(".tmp")):
            continue
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # recovered by another process meanwhile
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its process is alive
            os.close(fd)
            continue
        if name.endswith(".tmp"):
            # made by a process that died before it renamed it (one that is making it now locks it at once:
            # only a file older than a minute counts as left behind)
            if time.time() - os.fstat(fd).st_mtime > 60:
                path.unlink(missing_ok=True)
            os.close(fd)
            continue
        yield name, fd


#: an event read back: run id, kind, round, role, time stamp and its JSON text
Line = tuple[str, str, int, str, float, str]


def read(fd: int, offset: int, name: str) -> list[Line]:
    """The events of an orphaned journal from ``offset`` on, up to its first line that is not whole."""
    size = os.fstat(fd).st_size
    if size <= offset:
        return []
    data = os.pread(fd, size - offset, offset)
    data = data.rstrip(b"\0")  # the unwritten space (a line never holds a NUL)
    events = []
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        line = data[start:] if end < 0 else data[start:end]
        at = offset + start
        start = len(data) if end < 0 else end + 1
        tab = line.find(b"\t", 0, _LONGEST_HEADER)
        try:
            if end < 0 or b"\0" in line:
                raise ValueError("the copy was cut short")
            if tab < 0:
                raise ValueError("no tab after the header")
            run_id, kind, rnd, role, ts = json.loads(line[:tab])
            if not (isinstance(run_id, str) and isinstance(kind, str) and isinstance(role, str)
                    and type(rnd) is int and isinstance(ts, float)):
                raise ValueError("a header field of the wrong type")
            text = line[tab + 1:].decode()
        except ValueError as exc:  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
            logger.warning("run store journal {}: the line at byte {} is not a whole event ({}); it and the "
                           "rest are left out", name, at, exc)
            break
        problem = _payload_problem(run_id, kind, text)
        if problem:  # a whole line whose payload cannot be read: it alone is left out, never written
            logger.warning("run store journal {}: the line at byte {} is left out: {}", name, at, problem)
            continue
        events.append((run_id, kind, rnd, role, ts, text))
    return events


def _payload_problem(run_id: str, kind: str, text: str) -> str:
    """What is wrong with a journal line's payload ('' when nothing): an event's must read as its kind's
    (:func:`~rolecast.runs.events.decode_payload`), a texts line's is an object of strings."""
    try:
        data = decode_payload(run_id, 0, kind, text)
    except DamagedRun as exc:
        return str(exc)
    if kind == TEXTS and not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        return f"run {run_id!r}: a texts line holds something else than texts"
    return ""


__all__ = [
    "CHUNK_BYTES", "ROTATE_BYTES", "SCHEMA", "Journal", "Line", "available", "directory_for", "orphans", "read",
    "release",
]

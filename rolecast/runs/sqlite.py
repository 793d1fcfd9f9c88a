"""The embedded run store: :class:`SQLiteRunStore`, one SQLite file in WAL mode.

One committed transaction per write, and a journal (:mod:`rolecast.runs.journal`) that makes a model
call durable with one copy, before the transaction that writes it. :mod:`rolecast.runs.store` is the
door users go through (:func:`~rolecast.runs.store.open_store`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from loguru import logger

import rolecast.runs.journal as _journal

from ..errors import ConfigError, RunInUse, StoreError, UsageError
from .base import RunInfo, RunStore, run_infos
from .behind import WriteBehind
from .events import FORMAT_VERSION, TEXTS, RunEvent
from .lease import LEASE_TTL, Holder, gone
from .requests import new_texts
from .sqlite_schema import EVENTS_INSERT as _EVENTS_INSERT
from .sqlite_schema import ORPHANS as _ORPHANS
from .sqlite_schema import SCHEMA as _SCHEMA
from .sqlite_schema import TEXTS_INSERT as _TEXTS_INSERT
from .sqlite_schema import insert_sql, variables

DEFAULT_STORE_PATH = Path(".rolecast") / "runs.db"
"""Where runs are logged when no store is named (relative to the working directory)."""
#: the WAL is copied into the database file once it holds this many pages (4 KiB each)
WAL_CHECKPOINT_PAGES = 8192
#: a batch written behind (:meth:`SQLiteRunStore.extend_behind`) is written at once instead when the journal
#: holds this much: its events are then all the journal holds that is not in the database, and the journal
#: is emptied with it (it cannot be while the caller stages more events during a write behind it), so the
#: file stays this small however long the run (memory keeps only what is not in the database: Journal.committed)
BEHIND_BYTES = 64 << 20
#: whether a store with a journal writes a full batch behind, in its own thread (False: at once). Off:
#: on 2 cores the thread's inserts and the event loop slowed each other (100,000 agents: 253-281 µs
#: per agent-turn against 204-249 at once, median 226)
WRITE_BEHIND = False
#: rows a statement inserts at most (see SQLiteRunStore._insert_rows)
INSERT_ROWS = 256

class SQLiteRunStore(RunStore):
    """The embedded run store: one SQLite file (stdlib ``sqlite3``) in WAL mode.

    Each ``append`` or ``extend`` is one committed transaction (a batch of events is one
    ``executemany``). With WAL and ``synchronous=NORMAL`` a commit survives the process
    being killed; only a power loss may drop the last commits. The write lock is held
    only while writing, never across a wait, so another process appending to the same
    file (a second team, ``rolecast runs show`` reading it) waits microseconds. Safe to
    share between threads; several processes may write the same file (SQLite serialises
    them, and an event numbered meanwhile by another process is renumbered).

    :meth:`stage` makes events durable with one append to this process's journal
    (:mod:`rolecast.runs.journal`), ahead of the transaction that writes them; opening the store
    writes the events of a journal whose process died into the database. ``journal=False``
    (or a platform without POSIX file locks) keeps none: :meth:`stage` then returns False.

    :meth:`extend_behind` writes a batch in a thread of its own while the caller goes on (sqlite3
    lets go of the interpreter's lock while SQLite works), one batch at a time, in order with every
    other call.
    """

    def __init__(
        self, path: str | os.PathLike[str] = DEFAULT_STORE_PATH, *, journal: bool = True, read_only: bool = False,
    ):
        self.path = Path(path)
        #: opened for reading only (``rolecast runs list|show|graph|export``): nothing is created,
        #: converted or recovered, and a write is a StoreError — so a store on read-only media reads
        self.read_only = read_only
        self._lock = threading.Lock()  # the connection
        # the journal's file and bookkeeping: a thread writing behind holds the connection's lock for
        # its whole transaction, while the caller stages more events
        self._journal_lock = threading.Lock()
        self._behind = WriteBehind(f"run store {self.path}")  # batches written in a thread (extend_behind)
        self._order = threading.Lock()  # writes from several threads: each waits for the batch before it
        self._next: dict[str, int] = {}
        self._journals = None
        self._journal: _journal.Journal | None = None
        if read_only:
            self._db = self._open_read_only()
            self.format = self._read_format()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level "DEFERRED": sqlite3 opens a transaction before the first INSERT itself
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level="DEFERRED", timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # a checkpoint every WAL_CHECKPOINT_PAGES instead of SQLite's 1,000: a page written by many
            # batches in between (the texts' index) is copied into the file once
            self._db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
            self._db.executescript(_SCHEMA + _journal.SCHEMA)
            self.format = self._check_format()
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot open the run store {self.path}: {exc}") from exc
        in_memory = str(path) == ":memory:" or str(path).startswith("file::memory:")
        self._journals = (
            _journal.directory_for(self.path) if journal and _journal.available and not in_memory else None
        )
        # (self._journal: this process's, made at the first stage())
        if self._journals is not None:
            self._recover()

    def _open_read_only(self) -> sqlite3.Connection:
        """The file opened read-only (``mode=ro``), or, where even that needs a write (a WAL
        database whose ``-shm`` file cannot be made: read-only media), as immutable."""
        uri = "file:" + quote(str(self.path.resolve()))
        last: sqlite3.Error | None = None
        for flags in ("mode=ro", "immutable=1"):
            try:
                db = sqlite3.connect(f"{uri}?{flags}", uri=True, check_same_thread=False, timeout=30)
                db.execute("SELECT 1 FROM events LIMIT 1").fetchall()
                return db
            except sqlite3.Error as exc:
                last = exc
        raise ConfigError(f"cannot read the run store {self.path}: {last}") from last

    def __repr__(self) -> str:
        return f"SQLiteRunStore({str(self.path)!r})"

    def _read_format(self) -> int:
        """The payload format of a file opened read-only (nothing is marked); a newer one is a ConfigError."""
        found = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if found > FORMAT_VERSION:
            self._db.close()
            raise ConfigError(f"the run store {self.path} holds payload format {found}; this version of rolecast "
                              f"reads formats 1 to {FORMAT_VERSION}: upgrade rolecast to read it")
        return found or (1 if self._db.execute("SELECT 1 FROM events LIMIT 1").fetchone() else FORMAT_VERSION)

    def _check_format(self) -> int:
        """The payload format the file had when opened (``PRAGMA user_version``; 0 on a file of format 1,
        or a new one), which is then marked as this version's. A newer format is a ConfigError."""
        found = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if found > FORMAT_VERSION:
            raise ConfigError(f"the run store {self.path} holds payload format {found}; this version of rolecast "
                              f"reads formats 1 to {FORMAT_VERSION}: upgrade rolecast to read it")
        if found == 0:
            has_events = self._db.execute("SELECT 1 FROM events LIMIT 1").fetchone() is not None
            found = 1 if has_events else FORMAT_VERSION
        if found < FORMAT_VERSION or not self._db.execute("PRAGMA user_version").fetchone()[0]:
            self._db.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        return found

    @property
    def in_memory(self) -> bool:
        return str(self.path) == ":memory:" or str(self.path).startswith("file::memory:")

    @property
    def home(self) -> Path | None:  # type: ignore[override]
        """The folder of the store's file (None for an in-memory database)."""
        return None if self.in_memory else self.path.parent

    def shared(self) -> Any:
        """``("sqlite", absolute path)``: every process on this machine opens the same file."""
        if self.in_memory:
            raise UsageError("an in-memory SQLite store cannot be shared with other processes: give it a file")
        return ("sqlite", str(self.path.resolve()))

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
        journal = self._journal
        if journal is None:
            with self._lock:
                journal = self._journal or self._open_journal()
            if journal is None:
                return False
        with self._journal_lock:
            try:
                journal.write(events)
            except OSError as exc:
                raise StoreError(f"could not write to the run store's journal {journal.path}: {exc}") from exc
        return True

    def extend(self, events: Sequence[RunEvent]) -> None:
        with self._order:
            self._settle()
            self._extend(events)

    @property
    def writes_behind(self) -> bool:
        """True when the store keeps a journal (then a batch's model calls are durable before it is written)."""
        return WRITE_BEHIND and self._journals is not None

    def extend_behind(self, events: Sequence[RunEvent]) -> None:
        """``extend(events)`` in a thread of its own, started before this returns (after the batch
        before it is written): the caller goes on while SQLite writes. For events staged already
        (:meth:`stage`) or that may be re-derived: a process killed meanwhile recovers the staged
        ones from its journal, as it would before a write. Every other call of the store waits for
        the batch first; a batch that failed is tried again by the next call that writes, which
        raises the error when it fails again. Written at once, here, when the store keeps no journal
        or the journal holds :data:`BEHIND_BYTES` (then emptied with it)."""
        with self._order:
            self._settle()
            journal = self._journal
            if not events or journal is None or journal.size >= BEHIND_BYTES or not WRITE_BEHIND:
                self._extend(events)
            else:
                self._behind.start(self._extend, events)

    def _settle(self) -> None:
        """Wait for the batch written behind, if any (see :class:`~rolecast.runs.behind.WriteBehind`)."""
        if self._behind.busy:
            self._behind.settle(self._extend)

    def _extend(self, events: Sequence[RunEvent]) -> None:
        if not events:
            return
        if self.read_only:
            raise StoreError(f"the run store {self.path} was opened read-only: nothing can be written to it")
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

    def append_checked(
        self, event: RunEvent, kinds: Iterable[str], check: Callable[[list[RunEvent]], None],
    ) -> RunEvent:
        """The read, the check and the append in one ``BEGIN IMMEDIATE`` transaction: SQLite's write
        lock is held from the read on, so no other process (or connection) writes in between."""
        if self.read_only:
            raise StoreError(f"the run store {self.path} was opened read-only: nothing can be written to it")
        wanted = list(kinds)
        self._settle()
        with self._lock:
            try:
                self._db.commit()
                self._db.execute("BEGIN IMMEDIATE")
                rows = self._db.execute(
                    "SELECT run_id, seq, ts, kind, round, role, data FROM events WHERE run_id = ? "
                    f"AND kind IN ({', '.join('?' * len(wanted))}) ORDER BY seq", [event.run_id, *wanted]).fetchall()
                try:
                    check([RunEvent(r, k, None, rnd, role, seq, ts, text=data)
                           for r, seq, ts, k, rnd, role, data in rows])
                except BaseException:
                    self._db.rollback()
                    raise
                self._next.pop(event.run_id, None)  # (another process may have appended since)
                folded = self._insert((event,), [event.text])
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                self._next.pop(event.run_id, None)
                raise StoreError(f"could not write to the run store {self.path}: {exc}") from exc
            if self._journal is not None:
                self._journal_committed((event,), folded)
        return event

    def _insert(self, events: Sequence[RunEvent], payloads: list[str]) -> int:
        """Insert the rows (in the open transaction) and, when ``events`` include staged ones, record
        how far the journal is in the database with them; that offset."""
        values: list[Any] = []
        next_seq = self._next_seq
        for event, payload in zip(events, payloads, strict=True):
            event.seq = seq = next_seq(event.run_id)
            values += (event.run_id, seq, event.ts, event.kind, event.round, event.role, payload)
        self._insert_rows(_EVENTS_INSERT, 7, values)
        texts = new_texts(events)
        if texts:  # in key order: a batch's keys that share a page of the index update it together
            texts.sort()
            self._insert_rows(_TEXTS_INSERT, 2, [value for row in texts for value in row])
        journal = self._journal
        if journal is None:
            return 0
        with self._journal_lock:
            folded = journal.folded_with(events)
        if folded != journal.folded:
            self._db.execute("UPDATE journals SET folded = ? WHERE name = ?", (folded, journal.name))
        return folded

    def _insert_rows(self, head: str, width: int, values: list[Any]) -> None:
        """Rows of ``width`` values each, in statements of :data:`INSERT_ROWS` rows, then powers of two (a
        few texts, each prepared once): one call into SQLite each, which lets go of the interpreter's
        lock for all of it (``executemany`` takes it back after every row: a thread writing behind
        would wait for the event loop at each one)."""
        most = min(INSERT_ROWS, variables(self._db) // width)
        rows, at = len(values) // width, 0
        while at < rows:
            n = min(most, 1 << ((rows - at).bit_length() - 1))
            self._db.execute(insert_sql(head, width, n), values[at * width:(at + n) * width])
            at += n

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
        with self._journal_lock:  # (nothing is staged meanwhile: the journal is emptied only when all folded)
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
                events = []
                for run_id, kind, rnd, role, ts, text in [] if folded is None else _journal.read(fd, folded, name):
                    if kind == TEXTS:  # the texts the next event refers to
                        events.append(RunEvent(run_id, kind, None, rnd, role, 0, ts, text=text))
                    else:
                        event = RunEvent(run_id, kind, None, rnd, role, 0, ts, text=text)
                        if events and events[-1].kind == TEXTS:
                            event.texts = events.pop().data
                        events.append(event)
                events = [e for e in events if e.kind != TEXTS]  # (texts whose event was cut short)
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
        texts = new_texts(events)
        if texts:
            self._db.executemany("INSERT OR IGNORE INTO texts (key, text) VALUES (?, ?)", texts)

    # ------------------------------------------------------------------ leases
    def acquire(self, run_id: str, holder: Holder, ttl: float = LEASE_TTL) -> None:
        with self._lock:
            try:
                self._db.commit()
                self._db.execute("BEGIN IMMEDIATE")  # (the check and the take, one writer at a time)
                current = self._lease_row(run_id)
                if current is not None and current.token != holder.token and not gone(current, ttl=ttl):
                    self._db.rollback()
                    raise RunInUse(run_id, host=current.host, pid=current.pid, since=current.since,
                                   heartbeat=current.heartbeat)
                self._db.execute(
                    "INSERT OR REPLACE INTO leases (run_id, host, pid, started, token, since, heartbeat) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (run_id, holder.host, holder.pid, holder.started, holder.token, holder.since, holder.heartbeat),
                )
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                raise StoreError(f"could not take the lease of run {run_id!r} in {self.path}: {exc}") from exc

    def _lease_row(self, run_id: str) -> Holder | None:
        row = self._db.execute(
            "SELECT host, pid, started, token, since, heartbeat FROM leases WHERE run_id = ?", (run_id,)
        ).fetchone()
        return None if row is None else Holder(*row)

    def renew(self, run_id: str, holder: Holder) -> None:
        with self._lock:
            try:
                self._db.execute("UPDATE leases SET heartbeat = ? WHERE run_id = ? AND token = ?",
                                 (holder.heartbeat, run_id, holder.token))
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                raise StoreError(f"could not renew the lease of run {run_id!r} in {self.path}: {exc}") from exc

    def release(self, run_id: str, holder: Holder) -> None:
        with self._lock:
            try:
                self._db.execute("DELETE FROM leases WHERE run_id = ? AND token = ?", (run_id, holder.token))
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                raise StoreError(f"could not release the lease of run {run_id!r} in {self.path}: {exc}") from exc

    def holder(self, run_id: str) -> Holder | None:
        with self._lock:
            self._db.commit()
            current = self._lease_row(run_id)
        return None if current is None or gone(current) else current

    # ------------------------------------------------------------------ texts
    def texts(self, keys: Iterable[str]) -> dict[str, str]:
        wanted = list(keys)
        found: dict[str, str] = {}
        self._settle()
        with self._lock:
            try:
                self._db.commit()
                for i in range(0, len(wanted), 500):
                    chunk = wanted[i:i + 500]
                    found.update(self._db.execute(
                        f"SELECT key, text FROM texts WHERE key IN ({', '.join('?' * len(chunk))})", chunk))
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):  # a store of an older format, opened read-only: no texts
                    return {}
                raise StoreError(f"could not read the run store {self.path}: {exc}") from exc
            except sqlite3.Error as exc:
                raise StoreError(f"could not read the run store {self.path}: {exc}") from exc
        return found

    def drop_orphan_texts(self) -> int:
        self._settle()
        with self._lock:
            try:
                count = self._db.execute(_ORPHANS).rowcount
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                raise StoreError(f"could not delete unused texts from {self.path}: {exc}") from exc
        return int(count or 0)

    # ------------------------------------------------------------ keeping it small
    def delete(self, run_id: str) -> int:
        """Delete the run's events and lease, and the texts no other run refers to;
        :class:`~rolecast.errors.RunInUse` while a live process holds it. The file keeps its size
        until :meth:`vacuum`."""
        current = self.holder(run_id)
        if current is not None:
            raise RunInUse(run_id, host=current.host, pid=current.pid, since=current.since,
                           heartbeat=current.heartbeat)
        self._settle()
        with self._lock:
            try:
                count = self._db.execute("DELETE FROM events WHERE run_id = ?", (run_id,)).rowcount
                self._db.execute("DELETE FROM leases WHERE run_id = ?", (run_id,))
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                raise StoreError(f"could not delete run {run_id!r} from {self.path}: {exc}") from exc
            self._next.pop(run_id, None)
        if not self._pruning:
            self.drop_orphan_texts()
        return int(count or 0)

    def vacuum(self) -> None:
        """``VACUUM`` (the file shrinks to what it holds), then a WAL checkpoint that truncates the log."""
        self._settle()
        with self._lock:
            try:
                self._db.commit()
                self._db.execute("VACUUM")
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise StoreError(f"could not vacuum the run store {self.path}: {exc}") from exc

    def size(self) -> int | None:
        """The database file plus its write-ahead log, in bytes."""
        self._settle()
        if self.in_memory:
            return None
        return sum(p.stat().st_size for p in (self.path, self.path.with_name(self.path.name + "-wal"))
                   if p.exists())

    def flush(self) -> None:
        """Wait for a batch written behind (:meth:`extend_behind`); nothing else is left unwritten after
        ``append``/``extend``."""
        self._settle()
        with self._lock:
            self._db.commit()

    def events(self, run_id: str, kinds: Iterable[str] | None = None) -> Iterator[RunEvent]:
        query = "SELECT run_id, seq, ts, kind, round, role, data FROM events WHERE run_id = ?"
        params: list[Any] = [run_id]
        wanted = list(kinds) if kinds is not None else None
        if wanted is not None:
            query += f" AND kind IN ({', '.join('?' * len(wanted))})"
            params += wanted
        self._settle()
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
        self._settle()
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


__all__ = ["DEFAULT_STORE_PATH", "SQLiteRunStore"]

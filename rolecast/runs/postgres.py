"""The run store on PostgreSQL, for runs whose roles are spread over several processes or machines.

Same five methods as :class:`~rolecast.runs.store.RunStore`. Every worker of a distributed
run opens its own connection to the same database and appends to the same run; the
sequence numbers of a run stay gapless and in append order because each append takes
a transaction-scoped advisory lock on the run before numbering its event. Each append
is committed before it returns (write-ahead, like the SQLite store).

Needs ``psycopg`` 3 (``pip install "rolecast[postgres]"``); imported when a store is
opened, never by ``import rolecast``. A store pickles as its connection string, so a
runtime can ship it to its workers, which reconnect.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from loguru import logger

from ..errors import ConfigError, RunInUse, StoreError
from .base import RunInfo, RunStore, run_infos
from .events import FORMAT_VERSION, LLM_CALL, MESSAGE, RunEvent, check_payload
from .lease import LEASE_TTL, Holder, gone
from .requests import new_texts

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rolecast_events (
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    ts     DOUBLE PRECISION NOT NULL,
    kind   TEXT NOT NULL,
    round  INTEGER NOT NULL DEFAULT 0,
    role   TEXT NOT NULL DEFAULT '',
    data   JSONB NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX IF NOT EXISTS rolecast_events_kind ON rolecast_events (run_id, kind, seq);
CREATE TABLE IF NOT EXISTS rolecast_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rolecast_leases (
    run_id    TEXT PRIMARY KEY,
    host      TEXT NOT NULL,
    pid       INTEGER NOT NULL,
    started   DOUBLE PRECISION,
    token     TEXT NOT NULL,
    since     DOUBLE PRECISION NOT NULL,
    heartbeat DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS rolecast_texts (
    key  TEXT PRIMARY KEY,
    text TEXT NOT NULL
);
"""

# the texts no model call refers to any more (see rolecast.runs.requests and the SQLite store's
# _ORPHANS): the keys in use gathered once, then an anti-join (not a scan of the events per text)
_ORPHANS = """
WITH calls AS (
    SELECT m -> 1 AS ref FROM rolecast_events AS e, jsonb_array_elements(e.data -> 'messages') AS m
    WHERE e.kind = 'llm_call' AND jsonb_typeof(e.data -> 'messages') = 'array' AND jsonb_typeof(m) = 'array'
), used AS (
    SELECT ref #>> '{}' AS key FROM calls WHERE jsonb_typeof(ref) = 'string'
    UNION
    SELECT p FROM calls, jsonb_array_elements_text(ref) AS p WHERE jsonb_typeof(ref) = 'array'
    UNION
    SELECT c.value FROM rolecast_events AS e, jsonb_each_text(e.data -> 'constraints') AS c
    WHERE e.kind = 'llm_call' AND jsonb_typeof(e.data -> 'constraints') = 'object'
)
DELETE FROM rolecast_texts AS t WHERE NOT EXISTS (SELECT 1 FROM used WHERE used.key = t.key)
"""

_APPEND = """
INSERT INTO rolecast_events (run_id, seq, ts, kind, round, role, data)
SELECT %(run_id)s, COALESCE(MAX(seq), 0) + 1, %(ts)s, %(kind)s, %(round)s, %(role)s, %(data)s::jsonb
FROM rolecast_events WHERE run_id = %(run_id)s
RETURNING seq
"""


class PostgresRunStore(RunStore):
    """A run store in a PostgreSQL database (``dsn``: ``postgresql://user@host:port/db`` or key=value)."""

    def __init__(self, dsn: str, *, connect_timeout: float = 10.0, read_only: bool = False):
        try:
            import psycopg
        except ImportError as exc:
            raise ConfigError(
                'the PostgreSQL run store needs psycopg 3: pip install "rolecast[postgres]"'
            ) from exc
        self.dsn = dsn
        self.read_only = read_only
        self._psycopg = psycopg
        self._lock = threading.Lock()
        self._closed = False
        # a reader's session is read-only on the server's side: a write fails there, whatever the code
        # path, and a database user with SELECT rights alone can list and show runs
        self._connect_args: dict[str, Any] = {
            "autocommit": True, "connect_timeout": int(max(1, connect_timeout)),
            "options": "-c default_transaction_read_only=on" if read_only else ""}
        try:
            self._db = psycopg.connect(dsn, **self._connect_args)
            if read_only:
                if self._db.execute("SELECT to_regclass('rolecast_events')").fetchone() in (None, (None,)):
                    self._db.close()
                    raise ConfigError(f"no run store in the PostgreSQL database {self._safe_dsn()} "
                                      "(run a team with this store first)")
                self.format = self._check_format(mark=False)
                return
            with self._db.transaction():
                # creating the table from several workers at once must not race
                self._db.execute("SELECT pg_advisory_xact_lock(7460157)")
                self._db.execute(_SCHEMA)
                self.format = self._check_format()
        except psycopg.Error as exc:
            raise ConfigError(f"cannot open the PostgreSQL run store {self._safe_dsn()}: {exc}") from exc

    def _live(self) -> Any:
        """The connection (the store's lock held); a new one when the last was lost — the server
        restarted, the network broke — so that a store outlives an outage of its server. The operation
        that met the loss failed (a StoreError; nothing it wrote is half there); the next one reconnects."""
        db = self._db
        if self._closed:
            raise StoreError(f"the run store {self._safe_dsn()} was closed")
        if not (db.closed or db.broken):
            return db
        try:
            db.close()
        except self._psycopg.Error:
            pass
        try:
            self._db = db = self._psycopg.connect(self.dsn, **self._connect_args)
        except self._psycopg.Error as exc:
            raise StoreError(f"the PostgreSQL run store {self._safe_dsn()} cannot be reached: {exc}") from exc
        logger.info("run store {}: connected again after the connection was lost", self._safe_dsn())
        return db

    def _check_format(self, *, mark: bool = True) -> int:
        """The payload format the database held (``rolecast_meta``), then (``mark``) marked as this version's."""
        row = self._db.execute("SELECT value FROM rolecast_meta WHERE key = 'format'").fetchone()
        if row is None:
            has_events = self._db.execute("SELECT 1 FROM rolecast_events LIMIT 1").fetchone() is not None
            found = 1 if has_events else FORMAT_VERSION
        else:
            found = int(row[0])
        if found > FORMAT_VERSION:
            raise ConfigError(f"the PostgreSQL run store {self._safe_dsn()} holds payload format {found}; this "
                              f"version of rolecast reads formats 1 to {FORMAT_VERSION}: upgrade rolecast")
        if not mark:
            return found
        self._db.execute("INSERT INTO rolecast_meta (key, value) VALUES ('format', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (str(FORMAT_VERSION),))
        return found

    def _safe_dsn(self) -> str:
        """The connection string without a password, for messages."""
        text = self.dsn
        if "@" in text and "://" in text:
            scheme, rest = text.split("://", 1)
            creds, host = rest.rsplit("@", 1)
            return f"{scheme}://{creds.split(':', 1)[0]}@{host}"
        return " ".join(p for p in text.split() if not p.startswith("password="))

    def __repr__(self) -> str:
        return f"PostgresRunStore({self._safe_dsn()!r}{', read_only=True' if self.read_only else ''})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_reopen, (self.dsn, self.read_only))

    def append(self, event: RunEvent) -> RunEvent:
        self.extend((event,))
        return event

    def extend(self, events: Sequence[RunEvent]) -> None:
        if not events:
            return
        self._refuse_if_read_only()
        rows = [
            {"run_id": e.run_id, "ts": e.ts, "kind": e.kind, "round": e.round, "role": e.role,
             "data": e.text}
            for e in events
        ]
        with self._lock:
            db = self._live()
            try:
                with db.transaction():
                    # one writer per run at a time: MAX(seq)+1 stays unique and gapless across workers
                    # (the locks taken in one order, so two writers of the same runs cannot deadlock)
                    for run_id in sorted({e.run_id for e in events}):
                        db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (run_id,))
                    seqs = [db.execute(_APPEND, params).fetchone() for params in rows]
                    texts = new_texts(events)
                    if texts:
                        with db.cursor() as cursor:
                            cursor.executemany("INSERT INTO rolecast_texts (key, text) VALUES (%s, %s) "
                                               "ON CONFLICT (key) DO NOTHING", texts)
            except self._psycopg.Error as exc:
                raise StoreError(f"could not write to the run store {self._safe_dsn()}: {exc}") from exc
        for event, row in zip(events, seqs, strict=True):
            assert row is not None
            event.seq = int(row[0])

    def append_checked(
        self, event: RunEvent, kinds: Iterable[str], check: Callable[[list[RunEvent]], None],
    ) -> RunEvent:
        """The read, the check and the append in one transaction holding the run's advisory lock (the
        one every append takes): no other writer of the run comes in between."""
        self._refuse_if_read_only()
        params = {"run_id": event.run_id, "ts": event.ts, "kind": event.kind, "round": event.round,
                  "role": event.role, "data": event.text}
        with self._lock:
            db = self._live()
            try:
                with db.transaction():
                    db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (event.run_id,))
                    rows = db.execute(
                        "SELECT run_id, seq, ts, kind, round, role, data FROM rolecast_events "
                        "WHERE run_id = %s AND kind = ANY(%s) ORDER BY seq", (event.run_id, list(kinds))).fetchall()
                    check([RunEvent(r, k, check_payload(r, seq, k, data), rnd, role, seq, ts)
                           for r, seq, ts, k, rnd, role, data in rows])
                    row = db.execute(_APPEND, params).fetchone()
            except self._psycopg.Error as exc:
                raise StoreError(f"could not write to the run store {self._safe_dsn()}: {exc}") from exc
        assert row is not None
        event.seq = int(row[0])
        return event

    # ------------------------------------------------------------------ leases
    def acquire(self, run_id: str, holder: Holder, ttl: float = LEASE_TTL) -> None:
        self._refuse_if_read_only()
        with self._lock:
            db = self._live()
            try:
                with db.transaction():
                    db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("lease:" + run_id,))
                    row = db.execute(
                        "SELECT host, pid, started, token, since, heartbeat FROM rolecast_leases WHERE run_id = %s",
                        (run_id,),
                    ).fetchone()
                    current = None if row is None else Holder(*row)
                    if current is not None and current.token != holder.token and not gone(current, ttl=ttl):
                        raise RunInUse(run_id, host=current.host, pid=current.pid, since=current.since,
                                       heartbeat=current.heartbeat)
                    db.execute(
                        """INSERT INTO rolecast_leases (run_id, host, pid, started, token, since, heartbeat)
                           VALUES (%s, %s, %s, %s, %s, %s, %s)
                           ON CONFLICT (run_id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,
                               started = EXCLUDED.started, token = EXCLUDED.token, since = EXCLUDED.since,
                               heartbeat = EXCLUDED.heartbeat""",
                        (run_id, holder.host, holder.pid, holder.started, holder.token, holder.since,
                         holder.heartbeat),
                    )
            except self._psycopg.Error as exc:
                raise StoreError(f"could not take the lease of run {run_id!r}: {exc}") from exc

    def renew(self, run_id: str, holder: Holder) -> None:
        self._query_write("UPDATE rolecast_leases SET heartbeat = %s WHERE run_id = %s AND token = %s",
                          (holder.heartbeat, run_id, holder.token))

    def release(self, run_id: str, holder: Holder) -> None:
        self._query_write("DELETE FROM rolecast_leases WHERE run_id = %s AND token = %s", (run_id, holder.token))

    def holder(self, run_id: str) -> Holder | None:
        rows = self._query(
            "SELECT host, pid, started, token, since, heartbeat FROM rolecast_leases WHERE run_id = %s", [run_id])
        current = Holder(*rows[0]) if rows else None
        return None if current is None or gone(current) else current

    def delete(self, run_id: str) -> int:
        current = self.holder(run_id)
        if current is not None:
            raise RunInUse(run_id, host=current.host, pid=current.pid, since=current.since,
                           heartbeat=current.heartbeat)
        count = self._query_write("DELETE FROM rolecast_events WHERE run_id = %s", (run_id,))
        self._query_write("DELETE FROM rolecast_leases WHERE run_id = %s", (run_id,))
        if not self._pruning:
            self.drop_orphan_texts()
        return count

    def texts(self, keys: Iterable[str]) -> dict[str, str]:
        wanted = list(keys)
        if not wanted:
            return {}
        return dict(self._query("SELECT key, text FROM rolecast_texts WHERE key = ANY(%s)", [wanted]))

    def drop_orphan_texts(self) -> int:
        return self._query_write(_ORPHANS, ())

    def vacuum(self) -> None:
        self._query_write("VACUUM rolecast_events", ())  # (the connection autocommits: VACUUM may run)
        self._query_write("VACUUM rolecast_texts", ())

    def size(self) -> int | None:
        rows = self._query("SELECT pg_total_relation_size('rolecast_events') + "
                           "pg_total_relation_size('rolecast_texts')", [])
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def _refuse_if_read_only(self) -> None:
        if self.read_only:
            raise StoreError(f"the run store {self._safe_dsn()} was opened read-only: nothing can be written to it")

    def _query_write(self, sql: str, params: Iterable[Any]) -> int:
        self._refuse_if_read_only()
        with self._lock:
            db = self._live()
            try:
                return int(db.execute(sql, list(params)).rowcount or 0)
            except self._psycopg.Error as exc:
                raise StoreError(f"could not write to the run store {self._safe_dsn()}: {exc}") from exc

    def _query(self, sql: str, params: Iterable[Any]) -> list[tuple[Any, ...]]:
        """A read's rows; a read that meets a lost connection is made once more on a new one."""
        with self._lock:
            for attempt in (1, 2):
                db = self._live()
                try:
                    return list(db.execute(sql, list(params)).fetchall())
                except self._psycopg.Error as exc:
                    if attempt == 1 and (db.closed or db.broken):
                        continue
                    raise StoreError(f"could not read the run store {self._safe_dsn()}: {exc}") from exc
        raise AssertionError("unreachable")

    def events(self, run_id: str, kinds: Iterable[str] | None = None) -> Iterator[RunEvent]:
        sql = "SELECT run_id, seq, ts, kind, round, role, data FROM rolecast_events WHERE run_id = %s"
        params: list[Any] = [run_id]
        if kinds is not None:
            sql += " AND kind = ANY(%s)"
            params.append(list(kinds))
        for run, seq, ts, kind, rnd, role, data in self._query(sql + " ORDER BY seq", params):
            yield RunEvent(run, kind, check_payload(run, seq, kind, data), rnd, role, seq, ts)

    def runs(self) -> list[RunInfo]:
        rows = self._query(
            f"""SELECT run_id, MIN(ts), COUNT(*), COUNT(*) FILTER (WHERE kind = '{MESSAGE}'),
                       COUNT(*) FILTER (WHERE kind = '{LLM_CALL}'), MAX(round)
                FROM rolecast_events GROUP BY run_id ORDER BY MIN(ts) DESC""",
            [],
        )
        return run_infos(self, rows)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._db.close()


def _reopen(dsn: str, read_only: bool) -> PostgresRunStore:
    """A store travels (pickle, Ray) as its address: the receiver connects anew."""
    return PostgresRunStore(dsn, read_only=read_only)


__all__ = ["PostgresRunStore"]

"""The SQL of the SQLite run store (:mod:`rolecast.runs.sqlite`): its tables, its inserts, and the query
that finds its unused texts."""

import sqlite3

SCHEMA = """
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
CREATE TABLE IF NOT EXISTS leases (
    run_id    TEXT PRIMARY KEY,
    host      TEXT NOT NULL,
    pid       INTEGER NOT NULL,
    started   REAL,
    token     TEXT NOT NULL,
    since     REAL NOT NULL,
    heartbeat REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS texts (
    key  TEXT PRIMARY KEY,
    text TEXT NOT NULL
);
"""

# The keys of the texts some model call refers to (rolecast.runs.requests: a call's messages are
# [role, key] or [role, key, extras], the key a list of chunks' keys for a long text; its constraints
# {name: key}); any other text is an orphan.
ORPHANS = """
DELETE FROM texts WHERE key NOT IN (
    SELECT json_extract(m.value, '$[1]') FROM events AS e, json_each(e.data, '$.messages') AS m
    WHERE e.kind = 'llm_call' AND json_type(m.value, '$[1]') = 'text'
    UNION SELECT p.value FROM events AS e, json_each(e.data, '$.messages') AS m, json_each(m.value, '$[1]') AS p
    WHERE e.kind = 'llm_call' AND json_type(m.value, '$[1]') = 'array'
    UNION SELECT c.value FROM events AS e, json_each(e.data, '$.constraints') AS c
    WHERE e.kind = 'llm_call' AND c.value IS NOT NULL
)
"""

#: the heads of the store's inserts: ``insert_sql`` adds the rows' placeholders
EVENTS_INSERT = "INSERT INTO events (run_id, seq, ts, kind, round, role, data) VALUES "
TEXTS_INSERT = "INSERT OR IGNORE INTO texts (key, text) VALUES "
_statements: dict[tuple[str, int, int], str] = {}


def insert_sql(head: str, width: int, rows: int) -> str:
    """``head`` followed by ``rows`` groups of ``width`` placeholders (made once per shape)."""
    sql = _statements.get((head, width, rows))
    if sql is None:
        sql = _statements[(head, width, rows)] = head + ", ".join(["(" + ", ".join("?" * width) + ")"] * rows)
    return sql


def variables(db: sqlite3.Connection) -> int:
    """How many values one statement may hold (999 where Python cannot ask: before 3.11)."""
    getlimit = getattr(db, "getlimit", None)
    return 999 if getlimit is None else int(getlimit(getattr(sqlite3, "SQLITE_LIMIT_VARIABLE_NUMBER", 9)))


__all__ = ["EVENTS_INSERT", "ORPHANS", "SCHEMA", "TEXTS_INSERT", "insert_sql", "variables"]

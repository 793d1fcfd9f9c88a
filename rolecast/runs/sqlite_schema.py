"""The tables of the SQLite run store (:mod:`rolecast.runs.sqlite`), and the query that finds its unused texts."""

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


__all__ = ["ORPHANS", "SCHEMA"]

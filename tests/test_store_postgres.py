"""PostgresRunStore against a real PostgreSQL server started on 127.0.0.1 (skipped when it is not installed),
and a distributed run resumed from it."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("psycopg")

from pg_server import PostgresServer, find_bin

from rolecast.errors import ConfigError
from rolecast.runs.postgres import PostgresRunStore
from rolecast.runs.store import LLM_CALL, MESSAGE, RUN_STARTED, RunEvent, RunStore

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(find_bin() is None, reason="PostgreSQL is not installed (apt-get install postgresql)"),
]


@pytest.fixture(scope="module")
def pg():
    server = PostgresServer().start()
    yield server
    server.stop()


def test_events_round_trip_in_order_and_runs_are_listed(pg):
    store = PostgresRunStore(pg.dsn)
    assert isinstance(store, RunStore)
    store.append(RunEvent("a", RUN_STARTED, {"team": "T", "idea": "build it"}))
    store.append(RunEvent("a", MESSAGE, {"message": {"content": "héllo"}}, round=1, role="Alice"))
    store.append(RunEvent("a", LLM_CALL, {"fingerprint": "f"}, round=1, role="Alice"))
    store.append(RunEvent("b", MESSAGE, {"message": {}}))
    events = list(store.events("a"))
    assert [(e.seq, e.kind, e.role) for e in events] == [
        (1, RUN_STARTED, ""), (2, MESSAGE, "Alice"), (3, LLM_CALL, "Alice"),
    ]
    assert events[1].data["message"]["content"] == "héllo"
    assert [e.seq for e in store.events("a", [LLM_CALL])] == [3]
    info = {r.run_id: r for r in store.runs()}
    assert (info["a"].events, info["a"].messages, info["a"].llm_calls, info["a"].team) == (3, 1, 1, "T")
    store.close()


def test_many_writers_number_one_run_without_gaps(pg):
    stores = [PostgresRunStore(pg.dsn) for _ in range(4)]

    def write(store: PostgresRunStore, k: int) -> None:
        for i in range(25):
            store.append(RunEvent("shared", MESSAGE, {"writer": k, "i": i}))

    threads = [threading.Thread(target=write, args=(s, k)) for k, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = list(stores[0].events("shared"))
    assert [e.seq for e in events] == list(range(1, 101))
    # each writer's events keep their order
    for k in range(4):
        assert [e.data["i"] for e in events if e.data["writer"] == k] == list(range(25))
    for s in stores:
        s.close()


def test_a_store_travels_as_its_address_and_a_bad_one_is_a_typed_error(pg):
    import pickle

    store = pickle.loads(pickle.dumps(PostgresRunStore(pg.dsn)))
    store.append(RunEvent("c", MESSAGE, {}))
    assert len(list(store.events("c"))) == 1
    with pytest.raises(ConfigError, match="cannot open the PostgreSQL run store"):
        PostgresRunStore(f"postgresql://nobody:secret@127.0.0.1:{pg.port + 1}/x", connect_timeout=2)
    try:
        PostgresRunStore(f"postgresql://nobody:secret@127.0.0.1:{pg.port + 1}/x", connect_timeout=2)
    except ConfigError as exc:
        assert "secret" not in str(exc)


def test_the_runs_commands_read_a_postgresql_store_by_its_url(pg, capsys):
    from rolecast.cli import main
    from rolecast.runs import open_store

    store = open_store(pg.dsn)
    assert isinstance(store, PostgresRunStore)
    store.append(RunEvent("by-url", RUN_STARTED, {"team": "T", "idea": "read me through the door"}))
    store.append(RunEvent("by-url", MESSAGE, {"message": {"content": "hi", "sent_from": "Alice"}}, round=1))
    store.close()
    assert main(["runs", "list", "--store", pg.dsn]) == 0
    listed = capsys.readouterr().out
    assert "by-url" in listed and "read me through the door" in listed
    assert main(["runs", "show", "by-url", "--store", pg.dsn]) == 0
    assert "Alice" in capsys.readouterr().out


def test_one_writer_per_run_and_delete_and_prune_on_postgresql(pg):
    import subprocess
    import sys
    import time

    from rolecast.errors import RunInUse
    from rolecast.runs.lease import Holder

    store = PostgresRunStore(pg.dsn)
    mine = Holder()
    store.acquire("pg-held", mine)
    other = PostgresRunStore(pg.dsn)  # (another connection, as another process would have)
    with pytest.raises(RunInUse) as caught:
        other.acquire("pg-held", Holder())
    assert caught.value.pid == mine.pid
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.acquire("pg-dead", Holder(pid=dead.pid, started=None))
    other.acquire("pg-dead", Holder())  # its holder died on this host: taken at once
    far = Holder(host="elsewhere", heartbeat=time.time() - 300)
    store.acquire("pg-far", far)
    other.acquire("pg-far", Holder())  # its heartbeat timed out

    for run_id, age in (("pg-old", 90), ("pg-new", 1)):
        store.append(RunEvent(run_id, RUN_STARTED, {"idea": run_id}, ts=time.time() - age * 86400))
        store.append(RunEvent(run_id, MESSAGE, {"message": {"content": "x"}}))
    with pytest.raises(RunInUse):
        other.delete("pg-held")
    assert store.prune(older_than=30 * 86400) == ["pg-old"]
    assert [e.kind for e in store.events("pg-new")] == [RUN_STARTED, MESSAGE]
    assert store.delete("pg-new") == 2 and list(store.events("pg-new")) == []
    assert store.size() > 0
    store.release("pg-held", mine)
    store.close()
    other.close()


def test_full_requests_keep_each_text_once_and_deleting_runs_drops_orphans_on_postgresql(pg):
    """A team's calls on PostgreSQL: every message read back whole, a shared system prompt kept once,
    the texts only a deleted run used deleted with it."""
    from test_full_requests import BRIEF, chat

    from rolecast.runs import requests_of
    from rolecast.runs.requests import text_key

    store = PostgresRunStore(pg.dsn)
    before = store._query("SELECT COUNT(*) FROM rolecast_texts", [])[0][0]  # (other tests' runs)
    try:
        a, seen_a = chat(store, rounds=3, run_id="pg-chat-a", idea="Please review PR 1.")
        b, seen_b = chat(store, rounds=2, run_id="pg-chat-b", idea="Please review PR 2.")
        requests = requests_of(store, store.events(a, [LLM_CALL]))
        assert [r.messages for r in requests] == seen_a and all(r.settings["max_tokens"] > 0 for r in requests)
        rows = store._query("SELECT COUNT(*) FROM rolecast_texts WHERE text = %s", [BRIEF])
        assert rows[0][0] == 1  # 5 calls of two runs, one copy
        only_a = store._query("SELECT COUNT(*) FROM rolecast_texts WHERE text LIKE %s", ["%PR 1.%"])[0][0]
        assert only_a >= 1
        store.delete(a)
        assert store._query("SELECT COUNT(*) FROM rolecast_texts WHERE text LIKE %s", ["%PR 1.%"])[0][0] == 0
        assert store.texts([text_key(BRIEF)]) == {text_key(BRIEF): BRIEF}
        assert [r.messages for r in requests_of(store, store.events(b, [LLM_CALL]))] == seen_b
        store.delete(b)
        assert store._query("SELECT COUNT(*) FROM rolecast_texts", [])[0][0] == before
    finally:
        store.close()


def test_readers_open_postgresql_read_only_so_a_select_only_user_can_list_and_show_runs(pg, capsys):
    import psycopg

    from rolecast.cli import main
    from rolecast.errors import StoreError
    from rolecast.runs import open_store

    writer = PostgresRunStore(pg.dsn)
    writer.append(RunEvent("for-readers", RUN_STARTED, {"team": "T", "idea": "read me, change nothing"}))
    writer.close()
    with psycopg.connect(pg.dsn, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS analyst")
        admin.execute("CREATE ROLE analyst LOGIN")
        admin.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO analyst")
        admin.execute("UPDATE rolecast_meta SET value = '2' WHERE key = 'format'")  # a store an older version wrote
        admin.execute("DROP DATABASE IF EXISTS no_runs_here")
        admin.execute("CREATE DATABASE no_runs_here")
    analyst = pg.dsn.replace(f"//{pg.user}@", "//analyst@")
    assert analyst != pg.dsn

    assert main(["runs", "list", "--store", analyst]) == 0  # (a writer's open needs CREATE and UPDATE rights)
    assert "read me, change nothing" in capsys.readouterr().out
    assert main(["runs", "show", "for-readers", "--store", analyst]) == 0

    reader = open_store(pg.dsn, read_only=True)  # even as a user who may write, a reader writes nothing
    assert isinstance(reader, PostgresRunStore) and reader.format == 2
    with pytest.raises(StoreError, match="read-only"):
        reader.append(RunEvent("for-readers", MESSAGE, {"message": {}}))
    reader.close()
    with psycopg.connect(pg.dsn) as admin:
        assert admin.execute("SELECT value FROM rolecast_meta WHERE key = 'format'").fetchone() == ("2",)
        assert admin.execute("SELECT COUNT(*) FROM rolecast_events WHERE run_id = 'for-readers'").fetchone() == (1,)

    empty = pg.dsn.rsplit("/", 1)[0] + "/no_runs_here"
    with pytest.raises(ConfigError, match="no run store in the PostgreSQL database"):
        open_store(empty, read_only=True)
    with psycopg.connect(empty) as conn:  # and the reader created nothing there
        assert conn.execute("SELECT to_regclass('rolecast_events')").fetchone() == (None,)

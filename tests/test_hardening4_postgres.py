"""Issue 32 on PostgreSQL (a server started on 127.0.0.1 by the test; skipped when not installed): one
approval answered twice at once, and a store whose server went away and came back."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from pg_server import PostgresServer, find_bin
from test_hardening4_runs import asked, check_chunked, check_one_answer, race

from rolecast.errors import DamagedRun, StoreError
from rolecast.runs import RunEvent
from rolecast.runs.events import MESSAGE, RUN_STARTED
from rolecast.runs.lease import Lease
from rolecast.runs.postgres import PostgresRunStore

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(find_bin() is None, reason="PostgreSQL is not installed (apt-get install postgresql)"),
]


@pytest.fixture(scope="module")
def pg():
    server = PostgresServer().start()
    yield server
    server.stop()


def test_approve_and_reject_within_5ms_from_two_processes_postgres(pg, monkeypatch):
    first, second = PostgresRunStore(pg.dsn), PostgresRunStore(pg.dsn)
    try:
        asked(first, "pg-ask")
        check_one_answer(race(monkeypatch, [first, second], "pg-ask"), first, "pg-ask")
    finally:
        first.close()
        second.close()


def test_chunked_prompts_on_postgres(pg):
    store = PostgresRunStore(pg.dsn)
    try:
        check_chunked(store)
    finally:
        store.close()


def test_a_jsonb_payload_of_the_wrong_shape_is_a_damaged_run_on_postgres(pg):
    store = PostgresRunStore(pg.dsn)
    try:
        for run_id in ("pg-good", "pg-bad"):
            store.append(RunEvent(run_id, RUN_STARTED, {"team": "T", "idea": run_id}))
            store.append(RunEvent(run_id, MESSAGE, {"message": {"content": "hi"}}, 1, "A"))
        store._query_write("UPDATE rolecast_events SET data = '[1, 2]' WHERE run_id = 'pg-bad' AND seq = 1", ())
        infos = {info.run_id: info for info in store.runs()}
        assert "not an object" in infos["pg-bad"].damaged and infos["pg-good"].idea == "pg-good"
        with pytest.raises(DamagedRun, match="run 'pg-bad' is damaged: its event 1 \\(run_started\\)"):
            list(store.events("pg-bad"))
    finally:
        store.close()


def test_the_server_killed_while_a_run_holds_its_lease_then_back(tmp_path):
    """The server goes away while this process holds a run's lease (the release cannot reach it), then
    comes back: the same store object reads again, and a retry in this process takes its own lease back."""
    server = PostgresServer().start()
    store = PostgresRunStore(server.dsn)
    try:
        store.append(RunEvent("pgk2", RUN_STARTED, {"team": "T"}))
        lease = Lease(store, "pgk2").acquire()
        server._run("pg_ctl", "-D", str(server.data), "-m", "immediate", "-w", "stop")
        with pytest.raises(StoreError):
            store.append(RunEvent("pgk2", MESSAGE, {"message": {"content": "lost"}}))
        lease.release()  # (the team's run ended with the error: its lease cannot be deleted over the lost line)
        server._run("pg_ctl", "-D", str(server.data), "-l", str(server.tmp / "log"), "-w", "-t", "60", "-o",
                    f"-h 127.0.0.1 -p {server.port} -k {server.tmp} -F", "start")
        assert [e.kind for e in store.events("pgk2")] == [RUN_STARTED]  # the store connected again
        again = Lease(store, "pgk2").acquire()  # a retry in the same process: not RunInUse of its own pid
        store.append(RunEvent("pgk2", MESSAGE, {"message": {"content": "kept"}}))
        assert [e.kind for e in store.events("pgk2")] == [RUN_STARTED, MESSAGE]
        again.release()
        assert store.holder("pgk2") is None
    finally:
        store.close()
        server.stop()

"""Issue 32 on PostgreSQL (a server started on 127.0.0.1 by the test; skipped when not installed): one
approval answered twice at once, and a store whose server went away and came back."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from pg_server import PostgresServer, find_bin
from test_hardening4_runs import asked, check_chunked, check_one_answer, race

from rolecast.errors import DamagedRun
from rolecast.runs import RunEvent
from rolecast.runs.events import MESSAGE, RUN_STARTED
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

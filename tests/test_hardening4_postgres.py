"""Issue 32 on PostgreSQL (a server started on 127.0.0.1 by the test; skipped when not installed): one
approval answered twice at once, and a store whose server went away and came back."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from pg_server import PostgresServer, find_bin
from test_hardening4_runs import asked, check_one_answer, race

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

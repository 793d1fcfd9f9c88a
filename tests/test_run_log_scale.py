"""The run log at scale: a round of many roles is written in bounded batches, the log remembers a
bounded number of sent texts, and neither changes what the store holds or what the run says."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
from pathlib import Path

import pytest

from rolecast.errors import StoreError
from rolecast.runs import journal, requests, sqlite
from rolecast.runs import log as run_log
from rolecast.runs.events import RunEvent
from rolecast.runs.requests import SentTexts, requests_of
from rolecast.runs.store import LLM_CALL, MESSAGE, SQLiteRunStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import simulation


def _said(history) -> list[tuple[str, str, list[str]]]:
    return [(m.sent_from, m.content, sorted(m.send_to)) for m in history]


def _simulate(agents: int, rounds: int, store: Path | None):
    team = simulation.build_team(agents, llm=simulation.instant_model(), store=store)
    try:
        history, _ = asyncio.run(simulation.simulate(team, rounds))
    finally:
        team.close()
    return history


def test_a_round_of_many_roles_is_written_in_bounded_batches_and_the_journal_stays_small(tmp_path, monkeypatch):
    # every turn of a round on the instant model runs in one turn of the event loop: the log must not
    # hold the whole round (nor the journal grow with it) until the round's end
    monkeypatch.setattr(run_log, "BATCH_EVENTS", 40)
    monkeypatch.setattr(journal, "ROTATE_BYTES", 16 * 1024)
    # (a batch written behind, in a thread, leaves the journal to grow up to this before one is written at once)
    monkeypatch.setattr(sqlite, "WRITE_BEHIND", True)
    monkeypatch.setattr(sqlite, "BEHIND_BYTES", 32 * 1024)
    batches: list[int] = []
    journal_sizes: list[int] = []
    extend = SQLiteRunStore._extend

    def spy(self, events):
        batches.append(len(events))
        if self._journal is not None:
            journal_sizes.append(self._journal.size)
        return extend(self, events)

    monkeypatch.setattr(SQLiteRunStore, "_extend", spy)
    agents, rounds = 300, 2
    history = _simulate(agents, rounds, tmp_path / "runs.db")

    assert max(batches) <= 40  # (the round of 300 turns logs 600 events)
    assert max(journal_sizes) < 32 * 1024 + 2 * 40 * 2048  # emptied once folded, never a whole round
    assert _said(history) == _said(_simulate(agents, rounds, None))  # the store never changes the run
    store = SQLiteRunStore(tmp_path / "runs.db")
    try:
        run_id = store.runs()[0].run_id
        assert len(list(store.events(run_id, [LLM_CALL]))) == agents * rounds
        assert len(list(store.events(run_id, [MESSAGE]))) == 1 + agents * rounds
    finally:
        store.close()


def test_the_sent_texts_a_log_remembers_are_bounded_and_every_request_still_reads_back_whole(tmp_path, monkeypatch):
    kept = SentTexts(limit=3)
    for key in "abcdefg":
        kept.add(key)
    assert len(kept) <= 6 and "g" in kept and "a" not in kept  # the oldest generation forgotten
    assert "e" in kept and "e" in kept._new  # a key met in the older generation is kept on

    # a log that remembers 8 texts at a time, on 40 agents (80 system prompts and posts a round): the
    # texts it forgot are sent again, and the store keeps each once
    monkeypatch.setattr(requests, "SENT_TEXTS_KEPT", 8)
    _simulate(40, 3, tmp_path / "runs.db")
    store = SQLiteRunStore(tmp_path / "runs.db")
    try:
        run_id = store.runs()[0].run_id
        calls = list(store.events(run_id, [LLM_CALL]))
        assert len(calls) == 120
        read = requests_of(store, calls)
        assert all(m["content"] for r in read for m in r.messages)  # no text the store lacks
        assert read[-1].messages[0]["content"] == "You are a Agent, named agent39. "
        (count,) = store._db.execute("SELECT COUNT(*) FROM texts").fetchone()
        assert count == 40 + 120  # each agent's system prompt once, each post's prompt once
    finally:
        store.close()


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_a_forgotten_key_comes_back_as_not_sent(limit):
    kept = SentTexts(limit=limit)
    seen: set[str] = set()
    for i in range(50):
        key = f"k{i % 7}"
        assert (key in kept) <= (key in seen)  # never claims a text it was not given
        kept.add(key)
        seen.add(key)
    assert len(kept) <= 2 * limit


def test_a_full_batch_is_written_behind_in_a_thread_and_a_rounds_end_comes_after_all_of_it(tmp_path, monkeypatch):
    # batches of 40 events: the round goes on while the store's thread writes one; the round's end is
    # written at once, after every batch of the round (before any of its messages is delivered)
    monkeypatch.setattr(run_log, "BATCH_EVENTS", 40)
    monkeypatch.setattr(sqlite, "WRITE_BEHIND", True)
    writers: list[bool] = []
    extend = SQLiteRunStore._extend

    def spy(self, events):
        writers.append(threading.current_thread() is threading.main_thread())
        return extend(self, events)

    monkeypatch.setattr(SQLiteRunStore, "_extend", spy)
    history = _simulate(200, 3, tmp_path / "runs.db")
    assert writers.count(False) >= 3 * 400 // 40 - 6  # most batches behind, in the store's thread
    assert _said(history) == _said(_simulate(200, 3, None))
    store = SQLiteRunStore(tmp_path / "runs.db")
    try:
        events = list(store.events(store.runs()[0].run_id))
    finally:
        store.close()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    for r in (1, 2, 3):
        (end,) = [e.seq for e in events if e.kind == "round_finished" and e.round == r]
        calls = [e.seq for e in events if e.kind == LLM_CALL and e.round == r]
        assert len(calls) == 200 and max(calls) < end


def test_a_batch_written_behind_that_failed_is_written_again_first_by_the_next_write(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite, "WRITE_BEHIND", True)
    store = SQLiteRunStore(tmp_path / "runs.db")
    events = [RunEvent("r", MESSAGE, {"message": {"id": str(i)}}) for i in range(6)]
    assert store.stage(events[:1])  # (a store with a journal writes a batch behind)
    failures = iter([True, True])
    insert = SQLiteRunStore._insert

    def flaky(self, batch, payloads):
        if next(failures, False):
            raise sqlite3.OperationalError("disk I/O error")
        return insert(self, batch, payloads)

    monkeypatch.setattr(SQLiteRunStore, "_insert", flaky)
    try:
        store.extend_behind(events[:3])  # fails in the thread
        with pytest.raises(StoreError):
            store.extend(events[3:5])  # tried again first: fails again, raised here, nothing written
        store.extend(events[3:5])  # the failed batch, then these
        store.extend_behind(events[5:])
        assert [e.data["message"]["id"] for e in store.events("r")] == ["0", "1", "2", "3", "4", "5"]
        assert store._journal is not None and store._journal.folded == store._journal.size
    finally:
        store.close()


@pytest.mark.parametrize("journal_on", [True, False])
def test_a_store_that_writes_behind_is_sent_smaller_batches(tmp_path, monkeypatch, journal_on):
    # 1,200 agents: a round logs 2,400 events, in batches of BEHIND_EVENTS written behind; without a
    # journal the store writes at once, in batches up to BATCH_EVENTS (the calls answered in one turn
    # of the event loop, all 1,200 of them, share one commit)
    monkeypatch.setattr(sqlite, "WRITE_BEHIND", True)
    sizes: list[int] = []
    extend = SQLiteRunStore._extend

    def spy(self, events):
        sizes.append(len(events))
        return extend(self, events)

    monkeypatch.setattr(SQLiteRunStore, "_extend", spy)
    store = SQLiteRunStore(tmp_path / "runs.db", journal=journal_on)
    assert store.writes_behind is journal_on
    team = simulation.build_team(1200, llm=simulation.instant_model(), store=store)
    try:
        asyncio.run(simulation.simulate(team, 2))
    finally:
        team.close()
    if journal_on:
        assert max(sizes) == run_log.BEHIND_EVENTS < run_log.BATCH_EVENTS
    else:
        assert run_log.BEHIND_EVENTS < max(sizes) <= run_log.BATCH_EVENTS


@pytest.mark.parametrize(("count", "rows"), [(1000, 256), (37, 4), (1, 256)])
def test_a_batch_is_inserted_in_statements_of_many_rows_and_reads_back_in_order(tmp_path, monkeypatch, count, rows):
    monkeypatch.setattr(sqlite, "INSERT_ROWS", rows)
    store = SQLiteRunStore(tmp_path / "runs.db")
    try:
        events = [RunEvent("r", MESSAGE, {"message": {"id": str(i)}}, role=f"a{i}") for i in range(count)]
        store.extend(events[:count // 2])
        store.extend(events[count // 2:])
        back = list(store.events("r"))
        assert [(e.seq, e.role, e.data["message"]["id"]) for e in back] == [
            (i + 1, f"a{i}", str(i)) for i in range(count)]
    finally:
        store.close()

"""Issue 32 (the run store's side) and the steering papercuts of issue 31: each test is named after the
hostile input a probe used, and failed on the code before the fix."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import rolecast.runs.approvals as approvals_module
from rolecast.errors import ApprovalAnswered
from rolecast.runs import RunEvent, RunLog, open_store
from rolecast.runs.approvals import approvals, decide
from rolecast.runs.base import RunStore
from rolecast.runs.events import APPROVAL_DECIDED, APPROVAL_REQUESTED, RUN_STARTED


def asked(store: RunStore, run_id: str = "ask") -> None:
    store.append(RunEvent(run_id, RUN_STARTED, {"team": "T"}))
    store.append(RunEvent(run_id, APPROVAL_REQUESTED, {
        "id": "Alice-1", "role": "Alice", "round": 1, "kind": "tool", "name": "rm", "arguments": {"path": "/"},
        "schema": {"type": "object"}}, round=1, role="Alice"))


def race(monkeypatch: pytest.MonkeyPatch, stores: list[RunStore], run_id: str) -> list[Any]:
    """Two answers to one approval, approve and reject, from two connections (two processes' worth), each
    past its own check that the approval waits before the other writes: what each got."""
    both_read = threading.Barrier(2, timeout=10)
    first_read = approvals_module.approvals

    def read_then_wait(store: RunStore, run: str) -> list[dict[str, Any]]:
        found = first_read(store, run)
        try:
            both_read.wait()
        except threading.BrokenBarrierError:
            pass
        return found

    monkeypatch.setattr(approvals_module, "approvals", read_then_wait)
    results: list[Any] = [None, None]

    def answer(i: int, verdict: str) -> None:
        try:
            results[i] = decide(stores[i], run_id, "Alice-1", verdict, reason="no", by=f"person {i}")
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=answer, args=(i, v)) for i, v in enumerate(("approve", "reject"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def check_one_answer(results: list[Any], reader: RunStore, run_id: str) -> None:
    won = [r for r in results if isinstance(r, dict)]
    lost = [r for r in results if isinstance(r, ApprovalAnswered)]
    assert len(won) == 1 and len(lost) == 1, results
    assert lost[0].decision["verdict"] == won[0]["verdict"]  # the error names the answer that holds
    assert won[0]["verdict"] in str(lost[0])
    assert len(list(reader.events(run_id, [APPROVAL_DECIDED]))) == 1
    assert approvals(reader, run_id)[0]["decision"]["verdict"] == won[0]["verdict"]


def test_approve_and_reject_within_5ms_from_two_processes_sqlite(tmp_path: Path, monkeypatch):
    db = tmp_path / "runs.db"
    first = open_store(db)
    asked(first)
    second = open_store(db)
    try:
        check_one_answer(race(monkeypatch, [first, second], "ask"), first, "ask")
    finally:
        first.close()
        second.close()


def test_approve_and_reject_at_once_in_one_memory_store(monkeypatch):
    store = open_store(":memory:")
    from rolecast.runs.in_memory import MemoryRunStore

    memory = MemoryRunStore()
    for s in (store, memory):
        asked(s)
        check_one_answer(race(monkeypatch, [s, s], "ask"), s, "ask")


def test_a_store_holding_two_answers_is_read_as_its_first_by_every_reader():
    """A store written by an older version may hold both answers: the CLI, the studio and the resumed
    run all go by the first (the resumed run went by the last)."""
    store = open_store(":memory:")
    asked(store)
    for verdict in ("reject", "approve"):
        store.append(RunEvent("ask", APPROVAL_DECIDED, {"id": "Alice-1", "verdict": verdict, "reason": "no"},
                              round=1, role="Alice"))
    assert approvals(store, "ask")[0]["decision"]["verdict"] == "reject"
    log = RunLog(store, "ask", lease=False)
    assert log.decision("Alice-1")["verdict"] == "reject"
    with pytest.raises(ApprovalAnswered, match="reject"):
        decide(store, "ask", "Alice-1", "approve")

"""Keeping the store small: delete a run, prune by count or age (then VACUUM); the other runs stay
intact and readable, and a run a live process holds is never deleted."""

from __future__ import annotations

import time

import pytest

from rolecast.cli import main
from rolecast.errors import RunInUse, UsageError
from rolecast.runs import LLM_CALL, MESSAGE, RUN_STARTED, MemoryRunStore, RunEvent, SQLiteRunStore
from rolecast.runs.commands import duration
from rolecast.runs.lease import Holder


def fill(store, run_id: str, calls: int, started: float | None = None) -> None:
    t = time.time() if started is None else started
    events = [RunEvent(run_id, RUN_STARTED, {"idea": run_id}, ts=t)]
    for i in range(calls):
        events.append(RunEvent(run_id, LLM_CALL, {"fingerprint": f"{i}", "response": {"text": "x" * 2000}},
                               round=1, role="R", ts=t + i))
        events.append(RunEvent(run_id, MESSAGE, {"message": {"content": f"m{i}"}}, round=1, ts=t + i))
    store.extend(events)


def contents(store, run_id):
    return [(e.seq, e.kind, e.text) for e in store.events(run_id)]


@pytest.mark.parametrize("make", [lambda tmp: SQLiteRunStore(tmp / "runs.db"), lambda tmp: MemoryRunStore()],
                         ids=["sqlite", "memory"])
def test_delete_and_prune_leave_the_other_runs_intact_and_readable(tmp_path, make):
    store = make(tmp_path)
    now = time.time()
    for k, age_days in enumerate([90, 60, 40, 5, 1]):
        fill(store, f"run{k}", 20, started=now - age_days * 86400)
    kept = {r: contents(store, r) for r in ("run3", "run4")}
    assert store.delete("run2") == 41
    assert list(store.events("run2")) == []
    assert store.prune(older_than=30 * 86400) == ["run1", "run0"]
    assert [r.run_id for r in store.runs()] == ["run4", "run3"]
    assert {r: contents(store, r) for r in ("run3", "run4")} == kept  # untouched, still read back
    assert store.prune(keep=1) == ["run3"]
    assert [r.run_id for r in store.runs()] == ["run4"] and contents(store, "run4") == kept["run4"]
    fill(store, "run5", 1)
    assert [e.seq for e in store.events("run5")] == [1, 2, 3]
    with pytest.raises(UsageError):
        store.prune()
    store.close()


def test_a_run_held_by_a_live_process_is_neither_deleted_nor_pruned(tmp_path):
    store = SQLiteRunStore(tmp_path / "runs.db")
    fill(store, "live", 2, started=time.time() - 90 * 86400)
    holder = Holder()
    store.acquire("live", holder)
    with pytest.raises(RunInUse):
        store.delete("live")
    assert store.prune(keep=0) == []
    store.release("live", holder)
    assert store.prune(keep=0) == ["live"]
    store.close()


def test_prune_gives_the_space_back_and_the_commands_say_so(tmp_path, capsys):
    db = tmp_path / "runs.db"
    store = SQLiteRunStore(db)
    for k in range(6):
        fill(store, f"r{k}", 100, started=time.time() - (10 - k) * 86400)
    store.close()
    store = SQLiteRunStore(db)
    big = store.size()
    store.close()
    assert main(["runs", "delete", "r0", "--store", str(db)]) == 0
    assert "deleted run r0" in capsys.readouterr().out
    assert main(["runs", "delete", "r0", "--store", str(db)]) == 2
    assert main(["runs", "prune", "--keep", "2", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert "deleted 3 run(s)" in out and "MiB" in out
    store = SQLiteRunStore(db)
    assert [r.run_id for r in store.runs()] == ["r5", "r4"]
    assert store.size() < big / 2  # VACUUM gave the pages back
    store.close()
    assert main(["runs", "prune", "--older-than", "130h", "--store", str(db)]) == 0
    assert "deleted 1 run(s)" in capsys.readouterr().out


def test_durations_read_as_people_write_them():
    assert duration("30d") == 30 * 86400 and duration("12h") == 43200 and duration("90m") == 5400
    assert duration("2w") == 14 * 86400 and duration("3") == 3 * 86400
    with pytest.raises(UsageError):
        duration("a month")

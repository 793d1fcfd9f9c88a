"""The SQLite store's journal: a model call is durable the moment it is answered (one copy into a
memory-mapped file), reaches the database with the log's next write, and is recovered from the
journal when its process died before that write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rolecast.runs import journal
from rolecast.runs.store import LLM_CALL, MESSAGE, RunEvent, SQLiteRunStore

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).parent / "scripts" / "crash_in_turn.py"


def _call(n: int, run_id: str = "r", role: str = "A") -> RunEvent:
    return RunEvent(run_id, LLM_CALL, {"n": n, "response": {"text": f"answer {n}"}}, 1, role)


def _died(store: SQLiteRunStore) -> None:
    """What the death of the store's process leaves: its journal file, unlocked, and nothing else."""
    assert store._journal is not None
    store._journal.close(remove=False)
    store._journal = None
    store._db.close()


def _journal_files(db: Path) -> list[str]:
    folder = journal.directory_for(db)
    return sorted(os.listdir(folder)) if folder.exists() else []


def _run(db: Path, run_id: str, calls: Path, kill_at: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(db), run_id, str(calls), str(kill_at)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120,
    )


def test_a_call_answered_in_the_turn_a_process_is_killed_in_is_not_asked_again(tmp_path):
    db, calls = tmp_path / "runs.db", tmp_path / "calls.txt"
    crashed = _run(db, "crash", calls, kill_at=3)
    assert crashed.returncode == -9  # killed by its own model at the third call, in flight
    asked = calls.read_text().splitlines()
    assert asked == ["Answer0 answers: go", "Answer1 answers: go", "Answer2 answers: go"]

    resumed = _run(db, "crash", calls)
    assert resumed.returncode == 0, resumed.stderr
    again = calls.read_text().splitlines()[3:]
    # the two answered calls were used in the turn the process died in: they come from the log; the
    # call in flight is asked once more, and the run goes on
    assert again == ["Answer2 answers: go", "Answer3 answers: go", "Answer4 answers: go"]

    straight = _run(tmp_path / "ref.db", "ref", tmp_path / "ref_calls.txt")
    assert resumed.stdout == straight.stdout  # the same history as a run that never stopped
    assert [json.loads(line)["from"] for line in resumed.stdout.splitlines()] == ["user", "R0", "R1", "R2", "R3", "R4"]
    assert _journal_files(db) == []  # recovered, then deleted


def test_staged_events_are_durable_at_once_and_in_the_database_with_the_next_write(tmp_path):
    db = tmp_path / "runs.db"
    store = SQLiteRunStore(db)
    first, second = _call(1), _call(2)
    assert store.stage([first]) is True
    assert list(store.events("r")) == []  # durable in the journal, not in the database yet
    [name] = _journal_files(db)
    assert b'"answer 1"' in (journal.directory_for(db) / name).read_bytes()
    reader = SQLiteRunStore(db)  # another store opening the file leaves a live process's journal alone
    assert list(reader.events("r")) == [] and _journal_files(db) == [name]
    store.extend([first])
    store.stage([second])
    store.extend([RunEvent("r", MESSAGE, {"message": {"content": "hi"}}), second])
    assert [(e.seq, e.kind) for e in reader.events("r")] == [(1, LLM_CALL), (2, MESSAGE), (3, LLM_CALL)]
    store.close()
    assert _journal_files(db) == []
    assert store_rows(db, "SELECT COUNT(*) FROM journals") == 0


def store_rows(db: Path, query: str) -> int:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return int(conn.execute(query).fetchone()[0])


def test_the_events_of_a_dead_process_journal_are_recovered_in_order_once(tmp_path):
    db = tmp_path / "runs.db"
    store = SQLiteRunStore(db)
    events = [_call(n, role=role) for n, role in ((1, "A"), (2, "B"), (3, "A"))]
    for event in events:
        store.stage([event])
    store.extend(events[:1])  # the first is in the database (and the journal's offset past it)
    _died(store)

    again = SQLiteRunStore(db)
    recovered = list(again.events("r"))
    assert [(e.seq, e.role, e.data["n"]) for e in recovered] == [(1, "A", 1), (2, "B", 2), (3, "A", 3)]
    assert [e.ts for e in recovered] == [e.ts for e in events] and {e.round for e in recovered} == {1}
    assert _journal_files(db) == [] and store_rows(db, "SELECT COUNT(*) FROM journals") == 0
    assert len(list(SQLiteRunStore(db).events("r"))) == 3  # recovered once, not at every opening


def test_a_line_cut_short_by_the_crash_and_the_rest_after_it_are_left_out(tmp_path):
    db = tmp_path / "runs.db"
    store = SQLiteRunStore(db)
    store.stage([_call(1), _call(2)])
    journal_file = journal.directory_for(db) / _journal_files(db)[0]
    _died(store)
    data = bytearray(journal_file.read_bytes())
    second = data.index(b"\n") + 1
    data[second + 10:second + 20] = bytes(10)  # the second copy was cut short: a hole of NULs in it
    journal_file.write_bytes(bytes(data))
    assert [e.data["n"] for e in SQLiteRunStore(db).events("r")] == [1]


def test_a_journal_is_emptied_once_it_is_large_and_all_in_the_database(tmp_path, monkeypatch):
    monkeypatch.setattr(journal, "ROTATE_BYTES", 500)
    db = tmp_path / "runs.db"
    store = SQLiteRunStore(db)
    events = [_call(n) for n in range(20)]
    for event in events[:10]:
        store.stage([event])
    store.extend(events[:10])
    assert store._journal is not None and store._journal.size == 0  # cut back: all of it was in the database
    store.stage(events[10:])  # staged after the cut, and never written by the log
    _died(store)
    assert [e.data["n"] for e in SQLiteRunStore(db).events("r")] == list(range(20))


def test_close_writes_what_was_staged_and_never_written(tmp_path):
    db = tmp_path / "runs.db"
    store = SQLiteRunStore(db)
    store.stage([_call(1)])
    store.close()
    assert [e.data["n"] for e in SQLiteRunStore(db).events("r")] == [1]
    assert _journal_files(db) == []


def test_a_store_without_a_journal_says_so_and_writes_nothing(tmp_path):
    store = SQLiteRunStore(tmp_path / "runs.db", journal=False)
    assert store.stage([_call(1)]) is False
    assert list(store.events("r")) == [] and _journal_files(tmp_path / "runs.db") == []


@pytest.mark.parametrize("text", ["a\x00b", "é \t\n\u2028 \" \\ end"])
def test_every_text_an_event_may_hold_comes_back_whole_or_is_refused(tmp_path, text):
    db = tmp_path / "runs.db"
    store = SQLiteRunStore(db)
    event = RunEvent("r", LLM_CALL, {"text": text}, 2, "role\twith\ttabs")
    store.stage([event])  # (JSON escapes a NUL byte, a tab and a newline)
    _died(store)
    [back] = SQLiteRunStore(db).events("r")
    assert (back.data, back.role, back.round) == ({"text": text}, "role\twith\ttabs", 2)

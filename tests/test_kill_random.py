"""``kill -9`` at random moments: a resumed run repeats nothing that was finished.

The simulation (examples/simulation.py, the instant model, a SQLite store) is killed with SIGKILL
at a moment drawn from a seeded random generator — inside a turn, the journal, a database write or
a delivery, wherever the run is — then killed again while it resumes, then resumed to its end. Its
history must be the one a run that was never killed has, its log must hold one model call per turn
(as that run's does: nothing answered was logged twice), and the model must have been asked at most
once more per kill (the call in flight when the process died).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rolecast.runs.store import LLM_CALL, MESSAGE, SQLiteRunStore

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).parent / "scripts" / "kill_simulation.py"
AGENTS, ROUNDS = 120, 6


def _run(db: Path, run_id: str, calls: Path, kill_after: float = 0.0, batch: int = 0) -> subprocess.CompletedProcess:
    args = [str(db), run_id, str(AGENTS), str(ROUNDS), str(calls), str(kill_after), str(batch)]
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=180,
    )


def _result(proc: subprocess.CompletedProcess[str]) -> tuple[list[dict], dict]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    *history, totals = [json.loads(line) for line in proc.stdout.splitlines()]
    return history, totals


def _calls_per_turn(db: Path, run_id: str) -> Counter[tuple[int, str]]:
    store = SQLiteRunStore(db)
    try:
        return Counter((e.round, e.role) for e in store.events(run_id, [LLM_CALL]))
    finally:
        store.close()


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A run that was never killed: its history, its log's calls per turn, the calls it made, its wall time."""
    tmp = tmp_path_factory.mktemp("reference")
    history, totals = _result(_run(tmp / "runs.db", "ref", tmp / "calls.txt"))
    per_turn = _calls_per_turn(tmp / "runs.db", "ref")
    assert len(per_turn) == AGENTS * ROUNDS and set(per_turn.values()) == {1}
    return history, per_turn, _lines(tmp / "calls.txt"), totals


# (batch 50: a round of 120 turns is written in batches of 50 events, most in the store's thread while the
# round goes on, the journal emptied past 16 KiB: a kill also meets a batch written mid-round, behind or
# at once, and a journal just emptied)
@pytest.mark.parametrize(("seed", "batch"), [(1, 0), (2, 0), (3, 50), (4, 50), (5, 50)])
def test_a_run_killed_at_random_moments_resumes_repeating_nothing_finished(tmp_path, reference, seed, batch):
    history_ref, per_turn_ref, calls_ref, totals_ref = reference
    rng = random.Random(seed)
    db, calls = tmp_path / "runs.db", tmp_path / "calls.txt"
    kills = 0
    for _ in range(2):  # killed, then killed again while it resumes
        # (the run's own time, from when its team starts; a kill after its end finds it finished)
        crashed = _run(db, "sim", calls, kill_after=rng.uniform(0.02, 1.2 * totals_ref["wall"]), batch=batch)
        if crashed.returncode == -signal.SIGKILL:
            kills += 1
        else:
            assert crashed.returncode == 0, crashed.stderr[-3000:]
    history, totals = _result(_run(db, "sim", calls, batch=batch))

    strip = [{k: m[k] for k in ("from", "content", "to")} for m in history]
    assert strip == [{k: m[k] for k in ("from", "content", "to")} for m in history_ref]
    store = SQLiteRunStore(db)
    try:
        logged = {e.data["message"]["id"] for e in store.events("sim", [MESSAGE])}
    finally:
        store.close()
    assert {m["id"] for m in history} <= logged  # each message the one logged, not a copy made again
    assert _calls_per_turn(db, "sim") == per_turn_ref  # one logged call per turn: none answered twice
    assert totals["calls"] == totals_ref["calls"]  # the run's totals span its restarts
    assert calls_ref <= _lines(calls) <= calls_ref + kills  # at most the call in flight, once per kill

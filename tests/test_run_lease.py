"""One writer per run: a second process opening a live run gets RunInUse naming the holder; a holder
killed with -9 on the same host is detected at once; one on another host when its heartbeat is old."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actions import Action
from environment import Team
from rolecast.errors import RunInUse
from rolecast.runs import LLM_CALL, MESSAGE, RUN_STARTED, MemoryRunStore, SQLiteRunStore
from rolecast.runs.lease import HOST, Holder, Lease
from rolecast.testing import FunctionLLM
from roles import Role

SCRIPT = Path(__file__).parent / "scripts" / "durable_team.py"
ROOT = Path(__file__).resolve().parent.parent


def _run_script(db: Path, run_id: str, n_round: int, calls: Path, delay: float = 0.0) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(db), run_id, str(n_round), str(calls), str(delay)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )


@pytest.mark.parametrize("make", [lambda tmp: SQLiteRunStore(tmp / "runs.db"), lambda tmp: MemoryRunStore()],
                         ids=["sqlite", "memory"])
def test_a_live_holder_keeps_the_run_and_a_gone_one_loses_it(tmp_path, make):
    store = make(tmp_path)
    mine = Holder()
    store.acquire("r", mine)
    store.acquire("r", mine)  # (the holder itself may take it again)
    with pytest.raises(RunInUse) as caught:
        store.acquire("r", Holder())  # another writer in this (live) process
    assert (caught.value.host, caught.value.pid) == (HOST, os.getpid())
    assert "in use by process" in str(caught.value) and str(os.getpid()) in str(caught.value)
    store.release("r", mine)
    store.acquire("r", Holder())  # released: free

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.acquire("d", Holder(pid=dead.pid, started=None))  # its process is gone: taken at once
    store.acquire("d", Holder())

    far = Holder(host="elsewhere", heartbeat=time.time())
    store.acquire("f", far)
    with pytest.raises(RunInUse):
        store.acquire("f", Holder())  # another host, heartbeat fresh
    far.heartbeat = time.time() - 120
    store.renew("f", far)
    store.acquire("f", Holder())  # its heartbeat timed out
    store.close()


def test_the_heartbeat_renews_the_lease_while_the_run_lives(tmp_path):
    store = SQLiteRunStore(tmp_path / "runs.db")
    lease = Lease(store, "beat", heartbeat=0.05).acquire()
    first = store._lease_row("beat").heartbeat
    time.sleep(0.3)
    assert store._lease_row("beat").heartbeat > first
    assert store.holder("beat").token == lease.holder.token
    lease.release()
    assert store.holder("beat") is None
    store.close()


class Say(Action):
    async def run(self, history):
        return await self._aask("say something")


async def test_a_team_holds_its_run_while_it_runs_and_gives_it_back_after(tmp_path):
    db = tmp_path / "runs.db"
    team = Team(llm=FunctionLLM(lambda m: "ok"), store=db, run_id="held", roles=[Role(name="A", actions=[Say])])
    log = team.run_log
    with pytest.raises(RunInUse):
        Team(llm=FunctionLLM(lambda m: "ok"), store=db, run_id="held").run_log  # noqa: B018
    await team.run(1, idea="x")
    assert SQLiteRunStore(db).holder("held") is None  # given back: a later script resumes it
    again = Team(llm=FunctionLLM(lambda m: "ok"), store=db, run_id="held", roles=[Role(name="A", actions=[Say])])
    await again.run(1, idea="x")
    assert log.lease is not None and not log.lease.held


def test_two_processes_on_one_run_id_one_runs_and_kill_9_then_an_immediate_resume_works(tmp_path):
    db, calls = tmp_path / "runs.db", tmp_path / "calls.txt"
    holder = _run_script(db, "one", 12, calls, delay=0.4)
    store = SQLiteRunStore(db)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(store.events("one", [LLM_CALL]))) < 2:
        time.sleep(0.05)
    assert holder.poll() is None, "the first process was meant to be running"

    second = _run_script(db, "one", 12, calls)
    out, err = second.communicate(timeout=60)
    assert second.returncode != 0 and out == ""
    assert "RunInUse" in err and f"process {holder.pid} on host" in err
    assert len(list(store.events("one", [RUN_STARTED]))) == 1  # the second never wrote to the run

    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    began = time.monotonic()
    resumed = _run_script(db, "one", 12, calls)
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    assert time.monotonic() - began < 30  # the dead holder was seen at once, not after the lease's 60 s
    history = [json.loads(line) for line in out.splitlines()][:-1]

    ref = _run_script(tmp_path / "ref.db", "ref", 12, tmp_path / "ref_calls.txt")
    ref_out, ref_err = ref.communicate(timeout=60)
    assert ref.returncode == 0, ref_err
    expected = [json.loads(line) for line in ref_out.splitlines()][:-1]
    assert [(m["from"], m["content"]) for m in history] == [(m["from"], m["content"]) for m in expected]
    ids = [e.data["message"]["id"] for e in store.events("one", [MESSAGE])]
    assert len(ids) == len(set(ids)) == len(expected)  # nothing interleaved or duplicated
    store.close()


def test_a_log_dropped_without_a_run_gives_its_lease_back(tmp_path):
    import gc

    db = tmp_path / "runs.db"
    Team(llm=FunctionLLM(lambda m: "ok"), store=db, run_id="dropped").run_log  # noqa: B018
    gc.collect()
    assert SQLiteRunStore(db).holder("dropped") is None  # given back when the log was collected
    again = Team(llm=FunctionLLM(lambda m: "ok"), store=db, run_id="dropped")
    assert again.run_log.lease is not None and again.run_log.lease.held

"""Approvals that wait: a deferred approval pauses the run, the process exits, a person answers from
another process (rolecast runs approve / reject / edit), and the rerun goes on with 0 repeated calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rolecast.errors import UsageError
from rolecast.runs import open_store
from rolecast.runs.approvals import decide, pending_approvals, schema_problems

SCRIPT = Path(__file__).parent / "scripts" / "approval_team.py"
ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def script(db: Path, run_id: str, calls: Path) -> tuple[int, list[dict], dict]:
    done = subprocess.run([sys.executable, str(SCRIPT), str(db), run_id, str(calls)], capture_output=True,
                          text=True, env=ENV, cwd=ROOT, timeout=120)
    assert done.returncode in (0, 3), done.stderr
    *history, status = [json.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, history, status


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rolecast.cli", "runs", *args], capture_output=True, text=True,
                          env=ENV, cwd=ROOT, timeout=120)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def paused(tmp_path: Path, run_id: str) -> tuple[Path, Path]:
    db, calls = tmp_path / "runs.db", tmp_path / f"{run_id}.calls"
    code, history, status = script(db, run_id, calls)
    assert code == 3 and status == {"status": "waiting", "pending": ["Calc-1"]}
    assert lines(calls) == 1  # the model asked for the tool; the tool waits for a person
    assert all("42" not in m["content"] for m in history)
    return db, calls


@pytest.mark.parametrize(("answer", "expected"), [
    (["approve", "{run}"], "the calculator says 42"),
    (["reject", "{run}", "Calc-1", "--why", "no maths today"], "The user rejected this call: no maths today"),
    (["edit", "{run}", "Calc-1", "--args", '{"expression": "6 * 8"}'], "the calculator says 48"),
], ids=["approve", "reject", "edit"])
def test_a_deferred_approval_pauses_the_run_and_an_answer_from_another_process_resumes_it(
    tmp_path, answer, expected,
):
    run_id = f"ask-{answer[0]}"
    db, calls = paused(tmp_path, run_id)
    store = open_store(db)
    assert [a["name"] for a in pending_approvals(store, run_id)] == ["calculator"]
    listed = cli("approvals", run_id, "--store", str(db))
    assert "Calc-1" in listed.stdout and "pending" in listed.stdout

    answered = cli(*[a.replace("{run}", run_id) for a in answer], "--store", str(db))
    assert answered.returncode == 0, answered.stderr
    assert pending_approvals(store, run_id) == []

    code, history, status = script(db, run_id, calls)
    assert code == 0 and status["status"] == "finished", history
    assert lines(calls) == 2  # the first model call answered from the log; only the one after the tool is new
    assert history[-1]["from"] == "Calc" and expected in history[-1]["content"]
    again = cli("approve", run_id, "--store", str(db))
    assert again.returncode == 2 and "0 pending approval(s)" in again.stderr
    store.close()


def test_an_edit_is_checked_against_the_tools_schema_before_it_is_written(tmp_path):
    db, _ = paused(tmp_path, "bad-edit")
    refused = cli("edit", "bad-edit", "Calc-1", "--args", '{"colour": "red"}', "--store", str(db))
    assert refused.returncode == 2
    assert "'expression' is required" in refused.stderr and "unknown argument(s) ['colour']" in refused.stderr
    not_json = cli("edit", "bad-edit", "Calc-1", "--args", "6*8", "--store", str(db))
    assert not_json.returncode == 2 and "not JSON" in not_json.stderr
    store = open_store(db)
    assert len(pending_approvals(store, "bad-edit")) == 1  # nothing was written
    with pytest.raises(UsageError, match="no approval 'Calc-9'"):
        decide(store, "bad-edit", "Calc-9", "approve")
    with pytest.raises(UsageError, match="expected string"):
        decide(store, "bad-edit", "Calc-1", "edit", arguments={"expression": 42})
    store.close()


def test_the_schema_check_knows_types_required_enums_items_and_refuses_deep_nesting():
    schema = {"type": "object", "properties": {
        "n": {"type": "integer"}, "mode": {"enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}}, "x": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    }, "required": ["n"]}
    assert schema_problems({"n": 1, "mode": "a", "tags": ["t"], "x": None}, schema) == []
    assert schema_problems({"n": True}, schema) == ["arguments.n: expected integer, got bool"]
    assert schema_problems({"n": 1, "mode": "c", "tags": [1]}, schema) == [
        "arguments.mode: 'c' is not one of ['a', 'b']", "arguments.tags[0]: expected string, got int"]
    deep: dict = {"type": "object", "properties": {}}
    inner = deep
    value: dict = {}
    cursor = value
    for _ in range(40):
        inner["properties"]["k"] = {"type": "object", "properties": {}}
        inner = inner["properties"]["k"]
        cursor["k"] = {}
        cursor = cursor["k"]
    assert any("nested deeper" in p for p in schema_problems(value, deep))


async def _waiting_run(db: Path, run_id: str, calls: list[str]):
    from actions import calculator
    from environment import Team
    from rolecast.control.approval import Approval
    from rolecast.llm.base import Completion, ToolCall
    from rolecast.testing import FunctionLLM
    from roles import ToolAgent

    def answer(messages):
        calls.append(str(messages[-1].get("content")))
        if messages[-1].get("role") == "tool":
            return Completion(text=f"the calculator says {messages[-1]['content']}")
        return Completion(text="", tool_calls=[ToolCall("c1", "calculator", '{"expression": "6 * 7"}')])

    team = Team(llm=FunctionLLM(answer, model="gpt-4o-mini"), roles=[ToolAgent(
        name="Calc", tools=[calculator], style="function_calling")], store=db, run_id=run_id)
    Approval.deferred().install(team.context.hooks)
    return await team.run(3, idea="what is 6 times 7?")


async def test_the_same_from_python_and_a_script_exits_with_the_waiting_status(tmp_path, capsys):
    from rolecast.observe.console import run_script
    from rolecast.runs.approvals import EXIT_WAITING

    db, calls = tmp_path / "runs.db", []
    first = await _waiting_run(db, "py", calls)
    assert (first.status, first.pending, first.exit_code) == ("waiting", ("Calc-1",), EXIT_WAITING)
    store = open_store(db)
    assert "waiting: approval Calc-1" in [r.stop_reason for r in store.runs()]
    decide(store, "py", None, "approve")  # (the only pending one)
    done = await _waiting_run(db, "py", calls)
    assert done.status == "finished" and done.exit_code == 0 and "says 42" in done[-1].content
    assert len(calls) == 2
    store.close()

    import asyncio

    def script_main():
        async def waiting():
            return await _waiting_run(tmp_path / "other.db", "py2", [])
        return run_script(waiting())

    with pytest.raises(SystemExit) as exited:
        await asyncio.to_thread(script_main)
    assert exited.value.code == EXIT_WAITING == 3
    assert "waits for approval Calc-1" in capsys.readouterr().err

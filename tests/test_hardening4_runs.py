"""Issue 32 (the run store's side) and the steering papercuts of issue 31: each test is named after the
hostile input a probe used, and failed on the code before the fix."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import rolecast.runs.approvals as approvals_module
import rolecast.runs.requests as requests_module
from actions import Action, UserRequirement
from environment import Team
from rolecast.control.approval import Approval
from rolecast.errors import ApprovalAnswered, DamagedRun, UnsafeCommand, UsageError
from rolecast.observe.console import RunConsole
from rolecast.runs import RunEvent, RunLog, open_store
from rolecast.runs.approvals import approvals, decide
from rolecast.runs.base import RunStore
from rolecast.runs.events import (
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    LLM_CALL,
    MESSAGE,
    RUN_STARTED,
    RUN_STOPPED,
)
from rolecast.runs.ids import MAX_SEQ, parse_seq
from rolecast.runs.inspection import show_run
from rolecast.runs.requests import encode_request, request_of
from rolecast.runs.rerun import check_recorded, rerun
from rolecast.testing import FunctionLLM
from roles import Role

ROOT = Path(__file__).resolve().parent.parent


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


# ------------------------------------------------------------------ 2. a rerun runs what the store holds
def planted(tmp_path: Path, command: dict[str, Any]) -> Path:
    """A store whose run 'p' recorded ``command`` (as anyone who may write to the store can plant)."""
    db = tmp_path / "runs.db"
    store = open_store(db)
    store.append(RunEvent("p", RUN_STARTED, {"team": "Team", "command": command}))
    store.close()
    return db


def rerun_cli(db: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rolecast.cli", "runs", "rerun", "p", "--store", str(db), *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("command", [
    {"argv": ["/bin/sh", "-c", "touch {pwned}"]},
    {"argv": ["-cimport pathlib; pathlib.Path('{pwned}').touch()  # .py"]},
    {"argv": ["{script}"], "module": "this"},
    {"argv": ["{script}"], "module": "os.path"},
    {"argv": ["{script}", "--x"], "module": "elsewhere.team"},
    {"argv": ["{script}"], "cwd": "relative/dir"},
], ids=["bin-sh", "python-dash-c", "module-this", "stdlib-module", "module-not-the-script", "relative-cwd"])
def test_a_planted_command_in_run_started_is_refused_even_with_yes(tmp_path, command):
    pwned = tmp_path / "pwned"
    script = tmp_path / "team.py"
    script.write_text(f"import pathlib; pathlib.Path({str(pwned)!r}).touch()\n")
    command = {key: [a.format(pwned=pwned, script=script) for a in v] if isinstance(v, list) else v
               for key, v in command.items()}
    command.setdefault("cwd", str(tmp_path))
    db = planted(tmp_path, command)
    done = rerun_cli(db, "--yes", cwd=tmp_path)
    assert done.returncode == 2 and "UnsafeCommand" in done.stderr, done.stderr
    assert not pwned.exists()
    with pytest.raises(UnsafeCommand):
        check_recorded(command)


def test_a_recorded_script_is_shown_and_not_run_without_confirmation(tmp_path):
    ran = tmp_path / "ran"
    script = tmp_path / "team.py"
    script.write_text(f"import pathlib; pathlib.Path({str(ran)!r}).touch()\n")
    db = planted(tmp_path, {"argv": ["team.py", "--fast"], "cwd": str(tmp_path)})
    done = rerun_cli(db, cwd=ROOT)  # no terminal, no --yes: shown, refused
    assert done.returncode == 2 and not ran.exists()
    assert shlex.join([sys.executable, "team.py", "--fast"]) in done.stderr and "--yes" in done.stderr
    done = rerun_cli(db, "--yes", cwd=ROOT)
    assert ran.exists()  # confirmed: it ran (and made no run: the command's status, a line saying so)
    assert "made no run" in done.stderr

    store = open_store(db)
    asked_for: list[str] = []
    with pytest.raises(UsageError, match="runs only when confirmed"):
        rerun(store, str(db), "p", confirm=lambda text: asked_for.append(text) or False)
    assert asked_for == [f"{shlex.join([sys.executable, 'team.py', '--fast'])}  (in {tmp_path})"]
    store.close()


def test_a_module_run_of_the_recorded_directory_is_accepted(tmp_path):
    package = tmp_path / "tools" / "team"
    package.mkdir(parents=True)
    (package / "__main__.py").write_text("")
    argv, cwd = check_recorded({"argv": [str(package / "__main__.py"), "x"], "cwd": str(tmp_path),
                                "module": "tools.team"})
    assert (argv, cwd) == ([sys.executable, "-m", "tools.team", "x"], str(tmp_path))


# ------------------------------------------------------------------ 9. one malformed row
def two_runs(db: Path) -> None:
    store = open_store(db)
    for run_id in ("good", "bad"):
        store.append(RunEvent(run_id, RUN_STARTED, {"team": "T", "idea": f"{run_id} idea"}))
        store.append(RunEvent(run_id, MESSAGE, {"message": {"content": "hi", "sent_from": "A"}}, 1, "A"))
        store.append(RunEvent(run_id, RUN_STOPPED, {"reason": "n_round"}))
    store.close()


def runs_cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rolecast.cli", "runs", *args, "--store", str(db)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize(("row", "problem"), [
    ("this is text, not JSON {", "is not JSON"),
    ("[1, 2, 3]", "not an object"),
    ('{"message": "a string where an object goes"}', "has a str as 'message'"),
    ('{"message": ["a", "list"]}', "has a list as 'message'"),
    ("[" * 30_000 + "]" * 30_000, "nests too deep"),
], ids=["not-json", "json-array", "message-a-string", "message-a-list", "30000-levels"])
def test_a_malformed_payload_row_is_a_damaged_run_and_the_others_still_read(tmp_path, row, problem):
    db = tmp_path / "runs.db"
    two_runs(db)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE events SET data = ? WHERE run_id = 'bad' AND kind = 'message'", (row,))
    listed = runs_cli(db, "list")
    assert listed.returncode == 0, listed.stderr
    good, bad = (next(line for line in listed.stdout.splitlines() if line.startswith(r)) for r in ("good", "bad"))
    assert "n_round" in good and "good idea" in good
    assert "bad idea" in bad  # (the list reads each run's start and stop only: this one reads)
    shown = runs_cli(db, "show", "bad")
    assert shown.returncode == 2 and "DamagedRun" in shown.stderr and problem in shown.stderr
    assert "Traceback" not in shown.stderr
    assert runs_cli(db, "show", "good").returncode == 0

    store = open_store(db, read_only=True)
    with pytest.raises(DamagedRun, match=f"run 'bad' is damaged: its event 2 \\(message\\) .*{re.escape(problem)}"):
        RunLog(store, "bad")
    assert RunLog(store, "good").recorded_events == 3
    store.close()


def test_a_run_started_row_that_is_not_json_lists_the_run_as_damaged(tmp_path):
    db = tmp_path / "runs.db"
    two_runs(db)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE events SET data = 'not json' WHERE run_id = 'bad' AND kind = 'run_started'")
    listed = runs_cli(db, "list")
    assert listed.returncode == 0, listed.stderr
    bad = next(line for line in listed.stdout.splitlines() if line.startswith("bad"))
    assert "damaged" in bad and "its event 1 (run_started) is not JSON" in bad
    assert "good idea" in listed.stdout


def test_a_journal_line_whose_payload_is_not_json_is_left_out_of_recovery(tmp_path):
    from rolecast.runs.sqlite import SQLiteRunStore

    db = tmp_path / "runs.db"
    store = SQLiteRunStore(db)
    store.stage([RunEvent("j", MESSAGE, {"message": {"content": "kept 1"}}, 1, "A"),
                 RunEvent("j", MESSAGE, None, 1, "A", text="{not json"),
                 RunEvent("j", LLM_CALL, None, 1, "A", text='{"cost": "free"}'),
                 RunEvent("j", MESSAGE, {"message": {"content": "kept 2"}}, 1, "A")])
    assert store._journal is not None
    store._journal.close(remove=False)  # the process dies: its journal stays, unlocked
    store._journal = None
    store._db.close()
    again = SQLiteRunStore(db)
    try:
        events = list(again.events("j"))
        assert [e.data["message"]["content"] for e in events] == ["kept 1", "kept 2"]
    finally:
        again.close()


# ------------------------------------------------------------------ 11. a long chat's store
def debate_prompts(rounds: int) -> list[str]:
    """The prompts of a debate whose every prompt holds the whole history (1 KB answers of 10 lines)."""
    history: list[str] = []
    prompts = []
    for n in range(rounds):
        prompts.append("You are in a debate. So far:\n\n" + "\n\n".join(history) + "\n\nYour turn.")
        history.append("\n".join(f"round {n} line {i}: " + "an argument that goes on " * 4 for i in range(10)))
    return prompts


def stored_bytes(rounds: int) -> int:
    """What a run's calls add to the store: the new texts and the calls' references to them."""
    sent: set[str] = set()
    total = 0
    for prompt in debate_prompts(rounds):
        fields, new = encode_request([{"role": "system", "content": "be brief"}, {"role": "user", "content": prompt}],
                                     {}, None, sent)
        total += sum(len(t) for t in new.values()) + len(json.dumps(fields["messages"]))
    return total


def test_a_400_round_debate_with_the_whole_history_in_each_prompt_grows_the_store_linearly(monkeypatch):
    at_100, at_200 = stored_bytes(100), stored_bytes(200)
    # twice the rounds: about twice the bytes (plus the calls' lists of chunk keys, ~1 % of the history
    # each), where whole texts take four times
    assert at_200 < 3 * at_100
    history = len(debate_prompts(200)[-1])
    assert at_200 < 6 * history  # the history a few times over, not 100 times
    monkeypatch.setattr(requests_module, "CHUNKED_FROM", None)  # every prompt a text of its own (format 3)
    whole_100, whole_200 = stored_bytes(100), stored_bytes(200)
    assert whole_200 > 3.5 * whole_100 and whole_200 > 10 * at_200


def check_chunked(store: RunStore) -> None:
    """Two runs whose calls' prompts are kept in chunks: each reads back whole; deleting both deletes them."""
    prompts = debate_prompts(30)
    sent: set[str] = set()
    for run_id, prompt in (("a", prompts[-2]), ("b", prompts[-1])):
        fields, new = encode_request([{"role": "user", "content": prompt}], {}, None, sent)
        assert isinstance(fields["messages"][0][1], list)  # kept in chunks
        event = RunEvent(run_id, LLM_CALL, {"fingerprint": "f", **fields}, 1, "A")
        event.texts = new
        store.append(event)
        assert request_of(store, next(store.events(run_id, [LLM_CALL]))).messages[0]["content"] == prompt
    store.delete("b")
    assert request_of(store, next(store.events("a", [LLM_CALL]))).messages[0]["content"] == prompts[-2]
    store.delete("a")
    assert store.texts(sent) == {}


def test_a_chunked_prompt_reads_back_whole_and_its_chunks_go_with_the_last_run_using_them(tmp_path):
    for where in (tmp_path / "runs.db", ":memory:"):
        store = open_store(where)
        check_chunked(store)
        store.close()


# ------------------------------------------------------------------ 7. terminal escapes
def test_escape_sequences_in_role_and_tool_names_of_runs_approvals_are_shown_escaped(tmp_path):
    db = tmp_path / "runs.db"
    store = open_store(db)
    store.append(RunEvent("esc", RUN_STARTED, {"team": "T"}))
    hostile = "\x1b[2J\x1b[H\x1b]0;owned\x07"
    store.append(RunEvent("esc", APPROVAL_REQUESTED, {
        "id": "A-1\x1b[8m", "role": f"Alice{hostile}", "kind": "tool\u202e", "name": f"rm{hostile}",
        "arguments": {"path": "\x9b31m/\u202e"}}, 1, "Alice"))
    store.append(RunEvent("esc", RUN_STOPPED, {"reason": "error: \x1b[31mBoom"}))
    store.close()
    for args in (("approvals", "esc"), ("list",)):
        done = runs_cli(db, *args)
        assert done.returncode == 0, done.stderr
        assert not any(c in done.stdout for c in "\x1b\x07\x9b\u202e"), done.stdout
    assert "rm\\x1b[2J" in runs_cli(db, "approvals", "esc").stdout
    assert "error: \\x1b[31mBoom" in runs_cli(db, "list").stdout


# ------------------------------------------------------------------ 10. papercuts
@pytest.mark.parametrize(("arguments", "status"), [
    ("[" * 30_000 + "]" * 30_000, 2),
    ('{"a": ' + "[" * 30_000 + "]" * 30_000 + "}", 2),
    ('{"a": "' + "[" * 30_000 + '"}', 0),  # (brackets inside a string are text: this one is fine)
], ids=["array-30000-levels", "object-30000-levels", "brackets-in-a-string"])
def test_runs_edit_with_json_nested_30000_levels_is_a_usage_error_not_a_recursion_error(tmp_path, arguments, status):
    db = tmp_path / "runs.db"
    store = open_store(db)
    asked(store, "deep")
    store.close()
    done = runs_cli(db, "edit", "deep", "Alice-1", "--args", arguments)
    assert "RecursionError" not in done.stderr and "Traceback" not in done.stderr
    assert done.returncode == status, done.stderr
    if status:
        assert "levels deep: at most 32" in done.stderr


def test_an_edit_nested_100000_levels_from_python_is_a_usage_error():
    store = open_store(":memory:")
    asked(store, "deep")
    nested: Any = {}
    for _ in range(100_000):
        nested = {"a": nested}
    with pytest.raises(UsageError, match="nest deeper than 32"):
        decide(store, "deep", "Alice-1", "edit", arguments={"x": nested})


@pytest.mark.parametrize("value", ["99999999999999999999999", 2**70, "-1", -1, "1e3", "", "٣", True])
def test_an_after_of_99999999999999999999999_is_a_usage_error_not_an_overflow(value):
    with pytest.raises(UsageError, match="after is an event's number"):
        parse_seq(value)
    assert parse_seq("42") == 42 and parse_seq(MAX_SEQ) == MAX_SEQ and parse_seq(" 7 ") == 7


# ------------------------------------------------------------------ issue 31: steering with no script edit
def test_fork_at_1_then_continue_runs_the_recorded_command_as_the_fork_and_it_shows_finished(tmp_path):
    from test_rerun_cli import record, run_script, write_script

    db, work = tmp_path / "runs.db", tmp_path / "work"
    work.mkdir()
    run_script(write_script(work), db)
    (parent,) = [info.run_id for info in open_store(db, read_only=True).runs()]
    fork = runs_cli(db, "fork", parent, "--at", "1", "--run-id", "f1")
    assert fork.returncode == 0 and "rolecast runs continue f1" in fork.stderr

    refused = runs_cli(db, "continue", "f1")  # no terminal, no --yes: shown, not run
    assert refused.returncode == 2 and "team_script.py" in refused.stderr and "--yes" in refused.stderr
    assert not (work / "f1.json").exists()
    done = runs_cli(db, "continue", "f1", "--yes")
    assert done.returncode == 0, done.stderr
    assert "run f1 (went on): stopped: n_round;" in done.stdout
    went_on = record(work, "f1")
    assert went_on["calls"] == ["test", "review"] and went_on["run_id_left"] is None  # round 1 from the log
    assert went_on["history"] == record(work, parent)["history"]

    store = open_store(db, read_only=True)
    infos = {info.run_id: info for info in store.runs()}
    assert infos["f1"].stop_reason == "n_round" and infos["f1"].started > infos[parent].started
    assert store.runs()[0].run_id == "f1"  # newest first: the fork began after its parent
    store.close()
    from rolecast.studio.source import RunSource

    source = RunSource(db)
    try:
        row = source.run("f1")
        assert (row.status, row.stop_reason) == ("finished", "n_round")  # not "interrupted"
    finally:
        source.close()


class Write(Action):
    async def run(self, history):
        return await self._aask(f"write: {history[-1].content}")


def approval_team(db: Path) -> Team:
    team = Team(llm=FunctionLLM(lambda messages: "done", model="gpt-4o-mini"), store=db, run_id="act",
                roles=[Role(name="Alice", profile="Coder", actions=[Write()], watch=[UserRequirement])])
    Approval.deferred(kinds={"action"}).install(team.context.hooks)
    return team


def test_a_deferred_approval_of_an_action_prints_waiting_and_a_reject_cancels_only_that_turn(tmp_path):
    db = tmp_path / "runs.db"
    out = io.StringIO()
    first = approval_team(db).run_sync(2, idea="add two numbers", console=RunConsole(out))
    assert first.status == "waiting"
    assert "failed: ApprovalPending" not in out.getvalue() and "Alice (Coder) waits" in out.getvalue()
    store = open_store(db)
    assert "Alice waits" in show_run(store, "act") and "failed: ApprovalPending" not in show_run(store, "act")
    decide(store, "act", None, "reject", reason="not now")
    store.close()
    second = approval_team(db).run_sync(2, idea="add two numbers")  # no InvocationCancelled: the turn is cancelled
    assert second.status == "finished"
    assert [m.sent_from for m in second if m.sent_from == "Alice"] == []


def test_a_call_whose_references_are_numbers_and_whose_schema_nests_30000_levels_still_reads():
    store = open_store(":memory:")
    deep = "[" * 30_000 + "]" * 30_000
    event = RunEvent("refs", LLM_CALL, {"fingerprint": "f", "messages": [5, ["user"], ["user", "k"]],
                                         "constraints": {"schema": "deep", "tools": ["x"]}}, 1, "A")
    event.texts = {"k": "hello", "deep": deep}
    store.append(event)
    request = request_of(store, next(store.events("refs", [LLM_CALL])))
    assert [m["content"] for m in request.messages] == [None, None, "hello"]
    assert request.settings["schema"] == deep and request.settings["tools"] is None


def test_a_message_row_that_is_text_not_json_leaves_the_studios_list_of_the_other_runs_intact(tmp_path):
    from rolecast.studio.source import RunSource

    db = tmp_path / "runs.db"
    two_runs(db)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE events SET data = 'not json {' WHERE run_id = 'bad' AND kind = 'message'")
    source = RunSource(db)
    try:
        rows = {row.run_id: row for row in source.runs()}
        # the studio lists the damaged run with what it can read, and counts the unreadable event
        assert rows["good"].status == "finished" and rows["good"].damaged == 0
        assert rows["bad"].damaged == 1
        assert len(source.events("good")) == 3
        damaged = [e for e in source.events("bad") if e.kind == "damaged"]
        assert len(damaged) == 1 and damaged[0].data["kind"] == "message"
        assert "not JSON" in damaged[0].data["error"]
    finally:
        source.close()

"""Durable runs: the write-ahead run log, resume after a crash, replay, serialize/deserialize."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from rolecast.errors import ActionFailed, ReplayMismatch, ReplayMissing, UsageError
from rolecast.runs.store import LLM_CALL, MESSAGE, MemoryRunStore, SQLiteRunStore
from rolecast.testing import FunctionLLM, ReplayLLM
from roles import Role

SCRIPT = Path(__file__).parent / "scripts" / "durable_team.py"
ROOT = Path(__file__).resolve().parent.parent


class Write(Action):
    async def run(self, history):
        return await self._aask(f"write about: {history[-1].content}")


class Check(Action):
    async def run(self, history):
        return await self._aask(f"check: {history[-1].content}")


def counting_llm(calls: list[str], model: str = "gpt-4o-mini") -> FunctionLLM:
    def answer(messages):
        calls.append(messages[-1]["content"])
        return f"re[{messages[-1]['content'][-40:]}]"

    return FunctionLLM(answer, model=model)


def pair(llm, store, run_id=None) -> Team:
    writer = Role(name="Writer", actions=[Write()], watch=[UserRequirement, Check])
    checker = Role(name="Checker", actions=[Check()], watch=[Write])
    return Team(llm=llm, roles=[writer, checker], store=store, run_id=run_id)


def said(history) -> list[tuple[str, str]]:
    return [(m.sent_from, m.content) for m in history]


# ------------------------------------------------------------------ the log
async def test_every_message_model_call_turn_and_round_is_logged_in_order():
    store = MemoryRunStore()
    team = pair(counting_llm([]), store)
    await team.run(n_round=2, idea="sorting")
    events = list(store.events(team.run_id))
    assert [e.kind for e in events] == [
        "run_started", "message",
        "round_started", "llm_call", "message", "round_finished",
        "round_started", "llm_call", "message", "round_finished",
        "run_stopped",
    ]
    # each round's start names the turns it starts (every role with news), its end each turn that
    # finished and the message that turn returned
    rounds = [e for e in events if e.kind == "round_started"]
    assert [e.data["roles"] for e in rounds] == [["Writer"], ["Checker"]]
    sent = {(e.round, e.role): e.data["message"]["id"] for e in events if e.kind == "message" and e.round}
    assert [e.data["turns"] for e in events if e.kind == "round_finished"] == [
        {"Writer": sent[1, "Writer"]}, {"Checker": sent[2, "Checker"]},
    ]
    assert [m.data["message"]["sent_from"] for m in store.events(team.run_id, [MESSAGE])] == [
        "user", "Writer", "Checker",
    ]
    call = next(e for e in store.events(team.run_id, [LLM_CALL]))
    assert call.role == "Writer" and call.data["action"] == "Write" and call.data["model"] == "gpt-4o-mini"
    assert call.data["response"]["text"].startswith("re[") and call.data["cost"] > 0
    assert call.data["request"]["last"] == "write about: sorting"
    stop = list(store.events(team.run_id))[-1]
    assert stop.data["reason"] == "n_round" and stop.data["calls"] == 2


async def test_each_message_is_logged_with_its_full_json_in_a_file_and_in_memory(tmp_path):
    from pydantic import BaseModel

    class Verdict(BaseModel):
        ok: bool
        notes: list[str]

    class Judge(Action):
        async def run(self, history):
            text = await self._aask(f"judge: {history[-1].content}")
            return Message(content=text, instruct_content=Verdict(ok=True, notes=["é", text]),
                           metadata={"score": 0.5}, cause_by=self, send_to={"Checker", "<all>"})

    for store in (SQLiteRunStore(tmp_path / "runs.db"), MemoryRunStore()):
        team = Team(llm=counting_llm([]), roles=[Role(name="Judge", actions=[Judge()])], store=store)
        history = await team.run(n_round=1, idea="a claim")
        logged = [e.data["message"] for e in store.events(team.run_id, [MESSAGE])]
        assert logged == [m.model_dump(mode="json") for m in history]
        assert Message.model_validate(logged[-1]).instruct_content == history[-1].instruct_content


async def test_store_none_logs_nothing_and_the_default_store_is_a_sqlite_file(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLECAST_STORE", str(tmp_path / "default.db"))
    team = pair(counting_llm([]), store=None)
    await team.run(n_round=1, idea="x")
    assert team.run_log.store is None
    team = Team(llm=counting_llm([]), roles=[Role(name="A", actions=[Write()])])
    await team.run(n_round=1, idea="x")
    assert isinstance(team.run_log.store, SQLiteRunStore)
    assert [r.run_id for r in SQLiteRunStore(tmp_path / "default.db").runs()] == [team.run_id]


# ------------------------------------------------------------------ resume
async def test_resume_answers_recorded_calls_from_the_log_and_goes_on_live(tmp_path):
    db = tmp_path / "runs.db"
    first: list[str] = []
    await pair(counting_llm(first), db, "r1").run(n_round=3, idea="sorting")
    again: list[str] = []
    resumed = pair(counting_llm(again), db, "r1")
    history = await resumed.run(n_round=5, idea="sorting")
    assert len(first) == 3 and len(again) == 2  # only rounds 4 and 5 reached the model
    reference: list[str] = []
    straight = pair(counting_llm(reference), None)
    expected = await straight.run(n_round=5, idea="sorting")
    assert said(history) == said(expected)
    # the budget spans the whole run: the recorded calls count, once
    assert resumed.cost_manager.total.calls == 5
    assert resumed.cost_manager.total_cost == pytest.approx(straight.cost_manager.total_cost)


async def test_a_changed_script_stops_resume_with_a_typed_error_naming_the_difference(tmp_path):
    db = tmp_path / "runs.db"
    await pair(counting_llm([]), db, "r1").run(n_round=2, idea="sorting")

    class Write(Action):  # the same name, another prompt
        async def run(self, history):
            return await self._aask(f"WRITE NOW: {history[-1].content}")

    writer = Role(name="Writer", actions=[Write()], watch=[UserRequirement, Check])
    team = Team(llm=counting_llm([]), roles=[writer, Role(name="Checker", actions=[Check()], watch=[Write])],
                store=db, run_id="r1")
    with pytest.raises(ReplayMismatch) as info:
        await team.run(n_round=2, idea="sorting")
    error = info.value
    assert error.role == "Writer" and error.action == "Write"
    assert error.recorded["last"] == "write about: sorting" and error.asked["last"] == "WRITE NOW: sorting"


def test_a_request_has_the_fingerprint_earlier_versions_logged_and_a_settings_change_changes_it():
    # a run logged by an earlier version resumes: its calls' fingerprints hash the request's
    # json.dumps(sort_keys=True) text, whatever shape the messages and parameters have
    from pydantic import BaseModel

    from rolecast.core.settings import LLMSettings
    from rolecast.llm.recording import describe_request

    class Shape(BaseModel):
        a: int = 1
        b: str | None = None

    def logged_before(kind, messages, **params):
        request = {"kind": kind, "messages": messages}
        request.update({k: v.model_dump(exclude_none=True) if isinstance(v, BaseModel) else v
                        for k, v in params.items() if v is not None})
        text = json.dumps(request, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    chat = [{"role": "system", "content": 'You are "R0"\n\u2028 é 🙂'}, {"role": "user", "content": "start"}]
    other = [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
             {"role": "assistant", "content": None, "tool_calls": [{"id": 1}]}, {"content": "x", "name": "n"}]
    settings = LLMSettings(temperature=0.5, seed=3)
    requests = [
        ("complete", chat, {}),
        ("complete", chat, {"stop": ["a"], "settings": settings, "schema": None, "tools": None}),
        ("complete", chat + other, {"settings": LLMSettings(extra={"x": {"z": 1, "a": [1.5, None]}}),
                                    "tools": [{"b": 1, "a": 2}], "grammar": "root ::= x"}),
        ("embed", [], {"purpose": "query", "settings": LLMSettings()}),
        ("complete", other, {"structured": Shape()}),
    ]
    for kind, messages, params in requests:
        for _ in range(2):  # (the second time from what the first remembered)
            assert describe_request(kind, messages, **params)[0] == logged_before(kind, messages, **params)
    before = describe_request("complete", chat, settings=settings)[0]
    for change in ({"temperature": 0.7}, {"temperature": 1}, {"seed": None}):
        for name, value in change.items():
            setattr(settings, name, value)
        assert describe_request("complete", chat, settings=settings)[0] == logged_before(
            "complete", chat, settings=settings) != before
    settings.extra["top_k"] = 5  # changed in place
    assert describe_request("complete", chat, settings=settings)[0] == logged_before(
        "complete", chat, settings=settings)


def _run_script(db: Path, run_id: str, n_round: int, calls: Path, delay: float = 0.0) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(db), run_id, str(n_round), str(calls), str(delay)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


def test_kill_9_midway_then_resume_repeats_no_answered_call_and_ends_like_an_uninterrupted_run(tmp_path):
    db, calls = tmp_path / "runs.db", tmp_path / "calls.txt"
    proc = _run_script(db, "crash", 12, calls, delay=0.5)
    deadline = time.monotonic() + 30
    store = SQLiteRunStore(db)  # (in WAL mode the file may appear only when the writer closes it)
    while time.monotonic() < deadline and len(list(store.events("crash", [LLM_CALL]))) < 3:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    answered_before = len(list(store.events("crash", [LLM_CALL])))
    logged_ids = [e.data["message"]["id"] for e in store.events("crash", [MESSAGE])]
    assert 3 <= answered_before < 12, "the crash was meant to come midway"

    resumed = _run_script(db, "crash", 12, calls)
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    *history, totals = [json.loads(line) for line in out.splitlines()]

    ref_calls = tmp_path / "ref_calls.txt"
    straight = _run_script(tmp_path / "ref.db", "ref", 12, ref_calls)
    ref_out, ref_err = straight.communicate(timeout=60)
    assert straight.returncode == 0, ref_err
    *expected, ref_totals = [json.loads(line) for line in ref_out.splitlines()]

    assert [(m["from"], m["content"]) for m in history] == [(m["from"], m["content"]) for m in expected]
    assert [m["id"] for m in history][: len(logged_ids)] == logged_ids  # the same messages, not copies
    assert _lines(calls) <= _lines(ref_calls) + 1  # at most the call in flight is made again
    assert totals["calls"] == ref_totals["calls"] and totals["cost"] == pytest.approx(ref_totals["cost"])


# ------------------------------------------------------------------ replay
async def test_a_recorded_run_replays_with_no_model_and_an_unrecorded_call_is_an_error(tmp_path):
    db = tmp_path / "runs.db"
    recorded = pair(counting_llm([]), db, "cassette")
    expected = await recorded.run(n_round=4, idea="sorting")
    replay = pair(ReplayLLM.from_store(db, "cassette"), store=None)
    assert said(await replay.run(n_round=4, idea="sorting")) == said(expected)
    further = pair(ReplayLLM.from_store(db, "cassette"), store=None)
    with pytest.raises(ReplayMismatch):
        await further.run(n_round=4, idea="another idea")
    extra = pair(ReplayLLM.from_store(db, "cassette"), store=None)
    with pytest.raises(ReplayMissing):
        await extra.run(n_round=5, idea="sorting")  # a fifth round was never recorded
    with pytest.raises(UsageError):
        ReplayLLM.from_store(db, "no-such-run")


# --------------------------------------------------------- save and restore
class Draft(Action):
    tone: str = "plain"

    async def run(self, history):
        return await self._aask(f"[{self.tone}] draft: {history[-1].content}")


class Author(Role):
    name: str = "Ann"
    profile: str = "Author"
    level: int = 1

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._watch([UserRequirement, Check])
        self.set_actions([Draft(tone="dry")])


async def test_serialize_then_deserialize_restores_subclasses_and_continues_to_the_same_end(tmp_path):
    db = tmp_path / "runs.db"
    team = Team(llm=counting_llm([]), roles=[Author(level=3), Role(name="Checker", actions=[Check()], watch=[Draft])],
                store=db)
    await team.run(n_round=2, idea="tea")
    team.serialize(tmp_path / "saved")

    restored = Team.deserialize(tmp_path / "saved", store=db)
    restored.context.set_llm(counting_llm(more := []))
    author = restored.env.roles["Ann"]
    assert type(author) is Author and author.level == 3
    assert type(author.actions[0]) is Draft and author.actions[0].tone == "dry"
    assert [m.content for m in author.rc.memory.get()] == [m.content for m in team.env.roles["Ann"].rc.memory.get()]
    history = await restored.run(n_round=2)
    assert len(more) == 2 and restored.cost_manager.total.calls == 4

    straight = Team(llm=counting_llm([]), roles=[Author(level=3), Role(name="Checker", actions=[Check()],
                                                                      watch=[Draft])], store=None)
    assert said(history) == said(await straight.run(n_round=4, idea="tea"))


def test_deserialize_imports_nothing_the_data_names(tmp_path):
    team = Team(roles=[Author()], store=None)
    path = team.serialize(tmp_path / "saved")
    data = json.loads(path.read_text())
    data["roles"][0]["class"] = "this.Zen"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match="no loaded subclass of Role"):
        Team.deserialize(tmp_path / "saved", store=None)
    assert "this" not in sys.modules


async def test_a_failing_run_saves_a_checkpoint_first_and_says_where(tmp_path):
    class Boom(Action):
        async def run(self, history):
            raise RuntimeError("disk full")

    db = tmp_path / "runs.db"
    team = Team(llm=counting_llm([]), roles=[Role(name="B", actions=[Boom()])], store=db)
    with pytest.raises(ActionFailed) as info:
        await team.run(n_round=2, idea="x")
    where = info.value.checkpoint  # type: ignore[attr-defined]
    assert where == tmp_path / "checkpoints" / team.run_id and (where / "team.json").is_file()
    assert any(str(where) in note for note in getattr(info.value, "__notes__", []))
    assert [r.name for r in Team.deserialize(where, store=None).env.roles.values()] == ["B"]


# ---------------------------------------------------------------- the CLI
def test_runs_commands_show_list_graph_and_export_the_debate(tmp_path, capsys):
    from support import run_example

    from rolecast.cli import main

    db = tmp_path / "debate.db"
    out = run_example("examples/debate.py", "--scripted", env={"ROLECAST_STORE": str(db)})
    assert out.returncode == 0, out.stderr
    (run,) = SQLiteRunStore(db).runs()

    assert main(["runs", "list", "--store", str(db)]) == 0
    listing = capsys.readouterr().out
    assert run.run_id in listing and "n_round" in listing

    assert main(["runs", "show", run.run_id, "--store", str(db)]) == 0
    timeline = capsys.readouterr().out.splitlines()
    assert timeline[0].startswith(f"run {run.run_id} started") and "Ada" in timeline[0] and "Ben" in timeline[0]
    spoken = [line.strip().split(" [")[0] for line in timeline if "→" in line and not line.startswith("run")]
    assert spoken[1:] == ["Ada → Ben", "Ben → Ada", "Ada → Ben", "Ben → Ada"]
    assert any(line.strip().startswith("model ") for line in timeline) and timeline[-1].startswith("stopped")

    assert main(["runs", "graph", run.run_id, "--store", str(db)]) == 0
    arrows = [line.strip().split(":")[0] for line in capsys.readouterr().out.splitlines() if "->>" in line]
    assert arrows[-4:] == ["Ada->>Ben", "Ben->>Ada", "Ada->>Ben", "Ben->>Ada"]  # the alternation
    assert main(["runs", "graph", run.run_id, "--format", "dot", "--store", str(db)]) == 0
    assert '"Ada" -> "Ben"' in capsys.readouterr().out

    assert main(["runs", "export", run.run_id, "--store", str(db)]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[0]["kind"] == "run_started" and events[-1]["kind"] == "run_stopped"
    assert main(["runs", "show", "nope", "--store", str(db)]) == 2


async def test_a_team_dump_reloads_as_its_own_role_and_action_classes_and_goes_on():
    def checker() -> Role:
        return Role(name="Checker", actions=[Check()], watch=[Draft])

    team = Team(llm=counting_llm([]), roles=[Author(level=4), checker()], store=None)
    await team.run(n_round=1, idea="tea")
    again = Team.model_validate_json(team.model_dump_json())
    author = again.env.roles["Ann"]
    assert type(author) is Author and author.level == 4 and type(author.actions[0]) is Draft
    assert author.actions[0].tone == "dry" and author.rc.env is again.env
    assert [m.content for m in author.rc.memory.get()] == ["tea", "re[[dry] draft: tea]"]
    # the checker's inbox (the draft, delivered at the end of round 1) came back too: the run goes on
    again.context.set_llm(counting_llm(calls := []))
    history = await again.run(n_round=1)
    assert calls == ["check: re[[dry] draft: tea]"] and history[-1].sent_from == "Checker"


async def test_the_store_never_holds_its_write_lock_across_a_wait(tmp_path):
    import asyncio

    from rolecast.runs.store import RunEvent

    db = tmp_path / "shared.db"
    first, second = SQLiteRunStore(db), SQLiteRunStore(db)  # two writers: two teams, two processes
    first.append(RunEvent("a", MESSAGE, {"message": {"content": "hi"}}))  # not a paid-for event
    await asyncio.sleep(0)  # the event loop turns (a model call is awaited, say)
    started = time.monotonic()
    await asyncio.to_thread(second.append, RunEvent("b", LLM_CALL, {"x": 1}))
    assert time.monotonic() - started < 1.0
    assert [e.kind for e in second.events("a")] == [MESSAGE]  # and the first one's event is committed

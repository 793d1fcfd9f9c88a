"""``rolecast runs rerun RUN``: a run remembers the command that started it; edit the script, run
one command, and only the calls that changed reach the model.

The team script is written into the test's folder and run as a real process, as a user runs it;
its model is a ``FunctionLLM`` whose answer depends on the prompt (a changed reviewer prompt is a
different request), and the script writes which prompts reached it to ``<run id>.json``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from environment import Team
from rolecast.cli import main
from rolecast.errors import UsageError
from rolecast.runs import LLM_CALL, RUN_STARTED, open_store
from rolecast.runs.events import command_argv
from rolecast.runs.lineage import lineage_of
from rolecast.runs.rerun import REUSE_VARIABLE, RUN_ID_VARIABLE, recorded_command, rerun, started_command

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = '''\
"""A coder -> tester -> reviewer team on a scripted model (for tests/test_rerun_cli.py)."""
import json
import os
import sys
import zlib
from pathlib import Path

from actions import Action, UserRequirement
from environment import Team
from rolecast.testing import FunctionLLM
from roles import Role

REVIEW = "review"
HERE = Path(__file__).resolve().parent


class Write(Action):
    async def run(self, history):
        return await self._aask(f"write about: {history[-1].content[-60:]}")


class Check(Action):
    async def run(self, history):
        return await self._aask(f"test: {history[-1].content[-60:]}")


class Review(Action):
    async def run(self, history):
        return await self._aask(f"{REVIEW}: {history[-1].content[-60:]}")


def build(**kw):
    """The team, and the list of the prompts (up to their ':') that reached its model."""
    calls = []

    def answer(messages):
        prompt = messages[-1]["content"]
        calls.append(prompt.split(":", 1)[0])
        return f"a{zlib.crc32(prompt.encode()):08x}"

    roles = [Role(name="Coder", actions=[Write()], watch=[UserRequirement]),
             Role(name="Tester", actions=[Check()], watch=[Write]),
             Role(name="Reviewer", actions=[Review()], watch=[Check])]
    return Team(llm=FunctionLLM(answer, model="gpt-4o-mini"), roles=roles, **kw), calls


def run(team, calls):
    history = team.run_sync(4, idea="a function that adds two numbers")
    record = {"calls": calls, "history": [[m.sent_from, m.content] for m in history],
              "reuse_left": os.environ.get("ROLECAST_REUSE"), "run_id_left": os.environ.get("ROLECAST_RUN_ID")}
    (HERE / f"{team.run_id}.json").write_text(json.dumps(record))
    return history


if __name__ == "__main__":
    first = build()
    second = build() if "--two-teams" in sys.argv else None  # (built while the first has not run yet)
    run(*first)
    if second is not None:
        run(*second)
'''


def write_script(folder: Path, review: str = "review") -> Path:
    path = folder / "team_script.py"
    path.write_text(SCRIPT.replace('REVIEW = "review"', f"REVIEW = {review!r}"), encoding="utf-8")
    return path


def environ(db: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "ROLECAST_STORE": str(db)}


def run_script(script: Path, db: Path, *args: str) -> None:
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=environ(db),
                          cwd=script.parent, timeout=120)
    assert done.returncode == 0, done.stderr


def cli(db: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rolecast.cli", "runs", *args, "--store", str(db)],
                          capture_output=True, text=True, env=environ(db), cwd=cwd, timeout=120)


def record(folder: Path, run_id: str) -> dict:
    return json.loads((folder / f"{run_id}.json").read_text())


def only_run(db: Path) -> str:
    store = open_store(db, read_only=True)
    assert store is not None
    try:
        (info,) = store.runs()
        return info.run_id
    finally:
        store.close()


def snapshot(db: Path, run_id: str) -> list[tuple]:
    store = open_store(db, read_only=True)
    assert store is not None
    try:
        return [(e.seq, e.kind, e.round, e.role, e.text) for e in store.events(run_id)]
    finally:
        store.close()


SUMMARY = re.compile(r"run (\S+) \(rerun of (\S+)\): model calls: (\d+) live, (\d+) reused \(saved \$([\d.]+)\)")


def test_edit_the_reviewer_prompt_and_rerun_pays_only_for_the_reviewer(tmp_path, monkeypatch, capsys):
    db, work = tmp_path / "runs.db", tmp_path / "work"
    work.mkdir()
    script = write_script(work)
    run_script(script, db)
    parent = only_run(db)
    assert record(work, parent)["calls"] == ["write about", "test", "review"]
    before = snapshot(db, parent)

    # the run remembers how it was started, and `runs show` says it (shell-quoted)
    store = open_store(db, read_only=True)
    assert store is not None
    assert recorded_command(store, parent) == {"argv": [str(script)], "cwd": str(work)}
    store.close()
    assert main(["runs", "show", parent, "--store", str(db)]) == 0
    assert f"command: {shlex.join(['python', str(script)])}  (in {work})" in capsys.readouterr().out

    write_script(work, review="review strictly")  # the edit
    done = cli(db, "rerun", parent, "--run-id", "v2", "--yes")  # (from another directory: the script's is recorded)
    assert done.returncode == 0, done.stderr
    child = record(work, "v2")
    assert child["calls"] == ["review strictly"]  # 0 coder and 0 tester calls reached the model
    assert child["reuse_left"] is None and child["run_id_left"] is None  # the team took the variables

    line = done.stdout.strip().splitlines()[-1]
    match = SUMMARY.fullmatch(line)
    assert match is not None, line
    assert match.group(1, 2, 3, 4) == ("v2", parent, "1", "2")
    store = open_store(db, read_only=True)
    assert store is not None
    paid = sum(e.data["cost"] for e in store.events(parent, [LLM_CALL]) if e.role in ("Coder", "Tester"))
    assert paid > 0 and match.group(5) == f"{paid:.6f}"  # the saving is what the reused calls cost the parent
    assert lineage_of(store, "v2") is not None and lineage_of(store, "v2").describe() == f"reuses {parent}"
    roles = [(e.role, "reused" in e.data) for e in store.events("v2", [LLM_CALL])]
    assert roles == [("Coder", True), ("Tester", True), ("Reviewer", False)]
    store.close()
    assert snapshot(db, parent) == before  # the parent is only read

    fresh_db = tmp_path / "fresh.db"  # a fresh run of the edited script, nothing reused
    run_script(script, fresh_db)
    fresh = record(work, only_run(fresh_db))
    assert fresh["calls"] == ["write about", "test", "review strictly"]
    assert child["history"] == fresh["history"]

    # once more under the same id: a resume of the rerun, nothing asked again
    again = cli(db, "rerun", parent, "--run-id", "v2", "--yes")
    assert again.returncode == 0, again.stderr
    assert record(work, "v2")["calls"] == [] and record(work, "v2")["history"] == child["history"]


def test_only_the_first_team_of_a_rerun_script_reuses(tmp_path):
    db = tmp_path / "runs.db"
    script = write_script(tmp_path)
    run_script(script, db, "--two-teams")
    store = open_store(db, read_only=True)
    assert store is not None
    parents = [info.run_id for info in store.runs()]
    parent = parents[-1]  # (newest first: the first team's run is the oldest)
    store.close()

    write_script(tmp_path, review="review strictly")
    done = cli(db, "rerun", parent, "--yes")  # a fresh run id
    assert done.returncode == 0, done.stderr
    new = SUMMARY.fullmatch(done.stdout.strip().splitlines()[-1])
    assert new is not None and new.group(3, 4) == ("1", "2")
    assert record(tmp_path, new.group(1))["calls"] == ["review strictly"]

    store = open_store(db, read_only=True)
    assert store is not None
    (second,) = {info.run_id for info in store.runs()} - {*parents, new.group(1)}  # the rerun's second team
    assert lineage_of(store, second) is None  # the second team ran on its own, every call live
    assert record(tmp_path, second)["calls"] == ["write about", "test", "review strictly"]
    assert all("reused" not in e.data for e in store.events(second, [LLM_CALL]))
    store.close()


def load_script(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("rerun_team_script", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_run_started_under_pytest_records_no_command_and_reruns_with_the_command_given(
    tmp_path, monkeypatch, capsys,
):
    db = tmp_path / "runs.db"
    script = write_script(tmp_path)
    team, calls = load_script(script).build(store=db, run_id="nb")  # as from a notebook: no script to run again
    team.run_sync(4, idea="a function that adds two numbers")
    assert calls == ["write about", "test", "review"]
    assert started_command() is None  # pytest is a launcher, not the team's script
    store = open_store(db)
    assert store is not None
    assert all("command" not in e.data for e in store.events("nb", [RUN_STARTED]))

    with pytest.raises(UsageError, match=r"recorded no command.*pass the command after --"):
        rerun(store, str(db), "nb")
    assert main(["runs", "rerun", "nb", "--store", str(db)]) == 2
    assert "pass the command after --" in capsys.readouterr().err
    assert main(["runs", "rerun", "ghost", "--store", str(db)]) == 2
    assert "no run 'ghost' in the store (recent runs: nb)" in capsys.readouterr().err

    # the command after `--`, its own options and a `--` of its own passed on untouched
    write_script(tmp_path, review="review strictly")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.chdir(tmp_path)
    status = main(["runs", "rerun", "nb", "--store", str(db), "--run-id", "nb2", "--",
                   "team_script.py", "--note", "x", "--", "y"])
    assert status == 0
    assert capsys.readouterr().out.strip().endswith("run nb2 (rerun of nb): model calls: 1 live, 2 reused "
                                                      f"(saved ${sum_cost(store, 'nb'):.6f})")
    assert record(tmp_path, "nb2")["calls"] == ["review strictly"]
    assert recorded_command(store, "nb2") == {"argv": ["team_script.py", "--note", "x", "--", "y"],
                                              "cwd": str(tmp_path)}

    # a command that runs no team: its status, and a line saying no run was made
    assert main(["runs", "rerun", "nb", "--store", str(db), "--run-id", "nb3", "--",
                 sys.executable, "-c", "pass"]) == 1
    assert "made no run nb3" in capsys.readouterr().err
    with pytest.raises(UsageError, match="run 'nb' exists already as a run of its own"):
        rerun(store, str(db), "nb2", "nb")  # (a run id taken by a run of another origin: refused before running)
    store.close()


def sum_cost(store, run_id: str) -> float:
    return sum(e.data["cost"] for e in store.events(run_id, [LLM_CALL]) if e.role in ("Coder", "Tester"))


def test_a_team_takes_the_variables_only_when_it_is_the_parents_kind_and_nothing_explicit_is_given(
    tmp_path, monkeypatch,
):
    db = tmp_path / "runs.db"
    module = load_script(write_script(tmp_path))
    module.build(store=db, run_id="p")[0].run_sync(4, idea="a function that adds two numbers")
    module.build(store=db, run_id="q")[0].run_sync(4, idea="a function that adds two numbers")

    def rerun_env() -> None:
        monkeypatch.setenv(REUSE_VARIABLE, "p")
        monkeypatch.setenv(RUN_ID_VARIABLE, "p2")

    rerun_env()
    explicit = module.build(store=db, run_id="mine", reuse="q")[0]  # explicit reuse= wins
    assert explicit.run_id == "mine" and explicit.run_log.reuse == "q"
    assert module.build(store=db, run_id="own")[0].run_log.reuse is None  # so does an explicit run_id
    assert os.environ[REUSE_VARIABLE] == "p" and os.environ[RUN_ID_VARIABLE] == "p2"  # left for another team

    class OtherTeam(Team):
        pass

    other = OtherTeam(store=db)  # not the parent's team
    assert other.run_id != "p2"
    assert module.build(store=tmp_path / "elsewhere.db")[0].run_id != "p2"  # a store without the parent
    assert os.environ[REUSE_VARIABLE] == "p"

    taker, calls = module.build(store=db)
    assert taker.run_id == "p2" and REUSE_VARIABLE not in os.environ and RUN_ID_VARIABLE not in os.environ
    taker.run_sync(4, idea="a function that adds two numbers")
    assert calls == [] and taker.run_log.reused_calls == 3  # an unchanged script: every call reused
    assert module.build(store=db)[0].run_id != "p2"  # the next team runs on its own

    rerun_env()
    monkeypatch.setenv(RUN_ID_VARIABLE, "../p3")
    with pytest.raises(UsageError, match=r"\$ROLECAST_RUN_ID: .* is not a run id"):
        module.build(store=db)


def test_the_command_recorded_is_the_scripts_and_never_a_launchers(tmp_path, monkeypatch):
    script = write_script(tmp_path)
    monkeypatch.chdir(tmp_path)
    main_module = ModuleType("__main__")
    main_module.__spec__ = None  # python team_script.py
    monkeypatch.setitem(sys.modules, "__main__", main_module)
    monkeypatch.setattr(sys, "argv", ["team_script.py", "--fast"])
    assert started_command() == {"argv": ["team_script.py", "--fast"], "cwd": str(tmp_path)}

    spec = importlib.util.spec_from_file_location("tools.team.__main__", script)  # python -m tools.team
    main_module.__spec__ = spec
    monkeypatch.setattr(sys, "argv", [str(script), "x"])
    command = started_command()
    assert command == {"argv": [str(script), "x"], "cwd": str(tmp_path), "module": "tools.team"}
    assert command_argv(command, "/usr/bin/python3") == ["/usr/bin/python3", "-m", "tools.team", "x"]

    main_module.__spec__ = None
    for launcher in ("ipykernel_launcher.py", "pytest"):  # a notebook's kernel, pytest
        (tmp_path / launcher).write_text("")
        monkeypatch.setattr(sys, "argv", [launcher, "-f", "kernel.json"])
        assert started_command() is None
    for argv in ([""], ["-c"], ["missing.py"]):  # a prompt, python -c, a file that is not there
        monkeypatch.setattr(sys, "argv", argv)
        assert started_command() is None

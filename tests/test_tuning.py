"""Tunings and ``rolecast optimize`` (issue 45), on scripted doubles whose answers improve only with a
demonstration or an instruction in the prompt."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from actions import Action, UserRequirement
from environment import Team
from rolecast.cli import main
from rolecast.errors import TuningError
from rolecast.eval.evalset import load_evalset
from rolecast.testing import FunctionLLM
from rolecast.tuning import Demo, Tuning, load_tuning, surface
from rolecast.tuning.optimize import optimize, split_cases
from rolecast.tuning.surface import KeyTuning, digest, parse_tuning
from roles import Role

TEAM = '''\
from actions import Action, UserRequirement
from environment import Team
from rolecast.testing import FunctionLLM
from roles import Role


class Solve(Action):
    PROMPT_TEMPLATE: str = "Solve: {idea}"
    name: str = "Solve"

    async def run(self, history):
        return await self._aask(self.PROMPT_TEMPLATE.format(idea=history[-1].content))


def answer(messages):
    prompt = messages[-1]["content"]
    shown = any(m["role"] == "assistant" for m in messages)  # a demonstration came first
    careful = "step by step" in prompt                         # or a better instruction
    return "ANSWER_OK" if "easy" in prompt or shown or careful else "no idea"


def build_team():
    return Team(llm=FunctionLLM(answer), roles=[
        Role(name="Sam", profile="Solver", actions=[Solve()], watch=[UserRequirement])])
'''


def _cases(names):
    return "".join(f"  - id: {n}\n    idea: {n.replace('_', ' ')} puzzle\n    n_round: 1\n    expect:\n"
                   f"      - contains: ANSWER_OK\n" for n in names)


@pytest.fixture
def project(tmp_path, monkeypatch):
    module = f"tuned_team_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(TEAM, encoding="utf-8")
    names = ["easy_a", "easy_b", "easy_c", "hard_a", "hard_b", "hard_c"]
    (tmp_path / "set.yaml").write_text(f"name: solver\nteam: {module}:build_team\ncases:\n{_cases(names)}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROLECAST_TUNING", raising=False)
    yield tmp_path, module
    sys.modules.pop(module, None)


def _seed_with_a_hard_dev_case(path: Path) -> int:
    evalset = load_evalset(path)
    return next(s for s in range(50) if any(c.startswith("hard") for c in split_cases(evalset, 0.34, s)[1]))


# ------------------------------------------------------------------ the surface and applying a tuning
class Echo(Action):
    PROMPT_TEMPLATE: str = "Say {x}"
    name: str = "Echo"

    async def run(self, history):
        return await self._aask(self.PROMPT_TEMPLATE.format(x=history[-1].content))


def _team(seen, **kwargs):
    llm = FunctionLLM(lambda messages: seen.append(messages) or "ok")
    return Team(llm=llm, roles=[Role(name="Eve", goal="echo", actions=[Echo()], watch=[UserRequirement])], **kwargs)


def test_the_surface_names_roles_goals_constraints_and_actions_instructions_and_demos():
    keys = surface(_team([]))
    assert keys["role:Eve.goal"] == "echo" and keys["action:Echo.instruction"] == "Say {x}"
    assert {"role:Eve.constraints", "action:Echo.demos"} <= set(keys)


async def test_a_tuning_sets_instructions_goals_and_renders_demos_before_the_prompt(tmp_path):
    tuning = Tuning({
        "action:Echo.instruction": KeyTuning(text="Repeat exactly: {x}", source=digest("Say {x}")),
        "action:Echo.demos": KeyTuning(demos=(Demo("Repeat exactly: a", "a"),)),
        "role:Eve.goal": KeyTuning(text="repeat what you are told"),
    })
    path = tmp_path / "t.yaml"
    tuning.save(path)
    seen: list = []
    team = _team(seen, tuning=path)
    await team.run(n_round=1, idea="hello")
    messages = seen[-1]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1:3] == [{"role": "user", "content": "Repeat exactly: a"}, {"role": "assistant", "content": "a"}]
    assert messages[-1]["content"] == "Repeat exactly: hello" and "repeat what you are told" in messages[0]["content"]


async def test_without_a_tuning_the_prompt_is_byte_for_byte_as_before():
    seen: list = []
    await _team(seen).run(n_round=1, idea="hello")
    assert [m["role"] for m in seen[-1]] == ["system", "user"] and seen[-1][-1]["content"] == "Say hello"


async def test_an_unknown_key_is_a_tuning_error_naming_it_and_the_closest(tmp_path):
    path = tmp_path / "t.yaml"
    Tuning({"action:Ecko.instruction": KeyTuning(text="x")}).save(path)
    with pytest.raises(TuningError, match=r"'action:Ecko\.instruction'.*did you mean 'action:Echo\.instruction'"):
        await _team([], tuning=path).run(n_round=1, idea="hello")


async def test_a_key_whose_source_changed_is_a_warning_and_still_applies(tmp_path, caplog):
    from loguru import logger

    seen: list = []
    warnings: list[str] = []
    sink = logger.add(lambda m: warnings.append(str(m)), level="WARNING")
    logger.enable("rolecast")
    try:
        tuning = Tuning({"action:Echo.instruction": KeyTuning(text="Echo {x}", source=digest("Say it: {x}"))})
        await _team(seen, tuning=tuning).run(n_round=1, idea="hi")
    finally:
        logger.remove(sink)
    assert any("source text changed" in w for w in warnings) and seen[-1][-1]["content"] == "Echo hi"


@pytest.mark.parametrize("text, said", [
    ("keys: {}\n", "rolecast_tuning: 1"),
    ("rolecast_tuning: 1\nkeys:\n  action:Echo.tone: {text: x}\n", "a key is role:"),
    ("rolecast_tuning: 1\nkeys:\n  action:Echo.demos: {text: x}\n", "holds demos"),
    ("rolecast_tuning: 1\na: &a [1]\nkeys: {x: *a}\n", "aliases"),
])
def test_a_tuning_file_that_cannot_be_used_says_why(tmp_path, text, said):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(TuningError, match=said):
        load_tuning(path)


async def test_rolecast_tuning_in_the_environment_applies_to_a_team_given_none(tmp_path, monkeypatch):
    path = tmp_path / "t.yaml"
    Tuning({"action:Echo.instruction": KeyTuning(text="Echo {x}")}).save(path)
    monkeypatch.setenv("ROLECAST_TUNING", str(path))
    seen: list = []
    await _team(seen).run(n_round=1, idea="hi")
    assert seen[-1][-1]["content"] == "Echo hi"
    assert parse_tuning(json.loads(json.dumps(load_tuning(path).as_dict()))).keys.keys() == {"action:Echo.instruction"}


# ------------------------------------------------------------------ optimize
async def test_optimize_bootstraps_demos_that_lift_dev_and_writes_the_tuning_and_report(project):
    folder, _ = project
    seed = _seed_with_a_hard_dev_case(folder / "set.yaml")
    told: list[str] = []
    result = await optimize(folder / "set.yaml", folder / "tuned.yaml", store=folder / "runs.db", seed=seed,
                            max_demos=2, on_candidate=lambda c, best: told.append(c.id))
    report = result.as_dict()
    assert report["baseline"]["dev"]["pass_rate"] < 1.0 and report["best"]["dev"]["pass_rate"] == 1.0
    assert report["best"]["changed_keys"] == ["action:Solve.demos"] and told == ["c1", "c2"]
    assert all(c["reused_calls"] >= 0 and c["live_calls"] > 0 for c in report["candidates"])
    assert report["paired_dev"]["improved"] >= 1 and report["paired_dev"]["worsened"] == 0
    tuning = load_tuning(folder / "tuned.yaml")
    [demo] = tuning.keys["action:Solve.demos"].demos
    assert demo.output == "ANSWER_OK" and "easy" in demo.input and demo.source  # from a passing train run


async def test_the_studio_shows_an_optimizations_candidates_and_the_winners_diff(project):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from rolecast.studio.app import create_app
    from rolecast.studio.evals import diff_lines
    from rolecast.studio.source import RunSource

    folder, _ = project
    seed = _seed_with_a_hard_dev_case(folder / "set.yaml")
    result = await optimize(folder / "set.yaml", folder / "tuned.yaml", store=folder / "runs.db", seed=seed,
                            max_demos=2)
    kept = json.loads((folder / "optimizations" / f"{result.id}.json").read_text())
    assert kept["running"] is False and kept["best"]["id"] == result.best.id != "baseline"
    [change] = kept["changes"]
    assert change["key"] == "action:Solve.demos" and change["demos"][0]["output"] == "ANSWER_OK"
    source = RunSource(folder / "runs.db")
    try:
        client = TestClient(create_app(source, hosts=None, warm=False))
        listing = client.get("/evals")
        assert listing.status_code == 200 and result.id in listing.text and "Optimizations" in listing.text
        page = client.get("/evals", params={"optimization": result.id})
        assert page.status_code == 200
        # every candidate with its scores, the winner starred, each linking to its eval
        assert all(c.id in page.text for c in [result.baseline, *result.candidates])
        assert f"{result.best.id} ★" in page.text and f'id={result.best.eval_id}' in page.text
        assert "action:Solve.demos" in page.text and "ANSWER_OK" in page.text  # what the winner adds
        assert client.get("/evals", params={"optimization": "../runs"}).status_code == 404
    finally:
        source.close()
    # a teacher's instruction shows as lines gone and lines new
    assert diff_lines("Write code.\nBe brief.", "Write code.\nName the function.") == [
        (" ", "Write code."), ("-", "Be brief."), ("+", "Name the function.")]


async def test_optimize_again_redoes_no_finished_candidate(project):
    folder, _ = project
    seed = _seed_with_a_hard_dev_case(folder / "set.yaml")
    first = await optimize(folder / "set.yaml", folder / "t1.yaml", store=folder / "runs.db", seed=seed, max_demos=1)
    again = await optimize(folder / "set.yaml", folder / "t2.yaml", store=folder / "runs.db", seed=seed, max_demos=1)
    assert first.spent_calls > 0 and again.spent_calls == 0  # every eval found finished in the store
    assert (folder / "t1.yaml").read_text() == (folder / "t2.yaml").read_text()


async def test_optimize_stops_before_an_eval_that_would_pass_the_budget(project):
    folder, _ = project
    seed = _seed_with_a_hard_dev_case(folder / "set.yaml")
    result = await optimize(folder / "set.yaml", folder / "t.yaml", store=folder / "runs.db", seed=seed,
                            budget_calls=8, max_demos=2)
    assert result.candidates == [] and "budget" in result.stopped and result.spent_calls <= 8
    assert load_tuning(folder / "t.yaml").keys == {}  # the best so far: the team as written


def test_the_optimize_command_prints_a_line_per_candidate_a_table_and_writes_json(project, capsys):
    folder, _ = project
    seed = _seed_with_a_hard_dev_case(folder / "set.yaml")
    status = main(["optimize", "set.yaml", "--out", "tuned.yaml", "--store", "runs.db", "--seed", str(seed),
                   "--max-demos", "1", "--json", "report.json", "--budget-calls", "300"])
    shown = capsys.readouterr()
    assert status == 0 and "c1 (bootstrap" in shown.err and "best: c1" in shown.out
    report = json.loads((folder / "report.json").read_text())
    assert {"baseline", "best", "candidates"} <= set(report)
    assert {"id", "changed_keys", "train", "dev", "live_calls", "reused_calls"} <= set(report["candidates"][0])
    # the tuning applied by `rolecast eval --tuning` passes the hard cases the team as written fails
    assert main(["eval", "set.yaml", "--store", "other.db", "--tuning", "tuned.yaml", "--json", "e.json"]) == 0
    assert main(["eval", "set.yaml", "--store", "other.db", "--json", "e2.json"]) == 1


PAIR = '''\
from actions import Action, UserRequirement
from environment import Team
from rolecast.testing import FunctionLLM
from roles import Role


class Code(Action):
    name: str = "Code"

    async def run(self, history):
        return await self._aask("Code for: " + history[-1].content)


class Check(Action):
    name: str = "Check"

    async def run(self, history):
        return await self._aask("Tests for: " + history[0].content)


def answer(messages):
    prompt = messages[-1]["content"]
    if prompt.startswith("Code for"):
        return "no code for " + prompt  # the coder never passes its check: no run passes as a whole
    shown = any(m["role"] == "assistant" for m in messages)  # a demonstration came first
    return "TESTS_OK" if "easy" in prompt or shown else "no idea"


def build_team():
    return Team(llm=FunctionLLM(answer), roles=[
        Role(name="Cody", profile="Coder", actions=[Code()], watch=[UserRequirement]),
        Role(name="Tess", profile="Tester", actions=[Check()], watch=[Code])])
'''


async def test_a_role_that_passed_its_own_checks_teaches_though_another_roles_check_failed(tmp_path, monkeypatch):
    """No run passes as a whole (the coder's check always fails), yet the tester's passing calls become
    demonstrations, and the winner is chosen by the checks it passes on dev when no run passes there."""
    module = f"pair_team_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(PAIR, encoding="utf-8")
    names = ["easy_a", "easy_b", "easy_c", "hard_a", "hard_b", "hard_c"]
    cases = "".join(f"  - id: {n}\n    idea: {n.replace('_', ' ')} puzzle\n    n_round: 2\n    expect:\n"
                    f"      - contains: {{text: CODE_OK, role: Cody}}\n"
                    f"      - contains: {{text: TESTS_OK, role: Tess}}\n" for n in names)
    (tmp_path / "set.yaml").write_text(f"name: pair\nteam: {module}:build_team\ncases:\n{cases}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROLECAST_TUNING", raising=False)
    try:
        seed = _seed_with_a_hard_dev_case(tmp_path / "set.yaml")
        result = await optimize(tmp_path / "set.yaml", tmp_path / "t.yaml", store=tmp_path / "runs.db", seed=seed,
                                max_demos=1)
    finally:
        sys.modules.pop(module, None)
    report = result.as_dict()
    assert report["baseline"]["train"]["pass_rate"] == 0.0 and report["best"]["dev"]["pass_rate"] == 0.0
    assert report["best"]["changed_keys"] == ["action:Check.demos"]  # the tester's, never the coder's
    assert report["best"]["dev"]["checks_passed"] > report["baseline"]["dev"]["checks_passed"]
    [demo] = load_tuning(tmp_path / "t.yaml").keys["action:Check.demos"].demos
    assert demo.output == "TESTS_OK"

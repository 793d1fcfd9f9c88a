"""``rolecast eval``: evalsets of a scripted team — pass rates, exit statuses, JSON and JUnit, resuming
after ``kill -9``, rescoring without a model call, and A/B runs that pay only for what changed.

The team module is written into the test's folder (a coder, Alice, and a tester, Bob, on a
``FunctionLLM``); it appends every prompt that reaches its model to ``calls.log`` beside it, so a
test can count the model calls each command made.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from rolecast.cli import main
from rolecast.errors import EvalsetError
from rolecast.eval import Check, evaluate, load_evalset, wilson
from rolecast.eval.record import JUDGE_ROLE
from rolecast.runs import LLM_CALL, RUN_STARTED, open_store
from rolecast.runs.events import run_started
from rolecast.testing import FunctionLLM

ROOT = Path(__file__).resolve().parent.parent

TEAM = '''\
"""A coder and a tester on a scripted model (written by tests/test_eval.py)."""
import os
import time
from pathlib import Path

from actions import Action, UserRequirement
from environment import Team
from rolecast.testing import FunctionLLM
from roles import Role

HERE = Path(__file__).resolve().parent
CODER_PROMPT = "write the code for"


class WriteCode(Action):
    async def run(self, history):
        return await self._aask(f"{CODER_PROMPT}: {history[-1].content}")


class WriteTest(Action):
    async def run(self, history):
        return await self._aask(f"write tests for: {history[-1].content}")


def _counted(name):
    path = HERE / f"{name}.count"
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


def answer(messages):
    prompt = messages[-1]["content"]
    with (HERE / "calls.log").open("a") as log:
        log.write(prompt.split(":")[0] + " | " + prompt.rsplit(":", 1)[-1][-30:].replace("\\n", " ") + "\\n")
    if "hang" in prompt and os.environ.get("EVAL_HANG"):
        with (HERE / "calls.log").open("a") as log:
            log.write("HANGING\\n")
        time.sleep(300)
    if "explode" in prompt:
        raise RuntimeError("the coder gave up")
    if prompt.startswith("write tests"):
        return "```python\\ndef test_add():\\n    assert add(1, 2) == 3\\n```"
    if "flaky" in prompt and _counted("flaky") % 3 == 0:  # every third flaky run writes a bug
        return "```python\\ndef add(a, b):\\n    return a - b\\n```"
    return "```python\\ndef add(a, b):\\n    return a + b\\n```"


def build_team():
    return Team(llm=FunctionLLM(answer), roles=[
        Role(name="Alice", profile="Coder", actions=[WriteCode()], watch=[UserRequirement]),
        Role(name="Bob", profile="Tester", actions=[WriteTest()], watch=[WriteCode]),
    ])
'''

EVALSET = '''\
name: adder-team
team: {module}:build_team
repeat: 1
threshold: 0.8
cases:
  - id: add
    idea: write a function that adds two numbers
    n_round: 3
    expect:
      - contains: {{text: "def add", role: Alice}}
      - roles_spoke: {{roles: [Alice, Bob], order: exact}}
      - actions_ran: {{actions: [WriteTest, WriteCode], order: any_order}}
      - python_runs: {{role: Alice}}
      - tests_pass: {{code_from: Alice, tests_from: Bob}}
      - max_calls: 2
      - max_cost: 0.05
  - id: flaky
    idea: write a flaky function that adds two numbers
    n_round: 3
    expect:
      - tests_pass: {{code_from: Coder, tests_from: Tester}}
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The team module (a unique name: each test imports its own) and the evalset beside it."""
    module = f"eval_team_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(TEAM, encoding="utf-8")
    (tmp_path / "adder.yaml").write_text(EVALSET.format(module=module), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    yield tmp_path, module
    sys.modules.pop(module, None)


def calls(folder: Path) -> list[str]:
    log = folder / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def eval_json(capsys, *argv: str) -> tuple[int, dict]:
    status = main(["eval", *argv, "--json", "-"])
    out = capsys.readouterr().out
    return status, json.loads(out)


def test_repeat_makes_runs_per_case_with_pass_rates_exit_status_and_json(project, capsys):
    folder, _ = project
    status, result = eval_json(capsys, "adder.yaml", "--store", "runs.db", "--repeat", "3")
    assert status == 0  # 5 of 6 runs pass: 83% >= the threshold 80%
    assert {k: result[k] for k in ("evalset", "threshold", "passed", "runs", "passed_runs")} == {
        "evalset": "adder-team", "threshold": 0.8, "passed": True, "runs": 6, "passed_runs": 5}
    assert result["pass_rate"] == pytest.approx(5 / 6)
    add, flaky = result["cases"]
    assert (add["id"], add["runs"], add["passed"], add["pass_rate"], add["failures"]) == ("add", 3, 3, 1.0, [])
    assert (flaky["runs"], flaky["passed"]) == (3, 2)
    [failure] = flaky["failures"]
    assert failure["kind"] == "tests_pass" and "1 of 1 test(s) failed" in failure["reason"]
    assert failure["run_id"] == flaky["run_ids"][2]
    assert flaky["interval"] == [pytest.approx(v, abs=1e-4) for v in wilson(2, 3)]
    assert len(calls(folder)) == 12  # 6 runs x (Alice + Bob)
    # every run is an ordinary durable run of the store, tagged with its eval and case
    with open_store(folder / "runs.db") as store:
        for case in result["cases"]:
            for number, run_id in enumerate(case["run_ids"], 1):
                started = run_started(next(store.events(run_id, [RUN_STARTED])))
                assert started["tags"] == {"eval": result["eval_id"], "evalset": "adder-team", "case": case["id"],
                                           "repeat": str(number)}
    assert main(["runs", "show", add["run_ids"][0], "--store", "runs.db"]) == 0
    assert "def add" in capsys.readouterr().out
    # the same runs against a higher bar: exit status 1, and nothing run again
    status, again = eval_json(capsys, "adder.yaml", "--store", "runs.db", "--rescore", result["eval_id"],
                              "--threshold", "0.9")
    assert (status, again["passed"], again["pass_rate"]) == (1, False, pytest.approx(5 / 6))
    assert len(calls(folder)) == 12


def test_table_and_junit(project, capsys):
    folder, _ = project
    argv = ["eval", "adder.yaml", "--store", "runs.db", "--repeat", "3", "--junit", "out/junit.xml", "--json", "o.json"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "flaky" in table and "pass rate" in table and "PASSED — pass rate 83% (5/6)" in table
    assert "1 of 1 test(s) failed" in table  # the first failing reason of the case
    assert json.loads((folder / "o.json").read_text())["passed_runs"] == 5
    suite = ET.parse(folder / "out" / "junit.xml").getroot()
    assert (suite.tag, suite.get("tests"), suite.get("failures")) == ("testsuite", "6", "1")
    names = [t.get("name") for t in suite.iter("testcase")]
    assert names == ["add#1", "add#2", "add#3", "flaky#1", "flaky#2", "flaky#3"]
    [failure] = suite.iter("failure")
    assert "test(s) failed" in failure.get("message", "")


def test_a_failing_run_fails_its_checks_and_the_exit_status(project, capsys):
    folder, module = project
    (folder / "boom.yaml").write_text(
        f"name: boom\nteam: {module}:build_team\ncases:\n  - id: boom\n    idea: explode now\n"
        "    expect:\n      - max_calls: 5\n", encoding="utf-8")
    status, result = eval_json(capsys, "boom.yaml", "--store", "runs.db")
    assert (status, result["passed"], result["cases"][0]["passed"]) == (1, False, 0)
    reasons = [f["reason"] for f in result["cases"][0]["failures"]]
    assert reasons and reasons[0].startswith("the run stopped: error:")


@pytest.mark.parametrize(("text", "said"), [
    ("repaet: 2\n", "unknown key 'repaet' (did you mean 'repeat'?)"),
    ("cases:\n  - id: a\n    idea: x\n    expect:\n      - contain: {text: x}\n",
     "unknown check 'contain' (did you mean 'contains'?)"),
    ("cases:\n  - id: a\n    idea: x\n    expect:\n      - roles_spoke: {roles: [A], order: inorder}\n",
     "did you mean 'in_order'?"),
    ("cases:\n  - id: a\n    idea: x\n    expect:\n      - judge: {rubrik: good}\n", "did you mean 'rubric'?"),
    ("cases:\n  - id: a/b\n    idea: x\n", "id is 1 to 48 letters"),
    ("cases:\n  - id: a\n    idea: x\n    expect:\n      - judge: {rubric: good, samples: 2}\n", "samples is odd"),
])
def test_an_evalset_error_names_the_closest_key_and_exits_2(tmp_path, capsys, text, said):
    body = "name: x\nteam: m:f\n" + text
    if "cases:" not in text:
        body += "cases:\n  - id: a\n    idea: x\n"
    path = tmp_path / "bad.yaml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(EvalsetError) as caught:
        load_evalset(path)
    assert said in str(caught.value)
    assert main(["eval", str(path), "--store", str(tmp_path / "runs.db")]) == 2
    assert said in capsys.readouterr().err


def test_a_json_evalset_and_a_team_that_cannot_be_imported(tmp_path, capsys):
    path = tmp_path / "e.json"
    path.write_text(json.dumps({"name": "j", "team": "no_such_module:f", "cases": [{"id": "a", "idea": "x"}]}))
    assert load_evalset(path).cases[0].n_round == 5
    assert main(["eval", str(path), "--store", str(tmp_path / "runs.db")]) == 2
    assert "cannot import 'no_such_module'" in capsys.readouterr().err


def _judge(verdicts: list[str]) -> FunctionLLM:
    answers = iter(verdicts)
    return FunctionLLM(lambda messages: next(answers))


def test_rescore_makes_no_model_call_but_a_changed_judges(project):
    folder, module = project
    path = folder / "judged.yaml"
    head = f"name: judged\nteam: {module}:build_team\ncases:\n  - id: add\n    idea: write add\n    expect:\n"
    same_judge = "      - judge: {rubric: Alice wrote add, samples: 3}\n"
    path.write_text(head + "      - contains: def add\n" + same_judge)
    judge = _judge(["PASS: yes", "FAIL", "PASS"])
    first = evaluate(path, store=folder / "runs.db", judges={"default": judge})
    assert len(judge.calls) == 3  # three samples, the majority PASS
    assert first.judge_live_calls == 3
    [run] = first.cases[0].runs
    assert run.passed and "2 PASS / 1 FAIL" in run.checks[-1].reason
    team_calls = len(calls(folder))
    with open_store(folder / "runs.db") as store:  # the judge's calls are calls in the run's log
        judged = [e for e in store.events(run.run_id, [LLM_CALL]) if e.role.startswith(JUDGE_ROLE)]
    assert len(judged) == 3
    # edit the checks, not the team: a text that is not there, the same judge, a new judge
    path.write_text(head + "      - contains: def subtract\n" + same_judge + "      - judge: {rubric: it is short}\n")
    judge2 = _judge(["FAIL"] * 10)
    again = evaluate(path, store=folder / "runs.db", judges={"default": judge2}, rescore=first.eval_id)
    assert len(calls(folder)) == team_calls  # no team, no model call of it
    assert len(judge2.calls) == 1  # the new judge only: the unchanged one is answered from the run's log
    assert (again.judge_live_calls, again.total("judge_calls")) == (1, 4)
    assert [c.passed for c in again.cases[0].runs[0].checks] == [False, True, False]
    assert (again.eval_id, again.passed, again.rescored) == (first.eval_id, False, True)
    judge3 = _judge([])
    evaluate(path, store=folder / "runs.db", judges={"default": judge3}, rescore=first.eval_id)
    assert judge3.calls == []  # the same checks again: every judge call answered from the log


def test_baseline_after_editing_one_roles_prompt_pays_only_for_that_role(project, capsys):
    folder, module = project
    text = (folder / "adder.yaml").read_text()
    (folder / "add.yaml").write_text(text[:text.index("  - id: flaky")])  # (no flaky coder: only the edit changes)
    status, base = eval_json(capsys, "add.yaml", "--store", "runs.db", "--repeat", "2")
    assert len(calls(folder)) == 4
    team = folder / f"{module}.py"
    team.write_text(team.read_text().replace('CODER_PROMPT = "write the code for"',
                                             'CODER_PROMPT = "please write the code for"'))
    sys.modules.pop(module, None)
    status, ab = eval_json(capsys, "add.yaml", "--store", "runs.db", "--repeat", "2", "--baseline", base["eval_id"])
    assert status == 0
    new = calls(folder)[4:]
    assert len(new) == 2 and all(line.startswith("please write the code for") for line in new)  # Alice's only
    assert ab["baseline"] == base["eval_id"] and ab["eval_id"] != base["eval_id"]
    for case in ab["cases"]:
        assert (case["live_calls"], case["reused_calls"]) == (2, 2)
        assert "change" in case and "baseline_pass_rate" in case
    with open_store(folder / "runs.db") as store:
        reused = [e.role for e in store.events(ab["cases"][0]["run_ids"][0], [LLM_CALL]) if "reused" in e.data]
    assert reused == ["Bob"]


def test_an_eval_killed_with_sigkill_resumes_without_rerunning_finished_runs(project):
    folder, module = project
    (folder / "resume.yaml").write_text(
        f"name: resume\nteam: {module}:build_team\nrepeat: 2\ncases:\n"
        "  - id: add\n    idea: write a function that adds two numbers\n    n_round: 3\n"
        "    expect:\n      - tests_pass: {code_from: Alice, tests_from: Bob}\n"
        "  - id: hang\n    idea: write a hang function that adds\n    n_round: 3\n"
        "    expect:\n      - contains: {text: def add, role: Alice}\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVAL_HANG": "1"}
    command = [sys.executable, "-m", "rolecast.cli", "eval", "resume.yaml", "--store", "runs.db", "--json", "r.json"]
    child = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while "HANGING" not in calls(folder):
            assert child.poll() is None, "the eval ended before it hung"
            assert time.monotonic() < deadline, "the eval never reached the hanging run"
            time.sleep(0.1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    before = calls(folder)
    assert sum(line.startswith("write the code for") and "two numbers" in line for line in before) == 2
    env.pop("EVAL_HANG")
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads((folder / "r.json").read_text())
    assert (result["runs"], result["passed_runs"], result["found_runs"], result["made_runs"]) == (4, 4, 2, 2)
    after = calls(folder)
    # the two finished "add" runs were not run again: their prompts reached the model once each
    assert sum(line.startswith("write the code for") and "two numbers" in line for line in after) == 2
    assert len({*result["cases"][0]["run_ids"], *result["cases"][1]["run_ids"]}) == 4


def test_a_module_level_team_is_built_again_for_each_run(project, capsys):
    folder, module = project
    (folder / "fixed.py").write_text(f"from {module} import build_team\nteam = build_team()\n")
    (folder / "fixed.yaml").write_text(
        "name: fixed\nteam: fixed:team\nrepeat: 2\ncases:\n  - id: add\n    idea: write add\n"
        "    n_round: 2\n    expect:\n      - contains: def add\n", encoding="utf-8")
    status, result = eval_json(capsys, "fixed.yaml", "--store", "runs.db")
    sys.modules.pop("fixed", None)
    assert (status, result["runs"], result["passed_runs"]) == (0, 2, 2)
    assert len(set(result["cases"][0]["run_ids"])) == 2


def test_the_shipped_example_evalset_on_the_canned_model(tmp_path):
    """examples/multi_agents.evalset.yaml — the multi-agent example's artifact checks — with its team on
    the example's canned model: every artifact check passes; a judge that says FAIL fails every run."""
    evalset = load_evalset(ROOT / "examples" / "multi_agents.evalset.yaml")
    assert [c.id for c in evalset.cases[:4]] == ["add", "product", "reverse", "fibonacci"]
    assert {c.kind for c in evalset.cases[0].expect} == {"actions_ran", "contains", "python_runs", "tests_pass",
                                                          "judge", "max_calls"}
    # the other eight name their function: reference tests for the code, a correct solution for the tests
    assert len(evalset.cases) == 12 and all(
        {"code_from", "tests"} <= set(c.expect[2].args) and {"code", "tests_from"} <= set(c.expect[3].args)
        for c in evalset.cases[4:])
    object.__setattr__(evalset, "cases", evalset.cases[:4])  # the ideas the canned model knows
    evalset.team = "build_customized_multi_agents:scripted_team"
    try:
        result = evaluate(evalset, store=tmp_path / "runs.db", judges={"default": FunctionLLM(lambda m: "PASS")})
        assert (result.runs, result.passed_runs, result.passed) == (4, 4, True)
        unchanged = evaluate(evalset, store=tmp_path / "runs.db", rescore=result.eval_id,
                             judges={"default": FunctionLLM(lambda m: "FAIL: the review is vague")})
        assert (unchanged.passed_runs, unchanged.judge_live_calls) == (4, 0)  # the verdicts are in the runs' logs
        for case in evalset.cases:  # a stricter rubric is a new judge check: asked, and failed
            object.__setattr__(case, "expect", tuple(
                Check("judge", {**c.args, "rubric": "the review quotes a line"}) if c.kind == "judge" else c
                for c in case.expect))
        failed = evaluate(evalset, store=tmp_path / "runs.db", rescore=result.eval_id,
                          judges={"default": FunctionLLM(lambda m: "FAIL: the review is vague")})
    finally:
        sys.modules.pop("build_customized_multi_agents", None)
    assert (failed.passed_runs, failed.judge_live_calls) == (0, 4)
    assert {run.failures[0].kind for case in failed.cases for run in case.runs} == {"judge"}


def test_the_artifacts_benchmark_is_an_evalset_over_its_twelve_ideas():
    import runpy

    bench = runpy.run_path(str(ROOT / "bench" / "bench_artifacts.py"), run_name="bench_artifacts")
    evalset = load_evalset(ROOT / "bench" / "artifacts.evalset.yaml")
    assert [c.idea for c in evalset.cases] == bench["IDEAS"] and len(evalset.cases) == 12
    assert evalset.team == "bench_artifacts:build_pair" and callable(bench["build_pair"])
    assert all(c.n_round == 2 and {k.kind for k in c.expect} >= {"python_runs", "tests_pass"} for c in evalset.cases)


def test_a_judge_model_nobody_configured_and_a_bad_eval_id_are_said_before_any_run(project, capsys):
    folder, module = project
    (folder / "j.yaml").write_text(
        f"name: j\nteam: {module}:build_team\ncases:\n  - id: a\n    idea: write add\n    expect:\n"
        "      - judge: {rubric: fine, model: locl}\n", encoding="utf-8")
    assert main(["eval", "j.yaml", "--store", "runs.db"]) == 2
    assert "judge model 'locl' is not configured (did you mean 'local'?)" in capsys.readouterr().err
    assert main(["eval", "adder.yaml", "--store", "runs.db", "--eval-id", "../x"]) == 2
    assert "is not an eval id" in capsys.readouterr().err
    assert calls(folder) == []


def test_the_studio_eval_page_lists_shows_and_compares_evals(project, capsys):
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    from starlette.testclient import TestClient

    from rolecast.studio import create_app
    from rolecast.studio.source import RunSource

    folder, _ = project
    _, first = eval_json(capsys, "adder.yaml", "--store", "runs.db", "--repeat", "3")
    _, second = eval_json(capsys, "adder.yaml", "--store", "runs.db")
    assert json.loads((folder / "evals" / f"{first['eval_id']}.json").read_text())["passed_runs"] == 5
    source = RunSource(folder / "runs.db")
    try:
        client = TestClient(create_app(source, hosts=None, warm=False))
        listing = client.get("/evals")
        assert listing.status_code == 200 and first["eval_id"] in listing.text and second["eval_id"] in listing.text
        one = client.get("/evals", params={"id": first["eval_id"]})
        assert one.status_code == 200 and "83% (5/6)" in one.text and "2/3 (67%)" in one.text
        assert f'href="/runs/{first["cases"][1]["run_ids"][2]}"' in one.text  # each run links to its page
        assert "1 of 1 test(s) failed" in one.text  # the failing check of the third flaky run, with its reason
        both = client.get("/evals", params={"id": first["eval_id"], "with": second["eval_id"]})
        assert both.status_code == 200 and "5/6" in both.text and second["eval_id"] in both.text
        assert client.get("/evals", params={"id": "../runs"}).status_code == 404
    finally:
        source.close()


def test_a_factory_whose_team_names_its_own_run_is_an_evalset_error(project, capsys):
    folder, module = project
    (folder / "own.py").write_text(
        f"from {module} import build_team\n\ndef own():\n    build_team()  # the first team takes the run\n"
        "    return build_team()\n", encoding="utf-8")
    (folder / "own.yaml").write_text("name: own\nteam: own:own\ncases:\n  - id: a\n    idea: write add\n",
                                     encoding="utf-8")
    try:
        assert main(["eval", "own.yaml", "--store", "runs.db"]) == 2
    finally:
        sys.modules.pop("own", None)
    assert "not a Team that took the eval's run" in capsys.readouterr().err
    assert calls(folder) == []

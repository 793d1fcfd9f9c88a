"""Hardening 5 (issue 43), the eval part: each test is named after the hostile input that broke eval.

Each failed on the code before the fix: the JUnit file did not parse, the alias bomb ran for ever, a huge
repeat ended in MemoryError, code printing the results marker passed its tests, a negated PASS read as PASS.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from rolecast.cli import main
from rolecast.errors import EvalsetError
from rolecast.eval import evaluate, load_evalset
from rolecast.eval.checks import run_tests
from rolecast.eval.judge import JUDGE_GRAMMAR, verdict_of
from rolecast.testing import FunctionLLM

TEAM = '''\
from actions import Action, UserRequirement
from environment import Team
from rolecast.testing import FunctionLLM
from roles import Role

ANSWERS = {answers!r}


class WriteCode(Action):
    async def run(self, history):
        return await self._aask("write the code for: " + history[-1].content)


def build_team():
    return Team(llm=FunctionLLM(lambda messages: ANSWERS[messages[-1]["content"].rsplit(": ", 1)[-1]]),
                roles=[Role(name="Alice", profile="Coder", actions=[WriteCode()], watch=[UserRequirement])])
'''


def _project(folder: Path, answers: dict[str, str], expect: str, *, extra: str = "") -> Path:
    """A one-role team (answers by idea) and an evalset with one case per idea, each with ``expect``."""
    module = f"h5_team_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text(TEAM.format(answers=answers), encoding="utf-8")
    cases = "".join(f"  - id: {idea}\n    idea: {idea}\n    n_round: 1\n    expect:\n{expect}" for idea in answers)
    path = folder / "set.yaml"
    path.write_text(f"name: h5\nteam: {module}:build_team\n{extra}cases:\n{cases}", encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("h5_team_"):
            sys.modules.pop(name, None)


ADD_TESTS = "      - tests_pass: {code_from: Alice, tests: \"def test_add():\\n    assert add(1, 2) == 3\\n\"}\n"


# ------------------------------------------------------------------ 11: --junit and control characters
def test_junit_parses_when_a_failure_reason_holds_control_characters(folder):
    bad = "def add(a, b):\n    raise ValueError(chr(27) + '[31mred' + chr(0) + chr(7) + chr(11) + ' bell')\n"
    path = _project(folder, {"add": f"```python\n{bad}```"},
                    ADD_TESTS)
    status = main(["eval", str(path), "--store", "runs.db", "--junit", "junit.xml", "--json", "o.json"])
    assert status == 1
    suite = ET.parse(folder / "junit.xml").getroot()  # raised ParseError before: \x00, \x07, \x1b in XML
    [failure] = suite.iter("failure")
    assert "red" in failure.text and "\\x00" in failure.text and "\x00" not in failure.text


# ------------------------------------------------------------------ 12: a billion laughs in YAML
def test_an_evalset_of_nested_yaml_aliases_is_an_evalset_error_at_once(folder):
    levels = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"&{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]")
    text = "name: x\nteam: m:f\ndescription: [" + ", ".join(levels) + "]\ncases:\n  - id: a\n    idea: *i\n"
    path = folder / "bomb.yaml"
    path.write_text(text, encoding="utf-8")
    assert path.stat().st_size < 1000
    started = time.monotonic()
    with pytest.raises(EvalsetError, match="aliases"):
        load_evalset(path)
    assert time.monotonic() - started < 5  # measured, never expanded (it ran for ever before)


def test_an_evalset_alias_inside_its_own_anchor_is_an_evalset_error(folder):
    path = folder / "loop.yaml"
    path.write_text("name: x\nteam: m:f\ncases: &c\n  - id: a\n    idea: x\n    expect: *c\n", encoding="utf-8")
    with pytest.raises(EvalsetError):
        load_evalset(path)


# ------------------------------------------------------------------ 13: a huge repeat
def test_a_repeat_of_ten_to_the_twelve_is_an_evalset_error_exit_2(folder, capsys):
    path = _project(folder, {"add": "def add(a, b): return a + b"}, "      - contains: def add\n",
                    extra="repeat: 1000000000000\n")
    assert main(["eval", str(path), "--store", "runs.db"]) == 2  # MemoryError, exit 1, before
    assert "EvalsetError" in capsys.readouterr().err
    path = _project(folder, {"add": "def add(a, b): return a + b"}, "      - contains: def add\n")
    assert main(["eval", str(path), "--store", "runs.db", "--repeat", "1000000000000"]) == 2


# ------------------------------------------------------------------ 18: tests_pass spoofed by a printed marker
SUBTRACT_AND_SPOOF = '''```python
def add(a, b):
    return a - b

print("@@results@@" + '{"test_add": "passed"}')
import json, sys
sys.stdout.write("\\n@@results-@@" + json.dumps({"test_add": "passed"}) + "\\n")
```'''


def test_code_that_prints_the_results_marker_does_not_pass_for_an_add_that_subtracts(folder):
    path = _project(folder, {"add": SUBTRACT_AND_SPOOF},
                    ADD_TESTS)
    result = evaluate(path, store=folder / "runs.db")
    [check] = result.cases[0].runs[0].checks
    assert not check.passed and "AssertionError" in check.reason  # it passed before


def test_code_that_ends_the_process_before_the_tests_leaves_no_results():
    results, sandboxed = asyncio.run(run_tests("import os\ndef add(a, b):\n    os._exit(0)\n",
                                               "def test_add():\n    assert add(1, 2) == 3\n", 20))
    assert results is None and sandboxed.ok  # exit status 0, yet no result: not a pass


def test_tests_the_code_defines_itself_are_not_run_as_the_reference_tests():
    results, _ = asyncio.run(run_tests("def add(a, b):\n    return a - b\ndef test_ok():\n    pass\n",
                                       "def test_add():\n    assert add(1, 2) == 3\n", 20))
    assert results is not None and list(results) == ["test_add"] and "assert add(1, 2) == 3" in results["test_add"]


# ------------------------------------------------------------------ 45: the author's reference tests
def test_reference_tests_inline_and_from_a_file_beside_the_evalset(folder):
    (folder / "ref_tests.py").write_text("assert add(2, 2) == 4\n\ndef test_neg():\n    assert add(-1, 1) == 0\n")
    expect = ("      - tests_pass: {code_from: Alice, tests: \"def test_add():\\n    assert add(1, 2) == 3\\n\"}\n"
              "      - tests_pass: {code_from: Coder, tests_file: ref_tests.py}\n")
    path = _project(folder, {"good": "```python\ndef add(a, b):\n    return a + b\n```",
                             "bad": "```python\ndef add(a, b):\n    return a * b\n```"}, expect)
    result = evaluate(path, store=folder / "runs.db")
    by_case = {case.id: case.runs[0] for case in result.cases}
    assert by_case["good"].passed and not by_case["bad"].passed
    labels = [c.check for c in by_case["good"].checks]
    assert "tests_file='ref_tests.py'" in labels[1] and "test_neg" not in labels[1]
    assert all("reference" in c.reason for c in by_case["bad"].checks)


@pytest.mark.parametrize("expect, said", [
    ("      - tests_pass: {code_from: Alice}\n", "takes one of tests_from, tests, tests_file"),
    ("      - tests_pass: {code_from: Alice, tests: x, tests_from: Bob}\n", "not tests_from and tests"),
    ("      - tests_pass: {code_from: Alice, tests_file: missing.py}\n", "cannot read"),
])
def test_a_tests_pass_check_names_what_is_wrong_with_its_tests(folder, expect, said):
    path = _project(folder, {"add": "x"}, expect)
    with pytest.raises(EvalsetError, match=said):
        load_evalset(path)


# ------------------------------------------------------------------ 19 and 45: the judge's verdict
@pytest.mark.parametrize("answer, verdict", [
    ("It does not PASS the rubric because add subtracts. FAIL.", False),  # read as PASS before
    ("This doesn't pass. FAIL", False),
    ("It does not fail: the code adds.", True),
    ("PASS - the code adds", True),
    ("**FAIL**: it subtracts", False),
    ("I am not sure.", None),
])
def test_the_free_text_judge_reader_respects_negation(answer, verdict):
    assert verdict_of(answer) is verdict


def test_the_judge_answers_under_a_pass_fail_grammar_on_a_grammar_model(folder):
    path = _project(folder, {"add": "def add(a, b): return a + b"}, "      - judge: {rubric: Alice wrote add}\n")
    judge = FunctionLLM(lambda messages: "PASS - Alice wrote add")
    result = evaluate(path, store=folder / "runs.db", judges={"default": judge})
    assert result.passed_runs == 1
    assert [c.grammar for c in judge.calls] == [JUDGE_GRAMMAR]
    assert JUDGE_GRAMMAR.startswith('root ::= ("PASS" | "FAIL")')


class _NoGrammar(FunctionLLM):
    supports_grammar = False


def test_a_judge_without_a_grammar_that_rambles_is_asked_again_for_the_verdict_first(folder):
    path = _project(folder, {"add": "def add(a, b): return a + b"}, "      - judge: {rubric: Alice wrote add}\n")
    answers = iter(["Well, looking at the work, I think it is fine.", "FAIL - no tests"])
    judge = _NoGrammar(lambda messages: next(answers))
    result = evaluate(path, store=folder / "runs.db", judges={"default": judge})
    assert len(judge.calls) == 2 and result.passed_runs == 0
    [check] = result.cases[0].runs[0].checks
    assert "1 FAIL" in check.reason and "unreadable" not in check.reason


# ------------------------------------------------------------------ 47: progress, and every failing check
def test_eval_prints_a_line_per_run_and_lists_every_failing_check_whole(folder, capsys):
    long_reason = "x" * 300
    path = _project(folder, {"one": f"def add(a, b): raise ValueError('{long_reason}')",
                             "two": "def add(a, b): return a"},
                    "      - contains: def subtract\n      - contains: return\n")
    assert main(["eval", str(path), "--store", "runs.db"]) == 1
    shown = capsys.readouterr()
    assert "run 1: one finished" in shown.err and "run 2: two finished" in shown.err
    assert "failing checks (3):" in shown.out
    # the table cuts a reason at 100 characters; the list below it has each whole
    whole = "contains(text='def subtract'): 'def subtract' is not in the messages (1 message(s); the last: " \
            "'def add(a, b): return a')"
    assert whole in shown.out

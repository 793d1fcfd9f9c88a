"""The stock coding parts (issue 46): WriteCode, WriteTest, RunCode, DebugError, WriteCodeReview, the
Engineer and the QaEngineer, on scripted doubles. Model-written code runs in the sandbox only."""

from __future__ import annotations

import builtins

import pytest

from actions import DebugError, RunCode, WriteCode, WriteCodeReview, WriteTest
from actions.coding import (
    CODE_GRAMMAR,
    RunCodeResult,
    function_stub,
    until_function_ends,
    visible_examples,
    with_imports,
)
from environment import Team, coding_team
from rolecast.errors import UsageError
from rolecast.testing import FunctionLLM
from roles import Engineer, QaEngineer, final_code

REQUIREMENT = '''def add(a: int, b: int) -> int:
    """Add two numbers.
    >>> add(1, 2)
    3
    >>> add(-1, 1)
    0
    """
'''
# model code that marks this process if it ever ran here
BUGGY = "```python\nimport builtins\nbuiltins.ROLECAST_MODEL_CODE_RAN = True\ndef add(a, b):\n    return a - b\n```"
FIXED = "```python\ndef add(a, b):\n    return a + b\n```"
TESTS = "```python\ndef test_add():\n    assert add(2, 3) == 5\n```"


def scripted(blame: str = "0"):
    """A model playing both roles: buggy code first, the fix once it reads a bug report."""
    seen: list[tuple[str, str]] = []

    def answer(messages, call):
        prompt = messages[-1]["content"]
        if call.kind == "choose":
            seen.append(("choose", prompt))
            return blame
        if "## Bug report" in prompt:
            seen.append(("rewrite", prompt))
            return FIXED
        if "QA engineer" in prompt:
            seen.append(("tests", prompt))
            return TESTS
        seen.append(("code", prompt))
        return BUGGY

    return FunctionLLM(answer), seen


async def test_a_failing_test_leads_to_debug_error_then_a_rewrite_that_passes():
    llm, seen = scripted()
    team = coding_team(n_candidates=1, llm=llm)
    history = await team.run(n_round=8, idea=REQUIREMENT)
    steps = [(m.sent_from, m.cause_by.rsplit(".", 1)[-1]) for m in history if m.sent_from not in ("", "user")]
    assert steps == [("Alex", "WriteCode"), ("Edward", "DebugError"), ("Alex", "WriteCode"), ("Edward", "RunCode")]
    report = next(m for m in history if m.cause_by.endswith("DebugError"))
    assert "test_add" in report.content and "test_visible_examples" in report.content  # what failed, and why
    assert report.send_to == {"Alex"}
    assert "All tests passed (2)" in history[-1].content  # the model's test and the requirement's examples
    assert final_code(history) == "def add(a, b):\n    return a + b"
    assert [kind for kind, _ in seen] == ["code", "tests", "rewrite"]  # examples failed: no choice asked
    rewrite_prompt = seen[-1][1]
    assert "## Bug report" in rewrite_prompt and "return a - b" in rewrite_prompt
    assert not hasattr(builtins, "ROLECAST_MODEL_CODE_RAN")  # ran twice, never in this process


async def test_a_wrong_test_is_rewritten_and_run_again_without_bothering_the_engineer():
    bad_test = "```python\ndef test_add():\n    assert add(2, 2) == 5\n```"
    good_test = "```python\ndef test_add():\n    assert add(2, 2) == 4\n```"
    calls = {"tests": 0}

    def answer(messages, call):
        prompt = messages[-1]["content"]
        if call.kind == "choose":
            return "1"  # the test is wrong
        if "QA engineer" in prompt:
            calls["tests"] += 1
            return bad_test if calls["tests"] == 1 else good_test
        return FIXED

    history = await coding_team(n_candidates=1, llm=FunctionLLM(answer)).run(n_round=6, idea="write add(a, b)")
    steps = [m.cause_by.rsplit(".", 1)[-1] for m in history if m.sent_from not in ("", "user")]
    assert steps == ["WriteCode", "RunCode"] and "All tests passed (1)" in history[-1].content
    assert calls["tests"] == 2


async def test_the_qa_engineer_stops_after_test_round_allowed_runs():
    llm, _ = scripted()
    llm.fn = lambda messages, call: "0" if call.kind == "choose" else (TESTS if "QA engineer" in messages[-1]["content"]
                                                                       else BUGGY)
    team = coding_team(n_candidates=1, test_round_allowed=2, llm=llm)
    history = await team.run(n_round=12, idea="write add(a, b)")
    qa = [m for m in history if m.sent_from == "Edward"]
    assert len(qa) == 2 and "Bug report" in qa[0].content and "Bug report" in qa[1].content
    assert team.env.roles["Edward"].test_round == 2


async def test_write_code_samples_candidates_and_keeps_the_first_that_passes_the_visible_examples():
    answers = iter(["```python\ndef add(a, b):\n    return a * b\n```",  # add(1, 2) == 2: fails the examples
                    "```python\ndef add(a, b):\n    \"\"\"Add.\"\"\"\n```",  # no body
                    FIXED, "```python\ndef add(a, b):\n    return b + a\n```"])
    llm = FunctionLLM(lambda messages: next(answers))
    action = WriteCode(k=4)
    action.llm = llm
    code = await action.run(REQUIREMENT)
    assert code == "```python\ndef add(a, b):\n    return a + b\n```"
    assert len(llm.calls) == 3  # the fourth candidate was never asked
    # the requirement is a stub: the answer must start with it, and the model writes the body
    head = 'root ::= "```python\\n" "def add(a: int, b: int) -> int:'
    assert all(call.grammar.startswith(head) for call in llm.calls)
    assert "Write its body" in llm.calls[0].messages[-1]["content"]
    temperatures = [call.settings.temperature for call in llm.calls]
    assert temperatures[0] is None and temperatures[1:] == [0.8, 0.8]


async def test_a_bug_report_never_trades_working_code_for_a_rewrite_that_breaks_the_requirements_examples():
    # a small model's wrong test blamed the code: every rewrite it offers breaks add(1, 2) == 3
    broken = iter(["```python\ndef add(a, b):\n    return a * b\n```", "```python\ndef add(a, b):\n    return 5\n```"])
    llm = FunctionLLM(lambda messages: next(broken))
    action = WriteCode(k=2)
    action.llm = llm
    kept = await action.run(REQUIREMENT, FIXED, "test_add failed: assert add(2, 2) == 5")
    assert kept == FIXED and len(llm.calls) == 2  # both rewrites asked, both refused: the working code stays
    # a rewrite that still passes the examples is taken, as before
    llm = FunctionLLM(lambda messages: "```python\ndef add(a, b):\n    return b + a\n```")
    action.llm = llm
    assert "return b + a" in await action.run(REQUIREMENT, FIXED, "make it commutative")
    # code that fails the examples is rewritten by the ordinary sampling (the first that parses, at worst)
    llm = FunctionLLM(lambda messages: "```python\ndef add(a, b):\n    return 5\n```")
    action.llm = llm
    assert "return 5" in await action.run(REQUIREMENT, "def add(a, b):\n    return a - b", "add(1, 2) != 3")


async def test_a_rewrite_asks_every_other_candidate_afresh_with_seeds_of_its_own():
    # the 135M model shown its failing code wrote it again for four seeds out of five: half the candidates
    # come from the requirement alone, and none repeats a seed of the first round
    answers = iter(["```python\ndef add(a, b):\n    return a - b\n```"] * 3 + [FIXED])
    llm = FunctionLLM(lambda messages: next(answers))
    action = WriteCode(k=4)
    action.llm = llm
    fixed = await action.run(REQUIREMENT, "def add(a, b):\n    return a * b", "add(1, 2) == 2, not 3")
    assert fixed == FIXED and len(llm.calls) == 4
    prompts = [call.messages[-1]["content"] for call in llm.calls]
    assert ["Bug report" in p for p in prompts] == [True, False, True, False]
    assert "return a * b" not in prompts[1] and "Write its body" in prompts[1]
    seeds = [call.settings.seed for call in llm.calls]
    assert seeds[0] is None and len(set(seeds[1:])) == 3 and not set(seeds[1:]) & {1, 2, 3}


async def test_run_code_reports_outcome_stdout_and_stderr_from_the_sandbox():
    tests = "def test_add():\n    assert add(1, 1) == 2\ndef test_wrong():\n    assert add(1, 1) == 3\n"
    ran = await RunCode().run("def add(a, b):\n    print('adding')\n    return a + b\n", tests)
    assert isinstance(ran, RunCodeResult) and ran.outcome == "failed" and not ran.ok
    assert ran.passed == ["test_add"] and "AssertionError" in ran.failed["test_wrong"]
    assert "adding" in ran.stdout
    broken = await RunCode().run("def add(a, b) return", "def test_add():\n    pass\n")
    assert broken.outcome == "error" and "SyntaxError" in broken.stderr
    endless = await RunCode(timeout=1).run("while True:\n    pass\n", "def test_x():\n    pass\n")
    assert endless.outcome == "timeout"


async def test_write_test_adds_the_requirements_examples_and_drops_an_answer_without_tests():
    action = WriteTest()
    action.llm = FunctionLLM(lambda messages: "```python\nprint('no tests here')\n```")
    tests = await action.run(FIXED, REQUIREMENT)
    assert "def test_visible_examples" in tests and "no tests here" not in tests
    assert (await RunCode().run(FIXED, tests)).ok


async def test_code_review_keeps_lgtm_and_rewrites_lbtm():
    def reviewer(verdict):
        def answer(messages, call):
            if call.kind == "choose":
                return verdict
            return FIXED if "## Bug report" in messages[-1]["content"] else "add subtracts: it must add"
        return FunctionLLM(answer)

    review = WriteCodeReview()
    review.llm = reviewer("0")
    assert "a - b" in await review.run(BUGGY, "add two numbers")
    review.llm = reviewer("1")
    assert "a + b" in await review.run(BUGGY, "add two numbers")


async def test_debug_error_blames_the_code_when_the_requirements_own_examples_fail():
    action = DebugError()
    action.llm = FunctionLLM(lambda messages: FIXED)
    failed = RunCodeResult(outcome="failed", failed={"test_visible_examples": "AssertionError: add(1, 2)"})
    result = await action.run(BUGGY, TESTS, failed, REQUIREMENT)
    assert result.blame == "code" and "a + b" in result.code
    assert all(call.kind != "choose" for call in action.llm.calls)


def test_helpers_read_examples_and_imports_without_running_anything():
    assert visible_examples(REQUIREMENT) == ">>> add(1, 2)\n3\n\n>>> add(-1, 1)\n0\n"
    prompt = "from typing import List\n\ndef f(x: List[int]) -> int:\n    \"\"\"\n    >>> f([1])\n    1\n    \"\"\"\n"
    assert with_imports("def f(x):\n    return x[0]", prompt).startswith("from typing import List\n")
    assert visible_examples("no examples here") == ""


@pytest.mark.parametrize("make", [lambda: Engineer(n_candidates=0), lambda: QaEngineer(test_round_allowed=0)])
def test_bad_settings_are_usage_errors(make):
    with pytest.raises(UsageError):
        make()


def test_metagpt_style_imports():
    import actions
    import roles

    for name in ("WriteCode", "WriteTest", "RunCode", "DebugError", "WriteCodeReview"):
        assert getattr(actions, name).__doc__
    assert roles.Engineer.__doc__ and roles.QaEngineer.__doc__
    assert isinstance(coding_team(), Team)


def test_the_coding_team_example_finds_its_bug_and_ends_with_the_fix():
    import support

    out = support.run_example("examples/coding_team.py", "--scripted", "--no-console")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "best = n if best is None" in out.stdout and "sorted(numbers)" not in out.stdout.split("===")[-3]
    assert "All tests passed (2)" in out.stdout


def test_a_stub_requirement_is_continued_and_what_follows_the_body_is_cut():
    stub = function_stub(REQUIREMENT)
    assert stub.startswith("def add(a: int, b: int) -> int:") and function_stub("write add(a, b)") == ""
    answer = stub + "    return a + b\n\n# Example usage:\nprint(add(1, 2))\n"
    assert until_function_ends(answer, stub) == stub + "    return a + b\n"
    assert function_stub(FIXED.strip("`").removeprefix("python\n")) == ""  # a function with a body is no stub


async def test_write_code_asks_any_other_requirement_for_a_whole_fenced_block():
    llm = FunctionLLM(lambda messages: FIXED)
    action = WriteCode()
    action.llm = llm
    assert "a + b" in await action.run("write a function add(a, b) that adds two numbers")
    assert llm.calls[0].grammar == CODE_GRAMMAR

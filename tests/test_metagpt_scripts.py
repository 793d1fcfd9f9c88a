"""MetaGPT's tutorials (tests/metagpt_scripts/, imports changed only) run on a canned model."""

from __future__ import annotations

import io
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rolecast.context
from rolecast.testing import FunctionLLM

SCRIPTS = Path(__file__).resolve().parent / "metagpt_scripts"

CODE = "```python\ndef product(xs):\n    out = 1\n    for x in xs:\n        out *= x\n    return out\n\nprint(product([2, 3]))\n```"  # noqa: E501
TESTS = "```python\ndef test_product():\n    assert product([2, 3]) == 6\n```"


def canned(messages: list[dict[str, Any]]) -> str:
    """Answers as a helpful model would, by what the tutorial's prompt asks."""
    prompt = str(messages[-1]["content"])
    if "### INSTRUCTION" in prompt:
        return "```python\nclass SimpleTester(Role):\n    name: str = 'Tester'\n```"
    if "Write a python function" in prompt:
        return CODE
    if "unit tests using pytest" in prompt:
        return TESTS
    if "Review the test cases" in prompt:
        return "Add a test for an empty list."
    if "you are in a debate" in prompt:
        speaker = prompt.split("Suppose you are ", 1)[1].split(",", 1)[0]
        return f"I am {speaker}, and my opponent is wrong about this."
    raise AssertionError(f"the canned model was asked something unexpected: {prompt[:200]!r}")


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FunctionLLM]:
    """Every model the scripts' teams and roles would configure is this canned one."""
    llm = FunctionLLM(canned)
    monkeypatch.setattr(rolecast.context, "create_llm", lambda cfg, **kw: llm)
    monkeypatch.setattr("rolecast.context._DEFAULT", None)
    yield llm


def load(name: str) -> dict[str, Any]:
    return runpy.run_path(str(SCRIPTS / f"{name}.py"), run_name=f"tutorial_{name}")


def test_single_agent_writes_code_and_runs_it(model: FunctionLLM) -> None:
    result = load("build_customized_agent")["main"]()
    assert result.content.strip() == "6"  # the written code ran, in its own process
    assert result.cause_by.endswith("SimpleRunCode") and len(model.calls) == 1


async def test_multi_agent_team(model: FunctionLLM) -> None:
    history = await load("build_customized_multi_agents")["main"](n_round=3)
    assert [m.sent_from for m in history] == ["user", "Alice", "Bob", "Charlie"]
    assert "def product" in history[2].content or "test_product" in history[2].content
    assert history[3].content == "Add a test for an empty list."
    assert "def product" in model.calls[1].prompt  # the tester saw the coder's code


async def test_multi_agent_team_with_a_human_reviewer(model: FunctionLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("Test negative numbers too.\nexit\n"))
    history = await load("build_customized_multi_agents")["main"](n_round=4, add_human=True)
    assert [m.sent_from for m in history] == ["user", "Alice", "Bob", "Charlie", "Bob"]
    assert history[3].content == "Test negative numbers too."  # typed by the person, not the model
    assert not any("Review the test cases" in c.prompt for c in model.calls)
    assert "Test negative numbers too." in model.calls[-1].prompt  # the tester answered the person


def test_debate_takes_turns(model: FunctionLLM) -> None:
    history = load("debate")["main"]("Topic: climate change", n_round=4)
    assert [m.sent_from for m in history] == ["user", "Biden", "Trump", "Biden", "Trump"]
    assert history[2].content.startswith("I am Trump") and history[2].send_to == {"Biden"}
    assert "Biden: I am Biden" in model.calls[1].prompt  # Trump answered Biden's turn


async def test_agent_creator_writes_an_agent(model: FunctionLLM, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    msg = await load("agent_creator")["main"]()
    assert "class SimpleTester(Role)" in msg.content
    assert "class SimpleTester(Role)" in (tmp_path / "workspace" / "agent_created_agent.py").read_text()
    assert "class RunnableCoder(Role)" in model.calls[0].prompt  # shown the single-agent tutorial


async def test_a_serialized_team_is_resumed_and_finishes_the_work(model: FunctionLLM, tmp_path: Path) -> None:
    history = await load("serialize_team")["main"](str(tmp_path / "team"), n_round=4)
    resumed_calls = len(model.calls)
    straight = await load("build_customized_multi_agents")["main"](n_round=4)
    assert [(m.sent_from, m.content) for m in history] == [(m.sent_from, m.content) for m in straight]
    assert [m.sent_from for m in history] == ["user", "Alice", "Bob", "Charlie", "Bob"]
    assert (tmp_path / "team" / "team.json").is_file()
    assert resumed_calls == len(model.calls) - resumed_calls  # nothing was asked twice across the restore

"""The core examples run end to end, with a scripted model, as a user would start them."""

from __future__ import annotations

import pytest
import support


def run_example(*args: str) -> str:
    out = support.run_example(*args)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_multi_agents_example_runs_coder_tester_reviewer():
    out = run_example(
        "examples/build_customized_multi_agents.py", "--scripted", "write a function that adds two numbers"
    )
    assert "--- Alice (SimpleWriteCode)\ndef add(a, b):" in out
    assert "--- Bob (SimpleWriteTest)" in out
    assert "--- Charlie (SimpleWriteReview)" in out
    assert "of $3.0000" in out


def test_debate_example_alternates_speakers():
    out = run_example("examples/debate.py", "--scripted", "--n-round", "4")
    speakers = [line[4:] for line in out.splitlines() if line.startswith("--- ")]
    assert speakers == ["user", "Ada", "Ben", "Ada", "Ben"]


def test_customized_agent_example_runs_the_code_in_the_sandbox():
    out = run_example("examples/build_customized_agent.py", "--scripted")
    assert out.rstrip().endswith("--- RunnableCoder (SimpleRunCode)\n55")


@pytest.mark.parametrize("command", [["info"]])
def test_cli_info_names_the_provider(command):
    out = run_example("-m", "rolecast.cli", *command)
    assert "provider" in out

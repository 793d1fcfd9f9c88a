"""A coder, a tester and a reviewer working on one idea (MetaGPT's multi-agent tutorial).

    python examples/build_customized_multi_agents.py "write a function that adds two numbers"

Runs on the configured model: OPENAI_API_KEY (and OPENAI_BASE_URL / ROLECAST_MODEL)
if set, else the embedded local model. ``--scripted`` uses a canned model instead.
"""

from __future__ import annotations

import argparse
import asyncio
import re

from loguru import logger

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from rolecast import enable_logging
from rolecast.testing import FunctionLLM
from roles import Role


def parse_code(rsp: str) -> str:
    match = re.search(r"```(?:python)?\s*\n?(.*?)```", rsp, re.DOTALL)
    return (match.group(1) if match else rsp).strip()


class SimpleWriteCode(Action):
    PROMPT_TEMPLATE: str = """
Write a python function that can {instruction}.
Return ```python your_code_here ``` with NO other texts,
your code:
"""
    name: str = "SimpleWriteCode"

    async def run(self, instruction: str) -> str:
        rsp = await self._aask(self.PROMPT_TEMPLATE.format(instruction=instruction))
        return parse_code(rsp)


class SimpleCoder(Role):
    name: str = "Alice"
    profile: str = "SimpleCoder"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._watch([UserRequirement])
        self.set_actions([SimpleWriteCode])


class SimpleWriteTest(Action):
    PROMPT_TEMPLATE: str = """
Context: {context}
Write {k} unit tests using pytest for the given function, assuming you have imported it.
Return ```python your_code_here ``` with NO other texts,
your code:
"""
    name: str = "SimpleWriteTest"

    async def run(self, context: str, k: int = 3) -> str:
        rsp = await self._aask(self.PROMPT_TEMPLATE.format(context=context, k=k))
        return parse_code(rsp)


class SimpleTester(Role):
    name: str = "Bob"
    profile: str = "SimpleTester"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.set_actions([SimpleWriteTest])
        self._watch([SimpleWriteCode, SimpleWriteReview])

    async def _act(self) -> Message:
        logger.info(f"{self._setting}: to do {self.rc.todo}({self.rc.todo.name})")
        todo = self.rc.todo
        context = self.get_memories()  # all memories as context
        code_text = await todo.run(context, k=3)
        return Message(content=code_text, role=self.profile, cause_by=type(todo))


class SimpleWriteReview(Action):
    PROMPT_TEMPLATE: str = """
Context: {context}
Review the test cases and provide one critical comment:
"""
    name: str = "SimpleWriteReview"

    async def run(self, context: str) -> str:
        return await self._aask(self.PROMPT_TEMPLATE.format(context=context))


class SimpleReviewer(Role):
    name: str = "Charlie"
    profile: str = "SimpleReviewer"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.set_actions([SimpleWriteReview])
        self._watch([SimpleWriteTest])


def scripted_model() -> FunctionLLM:
    """A canned model that answers each of the three prompts plausibly."""

    def answer(messages: list[dict]) -> str:
        prompt = messages[-1]["content"]
        if "Write a python function" in prompt:
            return "```python\ndef add(a, b):\n    return a + b\n```"
        if "unit tests" in prompt:
            return (
                "```python\ndef test_add():\n    assert add(1, 2) == 3\n\n"
                "def test_add_negative():\n    assert add(-1, -1) == -2\n```"
            )
        return "The tests miss floating point inputs such as add(0.1, 0.2)."

    return FunctionLLM(answer)


async def main(idea: str, investment: float = 3.0, n_round: int = 5, scripted: bool = False) -> list[Message]:
    team = Team(llm=scripted_model() if scripted else None)
    team.hire([SimpleCoder(), SimpleTester(), SimpleReviewer()])
    team.invest(investment=investment)
    team.run_project(idea)
    history = await team.run(n_round=n_round)
    print("\n=== conversation ===")
    for msg in history:
        print(f"--- {msg.sent_from or msg.role} ({msg.cause_by.rsplit('.', 1)[-1]})\n{msg.content}\n")
    print("=== cost ===\n" + team.cost_manager.summary())
    return history


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("idea", nargs="?", default="write a function that calculates the product of a list")
    parser.add_argument("--investment", type=float, default=3.0)
    parser.add_argument("--n-round", type=int, default=5)
    parser.add_argument("--scripted", action="store_true", help="use a canned model (no API key, no local model)")
    args = parser.parse_args()
    enable_logging("INFO")
    asyncio.run(main(args.idea, args.investment, args.n_round, args.scripted))

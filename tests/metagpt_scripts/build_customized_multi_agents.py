"""A coder, a tester and a reviewer — the reviewer optionally a person (MetaGPT's multi-agent tutorial)."""

import asyncio
import re
import sys

from loguru import logger

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from roles import Role


def parse_code(rsp):
    match = re.search(r"```python(.*)```", rsp, re.DOTALL)
    return match.group(1) if match else rsp


class SimpleWriteCode(Action):
    PROMPT_TEMPLATE: str = """
    Write a python function that can {instruction}.
    Return ```python your_code_here ``` with NO other texts,
    your code:
    """
    name: str = "SimpleWriteCode"

    async def run(self, instruction: str):
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

    async def run(self, context: str, k: int = 3):
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
        context = self.get_memories()  # everything remembered is the context
        code_text = await todo.run(context, k=5)
        return Message(content=code_text, role=self.profile, cause_by=type(todo))


class SimpleWriteReview(Action):
    PROMPT_TEMPLATE: str = """
    Context: {context}
    Review the test cases and provide one critical comments:
    """
    name: str = "SimpleWriteReview"

    async def run(self, context: str):
        return await self._aask(self.PROMPT_TEMPLATE.format(context=context))


class SimpleReviewer(Role):
    name: str = "Charlie"
    profile: str = "SimpleReviewer"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.set_actions([SimpleWriteReview])
        self._watch([SimpleWriteTest])


async def main(
    idea: str = "write a function that calculates the product of a list",
    investment: float = 3.0,
    n_round: int = 5,
    add_human: bool = False,
):
    logger.info(idea)
    team = Team()
    team.hire([SimpleCoder(), SimpleTester(), SimpleReviewer(is_human=add_human)])
    team.invest(investment=investment)
    team.run_project(idea)
    return await team.run(n_round=n_round)


if __name__ == "__main__":
    asyncio.run(main(add_human="--add-human" in sys.argv))

"""An agent that writes agents, shown the single-agent tutorial as its example (MetaGPT's agent creator)."""

import re
from pathlib import Path

from loguru import logger

from actions import Action
from memory import Message
from roles import Role

EXAMPLE_CODE_FILE = Path(__file__).with_name("build_customized_agent.py")
MULTI_ACTION_AGENT_CODE_EXAMPLE = EXAMPLE_CODE_FILE.read_text()
WORKSPACE = Path("workspace")


class CreateAgent(Action):
    PROMPT_TEMPLATE: str = """
    ### BACKGROUND
    You are using an agent framework to write agents capable of different actions;
    this example shows how it is used:
    ### EXAMPLE STARTS AT THIS LINE
    {example}
    ### EXAMPLE ENDS AT THIS LINE
    ### TASK
    Now create an agent with suitable actions for the instruction; think about the
    PROMPT_TEMPLATE of each action and when to call self._aask().
    ### INSTRUCTION
    {instruction}
    ### YOUR CODE
    Return ```python your_code_here ``` with NO other texts, your code:
    """

    async def run(self, example: str, instruction: str):
        prompt = self.PROMPT_TEMPLATE.format(example=example, instruction=instruction)
        rsp = await self._aask(prompt)
        return CreateAgent.parse_code(rsp)

    @staticmethod
    def parse_code(rsp):
        match = re.search(r"```python(.*)```", rsp, re.DOTALL)
        code_text = match.group(1) if match else ""
        WORKSPACE.mkdir(parents=True, exist_ok=True)
        (WORKSPACE / "agent_created_agent.py").write_text(code_text)
        return code_text


class AgentCreator(Role):
    name: str = "Matrix"
    profile: str = "AgentCreator"
    agent_template: str = MULTI_ACTION_AGENT_CODE_EXAMPLE

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.set_actions([CreateAgent])

    async def _act(self) -> Message:
        logger.info(f"{self._setting}: to do {self.rc.todo}({self.rc.todo.name})")
        todo = self.rc.todo
        msg = self.rc.memory.get()[-1]
        instruction = msg.content
        code_text = await CreateAgent().run(example=self.agent_template, instruction=instruction)
        return Message(content=code_text, role=self.profile, cause_by=todo)


async def main():
    creator = AgentCreator(agent_template=MULTI_ACTION_AGENT_CODE_EXAMPLE)
    msg = """
    Write an agent called SimpleTester that will take any code snippet (str) and do the following:
    1. write a testing code (str) for testing the given code snippet, save the testing code as a .py file;
    2. run the testing code.
    You can use pytest as the testing framework.
    """
    return await creator.run(msg)


if __name__ == "__main__":
    import asyncio

    asyncio.run(main())

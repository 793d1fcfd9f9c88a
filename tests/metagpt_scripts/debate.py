"""Two debaters answering each other (MetaGPT's debate tutorial)."""

import asyncio
import sys
from typing import Any

from loguru import logger

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from roles import Role


class SpeakAloud(Action):
    """Speak out in a debate."""

    PROMPT_TEMPLATE: str = """
    ## BACKGROUND
    Suppose you are {name}, you are in a debate with {opponent_name}.
    ## DEBATE HISTORY
    Previous rounds:
    {context}
    ## YOUR TURN
    Now it's your turn: answer your opponent's latest argument, state and defend your position,
    in 80 words, in {name}'s rhetoric and viewpoints. You will argue:
    """
    name: str = "SpeakAloud"

    async def run(self, context: str, name: str, opponent_name: str):
        prompt = self.PROMPT_TEMPLATE.format(context=context, name=name, opponent_name=opponent_name)
        return await self._aask(prompt)


class Debator(Role):
    name: str = ""
    profile: str = ""
    opponent_name: str = ""

    def __init__(self, **data: Any):
        super().__init__(**data)
        self.set_actions([SpeakAloud])
        self._watch([UserRequirement, SpeakAloud])

    async def _observe(self) -> int:
        await super()._observe()
        # only what is sent to me: the topic, then my opponent's turns
        self.rc.news = [msg for msg in self.rc.news if msg.send_to == {self.name}]
        return len(self.rc.news)

    async def _act(self) -> Message:
        logger.info(f"{self._setting}: to do {self.rc.todo}({self.rc.todo.name})")
        todo = self.rc.todo
        memories = self.get_memories()
        context = "\n".join(f"{msg.sent_from}: {msg.content}" for msg in memories)
        rsp = await todo.run(context=context, name=self.name, opponent_name=self.opponent_name)
        msg = Message(
            content=rsp,
            role=self.profile,
            cause_by=type(todo),
            sent_from=self.name,
            send_to=self.opponent_name,
        )
        self.rc.memory.add(msg)
        return msg


async def debate(idea: str, investment: float = 3.0, n_round: int = 5):
    """Two candidates, one topic: the first one speaks, then they take turns."""
    biden = Debator(name="Biden", profile="Democrat", opponent_name="Trump")
    trump = Debator(name="Trump", profile="Republican", opponent_name="Biden")
    team = Team()
    team.hire([biden, trump])
    team.invest(investment)
    team.run_project(idea, send_to="Biden")  # Biden speaks first
    return await team.run(n_round=n_round)


def main(idea: str, investment: float = 3.0, n_round: int = 10):
    return asyncio.run(debate(idea, investment, n_round))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "Topic: climate change")

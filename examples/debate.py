"""Two debaters answering each other, addressed with ``send_to`` (MetaGPT's debate example).

    python examples/debate.py "Should cities ban cars from their centres?"

Runs on the configured model (API key or the embedded local model); ``--scripted``
uses a canned model.
"""

from __future__ import annotations

import argparse
from typing import Any

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from rolecast import enable_logging
from rolecast.observe.console import run_script
from rolecast.testing import FunctionLLM
from roles import Role


class SpeakAloud(Action):
    PROMPT_TEMPLATE: str = """
## BACKGROUND
Suppose you are {name}, you are in a debate with {opponent_name}.
## DEBATE HISTORY
Previous rounds:
{context}
## YOUR TURN
Now it's your turn, you should closely respond to your opponent's latest argument, state your position, defend your arguments, and attack your opponent's arguments,
craft a strong and emotional response in 80 words, in {name}'s rhetoric and viewpoints, your will argue:
"""  # noqa: E501
    name: str = "SpeakAloud"

    async def run(self, context: str, name: str, opponent_name: str) -> str:
        prompt = self.PROMPT_TEMPLATE.format(context=context, name=name, opponent_name=opponent_name)
        return await self._aask(prompt)


class Debater(Role):
    name: str = ""
    profile: str = ""
    opponent_name: str = ""

    def __init__(self, **data: Any):
        super().__init__(**data)
        self.set_actions([SpeakAloud])
        self._watch([UserRequirement, SpeakAloud])

    async def _observe(self) -> int:
        await super()._observe()
        # only what is addressed to me: the topic (first speaker) and my opponent's turns
        self.rc.news = [msg for msg in self.rc.news if msg.send_to == {self.name}]
        return len(self.rc.news)

    async def _act(self) -> Message:
        todo = self.rc.todo
        context = "\n".join(f"{msg.sent_from}: {msg.content}" for msg in self.get_memories())
        rsp = await todo.run(context=context, name=self.name, opponent_name=self.opponent_name)
        msg = Message(
            content=rsp, role=self.profile, sent_from=self.name, cause_by=SpeakAloud, send_to=self.opponent_name
        )
        self.rc.memory.add(msg)
        return msg


def scripted_model(topic: str) -> FunctionLLM:
    """A canned model: each debater argues its side of ``topic``, turn by turn."""
    turns = {"Ada": 0, "Ben": 0}

    def answer(messages: list[dict]) -> str:
        prompt = messages[-1]["content"]
        speaker = "Ada" if "Suppose you are Ada" in prompt else "Ben"
        turns[speaker] += 1
        side = "for" if speaker == "Ada" else "against"
        return f"{speaker}, turn {turns[speaker]}: on '{topic}', I argue {side}, and my opponent is wrong."

    return FunctionLLM(answer)


async def main(
    topic: str, investment: float = 3.0, n_round: int = 4, scripted: bool = False, console: bool = True,
    compaction: bool = False, llm: Any = None,
) -> list[Message]:
    """The debate; ``compaction``: older turns summarised once a debater's memory passes 0.6 of the
    window (its ``get_memories()`` then reads the summary and the newest turns: long runs fit)."""
    ada = Debater(name="Ada", profile="Optimist", opponent_name="Ben")
    ben = Debater(name="Ben", profile="Skeptic", opponent_name="Ada")
    team = Team(llm=llm or (scripted_model(topic) if scripted else None), compaction=compaction or None)
    team.hire([ada, ben])
    team.invest(investment)
    team.run_project(topic, send_to="Ada")  # Ada speaks first
    history = await team.run(n_round=n_round, console=console)
    if not console:  # the console showed the debate as it happened
        print("\n=== debate ===")
        for msg in history:
            print(f"--- {msg.sent_from}\n{msg.content}\n")
        print("=== cost ===\n" + team.cost_manager.summary())
    return history


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topic", nargs="?", default="Should cities ban cars from their centres?")
    parser.add_argument("--investment", type=float, default=3.0)
    parser.add_argument("--n-round", type=int, default=4)
    parser.add_argument("--scripted", action="store_true", help="use a canned model")
    parser.add_argument("--no-console", action="store_true", help="no live view; print the debate at the end")
    parser.add_argument("--compaction", action="store_true", help="summarise older turns: long runs fit the window")
    args = parser.parse_args()
    enable_logging("INFO" if args.no_console else "WARNING")  # with the live view, logs would only clutter it
    run_script(main(args.topic, args.investment, args.n_round, args.scripted, console=not args.no_console,
                    compaction=args.compaction))

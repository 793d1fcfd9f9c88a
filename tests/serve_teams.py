"""Teams for the serving tests (``rolecast serve tests.serve_teams:NAME``), on scripted models.

* :func:`pair` — a Writer answers the idea, a Reviewer answers the Writer: two messages, two rounds.
* :func:`approval` — a tool agent whose calculator call waits for a deferred approval.
* :func:`gated` — a Writer whose model waits until the file ``$GATE`` exists (a run to cancel, or
  to kill mid-call); each call it makes is appended to ``$CALLS`` first.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from actions import Action, UserRequirement, calculator
from environment import Team
from memory import Message
from rolecast.control.approval import Approval
from rolecast.llm.base import Completion, ToolCall
from rolecast.testing import FunctionLLM
from roles import Role, ToolAgent


class Write(Action):
    name: str = "Write"

    async def run(self, history: list[Message]) -> str:
        return await self._aask(f"Write about: {history[-1].content}")


class Review(Action):
    name: str = "Review"

    async def run(self, history: list[Message]) -> str:
        return await self._aask(f"Review: {history[-1].content}")


class Writer(Role):
    name: str = "Writer"
    profile: str = "writer"
    goal: str = "write a short answer to the idea"

    def __init__(self, **data: Any):
        super().__init__(**data)
        self.set_actions([Write])
        self._watch([UserRequirement])


class Reviewer(Role):
    name: str = "Reviewer"
    profile: str = "reviewer"
    goal: str = "review the writer's answer"

    def __init__(self, **data: Any):
        super().__init__(**data)
        self.set_actions([Review])
        self._watch([Write])


def _answer(messages: list[dict[str, Any]]) -> str:
    last = str(messages[-1]["content"])
    if "Review:" in last:
        return "reviewed: " + last.split("Review:", 1)[1].strip()[:200]
    return "written: " + last.split("Write about:", 1)[-1].strip()[:200]


def pair() -> Team:
    return Team(llm=FunctionLLM(_answer, model="gpt-4o-mini"), roles=[Writer(), Reviewer()],
                env_desc="a writer and a reviewer")


def approval() -> Team:
    def answer(messages: list[dict[str, Any]]) -> Completion:
        if messages[-1].get("role") == "tool":
            return Completion(text=f"the calculator says {messages[-1]['content']}")
        return Completion(text="", tool_calls=[ToolCall("c1", "calculator", '{"expression": "6 * 7"}')])

    team = Team(llm=FunctionLLM(answer, model="gpt-4o-mini"),
                roles=[ToolAgent(name="Calc", tools=[calculator], style="function_calling")])
    Approval.deferred().install(team.context.hooks)
    return team


def gated() -> Team:
    gate, calls = os.environ.get("GATE", ""), os.environ.get("CALLS", "")
    pause = float(os.environ.get("GATE_POLL", "0.05"))

    async def answer(messages: list[dict[str, Any]]) -> str:
        if calls:
            with open(calls, "a", encoding="utf-8") as f:
                f.write(str(messages[-1]["content"])[:60].replace("\n", " ") + "\n")
        while not gate or not Path(gate).exists():  # noqa: ASYNC110 (another process opens the gate: a file)
            await asyncio.sleep(pause)
        return _answer(messages)

    return Team(llm=FunctionLLM(answer, model="gpt-4o-mini"), roles=[Writer()], env_desc="a gated writer")


class Close(Action):
    name: str = "Close"

    async def run(self, history: list[Message]) -> str:
        return await self._aask(f"Close on: {history[-1].content}")


class Closer(Role):
    name: str = "Closer"
    profile: str = "closer"

    def __init__(self, **data: Any):
        from roles.remote import AskRemote

        super().__init__(**data)
        self.set_actions([Close])
        self._watch([AskRemote])


def hiring(url: str, store: str, run_id: str) -> Team:
    """A team that hires the agent at ``url`` (a RemoteAgent) and a Closer who answers what it said;
    the Closer's model waits for ``$GATE_A`` and notes each call in ``$CALLS_A``."""
    from roles import RemoteAgent

    gate, calls = os.environ.get("GATE_A", ""), os.environ.get("CALLS_A", "")

    async def answer(messages: list[dict[str, Any]]) -> str:
        if calls:
            with open(calls, "a", encoding="utf-8") as f:
                f.write("call\n")
        while gate and not Path(gate).exists():  # noqa: ASYNC110 (another process opens the gate: a file)
            await asyncio.sleep(0.05)
        return "closed: " + str(messages[-1]["content"]).split("Close on:", 1)[-1].strip()

    return Team(llm=FunctionLLM(answer, model="gpt-4o-mini"), store=store, run_id=run_id,
                roles=[RemoteAgent(url=url, name="Remote"), Closer()])

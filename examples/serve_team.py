"""Serve a team over A2A and HTTP, then hire it from another team.

Serve it (each task a durable run in ./.rolecast/runs.db)::

    rolecast serve examples.serve_team:build_team                 # the configured model
    rolecast serve examples.serve_team:build_scripted_team        # a canned model: no model needed

Then, from another shell, a second team hires the first as one of its roles (a RemoteAgent)::

    python examples/serve_team.py --hire http://127.0.0.1:8766 "a short poem about rivers"
    python examples/serve_team.py --hire http://127.0.0.1:8766 --scripted "a short poem about rivers"

Or any A2A client (the official a2a-sdk's, Google ADK's RemoteA2aAgent …), or plain HTTP:
``curl -X POST localhost:8766/api/runs -H 'content-type: application/json' -d '{"idea": "..."}'``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # (run as a script from anywhere)

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from rolecast.observe.console import run_script
from rolecast.testing import FunctionLLM
from roles import RemoteAgent, Role


class Draft(Action):
    name: str = "Draft"

    async def run(self, history: list[Message]) -> str:
        return await self._aask(f"Write a first draft, in at most five lines, of: {history[-1].content}")


class Polish(Action):
    name: str = "Polish"

    async def run(self, history: list[Message]) -> str:
        return await self._aask(f"Improve this draft; answer with the improved text only:\n{history[-1].content}")


class Drafter(Role):
    name: str = "Drafter"
    profile: str = "writer"
    goal: str = "write a first draft of what the user asks for"

    def __init__(self, **data: Any):
        super().__init__(**data)
        self.set_actions([Draft])
        self._watch([UserRequirement])


class Editor(Role):
    name: str = "Editor"
    profile: str = "editor"
    goal: str = "polish the draft into the final text"

    def __init__(self, **data: Any):
        super().__init__(**data)
        self.set_actions([Polish])
        self._watch([Draft])


def _canned(messages: list[dict[str, Any]]) -> str:
    last = str(messages[-1]["content"])
    if last.startswith("Improve this draft"):
        return last.split("\n", 1)[1].replace("a first draft", "the final text")
    if last.startswith("Write a first draft"):
        return "a first draft of " + last.split(": ", 1)[1]
    return "noted: " + last[:200]


def build_team() -> Team:
    """A drafter and an editor on the configured model (a fresh team per task)."""
    return Team(roles=[Drafter(), Editor()], env_desc="a drafter and an editor who write short texts")


def build_scripted_team() -> Team:
    """The same team on a canned model (rolecast.testing): try the server without a model."""
    return Team(llm=FunctionLLM(_canned, model="scripted"), roles=[Drafter(), Editor()],
                env_desc="a drafter and an editor who write short texts (canned answers)")


async def hire(url: str, idea: str, scripted: bool, token: str | None) -> None:
    """A team whose writers are the team served at ``url``; its own editor has the last word."""
    team = Team(llm=FunctionLLM(_canned, model="scripted") if scripted else None,
                roles=[RemoteAgent(url=url, name="Writers", token=token), _Closer()])
    history = await team.run(n_round=3, idea=idea, console=True)
    print(history[-1].content)


class _Closer(Editor):
    name: str = "Closer"

    def __init__(self, **data: Any):
        from roles.remote import AskRemote

        super().__init__(**data)
        self._watch([AskRemote])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("idea")
    parser.add_argument("--hire", required=True, metavar="URL", help="the served team's address")
    parser.add_argument("--token", help="its access token, if it has one")
    parser.add_argument("--scripted", action="store_true", help="this team's own role on a canned model")
    args = parser.parse_args()
    run_script(hire(args.hire, args.idea, args.scripted, args.token))


if __name__ == "__main__":
    main()

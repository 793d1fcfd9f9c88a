"""One round of five roles on an instant model that kills its own process at its KILL_AT-th call:
``python crash_in_turn.py STORE RUN_ID CALLS_FILE [KILL_AT]``.

Every role's turn runs in the same turn of the event loop, so when the process dies, the calls
answered before the fatal one were used in that very turn (their answers became messages). Each
call reaching the "model" is appended to CALLS_FILE first. Prints the history as JSON lines.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from actions import Action, UserRequirement
from environment import Team
from rolecast.testing import FunctionLLM
from roles import Role


class Answer(Action):
    async def run(self, history):
        return await self._aask(f"{self.name} answers: {history[-1].content}")


def main() -> None:
    store, run_id, calls_file = sys.argv[1], sys.argv[2], sys.argv[3]
    kill_at = int(sys.argv[4]) if len(sys.argv) > 4 else 0

    def answer(messages):
        prompt = messages[-1]["content"]
        with open(calls_file, "a", encoding="utf-8") as f:
            f.write(prompt + "\n")
        with open(calls_file, encoding="utf-8") as f:
            made = len(f.read().splitlines())
        if made == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # in flight: asked, not answered
        return f"done: {prompt}"

    roles = [Role(name=f"R{i}", actions=[Answer(name=f"Answer{i}")], watch=[UserRequirement]) for i in range(5)]
    team = Team(llm=FunctionLLM(answer), roles=roles, store=store, run_id=run_id)
    history = team.run_sync(n_round=1, idea="go")
    for m in history:
        print(json.dumps({"from": m.sent_from, "content": m.content}))


if __name__ == "__main__":
    main()

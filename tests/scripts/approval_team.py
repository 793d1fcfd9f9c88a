"""A team run with a deferred approval, for the approval tests:
``python approval_team.py STORE RUN_ID CALLS_FILE``.

One tool agent asks the model, which calls the calculator with ``6 * 7``; the call needs approval
(``Approval.deferred()``), so the first run pauses and exits with the waiting status (3). Every
model call is appended to CALLS_FILE before it is answered (a test counts the calls that reached
the "model"). Prints the history as JSON lines, then ``{"status": ...}``; exits with
``history.exit_code``.
"""

from __future__ import annotations

import json
import sys

from actions import calculator
from environment import Team
from rolecast.control.approval import Approval
from rolecast.llm.base import Completion, ToolCall
from rolecast.testing import FunctionLLM
from roles import ToolAgent


def main() -> int:
    store, run_id, calls_file = sys.argv[1], sys.argv[2], sys.argv[3]

    def answer(messages):
        last = messages[-1]
        with open(calls_file, "a", encoding="utf-8") as f:
            f.write(json.dumps(last.get("content"))[:80] + "\n")
        if last.get("role") == "tool":
            return Completion(text=f"the calculator says {last['content']}")
        return Completion(text="", tool_calls=[ToolCall("c1", "calculator", '{"expression": "6 * 7"}')])

    agent = ToolAgent(name="Calc", tools=[calculator], style="function_calling")
    team = Team(llm=FunctionLLM(answer, model="gpt-4o-mini"), roles=[agent], store=store, run_id=run_id)
    Approval.deferred().install(team.context.hooks)
    history = team.run_sync(n_round=3, idea="what is 6 times 7?")
    for m in history:
        print(json.dumps({"from": m.sent_from, "content": m.content}))
    print(json.dumps({"status": history.status, "pending": list(history.pending)}))
    return history.exit_code


if __name__ == "__main__":
    raise SystemExit(main())

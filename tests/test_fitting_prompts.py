"""The framework's own prompts fit the window by construction: the planners' prompts and plan_and_act's
task results, ActionNode.fill's context, the review of a task, and long-term memory's choice. Each keeps
what is never cut (instruction, format, answer room), the newest part that fits, says how many were left
out, and logs it; a long input that made these calls a ContextOverflow before now completes."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from actions import Action
from actions.action_node import ActionNode
from actions.plan_and_act import ReviewTask, Task
from environment import Team
from memory import LongTermMemory, Message
from rolecast.accounting.cost import max_prompt_tokens
from rolecast.llm.embedders import HashingEmbedder
from rolecast.llm.types import messages_text
from rolecast.llm.window import request_tokens
from rolecast.runs.events import HISTORY_FITTED
from rolecast.runs.store import SQLiteRunStore
from rolecast.testing import Call, FunctionLLM, ScriptedLLM
from roles import Role

FILLER = "the quarterly numbers were discussed again at length, with no decision taken; "


def fits(llm: Any, window: int) -> bool:
    """Every recorded request's prompt (schema or tools included) and answer room fit ``window``, as the
    check before sending counts them."""
    sizes = [max_prompt_tokens(messages_text(c.messages), len(c.messages))
             + request_tokens(llm, tools=c.tools, schema=c.structured.schema if c.structured else None)
             + c.settings.max_tokens for c in llm.calls]
    return bool(sizes) and max(sizes) <= window


def fitted_events(store: SQLiteRunStore, run_id: str) -> list:
    return list(store.events(run_id, [HISTORY_FITTED]))


# ------------------------------------------------------------------ plan_and_act
class Step(Action):
    """A task action that asks the model about what it was handed."""

    async def run(self, history: list[Message]) -> str:
        return await self._aask("\n".join(str(m) for m in history) + "\nDo the task above.")


PLAN = json.dumps({"tasks": [
    {"task_id": "1", "dependent_task_ids": [], "instruction": "collect the figures", "action": "Collect"},
    {"task_id": "2", "dependent_task_ids": [], "instruction": "collect the comments", "action": "Collect"},
    {"task_id": "3", "dependent_task_ids": ["1", "2"], "instruction": "write the report", "action": "Report"},
]})


async def test_plan_and_act_on_a_long_history_fits_the_plan_prompt_and_the_task_results(tmp_path):
    window = 3000
    seen: list[str] = []

    def model(messages: list[dict[str, Any]], call: Call) -> str:
        prompt = messages[-1]["content"]
        seen.append(prompt)
        if call.structured is not None:
            return PLAN
        return ("Result: " + FILLER * 40) if "write the report" not in prompt else "The report."

    llm = FunctionLLM(model, context_window=window)
    store = SQLiteRunStore(tmp_path / "runs.db")
    ada = Role(name="Ada", profile="Analyst", actions=[Step(name="Collect"), Step(name="Report")],
               react_mode="plan_and_act")
    for i in range(120):  # a long conversation before the plan: far more than the window holds
        ada.remember(Message(content=f"note {i}: " + FILLER * 2, sent_from="Ben"))
    team = Team(llm=llm, roles=[ada], store=store)
    history = await team.run(n_round=1, idea="Write the quarterly report")
    assert history[-1].content == "The report."
    assert fits(llm, window)
    plan_prompt = seen[0]
    assert "earlier messages left out to fit the context window" in plan_prompt
    assert "Write the quarterly report" in plan_prompt and "note 119:" in plan_prompt and "note 0:" not in plan_prompt
    # the report's task: its instruction, and the newest dependency's result, with a note for the other
    report = next(p for p in seen if "write the report" in p)
    assert "[2] Result:" in report and "[1] Result:" not in report
    assert "1 earlier task result left out to fit the context window" in report
    purposes = {e.data["purpose"] for e in fitted_events(store, team.run_id)}
    assert {"WritePlan messages", "task results for Report"} <= purposes


async def test_a_replan_lists_the_newest_finished_tasks_that_fit():
    from actions.plan_and_act import WritePlan

    window = 2500
    llm = ScriptedLLM([PLAN], context_window=window)
    done = [Task(task_id=f"t{i}", instruction=f"step {i}", action="Collect", result=FILLER * 6, is_finished=True)
            for i in range(40)]
    writer = WritePlan(llm=llm)
    await writer.run("Write the quarterly report", [Step(name="Collect"), Step(name="Report")], [],
                     done=done, problems=["task t39 failed: the figures were wrong"])
    prompt = llm.calls[0].prompt
    assert fits(llm, window)
    assert "earlier finished tasks left out to fit the context window" in prompt
    assert "[t39] step 39" in prompt and "[t0] step 0" not in prompt and "the figures were wrong" in prompt


# ------------------------------------------------------------------ review, ActionNode
class Runs(Action):
    """Runs ``body(action, history)`` inside a team's turn (so its calls and events are the role's)."""

    body: Any = None

    async def run(self, history: list[Message]) -> str:
        return str(await self.body(self, history))


async def in_team(tmp_path, llm, body) -> tuple[SQLiteRunStore, str]:
    store = SQLiteRunStore(tmp_path / "runs.db")
    team = Team(llm=llm, roles=[Role(name="Ada", actions=[Runs(body=body)])], store=store)
    await team.run(n_round=1, idea="go")
    return store, team.run_id


async def test_the_review_of_a_long_result_keeps_its_last_lines(tmp_path):
    window = 1200
    llm = ScriptedLLM(['{"ok": true, "feedback": ""}'], context_window=window)
    result = "\n".join(f"line {i}: {FILLER}" for i in range(200)) + "\nConclusion: totals are 42."
    task = Task(task_id="1", instruction="sum the totals", action="Collect")

    async def review(action: Action, history: list[Message]) -> bool:
        judge = ReviewTask()
        judge.llm = action.llm
        return (await judge.run("the report", task, result)).ok

    store, run_id = await in_team(tmp_path, llm, review)
    prompt = llm.calls[0].prompt
    assert fits(llm, window)
    assert "Conclusion: totals are 42." in prompt and "sum the totals" in prompt and "line 0:" not in prompt
    assert "earlier result lines left out to fit the context window" in prompt
    assert [e.data["purpose"] for e in fitted_events(store, run_id)] == ["ReviewTask result"]


class Summary(BaseModel):
    topic: str
    decision: str


async def test_action_node_fill_keeps_the_newest_history_items_and_the_whole_format(tmp_path):
    window = 1500
    llm = ScriptedLLM(['[CONTENT]{"topic": "budget", "decision": "none"}[/CONTENT]'], context_window=window)
    llm.grammar_constrained = False  # the format is read from the answer text
    items = [Message(content=f"turn {i}: " + FILLER * 2, sent_from="Ben") for i in range(100)]

    async def fill(action: Action, history: list[Message]) -> str:
        node = ActionNode.from_pydantic(Summary)
        await node.fill(req=items, llm=action.llm)
        return node.instruct_content.decision

    store, run_id = await in_team(tmp_path, llm, fill)
    prompt = llm.calls[0].prompt
    assert fits(llm, window)
    assert "turn 99:" in prompt and "turn 0:" not in prompt
    assert "earlier items left out to fit the context window" in prompt
    assert "## format example" in prompt and '"decision"' in prompt  # the format is whole
    assert [e.data["purpose"] for e in fitted_events(store, run_id)] == ["ActionNode Summary"]


async def test_action_node_fill_of_a_long_text_keeps_its_head():
    window = 1500
    llm = ScriptedLLM(["a short summary"], context_window=window)
    text = "Requirement: a budget summary.\n" + "\n".join(f"detail {i}: {FILLER}" for i in range(200))
    node = ActionNode("summary", str, "summarise the requirement", "", schema="raw")
    await node.fill(req=text, llm=llm)
    prompt = llm.calls[0].prompt
    assert fits(llm, window) and node.content == "a short summary"
    assert prompt.startswith("Requirement: a budget summary.") and "detail 199:" not in prompt
    assert "later lines left out to fit the context window" in prompt and "summarise the requirement" in prompt


# ------------------------------------------------------------------ long-term memory
async def test_long_term_memory_chooses_within_the_window_so_the_relevant_old_message_reaches_the_action():
    handed: list[list[str]] = []

    class Answer(Action):
        async def run(self, history: list[Message]) -> str:
            handed.append([m.content for m in history])
            return await self._aask("\n".join(str(m) for m in history) + "\nAnswer the question.")

    window = 800
    llm = FunctionLLM(lambda messages: "4711", context_window=window)
    ltm = LongTermMemory(embedder=HashingEmbedder(), recent_k=3, relevant_k=3)
    bob = Role(name="Bob", actions=[Answer()], llm=llm, long_term_memory=ltm)
    bob.remember(Message(content="Keep this for the audit: the vault code is 4711. " + FILLER, sent_from="Alice"))
    for i in range(40):
        bob.remember(Message(content=f"status {i}: {FILLER}{FILLER}", sent_from="Alice"))
    await bob.run("The auditor asks: what is the vault code for the audit?")
    assert any("vault code is 4711" in text for text in handed[-1])  # the relevant old message was kept
    assert not any(text.startswith("[") and "left out" in text for text in handed[-1])  # nothing cut again
    assert fits(llm, window)


async def test_a_plan_under_the_dag_grammar_gets_a_budget_that_still_fits_beside_a_fitted_history():
    from actions.plan_and_act import WritePlan

    window = 6000
    llm = ScriptedLLM([PLAN], context_window=window)
    llm.grammar_constrained = True  # the plan's schema admits only task graphs: its longest plan is known
    history = [Message(content=f"note {i}: " + FILLER * 2, sent_from="Ben") for i in range(200)]
    plan = await WritePlan(llm=llm).run("Write the quarterly report", [Step(name="Collect"), Step(name="Report")],
                                        history)
    assert [t.task_id for t in plan.tasks] == ["1", "2", "3"]
    assert fits(llm, window)  # the schema in the prompt, the fitted history and the plan's budget together
    assert "earlier messages left out" in llm.calls[0].prompt and llm.calls[0].settings.max_tokens >= 1024

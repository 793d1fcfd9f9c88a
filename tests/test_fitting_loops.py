"""Tool loops never outgrow the model: the ReAct, stepwise and function-calling scratchpads keep the
question, the tools and the newest steps that fit the window, say how many they left out, and log it."""

from __future__ import annotations

import json

import pytest

from actions.tools import tool
from environment import Team
from rolecast.accounting.cost import max_prompt_tokens
from rolecast.errors import ContextOverflow
from rolecast.llm.base import Completion, ToolCall
from rolecast.llm.types import messages_text
from rolecast.llm.window import request_tokens
from rolecast.runs.events import HISTORY_FITTED
from rolecast.runs.inspection import show_run
from rolecast.runs.store import SQLiteRunStore
from rolecast.testing import FunctionLLM
from roles.tool_agent import ToolAgent

WINDOW = 2000
ANSWER = 300  # max_tokens: the room each call keeps for its answer
PAGES = 20  # each page's observation is about 140 tokens: all of them are far more than the window holds


@tool
def read_page(page: int) -> str:
    """Read one page of the report."""
    return f"page {page}: " + f"the figures of section {page} are unchanged from last year; " * 7


def asked_page(messages) -> int:
    """How many pages the model has read (the number of observations it sees, plus those left out)."""
    text = messages_text(messages)
    left_out = 0
    if "earlier steps left out" in text or "earlier step left out" in text:
        left_out = int(text.split(" earlier step")[0].rsplit("[", 1)[1])
    return left_out + text.count("the figures of section") // 7


def react_reply(messages) -> str:
    page = asked_page(messages)
    if page >= PAGES:
        return "Thought: I have read every page\nFinal Answer: all sections are unchanged"
    return f"Thought: I read on\nAction: read_page\nAction Input: {json.dumps({'page': page + 1})}"


def stepwise_reply(messages) -> str:
    page = asked_page(messages)
    if page >= PAGES:
        return "[FINAL ANSWER] all sections are unchanged"
    blob = json.dumps({"action": "read_page", "action_variables": {"page": str(page + 1)}})
    return f"[THOUGHT] I read on\n[ACTION]\n{blob}"


def function_calling_reply(messages) -> Completion:
    page = asked_page(messages)
    if page >= PAGES:
        return Completion(text="all sections are unchanged")
    call = ToolCall(id=f"call_{page + 1}", name="read_page", arguments=json.dumps({"page": page + 1}))
    return Completion(text="", tool_calls=[call])


REPLIES = {"react": react_reply, "stepwise": stepwise_reply, "function_calling": function_calling_reply}


def model(reply) -> FunctionLLM:
    llm = FunctionLLM(reply, context_window=WINDOW)
    llm.settings = llm.settings.merged({"max_tokens": ANSWER})
    return llm


def recorded_tokens(llm: FunctionLLM) -> list[int]:
    """Each recorded request's prompt (tools included) and answer room, as the check before sending counts."""
    return [max_prompt_tokens(messages_text(c.messages), len(c.messages))
            + request_tokens(llm, tools=c.tools) + c.settings.max_tokens for c in llm.calls]


@pytest.mark.parametrize("style", ["react", "langchain", "stepwise", "function_calling"])
async def test_a_long_tool_loop_keeps_the_newest_steps_that_fit_and_says_how_many_it_left_out(tmp_path, style):
    loop = "react" if style == "langchain" else style
    llm = model(REPLIES[loop])
    store = SQLiteRunStore(tmp_path / "runs.db")
    options = {"prompt_style": "langchain"} if style == "langchain" else {}
    agent = ToolAgent(name="Reader", tools=[read_page], style=loop, max_iterations=PAGES + 2, **options)
    team = Team(llm=llm, roles=[agent], store=store)
    history = await team.run(n_round=1, idea="Read the whole report: what changed?")
    # the run finished: every page was read and the answer given
    assert history[-1].content == "all sections are unchanged"
    result = history[-1].instruct_content
    assert result.stopped_reason == "finished" and len(result.intermediate_steps) == PAGES
    # no request outgrew the window, and the late ones left steps out and said so
    assert max(recorded_tokens(llm)) <= WINDOW
    last = messages_text(llm.calls[-1].messages)
    assert "earlier steps left out to fit the context window" in last
    assert "Read the whole report" in last  # the question and the tools stay
    assert "read_page" in (json.dumps(llm.calls[-1].tools) if loop == "function_calling" else last)
    assert f"page {PAGES}:" in last  # the newest step is there
    assert "page 1:" not in last  # the oldest is not
    events = list(store.events(team.run_id, [HISTORY_FITTED]))
    assert events and all(e.data["unit"] == "step" and e.role == "Reader" for e in events)
    assert events[-1].data["omitted"] + events[-1].data["kept"] == PAGES
    assert "scratchpad left out" in show_run(store, team.run_id) and "earlier step(s)" in show_run(store, team.run_id)


@pytest.mark.parametrize("style", ["react", "stepwise", "function_calling"])
async def test_a_question_that_cannot_fit_is_a_context_overflow_before_any_call(style):
    llm = model(REPLIES[style])
    agent = ToolAgent(name="Reader", tools=[read_page], style=style)
    team = Team(llm=llm, roles=[agent], store=None)
    with pytest.raises(ContextOverflow) as caught:
        await team.run(n_round=1, idea="Read this: " + "a very long question " * 1000)
    assert not llm.calls and caught.value.window == WINDOW


async def test_early_stopping_by_generate_asks_for_the_answer_with_the_steps_that_fit():
    def reply(messages):
        if "return a final answer" in messages_text(messages):
            return "Final Answer: unchanged, as far as I read"
        return react_reply(messages) if asked_page(messages) < PAGES - 1 else react_reply([])

    llm = model(reply)
    agent = ToolAgent(name="Reader", tools=[read_page], style="react", max_iterations=PAGES,
                      early_stopping_method="generate")
    team = Team(llm=llm, roles=[agent], store=None)
    history = await team.run(n_round=1, idea="Read the whole report: what changed?")
    assert history[-1].content == "unchanged, as far as I read"
    assert max(recorded_tokens(llm)) <= WINDOW
    assert "earlier steps left out" in messages_text(llm.calls[-1].messages)

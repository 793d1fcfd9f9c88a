"""Human approval of tool calls and actions: approve, edit, reject; by a callable and at a terminal."""

from __future__ import annotations

import io

import pytest

from actions import Action, calculator
from rolecast.context import Context
from rolecast.control.approval import Approval, approve, edit, reject
from rolecast.errors import InvocationCancelled, UsageError
from rolecast.llm.base import Completion, ToolCall
from rolecast.testing import ScriptedLLM
from roles import Role, ToolAgent


def calc_agent(approval: Approval, answer: str = "done") -> tuple[ToolAgent, ScriptedLLM]:
    llm = ScriptedLLM([
        Completion(text="", tool_calls=[ToolCall("c1", "calculator", '{"expression": "6 * 7"}')]),
        Completion(text=answer),
    ])
    ctx = Context()
    approval.install(ctx.hooks)
    agent = ToolAgent(tools=[calculator], style="function_calling", llm=llm)
    agent.set_context(ctx)
    return agent, llm


def observation(llm: ScriptedLLM) -> str:
    return llm.calls[1].messages[-1]["content"]


async def test_an_approved_tool_call_runs_as_asked():
    approval = Approval(lambda call: approve())
    agent, llm = calc_agent(approval)
    await agent.run("6*7?")
    assert observation(llm) == "42"
    assert [(k, n, a) for k, n, a, _ in approval.decisions] == [("tool", "calculator", {"expression": "6 * 7"})]


async def test_an_edited_tool_call_runs_with_the_new_arguments():
    agent, llm = calc_agent(Approval(lambda call: edit({"expression": "6 * 8"})))
    await agent.run("6*7?")
    assert observation(llm) == "48"


async def test_an_invalid_edit_is_a_tool_error_the_model_sees():
    agent, llm = calc_agent(Approval(lambda call: edit({"colour": "red"})))
    await agent.run("6*7?")
    assert "unknown argument(s) ['colour']" in observation(llm)


async def test_a_rejected_tool_call_does_not_run_and_the_model_is_told_why():
    ran = []
    approval = Approval(lambda call: reject("too expensive"), when=lambda call: ran.append(call.name) or True)
    agent, llm = calc_agent(approval)
    msg = await agent.run("6*7?")
    assert observation(llm) == "The user rejected this call: too expensive"
    assert msg.content == "done" and ran == ["calculator"]


async def test_an_async_approver_and_bools_work():
    async def ask(call):
        return False

    agent, llm = calc_agent(Approval(ask))
    await agent.run("6*7?")
    assert observation(llm).startswith("The user rejected this call")


async def test_a_wrong_answer_from_the_approver_is_a_usage_error():
    agent, _ = calc_agent(Approval(lambda call: "yes"))
    with pytest.raises(UsageError, match="must return a Decision"):
        await agent.run("6*7?")


async def test_a_rejected_action_cancels_the_turn():
    class Publish(Action):
        async def run(self, *args):
            return "published"

    role = Role(name="Ada", actions=[Publish()], llm=ScriptedLLM([]))
    ctx = Context()
    Approval(lambda call: reject("not today"), kinds={"action"}).install(ctx.hooks)
    role.set_context(ctx)
    assert await role.run("go") is None  # the turn ends with no message; nothing is raised to end the run
    assert [m.content for m in role.rc.memory.get() if m.sent_from == "Ada"] == []


async def test_the_terminal_approver_reads_approve_edit_reject():
    answers = io.StringIO("maybe\ne\nnot json\n[1]\n{\"expression\": \"2 + 2\"}\n")
    out = io.StringIO()
    agent, llm = calc_agent(Approval.stdin(input=answers, output=out))
    await agent.run("6*7?")
    assert observation(llm) == "4"
    shown = out.getvalue()
    assert 'tool calculator wants to run with {"expression": "6 * 7"}' in shown
    assert "not JSON" in shown and "a JSON object is needed" in shown

    agent, llm = calc_agent(Approval.stdin(input=io.StringIO("r\nuse your head\n"), output=io.StringIO()))
    await agent.run("6*7?")
    assert observation(llm) == "The user rejected this call: use your head"


async def test_the_terminal_approver_fails_cleanly_at_end_of_input():
    agent, _ = calc_agent(Approval.stdin(input=io.StringIO(""), output=io.StringIO()))
    with pytest.raises(InvocationCancelled, match="end of input"):
        await agent.run("6*7?")

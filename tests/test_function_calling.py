"""FunctionCallingAction: native tool calls, scripted as ``Completion(tool_calls=[...])``."""

from __future__ import annotations

from typing import Annotated

import pytest

from actions.loops import FORCE_STOP_OUTPUT, FunctionCallingAction
from actions.tools import Plugin, calculator, kernel_function, tool
from rolecast.context import Context
from rolecast.control.hooks import Hooks
from rolecast.errors import OutputParseError, UsageError
from rolecast.llm.base import BaseLLM, Completion, ToolCall
from rolecast.testing import FunctionLLM, ScriptedLLM
from roles.tool_agent import ToolAgent


class MathPlugin:
    """Math."""

    @kernel_function(description="Multiply value to a value", name="Multiply")
    def multiply(
        self, input: Annotated[float, "the first number"], amount: Annotated[float, "the factor"]
    ) -> float:
        return input * amount

    @kernel_function(description="Subtracts value to a value", name="Subtract")
    def subtract(
        self, input: Annotated[float, "the first number"], amount: Annotated[float, "to subtract"]
    ) -> float:
        return input - amount


def calls(*items: tuple[str, str, str], text: str = "") -> Completion:
    return Completion(text=text, tool_calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in items])


def math_agent(llm, **kwargs) -> FunctionCallingAction:
    return FunctionCallingAction(tools=[Plugin.from_object(MathPlugin())], llm=llm, **kwargs)


async def test_runs_tool_calls_until_a_plain_answer():
    llm = ScriptedLLM(
        [
            calls(
                ("call_1", "MathPlugin-Multiply", '{"input": 2130.23, "amount": 1.23}'),
                text="Let me compute.",
            ),
            calls(("call_2", "MathPlugin-Subtract", '{"input": "2620.1829", "amount": "5"}')),
            Completion(text="You have $2615.1829."),
        ]
    )
    agent = math_agent(llm)
    result = await agent.run("2130.23 up 23 %, minus 5 for a coffee?")
    assert result.output == "You have $2615.1829."
    assert result.stopped_reason == "finished" and result.iterations == 3
    assert [(a.tool, a.tool_input, a.call_id) for a, _ in result.intermediate_steps] == [
        ("MathPlugin-Multiply", {"input": 2130.23, "amount": 1.23}, "call_1"),
        ("MathPlugin-Subtract", {"input": "2620.1829", "amount": "5"}, "call_2"),
    ]
    assert [o for _, o in result.intermediate_steps] == ["2620.1829", "2615.1829"]

    registry_schemas = [f.openai_schema() for f in Plugin.from_object(MathPlugin())]
    assert all(call.tools == registry_schemas for call in llm.calls)
    assert registry_schemas[0]["function"]["name"] == "MathPlugin-Multiply"
    messages = llm.calls[2].messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert messages[1] == {"role": "user", "content": "2130.23 up 23 %, minus 5 for a coffee?"}
    assert messages[2]["content"] == "Let me compute."
    assert messages[2]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "MathPlugin-Multiply", "arguments": '{"input": 2130.23, "amount": 1.23}'},
        }
    ]
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "2620.1829"}
    assert messages[4]["content"] is None
    llm.assert_complete()


async def test_several_calls_in_one_answer_are_all_answered_in_order():
    llm = ScriptedLLM(
        [
            calls(
                ("a", "calculator", '{"expression": "1 + 1"}'),
                ("b", "calculator", "{'expression': '2 * 3',}"),
            ),
            Completion(text="2 and 6"),
        ]
    )
    result = await FunctionCallingAction(tools=[calculator], llm=llm).run("q")
    assert result.iterations == 2
    assert [o for _, o in result.intermediate_steps] == ["2", "6"]
    tool_messages = [m for m in llm.calls[1].messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [("a", "2"), ("b", "6")]


async def test_bad_arguments_and_unknown_tools_are_answered_so_the_model_can_fix_them():
    llm = ScriptedLLM(
        [
            calls(("a", "calculator", '{"expression": '), ("b", "search", '{"q": "x"}')),
            calls(("c", "calculator", '{"expression": 1}')),
            Completion(text="done"),
        ]
    )
    result = await FunctionCallingAction(tools=[calculator], llm=llm).run("q")
    bad_json, unknown, wrong_type = (o for _, o in result.intermediate_steps)
    assert bad_json.startswith("the arguments are not valid JSON")
    assert unknown == "search is not a valid tool, try one of [calculator]."
    assert wrong_type.startswith("invalid arguments for calculator: expression")
    assert [m["tool_call_id"] for m in llm.calls[1].messages if m["role"] == "tool"] == ["a", "b"]


async def test_bad_arguments_raise_when_parsing_errors_are_not_handled():
    llm = ScriptedLLM([calls(("a", "calculator", "not json"))])
    with pytest.raises(OutputParseError):
        await FunctionCallingAction(tools=[calculator], llm=llm, handle_parsing_errors=False).run("q")


class NoTools(BaseLLM):
    reaches_a_model = False  # a test double

    def __init__(self):
        super().__init__("no-tools")

    async def _complete(self, messages, *, stop, settings, structured=None, tools=None):
        return Completion(text="plain")


async def test_a_model_without_native_tool_calls_is_refused_with_advice():
    with pytest.raises(UsageError, match="does not support native tool calls; use ReActAction"):
        await FunctionCallingAction(tools=[calculator], llm=NoTools()).run("q")


async def test_iteration_limit_force_and_generate():
    always = FunctionLLM(lambda messages: calls(("x", "calculator", '{"expression": "1"}')))
    result = await FunctionCallingAction(tools=[calculator], llm=always, max_iterations=2).run("q")
    assert result.output == FORCE_STOP_OUTPUT and result.stopped_reason == "max_iterations"
    assert len(result.intermediate_steps) == 2

    llm = ScriptedLLM([calls(("x", "calculator", '{"expression": "1"}')), Completion(text="It is 1.")])
    agent = FunctionCallingAction(
        tools=[calculator], llm=llm, max_iterations=1, early_stopping_method="generate"
    )
    result = await agent.run("q")
    assert result.output == "It is 1."
    assert llm.calls[1].tools is None  # the last call asks for words, not tools
    assert (
        llm.calls[1].messages[-1]["content"]
        == "I now need to return a final answer based on the previous steps:"
    )


async def test_return_direct():
    lookup = tool(lambda key: f"value of {key}", name="lookup", description="Look up.", return_direct=True)
    llm = ScriptedLLM([calls(("x", "lookup", '{"key": "k"}'))])
    result = await FunctionCallingAction(tools=[lookup], llm=llm).run("q")
    assert result.output == "value of k" and result.stopped_reason == "return_direct"


async def test_tool_agent_in_function_calling_style_records_events_and_steps():
    hooks = Hooks()
    events = []
    hooks.on_event(lambda e: events.append(e.kind))
    invoked = []
    hooks.on_invoking(lambda inv: invoked.append(inv.name), kinds={"tool"})
    llm = ScriptedLLM([calls(("x", "calculator", '{"expression": "6 * 7"}')), Completion(text="42")])
    agent = ToolAgent(tools=[calculator], style="function_calling", llm=llm)
    agent.set_context(Context(hooks=hooks))
    msg = await agent.run("6*7?")
    assert msg.content == "42"
    assert invoked == ["calculator"]
    assert events == [
        "function_calling.started",
        "function_calling.step_started",
        "function_calling.tool_called",
        "function_calling.observation",
        "function_calling.step_started",
        "function_calling.finished",
    ]
    step = next(m for m in agent.rc.memory.get() if "react_step" in m.metadata)
    assert step.content == 'Call: calculator({"expression": "6 * 7"})\nObservation: 42'
    assert step.metadata["react_step"]["style"] == "function_calling"
    # the role's identity goes first in the system message
    assert llm.calls[0].messages[0]["content"].startswith("You are a Tool Agent")

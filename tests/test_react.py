"""ReActAction: the seed's logged Fibonacci run replayed, the parser, the AgentExecutor limits."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import pytest

from actions import Action
from actions.loops import (
    FORCE_STOP_OUTPUT,
    REACT_PROMPT,
    REACT_STOP,
    AgentAction,
    AgentFinish,
    ReActAction,
    ReActOutputParser,
    parse_latest_plugin_call,
)
from actions.tools import calculator, python_tool, tool
from memory import Message
from rolecast.context import Context
from rolecast.control.hooks import Hooks
from rolecast.errors import InvocationCancelled, OutputParseError, ToolError, UsageError
from rolecast.llm.base import BaseLLM, Completion
from rolecast.testing import FunctionLLM, ScriptedLLM
from roles import Role
from roles.tool_agent import ToolAgent

# ------------------------------------------------------------ the seed's run
PYTHON_REPL_DESC = (
    "A Python shell. Use this to execute python commands. Input should be a valid python command.\n"
    "    If you expect output it should be printed out."
)
FIB_DEF = (
    "def fibonacci(n):\n    if n == 0:\n        return 0\n    elif n == 1:\n        return 1\n"
    "    else:\n        return fibonacci(n-1) + fibonacci(n-2)"
)
# the four completions text-davinci-003 returned in the logged run, verbatim
SEED_REPLIES = [
    " I need to calculate the 10th fibonacci number\nAction: Python REPL\nAction Input: fibonacci(10)",
    " I need to define a function to calculate the fibonacci number\nAction: Python REPL\nAction Input: "
    + FIB_DEF,
    " I now have a function to calculate the fibonacci number\nAction: Python REPL\n"
    "Action Input: fibonacci(10)",
    " I now know the final answer\nFinal Answer: 55",
]
SEED_PROMPT_HEAD = (
    "Answer the following questions as best you can. You have access to the following tools:\n\n"
    "Python REPL: A Python shell. Use this to execute python commands. Input "
    "should be a valid python command.\n"
    "    If you expect output it should be printed out.\n\n"
    "Use the following format:\n\n"
    "Question: the input question you must answer\n"
    "Thought: you should always think about what to do\n"
    "Action: the action to take, should be one of [Python REPL]\n"
    "Action Input: the input to the action\n"
    "Observation: the result of the action\n"
    "... (this Thought/Action/Action Input/Observation can repeat N times)\n"
    "Thought: I now know the final answer\n"
    "Final Answer: the final answer to the original input question\n\n"
    "Begin!\n\n"
    "Question: What is the 10th fibonacci number?\n"
    "Thought:"
)


def seed_agent(llm, **kwargs) -> ReActAction:
    repl = python_tool(name="Python REPL", description=PYTHON_REPL_DESC)
    return ReActAction(tools=[repl], prompt_style="langchain", llm=llm, **kwargs)


async def test_replays_the_seeds_four_call_fibonacci_run_in_the_real_sandbox():
    llm = ScriptedLLM(SEED_REPLIES)
    result = await seed_agent(llm).run("What is the 10th fibonacci number?")

    assert result.output == "55"
    assert result.stopped_reason == "finished"
    assert result.iterations == 4
    actions = [a for a, _ in result.intermediate_steps]
    observations = [o for _, o in result.intermediate_steps]
    assert [(a.tool, a.tool_input) for a in actions] == [
        ("Python REPL", "fibonacci(10)"),
        ("Python REPL", FIB_DEF),
        ("Python REPL", "fibonacci(10)"),
    ]
    assert actions[0].log == SEED_REPLIES[0]
    # the model's code really ran in the sandbox: the first call failed there
    assert observations == ["NameError: name 'fibonacci' is not defined", "", ""]
    # every call stops at the observation
    assert all(call.stop == REACT_STOP for call in llm.calls)
    # the prompts are the logged ones (with our sandbox's error line)
    assert llm.calls[0].prompt == SEED_PROMPT_HEAD
    assert llm.calls[3].prompt == (
        SEED_PROMPT_HEAD
        + SEED_REPLIES[0]
        + "\nObservation: NameError: name 'fibonacci' is not defined\nThought:"
        + SEED_REPLIES[1]
        + "\nObservation: \nThought:"
        + SEED_REPLIES[2]
        + "\nObservation: \nThought:"
    )
    llm.assert_complete()


async def test_state_kept_between_calls_lets_the_function_be_used():
    replies = [
        " Define it\nAction: Python REPL\nAction Input: " + FIB_DEF,
        " Call it\nAction: Python REPL\nAction Input: print(fibonacci(10))",
        " I now know the final answer\nFinal Answer: 55",
    ]
    result = await seed_agent(ScriptedLLM(replies)).run("What is the 10th fibonacci number?")
    assert [o for _, o in result.intermediate_steps] == ["", "55"]


async def test_python_state_is_per_run_even_for_concurrent_runs_sharing_the_tool():
    repl = python_tool(name="python")

    def agent(code: str) -> ReActAction:
        replies = [f"Thought: go\nAction: python\nAction Input: {code}", "Final Answer: done"]
        return ReActAction(tools=[repl], llm=ScriptedLLM(replies))

    define, use = await asyncio.gather(
        agent("secret = 42\nprint('set')").run("define"), agent("print(secret)").run("use")
    )
    assert define.intermediate_steps[0][1] == "set"
    assert use.intermediate_steps[0][1] == "NameError: name 'secret' is not defined"


# ---------------------------------------------------------------- prompts
async def test_qwen_style_uses_react_prompt_and_tool_desc():
    @tool
    def quark_search(search_query: Annotated[str, "搜索关键词或短语"]) -> str:
        """夸克搜索是一个通用搜索引擎,可用于访问互联网、查询百科知识、了解时事新闻等。"""
        return "result"

    llm = ScriptedLLM(
        [
            'Thought: 我应该搜索\nAction: quark_search\nAction Input: {"search_query": "五彩斑斓的黑"}',
            "Thought: 我已经知道了\nFinal Answer: 黑",
        ]
    )
    agent = ReActAction(tools=[quark_search, calculator], llm=llm)
    result = await agent.run("给我画个五彩斑斓的黑。")
    assert result.output == "黑"
    first = llm.calls[0].prompt
    assert first.startswith(REACT_PROMPT.split("{tool_descs}")[0])
    assert "quark_search: Call this tool to interact with the Quark Search API." in first
    assert "should be one of [quark_search,calculator]" in first
    assert first.endswith("Question: 给我画个五彩斑斓的黑。")
    assert llm.calls[1].prompt == (
        first
        + '\nThought: 我应该搜索\nAction: quark_search\nAction Input: {"search_query": "五彩斑斓的黑"}'
        + "\nObservation: result"
    )


async def test_a_chat_model_repeating_thought_is_normalised_in_the_langchain_scratchpad():
    llm = ScriptedLLM(["Thought: add\nAction: calculator\nAction Input: 1 + 1", "Final Answer: 2"])
    await ReActAction(tools=[calculator], prompt_style="langchain", llm=llm).run("1+1?")
    assert llm.calls[1].prompt.endswith(
        "Thought: add\nAction: calculator\nAction Input: 1 + 1\nObservation: 2\nThought:"
    )


async def test_a_custom_template():
    llm = ScriptedLLM(["Final Answer: ok"])
    agent = ReActAction(
        tools=[calculator], llm=llm, template="Tools: {tool_names}\nQ: {input}\n{agent_scratchpad}"
    )
    await agent.run("hi")
    assert llm.calls[0].prompt == "Tools: calculator\nQ: hi\n"


# ----------------------------------------------------------------- parsing
def test_parse_latest_plugin_call_is_qwens():
    assert parse_latest_plugin_call("Thought: x\nAction: a\nAction Input: {}") == ("a", "{}")
    assert parse_latest_plugin_call("Thought: x\nAction: a\nAction Input: 1\nObservation: 2") == ("a", "1")
    # the last Action / Action Input wins
    text = "\nAction: a\nAction Input: 1\nObservation: 2\nThought: y\nAction: b\nAction Input: 3"
    assert parse_latest_plugin_call(text) == ("b", "3")
    assert parse_latest_plugin_call("Final Answer: 5") == ("", "")
    assert parse_latest_plugin_call("Action: a\nAction Input: 1") == ("", "")  # Qwen needs a newline first


def test_the_parser_on_text_where_the_model_ignored_the_stop_word():
    text = (
        " I need to calculate the 10th fibonacci number\nAction: Python REPL\nAction Input: fibonacci(10)\n"
        "Observation: 55\nThought: I now know the final answer\nFinal Answer: "
        "The 10th fibonacci number is 55."
    )
    parsed = ReActOutputParser().parse(text)
    # the invented observation and answer are dropped: the tool must run first
    assert parsed == AgentAction(
        tool="Python REPL",
        tool_input="fibonacci(10)",
        log=(
            " I need to calculate the 10th fibonacci number\nAction: Python REPL\nAction Input: fibonacci(10)"
        ),
    )


async def test_a_scripted_reply_with_an_invented_observation_is_cut_at_the_stop_word():
    invented = (
        " I need to calculate\nAction: calculator\nAction Input: 2 ** 10\n"
        "Observation: 1000\nThought: I now know the final answer\nFinal Answer: 1000"
    )
    llm = ScriptedLLM([invented, " I now know the final answer\nFinal Answer: 1024"])
    result = await ReActAction(tools=[calculator], llm=llm, prompt_style="langchain").run("2**10?")
    action, observation = result.intermediate_steps[0]
    assert action.log == " I need to calculate\nAction: calculator\nAction Input: 2 ** 10"
    assert observation == "1024"
    assert result.output == "1024"


def test_the_parser_restores_a_dropped_stop_word_and_cuts_an_invented_answer():
    parser = ReActOutputParser()
    assert parser.parse("Action: calc\nAction Input: 2 + 2") == AgentAction(
        tool="calc", tool_input="2 + 2", log="Action: calc\nAction Input: 2 + 2"
    )
    parsed = parser.parse("Thought: t\nAction: calc\nAction Input: 2 + 2\nFinal Answer: 4")
    assert isinstance(parsed, AgentAction) and parsed.tool_input == "2 + 2"
    assert parsed.log == "Thought: t\nAction: calc\nAction Input: 2 + 2"


def test_the_parser_finds_the_final_answer_and_reports_bad_formats():
    parser = ReActOutputParser()
    assert parser.parse(" I now know the final answer\nFinal Answer: 55") == AgentFinish(
        output="55", log=" I now know the final answer\nFinal Answer: 55"
    )
    with pytest.raises(OutputParseError, match="Missing 'Action:' after 'Thought:'") as info:
        parser.parse("I am thinking about it")
    assert info.value.raw == "I am thinking about it"
    with pytest.raises(OutputParseError, match="Missing 'Action Input:' after 'Action:'"):
        parser.parse("Thought: t\nAction: calc")
    with pytest.raises(OutputParseError, match="Missing 'Action:'"):
        parser.parse("Thought: t\nAction: \nAction Input: 1")


@tool
def power(base: Annotated[int, "the base"], exponent: Annotated[int, "the exponent"]) -> int:
    """Raise base to exponent."""
    return base**exponent


async def test_garbled_json_input_is_recovered_with_json5():
    llm = ScriptedLLM(
        [
            "Thought: t\nAction: power\nAction Input: {'base': 2, 'exponent': 10,}",
            'Thought: t\nAction: power\nAction Input: ```json\n{"base": 3, "exponent": 2}\n```',
            "Final Answer: 1024",
        ]
    )
    result = await ReActAction(tools=[power], llm=llm).run("2**10?")
    assert [o for _, o in result.intermediate_steps] == ["1024", "9"]


async def test_hopeless_json_input_is_a_parse_error_observation():
    llm = ScriptedLLM(
        ["Thought: t\nAction: power\nAction Input: {base: 2, exponent", "Final Answer: I give up"]
    )
    result = await ReActAction(tools=[power], llm=llm).run("2**10?")
    observation = result.intermediate_steps[0][1]
    assert observation.startswith("Could not parse the Action Input for power as a JSON object")
    assert '{"base": "...", "exponent": "..."}' in observation
    assert f"\nObservation: {observation}" in llm.calls[1].prompt
    with pytest.raises(OutputParseError):
        await ReActAction(tools=[power], llm=ScriptedLLM(llm._replies[:1]), handle_parsing_errors=False).run(
            "q"
        )


async def test_tool_input_as_json_object_for_a_text_tool():
    llm = ScriptedLLM(
        ['Thought: t\nAction: python\nAction Input: {"code": "print(1 + 1)"}', "Final Answer: 2"]
    )
    result = await ReActAction(tools=[python_tool()], llm=llm).run("1+1")
    assert result.intermediate_steps[0][1] == "2"


# ------------------------------------------------------------ tool failures
async def test_an_unknown_tool_name_lists_the_valid_tools():
    llm = ScriptedLLM(["Thought: t\nAction: search\nAction Input: weather", "Final Answer: unknown"])
    result = await ReActAction(tools=[calculator, python_tool()], llm=llm).run("weather?")
    assert result.intermediate_steps[0][1] == "search is not a valid tool, try one of [calculator, python]."
    with pytest.raises(ToolError, match="not a valid tool"):
        await ReActAction(tools=[calculator], llm=ScriptedLLM(llm._replies), handle_tool_errors=False).run(
            "q"
        )


async def test_tool_names_are_matched_leniently():
    llm = ScriptedLLM(
        [
            "Thought: t\nAction: python_repl\nAction Input: print(1)",
            "Thought: t\nAction: [Calculator]\nAction Input: 2 * 3",
            "Final Answer: 6",
        ]
    )
    repl = python_tool(name="Python REPL")
    result = await ReActAction(tools=[repl, calculator], llm=llm).run("q")
    assert [o for _, o in result.intermediate_steps] == ["1", "6"]


async def test_a_tool_that_raises_becomes_an_observation():
    @tool
    def flaky(x: str) -> str:
        """Always fails."""
        raise ValueError(f"boom on {x}")

    llm = ScriptedLLM(["Thought: t\nAction: flaky\nAction Input: 1", "Final Answer: it failed"])
    result = await ReActAction(tools=[flaky], llm=llm).run("q")
    assert result.intermediate_steps[0][1] == "ValueError: boom on 1"
    assert result.output == "it failed"
    # a wrong argument is a ToolError whose message goes back as it is
    llm = ScriptedLLM(['Thought: t\nAction: power\nAction Input: {"base": "two"}', "Final Answer: x"])
    result = await ReActAction(tools=[power], llm=llm).run("q")
    assert result.intermediate_steps[0][1].startswith("invalid arguments for power: base")
    # custom handlers, and False
    llm = ScriptedLLM(["Thought: t\nAction: flaky\nAction Input: 1", "Final Answer: x"])
    result = await ReActAction(tools=[flaky], llm=llm, handle_tool_errors=lambda e: f"oops: {e}").run("q")
    assert result.intermediate_steps[0][1] == "oops: boom on 1"
    llm = ScriptedLLM(["Thought: t\nAction: flaky\nAction Input: 1"])
    with pytest.raises(ToolError, match="tool flaky raised ValueError: boom on 1") as info:
        await ReActAction(tools=[flaky], llm=llm, handle_tool_errors=False).run("q")
    assert isinstance(info.value.__cause__, ValueError)


async def test_a_hook_cancelling_a_tool_stops_the_run():
    hooks = Hooks()
    hooks.on_invoking(lambda inv: inv.cancel("not allowed"), kinds={"tool"})
    llm = ScriptedLLM(["Thought: t\nAction: calculator\nAction Input: 1 + 1"])
    agent = ReActAction(tools=[calculator], llm=llm)
    agent.set_context(Context(hooks=hooks))
    with pytest.raises(InvocationCancelled):
        await agent.run("q")


async def test_observations_are_capped():
    @tool
    def long(x: str) -> str:
        """Long output."""
        return "z" * 500

    llm = ScriptedLLM(["Thought: t\nAction: long\nAction Input: 1", "Final Answer: ok"])
    result = await ReActAction(tools=[long], llm=llm, max_observation_chars=100).run("q")
    assert result.intermediate_steps[0][1] == "z" * 100 + "\n[... 400 more characters]"


# ----------------------------------------------------------------- limits
ALWAYS_ACT = "Thought: again\nAction: calculator\nAction Input: 2 + 2"


async def test_iteration_limit_with_force():
    llm = FunctionLLM(lambda messages: ALWAYS_ACT)
    result = await ReActAction(tools=[calculator], llm=llm, max_iterations=2).run("q")
    assert result.output == FORCE_STOP_OUTPUT == "Agent stopped due to iteration limit or time limit."
    assert result.stopped_reason == "max_iterations"
    assert result.iterations == 2 and len(result.intermediate_steps) == 2
    assert len(llm.calls) == 2


async def test_iteration_limit_with_generate_asks_once_more():
    llm = ScriptedLLM([ALWAYS_ACT, ALWAYS_ACT, " I now know the final answer\nFinal Answer: 4"])
    agent = ReActAction(
        tools=[calculator],
        llm=llm,
        max_iterations=2,
        early_stopping_method="generate",
        prompt_style="langchain",
    )
    result = await agent.run("q")
    assert result.output == "4"
    assert result.stopped_reason == "max_iterations"
    assert llm.calls[2].prompt.endswith(
        "Observation: 4\nThought:\n\nI now need to return a final answer based on the previous steps:"
    )
    # an answer without the Final Answer prefix is taken whole
    llm = ScriptedLLM([ALWAYS_ACT, "It is 4."])
    result = await ReActAction(
        tools=[calculator], llm=llm, max_iterations=1, early_stopping_method="generate"
    ).run("q")
    assert result.output == "It is 4."


def test_an_unknown_early_stopping_method_is_refused():
    with pytest.raises(ValueError, match="early_stopping_method"):
        ReActAction(tools=[calculator], early_stopping_method="explode")


async def test_return_direct_ends_with_the_tools_result():
    lookup = tool(
        lambda key: f"value of {key}", name="lookup", description="Look up a key.", return_direct=True
    )
    llm = ScriptedLLM(["Thought: t\nAction: lookup\nAction Input: answer"])
    result = await ReActAction(tools=[lookup], llm=llm).run("q")
    assert result.output == "value of answer"
    assert result.stopped_reason == "return_direct"
    assert len(llm.calls) == 1


async def test_max_execution_time_stops_a_slow_model():
    llm = FunctionLLM(lambda messages: ALWAYS_ACT, delay=0.2)
    started = time.monotonic()
    result = await ReActAction(tools=[calculator], llm=llm, max_execution_time=0.5).run("q")
    assert time.monotonic() - started < 2
    assert result.stopped_reason == "max_execution_time"
    assert result.output == FORCE_STOP_OUTPUT
    assert 1 <= len(result.intermediate_steps) <= 3


async def test_max_execution_time_interrupts_a_slow_tool():
    @tool
    async def slow(x: str) -> str:
        """Takes long."""
        await asyncio.sleep(30)
        return "late"

    llm = ScriptedLLM(["Thought: t\nAction: slow\nAction Input: 1"])
    started = time.monotonic()
    result = await ReActAction(tools=[slow], llm=llm, max_execution_time=0.3).run("q")
    assert time.monotonic() - started < 2
    assert result.stopped_reason == "max_execution_time"
    assert result.intermediate_steps == []


# ---------------------------------------------------------- parsing errors
NO_ACTION = "I think I should compute something."


async def test_handle_parsing_errors_sends_the_error_back_as_the_observation():
    llm = ScriptedLLM([NO_ACTION, "Thought: ok\nFinal Answer: 3"])
    result = await ReActAction(tools=[calculator], llm=llm, prompt_style="langchain").run("q")
    action, observation = result.intermediate_steps[0]
    assert action.tool == "_Exception" and action.log == NO_ACTION
    assert observation == "Invalid Format: Missing 'Action:' after 'Thought:'"
    assert llm.calls[1].prompt.endswith(f"{NO_ACTION}\nObservation: {observation}\nThought:")
    assert result.output == "3"


async def test_handle_parsing_errors_with_a_text_or_a_function():
    llm = ScriptedLLM([NO_ACTION, "Final Answer: 3"])
    result = await ReActAction(tools=[calculator], llm=llm, handle_parsing_errors="Check your output.").run(
        "q"
    )
    assert result.intermediate_steps[0][1] == "Check your output."
    llm = ScriptedLLM([NO_ACTION, "Final Answer: 3"])
    agent = ReActAction(tools=[calculator], llm=llm, handle_parsing_errors=lambda e: f"Fix: {e}")
    result = await agent.run("q")
    assert result.intermediate_steps[0][1] == "Fix: Invalid Format: Missing 'Action:' after 'Thought:'"


async def test_handle_parsing_errors_false_raises_a_typed_error():
    agent = ReActAction(tools=[calculator], llm=ScriptedLLM([NO_ACTION]), handle_parsing_errors=False)
    with pytest.raises(OutputParseError) as info:
        await agent.run("q")
    assert info.value.raw == NO_ACTION


# ----------------------------------------------------- events and memory
async def test_events_are_emitted_in_order():
    hooks = Hooks()
    events = []
    hooks.on_event(lambda e: events.append((e.kind, e.data)))
    llm = ScriptedLLM(["Thought: t\nAction: calculator\nAction Input: 2 + 3", "Final Answer: 5"])
    agent = ReActAction(tools=[calculator], llm=llm)
    agent.set_context(Context(hooks=hooks))
    await agent.run("2+3?")
    assert [k for k, _ in events] == [
        "react.started",
        "react.step_started",
        "react.tool_called",
        "react.observation",
        "react.step_started",
        "react.finished",
    ]
    data = dict(events)
    assert data["react.started"]["tools"] == ["calculator"]
    assert data["react.tool_called"] | {"log": None} == {
        "action": "ReActAction",
        "style": "react",
        "iteration": 1,
        "tool": "calculator",
        "tool_input": "2 + 3",
        "log": None,
    }
    assert data["react.observation"]["observation"] == "5"
    assert data["react.finished"]["output"] == "5" and data["react.finished"]["stopped_reason"] == "finished"


async def test_tool_calls_go_through_the_invocation_hooks():
    hooks = Hooks()
    seen = []
    hooks.on_invoking(lambda inv: seen.append((inv.kind, inv.name, inv.arguments)), kinds={"tool"})
    llm = ScriptedLLM(["Thought: t\nAction: calculator\nAction Input: 2 + 3", "Final Answer: 5"])
    agent = ReActAction(tools=[calculator], llm=llm)
    agent.set_context(Context(hooks=hooks))
    await agent.run("q")
    assert seen == [("tool", "calculator", {"expression": "2 + 3"})]


async def test_steps_are_recorded_in_the_owning_roles_memory():
    llm = ScriptedLLM(SEED_REPLIES)
    agent = seed_agent(llm)
    role = Role(name="Ada", profile="Solver", actions=[agent], llm=llm)
    await role.run("What is the 10th fibonacci number?")
    steps = role.rc.memory.get_by_action(ReActAction)
    step_msgs = [m for m in steps if "react_step" in m.metadata]
    assert len(step_msgs) == 3
    first = step_msgs[0]
    assert first.role == "Solver" and first.sent_from == "Ada"
    assert first.content == (
        "I need to calculate the 10th fibonacci number\nAction: Python REPL\nAction Input: fibonacci(10)\n"
        "Observation: NameError: name 'fibonacci' is not defined"
    )
    assert first.metadata["react_step"] == {
        "style": "react",
        "iteration": 1,
        "tool": "Python REPL",
        "tool_input": "fibonacci(10)",
        "log": SEED_REPLIES[0],
        "observation": "NameError: name 'fibonacci' is not defined",
    }
    # the question given to the loop was the user's, not an earlier step
    assert llm.calls[0].prompt.endswith("Question: What is the 10th fibonacci number?\nThought:")


async def test_a_free_standing_action_records_nothing_and_needs_a_question():
    agent = ReActAction(tools=[calculator], llm=ScriptedLLM(["Final Answer: 1"]))
    assert agent.owner_memory is None
    assert (await agent.run(Message("1?"))).output == "1"
    with pytest.raises(UsageError):
        await ReActAction(tools=[calculator], llm=ScriptedLLM([])).run("  ")


async def test_the_result_prints_as_its_output_and_serialises():
    result = await ReActAction(tools=[calculator], llm=ScriptedLLM(["Final Answer: 7"])).run("q")
    assert str(result) == "7"
    assert type(result).model_validate_json(result.model_dump_json()) == result


async def test_any_role_can_use_it_among_other_actions():
    class Summarise(Action):
        async def run(self, history):
            return "summary of " + history[-1].content

    llm = ScriptedLLM(["Final Answer: 42"])
    role = Role(actions=[ReActAction(tools=[calculator]), Summarise()], react_mode="by_order", llm=llm)
    msg = await role.run("6*7?")
    assert msg.content.startswith("summary of ")


# --------------------------------------------------------------- ToolAgent
async def test_tool_agent_runs_the_react_loop_as_its_mode():
    llm = ScriptedLLM(SEED_REPLIES)
    repl = python_tool(name="Python REPL", description=PYTHON_REPL_DESC)
    agent = ToolAgent(tools=[repl], prompt_style="langchain", llm=llm, max_iterations=6)
    msg = await agent.run("What is the 10th fibonacci number?")
    assert msg.content == "55"
    assert msg.cause_by == "actions.loops.react.ReActAction"
    assert msg.instruct_content.stopped_reason == "finished"
    assert len(msg.instruct_content.intermediate_steps) == 3
    assert agent.loop.max_iterations == 6
    assert llm.calls[0].messages[0]["role"] == "system"
    assert "Tool Agent" in llm.calls[0].messages[0]["content"]
    # steps, then the answer, are remembered
    kinds = ["react_step" in m.metadata for m in agent.rc.memory.get()]
    assert kinds == [False, True, True, True, False]


async def test_tool_agent_options_reach_the_loop():
    agent = ToolAgent(
        tools=[calculator],
        max_execution_time=3.0,
        early_stopping_method="generate",
        action_options={"max_observation_chars": 50},
    )
    assert isinstance(agent.loop, ReActAction)
    assert agent.loop.max_execution_time == 3.0
    assert agent.loop.early_stopping_method == "generate"
    assert agent.loop.max_observation_chars == 50
    with pytest.raises(ValueError):
        ToolAgent(tools=[calculator], style="telepathy")


class IgnoresStop(BaseLLM):
    """A server that does not honour stop sequences: it invents the observation and the answer."""

    reaches_a_model = False  # a test double

    def __init__(self, replies):
        super().__init__("ignores-stop")
        self.free = True
        self.replies = list(replies)
        self.stops = []

    async def _complete(self, messages, *, stop, settings, structured=None, tools=None):
        self.stops.append(stop)
        return Completion(text=self.replies.pop(0))


async def test_a_server_ignoring_the_stop_word_cannot_skip_the_tool():
    invented = (
        " I need to calculate\nAction: calculator\nAction Input: 2 ** 10\n"
        "Observation: 1000\nThought: I now know the final answer\nFinal Answer: 1000"
    )
    llm = IgnoresStop([invented, " I now know the final answer\nFinal Answer: 1024"])
    result = await ReActAction(tools=[calculator], llm=llm, prompt_style="langchain").run("2**10?")
    assert result.intermediate_steps[0][1] == "1024"  # the real observation, not the invented one
    assert result.output == "1024"
    assert llm.stops == [REACT_STOP, REACT_STOP]


def _load_example(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_react_example_replays_the_seed_run(capsys):
    result = await _load_example("react_agent").main(scripted=True)
    assert result.output == "55" and result.stopped_reason == "finished"
    out = capsys.readouterr().out
    assert "Observation: NameError: name 'fibonacci' is not defined" in out
    assert "=== answer ===\n55" in out


async def test_the_stepwise_example_replays_the_seed_run(capsys):
    result = await _load_example("stepwise_math").main(scripted=True)
    assert "2615.1829" in result.output
    assert [o for _, o in result.intermediate_steps] == ["489.9529", "2620.1829", "2615.1829"]
    assert "-> 2620.1829" in capsys.readouterr().out

"""StepwiseAction: Semantic Kernel's stepwise planner, with the seed's logged 2615.1829 run replayed."""

from __future__ import annotations

import json
import time
from typing import Annotated

import pytest

from actions.loops import AgentAction
from actions.loops.stepwise import (
    RESULT_NOT_FOUND,
    STEPWISE_PROMPT,
    STEPWISE_STOP,
    StepwiseAction,
    parse_stepwise,
)
from actions.tools import Plugin, fit_arguments, kernel_function, render_stepwise_manual, tool
from rolecast.context import Context
from rolecast.control.hooks import Hooks
from rolecast.errors import OutputParseError
from rolecast.llm.base import BaseLLM, Completion
from rolecast.testing import FunctionLLM, ScriptedLLM
from roles.tool_agent import ToolAgent


class MathPlugin:
    """MathPlugin provides a set of functions to make Math calculations."""

    @kernel_function(description="Subtracts value to a value", name="Subtract")
    def subtract(
        self,
        input: Annotated[float, "the first number"],
        amount: Annotated[float, "the number to subtract"],
    ) -> float:
        return input - amount

    @kernel_function(description="Add value to a value", name="Add")
    def add(
        self,
        input: Annotated[float, "the first number"],
        amount: Annotated[float, "the number to add"],
    ) -> float:
        return input + amount

    @kernel_function(description="Multiply value to a value", name="Multiply")
    def multiply(
        self,
        input: Annotated[float, "the first number"],
        amount: Annotated[float, "the number to multiply"],
    ) -> float:
        return input * amount

    @kernel_function(description="Divide value by a value", name="Divide")
    def divide(
        self,
        input: Annotated[float, "the first number"],
        amount: Annotated[float, "the number to divide by"],
    ) -> float:
        return input / amount


ASK = (
    "Figure out how much I have if first, my investment of 2130.23 dollars increased by 23%, "
    "and then I spend $5 on a coffee"
)
THOUGHT_1 = (
    "To solve this problem, we need to perform two actions: first, we need to calculate the increase in the "
    "investment by 23%, and then we need to subtract $5 from the result. We can use the MathPlugin-Add and "
    "MathPlugin-Multiply functions to calculate the increase, and the "
    "MathPlugin-Subtract function to subtract "
    "$5 from the result."
)
THOUGHT_2 = (
    "Now that we have the increase in the investment, we can use the "
    "MathPlugin-Add function to add it to the "
    "original investment."
)
THOUGHT_3 = "Finally, we need to subtract $5 from the result to get the final amount."
# the model's four answers as the article printed them
SEED_REPLIES = [
    f"[THOUGHT]\n{THOUGHT_1}\n\n[ACTION]\n"
    '{\n  "action": "MathPlugin-Multiply",\n  "action_variables": {\n    "input": "2130.23",\n'
    '    "amount": "0.23"\n  }\n}\n',
    f"[THOUGHT]\n{THOUGHT_2}\n[ACTION]\n"
    '{"action": "MathPlugin-Add", "action_variables": {"input": "2130.23", "amount": "489.9529"}}\n',
    f"[THOUGHT]\n{THOUGHT_3}\n[ACTION]\n"
    '{"action": "MathPlugin-Subtract", "action_variables": {"input": "2620.1829", "amount": "5"}}\n',
    "[FINAL ANSWER]\nAfter investing $2130.23 and increasing it by 23%, then spending $5 on a coffee, "
    "the final amount is $2615.1829.",
]
MANUAL = """MathPlugin-Add: Add value to a value
  inputs:
    - input: the first number
    - amount: the number to add

MathPlugin-Divide: Divide value by a value
  inputs:
    - input: the first number
    - amount: the number to divide by

MathPlugin-Multiply: Multiply value to a value
  inputs:
    - input: the first number
    - amount: the number to multiply

MathPlugin-Subtract: Subtracts value to a value
  inputs:
    - input: the first number
    - amount: the number to subtract
"""


def planner(llm, **kwargs) -> StepwiseAction:
    return StepwiseAction(tools=[Plugin.from_object(MathPlugin())], llm=llm, **kwargs)


async def test_replays_the_seeds_stepwise_run_to_2615_1829():
    llm = ScriptedLLM(SEED_REPLIES)
    result = await planner(llm, max_iterations=5).run(ASK)

    assert "2615.1829" in result.output
    assert result.output.startswith("After investing $2130.23")
    assert result.stopped_reason == "finished" and result.iterations == 4
    assert [o for _, o in result.intermediate_steps] == ["489.9529", "2620.1829", "2615.1829"]
    first_action = result.intermediate_steps[0][0]
    assert first_action.tool == "MathPlugin-Multiply"
    assert first_action.tool_input == {"input": "2130.23", "amount": "0.23"}
    assert all(call.stop == STEPWISE_STOP == ["[OBSERVATION]", "\n[THOUGHT]"] for call in llm.calls)

    first = llm.calls[0].prompt
    assert first == STEPWISE_PROMPT.replace("{{$function_descriptions}}", MANUAL).replace(
        "{{$question}}", ASK
    ).replace("{{$agent_scratch_pad}}", "")
    assert first.endswith(f"[QUESTION]\n{ASK}\n")
    # the last prompt carries Semantic Kernel's scratch pad of the three steps
    assert llm.calls[3].prompt.endswith(
        f"[QUESTION]\n{ASK}\n"
        "This was my previous work (but they haven't seen any of it! They only "
        "see what I return as final answer):\n"
        f"[THOUGHT]\n{THOUGHT_1}\n"
        '[ACTION]\n{"action": "MathPlugin-Multiply", "action_variables": '
        '{"input": "2130.23", "amount": "0.23"}}\n'
        "[OBSERVATION]\n489.9529\n"
        f"[THOUGHT]\n{THOUGHT_2}\n"
        '[ACTION]\n{"action": "MathPlugin-Add", "action_variables": {"input": '
        '"2130.23", "amount": "489.9529"}}\n'
        "[OBSERVATION]\n2620.1829\n"
        f"[THOUGHT]\n{THOUGHT_3}\n"
        '[ACTION]\n{"action": "MathPlugin-Subtract", "action_variables": '
        '{"input": "2620.1829", "amount": "5"}}\n'
        "[OBSERVATION]\n2615.1829"
    )
    llm.assert_complete()


def test_the_function_manual():
    assert render_stepwise_manual(Plugin.from_object(MathPlugin())) == MANUAL
    no_inputs = tool(lambda: "12:00", name="Now", description="Get the time.", plugin_name="TimePlugin")
    assert render_stepwise_manual([no_inputs]) == "TimePlugin-Now: Get the time.\n  inputs: None\n"


def test_parse_stepwise_like_semantic_kernel():
    step = parse_stepwise(SEED_REPLIES[0])
    assert step.thought == THOUGHT_1
    assert step.action == "MathPlugin-Multiply"
    assert step.action_variables == {"input": "2130.23", "amount": "0.23"}
    for marker in ("[FINAL ANSWER]", "[FINAL_ANSWER]", "[FINAL-ANSWER]"):
        assert parse_stepwise(f"[THOUGHT] done {marker} 42").final_answer == "42"
    assert parse_stepwise("[THOUGHT]\nJust thinking.").thought == "Just thinking."
    assert parse_stepwise("[ACTION]\n{'action': 'A-B', 'action_variables': {'input': '1',},}").action == "A-B"
    broken = parse_stepwise('[THOUGHT] t [ACTION] {"action": ')
    assert broken.observation.startswith("System step parsing error, invalid JSON:")
    assert parse_stepwise('[ACTION] {"action_variables": {}}').observation.startswith(
        'System step parsing error, the JSON has no "action"'
    )


def test_action_variables_are_fitted_to_the_function():
    @tool
    def search(query: str, limit: int = 3) -> str:
        """Search."""
        return query

    assert fit_arguments(search, {"input": "cats"}) == {"query": "cats"}
    assert fit_arguments(search, {"input": "", "query": "dogs"}) == {"query": "dogs"}
    math_add = Plugin.from_object(MathPlugin())["Add"]
    assert fit_arguments(math_add, {"input": "1", "amount": "2"}) == {"input": "1", "amount": "2"}


async def test_min_iteration_time_paces_the_iterations():
    llm = ScriptedLLM(SEED_REPLIES)
    started = time.monotonic()
    result = await planner(llm, min_iteration_time_ms=150).run(ASK)
    assert "2615.1829" in result.output
    assert time.monotonic() - started >= 0.45  # three full iterations before the answer


def act(action: str, **variables: str) -> str:
    return "[THOUGHT] t\n[ACTION]\n" + json.dumps({"action": action, "action_variables": variables})


ALWAYS = act("MathPlugin-Add", input="1", amount="1")


async def test_max_iterations_ends_with_result_not_found():
    llm = FunctionLLM(lambda messages: ALWAYS)
    result = await planner(llm, max_iterations=3).run(ASK)
    assert result.output == RESULT_NOT_FOUND
    assert result.stopped_reason == "max_iterations"
    assert len(llm.calls) == 3 and len(result.intermediate_steps) == 3


async def test_max_iterations_with_generate_asks_for_the_final_answer():
    llm = ScriptedLLM([ALWAYS, "After all that, the answer is 2."])
    result = await planner(llm, max_iterations=1, early_stopping_method="generate").run(ASK)
    assert result.output == "After all that, the answer is 2."
    assert llm.calls[1].prompt.endswith("[OBSERVATION]\n2\n[FINAL ANSWER]\n")


async def test_invalid_json_is_an_observation_or_a_typed_error():
    bad = '[THOUGHT] t\n[ACTION]\n{"action": "MathPlugin-Add", "action_variables": {"input": '
    llm = ScriptedLLM([bad, "[FINAL ANSWER] nothing"])
    result = await planner(llm).run(ASK)
    _, observation = result.intermediate_steps[0]
    assert observation.startswith("System step parsing error, invalid JSON:")
    assert f"[OBSERVATION]\n{observation}" in llm.calls[1].prompt
    with pytest.raises(OutputParseError):
        await planner(ScriptedLLM([bad]), handle_parsing_errors=False).run(ASK)


async def test_unknown_function_and_failing_function_are_observations():
    llm = ScriptedLLM(
        [
            act("MathPlugin-Power", input="2"),
            act("MathPlugin-Divide", input="1", amount="0"),
            act("MathPlugin-Add", input="x", amount="1"),
            "[FINAL ANSWER] none",
        ]
    )
    result = await planner(llm).run(ASK)
    unknown, divide, add = (o for _, o in result.intermediate_steps)
    assert unknown == (
        "Error invoking action MathPlugin-Power: The function 'MathPlugin-Power' was not found. "
        "Available functions: MathPlugin-Add, MathPlugin-Divide, MathPlugin-Multiply, MathPlugin-Subtract"
    )
    assert divide == "Error invoking action MathPlugin-Divide: ZeroDivisionError: float division by zero"
    assert add.startswith("Error invoking action MathPlugin-Add: invalid arguments for MathPlugin.Add: input")


async def test_a_thought_without_action_continues():
    llm = ScriptedLLM(["[THOUGHT] Let me think first.", SEED_REPLIES[3]])
    result = await planner(llm).run(ASK)
    assert "2615.1829" in result.output
    assert result.iterations == 2 and result.intermediate_steps == []
    assert "[THOUGHT]\nLet me think first." in llm.calls[1].prompt


class IgnoresStop(BaseLLM):
    """A server that does not honour stop sequences (answers run on past them)."""

    reaches_a_model = False  # a test double

    def __init__(self, replies):
        super().__init__("ignores-stop")
        self.free = True
        self.replies = list(replies)

    async def _complete(self, messages, *, stop, settings, structured=None, tools=None):
        return Completion(text=self.replies.pop(0))


async def test_a_model_that_runs_past_the_stop_word_is_cut_before_its_invented_observation():
    invented = SEED_REPLIES[0] + "[OBSERVATION]\n999\n[FINAL ANSWER] 999"
    llm = IgnoresStop([invented, SEED_REPLIES[3]])
    result = await planner(llm).run(ASK)
    assert [o for _, o in result.intermediate_steps] == ["489.9529"]
    assert "2615.1829" in result.output


async def test_stepwise_events_and_memory():
    hooks = Hooks()
    kinds = []
    hooks.on_event(lambda e: kinds.append((e.kind, e.data.get("style"))))
    agent = ToolAgent(
        tools=[Plugin.from_object(MathPlugin())], style="stepwise", llm=ScriptedLLM(SEED_REPLIES)
    )
    agent.set_context(Context(hooks=hooks))
    msg = await agent.run(ASK)
    assert "2615.1829" in msg.content
    assert isinstance(agent.loop, StepwiseAction)
    assert [k for k, _ in kinds].count("stepwise.tool_called") == 3
    assert {s for _, s in kinds} == {"stepwise"}
    steps = [m for m in agent.rc.memory.get() if "react_step" in m.metadata]
    assert len(steps) == 3
    assert steps[0].content.endswith("[OBSERVATION]\n489.9529")
    assert steps[2].metadata["react_step"]["tool_input"] == {"input": "2620.1829", "amount": "5"}
    assert isinstance(msg.instruct_content.intermediate_steps[0][0], AgentAction)

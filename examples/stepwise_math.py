"""Semantic Kernel's stepwise planner with a math toolkit: the article's investment question.

    python examples/stepwise_math.py
    python examples/stepwise_math.py --scripted

"Figure out how much I have if first, my investment of 2130.23 dollars increased by
23%, and then I spend $5 on a coffee." The model sees the manual of ``MathPlugin``
(Add, Subtract, Multiply — parameters described with ``Annotated``), answers in the
``[THOUGHT]`` / ``[ACTION]`` JSON format, and each function's result comes back as the
``[OBSERVATION]`` until a ``[FINAL ANSWER]``. ``--scripted`` replays the four answers
the article printed (2130.23 × 0.23 = 489.9529, + 2130.23 = 2620.1829, − 5 = 2615.1829);
on the configured model (the embedded 135M model by default, which may answer
poorly) the run is bounded by ``max_iterations`` and ends cleanly either way.
"""

from __future__ import annotations

import argparse
from typing import Annotated

from actions import AgentResult, Plugin, kernel_function
from rolecast import enable_logging
from rolecast.control.hooks import Event
from rolecast.errors import ConfigError, RolecastError
from rolecast.llm.base import LLMSettings
from rolecast.observe.console import run_script
from rolecast.testing import ScriptedLLM
from roles import ToolAgent

ASK = (
    "Figure out how much I have if first, my investment of 2130.23 dollars increased by 23%, "
    "and then I spend $5 on a coffee"
)


class MathPlugin:
    """MathPlugin provides a set of functions to make Math calculations."""

    @kernel_function(description="Subtracts value to a value", name="Subtract")
    def subtract(
        self,
        input: Annotated[float, "the first number"],
        amount: Annotated[float, "the number to subtract"],
    ) -> float:
        """Returns the difference of numbers provided."""
        return input - amount

    @kernel_function(description="Add value to a value", name="Add")
    def add(
        self,
        input: Annotated[float, "the first number"],
        amount: Annotated[float, "the number to add"],
    ) -> float:
        """Returns the sum of numbers provided."""
        return input + amount

    @kernel_function(description="Multiply value to a value", name="Multiply")
    def multiply(
        self,
        input: Annotated[float, "the first number"],
        amount: Annotated[float, "the number to multiply"],
    ) -> float:
        """Returns the product of numbers provided."""
        return input * amount


# the model's four answers as the article printed them
SCRIPTED_REPLIES = [
    "[THOUGHT]\nTo solve this problem, we need to perform two actions: first, we need to calculate "
    "the increase in the investment by 23%, and then we need to subtract $5 from the result. We can use "
    "the MathPlugin-Add and MathPlugin-Multiply functions to calculate the increase, and the "
    "MathPlugin-Subtract function to subtract $5 from the result.\n\n[ACTION]\n"
    '{\n  "action": "MathPlugin-Multiply",\n  "action_variables": {\n    "input": "2130.23",\n'
    '    "amount": "0.23"\n  }\n}\n',
    "[THOUGHT]\nNow that we have the increase in the investment, we can use the MathPlugin-Add function "
    "to add it to the original investment.\n[ACTION]\n"
    '{"action": "MathPlugin-Add", "action_variables": {"input": "2130.23", "amount": "489.9529"}}\n',
    "[THOUGHT]\nFinally, we need to subtract $5 from the result to get the final amount.\n[ACTION]\n"
    '{"action": "MathPlugin-Subtract", "action_variables": {"input": "2620.1829", "amount": "5"}}\n',
    "[FINAL ANSWER]\nAfter investing $2130.23 and increasing it by 23%, then spending $5 on a coffee, "
    "the final amount is $2615.1829.",
]


def build_agent(scripted: bool) -> ToolAgent:
    """A ToolAgent in stepwise mode over MathPlugin (and a canned model when scripted)."""
    return ToolAgent(
        name="Planner",
        tools=[Plugin.from_object(MathPlugin())],
        style="stepwise",
        max_iterations=5,
        max_execution_time=None if scripted else 300.0,
        action_options={
            "min_iteration_time_ms": 0 if scripted else 100,
            "settings": LLMSettings(temperature=0.0, max_tokens=256),
        },
        llm=ScriptedLLM(SCRIPTED_REPLIES) if scripted else None,
    )


def show(event: Event) -> None:
    data = event.data
    if event.kind == "react.tool_called":
        print(f"[step {data['iteration']}] {data['tool']} {data['tool_input']}")
    elif event.kind == "react.observation":
        print(f"[step {data['iteration']}] observation: {data['observation']}")


async def main(question: str = ASK, scripted: bool = False) -> AgentResult | None:
    """Run the planner once; print the steps and the answer. Returns the result (None: no model)."""
    agent = build_agent(scripted)
    agent.context.hooks.on_event(show)
    try:
        message = await agent.run(question)
    except ConfigError as exc:
        print(f"No model to run on: {exc}")
        return None
    except RolecastError as exc:
        print(f"The run failed: {type(exc).__name__}: {exc}")
        return None
    result = message.instruct_content if message is not None else None
    if not isinstance(result, AgentResult):
        print("The planner gave no result.")
        return None
    print("\n=== steps ===")
    for i, (action, observation) in enumerate(result.intermediate_steps, 1):
        print(f"Step {i}: {action.tool}({action.tool_input}) -> {observation}")
    print("\n=== answer ===")
    print(result.output)
    print(f"({result.stopped_reason} after {result.iterations} model call(s), {result.elapsed:.1f} s)")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default=ASK)
    parser.add_argument(
        "--scripted", action="store_true", help="replay the article's run with a canned model"
    )
    args = parser.parse_args()
    if args.scripted and args.question != ASK:
        parser.error(f"--scripted replays a recorded run about {ASK!r}; leave --scripted out to ask your own")
    enable_logging("INFO")
    run_script(main(args.question, args.scripted))

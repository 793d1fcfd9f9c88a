"""A ReAct agent with a sandboxed Python tool: "What is the 10th fibonacci number?"

    python examples/react_agent.py
    python examples/react_agent.py --scripted
    python examples/react_agent.py "What is 2 to the power of 20?" --style qwen

This is the run the LangChain article logs: a zero-shot ReAct agent with a
"Python REPL" tool. The model's code runs in rolecast's sandbox (a separate, limited
``python -I`` process — never in this one), and definitions persist between the
calls of this run. On the configured model (an API key, else the embedded 135M
local model, whose answer may well be poor) the run is bounded by
``max_iterations`` and ``max_execution_time`` and ends cleanly either way.
``--scripted`` replays the article's four logged model answers (used by CI): the
first call fails with ``NameError: name 'fibonacci' is not defined``, the model
defines the function, calls it, and answers 55.
"""

from __future__ import annotations

import argparse

from actions import AgentResult, python_tool
from rolecast import enable_logging
from rolecast.control.hooks import Event
from rolecast.errors import ConfigError, RolecastError
from rolecast.llm.base import LLMSettings
from rolecast.observe.console import run_script
from rolecast.testing import ScriptedLLM
from roles import ToolAgent

QUESTION = "What is the 10th fibonacci number?"

# the tool exactly as the article declares it
PYTHON_REPL_DESCRIPTION = """A Python shell. Use this to execute python commands. Input should be a valid python command.
    If you expect output it should be printed out."""  # noqa: E501

FIB_DEF = """def fibonacci(n):
    if n == 0:
        return 0
    elif n == 1:
        return 1
    else:
        return fibonacci(n-1) + fibonacci(n-2)"""

# text-davinci-003's four answers in the article's log, verbatim
SCRIPTED_REPLIES = [
    " I need to calculate the 10th fibonacci number\nAction: Python REPL\nAction Input: fibonacci(10)",
    " I need to define a function to calculate the fibonacci number\nAction: Python REPL\nAction Input: "
    + FIB_DEF,
    " I now have a function to calculate the fibonacci number\nAction: Python REPL\n"
    "Action Input: fibonacci(10)",
    " I now know the final answer\nFinal Answer: 55",
]


def build_agent(scripted: bool, style: str = "langchain") -> ToolAgent:
    """A ToolAgent in ReAct mode with the sandboxed Python tool (and a canned model when scripted)."""
    repl = python_tool(name="Python REPL", description=PYTHON_REPL_DESCRIPTION, timeout=10, memory_mb=512)
    return ToolAgent(
        name="Fib",
        tools=[repl],
        style="react",
        prompt_style=style,
        max_iterations=6,
        max_execution_time=None if scripted else 300.0,
        early_stopping_method="force",
        action_options={"settings": LLMSettings(temperature=0.0, max_tokens=256)},
        llm=ScriptedLLM(SCRIPTED_REPLIES) if scripted else None,
    )


def show(event: Event) -> None:
    """Print the loop as it runs (the events every tool loop emits)."""
    data = event.data
    if event.kind == "react.tool_called":
        print(f"[step {data['iteration']}] {data['tool']} <- {str(data['tool_input'])!r}")
    elif event.kind == "react.observation":
        print(f"[step {data['iteration']}] observation: {data['observation']!r}")


def print_result(result: AgentResult) -> None:
    print("\n=== steps ===")
    for i, (action, observation) in enumerate(result.intermediate_steps, 1):
        print(f"--- step {i}: {action.tool}")
        print(action.log.strip())
        print(f"Observation: {observation}")
    print("\n=== answer ===")
    print(result.output)
    print(f"({result.stopped_reason} after {result.iterations} model call(s), {result.elapsed:.1f} s)")


async def main(
    question: str = QUESTION, scripted: bool = False, style: str = "langchain"
) -> AgentResult | None:
    """Run the agent once; print the steps and the answer. Returns the result (None: no model)."""
    agent = build_agent(scripted, style)
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
        print("The agent gave no result.")
        return None
    print_result(result)
    print("\n=== cost ===\n" + agent.context.cost_manager.summary())
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default=QUESTION)
    parser.add_argument(
        "--scripted", action="store_true", help="replay the article's logged run with a canned model"
    )
    parser.add_argument(
        "--style", choices=["langchain", "qwen"], default="langchain", help="the ReAct prompt"
    )
    args = parser.parse_args()
    if args.scripted and args.question != QUESTION:
        parser.error(f"--scripted replays a recorded run about {QUESTION!r}; leave --scripted out to ask your own")
    enable_logging("INFO")
    run_script(main(args.question, args.scripted, args.style))

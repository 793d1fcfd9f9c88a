"""A coder, a tester and a reviewer working on one idea (MetaGPT's multi-agent tutorial).

    python examples/build_customized_multi_agents.py "write a function that adds two numbers"

Runs on the configured model: OPENAI_API_KEY (and OPENAI_BASE_URL / ROLECAST_MODEL)
if set, else the embedded local model. ``--scripted`` uses a canned model instead.

The same checks of its artifacts, over several ideas and repeated runs, are an evalset beside it
(``multi_agents.evalset.yaml``, whose team is :func:`build_team`)::

    rolecast eval examples/multi_agents.evalset.yaml --repeat 3
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path

from artifact_checks import code_problem, function_names, test_problem, verdicts  # beside this file
from loguru import logger

from actions import Action, UserRequirement, parse_code
from environment import Team
from memory import Message
from rolecast import enable_logging
from rolecast.observe.console import run_script
from rolecast.testing import FunctionLLM
from roles import Role

MAX_TRIES = 3  # the first answer and up to two re-asks
#: where ``rolecast optimize multi_agents.evalset.yaml --out`` writes a tuning for this team (none is committed:
#: on the embedded model no candidate beat the prompts as written; see docs/guides/optimize.md)
TUNING = Path(__file__).with_name("multi_agents.tuning.yaml")


async def ask_for_code(action: Action, prompt: str, problem: Callable[[str], str | None]) -> str:
    """Ask for code until ``problem(code)`` finds nothing, re-asking with the reason (``MAX_TRIES`` in all).

    After the last try the last answer is returned as it is, with a warning: the team goes on.
    """
    code, why = "", None
    for attempt in range(MAX_TRIES):
        ask = prompt if why is None else f"{prompt}\nYour previous answer was not usable: {why}. Try again.\n"
        code = parse_code(await action._aask(ask))
        why = problem(code)
        if why is None:
            return code
        logger.info("{}: attempt {} not usable: {}", action.name, attempt + 1, why)
    logger.warning("{}: no usable answer after {} tries ({}); keeping the last", action.name, MAX_TRIES, why)
    return code


class SimpleWriteCode(Action):
    PROMPT_TEMPLATE: str = """
Write a python function that can {instruction}.
Return ```python your_code_here ``` with NO other texts,
your code:
"""
    name: str = "SimpleWriteCode"

    async def run(self, instruction: str) -> str:
        return await ask_for_code(self, self.PROMPT_TEMPLATE.format(instruction=instruction), code_problem)


class SimpleCoder(Role):
    name: str = "Alice"
    profile: str = "SimpleCoder"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._watch([UserRequirement])
        self.set_actions([SimpleWriteCode])


class SimpleWriteTest(Action):
    PROMPT_TEMPLATE: str = """
Context: {context}
Write {k} unit tests using pytest for the given function, assuming you have imported it.
Return ```python your_code_here ``` with NO other texts,
your code:
"""
    # When the coder's code names its function, a small model needs the code alone and the shape of a test.
    FOCUSED_TEMPLATE: str = """
```python
{code}
```
Write {k} unit tests using pytest for the function `{function}` above, assuming you have imported it.
Each test is a function whose name starts with test_, calls {function}(...) and checks the result with assert:
```python
def test_{function}():
    assert {function}(...) == ...
```
Return ```python your_code_here ``` with NO other texts,
your code:
"""
    name: str = "SimpleWriteTest"

    async def run(self, context: list[Message], k: int = 3) -> str:
        code = next((m.content for m in reversed(context) if m.cause_by.endswith(".SimpleWriteCode")), "")
        functions = function_names(code)
        if functions:
            function = sorted(functions)[0]
            prompt = self.FOCUSED_TEMPLATE.format(code=code, function=function, k=k)
        else:
            prompt = self.PROMPT_TEMPLATE.format(context=context, k=k)
        return await ask_for_code(self, prompt, lambda tests: test_problem(tests, functions))


class SimpleTester(Role):
    name: str = "Bob"
    profile: str = "SimpleTester"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.set_actions([SimpleWriteTest])
        self._watch([SimpleWriteCode, SimpleWriteReview])

    async def _act(self) -> Message:
        logger.info(f"{self._setting}: to do {self.rc.todo}({self.rc.todo.name})")
        todo = self.rc.todo
        context = self.get_memories()  # all memories as context
        code_text = await todo.run(context, k=3)
        return Message(content=code_text, role=self.profile, cause_by=type(todo))


class SimpleWriteReview(Action):
    PROMPT_TEMPLATE: str = """
Context: {context}
Review the test cases and provide one critical comment:
"""
    name: str = "SimpleWriteReview"

    async def run(self, context: str) -> str:
        return await self._aask(self.PROMPT_TEMPLATE.format(context=context))


class SimpleReviewer(Role):
    name: str = "Charlie"
    profile: str = "SimpleReviewer"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.set_actions([SimpleWriteReview])
        self._watch([SimpleWriteTest])


# What the scripted model knows how to write: (keywords in the idea, function, code, test calls).
CANNED = [
    (("add", "sum of two"), "add", "def add(a, b):\n    return a + b",
     [("add(1, 2)", "3"), ("add(-1, -1)", "-2")]),
    (("product",), "product", "def product(numbers):\n    result = 1\n    for n in numbers:\n"
     "        result *= n\n    return result", [("product([2, 3, 4])", "24"), ("product([])", "1")]),
    (("fib",), "fib", "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
     "    return a", [("fib(10)", "55"), ("fib(0)", "0")]),
    (("reverse",), "reverse", "def reverse(text):\n    return text[::-1]",
     [("reverse('abc')", "'cba'"), ("reverse('')", "''")]),
]


def scripted_model(idea: str | None = None) -> FunctionLLM:
    """A canned model that answers the three prompts about ``idea``.

    It knows a few ideas (adding, a product, Fibonacci, reversing text); for any other it
    writes a stub named after the idea that raises NotImplementedError, and tests saying so.
    With no ``idea`` it reads the idea from each prompt (every prompt names it, or the code about it).
    """
    if idea is None:
        return FunctionLLM(lambda messages: scripted_model(messages[-1]["content"]).fn(messages))
    words = re.findall(r"[a-z]+", idea.lower())
    known = next((c for c in CANNED if any(k in idea.lower() for k in c[0])), None)
    if known is not None:
        _, name, code, checks = known
        tests = "\n\n".join(f"def test_{name}_{i}():\n    assert {call} == {want}" for i, (call, want) in
                             enumerate(checks, 1))
    else:
        name = "_".join(w for w in words if w not in {"a", "an", "the", "that", "write", "function"})[:40] or "solve"
        code = (f'def {name}(*args):\n    """{idea}"""\n'
                '    raise NotImplementedError("the scripted model cannot write this")')
        tests = (f"import pytest\n\ndef test_{name}_is_a_stub():\n    with pytest.raises(NotImplementedError):\n"
                 f"        {name}()")

    def answer(messages: list[dict]) -> str:
        prompt = messages[-1]["content"]
        if "Write a python function" in prompt:
            return f"```python\n{code}\n```"
        if "unit tests" in prompt:
            return f"```python\n{tests}\n```"
        return f"The tests of {name} miss unusual inputs (empty, negative, very large) for: {idea}."

    return FunctionLLM(answer)


def build_team(llm: object = None, investment: float = 3.0, tuning: Path | None = None) -> Team:
    """The coder, the tester and the reviewer (on the configured model unless ``llm`` is given): the team
    of ``multi_agents.evalset.yaml``; ``tuning``: a tuning file to apply (``rolecast optimize`` wrote one)."""
    team = Team(llm=llm, tuning=tuning)
    team.hire([SimpleCoder(), SimpleTester(), SimpleReviewer()])
    team.invest(investment=investment)
    return team


def scripted_team() -> Team:
    """:func:`build_team` on the canned model (``rolecast eval`` of the evalset without any model)."""
    return build_team(llm=scripted_model())


def default_tuning() -> Path | None:
    """The tuning ``rolecast optimize`` wrote for this team from its evalset (``TUNING``, beside this file),
    unless ``$ROLECAST_TUNING`` names another: the prompts as written stay MetaGPT's tutorial's."""
    return TUNING if TUNING.is_file() and not os.environ.get("ROLECAST_TUNING") else None


async def main(
    idea: str, investment: float = 3.0, n_round: int = 5, scripted: bool = False, console: bool = True,
    llm: object = None, strict: bool = False, tuned: bool = True,
) -> list[Message]:
    tuning = default_tuning() if tuned and not scripted else None
    if tuning is not None:
        print(f"tuning: {tuning.name} (written by rolecast optimize; --no-tuning for the prompts as written)")
    team = build_team(llm=scripted_model(idea) if scripted else llm, investment=investment, tuning=tuning)
    team.run_project(idea)
    history = await team.run(n_round=n_round, console=console)
    if not console:  # the console showed the conversation as it happened
        print("\n=== conversation ===")
        for msg in history:
            print(f"--- {msg.sent_from or msg.role} ({msg.cause_by.rsplit('.', 1)[-1]})\n{msg.content}\n")
        print("=== cost ===\n" + team.cost_manager.summary())
    # what the run produced, judged honestly: each artifact passed its check, or the summary says why not
    results = await verdicts(list(history))
    print("=== artifacts ===")
    for verdict in results:
        print(verdict.line())
    failed = [v.artifact for v in results if not v.passed]
    print(f"{len(results) - len(failed)} of {len(results)} artifacts passed their checks"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    if strict and failed:
        raise SystemExit(1)
    return history


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("idea", nargs="?", default="write a function that calculates the product of a list")
    parser.add_argument("--investment", type=float, default=3.0)
    parser.add_argument("--n-round", type=int, default=5)
    parser.add_argument("--scripted", action="store_true", help="use a canned model (no API key, no local model)")
    parser.add_argument("--no-console", action="store_true", help="no live view; print the conversation at the end")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when an artifact fails its check")
    parser.add_argument("--no-tuning", action="store_true", help=f"the prompts as written, without {TUNING.name}")
    args = parser.parse_args()
    enable_logging("INFO" if args.no_console else "WARNING")  # with the live view, logs would only clutter it
    run_script(main(args.idea, args.investment, args.n_round, args.scripted, console=not args.no_console,
                    strict=args.strict, tuned=not args.no_tuning))

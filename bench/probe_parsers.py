"""Crafted inputs against every parser of model output: time taken and what it raised.

Run by hand from a checkout's root (each probe in its own process, killed after
``--limit`` seconds, so a hang shows as a time-out, not a stuck terminal)::

    python bench/probe_parsers.py [--limit 30]

Every probe should finish in well under a second and end in ``ok`` or a
``RolecastError`` subclass; anything else (``RecursionError``, ``ValueError``, a
time-out) is a bug.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
import time

DEEP = "[" * 1000 + "]" * 1000
DEEP_OBJ = '{"a":' * 1000 + "1" + "}" * 1000

# name -> (python statements, expression evaluated last)
PROBES: dict[str, str] = {
    "choice: '1'+' '*2000+'x'": "from rolecast.llm.base import parse_choice; parse_choice('1' + ' ' * 2000 + 'x', 3)",
    "choice: '1'*4301": "from rolecast.llm.base import parse_choice; parse_choice('1' * 4301, 3)",
    "json: nested 1000 deep": f"from rolecast.core.jsonutil import extract_json; extract_json({DEEP!r})",
    "json: object nested 1000 deep": f"from rolecast.core.jsonutil import extract_json; extract_json({DEEP_OBJ!r})",
    "react: Action Input nested 1000 deep": (
        "from actions.loops.react import ReActOutputParser\n"
        "from actions.tools import FunctionRegistry, tool, arguments_from_text\n"
        "@tool\ndef f(a: int, b: int) -> int:\n    'add'\n    return a + b\n"
        f"p = ReActOutputParser().parse('Action: f\\nAction Input: ' + {DEEP_OBJ!r})\n"
        "arguments_from_text(FunctionRegistry.of(f).resolve('f'), p.tool_input)"
    ),
    "stepwise: [ACTION] nested 1000 deep": (
        f"from actions.loops.stepwise import parse_stepwise; parse_stepwise('[ACTION]' + {DEEP_OBJ!r})"
    ),
    "stepwise: '[ACTION]'*20000+'{'": (
        "from actions.loops.stepwise import parse_stepwise; parse_stepwise('[ACTION]' * 20000 + '{')"
    ),
    "sequential: repair regex, 111 chars": (
        "from actions.semantic_kernel.planners.sequential import parse_sequential_plan\n"
        "from actions.tools import FunctionRegistry\n"
        "parse_sequential_plan('<function.x a=' + 'aaa=' * 24 + '<', 'g', FunctionRegistry())"
    ),
    "sequential: '<plan>'*16000": (
        "from actions.semantic_kernel.planners.sequential import parse_sequential_plan\n"
        "from actions.tools import FunctionRegistry\n"
        "parse_sequential_plan('<plan>' * 16000, 'g', FunctionRegistry())"
    ),
    "sequential: &#1114112; in an attribute": (
        "from actions.semantic_kernel.planners.sequential import parse_sequential_plan\n"
        "from actions.tools import FunctionRegistry\n"
        "parse_sequential_plan('<plan><function.a.b x=\"&#1114112;\"/>', 'g', FunctionRegistry(),"
        " allow_missing_functions=True)"
    ),
    "sequential: &#xD800; in an attribute": (
        "from actions.semantic_kernel.planners.sequential import parse_sequential_plan\n"
        "from actions.tools import FunctionRegistry\n"
        "parse_sequential_plan('<plan><function.a.b x=\"&#xD800;\"/>', 'g', FunctionRegistry(),"
        " allow_missing_functions=True)"
    ),
    "message: instruct_content class 'this.X'": (
        "from memory import Message\n"
        "Message.from_json('{\"instruct_content\":{\"class\":\"this.X\",\"value\":{}}}')"
    ),
    "message: instruct_content value a list": (
        "from memory import Message\n"
        "Message.from_json('{\"instruct_content\":{\"class\":\"a.B\",\"value\":[1]}}')"
    ),
    "message: instruct_content key model_config": (
        "from memory import Message\n"
        "Message.from_json('{\"instruct_content\":{\"class\":\"a.B\",\"value\":{\"model_config\":1}}}')"
    ),
    "plan: resume_from a self-dependent plan": (
        "import asyncio\n"
        "from actions import Action\nfrom actions.plan_and_act import Plan, Task\nfrom roles import Role\n"
        "from rolecast.testing import ScriptedLLM\nfrom rolecast.context import Context\n"
        "class A(Action):\n    async def run(self, history):\n        return 'x'\n"
        "llm = ScriptedLLM([])\n"
        "role = Role(name='r', llm=llm, actions=[A(name='A')], react_mode='plan_and_act')\n"
        "role.set_context(Context(llm=llm))\n"
        "role.planner.resume_from(Plan(goal='g', tasks=[Task(task_id='1', dependent_task_ids=['1'],"
        " instruction='i', action='A')]))\n"
        "asyncio.run(role.run('g'))"
    ),
}

# each probe is written into this script as the body of probe() and run as the child's own program
RUNNER = """
import sys, time
import actions, memory, roles, rolecast.llm.base, rolecast.core.jsonutil  # imports are not what is timed
import actions.loops.stepwise, actions.semantic_kernel.planners.sequential, actions.plan_and_act

def probe():
{body}

t = time.perf_counter()
try:
    probe()
    outcome = "ok"
except BaseException as exc:
    from rolecast.errors import RolecastError
    kind = "typed" if isinstance(exc, RolecastError) else "UNTYPED"
    outcome = f"{kind} {type(exc).__name__}"
    if exc.__cause__ is not None:
        outcome += f" (from {type(exc.__cause__).__name__})"
if "this" in sys.modules:
    outcome += " -- IMPORTED 'this'"
print(f"{time.perf_counter() - t:.3f}s {outcome}")
"""


def script(code: str) -> str:
    """The child's program: ``code`` as the body of its ``probe()``, timed and its outcome printed."""
    return RUNNER.replace("{body}", textwrap.indent(code, "    "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=float, default=30.0, help="seconds before a probe is killed")
    args = parser.parse_args()
    for name, code in PROBES.items():
        began = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-c", script(code)], capture_output=True, text=True, timeout=args.limit
            )
            line = (done.stdout.strip().splitlines() or [done.stderr.strip()[-200:]])[-1]
        except subprocess.TimeoutExpired:
            line = f">{args.limit:.0f}s TIMED OUT after {time.perf_counter() - began:.1f}s"
        print(f"{name:45} {line}")


if __name__ == "__main__":
    main()

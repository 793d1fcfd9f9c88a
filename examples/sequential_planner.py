"""Semantic Kernel's sequential planner, as the seed article rebuilt it by hand.

    python examples/sequential_planner.py
    python examples/sequential_planner.py --scripted
    python examples/sequential_planner.py "帮忙写一首关于水哥的诗, 然后翻译为中文"

Two prompt functions, ``WriterPlugin.ShortPoem`` and ``WriterPlugin.Translate``, are
registered in a Kernel; the planner shows the model their manual and the goal, the
model answers with an XML plan, and the plan runs: the poem is saved as ``$POEM`` and
handed to Translate. Runs on the configured model (an API key, else the embedded local
model — a 135M model's plan may be poor, and the example still ends cleanly);
``--scripted`` replays a good run with a canned model (used by CI).
"""

from __future__ import annotations

import argparse

from loguru import logger

from actions import InputVariable, Kernel, SequentialPlanner
from actions.semantic_kernel import FunctionPlan
from rolecast import enable_logging
from rolecast.control.hooks import Invocation
from rolecast.errors import ConfigError, RolecastError
from rolecast.llm.base import LLMSettings
from rolecast.observe.console import run_script
from rolecast.testing import ScriptedLLM

GOAL = "Write a poem about John Doe, then translate it into Chinese."

SHORT_POEM_PROMPT = """Generate a short funny poem or limerick to explain the given event. Be creative and be funny. Let your imagination run wild.
Event:{{$input}}
"""  # noqa: E501

TRANSLATE_PROMPT = """Translate the input below into {{$language}}

MAKE SURE YOU ONLY USE {{$language}}.

{{$input}}

Translation:
"""

SCRIPTED_PLAN = """<plan>
    <!-- First, we create a short poem about "John Doe" -->
    <function.WriterPlugin.ShortPoem input="John Doe" setContextVariable="POEM"/>
    <!-- Then, we translate the poem into Chinese -->
    <function.WriterPlugin.Translate input="$POEM" language="Chinese" appendToResult="RESULT__FINAL_ANSWER"/>
</plan>
<!-- END -->"""

SCRIPTED_POEM = """There once was a fellow named Doe,
Who'd dance in the rain and the snow.
He slipped on a shoe,
Said "How do you do?"
And waltzed off the stage with a bow."""

SCRIPTED_TRANSLATION = """从前有个叫多伊的人，
在雨中雪里跳起舞来真精神。
他踩到一只鞋，
说声"你好呀"，
鞠个躬就华尔兹下了台门。"""


def build_kernel(scripted: bool) -> Kernel:
    """A kernel with the seed's two writer functions (and a canned model when scripted)."""
    llm = ScriptedLLM([SCRIPTED_PLAN, SCRIPTED_POEM, SCRIPTED_TRANSLATION]) if scripted else None
    kernel = Kernel(llm=llm)
    kernel.add_function(
        "WriterPlugin",
        prompt=SHORT_POEM_PROMPT,
        function_name="ShortPoem",
        description="Turn a scenario into a short and entertaining poem.",
        input_variables=[InputVariable(name="input", description="The scenario to turn into a poem.")],
        settings=LLMSettings(max_tokens=200, temperature=0.7),
    )
    kernel.add_function(
        "WriterPlugin",
        prompt=TRANSLATE_PROMPT,
        function_name="Translate",
        description="Translate the input into a language of your choice",
        input_variables=[
            InputVariable(name="input"),
            InputVariable(name="language", description="The language which will translate to"),
        ],
        settings=LLMSettings(max_tokens=300, temperature=0.2),
    )

    @kernel.on_invoking
    def announce(invocation: Invocation) -> None:
        args = {k: (str(v)[:40] + "…" if len(str(v)) > 40 else v) for k, v in invocation.arguments.items()}
        logger.info("calling {} {}", invocation.name, args)

    return kernel


async def main(goal: str = GOAL, scripted: bool = False) -> str | None:
    """Plan, print the plan, run it, print the result; returns the result text (None: no result)."""
    kernel = build_kernel(scripted)
    planner = SequentialPlanner(kernel, max_tries=3)
    try:
        with kernel.context.scope("planner"):  # the cost summary names who made the calls
            plan: FunctionPlan = await planner.create_plan(goal)
    except ConfigError as exc:
        print(f"No model to run on: {exc}")
        return None
    except RolecastError as exc:
        print(f"The model gave no usable plan: {exc}")
        raw = getattr(exc, "raw", None)
        if raw:
            shown = raw if len(raw) <= 800 else raw[:800] + " …"
            print(f"--- its last answer ---\n{shown}")
        return None

    print("=== plan ===")
    print(plan.to_xml())
    print()
    print(plan)
    if plan.is_empty:
        return None
    try:
        with kernel.context.scope("plan"):
            result = await plan.invoke(kernel)
    except RolecastError as exc:
        print(f"\nThe plan could not be carried out: {type(exc).__name__}: {exc}")
        return None
    print("\n=== result ===")
    print(result)
    print("\n=== cost ===\n" + kernel.context.cost_manager.summary())
    return str(result)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("goal", nargs="?", default=GOAL)
    parser.add_argument("--scripted", action="store_true", help="replay a good run with a canned model")
    args = parser.parse_args()
    if args.scripted and args.goal != GOAL:
        parser.error(f"--scripted replays a recorded run about {GOAL!r}; leave --scripted out to ask your own")
    enable_logging("INFO")
    run_script(main(args.goal, args.scripted))

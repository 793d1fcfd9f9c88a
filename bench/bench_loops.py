"""Benchmark: ReAct, stepwise and the sequential planner on the embedded model, free vs. grammar.

Each of 20 tasks — the seeds' Fibonacci and investment questions and poem-and-translate
goal, arithmetic, unit conversions, lookups in a small table — is given with the tools
it needs to ReAct (Qwen's and LangChain's prompts, alternately), Semantic Kernel's
stepwise loop and the sequential planner, on SmolLM2-135M-Instruct, twice:

* **free** — the model's answer as it writes it (the model is not told about grammars);
* **grammar** — each answer decoded under the loop's format grammar.

Every model answer of a loop is checked with the loop's own parser: does it parse
(a final answer, or a *registered* tool), and are a tool call's arguments valid for
the tool's parameters? Per run: did it reach a final answer (sequential: a plan that
ran), was that answer right, how long did it take?

    python bench/bench_loops.py            # 20 tasks, max 2 iterations per loop
    python bench/bench_loops.py --quick    # 1 task, 1 iteration: a smoke test

Prints a table and writes every answer plus the summary to ``bench/results/loops.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from actions import Kernel, Plugin, ReActAction, SequentialPlanner, StepwiseAction, kernel_function  # noqa: E402
from actions.loops.react import ReActOutputParser  # noqa: E402
from actions.loops.stepwise import parse_stepwise  # noqa: E402
from actions.semantic_kernel.planners.sequential import parse_sequential_plan  # noqa: E402
from actions.tools import FunctionRegistry, arguments_from_text, fit_arguments, python_tool  # noqa: E402
from rolecast.context import Context  # noqa: E402
from rolecast.errors import OutputParseError, RolecastError, ToolError  # noqa: E402
from rolecast.llm.base import BaseLLM, Completion, LLMSettings, Messages, StructuredRequest  # noqa: E402
from rolecast.llm.local.provider import LocalLLM  # noqa: E402

SETTINGS = LLMSettings(temperature=0.0, max_tokens=128, seed=1)


# ------------------------------------------------------------------ tools
class MathPlugin:
    """Arithmetic on two numbers."""

    @kernel_function(description="Add value to a value", name="Add")
    def add(self, input: Annotated[float, "the first number"], amount: Annotated[float, "the number to add"]) -> float:
        return input + amount

    @kernel_function(description="Subtracts value to a value", name="Subtract")
    def subtract(
        self, input: Annotated[float, "the first number"], amount: Annotated[float, "the number to subtract"]
    ) -> float:
        return input - amount

    @kernel_function(description="Multiply value to a value", name="Multiply")
    def multiply(
        self, input: Annotated[float, "the first number"], amount: Annotated[float, "the number to multiply"]
    ) -> float:
        return input * amount

    @kernel_function(description="Divide a value by a value", name="Divide")
    def divide(
        self, input: Annotated[float, "the number to divide"], amount: Annotated[float, "the divisor"]
    ) -> float:
        return input / amount


_UNITS = {"m": 1.0, "km": 1000.0, "cm": 0.01, "mile": 1609.344, "g": 1.0, "kg": 1000.0, "lb": 453.59237}
_ALIASES = {"meter": "m", "meters": "m", "kilometer": "km", "kilometers": "km", "centimeter": "cm",
            "centimeters": "cm", "miles": "mile", "gram": "g", "grams": "g", "kilogram": "kg",
            "kilograms": "kg", "pound": "lb", "pounds": "lb"}


class UnitPlugin:
    """Unit conversion."""

    @kernel_function(description="Convert a length or weight from one unit to another", name="Convert")
    def convert(
        self,
        input: Annotated[float, "the amount"],
        from_unit: Annotated[str, "the unit of the amount: m, km, cm, mile, g, kg or lb"],
        to_unit: Annotated[str, "the unit to convert to: m, km, cm, mile, g, kg or lb"],
    ) -> float:
        a = _ALIASES.get(from_unit.strip().lower(), from_unit.strip().lower())
        b = _ALIASES.get(to_unit.strip().lower(), to_unit.strip().lower())
        if a not in _UNITS or b not in _UNITS or (a in "g kg lb".split()) != (b in "g kg lb".split()):
            raise ToolError(f"cannot convert {from_unit} to {to_unit}")
        return input * _UNITS[a] / _UNITS[b]


TABLE = {
    "france": {"capital": "Paris", "currency": "euro", "population_millions": 68},
    "japan": {"capital": "Tokyo", "currency": "yen", "population_millions": 124},
    "kenya": {"capital": "Nairobi", "currency": "shilling", "population_millions": 55},
    "canada": {"capital": "Ottawa", "currency": "dollar", "population_millions": 40},
    "peru": {"capital": "Lima", "currency": "sol", "population_millions": 34},
}


class CountryPlugin:
    """Facts about countries from a small table."""

    @kernel_function(description="Look up a country's capital, currency and population", name="Lookup")
    def lookup(self, input: Annotated[str, "the country's name"]) -> str:
        row = TABLE.get(input.strip().lower())
        if row is None:
            raise ToolError(f"no country {input!r}; known: {', '.join(k.title() for k in TABLE)}")
        return json.dumps(row)


POEM_PROMPT = "Write a short poem of four lines about the event.\nEvent: {{$input}}\n"
TRANSLATE_PROMPT = "Translate the input below into {{$language}}.\n\n{{$input}}\n\nTranslation:\n"


def writer_kernel(llm: BaseLLM) -> Kernel:
    kernel = Kernel(llm=llm)
    kernel.add_function("WriterPlugin", prompt=POEM_PROMPT, function_name="ShortPoem",
                        description="Turn a scenario into a short and entertaining poem.",
                        settings=LLMSettings(max_tokens=80, temperature=0.0))
    kernel.add_function("WriterPlugin", prompt=TRANSLATE_PROMPT, function_name="Translate",
                        description="Translate the input into a language of your choice",
                        settings=LLMSettings(max_tokens=120, temperature=0.0))
    return kernel


# ------------------------------------------------------------------ tasks
def number(expected: float, tol: float = 0.01) -> Callable[[str], bool]:
    def check(answer: str) -> bool:
        values = [float(x.replace(",", "")) for x in re.findall(r"-?\d[\d,]*\.?\d*", answer)]
        return any(abs(v - expected) <= tol * max(1.0, abs(expected)) for v in values)

    return check


def words(*options: str) -> Callable[[str], bool]:
    return lambda answer: any(o.lower() in answer.lower() for o in options)


def chinese(answer: str) -> bool:
    return bool(re.search(r"[\u4e00-\u9fff]", answer))


@dataclass
class BenchTask:
    name: str
    question: str
    tools: str  # which tool set
    check: Callable[[str], bool] = field(repr=False)


TASKS = [
    BenchTask("fibonacci", "What is the 10th fibonacci number?", "python", number(55)),
    BenchTask("investment", "Figure out how much I have if first, my investment of 2130.23 dollars increased by "
              "23%, and then I spend $5 on a coffee", "math", number(2615.18)),
    BenchTask("poem", "Write a poem about John Doe, then translate it into Chinese.", "writer", chinese),
    BenchTask("mul", "What is 17 times 23?", "math", number(391)),
    BenchTask("add", "What is 1234 plus 4321?", "math", number(5555)),
    BenchTask("sub", "What is 100 minus 37?", "math", number(63)),
    BenchTask("div", "What is 144 divided by 12?", "math", number(12)),
    BenchTask("mul-dec", "What is 2.5 times 4?", "math", number(10)),
    BenchTask("add2", "Add 19 and 23.", "math", number(42)),
    BenchTask("sub2", "What is 1000 minus 1?", "math", number(999)),
    BenchTask("km-m", "How many meters are 5 kilometers?", "units", number(5000)),
    BenchTask("mile-km", "Convert 3 miles to kilometers.", "units", number(4.828)),
    BenchTask("kg-g", "How many grams are 2.5 kilograms?", "units", number(2500)),
    BenchTask("m-cm", "How many centimeters are 2 meters?", "units", number(200)),
    BenchTask("lb-kg", "How many kilograms are 10 pounds?", "units", number(4.536)),
    BenchTask("capital-fr", "What is the capital of France?", "table", words("Paris")),
    BenchTask("capital-jp", "What is the capital of Japan?", "table", words("Tokyo")),
    BenchTask("capital-ke", "What is the capital of Kenya?", "table", words("Nairobi")),
    BenchTask("currency-pe", "Which currency is used in Peru?", "table", words("sol")),
    BenchTask("pop-ca", "What is the population of Canada in millions?", "table", number(40)),
]
QUICK = ["capital-fr"]


def tool_set(kind: str, llm: BaseLLM) -> FunctionRegistry:
    if kind == "python":
        return FunctionRegistry.of(python_tool(name="python", timeout=10, memory_mb=512))
    if kind == "math":
        return FunctionRegistry.of(Plugin.from_object(MathPlugin()))
    if kind == "units":
        return FunctionRegistry.of(Plugin.from_object(UnitPlugin()))
    if kind == "table":
        return FunctionRegistry.of(Plugin.from_object(CountryPlugin()))
    return writer_kernel(llm).functions


# ------------------------------------------------------------------ recording
class Recorder(BaseLLM):
    """Passes calls to the embedded model, takes a grammar or not, and keeps every answer."""

    def __init__(self, inner: LocalLLM, constrained: bool):
        super().__init__(inner.model, inner.settings)
        self.inner = inner
        self.free = True
        self.supports_json_schema = True
        self.supports_grammar = constrained
        self.grammar_constrained = constrained
        self.answers: list[str] = []

    async def _complete(self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings,
                        structured: StructuredRequest | None = None, tools: list[dict[str, Any]] | None = None,
                        **extra: Any) -> Completion:
        completion = await self.inner._complete(messages, stop=stop, settings=settings, structured=structured, **extra)
        self.answers.append(completion.text)
        return completion


def _args_valid(fn: Any, arguments: Any) -> bool:
    try:
        fn.parse_arguments(arguments)
    except (ToolError, OutputParseError):
        return False
    return True


def classify_react(text: str, registry: FunctionRegistry) -> tuple[bool, bool | None]:
    """(parses, arguments valid — None when it is not a tool call)."""
    stripped = text.lstrip()
    if stripped.startswith("Thought:"):
        text = " " + stripped[len("Thought:"):].lstrip()
    try:
        parsed = ReActOutputParser().parse(text)
    except OutputParseError:
        return False, None
    if not hasattr(parsed, "tool"):
        return True, None
    fn = registry.resolve(parsed.tool)
    if fn is None:
        return False, None
    try:
        raw = parsed.tool_input
        arguments = raw if isinstance(raw, dict) else arguments_from_text(fn, raw)
    except (OutputParseError, ToolError):
        return True, False
    return True, _args_valid(fn, arguments)


def classify_stepwise(text: str, registry: FunctionRegistry) -> tuple[bool, bool | None]:
    step = parse_stepwise(text.strip())
    if step.final_answer:
        return True, None
    if step.observation or not step.action:
        return False, None  # a parse error, or a thought with no action (no progress)
    fn = registry.resolve(step.action)
    if fn is None:
        return False, None
    return True, _args_valid(fn, fit_arguments(fn, step.action_variables))


# ------------------------------------------------------------------ runs
@dataclass
class Run:
    loop: str
    mode: str
    task: str
    answers: list[str]
    parsed: int
    tool_calls: int
    valid_args: int
    final: bool
    right: bool
    seconds: float
    output: str


async def run_loop(loop: str, task: BenchTask, base: LocalLLM, constrained: bool, iterations: int,
                   index: int) -> Run:
    llm = Recorder(base, constrained)
    registry = tool_set(task.tools, base)
    started = time.monotonic()
    output, final = "", False
    if loop == "react":
        style = "qwen" if index % 2 == 0 else "langchain"
        action: Any = ReActAction(tools=[registry], llm=llm, prompt_style=style, max_iterations=iterations,
                                  settings=SETTINGS, record_steps=False)
        classify = classify_react
    else:
        action = StepwiseAction(tools=[registry], llm=llm, max_iterations=iterations, settings=SETTINGS,
                                record_steps=False)
        classify = classify_stepwise
    with Context().scope("bench"):
        result = await action.run(task.question)
    output, final = result.output, result.stopped_reason == "finished"
    verdicts = [classify(a, registry) for a in llm.answers]
    return Run(loop, "grammar" if constrained else "free", task.name, llm.answers,
               sum(p for p, _ in verdicts), sum(v is not None for _, v in verdicts),
               sum(bool(v) for _, v in verdicts), final, final and task.check(output),
               time.monotonic() - started, output)


async def run_planner(task: BenchTask, base: LocalLLM, constrained: bool) -> Run:
    llm = Recorder(base, constrained)
    registry = tool_set(task.tools, base)
    planner = SequentialPlanner(registry, llm=llm, max_tries=1, settings={"max_tokens": 256, "seed": 1})
    started = time.monotonic()
    output, final, steps, valid = "", False, 0, 0
    with Context().scope("bench"):
        try:
            plan = await planner.create_plan(task.question)
            steps = len(plan.steps)
            valid = sum(set(s.parameters) <= {p.name for p in registry.get(s.function).parameters} for s in plan)
            if not plan.is_empty:
                output = str(await plan.invoke(registry))
                final = True
        except RolecastError as exc:
            output = f"{type(exc).__name__}: {exc}"
    parsed = 0
    for answer in llm.answers:
        try:
            parse_sequential_plan(answer, task.question, registry)
            parsed += 1
        except OutputParseError:
            pass
    return Run("sequential", "grammar" if constrained else "free", task.name, llm.answers, parsed, steps, valid,
               final, final and task.check(output), time.monotonic() - started, output[:500])


def summarize(runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    for loop in ("react", "stepwise", "sequential"):
        for mode in ("free", "grammar"):
            group = [r for r in runs if r.loop == loop and r.mode == mode]
            if not group:
                continue
            steps = sum(len(r.answers) for r in group)
            calls = sum(r.tool_calls for r in group)
            rows.append({
                "loop": loop, "mode": mode, "runs": len(group), "steps": steps,
                "parsed": sum(r.parsed for r in group) / max(1, steps),
                "valid_args": sum(r.valid_args for r in group) / calls if calls else None,
                "tool_calls": calls,
                "final": sum(r.final for r in group) / len(group),
                "right": sum(r.right for r in group) / len(group),
                "mean_s": statistics.mean(r.seconds for r in group),
            })
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:.0f} %"

    lines = ["| loop | decoding | steps that parse | tool calls with valid arguments | runs reaching a final answer "
             "| right answers | mean latency per run |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['loop']} | {r['mode']} | {pct(r['parsed'])} ({r['steps']}) | "
                     f"{pct(r['valid_args'])} ({r['tool_calls']}) | {pct(r['final'])} | {pct(r['right'])} | "
                     f"{r['mean_s']:.1f} s |")
    return "\n".join(lines)


async def run(quick: bool = False, iterations: int | None = None, out: Path | None = None,
              n_tasks: int | None = None) -> dict[str, Any]:
    """Run the benchmark; returns ``{"rows": [...], "runs": [...]}`` and writes it to ``out``.

    ``n_tasks`` runs only the first tasks (a shorter run, for before/after comparisons).
    """
    base = LocalLLM()
    tasks = [t for t in TASKS if t.name in QUICK] if quick else TASKS[:n_tasks] if n_tasks else TASKS
    limit = iterations or (1 if quick else 2)
    runs: list[Run] = []
    for i, task in enumerate(tasks):
        for constrained in (False, True):
            runs.append(await run_loop("react", task, base, constrained, limit, i))
            runs.append(await run_loop("stepwise", task, base, constrained, limit, i))
            runs.append(await run_planner(task, base, constrained))
        print(f"[{i + 1}/{len(tasks)}] {task.name} done", file=sys.stderr, flush=True)
    rows = summarize(runs)
    result = {"rows": rows, "runs": [asdict(r) for r in runs], "tasks": len(tasks), "max_iterations": limit}
    if out is not None:
        write(out, result)
    return result


def write(out: Path, result: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 task, 1 iteration")
    parser.add_argument("--iterations", type=int, default=None, help="max iterations of ReAct and stepwise")
    parser.add_argument("--tasks", type=int, default=None, help="only the first N tasks")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "loops.json")
    args = parser.parse_args()
    results = asyncio.run(run(args.quick, args.iterations, args.out, args.tasks))
    print(report(results["rows"]))

"""Benchmark: how often the multi-agent example's coder and tester give well-formed artifacts.

For each idea, the coder (SimpleWriteCode) and the tester (SimpleWriteTest) of
``examples/build_customized_multi_agents.py`` run for two rounds on the configured
model (by default the embedded SmolLM2-135M). An artifact is *well formed* when

* the code parses and defines a function, and
* the tests parse, define a ``test_…`` function, and call a function the code defines

(the example's own :func:`code_problem` / :func:`test_problem`, loaded from this checkout,
judge every side alike). ``--example`` names the example file to run, so the same
harness measures an older version (``git show main:examples/... > /tmp/old.py``; put
the old framework first on ``PYTHONPATH`` to measure it all).

    python bench/bench_artifacts.py                       # 12 ideas, writes bench/results/artifacts.json
    python bench/bench_artifacts.py --example /tmp/old.py --out bench/results/artifacts-before.json

The same 12 ideas are an evalset, ``bench/artifacts.evalset.yaml`` (its team is :func:`build_pair`):
``rolecast eval bench/artifacts.evalset.yaml --repeat 3`` runs each idea three times as durable
runs and checks more than the form — the code runs, the tests pass against it, in the sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

IDEAS = [
    "write a function that adds two numbers",
    "write a function that calculates the product of a list",
    "write a function that reverses a string",
    "write a function that returns the n-th fibonacci number",
    "write a function that checks whether a number is prime",
    "write a function that counts the vowels in a string",
    "write a function that returns the largest element of a list",
    "write a function that converts celsius to fahrenheit",
    "write a function that checks whether a string is a palindrome",
    "write a function that computes the factorial of n",
    "write a function that removes duplicates from a list keeping the order",
    "write a function that returns the average of a list of numbers",
]


def load(path: Path, name: str) -> ModuleType:
    """The example module at ``path`` (a file of this benchmark's choosing, never model data)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build_pair() -> Any:
    """The example's coder and tester on the configured model (the team of ``artifacts.evalset.yaml``)."""
    from environment import Team

    if str(ROOT / "examples") not in sys.path:
        sys.path.insert(0, str(ROOT / "examples"))  # the example imports its sibling artifact_checks
    example = sys.modules.get("bench_example") or load(ROOT / "examples" / "build_customized_multi_agents.py",
                                                       "bench_example")
    team = Team()
    team.hire([example.SimpleCoder(), example.SimpleTester()])
    team.invest(3.0)
    return team


async def one(example: ModuleType, judge: ModuleType, idea: str) -> dict[str, Any]:
    from environment import Team

    try:
        team = Team(store=None)  # no run log for a benchmark
    except TypeError:  # a version before the run store
        team = Team()
    team.hire([example.SimpleCoder(), example.SimpleTester()])
    team.invest(3.0)
    team.run_project(idea)
    started = time.perf_counter()
    history = await team.run(n_round=2)
    seconds = time.perf_counter() - started
    code = next((m.content for m in history if m.cause_by.endswith(".SimpleWriteCode")), "")
    tests = next((m.content for m in history if m.cause_by.endswith(".SimpleWriteTest")), "")
    code_why = judge.code_problem(code)
    test_why = judge.test_problem(tests, judge.function_names(code))
    return {
        "idea": idea, "code_ok": code_why is None, "code_problem": code_why, "tests_ok": test_why is None,
        "tests_problem": test_why, "calls": team.cost_manager.total.calls, "seconds": round(seconds, 1),
        "code": code, "tests": tests,
    }


async def main(example_path: Path, n: int) -> dict[str, Any]:
    sys.path.insert(0, str(example_path.parent))  # the example imports its sibling artifact_checks
    example = load(example_path, "bench_example")
    judge = load(ROOT / "examples" / "artifact_checks.py", "bench_judge")
    rows = []
    for idea in IDEAS[:n]:
        row = await one(example, judge, idea)
        rows.append(row)
        print(f"{row['code_ok']!s:5} {row['tests_ok']!s:5} {row['calls']:2} calls {row['seconds']:6.1f}s  {idea}",
              flush=True)
    summary = {
        "example": str(example_path), "ideas": len(rows),
        "code_well_formed": sum(r["code_ok"] for r in rows), "tests_well_formed": sum(r["tests_ok"] for r in rows),
        "both_well_formed": sum(r["code_ok"] and r["tests_ok"] for r in rows),
        "calls": sum(r["calls"] for r in rows), "seconds": round(sum(r["seconds"] for r in rows), 1),
    }
    print(json.dumps(summary))
    return {"summary": summary, "runs": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", type=Path, default=ROOT / "examples" / "build_customized_multi_agents.py")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "artifacts.json")
    parser.add_argument("-n", type=int, default=len(IDEAS))
    args = parser.parse_args()
    results = asyncio.run(main(args.example, args.n))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))

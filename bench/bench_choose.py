"""Benchmark: MetaGPT's state-selection prompt on the embedded model, free answer vs. grammar.

For each of N varied conversations (roles, histories, 2–12 states) the STATE_TEMPLATE
prompt is answered twice by SmolLM2-135M-Instruct:

* **unconstrained** — a free answer, parsed the way MetaGPT does (the first digit
  found, "-1" when there is none, then a range check); also parsed strictly
  (:func:`rolecast.llm.parse_choice`: one whole number in range, nothing else);
* **constrained** — :meth:`LocalLLM.choose`, decoded under a GBNF grammar.

Prints a table and writes every answer plus the summary to ``bench/results/choose.json``.

    python bench/bench_choose.py            # 36 conversations
    python bench/bench_choose.py --quick    # 6, for a smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from rolecast.errors import InvalidChoice  # noqa: E402
from rolecast.llm import parse_choice  # noqa: E402
from rolecast.llm.local.provider import LocalLLM  # noqa: E402

# MetaGPT's role prefix and STATE_TEMPLATE, exactly as roles use them
from roles import PREFIX_TEMPLATE, STATE_TEMPLATE  # noqa: E402

ROLES = [
    ("Engineer", "Alex", "write elegant, readable, extensible, efficient code"),
    ("QaEngineer", "Edward", "write comprehensive and robust tests to ensure codes will work as expected"),
    ("Product Manager", "Alice", "efficiently create a successful product that meets market demands"),
    ("Architect", "Bob", "design a concise, usable, complete software system"),
    ("Project Manager", "Eve", "break down tasks according to the design and assign them"),
    ("Data Analyst", "David", "analyse the data and report the findings clearly"),
    ("SimpleCoder", "Alice", "write a python function that solves the user's request"),
    ("Researcher", "Sarah", "gather information and summarize it into a report"),
]
ACTIONS = [
    "WritePRD", "WriteDesign", "WriteTasks", "WriteCode", "WriteCodeReview", "WriteTest",
    "RunCode", "DebugError", "SearchWeb", "SummarizeReport", "AnalyzeData", "WriteDocs",
    "FixBug", "DeployService",
]
HISTORY_LINES = [
    "Human: Write a function that returns the n-th Fibonacci number.",
    "Human: Build a CLI snake game in Python.",
    "Human: Create a to-do list web app with user accounts.",
    "Human: Analyse last month's sales data and find the best-selling region.",
    "Product Manager: The PRD is written: users can add, edit and delete tasks.",
    "Architect: The system design uses FastAPI, SQLite and a React front end.",
    "Engineer: def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)",
    "QaEngineer: 3 tests written; test_fib_negative fails with RecursionError.",
    "Engineer: Fixed the recursion error by validating that n >= 0.",
    "QaEngineer: All 12 tests pass.",
    "Project Manager: Tasks assigned: main.py to Alex, tests to Edward.",
    "Researcher: Found 5 sources on the topic; summary pending.",
    "Engineer: RunCode output: Traceback (most recent call last): KeyError: 'user_id'",
    "Data Analyst: Loaded sales.csv, 10,000 rows, 8 columns.",
    "Human: Please review the code before merging.",
]


@dataclass
class Case:
    """One state-selection situation."""

    profile: str
    name: str
    goal: str
    history: list[str]
    states: list[str]
    previous_state: int

    @property
    def n(self) -> int:
        return len(self.states)

    def prompt(self) -> str:
        prefix = PREFIX_TEMPLATE.format(profile=self.profile, name=self.name, goal=self.goal)
        return prefix + STATE_TEMPLATE.format(
            history="\n".join(self.history),
            previous_state=self.previous_state,
            states="\n".join(f"{i}. {s}" for i, s in enumerate(self.states)),
            n_states=self.n - 1,
        )


def make_cases(count: int, seed: int = 7) -> list[Case]:
    """``count`` varied conversations, 2–12 states each (every n is covered when count ≥ 11)."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        profile, name, goal = ROLES[i % len(ROLES)]
        n = 2 + i % 11
        history = rng.sample(HISTORY_LINES, rng.randint(1, 5))
        cases.append(Case(profile, name, goal, history, rng.sample(ACTIONS, n), rng.randint(-1, n - 1)))
    return cases


_METAGPT_DIGIT = re.compile(r"(?<!-)[0-9]")


def metagpt_parse(answer: str, n: int) -> int | None:
    """MetaGPT's parse: the first digit found (``"-1"`` if none), then a range check.

    Returns the state, or None where MetaGPT logs "Invalid answer" (it then stops with -1).
    """
    found = _METAGPT_DIGIT.findall(answer.strip())
    state = found[0] if found else "-1"
    value = int(state)
    return value if -1 <= value < n else None


def strict_parse(answer: str, n: int) -> int | None:
    try:
        return parse_choice(answer, n)
    except InvalidChoice:
        return None


async def run(cases: list[Case], llm: LocalLLM, max_tokens: int) -> list[dict[str, Any]]:
    rows = []
    settings = {"temperature": 0.0, "seed": 0}
    for case in cases:
        prompt = case.prompt()
        start = time.perf_counter()
        answer = await llm.ask(prompt, settings={**settings, "max_tokens": max_tokens})
        free_latency = time.perf_counter() - start
        start = time.perf_counter()
        chosen: int | None
        try:
            chosen = await llm.choose(prompt, case.n, settings=settings)
        except InvalidChoice:  # cannot happen under the grammar; counted if it ever does
            chosen = None
        constrained_latency = time.perf_counter() - start
        rows.append({
            **asdict(case), "n": case.n,
            "free_answer": answer,
            "free_metagpt": metagpt_parse(answer, case.n),
            "free_metagpt_found_digit": bool(_METAGPT_DIGIT.search(answer)),
            "free_strict": strict_parse(answer, case.n),
            "free_latency_s": free_latency,
            "constrained": chosen,
            "constrained_latency_s": constrained_latency,
        })
    return rows


def _counts(values: list[Any]) -> dict[str, int]:
    """How often each answer was given, most common first (a parse that always says 1 is not choosing)."""
    counts: dict[str, int] = {}
    for v in values:
        counts[str(v)] = counts.get(str(v), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    total = len(rows)

    def share(pred: Any) -> float:
        return sum(1 for r in rows if pred(r)) / total

    return {
        "conversations": total,
        "unconstrained": {
            # in range after MetaGPT's parse, with a digit really found (no silent "-1" default)
            "valid_share_metagpt_parse": share(
                lambda r: r["free_metagpt"] is not None and r["free_metagpt_found_digit"]
            ),
            "in_range_share_metagpt_parse_incl_default": share(lambda r: r["free_metagpt"] is not None),
            "valid_share_strict_parse": share(lambda r: r["free_strict"] is not None),
            "mean_latency_s": statistics.fmean(r["free_latency_s"] for r in rows),
            "answers_metagpt_parse": _counts([r["free_metagpt"] for r in rows]),
        },
        "constrained": {
            "valid_share": share(lambda r: r["constrained"] is not None),
            "mean_latency_s": statistics.fmean(r["constrained_latency_s"] for r in rows),
            "answers": _counts([r["constrained"] for r in rows]),
        },
    }


def print_table(summary: dict[str, Any], model: str) -> None:
    free, cons = summary["unconstrained"], summary["constrained"]
    print(f"\nstate selection on {model}, {summary['conversations']} conversations (2-12 states)\n")
    print(f"{'method':<44} {'valid':>7} {'mean latency':>13}")
    print("-" * 66)
    print(f"{'unconstrained, MetaGPT parse (first digit)':<44} "
          f"{free['valid_share_metagpt_parse']:>7.0%} {free['mean_latency_s']:>12.3f}s")
    print(f"{'unconstrained, strict parse (whole number)':<44} "
          f"{free['valid_share_strict_parse']:>7.0%} {free['mean_latency_s']:>12.3f}s")
    print(f"{'constrained, LocalLLM.choose (GBNF grammar)':<44} "
          f"{cons['valid_share']:>7.0%} {cons['mean_latency_s']:>12.3f}s")
    print("\nstates chosen (state: times)")
    print(f"  unconstrained, MetaGPT parse: {free['answers_metagpt_parse']}")
    print(f"  constrained:                  {cons['answers']}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="6 conversations instead of 36")
    parser.add_argument("--count", type=int, default=None, help="number of conversations")
    parser.add_argument("--max-tokens", type=int, default=128, help="cap on the free answer's length")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "choose.json")
    args = parser.parse_args(argv)
    count = args.count or (6 if args.quick else 36)

    llm = LocalLLM()
    getattr(llm, "engine", None) if hasattr(type(llm), "engine") else llm.llama  # load before timing
    rows = asyncio.run(run(make_cases(count), llm, args.max_tokens))
    summary = summarize(rows)
    print_table(summary, llm.model)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": llm.model, "summary": summary, "rows": rows}, indent=2))
    print(f"\nwritten to {args.out}")
    return summary


if __name__ == "__main__":
    main()

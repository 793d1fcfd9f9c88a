"""A data analyst in ``plan_and_act`` mode: plan the work, then load, analyse and report.

    python examples/data_plan.py
    python examples/data_plan.py --scripted
    python examples/data_plan.py --checkpoint plan.json     # resume an interrupted run
    python examples/data_plan.py --human-review             # accept or reject each result

The role's model writes a plan — tasks with ids, dependencies and the action each uses
(LoadData, Analyse, WriteReport) — which is checked as a DAG and run in topological
order; independent tasks run side by side (``planner_concurrency=2``). Each result is
reviewed (by a rule, or by you with ``--human-review``); a failure or a rejection makes
the role re-plan the remaining work. Runs on the configured model (an API key, else the
embedded local model: a 135M model's plan may be odd, and the run still ends cleanly);
``--scripted`` replays a good run with a canned model (used by CI).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
from collections import defaultdict
from typing import Any

from actions import Action
from actions.plan_and_act import PlanRunner, Review, Task
from environment import Team
from memory import Message
from rolecast import enable_logging
from rolecast.errors import ConfigError, RolecastError
from rolecast.llm.base import LLMSettings
from rolecast.observe.console import run_script
from rolecast.testing import Call, FunctionLLM
from roles import Role

GOAL = "Analyse last year's sales by region and by quarter, then write a short report for the board."

SALES_CSV = """region,quarter,revenue
North,Q1,120
North,Q2,135
North,Q3,150
North,Q4,170
South,Q1,90
South,Q2,80
South,Q3,95
South,Q4,110
West,Q1,60
West,Q2,75
West,Q3,85
West,Q4,100
"""


def load_rows() -> list[dict[str, Any]]:
    return [{**row, "revenue": float(row["revenue"])} for row in csv.DictReader(io.StringIO(SALES_CSV))]


class LoadData(Action):
    """Load the sales table (region, quarter, revenue)."""

    name: str = "LoadData"
    desc: str = "Load the sales data table (region, quarter, revenue)."

    async def run(self, history: list[Message]) -> str:
        rows = load_rows()
        regions = sorted({r["region"] for r in rows})
        return f"Loaded {len(rows)} rows with columns region, quarter, revenue; regions: {', '.join(regions)}."


class Analyse(Action):
    """Compute revenue totals by region and/or by quarter (the task's instruction says which)."""

    name: str = "Analyse"
    desc: str = "Compute revenue statistics by region or by quarter from the loaded data."

    async def run(self, history: list[Message]) -> str:
        instruction = (history[-1].content if history else "").split("\n", 1)[0].lower()
        rows = load_rows()
        parts = []
        if "quarter" in instruction or "region" not in instruction:
            by_quarter: dict[str, float] = defaultdict(float)
            for r in rows:
                by_quarter[r["quarter"]] += r["revenue"]
            growth = (by_quarter["Q4"] - by_quarter["Q1"]) / by_quarter["Q1"] * 100
            quarters = ", ".join(f"{q} {v:.0f}" for q, v in sorted(by_quarter.items()))
            parts.append(f"Revenue by quarter: {quarters} (Q1→Q4 growth {growth:.0f}%).")
        if "region" in instruction or "quarter" not in instruction:
            by_region: dict[str, float] = defaultdict(float)
            for r in rows:
                by_region[r["region"]] += r["revenue"]
            total = sum(by_region.values())
            regions = ", ".join(f"{k} {v:.0f} ({v / total:.0%})" for k, v in sorted(by_region.items()))
            parts.append(f"Revenue by region: {regions}; total {total:.0f}.")
        return " ".join(parts)


class WriteReport(Action):
    """Write the report from the analysis results (one model call)."""

    name: str = "WriteReport"
    desc: str = "Write a short report for the board from the analysis results."
    settings: LLMSettings | None = LLMSettings(max_tokens=200)  # a board report is short

    PROMPT: str = (
        "Write a short report (at most 5 sentences) for the company's board.\n"
        "Goal: {goal}\n\nFindings:\n{findings}\n\nReport:"
    )

    async def run(self, history: list[Message]) -> str:
        findings = [m.content for m in history if m.cause_by.endswith("Analyse")]
        if not findings:  # a plan without an analysis step: use the task's own input
            findings = [history[-1].content] if history else []
        report = await self._aask(self.PROMPT.format(goal=GOAL, findings="\n".join(findings)))
        return report.strip() or "(the model wrote an empty report)"


class DataAnalyst(Role):
    name: str = "Dana"
    profile: str = "DataAnalyst"
    goal: str = "turn sales data into a clear report"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.set_actions([LoadData, Analyse, WriteReport])
        self._set_react_mode("plan_and_act")


SCRIPTED_PLAN = {
    "tasks": [
        {"task_id": "1", "dependent_task_ids": [], "instruction": "Load the sales data", "action": "LoadData"},
        {"task_id": "2", "dependent_task_ids": ["1"], "instruction": "Revenue by region", "action": "Analyse"},
        {"task_id": "3", "dependent_task_ids": ["1"], "instruction": "Revenue by quarter", "action": "Analyse"},
        {
            "task_id": "4",
            "dependent_task_ids": ["2", "3"],
            "instruction": "Write the board report from both analyses",
            "action": "WriteReport",
        },
    ]
}

SCRIPTED_REPORT = (
    "Revenue reached 1,270 last year. North led with 45% of sales, South followed with 30% and West "
    "with 25%. Every region grew through the year, and Q4 revenue was 41% above Q1. We recommend "
    "investing further in North and in West, the fastest-growing region."
)


def scripted_model() -> FunctionLLM:
    """A canned model: the plan for a WritePlan request, the report for anything else."""

    def answer(messages: list[dict[str, Any]], call: Call) -> str:
        if call.structured is not None and call.structured.name == "PlanOutput":
            return json.dumps(SCRIPTED_PLAN)
        return SCRIPTED_REPORT

    return FunctionLLM(answer)


_TERMINAL = asyncio.Lock()  # tasks run side by side; their questions must not


async def ask_a_human(task: Task, result: str) -> Review:
    """A reviewer that asks at the terminal (``--human-review``)."""
    question = f"\n[{task.task_id}] {task.instruction}\n{result}\nAccept? [Y/n or feedback] "
    async with _TERMINAL:
        reply = (await asyncio.to_thread(input, question)).strip()
    if reply.lower() in ("", "y", "yes"):
        return Review(ok=True)
    return Review(ok=False, feedback="rejected" if reply.lower() in ("n", "no") else reply)


async def main(
    goal: str = GOAL, scripted: bool = False, checkpoint: str | None = None, human_review: bool = False
) -> str | None:
    """Run the analyst; print the plan, each task's result and the report. Returns the report."""
    team = Team(llm=scripted_model() if scripted else None)
    analyst = DataAnalyst(planner_concurrency=2)
    # fallback: a model too small to write a valid task graph still gets the work done, in order
    analyst.planner = PlanRunner(
        max_replans=2,
        max_tasks=4,
        checkpoint=checkpoint,
        reviewer=ask_a_human if human_review else None,
        fallback="by_order",
    )
    team.hire([analyst])
    team.invest(1.0)
    team.run_project(goal)
    try:
        await team.run(n_round=2)
    except ConfigError as exc:
        print(f"No model to run on: {exc}")
        return None
    except RolecastError as exc:
        print(f"The analyst could not finish: {type(exc).__name__}: {exc}")
        return None
    finally:
        plan = analyst.planner.plan
        if plan is not None:
            print("=== plan ===")
            print(plan.describe())
            print("\n=== task results ===")
            for task in plan.ordered():
                print(f"[{task.task_id}] {task.action}: {task.result or '(not run)'}")
    report = plan.ordered()[-1].result if plan is not None and plan.is_done else None
    print("\n=== report ===")
    print(report or "(none)")
    print("\n=== cost ===\n" + team.cost_manager.summary())
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("goal", nargs="?", default=GOAL)
    parser.add_argument("--scripted", action="store_true", help="replay a good run with a canned model")
    parser.add_argument("--checkpoint", help="save the plan here after every step, and resume from it")
    parser.add_argument("--human-review", action="store_true", help="review each task's result yourself")
    args = parser.parse_args()
    if args.scripted and args.goal != GOAL:
        parser.error(f"--scripted replays a recorded run about {GOAL!r}; leave --scripted out to ask your own")
    enable_logging("INFO")
    run_script(main(args.goal, args.scripted, args.checkpoint, args.human_review))

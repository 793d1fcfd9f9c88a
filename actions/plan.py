"""Plans for ``plan_and_act``: tasks with ids and dependencies over a role's actions.

:class:`WritePlan` asks the model for a plan as structured output. The output model is
built for the role at hand — its ``action`` field admits only the role's action names —
so a model with constrained decoding cannot name an unknown action, and every plan is
checked as a DAG with networkx (duplicate ids, unknown dependencies, cycles). Errors
go back to the model; after the allowed re-asks a :class:`~rolecast.errors.PlanError`
carries them.

A :class:`Plan` is a pydantic model: ``plan.model_dump_json()`` saves a run (results,
reviews, the number of re-plans used) and ``Plan.model_validate_json(text)`` — or
:meth:`Plan.load` — brings it back, so a run can resume without redoing finished tasks.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar, cast

from pydantic import BaseModel, Field, create_model

from rolecast.errors import OutputParseError, PlanError
from rolecast.llm.base import LLMSettings

from .action import Action

M = TypeVar("M", bound=BaseModel)


class Task(BaseModel):
    """One step of a plan: what to do, with which action, after which tasks; and how it went."""

    task_id: str
    dependent_task_ids: list[str] = Field(default_factory=list)
    instruction: str
    action: str = Field(description="name of the action that performs the task")
    result: str = ""
    is_finished: bool = False
    is_success: bool = False
    feedback: str = Field(default="", description="the reviewer's feedback on the last result")
    attempts: int = 0


class Review(BaseModel):
    """A reviewer's verdict on a task's result: accepted (``ok``) or not, and why."""

    ok: bool = True
    feedback: str = ""


class Plan(BaseModel):
    """A goal and its tasks. Serialises with pydantic, so a run can be saved and resumed."""

    goal: str
    tasks: list[Task] = Field(default_factory=list)
    replans: int = Field(default=0, description="re-plans used so far (bounded by the planner)")

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise KeyError(task_id)

    def errors(self, action_names: Sequence[str] | None = None, done_ids: Sequence[str] = ()) -> list[str]:
        """Everything wrong with this plan, in words the model can fix; empty if valid.

        ``done_ids`` are tasks finished earlier (kept across a re-plan) that new tasks
        may depend on.
        """
        import networkx as nx  # only when a plan is checked

        problems: list[str] = []
        if not self.tasks:
            problems.append("the plan has no tasks")
        ids = [t.task_id for t in self.tasks]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            problems.append(f"duplicate task ids: {dupes}")
        known = set(ids) | set(done_ids)
        for t in self.tasks:
            missing = [d for d in t.dependent_task_ids if d not in known]
            if missing:
                problems.append(f"task {t.task_id!r} depends on unknown task ids {missing}")
            if t.task_id in t.dependent_task_ids:
                problems.append(f"task {t.task_id!r} depends on itself")
            if action_names is not None and t.action not in action_names:
                problems.append(f"task {t.task_id!r} uses unknown action {t.action!r}; use one of {list(action_names)}")
        graph = self.graph()
        if not nx.is_directed_acyclic_graph(graph):
            cycle = nx.find_cycle(graph)
            problems.append("the dependencies form a cycle: " + " -> ".join(f"{a}" for a, _ in cycle))
        return list(dict.fromkeys(problems))  # one line per distinct problem

    def graph(self) -> Any:
        """The task graph (edges point from a dependency to its dependant)."""
        import networkx as nx

        graph = nx.DiGraph()
        known = {t.task_id for t in self.tasks}
        for t in self.tasks:
            graph.add_node(t.task_id)
            for dep in t.dependent_task_ids:
                if dep in known:
                    graph.add_edge(dep, t.task_id)
        return graph

    def ordered(self) -> list[Task]:
        """The tasks in topological order, ties broken by their order in the plan."""
        import networkx as nx

        position = {t.task_id: i for i, t in enumerate(self.tasks)}
        order = nx.lexicographical_topological_sort(self.graph(), key=lambda n: position[n])
        return [self.task(task_id) for task_id in order]

    @property
    def remaining(self) -> list[Task]:
        """Unfinished tasks, in topological order."""
        return [t for t in self.ordered() if not t.is_finished]

    @property
    def finished(self) -> list[Task]:
        return [t for t in self.tasks if t.is_finished]

    @property
    def is_done(self) -> bool:
        """Every task finished (an empty plan is not done: there is nothing to show for it)."""
        return bool(self.tasks) and all(t.is_finished for t in self.tasks)

    def ready(self) -> list[Task]:
        """Unfinished tasks whose dependencies are all finished: they may run now, together."""
        done = {t.task_id for t in self.tasks if t.is_finished}
        return [t for t in self.remaining if all(d in done for d in t.dependent_task_ids)]

    def merge_replan(self, fresh: Plan, tag: str) -> Plan:
        """Finished tasks plus ``fresh``'s tasks; fresh ids that clash with finished ones get ``tag``.

        A fresh task may depend on a finished task by its id.
        """
        done = self.finished
        clash = {t.task_id for t in fresh.tasks} & {t.task_id for t in done}

        def rename(task_id: str) -> str:
            return f"{tag}{task_id}" if task_id in clash else task_id

        tasks = [
            t.model_copy(
                update={
                    "task_id": rename(t.task_id),
                    "dependent_task_ids": [rename(d) for d in t.dependent_task_ids],
                }
            )
            for t in fresh.tasks
        ]
        return Plan(goal=self.goal, tasks=[*done, *tasks], replans=self.replans)

    def describe(self) -> str:
        """One line per task: id, dependencies, action, instruction, state."""
        lines = []
        for t in self.ordered() if self.tasks and not self._has_cycle() else self.tasks:
            deps = f" after {','.join(t.dependent_task_ids)}" if t.dependent_task_ids else ""
            state = " [done]" if t.is_finished else ""
            lines.append(f"[{t.task_id}]{deps} {t.action}: {t.instruction}{state}")
        return "\n".join(lines) or "(no tasks)"

    def _has_cycle(self) -> bool:
        import networkx as nx

        return not nx.is_directed_acyclic_graph(self.graph())

    # --------------------------------------------------------------- storage
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the plan as JSON (atomically: a crash never leaves half a file)."""
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(self.model_dump_json(indent=2), encoding="utf-8")
        tmp.replace(target)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Plan:
        """Read a plan saved with :meth:`save`."""
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))


WRITE_PLAN_PROMPT = """# Goal
{goal}

# Context
{context}

# Available actions
{actions}

# Task
Write a plan to achieve the goal: one to {max_tasks} tasks. Each task has a unique "task_id",
the ids of the tasks it depends on in "dependent_task_ids" (results of those tasks are given to it),
a short "instruction", and the name of the available action that performs it in "action".
A task may only depend on tasks of this plan, and dependencies must not form a cycle.
For example, a plan that uses each action once, in order:
{example}
{extra}"""

REPLAN_NOTE = """
# Progress so far
These tasks are finished; do not repeat them. New tasks may depend on them by id:
{done}

# What went wrong
{problem}

Plan only the remaining work (one to {max_tasks} tasks)."""


# Bounds that a grammar-constrained model cannot step over: without them a small model
# may fill its whole token budget with one instruction and leave the JSON unfinished.
MAX_TASK_ID = 12
MAX_INSTRUCTION = 160
WRITE_PLAN_SETTINGS = LLMSettings(max_tokens=1024)


class _SchemaOverride(BaseModel):
    """A model that validates as declared but shows providers another JSON schema."""

    schema_override: ClassVar[dict[str, Any] | None] = None

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if cls.schema_override is not None:
            return copy.deepcopy(cls.schema_override)
        return super().model_json_schema(*args, **kwargs)


def _plan_output_model(
    action_names: Sequence[str], max_tasks: int = 8, dag: bool = False, done_ids: Sequence[str] = ()
) -> type[BaseModel]:
    """The structured-output model for a plan whose actions must be among ``action_names``.

    With ``dag`` its JSON schema is :func:`dag_schema` (the validation stays the same).
    """
    action_type: Any = Literal[tuple(action_names)] if action_names else str  # type: ignore[valid-type]
    task_model = create_model(
        "PlanTask",
        task_id=(str, Field(min_length=1, max_length=MAX_TASK_ID)),
        dependent_task_ids=(list[str], Field(default_factory=list, max_length=max_tasks)),
        instruction=(str, Field(min_length=1, max_length=MAX_INSTRUCTION)),
        action=(action_type, ...),
    )
    tasks: Any = (list[task_model], Field(min_length=1, max_length=max_tasks))  # type: ignore[valid-type]
    output = create_model("PlanOutput", tasks=tasks)
    return with_json_schema(output, dag_schema(action_names, max_tasks, done_ids)) if dag else output


def with_json_schema(model: type[M], schema: dict[str, Any]) -> type[M]:
    """A subclass of ``model`` that validates as ``model`` but shows providers ``schema``.

    For a grammar-constrained model a tighter schema than pydantic can express (bounded
    strings, one object shape per function, acyclic ids) keeps the answer valid and short.
    """
    sub = create_model(model.__name__, __base__=(model, _SchemaOverride))
    cast(Any, sub).schema_override = schema
    return cast("type[M]", sub)


def dag_schema(action_names: Sequence[str], max_tasks: int, done_ids: Sequence[str] = ()) -> dict[str, Any]:
    """A JSON schema whose every instance is a valid task graph over ``action_names``.

    Task *k* (``"1"``, ``"2"`` …, in order) may depend only on tasks before it, so ids are
    unique, every dependency exists and no cycle can form. A model that decodes under
    a grammar made from this schema (the embedded llama.cpp model) writes a valid plan
    on the first try, however small it is. In a re-plan, ``done_ids`` (finished tasks)
    may be depended on too, and the new ids get a prefix that none of them has.
    """
    action: dict[str, Any] = {"enum": list(action_names)} if action_names else {"type": "string"}
    prefix = ""
    if done_ids:
        n = 1
        while any(d.startswith(f"r{n}-") for d in done_ids):
            n += 1
        prefix = f"r{n}-"
    defs: dict[str, Any] = {}
    for k in range(1, max_tasks + 1):
        earlier = [*done_ids, *(f"{prefix}{i}" for i in range(1, k))]
        deps: dict[str, Any] = {"type": "array", "items": {"type": "string"}, "maxItems": 0}
        if earlier:
            deps = {"type": "array", "items": {"enum": earlier}, "maxItems": len(earlier)}
        defs[f"Task{k}"] = {
            "type": "object",
            "properties": {
                "task_id": {"const": f"{prefix}{k}"},
                "dependent_task_ids": deps,
                "instruction": {"type": "string", "minLength": 1, "maxLength": MAX_INSTRUCTION},
                "action": action,
            },
            "required": ["task_id", "dependent_task_ids", "instruction", "action"],
            "additionalProperties": False,
        }
    lengths = [
        {
            "type": "array",
            "prefixItems": [{"$ref": f"#/$defs/Task{i}"} for i in range(1, n + 1)],
            "items": False,
            "minItems": n,
            "maxItems": n,
        }
        for n in range(1, max_tasks + 1)
    ]
    return {
        "$defs": defs,
        "type": "object",
        "properties": {"tasks": {"anyOf": lengths}},
        "required": ["tasks"],
        "additionalProperties": False,
    }


def constrains_by_grammar(llm: Any) -> bool:
    """True for models that decode under a grammar made from the schema (the embedded model)."""
    return bool(getattr(llm, "grammar_constrained", False))


def _example(actions: Sequence[Action], max_tasks: int) -> str:
    """A format example over the role's own actions (small models copy its shape)."""
    import json

    tasks = [
        {
            "task_id": str(i),
            "dependent_task_ids": [str(i - 1)] if i > 1 else [],
            "instruction": (a.desc or a.name).splitlines()[0][:MAX_INSTRUCTION],
            "action": a.name,
        }
        for i, a in enumerate(actions[:max_tasks], 1)
    ]
    return json.dumps({"tasks": tasks}, ensure_ascii=False)


def _to_plan(goal: str, value: BaseModel) -> Plan:
    return Plan(goal=goal, tasks=[Task(**t.model_dump()) for t in value.tasks])  # type: ignore[attr-defined]


class WritePlan(Action):
    """Ask the model for a valid :class:`Plan` over the given actions.

    ``done`` are tasks finished before (a re-plan): the new tasks may depend on them.
    """

    name: str = "WritePlan"
    max_tasks: int = 8
    retries: int = 3
    dag_schema: bool | None = Field(
        default=None,
        description="constrain the output schema to acyclic plans (None: on grammar-constrained models)",
    )

    async def run(  # type: ignore[override]
        self,
        goal: str,
        actions: Sequence[Action],
        context: str = "",
        extra: str = "",
        done: Sequence[Task] = (),
    ) -> Plan:
        names = [a.name for a in actions]
        described = "\n".join(f"- {a.name}: {a.desc or type(a).__doc__ or a.name}".strip() for a in actions)
        prompt = WRITE_PLAN_PROMPT.format(
            goal=goal,
            context=context or "(none)",
            actions=described,
            max_tasks=self.max_tasks,
            example=_example(actions, self.max_tasks),
            extra=extra,
        )
        llm = self.llm
        dag = self.dag_schema if self.dag_schema is not None else constrains_by_grammar(llm)
        done_ids = [t.task_id for t in done]
        output_model = _plan_output_model(names, self.max_tasks, dag, done_ids)

        def check(value: BaseModel) -> None:
            plan = _to_plan(goal, value)
            problems = plan.errors(names, done_ids)
            if len(plan.tasks) > self.max_tasks:
                problems.append(f"the plan has {len(plan.tasks)} tasks; at most {self.max_tasks} are allowed")
            if problems:
                raise ValueError("; ".join(problems))

        try:
            value = await llm.structured(
                prompt,
                output_model,
                [self.prefix] if self.prefix else None,
                retries=self.retries,
                validate=check,
                settings=WRITE_PLAN_SETTINGS.merged(self.settings),
            )
        except OutputParseError as exc:
            raise PlanError(f"no valid plan for {goal!r}: {exc}", raw=exc.raw, errors=[str(exc)]) from exc
        return _to_plan(goal, value)


class ReviewVerdict(BaseModel):
    """What the model answers when it reviews a task's result."""

    ok: bool = Field(description="true if the result completes the task")
    feedback: str = Field(default="", description="what is missing or wrong, if anything")


REVIEW_PROMPT = """# Goal
{goal}

# Task
{instruction}

# Result
{result}

# Review
Does the result complete the task well enough to go on with the plan? Answer with "ok"
(true or false) and, if it does not, short "feedback" saying what is missing or wrong."""


class ReviewTask(Action):
    """Ask the model whether a task's result completes the task (the automatic LLM reviewer)."""

    name: str = "ReviewTask"

    async def run(self, goal: str, task: Task, result: str) -> Review:  # type: ignore[override]
        prompt = REVIEW_PROMPT.format(goal=goal, instruction=task.instruction, result=result or "(empty)")
        try:
            verdict = await self.llm.structured(
                prompt, ReviewVerdict, [self.prefix] if self.prefix else None, settings=self.settings
            )
        except OutputParseError:
            # an unreadable review must not sink a finished task: accept, and say so
            return Review(ok=True, feedback="(the review could not be read; accepted)")
        return Review(ok=verdict.ok, feedback=verdict.feedback)


__all__ = [
    "REPLAN_NOTE",
    "REVIEW_PROMPT",
    "WRITE_PLAN_PROMPT",
    "Plan",
    "Review",
    "ReviewTask",
    "ReviewVerdict",
    "Task",
    "WritePlan",
]

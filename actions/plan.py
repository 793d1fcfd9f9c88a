"""Plans for ``plan_and_act``: tasks with ids and dependencies over a role's actions.

:class:`WritePlan` asks the model for a plan as structured output. The output model is
built for the role at hand — its ``action`` field admits only the role's action names —
so a model with constrained decoding cannot name an unknown action, and every plan is
checked as a DAG with networkx (duplicate ids, unknown dependencies, cycles). Errors
go back to the model; after the allowed re-asks a :class:`~rolecast.errors.PlanError`
carries them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from rolecast.errors import OutputParseError, PlanError

from .action import Action


class Task(BaseModel):
    """One step of a plan."""

    task_id: str
    dependent_task_ids: list[str] = Field(default_factory=list)
    instruction: str
    action: str = Field(description="name of the action that performs the task")
    result: str = ""
    is_finished: bool = False
    is_success: bool = False


class Plan(BaseModel):
    """A goal and its tasks. Serialises with pydantic, so a run can be saved and resumed."""

    goal: str
    tasks: list[Task] = Field(default_factory=list)

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise KeyError(task_id)

    def errors(self, action_names: Sequence[str] | None = None) -> list[str]:
        """Everything wrong with this plan, in words the model can fix; empty if valid."""
        import networkx as nx  # only when a plan is checked

        problems: list[str] = []
        if not self.tasks:
            problems.append("the plan has no tasks")
        ids = [t.task_id for t in self.tasks]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            problems.append(f"duplicate task ids: {dupes}")
        known = set(ids)
        for t in self.tasks:
            missing = [d for d in t.dependent_task_ids if d not in known]
            if missing:
                problems.append(f"task {t.task_id!r} depends on unknown task ids {missing}")
            if t.task_id in t.dependent_task_ids:
                problems.append(f"task {t.task_id!r} depends on itself")
            if action_names is not None and t.action not in action_names:
                problems.append(
                    f"task {t.task_id!r} uses unknown action {t.action!r}; use one of {list(action_names)}"
                )
        graph = self.graph()
        if not nx.is_directed_acyclic_graph(graph):
            cycle = nx.find_cycle(graph)
            problems.append("the dependencies form a cycle: " + " -> ".join(f"{a}" for a, _ in cycle))
        return problems

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
        return [t for t in self.ordered() if not t.is_finished]

    @property
    def finished(self) -> list[Task]:
        return [t for t in self.tasks if t.is_finished]


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
{extra}"""


def _plan_output_model(action_names: Sequence[str]) -> type[BaseModel]:
    """The structured-output model for a plan whose actions must be among ``action_names``."""
    action_type: Any = Literal[tuple(action_names)] if action_names else str  # type: ignore[valid-type]
    task_model = create_model(
        "PlanTask",
        task_id=(str, ...),
        dependent_task_ids=(list[str], Field(default_factory=list)),
        instruction=(str, ...),
        action=(action_type, ...),
    )
    return create_model("PlanOutput", tasks=(list[task_model], ...))  # type: ignore[valid-type]


class WritePlan(Action):
    """Ask the model for a valid :class:`Plan` over the given actions."""

    name: str = "WritePlan"
    max_tasks: int = 8
    retries: int = 3

    async def run(  # type: ignore[override]
        self,
        goal: str,
        actions: Sequence[Action],
        context: str = "",
        extra: str = "",
    ) -> Plan:
        names = [a.name for a in actions]
        described = "\n".join(f"- {a.name}: {a.desc or type(a).__doc__ or a.name}".strip() for a in actions)
        prompt = WRITE_PLAN_PROMPT.format(
            goal=goal,
            context=context or "(none)",
            actions=described,
            max_tasks=self.max_tasks,
            extra=extra,
        )
        output_model = _plan_output_model(names)

        def check(value: BaseModel) -> None:
            plan = Plan(goal=goal, tasks=[Task(**t.model_dump()) for t in value.tasks])  # type: ignore[attr-defined]
            problems = plan.errors(names)
            if len(plan.tasks) > self.max_tasks:
                problems.append(f"the plan has {len(plan.tasks)} tasks; at most {self.max_tasks} are allowed")
            if problems:
                raise ValueError("; ".join(problems))

        try:
            value = await self.llm.structured(
                prompt,
                output_model,
                [self.prefix] if self.prefix else None,
                retries=self.retries,
                validate=check,
                settings=self.settings,
            )
        except OutputParseError as exc:
            raise PlanError(f"no valid plan for {goal!r}: {exc}", raw=exc.raw, errors=[str(exc)]) from exc
        return Plan(goal=goal, tasks=[Task(**t.model_dump()) for t in value.tasks])  # type: ignore[attr-defined]

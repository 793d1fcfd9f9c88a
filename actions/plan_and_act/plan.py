"""The plan of ``plan_and_act``: tasks with ids and dependencies over a role's actions.

Every plan is checked as a DAG with networkx (duplicate ids, unknown dependencies,
unknown actions, cycles). A :class:`Plan` is a pydantic model: ``plan.model_dump_json()`` saves a run (results,
reviews, the number of re-plans used) and ``Plan.model_validate_json(text)`` — or
:meth:`Plan.load` — brings it back, so a run can resume without redoing finished tasks.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rolecast.errors import DataError, PlanError


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
        dupes = sorted(i for i, n in Counter(ids).items() if n > 1)
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
        by_id: dict[str, Task] = {}
        for t in self.tasks:
            by_id.setdefault(t.task_id, t)
        try:
            order = list(nx.lexicographical_topological_sort(self.graph(), key=lambda n: position[n]))
        except nx.NetworkXUnfeasible as exc:  # a plan that skipped errors(): still a typed error
            raise PlanError(f"the plan's dependencies form a cycle: {self.describe()}") from exc
        return [by_id[task_id] for task_id in order]

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
        """Read a plan saved with :meth:`save`; :class:`~rolecast.errors.DataError` if the file is not one.

        The plan is not checked here (that needs the role's actions): the planner checks
        every plan it resumes before running it.
        """
        try:
            return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:  # pydantic's ValidationError is a ValueError
            raise DataError(f"{path} is not a saved plan: {exc}") from exc


__all__ = ["Plan", "Review", "Task"]

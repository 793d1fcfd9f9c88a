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

from pydantic import BaseModel, ConfigDict, Field

from rolecast.errors import DataError, PlanEditError, PlanError


class TaskResult(BaseModel):
    """What taking a task gave (MetaGPT's ``TaskResult``): its code, if any, its result, and success."""

    model_config = ConfigDict(defer_build=True)  # plan_and_act mode only: built on first use

    code: str = ""
    result: str
    is_success: bool


class Task(BaseModel):
    """One step of a plan: what to do, with which action, after which tasks; and how it went.

    ``action`` may be left empty: the role's first (default) action then performs it.
    """

    model_config = ConfigDict(defer_build=True)  # plan_and_act mode only: built on first use

    task_id: str = ""
    dependent_task_ids: list[str] = Field(default_factory=list)
    instruction: str = ""
    action: str = Field(default="", description="name of the action that performs the task")
    task_type: str = ""
    assignee: str = ""
    code: str = ""
    result: str = ""
    is_finished: bool = False
    is_success: bool = False
    feedback: str = Field(default="", description="the reviewer's feedback on the last result")
    attempts: int = 0

    def reset(self) -> None:
        """Forget the outcome: no code, no result, not finished."""
        self.code = ""
        self.result = ""
        self.is_success = False
        self.is_finished = False

    def update_task_result(self, task_result: TaskResult) -> None:
        self.code = task_result.code
        self.result = task_result.result
        self.is_success = task_result.is_success


class Review(BaseModel):
    """A reviewer's verdict on a task's result: accepted (``ok``) or not, and why."""

    model_config = ConfigDict(defer_build=True)  # plan_and_act mode only: built on first use

    ok: bool = True
    feedback: str = ""


class Plan(BaseModel):
    """A goal and its tasks. Serialises with pydantic, so a run can be saved and resumed."""

    model_config = ConfigDict(defer_build=True)  # plan_and_act mode only: built on first use

    goal: str
    context: str = ""
    tasks: list[Task] = Field(default_factory=list)
    replans: int = Field(default=0, description="re-plans used so far (bounded by the planner)")

    # ------------------------------------------------ MetaGPT's planning API
    @property
    def task_map(self) -> dict[str, Task]:
        """Task id → task."""
        return {t.task_id: t for t in self.tasks}

    def has_task_id(self, task_id: str) -> bool:
        return any(t.task_id == task_id for t in self.tasks)

    @property
    def current_task_id(self) -> str:
        """The first unfinished task in plan order ("" when all are finished)."""
        return next((t.task_id for t in self.tasks if not t.is_finished), "")

    @property
    def current_task(self) -> Task | None:
        return next((t for t in self.tasks if not t.is_finished), None)

    def _update_current_task(self) -> None:
        """Kept for MetaGPT's callers: the current task is always derived from the tasks."""

    def finish_current_task(self) -> None:
        """Mark the current task finished; the next unfinished one becomes current."""
        task = self.current_task
        if task is not None:
            task.is_finished = True

    def get_finished_tasks(self) -> list[Task]:
        return self.finished

    def add_tasks(self, tasks: Sequence[Task]) -> None:
        """Put ``tasks`` (any order) into the plan, dependencies first.

        An empty plan takes them all; otherwise the tasks both lists begin with (same id and
        instruction) are kept as they are — finished work stays finished — and the rest
        is replaced by the new tasks (MetaGPT's merge).
        """
        if not tasks:
            return
        fresh = _dependencies_first(tasks)
        prefix = 0
        for old, new in zip(self.tasks, fresh, strict=False):
            if old.task_id != new.task_id or old.instruction != new.instruction:
                break
            prefix += 1
        self.tasks = self.tasks[:prefix] + fresh[prefix:]

    def reset_task(self, task_id: str) -> None:
        """Forget a task's outcome (nothing happens for an unknown id, as in MetaGPT)."""
        task = self.task_map.get(task_id)
        if task is not None:
            task.reset()

    def replace_task(self, new_task: Task) -> None:
        """Put ``new_task`` in place of the task with its id, and reset the tasks depending on it."""
        if not self.has_task_id(new_task.task_id):
            raise PlanEditError(f"no task {new_task.task_id!r} to replace; use append_task to add one")
        self.tasks = [new_task if t.task_id == new_task.task_id else t for t in self.tasks]
        for t in self.tasks:
            if new_task.task_id in t.dependent_task_ids:
                t.reset()

    def append_task(self, new_task: Task) -> None:
        """Add a task at the end; its dependencies must already be in the plan."""
        if self.has_task_id(new_task.task_id):
            raise PlanEditError(f"task {new_task.task_id!r} is already in the plan; use replace_task")
        missing = [d for d in new_task.dependent_task_ids if not self.has_task_id(d)]
        if missing:
            raise PlanEditError(f"task {new_task.task_id!r} depends on unknown tasks {missing}")
        self.tasks.append(new_task)

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
            if action_names is not None and t.action and t.action not in action_names:
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


def _dependencies_first(tasks: Sequence[Task]) -> list[Task]:
    """The tasks in MetaGPT's order: each after its dependencies, depth first, otherwise as given.

    Iterative, so a long chain cannot exhaust the stack; unknown ids and cycles are left
    to :meth:`Plan.errors` to report.
    """
    by_id = {t.task_id: t for t in tasks}
    done: set[str] = set()
    out: list[Task] = []
    for task in tasks:
        stack: list[tuple[str, int]] = [(task.task_id, 0)]
        while stack:
            task_id, i = stack.pop()
            if i == 0:
                if task_id in done:
                    continue
                done.add(task_id)
            deps = by_id[task_id].dependent_task_ids
            if i < len(deps):
                stack.append((task_id, i + 1))
                if deps[i] in by_id and deps[i] not in done:
                    stack.append((deps[i], 0))
            else:
                out.append(by_id[task_id])
    return out


__all__ = ["Plan", "Review", "Task", "TaskResult"]

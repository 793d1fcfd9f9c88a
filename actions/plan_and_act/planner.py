"""MetaGPT's ``Planner`` and ``TaskType``, on top of rolecast's :class:`PlanRunner`.

:class:`TaskType` names kinds of task and carries, for some of them, a short guidance
that is shown to the model with a task of that kind. :class:`Planner` is a
:class:`PlanRunner` that may start from a given plan (``Planner(plan=...)``, resumed at
the role's next ``plan_and_act``) and reports its state as text
(:meth:`Planner.get_plan_status`), as MetaGPT's planner puts it into its prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel

from .plan import Plan, Task
from .runner import PlanRunner


class TaskTypeDef(BaseModel):
    """One kind of task: its name (``Task.task_type``), what it is for, and guidance for the model."""

    name: str
    desc: str = ""
    guidance: str = ""


class TaskType(Enum):
    """Kinds of task (MetaGPT's names), each with guidance given to the model with such a task."""

    EDA = TaskTypeDef(
        name="eda",
        desc="exploratory data analysis",
        guidance="Look at the data before changing it: its columns and types, missing values, "
        "distributions and outliers. Print what you find; do not modify the data in this task.",
    )
    DATA_PREPROCESS = TaskTypeDef(
        name="data preprocessing",
        desc="preparing a data set for analysis or a model, and nothing else",
        guidance="Clean the data for the tasks that follow: fill or drop missing values, fix types, "
        "encode categories. Work on a copy, apply the same steps to every split, and keep the target unchanged.",
    )
    FEATURE_ENGINEERING = TaskTypeDef(
        name="feature engineering",
        desc="adding new columns derived from the input data",
        guidance="Derive new columns from the existing ones; fit any transformation on the training "
        "split only, and apply it to every split.",
    )
    MODEL_TRAIN = TaskTypeDef(
        name="model train",
        desc="training a model",
        guidance="Train on the training split only; start from a simple baseline and record its score.",
    )
    MODEL_EVALUATE = TaskTypeDef(
        name="model evaluate",
        desc="evaluating a trained model",
        guidance="Evaluate on data the model was not trained on, with the metric the goal asks for.",
    )
    IMAGE2WEBPAGE = TaskTypeDef(name="image2webpage", desc="turning an image into web page code")
    WEB_SCRAPING = TaskTypeDef(name="web scraping", desc="collecting data from web pages")
    OTHER = TaskTypeDef(name="other", desc="any task of none of the kinds above")

    @property
    def type_name(self) -> str:
        """The name a :class:`Task` records in ``task_type``."""
        return self.value.name

    @classmethod
    def get_type(cls, type_name: str) -> TaskTypeDef | None:
        """The kind of task called ``type_name``, or None."""
        for member in cls:
            if member.value.name == type_name:
                return member.value
        return None


def guidance_for(task: Task) -> str:
    """The guidance of ``task``'s kind ("" for a kind without one, or none)."""
    kind = TaskType.get_type(task.task_type)
    return kind.guidance if kind is not None else ""


class Planner(PlanRunner):
    """A :class:`PlanRunner` that may start from a given ``plan`` (MetaGPT's ``Planner``).

    ``Planner(plan=plan)`` runs ``plan`` at the role's next ``plan_and_act`` (skipping its
    finished tasks); ``Planner(goal="...")`` starts from an empty plan for that goal.
    The other keywords are :class:`PlanRunner`'s.
    """

    def __init__(self, plan: Plan | None = None, goal: str = "", **options: Any):
        super().__init__(**options)
        if plan is None and goal:
            plan = Plan(goal=goal)
        if plan is not None:
            self.plan = plan
            if plan.tasks:
                self.resume_from(plan)

    @property
    def current_task(self) -> Task | None:
        return self.plan.current_task if self.plan is not None else None

    @property
    def current_task_id(self) -> str:
        return self.plan.current_task_id if self.plan is not None else ""

    def get_plan_status(self, exclude: Sequence[str] = ()) -> str:
        """The plan as text for a prompt: the finished tasks' code and results, the current task,
        and the guidance for its kind. ``exclude`` leaves out ``"code"`` and/or ``"result"``."""
        if self.plan is None:
            return "## Plan\n(no plan yet)"
        finished = self.plan.get_finished_tasks()
        parts = [f"## Current Plan\n{self.plan.goal}"]
        if "code" not in exclude:
            parts.append("## Finished Tasks\n### code\n```python\n"
                         + "\n\n".join(t.code for t in finished if t.code) + "\n```")
        if "result" not in exclude:
            parts.append("### execution result\n" + "\n\n".join(t.result for t in finished if t.result))
        task = self.current_task
        parts.append("## Current Task\n" + (task.instruction if task is not None else "(all tasks are finished)"))
        guidance = guidance_for(task) if task is not None else ""
        if guidance:
            parts.append("## Guidance for this kind of task\n" + guidance)
        return "\n\n".join(parts)


__all__ = ["Planner", "TaskType", "TaskTypeDef", "guidance_for"]

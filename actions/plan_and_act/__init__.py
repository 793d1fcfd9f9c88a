"""MetaGPT's ``plan_and_act`` mode: a role writes a plan over its actions and runs it.

* :mod:`.plan` — :class:`Plan`, :class:`Task`, :class:`Review` (a checked task graph, saved as JSON);
* :mod:`.write` — :class:`WritePlan` and :class:`ReviewTask`, the model's part;
* :mod:`.runner` — :class:`PlanRunner`, which runs the plan (concurrent independent
  tasks, reviews, bounded re-planning, checkpoints) for a :class:`PlanOwner`;
* :mod:`.planner` — MetaGPT's :class:`Planner` (a runner started from a given plan, its
  status as text) and :class:`TaskType` (kinds of task, with guidance for the model).
"""

from .plan import Plan, Review, Task, TaskResult
from .planner import Planner, TaskType, TaskTypeDef
from .runner import REPLANNABLE, PlanOwner, PlanRunner, Reviewer, accept_nonempty, by_order_plan
from .write import REPLAN_NOTE, ReviewTask, ReviewVerdict, WritePlan, dag_schema

__all__ = [
    "REPLANNABLE",
    "REPLAN_NOTE",
    "Plan",
    "PlanOwner",
    "PlanRunner",
    "Planner",
    "Review",
    "ReviewTask",
    "ReviewVerdict",
    "Reviewer",
    "Task",
    "TaskResult",
    "TaskType",
    "TaskTypeDef",
    "WritePlan",
    "accept_nonempty",
    "by_order_plan",
    "dag_schema",
]

"""Semantic Kernel's planners: the model turns a goal into a plan of function calls.

* :class:`BasicPlanner` — a JSON list of subtasks, each output the next input;
* :class:`SequentialPlanner` — an XML plan with ``$VARIABLES`` and named results;
* :class:`ActionPlanner` — exactly one function (or none) with its rationale.

Each returns a :class:`FunctionPlan` to inspect and then ``await plan.invoke(kernel)``.
"""

from .action_planner import ActionPlanner
from .base import FunctionPlan, Planner, PlanStep, expand_variables
from .basic import BasicPlanner
from .sequential import SequentialPlanner, parse_sequential_plan, repair_plan_xml

__all__ = [
    "ActionPlanner",
    "BasicPlanner",
    "FunctionPlan",
    "PlanStep",
    "Planner",
    "SequentialPlanner",
    "expand_variables",
    "parse_sequential_plan",
    "repair_plan_xml",
]

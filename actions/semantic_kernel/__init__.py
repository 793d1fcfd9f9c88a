"""The Semantic Kernel port: a kernel of plugins and models, prompt functions, and planners.

* :class:`Kernel` — functions (tools and prompt functions), models and invocation hooks;
* :class:`PromptFunction` / :class:`PromptTemplate` — a function made from a prompt, with
  ``{{$var}}`` variables and nested ``{{Plugin.fn $arg}}`` calls;
* :class:`TextMemoryPlugin` — ``recall`` / ``save`` over a semantic memory (``{{recall $input}}``);
* :mod:`.planners` — the model turns a goal into a :class:`FunctionPlan` of function calls
  (basic, sequential, action). In rolecast "planner" means these; a role's
  ``plan_and_act`` mode lives in :mod:`actions.plan_and_act`.
"""

from .kernel import Kernel
from .planners import ActionPlanner, BasicPlanner, FunctionPlan, Planner, PlanStep, SequentialPlanner
from .prompt_function import FunctionResult, InputVariable, PromptFunction, PromptTemplate, use_functions
from .text_memory import TextMemoryPlugin

__all__ = [
    "ActionPlanner",
    "BasicPlanner",
    "FunctionPlan",
    "FunctionResult",
    "InputVariable",
    "Kernel",
    "PlanStep",
    "Planner",
    "PromptFunction",
    "PromptTemplate",
    "SequentialPlanner",
    "TextMemoryPlugin",
    "use_functions",
]

"""Actions: what roles do. ``Action`` to subclass, and the built-in kinds of action.

Where things live (one home for each concept):

* :mod:`actions.action` — :class:`Action`, :class:`UserRequirement`;
* :mod:`actions.action_node` — :class:`ActionNode`, :class:`ActionOutput` (structured output, MetaGPT's way);
* :mod:`actions.perform` — the one path that runs an action for a role;
* :mod:`actions.plan_and_act` — MetaGPT's plan_and_act mode: plans, the plan writer, the runner;
* :mod:`actions.tools` — tools, plugins, the function registry, manuals, built-in tools, the sandbox;
* :mod:`actions.loops` — the agent loops over tools: ReAct, stepwise, native function calling;
* :mod:`actions.semantic_kernel` — the Semantic Kernel port: kernel, prompt functions, planners.
"""

from typing import TYPE_CHECKING

from rolecast import library_logging
from rolecast.core.lazy import lazy_exports

from .action import Action, UserRequirement
from .action_node import ActionNode, ActionOutput
from .plan_and_act import Plan, PlanRunner, Task, TaskResult, WritePlan
from .structured import parse_code

# the tool loops, the Semantic Kernel port and the tools load on first use (import stays light)
_LAZY = {
    **dict.fromkeys(("DebugError", "RunCode", "RunCodeResult", "WriteCode", "WriteCodeReview", "WriteTest"), ".coding"),
    **dict.fromkeys(("AgentAction", "AgentFinish", "AgentResult", "FunctionCallingAction", "ReActAction",
                     "StepwiseAction", "ToolLoopAction"), ".loops"),
    **dict.fromkeys(("ActionPlanner", "BasicPlanner", "FunctionPlan", "FunctionResult", "InputVariable", "Kernel",
                     "PlanStep", "PromptFunction", "PromptTemplate", "SequentialPlanner"), ".semantic_kernel"),
    **dict.fromkeys(("FunctionRegistry", "KernelFunction", "Plugin", "PythonTool", "Tool", "ToolParameter",
                     "calculator", "calculator_tool", "kernel_function", "python_tool", "render_langchain",
                     "render_qwen", "render_sk_manual", "tool", "tool_run_scope"), ".tools"),
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)

if TYPE_CHECKING:
    from .coding import DebugError, RunCode, RunCodeResult, WriteCode, WriteCodeReview, WriteTest
    from .loops import (
        AgentAction,
        AgentFinish,
        AgentResult,
        FunctionCallingAction,
        ReActAction,
        StepwiseAction,
        ToolLoopAction,
    )
    from .semantic_kernel import (
        ActionPlanner,
        BasicPlanner,
        FunctionPlan,
        FunctionResult,
        InputVariable,
        Kernel,
        PlanStep,
        PromptFunction,
        PromptTemplate,
        SequentialPlanner,
    )
    from .tools import (
        FunctionRegistry,
        KernelFunction,
        Plugin,
        PythonTool,
        Tool,
        ToolParameter,
        calculator,
        calculator_tool,
        kernel_function,
        python_tool,
        render_langchain,
        render_qwen,
        render_sk_manual,
        tool,
        tool_run_scope,
    )

library_logging("actions")

__all__ = [
    "Action",
    "ActionNode",
    "ActionOutput",
    "ActionPlanner",
    "AgentAction",
    "AgentFinish",
    "AgentResult",
    "BasicPlanner",
    "DebugError",
    "FunctionCallingAction",
    "FunctionPlan",
    "FunctionRegistry",
    "FunctionResult",
    "InputVariable",
    "Kernel",
    "KernelFunction",
    "Plan",
    "PlanRunner",
    "PlanStep",
    "Plugin",
    "PromptFunction",
    "PromptTemplate",
    "PythonTool",
    "ReActAction",
    "RunCode",
    "RunCodeResult",
    "SequentialPlanner",
    "StepwiseAction",
    "Task",
    "TaskResult",
    "Tool",
    "ToolLoopAction",
    "ToolParameter",
    "UserRequirement",
    "WriteCode",
    "WriteCodeReview",
    "WritePlan",
    "WriteTest",
    "calculator",
    "calculator_tool",
    "kernel_function",
    "parse_code",
    "python_tool",
    "render_langchain",
    "render_qwen",
    "render_sk_manual",
    "tool",
    "tool_run_scope",
]

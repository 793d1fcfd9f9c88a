"""Actions: what roles do. ``Action`` to subclass, the built-in actions, tools, ReAct and planners."""

from loguru import logger

from .action import Action, UserRequirement
from .builtin_tools import PythonTool, calculator, calculator_tool, python_tool, tool_run_scope
from .function_calling import FunctionCallingAction
from .kernel import Kernel
from .plan import Plan, Task, WritePlan
from .planners import ActionPlanner, BasicPlanner, FunctionPlan, PlanStep, SequentialPlanner
from .prompt_function import FunctionResult, InputVariable, PromptFunction, PromptTemplate
from .react import ReActAction
from .stepwise import StepwiseAction
from .tool_loop import AgentAction, AgentFinish, AgentResult, ToolLoopAction
from .tools import (
    FunctionRegistry,
    KernelFunction,
    Plugin,
    Tool,
    ToolParameter,
    kernel_function,
    render_langchain,
    render_qwen,
    render_sk_manual,
    tool,
)

logger.disable("actions")

__all__ = [
    "Action",
    "ActionPlanner",
    "AgentAction",
    "AgentFinish",
    "AgentResult",
    "BasicPlanner",
    "FunctionCallingAction",
    "FunctionPlan",
    "FunctionRegistry",
    "FunctionResult",
    "InputVariable",
    "Kernel",
    "KernelFunction",
    "Plan",
    "PlanStep",
    "Plugin",
    "PromptFunction",
    "PromptTemplate",
    "PythonTool",
    "ReActAction",
    "SequentialPlanner",
    "StepwiseAction",
    "Task",
    "Tool",
    "ToolLoopAction",
    "ToolParameter",
    "UserRequirement",
    "WritePlan",
    "calculator",
    "calculator_tool",
    "kernel_function",
    "python_tool",
    "render_langchain",
    "render_qwen",
    "render_sk_manual",
    "tool",
    "tool_run_scope",
]

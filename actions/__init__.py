"""Actions: what roles do. ``Action`` to subclass, the built-in actions, tools, ReAct and planners."""

from loguru import logger

from .action import Action, UserRequirement
from .kernel import Kernel
from .planners import ActionPlanner, BasicPlanner, FunctionPlan, PlanStep, SequentialPlanner
from .prompt_function import FunctionResult, InputVariable, PromptFunction, PromptTemplate
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
    "BasicPlanner",
    "FunctionPlan",
    "FunctionRegistry",
    "FunctionResult",
    "InputVariable",
    "Kernel",
    "KernelFunction",
    "PlanStep",
    "Plugin",
    "PromptFunction",
    "PromptTemplate",
    "SequentialPlanner",
    "Tool",
    "ToolParameter",
    "UserRequirement",
    "kernel_function",
    "render_langchain",
    "render_qwen",
    "render_sk_manual",
    "tool",
]

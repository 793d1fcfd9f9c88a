"""Actions: what roles do. ``Action`` to subclass, the built-in actions, tools, ReAct and planners."""

from loguru import logger

from .action import Action, UserRequirement
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
    "FunctionRegistry",
    "KernelFunction",
    "Plugin",
    "Tool",
    "ToolParameter",
    "UserRequirement",
    "kernel_function",
    "render_langchain",
    "render_qwen",
    "render_sk_manual",
    "tool",
]

"""Tools: functions a model can call, how they are named, described and called, and the sandbox.

* :mod:`.function` — :class:`Tool` (``@tool``), :class:`Plugin`, :class:`KernelFunction`;
* :mod:`.registry` — :class:`FunctionRegistry`, which finds a function by any name a model writes;
* :mod:`.arguments` — the one place that turns model text into a function's arguments;
* :mod:`.render` — the manuals (LangChain, Qwen, Semantic Kernel, stepwise);
* :mod:`.python` and :mod:`.calculator` — the built-in tools;
* :mod:`.sandbox` — where model-written code runs, in a limited subprocess.
"""

from .arguments import arguments_from_text, fit_arguments, json_arguments, lookup, strip_code_fence
from .calculator import calculator, calculator_tool, evaluate_arithmetic, format_number
from .function import KernelFunction, Plugin, Tool, ToolParameter, kernel_function, tool
from .python import PythonTool, current_run_state, python_tool, tool_run_scope
from .registry import FunctionRegistry
from .render import QWEN_TOOL_DESC, render_langchain, render_qwen, render_sk_manual, render_stepwise_manual
from .sandbox import PythonSession, SandboxResult, run_python

__all__ = [
    "QWEN_TOOL_DESC",
    "FunctionRegistry",
    "KernelFunction",
    "Plugin",
    "PythonSession",
    "PythonTool",
    "SandboxResult",
    "Tool",
    "ToolParameter",
    "arguments_from_text",
    "calculator",
    "calculator_tool",
    "current_run_state",
    "evaluate_arithmetic",
    "fit_arguments",
    "format_number",
    "json_arguments",
    "kernel_function",
    "lookup",
    "python_tool",
    "render_langchain",
    "render_qwen",
    "render_sk_manual",
    "render_stepwise_manual",
    "run_python",
    "strip_code_fence",
    "tool",
    "tool_run_scope",
]

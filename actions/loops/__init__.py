"""Agent loops: a model calls tools until it has an answer, like LangChain's ``AgentExecutor``.

One shared loop (:class:`ToolLoopAction`, in :mod:`.base`) and three formats over it:

* :class:`ReActAction` — ``Thought / Action / Action Input / Observation`` (Qwen's and
  LangChain's prompts);
* :class:`StepwiseAction` — Semantic Kernel's ``[THOUGHT] / [ACTION] / [OBSERVATION]``;
* :class:`FunctionCallingAction` — native (OpenAI-style) tool calls.
"""

from .base import (
    EXCEPTION_TOOL,
    FORCE_STOP_OUTPUT,
    GENERATE_FINAL_SUFFIX,
    AgentAction,
    AgentFinish,
    AgentResult,
    LoopRun,
    Planned,
    StopReason,
    ToolLoopAction,
    Turn,
    format_observation,
    invalid_tool_observation,
)
from .function_calling import FUNCTION_CALLING_SYSTEM, FunctionCallingAction
from .react import (
    FINAL_ANSWER_ACTION,
    REACT_PROMPT,
    REACT_STOP,
    ReActAction,
    ReActOutputParser,
    parse_latest_plugin_call,
)
from .stepwise import STEPWISE_PROMPT, STEPWISE_STOP, StepwiseAction, StepwiseStep, parse_stepwise

__all__ = [
    "EXCEPTION_TOOL",
    "FINAL_ANSWER_ACTION",
    "FORCE_STOP_OUTPUT",
    "FUNCTION_CALLING_SYSTEM",
    "GENERATE_FINAL_SUFFIX",
    "REACT_PROMPT",
    "REACT_STOP",
    "STEPWISE_PROMPT",
    "STEPWISE_STOP",
    "AgentAction",
    "AgentFinish",
    "AgentResult",
    "FunctionCallingAction",
    "LoopRun",
    "Planned",
    "ReActAction",
    "ReActOutputParser",
    "StepwiseAction",
    "StepwiseStep",
    "StopReason",
    "ToolLoopAction",
    "Turn",
    "format_observation",
    "invalid_tool_observation",
    "parse_latest_plugin_call",
    "parse_stepwise",
]

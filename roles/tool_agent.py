"""ToolAgent: a role whose one action is a tool loop (ReAct, stepwise or native function calling)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from actions.loops import FunctionCallingAction, ReActAction, StepwiseAction, ToolLoopAction

from .role import Role

ToolStyle = Literal["react", "stepwise", "function_calling"]

_LOOPS: dict[str, type[ToolLoopAction]] = {
    "react": ReActAction,
    "stepwise": StepwiseAction,
    "function_calling": FunctionCallingAction,
}


class ToolAgent(Role):
    """A role that answers with tools::

        agent = ToolAgent(tools=[python_tool(), calculator], style="react")
        msg = await agent.run("What is the 10th fibonacci number?")
        msg.content                      # the answer
        msg.instruct_content             # the AgentResult: steps, iterations, stopped_reason

    ``style`` picks the loop: ``"react"`` (:class:`~actions.loops.ReActAction`, with
    ``prompt_style`` ``"qwen"`` or ``"langchain"``), ``"stepwise"``
    (:class:`~actions.loops.StepwiseAction`) or ``"function_calling"``
    (:class:`~actions.loops.FunctionCallingAction`, for providers with
    native tool calls). The limits are passed on to the loop; ``action_options``
    passes any other field of it (``min_iteration_time_ms``, ``handle_tool_errors`` …).
    Each step is remembered in this role's memory; the answer is published like any
    action's result: the output as the content, the :class:`~actions.loops.AgentResult`
    as ``instruct_content``, its ``stopped_reason`` and ``iterations`` in ``metadata``.
    """

    name: str = "ToolAgent"
    profile: str = "Tool Agent"
    goal: str = "answer the question accurately, using the tools when they help"
    tools: list[Any] = Field(default_factory=list, exclude=True)
    style: ToolStyle = "react"
    prompt_style: Literal["qwen", "langchain"] = "qwen"
    max_iterations: int | None = 15
    max_execution_time: float | None = None
    early_stopping_method: Literal["force", "generate"] = "force"
    handle_parsing_errors: Any = True
    action_options: dict[str, Any] = Field(default_factory=dict, exclude=True)

    def __init__(self, **data: Any):
        super().__init__(**data)
        self.set_actions([self.build_action()])

    def build_action(self) -> ToolLoopAction:
        """The loop action for ``style``, configured from this role's fields."""
        options: dict[str, Any] = {
            "tools": list(self.tools),
            "max_iterations": self.max_iterations,
            "max_execution_time": self.max_execution_time,
            "early_stopping_method": self.early_stopping_method,
            "handle_parsing_errors": self.handle_parsing_errors,
        }
        if self.style == "react":
            options["prompt_style"] = self.prompt_style
        options.update(self.action_options)
        return _LOOPS[self.style](**options)

    @property
    def loop(self) -> ToolLoopAction:
        """This role's tool-loop action."""
        action = self.actions[0]
        assert isinstance(action, ToolLoopAction)
        return action


__all__ = ["ToolAgent", "ToolStyle"]

"""The agent loop every tool-using action shares, like LangChain's ``AgentExecutor``.

:class:`ToolLoopAction` holds what the ReAct, stepwise and function-calling actions
have in common — iteration and time limits, early stopping, tool calls through the
invocation hooks, tool failures turned into observations, events, one memory message
per step in the owning role's memory — and returns an :class:`AgentResult`. A variant
implements ``_plan`` (one model call → a final answer or steps to take) and
``_generate_final`` (the answer asked for when a limit is hit):

* :class:`~actions.loops.react.ReActAction`: Qwen's / LangChain's ReAct text format;
* :class:`~actions.loops.stepwise.StepwiseAction`: Semantic Kernel's stepwise loop;
* :class:`~actions.loops.function_calling.FunctionCallingAction`: native tool calls.

A long run never outgrows the model: each prompt carries the newest steps that fit the model's
context window beside the question, the tool descriptions and the answer's room, says how many
earlier steps it left out, and the run log gets a ``history_fitted`` event.

Events (``context.hooks.on_event``) are named after the loop's ``style`` (``react``,
``stepwise`` or ``function_calling``) and carry ``action`` and ``style`` in their data:
``<style>.started``, then per iteration ``<style>.step_started``,
``<style>.tool_called`` and ``<style>.observation``, and at the end ``<style>.finished``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from loguru import logger
from pydantic import BaseModel, Field, field_validator

from memory import Message, any_to_str
from rolecast.errors import BudgetExceeded, ControlFlow, OutputParseError, ToolError, UsageError
from rolecast.llm.types import Messages, to_messages
from rolecast.llm.window import answer_room, fit_to_window, omitted_note

from ..action import Action
from ..tools import FunctionRegistry, KernelFunction, format_number, tool_run_scope

T = TypeVar("T")

FORCE_STOP_OUTPUT = "Agent stopped due to iteration limit or time limit."
GENERATE_FINAL_SUFFIX = "\n\nI now need to return a final answer based on the previous steps:"
EXCEPTION_TOOL = "_Exception"  # the pseudo-tool of a parse-error step, as in LangChain

StopReason = Literal["finished", "return_direct", "max_iterations", "max_execution_time"]


# ------------------------------------------------------------------ results
class AgentAction(BaseModel):
    """The model asked for ``tool`` with ``tool_input``; ``log`` is the text it wrote."""

    tool: str
    tool_input: str | dict[str, Any] = ""
    log: str = ""
    call_id: str | None = None  # the native tool call's id (function calling only)


class AgentFinish(BaseModel):
    """The model gave its final answer."""

    output: str
    log: str = ""


class AgentResult(BaseModel):
    """What a tool loop returns: the answer, every step, and why it stopped.

    ``str(result)`` is the output; :class:`~roles.tool_agent.ToolAgent` publishes it as the
    message content, with the whole result as ``instruct_content``.
    """

    output: str
    intermediate_steps: list[tuple[AgentAction, str]] = Field(default_factory=list)
    iterations: int = 0
    stopped_reason: StopReason = "finished"
    elapsed: float = 0.0

    def __str__(self) -> str:
        return self.output

    @property
    def message_metadata(self) -> dict[str, Any]:
        """What a role's message of this result carries in ``metadata``."""
        return {"stopped_reason": self.stopped_reason, "iterations": self.iterations}


def format_observation(value: Any) -> str:
    """A tool's return value as observation text (numbers to 15 significant digits, JSON for data)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return format_number(value)
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def invalid_tool_observation(name: str, registry: FunctionRegistry) -> str:
    """LangChain's answer to an unknown tool name, listing the valid ones."""
    names = ", ".join(f.full_name for f in registry)
    return f"{name} is not a valid tool, try one of [{names}]."


# ------------------------------------------------------------------ the loop
class _OutOfTime(Exception):
    """``max_execution_time`` ran out in the middle of a step."""


@dataclass
class Planned:
    """One thing the model asked for: a tool call, or a step whose observation is already known."""

    action: AgentAction
    arguments: dict[str, Any] | str | None = None
    observation: str | None = None  # preset (a parse error): no tool is called


@dataclass
class Turn:
    """What one model call decided: a final answer, or steps to take."""

    finish: AgentFinish | None = None
    planned: list[Planned] = field(default_factory=list)


@dataclass
class LoopRun:
    """The state of one run of a tool loop (variants keep their transcript in ``data``)."""

    question: str
    registry: FunctionRegistry
    started: float
    deadline: float | None
    steps: list[tuple[AgentAction, str]] = field(default_factory=list)
    iterations: int = 0
    data: dict[str, Any] = field(default_factory=dict)

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    async def bounded(self, aw: Awaitable[T]) -> T:
        """Await ``aw`` within what is left of ``max_execution_time``."""
        if self.deadline is None:
            return await aw
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            if inspect.iscoroutine(aw):
                aw.close()
            raise _OutOfTime
        try:
            return await asyncio.wait_for(aw, remaining)
        except asyncio.TimeoutError:
            if self.expired():
                raise _OutOfTime from None
            raise


ErrorHandler = bool | str | Callable[[Exception], str]


class ToolLoopAction(Action):
    """The agent loop shared by the ReAct, stepwise and function-calling actions.

    Like LangChain's ``AgentExecutor``: at most ``max_iterations`` model calls and
    ``max_execution_time`` seconds; when a limit is hit, ``early_stopping_method``
    ``"force"`` answers :data:`FORCE_STOP_OUTPUT` and ``"generate"`` asks the model
    once more for a final answer. A tool with ``return_direct`` ends the run with its
    result. ``handle_parsing_errors`` sends a malformed answer's error back to the
    model as the observation (``True``), a fixed text (a string) or your function's
    text (a callable); ``False`` raises :class:`OutputParseError`. Tool failures, an
    unknown tool name included, become observations the same way
    (``handle_tool_errors``). Each step goes to the owning role's memory.

    ``constrain_format``: on a model that decodes under a grammar (``supports_grammar``)
    each answer is asked under the loop's format grammar — a registered tool and
    arguments valid for its schema, or a final answer, every free part bounded — so it
    always parses (``None``, the default); ``False`` never sends one.
    """

    #: the loop's name: its events are ``<style>.started`` …
    style: ClassVar[str] = "react"

    tools: list[Any] = Field(default_factory=list)
    max_iterations: int | None = 15
    max_execution_time: float | None = None
    early_stopping_method: Literal["force", "generate"] = "force"
    handle_parsing_errors: ErrorHandler = True
    handle_tool_errors: ErrorHandler = True
    max_observation_chars: int | None = 8000
    record_steps: bool = True
    constrain_format: bool | None = None

    @field_validator("tools", mode="before")
    @classmethod
    def _tools_as_list(cls, value: Any) -> Any:
        if value is None:
            return []
        return list(value) if isinstance(value, (list, tuple)) else [value]

    # ------------------------------------------------------------ the run
    async def run(self, question: str | Message | Sequence[Any] | None = None) -> AgentResult:  # type: ignore[override]
        """Answer ``question`` (text, a Message, or a role's history: its latest question)."""
        text = self._question_text(question)
        if not text.strip():
            raise UsageError(f"{self.name}: there is no question to answer")
        registry = FunctionRegistry.of(*self.tools)
        self._check_ready(registry)
        started = time.monotonic()
        deadline = started + self.max_execution_time if self.max_execution_time is not None else None
        run = LoopRun(question=text, registry=registry, started=started, deadline=deadline)
        await self._emit("started", question=text, tools=[f.full_name for f in registry])
        with tool_run_scope():  # the Python tool's state lives as long as this run
            result = await self._loop(run)
        result.elapsed = time.monotonic() - started
        logger.info(
            "{}: {} after {} iteration(s): {}",
            self.name,
            result.stopped_reason,
            result.iterations,
            result.output[:200],
        )
        await self._emit(
            "finished",
            output=result.output,
            iterations=result.iterations,
            stopped_reason=result.stopped_reason,
            steps=len(result.intermediate_steps),
        )
        return result

    async def _loop(self, run: LoopRun) -> AgentResult:
        while True:
            if self.max_iterations is not None and run.iterations >= self.max_iterations:
                return await self._stop(run, "max_iterations")
            if run.expired():
                return await self._stop(run, "max_execution_time")
            run.iterations += 1
            began = time.monotonic()
            await self._emit("step_started", iteration=run.iterations)
            try:
                turn = await run.bounded(self._plan(run))
                if turn.finish is not None:
                    return self._result(run, turn.finish.output, "finished")
                for planned in turn.planned:
                    observation, direct = await self._take(run, planned)
                    if direct:
                        return self._result(run, observation, "return_direct")
            except _OutOfTime:
                return await self._stop(run, "max_execution_time")
            await self._pace(run, began)

    async def _take(self, run: LoopRun, planned: Planned) -> tuple[str, bool]:
        """Run one planned step; returns its observation and whether it ends the run."""
        action = planned.action
        direct = False
        if planned.observation is not None:
            observation = planned.observation
        else:
            await self._emit(
                "tool_called",
                iteration=run.iterations,
                tool=action.tool,
                tool_input=action.tool_input,
                log=action.log,
            )
            fn = run.registry.resolve(action.tool)
            if fn is None:
                observation = invalid_tool_observation(action.tool, run.registry)
                if self.handle_tool_errors is False:
                    raise ToolError(observation)
            else:
                arguments = planned.arguments if planned.arguments is not None else action.tool_input
                observation, ok = await run.bounded(self._invoke(fn, arguments))
                direct = ok and fn.return_direct
        observation = self._cap(observation)
        logger.debug("{}: {} -> {}", self.name, action.tool, observation[:300])
        run.steps.append((action, observation))
        self._observed(run, planned, observation)
        await self._emit(
            "observation", iteration=run.iterations, tool=action.tool, observation=observation
        )
        self._remember(run, action, observation)
        return observation, direct

    async def _invoke(self, fn: KernelFunction, arguments: Any) -> tuple[str, bool]:
        """Call a tool through the context's hooks; a failure becomes the observation."""
        try:
            value = await fn.invoke(arguments, context=self.context)
        except (ControlFlow, BudgetExceeded, UsageError):
            raise  # signals, the budget and the program's own mistakes stop the run: no observation fixes them
        except Exception as exc:
            return self._tool_failure(exc, fn), False
        return format_observation(value), True

    def _tool_failure(self, exc: Exception, fn: KernelFunction | None = None) -> str:
        handler = self.handle_tool_errors
        if handler is False:
            if isinstance(exc, ToolError):
                raise exc
            raise ToolError(f"tool {fn.full_name if fn else '?'} raised {type(exc).__name__}: {exc}") from exc
        if handler is True:
            return str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
        return handler if isinstance(handler, str) else handler(exc)

    def _parse_failure(self, exc: OutputParseError) -> str:
        """The observation for a malformed answer, or the error itself when not handled."""
        handler = self.handle_parsing_errors
        if handler is False:
            raise exc
        if handler is True:
            return str(exc)
        return handler if isinstance(handler, str) else handler(exc)

    async def _stop(self, run: LoopRun, reason: StopReason) -> AgentResult:
        logger.info("{}: stopping ({}), early stopping by {}", self.name, reason, self.early_stopping_method)
        if self.early_stopping_method == "generate":
            finish = await self._generate_final(run)
            return self._result(run, finish.output, reason)
        return self._result(run, FORCE_STOP_OUTPUT, reason)

    def _result(self, run: LoopRun, output: str, reason: StopReason) -> AgentResult:
        return AgentResult(
            output=output,
            intermediate_steps=list(run.steps),
            iterations=run.iterations,
            stopped_reason=reason,
        )

    def _cap(self, observation: str) -> str:
        cap = self.max_observation_chars
        if cap is not None and len(observation) > cap:
            return observation[:cap] + f"\n[... {len(observation) - cap} more characters]"
        return observation

    # ------------------------------------------------------------ plumbing
    def _question_text(self, question: Any) -> str:
        if question is None:
            return ""
        if isinstance(question, Message):
            return question.content
        if isinstance(question, str):
            return question
        if isinstance(question, Sequence):
            mine = any_to_str(self)
            # a role passes its history: the question is the latest message not from this loop
            messages = [m for m in question if isinstance(m, Message) and m.cause_by != mine]
            if messages:
                return messages[-1].content
            return "\n".join(str(q) for q in question if not isinstance(q, Message))
        return str(question)

    async def _emit(self, event: str, **data: Any) -> None:
        """Emit ``<style>.<event>`` (``react.tool_called``, ``stepwise.finished`` …)."""
        await self.context.hooks.emit(f"{self.style}.{event}", action=self.name, style=self.style, **data)

    def _remember(self, run: LoopRun, action: AgentAction, observation: str) -> None:
        """One Message per step in the owning role's memory (cause_by this action)."""
        memory = self.owner_memory
        if memory is None or not self.record_steps:
            return
        owner = self.owner
        memory.add(
            Message(
                content=self._step_text(action, observation),
                role=getattr(owner, "profile", "") or "assistant",
                cause_by=self,
                sent_from=getattr(owner, "name", ""),
                metadata={
                    "react_step": {
                        "style": self.style,
                        "iteration": run.iterations,
                        "tool": action.tool,
                        "tool_input": action.tool_input,
                        "log": action.log,
                        "observation": observation,
                    }
                },
            )
        )

    def _step_text(self, action: AgentAction, observation: str) -> str:
        return f"{action.log.strip()}\nObservation: {observation}"

    async def _pace(self, run: LoopRun, began: float) -> None:
        """Wait between iterations if a variant asks for it (stepwise: ``min_iteration_time_ms``)."""

    def _check_ready(self, registry: FunctionRegistry) -> None:
        """Refuse to start when the variant cannot work (function calling without tool support)."""

    def _observed(self, run: LoopRun, planned: Planned, observation: str) -> None:
        """Update the variant's transcript after a step (the ReAct scratchpad is built from ``run.steps``)."""

    def _asked(self, prompt: str | Messages) -> Messages:
        """The messages :meth:`_aask` sends for ``prompt`` (the role's identity as the system prompt)."""
        return to_messages(prompt, [self.prefix] if self.prefix else None)

    async def _fit_steps(self, texts: Sequence[str], fixed: Messages, *, reserve: int = 0) -> int:
        """How many of the oldest steps (``texts``, one per step) the next prompt leaves out, so that
        the newest fit the model's window beside ``fixed`` (the prompt without its steps: the question,
        the tool descriptions, the format), ``reserve`` tokens and the answer's room; logged."""
        return await fit_to_window(self.llm, texts, fixed, answer_room(self.llm, self.settings),
                                   purpose=f"{self.name} scratchpad", what="step", reserve=reserve)

    @staticmethod
    def _omitted_line(omitted: int) -> str:
        """The note a scratchpad starts with when its ``omitted`` oldest steps were left out."""
        return omitted_note(omitted, "step") if omitted else ""

    def _grammar(self, run: LoopRun, *, final_only: bool = False) -> str | None:
        """The format grammar for the next answer, or None (unconstrained or not supported)."""
        if self.constrain_format is False or not self.llm.supports_grammar:
            return None
        return self.format_grammar(run.registry, final_only=final_only)

    # ------------------------------------------------------------ variants
    def format_grammar(self, registry: FunctionRegistry, *, final_only: bool = False) -> str | None:
        """The GBNF grammar of this loop's answer format over ``registry`` (None: not constrained)."""
        return None

    async def _plan(self, run: LoopRun) -> Turn:  # pragma: no cover - abstract
        raise NotImplementedError

    async def _generate_final(self, run: LoopRun) -> AgentFinish:  # pragma: no cover - abstract
        raise NotImplementedError


__all__ = [
    "EXCEPTION_TOOL",
    "FORCE_STOP_OUTPUT",
    "GENERATE_FINAL_SUFFIX",
    "AgentAction",
    "AgentFinish",
    "AgentResult",
    "LoopRun",
    "Planned",
    "StopReason",
    "ToolLoopAction",
    "Turn",
    "format_observation",
    "invalid_tool_observation",
]

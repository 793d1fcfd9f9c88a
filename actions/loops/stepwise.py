"""Semantic Kernel's stepwise planner (MRKL) as an action.

The model writes ``[THOUGHT]``, then an ``[ACTION]`` JSON blob
``{"action": "Plugin-Function", "action_variables": {"input": "...", ...}}``; generation
stops at ``[OBSERVATION]`` (or a second ``[THOUGHT]``); the function's result is
appended as the observation; a ``[FINAL ANSWER]`` ends it. The prompt carries the
function manual (``Plugin-Function: description`` / ``inputs:``), and earlier steps
come back in Semantic Kernel's scratch pad. Parse problems are observations, as in
Semantic Kernel ("System step parsing error, invalid JSON: …"), unless
``handle_parsing_errors=False``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from loguru import logger
from pydantic import BaseModel, Field

from rolecast.core.jsonutil import balanced_spans, extract_json, loads_lenient
from rolecast.errors import OutputParseError
from rolecast.llm.base import truncate_at_stop

from ..tools import FunctionRegistry, KernelFunction, fit_arguments, render_stepwise_manual
from ..tools.grammar import stepwise_grammar
from .base import (
    AgentAction,
    AgentFinish,
    AgentResult,
    LoopRun,
    Planned,
    StopReason,
    ToolLoopAction,
    Turn,
)

#: Semantic Kernel's StepwiseStep prompt, verbatim (``{{$var}}`` placeholders).
STEPWISE_PROMPT = """[INSTRUCTION]
Answer the following questions as accurately as possible using the provided functions.

[AVAILABLE FUNCTIONS]
The function definitions below are in the following format:
<functionName>: <description>
  inputs:
    - <parameterName>: <parameterDescription>
    - ...

{{$function_descriptions}}
[END AVAILABLE FUNCTIONS]

[USAGE INSTRUCTIONS]
To use the functions, specify a JSON blob representing an action. The JSON blob should contain an "action" key with the name of the function to use, and an "action_variables" key with a JSON object of string values to use when calling the function.
Do not call functions directly; they must be invoked through an action.
The "action_variables" value should always include an "input" key, even if the input value is empty. Additional keys in the "action_variables" value should match the defined [PARAMETERS] of the named "action" in [AVAILABLE FUNCTIONS].
Dictionary values in "action_variables" must be strings and represent the actual values to be passed to the function.
Ensure that the $JSON_BLOB contains only a SINGLE action; do NOT return multiple actions.
IMPORTANT: Use only the available functions listed in the [AVAILABLE FUNCTIONS] section. Do not attempt to use any other functions that are not specified.

Here is an example of a valid $JSON_BLOB:
{
  "action": "pluginName-functionName",
  "action_variables": {"parameterName": "some value", ...}
}

Here is another example of a valid $JSON_BLOB:
{
  "action": "Plugin-Function",
  "action_variables": {"parameterName": "some value", ...}
}

Here is another example of a valid $JSON_BLOB:
{
  "action": "Plugin-FunctionName2",
  "action_variables": {"parameterName": "some value", ...}
}

The $JSON_BLOB must contain an "action_variables" key, with the {"parameterName": "some value", ...} value in the response.
[END USAGE INSTRUCTIONS]
[END INSTRUCTION]

[THOUGHT PROCESS]
[QUESTION]
the input question I must answer
[THOUGHT]
To solve this problem, I should carefully analyze the given question and identify the necessary steps. Any facts I discover earlier in my thought process should be repeated here to keep them readily available.
[ACTION]
{
  "action": "plugin-functionName",
  "action_variables": {"parameterName": "some value", ...}
}
[OBSERVATION]
The result of the action will be provided here.
... (These Thought/Action/Observation can repeat until the final answer is reached.)
[FINAL ANSWER]
Once I have gathered all the necessary observations and performed any required actions, I can provide the final answer in a clear and human-readable format.
[END THOUGHT PROCESS]

Let's break down the problem step by step and think about the best approach. Questions and observations should be followed by a single thought and an optional single action to take.

Begin!

[QUESTION]
{{$question}}
{{$agent_scratch_pad}}"""  # noqa: E501  (Semantic Kernel's wording, kept verbatim)

STEPWISE_STOP = ["[OBSERVATION]", "\n[THOUGHT]"]
THOUGHT, ACTION, OBSERVATION = "[THOUGHT]", "[ACTION]", "[OBSERVATION]"
SCRATCH_PAD_PREFIX = "This was my previous work (but they haven't seen any of it! They only see what I return as final answer):"  # noqa: E501
NO_RESULT_OBSERVATION = "Got no result from action"
RESULT_NOT_FOUND = "Result not found, review intermediate_steps to see what happened."

# Semantic Kernel's regular expressions
FINAL_ANSWER_REGEX = re.compile(r"\[FINAL[_\s\-]ANSWER\](?P<final_answer>.+)", re.DOTALL)
THOUGHT_REGEX = re.compile(r"(\[THOUGHT\])?(?P<thought>.+?)(?=\[ACTION\]|$)", re.DOTALL)


class StepwiseStep(BaseModel):
    """One parsed answer of the model (Semantic Kernel's ``SystemStep``)."""

    thought: str = ""
    action: str = ""
    action_variables: dict[str, Any] = Field(default_factory=dict)
    observation: str = ""
    final_answer: str = ""
    original_response: str = ""


def _action_blob(text: str) -> str:
    """The JSON after the first ``[ACTION]``: its first balanced ``{…}``, else the rest of the text.

    What Semantic Kernel's ``ACTION_REGEX`` finds, in one linear pass (that regex
    rescans the text from every ``[ACTION]`` and allows only two levels of braces).
    """
    rest = text.split(ACTION, 1)[1]
    start = rest.find("{")
    if start >= 0 and "}" not in rest[:start]:
        spans = balanced_spans(rest[start:], "{", "}")
        if spans:
            return spans[0].strip()
    return rest.strip()


def parse_stepwise(text: str) -> StepwiseStep:
    """Parse one answer like Semantic Kernel, with lenient JSON (JSON5, a balanced-brace fallback).

    A parse problem is put in ``observation`` (Semantic Kernel's wording); callers
    decide whether to send it back to the model or raise.
    """
    step = StepwiseStep(original_response=text)
    final = FINAL_ANSWER_REGEX.search(text)
    if final:
        step.final_answer = final.group("final_answer").strip()
        if not step.final_answer:  # an empty answer is no answer: the model is told, not believed
            step.observation = "System step error, the final answer is empty. Please give the final answer."
        return step
    thought = THOUGHT_REGEX.search(text)
    if thought:
        step.thought = thought.group(0).replace(THOUGHT, "").strip()
    elif ACTION not in text:
        step.thought = text.strip()
    if ACTION in text:
        blob = _action_blob(text)
        try:
            try:
                value = loads_lenient(blob)
            except OutputParseError:
                value = extract_json(blob, expect=dict)
        except OutputParseError:
            step.observation = f"System step parsing error, invalid JSON: {blob}"
            return step
        if not isinstance(value, dict) or not value:
            step.observation = f"System step parsing error, empty JSON: {blob}"
        elif not isinstance(value.get("action"), str) or not value["action"].strip():
            step.observation = f'System step parsing error, the JSON has no "action": {blob}'
        else:
            step.action = value["action"].strip()
            variables = value.get("action_variables") or {}
            if not isinstance(variables, dict):
                step.observation = f'System step parsing error, "action_variables" is not an object: {blob}'
                step.action = ""
            else:
                step.action_variables = variables
    if not step.thought and not step.action and not step.observation:
        step.observation = (
            "System step error, no thought or action found. Please give a valid thought and/or action."
        )
    return step


class StepwiseAction(ToolLoopAction):
    """Answer a question with Semantic Kernel's stepwise planner format::

        planner = StepwiseAction(tools=[Plugin.from_object(MathPlugin())], max_iterations=5,
                                 min_iteration_time_ms=0)
        result = await planner.run("Figure out how much I have if ...")

    ``min_iteration_time_ms`` makes every iteration take at least that long (a simple
    rate limit, as in Semantic Kernel). When ``max_iterations`` is reached the output
    says the result was not found (or, with ``early_stopping_method="generate"``, the
    model is asked once more for a final answer).
    """

    style: ClassVar[str] = "stepwise"

    name: str = "StepwiseAction"
    desc: str = "Answer a question step by step with functions (Semantic Kernel's stepwise planner)."
    max_iterations: int | None = 15
    min_iteration_time_ms: int = 0
    stop: list[str] = Field(default_factory=lambda: list(STEPWISE_STOP))
    template: str = STEPWISE_PROMPT

    def build_prompt(self, question: str, registry: FunctionRegistry, scratch_pad: str = "") -> str:
        """The prompt with the manual, the question and the scratch pad filled in."""
        return (
            self.template.replace("{{$function_descriptions}}", render_stepwise_manual(registry))
            .replace("{{$question}}", question)
            .replace("{{$agent_scratch_pad}}", scratch_pad)
        )

    @staticmethod
    def step_text(step: StepwiseStep) -> str:
        """One step in the scratch pad: its thought, action and observation."""
        lines = [f"{THOUGHT}\n{step.thought}"]
        if step.action:
            blob = json.dumps({"action": step.action, "action_variables": step.action_variables}, ensure_ascii=False)
            lines.append(f"{ACTION}\n{blob}")
        if step.observation:
            lines.append(f"{OBSERVATION}\n{step.observation}")
        return "\n".join(lines)

    @classmethod
    def scratch_pad(cls, steps: Sequence[StepwiseStep], omitted: int = 0) -> str:
        """Semantic Kernel's scratch pad: each step's thought/action/observation; after a note when the
        ``omitted`` oldest steps before ``steps`` were left out to fit the window."""
        if not steps and not omitted:
            return ""
        note = [cls._omitted_line(omitted)] if omitted else []
        return "\n".join([SCRATCH_PAD_PREFIX, *note, *map(cls.step_text, steps)]).strip()

    async def fitted_pad(self, run: LoopRun, suffix: str = "") -> str:
        """The prompt for the next call: the manual, the question and the newest steps that fit the
        model's window (then ``suffix``)."""
        steps = self._steps(run)
        omitted = 0
        if steps:
            fixed = self._asked(self.build_prompt(run.question, run.registry, SCRATCH_PAD_PREFIX + suffix))
            omitted = await self._fit_steps(list(map(self.step_text, steps)), fixed)
        return self.build_prompt(run.question, run.registry, self.scratch_pad(steps[omitted:], omitted) + suffix)

    def _steps(self, run: LoopRun) -> list[StepwiseStep]:
        steps: list[StepwiseStep] = run.data.setdefault("stepwise_steps", [])
        return steps

    def format_grammar(self, registry: FunctionRegistry, *, final_only: bool = False) -> str | None:
        """``[THOUGHT]`` then an ``[ACTION]`` of a registered function with its variables, or ``[FINAL ANSWER]``."""
        if self.template != STEPWISE_PROMPT:
            return None  # a custom prompt may ask for another format
        return stepwise_grammar(registry, final_only=final_only)

    async def _plan(self, run: LoopRun) -> Turn:
        steps = self._steps(run)
        prompt = await self.fitted_pad(run)
        answer = await self._aask(prompt, stop=self.stop, grammar=self._grammar(run))
        # cut at the stop words here too, in case a server ignored them
        text = truncate_at_stop(answer, self.stop).strip()
        logger.debug("{}: model wrote {!r}", self.name, text)
        step = parse_stepwise(text)
        if step.final_answer:
            return Turn(finish=AgentFinish(output=step.final_answer, log=text))
        steps.append(step)
        if step.observation:  # a parse error
            observation = self._parse_failure(OutputParseError(step.observation, raw=text))
            step.observation = observation
            action = AgentAction(tool=step.action or "_Exception", tool_input=step.action_variables, log=text)
            return Turn(planned=[Planned(action, observation=observation)])
        if not step.action:
            logger.info("{}: no action to take", self.name)
            return Turn()  # a thought alone: the next iteration continues from it
        action = AgentAction(tool=step.action, tool_input=step.action_variables, log=text)
        fn = run.registry.resolve(step.action)
        if fn is None:
            known = ", ".join(f.wire_name for f in run.registry)
            message = (
                f"Error invoking action {step.action}: The function '{step.action}' was not found. "
                f"Available functions: {known}"
            )
            return Turn(planned=[Planned(action, observation=message)])
        return Turn(planned=[Planned(action, arguments=fit_arguments(fn, step.action_variables))])

    def _observed(self, run: LoopRun, planned: Planned, observation: str) -> None:
        steps = self._steps(run)
        if steps and planned.observation is None:
            steps[-1].observation = observation or NO_RESULT_OBSERVATION

    def _tool_failure(self, exc: Exception, fn: KernelFunction | None = None) -> str:
        message = super()._tool_failure(exc, fn)
        if self.handle_tool_errors is True and fn is not None:
            return f"Error invoking action {fn.wire_name}: {message}"
        return message

    def _step_text(self, action: AgentAction, observation: str) -> str:
        return f"{action.log.strip()}\n{OBSERVATION}\n{observation}"

    async def _pace(self, run: LoopRun, began: float) -> None:
        wait = self.min_iteration_time_ms / 1000 - (time.monotonic() - began)
        if wait > 0:
            await asyncio.sleep(wait)

    async def _stop(self, run: LoopRun, reason: StopReason) -> AgentResult:
        if self.early_stopping_method == "force":
            return self._result(run, RESULT_NOT_FOUND, reason)
        return await super()._stop(run, reason)

    async def _generate_final(self, run: LoopRun) -> AgentFinish:
        prompt = await self.fitted_pad(run, "\n[FINAL ANSWER]\n")
        text = await self._aask(prompt, stop=self.stop, grammar=self._grammar(run, final_only=True))
        if text.startswith("[FINAL ANSWER]"):  # the grammar writes the marker again
            text = text[len("[FINAL ANSWER]") :]
        step = parse_stepwise("[FINAL ANSWER]" + text)
        return AgentFinish(output=step.final_answer or text.strip(), log=text)


__all__ = [
    "STEPWISE_PROMPT",
    "STEPWISE_STOP",
    "StepwiseAction",
    "StepwiseStep",
    "parse_stepwise",
]

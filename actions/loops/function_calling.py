"""Native function calling: the provider's own tool calls instead of a text format.

For models whose provider has ``supports_tools`` (OpenAI and compatible servers): each
iteration calls ``llm.complete(messages, tools=[f.openai_schema() ...])``; every
``Completion.tool_calls`` entry is run and answered with a ``tool`` message; an answer
without tool calls is the final answer.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from loguru import logger

from rolecast.errors import OutputParseError, UsageError
from rolecast.llm.base import Completion
from rolecast.llm.types import Messages
from rolecast.llm.window import request_tokens

from ..tools import FunctionRegistry, json_arguments
from .base import GENERATE_FINAL_SUFFIX, AgentAction, AgentFinish, LoopRun, Planned, ToolLoopAction, Turn

FUNCTION_CALLING_SYSTEM = "You are a helpful assistant. Use the provided tools when they help to answer."


class FunctionCallingAction(ToolLoopAction):
    """Answer a question with the provider's native tool calls::

        agent = FunctionCallingAction(tools=[calculator], llm=OpenAILLM(...))
        result = await agent.run("What is 2130.23 * 1.23 - 5?")

    Arguments that are not valid JSON are a parse error, answered in the ``tool``
    message so the model can correct itself (or raised, with
    ``handle_parsing_errors=False``). Iteration and time limits, ``return_direct``,
    events and memory work as in :class:`~actions.react.ReActAction`.
    """

    style: ClassVar[str] = "function_calling"

    name: str = "FunctionCallingAction"
    desc: str = "Answer a question with native tool calls."
    system_prompt: str = FUNCTION_CALLING_SYSTEM

    def _check_ready(self, registry: FunctionRegistry) -> None:
        if not self.llm.supports_tools:
            raise UsageError(
                f"{self.name}: {self.llm!r} does not support native tool calls; "
                "use ReActAction (style='react') or StepwiseAction instead"
            )

    def _messages(self, run: LoopRun) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] | None = run.data.get("messages")
        if messages is None:
            messages = []
            system = "\n\n".join(p for p in (self.prefix, self.system_prompt) if p)
            if system:
                messages.append({"role": "system", "content": system})
            messages.append({"role": "user", "content": run.question})
            run.data["messages"] = messages
            run.data["head"] = len(messages)  # the system prompt and the question: never left out
            # the model sees Plugin-Function names; map them back to the functions
            run.data["schemas"] = [f.openai_schema() for f in run.registry]
        return messages

    async def fitted_messages(self, run: LoopRun, ending: Messages | None = None) -> Messages:
        """The messages for the next call: the system prompt and the question, the newest steps (an
        assistant message with its tool calls and their answers) that fit the model's window beside
        them, the tool definitions and the answer's room (then ``ending``). When earlier steps were
        left out, the question says how many."""
        messages = self._messages(run)
        ending = ending or []
        head = messages[: run.data["head"]]
        steps: list[Messages] = []
        for message in messages[len(head):]:  # a step starts at each assistant message
            if message["role"] == "assistant" or not steps:
                steps.append([])
            steps[-1].append(message)
        if not steps:
            return [*messages, *ending]
        reserve = request_tokens(self.llm, tools=run.data["schemas"])
        omitted = await self._fit_steps([_dumps(step) for step in steps], [*head, *ending], reserve=reserve)
        if not omitted:
            return [*messages, *ending]
        question = dict(head[-1], content=f"{head[-1]['content']}\n\n{self._omitted_line(omitted)}")
        return [*head[:-1], question, *(m for step in steps[omitted:] for m in step), *ending]

    async def _plan(self, run: LoopRun) -> Turn:
        messages = self._messages(run)
        completion: Completion = await self.llm.complete(
            await self.fitted_messages(run), tools=run.data["schemas"], settings=self.settings
        )
        if not completion.tool_calls:
            messages.append({"role": "assistant", "content": completion.text})
            return Turn(finish=AgentFinish(output=completion.text.strip(), log=completion.text))
        messages.append(
            {
                "role": "assistant",
                "content": completion.text or None,
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in completion.tool_calls
                ],
            }
        )
        planned: list[Planned] = []
        for call in completion.tool_calls:
            logger.debug("{}: tool call {} {}", self.name, call.name, call.arguments)
            try:
                arguments = json_arguments(call.arguments)
            except OutputParseError as exc:
                observation = self._parse_failure(exc)
                action = AgentAction(
                    tool=call.name, tool_input=call.arguments, log=completion.text, call_id=call.id
                )
                planned.append(Planned(action, observation=observation))
                continue
            action = AgentAction(tool=call.name, tool_input=arguments, log=completion.text, call_id=call.id)
            planned.append(Planned(action, arguments=arguments))
        return Turn(planned=planned)

    def _observed(self, run: LoopRun, planned: Planned, observation: str) -> None:
        # every tool call must be answered, in order, by a tool message with its id
        self._messages(run).append(
            {"role": "tool", "tool_call_id": planned.action.call_id, "content": observation}
        )

    def _step_text(self, action: AgentAction, observation: str) -> str:
        args = action.tool_input if isinstance(action.tool_input, str) else _dumps(action.tool_input)
        head = f"{action.log.strip()}\n" if action.log.strip() else ""
        return f"{head}Call: {action.tool}({args})\nObservation: {observation}"

    async def _generate_final(self, run: LoopRun) -> AgentFinish:
        ending: Messages = [{"role": "user", "content": GENERATE_FINAL_SUFFIX.strip()}]
        completion = await self.llm.complete(await self.fitted_messages(run, ending), settings=self.settings)
        return AgentFinish(output=completion.text.strip(), log=completion.text)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


__all__ = ["FUNCTION_CALLING_SYSTEM", "FunctionCallingAction"]

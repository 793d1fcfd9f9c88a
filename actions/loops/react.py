"""ReAct: the Thought / Action / Action Input / Observation loop in Qwen's and LangChain's formats.

:class:`ReActAction` asks the model with Qwen's ``REACT_PROMPT`` (``TOOL_DESC`` per
tool) or LangChain's zero-shot prompt (``PREFIX`` + ``name: description`` lines +
``FORMAT_INSTRUCTIONS`` + ``SUFFIX``), stops generation at ``"\\nObservation:"``, parses
the answer like Qwen's ``parse_latest_plugin_call`` (lenient JSON for the input) and
runs the tool; ``Final Answer:`` ends it. The loop itself — limits, early stopping,
``return_direct``, error handling, events, memory — is
:class:`~actions.tool_loop.ToolLoopAction`, whose names are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from loguru import logger
from pydantic import Field

from rolecast.errors import OutputParseError, ToolError

from ..tools import (
    QWEN_TOOL_DESC,
    FunctionRegistry,
    arguments_from_text,
    render_langchain,
    render_qwen,
)
from ..tools.grammar import react_grammar
from .base import (
    EXCEPTION_TOOL,
    GENERATE_FINAL_SUFFIX,
    AgentAction,
    AgentFinish,
    LoopRun,
    Planned,
    ToolLoopAction,
    Turn,
)

# ------------------------------------------------------------------ prompts
#: Qwen's tool description (``render_qwen`` fills it for each tool).
TOOL_DESC = QWEN_TOOL_DESC

#: Qwen's ReAct prompt, verbatim.
REACT_PROMPT = """Answer the following questions as best you can. You have access to the following tools:

{tool_descs}

Use the following format:

Question: the input question you must answer
Thought: you should always think about what to do
Action: the action to take, should be one of [{tool_names}]
Action Input: the input to the action
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can be repeated zero or more times)
Thought: I now know the final answer
Final Answer: the final answer to the original input question

Begin!

Question: {query}"""

#: LangChain's zero-shot (MRKL) prompt parts, verbatim.
PREFIX = """Answer the following questions as best you can. You have access to the following tools:"""
FORMAT_INSTRUCTIONS = """Use the following format:

Question: the input question you must answer
Thought: you should always think about what to do
Action: the action to take, should be one of [{tool_names}]
Action Input: the input to the action
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can repeat N times)
Thought: I now know the final answer
Final Answer: the final answer to the original input question"""
SUFFIX = """Begin!

Question: {input}
Thought:{agent_scratchpad}"""
LANGCHAIN_PROMPT = "\n\n".join([PREFIX, "{tool_descs}", FORMAT_INSTRUCTIONS, SUFFIX])

#: Generation stops here, so that the model cannot invent the tool's result.
REACT_STOP = ["\nObservation:", "\n\tObservation:"]
FINAL_ANSWER_ACTION = "Final Answer:"

MISSING_ACTION_ERROR = "Invalid Format: Missing 'Action:' after 'Thought:'"
MISSING_ACTION_INPUT_ERROR = "Invalid Format: Missing 'Action Input:' after 'Action:'"


# ------------------------------------------------------------------ parsing
def parse_latest_plugin_call(text: str) -> tuple[str, str]:
    """Qwen's parser: the last ``Action`` and ``Action Input``; ``("", "")`` when there is none.

    If the model dropped the stop word, ``\\nObservation:`` is added back first.
    """
    i = text.rfind("\nAction:")
    j = text.rfind("\nAction Input:")
    k = text.rfind("\nObservation:")
    if 0 <= i < j:  # the text has Action and Action Input,
        if k < j:  # but no Observation after them: the stop word was dropped
            text = text.rstrip() + "\nObservation:"  # add it back
            k = text.rfind("\nObservation:")
    if 0 <= i < j < k:
        plugin_name = text[i + len("\nAction:") : j].strip()
        plugin_args = text[j + len("\nAction Input:") : k].strip()
        return plugin_name, plugin_args
    return "", ""


# text a model may run on with after its Action Input when it does not wait for the tool
_INVENTED = ("\nThought:", "\nFinal Answer:")


class ReActOutputParser:
    """Turns a ReAct completion into an :class:`AgentAction` or :class:`AgentFinish`.

    The action is found as Qwen's :func:`parse_latest_plugin_call` finds it (the last
    Action / Action Input; a dropped stop word restored), also at the very start of
    the text. Whatever the model wrote after the Action Input — an invented
    observation, thought or final answer — was written before the tool ran: it is cut
    off, and the action wins. Otherwise ``Final Answer:`` ends the loop. Anything else
    raises :class:`OutputParseError` with LangChain's messages.
    """

    def parse(self, text: str) -> AgentAction | AgentFinish:
        padded = "\n" + text  # so that an Action on the first line is found too
        i = padded.rfind("\nAction:")
        j = padded.rfind("\nAction Input:")
        if 0 <= i < j:
            k = padded.rfind("\nObservation:")
            end = k if k > j else len(padded.rstrip())
            start = j + len("\nAction Input:")
            args = padded[start:end]
            cut = min((p for p in (args.find(m) for m in _INVENTED) if p >= 0), default=-1)
            if cut >= 0:
                end = start + cut
            name = padded[i + len("\nAction:") : j].strip()
            if name:
                log = padded[1:end].rstrip()
                return AgentAction(tool=name, tool_input=padded[start:end].strip(), log=log)
        at = text.rfind(FINAL_ANSWER_ACTION)
        if at >= 0:
            return AgentFinish(output=text[at + len(FINAL_ANSWER_ACTION) :].strip(), log=text)
        if 0 <= i < j or i < 0:  # no Action, or an empty one
            raise OutputParseError(MISSING_ACTION_ERROR, raw=text)
        raise OutputParseError(MISSING_ACTION_INPUT_ERROR, raw=text)


class ReActAction(ToolLoopAction):
    """Answer a question with tools in the ReAct text format.

    ``prompt_style="qwen"`` uses Qwen's ``REACT_PROMPT`` with ``TOOL_DESC`` blocks;
    ``"langchain"`` uses LangChain's ``PREFIX`` + ``name: description`` lines +
    ``FORMAT_INSTRUCTIONS`` + ``SUFFIX`` ending in ``Thought:{agent_scratchpad}``.
    ``template`` replaces the style's prompt (placeholders ``{tool_descs}``,
    ``{tool_names}``, ``{input}``/``{query}``, optionally ``{agent_scratchpad}``).
    The model is asked with ``stop`` (:data:`REACT_STOP`)::

        agent = ReActAction(tools=[python_tool()], llm=llm)
        result = await agent.run("What is the 10th fibonacci number?")
        result.output, result.intermediate_steps
    """

    style: ClassVar[str] = "react"

    name: str = "ReActAction"
    desc: str = "Answer a question step by step with tools (ReAct)."
    prompt_style: Literal["qwen", "langchain"] = "qwen"
    template: str | None = None
    stop: list[str] = Field(default_factory=lambda: list(REACT_STOP))

    @property
    def output_parser(self) -> ReActOutputParser:
        return ReActOutputParser()

    def step_text(self, step: tuple[AgentAction, str]) -> str:
        """One earlier step as the model sees it after the question."""
        action, observation = step
        if self.prompt_style == "langchain":
            return f"{action.log}\nObservation: {observation}\nThought:"
        return f"\n{action.log.strip()}\nObservation: {observation}"

    def scratchpad(self, steps: Sequence[tuple[AgentAction, str]], omitted: int = 0) -> str:
        """The earlier steps as the model sees them after the question; after a note when the
        ``omitted`` oldest steps before ``steps`` were left out to fit the window."""
        text = "".join(map(self.step_text, steps))
        if not omitted:
            return text
        note = self._omitted_line(omitted)
        return f" {note}\nThought:{text}" if self.prompt_style == "langchain" else f"\n{note}{text}"

    async def fitted_prompt(self, run: LoopRun, suffix: str = "") -> str:
        """The prompt for the next call: the question, the tools and the newest steps that fit the
        model's window (then ``suffix``)."""
        steps = run.steps
        omitted = 0
        if steps:
            fixed = self._asked(self.build_prompt(run.question, run.registry, suffix))
            omitted = await self._fit_steps(list(map(self.step_text, steps)), fixed)
        return self.build_prompt(run.question, run.registry, self.scratchpad(steps[omitted:], omitted) + suffix)

    def build_prompt(self, question: str, registry: FunctionRegistry, scratchpad: str = "") -> str:
        """The full prompt for the next model call."""
        functions = list(registry)
        names = [f.full_name for f in functions]
        if self.prompt_style == "langchain":
            template = self.template or LANGCHAIN_PROMPT
            descs, joined = render_langchain(functions), ", ".join(names)
        else:
            template = self.template or REACT_PROMPT
            descs, joined = render_qwen(functions), ",".join(names)
        values = {
            "tool_descs": descs,
            "tool_names": joined,
            "input": question,
            "query": question,
            "agent_scratchpad": scratchpad,
        }
        prompt = template.format_map(values)
        return prompt if "{agent_scratchpad}" in template else prompt + scratchpad

    def format_grammar(self, registry: FunctionRegistry, *, final_only: bool = False) -> str | None:
        """``Thought:`` then ``Action:``/``Action Input:`` of a registered tool, or ``Final Answer:``."""
        if self.template is not None:
            return None  # a custom prompt may ask for another format
        return react_grammar(registry, final_only=final_only)

    async def _plan(self, run: LoopRun) -> Turn:
        prompt = await self.fitted_prompt(run)
        text = await self._aask(prompt, stop=self.stop, grammar=self._grammar(run))
        logger.debug("{}: model wrote {!r}", self.name, text)
        return self.turn_from_text(run, text)

    def turn_from_text(self, run: LoopRun, text: str) -> Turn:
        """Parse one completion into a :class:`Turn` (parse errors become preset observations)."""
        if self.prompt_style == "langchain":
            # the prompt ends in "Thought:"; a chat model often writes it again
            stripped = text.lstrip()
            if stripped.startswith("Thought:"):
                text = " " + stripped[len("Thought:") :].lstrip()
        try:
            parsed = self.output_parser.parse(text)
        except OutputParseError as exc:
            observation = self._parse_failure(exc)
            return Turn(
                planned=[
                    Planned(
                        AgentAction(tool=EXCEPTION_TOOL, tool_input=observation, log=text),
                        observation=observation,
                    )
                ]
            )
        if isinstance(parsed, AgentFinish):
            return Turn(finish=parsed)
        fn = run.registry.resolve(parsed.tool)
        if fn is None:
            return Turn(planned=[Planned(parsed)])  # the loop answers with the valid tool names
        raw = parsed.tool_input
        try:
            arguments: dict[str, Any] | str = raw if isinstance(raw, dict) else arguments_from_text(fn, raw)
        except OutputParseError as exc:
            return Turn(planned=[Planned(parsed, observation=self._parse_failure(exc))])
        except ToolError:
            arguments = raw  # the tool's own validation tells the model what it takes
        return Turn(planned=[Planned(parsed, arguments=arguments)])

    async def _generate_final(self, run: LoopRun) -> AgentFinish:
        text = await self._aask(
            await self.fitted_prompt(run, GENERATE_FINAL_SUFFIX),
            stop=self.stop,
            grammar=self._grammar(run, final_only=True),
        )
        try:
            parsed = self.output_parser.parse(text)
        except OutputParseError:
            return AgentFinish(output=text.strip(), log=text)
        if isinstance(parsed, AgentFinish):
            return parsed
        return AgentFinish(output=text.strip(), log=text)


__all__ = [
    "FINAL_ANSWER_ACTION",
    "FORMAT_INSTRUCTIONS",
    "LANGCHAIN_PROMPT",
    "PREFIX",
    "REACT_PROMPT",
    "REACT_STOP",
    "SUFFIX",
    "TOOL_DESC",
    "ReActAction",
    "ReActOutputParser",
    "parse_latest_plugin_call",
]

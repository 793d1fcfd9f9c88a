"""The sequential planner: an XML plan of function calls (Semantic Kernel's, as the seed rebuilt it).

The model answers::

    <plan>
        <!-- First, we create a short poem about "水哥" -->
        <function.WriterPlugin.ShortPoem input="水哥" setContextVariable="POEM"/>
        <!-- Then, we translate the poem into Chinese -->
        <function.WriterPlugin.Translate input="$POEM" language="Chinese"
                                         appendToResult="RESULT__FINAL_ANSWER"/>
    </plan>
    <!-- END -->

It is asked with the stop sequence ``<!-- END -->``. The answer is parsed with
defusedxml; when that fails (an unescaped ``&``, a missing ``</plan>``, prose around
the plan, a ``<function…>`` without its ``/``) the function elements are picked out
with regular expressions, rebuilt as clean XML and parsed again. Comments and text
are not steps; ``<plan />`` means "no plan is possible". A plan that still cannot be
read, or names functions that do not exist, goes back to the model with the error,
a few times, then :class:`~rolecast.errors.PlanError` carries the raw answer.
``allow_missing_functions=True`` keeps steps naming unknown functions instead (they
are skipped when the plan runs).
"""

from __future__ import annotations

import re
from typing import Any
from xml.etree.ElementTree import Element, ParseError
from xml.sax.saxutils import quoteattr, unescape

from loguru import logger

from rolecast.errors import OutputParseError, PlanError, PlanParseError

from ...tools import FunctionRegistry, render_sk_manual
from ...tools.grammar import sequential_plan_grammar
from ..prompt_function import PromptTemplate
from .base import FunctionPlan, Planner, PlanStep
from .prompts import SEQUENTIAL_FIX, SEQUENTIAL_PLANNER_PROMPT, SEQUENTIAL_STOP

_FENCE = re.compile(r"```(?:xml|XML)?\s*\n?(.*?)```", re.DOTALL)
_PLAN = re.compile(r"<plan\b[^>]*?/>|<plan\b[^>]*>.*?</plan\s*>", re.DOTALL | re.IGNORECASE)
_ATTR_VALUE = r"""(?:"[^"]*"|'[^']*'|[^\s"'<>/=]+)"""
_ATTR_NAME = r"""[^\s"'<>/=]+"""
_FUNCTION_TAG = (
    rf"<\s*function\.(?P<name>[^\s\"'<>/=]+)"
    rf"(?P<attrs>(?:\s*{_ATTR_NAME}\s*=\s*{_ATTR_VALUE})*)\s*/?\s*>"
)
# comments first, so a function tag quoted in a comment is not a step; a comment
# inside an attribute value stays part of its tag, which starts earlier
_SCAN = re.compile(rf"<!--.*?-->|{_FUNCTION_TAG}", re.DOTALL | re.IGNORECASE)
_ATTR = re.compile(rf"""({_ATTR_NAME})\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'<>/=]+))""")
_CHAR_REF = re.compile(r"&#([xX][0-9a-fA-F]+|\d+);")
_PLAN_OPEN = re.compile(r"<plan\b", re.IGNORECASE)


def _xml_text(text: str) -> str:
    """The part of an answer that should hold the plan (END comment and fences removed)."""
    text = text.split(SEQUENTIAL_STOP, 1)[0]
    fences = _FENCE.findall(text)
    if fences:
        text = next((f for f in fences if _PLAN_OPEN.search(f)), fences[0])
    return text.strip()


def _strict(text: str) -> Element:
    import defusedxml.ElementTree as DET

    match = _PLAN.search(text)
    if match is None:
        raise ParseError("no <plan> ... </plan> element in the answer")
    return DET.fromstring(match.group(0))


def _char(match: re.Match[str]) -> str:
    ref = match.group(1)
    return chr(int(ref[1:], 16) if ref[0] in "xX" else int(ref))


def _unescape(value: str) -> str:
    value = _CHAR_REF.sub(_char, value)
    return unescape(value, {"&quot;": '"', "&apos;": "'"})


def repair_plan_xml(text: str) -> str:
    """Rebuild a plan as clean XML from its ``<function.…>`` elements, found by regex.

    Handles unescaped ``&`` / ``<`` in values, single-quoted or unquoted values, a
    missing ``/`` or ``</plan>``, stray closing tags, and prose around the plan.
    """
    tags: list[str] = []
    for match in _SCAN.finditer(text):
        if match.group("name") is None:
            continue  # a comment
        attrs = []
        for name, dq, sq, bare in _ATTR.findall(match.group("attrs") or ""):
            value = dq or sq or bare
            attrs.append(f"{name}={quoteattr(_unescape(value))}")
        tags.append(f"<function.{match.group('name')} {' '.join(attrs)}/>")
    if not tags and not _PLAN_OPEN.search(text):
        raise ParseError("no <plan> and no <function.Plugin.Function .../> elements in the answer")
    return "<plan>" + "".join(tags) + "</plan>"


def _read_xml(text: str) -> Element:
    import defusedxml.ElementTree as DET

    try:
        return _strict(text)
    except ParseError as strict_error:
        logger.debug("plan XML does not parse ({}); repairing it", strict_error)
        try:
            return DET.fromstring(repair_plan_xml(text))
        except ParseError as exc:
            raise PlanParseError(f"the plan is not valid XML: {exc}", raw=text) from exc


def parse_sequential_plan(
    text: str,
    goal: str,
    functions: FunctionRegistry,
    *,
    allow_missing_functions: bool = False,
) -> FunctionPlan:
    """Turn a model's XML answer into a :class:`FunctionPlan` (without running anything).

    Raises :class:`PlanParseError` when the XML cannot be read even after repair, or
    when it names unknown functions and ``allow_missing_functions`` is false.
    """
    root = _read_xml(_xml_text(text))
    steps: list[PlanStep] = []
    unknown: list[str] = []
    for element in root.iter():
        tag = element.tag if isinstance(element.tag, str) else ""
        if not tag.lower().startswith("function."):
            continue  # <plan> itself, or an element that is not a step
        name = tag[len("function.") :]
        step = PlanStep(name)
        for attr, value in element.attrib.items():
            key = attr.lower()
            if key == "setcontextvariable":
                step.outputs.append(value)
            elif key == "appendtoresult":
                result = value[len("RESULT__") :] if value.upper().startswith("RESULT__") else value
                step.results.append(result)
            else:
                step.parameters[attr] = value
        function = functions.find(name)
        if function is not None:
            step.function = function.full_name
        elif allow_missing_functions:
            step.missing = True
        else:
            unknown.append(name)
        steps.append(step)
    if unknown:
        known = ", ".join(f.full_name for f in functions.functions()) or "none"
        raise PlanParseError(f"the plan uses unknown function(s) {unknown}; available: {known}", raw=text)
    return FunctionPlan(goal, steps=steps, planner="sequential", raw=text)


class SequentialPlanner(Planner):
    """Semantic Kernel's sequential planner: ``await SequentialPlanner(kernel).create_plan(goal)``.

    ``allow_missing_functions`` keeps steps that name unknown functions; ``prompt``
    replaces the planner's prompt (it receives ``{{$available_functions}}`` and
    ``{{$input}}``, the goal). On a model that decodes under a grammar the plan is asked
    under :func:`~actions.tools.grammar.sequential_plan_grammar` — only registered
    functions, their declared parameters, bounded values — unless ``constrain_format``
    is False (or ``allow_missing_functions`` is set, or the prompt is your own).
    """

    name = "sequential"

    def __init__(
        self,
        target: Any = None,
        *,
        allow_missing_functions: bool = False,
        prompt: str = SEQUENTIAL_PLANNER_PROMPT,
        constrain_format: bool | None = None,
        **kwargs: Any,
    ):
        super().__init__(target, **kwargs)
        self.allow_missing_functions = allow_missing_functions
        self.prompt = prompt
        self.constrain_format = constrain_format

    def format_grammar(self, registry: FunctionRegistry) -> str | None:
        """The plan's grammar over ``registry``, or None where the answer is not constrained."""
        if self.constrain_format is False or not self.llm.supports_grammar:
            return None
        if self.allow_missing_functions or self.prompt != SEQUENTIAL_PLANNER_PROMPT:
            return None  # unknown functions are wanted, or your prompt asks for its own format
        return sequential_plan_grammar(registry.functions())

    async def render_prompt(self, goal: str) -> str:
        """The prompt the model gets: the function manual, the rules, the goal."""
        manual = render_sk_manual(self.available_functions())
        return await PromptTemplate(self.prompt).render({"available_functions": manual, "input": goal})

    async def create_plan(self, goal: str) -> FunctionPlan:
        """Ask for an XML plan (stop at ``<!-- END -->``), parse it, re-ask on errors."""
        registry = self.available_registry()
        prompt = await self.render_prompt(goal)

        def parse(raw: str) -> FunctionPlan:
            plan = parse_sequential_plan(raw, goal, registry, allow_missing_functions=self.allow_missing_functions)
            return self._plan(goal, steps=plan.steps, raw=raw)

        with self._scope():
            try:
                return await self.llm.ask_valid(
                    prompt, parse, tries=self.max_tries, fix=SEQUENTIAL_FIX, stop=[SEQUENTIAL_STOP],
                    settings=self.settings, grammar=self.format_grammar(registry),
                )
            except OutputParseError as exc:
                raise PlanError(
                    f"the sequential planner got no usable plan in {self.max_tries} answers: {exc.errors[-1:] or exc}",
                    raw=exc.raw,
                    errors=exc.errors,
                ) from exc


__all__ = ["SequentialPlanner", "parse_sequential_plan", "repair_plan_xml"]

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

#: the longest answer the plan parser reads (a plan of a few hundred steps)
MAX_PLAN_CHARS = 200_000

_FENCE = re.compile(r"```(?:xml|XML)?\s*\n?(.*?)```", re.DOTALL)
_PLAN_OPEN = re.compile(r"<plan\b", re.IGNORECASE)
_PLAN_CLOSE = re.compile(r"</plan\s*>", re.IGNORECASE)
# where a step or a comment may start; comments first, so a tag quoted in a comment is not a step
_MARK = re.compile(r"<!--|<\s*function\.", re.IGNORECASE)
_NAME = re.compile(r"""[^\s"'<>/=]+""")
_EQUALS = re.compile(r"\s*=\s*")
_SPACE = re.compile(r"\s*")
_END = re.compile(r"\s*/?\s*>")
_CHAR_REF = re.compile(r"&#(?:[xX]([0-9a-fA-F]{1,8})|([0-9]{1,10}));")


def _xml_text(text: str) -> str:
    """The part of an answer that should hold the plan (END comment and fences removed)."""
    text = text.split(SEQUENTIAL_STOP, 1)[0]
    fences = _FENCE.findall(text)
    if fences:
        text = next((f for f in fences if _PLAN_OPEN.search(f)), fences[0])
    return text.strip()


def _plan_element(text: str) -> str | None:
    """The first ``<plan …/>`` or ``<plan …>…</plan>`` in ``text``, found in one linear pass.

    (The regular expression ``<plan\\b[^>]*>.*?</plan>`` rescans the rest of the text from
    every ``<plan``: ``'<plan>' * 16000`` took seconds.)
    """
    close = _PLAN_CLOSE.search(text)
    gt = -1
    for opening in _PLAN_OPEN.finditer(text):
        if gt < opening.end():
            gt = text.find(">", opening.end())  # starts past the last find: the finds never overlap
            if gt < 0:
                return None
        if text[gt - 1] == "/" and gt - 1 >= opening.end():
            return text[opening.start() : gt + 1]
        while close is not None and close.start() <= gt:
            close = _PLAN_CLOSE.search(text, close.end())
        if close is not None:
            return text[opening.start() : close.end()]
    return None


def _strict(text: str) -> Element:
    import defusedxml.ElementTree as DET

    element = _plan_element(text)
    if element is None:
        raise ParseError("no <plan> ... </plan> element in the answer")
    return DET.fromstring(element)


def _char(match: re.Match[str]) -> str:
    """A character reference as its character; one XML cannot hold stays as written (escaped later)."""
    hexa, decimal = match.groups()
    code = int(hexa, 16) if hexa else int(decimal)
    valid = code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or 0x10000 <= code <= 0x10FFFF
    return chr(code) if valid else match.group(0)


def _unescape(value: str) -> str:
    value = _CHAR_REF.sub(_char, value)
    return unescape(value, {"&quot;": '"', "&apos;": "'"})


class _TagScanner:
    """Reads ``<function.Name attr=value …>`` elements left to right, each character once.

    Attribute values are double-quoted, single-quoted or bare (a bare value ends at
    white space, a quote, ``<``, ``>``, ``/`` or ``=``). A tag that does not parse is
    skipped from the point where it went wrong, so no character is read twice.
    """

    def __init__(self, text: str):
        self.text = text
        self.no_more: set[str] = set()  # closers (quotes, "-->") known to be absent from here on

    def _find(self, needle: str, pos: int) -> int:
        if needle in self.no_more:
            return -1
        found = self.text.find(needle, pos)
        if found < 0:
            self.no_more.add(needle)
        return found

    def tags(self) -> list[tuple[str, list[tuple[str, str]]]]:
        found: list[tuple[str, list[tuple[str, str]]]] = []
        pos = 0
        while (mark := _MARK.search(self.text, pos)) is not None:
            if mark.group() == "<!--":
                end = self._find("-->", mark.end())
                pos = end + 3 if end >= 0 else mark.end()  # an unclosed comment is text
                continue
            tag, pos = self._tag(mark.end())
            if tag is not None:
                found.append(tag)
        return found

    def _tag(self, pos: int) -> tuple[tuple[str, list[tuple[str, str]]] | None, int]:
        """One tag after ``<function.``: ``(name, attributes)`` and where it ends, or ``None`` and where it broke."""
        text = self.text
        name = _NAME.match(text, pos)
        if name is None:
            return None, pos
        attrs: list[tuple[str, str]] = []
        pos = name.end()
        while True:
            end = _END.match(text, pos)
            if end is not None:
                return (name.group(), attrs), end.end()
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches
            key = _NAME.match(text, pos)
            equals = _EQUALS.match(text, key.end()) if key else None
            if key is None or equals is None:
                return None, pos
            pos = equals.end()
            quote = text[pos : pos + 1]
            if quote in ("'", '"'):
                close = self._find(quote, pos + 1)
                if close < 0:
                    return None, pos + 1
                attrs.append((key.group(), text[pos + 1 : close]))
                pos = close + 1
            else:
                bare = _NAME.match(text, pos)
                if bare is None:
                    return None, pos
                attrs.append((key.group(), bare.group()))
                pos = bare.end()


def repair_plan_xml(text: str) -> str:
    """Rebuild a plan as clean XML from its ``<function.…>`` elements, found in one linear scan.

    Handles unescaped ``&`` / ``<`` in values, single-quoted or unquoted values, a
    missing ``/`` or ``</plan>``, stray closing tags, and prose around the plan.
    Character references that XML cannot hold (``&#xD800;``, ``&#1114112;``) are kept
    as text.
    """
    tags = []
    for name, attributes in _TagScanner(text).tags():
        attrs = " ".join(f"{key}={quoteattr(_unescape(value))}" for key, value in attributes)
        tags.append(f"<function.{name} {attrs}/>")
    if not tags and not _PLAN_OPEN.search(text):
        raise ParseError("no <plan> and no <function.Plugin.Function .../> elements in the answer")
    return "<plan>" + "".join(tags) + "</plan>"


def _read_xml(text: str) -> Element:
    import defusedxml.ElementTree as DET

    if len(text) > MAX_PLAN_CHARS:
        raise PlanParseError(f"the plan is longer than {MAX_PLAN_CHARS} characters", raw=text)
    try:
        return _strict(text)
    except (ParseError, ValueError) as strict_error:  # defusedxml refuses entities with a ValueError
        logger.debug("plan XML does not parse ({}); repairing it", strict_error)
        try:
            return DET.fromstring(repair_plan_xml(text))
        except (ParseError, ValueError) as exc:
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

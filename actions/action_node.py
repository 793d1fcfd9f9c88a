"""ActionNode: structured output as MetaGPT builds it — a tree of keyed, typed nodes.

Each node has a ``key``, an ``expected_type``, an ``instruction`` and an ``example``; a
parent made with :meth:`ActionNode.from_children` describes one pydantic model with a
field per child. ``await node.fill(req=..., llm=...)`` asks the model and leaves the
validated answer in ``node.instruct_content`` (and the text in ``node.content``)::

    reasoning = ActionNode(key="reasoning", expected_type=str, instruction="think step by step", example="")
    answer = ActionNode(key="answer", expected_type=int, instruction="the final answer", example=42)
    node = await ActionNode.from_children("Solve", [reasoning, answer]).fill(req="123 + 456?", llm=llm)
    node.instruct_content.answer  # 579

How the model is asked: on a grammar-constrained model (llama.cpp) under the JSON
schema of the children, so the first answer is valid; elsewhere the prompt shows the
format (``schema="json"`` or ``"markdown"``) and an answer that does not validate is
sent back through the seam's one re-ask path. ``schema="raw"`` asks for free text.

The prompt fits the model's context window by construction: the instruction and the format are never
cut; a context too long for the window keeps a list's newest items or a text's first lines, and says
how many were left out (:meth:`ActionNode.fitted_context`).
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from memory.instruct import create_instruct_model
from rolecast.core.jsonutil import extract_json
from rolecast.errors import NodeNotFilled, OutputParseError, UsageError
from rolecast.llm.base import BaseLLM, LLMSettings
from rolecast.llm.human import HumanProvider
from rolecast.llm.types import to_messages
from rolecast.llm.window import answer_room, fit_to_window, omitted_note, schema_tokens

TAG = "CONTENT"
MARKDOWN_TITLE_PREFIX = "## "
SCHEMAS = ("raw", "json", "markdown")
MODES = ("auto", "children", "root")

LANGUAGE_CONSTRAINT = "Language: answer in the language of the request."
FORMAT_CONSTRAINT = f"Format: put the output between [{TAG}] and [/{TAG}], shaped like the format example, and nothing else."  # noqa: E501

SIMPLE_TEMPLATE = """

## context
{context}

-----

## format example
{example}

## nodes: "<node>: <type>  # <instruction>"
{instruction}

## constraint
{constraint}

## action
Follow the nodes' instructions and write the output in the shape of the format example.
"""


class ReviewMode(Enum):
    """Who reviews a filled node (:meth:`ActionNode.review`): the model, or a person."""

    HUMAN = "human"
    AUTO = "auto"


class ReviseMode(Enum):
    """Who reviews and who rewrites (:meth:`ActionNode.revise`)."""

    HUMAN = "human"  # a person writes the new values
    HUMAN_REVIEW = "human_review"  # a person reviews, the model rewrites
    AUTO = "auto"  # the model reviews and rewrites


REVIEW_TEMPLATE = """
## nodes to review: each key's value and the requirement it must meet
[{tag}]
{nodes}
[/{tag}]

## task
Review each value against its requirement. For every key whose value does not meet it,
write one comment saying what to change. Keys that meet their requirement get no comment.

## format
A JSON object {{"<key>": "<comment>"}} between [{tag}] and [/{tag}]; {{}} when every value meets its requirement.
"""

REVISE_TEMPLATE = """
## nodes to revise: each key's value and the review comment on it
[{tag}]
{nodes}
[/{tag}]

## task
Rewrite the value of each key above so that it follows the comment on it; keep its type.

## format example
{example}

## nodes: "<node>: <type>  # <instruction>"
{instruction}

## constraint
{constraint}
"""


class ActionOutput:
    """What a structured action returns: its text and the validated model (MetaGPT's ``ActionOutput``)."""

    def __init__(self, content: str, instruct_content: BaseModel | None = None):
        self.content = content
        self.instruct_content = instruct_content

    @classmethod
    def create_model_class(cls, class_name: str, mapping: dict[str, Any]) -> type[BaseModel]:
        """MetaGPT ≤0.6's name for :meth:`ActionNode.create_model_class`."""
        return create_instruct_model(class_name, mapping)

    def __repr__(self) -> str:
        return f"ActionOutput(content={self.content[:60]!r}, instruct_content={self.instruct_content!r})"


def _markdown(d: dict[str, Any], kv_sep: str) -> str:
    return "".join(f"{MARKDOWN_TITLE_PREFIX}{k}{kv_sep}{v}\n" for k, v in d.items())


class ActionNode:
    """One keyed, typed piece of an action's output; a tree of them describes a model."""

    def __init__(
        self,
        key: str,
        expected_type: Any,
        instruction: str,
        example: Any,
        content: str = "",
        children: dict[str, ActionNode] | None = None,
        schema: str = "",
    ):
        if schema and schema not in SCHEMAS:
            raise UsageError(f"ActionNode schema must be one of {SCHEMAS}, not {schema!r}")
        self.key = key
        self.expected_type = expected_type
        self.instruction = instruction
        self.example = example
        self.content = content
        self.children: dict[str, ActionNode] = dict(children or {})
        self.schema = schema
        self.instruct_content: BaseModel | None = None
        self.context: Any = ""
        self.llm: BaseLLM | None = None
        #: system prompts sent with every ask (an action puts its role's identity here)
        self.system_msgs: list[str] = []

    def __repr__(self) -> str:
        return f"ActionNode({self.key!r}, {self.expected_type!r}, {self.instruction!r}, children={list(self.children)})"

    __str__ = __repr__

    # ------------------------------------------------------------------ tree
    def add_child(self, node: ActionNode) -> None:
        self.children[node.key] = node

    def add_children(self, nodes: Sequence[ActionNode]) -> None:
        for node in nodes:
            self.add_child(node)

    def get_child(self, key: str) -> ActionNode | None:
        return self.children.get(key)

    @classmethod
    def from_children(cls, key: str, nodes: Sequence[ActionNode]) -> ActionNode:
        """A parent node whose output model has one field per child."""
        parent = cls(key, str, "", "")
        parent.add_children(nodes)
        return parent

    @classmethod
    def from_pydantic(cls, model: type[BaseModel], key: str | None = None) -> ActionNode:
        """A node tree describing ``model`` (nested models become nested nodes)."""
        root = cls(key or model.__name__, model, "", "")
        for name, info in model.model_fields.items():
            tp = info.annotation
            if isinstance(tp, type) and issubclass(tp, BaseModel) and typing.get_origin(tp) is None:
                root.add_child(cls.from_pydantic(tp, key=name))
            else:
                default = None if info.is_required() else info.default
                root.add_child(cls(name, tp, info.description or "", default))
        return root

    def keys(self, mode: str = "auto") -> list[str]:
        own = [] if mode == "children" or (mode == "auto" and self.children) else [self.key]
        return own if mode == "root" else own + [c.key for c in self.children.values()]

    # --------------------------------------------------------------- models
    def get_mapping(self, mode: str = "children", exclude: Sequence[str] | None = None) -> dict[str, Any]:
        """``{key: (type, Field)}`` of the children (nested dicts for grandchildren), or of this node."""
        excluded = set(exclude or ())
        if mode == "children" or (mode == "auto" and self.children):
            return self._children_mapping(excluded)
        return {} if self.key in excluded else {self.key: (self.expected_type, ...)}

    def _children_mapping(self, excluded: set[str]) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        for key, child in self.children.items():
            if key in excluded:
                continue
            if child.children:
                mapping[key] = child._children_mapping(excluded)
            else:
                examples = [child.example] if child.example not in (None, "") else None
                mapping[key] = (child.expected_type, Field(..., description=child.instruction, examples=examples))
        return mapping

    @classmethod
    def create_model_class(cls, class_name: str, mapping: dict[str, Any]) -> type[BaseModel]:
        """A pydantic model with a field per ``mapping`` entry (missing fields fail validation)."""
        return create_instruct_model(class_name, mapping)

    def create_class(self, mode: str = "auto", class_name: str | None = None, exclude: Sequence[str] | None = None
                     ) -> type[BaseModel]:
        return self.create_model_class(class_name or f"{self.key}_AN", self.get_mapping(mode, exclude))

    def _get_children_mapping(self, exclude: Sequence[str] | None = None) -> dict[str, Any]:
        """The children's ``{key: (type, Field)}`` (MetaGPT's name; :meth:`get_mapping` ``mode="children"``)."""
        return self.get_mapping("children", exclude)

    def _create_children_class(self, exclude: Sequence[str] | None = None) -> type[BaseModel]:
        """The output model of the children (MetaGPT's name; :meth:`create_class` ``mode="children"``)."""
        return self.create_model_class(f"{self.key}_AN", self._get_children_mapping(exclude))

    def get(self, key: str) -> Any:
        """A field of the filled output."""
        if self.instruct_content is None:
            raise UsageError(f"ActionNode {self.key!r} has no output yet: fill it first")
        return self.instruct_content.model_dump()[key]

    def update_instruct_content(self, incre_data: dict[str, Any]) -> None:
        """Change some fields of the filled output (validated again)."""
        if self.instruct_content is None:
            raise UsageError(f"ActionNode {self.key!r} has no output yet: fill it first")
        data = {**self.instruct_content.model_dump(), **incre_data}
        self.instruct_content = self.create_class().model_validate(data)

    # --------------------------------------------------------------- prompts
    def to_dict(self, format_func: Callable[[ActionNode], Any] | None = None, mode: str = "auto",
                exclude: Sequence[str] | None = None) -> dict[str, Any]:
        """``{key: format_func(node)}`` for this node's tree (the instruction by default)."""
        nodes = self._to_dict(format_func or (lambda n: n.instruction), mode, set(exclude or ()))
        return nodes if isinstance(nodes, dict) else {self.key: nodes}

    def _to_dict(self, fmt: Callable[[ActionNode], Any], mode: str, excluded: set[str]) -> Any:
        value: Any = {} if mode in ("children", "auto") and self.children else fmt(self)
        if mode == "root":
            return {self.key: value}
        for key, child in self.children.items():
            if key not in excluded:
                value[key] = child._to_dict(fmt, mode, excluded)
        return value

    def _compile(self, schema: str, mode: str, tag: str, fmt: Callable[[ActionNode], Any], kv_sep: str,
                 exclude: Sequence[str] | None) -> str:
        nodes = self.to_dict(fmt, mode, exclude)
        if schema == "json":
            text = json.dumps(nodes, indent=4, ensure_ascii=False, default=str)
        elif schema == "markdown":
            text = _markdown(nodes, kv_sep)
        else:
            text = str(nodes)
        return f"[{tag}]\n{text}\n[/{tag}]" if tag else text

    def compile_instruction(self, schema: str = "markdown", mode: str = "children", tag: str = "",
                            exclude: Sequence[str] | None = None) -> str:
        return self._compile(schema, mode, tag, lambda n: f"{n.expected_type}  # {n.instruction}", ": ", exclude)

    def compile_example(self, schema: str = "json", mode: str = "children", tag: str = "",
                        exclude: Sequence[str] | None = None) -> str:
        return self._compile(schema, mode, tag, lambda n: n.example, "\n", exclude)

    def compile(self, context: Any, schema: str = "json", mode: str = "children", template: str = SIMPLE_TEMPLATE,
                exclude: Sequence[str] | None = None) -> str:
        """The prompt: the context, the format example, the nodes' types and instructions."""
        if schema == "raw":
            return f"{context}\n\n## Actions\n{LANGUAGE_CONSTRAINT}\n{self.instruction}"
        return template.format(
            context=context,
            example=self.compile_example(schema=schema, tag=TAG, mode=mode, exclude=exclude),
            instruction=self.compile_instruction(schema="markdown", mode=mode, exclude=exclude),
            constraint="\n".join([LANGUAGE_CONSTRAINT, FORMAT_CONSTRAINT]),
        )

    # ------------------------------------------------------------------ fill
    def set_llm(self, llm: BaseLLM) -> None:
        self.llm = llm
        for child in self.children.values():
            child.set_llm(llm)

    def set_context(self, context: Any) -> None:
        self.context = context
        for child in self.children.values():
            child.set_context(context)

    async def fill(
        self,
        *,
        req: Any = None,
        llm: BaseLLM,
        schema: str = "json",
        mode: str = "auto",
        strgy: str = "simple",
        images: Any = None,
        timeout: float | None = None,
        exclude: Sequence[str] | None = None,
        context: Any = None,
    ) -> ActionNode:
        """Ask ``llm`` to fill this node from ``req`` (``context`` is MetaGPT 0.7's name for it).

        ``schema``: ``"json"``, ``"markdown"`` or ``"raw"`` (a node's own ``schema`` wins);
        ``mode``: ``"auto"`` (the children, or this node if it has none), ``"children"``,
        ``"root"``; ``strgy``: ``"simple"`` (one call) or ``"complex"`` (one per child).
        Returns this node, with ``content`` and ``instruct_content`` set.
        """
        if req is not None and context is not None:
            raise UsageError("ActionNode.fill takes req= (or context=, its older name), not both")
        if images:
            raise UsageError("ActionNode.fill: images are not supported by rolecast's models")
        if not isinstance(llm, BaseLLM):
            raise UsageError(f"ActionNode.fill needs llm= a rolecast BaseLLM, not {type(llm).__name__}")
        schema = self.schema or schema
        if schema not in SCHEMAS or mode not in MODES or strgy not in ("simple", "complex"):
            raise UsageError(f"ActionNode.fill: schema in {SCHEMAS}, mode in {MODES}, strgy simple|complex; "
                             f"got {schema!r}, {mode!r}, {strgy!r}")
        self.set_llm(llm)
        self.set_context(req if req is not None else (context if context is not None else ""))
        settings = LLMSettings(timeout=timeout) if timeout else None
        if strgy == "simple":
            return await self._simple_fill(schema, mode, exclude, settings)
        values: dict[str, Any] = {}
        for child in self.children.values():
            if exclude and child.key in exclude:
                continue
            filled = await child._simple_fill(schema, mode, exclude, settings)
            if filled.instruct_content is not None:
                values.update(filled.instruct_content.model_dump())
        self.instruct_content = self.create_class(mode="children", exclude=exclude).model_validate(values)
        self.content = self.instruct_content.model_dump_json(indent=2)
        return self

    async def fitted_context(self, schema: str, mode: str, exclude: Sequence[str] | None,
                             settings: LLMSettings | None, output_class: type[BaseModel] | None = None) -> Any:
        """The context as the prompt carries it: whole when it fits the model's window beside the node's
        instruction, format (and ``output_class``'s schema, when it is asked for with it) and answer room,
        which are never cut; else a list's newest items (a history, oldest
        first) or a text's first lines (a requirement's head; MetaGPT's history lists the newest first),
        with a note saying how many were left out (logged as ``history_fitted``)."""
        llm = self.llm
        assert llm is not None
        context = self.context
        if isinstance(context, (list, tuple)):
            items, what, which = [str(x) for x in context], "item", "earlier"
        else:
            items, what, which = str(context).splitlines()[::-1], "line", "later"  # the head counts as newest
        if len(items) < 2:
            return context  # nothing to choose from (a prompt that cannot fit is a ContextOverflow)
        fixed = to_messages(self.compile(context="", schema=schema, mode=mode, exclude=exclude), self.system_msgs)
        reserve = await schema_tokens(llm, output_class) if output_class is not None else 0
        omitted = await fit_to_window(llm, items, fixed, answer_room(llm, settings), purpose=f"ActionNode {self.key}",
                                      what=what, reserve=reserve)
        if not omitted:
            return context
        note = omitted_note(omitted, what, which)
        kept = items[omitted:]
        return "\n".join([note, *kept] if which == "earlier" else [*kept[::-1], note])

    async def _simple_fill(self, schema: str, mode: str, exclude: Sequence[str] | None,
                           settings: LLMSettings | None) -> ActionNode:
        llm = self.llm
        assert llm is not None  # set by fill
        output_class = self.create_class(mode=mode, exclude=exclude) if schema != "raw" else None
        structured = output_class if llm.grammar_constrained else None  # asked with llm.structured: the schema too
        context = await self.fitted_context(schema, mode, exclude, settings, structured)
        prompt = self.compile(context=context, schema=schema, mode=mode, exclude=exclude)
        if output_class is None:
            self.content = await llm.ask(prompt, self.system_msgs, settings=settings)
            self.instruct_content = None
            return self
        raw: list[str] = []

        def parse(text: str) -> BaseModel:
            raw.append(text)
            return parse_output(text, output_class, schema)

        if llm.grammar_constrained:
            # decoding under the JSON schema of the children: valid on the first try
            value = await llm.structured(prompt, output_class, self.system_msgs, settings=settings)
            self.content = f"[{TAG}]\n{value.model_dump_json(indent=2)}\n[/{TAG}]"
        else:
            # the format the prompt shows, read strictly; an unusable answer is sent back (the seam's re-ask)
            value = await llm.ask_valid(prompt, parse, self.system_msgs, settings=settings)
            self.content = raw[-1]
        self.instruct_content = value
        return self

    # ------------------------------------------------------- review / revise
    def _filled(self, what: str) -> tuple[BaseModel, BaseLLM]:
        if self.instruct_content is None or self.llm is None:
            raise NodeNotFilled(f"ActionNode {self.key!r}: {what} needs structured output; fill it first "
                                "(with schema json or markdown)")
        return self.instruct_content, self.llm

    def _requirement(self, key: str) -> str:
        child = self.children.get(key)
        return child.instruction if child is not None else self.instruction

    async def _review_keys(self, keys: Sequence[str], mode: ReviewMode) -> dict[str, str]:
        """Comments on the values of ``keys`` of this node's output that miss their requirement."""
        values, llm = self._filled("review")
        dumped = values.model_dump()
        nodes = {k: {"value": dumped[k], "requirement": self._requirement(k)} for k in keys if k in dumped}
        if not nodes:
            return {}
        reviewer: BaseLLM = HumanProvider() if mode is ReviewMode.HUMAN else llm
        prompt = REVIEW_TEMPLATE.format(tag=TAG, nodes=json.dumps(nodes, ensure_ascii=False, indent=2, default=str))

        def parse(text: str) -> dict[str, str]:
            comments = extract_json(_tagged(text), expect=dict)
            unknown = set(comments) - set(nodes)
            if unknown:
                raise OutputParseError(f"comments on keys that were not reviewed: {sorted(unknown)}; "
                                       f"the keys are {sorted(nodes)}", raw=text)
            return {k: str(v) for k, v in comments.items() if v not in (None, "")}

        return await reviewer.ask_valid(prompt, parse, self.system_msgs)

    async def _revise_keys(self, keys: Sequence[str], mode: ReviseMode) -> dict[str, Any]:
        """Review ``keys`` (by a person or the model), then have the commented values rewritten."""
        values, llm = self._filled("revise")
        if mode is ReviseMode.HUMAN:
            comments = {k: "rewrite this value" for k in keys}
        else:
            comments = await self._review_keys(keys, ReviewMode.HUMAN if mode is ReviseMode.HUMAN_REVIEW
                                               else ReviewMode.AUTO)
        if not comments:
            return {}
        dumped = values.model_dump()
        exclude = [k for k in self.keys() if k not in comments]
        nodes = {k: {"value": dumped[k], "comment": c} for k, c in comments.items()}
        prompt = REVISE_TEMPLATE.format(
            tag=TAG, nodes=json.dumps(nodes, ensure_ascii=False, indent=2, default=str),
            example=self.compile_example(schema="json", mode="auto", tag=TAG, exclude=exclude),
            instruction=self.compile_instruction(schema="markdown", mode="auto", exclude=exclude),
            constraint=FORMAT_CONSTRAINT,
        )
        output_class = self.create_model_class(f"{self.key}_AN_REVISE", self.get_mapping("auto", exclude))
        writer: BaseLLM = HumanProvider() if mode is ReviseMode.HUMAN else llm
        revised = await writer.ask_valid(prompt, lambda text: parse_output(text, output_class), self.system_msgs)
        new_values = revised.model_dump()
        self.update_instruct_content(new_values)
        return new_values

    def _review_units(self, strgy: str) -> list[list[str]]:
        """The keys reviewed per call: all at once (``simple``), or one child at a time (``complex``;
        a node without children has none)."""
        if strgy not in ("simple", "complex"):
            raise UsageError(f"strgy is 'simple' or 'complex', not {strgy!r}")
        if strgy == "simple":
            return [self.keys()]
        return [[key] for key in self.children]

    async def review(self, strgy: str = "simple", review_mode: ReviewMode = ReviewMode.AUTO) -> dict[str, str]:
        """Comments on the filled output: ``{key: comment}`` for each value that misses its node's
        instruction (none for the values that meet it). MetaGPT's ``ActionNode.review``.

        ``strgy="simple"`` reviews every key in one call; ``"complex"`` one call per child.
        ``review_mode=ReviewMode.HUMAN`` asks a person (standard input) instead of the model.
        Raises :class:`~rolecast.errors.NodeNotFilled` (a ``RuntimeError``) before :meth:`fill`.
        """
        self._filled("review")
        mode = _mode(ReviewMode, review_mode)
        comments: dict[str, str] = {}
        for keys in self._review_units(strgy):
            comments.update(await self._review_keys(keys, mode))
        return comments

    async def revise(self, strgy: str = "simple", revise_mode: ReviseMode = ReviseMode.AUTO) -> dict[str, Any]:
        """Review the filled output, then rewrite the values that drew a comment; the output
        (``instruct_content``) is updated and the new values returned. MetaGPT's ``ActionNode.revise``.

        ``revise_mode``: ``AUTO`` (the model reviews and rewrites), ``HUMAN_REVIEW`` (a person
        reviews, the model rewrites), ``HUMAN`` (a person writes the new values).
        """
        self._filled("revise")
        mode = _mode(ReviseMode, revise_mode)
        revised: dict[str, Any] = {}
        for keys in self._review_units(strgy):
            revised.update(await self._revise_keys(keys, mode))
        return revised


E = typing.TypeVar("E", ReviewMode, ReviseMode)


def _mode(kind: type[E], value: Any) -> E:
    try:
        return kind(value)
    except ValueError:
        raise UsageError(f"{kind.__name__} is one of {[m.value for m in kind]}, not {value!r}") from None


_TAGGED = re.compile(rf"\[{TAG}\](.*?)\[/{TAG}\]", re.DOTALL)
_HEADING = re.compile(r"^#{1,6}\s*(.+?)\s*$")


def _tagged(text: str) -> str:
    match = _TAGGED.search(text)
    return match.group(1) if match else text


def parse_output(text: str, output_class: type[BaseModel], schema: str = "json") -> BaseModel:
    """Read a model's answer as ``output_class``: JSON (``[CONTENT]``-tagged or not) or markdown sections.

    Raises :class:`~rolecast.errors.OutputParseError` with the reason, so the caller can re-ask.
    """
    body = _tagged(text)
    try:
        if schema == "markdown":
            return output_class.model_validate(_markdown_values(body, output_class))
        return output_class.model_validate(extract_json(body, expect=dict))
    except ValidationError as exc:
        raise OutputParseError(f"the answer does not fit {output_class.__name__}: {exc}", raw=text) from exc


def _markdown_values(body: str, output_class: type[BaseModel]) -> dict[str, Any]:
    """``## key`` sections → values; a non-text field's section is read as JSON (or a bullet list)."""
    fields = output_class.model_fields
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in body.splitlines():
        match = _HEADING.match(line)
        if match and match.group(1).strip(" :") in fields:
            current = match.group(1).strip(" :")
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    values: dict[str, Any] = {}
    for key, lines in sections.items():
        text = "\n".join(lines).strip()
        if fields[key].annotation is str:
            values[key] = text.removeprefix("```").removesuffix("```").strip() if text.startswith("```") else text
            continue
        try:
            values[key] = extract_json(text)
        except OutputParseError:
            bullets = [ln.strip()[2:].strip() for ln in lines if ln.strip().startswith(("- ", "* "))]
            values[key] = bullets if bullets else text
    return values


__all__ = ["ActionNode", "ActionOutput", "ReviewMode", "ReviseMode", "parse_output"]

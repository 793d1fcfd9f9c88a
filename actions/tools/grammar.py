"""Grammars of the tool formats: what a model may write in a ReAct, stepwise or XML-plan step.

Each grammar admits exactly the answers its loop can use — a registered tool's name
(never another), then arguments that are JSON valid for that tool's parameter schema
(:attr:`KernelFunction.json_schema`), or a final answer — with every free part
(thoughts, answers, values) bounded in length. A grammar is built once per tool set
and format and cached (tool choice from many tools stays cheap); the text goes to the
model through ``ask(..., grammar=...)``, which models that cannot decode under a
grammar ignore (their answers are parsed strictly, as always).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from rolecast.llm.grammar import GrammarBuilder, free_text, literal

from .function import KernelFunction

THOUGHT_CHARS = 200  # a thought is one line of at most this many characters
ANSWER_CHARS = 300  # a final answer, one line
VALUE_CHARS = 300  # one string argument when the tool's schema sets no bound
MAX_PLAN_STEPS = 6
COMMENT_CHARS = 100
VARIABLE_CHARS = 30


def argument_schema(fn: KernelFunction) -> dict[str, Any]:
    """The tool's parameter schema, closed: only its own parameters (what ``parse_arguments`` takes)."""
    return {**fn.json_schema, "additionalProperties": False}


def _signature(functions: Iterable[KernelFunction], name: str = "full_name") -> tuple[tuple[str, str], ...]:
    """What a grammar depends on: each tool's name and parameter schema (the cache key)."""
    return tuple(
        (str(getattr(f, name)), json.dumps(argument_schema(f), default=str)) for f in functions
    )


def _tools_rule(builder: GrammarBuilder, signature: Sequence[tuple[str, str]], between: str) -> str:
    """One alternative per tool: its name (as the format writes it), ``between``, its arguments."""
    options = []
    for i, (name, schema) in enumerate(signature):
        args = builder.json_value(json.loads(schema), f"args{i}")
        options.append(f"{literal(name)} {between} {args}")
    return builder.add("tool-call", " | ".join(options))


# --------------------------------------------------------------------- ReAct
def react_grammar(functions: Iterable[KernelFunction], *, final_only: bool = False) -> str:
    """``Thought: …`` then ``Action: <tool>`` / ``Action Input: <its JSON>``, or ``Final Answer: …``.

    With ``final_only`` (the answer asked for when a limit is hit) only the final answer.
    """
    return _react(_signature(functions), final_only)


@lru_cache(maxsize=64)
def _react(signature: tuple[tuple[str, str], ...], final_only: bool) -> str:
    builder = GrammarBuilder(max_string=VALUE_CHARS)
    thought = builder.add("thought", free_text(THOUGHT_CHARS))
    final = builder.add("final", f'"Final Answer: " {free_text(ANSWER_CHARS)}')
    if final_only or not signature:
        return builder.text(f'"Thought: " {thought} "\\n" {final}')
    call = _tools_rule(builder, signature, '"\\nAction Input: "')
    return builder.text(f'"Thought: " {thought} "\\n" ("Action: " {call} | {final})')


# ------------------------------------------------------------------ stepwise
def stepwise_grammar(functions: Iterable[KernelFunction], *, final_only: bool = False) -> str:
    """``[THOUGHT]`` … then ``[ACTION]`` ``{"action": <tool>, "action_variables": <its JSON>}``,
    or ``[FINAL ANSWER]`` …; tools are named by their wire name (``Plugin-Function``)."""
    return _stepwise(_signature(functions, "wire_name"), final_only)


@lru_cache(maxsize=64)
def _stepwise(signature: tuple[tuple[str, str], ...], final_only: bool) -> str:
    builder = GrammarBuilder(max_string=VALUE_CHARS)
    # no "[" in a thought: "[FINAL ANSWER]" or "[ACTION]" inside it would be read as the real one
    thought = builder.add("thought", free_text(THOUGHT_CHARS, excluded="\n["))
    final = builder.add("final", f'"[FINAL ANSWER]\\n" {free_text(ANSWER_CHARS)}')
    if final_only or not signature:
        return builder.text(final)
    options = []
    for i, (name, schema) in enumerate(signature):
        args = builder.json_value(json.loads(schema), f"args{i}")
        options.append(f'{literal(json.dumps(name))} ", \\"action_variables\\": " {args}')
    call = builder.add("tool-call", " | ".join(options))
    action = builder.add("action", f'"[ACTION]\\n{{\\"action\\": " ({call}) "}}"')
    return builder.text(f'"[THOUGHT]\\n" {thought} "\\n" ({action} | {final})')


# ------------------------------------------------------------ sequential plan
def sequential_plan_grammar(functions: Iterable[KernelFunction], *, max_steps: int = MAX_PLAN_STEPS) -> str:
    """A ``<plan>`` of 1 … ``max_steps`` ``<function.Plugin.Fn …/>`` elements, or ``<plan />``.

    Each element names a registered function and may set its declared parameters (in
    order), ``setContextVariable`` and ``appendToResult="RESULT__…"``; values are free
    text without quotes, ``<`` or ``&`` (so the XML always parses), bounded in length.
    A short ``<!-- comment -->`` may come before each step, as in Semantic Kernel's examples.
    """
    signature = tuple((f.full_name, tuple(p.name for p in f.parameters)) for f in functions)
    return _sequential(signature, max_steps)


@lru_cache(maxsize=64)
def _sequential(signature: tuple[tuple[str, tuple[str, ...]], ...], max_steps: int) -> str:
    builder = GrammarBuilder()
    value = builder.add("attr-value", free_text(VALUE_CHARS, min_chars=0, excluded='"<&\n'))
    variable = builder.add("variable", f"[A-Z] [A-Z0-9_]{{0,{VARIABLE_CHARS - 1}}}")
    outputs = builder.add(
        "outputs",
        f'(" setContextVariable=\\"" {variable} "\\"")? (" appendToResult=\\"RESULT__" {variable} "\\"")?',
    )
    elements = []
    for i, (name, params) in enumerate(signature):
        attrs = " ".join(f'(" {p}=\\"" {value} "\\"")?' for p in params)
        body = f'{literal("<function." + name)} {attrs} {outputs} "/>"'.replace("  ", " ")
        elements.append(builder.add(f"fn{i}", body))
    comment = builder.add("comment", f'"    <!-- " {free_text(COMMENT_CHARS, excluded=chr(10) + "-<>")} " -->\\n"')
    step = builder.add("step", f'{comment}? "    " ({" | ".join(elements)}) "\\n"')
    if not elements:
        return builder.text('"<plan />"')
    return builder.text(f'"<plan>\\n" {step}{{1,{max_steps}}} "</plan>" | "<plan />"')


__all__ = [
    "ANSWER_CHARS",
    "THOUGHT_CHARS",
    "VALUE_CHARS",
    "argument_schema",
    "react_grammar",
    "sequential_plan_grammar",
    "stepwise_grammar",
]

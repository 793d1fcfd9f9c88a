"""Function manuals in the formats the seed articles show, one renderer per format.

LangChain's ``name: description`` lines, Qwen's ``TOOL_DESC`` blocks, Semantic
Kernel's function manual (sequential planner) and its stepwise manual.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from .function import KernelFunction

QWEN_TOOL_DESC = (
    "{name_for_model}: Call this tool to interact with the {name_for_human} API. "
    "What is the {name_for_human} API useful for? {description_for_model} "
    "Parameters: {parameters} Format the arguments as a JSON object."
)


def render_langchain(functions: Iterable[KernelFunction]) -> str:
    """LangChain's zero-shot tool lines: ``name: description``."""
    return "\n".join(f"{f.full_name}: {f.description}" for f in functions)


def render_qwen(functions: Iterable[KernelFunction]) -> str:
    """Qwen's ``TOOL_DESC`` blocks, one per tool, separated by blank lines."""
    blocks = []
    for f in functions:
        params = [
            # as in Qwen's TOOL_DESC: the description beside the schema, not inside it
            {
                "name": p.name,
                "description": p.description,
                "required": p.required,
                "schema": {k: v for k, v in p.schema().items() if k != "description"},
            }
            for p in f.parameters
        ]
        blocks.append(
            QWEN_TOOL_DESC.format(
                name_for_model=f.full_name,
                name_for_human=f.human_name,
                description_for_model=f.description,
                parameters=json.dumps(params, ensure_ascii=False),
            )
        )
    return "\n\n".join(blocks)


def render_sk_manual(functions: Iterable[KernelFunction]) -> str:
    """Semantic Kernel's function manual (``Plugin.Function:`` / description / inputs)."""
    blocks = []
    for f in functions:
        lines = [f"{f.full_name}:", f"  description: {f.description}", "  inputs:"]
        for p in f.parameters:
            lines.append(f"    - {p.name}: {p.description}".rstrip())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_stepwise_manual(functions: Iterable[KernelFunction]) -> str:
    """The manual the stepwise prompt announces: for each function a line
    ``MathPlugin-Add: Add value to a value``, then ``  inputs:`` and one
    ``    - input: the first number`` line per parameter (``  inputs: None`` for none)."""
    entries = []
    for fn in sorted(functions, key=lambda f: (f.plugin_name or "", f.name)):
        inputs = [
            f"    - {p.name}: {p.description}"
            + (f" (default value={p.default})" if not p.required and p.default not in (None, "") else "")
            for p in fn.parameters
        ]
        body = "\n".join(inputs)
        tail = f"  inputs:\n{body}\n" if body else "  inputs: None\n"
        entries.append(f"{fn.wire_name}: {fn.description.strip()}\n{tail}")
    return "\n".join(entries)


__all__ = ["QWEN_TOOL_DESC", "render_langchain", "render_qwen", "render_sk_manual", "render_stepwise_manual"]

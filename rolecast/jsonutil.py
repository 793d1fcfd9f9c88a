"""Lenient extraction of JSON from model text (code fences, prose around it, JSON5)."""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import OutputParseError

_FENCE = re.compile(r"```(?:json5?|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _balanced_spans(text: str, opener: str, closer: str) -> list[str]:
    """Every top-level balanced ``opener … closer`` span, skipping brackets inside strings."""
    spans: list[str] = []
    depth = 0
    start = -1
    in_str: str | None = None
    escaped = False
    for i, ch in enumerate(text):
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == in_str:
                in_str = None
            continue
        if ch in "\"'" and depth > 0:
            in_str = ch
        elif ch == opener:
            if depth == 0:
                start = i
            depth += 1
        elif ch == closer and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans


def loads_lenient(text: str) -> Any:
    """Parse JSON strictly, then as JSON5 (single quotes, trailing commas, comments)."""
    try:
        return json.loads(text)
    except ValueError:
        import json5  # imported on first lenient parse only

        return json5.loads(text)


def extract_json(text: str, *, expect: type | None = None) -> Any:
    """Find and parse the JSON value in a model's answer.

    Tries, in order: the whole text; each fenced code block; each balanced ``{…}`` and
    ``[…]`` span. ``expect`` (``dict`` or ``list``) rejects values of another type.
    Raises :class:`OutputParseError` (with the raw text) when nothing parses.
    """
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    candidates += _balanced_spans(text, "{", "}") + _balanced_spans(text, "[", "]")
    last_error: Exception | None = None
    for cand in candidates:
        if not cand:
            continue
        try:
            value = loads_lenient(cand)
        except (ValueError, TypeError) as exc:
            last_error = exc
            continue
        if expect is not None and not isinstance(value, expect):
            continue
        return value
    kind = f"a JSON {expect.__name__}" if expect is not None else "JSON"
    detail = f" ({last_error})" if last_error else ""
    raise OutputParseError(f"no {kind} found in the answer{detail}", raw=text)

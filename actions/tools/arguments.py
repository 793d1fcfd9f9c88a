"""One place that turns what a model wrote into a function's arguments.

Every format asks for arguments its own way — ReAct's ``Action Input:`` text, a
native tool call's JSON, stepwise ``action_variables``, a plan step's attributes, a
template's argument bag — and all of them end here:

* :func:`arguments_from_text`: a JSON object (lenient: JSON5, a code fence, prose
  around it), or the bare text for a function with one text input;
* :func:`fit_arguments`: a mapping fitted to the function's parameters — Semantic
  Kernel's ``input`` goes to the one required parameter still missing, and in an
  argument *bag* (``bag=True``) the keys the function does not declare are left out.

Validation against the declared types happens after, in
:meth:`~actions.tools.function.KernelFunction.parse_arguments`.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rolecast.core.jsonutil import extract_json, loads_lenient
from rolecast.errors import OutputParseError, ToolError

if TYPE_CHECKING:
    from .function import KernelFunction

_FENCE = re.compile(r"^\s*```[\w+-]*[ \t]*\n?(.*?)\n?```\s*$", re.DOTALL)


def strip_code_fence(text: str) -> str:
    """The code inside a Markdown code fence (```python ... ```), else ``text`` unchanged."""
    match = _FENCE.match(text)
    return match.group(1) if match else text


def text_parameter(fn: KernelFunction) -> str | None:
    """The one parameter a bare text input goes to (a function with one required text input)."""
    required = [p for p in fn.parameters if p.required] or fn.parameters[:1]
    if len(required) == 1 and required[0].annotation in (str, Any, inspect.Parameter.empty):
        return required[0].name
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = loads_lenient(text)
    except OutputParseError:
        try:
            value = extract_json(text, expect=dict)
        except OutputParseError:
            return None
    return value if isinstance(value, dict) else None


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if isinstance(value, str):
            return value
    return text


def arguments_from_text(fn: KernelFunction, raw: str) -> dict[str, Any]:
    """The arguments for ``fn`` from the text a model wrote.

    A JSON object becomes keyword arguments; a function with one text input takes the
    text itself (code fences stripped, a quoted JSON string unquoted); a function with
    one required input of another type takes the bare value (converted when validated).
    JSON that a function needing an object cannot use raises :class:`OutputParseError`;
    plain text for a function of several inputs raises :class:`ToolError`.
    """
    text = strip_code_fence(raw.strip()).strip()
    if not text:
        return {}
    target = text_parameter(fn)
    if text.startswith("{"):
        value = _json_object(text)
        names = {p.name for p in fn.parameters}
        if value is not None and (target is None or (value and set(value) <= names)):
            return value
        if target is None:
            example = json.dumps({p.name: "..." for p in fn.parameters})
            raise OutputParseError(
                f"Could not parse the Action Input for {fn.full_name} as a JSON object: {raw!r}. "
                f"Format the arguments as a JSON object, e.g. {example}",
                raw=raw,
            )
    if target is not None:
        return {target: _unquote(text)}
    required = [p for p in fn.parameters if p.required]
    if len(required) == 1 or (not required and len(fn.parameters) == 1):
        return {(required or fn.parameters)[0].name: text}
    raise ToolError(
        f"{fn.full_name} expects a JSON object with {', '.join(p.name for p in fn.parameters)}; got {raw!r}"
    )


def json_arguments(text: str) -> dict[str, Any]:
    """A native tool call's ``arguments``: a JSON object (lenient), or empty for none."""
    if not text or not text.strip():
        return {}
    try:
        value = loads_lenient(text)
    except OutputParseError as exc:
        raise OutputParseError(f"the arguments are not valid JSON: {exc}; send a JSON object", raw=text) from exc
    if not isinstance(value, dict):
        raise OutputParseError(f"the arguments must be a JSON object, got {text!r}", raw=text)
    return value


def lookup(variables: Mapping[str, Any], name: str) -> Any:
    """A variable by name, case-insensitively as in Semantic Kernel (None when absent)."""
    if name in variables:
        return variables[name]
    folded = name.casefold()
    return next((v for k, v in variables.items() if k.casefold() == folded), None)


def fit_arguments(fn: KernelFunction, arguments: Mapping[str, Any], *, bag: bool = False) -> dict[str, Any]:
    """``arguments`` fitted to ``fn``'s parameters.

    An ``input`` that ``fn`` does not declare goes to its one missing required
    parameter (Semantic Kernel's convention for a function's main input). With
    ``bag=True`` the mapping is an argument bag shared by many functions: keys ``fn``
    does not declare are left out (unless it accepts extras). Without it they stay, for
    validation to report.
    """
    names = {p.name for p in fn.parameters}
    fitted = dict(arguments)
    if "input" in fitted and "input" not in names:
        value = fitted.pop("input")
        missing = [p.name for p in fn.parameters if p.required and p.name not in fitted]
        if len(missing) == 1 and value not in (None, ""):
            fitted[missing[0]] = value
    if bag and not fn.accepts_extra():
        fitted = {k: v for k, v in fitted.items() if k in names}
    return fitted


__all__ = [
    "arguments_from_text",
    "fit_arguments",
    "json_arguments",
    "lookup",
    "strip_code_fence",
    "text_parameter",
]

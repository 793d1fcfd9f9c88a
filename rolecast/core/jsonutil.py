"""Lenient, bounded extraction of JSON from model text (code fences, prose around it, JSON5).

Model output is untrusted input, so every function here runs in time linear in its
input, never recurses per nesting level, and fails only with
:class:`~rolecast.errors.OutputParseError`:

* the input is at most :data:`MAX_JSON_CHARS` characters;
* values nest at most :data:`MAX_JSON_DEPTH` levels (checked before a recursive
  parser or validator ever sees them);
* JSON5 (single quotes, trailing commas, comments, unquoted keys, hex numbers) is
  translated to strict JSON by one regular-expression tokenizer pass, then parsed by
  the standard library's C parser — no recursive descent in Python.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import OutputParseError

#: the longest text a JSON parser of model output accepts (a few hundred thousand tokens)
MAX_JSON_CHARS = 1_000_000
#: the deepest nesting of arrays and objects accepted (real answers nest a handful deep)
MAX_JSON_DEPTH = 100
#: at most this many candidate spans are parsed in one answer (the JSON comes early)
MAX_CANDIDATES = 32

_FENCE = re.compile(r"```(?:json5?|JSON)?\s*\n?(.*?)```", re.DOTALL)

# one JSON5 token per match; every alternative is unambiguous, so matching never backtracks
_TOKEN = re.compile(
    r"""
    (?P<ws>[\s\ufeff]+)
  | (?P<comment>//[^\n\r\u2028\u2029]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<number>[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Infinity|NaN))
  | (?P<punct>[{}\[\]:,])
  | (?P<ident>[A-Za-z_$][\w$]*)
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|\r\n|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "0": "\0"}
_LINE_BREAKS = {"\n", "\r", "\r\n", "\u2028", "\u2029"}
_LITERALS = {"true", "false", "null", "Infinity", "NaN"}
_BRACKETS = re.compile(r"""[{}\[\]"'\\]""")


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "xu" and len(code) > 1:
        return chr(int(code[1:], 16))
    if code in _LINE_BREAKS:
        return ""  # a JSON5 line continuation
    return _SIMPLE_ESCAPES.get(code, code)


def _string(token: str) -> str:
    body = token[1:-1]
    if token[0] == '"' and "\\" not in body:
        return token
    return json.dumps(_ESCAPE.sub(_unescape, body))


def _number(token: str) -> str:
    sign = "-" if token[0] == "-" else ""
    body = token.lstrip("+-")
    if body[:2] in ("0x", "0X"):
        return sign + str(int(body, 16))
    if body in ("Infinity", "NaN"):
        return "NaN" if body == "NaN" else sign + body
    if body.startswith("."):
        body = "0" + body
    if body.endswith("."):
        body += "0"
    if "." not in body and "e" not in body.lower() and len(body) > 1:
        body = body.lstrip("0") or "0"  # JSON has no leading zeros
    return sign + body


def json5_to_json(text: str) -> str:
    """Translate JSON5 text to strict JSON in one linear pass (raises :class:`OutputParseError`).

    Comments go, strings become double-quoted JSON strings, unquoted keys are quoted,
    trailing commas are dropped, JSON5 numbers become JSON numbers. Nesting deeper
    than :data:`MAX_JSON_DEPTH` is refused before anything recursive runs.
    """
    out: list[str] = []
    depth = 0
    pos = 0
    n = len(text)
    key = False  # the last token was a bare word, which must be a key
    while pos < n:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise OutputParseError(f"not JSON: unexpected {text[pos:pos + 20]!r} at character {pos}", raw=text)
        kind, token = match.lastgroup, match.group()
        if kind in ("ws", "comment"):
            pos = match.end()
            continue
        if key and token != ":":
            raise OutputParseError(f"not JSON: a bare word that is not a key before character {pos}", raw=text)
        pos = match.end()
        key = kind == "ident" and token not in _LITERALS
        if kind == "string":
            out.append(_string(token))
        elif kind == "number":
            out.append(_number(token))
        elif kind == "ident":
            out.append(json.dumps(token) if key else token)
        elif token in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise OutputParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", raw=text)
            out.append(token)
        elif token in "]}":
            depth -= 1
            if out and out[-1] == ",":
                out.pop()  # a trailing comma
            out.append(token)
        else:
            out.append(token)
    if key:
        raise OutputParseError("not JSON: it ends in a bare word", raw=text)
    return "".join(out)


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`OutputParseError` when ``value`` nests lists/dicts deeper than ``limit`` (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            raise OutputParseError(f"JSON nested deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)


def loads_lenient(text: str) -> Any:
    """Parse JSON strictly, then as JSON5 (single quotes, trailing commas, comments, bare keys).

    Linear in ``len(text)``; fails only with :class:`OutputParseError` — on text longer
    than :data:`MAX_JSON_CHARS`, nesting deeper than :data:`MAX_JSON_DEPTH`, or text
    that is not JSON5.
    """
    if len(text) > MAX_JSON_CHARS:
        raise OutputParseError(f"the JSON is longer than {MAX_JSON_CHARS} characters", raw=text[:1000])
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        try:
            value = json.loads(json5_to_json(text), strict=False)
        except (ValueError, RecursionError) as exc:
            raise OutputParseError(f"not JSON: {exc}", raw=text) from exc
    try:
        check_depth(value)
    except OutputParseError as exc:
        exc.raw = text
        raise
    return value


def balanced_spans(text: str, opener: str, closer: str) -> list[str]:
    """Every top-level balanced ``opener … closer`` span, skipping brackets inside strings.

    Visits only bracket, quote and backslash characters, so prose costs next to nothing.
    """
    spans: list[str] = []
    depth = 0
    start = -1
    in_str: str | None = None
    skip = -1  # the position of an escaped character
    for match in _BRACKETS.finditer(text):
        i, ch = match.start(), match.group()
        if in_str:
            if i == skip:
                continue
            if ch == "\\":
                skip = i + 1
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


def extract_json(text: str, *, expect: type | None = None) -> Any:
    """Find and parse the JSON value in a model's answer.

    Tries, in order: the whole text; each fenced code block; each balanced ``{…}`` and
    ``[…]`` span (at most :data:`MAX_CANDIDATES` in all). ``expect`` (``dict`` or
    ``list``) rejects values of another type. Raises :class:`OutputParseError` (with
    the raw text) when nothing parses; linear in the text's length.
    """
    if len(text) > MAX_JSON_CHARS:
        raise OutputParseError(f"the answer is longer than {MAX_JSON_CHARS} characters", raw=text)
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    candidates += balanced_spans(text, "{", "}") + balanced_spans(text, "[", "]")
    last_error: Exception | None = None
    tried: set[str] = set()
    for cand in candidates:
        if not cand or cand in tried:
            continue
        if len(tried) >= MAX_CANDIDATES:
            break
        tried.add(cand)
        try:
            value = loads_lenient(cand)
        except OutputParseError as exc:
            last_error = exc
            continue
        if expect is not None and not isinstance(value, expect):
            continue
        return value
    kind = f"a JSON {expect.__name__}" if expect is not None else "JSON"
    detail = f" ({last_error})" if last_error else ""
    raise OutputParseError(f"no {kind} found in the answer{detail}", raw=text)


__all__ = [
    "MAX_JSON_CHARS",
    "MAX_JSON_DEPTH",
    "balanced_spans",
    "check_depth",
    "extract_json",
    "json5_to_json",
    "loads_lenient",
]

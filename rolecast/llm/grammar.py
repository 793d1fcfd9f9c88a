"""GBNF grammars: the building blocks loops and planners use to make a format valid by construction.

A model that decodes under a grammar (llama.cpp in-process, a llama.cpp or vLLM
server) can only write text the grammar admits. The helpers here build GBNF text —
llama.cpp's grammar notation — with no model and no third-party import:

* :func:`literal` and :func:`alternation`: exact strings, one of several strings;
* :func:`free_text`: free text, bounded in length (a small model cannot loop in it);
* :class:`GrammarBuilder`: named rules, and :meth:`GrammarBuilder.json_value`, which
  turns a JSON schema (a tool's parameters) into rules admitting only JSON valid for
  it — every string, array and number bounded, ``$ref`` resolved, nesting limited.

Grammars are plain text; a provider compiles and caches them (see ``LocalLLM``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import UsageError

#: characters of a JSON string value when the schema sets no ``maxLength``
DEFAULT_MAX_STRING = 200
#: items of a JSON array when the schema sets no ``maxItems``
DEFAULT_MAX_ITEMS = 8
#: how deep a schema is followed; deeper values are bounded strings
MAX_SCHEMA_DEPTH = 6
MAX_DIGITS = 15

_RULE_NAME = re.compile(r"[^a-zA-Z0-9-]+")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}

# one character of a JSON string: anything but a quote, a backslash or a control
# character, or an escape
JSON_CHAR = r'[^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'


def literal(text: str) -> str:
    """``text`` as a GBNF string literal (``"..."``, with escapes)."""
    return '"' + "".join(_ESCAPES.get(c, c) for c in text) + '"'


def alternation(options: Iterable[str]) -> str:
    """A GBNF alternative admitting exactly one of ``options`` (as literals), in parentheses."""
    items = [literal(o) for o in dict.fromkeys(options)]
    if not items:
        raise UsageError("an alternation needs at least one option")
    return "(" + " | ".join(items) + ")"


def char_class(excluded: str) -> str:
    """A class of every character but those in ``excluded`` (``[^...]``)."""
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    escaped = "".join("\\" + c if c in "]\\^-" else named.get(c, c) for c in excluded)
    return f"[^{escaped}]"


def free_text(max_chars: int, *, min_chars: int = 1, excluded: str = "\n") -> str:
    """Free text of ``min_chars`` … ``max_chars`` characters, none of them in ``excluded``.

    The bound is the point: a small model that starts repeating itself inside a
    thought or a value is cut off there, and the format goes on.
    """
    if max_chars < 1 or min_chars < 0 or min_chars > max_chars:
        raise UsageError(f"free_text needs 0 <= min_chars <= max_chars, 1 <= max_chars; got {min_chars}, {max_chars}")
    return f"{char_class(excluded)}{{{min_chars},{max_chars}}}"


def rule_name(text: str) -> str:
    """A valid GBNF rule name made from ``text`` (letters, digits, dashes)."""
    return _RULE_NAME.sub("-", text).strip("-").lower() or "r"


class GrammarBuilder:
    """Collects named GBNF rules and renders them with ``root`` first.

    ``add(name, body)`` returns the rule's name (made unique when the same name is
    asked for with a different body; an identical rule is shared).
    """

    def __init__(self, *, max_string: int = DEFAULT_MAX_STRING, max_items: int = DEFAULT_MAX_ITEMS) -> None:
        self.rules: dict[str, str] = {}
        self.max_string = max_string
        self.max_items = max_items

    def add(self, name: str, body: str) -> str:
        base = rule_name(name)
        key, n = base, 0
        while key in self.rules and self.rules[key] != body:
            n += 1
            key = f"{base}{n}"
        self.rules[key] = body
        return key

    def text(self, root: str) -> str:
        """The grammar: ``root ::= <root>`` then every rule, one per line."""
        lines = [f"root ::= {root}"]
        lines += [f"{name} ::= {body}" for name, body in self.rules.items() if name != "root"]
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------- JSON values
    def json_string(self, max_length: int | None = None, min_length: int = 0) -> str:
        """A rule for a JSON string of at most ``max_length`` characters (escapes count as one)."""
        high = max(1, min(max_length if max_length is not None else self.max_string, self.max_string * 5))
        low = max(0, min(min_length, high))
        char = self.add("json-char", JSON_CHAR)
        return self.add(f"string-{low}-{high}", f'"\\"" {char}{{{low},{high}}} "\\""')

    def json_value(self, schema: Mapping[str, Any] | bool, name: str = "value") -> str:
        """A rule admitting exactly the (bounded) JSON values valid for ``schema``; returns its name.

        Covers what tool parameters use: objects with properties (required in order,
        optional ones optional, nothing else), strings (``maxLength``/``minLength``,
        ``enum``, ``const``), numbers, integers, booleans, null, arrays (``items``,
        ``maxItems``), ``anyOf``/``oneOf``, type lists and local ``$ref``. What it does
        not know (a pattern, a format) is admitted as a bounded value of its type.
        """
        root = schema if isinstance(schema, Mapping) else {}
        return self._value(schema, root, name, 0)

    def _value(self, schema: Mapping[str, Any] | bool, root: Mapping[str, Any], name: str, depth: int) -> str:
        if schema is True or schema == {} or depth > MAX_SCHEMA_DEPTH:
            return self._any(depth)
        if schema is False or not isinstance(schema, Mapping):
            raise UsageError(f"no JSON value is valid for the schema {schema!r}")
        if "$ref" in schema:
            return self._value(_resolve(root, str(schema["$ref"])), root, name, depth + 1)
        if "const" in schema:
            return self.add(f"{name}-const", literal(json.dumps(schema["const"], ensure_ascii=False)))
        if "enum" in schema:
            values = [literal(json.dumps(v, ensure_ascii=False)) for v in schema["enum"]]
            if not values:
                raise UsageError(f"the schema of {name} has an empty enum")
            return self.add(f"{name}-enum", " | ".join(values))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [self._value(s, root, f"{name}-{i}", depth + 1) for i, s in enumerate(schema[key])]
                return self.add(name, " | ".join(options))
        kind = schema.get("type")
        if isinstance(kind, list):
            options = [self._value({**schema, "type": k}, root, f"{name}-{k}", depth + 1) for k in kind]
            return self.add(name, " | ".join(options))
        if kind == "object" or (kind is None and "properties" in schema):
            return self._object(schema, root, name, depth)
        if kind == "array":
            return self._array(schema, root, name, depth)
        if kind == "string":
            return self.json_string(schema.get("maxLength"), int(schema.get("minLength", 0)))
        if kind == "integer":
            return self.add("integer", f'"-"? [0-9]{{1,{MAX_DIGITS}}}')
        if kind == "number":
            return self.add("number", f'"-"? [0-9]{{1,{MAX_DIGITS}}} ("." [0-9]{{1,{MAX_DIGITS}}})?')
        if kind == "boolean":
            return self.add("boolean", '"true" | "false"')
        if kind == "null":
            return self.add("null", '"null"')
        return self._any(depth)

    def _object(self, schema: Mapping[str, Any], root: Mapping[str, Any], name: str, depth: int) -> str:
        properties: Mapping[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        if not properties:
            return self.add("empty-object", '"{}"')
        parts: list[tuple[str, bool]] = []
        for key, sub in properties.items():
            value = self._value(sub, root, f"{name}-{key}", depth + 1)
            parts.append((f"{literal(json.dumps(key, ensure_ascii=False))} \": \" {value}", key in required))
        # properties in declared order, ", " between them; optional ones may be left out
        return self.add(name, f'"{{" {self._members(name, parts)} "}}"')

    def _members(self, name: str, parts: Sequence[tuple[str, bool]]) -> str:
        """The members of an object: each required one, any of the optional ones, in order.

        Built back to front as rules ``F_i`` (the rest, nothing written yet) and ``L_i``
        (the rest, something written: a ", " comes first) so the size stays linear.
        """
        first: str | None = None  # F_{i+1}; None past the last member
        later: str | None = None  # L_{i+1}
        for i in range(len(parts) - 1, -1, -1):
            member, required = parts[i]
            tail = f" {later}" if later else ""
            f_body, l_body = f"{member}{tail}", f'", " {member}{tail}'
            if not required:  # or leave it out: the rest as it would be without it
                f_body = f"({f_body}) | {first}" if first else f"({f_body})?"
                l_body = f"({l_body}) | {later}" if later else f"({l_body})?"
            later = self.add(f"{name}-l{i}", l_body)
            first = self.add(f"{name}-f{i}", f_body)
        return first or '""'

    def _array(self, schema: Mapping[str, Any], root: Mapping[str, Any], name: str, depth: int) -> str:
        item = self._value(schema.get("items", True), root, f"{name}-item", depth + 1)
        high = min(int(schema.get("maxItems", self.max_items)), self.max_items * 4)
        low = min(int(schema.get("minItems", 0)), high)
        if high == 0:
            return self.add("empty-array", '"[]"')
        rest = f'(", " {item}){{{max(0, low - 1)},{high - 1}}}'
        items = f"{item} {rest}"
        body = f'"[" {items} "]"' if low > 0 else f'"[" ({items})? "]"'
        return self.add(name, body)

    def _any(self, depth: int) -> str:
        """Any bounded JSON scalar (deeper or unknown values: the tool's validation decides)."""
        options = [
            self.json_string(),
            self.add("number", f'"-"? [0-9]{{1,{MAX_DIGITS}}} ("." [0-9]{{1,{MAX_DIGITS}}})?'),
            self.add("boolean", '"true" | "false"'),
            self.add("null", '"null"'),
        ]
        return self.add("any-scalar", " | ".join(options))


def _resolve(root: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    """A local ``$ref`` (``#/$defs/Name``); anything else is refused (data never fetches)."""
    if not ref.startswith("#/"):
        raise UsageError(f"only local $ref are supported in a grammar, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise UsageError(f"the $ref {ref!r} points nowhere in the schema")
        node = node[part]
    if not isinstance(node, Mapping):
        raise UsageError(f"the $ref {ref!r} is not a schema")
    return node


def json_schema_grammar(schema: Mapping[str, Any], **limits: int) -> str:
    """A whole grammar admitting only (bounded) JSON valid for ``schema``."""
    builder = GrammarBuilder(**limits)
    return builder.text(builder.json_value(schema, "value"))


__all__ = [
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MAX_STRING",
    "JSON_CHAR",
    "GrammarBuilder",
    "alternation",
    "char_class",
    "free_text",
    "json_schema_grammar",
    "literal",
    "rule_name",
]

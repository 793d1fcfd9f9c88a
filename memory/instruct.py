"""Instruct content: the pydantic models a structured action writes into ``Message.instruct_content``.

:func:`create_instruct_model` builds such a model from a *mapping* (``{field: (type,
default)}``, nested dicts for nested models) — MetaGPT's ``ActionNode.create_model_class``.
The class remembers its mapping as text (``"(list[str], Ellipsis)"``), so a message
carrying it serialises with the mapping and is rebuilt, types included, by
:func:`model_from_mapping` — without ``eval`` and without importing anything: the type
text is read by a small parser that knows the builtin types and containers, in linear
time and to a bounded depth. Any other type reads as ``Any``.
"""

from __future__ import annotations

import re
import types
import typing
import uuid
from typing import Any

from loguru import logger
from pydantic import BaseModel, create_model, model_validator
from pydantic.fields import FieldInfo

#: attribute of a model class built here: ``{field: "(type, Ellipsis)"}``
MAPPING_ATTR = "__instruct_mapping__"
MAX_TYPE_DEPTH = 8
MAX_TYPE_TEXT = 500

_SIMPLE: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "bytes": bytes,
    "None": type(None),
    "NoneType": type(None),
    "Any": Any,
}
_CONTAINERS: dict[str, Any] = {
    "list": list, "dict": dict, "tuple": tuple, "set": set, "Optional": typing.Optional, "Union": typing.Union,
}
_TOKEN = re.compile(r"\s*(?:<class '([\w.]+)'>|([\w.]+)|(\.\.\.)|([\[\],]))")


def type_to_str(tp: Any) -> str:
    """A type as MetaGPT's mapping writes it: ``<class 'str'>``, ``list[str]``, ``dict[str, int]``."""
    origin = typing.get_origin(tp)
    if origin is None:
        if tp is Any:
            return "typing.Any"
        if isinstance(tp, type):
            return f"<class '{tp.__name__}'>" if tp.__module__ == "builtins" else tp.__name__
        return str(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        return f"typing.Union[{', '.join(_arg_str(a) for a in args)}]"
    name = getattr(origin, "__name__", str(origin))
    return f"{name}[{', '.join(_arg_str(a) for a in args)}]" if args else name


def _arg_str(tp: Any) -> str:
    text = type_to_str(tp)
    return text[len("<class '"):-2] if text.startswith("<class '") else text


def str_to_type(text: str) -> Any:
    """Read a type written by :func:`type_to_str` (or by MetaGPT); unknown names read as ``Any``."""
    if len(text) > MAX_TYPE_TEXT:
        return Any
    tokens = _tokens(text)
    if tokens is None:
        return Any
    try:
        tp, end = _parse(tokens, 0, 0)
    except (IndexError, ValueError, TypeError):
        return Any
    return tp if end == len(tokens) else Any


def _tokens(text: str) -> list[str] | None:
    out: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            return None
        out.append(match.group(1) or match.group(2) or match.group(3) or match.group(4))
        pos = match.end()
    return out


def _parse(tokens: list[str], i: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_TYPE_DEPTH:
        raise ValueError("type nested too deeply")
    name = tokens[i].removeprefix("typing.").removeprefix("builtins.")
    i += 1
    if i < len(tokens) and tokens[i] == "[":
        args: list[Any] = []
        i += 1
        while tokens[i] != "]":
            if tokens[i] == "...":
                args.append(Ellipsis)
                i += 1
            else:
                arg, i = _parse(tokens, i, depth + 1)
                args.append(arg)
            if tokens[i] == ",":
                i += 1
        i += 1
        container = _CONTAINERS.get(name.lower() if name.lower() in _CONTAINERS else name)
        if container is None:
            return Any, i
        return container[tuple(args) if len(args) > 1 else args[0]], i
    if name.lower() in ("list", "dict", "tuple", "set"):
        return _CONTAINERS[name.lower()], i
    return _SIMPLE.get(name, Any), i


def mapping_to_str(mapping: dict[str, Any]) -> dict[str, str]:
    """``{field: (type, default)}`` as MetaGPT serialises it: ``{field: "(<class 'str'>, Ellipsis)"}``."""
    out: dict[str, str] = {}
    for key, value in mapping.items():
        tp = value[0] if isinstance(value, tuple) else value
        out[key] = f"({type_to_str(tp)}, Ellipsis)"
    return out


def str_to_mapping(mapping: dict[str, str]) -> dict[str, Any]:
    """The inverse of :func:`mapping_to_str` (every field required)."""
    out: dict[str, Any] = {}
    for key, text in mapping.items():
        inner = text.strip()
        if inner.startswith("(") and inner.endswith(")"):
            inner = inner[1:-1]
        type_text = inner.rsplit(",", 1)[0] if inner.rstrip().endswith("Ellipsis") else inner
        out[key] = (str_to_type(type_text), ...)
    return out


#: the classes made so far, by name and mapping: the same name and fields give the same class
#: (MetaGPT's action output class registry), so outputs made twice compare equal
_MADE: dict[tuple[str, str], type[BaseModel]] = {}
_MADE_LIMIT = 4096


def _has_default(value: Any) -> bool:
    """Whether a mapping entry ``(type, default_or_Field)`` gives its field a default."""
    if not isinstance(value, tuple) or len(value) < 2:
        return False
    default = value[1]
    if isinstance(default, FieldInfo):
        return not default.is_required()
    return default is not Ellipsis


def _mapping_key(mapping: dict[str, Any]) -> str:
    """The mapping as text that does not depend on its order or on ``List`` versus ``list``."""
    parts = []
    for name in sorted(mapping):
        value = mapping[name]
        if isinstance(value, dict):
            parts.append(f"{name}:{{{_mapping_key(value)}}}")
            continue
        tp, default = (value[0], value[1] if len(value) > 1 else ...) if isinstance(value, tuple) else (value, ...)
        parts.append(f"{name}:{type_to_str(tp)}={default!r}")
    return ";".join(parts)


def create_instruct_model(class_name: str, mapping: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model with the fields of ``mapping``; a missing field without a default is an
    error, an unknown one a warning.

    ``mapping`` values are ``(type, default_or_Field)`` pairs (``...`` for a required
    field; ``(Optional[str], None)`` or ``(str, Field(default=""))`` may be left out), or
    dicts for nested models (named ``{class_name}_{field}``). The same name and mapping
    give the same class.
    """
    key = (class_name, _mapping_key(mapping))
    made = _MADE.get(key)
    if made is not None:
        return made
    required = {name for name, value in mapping.items() if isinstance(value, dict) or not _has_default(value)}
    known = set(mapping)

    def check_fields(cls: type[BaseModel], values: Any) -> Any:
        if isinstance(values, dict):
            missing = required - set(values)
            if missing:
                raise ValueError(f"Missing fields: {sorted(missing)}")
            unknown = set(values) - known
            if unknown:
                logger.warning("{}: unrecognized fields {}", class_name, sorted(unknown))
        return values

    fields: dict[str, Any] = {}
    for name, value in mapping.items():
        if isinstance(value, dict):
            fields[name] = (create_instruct_model(f"{class_name}_{name}", value), ...)
        else:
            fields[name] = value if isinstance(value, tuple) else (value, ...)
    validators = {"check_missing_fields_validator": model_validator(mode="before")(check_fields)}
    model: type[BaseModel] = create_model(
        class_name, __validators__=validators, **fields  # type: ignore[arg-type]
    )
    # a nested model's type is written by name and reads back as Any (its value stays a dict)
    setattr(model, MAPPING_ATTR, mapping_to_str(fields))
    if len(_MADE) >= _MADE_LIMIT:  # a program making endless names: forget the oldest
        del _MADE[next(iter(_MADE))]
    _MADE[key] = model
    return model


def model_from_mapping(class_name: str, mapping: dict[str, str]) -> type[BaseModel]:
    """Rebuild a model class from its serialised mapping (see :func:`mapping_to_str`)."""
    return create_instruct_model(class_name, str_to_mapping(mapping))


def create_instruct_value(kvs: dict[str, Any], class_name: str = "") -> BaseModel:
    """An instance of a model made for ``kvs``: each field typed by its value's class."""
    name = class_name or "DM" + uuid.uuid4().hex[:8]
    model = create_instruct_model(name, {k: (type(v), ...) for k, v in kvs.items()})
    return model.model_validate(kvs)


__all__ = [
    "MAPPING_ATTR",
    "create_instruct_model",
    "create_instruct_value",
    "mapping_to_str",
    "model_from_mapping",
    "str_to_mapping",
    "str_to_type",
    "type_to_str",
]

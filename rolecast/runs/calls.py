"""A model call in the run log: the action it is made in, its request's canonical text and fingerprint,
and a logged call read back (:class:`RecordedCall`).

The fingerprint hashes ``json.dumps(request, sort_keys=True, ensure_ascii=False, default=str)`` of
``{"kind", "messages", each parameter given}`` (a pydantic value, such as the call's settings, as its
``model_dump(exclude_none=True)``) byte for byte, so a run logged by an earlier version still resumes.
:func:`request_fingerprint` writes that text without building the request: a call's settings are
the same values call after call (:func:`dumped` remembers their dump and its text), and only the
messages are encoded per call.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import BaseModel

#: a model call's request as the seam hands it to the log: its messages, its parameters (settings,
#: stop, schema, tools, grammar, n_options …) and the max_tokens it was made with
FullRequest = tuple[list[dict[str, Any]], dict[str, Any], int | None]


def full_fields(data: Any) -> dict[str, Any] | None:
    """The full request's fields of a logged call's payload (None: logged before format 3)."""
    if "messages" not in data:
        return None
    return {name: data[name] for name in ("messages", "settings", "constraints") if name in data}


_ACTION: ContextVar[str] = ContextVar("rolecast_action", default="")


def enter_action(name: str) -> Token[str]:
    """The fast form of :func:`acting` (the hot path of every action run); undo with :func:`exit_action`."""
    return _ACTION.set(name)


def exit_action(token: Token[str]) -> None:
    _ACTION.reset(token)


def current_action() -> str:
    """The name of the action running in this task ("" outside any action)."""
    return _ACTION.get()


@contextmanager
def acting(name: str) -> Iterator[None]:
    """Mark the running task as inside action ``name`` (model calls are logged with it)."""
    token = _ACTION.set(name)
    try:
        yield
    finally:
        _ACTION.reset(token)


def new_run_id() -> str:
    """A fresh, sortable run id: UTC time plus a random suffix."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


# The canonical text of a request: ``json.dumps(request, sort_keys=True, ensure_ascii=False,
# default=str)`` byte for byte (fingerprints logged by earlier versions still match). Requests are
# trees built by the seam, never cyclic, so the cycle check is off. (CPython's private C encoder,
# called directly, saved under 1 µs a call here: not worth a private API.)
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str, check_circular=False)


#: a string as that encoder writes it (with its quotes)
quote_json: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]


def canonical_json(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)``, the text fingerprints hash."""
    return _CANONICAL.encode(value)


def fingerprint(request: dict[str, Any]) -> str:
    """A stable hash of what a model call asked (the same request → the same fingerprint)."""
    return hashlib.sha256(canonical_json(request).encode()).hexdigest()[:32]


@dataclass
class RecordedCall:
    """A model call of the log: who asked, the request's fingerprint and text, and the answer."""

    role: str
    action: str
    fingerprint: str
    request: dict[str, Any]
    response: dict[str, Any]
    seq: int
    cost: float = 0.0
    model: str = ""
    #: answered from another run's log (reuse), not paid for in this one
    reused: bool = False
    #: the full request's fields as logged (``messages``, ``settings``, ``constraints``; empty before format 3)
    full: dict[str, Any] | None = None


class Dumped(NamedTuple):
    """A pydantic parameter of a call (its settings), as the log uses it."""

    #: ``model_dump(exclude_none=True)``: what the fingerprint hashes
    fields: dict[str, Any]
    #: their canonical JSON text
    text: str
    #: the fields the log keeps (an empty ``extra`` left out); the caller copies them
    logged: dict[str, Any]


# (the value's type, its field values) -> its Dumped: a call's settings are often a new object
# (``settings.merged(...)`` per call) holding the same values as the one before
_dumps: dict[tuple[Any, ...], Dumped] = {}
#: the value dumped last, its field values then, and its Dumped: a model's own settings, call after call
_last: tuple[Any, ...] = (None, None, None)


def dumped(value: BaseModel) -> Dumped:
    """``value``'s dump, its text and the log's fields, remembered by the field values of a value
    without ``extra`` (a dict, which may change in place: such a value is dumped each time)."""
    fields = value.__dict__
    key: tuple[Any, ...] | None = None
    if not fields.get("extra"):
        last = _last
        if last[0] is value and last[1] == tuple(fields.values()):  # the same settings as the call before
            return last[2]
        key = (type(value), *[v for name, v in fields.items() if name != "extra"])
        try:
            found = _dumps.get(key)
        except TypeError:  # a field value that cannot be a key: dumped each time
            key = found = None
        if found is not None:
            _remember(value, found)
            return found
    full = value.model_dump(exclude_none=True)
    logged = full if full.get("extra") or "extra" not in full else {k: v for k, v in full.items() if k != "extra"}
    made = Dumped(full, canonical_json(full), logged)
    if key is not None:
        if len(_dumps) >= 256:
            _dumps.clear()
        _dumps[key] = made
        _remember(value, made)
    return made


def _remember(value: BaseModel, made: Dumped) -> None:
    """The last value dumped (held, so that its identity stays its own), its field values and dump."""
    global _last
    _last = (value, tuple(value.__dict__.values()), made)


def canonical_messages(messages: list[dict[str, Any]]) -> str:
    """``canonical_json(messages)``, written directly when every message maps text to text (a chat's
    usual ``{"role", "content"}``): the same bytes, without the encoder's set-up per call (half the
    cost of a short prompt's fingerprint). Anything else goes to the encoder."""
    items = []
    for message in messages:
        if type(message) is not dict:
            return canonical_json(messages)
        fields = []
        for name in sorted(message):
            value = message[name]
            if type(name) is not str or type(value) is not str:
                return canonical_json(messages)
            fields.append(f"{quote_json(name)}: {quote_json(value)}")
        items.append("{" + ", ".join(fields) + "}")
    return "[" + ", ".join(items) + "]"


def request_fingerprint(kind: str, messages: list[dict[str, Any]], params: Mapping[str, Any]) -> str:
    """:func:`fingerprint` of ``{"kind": kind, "messages": messages, **given params}`` (a pydantic
    value as its dump), its canonical text written part by part: the same bytes, the settings' text
    remembered."""
    parts = [("kind", quote_json(kind)), ("messages", canonical_messages(messages))]
    for name, value in params.items():
        if value is not None:
            parts.append((name, dumped(value).text if isinstance(value, BaseModel) else canonical_json(value)))
    parts.sort()
    text = "{" + ", ".join([f"{quote_json(name)}: {part}" for name, part in parts]) + "}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


__all__ = [
    "Dumped", "FullRequest", "RecordedCall", "acting", "canonical_json", "canonical_messages", "current_action",
    "dumped", "enter_action", "exit_action", "fingerprint", "full_fields", "new_run_id", "quote_json",
    "request_fingerprint",
]

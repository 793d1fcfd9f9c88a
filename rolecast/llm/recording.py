"""How a model call is written to the run log and read back: request fingerprints and answers.

The fingerprint hashes everything that decides the answer (the call's kind, the
messages, stop sequences, settings, the schema and tools asked for), so that a
re-executed run meets the same fingerprint exactly when it asks the same thing. The
log keeps a compact, readable summary of the request beside it (the last message and
the size), not the whole prompt: prompts carry the history and would make the log
grow with the square of the run's length.

The text hashed is :func:`~rolecast.runs.log.fingerprint`'s — ``json.dumps(request,
sort_keys=True, ensure_ascii=False, default=str)`` of ``{"kind", "messages", each parameter
given}`` — byte for byte, so a run logged by an earlier version still resumes; it is put
together here part by part, because every call pays for it: a chat message of a role and
its text (the usual shape) is written directly, and a call's settings, the same object call
after call, are dumped and encoded once rather than on every call.
"""

from __future__ import annotations

import hashlib
import operator
from typing import Any

from pydantic import BaseModel

from ..runs.log import canonical_json, quote_json
from ..settings import LLMSettings

REQUEST_PREVIEW = 2000  # characters of the last message kept in the log

# id of a settings object -> (the object, its field values when encoded, their canonical text)
_settings_text: dict[int, tuple[LLMSettings, tuple[Any, ...], str]] = {}
_SETTINGS_KEPT = 256  # settings objects remembered (the memo starts again when full)


def _settings_json(value: LLMSettings) -> str:
    """The canonical text of ``value.model_dump(exclude_none=True)``, remembered per settings object."""
    values = tuple(value.__dict__.values())
    known = _settings_text.get(id(value))
    # a hit only while every field is the very object it was (a field assigned since — even an
    # equal number: 1 == 1.0 — is a miss) and ``extra`` is empty (its contents can change in place)
    if (known is not None and known[0] is value and not value.extra and len(known[1]) == len(values)
            and all(map(operator.is_, known[1], values))):
        return known[2]
    text = canonical_json(value.model_dump(exclude_none=True))
    if not value.extra:
        if len(_settings_text) >= _SETTINGS_KEPT:
            _settings_text.clear()
        _settings_text[id(value)] = (value, values, text)
    return text


def _messages_json(messages: list[dict[str, Any]]) -> str:
    """The canonical text of a list of chat messages; ``{"role", "content"}`` messages of text
    are written directly (the keys in sorted order, as the encoder writes them), any other
    shape by the encoder."""
    parts = []
    for message in messages:
        if type(message) is not dict or len(message) != 2:
            return canonical_json(messages)
        content, role = message.get("content"), message.get("role")
        if type(content) is not str or type(role) is not str:
            return canonical_json(messages)
        parts.append(f'{{"content": {quote_json(content)}, "role": {quote_json(role)}}}')
    return "[" + ", ".join(parts) + "]"


def describe_request(kind: str, messages: list[dict[str, Any]], **params: Any) -> tuple[str, dict[str, Any]]:
    """The fingerprint of a call and the compact summary the log keeps."""
    fields = {"kind": quote_json(kind) if type(kind) is str else canonical_json(kind),
              "messages": _messages_json(messages) if type(messages) is list else canonical_json(messages)}
    for name, value in params.items():
        if value is None:
            continue
        if type(value) is LLMSettings:
            fields[name] = _settings_json(value)
        elif isinstance(value, BaseModel):
            fields[name] = canonical_json(value.model_dump(exclude_none=True))
        else:
            fields[name] = canonical_json(value)
    # the whole request as json.dumps(sort_keys=True) writes it: keys in order, ", " and ": "
    text = "{" + ", ".join([f"{quote_json(name)}: {fields[name]}" for name in sorted(fields)]) + "}"
    last = str(messages[-1].get("content") or "") if messages else ""
    system = ""
    for message in messages:
        if message.get("role") == "system":
            system = str(message.get("content") or "")
            break
    summary = {
        "kind": kind,
        "n_messages": len(messages),
        "system": system[:300],
        "last": last[-REQUEST_PREVIEW:],
    }
    return hashlib.sha256(text.encode()).hexdigest()[:32], summary


__all__ = ["describe_request"]

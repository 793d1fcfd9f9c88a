"""A model call's full request in the run log: every message as sent, and the settings.

An ``llm_call`` event (payload format 3) holds its request as references: ``messages`` is a list of
``[role, text key]`` pairs (``[role, text key, extras]`` when the message carried more than a role
and text: tool calls, a tool call's id, a name, content that is not plain text), ``settings`` the
call's parameters (model settings, ``max_tokens`` as sent, ``stop``, ``n_options`` …) and
``constraints`` the keys of its long constraints (``grammar``, ``schema``, ``tools``). The texts
themselves are kept once per store, content-addressed (:func:`text_key`): a chat history repeats in
every call of a conversation, and a system prompt in every call of a role, so each call adds only
its references and the texts no call before it sent. A long text (payload format 4: longer than
:data:`CHUNKED_FROM`) is kept in chunks cut where its content says (:func:`chunks`), its reference
the list of their keys: a prompt that holds a whole conversation is a new text at every call, but
its chunks are mostly the last call's, so the store grows with what each call adds, not with the
square of the conversation. A text travels to the store with the first
event of the run that refers to it (:attr:`~rolecast.runs.events.RunEvent.texts`), in the same
transaction (and, on SQLite, the same journal copy), so an event never refers to a text the store
lacks; deleting runs deletes the texts no remaining event refers to
(:meth:`RunStore.drop_orphan_texts <rolecast.runs.base.RunStore.drop_orphan_texts>`).

Read a call's request with :func:`request_of` (one event) or :func:`requests_of` (many, one read of
the texts). A call logged before format 3 has no full request: :class:`CallRequest` then has
``full=False`` and only the summary the log kept (the system prompt's first 300 characters and the
last message's last 2,000).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .calls import dumped

if TYPE_CHECKING:
    from .events import RunEvent

#: the fields of a message kept beside its role and text (when present): tool calls and their answers
MESSAGE_EXTRAS = ("tool_calls", "tool_call_id", "name")
#: request parameters kept as texts (long, and the same call after call)
CONSTRAINTS = ("grammar", "schema", "tools")
#: a text longer than this (characters) is kept in chunks (None: every text whole, as format 3 did)
CHUNKED_FROM: int | None = 8192
#: a chunk's bounds (characters): it ends after a line whose hash says so, once it is CHUNK_MIN long,
#: or at CHUNK_MAX; about one line in CHUNK_MASK + 1 ends a chunk
CHUNK_MIN, CHUNK_MAX, CHUNK_MASK = 2048, 16384, 3
#: texts whose key is remembered per process (the memo starts again when full)
_KEYS_KEPT = 4096
_keys: dict[str, str] = {}


def text_key(text: str) -> str:
    """The key a text is kept under: 32 hex digits of its SHA-256 (UTF-8, lone surrogates kept).

    Remembered per string: a history's messages are the same ``str`` objects call after call, and a
    dictionary finds an object it holds without hashing its text again."""
    key = _keys.get(text)
    if key is None:
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        if len(_keys) >= _KEYS_KEPT:
            _keys.clear()
        _keys[text] = key
    return key


def chunks(text: str) -> list[str]:
    """``text`` cut where its own content says (content-defined chunking, by lines): a chunk ends after
    a line whose CRC-32 has its low bits set, once the chunk holds :data:`CHUNK_MIN` characters, or at
    :data:`CHUNK_MAX`. A text that grows — a chat history sent whole in each prompt, with a new turn in
    the middle or at the end — cuts the same way where it did not change, so its chunks are the ones
    the store holds already and each call adds only the chunks around what is new. Linear time; the
    pieces joined are ``text``."""
    pieces: list[str] = []
    start, size = 0, len(text)
    at = CHUNK_MIN - 1  # (a line that ends before the chunk holds CHUNK_MIN characters cannot end it)
    while start < size:
        end = text.find("\n", at, start + CHUNK_MAX)
        if end < 0:  # no line ends before the chunk's limit: cut there (or at the text's end)
            cut = min(start + CHUNK_MAX, size)
        else:
            line = max(start, text.rfind("\n", start, end) + 1)
            if zlib.crc32(text[line:end + 1].encode("utf-8", "surrogatepass")) & CHUNK_MASK != CHUNK_MASK:
                at = end + 1
                continue
            cut = end + 1
        pieces.append(text[start:cut])
        start, at = cut, cut + CHUNK_MIN - 1
    return pieces


#: how many text keys a log remembers having sent, per generation (see SentTexts)
SENT_TEXTS_KEPT = 1 << 16


class SentTexts:
    """The keys of the texts a log has sent to its store (a text goes with the first call that uses
    it), remembered up to a bound: two generations of at most ``limit`` keys each, the older one
    forgotten when the newer fills, a key found there kept. A text sent again once forgotten is one
    the store has already, and ignores; the log's memory stays bounded in a run of any length."""

    def __init__(self, limit: int | None = None):
        self.limit = SENT_TEXTS_KEPT if limit is None else limit
        self._new: set[str] = set()
        self._old: set[str] = set()

    def __contains__(self, key: object) -> bool:
        if key in self._new:
            return True
        if key in self._old:
            self.add(key)  # type: ignore[arg-type]
            return True
        return False

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def add(self, key: str) -> None:
        if len(self._new) >= self.limit:
            self._old, self._new = self._new, set()
        self._new.add(key)


def _text_ref(content: str, sent: SentTexts | set[str], new: dict[str, str]) -> str | list[str]:
    """The reference a message's text is kept under: its key, or (a long text) its chunks' keys; the
    texts not in ``sent`` go to ``new``."""
    if CHUNKED_FROM is None or len(content) <= CHUNKED_FROM:  # (the common case, kept short)
        key = text_key(content)
        if key not in sent:
            sent.add(key)
            new[key] = content
        return key
    keys = []
    for piece in chunks(content):
        key = text_key(piece)
        if key not in sent:
            sent.add(key)
            new[key] = piece
        keys.append(key)
    return keys[0] if len(keys) == 1 else keys


def encode_request(
    messages: list[dict[str, Any]], params: Mapping[str, Any], max_tokens: int | None,
    sent: SentTexts | set[str],
) -> tuple[dict[str, Any], dict[str, str]]:
    """A call's request as the payload's fields (``messages``, ``settings``, ``constraints``) and the
    texts among them not in ``sent`` (then added to it): what goes to the store with the event.

    ``params`` are the seam's request parameters (``settings``, ``stop``, ``schema``, ``tools``,
    ``grammar``, ``n_options`` …); ``max_tokens`` the limit the call was made with."""
    new: dict[str, str] = {}
    refs: list[list[Any]] = []
    for message in messages:
        content = message.get("content")
        role = message.get("role", "")
        if type(content) is str:
            ref: list[Any] = [role, _text_ref(content, sent, new)]
        else:
            ref = [role, None]
        if len(message) > 2 or ref[1] is None:
            extras = {k: v for k, v in message.items() if k not in ("role", "content") and v is not None}
            if ref[1] is None and content is not None:
                extras["content"] = content
            if extras:
                ref.append(extras)
        refs.append(ref)
    settings: dict[str, Any] = {}
    constraints: dict[str, str] = {}
    for name, value in params.items():
        if value is None:
            continue
        if name == "settings" and isinstance(value, BaseModel):
            settings.update(dumped(value).logged)
        elif name in CONSTRAINTS:
            text = value if type(value) is str else json.dumps(value, sort_keys=True, default=str)
            key = text_key(text)
            if key not in sent:
                sent.add(key)
                new[key] = text
            constraints[name] = key
        elif isinstance(value, BaseModel):
            settings[name] = value.model_dump()
        else:
            settings[name] = value
    if max_tokens is not None:
        settings["max_tokens"] = max_tokens
    fields: dict[str, Any] = {"messages": refs, "settings": settings}
    if constraints:
        fields["constraints"] = constraints
    return fields, new


def storable(text: str) -> str:
    """``text`` as a database can hold it: a lone surrogate (a model's broken output, kept in events as
    JSON's escape) becomes U+FFFD here, and so does a NUL byte (PostgreSQL's text cannot hold one).
    Only the shown text changes: the key is the original's."""
    if "\0" in text:
        text = text.replace("\0", "\ufffd")
    if text.isascii():  # (no surrogate: nothing to check)
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def new_texts(events: Sequence[RunEvent]) -> list[tuple[str, str]]:
    """``(key, text)`` rows of the texts ``events`` bring (see RunEvent.texts)."""
    return [(key, storable(text)) for e in events if e.texts for key, text in e.texts.items()]


def keys_of(data: Mapping[str, Any]) -> set[str]:
    """The text keys an ``llm_call`` payload refers to (a chunked text's: each chunk's)."""
    found: set[str] = set()
    for ref in data.get("messages") or ():
        if isinstance(ref, list) and len(ref) > 1 and ref[1]:
            key = ref[1]
            if isinstance(key, str):
                found.add(key)
            elif isinstance(key, list):
                found.update(k for k in key if isinstance(k, str))
    constraints = data.get("constraints")
    if isinstance(constraints, dict):
        found.update(v for v in constraints.values() if isinstance(v, str))
    return found


def _joined(key: Any, texts: Mapping[str, str]) -> str | None:
    """The text under ``key`` — a key, or a chunked text's keys (None when the store lacks one)."""
    if isinstance(key, str):
        return texts.get(key)
    if isinstance(key, list):
        parts = [texts.get(k) if isinstance(k, str) else None for k in key]
        return None if any(p is None for p in parts) else "".join(parts)  # type: ignore[arg-type]
    return None


@dataclass
class CallRequest:
    """A logged model call's request, as a reader shows it."""

    #: ``"complete"``, ``"choose"`` or ``"embed"``
    kind: str
    #: the model the call went to
    model: str
    #: every message as sent: ``{"role", "content", …extras}`` (a text the store lost reads as None)
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: the settings as sent: temperature, max_tokens, stop … and the constraints (grammar, schema, tools)
    settings: dict[str, Any] = field(default_factory=dict)
    #: False for a call logged before the full request was (format < 3): only ``summary`` is known
    full: bool = True
    #: the log's summary: kind, n_messages, the system prompt's start, the last message's end
    summary: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "messages": self.messages, "settings": self.settings,
                "full": self.full, "summary": self.summary}


def _texts(source: Any, keys: set[str]) -> Mapping[str, str]:
    if not keys:
        return {}
    reader = getattr(source, "texts", None)
    if reader is None:
        reader = source
    return reader(keys) if callable(reader) else {}


def requests_of(source: Any, events: Iterable[RunEvent | Mapping[str, Any]]) -> list[CallRequest]:
    """The requests of ``llm_call`` events (or their payloads), in order, the texts read at once.
    ``source`` is the store they came from (or a function from text keys to texts)."""
    payloads = [e if isinstance(e, Mapping) else e.data for e in events]
    keys: set[str] = set()
    for data in payloads:
        keys |= keys_of(data)
    texts = _texts(source, keys)
    return [_request(data, texts) for data in payloads]


def request_of(source: Any, event: RunEvent | Mapping[str, Any]) -> CallRequest:
    """The request of one ``llm_call`` event (or its payload): every message and the settings, read
    from ``source`` (the event's store, or a function from text keys to texts)."""
    return requests_of(source, [event])[0]


def _request(data: Mapping[str, Any], texts: Mapping[str, str]) -> CallRequest:
    summary = dict(data.get("request") or {})
    kind, model = str(summary.get("kind", "")), str(data.get("model", ""))
    refs = data.get("messages")
    if not isinstance(refs, list):  # logged before format 3
        return CallRequest(kind, model, full=False, summary=summary)
    messages = []
    for ref in refs:
        if not (isinstance(ref, list) and len(ref) >= 2):  # (a damaged reference reads as a lost text)
            ref = ["", None]
        role, key = ref[0], ref[1]
        message: dict[str, Any] = {"role": role, "content": _joined(key, texts) if key else None}
        if len(ref) > 2 and isinstance(ref[2], dict):
            message.update(ref[2])
        messages.append(message)
    settings = dict(data.get("settings") or {})
    for name, key in (data.get("constraints") or {}).items():
        text = _joined(key, texts)
        if name != "grammar" and text is not None:
            try:
                settings[name] = json.loads(text)
                continue
            except (ValueError, RecursionError):
                pass
        settings[name] = text
    return CallRequest(kind, model, messages, settings, True, summary)


__all__ = [
    "CHUNKED_FROM", "CONSTRAINTS", "MESSAGE_EXTRAS", "SENT_TEXTS_KEPT", "CallRequest", "SentTexts", "chunks",
    "encode_request", "keys_of", "new_texts", "request_of", "requests_of", "storable", "text_key",
]

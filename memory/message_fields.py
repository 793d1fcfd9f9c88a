"""How a :class:`~memory.Message` holds its fields in few bytes (issue 38: a million agents).

A simulation keeps millions of messages alive (its history, every agent's window), so what each
one holds beside its text counts. What is the same from message to message is kept once and
shared: the addresses (``send_to``), the fields-set pydantic keeps, the key table of the field dict,
and an empty ``metadata``. Each shared thing behaves as the plain value it replaces for everyone
who reads or changes a message through its API; only its storage is shared.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from pydantic import BaseModel

from rolecast.core.compact import key_sharing_template
from rolecast.runs.events import MESSAGE_ROUTE_TO_ALL

#: the fields of a message, in their declared order (the order of its field dict)
MESSAGE_FIELDS = ("id", "content", "instruct_content", "role", "cause_by", "sent_from", "send_to", "metadata")


def any_to_str(val: Any) -> str:
    """A stable string for a class, an instance or a string: ``module.QualName`` or the string."""
    if isinstance(val, str):
        return val
    cls = val if isinstance(val, type) else type(val)
    return f"{cls.__module__}.{cls.__qualname__}"


def any_to_str_set(val: Any) -> set[str]:
    """``send_to`` normalisation: one value or an iterable of names, profiles, classes or roles."""
    if val is None or val == "":
        return set()
    if isinstance(val, (str, type)) or not hasattr(val, "__iter__") or isinstance(val, BaseModel):
        items = [val]
    else:
        items = list(val)
    out: set[str] = set()
    for item in items:
        name = getattr(item, "name", None) if not isinstance(item, (str, type)) else None
        out.add(name if isinstance(name, str) and name else any_to_str(item))
    return out


# ------------------------------------------------------------------ send_to
#: the address of a broadcast, one object shared by every broadcast
SEND_TO_ALL: frozenset[str] = frozenset({MESSAGE_ROUTE_TO_ALL})
#: the addresses messages were given, each distinct set kept once and shared by the messages that
#: name it: a million agents' follower sets fit (a 1M-agent simulation shares each agent's over its
#: rounds); emptied when full, so a process making one-off addresses keeps at most that many alive
_SEND_TOS: dict[frozenset[str], frozenset[str]] = {SEND_TO_ALL: SEND_TO_ALL}
_SEND_TOS_MAX = 1 << 20


def shared_send_to(names: Any) -> frozenset[str]:
    """``send_to``'s value for ``names`` (one value or an iterable of names, profiles, classes or
    roles): a frozenset shared by every message with the same addresses. A frozenset of strings is
    kept as it is given (a sender that holds its followers as one frozenset shares it by itself)."""
    if type(names) is frozenset and all(type(n) is str for n in names):
        return names or SEND_TO_ALL
    key = frozenset(any_to_str_set(names))
    found = _SEND_TOS.get(key)
    if found is None:
        if not key:
            return SEND_TO_ALL
        if len(_SEND_TOS) >= _SEND_TOS_MAX:
            _SEND_TOS.clear()
            _SEND_TOS[SEND_TO_ALL] = SEND_TO_ALL
        found = _SEND_TOS[key] = key
    return found


# ------------------------------------------------------------------ the fields-set
class SharedFieldsSet(set[str]):
    """A message's fields-set (pydantic's ``model_fields_set``: the fields it was given) shared by
    every message given the same fields: read-only (a message thaws it into a set of its own before a
    field is assigned, see :meth:`Message.__setattr__`). A ``set`` still, as pydantic reads it."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a message's fields-set is shared by many messages and cannot be changed in place")

    add = discard = remove = pop = clear = update = _refuse  # type: ignore[assignment]
    difference_update = intersection_update = symmetric_difference_update = _refuse  # type: ignore[assignment]
    __ior__ = __iand__ = __isub__ = __ixor__ = _refuse  # type: ignore[assignment]


#: the distinct fields-sets of messages, each kept once (at most 2^fields of them); pydantic keeps one
#: ``set`` a message otherwise (216 bytes; 728 past four names, as when a message is readdressed)
_FIELDS_SETS: dict[frozenset[str], SharedFieldsSet] = {}


def shared_fields(fields: AbstractSet[str]) -> set[str]:
    key = frozenset(fields)
    found = _FIELDS_SETS.get(key)
    if found is None:
        if len(_FIELDS_SETS) >= 4096:  # a subclass with very many fields: not shared past this
            return set(fields)
        found = _FIELDS_SETS[key] = SharedFieldsSet(key)
    return found


def thaw_fields(message: BaseModel) -> None:
    """Give ``message`` a fields-set of its own before pydantic adds a name to it."""
    fields = message.__pydantic_fields_set__
    if type(fields) is SharedFieldsSet:
        object.__setattr__(message, "__pydantic_fields_set__", set(fields))


# ------------------------------------------------------------------ the field dict
#: a message's field dict is a copy of this (fields in their order, values filled in)
FIELDS_TEMPLATE = key_sharing_template(MESSAGE_FIELDS) or dict.fromkeys(MESSAGE_FIELDS)


def compact_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` (a message's field dict) as a dict sharing its key table, empty metadata shared
    too; the dict itself when it holds other keys than a message's."""
    out = FIELDS_TEMPLATE.copy()
    out.update(fields)
    if len(out) != len(fields) or len(out) != len(MESSAGE_FIELDS):  # (then the same keys)
        return fields
    metadata = out["metadata"]
    if not metadata and type(metadata) is dict:
        out["metadata"] = NO_METADATA
    return out


# ------------------------------------------------------------------ metadata
class NoMetadata(dict[str, Any]):
    """The empty ``metadata`` every message starts with, one object for all (a dict of its own is
    64 bytes a message, and few messages get metadata). Read-only: reading ``message.metadata``
    gives the message a real dict in its place (:class:`MetadataField`), so that
    ``message.metadata["k"] = v`` changes that message only."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("the empty metadata is shared by many messages: change message.metadata instead")

    __setitem__ = __delitem__ = setdefault = pop = popitem = clear = update = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]

    def __copy__(self) -> NoMetadata:
        return self

    def __deepcopy__(self, memo: Any) -> NoMetadata:
        return self

    def __reduce__(self) -> str:
        return "NO_METADATA"  # pickled as the module's one object


NO_METADATA = NoMetadata()


class MetadataField:
    """``Message.metadata`` read through here: the shared empty metadata is replaced by a dict of
    the message's own on first read, so what callers hold is always a dict they may change. pydantic
    reads and writes the field dict itself (dumps, validation, copies) and never comes here."""

    __slots__ = ()

    def __get__(self, message: Any, owner: Any = None) -> dict[str, Any]:
        if message is None:  # on the class: as if absent (pydantic finds the field by its annotation)
            raise AttributeError("metadata")
        fields = message.__dict__
        value = fields["metadata"]
        if value is NO_METADATA:
            value = fields["metadata"] = {}
        return value  # type: ignore[no-any-return]

    def __set__(self, message: Any, value: Any) -> None:
        message.__dict__["metadata"] = value  # (object.__setattr__; a message's own setattr validates)


__all__ = [
    "FIELDS_TEMPLATE",
    "MESSAGE_FIELDS",
    "NO_METADATA",
    "SEND_TO_ALL",
    "MetadataField",
    "NoMetadata",
    "SharedFieldsSet",
    "any_to_str",
    "any_to_str_set",
    "compact_fields",
    "shared_fields",
    "shared_send_to",
    "thaw_fields",
]

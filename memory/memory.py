"""Memory: the messages a role has seen, indexed so that lookups do not scan."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, core_schema

from rolecast.errors import DataError, UsageError

from .message import Message, any_to_str, load_json_data


class Memory:
    """An ordered store of messages, indexed by ``cause_by`` and by id.

    Adding a message that is already stored (same id) does nothing, so a message
    is never remembered twice however many paths deliver it; with ``ignore_id=True``
    (MetaGPT's option) two messages count as the same when everything but their id is
    equal. A plain class on the hot path (every delivered message passes through
    :meth:`add`), usable as a pydantic field: it validates from a list of messages or
    from :meth:`model_dump`'s dict, and serialises to a list of messages.

    MetaGPT's pydantic surface is here for scripts that touch it: ``model_dump()`` and
    ``Memory(**data)`` round-trip, ``index`` (cause → messages), value equality,
    iteration and ``len()``.

    ``window=k`` bounds it to the newest ``k`` messages: adding one more forgets the oldest (from
    the index and the ids too, so a forgotten message delivered again counts as new). A role in a
    large simulation that reads only its last few messages keeps only those (``examples/simulation.py``);
    the whole history stays in the run log. ``forgotten`` counts the messages the window let go.
    """

    __slots__ = ("_ids", "_index", "forgotten", "ignore_id", "storage", "window")

    def __init__(
        self,
        storage: Iterable[Message | dict[str, Any]] = (),
        *,
        index: dict[str, Any] | None = None,
        ignore_id: bool = False,
        window: int | None = None,
    ):
        # ``index`` is accepted for MetaGPT's ``Memory(**memory.model_dump())``; it is derived
        # from ``storage``, so it is rebuilt from there rather than trusted
        del index
        if window is not None and (type(window) is not int or window < 1):
            raise UsageError(f"Memory(window=...) takes a whole number of messages >= 1 or None, not {window!r}")
        self.window = window
        self.forgotten = 0
        self.ignore_id = bool(ignore_id)
        self.storage: list[Message] = []
        self._index: dict[str, list[Message]] = defaultdict(list)
        self._ids: set[str] = set()
        self.add_batch(m if isinstance(m, Message) else Message.model_validate(m) for m in storage)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls.model_validate,
            serialization=core_schema.plain_serializer_function_ser_schema(cls._dump_field),
        )

    @staticmethod
    def _dump_field(mem: Memory) -> list[dict[str, Any]] | dict[str, Any]:
        # as a field: a list of messages, or with a window {"storage": [...], "window": k}, so that
        # a saved role comes back with its bound
        storage = [m.model_dump(mode="json") for m in mem.storage]
        return storage if mem.window is None else {"storage": storage, "window": mem.window}

    @classmethod
    def model_validate(cls, data: Any) -> Memory:
        """A memory from a Memory, a list of messages, or :meth:`model_dump`'s dict."""
        if isinstance(data, Memory):
            return data
        if isinstance(data, dict):
            unknown = set(data) - {"storage", "index", "ignore_id", "window"}
            if unknown:
                raise ValueError(f"Memory got unknown keys {sorted(unknown)}")
            return cls(**data)
        if isinstance(data, (list, tuple)):
            return cls(data)
        raise ValueError(f"cannot make a Memory from {type(data).__name__}")

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """MetaGPT's shape: ``{"storage": [...], "index": {cause: [...]}, "ignore_id": bool}``."""
        return {
            "storage": [m.model_dump(mode=mode) for m in self.storage],
            "index": {k: [m.model_dump(mode=mode) for m in v] for k, v in self._index.items()},
            "ignore_id": self.ignore_id,
            **({"window": self.window} if self.window is not None else {}),
        }

    def model_dump_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False)

    @property
    def index(self) -> defaultdict[str, list[Message]]:
        """``cause_by`` → its messages, oldest first (a copy: change memory through its methods)."""
        return defaultdict(list, {k: list(v) for k, v in self._index.items()})

    def _key(self, message: Message) -> str:
        return message.model_dump_json(exclude={"id"}) if self.ignore_id else message.id

    def __iter__(self) -> Iterator[Message]:
        return iter(list(self.storage))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Memory):
            return NotImplemented
        return self.ignore_id == other.ignore_id and [self._key(m) for m in self.storage] == [
            other._key(m) for m in other.storage
        ]

    __hash__ = None  # type: ignore[assignment]  # mutable

    def to_json(self) -> str:
        return json.dumps([json.loads(m.to_json()) for m in self.storage], ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Memory:
        """A memory from :meth:`to_json`'s text; :class:`~rolecast.errors.DataError` if it is not one."""
        data = load_json_data(text, what="memory")
        if not isinstance(data, list):
            raise DataError(f"a saved memory is a JSON list of messages, not {type(data).__name__}")
        try:
            return cls(Message.model_validate(item) for item in data)
        except ValidationError as exc:
            raise DataError(f"the JSON is not a list of messages: {exc}") from exc

    def __repr__(self) -> str:
        return f"Memory({len(self.storage)} messages)"

    # ------------------------------------------------------------------ writing
    def add(self, message: Message) -> None:
        key = self._key(message)
        if key in self._ids:
            return
        self._ids.add(key)
        self.storage.append(message)
        if message.cause_by:
            self._index[message.cause_by].append(message)
        if self.window is not None and len(self.storage) > self.window:
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        oldest = self.storage.pop(0)  # (a window is small: the shift is cheap)
        self._ids.discard(self._key(oldest))
        bucket = self._index.get(oldest.cause_by)
        if bucket:
            bucket.pop(0)  # the oldest of its cause is first in its bucket too
            if not bucket:
                del self._index[oldest.cause_by]
        self.forgotten += 1

    def add_batch(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.add(message)

    def delete(self, message: Message) -> None:
        """Forget one message (no error if it is not stored)."""
        key = self._key(message)
        if key not in self._ids:
            return
        self._ids.discard(key)
        self.storage = [m for m in self.storage if self._key(m) != key]
        bucket = self._index.get(message.cause_by)
        if bucket is not None:
            bucket[:] = [m for m in bucket if self._key(m) != key]
            if not bucket:
                del self._index[message.cause_by]

    def delete_newest(self) -> Message | None:
        """Forget and return the newest message (None when empty)."""
        if not self.storage:
            return None
        newest = self.storage.pop()
        self._ids.discard(self._key(newest))
        bucket = self._index.get(newest.cause_by)
        if bucket:
            bucket.pop()  # the newest of its cause is last in its bucket too
            if not bucket:
                del self._index[newest.cause_by]
        return newest

    def clear(self) -> None:
        self.forgotten = 0
        self.storage = []
        self._index.clear()
        self._ids.clear()

    # ------------------------------------------------------------------ reading
    def count(self) -> int:
        return len(self.storage)

    def __len__(self) -> int:
        return len(self.storage)

    def __contains__(self, message: object) -> bool:
        if not isinstance(message, Message):
            return False
        return (self._key(message) if self.ignore_id else message.id) in self._ids

    def unseen(self, messages: Iterable[Message]) -> list[Message]:
        """Those of ``messages`` not remembered yet, in order (one pass: every delivery is checked here)."""
        ids = self._ids
        if self.ignore_id:
            return [m for m in messages if self._key(m) not in ids]
        return [m for m in messages if m.id not in ids]

    def get(self, k: int = 0) -> list[Message]:
        """The last ``k`` messages, oldest first; ``k=0`` means all."""
        return self.storage[-k:] if k > 0 else list(self.storage)

    def get_by_action(self, action: Any) -> list[Message]:
        """Messages caused by an action (class, instance or its string)."""
        return list(self._index.get(any_to_str(action), ()))

    def get_by_actions(self, actions: Iterable[Any]) -> list[Message]:
        """Messages caused by any of ``actions``, in the order they were stored."""
        keys = {any_to_str(a) for a in actions}
        if len(keys) == 1:
            return self.get_by_action(next(iter(keys)))
        return [m for m in self.storage if m.cause_by in keys]

    def get_by_role(self, role: str) -> list[Message]:
        return [m for m in self.storage if m.role == role]

    def get_by_content(self, content: str) -> list[Message]:
        """Messages whose content contains ``content``."""
        return [m for m in self.storage if content in m.content]

    def find_news(self, observed: Iterable[Message], k: int = 0) -> list[Message]:
        """Those of ``observed`` not among the last ``k`` stored messages (all, for k=0)."""
        known = self._ids if k <= 0 else {self._key(m) for m in self.storage[-k:]}
        return [m for m in observed if self._key(m) not in known]

    def try_remember(self, keyword: str) -> list[Message]:
        """MetaGPT's name for :meth:`get_by_content`."""
        return self.get_by_content(keyword)


__all__ = ["Memory"]

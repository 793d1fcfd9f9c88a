"""Memory: the messages a role has seen, indexed so that lookups do not scan."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from pydantic import GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, core_schema

from rolecast.errors import DataError, UsageError

from .fingerprints import KeyIndex
from .message import Message, any_to_str, load_json_data
from .views import _VIEW, viewed

if TYPE_CHECKING:
    from .archive import MessageArchive


#: a window this small is searched by scanning it: no id set or cause index beside it
SCAN_WINDOW = 32
#: past this many messages a memory finds them by their ids' hashes (memory.fingerprints: ~17 bytes a
#: message) rather than in a set (16 bytes a slot, 1.5 to 6 slots an id: a million agents' history)
COMPACT_IDS = 1 << 14


_message_id: Callable[[Message], str] = attrgetter("id")


def _content_key(message: Message) -> str:
    return message.model_dump_json(exclude={"id"})


def _fingerprint(key: str) -> bytes:
    """The 8 bytes a memory keeps of a message its window let go (see :meth:`Memory.archived`)."""
    return (hash(key) & 0xFFFF_FFFF_FFFF_FFFF).to_bytes(8, "little")


class Memory:
    """An ordered store of messages, indexed by ``cause_by`` and by id.

    Adding a message that is already stored (same id) does nothing, so a message
    is never remembered twice however many paths deliver it; with ``ignore_id=True``
    (MetaGPT's option) two messages count as the same when everything but their id is
    equal. A plain class on the hot path (every delivered message passes through
    :meth:`add`), usable as a pydantic field: it validates from a list of messages or
    from :meth:`model_dump`'s dict, and serialises to a list of messages. Its indexes are made
    with its first message (a role that never hears anything keeps none).

    MetaGPT's pydantic surface is here for scripts that touch it: ``model_dump()`` and
    ``Memory(**data)`` round-trip, ``index`` (cause → messages), value equality,
    iteration and ``len()``.

    ``window=k`` bounds it to the newest ``k`` messages: adding one more forgets the oldest (a
    forgotten message delivered again counts as new). A small window (up to :data:`SCAN_WINDOW`) is
    searched by scanning it, with no indexes. A role in a large simulation that reads only its last
    few messages keeps only those (``examples/simulation.py``). The older ones stay in the run log:
    in a team run with a store, a bounded memory keeps an 8-byte fingerprint of each message it lets
    go (in one ``bytes``), and ``get``, ``get_by_action``, ``get_by_actions``, ``get_by_role`` and ``get_by_content``
    with ``archived=True`` read them back from there (:mod:`memory.archive`). ``forgotten`` counts
    the messages the window let go.
    """

    __slots__ = ("_ids", "_index", "_let_go", "archive", "forgotten", "ignore_id", "storage", "window")

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
        #: the stored ids (a set; fingerprints past COMPACT_IDS): made with the first message; and
        #: cause -> its messages, made when first asked (get_by_action): never for a small window
        self._ids: set[str] | KeyIndex | None = None
        self._index: dict[str, list[Message]] | None = None
        #: where the older messages are read back from (see :mod:`memory.archive`), and the
        #: fingerprints of those the window let go since it was set (8 bytes each)
        self.archive: MessageArchive | None = None
        self._let_go: bytes | None = None
        self.add_batch(m if isinstance(m, Message) else Message.model_validate(m) for m in storage)

    def __getstate__(self) -> dict[str, Any]:
        # a copy or a pickle (a role shipped to a Ray worker) leaves the archive behind: it reads
        # this process's run log; fingerprints (hashes, which differ between processes) are rebuilt
        state = {name: getattr(self, name) for name in self.__slots__ if name not in ("archive", "_let_go")}
        if not isinstance(state["_ids"], set):
            state["_ids"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in self.__slots__:
            object.__setattr__(self, name, state.get(name))
        self.forgotten = self.forgotten or 0
        self.storage = self.storage if self.storage is not None else []
        self.ignore_id = bool(self.ignore_id)

    @property
    def _scans(self) -> bool:
        """Whether this memory is searched by scanning (a small window) rather than by its indexes."""
        return self.window is not None and self.window <= SCAN_WINDOW

    def _id_set(self) -> set[str] | KeyIndex:
        ids = self._ids
        if ids is None:
            keys = {self._key(m) for m in self.storage}
            ids = self._ids = keys if len(keys) <= COMPACT_IDS else KeyIndex(self._key_of, self.storage)
        return ids

    def _cause_index(self) -> dict[str, list[Message]]:
        """cause -> its messages, oldest first: made when first asked, then kept up to date."""
        index = self._index
        if index is None:
            index = self._index = {}
            for m in self.storage:
                if m.cause_by:
                    index.setdefault(m.cause_by, []).append(m)
        return index

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
            "index": {k: [m.model_dump(mode=mode) for m in v] for k, v in self.index.items()},
            "ignore_id": self.ignore_id,
            **({"window": self.window} if self.window is not None else {}),
        }

    def model_dump_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False)

    @property
    def index(self) -> defaultdict[str, list[Message]]:
        """``cause_by`` → its messages, oldest first (a copy: change memory through its methods)."""
        out: defaultdict[str, list[Message]] = defaultdict(list)
        for m in self.storage:
            if m.cause_by:
                out[m.cause_by].append(m)
        return out

    def _key(self, message: Message) -> str:
        return message.model_dump_json(exclude={"id"}) if self.ignore_id else message.id

    @property
    def _key_of(self) -> Callable[[Message], str]:
        """:meth:`_key` as a function of the message alone (a KeyIndex holds it, not the memory)."""
        return _content_key if self.ignore_id else _message_id

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
        window = self.window
        if window is not None and window <= SCAN_WINDOW:  # a small window: scanned (every delivery comes here)
            storage = self.storage
            if self.ignore_id:
                if self._holds(self._key(message)):
                    return
            else:
                held = message.id
                for m in storage:
                    if m.id == held:
                        return
            storage.append(message)
            if len(storage) > window:
                self._forget_oldest()
            return
        key = self._key(message)
        ids = self._ids if self._ids is not None else self._id_set()
        if key in ids:
            return
        if isinstance(ids, set):
            ids.add(key)
            if len(ids) > COMPACT_IDS:
                self._ids = KeyIndex(self._key_of, [*self.storage, message])
        else:
            ids.add(key, message)
        self.storage.append(message)
        index = self._index
        if index is not None and message.cause_by:
            index.setdefault(message.cause_by, []).append(message)
        if self.window is not None and len(self.storage) > self.window:
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        oldest = self.storage.pop(0)  # (a window is small: the shift is cheap)
        if self._ids is not None:
            self._ids.discard(self._key(oldest))
        if self._index is not None:
            bucket = self._index.get(oldest.cause_by)
            if bucket:
                bucket.pop(0)  # the oldest of its cause is first in its bucket too
                if not bucket:
                    del self._index[oldest.cause_by]
        self.forgotten += 1
        if self.archive is not None:  # (a bytes object: 33 bytes and 8 a message; an array was 80 and 8)
            self._let_go = (self._let_go or b"") + _fingerprint(self._key(oldest))

    def add_batch(self, messages: Iterable[Message]) -> None:
        """:meth:`add` each message; the common case (ids, no window, a set of them) without a call a message."""
        if self.window is not None or self.ignore_id:
            for message in messages:
                self.add(message)
            return
        ids = self._ids if self._ids is not None else self._id_set()
        if type(ids) is not set:
            for message in messages:
                self.add(message)
            return
        messages = iter(messages)  # (a full set hands the rest to add, where the loop left off)
        storage, index = self.storage, self._index  # (every delivery comes here: add, inlined)
        for message in messages:
            key = message.id
            if key in ids:
                continue
            if len(ids) >= COMPACT_IDS:  # the set is full: add moves the ids into a KeyIndex, and adds the rest
                self.add(message)
                for rest in messages:
                    self.add(rest)
                return
            ids.add(key)
            storage.append(message)
            if index is not None and message.cause_by:
                index.setdefault(message.cause_by, []).append(message)

    def delete(self, message: Message) -> None:
        """Forget one message (no error if it is not stored)."""
        key = self._key(message)
        if not self._holds(key):
            return
        self.storage = [m for m in self.storage if self._key(m) != key]
        if self._ids is not None:
            self._ids.discard(key)
        if self._index is not None:
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
        if self._ids is not None:
            self._ids.discard(self._key(newest))
        if self._index is not None:
            bucket = self._index.get(newest.cause_by)
            if bucket:
                bucket.pop()  # the newest of its cause is last in its bucket too
                if not bucket:
                    del self._index[newest.cause_by]
        return newest

    def clear(self) -> None:
        self.forgotten = 0
        self.storage = []
        self._ids = self._index = None
        self._let_go = None

    # ------------------------------------------------------------------ reading
    def count(self) -> int:
        return len(self.storage)

    def __len__(self) -> int:
        return len(self.storage)

    def __contains__(self, message: object) -> bool:
        return isinstance(message, Message) and self._holds(self._key(message))

    def _holds(self, key: str) -> bool:
        if self._ids is not None:
            return key in self._ids
        return any(self._key(m) == key for m in self.storage)

    def unseen(self, messages: Iterable[Message]) -> list[Message]:
        """Those of ``messages`` not remembered yet, in order (one pass: every delivery is checked here)."""
        ids = self._ids
        if self.ignore_id:
            known = ids if ids is not None else {self._key(m) for m in self.storage}
            return [m for m in messages if self._key(m) not in known]
        if ids is not None:
            return [m for m in messages if m.id not in ids]
        if not self.storage:
            return list(messages)
        held = {m.id for m in self.storage}
        return [m for m in messages if m.id not in held]

    def archived(self) -> list[Message]:
        """The messages this memory's window let go, oldest first, read back from the run log (see
        :mod:`memory.archive`); [] with no archive (a run without a store) or nothing let go."""
        if self.archive is None or not self._let_go:
            return []
        let_go = self._let_go
        wanted = {let_go[i:i + 8] for i in range(0, len(let_go), 8)}
        return [m for m in self.archive.messages() if _fingerprint(self._key(m)) in wanted]

    def _all(self, archived: bool) -> list[Message]:
        return [*self.archived(), *self.storage] if archived else self.storage

    def get(self, k: int = 0, *, archived: bool = False) -> list[Message]:
        """The last ``k`` messages, oldest first; ``k=0`` means all. With ``archived=True``, from the
        messages the window let go too (read back from the run log). While an action of this memory's role
        runs, the framework may show a fitted view instead (:mod:`memory.views`): the newest messages that fit
        the model's window, after the latest summary."""
        if archived and (k <= 0 or k > len(self.storage)):
            older = self.archived()
            if older:
                return [*older, *self.storage][-k:] if k > 0 else [*older, *self.storage]
        if _VIEW.get() is not None:  # an action of this memory's role is running: it reads a fitted view
            shown = viewed(self, list(self.storage))
            return shown[-k:] if k > 0 else shown
        return self.storage[-k:] if k > 0 else list(self.storage)

    def get_by_action(self, action: Any, *, archived: bool = False) -> list[Message]:
        """Messages caused by an action (class, instance or its string)."""
        key = any_to_str(action)
        if archived or self._scans:
            return [m for m in self._all(archived) if m.cause_by == key]
        return list(self._cause_index().get(key, ()))

    def get_by_actions(self, actions: Iterable[Any], *, archived: bool = False) -> list[Message]:
        """Messages caused by any of ``actions``, in the order they were stored."""
        keys = {any_to_str(a) for a in actions}
        if len(keys) == 1:
            return self.get_by_action(next(iter(keys)), archived=archived)
        return [m for m in self._all(archived) if m.cause_by in keys]

    def get_by_role(self, role: str, *, archived: bool = False) -> list[Message]:
        return [m for m in self._all(archived) if m.role == role]

    def get_by_content(self, content: str, *, archived: bool = False) -> list[Message]:
        """Messages whose content contains ``content``."""
        return [m for m in self._all(archived) if content in m.content]

    def find_news(self, observed: Iterable[Message], k: int = 0) -> list[Message]:
        """Those of ``observed`` not among the last ``k`` stored messages (all, for k=0)."""
        if k <= 0:
            return self.unseen(observed)
        known = {self._key(m) for m in self.storage[-k:]}
        return [m for m in observed if self._key(m) not in known]

    def try_remember(self, keyword: str) -> list[Message]:
        """MetaGPT's name for :meth:`get_by_content`."""
        return self.get_by_content(keyword)


__all__ = ["SCAN_WINDOW", "Memory"]

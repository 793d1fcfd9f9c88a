"""Which messages a large memory holds, in about 17 bytes a message instead of a set's 45 to 90.

A team's history remembers every message of the run (3 million for a million agents and three
rounds); a ``set`` of their ids spends 16 bytes a slot over one and a half to six slots an id.
:class:`KeyIndex` keeps each key's 64-bit hash in sorted arrays, one per range of hashes, beside
the message it stands for (a bisect and a short move per message added or removed). A hash two
keys share is told apart by the messages themselves, so its answers are exact.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable

from .message import Message

#: messages a bucket holds on average before the buckets are split in two (a bisect of ~12 steps and
#: a move of up to ~32 KB per change; ~150 bytes of bucket objects per ~2,000 messages)
_BUCKET_KEYS = 2048
#: the first number of buckets, as a shift of the hash (2^8 = 256 buckets)
_FIRST_SHIFT = 64 - 8
#: a signed 64-bit hash's bucket is (hash >> shift) + this << (63 - shift)
_HALF = 1 << 63
_EMPTY: array[int] = array("q")


class KeyIndex:
    """The messages of a memory by their key's hash (``key_of(message)``: its id, or its content
    for a memory that ignores ids), for finding one by its key."""

    __slots__ = ("_fps", "_key_of", "_messages", "_shift", "_size")

    def __init__(self, key_of: Callable[[Message], str], messages: Iterable[Message] = ()):
        self._key_of = key_of
        self._shift = _FIRST_SHIFT
        self._fps: list[array[int]] = [array("q") for _ in range(1 << (64 - _FIRST_SHIFT))]
        self._messages: list[list[Message]] = [[] for _ in range(1 << (64 - _FIRST_SHIFT))]
        self._size = 0
        for message in messages:
            self.add(key_of(message), message)

    def __len__(self) -> int:
        return self._size

    def _find(self, key: str) -> tuple[int, int]:
        """(bucket, position) of the message with ``key``, position -1 when none is held."""
        fp = hash(key)
        b = (fp + _HALF) >> self._shift
        fps = self._fps[b]
        i = bisect_left(fps, fp)
        while i < len(fps) and fps[i] == fp:
            if self._key_of(self._messages[b][i]) == key:
                return b, i
            i += 1  # another key with the same hash
        return b, -1

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._find(key)[1] >= 0

    def add(self, key: str, message: Message) -> None:
        """Hold ``message`` under ``key`` (its owner adds a key it does not hold yet)."""
        fp = hash(key)
        b = (fp + _HALF) >> self._shift
        fps = self._fps[b]
        i = bisect_left(fps, fp)
        fps.insert(i, fp)
        self._messages[b].insert(i, message)
        self._size += 1
        if self._size > len(self._fps) * _BUCKET_KEYS and self._shift > 1:
            self._split()

    def discard(self, key: str) -> None:
        """Let go of the message held under ``key``, if any."""
        b, i = self._find(key)
        if i >= 0:
            del self._fps[b][i]
            del self._messages[b][i]
            self._size -= 1

    def _split(self) -> None:
        """Twice the buckets, each split at its middle hash (both halves stay sorted)."""
        shift = self._shift - 1
        old_fps, old_messages = self._fps, self._messages
        fps: list[array[int]] = []
        messages: list[list[Message]] = []
        for b in range(len(old_fps)):
            bucket, held = old_fps[b], old_messages[b]
            old_fps[b], old_messages[b] = _EMPTY, []  # each old bucket freed as it is split
            cut = bisect_left(bucket, ((2 * b + 1) << shift) - _HALF)
            fps += (bucket[:cut], bucket[cut:])
            messages += (held[:cut], held[cut:])
        self._fps, self._messages, self._shift = fps, messages, shift

    def __reduce__(self) -> str | tuple[object, ...]:
        # a string's hash differs from process to process: rebuilt from the messages, never copied
        raise TypeError("a KeyIndex is rebuilt from its memory's messages, not copied or pickled")


__all__ = ["KeyIndex"]

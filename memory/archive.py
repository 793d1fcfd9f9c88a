"""Where a bounded memory's older messages are found again: the run log.

A :class:`~memory.Memory` with a ``window`` keeps only its newest messages. Every published
message is already in the run log (the run store), so the memory need not keep the older ones:
it keeps, per message it lets go, an 8-byte fingerprint of its id, and :class:`RunLogArchive`
reads the messages back from the log when someone asks (``memory.get(archived=True)``,
``get_by_action(..., archived=True)`` …). One archive serves every memory of a run.

A message that was never published (a note a role added to its own memory) is not in the log
and is not found again; a run without a store has no archive, and what a window lets go is gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from rolecast.errors import DataError
from rolecast.runs.events import MESSAGE
from rolecast.runs.events import message as message_data

from .message import Message

if TYPE_CHECKING:
    from .memory import Memory


class MessageArchive(Protocol):
    """What a memory reads its older messages back from: every message of the run, in order."""

    def messages(self) -> Iterable[Message]: ...


class RunLogArchive:
    """The messages a run logged (:class:`~rolecast.runs.log.RunLog`), read back from its store."""

    __slots__ = ("log",)

    def __init__(self, log: Any):
        self.log = log

    @classmethod
    def of(cls, log: Any) -> RunLogArchive | None:
        """The archive of ``log``'s run, or None when it has no store (nothing to read back)."""
        return cls(log) if log is not None and getattr(log, "store", None) is not None else None

    def messages(self) -> Iterator[Message]:
        log = self.log
        log.flush()  # this round's messages too
        for event in log.store.events(log.run_id, [MESSAGE]):
            try:
                yield Message.model_validate(message_data(event))
            except ValidationError as exc:
                raise DataError(f"the run log's message #{event.seq} is not a message: {exc}") from exc


def attach_archive(memories: Iterable[Memory], log: Any) -> None:
    """Let the bounded ones of ``memories`` find what they let go in ``log``'s run store (one archive
    shared by all); with no store, nothing changes."""
    archive = RunLogArchive.of(log)
    if archive is None:
        return
    for memory in memories:
        if memory.window is not None:
            memory.archive = archive


__all__ = ["MessageArchive", "RunLogArchive", "attach_archive"]

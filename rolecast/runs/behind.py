"""Writing a batch of events behind the caller: in a thread of its own, one batch at a time.

A run of many roles writes its events in batches (:data:`rolecast.runs.log.BATCH_EVENTS`). A batch
whose events are durable already (a model call staged in the SQLite store's journal) or may be
re-derived (a message, a round's start) need not hold up the roles while the database writes it:
:class:`WriteBehind` writes it in a thread while the event loop runs the next turns — sqlite3 lets
go of the interpreter's lock while SQLite works, so on a machine with a second core the write costs
the loop little. There is never more than one batch in flight: the next one, and every other call
of the store, waits for it first (:meth:`WriteBehind.settle`), so the database receives everything
in the order it was logged, and a round's end (written at once) follows all of its batches.

The SQLite store uses it when ``rolecast.runs.sqlite.WRITE_BEHIND`` is set: off by default, since on
a 2-core machine the thread and the event loop slowed each other more than the thread saved.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from loguru import logger

if TYPE_CHECKING:
    from .events import RunEvent

Write = Callable[[Sequence["RunEvent"]], None]


class WriteBehind:
    """Writes one batch at a time in a thread (see the module docstring). It holds no reference to
    what it writes to: each call names the ``write`` function (a store's own, unbound per call, so
    that the store is freed as soon as nothing else refers to it)."""

    def __init__(self, name: str):
        self._name = name
        self._thread: threading.Thread | None = None
        #: a batch the thread could not write: written again by the next settle()
        self._failed: Sequence[RunEvent] | None = None
        self._lock = threading.Lock()

    @property
    def busy(self) -> bool:
        """A batch is being written, or waits to be written again."""
        return self._thread is not None or self._failed is not None

    def start(self, write: Write, events: Sequence[RunEvent]) -> None:
        """``write(events)`` in a thread, once the batch before them is written (:meth:`settle`)."""
        self.settle(write)
        thread = threading.Thread(target=self._run, args=(write, list(events)), name=f"rolecast {self._name}",
                                  daemon=True)
        self._thread = thread
        thread.start()

    def _run(self, write: Write, events: Sequence[RunEvent]) -> None:
        try:
            write(events)
        except BaseException as exc:  # the next settle() writes them again, and raises if that fails too
            self._failed = events
            logger.warning("{}: a batch of {} events written behind failed ({}); the next write tries it again",
                           self._name, len(events), exc)

    def settle(self, write: Write) -> None:
        """Return once the batch in flight is written; a batch that failed is written again here (its
        error raised if it fails again: it is then kept for the next try)."""
        if self._thread is None and self._failed is None:
            return
        with self._lock:
            thread = self._thread
            if thread is not None:
                thread.join()
                self._thread = None
            failed, self._failed = self._failed, None
            if failed is not None:
                try:
                    write(failed)
                except BaseException:
                    self._failed = failed
                    raise


__all__ = ["WriteBehind"]

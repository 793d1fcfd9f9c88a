"""A view of a role's memory while one of its actions runs: how MetaGPT-style code reads memory fits.

MetaGPT's actions build their prompts from ``self.get_memories()``, ``self.rc.memory.get()`` or
``self.rc.history``: the whole memory. While the framework runs an action for a role (``actions.perform``)
it may install a view of that role's :class:`~memory.Memory` — a function of its messages, such as the
newest that fit the model's window, after the latest compaction summary — and every read of that memory
in the action (and only of that memory, and only in that task) goes through it. Outside an action, and
for any other memory, reads are as stored. The view never changes what is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

#: the memory being viewed (by identity) and the view
_VIEW: ContextVar[tuple[Any, Callable[[list[Any]], list[Any]]] | None] = ContextVar("rolecast_memory_view",
                                                                                       default=None)


@contextmanager
def memory_view(memory: Any, view: Callable[[list[Any]], list[Any]]) -> Iterator[None]:
    """Reads of ``memory`` (``get``) in this task, inside the block, return ``view(messages)``."""
    token = _VIEW.set((memory, view))
    try:
        yield
    finally:
        _VIEW.reset(token)


def viewed(memory: Any, messages: list[Any]) -> list[Any]:
    """``messages`` (all of ``memory``'s, oldest first) as the view installed for ``memory`` shows them."""
    current = _VIEW.get()
    if current is None or current[0] is not memory:
        return messages
    return current[1](messages)


__all__ = ["memory_view", "viewed"]

"""Invocation hooks and events (Semantic Kernel's function-invoking / function-invoked filters).

Every action run, tool call and prompt-function call goes through :meth:`Hooks.invoke`:

* a *before* hook (``on_invoking``) sees the :class:`Invocation` and may change its
  ``arguments``, :meth:`~Invocation.skip` the call (with a result of its choosing) or
  :meth:`~Invocation.cancel` it (raises :class:`~rolecast.errors.InvocationCancelled`);
* an *after* hook (``on_invoked``) may replace ``result``, cancel, or ask for a
  :meth:`~Invocation.repeat` (bounded by ``max_repeats``).

Events (``emit``) carry what happens inside a loop — a ReAct step started, a tool was
called, an observation came back, the loop finished — to ``on_event`` subscribers.
Hooks may be plain functions or coroutines.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import InvocationCancelled


@dataclass
class Invocation:
    """One call of an action, tool or prompt function, as hooks see it."""

    kind: str
    name: str
    arguments: dict[str, Any]
    result: Any = None
    attempt: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False
    cancel_reason: str | None = None
    repeat_requested: bool = False

    def skip(self, result: Any = None) -> None:
        """(before hook) Do not call; return ``result`` instead."""
        self.skipped = True
        self.result = result

    def cancel(self, reason: str = "") -> None:
        """(before or after hook) Stop: the caller gets :class:`InvocationCancelled`."""
        self.cancel_reason = reason or "cancelled by a hook"

    def repeat(self) -> None:
        """(after hook) Call once more with the current arguments (bounded)."""
        self.repeat_requested = True


@dataclass
class Event:
    """Something that happened inside a run (``kind`` such as ``"react.tool_called"``)."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


Hook = Callable[[Invocation], "Awaitable[None] | None"]
EventHandler = Callable[[Event], "Awaitable[None] | None"]
F = TypeVar("F", bound=Callable[..., Any])


async def _call(fn: Callable[..., Any], arg: Any) -> None:
    result = fn(arg)
    if inspect.isawaitable(result):
        await result


class Hooks:
    """A set of before/after hooks and event handlers, shared by one context (team)."""

    def __init__(self, max_repeats: int = 3):
        self.max_repeats = max_repeats
        self._invoking: list[tuple[Hook, frozenset[str] | None]] = []
        self._invoked: list[tuple[Hook, frozenset[str] | None]] = []
        self._events: list[EventHandler] = []

    # ------------------------------------------------------------ registration
    def on_invoking(self, fn: F | None = None, *, kinds: set[str] | None = None) -> Any:
        """Register a before hook; usable as ``@hooks.on_invoking`` or with ``kinds={"tool"}``."""

        def register(f: F) -> F:
            self._invoking.append((f, frozenset(kinds) if kinds else None))
            return f

        return register(fn) if fn is not None else register

    def on_invoked(self, fn: F | None = None, *, kinds: set[str] | None = None) -> Any:
        """Register an after hook; usable as a decorator, optionally for some kinds only."""

        def register(f: F) -> F:
            self._invoked.append((f, frozenset(kinds) if kinds else None))
            return f

        return register(fn) if fn is not None else register

    def on_event(self, fn: F) -> F:
        """Register an event handler (decorator)."""
        self._events.append(fn)
        return fn

    # --------------------------------------------------------------- execution
    async def invoke(
        self,
        kind: str,
        name: str,
        arguments: dict[str, Any],
        call: Callable[[dict[str, Any]], Awaitable[Any]],
        **metadata: Any,
    ) -> Any:
        """Run ``call(arguments)`` wrapped by the hooks registered for ``kind``."""
        before = [h for h, k in self._invoking if k is None or kind in k]
        after = [h for h, k in self._invoked if k is None or kind in k]
        if not before and not after:
            return await call(arguments)
        inv = Invocation(kind=kind, name=name, arguments=dict(arguments), metadata=metadata)
        for hook in before:
            await _call(hook, inv)
            if inv.cancel_reason is not None:
                raise InvocationCancelled(name, inv.cancel_reason, kind=kind)
            if inv.skipped:
                return inv.result
        while True:
            inv.result = await call(inv.arguments)
            inv.repeat_requested = False
            for hook in after:
                await _call(hook, inv)
                if inv.cancel_reason is not None:
                    raise InvocationCancelled(name, inv.cancel_reason, kind=kind)
            if inv.repeat_requested and inv.attempt < self.max_repeats:
                inv.attempt += 1
                continue
            return inv.result

    async def emit(self, kind: str, **data: Any) -> None:
        """Send an :class:`Event` to every handler."""
        if not self._events:
            return
        event = Event(kind, data)
        for handler in list(self._events):
            await _call(handler, event)


__all__ = ["Event", "EventHandler", "Hook", "Hooks", "Invocation"]

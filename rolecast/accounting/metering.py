"""Who a model call is charged to, and where it is logged: the meter of the running task.

A :class:`Meter` — the cost manager (budget and totals), the role on whose behalf
the task works, and the run's log — is kept in a context variable. A team marks
each role's turn with :func:`metered` (through :meth:`rolecast.context.Context.scope`),
so every model call made inside, however deep and in whatever task started from
there, finds its meter with :func:`current_meter`. Outside any team, calls are
charged to a process-wide cost manager with no budget and no log.

This module knows nothing of models or contexts, so the LLM seam and the context can
both depend on it without depending on each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass

from ..runs.log import RunLog
from .cost import CostManager


@dataclass(frozen=True)
class Meter:
    """What a model call needs to know about the task that makes it."""

    cost_manager: CostManager
    role: str | None = None
    run_log: RunLog | None = None


_DEFAULT_COST_MANAGER = CostManager()
_METER: ContextVar[Meter | None] = ContextVar("rolecast_meter", default=None)
_DEFAULT_METER = Meter(_DEFAULT_COST_MANAGER)  # frozen: one for every call made outside any team


def default_cost_manager() -> CostManager:
    """The process-wide cost manager, charged by calls made outside any team."""
    return _DEFAULT_COST_MANAGER


def enter_meter(meter: Meter) -> Token[Meter | None]:
    """Make ``meter`` the running task's (the fast form of :func:`metered`); undo with :func:`exit_meter`."""
    return _METER.set(meter)


def exit_meter(token: Token[Meter | None]) -> None:
    _METER.reset(token)


def current_meter() -> Meter:
    """The meter of the running task (the process-wide one outside any team)."""
    return _METER.get() or _DEFAULT_METER


@contextmanager
def metered(cost_manager: CostManager, role: str | None = None, run_log: RunLog | None = None) -> Iterator[Meter]:
    """Charge every model call made inside to ``cost_manager`` (for ``role``), logged to ``run_log``."""
    meter = Meter(cost_manager, role, run_log)
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


__all__ = ["Meter", "current_meter", "default_cost_manager", "enter_meter", "exit_meter", "metered"]

"""What a :class:`~environment.Team` is built from and gives back: its runtime and error policy from
what a user passed, the checks of an idea and a budget, and the :class:`History` of a run."""

from __future__ import annotations

import math
import os
from typing import Any, Literal

from memory import Message
from rolecast.errors import UsageError
from rolecast.runs.approvals import EXIT_WAITING

from .ray_runtime import RayRuntime
from .runtime import Runtime


def _runtime(runtime: str | Runtime | None) -> Runtime | None:
    """A runtime from what a user passed: None or ``"local"`` (in-process), ``"ray"``, or a runtime."""
    if runtime is None or runtime == "local":
        return None
    if runtime == "ray":
        return RayRuntime()
    if isinstance(runtime, Runtime):
        return runtime
    raise UsageError(f"runtime must be 'local', 'ray' or a Runtime object, not {runtime!r}")


#: ``Team(on_error=...)``: what a failing role does to the run (see :class:`Team`)
OnError = Literal["stop", "continue", "recover"]
ON_ERROR: tuple[str, ...] = ("stop", "continue", "recover")


def default_on_error() -> str:
    """``on_error`` when a team is given none: ``$ROLECAST_ON_ERROR``, else ``"stop"``."""
    value = os.environ.get("ROLECAST_ON_ERROR", "stop")
    if value not in ON_ERROR:
        raise UsageError(f'ROLECAST_ON_ERROR={value!r}: choose "stop", "continue" or "recover"')
    return value


class History(list[Message]):
    """The messages of a run, oldest first.

    A list of :class:`~memory.Message`; its text (``str(history)``) is one message per
    line, and ``"text" in history`` looks for the text in it — as in MetaGPT, whose run
    history was that text — or for a sender of that name (``"Alex" in history``: Alex spoke).

    ``status`` is ``"finished"``, or ``"waiting"`` when the run paused for a deferred approval
    (:meth:`rolecast.control.approval.Approval.deferred`; ``pending`` names it); ``exit_code`` is what a
    script exits with (0, or :data:`EXIT_WAITING`).
    """

    status: str = "finished"
    pending: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_WAITING if self.status == "waiting" else 0

    def __str__(self) -> str:
        return "\n".join(str(m) for m in self)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in str(self) or any(m.sent_from == item for m in self)
        return super().__contains__(item)


def _check_idea(idea: Any, method: str) -> str:
    """The user's idea: text with something in it (``None`` would let the model invent a task)."""
    if not isinstance(idea, str) or not idea.strip():
        raise UsageError(f"{method}() takes the idea as text, such as 'write a snake game'; not {idea!r:.80}")
    return idea


def _check_budget_value(investment: Any) -> float:
    if isinstance(investment, bool) or not isinstance(investment, (int, float)) or not math.isfinite(investment) \
            or investment < 0:
        raise UsageError(f"the investment is a budget in dollars, a number >= 0; not {investment!r}")
    return float(investment)


__all__ = ["ON_ERROR", "History", "OnError", "default_on_error"]

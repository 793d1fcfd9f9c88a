"""One budget and one rate limit for model calls made from many processes.

:class:`CallMeter` is plain, synchronous bookkeeping — the Ray runtime runs one
instance inside a single actor that every worker asks before each model call, so the
team's budget and the provider's limits (requests and tokens per minute) hold for the
whole cluster, not per worker.

Rate limiting is by reservation in a sliding window: a call asks for a slot
(:meth:`CallMeter.acquire`) and is told how long to wait before making its request.
The slot is booked at that future time at once, so callers that ask together are
spread out instead of all waking at the same moment. Tokens are counted from the
prompt's estimate when the slot is booked, and the answer's tokens are added when the
call settles (:meth:`CallMeter.settle`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UsageError


@dataclass(frozen=True)
class RateLimit:
    """At most ``requests`` calls and ``tokens`` tokens in any window of ``per`` seconds (None: no limit)."""

    requests: int | None = None
    tokens: int | None = None
    per: float = 60.0

    def __post_init__(self) -> None:
        if self.requests is not None and self.requests < 1:
            raise UsageError("RateLimit.requests must be at least 1 (or None for no limit)")
        if self.tokens is not None and self.tokens < 1:
            raise UsageError("RateLimit.tokens must be at least 1 (or None for no limit)")
        if self.per <= 0:
            raise UsageError("RateLimit.per must be a positive number of seconds")

    @property
    def unlimited(self) -> bool:
        return self.requests is None and self.tokens is None


@dataclass
class Grant:
    """The answer to :meth:`CallMeter.acquire`."""

    ticket: int  # pass it to settle()
    wait: float  # seconds to wait before making the call
    over_budget: bool = False
    spent: float = 0.0
    limit: float = 0.0


@dataclass
class _Slot:
    ticket: int
    at: float
    tokens: int


class CallMeter:
    """The shared budget and sliding-window rate limit (see the module docstring)."""

    def __init__(
        self,
        limit: RateLimit | None = None,
        max_budget: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.limit = limit or RateLimit()
        self.max_budget = max_budget
        self.spent = 0.0
        self.calls = 0
        self._clock = clock
        self._slots: deque[_Slot] = deque()  # booked slots, in time order
        self._next_ticket = 0

    def _expire(self, now: float) -> None:
        horizon = now - self.limit.per
        while self._slots and self._slots[0].at <= horizon:
            self._slots.popleft()

    def _earliest(self, now: float, tokens: int) -> float:
        """The earliest time from ``now`` at which one more call of ``tokens`` fits the window."""
        per, at = self.limit.per, now
        slots = self._slots
        if self.limit.requests is not None and len(slots) >= self.limit.requests:
            # the window must have slid past the slot that is `requests` places from the end
            at = max(at, slots[len(slots) - self.limit.requests].at + per)
        if self.limit.tokens is not None:
            cap = self.limit.tokens
            tokens = min(tokens, cap)  # a call larger than the whole limit waits for an empty window
            used = sum(s.tokens for s in slots if s.at > at - per)
            for slot in slots:
                if used + tokens <= cap:
                    break
                if slot.at > at - per:
                    used -= slot.tokens
                    at = max(at, slot.at + per)
        return at

    def acquire(self, prompt_tokens: int, projected_cost: float = 0.0) -> Grant:
        """Book a slot for a call with a prompt of ``prompt_tokens`` (or refuse it: over budget)."""
        if self.max_budget is not None and (
            self.spent >= self.max_budget or self.spent + projected_cost > self.max_budget
        ):
            return Grant(-1, 0.0, over_budget=True, spent=self.spent, limit=self.max_budget)
        self._next_ticket += 1
        ticket = self._next_ticket
        if self.limit.unlimited:
            return Grant(ticket, 0.0)
        now = self._clock()
        self._expire(now)
        at = self._earliest(now, prompt_tokens)
        slot = _Slot(ticket, at, prompt_tokens)
        # keep the deque in time order (a later booking is never earlier than the last one
        # by more than rounding, but insert in place to be safe)
        i = len(self._slots)
        while i and self._slots[i - 1].at > at:
            i -= 1
        self._slots.insert(i, slot)
        return Grant(ticket, max(0.0, at - now))

    def settle(self, ticket: int, completion_tokens: int, cost: float) -> float:
        """Add a finished call's answer tokens and cost; returns the total spent."""
        self.calls += 1
        self.spent += cost
        if completion_tokens and self.limit.tokens is not None:
            for slot in self._slots:
                if slot.ticket == ticket:
                    slot.tokens += completion_tokens
                    break
        return self.spent

    def set_budget(self, max_budget: float | None) -> None:
        self.max_budget = max_budget

    def status(self) -> dict[str, float | int | None]:
        """Spent so far, calls settled, the budget and the slots in the window."""
        return {"spent": self.spent, "calls": self.calls, "max_budget": self.max_budget,
                "in_window": len(self._slots)}


__all__ = ["CallMeter", "Grant", "RateLimit"]

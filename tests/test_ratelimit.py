"""CallMeter: the budget and sliding-window rate limit the Ray runtime shares between workers."""

from __future__ import annotations

import pytest

from rolecast.accounting.ratelimit import CallMeter, RateLimit
from rolecast.errors import UsageError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_requests_per_window_are_spread_not_refused():
    clock = Clock()
    meter = CallMeter(RateLimit(requests=3, per=10.0), clock=clock)
    waits = [meter.acquire(10).wait for _ in range(7)]
    assert waits == [0, 0, 0, 10, 10, 10, 20]  # booked at once, each told when to go
    clock.now += 10.0
    assert meter.acquire(10).wait == pytest.approx(10.0)  # 3 booked at 110 and 3 at 120 remain


def test_tokens_per_window_count_the_answer_too():
    clock = Clock()
    meter = CallMeter(RateLimit(tokens=100, per=60.0), clock=clock)
    first = meter.acquire(40)
    assert first.wait == 0
    meter.settle(first.ticket, 50, 0.0)  # 90 tokens now in the window
    assert meter.acquire(20).wait == 60.0  # must wait for the first call to leave the window
    # a call larger than the whole limit waits for an empty window: after the one booked at 160
    assert meter.acquire(500).wait == 120.0


def test_the_budget_refuses_a_call_that_would_pass_it():
    meter = CallMeter(max_budget=1.0)
    meter.settle(meter.acquire(10, 0.5).ticket, 5, 0.6)
    assert not meter.acquire(10, 0.3).over_budget
    refused = meter.acquire(10, 0.5)
    assert refused.over_budget and refused.spent == pytest.approx(0.6) and refused.limit == 1.0


def test_a_nonsense_limit_is_a_usage_error():
    with pytest.raises(UsageError):
        RateLimit(requests=0)
    with pytest.raises(UsageError):
        RateLimit(per=0)

"""A round's turns, run side by side but never more than a bounded number at once.

``asyncio.gather`` over a round of a million roles made a million tasks at once (with their
coroutines, their first ``call_soon`` handles and their entries in asyncio's set of all tasks: about
1,000 bytes a role, and the set's table stayed that large after the round). :func:`run_turns` keeps
at most ``limit`` turns running: each in its own task, as gather ran it (a turn's context variables
stay its own), started in the roles' order, the next one started as soon as one finishes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from rolecast.errors import UsageError

T = TypeVar("T")

#: how many turns of a round run at once by default: thousands of model calls in flight, a few MB of tasks
DEFAULT_MAX_CONCURRENT_TURNS = 4096


def check_concurrency(value: Any, where: str) -> int:
    """``value`` as a number of turns at once (an int of at least 1), else a :class:`UsageError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{where}: max_concurrent_turns is how many turns of a round run at once, "
                         f"a whole number of at least 1, not {value!r}")
    return value


async def run_turns(turn: Callable[[T], Coroutine[Any, Any, Any]], items: Sequence[T], limit: int) -> list[Any]:
    """``turn(item)`` for each item, at most ``limit`` running at once; the outcomes in the items' order,
    as ``asyncio.gather(..., return_exceptions=True)`` gives them (the value returned, the exception
    raised, or the :class:`asyncio.CancelledError` of a cancelled turn).

    A turn that is cancelled or interrupted (an exception that is no ``Exception``: ``CancelledError``,
    ``KeyboardInterrupt``) stops the round: no further turn starts, and those never started have a
    ``CancelledError`` for outcome. Cancelled itself, this cancels the turns running, waits for them
    and raises ``CancelledError`` (as a cancelled gather does).
    """
    results: list[Any] = [None] * len(items)
    if not items:
        return results
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    running: dict[asyncio.Future[Any], int] = {}
    upcoming = iter(range(len(items)))
    stopped = False

    def start_next() -> None:
        i = None if stopped else next(upcoming, None)
        if i is None:
            if not running and not finished.done():
                finished.set_result(None)
            return
        task: asyncio.Future[Any] = loop.create_task(turn(items[i]))
        running[task] = i
        task.add_done_callback(done)

    def done(task: asyncio.Future[Any]) -> None:
        nonlocal stopped
        i = running.pop(task)
        if task.cancelled():
            outcome: Any = asyncio.CancelledError()
        else:
            outcome = task.exception()
            if outcome is None:
                outcome = task.result()
        results[i] = outcome
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            stopped = True  # cancelled or interrupted: the round ends with the turns already running
        start_next()

    for _ in range(min(limit, len(items))):
        start_next()
    try:
        await finished
    except asyncio.CancelledError:
        stopped = True
        for task in list(running):
            task.cancel()
        if running:
            await asyncio.wait(list(running))
        raise
    if stopped:
        for i in upcoming:  # never started: its news waits in its inbox for the next round
            results[i] = asyncio.CancelledError()
    return results


__all__ = ["DEFAULT_MAX_CONCURRENT_TURNS", "check_concurrency", "run_turns"]

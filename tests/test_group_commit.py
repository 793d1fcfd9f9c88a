"""When the run log writes: an answer is used only once its call is in the store; the calls answered in
one turn of the event loop share one write (``durability="batched"``), or each is written alone
(``durability="call"``); a failed write fails the call waiting for it and loses no event."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from rolecast.errors import RolecastError, StoreError, UsageError
from rolecast.runs.log import RunLog
from rolecast.runs.store import LLM_CALL, MemoryRunStore, RunEvent
from rolecast.testing import FunctionLLM
from roles import Role


class SpyStore(MemoryRunStore):
    """A store that remembers each write (a batch of events), and can fail the first ``fail`` of them."""

    def __init__(self, fail: int = 0) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.fail = fail

    def extend(self, events: Sequence[RunEvent]) -> None:
        if self.fail:
            self.fail -= 1
            raise StoreError("the disk is full")
        self.batches.append([e.kind for e in events])
        super().extend(events)


SEEN: list[bool] = []  # per answer used: was its call in the store already?


class Say(Action):
    async def run(self, history: list[Message]) -> str:
        answer = await self._aask(history[-1].content)
        # the answer is used only now: its call must already be in the store
        log = self.context.run_log
        assert log is not None
        calls = [e for e in log.store.events(log.run_id, [LLM_CALL]) if e.role == self._role_name()]
        SEEN.append(bool(calls))
        return answer

    def _role_name(self) -> str:
        from rolecast.accounting.metering import current_meter

        return current_meter().role or ""


def crowd(store: SpyStore, n: int = 20, **kw) -> Team:
    team = Team(llm=FunctionLLM(lambda messages: "ok"), store=store, **kw)
    team.hire(Role(name=f"R{i}", actions=[Say()], watch=[UserRequirement]) for i in range(n))
    return team


async def test_an_answer_is_used_only_once_its_call_is_in_the_store_and_one_turn_of_calls_is_one_write():
    SEEN.clear()
    store = SpyStore()
    team = crowd(store)
    await team.run(n_round=1, idea="go")
    assert SEEN == [True] * 20
    with_calls = [b for b in store.batches if LLM_CALL in b]
    # 20 roles answered by an instant model in the same turn of the event loop: one transaction for all
    assert len(with_calls) == 1 and with_calls[0].count(LLM_CALL) == 20
    assert len(store.batches) < 10  # not one write per event (the run logged about 80)
    # the round's messages are written with its end, in one write (before any is delivered)
    assert store.batches[-2] == ["message"] * 20 + ["round_finished"]


async def test_durability_call_writes_each_model_call_alone_at_once():
    SEEN.clear()
    store = SpyStore()
    team = crowd(store, durability="call")
    await team.run(n_round=1, idea="go")
    assert SEEN == [True] * 20
    with_calls = [b for b in store.batches if LLM_CALL in b]
    assert len(with_calls) == 20 and all(b.count(LLM_CALL) == 1 and b[-1] == LLM_CALL for b in with_calls)


def test_a_durability_that_does_not_exist_is_a_usage_error():
    with pytest.raises(UsageError, match="durability"):
        Team(store=None, durability="sometimes")
    with pytest.raises(UsageError, match="durability"):
        RunLog(None, durability="never")  # type: ignore[arg-type]


async def test_a_failed_write_fails_the_waiting_call_and_its_events_are_written_with_the_next():
    SEEN.clear()
    store = SpyStore()
    team = crowd(store, n=3)
    team.run_project("go")  # written at once (no event loop turn to wait for)
    # the round's first two writes fail: the round's start alone (nobody waits for it: it is kept for the
    # next write), then the turns with their model calls (the calls waiting for it fail)
    store.fail = 2
    with pytest.raises(RolecastError) as failure:
        await team.run(n_round=1)
    chain, error = [], failure.value
    while error is not None:
        chain.append(type(error))
        error = error.__cause__ or error.__context__
    assert StoreError in chain
    assert SEEN == []  # no answer was used
    # nothing was lost: the failed write's events went with the next one (the run's stop)
    calls = list(store.events(team.run_id, [LLM_CALL]))
    assert sorted(e.role for e in calls) == ["R0", "R1", "R2"]


async def test_a_cancelled_caller_stops_waiting_without_cancelling_the_others_write():
    store = SpyStore()
    log = RunLog(store, "r")
    first = asyncio.ensure_future(log.commit_call("A", {"n": 1}))
    second = asyncio.ensure_future(log.commit_call("B", {"n": 2}))
    await asyncio.sleep(0)  # both are waiting for the write scheduled at the end of this turn
    first.cancel()
    await second
    with pytest.raises(asyncio.CancelledError):
        await first
    assert [e.role for e in store.events("r", [LLM_CALL])] == ["A", "B"]

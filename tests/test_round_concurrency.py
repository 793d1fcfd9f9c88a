"""A round's turns run side by side, but at most ``max_concurrent_turns`` at once: a round of many roles
does not hold a task per role; the history, failures and cancellation are as when all ran at once."""

from __future__ import annotations

import asyncio

import pytest

from actions import Action, UserRequirement
from environment import Environment, Team
from memory import Message
from rolecast.errors import ActionFailed, UsageError
from rolecast.testing import FunctionLLM
from roles import Role

#: the most tasks alive at once while turns ran (asyncio.all_tasks(), read inside the turns)
SEEN: list[int] = []


class Say(Action):
    """Waits a little (a model call would), notes how many tasks exist, then answers."""

    async def run(self, history: list[Message]) -> str:
        await asyncio.sleep(0)
        SEEN.append(len(asyncio.all_tasks()))
        await asyncio.sleep(0)
        owner = self.owner.name if self.owner is not None else "?"
        if history and history[-1].content == f"fail {owner}":
            raise RuntimeError(f"{owner} broke")
        if history and history[-1].content == f"cancel {owner}":
            raise asyncio.CancelledError()
        return f"{owner} read {history[-1].content if history else ''}"


def team_of(n: int, **kw: object) -> Team:
    team = Team(llm=FunctionLLM(lambda m: "unused"), store=None, **kw)  # type: ignore[arg-type]
    team.hire([Role(name=f"r{i}", profile="member", actions=[Say], watch=[UserRequirement]) for i in range(n)])
    return team


def said(team: Team) -> list[str]:
    return [m.content for m in team.env.history.get() if m.sent_from != "user"]


async def test_a_round_of_2000_roles_holds_no_more_tasks_than_the_pool_and_says_the_same():
    SEEN.clear()
    bounded = team_of(2000, max_concurrent_turns=64)
    await bounded.run(n_round=1, idea="hello")
    assert len(SEEN) == 2000  # every role took its turn
    assert max(SEEN) <= 64 + 8  # the pool, plus the run's own few tasks (gather made 2,000 at once)
    SEEN.clear()
    at_once = team_of(2000, max_concurrent_turns=5000)
    await at_once.run(n_round=1, idea="hello")
    assert max(SEEN) > 1000  # (the check above can fail: all at once, the turns do hold a task each)
    assert said(bounded) == said(at_once) == [f"r{i} read hello" for i in range(2000)]


def test_one_turn_at_a_time_gives_the_same_history_over_rounds():
    def run(limit: int) -> list[tuple[str, str, tuple[str, ...]]]:
        env = Environment(max_concurrent_turns=limit)
        env.context.set_llm(FunctionLLM(lambda m: "unused"))
        roles = [Role(name=f"r{i}", actions=[Say], watch=[UserRequirement, Say]) for i in range(12)]
        env.add_roles(roles)
        env.publish_message(Message("start", cause_by=UserRequirement))
        asyncio.run(env.run(k=3))
        return [(m.sent_from, m.content, tuple(sorted(m.send_to))) for m in env.history.get()]

    assert run(1) == run(5) == run(100)


async def test_a_failing_turn_fails_the_round_after_the_others_finished():
    team = team_of(50, max_concurrent_turns=4)
    with pytest.raises(ActionFailed, match="r7 broke"):
        await team.run(n_round=1, idea="fail r7")
    assert len(said(team)) == 49  # every other role's message was delivered


async def test_on_error_continue_records_the_failure_and_the_others_go_on():
    team = team_of(50, max_concurrent_turns=4, on_error="continue")
    await team.run(n_round=1, idea="fail r3")
    assert len(team.env.errors) == 1 and "r3 broke" in str(team.env.errors[0])
    assert len(said(team)) == 49


async def test_a_cancelled_turn_stops_the_round_and_the_roles_not_started_keep_their_news():
    team = team_of(20, max_concurrent_turns=2)
    with pytest.raises(asyncio.CancelledError):
        await team.run(n_round=1, idea="cancel r5")
    spoke = {m.sent_from for m in team.env.history.get() if m.sent_from != "user"}
    assert spoke and spoke <= {f"r{i}" for i in range(7)}  # those running or done; none started after r5
    waiting = [team.env.roles[f"r{i}"] for i in range(8, 20)]
    assert all(not role.is_idle for role in waiting)  # never started: the idea still in their inbox


async def test_cancelling_the_run_cancels_the_turns_running_and_starts_no_more():
    started: list[str] = []
    gate, three_started = asyncio.Event(), asyncio.Event()

    class Wait(Action):
        async def run(self, history: list[Message]) -> str:
            started.append(self.owner.name)
            if len(started) == 3:
                three_started.set()
            await gate.wait()
            return "done"

    team = Team(llm=FunctionLLM(lambda m: "unused"), store=None, max_concurrent_turns=3)
    team.hire([Role(name=f"w{i}", actions=[Wait], watch=[UserRequirement]) for i in range(10)])
    run = asyncio.ensure_future(team.run(n_round=1, idea="go"))
    await three_started.wait()
    for _ in range(5):
        await asyncio.sleep(0)  # (were a fourth turn to start, it would have by now)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    gate.set()
    await asyncio.sleep(0)
    assert started == ["w0", "w1", "w2"]
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []  # none left behind


@pytest.mark.parametrize("value", [0, -1, 2.5, "many", True])
def test_a_pool_size_that_is_no_whole_number_of_at_least_one_is_a_usage_error(value: object):
    with pytest.raises(UsageError, match="max_concurrent_turns"):
        Team(store=None, max_concurrent_turns=value)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="max_concurrent_turns"):
        Environment(max_concurrent_turns=value)

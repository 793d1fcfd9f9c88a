"""The bus and the team: routing, rounds, concurrency, failures, budget."""

from __future__ import annotations

import asyncio
import time

import pytest

from actions import Action, UserRequirement
from environment import Environment, Team
from memory import Message
from rolecast.errors import ActionFailed, BudgetExceeded, NestedEventLoopError, ScriptExhausted, UsageError
from rolecast.testing import FunctionLLM, ScriptedLLM
from roles import Role


class Speak(Action):
    async def run(self, history):
        return await self._aask(history[-1].content if history else "")


class Listen(Action):
    async def run(self, history):
        return f"heard {history[-1].content}"


def echo_llm(**kw) -> FunctionLLM:
    return FunctionLLM(lambda messages: "said: " + messages[-1]["content"], **kw)


def make_role(name: str, watch, action, **kw) -> Role:
    return Role(name=name, profile=name.lower(), actions=[action], watch=watch, **kw)


async def test_a_message_reaches_exactly_the_roles_it_is_addressed_to_and_that_watch_it():
    env = Environment()
    a = make_role("A", [UserRequirement], Listen())
    b = make_role("B", [UserRequirement], Listen())
    c = make_role("C", [Speak], Listen())  # does not watch UserRequirement
    env.add_roles([a, b, c])
    env.publish_message(Message("for B only", cause_by=UserRequirement, send_to="B"))
    await env.run()
    assert a.get_memories() == [] and c.get_memories() == []
    assert [m.content for m in b.get_memories()] == ["for B only", "heard for B only"]
    env.publish_message(Message("for all", cause_by=UserRequirement))
    await env.run()
    assert [m.content for m in a.get_memories()] == ["for all", "heard for all"]
    assert c.get_memories() == []  # it got the message but does not watch it


async def test_send_to_a_profile_reaches_that_role():
    env = Environment()
    tester = make_role("Bob", [UserRequirement], Listen())
    env.add_role(tester)
    env.publish_message(Message("hi tester", cause_by="Anything", send_to="bob"))
    await env.run()
    assert tester.get_memories()[0].content == "hi tester"


async def test_a_role_never_reacts_to_its_own_broadcast():
    env = Environment()
    # watches its own action: without the rule it would talk to itself forever
    chatty = Role(name="Chatty", actions=[Listen()], watch=[Listen, UserRequirement], llm=ScriptedLLM([]))
    env.add_role(chatty)
    env.publish_message(Message("start", cause_by=UserRequirement))
    await env.run(k=5)
    assert [m.content for m in env.history.get()] == ["start", "heard start"]
    assert env.is_idle


async def test_messages_sent_while_a_role_acts_wait_for_its_next_turn():
    env = Environment()
    started = asyncio.Event()

    class Slow(Action):
        async def run(self, history):
            started.set()
            await asyncio.sleep(0.05)
            return f"slow saw {len(history)}"

    slow = make_role("Slow", [UserRequirement], Slow())
    env.add_role(slow)
    env.publish_message(Message("first", cause_by=UserRequirement))
    task = asyncio.create_task(env.run())
    await started.wait()
    env.publish_message(Message("second", cause_by=UserRequirement))  # arrives mid-turn
    await task
    assert [m.content for m in slow.get_memories()] == ["first", "slow saw 1"]
    assert not slow.is_idle  # "second" waits in the inbox
    await env.run()
    assert [m.content for m in slow.get_memories()][-2:] == ["second", "slow saw 3"]


async def test_roles_with_news_act_concurrently_in_one_round():
    llm = echo_llm(delay=0.2)
    team = Team(llm=llm)
    team.hire([make_role(f"R{i}", [UserRequirement], Speak()) for i in range(10)])
    team.run_project("go")
    t0 = time.perf_counter()
    await team.env.run()
    elapsed = time.perf_counter() - t0
    assert len(llm.calls) == 10
    assert elapsed < 1.0  # ten 0.2 s calls one after another would take 2 s


async def test_team_runs_a_pipeline_round_by_round_and_stops_when_idle():
    team = Team(llm=echo_llm())
    coder = make_role("Coder", [UserRequirement], Speak())
    tester = make_role("Tester", [Speak], Listen())
    team.hire([coder, tester])
    history = await team.run(n_round=10, idea="add numbers")
    assert [m.sent_from for m in history] == ["user", "Coder", "Tester"]
    assert history[1].content == "said: add numbers"
    assert history[2].content == "heard said: add numbers"
    assert team.env.is_idle
    assert team.idea == "add numbers"


async def test_n_round_bounds_the_run():
    # two roles that answer each other forever
    a = make_role("A", [UserRequirement, Listen], Speak())
    b = make_role("B", [Speak], Listen())
    team = Team(llm=echo_llm(), roles=[a, b])
    history = await team.run(n_round=3, idea="ping")
    assert len(history) == 1 + 3  # the idea, then one message per round


async def test_run_project_send_to_addresses_the_first_speaker():
    team = Team(llm=echo_llm())
    first = make_role("First", [UserRequirement], Speak())
    second = make_role("Second", [UserRequirement], Speak())
    team.hire([first, second])
    history = await team.run(n_round=1, idea="topic", send_to="First")
    assert [m.sent_from for m in history] == ["user", "First"]


async def test_a_failing_role_stops_the_team_with_a_typed_error_by_default():
    class Boom(Action):
        async def run(self, history):
            raise RuntimeError("disk full")

    ok = make_role("Ok", [UserRequirement], Speak())
    bad = make_role("Bad", [UserRequirement], Boom())
    team = Team(llm=echo_llm(), roles=[ok, bad])
    with pytest.raises(ActionFailed) as info:
        await team.run(n_round=3, idea="go")
    assert info.value.role == "Bad" and isinstance(info.value.__cause__, RuntimeError)
    # the other role finished its turn: nothing it did is lost
    assert [m.sent_from for m in team.env.history.get()] == ["user", "Ok"]


async def test_on_error_continue_records_the_failure_and_goes_on():
    class Boom(Action):
        async def run(self, history):
            raise RuntimeError("flaky")

    ok = make_role("Ok", [UserRequirement], Speak())
    bad = make_role("Bad", [UserRequirement], Boom())
    after = make_role("After", [Speak], Listen())
    team = Team(llm=echo_llm(), roles=[ok, bad, after], on_error="continue")
    history = await team.run(n_round=3, idea="go")
    assert [m.sent_from for m in history] == ["user", "Ok", "After"]
    # its input is redelivered each round (at-least-once), so it fails each round and is recorded each time
    assert len(team.env.errors) == 3 and all(isinstance(e, ActionFailed) for e in team.env.errors)
    assert [m.content for m in bad.rc.msg_buffer.pop_all()] == ["go"]  # still waiting, not lost


async def test_a_failed_turn_loses_nothing_its_input_is_read_again_next_round():
    attempts = []

    class Flaky(Action):
        async def run(self, history):
            attempts.append(history[-1].content)
            if len(attempts) == 1:
                raise RuntimeError("the first try fails")
            return f"done with {history[-1].content}"

    flaky = make_role("Flaky", [UserRequirement], Flaky())
    team = Team(llm=echo_llm(), roles=[flaky], on_error="continue")
    history = await team.run(n_round=3, idea="the task")
    assert attempts == ["the task", "the task"]
    assert [m.content for m in history] == ["the task", "done with the task"]
    assert [m.content for m in flaky.rc.memory.get()] == ["the task", "done with the task"]  # remembered once


async def test_budget_is_checked_before_every_call_not_only_between_rounds():
    # gpt-4o: $2.5 / Mtok in. Each prompt here is ~2500 tokens → ~$0.00625 a call.
    long_prompt = "x" * 10_000
    llm = FunctionLLM(lambda messages: "ok", model="gpt-4o")

    class Expensive(Action):
        async def run(self, history):
            for _ in range(5):  # five calls within ONE action, one round
                await self._aask(long_prompt)
            return "done"

    # each call reserves its worst case: the prompt and its max_tokens (the budget is a hard cap)
    team = Team(llm=llm, roles=[make_role("Spender", [UserRequirement], Expensive(settings={"max_tokens": 5}))])
    team.invest(0.015)
    with pytest.raises(BudgetExceeded) as info:
        await team.run(n_round=1, idea="spend")
    err = info.value
    assert err.limit == 0.015
    assert err.spent <= 0.015  # stopped before passing the limit
    assert len(llm.calls) == 2  # the third call would have passed it
    assert "spent $" in str(err) and "of $0.015" in str(err)
    assert team.cost_manager.by_role["Spender"].calls == 2


async def test_budget_error_is_not_swallowed_by_on_error_continue():
    llm = FunctionLLM(lambda messages: "ok", model="gpt-4o")
    team = Team(llm=llm, roles=[make_role("S", [UserRequirement], Speak())], on_error="continue")
    team.invest(0.0)
    with pytest.raises(BudgetExceeded):
        await team.run(n_round=2, idea="x" * 100)
    assert llm.calls == []


async def test_cost_is_counted_per_role_and_per_team():
    llm = FunctionLLM(lambda messages: "y" * 400, model="gpt-4o-mini")
    a = make_role("A", [UserRequirement], Speak())
    b = make_role("B", [UserRequirement], Speak())
    team = Team(llm=llm, roles=[a, b])
    await team.run(n_round=1, idea="z" * 400)
    cm = team.cost_manager
    assert set(cm.by_role) == {"A", "B"}
    assert cm.by_role["A"].completion_tokens == 100
    assert cm.total.calls == 2
    assert cm.total_cost == pytest.approx(cm.by_role["A"].cost + cm.by_role["B"].cost)
    assert cm.total_cost > 0


async def test_named_services_let_an_action_pick_its_model():
    fast = FunctionLLM(lambda m: "fast")
    default = FunctionLLM(lambda m: "default")
    quick = Speak(service="fast")
    missing = Listen()

    class Named(Action):
        async def run(self, history):
            return await self._aask("hi")

    team = Team(llm=default, llms={"fast": fast})
    team.hire([make_role("Q", [UserRequirement], quick),
               make_role("M", [UserRequirement], Named(service="nope")),
               make_role("N", [UserRequirement], missing)])
    history = await team.run(n_round=1, idea="go")
    by_sender = {m.sent_from: m.content for m in history}
    assert by_sender["Q"] == "fast"
    assert by_sender["M"] == "default"  # a missing service falls back to the default


async def test_role_and_action_models_override_the_team_default():
    team_llm = FunctionLLM(lambda m: "team")
    role_llm = FunctionLLM(lambda m: "role")
    action_llm = FunctionLLM(lambda m: "action")
    team = Team(llm=team_llm)
    team.hire([
        make_role("T", [UserRequirement], Speak()),
        make_role("R", [UserRequirement], Speak(), llm=role_llm),
        make_role("A", [UserRequirement], Speak(llm=action_llm), llm=role_llm),
    ])
    history = await team.run(n_round=1, idea="go")
    assert {m.sent_from: m.content for m in history[1:]} == {"T": "team", "R": "role", "A": "action"}


def test_run_sync_works_from_a_script():
    team = Team(llm=echo_llm(), roles=[make_role("A", [UserRequirement], Speak())])
    history = team.run_sync(n_round=2, idea="hello")
    assert [m.content for m in history] == ["hello", "said: hello"]


async def test_run_sync_refuses_to_nest_in_a_running_loop():
    team = Team(llm=echo_llm())
    with pytest.raises(NestedEventLoopError):
        team.run_sync(n_round=1, idea="x")


def test_duplicate_role_names_are_refused():
    env = Environment()
    env.add_role(Role(name="A"))
    with pytest.raises(UsageError):
        env.add_role(Role(name="A"))


async def test_model_failures_surface_from_team_run_with_their_type():
    team = Team(llm=ScriptedLLM([]), roles=[make_role("A", [UserRequirement], Speak())])
    with pytest.raises(ScriptExhausted):
        await team.run(n_round=1, idea="x")

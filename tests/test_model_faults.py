"""The model boundary under faults: a loopback server answering badly, and a budget that holds.

Every malformed answer becomes a typed :class:`~rolecast.errors.LLMError` (retried when
it may be transient), a stream that does not end is never taken for an answer, calls
have a deadline as a whole, ``Retry-After`` is honoured (capped), every attempt is
metered, and concurrent calls cannot pass a budget together.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import FakeOpenAIServer, Reply, completion_body, fast_openai_client

from actions import Action
from environment import Team
from memory import Message
from rolecast.accounting.cost import CostManager, max_prompt_tokens
from rolecast.accounting.metering import metered
from rolecast.context import Context
from rolecast.errors import (
    ActionFailed,
    BudgetExceeded,
    DeadlineExceeded,
    LLMEmptyAnswerError,
    LLMError,
    LLMIncompleteError,
    LLMRateLimitError,
    LLMResponseError,
    LLMTimeoutError,
    RolecastError,
)
from rolecast.llm import Completion, Usage
from rolecast.llm.openai.provider import OpenAILLM
from rolecast.testing import FunctionLLM, ScriptedLLM
from roles import Role

BAD_BODIES = {
    "malformed-json": Reply(raw=b'{"choices": [', content_type="application/json"),
    "html": Reply(raw=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
    "plain-text": Reply(raw=b"upstream connect error", content_type="text/plain"),
    "empty-choices": Reply(body={**completion_body("x"), "choices": []}),
    "json-not-an-object": Reply(raw=b"[1, 2]"),
}


# the tests here ask an OpenAI-compatible server each starts on 127.0.0.1
pytestmark = [pytest.mark.allow_model_requests, pytest.mark.usefixtures("close_fast_clients")]


make_llm = fast_openai_client


# ------------------------------------------------------------------ bad bodies
@pytest.mark.parametrize("reply", list(BAD_BODIES.values()), ids=list(BAD_BODIES))
async def test_an_unusable_body_is_a_typed_error_after_retries_each_attempt_metered(
    fake_openai: FakeOpenAIServer, reply: Reply
) -> None:
    fake_openai.handler = lambda request: reply
    cm = CostManager()
    with metered(cm, "Ann"), pytest.raises(LLMResponseError):
        await make_llm(fake_openai.url).ask("hi")
    assert len(fake_openai.requests) == 3  # transient: retried, then raised
    assert cm.total.failed == 3 and cm.total.calls == 0  # every attempt counted


@pytest.mark.parametrize("reply", list(BAD_BODIES.values()), ids=list(BAD_BODIES))
async def test_an_unusable_body_to_a_stream_request_is_a_typed_error(
    fake_openai: FakeOpenAIServer, reply: Reply,
) -> None:
    fake_openai.handler = lambda request: reply
    with pytest.raises(LLMResponseError):
        async for _ in make_llm(fake_openai.url).stream("hi"):
            pass


async def test_a_null_answer_is_an_empty_answer_error_and_is_retried(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.push(Reply(text=None), Reply(text="Hello"))
    cm = CostManager()
    with metered(cm):
        assert await make_llm(fake_openai.url).ask("hi") == "Hello"
    assert cm.total.failed == 1 and cm.total.calls == 1
    fake_openai.handler = lambda request: Reply(text=None)
    with pytest.raises(LLMEmptyAnswerError):
        await make_llm(fake_openai.url).ask("hi")


async def test_a_null_answer_does_not_let_a_team_finish_with_empty_messages(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.handler = lambda request: Reply(text=None)

    class Say(Action):
        async def run(self, history: list[Message]) -> str:  # type: ignore[override]
            return await self._aask("say something")

    team = Team(llm=make_llm(fake_openai.url, max_retries=0), roles=[Role(name="Bob", actions=[Say()])], store=None)
    with pytest.raises(RolecastError) as info:
        await team.run(n_round=1, idea="go")
    assert isinstance(info.value, LLMEmptyAnswerError) or isinstance(info.value.__cause__, LLMEmptyAnswerError)
    assert all(m.content for m in team.env.history.get() if m.sent_from == "Bob")


# ------------------------------------------------------------------ streams
async def test_a_stream_cut_before_it_ends_is_incomplete_never_a_short_answer(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.push(Reply(text="Hello world", chunks=["Hello", " wor"], cut=True))
    got: list[str] = []
    cm = CostManager()
    with metered(cm), pytest.raises(LLMIncompleteError) as info:
        async for piece in make_llm(fake_openai.url).stream("hi"):
            got.append(piece)
    assert info.value.partial == "Hello wor" == "".join(got)
    assert cm.total.failed == 1 and cm.total.completion_tokens > 0  # the partial answer was paid for


@pytest.mark.parametrize(
    "lines",
    [
        [b"data: {not json", b""],
        [b"garbage line", b""],
        [b'data: {"choices": "x"}', b""],
        [b'data: {"choices": [{"index": 0, "delta": "x"}], "usage": {"prompt_tokens": "many"}}', b""],
        [b'data: {"error": {"message": "overloaded"}}', b""],
    ],
    ids=["not-json", "not-sse", "choices-not-a-list", "bad-usage", "error-event"],
)
async def test_garbled_server_sent_events_are_typed_errors(fake_openai: FakeOpenAIServer, lines: list[bytes]) -> None:
    fake_openai.push(Reply(sse_lines=lines))
    with pytest.raises(LLMError):
        async for _ in make_llm(fake_openai.url).stream("hi"):
            pass


async def test_a_stream_of_nothing_is_an_error_not_an_empty_answer(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.push(Reply(sse_lines=[b"data: [DONE]", b""]))
    with pytest.raises(LLMEmptyAnswerError):
        async for _ in make_llm(fake_openai.url).stream("hi"):
            pass


# ------------------------------------------------------------------ deadlines
async def test_a_trickling_server_cannot_stretch_a_call_past_its_timeout(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.push(Reply(trickle=0.05))  # ~300 bytes: about 15 s, every read well within its timeout
    began = time.monotonic()
    with pytest.raises(LLMTimeoutError):
        await make_llm(fake_openai.url, timeout=1.0, max_retries=0).ask("hi")
    assert time.monotonic() - began < 4  # 24.5 s before the fix, with a 2 s timeout


async def test_a_trickling_stream_cannot_stretch_a_call_past_its_timeout(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.push(Reply(chunks=["a"] * 100, trickle=0.05))
    began = time.monotonic()
    with pytest.raises(LLMTimeoutError):
        async for _ in make_llm(fake_openai.url, timeout=1.0, max_retries=0).stream("hi"):
            pass
    assert time.monotonic() - began < 4


class Slow(Action):
    delay: float = 5.0

    async def run(self, history: list[Message]) -> str:  # type: ignore[override]
        await asyncio.sleep(self.delay)
        return "late"


async def test_a_round_past_its_deadline_is_a_deadline_error() -> None:
    team = Team(llm=ScriptedLLM([]), roles=[Role(name="Sam", actions=[Slow()])], store=None, round_timeout=0.3)
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="round 1"):
        await team.run(n_round=3, idea="go")
    assert time.monotonic() - began < 3


async def test_a_run_past_its_deadline_is_a_deadline_error() -> None:
    team = Team(llm=ScriptedLLM([]), roles=[Role(name="Sam", actions=[Slow()])], store=None, run_timeout=0.5)
    with pytest.raises(DeadlineExceeded, match="the run"):
        await team.run(n_round=50, idea="go")


async def test_the_nearer_deadline_is_the_one_named() -> None:
    """A run deadline nearer than the round's fires first, and the error says it was the run's."""
    team = Team(llm=ScriptedLLM([]), roles=[Role(name="Sam", actions=[Slow()])], store=None,
                round_timeout=30, run_timeout=0.3)
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="the run"):
        await team.run(n_round=3, idea="go")
    assert time.monotonic() - began < 3


class TimesOut(Action):
    async def run(self, history: list[Message]) -> str:  # type: ignore[override]
        raise asyncio.TimeoutError("the tool's own timeout")


async def test_a_timeout_inside_a_round_is_not_the_rounds_deadline() -> None:
    """An action's own timeout, long before the round's deadline, is that action's failure."""
    team = Team(llm=ScriptedLLM([]), roles=[Role(name="Sam", actions=[TimesOut()])], store=None, round_timeout=30)
    with pytest.raises(ActionFailed) as caught:
        await team.run(n_round=3, idea="go")
    assert not isinstance(caught.value, DeadlineExceeded)
    assert isinstance(caught.value.__cause__, asyncio.TimeoutError)


# ------------------------------------------------------------------ retries
async def test_retry_after_is_honoured(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.push(Reply(status=429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "1"}), Reply())
    assert await make_llm(fake_openai.url).ask("hi") == "Hello world"
    gap = fake_openai.requests[1]["_t"] - fake_openai.requests[0]["_t"]
    assert 0.9 <= gap < 3


async def test_retry_after_is_capped(fake_openai: FakeOpenAIServer) -> None:
    too_long = Reply(status=429, body={"error": {"message": "x"}}, headers={"Retry-After": "3600"})
    fake_openai.handler = lambda request: too_long
    began = time.monotonic()
    with pytest.raises(LLMRateLimitError):
        await make_llm(fake_openai.url, retry_after_max=0.2).ask("hi")
    assert time.monotonic() - began < 3


async def test_retried_attempts_are_each_metered_and_logged_as_failures(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.push(Reply(status=500, body={"error": {"message": "boom"}}), Reply(status=503, body={}), Reply())
    cm = CostManager()
    with metered(cm, "Ann"):
        await make_llm(fake_openai.url).ask("hi")
    assert (cm.total.calls, cm.total.failed, cm.by_role["Ann"].attempts) == (1, 2, 3)
    assert "(+2 failed)" in cm.summary()


# ------------------------------------------------------------------ budget
MODEL = "gpt-4o-mini"
PROMPT = "Say something about the project. " * 10


def _reservation(max_tokens: int) -> float:
    # what the seam reserves: the prompt (with its tools and schema, none here) and max_tokens
    return CostManager().cost_of(MODEL, max_prompt_tokens(PROMPT + json.dumps([None, None])), max_tokens)


async def test_concurrent_calls_cannot_pass_the_budget_together() -> None:
    budget = 5.5 * _reservation(8)
    cm = CostManager(max_budget=budget)
    llm = FunctionLLM(lambda messages: "ok", model=MODEL, delay=0.05)

    async def one() -> str:
        return await llm.ask(PROMPT, settings={"max_tokens": 8})

    with metered(cm):
        results = await asyncio.gather(*(one() for _ in range(20)), return_exceptions=True)
    # at least the calls whose worst case fits (the first call to a model runs alone, see the next
    # tests, and is charged its true cost, which may leave room for one more), and never past the cap
    assert sum(r == "ok" for r in results) >= 5
    assert all(r == "ok" or isinstance(r, BudgetExceeded) for r in results)
    assert cm.total_cost <= budget and cm.reserved == 0


async def test_twenty_roles_cannot_pass_a_team_budget_even_with_long_answers() -> None:
    class Speak(Action):
        async def run(self, history: list[Message]) -> str:  # type: ignore[override]
            return await self.llm.ask(PROMPT, settings={"max_tokens": 8})

    llm = FunctionLLM(lambda messages: "word " * 4000, model=MODEL, delay=0.05)  # 20,000 characters
    team = Team(llm=llm, roles=[Role(name=f"r{i}", actions=[Speak()]) for i in range(20)], store=None)
    budget = 5 * _reservation(8)
    team.invest(budget)
    with pytest.raises(RolecastError):
        await team.run(n_round=3, idea="go")
    assert team.cost_manager.total_cost <= budget  # 372x before, with long answers


async def test_an_answer_past_its_max_tokens_overruns_by_its_own_excess_only() -> None:
    excess_usage = Usage(100, 5000)  # a double that ignores max_tokens
    llm = FunctionLLM(lambda messages: Completion("x", excess_usage), model=MODEL)
    budget = 3 * _reservation(8)
    cm = CostManager(max_budget=budget)
    with metered(cm):
        for _ in range(5):
            try:
                await llm.ask(PROMPT, settings={"max_tokens": 8})
            except BudgetExceeded:
                break
    one_answer = cm.cost_of(MODEL, 100, 5000)
    assert len(llm.calls) == 1 and cm.total_cost <= budget + one_answer


async def test_concurrent_answers_past_their_max_tokens_overrun_by_one_answer_only() -> None:
    """A model that ignores max_tokens, called by 20 roles at once: the first call runs alone until
    the model is seen to keep within its reservation, so the overrun is one answer's, not 20."""
    llm = FunctionLLM(lambda messages: Completion("x", Usage(100, 5000)), model=MODEL, delay=0.02)
    budget = 5 * _reservation(8)
    cm = CostManager(max_budget=budget)

    async def one() -> str:
        return await llm.ask(PROMPT, settings={"max_tokens": 8})

    with metered(cm):
        results = await asyncio.gather(*(one() for _ in range(20)), return_exceptions=True)
    assert len(llm.calls) == 1 and sum(isinstance(r, BudgetExceeded) for r in results) == 19
    assert cm.total_cost <= budget + cm.cost_of(MODEL, 100, 5000)  # was 3 answers' excess: 135x the budget
    assert cm.honours_max_tokens == {MODEL: False} and cm.reserved == 0


async def test_a_model_that_keeps_within_max_tokens_is_then_called_concurrently() -> None:
    in_flight, most = 0, 0

    async def answer(messages: object) -> str:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return "ok"

    llm = FunctionLLM(answer, model=MODEL)
    cm = CostManager(max_budget=1000 * _reservation(8))
    with metered(cm):
        await llm.ask(PROMPT, settings={"max_tokens": 8})  # the first call runs alone and proves the model
        assert most == 1 and cm.honours_max_tokens == {MODEL: True}
        await asyncio.gather(*(llm.ask(PROMPT, settings={"max_tokens": 8}) for _ in range(10)))
    assert most == 10  # no budget wait once trusted


async def test_every_call_has_a_finite_max_tokens(fake_openai: FakeOpenAIServer) -> None:
    await make_llm(fake_openai.url).ask("hi")
    assert fake_openai.requests[-1]["max_tokens"] == OpenAILLM.default_max_tokens
    llm = ScriptedLLM(["a", "0"])
    await llm.ask("x")
    await llm.choose("pick", 2)
    assert [c.settings.max_tokens for c in llm.calls] == [4096, 32]


async def test_a_double_honours_max_tokens_like_a_server() -> None:
    llm = ScriptedLLM(["y" * 1000])
    completion = await llm.complete([{"role": "user", "content": "x"}], settings={"max_tokens": 5})
    assert completion.text == "y" * 20 and completion.finish_reason == "length"


def test_budget_exceeded_says_what_was_reserved() -> None:
    cm = CostManager(max_budget=0.001)
    held = cm.reserve(MODEL, 1000, 1000)
    with pytest.raises(BudgetExceeded) as info:
        cm.reserve(MODEL, 1000, 1000)
    assert info.value.reserved == held.amount and "reserved" in str(info.value)
    cm.settle(held, 10, 10)
    assert cm.reserved == 0 and cm.total.calls == 1


async def test_a_failed_call_of_any_model_is_metered() -> None:
    ctx = Context(cost_manager=CostManager())
    with ctx.scope("Zed"), pytest.raises(LLMTimeoutError):
        await ScriptedLLM([LLMTimeoutError("slow")]).ask("x")
    assert (ctx.cost_manager.by_role["Zed"].failed, ctx.cost_manager.total.calls) == (1, 0)
